/* lowp/gpu_cvt.h: the GPU harness. Converts buffers with the hardware PTX `cvt`
 * instructions and compares them, exhaustively, with lowp's CPU model.
 *
 * Instructions used (inline PTX, nothing from cuda_fp8.h's software paths):
 *   sm_90 and later (built for sm_90, run on the H200):
 *     cvt.rn.satfinite.e4m3x2.f32 / .e5m2x2.f32        binary32 -> E4M3 / E5M2
 *     cvt.rn.satfinite.e4m3x2.f16x2 / .e5m2x2.f16x2    binary16 -> E4M3 / E5M2
 *     cvt.rn.f16x2.e4m3x2 / .e5m2x2                    E4M3 / E5M2 -> binary16
 *     cvt.{rn,rz,rm,rp}.bf16.f32, cvt.{rn,rz,rm,rp}.f16.f32
 *   sm_100a / sm_120a only (family-specific Blackwell targets; CUDA 13.0 ptxas rejects
 *   them for sm_90, sm_100 and sm_120). COMPILED BUT NEVER RUN: no Blackwell GPU was
 *   available to this project, so their results here are untested:
 *     cvt.rn.satfinite.e2m1x2.f32                      binary32 -> E2M1
 *     cvt.{rz,rp}{.satfinite}.ue8m0x2.f32              binary32 -> E8M0 (UE8M0)
 *     cvt.rn.f16x2.e2m1x2, cvt.rn.bf16x2.ue8m0x2       decode
 *
 * Codes: one per element, as in lowp/format.h (E2M1 in the low nibble of a byte). The
 * rounding names are lowp's: LOWP_RU is PTX .rp, LOWP_RD is .rm (for E8M0, .rp rounds the
 * magnitude up). saturate takes LOWP_SAT_DEFAULT / LOWP_SAT_OFF / LOWP_SAT_ON; the default
 * is what the instruction family has: satfinite for E2M1, E4M3, E5M2 (the PTX forms
 * exist only with .satfinite) and E8M0, non-saturating for BF16 and F16.
 *
 * Errors: every function returns LOWP_GPU_OK (0) or a negative LOWP_GPU_E* code, and
 * lowp_gpu_last_error() then gives one line saying what failed (which CUDA call, or why
 * the device or the combination is not supported). Not thread-safe. */
#ifndef LOWP_GPU_CVT_H
#define LOWP_GPU_CVT_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "lowp/format.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LOWP_GPU_OK 0
#define LOWP_GPU_ENODEV (-1)       /* no CUDA device or no usable driver */
#define LOWP_GPU_EUNSUPPORTED (-2) /* no cvt for this combination on the running device */
#define LOWP_GPU_EINVAL (-3)       /* bad argument */
#define LOWP_GPU_ECUDA (-4)        /* a CUDA call failed */
#define LOWP_GPU_ENOMEM (-5)       /* host allocation failed */

#define LOWP_GPU_EXIT_SKIP 77      /* exit status of the programs when there is no GPU */

/* What the kernel image the driver loaded for the current device can do. */
#define LOWP_GPU_CAP_FP8 0x1u   /* e4m3x2 / e5m2x2 cvt, f16x2 decode (sm_89 and later) */
#define LOWP_GPU_CAP_F16 0x2u   /* cvt.{rn,rz,rm,rp}.{bf16,f16}.f32 (bf16 rm/rp: sm_90) */
#define LOWP_GPU_CAP_FP4 0x4u   /* e2m1x2 cvt (sm_100a / sm_120a family image) */
#define LOWP_GPU_CAP_UE8M0 0x8u /* ue8m0x2 cvt (sm_100a / sm_120a family image) */

typedef struct lowp_gpu_info {
    int device;
    char name[256];
    int cc_major, cc_minor;
    int driver_version;  /* cudaDriverGetVersion, e.g. 13000 */
    int runtime_version; /* cudaRuntimeGetVersion */
    int sm_count;
    size_t global_mem;
    int image_arch;      /* __CUDA_ARCH__ of the loaded kernels, e.g. 900; 0 if none loads */
    int image_family;    /* __CUDA_ARCH_FAMILY_SPECIFIC__ of that image, 0 if not defined */
    unsigned caps;       /* LOWP_GPU_CAP_* */
} lowp_gpu_info;

/* Select the device and probe it (cudaSetDevice, properties, one tiny kernel that reports
 * which image loaded). LOWP_GPU_ENODEV when the machine has no usable GPU. info may be
 * NULL. Must be called before the other functions (they call it with device 0 if not). */
