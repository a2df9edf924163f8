/* ref/oracle/src/oracle_block.c: the MPFR model of the block quantizer recipes (lowp/oracle_block.h).
 *
 * Models ref/recipes.md from the text, step by step, not from ref/block/src/block.c:
 *   - "a * b", "a / b": exact MPFR product / quotient rounded once to binary32 (precision 24,
 *     MPFR exponent range of binary32, mpfr_subnormalize), f32_mul / f32_div below;
 *   - "(float)(1.0 / (double)S)": a 53-bit quotient, then rounded to binary32 (two roundings,
 *     as the C expression does), f32_recip_via_f64;
 *   - rcp~: lowp_rcp_approx_ftz, the recipes' definition of rcp.approx.ftz.f32;
 *   - e4m3, e4m3_torch, e2m1, e8m0_up, elem: lowp_oracle_encode_f32 under the profile the
 *     notation table of recipes.md names; val(c): lowp_oracle_decode (exact);
 *   - amax, min, max, comparisons, 2^k: exact operations on binary32 values, no rounding.
 *
 * Invariants:
 *   - a NaN produced by an operation is +qNaN (0x7FC00000), see the header;
 *   - every public function leaves the calling thread's MPFR exponent range as it found it;
 *   - no state: every call is a pure function of its arguments.
 *
 * Readings of recipes.md where the text leaves a choice (each is also a test expectation):
 *   R1 min(v, FLT_MAX) in exact is fminf: a NaN v gives FLT_MAX (TE and the exact-mode
 *      kernels call fminf; recipes.md quotes the transpose variant's fminf for the same
 *      reason), for the encode scale S from a NaN amax too.
 *   R2 MX ocp: the elements are divided by the clamped scale 2^max(e, -127) = val(q) (what
 *      is stored; microxcaling and torchao divide by the clamped scale), and a NaN scale
 *      code 0xFF (NaN or Inf amax) makes every element elem(NaN), as rceil says.
 *   R3 LOWP_BLOCK_SCALE_UP: e4m3 "rounded up, satfinite" is (e4m3, ocp, ru, sat) for exact;
 *      for modelopt, whose e4m3_torch does not saturate, (e4m3, ocp, ru, nosat).
 *   R4 modelopt e2m1: the sign bit comes from the scaled value x / d (ModelOpt's
 *      _cast_fp4 tests weight < 0 on the scaled tensor), so -0 and a negative x / d that
 *      underflows to -0 give 0x0.
 *   R5 counts: "saturated" compares the binary32 scaled value (x * o or x / d, as the recipe
 *      computes it) with the largest finite element value, strictly, and needs the code to
 *      be the largest finite magnitude. For BF16 that is an input in (max, max + ulp/2),
 *      rounded down to max; an overflow to Inf is not counted (its code is not finite).
 *   R6 global scales: a field a recipe does not use is 1.0 (enc of modelopt, sglang-kv and
 *      FP8; both fields of MX and BF16). The tests compare only the fields a recipe reads.
 *   R7 counts: "coded as zero" (flushed) and "decode to NaN" (nan_out) are read on the
 *      decoded value val(element) * val(scale) * g of lowp_block_dequantize_f64, so a zero
 *      block scale flushes, and a NaN g, or an Inf g times a zero, decodes to NaN.
 *   R8 LOWP_BLOCK_SCALE_UP acts where recipes.md names it (NVFP4 exact and modelopt) and
 *      nowhere else: trtllm and sglang-kv have no such step, so the flag is ignored there.
 *   R9 a NaN from an operation is positive (see the header), in the GPU recipes as in
 *      modelopt, for which recipes.md states it; so the rounded-up e4m3 of a NaN sf (Inf * 0
 *      when S is 0, or a NaN S) is 0x7F.
 */
#include "lowp/bits.h"
#include "lowp/oracle_block.h"

#include <float.h>
#include <math.h>
#include <mpfr.h>
#include <stdlib.h>
#include <string.h>

#include "lowp/oracle.h"

/* ---------------------------------------------------------------------------------------
 * The oracle's own tables.
 * ------------------------------------------------------------------------------------- */

typedef struct {
    size_t bs;          /* block size */
    lowp_format elem;   /* element format */
    int scale;          /* 0 none, LOWP_E4M3 + 1 or LOWP_E8M0 + 1: the block scale format + 1 */
    unsigned recipes;   /* bit r: recipes.md defines recipe r for the format */
    float max_elem;     /* largest finite element value */
    int emax_elem;      /* MX ocp: floor(log2(max_elem)) */
} bfmt;

#define RB(r) (1u << (r))
/* the torch-op MX recipes (recipes.md): ModelOpt, torchao's four modes, compressed-tensors */
#define MX_TORCH                                                                                   \
    (RB(LOWP_RECIPE_MODELOPT) | RB(LOWP_RECIPE_TORCHAO_FLOOR) | RB(LOWP_RECIPE_TORCHAO_CEIL) |     \
     RB(LOWP_RECIPE_TORCHAO_EVEN) | RB(LOWP_RECIPE_TORCHAO_RCEIL) | RB(LOWP_RECIPE_COMPRESSED_TENSORS))

static const bfmt BF[LOWP_BLOCK_FORMAT_COUNT] = {
    [LOWP_NVFP4] = {16, LOWP_E2M1, LOWP_E4M3 + 1,
                    RB(LOWP_RECIPE_TRTLLM) | RB(LOWP_RECIPE_EXACT) | RB(LOWP_RECIPE_MODELOPT) |
                        RB(LOWP_RECIPE_SGLANG_KV) | RB(LOWP_RECIPE_TORCHAO) |
                        RB(LOWP_RECIPE_COMPRESSED_TENSORS),
                    6.0f, 2},
    [LOWP_MXFP4] = {32, LOWP_E2M1, LOWP_E8M0 + 1,
                    RB(LOWP_RECIPE_OCP) | RB(LOWP_RECIPE_RCEIL) | RB(LOWP_RECIPE_TRTLLM) | MX_TORCH, 6.0f, 2},
    [LOWP_MXFP8] = {32, LOWP_E4M3, LOWP_E8M0 + 1,
                    RB(LOWP_RECIPE_OCP) | RB(LOWP_RECIPE_RCEIL) | RB(LOWP_RECIPE_TRTLLM) | MX_TORCH, 448.0f,
                    8},
    [LOWP_FP8_E4M3] = {1, LOWP_E4M3, 0, RB(LOWP_RECIPE_EXACT), 448.0f, 8},
    [LOWP_FP8_E5M2] = {1, LOWP_E5M2, 0, RB(LOWP_RECIPE_EXACT), 57344.0f, 15},
    [LOWP_BF16_PASS] = {1, LOWP_BF16, 0, RB(LOWP_RECIPE_EXACT), 0x1.fep127f, 127},
};

