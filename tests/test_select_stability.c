/* tests/test_select_stability.c: the QSA score error bound (lowp/select.h, "certified
 * stability") against MPFR. For random and adversarial index keys (Gaussian, massive
 * channels, tiny rows near E4M3's subnormals, exact ties), each block's exact score is
 * computed in MPFR (256 bits: exact for these sums of products of BF16 values) from the
 * unquantized BF16 index keys and query, and the score lowp computes from the quantized
 * keys must lie within the bound: |s - s*| <= b, on >= 10^4 blocks per key format. A
 * selection certified stable (both sides) must equal the reference keys' selection. */
#include <check.h>
#include <math.h>
#include <mpfr.h>
#include <stdlib.h>

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
            int32_t sel[K], rsel[K];
            size_t n = 0, rn = 0;
            ck_assert_int_eq(lowp_topk(sc, vis, K, sel, &n, NULL, 0), 0);
            ck_assert_int_eq(lowp_topk(rs, vis, K, rsel, &rn, NULL, 0), 0);
            if (lowp_select_certified(sc, bd, vis, sel, n) && lowp_select_certified(rs, rbd, vis, rsel, rn)) {
                certified++;
                lowp_select_drift dr;
                ck_assert_int_eq(lowp_select_drift_of(rsel, rn, sel, n, rs, vis, &dr, NULL, 0), 0);
                ck_assert_msg(dr.lost == 0 && dr.intruders == 0, "rep %d keys %d: certified but changed", rep, f);
            }
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

static Suite *stability_suite(void)
{
    Suite *s = suite_create("select_stability");
    lowp_test_tcase(s, "qsa", 120, LOWP_TESTS(test_qsa_bound_against_mpfr));
    return s;
}

int main(void) { return lowp_test_main(stability_suite(), LOWP_TEST_FORK); }
