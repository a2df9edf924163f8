/* tests/test_certify.c: lowp/certify.h.
 *
 * 1. The bound (lowp_certify_row_bound) against emulations of every declared arithmetic:
 *    an emulated kernel (below, written from the declaration in lowp/certify.h, not from
 *    certify.c) on >= 10^4 random and adversarial rows stays within its bound of the exact
 *    attention (the binary64 reference, whose own bound is added); a kernel doing one
 *    rounding more than it declares (P to E4M3 while declaring BF16) is caught.
 * 2. The layouts: caches written by lowp's own cache model (lowp/kvcache.h, an independent
 *    implementation of the NHD/HND and interleave orders) handed over as vLLM, FlashInfer,
 *    SGLang and TRT-LLM buffers; lowp's GPU-kernel emulator (lowp/attn_gpu_emul.h, BF16 Q
 *    and P, MMA fp32 accumulation, split-K) is the kernel under test: all within bound. A
 *    perturbed output is outside; wrong declared scale orders, swapped NHD/HND and an
 *    ignored k_scale are named by the diagnosis.
 * 3. Extend / prefill (qo_indptr): lowp's GPU extend kernel emulator (lowp/attn_gpu_extend.h,
 *    causal chunks over an FP8 workspace, read here as a vLLM FP8 cache) on a ragged batch
 *    with a prefill (prefix 0) and a one-token chunk is within bound everywhere, and its
 *    exact values are lowp_gpu_extend_reference's (an independent code path: the position
 *    of each query is right); the same kernel run with every query seeing one key more
 *    (a causal off-by-one) is flagged outside on rows of every sequence; bad query
 *    layouts are refused with the reason.
 * 4. Quantize-on-write (lowp_certify_kv_write): tokens written by lowp's cache model into a
 *    TRT-LLM-ordered cache (HND, V scales interleaved: lowp/kvcache.h's own addressing) are
 *    exact under certify's TRT-LLM formulas; one flipped code bit is named (token, K/V,
 *    head, byte, both values); the V scales read linearly are named by the diagnosis; a
 *    padding slot is skipped; a repeated or out-of-pool slot is refused.
 * LOWP_SEED reproduces a run. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lowp/attn.h"
#include "lowp/attn_gpu_emul.h"
#include "lowp/attn_gpu_extend.h"
#include "lowp/certify.h"
#include "lowp/format.h"
#include "lowp/kvcache.h"
#include "lowp_test.h"

static uint64_t g_seed;

/* ---- an emulated kernel, from the declaration ------------------------------------------ */
static float rnd(lowp_certify_dtype d, float x)
{
    if (d == LOWP_CERTIFY_F32)
        return x;
    static const lowp_format f[] = {LOWP_BF16, LOWP_BF16, LOWP_F16, LOWP_E4M3};
    static lowp_codec c[LOWP_CERTIFY_DTYPE_COUNT];
    static int ready[LOWP_CERTIFY_DTYPE_COUNT];
    if (!ready[d]) { /* CUDA's RN conversions; E4M3 satfinite (cvt.rn.satfinite) */
        lowp_codec_init(&c[d], f[d], LOWP_PROFILE_CUDA, LOWP_RN, d == LOWP_CERTIFY_E4M3 ? LOWP_SAT_ON : LOWP_SAT_DEFAULT,
                        NULL, 0);
        ready[d] = 1;
    }
    return lowp_decode_f32(f[d], lowp_encode_f32(&c[d], x));
}

typedef struct emu {
    lowp_certify_arith decl; /* what the kernel declares */
    lowp_certify_dtype p_real; /* what it really rounds P to */
    size_t tile;             /* online-softmax tile (positions per running-max update) */
    int use_exp2;            /* exp2 with log2 e folded into the scale */
    int l_rounded;           /* l sums the rounded P */
    int exp_jitter;          /* perturb every exp by up to 2^-22 relative */
    lowp_certify_dtype prod_real; /* what it really rounds each Q.K product to */
    int mma_f;               /* > 0: both dots are tensor-core steps keeping mma_f fraction bits */
    size_t qk_g;             /* products per Q.K step when mma_f > 0 */
    uint64_t rng;
} emu;

/* One tensor-core step, from lowp/certify.h's mma_frac: C and the nt terms t (exact
 * products) aligned to the largest exponent E among them (2^E <= max |x| < 2^(E+1)), each
 * truncated toward zero to a multiple of 2^(E - f), summed exactly (binary64 holds the sum:
 * f + 8 < 53 bits for nt < 128), the sum truncated to min(f, 23) fraction bits. */
static float mma_step(float C, const double *t, size_t nt, int f)
{
    double mx = fabs((double)C);
    for (size_t i = 0; i < nt; i++)
        mx = fabs(t[i]) > mx ? fabs(t[i]) : mx;
    if (mx == 0.0)
        return C;
    int E;
    frexp(mx, &E);
    E -= 1; /* 2^E <= mx < 2^(E+1) */
    double sum = trunc(ldexp((double)C, f - E));
    for (size_t i = 0; i < nt; i++)
        sum += trunc(ldexp(t[i], f - E));
    sum = ldexp(sum, E - f);
    if (sum == 0.0)
        return 0.0f;
    int Es, fo = f < 23 ? f : 23;
    frexp(sum, &Es);
    Es -= 1;
    return (float)ldexp(trunc(ldexp(sum, fo - Es)), Es - fo);
}

static float emu_exp(emu *e, float x)
{
    float r = e->use_exp2 ? exp2f(x) : expf(x);
    if (e->exp_jitter) {
        int k = lowp_test_irange(&e->rng, -1, 1);
        r = r * (1.0f + (float)k * 0x1p-22f);
    }
    return r;
}

/* One query row: q8 [D] the kernel's query elements (after its cast), qs the query scale it
 * folds, k [n][D], v [n][Dv] the elements it multiplies, ks/vs the global scales; out [Dv]. */
