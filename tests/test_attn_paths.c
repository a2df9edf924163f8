/* tests/test_attn_paths.c: the production data paths of lowp/kvcache.h (ref/kvcache/src/kvpath.c).
 *
 * Each expected value is derived in the comment next to it from the path's definition in
 * kvcache.h and the recipes in ref/recipes.md (binary32 RN arithmetic), never copied from
 * lowp's output. Facts used:
 *   - rcp~(x) equals RN(1/x) for x = 1, 2, 6 and powers of two (recipes.md; ref/notes/formats.md 5.7);
 *     RN(1/6) = 0x3E2AAAAB = 0.16666667163...
 *   - E4M3 grid: step 2^(e-3) in [2^e, 2^(e+1)); max 448 = 1.75 * 2^8; the next step,
 *     480, is the NaN code 0x7F, so under torch's non-saturating cast (e4m3, torch, rn)
 *     every |x| > 464 (past the 448/480 midpoint) is NaN and 464 itself rounds to even, 448
 *     (profiles.md). The c10 cast tests magnitudes >= 480 for that code (ref/notes/kernels.md
 *     1.5); RNE already sends (464, 480) to the same code.
 *   - BF16 has 8 significant bits; its subnormals are multiples of 2^-133.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lowp/kvcache.h"
#include "lowp_test.h"

/* The draws of every test: lowp_splitmix64 from this state (the same start in each forked
 * test; the tests' expectations are exact properties of whatever values come out). */
static uint64_t rng_state = 88172645463325252ull;

static uint64_t rng_next(void)
{
    return lowp_splitmix64(&rng_state);
}

/* BF16-valued random floats over a few binades (so Q in BF16 is Q as given). */
static float rand_bf16(void)
{
    uint32_t bits = (uint32_t)(rng_next() & 0x7F) << 16; /* mantissa */
    bits |= (uint32_t)(120 + rng_next() % 14) << 23;       /* 2^-7 .. 2^6 */
    bits |= (uint32_t)(rng_next() & 1) << 31;
    return lowp_f32_from_bits(bits);
}

typedef struct path_out {
    double *q, *k, *v, *ks, *vs;
    lowp_kv_path_result res;
} path_out;

static void out_alloc(path_out *o, size_t nq, size_t nk, size_t nv, size_t H)
{
    o->q = calloc(nq ? nq : 1, sizeof(double));
    o->k = calloc(nk, sizeof(double));
    o->v = calloc(nv, sizeof(double));
    o->ks = calloc(H, sizeof(double));
    o->vs = calloc(H, sizeof(double));
}
static void out_free(path_out *o)
{
    free(o->q);
    free(o->k);
    free(o->v);
    free(o->ks);
    free(o->vs);
}

static int run(const lowp_kv_path_args *a, int fold, path_out *o)
{
    char why[256] = "";
    int rc = lowp_kv_path_run(a, fold, o->q, o->k, o->v, o->ks, o->vs, &o->res, why, sizeof why);
    if (rc)
        fprintf(stderr, "path %s: %s\n", lowp_kv_path_name(a->path), why);
    return rc;
}

#define EXPECT_VAL(got, want) expect_val((got), (want), __LINE__)
static void expect_val(double got, double want, int line)
{
    if (isnan(want)) {
        if (!isnan(got))
            ck_abort_msg("line %d: got %a, expected NaN", line, got);
        return;
    }
    if (!(got == want) || signbit(got) != signbit(want))
        ck_abort_msg("line %d: got %a (%.17g), expected %a (%.17g)", line, got, got, want, want);
}

/* ---- extend ------------------------------------------------------------------------- */

/* NVFP4 prefix whose dequantized values reach 768: exact/decode keep them, the FP8
 * workspace turns everything past 464 into NaN (ref/notes/kernels.md 1.5). Token 1 is the current
 * chunk: cast unquantized. */
