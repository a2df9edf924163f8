/* lowp/attn_gpu_extend.h: the arithmetic of lowp's GPU extend / prefill attention kernel
 * (gpu/kernels/extend.cu: SGLang's chunked prefill on the FP8 E4M3 workspace, and initial
 * prefill on the chunk's own FP8 K/V, lowp/kvcache.h paths EXTEND and PREFILL), and its CPU
 * emulator, which reproduces the kernel's output bit for bit.
 *
 * The kernel and this emulator implement one definition, stated here, in the style of
 * lowp/attn_gpu_emul.h (the decode's), whose shared pieces it reuses: the element value of
 * an E4M3 code (lowp_gpu_decode_element_bf16), the score scale (lowp_gpu_decode_score_scale
 * with k_global = 1), binary32 -> BF16 (lowp_bf16_from_f32) and the MMA model (lowp/mma.h), and
 * the hardware's ex2.approx.ftz.f32, modelled exactly (lowp_exp2_hw, lowp/ex2_approx.h:
 * the instruction in the kernel, the measured model in the emulator; the decode keeps
 * lowp/exp2_sw.h). Every binary32 operation is correctly rounded to nearest even
 * unless it says otherwise; the kernel is compiled with --fmad=false.
 *
 * Inputs (ragged batch, indptr style, int32 as FlashInfer / SGLang):
 *   sequence b has q_len_b = qo_indptr[b+1] - qo_indptr[b] >= 1 queries and a prefix of
 *   P_b = prefix_len[b] cached positions; its workspace region is rows kv_indptr[b] ..
 *   kv_indptr[b+1]-1 of the FP8 workspace, of which the first kv_len_b = P_b + q_len_b
 *   rows are its positions 0..kv_len_b-1 (prefix, then the chunk); rows of the region past
 *   kv_len_b are never read (a conformance run poisons them with NaN).
 *   q  BF16 [qo_indptr[batch]][num_q_heads][qk_dim] (the path's RN of the binary32 query);
 *   k  E4M3 bytes [kv rows][num_kv_heads][qk_dim], v E4M3 [kv rows][num_kv_heads][vo_dim];
 *   out BF16 [qo_indptr[batch]][num_q_heads][vo_dim].
 *   G = num_q_heads / num_kv_heads in 1..16; qk_dim, vo_dim multiples of 64 in [64, 256]
 *   (they may differ). Query head hq reads KV head hq / G.
 *
 * 1. Elements. A K or V code c becomes the BF16 e = its E4M3 value (exact; NaN for 0x7F /
 *    0xFF). Query i of sequence b sits at position P_b + i and sees positions 0..P_b + i.
 * 2. Rows. For (sequence b, KV head h), the query rows are packed GQA style into the MMA's
 *    M dimension: row R = i G + g holds query i, query head h G + g (R < q_len_b G). Warp w
 *    owns rows 16w .. 16w + 15 (rows past q_len_b G are padding: Q = +0, outputs dropped).
 *    A CTA holds 4 warps (64 rows); the CTA grouping does not enter the arithmetic.
 * 3. Key blocks. Positions are cut into blocks of 64 (block kb = positions 64kb .. 64kb+63).
 *    Warp w processes blocks kb = 0 .. floor(Pmax_w / 64), in order, where Pmax_w is the
 *    largest position a valid row of the warp sees (P_b + i of its last valid row). In a
 *    block, a position >= kv_len_b has K = V = +0 (never read); a position past what row R
 *    sees, or >= kv_len_b, gets s = -Inf for that row. No split-K: one warp streams all.
 * 4. Scores. acc = +0; for k-step ks = 0 .. qk_dim/16 - 1: acc = MMA(q[16ks .. 16ks+15],
 *    e_k[16ks .. 16ks+15], acc), MMA = lowp_mma_dot_add_bf16 with the H200's parameters
 *    (group 16: the 16 products of a k-step are fused with acc; the model is independent of
 *    the order of the 16 products within a step, so only the grouping of dims into k-steps
 *    is part of the definition; lane t of each quad of the kernel feeds dims 16ks + 4t ..
 *    4t + 3 as the k slots 2t, 2t+1, 2t+8, 2t+9 of the m16n8k16 fragments, the emulator
 *    dims 16ks .. 16ks + 15 in order: the same value).
 *    s = acc * qk_scale, qk_scale = lowp_gpu_decode_score_scale(FP8_E4M3, sm_scale, 1) =
 *    fl32(sm_scale log2(e)) (the workspace holds the values with the global scale already
 *    folded in: k_scale = v_scale = 1), then the mask of step 3.
 * 5. Online softmax per row, blocks in order, from m = -Inf, l_t = +0 (t = 0..3), o = +0:
 *      m_b = fmaxf over the block's 64 s (NaN ignored);  m' = fmaxf(m, m_b)
 *      alpha = 1 if m' = -Inf, else ex2(m - m');  p_j = 0 if m' = -Inf, else
 *      ex2(s_j - m');  P_j = bf16(p_j)   (ex2 = ex2.approx.ftz.f32: lowp_exp2_hw)
 *      lane sums (lane t of the quad holds positions 8n + 2t, 8n + 2t + 1, n = 0..7):
 *        L_t = +0; for n = 0..7: L_t = L_t + p_{8n+2t}; L_t = L_t + p_{8n+2t+1}
 *        l_t = l_t * alpha + L_t
 *      o_d = o_d * alpha; for j = 0..3: o_d = MMA(P[16j .. 16j+15], e_v[16j .. 16j+15][d],
 *        o_d)   (k = the 16 positions of sub-block j; V of a masked position enters with
 *        P = +0, so a NaN or Inf V there makes the row NaN, as in FA2-style kernels; a
 *        finite V there changes no bit: a zero product's exponent is e_zero whatever V is)
 *      m = m'.
 * 6. out_d = bf16(o_d / l), l = (l_0 + l_1) + (l_2 + l_3) (one division, then RN to BF16;
 *    every NaN -> 0x7FFF as cvt.rn.bf16.f32 gives it).
 * A consequence used by the tests: for finite V, blocks processed past what a row sees
 * change none of its bits (m' = m, alpha = ex2(+0) = 1, p = +0, l_t + 0 = l_t, and an
 * MMA of zero products returns C exactly when C is a finite binary32: its exponent is at
 * least e_zero or its significand fits the 25 kept bits), so the row's output does not
 * depend on the warp grouping; changing K at a position the row does not see changes no bit.
 *
 * Error bound against exact attention (lowp_gpu_extend_bound; the comparison is with the
 * binary64 attention of lowp/attn.h on the binary32 query q32 and the workspace's exact
 * values). For a row with n visible positions, T = ceil(n / 64) blocks, exact scores in log2
 * units s2_j = sm log2(e) q32.k_j, A_j = sum_d |q32_d k_jd|, Q_j = sum_d |bf16(q32_d) -
 * q32_d| |k_jd| (the query's BF16 rounding, taken as it is, 0 when q32 is BF16 already),
 * p_j = 2^(s2_j - max) / sum, V_d = sum_j p_j |v_jd|, u = 2^-24:
 *   - scores: each of the qk_dim/16 chained MMA steps truncates its 17 aligned terms (each
 *     error < 2^-25 of the step's largest term, below 4 A_j: < 17 x 2^-23 A_j) and rounds
 *     toward zero (< 2u |acc|): < 36 u A_j per step (the decode's charge, conform.c);
 *     with the query rounding and the two roundings of the score scale:
 *       Ds_j = sm log2(e) ((qk_dim/16) 36 u A_j + Q_j) + 2u |s2_j|   (log2 units);
 *   - probabilities: ex2.approx computes 2^x' with x' = -(|x| truncated to 2^-23) - 2^-23
 *     for x < 0 with a fraction, x' = x truncated to 2^-23 otherwise (lowp/ex2_approx.h's
 *     split): |x' - x| < 2^-23, ln2 2^-23 < 1.39u relative; its mantissa g(k) is within one
 *     ulp of RN(2^(k 2^-23)) (all 2^23 measured; test_ex2_approx checks the table), so
 *     within 1.5 ulp = 3u relative of 2^(k 2^-23): |ln(ex2(x) / 2^x)| < 4.39u + O(u^2),
 *     charged 5u; the subtraction s - m' within u |s - m'|. Position j's weight in o / l
 *     is p_j times the alphas of the blocks after its own (at most T - 1, each within 5u,
 *     their subtractions m - m' within u |m - m'|, which sum to at most u |s2_j - max|):
 *     weight w_j (1 + e_j) with
 *     |ln(1 + e_j)| <= delta = ln2 max_j (Ds_j + 2u |s2_j - max|) + 5u T
 *     (until 2026-12-06 the alphas were not charged: 5u, u |s2_j - max|);
 *     an error common to every weight (the running max's) cancels in o / l; the
 *     normalised weights move by at most W = e^(2 delta) - 1 of themselves (for any delta,
 *     not only to first order: large scores make the query's rounding cost much), so
 *     they cost W V_d, and V_d itself may grow by the factor 1 + W;
 *   - P rounded to BF16 in the numerator only: 2^-8 V_d (2^-9 relative, doubled);
 *   - P.V: 4T MMA steps, each < 36 u of its largest term, which is at most the running
 *     sum: 4T 36 u V_d;
 *   - binary32 roundings of the rescales o alpha and l alpha (T each), the 16 lane adds per
 *     block and 2 lane combines of l (16T + 2), the division: (18T + 4) 2u (|out_d| + V_d);
 *   - the output rounded to BF16: 2^-8 |out_d|;
 *   - underflow: ex2.approx.ftz flushes a probability below 2^-126 to +0, an absolute
 *     error below 2^-126 of l >= 1 (the row's maximum gives 1): n 2^-125 max_j |v_jd|
 *     (doubled); an output below 2^-126: 2^-133.
 *   Bound = 2 (1 + W) (2^-8 |out_d| + 2^-8 V_d + W V_d + 4T 36 u V_d
 *                + (18T + 4) 2u (|out_d| + V_d)) + n 2^-125 max_j |v_jd| + 2^-133,
 *   the factor 2 covering second-order terms of the small ones. +Inf (not compared) where
 *   the row has a non-finite input (a non-finite V anywhere in the sequence's kv_len: a
 *   masked V reaches the row through P = 0) or |scores| could reach 2^100.
 */
