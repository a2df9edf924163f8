/* ref/block/src/rcp_approx.c: rcp.approx.ftz.f32 as the H200 (sm_90, MUFU.RCP) computes it.
 *
 * Model, for every binary32 input x. Bit-exact: gpu/probe/rcp_probe.cu compares it with the
 * hardware on all 2^32 inputs; on an H200 (driver 580.159.04, CUDA 13.0) that found 0
 * mismatches, and the table it re-measured was byte-identical to ref/block/data's.
 *   - NaN (either sign, quiet or signalling)  -> 0x7FFFFFFF, NVIDIA's canonical NaN;
 *   - +-0 and +-subnormal (flushed to +-0)    -> +-Inf;
 *   - +-Inf                                   -> +-0;
 *   - normal x = +-1.m * 2^(E-127):
 *       r = RN(1 / 1.m) + c(m) ulp, with c(m) in {-1, 0, +1} from the measured table,
 *       result = +-r * 2^(127-E), and +-0 when that is below 2^-126 (flush to zero).
 *     The scaling by 2^(127-E) is exact, so the error is exponent-invariant (measured: 0
 *     violations over E = 1..254, ref/notes/formats.md section 5.7). A normal input
 *     never overflows: 1/x <= 2^126 for x >= 2^-126.
 *
 * Why a table and not a formula. The 2^23 measured mantissas were analysed (a bounded
 * search for a compact model): the result is always faithful (floor or ceil of the exact
 * 1/1.m in ulps of 2^-24; never off by more than one ulp from RN), and on a mismatch it is
 * always the neighbour RN did not pick, so the direction follows from the mantissa (+1
 * when RN rounded down; the file still stores it, so that it can hold any measurement, and
 * the test checks the rule). But WHETHER a mantissa mismatches is not predicted by any
 * smooth error curve: writing the hardware result as
 * RN(1/1.m + e(m)), the interval of e(m) allowed by the measurement, intersected over
 * 16 consecutive mantissas, is already empty in 2,493 of 524,288 windows (by up to 0.069
 * ulp), and over 256 consecutive mantissas in 18,263 of 32,768 windows (by up to 0.147
 * ulp). So e(m) carries a bit-pattern-dependent term of at least +-0.07 ulp on top of
 * the interpolator's smooth error (the truncations inside a quadratic interpolator,
 * Oberman & Siu, ARITH 2005, whose widths and coefficients NVIDIA does not publish). A
 * bit-exact formula would have to reconstruct that datapath; the measured table is
 * exact by construction and regenerable on the GPU (gpu/probe/rcp_probe.cu), so it is used.
 *
 * Table file: ref/block/data/rcp_approx_sm90.bin, embedded by ref/common/src/embed_table.S, in
 * lowp's correction-table format (lowp/corr_table.h) with the magic "LOWPRCPT".
 * The embedded table is decoded once, at first use, into 2 bits per mantissa (2 MiB,
 * lowp_corr_lut, thread-safe). A corrupt embedded table is a broken build: lowp aborts
 * with a message rather than return results that are not the hardware's. The result does not depend on the
 * floating-point environment: RN(1/1.m) is computed in integers. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lowp/bits.h"
#include "lowp/block.h"

#include "lowp/corr_table.h"
#include "lowp/why.h"
#include "rcp_table.h"

#define RCP_MBITS 23
#define RCP_NMANT (UINT32_C(1) << RCP_MBITS)
static const char RCP_MAGIC[8] = {'L', 'O', 'W', 'P', 'R', 'C', 'P', 'T'};

/* The bytes of ref/block/data/rcp_approx_sm90.bin, placed by ref/common/src/embed_table.S (hidden: the
 * shared library does not export them, and C reaches them without the GOT). */
extern const unsigned char lowp_rcp_table_begin[] __attribute__((visibility("hidden")));
extern const unsigned char lowp_rcp_table_end[] __attribute__((visibility("hidden")));

