/* lowp/attn_gpu_emul.h: the arithmetic of lowp's GPU paged-decode kernel (gpu/kernels/decode.cu),
 * and its CPU emulator, which reproduces the kernel's output bit for bit.
 *
 * The kernel and this emulator implement one definition, stated here. Every binary32
 * operation below is correctly rounded to nearest even unless it says otherwise; the
 * kernel is compiled with --fmad=false, so no a*b+c is contracted.
 *
 * Inputs. A paged cache (lowp/kvcache.h) of format BF16, FP8 E4M3/E5M2 (per-tensor or
 * per-head scale), NVFP4 or MXFP4; qk_dim and vo_dim multiples of 64 in [64, 512]; a
 * CSR page table; queries q as BF16 [batch][num_q_heads][qk_dim]; G = num_q_heads /
 * num_kv_heads in 1..16 (query head j reads KV head j / G). Output BF16
 * [batch][num_q_heads][vo_dim].
 *
 * 1. Element values. Each stored K or V element becomes a BF16 value e (the MMA input):
 *      BF16: the stored bits;  FP8: the code's value (exact in BF16);
 *      NVFP4: E2M1 value x E4M3 block scale x 2^-7 (exact in BF16: at most 6
 *             significant bits, magnitudes 2^-17..21), NaN when the scale is NaN. The
 *             2^-7 lets the sm_90 kernel form e with one BF16 multiply: its E2M1 decode
 *             yields 2^-126 x the code's value, and the scale, prescaled by 2^119 so
 *             that 448 x 2^119 still fits BF16, brings it to e. U = 2^7 undoes it below;
 *      MXFP4: fl32(E2M1 value x 2^(c-127)) then rounded to BF16 (exact when finite;
 *             6 x 2^127 overflows to Inf), NaN when c = 0xFF. The sm_90 kernel forms it
 *             with two BF16 multiplies (by 2^126, then by 2^(c-127), exact in BF16 for
 *             every c), each binary32's product rounded to BF16 on the H200.
 *    U = lowp_gpu_decode_unscale(format): 2^7 for NVFP4, 1 for the others. The
 *    decode-side global scales are not in e: K's goes into the score scale, V's
 *    multiplies the output (step 5).
 * 2. Scores. For a tile of 16 positions, each query row r and position j:
 *      acc = +0; for each k-step (16 dims): acc = MMA(q[16], e_k[16], acc)
 *    where MMA is lowp_mma_dot_add_bf16 with the H200's parameters (lowp/mma.h) and the
 *    16 dims of k-step ks of 64-dim chunk c are, in MMA k order kk = 0..15,
 *      BF16, FP8: dim(c, ks, kk) = 64c + 16 ((kk mod 8) / 2) + 4 ks + (kk mod 2)
 *                                  + 2 (kk >= 8)
 *      NVFP4, MXFP4: dim(c, ks, kk) = 64c + 16 ((kk mod 8) / 2) + 8 (ks / 2)
 *                                  + 2 (ks mod 2) + (kk >= 8) + 4 (kk mod 2)
 *    (the FP4 kernels decode codes 4 dims apart into one BF16 pair).
 *    s = acc * qk_scale, qk_scale = lowp_gpu_decode_score_scale(format, sm_scale, K global
 *    scale of the KV head); positions past the sequence end get s = -Inf (their K and V are
 *    never read; V enters the MMA as +0).
 * 3. Online softmax over the tiles of one split (work item), in position order:
 *      m_t = fmaxf over the 16 s (NaN ignored);  m' = fmaxf(m, m_t)
 *      alpha = 1 if m' = -Inf, else ex2(m - m');  p_j = 0 if m' = -Inf, else
 *      ex2(s_j - m')     (ex2 = the hardware's ex2.approx.ftz.f32, modelled exactly:
 *      lowp_exp2_hw, lowp/ex2_approx.h; lowp/exp2_sw.h until 2026-12-06)
 *      tile sum = (L0 + L1) + (L2 + L3), L_t = ((p_2t + p_2t+1) + p_2t+8) + p_2t+9
 *      l = l * alpha + tile sum;  P_j = bf16(p_j)
 *      o_d = MMA(P[16], e_v[16 positions][d], o_d * alpha)   (MMA k order = position)
 *    starting from m = -Inf, l = 0, o = 0.
 * 4. Splits. Sequence b's positions are cut into splits of chunk_tokens positions (a
 *    multiple of 16; lowp_gpu_decode_chunk_tokens picks it from the shapes alone, so the
 *    emulator and the kernel agree without a GPU). Each split gives (m, l, o).
 * 5. Merge, splits in order: M = fmaxf over m_c (from -Inf); L = 0, O = 0;
 *      w = ex2(m_c - M);  L = L + l_c * w;  O_d = O_d + o_c,d * w
 *    out_d = bf16((O_d / L) * v_scale), v_scale = the V global scale of the KV head (1 for
 *    BF16 and MX) * U.
 *
 * Error bound against exact attention: derived in gpu/check/conform.c's header, where
 * `lowp gpu conform` (and the emulator-only ctest gpu_decode_emulator) checks every finite
 * case against binary64 attention and reports the worst error / bound.
 */
