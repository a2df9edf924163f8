/* lowp/certify.h: certify someone else's paged-decode or extend / prefill attention kernel.
 *
 * Input: a paged KV cache exactly as a production framework holds it in memory (a named
 * layout, below), the decode queries (or a ragged batch of causal extend chunks,
 * lowp_certify_args.qo_indptr), the kernel's output, and the arithmetic the kernel
 * declares (lowp_certify_arith). Output: for every output element a verdict
 *
 *   EXACT         the kernel's value is a correct rounding, in the declared output dtype,
 *                 of the exact attention of the declared inputs;
 *   WITHIN        |got - exact| <= B, B the bound derived for the declared arithmetic
 *                 (ref/certify/src/certify.c states it term by term);
 *   OUTSIDE       |got - exact| > B;
 *   NAN_MISMATCH  one of got and exact is NaN (or infinite) and the other is not the same.
 *
 * "Exact attention of the declared inputs" is softmax(sm_scale q^ K^T) V with q^ the query
 * rounded as declared (RN to q_dtype, E4M3 after division by q_scale), K and V the cache's
 * values (element x block scale x global scale, exact in binary64), computed by the
 * binary64 reference of lowp/attn.h with its proven bound, and by the MPFR oracle for the
 * rows where that bound leaves a verdict open. No tolerance is guessed: B comes from the
 * declared dtypes, the sequence length and the magnitudes of this very case.
 *
 * Layouts (the owners' memory order; certify.c cites the source of each):
 *   VLLM_FP8      key_cache / value_cache: uint8 [num_blocks, block_size, num_kv_heads,
 *                 head_size] FP8 E4M3 codes; per-tensor k_scale, v_scale; block_table
 *                 [batch, max_blocks] + seq_lens.
 *   FLASHINFER    paged_k_cache / paged_v_cache: [max_num_pages, page_size, H, D] (NHD) or
 *                 [max_num_pages, H, page_size, D] (HND), BF16 or FP8 E4M3 (then k_scale,
 *                 v_scale); kv_indptr / kv_indices / kv_last_page_len (int32 CSR).
 *   SGLANG_NVFP4  k_buffer / v_buffer: uint8 [size, H, D/2] slot-major (slot = page *
 *                 page_size + token), packed E2M1 (even element in the low nibble);
 *                 native_k_scale_buffer / native_v_scale_buffer: E4M3 bytes [size /
 *                 page_size, H, page_size, D/16], K linear, V 4-token interleaved; the
 *                 decode-side global k_scale / v_scale; block_table + seq_lens.
 *   TRTLLM        NVFP4 pools: K and V blocks [num_pages, H, tokens_per_block, D/2], block
 *                 scales [num_pages, H, tokens_per_block, D/16], K linear, V 4-token
 *                 interleaved; decode-side global scales; block_table + seq_lens.
 * lowp_certify_cache_init fills the orders each layout states; a caller may override them
 * (FlashInfer's NHD/HND is the caller's choice). Either page table form may be given.
 *
 * A layout mismatch is named, not reported as a numeric error (diagnose = 1): when the
 * declared reading has an element outside its bound or a NaN mismatch, certify re-reads
 * the same bytes under each alternative (V / K scales interleaved <-> linear, pages
 * NHD <-> HND, k_scale or v_scale not applied by the kernel) and names the first reading
 * under which every element is within bound: the heuristic's basis is that certificate,
 * whose counts are given in the diagnosis.
 *
 * Error convention: 0, or -1 with one sentence in why naming the offending argument.
 */
#ifndef LOWP_CERTIFY_H
#define LOWP_CERTIFY_H

#include <stddef.h>
#include <stdint.h>

#include "lowp/block.h"
#include "lowp/kvcache.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum lowp_certify_layout {
    LOWP_CERTIFY_VLLM_FP8 = 0,
    LOWP_CERTIFY_FLASHINFER = 1,
    LOWP_CERTIFY_SGLANG_NVFP4 = 2,
    LOWP_CERTIFY_TRTLLM = 3
} lowp_certify_layout;
#define LOWP_CERTIFY_LAYOUT_COUNT 4

