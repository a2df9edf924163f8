/* ref/codec/src/format_internal.h: the per-format constants, and the binary32 encoders
 * of a lowp_codec shared by the scalar (format.c) and array (format_array.c) entry points:
 * thin wrappers of the branch-free core in lowp/codec_core.h, which the GPU
 * quantize-on-write kernel (gpu/kernels/kv_write.cu) calls as well. */
#ifndef LOWP_FORMAT_INTERNAL_H
#define LOWP_FORMAT_INTERNAL_H

#include <stdint.h>

#include "lowp/codec_core.h"
#include "lowp/format.h"

typedef struct lowp_format_info {
    const char *name;
    unsigned bits;     /* storage width */
    int ebits, mbits;  /* exponent and stored fraction bits */
    int bias;
    uint16_t max_mag;  /* largest finite positive code */
    uint16_t sign_bit; /* 0 for the unsigned E8M0 */
    uint16_t inf_mag;  /* +Inf code, 0 when the format has no Inf */
    uint16_t nan_min;  /* smallest NaN magnitude: sign_bit when there is no NaN (E2M1);
                          E8M0's one NaN is 0xFF */
} lowp_format_info;

extern const lowp_format_info lowp_format_table[LOWP_FORMAT_COUNT];

/* The encoders of lowp_codec c on binary32 bits b: the shared core (lowp/codec_core.h)
 * with this format's constants and this codec's resolved policy. Always inlined with
 * mode, mbits and emin constant (format.c's switch, format_array.c's one loop per format
 * and mode), so the core's switches fold and the loops vectorize. */
static inline __attribute__((always_inline)) uint32_t
lowp_encode_bits_signed(const lowp_codec *c, uint32_t b, const int mode, const int mbits,
                        const int emin)
{
    const lowp_format_info *fi = &lowp_format_table[c->format];
    return lowp_encode_core_signed(b, mode, mbits, emin, fi->max_mag, fi->sign_bit, fi->inf_mag,
                                   c->ovf_mag, c->inf_mag, c->nan_rule, c->nan_code[0],
                                   c->nan_code[1]);
}

static inline __attribute__((always_inline)) uint32_t
lowp_encode_bits_e8m0(const lowp_codec *c, uint32_t b, const int mode)
{
    return lowp_encode_core_e8m0(b, mode, c->saturate, c->e8m0_zero_code, c->e8m0_neg_is_nan,
                                 c->e8m0_sub_up_any);
}

#endif
