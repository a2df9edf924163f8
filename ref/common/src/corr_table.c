/* ref/common/src/corr_table.c: lowp's +-1-ulp correction tables (format in
 * lowp/corr_table.h): the file's encoder and validating decoder, and the lookup decoded once
 * on first use. Used by the rcp.approx (ref/block) and ex2.approx (ref/hw) models and by the
 * GPU probes that regenerate their tables. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lowp/corr_table.h"
#include "lowp/why.h"

#define CORR_HDR 40u
#define CORR_VERSION 1u

uint32_t lowp_corr_table_crc32(const unsigned char *p, size_t n)
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
size_t lowp_corr_table_encode(const char magic[8], const uint32_t *entries, size_t n,
                              unsigned char *out, size_t cap)
{
    if (n > LOWP_CORR_NMANT)
        return 0;
    size_t len = CORR_HDR;
    uint32_t n_up = 0;
    int64_t prev = -1;
    for (size_t i = 0; i < n; i++) {
        uint32_t e = entries[i], m = e & (LOWP_CORR_NMANT - 1u);
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
    unsigned char *p = out + CORR_HDR;
    prev = -1;
    for (size_t i = 0; i < n; i++) {
        uint32_t e = entries[i], m = e & (LOWP_CORR_NMANT - 1u);
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
    memcpy(out, magic, 8);
    put_u32(out + 8, CORR_VERSION);
    put_u32(out + 12, CORR_HDR);
    put_u32(out + 16, LOWP_CORR_MBITS);
    put_u32(out + 20, (uint32_t)n);
    put_u32(out + 24, n_up);
    put_u32(out + 28, (uint32_t)(len - CORR_HDR));
    put_u32(out + 32, lowp_corr_table_crc32(out + CORR_HDR, len - CORR_HDR));
    put_u32(out + 36, lowp_corr_table_crc32(out, 36));
    return len;
}

/* Decode and validate a table file; entries (may be NULL) gets up to cap entries in the
 * u32 form above, *n_out the count. Every field, both CRCs, the counts and the canonical
 * form are checked; returns 0, or -1 with a one-line reason. */
int lowp_corr_table_decode(const char magic[8], const unsigned char *buf, size_t len,
                           uint32_t *entries, size_t cap, size_t *n_out, char *why,
                           size_t why_len)
{
    if (n_out)
        *n_out = 0;
    if (!buf || len < CORR_HDR)
        return lowp_why_set(why, why_len, "table shorter than its header (%lu bytes)",
                            (unsigned long)len);
    if (memcmp(buf, magic, 8) != 0)
        return lowp_why_set(why, why_len, "bad magic (want %.8s)", magic);
    if (get_u32(buf + 8) != CORR_VERSION)
        return lowp_why_set(why, why_len, "unsupported version %lu",
                            (unsigned long)get_u32(buf + 8));
    if (get_u32(buf + 12) != CORR_HDR || get_u32(buf + 16) != LOWP_CORR_MBITS)
        return lowp_why_set(why, why_len, "bad header size or mantissa width");
    if (lowp_corr_table_crc32(buf, 36) != get_u32(buf + 36))
        return lowp_why_set(why, why_len, "header CRC-32 mismatch");
    uint32_t n = get_u32(buf + 20), n_up_want = get_u32(buf + 24), plen = get_u32(buf + 28);
    if ((size_t)plen != len - CORR_HDR)
        return lowp_why_set(why, why_len, "payload length field does not match the file (%lu)",
                            (unsigned long)plen);
    const unsigned char *p = buf + CORR_HDR, *end = buf + len;
    if (lowp_corr_table_crc32(p, plen) != get_u32(buf + 32))
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
        if (m >= (int64_t)LOWP_CORR_NMANT)
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

static void lut_build(lowp_corr_lut *t)
{
    size_t n;
    char why[160];
    uint32_t *e = malloc(sizeof *e * LOWP_CORR_NMANT);
    if (!e || lowp_corr_table_decode(t->magic, t->begin, (size_t)(t->end - t->begin), e,
                                     LOWP_CORR_NMANT, &n, why, sizeof why) != 0) {
        /* The table is part of the build; without it no result would be the hardware's. */
        fprintf(stderr, "lowp: embedded %s table unusable: %s\n", t->what,
                e ? why : "out of memory");
        abort();
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t m = e[i] & (LOWP_CORR_NMANT - 1u);
        t->bits[m >> 2] |= (unsigned char)((e[i] >> 31 ? 1u : 2u) << (2 * (m & 3u)));
    }
    free(e);
}

int lowp_corr_lut_get(lowp_corr_lut *t, uint32_t m)
{
    if (atomic_load_explicit(&t->state, memory_order_acquire) != 2) {
        int expected = 0;
        if (atomic_compare_exchange_strong(&t->state, &expected, 1)) {
            lut_build(t);
            atomic_store_explicit(&t->state, 2, memory_order_release);
        } else {
            /* Another thread decodes it; that takes milliseconds. */
            while (atomic_load_explicit(&t->state, memory_order_acquire) != 2)
                ;
        }
    }
    m &= LOWP_CORR_NMANT - 1u;
    unsigned c = (t->bits[m >> 2] >> (2 * (m & 3u))) & 3u;
    return c == 1 ? 1 : (c == 2 ? -1 : 0);
}