static void emu_row(emu *e, size_t n, size_t D, size_t Dv, const float *q8, float qs, const float *k, float ks,
                    const float *v, float vs, double sm, float *out)
{
    const lowp_certify_arith *a = &e->decl;
    float sc = (float)sm;
    sc = sc * qs;
    sc = sc * ks;
    if (e->use_exp2)
        sc = sc * 1.44269504f;
    size_t split = a->split_tokens ? a->split_tokens : n, b = a->mma_k > 1 ? a->mma_k : 1;
    size_t C = (n + split - 1) / split;
    float *s = malloc(n * sizeof *s), *mc = malloc(C * sizeof *mc), *lc = malloc(C * sizeof *lc);
    float *oc = malloc(C * Dv * sizeof *oc), *o = malloc(Dv * sizeof *o);
    for (size_t j = 0; j < n; j++) {
        float acc = 0.0f;
        if (e->mma_f > 0) {
            double t[128];
            for (size_t d0 = 0; d0 < D; d0 += e->qk_g) {
                size_t nt = d0 + e->qk_g < D ? e->qk_g : D - d0;
                for (size_t i = 0; i < nt; i++)
                    t[i] = (double)q8[d0 + i] * (double)k[j * D + d0 + i];
                acc = mma_step(acc, t, nt, e->mma_f);
            }
        } else
            for (size_t d = 0; d < D; d++)
                acc = acc + rnd(e->prod_real, q8[d] * k[j * D + d]);
        s[j] = acc * sc;
    }
    for (size_t c = 0; c < C; c++) {
        size_t j0 = c * split, j1 = j0 + split < n ? j0 + split : n;
        float m = -INFINITY, l = 0.0f;
        for (size_t d = 0; d < Dv; d++)
            o[d] = 0.0f;
        for (size_t t0 = j0; t0 < j1; t0 += e->tile) {
            size_t t1 = t0 + e->tile < j1 ? t0 + e->tile : j1;
            float mt = m;
            for (size_t j = t0; j < t1; j++)
                mt = s[j] > mt ? s[j] : mt;
            float alpha = m == -INFINITY ? 0.0f : emu_exp(e, m - mt);
            l = l * alpha;
            for (size_t d = 0; d < Dv; d++)
                o[d] = o[d] * alpha;
            m = mt;
            for (size_t jb = t0; jb < t1; jb += b) { /* mma_k positions summed, then added */
                size_t je = jb + b < t1 ? jb + b : t1;
                float P[4096], lsum = 0.0f;
                for (size_t j = jb; j < je; j++) {
                    float p = emu_exp(e, s[j] - m);
                    P[j - jb] = rnd(e->p_real, p);
                    lsum = lsum + (e->l_rounded ? P[j - jb] : p);
                }
                l = l + lsum;
                for (size_t d = 0; d < Dv; d++) {
                    if (e->mma_f > 0) { /* one tensor-core step of je - jb positions into o */
                        double t[128];
                        for (size_t j = jb; j < je; j++)
                            t[j - jb] = (double)P[j - jb] * (double)v[j * Dv + d];
                        o[d] = mma_step(o[d], t, je - jb, e->mma_f);
                        continue;
                    }
                    float part = 0.0f;
                    for (size_t j = jb; j < je; j++)
                        part = part + P[j - jb] * v[j * Dv + d];
                    o[d] = o[d] + part;
                }
            }
        }
        mc[c] = m;
        lc[c] = l;
        for (size_t d = 0; d < Dv; d++) /* the partial, normalized, stored in partial_dtype */
            oc[c * Dv + d] = C > 1 ? rnd(a->partial_dtype, o[d] / l) : o[d] / l;
    }
    float M = -INFINITY;
    for (size_t c = 0; c < C; c++)
        M = mc[c] > M ? mc[c] : M;
    float L = 0.0f;
    for (size_t d = 0; d < Dv; d++)
        o[d] = 0.0f;
    for (size_t c = 0; c < C; c++) {
        float w = lc[c] * emu_exp(e, mc[c] - M);
        L = L + w;
        for (size_t d = 0; d < Dv; d++)
            o[d] = o[d] + oc[c * Dv + d] * w;
    }
    for (size_t d = 0; d < Dv; d++) {
        float t = o[d] / L;
        out[d] = a->v_scale_after_output ? rnd(a->out_dtype, rnd(a->out_dtype, t) * vs) : rnd(a->out_dtype, t * vs);
    }
    free(s);
    free(mc);
    free(lc);
    free(oc);
    free(o);
}

/* ---- random and adversarial rows ---------------------------------------------------------- */
enum { K_RANDOM, K_PEAKED, K_CANCEL, K_TAIL, K_OUTLIER, K_LONG, K_KINDS };

typedef struct row_case {
    size_t n, D, Dv;
    float *q, *k, *v; /* q before the cast; k, v elements (E4M3 or BF16 values) */
    float qs, ks, vs;
    double sm;
} row_case;

static void make_case(uint64_t *r, int kind, row_case *c)
{
    c->D = (size_t)16 << lowp_test_irange(r, 0, kind == K_LONG ? 1 : 3);
    c->Dv = (size_t)8 << lowp_test_irange(r, 0, kind == K_LONG ? 1 : 2);
    c->n = kind == K_LONG ? (size_t)lowp_test_irange(r, 1000, 2500) : (size_t)lowp_test_irange(r, 1, 120);
    c->q = lowp_test_xmalloc(c->D * sizeof(float));
    c->k = lowp_test_xmalloc(c->n * c->D * sizeof(float));
    c->v = lowp_test_xmalloc(c->n * c->Dv * sizeof(float));
    c->ks = ldexpf(1.0f + (float)lowp_test_urand(r), lowp_test_irange(r, -6, 2));
    c->vs = ldexpf(1.0f + (float)lowp_test_urand(r), lowp_test_irange(r, -6, 2));
    c->qs = ldexpf(1.0f, lowp_test_irange(r, -4, 0));
    c->sm = 1.0 / sqrt((double)c->D);
    lowp_certify_dtype kd = lowp_test_irange(r, 0, 1) ? LOWP_CERTIFY_E4M3 : LOWP_CERTIFY_BF16;
    double qamp = kind == K_PEAKED ? 4.0 + 8.0 * lowp_test_urand(r) : 1.0;
    for (size_t d = 0; d < c->D; d++)
        c->q[d] = (float)(qamp * lowp_test_gauss(r));
    for (size_t j = 0; j < c->n; j++)
        for (size_t d = 0; d < c->D; d++)
            c->k[j * c->D + d] = rnd(kd, (float)(8.0 * lowp_test_gauss(r)));
    if (kind == K_TAIL && c->n > 1) /* one dominant key, the rest near P's underflow */
        for (size_t d = 0; d < c->D; d++)
            c->k[d] = rnd(kd, (float)((c->q[d] >= 0 ? 8.0 : -8.0) * (0.1 + 1.4 * lowp_test_urand(r))));
    size_t hot = (size_t)lowp_test_irange(r, 0, (int)c->n - 1);
    for (size_t j = 0; j < c->n; j++)
        for (size_t d = 0; d < c->Dv; d++) {
            double x = 8.0 * lowp_test_gauss(r);
            if (kind == K_CANCEL) /* mixed signs of equal size: outputs near 0 */
                x = ((j + d) & 1 ? 1.0 : -1.0) * (16.0 + lowp_test_gauss(r));
            if (kind == K_OUTLIER && j == hot)
                x = (d & 1 ? -1.0 : 1.0) * 440.0;
            c->v[j * c->Dv + d] = rnd(kd, (float)x);
        }
}

static void free_case(row_case *c)
{
    free(c->q);
    free(c->k);
    free(c->v);
}

/* max over d of |emulated - exact| / (B + r), r the reference's bound; -1 if the bound
 * does not apply (too coarse). */
static double run_case(emu *e, const row_case *c)
{
    e->decl.q_scale = c->qs; /* used by E4M3 queries only */
    const lowp_certify_arith *a = &e->decl;
    size_t n = c->n, D = c->D, Dv = c->Dv;
    float *q8 = lowp_test_xmalloc(D * sizeof *q8), *out = lowp_test_xmalloc(Dv * sizeof *out);
    double *qh = lowp_test_xmalloc(D * sizeof *qh), *k = lowp_test_xmalloc(n * D * sizeof *k);
    double *v = lowp_test_xmalloc(n * Dv * sizeof *v), *ref = lowp_test_xmalloc(Dv * sizeof *ref);
    double *rb = lowp_test_xmalloc(Dv * sizeof *rb), *B = lowp_test_xmalloc(Dv * sizeof *B);
    float qs = a->q_dtype == LOWP_CERTIFY_E4M3 ? c->qs : 1.0f;
    for (size_t d = 0; d < D; d++) {
        q8[d] = a->q_dtype == LOWP_CERTIFY_E4M3 ? rnd(LOWP_CERTIFY_E4M3, c->q[d] / qs) : rnd(a->q_dtype, c->q[d]);
        qh[d] = (double)q8[d] * qs;
        ck_assert(qh[d] == lowp_certify_round_q(a, c->q[d]));
    }
    for (size_t i = 0; i < n * D; i++)
        k[i] = (double)c->k[i] * c->ks;
    for (size_t i = 0; i < n * Dv; i++)
        v[i] = (double)c->v[i] * c->vs;
    emu_row(e, n, D, Dv, q8, qs, c->k, c->ks, c->v, c->vs, c->sm, out);
    lowp_attn_shape sh = {1, 1, 1, D, Dv, n, n - 1, c->sm};
    char why[256];
    ck_assert_msg(lowp_attn_ref_f64(&sh, qh, k, v, ref, NULL, why, sizeof why) == 0, "%s", why);
    ck_assert_msg(lowp_attn_ref_bounds(&sh, qh, k, v, rb, why, sizeof why) == 0, "%s", why);
    double worst = 0.0;
    if (lowp_certify_row_bound(a, n, D, Dv, c->sm, c->vs, qh, k, v, B) != 0)
        worst = -1.0;
    for (size_t d = 0; d < Dv && worst >= 0; d++) {
        double err = fabs((double)out[d] - ref[d]), lim = B[d] + rb[d];
        ck_assert_msg(isfinite(B[d]) && B[d] > 0, "bound %g at dim %zu", B[d], d);
        double r = err / lim;
        worst = r > worst ? r : worst;
    }
    free(q8);
    free(out);
    free(qh);
    free(k);
    free(v);
    free(ref);
    free(rb);
    free(B);
    return worst;
}

