/* tests/test_calib.c: global-scale calibration (lowp/calib.h).
 *
 * The guarantees tested are the ones calib.h states: mse never worse than amax (per slice,
 * so per tensor exactly), per-head mse never worse than per-tensor mse when blocks do not
 * straddle heads, the methods' global scales as defined, g = 1.0 on small magnitudes
 * showing subnormal and zero E4M3 block scales, and the same results on 1 and 2 threads. */
#include <check.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lowp/block.h"
#include "lowp/calib.h"
#include "lowp/gen.h"
#include "lowp/stats.h"
#include "lowp_test.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

/* Small tensors keep the suite quick; search_max below the slice size exercises the
 * subsampled search and its re-scoring. */
enum { T = 256, H = 4, D = 64, N = T * H * D };

static float *make(lowp_gen_kind k, double scale, uint64_t seed)
{
    float *x = malloc(N * sizeof *x);
    ck_assert(x != NULL);
    lowp_gen_params p = lowp_gen_defaults(k);
    p.scale = scale;
    ck_assert_int_eq(lowp_gen(k, &p, seed, T, H, D, x, NULL, 0), 0);
    return x;
}

static lowp_calib_table run(const float *x, const lowp_calib_spec *specs, size_t n, size_t search_max)
{
    lowp_calib_options o = {T, H, D, search_max};
    lowp_calib_table t;
    char why[256] = "";
    int rc = lowp_calib_run(x, &o, specs, n, &t, why, sizeof why);
    if (rc != 0)
        fprintf(stderr, "lowp_calib_run: %s\n", why);
    ck_assert_int_eq(rc, 0);
    ck_assert_uint_eq(t.n, n);
    return t;
}

/* ---------------------------------------------------------------------------------- */

START_TEST(abs_quantile_nearest_rank_by_hand)
{
    /* non-NaN |x| = {5, 1, 3, 2, 4} -> sorted 1 2 3 4 5 (m = 5); rank ceil(q m):
     *   q 1/5 -> 1 -> 1;  q 21/100 -> ceil(1.05) = 2 -> 2;  q 1/2 -> 3 -> 3;
     *   q 999/1000 -> ceil(4.995) = 5 -> 5;  q 1 -> 5. */
    const float x[] = {-5, 1, NAN, 3, -2, 4};
    ck_assert(lowp_calib_abs_quantile(x, 6, 1, 5) == 1.0f);
    ck_assert(lowp_calib_abs_quantile(x, 6, 21, 100) == 2.0f);
    ck_assert(lowp_calib_abs_quantile(x, 6, 1, 2) == 3.0f);
    ck_assert(lowp_calib_abs_quantile(x, 6, 999, 1000) == 5.0f);
    ck_assert(lowp_calib_abs_quantile(x, 6, 1, 1) == 5.0f);
    ck_assert(lowp_calib_amax(x, 6) == 5.0f);
    /* Inf sorts above every finite value; all-NaN gives 0; values that share the top 16
     * bits are told apart by the second pass */
    const float y[] = {INFINITY, 1.0f, 1.0000001f, 1.0000002f};
    ck_assert(isinf(lowp_calib_abs_quantile(y, 4, 1, 1)));
    ck_assert(lowp_calib_abs_quantile(y, 4, 1, 2) == 1.0000001f);
    ck_assert(lowp_calib_abs_quantile(y, 4, 3, 4) == 1.0000002f);
    const float z[] = {NAN, -NAN};
    ck_assert(lowp_calib_abs_quantile(z, 2, 1, 2) == 0.0f);
    ck_assert(lowp_calib_amax(z, 2) == 0.0f);
}
END_TEST

