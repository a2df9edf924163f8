/* lowp/codec_core.h: the codec's arithmetic on one value, shared verbatim by the CPU codec
 * (ref/codec/src/format.c, format_array.c) and the GPU quantize-on-write kernel
 * (gpu/kernels/kv_write.cu), so the two cannot drift apart: the
 * signed-format and E8M0 encoders, and the exact decoders (the bit casts are lowp/bits.h).
 *
 * Every function takes plain integers instead of a lowp_codec or a format table (neither
 * exists on the GPU): the codec's wrappers pass lowp_format_table's and lowp_codec's
 * fields, the kernel the settings lowp_codec_init resolves for the codecs it uses. Every
 * step is integer arithmetic and selects (the one floating-point operation, the subnormal
 * decode, is exact), so host and device give the same bits.
 *
 * Compiled as C on the host, and as __host__ __device__ C++ under nvcc (the style of
 * lowp/exp2_sw.h). Always inlined: with the rounding mode and the format's widths constant
 * at the call, every switch below folds away, which is what lets gcc vectorize the array
 * encoders (one loop per format and mode, format_array.c) and keeps the kernel free of
 * the modes it does not use.
 *
 * The spelling is chosen for the machine code, not only the value: equivalent rewrites of
 * a select (operand order, a mask instead of a ?:, 16 or 32 bits) make gcc 12 and nvcc 13
 * generate different code, gcc sometimes much longer loops. As written, gcc compiles
 * format_array.c to the same instructions as before this core was shared (objdump), and
 * nvcc the kernel to the same instruction count (tools/sass_compare.sh); the comments at
 * the selects say which spelling each compiler needs. Code-valued parameters are uint16_t
 * (every code fits 16 bits, lowp/format.h), so gcc keeps those selects 16 bits wide. */
#ifndef LOWP_CODEC_CORE_H
#define LOWP_CODEC_CORE_H

#include <stdint.h>
#include <string.h>

#include "lowp/bits.h"   /* lowp_f32_bits, lowp_f32_from_bits */
#include "lowp/format.h" /* LOWP_RN .. LOWP_RNA, LOWP_NAN_* */

#ifdef __CUDACC__
#define LOWP_CORE_FN static __host__ __device__ __forceinline__
#else
#define LOWP_CORE_FN static inline __attribute__((always_inline))
#endif

/* 2^k as a binary32, exact, for -149 <= k <= 127 (subnormal below -126). */
LOWP_CORE_FN float lowp_f32_pow2(int k)
{
    uint32_t b = k >= -126 ? (uint32_t)(k + 127) << 23 : 1u << (k + 149);
    return lowp_f32_from_bits(b);
}

/* Encode binary32 bits b into a signed format with mbits fraction bits and minimum
 * normal exponent emin (1 - bias), rounding mode `mode` (a lowp_round). The value is
 * rounded once, IEEE-style:
 *   |x| = M * 2^(Eeff-150) with M < 2^24; the format's quantum at |x| is
 *   2^(max(e, emin) - mbits), so we drop shift = 23 - mbits + max(0, emin - e) bits.
 *   A shift above 25 drops everything and leaves M below half a quantum, so capping it
 *   at 25 keeps every rounding decision (rem vs half, rem != 0) exact.
 *   The code magnitude ((max(e,emin) - emin) << mbits) + q counts quanta from zero; a
 *   carry out of the fraction lands in the exponent field by itself.
 * The format: max_mag its largest finite code, sign_bit its sign (a power of two above
 * max_mag), fmt_inf its +Inf code (0 without Inf; read only by the payload NaN rules).
 * The codec (lowp_codec's fields of the same names): ovf_mag the magnitude of an overflow
 * rounded away from zero, inf_mag that of an Inf input, nan_rule a lowp_nan_rule and
 * nan_pos / nan_neg the codes of LOWP_NAN_FIXED for either sign.
 * Requires 0 <= mbits <= 22 (so at least one bit is dropped) and emin >= -126 (the
 * format's range inside binary32's): every format of lowp/format.h but E8M0. Every step is
 * a select, so with constant mode/mbits/emin the compiler vectorizes it. */