START_TEST(test_extend_workspace_nan_past_464)
{
    lowp_kv_config cfg = lowp_kv_config_default(LOWP_NVFP4, 1, 1, 1, 16, 16);
    /* prefix token: sglang-kv, g = 1. m = 768; sf = rcp~(1) * (768 * RN(1/6)) =
     * RN(128.0000038) = 128 (half an ulp at 128 is 7.6e-6); e4m3(128) = 128 exactly;
     * o = rcp~(128) = 2^-7, so x * o is 6, 4, 3, 2, 1.5, 1, 0.5, 0: all E2M1 values, and the
     * block dequantizes to x exactly (element * 128 * 1). */
    static const float pre[16] = {768, 512, 384, 256, 192, 128, 64, 0,
                                  -768, -512, -384, -256, -192, -128, -64, 0};
    /* the workspace: fp32 (e*128)*1 = x; bf16(x) = x (<= 3 significant bits); torch e4m3:
     * |x| in {768, 512} > 464 -> NaN; 384 = 1.5*2^8, 256, 192, 128, 64, 0 exact */
    static const double pre_ws[16] = {NAN, NAN, 384, 256, 192, 128, 64, 0,
                                      NAN, NAN, -384, -256, -192, -128, -64, 0};
    /* chunk token: bf16 then torch e4m3, no NVFP4:
     *   470 (bf16-exact, 8 significant bits) > 464 -> NaN; 464 = the 448/480 midpoint, ties
     *   to even -> 448 (mantissa 110); 460 -> 448; 448 -> 448; 480 -> NaN; 1000 -> NaN;
     *   1.064453125 = 1 + 2^-4 + 2^-9: bf16 (step 2^-7 at 1) -> 1.0625, which is the E4M3
     *   midpoint of 1 and 1.125 -> 1.0 (even); a direct cast would give 1.125.
     *   -470 -> NaN; 0.0078125 = 2^-7 exact. */
    static const float chunk[16] = {470, 464, 460, 448, 480, 1000, 1.064453125f, -470,
                                    0.0078125f, 0, 0, 0, 0, 0, 0, 0};
    static const double chunk_ws[16] = {NAN, 448, 448, 448, NAN, NAN, 1.0, NAN,
                                        0.0078125, 0, 0, 0, 0, 0, 0, 0};
    float k[32], v[32];
    memcpy(k, pre, sizeof pre);
    memcpy(k + 16, chunk, sizeof chunk);
    memcpy(v, chunk, sizeof chunk); /* V: the chunk row as a prefix token too */
    memcpy(v + 16, pre, sizeof pre);
    /* Q in BF16 (the extend default): 1 + 2^-8 is the BF16 midpoint of 1 and 1 + 2^-7 -> 1;
     * 3 + 2^-7 is the midpoint of 3 and 3 + 2^-6 -> 3 (even); 1.5 exact */
    float q[16] = {1.00390625f, 3.0078125f, 1.5f};
    path_out o;
    out_alloc(&o, 16, 32, 32, 1);
    lowp_kv_path_args a = lowp_kv_path_args_init(LOWP_KV_PATH_EXTEND, &cfg, 2, 1, 1, q, k, v);
    a.chunk_start = 1;
    ck_assert_int_eq(run(&a, 0, &o), 0);
    for (int i = 0; i < 16; i++) {
        EXPECT_VAL(o.k[i], pre_ws[i]);
        EXPECT_VAL(o.k[16 + i], chunk_ws[i]);
        EXPECT_VAL(o.v[16 + i], pre_ws[i]); /* V's chunk token is `pre`, cast unquantized */
    }
    EXPECT_VAL(o.q[0], 1.0);
    EXPECT_VAL(o.q[1], 3.0);
    EXPECT_VAL(o.q[2], 1.5);
    EXPECT_VAL(o.ks[0], 1.0);
    EXPECT_VAL(o.vs[0], 1.0);
    ck_assert_uint_eq(o.res.k_nan, 4 + 4);
    ck_assert_uint_eq(o.res.k_counts.elements, 16); /* only the prefix is NVFP4-quantized */
    out_free(&o);
}
END_TEST

/* V's prefix token above is the chunk row quantized to NVFP4, V's chunk token is `pre`
 * cast unquantized: spelled out here separately. */
START_TEST(test_extend_prefix_is_nvfp4_chunk_is_not)
{
    lowp_kv_config cfg = lowp_kv_config_default(LOWP_NVFP4, 1, 1, 1, 16, 16);
    /* prefix row {464, 460, 0...}: m = 464; sf = 464 * RN(1/6) = 77.33 -> e4m3 in [64, 128)
     * has step 8: 72 or 80, 77.33 -> 80; o = rcp~(80) ~ 0.0125; 464 * o ~ 5.8 -> E2M1 6;
     * 460 * o ~ 5.75 -> 6 (nearer than 4); so both dequantize to 6 * 80 = 480 and the
     * workspace makes them NaN, while the same values as the chunk give 448. */
    float row[16] = {464, 460};
    float k[32], v[32];
    memcpy(k, row, sizeof row);
    memcpy(k + 16, row, sizeof row);
    memcpy(v, k, sizeof k);
    path_out o;
    out_alloc(&o, 0, 32, 32, 1);
    lowp_kv_path_args a = lowp_kv_path_args_init(LOWP_KV_PATH_EXTEND, &cfg, 2, 0, 0, NULL, k, v);
    a.chunk_start = 1;
    ck_assert_int_eq(run(&a, 1, &o), 0);
    EXPECT_VAL(o.k[0], NAN);
    EXPECT_VAL(o.k[1], NAN);
    EXPECT_VAL(o.k[2], 0.0);
    EXPECT_VAL(o.k[16], 448.0);
    EXPECT_VAL(o.k[17], 448.0);
    /* the exact path on the same prefix: 480 and 480, finite */
    a.path = LOWP_KV_PATH_EXACT;
    ck_assert_int_eq(run(&a, 1, &o), 0);
    EXPECT_VAL(o.k[0], 480.0);
    EXPECT_VAL(o.k[1], 480.0);
    EXPECT_VAL(o.k[16], 480.0); /* exact reads every token from the cache */
    /* chunk_start = ctx: everything is prefix; chunk_start = 0: prefill */
    a.path = LOWP_KV_PATH_EXTEND;
    a.chunk_start = 2;
    ck_assert_int_eq(run(&a, 1, &o), 0);
    EXPECT_VAL(o.k[16], NAN);
    a.chunk_start = 0;
    ck_assert_int_eq(run(&a, 1, &o), 0);
    EXPECT_VAL(o.k[0], 448.0);
    path_out p;
    out_alloc(&p, 0, 32, 32, 1);
    a.path = LOWP_KV_PATH_PREFILL;
    ck_assert_int_eq(run(&a, 1, &p), 0);
    ck_assert_int_eq(memcmp(o.k, p.k, 32 * sizeof(double)), 0);
    out_free(&p);
    out_free(&o);
}
END_TEST

/* The global scale goes into the workspace value before the cast (nvfp4_kv_dequantize
 * multiplies it in fp32), so a per-head scale of 2 makes 768 NaN where the exact and decode
 * paths keep it as a bmm scale. */
