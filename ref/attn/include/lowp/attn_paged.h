/* lowp/attn_paged.h: the binary64 decode reference, fused over a paged KV cache.
 *
 * One decode query per sequence: sequence b of the page table, of length n_b, has its
 * query at position n_b - 1, which sees positions 0..n_b-1 (lowp/attn.h with q_len 1,
 * q_offset n_b - 1, ctx n_b). K and V are read straight from the cache's pages: each
 * token's row is dequantized on the fly (NVFP4 / MXFP4 from packed E2M1 pairs and the block
 * scale, MXFP8 and FP8 from byte tables, BF16 from its bits), exactly the values
 * lowp_kvcache_read gives (element * block scale * global scale is exact in binary64).
 *
 * The arithmetic is lowp_attn_ref_f64's, in the same order (attn.h: 8-lane dot products,
 * chunks of LOWP_ATTN_CHUNK positions, merged with exp(m_c - M)), so the result equals
 * lowp_attn_ref_f64 on the gathered K/V (lowp_kvcache_gather) bit for bit, and the same
 * bound holds (lowp_attn_bound_eval). The chunks are the split-K: work items are (sequence,
 * KV head, chunk), a KV head's query heads are processed together (each K/V row is
 * dequantized once per group), items run in parallel (OpenMP) and are merged in chunk
 * order, so the bits do not depend on the thread count.
 */
#ifndef LOWP_ATTN_PAGED_H
#define LOWP_ATTN_PAGED_H

#include <stddef.h>
#include <stdint.h>

#include "lowp/attn.h"
#include "lowp/kvcache.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lowp_attn_paged_args {
    const lowp_kvcache *cache;
    const lowp_kv_view *view;     /* the reader's view; checked against the cache's stamp */
    const lowp_kv_page_table *pt; /* checked against the cache */
    size_t num_q_heads;           /* a multiple of the cache's num_heads */
    double sm_scale;              /* 0: 1/sqrt(qk_dim) */
    const double *q;              /* [batch][num_q_heads][qk_dim] */
    int threads;                  /* OpenMP threads; 0: the OpenMP default */
} lowp_attn_paged_args;

/* out [batch][num_q_heads][vo_dim]. bound, if not NULL, receives lowp_attn_bound_eval's
 * bound on |out - exact| per output (same shape), computed from the magnitudes met on the
 * way (one more pass of |q| |k| products: about 1.5x the time); it is +Inf for a row with
 * a non-finite visible K element, an output with a non-finite visible V element, or where
 * binary64 could overflow. Returns 0, or -1 with a reason: a view or page table that does
 * not match the cache, an empty sequence (decode needs at least one token), num_q_heads
 * not a multiple of the KV heads, a non-finite sm_scale, out of memory. */
int lowp_attn_paged_decode(const lowp_attn_paged_args *a, double *out, double *bound, char *why,
                           size_t why_len);

#ifdef __cplusplus
}
#endif
#endif /* LOWP_ATTN_PAGED_H */