static lowp_certify_arith draw_arith(uint64_t *r)
{
    lowp_certify_arith a = lowp_certify_arith_default();
    a.q_dtype = (lowp_certify_dtype)lowp_test_irange(r, 0, 3);
    a.p_dtype = (lowp_certify_dtype)lowp_test_irange(r, 0, 3);
    a.out_dtype = (lowp_certify_dtype)lowp_test_irange(r, 0, 2);
    a.split_tokens = (size_t)(lowp_test_irange(r, 0, 2) * 48);
    a.partial_dtype = (lowp_certify_dtype)lowp_test_irange(r, 0, 2);
    a.mma_k = lowp_test_irange(r, 0, 1) ? 16 : 1;
    a.v_scale_after_output = lowp_test_irange(r, 0, 1);
    a.l_unrounded = lowp_test_irange(r, 0, 1);
    switch (lowp_test_irange(r, 0, 5)) { /* tensor-core steps: H200 mma.sync E4M3, BF16, wgmma FP8 */
    case 0: a.mma_frac = 23; break;
    case 1: a.mma_frac = 25; break;
    case 2: a.mma_frac = 13; break;
    default: a.mma_frac = 0;
    }
    if (a.mma_frac > 0 && lowp_test_irange(r, 0, 1))
        a.mma_k = 32;
    if (a.mma_frac == 0) /* products are exact in a tensor core; rounded on CUDA cores */
        a.prod_dtype = (lowp_certify_dtype)lowp_test_irange(r, 0, 2);
    return a;
}

START_TEST(test_bound_holds_for_emulated_arithmetics)
{
    const int cases = 14000;
    int done = 0, coarse = 0;
    double worst[K_KINDS] = {0};
    for (int i = 0; i < cases; i++) {
        uint64_t r = lowp_test_stream(g_seed, 1, (uint64_t)i, 0);
        int kind = i % 97 == 0 ? K_LONG : lowp_test_irange(&r, 0, K_KINDS - 2);
        emu e = {.decl = draw_arith(&r), .tile = (size_t)1 << lowp_test_irange(&r, 0, 6),
                 .use_exp2 = lowp_test_irange(&r, 0, 1), .l_rounded = lowp_test_irange(&r, 0, 1),
                 .exp_jitter = lowp_test_irange(&r, 0, 1), .rng = lowp_splitmix64(&r)};
        e.p_real = e.decl.p_dtype;
        e.prod_real = e.decl.prod_dtype;
        e.mma_f = e.decl.mma_frac;
        e.qk_g = lowp_test_irange(&r, 0, 1) ? 32 : 16;
        if (e.decl.l_unrounded)
            e.l_rounded = 0;
        row_case c;
        make_case(&r, kind, &c);
        double w = run_case(&e, &c);
        free_case(&c);
        if (w < 0) {
            coarse++;
            continue;
        }
        done++;
        ck_assert_msg(w <= 1.0, "case %d (kind %d, q %s p %s out %s split %zu partial %s mma_k %zu v_after %d prod %s "
                      "l_unrounded %d mma_frac %d): error / bound = %g",
                      i, kind, lowp_certify_dtype_name(e.decl.q_dtype), lowp_certify_dtype_name(e.decl.p_dtype),
                      lowp_certify_dtype_name(e.decl.out_dtype), e.decl.split_tokens,
                      lowp_certify_dtype_name(e.decl.partial_dtype), e.decl.mma_k, e.decl.v_scale_after_output,
                      lowp_certify_dtype_name(e.decl.prod_dtype), e.decl.l_unrounded, e.decl.mma_frac, w);
        worst[kind] = w > worst[kind] ? w : worst[kind];
    }
    printf("test_certify: seed 0x%llx, %d emulated rows within bound (%d too coarse for a bound); worst error/bound "
           "random %.3f peaked %.3f cancel %.3f tail %.3f outlier %.3f long %.3f\n",
           (unsigned long long)g_seed, done, coarse, worst[K_RANDOM], worst[K_PEAKED], worst[K_CANCEL],
           worst[K_TAIL], worst[K_OUTLIER], worst[K_LONG]);
    ck_assert_int_ge(done, 10000);
}
END_TEST

/* A kernel that rounds P to E4M3 while declaring BF16 is outside its bound. */
START_TEST(test_extra_rounding_is_caught)
{
    int caught = 0, tried = 0;
    for (int i = 0; i < 20 && !caught; i++, tried++) {
        uint64_t r = lowp_test_stream(g_seed, 2, (uint64_t)i, 0);
        emu e = {.decl = lowp_certify_arith_default(), .tile = 16, .rng = 1};
        e.decl.q_dtype = LOWP_CERTIFY_BF16;
        e.p_real = LOWP_CERTIFY_E4M3;
        row_case c;
        make_case(&r, K_PEAKED, &c);
        double w = run_case(&e, &c);
        free_case(&c);
        caught = w > 1.0;
    }
    ck_assert_msg(caught, "P rounded to e4m3 under a bf16 declaration was not caught in %d cases", tried);
    printf("test_certify: the extra P rounding was caught on case %d\n", tried - 1);
}
END_TEST

/* A kernel that does less precise arithmetic than it declares is caught: it differs from
 * its declaration in exactly one of (products rounded to BF16 | a 13-bit tensor-core window |
 * l summing the E4M3-rounded P), on one kind of row (more rows of that kind until one is
 * outside, at most 40). Returns the case that caught it, or -1. */
static int caught_case(int which, int kind)
{
    for (int i = 0; i < 40; i++) {
        uint64_t r = lowp_test_stream(g_seed, 3, (uint64_t)(which * 1000 + i), 0);
        emu e = {.decl = lowp_certify_arith_default(), .tile = 16, .rng = 1, .qk_g = 32};
        e.decl.q_dtype = LOWP_CERTIFY_BF16;
        e.decl.out_dtype = LOWP_CERTIFY_F32;
        e.decl.p_dtype = LOWP_CERTIFY_F32;
        if (which == 0)
            e.prod_real = LOWP_CERTIFY_BF16; /* declared F32 products */
        if (which == 1) {
            e.decl.mma_frac = 23;
            e.decl.mma_k = 32;
            e.mma_f = 13;
        }
        if (which == 2) {
            e.decl.p_dtype = LOWP_CERTIFY_E4M3;
            e.decl.l_unrounded = 1;
            e.l_rounded = 1;
        }
        e.p_real = e.decl.p_dtype;
        row_case c;
        make_case(&r, kind, &c);
        if (which == 2) {
            /* Where l's rounding shows: one key at score 0 (P = 1 exactly) holds all of V;
             * the other n - 1 have weight e^-6.59375 = 0.70 x 2^-9, which E4M3 rounds up to
             * 2^-9, so a rounded l is 1.3x too large in its tail while the numerator is exact:
             * with n ~ 2000 the output is ~25% low, against a bound of about 2 u_p |o|. */
            free_case(&c);
            c.n = 1000 + (size_t)i * 50;
            c.D = 16;
            c.Dv = 8;
            c.q = calloc(c.D, sizeof(float));
            c.k = calloc(c.n * c.D, sizeof(float));
            c.v = calloc(c.n * c.Dv, sizeof(float));
            c.qs = c.ks = c.vs = 1.0f;
            c.sm = 0.25;
            c.q[0] = 1.0f;
            for (size_t j = 1; j < c.n; j++)
                c.k[j * c.D] = -26.375f;
            for (size_t d = 0; d < c.Dv; d++)
                c.v[d] = 1.0f + 0.125f * (float)d;
        }
        double w = run_case(&e, &c);
        free_case(&c);
        if (w > 1.0)
            return i;
    }
    return -1;
}

