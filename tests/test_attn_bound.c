/* tests/test_attn_bound.c: the a-posteriori bound of the binary64 attention reference
 * (lowp_attn_ref_f64_bounded) and the fast correctly rounded output (lowp_attn_rounded).
 *
 *   test_attn_bound [--full]
 *
 * On generated cases (QUICK_CASES, --full FULL_CASES; a function of the seed and the case
 * index only), every output:
 *   - lowp_attn_ref_f64_bounded's output equals lowp_attn_ref_f64's bit for bit;
 *   - where the exact output is finite and the bound finite, the distance from the
 *     oracle's enclosure of the exact value (lowp_attn_oracle_dist, 128+ bits) is within
 *     the bound: never outside; where the exact output is not finite, the bound is +Inf;
 *   - lowp_attn_rounded equals the oracle's binary32 bit for bit, and its counts add up.
 * On a 4096-key decode the bound decides >= 99% of the binary32 roundings, with the same
 * bits on one thread as on all.
 * Kinds: random (magnitudes 2^-30..2^30, head dims 1..128, GQA), large logits with
 * V = +-1 (scores up to 2^26: the score roundings dominate and the bound is nearly
 * attained), many equal scores, cancellation in V, tiny and huge values, NaN/Inf inputs,
 * and sequences longer than a chunk (the merge; one case in 64).
 * Sharpness: the worst |ref - exact| / bound over the large-logit kind must exceed 1/2, so
 * a bound made 2x too tight fails this test (checked by hand, README of this test's commit).
 * The seed (LOWP_SEED overrides) is printed first, the summary last.
 */
#include <check.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lowp/attn.h"
#include "lowp_test.h"

#define QUICK_CASES 10000
#define FULL_CASES 100000
#define N_KINDS 8

static const char *const kind_name[N_KINDS] = {"random", "large-logits", "equal-scores",
                                               "v-cancel", "tiny", "huge", "nonfinite",
                                               "long"};

static int full_tier;
static uint64_t seed;

typedef struct {
    lowp_attn_shape s;
    double *q, *k, *v;
    int kind;
} bcase;

static double pow2i(int e)
{
    return ldexp(1.0, e);
}

