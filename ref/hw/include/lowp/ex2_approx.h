/* ref/hw/include/lowp/ex2_approx.h: the input and output stages of ex2.approx.ftz.f32 as
 * the H200 (sm_90, MUFU.EX2) computes it, measured by gpu/probe/ex2_probe.cu (analysis:
 * ref/notes/ex2-approx.md, tools/ex2_fit.py).
 *
 * The hardware result is 2^e * (1 + g(k) 2^-23) where (e, k) come from x by the split
 * below and g is a function of the 23-bit index k alone: the mantissa the hardware returns
 * for x = k 2^-23 in [0, 1). What is modelled here, and how far it is proven:
 *   - x is read as a sign and a magnitude |x| truncated toward zero to a multiple of 2^-23
 *     (I = integer part, F = the 23 fraction bits). Facts: ex2(-2^-24) = 1 and every
 *     |x| < 2^-23 gives exactly 1 (1744830464 inputs, = 2 x 104 binades, the probe's
 *     outcome count); per binade of small |x| the number of distinct results is that of
 *     the multiples of 2^-23 the binade holds, on both signs;
 *   - x >= 0: e = I, k = F;
 *   - x < 0, F = 0: e = -I, k = 0 (exact powers of two: ex2(-1) = 0.5, ex2(-126) = 2^-126);
 *   - x < 0, F != 0: e = -(I + 1), k = 2^23 - 1 - F, the ONES' complement of F (not the
 *     two's complement 2^23 - F that 2^-|x| = 2^-(I+1) 2^(1-F 2^-23) would need). Fact:
 *     hardware(-1 + k 2^-23) == hardware(k' 2^-23) / 2 with k' = k - 1 on all 8388607
 *     points k = 1 .. 2^23 - 1 of the two measured grids, 0 exceptions; with k' = k (the
 *     two's complement) 7665501 of them differ;
 *   - e < -126: +0 (flush to zero; the result would be subnormal); |x| >= 128: +Inf for
 *     x > 0, +0 for x < 0; +-Inf: +Inf / +0; NaN: 0x7FFFFFFF (NVIDIA's canonical NaN).
 *     These reproduce every outcome count of the probe's 2^32 sweep (+0 1015283712,
 *     +Inf 1015021569, 1 1744830464, NaN 16777213 + 1, no subnormal, no -0).
 * g itself: the 2^23 measured values are within 1 ulp of RN(2^(k 2^-23)) (3262733 differ),
 * but no smooth fixed-point polynomial reproduces them (the notes give the bound), so
 * lowp_ex2_approx_ftz_with takes g as a table, and lowp_ex2_g (ref/hw/src/ex2_approx.c)
 * is lowp's: an integer quadratic per 2^17 indices plus 158,491 measured +-1 corrections.
 * Checked against the hardware on all 2^32 inputs (with the measured g; H200 2026-12-02,
 * H100 2026-12-06, gpu/probe/ex2_probe.cu); lowp_ex2_g against the measured g on all 2^23.
 *
 * The split and assembly: plain C on the host, __host__ __device__ under nvcc (the probe
 * runs them on the GPU). lowp_ex2_g and lowp_ex2_approx_ftz: host only (liblowp).
 * lowp_exp2_hw: the hardware instruction in device code, the model on the host, so a
 * kernel and its CPU emulator that both call it compute the same bits. */
#ifndef LOWP_EX2_APPROX_H
#define LOWP_EX2_APPROX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define LOWP_EX2_FN static __host__ __device__ __forceinline__
#else
#define LOWP_EX2_FN static inline
#endif

/* What the split says the result is. */
enum lowp_ex2_kind {
    LOWP_EX2_SCALED = 0, /* 2^e * (1 + g(k) 2^-23), -126 <= e <= 127, 0 <= k < 2^23 */
    LOWP_EX2_ZERO,       /* +0: x <= -126 with F != 0, x <= -127, -Inf (flushed / underflow) */
    LOWP_EX2_INF,        /* +Inf: x >= 128, +Inf */
    LOWP_EX2_NAN         /* 0x7FFFFFFF */
};

typedef struct lowp_ex2_split {
    int kind; /* enum lowp_ex2_kind */
    int e;    /* the result's unbiased exponent (LOWP_EX2_SCALED only, else 0) */
    uint32_t k; /* the index into g (LOWP_EX2_SCALED only, else 0) */
} lowp_ex2_split;

