/* lowp/exp2_sw.h: a base-2 exponential built only from IEEE binary32 operations, shared
 * verbatim by the GPU decode kernels and their CPU emulators.
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
 */
#ifndef LOWP_EXP2_SW_H
#define LOWP_EXP2_SW_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define LOWP_HD __host__ __device__ __forceinline__
#else
#define LOWP_HD static inline
#endif

LOWP_HD float lowp_pow2i_f32(int e) /* 2^e for -126 <= e <= 127, exact */
{
    uint32_t bits = (uint32_t)(e + 127) << 23;
    float r;
#ifdef __CUDA_ARCH__
    r = __uint_as_float(bits);
#else
    memcpy(&r, &bits, sizeof r);
#endif
    return r;
}

LOWP_HD float lowp_exp2_sw(float x)
{
    /* Written without early returns: the polynomial runs on 0 for the special inputs and a
     * select at the end picks the defined result, so the GPU compiles selects, not
     * branches. The in-range path is the definition's operations in its order. */
    const int is_nan = x != x, big = x >= 128.0f, small = x < -150.0f;
    const float xr = (is_nan | big | small) ? 0.0f : x;
    float n = rintf(xr);
    float f = xr - n;
    float p = 0x1.ffcbfcp-17f;
    p = fmaf(p, f, 0x1.430912p-13f);
    p = fmaf(p, f, 0x1.5d87fep-10f);
    p = fmaf(p, f, 0x1.3b2ab6p-7f);
    p = fmaf(p, f, 0x1.c6b08ep-5f);
    p = fmaf(p, f, 0x1.ebfbe0p-3f);
    p = fmaf(p, f, 0x1.62e430p-1f);
    p = fmaf(p, f, 1.0f);
    int ni = (int)n;
    int e1 = ni / 2;
    int e2 = ni - e1;
    const float r = (p * lowp_pow2i_f32(e1)) * lowp_pow2i_f32(e2);
    return is_nan ? x : (big ? INFINITY : (small ? 0.0f : r));
}

#endif /* LOWP_EXP2_SW_H */
