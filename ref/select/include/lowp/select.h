/* lowp/select.h: sparse-attention block selection and its drift under quantized keys.
 *
 * A selector scores the visible blocks of a sequence for one query and keeps the k best.
 * Production selectors leave two things open that a conformance model must fix:
 *   - ties: torch.topk and the radix top-k kernels do not define them. lowp's rule is the
 *     AMD QSA oracle's (ref/notes/selection.md): the higher score wins, an exact tie goes
 *     to the smaller index (a stable descending sort). -0 and +0 are one score.
 *   - reduction order: torch's fp32 reductions (matmul, mean of squares) have no fixed
 *     order. Where the reference leaves it open, lowp accumulates in binary64 in index
 *     order from +0, the terms being exact products of binary32 operands, and rounds once to
 *     binary32 (the dot-product rule below). That is within a few binary64 ulps of the exact
 *     value, so any fp32 order of the reference differs from it by at most the bound of
 *     its own accumulation, which the stability certificate (lowp_select_margin) states.
 * Drift compares selections as sets, so the order in which a selector lists its blocks
 * never counts as drift.
 */
#ifndef LOWP_SELECT_H
#define LOWP_SELECT_H

#include <stddef.h>
#include <stdint.h>

#include "lowp/block.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ top-k and drift */

/* The k best of scores[0..n) under the tie rule, best first, into idx[0..k); *count gets
 * how many were selected: min(k, the number of scores that are not -Inf). -Inf marks a
 * masked entry and is never selected; +Inf (a forced block) is selected before every
 * finite score. idx[count..k) is set to -1. A NaN score is refused (-1 with its index in
 * why): a selection over NaN has no meaning, and production kernels differ on it.
 * n < 2^31. Returns 0 or -1. */
int lowp_topk(const float *scores, size_t n, size_t k, int32_t *idx, size_t *count, char *why,
              size_t why_len);

/* 1 when entry a ranks before entry b under the tie rule. */
int lowp_topk_better(const float *scores, int32_t a, int32_t b);

/* How a selection got differs from the reference selection ref (both sets of distinct
 * indices into the same n blocks; order ignored). ref_scores are the scores that chose
 * ref; they rank the intruders. */
typedef struct lowp_select_drift {
    size_t n_ref, n_got, common; /* |R|, |G|, |R and G| */
    double jaccard;              /* |R and G| / |R or G| (1 when both are empty) */
    double recall;               /* |R and G| / |R| (1 when R is empty): recall@k */
    size_t lost;                 /* |R \ G|: reference blocks the selection dropped */
    size_t intruders;            /* |G \ R| */
    /* For each intruder, its rank among ref_scores (0 = best; a rank >= n_ref when ref is
     * the top-n_ref): how far from the reference selection it came. 0 when none. */
    size_t max_intruder_rank;
    double mean_intruder_rank;
} lowp_select_drift;

/* Fills d. Refuses (-1) an index outside [0, n), a repeated index, or a NaN in ref_scores. */
int lowp_select_drift_of(const int32_t *ref, size_t n_ref, const int32_t *got, size_t n_got,
                         const float *ref_scores, size_t n, lowp_select_drift *d, char *why,
                         size_t why_len);

/* 1 when block b (a needle's block) is in sel[0..n). */
int lowp_select_contains(const int32_t *sel, size_t n, int32_t b);

/* ------------------------------------------------------------------ binary32 helpers */

/* The dot-product rule: sum over i in order of (double)a[i] * (double)b[i] in binary64
 * (each product exact), rounded once to binary32. */
float lowp_select_dot(const float *a, const float *b, size_t n);

/* ------------------------------------------------------------------ QSA */