static int valid_fr(lowp_block_format f, lowp_recipe r)
{
    return (unsigned)f < LOWP_BLOCK_FORMAT_COUNT && (unsigned)r < LOWP_RECIPE_COUNT &&
           (BF[f].recipes & RB(r)) != 0;
}

size_t lowp_oracle_block_size(lowp_block_format f)
{
    return (unsigned)f < LOWP_BLOCK_FORMAT_COUNT ? BF[f].bs : 0;
}

int lowp_oracle_recipe_defined(lowp_block_format f, lowp_recipe r)
{
    return valid_fr(f, r);
}

/* ---------------------------------------------------------------------------------------
 * binary32 arithmetic with MPFR.
 * ------------------------------------------------------------------------------------- */

/* binary32 in MPFR's convention x = 0.1b...b * 2^E: the smallest subnormal 2^-149 has
 * E = -148, the largest finite value (1 - 2^-24) * 2^128 has E = 128. */
#define F32_EMIN (-148)
#define F32_EMAX 128

typedef struct {
    mpfr_exp_t emin, emax;
} erange;

static erange range_enter(void)
{
    erange old = {mpfr_get_emin(), mpfr_get_emax()};
    mpfr_set_emin(F32_EMIN);
    mpfr_set_emax(F32_EMAX);
    return old;
}

static void range_leave(erange old)
{
    mpfr_set_emin(old.emin);
    mpfr_set_emax(old.emax);
}

#define QNAN_BITS 0x7FC00000u
#define POS_INF_BITS_ 0x7F800000u

/* z (precision 24, ternary t of the operation that produced it) as a binary32: the
 * subnormal range is rounded again with the ternary, so the result is the one rounding of
 * the exact value. Needs the binary32 exponent range. */
static float f32_get(mpfr_t z, int t)
{
    if (mpfr_nan_p(z))
        return lowp_f32_from_bits(QNAN_BITS);
    mpfr_subnormalize(z, t, MPFR_RNDN);
    return mpfr_get_flt(z, MPFR_RNDN); /* exact: z is a binary32 value now */
}

/* These two run inside range_enter / range_leave. */
static float f32_mul(float a, float b)
{
    MPFR_DECL_INIT(x, 24);
    MPFR_DECL_INIT(y, 24);
    MPFR_DECL_INIT(z, 24);
    mpfr_set_flt(x, a, MPFR_RNDN); /* exact */
    mpfr_set_flt(y, b, MPFR_RNDN);
    int t = mpfr_mul(z, x, y, MPFR_RNDN);
    return f32_get(z, t);
}

static float f32_div(float a, float b)
{
    MPFR_DECL_INIT(x, 24);
    MPFR_DECL_INIT(y, 24);
    MPFR_DECL_INIT(z, 24);
    mpfr_set_flt(x, a, MPFR_RNDN);
    mpfr_set_flt(y, b, MPFR_RNDN);
    int t = mpfr_div(z, x, y, MPFR_RNDN);
    return f32_get(z, t);
}

/* (float)(1.0 / (double)s): the binary64 quotient (53 bits; 1/s of a binary32 s is inside
 * binary64's normal range, and a 53-bit value below 2^128 is inside our MPFR range, while
 * one at or above 2^128 would become Inf in the conversion anyway), then one rounding of
 * that binary64 value to binary32. */
static float f32_recip_via_f64(float s)
{
    MPFR_DECL_INIT(one, 24);
    MPFR_DECL_INIT(y, 24);
    MPFR_DECL_INIT(w, 53);
    MPFR_DECL_INIT(z, 24);
    mpfr_set_ui(one, 1, MPFR_RNDN);
    mpfr_set_flt(y, s, MPFR_RNDN);
    mpfr_div(w, one, y, MPFR_RNDN);
    if (mpfr_nan_p(w))
        return lowp_f32_from_bits(QNAN_BITS);
    int t = mpfr_set(z, w, MPFR_RNDN);
    return f32_get(z, t);
}

float lowp_oracle_f32_mul(float a, float b)
{
    erange old = range_enter();
    float r = f32_mul(a, b);
    range_leave(old);
    return r;
}

float lowp_oracle_f32_div(float a, float b)
{
    erange old = range_enter();
    float r = f32_div(a, b);
    range_leave(old);
    return r;
}

/* fminf: a NaN operand is ignored (R1). */
static float min_ign(float a, float b)
{
    if (isnan(a))
        return b;
    if (isnan(b))
        return a;
    return a < b ? a : b;
}

/* ---------------------------------------------------------------------------------------
 * Conversions (recipes.md notation table) and scale values.
 * ------------------------------------------------------------------------------------- */

static uint16_t enc(lowp_format f, lowp_profile p, lowp_round r, int sat, float v)
{
    uint16_t c = 0;
    /* Every combination below is in ref/profiles.md's table; a failure is an oracle bug,
     * which the all-ones code makes loud in any comparison. */
    if (lowp_oracle_encode_f32(f, p, r, sat, v, &c) != 0)
        return 0xFFFF;
    return c;
}

static uint8_t e4m3(float v) /* cvt.rn.satfinite.e4m3x2.f32 */
{
    return (uint8_t)enc(LOWP_E4M3, LOWP_PROFILE_CUDA, LOWP_RN, LOWP_SAT_ON, v);
}

static uint8_t e4m3_up_sat(float v) /* R3 */
{
    return (uint8_t)enc(LOWP_E4M3, LOWP_PROFILE_OCP, LOWP_RU, LOWP_SAT_ON, v);
}

static uint8_t e4m3_torch(float v) /* tensor.to(float8_e4m3fn) */
{
    return (uint8_t)enc(LOWP_E4M3, LOWP_PROFILE_TORCH, LOWP_RN, LOWP_SAT_OFF, v);
}

static uint8_t e4m3_torch_up(float v) /* R3 */
{
    return (uint8_t)enc(LOWP_E4M3, LOWP_PROFILE_OCP, LOWP_RU, LOWP_SAT_OFF, v);
}

static uint8_t e8m0_up(float v) /* __nv_cvt_float_to_e8m0(v, __NV_SATFINITE, cudaRoundPosInf) */
{
    return (uint8_t)enc(LOWP_E8M0, LOWP_PROFILE_CUDA, LOWP_RU, LOWP_SAT_ON, v);
}

/* elem / e2m1 / BF16: the CUDA round-to-nearest conversion of the element format,
 * saturating for E2M1/E4M3/E5M2 (satfinite), not for BF16 (__float2bfloat16_rn). */
static uint16_t elem(lowp_format f, float v)
{
    return enc(f, LOWP_PROFILE_CUDA, LOWP_RN, f == LOWP_BF16 ? LOWP_SAT_OFF : LOWP_SAT_ON, v);
}

/* e2m1_modelopt: RNE saturating magnitude, sign bit from v < 0 (R4), NaN -> 0x7. */
static uint16_t e2m1_modelopt(float v)
{
    if (isnan(v))
        return 0x7;
    uint16_t mag = enc(LOWP_E2M1, LOWP_PROFILE_CUDA, LOWP_RN, LOWP_SAT_ON, fabsf(v)) & 0x7u;
    return (uint16_t)(mag | (v < 0.0f ? 0x8u : 0u));
}

