/* tests/test_stats.c: error statistics (lowp/stats.h) and the generators (lowp/gen.h).
 *
 * Expected values are computed by hand from the definitions in lowp/stats.h and written
 * out with their derivation; the moment tests state the tolerance they use and why. */
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#include <check.h>
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lowp/block.h"
#include "lowp/cases.h"
#include "lowp/gen.h"
#include "lowp/stats.h"
#include "lowp_test.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

static lowp_stats stats_f32(const float *ref, const float *rec, size_t n, size_t block)
{
    lowp_stats s;
    char why[128];
    ck_assert_int_eq(lowp_stats_compute(ref, LOWP_STATS_F32, rec, LOWP_STATS_F32, n, block, &s, why, sizeof why), 0);
    return s;
}

/* ---------------------------------------------------------------------------------- */
/* hand-computed values                                                                */

START_TEST(tiny_array_every_metric_by_hand)
{
    /* ref = (1, 2, 3, 4), rec = (1.5, 2, 2, 4): e = (0.5, 0, -1, 0)
     *   max_abs = 1;  sum e^2 = 1.25;  sum ref^2 = 30;  sum rec^2 = 26.25;  <ref, rec> = 27.5
     *   rmse   = sqrt(1.25 / 4)                    = 0.5590169943749475
     *   rel_l2 = sqrt(1.25 / 30)                   = 0.2041241452319315
     *   sqnr   = 10 log10(30 / 1.25) = 10 log10 24 = 13.80211241711606 dB
     *   cosine = 27.5 / sqrt(30 * 26.25)           = 0.9799578870122226
     *   ulp: ref 1 is in [1, 2): ulp 2^-7, |e| 0.5 = 64 ulps; ref 3 in [2, 4): ulp 2^-6,
     *        |e| 1 = 64 ulps; others 0. ulp_max 64, ulp_mean 128 / 4 = 32.
     *   blocks of 2: {1,2} vs {1.5,2}: sqrt(0.25 / 5) = 0.22360679774997896;
     *                {3,4} vs {2,4}:   sqrt(1 / 25)  = 0.2.
     *   nearest rank over m = 2: p50 = 1st = 0.2; p90, p99 = 2nd; max = 0.2236... */
    const float ref[] = {1, 2, 3, 4}, rec[] = {1.5f, 2, 2, 4};
    lowp_stats s = stats_f32(ref, rec, 4, 2);
    ck_assert_uint_eq(s.n, 4);
    ck_assert_uint_eq(s.compared, 4);
    ck_assert(s.max_abs == 1.0);
    ck_assert(s.sum_err2 == 1.25);
    ck_assert(s.sum_ref2 == 30.0);
    ck_assert(s.sum_rec2 == 26.25);
    ck_assert(s.sum_dot == 27.5);
    ck_assert_double_eq_tol(s.rmse, 0.5590169943749475, 1e-15);
    ck_assert_double_eq_tol(s.rel_l2, 0.2041241452319315, 1e-15);
    ck_assert_double_eq_tol(s.sqnr_db, 13.80211241711606, 1e-13);
    ck_assert_double_eq_tol(s.cosine, 0.9799578870122226, 1e-15);
    ck_assert(s.ulp_max == 64.0);
    ck_assert(s.ulp_mean == 32.0);
    ck_assert_uint_eq(s.blocks, 2);
    ck_assert_uint_eq(s.blocks_compared, 2);
    ck_assert(s.blk_p50 == 0.2);
    ck_assert_double_eq_tol(s.blk_p90, 0.22360679774997896, 1e-16);
    ck_assert(s.blk_p99 == s.blk_p90 && s.blk_max == s.blk_p90);
}
END_TEST

START_TEST(mixed_f32_f64_inputs_and_short_last_block)
{
    /* ref (f32) = (2, -2, 0.5), rec (f64) = (2.25, -2, 0.5): e = (0.25, 0, 0).
     * blocks of 2: {2,-2}: sqrt(0.0625 / 8) = 0.08838834764831845; {0.5} (short): 0.
     * quantiles over (0, 0.0883...): p50 = 0, p90 = p99 = max = 0.0883... */
    const float ref[] = {2, -2, 0.5f};
    const double rec[] = {2.25, -2, 0.5};
    lowp_stats s;
    ck_assert_int_eq(lowp_stats_compute(ref, LOWP_STATS_F32, rec, LOWP_STATS_F64, 3, 2, &s, NULL, 0), 0);
    ck_assert(s.sum_err2 == 0.0625);
    ck_assert(s.max_abs == 0.25);
    ck_assert_uint_eq(s.blocks, 2);
    ck_assert(s.blk_p50 == 0.0);
    ck_assert_double_eq_tol(s.blk_max, 0.08838834764831845, 1e-16);
    /* ulp: ref 2 in [2, 4): ulp 2^-6, 0.25 = 16 ulps */
    ck_assert(s.ulp_max == 16.0);
}
END_TEST

