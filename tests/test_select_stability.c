/* tests/test_select_stability.c: the QSA, DSA, MoBA and NSA score error bounds (lowp/select.h,
 * "certified stability") against MPFR. For random and adversarial keys (Gaussian, massive
 * channels, tiny rows near E4M3's subnormals, exact ties), each block's exact score is
 * computed in MPFR (256 bits: exact for these sums of products of BF16 / binary32 values)
 * from the unquantized keys and query, and the score lowp computes from the quantized keys
 * must lie within the bound: |s - s*| <= b, on >= 4000 blocks per key format. A selection
 * certified stable (both sides) must equal the reference keys' selection. */
#include <check.h>
#include <math.h>
#include <mpfr.h>
#include <stdlib.h>
#include <string.h>

#include "lowp/attn_sweep.h"
#include "lowp/format.h"
#include "lowp/select.h"
#include "lowp_test.h"

enum { H = 4, D = 128, T = 2048, NB = T / 4, K = 16 };

static float ratio_draw(uint64_t *st, int kind, size_t t, size_t i)
{
    double g = lowp_test_gauss(st);
    switch (kind) {
    case 0: return (float)g;                                  /* Gaussian */
    case 1: return (float)(i < 4 ? 40.0 + 5.0 * g : g);       /* massive channels */
    case 2: return (float)(g * 1e-3);                         /* small: RMSNorm rescales, E4M3 subnormal tails */
    default: return (float)((t / 4) % 7 == 3 ? 1.0 : g * 0.01); /* repeated blocks: exact ties */
    }
}

/* The certificate's promise: the top-k of scores sc (bounds bd) and of the reference
 * scores rs (bounds rbd) over n candidates; when both are certified stable they must be
 * the same set. Returns 1 when certified. k <= 64. */
static int certified_unchanged(const float *sc, const double *bd, const float *rs, const double *rbd, size_t n,
                               size_t k, const char *what, int rep, int fmt)
{
    int32_t sel[64], rsel[64];
    size_t ns = 0, rn = 0;
    ck_assert_uint_le(k, 64);
    ck_assert_int_eq(lowp_topk(sc, n, k, sel, &ns, NULL, 0), 0);
    ck_assert_int_eq(lowp_topk(rs, n, k, rsel, &rn, NULL, 0), 0);
    if (!lowp_select_certified(sc, bd, n, sel, ns) || !lowp_select_certified(rs, rbd, n, rsel, rn))
        return 0;
    lowp_select_drift dr;
    ck_assert_int_eq(lowp_select_drift_of(rsel, rn, sel, ns, rs, n, &dr, NULL, 0), 0);
    ck_assert_msg(dr.lost == 0 && dr.intruders == 0, "%s rep %d keys %d: certified but changed", what, rep, fmt);
    return 1;
}

/* The end of a bound test: at least `least` scores per key format checked, the aligned cases
 * reaching `reach` of their bound (so a bound that much smaller fails), one summary line. */
static void bound_summary(const char *what, const size_t *checked, size_t nf, size_t least, double worst,
                          double aligned, double reach, size_t certified, size_t selections)
{
    for (size_t f = 0; f < nf; f++)
        ck_assert_uint_ge(checked[f], least);
    ck_assert_msg(aligned > reach, "%s: aligned errors reach only %.3g of the bound", what, aligned);
    lowp_test_say("test_select_stability", "%s: %zu scores per key format within their bounds (worst error / "
                  "bound %.3g, aligned %.3g); %zu of %zu selections certified\n", what, checked[0], worst, aligned,
                  certified, selections);
}

