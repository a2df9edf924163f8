/* lowp/select_gpu.h: what the sparse-selection GPU kernels (gpu/kernels/select.cu,
 * lowp/gpu_select.h) store and read, defined on the CPU so that a check program and the
 * ctest suite can build the kernels' expected bytes without a GPU (issue #19 item 6).
 *
 * The kernels follow the CPU selector models of lowp/select.h operation by operation, in
 * the models' own orders (every sum that the model does in index order, the kernel does in
 * index order, one thread per compressed block, key or query): so the scores and
 * selections are the models' (lowp_qsa_scores, lowp_dsa_scores, lowp_topk,
 * lowp_qsa_select) bit for bit, and no second definition of the arithmetic exists. What
 * is new, and defined here, is storage:
 *
 * 1. The QSA index-key cache. A lowp_kvcache-compatible pool of one KV head, page size 1,
 *    NHD, linear scales, qk_dim = head_dim (V unused): compressed block j of a batch's
 *    concatenated sequences is row j. Row j holds the BF16 row x_j (lowp_qsa_compress with
 *    BF16 keys: mean-pool, RMSNorm(1+w), partial RoPE) stored in the key format:
 *      BF16:  lowp_bf16_from_f32(x) (cvt.rn.bf16.f32; NaN -> 0x7FFF), little-endian;
 *      E4M3:  torch's float -> float8_e4m3fn of x (nearest even, no saturation: beyond 464
 *             NaN with x's sign), unit scale (vLLM indexer_kv_dtype=fp8);
 *      NVFP4, MXFP4, MXFP8: lowp_block_quantize(format, c->recipe, c->gs, 0, x) (the codes
 *             and block scales; c->gs must be lowp_global_scale_from_dec of its dec, which
 *             is what the GPU cache's quantize-on-write uses).
 *    Decoding a row exactly gives lowp_qsa_compress's kb for that key format (tested).
 * 2. Sparse decode. The main cache of an NHD layout with linear scale order stores slot s
 *    of page p, head h, at the byte offsets of page p * page_size + s, slot 0, head h of the
 *    same pool seen with page size 1 (lowp/kvcache.h's layout formula). So attention over a
 *    selected token list t_0..t_{n-1} of sequence b is the paged decode (lowp/gpu_decode.h
 *    and its emulator lowp_gpu_decode_emulate, unchanged) over that page-size-1 view with
 *    the page table rows = (page of t_i) * page_size + (slot of t_i), in list order: the
 *    token-index indirection is the page table. HND and the NVFP4 4-token interleave have
 *    no such view and are refused.
 */
#ifndef LOWP_SELECT_GPU_H
#define LOWP_SELECT_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "lowp/kvcache.h"
#include "lowp/select.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The cache format of QSA key format k: BF16 -> LOWP_BF16_PASS, E4M3 -> LOWP_FP8_E4M3,
 * NVFP4, MXFP4, MXFP8 -> themselves. */
lowp_block_format lowp_qsa_keycache_format(lowp_qsa_keys k);

/* Bytes per row of the index-key cache: codes (lowp_block_code_bytes) and scales (0 for
 * BF16 / E4M3). */
size_t lowp_qsa_keycache_row_bytes(const lowp_qsa_config *c);
size_t lowp_qsa_keycache_row_scales(const lowp_qsa_config *c);

/* The index-key cache rows of one sequence (definition 1): codes[seq_len / ratio][row
 * bytes], scales[seq_len / ratio][row scales] (may be NULL for BF16 / E4M3). 0 or -1. */
int lowp_qsa_keycache_bytes(const lowp_qsa_config *c, const float *k, size_t seq_len, const float *wk,
                            uint8_t *codes, uint8_t *scales, char *why, size_t why_len);

/* The RoPE table of the compressed blocks 0..nblocks-1 (position b * ratio):
 * table[b][i][0] = cos, table[b][i][1] = sin (lowp_qsa_rope_table), i < rotary_dim / 2. */
int lowp_qsa_rope_blocks(const lowp_qsa_config *c, size_t nblocks, float *table, char *why, size_t why_len);

/* Definition 2: the page-size-1 view of a main cache configuration (page_size 1,
 * num_pages * page_size pages, every other field equal). Refuses HND (with page_size > 1)
 * and an interleaved scale order. */
int lowp_select_gather_config(const lowp_kv_config *main_cfg, lowp_kv_config *view_cfg, char *why,
                              size_t why_len);

/* rows[i] = the page-size-1 row of token tokens[i] of sequence b (lowp_kv_locate), for
 * i < n. Refuses a token outside the sequence and a row beyond int32. */
int lowp_select_gather_rows(const lowp_kv_page_table *pt, size_t page_size, size_t b, const int32_t *tokens,
                            size_t n, int32_t *rows, char *why, size_t why_len);

/* A CPU cache holding the same bytes and global scales as main under the page-size-1
 * view (for lowp_gpu_decode_emulate). *view is NULL on failure; free with
 * lowp_kvcache_destroy. */
int lowp_select_gather_cache(const lowp_kvcache *main_cache, lowp_kvcache **view, char *why, size_t why_len);

#ifdef __cplusplus
}
#endif
#endif /* LOWP_SELECT_GPU_H */