START_TEST(quantiles_nearest_rank_on_100_blocks)
{
    /* 100 blocks of one element, ref = 1, rec = 1 + k/1000 (k = 0..99): per-block relative
     * error k/1000 (to binary32 rounding of rec). Nearest rank: p50 = 50th smallest = k 49,
     * p90 = 90th = k 89, p99 = 99th = k 98, max = k 99. */
    float ref[100], rec[100];
    for (int k = 0; k < 100; k++) {
        ref[k] = 1.0f;
        rec[k] = 1.0f + (float)k / 1000.0f;
    }
    lowp_stats s = stats_f32(ref, rec, 100, 1);
    ck_assert(s.blk_p50 == (double)rec[49] - 1.0);
    ck_assert(s.blk_p90 == (double)rec[89] - 1.0);
    ck_assert(s.blk_p99 == (double)rec[98] - 1.0);
    ck_assert(s.blk_max == (double)rec[99] - 1.0);
}
END_TEST

/* ---------------------------------------------------------------------------------- */
/* identities                                                                          */

START_TEST(sqnr_rel_l2_cosine_identities)
{
    enum { N = 1000 };
    static float ref[N], rec[N];
    uint64_t st = 7;
    for (int i = 0; i < N; i++)
        ref[i] = (float)((double)(lowp_splitmix64(&st) >> 11) * 0x1p-53 * 4.0 - 2.0);
    /* exact reconstruction: SQNR +Inf, rel_l2 0, cosine 1, ulp 0 */
    lowp_stats s = stats_f32(ref, ref, N, 16);
    ck_assert(isinf(s.sqnr_db) && s.sqnr_db > 0);
    ck_assert(s.rel_l2 == 0.0 && s.max_abs == 0.0 && s.ulp_max == 0.0);
    ck_assert_double_eq_tol(s.cosine, 1.0, 1e-15);
    /* rec = c ref with c = 0.5 (a power of two: exact in binary32, no underflow here):
     * rel_l2 = |1 - c| = 0.5, SQNR = -20 log10 |1 - c| = 6.0206 dB, cosine 1, and every
     * block's relative error 0.5 */
    for (int i = 0; i < N; i++)
        rec[i] = 0.5f * ref[i];
    s = stats_f32(ref, rec, N, 16);
    ck_assert_double_eq_tol(s.rel_l2, 0.5, 1e-15);
    ck_assert_double_eq_tol(s.sqnr_db, -20.0 * log10(0.5), 1e-13);
    ck_assert_double_eq_tol(s.sqnr_db, -20.0 * log10(s.rel_l2), 1e-13);
    ck_assert_double_eq_tol(s.cosine, 1.0, 1e-15);
    ck_assert_double_eq_tol(s.blk_p50, 0.5, 1e-15);
    ck_assert_double_eq_tol(s.blk_max, 0.5, 1e-15);
    /* rec = -ref: cosine -1, rel_l2 2 */
    for (int i = 0; i < N; i++)
        rec[i] = -ref[i];
    s = stats_f32(ref, rec, N, 16);
    ck_assert_double_eq_tol(s.cosine, -1.0, 1e-15);
    ck_assert_double_eq_tol(s.rel_l2, 2.0, 1e-14);
    /* zeros: both zero -> cosine 1, rel 0; ref zero, rec not -> rel +Inf, cosine 0 */
    float z[4] = {0, 0, 0, 0}, o[4] = {0, 1, 0, 0};
    s = stats_f32(z, z, 4, 2);
    ck_assert(s.cosine == 1.0 && s.rel_l2 == 0.0);
    s = stats_f32(z, o, 4, 2);
    ck_assert(s.cosine == 0.0 && isinf(s.rel_l2) && isinf(s.sqnr_db) && s.sqnr_db < 0);
    ck_assert_uint_eq(s.blocks_ref_zero, 2);
    ck_assert(isinf(s.blk_max) && s.blk_p50 == 0.0);
}
END_TEST

START_TEST(nan_and_inf_pairs_are_counted_and_left_out)
{
    /* pairs: (1,1) ok; (NaN,2) nan_ref; (3,NaN) nan_rec; (4,Inf) inf_other; (Inf,Inf)
     * inf_equal; (-Inf,Inf) inf_other; (NaN,NaN) nan_ref; (2,3) ok with e = 1 */
    const float ref[] = {1, NAN, 3, 4, INFINITY, -INFINITY, NAN, 2};
    const float rec[] = {1, 2, NAN, INFINITY, INFINITY, INFINITY, NAN, 3};
    lowp_stats s = stats_f32(ref, rec, N_ELEMS(ref), 2);
    ck_assert_uint_eq(s.compared, 2);
    ck_assert_uint_eq(s.nan_ref, 2);
    ck_assert_uint_eq(s.nan_rec, 1);
    ck_assert_uint_eq(s.inf_equal, 1);
    ck_assert_uint_eq(s.inf_other, 2);
    ck_assert(s.sum_err2 == 1.0 && s.sum_ref2 == 5.0 && s.max_abs == 1.0);
    ck_assert(isfinite(s.rmse) && isfinite(s.sqnr_db) && isfinite(s.cosine));
    /* blocks: {1,NaN}->{1} rel 0; {3,4} nothing compared (skipped); {Inf,-Inf} skipped;
     * {NaN,2}->{2} rel 1/2 */
    ck_assert_uint_eq(s.blocks, 4);
    ck_assert_uint_eq(s.blocks_compared, 2);
    ck_assert(s.blk_max == 0.5 && s.blk_p50 == 0.0);
}
END_TEST