START_TEST(test_extend_global_scale_before_cast)
{
    lowp_kv_config cfg = lowp_kv_config_default(LOWP_NVFP4, 1, 1, 2, 16, 16);
    cfg.scale_gran = LOWP_KV_SCALE_HEAD;
    float gk[2] = {1.0f, 2.0f}, gv[2] = {1.0f, 1.0f};
    /* head 0 (g = 1), row {384, 192}: sf = 384 * RN(1/6) = RN(64.0000019) = 64; o = 2^-6;
     * codes 6, 3; value 384, 192.
     * head 1 (g = 2), row {768, 384}: sf = rcp~(2) * (768 * RN(1/6)) = 0.5 * 128 = 64;
     * o = rcp~(64 * 2) = 2^-7; codes 6, 3; element * block scale = 384, 192; times g = 768,
     * 384. Token 1 repeats token 0 and is the chunk. */
    float k[64] = {0}, v[64] = {0};
    k[0] = 384;
    k[1] = 192;
    k[16] = 768;
    k[17] = 384;
    memcpy(k + 32, k, 32 * sizeof(float));
    path_out o;
    out_alloc(&o, 0, 64, 64, 2);
    lowp_kv_path_args a = lowp_kv_path_args_init(LOWP_KV_PATH_EXTEND, &cfg, 2, 0, 0, NULL, k, v);
    a.k_gs = gk;
    a.v_gs = gv;
    a.chunk_start = 1;
    ck_assert_int_eq(run(&a, 0, &o), 0);
    EXPECT_VAL(o.k[0], 384.0);
    EXPECT_VAL(o.k[1], 192.0);
    EXPECT_VAL(o.k[16], NAN);  /* fp32 (6 * 64) * 2 = 768 -> bf16 768 -> NaN */
    EXPECT_VAL(o.k[17], 384.0); /* (3 * 64) * 2 */
    EXPECT_VAL(o.k[48], NAN);  /* chunk: 768 unquantized, > 464 */
    EXPECT_VAL(o.ks[1], 1.0);  /* already inside the values */
    for (int path = LOWP_KV_PATH_EXACT; path <= LOWP_KV_PATH_DECODE; path++) {
        a.path = (lowp_kv_path)path;
        ck_assert_int_eq(run(&a, 0, &o), 0);
        EXPECT_VAL(o.k[16], 384.0); /* element * block scale */
        EXPECT_VAL(o.k[17], 192.0);
        EXPECT_VAL(o.ks[0], 1.0);
        EXPECT_VAL(o.ks[1], 2.0); /* bmm1 scale */
        ck_assert_int_eq(run(&a, 1, &o), 0);
        EXPECT_VAL(o.k[16], 768.0); /* folded */
        EXPECT_VAL(o.k[48], 768.0); /* decode/exact read token 1 from the cache too */
        EXPECT_VAL(o.ks[1], 1.0);
    }
    out_free(&o);
}
END_TEST

/* The extend prefix multiplies (e * sf) by g in binary32, rounds to BF16, then to E4M3.
 * Here g = RN(1/3) and 1.2 make those products inexact; the expected workspace value is
 * computed from the exact path's element * block scale with a second implementation of
 * the two roundings (frexp/ldexp/nearbyint in binary64, RNE), not with lowp's codecs.
 * One by hand: 6 * 1.2f = RN32(7.2000000477) = 7.2000003; BF16 (step 2^-5 in [4, 8)):
 * 7.2000003 / 2^-5 = 230.4 -> 230 * 2^-5 = 7.1875; E4M3 (step 0.5): 14.375 -> 14 -> 7. */
static double two_roundings(float pg)
{
    double b = pg;
    if (b == 0 || isnan(b))
        return b;
    int e;
    double m = frexp(b, &e);                      /* b = m * 2^e, 0.5 <= |m| < 1 */
    b = ldexp(nearbyint(ldexp(m, 8)), e - 8);     /* BF16: 8 significant bits */
    frexp(b, &e);
    int ee = e < -5 ? -5 : e;                     /* E4M3: 4 bits, subnormal step 2^-9 */
    double w = ldexp(nearbyint(ldexp(b, 4 - ee)), ee - 4);
    return fabs(w) > 448 ? NAN : w;
}

