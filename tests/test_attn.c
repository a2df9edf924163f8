/* tests/test_attn.c: the attention references (lowp/attn.h, lowp/attn_paged.h).
 *
 *   test_attn [--full]
 *
 * 1. The binary64 reference against the MPFR oracle: |ref - exact| <= lowp_attn_ref_bound
 *    at every output (checked as |ref - oracle64| <= bound + half an ulp of oracle64, the
 *    oracle being exact rounded once), on generated cases: head dims 64, 96, 128, 192, 256,
 *    512 and QK 192 / VO 128; GQA ratios 1, 4, 5, 6, 12, 16; 12, 16, 20, 24 query heads;
 *    contexts 1..4096 (the long ones with one KV head); decode and extend (q_len 1..4,
 *    causal, any q_offset); sm_scale default, varied, negative; kinds: random (several
 *    magnitudes), one-hot (huge score gaps), all-equal scores, a needle key, V outliers
 *    +-1e4, tiny values (subnormal products), exact zero rows, NaN/Inf inputs (the result's
 *    class must be the oracle's: attn.h's rules), values with few significant bits (equal
 *    scores, exact cancellations), large scores. Quick tier: QUICK_CASES cases; --full:
 *    FULL_CASES (OpenMP over cases). The bulk bound equals the single-output bound.
 * 2. The oracle: prec 128 and 256 give identical binary32/binary64 bits (every 4th case);
 *    it equals an independent, plain MPFR evaluation at 3000 bits on small cases with
 *    extreme exponents; designed cancellation forces a Ziv retry and still agrees;
 *    outputs that are exactly rounding midpoints (equal scores) round to even; the thread
 *    count does not change a bit.
 * 3. The paged decode (lowp/attn_paged.h) on NVFP4 / MXFP4 / MXFP8 / FP8 E4M3 / E5M2 / BF16
 *    caches (NHD and HND, interleaved V scales, per-head global scales, shuffled pages,
 *    sequences longer than a chunk): equal bit for bit to lowp_attn_ref_f64 on the gathered
 *    K/V, same bound, any thread count, within the bound of the oracle on short sequences,
 *    NaN from a poisoned slot; bad arguments refused. --full adds a 128K-token decode.
 *
 * Failure lines read like TestFloat's: the case (its index, kind, shape; reproducible from
 * the seed), the output, got, expected, |diff| and bound. The seed (LOWP_SEED overrides)
 * is printed first, the summary "attn: N cases, M outputs, K failures" last. Cases are a
 * function of (seed, index) only, and lines are printed in case order, whatever the
 * thread count.
 */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <mpfr.h>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lowp/attn.h"
#include "lowp/attn_bench.h"
#include "lowp/attn_paged.h"
#include "lowp/block.h"
#include "lowp/cases.h"
#include "lowp/kvcache.h"
#include "lowp_test.h"

#define QUICK_CASES 300
#define FULL_CASES 12000
#define CASE_MSG 1600

static int full;
static uint64_t seed = LOWP_DEFAULT_SEED;
static unsigned long long total_cases, total_outputs, total_bad;

/* ---------------------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------------------- */

/* A failure line, at most LOWP_TEST_SAY_MAX per process (tests/lib). */
#define say(...) lowp_test_say("attn", __VA_ARGS__)

static size_t urange(uint64_t *s, size_t n) /* [0, n) */
{
    return (size_t)(lowp_test_urand(s) * (double)n);
}

/* Half an ulp of a binary64 value, rounded up to 2^-1074 in the subnormal range (where
 * half an ulp, 2^-1075, is not a binary64 number). */
static double half_ulp(double x)
{
    if (!isfinite(x))
        return 0.0;
    int e = x == 0.0 ? -1022 : ilogb(x);
    return e <= -1022 ? 0x1p-1074 : ldexp(1.0, e - 53);
}

/* Same value, or both NaN (the NaN payload is not specified). */
static int same64(double a, double b)
{
    return (isnan(a) && isnan(b)) || lowp_f64_bits(a) == lowp_f64_bits(b) ||
           (a == 0.0 && b == 0.0);
}

static int same32(float a, float b)
{
    return (isnan(a) && isnan(b)) || lowp_f32_bits(a) == lowp_f32_bits(b) ||
           (a == 0.0f && b == 0.0f);
}

/* ---------------------------------------------------------------------------------------
 * Generated cases
 * ------------------------------------------------------------------------------------- */

enum {
    K_RANDOM, K_ONEHOT, K_EQUAL, K_NEEDLE, K_VOUTLIER, K_TINY, K_ZERO, K_SPECIAL, K_QUANT,
    K_LARGE, K_COUNT
};
static const char *const kind_name[K_COUNT] = {"random", "one-hot", "equal-scores", "needle",
                                               "v-outliers", "tiny", "zero-rows", "nan-inf",
                                               "few-bits", "large-scores"};

typedef struct {
    lowp_attn_shape s;
    int kind;
    double *q, *k, *v;
    size_t nq, nk, nv, no;
    char label[200];
} acase;

static const size_t DIMS[][2] = {{64, 64}, {96, 96}, {128, 128}, {192, 192}, {256, 256},
                                 {512, 512}, {192, 128}};
static const size_t RATIOS[] = {1, 4, 5, 6, 12, 16};