LOWP_CORE_FN uint32_t lowp_encode_core_signed(uint32_t b, const int mode, const int mbits,
                                              const int emin, uint16_t max_mag, uint16_t sign_bit,
                                              uint16_t fmt_inf, uint16_t ovf_mag, uint16_t inf_mag,
                                              lowp_nan_rule nan_rule, uint16_t nan_pos,
                                              uint16_t nan_neg)
{
    uint32_t neg = b >> 31;
    uint32_t a = b & 0x7fffffffu;
    uint32_t E = a >> 23;
    uint32_t Eeff = E + (E == 0);
    uint32_t M = (a & 0x7fffffu) | ((uint32_t)(E != 0) << 23);
    int32_t e = (int32_t)Eeff - 127;
    int32_t under = emin - e;
    under = under > 0 ? under : 0;
    uint32_t shift = (uint32_t)(23 - mbits + under);
    shift = shift > 25u ? 25u : shift;
    uint32_t q = M >> shift;
    uint32_t rem = M & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    uint32_t inc;
    switch (mode) {
    case LOWP_RN: inc = (rem > half) | ((rem == half) & q); break;
    case LOWP_RNA: inc = rem >= half; break;
    case LOWP_RZ: inc = 0; break;
    case LOWP_RU: inc = (rem != 0) & (neg ^ 1u); break;
    default: inc = (rem != 0) & neg; break; /* LOWP_RD */
    }
    int32_t ee = e > emin ? e : emin;
    uint32_t mag = ((uint32_t)(ee - emin) << mbits) + (q & ((2u << mbits) - 1u)) + inc;
    /* q < 2^(mbits+1) always holds for finite inputs; the mask only keeps Inf/NaN
     * inputs (handled below) from shifting out of range. */
    /* The same value spelled twice: gcc vectorizes the mask form well (the ?: form makes
     * its rz loops three times longer); nvcc compiles the ?: form with about 56
     * instructions fewer in the kv_write kernel. */
#ifdef __CUDA_ARCH__
    uint32_t sign = neg ? sign_bit : 0u;
#else
    uint32_t sign = (0u - neg) & sign_bit;
#endif
    /* NaN: a fixed code per sign, or the payload rules (computed always, selected last,
     * so the loop has no branch). */
    uint32_t nan_fixed = neg ? nan_neg : nan_pos;
    uint32_t p = fmt_inf | ((a & 0x7fffffu) >> (23 - mbits));
    uint32_t bump = (uint32_t)(nan_rule == LOWP_NAN_PAYLOAD) & (uint32_t)(p == fmt_inf);
    uint32_t quiet = nan_rule == LOWP_NAN_PAYLOAD_QUIET ? 1u << (mbits > 0 ? mbits - 1 : 0) : 0u;
    uint32_t nan = nan_rule == LOWP_NAN_FIXED ? nan_fixed : (sign | p | bump | quiet);
    uint32_t toward0;
    switch (mode) {
    case LOWP_RZ: toward0 = 1; break;
    case LOWP_RU: toward0 = neg; break;
    case LOWP_RD: toward0 = neg ^ 1u; break;
    default: toward0 = 0; break;
    }
    /* !toward0 ? ovf_mag : max_mag rather than the swapped form: gcc's ru/rd loops are
     * then a few instructions shorter (as they were when it read the fields from memory). */
    uint32_t ovf = sign | (!toward0 ? ovf_mag : max_mag);
    uint32_t inf = sign | inf_mag;
    uint32_t r = mag > max_mag ? ovf : (sign | mag);
    r = a == 0x7f800000u ? inf : r;
    r = a > 0x7f800000u ? nan : r;
    return r;
}

