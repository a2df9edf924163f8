/* lowp/format.h: scalar low-precision codecs (E2M1, E4M3, E5M2, E8M0, BF16, F16).
 *
 * A codec is one (format, profile, rounding mode, overflow policy). The profile
 * names an implementation whose whole behaviour the codec reproduces bit for bit:
 * rounding, overflow, NaN (either sign, any payload), Inf, -0 and, for E8M0, zero
 * and negative inputs. Every code fits in 16 bits; E2M1 codes use the low nibble,
 * E4M3/E5M2/E8M0 one byte, BF16/F16 two bytes.
 *
 * Invariants:
 *   - lowp_decode_* is exact for every code of every format (all fit in binary32).
 *   - lowp_encode_f32 and lowp_encode_f32_array give identical codes.
 *   - A codec that lowp_codec_init accepted never fails to encode; combinations an
 *     implementation does not have are refused by lowp_codec_init with a reason.
 */
#ifndef LOWP_FORMAT_H
#define LOWP_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum lowp_format {
    LOWP_E2M1 = 0, /* 1-2-1, bias 1, max 6, no Inf/NaN (OCP MX FP4) */
    LOWP_E4M3 = 1, /* 1-4-3, bias 7, max 448, NaN S.1111.111, no Inf ("fn") */
    LOWP_E5M2 = 2, /* 1-5-2, bias 15, max 57344, IEEE-style Inf and NaN */
    LOWP_E8M0 = 3, /* unsigned power of two 2^(c-127), c = 0..254, 0xFF NaN */
    LOWP_BF16 = 4, /* bfloat16 */
    LOWP_F16 = 5   /* IEEE binary16 */
} lowp_format;
#define LOWP_FORMAT_COUNT 6

typedef enum lowp_round {
    LOWP_RN = 0,  /* nearest, ties to even (E8M0: nearest, ties up; see README) */
    LOWP_RZ = 1,  /* toward zero */
    LOWP_RU = 2,  /* toward +Inf (E8M0: magnitude up) */
    LOWP_RD = 3,  /* toward -Inf (E8M0: magnitude down) */
    LOWP_RNA = 4  /* nearest, ties away from zero */
} lowp_round;
#define LOWP_ROUND_COUNT 5

typedef enum lowp_profile {
    LOWP_PROFILE_CUDA = 0,      /* CUDA 13 cuda_fp8.h / cuda_fp4.h / cuda_bf16.h / cuda_fp16.h, PTX cvt */
    LOWP_PROFILE_TORCH = 1,     /* PyTorch 2.11 tensor.to(dtype) on CPU tensors */
    LOWP_PROFILE_ML_DTYPES = 2, /* ml_dtypes 0.6 astype (numpy float16 for F16) */
    LOWP_PROFILE_OCP = 3        /* OCP 8-bit FP and MX v1.0 specifications (IEEE 754 rounding) */
} lowp_profile;
#define LOWP_PROFILE_COUNT 4

/* saturate argument of lowp_codec_init */
#define LOWP_SAT_DEFAULT (-1) /* the implementation's own default */
#define LOWP_SAT_OFF 0        /* overflow gives Inf, or NaN where the format has no Inf */
#define LOWP_SAT_ON 1         /* overflow and Inf give the largest finite value */

/* How a NaN input is encoded. */
typedef enum lowp_nan_rule {
    LOWP_NAN_FIXED = 0,  /* nan_code[sign] below */
    LOWP_NAN_PAYLOAD = 1,      /* sign | Inf exponent | top payload bits, never the Inf code (numpy float16) */
    LOWP_NAN_PAYLOAD_QUIET = 2 /* sign | Inf exponent | quiet bit | top payload bits (x86 F16C, torch f16) */
} lowp_nan_rule;

typedef struct lowp_codec {
    lowp_format format;
    lowp_profile profile;
    lowp_round round;
    int saturate;            /* resolved: 0 or 1 */
    /* Resolved policy; filled by lowp_codec_init, read by the encoders. */
    lowp_nan_rule nan_rule;
    uint16_t nan_code[2];     /* binary32 NaN input: [0] positive, [1] negative */
    uint16_t nan_code_f64[2]; /* binary64 NaN input */
    int nan_f64_keeps_top_bits; /* CUDA E5M2 double path: NaN code | top 2 payload bits */
    uint16_t inf_mag;         /* code magnitude for +-Inf input; the input's sign is added */
    uint16_t ovf_mag;         /* code magnitude for an overflow rounded away from zero: the
                                 largest finite, Inf, or (E4M3 without saturation) NaN 0x7F */
    int f64_via_f32;          /* binary64 input is first rounded to binary32 (double rounding) */
    /* E8M0 only */
    uint16_t e8m0_zero_code;  /* code for +-0 */
    int e8m0_neg_is_nan;      /* negative input gives 0xFF instead of using |x| */
    int e8m0_sub_up_any;      /* torch/ml_dtypes: a binary32 subnormal above 2^-127 rounds up in rn */
} lowp_codec;

/* Names: "e2m1" "e4m3" "e5m2" "e8m0" "bf16" "f16"; "rn" "rz" "ru" "rd" "rna";
 * "cuda" "torch" "ml_dtypes" "ocp". The parsers return 0 on success, -1 if unknown. */
const char *lowp_format_name(lowp_format f);
const char *lowp_round_name(lowp_round r);
const char *lowp_profile_name(lowp_profile p);
int lowp_format_parse(const char *name, lowp_format *out);
int lowp_round_parse(const char *name, lowp_round *out);
int lowp_profile_parse(const char *name, lowp_profile *out);

unsigned lowp_format_bits(lowp_format f);        /* 4, 8 or 16 */
unsigned lowp_format_code_count(lowp_format f);  /* 16, 256 or 65536 */
int lowp_format_mantissa_bits(lowp_format f);    /* stored fraction bits */
int lowp_format_exponent_bits(lowp_format f);
int lowp_format_bias(lowp_format f);
uint16_t lowp_format_max_code(lowp_format f);    /* largest finite positive code */

/* Set up a codec. Returns 0, or -1 with a one-sentence reason in why (may be NULL)
 * when the profile has no such conversion (e.g. torch has no E2M1 cast, CUDA has no
 * round-to-nearest E8M0). */
int lowp_codec_init(lowp_codec *c, lowp_format f, lowp_profile p, lowp_round r,
                    int saturate, char *why, size_t why_len);

uint16_t lowp_encode_f32(const lowp_codec *c, float x);
uint16_t lowp_encode_f64(const lowp_codec *c, double x);
/* Array encoders: one code per element; u8 for formats of at most 8 bits, u16 for all.
 * Vectorized; OpenMP-parallel above a size threshold when threads > 1. */
void lowp_encode_f32_u8(const lowp_codec *c, const float *in, uint8_t *out, size_t n);
void lowp_encode_f32_u16(const lowp_codec *c, const float *in, uint16_t *out, size_t n);
/* Which compilation of the array encoders this CPU runs (chosen once, by CPUID): "avx512"
 * (F, BW, VL), "avx2" or "baseline". Every one gives the same codes; benchmarks print it. */
const char *lowp_encode_isa(void);

/* Exact decode. NaN codes decode to a quiet NaN carrying the code's sign. */
float lowp_decode_f32(lowp_format f, uint16_t code);
double lowp_decode_f64(lowp_format f, uint16_t code);
int lowp_code_is_nan(lowp_format f, uint16_t code);
int lowp_code_is_inf(lowp_format f, uint16_t code);

#ifdef __cplusplus
}
#endif
#endif /* LOWP_FORMAT_H */
