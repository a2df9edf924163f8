/* ref/codec/src/format.c: format constants, names, profile resolution, scalar encode and
 * exact decode. The behaviour of every profile is specified in ref/profiles.md. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lowp/bits.h"
#include "lowp/why.h"
#include "format_internal.h"

const lowp_format_info lowp_format_table[LOWP_FORMAT_COUNT] = {
    /* name    bits e  m   bias max     sign    inf     nan_min */
    {"e2m1", 4, 2, 1, 1, 0x7, 0x8, 0, 0x8},
    {"e4m3", 8, 4, 3, 7, 0x7e, 0x80, 0, 0x7f},
    {"e5m2", 8, 5, 2, 15, 0x7b, 0x80, 0x7c, 0x7d},
    {"e8m0", 8, 8, 0, 127, 0xfe, 0, 0, 0xff},
    {"bf16", 16, 8, 7, 127, 0x7f7f, 0x8000, 0x7f80, 0x7f81},
    {"f16", 16, 5, 10, 15, 0x7bff, 0x8000, 0x7c00, 0x7c01},
};

static const char *const round_names[LOWP_ROUND_COUNT] = {"rn", "rz", "ru", "rd", "rna"};
static const char *const profile_names[LOWP_PROFILE_COUNT] = {"cuda", "torch", "ml_dtypes", "ocp"};

const char *lowp_format_name(lowp_format f)
{
    return (unsigned)f < LOWP_FORMAT_COUNT ? lowp_format_table[f].name : "?";
}
const char *lowp_round_name(lowp_round r)
{
    return (unsigned)r < LOWP_ROUND_COUNT ? round_names[r] : "?";
}
const char *lowp_profile_name(lowp_profile p)
{
    return (unsigned)p < LOWP_PROFILE_COUNT ? profile_names[p] : "?";
}

static int parse_name(const char *name, const char *const *names, unsigned count, unsigned stride)
{
    for (unsigned i = 0; name != NULL && i < count; i++) {
        const char *n = *(const char *const *)((const char *)names + (size_t)i * stride);
        if (strcmp(name, n) == 0)
            return (int)i;
    }
    return -1;
}

int lowp_format_parse(const char *name, lowp_format *out)
{
    int i = parse_name(name, &lowp_format_table[0].name, LOWP_FORMAT_COUNT, sizeof lowp_format_table[0]);
    if (i < 0)
        return -1;
    *out = (lowp_format)i;
    return 0;
}
int lowp_round_parse(const char *name, lowp_round *out)
{
    int i = parse_name(name, round_names, LOWP_ROUND_COUNT, sizeof round_names[0]);
    if (i < 0)
        return -1;
    *out = (lowp_round)i;
    return 0;
}
int lowp_profile_parse(const char *name, lowp_profile *out)
{
    int i = parse_name(name, profile_names, LOWP_PROFILE_COUNT, sizeof profile_names[0]);
    if (i < 0 && name != NULL && strcmp(name, "ml-dtypes") == 0)
        i = LOWP_PROFILE_ML_DTYPES;
    if (i < 0)
        return -1;
    *out = (lowp_profile)i;
    return 0;
}

unsigned lowp_format_bits(lowp_format f) { return lowp_format_table[f].bits; }
unsigned lowp_format_code_count(lowp_format f) { return 1u << lowp_format_table[f].bits; }
int lowp_format_mantissa_bits(lowp_format f) { return lowp_format_table[f].mbits; }
int lowp_format_exponent_bits(lowp_format f) { return lowp_format_table[f].ebits; }
int lowp_format_bias(lowp_format f) { return lowp_format_table[f].bias; }
uint16_t lowp_format_max_code(lowp_format f) { return lowp_format_table[f].max_mag; }

/* ---- profile resolution ---------------------------------------------------- */

#define MODE_BIT(m) (1u << (m))
#define ALL_MODES 0x1fu

typedef struct profile_rule {
    unsigned modes;         /* allowed rounding modes */
    int sat_default;        /* -1: the combination does not exist */
    int sat_allowed[2];     /* [nosat, sat] */
    const char *mode_reason;
    const char *sat_reason[2];
} profile_rule;

static const char *const no_e2m1_torch =
    "PyTorch 2.11 has no float to float4_e2m1fn_x2 cast (the dtype only holds bits)";
static const char *const e2m1_nosat =
    "E2M1 has no Inf or NaN, so every implementation saturates it: --no-saturate does not apply";

