/* tests/test_attn_gpu_emul.c: the GPU decode kernel's definition and its CPU emulator
 * (lowp/attn_gpu_emul.h, lowp/exp2_sw.h), on any machine.
 *
 * Expected values come from the definition, not from the emulator:
 *   - exp2_sw against binary64 exp2 on a dense sweep of binary32 inputs (within 2 ulp
 *     for normal results), exact powers of two at integers, and its special cases;
 *   - element values: every code of every format times every scale byte, against the
 *     exact binary64 product of the decoded code and scale;
 *   - one-token and equal-key decodes, whose outputs the definition fixes exactly
 *     (p = 1 or p_j all 1, MMA sums of exact terms);
 *   - the thread count never changes a bit; shapes the kernel cannot run are refused.
 * The emulator against binary64 attention within the derived bound runs as the ctest
 * `gpu_decode_emulator` (lowp_gpu_decode_check --emulator-only).
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lowp/attn_gpu_emul.h"
#include "lowp/exp2_sw.h"
#include "lowp/format.h"
#include "lowp_test.h"

static double ulp_f32(double x)
{
    int e;
    frexp(fabs(x), &e);
    if (e - 24 < -149)
        return 0x1p-149;
    return ldexp(1.0, e - 24);
}

START_TEST(exp2_sw_accuracy)
{
    /* every 5th binary32 in [-150, 128): about 9e8 inputs */
    double worst = 0.0;
    float worst_x = 0.0f;
    for (int neg = 0; neg < 2; neg++) {
        uint32_t lo = 0, hi = neg ? 0x43160000u /* 150 */ : 0x43000000u /* 128 */;
        for (uint32_t u = lo; u < hi; u += 5) {
            const float x = lowp_f32_from_bits(u | (neg ? 0x80000000u : 0));
            if (neg && x < -150.0f)
                continue;
            double want = exp2((double)x);
            double got = (double)lowp_exp2_sw(x);
            double err = fabs(got - want) / ulp_f32(want);
            if (want >= 0x1p-126 && err > worst) {
                worst = err;
                worst_x = x;
            }
            if (want < 0x1p-126)
                ck_assert_msg(fabs(got - want) <= 2.0 * 0x1p-149 + 4.0 * ulp_f32(want),
                              "exp2_sw(%a) = %a, exp2 = %a", (double)x, got, want);
        }
    }
    printf("exp2_sw: worst error %.3f ulp at x = %a (normal results)\n", worst,
           (double)worst_x);
    ck_assert_msg(worst <= 2.0, "exp2_sw is %.3f ulp off at %a", worst, (double)worst_x);
}
END_TEST

/* lowp/exp2_sw.h's definition, re-derived here as the independent oracle of the
 * exhaustive comparison below: the GPU kernels and the emulator run lowp_exp2_sw, which
 * computes the definition differently (clamps, a magic-number rint, exponent-field
 * arithmetic) and carries the coefficients as literals. Here they come from their
 * definition, c_k = fl(ln(2)^k / k!): ln(2)^k / k! in binary64 (log(2.0) and 2k roundings,
 * within 2^-48 relative), then rounded once to binary32; every c_k lies at least 0.008
 * binary32 ulp (about 2^-31 relative, k = 4 the closest) from a binary32 midpoint, so that
 * rounding gives the correctly rounded value. The steps then follow the definition's text:
 * its range rules, n = rint(x), f = x - n, p by Horner in fmaf from c_7 down to c_0 = 1,
 * and the two products by 2^(n/2) and 2^(n - n/2) made with ldexpf. */
static float exp2_c[8]; /* set by exp2_coefficients, before any test runs */

static void exp2_coefficients(void)
{
    double t = 1.0;
    exp2_c[0] = 1.0f;
    for (int k = 1; k < 8; k++) {
        t = t * log(2.0) / k;
        exp2_c[k] = (float)t;
    }
}

static float exp2_definition(float x)
{
    if (isnan(x))
        return x;
    if (x >= 128.0f)
        return INFINITY;
    if (x < -150.0f)
        return 0.0f;
    const float n = rintf(x), f = x - n;
    float p = exp2_c[7];
    for (int k = 6; k >= 0; k--)
        p = fmaf(p, f, exp2_c[k]);
    const int e1 = (int)n / 2, e2 = (int)n - e1;
    return (p * ldexpf(1.0f, e1)) * ldexpf(1.0f, e2);
}

