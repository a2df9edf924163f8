/* lowp/gpu_decode.h: paged decode attention on the GPU over a lowp_gpu_kvcache.
 *
 * The arithmetic is defined in lowp/attn_gpu_emul.h; lowp_gpu_decode_emulate reproduces
 * the output of lowp_gpu_decode bit for bit (gpu/check/decode_check.c and `lowp gpu conform`
 * prove it on the H200). Split-K over the context (flash-decoding): work items are
 * (sequence, KV head, split, 128-dim slice of vo_dim); a warp runs one item with the
 * group's query heads as the rows of mma.sync.m16n8k16 (BF16 in, FP32 accumulate),
 * streaming 16-position tiles of K and V through its own cp.async ring in shared memory
 * and dequantizing them in registers; a second kernel merges the splits in order.
 *
 * Built for sm_90 (run on the H200) and sm_100a / sm_120a, where E2M1 is decoded by the
 * hardware cvt.rn.f16x2.e2m1x2 (compiled and inspected, never run: no Blackwell GPU).
 */
#ifndef LOWP_GPU_DECODE_H
#define LOWP_GPU_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "lowp/gpu_kvcache.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bounds of lowp_gpu_decode_desc's ring_stages and cta_warps. */
#define LOWP_GPU_DECODE_MAX_STAGES 8
#define LOWP_GPU_DECODE_MAX_WARPS 4

typedef struct lowp_gpu_decode_desc {
    const lowp_gpu_kvcache *cache;
    const lowp_kv_page_table *pt_host; /* host copy: checked, and gives the lengths */
    const int32_t *indptr_dev, *indices_dev, *last_page_len_dev; /* the same, on the device */
    size_t num_q_heads;
    double sm_scale;       /* 0: 1/sqrt(qk_dim) */
    const uint16_t *q_dev; /* BF16 [batch][num_q_heads][qk_dim] */
    size_t chunk_tokens;   /* 0: lowp_gpu_decode_chunk_tokens */
    /* The shared-memory ring each warp streams its K/V tiles through: how the bytes
     * travel, never the arithmetic (every setting gives the same output bits), so these
     * are tuning knobs (`lowp gpu bench --stages N --warps N`, tools/gpu_tune.sh).
     * ring_stages: tiles a warp's ring holds, 2..LOWP_GPU_DECODE_MAX_STAGES, or 0 for the
     * default (about 8 KiB of ring a warp, at least 2 stages: on the H200, batch 32, 32K
     * tokens, 2 stages beat 3..8 for every format). cta_warps: warps (work items) a CTA,
     * 1..LOWP_GPU_DECODE_MAX_WARPS, or 0 for the default (the maximum). Both are upper
     * bounds: the warps, then the stages (down to 2), are reduced until the ring fits the
     * device's shared memory per block. Other values are refused. */
    int ring_stages;
    int cta_warps;
} lowp_gpu_decode_desc;

/* Bytes of device workspace lowp_gpu_decode needs for d (0 with a reason on bad input). */
size_t lowp_gpu_decode_workspace_bytes(const lowp_gpu_decode_desc *d, char *why, size_t why_len);

/* out_dev: BF16 [batch][num_q_heads][vo_dim]. Everything checkable is checked on the host
 * before any launch (lowp_gpu_decode_check, the page table against the pool, empty
 * sequences, NULL pointers, a workspace smaller than lowp_gpu_decode_workspace_bytes, the
 * ring's bounds);
 * launches are checked. Asynchronous on stream. 0, or -1 with one sentence in why. */
int lowp_gpu_decode(const lowp_gpu_decode_desc *d, void *workspace_dev, size_t workspace_bytes,
                    uint16_t *out_dev, cudaStream_t stream, char *why, size_t why_len);

#ifdef __cplusplus
}
#endif
#endif /* LOWP_GPU_DECODE_H */