static profile_rule rule_for(lowp_format f, lowp_profile p)
{
    profile_rule r = {0, -1, {0, 0}, NULL, {NULL, NULL}};
    int fp8 = (f == LOWP_E4M3 || f == LOWP_E5M2);
    int half = (f == LOWP_BF16 || f == LOWP_F16);
    switch (p) {
    case LOWP_PROFILE_CUDA:
        if (f == LOWP_E2M1) {
            r = (profile_rule){MODE_BIT(LOWP_RN) | MODE_BIT(LOWP_RZ), 1, {0, 1},
                               "CUDA's __nv_cvt_float_to_fp4 rounds only to nearest even (rn) or toward zero (rz)",
                               {e2m1_nosat, NULL}};
        } else if (fp8) {
            r = (profile_rule){MODE_BIT(LOWP_RN), 1, {1, 1},
                               "CUDA's fp8 conversions (__nv_cvt_float_to_fp8, cvt.rn) round only to nearest even (rn)",
                               {NULL, NULL}};
        } else if (f == LOWP_E8M0) {
            r = (profile_rule){MODE_BIT(LOWP_RZ) | MODE_BIT(LOWP_RU), 1, {1, 1},
                               "CUDA converts to E8M0 only toward zero (rz, cudaRoundZero) or up (ru, cudaRoundPosInf); it has no round-to-nearest",
                               {NULL, NULL}};
        } else {
            r = (profile_rule){ALL_MODES & ~MODE_BIT(LOWP_RNA), 0, {1, 0},
                               "CUDA's bf16/f16 conversions have rn, rz, ru and rd but no ties-away mode",
                               {NULL, "CUDA's bf16/f16 conversions do not saturate: overflow gives Inf"}};
        }
        break;
    case LOWP_PROFILE_TORCH:
        if (f == LOWP_E2M1) {
            r.mode_reason = no_e2m1_torch;
            return r;
        }
        r = (profile_rule){MODE_BIT(LOWP_RN), 0, {1, 0},
                           "PyTorch casts round only to nearest (rn)",
                           {NULL, "PyTorch 2.11 casts do not saturate (E4M3 overflow gives NaN; E5M2, bf16 and f16 give Inf; E8M0 gives NaN)"}};
        break;
    case LOWP_PROFILE_ML_DTYPES:
        if (f == LOWP_E2M1) {
            r = (profile_rule){MODE_BIT(LOWP_RN), 1, {0, 1},
                               "ml_dtypes astype rounds only to nearest even (rn)", {e2m1_nosat, NULL}};
        } else {
            r = (profile_rule){MODE_BIT(LOWP_RN), 0, {1, 0},
                               "ml_dtypes astype rounds only to nearest (rn)",
                               {NULL, "ml_dtypes astype does not saturate (E4M3 overflow gives NaN; E5M2, bf16 and f16 give Inf; E8M0 gives NaN)"}};
        }
        break;
    case LOWP_PROFILE_OCP:
        if (f == LOWP_E2M1)
            r = (profile_rule){ALL_MODES, 1, {0, 1}, NULL, {e2m1_nosat, NULL}};
        else
            r = (profile_rule){ALL_MODES, half ? 0 : 1, {1, 1}, NULL, {NULL, NULL}};
        break;
    }
    return r;
}

