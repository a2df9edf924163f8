/* lowp/gpu_extend.h: causal extend / prefill attention on the GPU over an FP8 E4M3
 * workspace (SGLang's paths 1 and 2, lowp/kvcache.h PREFILL and EXTEND).
 *
 * The arithmetic is defined in lowp/attn_gpu_extend.h; lowp_gpu_extend_emulate reproduces
 * the output of lowp_gpu_extend bit for bit (gpu/check/extend_check.c proves it on the
 * H200). FlashAttention-2 style: one CTA of 4 or 8 warps per (sequence, KV head, 64 or 128
 * packed GQA query rows); each warp owns 16 rows (the M of mma.sync.m16n8k16, BF16 in, FP32
 * accumulate); 64-position K/V blocks of the FP8 workspace are staged through shared
 * memory by cp.async, converted to BF16 once a CTA into shared memory and loaded by
 * ldmatrix. No split-K. LOWP_GPU_EXTEND_KERNEL selects the kernel: unset or v2 (warps a
 * CTA by the grid), v2w4, v2w8, or v1 (the kernel before v2: 4 warps, BF16 conversion in
 * registers by every warp; kept for A/B timing); any other value is refused. All give the
 * same bits.
 *
 * Built for sm_90 (run on the H200) and sm_100a / sm_120a (compiled, never run).
 */
#ifndef LOWP_GPU_EXTEND_H
#define LOWP_GPU_EXTEND_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "lowp/attn_gpu_extend.h"
#include "lowp/gpu_kvcache.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lowp_gpu_extend_desc {
    /* The shapes and the host copies of the index arrays (checked by
     * lowp_gpu_extend_check; its q, k, v must be non-NULL but are not read: pass the device
     * pointers there too, or any non-NULL value). */
    lowp_gpu_extend_args host;
    /* The same index arrays on the device (prefix_len_dev NULL iff host.prefix_len is). */
    const int32_t *qo_indptr_dev, *kv_indptr_dev, *prefix_len_dev;
    const uint16_t *q_dev; /* BF16 [qo_indptr[batch]][num_q_heads][qk_dim] */
    const uint8_t *k_dev;  /* E4M3 [kv_rows][num_kv_heads][qk_dim], 16-byte aligned */
    const uint8_t *v_dev;  /* E4M3 [kv_rows][num_kv_heads][vo_dim], 16-byte aligned */
} lowp_gpu_extend_desc;

/* Shared memory bytes a CTA uses for these head dims (for occupancy reports): the
 * selected kernel's (v2: with 8 warps unless LOWP_GPU_EXTEND_KERNEL=v2w4). */
size_t lowp_gpu_extend_smem_bytes(size_t qk_dim, size_t vo_dim);

/* out_dev: BF16 [qo_indptr[batch]][num_q_heads][vo_dim]. Everything checkable is checked
 * on the host before any launch (lowp_gpu_extend_check on the host arrays; NULL or
 * misaligned device pointers); the launch is checked. Asynchronous on stream. 0, or -1
 * with one sentence in why. */
int lowp_gpu_extend(const lowp_gpu_extend_desc *d, uint16_t *out_dev, cudaStream_t stream,
                    char *why, size_t why_len);

/* ---- The workspace (SGLang path 2, lowp/kvcache.h EXTEND) ------------------------------
 * Fill the FP8 E4M3 workspace of an extend: for sequence b, positions t < prefix_len[b]
 * come from the NVFP4 paged cache (position t of sequence b of the page table, which must
 * hold at least prefix_len[b] positions), each element x = fl32(fl32(E2M1 value x E4M3
 * block scale) x g), g the decode-side global scale of the KV head, then RN to BF16, then
 * torch's non-saturating .to(float8_e4m3fn) (a NaN block scale, i.e. a poisoned slot,
 * gives NaN); positions prefix_len[b] .. prefix_len[b] + q_len_b - 1 are the chunk's BF16
 * K/V rows (k_chunk_dev [qo_indptr[batch]][num_kv_heads][qk_dim], v likewise) cast the same
 * way. Row kv_indptr[b] + t of the workspace ([rows][num_kv_heads][dim], k_ws_dev and
 * v_ws_dev, 16-byte aligned) gets position t; rows past each kv_len are not written.
 * lowp_kv_path_run(EXTEND) is the CPU model of every byte (gpu/check/extend_check.c
 * compares them). The torch cast is cvt.rn.satfinite.e4m3x2 with torch's NaN for
 * magnitudes >= 466 patched in; the emulator's is lowp's codec (e4m3, torch, rn), and
 * lowp_gpu_extend_ws_cast proves the two equal on every BF16 code. Refused on the host before
 * any launch: a cache that is not NVFP4 or whose num_heads / dims differ from the shapes,
 * lowp_gpu_extend_check's reasons, a page table that does not cover a prefix, NULL
 * pointers. Asynchronous on stream.
 * LOWP_GPU_WS_FILL selects the kernel: "rows" (a thread a 16-element block), "staged" (each
 * warp stages runs of the prefix's rows through shared memory by cp.async; only for linear
 * scale order and 16-byte aligned codes, else rows), unset or "auto" (the default: staged
 * where the batch's prefixes hold more than lowp_gpu_extend_workspace_staged_elems()
 * elements (the sum of prefix x num_heads x (qk_dim + vo_dim)), rows otherwise; timings
 * in reports/gpu-extend-h200-notes.md); any other value is
 * refused. Both kernels give the same bytes. */