/* A case of the given index: a function of (seed, index). */
static void make_case(size_t idx, bcase *c)
{
    uint64_t st = lowp_test_stream(seed, 0xb0d, idx, 0);
    int kind = (int)(idx % N_KINDS);
    if (kind == 7 && (idx / N_KINDS) % 8 != 0)
        kind = 0; /* the long kind (the oracle's slowest) on one case in 64 */
    c->kind = kind;
    size_t nkv = (size_t)lowp_test_irange(&st, 1, 2), ratio = (size_t)lowp_test_irange(&st, 1, 3);
    size_t D = (size_t)(lowp_test_irange(&st, 0, 3) == 0 ? lowp_test_irange(&st, 1, 9)
                                                           : 8 * lowp_test_irange(&st, 1, 4));
    if (lowp_test_irange(&st, 0, 15) == 0)
        D = 128;
    size_t E = (size_t)lowp_test_irange(&st, 1, 6);
    size_t ctx = (size_t)lowp_test_irange(&st, 1, 48), q_len = (size_t)lowp_test_irange(&st, 1, 2);
    double sm = 0.0;
    switch (lowp_test_irange(&st, 0, 3)) {
    case 0:
        sm = 1.0;
        break;
    case 1:
        sm = -0.125;
        break;
    case 2:
        sm = 0.3 * (1 + lowp_test_urand(&st));
        break;
    default:
        break; /* 1/sqrt(D) */
    }
    if (kind == 1) { /* large logits: one query, D = 1, sm 1, 2..4 keys, V +-1 */
        nkv = 1;
        ratio = 1;
        D = 1;
        E = 1;
        ctx = (size_t)lowp_test_irange(&st, 2, 4);
        q_len = 1;
        sm = 1.0;
    }
    if (kind == 7) { /* longer than a chunk: the merge of 2..3 chunks */
        nkv = 1;
        ratio = 1;
        D = (size_t)lowp_test_irange(&st, 1, 4);
        E = 2;
        ctx = LOWP_ATTN_CHUNK + (size_t)lowp_test_irange(&st, 1, 2500);
        q_len = 1;
    }
    if (q_len > ctx)
        q_len = ctx;
    c->s = (lowp_attn_shape){q_len, nkv * ratio, nkv, D, E, ctx, ctx - q_len, sm};
    size_t nq = q_len * nkv * ratio * D, nk = ctx * nkv * D, nv = ctx * nkv * E;
    c->q = lowp_test_xmalloc(nq * sizeof(double));
    c->k = lowp_test_xmalloc(nk * sizeof(double));
    c->v = lowp_test_xmalloc(nv * sizeof(double));
    double mq = pow2i(lowp_test_irange(&st, -3, 2)), mk = pow2i(lowp_test_irange(&st, -3, 2));
    double mv = pow2i(lowp_test_irange(&st, -30, 30));
    if (kind == 0) {
        mq = pow2i(lowp_test_irange(&st, -8, 4));
        mk = pow2i(lowp_test_irange(&st, -8, 4));
    }
    for (size_t x = 0; x < nq; x++)
        c->q[x] = mq * lowp_test_gauss(&st);
    for (size_t x = 0; x < nk; x++)
        c->k[x] = mk * lowp_test_gauss(&st);
    for (size_t x = 0; x < nv; x++)
        c->v[x] = mv * lowp_test_gauss(&st);
    switch (kind) {
    case 1: {
        /* t_j = q k_j just above 2^p: its rounding error can reach u |t_j| */
        int p = lowp_test_irange(&st, 6, 26);
        c->q[0] = 1 + lowp_test_urand(&st);
        for (size_t j = 0; j < ctx; j++) {
            c->k[j] = pow2i(p) * (1 + 0.01 * lowp_test_urand(&st)) / c->q[0];
            c->v[j] = (j % 2) ? -1.0 : 1.0;
        }
        break;
    }
    case 2: /* many equal scores: repeated K rows, a few distinct */
        for (size_t j = 1; j < ctx; j++)
            if (lowp_test_irange(&st, 0, 4) != 0)
                memcpy(c->k + j * nkv * D, c->k, nkv * D * sizeof(double));
        break;
    case 3: /* cancellation in V: +-c pairs plus a small remainder */
        for (size_t j = 0; j < ctx; j++)
            for (size_t x = 0; x < nkv * E; x++)
                c->v[j * nkv * E + x] = (j % 2 ? -mv : mv) * (1 + 0x1p-30 * lowp_test_gauss(&st));
        break;
    case 4: /* tiny: products in the subnormal range */
        for (size_t x = 0; x < nq; x++)
            c->q[x] *= 0x1p-540;
        for (size_t x = 0; x < nk; x++)
            c->k[x] *= 0x1p-540;
        for (size_t x = 0; x < nv; x++)
            c->v[x] *= 0x1p-1000;
        break;
    case 5: /* huge V, and scores in the thousands */
        for (size_t x = 0; x < nv; x++)
            c->v[x] *= 0x1p900;
        for (size_t x = 0; x < nq; x++)
            c->q[x] *= 30;
        break;
    case 6: { /* one NaN or Inf in q, k or v */
        static const double sp[] = {NAN, INFINITY, -INFINITY};
        double val = sp[lowp_test_irange(&st, 0, 2)];
        int where = lowp_test_irange(&st, 0, 2);
        if (where == 0)
            c->q[(size_t)lowp_test_irange(&st, 0, (int)nq - 1)] = val;
        else if (where == 1)
            c->k[(size_t)lowp_test_irange(&st, 0, (int)nk - 1)] = val;
        else
            c->v[(size_t)lowp_test_irange(&st, 0, (int)nv - 1)] = val;
        break;
    }
    default:
        break;
    }
}

static void free_case(bcase *c)
{
    free(c->q);
    free(c->k);
    free(c->v);
}

typedef struct {
    unsigned long long outputs, finite_exact, bounded, outside, mismatch, rounded_bad, api_fail;
    double worst[N_KINDS]; /* max dist / bound per kind */
} tally;

static int same64(double a, double b)
{
    return (isnan(a) && isnan(b)) || lowp_f64_bits(a) == lowp_f64_bits(b);
}

