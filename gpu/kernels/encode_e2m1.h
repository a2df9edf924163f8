/* gpu/kernels/encode_e2m1.h: the quantize-on-write kernel's E2M1 element encoder
 * (gpu/kernels/kv_write.cu), in C that the host runs too, so that a CPU test
 * (tests/test_encode_e2m1.c) checks it on all 2^32 binary32 inputs against lowp's codec
 * core (lowp_encode_core_signed with the (e2m1, cuda, rn, saturating) settings, which
 * the CPU writer ref/block/src/block.c uses). Not installed.
 *
 * Why it is exact. The E2M1 magnitudes are 0, 0.5, 1, 1.5, 2, 3, 4, 6 (codes 0..7).
 * Round to nearest, ties to even, of a real |v| picks code k when |v| lies between the
 * midpoints around value k; the midpoints 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5 are binary32
 * numbers, so comparing the binary32 |v| with them decides the rounding exactly (no
 * subnormal is flushed: the comparisons are on the integer bits, which order the
 * non-negative binary32 numbers, subnormals and Inf included, as their values). At a
 * midpoint the even neighbour wins: the step from code 2j to 2j+1 is taken only above its
 * midpoint (>), the step from 2j+1 to 2j+2 at the midpoint already (>=). Above 5 the code
 * is 7 (6.0), which is also the saturating codec's overflow and Inf code; NaN of either
 * sign is 0x7 (the codec's fixed NaN code, no sign); every other negative input, -0
 * included, gets the sign bit 0x8. Seven integer compares and adds replace the core's
 * generic shift-and-round sequence. */
#ifndef LOWP_ENCODE_E2M1_H
#define LOWP_ENCODE_E2M1_H

#include <stdint.h>

#ifdef __CUDACC__
#define LOWP_ENC_HD __host__ __device__ __forceinline__
#else
#define LOWP_ENC_HD static inline
#endif

/* The E2M1 code (sign bit 0x8) of the binary32 with bits b, as (e2m1, cuda, rn, sat). */
LOWP_ENC_HD uint32_t lowp_enc_e2m1_rn_sat(uint32_t b)
{
    const uint32_t a = b & 0x7fffffffu;
    uint32_t mag = (uint32_t)(a > 0x3e800000u);  /* > 0.25: 0 -> 0.5 (tie to 0) */
    mag += (uint32_t)(a >= 0x3f400000u);          /* >= 0.75: 0.5 -> 1 (tie to 1) */
    mag += (uint32_t)(a > 0x3fa00000u);           /* > 1.25: 1 -> 1.5 */
    mag += (uint32_t)(a >= 0x3fe00000u);          /* >= 1.75: 1.5 -> 2 */
    mag += (uint32_t)(a > 0x40200000u);           /* > 2.5: 2 -> 3 */
    mag += (uint32_t)(a >= 0x40600000u);          /* >= 3.5: 3 -> 4 */
    mag += (uint32_t)(a > 0x40a00000u);           /* > 5: 4 -> 6, overflow and Inf too */
    const uint32_t r = ((b >> 28) & 0x8u) | mag;
    return a > 0x7f800000u ? 0x7u : r;            /* NaN: 0x7 whatever its sign */
}

#endif
