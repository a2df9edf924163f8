/* tests/test_block.c: named edge tests of the block quantizer recipes (lowp/block.h).
 *
 * Every expected byte below is worked out from the recipe definitions in ref/recipes.md,
 * step by step in binary32 round-to-nearest-even, with the arithmetic written in the
 * comment next to it; never copied from lowp's output. Other sources used:
 *   - ref/notes/formats.md: §1.6 (E2M1 ties), §2 (E4M3), §3.1 (E8M0 RP-sat table),
 *     §4.4 (OCP floor vs RCEIL), §5.7 (rcp.approx.ftz(6), (448), (2688) equal RN), §5.8
 *     (the three vectors where TRT-LLM fast and exact give different codes);
 *   - ref/profiles.md (the element codecs: (e2m1, cuda) NaN -> 0x7, (e4m3, cuda, sat) NaN
 *     -> 0x7F, Inf -> 0x7E, (bf16, cuda) NaN -> 0x7FFF, ...).
 * rcp~(a) values other than those of §5.7 come from the measured sm_90 table
 * (ref/block/data/rcp_approx_ftz_f32_sm90_mismatch.u32.xz) applied by hand to
 * RN(1/a); the comment says so where it matters (§5.8).
 *
 * Notation in comments: RN(1/6) = 0x3E2AAAAB = 0.16666667163; RN(1/448) = 0x3B124925;
 * "x -> c" is the element value after scaling and its code. E2M1 codes: 0 0.5 1 1.5 2 3 4 6
 * for 0..7, | 8 for the sign. E4M3: 0x38 = 1.0, 0x40 = 2.0, 0x7E = 448, 0x01 = 2^-9,
 * 0x7F NaN. E8M0: code c = 2^(c-127), 0x7F = 1.0, 0xFF NaN.
 *
 * Counters (recipes.md "Counting"): "flushed" is read as "a nonzero finite input whose
 * decoded value (element x block scale x global scale) is +-0", so every nonzero element
 * of a block whose scale is 0 is flushed even when its element code is +-6; "saturated" is
 * "a finite nonzero input coded as the largest finite magnitude while input x factor
 * exceeded it" (an element can be both). Where the two readings of "coded as zero" differ
 * and the decoded value is NaN, the test does not check the counter.
 *
 * A mismatching row is printed TestFloat style on stderr (format/recipe, global scale,
 * input bits, got, expected, in hex) before the test fails, so one run shows every bad row. */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lowp/block.h"
#include "lowp/cases.h"
#include "lowp/format.h"
#include "lowp_test.h"

/* ---------------------------------------------------------------------------------- */
/* helpers                                                                             */

#define NOCODE 0xFFFFu /* "no expectation" for an element code */
#define ANY SIZE_MAX   /* "no expectation" for a counter */
#define NOSCALE (-1)   /* "no expectation" for a block scale code */
#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))
#define MAXN 64

/* Float bit patterns: tests/lib's (lowp_test_base.h), under the short names the tables
 * and checks below use. */
#define f32(b) lowp_f32_from_bits(b)
#define bits32(x) lowp_f32_bits(x)
#define bits64(x) lowp_f64_bits(x)

static float qnan(void) { return f32(0x7FC00000u); }  /* +quiet NaN */
static float nqnan(void) { return f32(0xFFC00001u); } /* -quiet NaN with payload */
static float snan(void) { return f32(0x7F800001u); }  /* +signalling NaN */

/* The global scale a test passes: recipes with the encode factor S (trtllm, exact) read
 * .enc; decode-side recipes (modelopt, sglang-kv, FP8) read .dec. */
static lowp_global_scale gs_enc(float S)
{
    lowp_global_scale g;
    volatile float one = 1.0f;
    g.enc = S;
    g.dec = one / S;
    return g;
}

static lowp_global_scale gs_dec(float d)
{
    lowp_global_scale g;
    volatile float one = 1.0f;
    g.dec = d;
    g.enc = one / d;
    return g;
}

static const lowp_global_scale GS_ONE = {1.0f, 1.0f};

static unsigned code_digits(lowp_block_format f)
{
    switch (lowp_format_bits(lowp_block_element_format(f))) {
    case 4: return 1;
    case 16: return 4;
    default: return 2;
    }
}

/* Counters: fields set to ANY are not checked. */
#define COUNTS(...) ((lowp_quant_counts){__VA_ARGS__})
static const lowp_quant_counts COUNTS_ANY = {ANY, ANY, ANY, ANY, ANY, ANY, ANY, ANY, ANY, ANY};

static int expect_counts(const char *where, const lowp_quant_counts *got,
                         const lowp_quant_counts *want)
{
    int bad = 0;
#define CK(field)                                                                          \
    do {                                                                                   \
        if (want->field != ANY && want->field != got->field) {                             \
            fprintf(stderr, "%s: counts." #field " got %zu expected %zu\n", where,          \
                    got->field, want->field);                                              \
            bad++;                                                                         \
        }                                                                                  \
    } while (0)
    CK(elements);
    CK(blocks);
    CK(nan_in);
    CK(inf_in);
    CK(saturated);
    CK(flushed);
    CK(nan_out);
    CK(scale_zero);
    CK(scale_subnormal);
    CK(scale_nan);
#undef CK
    return bad;
}

/* One block (or, for the elementwise formats, nx elements) through lowp_block_quantize.
 * x has nx elements; a block-scaled format is padded to its block size with +0, whose
 * expected code is pad_code. want[i] is the expected code of element i (NOCODE: any);
 * want_scale the expected block scale code (NOSCALE: any), or either of want_scale and
 * want_scale_alt when alt >= 0. Returns the number of mismatches, each printed. */
typedef struct qcase {
    const char *tag;
    lowp_block_format f;
    lowp_recipe r;
    lowp_global_scale gs;
    unsigned flags;
    const float *x;
    size_t nx;
    const uint16_t *want;
    uint16_t pad_code;
    int want_scale;
    int want_scale_alt;
    lowp_quant_counts counts;
} qcase;

static int run_case(const qcase *c)
{
    size_t bs = lowp_block_size(c->f);
    size_t n = lowp_block_has_scales(c->f) ? bs : c->nx;
    float x[MAXN];
    uint8_t codes[2 * MAXN + 8], scales[8] = {0};
    char why[256] = "";
    char where[512];
    lowp_quant_counts k;
    int bad = 0;

    ck_assert_uint_le(n, MAXN);
    ck_assert_uint_le(c->nx, n);
    for (size_t i = 0; i < n; i++)
        x[i] = i < c->nx ? c->x[i] : 0.0f;
    memset(codes, 0xA5, sizeof codes);
    memset(&k, 0, sizeof k);
    snprintf(where, sizeof where, "%s/%s S=0x%08x g=0x%08x flags=%u [%s]",
             lowp_block_format_name(c->f), lowp_recipe_name(c->r), (unsigned)bits32(c->gs.enc),
             (unsigned)bits32(c->gs.dec), c->flags, c->tag);
    int rc = lowp_block_quantize(c->f, c->r, c->gs, c->flags, x, n, codes,
                                 lowp_block_has_scales(c->f) ? scales : NULL, &k, why, sizeof why);
    if (rc != 0) {
        fprintf(stderr, "%s: lowp_block_quantize returned %d: %s\n", where, rc, why);
        return 1;
    }
    unsigned d = code_digits(c->f);
    if (lowp_block_has_scales(c->f) && c->want_scale != NOSCALE) {
        int ok = scales[0] == (unsigned)c->want_scale ||
                 (c->want_scale_alt >= 0 && scales[0] == (unsigned)c->want_scale_alt);
        if (!ok) {
            fprintf(stderr, "%s: block amax input(s) as listed; scale got 0x%02x expected 0x%02x",
                    where, scales[0], (unsigned)c->want_scale);
            if (c->want_scale_alt >= 0)
                fprintf(stderr, " or 0x%02x", (unsigned)c->want_scale_alt);
            fprintf(stderr, "\n");
            bad++;
        }
    }
    for (size_t i = 0; i < n; i++) {
        uint16_t want = i < c->nx ? (c->want != NULL ? c->want[i] : NOCODE) : c->pad_code;
        if (want == NOCODE)
            continue;
        uint16_t got = lowp_block_code_at(c->f, codes, i);
        if (got != want) {
            fprintf(stderr, "%s: elem %zu input 0x%08x (%a) got 0x%0*x expected 0x%0*x\n",
                    where, i, (unsigned)bits32(x[i]), (double)x[i], (int)d, (unsigned)got, (int)d,
                    (unsigned)want);
            bad++;
        }
    }
    /* nothing written past the code bytes */
    size_t cb = lowp_block_code_bytes(c->f, n);
    for (size_t i = cb; i < cb + 8; i++)
        if (codes[i] != 0xA5) {
            fprintf(stderr, "%s: code byte %zu past the end (%zu bytes) was written\n", where,
                    i, cb);
            bad++;
            break;
        }
    bad += expect_counts(where, &k, &c->counts);
    return bad;
}

/* Run a table of cases and fail once with the number of bad rows. */
#define RUN_CASES(arr)                                                                      \
    do {                                                                                    \
        int bad_ = 0;                                                                       \
        for (size_t i_ = 0; i_ < N_ELEMS(arr); i_++)                                        \
            bad_ += run_case(&(arr)[i_]);                                                   \
        ck_assert_msg(bad_ == 0, "%d mismatches (see stderr)", bad_);                       \
    } while (0)

#define NX(a) (a), N_ELEMS(a)

/* ---------------------------------------------------------------------------------- */
/* API: sizes, names, layout                                                           */

START_TEST(test_api_sizes_names_layout)
{
    static const size_t bs[LOWP_BLOCK_FORMAT_COUNT] = {16, 32, 32, 1, 1, 1};
    static const lowp_format ef[LOWP_BLOCK_FORMAT_COUNT] = {LOWP_E2M1, LOWP_E2M1, LOWP_E4M3,
                                                            LOWP_E4M3, LOWP_E5M2, LOWP_BF16};
    static const int has_s[LOWP_BLOCK_FORMAT_COUNT] = {1, 1, 1, 0, 0, 0};
    static const int has_g[LOWP_BLOCK_FORMAT_COUNT] = {1, 0, 0, 1, 1, 0};
    static const char *const fn[LOWP_BLOCK_FORMAT_COUNT] = {"nvfp4",    "mxfp4",    "mxfp8",
                                                            "fp8_e4m3", "fp8_e5m2", "bf16"};
    static const char *const rn[LOWP_RECIPE_COUNT] = {
        "trtllm",       "exact",        "modelopt",      "ocp",
        "rceil",        "sglang-kv",    "torchao",       "torchao-floor",
        "torchao-ceil", "torchao-even", "torchao-rceil", "compressed-tensors"};
    /* code bytes for 64 elements: 4-bit packed two per byte, 8-bit one, BF16 two */
    static const size_t cb64[LOWP_BLOCK_FORMAT_COUNT] = {32, 32, 64, 64, 64, 128};
    static const lowp_recipe def[LOWP_BLOCK_FORMAT_COUNT] = {
        LOWP_RECIPE_EXACT, LOWP_RECIPE_OCP,   LOWP_RECIPE_OCP,
        LOWP_RECIPE_EXACT, LOWP_RECIPE_EXACT, LOWP_RECIPE_EXACT};
    for (int f = 0; f < LOWP_BLOCK_FORMAT_COUNT; f++) {
        lowp_block_format bf = (lowp_block_format)f, parsed = LOWP_BF16_PASS;
        ck_assert_uint_eq(lowp_block_size(bf), bs[f]);
        ck_assert_int_eq(lowp_block_element_format(bf), ef[f]);
        ck_assert_int_eq(!!lowp_block_has_scales(bf), has_s[f]);
        ck_assert_int_eq(!!lowp_block_has_global_scale(bf), has_g[f]);
        ck_assert_str_eq(lowp_block_format_name(bf), fn[f]);
        ck_assert_int_eq(lowp_block_format_parse(fn[f], &parsed), 0);
        ck_assert_int_eq(parsed, f);
        ck_assert_uint_eq(lowp_block_code_bytes(bf, 64), cb64[f]);
        ck_assert_int_eq(lowp_recipe_default(bf), def[f]);
    }
    for (int r = 0; r < LOWP_RECIPE_COUNT; r++) {
        lowp_recipe parsed = LOWP_RECIPE_OCP;
        ck_assert_str_eq(lowp_recipe_name((lowp_recipe)r), rn[r]);
        ck_assert_int_eq(lowp_recipe_parse(rn[r], &parsed), 0);
        ck_assert_int_eq(parsed, r);
    }
    /* lowp_recipe_names is the names above, space-separated */
    char joined[512] = "";
    for (int r = 0; r < LOWP_RECIPE_COUNT; r++) {
        if (r > 0)
            strcat(joined, " ");
        strcat(joined, rn[r]);
    }
    ck_assert_str_eq(lowp_recipe_names(), joined);
    lowp_block_format pf;
    lowp_recipe pr;
    ck_assert_int_eq(lowp_block_format_parse("nvfp8", &pf), -1);
    ck_assert_int_eq(lowp_recipe_parse("floor", &pr), -1);
    /* BF16 code bytes for an odd count: 2 per element */
    ck_assert_uint_eq(lowp_block_code_bytes(LOWP_BF16_PASS, 13), 26);
    ck_assert_uint_eq(lowp_block_code_bytes(LOWP_FP8_E4M3, 13), 13);
}
END_TEST

/* ---------------------------------------------------------------------------------- */
/* lowp_recipe_check: the recipes recipes.md defines per format, refusals with a reason */