START_TEST(test_qsa_bound_against_mpfr)
{
    uint64_t st = lowp_test_seed("test_select_stability", 0x73746162u);
    float *kraw = lowp_test_xmalloc(T * D * sizeof *kraw), q[H * D], wq[D], wk[D], qx[H * D], qo[H * D];
    double *x = lowp_test_xmalloc(NB * D * sizeof *x), *kb = lowp_test_xmalloc(NB * D * sizeof *kb);
    double *kd = lowp_test_xmalloc(NB * D * sizeof *kd), *bd = lowp_test_xmalloc(NB * sizeof *bd);
    double *rbd = lowp_test_xmalloc(NB * sizeof *rbd), *zero = lowp_test_xmalloc(NB * D * sizeof *zero);
    float sc[NB], rs[NB];
    mpfr_t acc, dot, tmp;
    mpfr_inits2(256, acc, dot, tmp, (mpfr_ptr)0);
    size_t checked[5] = {0}, certified = 0, worst_i = 0;
    double worst = 0;
    for (size_t i = 0; i < NB * D; i++)
        zero[i] = 0.0;
    for (int rep = 0; rep < 8; rep++) {
        int kind = rep % 4;
        for (size_t t = 0; t < T; t++)
            for (size_t i = 0; i < D; i++)
                kraw[t * D + i] = ratio_draw(&st, kind, t, i);
        for (size_t i = 0; i < H * D; i++)
            q[i] = (float)lowp_test_gauss(&st);
        for (size_t i = 0; i < D; i++) {
            wq[i] = (float)(0.1 * lowp_test_gauss(&st));
            wk[i] = (float)(0.1 * lowp_test_gauss(&st));
        }
        size_t pos = T - 1 - (size_t)(rep % 3), vis = 0;
        lowp_qsa_config ref = lowp_qsa_config_default();
        ref.topk = K;
        ck_assert_int_eq(lowp_qsa_compress(&ref, kraw, T, wk, x, NULL, NULL, 0), 0);
        ck_assert_int_eq(lowp_qsa_query(&ref, q, pos, wq, qx, NULL, 0), 0);
        ck_assert_int_eq(lowp_qsa_scores(&ref, qx, x, T, pos, rs, &vis, NULL, 0), 0);
        ck_assert_int_eq(lowp_qsa_score_bounds(&ref, qx, x, zero, T, pos, rs, rbd, NULL, 0), 0);
        for (int f = LOWP_QSA_KEYS_BF16; f <= LOWP_QSA_KEYS_MXFP8; f++) {
            lowp_qsa_config c = ref;
            c.keys = (lowp_qsa_keys)f;
            c.recipe = f == LOWP_QSA_KEYS_NVFP4 ? LOWP_RECIPE_TRTLLM : LOWP_RECIPE_OCP;
            c.divide = rep % 2;
            ref.divide = c.divide;
            ck_assert_int_eq(lowp_qsa_compress(&c, kraw, T, wk, kb, kd, NULL, 0), 0);
            ck_assert_int_eq(lowp_qsa_query(&c, q, pos, wq, qo, NULL, 0), 0);
            ck_assert_int_eq(lowp_qsa_scores(&c, qo, kb, T, pos, sc, &vis, NULL, 0), 0);
            ck_assert_int_eq(lowp_qsa_score_bounds(&c, qo, kb, kd, T, pos, sc, bd, NULL, 0), 0);
            ck_assert_int_eq(lowp_qsa_scores(&ref, qx, x, T, pos, rs, &vis, NULL, 0), 0);
            ck_assert_int_eq(lowp_qsa_score_bounds(&ref, qx, x, zero, T, pos, rs, rbd, NULL, 0), 0);
            double div = c.divide ? (double)sqrtf((float)D) : 1.0;
            for (size_t b = 0; b < vis; b++) {
                mpfr_set_zero(acc, 1);
                for (size_t h = 0; h < H; h++) {
                    mpfr_set_zero(dot, 1);
                    for (size_t i = 0; i < D; i++) {
                        mpfr_set_d(tmp, (double)qx[h * D + i], MPFR_RNDN);
                        mpfr_mul_d(tmp, tmp, x[b * D + i], MPFR_RNDN); /* exact at 256 bits */
                        mpfr_add(dot, dot, tmp, MPFR_RNDN);
                    }
                    if (mpfr_sgn(dot) > 0)
                        mpfr_add(acc, acc, dot, MPFR_RNDN);
                }
                mpfr_div_d(acc, acc, div, MPFR_RNDN);
                double exact = mpfr_get_d(acc, MPFR_RNDN); /* one rounding: 2^-53 relative */
                double err = fabs((double)sc[b] - exact), rerr = fabs((double)rs[b] - exact);
                double slack = 0x1p-52 * fabs(exact);
                ck_assert_msg(err <= bd[b] + slack, "rep %d keys %d block %zu: |%.9g - %.17g| = %.3g > bound %.3g",
                              rep, f, b, (double)sc[b], exact, err, bd[b]);
                ck_assert_msg(rerr <= rbd[b] + slack, "rep %d block %zu: reference |%.9g - %.17g| > %.3g", rep, b,
                              (double)rs[b], exact, rbd[b]);
                if (bd[b] > 0 && err / bd[b] > worst) {
                    worst = err / bd[b];
                    worst_i = (size_t)f;
                }
                checked[f]++;
            }
            certified += (size_t)certified_unchanged(sc, bd, rs, rbd, vis, K, "qsa", rep, f);
        }
    }
    for (int f = 0; f < 5; f++)
        ck_assert_uint_ge(checked[f], 4000);
    lowp_test_say("test_select_stability", "%zu + %zu + %zu + %zu + %zu blocks within their bounds (worst "
                  "error / bound %.3g, keys %zu); %zu of 40 selections certified\n",
                  checked[0], checked[1], checked[2], checked[3], checked[4], worst, worst_i, certified);
    mpfr_clears(acc, dot, tmp, (mpfr_ptr)0);
    free(kraw);
    free(x);
    free(kb);
    free(kd);
    free(bd);
    free(rbd);
    free(zero);
}
END_TEST