static float val(lowp_format f, uint8_t c)
{
    return (float)lowp_oracle_decode(f, c); /* exact: every scale value is a binary32 value */
}

/* ---------------------------------------------------------------------------------------
 * Block amax.
 * ------------------------------------------------------------------------------------- */

/* amax_ign: max |x_i|, NaN ignored, 0 for an all-NaN block. */
static float amax_ign(const float *x, size_t n)
{
    float m = 0.0f;
    for (size_t i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        if (!isnan(a) && a > m)
            m = a;
    }
    return m;
}

/* amax_nan: max |x_i|, NaN (positive: abs clears the sign) if any element is NaN. */
static float amax_nan(const float *x, size_t n)
{
    float m = 0.0f;
    for (size_t i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        if (isnan(a))
            return lowp_f32_from_bits(QNAN_BITS);
        if (a > m)
            m = a;
    }
    return m;
}

/* ---------------------------------------------------------------------------------------
 * The recipes. Each fills q (scale code, 0 if none), the trace's amax / scale_in / factor /
 * divides, and the scaled values and codes. Inside range_enter.
 * ------------------------------------------------------------------------------------- */

typedef struct {
    const float *x;
    size_t n;
    uint16_t *codes;
    lowp_oracle_block_trace *t;
    uint8_t q;
} blk;

/* c_i = conv(x_i * o) or conv(x_i / d) with the element conversion of the format. */
static void elements(blk *b, lowp_format ef, float factor, int divides)
{
    b->t->factor = factor;
    b->t->divides = divides;
    for (size_t i = 0; i < b->n; i++) {
        float v = divides ? f32_div(b->x[i], factor) : f32_mul(b->x[i], factor);
        b->t->scaled[i] = v;
        b->codes[i] = elem(ef, v);
    }
}

static uint8_t nvfp4_q_trtllm(float S, float m)
{
    return e4m3(f32_mul(S, f32_mul(m, lowp_rcp_approx_ftz(6.0f))));
}

static float nvfp4_o_trtllm(float S, uint8_t q)
{
    return lowp_rcp_approx_ftz(f32_mul(val(LOWP_E4M3, q), lowp_rcp_approx_ftz(S)));
}

static float exact_sf(float S, float m)
{
    return m != 0.0f ? f32_mul(m, f32_mul(S, f32_div(1.0f, 6.0f))) : 0.0f;
}

static float nvfp4_o_exact(float S, uint8_t q)
{
    return min_ign(f32_div(1.0f, f32_mul(val(LOWP_E4M3, q), f32_div(1.0f, S))), FLT_MAX);
}

/* NVFP4 trtllm: sf = S * (m * rcp~(6)); q = e4m3(sf); o = m != 0 ? rcp~(val(q) * rcp~(S)) : 0 */
static void nvfp4_trtllm(blk *b, lowp_global_scale gs)
{
    float S = gs.enc, m = amax_ign(b->x, b->n);
    float sf = f32_mul(S, f32_mul(m, lowp_rcp_approx_ftz(6.0f)));
    b->t->amax = m;
    b->t->scale_in = sf;
    b->q = e4m3(sf);
    float o = m != 0.0f ? nvfp4_o_trtllm(S, b->q) : 0.0f;
    elements(b, LOWP_E2M1, o, 0);
}

/* NVFP4 exact: sf = m != 0 ? m * (S * RN(1/6)) : 0; q = e4m3(sf) (or up);
 * o = m != 0 ? min(1 / (val(q) * (1 / S)), FLT_MAX) : 0 */
static void nvfp4_exact(blk *b, lowp_global_scale gs, unsigned flags)
{
    float S = gs.enc, m = amax_ign(b->x, b->n);
    float sf = exact_sf(S, m);
    b->t->amax = m;
    b->t->scale_in = sf;
    b->q = (flags & LOWP_BLOCK_SCALE_UP) ? e4m3_up_sat(sf) : e4m3(sf);
    float o = m != 0.0f ? nvfp4_o_exact(S, b->q) : 0.0f;
    elements(b, LOWP_E2M1, o, 0);
}

/* NVFP4 modelopt: s = m / (6 * g); s = s == 0 ? 1 : s; s = max(s, 2^-9) (NaN stays);
 * q = e4m3_torch(s) (or up); d = val(q) * g; c_i = e2m1_modelopt(x_i / d) */
static void nvfp4_modelopt(blk *b, lowp_global_scale gs, unsigned flags)
{
    float g = gs.dec, m = amax_nan(b->x, b->n);
    float s = f32_div(m, f32_mul(6.0f, g));
    if (s == 0.0f)
        s = 1.0f;
    if (!isnan(s) && s < 0x1p-9f)
        s = 0x1p-9f;
    if (!isnan(s) && s > 448.0f) /* clamp(min=2**-9, max=448), ModelOpt 0.47 */
        s = 448.0f;
    if (isnan(s) && !(flags & LOWP_BLOCK_NAN_CANONICAL)) /* torch.max's NaN on the CPU: negative */
        s = lowp_f32_from_bits(0xFFC00000u);
    b->t->amax = m;
    b->t->scale_in = s;
    b->q = (flags & LOWP_BLOCK_SCALE_UP) ? e4m3_torch_up(s) : e4m3_torch(s);
    float d = f32_mul(val(LOWP_E4M3, b->q), g);
    b->t->factor = d;
    b->t->divides = 1;
    for (size_t i = 0; i < b->n; i++) {
        float v = f32_div(b->x[i], d);
        b->t->scaled[i] = v;
        b->codes[i] = e2m1_modelopt(v);
    }
}

/* NVFP4 sglang-kv: sf = rcp~(g) * (m * rcp~(6)); q = e4m3(sf);
 * o = m != 0 ? rcp~(val(q) * g) : 0 */
static void nvfp4_sglang(blk *b, lowp_global_scale gs)
{
    float g = gs.dec, m = amax_ign(b->x, b->n);
    float sf = f32_mul(lowp_rcp_approx_ftz(g), f32_mul(m, lowp_rcp_approx_ftz(6.0f)));
    b->t->amax = m;
    b->t->scale_in = sf;
    b->q = e4m3(sf);
    float o = m != 0.0f ? lowp_rcp_approx_ftz(f32_mul(val(LOWP_E4M3, b->q), g)) : 0.0f;
    elements(b, LOWP_E2M1, o, 0);
}

/* MX ocp: e = floor(log2 m) - emax from m's exponent field (zero / subnormal: -127);
 * q = NaN or Inf m, or e > 127 ? 0xFF : max(e, -127) + 127; c_i = elem(x_i / val(q)) (R2) */
