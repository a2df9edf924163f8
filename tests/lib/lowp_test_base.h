/* tests/lib/lowp_test_base.h: the part of the test helpers that needs no Check, so that the
 * GPU probes' host code (gpu/probe/mma_probe_main.c in C, gpu/probe/rcp_probe.cu in C++)
 * draws and builds its inputs with the same functions as the Check suites. lowp_test.h
 * includes it; a probe includes it alone (its CMake target names tests/lib as an include
 * directory).
 *
 *   lowp_test_urand, lowp_test_gauss, lowp_test_irange, lowp_test_stream
 *                         random draws, all from lowp_splitmix64 (the one RNG)
 *   lowp_test_f32_bits, lowp_test_f64_bits, lowp_test_f32_from_bits, lowp_test_f64_from_bits,
 *   lowp_test_bf16_value, lowp_test_f16_widen
 *                         bit patterns of floats, and bf16 / binary16 values
 *   lowp_test_bf16_make, lowp_test_f32_make, lowp_test_bf16_draw, lowp_test_f32_draw
 *                         bf16 / binary32 bit patterns from (sign, exponent, fraction), and
 *                         drawn with the exponent in a range: the MMA model's input space,
 *                         which tests/test_mma.c and the GPU probe both explore
 *   lowp_test_now         a monotonic clock for timings
 *
 * Every function is static inline: nothing to link but lowp (lowp_splitmix64). */
#ifndef LOWP_TEST_BASE_H
#define LOWP_TEST_BASE_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "lowp/bits.h"
#include "lowp/cases.h"

/* Uniform on [0, 1): the top 53 bits of one lowp_splitmix64 step. */
static inline double lowp_test_urand(uint64_t *s)
{
    return (double)(lowp_splitmix64(s) >> 11) * 0x1p-53;
}

/* A standard normal draw (Box-Muller from two lowp_test_urand draws, the first kept at
 * least 2^-60 so the logarithm is finite). */
static inline double lowp_test_gauss(uint64_t *s)
{
    double u = lowp_test_urand(s), v = lowp_test_urand(s);
    if (u < 0x1p-60)
        u = 0x1p-60;
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* An integer in [lo, hi] (lo <= hi) from one lowp_splitmix64 step, by remainder: the bias
 * is below (hi - lo + 1) / 2^64, far below anything a test can see. */
static inline int lowp_test_irange(uint64_t *s, int lo, int hi)
{
    return lo + (int)(lowp_splitmix64(s) % (uint64_t)((int64_t)hi - lo + 1));
}

/* The state of an independent stream for (a, b, c) under seed: reproducible from
 * LOWP_SEED and the three indices alone, whatever ran before. */
static inline uint64_t lowp_test_stream(uint64_t seed, uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t s = seed ^ (a * UINT64_C(0x9E3779B97F4A7C15)) ^ (b * UINT64_C(0xD1B54A32D192ED03)) ^
                 (c * UINT64_C(0x8CB92BA72F3D8DD7));
    (void)lowp_splitmix64(&s);
    return s;
}

/* The value of bf16 bits h: a bf16 is the high half of a binary32, exactly. */
static inline float lowp_test_bf16_value(uint16_t h)
{
    return lowp_f32_from_bits((uint32_t)h << 16);
}

/* The binary32 value of binary16 bits h, exactly; a NaN keeps its payload (moved up 13 bits,
 * so a signalling NaN stays signalling). Written here from the binary16 layout, not taken
 * from lowp, so the inputs do not depend on the code under test. */
static inline float lowp_test_f16_widen(uint16_t h)
{
    const uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    if (e == 0x1F)
        return lowp_f32_from_bits(s | 0x7F800000u | (m << 13));
    if (e == 0) {
        const float v = ldexpf((float)m, -24); /* exact: m < 2^10 */
        return s ? -v : v;
    }
    return lowp_f32_from_bits(s | ((e - 15 + 127) << 23) | (m << 13));
}

/* bf16 bits of (-1)^neg (1 + f/128) 2^e, only f's low 7 bits used and e clamped to 127;
 * below 2^-126 the subnormal with the truncated significand (value (128 + f) 2^(e - 7)
 * cut to a multiple of 2^-133), 0 of that sign below the smallest subnormal. */
static inline uint16_t lowp_test_bf16_make(int neg, int e, unsigned f)
{
    const unsigned s = neg ? 0x8000u : 0u;
    f &= 0x7Fu;
    if (e > 127)
        e = 127;
    if (e >= -126)
        return (uint16_t)(s | (unsigned)(e + 127) << 7 | f);
    const int sh = -126 - e;
    return (uint16_t)(s | (sh >= 8 ? 0u : (0x80u | f) >> sh));
}

/* The same for binary32: (-1)^neg (1 + f/2^23) 2^e, f's low 23 bits, e clamped to 127,
 * truncated subnormals below 2^-126 (multiples of 2^-149). */
static inline uint32_t lowp_test_f32_make(int neg, int e, uint32_t f)
{
    const uint32_t s = neg ? 0x80000000u : 0u;
    f &= 0x7FFFFFu;
    if (e > 127)
        e = 127;
    if (e >= -126)
        return s | (uint32_t)(e + 127) << 23 | f;
    const int sh = -126 - e;
    return s | (sh >= 24 ? 0u : (0x800000u | f) >> sh);
}

/* A bf16 of random sign and fraction with its exponent drawn from [elo, ehi]: two
 * lowp_splitmix64 steps (sign and fraction from the first, the exponent the second). */
static inline uint16_t lowp_test_bf16_draw(uint64_t *s, int elo, int ehi)
{
    const uint64_t r = lowp_splitmix64(s);
    return lowp_test_bf16_make((int)(r & 1), lowp_test_irange(s, elo, ehi), (unsigned)(r >> 8));
}

/* The same for binary32. */
static inline uint32_t lowp_test_f32_draw(uint64_t *s, int elo, int ehi)
{
    const uint64_t r = lowp_splitmix64(s);
    return lowp_test_f32_make((int)(r & 1), lowp_test_irange(s, elo, ehi), (uint32_t)(r >> 8));
}

/* Seconds on CLOCK_MONOTONIC. */
static inline double lowp_test_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#endif