static void check_case(size_t idx, tally *t)
{
    bcase c;
    make_case(idx, &c);
    size_t n = c.s.q_len * c.s.num_q_heads * c.s.vo_dim;
    double *ref = lowp_test_xmalloc(n * sizeof(double)), *out = lowp_test_xmalloc(n * sizeof(double));
    double *bnd = lowp_test_xmalloc(n * sizeof(double)), *dist = lowp_test_xmalloc(n * sizeof(double));
    double *o64 = lowp_test_xmalloc(n * sizeof(double));
    float *o32 = lowp_test_xmalloc(n * sizeof(float)), *r32 = lowp_test_xmalloc(n * sizeof(float));
    char why[256];
    lowp_attn_rounded_stats rs = {0, 0, 0, 0};
    if (lowp_attn_ref_f64(&c.s, c.q, c.k, c.v, ref, NULL, why, sizeof why) ||
        lowp_attn_ref_f64_bounded(&c.s, c.q, c.k, c.v, out, bnd, why, sizeof why) ||
        lowp_attn_oracle_dist(&c.s, c.q, c.k, c.v, out, dist, o32, o64, why, sizeof why) ||
        lowp_attn_rounded(&c.s, c.q, c.k, c.v, r32, &rs, why, sizeof why)) {
        t->api_fail++;
        lowp_test_say("attn_bound", "case %zu [%s]: %s\n", idx, kind_name[c.kind], why);
        n = 0;
    } else if (rs.outputs != n || rs.by_f64 + rs.by_oracle != n) {
        t->rounded_bad++;
    }
    for (size_t x = 0; x < n; x++) {
        t->outputs++;
        if (!same64(out[x], ref[x])) {
            t->mismatch++;
            lowp_test_say("attn_bound", "case %zu [%s]: out %zu bounded reference %a, reference %a\n",
                          idx, kind_name[c.kind], x, out[x], ref[x]);
        }
        if (lowp_f32_bits(r32[x]) != lowp_f32_bits(o32[x]) && !(isnan(r32[x]) && isnan(o32[x]))) {
            t->rounded_bad++;
            lowp_test_say("attn_bound", "case %zu [%s]: out %zu lowp_attn_rounded %a, oracle %a\n", idx,
                          kind_name[c.kind], x, (double)r32[x], (double)o32[x]);
        }
        if (!isfinite(o64[x])) {
            if (bnd[x] != INFINITY) {
                t->outside++;
                lowp_test_say("attn_bound", "case %zu [%s]: out %zu exact %g but bound %g\n", idx,
                              kind_name[c.kind], x, o64[x], bnd[x]);
            }
            continue;
        }
        t->finite_exact++;
        if (bnd[x] == INFINITY)
            continue;
        t->bounded++;
        /* no enclosure (underflowed weights): the rounded exact value and half its ulp */
        double d = isnan(dist[x]) ? fabs(out[x] - o64[x]) + 0.5 * (nextafter(fabs(o64[x]), INFINITY) - fabs(o64[x]))
                                  : dist[x];
        if (!(d <= bnd[x])) {
            t->outside++;
            lowp_test_say("attn_bound",
                          "case %zu [%s] (LOWP_SEED=%" PRIu64 "): out %zu ref %.17g exact %.17g "
                          "|diff| %.3g bound %.3g\n",
                          idx, kind_name[c.kind], seed, x, out[x], o64[x], d, bnd[x]);
        }
        if (bnd[x] > 0 && d / bnd[x] > t->worst[c.kind])
            t->worst[c.kind] = d / bnd[x];
    }
    free(ref);
    free(out);
    free(bnd);
    free(dist);
    free(o64);
    free(o32);
    free(r32);
    free_case(&c);
}

START_TEST(bound_holds)
{
    const size_t cases = full_tier ? FULL_CASES : QUICK_CASES;
    double t0 = lowp_test_now();
    tally t;
    memset(&t, 0, sizeof t);
    /* OpenMP over cases (the library's own parallel regions then run on one thread) */
#pragma omp parallel
    {
        tally my;
        memset(&my, 0, sizeof my);
#pragma omp for schedule(dynamic, 8)
        for (long i = 0; i < (long)cases; i++)
            check_case((size_t)i, &my);
#pragma omp critical
        {
            t.outputs += my.outputs;
            t.finite_exact += my.finite_exact;
            t.bounded += my.bounded;
            t.outside += my.outside;
            t.mismatch += my.mismatch;
            t.rounded_bad += my.rounded_bad;
            t.api_fail += my.api_fail;
            for (int k = 0; k < N_KINDS; k++)
                t.worst[k] = my.worst[k] > t.worst[k] ? my.worst[k] : t.worst[k];
        }
    }
    printf("attn_bound: %zu cases, %llu outputs (%llu exact finite, %llu with a finite bound), "
           "%llu outside the bound, %llu reference mismatches, %llu rounded mismatches; %.1f s\n",
           cases, t.outputs, t.finite_exact, t.bounded, t.outside, t.mismatch, t.rounded_bad,
           lowp_test_now() - t0);
    for (int k = 0; k < N_KINDS; k++)
        printf("  worst |ref - exact| / bound [%s]: %.3f\n", kind_name[k], t.worst[k]);
    ck_assert_msg(t.api_fail == 0, "%llu cases refused", t.api_fail);
    ck_assert_msg(t.outside == 0, "%llu outputs outside the bound", t.outside);
    ck_assert_msg(t.mismatch == 0, "%llu outputs differ from lowp_attn_ref_f64", t.mismatch);
    ck_assert_msg(t.rounded_bad == 0, "%llu lowp_attn_rounded mismatches", t.rounded_bad);
    /* not vacuous: most finite outputs are bounded, and the bound is nearly attained */
    ck_assert_msg(t.bounded * 10 >= t.finite_exact * 9, "only %llu of %llu finite outputs bounded",
                  t.bounded, t.finite_exact);
    ck_assert_msg(t.worst[1] > 0.5, "worst ratio %.3f: a bound 2x tighter would still pass", t.worst[1]);
}
END_TEST