static double few_bits(uint64_t *st) /* +-{0, .5, 1, 1.5, 2, 3, 4, 6} * 2^(-2..2) */
{
    static const double e2m1[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
    double x = e2m1[urange(st, 8)] * ldexp(1.0, (int)urange(st, 5) - 2);
    return urange(st, 2) ? -x : x;
}

static void case_free(acase *c)
{
    free(c->q);
    free(c->k);
    free(c->v);
    c->q = c->k = c->v = NULL;
}

/* Case idx: a pure function of (seed, idx). Its oracle cost is kept near a budget by the
 * context length (rows * keys * (qk_dim/16 + 2 vo_dim)). */
static void gen_case(size_t idx, acase *c)
{
    uint64_t st = lowp_test_stream(seed, 1, idx, 0);
    memset(c, 0, sizeof *c);
    c->kind = (int)(idx % K_COUNT);
    const size_t *dm = DIMS[urange(&st, sizeof DIMS / sizeof DIMS[0])];
    size_t D = dm[0], E = dm[1];
    size_t r = RATIOS[urange(&st, sizeof RATIOS / sizeof RATIOS[0])];
    static const size_t NQ[] = {12, 20, 24, 16};
    size_t nq = 0;
    for (int tries = 0; tries < 16 && nq == 0; tries++) {
        size_t x = NQ[urange(&st, 4)];
        if (x % r == 0)
            nq = x;
    }
    if (nq == 0)
        nq = r;
    int longctx = idx % 37 == 5;
    size_t q_len = urange(&st, 10) < 6 ? 1 : 2 + urange(&st, 3);
    if (longctx) { /* one KV head, one query token, up to 4K keys */
        nq = r > 4 ? 4 : r;
        r = nq;
        q_len = 1;
    }
    size_t nkv = nq / r;
    double unit = (double)D / 16 + 2.0 * (double)E + 30; /* ~0.1 us per key and row */
    double budget = longctx ? 8e6 : 1.5e5;
    double kmax = budget / (unit * (double)(q_len * nq));
    if (kmax < 1)
        kmax = 1;
    if (kmax > 4096)
        kmax = 4096;
    size_t ctx_max = (size_t)kmax;
    size_t ctx = q_len + urange(&st, ctx_max > q_len ? ctx_max - q_len + 1 : 1);
    if (longctx) /* the upper half: several chunks where the budget allows */
        ctx = ctx_max / 2 + 1 + urange(&st, ctx_max - ctx_max / 2);
    if (urange(&st, 8) == 0)
        ctx = q_len; /* a query sees only the keys of its own chunk */
    size_t q_offset = ctx - q_len;
    double sm = 0.0;
    switch (urange(&st, 8)) {
    case 0: sm = 0.05; break;
    case 1: sm = 1.0; break;
    case 2: sm = 3.5; break;
    case 3: sm = -0.7; break;
    case 4:
        sm = (0.5 + lowp_test_urand(&st)) / sqrt((double)D);
        break;
    default: sm = 0.0; break;
    }
    c->s = (lowp_attn_shape){q_len, nq, nkv, D, E, ctx, q_offset, sm};
    c->nq = q_len * nq * D;
    c->nk = ctx * nkv * D;
    c->nv = ctx * nkv * E;
    c->no = q_len * nq * E;
    c->q = lowp_test_xmalloc(c->nq * sizeof(double));
    c->k = lowp_test_xmalloc(c->nk * sizeof(double));
    c->v = lowp_test_xmalloc(c->nv * sizeof(double));
    double sq = 1, sk = 1, sv = 1;
    static const double MAG[] = {1, 0.01, 30, 1e-5, 1e5};
    if (c->kind == K_RANDOM) {
        sq = MAG[urange(&st, 5)];
        sk = MAG[urange(&st, 3)];
        sv = MAG[urange(&st, 5)];
    }
    for (size_t x = 0; x < c->nq; x++)
        c->q[x] = sq * lowp_test_gauss(&st);
    for (size_t x = 0; x < c->nk; x++)
        c->k[x] = sk * lowp_test_gauss(&st);
    for (size_t x = 0; x < c->nv; x++)
        c->v[x] = sv * lowp_test_gauss(&st);
    switch (c->kind) {
    case K_ONEHOT: /* score gaps of thousands: the softmax is one-hot up to exp(-1000) */
        for (size_t x = 0; x < c->nq; x++)
            c->q[x] *= 40;
        for (size_t x = 0; x < c->nk; x++)
            c->k[x] *= 40;
        break;
    case K_EQUAL: /* every key of a KV head the same row, or q = 0: all scores equal */
        if (urange(&st, 2)) {
            for (size_t j = 1; j < ctx; j++)
                memcpy(c->k + j * nkv * D, c->k, nkv * D * sizeof(double));
        } else {
            memset(c->q, 0, c->nq * sizeof(double));
        }
        break;
    case K_NEEDLE: { /* one visible key aligned with the group's first query head */
        size_t jn = urange(&st, q_offset + 1);
        for (size_t g = 0; g < nkv; g++)
            for (size_t d = 0; d < D; d++)
                c->k[(jn * nkv + g) * D + d] =
                    3.0 * c->q[(g * r) * D + d] + 0.1 * lowp_test_gauss(&st);
        break;
    }
    case K_VOUTLIER:
        for (size_t x = 0; x < c->nv; x++)
            if (urange(&st, 20) == 0)
                c->v[x] = urange(&st, 2) ? 1e4 : -1e4;
        break;
    case K_TINY: /* products and outputs in the subnormal range */
        for (size_t x = 0; x < c->nq; x++)
            c->q[x] *= 1e-160;
        for (size_t x = 0; x < c->nk; x++)
            c->k[x] *= 1e-160;
        for (size_t x = 0; x < c->nv; x++)
            c->v[x] = urange(&st, 3) ? c->v[x] * 1e-305 : c->v[x] * 0x1p-1070;
        break;
    case K_ZERO: /* exact zero rows, both signs */
        for (size_t i = 0; i < q_len * nq; i++)
            if (urange(&st, 3) == 0)
                for (size_t d = 0; d < D; d++)
                    c->q[i * D + d] = urange(&st, 2) ? 0.0 : -0.0;
        for (size_t j = 0; j < ctx * nkv; j++) {
            if (urange(&st, 3) == 0)
                for (size_t d = 0; d < D; d++)
                    c->k[j * D + d] = 0.0;
            if (urange(&st, 3) == 0)
                for (size_t e = 0; e < E; e++)
                    c->v[j * E + e] = urange(&st, 2) ? 0.0 : -0.0;
        }
        break;
    case K_SPECIAL: { /* a few NaN / +-Inf; a -Inf score (key with weight 0) on purpose */
        size_t m = 1 + urange(&st, 3);
        for (size_t x = 0; x < m; x++) {
            double val = urange(&st, 3) == 0 ? NAN : (urange(&st, 2) ? INFINITY : -INFINITY);
            switch (urange(&st, 4)) {
            case 0: c->q[urange(&st, c->nq)] = val; break;
            case 1: c->k[urange(&st, c->nk)] = val; break;
            default: c->v[urange(&st, c->nv)] = val; break;
            }
        }
        if (urange(&st, 2)) { /* mask key j for every query of its group: all q_0 > 0 */
            size_t j = urange(&st, ctx), g = urange(&st, nkv);
            for (size_t i = 0; i < q_len * nq; i++)
                c->q[i * D] = fabs(c->q[i * D]) + 0.5;
            c->k[(j * nkv + g) * D] = sm < 0 ? INFINITY : -INFINITY;
        }
        break;
    }
    case K_QUANT:
        for (size_t x = 0; x < c->nq; x++)
            c->q[x] = few_bits(&st);
        for (size_t x = 0; x < c->nk; x++)
            c->k[x] = urange(&st, 4) ? 0.0 : few_bits(&st);
        for (size_t x = 0; x < c->nv; x++)
            c->v[x] = few_bits(&st);
        break;
    case K_LARGE:
        for (size_t x = 0; x < c->nq; x++)
            c->q[x] *= 1e3;
        for (size_t x = 0; x < c->nk; x++)
            c->k[x] *= 1e3;
        break;
    default:
        break;
    }
    snprintf(c->label, sizeof c->label,
             "case %zu %s D%zu/%zu q_heads %zu kv_heads %zu q_len %zu q_offset %zu ctx %zu "
             "sm_scale %.17g",
             idx, kind_name[c->kind], D, E, nq, nkv, q_len, q_offset, ctx, sm);
}

/* ---------------------------------------------------------------------------------------
 * 1. Reference vs oracle on generated cases
 * ------------------------------------------------------------------------------------- */

typedef struct {
    unsigned long long outputs, bad, specials, retries, rational;
    size_t ctx, merged; /* the case's context; 1 if a row spans several chunks */
    double worst_ratio; /* max |ref - oracle| / bound over finite outputs */
    char msg[CASE_MSG];
    size_t msg_len;
} case_result;

static void cr_add(case_result *r, const char *fmt, ...)
{
    if (r->msg_len + 2 >= sizeof r->msg)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(r->msg + r->msg_len, sizeof r->msg - r->msg_len, fmt, ap);
    va_end(ap);
    if (n > 0)
        r->msg_len +=
            (size_t)n < sizeof r->msg - r->msg_len ? (size_t)n : sizeof r->msg - r->msg_len - 1;
}

static void check_case(size_t idx, case_result *res)
{
    acase c;
    gen_case(idx, &c);
    memset(res, 0, sizeof *res);
    float *o32 = lowp_test_xmalloc(c.no * sizeof(float)), *p32 = NULL;
    double *o64 = lowp_test_xmalloc(c.no * sizeof(double)),
            *ref = lowp_test_xmalloc(c.no * sizeof(double));
    double *bnd = lowp_test_xmalloc(c.no * sizeof(double)), *p64 = NULL;
    char why[256];
    lowp_attn_oracle_stats os = {0, 0, 0, 0};
    if (lowp_attn_oracle_mpfr_ex(&c.s, c.q, c.k, c.v, 0, o32, o64, &os, why, sizeof why) ||
        lowp_attn_ref_f64(&c.s, c.q, c.k, c.v, ref, NULL, why, sizeof why) ||
        lowp_attn_ref_bounds(&c.s, c.q, c.k, c.v, bnd, why, sizeof why)) {
        res->bad++;
        cr_add(res, "attn [%s]: refused: %s\n", c.label, why);
        goto out;
    }
    res->retries = os.retries;
    res->rational = os.rational;
    res->ctx = c.s.ctx;
    res->merged = c.s.ctx > LOWP_ATTN_CHUNK;
    const size_t E = c.s.vo_dim, nqh = c.s.num_q_heads;
    int shown = 0;
    for (size_t x = 0; x < c.no; x++) {
        size_t e = x % E, h = (x / E) % nqh, i = x / E / nqh;
        double o = o64[x], r = ref[x], b = bnd[x];
        res->outputs++;
        int ok;
        const char *why_bad = "";
        if (!isfinite(o)) {
            res->specials++;
            ok = isnan(o) ? isnan(r) : lowp_f64_bits(o) == lowp_f64_bits(r);
            if (ok && !(b == INFINITY)) {
                ok = 0;
                why_bad = " (bound finite for a non-finite exact output)";
            }
        } else if (!(b <= DBL_MAX)) {
            ok = 0;
            why_bad = " (no finite bound for a finite exact output)";
        } else {
            double err = fabs(r - o);
            ok = err <= b + half_ulp(o);
            if (b > 0 && err / b > res->worst_ratio)
                res->worst_ratio = err / b;
        }
        if (!ok) {
            res->bad++;
            if (shown++ < 3)
                cr_add(res,
                       "attn ref [%s]: out(i=%zu,h=%zu,e=%zu) got 0x%016" PRIx64
                       " (%.17g) expected 0x%016" PRIx64 " (%.17g) |diff| %.3g bound %.3g%s\n",
                       c.label, i, h, e, lowp_f64_bits(r), r, lowp_f64_bits(o), o,
                       fabs(r - o), b, why_bad);
        }
    }
    /* the single-output bound is the bulk one */
    for (int t = 0; t < 3; t++) {
        uint64_t st = lowp_test_stream(seed, 2, idx, (uint64_t)t);
        size_t x = urange(&st, c.no), e = x % E, h = (x / E) % nqh, i = x / E / nqh;
        double b1 = lowp_attn_ref_bound(&c.s, c.q, c.k, c.v, i, h, e);
        if (!same64(b1, bnd[x])) {
            res->bad++;
            cr_add(res, "attn bound [%s]: out(i=%zu,h=%zu,e=%zu) lowp_attn_ref_bound %.17g, "
                        "lowp_attn_ref_bounds %.17g\n", c.label, i, h, e, b1, bnd[x]);
        }
    }
    /* correct rounding does not depend on the working precision */
    if (idx % 4 == 0) {
        p32 = lowp_test_xmalloc(c.no * sizeof(float));
        p64 = lowp_test_xmalloc(c.no * sizeof(double));
        if (lowp_attn_oracle_mpfr(&c.s, c.q, c.k, c.v, 256, p32, p64, why, sizeof why)) {
            res->bad++;
            cr_add(res, "attn oracle [%s]: prec 256 refused: %s\n", c.label, why);
        } else {
            for (size_t x = 0; x < c.no; x++)
                if (!same64(p64[x], o64[x]) || !same32(p32[x], o32[x])) {
                    res->bad++;
                    cr_add(res,
                           "attn oracle [%s]: output %zu: prec 128 gives 0x%016" PRIx64
                           " / 0x%08" PRIx32 ", prec 256 gives 0x%016" PRIx64 " / 0x%08" PRIx32
                           "\n",
                           c.label, x, lowp_f64_bits(o64[x]), lowp_f32_bits(o32[x]),
                           lowp_f64_bits(p64[x]), lowp_f32_bits(p32[x]));
                    break;
                }
        }
    }
out:
    free(o32);
    free(o64);
    free(ref);
    free(bnd);
    free(p32);
    free(p64);
    case_free(&c);
}

START_TEST(ref_within_bound_of_oracle)
{
    size_t n = full ? FULL_CASES : QUICK_CASES;
    case_result *res = lowp_test_xmalloc(n * sizeof *res);
    double t0 = lowp_test_now();
    int progress = full && isatty(STDERR_FILENO);
    size_t done = 0;
    /* one case per thread: the functions inside then run on one thread each */
#pragma omp parallel for schedule(dynamic, 1)
    for (long x = 0; x < (long)n; x++) {
        check_case((size_t)x, &res[x]);
        if (progress) {
            size_t d;
#pragma omp atomic capture
            d = ++done;
            if (d % 100 == 0)
                fprintf(stderr, "\rattn: %zu / %zu cases", d, n);
        }
    }
    if (progress)
        fprintf(stderr, "\r%40s\r", "");
    unsigned long long outputs = 0, bad = 0, specials = 0, retries = 0, rational = 0;
    double worst = 0;
    size_t worst_case = 0, max_ctx = 0, merged = 0;
    for (size_t x = 0; x < n; x++) {
        max_ctx = res[x].ctx > max_ctx ? res[x].ctx : max_ctx;
        merged += res[x].merged;
        outputs += res[x].outputs;
        bad += res[x].bad;
        specials += res[x].specials;
        retries += res[x].retries;
        rational += res[x].rational;
        if (res[x].worst_ratio > worst) {
            worst = res[x].worst_ratio;
            worst_case = x;
        }
        if (res[x].msg_len)
            say("%s", res[x].msg);
    }
    printf("ref vs oracle: %zu cases (contexts up to %zu, %zu over one chunk), %llu outputs (%llu "
           "non-finite, %llu rational, %llu Ziv retries), %llu failures; largest |ref - oracle| / "
           "bound %.3g (case %zu); %.1f s\n",
           n, max_ctx, merged, outputs, specials, rational, retries, bad, worst, worst_case,
           lowp_test_now() - t0);
    total_cases += n;
    total_outputs += outputs;
    total_bad += bad;
    free(res);
    ck_assert_msg(bad == 0, "%llu outputs outside the bound or with the wrong special value", bad);
}
END_TEST

START_TEST(shape_checks)
{
    char why[200];
    lowp_attn_shape ok = {2, 8, 2, 64, 32, 10, 8, 0.0};
    lowp_attn_shape s = ok;
    ck_assert_int_eq(lowp_attn_check_shape(&s, why, sizeof why), 0);
    ck_assert(s.sm_scale == 0.125);
    struct {
        lowp_attn_shape s;
        const char *word;
    } bad[] = {
        {{0, 8, 2, 64, 32, 10, 8, 0}, "q_len"},
        {{2, 8, 3, 64, 32, 10, 8, 0}, "multiple"},
        {{2, 0, 2, 64, 32, 10, 8, 0}, "num_q_heads"},
        {{2, 8, 2, 0, 32, 10, 8, 0}, "qk_dim"},
        {{2, 8, 2, 64, 0, 10, 8, 0}, "vo_dim"},
        {{2, 8, 2, 64, 32, 0, 0, 0}, "ctx"},
        {{2, 8, 2, 64, 32, 10, 9, 0}, "q_offset"},
        {{2, 8, 2, 64, 32, 10, 8, NAN}, "sm_scale"},
        {{2, 8, 2, 64, 32, 10, 8, INFINITY}, "sm_scale"},
        {{2, 8, 2, SIZE_MAX / 4, 32, 10, 8, 0}, "overflow"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        why[0] = '\0';
        ck_assert_int_eq(lowp_attn_check_shape(&bad[i].s, why, sizeof why), -1);
        ck_assert_msg(strstr(why, bad[i].word) != NULL, "shape %zu: \"%s\" does not name %s", i,
                      why, bad[i].word);
    }
    ck_assert_int_eq(lowp_attn_check_shape(NULL, why, sizeof why), -1);
    double x = 1.0, o = 0;
    ck_assert_int_eq(lowp_attn_ref_f64(&bad[1].s, &x, &x, &x, &o, NULL, why, sizeof why), -1);
    ck_assert_int_eq(lowp_attn_oracle_mpfr(&bad[1].s, &x, &x, &x, 0, NULL, &o, why, sizeof why),
                     -1);
    ck_assert_int_eq(lowp_attn_oracle_mpfr(&ok, &x, &x, &x, 7, NULL, &o, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "prec") != NULL, "%s", why);
    ck_assert(isnan(lowp_attn_ref_bound(&ok, &x, &x, &x, 2, 0, 0)));
}
END_TEST

/* ---------------------------------------------------------------------------------------
 * 2. The oracle: independent evaluation, retries, midpoints, threads, probs
 * ------------------------------------------------------------------------------------- */

/* Plain MPFR: scores with fma at 4800 bits (exact for any doubles), the rest at 3000
 * bits, rounded to nearest at the end; only for finite inputs. Sets o64 to NaN where a
 * weight underflowed to 0 (scores more than ~2^30 apart) and the value is within 2^-2000
 * of a rounding boundary: there this plain evaluation cannot judge the output. Returns
 * the number of such outputs. */
static int naive_row(const lowp_attn_shape *s, const double *q, const double *k, const double *v,
                     size_t i, size_t h, double *o64, float *o32)
{
    int under = 0, skipped = 0;
    const size_t D = s->qk_dim, E = s->vo_dim, nkv = s->num_kv_heads;
    const size_t g = h / (s->num_q_heads / nkv), n = s->q_offset + i + 1;
    const double *qr = q + (i * s->num_q_heads + h) * D;
    double sm = s->sm_scale == 0 ? 1.0 / sqrt((double)D) : s->sm_scale;
    mpfr_t *sc = lowp_test_xmalloc(n * sizeof(mpfr_t));
    mpfr_t a, b, m, w, L, N, o;
    mpfr_inits2(4800, a, b, m, (mpfr_ptr)0);
    mpfr_inits2(3000, w, L, N, o, (mpfr_ptr)0);
    for (size_t j = 0; j < n; j++) {
        mpfr_init2(sc[j], 5000);
        mpfr_set_zero(sc[j], 1);
        for (size_t d = 0; d < D; d++) {
            mpfr_set_d(a, qr[d], MPFR_RNDN);
            mpfr_set_d(b, k[(j * nkv + g) * D + d], MPFR_RNDN);
            mpfr_fma(sc[j], a, b, sc[j], MPFR_RNDN);
        }
        mpfr_mul_d(sc[j], sc[j], sm, MPFR_RNDN);
        if (j == 0 || mpfr_cmp(sc[j], m) > 0)
            mpfr_set(m, sc[j], MPFR_RNDN);
    }
    for (size_t e = 0; e < E; e++) {
        mpfr_set_zero(L, 1);
        mpfr_set_zero(N, 1);
        for (size_t j = 0; j < n; j++) {
            mpfr_sub(a, sc[j], m, MPFR_RNDN);
            mpfr_exp(w, a, MPFR_RNDN);
            under |= mpfr_zero_p(w) != 0;
            mpfr_add(L, L, w, MPFR_RNDN);
            mpfr_mul_d(w, w, v[(j * nkv + g) * E + e], MPFR_RNDN);
            mpfr_add(N, N, w, MPFR_RNDN);
        }
        mpfr_div(o, N, L, MPFR_RNDN);
        o64[e] = mpfr_get_d(o, MPFR_RNDN);
        o32[e] = mpfr_get_flt(o, MPFR_RNDN);
        if (under) {
            mpfr_mul_2si(w, o, -2000, MPFR_RNDN);
            mpfr_abs(w, w, MPFR_RNDN);
            mpfr_sub(N, o, w, MPFR_RNDN);
            mpfr_add(L, o, w, MPFR_RNDN);
            if (mpfr_get_d(N, MPFR_RNDN) != mpfr_get_d(L, MPFR_RNDN) ||
                mpfr_get_flt(N, MPFR_RNDN) != mpfr_get_flt(L, MPFR_RNDN)) {
                o64[e] = NAN;
                skipped++;
            }
        }
    }
    for (size_t j = 0; j < n; j++)
        mpfr_clear(sc[j]);
    free(sc);
    mpfr_clears(a, b, m, w, L, N, o, (mpfr_ptr)0);
    return skipped;
}

/* Values spread over binary64's whole range in one row. */
static double wild(uint64_t *st, int mode)
{
    double x = lowp_test_gauss(st);
    switch (mode) {
    case 0: return x;
    case 1: return ldexp(x, (int)urange(st, 1200) - 600);
    case 2: return ldexp(x, (int)urange(st, 80) - 1100); /* subnormal products */
    default: return ldexp(x, 400 + (int)urange(st, 100)); /* scores ~1e300 */
    }
}

START_TEST(oracle_matches_plain_mpfr)
{
    size_t ncases = full ? 400 : 60, outputs = 0, bad = 0, skipped = 0;
    double t0 = lowp_test_now();
#pragma omp parallel for schedule(dynamic, 1) reduction(+ : outputs, bad, skipped)
    for (long ci = 0; ci < (long)ncases; ci++) {
        uint64_t st = lowp_test_stream(seed, 3, (uint64_t)ci, 0);
        size_t D = 1 + urange(&st, 12), E = 1 + urange(&st, 3), ctx = 1 + urange(&st, 10);
        size_t q_len = 1 + urange(&st, 2 < ctx ? 2 : ctx);
        int mq = (int)urange(&st, 4), mk = (int)urange(&st, 4), mv = (int)urange(&st, 3);
        if (mq == 3 && mk == 3)
            mk = 0;
        lowp_attn_shape s = {
            q_len,
            2,
            1,
            D,
            E,
            ctx,
            ctx - q_len,
            urange(&st, 2) ? 0.0 : ldexp(lowp_test_gauss(&st), (int)urange(&st, 10) - 5)};
        double *q = lowp_test_xmalloc(q_len * 2 * D * sizeof(double)),
                *k = lowp_test_xmalloc(ctx * D * sizeof(double));
        double *v = lowp_test_xmalloc(ctx * E * sizeof(double)),
               *o64 = lowp_test_xmalloc(q_len * 2 * E * sizeof(double));
        float *o32 = lowp_test_xmalloc(q_len * 2 * E * sizeof(float));
        for (size_t x = 0; x < q_len * 2 * D; x++)
            q[x] = wild(&st, mq);
        for (size_t x = 0; x < ctx * D; x++)
            k[x] = urange(&st, 6) ? wild(&st, mk) : 0.0;
        for (size_t x = 0; x < ctx * E; x++)
            v[x] = wild(&st, mv);
        if (urange(&st, 4) == 0 && ctx > 1) /* equal scores */
            memcpy(k + D, k, D * sizeof(double));
        char why[200];
        if (lowp_attn_oracle_mpfr(&s, q, k, v, 0, o32, o64, why, sizeof why)) {
            bad++;
            say("attn oracle: case %ld refused: %s\n", ci, why);
        } else {
            double n64[4];
            float n32[4];
            for (size_t i = 0; i < q_len; i++)
                for (size_t h = 0; h < 2; h++) {
                    skipped += (size_t)naive_row(&s, q, k, v, i, h, n64, n32);
                    for (size_t e = 0; e < E; e++) {
                        size_t x = (i * 2 + h) * E + e;
                        if (isnan(n64[e]))
                            continue;
                        outputs++;
                        if (!same64(o64[x], n64[e]) || !same32(o32[x], n32[e])) {
                            bad++;
                            say("attn oracle vs plain MPFR: case %ld (D %zu E %zu ctx %zu q_len "
                                "%zu "
                                "modes %d%d%d) out(i=%zu,h=%zu,e=%zu): oracle 0x%016" PRIx64
                                " / 0x%08" PRIx32 ", plain 0x%016" PRIx64 " / 0x%08" PRIx32 "\n",
                                ci, D, E, ctx, q_len, mq, mk, mv, i, h, e,
                                lowp_f64_bits(o64[x]), lowp_f32_bits(o32[x]),
                                lowp_f64_bits(n64[e]), lowp_f32_bits(n32[e]));
                        }
                    }
                }
        }
        free(q);
        free(k);
        free(v);
        free(o64);
        free(o32);
    }
    printf("oracle vs plain MPFR (3000 bits): %zu cases, %zu outputs, %zu mismatches (%zu outputs "
           "not compared: a plain weight underflowed next to a midpoint), %.1f s\n",
           ncases, outputs, bad, skipped, lowp_test_now() - t0);
    total_cases += ncases;
    total_outputs += outputs;
    total_bad += bad;
    ck_assert_msg(bad == 0, "the oracle differs from a plain high-precision evaluation");
}
END_TEST

START_TEST(oracle_retry_and_midpoints)
{
    char why[200];
    unsigned long long bad = 0;
    /* scores 1 and 1 + 2^-100 with V = +1, -1: o ~ -2^-101, N cancels to 2^-100 */
    {
        lowp_attn_shape s = {1, 1, 1, 2, 1, 2, 1, 1.0};
        double q[2] = {1, 1}, k[4] = {1, 0, 1, 0x1p-100}, v[2] = {1, -1}, o64, r, n64;
        float o32, n32;
        lowp_attn_oracle_stats st = {0, 0, 0, 0};
        ck_assert_int_eq(lowp_attn_oracle_mpfr_ex(&s, q, k, v, 0, &o32, &o64, &st, why, sizeof why),
                         0);
        (void)naive_row(&s, q, k, v, 0, 0, &n64, &n32);
        ck_assert_int_eq(lowp_attn_ref_f64(&s, q, k, v, &r, NULL, why, sizeof why), 0);
        double b = lowp_attn_ref_bound(&s, q, k, v, 0, 0, 0);
        printf("cancellation: oracle %a (retries %llu, max prec %lu), plain MPFR %a, ref %a, bound "
               "%.3g\n",
               o64, st.retries, st.max_prec, n64, r, b);
        if (st.retries == 0 || !same64(o64, n64) || !same32(o32, n32) || !(fabs(r - o64) <= b))
            bad++;
    }
    /* equal scores: the mean of V, exactly a rounding midpoint, rounds to even */
    struct {
        double v0, v1, want64;
        float want32;
    } mid[] = {
        {1, 1 + 0x1p-23, 1 + 0x1p-24, 1.0f},                 /* binary32 midpoint, down */
        {1 + 0x1p-23, 1 + 0x1p-22, 1 + 0x3p-24, 1 + 0x1p-22f}, /* binary32 midpoint, up */
        {1, 1 + 0x1p-52, 1.0, 1.0f},                         /* binary64 midpoint, down */
        {1 + 0x1p-52, 1 + 0x1p-51, 1 + 0x1p-51, 1.0f},       /* binary64 midpoint, up */
        {0x1p-1074, 0.0, 0.0, 0.0f},                         /* 2^-1075: to even (0) */
        {0x3p-1074, 0.0, 0x2p-1074, 0.0f},                   /* 1.5 * 2^-1074: up, to even */
    };
    for (size_t t = 0; t < sizeof mid / sizeof mid[0]; t++) {
        lowp_attn_shape s = {1, 1, 1, 1, 1, 2, 1, 1.0};
        double q = 0.5, k[2] = {3, 3}, v[2] = {mid[t].v0, mid[t].v1}, o64;
        float o32;
        lowp_attn_oracle_stats st = {0, 0, 0, 0};
        ck_assert_int_eq(
            lowp_attn_oracle_mpfr_ex(&s, &q, k, v, 0, &o32, &o64, &st, why, sizeof why), 0);
        if (!same64(o64, mid[t].want64) || !same32(o32, mid[t].want32) || st.rational != 1) {
            bad++;
            printf("attn oracle midpoint %zu: got %a / %a, expected %a / %a (rational %llu)\n", t,
                   o64, (double)o32, mid[t].want64, (double)mid[t].want32, st.rational);
        }
    }
    /* a midpoint up to weights that underflow every exponent range (scores 1e30 apart):
     * o = r + F with r = 1 + 2^-53, the binary64 midpoint; F's sign decides */
    struct {
        double k2, v2, k3, v3, k4, v4, want;
    } un[] = {
        {-1e30, 2.0, -1e30, 2.0, -2e30, 0.0, 1 + 0x1p-52}, /* F > 0: up */
        {-1e30, 0.0, -1e30, 0.0, -2e30, 9.0, 1.0},         /* F < 0: down (to even) */
        {-1e30, 1.0, -1e30, 1 + 0x1p-52, -3e30, 1.0, 1.0}, /* zero at -1e30, F < 0 at -3e30 */
        {-1e30, 1.0, -1e30, 1 + 0x1p-52, -3e30, 5.0, 1 + 0x1p-52}, /* ... F > 0 at -3e30 */
    };
    for (size_t t = 0; t < sizeof un / sizeof un[0]; t++) {
        lowp_attn_shape s = {1, 1, 1, 1, 1, 5, 4, 1.0};
        double q = 1.0, k[5] = {0, 0, un[t].k2, un[t].k3, un[t].k4};
        double v[5] = {1, 1 + 0x1p-52, un[t].v2, un[t].v3, un[t].v4}, o64;
        float o32;
        ck_assert_int_eq(lowp_attn_oracle_mpfr(&s, &q, k, v, 0, &o32, &o64, why, sizeof why), 0);
        if (o64 != un[t].want || o32 != 1.0f) {
            bad++;
            printf("attn oracle underflow %zu: got %a, expected %a\n", t, o64, un[t].want);
        }
    }
    /* constant V with distinct scores: exactly V (the group means are equal) */
    {
        lowp_attn_shape s = {1, 1, 1, 1, 1, 5, 4, 1.0};
        double q = 1.0, k[5] = {0.1, 2.5, -3, 7, 0.0}, v[5], o64;
        for (int j = 0; j < 5; j++)
            v[j] = 0.1;
        lowp_attn_oracle_stats st = {0, 0, 0, 0};
        ck_assert_int_eq(
            lowp_attn_oracle_mpfr_ex(&s, &q, k, v, 0, NULL, &o64, &st, why, sizeof why), 0);
        if (o64 != 0.1 || st.rational != 1)
            bad++;
    }
    total_cases += 12;
    total_bad += bad;
    ck_assert_msg(bad == 0, "%llu retry/midpoint checks failed", bad);
}
END_TEST

START_TEST(special_values)
{
    /* attn.h's rules, case by case: (scores, V) -> expected class */
    char why[200];
    struct {
        double k0, k1, v0, v1, q;
        int want; /* 0 finite, 1 NaN, 2 +Inf, 3 -Inf */
        const char *what;
    } t[] = {
        {1, 2, 1, 2, 1, 0, "finite"},
        {NAN, 2, 1, 2, 1, 1, "NaN key"},
        {INFINITY, 2, 1, 2, 1, 1, "+Inf score"},
        {-INFINITY, 2, 1, 2, 1, 0, "-Inf score: weight 0"},
        {-INFINITY, -INFINITY, 1, 2, 1, 1, "all scores -Inf"},
        {-INFINITY, 2, INFINITY, 2, 1, 1, "Inf V at a weight-0 key"},
        {-INFINITY, 2, NAN, 2, 1, 1, "NaN V at a weight-0 key"},
        {1, 2, INFINITY, 2, 1, 2, "Inf V at a positive weight"},
        {-1000, 2, -INFINITY, 2, 1, 3, "-Inf V at a weight e^-1002 (no underflow to 0)"},
        {1, 2, INFINITY, -INFINITY, 1, 1, "+Inf and -Inf in V"},
        {1, 2, 1, NAN, 1, 1, "NaN V"},
        {1, 0, 1, 2, INFINITY, 1, "Inf q times 0 k"},
        {1, 2, 1, 2, NAN, 1, "NaN q"},
    };
    unsigned long long bad = 0;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        lowp_attn_shape s = {1, 1, 1, 1, 1, 2, 1, 1.0};
        double k[2] = {t[i].k0, t[i].k1}, v[2] = {t[i].v0, t[i].v1}, o64, r;
        ck_assert_int_eq(lowp_attn_oracle_mpfr(&s, &t[i].q, k, v, 0, NULL, &o64, why, sizeof why),
                         0);
        ck_assert_int_eq(lowp_attn_ref_f64(&s, &t[i].q, k, v, &r, NULL, why, sizeof why), 0);
        int cls_o = isnan(o64) ? 1 : o64 == INFINITY ? 2 : o64 == -INFINITY ? 3 : 0;
        int cls_r = isnan(r) ? 1 : r == INFINITY ? 2 : r == -INFINITY ? 3 : 0;
        double b = lowp_attn_ref_bound(&s, &t[i].q, k, v, 0, 0, 0);
        int ok = cls_o == t[i].want && cls_r == t[i].want &&
                 (t[i].want != 0 ? b == INFINITY : fabs(r - o64) <= b);
        if (!ok) {
            bad++;
            printf("attn special [%s]: q %g k {%g, %g} v {%g, %g}: oracle %g, ref %g, bound %g\n",
                   t[i].what, t[i].q, k[0], k[1], v[0], v[1], o64, r, b);
        }
    }
    /* overflow of binary64 scores: no bound is claimed */
    {
        lowp_attn_shape s = {1, 1, 1, 2, 1, 2, 1, 1.0};
        double q[2] = {1e300, 1e300}, k[4] = {1e10, 1e10, -1e10, 1e10}, v[2] = {1, 2};
        if (lowp_attn_ref_bound(&s, q, k, v, 0, 0, 0) != INFINITY)
            bad++;
    }
    total_cases += sizeof t / sizeof t[0] + 1;
    total_bad += bad;
    ck_assert_msg(bad == 0, "%llu special-value checks failed", bad);
}
END_TEST

START_TEST(threads_and_probs)
{
    acase c;
    gen_case(1, &c); /* a one-hot case */
    char why[200];
    double *a = lowp_test_xmalloc(c.no * sizeof(double)),
            *b = lowp_test_xmalloc(c.no * sizeof(double));
    double *ra = lowp_test_xmalloc(c.no * sizeof(double)),
            *rb = lowp_test_xmalloc(c.no * sizeof(double));
    double *p = lowp_test_xmalloc(c.s.q_len * c.s.num_q_heads * c.s.ctx * sizeof(double));
    int nt = omp_get_max_threads();
    omp_set_num_threads(1);
    ck_assert_int_eq(lowp_attn_oracle_mpfr(&c.s, c.q, c.k, c.v, 0, NULL, a, why, sizeof why), 0);
    ck_assert_int_eq(lowp_attn_ref_f64(&c.s, c.q, c.k, c.v, ra, NULL, why, sizeof why), 0);
    omp_set_num_threads(nt > 1 ? nt : 2);
    ck_assert_int_eq(lowp_attn_oracle_mpfr(&c.s, c.q, c.k, c.v, 0, NULL, b, why, sizeof why), 0);
    ck_assert_int_eq(lowp_attn_ref_f64(&c.s, c.q, c.k, c.v, rb, p, why, sizeof why), 0);
    omp_set_num_threads(nt);
    for (size_t x = 0; x < c.no; x++) {
        ck_assert_msg(same64(a[x], b[x]), "oracle output %zu depends on the thread count", x);
        ck_assert_msg(same64(ra[x], rb[x]), "reference output %zu depends on the thread count", x);
    }
    /* probs: zero where masked, nonnegative, summing to 1 within 3 gamma_{n+C+2} */
    for (size_t i = 0; i < c.s.q_len; i++)
        for (size_t h = 0; h < c.s.num_q_heads; h++) {
            const double *pr = p + (i * c.s.num_q_heads + h) * c.s.ctx;
            size_t n = c.s.q_offset + i + 1;
            double sum = 0;
            for (size_t j = 0; j < c.s.ctx; j++) {
                ck_assert_msg(j < n ? pr[j] >= 0 : pr[j] == 0, "probs(%zu,%zu,%zu) = %g", i, h, j,
                              pr[j]);
                sum += pr[j];
            }
            double g = (double)(n + 2 + (n + LOWP_ATTN_CHUNK - 1) / LOWP_ATTN_CHUNK) * 0x1p-53;
            ck_assert_msg(fabs(sum - 1) <= 3 * g / (1 - g) + 2 * (double)n * 0x1p-53,
                          "probs of row (%zu,%zu) sum to 1 + %g", i, h, sum - 1);
        }
    free(a);
    free(b);
    free(ra);
    free(rb);
    free(p);
    case_free(&c);
}
END_TEST

/* Long contexts for the reference alone: more than one chunk (the merge), 128K in --full.
 * Against an oracle of the same rows at a few thousand keys would be slow; instead the
 * reference with chunks is compared with the oracle on rows cut to 4100 keys. */
START_TEST(ref_merges_chunks)
{
    uint64_t st = lowp_test_stream(seed, 4, 0, 0);
    size_t ctx = 4100, D = 64, E = 16;
    lowp_attn_shape s = {1, 2, 1, D, E, ctx, ctx - 1, 0.0};
    double *q = lowp_test_xmalloc(2 * D * sizeof(double)),
            *k = lowp_test_xmalloc(ctx * D * sizeof(double));
    double *v = lowp_test_xmalloc(ctx * E * sizeof(double)),
            *o = lowp_test_xmalloc(2 * E * sizeof(double));
    double *r = lowp_test_xmalloc(2 * E * sizeof(double)),
            *b = lowp_test_xmalloc(2 * E * sizeof(double));
    for (size_t x = 0; x < 2 * D; x++)
        q[x] = 2 * lowp_test_gauss(&st);
    for (size_t x = 0; x < ctx * D; x++)
        k[x] = lowp_test_gauss(&st);
    for (size_t x = 0; x < ctx * E; x++)
        v[x] = lowp_test_gauss(&st);
    /* the largest scores in the middle chunk: every chunk is rescaled */
    for (size_t d = 0; d < D; d++)
        k[3000 * D + d] = q[d];
    char why[200];
    ck_assert_int_eq(lowp_attn_oracle_mpfr(&s, q, k, v, 0, NULL, o, why, sizeof why), 0);
    ck_assert_int_eq(lowp_attn_ref_f64(&s, q, k, v, r, NULL, why, sizeof why), 0);
    ck_assert_int_eq(lowp_attn_ref_bounds(&s, q, k, v, b, why, sizeof why), 0);
    unsigned long long bad = 0;
    for (size_t x = 0; x < 2 * E; x++)
        if (!(fabs(r[x] - o[x]) <= b[x] + half_ulp(o[x]))) {
            bad++;
            say("attn ref [3 chunks, ctx 4100]: out %zu got %.17g expected %.17g bound %.3g\n", x,
                r[x], o[x], b[x]);
        }
    total_cases++;
    total_outputs += 2 * E;
    total_bad += bad;
    free(q);
    free(k);
    free(v);
    free(o);
    free(r);
    free(b);
    ck_assert(bad == 0);
}
END_TEST

/* ---------------------------------------------------------------------------------------
 * 3. The paged decode
 * ------------------------------------------------------------------------------------- */

typedef struct {
    lowp_block_format f;
    lowp_kv_layout layout;
    lowp_kv_sf_order v_order;
    lowp_kv_scale_gran gran;
    size_t P, H, r, D, E, batch;
    size_t lens[4];
    int poison; /* leave one slot of sequence 0 unwritten */
} pcase;

typedef struct {
    lowp_kvcache *c;
    lowp_kv_page_table pt;
    int32_t *indptr, *indices, *last;
    double *q;
    size_t nq;
} pcache;

static void pcache_free(pcache *p)
{
    lowp_kvcache_destroy(p->c);
    free(p->indptr);
    free(p->indices);
    free(p->last);
    free(p->q);
}

static void pcache_build(const pcase *pc, uint64_t st, pcache *out)
{
    char why[256];
    size_t pages = 0;
    for (size_t b = 0; b < pc->batch; b++)
        pages += (pc->lens[b] + pc->P - 1) / pc->P;
    pages += 3; /* spare pages, never used */
    lowp_kv_config cfg = lowp_kv_config_default(pc->f, pages, pc->P, pc->H, pc->D, pc->E);
    cfg.layout = pc->layout;
    cfg.v_sf_order = pc->v_order;
    cfg.scale_gran = pc->gran;
    memset(out, 0, sizeof *out);
    ck_assert_msg(lowp_kvcache_create(&cfg, &out->c, why, sizeof why) == 0, "%s", why);
    if (lowp_block_has_global_scale(pc->f)) {
        size_t ng = pc->gran == LOWP_KV_SCALE_HEAD ? pc->H : 1;
        float gk[64], gv[64];
        for (size_t h = 0; h < ng; h++) {
            gk[h] = (float)ldexp(1.0 + lowp_test_urand(&st), (int)urange(&st, 5) - 3);
            gv[h] = (float)ldexp(1.0 + lowp_test_urand(&st), (int)urange(&st, 5) - 3);
        }
        ck_assert_msg(lowp_kvcache_set_global_scales(out->c, gk, gv, ng, why, sizeof why) == 0,
                      "%s", why);
    }
    /* pages in a shuffled order */
    int32_t *perm = lowp_test_xmalloc(pages * sizeof *perm);
    for (size_t i = 0; i < pages; i++)
        perm[i] = (int32_t)i;
    for (size_t i = pages - 1; i > 0; i--) {
        size_t j = urange(&st, i + 1);
        int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    out->indptr = lowp_test_xmalloc((pc->batch + 1) * sizeof(int32_t));
    out->indices = perm;
    out->last = lowp_test_xmalloc(pc->batch * sizeof(int32_t));
    out->indptr[0] = 0;
    for (size_t b = 0; b < pc->batch; b++) {
        size_t np = (pc->lens[b] + pc->P - 1) / pc->P;
        out->indptr[b + 1] = out->indptr[b] + (int32_t)np;
        out->last[b] = (int32_t)(pc->lens[b] - (np - 1) * pc->P);
    }
    out->pt = (lowp_kv_page_table){pc->batch, out->indptr, out->indices, out->last};
    float *kf = lowp_test_xmalloc(pc->H * pc->D * sizeof(float)),
          *vf = lowp_test_xmalloc(pc->H * pc->E * sizeof(float));
    for (size_t b = 0; b < pc->batch; b++)
        for (size_t t = 0; t < pc->lens[b]; t++) {
            for (size_t x = 0; x < pc->H * pc->D; x++)
                kf[x] = (float)(lowp_test_gauss(&st) * (x % 17 == 3 ? 8.0 : 1.0));
            for (size_t x = 0; x < pc->H * pc->E; x++)
                vf[x] = (float)lowp_test_gauss(&st);
            if (pc->poison && b == 0 && t == pc->lens[0] / 2)
                continue;
            ck_assert_msg(lowp_kvcache_write_pos(out->c, &out->pt, b, t, kf, vf, NULL, NULL, why,
                                                 sizeof why) == 0, "%s", why);
        }
    free(kf);
    free(vf);
    out->nq = pc->H * pc->r;
    out->q = lowp_test_xmalloc(pc->batch * out->nq * pc->D * sizeof(double));
    for (size_t x = 0; x < pc->batch * out->nq * pc->D; x++)
        out->q[x] = lowp_test_gauss(&st);
}

/* One paged configuration: decode (threads 1 and 2) against the dense reference on the
 * gathered K/V, bit for bit; bound against the oracle where the sequence is short. */
static unsigned long long paged_check(const pcase *pc, size_t idx, int with_oracle, double *secs)
{
    pcache pk;
    pcache_build(pc, lowp_test_stream(seed, 5, idx, 0), &pk);
    const size_t nq = pk.nq, E = pc->E, D = pc->D, H = pc->H;
    char why[256], label[200];
    snprintf(label, sizeof label, "paged %zu %s %s v-scales %s %s-scales page %zu kv_heads %zu "
             "group %zu D%zu/%zu lens %zu %zu%s", idx, lowp_block_format_name(pc->f),
             lowp_kv_layout_name(pc->layout), lowp_kv_sf_order_name(pc->v_order),
             lowp_kv_scale_gran_name(pc->gran), pc->P, H, pc->r, D, E, pc->lens[0],
             pc->batch > 1 ? pc->lens[1] : 0, pc->poison ? " poisoned" : "");
    lowp_kv_view view = lowp_kvcache_view(pk.c);
    double *out1 = lowp_test_xmalloc(pc->batch * nq * E * sizeof(double));
    double *out2 = lowp_test_xmalloc(pc->batch * nq * E * sizeof(double));
    double *bnd = lowp_test_xmalloc(pc->batch * nq * E * sizeof(double));
    lowp_attn_paged_args a = {pk.c, &view, &pk.pt, nq, 0.0, pk.q, 1};
    double t0 = lowp_test_now();
    ck_assert_msg(lowp_attn_paged_decode(&a, out1, NULL, why, sizeof why) == 0, "%s: %s", label,
                  why);
    if (secs)
        *secs = lowp_test_now() - t0;
    a.threads = 2;
    ck_assert_msg(lowp_attn_paged_decode(&a, out2, bnd, why, sizeof why) == 0, "%s: %s", label,
                  why);
    unsigned long long bad = 0, outputs = 0;
    for (size_t x = 0; x < pc->batch * nq * E; x++)
        if (!same64(out1[x], out2[x])) {
            bad++;
            say("attn [%s]: output %zu: 1 thread 0x%016" PRIx64 ", 2 threads 0x%016" PRIx64 "\n",
                label, x, lowp_f64_bits(out1[x]), lowp_f64_bits(out2[x]));
            break;
        }
    for (size_t b = 0; b < pc->batch; b++) {
        size_t n = pc->lens[b];
        double *kd = lowp_test_xmalloc(n * H * D * sizeof(double)),
                *vd = lowp_test_xmalloc(n * H * E * sizeof(double));
        double *rd = lowp_test_xmalloc(nq * E * sizeof(double)),
                *bd = lowp_test_xmalloc(nq * E * sizeof(double));
        ck_assert_msg(lowp_kvcache_gather(pk.c, &view, &pk.pt, b, n, kd, vd, why, sizeof why) == 0,
                      "%s", why);
        lowp_attn_shape s = {1, nq, H, D, E, n, n - 1, 0.0};
        const double *qb = pk.q + b * nq * D;
        ck_assert_msg(lowp_attn_ref_f64(&s, qb, kd, vd, rd, NULL, why, sizeof why) == 0, "%s", why);
        ck_assert_msg(lowp_attn_ref_bounds(&s, qb, kd, vd, bd, why, sizeof why) == 0, "%s", why);
        const double *pb = out2 + b * nq * E, *bp = bnd + b * nq * E;
        for (size_t x = 0; x < nq * E; x++) {
            outputs++;
            /* the paged bound is +Inf on any non-finite K (the dense one may skip -Inf keys) */
            int bound_ok = same64(bp[x], bd[x]) || (bp[x] == INFINITY && !isfinite(pb[x]));
            if (!same64(pb[x], rd[x]) || !bound_ok) {
                bad++;
                say("attn [%s]: seq %zu out(h=%zu,e=%zu): paged 0x%016" PRIx64
                    " (%.17g) bound %.3g, "
                    "dense reference 0x%016" PRIx64 " (%.17g) bound %.3g\n",
                    label, b, x / E, x % E, lowp_f64_bits(pb[x]), pb[x], bp[x],
                    lowp_f64_bits(rd[x]), rd[x], bd[x]);
            }
            if (pc->poison && b == 0 && !isnan(pb[x])) {
                bad++;
                say("attn [%s]: a poisoned slot does not make output %zu NaN\n", label, x);
            }
        }
        if (with_oracle && n <= 600) {
            double *o = lowp_test_xmalloc(nq * E * sizeof(double));
            ck_assert_msg(lowp_attn_oracle_mpfr(&s, qb, kd, vd, 0, NULL, o, why, sizeof why) == 0,
                          "%s", why);
            for (size_t x = 0; x < nq * E; x++)
                if (!(isnan(o[x]) && isnan(pb[x])) &&
                    !(fabs(pb[x] - o[x]) <= bp[x] + half_ulp(o[x]))) {
                    bad++;
                    say("attn [%s]: seq %zu out(h=%zu,e=%zu) got 0x%016" PRIx64 " (%.17g) expected "
                        "0x%016" PRIx64 " (%.17g) |diff| %.3g bound %.3g\n",
                        label, b, x / E, x % E, lowp_f64_bits(pb[x]), pb[x],
                        lowp_f64_bits(o[x]), o[x], fabs(pb[x] - o[x]), bp[x]);
                }
            free(o);
        }
        free(kd);
        free(vd);
        free(rd);
        free(bd);
    }
    total_cases++;
    total_outputs += outputs;
    free(out1);
    free(out2);
    free(bnd);
    pcache_free(&pk);
    return bad;
}

START_TEST(paged_equals_dense_reference)
{
    static const lowp_block_format F[] = {LOWP_NVFP4, LOWP_FP8_E4M3, LOWP_FP8_E5M2, LOWP_BF16_PASS,
                                          LOWP_MXFP4, LOWP_MXFP8};
    unsigned long long bad = 0;
    size_t n = 0;
    double t0 = lowp_test_now();
    size_t reps = full ? 6 : 2;
    for (size_t fi = 0; fi < sizeof F / sizeof F[0]; fi++)
        for (size_t rep = 0; rep < reps; rep++) {
            uint64_t st = lowp_test_stream(seed, 6, fi, rep);
            pcase pc;
            memset(&pc, 0, sizeof pc);
            pc.f = F[fi];
            pc.layout = rep % 2 ? LOWP_KV_HND : LOWP_KV_NHD;
            pc.gran = urange(&st, 2) ? LOWP_KV_SCALE_HEAD : LOWP_KV_SCALE_TENSOR;
            static const size_t R[] = {1, 4, 5, 6, 12, 16};
            pc.r = R[urange(&st, 6)];
            pc.H = 1 + urange(&st, 3);
            int mx = F[fi] == LOWP_MXFP4 || F[fi] == LOWP_MXFP8;
            static const size_t DM[][2] = {{64, 64}, {128, 128}, {192, 128}, {256, 256}, {96, 96}};
            size_t di = urange(&st, mx ? 4 : 5); /* MX blocks are 32: no 96 */
            pc.D = DM[di][0];
            pc.E = DM[di][1];
            pc.P = (size_t[]){1, 4, 16, 64}[urange(&st, 4)];
            if (F[fi] == LOWP_NVFP4 && pc.P % 4 == 0 && pc.E % 64 == 0 && urange(&st, 2))
                pc.v_order = LOWP_KV_SF_INTERLEAVE4;
            pc.batch = 2 + urange(&st, 2);
            for (size_t b = 0; b < pc.batch; b++)
                pc.lens[b] =
                    (size_t[]){1, 17, 300, 2048, 2049, 5000}[urange(&st, rep == 0 ? 3 : 6)];
            pc.poison = rep == 1 && fi < 2;
            bad += paged_check(&pc, n++, rep == 0 || fi == 0, NULL);
        }
    if (full) { /* a 128K-token decode: 2 KV heads, group 4, head dim 128, NVFP4 */
        pcase pc = {LOWP_NVFP4, LOWP_KV_NHD, LOWP_KV_SF_INTERLEAVE4, LOWP_KV_SCALE_TENSOR, 16, 2, 4,
                    128, 128, 1, {131072, 0, 0, 0}, 0};
        double secs = 0;
        bad += paged_check(&pc, n++, 0, &secs);
        printf("paged: 128K-token NVFP4 decode (2 KV heads x 4, d 128), 1 thread: %.3f s\n", secs);
    }
    printf("paged decode vs dense reference: %zu caches, %llu failures, %.1f s\n", n, bad,
           lowp_test_now() - t0);
    total_bad += bad;
    ck_assert_msg(bad == 0, "the paged decode differs from the dense reference");
}
END_TEST

START_TEST(paged_refusals)
{
    pcase pc = {LOWP_NVFP4,
                LOWP_KV_NHD,
                LOWP_KV_SF_LINEAR,
                LOWP_KV_SCALE_TENSOR,
                4,
                2,
                2,
                64,
                64,
                2,
                {5, 3, 0, 0},
                0};
    pcache pk;
    pcache_build(&pc, lowp_test_stream(seed, 7, 0, 0), &pk);
    lowp_kv_view view = lowp_kvcache_view(pk.c);
    double out[2 * 4 * 64];
    char why[256];
    lowp_attn_paged_args a = {pk.c, &view, &pk.pt, 4, 0.0, pk.q, 0};
    ck_assert_int_eq(lowp_attn_paged_decode(&a, out, NULL, why, sizeof why), 0);
    lowp_kv_view bad_view = view;
    bad_view.page_size = 8;
    a.view = &bad_view;
    ck_assert_int_eq(lowp_attn_paged_decode(&a, out, NULL, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "page_size") != NULL, "%s", why);
    a.view = &view;
    a.num_q_heads = 3;
    ck_assert_int_eq(lowp_attn_paged_decode(&a, out, NULL, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "num_q_heads") != NULL, "%s", why);
    a.num_q_heads = 4;
    a.sm_scale = NAN;
    ck_assert_int_eq(lowp_attn_paged_decode(&a, out, NULL, why, sizeof why), -1);
    a.sm_scale = 0;
    int32_t ip[3] = {0, 2, 2}, last[2] = {1, 0};
    lowp_kv_page_table empty = {2, ip, pk.indices, last};
    a.pt = &empty;
    ck_assert_int_eq(lowp_attn_paged_decode(&a, out, NULL, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "empty") != NULL, "%s", why);
    a.pt = NULL;
    ck_assert_int_eq(lowp_attn_paged_decode(&a, out, NULL, why, sizeof why), -1);
    pcache_free(&pk);
}
END_TEST

START_TEST(bench_runs)
{
    lowp_attn_bench_decode_opts o = lowp_attn_bench_decode_defaults();
    ck_assert_int_eq(o.format, LOWP_NVFP4);
    ck_assert_uint_eq(o.ctx, 131072);
    o.ctx = 3000;
    o.batch = 2;
    o.reps = 1;
    o.threads = 1;
    lowp_attn_bench_decode_result r1, r2;
    char why[200];
    ck_assert_msg(lowp_attn_bench_decode(&o, &r1, why, sizeof why) == 0, "%s", why);
    o.threads = 2;
    ck_assert_msg(lowp_attn_bench_decode(&o, &r2, why, sizeof why) == 0, "%s", why);
    ck_assert_msg(lowp_f64_bits(r1.checksum) == lowp_f64_bits(r2.checksum) &&
                      isfinite(r1.checksum),
                  "bench checksum %.17g (1 thread) vs %.17g (2 threads)", r1.checksum, r2.checksum);
    ck_assert(r1.pairs_per_s > 0 && r2.threads == 2);
    o.reps = 0;
    ck_assert_int_eq(lowp_attn_bench_decode(&o, &r1, why, sizeof why), -1);
}
END_TEST

/* ---------------------------------------------------------------------------------------
 * main
 * ------------------------------------------------------------------------------------- */

static Suite *attn_suite(void)
{
    Suite *s = suite_create("attn");
    lowp_test_tcase(s, "attn", full ? 5400 : 1800,
                    LOWP_TESTS(shape_checks, special_values, oracle_retry_and_midpoints,
                               oracle_matches_plain_mpfr, threads_and_probs, ref_merges_chunks,
                               ref_within_bound_of_oracle, paged_refusals,
                               paged_equals_dense_reference, bench_runs));
    return s;
}

int main(int argc, char **argv)
{
    full = lowp_test_tier("test_attn", argc, argv);
    seed = lowp_test_seed("attn", seed);
    printf("attn: %s tier, seed 0x%016" PRIx64 " (LOWP_SEED overrides), %d threads\n",
           full ? "full" : "quick", seed, omp_get_max_threads());
    fflush(stdout);
    double t0 = lowp_test_now();
    const int failed = lowp_test_run(attn_suite(), LOWP_TEST_NOFORK, NULL);
    printf("attn: %llu cases, %llu outputs, %llu failures, %.1f s\n", total_cases, total_outputs,
           total_bad, lowp_test_now() - t0);
    return (failed || total_bad) ? EXIT_FAILURE : EXIT_SUCCESS;
}