/* The dtypes a kernel rounds to. E4M3 is OCP FP8 E4M3 ("fn"), saturating (satfinite). */
typedef enum lowp_certify_dtype {
    LOWP_CERTIFY_F32 = 0,
    LOWP_CERTIFY_BF16 = 1,
    LOWP_CERTIFY_F16 = 2,
    LOWP_CERTIFY_E4M3 = 3
} lowp_certify_dtype;
#define LOWP_CERTIFY_DTYPE_COUNT 4

typedef enum lowp_certify_verdict {
    LOWP_CERTIFY_EXACT = 0,
    LOWP_CERTIFY_WITHIN = 1,
    LOWP_CERTIFY_OUTSIDE = 2,
    LOWP_CERTIFY_NAN_MISMATCH = 3
} lowp_certify_verdict;
#define LOWP_CERTIFY_VERDICT_COUNT 4

/* Names: "vllm-fp8" "flashinfer" "sglang-nvfp4" "trtllm"; "f32" "bf16" "f16" "e4m3";
 * "exact" "within" "outside" "nan-mismatch". Parsers: 0 or -1. */
const char *lowp_certify_layout_name(lowp_certify_layout l);
int lowp_certify_layout_parse(const char *name, lowp_certify_layout *out);
const char *lowp_certify_dtype_name(lowp_certify_dtype d);
int lowp_certify_dtype_parse(const char *name, lowp_certify_dtype *out);
const char *lowp_certify_verdict_name(lowp_certify_verdict v);

/* The cache as the framework holds it. Sizes: num_pages is the pool's page count (SGLang:
 * size / page_size), page_size its tokens per page, qk_dim / vo_dim the head dims. Codes:
 * k, v point at the pool's first byte (row bytes: D for FP8, 2 D for BF16 little-endian, D/2
 * for NVFP4). Scales: k_sf, v_sf (NVFP4 only, else NULL). Global scales: decode-side
 * (x = element x block scale x scale); finite and > 0, never defaulted here (an unset
 * scale is a bug, TRT-LLM #16916); 1 for BF16. Page table: block_table != NULL selects
 * block_table [batch][max_blocks] + seq_lens [batch] (entries past a sequence's pages are
 * not read), else indptr / indices / last_page_len (FlashInfer CSR). Every sequence must
 * hold at least one token (a decode query sees its own key). */
typedef struct lowp_certify_cache {
    lowp_certify_layout layout;
    lowp_block_format format;        /* VLLM_FP8: FP8_E4M3; FLASHINFER: BF16_PASS or FP8_E4M3;
                                        SGLANG_NVFP4, TRTLLM: NVFP4 */
    lowp_kv_layout code_order;       /* page order of the codes: NHD or HND */
    lowp_kv_layout sf_order;         /* page order of the block scales (NVFP4) */
    lowp_kv_sf_order k_sf_order, v_sf_order; /* linear or 4-token interleave (NVFP4) */
    size_t num_pages, page_size, num_kv_heads, qk_dim, vo_dim;
    const uint8_t *k, *v;
    const uint8_t *k_sf, *v_sf;
    float k_scale, v_scale;
    size_t batch;
    const int32_t *block_table; size_t max_blocks; const int32_t *seq_lens;
    const int32_t *indptr, *indices, *last_page_len;
} lowp_certify_cache;

/* A cache with the layout's own format and orders (FlashInfer: NHD, BF16), the sizes given
 * and everything else zero (scales 0: the caller must set them). */
lowp_certify_cache lowp_certify_cache_init(lowp_certify_layout l, size_t num_pages, size_t page_size,
                                           size_t num_kv_heads, size_t qk_dim, size_t vo_dim);

/* Sizes and format of c from the pools' shapes as the layout holds them (c->layout set, and
 * c->code_order for FlashInfer): k_shape / v_shape of rank 4 ([pages, P, H, D] NHD, [pages,
 * H, P, D] HND, [pages, H, P, D/2] TRT-LLM) or 3 (SGLang [size, H, D/2]), ks / vs the NVFP4
 * scale pools [pages, H, P, D/16] (ndim 0 otherwise), elem the bytes per K/V element (1:
 * FP8 or packed NVFP4, 2: BF16, FlashInfer only). -1 with a reason naming the tensor. */
int lowp_certify_cache_shapes(lowp_certify_cache *c, int k_ndim, const size_t *k_shape, int v_ndim,
                              const size_t *v_shape, int ks_ndim, const size_t *ks_shape, int vs_ndim,
                              const size_t *vs_shape, size_t elem, char *why, size_t why_len);