/* E8M0: round |x| (binary32 bits b) to a power of two (see ref/profiles.md). Code =
 * biased binary32 exponent, plus one when rounding goes up; binary32 subnormals start at
 * code 0 (2^-127), which is also the clip for anything smaller. mode: LOWP_RU rounds the
 * magnitude up, LOWP_RN / LOWP_RNA to nearest (ties up), the others down. The codec's
 * options (lowp_codec's fields): saturate (overflow and Inf give 0xFE, else 0xFF),
 * zero_code (the code of +-0), neg_is_nan (a negative input gives 0xFF instead of using
 * |x|), sub_up_any (rn: a binary32 subnormal above 2^-127 rounds up). NaN gives 0xFF. */
LOWP_CORE_FN uint32_t lowp_encode_core_e8m0(uint32_t b, const int mode, int saturate,
                                            uint16_t zero_code, int neg_is_nan, int sub_up_any)
{
    uint32_t neg = b >> 31;
    uint32_t a = b & 0x7fffffffu;
    uint32_t E = a >> 23;
    uint32_t m = a & 0x7fffffu;
    uint32_t up;
    switch (mode) {
    case LOWP_RU: up = E ? (m != 0) : (m > 0x400000u); break;
    case LOWP_RN:
    case LOWP_RNA:
        up = E ? (m >= 0x400000u) : (sub_up_any ? (m > 0x400000u) : (m >= 0x600000u));
        break;
    default: up = 0; break; /* rz, rd: magnitude down */
    }
    uint32_t code = E + up;
    uint32_t over = saturate ? 0xfeu : 0xffu;
    code = code >= 0xffu ? over : code; /* also Inf: E = 255 */
    code = a == 0 ? zero_code : code;
    code = (uint32_t)neg_is_nan & neg ? 0xffu : code; /* this operand order suits both compilers */
    code = a > 0x7f800000u ? 0xffu : code;
    return code;
}

/* Exact binary32 value of code (below 2^bits) of a signed format with bits storage bits,
 * mbits fraction bits and minimum normal exponent emin; fmt_inf is its +Inf code (0 when
 * it has none) and nan_min its smallest NaN magnitude (2^(bits-1) when it has none).
 * A NaN code gives the quiet NaN 0x7FC00000 with the code's sign. Every value of these
 * formats is a binary32: the subnormal M * 2^(emin - mbits) is an integer below 2^10
 * times a power of two no smaller than 2^-149, so the product is exact. */
LOWP_CORE_FN float lowp_decode_core_signed(uint32_t code, const int bits, const int mbits,
                                           const int emin, uint16_t fmt_inf, uint16_t nan_min)
{
    const uint32_t sign_bit = 1u << (bits - 1);
    uint32_t mag = code & (sign_bit - 1u), sign = (code & sign_bit) << (32 - bits);
    if (mag >= nan_min)
        return lowp_f32_from_bits(sign | 0x7fc00000u);
    if (fmt_inf != 0 && mag == fmt_inf)
        return lowp_f32_from_bits(sign | 0x7f800000u);
    uint32_t E = mag >> mbits, M = mag & ((1u << mbits) - 1u);
    if (E == 0) /* subnormal: exact (above) */
        return lowp_f32_from_bits(sign | lowp_f32_bits((float)M * lowp_f32_pow2(emin - mbits)));
    return lowp_f32_from_bits(sign | ((E + (uint32_t)(126 + emin)) << 23) | (M << (23 - mbits)));
}

/* Exact binary32 value of an E8M0 code (below 256): 2^(code - 127), NaN (0x7FC00000) for
 * 0xFF. */
LOWP_CORE_FN float lowp_decode_core_e8m0(uint32_t code)
{
    return code == 0xffu ? lowp_f32_from_bits(0x7fc00000u) : lowp_f32_pow2((int)code - 127);
}

#endif /* LOWP_CODEC_CORE_H */