/* ---------------------------------------------------------------------------------- */
/* bf16 ulp metric                                                                     */

START_TEST(ulp_metric_on_bf16_neighbours)
{
    /* ulp_bf16(r) = 2^(max(floor(log2|r|), -126) - 7); 2^-133 for 0 and bf16 subnormals.
     *   r = 1,     rec = 1 + 2^-7 (next bf16 up)            -> 1 ulp
     *   r = 1,     rec = 1 - 2^-8 (next bf16 down, binade [0.5,1) spacing 2^-8) -> 0.5
     *   r = 3,     rec = 3 + 2^-6                            -> 1
     *   r = -1.5,  rec = -1.5 - 2^-7                         -> 1
     *   r = 0,     rec = 2^-133 (smallest bf16 subnormal)    -> 1
     *   r = 2^-130 (bf16 subnormal), rec = 2^-130 + 2^-133  -> 1
     *   r = 2^-126 (smallest bf16 normal), rec + 2^-133      -> 1
     *   r = 1.00390625 (1 + 2^-8, a bf16 tie), rec = 1 (RN-even) -> 0.5 */
    const float ref[] = {1, 1, 3, -1.5f, 0, 0x1p-130f, 0x1p-126f, 1.00390625f};
    const float rec[] = {1 + 0x1p-7f, 1 - 0x1p-8f, 3 + 0x1p-6f, -1.5f - 0x1p-7f, 0x1p-133f,
                         0x1p-130f + 0x1p-133f, 0x1p-126f + 0x1p-133f, 1};
    const double want[] = {1, 0.5, 1, 1, 1, 1, 1, 0.5};
    for (size_t i = 0; i < N_ELEMS(ref); i++) {
        lowp_stats s = stats_f32(&ref[i], &rec[i], 1, 1);
        if (s.ulp_max != want[i])
            fprintf(stderr, "ulp case %zu: ref %a rec %a got %.17g want %g\n", i, (double)ref[i], (double)rec[i],
                    s.ulp_max, want[i]);
        ck_assert(s.ulp_max == want[i]);
    }
    lowp_stats s = stats_f32(ref, rec, N_ELEMS(ref), 4);
    ck_assert(s.ulp_max == 1.0);
    ck_assert(s.ulp_mean == 7.0 / 8.0);
}
END_TEST

START_TEST(bf16_passthrough_is_within_half_an_ulp)
{
    /* BF16 RN: every finite input is within half a bf16 spacing of its own binade (an
     * input that rounds up to the next power of two is closer still). */
    enum { N = 1 << 14 };
    static float x[N];
    uint64_t st = 11;
    for (int i = 0; i < N; i++) {
        uint32_t b = (uint32_t)lowp_splitmix64(&st);
        b &= 0xbfffffffu; /* keep the exponent below 2^1: no overflow to Inf */
        memcpy(&x[i], &b, sizeof b);
        if (!isfinite(x[i]))
            x[i] = 1.0f;
    }
    lowp_stats s;
    char why[128];
    lowp_global_scale gs = {1.0f, 1.0f};
    ck_assert_int_eq(lowp_stats_quantized(LOWP_BF16_PASS, LOWP_RECIPE_EXACT, gs, 0, x, N, NULL, &s, why, sizeof why), 0);
    ck_assert(s.ulp_max <= 0.5);
    ck_assert_uint_eq(s.compared, N);
}
END_TEST

/* ---------------------------------------------------------------------------------- */
/* scale histogram, counts, quantize path                                              */

START_TEST(scale_classes_e4m3_and_e8m0)
{
    /* E4M3: 0x00, 0x80 zero; 0x01, 0x07 subnormal (exponent field 0); 0x08, 0x7E normal;
     * 0x7F, 0xFF NaN. E8M0: 0xFF NaN, every other code normal (2^(c-127) > 0). */
    const uint8_t e4[] = {0x00, 0x80, 0x01, 0x07, 0x08, 0x7e, 0x7f, 0xff};
    lowp_stats s;
    memset(&s, 0, sizeof s);
    lowp_stats_add_scales(&s, LOWP_E4M3, e4, N_ELEMS(e4));
    ck_assert_uint_eq(s.scales, 8);
    ck_assert_uint_eq(s.scale_zero, 2);
    ck_assert_uint_eq(s.scale_subnormal, 2);
    ck_assert_uint_eq(s.scale_normal, 2);
    ck_assert_uint_eq(s.scale_nan, 2);
    ck_assert_uint_eq(s.scale_hist[0x7e], 1);
    ck_assert_uint_eq(s.scale_hist[0x7d], 0);
    const uint8_t e8[] = {0x00, 0x7f, 0xff, 0x7f};
    memset(&s, 0, sizeof s);
    lowp_stats_add_scales(&s, LOWP_E8M0, e8, N_ELEMS(e8));
    ck_assert_uint_eq(s.scale_normal, 3);
    ck_assert_uint_eq(s.scale_nan, 1);
    ck_assert_uint_eq(s.scale_zero, 0);
    ck_assert_uint_eq(s.scale_hist[0x7f], 2);
}
END_TEST

