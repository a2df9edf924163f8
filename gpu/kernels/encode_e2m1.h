/* gpu/kernels/encode_e2m1.h: the quantize-on-write kernel's E2M1 element encoder
 * (gpu/kernels/kv_write.cu), in C that the host runs too, so that a CPU test
 * (tests/test_encode_e2m1.c) checks it on all 2^32 binary32 inputs against lowp's codec
 * core (lowp_encode_core_signed with the (e2m1, cuda, rn, saturating) settings, which
 * the CPU writer ref/block/src/block.c uses). Not installed.
 *
 * Why it is exact. The E2M1 magnitudes are 0, 0.5, 1, 1.5, 2, 3, 4, 6 (codes 0..7): from
 * 1.0 on they are the binary32 numbers with one fraction bit, and code = 2 (biased exponent
 * - 126) + that bit (1.0 = 2 x 1 + 0 = 2, 6.0 = 2 x 3 + 1 = 7). So for |v| >= 1, rounding
 * the integer bits a to one fraction bit, to nearest with ties to even (add 2^21 - 1 and
 * the kept bit, bit 22, then drop 22 bits: the carry runs into the exponent exactly as
 * the value's rounding does), gives 2 e + m with e the rounded exponent, and the code is
 * that minus 252, at most 7 (above 6, Inf included: the saturating codec's overflow and
 * Inf code). Below 1 the spacing is the subnormal 0.5, and two compares with the midpoints
 * 0.25 and 0.75 decide it (the step from 0 to 0.5 only above 0.25, to 1 at 0.75 already:
 * the even neighbour wins a tie). The compares and the addition are on the integer bits,
 * which order the non-negative binary32 numbers, subnormals and Inf included, as their
 * values, so nothing is flushed. NaN of either sign is 0x7 (the codec's fixed NaN code, no
 * sign); every other negative input, -0 included, gets the sign bit 0x8. About a dozen
 * integer operations, where seven midpoint compares took twenty on sm_90. */
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
    /* |v| >= 1: 2 e + m of the rounded value, minus 2 x 126; a + 2^21 cannot wrap */
    const uint32_t r = ((a + 0x1fffffu + ((a >> 22) & 1u)) >> 22) - 252u;
    const uint32_t hi = r < 7u ? r : 7u;
    /* |v| < 1: 0, 0.5 or 1 */
    const uint32_t lo = (uint32_t)(a > 0x3e800000u) + (uint32_t)(a >= 0x3f400000u);
    const uint32_t mag = a >= 0x3f800000u ? hi : lo;
    const uint32_t code = ((b >> 28) & 0x8u) | mag;
    return a > 0x7f800000u ? 0x7u : code; /* NaN: 0x7 whatever its sign */
}

#endif
