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
 *     its own accumulation, which the stability certificate (lowp_select_certified) bounds.
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
 * kdelta (may be NULL) gets each stored value's error bound against the BF16 row
 * (lowp_select_quant_bound; 0 for BF16 keys). Returns 0 or -1. */
int lowp_qsa_compress(const lowp_qsa_config *c, const float *k, size_t seq_len, const float *wk,
                      double *kb, double *kdelta, char *why, size_t why_len);

/* The RoPE table lowp_qsa_compress and lowp_qsa_query use at position pos: cs[i], sn[i]
 * (i < rotary_dim / 2), the BF16 cos / sin above. A GPU kernel that reproduces the
 * indexer takes it as input (production kernels read a cos/sin cache too). 0 or -1. */
int lowp_qsa_rope_table(const lowp_qsa_config *c, size_t pos, float *cs, float *sn, char *why, size_t why_len);

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
 * for FP4) and ks[seq_len] (the FP8 per-token scale; 1 for FP4). kdelta (may be NULL) gets
 * each element's bound against the BF16 key in the key's units (lowp_select_elem_bound of
 * the E4M3 value at ks, of the E2M1 element at sf; 0 for BF16 keys). Returns 0 or -1. */
int lowp_dsa_keys_quantize(const lowp_dsa_config *c, const float *k, size_t seq_len, float *kq, float *ks,
                           double *kdelta, char *why, size_t why_len);

/* The query side of lowp_dsa_scores for q[heads][head_dim] and w[heads]: qq (E4M3 values, or
 * q itself for BF16 keys), qs[heads] their scales (1 for BF16), wb[heads] the BF16 weights
 * bf16(w_h * fp32(heads^-0.5)), wh[heads] the folded weights fl32(fl32(wb_h qs_h) dscale)
 * and *dscale = fp32(head_dim^-0.5). Returns 0 or -1. */
int lowp_dsa_query(const lowp_dsa_config *c, const float *q, const float *w, float *qq, float *qs, float *wb,
                   float *wh, float *dscale, char *why, size_t why_len);

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

/* ------------------------------------------------------------------ sparse attention */

/* Attention of one query head over the selected tokens only (issue #19 item 2), as QSA's
 * production sparse kernel computes it (vLLM qwen4_exp nvidia/ops/qsa.py,
 * qsa_sparse_paged_attention and _qsa_sparse_paged_gqa_splitk_kernel; ref/notes/selection.md
 * 1.6), and its binary64 reference. The caller gathers the selected tokens: k[n][dim] and
 * v[n][dim] are the cache elements of the n selected tokens (the selected blocks' tokens
 * and the open tail, in index-list order), q[dim] the query, gate[dim] the output gate (NULL:
 * none). out[dim] gets the output.
 *
 * Production path: LOWP_SPARSE_BF16 (BF16 cache) and LOWP_SPARSE_FP8 (FP8 cache, and lowp's
 * NVFP4 / MXFP4 / MXFP8 caches by the same rules). Every binary32 operation is correctly
 * rounded to nearest even.
 *  1. Host scales (Python floats, binary64, passed to Triton as binary32):
 *       softmax_scale = fl32(dim^-0.5 * k_scale),  output_scale = fl32(v_scale)
 *     (k_scale = v_scale = 1 in BF16 mode: softmax_scale = fl32(dim^-0.5)); in the kernel
 *       score_scale = fl32(softmax_scale * fl32(1.4426950408889634))   (log2 e)
 *  2. Elements: q and K elements as BF16 values (bf16(x); FP8 codes widen exactly,
 *     `keys.to(query.dtype)`; an NVFP4 / MX element x block scale has at most 6 significant
 *     bits and widens exactly too, short of BF16's range; the global scale is k_scale).
 *     V elements: BF16 in BF16 mode; fp16 in FP8 mode (`values.to(tl.float16)`: exact for
 *     E4M3 / E5M2 codes; a block format's element x block scale rounds to nearest even where
 *     it leaves fp16's range, lowp's rule).
 *  3. s_j = fl32(dot(q, k_j) * score_scale), dot = tl.dot's fp32 accumulation of exact
 *     BF16 products, by lowp's dot-product rule (binary64 in order, rounded once).
 *  4. m = max_j s_j;  p_j = fl32(exp2(fl32(s_j - m))) (exp2 correctly rounded: binary64
 *     exp2 rounded once);  l = fl32(sum_j p_j) (binary64 in order, rounded once).
 *  5. P_j = fp16(p_j) in FP8 mode, bf16(p_j) in BF16 mode (`probabilities.to(values.dtype)`);
 *     acc_d = fl32(sum_j P_j * v_jd) (tl.dot, fp32 accumulation: lowp's rule; each
 *     product exact).
 *  6. inv = fl32(output_scale / max(l, 1e-20f));  o_d = fl32(acc_d * inv).
 *  7. out_d = fl32(bf16(o_d) * sigmoid(g_d)) with g_d = bf16(gate_d) and sigmoid =
 *     fl32(1 / (1 + exp(-g))) in binary64 (tl.sigmoid in fp32; lowp rounds the exact value
 *     once); without a gate out_d = bf16(o_d).
 *  n = 0 gives out = 0 (the kernel's has_values guard).
 * lowp's choice (stated, not the kernel's): the kernel runs an online softmax over tiles of
 * BLOCK_N columns (rescaling by alpha = exp2(m_old - m_new)) and, for some launch shapes,
 * splits the columns and merges the partial results; both depend on the GPU's tuning table.
 * The definition above is the one-tile, one-split form, equal to them in exact arithmetic and
 * different by fp32 roundings of the rescaling.
 *
 * Exact (LOWP_SPARSE_EXACT): the same function of the same inputs in binary64, no
 * intermediate rounding: s_j = dim^-0.5 k_scale (q . k_j), w_j = exp(s_j - max s),
 * o_d = v_scale (sum_j w_j v_jd) / (sum_j w_j), out_d = o_d / (1 + exp(-gate_d)) (no gate:
 * o_d). q, k, v and gate are taken as given (not rounded): the reference of the
 * unquantized cache is this path over its values with k_scale = v_scale = 1. */