/* Qwen3.8-Flash-Next's QSA indexer (Hugging Face qwen4_exp Qwen4ExpTextQSAIndexer; vLLM
 * qwen4_exp; ref/notes/selection.md). One index-key head; for each query:
 *   q_h  = bf16(RoPE_pos(bf16(RMSNorm1w(q_h, wq))))          h = 0..index_heads-1
 *   kb_b = RoPE_{ratio*b}(bf16(RMSNorm1w(bf16(mean32(k[ratio*b .. ratio*b+ratio-1])), wk)))
 *   s_b  = (sum_h ReLU(dot(q_h, kb_b))) [/ sqrt(head_dim)]    b < visible
 *   visible = min((pos + 1) / ratio, seq_len / ratio)      complete blocks only
 *   selected = top-k(s) (tie rule above), then the open tail pos+1 - (pos+1) % ratio .. pos
 * where
 *   mean32: fp32 sum in token order, then / ratio (the Triton compression kernel);
 *   RMSNorm1w(x, w) = x * (1 / sqrt(mean(x^2) + eps)) * (1 + w), fp32 (Gemma / vLLM
 *     GemmaRMSNorm, zero-centred weights); mean(x^2) by the dot-product rule, / dim in
 *     fp32; 1/sqrt as fp32 sqrt then fp32 division;
 *   RoPE: NeoX rotate_half on the first rotary_dim dims, per-op BF16 rounding as Hugging
 *     Face applies it to BF16 tensors: out = bf16(bf16(x * cos) + bf16(rot(x) * sin)),
 *     with inv_freq[i] = fp32(1 / fp32(theta ^ fp32(2i / rotary_dim))), the angle
 *     fp32(pos * inv_freq[i]) and cos/sin = bf16(cos/sin of it, computed in binary64);
 *   the key cache then holds kb in key_format (BF16; E4M3 with unit scale, as vLLM's
 *     indexer_kv_dtype=fp8, where q is cast to E4M3 too: torch casts, no saturation;
 *     lowp's NVFP4 / MXFP4 options: the BF16 row quantized along head_dim by the recipe
 *     and global scale given, q left in BF16), and dot reads its exact decoded values.
 */
typedef enum lowp_qsa_keys {
    LOWP_QSA_KEYS_BF16 = 0,
    LOWP_QSA_KEYS_E4M3 = 1, /* unit scale, q cast to E4M3 as well */
    LOWP_QSA_KEYS_NVFP4 = 2,
    LOWP_QSA_KEYS_MXFP4 = 3,
    LOWP_QSA_KEYS_MXFP8 = 4
} lowp_qsa_keys;

typedef struct lowp_qsa_config {
    size_t index_heads;   /* 4 */
    size_t head_dim;      /* 128 */
    size_t rotary_dim;    /* 64: partial_rotary_factor 0.25 of the main head dim 256 */
    size_t ratio;         /* 4 tokens per block (indexer_compress_ratio) */
    size_t topk;          /* 512 blocks (indexer_budget 2048 / ratio) */
    int divide;           /* 1: / sqrt(head_dim) (Hugging Face, vLLM CPU/AMD); 0: vLLM NVIDIA */
    double rope_theta;    /* 1e7 */
    float eps;            /* RMSNorm epsilon, 1e-6 */
    lowp_qsa_keys keys;
    lowp_recipe recipe;   /* NVFP4 / MXFP4 / MXFP8 keys */
    lowp_global_scale gs; /* NVFP4 keys */
} lowp_qsa_config;

/* The values above (the Qwen3.8-Flash-Next geometry, BF16 keys, with the divisor). */
lowp_qsa_config lowp_qsa_config_default(void);

/* Width of the index list: topk * ratio + ratio - 1 (2051), plus one count column. */
size_t lowp_qsa_index_width(const lowp_qsa_config *c);

/* The compressed index-key cache of one sequence: for raw BF16 keys k[seq_len][head_dim]
 * (values, each a BF16 number), wk[head_dim], the blocks' keys as the dot reads them:
 * kb[seq_len / ratio][head_dim], exactly decoded from the key format (binary64: an NVFP4
 * value, element x block scale x global scale, needs up to 30 significant bits; times a
 * BF16 or E4M3 query value that is at most 38, so every product of the dot is exact).
 * Returns 0 or -1. */
int lowp_qsa_compress(const lowp_qsa_config *c, const float *k, size_t seq_len, const float *wk,
                      double *kb, char *why, size_t why_len);

/* The query side: q[index_heads][head_dim] raw BF16 values at position pos -> qo as the
 * dot reads it (BF16, or E4M3 values for LOWP_QSA_KEYS_E4M3). Returns 0 or -1. */
int lowp_qsa_query(const lowp_qsa_config *c, const float *q, size_t pos, const float *wq, float *qo,
                   char *why, size_t why_len);