/* MoBA over the main keys x[T][MH][d] (binary32): 2 KV heads, 4 query heads each, blocks
 * of MB = 32 tokens (a power of two: the exact block mean is exact in MPFR), top-3. */
enum { MT = 1024, MH = 2, MG = 4, MB = 32, MK = 3, MNB = MT / MB };

/* The keys the selector reads in format f (LOWP_BF16_PASS: BF16) into kq, and per block the
 * sum of the element bounds into kdsum[MNB][MH][d]. Block formats quantize each row padded
 * with zeros to whole blocks (an even count), as lowp select does where d is not a multiple
 * of the block size. Returns 0 when every element is within its bound, else 1. */
static int moba_keys(lowp_block_format f, const float *x, size_t d, float *kq, double *kdsum)
{
    size_t rows = MT * MH, n = rows * d;
    for (size_t i = 0; i < MNB * MH * d; i++)
        kdsum[i] = 0.0;
    int outside = 0;
    if (f == LOWP_BF16_PASS) {
        lowp_codec c;
        lowp_codec_init(&c, LOWP_BF16, LOWP_PROFILE_TORCH, LOWP_RN, 0, NULL, 0);
        for (size_t i = 0; i < n; i++) {
            kq[i] = lowp_decode_f32(LOWP_BF16, lowp_encode_f32(&c, x[i]));
            /* half a BF16 ulp: 2^-8 of the rounded value, or 2^-134 among subnormals */
            kdsum[(i / (MH * d) / MB) * MH * d + i % (MH * d)] += 0x1p-8 * fabs((double)kq[i]) + 0x1p-134;
        }
        return 0;
    }
    size_t bs = lowp_block_size(f), dp = (d + bs - 1) / bs * bs;
    dp += dp % 2;
    float *pad = lowp_test_xmalloc(rows * dp * sizeof *pad), amax = 0;
    uint8_t *codes = lowp_test_xmalloc(lowp_block_code_bytes(f, rows * dp) + 1);
    uint8_t *scales = lowp_test_xmalloc(rows * dp / bs + 1);
    double *deq = lowp_test_xmalloc(rows * dp * sizeof *deq), *dl = lowp_test_xmalloc(rows * dp * sizeof *dl);
    for (size_t t = 0; t < rows; t++)
        for (size_t e = 0; e < dp; e++) {
            pad[t * dp + e] = e < d ? x[t * d + e] : 0.0f;
            amax = fabsf(pad[t * dp + e]) > amax ? fabsf(pad[t * dp + e]) : amax;
        }
    lowp_recipe r = lowp_recipe_default(f);
    lowp_global_scale gs = lowp_sweep_global_scale(f, r, LOWP_SWEEP_SCALE_CALIBRATED, amax);
    ck_assert_int_eq(lowp_block_quantize(f, r, gs, 0, pad, rows * dp, codes, scales, NULL, NULL, 0), 0);
    lowp_block_dequantize_f64(f, gs.dec, codes, scales, rows * dp, deq);
    lowp_select_quant_bound(f, gs.dec, codes, scales, rows * dp, dl);
    for (size_t t = 0; t < rows; t++)
        for (size_t e = 0; e < d; e++) {
            double v = deq[t * dp + e], b = dl[t * dp + e];
            kq[t * d + e] = (float)v;
            outside |= !(fabs(v - (double)x[t * d + e]) <= b);
            kdsum[((t / MH) / MB * MH + t % MH) * d + e] += b;
        }
    free(pad);
    free(codes);
    free(scales);
    free(deq);
    free(dl);
    return outside;
}

/* The exact means mean[i][g][e] of blocks i < nb of x[MT][MH][d]: MB = 32 tokens, a power
 * of two, so the mean is exact at 256 bits */
static void block_means(mpfr_t *mean, const float *x, size_t d, size_t nb)
{
    for (size_t i = 0; i < nb; i++)
        for (size_t g = 0; g < MH; g++)
            for (size_t e = 0; e < d; e++) {
                mpfr_ptr m = mean[(i * MH + g) * d + e];
                mpfr_set_zero(m, 1);
                for (size_t t = i * MB; t < (i + 1) * MB; t++)
                    mpfr_add_d(m, m, (double)x[(t * MH + g) * d + e], MPFR_RNDN);
                mpfr_div_ui(m, m, MB, MPFR_RNDN);
            }
}

