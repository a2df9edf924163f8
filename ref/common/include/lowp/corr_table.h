/* ref/common/include/lowp/corr_table.h: lowp's file format for a measured +-1-ulp correction
 * list over the 2^23 mantissas of a hardware approximation, and its decoded lookup (private
 * header, like lowp/why.h). Two tables use it: rcp.approx.ftz.f32 (ref/block, magic
 * "LOWPRCPT", corrections against RN(1/1.m)) and ex2.approx.ftz.f32 (ref/hw, magic
 * "LOWPEX2T", corrections against the integer baseline of ref/hw/src/ex2_approx.c). The
 * magic says which; everything else is the same format and the same code.
 *
 * File, all integers little-endian:
 *     off  0  char[8]  magic
 *     off  8  u32      version = 1
 *     off 12  u32      header bytes = 40
 *     off 16  u32      mantissa bits = 23
 *     off 20  u32      entries n (corrected mantissas)
 *     off 24  u32      entries with c = +1
 *     off 28  u32      payload bytes
 *     off 32  u32      CRC-32 (zlib / IEEE 802.3) of the payload
 *     off 36  u32      CRC-32 of header bytes 0..35
 *     off 40  payload: per entry, in strictly increasing mantissa order, gap g = m - prev
 *             (prev = -1 before the first, so g >= 1) and direction d (1: c = +1, 0: -1):
 *             one byte d<<7 | g when g <= 127; else the byte d<<7 followed by g as
 *             unsigned LEB128 (7 bits a byte, low first), g >= 128, no redundant bytes.
 * The encoding of a set of entries is unique (canonical), so two files compare byte for byte
 * exactly when the measurements agree. An entry as a u32: bits 0-22 = m, bit 31 = c is +1,
 * bits 23-30 zero.
 *
 * Host C only (the lookup uses C11 atomics); C++ callers (the GPU probes) see the file
 * functions alone. */
#ifndef LOWP_COMMON_CORR_TABLE_H
#define LOWP_COMMON_CORR_TABLE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LOWP_CORR_MBITS 23
#define LOWP_CORR_NMANT (UINT32_C(1) << LOWP_CORR_MBITS)

uint32_t lowp_corr_table_crc32(const unsigned char *p, size_t n);
/* Encode sorted entries; returns the file size (writing only when out has room), or 0 if
 * the entries are not valid (unsorted, duplicate, bits 23-30 set, too many). */
size_t lowp_corr_table_encode(const char magic[8], const uint32_t *entries, size_t n,
                              unsigned char *out, size_t cap);
/* Decode and validate; entries (may be NULL) gets up to cap entries, *n_out the count.
 * Every field, both CRCs, the counts and the canonical form are checked; 0, or -1 with a
 * one-line reason. */
int lowp_corr_table_decode(const char magic[8], const unsigned char *buf, size_t len,
                           uint32_t *entries, size_t cap, size_t *n_out, char *why,
                           size_t why_len);

#ifndef __cplusplus
#include <stdatomic.h>
/* A table decoded on first use into 2 bits a mantissa (2 MiB), thread-safe; a table that
 * does not decode is a broken build and aborts with a message naming `what`. Define one
 * with static storage and designated initializers for magic, what, begin, end. */
typedef struct lowp_corr_lut {
    const char *magic;          /* 8 bytes */
    const char *what;           /* for the abort message */
    const unsigned char *begin; /* the embedded file */
    const unsigned char *end;
    atomic_int state; /* 0 not decoded, 1 decoding, 2 ready */
    unsigned char bits[LOWP_CORR_NMANT / 4]; /* m in bits 2 (m & 3) of byte m >> 2: 0, 1 = +1, 2 = -1 */
} lowp_corr_lut;

/* The correction of mantissa m (its low 23 bits): -1, 0 or +1. */
int lowp_corr_lut_get(lowp_corr_lut *t, uint32_t m);
#endif

#ifdef __cplusplus
}
#endif
#endif
