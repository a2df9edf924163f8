/* lowp/exp2_sw.h: a base-2 exponential built only from IEEE binary32 operations, shared
 * verbatim by the GPU decode kernels and their CPU emulators until 2026-12-06; since then
 * the kernels use the hardware's ex2.approx.ftz.f32, modelled exactly (lowp/ex2_approx.h),
 * and this is kept for gpu/experiments/floor.cu's comparison.
 *
 * Why not the hardware: the GPU's ex2.approx.f32 is an approximation whose exact output
 * for every input is not documented, so a CPU emulator could only reproduce it from a
 * 2^32-entry measurement. This function uses rintf, fmaf, subtraction and
 * multiplication by powers of two, each correctly rounded (round to nearest even) on the
 * CPU (C99 Annex F; the library is compiled with -ffp-contract=off) and on the GPU (the
 * kernels are compiled with --fmad=false and without --use_fast_math, so nothing is
 * contracted or flushed). Same operations in the same order: the same bits on both.
 *
 * Definition, for binary32 x:
 *   NaN -> x (the NaN itself); x >= 128 -> +Inf; x < -150 (including -Inf) -> +0;
 *   otherwise n = rint(x) (ties to even), f = x - n (exact, |f| <= 1/2),
 *   p = c0 + f(c1 + f(c2 + ... + f c7)) by fmaf (Horner), c_k = fl(ln(2)^k / k!),
 *   result = (p * 2^e1) * 2^e2 with e1 = n / 2 (C division), e2 = n - e1: the first
 *   product is exact (2^e1 >= 2^-75 keeps it normal); the second rounds once, only when
 *   the result is subnormal or overflows.
 * Accuracy: the truncated series is 5e-9 relative at |f| = 1/2; with the Horner
 * rounding the result is within 2 ulp of 2^x for normal results (test_attn_gpu_emul
 * checks every binary32 x in [-150, 128) against binary64 exp2).
 *
 * How lowp_exp2_sw computes the definition with fewer GPU instructions (the same value
 * for each of the 2^32 inputs: test_attn_gpu_emul compares it with a literal transcription
 * of the definition on every one):
 *   - x is clamped to [-151, 128] (a NaN becomes -151 and is restored by the last select).
 *     From 128 the steps below give exactly +Inf, and everywhere in [-151, -150) a value
 *     that rounds to +0, so the definition's special ranges need no test of their own.
 *   - n = rint(x) as (x + 1.5 * 2^23) - 1.5 * 2^23: in [2^23, 2^24) the sum rounds to an
 *     integer, ties to even; the integer n is read from the sum's bits. No conversion
 *     instruction (FRND, F2I) is used.
 *   - p * 2^n as p * 2^max(n, -125), by adding max(n, -125) to p's exponent field (exact:
 *     p is in [0.7, 1.5) and the result stays normal), times 2^min(n + 125, 0), which
 *     rounds once exactly where the definition's second product does, to the same value.
 */
#ifndef LOWP_EXP2_SW_H
#define LOWP_EXP2_SW_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "lowp/bits.h"

#ifdef __CUDACC__
#define LOWP_HD __host__ __device__ __forceinline__
#else
#define LOWP_HD static inline
#endif


LOWP_HD float lowp_exp2_sw(float x)
{
    const float xc = fminf(fmaxf(x, -151.0f), 128.0f);
    const float t = xc + 0x1.8p23f;
    const float n = t - 0x1.8p23f;
    const float f = xc - n;
    float p = 0x1.ffcbfcp-17f;
    p = fmaf(p, f, 0x1.430912p-13f);
    p = fmaf(p, f, 0x1.5d87fep-10f);
    p = fmaf(p, f, 0x1.3b2ab6p-7f);
    p = fmaf(p, f, 0x1.c6b08ep-5f);
    p = fmaf(p, f, 0x1.ebfbe0p-3f);
    p = fmaf(p, f, 0x1.62e430p-1f);
    p = fmaf(p, f, 1.0f);
    const int ni = (int)(lowp_f32_bits(t) - 0x4B400000u); /* n, in [-151, 128] */
    const int e_exact = ni > -125 ? ni : -125;
    const int e_round = ni + 125 < 0 ? ni + 125 : 0;
    const float r = lowp_f32_from_bits(lowp_f32_bits(p) + ((uint32_t)e_exact << 23)) *
                    lowp_pow2i_f32(e_round);
    return x != x ? x : r;
}

#endif /* LOWP_EXP2_SW_H */