/* One block score of unit u: the quantized keys' s and the reference keys' rs within their
 * bounds b, rb of the exact ex (rounded once from MPFR: 2^-52 |ex| of slack); the error's
 * share of the bound raises *worst, and *worst_aligned in an aligned case. */
static void check_block(const char *what, int rep, size_t f, size_t u, size_t i, float s, float rs, double ex,
                        double b, double rb, int aligned, double *worst, double *worst_aligned)
{
    double err = fabs((double)s - ex), rerr = fabs((double)rs - ex), slack = 0x1p-52 * fabs(ex);
    ck_assert_msg(err <= b + slack, "%s rep %d format %zu unit %zu block %zu: |%.9g - %.17g| = %.3g > bound %.3g", what,
                  rep, f, u, i, (double)s, ex, err, b);
    ck_assert_msg(rerr <= rb + slack, "%s rep %d unit %zu block %zu: reference |%.9g - %.17g| = %.3g > bound %.3g",
                  what, rep, u, i, (double)rs, ex, rerr, rb);
    double ratio = b > 0 ? err / b : 0;
    *worst = ratio > *worst ? ratio : *worst;
    if (aligned && ratio > *worst_aligned)
        *worst_aligned = ratio;
}

/* exact[h][nb] for blocks i < cur: q_h . mean_i, the exact block means mean[i][g][e] */
static void moba_exact(mpfr_t *mean, const float *q, size_t d, size_t cur, size_t nb, mpfr_t acc, mpfr_t tmp,
                       double *exact)
{
    for (size_t h = 0; h < MH * MG; h++)
        for (size_t i = 0; i < cur; i++) {
            mpfr_set_zero(acc, 1);
            for (size_t e = 0; e < d; e++) {
                mpfr_mul_d(tmp, mean[(i * MH + h / MG) * d + e], (double)q[h * d + e], MPFR_RNDN);
                mpfr_add(acc, acc, tmp, MPFR_RNDN); /* exact at 256 bits */
            }
            exact[h * nb + i] = mpfr_get_d(acc, MPFR_RNDN); /* one rounding: 2^-53 relative */
        }
}


/* NSA over the same main keys: per KV group, the sum over its 4 heads of softmax
 * probabilities of logits d^-0.5 q_h . mean_i over the nc complete blocks; 1 sink block, 2
 * local ones, top-5. */
enum { NK = 5 };

/* exact[g][nb] for the unforced blocks i < cur: sum_h exp(s*_hi - L*_h), from the exact
 * means mean[i][g][e] of the nc complete blocks */
static void nsa_exact(mpfr_t *mean, const float *q, size_t d, size_t nc, size_t cur, size_t nb, double *exact)
{
    mpfr_t acc, tmp, sc, lse, grp[MNB], s[MNB];
    mpfr_inits2(256, acc, tmp, sc, lse, (mpfr_ptr)0);
    for (size_t i = 0; i < MNB; i++)
        mpfr_inits2(256, grp[i], s[i], (mpfr_ptr)0);
    mpfr_set_ui(sc, (unsigned long)d, MPFR_RNDN);
    mpfr_rec_sqrt(sc, sc, MPFR_RNDN); /* d^-0.5 to 256 bits */
    for (size_t g = 0; g < MH; g++) {
        for (size_t i = 0; i < cur; i++)
            mpfr_set_zero(grp[i], 1);
        for (size_t h = g * MG; h < (g + 1) * MG; h++) {
            mpfr_set_zero(lse, 1);
            for (size_t i = 0; i < nc; i++) {
                mpfr_set_zero(acc, 1);
                for (size_t e = 0; e < d; e++) {
                    mpfr_mul_d(tmp, mean[(i * MH + g) * d + e], (double)q[h * d + e], MPFR_RNDN);
                    mpfr_add(acc, acc, tmp, MPFR_RNDN); /* exact at 256 bits */
                }
                mpfr_mul(s[i], acc, sc, MPFR_RNDN);
                mpfr_exp(tmp, s[i], MPFR_RNDN);
                mpfr_add(lse, lse, tmp, MPFR_RNDN);
            }
            mpfr_log(lse, lse, MPFR_RNDN);
            for (size_t i = 0; i < cur; i++) {
                mpfr_sub(tmp, s[i], lse, MPFR_RNDN);
                mpfr_exp(tmp, tmp, MPFR_RNDN);
                mpfr_add(grp[i], grp[i], tmp, MPFR_RNDN);
            }
        }
        for (size_t i = 0; i < cur; i++)
            exact[g * nb + i] = mpfr_get_d(grp[i], MPFR_RNDN); /* 2^-53 relative, plus ~2^-250 */
    }
    for (size_t i = 0; i < MNB; i++)
        mpfr_clears(grp[i], s[i], (mpfr_ptr)0);
    mpfr_clears(acc, tmp, sc, lse, (mpfr_ptr)0);
}