/* What the kernel declares it computes (certify.c derives the bound from these). */
typedef struct lowp_certify_arith {
    lowp_certify_dtype q_dtype;       /* Q rounded (RN) to this before Q.K (F32: as given) */
    float q_scale;                    /* E4M3 Q: q^ = e4m3(fl32(q / q_scale)) * q_scale; 0 = 1 */
    lowp_certify_dtype p_dtype;       /* P = exp(s - m) rounded to this before P.V (F32: none) */
    lowp_certify_dtype out_dtype;     /* output rounding: F32, BF16 or F16 */
    lowp_certify_dtype partial_dtype; /* split-K: partial outputs stored in this (F32 default) */
    size_t split_tokens;              /* split-K: positions per split; 0 = no split */
    size_t mma_k;                     /* positions summed per accumulation step before they join
                                         the running fp32 sum (MMA k width); 0 or 1: one by one */
    int v_scale_after_output;         /* out = RN_o(RN_o(o / l) * v_scale), FlashInfer's
                                         `out *= v_scale` in the output dtype */
    double sm_scale;                  /* 0: 1/sqrt(qk_dim) */
    lowp_certify_dtype prod_dtype;    /* each Q.K product rounded (RN) to this before the sum: a
                                         CUDA-core dot of BF16 tensors (SGLang's MHA decode,
                                         tl.sum(q * k) on BF16) declares BF16; F32: the products
                                         are exact or rounded once in binary32 (F32, BF16, F16) */
    int l_unrounded;                  /* 1: l sums the weights before their rounding to p_dtype,
                                         so P's rounding enters the numerator only (Triton's
                                         e_sum += tl.sum(p) beside tl.dot(p.to(v.dtype), v));
                                         0: l may sum either */
    int mma_frac;                     /* 0: every accumulation step is at least as accurate as a
                                         binary32 add (u_acc, certify.c). 8..25: both dots run as
                                         tensor-core steps (Q.K of any width, P.V of mma_k
                                         positions) that align every term and the accumulator to
                                         the step's largest exponent keeping mma_frac fraction
                                         bits (truncated) and round the step's result to
                                         min(mma_frac, 23) fraction bits: Hopper mma.sync E4M3
                                         keeps 23 (research probe), wgmma FP8 13 (e8m13) */
} lowp_certify_arith;

/* F32 q, BF16 P, BF16 out, F32 partials, no split, mma_k 1, v_scale inside, sm_scale 0,
 * F32 products, l either, mma_frac 0. */
lowp_certify_arith lowp_certify_arith_default(void);

/* One worst element, TestFloat-style: where, what the kernel gave, the exact value (the
 * binary64 reference or the oracle; within ref_err of exact), the bound, the ratio
 * |got - exact| / bound, and the sequence's length (the inputs that reproduce it are
 * sequence `batch` of the cache: its pages, its query, head `head`). */
typedef struct lowp_certify_worst {
    size_t batch, head, dim, seq_len;
    size_t q_pos;  /* the query's position in its sequence (decode: seq_len - 1); it saw
                      positions 0 .. q_pos */
    size_t row;    /* the query's row of q / out (decode: batch) */
    double got, exact, ref_err, bound, ratio;
    int verdict; /* lowp_certify_verdict */
} lowp_certify_worst;
#define LOWP_CERTIFY_WORST_MAX 16

typedef struct lowp_certify_result {
    size_t outputs;
    size_t counts[LOWP_CERTIFY_VERDICT_COUNT];
    size_t oracle_rows;      /* query rows the MPFR oracle decided */
    double worst_ratio;      /* largest |got - exact| / bound over finite outputs */
    size_t n_worst;          /* entries of worst: NaN mismatches first, then by ratio */
    lowp_certify_worst worst[LOWP_CERTIFY_WORST_MAX];
    char diagnosis[512];     /* the layout-mismatch finding, "" when none */
} lowp_certify_result;