START_TEST(test_extend_fp32_then_bf16_then_e4m3)
{
    ck_assert(two_roundings(6.0f * 1.2f) == 7.0);
    ck_assert(6.0f * 1.2f == 0x1.cccccep+2f); /* 7.2000003 */
    lowp_kv_config cfg = lowp_kv_config_default(LOWP_NVFP4, 1, 1, 1, 16, 16);
    float k[16] = {2.0f, 1.0f, 0.5f, 0.1f, -3.7f, 1.3f, 0.77f, 5.0f, 6.0f, -0.2f, 0.33f},
          v[16] = {0};
    path_out ex, en;
    out_alloc(&ex, 0, 16, 16, 1);
    out_alloc(&en, 0, 16, 16, 1);
    float gs_list[3] = {1.0f / 3.0f, 1.2f, 7.0f};
    for (int gi = 0; gi < 3; gi++) {
        lowp_kv_path_args a = lowp_kv_path_args_init(LOWP_KV_PATH_EXACT, &cfg, 1, 0, 0, NULL, k, v);
        a.k_gs = &gs_list[gi];
        a.chunk_start = 1; /* the one token is the cached prefix */
        ck_assert_int_eq(run(&a, 0, &ex), 0);
        a.path = LOWP_KV_PATH_EXTEND;
        ck_assert_int_eq(run(&a, 0, &en), 0);
        for (int i = 0; i < 16; i++)
            EXPECT_VAL(en.k[i], two_roundings((float)ex.k[i] * gs_list[gi]));
    }
    /* A case where the BF16 step decides (by hand). g = 1.0634765625 = 1 + 2^-4 + 2^-10;
     * row {1.5 g, g} = {1.59521484375, 1.0634765625} (both binary32-exact). sglang-kv:
     * sf = rcp~(g) * (1.5 g * RN(1/6)) = 0.25 within a few ulps -> e4m3 0.25 (neighbours
     * 0.234375 and 0.28125 are far); o = rcp~(0.25 g) ~ 3.7612; 1.5 g * o ~ 6 -> 6,
     * g * o ~ 4 -> 4. So element * block scale = 1.5 and 1.0 (the exact path's values).
     * Workspace: RN32(1.0 * g) = g -> BF16 (step 2^-7 at 1): 1 + 8.125 steps -> 1.0625, the
     * E4M3 midpoint of 1 and 1.125 -> 1.0 (even); without the BF16 step: 1.125.
     * RN32(1.5 * g) = 1.59521484375 -> BF16: 76.19 steps -> 1.59375 -> E4M3 (step 0.125):
     * 12.75 -> 13 -> 1.625. */
    float g3 = 1.0634765625f;
    float k3[16] = {1.59521484375f, 1.0634765625f};
    lowp_kv_path_args a = lowp_kv_path_args_init(LOWP_KV_PATH_EXACT, &cfg, 1, 0, 0, NULL, k3, v);
    a.k_gs = &g3;
    a.chunk_start = 1;
    ck_assert_int_eq(run(&a, 0, &ex), 0);
    EXPECT_VAL(ex.k[0], 1.5);
    EXPECT_VAL(ex.k[1], 1.0);
    EXPECT_VAL(ex.ks[0], 1.0634765625);
    a.path = LOWP_KV_PATH_EXTEND;
    ck_assert_int_eq(run(&a, 0, &en), 0);
    EXPECT_VAL(en.k[0], 1.625);
    EXPECT_VAL(en.k[1], 1.0);
    EXPECT_VAL(en.ks[0], 1.0);
    out_free(&ex);
    out_free(&en);
}
END_TEST

/* ---- prefill -------------------------------------------------------------------------- */

START_TEST(test_prefill_fp8_double_rounding)
{
    /* any cache format: the prefill attention does not read the cache */
    lowp_kv_config cfg = lowp_kv_config_default(LOWP_MXFP4, 1, 1, 1, 32, 32);
    float k[32] = {0}, v[32] = {0};
    /* 1.064453125 = 1 + 2^-4 + 2^-9: bf16 -> 1.0625 (8.25 steps of 2^-7 -> 8), then the E4M3
     * midpoint of 1 and 1.125 -> 1.0; the single rounding would give 1.125.
     * 1.0703125 = 1 + 9 * 2^-7 (bf16-exact) > 1.0625 -> 1.125.
     * 0.2 -> bf16 0.2001953125 (0x3E4D) -> E4M3 [0.125, 0.25) step 2^-6: 0.203125 (13/64).
     * 300 -> bf16 300 -> E4M3 [256, 512) step 32: 288 or 320, 300 -> 288.
     * 1000 -> NaN; -465 -> bf16 -464 (step 2 at 256..512: 465 is the midpoint of 464 and 466,
     * to even: 464 = 0x43E8 mantissa ...0) -> E4M3 midpoint -> -448.
     * 2^-10 (E4M3 subnormal step 2^-9): midpoint of 0 and 2^-9 -> 0 (even). 3 * 2^-10 ->
     * midpoint of 2^-9 and 2^-8 -> 2^-8 (code 2, even). */
    const float in[10] = {1.064453125f, 1.0703125f, 0.2f, 300, 1000, -465, 0x1p-10f, 0x3p-10f};
    const double want[10] = {1.0, 1.125, 0.203125, 288, NAN, -448, 0, 0x1p-8};
    memcpy(k, in, sizeof in);
    memcpy(v, in, sizeof in);
    float q[32] = {1.064453125f};
    path_out o;
    out_alloc(&o, 32, 32, 32, 1);
    lowp_kv_path_args a = lowp_kv_path_args_init(LOWP_KV_PATH_PREFILL, &cfg, 1, 1, 1, q, k, v);
    ck_assert_int_eq(run(&a, 0, &o), 0);
    for (int i = 0; i < 8; i++) {
        EXPECT_VAL(o.k[i], want[i]);
        EXPECT_VAL(o.v[i], want[i]);
    }
    EXPECT_VAL(o.q[0], 1.0625); /* Q: BF16 only */
    EXPECT_VAL(o.ks[0], 1.0);
    ck_assert_uint_eq(o.res.k_counts.elements, 0); /* nothing quantized to the cache format */
    ck_assert_uint_eq(o.res.k_nan, 1);
    /* prefill has no prefix */
    char why[256];
    a.chunk_start = 1;
    ck_assert_int_eq(lowp_kv_path_run(&a, 1, o.q, o.k, o.v, NULL, NULL, NULL, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "chunk_start"));
    out_free(&o);
}
END_TEST

/* ---- decode ----------------------------------------------------------------------------- */

/* NVFP4: E2M1 x E4M3 has at most 6 significant bits inside [2^-10, 2688], so the BF16
 * multiply is exact and decode equals exact (bitwise), for every recipe and per-head scales;
 * with BF16-valued Q the queries agree too. Same for FP8 and BF16 caches. */