const unsigned char *lowp_rcp_table_embedded(size_t *len)
{
    if (len)
        *len = (size_t)(lowp_rcp_table_end - lowp_rcp_table_begin);
    return lowp_rcp_table_begin;
}

/* ------------------------------------------------------------------ file format */
/* The format and its code are lowp/corr_table.h's; this table's magic is "LOWPRCPT". */

uint32_t lowp_rcp_table_crc32(const unsigned char *p, size_t n)
{
    return lowp_corr_table_crc32(p, n);
}

size_t lowp_rcp_table_encode(const uint32_t *entries, size_t n, unsigned char *out, size_t cap)
{
    return lowp_corr_table_encode(RCP_MAGIC, entries, n, out, cap);
}

int lowp_rcp_table_decode(const unsigned char *buf, size_t len, uint32_t *entries, size_t cap,
                          size_t *n_out, char *why, size_t why_len)
{
    return lowp_corr_table_decode(RCP_MAGIC, buf, len, entries, cap, n_out, why, why_len);
}

/* ------------------------------------------------------------------ decoded lookup */

static lowp_corr_lut g_lut = {
    .magic = RCP_MAGIC, .what = "rcp.approx", .begin = lowp_rcp_table_begin, .end = lowp_rcp_table_end};

int lowp_rcp_table_correction(uint32_t mantissa)
{
    return lowp_corr_lut_get(&g_lut, mantissa);
}

/* Bits of RN(1 / 1.m), for m = 0 .. 2^23-1, in integers. For m > 0 the quotient lies in
 * (1/2, 1): q = floor(2^47 / (2^23 + m)) is its 24-bit significand in units of 2^-24
 * (2^23 <= q < 2^24) and the remainder decides the rounding; a tie would need 2^23 + m to
 * divide 2^48, i.e. m = 0. RN never reaches 1.0 for m > 0 (1/(1+2^-23) = 1 - 2^-23 + ...
 * rounds to 1 - 2^-23), so the exponent field is 126; the addition below would carry into
 * it correctly anyway. */
uint32_t lowp_rcp_rn_bits(uint32_t mantissa)
{
    uint64_t m = mantissa & (RCP_NMANT - 1u);
    if (m == 0)
        return 0x3F800000u; /* 1/1 = 1 */
    uint64_t d = (UINT64_C(1) << 23) + m;
    uint64_t q = (UINT64_C(1) << 47) / d, rem = (UINT64_C(1) << 47) % d;
    q += (2 * rem > d);
    return 0x3F000000u + (uint32_t)(q - (UINT64_C(1) << 23));
}

float lowp_rcp_approx_ftz(float x)
{
    uint32_t b = lowp_f32_bits(x);
    uint32_t sign = b & 0x80000000u, e = (b >> 23) & 0xFFu, m = b & (RCP_NMANT - 1u);
    uint32_t r;
    if (e == 0xFF) {
        r = m ? 0x7FFFFFFFu : sign; /* NaN -> canonical NaN; +-Inf -> +-0 */
    } else if (e == 0) {
        r = sign | 0x7F800000u; /* +-0 and +-subnormal (flushed to +-0) -> +-Inf */
    } else {
        /* The correction moves the significand by one ulp within [1/2, 1] (it never
         * leaves the binade: checked for all m by tests/test_rcp_approx.c); then scale by
         * 2^(127-e), exact, flushing a subnormal result to zero. */
        uint32_t t = (uint32_t)((int32_t)lowp_rcp_rn_bits(m) + lowp_rcp_table_correction(m));
        int32_t re = (int32_t)(t >> 23) + 127 - (int32_t)e; /* 0 .. 254: no overflow */
        r = re >= 1 ? sign | (uint32_t)re << 23 | (t & (RCP_NMANT - 1u)) : sign;
    }
    return lowp_f32_from_bits(r);
}
