/* gpu/kernels/div32.h: n / d by one multiply and shift, for the kernels' index arithmetic
 * (a run-time 32-bit division is a long instruction sequence on the GPU). Host and device.
 * Used by the workspace fill (gpu/kernels/extend.cu) and the quantize-on-write kernel
 * (gpu/kernels/kv_write.cu). Not installed.
 *
 * For 0 <= n < 2^31 and 1 <= d < 2^32: M = ceil(2^s / d), s = 31 + ceil(log2 d). Exact:
 * M = 2^s / d + e with 0 <= e < 1, so n M / 2^s = n / d + n e / 2^s and
 * n e / 2^s < 2^31 / 2^(31 + ceil(log2 d)) <= 1 / d; with n / d = q + r / d, r <= d - 1,
 * the sum stays below q + 1 and its floor is q. M <= 2^32 and n M < 2^63: no overflow.
 * lowp_gpu_extend_ws_lut_check checks it on the host as well (every d < 2^13 at n = 0,
 * 2^31 - 1 and both sides of every multiple of d below 2^20, plus 4096 random n each). */
#ifndef LOWP_DIV32_H
#define LOWP_DIV32_H

#include <stdint.h>

struct lowp_div32 {
    uint64_t m;
    int s;
    uint32_t d;
};

/* The multiplier and shift for d >= 1 (host). */
static inline lowp_div32 lowp_div32_make(uint32_t d)
{
    int l = 0;
    while ((1ull << l) < d)
        l++;
    const int s = 31 + l;
    lowp_div32 r = {((1ull << s) + d - 1) / d, s, d};
    return r;
}

/* n / v.d for n < 2^31. */
__host__ __device__ __forceinline__ uint32_t lowp_div32_q(const lowp_div32 &v, uint32_t n)
{
    return (uint32_t)(((uint64_t)n * v.m) >> v.s);
}

#endif