START_TEST(methods_give_the_stated_global_scales)
{
    float *x = make(LOWP_GEN_K_LIKE, 1.0, 1);
    const lowp_calib_spec specs[] = {
        {LOWP_NVFP4, LOWP_RECIPE_SGLANG_KV, LOWP_CALIB_FIXED, LOWP_CALIB_TENSOR, 0},
        {LOWP_NVFP4, LOWP_RECIPE_SGLANG_KV, LOWP_CALIB_AMAX, LOWP_CALIB_TENSOR, 0},
        {LOWP_NVFP4, LOWP_RECIPE_EXACT, LOWP_CALIB_AMAX, LOWP_CALIB_TENSOR, 0},
        {LOWP_NVFP4, LOWP_RECIPE_EXACT, LOWP_CALIB_P999, LOWP_CALIB_HEAD, 0},
        {LOWP_FP8_E4M3, LOWP_RECIPE_EXACT, LOWP_CALIB_P9999, LOWP_CALIB_TENSOR, 0},
        {LOWP_MXFP4, LOWP_RECIPE_OCP, LOWP_CALIB_NONE, LOWP_CALIB_TENSOR, 0},
    };
    lowp_calib_table t = run(x, specs, N_ELEMS(specs), 0);
    float amax = lowp_calib_amax(x, N);
    ck_assert_uint_eq(t.rows[0].n_gscales, 1);
    ck_assert(t.rows[0].gscales[0] == 1.0f);
    ck_assert(t.rows[1].gscales[0] == (float)((double)amax / 2688.0));
    ck_assert(t.rows[2].gscales[0] == lowp_recipe_global_scale(LOWP_NVFP4, LOWP_RECIPE_EXACT, amax).dec);
    ck_assert_uint_eq(t.rows[3].n_gscales, H);
    for (size_t h = 0; h < H; h++) {
        float hx[T * D];
        for (size_t tk = 0; tk < T; tk++)
            memcpy(hx + tk * D, x + (tk * H + h) * D, D * sizeof *x);
        float q = lowp_calib_abs_quantile(hx, T * D, 999, 1000);
        ck_assert(t.rows[3].gscales[h] == lowp_recipe_global_scale(LOWP_NVFP4, LOWP_RECIPE_EXACT, q).dec);
    }
    float q4 = lowp_calib_abs_quantile(x, N, 9999, 10000);
    ck_assert(t.rows[4].gscales[0] == lowp_recipe_global_scale(LOWP_FP8_E4M3, LOWP_RECIPE_EXACT, q4).dec);
    ck_assert(t.rows[4].gscales[0] == q4 / 448.0f);
    ck_assert_uint_eq(t.rows[5].n_gscales, 0);
    ck_assert(t.rows[5].st.has_scales && t.rows[5].st.scale_format == LOWP_E8M0);
    /* The amax row reproduces lowp_stats_quantized with the same scale, to the bit. */
    lowp_stats s;
    lowp_global_scale gs = lowp_recipe_global_scale(LOWP_NVFP4, LOWP_RECIPE_EXACT, amax);
    ck_assert_int_eq(lowp_stats_quantized(LOWP_NVFP4, LOWP_RECIPE_EXACT, gs, 0, x, N, NULL, &s, NULL, 0), 0);
    ck_assert(memcmp(&s, &t.rows[2].st, sizeof s) == 0);
    lowp_calib_table_free(&t);
    free(x);
}
END_TEST