static void mx_ocp(blk *b, const bfmt *d)
{
    float m = amax_nan(b->x, b->n);
    b->t->amax = m;
    b->t->scale_in = m;
    if (isnan(m) || isinf(m)) {
        b->q = 0xFF;
    } else {
        int ebits = (int)((lowp_f32_bits(m) >> 23) & 0xFFu);
        int e = (ebits == 0 ? -127 : ebits - 127) - d->emax_elem;
        b->q = e > 127 ? 0xFF : (uint8_t)((e < -127 ? -127 : e) + 127);
    }
    elements(b, d->elem, val(LOWP_E8M0, b->q), 1);
}

/* MX rceil: q = e8m0_up(m * RN(1/max)); c_i = elem(x_i / val(q)) */
static void mx_rceil(blk *b, const bfmt *d)
{
    float m = amax_nan(b->x, b->n);
    float sv = f32_mul(m, f32_div(1.0f, d->max_elem));
    b->t->amax = m;
    b->t->scale_in = sv;
    b->q = e8m0_up(sv);
    elements(b, d->elem, val(LOWP_E8M0, b->q), 1);
}

/* MX trtllm: MXFP8 q = e8m0_up(m * rcp~(448)), o = m != 0 ? rcp~(val(q)) : 0;
 * MXFP4 q = e8m0_up(m * rcp~(6)), o = m != 0 ? (q == 0 ? 1 : 2^(127 - q)) : 0 */
static void mx_trtllm(blk *b, const bfmt *d, lowp_block_format f)
{
    float m = amax_ign(b->x, b->n);
    float sv = f32_mul(m, lowp_rcp_approx_ftz(d->max_elem));
    b->t->amax = m;
    b->t->scale_in = sv;
    b->q = e8m0_up(sv);
    float o;
    if (m == 0.0f)
        o = 0.0f;
    else if (f == LOWP_MXFP8)
        o = lowp_rcp_approx_ftz(val(LOWP_E8M0, b->q));
    else
        o = b->q == 0 ? 1.0f : ldexpf(1.0f, 127 - (int)b->q); /* exact: 2^126 .. 2^-128 */
    elements(b, d->elem, o, 0);
}

/* FP8 exact: c_i = elem(x_i / g) */
static void fp8_exact(blk *b, const bfmt *d, lowp_global_scale gs)
{
    b->t->amax = amax_ign(b->x, b->n);
    b->t->scale_in = lowp_f32_from_bits(QNAN_BITS);
    b->q = 0;
    elements(b, d->elem, gs.dec, 1);
}

/* BF16: c_i = __float2bfloat16_rn(x_i) */
static void bf16_exact(blk *b)
{
    b->t->amax = amax_ign(b->x, b->n);
    b->t->scale_in = lowp_f32_from_bits(QNAN_BITS);
    b->t->factor = 1.0f;
    b->t->divides = 0;
    b->q = 0;
    for (size_t i = 0; i < b->n; i++) {
        b->t->scaled[i] = b->x[i];
        b->codes[i] = elem(LOWP_BF16, b->x[i]);
    }
}

/* ---------------------------------------------------------------------------------------
 * The torch-op recipes (recipes.md "torch-op recipes"): torchao, ModelOpt MX and
 * compressed-tensors. Their NaN bits are part of the bytes (torchao's E2M1 cast reads
 * the payload; torch's E4M3 cast keeps the sign), so these follow recipes.md's T rules
 * instead of the +qNaN convention above:
 *   T1 a NaN operand is the result (quietened); the block factor's if it is NaN;
 *   T2 an invalid operation (Inf / Inf, 0 * Inf, 0 / 0) gives x86's default NaN 0xFFC00000;
 *   T3 with LOWP_BLOCK_NAN_CANONICAL every NaN element value is 0x7FFFFFFF.
 * ------------------------------------------------------------------------------------- */

static float t_quiet(float v)
{
    return lowp_f32_from_bits(lowp_f32_bits(v) | 0x00400000u);
}

/* a * b, a / b under T2: a NaN operand is the result (the first, if both), quietened; an
 * invalid operation gives 0xFFC00000. */
static float t_arith(float a, float b, int divides)
{
    if (isnan(a))
        return t_quiet(a);
    if (isnan(b))
        return t_quiet(b);
    float r = divides ? f32_div(a, b) : f32_mul(a, b);
    return isnan(r) ? lowp_f32_from_bits(0xFFC00000u) : r;
}
#define t_mul(a, b) t_arith((a), (b), 0)
#define t_div(a, b) t_arith((a), (b), 1)

/* x * f or x / f for the elements: T1, a NaN block factor f wins over a NaN x. */
static float t_op(float x, float f, int divides)
{
    if (isnan(f))
        return t_quiet(f);
    return t_arith(x, f, divides);
}

/* log2 rounded once to binary32 (T4: torch.log2 taken as correctly rounded). */
static float t_log2(float v)
{
    if (isnan(v) || v < 0.0f)
        return lowp_f32_from_bits(QNAN_BITS);
    if (v == 0.0f)
        return -INFINITY;
    if (isinf(v))
        return INFINITY;
    MPFR_DECL_INIT(x, 24);
    MPFR_DECL_INIT(z, 24);
    mpfr_set_flt(x, v, MPFR_RNDN);
    int t = mpfr_log2(z, x, MPFR_RNDN);
    return f32_get(z, t);
}

/* torch.clamp(v, lo, hi): NaN passes. */
static float t_clamp(float v, float lo, float hi)
{
    if (isnan(v))
        return v;
    return v < lo ? lo : (v > hi ? hi : v);
}

/* torchao E2M1 (recipes.md e2m1_torchao): RNE saturating magnitude; a NaN is 3 when its
 * payload bit 21 is clear, 4 when set; the sign bit is the value's sign bit. */
static uint16_t e2m1_torchao(float v)
{
    uint32_t b = lowp_f32_bits(v);
    uint16_t s = (uint16_t)((b >> 31) << 3);
    if (isnan(v))
        return (uint16_t)(s | ((b & 0x00200000u) ? 4u : 3u));
    return (uint16_t)(s | (enc(LOWP_E2M1, LOWP_PROFILE_CUDA, LOWP_RN, LOWP_SAT_ON, fabsf(v)) & 0x7u));
}

/* ModelOpt MXFP4 E2M1: magnitude index #{b in 0.25 0.75 1.25 1.75 2.5 3.5 5 : |v| > b};
 * sign bit set unless v > 0 (so for +-0 too); NaN -> 0x8. */
