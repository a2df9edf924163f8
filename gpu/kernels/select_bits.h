/* gpu/kernels/select_bits.h: the QSA scoring kernel's key decode by bit moves
 * (qsa_score_v2_kernel in select.cu), host and device, so that tests/test_select_bits.c
 * checks it on every code without a GPU.
 *
 * A key code k becomes the double kx = k 2^-S without a conversion instruction: S = 896
 * for BF16 and 1016 for E4M3 are the differences of the exponent biases (1023 - 127, 1023
 * - 7), so the code's sign, exponent and fraction bits land unchanged in the double's, and
 * zero and subnormal codes become the double's zero and subnormals with the same fraction
 * (both formats' subnormals are 0.f x 2^(1 - bias)). The kernel multiplies the query by
 * 2^S instead (exact), so each product is the same real number. Inf and NaN codes (all-ones
 * exponent; E4M3 magnitude 0x7F) do not move this way: lowp_sel_*_special finds them. The
 * low word of kx is always 0.
 */
#ifndef LOWP_SELECT_BITS_H
#define LOWP_SELECT_BITS_H

#include <stdint.h>

#include "decode_e2m1.h" /* lowp_dec_prmt, LOWP_DEC_HD */

/* nonzero iff a BF16 half of w is Inf or NaN: +1 to each exponent field carries into the
 * half's sign position exactly when the field is all ones (signs masked off first, so no
 * carry crosses halves) */
LOWP_DEC_HD uint32_t lowp_sel_bf16_special(uint32_t w)
{
    return ((w & 0x7f807f80u) + 0x00800080u) & 0x80008000u;
}

/* nonzero iff an E4M3 byte of w is NaN (magnitude 0x7F), the same carry byte by byte */
LOWP_DEC_HD uint32_t lowp_sel_e4m3_special(uint32_t w)
{
    return ((w & 0x7f7f7f7fu) + 0x01010101u) & 0x80808080u;
}

/* the high word of kx for BF16 half e (0 low, 1 high) of w: the sign to bit 31 and the
 * exponent and fraction to bits 27..13 by an arithmetic shift by 3, then a mask */
LOWP_DEC_HD uint32_t lowp_sel_bf16_kx_hi(uint32_t w, int e)
{
    return (uint32_t)((int32_t)(e == 0 ? w << 16 : w) >> 3) & 0x8fffe000u;
}

/* the high word of kx for E4M3 byte e of w, w1 = w << 1 (one shift a word): byte 3 is the
 * code's sign replicated (prmt's sign mode), byte 2 the code's bits 6..0 moved up one (byte
 * e of w1; its bit 0 is the lower byte's sign), masked to bit 31 and bits 23..17 */
LOWP_DEC_HD uint32_t lowp_sel_e4m3_kx_hi(uint32_t w, uint32_t w1, int e)
{
    const uint32_t u = (uint32_t)e;
    return lowp_dec_prmt(w1, w, (0xcu + u) << 12 | u << 8 | u << 4 | u) & 0x80fe0000u;
}

#endif /* LOWP_SELECT_BITS_H */