START_TEST(test_decode_equals_exact_when_bf16_holds_products)
{
    static const lowp_block_format fmts[] = {LOWP_NVFP4, LOWP_FP8_E4M3, LOWP_FP8_E5M2,
                                             LOWP_BF16_PASS, LOWP_MXFP4};
    const size_t H = 3, ctx = 40, qk = 64, vd = 32, qh = 6;
    float *k = malloc(ctx * H * qk * sizeof(float)), *v = malloc(ctx * H * vd * sizeof(float));
    float *q = malloc(qh * qk * sizeof(float));
    for (size_t i = 0; i < ctx * H * qk; i++)
        k[i] = rand_bf16() * (float)(1u << (rng_next() % 4));
    for (size_t i = 0; i < ctx * H * vd; i++)
        v[i] = rand_bf16();
    for (size_t i = 0; i < qh * qk; i++)
        q[i] = rand_bf16();
    /* modelopt casts m / (6 g) to E4M3 without saturation: keep it under 464 (m < 1024) */
    float gk[3] = {0.75f, 0.375f, 5.0f}, gv[3] = {0.125f, 1.5f, 0.3f};
    for (size_t fi = 0; fi < sizeof fmts / sizeof fmts[0]; fi++)
        for (int r = 0; r < LOWP_RECIPE_COUNT; r++) {
            if (lowp_recipe_check(fmts[fi], (lowp_recipe)r, NULL, 0))
                continue;
            lowp_kv_config cfg = lowp_kv_config_default(fmts[fi], 1, 1, H, qk, vd);
            cfg.recipe = (lowp_recipe)r;
            int has_g = lowp_block_has_global_scale(fmts[fi]);
            cfg.scale_gran = has_g ? LOWP_KV_SCALE_HEAD : LOWP_KV_SCALE_TENSOR;
            path_out ex, de;
            out_alloc(&ex, qh * qk, ctx * H * qk, ctx * H * vd, H);
            out_alloc(&de, qh * qk, ctx * H * qk, ctx * H * vd, H);
            lowp_kv_path_args a =
                lowp_kv_path_args_init(LOWP_KV_PATH_EXACT, &cfg, ctx, 1, qh, q, k, v);
            if (has_g) {
                a.k_gs = gk;
                a.v_gs = gv;
            }
            a.chunk_start = ctx - 1; /* ignored by exact and decode */
            ck_assert_int_eq(run(&a, 0, &ex), 0);
            a.path = LOWP_KV_PATH_DECODE;
            ck_assert_int_eq(run(&a, 0, &de), 0);
            ck_assert_int_eq(memcmp(ex.k, de.k, ctx * H * qk * sizeof(double)), 0);
            ck_assert_int_eq(memcmp(ex.v, de.v, ctx * H * vd * sizeof(double)), 0);
            ck_assert_int_eq(memcmp(ex.q, de.q, qh * qk * sizeof(double)), 0);
            ck_assert_int_eq(memcmp(ex.ks, de.ks, H * sizeof(double)), 0);
            ck_assert_int_eq(memcmp(ex.vs, de.vs, H * sizeof(double)), 0);
            for (size_t h = 0; h < H; h++)
                EXPECT_VAL(de.ks[h], has_g ? (double)gk[h] : 1.0);
            ck_assert_uint_eq(de.res.k_counts.elements, ctx * H * qk); /* every token cached */
            out_free(&ex);
            out_free(&de);
        }
    free(k);
    free(v);
    free(q);
}
END_TEST

/* Where BF16 cannot hold the product: MXFP8 at the bottom of E8M0. With ocp, a block of
 * amax 2^-119 gets e = floor(log2 m) - 8 = -127, scale code 0 = 2^-127; 2^-119 codes as
 * 256 and 2^-136 as 2^-9 (E4M3's smallest subnormal); 3 * 2^-134 as 1.5 * 2^-6 (normal).
 * Exact: 2^-136 and 3 * 2^-134. Decode (BF16, subnormal step 2^-133): 2^-136 < 2^-134 -> 0;
 * 3 * 2^-134 = 1.5 * 2^-133 is the midpoint of 1 and 2 steps -> 2 * 2^-133 = 2^-132 (even).
 * Q given as 1 + 2^-8 becomes 1 under decode (BF16 midpoint to even) and stays under exact. */
START_TEST(test_decode_bf16_product_rounds_for_mxfp8_extremes)
{
    lowp_kv_config cfg = lowp_kv_config_default(LOWP_MXFP8, 1, 1, 1, 32, 32);
    ck_assert_int_eq(cfg.recipe, LOWP_RECIPE_OCP);
    float k[32] = {0x1p-119f, 0x1p-136f, 0x3p-134f}, v[32] = {1.0f};
    float q[32] = {1.00390625f};
    path_out ex, de;
    out_alloc(&ex, 32, 32, 32, 1);
    out_alloc(&de, 32, 32, 32, 1);
    lowp_kv_path_args a = lowp_kv_path_args_init(LOWP_KV_PATH_EXACT, &cfg, 1, 1, 1, q, k, v);
    ck_assert_int_eq(run(&a, 1, &ex), 0);
    a.path = LOWP_KV_PATH_DECODE;
    ck_assert_int_eq(run(&a, 1, &de), 0);
    EXPECT_VAL(ex.k[0], 0x1p-119);
    EXPECT_VAL(de.k[0], 0x1p-119);
    EXPECT_VAL(ex.k[1], 0x1p-136);
    EXPECT_VAL(de.k[1], 0.0);
    EXPECT_VAL(ex.k[2], 0x3p-134);
    EXPECT_VAL(de.k[2], 0x1p-132);
    EXPECT_VAL(ex.q[0], 1.00390625);
    EXPECT_VAL(de.q[0], 1.0);
    out_free(&ex);
    out_free(&de);
}
END_TEST

/* ---- FP8 KV (ref/notes/seeds.md 2) ----------------------------------------------------- */