int lowp_gpu_init(int device, lowp_gpu_info *info);
const char *lowp_gpu_last_error(void);
const char *lowp_gpu_strerror(int rc);
/* Version strings: "13.0" from 13000. */
void lowp_gpu_version_string(int v, char *buf, size_t len);

/* 0 if the running device converts (f, r, saturate) from binary32 in hardware, else
 * LOWP_GPU_EUNSUPPORTED with the reason in why (may be NULL). */
int lowp_gpu_supported(lowp_format f, lowp_round r, int saturate, char *why, size_t why_len);

/* Encode n binary32 values (device pointers). u8 for formats of at most 8 bits; u16 for
 * any format. Asynchronous on stream; launch errors are reported. */
int lowp_gpu_encode_f32_u8(lowp_format f, lowp_round r, int saturate, const float *d_in,
                           uint8_t *d_out, size_t n, cudaStream_t stream);
int lowp_gpu_encode_f32_u16(lowp_format f, lowp_round r, int saturate, const float *d_in,
                            uint16_t *d_out, size_t n, cudaStream_t stream);
/* Encode n binary16 values (their bits) to E4M3 or E5M2: cvt.rn.satfinite.*x2.f16x2. */
int lowp_gpu_encode_f16_u8(lowp_format f, const uint16_t *d_in, uint8_t *d_out, size_t n,
                           cudaStream_t stream);
/* Decode n codes: E4M3, E5M2, E2M1 to binary16 bits (cvt.rn.f16x2.*); E8M0 to bfloat16
 * bits (cvt.rn.bf16x2.ue8m0x2). */
int lowp_gpu_decode_u8(lowp_format f, const uint8_t *d_codes, uint16_t *d_out, size_t n,
                       cudaStream_t stream);

/* One mismatch: input (binary32 bits, binary16 bits or a code), the GPU's output and
 * the CPU model's. */
typedef struct lowp_gpu_mismatch {
    uint32_t input;
    uint16_t gpu, cpu;
} lowp_gpu_mismatch;

#define LOWP_GPU_FIRST_MAX 20

/* A comparison of GPU and CPU over a set of inputs, and its result. */
typedef struct lowp_gpu_sweep {
    /* in */
    lowp_format format;
    lowp_round round;
    int saturate;
    lowp_profile profile;  /* the CPU model compared with: LOWP_PROFILE_CUDA normally */
    uint64_t begin, end;   /* binary32 bit patterns [begin, end), end <= 2^32 */
    int threads;           /* host OpenMP threads, 0 = default */
    /* out (accumulated: zero the struct once, then several calls may add ranges) */
    uint64_t inputs, mismatches;
    uint64_t nan_inputs;           /* inputs that are NaN (or NaN codes, for a decode) */
    uint64_t nan_input_mismatches; /* mismatches on those */
    uint64_t gpu_nan_cpu_not;      /* mismatches where only the GPU's output is NaN */
    uint64_t cpu_nan_gpu_not;      /* ... only the CPU's */
    unsigned n_first;              /* first mismatches, ascending input */
    lowp_gpu_mismatch first[LOWP_GPU_FIRST_MAX];
    double seconds;                /* wall time of the calls */
    double seconds_host_wait;      /* of which the host waited for the GPU (transfers) */
} lowp_gpu_sweep;

/* Every binary32 input in [begin, end): generated on the device from its index,
 * converted with cvt, the codes copied back in chunks (double-buffered, pinned) and
 * compared with lowp_encode_f32_u8/u16 of the CPU codec (format, profile, round,
 * saturate), OpenMP on the host. LOWP_GPU_EUNSUPPORTED if the device has no such cvt,
 * LOWP_GPU_EINVAL if lowp_codec_init refuses the CPU codec. */
int lowp_gpu_sweep_f32(lowp_gpu_sweep *s);
/* All 2^16 binary16 inputs through cvt.rn.satfinite.{e4m3,e5m2}x2.f16x2, compared with
 * the CPU codec applied to the binary16 value (exact in binary32). begin/end ignored. */
int lowp_gpu_sweep_f16(lowp_gpu_sweep *s);
/* Every code of f through lowp_gpu_decode_u8, compared with lowp_decode_f32 written as
 * binary16 (bfloat16 for E8M0) by lowp's CUDA codec (rn): exact for every non-NaN code,
 * and NaN codes expect the canonical NaN 0x7FFF that the hardware gives (ref/notes/formats.md
 * 2.2). round/saturate/profile/begin/end ignored. */
int lowp_gpu_sweep_decode(lowp_gpu_sweep *s);

#ifdef __cplusplus
}
#endif
#endif /* LOWP_GPU_CVT_H */
