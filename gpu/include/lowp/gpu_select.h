/* lowp/gpu_select.h: the sparse-attention selection kernels on the GPU (issue #19 item 6),
 * each equal bit for bit to a CPU model of lowp/select.h, and the sparse decode over the
 * selected tokens (the paged decode of lowp/gpu_decode.h through a token indirection).
 *
 * A batch is sequences b < batch laid end to end: the BF16 keys of sequence b are rows
 * tok_off[b] .. tok_off[b] + seq_len[b] - 1 of k_dev, its compressed blocks (QSA) or keys
 * (DSA) rows blk_off[b] .. of the index-key cache and of the scores. Offsets are int64,
 * lengths int32, all on the device; the host passes the maxima (grid sizes).
 *
 *  - lowp_gpu_qsa_compress: mean-pool, RMSNorm(1+w), partial RoPE (lowp_qsa_compress) into
 *    BF16 rows, then quantize on write into the index-key cache (lowp/select_gpu.h
 *    definition 1). One thread per compressed block runs the model's operations in its
 *    order. NVFP4 / MXFP4 / MXFP8 rows go through lowp_gpu_kv_write (the cache's own
 *    encoder, proven against lowp_block_quantize); E4M3 is torch's unsaturated cast by the
 *    codec core (lowp/codec_core.h).
 *  - lowp_gpu_qsa_scores: lowp_qsa_scores of every visible block for one prepared query per
 *    sequence (lowp_qsa_query's qo, computed on the host: one tiny row per query). One
 *    thread per block sums the products in dim order in binary64 (each product exact, as
 *    the model says), heads in order, then the binary32 roundings of the model; rows are
 *    staged through shared memory by coalesced copies.
 *  - lowp_gpu_dsa_quantize / lowp_gpu_dsa_scores: lowp_dsa_keys_quantize's FP8 keys with
 *    their per-token scales, and lowp_dsa_scores from lowp_dsa_query's outputs.
 *  - lowp_gpu_topk: lowp_topk's set (score first, exact tie to the smaller index, -Inf
 *    never, NaN refused) by a radix select on an order-preserving key, written in
 *    ascending index order: as lowp_qsa_select's index list (ratio > 0: each block's ratio
 *    tokens, the open tail, -1 padding, count column) or as sorted indices (ratio = 0).
 *
 * Build flags as the decode's: --fmad=false, IEEE division and square root, no flush to
 * zero. Functions return 0 or -1 with one sentence in why; launches are asynchronous on
 * stream unless a function says otherwise. */
#ifndef LOWP_GPU_SELECT_H
#define LOWP_GPU_SELECT_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "lowp/gpu_kvcache.h"
#include "lowp/select.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The GPU kernels' limits: head_dim 32..256, a multiple of 32; index heads 1..8 (QSA),
 * 1..128 (DSA); ratio 1..64. */
int lowp_gpu_qsa_check(const lowp_qsa_config *c, char *why, size_t why_len);

typedef struct lowp_gpu_select_batch {
    size_t batch;
    const int64_t *tok_off; /* [batch] device: first key token of sequence b */
    const int64_t *blk_off; /* [batch] device: first row of sequence b in the key cache / scores */
    const int32_t *n;       /* [batch] device: compressed blocks (compress), visible rows (scores) */
    size_t max_n;           /* the largest n */
    size_t total_rows;      /* rows of the key cache (compress: where the rows go) */
} lowp_gpu_select_batch;

/* The index-key cache for c: one head, page size 1, rows pages, NHD, qk_dim head_dim,
 * vo_dim a block (V is written with zeros and never read), format
 * lowp_qsa_keycache_format, recipe c->recipe, global scale c->gs.dec. */
lowp_kv_config lowp_gpu_qsa_keycache_config(const lowp_qsa_config *c, size_t rows);

/* k_dev: BF16 bits [tokens][head_dim]; wk_dev: binary32 [head_dim]; rope_dev: the table of
 * lowp_qsa_rope_blocks for max_n blocks. Synchronous (allocates its scratch). */
int lowp_gpu_qsa_compress(const lowp_qsa_config *c, const uint16_t *k_dev, const float *wk_dev,
                          const float *rope_dev, const lowp_gpu_select_batch *bt, lowp_gpu_kvcache *keys,
                          char *why, size_t why_len);

/* qo_dev: binary32 [batch][index_heads][head_dim] (lowp_qsa_query); scores_dev at blk_off[b]
 * + j, j < n[b] (n = the visible blocks). */
int lowp_gpu_qsa_scores(const lowp_qsa_config *c, const lowp_gpu_kvcache *keys, const float *qo_dev,
                        const lowp_gpu_select_batch *bt, float *scores_dev, cudaStream_t stream, char *why,
                        size_t why_len);

/* FP8 keys only. k_dev: BF16 bits [n][head_dim] -> codes_dev [n][head_dim] (E4M3 codes),
 * scales_dev [n] (binary32). */
int lowp_gpu_dsa_quantize(const lowp_dsa_config *c, const uint16_t *k_dev, size_t n, uint8_t *codes_dev,
                          float *scales_dev, cudaStream_t stream, char *why, size_t why_len);

/* qq_dev [batch][heads][head_dim] E4M3 values, wh_dev [batch][heads] (lowp_dsa_query);
 * codes/scales rows at blk_off[b] + j, j < n[b]; scores likewise. */
int lowp_gpu_dsa_scores(const lowp_dsa_config *c, const uint8_t *codes_dev, const float *ks_dev,
                        const float *qq_dev, const float *wh_dev, const lowp_gpu_select_batch *bt,
                        float *scores_dev, cudaStream_t stream, char *why, size_t why_len);

/* Row width of lowp_gpu_topk's output: ratio > 0: k * ratio + ratio - 1 slots plus the
 * count (lowp_qsa_index_width + 1); ratio = 0: k slots plus the count. */
size_t lowp_gpu_topk_row(size_t k, size_t ratio);

/* Top-k of scores at blk_off[b] .. + n[b] into out_dev[b][lowp_gpu_topk_row]: ratio > 0:
 * lowp_qsa_select's index list for query position pos_dev[b] (n[b] must be (pos + 1) /
 * ratio); ratio = 0: the selected indices ascending, -1 padding, the count last.
 * status_dev[b]: 0, or 1 when a score is NaN (lowp_topk refuses: the row is then all -1
 * and its count -1). */
int lowp_gpu_topk(const float *scores_dev, const lowp_gpu_select_batch *bt, size_t k, size_t ratio,
                  const int32_t *pos_dev, int32_t *out_dev, int32_t *status_dev, cudaStream_t stream, char *why,
                  size_t why_len);

/* The page-size-1 view of a GPU cache (lowp/select_gpu.h definition 2): *view shares c's
 * device buffers (no copy; destroy only c). Attention over selected tokens is then
 * lowp_gpu_decode on view with rows from lowp_select_gather_rows as the page indices
 * (last_page_len 1). */
int lowp_gpu_kvcache_gather_view(const lowp_gpu_kvcache *c, lowp_gpu_kvcache *view, char *why, size_t why_len);

/* The yardstick of the scoring's bandwidth: a plain kernel that reads the n bytes at p_dev
 * once (16-byte loads, 8 CTAs of 256 threads per SM, grid-stride; n a multiple of 16);
 * sink_dev: 65536 words it may write. 0 or -1 (launch failed). */
int lowp_gpu_select_read(const void *p_dev, size_t n, unsigned *sink_dev, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif /* LOWP_GPU_SELECT_H */