typedef struct lowp_certify_args {
    lowp_certify_cache cache;
    lowp_certify_arith arith;
    size_t num_q_heads;  /* a multiple of num_kv_heads; query head h reads KV head h / G */
    const float *q;      /* [batch][num_q_heads][qk_dim], the queries before the kernel's cast */
    const float *out;    /* [batch][num_q_heads][vo_dim], the kernel's output (exact in f32) */
    long only_seq;       /* >= 0: certify that sequence only (the reproducer); -1: all */
    int diagnose;        /* 1: name a layout mismatch when the declared reading fails */
    int threads;         /* OpenMP threads over (sequence, KV head); 0 = default */
    size_t n_worst;      /* worst elements wanted, <= LOWP_CERTIFY_WORST_MAX */
    /* optional per-output arrays [batch][num_q_heads][vo_dim] (NULL to skip; outputs of
     * sequences skipped by only_seq are left alone): */
    double *exact;       /* the exact value (binary64, within ref_err) */
    double *bound;       /* B */
    uint8_t *verdict;    /* lowp_certify_verdict */
    /* Extend / prefill (NULL: decode, one query per sequence, q and out [batch][..]):
     * qo_indptr [batch + 1], int32, qo_indptr[0] = 0, non-decreasing; sequence b has q_len_b
     * = qo_indptr[b+1] - qo_indptr[b] <= its cache length n_b queries, rows qo_indptr[b] ..
     * qo_indptr[b+1] - 1 of q and out (then [qo_indptr[batch]][num_q_heads][..], and so are
     * the per-output arrays above). Query i sits at position n_b - q_len_b + i (the chunk is
     * the sequence's last q_len_b tokens, after a prefix of n_b - q_len_b; prefill: prefix
     * 0) and sees positions 0 .. n_b - q_len_b + i (causal). */
    const int32_t *qo_indptr;
    /* Extend only: each query row sees causal_extra positions past its own (clipped at its
     * sequence's end). 0, the causal mask, is the declaration; the diagnosis's reading of a
     * causal off-by-one (lowp_certify_alternative) sets 1. No effect on decode rows, which
     * see their whole sequence. */
    size_t causal_extra;
} lowp_certify_args;

/* Args with the cache and arith given, only_seq -1, diagnose 1, n_worst 8, rest zero. */
lowp_certify_args lowp_certify_args_init(const lowp_certify_cache *c, const lowp_certify_arith *a,
                                         size_t num_q_heads, const float *q, const float *out);

/* Run the certificate. -1 with a reason for bad input: a size or order the layout cannot
 * have, a scale not finite and > 0, a page table that does not fit the pool, an empty
 * sequence, a qo_indptr that does not start at 0, decreases, or gives a sequence more
 * queries than it holds tokens, a declared arithmetic whose first-order bound does not apply (its relative
 * terms exceed 1/8 at some output: the arithmetic is too coarse for the case). */
int lowp_certify_run(const lowp_certify_args *a, lowp_certify_result *res, char *why, size_t why_len);

/* The run in parts, for a caller that certifies the sequences separately (one only_seq at
 * a time, as `lowp certify --shard` does) and combines the parts into the certificate one
 * lowp_certify_run gives:
 *   counts, outputs, oracle_rows add up; worst_ratio is the largest;
 *   worst: lowp_certify_worst_offer of every part's entries, in increasing (batch, row,
 *     head, dim) order, gives the list one run makes (an element of the whole list is among its
 *     sequence's n_worst worst);
 *   diagnosis: the first alternative reading (0 .. LOWP_CERTIFY_ALT_COUNT - 1) that applies
 *     (lowp_certify_alternative) and under which every part runs and has every output within
 *     bound; lowp_certify_diagnosis_set writes its line. */
#define LOWP_CERTIFY_ALT_COUNT 8
/* Offer w to res's worst list of at most want entries (res->n_worst, res->worst): NaN
 * mismatches first, then outside, then the rest, each by ratio descending; an entry offered
 * later goes after those it ties with. */
void lowp_certify_worst_offer(lowp_certify_result *res, size_t want, const lowp_certify_worst *w);
/* Alternative reading alt of a's cache (or, for an extend batch, of its causal mask:
 * causal_extra 1): 1 with *b = a read that way (diagnose 0, n_worst 0, no per-output
 * arrays) and what describing it; 0 when it does not apply to this case (or alt is out of
 * range). */
int lowp_certify_alternative(const lowp_certify_args *a, int alt, lowp_certify_args *b, char *what,
                             size_t what_len);
/* res->diagnosis for the alternative `what` under which all alt_outputs outputs were within
 * bound (res->counts: the declared reading's). */