static int full_tier; /* --full */

/* Over every binary32 bit pattern u (full tier), or those quick(u) keeps (quick tier):
 * how many differ(u), and in *first one of them. OpenMP over 2^20-input chunks. */
static uint64_t sweep_binary32(int (*quick)(uint32_t), int (*differ)(uint32_t), uint32_t *first)
{
    uint64_t bad = 0;
    *first = 0;
#pragma omp parallel for schedule(static, 1 << 20) reduction(+ : bad)
    for (int64_t i = 0; i <= (int64_t)UINT32_MAX; i++) {
        const uint32_t u = (uint32_t)i;
        if (!full_tier && !quick(u))
            continue;
        if (differ(u)) {
            if (bad == 0)
#pragma omp critical
                *first = u;
            bad++;
        }
    }
    return bad;
}

/* lowp_exp2_sw gives the definition's bits for every one of the 2^32 binary32 inputs in
 * the full tier (about 50 s on 2 cores). The quick tier takes every 16th input, and every
 * input with 64 <= |x| < 256, where the clamps and the exponent split act. */
static int exp2_quick(uint32_t u)
{
    const uint32_t mag = u & 0x7FFFFFFFu;
    return (u & 15) == 0 || (mag >= 0x42800000u && mag < 0x43800000u);
}

static int exp2_differs(uint32_t u)
{
    const float x = lowp_f32_from_bits(u);
    return lowp_f32_bits(lowp_exp2_sw(x)) != lowp_f32_bits(exp2_definition(x));
}

START_TEST(exp2_sw_is_the_definition)
{
    uint32_t first;
    const uint64_t bad = sweep_binary32(exp2_quick, exp2_differs, &first);
    ck_assert_msg(bad == 0, "lowp_exp2_sw differs from its definition on %llu inputs (e.g. "
                  "bits 0x%08x)", (unsigned long long)bad, (unsigned)first);
}
END_TEST

/* lowp_bf16_from_f32 (the emulator's fast round-to-nearest-even, kept because the kernels'
 * emulation calls it per element) is the codec's BF16 encoder, format bf16, profile cuda,
 * round rn, default overflow (cvt.rn.bf16.f32: Inf on overflow, NaN as 0x7FFF), bit for
 * bit on every one of the 2^32 binary32 inputs in the full tier. The quick tier takes every
 * 64th input, and every input whose low 16 bits are within 2 of the tie 0x8000 or of 0 (the
 * carries and the ties to even), so a wrong tie or carry still fails it. */
static lowp_codec bf16_codec; /* set before the sweep, read-only in it */

/* every 64th input, and every one whose low 16 bits are within 2 of 0x8000 or of 0 */
static int bf16_quick(uint32_t u)
{
    const uint32_t lo = u & 0xFFFFu;
    return (u & 63) == 0 || lo - 0x7FFEu <= 4u || ((lo + 2u) & 0xFFFFu) <= 4u;
}

static int bf16_differs(uint32_t u)
{
    const float x = lowp_f32_from_bits(u);
    return lowp_bf16_from_f32(x) != lowp_encode_f32(&bf16_codec, x);
}

START_TEST(bf16_fast_is_the_codec)
{
    char why[200];
    ck_assert_msg(lowp_codec_init(&bf16_codec, LOWP_BF16, LOWP_PROFILE_CUDA, LOWP_RN,
                                  LOWP_SAT_DEFAULT, why, sizeof why) == 0,
                  "codec bf16/cuda/rn: %s", why);
    uint32_t first;
    const uint64_t bad = sweep_binary32(bf16_quick, bf16_differs, &first);
    ck_assert_msg(bad == 0, "lowp_bf16_from_f32 differs from the bf16/cuda/rn codec on %llu "
                  "inputs (e.g. bits 0x%08x)", (unsigned long long)bad, (unsigned)first);
}
END_TEST

