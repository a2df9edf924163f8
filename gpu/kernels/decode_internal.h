/* gpu/kernels/decode_internal.h: the decode kernels' launch parameters, shared by gpu/kernels/decode.cu
 * and the benchmark (gpu/bench/bench.cu), which validates once and then launches many times
 * without host work between the timing events. Not installed. */
#ifndef LOWP_GPU_DECODE_INTERNAL_H
#define LOWP_GPU_DECODE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "lowp/gpu_decode.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lowp_gpu_decode_params {
    const uint16_t *q;
    const uint8_t *kc, *vc, *ks, *vs;
    const int32_t *indptr, *indices, *last;
    const float *qk_scale; /* [H], step 2 */
    const float *v_global; /* [n_v_global] */
    float *ws_m, *ws_l, *ws_o;
    uint16_t *out;
    int B, H, G, NQ, Dq, Dv, PS, chunk, nch_max, nvr, kch, n_v_global;
    int hnd, k_il, v_il, e5m2;
    int k_rb, v_rb, k_S, v_S;
    int format;   /* lowp_block_format */
    float unscale; /* lowp_gpu_decode_unscale(format): v_scale's factor (step 5) */
    int ps_shift; /* log2(page size) for a power of two, else -1 */
    /* shared-memory ring (gpu/kernels/decode.cu): stages per warp, warps per CTA, bytes per stage,
     * row strides of K codes, V codes and K / V scale windows, offsets inside a stage */
    int stages, warps, stage_bytes;
    int k_rs, v_rs, k_sw, v_sw, off_v, off_ks, off_vs, off_sh;
    int smem_optin; /* the device's shared memory per block with opt-in (bytes; host only) */
} lowp_gpu_decode_params;

/* Everything lowp_gpu_decode checks and computes before launching, with the score scales
 * copied into the workspace (asynchronously on stream). 0 or -1 with a reason. */
int lowp_gpu_decode_prepare(const lowp_gpu_decode_desc *d, void *workspace_dev,
                            size_t workspace_bytes, uint16_t *out_dev, cudaStream_t stream,
                            lowp_gpu_decode_params *p, char *why, size_t why_len);
/* Launch the split and merge kernels of a prepared call. */
cudaError_t lowp_gpu_decode_enqueue(const lowp_gpu_decode_params *p, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif /* LOWP_GPU_DECODE_INTERNAL_H */
