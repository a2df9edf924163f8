/* ref/block/internal/rcp_table.h: the measured rcp.approx.ftz.f32 correction table (internal).
 * Shared by ref/block/src/rcp_approx.c, tests/test_rcp_approx.c and gpu/probe/rcp_probe.cu, which
 * measures the table on the GPU and must write it in exactly this format. Host code only.
 * Not installed; the outside users reach it through the PRIVATE include directory
 * ref/block/internal named in their CMake targets (see internal/block_internal.h). */
#ifndef LOWP_RCP_TABLE_H
#define LOWP_RCP_TABLE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

const unsigned char *lowp_rcp_table_embedded(size_t *len);
size_t lowp_rcp_table_encode(const uint32_t *entries, size_t n, unsigned char *out, size_t cap);
int lowp_rcp_table_decode(const unsigned char *buf, size_t len, uint32_t *entries, size_t cap,
                          size_t *n_out, char *why, size_t why_len);
uint32_t lowp_rcp_table_crc32(const unsigned char *p, size_t n);
int lowp_rcp_table_correction(uint32_t mantissa);
uint32_t lowp_rcp_rn_bits(uint32_t mantissa);

#ifdef __cplusplus
}
#endif
#endif