START_TEST(test_less_precise_arithmetic_is_caught)
{
    static const char *what[] = {"Q.K products rounded to bf16 under an f32 declaration",
                                 "a 13-bit tensor-core window under a 23-bit declaration",
                                 "l summing the e4m3 P under an l_unrounded declaration"};
    static const int kind[] = {K_PEAKED, K_LONG, K_RANDOM};
    for (int w = 0; w < 3; w++) {
        int at = caught_case(w, kind[w]);
        ck_assert_msg(at >= 0, "%s was not caught in 40 rows", what[w]);
        printf("test_certify: %s: caught on row %d\n", what[w], at);
    }
}
END_TEST

/* The tensor-core term of the bound is needed and sufficient: a 13-bit window (wgmma FP8)
 * on P.V over rows whose scores are near 0 (flat softmax, every score term negligible) and
 * positive V (the accumulator grows, so every step truncates against it) is within the bound
 * when declared (mma_frac 13), and outside the bound of fp32 steps (mma_frac 0): without the
 * S e_b V_d term the declared bound would be the latter's. */
START_TEST(test_mma_window_term_is_needed)
{
    int within = 0, outside = 0;
    for (int i = 0; i < 8; i++) {
        uint64_t r = lowp_test_stream(g_seed, 4, (uint64_t)i, 0);
        row_case c = {.n = (size_t)lowp_test_irange(&r, 600, 900), .D = 16, .Dv = 8, .qs = 1.0f, .ks = 1.0f,
                      .vs = 1.0f, .sm = 0.25};
        c.q = lowp_test_xmalloc(c.D * sizeof(float));
        c.k = lowp_test_xmalloc(c.n * c.D * sizeof(float));
        c.v = lowp_test_xmalloc(c.n * c.Dv * sizeof(float));
        for (size_t d = 0; d < c.D; d++)
            c.q[d] = rnd(LOWP_CERTIFY_BF16, (float)(0.01 * lowp_test_gauss(&r)));
        for (size_t x = 0; x < c.n * c.D; x++)
            c.k[x] = rnd(LOWP_CERTIFY_BF16, (float)lowp_test_gauss(&r));
        for (size_t x = 0; x < c.n * c.Dv; x++)
            c.v[x] = rnd(LOWP_CERTIFY_BF16, (float)(1.0 + lowp_test_urand(&r)));
        for (int declared = 0; declared < 2; declared++) {
            emu e = {.decl = lowp_certify_arith_default(), .tile = 64, .rng = 1, .qk_g = 16, .mma_f = 13};
            e.decl.q_dtype = LOWP_CERTIFY_BF16;
            e.decl.p_dtype = e.p_real = LOWP_CERTIFY_F32;
            e.decl.out_dtype = LOWP_CERTIFY_F32;
            e.decl.mma_k = 32;
            e.decl.mma_frac = declared ? 13 : 0;
            double w = run_case(&e, &c);
            ck_assert_msg(w >= 0, "row %d: the bound refused (too coarse)", i);
            if (declared)
                ck_assert_msg(w <= 1.0, "row %d (n %zu): 13-bit steps declared, error / bound %g", i, c.n, w);
            within += declared && w <= 1.0;
            outside += !declared && w > 1.0;
        }
        free_case(&c);
    }
    ck_assert_msg(outside == 8, "13-bit steps under an fp32 declaration: only %d of 8 rows outside", outside);
    printf("test_certify: 13-bit P.V steps: %d of 8 rows within as declared, %d of 8 outside as fp32 steps\n", within,
           outside);
}
END_TEST

/* ---- layouts, with lowp's kernel emulator as the kernel ------------------------------- */
typedef struct paged {
    lowp_kvcache *nhd, *alt; /* the same tokens, NHD linear and in the layout's own order */
    int32_t indptr[5], indices[64], last[5], bt[4 * 16], lens[4];
    size_t batch, num_pages;
    float *q, *out;
    size_t Hq;
} paged;

/* Writes batch sequences of random tokens into two caches (cfg NHD linear, and alt_cfg),
 * over shuffled pages, and runs lowp's kernel emulator on the NHD one. */
static void make_paged(paged *p, lowp_block_format f, const lowp_kv_config *alt_cfg, float ks, float vs,
                       uint64_t stream)
{
    memset(p, 0, sizeof *p);
    uint64_t r = lowp_test_stream(g_seed, 3, stream, 0);
    const size_t P = 16, H = 2, G = 4, D = 64;
    p->batch = 4;
    p->Hq = H * G;
    size_t np = 0;
    p->indptr[0] = 0;
    for (size_t b = 0; b < p->batch; b++) {
        p->lens[b] = lowp_test_irange(&r, 1, 150);
        size_t n = ((size_t)p->lens[b] + P - 1) / P;
        p->indptr[b + 1] = p->indptr[b] + (int32_t)n;
        p->last[b] = p->lens[b] - (int32_t)((n - 1) * P);
        np += n;
    }
    p->num_pages = np + 3;
    for (size_t i = 0; i < np; i++)
        p->indices[i] = (int32_t)i + 2;
    for (size_t i = np; i > 1; i--) { /* shuffled, non-monotonic pages */
        size_t j = (size_t)lowp_test_irange(&r, 0, (int)i - 1);
        int32_t t = p->indices[i - 1];
        p->indices[i - 1] = p->indices[j];
        p->indices[j] = t;
    }
    for (size_t b = 0; b < p->batch; b++)
        for (int32_t i = p->indptr[b]; i < p->indptr[b + 1]; i++)
            p->bt[b * 16 + (size_t)(i - p->indptr[b])] = p->indices[i];
    lowp_kv_config cfg = lowp_kv_config_default(f, p->num_pages, P, H, D, D);
    lowp_kv_config acfg = *alt_cfg;
    acfg.num_pages = p->num_pages;
    char why[256];
    ck_assert_msg(lowp_kvcache_create(&cfg, &p->nhd, why, sizeof why) == 0, "%s", why);
    ck_assert_msg(lowp_kvcache_create(&acfg, &p->alt, why, sizeof why) == 0, "%s", why);
    if (lowp_block_has_global_scale(f)) {
        ck_assert(lowp_kvcache_set_global_scales(p->nhd, &ks, &vs, 1, why, sizeof why) == 0);
        ck_assert(lowp_kvcache_set_global_scales(p->alt, &ks, &vs, 1, why, sizeof why) == 0);
    }
    lowp_kv_page_table pt = {p->batch, p->indptr, p->indices, p->last};
    float kr[2 * 64], vr[2 * 64];
    for (size_t b = 0; b < p->batch; b++)
        for (size_t t = 0; t < (size_t)p->lens[b]; t++) {
            for (size_t i = 0; i < H * D; i++) {
                kr[i] = (float)(ks * 200.0 * lowp_test_gauss(&r) / 448.0 * 2.0);
                vr[i] = (float)(vs * 200.0 * lowp_test_gauss(&r) / 448.0 * 2.0);
            }
            ck_assert(lowp_kvcache_write_pos(p->nhd, &pt, b, t, kr, vr, NULL, NULL, why, sizeof why) == 0);
            ck_assert(lowp_kvcache_write_pos(p->alt, &pt, b, t, kr, vr, NULL, NULL, why, sizeof why) == 0);
        }
    size_t nq = p->batch * p->Hq * D;
    uint16_t *qb = lowp_test_xmalloc(nq * sizeof *qb), *ob = lowp_test_xmalloc(nq * sizeof *ob);
    p->q = lowp_test_xmalloc(nq * sizeof *p->q);
    p->out = lowp_test_xmalloc(nq * sizeof *p->out);
    for (size_t i = 0; i < nq; i++) {
        qb[i] = lowp_bf16_from_f32((float)lowp_test_gauss(&r));
        p->q[i] = lowp_f32_from_bf16(qb[i]);
    }
    lowp_kv_view view = lowp_kvcache_view(p->nhd);
    lowp_gpu_decode_args ga = {p->nhd, &view, &pt, p->Hq, 0.0, qb, 0, NULL, 1};
    ck_assert_msg(lowp_gpu_decode_emulate(&ga, ob, why, sizeof why) == 0, "%s", why);
    for (size_t i = 0; i < nq; i++)
        p->out[i] = lowp_f32_from_bf16(ob[i]);
    free(qb);
    free(ob);
}