START_TEST(quantized_counts_and_scales_agree_with_block_counts)
{
    /* NVFP4 sglang-kv at g = 1 on two 16-element blocks: block amax 6 * 2^-8 gives
     * sf = 2^-8, an E4M3 subnormal (code 0x02); block amax 6 * 2^-12 gives 2^-12 < 2^-10,
     * which rounds to scale 0. The histogram and lowp_quant_counts must say the same. */
    float x[32];
    for (int i = 0; i < 16; i++) {
        x[i] = (i == 3 ? 6.0f : 1.0f) * 0x1p-8f;
        x[16 + i] = (i == 5 ? -6.0f : 0.5f) * 0x1p-12f;
    }
    lowp_stats s;
    char why[128];
    lowp_global_scale gs = lowp_global_scale_from_dec(LOWP_NVFP4, LOWP_RECIPE_SGLANG_KV, 1.0f);
    ck_assert_int_eq(lowp_stats_quantized(LOWP_NVFP4, LOWP_RECIPE_SGLANG_KV, gs, 0, x, 32, NULL, &s, why, sizeof why), 0);
    ck_assert(s.has_scales && s.has_counts);
    ck_assert_uint_eq(s.scales, 2);
    ck_assert_uint_eq(s.scale_subnormal, 1);
    ck_assert_uint_eq(s.scale_zero, 1);
    ck_assert_uint_eq(s.scale_hist[0x02], 1);
    ck_assert_uint_eq(s.counts.scale_subnormal, s.scale_subnormal);
    ck_assert_uint_eq(s.counts.scale_zero, s.scale_zero);
    ck_assert_uint_eq(s.counts.elements, 32);
    /* the zero-scale block decodes to zeros: its 16 nonzero inputs are flushed */
    ck_assert_uint_ge(s.counts.flushed, 16);
    ck_assert(s.blk_max == 1.0);
}
END_TEST

START_TEST(padding_tail_is_left_out)
{
    /* 20 elements under MXFP4 (block 32): padded with zeros to 32, statistics over 20. */
    float x[20];
    for (int i = 0; i < 20; i++)
        x[i] = (float)(i + 1) * 0.37f;
    lowp_stats s;
    char why[128];
    lowp_global_scale gs = {1.0f, 1.0f};
    ck_assert_int_eq(lowp_stats_quantized(LOWP_MXFP4, LOWP_RECIPE_OCP, gs, 0, x, 20, NULL, &s, why, sizeof why), 0);
    ck_assert_uint_eq(s.n, 20);
    ck_assert_uint_eq(s.counts.elements, 20);
    ck_assert_uint_eq(s.scales, 1);
    ck_assert_uint_eq(s.blocks, 1);
}
END_TEST

START_TEST(table_dequantize_equals_block_dequantize)
{
    enum { T = 64, H = 2, D = 64, N = T * H * D };
    static float x[N];
    static uint8_t codes[2 * N], scales[N];
    static double a[N], b[N];
    ck_assert_int_eq(lowp_gen(LOWP_GEN_K_LIKE, NULL, 3, T, H, D, x, NULL, 0), 0);
    x[5] = NAN;
    x[77] = INFINITY;
    float amax = 0;
    for (int i = 0; i < N; i++)
        if (isfinite(x[i]) && fabsf(x[i]) > amax)
            amax = fabsf(x[i]);
    for (int f = 0; f < LOWP_BLOCK_FORMAT_COUNT; f++)
        for (int r = 0; r < LOWP_RECIPE_COUNT; r++) {
            if (lowp_recipe_check((lowp_block_format)f, (lowp_recipe)r, NULL, 0))
                continue;
            lowp_global_scale gs = lowp_recipe_global_scale((lowp_block_format)f, (lowp_recipe)r, amax);
            ck_assert_int_eq(lowp_block_quantize((lowp_block_format)f, (lowp_recipe)r, gs, 0, x, N, codes, scales, NULL,
                                                 NULL, 0),
                             0);
            lowp_block_dequantize_f64((lowp_block_format)f, gs.dec, codes, scales, N, a);
            lowp_stats_dequantize_f64((lowp_block_format)f, gs.dec, codes, scales, N, b);
            for (int i = 0; i < N; i++) {
                if (isnan(a[i])) {
                    ck_assert(isnan(b[i]));
                    continue;
                }
                if (memcmp(&a[i], &b[i], sizeof a[i]) != 0)
                    fprintf(stderr, "%s %s [%d]: %a vs %a\n", lowp_block_format_name((lowp_block_format)f),
                            lowp_recipe_name((lowp_recipe)r), i, a[i], b[i]);
                ck_assert(memcmp(&a[i], &b[i], sizeof a[i]) == 0);
            }
        }
}
END_TEST

