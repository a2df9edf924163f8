/* tests/lib/lowp_test_rcp.h: the reciprocal that lowp's rcp.approx.ftz.f32 model
 * (lowp_rcp_approx_ftz, ref/block) is held to, on binary32 bit patterns. Shared by
 * tests/test_rcp_approx.c and the GPU probe's host code (gpu/probe/rcp_probe.cu, C++), which
 * compare the model with the correctly rounded reciprocal and with the hardware. No Check. */
#ifndef LOWP_TEST_RCP_H
#define LOWP_TEST_RCP_H

#include <stdint.h>

#include "lowp/block.h"
#include "lowp_test_base.h"

/* The bits of lowp_rcp_approx_ftz at the binary32 with bits x. */
static inline uint32_t lowp_test_rcp_model(uint32_t x)
{
    return lowp_f32_bits(lowp_rcp_approx_ftz(lowp_f32_from_bits(x)));
}

/* RN(1/x) in binary32 with IEEE gradual underflow, through binary64: 1/x in binary64 is
 * within 2^-53 relative of 1/x, and 1/x (x = integer * 2^k, 24-bit integer, not a power of
 * two) is never closer than about 2^-49 relative to a binary32 rounding boundary, so the
 * second rounding cannot flip; powers of two are exact in both. */
static inline uint32_t lowp_test_rcp_rn(uint32_t x)
{
    return lowp_f32_bits((float)(1.0 / (double)lowp_f32_from_bits(x)));
}

#endif