#ifndef LOWP_ATTN_GPU_EXTEND_H
#define LOWP_ATTN_GPU_EXTEND_H

#include <stddef.h>
#include <stdint.h>

#include "lowp/mma.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LOWP_GPU_EXTEND_KBLOCK 64    /* positions per online-softmax block (step 3) */
#define LOWP_GPU_EXTEND_WARP_ROWS 16 /* packed query rows per warp (MMA M) */
#define LOWP_GPU_EXTEND_CTA_WARPS 4  /* warps per CTA (64 rows) */
#define LOWP_GPU_EXTEND_MAX_GROUP 16 /* query heads per KV head */
#define LOWP_GPU_EXTEND_MAX_DIM 256  /* qk_dim, vo_dim: multiples of 64 up to this */

typedef struct lowp_gpu_extend_args {
    size_t batch;
    const int32_t *qo_indptr;  /* [batch + 1]: queries of sequence b */
    const int32_t *kv_indptr;  /* [batch + 1]: workspace region (rows) of sequence b */
    const int32_t *prefix_len; /* [batch]: P_b; NULL: all 0 (initial prefill) */
    size_t kv_rows;            /* rows the workspace holds: kv_indptr[batch] <= kv_rows */
    size_t num_q_heads, num_kv_heads, qk_dim, vo_dim;
    double sm_scale;           /* 0: 1/sqrt(qk_dim) */
    const uint16_t *q;         /* BF16 [qo_indptr[batch]][num_q_heads][qk_dim] */
    const uint8_t *k;          /* E4M3 [kv_rows][num_kv_heads][qk_dim] */
    const uint8_t *v;          /* E4M3 [kv_rows][num_kv_heads][vo_dim] */
    const lowp_mma_params *mma; /* NULL: lowp_mma_sm90_bf16 (emulator only) */
    int threads;               /* emulator's OpenMP threads, 0 = default */
    /* Emulator only: with sample > 1, only work items (sequence b, KV head h, warp w) whose
     * index (b num_kv_heads + h) nw + w (nw = warps of the longest chunk) is congruent to
     * sample_phase modulo sample are computed; other outputs are left as they are (a check
     * of long chunks compares those rows only). 0 or 1: all. */
    size_t sample, sample_phase;
} lowp_gpu_extend_args;