/* The layout's own order for make_paged's second cache (2 KV heads, dims 64, page 16). */
static lowp_kv_config alt_config(lowp_block_format f, lowp_kv_layout l, lowp_kv_sf_order v_sf)
{
    lowp_kv_config c = lowp_kv_config_default(f, 1, 16, 2, 64, 64);
    c.layout = l;
    c.v_sf_order = v_sf;
    return c;
}

static void free_paged(paged *p)
{
    lowp_kvcache_destroy(p->nhd);
    lowp_kvcache_destroy(p->alt);
    free(p->q);
    free(p->out);
}

/* lowp's kernel as declared: BF16 Q, BF16 P, BF16 out, MMA k 16, fp32 partials. */
static lowp_certify_arith lowp_kernel_arith(void)
{
    lowp_certify_arith a = lowp_certify_arith_default();
    a.q_dtype = LOWP_CERTIFY_BF16;
    a.mma_k = 16;
    a.split_tokens = 128;
    return a;
}

/* The pools of src (2 KV heads, dims 64, page 16) handed over as layout l's buffers. */
static lowp_certify_cache pools_of(lowp_certify_layout l, size_t num_pages, const lowp_kvcache *src, float ks,
                                   float vs)
{
    lowp_certify_cache c = lowp_certify_cache_init(l, num_pages, 16, 2, 64, 64);
    c.format = lowp_kvcache_config(src)->format;
    c.k = lowp_kvcache_cbuffer(src, LOWP_KV_K, LOWP_KV_CODES, NULL);
    c.v = lowp_kvcache_cbuffer(src, LOWP_KV_V, LOWP_KV_CODES, NULL);
    c.k_sf = lowp_kvcache_cbuffer(src, LOWP_KV_K, LOWP_KV_SCALES, NULL);
    c.v_sf = lowp_kvcache_cbuffer(src, LOWP_KV_V, LOWP_KV_SCALES, NULL);
    c.k_scale = ks;
    c.v_scale = vs;
    return c;
}

static lowp_certify_cache cache_of(const paged *p, lowp_certify_layout l, const lowp_kvcache *src, float ks,
                                   float vs, int use_block_table)
{
    lowp_certify_cache c = pools_of(l, p->num_pages, src, ks, vs);
    c.batch = p->batch;
    if (use_block_table) {
        c.block_table = p->bt;
        c.max_blocks = 16;
        c.seq_lens = p->lens;
    } else {
        c.indptr = p->indptr;
        c.indices = p->indices;
        c.last_page_len = p->last;
    }
    return c;
}

static lowp_certify_result certify(const paged *p, const lowp_certify_cache *c, const float *out)
{
    lowp_certify_arith a = lowp_kernel_arith();
    lowp_certify_args args = lowp_certify_args_init(c, &a, p->Hq, p->q, out);
    args.threads = 2;
    lowp_certify_result res;
    char why[256];
    ck_assert_msg(lowp_certify_run(&args, &res, why, sizeof why) == 0, "%s", why);
    return res;
}

static void expect_clean(const lowp_certify_result *r, const char *what)
{
    ck_assert_msg(r->counts[LOWP_CERTIFY_OUTSIDE] == 0 && r->counts[LOWP_CERTIFY_NAN_MISMATCH] == 0,
                  "%s: %zu outside, %zu NaN mismatches (worst ratio %g, first at seq %zu head %zu dim %zu got %.9g "
                  "exact %.9g bound %.3g)",
                  what, r->counts[LOWP_CERTIFY_OUTSIDE], r->counts[LOWP_CERTIFY_NAN_MISMATCH], r->worst_ratio,
                  r->worst[0].batch, r->worst[0].head, r->worst[0].dim, r->worst[0].got, r->worst[0].exact,
                  r->worst[0].bound);
    ck_assert(r->outputs == r->counts[0] + r->counts[1]);
}

/* The certificate of a misdeclared cache fails and its diagnosis holds words. */
static void expect_diagnosis(const paged *p, const lowp_certify_cache *c, const char *words)
{
    lowp_certify_result r = certify(p, c, p->out);
    ck_assert_uint_gt(r.counts[LOWP_CERTIFY_OUTSIDE] + r.counts[LOWP_CERTIFY_NAN_MISMATCH], 0);
    ck_assert_msg(strstr(r.diagnosis, words) != NULL, "diagnosis: '%s', expected '%s'", r.diagnosis, words);
}

START_TEST(test_vllm_fp8_lowp_kernel_within_and_perturbed_outside)
{
    paged p;
    lowp_kv_config alt = alt_config(LOWP_FP8_E4M3, LOWP_KV_NHD, LOWP_KV_SF_LINEAR);
    make_paged(&p, LOWP_FP8_E4M3, &alt, 0.25f, 0.5f, 1);
    lowp_certify_cache c = cache_of(&p, LOWP_CERTIFY_VLLM_FP8, p.alt, 0.25f, 0.5f, 1);
    lowp_certify_result r = certify(&p, &c, p.out);
    expect_clean(&r, "vllm-fp8");
    ck_assert_int_gt(r.counts[LOWP_CERTIFY_EXACT], 0);
    printf("test_certify: vllm-fp8, lowp's kernel emulator: %zu exact, %zu within, worst ratio %.3f\n",
           r.counts[0], r.counts[1], r.worst_ratio);
    /* one output moved by 4% (the size of a P rounded to fp8 more than declared) */
    size_t no = p.batch * p.Hq * 64, at = no / 3;
    float *bad = lowp_test_xmalloc(no * sizeof *bad);
    memcpy(bad, p.out, no * sizeof *bad);
    bad[at] = bad[at] * 1.04f + 0.01f;
    r = certify(&p, &c, bad);
    ck_assert_uint_eq(r.counts[LOWP_CERTIFY_OUTSIDE], 1);
    ck_assert_uint_eq(r.worst[0].batch, at / (p.Hq * 64));
    ck_assert_uint_eq(r.worst[0].head, (at / 64) % p.Hq);
    ck_assert_uint_eq(r.worst[0].dim, at % 64);
    ck_assert_str_eq(r.diagnosis, "");
    bad[at] = NAN;
    r = certify(&p, &c, bad);
    ck_assert_uint_eq(r.counts[LOWP_CERTIFY_NAN_MISMATCH], 1);
    ck_assert_int_eq(r.worst[0].verdict, LOWP_CERTIFY_NAN_MISMATCH);
    free(bad);
    free_paged(&p);
}
END_TEST

