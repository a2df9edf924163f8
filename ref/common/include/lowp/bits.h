/* lowp/bits.h: the bit casts between binary32/binary64 values and their encodings, the
 * one definition used by the CPU library, the GPU kernels (host and device), the checks
 * and the tests.
 *
 * Plain C on the host; __host__ __device__ under nvcc, where the device side uses the
 * register moves __float_as_uint / __uint_as_float (no memory round trip). Each function
 * returns exactly the bits (or the value) of its argument: NaN payloads and signs are kept.
 */
#ifndef LOWP_BITS_H
#define LOWP_BITS_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define LOWP_BITS_FN static __host__ __device__ __forceinline__
#else
#define LOWP_BITS_FN static inline __attribute__((always_inline))
#endif

/* The bits of binary32 x. */
LOWP_BITS_FN uint32_t lowp_f32_bits(float x)
{
#if defined(__CUDA_ARCH__)
    return __float_as_uint(x);
#elif defined(__cplusplus)
    uint32_t u; /* C++ has no union punning; memcpy is its defined form */
    memcpy(&u, &x, sizeof u);
    return u;
#else
    /* Union punning (defined in C11) rather than memcpy: gcc 12 vectorizes the codec's
     * encode loops with this form and fails on many of them with the memcpy one. */
    union {
        float f;
        uint32_t u;
    } pun;
    pun.f = x;
    return pun.u;
#endif
}

/* The binary32 with bits u. */
LOWP_BITS_FN float lowp_f32_from_bits(uint32_t u)
{
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#elif defined(__cplusplus)
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
#else
    union {
        float f;
        uint32_t u;
    } pun;
    pun.u = u;
    return pun.f;
#endif
}

/* 2^e for -126 <= e <= 127, exact: the binary32 with exponent field e + 127. */
LOWP_BITS_FN float lowp_pow2i_f32(int e)
{
    return lowp_f32_from_bits((uint32_t)(e + 127) << 23);
}

/* The bits of binary64 x. */
LOWP_BITS_FN uint64_t lowp_f64_bits(double x)
{
#if defined(__CUDA_ARCH__)
    return (uint64_t)__double_as_longlong(x);
#else
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
#endif
}

/* The binary64 with bits u. */
LOWP_BITS_FN double lowp_f64_from_bits(uint64_t u)
{
#if defined(__CUDA_ARCH__)
    return __longlong_as_double((long long)u);
#else
    double x;
    memcpy(&x, &u, sizeof x);
    return x;
#endif
}

/* The value of BF16 code h: a BF16 is the top half of a binary32, so this is exact (NaN
 * stays NaN, with its payload). */
LOWP_BITS_FN float lowp_f32_from_bf16(uint16_t h)
{
    return lowp_f32_from_bits((uint32_t)h << 16);
}

#endif