#ifndef LOWP_ATTN_GPU_EMUL_H
#define LOWP_ATTN_GPU_EMUL_H

#include <stddef.h>
#include <stdint.h>

#include "lowp/bits.h"
#include "lowp/kvcache.h"
#include "lowp/mma.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LOWP_GPU_DECODE_TILE 16      /* positions per MMA tile */
#define LOWP_GPU_DECODE_KCHUNK 64    /* qk dims per K chunk */
#define LOWP_GPU_DECODE_VSLICE 64    /* vo dims per V slice */
#define LOWP_GPU_DECODE_MAX_GROUP 16 /* query heads per KV head (MMA rows) */

/* 0 if the kernel handles this cache and head count, else -1 with a reason. */
int lowp_gpu_decode_check(const lowp_kv_config *cfg, size_t num_q_heads, char *why,
                          size_t why_len);

/* Split length: max(ceil(W / 8192), min(floor(max_len / 64), 4096)), then at most
 * ceil(W / 1024), rounded up to a multiple of 16, at least 128, at most 16384 and at most
 * max_len rounded up to 16 (W = batch * num_kv_heads * max_len). That is about 8192 work
 * items (warps) when there is that much work, otherwise at most 64 splits per sequence so
 * that a split stays long enough to amortise the ring's start-up, but never fewer than
 * about 1024 work items while splits can stay >= 128. Chosen from a sweep on the H200
 * (tools/gpu_run.sh with `lowp gpu bench --chunk C`, C = 128 .. 16384, batch 1..64 x
 * context 4K..1M, BF16 / FP8 / NVFP4 / MXFP4; reports/gpu-decode-splits-h200.md): over the
 * 105 shapes this rule's split is within 1.040x of the best tested split on geometric mean,
 * 1.28x at worst; ceil(W / 1024) alone (128..4096) was 1.056x and up to 1.25x slower at
 * batch 16-64 x 4K-32K, ceil(W / 8192) alone 1.15x and 2.7x (batch 1 x 128K NVFP4, splits
 * of 128), the rule without the 1024-item cap 1.044x and 1.34x (batch 1 x 128K). */
size_t lowp_gpu_decode_chunk_tokens(size_t batch, size_t num_kv_heads, size_t max_len);

/* qk_scale of step 2: fl32(sm_scale * log2(e) * k_global), computed in binary64 and
 * rounded once, times lowp_gpu_decode_unscale(f) (exact short of overflow). */
float lowp_gpu_decode_score_scale(lowp_block_format f, double sm_scale, float k_global);

/* Step 1: the BF16 bits of an element (code as stored; scale byte ignored for BF16/FP8). */
uint16_t lowp_gpu_decode_element_bf16(lowp_block_format f, uint16_t code, uint8_t scale);

/* U of step 1: the power of two that qk_scale and v_scale carry to undo step 1's 2^-7
 * (128 for NVFP4, else 1). Multiplying by it is exact short of overflow. */
float lowp_gpu_decode_unscale(lowp_block_format f);

/* binary32 -> BF16, round to nearest even; every NaN -> 0x7FFF, the canonical NaN that
 * cvt.rn.bf16.f32 gives on the H200 whatever the sign (gpu/kernels/decode.cu's output).
 * BF16 -> binary32 is lowp_f32_from_bf16 (lowp/bits.h). */
uint16_t lowp_bf16_from_f32(float x);

typedef struct lowp_gpu_decode_args {
    const lowp_kvcache *cache;
    const lowp_kv_view *view;
    const lowp_kv_page_table *pt;
    size_t num_q_heads;
    double sm_scale;         /* 0: 1/sqrt(qk_dim) */
    const uint16_t *q;       /* BF16 [batch][num_q_heads][qk_dim] */
    size_t chunk_tokens;     /* 0: lowp_gpu_decode_chunk_tokens */
    const lowp_mma_params *mma; /* NULL: lowp_mma_sm90_bf16 */
    int threads;             /* OpenMP threads, 0 = default */
} lowp_gpu_decode_args;

/* The emulator: out BF16 [batch][num_q_heads][vo_dim]. Checks like lowp_attn_paged_decode
 * (view, page table, empty sequences) plus lowp_gpu_decode_check. 0 or -1 with a reason. */
int lowp_gpu_decode_emulate(const lowp_gpu_decode_args *a, uint16_t *out, char *why,
                            size_t why_len);

#ifdef __cplusplus
}
#endif
#endif /* LOWP_ATTN_GPU_EMUL_H */
