/* tools/oracle_cuda_host.h: CUDA 13's own host conversion functions as an oracle.
 *
 * oracle_cuda_host.cu is compiled by nvcc as host code only: it calls the functions of
 * cuda_fp8.h, cuda_fp4.h, cuda_bf16.h and cuda_fp16.h exactly as a CUDA program does on
 * the CPU (their software paths; no GPU, no CUDA runtime). The map (format, rounding mode,
 * saturation) -> CUDA function is the "cuda" column of ref/profiles.md:
 *
 *   e2m1  rn, rz (saturating only)  __nv_cvt_{float,double}_to_fp4(x, __NV_E2M1, cudaRoundNearest/cudaRoundZero)
 *   e4m3  rn, sat or nosat          __nv_cvt_{float,double}_to_fp8(x, __NV_SATFINITE/__NV_NOSAT, __NV_E4M3)
 *   e5m2  rn, sat or nosat          __nv_cvt_{float,double}_to_fp8(x, __NV_SATFINITE/__NV_NOSAT, __NV_E5M2)
 *   e8m0  rz, ru; sat or nosat      __nv_cvt_{float,double}_to_e8m0(x, __NV_SATFINITE/__NV_NOSAT, cudaRoundZero/cudaRoundPosInf)
 *   bf16  rn, rz, ru, rd (nosat)    __float2bfloat16_rn/_rz/_ru/_rd; binary64: __double2bfloat16 (rn only)
 *   f16   rn, rz, ru, rd (nosat)    __float2half_rn/_rz/_ru/_rd;     binary64: __double2half (rn only)
 *
 * Codes are laid out as lowp's: E2M1 in the low nibble, E4M3/E5M2/E8M0 one byte,
 * BF16/F16 two bytes. The array loops are OpenMP-parallel above a size threshold, using
 * the caller's OpenMP thread count (omp_set_num_threads applies). */
#ifndef LOWP_ORACLE_CUDA_HOST_H
#define LOWP_ORACLE_CUDA_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "lowp/format.h"

#ifdef __cplusplus
extern "C" {
#endif

/* saturate: LOWP_SAT_ON, LOWP_SAT_OFF, or LOWP_SAT_DEFAULT for CUDA's own default
 * (saturating for e2m1, e4m3, e5m2 and e8m0, as the __nv_fp8_e4m3(float) etc.
 * constructors; non-saturating for bf16 and f16, whose conversions have no choice). */

/* 1 if CUDA has a host conversion from binary32 for (f, r, saturate), else 0. */
int lowp_cuda_host_has_f32(lowp_format f, lowp_round r, int saturate);
/* 1 if CUDA has a host conversion from binary64 for (f, r, saturate), else 0. The same
 * set as binary32 except bf16/f16, where CUDA 13 has only round-to-nearest. */
int lowp_cuda_host_has_f64(lowp_format f, lowp_round r, int saturate);

/* The CUDA call used, e.g. "__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3)";
 * input_bits is 32 or 64. A static string; "(none)" where CUDA has no such conversion. */
const char *lowp_cuda_host_function(lowp_format f, lowp_round r, int saturate, int input_bits);

/* "CUDA 13.0 (cuda_fp8.h, cuda_fp4.h, cuda_bf16.h, cuda_fp16.h host code, nvcc)": the
 * toolkit these functions were compiled from. */
const char *lowp_cuda_host_version(void);

/* Encode n values. Return 0, or -1 if CUDA has no such host conversion (then nothing is
 * written). The u8 variant also returns -1 for the 16-bit formats. */
int lowp_cuda_host_encode_f32(lowp_format f, lowp_round r, int saturate, const float *in,
                              uint16_t *out, size_t n);
int lowp_cuda_host_encode_f32_u8(lowp_format f, lowp_round r, int saturate, const float *in,
                                 uint8_t *out, size_t n);
int lowp_cuda_host_encode_f64(lowp_format f, lowp_round r, int saturate, const double *in,
                              uint16_t *out, size_t n);

#ifdef __cplusplus
}
#endif
#endif /* LOWP_ORACLE_CUDA_HOST_H */