START_TEST(test_fp8kv_scales_on_scores_and_output)
{
    lowp_kv_config cfg = lowp_kv_config_default(LOWP_FP8_E4M3, 1, 1, 1, 16, 16);
    /* k_scale 0.25, v_scale 0.5 (non-unit, K != V: FlashInfer #4979). Write is
     * e4m3_sat(x / s) (recipes.md FP8 exact):
     *   K: 1/0.25 = 4 -> 4; 0.3f/0.25 = 1.20000005 -> [1, 2) step 0.125: 1.25;
     *      200/0.25 = 800 -> satfinite 448; -0.3 -> -1.25.
     *   V: 1/0.5 = 2; 0.3f/0.5 = 0.60000002 -> [0.5, 1) step 0.0625: 0.625; 300/0.5 = 600 ->
     *      448. */
    float k[16] = {1.0f, 0.3f, 200.0f, -0.3f}, v[16] = {1.0f, 0.3f, 300.0f};
    float gk = 0.25f, gv = 0.5f;
    float q[16] = {1.00390625f, 2.0f};
    path_out o;
    out_alloc(&o, 16, 16, 16, 1);
    lowp_kv_path_args a = lowp_kv_path_args_init(LOWP_KV_PATH_FP8KV, &cfg, 1, 1, 1, q, k, v);
    a.k_gs = &gk;
    a.v_gs = &gv;
    ck_assert_int_eq(run(&a, 0, &o), 0);
    EXPECT_VAL(o.k[0], 4.0);
    EXPECT_VAL(o.k[1], 1.25);
    EXPECT_VAL(o.k[2], 448.0);
    EXPECT_VAL(o.k[3], -1.25);
    EXPECT_VAL(o.v[0], 2.0);
    EXPECT_VAL(o.v[1], 0.625);
    EXPECT_VAL(o.v[2], 448.0);
    EXPECT_VAL(o.ks[0], 0.25);  /* dot(Q, K_fp8) * k_scale */
    EXPECT_VAL(o.vs[0], 0.5);   /* sum(P * V_fp8) * v_scale */
    EXPECT_VAL(o.q[0], 1.0);    /* BF16 Q tiles */
    EXPECT_VAL(o.res.q_scale, 1.0);
    ck_assert_uint_eq(o.res.k_counts.saturated, 1);
    /* folded: the same values times the scales, exactly */
    ck_assert_int_eq(run(&a, 1, &o), 0);
    EXPECT_VAL(o.k[0], 1.0);
    EXPECT_VAL(o.k[1], 0.3125);
    EXPECT_VAL(o.k[2], 112.0);
    EXPECT_VAL(o.v[1], 0.3125);
    EXPECT_VAL(o.v[2], 224.0);
    EXPECT_VAL(o.ks[0], 1.0);
    /* decode on the same FP8 cache gives the same numbers */
    path_out d;
    out_alloc(&d, 16, 16, 16, 1);
    a.path = LOWP_KV_PATH_DECODE;
    ck_assert_int_eq(run(&a, 1, &d), 0);
    ck_assert_int_eq(memcmp(o.k, d.k, 16 * sizeof(double)), 0);
    ck_assert_int_eq(memcmp(o.v, d.v, 16 * sizeof(double)), 0);
    out_free(&d);
    out_free(&o);
}
END_TEST

/* FP8 Q: e4m3_sat(RN32(q * RN32(1/q_scale))), q_scale joining the score scale.
 * 3.3f * 0.5 = 1.64999998 -> [1, 2) step 0.125: 1.625 (1.65 - 1.625 < 1.75 - 1.65);
 * 1000 * 0.5 = 500 -> satfinite 448; -0.01 * 0.5 = -0.005 -> subnormal step 2^-9:
 * 0.005 / 2^-9 = 2.56 -> 3 * 2^-9. */
START_TEST(test_q_fp8_and_q_scale)
{
    lowp_kv_config cfg = lowp_kv_config_default(LOWP_NVFP4, 1, 1, 1, 16, 16);
    float q[16] = {3.3f, 1000.0f, -0.01f}, k[16] = {1.0f}, v[16] = {1.0f};
    path_out o;
    out_alloc(&o, 16, 16, 16, 1);
    lowp_kv_path_args a = lowp_kv_path_args_init(LOWP_KV_PATH_DECODE, &cfg, 1, 1, 1, q, k, v);
    a.q_type = LOWP_KV_Q_FP8;
    a.q_scale = 2.0f;
    ck_assert_int_eq(run(&a, 0, &o), 0);
    EXPECT_VAL(o.q[0], 1.625);
    EXPECT_VAL(o.q[1], 448.0);
    EXPECT_VAL(o.q[2], -0x3p-9);
    EXPECT_VAL(o.res.q_scale, 2.0);
    ck_assert_int_eq(run(&a, 1, &o), 0);
    EXPECT_VAL(o.q[0], 3.25);
    EXPECT_VAL(o.res.q_scale, 1.0);
    a.q_type = LOWP_KV_Q_F32;
    ck_assert_int_eq(run(&a, 1, &o), 0);
    EXPECT_VAL(o.q[0], (double)3.3f);
    out_free(&o);
}
END_TEST

/* ---- consistency with the cache and with the attention formula ------------------------- */

/* The exact path's folded K/V equal a gather from a cache written with the same config:
 * the path quantizes exactly as the cache does. */