START_TEST(exp2_sw_special)
{
    ck_assert(isnan(lowp_exp2_sw(NAN)));
    ck_assert(lowp_exp2_sw(-INFINITY) == 0.0f && !signbit(lowp_exp2_sw(-INFINITY)));
    ck_assert(isinf(lowp_exp2_sw(128.0f)) && isinf(lowp_exp2_sw(INFINITY)));
    ck_assert(lowp_exp2_sw(-150.5f) == 0.0f);
    for (int n = -126; n <= 127; n++)
        ck_assert_msg(lowp_exp2_sw((float)n) == ldexpf(1.0f, n), "exp2_sw(%d) is not 2^%d", n, n);
    ck_assert(lowp_exp2_sw(0.0f) == 1.0f && lowp_exp2_sw(-0.0f) == 1.0f);
    /* monotone on a dense sample near 0 (where softmax weights live) */
    float prev = 0.0f;
    for (float x = -30.0f; x <= 0.0f; x += 0x1p-10f) {
        float y = lowp_exp2_sw(x);
        ck_assert_msg(y >= prev, "exp2_sw not monotone at %a", (double)x);
        prev = y;
    }
}
END_TEST

START_TEST(bf16_conversions)
{
    for (uint32_t b = 0; b < 0x10000u; b++) {
        float x = lowp_f32_from_bf16((uint16_t)b);
        if (isnan(x))
            ck_assert(isnan(lowp_f32_from_bf16(lowp_bf16_from_f32(x))));
        else
            ck_assert_uint_eq(lowp_bf16_from_f32(x), b);
    }
    /* ties to even, and the largest finite value rounding to Inf */
    ck_assert_uint_eq(lowp_bf16_from_f32(1.0f + 0x1p-8f), 0x3F80);
    ck_assert_uint_eq(lowp_bf16_from_f32(1.0f + 0x3p-8f), 0x3F82);
    ck_assert_uint_eq(lowp_bf16_from_f32(0x1.ffp127f), 0x7F80);
}
END_TEST

/* Step 1 of the definition: exact products (NVFP4's times 2^-7), checked for every code
 * and scale byte. */
START_TEST(element_values)
{
    for (int s = 0; s < 256; s++)
        for (int c = 0; c < 16; c++) {
            double e2 = lowp_decode_f64(LOWP_E2M1, (uint16_t)c);
            double nv = e2 * lowp_decode_f64(LOWP_E4M3, (uint16_t)s) * 0x1p-7;
            float got = lowp_f32_from_bf16(lowp_gpu_decode_element_bf16(LOWP_NVFP4, (uint16_t)c,
                                                                        (uint8_t)s));
            if (isnan(nv))
                ck_assert(isnan(got));
            else
                ck_assert_msg((double)got == nv && !signbit(got) == !signbit(nv),
                              "nvfp4 code %x scale %02x: %a, want %a", c, s, (double)got, nv);
            double mx = s == 0xFF ? NAN : e2 * ldexp(1.0, s - 127);
            got = lowp_f32_from_bf16(lowp_gpu_decode_element_bf16(LOWP_MXFP4, (uint16_t)c,
                                                                 (uint8_t)s));
            if (isnan(mx))
                ck_assert(isnan(got));
            else if (fabs(mx) > 0x1.fep127)
                ck_assert_msg(isinf(got) && !signbit(got) == !signbit(mx),
                              "mxfp4 code %x scale %02x: %a should overflow", c, s, (double)got);
            else
                ck_assert_msg((double)got == mx && !signbit(got) == !signbit(mx),
                              "mxfp4 code %x scale %02x: %a, want %a", c, s, (double)got, mx);
        }
    for (int c = 0; c < 256; c++) {
        static const lowp_format ff[2] = {LOWP_E4M3, LOWP_E5M2};
        static const lowp_block_format bf[2] = {LOWP_FP8_E4M3, LOWP_FP8_E5M2};
        for (int i = 0; i < 2; i++) {
            double want = lowp_decode_f64(ff[i], (uint16_t)c);
            float got = lowp_f32_from_bf16(lowp_gpu_decode_element_bf16(bf[i], (uint16_t)c, 0));
            if (isnan(want))
                ck_assert(isnan(got));
            else
                ck_assert_msg((double)got == want && !signbit(got) == !signbit(want),
                              "fp8 %d code %02x: %a want %a", i, c, (double)got, want);
        }
    }
}
END_TEST

/* A cache of ctx tokens in one sequence, pages in order. */
typedef struct fixture {
    lowp_kvcache *c;
    lowp_kv_view view;
    int32_t indptr[2], last, *indices;
    lowp_kv_page_table pt;
} fixture;