START_TEST(quant_sse_equals_stats_sum_err2)
{
    /* The fused search sum and lowp_stats_compute's sum_err2 use the same grouping and
     * chunking (stats.h): the same bits. */
    enum { T = 300, H = 4, D = 64, N = T * H * D };
    static float x[N];
    ck_assert_int_eq(lowp_gen(LOWP_GEN_K_LIKE, NULL, 5, T, H, D, x, NULL, 0), 0);
    const lowp_block_format fs[] = {LOWP_NVFP4, LOWP_MXFP4, LOWP_FP8_E4M3, LOWP_BF16_PASS};
    for (size_t k = 0; k < N_ELEMS(fs); k++) {
        lowp_recipe r = lowp_recipe_default(fs[k]);
        lowp_global_scale gs = lowp_recipe_global_scale(fs[k], r, 250.0f);
        lowp_stats s;
        double sse;
        char why[128];
        ck_assert_int_eq(lowp_stats_quantized(fs[k], r, gs, 0, x, N, NULL, &s, why, sizeof why), 0);
        ck_assert_int_eq(lowp_stats_quant_sse(fs[k], r, gs, 0, x, N, &sse, NULL, why, sizeof why), 0);
        ck_assert(memcmp(&sse, &s.sum_err2, sizeof sse) == 0);
    }
}
END_TEST

/* ---------------------------------------------------------------------------------- */
/* determinism                                                                         */

static char *json_of(const lowp_stats *s, size_t *len)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    lowp_stats_row row;
    memset(&row, 0, sizeof row);
    row.format = "nvfp4";
    row.st = *s;
    lowp_stats_write_json(f, &row, 1);
    lowp_stats_write_csv(f, &row, 1);
    fclose(f);
    return buf;
}

START_TEST(same_bytes_for_1_and_2_threads)
{
    enum { T = 1024, H = 4, D = 128, N = T * H * D };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    double *rec = malloc(N * sizeof *rec);
    ck_assert(x != NULL && y != NULL && rec != NULL);
    lowp_stats s1, s2;
    double e1, e2;
    size_t l1, l2;
    omp_set_num_threads(1);
    ck_assert_int_eq(lowp_gen(LOWP_GEN_K_LIKE, NULL, 9, T, H, D, x, NULL, 0), 0);
    lowp_global_scale gs = lowp_recipe_global_scale(LOWP_NVFP4, LOWP_RECIPE_EXACT, 300.0f);
    ck_assert_int_eq(lowp_stats_quantized(LOWP_NVFP4, LOWP_RECIPE_EXACT, gs, 0, x, N, rec, &s1, NULL, 0), 0);
    ck_assert_int_eq(lowp_stats_quant_sse(LOWP_NVFP4, LOWP_RECIPE_EXACT, gs, 0, x, N, &e1, NULL, NULL, 0), 0);
    char *j1 = json_of(&s1, &l1);
    omp_set_num_threads(2);
    ck_assert_int_eq(lowp_gen(LOWP_GEN_K_LIKE, NULL, 9, T, H, D, y, NULL, 0), 0);
    ck_assert(memcmp(x, y, N * sizeof *x) == 0);
    ck_assert_int_eq(lowp_stats_quantized(LOWP_NVFP4, LOWP_RECIPE_EXACT, gs, 0, y, N, rec, &s2, NULL, 0), 0);
    ck_assert_int_eq(lowp_stats_quant_sse(LOWP_NVFP4, LOWP_RECIPE_EXACT, gs, 0, y, N, &e2, NULL, NULL, 0), 0);
    char *j2 = json_of(&s2, &l2);
    ck_assert(memcmp(&s1, &s2, sizeof s1) == 0);
    ck_assert(memcmp(&e1, &e2, sizeof e1) == 0);
    ck_assert_uint_eq(l1, l2);
    ck_assert(memcmp(j1, j2, l1) == 0);
    free(j1);
    free(j2);
    free(x);
    free(y);
    free(rec);
}
END_TEST