START_TEST(test_ignored_k_scale_is_named)
{
    paged p;
    lowp_kv_config alt = alt_config(LOWP_FP8_E4M3, LOWP_KV_NHD, LOWP_KV_SF_LINEAR);
    make_paged(&p, LOWP_FP8_E4M3, &alt, 1.0f, 0.5f, 2); /* the kernel ran with k_scale 1 */
    lowp_certify_cache c = cache_of(&p, LOWP_CERTIFY_VLLM_FP8, p.alt, 0.125f, 0.5f, 1); /* declared 0.125 */
    expect_diagnosis(&p, &c, "ignore k_scale");
    free_paged(&p);
}
END_TEST

START_TEST(test_flashinfer_hnd_and_swap_named)
{
    paged p;
    lowp_kv_config alt = alt_config(LOWP_BF16_PASS, LOWP_KV_HND, LOWP_KV_SF_LINEAR);
    make_paged(&p, LOWP_BF16_PASS, &alt, 1.0f, 1.0f, 3);
    lowp_certify_cache c = cache_of(&p, LOWP_CERTIFY_FLASHINFER, p.alt, 1.0f, 1.0f, 0);
    c.code_order = c.sf_order = LOWP_KV_HND;
    lowp_certify_result r = certify(&p, &c, p.out);
    expect_clean(&r, "flashinfer hnd bf16");
    c.code_order = c.sf_order = LOWP_KV_NHD; /* the HND bytes declared NHD */
    expect_diagnosis(&p, &c, "HND/NHD swapped: the pages look hnd, layout says nhd");
    free_paged(&p);
}
END_TEST

START_TEST(test_trtllm_nvfp4_and_v_scale_order_named)
{
    paged p;
    lowp_kv_config alt = alt_config(LOWP_NVFP4, LOWP_KV_HND, LOWP_KV_SF_INTERLEAVE4);
    make_paged(&p, LOWP_NVFP4, &alt, 0.02f, 0.03f, 4);
    lowp_certify_cache c = cache_of(&p, LOWP_CERTIFY_TRTLLM, p.alt, 0.02f, 0.03f, 1);
    lowp_certify_result r = certify(&p, &c, p.out);
    expect_clean(&r, "trtllm nvfp4");
    c.v_sf_order = LOWP_KV_SF_LINEAR; /* vLLM #50085: interleaved bytes read linearly */
    expect_diagnosis(&p, &c, "V scales look 4-token interleaved, layout says linear");
    free_paged(&p);
}
END_TEST

/* SGLang: codes slot-major (NHD), native scales HND with V interleaved: the codes of the
 * NHD cache with the scales of an HND interleaved cache holding the same tokens. */
START_TEST(test_sglang_nvfp4_mixed_orders)
{
    paged p;
    lowp_kv_config alt = alt_config(LOWP_NVFP4, LOWP_KV_HND, LOWP_KV_SF_INTERLEAVE4);
    make_paged(&p, LOWP_NVFP4, &alt, 1.0f, 1.0f, 5);
    lowp_certify_cache c = cache_of(&p, LOWP_CERTIFY_SGLANG_NVFP4, p.alt, 1.0f, 1.0f, 1);
    c.k = lowp_kvcache_cbuffer(p.nhd, LOWP_KV_K, LOWP_KV_CODES, NULL);
    c.v = lowp_kvcache_cbuffer(p.nhd, LOWP_KV_V, LOWP_KV_CODES, NULL);
    ck_assert_int_eq(c.code_order, LOWP_KV_NHD);
    ck_assert_int_eq(c.sf_order, LOWP_KV_HND);
    lowp_certify_result r = certify(&p, &c, p.out);
    expect_clean(&r, "sglang-nvfp4");
    free_paged(&p);
}
END_TEST

START_TEST(test_refusals_name_the_argument)
{
    paged p;
    lowp_kv_config alt = alt_config(LOWP_FP8_E4M3, LOWP_KV_NHD, LOWP_KV_SF_LINEAR);
    make_paged(&p, LOWP_FP8_E4M3, &alt, 1.0f, 1.0f, 6);
    lowp_certify_cache c = cache_of(&p, LOWP_CERTIFY_VLLM_FP8, p.alt, 1.0f, 1.0f, 1);
    lowp_certify_arith a = lowp_kernel_arith();
    lowp_certify_result res;
    char why[256];
    lowp_certify_args args = lowp_certify_args_init(&c, &a, p.Hq, p.q, p.out);
    args.cache.k_scale = 0.0f;
    ck_assert_int_eq(lowp_certify_run(&args, &res, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "k_scale 0 must be finite and > 0"));
    args = lowp_certify_args_init(&c, &a, p.Hq, p.q, p.out);
    args.cache.seq_lens = (int32_t[4]){5, 0, 3, 3};
    ck_assert_int_eq(lowp_certify_run(&args, &res, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "seq_lens[1] is 0"));
    args = lowp_certify_args_init(&c, &a, 3, p.q, p.out);
    ck_assert_int_eq(lowp_certify_run(&args, &res, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "num_q_heads 3"));
    args = lowp_certify_args_init(&c, &a, p.Hq, p.q, p.out);
    args.arith.out_dtype = LOWP_CERTIFY_E4M3;
    ck_assert_int_eq(lowp_certify_run(&args, &res, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "out_dtype"));
    lowp_certify_layout l;
    ck_assert_int_eq(lowp_certify_layout_parse("sglang-nvfp4", &l), 0);
    ck_assert_int_eq(l, LOWP_CERTIFY_SGLANG_NVFP4);
    ck_assert_int_eq(lowp_certify_layout_parse("sglang", &l), -1);
    free_paged(&p);
}
END_TEST


/* ---- extend / prefill, with lowp's extend kernel emulator as the kernel -------------------- */
#define XB 3
#define XH 2
#define XG 2
#define XD 64
#define XP 16
typedef struct xcase {
    int32_t qo[XB + 1], kv[XB + 1], prefix[XB], bt[XB * 8], lens[XB];
    size_t rows, kv_rows;
    uint8_t *k, *v;  /* the workspace [kv_rows][XH][XD]: a vLLM cache of pages of XP rows */
    uint16_t *qb;    /* BF16 [rows][XH XG][XD] */
    float *q, *out, *off_by_one;
} xcase;

/* Prefixes 0 (a prefill), 37 and 20 with chunks 9, 1 and 18: sequence b's region starts on
 * a page and holds at least one row past its kv_len (the row an off-by-one reads). */