/* MoBA's (per query head) or NSA's (per KV group) scores against MPFR: 25 draws of keys,
 * queries and positions, the exact scores from the exact block means, every score of every
 * key format within its bound. MoBA: 2 x 4 heads, top-3; NSA: top-5, 1 sink and 2 local
 * blocks. */
static void blocksel_bound_test(lowp_blocksel_method method)
{
    static const lowp_block_format fmts[] = {LOWP_BF16_PASS, LOWP_FP8_E4M3, LOWP_NVFP4, LOWP_MXFP4, LOWP_MXFP8};
    enum { NF = sizeof fmts / sizeof fmts[0], HQ = MH * MG, DMAX = 128 };
    int nsa = method == LOWP_BLOCKSEL_NSA;
    const char *what = nsa ? "nsa" : "moba";
    int (*bounds)(const lowp_blocksel_config *, const float *, const float *, const double *, size_t, size_t,
                  const float *, double *, char *, size_t) = nsa ? lowp_nsa_score_bounds : lowp_moba_score_bounds;
    uint64_t st = lowp_test_seed("test_select_stability", nsa ? 0x6e7361u : 0x6d6f6261u);
    float *x = lowp_test_xmalloc(MT * MH * DMAX * sizeof *x), *kq = lowp_test_xmalloc(MT * MH * DMAX * sizeof *kq);
    float *kr = lowp_test_xmalloc(MT * MH * DMAX * sizeof *kr), q[HQ * DMAX];
    double *kdsum = lowp_test_xmalloc(MNB * MH * DMAX * sizeof *kdsum);
    double *rdsum = lowp_test_xmalloc(MNB * MH * DMAX * sizeof *rdsum);
    double *exact = lowp_test_xmalloc(HQ * MNB * sizeof *exact);
    float sc[HQ * MNB], rs[HQ * MNB];
    double bd[HQ * MNB], rbd[HQ * MNB];
    mpfr_t *mean = lowp_test_xmalloc(MNB * MH * DMAX * sizeof *mean), acc, tmp;
    for (size_t i = 0; i < MNB * MH * DMAX; i++)
        mpfr_init2(mean[i], 256);
    mpfr_inits2(256, acc, tmp, (mpfr_ptr)0);
    size_t checked[NF] = {0}, certified = 0, selections = 0, units = nsa ? MH : HQ, topk = nsa ? NK : MK;
    double worst = 0, worst_aligned = 0;
    for (int rep = 0; rep < 25; rep++) {
        /* kinds: Gaussian, massive channels, tiny (1e-33), exact ties, and aligned.
         * MoBA's aligned: every block's tokens one row (its error does not average out over
         * the block) and each head's query signed along one block's quantization error (the
         * dot's terms add). NSA's aligned and opposed: every block of KV group g one row r_g
         * (x4) repeated, negated in the blocks i % 8 == 5, every head's query signed along
         * r_g's error (elementwise sign-symmetric: -r_g's error is the negated one), so the
         * blocks r_g move the logits and the lse by +delta and the negated blocks' logits by
         * -delta: their probabilities by about 2 delta, the b_i + B of the bound */
        int kind = rep % 5;
        size_t d = rep % 3 == 2 ? 80 : 128; /* 80: not a multiple of MX's 32 (padded rows) */
        for (size_t t = 0; t < MT; t++)
            for (size_t g = 0; g < MH; g++)
                for (size_t e = 0; e < d; e++) {
                    float *o = x + (t * MH + g) * d + e;
                    if (kind == 4 && nsa && t)
                        *o = x[g * d + e] * ((t / MB) % 8 == 5 ? -1.0f : 1.0f);
                    else if (kind == 4 && !nsa && t % MB)
                        *o = o[-(ptrdiff_t)(MH * d)];
                    else
                        *o = ratio_draw(&st, kind % 4, t, e) * (kind == 2 ? 1e-30f : kind == 4 && nsa ? 4.0f : 1.0f);
                }
        if (kind == 3) /* every fourth block a copy of block 1 */
            for (size_t i = 5; i < MNB; i += 4)
                memcpy(x + i * MB * MH * d, x + MB * MH * d, MB * MH * d * sizeof *x);
        for (size_t i = 0; i < HQ * d; i++)
            q[i] = (float)lowp_test_gauss(&st);
        if (nsa && kind == 0) /* two needle blocks, 7 and 19, along their group's queries: a
                               * logit ~2.3 above the rest, the selection certifiable */
            for (size_t j = 7; j < 20; j += 12)
                for (size_t t = j * MB; t < (j + 1) * MB; t++)
                    for (size_t g = 0; g < MH; g++)
                        for (size_t e = 0; e < d; e++)
                            for (size_t h = g * MG; h < (g + 1) * MG; h++)
                                x[(t * MH + g) * d + e] += 0.2f * q[h * d + e];
        size_t pos = MT - 1 - (size_t)(rep % 7) * 7, cur = pos / MB, nb = cur + 1, nc = (pos + 1) / MB;
        lowp_blocksel_config c = {method, HQ, MH, d, MB, topk, nsa ? 1 : 0, nsa ? 2 : 1};
        block_means(mean, x, d, nsa ? nc : cur); /* NSA: the complete blocks, the softmax's support */
        ck_assert_int_eq(moba_keys(LOWP_BF16_PASS, x, d, kr, rdsum), 0);
        size_t n = 0;
        for (size_t f = 0; f < NF; f++) {
            ck_assert_msg(moba_keys(fmts[f], x, d, kq, kdsum) == 0, "rep %d format %zu: an element outside its bound",
                          rep, f);
            if (kind == 4 || f == 0) {
                if (kind == 4) /* MoBA: head h along block (3 h) % cur's error; NSA: along r_g's */
                    for (size_t h = 0; h < HQ; h++)
                        for (size_t e = 0; e < d; e++) {
                            size_t at = ((nsa ? 0 : (3 * h) % cur * MB * MH) + h / MG) * d + e;
                            q[h * d + e] = fabsf(q[h * d + e]) * (kq[at] < x[at] ? -1.0f : 1.0f);
                        }
                if (nsa)
                    nsa_exact(mean, q, d, nc, cur, nb, exact);
                else
                    moba_exact(mean, q, d, cur, nb, acc, tmp, exact);
                ck_assert_int_eq(lowp_blocksel_scores(&c, q, kr, MT, pos, rs, &n, NULL, 0), 0);
                ck_assert_int_eq(bounds(&c, q, kr, rdsum, MT, pos, rs, rbd, NULL, 0), 0);
            }
            ck_assert_int_eq(lowp_blocksel_scores(&c, q, kq, MT, pos, sc, &n, NULL, 0), 0);
            ck_assert_int_eq(n, nb);
            ck_assert_int_eq(bounds(&c, q, kq, kdsum, MT, pos, sc, bd, NULL, 0), 0);
            for (size_t u = 0; u < units; u++) {
                for (size_t i = 0; i < cur; i++) {
                    size_t at = u * nb + i;
                    if (isinf(sc[at])) { /* NSA's forced blocks: the same on every side */
                        ck_assert(isinf(rs[at]) && bd[at] == 0.0);
                        continue;
                    }
                    check_block(what, rep, f, u, i, sc[at], rs[at], exact[at], bd[at], rbd[at], kind == 4 && f > 0,
                                &worst, &worst_aligned);
                    checked[f]++;
                }
                selections++;
                certified += (size_t)certified_unchanged(sc + u * nb, bd + u * nb, rs + u * nb, rbd + u * nb, nb, topk,
                                                         what, rep, (int)f);
            }
        }
    }
    /* MoBA's aligned cases reach about half the bound (an element error is uniform in its
     * half gap): a bound 0.4 times as large fails. NSA has one selection per KV head (2
     * here, against MoBA's 8 query heads): 1200 scores per format, and its aligned and
     * opposed cases reach about a fifth of the bound (the element errors' half, and the
     * bound's first-order e^{b_i + B} against the exact e^{delta_i - delta_L}): a bound 0.15
     * times as large fails */
    bound_summary(what, checked, NF, nsa ? 1200 : 4000, worst, worst_aligned, nsa ? 0.15 : 0.4, certified,
                  selections);
    /* each bound refuses the other method's configuration, with a reason */
    lowp_blocksel_config other = {nsa ? LOWP_BLOCKSEL_MOBA : LOWP_BLOCKSEL_NSA, HQ, MH, 128, MB, topk, 0, 1};
    char why[128] = "";
    ck_assert_int_eq(bounds(&other, q, kq, kdsum, MT, MT - 1, sc, bd, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "configuration") != NULL, "%s", why);
    for (size_t i = 0; i < MNB * MH * DMAX; i++)
        mpfr_clear(mean[i]);
    free(mean);
    mpfr_clears(acc, tmp, (mpfr_ptr)0);
    free(x);
    free(kq);
    free(kr);
    free(kdsum);
    free(rdsum);
    free(exact);
}

