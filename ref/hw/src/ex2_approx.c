/* ref/hw/src/ex2_approx.c: ex2.approx.ftz.f32 of sm_90 (MUFU.EX2) on the host, bit for bit:
 * the input and output stages of lowp/ex2_approx.h around g(k), the mantissa the hardware
 * returns for x = k 2^-23 in [0, 1).
 *
 * g(k) = base(k) + c(k): base is an integer quadratic per segment of 2^17 indices
 * (ex2_baseline.h, fitted by tools/ex2_fit.py --table), c in {-1, 0, +1} the measured
 * correction, 158,491 of the 2^23 indices non-zero, from the embedded table
 * ref/hw/data/ex2_approx_sm90.bin (lowp/corr_table.h's format, magic "LOWPEX2T"). Why a
 * table at all: no smooth fixed-point polynomial reproduces g (ref/notes/ex2-approx.md
 * gives the bounds); the quadratic only makes the correction list short.
 *
 * Evidence: the split with the measured g equals the hardware on all 2^32 inputs
 * (gpu/probe/ex2_probe.cu, on an H200 2026-12-02 and on an H100 2026-12-06); the probe
 * also compares lowp_ex2_g with its measured g on all 2^23 indices and the table it
 * re-encodes with the embedded file byte for byte. tests/test_ex2_approx.c checks
 * lowp_ex2_g against 270 H200-measured samples and the model against 496 measured pairs.
 * Integer arithmetic only: the result does not depend on the floating-point environment. */
#include <stdint.h>

#include "lowp/bits.h"
#include "lowp/corr_table.h"
#include "lowp/ex2_approx.h"

#include "ex2_baseline.h"

static const char EX2_MAGIC[8] = {'L', 'O', 'W', 'P', 'E', 'X', '2', 'T'};

/* The bytes of ref/hw/data/ex2_approx_sm90.bin, placed by ref/common/src/embed_table.S. */
extern const unsigned char lowp_ex2_table_begin[] __attribute__((visibility("hidden")));
extern const unsigned char lowp_ex2_table_end[] __attribute__((visibility("hidden")));

static lowp_corr_lut g_lut = {
    .magic = EX2_MAGIC, .what = "ex2.approx", .begin = lowp_ex2_table_begin, .end = lowp_ex2_table_end};

const unsigned char *lowp_ex2_table_embedded(size_t *len)
{
    if (len)
        *len = (size_t)(lowp_ex2_table_end - lowp_ex2_table_begin);
    return lowp_ex2_table_begin;
}

uint32_t lowp_ex2_baseline(uint32_t k)
{
    k &= LOWP_EX2_NK - 1u;
    const int64_t *c = lowp_ex2_base[k >> LOWP_EX2_SEG_BITS];
    const int64_t t = (int64_t)(k & ((UINT32_C(1) << LOWP_EX2_SEG_BITS) - 1u));
    return (uint32_t)((c[0] + c[1] * t + c[2] * t * t) >> LOWP_EX2_BASE_SHIFT);
}

uint32_t lowp_ex2_g(uint32_t k)
{
    return (uint32_t)((int32_t)lowp_ex2_baseline(k) + lowp_corr_lut_get(&g_lut, k));
}

uint32_t lowp_ex2_approx_ftz_bits(uint32_t x)
{
    const lowp_ex2_split s = lowp_ex2_approx_split(x);
    return lowp_ex2_approx_assemble(s, s.kind == LOWP_EX2_SCALED ? lowp_ex2_g(s.k) : 0u);
}

float lowp_ex2_approx_ftz(float x)
{
    return lowp_f32_from_bits(lowp_ex2_approx_ftz_bits(lowp_f32_bits(x)));
}