typedef enum lowp_sparse_path {
    LOWP_SPARSE_EXACT = 0,
    LOWP_SPARSE_BF16 = 1,
    LOWP_SPARSE_FP8 = 2
} lowp_sparse_path;

typedef struct lowp_sparse_attn_args {
    lowp_sparse_path path;
    size_t dim;             /* 1..1024 */
    double k_scale, v_scale; /* per-tensor decode-side scales; ignored (1) by LOWP_SPARSE_BF16 */
} lowp_sparse_attn_args;

/* out[dim] as above. Refuses (-1) a bad path or dim, n >= 2^31, a non-finite or
 * non-positive scale. NaN or Inf inputs propagate as the arithmetic does. */
int lowp_sparse_attn(const lowp_sparse_attn_args *a, const float *q, const float *k, const float *v, size_t n,
                     const float *gate, double *out, char *why, size_t why_len);

/* ------------------------------------------------------------------ certified stability */

/* A selection is certified stable when the scores' error bounds prove that it is the
 * selection the exact scores make (real arithmetic on the unquantized keys). For scores s_i
 * with |s_i - s*_i| <= b_i (s* exact) and the top-k set S chosen from s:
 *     certified  <=>  min over i in S of (s_i - b_i)  >  max over j not in S of (s_j + b_j)
 * (finite scores only: +Inf forced and -Inf masked entries are the same on every side).
 * Then every exact s*_i (i in S) exceeds every s*_j (j not in S), so the exact top-k is S
 * and has no tie at its boundary. lowp_select_run calls a selection certified stable when
 * both the quantized keys' selection and the reference keys' selection are certified: both
 * then equal the exact one, so quantizing the keys provably did not change it.
 *
 * Element bound (lowp_select_quant_bound). A quantizer stores x ~= e * S * g (element e,
 * block scale S, decode-side global scale g). Every lowp recipe computes t' = x / (S g) in
 * binary32 with at most a few roundings and one rcp.approx (relative error |t' - t| <= eps
 * |t|, eps = 2^-20, a bound on 4 binary32 roundings and rcp.approx's 2 ulp, t = x / (S g))
 * and encodes t' to a nearest element (nearest even, or DeepGEMM's midpoints toward zero,
 * also a nearest one). With h(e) the half gap above |e| in the element format (the gap
 * below is never larger in a binary floating format):
 *     |x - e S g| = S g |t - e| <= S g (h(e) + eps (|e| + 2 h(e)))
 * since |t' - e| <= h(e) and |t - t'| <= eps |t| <= eps (|e| + h(e)) (1 + 2 eps).
 * The largest code is the exception: the recipes clamp there. A recipe's scale keeps
 * |t| below 2^(E + 1), E the exponent of the element maximum M (OCP MX: S = 2^(floor(log2
 * amax) - E), so amax / S < 2^(E+1); NVFP4's E4M3 scale rounds amax / 6 by at most 2^-4;
 * FP8's calibrated scale is amax / M); h is then max(h_below, 2^(E+1) - M). A scale S = 0
 * (the block amax rounded to a zero scale) bounds |x| by M * (smallest positive scale) * g
 * * (1 + eps); a NaN scale or element gives an infinite bound. The assumption on the
 * clamp does not hold for FP8 at a fixed scale with |x| > 2^(E+1) g: lowp_select_run
 * checks |x - e S g| <= bound on every key and certifies nothing where it fails.
 *
 * Score bounds. u = 2^-53, gamma_n = n u / (1 - n u) (recursive binary64 summation of n
 * terms: |computed - exact| <= gamma_{n-1} sum |terms|), and a binary32 rounding of y
 * (|fl32(y) - y| <= 2^-24 |y| + 2^-150) bounded from the computed value as
 * r32(z) = 2^-23 |z| + 2^-149; BF16's r16(z) = 2^-8 |z| + 2^-133.
 *   QSA (lowp_qsa_score_bounds): the exact score of block b is
 *     s*_b = (sum_h ReLU(q_h . x_b)) / div, x_b the BF16 index-key row, q_h the BF16 query,
 *     div the same binary32 sqrt(head_dim) (1 without the divisor). With the stored kb_b,
 *     its element bounds dk (0 for BF16 keys), the query qo as the dot reads it and dq its
 *     element bounds (E4M3 mode: q cast to E4M3, h(qo) + eps(...); else 0):
 *       A_h = sum_i |qo_hi| dk_bi + dq_hi (|kb_bi| + dk_bi)       >= |qo.kb - q.x|
 *       P_h = sum_i |qo_hi kb_bi|                                  (the dot's terms)
 *       e_h = A_h + gamma_{d-1} P_h + r32(D_h)                     >= |D_h - q_h.x_b|
 *     (D_h the binary32 dot), ReLU is 1-Lipschitz, the head sum T = sum_h ReLU(D_h) is
 *     binary64 then binary32 (Sc), then the binary32 division:
 *       b = (sum_h e_h + gamma_{H-1} T + r32(Sc)) / div + r32(s)
 *   MoBA (lowp_moba_score_bounds): the exact gate of block i for head h is
 *     s*_i = q_h . (sum_t x_t / n), x the binary32 main keys of the block's n tokens. With
 *     the keys k the selector read (quantized, or BF16) and their bounds dk, per channel c:
 *       S64 = binary64 sum_t k_tc, s32 = fl32(S64), m = fl32(s32 / n), kb = bf16(m):
 *       eps_c = r16(kb) + r32(m) + (r32(s32) + gamma_{n-1} sum_t |k_tc| + sum_t dk_tc) / n
 *                                                            >= |kb_c - sum_t x_tc / n|
 *       b = sum_c |q_c| eps_c + gamma_{d-1} sum_c |q_c kb_c| + r32(s)
 *   The bounds are computed in binary64 and multiplied by 1 + 2^-40, which covers the
 *   roundings of their own few hundred nonnegative terms (each at most 2^-53 relative).
 *   lowp_select_run quantizes main keys whose head dim is not a multiple of the block size
 *   with each row padded with zeros to whole blocks (as lowp_sweep_quantize_exact lays them
 *   out); dk is then the padded layout's element bound of each real element, and the bound
 *   holds unchanged (tests/test_select_stability.c checks d = 80 under MX's 32).
 *   DSA (lowp_dsa_score_bounds): the exact score of key n is
 *     s*_n = sum_h ReLU(q_h . k_n) wb_h c      (q, k the BF16 inputs, wb_h the BF16 head
 *     weight, c = fp32(head_dim^-0.5): the weight as the reference path has it before its
 *     own rounding). The quantized path reads x_h = qq_h qs_h and y_n = kq_n ks_n, element
 *     bounds dq (E4M3 at qs_h; 0 for BF16) and dk (lowp_dsa_keys_quantize's kdelta). ReLU is
 *     1-Lipschitz and positive-homogeneous (ReLU(ks qs D) = ks qs ReLU(D), scales > 0), the
 *     head weight enters linearly:
 *       A_h = sum_i |x_hi| dk_ni + dq_hi (|y_ni| + dk_ni),  P_h = sum_i |qq_hi kq_ni|
 *       E_h = ks qs_h (gamma_{d-1} P_h + r32(D_h)) + A_h         >= |ks qs_h D_h - q_h.k_n|
 *       ew_h = r32(wh_h) + c r32(fl32(wb_h qs_h))                >= |wh_h - wb_h qs_h c|
 *       l_h = fl32(ReLU(D_h) wh_h), Sc = fl32(binary64 sum_h l_h), s = fl32(Sc ks):
 *       b = sum_h (ks ReLU(D_h) ew_h + |wb_h| c E_h + ks r32(l_h))
 *           + ks (gamma_{H-1} sum_h |l_h| + r32(Sc)) + r32(s)
 *     The same bound serves the BF16 reference (qs = ks = 1, dq = dk = 0). No clamp
 *     exception: DSA's scales come from each row's amax (floored), so |x / s| stays within
 *     the largest code's half gap.
 *   NSA (lowp_nsa_score_bounds): the exact score of block i for KV group g is
 *     P*_i = sum_{h in g} p*_hi,  p*_hi = exp(s*_hi - L*_h),  L*_h = log sum_{j < nc} exp(s*_hj),
 *     s*_hi = d^-0.5 q_h . (sum_t x_t / n)      (real d^-0.5, the exact block mean)
 *   over the same support as the computed one (the nc complete blocks, the current one
 *   included when complete); forced blocks (+Inf on both sides) get bound 0. Per head:
 *     1. Logits. D_i = the fp32 dot, sm = fl32(binary64 1 / sqrt(d)), s_i = fl32(D_i sm);
 *        |sm - d^-0.5| <= (2^-24 + 2^-51) d^-0.5 <= ec = 2^-23 sm. With MoBA's dot bound
 *        bm_i = sum_c |q_c| eps_c + gamma_{d-1} sum_c |q_c kb_c| + r32(D_i) >= |D_i - q.mean|:
 *          b_i = (sm + ec) bm_i + |D_i| ec + r32(s_i)                       >= |s_i - s*_i|
 *     2. lse. log-sum-exp is 1-Lipschitz in the max norm: with B = max_{i<nc} b_i,
 *        |L - L*| <= B, L = log sum exp(s_i) in real arithmetic. The computed lse = m +
 *        log(sum_j exp(s_j - m)) (binary64, m = max s_j): each term within a relative
 *        mu = 2^-42 (argument rounding 2^-53 |x| with |x| <= 746 where the term exceeds
 *        2^-1074, exp's 2^-51) plus 2^-1073; the sum >= 1 (its largest term is exp(0) = 1);
 *          eL = 1.01 (mu + gamma_{nc-1} + nc 2^-1073) + 2^-51 |log sum| + 2^-52 |lse|
 *                                                                          >= |lse - L|
 *        (log's 2^-51 relative, the addition's rounding).
 *     3. Probabilities. a_i = fl64(s_i - lse), pd_i = exp(a_i) (|pd - e^a| <= 2^-51 e^a +
 *        2^-1073), p_i = fl32(pd_i). Steps 1-2 and a's rounding put e^{a_i} within a factor
 *        e^{+-Delta_i} of p*_hi, Delta_i = b_i + B + eL + 2^-52 |a_i|; with Ea = (pd_i + 2^-1073)
 *        (1 + 2^-50) >= e^{a_i}:
 *          e_hi = Ea (expm1(Delta_i) + 2^-51) + 2^-1073 + r32(p_i)            >= |p_i - p*_hi|
 *     4. Group sum. o_i = fl32(binary64 sum_h p_hi):
 *          b_i(group) = sum_h e_hi + gamma_{G-1} sum_h p_hi + r32(o_i)       >= |o_i - P*_i|
 *   The C library's exp and log are taken to be within 2 ulp (relative 2^-51; glibc
 *   documents at most 1 ulp). The key-side terms (eps_c, kdsum, the padded rows, the clamp
 *   check) are MoBA's. The bound adds b_i and B (it does not use that the lse moves with
 *   correlated logit errors, which then cancel), so a selection whose group scores differ by
 *   less than about 2 (b_i + B) times their size is not certified: near-uniform softmaxes
 *   (Gaussian keys, where candidate blocks' scores differ by a few percent) are not
 *   certified even with BF16 keys; blocks whose logits stand ~2 above the rest are
 *   (tests/test_select_stability.c: 10 of 250 selections, all from its needle draws). */