START_TEST(test_moba_bound_against_mpfr) { blocksel_bound_test(LOWP_BLOCKSEL_MOBA); }
END_TEST

START_TEST(test_nsa_bound_against_mpfr) { blocksel_bound_test(LOWP_BLOCKSEL_NSA); }
END_TEST

/* DSA: 8 index heads x 128 over DT keys; every key format (FP8 with UE8M0 and with exact
 * scales, FP4 round-to-nearest-even and DeepGEMM's encoder) and the BF16 reference. */
enum { DH = 8, DD = 128, DT = 512, DK = 32 };

/* exact[n] = sum_h ReLU(q_h . k_n) wb_h c (the BF16 weights and c as the reference path
 * has them), and the reference (BF16) scores and bounds, for query q */
static void dsa_reference(const lowp_dsa_config *ref, const float *q, const float *w, const float *k, float *rkq,
                          float *rks, double *rkd, float *rs, double *rbd, double *exact, mpfr_t acc, mpfr_t dot,
                          mpfr_t tmp)
{
    float qq[DH * DD], qs[DH], wb[DH], wh[DH], dscale;
    size_t vis = 0;
    ck_assert_int_eq(lowp_dsa_keys_quantize(ref, k, DT, rkq, rks, rkd, NULL, 0), 0);
    ck_assert_int_eq(lowp_dsa_scores(ref, q, w, rkq, rks, DT, DT - 1, rs, &vis, NULL, 0), 0);
    ck_assert_int_eq(lowp_dsa_score_bounds(ref, q, w, rkq, rks, rkd, DT, DT - 1, rs, rbd, NULL, 0), 0);
    ck_assert_int_eq(lowp_dsa_query(ref, q, w, qq, qs, wb, wh, &dscale, NULL, 0), 0);
    for (size_t n = 0; n < DT; n++) {
        mpfr_set_zero(acc, 1);
        for (size_t h = 0; h < DH; h++) {
            mpfr_set_zero(dot, 1);
            for (size_t i = 0; i < DD; i++) {
                mpfr_set_d(tmp, (double)q[h * DD + i], MPFR_RNDN);
                mpfr_mul_d(tmp, tmp, (double)k[n * DD + i], MPFR_RNDN); /* exact at 256 bits */
                mpfr_add(dot, dot, tmp, MPFR_RNDN);
            }
            if (mpfr_sgn(dot) > 0) {
                mpfr_mul_d(dot, dot, (double)wb[h], MPFR_RNDN);
                mpfr_mul_d(dot, dot, (double)dscale, MPFR_RNDN);
                mpfr_add(acc, acc, dot, MPFR_RNDN);
            }
        }
        exact[n] = mpfr_get_d(acc, MPFR_RNDN); /* one rounding: 2^-53 relative */
    }
}