static void fixture_make(fixture *fx, lowp_block_format f, size_t ctx, size_t H, size_t Dq,
                         size_t Dv, size_t P)
{
    char why[256];
    size_t np = (ctx + P - 1) / P;
    lowp_kv_config cfg = lowp_kv_config_default(f, np, P, H, Dq, Dv);
    if (f == LOWP_NVFP4)
        cfg.recipe = LOWP_RECIPE_EXACT;
    ck_assert_msg(lowp_kvcache_create(&cfg, &fx->c, why, sizeof why) == 0, "%s", why);
    fx->view = lowp_kv_view_of(&cfg);
    fx->indices = malloc(np * sizeof *fx->indices);
    for (size_t i = 0; i < np; i++)
        fx->indices[i] = (int32_t)i;
    fx->indptr[0] = 0;
    fx->indptr[1] = (int32_t)np;
    fx->last = (int32_t)(ctx - (np - 1) * P);
    fx->pt = (lowp_kv_page_table){1, fx->indptr, fx->indices, &fx->last};
}

static void fixture_free(fixture *fx)
{
    lowp_kvcache_destroy(fx->c);
    free(fx->indices);
}

static const lowp_block_format FMTS[] = {LOWP_BF16_PASS, LOWP_FP8_E4M3, LOWP_FP8_E5M2,
                                         LOWP_NVFP4, LOWP_MXFP4};

/* One token: p = 1, l = 1, o = v exactly, so out = bf16(v * V scale) (the definition). */
START_TEST(one_token_is_v)
{
    char why[256];
    for (size_t fi = 0; fi < 5; fi++) {
        lowp_block_format f = FMTS[fi];
        size_t H = 3, G = 5, Dq = 128, Dv = 64;
        fixture fx;
        fixture_make(&fx, f, 1, H, Dq, Dv, 16);
        float kg[1] = {lowp_block_has_global_scale(f) ? 0.75f : 1.0f};
        float vg[1] = {lowp_block_has_global_scale(f) ? 1.25f : 1.0f};
        ck_assert(lowp_kvcache_set_global_scales(fx.c, kg, vg, 1, why, sizeof why) == 0);
        float k[3 * 128], v[3 * 64];
        for (size_t i = 0; i < H * Dq; i++)
            k[i] = (float)sin(0.37 * (double)i) * 3.0f;
        for (size_t i = 0; i < H * Dv; i++)
            v[i] = (float)cos(0.11 * (double)i) * 2.0f;
        ck_assert_msg(lowp_kvcache_write_pos(fx.c, &fx.pt, 0, 0, k, v, NULL, NULL, why,
                                             sizeof why) == 0, "%s", why);
        uint16_t q[15 * 128], out[15 * 64];
        for (size_t i = 0; i < H * G * Dq; i++)
            q[i] = lowp_bf16_from_f32((float)(i % 7) - 3.0f);
        lowp_gpu_decode_args a = {.cache = fx.c, .view = &fx.view, .pt = &fx.pt,
                                  .num_q_heads = H * G, .q = q};
        ck_assert_msg(lowp_gpu_decode_emulate(&a, out, why, sizeof why) == 0, "%s", why);
        double vv[3 * 64];
        ck_assert(lowp_kvcache_read(fx.c, &fx.view, 0, 0, NULL, vv, why, sizeof why) == 0);
        for (size_t qh = 0; qh < H * G; qh++)
            for (size_t d = 0; d < Dv; d++) {
                size_t h = qh / G;
                /* the element (without the global scale) times the scale, in binary32 */
                float e = (float)(vv[h * Dv + d] / (double)vg[0]);
                uint16_t want = lowp_bf16_from_f32(e * vg[0]);
                /* the sign of an exact zero sum is the MMA's business: compare magnitudes */
                int same = (want & 0x7FFF) == 0 ? (out[qh * Dv + d] & 0x7FFF) == 0
                                                : out[qh * Dv + d] == want;
                ck_assert_msg(same, "%s head %zu dim %zu: %04x want %04x",
                              lowp_block_format_name(f), qh, d, out[qh * Dv + d], want);
            }
        fixture_free(&fx);
    }
}
END_TEST

/* Equal keys over n tokens: every p = 1 exactly, so out = bf16((sum_j v_j / n) * vs) when
 * the V sums are exact (small integers here); crosses tiles (n = 40) and splits (chunk 16). */