START_TEST(test_exact_path_equals_cache_gather)
{
    char why[256];
    const size_t H = 2, ctx = 21, qk = 64, vd = 64, P = 4;
    lowp_kv_config cfg = lowp_kv_config_default(LOWP_NVFP4, 8, P, H, qk, vd);
    cfg.recipe = LOWP_RECIPE_TRTLLM;
    cfg.scale_gran = LOWP_KV_SCALE_HEAD;
    cfg.layout = LOWP_KV_HND;
    cfg.v_sf_order = LOWP_KV_SF_INTERLEAVE4;
    float gk[2] = {0.02f, 3.0f}, gv[2] = {1.0f, 0.5f};
    float *k = malloc(ctx * H * qk * sizeof(float)), *v = malloc(ctx * H * vd * sizeof(float));
    for (size_t i = 0; i < ctx * H * qk; i++)
        k[i] = rand_bf16();
    for (size_t i = 0; i < ctx * H * vd; i++)
        v[i] = rand_bf16();
    lowp_kvcache *c;
    ck_assert_int_eq(lowp_kvcache_create(&cfg, &c, why, sizeof why), 0);
    ck_assert_int_eq(lowp_kvcache_set_global_scales(c, gk, gv, 2, why, sizeof why), 0);
    int32_t indptr[2] = {0, 6}, idx[6] = {7, 2, 5, 0, 3, 6}, last[1] = {1};
    lowp_kv_page_table pt = {1, indptr, idx, last};
    for (size_t t = 0; t < ctx; t++)
        ck_assert_int_eq(lowp_kvcache_write_pos(c, &pt, 0, t, k + t * H * qk, v + t * H * vd,
                                                NULL, NULL, why, sizeof why), 0);
    double *gk_ = malloc(ctx * H * qk * sizeof(double)), *gv_ = malloc(ctx * H * vd * sizeof(double));
    lowp_kv_view view = lowp_kvcache_view(c);
    ck_assert_int_eq(lowp_kvcache_gather(c, &view, &pt, 0, ctx, gk_, gv_, why, sizeof why), 0);
    path_out o;
    out_alloc(&o, 0, ctx * H * qk, ctx * H * vd, H);
    lowp_kv_path_args a = lowp_kv_path_args_init(LOWP_KV_PATH_EXACT, &cfg, ctx, 0, 0, NULL, k, v);
    a.k_gs = gk;
    a.v_gs = gv;
    ck_assert_int_eq(run(&a, 1, &o), 0);
    ck_assert_int_eq(memcmp(o.k, gk_, ctx * H * qk * sizeof(double)), 0);
    ck_assert_int_eq(memcmp(o.v, gv_, ctx * H * vd * sizeof(double)), 0);
    ck_assert_int_eq(memcmp(&o.res.k_counts, lowp_kvcache_counts(c, LOWP_KV_K),
                            sizeof o.res.k_counts), 0);
    out_free(&o);
    free(gk_);
    free(gv_);
    free(k);
    free(v);
    lowp_kvcache_destroy(c);
}
END_TEST

/* Applying the returned scales to scores and output equals attention on the folded values
 * (a small softmax attention written here; the scale products are exact, the rest is
 * binary64 so the two agree to a few ulps). */
static void tiny_attn(size_t ctx, size_t H, size_t qh, size_t qk, size_t vd, const double *q,
                      const double *k, const double *v, double qs, const double *ks,
                      const double *vs, double *out)
{
    for (size_t h = 0; h < qh; h++) {
        size_t hk = h / (qh / H);
        double sc[64], mx = -INFINITY, sum = 0;
        for (size_t j = 0; j < ctx; j++) {
            double d = 0;
            for (size_t i = 0; i < qk; i++)
                d += q[h * qk + i] * k[(j * H + hk) * qk + i];
            sc[j] = d * qs * ks[hk] / sqrt((double)qk);
            mx = sc[j] > mx ? sc[j] : mx;
        }
        for (size_t j = 0; j < ctx; j++)
            sum += (sc[j] = exp(sc[j] - mx));
        for (size_t i = 0; i < vd; i++) {
            double acc = 0;
            for (size_t j = 0; j < ctx; j++)
                acc += sc[j] / sum * v[(j * H + hk) * vd + i];
            out[h * vd + i] = acc * vs[hk];
        }
    }
}

START_TEST(test_scales_fold_equals_applied)
{
    const size_t H = 2, qh = 4, ctx = 17, qk = 32, vd = 32;
    float k[17 * 2 * 32], v[17 * 2 * 32], q[4 * 32];
    for (size_t i = 0; i < ctx * H * qk; i++) {
        k[i] = rand_bf16();
        v[i] = rand_bf16();
    }
    for (size_t i = 0; i < qh * qk; i++)
        q[i] = rand_bf16();
    float gk[2] = {0.25f, 2.0f}, gv[2] = {0.5f, 3.0f};
    static const lowp_kv_path paths[] = {LOWP_KV_PATH_EXACT, LOWP_KV_PATH_DECODE,
                                         LOWP_KV_PATH_FP8KV};
    for (size_t pi = 0; pi < 3; pi++) {
        lowp_kv_config cfg = lowp_kv_config_default(
            paths[pi] == LOWP_KV_PATH_FP8KV ? LOWP_FP8_E4M3 : LOWP_NVFP4, 1, 1, H, qk, vd);
        cfg.scale_gran = LOWP_KV_SCALE_HEAD;
        path_out u, f;
        out_alloc(&u, qh * qk, ctx * H * qk, ctx * H * vd, H);
        out_alloc(&f, qh * qk, ctx * H * qk, ctx * H * vd, H);
        lowp_kv_path_args a = lowp_kv_path_args_init(paths[pi], &cfg, ctx, 1, qh, q, k, v);
        a.k_gs = gk;
        a.v_gs = gv;
        a.q_type = LOWP_KV_Q_FP8;
        a.q_scale = 0.125f;
        ck_assert_int_eq(run(&a, 0, &u), 0);
        ck_assert_int_eq(run(&a, 1, &f), 0);
        double o1[4 * 32], o2[4 * 32], ones[2] = {1, 1};
        tiny_attn(ctx, H, qh, qk, vd, u.q, u.k, u.v, u.res.q_scale, u.ks, u.vs, o1);
        tiny_attn(ctx, H, qh, qk, vd, f.q, f.k, f.v, 1.0, ones, ones, o2);
        double mx = 0;
        for (size_t i = 0; i < qh * vd; i++)
            mx = fabs(o1[i]) > mx ? fabs(o1[i]) : mx;
        for (size_t i = 0; i < qh * vd; i++)
            ck_assert_msg(fabs(o1[i] - o2[i]) <= 1e-12 * mx,
                          "%s: %g vs %g", lowp_kv_path_name(paths[pi]), o1[i], o2[i]);
        /* folding is exact: folded = unfolded * scale, bit for bit */
        for (size_t i = 0; i < ctx * H * qk; i++)
            ck_assert(f.k[i] == u.k[i] * u.ks[(i / qk) % H]);
        out_free(&u);
        out_free(&f);
    }
}
END_TEST