/* 0 if the kernel can run these arguments, else -1 with a one-line reason: NULL pointers,
 * indptr not starting at 0 or decreasing, a sequence without queries, a chunk longer than
 * its workspace region (prefix + q_len > region), a workspace smaller than kv_indptr's
 * last entry, a prefix or length past int32, head dims or group ratios the kernel lacks,
 * a non-finite sm_scale. Checks only the index arrays, never the data. */
int lowp_gpu_extend_check(const lowp_gpu_extend_args *a, char *why, size_t why_len);

/* The emulator: out BF16 [qo_indptr[batch]][num_q_heads][vo_dim], bit for bit the kernel's.
 * Work items (sequence, KV head, warp) run in parallel; the bits do not depend on the
 * thread count. 0, or -1 with a reason (lowp_gpu_extend_check's, or out of memory). */
int lowp_gpu_extend_emulate(const lowp_gpu_extend_args *a, uint16_t *out, char *why,
                            size_t why_len);

/* Binary64 attention (lowp_attn_ref_f64) on the binary32 queries q32 (same shape as a->q,
 * whose BF16 a->q must be) and the workspace's exact E4M3 values, and the header's bound on
 * |kernel - exact| per output: ref and bound [qo_indptr[batch]][num_q_heads][vo_dim] (either
 * may be NULL). bound is +Inf where the row is not compared (a non-finite input or a score
 * near binary32 overflow). 0, or -1 with a reason. */
int lowp_gpu_extend_reference(const lowp_gpu_extend_args *a, const float *q32, double *ref,
                              double *bound, char *why, size_t why_len);

/* Visible query-key pairs of the batch, sum_b sum_i (P_b + i + 1): the bench's FLOP count
 * is 2 (qk_dim + vo_dim) num_q_heads times it (a->... index arrays only; 0 if unchecked). */
double lowp_gpu_extend_pairs(const lowp_gpu_extend_args *a);

#ifdef __cplusplus
}
#endif
#endif /* LOWP_ATTN_GPU_EXTEND_H */