/* Scores of the visible blocks (scores[0..*visible)) for one prepared query qo over the
 * compressed keys kb of a sequence of seq_len tokens at position pos (pos < seq_len). */
int lowp_qsa_scores(const lowp_qsa_config *c, const float *qo, const double *kb, size_t seq_len,
                    size_t pos, float *scores, size_t *visible, char *why, size_t why_len);

/* The selection as production lays it out: index[0..width) token positions (selected
 * blocks in ascending block order, each block's ratio tokens, then the open tail), -1
 * padding, and index[width] the count of valid slots. blocks (may be NULL) gets the
 * selected block numbers, best first, blocks[0..*nblocks). Returns 0 or -1 (NaN score). */
int lowp_qsa_select(const lowp_qsa_config *c, const float *scores, size_t visible, size_t pos,
                    int32_t *index, int32_t *blocks, size_t *nblocks, char *why, size_t why_len);

/* ------------------------------------------------------------------ DSA */

/* DeepSeek-V3.2's lightning indexer (deepseek-ai/DeepSeek-V3.2-Exp inference/model.py
 * Indexer.forward and inference/kernel.py act_quant / fp8_index; DeepGEMM's FP4 index-K;
 * ref/notes/selection.md 2). Inputs are the index q [heads][head_dim] and keys
 * k[seq_len][head_dim] after RoPE and the Hadamard rotation (BF16 values), and the raw
 * head weights w[heads] (weights_proj(x), BF16 values). For one query at position pos:
 *   quant(x, floor): amax = max(max|x|, floor); s = ue8m0 ? 2^ceil(log2(fp32(amax * (1/448))))
 *     (the exponent-bit ceil of fast_round_scale) : fp32(amax * (1/448));
 *     codes = e4m3(clamp(fp32(x / s), -448, 448)) (nearest even), per token (per head for q)
 *   w_h  = fp32(fp32(bf16(w_h * fp32(heads^-0.5)) * qs_h) * fp32(head_dim^-0.5))
 *   l_nh = ReLU(dot(kq_n, qq_h)) * w_h                   (dot: the rule above, exact E4M3 products)
 *   s_n  = (sum_h l_nh) * ks_n                            (k scale after the head sum)
 *   visible: n <= pos (causal), n < seq_len; selection: top-k of s over the visible keys.
 * FP4 index keys (DeepGEMM per_token_cast_to_fp4, use_ue8m0, gran_k 32): per 32 elements
 *   sf = 2^(ceil_ue8m0(max(amax, 1e-4) / 6) - 127), the E8M0 code clamped to [1, 254];
 *   element = E2M1(x / sf) by round-to-nearest-even (LOWP_DSA_FP4_RNE) or DeepGEMM's
 *   encoder (LOWP_DSA_FP4_DEEPGEMM: the count of boundaries 0.25 0.75 1.25 1.75 2.5 3.5 5
 *   that |x / sf| exceeds, so exact midpoints go toward zero, and -0 becomes +0); the dot
 *   reads element x sf (exact) and ks_n = 1. q stays FP8.
 * BF16 (unquantized; the reference vLLM's indexer tests compare against): q and k as given,
 *   qs = ks = 1.
 * Not modelled: vLLM's fused q path computes the UE8M0 scale as exp2(ceil(log2(.))) with
 * the device's log2, which can round a value just above a power of two down to it. */
typedef enum lowp_dsa_keys {
    LOWP_DSA_KEYS_FP8 = 0,
    LOWP_DSA_KEYS_FP4 = 1,
    LOWP_DSA_KEYS_BF16 = 2 /* unquantized q and k (qs = ks = 1): the reference drift is measured against */
} lowp_dsa_keys;
typedef enum lowp_dsa_fp4_round { LOWP_DSA_FP4_RNE = 0, LOWP_DSA_FP4_DEEPGEMM = 1 } lowp_dsa_fp4_round;

typedef struct lowp_dsa_config {
    size_t heads;        /* 64 index heads */
    size_t head_dim;     /* 128: one scale per token (the quantization block is the head dim) */
    size_t topk;         /* 2048 */
    int ue8m0;           /* 1: power-of-two scales (the released model's scale_fmt "ue8m0") */
    float q_floor;       /* amax floor of q: 1e-4 (reference), 1e-10 (vLLM's fused q path) */
    float k_floor;       /* amax floor of k: 1e-4 */
    lowp_dsa_keys keys;
    lowp_dsa_fp4_round fp4_round;
} lowp_dsa_config;