START_TEST(equal_keys_average)
{
    char why[256];
    size_t n = 40, H = 1, G = 2, D = 64;
    fixture fx;
    fixture_make(&fx, LOWP_BF16_PASS, n, H, D, D, 4);
    float k[64], v[64];
    for (size_t d = 0; d < D; d++)
        k[d] = (float)((d % 5) - 2);
    for (size_t t = 0; t < n; t++) {
        for (size_t d = 0; d < D; d++)
            v[d] = (float)((t * 7 + d) % 9) - 4.0f;
        ck_assert(lowp_kvcache_write_pos(fx.c, &fx.pt, 0, t, k, v, NULL, NULL, why,
                                         sizeof why) == 0);
    }
    uint16_t q[2 * 64], out[2 * 64];
    for (size_t i = 0; i < G * D; i++)
        q[i] = lowp_bf16_from_f32(0.5f * (float)(i % 3));
    for (int chunk = 0; chunk <= 16; chunk += 16) {
        lowp_gpu_decode_args a = {.cache = fx.c, .view = &fx.view, .pt = &fx.pt,
                                  .num_q_heads = G, .q = q, .chunk_tokens = (size_t)chunk};
        ck_assert_msg(lowp_gpu_decode_emulate(&a, out, why, sizeof why) == 0, "%s", why);
        for (size_t d = 0; d < D; d++) {
            double s = 0;
            for (size_t t = 0; t < n; t++)
                s += (double)((t * 7 + d) % 9) - 4.0;
            uint16_t want = lowp_bf16_from_f32((float)s / (float)n);
            for (size_t r = 0; r < G; r++)
                ck_assert_msg(out[r * D + d] == want, "chunk %d dim %zu: %04x want %04x", chunk,
                              d, out[r * D + d], want);
        }
    }
    fixture_free(&fx);
}
END_TEST

START_TEST(threads_do_not_change_bits)
{
    char why[256];
    size_t n = 300, H = 2, G = 6, Dq = 192, Dv = 128;
    fixture fx;
    fixture_make(&fx, LOWP_NVFP4, n, H, Dq, Dv, 16);
    float *k = malloc(H * Dq * sizeof *k), *v = malloc(H * Dv * sizeof *v);
    for (size_t t = 0; t < n; t++) {
        for (size_t i = 0; i < H * Dq; i++)
            k[i] = (float)sin((double)(t * 131 + i) * 0.013) * 4.0f;
        for (size_t i = 0; i < H * Dv; i++)
            v[i] = (float)cos((double)(t * 71 + i) * 0.029);
        ck_assert(lowp_kvcache_write_pos(fx.c, &fx.pt, 0, t, k, v, NULL, NULL, why,
                                         sizeof why) == 0);
    }
    uint16_t *q = malloc(H * G * Dq * sizeof *q);
    uint16_t *o1 = malloc(H * G * Dv * sizeof *o1), *o2 = malloc(H * G * Dv * sizeof *o2);
    for (size_t i = 0; i < H * G * Dq; i++)
        q[i] = lowp_bf16_from_f32((float)sin((double)i));
    lowp_gpu_decode_args a = {.cache = fx.c, .view = &fx.view, .pt = &fx.pt,
                              .num_q_heads = H * G, .q = q, .chunk_tokens = 64, .threads = 1};
    ck_assert(lowp_gpu_decode_emulate(&a, o1, why, sizeof why) == 0);
    a.threads = 2;
    ck_assert(lowp_gpu_decode_emulate(&a, o2, why, sizeof why) == 0);
    ck_assert(memcmp(o1, o2, H * G * Dv * sizeof *o1) == 0);
    /* a different split is a different (documented) computation: still close */
    a.chunk_tokens = 32;
    ck_assert(lowp_gpu_decode_emulate(&a, o2, why, sizeof why) == 0);
    for (size_t i = 0; i < H * G * Dv; i++)
        ck_assert(fabsf(lowp_f32_from_bf16(o1[i]) - lowp_f32_from_bf16(o2[i])) <= 0.02f);
    free(k);
    free(v);
    free(q);
    free(o1);
    free(o2);
    fixture_free(&fx);
}
END_TEST