typedef struct lowp_gpu_extend_ws_desc {
    const lowp_gpu_kvcache *cache;      /* NVFP4 */
    const lowp_kv_page_table *pt_host;  /* checked; gives the prefixes' pages */
    const int32_t *pt_indptr_dev, *pt_indices_dev; /* the same, on the device */
    lowp_gpu_extend_args host;          /* shapes and host index arrays (prefix_len given) */
    const int32_t *qo_indptr_dev, *kv_indptr_dev, *prefix_len_dev;
    const uint16_t *k_chunk_dev, *v_chunk_dev; /* BF16 */
} lowp_gpu_extend_ws_desc;

int lowp_gpu_extend_workspace(const lowp_gpu_extend_ws_desc *d, uint8_t *k_ws_dev,
                              uint8_t *v_ws_dev, cudaStream_t stream, char *why, size_t why_len);

/* The choice LOWP_GPU_WS_FILL makes now: "auto", "rows" or "staged"; NULL for a value the
 * fill refuses. */
const char *lowp_gpu_extend_workspace_fill(void);

/* The prefix elements above which "auto" takes the staged kernel. */
unsigned long long lowp_gpu_extend_workspace_staged_elems(void);

/* The same fill run on the host by the very function the kernel runs (nvcc compiles it for
 * both; cvt.rn.bf16.f32 becomes lowp_bf16_from_f32, its model), from a CPU cache: a logic
 * error (layouts, the interleave, the page table) shows up without a GPU. With
 * the staged kernel chosen (LOWP_GPU_WS_FILL, as the launcher reads it) it runs that kernel's
 * schedule (its units, the chunk copies into a stage, its block function) unit by unit.
 * Host arrays; the same checks. */
int lowp_gpu_extend_workspace_emulate(const lowp_kvcache *cache, const lowp_kv_page_table *pt,
                                      const lowp_gpu_extend_args *a, const uint16_t *k_chunk,
                                      const uint16_t *v_chunk, uint8_t *k_ws, uint8_t *v_ws,
                                      char *why, size_t why_len);

/* The device's torch E4M3 cast of the workspace fill on every BF16 code c, into host
 * arrays of 65,536 bytes: full[c] as the fill computes it where a block may overflow,
 * fast[c] without the overflow patch (the fill's path when it has proved every magnitude
 * of the block below 466); gpu/check/extend_check.c compares them with lowp's codec. */
int lowp_gpu_extend_ws_cast(uint8_t *full, uint8_t *fast, char *why, size_t why_len);
/* The same from the host: lowp's model of cvt.rn.satfinite (profile cuda) patched by the
 * fill's own code, so that the patch's logic is checked without a GPU. */
int lowp_gpu_extend_ws_cast_emulate(uint8_t *full, uint8_t *fast, char *why, size_t why_len);
/* The fill's per-magnitude table path (a prefix block's 8 E2M1 magnitudes converted once,
 * each code looking its byte up and taking its sign) against its per-element path, on
 * every code byte x finite block-scale code x 17 global scales from 2^-149 to FLT_MAX,
 * both signs and zero: on the device (gpu != 0) or with the host's cast table. Returns the
 * blocks that differ (*blocks: how many were compared), or -1 with why. */
long long lowp_gpu_extend_ws_lut_check(int gpu, size_t *blocks, char *why, size_t why_len);

#ifdef __cplusplus
}
#endif
#endif /* LOWP_GPU_EXTEND_H */