int lowp_codec_init(lowp_codec *c, lowp_format f, lowp_profile p, lowp_round r, int saturate,
                    char *why, size_t why_len)
{
    if ((unsigned)f >= LOWP_FORMAT_COUNT)
        return lowp_why_set(why, why_len, "unknown format");
    if ((unsigned)p >= LOWP_PROFILE_COUNT)
        return lowp_why_set(why, why_len, "unknown profile");
    if ((unsigned)r >= LOWP_ROUND_COUNT)
        return lowp_why_set(why, why_len, "unknown rounding mode");
    profile_rule rule = rule_for(f, p);
    if (rule.sat_default < 0)
        return lowp_why_set(why, why_len, "%s", rule.mode_reason);
    if (!(rule.modes & MODE_BIT(r)))
        return lowp_why_set(why, why_len, "%s", rule.mode_reason);
    int sat = saturate == LOWP_SAT_DEFAULT ? rule.sat_default : (saturate != 0);
    if (!rule.sat_allowed[sat])
        return lowp_why_set(why, why_len, "%s",
                            rule.sat_reason[sat] ? rule.sat_reason[sat]
                                                 : "unsupported overflow policy");

    const lowp_format_info *fi = &lowp_format_table[f];
    memset(c, 0, sizeof *c);
    c->format = f;
    c->profile = p;
    c->round = r;
    c->saturate = sat;
    c->nan_rule = LOWP_NAN_FIXED;

    /* Overflow and Inf (ref/profiles.md "Finite values and overflow", "Inf input"). */
    if (sat) {
        c->ovf_mag = c->inf_mag = fi->max_mag;
    } else if (fi->inf_mag) {
        c->ovf_mag = c->inf_mag = fi->inf_mag;
    } else {
        c->ovf_mag = c->inf_mag = 0x7f; /* E4M3 has no Inf: NaN, keeping the sign everywhere */
    }

    /* NaN codes (ref/profiles.md "NaN input"). Default: canonical NaN keeping the sign. */
    uint16_t s = fi->sign_bit;
    uint16_t canon;
    switch (f) {
    case LOWP_E2M1: canon = 0x7; break;
    case LOWP_E4M3: canon = 0x7f; break;
    case LOWP_E5M2: canon = 0x7f; break;
    case LOWP_E8M0: canon = 0xff; s = 0; break;
    case LOWP_BF16: canon = 0x7fc0; break;
    default: canon = 0x7e00; break;
    }
    c->nan_code[0] = canon;
    c->nan_code[1] = (uint16_t)(canon | s);
    c->f64_via_f32 = 0;
    switch (p) {
    case LOWP_PROFILE_CUDA:
        if (f == LOWP_BF16 || f == LOWP_F16)
            canon = 0x7fff;
        c->nan_code[0] = c->nan_code[1] = canon; /* CUDA drops the NaN sign */
        c->nan_code_f64[0] = canon;
        c->nan_code_f64[1] = (f == LOWP_E4M3 || f == LOWP_E5M2) ? (uint16_t)(canon | s) : canon;
        if (f == LOWP_E5M2) {
            c->nan_code_f64[0] = c->nan_code_f64[1] = 0x7e; /* | sign | top payload bits */
            c->nan_f64_keeps_top_bits = 1;
        }
        break;
    case LOWP_PROFILE_TORCH:
        /* Measured on torch 2.11 CPU tensors (vectorized AVX2/AVX-512 kernels, which
         * every x86-64 CPU with AVX2 takes, whatever the tensor size): bf16 NaN gives
         * 0xFFFF whatever its sign; f16 goes through the F16C conversion, which quiets the
         * NaN and keeps its top payload bits. */
        if (f == LOWP_BF16)
            c->nan_code[0] = c->nan_code[1] = 0xffff;
        if (f == LOWP_F16)
            c->nan_rule = LOWP_NAN_PAYLOAD_QUIET;
        c->f64_via_f32 = 1;
        break;
    case LOWP_PROFILE_ML_DTYPES:
        if (f == LOWP_E2M1) {
            c->nan_code[0] = 0x8; /* quiet_NaN() is the -0 pattern; +NaN gives it, -NaN its negation */
            c->nan_code[1] = 0x0;
        } else if (f == LOWP_E5M2) {
            c->nan_code[0] = 0x7e;
            c->nan_code[1] = 0xfe;
        }
        /* ml_dtypes casts a double through float; numpy's own float16 rounds the double
         * directly (npy_double_to_half) and keeps the top payload bits of any NaN. */
        c->f64_via_f32 = f != LOWP_F16;
        if (f == LOWP_F16)
            c->nan_rule = LOWP_NAN_PAYLOAD;
        break;
    case LOWP_PROFILE_OCP:
        break;
    }
    if (p != LOWP_PROFILE_CUDA) {
        c->nan_code_f64[0] = c->nan_code[0];
        c->nan_code_f64[1] = c->nan_code[1];
    }

    if (f == LOWP_E8M0) {
        int strict = (p == LOWP_PROFILE_ML_DTYPES || p == LOWP_PROFILE_OCP);
        c->e8m0_zero_code = strict ? 0xff : 0x00;
        c->e8m0_neg_is_nan = strict;
        c->e8m0_sub_up_any = (p == LOWP_PROFILE_TORCH || p == LOWP_PROFILE_ML_DTYPES);
    }
    return 0;
}

/* ---- scalar encode ---------------------------------------------------------- */

static uint32_t encode_bits(const lowp_codec *c, uint32_t b)
{
    const int mode = (int)c->round;
    switch (c->format) {
    case LOWP_E2M1: return lowp_encode_bits_signed(c, b, mode, 1, 0);
    case LOWP_E4M3: return lowp_encode_bits_signed(c, b, mode, 3, -6);
    case LOWP_E5M2: return lowp_encode_bits_signed(c, b, mode, 2, -14);
    case LOWP_E8M0: return lowp_encode_bits_e8m0(c, b, mode);
    case LOWP_BF16: return lowp_encode_bits_signed(c, b, mode, 7, -126);
    default: return lowp_encode_bits_signed(c, b, mode, 10, -14);
    }
}