START_TEST(mse_never_worse_than_amax)
{
    /* Per tensor the mse row's sum of squared error is <= the amax row's exactly (the
     * amax candidate is re-scored on the whole tensor with the same sum as the row's
     * statistics). Per head the comparison is per head slice; the row sums the heads in
     * a different order, so allow 1e-12 relative for the reassociation. */
    const lowp_gen_kind kinds[] = {LOWP_GEN_K_LIKE, LOWP_GEN_V_LIKE, LOWP_GEN_GAUSSIAN, LOWP_GEN_STUDENT_T};
    struct {
        lowp_block_format f;
        lowp_recipe r;
        unsigned flags;
    } fr[] = {{LOWP_NVFP4, LOWP_RECIPE_EXACT, 0},
              {LOWP_NVFP4, LOWP_RECIPE_EXACT, LOWP_BLOCK_SCALE_UP},
              {LOWP_NVFP4, LOWP_RECIPE_TRTLLM, 0},
              {LOWP_NVFP4, LOWP_RECIPE_MODELOPT, 0},
              {LOWP_NVFP4, LOWP_RECIPE_SGLANG_KV, 0},
              {LOWP_FP8_E4M3, LOWP_RECIPE_EXACT, 0},
              {LOWP_FP8_E5M2, LOWP_RECIPE_EXACT, 0}};
    for (size_t k = 0; k < N_ELEMS(kinds); k++) {
        float *x = make(kinds[k], k == 0 ? 1.0 : 0.05, 100 + k);
        for (size_t j = 0; j < N_ELEMS(fr); j++) {
            lowp_calib_spec specs[4];
            for (int sc = 0; sc < 2; sc++) {
                lowp_calib_spec a = {fr[j].f, fr[j].r, LOWP_CALIB_AMAX, (lowp_calib_scope)sc, fr[j].flags};
                lowp_calib_spec m = a;
                m.method = LOWP_CALIB_MSE;
                specs[2 * sc] = a;
                specs[2 * sc + 1] = m;
            }
            lowp_calib_table t = run(x, specs, 4, 4096); /* 4096 < N: subsampled grid */
            ck_assert(t.rows[1].st.sum_err2 <= t.rows[0].st.sum_err2);
            ck_assert(t.rows[3].st.sum_err2 <= t.rows[2].st.sum_err2 * (1 + 1e-12));
            for (size_t h = 0; h < t.rows[3].n_gscales; h++)
                ck_assert(isfinite(t.rows[3].multipliers[h]) && t.rows[3].multipliers[h] > 0);
            lowp_calib_table_free(&t);
        }
        free(x);
    }
}
END_TEST

START_TEST(per_head_mse_not_worse_than_per_tensor_on_k_like)
{
    /* D = 64 is a multiple of 16 and 32: blocks never straddle heads, and per-head mse has
     * the per-tensor choice among its candidates (calib.h). */
    float *x = make(LOWP_GEN_K_LIKE, 1.0, 7);
    const lowp_calib_spec specs[] = {
        {LOWP_NVFP4, LOWP_RECIPE_EXACT, LOWP_CALIB_MSE, LOWP_CALIB_TENSOR, 0},
        {LOWP_NVFP4, LOWP_RECIPE_EXACT, LOWP_CALIB_MSE, LOWP_CALIB_HEAD, 0},
        {LOWP_NVFP4, LOWP_RECIPE_EXACT, LOWP_CALIB_MSE, LOWP_CALIB_HEAD, LOWP_BLOCK_SCALE_UP}, /* no memo */
        {LOWP_NVFP4, LOWP_RECIPE_EXACT, LOWP_CALIB_MSE, LOWP_CALIB_TENSOR, LOWP_BLOCK_SCALE_UP},
        {LOWP_FP8_E4M3, LOWP_RECIPE_EXACT, LOWP_CALIB_MSE, LOWP_CALIB_TENSOR, 0},
        {LOWP_FP8_E4M3, LOWP_RECIPE_EXACT, LOWP_CALIB_MSE, LOWP_CALIB_HEAD, 0},
    };
    lowp_calib_table t = run(x, specs, N_ELEMS(specs), 8192);
    ck_assert(t.rows[1].st.sum_err2 <= t.rows[0].st.sum_err2 * (1 + 1e-12));
    ck_assert(t.rows[2].st.sum_err2 <= t.rows[3].st.sum_err2 * (1 + 1e-12));
    ck_assert(t.rows[5].st.sum_err2 <= t.rows[4].st.sum_err2 * (1 + 1e-12));
    lowp_calib_table_free(&t);
    free(x);
}
END_TEST