START_TEST(test_recipe_check_refuses_undefined_pairs_with_reason)
{
    /* recipes.md: NVFP4 {trtllm, exact, modelopt, sglang-kv, torchao, compressed-tensors};
     * MXFP4/MXFP8 {ocp, rceil, trtllm, modelopt, torchao-*, compressed-tensors}; FP8 {exact};
     * BF16 {exact}. Columns: trtllm exact modelopt ocp rceil sglang-kv torchao torchao-floor
     * torchao-ceil torchao-even torchao-rceil compressed-tensors */
    static const int defined[LOWP_BLOCK_FORMAT_COUNT][LOWP_RECIPE_COUNT] = {
        {1, 1, 1, 0, 0, 1, 1, 0, 0, 0, 0, 1}, /* nvfp4 */
        {1, 0, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1}, /* mxfp4 */
        {1, 0, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1}, /* mxfp8 */
        {0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, /* fp8_e4m3 */
        {0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, /* fp8_e5m2 */
        {0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, /* bf16 */
    };
    int bad = 0;
    for (int f = 0; f < LOWP_BLOCK_FORMAT_COUNT; f++)
        for (int r = 0; r < LOWP_RECIPE_COUNT; r++) {
            char why[256] = "";
            int rc = lowp_recipe_check((lowp_block_format)f, (lowp_recipe)r, why, sizeof why);
            int want = defined[f][r] ? 0 : -1;
            if (rc != want) {
                fprintf(stderr, "lowp_recipe_check(%s, %s) got %d expected %d (why: %s)\n",
                        lowp_block_format_name((lowp_block_format)f),
                        lowp_recipe_name((lowp_recipe)r), rc, want, why);
                bad++;
            } else if (rc != 0 && why[0] == '\0') {
                fprintf(stderr, "lowp_recipe_check(%s, %s) refused with no reason\n",
                        lowp_block_format_name((lowp_block_format)f),
                        lowp_recipe_name((lowp_recipe)r));
                bad++;
            }
            /* the default recipe is always defined */
            if (r == (int)lowp_recipe_default((lowp_block_format)f) && !defined[f][r])
                bad++;
        }
    ck_assert_msg(bad == 0, "%d mismatches (see stderr)", bad);

    /* lowp_block_quantize refuses the same pairs: ocp on NVFP4, exact on MXFP8 */
    float x[32] = {1.0f};
    uint8_t codes[64], scales[2];
    char why[256] = "";
    lowp_quant_counts k;
    memset(&k, 0, sizeof k);
    ck_assert_int_eq(lowp_block_quantize(LOWP_NVFP4, LOWP_RECIPE_OCP, GS_ONE, 0, x, 16, codes,
                                         scales, &k, why, sizeof why),
                     -1);
    ck_assert_msg(why[0] != '\0', "ocp on nvfp4 refused without a reason");
    why[0] = '\0';
    ck_assert_int_eq(lowp_block_quantize(LOWP_MXFP8, LOWP_RECIPE_EXACT, GS_ONE, 0, x, 32,
                                         codes, scales, &k, why, sizeof why),
                     -1);
    ck_assert_msg(why[0] != '\0', "exact on mxfp8 refused without a reason");
    why[0] = '\0';
    ck_assert_int_eq(lowp_block_quantize(LOWP_MXFP4, LOWP_RECIPE_SGLANG_KV, GS_ONE, 0, x, 32,
                                         codes, scales, &k, why, sizeof why),
                     -1);
    ck_assert_msg(why[0] != '\0', "sglang-kv on mxfp4 refused without a reason");
    /* a refused call counts nothing */
    ck_assert_uint_eq(k.elements, 0);
    ck_assert_uint_eq(k.blocks, 0);
}
END_TEST

START_TEST(test_n_not_multiple_of_block_size_refused_with_reason)
{
    static const struct {
        lowp_block_format f;
        lowp_recipe r;
        size_t n;
    } bad_n[] = {
        {LOWP_NVFP4, LOWP_RECIPE_TRTLLM, 8},  {LOWP_NVFP4, LOWP_RECIPE_EXACT, 17},
        {LOWP_NVFP4, LOWP_RECIPE_MODELOPT, 24}, {LOWP_NVFP4, LOWP_RECIPE_SGLANG_KV, 30},
        {LOWP_MXFP4, LOWP_RECIPE_OCP, 16},    {LOWP_MXFP4, LOWP_RECIPE_TRTLLM, 34},
        {LOWP_MXFP8, LOWP_RECIPE_RCEIL, 33},  {LOWP_MXFP8, LOWP_RECIPE_OCP, 1},
    };
    float x[64];
    uint8_t codes[128], scales[4];
    for (size_t i = 0; i < N_ELEMS(x); i++)
        x[i] = 1.0f;
    for (size_t i = 0; i < N_ELEMS(bad_n); i++) {
        char why[256] = "";
        int rc = lowp_block_quantize(bad_n[i].f, bad_n[i].r, GS_ONE, 0, x, bad_n[i].n, codes,
                                     scales, NULL, why, sizeof why);
        ck_assert_msg(rc == -1 && why[0] != '\0', "%s/%s n=%zu: got %d (why: '%s'), expected -1",
                      lowp_block_format_name(bad_n[i].f), lowp_recipe_name(bad_n[i].r),
                      bad_n[i].n, rc, why);
    }
    /* n = 0 is a multiple of every block size: nothing to do, 0 */
    char why[256] = "";
    ck_assert_int_eq(lowp_block_quantize(LOWP_NVFP4, LOWP_RECIPE_EXACT, GS_ONE, 0, x, 0, codes,
                                         scales, NULL, why, sizeof why),
                     0);
    /* elementwise formats take any n, odd included */
    ck_assert_int_eq(lowp_block_quantize(LOWP_FP8_E4M3, LOWP_RECIPE_EXACT, GS_ONE, 0, x, 7,
                                         codes, NULL, NULL, why, sizeof why),
                     0);
    ck_assert_int_eq(lowp_block_quantize(LOWP_BF16_PASS, LOWP_RECIPE_EXACT, GS_ONE, 0, x, 7,
                                         codes, NULL, NULL, why, sizeof why),
                     0);
}
END_TEST

/* ---------------------------------------------------------------------------------- */
/* NVFP4: NaN in a block                                                                */

START_TEST(test_nvfp4_nan_ignored_in_amax_trtllm_exact_sglang)
{
    /* Block {+qNaN, 1, -2, 6, 0.5, 0, -0, 3, -qNaN, 0 x7}, S = 1 (g = 1).
     * amax_ign = 6 (NaN elements skipped, CUDA fmaxf / __hmax2).
     * trtllm:    sf = S*(6*rcp~(6)) = 1*(6*0x3E2AAAAB); 6*0x3E2AAAAB = 1 + 2^-25 exactly,
     *            RN -> 1.0 (a quarter ulp) -> e4m3 0x38; o = rcp~(1*rcp~(1)) = 1.
     * exact:     sf = 6*(1*RN(1/6)) = 1.0 as above -> 0x38; o = min(1/(1*(1/1)), FLT_MAX) = 1.
     * sglang-kv: sf = rcp~(1)*(6*rcp~(6)) = 1.0 -> 0x38; o = rcp~(1*1) = 1.
     * Elements x*1: NaN -> e2m1 (cuda) 0x7 for either sign; 1 -> 0x2; -2 -> 0xC; 6 -> 0x7;
     * 0.5 -> 0x1; 0 -> 0x0; -0 -> 0x8 (-0*1 = -0); 3 -> 0x5. Nothing saturates (6*1 = 6 does
     * not exceed 6); the NaN codes decode to 6, not NaN. */
    const float x[] = {qnan(), 1, -2, 6, 0.5f, 0, -0.0f, 3, nqnan()};
    static const uint16_t w[] = {0x7, 0x2, 0xC, 0x7, 0x1, 0x0, 0x8, 0x5, 0x7};
    lowp_quant_counts k = COUNTS(.elements = 16, .blocks = 1, .nan_in = 2, .inf_in = 0,
                                 .saturated = 0, .flushed = 0, .nan_out = 0, .scale_zero = 0,
                                 .scale_subnormal = 0, .scale_nan = 0);
    qcase c[] = {
        {"nan ignored", LOWP_NVFP4, LOWP_RECIPE_TRTLLM, gs_enc(1), 0, NX(x), w, 0x0, 0x38, -1, k},
        {"nan ignored", LOWP_NVFP4, LOWP_RECIPE_EXACT, gs_enc(1), 0, NX(x), w, 0x0, 0x38, -1, k},
        {"nan ignored", LOWP_NVFP4, LOWP_RECIPE_SGLANG_KV, gs_dec(1), 0, NX(x), w, 0x0, 0x38, -1,
         k},
    };
    RUN_CASES(c);
}
END_TEST

START_TEST(test_nvfp4_nan_propagates_modelopt)
{
    /* Block {+qNaN, 1, -2, 6, 0.5, 0, -0, 3, 0 x8}, g = 1.
     * amax_nan = NaN; s = NaN/(6*1) = NaN; s == 0 no; clamp(NaN, 2^-9, 448) stays NaN;
     * e4m3_torch(NaN) keeps the sign: ModelOpt's amax is torch.max, whose NaN is 0xFFFFFFFF
     * on the CPU (scale 0xFF), the canonical 0x7FFFFFFF on CUDA (LOWP_BLOCK_NAN_CANONICAL:
     * 0x7F). d = NaN*1 = NaN;
     * c_i = e2m1_modelopt(x_i/NaN) = e2m1_modelopt(NaN) = 0x7 for every element, zeros and
     * negative elements included: ModelOpt's _cast_fp4 takes the sign from the scaled value
     * (sign_bit = (weight < 0) on weight = input / scale, nvfp4_tensor.py @211c6b3) and
     * NaN < 0 is false. The NaN scale makes all 16 elements decode to NaN. */
    const float x[] = {qnan(), 1, -2, 6, 0.5f, 0, -0.0f, 3};
    static const uint16_t w[] = {0x7, 0x7, 0x7, 0x7, 0x7, 0x7, 0x7, 0x7};
    qcase c[] = {
        {"nan propagates", LOWP_NVFP4, LOWP_RECIPE_MODELOPT, gs_dec(1), 0, NX(x), w, 0x7, 0xFF,
         -1,
         COUNTS(.elements = 16, .blocks = 1, .nan_in = 1, .inf_in = 0, .saturated = 0,
                .flushed = 0, .nan_out = 16, .scale_zero = 0, .scale_subnormal = 0,
                .scale_nan = 1)},
        {"nan propagates, cuda", LOWP_NVFP4, LOWP_RECIPE_MODELOPT, gs_dec(1),
         LOWP_BLOCK_NAN_CANONICAL, NX(x), w, 0x7, 0x7F, -1,
         COUNTS(.elements = 16, .blocks = 1, .nan_in = 1, .inf_in = 0, .saturated = 0,
                .flushed = 0, .nan_out = 16, .scale_zero = 0, .scale_subnormal = 0,
                .scale_nan = 1)},
    };
    RUN_CASES(c);
}
END_TEST

/* ---------------------------------------------------------------------------------- */
/* NVFP4: Inf in a block                                                                */

START_TEST(test_nvfp4_inf_saturates_scale_to_448)
{
    /* Block {+Inf, 1, -3, 448, 2240, -2688, 0, -0, -Inf, 0 x7}, S = 1 (g = 1).
     * amax = Inf.
     * trtllm:    sf = 1*(Inf*rcp~(6)) = Inf -> e4m3 satfinite 0x7E (448);
     *            o = rcp~(448*rcp~(1)) = rcp~(448) = RN(1/448) = 0x3B124925 (§5.7).
     * exact:     sf = Inf*(1*RN(1/6)) = Inf -> 0x7E; o = min(1/(448*(1/1)), FLT_MAX) =
     *            RN(1/448) = 0x3B124925.
     * sglang-kv: sf = rcp~(1)*(Inf*rcp~(6)) = Inf -> 0x7E; o = rcp~(448*1) = 0x3B124925.
     * Elements x*0x3B124925:
     *   +Inf -> +Inf -> 0x7;  -Inf -> 0xF;
     *   1    -> 0.00223 -> 0x0 (flushed);  -3 -> -0.0067 -> 0x8 (flushed);
     *   448  -> 448*RN(1/448) = 7*RN(1/7) = 1.0000000447 -> RN 1.0 -> 0x2;
     *   2240 -> 5*(1.0000000447) -> RN 5.0 exactly (0x40A00000), an E2M1 tie -> even 4 -> 0x6;
     *   -2688 -> -6.0000005 (0xC0C00001) -> saturates -> 0xF (counted: |x*o| > 6);
     *   0 -> 0x0; -0 -> 0x8. */
    const float x[] = {INFINITY, 1, -3, 448, 2240, -2688, 0, -0.0f, -INFINITY};
    static const uint16_t w[] = {0x7, 0x0, 0x8, 0x2, 0x6, 0xF, 0x0, 0x8, 0xF};
    lowp_quant_counts k = COUNTS(.elements = 16, .blocks = 1, .nan_in = 0, .inf_in = 2,
                                 .saturated = 1, .flushed = 2, .nan_out = 0, .scale_zero = 0,
                                 .scale_subnormal = 0, .scale_nan = 0);
    qcase c[] = {
        {"inf", LOWP_NVFP4, LOWP_RECIPE_TRTLLM, gs_enc(1), 0, NX(x), w, 0x0, 0x7E, -1, k},
        {"inf", LOWP_NVFP4, LOWP_RECIPE_EXACT, gs_enc(1), 0, NX(x), w, 0x0, 0x7E, -1, k},
        {"inf", LOWP_NVFP4, LOWP_RECIPE_SGLANG_KV, gs_dec(1), 0, NX(x), w, 0x0, 0x7E, -1, k},
    };
    RUN_CASES(c);
}
END_TEST

START_TEST(test_nvfp4_inf_modelopt_clamps_scale_to_448)
{
    /* Same block, g = 1. amax_nan = Inf; s = Inf/6 = Inf; ModelOpt 0.47 clamps to
     * [2^-9, 448] before the cast (nvfp4_tensor.py _cast_per_block_scale_to_fp8), so
     * s = 448 -> 0x7E (before 0.47 e4m3_torch(Inf) made the scale NaN). d = 448 * 1;
     * x / 448: Inf -> 0x7, 1 -> 0.0022 -> 0x0 (flushed), -3 -> -0.0067 -> 0x8 (sign from
     * v < 0; flushed), 448 -> 1 -> 0x2, 2240 -> 5 (tie, even 4) -> 0x6, -2688 -> -6 -> 0xF
     * (not beyond 6: not saturated), 0 -> 0x0, -0 -> 0x0 (-0 < 0 is false), -Inf -> 0xF. */
    const float x[] = {INFINITY, 1, -3, 448, 2240, -2688, 0, -0.0f, -INFINITY};
    static const uint16_t w[] = {0x7, 0x0, 0x8, 0x2, 0x6, 0xF, 0x0, 0x0, 0xF};
    qcase c[] = {
        {"inf", LOWP_NVFP4, LOWP_RECIPE_MODELOPT, gs_dec(1), 0, NX(x), w, 0x0, 0x7E, -1,
         COUNTS(.elements = 16, .blocks = 1, .nan_in = 0, .inf_in = 2, .saturated = 0,
                .flushed = 2, .nan_out = 0, .scale_zero = 0, .scale_subnormal = 0,
                .scale_nan = 0)},
    };
    RUN_CASES(c);
}
END_TEST

/* ---------------------------------------------------------------------------------- */
/* NVFP4: all-zero blocks                                                               */

START_TEST(test_nvfp4_zero_block_scale_0x00_trtllm_exact_sglang)
{
    /* Block {0, -0, 0, -0, ...} (16), S = 1. m = 0.
     * trtllm:    sf = 1*(0*rcp~(6)) = 0 -> 0x00; o = 0 (m == 0).
     * exact:     sf = 0 (m == 0) -> 0x00; o = 0.
     * sglang-kv: sf = rcp~(1)*(0*rcp~(6)) = 0 -> 0x00; o = 0.
     * Elements x*0: 0 -> 0x0, -0*0 = -0 -> 0x8. One zero scale. */
    float x[16];
    uint16_t w[16];
    for (int i = 0; i < 16; i++) {
        x[i] = (i & 1) ? -0.0f : 0.0f;
        w[i] = (i & 1) ? 0x8 : 0x0;
    }
    lowp_quant_counts k = COUNTS(.elements = 16, .blocks = 1, .nan_in = 0, .inf_in = 0,
                                 .saturated = 0, .flushed = 0, .nan_out = 0, .scale_zero = 1,
                                 .scale_subnormal = 0, .scale_nan = 0);
    qcase c[] = {
        {"zero block", LOWP_NVFP4, LOWP_RECIPE_TRTLLM, gs_enc(1), 0, NX(x), w, 0, 0x00, -1, k},
        {"zero block", LOWP_NVFP4, LOWP_RECIPE_EXACT, gs_enc(1), 0, NX(x), w, 0, 0x00, -1, k},
        {"zero block", LOWP_NVFP4, LOWP_RECIPE_SGLANG_KV, gs_dec(1), 0, NX(x), w, 0, 0x00, -1,
         k},
        /* a realistic encode factor does not change it: S = 2688/100 */
        {"zero block S=26.88", LOWP_NVFP4, LOWP_RECIPE_TRTLLM, gs_enc(26.88f), 0, NX(x), w, 0,
         0x00, -1, k},
        {"zero block S=26.88", LOWP_NVFP4, LOWP_RECIPE_EXACT, gs_enc(26.88f), 0, NX(x), w, 0,
         0x00, -1, k},
    };
    RUN_CASES(c);
}
END_TEST

START_TEST(test_nvfp4_zero_block_modelopt_scale_one_0x38)
{
    /* Block {0, -0, ...}, g = 1: m = 0; s = 0/(6*1) = 0 -> s == 0 -> 1; max(1, 2^-9) = 1;
     * e4m3_torch(1) = 0x38. d = 1*1; x/1 = +-0; the sign comes from x < 0, false for -0, so
     * every code is 0x0. Same with g = 0.5 (s = 0/3 = 0 -> 1). */
    float x[16];
    for (int i = 0; i < 16; i++)
        x[i] = (i & 1) ? -0.0f : 0.0f;
    lowp_quant_counts k = COUNTS(.elements = 16, .blocks = 1, .nan_in = 0, .inf_in = 0,
                                 .saturated = 0, .flushed = 0, .nan_out = 0, .scale_zero = 0,
                                 .scale_subnormal = 0, .scale_nan = 0);
    static const uint16_t w[16] = {0};
    qcase c[] = {
        {"zero block", LOWP_NVFP4, LOWP_RECIPE_MODELOPT, gs_dec(1), 0, NX(x), w, 0x0, 0x38, -1,
         k},
        {"zero block", LOWP_NVFP4, LOWP_RECIPE_MODELOPT, gs_dec(0.5f), 0, NX(x), w, 0x0, 0x38,
         -1, k},
    };
    RUN_CASES(c);
}
END_TEST

/* ---------------------------------------------------------------------------------- */
/* NVFP4: block scales in the E4M3 subnormals and below                                  */

START_TEST(test_nvfp4_block_scale_e4m3_subnormal)
{
    /* Block {6*2^-8, 2.5*2^-8, 0.25*2^-8, -5*2^-8, 2^-8, 0 x11}, S = 1 / g = 1.
     * m = 6*2^-8 = 0.0234375.
     * trtllm:    m*rcp~(6) = 2^-8*(1+2^-25) -> RN 2^-8; sf = 2^-8 = 2*2^-9 -> e4m3 0x02
     *            (subnormal); o = rcp~(2^-8*rcp~(1)) = rcp~(2^-8) = 256.
     * exact:     sf = m*(1*RN(1/6)) = 2^-8 -> 0x02; o = min(1/(2^-8*1), FLT_MAX) = 256.
     * sglang-kv: sf = rcp~(1)*(m*rcp~(6)) = 2^-8 -> 0x02; o = rcp~(2^-8*1) = 256.
     * modelopt:  s = m/(6*1) = 2^-8 exactly; max(2^-8, 2^-9) = 2^-8 -> 0x02; d = 2^-8; x/d.
     * Elements (x*256 or x/2^-8): 6 -> 0x7; 2.5 -> tie -> 2 -> 0x4; 0.25 -> tie -> 0 -> 0x0
     * (flushed); -5 -> tie -> -4 -> 0xE; 1 -> 0x2. */
    const float x[] = {6 * 0x1p-8f, 2.5f * 0x1p-8f, 0.25f * 0x1p-8f, -5 * 0x1p-8f, 0x1p-8f};
    static const uint16_t w[] = {0x7, 0x4, 0x0, 0xE, 0x2};
    lowp_quant_counts k = COUNTS(.elements = 16, .blocks = 1, .nan_in = 0, .inf_in = 0,
                                 .saturated = 0, .flushed = 1, .nan_out = 0, .scale_zero = 0,
                                 .scale_subnormal = 1, .scale_nan = 0);
    qcase c[] = {
        {"e4m3 subnormal scale", LOWP_NVFP4, LOWP_RECIPE_TRTLLM, gs_enc(1), 0, NX(x), w, 0,
         0x02, -1, k},
        {"e4m3 subnormal scale", LOWP_NVFP4, LOWP_RECIPE_EXACT, gs_enc(1), 0, NX(x), w, 0,
         0x02, -1, k},
        {"e4m3 subnormal scale", LOWP_NVFP4, LOWP_RECIPE_SGLANG_KV, gs_dec(1), 0, NX(x), w, 0,
         0x02, -1, k},
        {"e4m3 subnormal scale", LOWP_NVFP4, LOWP_RECIPE_MODELOPT, gs_dec(1), 0, NX(x), w, 0,
         0x02, -1, k},
    };
    RUN_CASES(c);
}
END_TEST

START_TEST(test_nvfp4_scale_underflow_to_zero_rcp_of_zero_is_inf_trtllm_sglang)
{
    /* Block {6*2^-11, 2^-11, 0, -0, -3*2^-12, 0 x11}, S = 1 (sglang-kv: g = 1).
     * m = 1.5*2^-9; m*rcp~(6) = 2^-11 (as 6*RN(1/6) -> 1); sf = 2^-11 < 2^-10 (half the
     * smallest E4M3 subnormal 2^-9) -> e4m3 0x00.
     * trtllm:    o = rcp~(0*rcp~(1)) = rcp~(0) = +Inf.
     * sglang-kv: o = rcp~(0*1) = +Inf.
     * Elements x*Inf: nonzero -> +-Inf -> 0x7 / 0xF (three saturated: |x*o| = Inf > 6);
     * +-0*Inf = NaN -> e2m1 NaN -> 0x7, also for every zero pad element. The block still
     * decodes to 0 (scale 0), so nothing decodes to NaN and the three nonzero inputs are
     * flushed (they decode to zero; see the counting note at the top of the file).
     *
     * Realistic: global amax 1000 -> S = 2688/1000 = 2.688 = 0x402C0831; block {0.001,
     * -0.0005, 0 x14}: m = 0x3A83126F; m*rcp~(6) = 0x392EC33F; sf = S*that = 0x39EAE18C =
     * 4.48e-4 < 2^-10 -> 0x00,
     * o = +Inf -> codes 0x7, 0xF, zeros 0x7. */
    const float x[] = {6 * 0x1p-11f, 0x1p-11f, 0.0f, -0.0f, -3 * 0x1p-12f};
    static const uint16_t w[] = {0x7, 0x7, 0x7, 0x7, 0xF};
    lowp_quant_counts k = COUNTS(.elements = 16, .blocks = 1, .nan_in = 0, .inf_in = 0,
                                 .saturated = 3, .flushed = 3, .nan_out = 0, .scale_zero = 1,
                                 .scale_subnormal = 0, .scale_nan = 0);
    const float y[] = {0.001f, -0.0005f};
    static const uint16_t wy[] = {0x7, 0xF};
    lowp_quant_counts ky = COUNTS(.elements = 16, .blocks = 1, .nan_in = 0, .inf_in = 0,
                                  .saturated = 2, .flushed = 2, .nan_out = 0, .scale_zero = 1,
                                  .scale_subnormal = 0, .scale_nan = 0);
    qcase c[] = {
        {"scale underflow", LOWP_NVFP4, LOWP_RECIPE_TRTLLM, gs_enc(1), 0, NX(x), w, 0x7, 0x00,
         -1, k},
        {"scale underflow", LOWP_NVFP4, LOWP_RECIPE_SGLANG_KV, gs_dec(1), 0, NX(x), w, 0x7,
         0x00, -1, k},
        {"gamax 1000, bamax 0.001", LOWP_NVFP4, LOWP_RECIPE_TRTLLM, gs_enc(f32(0x402C0831u)), 0,
         NX(y), wy, 0x7, 0x00, -1, ky},
    };
    RUN_CASES(c);
}
END_TEST

START_TEST(test_nvfp4_scale_underflow_to_zero_exact_clamps_flt_max)
{
    /* Same block, exact, S = 1: sf = m*(1*RN(1/6)) = 2^-11 -> 0x00;
     * o = min(1/(0*(1/1)), FLT_MAX) = min(Inf, FLT_MAX) = FLT_MAX (0x7F7FFFFF).
     * Elements x*FLT_MAX: 1.5*2^-9*FLT_MAX ~ 1e36 -> 0x7; 2^-11*FLT_MAX -> 0x7;
     * -3*2^-12*FLT_MAX -> 0xF (three saturated); 0*FLT_MAX = 0 -> 0x0; -0 -> 0x8; pads 0x0.
     * With scale 0 the three nonzero inputs decode to zero: flushed too.
     * Realistic: S = 0x402C0831 (global amax 1000), block {0.001, -0.0005}: sf = 0x39EAE18C
     * -> 0x00; o = FLT_MAX; codes 0x7, 0xF, pads 0x0. */
    const float x[] = {6 * 0x1p-11f, 0x1p-11f, 0.0f, -0.0f, -3 * 0x1p-12f};
    static const uint16_t w[] = {0x7, 0x7, 0x0, 0x8, 0xF};
    const float y[] = {0.001f, -0.0005f};
    static const uint16_t wy[] = {0x7, 0xF};
    qcase c[] = {
        {"scale underflow", LOWP_NVFP4, LOWP_RECIPE_EXACT, gs_enc(1), 0, NX(x), w, 0x0, 0x00,
         -1,
         COUNTS(.elements = 16, .blocks = 1, .nan_in = 0, .inf_in = 0, .saturated = 3,
                .flushed = 3, .nan_out = 0, .scale_zero = 1, .scale_subnormal = 0,
                .scale_nan = 0)},
        {"gamax 1000, bamax 0.001", LOWP_NVFP4, LOWP_RECIPE_EXACT, gs_enc(f32(0x402C0831u)), 0,
         NX(y), wy, 0x0, 0x00, -1,
         COUNTS(.elements = 16, .blocks = 1, .nan_in = 0, .inf_in = 0, .saturated = 2,
                .flushed = 2, .nan_out = 0, .scale_zero = 1, .scale_subnormal = 0,
                .scale_nan = 0)},
    };
    RUN_CASES(c);
}
END_TEST

START_TEST(test_nvfp4_scale_underflow_modelopt_clamps_to_2m9)
{
    /* modelopt, g = 1, block {6*2^-11, 2^-11, 0, -0, -3*2^-12}: s = 1.5*2^-9/6 = 2^-11;
     * max(2^-11, 2^-9) = 2^-9 -> e4m3_torch 0x01 (subnormal); d = 2^-9.
     * x/d: 1.5 -> 0x3; 0.25 -> tie -> 0 -> 0x0 (flushed); 0 -> 0x0; -0 -> 0x0 (sign from
     * x < 0); -0.375 -> nearer 0.5 -> 0x9.
     * Realistic: g = 1000/2688 = 0x3EBE79E8, block {0.001, -0.0005}: 6g = 0x400EDB6E,
     * s = 0.001/6g = 0x39EAE18B (4.48e-4) -> clamp 2^-9 -> 0x01; d = 2^-9*g = 0x3A3E79E8;
     * 0.001/d = 1.376 -> 1.5 -> 0x3; -0.0005/d = -0.688 -> -0.5 -> 0x9. */
    const float x[] = {6 * 0x1p-11f, 0x1p-11f, 0.0f, -0.0f, -3 * 0x1p-12f};
    static const uint16_t w[] = {0x3, 0x0, 0x0, 0x0, 0x9};
    const float y[] = {0.001f, -0.0005f};
    static const uint16_t wy[] = {0x3, 0x9};
    qcase c[] = {
        {"scale clamp 2^-9", LOWP_NVFP4, LOWP_RECIPE_MODELOPT, gs_dec(1), 0, NX(x), w, 0x0,
         0x01, -1,
         COUNTS(.elements = 16, .blocks = 1, .nan_in = 0, .inf_in = 0, .saturated = 0,
                .flushed = 1, .nan_out = 0, .scale_zero = 0, .scale_subnormal = 1,
                .scale_nan = 0)},
        {"gamax 1000, bamax 0.001", LOWP_NVFP4, LOWP_RECIPE_MODELOPT, gs_dec(f32(0x3EBE79E8u)),
         0, NX(y), wy, 0x0, 0x01, -1,
         COUNTS(.elements = 16, .blocks = 1, .nan_in = 0, .inf_in = 0, .saturated = 0,
                .flushed = 0, .nan_out = 0, .scale_zero = 0, .scale_subnormal = 1,
                .scale_nan = 0)},
    };
    RUN_CASES(c);
}
END_TEST

/* ---------------------------------------------------------------------------------- */
/* NVFP4: binary32 subnormal inputs                                                     */

START_TEST(test_nvfp4_denormal_inputs)
{
    /* Block of binary32 subnormals {2^-127, 2^-128, -2^-126 (min normal), 2^-149, 0, -0},
     * S = 1 / g = 1. m = 2^-126.
     * trtllm: m*rcp~(6) = 0x00155555 (subnormal product, IEEE, no flush); sf the same ->
     *   e4m3 0x00; o = rcp~(0*1) = +Inf: nonzero -> 0x7 / 0xF (4 saturated); zeros: 0*Inf =
     *   NaN -> 0x7. sglang-kv: identical (o = rcp~(0*1) = Inf). Scale 0: all four nonzero
     *   inputs also count as flushed.
     * exact: sf = 2^-126*RN(1/6) = 0x00155555 -> 0x00; o = FLT_MAX;
     *   2^-127*FLT_MAX = 1.9999999 -> 0x4; 2^-128*FLT_MAX = 0.99999994 -> 0x2;
     *   -2^-126*FLT_MAX = -3.9999998 -> 0xE; 2^-149*FLT_MAX = 4.8e-7 -> 0x0;
     *   0 -> 0x0; -0 -> 0x8. Scale 0: all four nonzero inputs decode to zero (flushed).
     * modelopt: s = 2^-126/6 (subnormal) -> clamp 2^-9 -> 0x01; d = 2^-9; every x/d is below
     *   2^-116 -> 0x0, -2^-117 -> 0x8 (x < 0); all four nonzero inputs flushed.
     * A normal block with subnormal elements {6, 2^-140, -2^-149}: scale 0x38, factor 1;
     * 2^-140 -> 0x0, -2^-149 -> 0x8 (both flushed), same in every recipe. */
    const float x[] = {0x1p-127f, 0x1p-128f, -0x1p-126f, 0x1p-149f, 0.0f, -0.0f};
    static const uint16_t wt[] = {0x7, 0x7, 0xF, 0x7, 0x7, 0x7};
    static const uint16_t we[] = {0x4, 0x2, 0xE, 0x0, 0x0, 0x8};
    static const uint16_t wm[] = {0x0, 0x0, 0x8, 0x0, 0x0, 0x0};
    const float y[] = {6, 0x1p-140f, -0x1p-149f};
    static const uint16_t wy[] = {0x7, 0x0, 0x8};
    lowp_quant_counts kt = COUNTS(.elements = 16, .blocks = 1, .nan_in = 0, .inf_in = 0,
                                  .saturated = 4, .flushed = 4, .nan_out = 0, .scale_zero = 1,
                                  .scale_subnormal = 0, .scale_nan = 0);
    lowp_quant_counts ky = COUNTS(.elements = 16, .blocks = 1, .nan_in = 0, .inf_in = 0,
                                  .saturated = 0, .flushed = 2, .nan_out = 0, .scale_zero = 0,
                                  .scale_subnormal = 0, .scale_nan = 0);
    qcase c[] = {
        {"subnormal block", LOWP_NVFP4, LOWP_RECIPE_TRTLLM, gs_enc(1), 0, NX(x), wt, 0x7, 0x00,
         -1, kt},
        {"subnormal block", LOWP_NVFP4, LOWP_RECIPE_SGLANG_KV, gs_dec(1), 0, NX(x), wt, 0x7,
         0x00, -1, kt},
        {"subnormal block", LOWP_NVFP4, LOWP_RECIPE_EXACT, gs_enc(1), 0, NX(x), we, 0x0, 0x00,
         -1,
         COUNTS(.elements = 16, .blocks = 1, .nan_in = 0, .inf_in = 0, .saturated = 0,
                .flushed = 4, .nan_out = 0, .scale_zero = 1, .scale_subnormal = 0,
                .scale_nan = 0)},
        {"subnormal block", LOWP_NVFP4, LOWP_RECIPE_MODELOPT, gs_dec(1), 0, NX(x), wm, 0x0,
         0x01, -1,
         COUNTS(.elements = 16, .blocks = 1, .nan_in = 0, .inf_in = 0, .saturated = 0,
                .flushed = 4, .nan_out = 0, .scale_zero = 0, .scale_subnormal = 1,
                .scale_nan = 0)},
        {"subnormal elements", LOWP_NVFP4, LOWP_RECIPE_TRTLLM, gs_enc(1), 0, NX(y), wy, 0x0,
         0x38, -1, ky},
        {"subnormal elements", LOWP_NVFP4, LOWP_RECIPE_EXACT, gs_enc(1), 0, NX(y), wy, 0x0,
         0x38, -1, ky},
        {"subnormal elements", LOWP_NVFP4, LOWP_RECIPE_SGLANG_KV, gs_dec(1), 0, NX(y), wy, 0x0,
         0x38, -1, ky},
        {"subnormal elements", LOWP_NVFP4, LOWP_RECIPE_MODELOPT, gs_dec(1), 0, NX(y), wy, 0x0,
         0x38, -1, ky},
    };
    RUN_CASES(c);
}
END_TEST

/* ---------------------------------------------------------------------------------- */
/* NVFP4: E2M1 ties after scaling                                                       */

START_TEST(test_nvfp4_e2m1_ties_after_scaling_round_to_even)
{
    /* Block amax 6, S = 1 / g = 1: scale 0x38 and factor 1 in every recipe (see the NaN
     * test); the elements land exactly on the E2M1 midpoints (ref/notes/formats.md §1.6, RNE):
     * 0.25 -> 0, 0.75 -> 1.0, 1.25 -> 1.0, 1.75 -> 2, 2.5 -> 2, 3.5 -> 4, 5 -> 4, both signs.
     * modelopt: x/1, sign from x < 0: -0.25 -> 0x8 as well.
     * Second block, amax 12: trtllm sf = 12*rcp~(6) = 2*(1+2^-25) -> 2.0 -> 0x40;
     * o = rcp~(2) = 0.5 (exact: 1/(2*1) = 0.5; modelopt d = 2; sglang rcp~(2*1) = 0.5):
     * 12 -> 6 -> 0x7; 0.5 -> 0.25 -> 0x0 (flushed); 1.5 -> 0.75 -> 0x2; 10 -> 5 -> 0x6;
     * -2.5 -> -1.25 -> 0xA; 7 -> 3.5 -> 0x6. */
    const float x[] = {6,  0.25f,  0.75f,  1.25f,  1.75f,  2.5f,  3.5f,  5.0f,
                       -6, -0.25f, -0.75f, -1.25f, -1.75f, -2.5f, -3.5f, -5.0f};
    static const uint16_t w[] = {0x7, 0x0, 0x2, 0x2, 0x4, 0x4, 0x6, 0x6,
                                 0xF, 0x8, 0xA, 0xA, 0xC, 0xC, 0xE, 0xE};
    lowp_quant_counts k = COUNTS(.elements = 16, .blocks = 1, .nan_in = 0, .inf_in = 0,
                                 .saturated = 0, .flushed = 2, .nan_out = 0, .scale_zero = 0,
                                 .scale_subnormal = 0, .scale_nan = 0);
    const float y[] = {12, 0.5f, 1.5f, 10, -2.5f, 7};
    static const uint16_t wy[] = {0x7, 0x0, 0x2, 0x6, 0xA, 0x6};
    lowp_quant_counts ky = COUNTS(.elements = 16, .blocks = 1, .nan_in = 0, .inf_in = 0,
                                  .saturated = 0, .flushed = 1, .nan_out = 0, .scale_zero = 0,
                                  .scale_subnormal = 0, .scale_nan = 0);
    qcase c[] = {
        {"ties", LOWP_NVFP4, LOWP_RECIPE_TRTLLM, gs_enc(1), 0, NX(x), w, 0, 0x38, -1, k},
        {"ties", LOWP_NVFP4, LOWP_RECIPE_EXACT, gs_enc(1), 0, NX(x), w, 0, 0x38, -1, k},
        {"ties", LOWP_NVFP4, LOWP_RECIPE_SGLANG_KV, gs_dec(1), 0, NX(x), w, 0, 0x38, -1, k},
        {"ties", LOWP_NVFP4, LOWP_RECIPE_MODELOPT, gs_dec(1), 0, NX(x), w, 0, 0x38, -1, k},
        {"ties amax 12", LOWP_NVFP4, LOWP_RECIPE_TRTLLM, gs_enc(1), 0, NX(y), wy, 0, 0x40, -1,
         ky},
        {"ties amax 12", LOWP_NVFP4, LOWP_RECIPE_EXACT, gs_enc(1), 0, NX(y), wy, 0, 0x40, -1,
         ky},
        {"ties amax 12", LOWP_NVFP4, LOWP_RECIPE_SGLANG_KV, gs_dec(1), 0, NX(y), wy, 0, 0x40,
         -1, ky},
        {"ties amax 12", LOWP_NVFP4, LOWP_RECIPE_MODELOPT, gs_dec(1), 0, NX(y), wy, 0, 0x40, -1,
         ky},
    };
    RUN_CASES(c);
}
END_TEST

/* ---------------------------------------------------------------------------------- */
/* NVFP4: ref/notes/formats.md §5.8, TRT-LLM fast vs exact                              */

START_TEST(test_nvfp4_formats_5_8_vectors_trtllm_vs_exact)
{
    /* For each vector, the block is {block amax, x, -x, 0 x13} and S comes from the global
     * amax: S = 2688/gamax (trtllm and exact agree: no guard fires), g = 1/S.
     *
     * 1) gamax 0x43D48C1E, bamax 0x43B195D8, x 0x4172E948. S = 0x40CA5874.
     *    trtllm: bamax*rcp~(6) = 0x426CC7CB; sf = S*that = 0x43BB2776 = 374.3 -> e4m3 384
     *      (0x7C); rcp~(S) = 0x3E21F0DA; 384*that = 0x4272E947; o = rcp~(0x4272E947) =
     *      0x3C86E5A3 (RN is 0x3C86E5A2; the sm_90 table adds one ulp for this mantissa).
     *      x*o = 0x3E800001 = 0.25000003 -> 0x1; bamax*o = 5.85 -> 0x7.
     *    exact: S*RN(1/6) = 0x3F86E5A3; sf = 0x43BB2776 -> 0x7C; 1/S = 0x3E21F0DA;
     *      384*(1/S) = 0x4272E947; o = RN(1/that) = 0x3C86E5A2; x*o = 0.25 exactly -> tie ->
     *      0x0 (flushed, twice with -x).
     * 2) gamax 0x441CF392, bamax 0x44152797, x 0x41C25222. S = 0x408902B2.
     *    trtllm: sf = 0x43D4DF5A -> 416 (0x7D); rcp~(S) = 0x3E6F2A03; 416*that =
     *      0x42C25222; o = rcp~(0x42C25222) = 0x3C28A0DC (RN + 1 ulp); x*o = 0.25000003 ->
     *      0x1.   exact: sf = 0x43D4DF5B -> 0x7D; 1/S = 0x3E6F2A03; o = RN(1/0x42C25222) =
     *      0x3C28A0DB; x*o = 0.25 -> 0x0.
     * 3) gamax 0x441061A7, bamax 0x437683CD, x 0x41F782D5. S = 0x4094F055.
     *    trtllm: bamax*rcp~(6) = 0x422457DE; sf = 0x433F3A2B -> 192 (0x74);
     *      rcp~(S) = 0x3E5C0285 (RN 0x3E5C0284 + 1 ulp); 192*that = 0x422501E4;
     *      o = rcp~(0x422501E4) = 0x3CC695C6 (= RN); x*o = 0.74999994 -> 0x1.
     *    exact: 1/S = 0x3E5C0284; 192*(1/S) = 0x422501E3; o = RN(1/that) = 0x3CC695C7;
     *      x*o = 0.75 exactly -> tie -> 1.0 -> 0x2.
     * The outScales agree with ref/notes/formats.md §5.8's table (0x3c86e5a3/a2, 0x3c28a0dc/db,
     * 0x3cc695c6/c7). */
    static const uint32_t gamax[3] = {0x43D48C1Eu, 0x441CF392u, 0x441061A7u};
    static const uint32_t bamax[3] = {0x43B195D8u, 0x44152797u, 0x437683CDu};
    static const uint32_t xe[3] = {0x4172E948u, 0x41C25222u, 0x41F782D5u};
    static const uint32_t S[3] = {0x40CA5874u, 0x408902B2u, 0x4094F055u};
    static const uint32_t g[3] = {0x3E21F0DAu, 0x3E6F2A03u, 0x3E5C0284u};
    static const int scale[3] = {0x7C, 0x7D, 0x74};
    static const uint16_t wfast[3][3] = {{0x7, 0x1, 0x9}, {0x7, 0x1, 0x9}, {0x7, 0x1, 0x9}};
    static const uint16_t wexact[3][3] = {{0x7, 0x0, 0x8}, {0x7, 0x0, 0x8}, {0x7, 0x2, 0xA}};
    int bad = 0;
    for (int v = 0; v < 3; v++) {
        /* the global scale lowp derives from the tensor amax */
        static const lowp_recipe rs[2] = {LOWP_RECIPE_TRTLLM, LOWP_RECIPE_EXACT};
        for (int j = 0; j < 2; j++) {
            lowp_global_scale gs = lowp_recipe_global_scale(LOWP_NVFP4, rs[j], f32(gamax[v]));
            if (bits32(gs.enc) != S[v] || bits32(gs.dec) != g[v]) {
                fprintf(stderr,
                        "lowp_recipe_global_scale(nvfp4, %s, 0x%08x): got enc 0x%08x dec 0x%08x "
                        "expected enc 0x%08x dec 0x%08x\n",
                        lowp_recipe_name(rs[j]), (unsigned)gamax[v], (unsigned)bits32(gs.enc),
                        (unsigned)bits32(gs.dec), (unsigned)S[v], (unsigned)g[v]);
                bad++;
            }
        }
        const float x[3] = {f32(bamax[v]), f32(xe[v]), -f32(xe[v])};
        lowp_global_scale gs = {f32(g[v]), f32(S[v])};
        size_t fl = (wexact[v][1] == 0x0) ? 2 : 0;
        /* vector 2's block amax lands above 6: 0x44152797*0x3C28A0DC = 6.1406 (trtllm) and
         * *0x3C28A0DB = 6.1406 (exact) -> 0x7, saturated */
        size_t sat = v == 1 ? 1 : 0;
        qcase c[2] = {
            {"ref/notes/formats.md 5.8", LOWP_NVFP4, LOWP_RECIPE_TRTLLM, gs, 0, x, 3, wfast[v], 0x0,
             scale[v], -1,
             COUNTS(.elements = 16, .blocks = 1, .nan_in = 0, .inf_in = 0, .saturated = sat,
                    .flushed = 0, .nan_out = 0, .scale_zero = 0, .scale_subnormal = 0,
                    .scale_nan = 0)},
            {"ref/notes/formats.md 5.8", LOWP_NVFP4, LOWP_RECIPE_EXACT, gs, 0, x, 3, wexact[v], 0x0,
             scale[v], -1,
             COUNTS(.elements = 16, .blocks = 1, .nan_in = 0, .inf_in = 0, .saturated = sat,
                    .flushed = fl, .nan_out = 0, .scale_zero = 0, .scale_subnormal = 0,
                    .scale_nan = 0)},
        };
        bad += run_case(&c[0]) + run_case(&c[1]);
    }
    ck_assert_msg(bad == 0, "%d mismatches (see stderr)", bad);
}
END_TEST

START_TEST(test_rcp_approx_ftz_anchors)
{
    /* ref/notes/formats.md §5.7: rcp.approx.ftz(6), (448), (2688) equal RN; the §5.8 steps above need
     * rcp~(0x40CA5874) = 0x3E21F0DA (= RN), rcp~(0x4094F055) = 0x3E5C0285 (RN 0x3E5C0284 plus
     * one ulp), rcp~(0x4272E947) = 0x3C86E5A3 (RN 0x3C86E5A2 plus one), rcp~(0x42C25222) =
     * 0x3C28A0DC (RN 0x3C28A0DB plus one). recipes.md: a
     * subnormal input flushes to +-0 (result +-Inf), a subnormal result flushes to +-0. */
    static const uint32_t in[] = {0x40C00000u, 0x43E00000u, 0x45280000u, 0x40CA5874u,
                                  0x4094F055u, 0x4272E947u, 0x42C25222u, 0x3F800000u,
                                  0x00400000u, 0x80000001u, 0x00000000u, 0x7F000000u,
                                  0x7F800000u};
    static const uint32_t out[] = {0x3E2AAAABu, 0x3B124925u, 0x39C30C31u, 0x3E21F0DAu,
                                   0x3E5C0285u, 0x3C86E5A3u, 0x3C28A0DCu, 0x3F800000u,
                                   0x7F800000u, 0xFF800000u, 0x7F800000u, 0x00000000u,
                                   0x00000000u};
    int bad = 0;
    for (size_t i = 0; i < N_ELEMS(in); i++) {
        float r = lowp_rcp_approx_ftz(f32(in[i]));
        if (bits32(r) != out[i]) {
            fprintf(stderr, "rcp~: input 0x%08x got 0x%08x expected 0x%08x\n", (unsigned)in[i],
                    (unsigned)bits32(r), (unsigned)out[i]);
            bad++;
        }
    }
    ck_assert_msg(bad == 0, "%d mismatches (see stderr)", bad);
}
END_TEST

/* ---------------------------------------------------------------------------------- */
/* NVFP4: global scale from a tensor amax, and what amax 0 / Inf lead to                */

static int expect_gs(const char *what, lowp_block_format f, lowp_recipe r, float amax,
                     uint32_t want_dec, int check_enc, uint32_t want_enc)
{
    lowp_global_scale gs = lowp_recipe_global_scale(f, r, amax);
    int ok = bits32(gs.dec) == want_dec && (!check_enc || bits32(gs.enc) == want_enc);
    if (!ok) {
        fprintf(stderr,
                "lowp_recipe_global_scale(%s, %s, 0x%08x) [%s]: got dec 0x%08x enc 0x%08x "
                "expected dec 0x%08x",
                lowp_block_format_name(f), lowp_recipe_name(r), (unsigned)bits32(amax), what,
                (unsigned)bits32(gs.dec), (unsigned)bits32(gs.enc), (unsigned)want_dec);
        if (check_enc)
            fprintf(stderr, " enc 0x%08x", (unsigned)want_enc);
        fprintf(stderr, "\n");
    }
    return !ok;
}

START_TEST(test_nvfp4_global_scale_from_amax_guards)
{
    int bad = 0;
    /* trtllm: S = 2688/amax, g = 1/S, no guard.
     *   2688 -> S 1, g 1;  448 -> S 6 (0x40C00000), g RN(1/6) = 0x3E2AAAAB;
     *   1 -> S 2688 (0x45280000), g RN(1/2688) = 0x39C30C31;
     *   0 -> S = 2688/0 = +Inf, g = 1/Inf = 0;  Inf -> S = 0, g = 1/0 = +Inf;
     *   FLT_MAX -> S = 0x05280001 (RN of 2688/FLT_MAX), g = 1/S = 0x79C30C30;
     *   2^-149 -> S = 2688*2^149 overflows to +Inf, g = 0. */
    const lowp_recipe T = LOWP_RECIPE_TRTLLM, E = LOWP_RECIPE_EXACT, M = LOWP_RECIPE_MODELOPT;
    bad += expect_gs("2688", LOWP_NVFP4, T, 2688, 0x3F800000u, 1, 0x3F800000u);
    bad += expect_gs("448", LOWP_NVFP4, T, 448, 0x3E2AAAABu, 1, 0x40C00000u);
    bad += expect_gs("1", LOWP_NVFP4, T, 1, 0x39C30C31u, 1, 0x45280000u);
    bad += expect_gs("0", LOWP_NVFP4, T, 0, 0x00000000u, 1, 0x7F800000u);
    bad += expect_gs("Inf", LOWP_NVFP4, T, INFINITY, 0x7F800000u, 1, 0x00000000u);
    bad += expect_gs("FLT_MAX", LOWP_NVFP4, T, FLT_MAX, 0x79C30C30u, 1, 0x05280001u);
    bad += expect_gs("2^-149", LOWP_NVFP4, T, 0x1p-149f, 0x00000000u, 1, 0x7F800000u);
    /* exact (TE): S = min(2688/amax, FLT_MAX); S = 1 when amax is 0 or the quotient is 0;
     * g = (float)(1.0/(double)S).
     *   0 -> 1, 1;  Inf -> 2688/Inf = 0 -> S = 1, g = 1;
     *   2^-149 -> min(Inf, FLT_MAX) = FLT_MAX; g = (float)(1/FLT_MAX) = (float)(2^-128 *
     *   (1 + 2^-24 + ...)) -> 2^-128 = 0x00200000 (subnormal; the excess is far below half
     *   an ulp 2^-150);  448 -> 6, 0x3E2AAAAB;  1 -> 2688, 0x39C30C31;
     *   FLT_MAX -> S 0x05280001, g = (float)(1/(double)S) = 0x79C30C30. */
    bad += expect_gs("2688", LOWP_NVFP4, E, 2688, 0x3F800000u, 1, 0x3F800000u);
    bad += expect_gs("448", LOWP_NVFP4, E, 448, 0x3E2AAAABu, 1, 0x40C00000u);
    bad += expect_gs("1", LOWP_NVFP4, E, 1, 0x39C30C31u, 1, 0x45280000u);
    bad += expect_gs("0 (guard)", LOWP_NVFP4, E, 0, 0x3F800000u, 1, 0x3F800000u);
    bad += expect_gs("Inf (guard)", LOWP_NVFP4, E, INFINITY, 0x3F800000u, 1, 0x3F800000u);
    bad += expect_gs("2^-149 (FLT_MAX clamp)", LOWP_NVFP4, E, 0x1p-149f, 0x00200000u, 1,
                     0x7F7FFFFFu);
    bad += expect_gs("FLT_MAX", LOWP_NVFP4, E, FLT_MAX, 0x79C30C30u, 1, 0x05280001u);
    /* amax NaN: 2688/NaN = NaN; recipes.md's min(., FLT_MAX) read as TE's fminf, which
     * returns the non-NaN operand: S = FLT_MAX (neither guard fires), g = 2^-128. */
    bad += expect_gs("NaN (fminf)", LOWP_NVFP4, E, qnan(), 0x00200000u, 1, 0x7F7FFFFFu);
    /* modelopt: g = amax/2688: 2688 -> 1; 448 -> RN(1/6) = 0x3E2AAAAB; 1 -> 0x39C30C31;
     * 0 -> 0; Inf -> Inf; FLT_MAX -> 0x79C30C30; 2^-149 -> 0 (underflow). */
    bad += expect_gs("2688", LOWP_NVFP4, M, 2688, 0x3F800000u, 0, 0);
    bad += expect_gs("448", LOWP_NVFP4, M, 448, 0x3E2AAAABu, 0, 0);
    bad += expect_gs("1", LOWP_NVFP4, M, 1, 0x39C30C31u, 0, 0);
    bad += expect_gs("0", LOWP_NVFP4, M, 0, 0x00000000u, 0, 0);
    bad += expect_gs("Inf", LOWP_NVFP4, M, INFINITY, 0x7F800000u, 0, 0);
    bad += expect_gs("FLT_MAX", LOWP_NVFP4, M, FLT_MAX, 0x79C30C30u, 0, 0);
    bad += expect_gs("2^-149", LOWP_NVFP4, M, 0x1p-149f, 0x00000000u, 0, 0);
    /* sglang-kv: g = 1 whatever the amax (uncalibrated, as SGLang ships it) */
    bad += expect_gs("0", LOWP_NVFP4, LOWP_RECIPE_SGLANG_KV, 0, 0x3F800000u, 0, 0);
    bad += expect_gs("Inf", LOWP_NVFP4, LOWP_RECIPE_SGLANG_KV, INFINITY, 0x3F800000u, 0, 0);
    bad += expect_gs("NaN", LOWP_NVFP4, LOWP_RECIPE_SGLANG_KV, qnan(), 0x3F800000u, 0, 0);
    bad += expect_gs("1000", LOWP_NVFP4, LOWP_RECIPE_SGLANG_KV, 1000, 0x3F800000u, 0, 0);
    /* MX and BF16: {1, 1} */
    bad += expect_gs("mx", LOWP_MXFP4, LOWP_RECIPE_OCP, 5, 0x3F800000u, 1, 0x3F800000u);
    bad += expect_gs("mx", LOWP_MXFP8, LOWP_RECIPE_RCEIL, 0, 0x3F800000u, 1, 0x3F800000u);
    bad += expect_gs("mx", LOWP_MXFP4, LOWP_RECIPE_TRTLLM, INFINITY, 0x3F800000u, 1,
                     0x3F800000u);
    bad += expect_gs("bf16", LOWP_BF16_PASS, LOWP_RECIPE_EXACT, 7, 0x3F800000u, 1, 0x3F800000u);
    ck_assert_msg(bad == 0, "%d mismatches (see stderr)", bad);
}
END_TEST

START_TEST(test_nvfp4_global_scale_from_dec)
{
    /* trtllm/exact: enc = 1/dec (RN): 0.5 -> 2; 3 -> RN(1/3) = 0x3EAAAAAB; 1 -> 1.
     * modelopt / sglang-kv / FP8 keep dec as given. */
    int bad = 0;
    static const struct {
        lowp_block_format f;
        lowp_recipe r;
        float dec;
        uint32_t want_dec;
        int check_enc;
        uint32_t want_enc;
    } t[] = {
        {LOWP_NVFP4, LOWP_RECIPE_TRTLLM, 0.5f, 0x3F000000u, 1, 0x40000000u},
        {LOWP_NVFP4, LOWP_RECIPE_TRTLLM, 3.0f, 0x40400000u, 1, 0x3EAAAAABu},
        {LOWP_NVFP4, LOWP_RECIPE_EXACT, 3.0f, 0x40400000u, 1, 0x3EAAAAABu},
        {LOWP_NVFP4, LOWP_RECIPE_EXACT, 1.0f, 0x3F800000u, 1, 0x3F800000u},
        {LOWP_NVFP4, LOWP_RECIPE_MODELOPT, 3.0f, 0x40400000u, 0, 0},
        {LOWP_NVFP4, LOWP_RECIPE_SGLANG_KV, 0.25f, 0x3E800000u, 0, 0},
        {LOWP_FP8_E4M3, LOWP_RECIPE_EXACT, 3.0f, 0x40400000u, 0, 0},
    };
    for (size_t i = 0; i < N_ELEMS(t); i++) {
        lowp_global_scale gs = lowp_global_scale_from_dec(t[i].f, t[i].r, t[i].dec);
        int enc_bad = t[i].check_enc && bits32(gs.enc) != t[i].want_enc;
        if (bits32(gs.dec) != t[i].want_dec || enc_bad) {
            fprintf(stderr,
                    "lowp_global_scale_from_dec(%s, %s, %a): got dec 0x%08x enc 0x%08x expected "
                    "dec 0x%08x enc 0x%08x\n",
                    lowp_block_format_name(t[i].f), lowp_recipe_name(t[i].r), (double)t[i].dec,
                    (unsigned)bits32(gs.dec), (unsigned)bits32(gs.enc), (unsigned)t[i].want_dec,
                    (unsigned)t[i].want_enc);
            bad++;
        }
    }
    ck_assert_msg(bad == 0, "%d mismatches (see stderr)", bad);
}
END_TEST

START_TEST(test_nvfp4_trtllm_global_amax_zero_or_inf_consequences)
{
    /* trtllm has no guard, so a tensor amax of 0 gives S = +Inf (g = 0) and Inf gives S = 0.
     * S = Inf, all-zero block: sf = Inf*(0*rcp~(6)) = Inf*0 = NaN -> e4m3 0x7F (NaN scale,
     *   either NaN sign); o = 0 (m == 0); x*0: 0 -> 0x0, -0 -> 0x8. The NaN scale makes all 16
     *   elements decode to NaN.
     * S = 0, block {Inf, 1, -2}: sf = 0*(Inf*rcp~(6)) = NaN -> 0x7F; o = rcp~(NaN*rcp~(0)) =
     *   NaN; x*NaN = NaN -> 0x7 for all 16.
     * S = 0, finite block {3, 1, -2}: sf = 0*(3*rcp~(6)) = 0 -> 0x00; o = rcp~(0*rcp~(0)) =
     *   rcp~(0*Inf) = rcp~(NaN) = NaN -> every element 0x7. (nan_out not checked: the block
     *   scale is 0, yet g = 1/S = Inf.) */
    float z[16];
    uint16_t wz[16];
    for (int i = 0; i < 16; i++) {
        z[i] = (i & 1) ? -0.0f : 0.0f;
        wz[i] = (i & 1) ? 0x8 : 0x0;
    }
    const float a[] = {INFINITY, 1, -2};
    const float b[] = {3, 1, -2};
    static const uint16_t w7[] = {0x7, 0x7, 0x7};
    lowp_global_scale s_inf = {0.0f, INFINITY}, s_zero = {INFINITY, 0.0f};
    qcase c[] = {
        {"gamax 0: S=Inf, zero block", LOWP_NVFP4, LOWP_RECIPE_TRTLLM, s_inf, 0, NX(z), wz, 0x0,
         0x7F, 0xFF,
         COUNTS(.elements = 16, .blocks = 1, .nan_in = 0, .inf_in = 0, .saturated = 0,
                .flushed = 0, .nan_out = 16, .scale_zero = 0, .scale_subnormal = 0,
                .scale_nan = 1)},
        {"gamax Inf: S=0, Inf block", LOWP_NVFP4, LOWP_RECIPE_TRTLLM, s_zero, 0, NX(a), w7, 0x7,
         0x7F, 0xFF,
         COUNTS(.elements = 16, .blocks = 1, .nan_in = 0, .inf_in = 1, .saturated = ANY,
                .flushed = 0, .nan_out = 16, .scale_zero = 0, .scale_subnormal = 0,
                .scale_nan = 1)},
        {"gamax Inf: S=0, finite block", LOWP_NVFP4, LOWP_RECIPE_TRTLLM, s_zero, 0, NX(b), w7,
         0x7, 0x00, -1,
         COUNTS(.elements = 16, .blocks = 1, .nan_in = 0, .inf_in = 0, .saturated = ANY,
                .flushed = 0, .nan_out = ANY, .scale_zero = 1, .scale_subnormal = 0,
                .scale_nan = 0)},
    };
    RUN_CASES(c);
    /* and the global scale the recipe derives for those amaxes is exactly that */
    lowp_global_scale g0 = lowp_recipe_global_scale(LOWP_NVFP4, LOWP_RECIPE_TRTLLM, 0.0f);
    ck_assert_msg(isinf(g0.enc) && g0.enc > 0 && g0.dec == 0.0f,
                  "trtllm amax 0: got enc %a dec %a, expected +Inf, 0", (double)g0.enc,
                  (double)g0.dec);
    /* exact guards the same amaxes to S = 1, so the zero block is an ordinary one */
    lowp_global_scale e0 = lowp_recipe_global_scale(LOWP_NVFP4, LOWP_RECIPE_EXACT, 0.0f);
    qcase d[] = {
        {"gamax 0 guarded: S=1, zero block", LOWP_NVFP4, LOWP_RECIPE_EXACT, e0, 0, NX(z), wz,
         0x0, 0x00, -1,
         COUNTS(.elements = 16, .blocks = 1, .nan_in = 0, .inf_in = 0, .saturated = 0,
                .flushed = 0, .nan_out = 0, .scale_zero = 1, .scale_subnormal = 0,
                .scale_nan = 0)},
    };
    RUN_CASES(d);
}
END_TEST

START_TEST(test_nvfp4_modelopt_global_amax_zero_or_inf_consequences)
{
    /* modelopt g = amax/2688: amax 0 -> g = 0, amax Inf -> g = Inf.
     * g = 0, all-zero block: s = 0/(6*0) = 0/0 = NaN (not == 0, survives the clamp) ->
     *   e4m3_torch(NaN) = 0x7F | sign of that NaN (recipes.md does not fix the sign of a NaN
     *   made by 0/0: 0xFFC00000 on x86, 0x7FFFFFFF on a GPU; either is accepted);
     *   d = NaN; x/d = NaN -> 0x7.
     * g = 0, block {3, -1, 0}: s = 3/0 = +Inf, clamped to 448 -> 0x7E; d = 448 * 0 = 0;
     *   3/0 = Inf -> 0x7, -1/0 = -Inf -> 0xF (both saturated, and flushed: they decode to
     *   6 * 448 * 0 = 0), 0/0 = NaN -> 0x7 (the padding too).
     * g = Inf, block {3, -1, 0, -0}: s = 3/Inf = 0 -> 1 -> 0x38; d = 1*Inf = Inf; x/Inf = +-0
     *   -> 0x0: ModelOpt's _cast_fp4 takes the sign from (scaled_weight < 0), and -1/Inf = -0
     *   is not < 0. (flushed not checked: the codes are zero, but 0 * 1 * g = 0 * Inf is NaN.)
     * The sign rule also fixes the NaN-scale rows: x/NaN = NaN is not < 0, so -1 -> 0x7. */
    float z[16];
    for (int i = 0; i < 16; i++)
        z[i] = (i & 1) ? -0.0f : 0.0f;
    static const uint16_t w7[16] = {7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7};
    const float a[] = {3, -1, 0};
    static const uint16_t w7f[] = {0x7, 0xF, 0x7};
    const float b[] = {3, -1, 0, -0.0f};
    static const uint16_t w0[] = {0x0, 0x0, 0x0, 0x0};
    lowp_global_scale g0 = {0.0f, INFINITY}, ginf = {INFINITY, 0.0f};
    qcase c[] = {
        {"g=0, zero block", LOWP_NVFP4, LOWP_RECIPE_MODELOPT, g0, 0, NX(z), w7, 0x7, 0x7F, 0xFF,
         COUNTS(.elements = 16, .blocks = 1, .nan_in = 0, .inf_in = 0, .saturated = 0,
                .flushed = 0, .nan_out = 16, .scale_zero = 0, .scale_subnormal = 0,
                .scale_nan = 1)},
        {"g=0, nonzero block", LOWP_NVFP4, LOWP_RECIPE_MODELOPT, g0, 0, NX(a), w7f, 0x7, 0x7E, -1,
         COUNTS(.elements = 16, .blocks = 1, .nan_in = 0, .inf_in = 0, .saturated = 2,
                .flushed = 2, .nan_out = 0, .scale_zero = 0, .scale_subnormal = 0,
                .scale_nan = 0)},
        {"g=Inf", LOWP_NVFP4, LOWP_RECIPE_MODELOPT, ginf, 0, NX(b), w0, 0x0, 0x38, -1,
         COUNTS(.elements = 16, .blocks = 1, .nan_in = 0, .inf_in = 0, .saturated = 0,
                .flushed = ANY, .nan_out = ANY, .scale_zero = 0, .scale_subnormal = 0,
                .scale_nan = 0)},
    };
    RUN_CASES(c);
}
END_TEST

/* ---------------------------------------------------------------------------------- */
/* NVFP4: LOWP_BLOCK_SCALE_UP                                                           */

START_TEST(test_nvfp4_scale_up_flag_exact_and_modelopt)
{
    /* Block {6.0625, 2.8125, -2.25, 0.5, 0 x12}, S = 1 / g = 1.
     * exact, RN:   sf = 6.0625*RN(1/6) = 0x3F815556 = 1.0104 -> e4m3 RN 1.0 (0x38); o = 1;
     *              6.0625 -> 0x7 (saturated: 6.0625 > 6); 2.8125 -> 3 (0x5); -2.25 -> -2
     *              (0xC); 0.5 -> 0x1.
     * exact, UP:   e4m3 up of 1.0104 = 1.125 (0x39); o = min(1/(1.125*1), FLT_MAX) =
     *              RN(8/9) = 0x3F638E39; 6.0625*o = 5.3889 -> 0x7 (no saturation);
     *              2.8125*o = 2.5 exactly (RN) -> tie -> 2 (0x4); -2.25*o = -2 -> 0xC;
     *              0.5*o = 0.444 -> 0x1.
     * modelopt, RN: s = 6.0625/6 = 0x3F815555 -> 0x38; d = 1; codes as exact RN.
     * modelopt, UP: 0x39; d = 1.125; 6.0625/1.125 = 5.39 -> 0x7; 2.8125/1.125 = 2.5 -> 0x4;
     *              -2.25/1.125 = -2 -> 0xC; 0.5/1.125 -> 0x1.
     * The flag keeps an exact scale (amax 6: sf = 1.0 -> 0x38) and saturates Inf to 0x7E
     * (sf = Inf, "rounded up, satfinite"). */
    const float x[] = {6.0625f, 2.8125f, -2.25f, 0.5f};
    static const uint16_t wrn[] = {0x7, 0x5, 0xC, 0x1};
    static const uint16_t wup[] = {0x7, 0x4, 0xC, 0x1};
    lowp_quant_counts krn = COUNTS(.elements = 16, .blocks = 1, .nan_in = 0, .inf_in = 0,
                                   .saturated = 1, .flushed = 0, .nan_out = 0, .scale_zero = 0,
                                   .scale_subnormal = 0, .scale_nan = 0);
    lowp_quant_counts kup = COUNTS(.elements = 16, .blocks = 1, .nan_in = 0, .inf_in = 0,
                                   .saturated = 0, .flushed = 0, .nan_out = 0, .scale_zero = 0,
                                   .scale_subnormal = 0, .scale_nan = 0);
    const float e6[] = {6, 4.5f};
    static const uint16_t we6[] = {0x7, 0x6};
    const float inf[] = {INFINITY, 4.5f};
    static const uint16_t winf[] = {0x7, 0x0}; /* 4.5*RN(1/448) = 0.01 -> 0x0 */
    const unsigned UP = LOWP_BLOCK_SCALE_UP;
    qcase c[] = {
        {"rn", LOWP_NVFP4, LOWP_RECIPE_EXACT, gs_enc(1), 0, NX(x), wrn, 0, 0x38, -1, krn},
        {"up", LOWP_NVFP4, LOWP_RECIPE_EXACT, gs_enc(1), UP, NX(x), wup, 0, 0x39, -1, kup},
        {"rn", LOWP_NVFP4, LOWP_RECIPE_MODELOPT, gs_dec(1), 0, NX(x), wrn, 0, 0x38, -1, krn},
        {"up", LOWP_NVFP4, LOWP_RECIPE_MODELOPT, gs_dec(1), UP, NX(x), wup, 0, 0x39, -1, kup},
        {"up, exact scale", LOWP_NVFP4, LOWP_RECIPE_EXACT, gs_enc(1), UP, NX(e6), we6, 0, 0x38,
         -1, COUNTS_ANY},
        {"up, exact scale", LOWP_NVFP4, LOWP_RECIPE_MODELOPT, gs_dec(1), UP, NX(e6), we6, 0,
         0x38, -1, COUNTS_ANY},
        {"up, Inf satfinite", LOWP_NVFP4, LOWP_RECIPE_EXACT, gs_enc(1), UP, NX(inf), winf, 0,
         0x7E, -1, COUNTS_ANY},
    };
    RUN_CASES(c);
}
END_TEST

/* ---------------------------------------------------------------------------------- */
/* MX: OCP floor vs RCEIL (ref/notes/formats.md §4.4) and TRT-LLM                       */

START_TEST(test_mxfp4_ocp_floor_vs_rceil_table_4_4)
{
    /* One 32-element block {amax, ...}, zeros after.
     * OCP:   e = floor(log2 amax) - 2 from the exponent bits; q = e + 127; x / 2^e.
     * RCEIL: q = e8m0_up(amax*RN(1/6)); x / val(q).  trtllm: q = e8m0_up(amax*rcp~(6)) (same,
     *        rcp~(6) = RN(1/6)); o = 2^(127-q).
     * amax 3:   OCP e = 1-2 = -1 -> 0x7E; RCEIL 3*RN(1/6) = 0.5(1+2^-25) -> RN 0.5 -> up 0.5 ->
     *           0x7E. Both X = 0.5: {3, -1.5, 0.75} -> {6, -3, 1.5} -> 0x7, 0xD, 0x3.
     * amax 6:   OCP e = 0 -> 0x7F; RCEIL 6*RN(1/6) -> 1.0 -> 0x7F. {6, -1.25} -> 0x7, 0xA (tie).
     * amax 6.5: OCP 0x7F, X = 1: {6.5, -1.25, 0.5} -> 0x7 (clamped, saturated), 0xA, 0x1.
     *           RCEIL 6.5*RN(1/6) = 0x3F8AAAAB -> up 2 -> 0x80; /2: 3.25 -> 3 (0x5),
     *           -0.625 -> -0.5 (0x9), 0.25 -> tie -> 0 (0x0, flushed).
     * amax 7:   OCP 0x7F: {7, -1.25, 2.5} -> 0x7 (saturated), 0xA, 0x4 (2.5 tie -> 2).
     *           RCEIL 7*RN(1/6) = 0x3F955556 -> 0x80; /2: 3.5 -> tie -> 4 (0x6), -0.625 ->
     *           0x9, 1.25 -> tie -> 1 (0x2). */
    const float a3[] = {3, -1.5f, 0.75f}, a6[] = {6, -1.25f}, a65[] = {6.5f, -1.25f, 0.5f},
                a7[] = {7, -1.25f, 2.5f};
    static const uint16_t w3[] = {0x7, 0xD, 0x3}, w6[] = {0x7, 0xA},
                          w65o[] = {0x7, 0xA, 0x1}, w65r[] = {0x5, 0x9, 0x0},
                          w7o[] = {0x7, 0xA, 0x4}, w7r[] = {0x6, 0x9, 0x2};
    lowp_quant_counts k0 = COUNTS(.elements = 32, .blocks = 1, .nan_in = 0, .inf_in = 0,
                                  .saturated = 0, .flushed = 0, .nan_out = 0, .scale_zero = 0,
                                  .scale_subnormal = 0, .scale_nan = 0);
    lowp_quant_counts ksat = k0, kfl = k0;
    ksat.saturated = 1;
    kfl.flushed = 1;
    const lowp_recipe O = LOWP_RECIPE_OCP, R = LOWP_RECIPE_RCEIL, T = LOWP_RECIPE_TRTLLM;
    qcase c[] = {
        {"amax 3", LOWP_MXFP4, O, GS_ONE, 0, NX(a3), w3, 0, 0x7E, -1, k0},
        {"amax 3", LOWP_MXFP4, R, GS_ONE, 0, NX(a3), w3, 0, 0x7E, -1, k0},
        {"amax 3", LOWP_MXFP4, T, GS_ONE, 0, NX(a3), w3, 0, 0x7E, -1, k0},
        {"amax 6", LOWP_MXFP4, O, GS_ONE, 0, NX(a6), w6, 0, 0x7F, -1, k0},
        {"amax 6", LOWP_MXFP4, R, GS_ONE, 0, NX(a6), w6, 0, 0x7F, -1, k0},
        {"amax 6", LOWP_MXFP4, T, GS_ONE, 0, NX(a6), w6, 0, 0x7F, -1, k0},
        {"amax 6.5", LOWP_MXFP4, O, GS_ONE, 0, NX(a65), w65o, 0, 0x7F, -1, ksat},
        {"amax 6.5", LOWP_MXFP4, R, GS_ONE, 0, NX(a65), w65r, 0, 0x80, -1, kfl},
        {"amax 6.5", LOWP_MXFP4, T, GS_ONE, 0, NX(a65), w65r, 0, 0x80, -1, kfl},
        {"amax 7", LOWP_MXFP4, O, GS_ONE, 0, NX(a7), w7o, 0, 0x7F, -1, ksat},
        {"amax 7", LOWP_MXFP4, R, GS_ONE, 0, NX(a7), w7r, 0, 0x80, -1, k0},
        {"amax 7", LOWP_MXFP4, T, GS_ONE, 0, NX(a7), w7r, 0, 0x80, -1, k0},
    };
    RUN_CASES(c);
}
END_TEST

START_TEST(test_mxfp8_ocp_vs_rceil_amax_448_480_500)
{
    /* E4M3 elements, emax 8, max 448; RN(1/448) = rcp~(448) = 0x3B124925.
     * amax 448: OCP e = 8-8 = 0 -> 0x7F; RCEIL 448*RN(1/448) = 7*RN(1/7) = 1.0000000447 ->
     *   RN 1.0 -> up 1 -> 0x7F. {448, -1, 0.5} -> 0x7E, 0xB8, 0x30 everywhere.
     * amax 480: OCP 0x7F, 480 -> satfinite 448 (0x7E, saturated). RCEIL 480*RN(1/448) =
     *   0x3F892493 -> up 2 -> 0x80; 240 -> 0x77, -0.5 -> 0xB0, 0.25 -> 0x28.
     * amax 500 with 300: OCP 0x7F: 500 -> 0x7E (saturated), 300 -> 288 (0x79).
     *   RCEIL 0x3F8EDB6E -> 0x80: 250 -> 256 (0x78), 150 -> 144 (0x71).
     * trtllm: q = e8m0_up(m*rcp~(448)) as RCEIL; o = rcp~(val(q)) = 1 or 0.5; same codes. */
    const float a448[] = {448, -1, 0.5f}, a480[] = {480, -1, 0.5f},
                a500[] = {500, -1, 0.5f, 300};
    static const uint16_t w448[] = {0x7E, 0xB8, 0x30}, w480o[] = {0x7E, 0xB8, 0x30},
                          w480r[] = {0x77, 0xB0, 0x28}, w500o[] = {0x7E, 0xB8, 0x30, 0x79},
                          w500r[] = {0x78, 0xB0, 0x28, 0x71};
    lowp_quant_counts k0 = COUNTS(.elements = 32, .blocks = 1, .nan_in = 0, .inf_in = 0,
                                  .saturated = 0, .flushed = 0, .nan_out = 0, .scale_zero = 0,
                                  .scale_subnormal = 0, .scale_nan = 0);
    lowp_quant_counts ksat = k0;
    ksat.saturated = 1;
    const lowp_recipe O = LOWP_RECIPE_OCP, R = LOWP_RECIPE_RCEIL, T = LOWP_RECIPE_TRTLLM;
    qcase c[] = {
        {"amax 448", LOWP_MXFP8, O, GS_ONE, 0, NX(a448), w448, 0, 0x7F, -1, k0},
        {"amax 448", LOWP_MXFP8, R, GS_ONE, 0, NX(a448), w448, 0, 0x7F, -1, k0},
        {"amax 448", LOWP_MXFP8, T, GS_ONE, 0, NX(a448), w448, 0, 0x7F, -1, k0},
        {"amax 480", LOWP_MXFP8, O, GS_ONE, 0, NX(a480), w480o, 0, 0x7F, -1, ksat},
        {"amax 480", LOWP_MXFP8, R, GS_ONE, 0, NX(a480), w480r, 0, 0x80, -1, k0},
        {"amax 480", LOWP_MXFP8, T, GS_ONE, 0, NX(a480), w480r, 0, 0x80, -1, k0},
        {"amax 500", LOWP_MXFP8, O, GS_ONE, 0, NX(a500), w500o, 0, 0x7F, -1, ksat},
        {"amax 500", LOWP_MXFP8, R, GS_ONE, 0, NX(a500), w500r, 0, 0x80, -1, k0},
        {"amax 500", LOWP_MXFP8, T, GS_ONE, 0, NX(a500), w500r, 0, 0x80, -1, k0},
    };
    RUN_CASES(c);
}
END_TEST

START_TEST(test_mx_ocp_amax_prevfloat_pow2_exact_exponent)
{
    /* floor(log2 m) from the exponent bits: for m = prevfloat(2^k) it is k-1 (an fp32 log2f
     * would round up to k, ref/notes/formats.md §4.1).
     * MXFP4 m = 0x40FFFFFF (7.9999995): e = 2-2 = 0 -> 0x7F (not 0x80);
     *   {m, 1} -> 0x7 (saturated), 0x2.  RCEIL: m*RN(1/6) = 0x3FAAAAAA -> up 2 -> 0x80;
     *   {3.9999998 -> 0x6, 0.5 -> 0x1}.
     * MXFP4 m = 0x3E7FFFFF (prevfloat 0.25): e = -3-2 = -5 -> 0x7A; {m, 0.0625} -> m*32 =
     *   7.9999995 -> 0x7 (saturated), 2 -> 0x4.  RCEIL: 0x3D2AAAAA -> up 2^-4 -> 0x7B;
     *   {3.9999998 -> 0x6, 1 -> 0x2}.
     * MXFP8 m = 0x447FFFFF (prevfloat 1024): e = 9-8 = 1 -> 0x80; {m, 1} -> 511.99997 ->
     *   0x7E (saturated), 0.5 -> 0x30.  RCEIL: 0x40124924 -> up 4 -> 0x81; {256 -> 0x78,
     *   0.25 -> 0x28}.
     * MXFP8 m = 0x0D7FFFFF (prevfloat 2^-100): e = -101-8 = -109 -> 18 = 0x12;
     *   {m, 2^-101} -> 0x7E (saturated), 256 -> 0x78. */
    const float p8[] = {f32(0x40FFFFFFu), 1}, pq[] = {f32(0x3E7FFFFFu), 0.0625f},
                p1024[] = {f32(0x447FFFFFu), 1}, pm100[] = {f32(0x0D7FFFFFu), 0x1p-101f};
    static const uint16_t w8o[] = {0x7, 0x2}, w8r[] = {0x6, 0x1}, wqo[] = {0x7, 0x4},
                          wqr[] = {0x6, 0x2}, w1024o[] = {0x7E, 0x30}, w1024r[] = {0x78, 0x28},
                          wm100o[] = {0x7E, 0x78};
    const lowp_quant_counts s4 = COUNTS(.elements = 32, .blocks = 1, .nan_in = 0, .inf_in = 0,
                                        .saturated = 1, .flushed = 0, .nan_out = 0,
                                        .scale_zero = 0, .scale_subnormal = 0, .scale_nan = 0);
    lowp_quant_counts n4 = s4;
    n4.saturated = 0;
    qcase c[] = {
        {"prevfloat 8", LOWP_MXFP4, LOWP_RECIPE_OCP, GS_ONE, 0, NX(p8), w8o, 0, 0x7F, -1, s4},
        {"prevfloat 8", LOWP_MXFP4, LOWP_RECIPE_RCEIL, GS_ONE, 0, NX(p8), w8r, 0, 0x80, -1, n4},
        {"prevfloat 0.25", LOWP_MXFP4, LOWP_RECIPE_OCP, GS_ONE, 0, NX(pq), wqo, 0, 0x7A, -1,
         s4},
        {"prevfloat 0.25", LOWP_MXFP4, LOWP_RECIPE_RCEIL, GS_ONE, 0, NX(pq), wqr, 0, 0x7B, -1,
         n4},
        {"prevfloat 1024", LOWP_MXFP8, LOWP_RECIPE_OCP, GS_ONE, 0, NX(p1024), w1024o, 0, 0x80,
         -1, s4},
        {"prevfloat 1024", LOWP_MXFP8, LOWP_RECIPE_RCEIL, GS_ONE, 0, NX(p1024), w1024r, 0, 0x81,
         -1, n4},
        {"prevfloat 2^-100", LOWP_MXFP8, LOWP_RECIPE_OCP, GS_ONE, 0, NX(pm100), wm100o, 0, 0x12,
         -1, s4},
    };
    RUN_CASES(c);
}
END_TEST

START_TEST(test_mx_scale_exponent_top_flt_max)
{
    /* The largest finite amax. OCP: floor(log2 FLT_MAX) = 127; MXFP4 e = 125 -> 0xFC,
     * MXFP8 e = 119 -> 0xF6: a finite binary32 amax never gives e > 127 (only Inf/NaN reach
     * 0xFF).
     * MXFP4 {FLT_MAX, -2^126, 2^125}: OCP /2^125 -> 7.9999995 (0x7, saturated), -2 (0xC),
     *   1 (0x2). RCEIL: FLT_MAX*RN(1/6) = 0x7E2AAAAA -> up 2^126 -> 0xFD; /2^126 -> 3.9999998
     *   (0x6), -1 (0xA), 0.5 (0x1). trtllm: q 0xFD, o = 2^(127-253) = 2^-126, same codes.
     * MXFP8 {FLT_MAX, -2^126, 2^118}: OCP 0xF6: 511.99997 -> 0x7E (saturated), -128 ->
     *   0xF0, 0.5 -> 0x30. RCEIL: FLT_MAX*RN(1/448) = 0x7B124924 -> up 2^120 -> 0xF7;
     *   255.99998 -> 256 (0x78), -64 (0xE8), 0.25 (0x28). trtllm: o = rcp~(2^120) = 2^-120;
     *   same codes. */
    const float m4[] = {FLT_MAX, -0x1p126f, 0x1p125f};
    const float m8[] = {FLT_MAX, -0x1p126f, 0x1p118f};
    static const uint16_t w4o[] = {0x7, 0xC, 0x2}, w4r[] = {0x6, 0xA, 0x1},
                          w8o[] = {0x7E, 0xF0, 0x30}, w8r[] = {0x78, 0xE8, 0x28};
    const lowp_quant_counts s = COUNTS(.elements = 32, .blocks = 1, .nan_in = 0, .inf_in = 0,
                                       .saturated = 1, .flushed = 0, .nan_out = 0,
                                       .scale_zero = 0, .scale_subnormal = 0, .scale_nan = 0);
    lowp_quant_counts n = s;
    n.saturated = 0;
    qcase c[] = {
        {"FLT_MAX", LOWP_MXFP4, LOWP_RECIPE_OCP, GS_ONE, 0, NX(m4), w4o, 0, 0xFC, -1, s},
        {"FLT_MAX", LOWP_MXFP4, LOWP_RECIPE_RCEIL, GS_ONE, 0, NX(m4), w4r, 0, 0xFD, -1, n},
        {"FLT_MAX", LOWP_MXFP4, LOWP_RECIPE_TRTLLM, GS_ONE, 0, NX(m4), w4r, 0, 0xFD, -1, n},
        {"FLT_MAX", LOWP_MXFP8, LOWP_RECIPE_OCP, GS_ONE, 0, NX(m8), w8o, 0, 0xF6, -1, s},
        {"FLT_MAX", LOWP_MXFP8, LOWP_RECIPE_RCEIL, GS_ONE, 0, NX(m8), w8r, 0, 0xF7, -1, n},
        {"FLT_MAX", LOWP_MXFP8, LOWP_RECIPE_TRTLLM, GS_ONE, 0, NX(m8), w8r, 0, 0xF7, -1, n},
    };
    RUN_CASES(c);
}
END_TEST

START_TEST(test_mx_scale_exponent_below_m127_clamps)
{
    /* OCP e < -127 -> q = 0x00 (2^-127); the elements are divided by the scale that is
     * stored, 2^-127 (the clamped exponent, as microxcaling and torchao do; recipes.md writes
     * elem(x/2^e), see the report).
     * MXFP4 m = 2^-126: e = -126-2 = -128 -> 0x00. {2^-126, 2^-127, 1.5*2^-127, 2^-130} /
     *   2^-127 -> 2 (0x4), 1 (0x2), 1.5 (0x3), 0.125 (0x0, flushed).
     *   RCEIL: 2^-126*RN(1/6) = 0x00155555 (a subnormal, ~2^-128.6) rounds up to 2^-128,
     *   below 2^-127 -> clipped to 2^-127 = 0x00; same codes.
     * MXFP4 subnormal m = 1.5*2^-127 (counts as exponent -127): e = -129 -> 0x00;
     *   {1.5*2^-127, 2^-130, -2^-149} -> 0x3, 0x0 (flushed), 0x8 (flushed). RCEIL: 0x00100000
     *   -> 0x00; same codes.
     * MXFP8 m = 2^-126: e = -134 -> 0x00; {2^-126, 2^-127, 2^-136} -> 2 (0x40), 1 (0x38),
     *   2^-9 (0x01). RCEIL: 0x00004925 -> 0x00; same.
     * MXFP4 m = 2^-120 (no clamp): e = -122 -> 0x05; {2^-120, 2^-121} -> 4 (0x6), 2 (0x4). */
    const float a[] = {0x1p-126f, 0x1p-127f, 1.5f * 0x1p-127f, 0x1p-130f};
    const float b[] = {1.5f * 0x1p-127f, 0x1p-130f, -0x1p-149f};
    const float d[] = {0x1p-126f, 0x1p-127f, 0x1p-136f};
    const float e[] = {0x1p-120f, 0x1p-121f};
    static const uint16_t wa[] = {0x4, 0x2, 0x3, 0x0}, wb[] = {0x3, 0x0, 0x8},
                          wd[] = {0x40, 0x38, 0x01}, we[] = {0x6, 0x4};
    lowp_quant_counts k0 = COUNTS(.elements = 32, .blocks = 1, .nan_in = 0, .inf_in = 0,
                                  .saturated = 0, .flushed = 0, .nan_out = 0, .scale_zero = 0,
                                  .scale_subnormal = 0, .scale_nan = 0);
    lowp_quant_counts k1 = k0, k2 = k0;
    k1.flushed = 1;
    k2.flushed = 2;
    qcase c[] = {
        {"min normal", LOWP_MXFP4, LOWP_RECIPE_OCP, GS_ONE, 0, NX(a), wa, 0, 0x00, -1, k1},
        {"min normal", LOWP_MXFP4, LOWP_RECIPE_RCEIL, GS_ONE, 0, NX(a), wa, 0, 0x00, -1, k1},
        {"subnormal amax", LOWP_MXFP4, LOWP_RECIPE_OCP, GS_ONE, 0, NX(b), wb, 0, 0x00, -1, k2},
        {"subnormal amax", LOWP_MXFP4, LOWP_RECIPE_RCEIL, GS_ONE, 0, NX(b), wb, 0, 0x00, -1,
         k2},
        {"min normal", LOWP_MXFP8, LOWP_RECIPE_OCP, GS_ONE, 0, NX(d), wd, 0, 0x00, -1, k0},
        {"min normal", LOWP_MXFP8, LOWP_RECIPE_RCEIL, GS_ONE, 0, NX(d), wd, 0, 0x00, -1, k0},
        {"2^-120", LOWP_MXFP4, LOWP_RECIPE_OCP, GS_ONE, 0, NX(e), we, 0, 0x05, -1, k0},
        {"2^-120", LOWP_MXFP4, LOWP_RECIPE_RCEIL, GS_ONE, 0, NX(e), we, 0, 0x05, -1, k0},
    };
    RUN_CASES(c);
}
END_TEST

START_TEST(test_mxfp4_trtllm_exp2f_rcp_quirk_code_0x00_factor_one)
{
    /* trtllm MXFP4: q = e8m0_up(m*rcp~(6)); o = q == 0 ? 1 : 2^(127-q).
     * m = 2^-126: m*rcp~(6) = 0x00155555 -> 0x00 -> o = 1.0 (not 2^127): every element keeps
     * its tiny value and codes to zero: {2^-126, 2^-127, 1.5*2^-127, 2^-130} -> 0x0 x4, all
     * flushed (OCP/RCEIL give 0x4 0x2 0x3 0x0 for the same block).
     * m = 1.5*2^-127: {1.5*2^-127, 2^-130, -2^-149} -> 0x0, 0x0, 0x8 (flushed x3).
     * m = 2^-120: 2^-120*RN(1/6) = 0x022AAAAB -> up 2^-122 -> 0x05 (no quirk): o = 2^122;
     * {2^-120, 2^-121} -> 4 (0x6), 2 (0x4). */
    const float a[] = {0x1p-126f, 0x1p-127f, 1.5f * 0x1p-127f, 0x1p-130f};
    const float b[] = {1.5f * 0x1p-127f, 0x1p-130f, -0x1p-149f};
    const float e[] = {0x1p-120f, 0x1p-121f};
    static const uint16_t wa[] = {0x0, 0x0, 0x0, 0x0}, wb[] = {0x0, 0x0, 0x8},
                          we[] = {0x6, 0x4};
    lowp_quant_counts k = COUNTS(.elements = 32, .blocks = 1, .nan_in = 0, .inf_in = 0,
                                 .saturated = 0, .flushed = 4, .nan_out = 0, .scale_zero = 0,
                                 .scale_subnormal = 0, .scale_nan = 0);
    lowp_quant_counts kb = k, ke = k;
    kb.flushed = 3;
    ke.flushed = 0;
    qcase c[] = {
        {"q 0x00 -> o 1", LOWP_MXFP4, LOWP_RECIPE_TRTLLM, GS_ONE, 0, NX(a), wa, 0, 0x00, -1, k},
        {"q 0x00 -> o 1", LOWP_MXFP4, LOWP_RECIPE_TRTLLM, GS_ONE, 0, NX(b), wb, 0, 0x00, -1, kb},
        {"2^-120", LOWP_MXFP4, LOWP_RECIPE_TRTLLM, GS_ONE, 0, NX(e), we, 0, 0x05, -1, ke},
    };
    RUN_CASES(c);
}
END_TEST

START_TEST(test_mxfp8_trtllm_rcp_ftz_of_scale_2m127_is_inf)
{
    /* trtllm MXFP8: o = rcp~(val(q)). For q = 0x00, val = 2^-127 is a binary32 subnormal,
     * which rcp~ flushes to 0 first: o = rcp~(0) = +Inf.
     * m = 2^-126: m*rcp~(448) = 0x00004925 (subnormal) -> e8m0_up: below 2^-127 -> 0x00;
     * {2^-126, 2^-127, 2^-136} -> x*Inf = Inf -> satfinite 0x7E (3 saturated); the zero pad
     * elements 0*Inf = NaN -> 0x7F (29 elements decode to NaN).
     * At the other end, q = 0xFE (Inf in the block, see the Inf test): rcp~(2^127) = 2^-127
     * is a subnormal result, flushed to 0. */
    const float a[] = {0x1p-126f, 0x1p-127f, 0x1p-136f};
    static const uint16_t w[] = {0x7E, 0x7E, 0x7E};
    qcase c[] = {
        {"q 0x00 -> o Inf", LOWP_MXFP8, LOWP_RECIPE_TRTLLM, GS_ONE, 0, NX(a), w, 0x7F, 0x00, -1,
         COUNTS(.elements = 32, .blocks = 1, .nan_in = 0, .inf_in = 0, .saturated = 3,
                .flushed = 0, .nan_out = 29, .scale_zero = 0, .scale_subnormal = 0,
                .scale_nan = 0)},
    };
    RUN_CASES(c);
}
END_TEST

START_TEST(test_mx_nan_in_block_ocp_rceil_propagate_trtllm_ignores)
{
    /* Block {+qNaN, 2, -1, 0, 0 x28}.
     * OCP: amax_nan = NaN -> q = 0xFF; every element decodes to NaN (codes not checked:
     *   recipes.md leaves e undefined for a NaN amax).
     * RCEIL: NaN*(1/max) = NaN -> e8m0_up 0xFF; x/NaN = NaN -> e2m1 0x7 / e4m3 0x7F, all 32.
     * trtllm: amax_ign = 2.
     *   MXFP4: 2*rcp~(6) = 0x3EAAAAAB -> up 0.5 -> 0x7E; o = 2^(127-126) = 2;
     *     NaN*2 -> 0x7; 4 -> 0x6; -2 -> 0xC; 0 -> 0x0.
     *   MXFP8: 2*rcp~(448) = 0x3B924925 (0.00446) -> up 2^-7 -> 0x78; o = rcp~(2^-7) = 128;
     *     NaN -> 0x7F; 256 -> 0x78; -128 -> 0xF0; 0 -> 0x00. One element decodes to NaN. */
    const float x[] = {qnan(), 2, -1, 0};
    static const uint16_t r4[] = {0x7, 0x7, 0x7, 0x7}, r8[] = {0x7F, 0x7F, 0x7F, 0x7F};
    static const uint16_t t4[] = {0x7, 0x6, 0xC, 0x0}, t8[] = {0x7F, 0x78, 0xF0, 0x00};
    lowp_quant_counts kn = COUNTS(.elements = 32, .blocks = 1, .nan_in = 1, .inf_in = 0,
                                  .saturated = 0, .flushed = 0, .nan_out = 32, .scale_zero = 0,
                                  .scale_subnormal = 0, .scale_nan = 1);
    lowp_quant_counts kt4 = COUNTS(.elements = 32, .blocks = 1, .nan_in = 1, .inf_in = 0,
                                   .saturated = 0, .flushed = 0, .nan_out = 0, .scale_zero = 0,
                                   .scale_subnormal = 0, .scale_nan = 0);
    lowp_quant_counts kt8 = kt4;
    kt8.nan_out = 1;
    qcase c[] = {
        {"nan", LOWP_MXFP4, LOWP_RECIPE_OCP, GS_ONE, 0, NX(x), NULL, NOCODE, 0xFF, -1, kn},
        {"nan", LOWP_MXFP8, LOWP_RECIPE_OCP, GS_ONE, 0, NX(x), NULL, NOCODE, 0xFF, -1, kn},
        {"nan", LOWP_MXFP4, LOWP_RECIPE_RCEIL, GS_ONE, 0, NX(x), r4, 0x7, 0xFF, -1, kn},
        {"nan", LOWP_MXFP8, LOWP_RECIPE_RCEIL, GS_ONE, 0, NX(x), r8, 0x7F, 0xFF, -1, kn},
        {"nan", LOWP_MXFP4, LOWP_RECIPE_TRTLLM, GS_ONE, 0, NX(x), t4, 0x0, 0x7E, -1, kt4},
        {"nan", LOWP_MXFP8, LOWP_RECIPE_TRTLLM, GS_ONE, 0, NX(x), t8, 0x00, 0x78, -1, kt8},
    };
    RUN_CASES(c);
}
END_TEST

START_TEST(test_mx_inf_in_block)
{
    /* MXFP4 block {+Inf, 2, -1, 0, 0 x28}; MXFP8 block {+Inf, -3, 2, 0, 0 x28}.
     * OCP: m = Inf -> q = 0xFF; all 32 decode to NaN (element codes not checked).
     * RCEIL: Inf*(1/max) = Inf -> e8m0_up (cuda, ru, satfinite) of Inf = 0xFE (2^127);
     *   x/2^127: Inf -> 0x7 / 0x7E; 2 -> 2^-126 -> 0x0 / 0x00; -1 -> -2^-127 -> 0x8;
     *   -3 -> -1.5*2^-126 -> 0x80; 0 -> 0. Two flushed.
     * trtllm MXFP4: Inf*rcp~(6) = Inf -> 0xFE; o = 2^(127-254) = 2^-127; codes as RCEIL.
     * trtllm MXFP8: q = 0xFE; o = rcp~(2^127) = 2^-127 subnormal -> flushed to 0;
     *   Inf*0 = NaN -> 0x7F (decodes to NaN); -3*0 = -0 -> 0x80; 2*0 -> 0x00. Two flushed. */
    const float x4[] = {INFINITY, 2, -1, 0};
    const float x8[] = {INFINITY, -3, 2, 0};
    static const uint16_t r4[] = {0x7, 0x0, 0x8, 0x0}, r8[] = {0x7E, 0x80, 0x00, 0x00},
                          t8[] = {0x7F, 0x80, 0x00, 0x00};
    lowp_quant_counts ko = COUNTS(.elements = 32, .blocks = 1, .nan_in = 0, .inf_in = 1,
                                  .saturated = 0, .flushed = ANY, .nan_out = 32,
                                  .scale_zero = 0, .scale_subnormal = 0, .scale_nan = 1);
    lowp_quant_counts kr = COUNTS(.elements = 32, .blocks = 1, .nan_in = 0, .inf_in = 1,
                                  .saturated = 0, .flushed = 2, .nan_out = 0, .scale_zero = 0,
                                  .scale_subnormal = 0, .scale_nan = 0);
    lowp_quant_counts kt8 = kr;
    kt8.nan_out = 1;
    qcase c[] = {
        {"inf", LOWP_MXFP4, LOWP_RECIPE_OCP, GS_ONE, 0, NX(x4), NULL, NOCODE, 0xFF, -1, ko},
        {"inf", LOWP_MXFP8, LOWP_RECIPE_OCP, GS_ONE, 0, NX(x8), NULL, NOCODE, 0xFF, -1, ko},
        {"inf", LOWP_MXFP4, LOWP_RECIPE_RCEIL, GS_ONE, 0, NX(x4), r4, 0x0, 0xFE, -1, kr},
        {"inf", LOWP_MXFP8, LOWP_RECIPE_RCEIL, GS_ONE, 0, NX(x8), r8, 0x00, 0xFE, -1, kr},
        {"inf", LOWP_MXFP4, LOWP_RECIPE_TRTLLM, GS_ONE, 0, NX(x4), r4, 0x0, 0xFE, -1, kr},
        {"inf", LOWP_MXFP8, LOWP_RECIPE_TRTLLM, GS_ONE, 0, NX(x8), t8, 0x00, 0xFE, -1, kt8},
    };
    RUN_CASES(c);
}
END_TEST

START_TEST(test_mx_zero_block_scale_2m127)
{
    /* Block {0, -0, 0, -0, ...} (32). OCP: zero m counts as exponent -127, e = -129 (MXFP4)
     * or -135 (MXFP8) -> clamped -> 0x00; x/2^-127 = +-0 -> 0x0/0x8, 0x00/0x80.
     * RCEIL: e8m0_up(0) = 0x00 (cuda: 0 -> 0x00); x/2^-127 = +-0.
     * trtllm: q = e8m0_up(0*rcp~) = 0x00; o = 0 (m == 0); x*0 = +-0.
     * E8M0 has no zero, so no scale_zero. */
    float x[32];
    uint16_t w4[32], w8[32];
    for (int i = 0; i < 32; i++) {
        x[i] = (i & 1) ? -0.0f : 0.0f;
        w4[i] = (i & 1) ? 0x8 : 0x0;
        w8[i] = (i & 1) ? 0x80 : 0x00;
    }
    lowp_quant_counts k = COUNTS(.elements = 32, .blocks = 1, .nan_in = 0, .inf_in = 0,
                                 .saturated = 0, .flushed = 0, .nan_out = 0, .scale_zero = 0,
                                 .scale_subnormal = 0, .scale_nan = 0);
    qcase c[] = {
        {"zero", LOWP_MXFP4, LOWP_RECIPE_OCP, GS_ONE, 0, NX(x), w4, 0, 0x00, -1, k},
        {"zero", LOWP_MXFP4, LOWP_RECIPE_RCEIL, GS_ONE, 0, NX(x), w4, 0, 0x00, -1, k},
        {"zero", LOWP_MXFP4, LOWP_RECIPE_TRTLLM, GS_ONE, 0, NX(x), w4, 0, 0x00, -1, k},
        {"zero", LOWP_MXFP8, LOWP_RECIPE_OCP, GS_ONE, 0, NX(x), w8, 0, 0x00, -1, k},
        {"zero", LOWP_MXFP8, LOWP_RECIPE_RCEIL, GS_ONE, 0, NX(x), w8, 0, 0x00, -1, k},
        {"zero", LOWP_MXFP8, LOWP_RECIPE_TRTLLM, GS_ONE, 0, NX(x), w8, 0, 0x00, -1, k},
    };
    RUN_CASES(c);
}
END_TEST

START_TEST(test_mx_element_ties_round_to_even)
{
    /* MXFP4, amax 6: q = 0x7F (OCP e = 0; RCEIL/trtllm 6*RN(1/6) -> 1.0 -> up 1), factor 1:
     * {6, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5, -0.25, -5} -> 7 0 2 2 4 4 6 6 8 E.
     * MXFP8, amax 448: q = 0x7F, factor 1: 1.0625 (tie 1.0/1.125) -> 0x38; 1.1875 (tie
     * 1.125/1.25) -> 1.25 = 0x3A; 2^-10 (tie 0/2^-9) -> 0x00; 1.5*2^-10 -> 2^-9 = 0x01;
     * -2^-10 -> 0x80. */
    const float x4[] = {6, 0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5, -0.25f, -5};
    static const uint16_t w4[] = {0x7, 0x0, 0x2, 0x2, 0x4, 0x4, 0x6, 0x6, 0x8, 0xE};
    const float x8[] = {448, 1.0625f, 1.1875f, 0x1p-10f, 1.5f * 0x1p-10f, -0x1p-10f};
    static const uint16_t w8[] = {0x7E, 0x38, 0x3A, 0x00, 0x01, 0x80};
    lowp_quant_counts k = COUNTS(.elements = 32, .blocks = 1, .nan_in = 0, .inf_in = 0,
                                 .saturated = 0, .flushed = 2, .nan_out = 0, .scale_zero = 0,
                                 .scale_subnormal = 0, .scale_nan = 0);
    qcase c[] = {
        {"e2m1 ties", LOWP_MXFP4, LOWP_RECIPE_OCP, GS_ONE, 0, NX(x4), w4, 0, 0x7F, -1, k},
        {"e2m1 ties", LOWP_MXFP4, LOWP_RECIPE_RCEIL, GS_ONE, 0, NX(x4), w4, 0, 0x7F, -1, k},
        {"e2m1 ties", LOWP_MXFP4, LOWP_RECIPE_TRTLLM, GS_ONE, 0, NX(x4), w4, 0, 0x7F, -1, k},
        {"e4m3 ties", LOWP_MXFP8, LOWP_RECIPE_OCP, GS_ONE, 0, NX(x8), w8, 0, 0x7F, -1, k},
        {"e4m3 ties", LOWP_MXFP8, LOWP_RECIPE_RCEIL, GS_ONE, 0, NX(x8), w8, 0, 0x7F, -1, k},
        {"e4m3 ties", LOWP_MXFP8, LOWP_RECIPE_TRTLLM, GS_ONE, 0, NX(x8), w8, 0, 0x7F, -1, k},
    };
    RUN_CASES(c);
}
END_TEST

/* ---------------------------------------------------------------------------------- */
/* FP8 per-tensor                                                                       */

START_TEST(test_fp8_global_scale_amax_zero_inf_nan_is_one)
{
    /* g = amax/max, 1.0 when amax is 0, Inf or NaN.
     * E4M3: 448 -> 1; 896 -> 2; 1 -> RN(1/448) = 0x3B124925; 2^-149 -> 2^-149/448 underflows
     * to 0 (no guard for that: see the report). E5M2: 57344 -> 1; 1 -> RN(1/57344) =
     * RN(1/7)*2^-13 = 0x37924925. */
    int bad = 0;
    const lowp_recipe E = LOWP_RECIPE_EXACT;
    bad += expect_gs("0", LOWP_FP8_E4M3, E, 0, 0x3F800000u, 0, 0);
    bad += expect_gs("Inf", LOWP_FP8_E4M3, E, INFINITY, 0x3F800000u, 0, 0);
    bad += expect_gs("NaN", LOWP_FP8_E4M3, E, qnan(), 0x3F800000u, 0, 0);
    bad += expect_gs("448", LOWP_FP8_E4M3, E, 448, 0x3F800000u, 0, 0);
    bad += expect_gs("896", LOWP_FP8_E4M3, E, 896, 0x40000000u, 0, 0);
    bad += expect_gs("1", LOWP_FP8_E4M3, E, 1, 0x3B124925u, 0, 0);
    bad += expect_gs("2^-149", LOWP_FP8_E4M3, E, 0x1p-149f, 0x00000000u, 0, 0);
    bad += expect_gs("0", LOWP_FP8_E5M2, E, 0, 0x3F800000u, 0, 0);
    bad += expect_gs("Inf", LOWP_FP8_E5M2, E, INFINITY, 0x3F800000u, 0, 0);
    bad += expect_gs("57344", LOWP_FP8_E5M2, E, 57344, 0x3F800000u, 0, 0);
    bad += expect_gs("1", LOWP_FP8_E5M2, E, 1, 0x37924925u, 0, 0);
    ck_assert_msg(bad == 0, "%d mismatches (see stderr)", bad);
}
END_TEST

START_TEST(test_fp8_true_division_and_satfinite)
{
    /* c = elem(x / g), true division, (e4m3|e5m2, cuda, rn, sat).
     * g = 1, E4M3: 500 -> 0x7E, 464 -> RNE tie 448/480 -> 448 0x7E (also counted as
     *   saturated: 464 > 448), 1e30 -> 0x7E, +Inf -> 0x7E, -Inf -> 0xFE, +NaN and -NaN ->
     *   0x7F, 2^-10 -> tie -> 0x00 (flushed), 1.5*2^-10 -> 0x01, -0 -> 0x80, 448 -> 0x7E.
     * g = 7: x = 1.3671875 (0x3FAF0000): x/7 = 0.1953125 exactly = 1.5625*2^-3, the E4M3
     *   midpoint of 1.5 and 1.625 (*2^-3) -> even 1.5*2^-3 = 0x24. Multiplying by RN(1/7)
     *   instead gives 0x3E480001 -> 0x25, so only true division gives 0x24.
     * g = 0.5: 300/0.5 = 600 -> 0x7E (saturated).
     * g = 2^-140 (binary32 subnormal): 2^-149/2^-140 = 2^-9 -> 0x01; 1/2^-140 = 2^140 -> 0x7E
     *   (saturated).
     * E5M2, g = 1: 1e6 -> 0x7B, +Inf -> 0x7B, -Inf -> 0xFB, NaN -> 0x7F, 57344 -> 0x7B.
     * E5M2, g = 7: x = 1.421875 (0x3FB60000): x/7 = 0.203125 = 1.625*2^-3, the midpoint of
     *   1.5 and 1.75 (*2^-3) -> even 1.5*2^-3 = 0x32 (x*RN(1/7) gives 0x33). */
    const float a[] = {500, 464, 1e30f, INFINITY, -INFINITY, qnan(), nqnan(), 0x1p-10f,
                       1.5f * 0x1p-10f, -0.0f, 448};
    static const uint16_t wa[] = {0x7E, 0x7E, 0x7E, 0x7E, 0xFE, 0x7F,
                                  0x7F, 0x00, 0x01, 0x80, 0x7E};
    const float b[] = {1.3671875f};
    static const uint16_t wb[] = {0x24};
    const float c300[] = {300};
    static const uint16_t w300[] = {0x7E};
    const float d[] = {0x1p-149f, 1};
    static const uint16_t wd[] = {0x01, 0x7E};
    const float e[] = {1e6f, INFINITY, -INFINITY, qnan(), 57344};
    static const uint16_t we[] = {0x7B, 0x7B, 0xFB, 0x7F, 0x7B};
    const float h[] = {1.421875f};
    static const uint16_t wh[] = {0x32};
    qcase c[] = {
        {"g=1", LOWP_FP8_E4M3, LOWP_RECIPE_EXACT, gs_dec(1), 0, NX(a), wa, 0, NOSCALE, -1,
         COUNTS(.elements = 11, .blocks = ANY, .nan_in = 2, .inf_in = 2, .saturated = 3,
                .flushed = 1, .nan_out = 2, .scale_zero = 0, .scale_subnormal = 0,
                .scale_nan = 0)},
        {"g=7 tie", LOWP_FP8_E4M3, LOWP_RECIPE_EXACT, gs_dec(7), 0, NX(b), wb, 0, NOSCALE, -1,
         COUNTS_ANY},
        {"g=0.5", LOWP_FP8_E4M3, LOWP_RECIPE_EXACT, gs_dec(0.5f), 0, NX(c300), w300, 0, NOSCALE,
         -1,
         COUNTS(.elements = 1, .blocks = ANY, .nan_in = 0, .inf_in = 0, .saturated = 1,
                .flushed = 0, .nan_out = 0, .scale_zero = 0, .scale_subnormal = 0,
                .scale_nan = 0)},
        {"g=2^-140", LOWP_FP8_E4M3, LOWP_RECIPE_EXACT, gs_dec(0x1p-140f), 0, NX(d), wd, 0,
         NOSCALE, -1,
         COUNTS(.elements = 2, .blocks = ANY, .nan_in = 0, .inf_in = 0, .saturated = 1,
                .flushed = 0, .nan_out = 0, .scale_zero = 0, .scale_subnormal = 0,
                .scale_nan = 0)},
        {"g=1", LOWP_FP8_E5M2, LOWP_RECIPE_EXACT, gs_dec(1), 0, NX(e), we, 0, NOSCALE, -1,
         COUNTS(.elements = 5, .blocks = ANY, .nan_in = 1, .inf_in = 2, .saturated = 1,
                .flushed = 0, .nan_out = 1, .scale_zero = 0, .scale_subnormal = 0,
                .scale_nan = 0)},
        {"g=7 tie", LOWP_FP8_E5M2, LOWP_RECIPE_EXACT, gs_dec(7), 0, NX(h), wh, 0, NOSCALE, -1,
         COUNTS_ANY},
    };
    RUN_CASES(c);
}
END_TEST

/* ---------------------------------------------------------------------------------- */
/* BF16 passthrough                                                                     */

START_TEST(test_bf16_passthrough_nan_0x7fff_and_rne)
{
    /* (bf16, cuda, rn): NaN of any sign or payload -> 0x7FFF; RNE on the low 16 bits:
     * 0x3F808000 tie -> 0x3F80 (even), 0x3F818000 tie -> 0x3F82, 0x3F808001 -> 0x3F81;
     * FLT_MAX rounds up to Inf 0x7F80 (no saturation); +-Inf -> 0x7F80/0xFF80; -0 -> 0x8000;
     * subnormals: 0x00018000 tie -> 0x0002, 0x00008000 tie -> 0x0000 (flushed). */
    const float x[] = {1.0f,          f32(0x3F808000u), f32(0x3F818000u), f32(0x3F808001u),
                       qnan(),        nqnan(),          snan(),           FLT_MAX,
                       INFINITY,      -INFINITY,        -0.0f,            f32(0x00018000u),
                       f32(0x00008000u)};
    static const uint16_t w[] = {0x3F80, 0x3F80, 0x3F82, 0x3F81, 0x7FFF, 0x7FFF, 0x7FFF,
                                 0x7F80, 0x7F80, 0xFF80, 0x8000, 0x0002, 0x0000};
    qcase c[] = {
        {"bf16", LOWP_BF16_PASS, LOWP_RECIPE_EXACT, GS_ONE, 0, NX(x), w, 0, NOSCALE, -1,
         COUNTS(.elements = 13, .blocks = ANY, .nan_in = 3, .inf_in = 2, .saturated = 0,
                .flushed = 1, .nan_out = 3, .scale_zero = 0, .scale_subnormal = 0,
                .scale_nan = 0)},
    };
    RUN_CASES(c);
}
END_TEST

/* ---------------------------------------------------------------------------------- */
/* Packing, multiple blocks                                                             */

/* ---------------------------------------------------------------------------------- */
/* The torch-op recipes (recipes.md): torchao, ModelOpt MX, compressed-tensors. Each    */
/* case pins one step; breaking that step in block.c changes the listed code.          */

/* counts not under test here (the oracle test holds every counter) */
#define KANY(n) COUNTS(.elements = (n), .blocks = 1, .nan_in = ANY, .inf_in = ANY,            \
                       .saturated = ANY, .flushed = ANY, .nan_out = ANY, .scale_zero = ANY,   \
                       .scale_subnormal = ANY, .scale_nan = ANY)

START_TEST(test_nvfp4_torchao_scale_floor_and_e2m1_bits)
{
    /* g = 1. Block {2^-9, -2^-10}: s = (2^-9 / 6) / 1 = 3.26e-4, clamped up to E4M3_EPS =
     * 2^-6 -> 0x08 (without the clamp it would round to the E4M3 zero and r = Inf make
     * every element 0x7 / 0xF); r = 1 / 2^-6 = 64: 2^-9 * 64 = 0.125 -> 0x0; -2^-10 * 64 =
     * -0.0625 -> 0x8. Block {6 * 2^-6, -0, 5 * 2^-6 ... }: s = 2^-6 exactly -> 0x08, r = 64:
     * 6 -> 0x7, -0 -> 0x8 (e2m1_torchao keeps -0's sign bit, unlike modelopt), 5 -> tie,
     * even 4 -> 0x6, 0.75 * 2^-6 * 64 = 0.75 -> tie, even 1.0 -> 0x2. */
    const float a[] = {0x1p-9f, -0x1p-10f};
    static const uint16_t wa[] = {0x0, 0x8};
    const float b[] = {6 * 0x1p-6f, -0.0f, 5 * 0x1p-6f, 0.75f * 0x1p-6f};
    static const uint16_t wb[] = {0x7, 0x8, 0x6, 0x2};
    /* NaN block: s NaN -> 0x7F; torch decodes it to 0x7FF00000, so r and every element
     * value are that NaN (its factor wins, T1) -> 0x4 (payload bit 21 set), also for the
     * NaN element itself and under NAN_CANONICAL (0x7FFFFFFF has bit 21 too). */
    const float c[] = {qnan(), 1, -2};
    static const uint16_t wc[] = {0x4, 0x4, 0x4};
    /* A block whose amax / 6 lies just below the E4M3 midpoint 1.1875 * 2^-6: amax / 6
     * rounds below it (scale 0x09), amax * RN(1/6) rounds onto it and then to even (0x0A),
     * which is what torchao 0.18 gives on CUDA tensors (block 1960 of tools/quantlib_check.py
     * on the H200, 2026-12-02; torch's CUDA division by a Python number multiplies by its
     * reciprocal). The element codes follow the scale (the library's bytes in both cases). */
    const float d[] = {0x1.c7fffep-4f, 0x1.046290p-8f, -0x1.4d6aacp-7f, 0x1.04edbap-6f,
                       -0x1.b18bb8p-6f, -0x1.d020fcp-5f, 0x1.492970p-4f, 0x1.5c7914p-5f,
                       0x1.0610d0p-6f, 0x1.595834p-6f, 0x1.6feda6p-5f, 0x1.6fb772p-6f,
                       0x1.40f59cp-7f, 0x1.15a3f0p-5f, -0x1.05c06cp-4f, -0x1.ef0fe4p-7f};
    static const uint16_t wd_cpu[] = {0x7, 0x0, 0x9, 0x2, 0xb, 0xd, 0x6, 0x4,
                                      0x2, 0x2, 0x5, 0x3, 0x1, 0x4, 0xe, 0xa};
    static const uint16_t wd_cuda[] = {0x7, 0x0, 0x9, 0x2, 0xb, 0xd, 0x6, 0x4,
                                       0x2, 0x2, 0x4, 0x2, 0x1, 0x3, 0xd, 0xa};
    qcase k[] = {
        {"scale floor 2^-6", LOWP_NVFP4, LOWP_RECIPE_TORCHAO, gs_dec(1), 0, NX(a), wa, 0x0, 0x08, -1, KANY(16)},
        {"scale 2^-6, e2m1 bits", LOWP_NVFP4, LOWP_RECIPE_TORCHAO, gs_dec(1), 0, NX(b), wb, 0x0, 0x08, -1, KANY(16)},
        {"nan block", LOWP_NVFP4, LOWP_RECIPE_TORCHAO, gs_dec(1), 0, NX(c), wc, 0x4, 0x7F, -1, KANY(16)},
        {"nan block, cuda", LOWP_NVFP4, LOWP_RECIPE_TORCHAO, gs_dec(1), LOWP_BLOCK_NAN_CANONICAL, NX(c), wc, 0x4, 0x7F, -1, KANY(16)},
        {"scale midpoint, cpu", LOWP_NVFP4, LOWP_RECIPE_TORCHAO, gs_dec(1), 0, NX(d), wd_cpu, 0x0, 0x09, -1, KANY(16)},
        {"scale midpoint, cuda", LOWP_NVFP4, LOWP_RECIPE_TORCHAO, gs_dec(1), LOWP_BLOCK_CUDA_SCALAR_DIV, NX(d), wd_cuda, 0x0, 0x0A, -1, KANY(16)},
    };
    RUN_CASES(k);
}
END_TEST

START_TEST(test_mx_torchao_floor_ceil_even_scale_rules)
{
    /* MXFP4, amax 7 = 1.11b x 2^2: FLOOR e = 2 - 2 = 0 -> 0x7F, 7 / 1 -> saturates 0x7;
     * CEIL (fraction nonzero) e = 1 -> 0x80, 7 / 2 = 3.5 -> tie, even 4 -> 0x6; EVEN rounds
     * 7 at E2M1's mantissa: bits + 2^21 carries to 8 -> e = 1 -> 0x80, 0x6.
     * amax 6.5 = 1.101b x 2^2: EVEN does not carry (1.101b + 0.01b = 1.111b) -> 0x7F, 6.5 ->
     * 0x7; CEIL -> 0x80, 3.25 -> 0x5 (3.0). */
    const float s7[] = {7.0f}, s65[] = {6.5f};
    static const uint16_t w7[] = {0x7}, w6[] = {0x6}, w5[] = {0x5};
    /* amax 2^-125: FLOOR e = -125 - 2 = -127 -> code 0, divided by F32_MIN_NORMAL 2^-126:
     * 2^-125 / 2^-126 = 2 -> 0x4 (ocp divides by 2^-127: 4 -> 0x6). */
    const float t[] = {0x1p-125f};
    static const uint16_t wt4[] = {0x4}, wt6[] = {0x6};
    /* NaN block: 0xFF, divisor +Inf: finite elements -> +-0 (0x0, 0x8), the +qNaN element
     * keeps its payload (bit 21 clear) -> 0x3 on the CPU, 0x4 under NAN_CANONICAL. */
    const float n[] = {1, -1, qnan()};
    static const uint16_t wn[] = {0x0, 0x8, 0x3}, wnc[] = {0x0, 0x8, 0x4};
    /* Inf block: Inf is an ordinary exponent: 255 - 127 - 2 = 126 -> 0xFD; Inf / 2^126 ->
     * 0x7, 1 / 2^126 -> 0x0. MXFP8: 255 - 127 - 8 -> 0xF7, e4m3_torch(clamp(Inf)) = 0x7E. */
    const float i[] = {INFINITY, 1};
    static const uint16_t wi[] = {0x7, 0x0}, wi8[] = {0x7E, 0x00};
    qcase k[] = {
        {"floor 7", LOWP_MXFP4, LOWP_RECIPE_TORCHAO_FLOOR, GS_ONE, 0, NX(s7), w7, 0x0, 0x7F, -1, KANY(32)},
        {"ceil 7", LOWP_MXFP4, LOWP_RECIPE_TORCHAO_CEIL, GS_ONE, 0, NX(s7), w6, 0x0, 0x80, -1, KANY(32)},
        {"even 7", LOWP_MXFP4, LOWP_RECIPE_TORCHAO_EVEN, GS_ONE, 0, NX(s7), w6, 0x0, 0x80, -1, KANY(32)},
        {"even 6.5", LOWP_MXFP4, LOWP_RECIPE_TORCHAO_EVEN, GS_ONE, 0, NX(s65), w7, 0x0, 0x7F, -1, KANY(32)},
        {"ceil 6.5", LOWP_MXFP4, LOWP_RECIPE_TORCHAO_CEIL, GS_ONE, 0, NX(s65), w5, 0x0, 0x80, -1, KANY(32)},
        {"floor code 0", LOWP_MXFP4, LOWP_RECIPE_TORCHAO_FLOOR, GS_ONE, 0, NX(t), wt4, 0x0, 0x00, -1, KANY(32)},
        {"ocp code 0", LOWP_MXFP4, LOWP_RECIPE_OCP, GS_ONE, 0, NX(t), wt6, 0x0, 0x00, -1, KANY(32)},
        {"floor nan", LOWP_MXFP4, LOWP_RECIPE_TORCHAO_FLOOR, GS_ONE, 0, NX(n), wn, 0x0, 0xFF, -1, KANY(32)},
        {"floor nan, cuda", LOWP_MXFP4, LOWP_RECIPE_TORCHAO_FLOOR, GS_ONE, LOWP_BLOCK_NAN_CANONICAL, NX(n), wnc, 0x0, 0xFF, -1, KANY(32)},
        {"floor inf", LOWP_MXFP4, LOWP_RECIPE_TORCHAO_FLOOR, GS_ONE, 0, NX(i), wi, 0x0, 0xFD, -1, KANY(32)},
        {"floor inf 8", LOWP_MXFP8, LOWP_RECIPE_TORCHAO_FLOOR, GS_ONE, 0, NX(i), wi8, 0x00, 0xF7, -1, KANY(32)},
    };
    RUN_CASES(k);
}
END_TEST

START_TEST(test_mx_torchao_rceil_log2_rounding_and_code0)
{
    /* MXFP4, amax 96 (1 + 2^-23) = 0x42C00001: d = m / 6 = 16 (1 + 2^-23); torch.log2 gives
     * 4 + 1.7e-7, which rounds to 4.0 in binary32 (half an ulp of 4 is 2.4e-7), so
     * ceil = 4 -> 0x83 (131), factor 2^-4: 6.0000007 -> clamp 6 -> 0x7. cuBLAS rceil rounds
     * up exactly: 0x84, 96 / 32 = 3 -> 0x5.
     * amax 6 * 2^-127 = 3 * 2^-126: d = 2^-127, log2 = -127 -> code 0, factor 1.0 (not
     * 2^127): 3 * 2^-126 -> 0x0 (a factor 2^127 would give 6 -> 0x7). */
    const float a[] = {f32(0x42C00001u)};
    static const uint16_t w7[] = {0x7}, w5[] = {0x5}, w0[] = {0x0};
    const float b[] = {3 * 0x1p-126f};
    /* Inf: 0xFE, factor 2^-127: Inf -> 0x7, 1 -> 0x0. */
    const float i[] = {INFINITY, 1};
    static const uint16_t wi[] = {0x7, 0x0};
    qcase k[] = {
        {"log2 rounds", LOWP_MXFP4, LOWP_RECIPE_TORCHAO_RCEIL, GS_ONE, 0, NX(a), w7, 0x0, 0x83, -1, KANY(32)},
        {"rceil exact", LOWP_MXFP4, LOWP_RECIPE_RCEIL, GS_ONE, 0, NX(a), w5, 0x0, 0x84, -1, KANY(32)},
        {"code 0 factor 1", LOWP_MXFP4, LOWP_RECIPE_TORCHAO_RCEIL, GS_ONE, 0, NX(b), w0, 0x0, 0x00, -1, KANY(32)},
        {"inf", LOWP_MXFP4, LOWP_RECIPE_TORCHAO_RCEIL, GS_ONE, 0, NX(i), wi, 0x0, 0xFE, -1, KANY(32)},
    };
    RUN_CASES(k);
}
END_TEST

START_TEST(test_mx_modelopt_ties_down_and_zero_sign)
{
    /* MXFP4, amax 6: d = 1, log2 0, e = 0 -> 0x7F, divisor 1. cast_fp4 counts the bounds
     * strictly below |v|: 0.75 -> 0x1 (RNE would say 0x2), 1.75 -> 0x3, 3.5 -> 0x5, 2.5
     * -> 0x4, 5 -> 0x6; the sign bit (2 - sign(v)) // 2 is set for +0 and -0 -> 0x8 (the
     * padding too); -1 -> 0xA. NaN block: log2(NaN) -> q 0, every element 0x8. */
    const float a[] = {6, 0.75f, 1.75f, 3.5f, 2.5f, 5, 0, -0.0f, -1};
    static const uint16_t wa[] = {0x7, 0x1, 0x3, 0x5, 0x4, 0x6, 0x8, 0x8, 0xA};
    const float n[] = {qnan(), 1};
    static const uint16_t wn[] = {0x8, 0x8};
    /* MXFP8, NaN block: d > 0 is false -> -127 -> 0x00, factor 2^127: 1 -> 448 (0x7E),
     * -1 -> 0xFE, the NaN -> 0x7F. Zero block: 0x00, codes 0x00. */
    const float n8[] = {1, -1, qnan()};
    static const uint16_t wn8[] = {0x7E, 0xFE, 0x7F};
    qcase k[] = {
        {"ties down, zero sign", LOWP_MXFP4, LOWP_RECIPE_MODELOPT, GS_ONE, 0, NX(a), wa, 0x8, 0x7F, -1, KANY(32)},
        {"nan", LOWP_MXFP4, LOWP_RECIPE_MODELOPT, GS_ONE, 0, NX(n), wn, 0x8, 0x00, -1, KANY(32)},
        {"mxfp8 nan", LOWP_MXFP8, LOWP_RECIPE_MODELOPT, GS_ONE, 0, NX(n8), wn8, 0x00, 0x00, -1, KANY(32)},
    };
    RUN_CASES(k);
}
END_TEST

START_TEST(test_compressed_tensors_nvfp4_eps_and_mx_rounding)
{
    /* NVFP4, S = 1. Zero block: s = 0 -> e4m3 0 -> replaced by eps 0.125: stored 0x20;
     * {-1e-4, 0, -0}: s = 1.7e-5 -> 0 -> 0x20, d = 0.125: -8e-4 -> 0 with the sign (0x8),
     * 0 -> 0x0, -0 -> 0x0 (sign(-0) = 0). NaN block: the CPU NaN is negative -> 0xFF
     * (0x7F under NAN_CANONICAL); elements NaN -> 0x0. */
    const float z[] = {0};
    static const uint16_t wz[] = {0x0};
    const float a[] = {-1e-4f, 0, -0.0f};
    static const uint16_t wa[] = {0x8, 0x0, 0x0};
    const float n[] = {qnan(), 1};
    static const uint16_t wn[] = {0x0, 0x0};
    /* MXFP8 amax 460.8 = 1.8 x 2^8: round_to_power_2 at E2M1's mantissa carries to 512:
     * 127 + 9 - 8 = 128 -> 0x80; 460.8 / 2 = 230.4 -> E4M3 224 = 0x76. (torchao EVEN rounds
     * at E4M3's mantissa: no carry, 0x7F.) Inf block: p2 Inf -> 255, divisor Inf, stored 0x7F
     * (compress_mx_scale); 1 / Inf -> 0x00, Inf / Inf -> x86's -NaN -> 0xFF. */
    const float m[] = {460.8f};
    static const uint16_t wm[] = {0x76};
    const float i[] = {1, INFINITY};
    static const uint16_t wi[] = {0x00, 0xFF};
    qcase k[] = {
        {"zero block eps", LOWP_NVFP4, LOWP_RECIPE_COMPRESSED_TENSORS, gs_enc(1), 0, NX(z), wz, 0x0, 0x20, -1, KANY(16)},
        {"eps, signs", LOWP_NVFP4, LOWP_RECIPE_COMPRESSED_TENSORS, gs_enc(1), 0, NX(a), wa, 0x0, 0x20, -1, KANY(16)},
        {"nan", LOWP_NVFP4, LOWP_RECIPE_COMPRESSED_TENSORS, gs_enc(1), 0, NX(n), wn, 0x0, 0xFF, -1, KANY(16)},
        {"nan, cuda", LOWP_NVFP4, LOWP_RECIPE_COMPRESSED_TENSORS, gs_enc(1), LOWP_BLOCK_NAN_CANONICAL, NX(n), wn, 0x0, 0x7F, -1, KANY(16)},
        {"mx pow2 at e2m1", LOWP_MXFP8, LOWP_RECIPE_COMPRESSED_TENSORS, GS_ONE, 0, NX(m), wm, 0x00, 0x80, -1, KANY(32)},
        {"mx inf", LOWP_MXFP8, LOWP_RECIPE_COMPRESSED_TENSORS, GS_ONE, 0, NX(i), wi, 0x00, 0x7F, -1, KANY(32)},
    };
    RUN_CASES(k);
}
END_TEST

START_TEST(test_cuda_ops_compressed_tensors_and_modelopt_mx)
{
    /* LOWP_BLOCK_CUDA_OPS (ref/recipes.md T6-T8), on blocks of the H200 run
     * (tools/quantlib_check.py --device cuda, torch 2.11, 2026-12-02; inputs and the library's
     * bytes copied from its report). "cuda": the library's CUDA bytes under the flags
     * quantlib_check.py passes for --device cuda; "cpu": flags 0, lowp's bytes, which the CPU
     * run of the same blocks found equal to the library's (and which the report's lowp rows
     * show where they differ from CUDA).
     * ModelOpt MXFP4 blocks of scale code 0: x / exp2(-127) with CUDA's exp2(-127) one
     * subnormal ulp below 2^-127 (T8), so elements on an E2M1 midpoint (cast_fp4 ties go
     * down) go up one code: 0x1p-129 / 2^-127 = 0.25 -> 0x0 on the CPU, 0x1 on CUDA.
     * compressed-tensors: Triton's clamp (maxnum, minnum) sends NaN to -max (T7): 0xF /
     * 0xFE; an Inf block scale is stored 0x7E (INT_MAX + 127 wrapped, T6), 0x7F on x86. */
    enum { CUDA = LOWP_BLOCK_NAN_CANONICAL | LOWP_BLOCK_CUDA_SCALAR_DIV | LOWP_BLOCK_CUDA_OPS,
           CUDA_OLD = LOWP_BLOCK_NAN_CANONICAL | LOWP_BLOCK_CUDA_SCALAR_DIV };
    /* nvidia-modelopt mxfp4 block 142 (amax-boundary) */
    const float mo4_142[] = {0x1p-129f, -0x1.44b3p-131f, 0x1.9baep-133f, 0x1.cf8a8p-132f, 0x1.5a1p-134f, -0x1.4348p-134f, 0x1.1a65p-131f, 0x1.c9998p-132f, 0x1.507ep-133f, 0x1.8f57p-132f, 0x1.2ab38p-132f, -0x1.98d5p-131f, 0x1.0869cp-131f, -0x1.79d6p-133f, 0x1.ff88p-136f, 0x1.6460cp-131f, -0x1.721a8p-131f, -0x1.895cp-133f, -0x1.1381p-132f, -0x1.110e4p-131f, -0x1.827p-134f, 0x1.9c85p-131f, -0x1.6d14p-131f, 0x1.b5d9p-131f, 0x1.5516p-132f, 0x1.65008p-131f, -0x1.b1104p-131f, -0x1.0574ap-130f, -0x1.0ec6p-134f, -0x1.6bfc8p-132f, -0x1.27b98p-131f, 0x1.c607p-133f};
    static const uint16_t mo4_142_cuda[] = {0x1, 0x8, 0x0, 0x0, 0x0, 0x8, 0x0, 0x0, 0x0, 0x0, 0x0, 0x8, 0x0, 0x8, 0x0, 0x0, 0x8, 0x8, 0x8, 0x8, 0x8, 0x0, 0x8, 0x0, 0x0, 0x0, 0x8, 0x8, 0x8, 0x8, 0x8, 0x0};
    static const uint16_t mo4_142_cpu[] = {0x0, 0x8, 0x0, 0x0, 0x0, 0x8, 0x0, 0x0, 0x0, 0x0, 0x0, 0x8, 0x0, 0x8, 0x0, 0x0, 0x8, 0x8, 0x8, 0x8, 0x8, 0x0, 0x8, 0x0, 0x0, 0x0, 0x8, 0x8, 0x8, 0x8, 0x8, 0x0};
    /* nvidia-modelopt mxfp4 block 147 (midpoints) */
    const float mo4_147[] = {0x1.8p-126f, 0x1p-130f, 0x1.8p-129f, 0x1.4p-128f, 0x1.cp-128f, 0x1.4p-127f, 0x1.cp-127f, 0x1.4p-126f, 0x1p-129f, 0x1p-128f, 0x1.8p-128f, 0x1p-127f, 0x1.8p-127f, 0x1p-126f, 0x1.8p-126f, -0x1p-130f, -0x1.8p-129f, -0x1.4p-128f, -0x1.cp-128f, -0x1.4p-127f, -0x1.cp-127f, -0x1.4p-126f, -0x1p-129f, -0x1p-128f, -0x1.8p-128f, -0x1p-127f, -0x1.8p-127f, -0x1p-126f, -0x1.8p-126f, 0x1.8p-126f, 0x1p-130f, 0x1.8p-129f};
    static const uint16_t mo4_147_cuda[] = {0x5, 0x0, 0x1, 0x1, 0x2, 0x3, 0x4, 0x5, 0x1, 0x1, 0x2, 0x2, 0x3, 0x4, 0x5, 0x8, 0x9, 0x9, 0xa, 0xb, 0xc, 0xd, 0x9, 0x9, 0xa, 0xa, 0xb, 0xc, 0xd, 0x5, 0x0, 0x1};
    static const uint16_t mo4_147_cpu[] = {0x5, 0x0, 0x1, 0x1, 0x2, 0x2, 0x3, 0x4, 0x0, 0x1, 0x1, 0x2, 0x3, 0x4, 0x5, 0x8, 0x9, 0x9, 0xa, 0xa, 0xb, 0xc, 0x8, 0x9, 0x9, 0xa, 0xb, 0xc, 0xd, 0x5, 0x0, 0x1};
    /* compressed-tensors nvfp4 block 2329 (nan-all) */
    const float ct4_2329[] = {qnan(), qnan(), qnan(), qnan(), qnan(), qnan(), qnan(), qnan(), qnan(), qnan(), qnan(), qnan(), qnan(), qnan(), qnan(), qnan()};
    static const uint16_t ct4_2329_cuda[] = {0xf, 0xf, 0xf, 0xf, 0xf, 0xf, 0xf, 0xf, 0xf, 0xf, 0xf, 0xf, 0xf, 0xf, 0xf, 0xf};
    static const uint16_t ct4_2329_cpu[] = {0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0};
    /* compressed-tensors mxfp4 block 1925 (midpoints) */
    const float ct4_1925[] = {INFINITY, 0x1p+124f, 0x1.8p+125f, 0x1.4p+126f, 0x1.cp+126f, 0x1.4p+127f, 0x1.cp+127f, INFINITY, 0x1p+125f, 0x1p+126f, 0x1.8p+126f, 0x1p+127f, 0x1.8p+127f, INFINITY, INFINITY, -0x1p+124f, -0x1.8p+125f, -0x1.4p+126f, -0x1.cp+126f, -0x1.4p+127f, -0x1.cp+127f, -INFINITY, -0x1p+125f, -0x1p+126f, -0x1.8p+126f, -0x1p+127f, -0x1.8p+127f, -INFINITY, -INFINITY, INFINITY, 0x1p+124f, 0x1.8p+125f};
    static const uint16_t ct4_1925_cuda[] = {0xf, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0xf, 0x0, 0x0, 0x0, 0x0, 0x0, 0xf, 0xf, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0xf, 0x0, 0x0, 0x0, 0x0, 0x0, 0xf, 0xf, 0xf, 0x0, 0x0};
    static const uint16_t ct4_1925_cpu[] = {0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0};
    /* compressed-tensors mxfp4 block 1943 (nan) */
    const float ct4_1943[] = {0x1.819c54p-1f, -0x1.128b3ep-3f, 0x1.092bfcp+0f, qnan(), 0x1.070bep+1f, 0x1.6c37c2p-1f, 0x1.a95f18p-3f, -0x1.5fc15cp-2f, 0x1.d0f048p-3f, 0x1.41a3aep-1f, 0x1.0803e8p+0f, 0x1.c41b2ap-1f, -0x1.b0fc1cp-3f, -0x1.882882p-2f, -0x1.285bbp-1f, -0x1.4099a6p+0f, 0x1.18ec44p-1f, 0x1.b1fee8p-2f, 0x1.7e7d1p-1f, -0x1.3b2aacp+0f, 0x1.08eba8p+0f, 0x1.0896c6p+0f, -0x1.3185fcp-2f, -0x1.46f836p-1f, -0x1.b2c102p+0f, -0x1.10e83cp-3f, -0x1.8b2b56p-4f, 0x1.553574p-1f, -0x1.dbc73cp-1f, -0x1.fbd436p-1f, -0x1.0c7d38p+0f, -0x1.c39f1p+1f};
    static const uint16_t ct4_1943_cuda[] = {0x7, 0xf, 0x7, 0xf, 0x7, 0x7, 0x7, 0xf, 0x7, 0x7, 0x7, 0x7, 0xf, 0xf, 0xf, 0xf, 0x7, 0x7, 0x7, 0xf, 0x7, 0x7, 0xf, 0xf, 0xf, 0xf, 0xf, 0x7, 0xf, 0xf, 0xf, 0xf};
    static const uint16_t ct4_1943_cpu[] = {0x7, 0xf, 0x7, 0x0, 0x7, 0x7, 0x7, 0xf, 0x7, 0x7, 0x7, 0x7, 0xf, 0xf, 0xf, 0xf, 0x7, 0x7, 0x7, 0xf, 0x7, 0x7, 0xf, 0xf, 0xf, 0xf, 0xf, 0x7, 0xf, 0xf, 0xf, 0xf};
    /* compressed-tensors mxfp8 block 1881 (amax-boundary) */
    const float ct8_1881[] = {0x1.cp+127f, -0x1.d88b6p+120f, 0x1.1315d6p+127f, -0x1.a7e0eep+124f, -0x1.12652ap+126f, 0x1.a38ec4p+125f, -0x1.fec00ap+123f, -0x1.9975aep+126f, -0x1.6f3db2p+124f, -0x1.31762ap+124f, -0x1.b8f9fap+125f, -0x1.70d05ep+125f, -0x1.3e389ap+125f, -0x1.dbc4ecp+123f, -0x1.5b6dd6p+120f, -0x1.26c41p+127f, -0x1.927ec8p+125f, -0x1.448d26p+124f, -0x1.a4732cp+125f, -0x1.9af61p+122f, -0x1.13d704p+121f, -0x1.912474p+122f, 0x1.904492p+122f, 0x1.86a2bp+126f, -0x1.a64c6ep+124f, 0x1.a4f6cp+124f, -0x1.0d47acp+125f, 0x1.07b08cp+125f, -0x1.241c7cp+127f, -0x1.b506f2p+122f, -0x1.9f9a8p+125f, 0x1.0b6a5ep+126f};
    static const uint16_t ct8_1881_cuda[] = {0x0, 0x80, 0x0, 0x80, 0x80, 0x0, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x0, 0x0, 0x80, 0x0, 0x80, 0x0, 0x80, 0x80, 0x80, 0x0};
    static const uint16_t ct8_1881_cpu[] = {0x0, 0x80, 0x0, 0x80, 0x80, 0x0, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x0, 0x0, 0x80, 0x0, 0x80, 0x0, 0x80, 0x80, 0x80, 0x0};
    /* compressed-tensors mxfp8 block 1907 (midpoints) */
    const float ct8_1907[] = {0x1.724924p+114f, 0x1.9b6db6p+113f, 0x1.a92492p+121f, 0x1.8db6dcp+118f, 0x1.04924ap+122f, INFINITY, 0x1.724924p+115f, 0x1.8p+126f, 0x1.724924p+117f, 0x1.8db6dcp+117f, -0x1.8db6dcp+119f, INFINITY, -0x1.04924ap+122f, INFINITY, -0x1.9b6db6p+113f, -INFINITY, -0x1.a92492p+119f, -0x1.8db6dcp+116f, 0x1.3b6db6p+127f, -0x1.56db6ep+120f, -0x1.8p+125f, 0x1.2p+123f, -0x1.124924p+112f, 0x1.a92492p+124f, -0x1.56db6ep+114f, 0x1.56db6ep+126f, 0x1.8p+112f, -0x1.724924p+123f, 0x1.04924ap+127f, 0x1.56db6ep+120f, 0x1.2db6dcp+113f, -0x1.724924p+124f};
    static const uint16_t ct8_1907_cuda[] = {0x0, 0x0, 0x0, 0x0, 0x0, 0xfe, 0x0, 0x0, 0x0, 0x0, 0x80, 0xfe, 0x80, 0xfe, 0x80, 0xfe, 0x80, 0x80, 0x0, 0x80, 0x80, 0x0, 0x80, 0x0, 0x80, 0x0, 0x0, 0x80, 0x0, 0x0, 0x0, 0x80};
    static const uint16_t ct8_1907_cpu[] = {0x0, 0x0, 0x0, 0x0, 0x0, 0xff, 0x0, 0x0, 0x0, 0x0, 0x80, 0xff, 0x80, 0xff, 0x80, 0xff, 0x80, 0x80, 0x0, 0x80, 0x80, 0x0, 0x80, 0x0, 0x80, 0x0, 0x0, 0x80, 0x0, 0x0, 0x0, 0x80};
    /* compressed-tensors mxfp8 block 1925 (nan) */
    const float ct8_1925[] = {0x1.70a3c2p-2f, -0x1.2aaf46p+0f, -0x1.ae2b94p-1f, qnan(), -0x1.77c162p-2f, 0x1.460808p+0f, 0x1.7d42b2p+0f, -0x1.f8214cp-1f, 0x1.006586p-2f, -0x1.29a7dap+0f, 0x1.000bfcp-4f, 0x1.0ad3cap-2f, -0x1.c5afdap-1f, 0x1.c7250ap-1f, -0x1.5d5d0ep+0f, 0x1.585f6cp-1f, 0x1.1ed314p-1f, -0x1.146b8ep+1f, -0x1.3192bp+0f, 0x1.dba67ep-3f, 0x1.3a689ap-2f, -0x1.5126d6p-1f, -0x1.21da04p+0f, -0x1.83d088p-1f, 0x1.0ab07cp+0f, -0x1.77168ep-2f, 0x1.8772f6p-3f, -0x1.7ece8cp+0f, 0x1.57a952p+0f, -0x1.03775ep+0f, 0x1.0ef1d8p-3f, 0x1.249702p-1f};
    static const uint16_t ct8_1925_cuda[] = {0x7e, 0xfe, 0xfe, 0xfe, 0xfe, 0x7e, 0x7e, 0xfe, 0x7e, 0xfe, 0x7e, 0x7e, 0xfe, 0x7e, 0xfe, 0x7e, 0x7e, 0xfe, 0xfe, 0x7e, 0x7e, 0xfe, 0xfe, 0xfe, 0x7e, 0xfe, 0x7e, 0xfe, 0x7e, 0xfe, 0x7e, 0x7e};
    static const uint16_t ct8_1925_cpu[] = {0x7e, 0xfe, 0xfe, 0x7f, 0xfe, 0x7e, 0x7e, 0xfe, 0x7e, 0xfe, 0x7e, 0x7e, 0xfe, 0x7e, 0xfe, 0x7e, 0x7e, 0xfe, 0xfe, 0x7e, 0x7e, 0xfe, 0xfe, 0xfe, 0x7e, 0xfe, 0x7e, 0xfe, 0x7e, 0xfe, 0x7e, 0x7e};
    /* ModelOpt MXFP4 Inf block (T6, from the source; the report's first blocks do not show
     * it): e = ceil(log2(Inf)) = Inf, (Inf + 127).to(uint8) via int64: 0x00 on x86, 0xFF on
     * CUDA (INT64_MAX); the elements are x / Inf: Inf / Inf = NaN -> 0x8, 1 -> +0 -> 0x8
     * (cast_fp4 sets the sign bit for +0), -1 -> -0 -> 0x8. */
    const float moinf[] = {INFINITY, 1, -1};
    static const uint16_t moinf_w[] = {0x8, 0x8, 0x8};
    qcase k[] = {
        {"modelopt mxfp4 142, cuda", LOWP_MXFP4, LOWP_RECIPE_MODELOPT, GS_ONE, CUDA, NX(mo4_142), mo4_142_cuda, 0, 0x00, -1, KANY(32)},
        {"modelopt mxfp4 142, cpu", LOWP_MXFP4, LOWP_RECIPE_MODELOPT, GS_ONE, 0, NX(mo4_142), mo4_142_cpu, 0, 0x00, -1, KANY(32)},
        {"modelopt mxfp4 147, cuda", LOWP_MXFP4, LOWP_RECIPE_MODELOPT, GS_ONE, CUDA, NX(mo4_147), mo4_147_cuda, 0, 0x00, -1, KANY(32)},
        {"modelopt mxfp4 147, cpu", LOWP_MXFP4, LOWP_RECIPE_MODELOPT, GS_ONE, 0, NX(mo4_147), mo4_147_cpu, 0, 0x00, -1, KANY(32)},
        {"compressed-tensors nvfp4 2329, cuda", LOWP_NVFP4, LOWP_RECIPE_COMPRESSED_TENSORS, gs_enc(1), CUDA, NX(ct4_2329), ct4_2329_cuda, 0, 0x7f, -1, KANY(16)},
        {"compressed-tensors nvfp4 2329, cpu", LOWP_NVFP4, LOWP_RECIPE_COMPRESSED_TENSORS, gs_enc(1), 0, NX(ct4_2329), ct4_2329_cpu, 0, 0xff, -1, KANY(16)},
        {"compressed-tensors mxfp4 1925, cuda", LOWP_MXFP4, LOWP_RECIPE_COMPRESSED_TENSORS, GS_ONE, CUDA, NX(ct4_1925), ct4_1925_cuda, 0, 0x7e, -1, KANY(32)},
        {"compressed-tensors mxfp4 1925, cpu", LOWP_MXFP4, LOWP_RECIPE_COMPRESSED_TENSORS, GS_ONE, 0, NX(ct4_1925), ct4_1925_cpu, 0, 0x7f, -1, KANY(32)},
        {"compressed-tensors mxfp4 1943, cuda", LOWP_MXFP4, LOWP_RECIPE_COMPRESSED_TENSORS, GS_ONE, CUDA, NX(ct4_1943), ct4_1943_cuda, 0, 0x00, -1, KANY(32)},
        {"compressed-tensors mxfp4 1943, cpu", LOWP_MXFP4, LOWP_RECIPE_COMPRESSED_TENSORS, GS_ONE, 0, NX(ct4_1943), ct4_1943_cpu, 0, 0x00, -1, KANY(32)},
        {"compressed-tensors mxfp8 1881, cuda", LOWP_MXFP8, LOWP_RECIPE_COMPRESSED_TENSORS, GS_ONE, CUDA, NX(ct8_1881), ct8_1881_cuda, 0, 0x7e, -1, KANY(32)},
        {"compressed-tensors mxfp8 1881, cpu", LOWP_MXFP8, LOWP_RECIPE_COMPRESSED_TENSORS, GS_ONE, 0, NX(ct8_1881), ct8_1881_cpu, 0, 0x7f, -1, KANY(32)},
        {"compressed-tensors mxfp8 1907, cuda", LOWP_MXFP8, LOWP_RECIPE_COMPRESSED_TENSORS, GS_ONE, CUDA, NX(ct8_1907), ct8_1907_cuda, 0, 0x7e, -1, KANY(32)},
        {"compressed-tensors mxfp8 1907, cpu", LOWP_MXFP8, LOWP_RECIPE_COMPRESSED_TENSORS, GS_ONE, 0, NX(ct8_1907), ct8_1907_cpu, 0, 0x7f, -1, KANY(32)},
        {"compressed-tensors mxfp8 1925, cuda", LOWP_MXFP8, LOWP_RECIPE_COMPRESSED_TENSORS, GS_ONE, CUDA, NX(ct8_1925), ct8_1925_cuda, 0, 0x00, -1, KANY(32)},
        {"compressed-tensors mxfp8 1925, cpu", LOWP_MXFP8, LOWP_RECIPE_COMPRESSED_TENSORS, GS_ONE, 0, NX(ct8_1925), ct8_1925_cpu, 0, 0x00, -1, KANY(32)},
        {"modelopt mxfp4 147, cuda without CUDA_OPS", LOWP_MXFP4, LOWP_RECIPE_MODELOPT, GS_ONE, CUDA_OLD, NX(mo4_147), mo4_147_cpu, 0, 0x00, -1, KANY(32)},
        {"compressed-tensors mxfp8 1925, cuda without CUDA_OPS", LOWP_MXFP8, LOWP_RECIPE_COMPRESSED_TENSORS, GS_ONE, CUDA_OLD, NX(ct8_1925), ct8_1925_cpu, 0, 0x00, -1, KANY(32)},
        {"modelopt mxfp4 inf, cuda", LOWP_MXFP4, LOWP_RECIPE_MODELOPT, GS_ONE, CUDA, NX(moinf), moinf_w, 0x8, 0xFF, -1, KANY(32)},
        {"modelopt mxfp4 inf, cpu", LOWP_MXFP4, LOWP_RECIPE_MODELOPT, GS_ONE, 0, NX(moinf), moinf_w, 0x8, 0x00, -1, KANY(32)},
    };
    RUN_CASES(k);
}
END_TEST

START_TEST(test_packing_low_nibble_is_even_element)
{
    /* NVFP4 trtllm, S = 1, amax 6 -> scale 0x38, factor 1, so element i of
     * {0, 0.5, 1, 1.5, 2, 3, 4, 6, -0, -0.5, ..., -6} has code i; byte j = code(2j) |
     * code(2j+1) << 4: 0x10 0x32 0x54 0x76 0x98 0xBA 0xDC 0xFE. Reversed order -> 0xEF 0xCD
     * 0xAB 0x89 0x67 0x45 0x23 0x01. MXFP4 (ocp, amax 6 -> 0x7F, factor 1): the two 16-element
     * sequences in one block give the two byte strings one after the other. */
    static const float v[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
    float x[32];
    uint8_t codes[24], scales[2];
    static const uint8_t fwd[8] = {0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE};
    static const uint8_t rev[8] = {0xEF, 0xCD, 0xAB, 0x89, 0x67, 0x45, 0x23, 0x01};
    char why[256] = "";
    for (int i = 0; i < 16; i++) {
        x[i] = i < 8 ? v[i] : -v[i - 8];
        x[31 - i] = x[i];
    }
    memset(codes, 0xA5, sizeof codes);
    ck_assert_int_eq(lowp_block_quantize(LOWP_NVFP4, LOWP_RECIPE_TRTLLM, gs_enc(1), 0, x, 16,
                                         codes, scales, NULL, why, sizeof why),
                     0);
    ck_assert_uint_eq(scales[0], 0x38);
    for (int j = 0; j < 8; j++)
        ck_assert_msg(codes[j] == fwd[j], "nvfp4 byte %d got 0x%02x expected 0x%02x", j,
                      codes[j], fwd[j]);
    ck_assert_uint_eq(codes[8], 0xA5);
    for (int i = 0; i < 16; i++)
        ck_assert_uint_eq(lowp_block_code_at(LOWP_NVFP4, codes, (size_t)i), (unsigned)i);
    memset(codes, 0xA5, sizeof codes);
    ck_assert_int_eq(lowp_block_quantize(LOWP_NVFP4, LOWP_RECIPE_EXACT, gs_enc(1), 0, x + 16,
                                         16, codes, scales, NULL, why, sizeof why),
                     0);
    for (int j = 0; j < 8; j++)
        ck_assert_msg(codes[j] == rev[j], "nvfp4 reversed byte %d got 0x%02x expected 0x%02x", j,
                      codes[j], rev[j]);
    memset(codes, 0xA5, sizeof codes);
    ck_assert_int_eq(lowp_block_quantize(LOWP_MXFP4, LOWP_RECIPE_OCP, GS_ONE, 0, x, 32, codes,
                                         scales, NULL, why, sizeof why),
                     0);
    ck_assert_uint_eq(scales[0], 0x7F);
    for (int j = 0; j < 8; j++) {
        ck_assert_msg(codes[j] == fwd[j], "mxfp4 byte %d got 0x%02x expected 0x%02x", j,
                      codes[j], fwd[j]);
        ck_assert_msg(codes[8 + j] == rev[j], "mxfp4 byte %d got 0x%02x expected 0x%02x",
                      8 + j, codes[8 + j], rev[j]);
    }
    ck_assert_uint_eq(codes[16], 0xA5);
}
END_TEST

START_TEST(test_multiple_blocks_independent_scales)
{
    /* NVFP4 exact, S = 1, three blocks: ties block (amax 6 -> 0x38), all-zero block (0x00),
     * {12, 0.5, 1.5, 10, ...} (amax 12 -> 0x40). Codes per block as in the single-block
     * tests; counts add up over the blocks. MXFP8 ocp, two blocks: amax 448 (0x7F) and
     * amax 2^-126 (0x00). */
    float x[48] = {0};
    static const float ties[16] = {6,  0.25f,  0.75f,  1.25f,  1.75f,  2.5f,  3.5f,  5.0f,
                                   -6, -0.25f, -0.75f, -1.25f, -1.75f, -2.5f, -3.5f, -5.0f};
    static const uint8_t wties[8] = {0x07, 0x22, 0x44, 0x66, 0x8F, 0xAA, 0xCC, 0xEE};
    memcpy(x, ties, sizeof ties);
    x[32] = 12;
    x[33] = 0.5f;
    x[34] = 1.5f;
    x[35] = 10;
    uint8_t codes[24 + 4], scales[3 + 1];
    char why[256] = "";
    lowp_quant_counts k;
    memset(&k, 0, sizeof k);
    memset(scales, 0xA5, sizeof scales);
    ck_assert_int_eq(lowp_block_quantize(LOWP_NVFP4, LOWP_RECIPE_EXACT, gs_enc(1), 0, x, 48,
                                         codes, scales, &k, why, sizeof why),
                     0);
    ck_assert_uint_eq(scales[0], 0x38);
    ck_assert_uint_eq(scales[1], 0x00);
    ck_assert_uint_eq(scales[2], 0x40);
    ck_assert_uint_eq(scales[3], 0xA5);
    for (int j = 0; j < 8; j++) {
        ck_assert_msg(codes[j] == wties[j], "byte %d got 0x%02x expected 0x%02x", j, codes[j],
                      wties[j]);
        ck_assert_uint_eq(codes[8 + j], 0x00);
    }
    /* 12 -> 0x7, 0.5 -> 0x0, 1.5 -> 0x2, 10 -> 0x6 */
    ck_assert_uint_eq(codes[16], 0x07);
    ck_assert_uint_eq(codes[17], 0x62);
    lowp_quant_counts want = COUNTS(.elements = 48, .blocks = 3, .nan_in = 0, .inf_in = 0,
                                    .saturated = 0, .flushed = 3, .nan_out = 0, .scale_zero = 1,
                                    .scale_subnormal = 0, .scale_nan = 0);
    ck_assert_int_eq(expect_counts("nvfp4 3 blocks", &k, &want), 0);

    float y[64] = {0};
    y[0] = 448;
    y[1] = -1;
    y[32] = 0x1p-126f;
    y[33] = 0x1p-127f;
    uint8_t c8[64 + 4], s8[2 + 2];
    memset(s8, 0xA5, sizeof s8);
    ck_assert_int_eq(lowp_block_quantize(LOWP_MXFP8, LOWP_RECIPE_OCP, GS_ONE, 0, y, 64, c8, s8,
                                         NULL, why, sizeof why),
                     0);
    ck_assert_uint_eq(s8[0], 0x7F);
    ck_assert_uint_eq(s8[1], 0x00);
    ck_assert_uint_eq(s8[2], 0xA5);
    ck_assert_uint_eq(c8[0], 0x7E);
    ck_assert_uint_eq(c8[1], 0xB8);
    ck_assert_uint_eq(c8[32], 0x40);
    ck_assert_uint_eq(c8[33], 0x38);
}
END_TEST

START_TEST(test_large_n_equals_block_by_block)
{
    /* lowp_block_quantize is a pure function of its input: quantizing 4096 blocks at once
     * (chunked, OpenMP-parallel) gives the bytes and counts of quantizing each block on its
     * own. The blocks cycle through the crafted edge blocks above. */
    enum { NB = 4096 };
    static float x[NB * 32];
    static uint8_t c_all[NB * 32 * 2], c_one[64];
    static uint8_t s_all[NB], s_one[1];
    static const struct {
        lowp_block_format f;
        lowp_recipe r;
    } pairs[] = {
        {LOWP_NVFP4, LOWP_RECIPE_TRTLLM}, {LOWP_NVFP4, LOWP_RECIPE_EXACT},
        {LOWP_NVFP4, LOWP_RECIPE_MODELOPT}, {LOWP_NVFP4, LOWP_RECIPE_SGLANG_KV},
        {LOWP_MXFP4, LOWP_RECIPE_OCP},    {LOWP_MXFP4, LOWP_RECIPE_RCEIL},
        {LOWP_MXFP4, LOWP_RECIPE_TRTLLM}, {LOWP_MXFP8, LOWP_RECIPE_OCP},
        {LOWP_MXFP8, LOWP_RECIPE_RCEIL},  {LOWP_MXFP8, LOWP_RECIPE_TRTLLM},
        {LOWP_FP8_E4M3, LOWP_RECIPE_EXACT}, {LOWP_FP8_E5M2, LOWP_RECIPE_EXACT},
        {LOWP_BF16_PASS, LOWP_RECIPE_EXACT},
    };
    const float pattern[8][4] = {
        {6, 0.25f, -2.5f, 5},          {0, -0.0f, 0, 0},
        {INFINITY, 1, -3, 2240},       {NAN, 1, -2, 6},
        {0x1p-127f, -0x1p-126f, 0, 0}, {6 * 0x1p-11f, 0x1p-11f, 0, -3 * 0x1p-12f},
        {FLT_MAX, -1, 0.5f, 0},        {f32(0x40FFFFFFu), 1e-3f, -7, 448},
    };
    int bad = 0;
    for (size_t p = 0; p < N_ELEMS(pairs); p++) {
        size_t bs = lowp_block_size(pairs[p].f);
        size_t blk = lowp_block_has_scales(pairs[p].f) ? bs : 16; /* elementwise: 16 a row */
        size_t n = NB * blk;
        for (size_t b = 0; b < NB; b++)
            for (size_t i = 0; i < blk; i++)
                x[b * blk + i] = i < 4 ? pattern[(b * 5 + b / 8) % 8][i] * (b & 1 ? -1.0f : 1.0f)
                                       : 0.0f;
        lowp_global_scale gs = gs_enc(f32(0x402C0831u));
        if (pairs[p].r == LOWP_RECIPE_MODELOPT || pairs[p].r == LOWP_RECIPE_SGLANG_KV ||
            pairs[p].f == LOWP_FP8_E4M3 || pairs[p].f == LOWP_FP8_E5M2)
            gs = gs_dec(f32(0x3EBE79E8u));
        char why[256] = "";
        lowp_quant_counts k_all, k_one;
        memset(&k_all, 0, sizeof k_all);
        memset(&k_one, 0, sizeof k_one);
        uint8_t *sp = lowp_block_has_scales(pairs[p].f) ? s_all : NULL;
        ck_assert_int_eq(lowp_block_quantize(pairs[p].f, pairs[p].r, gs, 0, x, n, c_all, sp,
                                             &k_all, why, sizeof why),
                         0);
        size_t cb = lowp_block_code_bytes(pairs[p].f, blk);
        for (size_t b = 0; b < NB; b++) {
            ck_assert_int_eq(lowp_block_quantize(pairs[p].f, pairs[p].r, gs, 0, x + b * blk, blk,
                                                 c_one, sp ? s_one : NULL, &k_one, why,
                                                 sizeof why),
                             0);
            if (memcmp(c_one, c_all + b * cb, cb) != 0 || (sp && s_one[0] != s_all[b])) {
                if (bad < 10)
                    fprintf(stderr, "%s/%s: block %zu of %d differs when quantized alone\n",
                            lowp_block_format_name(pairs[p].f), lowp_recipe_name(pairs[p].r), b,
                            (int)NB);
                bad++;
            }
        }
        if (memcmp(&k_all, &k_one, sizeof k_all) != 0) {
            fprintf(stderr, "%s/%s: counts over %zu elements differ from the per-block sums\n",
                    lowp_block_format_name(pairs[p].f), lowp_recipe_name(pairs[p].r), n);
            bad++;
        }
    }
    ck_assert_msg(bad == 0, "%d mismatches (see stderr)", bad);
}
END_TEST

START_TEST(test_counts_accumulate_not_cleared)
{
    /* counts are added to: start from nonzero values, quantize the Inf block twice. */
    const float x[16] = {INFINITY, 1, -3, 448, 2240, -2688};
    uint8_t codes[8], scales[1];
    char why[256] = "";
    lowp_quant_counts k = COUNTS(.elements = 5, .blocks = 1, .nan_in = 0, .inf_in = 1,
                                 .saturated = 0, .flushed = 0, .nan_out = 0, .scale_zero = 0,
                                 .scale_subnormal = 0, .scale_nan = 0);
    for (int rep = 0; rep < 2; rep++)
        ck_assert_int_eq(lowp_block_quantize(LOWP_NVFP4, LOWP_RECIPE_TRTLLM, gs_enc(1), 0, x, 16,
                                             codes, scales, &k, why, sizeof why),
                         0);
    lowp_quant_counts want = COUNTS(.elements = 37, .blocks = 3, .nan_in = 0, .inf_in = 3,
                                    .saturated = 2, .flushed = 4, .nan_out = 0, .scale_zero = 0,
                                    .scale_subnormal = 0, .scale_nan = 0);
    ck_assert_int_eq(expect_counts("accumulate", &k, &want), 0);
}
END_TEST

/* ---------------------------------------------------------------------------------- */
/* Dequantization                                                                       */

static int expect_deq(const char *tag, lowp_block_format f, float g, const uint8_t *codes,
                      const uint8_t *scales, size_t n, const double *want)
{
    double o64[MAXN];
    float o32[MAXN];
    int bad = 0;
    lowp_block_dequantize_f64(f, g, codes, scales, n, o64);
    lowp_block_dequantize_f32(f, g, codes, scales, n, o32);
    for (size_t i = 0; i < n; i++) {
        int nan_w = isnan(want[i]);
        float w32 = (float)want[i]; /* want is exact; one RN to binary32 */
        int ok64 = nan_w ? isnan(o64[i]) : bits64(o64[i]) == bits64(want[i]);
        int ok32 = nan_w ? isnan(o32[i]) : bits32(o32[i]) == bits32(w32);
        if (!ok64 || !ok32) {
            fprintf(stderr,
                    "%s dequant [%s] g=0x%08x elem %zu code 0x%x scale 0x%02x: got f64 %a f32 "
                    "0x%08x expected f64 %a f32 0x%08x\n",
                    lowp_block_format_name(f), tag, (unsigned)bits32(g), i,
                    (unsigned)lowp_block_code_at(f, codes, i),
                    scales ? scales[i / lowp_block_size(f)] : 0u, o64[i],
                    (unsigned)bits32(o32[i]), want[i], (unsigned)bits32(w32));
            bad++;
        }
    }
    return bad;
}

START_TEST(test_dequantize_exact_f64_and_single_rounding_f32)
{
    int bad = 0;
    /* NVFP4 block 0: scale 0x7E (448), g = 0x3F800001 (1 + 2^-23): value = e2m1 * 448 *
     * (1 + 2^-23), exact in binary64 (3 + 3 + 24 significant bits). 6 -> 2688(1 + 2^-23) =
     * 0x1.500002ap+11, f32 RN -> 0x45280001. -0 (code 8) -> -0.
     * NVFP4 block 1: scale 0x01 (2^-9), g = 2^-120: 0.5 -> 2^-130 (f32 subnormal, exact);
     * 6 -> 1.5*2^-127.
     * Codes bytes: block 0 {7, F, 1, 8, 3, 0, ...}, block 1 {1, 7, 0, ...}. */
    {
        uint8_t codes[16] = {0xF7, 0x81, 0x03, 0, 0, 0, 0, 0, 0x71, 0, 0, 0, 0, 0, 0, 0};
        uint8_t scales[2] = {0x7E, 0x01};
        double w[32];
        const double g = (double)f32(0x3F800001u);
        for (int i = 0; i < 32; i++)
            w[i] = 0.0;
        w[0] = 6 * 448 * g;
        w[1] = -6 * 448 * g;
        w[2] = 0.5 * 448 * g;
        w[3] = -0.0;
        w[4] = 1.5 * 448 * g;
        /* block 1 uses the same g in one call; expected with g = 1 + 2^-23 and scale 2^-9 */
        w[16] = 0.5 * 0x1p-9 * g;
        w[17] = 6 * 0x1p-9 * g;
        bad += expect_deq("nvfp4 g 1+2^-23", LOWP_NVFP4, f32(0x3F800001u), codes, scales, 32, w);
        /* g = 2^-120 on block 1 only (n = 16 from byte 8) */
        double w1[16] = {0x1p-130, 1.5 * 0x1p-127};
        bad += expect_deq("nvfp4 g 2^-120", LOWP_NVFP4, 0x1p-120f, codes + 8, scales + 1, 16,
                          w1);
    }
    /* f32 rounding in the subnormals: scale 0x07 (7*2^-9), code 3 (1.5), g = 2^-140:
     * 10.5*2^-149 exactly -> f32 tie -> even 10*2^-149 = 0x0000000A. */
    {
        uint8_t codes[8] = {0x03};
        uint8_t scales[1] = {0x07};
        double w[16] = {10.5 * 0x1p-149};
        bad += expect_deq("nvfp4 subnormal tie", LOWP_NVFP4, 0x1p-140f, codes, scales, 16, w);
        float o32[16];
        lowp_block_dequantize_f32(LOWP_NVFP4, 0x1p-140f, codes, scales, 16, o32);
        if (bits32(o32[0]) != 0x0000000Au) {
            fprintf(stderr, "nvfp4 f32 tie: got 0x%08x expected 0x0000000a\n",
                    (unsigned)bits32(o32[0]));
            bad++;
        }
    }
    /* MXFP4: scale 0x00 (2^-127) code 1 -> 2^-128; scale 0xFE (2^127) code 7 -> 6*2^127
     * (f32 overflows to +Inf), code F -> -6*2^127 (-Inf in f32). Block 0 codes {1, 0, ...},
     * block 1 {7, F, ...}. */
    {
        uint8_t codes[32] = {0x01};
        codes[16] = 0xF7;
        uint8_t scales[2] = {0x00, 0xFE};
        double w[64] = {0x1p-128};
        w[32] = 6 * 0x1p127;
        w[33] = -6 * 0x1p127;
        bad += expect_deq("mxfp4", LOWP_MXFP4, 1.0f, codes, scales, 64, w);
    }
    /* MXFP8: code 0x7E (448) scale 0xFE -> 448*2^127 (f32 Inf); code 0x01 (2^-9) scale 0x00
     * -> 2^-136; code 0x7F (NaN element) -> NaN; code 0x80 -> -0. */
    {
        uint8_t codes[64] = {0x01, 0x7F, 0x80};
        codes[32] = 0x7E;
        uint8_t scales[2] = {0x00, 0xFE};
        double w[64] = {0x1p-136, NAN, -0.0};
        w[32] = 448 * 0x1p127;
        bad += expect_deq("mxfp8", LOWP_MXFP8, 1.0f, codes, scales, 64, w);
    }
    /* FP8: E4M3 {0x7E, 0x01, 0x80, 0x7F} * g (1 + 2^-23); E5M2 {0x7C (Inf), 0x7B (57344)}. */
    {
        uint8_t codes[4] = {0x7E, 0x01, 0x80, 0x7F};
        const double g = (double)f32(0x3F800001u);
        double w[4] = {448 * g, 0x1p-9 * g, -0.0, NAN};
        bad += expect_deq("fp8 e4m3", LOWP_FP8_E4M3, f32(0x3F800001u), codes, NULL, 4, w);
        uint8_t c5[2] = {0x7C, 0x7B};
        double w5[2] = {INFINITY, 57344 * g};
        bad += expect_deq("fp8 e5m2", LOWP_FP8_E5M2, f32(0x3F800001u), c5, NULL, 2, w5);
    }
    ck_assert_msg(bad == 0, "%d mismatches (see stderr)", bad);
}
END_TEST

START_TEST(test_dequantize_nan_scale_makes_block_nan)
{
    /* NVFP4 scale 0x7F or 0xFF (E4M3 NaN), MXFP4/MXFP8 scale 0xFF: every element of that
     * block is NaN, zero codes included; the neighbouring block is unaffected. */
    int bad = 0;
    {
        uint8_t codes[24] = {0};
        codes[16] = 0x02; /* block 2 element 0: code 2 (1.0) with scale 0x38 -> 1 * 1 * 1 */
        uint8_t scales[3] = {0x7F, 0xFF, 0x38};
        double w[48];
        for (int i = 0; i < 32; i++)
            w[i] = NAN;
        for (int i = 32; i < 48; i++)
            w[i] = 0.0;
        w[32] = 1.0;
        bad += expect_deq("nan scale", LOWP_NVFP4, 1.0f, codes, scales, 48, w);
    }
    {
        uint8_t codes[32] = {0x21};
        uint8_t scales[2] = {0xFF, 0x7F};
        double w[64];
        for (int i = 0; i < 32; i++)
            w[i] = NAN;
        for (int i = 32; i < 64; i++)
            w[i] = 0.0;
        bad += expect_deq("nan scale", LOWP_MXFP4, 1.0f, codes, scales, 64, w);
    }
    {
        uint8_t codes[64] = {0x38};
        codes[32] = 0x38;
        uint8_t scales[2] = {0xFF, 0x80};
        double w[64];
        for (int i = 0; i < 32; i++)
            w[i] = NAN;
        for (int i = 32; i < 64; i++)
            w[i] = 0.0;
        w[32] = 2.0;
        bad += expect_deq("nan scale", LOWP_MXFP8, 1.0f, codes, scales, 64, w);
    }
    ck_assert_msg(bad == 0, "%d mismatches (see stderr)", bad);
}
END_TEST

START_TEST(test_bf16_dequantize_passthrough)
{
    /* BF16 codes decode exactly; no scale (global scale 1). */
    uint8_t codes[6];
    char why[256] = "";
    const float x[3] = {f32(0x3F810000u), -0.0f, qnan()};
    ck_assert_int_eq(lowp_block_quantize(LOWP_BF16_PASS, LOWP_RECIPE_EXACT, GS_ONE, 0, x, 3,
                                         codes, NULL, NULL, why, sizeof why),
                     0);
    double w[3] = {(double)f32(0x3F810000u), -0.0, NAN};
    ck_assert_int_eq(expect_deq("bf16", LOWP_BF16_PASS, 1.0f, codes, NULL, 3, w), 0);
}
END_TEST

/* ---------------------------------------------------------------------------------- */
/* The fused single-pass kernel (ref/block/src/block_fast.c) against the generic path          */

/* The generic path of block.c is the definition; the fused kernel must give the same code
 * bytes, scale bytes and counts on every input, with every recipe, flag and global scale,
 * whether it handles a block itself or hands it back. The data mixes the block kinds the
 * kernel treats differently (below); the sub-range calls cover partial groups of 16
 * blocks, unaligned inputs and the one-block calls of the KV cache; the whole-pool call is
 * OpenMP-parallel. The test also checks that the kernel did run (where the CPU has it),
 * and that blocks were handed back, so it cannot pass by comparing the generic path with
 * itself. */
#include "block_internal.h" /* ref/block/internal, named in tests/CMakeLists.txt */

static double fz_unit(uint64_t *s) { return (double)(lowp_splitmix64(s) >> 11) * 0x1p-53; }
static int fz_int(uint64_t *s, int lo, int hi) /* uniform in [lo, hi] */
{
    return lo + (int)(lowp_splitmix64(s) % (uint64_t)(hi - lo + 1));
}
static double fz_gauss(uint64_t *s)
{
    double u1 = fz_unit(s) + 0x1p-54, u2 = fz_unit(s);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

enum {
    FZ_UNIT,       /* Gaussian x 10^U(-1.5, 1.5), one block in 8 heavy-tailed */
    FZ_GAUSS,      /* Gaussian x 10^U(-30, 30) */
    FZ_HEAVY,      /* Gaussian / U(0,1)^2 x 10^U(-30, 30): heavy tails */
    FZ_ZERO,       /* +0 and -0 */
    FZ_ONE_HUGE,   /* small values and one huge one: most elements flush */
    FZ_ELEM_TIES,  /* k/4 x 2^E with a +-6 x 2^E: E2M1 ties after an exact power-of-two scale */
    FZ_SCALE_TIES, /* amax 6 x (an E4M3 value or midpoint, or 464, 480, ...): E4M3 scale ties */
    FZ_DENORMAL,   /* binary32 subnormals, with zeros */
    FZ_TINY,       /* 2^U(-149, -90): scales underflow to E4M3 subnormal or zero */
    FZ_NEAR_MAX,   /* 2^U(100, 128): scale and element overflow, x * factor to Inf */
    FZ_VEC58,      /* the three ref/notes/formats.md 5.8 blocks {bamax, x, -x, 0...}, scaled */
    FZ_SPECIAL,    /* Gaussian with NaN (either sign, payloads, signalling) or Inf */
    FZ_RAWBITS,    /* random binary32 bit patterns */
    FZ_KINDS
};

static float fz_special(uint64_t *s)
{
    static const uint32_t sp[] = {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFFBFFFFFu,
                                  0x7FC12345u, 0x7F800000u, 0xFF800000u};
    return f32(sp[lowp_splitmix64(s) % N_ELEMS(sp)]);
}

static void fz_block(uint64_t *s, int kind, float *x)
{
    double mag = pow(10.0, -30.0 + 60.0 * fz_unit(s));
    switch (kind) {
    case FZ_UNIT: {
        double um = pow(10.0, -1.5 + 3.0 * fz_unit(s));
        int heavy = lowp_splitmix64(s) % 8 == 0;
        for (int i = 0; i < 16; i++) {
            double u = heavy ? fz_unit(s) + 0.01 : 1.0;
            x[i] = (float)(fz_gauss(s) * um / u);
        }
        break;
    }
    case FZ_GAUSS:
        for (int i = 0; i < 16; i++)
            x[i] = (float)(fz_gauss(s) * mag);
        break;
    case FZ_HEAVY:
        for (int i = 0; i < 16; i++) {
            double u = fz_unit(s) + 1e-6;
            x[i] = (float)(fz_gauss(s) / (u * u) * mag);
        }
        break;
    case FZ_ZERO:
        for (int i = 0; i < 16; i++)
            x[i] = (lowp_splitmix64(s) & 1) ? -0.0f : 0.0f;
        break;
    case FZ_ONE_HUGE:
        for (int i = 0; i < 16; i++)
            x[i] = (float)(fz_gauss(s) * mag * 1e-12);
        x[fz_int(s, 0, 15)] = (float)((lowp_splitmix64(s) & 1 ? -1 : 1) * mag * (1 + fz_unit(s)));
        break;
    case FZ_ELEM_TIES: {
        /* With S = 1 / g = 1 every NVFP4 recipe scales this block by exactly 2^-E (its
         * scale is 2^E: 6 x 2^E x rcp~(6) rounds to 2^E, and so does m x RN(1/6)), so the
         * elements land on k/4: every E2M1 tie. Other global scales move them off. */
        int E = lowp_splitmix64(s) % 4 ? fz_int(s, -6, 8) : fz_int(s, -12, 12);
        for (int i = 0; i < 16; i++)
            x[i] = ldexpf((float)fz_int(s, -24, 24) * 0.25f, E);
        x[fz_int(s, 0, 15)] = ldexpf(lowp_splitmix64(s) & 1 ? -6.0f : 6.0f, E);
        break;
    }
    case FZ_SCALE_TIES: {
        /* sf = amax / 6 exactly under S = 1 / g = 1: an E4M3 value, a midpoint between two
         * (the ties), or values about the 448/464/480 saturation edges. */
        double v;
        int c = fz_int(s, 0, 125);
        double lo = lowp_decode_f64(LOWP_E4M3, (uint16_t)c);
        double hi = lowp_decode_f64(LOWP_E4M3, (uint16_t)(c + 1));
        switch (fz_int(s, 0, 3)) {
        case 0: v = lo; break;
        case 1: v = (lo + hi) / 2; break;
        case 2: v = (double)(fz_int(s, 440, 500)); break;
        default: v = (lo + hi) / 2 * (lowp_splitmix64(s) & 1 ? 1 + 0x1p-20 : 1 - 0x1p-20); break;
        }
        for (int i = 0; i < 16; i++)
            x[i] = (float)(6 * v * (fz_unit(s) * 2 - 1));
        x[fz_int(s, 0, 15)] = (float)(lowp_splitmix64(s) & 1 ? -6 * v : 6 * v);
        break;
    }
    case FZ_DENORMAL:
        for (int i = 0; i < 16; i++)
            x[i] = (lowp_splitmix64(s) % 4) ? f32((uint32_t)lowp_splitmix64(s) & 0x807FFFFFu) : 0.0f;
        break;
    case FZ_TINY:
        for (int i = 0; i < 16; i++)
            x[i] = (float)(fz_gauss(s) * ldexp(1.0, fz_int(s, -149, -90)));
        break;
    case FZ_NEAR_MAX:
        for (int i = 0; i < 16; i++)
            x[i] = (float)(fz_gauss(s) * ldexp(1.0, fz_int(s, 100, 126)));
        break;
    case FZ_VEC58: {
        static const uint32_t bamax[3] = {0x43B195D8u, 0x44152797u, 0x437683CDu};
        static const uint32_t xe[3] = {0x4172E948u, 0x41C25222u, 0x41F782D5u};
        int v = fz_int(s, 0, 2), p = fz_int(s, 0, 13);
        float sc = ldexpf(1.0f, fz_int(s, -2, 2));
        memset(x, 0, 16 * sizeof *x);
        x[p] = f32(bamax[v]) * sc;
        x[p + 1] = f32(xe[v]) * sc;
        x[p + 2] = -f32(xe[v]) * sc;
        break;
    }
    case FZ_SPECIAL: {
        for (int i = 0; i < 16; i++)
            x[i] = (float)(fz_gauss(s) * mag);
        int nsp = fz_int(s, 1, 3);
        for (int j = 0; j < nsp; j++)
            x[fz_int(s, 0, 15)] = fz_special(s);
        break;
    }
    default:
        for (int i = 0; i < 16; i++)
            x[i] = f32((uint32_t)lowp_splitmix64(s));
        break;
    }
}

/* One call through both paths; 0 if codes (and the 16 bytes after them), scales (and the
 * 16 after them) and counts are equal, else the first differing block is printed.
 * fast_out accumulates the blocks the kernel produced. */
typedef struct fz_bufs {
    uint8_t *cg, *cf, *sg, *sf; /* codes and scales: generic, fused */
} fz_bufs;

static int fz_compare(const char *tag, lowp_block_format f, lowp_recipe r, lowp_global_scale gs,
                      unsigned flags, const float *x, size_t nb, int with_scales, int with_counts,
                      const fz_bufs *bu, size_t *fast_out)
{
    size_t bs = lowp_block_size(f), n = nb * bs, cbb = bs / 2; /* code bytes a block */
    lowp_quant_counts kg, kf;
    char why[256] = "";
    size_t fast = 0, gen_fast = 0;
    memset(bu->cg, 0xA5, n / 2 + 16);
    memset(bu->cf, 0xA5, n / 2 + 16);
    memset(bu->sg, 0x5A, nb + 16);
    memset(bu->sf, 0x5A, nb + 16);
    memset(&kg, 0, sizeof kg);
    memset(&kf, 0, sizeof kf);
    int rg = lowp_block_quantize_path(f, r, gs, flags, x, n, bu->cg, with_scales ? bu->sg : NULL,
                                      with_counts ? &kg : NULL, why, sizeof why,
                                      LOWP_BLOCK_PATH_GENERIC, &gen_fast);
    int rf = lowp_block_quantize_path(f, r, gs, flags, x, n, bu->cf, with_scales ? bu->sf : NULL,
                                      with_counts ? &kf : NULL, why, sizeof why,
                                      LOWP_BLOCK_PATH_AUTO, &fast);
    *fast_out += fast;
    char where[256];
    snprintf(where, sizeof where, "%s/%s S=0x%08x g=0x%08x flags=%u [%s, %zu blocks]",
             lowp_block_format_name(f), lowp_recipe_name(r), (unsigned)bits32(gs.enc),
             (unsigned)bits32(gs.dec), flags, tag, nb);
    if (rg != 0 || rf != 0 || gen_fast != 0) {
        fprintf(stderr, "%s: returned %d (generic) and %d (fused), generic path fused %zu: %s\n",
                where, rg, rf, gen_fast, why);
        return 1;
    }
    for (size_t b = 0; b <= nb; b++) {
        /* b == nb: the 16 bytes after the codes and after the scales */
        int code_bad = memcmp(bu->cg + b * cbb, bu->cf + b * cbb, b < nb ? cbb : 16) != 0;
        int scale_bad = memcmp(bu->sg + b, bu->sf + b, b < nb ? 1 : 16) != 0;
        if (!code_bad && !scale_bad)
            continue;
        fprintf(stderr, "%s: block %zu: generic scale 0x%02x fused 0x%02x\n", where, b,
                bu->sg[b], bu->sf[b]);
        if (b < nb)
            for (size_t i = 0; i < bs; i++)
                fprintf(stderr, "  elem %2zu input 0x%08x (%a) generic 0x%x fused 0x%x\n", i,
                        (unsigned)bits32(x[bs * b + i]), (double)x[bs * b + i],
                        (unsigned)lowp_block_code_at(f, bu->cg, bs * b + i),
                        (unsigned)lowp_block_code_at(f, bu->cf, bs * b + i));
        else
            fprintf(stderr, "  bytes past the end differ\n");
        return 1;
    }
    if (with_counts && memcmp(&kg, &kf, sizeof kg) != 0) {
        fprintf(stderr, "%s: counts differ (generic / fused):\n", where);
        expect_counts(where, &kf, &kg);
        return 1;
    }
    return 0;
}

/* One (format, recipe, global scale, flags) over the pool: the whole of it (OpenMP, with
 * counts; without counts and without scales when `all`), then sub-ranges of 1 to 70
 * blocks at any block offset (partial groups, unaligned x, the KV cache's one-row calls). */
static int fz_config(lowp_block_format f, lowp_recipe r, lowp_global_scale gs, unsigned flags,
                     const float *x, size_t nb, int all, int subcalls, uint64_t *st,
                     const fz_bufs *bu, size_t *total, size_t *fast)
{
    size_t bs = lowp_block_size(f);
    int bad = fz_compare("pool", f, r, gs, flags, x, nb, 1, 1, bu, fast);
    *total += nb;
    if (all) {
        bad += fz_compare("pool, no counts", f, r, gs, flags, x, nb, 1, 0, bu, fast);
        bad += fz_compare("pool, no scales", f, r, gs, flags, x, nb, 0, 1, bu, fast);
        *total += 2 * nb;
    }
    for (int c = 0; c < subcalls && bad < 5; c++) {
        size_t len = (size_t)(c % 4 == 0 ? 1 : fz_int(st, 1, 70));
        size_t start = (size_t)fz_int(st, 0, (int)(nb - len));
        bad += fz_compare("sub-range", f, r, gs, flags, x + bs * start, len, 1, 1, bu, fast);
        *total += len;
    }
    return bad;
}

/* Groups of 16 blocks of 16 (the kernel's unit, handed back whole): half of unit-sized
 * data with some zero blocks; 15% ties (E2M1 and E4M3); 20% every finite kind at every
 * magnitude; 15% every kind, NaN, Inf and raw bits included. MXFP4 reads the pool as
 * blocks of 32 (two of these). */
static void fz_pool(uint64_t *st, float *x0, size_t groups)
{
    for (size_t g = 0; g < groups; g++) {
        double t = fz_unit(st);
        for (size_t b = 0; b < 16; b++) {
            int kind;
            if (t < 0.5)
                kind = lowp_splitmix64(st) % 16 ? FZ_UNIT : FZ_ZERO;
            else if (t < 0.65)
                kind = lowp_splitmix64(st) % 2 ? FZ_ELEM_TIES : FZ_SCALE_TIES;
            else if (t < 0.85)
                kind = fz_int(st, 0, FZ_SPECIAL - 1);
            else
                kind = fz_int(st, 0, FZ_KINDS - 1);
            fz_block(st, kind, x0 + (g * 16 + b) * 16);
        }
    }
}

static const struct {
    lowp_block_format f;
    lowp_recipe r;
} fz_cfg[] = {{LOWP_NVFP4, LOWP_RECIPE_TRTLLM}, {LOWP_NVFP4, LOWP_RECIPE_EXACT},
              {LOWP_NVFP4, LOWP_RECIPE_MODELOPT}, {LOWP_NVFP4, LOWP_RECIPE_SGLANG_KV},
              {LOWP_MXFP4, LOWP_RECIPE_OCP},      {LOWP_MXFP4, LOWP_RECIPE_RCEIL},
              {LOWP_MXFP4, LOWP_RECIPE_TRTLLM}};

START_TEST(test_nvfp4_mxfp4_fused_kernel_equals_generic)
{
    enum { GROUPS = 2500, NB = GROUPS * 16, SUBCALLS = 120 };
    float *x0 = malloc(NB * 16 * sizeof *x0), *x = malloc(NB * 16 * sizeof *x);
    fz_bufs bu = {malloc(NB * 8 + 16), malloc(NB * 8 + 16), malloc(NB + 16), malloc(NB + 16)};
    ck_assert(x0 != NULL && x != NULL && bu.cg != NULL && bu.cf != NULL && bu.sg != NULL &&
              bu.sf != NULL);
    uint64_t st = 0x6c6f7770u;
    fz_pool(&st, x0, GROUPS);
    /* NVFP4 global scales: from tensor amaxes (425.09467 is ref/notes/formats.md 5.8's, where trtllm
     * and exact disagree; 0 and Inf trip the guards), 1 (the ties above), 6 and 1/6, and
     * decode scales at the ends of the range (the kernel refuses some; both must agree).
     * MX has no global scale: {1, 1}, and the pool times powers of two instead. */
    static const float amaxes[] = {425.09467f, 4.5f, 1e-20f, 1e20f, 0.0f, INFINITY};
    int bad = 0;
    size_t total = 0, fast = 0;
    for (size_t ci = 0; ci < N_ELEMS(fz_cfg) && bad < 5; ci++) {
        lowp_block_format f = fz_cfg[ci].f;
        lowp_recipe r = fz_cfg[ci].r;
        size_t nb = NB * 16 / lowp_block_size(f);
        lowp_global_scale gss[16];
        double mx_u[] = {1.0, 0x1p-60, 0x1p-120, 0x1p40, 0x1p90};
        size_t ngs = 0, c_total = 0, c_fast = 0;
        if (f == LOWP_NVFP4) {
            for (size_t a = 0; a < N_ELEMS(amaxes); a++)
                gss[ngs++] = lowp_recipe_global_scale(f, r, amaxes[a]);
            gss[ngs++] = GS_ONE;
            gss[ngs++] = gs_enc(6.0f);
            gss[ngs++] = gs_dec(1.0f / 6.0f);
            gss[ngs++] = gs_dec(0x1p-120f);
            gss[ngs++] = gs_dec(1e30f);
            gss[ngs++] = gs_dec(f32(0x00000123u)); /* subnormal decode scale */
            gss[ngs++] = gs_enc(-2.0f);
        } else {
            for (size_t u = 0; u < N_ELEMS(mx_u); u++)
                gss[ngs++] = GS_ONE;
        }
        for (size_t gi = 0; gi < ngs && bad < 5; gi++)
            for (int pass = 0; pass < 2; pass++) {
                /* NVFP4 pass 0: the pool as made (the ties assume S = 1 / g = 1); pass 1:
                 * times the power of two that puts a unit block near the top of the scale
                 * range for this global scale (2688 g / 1024), so most blocks are in the
                 * kernel's domain whatever g is. MX: the pool times mx_u[gi], once. */
                double u = 1.0;
                if (f != LOWP_NVFP4) {
                    if (pass == 1)
                        continue;
                    u = mx_u[gi];
                } else if (pass == 1) {
                    double t = 2688.0 / 1024 * fabs((double)gss[gi].dec);
                    if (!(t > 0x1p-100 && t < 0x1p100))
                        continue;
                    u = ldexp(1.0, (int)lround(log2(t)));
                }
                for (size_t i = 0; i < (size_t)NB * 16; i++)
                    x[i] = (float)((double)x0[i] * u);
                for (unsigned flags = 0; flags <= LOWP_BLOCK_SCALE_UP; flags++) {
                    size_t before = fast;
                    bad += fz_config(f, r, gss[gi], flags, x, nb, gi == 0, SUBCALLS, &st, &bu,
                                     &c_total, &fast);
                    c_fast += fast - before;
                }
            }
        total += c_total;
        /* the comparison compared something: the kernel made a good part of this
         * configuration's blocks, and handed some back */
        if (lowp_block_fast_cpu() && bad == 0)
            ck_assert_msg(c_fast > c_total / 4 && c_fast < c_total,
                          "%s/%s: fused kernel made %zu of %zu blocks", lowp_block_format_name(f),
                          lowp_recipe_name(r), c_fast, c_total);
    }
    free(x0);
    free(x);
    free(bu.cg);
    free(bu.cf);
    free(bu.sg);
    free(bu.sf);
    ck_assert_msg(bad == 0, "%d fused/generic mismatches (see stderr)", bad);
    if (!lowp_block_fast_cpu())
        fprintf(stderr, "fused NVFP4/MXFP4 kernel: not on this CPU (needs AVX-512 F/BW/DQ/VL); "
                        "only the generic path ran (%zu blocks)\n", total);
}
END_TEST

#if defined(__x86_64__) && defined(__SSE2__)
#include <xmmintrin.h>

START_TEST(test_fused_kernel_equals_generic_under_mxcsr)
{
    /* The kernel's rounding additions have their own rounding mode; its multiplies and
     * divides, like block.c's C arithmetic, follow MXCSR. Both paths must agree under any
     * MXCSR a caller may leave: flush-to-zero and denormals-are-zero, and each rounding
     * direction. The pool is at most 8 chunks of block.c, so no call goes to OpenMP
     * workers (which keep their own MXCSR). */
    enum { GROUPS = 120, NB = GROUPS * 16 };
    static const unsigned csr[] = {0x1f80 | 0x8040 /* FTZ DAZ */, 0x1f80 | 0x6000 /* RZ */,
                                   0x1f80 | 0x4000 /* RU */, 0x1f80 | 0x2000 /* RD */};
    float *x = malloc(NB * 16 * sizeof *x);
    fz_bufs bu = {malloc(NB * 8 + 16), malloc(NB * 8 + 16), malloc(NB + 16), malloc(NB + 16)};
    ck_assert(x != NULL && bu.cg != NULL && bu.cf != NULL && bu.sg != NULL && bu.sf != NULL);
    uint64_t st = 0x6d786373u;
    fz_pool(&st, x, GROUPS);
    lowp_global_scale gss[4];
    int bad = 0;
    size_t total = 0, fast = 0;
    unsigned saved = _mm_getcsr();
    for (size_t m = 0; m < N_ELEMS(csr) && bad < 5; m++)
        for (size_t ci = 0; ci < N_ELEMS(fz_cfg) && bad < 5; ci++) {
            lowp_block_format f = fz_cfg[ci].f;
            lowp_recipe r = fz_cfg[ci].r;
            /* computed under the default MXCSR */
            gss[0] = GS_ONE;
            gss[1] = lowp_recipe_global_scale(f, r, 425.09467f);
            gss[2] = f == LOWP_NVFP4 ? gs_enc(0x1p-100f) : GS_ONE;
            gss[3] = f == LOWP_NVFP4 ? gs_dec(0x1p-110f) : GS_ONE;
            size_t nb = NB * 16 / lowp_block_size(f);
            _mm_setcsr(csr[m]);
            for (size_t gi = 0; gi < N_ELEMS(gss); gi++)
                for (unsigned flags = 0; flags <= LOWP_BLOCK_SCALE_UP; flags++)
                    bad += fz_config(f, r, gss[gi], flags, x, nb, 0, 40, &st, &bu, &total, &fast);
            _mm_setcsr(saved);
            if (bad)
                fprintf(stderr, "  (MXCSR 0x%04x)\n", csr[m]);
        }
    _mm_setcsr(saved);
    free(x);
    free(bu.cg);
    free(bu.cf);
    free(bu.sg);
    free(bu.sf);
    ck_assert_msg(bad == 0, "%d fused/generic mismatches under a non-default MXCSR (see stderr)",
                  bad);
    if (lowp_block_fast_cpu())
        ck_assert_msg(fast > total / 4, "fused kernel made %zu of %zu blocks", fast, total);
}
END_TEST

START_TEST(test_counts_do_not_depend_on_daz)
{
    /* The counts decode every element and block scale in binary64. Blocks whose scale is
     * a binary32 subnormal (E8M0 code 0 = 2^-127: MX amax in [2^-125, 2^-124) under ocp)
     * and their neighbours must count the same under MXCSR.DAZ as without,
     * on the generic path and the fused one: DAZ would read such a scale, widened through
     * a binary32 operand, as 0 and count all its elements as flushed. */
    enum { NB = 64 };
    float x[NB * 32];
    uint8_t codes[NB * 32], sc[NB * 32 / 16]; /* NVFP4: a scale per 16 */
    for (int e = -125; e <= -123; e++)
        for (size_t ci = 0; ci < N_ELEMS(fz_cfg); ci++) {
            lowp_block_format f = fz_cfg[ci].f;
            lowp_recipe r = fz_cfg[ci].r;
            for (size_t i = 0; i < N_ELEMS(x); i++)
                x[i] = ldexpf((i % 2 ? -1.0f : 1.0f) * (1.0f + (float)(i % 7) / 8.0f), e);
            lowp_global_scale g = GS_ONE;
            lowp_quant_counts want = {0};
            for (unsigned csr = 0; csr < 2; csr++)
                for (int path = LOWP_BLOCK_PATH_GENERIC; path <= LOWP_BLOCK_PATH_AUTO; path++) {
                    lowp_quant_counts k = {0};
                    unsigned saved = _mm_getcsr();
                    _mm_setcsr(csr ? saved | 0x0040 : saved);
                    int rc = lowp_block_quantize_path(f, r, g, 0, x, N_ELEMS(x), codes, sc, &k, NULL, 0,
                                                      path, NULL);
                    _mm_setcsr(saved);
                    ck_assert_int_eq(rc, 0);
                    if (csr == 0 && path == LOWP_BLOCK_PATH_GENERIC)
                        want = k;
                    ck_assert_msg(k.flushed == want.flushed && k.nan_out == want.nan_out &&
                                      k.saturated == want.saturated,
                                  "%s/%s amax 2^%d DAZ %u path %d: flushed %zu nan %zu sat %zu, "
                                  "without DAZ %zu %zu %zu",
                                  lowp_block_format_name(f), lowp_recipe_name(r), e, csr, path,
                                  k.flushed, k.nan_out, k.saturated, want.flushed, want.nan_out,
                                  want.saturated);
                }
        }
}
END_TEST
#endif

/* The AVX2 kernel (ref/block/src/block_fast.c) against the generic path, on any CPU with AVX2
 * (an AVX-512 machine included: the ISA limit makes lowp_block_quantize run the AVX2
 * kernel). Beside the random pool of the test above: blocks at the rounding boundaries
 * (E2M1 midpoints and E4M3 scale midpoints, each +-3 ulps), the overflow band (scales
 * about 448/464/480, x * factor past FLT_MAX), NaN, Inf, -0, binary32 subnormals, all-zero
 * blocks; calls of 1 to 70 blocks at any offset (partial groups of 8, the tails), element
 * counts that are not a multiple of the block (refused by both paths, nothing written),
 * and the MXCSR modes (the kernel's roundings must not depend on them). */
static float av_ulps(float v, int d) /* v moved by d ulps, v finite and positive */
{
    return f32(bits32(v) + (uint32_t)d);
}

static void av_pool(uint64_t *st, float *x, size_t nblocks)
{
    static const float mids[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 0.5f, 6.0f};
    for (size_t b = 0; b < nblocks; b++) {
        float *xb = x + 16 * b;
        int kind = fz_int(st, 0, 7);
        int E = fz_int(st, -20, 20);
        switch (kind) {
        case 0: /* E2M1 boundaries after an exact power-of-two scale (amax 6 x 2^E) */
            for (int i = 0; i < 16; i++) {
                float mv = ldexpf(mids[fz_int(st, 0, (int)N_ELEMS(mids) - 1)], E);
                float v = av_ulps(mv, fz_int(st, -3, 3));
                xb[i] = lowp_splitmix64(st) & 1 ? -v : v;
            }
            xb[fz_int(st, 0, 15)] = ldexpf(lowp_splitmix64(st) & 1 ? -6.0f : 6.0f, E);
            break;
        case 1: { /* E4M3 scale boundaries: amax = 6 x (a code's value or a midpoint) +- ulps */
            int c = fz_int(st, 0, 126);
            double lo = lowp_decode_f64(LOWP_E4M3, (uint16_t)c);
            double hi = c < 126 ? lowp_decode_f64(LOWP_E4M3, (uint16_t)(c + 1)) : 512.0;
            double t = lowp_splitmix64(st) & 1 ? lo : (lo + hi) / 2;
            if (fz_int(st, 0, 7) == 0)
                t = (double)fz_int(st, 0, 3) * 16 + 448; /* 448, 464, 480, 496 */
            float am = t > 0 ? av_ulps((float)(6 * t), fz_int(st, -3, 3)) : 0.0f;
            for (int i = 0; i < 16; i++)
                xb[i] = (float)(am * (fz_unit(st) * 2 - 1));
            xb[fz_int(st, 0, 15)] = lowp_splitmix64(st) & 1 ? -am : am;
            break;
        }
        case 2: /* the overflow band: values near FLT_MAX */
            for (int i = 0; i < 16; i++)
                xb[i] = f32((lowp_splitmix64(st) & 0x80000000u) | (0x7f7fffffu - (uint32_t)fz_int(st, 0, 1 << 20)));
            break;
        case 3: /* subnormals with -0, +0 and one normal value at most */
            for (int i = 0; i < 16; i++) {
                uint32_t r = (uint32_t)lowp_splitmix64(st);
                xb[i] = f32(r % 4 ? r & 0x807fffffu : r & 0x80000000u);
            }
            if (lowp_splitmix64(st) & 1)
                xb[fz_int(st, 0, 15)] = ldexpf(1.0f, fz_int(st, -126, -100));
            break;
        case 4: { /* all zero: +0, -0 or both */
            int how = fz_int(st, 0, 2);
            for (int i = 0; i < 16; i++)
                xb[i] = how == 0 || (how == 2 && (lowp_splitmix64(st) & 1)) ? 0.0f : -0.0f;
            break;
        }
        case 5: /* one NaN or Inf among unit data: the group goes back to block.c */
            for (int i = 0; i < 16; i++)
                xb[i] = (float)fz_gauss(st);
            xb[fz_int(st, 0, 15)] = fz_special(st);
            break;
        default: /* unit-scale Gaussian, so that most groups run in the kernel */
            for (int i = 0; i < 16; i++)
                xb[i] = (float)ldexp(fz_gauss(st), E / 4);
            break;
        }
    }
}

START_TEST(test_fused_avx2_kernel_equals_generic)
{
    int prev = lowp_block_fast_limit_isa(LOWP_BLOCK_ISA_AVX2);
    if (lowp_block_fast_isa() != LOWP_BLOCK_ISA_AVX2) {
        lowp_block_fast_limit_isa(prev);
        fprintf(stderr, "fused AVX2 kernel: this CPU has no AVX2; not run\n");
        return;
    }
    enum { GROUPS = 300, NB = GROUPS * 16 * 2 }; /* NVFP4 blocks: half random, half adversarial */
    float *x = malloc(NB * 16 * sizeof *x);
    fz_bufs bu = {malloc(NB * 8 + 16), malloc(NB * 8 + 16), malloc(NB + 16), malloc(NB + 16)};
    ck_assert(x != NULL && bu.cg != NULL && bu.cf != NULL && bu.sg != NULL && bu.sf != NULL);
    uint64_t st = 0x61767832u;
    fz_pool(&st, x, GROUPS);
    av_pool(&st, x + GROUPS * 16 * 16, GROUPS * 16);
#if defined(__x86_64__) && defined(__SSE2__)
    static const unsigned csr[] = {0x1f80, 0x1f80 | 0x8040 /* FTZ DAZ */, 0x1f80 | 0x0040 /* DAZ */,
                                   0x1f80 | 0x6000 /* RZ */, 0x1f80 | 0x4000 /* RU */};
    unsigned saved = _mm_getcsr();
#else
    static const unsigned csr[] = {0};
#endif
    int bad = 0;
    size_t total = 0, fast = 0;
    for (size_t m = 0; m < N_ELEMS(csr) && bad < 5; m++)
        for (size_t ci = 0; ci < N_ELEMS(fz_cfg) && bad < 5; ci++) {
            lowp_block_format f = fz_cfg[ci].f;
            lowp_recipe r = fz_cfg[ci].r;
            size_t nb = NB * 16 / lowp_block_size(f), m_total = 0, m_fast = 0;
            lowp_global_scale gss[6] = {GS_ONE, GS_ONE, GS_ONE, GS_ONE, GS_ONE, GS_ONE};
            size_t ngs = 1;
            if (f == LOWP_NVFP4 && m == 0) {
                gss[1] = lowp_recipe_global_scale(f, r, 425.09467f);
                gss[2] = gs_enc(6.0f);
                gss[3] = gs_dec(1.0f / 6.0f);
                gss[4] = gs_dec(0x1p-120f);
                gss[5] = gs_enc(1e30f);
                ngs = 6;
            } else if (f == LOWP_NVFP4) {
                /* Under a non-default MXCSR, the global scales of the test above: with
                 * others (S = 6 under RU) block.c and both kernels already disagree. */
                gss[1] = lowp_recipe_global_scale(f, r, 425.09467f);
                gss[2] = gs_enc(0x1p-100f);
                gss[3] = gs_dec(0x1p-110f);
                ngs = 4;
            }
#if defined(__x86_64__) && defined(__SSE2__)
            _mm_setcsr(csr[m]);
#endif
            for (size_t gi = 0; gi < ngs; gi++)
                for (unsigned flags = 0; flags <= LOWP_BLOCK_SCALE_UP; flags++) {
                    size_t before = fast;
                    bad += fz_config(f, r, gss[gi], flags, x, nb, m == 0 && gi == 0, m == 0 ? 150 : 30,
                                     &st, &bu, &m_total, &fast);
                    m_fast += fast - before;
                }
#if defined(__x86_64__) && defined(__SSE2__)
            _mm_setcsr(saved);
            if (bad)
                fprintf(stderr, "  (AVX2 kernel, MXCSR 0x%04x)\n", csr[m]);
#endif
            total += m_total;
            /* the AVX2 kernel made a good part of the blocks in every mode (modelopt
             * hands back more: scales above 448), and handed some back (NaN/Inf blocks) */
            if (bad == 0)
                ck_assert_msg(m_fast > m_total / 8 && m_fast < m_total,
                              "%s/%s MXCSR mode %zu: AVX2 kernel made %zu of %zu blocks",
                              lowp_block_format_name(f), lowp_recipe_name(r), m, m_fast, m_total);
        }
    /* Element counts that are not a multiple of the block: both paths refuse, write
     * nothing. */
    for (size_t ci = 0; ci < N_ELEMS(fz_cfg); ci++) {
        lowp_block_format f = fz_cfg[ci].f;
        size_t bs = lowp_block_size(f);
        for (size_t n = 2; n < 3 * bs; n += 2) {
            if (n % bs == 0)
                continue;
            for (int path = LOWP_BLOCK_PATH_GENERIC; path <= LOWP_BLOCK_PATH_AUTO; path++) {
                memset(bu.cf, 0xA5, 2 * bs);
                memset(bu.sf, 0x5A, 4);
                size_t fb = 7;
                int rc = lowp_block_quantize_path(f, fz_cfg[ci].r, GS_ONE, 0, x, n, bu.cf, bu.sf, NULL,
                                                  NULL, 0, path, &fb);
                int untouched = bu.cf[0] == 0xA5 && bu.cf[2 * bs - 1] == 0xA5 && bu.sf[0] == 0x5A;
                ck_assert_msg(rc == -1 && fb == 0 && untouched,
                              "%s n=%zu path %d: returned %d, %zu fused blocks, output %s",
                              lowp_block_format_name(f), n, path, rc, fb,
                              untouched ? "untouched" : "written");
            }
        }
    }
    lowp_block_fast_limit_isa(prev);
    free(x);
    free(bu.cg);
    free(bu.cf);
    free(bu.sg);
    free(bu.sf);
    ck_assert_msg(bad == 0, "%d AVX2 fused/generic mismatches (see stderr)", bad);
    ck_assert_msg(fast > total / 4, "AVX2 kernel made %zu of %zu blocks", fast, total);
}
END_TEST

/* ---------------------------------------------------------------------------------- */

static Suite *block_suite(void)
{
    Suite *s = suite_create("block");
    TCase *api = tcase_create("api");
    tcase_add_test(api, test_api_sizes_names_layout);
    tcase_add_test(api, test_recipe_check_refuses_undefined_pairs_with_reason);
    tcase_add_test(api, test_n_not_multiple_of_block_size_refused_with_reason);
    tcase_add_test(api, test_rcp_approx_ftz_anchors);
    suite_add_tcase(s, api);

    TCase *nv = tcase_create("nvfp4_recipe_edges");
    tcase_add_test(nv, test_nvfp4_nan_ignored_in_amax_trtllm_exact_sglang);
    tcase_add_test(nv, test_nvfp4_nan_propagates_modelopt);
    tcase_add_test(nv, test_nvfp4_inf_saturates_scale_to_448);
    tcase_add_test(nv, test_nvfp4_inf_modelopt_clamps_scale_to_448);
    tcase_add_test(nv, test_nvfp4_zero_block_scale_0x00_trtllm_exact_sglang);
    tcase_add_test(nv, test_nvfp4_zero_block_modelopt_scale_one_0x38);
    tcase_add_test(nv, test_nvfp4_block_scale_e4m3_subnormal);
    tcase_add_test(nv, test_nvfp4_scale_underflow_to_zero_rcp_of_zero_is_inf_trtllm_sglang);
    tcase_add_test(nv, test_nvfp4_scale_underflow_to_zero_exact_clamps_flt_max);
    tcase_add_test(nv, test_nvfp4_scale_underflow_modelopt_clamps_to_2m9);
    tcase_add_test(nv, test_nvfp4_denormal_inputs);
    tcase_add_test(nv, test_nvfp4_e2m1_ties_after_scaling_round_to_even);
    tcase_add_test(nv, test_nvfp4_formats_5_8_vectors_trtllm_vs_exact);
    tcase_add_test(nv, test_nvfp4_global_scale_from_amax_guards);
    tcase_add_test(nv, test_nvfp4_global_scale_from_dec);
    tcase_add_test(nv, test_nvfp4_trtllm_global_amax_zero_or_inf_consequences);
    tcase_add_test(nv, test_nvfp4_modelopt_global_amax_zero_or_inf_consequences);
    tcase_add_test(nv, test_nvfp4_scale_up_flag_exact_and_modelopt);
    suite_add_tcase(s, nv);

    TCase *mx = tcase_create("mx_recipe_edges");
    tcase_add_test(mx, test_mxfp4_ocp_floor_vs_rceil_table_4_4);
    tcase_add_test(mx, test_mxfp8_ocp_vs_rceil_amax_448_480_500);
    tcase_add_test(mx, test_mx_ocp_amax_prevfloat_pow2_exact_exponent);
    tcase_add_test(mx, test_mx_scale_exponent_top_flt_max);
    tcase_add_test(mx, test_mx_scale_exponent_below_m127_clamps);
    tcase_add_test(mx, test_mxfp4_trtllm_exp2f_rcp_quirk_code_0x00_factor_one);
    tcase_add_test(mx, test_mxfp8_trtllm_rcp_ftz_of_scale_2m127_is_inf);
    tcase_add_test(mx, test_mx_nan_in_block_ocp_rceil_propagate_trtllm_ignores);
    tcase_add_test(mx, test_mx_inf_in_block);
    tcase_add_test(mx, test_mx_zero_block_scale_2m127);
    tcase_add_test(mx, test_mx_element_ties_round_to_even);
    tcase_add_test(mx, test_nvfp4_torchao_scale_floor_and_e2m1_bits);
    tcase_add_test(mx, test_mx_torchao_floor_ceil_even_scale_rules);
    tcase_add_test(mx, test_mx_torchao_rceil_log2_rounding_and_code0);
    tcase_add_test(mx, test_mx_modelopt_ties_down_and_zero_sign);
    tcase_add_test(mx, test_compressed_tensors_nvfp4_eps_and_mx_rounding);
    tcase_add_test(mx, test_cuda_ops_compressed_tensors_and_modelopt_mx);
    suite_add_tcase(s, mx);

    TCase *el = tcase_create("per_tensor_and_passthrough");
    tcase_add_test(el, test_fp8_global_scale_amax_zero_inf_nan_is_one);
    tcase_add_test(el, test_fp8_true_division_and_satfinite);
    tcase_add_test(el, test_bf16_passthrough_nan_0x7fff_and_rne);
    tcase_add_test(el, test_bf16_dequantize_passthrough);
    suite_add_tcase(s, el);

    TCase *lay = tcase_create("layout_counts_dequantize");
    tcase_add_test(lay, test_packing_low_nibble_is_even_element);
    tcase_add_test(lay, test_multiple_blocks_independent_scales);
    tcase_add_test(lay, test_counts_accumulate_not_cleared);
    tcase_add_test(lay, test_large_n_equals_block_by_block);
    tcase_add_test(lay, test_dequantize_exact_f64_and_single_rounding_f32);
    tcase_add_test(lay, test_dequantize_nan_scale_makes_block_nan);
    suite_add_tcase(s, lay);

    TCase *fz = tcase_create("fused_kernel");
    tcase_set_timeout(fz, 120);
    tcase_add_test(fz, test_nvfp4_mxfp4_fused_kernel_equals_generic);
#if defined(__x86_64__) && defined(__SSE2__)
    tcase_add_test(fz, test_fused_kernel_equals_generic_under_mxcsr);
    tcase_add_test(fz, test_counts_do_not_depend_on_daz);
#endif
    tcase_add_test(fz, test_fused_avx2_kernel_equals_generic);
    suite_add_tcase(s, fz);
    return s;
}

int main(void)
{
    return lowp_test_main(block_suite(), LOWP_TEST_FORK);
}