START_TEST(refusals)
{
    char why[256];
    lowp_kv_config c = lowp_kv_config_default(LOWP_NVFP4, 1, 16, 2, 96, 128);
    ck_assert(lowp_gpu_decode_check(&c, 4, why, sizeof why) == -1);
    ck_assert_msg(strstr(why, "qk_dim 96") != NULL, "%s", why);
    c.qk_dim = 128;
    c.vo_dim = 576;
    ck_assert(lowp_gpu_decode_check(&c, 4, why, sizeof why) == -1);
    ck_assert_msg(strstr(why, "vo_dim 576") != NULL, "%s", why);
    c.vo_dim = 128;
    ck_assert(lowp_gpu_decode_check(&c, 34, why, sizeof why) == -1);
    ck_assert_msg(strstr(why, "group ratio 17") != NULL, "%s", why);
    ck_assert(lowp_gpu_decode_check(&c, 5, why, sizeof why) == -1);
    ck_assert_msg(strstr(why, "multiple") != NULL, "%s", why);
    c.format = LOWP_MXFP8;
    ck_assert(lowp_gpu_decode_check(&c, 4, why, sizeof why) == -1);
    ck_assert_msg(strstr(why, "mxfp8") != NULL, "%s", why);
    c.format = LOWP_NVFP4;
    ck_assert(lowp_gpu_decode_check(&c, 32, why, sizeof why) == 0);
    /* the emulator: an empty sequence and a split that is not a multiple of 16 */
    fixture fx;
    fixture_make(&fx, LOWP_BF16_PASS, 5, 1, 64, 64, 4);
    uint16_t q[64] = {0}, out[64];
    lowp_gpu_decode_args a = {.cache = fx.c, .view = &fx.view, .pt = &fx.pt, .num_q_heads = 1,
                              .q = q, .chunk_tokens = 24};
    ck_assert(lowp_gpu_decode_emulate(&a, out, why, sizeof why) == -1);
    ck_assert_msg(strstr(why, "multiple of 16") != NULL, "%s", why);
    int32_t ip[2] = {0, 0}, last0 = 0;
    lowp_kv_page_table empty = {1, ip, fx.indices, &last0};
    a.pt = &empty;
    a.chunk_tokens = 0;
    ck_assert(lowp_gpu_decode_emulate(&a, out, why, sizeof why) == -1);
    ck_assert_msg(strstr(why, "empty") != NULL, "%s", why);
    fixture_free(&fx);
    /* the split length rule */
    ck_assert_uint_eq(lowp_gpu_decode_chunk_tokens(1, 8, 131072), 1024);   /* 1024 items */
    ck_assert_uint_eq(lowp_gpu_decode_chunk_tokens(1, 8, 32768), 256);     /* 1024 items */
    ck_assert_uint_eq(lowp_gpu_decode_chunk_tokens(4, 8, 131072), 2048);   /* the length floor */
    ck_assert_uint_eq(lowp_gpu_decode_chunk_tokens(1, 8, 4096), 128);      /* the floor */
    ck_assert_uint_eq(lowp_gpu_decode_chunk_tokens(32, 8, 32768), 1024);   /* 8192 items */
    ck_assert_uint_eq(lowp_gpu_decode_chunk_tokens(1, 8, 1048576), 4096);  /* floor's cap */
    ck_assert_uint_eq(lowp_gpu_decode_chunk_tokens(64, 8, 1048576), 16384); /* the cap */
    ck_assert_uint_eq(lowp_gpu_decode_chunk_tokens(3, 8, 100000), 1568);   /* 1562 -> 1568 */
    ck_assert_uint_eq(lowp_gpu_decode_chunk_tokens(1, 1, 5), 16);
    ck_assert_uint_eq(lowp_gpu_decode_chunk_tokens(1, 1, 100), 112);
}
END_TEST

int main(int argc, char **argv)
{
    full_tier = lowp_test_tier("test_attn_gpu_emul", argc, argv);
    exp2_coefficients();
    Suite *s = suite_create("attn_gpu_emul");
    lowp_test_tcase(s, "emul", 600,
                    LOWP_TESTS(exp2_sw_special, exp2_sw_accuracy, exp2_sw_is_the_definition,
                               bf16_conversions, bf16_fast_is_the_codec, element_values,
                               one_token_is_v, equal_keys_average, threads_do_not_change_bits,
                               refusals));
    return lowp_test_main(s, LOWP_TEST_NOFORK);
}