/* h(x) of the element bound: half the gap above |x| in f, x a value of f (the largest
 * finite value: half the gap below it). NaN for a value f does not hold. */
double lowp_select_halfgap(lowp_format f, double x);

/* delta[0..n) of n block-quantized codes of f (lowp_block_quantize's layout) with
 * decode-side global scale dec, as derived above. scales may be NULL for formats without
 * them. */
void lowp_select_quant_bound(lowp_block_format f, float dec, const uint8_t *codes, const uint8_t *scales, size_t n,
                             double *delta);

/* The bound of the element e of f at scale s: s * (h(e) + eps (|e| + 2 h(e))) with the
 * clamp rule at the largest code (unit-scale casts use s = 1). */
double lowp_select_elem_bound(lowp_format f, double e, double s);

/* bounds[0..visible) for QSA scores as lowp_qsa_scores computed them (same arguments),
 * kdelta[seq_len / ratio][head_dim] the key bounds (NULL: 0). Returns 0 or -1. */
int lowp_qsa_score_bounds(const lowp_qsa_config *c, const float *qo, const double *kb, const double *kdelta,
                          size_t seq_len, size_t pos, const float *scores, double *bounds, char *why, size_t why_len);

/* bounds[unit][nblocks] for MoBA scores as lowp_blocksel_scores computed them from keys k;
 * kdsum[block][kv_heads][head_dim] holds, per block, the sum over its tokens of the keys'
 * element bounds (sum_t dk_tc above; NULL: 0). Forced and masked entries get 0. Refuses
 * (-1) an NSA configuration (lowp_nsa_score_bounds). */
