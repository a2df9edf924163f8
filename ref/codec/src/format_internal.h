/* ref/codec/src/format_internal.h: the per-format constants and the branch-free binary32
 * encoder shared by the scalar (format.c) and array (format_array.c) entry points. */
#ifndef LOWP_FORMAT_INTERNAL_H
#define LOWP_FORMAT_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "lowp/format.h"

typedef struct lowp_format_info {
    const char *name;
    unsigned bits;     /* storage width */
    int ebits, mbits;  /* exponent and stored fraction bits */
    int bias;
    uint16_t max_mag;  /* largest finite positive code */
    uint16_t sign_bit; /* 0 for the unsigned E8M0 */
    uint16_t inf_mag;  /* +Inf code, 0 when the format has no Inf */
} lowp_format_info;

extern const lowp_format_info lowp_format_table[LOWP_FORMAT_COUNT];

static inline uint32_t lowp_f32_bits(float x)
{
    /* Union punning (defined in C11) rather than memcpy: gcc 12 vectorizes the encode
     * loops with this form and fails on many of them with the memcpy one. */
    union {
        float f;
        uint32_t u;
    } pun;
    pun.f = x;
    return pun.u;
}

/* Encode binary32 bits b into a signed format with mbits fraction bits and minimum
 * normal exponent emin (1 - bias). The value is rounded once, IEEE-style:
 *   |x| = M * 2^(Eeff-150) with M < 2^24; the format's quantum at |x| is
 *   2^(max(e, emin) - mbits), so we drop shift = 23 - mbits + max(0, emin - e) bits.
 *   A shift above 25 drops everything and leaves M below half a quantum, so capping it
 *   at 25 keeps every rounding decision (rem vs half, rem != 0) exact.
 *   The code magnitude ((max(e,emin) - emin) << mbits) + q counts quanta from zero; a
 *   carry out of the fraction lands in the exponent field by itself.
 * Every step is a select, so with constant mode/mbits/emin the compiler vectorizes it. */
static inline __attribute__((always_inline)) uint32_t
lowp_encode_bits_signed(const lowp_codec *c, uint32_t b, const int mode, const int mbits,
                        const int emin)
{
    const lowp_format_info *fi = &lowp_format_table[c->format];
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
    uint32_t sign = (0u - neg) & fi->sign_bit; /* an unconditional load, hoisted out of loops */
    /* NaN: a fixed code per sign, or the payload rules (computed always, selected last,
     * so the loop has no branch). */
    uint32_t nan_fixed = neg ? c->nan_code[1] : c->nan_code[0];
    uint32_t p = fi->inf_mag | ((a & 0x7fffffu) >> (23 - mbits));
    uint32_t bump = (uint32_t)(c->nan_rule == LOWP_NAN_PAYLOAD) & (uint32_t)(p == fi->inf_mag);
    uint32_t quiet = c->nan_rule == LOWP_NAN_PAYLOAD_QUIET ? 1u << (mbits > 0 ? mbits - 1 : 0) : 0u;
    uint32_t nan = c->nan_rule == LOWP_NAN_FIXED ? nan_fixed : (sign | p | bump | quiet);
    uint32_t toward0;
    switch (mode) {
    case LOWP_RZ: toward0 = 1; break;
    case LOWP_RU: toward0 = neg; break;
    case LOWP_RD: toward0 = neg ^ 1u; break;
    default: toward0 = 0; break;
    }
    uint32_t ovf = sign | (toward0 ? fi->max_mag : c->ovf_mag);
    uint32_t inf = sign | c->inf_mag;
    uint32_t r = mag > fi->max_mag ? ovf : (sign | mag);
    r = a == 0x7f800000u ? inf : r;
    r = a > 0x7f800000u ? nan : r;
    return r;
}

/* E8M0: round |x| to a power of two (see ref/profiles.md). Code = biased binary32
 * exponent, plus one when rounding goes up; binary32 subnormals start at code 0 (2^-127),
 * which is also the clip for anything smaller. */
static inline __attribute__((always_inline)) uint32_t
lowp_encode_bits_e8m0(const lowp_codec *c, uint32_t b, const int mode)
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
        up = E ? (m >= 0x400000u) : (c->e8m0_sub_up_any ? (m > 0x400000u) : (m >= 0x600000u));
        break;
    default: up = 0; break; /* rz, rd: magnitude down */
    }
    uint32_t code = E + up;
    uint32_t over = c->saturate ? 0xfeu : 0xffu;
    code = code >= 0xffu ? over : code; /* also Inf: E = 255 */
    code = a == 0 ? c->e8m0_zero_code : code;
    code = (neg & (uint32_t)c->e8m0_neg_is_nan) ? 0xffu : code;
    code = a > 0x7f800000u ? 0xffu : code;
    return code;
}

#endif
