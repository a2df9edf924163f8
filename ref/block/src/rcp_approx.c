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
 * Table file (ref/block/data/rcp_approx_sm90.bin, embedded by ref/block/src/rcp_table.S), version 1,
 * all integers little-endian:
 *     off  0  char[8]  "LOWPRCPT"
 *     off  8  u32      version = 1
 *     off 12  u32      header bytes = 40
 *     off 16  u32      mantissa bits = 23
 *     off 20  u32      entries n (mismatching mantissas)
 *     off 24  u32      entries with c = +1
 *     off 28  u32      payload bytes
 *     off 32  u32      CRC-32 (zlib / IEEE 802.3) of the payload
 *     off 36  u32      CRC-32 of header bytes 0..35
 *     off 40  payload: per entry, in strictly increasing mantissa order, gap g = m - prev
 *             (prev = -1 before the first, so g >= 1) and direction d (1: c = +1, 0: -1):
 *             one byte d<<7 | g when g <= 127; else the byte d<<7 followed by g as
 *             unsigned LEB128 (7 bits a byte, low first), g >= 128, no redundant bytes.
 * The encoding of a set of entries is unique (canonical), so two files compare byte for
 * byte exactly when the measurements agree. Entries are the u32s of the shared measured
 * list: bits 0-22 = m, bit 31 = c is +1; bits 23-30 zero.
 *
 * The embedded table is decoded once, at first use, into 2 bits per mantissa (2 MiB);
 * a C11 atomic flag makes that thread-safe (the same pattern as oracle_format.c). A
 * corrupt embedded table is a broken build: lowp aborts with a message rather than
 * return results that are not the hardware's. The result does not depend on the
 * floating-point environment: RN(1/1.m) is computed in integers. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lowp/bits.h"
#include "lowp/block.h"

#include "lowp/why.h"
#include "rcp_table.h"

#define RCP_MBITS 23
#define RCP_NMANT (UINT32_C(1) << RCP_MBITS)
#define RCP_HDR 40u
#define RCP_VERSION 1u
static const char RCP_MAGIC[8] = {'L', 'O', 'W', 'P', 'R', 'C', 'P', 'T'};

/* The bytes of ref/block/data/rcp_approx_sm90.bin, placed by ref/block/src/rcp_table.S (hidden: the
 * shared library does not export them, and C reaches them without the GOT). */
extern const unsigned char lowp_rcp_table_begin[] __attribute__((visibility("hidden")));
extern const unsigned char lowp_rcp_table_end[] __attribute__((visibility("hidden")));

const unsigned char *lowp_rcp_table_embedded(size_t *len)
{
    if (len)
        *len = (size_t)(lowp_rcp_table_end - lowp_rcp_table_begin);
    return lowp_rcp_table_begin;
}

/* ------------------------------------------------------------------------- file format */

uint32_t lowp_rcp_table_crc32(const unsigned char *p, size_t n)
{
    /* Reflected CRC-32, polynomial 0xEDB88320, init and final xor ~0: zlib's crc32(). */
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
    }
    return ~c;
}

static void put_u32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16);
    p[3] = (unsigned char)(v >> 24);
}

static uint32_t get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Encode sorted entries; returns the file size (writing only when out has room), or 0
 * if the entries are not valid (unsorted, duplicate, bits 23-30 set, too many). */
size_t lowp_rcp_table_encode(const uint32_t *entries, size_t n, unsigned char *out, size_t cap)
{
    if (n > RCP_NMANT)
        return 0;
    size_t len = RCP_HDR;
    uint32_t n_up = 0;
    int64_t prev = -1;
    for (size_t i = 0; i < n; i++) {
        uint32_t e = entries[i], m = e & (RCP_NMANT - 1u);
        if ((e & 0x7F800000u) != 0 || (int64_t)m <= prev)
            return 0;
        uint32_t g = (uint32_t)((int64_t)m - prev);
        len += 1;
        if (g > 127)
            for (uint32_t v = g; v; v >>= 7)
                len++;
        n_up += e >> 31;
        prev = m;
    }
    if (!out || cap < len)
        return len;
    unsigned char *p = out + RCP_HDR;
    prev = -1;
    for (size_t i = 0; i < n; i++) {
        uint32_t e = entries[i], m = e & (RCP_NMANT - 1u);
        uint32_t g = (uint32_t)((int64_t)m - prev), d = (e >> 31) << 7;
        if (g <= 127) {
            *p++ = (unsigned char)(d | g);
        } else {
            *p++ = (unsigned char)d;
            for (uint32_t v = g; v; v >>= 7)
                *p++ = (unsigned char)((v & 0x7Fu) | (v > 0x7Fu ? 0x80u : 0u));
        }
        prev = m;
    }
    memcpy(out, RCP_MAGIC, 8);
    put_u32(out + 8, RCP_VERSION);
    put_u32(out + 12, RCP_HDR);
    put_u32(out + 16, RCP_MBITS);
    put_u32(out + 20, (uint32_t)n);
    put_u32(out + 24, n_up);
    put_u32(out + 28, (uint32_t)(len - RCP_HDR));
    put_u32(out + 32, lowp_rcp_table_crc32(out + RCP_HDR, len - RCP_HDR));
    put_u32(out + 36, lowp_rcp_table_crc32(out, 36));
    return len;
}

/* Decode and validate a table file; entries (may be NULL) gets up to cap entries in the
 * u32 form above, *n_out the count. Every field, both CRCs, the counts and the canonical
 * form are checked; returns 0, or -1 with a one-line reason. */