START_TEST(test_dsa_bound_against_mpfr)
{
    enum { NF = 5 };
    uint64_t st = lowp_test_seed("test_select_stability", 0x647361u);
    float *k = lowp_test_xmalloc(DT * DD * sizeof *k), *kq = lowp_test_xmalloc(DT * DD * sizeof *kq);
    float *rkq = lowp_test_xmalloc(DT * DD * sizeof *rkq), q[DH * DD], w[DH], ks[DT], rks[DT];
    double *kd = lowp_test_xmalloc(DT * DD * sizeof *kd), *rkd = lowp_test_xmalloc(DT * DD * sizeof *rkd);
    double *exact = lowp_test_xmalloc(DT * sizeof *exact), bd[DT], rbd[DT];
    float sc[DT], rs[DT];
    lowp_codec b16;
    lowp_codec_init(&b16, LOWP_BF16, LOWP_PROFILE_TORCH, LOWP_RN, 0, NULL, 0);
    mpfr_t acc, dot, tmp;
    mpfr_inits2(256, acc, dot, tmp, (mpfr_ptr)0);
    size_t checked[NF] = {0}, certified = 0, selections = 0;
    double worst = 0, worst_aligned = 0;
    for (int rep = 0; rep < 10; rep++) {
        /* Gaussian, massive channels, below the amax floors, repeated keys, and aligned: the
         * queries signed along one key's quantization error (channel 0 large in both, so that
         * the dot is positive and ReLU keeps it) */
        int kind = rep % 5;
        for (size_t t = 0; t < DT; t++)
            for (size_t i = 0; i < DD; i++) {
                float x = kind == 3 && t % 3 ? k[(t - t % 3) * DD + i] : ratio_draw(&st, kind % 3, t, i);
                x *= kind == 2 ? 1e-3f : 1.0f; /* ratio_draw's 1e-3: amax ~1e-6, below 1e-4 */
                x = kind == 4 && i == 0 ? 8.0f : x;
                k[t * DD + i] = lowp_decode_f32(LOWP_BF16, lowp_encode_f32(&b16, x));
            }
        for (size_t i = 0; i < DH * DD; i++)
            q[i] = lowp_decode_f32(LOWP_BF16, lowp_encode_f32(&b16, (float)lowp_test_gauss(&st)));
        for (size_t h = 0; h < DH; h++)
            w[h] = lowp_decode_f32(LOWP_BF16, lowp_encode_f32(&b16, (float)lowp_test_gauss(&st)));
        size_t pos = DT - 1, vis = 0;
        lowp_dsa_config ref = lowp_dsa_config_default();
        ref.heads = DH;
        ref.head_dim = DD;
        ref.topk = DK;
        ref.keys = LOWP_DSA_KEYS_BF16;
        dsa_reference(&ref, q, w, k, rkq, rks, rkd, rs, rbd, exact, acc, dot, tmp);
        for (int f = 0; f < NF; f++) {
            lowp_dsa_config c = ref;
            c.keys = f == 0 ? LOWP_DSA_KEYS_BF16 : f <= 2 ? LOWP_DSA_KEYS_FP8 : LOWP_DSA_KEYS_FP4;
            c.ue8m0 = f != 2;
            c.q_floor = rep % 2 ? 1e-10f : 1e-4f;
            c.fp4_round = f == 4 ? LOWP_DSA_FP4_DEEPGEMM : LOWP_DSA_FP4_RNE;
            ck_assert_int_eq(lowp_dsa_keys_quantize(&c, k, DT, kq, ks, kd, NULL, 0), 0);
            if (kind == 4) { /* every head along key 100's error times its weight's sign, then
                              * the exact scores again; q = +-1 (and 8): exact in E4M3 at a
                              * power-of-two scale, so q's own error does not dilute it */
                for (size_t h = 0; h < DH; h++)
                    for (size_t i = 0; i < DD; i++) {
                        size_t at = 100 * DD + i;
                        int up = (double)kq[at] * (double)ks[100] > (double)k[at];
                        q[h * DD + i] = i == 0 ? 8.0f : (up == (w[h] > 0) ? 1.0f : -1.0f);
                    }
                dsa_reference(&ref, q, w, k, rkq, rks, rkd, rs, rbd, exact, acc, dot, tmp);
            }
            ck_assert_int_eq(lowp_dsa_scores(&c, q, w, kq, ks, DT, pos, sc, &vis, NULL, 0), 0);
            ck_assert_int_eq(lowp_dsa_score_bounds(&c, q, w, kq, ks, kd, DT, pos, sc, bd, NULL, 0), 0);
            for (size_t n = 0; n < vis; n++) {
                double err = fabs((double)sc[n] - exact[n]), rerr = fabs((double)rs[n] - exact[n]);
                double slack = 0x1p-52 * fabs(exact[n]), ratio = bd[n] > 0 ? err / bd[n] : 0;
                ck_assert_msg(err <= bd[n] + slack, "rep %d keys %d key %zu: |%.9g - %.17g| = %.3g > bound %.3g", rep,
                              f, n, (double)sc[n], exact[n], err, bd[n]);
                ck_assert_msg(rerr <= rbd[n] + slack, "rep %d key %zu: reference |%.9g - %.17g| > %.3g", rep, n,
                              (double)rs[n], exact[n], rbd[n]);
                worst = ratio > worst ? ratio : worst;
                if (kind == 4 && f > 0 && ratio > worst_aligned)
                    worst_aligned = ratio;
                checked[f]++;
            }
            selections++;
            certified += (size_t)certified_unchanged(sc, bd, rs, rbd, vis, DK, "dsa", rep, f);
        }
    }
    /* aligned FP4 key errors reach about a third of the bound (an element error is uniform
     * in its half gap, and q's E4M3 term counts at its worst): a bound 0.25 times as large
     * fails */
    bound_summary("dsa", checked, NF, 4000, worst, worst_aligned, 0.25, certified, selections);
    mpfr_clears(acc, dot, tmp, (mpfr_ptr)0);
    free(k);
    free(kq);
    free(rkq);
    free(kd);
    free(rkd);
    free(exact);
}
END_TEST

static Suite *stability_suite(void)
{
    Suite *s = suite_create("select_stability");
    lowp_test_tcase(s, "qsa", 120, LOWP_TESTS(test_qsa_bound_against_mpfr));
    lowp_test_tcase(s, "moba", 120, LOWP_TESTS(test_moba_bound_against_mpfr));
    lowp_test_tcase(s, "dsa", 120, LOWP_TESTS(test_dsa_bound_against_mpfr));
    lowp_test_tcase(s, "nsa", 120, LOWP_TESTS(test_nsa_bound_against_mpfr));
    return s;
}

int main(void) { return lowp_test_main(stability_suite(), LOWP_TEST_FORK); }