/* The bound decides nearly every binary32 rounding on a long O(1) decode, where the
 * a-priori bound decides few (the reason for it): 4096 keys, 8 query heads, dim 128. */
START_TEST(bound_decides_long_decode)
{
    uint64_t st = lowp_test_stream(seed, 0xdec, 0, 0);
    lowp_attn_shape s = {1, 8, 2, 128, 128, 4096, 4095, 0.0};
    size_t nq = 8 * 128, nk = 4096 * 2 * 128, no = 8 * 128;
    double *q = lowp_test_xmalloc(nq * sizeof(double)), *k = lowp_test_xmalloc(nk * sizeof(double));
    double *v = lowp_test_xmalloc(nk * sizeof(double)), *o = lowp_test_xmalloc(no * sizeof(double));
    double *b = lowp_test_xmalloc(no * sizeof(double)), *ba = lowp_test_xmalloc(no * sizeof(double));
    for (size_t x = 0; x < nq; x++)
        q[x] = (float)lowp_test_gauss(&st);
    for (size_t x = 0; x < nk; x++) {
        k[x] = (float)lowp_test_gauss(&st);
        v[x] = (float)lowp_test_gauss(&st);
    }
    char why[256];
    ck_assert(lowp_attn_ref_f64_bounded(&s, q, k, v, o, b, why, sizeof why) == 0);
    ck_assert(lowp_attn_ref_bounds(&s, q, k, v, ba, why, sizeof why) == 0);
    size_t dec = 0, dec_a = 0;
    float f;
    for (size_t x = 0; x < no; x++) {
        dec += (size_t)lowp_attn_f32_decided(o[x], b[x], &f);
        dec_a += (size_t)lowp_attn_f32_decided(o[x], ba[x], &f);
    }
    printf("attn_bound: 4096-key decode: a-posteriori bound decides %zu of %zu outputs, "
           "a-priori %zu\n", dec, no, dec_a);
    ck_assert_msg(dec * 100 >= no * 99, "only %zu of %zu decided", dec, no);
    /* one thread gives the same bits (work items are merged in chunk order) */
    double *o1 = lowp_test_xmalloc(no * sizeof(double)), *b1 = lowp_test_xmalloc(no * sizeof(double));
    int nt = omp_get_max_threads();
    omp_set_num_threads(1);
    ck_assert(lowp_attn_ref_f64_bounded(&s, q, k, v, o1, b1, why, sizeof why) == 0);
    omp_set_num_threads(nt);
    ck_assert_msg(memcmp(o, o1, no * sizeof(double)) == 0 && memcmp(b, b1, no * sizeof(double)) == 0,
                  "the output or bound depends on the thread count");
    free(o1);
    free(b1);
    free(q);
    free(k);
    free(v);
    free(o);
    free(b);
    free(ba);
}
END_TEST

int main(int argc, char **argv)
{
    full_tier = lowp_test_tier("test_attn_bound", argc, argv);
    seed = lowp_test_seed("test_attn_bound", 20);
    printf("test_attn_bound: seed %" PRIu64 "%s\n", seed, full_tier ? " (full tier)" : "");
    Suite *s = suite_create("attn_bound");
    lowp_test_tcase(s, "bound", full_tier ? 7200 : 600,
                    LOWP_TESTS(bound_holds, bound_decides_long_decode));
    return lowp_test_main(s, LOWP_TEST_NOFORK);
}