uint16_t lowp_encode_f32(const lowp_codec *c, float x)
{
    return (uint16_t)encode_bits(c, lowp_f32_bits(x));
}

/* Round a double to binary32 with round-to-odd: truncate, then set the last bit when
 * inexact. Rounding that result once more to a format with at most 22 significand bits
 * and an exponent range inside binary32's equals rounding the double directly (every
 * mode), because the odd bit keeps "exactly representable / above / below a midpoint"
 * intact. Doubles beyond FLT_MAX become FLT_MAX (odd), which every target overflows on;
 * doubles below 2^-149 become the smallest subnormal, below every target's half-quantum. */
static float round_to_odd_f32(double x)
{
    float f = (float)x;
    uint32_t b = lowp_f32_bits(f);
    if (fabs((double)f) > fabs(x))
        b -= 1; /* step toward zero; Inf steps to FLT_MAX */
    if ((double)lowp_f32_from_bits(b) != x)
        b |= 1;
    return lowp_f32_from_bits(b);
}

uint16_t lowp_encode_f64(const lowp_codec *c, double x)
{
    if (isnan(x) && !c->f64_via_f32) {
        uint64_t db = lowp_f64_bits(x);
        unsigned neg = (unsigned)(db >> 63);
        if (c->nan_rule == LOWP_NAN_PAYLOAD) { /* numpy float16: top 10 payload bits, never Inf */
            uint16_t p = (uint16_t)(0x7c00u | ((db >> 42) & 0x3ffu));
            p = (uint16_t)(p | (p == 0x7c00u));
            return (uint16_t)(p | (neg ? 0x8000u : 0u));
        }
        uint16_t code = c->nan_code_f64[neg];
        if (c->nan_f64_keeps_top_bits)
            code = (uint16_t)(code | (neg ? lowp_format_table[c->format].sign_bit : 0) |
                              ((db >> 50) & 3u));
        return code;
    }
    return lowp_encode_f32(c, c->f64_via_f32 ? (float)x : round_to_odd_f32(x));
}

/* ---- decode ------------------------------------------------------------------ */

int lowp_code_is_nan(lowp_format f, uint16_t code)
{
    const lowp_format_info *fi = &lowp_format_table[f];
    if (f == LOWP_E8M0)
        return code == 0xff;
    return (code & (uint32_t)(fi->sign_bit - 1u)) >= fi->nan_min;
}

int lowp_code_is_inf(lowp_format f, uint16_t code)
{
    const lowp_format_info *fi = &lowp_format_table[f];
    return fi->inf_mag != 0 && (code & (uint32_t)(fi->sign_bit - 1u)) == fi->inf_mag;
}

/* The core's decoders (lowp/codec_core.h), which the GPU kernels use as well, with this
 * format's constants; bits above the format's width are ignored. */
float lowp_decode_f32(lowp_format f, uint16_t code)
{
    const lowp_format_info *fi = &lowp_format_table[f];
    uint32_t q = code & ((1u << fi->bits) - 1u);
    if (f == LOWP_E8M0)
        return lowp_decode_core_e8m0(q);
    return lowp_decode_core_signed(q, (int)fi->bits, fi->mbits, 1 - fi->bias, fi->inf_mag,
                                   fi->nan_min);
}

double lowp_decode_f64(lowp_format f, uint16_t code)
{
    /* In binary64 arithmetic, never through a binary32 operand: every value here is a
     * binary64 normal (the smallest, BF16's 2^-133, included), so MXCSR.DAZ / FTZ cannot
     * change it, where widening the binary32 decode would read a binary32 subnormal
     * (E8M0 code 0 = 2^-127, BF16 / F16 subnormals) as 0 under DAZ
     * (test_counts_do_not_depend_on_daz). */
    const lowp_format_info *fi = &lowp_format_table[f];
    code = (uint16_t)(code & ((1u << fi->bits) - 1u));
    if (f == LOWP_E8M0)
        return code == 0xff ? NAN : ldexp(1.0, (int)code - 127);
    double sign = (code & fi->sign_bit) ? -1.0 : 1.0;
    if (lowp_code_is_nan(f, code))
        return copysign(NAN, sign);
    if (lowp_code_is_inf(f, code))
        return sign * INFINITY;
    uint32_t mag = code & (uint32_t)(fi->sign_bit - 1u);
    uint32_t E = mag >> fi->mbits;
    uint32_t M = mag & ((1u << fi->mbits) - 1u);
    int emin = 1 - fi->bias;
    if (E == 0)
        return sign * ldexp((double)M, emin - fi->mbits);
    return sign * ldexp((double)(M | (1u << fi->mbits)), (int)E - fi->bias - fi->mbits);
}