static uint16_t e2m1_modelopt_mx(float v)
{
    static const float bd[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
    if (isnan(v))
        return 0x8;
    unsigned k = 0;
    for (int i = 0; i < 7; i++)
        k += fabsf(v) > bd[i];
    return (uint16_t)(k | (v > 0.0f ? 0u : 8u));
}

/* compressed-tensors E2M1: RNE saturating magnitude, sign bit for v < 0, NaN -> 0x0. */
static uint16_t e2m1_ct(float v)
{
    if (isnan(v))
        return 0;
    return (uint16_t)((enc(LOWP_E2M1, LOWP_PROFILE_CUDA, LOWP_RN, LOWP_SAT_ON, fabsf(v)) & 0x7u) |
                      (v < 0.0f ? 8u : 0u));
}

/* torch's float8_e4m3fn -> float32: exact, and NaN codes give 0x7FF00000 with the sign. */
static float val_e4m3_torch(uint8_t q)
{
    if ((q & 0x7F) == 0x7F)
        return lowp_f32_from_bits(0x7FF00000u | ((uint32_t)(q >> 7) << 31));
    return val(LOWP_E4M3, q);
}

static uint8_t e4m3_torch_sat(float v) /* clamped first: the torch cast never overflows */
{
    return e4m3_torch(v);
}

/* The element loop of the torch-op recipes: v_i = x_i op factor (T1, T2, T3), then the
 * format's conversion: E4M3 clamp(v, +-448) and the torch cast; E2M1 by kind. */
enum { E2_TORCHAO, E2_MODELOPT, E2_CT };
static void t_elements(blk *b, const bfmt *d, float factor, int divides, unsigned flags, int kind)
{
    b->t->factor = factor;
    b->t->divides = divides;
    for (size_t i = 0; i < b->n; i++) {
        float v = t_op(b->x[i], factor, divides);
        if (isnan(v) && (flags & LOWP_BLOCK_NAN_CANONICAL))
            v = lowp_f32_from_bits(0x7FFFFFFFu);
        b->t->scaled[i] = v;
        if (d->elem == LOWP_E4M3)
            b->codes[i] = e4m3_torch_sat(t_clamp(v, -448.0f, 448.0f));
        else if (kind == E2_MODELOPT)
            b->codes[i] = e2m1_modelopt_mx(v);
        else if (kind == E2_CT)
            b->codes[i] = e2m1_ct(t_clamp(v, -6.0f, 6.0f));
        else
            b->codes[i] = e2m1_torchao(v);
    }
}

/* torch.amax over a NaN block: the default quiet NaN 0x7FC00000 (torchao, ModelOpt). */
static float t_amax(const float *x, size_t n)
{
    return amax_nan(x, n);
}

/* torchao NVFP4: s = clamp((m / 6) / g, 2^-6, 448); q = e4m3_torch(s);
 * r = (1 / g) / val_torch(q); c_i = e2m1_torchao(clamp(x_i * r, +-6)) */
static void nvfp4_torchao(blk *b, lowp_global_scale gs, unsigned flags)
{
    float g = gs.dec, m = t_amax(b->x, b->n);
    float s = t_clamp(t_div(t_div(m, 6.0f), g), 0x1p-6f, 448.0f);
    b->t->amax = m;
    b->t->scale_in = s;
    b->q = e4m3_torch(s);
    float qv = val_e4m3_torch(b->q);
    float r = t_div(t_div(1.0f, g), qv);
    t_elements(b, &BF[LOWP_NVFP4], r, 0, flags, E2_TORCHAO);
}

/* torchao MX FLOOR / CEIL / EVEN (recipes.md): from m's bits; EVEN first rounds m at the
 * element's mantissa width; CEIL adds 1 for a nonzero fraction; e - emax clamped to
 * [-127, 128]; NaN m -> 0xFF; the divisor is 2^(q - 127) (Inf for 255), 2^-126 for q 0. */
static void mx_torchao_pow2(blk *b, const bfmt *d, lowp_recipe r, unsigned flags)
{
    float m = t_amax(b->x, b->n);
    b->t->amax = m;
    b->t->scale_in = m;
    uint32_t mb = lowp_f32_bits(m);
    int mbits = d->elem == LOWP_E2M1 ? 1 : 3;
    if (r == LOWP_RECIPE_TORCHAO_EVEN && !isnan(m))
        mb = (mb + (1u << (23 - mbits - 1))) & 0xFF800000u;
    long e = (long)((mb >> 23) & 0xFF) - 127;
    if (r == LOWP_RECIPE_TORCHAO_CEIL && (mb & 0x7FFFFFu) != 0)
        e += 1;
    e -= d->emax_elem;
    if (e < -127)
        e = -127;
    if (e > 128)
        e = 128;
    b->q = isnan(m) ? 0xFF : (uint8_t)(e + 127);
    float div = b->q == 0 ? 0x1p-126f : (b->q == 0xFF ? INFINITY : ldexpf(1.0f, (int)b->q - 127));
    t_elements(b, d, div, 1, flags, E2_TORCHAO);
}

/* torchao MX RCEIL (eager): d = m / max; q = NaN ? 0xFF : Inf ? 0xFE :
 * clamp(ceil(log2 d), -127, 127) + 127; factor d (NaN), 2^-127 (0xFE), 1 (q 0) or
 * 2^(127 - q); c_i = elem(clamp(x_i * factor, +-max)) */
static void mx_torchao_rceil(blk *b, const bfmt *d, unsigned flags)
{
    float m = t_amax(b->x, b->n);
    float dd = t_div(m, d->max_elem);
    b->t->amax = m;
    b->t->scale_in = dd;
    float f;
    if (isnan(dd)) {
        b->q = 0xFF;
        f = dd;
    } else if (isinf(dd)) {
        b->q = 0xFE;
        f = 0x1p-127f;
    } else {
        float l = ceilf(t_log2(dd));
        l = l < -127.0f ? -127.0f : (l > 127.0f ? 127.0f : l);
        b->q = (uint8_t)(int)(l + 127.0f);
        f = b->q == 0 ? 1.0f : ldexpf(1.0f, 127 - (int)b->q);
    }
    t_elements(b, d, f, 0, flags, E2_TORCHAO);
}

/* ModelOpt MXFP4: e = ceil(max(log2(m / 6), -127)) (NaN stays); q = e + 127 for a finite
 * e, else 0; c_i = e2m1_modelopt_mx(x_i / 2^e). MXFP8: e = clamp(ceil(d > 0 ? log2 d :
 * -127), -127, 127) with d = m / 448; c_i = e4m3_torch(clamp(x_i * 2^(127 - q), +-448)). */
static void mx_modelopt(blk *b, const bfmt *d, unsigned flags)
{
    float m = t_amax(b->x, b->n);
    b->t->amax = m;
    if (d->elem == LOWP_E2M1) {
        float dd = t_div(m, 6.0f);
        b->t->scale_in = dd;
        float l = t_log2(dd);
        if (!isnan(l) && l < -127.0f)
            l = -127.0f;
        float e = ceilf(l);
        b->q = isfinite(e) ? (uint8_t)(int)(e + 127.0f) : 0;
        float div = isnan(e) ? e : (isinf(e) ? INFINITY : ldexpf(1.0f, (int)e));
        t_elements(b, d, div, 1, flags, E2_MODELOPT);
    } else {
        float dd = t_div(m, 448.0f);
        b->t->scale_in = dd;
        float e = ceilf(dd > 0.0f ? t_log2(dd) : -127.0f);
        e = e < -127.0f ? -127.0f : (e > 127.0f ? 127.0f : e);
        b->q = (uint8_t)(int)(e + 127.0f);
        t_elements(b, d, ldexpf(1.0f, 127 - (int)b->q), 0, flags, E2_MODELOPT);
    }
}

/* compressed-tensors amax: the NaN is 0xFFFFFFFF (0x7FFFFFFF with NAN_CANONICAL). */
static float ct_amax(const float *x, size_t n, unsigned flags)
{
    float m = amax_nan(x, n);
    if (isnan(m))
        m = lowp_f32_from_bits((flags & LOWP_BLOCK_NAN_CANONICAL) ? 0x7FFFFFFFu : 0xFFFFFFFFu);
    return m;
}

/* compressed-tensors NVFP4: s = clamp(S * (m / 6), +-448); q = e4m3_torch(s), 0x20 (the
 * eps 0.125) when that is a zero; divisor val_torch(q) / S; c_i = e2m1_ct(clamp(x_i / d, +-6)).
 * The NaN of m keeps its sign through S * (m / 6) (T1). */
static void nvfp4_ct(blk *b, lowp_global_scale gs, unsigned flags)
{
    float S = gs.enc, m = ct_amax(b->x, b->n, flags);
    float s = t_mul(S, t_div(m, 6.0f));
    s = t_clamp(s, -448.0f, 448.0f);
    b->t->amax = m;
    b->t->scale_in = s;
    b->q = e4m3_torch(s);
    if ((b->q & 0x7F) == 0)
        b->q = 0x20;
    float qv = val_e4m3_torch(b->q);
    float div = t_div(qv, S);
    t_elements(b, &BF[LOWP_NVFP4], div, 1, flags, E2_CT);
}

/* compressed-tensors MX: p2 = (bits(m) + 2^21) & 0xFF800000 (integer wrap); q =
 * clamp(127 + floor(log2 p2) - emax, 0, 255); divisor 2^(q - 127), Inf for 255, whose
 * stored code is 0x7F (compress_mx_scale of Inf). */
static void mx_ct(blk *b, const bfmt *d, unsigned flags)
{
    float m = ct_amax(b->x, b->n, flags);
    float p2 = lowp_f32_from_bits((lowp_f32_bits(m) + 0x200000u) & 0xFF800000u);
    b->t->amax = m;
    b->t->scale_in = p2;
    float l = t_log2(p2);
    float e = isnan(l) ? 0.0f : 127.0f + floorf(l) - (float)d->emax_elem;
    e = e < 0.0f ? 0.0f : (e > 255.0f ? 255.0f : e);
    uint8_t code = (uint8_t)(int)e;
    float div = code == 255 ? INFINITY : ldexpf(1.0f, (int)code - 127);
    b->q = code == 255 ? 0x7F : code;
    t_elements(b, d, div, 1, flags, E2_CT);
}

/* ---------------------------------------------------------------------------------------
 * Counting (recipes.md "Counting"), from the codes and the trace.
 * ------------------------------------------------------------------------------------- */

static uint16_t code_mag_mask(lowp_format f)
{
    return f == LOWP_E2M1 ? 0x7u : f == LOWP_BF16 ? 0x7FFFu : 0x7Fu;
}

static uint16_t code_max_mag(lowp_format f)
{
    switch (f) {
    case LOWP_E2M1: return 0x7;
    case LOWP_E4M3: return 0x7E;
    case LOWP_E5M2: return 0x7B;
    default: return 0x7F7F; /* BF16 */
    }
}

/* The decoded value of element i, val(code) * val(scale) * g as lowp_block_dequantize_f64
 * defines it (g = gs.dec for the formats with a global scale), in binary64: exact, since
 * the three significands have at most 4, 4 and 24 bits and the exponents stay within
 * [-160, 140]. Only its zero-ness and NaN-ness are used. */
static double decoded(const bfmt *d, lowp_block_format f, lowp_global_scale gs, uint8_t q,
                      uint16_t code)
{
    double v = lowp_oracle_decode(d->elem, code);
    if (d->scale != 0)
        v *= lowp_oracle_decode((lowp_format)(d->scale - 1), q);
    if (f == LOWP_NVFP4 || f == LOWP_FP8_E4M3 || f == LOWP_FP8_E5M2)
        v *= (double)gs.dec;
    return v;
}

/* recipes.md "Counting". "flushed" and "nan_out" look at the decoded value (R7). */
static void count_block(const bfmt *d, lowp_block_format f, lowp_global_scale gs, const blk *b,
                        lowp_quant_counts *c)
{
    c->elements += b->n;
    c->blocks += 1;
    if (d->scale == LOWP_E4M3 + 1) {
        uint8_t a = b->q & 0x7F;
        c->scale_nan += a == 0x7F;
        c->scale_zero += a == 0;
        c->scale_subnormal += a >= 0x01 && a <= 0x07;
    } else if (d->scale == LOWP_E8M0 + 1) {
        c->scale_nan += b->q == 0xFF;
    }
    uint16_t mm = code_mag_mask(d->elem), top = code_max_mag(d->elem);
    double maxv = (double)d->max_elem;
    for (size_t i = 0; i < b->n; i++) {
        float x = b->x[i];
        uint16_t code = b->codes[i], mag = code & mm;
        double v = decoded(d, f, gs, b->q, code);
        c->nan_in += (size_t)(isnan(x) != 0);
        c->inf_in += (size_t)(isinf(x) != 0);
        c->nan_out += (size_t)(isnan(v) != 0);
        if (isfinite(x) && x != 0.0f) {
            c->saturated += (size_t)(mag == top && fabs((double)b->t->scaled[i]) > maxv);
            c->flushed += (size_t)(v == 0.0);
        }
    }
}

/* ---------------------------------------------------------------------------------------
 * Entry points.
 * ------------------------------------------------------------------------------------- */

int lowp_oracle_block_quantize(lowp_block_format f, lowp_recipe r, lowp_global_scale gs,
                               unsigned flags, const float *x, uint16_t *codes, uint8_t *scale,
                               lowp_quant_counts *counts, lowp_oracle_block_trace *trace)
{
    if (!valid_fr(f, r))
        return -1;
    const bfmt *d = &BF[f];
    lowp_oracle_block_trace local;
    blk b = {x, d->bs, codes, trace ? trace : &local, 0};
    memset(b.t, 0, sizeof *b.t);
    erange old = range_enter();
    switch (f) {
    case LOWP_NVFP4:
        if (r == LOWP_RECIPE_TRTLLM)
            nvfp4_trtllm(&b, gs);
        else if (r == LOWP_RECIPE_EXACT)
            nvfp4_exact(&b, gs, flags);
        else if (r == LOWP_RECIPE_MODELOPT)
            nvfp4_modelopt(&b, gs, flags);
        else if (r == LOWP_RECIPE_TORCHAO)
            nvfp4_torchao(&b, gs, flags);
        else if (r == LOWP_RECIPE_COMPRESSED_TENSORS)
            nvfp4_ct(&b, gs, flags);
        else
            nvfp4_sglang(&b, gs);
        break;
    case LOWP_MXFP4:
    case LOWP_MXFP8:
        if (r == LOWP_RECIPE_OCP)
            mx_ocp(&b, d);
        else if (r == LOWP_RECIPE_RCEIL)
            mx_rceil(&b, d);
        else if (r == LOWP_RECIPE_TRTLLM)
            mx_trtllm(&b, d, f);
        else if (r == LOWP_RECIPE_MODELOPT)
            mx_modelopt(&b, d, flags);
        else if (r == LOWP_RECIPE_TORCHAO_RCEIL)
            mx_torchao_rceil(&b, d, flags);
        else if (r == LOWP_RECIPE_COMPRESSED_TENSORS)
            mx_ct(&b, d, flags);
        else
            mx_torchao_pow2(&b, d, r, flags);
        break;
    case LOWP_FP8_E4M3:
    case LOWP_FP8_E5M2:
        fp8_exact(&b, d, gs);
        break;
    default:
        bf16_exact(&b);
        break;
    }
    range_leave(old);
    if (scale != NULL)
        *scale = b.q;
    if (counts != NULL)
        count_block(d, f, gs, &b, counts);
    return 0;
}

lowp_global_scale lowp_oracle_recipe_global_scale(lowp_block_format f, lowp_recipe r, float amax)
{
    lowp_global_scale gs = {1.0f, 1.0f}; /* R6 */
    if (!valid_fr(f, r))
        return gs;
    erange old = range_enter();
    if (f == LOWP_NVFP4 && r == LOWP_RECIPE_TRTLLM) {
        /* S = 2688 / amax, g = 1 / S: no guards */
        gs.enc = f32_div(2688.0f, amax);
        gs.dec = f32_div(1.0f, gs.enc);
    } else if (f == LOWP_NVFP4 && r == LOWP_RECIPE_EXACT) {
        /* S = min(2688 / amax, FLT_MAX) (R1); S = 1 when amax is 0 or S is 0;
         * g = (float)(1.0 / (double)S) */
        float S = min_ign(f32_div(2688.0f, amax), FLT_MAX);
        if (amax == 0.0f || S == 0.0f)
            S = 1.0f;
        gs.enc = S;
        gs.dec = f32_recip_via_f64(S);
    } else if (f == LOWP_NVFP4 && (r == LOWP_RECIPE_MODELOPT || r == LOWP_RECIPE_TORCHAO)) {
        gs.dec = f32_div(amax, 2688.0f); /* no guards */
    } else if (f == LOWP_NVFP4 && r == LOWP_RECIPE_COMPRESSED_TENSORS) {
        /* S = 2688 / max(amax, FLT_MIN), 1 when that is NaN or Inf; g = 1 / S */
        float S = f32_div(2688.0f, isnan(amax) ? amax : (amax < FLT_MIN ? FLT_MIN : amax));
        gs.enc = isfinite(S) ? S : 1.0f;
        gs.dec = f32_div(1.0f, gs.enc);
    } else if (f == LOWP_NVFP4) {
        gs.dec = 1.0f; /* sglang-kv: uncalibrated */
    } else if (f == LOWP_FP8_E4M3 || f == LOWP_FP8_E5M2) {
        /* g = amax / max, 1 when amax is 0, Inf or NaN */
        if (!(amax == 0.0f || isinf(amax) || isnan(amax)))
            gs.dec = f32_div(amax, BF[f].max_elem);
    }
    range_leave(old);
    return gs;
}

lowp_global_scale lowp_oracle_global_scale_from_dec(lowp_block_format f, lowp_recipe r, float dec)
{
    lowp_global_scale gs = {1.0f, 1.0f}; /* R6 */
    if (!valid_fr(f, r) || !(f == LOWP_NVFP4 || f == LOWP_FP8_E4M3 || f == LOWP_FP8_E5M2))
        return gs;
    gs.dec = dec;
    if (f == LOWP_NVFP4 && (r == LOWP_RECIPE_TRTLLM || r == LOWP_RECIPE_EXACT)) {
        erange old = range_enter();
        gs.enc = f32_div(1.0f, dec); /* S = 1 / g */
        range_leave(old);
    }
    return gs;
}

/* ---------------------------------------------------------------------------------------
 * Helpers for building edge blocks.
 * ------------------------------------------------------------------------------------- */

/* Next binary32 up (+1) or down (-1) in value order, through the bit patterns; stays at
 * +-Inf. */
static float f32_step(float v, int dir)
{
    uint32_t b = lowp_f32_bits(v);
    if ((b & 0x7FFFFFFFu) == 0)
        return dir > 0 ? lowp_f32_from_bits(1u) : lowp_f32_from_bits(0x80000001u);
    int neg = (b >> 31) != 0;
    if ((dir > 0) != neg)
        b = (b & 0x7FFFFFFFu) == POS_INF_BITS_ ? b : b + 1;
    else
        b = b - 1;
    return lowp_f32_from_bits(b);
}

int lowp_oracle_solve_scaled(float factor, int divides, float t, float *x)
{
    if (!isfinite(factor) || factor == 0.0f || !isfinite(t))
        return -1;
    erange old = range_enter();
    float c = divides ? f32_mul(t, factor) : f32_div(t, factor);
    int rc = -1;
    float lo = c, hi = c;
    for (int k = 0; k < 8 && rc != 0; k++) {
        float cand[2] = {lo, hi};
        for (int j = 0; j < 2 && rc != 0; j++) {
            float v = divides ? f32_div(cand[j], factor) : f32_mul(cand[j], factor);
            if (isfinite(cand[j]) && lowp_f32_bits(v) == lowp_f32_bits(t)) {
                *x = cand[j];
                rc = 0;
            }
        }
        lo = f32_step(lo, -1);
        hi = f32_step(hi, +1);
    }
    range_leave(old);
    return rc;
}

static float scale_in_of(lowp_block_format f, lowp_recipe r, lowp_global_scale gs,
                         unsigned flags, float m)
{
    float x[LOWP_ORACLE_BLOCK_MAX] = {0};
    uint16_t codes[LOWP_ORACLE_BLOCK_MAX];
    lowp_oracle_block_trace t;
    x[0] = m;
    lowp_oracle_block_quantize(f, r, gs, flags, x, codes, NULL, NULL, &t);
    return t.scale_in;
}

int lowp_oracle_amax_for_scale_in(lowp_block_format f, lowp_recipe r, lowp_global_scale gs,
                                  unsigned flags, float target, float *m)
{
    if (!valid_fr(f, r) || BF[f].scale == 0 || isnan(target))
        return -1;
    if (!(scale_in_of(f, r, gs, flags, lowp_f32_from_bits(POS_INF_BITS_)) >= target))
        return -1;
    uint32_t lo = 0, hi = POS_INF_BITS_;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (scale_in_of(f, r, gs, flags, lowp_f32_from_bits(mid)) >= target)
            hi = mid;
        else
            lo = mid + 1;
    }
    *m = lowp_f32_from_bits(lo);
    return scale_in_of(f, r, gs, flags, *m) == target ? 1 : 0;
}