START_TEST(sglang_g1_on_small_magnitudes_counts_subnormal_and_zero_scales)
{
    /* K-like at scale 1e-3: ordinary blocks have amax ~ 3e-3, so at g = 1 their E4M3
     * block scale amax/6 ~ 5e-4 is below 2^-6 (subnormal) and often below 2^-10 (zero);
     * the amax-calibrated g = amax/2688 keeps every block scale normal. */
    float *x = make(LOWP_GEN_K_LIKE, 1e-3, 5);
    const lowp_calib_spec specs[] = {
        {LOWP_NVFP4, LOWP_RECIPE_SGLANG_KV, LOWP_CALIB_FIXED, LOWP_CALIB_TENSOR, 0},
        {LOWP_NVFP4, LOWP_RECIPE_SGLANG_KV, LOWP_CALIB_AMAX, LOWP_CALIB_TENSOR, 0},
    };
    lowp_calib_table t = run(x, specs, 2, 0);
    const lowp_stats *g1 = &t.rows[0].st, *cal = &t.rows[1].st;
    ck_assert_uint_gt(g1->scale_subnormal, 0);
    ck_assert_uint_gt(g1->scale_zero, 0);
    ck_assert_uint_eq(g1->scale_zero + g1->scale_subnormal + g1->scale_normal + g1->scale_nan, N / 16);
    ck_assert_uint_eq(g1->counts.scale_zero, g1->scale_zero);
    ck_assert_uint_eq(g1->counts.scale_subnormal, g1->scale_subnormal);
    ck_assert_uint_eq(cal->scale_zero, 0);
    ck_assert_uint_eq(cal->scale_subnormal, 0);
    /* zero-scale blocks decode to zero: per-block relative error 1, flushed elements */
    ck_assert(g1->blk_max == 1.0);
    ck_assert_uint_ge(g1->counts.flushed, 15 * g1->scale_zero);
    ck_assert(g1->sum_err2 > cal->sum_err2);
    lowp_calib_table_free(&t);
    free(x);
}
END_TEST

START_TEST(default_specs_and_rejections)
{
    lowp_calib_spec s[LOWP_CALIB_MAX_SPECS];
    size_t n = lowp_calib_default_specs(LOWP_NVFP4, 0, s);
    ck_assert_uint_eq(n, 18);
    ck_assert(s[0].recipe == LOWP_RECIPE_SGLANG_KV && s[0].method == LOWP_CALIB_FIXED);
    n = lowp_calib_default_specs(LOWP_NVFP4, 1, s);
    ck_assert_uint_eq(n, 18 + 4 + 9 + 1 + 1);
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(lowp_recipe_check(s[i].format, s[i].recipe, NULL, 0), 0);

    float x[N] = {0};
    lowp_calib_options o = {T, H, D, 0};
    lowp_calib_table t;
    char why[256];
    const lowp_calib_spec bad1 = {LOWP_MXFP4, LOWP_RECIPE_OCP, LOWP_CALIB_AMAX, LOWP_CALIB_TENSOR, 0};
    ck_assert_int_eq(lowp_calib_run(x, &o, &bad1, 1, &t, why, sizeof why), -1);
    ck_assert(strstr(why, "no global scale") != NULL);
    const lowp_calib_spec bad2 = {LOWP_NVFP4, LOWP_RECIPE_EXACT, LOWP_CALIB_NONE, LOWP_CALIB_TENSOR, 0};
    ck_assert_int_eq(lowp_calib_run(x, &o, &bad2, 1, &t, why, sizeof why), -1);
    const lowp_calib_spec bad3 = {LOWP_NVFP4, LOWP_RECIPE_OCP, LOWP_CALIB_AMAX, LOWP_CALIB_TENSOR, 0};
    ck_assert_int_eq(lowp_calib_run(x, &o, &bad3, 1, &t, why, sizeof why), -1);
    ck_assert_int_eq(lowp_calib_run(x, NULL, &bad3, 1, &t, why, sizeof why), -1);
    /* an all-zero tensor: every method falls back to the recipe's guarded scale and the
     * error is zero */
    const lowp_calib_spec ok[] = {{LOWP_NVFP4, LOWP_RECIPE_EXACT, LOWP_CALIB_MSE, LOWP_CALIB_HEAD, 0},
                                  {LOWP_FP8_E4M3, LOWP_RECIPE_EXACT, LOWP_CALIB_P999, LOWP_CALIB_TENSOR, 0}};
    t = run(x, ok, 2, 0);
    ck_assert(t.rows[0].st.sum_err2 == 0.0 && t.rows[1].st.sum_err2 == 0.0);
    ck_assert(t.rows[1].gscales[0] == 1.0f); /* FP8 amax 0 -> 1.0 (recipes.md) */
    lowp_calib_table_free(&t);
    ck_assert_str_eq(lowp_calib_method_name(LOWP_CALIB_P9999), "p99.99");
    ck_assert_str_eq(lowp_calib_scope_name(LOWP_CALIB_HEAD), "head");
}
END_TEST

