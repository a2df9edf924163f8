/* gpu/kernels/cvt_internal.h: what cvt.cu (CUDA, host part) and sweep.c (C, OpenMP) share. */
#ifndef LOWP_GPU_CVT_INTERNAL_H
#define LOWP_GPU_CVT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "lowp/format.h"
#include "lowp/gpu_cvt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Compare n GPU codes for the binary32 inputs first_bits, first_bits+1, ... with the
 * CPU codec c; code_bytes is 1 (uint8_t codes) or 2 (uint16_t). Adds to acc (inputs,
 * mismatches, NaN breakdown, first mismatches). OpenMP over threads (0 = default). */
void lowp_gpu_compare_f32_chunk(const lowp_codec *c, uint32_t first_bits, size_t n,
                                const void *gpu_codes, int code_bytes, int threads,
                                lowp_gpu_sweep *acc);

/* Add one compared input to acc. out_format says how to read gpu/cpu as NaN or not. */
void lowp_gpu_record(lowp_gpu_sweep *acc, lowp_format out_format, uint32_t input,
                     int input_is_nan, uint16_t gpu, uint16_t cpu);

/* Merge a list of mismatches (ascending input) into acc->first, keeping the smallest. */
void lowp_gpu_merge_first(lowp_gpu_sweep *acc, const lowp_gpu_mismatch *m, unsigned n);

/* Number of binary32 NaN bit patterns in [lo, hi), hi <= 2^32. */
uint64_t lowp_gpu_nan_count(uint64_t lo, uint64_t hi);

double lowp_gpu_now(void);

#ifdef __cplusplus
}
#endif
#endif