/* ---------------------------------------------------------------------------------------
 * NVFP4 trtllm vs exact: the disagreement set for one S.
 * ------------------------------------------------------------------------------------- */

uint8_t lowp_oracle_nvfp4_scale_code(int exact, float S, float m)
{
    erange old = range_enter();
    uint8_t q = exact ? e4m3(exact_sf(S, m)) : nvfp4_q_trtllm(S, m);
    range_leave(old);
    return q;
}

float lowp_oracle_nvfp4_factor(int exact, float S, uint8_t q)
{
    erange old = range_enter();
    float o = exact ? nvfp4_o_exact(S, q) : nvfp4_o_trtllm(S, q);
    range_leave(old);
    return o;
}

#define POS_INF_BITS 0x7F800000u

/* A monotone non-decreasing step function on the nonnegative binary32 bit patterns
 * 0..POS_INF_BITS, with small integer values (a code whose order is its value's order). */
typedef struct {
    int kind;   /* 0: scale code of m; 1: e2m1 code of x * o */
    int exact;  /* which recipe (kind 0) */
    float S, o;
} stepfn;

static unsigned step_eval(const stepfn *s, uint32_t u)
{
    float v = lowp_f32_from_bits(u);
    if (s->kind == 0)
        return s->exact ? e4m3(exact_sf(s->S, v)) : nvfp4_q_trtllm(s->S, v);
    return elem(LOWP_E2M1, f32_mul(v, s->o));
}