#define LOWP_EX2_KBITS 23
#define LOWP_EX2_NK (UINT32_C(1) << LOWP_EX2_KBITS)

/* The input stage for the binary32 bit pattern x (any of the 2^32). */
LOWP_EX2_FN lowp_ex2_split lowp_ex2_approx_split(uint32_t x)
{
    lowp_ex2_split r = {LOWP_EX2_SCALED, 0, 0};
    const uint32_t neg = x >> 31, be = (x >> 23) & 0xFFu, m = x & 0x7FFFFFu;
    if (be == 0xFFu && m != 0) {
        r.kind = LOWP_EX2_NAN;
        return r;
    }
    /* |x| >= 128 (and +-Inf): 2^x overflows or is far below 2^-126 */
    if (be >= 127u + 7u) {
        r.kind = neg ? LOWP_EX2_ZERO : LOWP_EX2_INF;
        return r;
    }
    /* a = floor(|x| 2^23), |x| < 128 so a < 2^30. Subnormal x (be = 0) is below 2^-126,
     * far below 2^-23: a = 0. sig < 2^24 and sh in [-127, 6]: no shift overflows. */
    const uint32_t sig = be ? (m | 0x800000u) : 0u;
    const int sh = (int)be - 127;
    const uint32_t a = sh >= 0 ? sig << sh : (sh > -24 ? sig >> -sh : 0u);
    const int i = (int)(a >> LOWP_EX2_KBITS);
    const uint32_t f = a & (LOWP_EX2_NK - 1u);
    if (!neg) {
        r.e = i; /* i <= 127 */
        r.k = f;
    } else if (f == 0) {
        r.e = -i;
    } else {
        r.e = -(i + 1);
        r.k = (LOWP_EX2_NK - 1u) - f; /* ones' complement of the fraction */
    }
    if (r.e < -126) { /* the result 2^e (1 + g 2^-23) would be subnormal: ftz */
        r.kind = LOWP_EX2_ZERO;
        r.e = 0;
        r.k = 0;
    }
    return r;
}

/* The output stage: the result's bits from the split and g(s.k), the 23-bit mantissa
 * (bits 23-31 of gk are ignored). */
LOWP_EX2_FN uint32_t lowp_ex2_approx_assemble(lowp_ex2_split s, uint32_t gk)
{
    switch (s.kind) {
    case LOWP_EX2_SCALED:
        return (uint32_t)(s.e + 127) << 23 | (gk & 0x7FFFFFu);
    case LOWP_EX2_ZERO:
        return 0u;
    case LOWP_EX2_INF:
        return 0x7F800000u;
    default:
        return 0x7FFFFFFFu;
    }
}

/* ex2.approx.ftz.f32 of the bit pattern x given g as a table of LOWP_EX2_NK mantissas
 * (g[k] = the hardware's mantissa bits of ex2(k 2^-23); the probe measures it). */
LOWP_EX2_FN uint32_t lowp_ex2_approx_ftz_with(uint32_t x, const uint32_t *g)
{
    const lowp_ex2_split s = lowp_ex2_approx_split(x);
    return lowp_ex2_approx_assemble(s, s.kind == LOWP_EX2_SCALED ? g[s.k] : 0u);
}

/* ---- host functions (ref/hw/src/ex2_approx.c, liblowp) */
#ifdef __cplusplus
extern "C" {
#endif
uint32_t lowp_ex2_baseline(uint32_t k); /* the quadratic part of g(k), k < 2^23 */
uint32_t lowp_ex2_g(uint32_t k);        /* g(k): the hardware's mantissa of ex2(k 2^-23) */
uint32_t lowp_ex2_approx_ftz_bits(uint32_t x); /* ex2.approx.ftz.f32, bit patterns */
float lowp_ex2_approx_ftz(float x);
/* the embedded correction table's bytes (lowp/corr_table.h's format, magic LOWPEX2T) */
const unsigned char *lowp_ex2_table_embedded(size_t *len);
#ifdef __cplusplus
}
#endif

/* ex2.approx.ftz.f32: the instruction on the GPU, lowp's model of it on the host. */
#ifdef __CUDACC__
static __host__ __device__ __forceinline__ float lowp_exp2_hw(float x)
{
#ifdef __CUDA_ARCH__
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
#else
    return lowp_ex2_approx_ftz(x);
#endif
}
#else
static inline float lowp_exp2_hw(float x)
{
    return lowp_ex2_approx_ftz(x);
}
#endif

#endif