START_TEST(output_helpers_write_every_row)
{
    const float ref[] = {1, 2, 3, 4};
    lowp_stats_row rows[2];
    memset(rows, 0, sizeof rows);
    rows[0].format = "nvfp4";
    rows[0].recipe = "exact";
    rows[0].st = stats_f32(ref, ref, 4, 2); /* SQNR +Inf: JSON null */
    float g[2] = {0.5f, 0.25f};
    rows[1].format = "fp8_e4m3";
    rows[1].method = "amax";
    rows[1].gscales = g;
    rows[1].n_gscales = 2;
    rows[1].st = rows[0].st;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_int_eq(lowp_stats_write_json(f, rows, 2), 0);
    fclose(f);
    ck_assert(strstr(buf, "\"sqnr_db\": null") != NULL);
    ck_assert(strstr(buf, "\"global_scales\": [0.5, 0.25]") != NULL);
    free(buf);
    f = open_memstream(&buf, &len);
    ck_assert_int_eq(lowp_stats_write_csv(f, rows, 2), 0);
    fclose(f);
    /* header and rows have the same number of fields */
    int lines = 0, commas[3] = {0, 0, 0};
    for (char *p = buf; *p; p++) {
        if (*p == '\n')
            lines++;
        else if (*p == ',' && lines < 3)
            commas[lines]++;
    }
    ck_assert_int_eq(lines, 3);
    ck_assert_int_eq(commas[0], commas[1]);
    ck_assert_int_eq(commas[0], commas[2]);
    ck_assert(strstr(buf, "0.5;0.25") != NULL);
    free(buf);
    f = open_memstream(&buf, &len);
    ck_assert_int_eq(lowp_stats_print_table(f, rows, 2), 0);
    fclose(f);
    ck_assert(strstr(buf, "0.25..0.5") != NULL); /* per-head range */
    ck_assert(strstr(buf, "method") != NULL);
    free(buf);
}
END_TEST

/* ---------------------------------------------------------------------------------- */
/* generators                                                                          */

static void moments(const float *x, size_t n, double *mean, double *var)
{
    double s = 0, s2 = 0;
    for (size_t i = 0; i < n; i++)
        s += x[i];
    *mean = s / (double)n;
    for (size_t i = 0; i < n; i++)
        s2 += ((double)x[i] - *mean) * ((double)x[i] - *mean);
    *var = s2 / (double)(n - 1);
}

START_TEST(generators_reproducible_and_thread_independent)
{
    enum { T = 512, H = 4, D = 64, N = T * H * D };
    float *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
    ck_assert(a != NULL && b != NULL);
    for (int k = 0; k < LOWP_GEN_KIND_COUNT; k++) {
        omp_set_num_threads(1);
        ck_assert_int_eq(lowp_gen((lowp_gen_kind)k, NULL, 42, T, H, D, a, NULL, 0), 0);
        omp_set_num_threads(2);
        ck_assert_int_eq(lowp_gen((lowp_gen_kind)k, NULL, 42, T, H, D, b, NULL, 0), 0);
        ck_assert(memcmp(a, b, N * sizeof *a) == 0);
        ck_assert_int_eq(lowp_gen((lowp_gen_kind)k, NULL, 43, T, H, D, b, NULL, 0), 0);
        ck_assert(memcmp(a, b, N * sizeof *a) != 0);
        for (int i = 0; i < N; i++)
            ck_assert(isfinite(a[i]));
    }
    free(a);
    free(b);
}
END_TEST

START_TEST(gaussian_and_student_t_moments)
{
    /* n = 2^20 draws. For i.i.d. x with variance s2 and excess kurtosis k:
     *   sd(sample mean) = sqrt(s2 / n),  sd(sample variance) ~= s2 sqrt((2 + k) / n).
     * The tolerances are 5 such standard deviations (a false failure has probability
     * below 1e-6 per check; the seeds are fixed, so the test is deterministic anyway).
     *   Gaussian, scale 2: s2 = 4, k = 0: mean tol 5 * 2/1024 = 0.0098; var tol
     *     5 * 4 * sqrt(2/2^20) = 0.0276.
     *   Student-t, nu = 10: s2 = nu/(nu-2) = 1.25, k = 6/(nu-4) = 1: mean tol
     *     5 * sqrt(1.25/2^20) = 0.0055; var tol 5 * 1.25 * sqrt(3/2^20) = 0.0106. */
    enum { N = 1 << 20 };
    float *x = malloc(N * sizeof *x);
    ck_assert(x != NULL);
    double m, v;
    lowp_gen_params p = lowp_gen_defaults(LOWP_GEN_GAUSSIAN);
    p.scale = 2.0;
    ck_assert_int_eq(lowp_gen(LOWP_GEN_GAUSSIAN, &p, 1, 1, 1, N, x, NULL, 0), 0);
    moments(x, N, &m, &v);
    ck_assert_double_eq_tol(m, 0.0, 0.0098);
    ck_assert_double_eq_tol(v, 4.0, 0.0276);
    p = lowp_gen_defaults(LOWP_GEN_STUDENT_T);
    p.nu = 10.0;
    ck_assert_int_eq(lowp_gen(LOWP_GEN_STUDENT_T, &p, 2, 1, 1, N, x, NULL, 0), 0);
    moments(x, N, &m, &v);
    ck_assert_double_eq_tol(m, 0.0, 0.0055);
    ck_assert_double_eq_tol(v, 1.25, 0.0106);
    /* nu = 3 is heavy-tailed: P(|t_3| > 10) = 0.0021284 (from the t_3 CDF
     * 1/2 + (y/(1+y^2) + atan y)/pi, y = t/sqrt 3), about 2232 of 2^20 draws (sd 47),
     * where a Gaussian of the same variance (3) would give none. Accept 1/2x..2x. */
    p.nu = 3.0;
    ck_assert_int_eq(lowp_gen(LOWP_GEN_STUDENT_T, &p, 3, 1, 1, N, x, NULL, 0), 0);
    size_t big = 0;
    for (int i = 0; i < N; i++)
        big += fabsf(x[i]) > 10.0f;
    ck_assert_uint_ge(big, 1116);
    ck_assert_uint_le(big, 4464);
    free(x);
}
END_TEST