/* Smallest u in 0..POS_INF_BITS with step_eval(u) >= k, or UINT32_MAX if none. */
static uint32_t step_first_ge(const stepfn *s, unsigned k)
{
    if (step_eval(s, POS_INF_BITS) < k)
        return UINT32_MAX;
    uint32_t lo = 0, hi = POS_INF_BITS; /* answer in [lo, hi] */
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (step_eval(s, mid) >= k)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The runs of 0..POS_INF_BITS where two step functions with values 0..kmax differ: every
 * step of either function is a run boundary; between boundaries both are constant. Adjacent
 * runs with the same pair of values are merged. Returns the number of runs (and *out,
 * malloc'd), or (size_t)-1 on allocation failure. */
static size_t diff_runs(const stepfn *f1, const stepfn *f2, unsigned kmax,
                        lowp_oracle_f32_run **out, uint64_t *count)
{
    uint32_t *bp = malloc((2u * kmax + 1u) * sizeof *bp);
    lowp_oracle_f32_run *runs = malloc((2u * kmax + 2u) * sizeof *runs);
    if (bp == NULL || runs == NULL) {
        free(bp);
        free(runs);
        return (size_t)-1;
    }
    size_t nb = 0, nr = 0;
    bp[nb++] = 0;
    for (unsigned k = 1; k <= kmax; k++) {
        uint32_t a = step_first_ge(f1, k), b = step_first_ge(f2, k);
        if (a != UINT32_MAX)
            bp[nb++] = a;
        if (b != UINT32_MAX)
            bp[nb++] = b;
    }
    qsort(bp, nb, sizeof *bp, cmp_u32);
    *count = 0;
    for (size_t i = 0; i < nb; i++) {
        if (i > 0 && bp[i] == bp[i - 1])
            continue;
        uint32_t lo = bp[i], hi = POS_INF_BITS;
        for (size_t j = i + 1; j < nb; j++)
            if (bp[j] != lo) {
                hi = bp[j] - 1;
                break;
            }
        unsigned a = step_eval(f1, lo), b = step_eval(f2, lo);
        if (a == b)
            continue;
        if (nr > 0 && runs[nr - 1].hi + 1 == lo && runs[nr - 1].a == a && runs[nr - 1].b == b)
            runs[nr - 1].hi = hi;
        else
            runs[nr++] = (lowp_oracle_f32_run){lo, hi, (uint16_t)a, (uint16_t)b};
        *count += (uint64_t)(hi - lo) + 1;
    }
    free(bp);
    *out = runs;
    return nr;
}

void lowp_oracle_nvfp4_diff_free(lowp_oracle_nvfp4_diff *d)
{
    if (d == NULL)
        return;
    free(d->amax_runs);
    for (size_t i = 0; i < d->n_q; i++)
        free(d->q[i].runs);
    free(d->q);
    memset(d, 0, sizeof *d);
}

int lowp_oracle_nvfp4_diff_compute(float S, lowp_oracle_nvfp4_diff *out)
{
    memset(out, 0, sizeof *out);
    if (!(S > 0.0f) || isinf(S))
        return -1;
    out->S = S;
    int rc = 0;
    erange old = range_enter();
    /* (a) scale codes 0x00..0x7E of m >= 0: both are monotone (products of nonnegative
     * values rounded to nearest, then a monotone conversion). */
    stepfn qt = {0, 0, S, 0.0f}, qe = {0, 1, S, 0.0f};
    size_t n = diff_runs(&qt, &qe, 0x7E, &out->amax_runs, &out->amax_count);
    if (n == (size_t)-1) {
        rc = -2;
        goto done;
    }
    out->n_amax_runs = n;
    /* (b), (c) */
    out->q = calloc(0x7F, sizeof *out->q);
    if (out->q == NULL) {
        rc = -2;
        goto done;
    }
    for (unsigned q = 0; q <= 0x7E; q++) {
        float ot = nvfp4_o_trtllm(S, (uint8_t)q), oe = nvfp4_o_exact(S, (uint8_t)q);
        if (lowp_f32_bits(ot) == lowp_f32_bits(oe))
            continue;
        lowp_oracle_nvfp4_q_diff *qd = &out->q[out->n_q++];
        qd->q = (uint8_t)q;
        qd->o_trtllm = ot;
        qd->o_exact = oe;
        /* e2m1(x * o) for x >= 0 is monotone when o >= 0: codes 0..7 (NaN from 0 * Inf and
         * Inf * 0 gives 7, which is also the top of the other values there). */
        stepfn ct = {1, 0, S, ot}, ce = {1, 1, S, oe};
        uint64_t half = 0;
        n = diff_runs(&ct, &ce, 7, &qd->runs, &half);
        if (n == (size_t)-1) {
            rc = -2;
            goto done;
        }
        qd->n_runs = n;
        qd->x_count = 2 * half;
        out->x_count += qd->x_count;
    }
done:
    range_leave(old);
    if (rc != 0)
        lowp_oracle_nvfp4_diff_free(out);
    return rc;
}