/* ---- refusals ------------------------------------------------------------------------ */

START_TEST(test_path_refusals_name_the_argument)
{
    char why[256];
    float k[32] = {0}, v[32] = {0};
    double ok[32], ov[32], s1[1], s2[1];
    struct {
        lowp_block_format f;
        lowp_kv_path p;
        size_t ctx, chunk;
        float gk;
        const char *needle;
    } cases[] = {
        {LOWP_FP8_E4M3, LOWP_KV_PATH_EXTEND, 1, 0, 1.0f, "NVFP4"},
        {LOWP_NVFP4, LOWP_KV_PATH_FP8KV, 1, 0, 1.0f, "FP8"},
        {LOWP_NVFP4, LOWP_KV_PATH_EXTEND, 1, 2, 1.0f, "a.chunk_start"},
        {LOWP_NVFP4, LOWP_KV_PATH_PREFILL, 1, 1, 1.0f, "a.chunk_start"},
        {LOWP_NVFP4, LOWP_KV_PATH_DECODE, 0, 0, 1.0f, "a.ctx"},
        {LOWP_NVFP4, LOWP_KV_PATH_DECODE, 1, 0, 0.0f, "a.k_gs[0]"},
        {LOWP_NVFP4, LOWP_KV_PATH_DECODE, 1, 0, NAN, "a.k_gs[0]"},
        {LOWP_MXFP4, LOWP_KV_PATH_DECODE, 1, 0, 2.0f, "a.k_gs[0]"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lowp_kv_config cfg = lowp_kv_config_default(cases[i].f, 1, 1, 1, 32, 32);
        lowp_kv_path_args a = lowp_kv_path_args_init(cases[i].p, &cfg, cases[i].ctx, 0, 0, NULL, k, v);
        a.chunk_start = cases[i].chunk;
        a.k_gs = &cases[i].gk;
        why[0] = 0;
        ck_assert_int_eq(lowp_kv_path_run(&a, 0, NULL, ok, ov, s1, s2, NULL, why, sizeof why), -1);
        if (!strstr(why, cases[i].needle))
            ck_abort_msg("case %zu: '%s' does not name %s", i, why, cases[i].needle);
    }
    lowp_kv_config cfg = lowp_kv_config_default(LOWP_NVFP4, 1, 1, 1, 32, 32);
    lowp_kv_path_args a = lowp_kv_path_args_init(LOWP_KV_PATH_DECODE, &cfg, 1, 0, 0, NULL, k, v);
    ck_assert_int_eq(lowp_kv_path_run(&a, 0, NULL, ok, ov, NULL, s2, NULL, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "k_scale"));
    cfg.qk_dim = 24;
    a = lowp_kv_path_args_init(LOWP_KV_PATH_DECODE, &cfg, 1, 0, 0, NULL, k, v);
    ck_assert_int_eq(lowp_kv_path_run(&a, 1, NULL, ok, ov, NULL, NULL, NULL, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "cfg.qk_dim"));
    lowp_kv_path p;
    ck_assert_int_eq(lowp_kv_path_parse("extend", &p), 0);
    ck_assert_int_eq(p, LOWP_KV_PATH_EXTEND);
    ck_assert_str_eq(lowp_kv_path_name(LOWP_KV_PATH_FP8KV), "fp8kv");
    ck_assert_int_eq(lowp_kv_path_parse("nope", &p), -1);
}
END_TEST

static Suite *paths_suite(void)
{
    Suite *s = suite_create("attn_paths");
    lowp_test_tcase(s, "paths", 0,
                    LOWP_TESTS(test_extend_workspace_nan_past_464,
                               test_extend_prefix_is_nvfp4_chunk_is_not,
                               test_extend_global_scale_before_cast,
                               test_extend_fp32_then_bf16_then_e4m3,
                               test_prefill_fp8_double_rounding,
                               test_decode_equals_exact_when_bf16_holds_products,
                               test_decode_bf16_product_rounds_for_mxfp8_extremes,
                               test_fp8kv_scales_on_scores_and_output, test_q_fp8_and_q_scale,
                               test_exact_path_equals_cache_gather, test_scales_fold_equals_applied,
                               test_path_refusals_name_the_argument));
    return s;
}

int main(void)
{
    return lowp_test_main(paths_suite(), LOWP_TEST_FORK);
}