START_TEST(v_like_moments)
{
    /* v = u_th sigma_hc z. With channel_log_sd 0 (sigma = scale) and token_log_sd 0.3:
     * E v = 0, E v^2 = scale^2 E u^2 = exp(2 * 0.09) = 1.19722 (scale 1). The token
     * scale dominates the sampling error: u^2 = exp(0.6 g) has relative sd
     * sqrt(exp(0.36) - 1) = 0.658 per (t, h); over T H = 16384 pairs 0.0051; z^2 adds
     * sqrt(2 / n) = 0.0014 (n = 2^21). Tolerance 5 sd of the total (0.0053): 2.7%. */
    enum { T = 4096, H = 4, D = 128, N = T * H * D };
    float *x = malloc(N * sizeof *x);
    ck_assert(x != NULL);
    lowp_gen_params p = lowp_gen_defaults(LOWP_GEN_V_LIKE);
    p.channel_log_sd = 0.0;
    ck_assert_int_eq(lowp_gen(LOWP_GEN_V_LIKE, &p, 4, T, H, D, x, NULL, 0), 0);
    double m, v;
    moments(x, N, &m, &v);
    ck_assert_double_eq_tol(v, exp(0.18), 0.027 * exp(0.18));
    /* mean: sd sqrt(1.197 / n) = 7.6e-4; 5 sd */
    ck_assert_double_eq_tol(m, 0.0, 0.0038);
    /* Defaults (channel_log_sd 0.25): E v^2 = exp(2 * 0.0625) exp(0.18) = 1.35655 over the
     * channel draw; the 512 channel sigmas add relative sd sqrt(exp(0.25) - 1) / sqrt(512)
     * = 0.0236 to the 0.0053 above: 5 sd of the total (0.0242) = 12%. */
    ck_assert_int_eq(lowp_gen(LOWP_GEN_V_LIKE, NULL, 4, T, H, D, x, NULL, 0), 0);
    moments(x, N, &m, &v);
    ck_assert_double_eq_tol(v, exp(0.125 + 0.18), 0.12 * exp(0.125 + 0.18));
    free(x);
}
END_TEST

START_TEST(k_like_outlier_channels_and_rope)
{
    enum { T = 2048, H = 4, D = 128, N = T * H * D };
    float *pre = malloc(N * sizeof *pre), *post = malloc(N * sizeof *post);
    ck_assert(pre != NULL && post != NULL);
    lowp_gen_params p = lowp_gen_defaults(LOWP_GEN_K_LIKE);
    p.rope = 0;
    ck_assert_int_eq(lowp_gen(LOWP_GEN_K_LIKE, &p, 8, T, H, D, pre, NULL, 0), 0);
    p.rope = 1;
    ck_assert_int_eq(lowp_gen(LOWP_GEN_K_LIKE, &p, 8, T, H, D, post, NULL, 0), 0);
    for (size_t h = 0; h < H; h++) {
        size_t ch[D];
        size_t m = lowp_gen_outlier_channels(&p, 8, H, D, h, ch);
        ck_assert_uint_eq(m, p.outliers_per_head);
        int is_out[D] = {0};
        for (size_t j = 0; j < m; j++) {
            /* rotate-half low-frequency pairs i in [D/4, D/2): channels [32, 64) and [96, 128) */
            ck_assert((ch[j] >= D / 4 && ch[j] < D / 2) || ch[j] >= 3 * D / 4);
            is_out[ch[j]] = 1;
        }
        /* pre-RoPE: a massive channel has mean sign * A, A in [20, 200] (scale 1), spread
         * 0.2 A per token: sd of the mean 0.2 A / sqrt(2048) = 0.0044 A; allow 3%. Every
         * ordinary channel's RMS is below 20: its sigma = exp(0.5 g) exceeds 10 only for
         * g > 4.6 (p ~ 2e-6 over 512 channels), and the offset is 0.5 sigma g'. */
        double min_out = INFINITY, max_ord = 0;
        for (size_t c = 0; c < D; c++) {
            double s = 0, s2 = 0;
            for (size_t t = 0; t < T; t++) {
                double v = pre[(t * H + h) * D + c];
                s += v;
                s2 += v * v;
            }
            double mean = s / T, rms = sqrt(s2 / T);
            if (is_out[c]) {
                ck_assert(fabs(mean) >= 20.0 * 0.97 && fabs(mean) <= 200.0 * 1.03);
                if (fabs(mean) < min_out)
                    min_out = fabs(mean);
            } else if (rms > max_ord) {
                max_ord = rms;
            }
        }
        ck_assert(min_out > max_ord);
    }
    /* RoPE is a rotation of each pair (i, i + D/2) by (t + 0) * 10000^(-2i/D): the pair's
     * energy is kept (to binary32 rounding: relative 2^-23 per value, allow 1e-6), and
     * element a equals k~_a cos(theta) - k~_b sin(theta) to binary32 rounding of the
     * inputs and the result (allow 4e-7 of the pair's magnitude). */
    for (size_t t = 0; t < T; t += 37)
        for (size_t h = 0; h < H; h++)
            for (size_t i = 0; i < D / 2; i++) {
                size_t a = (t * H + h) * D + i, b = a + D / 2;
                double e0 = (double)pre[a] * pre[a] + (double)pre[b] * pre[b];
                double e1 = (double)post[a] * post[a] + (double)post[b] * post[b];
                ck_assert(fabs(e1 - e0) <= 1e-6 * e0 + 1e-30);
                double th = (double)t * pow(10000.0, -2.0 * (double)i / D);
                double want = (double)pre[a] * cos(th) - (double)pre[b] * sin(th);
                ck_assert(fabs(post[a] - want) <= 4e-7 * sqrt(e0) + 1e-30);
            }
    free(pre);
    free(post);
}
END_TEST