static void make_xcase(xcase *x, uint64_t stream)
{
    static const int32_t P[XB] = {0, 37, 20}, QL[XB] = {9, 1, 18};
    memset(x, 0, sizeof *x);
    uint64_t r = lowp_test_stream(g_seed, 4, stream, 0);
    for (size_t b = 0; b < XB; b++) {
        x->prefix[b] = P[b];
        x->lens[b] = P[b] + QL[b];
        x->qo[b + 1] = x->qo[b] + QL[b];
        int32_t pages = x->lens[b] / XP + 1;
        x->kv[b + 1] = x->kv[b] + pages * XP;
        for (int32_t j = 0; j < pages; j++)
            x->bt[b * 8 + (size_t)j] = x->kv[b] / XP + j;
    }
    x->rows = (size_t)x->qo[XB];
    x->kv_rows = (size_t)x->kv[XB];
    lowp_codec e4;
    char why[256];
    ck_assert_msg(lowp_codec_init(&e4, LOWP_E4M3, LOWP_PROFILE_CUDA, LOWP_RN, LOWP_SAT_ON, NULL, 0) == 0, "e4m3");
    size_t nkv = x->kv_rows * XH * XD, nq = x->rows * XH * XG * XD;
    x->k = lowp_test_xmalloc(nkv);
    x->v = lowp_test_xmalloc(nkv);
    for (size_t i = 0; i < nkv; i++) {
        x->k[i] = (uint8_t)lowp_encode_f64(&e4, 2.0 * lowp_test_gauss(&r));
        x->v[i] = (uint8_t)lowp_encode_f64(&e4, 2.0 * lowp_test_gauss(&r));
    }
    x->qb = lowp_test_xmalloc(nq * sizeof *x->qb);
    x->q = lowp_test_xmalloc(nq * sizeof *x->q);
    x->out = lowp_test_xmalloc(nq * sizeof *x->out);
    x->off_by_one = lowp_test_xmalloc(nq * sizeof *x->off_by_one);
    for (size_t i = 0; i < nq; i++) {
        x->qb[i] = lowp_bf16_from_f32((float)lowp_test_gauss(&r));
        x->q[i] = lowp_f32_from_bf16(x->qb[i]);
    }
    uint16_t *ob = lowp_test_xmalloc(nq * sizeof *ob);
    int32_t pre1[XB];
    for (int pass = 0; pass < 2; pass++) {
        /* pass 1: prefix + 1 with the same chunk: query i sees 0 .. P + i + 1 */
        for (size_t b = 0; b < XB; b++)
            pre1[b] = x->prefix[b] + pass;
        lowp_gpu_extend_args ga = {XB, x->qo, x->kv, pre1, x->kv_rows, XH * XG, XH, XD, XD, 0.0,
                                   x->qb, x->k, x->v, NULL, 2, 0, 0};
        ck_assert_msg(lowp_gpu_extend_emulate(&ga, ob, why, sizeof why) == 0, "%s", why);
        float *dst = pass ? x->off_by_one : x->out;
        for (size_t i = 0; i < nq; i++)
            dst[i] = lowp_f32_from_bf16(ob[i]);
    }
    free(ob);
}

static void free_xcase(xcase *x)
{
    free(x->k);
    free(x->v);
    free(x->qb);
    free(x->q);
    free(x->out);
    free(x->off_by_one);
}

/* The workspace as a vLLM FP8 cache (scales 1: the workspace holds the scaled values) and
 * the extend kernel's declaration: BF16 Q, P and out, MMA k 16, no split. */
static lowp_certify_args xargs(const xcase *x, const float *out, lowp_certify_arith *a, lowp_certify_cache *c)
{
    *c = lowp_certify_cache_init(LOWP_CERTIFY_VLLM_FP8, x->kv_rows / XP, XP, XH, XD, XD);
    c->k = x->k;
    c->v = x->v;
    c->k_scale = c->v_scale = 1.0f;
    c->batch = XB;
    c->block_table = x->bt;
    c->max_blocks = 8;
    c->seq_lens = x->lens;
    *a = lowp_certify_arith_default();
    a->q_dtype = LOWP_CERTIFY_BF16;
    a->mma_k = 16;
    lowp_certify_args args = lowp_certify_args_init(c, a, XH * XG, x->q, out);
    args.qo_indptr = x->qo;
    args.threads = 2;
    return args;
}

START_TEST(test_extend_causal_within_and_off_by_one_flagged)
{
    xcase x;
    make_xcase(&x, 1);
    lowp_certify_arith a;
    lowp_certify_cache c;
    lowp_certify_result r;
    char why[256];
    const size_t no = x.rows * XH * XG * XD;
    double *ex = lowp_test_xmalloc(no * sizeof *ex), *ref = lowp_test_xmalloc(no * sizeof *ref);
    lowp_certify_args args = xargs(&x, x.out, &a, &c);
    args.exact = ex;
    ck_assert_msg(lowp_certify_run(&args, &r, why, sizeof why) == 0, "%s", why);
    expect_clean(&r, "extend, lowp's extend kernel emulator");
    ck_assert_uint_eq(r.outputs, no);
    printf("test_certify: extend (prefixes 0, 37, 20; chunks 9, 1, 18): %zu exact, %zu within, worst ratio %.3f\n",
           r.counts[0], r.counts[1], r.worst_ratio);
    /* the exact values are those of the extend path's own reference, query by query */
    lowp_gpu_extend_args ga = {XB, x.qo, x.kv, x.prefix, x.kv_rows, XH * XG, XH, XD, XD, 0.0,
                               x.qb, x.k, x.v, NULL, 2, 0, 0};
    ck_assert_msg(lowp_gpu_extend_reference(&ga, x.q, ref, NULL, why, sizeof why) == 0, "%s", why);
    for (size_t i = 0; i < no; i++)
        ck_assert_msg(fabs(ex[i] - ref[i]) <= 1e-12 * (fabs(ref[i]) + 1e-3), "output %zu: exact %.17g, extend "
                      "reference %.17g", i, ex[i], ref[i]);
    /* the prefill alone (sequence 0, prefix 0) */
    args.only_seq = 0;
    ck_assert_msg(lowp_certify_run(&args, &r, why, sizeof why) == 0, "%s", why);
    expect_clean(&r, "prefill, prefix 0");
    ck_assert_uint_eq(r.outputs, 9 * XH * XG * XD);
    /* a causal off-by-one: every row sees one key more; flagged in each sequence */
    args = xargs(&x, x.off_by_one, &a, &c);
    args.verdict = lowp_test_xmalloc(no);
    ck_assert_msg(lowp_certify_run(&args, &r, why, sizeof why) == 0, "%s", why);
    ck_assert_uint_gt(r.counts[LOWP_CERTIFY_OUTSIDE], 0);
    for (size_t b = 0; b < XB; b++) {
        size_t bad = 0;
        for (size_t i = (size_t)x.qo[b] * XH * XG * XD; i < (size_t)x.qo[b + 1] * XH * XG * XD; i++)
            bad += args.verdict[i] == LOWP_CERTIFY_OUTSIDE;
        ck_assert_msg(bad > 0, "sequence %zu: the off-by-one was not flagged", b);
    }
    const lowp_certify_worst *w = &r.worst[0];
    ck_assert_int_eq(w->verdict, LOWP_CERTIFY_OUTSIDE);
    ck_assert_uint_eq(w->seq_len, (size_t)x.lens[w->batch]);
    ck_assert_uint_eq(w->q_pos, (size_t)x.prefix[w->batch] + (w->row - (size_t)x.qo[w->batch]));
    ck_assert(w->row >= (size_t)x.qo[w->batch] && w->row < (size_t)x.qo[w->batch + 1]);
    printf("test_certify: causal off-by-one: %zu of %zu outside, worst at sequence %zu position %zu head %zu dim %zu "
           "(ratio %.1f)\n", r.counts[LOWP_CERTIFY_OUTSIDE], r.outputs, w->batch, w->q_pos, w->head, w->dim, w->ratio);
    free(args.verdict);
    free(ex);
    free(ref);
    free_xcase(&x);
}
END_TEST

/* Decode is extend with one query per sequence: qo_indptr 0, 1, .., batch gives the same
 * certificate as NULL; and the query layouts certify refuses. */