int lowp_rcp_table_decode(const unsigned char *buf, size_t len, uint32_t *entries, size_t cap,
                          size_t *n_out, char *why, size_t why_len)
{
    if (n_out)
        *n_out = 0;
    if (!buf || len < RCP_HDR)
        return lowp_why_set(why, why_len, "table shorter than its header (%lu bytes)",
                            (unsigned long)len);
    if (memcmp(buf, RCP_MAGIC, 8) != 0)
        return lowp_why_set(why, why_len, "bad magic (want LOWPRCPT)");
    if (get_u32(buf + 8) != RCP_VERSION)
        return lowp_why_set(why, why_len, "unsupported version %lu",
                            (unsigned long)get_u32(buf + 8));
    if (get_u32(buf + 12) != RCP_HDR || get_u32(buf + 16) != RCP_MBITS)
        return lowp_why_set(why, why_len, "bad header size or mantissa width");
    if (lowp_rcp_table_crc32(buf, 36) != get_u32(buf + 36))
        return lowp_why_set(why, why_len, "header CRC-32 mismatch");
    uint32_t n = get_u32(buf + 20), n_up_want = get_u32(buf + 24), plen = get_u32(buf + 28);
    if ((size_t)plen != len - RCP_HDR)
        return lowp_why_set(why, why_len, "payload length field does not match the file (%lu)",
                            (unsigned long)plen);
    const unsigned char *p = buf + RCP_HDR, *end = buf + len;
    if (lowp_rcp_table_crc32(p, plen) != get_u32(buf + 32))
        return lowp_why_set(why, why_len, "payload CRC-32 mismatch");
    if (entries && cap < n)
        return lowp_why_set(why, why_len, "entry buffer too small for %lu entries",
                            (unsigned long)n);
    int64_t prev = -1;
    uint32_t k = 0, n_up = 0;
    while (p < end) {
        uint32_t b = *p++, d = b >> 7, g = b & 0x7Fu;
        if (g == 0) { /* escaped gap: LEB128, at most 4 bytes for g < 2^24 */
            int sh = 0;
            for (;;) {
                if (p == end || sh > 21)
                    return lowp_why_set(why, why_len, "truncated or overlong gap at entry %lu",
                                        (unsigned long)k);
                uint32_t c = *p++;
                g |= (c & 0x7Fu) << sh;
                sh += 7;
                if (!(c & 0x80u)) {
                    if (c == 0 && sh > 7)
                        return lowp_why_set(why, why_len, "non-canonical gap at entry %lu",
                                            (unsigned long)k);
                    break;
                }
            }
            if (g <= 127)
                return lowp_why_set(why, why_len, "non-canonical escaped gap at entry %lu",
                                    (unsigned long)k);
        }
        int64_t m = prev + g;
        if (m >= (int64_t)RCP_NMANT)
            return lowp_why_set(why, why_len, "mantissa beyond 2^23 at entry %lu",
                                (unsigned long)k);
        if (k >= n)
            return lowp_why_set(why, why_len, "more entries than the header's %lu",
                                (unsigned long)n);
        if (entries)
            entries[k] = (uint32_t)m | d << 31;
        n_up += d;
        k++;
        prev = m;
    }
    if (k != n)
        return lowp_why_set(why, why_len, "header says %lu entries, payload has fewer",
                            (unsigned long)n);
    if (n_up != n_up_want)
        return lowp_why_set(why, why_len, "header +1 count %lu does not match the payload",
                            (unsigned long)n_up_want);
    if (n_out)
        *n_out = n;
    return 0;
}

/* ------------------------------------------------------------------ decoded lookup */

/* 2 bits per mantissa, 4 per byte, mantissa m in bits 2*(m&3) of byte m>>2:
 * 0 = RN, 1 = RN + 1 ulp, 2 = RN - 1 ulp. */
static unsigned char g_corr[RCP_NMANT / 4];
/* 0: not decoded; 1: being decoded by one thread; 2: ready (release/acquire). */
static atomic_int g_state;

static void table_build(void)
{
    size_t len, n;
    const unsigned char *buf = lowp_rcp_table_embedded(&len);
    char why[160];
    uint32_t *e = malloc(sizeof *e * RCP_NMANT);
    if (!e || lowp_rcp_table_decode(buf, len, e, RCP_NMANT, &n, why, sizeof why) != 0) {
        /* The table is part of the build; without it no result would be the hardware's. */
        fprintf(stderr, "lowp: embedded rcp.approx table unusable: %s\n",
                e ? why : "out of memory");
        abort();
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t m = e[i] & (RCP_NMANT - 1u);
        g_corr[m >> 2] |= (unsigned char)((e[i] >> 31 ? 1u : 2u) << (2 * (m & 3u)));
    }
    free(e);
}

static const unsigned char *corr_table(void)
{
    if (atomic_load_explicit(&g_state, memory_order_acquire) != 2) {
        int expected = 0;
        if (atomic_compare_exchange_strong(&g_state, &expected, 1)) {
            table_build();
            atomic_store_explicit(&g_state, 2, memory_order_release);
        } else {
            /* Another thread decodes it; that takes milliseconds. */
            while (atomic_load_explicit(&g_state, memory_order_acquire) != 2)
                ;
        }
    }
    return g_corr;
}

int lowp_rcp_table_correction(uint32_t mantissa)
{
    mantissa &= RCP_NMANT - 1u;
    unsigned c = (corr_table()[mantissa >> 2] >> (2 * (mantissa & 3u))) & 3u;
    return c == 1 ? 1 : (c == 2 ? -1 : 0);
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