lowp_dsa_config lowp_dsa_config_default(void);

/* Quantized keys as the dot reads them: kq[seq_len][head_dim] (E4M3 values, or E2M1 x sf
 * for FP4) and ks[seq_len] (the FP8 per-token scale; 1 for FP4). Returns 0 or -1. */
int lowp_dsa_keys_quantize(const lowp_dsa_config *c, const float *k, size_t seq_len, float *kq, float *ks,
                           char *why, size_t why_len);

/* Scores of the visible keys for one query (q[heads][head_dim], w[heads]) at position pos:
 * scores[0..*visible), *visible = min(pos + 1, seq_len). Returns 0 or -1. */
int lowp_dsa_scores(const lowp_dsa_config *c, const float *q, const float *w, const float *kq,
                    const float *ks, size_t seq_len, size_t pos, float *scores, size_t *visible, char *why,
                    size_t why_len);

/* ------------------------------------------------------------------ MoBA / NSA */

/* Block selection from the main keys, so that the main KV format acts on it directly:
 * k[seq_len][kv_heads][head_dim] are the values the cache gives back (dequantized), q
 * [q_heads][head_dim] the query at position pos (pos < seq_len); group g = h / (q_heads /
 * kv_heads). Blocks of `block` tokens; block i's key is, per KV head,
 *   kbar_i = bf16(fp32(sum of its tokens' keys) / n_i)     (torch mean of a BF16 tensor;
 *            the last block may be partial: n_i < block)
 * The current block c = pos / block.
 *   MoBA (MoonshotAI/MoBA moba_naive.py; ref/notes/selection.md 3): per query head,
 *     gate_i = dot(q_h, kbar_i) (fp32, no 1/sqrt(d)) for i < c, +Inf for i = c (forced),
 *     masked (-Inf, never selected) for i > c; top-k per head. One selection per q head.
 *   NSA (fla-org/native-sparse-attention parallel_nsa_kernel_topk, and the paper's forced
 *     blocks): per head, s_i = fp32(dot(q_h, kbar_i) * fp32(head_dim^-0.5)) over the
 *     complete blocks i < nc = (pos + 1) / block; lse = log(sum exp(s_i)) in binary64;
 *     p_i = fp32(exp(s_i - lse)) for i < c; the scores of a group are the sum of its
 *     heads' p_i (the rule), and the current block, the first sink_blocks and the
 *     local_blocks most recent blocks (the current one included) are forced (+Inf);
 *     top-k per KV group. One selection per KV head.
 * exp and log are the C library's binary64 functions. */
typedef enum lowp_blocksel_method { LOWP_BLOCKSEL_MOBA = 0, LOWP_BLOCKSEL_NSA = 1 } lowp_blocksel_method;

typedef struct lowp_blocksel_config {
    lowp_blocksel_method method;
    size_t q_heads, kv_heads, head_dim;
    size_t block;        /* tokens per block (MoBA chunk_size 512 / 4096; NSA selection block 64) */
    size_t topk;         /* blocks kept per selection, forced ones included (MoBA 3; NSA 16) */
    size_t sink_blocks;  /* NSA: 1 in the paper, 0 in the FLA kernel; MoBA: 0 */
    size_t local_blocks; /* NSA: 2 in the paper, 1 (the current block) in FLA; MoBA: 1 */
} lowp_blocksel_config;

/* Number of selections (MoBA: q_heads, NSA: kv_heads) and of candidate blocks at pos. */
size_t lowp_blocksel_units(const lowp_blocksel_config *c);

/* Scores scores[unit][nblocks] with nblocks = pos / block + 1 (the current block and
 * those before it), +Inf forced, -Inf masked; then lowp_topk per unit gives the
 * selection. Returns 0 or -1 (bad configuration, pos >= seq_len). */
int lowp_blocksel_scores(const lowp_blocksel_config *c, const float *q, const float *k, size_t seq_len,
                         size_t pos, float *scores, size_t *nblocks, char *why, size_t why_len);

#ifdef __cplusplus
}
#endif
#endif /* LOWP_SELECT_H */