void lowp_certify_diagnosis_set(lowp_certify_result *res, const char *what, size_t alt_outputs);

/* The bound B of certify.c for one query row over n visible keys, dense binary64 inputs:
 * q [qk_dim] (already rounded as declared), k [n][qk_dim], v [n][vo_dim] (the exact cache
 * values, global scales included), v_scale the V global scale (used by
 * v_scale_after_output), sm_scale the resolved softmax scale. bound gets [vo_dim]; +Inf
 * where an input or score is not finite. Returns 0, or -1 when the first-order analysis
 * does not apply (relative terms > 1/8; bound is still filled). */
int lowp_certify_row_bound(const lowp_certify_arith *a, size_t n, size_t qk_dim, size_t vo_dim,
                           double sm_scale, double v_scale, const double *q, const double *k,
                           const double *v, double *bound);

/* The declared rounding of one query element (q_dtype, q_scale), exact in binary64. */
double lowp_certify_round_q(const lowp_certify_arith *a, float q);

/* ---- Quantize-on-write -----------------------------------------------------------------
 * A third party's cache writer (vLLM reshape_and_cache_flash, SGLang's set_kv_buffer with
 * NVFP4 quantization, ...) against lowp's cache model (lowp_kvcache_write with the declared
 * recipe and decode-side global scales): the tokens k, v (binary32 values, e.g. the BF16
 * the model produced) are written by lowp into a cache of the same sizes, and every
 * written row of the user's pools (codes, and NVFP4 block scales, in the layout's memory
 * order) is compared byte for byte. Verdict per token: exact, or differs (the first
 * differing byte of the batch is named: token, K/V, codes/scales, head, byte, both values).
 * Bytes of slots no token was written to are not read. With NVFP4, a failure is re-compared
 * under the flipped K / V scale orders and a reading under which every token is exact is
 * named in diagnosis. */
typedef enum lowp_certify_kv_verdict {
    LOWP_CERTIFY_KV_EXACT = 0,
    LOWP_CERTIFY_KV_DIFFERS = 1,
    LOWP_CERTIFY_KV_PADDING = 2 /* slot < 0: not written (vLLM's padding tokens) */
} lowp_certify_kv_verdict;

typedef struct lowp_certify_kv_write_args {
    lowp_certify_cache cache;    /* the written pools, sizes, orders and global scales (the
                                    page table fields are not used) */
    lowp_recipe recipe;          /* the writer's declared recipe (lowp/block.h; SGLang's NVFP4:
                                    LOWP_RECIPE_SGLANG_KV, vLLM's FP8: the format's default) */
    size_t num_tokens;
    const int64_t *slot_mapping; /* [num_tokens]: page * page_size + slot; < 0: padding */
    const float *k, *v;          /* [num_tokens][num_kv_heads][qk_dim], [..][vo_dim] */
    uint8_t *verdict;            /* optional [num_tokens], lowp_certify_kv_verdict */
} lowp_certify_kv_write_args;

typedef struct lowp_certify_kv_write_result {
    size_t tokens, padding, exact, differs;
    /* the first differing byte (lowest token; K before V, codes before scales), when
     * differs > 0: */
    size_t token, slot;
    int which;                   /* 0 K, 1 V */
    int scales;                  /* 0 element codes, 1 block scales */
    size_t head, index;          /* head, and byte (codes) or scale (scales) of the row */
    uint8_t got, want;           /* the user's byte and lowp's */
    char diagnosis[256];         /* a scale-order finding, "" when none */
} lowp_certify_kv_write_result;

/* 0 (the result says exact or not), or -1 with a reason: the cache's checks of
 * lowp_certify_run (page table excepted), a recipe the format lacks, a slot past the pool
 * or written twice, NULL inputs. */
int lowp_certify_kv_write(const lowp_certify_kv_write_args *a, lowp_certify_kv_write_result *r, char *why,
                          size_t why_len);

/* sizeof of the argument structs, for bindings that mirror them (python/lowp): which = 0
 * lowp_certify_cache, 1 lowp_certify_arith, 2 lowp_certify_args, 3 lowp_certify_result,
 * 4 lowp_certify_worst; 0 for anything else. */
size_t lowp_certify_abi_size(int which);

#ifdef __cplusplus
}
#endif
#endif /* LOWP_CERTIFY_H */