START_TEST(test_extend_layout_refusals_and_decode_identity)
{
    xcase x;
    make_xcase(&x, 2);
    lowp_certify_arith a;
    lowp_certify_cache c;
    lowp_certify_result r, r1;
    char why[256];
    /* the decode rows: each sequence's last query */
    float *qd = lowp_test_xmalloc(XB * XH * XG * XD * sizeof *qd), *od = lowp_test_xmalloc(sizeof *qd * XB * XH * XG * XD);
    for (size_t b = 0; b < XB; b++) {
        size_t t = (size_t)x.qo[b + 1] - 1, w = XH * XG * XD;
        memcpy(qd + b * w, x.q + t * w, w * sizeof *qd);
        memcpy(od + b * w, x.out + t * w, w * sizeof *od);
    }
    lowp_certify_args args = xargs(&x, od, &a, &c);
    args.q = qd;
    args.qo_indptr = NULL;
    ck_assert_msg(lowp_certify_run(&args, &r, why, sizeof why) == 0, "%s", why);
    expect_clean(&r, "decode rows of the extend kernel");
    int32_t id[XB + 1] = {0, 1, 2, 3};
    args.qo_indptr = id;
    ck_assert_msg(lowp_certify_run(&args, &r1, why, sizeof why) == 0, "%s", why);
    ck_assert_uint_eq(r1.outputs, r.outputs);
    ck_assert_uint_eq(r1.counts[0], r.counts[0]);
    ck_assert(r1.worst_ratio == r.worst_ratio);
    static const struct {
        int32_t qo[XB + 1];
        const char *words;
    } bad[] = {{{1, 2, 3, 4}, "qo_indptr[0] is 1"},
               {{0, 5, 4, 6}, "qo_indptr decreases at 2"},
               {{0, 9, 10, 50}, "sequence 2 has 40 queries but holds 38 tokens"},
               {{0, 10, 11, 29}, "sequence 0 has 10 queries but holds 9 tokens"},
               {{0, 0, 0, 0}, "qo_indptr[3] is 0: the batch has no queries"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        args = xargs(&x, x.out, &a, &c);
        args.qo_indptr = bad[i].qo;
        ck_assert_int_eq(lowp_certify_run(&args, &r, why, sizeof why), -1);
        ck_assert_msg(strstr(why, bad[i].words) != NULL, "'%s', expected '%s'", why, bad[i].words);
    }
    free(qd);
    free(od);
    free_xcase(&x);
}
END_TEST

/* ---- quantize-on-write -------------------------------------------------------------------- */
START_TEST(test_kv_write_exact_flipped_bit_and_scale_order)
{
    const size_t P = 16, H = 2, D = 64, pages = 4, T = 40;
    lowp_kv_config cfg = lowp_kv_config_default(LOWP_NVFP4, pages, P, H, D, D);
    cfg.layout = LOWP_KV_HND;
    cfg.v_sf_order = LOWP_KV_SF_INTERLEAVE4;
    lowp_kvcache *kc;
    char why[256];
    ck_assert_msg(lowp_kvcache_create(&cfg, &kc, why, sizeof why) == 0, "%s", why);
    const float ks = 0.02f, vs = 0.03f;
    ck_assert(lowp_kvcache_set_global_scales(kc, &ks, &vs, 1, why, sizeof why) == 0);
    uint64_t r = lowp_test_stream(g_seed, 5, 1, 0);
    float *k = lowp_test_xmalloc(T * H * D * sizeof *k), *v = lowp_test_xmalloc(T * H * D * sizeof *v);
    int64_t slots[40];
    for (size_t i = 0; i < T; i++) {
        slots[i] = (int64_t)((i * 7 + 3) % (pages * P)); /* 7 is prime to 64: 40 distinct slots */
        for (size_t x = 0; x < H * D; x++) {
            k[i * H * D + x] = lowp_f32_from_bf16(lowp_bf16_from_f32((float)(2.0 * lowp_test_gauss(&r))));
            v[i * H * D + x] = lowp_f32_from_bf16(lowp_bf16_from_f32((float)(3.0 * lowp_test_gauss(&r))));
        }
        ck_assert(lowp_kvcache_write(kc, (size_t)slots[i] / P, (size_t)slots[i] % P, k + i * H * D, v + i * H * D,
                                     NULL, NULL, why, sizeof why) == 0);
    }
    slots[5] = -1; /* a padding token: not written, not compared */
    lowp_certify_cache c = pools_of(LOWP_CERTIFY_TRTLLM, pages, kc, ks, vs);
    uint8_t verdict[40];
    lowp_certify_kv_write_args a = {c, cfg.recipe, T, slots, k, v, verdict};
    lowp_certify_kv_write_result res;
    ck_assert_msg(lowp_certify_kv_write(&a, &res, why, sizeof why) == 0, "%s", why);
    ck_assert_uint_eq(res.exact, T - 1);
    ck_assert_uint_eq(res.padding, 1);
    ck_assert_uint_eq(verdict[5], LOWP_CERTIFY_KV_PADDING);
    /* one code bit of token 9's V, head 1, byte 7 */
    size_t p9 = (size_t)slots[9] / P, t9 = (size_t)slots[9] % P;
    uint8_t *vb = lowp_kvcache_buffer(kc, LOWP_KV_V, LOWP_KV_CODES, NULL);
    vb[lowp_kvcache_code_offset(kc, LOWP_KV_V, p9, t9, 1) + 7] ^= 0x10;
    ck_assert(lowp_certify_kv_write(&a, &res, why, sizeof why) == 0);
    ck_assert_uint_eq(res.differs, 1);
    ck_assert_uint_eq(verdict[9], LOWP_CERTIFY_KV_DIFFERS);
    ck_assert(res.token == 9 && res.which == 1 && res.scales == 0 && res.head == 1 && res.index == 7);
    ck_assert_uint_eq(res.got ^ res.want, 0x10);
    ck_assert_str_eq(res.diagnosis, "");
    vb[lowp_kvcache_code_offset(kc, LOWP_KV_V, p9, t9, 1) + 7] ^= 0x10;
    /* the interleaved V scales declared linear: differs, and named */
    a.cache.v_sf_order = LOWP_KV_SF_LINEAR;
    ck_assert(lowp_certify_kv_write(&a, &res, why, sizeof why) == 0);
    ck_assert_uint_gt(res.differs, 0);
    ck_assert_int_eq(res.which, 1);
    ck_assert_int_eq(res.scales, 1);
    ck_assert_msg(strstr(res.diagnosis, "V scales look 4-token interleaved, layout says linear") != NULL, "'%s'",
                  res.diagnosis);
    a.cache.v_sf_order = LOWP_KV_SF_INTERLEAVE4;
    /* refusals */
    slots[6] = slots[7];
    ck_assert_int_eq(lowp_certify_kv_write(&a, &res, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "slot_mapping[7] = ") != NULL && strstr(why, "written twice") != NULL, "%s", why);
    slots[6] = 64;
    ck_assert_int_eq(lowp_certify_kv_write(&a, &res, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "slot_mapping[6] = 64 is past the pool") != NULL, "%s", why);
    free(k);
    free(v);
    lowp_kvcache_destroy(kc);
}
END_TEST

static Suite *certify_suite(void)
{
    Suite *s = suite_create("certify");
    lowp_test_tcase(s, "bound", 60,
                    LOWP_TESTS(test_bound_holds_for_emulated_arithmetics, test_extra_rounding_is_caught,
                               test_less_precise_arithmetic_is_caught, test_mma_window_term_is_needed));
    lowp_test_tcase(s, "layouts", 60,
                    LOWP_TESTS(test_vllm_fp8_lowp_kernel_within_and_perturbed_outside, test_ignored_k_scale_is_named,
                               test_flashinfer_hnd_and_swap_named, test_trtllm_nvfp4_and_v_scale_order_named,
                               test_sglang_nvfp4_mixed_orders, test_refusals_name_the_argument));
    lowp_test_tcase(s, "extend", 60,
                    LOWP_TESTS(test_extend_causal_within_and_off_by_one_flagged,
                               test_extend_layout_refusals_and_decode_identity));
    lowp_test_tcase(s, "kv_write", 60, LOWP_TESTS(test_kv_write_exact_flipped_bit_and_scale_order));
    return s;
}

int main(void)
{
    g_seed = lowp_test_seed("test_certify", 0xCE27F1);
    return lowp_test_main(certify_suite(), LOWP_TEST_NOFORK);
}