START_TEST(generator_parameter_errors)
{
    float x[16];
    char why[128];
    lowp_gen_params p = lowp_gen_defaults(LOWP_GEN_K_LIKE);
    ck_assert_int_eq(lowp_gen(LOWP_GEN_K_LIKE, &p, 1, 2, 1, 7, x, why, sizeof why), -1); /* odd D */
    ck_assert(strstr(why, "even") != NULL);
    p.outliers_per_head = 9; /* D = 16: 8 low-frequency channels */
    ck_assert_int_eq(lowp_gen(LOWP_GEN_K_LIKE, &p, 1, 1, 1, 16, x, why, sizeof why), -1);
    p = lowp_gen_defaults(LOWP_GEN_STUDENT_T);
    p.nu = 0;
    ck_assert_int_eq(lowp_gen(LOWP_GEN_STUDENT_T, &p, 1, 1, 1, 16, x, why, sizeof why), -1);
    lowp_gen_kind k;
    ck_assert_int_eq(lowp_gen_kind_parse("k-like", &k), 0);
    ck_assert_int_eq(k, LOWP_GEN_K_LIKE);
    ck_assert_int_eq(lowp_gen_kind_parse("k_like", &k), -1);
    ck_assert_str_eq(lowp_gen_kind_name(LOWP_GEN_STUDENT_T), "student-t");
}
END_TEST

static Suite *stats_suite(void)
{
    Suite *s = suite_create("stats");
    TCase *hand = tcase_create("hand_computed");
    tcase_add_test(hand, tiny_array_every_metric_by_hand);
    tcase_add_test(hand, mixed_f32_f64_inputs_and_short_last_block);
    tcase_add_test(hand, quantiles_nearest_rank_on_100_blocks);
    tcase_add_test(hand, sqnr_rel_l2_cosine_identities);
    tcase_add_test(hand, nan_and_inf_pairs_are_counted_and_left_out);
    tcase_add_test(hand, ulp_metric_on_bf16_neighbours);
    tcase_add_test(hand, scale_classes_e4m3_and_e8m0);
    tcase_add_test(hand, output_helpers_write_every_row);
    suite_add_tcase(s, hand);

    TCase *quant = tcase_create("quantized");
    tcase_set_timeout(quant, 120);
    tcase_add_test(quant, bf16_passthrough_is_within_half_an_ulp);
    tcase_add_test(quant, quantized_counts_and_scales_agree_with_block_counts);
    tcase_add_test(quant, padding_tail_is_left_out);
    tcase_add_test(quant, table_dequantize_equals_block_dequantize);
    tcase_add_test(quant, quant_sse_equals_stats_sum_err2);
    tcase_add_test(quant, same_bytes_for_1_and_2_threads);
    suite_add_tcase(s, quant);

    TCase *gen = tcase_create("generators");
    tcase_set_timeout(gen, 120);
    tcase_add_test(gen, generators_reproducible_and_thread_independent);
    tcase_add_test(gen, gaussian_and_student_t_moments);
    tcase_add_test(gen, v_like_moments);
    tcase_add_test(gen, k_like_outlier_channels_and_rope);
    tcase_add_test(gen, generator_parameter_errors);
    suite_add_tcase(s, gen);
    return s;
}

int main(void)
{
    return lowp_test_main(stats_suite(), LOWP_TEST_FORK);
}