int lowp_moba_score_bounds(const lowp_blocksel_config *c, const float *q, const float *k, const double *kdsum,
                           size_t seq_len, size_t pos, const float *scores, double *bounds, char *why,
                           size_t why_len);

/* bounds[kv_head][nblocks] for NSA group scores as lowp_blocksel_scores computed them from
 * keys k, kdsum as for MoBA. Forced entries get 0, a NaN bound is returned as +Inf. Refuses
 * (-1) a MoBA configuration. */
int lowp_nsa_score_bounds(const lowp_blocksel_config *c, const float *q, const float *k, const double *kdsum,
                          size_t seq_len, size_t pos, const float *scores, double *bounds, char *why,
                          size_t why_len);

/* bounds[0..pos] for DSA scores as lowp_dsa_scores computed them (same arguments), kdelta
 * [seq_len][head_dim] the keys' element bounds (NULL: 0). A NaN bound is returned as +Inf.
 * Returns 0 or -1. */
int lowp_dsa_score_bounds(const lowp_dsa_config *c, const float *q, const float *w, const float *kq, const float *ks,
                          const double *kdelta, size_t seq_len, size_t pos, const float *scores, double *bounds,
                          char *why, size_t why_len);

/* 1 when the top-k set sel[0..nsel) of scores[0..n) is certified by bounds[0..n) (the
 * rule above), else 0. */
int lowp_select_certified(const float *scores, const double *bounds, size_t n, const int32_t *sel, size_t nsel);

#ifdef __cplusplus
}
#endif
#endif /* LOWP_SELECT_H */