START_TEST(odd_shapes_are_padded)
{
    /* D = 24 is not a multiple of 16 or 32 and 5 x 3 x 24 = 360 is not a multiple of 32. */
    enum { T2 = 5, H2 = 3, D2 = 24, N2 = T2 * H2 * D2 };
    float x[N2];
    ck_assert_int_eq(lowp_gen(LOWP_GEN_K_LIKE, NULL, 2, T2, H2, D2, x, NULL, 0), 0);
    lowp_calib_spec s[LOWP_CALIB_MAX_SPECS];
    size_t n = lowp_calib_default_specs(LOWP_NVFP4, 1, s);
    lowp_calib_options o = {T2, H2, D2, 64};
    lowp_calib_table t;
    char why[256];
    ck_assert_int_eq(lowp_calib_run(x, &o, s, n, &t, why, sizeof why), 0);
    for (size_t i = 0; i < t.n; i++) {
        ck_assert_uint_eq(t.rows[i].st.n, N2);
        ck_assert_uint_eq(t.rows[i].st.counts.elements, N2);
        ck_assert(isfinite(t.rows[i].st.sum_err2));
    }
    lowp_calib_table_free(&t);
}
END_TEST

START_TEST(same_results_on_1_and_2_threads)
{
    /* 2^18 elements: above the size where the statistics and search sums go parallel
     * (LOWP_STATS_PARALLEL_MIN = 2^17), so both paths of every reduction run. */
    enum { T4 = 1024, N4 = T4 * H * D };
    float *x = malloc(N4 * sizeof *x);
    ck_assert(x != NULL);
    ck_assert_int_eq(lowp_gen(LOWP_GEN_K_LIKE, NULL, 3, T4, H, D, x, NULL, 0), 0);
    lowp_calib_spec s[LOWP_CALIB_MAX_SPECS];
    size_t n = lowp_calib_default_specs(LOWP_NVFP4, 0, s);
    n += lowp_calib_default_specs(LOWP_FP8_E4M3, 0, s + n);
    lowp_calib_options o = {T4, H, D, 1 << 16};
    lowp_calib_table a, b;
    omp_set_num_threads(1);
    ck_assert_int_eq(lowp_calib_run(x, &o, s, n, &a, NULL, 0), 0);
    omp_set_num_threads(2);
    ck_assert_int_eq(lowp_calib_run(x, &o, s, n, &b, NULL, 0), 0);
    for (size_t i = 0; i < n; i++) {
        ck_assert_uint_eq(a.rows[i].n_gscales, b.rows[i].n_gscales);
        if (a.rows[i].n_gscales)
            ck_assert(memcmp(a.rows[i].gscales, b.rows[i].gscales, a.rows[i].n_gscales * sizeof(float)) == 0);
        ck_assert(memcmp(&a.rows[i].st, &b.rows[i].st, sizeof a.rows[i].st) == 0);
    }
    lowp_calib_table_free(&a);
    lowp_calib_table_free(&b);
    free(x);
}
END_TEST

static Suite *calib_suite(void)
{
    Suite *s = suite_create("calib");
    lowp_test_tcase(s, "calibration", 300,
                    LOWP_TESTS(abs_quantile_nearest_rank_by_hand,
                               methods_give_the_stated_global_scales, mse_never_worse_than_amax,
                               per_head_mse_not_worse_than_per_tensor_on_k_like,
                               sglang_g1_on_small_magnitudes_counts_subnormal_and_zero_scales,
                               default_specs_and_rejections, odd_shapes_are_padded,
                               same_results_on_1_and_2_threads));
    return s;
}

int main(void)
{
    return lowp_test_main(calib_suite(), LOWP_TEST_FORK);
}
