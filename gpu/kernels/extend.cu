/* Causal extend / prefill attention over an FP8 E4M3 workspace (lowp/gpu_extend.h). The
 * arithmetic, step by step, is lowp/attn_gpu_extend.h's definition; the comments below
 * name the step each piece is. Compiled with --fmad=false (gpu/extend.cmake): every a*b+c
 * here is two roundings, as in the emulator. The exponential is the hardware's
 * ex2.approx.ftz.f32 (MUFU.EX2, one instruction), modelled bit for bit in the emulator
 * (lowp_exp2_hw, lowp/ex2_approx.h); until 2026-12-06 it was lowp/exp2_sw.h (~16 FMA-pipe
 * instructions a score).
 *
 * Two kernels compute the same bits. extend_kernel_v2 (the default; its own comment, below
 * extend_kernel_v1, gives the layout and the argument that each output is v1's operation
 * sequence) converts each K/V tile to BF16 once a CTA and loads fragments by ldmatrix;
 * extend_kernel_v1, described here, is kept for A/B timing (LOWP_GPU_EXTEND_KERNEL=v1).
 * v1: one CTA of 4 warps per (sequence b, KV head h, 64 packed query rows); warp w owns rows
 * 16w .. 16w + 15 of the CTA (step 2). Lane = 4g + t.
 *   QK^T  mma.m16n8k16, A = Q (rows g, g+8 of the warp), B = K^T of 8 positions (n-tile
 *         nt: positions 8nt .. 8nt + 7 of the block). In k-step ks lane t feeds dims
 *         16ks + 4t .. 4t + 3 (one LDS.32 of FP8 K, one LDS.64 of BF16 Q) as the k slots
 *         2t, 2t+1, 2t+8, 2t+9: the same 16 dims per k-step as the definition, whose MMA
 *         model does not depend on their order within a step.
 *   P V   mma.m16n8k16, A = P (the QK accumulators rounded to BF16, FlashAttention-2's
 *         register reuse: n-tiles 2j, 2j+1 are A's k 0..15 of sub-block j), B = V of the
 *         16 positions; lane (g, t) reads V rows 16j + 2t, +1, +8, +9 at dims 64c + 8g ..
 *         + 7 (LDS.64 each) and pairs them by byte permutes, so column g of n-tile 8c + i
 *         is dim 64c + 8g + i (a relabelling of outputs: each output's MMA is unchanged).
 * Shared memory: Q [64][2 qk_dim + 32 bytes], then two stages of K [64][qk_dim + 16] and
 * V [64][vo_dim + 16] FP8 bytes; the padding makes every fragment load conflict-free.
 * Blocks past kv_len are zero-filled by cp.async (src-size 0), never read (step 3).
 *
 * What to expect (d = 128). Shared memory 55,296 bytes a CTA (Q 18,432 + two stages of
 * K and V, 36,864): 4 CTAs an SM by shared memory; ptxas gives 158 registers a thread
 * (224 for vo_dim 256, no spills), so 3 CTAs (12 warps) an SM. Per warp and 64-position
 * block: 128 mma.sync m16n8k16 (64 for Q.K, 64 for P.V: 524,288 FLOP) and about 2,000
 * other instructions (1,024 scores: 32 exp2_sw a lane at about 16 instructions each; the
 * FP8 -> BF16 conversions of K and V, which each of the 4 warps repeats; byte permutes of
 * V; the rescales). Issue, not the tensor cores, bounds it: at 4 instructions a clock an
 * SM, about 525 clocks a warp-block, i.e. at most ~260 TFLOP/s on 132 SMs at 1.98 GHz,
 * realistically 150-250 (causal imbalance, latency at 12 warps an SM). Measured on the
 * H200: 76-105 TFLOP/s; the SASS (cuobjdump -sass, d = 128) has ~3,500 instructions a warp
 * and block, 26 non-MMA instructions per mma.sync.
 * v2 (d = 128, 8 warps): ~1,720 a warp and block, 12.5 per mma.sync (128 HMMA, 72 LDSM,
 * ~610 of exp2_sw's 34 calls a lane, ~360 of conversion and cp.async issue a warp), 4
 * warps: ~2,075 (15.2). The exp2_sw was then the largest part; it is now one MUFU.EX2 a
 * score (issue #22 item 3). Measured by lowp gpu bench --kernel extend (tools/gpu_run.sh
 * step extend).
 */
#include <atomic>
#include <mutex>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "lowp/attn_gpu_emul.h"
#include "lowp/attn_gpu_extend.h"
#include "lowp/ex2_approx.h"
#include "lowp/format.h"
#include "lowp/gpu_extend.h"
#include "lowp/kvcache.h"
#include "lowp/why.h"
#include "decode_bf16.cuh"
#include "decode_e2m1.h"
#include "div32.h"

namespace {

constexpr int KB = LOWP_GPU_EXTEND_KBLOCK;
constexpr int NWARP = LOWP_GPU_EXTEND_CTA_WARPS;
constexpr int CROWS = NWARP * LOWP_GPU_EXTEND_WARP_ROWS; /* 64 packed rows a CTA */

struct Params {
    const uint16_t *q;
    const uint8_t *k, *v;
    uint16_t *out;
    const int32_t *qo, *kv, *pre;
    int HK, G, NQ, Dq, Dv;
    float qks;
    int q_rs, k_rs, v_rs, stage_bytes, off_stage, off_v;
    int q2_rs, kb_rs, vb_rs, off_kb, off_vb; /* v2 only: BF16 row strides and tile offsets */
};

__host__ __device__ constexpr int q_row_stride(int dq) { return 2 * dq + 32; }
__host__ __device__ constexpr int kv_row_stride(int d) { return d + 16; }

__device__ __forceinline__ void cp16(uint32_t dst, const void *src, int bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src),
                 "r"(bytes));
}

/* Block kb's K and V rows into stage st (positions >= kv_len: zeros). */
__device__ __forceinline__ void issue_block(const Params &p, uint8_t *sm, int st, int kb,
                                            size_t row0, int kvlen, int h)
{
    uint8_t *stage = sm + p.off_stage + st * p.stage_bytes;
    const uint32_t sb = (uint32_t)__cvta_generic_to_shared(stage);
    const int kc = p.Dq / 16, vc = p.Dv / 16;
    for (int idx = threadIdx.x; idx < KB * (kc + vc); idx += blockDim.x) {
        const bool isk = idx < KB * kc;
        const int id2 = isk ? idx : idx - KB * kc, cpr = isk ? kc : vc;
        const int j = id2 / cpr, c = id2 % cpr, pos = kb * KB + j;
        const bool valid = pos < kvlen;
        const uint8_t *base = isk ? p.k : p.v;
        const int D = isk ? p.Dq : p.Dv;
        const uint8_t *src =
            valid ? base + ((row0 + (size_t)pos) * (size_t)p.HK + (size_t)h) * (size_t)D + 16 * c
                  : base;
        const uint32_t dst = sb + (isk ? j * p.k_rs : p.off_v + j * p.v_rs) + 16 * c;
        cp16(dst, src, valid ? 16 : 0);
    }
    asm volatile("cp.async.commit_group;");
}

/* Step 5's per-row block update for one of the lane's two rows: s[8][2] the row's 16
 * scores (already masked), m and l its running max and lane sum; returns alpha. */
template <bool SEL = false>
__device__ __forceinline__ float softmax_row(float (&s)[8][2], float &m, float &l)
{
    float mb = -INFINITY;
#pragma unroll
    for (int n = 0; n < 8; n++)
        mb = fmaxf(mb, fmaxf(s[n][0], s[n][1]));
    mb = fmaxf(mb, __shfl_xor_sync(0xffffffffu, mb, 1));
    mb = fmaxf(mb, __shfl_xor_sync(0xffffffffu, mb, 2));
    const float mn = fmaxf(m, mb);
    const bool none = mn == -INFINITY;
    /* SEL (v2): the argument is selected instead of the result, so that no branch is
     * made: ex2.approx(+0) = 1 and ex2.approx(-Inf) = +0 exactly, the values the branch
     * form gives when none; otherwise the same call. */
    const float alpha = SEL ? lowp_exp2_hw(none ? 0.0f : m - mn)
                            : (none ? 1.0f : lowp_exp2_hw(m - mn));
    float L = 0.0f;
#pragma unroll
    for (int n = 0; n < 8; n++) {
        if (SEL) {
            s[n][0] = lowp_exp2_hw(none ? -INFINITY : s[n][0] - mn);
            s[n][1] = lowp_exp2_hw(none ? -INFINITY : s[n][1] - mn);
        } else {
            s[n][0] = none ? 0.0f : lowp_exp2_hw(s[n][0] - mn);
            s[n][1] = none ? 0.0f : lowp_exp2_hw(s[n][1] - mn);
        }
        L = L + s[n][0];
        L = L + s[n][1];
    }
    l = l * alpha + L;
    m = mn;
    return alpha;
}

/* What a thread of a CTA of CR packed rows works on (steps 2, 3): sequence b, KV head h,
 * the CTA's first row Rc (the last query tiles, the most key blocks, first, so that the
 * short ones fill the tail of the grid; the CTA grouping changes no bit, step 2), the
 * blocks the CTA streams (nb_cta: those its last row needs) and those of the thread's warp
 * (nb_w), the warp's rows Ra = R0 + g, Rb = Ra + 8 and the last positions they see. */
struct Tile {
    int b, h, q0, P, kvlen, nrows, Rc, warp, lane, g, t, nb_cta, R0, nb_w, Ra, Rb, seeA, seeB;
    size_t row0;
};

__device__ __forceinline__ Tile tile_of(const Params &p, int CR)
{
    Tile T;
    T.b = blockIdx.z;
    T.h = blockIdx.y;
    T.q0 = p.qo[T.b];
    const int ql = p.qo[T.b + 1] - T.q0;
    T.P = p.pre ? p.pre[T.b] : 0;
    T.kvlen = T.P + ql;
    T.nrows = ql * p.G;
    T.Rc = (gridDim.x - 1 - blockIdx.x) * CR;
    T.row0 = (size_t)p.kv[T.b];
    T.warp = threadIdx.x >> 5;
    T.lane = threadIdx.x & 31;
    T.g = T.lane >> 2;
    T.t = T.lane & 3;
    T.nb_cta = (T.P + min(T.Rc + CR - 1, T.nrows - 1) / p.G) / KB + 1;
    T.R0 = T.Rc + T.warp * 16;
    T.nb_w = T.R0 < T.nrows ? (T.P + min(T.R0 + 15, T.nrows - 1) / p.G) / KB + 1 : 0;
    T.Ra = T.R0 + T.g;
    T.Rb = T.Ra + 8;
    T.seeA = T.Ra < T.nrows ? T.P + T.Ra / p.G : -1;
    T.seeB = T.Rb < T.nrows ? T.P + T.Rb / p.G : -1;
    return T;
}

/* Step 4's scale and step 3's mask of block kb: the lane's scores of rows g (sA) and
 * g + 8 (sB), positions 8n + 2t + e of the block. */
__device__ __forceinline__ void mask_scores(const float (&S)[8][4], float (&sA)[8][2],
                                            float (&sB)[8][2], const Tile &T, int kb, float qks)
{
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int pos = kb * KB + 8 * n + 2 * T.t + e;
            sA[n][e] = pos <= T.seeA ? S[n][e] * qks : -INFINITY;
            sB[n][e] = pos <= T.seeB ? S[n][2 + e] * qks : -INFINITY;
        }
}

/* Step 5's o = o * alpha of the lane's accumulators (rows g: elements 0, 1; g + 8: 2, 3). */
template <int DV>
__device__ __forceinline__ void rescale_o(float (&o)[DV / 8][4], float alA, float alB)
{
#pragma unroll
    for (int n = 0; n < DV / 8; n++) {
        o[n][0] = o[n][0] * alA;
        o[n][1] = o[n][1] * alA;
        o[n][2] = o[n][2] * alB;
        o[n][3] = o[n][3] * alB;
    }
}

/* P of sub-block j (positions 16j .. 16j + 15) as the A fragment of P.V: the scores' C
 * layout is A's (FlashAttention-2's register reuse), n-tiles 2j, 2j + 1 = k 0-7, 8-15. */
__device__ __forceinline__ uint4 p_frag(const float (&sA)[8][2], const float (&sB)[8][2], int j)
{
    return make_uint4(pack_bf16(sA[2 * j][0], sA[2 * j][1]), pack_bf16(sB[2 * j][0], sB[2 * j][1]),
                      pack_bf16(sA[2 * j + 1][0], sA[2 * j + 1][1]),
                      pack_bf16(sB[2 * j + 1][0], sB[2 * j + 1][1]));
}

/* Step 6's output row of packed row R, and out_d = bf16(o_d / l) (one division, RN). */
__device__ __forceinline__ uint16_t *out_row(const Params &p, const Tile &T, int R)
{
    return p.out + ((size_t)(T.q0 + R / p.G) * p.NQ + (size_t)(T.h * p.G + R % p.G)) *
                       (size_t)p.Dv;
}

__device__ __forceinline__ uint16_t out_bf16(float o, float l)
{
    return (uint16_t)(pack_bf16(o / l, 0.0f) & 0xFFFFu);
}

/* Step 6's l = (l_0 + l_1) + (l_2 + l_3) over the quad, for both rows. */
__device__ __forceinline__ void quad_sums(float &lA, float &lB)
{
    lA = lA + __shfl_xor_sync(0xffffffffu, lA, 1);
    lA = lA + __shfl_xor_sync(0xffffffffu, lA, 2);
    lB = lB + __shfl_xor_sync(0xffffffffu, lB, 1);
    lB = lB + __shfl_xor_sync(0xffffffffu, lB, 2);
}

template <int DV>
__global__ void __launch_bounds__(128) extend_kernel_v1(Params p)
{
    extern __shared__ __align__(16) uint8_t sm[];
    const Tile T = tile_of(p, CROWS);
    if (T.Rc >= T.nrows)
        return;
    const int h = T.h, q0 = T.q0, kvlen = T.kvlen, nrows = T.nrows, Rc = T.Rc, warp = T.warp;
    const int g = T.g, t = T.t, nb_cta = T.nb_cta, nb_w = T.nb_w, Ra = T.Ra, Rb = T.Rb;
    const size_t row0 = T.row0;

    issue_block(p, sm, 0, 0, row0, kvlen, h);
    /* step 2: the CTA's 64 packed rows of Q, zeros past the chunk */
    const int qch = p.Dq / 8;
    for (int idx = threadIdx.x; idx < CROWS * qch; idx += blockDim.x) {
        const int r = idx / qch, c = idx % qch, R = Rc + r;
        uint4 val = make_uint4(0u, 0u, 0u, 0u);
        if (R < nrows) {
            const int i = R / p.G, gg = R % p.G;
            val = *reinterpret_cast<const uint4 *>(
                p.q + ((size_t)(q0 + i) * p.NQ + (size_t)(h * p.G + gg)) * p.Dq + 8 * c);
        }
        *reinterpret_cast<uint4 *>(sm + r * p.q_rs + 16 * c) = val;
    }

    float o[DV / 8][4];
#pragma unroll
    for (int n = 0; n < DV / 8; n++)
        o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    float mA = -INFINITY, mB = -INFINITY, lA = 0.0f, lB = 0.0f;
    const uint8_t *qa_row = sm + (warp * 16 + g) * p.q_rs + 8 * t;
    const uint8_t *qb_row = qa_row + 8 * p.q_rs;

    for (int kb = 0; kb < nb_cta; kb++) {
        if (kb + 1 < nb_cta) {
            issue_block(p, sm, (kb + 1) & 1, kb + 1, row0, kvlen, h);
            asm volatile("cp.async.wait_group 1;" ::: "memory");
        } else {
            asm volatile("cp.async.wait_group 0;" ::: "memory");
        }
        __syncthreads();
        if (kb < nb_w) {
            const uint8_t *ks = sm + p.off_stage + (kb & 1) * p.stage_bytes;
            const uint8_t *vs = ks + p.off_v;
            /* step 4 */
            float S[8][4];
#pragma unroll
            for (int n = 0; n < 8; n++)
                S[n][0] = S[n][1] = S[n][2] = S[n][3] = 0.0f;
            const uint8_t *krow = ks + g * p.k_rs + 4 * t;
            for (int st = 0; st < p.Dq / 16; st++) {
                const uint2 qa = *reinterpret_cast<const uint2 *>(qa_row + 32 * st);
                const uint2 qb = *reinterpret_cast<const uint2 *>(qb_row + 32 * st);
                const uint4 a = make_uint4(qa.x, qb.x, qa.y, qb.y);
#pragma unroll
                for (int n = 0; n < 8; n++) {
                    const uint32_t kw =
                        *reinterpret_cast<const uint32_t *>(krow + 8 * n * p.k_rs + 16 * st);
                    mma_bf16(S[n], a, fp8x2_bf16(kw, 0), fp8x2_bf16(kw >> 16, 0));
                }
            }
            float sA[8][2], sB[8][2];
            mask_scores(S, sA, sB, T, kb, p.qks);
            /* step 5 */
            const float alA = softmax_row(sA, mA, lA), alB = softmax_row(sB, mB, lB);
            rescale_o<DV>(o, alA, alB);
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const uint4 pa = p_frag(sA, sB, j);
                const uint8_t *v0 = vs + (16 * j + 2 * t) * p.v_rs + 8 * g;
#pragma unroll
                for (int c = 0; c < DV / 64; c++) {
                    uint32_t bw[2][8];
#pragma unroll
                    for (int half = 0; half < 2; half++) {
                        const uint8_t *r = v0 + 8 * half * p.v_rs + 64 * c;
                        const uint2 x = *reinterpret_cast<const uint2 *>(r);
                        const uint2 y = *reinterpret_cast<const uint2 *>(r + p.v_rs);
                        const uint32_t w[4] = {lowp_dec_prmt(x.x, y.x, 0x5140u),
                                               lowp_dec_prmt(x.x, y.x, 0x7362u),
                                               lowp_dec_prmt(x.y, y.y, 0x5140u),
                                               lowp_dec_prmt(x.y, y.y, 0x7362u)};
#pragma unroll
                        for (int i = 0; i < 4; i++) {
                            bw[half][2 * i] = fp8x2_bf16(w[i], 0);
                            bw[half][2 * i + 1] = fp8x2_bf16(w[i] >> 16, 0);
                        }
                    }
#pragma unroll
                    for (int i = 0; i < 8; i++)
                        mma_bf16(o[8 * c + i], pa, bw[0][i], bw[1][i]);
                }
            }
        }
        __syncthreads(); /* the stage is refilled by the next iteration's issue */
    }
    /* step 6 */
    quad_sums(lA, lB);
#pragma unroll
    for (int e = 0; e < 4; e++) {
        const int R = e < 2 ? Ra : Rb;
        if (R >= nrows)
            continue;
        const float l = e < 2 ? lA : lB;
        uint16_t *dst = out_row(p, T, R);
#pragma unroll
        for (int c = 0; c < DV / 64; c++)
#pragma unroll
            for (int i = 0; i < 8; i++)
                dst[64 * c + 8 * (2 * t + (e & 1)) + i] = out_bf16(o[8 * c + i][e], l);
    }
}

/* ---- v2: K/V converted to BF16 once a CTA, fragments by ldmatrix ---------------------
 * The same definition (lowp/attn_gpu_extend.h), the same per-output operation sequence as
 * extend_kernel_v1 above (kept, selected by LOWP_GPU_EXTEND_KERNEL=v1), computed with
 * fewer instructions. A CTA of NW warps owns packed rows Rc .. Rc + 16 NW - 1; warp w owns
 * rows Rc + 16w .. + 15, exactly a work item of the definition's step 2 (16 rows, its own
 * block count nb_w, in order): the CTA grouping, 4 or 8 warps, enters no bit.
 * Per 64-position block kb (one cp.async FP8 stage, one BF16 tile):
 *   B1  every thread's cp.async of block kb landed (wait_group 0 + __syncthreads); every
 *       warp finished block kb - 1, so the BF16 tile is free;
 *   all threads convert the stage to BF16 (fp8x2_bf16, the conversion v1 runs per warp:
 *       the same bits, once a CTA instead of once a warp and fragment);
 *   B2  the BF16 tile is visible and the FP8 stage free: block kb + 1 is issued into it,
 *       landing during the compute of block kb;
 *   warps with kb < nb_w compute (warps past their last block only convert).
 * Shared memory: Q BF16 [16 NW][2 qk_dim + 16 bytes], K BF16 [64][2 qk_dim + 16], V BF16
 * [64][2 vo_dim + 16], the FP8 stage K [64][qk_dim + 16], V [64][vo_dim + 16]. A BF16 row
 * stride is 16 bytes past a multiple of 128, so the 8 row addresses of an ldmatrix phase
 * fall in 8 distinct 16-byte bank groups: conflict-free.
 * Why each output is the same operation sequence as v1's (and so the emulator's):
 *   Q.K  The BF16 Q and K tiles hold, in each 16-dim k-step ks, slot 2t, 2t+1 = dims
 *        16ks + 4t, 4t+1 and slot 8 + 2t, 9 + 2t = dims 16ks + 4t + 2, 4t + 3 (t = 0..3):
 *        the permutation v1 feeds (its LDS.64 of Q and LDS.32 of K at dims 4t..4t+3). The
 *        standard ldmatrix.x4 layouts then put in every lane the very registers v1 builds:
 *        A (Q) rows g / g+8, slots 2t..2t+1 / 2t+8..2t+9; B (K, non-transposed, K rows =
 *        positions) position 8n + g, the same slots. So each mma.sync has v1's operands,
 *        k-steps ks = 0 .. qk_dim/16 - 1 ascending into the same S[n] accumulators.
 *   Mask, softmax, P   The scores' C layout is v1's (row g / g+8, positions 8n + 2t, +1),
 *        and the code after the MMAs is v1's, call for call: the same masks, softmax_row
 *        (ex2, max/sum order, shuffles), the same BF16 packing of P into A.
 *   P.V  B = V of sub-block j by ldmatrix.x4.trans from V rows = positions: lane (g, t)
 *        gets positions 16j + 2t, +1 (b0) and 16j + 8 + 2t, +9 (b1) of dim 8n + g, which
 *        are the positions of v1's B registers (rows 16j + 2t, +1, +8, +9); only the dim
 *        a column stands for differs (v1: column g of n-tile 8c + i is dim 64c + 8g + i;
 *        here dim 8n + g), a relabelling of outputs: each output dim gets the same A, the
 *        same B column values, the same o * alpha then j = 0..3 ascending.
 *   Out  o / l (the same l, the same four shuffles), rounded as v1 (pack_bf16(x, 0)'s low
 *        half): the same bits at dim 8n + 2t + e.
 *   Positions >= kv_len are zero-filled by cp.async (src-size 0) and converted to +0, as in
 *   v1; NaN rows of the workspace past kv_len are never read. */
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

__device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

/* Q: the CTA's packed rows to BF16 shared memory in the k-slot order above (zeros past
 * the chunk). Words of 16 dims: w_i = dims 2i, 2i+1; slot words t = w_2t, 4 + t = w_2t+1. */
template <int NW>
__device__ __forceinline__ void v2_stage_q(const Params &p, uint8_t *sm, int Rc, int nrows,
                                           int q0, int h)
{
    const int qch = p.Dq / 16;
    for (int idx = threadIdx.x; idx < 16 * NW * qch; idx += blockDim.x) {
        const int r = idx / qch, c = idx % qch, R = Rc + r;
        uint4 lo = make_uint4(0u, 0u, 0u, 0u), hi = lo;
        if (R < nrows) {
            const uint4 *src = reinterpret_cast<const uint4 *>(
                p.q + ((size_t)(q0 + R / p.G) * p.NQ + (size_t)(h * p.G + R % p.G)) * p.Dq +
                16 * c);
            const uint4 x = src[0], y = src[1];
            lo = make_uint4(x.x, x.z, y.x, y.z);
            hi = make_uint4(x.y, x.w, y.y, y.w);
        }
        uint4 *dst = reinterpret_cast<uint4 *>(sm + r * p.q2_rs + 32 * c);
        dst[0] = lo;
        dst[1] = hi;
    }
}

/* A thread's share of the 64 x cpr 16-byte chunks of a K or V tile (cpr = dim / 16):
 * chunks idx = threadIdx.x + i blockDim.x, i = 0, 1, ..., as row j = idx / cpr, chunk
 * c = idx % cpr, stepped without a division (idx + NT = (j + dj) cpr + c + dc, c + dc <
 * 2 cpr). The divisions are made once a kernel. */
struct Walk {
    int j0, c0, dj, dc, cpr;
};

__device__ __forceinline__ Walk walk_of(int cpr)
{
    const int nt = (int)blockDim.x;
    return Walk{(int)threadIdx.x / cpr, (int)threadIdx.x % cpr, nt / cpr, nt % cpr, cpr};
}

#define V2_WALK(w, j, c)                                                                  \
    for (int j = (w).j0, c = (w).c0; j < KB;                                            \
         j += (w).dj + ((c + (w).dc) >= (w).cpr), c += (w).dc - ((c + (w).dc) >= (w).cpr) * (w).cpr)

/* Block kb's K and V rows into the one FP8 stage (positions >= kv_len: zeros, the source
 * then never read); kg, vg: position 0 of the sequence's region at KV head h. */
__device__ __forceinline__ void v2_issue(const Params &p, uint8_t *sm, int kb, int kvlen,
                                         const uint8_t *kg, const uint8_t *vg, const Walk &wk,
                                         const Walk &wv)
{
    const uint32_t sb = (uint32_t)__cvta_generic_to_shared(sm + p.off_stage);
    const size_t kstep = (size_t)p.HK * (size_t)p.Dq, vstep = (size_t)p.HK * (size_t)p.Dv;
    V2_WALK(wk, j, c)
    {
        const int pos = kb * KB + j;
        const bool valid = pos < kvlen;
        cp16(sb + j * p.k_rs + 16 * c, valid ? kg + (size_t)pos * kstep + 16 * c : p.k,
             valid ? 16 : 0);
    }
    V2_WALK(wv, j, c)
    {
        const int pos = kb * KB + j;
        const bool valid = pos < kvlen;
        cp16(sb + p.off_v + j * p.v_rs + 16 * c, valid ? vg + (size_t)pos * vstep + 16 * c : p.v,
             valid ? 16 : 0);
    }
    asm volatile("cp.async.commit_group;");
}

/* The FP8 stage to the BF16 tiles: K in the k-slot order (per 4 dims 4t..4t+3: the pair
 * 4t, 4t+1 to slot word t, the pair 4t+2, 4t+3 to slot word 4 + t), V in dim order. */
__device__ __forceinline__ void v2_convert(const Params &p, uint8_t *sm, const Walk &wk,
                                           const Walk &wv)
{
    const uint8_t *st = sm + p.off_stage;
    V2_WALK(wk, j, c)
    {
        const uint4 f = *reinterpret_cast<const uint4 *>(st + j * p.k_rs + 16 * c);
        uint4 *dst = reinterpret_cast<uint4 *>(sm + p.off_kb + j * p.kb_rs + 32 * c);
        dst[0] = make_uint4(fp8x2_bf16(f.x, 0), fp8x2_bf16(f.y, 0), fp8x2_bf16(f.z, 0),
                            fp8x2_bf16(f.w, 0));
        dst[1] = make_uint4(fp8x2_bf16(f.x >> 16, 0), fp8x2_bf16(f.y >> 16, 0),
                            fp8x2_bf16(f.z >> 16, 0), fp8x2_bf16(f.w >> 16, 0));
    }
    V2_WALK(wv, j, c)
    {
        const uint4 f = *reinterpret_cast<const uint4 *>(st + p.off_v + j * p.v_rs + 16 * c);
        uint4 *dst = reinterpret_cast<uint4 *>(sm + p.off_vb + j * p.vb_rs + 32 * c);
        dst[0] = make_uint4(fp8x2_bf16(f.x, 0), fp8x2_bf16(f.x >> 16, 0), fp8x2_bf16(f.y, 0),
                            fp8x2_bf16(f.y >> 16, 0));
        dst[1] = make_uint4(fp8x2_bf16(f.z, 0), fp8x2_bf16(f.z >> 16, 0), fp8x2_bf16(f.w, 0),
                            fp8x2_bf16(f.w >> 16, 0));
    }
}

/* Minimum CTAs an SM (__launch_bounds__), i.e. the register cap 65536 / (32 NW min):
 * what shared memory allows anyway at qk_dim = vo_dim = DV (smem_v2), so that the cap
 * costs no spill it need not: 8 warps: DV 64, 128: 2 (cap 128), 192, 256: 1; 4 warps:
 * DV 64: 4 (128), 128: 3 (170; 70,656 bytes a CTA), 192, 256: 2 (255). */
template <int DV, int NW> struct v2_cfg {
    static constexpr int min_ctas =
        NW == 8 ? (DV <= 128 ? 2 : 1) : (DV == 64 ? 4 : DV == 128 ? 3 : 2);
};

template <int DV, int NW>
__global__ void __launch_bounds__(32 * NW, (v2_cfg<DV, NW>::min_ctas))
    extend_kernel_v2(Params p)
{
    extern __shared__ __align__(16) uint8_t sm[];
    const Tile T = tile_of(p, 16 * NW);
    if (T.Rc >= T.nrows)
        return;
    const int h = T.h, q0 = T.q0, kvlen = T.kvlen, nrows = T.nrows, warp = T.warp;
    const int lane = T.lane, t = T.t, nb_cta = T.nb_cta, nb_w = T.nb_w;
    const size_t row0 = T.row0;

    const Walk wk = walk_of(p.Dq / 16), wv = walk_of(p.Dv / 16);
    const uint8_t *kg = p.k + (row0 * (size_t)p.HK + (size_t)h) * (size_t)p.Dq;
    const uint8_t *vg = p.v + (row0 * (size_t)p.HK + (size_t)h) * (size_t)p.Dv;
    v2_issue(p, sm, 0, kvlen, kg, vg, wk, wv);
    v2_stage_q<NW>(p, sm, T.Rc, nrows, q0, h);

    float o[DV / 8][4];
#pragma unroll
    for (int n = 0; n < DV / 8; n++)
        o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    float mA = -INFINITY, mB = -INFINITY, lA = 0.0f, lB = 0.0f;
    /* ldmatrix row addresses: lane l feeds row l & 7 of matrix l >> 3 */
    const int mi = lane >> 3, mr = lane & 7;
    const uint32_t sb = (uint32_t)__cvta_generic_to_shared(sm);
    /* Q: matrices (rows 0-7 | 8-15) x (slots 0-7 | 8-15) = a0, a1, a2, a3 */
    const uint32_t qaddr = sb + (warp * 16 + mr + 8 * (mi & 1)) * p.q2_rs + 16 * (mi >> 1);
    /* K: matrices (n-tile 2np, slots 0-7 | 8-15), (n-tile 2np + 1, ...) = b0, b1 of each */
    const uint32_t kaddr = sb + p.off_kb + (mr + 8 * (mi >> 1)) * p.kb_rs + 16 * (mi & 1);
    /* V^T: matrices (positions 0-7 | 8-15) x (dims 16np .. +7 | +8 .. +15) = b0, b1 of
     * n-tiles 2np, 2np + 1 */
    const uint32_t vaddr = sb + p.off_vb + (mr + 8 * (mi & 1)) * p.vb_rs + 16 * (mi >> 1);

    for (int kb = 0; kb < nb_cta; kb++) {
        asm volatile("cp.async.wait_group 0;" ::: "memory");
        __syncthreads(); /* B1 */
        v2_convert(p, sm, wk, wv);
        __syncthreads(); /* B2 */
        if (kb + 1 < nb_cta)
            v2_issue(p, sm, kb + 1, kvlen, kg, vg, wk, wv);
        if (kb >= nb_w)
            continue;
        /* step 4 */
        float S[8][4];
#pragma unroll
        for (int n = 0; n < 8; n++)
            S[n][0] = S[n][1] = S[n][2] = S[n][3] = 0.0f;
#pragma unroll 1
        for (int ks = 0; ks < p.Dq / 16; ks++) {
            uint32_t qa[4];
            ldsm_x4(qa, qaddr + 32 * ks);
            const uint4 a = make_uint4(qa[0], qa[1], qa[2], qa[3]);
#pragma unroll
            for (int np = 0; np < 4; np++) {
                uint32_t kf[4];
                ldsm_x4(kf, kaddr + 16 * np * p.kb_rs + 32 * ks);
                mma_bf16(S[2 * np], a, kf[0], kf[1]);
                mma_bf16(S[2 * np + 1], a, kf[2], kf[3]);
            }
        }
        float sA[8][2], sB[8][2];
        mask_scores(S, sA, sB, T, kb, p.qks);
        /* step 5 */
        const float alA = softmax_row<true>(sA, mA, lA), alB = softmax_row<true>(sB, mB, lB);
        rescale_o<DV>(o, alA, alB);
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const uint4 pa = p_frag(sA, sB, j);
#pragma unroll
            for (int np = 0; np < DV / 16; np++) {
                uint32_t vf[4];
                ldsm_x4_t(vf, vaddr + 16 * j * p.vb_rs + 32 * np);
                mma_bf16(o[2 * np], pa, vf[0], vf[1]);
                mma_bf16(o[2 * np + 1], pa, vf[2], vf[3]);
            }
        }
    }
    /* step 6 */
    quad_sums(lA, lB);
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int R = r ? T.Rb : T.Ra;
        if (R >= nrows)
            continue;
        const float l = r ? lB : lA;
        uint16_t *dst = out_row(p, T, R);
#pragma unroll
        for (int n = 0; n < DV / 8; n++)
#pragma unroll
            for (int e = 0; e < 2; e++)
                dst[8 * n + 2 * t + e] = out_bf16(o[n][2 * r + e], l);
    }
}

/* ---- The workspace fill (lowp/gpu_extend.h, lowp_gpu_extend_workspace) ----------------
 * Thread x of a CTA owns block x of a workspace row: blockDim (nb, NY), nb = (Dq + Dv) / 16
 * blocks a (position, head) row (K blocks first); an iteration covers WS_U x NY rows, every
 * thread loading its WS_U blocks before it stores one; grid-stride over the sequence's rows
 * (position t, head h). The device computes torch's E4M3 cast with cvt.rn.satfinite
 * (ws_cast2) and the E2M1 values by bit placement (lowp_dec_e2m1x8_sub); the host emulator
 * runs the same ws_load / ws_bytes / ws_dst with lowp's codec table for the cast, so the
 * kernel's indexing and arithmetic run on the CPU and the cast alone is proven on the
 * device (lowp_gpu_extend_ws_cast, all 65,536 BF16 codes, gpu/check/extend_check.c). */
/* The fill's row, page and scale indexing divides by multiply and shift (div32.h). */
struct WsParams {
    const uint8_t *kc, *vc, *ks, *vs; /* the NVFP4 cache's codes and block scales */
    const float *kg, *vg;             /* decode-side global scales, n_global each */
    const int32_t *pt_indptr, *pt_indices, *qo, *kv, *pre;
    const uint16_t *kch, *vch;        /* the chunk, BF16 */
    uint8_t *kws, *vws;
    const uint8_t *cast;              /* host only, [65536]: BF16 bits -> torch E4M3 code */
    const float *e4m3;                /* [256]: binary32 values of the codes */
    int H, Dq, Dv, PS, hnd, k_il, v_il, per_head;
    lowp_div32 dH, dPS, dkq4, dvq4; /* by H, PS and the interleave's S / 4 of K and of V */
    /* The staged prefix (ws_staged_plan; used when LOWP_GPU_WS_FILL=staged and staged = 1):
     * a unit is TT positions x HG heads (group g of NG), R = TT HG rows; dNG, dHG divide by
     * NG and HG, dNB by nb = (Dq + Dv) / 16 blocks a row, dCH by the 16-byte code chunks
     * plus 4-byte scale chunks a row, (Dq + Dv) / 32 + (Dq + Dv) / 64 (lin: a position's,
     * H times that). */
    int staged, TT, HG, NG, stage_bytes;
    int lin; /* NHD and HG = H: a position's heads are one run each (ws_chunk) */
    lowp_div32 dNG, dHG, dNB, dCH;
};

/* Row (page, slot, head) -> row index of codes and of (linear) scales. */
__host__ __device__ __forceinline__ size_t ws_row(const WsParams &p, size_t page, int slot, int h)
{
    return p.hnd ? (page * p.H + h) * p.PS + slot : (page * p.PS + slot) * p.H + h;
}

/* Offset of block scale s of (page, slot, head) among S a row: lowp/kvcache.h's formula,
 * the 4-token interleave when il. */
__host__ __device__ __forceinline__ size_t ws_scale_off(const WsParams &p, size_t page, int slot,
                                                        int h, int s, int S, int il,
                                                        const lowp_div32 &q4)
{
    int t = slot, u = s;
    if (il) { /* q4 = S / 4 */
        const int sq = (int)lowp_div32_q(q4, (uint32_t)s);
        t = (slot / 4) * 4 + sq;
        u = (s - sq * (int)q4.d) * 4 + slot % 4;
    }
    return ws_row(p, page, t, h) * (size_t)S + u;
}

__host__ __device__ __forceinline__ float ws_f32(uint32_t u)
{
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    return lowp_f32_from_bits(u);
#endif
}

/* binary32 pair -> BF16 pair (lo in bits 0..15), RN (cvt.rn.bf16x2.f32 on the device;
 * its model on the host) */
__host__ __device__ __forceinline__ uint32_t ws_bf16x2(float lo, float hi)
{
#ifdef __CUDA_ARCH__
    return pack_bf16(lo, hi);
#else
    return lowp_bf16_from_f32(lo) | (uint32_t)lowp_bf16_from_f32(hi) << 16;
#endif
}

/* The first BF16 magnitude (bits & 0x7FFF) that torch 2.11 casts to E4M3 NaN: 0x43E9 =
 * 466. 464 = 0x43E8 is the tie between 448 (0x7E) and the NaN slot 480 and rounds to even
 * 448; every larger magnitude, Inf and NaN give 0x7F | sign (LOWP_PROFILE_TORCH: no
 * saturation, E4M3 overflow is NaN keeping the sign). Below it the cast equals
 * cvt.rn.satfinite.e4m3x2.f32 of the value (RN-even; BF16 subnormals become +-0 with
 * their sign; satfinite never acts there). Checked on the host against the codec when
 * this was written (all 65,536 codes: torch (rn, no sat) == cuda (rn, satfinite) below
 * this bound) and on the device by lowp_gpu_extend_ws_cast. */
constexpr uint32_t WS_NAN_FROM = 0x43E9u;
/* Added to a pair's 15-bit magnitudes, sets bit 15 of a half iff that magnitude is >=
 * WS_NAN_FROM; no carry crosses halves (0x7FFF + 0x3C17 < 0x10000). */
constexpr uint32_t WS_OVF_ADD = (0x8000u - WS_NAN_FROM) * 0x00010001u;

#ifdef __CUDA_ARCH__
/* cvt.rn.satfinite.e4m3x2.f32 of the BF16 pair w: byte 0 the low half's code. Exact
 * torch cast of both halves when both magnitudes are below WS_NAN_FROM. */
__device__ __forceinline__ uint32_t ws_cvt2(uint32_t w)
{
    uint16_t r;
    /* d's upper byte is a's conversion, its lower byte b's (PTX ISA, cvt) */
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;"
        : "=h"(r)
        : "f"(__uint_as_float(w & 0xFFFF0000u)), "f"(__uint_as_float(w << 16)));
    return r;
}
#endif

/* r (the two cvt bytes of the BF16 pair w) with 0x7F | sign where a half of w is >=
 * WS_NAN_FROM: torch's NaN. Host and device (lowp_gpu_extend_ws_cast_emulate runs it
 * with lowp's model of the cvt). */
__host__ __device__ __forceinline__ uint32_t ws_patch(uint32_t w, uint32_t r)
{
    const uint32_t big = ((w & 0x7FFF7FFFu) + WS_OVF_ADD) & 0x80008000u;
    /* 0xFF in byte 0 / 1 where the low / high half is too big (prmt's sign replicate of
     * bytes 1 and 3); selector 4 is byte 0 of b = 0 */
    const uint32_t m = lowp_dec_prmt(big, 0u, 0x44B9u);
    const uint32_t nan = lowp_dec_prmt(w, 0u, 0x4431u) | 0x7F7Fu; /* sign | 0x7F */
    return (r & ~m) | (nan & m);
}

/* torch's E4M3 cast of the BF16 pair w (low half first) as bytes 0 and 1. ovf: some half
 * of w may be >= WS_NAN_FROM (the device then patches those halves, ws_patch; false must
 * be a proof that none is). The host reads lowp's codec table and ignores ovf. */
__host__ __device__ __forceinline__ uint32_t ws_cast2(const WsParams &p, uint32_t w, bool ovf)
{
#ifdef __CUDA_ARCH__
    (void)p;
    const uint32_t r = ws_cvt2(w);
    return ovf ? ws_patch(w, r) : r;
#else
    (void)ovf;
    return p.cast[w & 0xFFFFu] | (uint32_t)p.cast[w >> 16] << 8;
#endif
}

/* A sequence's constants (ws_seq: loaded once a thread, not once a block). */
struct WsSeq {
    int P, q0, pt0; /* prefix length, first chunk row, first page-table entry */
    size_t kv0;     /* first workspace row */
};

__host__ __device__ __forceinline__ WsSeq ws_seq(const WsParams &p, int b)
{
    WsSeq s = {p.pre[b], p.qo[b], p.pt_indptr[b], (size_t)p.kv[b]};
    return s;
}

/* What block blk (K blocks first, then V) of head h, position t needs from memory: the 8
 * code bytes (a.x, a.y), block scale code and global scale of a prefix position, or the 16
 * BF16 values (a, c) of a chunk position. ws_load reads it, ws_bytes turns it into the 16
 * workspace bytes, ws_dst is where they go: the device kernel loads several blocks before
 * it computes and stores any (the loads in flight are what streams), and
 * lowp_gpu_extend_workspace_emulate runs the same three on the host with host pointers
 * (the same code, so a logic error shows up without a GPU). */
struct WsIn {
    uint4 a, c;
    float g;
    uint32_t sc;
    bool prefix;
};

__host__ __device__ __forceinline__ WsIn ws_load(const WsParams &p, const WsSeq &s, int t, int h,
                                                 int blk)
{
    const int nbk = p.Dq / 16;
    const bool isk = blk < nbk;
    const int j = isk ? blk : blk - nbk, D = isk ? p.Dq : p.Dv;
    WsIn in;
    in.prefix = t < s.P;
    if (in.prefix) {
        const int tp = (int)lowp_div32_q(p.dPS, (uint32_t)t); /* t < 2^31 */
        const size_t page = (size_t)p.pt_indices[s.pt0 + tp];
        const int slot = t - tp * p.PS;
        const uint8_t *code = (isk ? p.kc : p.vc) + ws_row(p, page, slot, h) * (D / 2) + 8 * j;
        in.sc = (isk ? p.ks : p.vs)[ws_scale_off(p, page, slot, h, j, D / 16,
                                                 isk ? p.k_il : p.v_il, isk ? p.dkq4 : p.dvq4)];
        in.g = (isk ? p.kg : p.vg)[p.per_head ? h : 0];
        const uint2 w = *reinterpret_cast<const uint2 *>(code);
        in.a = make_uint4(w.x, w.y, 0u, 0u);
        in.c = make_uint4(0u, 0u, 0u, 0u);
    } else {
        const uint16_t *src =
            (isk ? p.kch : p.vch) + ((size_t)(s.q0 + t - s.P) * p.H + h) * D + 16 * j;
        in.a = *reinterpret_cast<const uint4 *>(src);
        in.c = *reinterpret_cast<const uint4 *>(src + 8);
        in.g = 0.0f;
        in.sc = 0;
    }
    return in;
}

__host__ __device__ __forceinline__ uint4 *ws_dst(const WsParams &p, const WsSeq &s, int t, int h,
                                                  int blk)
{
    const int nbk = p.Dq / 16;
    const bool isk = blk < nbk;
    const int j = isk ? blk : blk - nbk, D = isk ? p.Dq : p.Dv;
    return reinterpret_cast<uint4 *>((isk ? p.kws : p.vws) + ((s.kv0 + t) * p.H + h) * D +
                                     16 * j);
}

/* A prefix block's 16 workspace bytes when its scale sf and global scale g are finite: the
 * byte of each of the 8 E2M1 magnitudes v (0, 0.5, 1, 1.5, 2, 3, 4, 6) is made once,
 * torch_e4m3(bf16((v sf) g)) as in the per-element path below, and each code looks its
 * magnitude's byte up (prmt, by the code's 3 low bits) and flips bit 7 by its sign bit.
 * Equal to the per-element path: with sf and g finite, (-v sf) g = -((v sf) g) exactly
 * (binary32 RN is odd-symmetric, --ftz=false; v = 0 gives the zero of the opposite sign),
 * and the BF16 rounding and the cast are odd-symmetric too, Inf and the NaN patch keeping
 * the sign (ws_patch); a NaN can only come from a NaN or infinite sf or g (0 x Inf), whose
 * sign rules differ between hosts and the device: those blocks take the per-element path.
 * Checked against it on the host for every code byte, every finite scale code and a range
 * of g (ws_lut_check, the extend conform's host run). */
/* The table of the 8 magnitudes' bytes for (sf, g): x the bytes of magnitudes 0..3, y of
 * 4..7 (byte k of x: magnitude k). Depends on the block's scale code and global scale alone,
 * so the staged fill makes it once per scale code (ws_fill_staged_kernel). */
__host__ __device__ __forceinline__ uint2 ws_lut_table(const WsParams &p, float sf, float g,
                                                       bool ovf)
{
    uint32_t t[4]; /* t[k]: the bytes of magnitudes 2k (byte 0) and 2k + 1 (byte 1) */
    t[0] = ws_cast2(p, ws_bf16x2((0.0f * sf) * g, (0.5f * sf) * g), ovf);
    t[1] = ws_cast2(p, ws_bf16x2((1.0f * sf) * g, (1.5f * sf) * g), ovf);
    t[2] = ws_cast2(p, ws_bf16x2((2.0f * sf) * g, (3.0f * sf) * g), ovf);
    t[3] = ws_cast2(p, ws_bf16x2((4.0f * sf) * g, (6.0f * sf) * g), ovf);
    return make_uint2(t[0] | t[1] << 16, t[2] | t[3] << 16);
}

/* The block's 16 bytes from its 8 code bytes (in.a.x, in.a.y) and its table tab. Nibble e
 * of the code bytes is element e and output byte e. For a code word w (elements 8q..8q+7):
 * the magnitudes by prmt on the 3 low bits of each nibble (bit 3 masked off: in a prmt
 * selector it means "replicate the byte's bit 7"); the signs by that very mode: bit 7 of
 * byte k of w is the sign of nibble 2k + 1, bit 7 of byte k of w << 4 that of nibble 2k,
 * so prmt(w << 4, w) with selector nibbles 8 | k (byte k of w << 4) and 8 | 4 + k (byte k
 * of w) makes 0xFF where an element is negative and 0x00 where not; bit 7 of it flips the
 * magnitude's byte. 5 instructions a word for the signs. */
__host__ __device__ __forceinline__ uint4 ws_lut_apply(const WsIn &in, uint2 tab)
{
    const uint32_t lo = tab.x, hi = tab.y, wd[2] = {in.a.x, in.a.y};
    uint32_t r[4];
    for (int q = 0; q < 2; q++) {
        const uint32_t w = wd[q], w4 = w << 4;
        const uint32_t m0 = lowp_dec_prmt(lo, hi, w & 0x7777u);
        const uint32_t m1 = lowp_dec_prmt(lo, hi, (w >> 16) & 0x7777u);
        /* output bytes 0..3: nibbles 0 (w4 byte 0), 1 (w byte 0), 2 (w4 byte 1), 3 (w
         * byte 1); bytes 4..7: nibbles 4..7 from bytes 2 and 3 the same way */
        const uint32_t s0 = lowp_dec_prmt(w4, w, 0xD9C8u), s1 = lowp_dec_prmt(w4, w, 0xFBEAu);
        r[2 * q] = m0 ^ (s0 & 0x80808080u);
        r[2 * q + 1] = m1 ^ (s1 & 0x80808080u);
    }
    return make_uint4(r[0], r[1], r[2], r[3]);
}

__host__ __device__ __forceinline__ uint4 ws_bytes_lut(const WsParams &p, const WsIn &in, float sf,
                                                       float g, bool ovf)
{
    return ws_lut_apply(in, ws_lut_table(p, sf, g, ovf));
}

/* torch's E4M3 cast of 8 BF16 pairs (ovf: some half may be >= WS_NAN_FROM) as 16 bytes */
__host__ __device__ __forceinline__ uint4 ws_cast16(const WsParams &p, const uint32_t wv[8], bool ovf)
{
    uint32_t r[8];
    for (int i = 0; i < 8; i++)
        r[i] = ws_cast2(p, wv[i], ovf);
    return make_uint4(r[0] | r[1] << 16, r[2] | r[3] << 16, r[4] | r[5] << 16, r[6] | r[7] << 16);
}

/* A prefix block's bytes element by element: x_i = (v_i sf) g in binary32, BF16, cast. Any
 * sf and g (the path of non-finite ones, and ws_lut_check's reference for the rest). */
__host__ __device__ __forceinline__ uint4 ws_bytes_elem(const WsParams &p, const WsIn &in, float sf,
                                                        float g, bool ovf)
{
    /* e[q][k]: elements of word q; pair k of lowp_dec_e2m1x8_sub is elements k (low
     * half) and k + 4, each 2^-126 x the E2M1 value, exact; x 2^126 is exact too
     * (no flush: --ftz=false), giving the value the codec's table has */
    uint32_t e[2][4], wv[8];
    lowp_dec_e2m1x8_sub(in.a.x, e[0]);
    lowp_dec_e2m1x8_sub(in.a.y, e[1]);
    const float unbias = ws_f32(0x7E800000u); /* 2^126 */
    float x[16];
    for (int i = 0; i < 16; i++) {
        const uint32_t pr = e[i / 8][i % 4];
        const float v = ws_f32((i & 4) ? pr & 0xFFFF0000u : pr << 16) * unbias;
        x[i] = (v * sf) * g;
    }
    for (int i = 0; i < 8; i++)
        wv[i] = ws_bf16x2(x[2 * i], x[2 * i + 1]);
    return ws_cast16(p, wv, ovf);
}

#ifdef __CUDA_ARCH__
/* ws_bytes_elem out of line, for ws_bytes' non-finite scales: the common path's code is
 * the table's alone (sm_90 SASS of ws_fill_kernel, nvcc 13.0: 168 FMULs with the call, 378
 * with the path inlined). Timed on a written cache the fill runs 0.41-0.73 of a copy
 * (reports/gpu-extend-h200-notes.md, 2026-12-03). The codes and scales go by value: p is
 * unused on the device (ws_cast2) and a reference to it or to in would put them in local
 * memory. */
__device__ __noinline__ uint4 ws_bytes_elem_rare(uint32_t ax, uint32_t ay, float sf, float g,
                                                 bool ovf)
{
    const WsParams p = {};
    WsIn in = {};
    in.a.x = ax;
    in.a.y = ay;
    in.prefix = true;
    return ws_bytes_elem(p, in, sf, g, ovf);
}
#endif

/* ws_bytes_elem of a prefix block, out of line on the device (ws_bytes_elem_rare) */
__host__ __device__ __forceinline__ uint4 ws_bytes_rare(const WsParams &p, const WsIn &in,
                                                        float sf, float g, bool ovf)
{
#ifdef __CUDA_ARCH__
    (void)p;
    return ws_bytes_elem_rare(in.a.x, in.a.y, sf, g, ovf);
#else
    return ws_bytes_elem(p, in, sf, g, ovf);
#endif
}

/* |x_i| = fl(|v_i sf| |g|) <= fl(6 sf |g|) (v_i sf and 6 sf exact, rounding monotone), so
 * fl(6 sf |g|) <= 448 bounds every BF16 below WS_NAN_FROM; a NaN sf or g fails the test */
__host__ __device__ __forceinline__ bool ws_prefix_ovf(float sf, float g)
{
    return !((6.0f * sf) * fabsf(g) <= 448.0f);
}

/* Whether a prefix block of scale sf and global scale g takes the table path: both
 * finite (not NaN, not infinite). */
__host__ __device__ __forceinline__ bool ws_lut_ok(float sf, float g)
{
    return fabsf(sf) <= 3.4028235e38f && fabsf(g) <= 3.4028235e38f;
}

__host__ __device__ __forceinline__ uint4 ws_bytes(const WsParams &p, const float *e4m3,
                                                   const WsIn &in)
{
    if (in.prefix) {
        const float sf = e4m3[in.sc], g = in.g;
        const bool ovf = ws_prefix_ovf(sf, g);
        if (ws_lut_ok(sf, g))
            return ws_bytes_lut(p, in, sf, g, ovf);
        return ws_bytes_rare(p, in, sf, g, ovf);
    }
    const uint32_t wv[8] = {in.a.x, in.a.y, in.a.z, in.a.w, in.c.x, in.c.y, in.c.z, in.c.w};
    uint32_t any = 0;
    for (int i = 0; i < 8; i++)
        any |= (wv[i] & 0x7FFF7FFFu) + WS_OVF_ADD;
    return ws_cast16(p, wv, (any & 0x80008000u) != 0);
}

/* The staged fill's tables with per-tensor global scales: entries i = first, first + step,
 * ... < 512 of tab[i / 256][i % 256] = ws_lut_table of scale code i % 256 and the K (i <
 * 256) or V global scale where ws_lut_ok, else WS_TAB_RARE. A table's byte 0 is the cast
 * of (0 sf) g = +-0, 0x00 or 0x80, so an entry is WS_TAB_RARE exactly where its low 7 bits
 * are not 0 (ws_tab_rare): the block takes ws_bytes' per-element path there. */
#define WS_TAB_RARE 0x7F7F7F7Fu
__host__ __device__ __forceinline__ bool ws_tab_rare(uint2 e) { return (e.x & 0x7Fu) != 0; }

/* A prefix block's bytes from its table entry e (ws_tab_fill's for its scale code and
 * global scale): the lookup where e is real, else ws_bytes' per-element path; either way
 * ws_bytes' bytes of in. */
__host__ __device__ __forceinline__ uint4 ws_tab_bytes(const WsParams &p, const float *e4m3,
                                                       const WsIn &in, uint2 e)
{
    if (!ws_tab_rare(e))
        return ws_lut_apply(in, e);
    const float sf = e4m3[in.sc];
    return ws_bytes_rare(p, in, sf, in.g, ws_prefix_ovf(sf, in.g));
}

__host__ __device__ __forceinline__ void ws_tab_fill(const WsParams &p, const float *e4m3,
                                                     uint2 (*tab)[256], int first, int step)
{
    for (int i = first; i < 512; i += step) {
        const float sf = e4m3[i & 255], g = (i >> 8 ? p.vg : p.kg)[0];
        tab[i >> 8][i & 255] = ws_lut_ok(sf, g)
                                   ? ws_lut_table(p, sf, g, ws_prefix_ovf(sf, g))
                                   : make_uint2(WS_TAB_RARE, WS_TAB_RARE);
    }
}

/* WS_U rows a thread an iteration: rows base + u NY + y, u < WS_U (each u a warp's
 * consecutive rows, so the loads and stores stay coalesced), all loaded before any is
 * stored. Rows past the end load the last row again and store nothing. */
constexpr int WS_U = 4;

/* The rows (t, h) = (r / H, r % H) of sequence b: I is uint32_t when the sequence has at
 * most 2^31 - 1 rows (base + step < 2^31 + 2^23 cannot wrap: step <= 65535 x 32 x WS_U),
 * else size_t. */
/* r / H: by multiply and shift where r < 2^31 (the uint32_t rows), else divided */
__device__ __forceinline__ uint32_t ws_rdiv(const WsParams &p, uint32_t r) { return lowp_div32_q(p.dH, r); }
__device__ __forceinline__ size_t ws_rdiv(const WsParams &p, size_t r) { return r / (size_t)p.H; }

/* Rows [r0, r1) of sequence b, thread (x, y) of the CTA's (nb, ny) arrangement: x the
 * block of a row, y the row. */
template <typename I>
__device__ __forceinline__ void ws_rows(const WsParams &p, const float *e4m3, int b, I r0, I r1,
                                        int x, int y, int ny_)
{
    const WsSeq s = ws_seq(p, b);
    const I ny = (I)ny_, step = (I)gridDim.x * ny * WS_U;
    for (I base = r0 + (I)blockIdx.x * ny * WS_U + (I)y; base < r1; base += step) {
        WsIn in[WS_U];
        int t[WS_U], h[WS_U];
#pragma unroll
        for (int u = 0; u < WS_U; u++) {
            I r = base + (I)u * ny;
            r = r < r1 ? r : r1 - 1;
            const I tq = ws_rdiv(p, r);
            t[u] = (int)tq;
            h[u] = (int)(r - tq * (I)p.H);
            in[u] = ws_load(p, s, t[u], h[u], x);
        }
#pragma unroll
        for (int u = 0; u < WS_U; u++)
            if (base + (I)u * ny < r1)
                *ws_dst(p, s, t[u], h[u], x) = ws_bytes(p, e4m3, in[u]);
    }
}

/* ---- The staged prefix (p.staged: linear scale order for K and V, either page layout) --
 * A warp walks units of TT positions x HG heads (unit u = position run u / NG, head group
 * u % NG; the warps of the grid take consecutive units) through WS_STAGES shared-memory
 * stages of its own: it issues unit i + WS_STAGES - 1's code and scale bytes as 16- and
 * 4-byte cp.async (a row's D / 2 code bytes and D / 16 scale bytes are contiguous and
 * 16- and 4-aligned: D is a multiple of 64) before it converts unit i from shared memory,
 * so the loads of three units are in flight while one is converted, with no register held
 * for them. The page-table entries of a unit are loaded one unit ahead. A stage holds R
 * rows r = tt HG + hh, each part row after row (WsStage): the K codes (Dq / 2 bytes a row),
 * the V codes, the K scales (Dq / 16 a row), the V scales; then TT page indices. So with
 * NHD pages and a unit of all heads (p.lin), a position's K codes (and each other part) are
 * one run in the cache and one in the stage, copied without dividing by anything but the
 * position. Each block is converted (ws_block_out) from the
 * same WsIn as ws_load gives (the same 8 code bytes, scale code and global scale), so the
 * bytes equal the per-block definition; lowp_gpu_extend_workspace_emulate runs this
 * schedule too (ws_chunk, ws_unit_page, ws_block_out) under LOWP_GPU_WS_FILL=staged. */
constexpr int WS_STAGES = 4;

__device__ __forceinline__ void cp4(uint32_t dst, const void *src)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(dst), "l"(src));
}

/* Where the four parts of a stage start (bytes), from its R rows. */
struct WsStage {
    int kc, vc, ks, vs, pg;
};

__host__ __device__ __forceinline__ WsStage ws_stage(const WsParams &p)
{
    const int R = p.TT * p.HG, D = p.Dq + p.Dv;
    const WsStage o = {0, R * p.Dq / 2, R * D / 2, R * D / 2 + R * p.Dq / 16, R * D / 2 + R * D / 16};
    return o;
}

/* Chunk c of unit u (t0 its first position, g its head group; pages its TT page indices):
 * 16 code bytes or 4 scale bytes, their source and their offset in the stage; bytes 0
 * where the chunk's position is past the prefix (never converted). p.lin: a position's
 * chunks are its 4 runs (K codes, V codes, K scales, V scales of all heads) in turn, c /
 * (H (D / 32 + D / 64)) the position; else row r = c / (D / 32 + D / 64)'s code chunks and
 * then its scale chunks. All of R (D / 32 + D / 64) chunks fill the stage's parts. Host and
 * device (the emulator runs the staged schedule with it: lowp_gpu_extend_workspace_emulate). */
struct WsChunk {
    const uint8_t *src;
    int off, bytes;
};

__host__ __device__ __forceinline__ WsChunk ws_chunk(const WsParams &p, const WsSeq &s, int t0,
                                                     int g, const int *pages, int c)
{
    const WsStage o = ws_stage(p);
    WsChunk ch = {NULL, 0, 0};
    if (p.lin) {
        const int tt = (int)lowp_div32_q(p.dCH, (uint32_t)c), t = t0 + tt;
        int q = c - tt * p.H * ((p.Dq + p.Dv) / 32 + (p.Dq + p.Dv) / 64);
        if (t >= s.P)
            return ch;
        const int tp = (int)lowp_div32_q(p.dPS, (uint32_t)t);
        const size_t row0 = ws_row(p, (size_t)pages[tt], t - tp * p.PS, 0);
        const int nk = p.H * p.Dq / 32, nv = p.H * p.Dv / 32, nks = p.H * p.Dq / 64;
        if (q < nk) {
            ch.src = p.kc + row0 * (p.Dq / 2) + 16 * q;
            ch.off = o.kc + tt * p.H * (p.Dq / 2) + 16 * q;
            ch.bytes = 16;
        } else if ((q -= nk) < nv) {
            ch.src = p.vc + row0 * (p.Dv / 2) + 16 * q;
            ch.off = o.vc + tt * p.H * (p.Dv / 2) + 16 * q;
            ch.bytes = 16;
        } else if ((q -= nv) < nks) {
            ch.src = p.ks + row0 * (p.Dq / 16) + 4 * q;
            ch.off = o.ks + tt * p.H * (p.Dq / 16) + 4 * q;
            ch.bytes = 4;
        } else {
            q -= nks;
            ch.src = p.vs + row0 * (p.Dv / 16) + 4 * q;
            ch.off = o.vs + tt * p.H * (p.Dv / 16) + 4 * q;
            ch.bytes = 4;
        }
        return ch;
    }
    const int D = p.Dq + p.Dv, cc = D / 32, per = cc + D / 64;
    const int r = (int)lowp_div32_q(p.dCH, (uint32_t)c), k = c - r * per;
    const int tt = (int)lowp_div32_q(p.dHG, (uint32_t)r), hh = r - tt * p.HG;
    const int t = t0 + tt;
    if (t >= s.P)
        return ch;
    const int h = g * p.HG + hh, tp = (int)lowp_div32_q(p.dPS, (uint32_t)t);
    const size_t row = ws_row(p, (size_t)pages[tt], t - tp * p.PS, h);
    if (k < cc) {
        const bool isk = k < p.Dq / 32;
        const int kk = isk ? k : k - p.Dq / 32;
        ch.src = isk ? p.kc + row * (p.Dq / 2) + 16 * kk : p.vc + row * (p.Dv / 2) + 16 * kk;
        ch.off = isk ? o.kc + r * (p.Dq / 2) + 16 * kk : o.vc + r * (p.Dv / 2) + 16 * kk;
        ch.bytes = 16;
    } else {
        const int k2 = k - cc;
        const bool isk = k2 < p.Dq / 64;
        const int kk = isk ? k2 : k2 - p.Dq / 64;
        ch.src = isk ? p.ks + row * (p.Dq / 16) + 4 * kk : p.vs + row * (p.Dv / 16) + 4 * kk;
        ch.off = isk ? o.ks + r * (p.Dq / 16) + 4 * kk : o.vs + r * (p.Dv / 16) + 4 * kk;
        ch.bytes = 4;
    }
    return ch;
}

/* The page index of position t0 + lane of unit u (lanes < TT; 0 past the prefix). */
__host__ __device__ __forceinline__ int ws_unit_page(const WsParams &p, const WsSeq &s, int u,
                                                     int lane)
{
    const int t = (int)lowp_div32_q(p.dNG, (uint32_t)u) * p.TT + lane;
    return lane < p.TT && t < s.P ? p.pt_indices[s.pt0 + (int)lowp_div32_q(p.dPS, (uint32_t)t)] : 0;
}

/* Block b of unit u (b < R nb, nb = D / 16 a row) from the stage st into the workspace. tab
 * (NULL when the global scales are per head): ws_tab_fill's tables of the K (tab[0]) and V
 * global scales, taken by ws_tab_bytes; so every block's bytes are ws_bytes' of the same
 * WsIn as ws_load gives. */
__host__ __device__ __forceinline__ void ws_block_out(const WsParams &p, const WsSeq &s,
                                                      const float *e4m3, const uint2 (*tab)[256],
                                                      const uint8_t *st, int t0, int g, int b)
{
    const int nb = (p.Dq + p.Dv) / 16;
    const int r = (int)lowp_div32_q(p.dNB, (uint32_t)b), j = b - r * nb;
    const int tt = (int)lowp_div32_q(p.dHG, (uint32_t)r), hh = r - tt * p.HG;
    const int t = t0 + tt, h = g * p.HG + hh;
    if (t >= s.P)
        return;
    const bool isk = j < p.Dq / 16;
    const int jj = isk ? j : j - p.Dq / 16;
    const WsStage o = ws_stage(p);
    const uint2 w = *reinterpret_cast<const uint2 *>(
        st + (isk ? o.kc + r * (p.Dq / 2) : o.vc + r * (p.Dv / 2)) + 8 * jj);
    WsIn in;
    in.prefix = true;
    in.a = make_uint4(w.x, w.y, 0u, 0u);
    in.c = make_uint4(0u, 0u, 0u, 0u);
    in.sc = st[(isk ? o.ks + r * (p.Dq / 16) : o.vs + r * (p.Dv / 16)) + jj];
    in.g = (isk ? p.kg : p.vg)[p.per_head ? h : 0];
    *ws_dst(p, s, t, h, j) = tab != NULL ? ws_tab_bytes(p, e4m3, in, tab[isk ? 0 : 1][in.sc])
                                         : ws_bytes(p, e4m3, in);
}

/* A unit's blocks when p.lin and the global scales are per tensor (tab made), blocks
 * first, first + step, ...: the same bytes as ws_block_out on each, with none of its
 * index work. With NHD pages and a unit of all heads, block m of a part (K, then V) of
 * the unit's n prefix positions is block j = m % (D / 16) of head (m / (D / 16)) % H of
 * position t0 + m / (H D / 16), and each of its places is a run of the unit: its 8 code
 * bytes at 8 m of the stage's part (ws_chunk copies a position's H D / 2 code bytes in
 * order, t after t), its scale code at m of the scale part, its 16 workspace bytes at 16 m
 * from row (kv0 + t0) H (the rows (t, h) of the unit are consecutive). */
__host__ __device__ __forceinline__ void ws_convert_lin(const WsParams &p, const WsSeq &s,
                                                        const float *e4m3,
                                                        const uint2 (*tab)[256],
                                                        const uint8_t *st, int t0, int first,
                                                        int step)
{
    const WsStage o = ws_stage(p);
    const int n = s.P - t0 < p.TT ? s.P - t0 : p.TT; /* >= 1: t0 < P */
    for (int w = 0; w < 2; w++) {
        const int D = w ? p.Dv : p.Dq, nbl = n * p.H * (D / 16);
        const uint8_t *code = st + (w ? o.vc : o.kc), *scl = st + (w ? o.vs : o.ks);
        uint8_t *dst = (w ? p.vws : p.kws) + (s.kv0 + (size_t)t0) * (size_t)p.H * (size_t)D;
        const uint2 *tb = tab[w];
        for (int m = first; m < nbl; m += step) {
            const uint2 c = *reinterpret_cast<const uint2 *>(code + 8 * m);
            WsIn in;
            in.prefix = true;
            in.a = make_uint4(c.x, c.y, 0u, 0u);
            in.c = make_uint4(0u, 0u, 0u, 0u);
            in.sc = scl[m];
            in.g = (w ? p.vg : p.kg)[0];
            *reinterpret_cast<uint4 *>(dst + 16 * (size_t)m) =
                ws_tab_bytes(p, e4m3, in, tb[in.sc]);
        }
    }
}

/* The units of a prefix of P positions. The launcher keeps them below 2^31 - 4 W (W the
 * grid's warps) before choosing the staged kernel, so u + 3 W stays an int. */
__host__ __device__ __forceinline__ size_t ws_units(const WsParams &p, size_t P)
{
    return (P + (size_t)p.TT - 1) / (size_t)p.TT * (size_t)p.NG;
}

/* Unit u's copies into stage st (pg: the lane's page index, ws_unit_page). */
__device__ __forceinline__ void ws_issue(const WsParams &p, const WsSeq &s, uint8_t *st, int u,
                                         int pg)
{
    const int lane = threadIdx.x & 31, D = p.Dq + p.Dv, R = p.TT * p.HG;
    const int tu = (int)lowp_div32_q(p.dNG, (uint32_t)u), g = u - tu * p.NG, t0 = tu * p.TT;
    int *pages = reinterpret_cast<int *>(st + ws_stage(p).pg);
    if (lane < p.TT)
        pages[lane] = pg;
    __syncwarp();
    const uint32_t sb = (uint32_t)__cvta_generic_to_shared(st);
    for (int c = lane; c < R * (D / 32 + D / 64); c += 32) {
        const WsChunk ch = ws_chunk(p, s, t0, g, pages, c);
        if (ch.bytes == 16)
            cp16(sb + ch.off, ch.src, 16);
        else if (ch.bytes == 4)
            cp4(sb + ch.off, ch.src);
    }
}

/* Unit u's blocks from stage st into the workspace, a lane's every 32nd. */
__device__ __forceinline__ void ws_convert(const WsParams &p, const WsSeq &s, const float *e4m3,
                                           const uint2 (*tab)[256], const uint8_t *st, int u)
{
    const int lane = threadIdx.x & 31, R = p.TT * p.HG, nb = (p.Dq + p.Dv) / 16;
    const int tu = (int)lowp_div32_q(p.dNG, (uint32_t)u), g = u - tu * p.NG, t0 = tu * p.TT;
    if (p.lin && tab != NULL) {
        ws_convert_lin(p, s, e4m3, tab, st, t0, lane, 32);
        return;
    }
    for (int b = lane; b < R * nb; b += 32)
        ws_block_out(p, s, e4m3, tab, st, t0, g, b);
}

__device__ __forceinline__ void ws_staged(const WsParams &p, const float *e4m3,
                                          const uint2 (*tab)[256], int b, uint8_t *sm)
{
    const WsSeq s = ws_seq(p, b);
    const int warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const int units = (int)ws_units(p, (size_t)s.P);
    const int w0 = blockIdx.x * nw + warp, W = gridDim.x * nw;
    uint8_t *mine = sm + (size_t)warp * WS_STAGES * p.stage_bytes;
    const int lane = threadIdx.x & 31;
    int pg = ws_unit_page(p, s, w0, lane);
#pragma unroll
    for (int k = 0; k < WS_STAGES - 1; k++) {
        const int u = w0 + k * W;
        if (u < units) {
            ws_issue(p, s, mine + k * p.stage_bytes, u, pg);
            pg = ws_unit_page(p, s, u + W, lane);
        }
        asm volatile("cp.async.commit_group;");
    }
    for (int i = 0;; i++) {
        const int u = w0 + i * W;
        if (u >= units)
            break;
        const int un = u + (WS_STAGES - 1) * W;
        if (un < units) {
            ws_issue(p, s, mine + ((i + WS_STAGES - 1) % WS_STAGES) * p.stage_bytes, un, pg);
            pg = ws_unit_page(p, s, un + W, lane);
        }
        asm volatile("cp.async.commit_group;");
        asm volatile("cp.async.wait_group %0;" ::"n"(WS_STAGES - 1) : "memory");
        __syncwarp(); /* every lane's copies of unit u have landed */
        ws_convert(p, s, e4m3, tab, mine + (i % WS_STAGES) * p.stage_bytes, u);
        __syncwarp(); /* stage i % WS_STAGES is refilled next iteration */
    }
    asm volatile("cp.async.wait_group 0;" ::: "memory");
}

/* The fill (the default): thread (x, y) of an (nb, ny) CTA owns block x of its rows, all
 * rows of sequence blockIdx.y. */
__global__ void __launch_bounds__(256) ws_fill_kernel(WsParams p)
{
    __shared__ float e4m3[256];
    for (int i = threadIdx.y * blockDim.x + threadIdx.x; i < 256; i += blockDim.x * blockDim.y)
        e4m3[i] = p.e4m3[i];
    __syncthreads();
    const int b = blockIdx.y;
    const size_t rows = (size_t)(p.pre[b] + p.qo[b + 1] - p.qo[b]) * p.H;
    if (rows <= (size_t)INT32_MAX)
        ws_rows<uint32_t>(p, e4m3, b, 0u, (uint32_t)rows, (int)threadIdx.x, (int)threadIdx.y,
                          (int)blockDim.y);
    else
        ws_rows<size_t>(p, e4m3, b, 0, rows, (int)threadIdx.x, (int)threadIdx.y, (int)blockDim.y);
}

/* The staged fill (LOWP_GPU_WS_FILL=staged): grid (x, batch, 2), 256 threads; z = 0 the
 * prefix (ws_staged), z = 1 the chunk's rows by ws_rows, whose (nb, ny) arrangement is the
 * thread index split by nb (the threads past ny rows idle). */
__global__ void __launch_bounds__(256) ws_fill_staged_kernel(WsParams p)
{
    __shared__ float e4m3[256];
    __shared__ uint2 tab[2][256]; /* the prefix's tables (ws_convert) */
    extern __shared__ __align__(16) uint8_t ws_sm[];
    for (int i = threadIdx.x; i < 256; i += blockDim.x)
        e4m3[i] = p.e4m3[i];
    __syncthreads();
    const int b = blockIdx.y;
    if (blockIdx.z == 0) {
        const bool tabbed = !p.per_head;
        if (tabbed) {
            ws_tab_fill(p, e4m3, tab, (int)threadIdx.x, (int)blockDim.x);
            __syncthreads();
        }
        ws_staged(p, e4m3, tabbed ? tab : NULL, b, ws_sm);
        return;
    }
    const int nb = (p.Dq + p.Dv) / 16, ny = 256 / nb;
    const int y = (int)lowp_div32_q(p.dNB, threadIdx.x), x = (int)threadIdx.x - y * nb;
    if (y >= ny)
        return;
    const size_t P = (size_t)p.pre[b], rows = (P + p.qo[b + 1] - p.qo[b]) * p.H;
    if (rows <= (size_t)INT32_MAX)
        ws_rows<uint32_t>(p, e4m3, b, (uint32_t)(P * p.H), (uint32_t)rows, x, y, ny);
    else
        ws_rows<size_t>(p, e4m3, b, P * p.H, rows, x, y, ny);
}

/* ws_cast2 on every BF16 code: full[c] with the overflow patch, fast[c] without it (the
 * path taken when ovf is false). Codes 2i and 2i + 1 share a pair, so both halves are
 * exercised. */
__global__ void ws_cast_kernel(uint8_t *full, uint8_t *fast)
{
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= 32768)
        return;
    const uint32_t w = (2 * i) | (2 * i + 1) << 16;
    WsParams p = {};
    const uint32_t a = ws_cast2(p, w, true), c = ws_cast2(p, w, false);
    full[2 * i] = (uint8_t)a;
    full[2 * i + 1] = (uint8_t)(a >> 8);
    fast[2 * i] = (uint8_t)c;
    fast[2 * i + 1] = (uint8_t)(c >> 8);
}

/* ws_bytes_lut against ws_bytes_elem (the per-element path) on every block of the grid
 * (code byte c, scale code sc, global scale WS_LUT_G[gi]): byte k of the block's 8 code
 * bytes is c xor a constant of k (0, 0x18, 0x81, 0x99, 0x88, 0x0F, 0xF0, 0xFF), so over the
 * grid every nibble position holds every code with every scale, and an element that took
 * its neighbour's place (or sign) would show: its neighbour differs in most blocks.
 * Non-finite scales (codes 0x7F, 0xFF) are skipped: the fill never takes the table there. */
#define WS_LUT_NG 17
__host__ __device__ __forceinline__ float ws_lut_g(int i)
{
    const float g[WS_LUT_NG] = {1.0f, 0.5f, 0x1p-9f, 3.0f, -0.37f, 1e30f, 1e-30f, 0x1p127f,
                                3.4028235e38f, -3.4028235e38f, 0x1p-149f, 0x1p-126f, 0.0f,
                                -0.0f, 448.0f, 1.0f / 448.0f, 1234.5678f};
    return g[i];
}

__host__ __device__ __forceinline__ int ws_lut_one(const WsParams &p, const float *e4m3, uint32_t i)
{
    const uint32_t c = i & 0xFFu, sc = (i >> 8) & 0xFFu;
    const int gi = (int)(i >> 16);
    if ((sc & 0x7Fu) == 0x7Fu)
        return 0;
    WsIn in = {};
    in.a.x = c * 0x01010101u ^ 0x99811800u; /* bytes c, c ^ 0x18, c ^ 0x81, c ^ 0x99 */
    in.a.y = c * 0x01010101u ^ 0xFFF00F88u; /* c ^ 0x88, c ^ 0x0F, c ^ 0xF0, c ^ 0xFF */
    in.prefix = true;
    const float sf = e4m3[sc], g = ws_lut_g(gi);
    const bool ovf = ws_prefix_ovf(sf, g);
    const uint4 a = ws_bytes_lut(p, in, sf, g, ovf), b = ws_bytes_elem(p, in, sf, g, ovf);
    return a.x != b.x || a.y != b.y || a.z != b.z || a.w != b.w;
}

__global__ void ws_lut_kernel(const float *e4m3, unsigned long long *bad)
{
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= 65536u * WS_LUT_NG)
        return;
    WsParams p = {};
    if (ws_lut_one(p, e4m3, i))
        atomicAdd(bad, 1ull);
}

/* The kernels' dynamic shared memory limit is raised to the device's opt-in maximum, never
 * to one launch's size: the attribute belongs to the function, so host threads launching
 * at once with different sizes would otherwise lower it under each other's launch. */
static cudaError_t smem_optin(int *bytes)
{
    int dev = 0;
    cudaError_t e = cudaGetDevice(&dev);
    return e != cudaSuccess ? e : cudaDeviceGetAttribute(bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
}

template <int DV> cudaError_t launch_v1(const Params &p, dim3 grid, size_t smem, cudaStream_t s)
{
    int optin = 0;
    cudaError_t e = smem_optin(&optin);
    if (e == cudaSuccess)
        e = cudaFuncSetAttribute(extend_kernel_v1<DV>, cudaFuncAttributeMaxDynamicSharedMemorySize, optin);
    if (e != cudaSuccess)
        return e;
    extend_kernel_v1<DV><<<grid, 128, smem, s>>>(p);
    return cudaGetLastError();
}

/* The v2 kernel with NW warps (16 NW packed rows) a CTA. */
template <int DV, int NW>
cudaError_t launch_v2(const Params &p, dim3 grid, size_t smem, cudaStream_t s)
{
    int optin = 0;
    cudaError_t e = smem_optin(&optin);
    if (e == cudaSuccess)
        e = cudaFuncSetAttribute(extend_kernel_v2<DV, NW>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 optin);
    if (e != cudaSuccess)
        return e;
    extend_kernel_v2<DV, NW><<<grid, 32 * NW, smem, s>>>(p);
    return cudaGetLastError();
}

} // namespace

static size_t smem_v1(size_t qk_dim, size_t vo_dim)
{
    return (size_t)CROWS * q_row_stride((int)qk_dim) +
           2 * (size_t)KB * (kv_row_stride((int)qk_dim) + kv_row_stride((int)vo_dim));
}

/* v2 with nw warps: Q BF16, the K and V BF16 tiles, one FP8 stage (the layout of
 * extend_kernel_v2's header). */
static size_t smem_v2(size_t qk_dim, size_t vo_dim, int nw)
{
    return (size_t)16 * nw * (2 * qk_dim + 16) + (size_t)KB * (2 * qk_dim + 16) +
           (size_t)KB * (2 * vo_dim + 16) + (size_t)KB * (kv_row_stride((int)qk_dim) +
                                                          kv_row_stride((int)vo_dim));
}

/* The kernel LOWP_GPU_EXTEND_KERNEL selects: unset or "v2": v2, warps a CTA by the grid
 * (*nw = 0); "v2w4" / "v2w8": v2 with 4 / 8 warps; "v1": the kernel before v2 (kept for
 * A/B timing). Returns 1 or 2, or -1 for any other value. */
static int extend_variant(int *nw)
{
    const char *v = getenv("LOWP_GPU_EXTEND_KERNEL");
    *nw = 0;
    if (v == NULL || strcmp(v, "v2") == 0)
        return 2;
    if (strcmp(v, "v1") == 0)
        return 1;
    if (strcmp(v, "v2w4") == 0 || strcmp(v, "v2w8") == 0) {
        *nw = v[3] - '0';
        return 2;
    }
    return -1;
}

/* For the bench's report: the v1 kernel's bytes when selected, else v2's with 8 warps
 * (with 4, 16 NW (2 qk_dim + 16) bytes less). */
extern "C" size_t lowp_gpu_extend_smem_bytes(size_t qk_dim, size_t vo_dim)
{
    int nw;
    const int var = extend_variant(&nw);
    return var == 1 ? smem_v1(qk_dim, vo_dim) : smem_v2(qk_dim, vo_dim, nw ? nw : 8);
}

extern "C" int lowp_gpu_extend(const lowp_gpu_extend_desc *d, uint16_t *out_dev,
                               cudaStream_t stream, char *why, size_t why_len)
{
    if (d == NULL)
        return lowp_why_set(why, why_len, "desc is NULL");
    const lowp_gpu_extend_args *a = &d->host;
    if (lowp_gpu_extend_check(a, why, why_len))
        return -1;
    if (d->qo_indptr_dev == NULL || d->kv_indptr_dev == NULL || d->q_dev == NULL ||
        d->k_dev == NULL || d->v_dev == NULL || out_dev == NULL)
        return lowp_why_set(why, why_len,
                            "device pointers (indptrs, q, k, v, out) must not be NULL");
    if ((d->prefix_len_dev == NULL) != (a->prefix_len == NULL))
        return lowp_why_set(why, why_len,
                            "prefix_len_dev and host.prefix_len must both be given or both NULL");
    if (((uintptr_t)d->q_dev | (uintptr_t)d->k_dev | (uintptr_t)d->v_dev) % 16)
        return lowp_why_set(why, why_len, "q, k and v must be 16-byte aligned on the device");
    if (a->batch > 65535 || a->num_kv_heads > 65535)
        return lowp_why_set(why, why_len, "batch and num_kv_heads must be at most 65535");
    size_t qmax = 0;
    for (size_t b = 0; b < a->batch; b++) {
        size_t ql = (size_t)(a->qo_indptr[b + 1] - a->qo_indptr[b]);
        qmax = ql > qmax ? ql : qmax;
    }
    const size_t G = a->num_q_heads / a->num_kv_heads;
    if (qmax * G > (size_t)INT32_MAX - 256) /* v2: Rc + 2 x 128 rows stay in int */
        return lowp_why_set(why, why_len, "a chunk of %zu queries x %zu heads is too large",
                            qmax, G);
    const double sm = a->sm_scale != 0.0 ? a->sm_scale : 1.0 / sqrt((double)a->qk_dim);
    Params p = {};
    p.q = d->q_dev;
    p.k = d->k_dev;
    p.v = d->v_dev;
    p.out = out_dev;
    p.qo = d->qo_indptr_dev;
    p.kv = d->kv_indptr_dev;
    p.pre = d->prefix_len_dev;
    p.HK = (int)a->num_kv_heads;
    p.G = (int)G;
    p.NQ = (int)a->num_q_heads;
    p.Dq = (int)a->qk_dim;
    p.Dv = (int)a->vo_dim;
    p.qks = lowp_gpu_decode_score_scale(LOWP_FP8_E4M3, sm, 1.0f);
    p.q_rs = q_row_stride(p.Dq);
    p.k_rs = kv_row_stride(p.Dq);
    p.v_rs = kv_row_stride(p.Dv);
    p.off_v = KB * p.k_rs;
    p.stage_bytes = KB * (p.k_rs + p.v_rs);
    p.off_stage = CROWS * p.q_rs;
    int nw;
    const int var = extend_variant(&nw);
    if (var < 0)
        return lowp_why_set(why, why_len,
                            "LOWP_GPU_EXTEND_KERNEL=%s: expected v1, v2, v2w4 or v2w8",
                            getenv("LOWP_GPU_EXTEND_KERNEL"));
    cudaError_t e;
    size_t smem;
    if (var == 1) {
        smem = smem_v1(a->qk_dim, a->vo_dim);
        const dim3 grid((unsigned)((qmax * G + CROWS - 1) / CROWS), (unsigned)a->num_kv_heads,
                        (unsigned)a->batch);
        switch (p.Dv) {
        case 64: e = launch_v1<64>(p, grid, smem, stream); break;
        case 128: e = launch_v1<128>(p, grid, smem, stream); break;
        case 192: e = launch_v1<192>(p, grid, smem, stream); break;
        default: e = launch_v1<256>(p, grid, smem, stream); break;
        }
    } else {
        if (nw == 0) {
            /* 8 warps (128 rows share each converted tile) unless the grid of 128-row
             * tiles would give fewer than 2 CTAs an SM (short chunks) - or fewer than 1
             * when the prefix is at least as long as the chunk (many key blocks a CTA) -,
             * or the device's shared memory a CTA cannot hold them (sm_120: 99 KiB): then
             * 4. Measured on the H200 (reports/gpu-extend-h200.md, kernel variants, 32/8
             * heads, d 128): at chunk 1024 8 warps took 0.77-0.81x the 4-warp time over
             * prefixes 4K-128K and 1.11x on the prefill; at chunk 512 (128 CTAs of 8) 4
             * warps were faster everywhere. Either choice computes the same bits. */
            int dev = 0, nsm = 0, smax = 0;
            e = cudaGetDevice(&dev);
            if (e == cudaSuccess)
                e = cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev);
            if (e == cudaSuccess)
                e = cudaDeviceGetAttribute(&smax, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
            if (e != cudaSuccess)
                return lowp_why_set(why, why_len, "extend: device attributes: %s",
                                    cudaGetErrorString(e));
            const size_t ctas8 = (qmax * G + 127) / 128 * a->num_kv_heads * a->batch;
            size_t pmax = 0;
            for (size_t b = 0; a->prefix_len != NULL && b < a->batch; b++)
                pmax = (size_t)a->prefix_len[b] > pmax ? (size_t)a->prefix_len[b] : pmax;
            const int many = ctas8 >= 2 * (size_t)nsm || (ctas8 >= (size_t)nsm && pmax >= qmax);
            nw = many && smem_v2(a->qk_dim, a->vo_dim, 8) <= (size_t)smax ? 8 : 4;
        }
        smem = smem_v2(a->qk_dim, a->vo_dim, nw);
        p.q2_rs = 2 * p.Dq + 16;
        p.kb_rs = 2 * p.Dq + 16;
        p.vb_rs = 2 * p.Dv + 16;
        p.off_kb = 16 * nw * p.q2_rs;
        p.off_vb = p.off_kb + KB * p.kb_rs;
        p.off_stage = p.off_vb + KB * p.vb_rs; /* the one FP8 stage: K, then V at off_v */
        const unsigned rows = 16u * (unsigned)nw;
        const dim3 grid((unsigned)((qmax * G + rows - 1) / rows), (unsigned)a->num_kv_heads,
                        (unsigned)a->batch);
        if (nw == 8) {
            switch (p.Dv) {
            case 64: e = launch_v2<64, 8>(p, grid, smem, stream); break;
            case 128: e = launch_v2<128, 8>(p, grid, smem, stream); break;
            case 192: e = launch_v2<192, 8>(p, grid, smem, stream); break;
            default: e = launch_v2<256, 8>(p, grid, smem, stream); break;
            }
        } else {
            switch (p.Dv) {
            case 64: e = launch_v2<64, 4>(p, grid, smem, stream); break;
            case 128: e = launch_v2<128, 4>(p, grid, smem, stream); break;
            case 192: e = launch_v2<192, 4>(p, grid, smem, stream); break;
            default: e = launch_v2<256, 4>(p, grid, smem, stream); break;
            }
        }
    }
    if (e != cudaSuccess)
        return lowp_why_set(why, why_len, "extend kernel launch (%zu bytes of shared memory): %s",
                            smem, cudaGetErrorString(e));
    return 0;
}

/* The workspace's tables, made once (lowp's codec on the host): the E4M3 values of the
 * block scales (host and device) and the torch cast of every BF16 code (the host's; the
 * device computes it, ws_cast2). Made under g_tables_mu, so the first calls may come from
 * several threads at once (the conformance run's workspace cases do); the flags are
 * atomic so that a thread that sees one set also sees the table it guards. */
static std::mutex g_tables_mu;
static std::atomic<float *> g_e4m3; /* [256] on the device */
static uint8_t h_cast[65536];       /* the emulator's */
static float h_e4m3[256];
static std::atomic<int> h_ready;

static int ws_host_tables(char *why, size_t why_len)
{
    if (h_ready.load())
        return 0;
    std::lock_guard<std::mutex> lock(g_tables_mu);
    if (h_ready.load())
        return 0;
    lowp_codec torch_e4m3;
    if (lowp_codec_init(&torch_e4m3, LOWP_E4M3, LOWP_PROFILE_TORCH, LOWP_RN, LOWP_SAT_OFF, why,
                        why_len))
        return -1;
    for (unsigned c = 0; c < 65536; c++)
        h_cast[c] = (uint8_t)lowp_encode_f32(&torch_e4m3, lowp_f32_from_bf16((uint16_t)c));
    for (unsigned c = 0; c < 256; c++)
        h_e4m3[c] = lowp_decode_f32(LOWP_E4M3, (uint16_t)c);
    h_ready = 1;
    return 0;
}

static int ws_tables(char *why, size_t why_len)
{
    if (g_e4m3.load())
        return 0;
    if (ws_host_tables(why, why_len))
        return -1;
    std::lock_guard<std::mutex> lock(g_tables_mu);
    if (g_e4m3.load())
        return 0;
    float *dv = NULL;
    cudaError_t e = cudaMalloc(&dv, sizeof h_e4m3);
    if (e == cudaSuccess)
        e = cudaMemcpy(dv, h_e4m3, sizeof h_e4m3, cudaMemcpyHostToDevice);
    if (e != cudaSuccess) {
        cudaFree(dv);
        return lowp_why_set(why, why_len, "workspace tables: %s", cudaGetErrorString(e));
    }
    g_e4m3 = dv;
    return 0;
}

/* The host-side checks of a workspace fill shared by the kernel's launcher and the
 * emulator: cfg the cache's config, pt the page table. */
static int ws_check(const lowp_kv_config *cfg, const lowp_kv_page_table *pt,
                    const lowp_gpu_extend_args *a, char *why, size_t why_len)
{
    if (lowp_gpu_extend_check(a, why, why_len))
        return -1;
    if (cfg->format != LOWP_NVFP4)
        return lowp_why_set(why, why_len,
                            "the workspace is dequantized from an nvfp4 cache; this one is %s",
                            lowp_block_format_name(cfg->format));
    if (cfg->num_heads != a->num_kv_heads || cfg->qk_dim != a->qk_dim ||
        cfg->vo_dim != a->vo_dim)
        return lowp_why_set(why, why_len,
                            "the cache has %zu KV heads and dims %zu/%zu; the extend %zu and "
                            "%zu/%zu",
                            cfg->num_heads, cfg->qk_dim, cfg->vo_dim, a->num_kv_heads,
                            a->qk_dim, a->vo_dim);
    if (a->prefix_len == NULL)
        return lowp_why_set(why, why_len, "an extend workspace needs prefix_len");
    if (lowp_kv_page_table_check(pt, cfg->num_pages, cfg->page_size, why, why_len))
        return -1;
    if (pt->batch != a->batch)
        return lowp_why_set(why, why_len, "the page table has %zu sequences, the extend %zu",
                            pt->batch, a->batch);
    for (size_t b = 0; b < a->batch; b++)
        if (lowp_kv_seq_len(pt, cfg->page_size, b) < (size_t)a->prefix_len[b])
            return lowp_why_set(why, why_len,
                                "sequence %zu: the page table holds %zu positions, the prefix "
                                "is %d",
                                b, lowp_kv_seq_len(pt, cfg->page_size, b), a->prefix_len[b]);
    if (a->batch > 65535)
        return lowp_why_set(why, why_len, "batch %zu: at most 65535", a->batch);
    return 0;
}

/* Every field of a workspace fill's parameters: the cache's buffers and global scales (kg,
 * vg: n_global each), the index arrays, the chunk, the workspace and the tables (vals: the
 * 256 E4M3 values; cast: the host's torch cast table, NULL on the device), device or host
 * pointers alike. */
static WsParams ws_params(const lowp_kv_config *cfg, size_t n_global, const uint8_t *kc,
                          const uint8_t *vc, const uint8_t *ks, const uint8_t *vs,
                          const float *kg, const float *vg, const int32_t *pt_indptr,
                          const int32_t *pt_indices, const int32_t *qo, const int32_t *kv,
                          const int32_t *pre, const uint16_t *kch, const uint16_t *vch,
                          uint8_t *kws, uint8_t *vws, const uint8_t *cast, const float *e4m3)
{
    WsParams p = {kc, vc, ks, vs, kg, vg, pt_indptr, pt_indices, qo, kv, pre, kch, vch, kws,
                  vws, cast, e4m3, 0, 0, 0, 0, 0, 0, 0, 0, {}, {}, {}, {},
                  0, 0, 0, 0, 0, 0, {}, {}, {}, {}};
    p.H = (int)cfg->num_heads;
    p.Dq = (int)cfg->qk_dim;
    p.Dv = (int)cfg->vo_dim;
    p.PS = (int)cfg->page_size;
    p.hnd = cfg->layout == LOWP_KV_HND;
    p.k_il = cfg->k_sf_order == LOWP_KV_SF_INTERLEAVE4;
    p.v_il = cfg->v_sf_order == LOWP_KV_SF_INTERLEAVE4;
    p.per_head = n_global > 1;
    p.dH = lowp_div32_make((uint32_t)p.H);
    p.dPS = lowp_div32_make((uint32_t)p.PS);
    p.dkq4 = lowp_div32_make((uint32_t)(p.Dq / 64 ? p.Dq / 64 : 1)); /* S / 4 = D / 64 */
    p.dvq4 = lowp_div32_make((uint32_t)(p.Dv / 64 ? p.Dv / 64 : 1));
    return p;
}

/* The staged prefix's unit (ws_staged): HG the largest divisor of H whose rows hold at
 * most 1 KB of code bytes, TT positions a unit when that is every head (up to 32, the
 * lanes that load page indices), else 1; a stage's bytes <= 1,184, so 8 warps' 4 stages
 * stay under 48 KB. Linear scale order only (an interleaved row's scales are not one
 * contiguous run): otherwise staged = 0. */
static void ws_staged_plan(WsParams *p)
{
    const int D = p->Dq + p->Dv;
    p->HG = 1;
    for (int g = 1; g <= p->H; g++)
        if (p->H % g == 0 && g * D / 2 <= 1024)
            p->HG = g;
    p->TT = 1;
    if (p->HG == p->H) {
        const int tt = 1024 / (p->H * D / 2);
        p->TT = tt < 1 ? 1 : tt > 32 ? 32 : tt;
    }
    p->NG = p->H / p->HG;
    const int R = p->TT * p->HG;
    p->stage_bytes = (R * D / 2 + R * D / 16 + 4 * p->TT + 15) / 16 * 16;
    p->dNG = lowp_div32_make((uint32_t)p->NG);
    p->dHG = lowp_div32_make((uint32_t)p->HG);
    p->dNB = lowp_div32_make((uint32_t)(D / 16));
    p->lin = !p->hnd && p->HG == p->H;
    p->dCH = lowp_div32_make((uint32_t)((p->lin ? p->H : 1) * (D / 32 + D / 64)));
    p->staged = !p->k_il && !p->v_il;
}

/* The default fill ("auto") takes the staged kernel where the batch's prefixes hold more
 * than WS_STAGED_ELEMS elements (the sum over sequences of prefix x kv heads x (Dq + Dv)):
 * the staged kernel's warps need that much work to beat the rows kernel, whatever the
 * batch or head dim. Measured on an H100 (2026-12-06, chunks of 512 and 2K, 8 kv heads,
 * tools/ws_fill_sweep.sh and the notes in reports/gpu-extend-h200-notes.md): at 2^24
 * elements and below the rows kernel was as fast or faster at 11 of 14 shapes (batch 1: d 64
 * over 4K-8K, d 128 over 4K-8K, d 256 over 4K; d 256 over 4K at chunk 512 rows 23.2 us,
 * staged 29.3), above it the staged one at 17 of 18 (batch 1 d 128 from 12K, d 64 over
 * 32K, d 256 from 6K, batch 4 from 4K; 1.2-1.4x from 2^25). */
enum : unsigned long long { WS_STAGED_ELEMS = 1ull << 24 };

/* LOWP_GPU_WS_FILL: "rows" (*mode 0), "staged" (1), unset or "auto" (2: staged where the
 * prefixes hold more than WS_STAGED_ELEMS elements); anything else refused. The launcher
 * and the emulator read it alike (ws_fill_staged). */
static int ws_fill_choice(int *mode, char *why, size_t why_len)
{
    const char *env = getenv("LOWP_GPU_WS_FILL");
    if (env == NULL || strcmp(env, "auto") == 0)
        *mode = 2;
    else if (strcmp(env, "rows") == 0 || strcmp(env, "staged") == 0)
        *mode = env[0] == 's';
    else
        return lowp_why_set(why, why_len, "LOWP_GPU_WS_FILL=%s: expected auto, rows or staged",
                            env);
    return 0;
}

/* Whether the fill of a batch of n sequences with prefixes pre[] (kv heads H, dims Dq and Dv)
 * asks for the staged kernel. */
static int ws_fill_staged(int mode, const int32_t *pre, size_t n, size_t H, size_t Dq, size_t Dv)
{
    if (mode != 2)
        return mode == 1;
    unsigned long long pos = 0; /* prefixes are int32 and n a batch: no overflow */
    for (size_t b = 0; b < n; b++)
        pos += (unsigned long long)pre[b];
    return pos * H * (Dq + Dv) > WS_STAGED_ELEMS;
}

extern "C" const char *lowp_gpu_extend_workspace_fill(void)
{
    int mode = 0;
    if (ws_fill_choice(&mode, NULL, 0))
        return NULL;
    return mode == 2 ? "auto" : mode ? "staged" : "rows";
}

extern "C" unsigned long long lowp_gpu_extend_workspace_staged_elems(void)
{
    return WS_STAGED_ELEMS;
}

extern "C" int lowp_gpu_extend_workspace_emulate(const lowp_kvcache *cache,
                                                 const lowp_kv_page_table *pt,
                                                 const lowp_gpu_extend_args *a,
                                                 const uint16_t *k_chunk, const uint16_t *v_chunk,
                                                 uint8_t *k_ws, uint8_t *v_ws, char *why,
                                                 size_t why_len)
{
    if (cache == NULL || pt == NULL || a == NULL || k_chunk == NULL || v_chunk == NULL ||
        k_ws == NULL || v_ws == NULL)
        return lowp_why_set(why, why_len, "cache, page table, args, chunk and workspace must "
                                          "not be NULL");
    const lowp_kv_config *cfg = lowp_kvcache_config(cache);
    if (ws_check(cfg, pt, a, why, why_len) || ws_host_tables(why, why_len))
        return -1;
    if (((uintptr_t)k_chunk | (uintptr_t)v_chunk | (uintptr_t)k_ws | (uintptr_t)v_ws) % 16)
        return lowp_why_set(why, why_len, "chunk and workspace must be 16-byte aligned");
    size_t n_global = cfg->scale_gran == LOWP_KV_SCALE_HEAD ? cfg->num_heads : 1, bytes;
    float kg[LOWP_GPU_EXTEND_MAX_GROUP * 64], vg[LOWP_GPU_EXTEND_MAX_GROUP * 64];
    if (n_global > sizeof kg / sizeof kg[0])
        return lowp_why_set(why, why_len, "%zu per-head global scales: at most %zu", n_global,
                            sizeof kg / sizeof kg[0]);
    for (size_t h = 0; h < n_global; h++) {
        kg[h] = lowp_kvcache_global_scale(cache, LOWP_KV_K, h);
        vg[h] = lowp_kvcache_global_scale(cache, LOWP_KV_V, h);
    }
    WsParams p = ws_params(cfg, n_global, lowp_kvcache_cbuffer(cache, LOWP_KV_K, LOWP_KV_CODES, &bytes),
                           lowp_kvcache_cbuffer(cache, LOWP_KV_V, LOWP_KV_CODES, &bytes),
                           lowp_kvcache_cbuffer(cache, LOWP_KV_K, LOWP_KV_SCALES, &bytes),
                           lowp_kvcache_cbuffer(cache, LOWP_KV_V, LOWP_KV_SCALES, &bytes), kg, vg,
                           pt->indptr, pt->indices, a->qo_indptr, a->kv_indptr, a->prefix_len,
                           k_chunk, v_chunk, k_ws, v_ws, h_cast, h_e4m3);
    int mode = 0;
    if (ws_fill_choice(&mode, why, why_len))
        return -1;
    ws_staged_plan(&p);
    const int staged = ws_fill_staged(mode, a->prefix_len, a->batch, cfg->num_heads, cfg->qk_dim,
                                      cfg->vo_dim) &&
                       p.staged;
    /* the staged kernel's schedule, unit by unit (its warps' interleaving changes nothing:
     * units are disjoint): the same chunk copies into a stage, the same block function */
    uint2 tab[2][256];
    uint8_t *st = staged ? (uint8_t *)aligned_alloc(16, (size_t)p.stage_bytes) : NULL;
    if (staged && st == NULL)
        return lowp_why_set(why, why_len, "out of memory");
    if (staged && !p.per_head)
        ws_tab_fill(p, p.e4m3, tab, 0, 1);
    const int nb = (p.Dq + p.Dv) / 16, R = p.TT * p.HG, D = p.Dq + p.Dv;
    for (size_t b = 0; b < a->batch; b++) {
        const WsSeq s = ws_seq(p, (int)b);
        const int n = a->prefix_len[b] + a->qo_indptr[b + 1] - a->qo_indptr[b];
        /* the staged kernel's chunk rows first, then its units: a unit that wrote past
         * the prefix would overwrite chunk rows and be caught */
        const bool su = staged && ws_units(p, (size_t)s.P) <= (size_t)INT32_MAX;
        for (int t = su ? s.P : 0; t < n; t++)
            for (int h = 0; h < p.H; h++)
                for (int blk = 0; blk < nb; blk++)
                    *ws_dst(p, s, t, h, blk) = ws_bytes(p, p.e4m3, ws_load(p, s, t, h, blk));
        if (su) {
            const int units = (int)ws_units(p, (size_t)s.P);
            int *pages = reinterpret_cast<int *>(st + ws_stage(p).pg);
            for (int u = 0; u < units; u++) {
                const int tu = (int)lowp_div32_q(p.dNG, (uint32_t)u), g = u - tu * p.NG;
                memset(st, 0xA5, (size_t)p.stage_bytes); /* what a stage held before */
                for (int lane = 0; lane < p.TT; lane++)
                    pages[lane] = ws_unit_page(p, s, u, lane);
                for (int c = 0; c < R * (D / 32 + D / 64); c++) {
                    const WsChunk ch = ws_chunk(p, s, tu * p.TT, g, pages, c);
                    if (ch.bytes)
                        memcpy(st + ch.off, ch.src, (size_t)ch.bytes);
                }
                if (p.lin && !p.per_head)
                    ws_convert_lin(p, s, p.e4m3, tab, st, tu * p.TT, 0, 1);
                else
                    for (int k = 0; k < R * nb; k++)
                        ws_block_out(p, s, p.e4m3, p.per_head ? NULL : tab, st, tu * p.TT, g,
                                     k);
            }
        }
    }
    free(st);
    return 0;
}

extern "C" int lowp_gpu_extend_workspace(const lowp_gpu_extend_ws_desc *d, uint8_t *k_ws_dev,
                                         uint8_t *v_ws_dev, cudaStream_t stream, char *why,
                                         size_t why_len)
{
    if (d == NULL || d->cache == NULL || d->pt_host == NULL)
        return lowp_why_set(why, why_len, "desc, cache and page table must not be NULL");
    const lowp_gpu_extend_args *a = &d->host;
    const lowp_kv_config *cfg = &d->cache->cfg;
    if (lowp_gpu_kvcache_check(d->cache, why, why_len) || ws_check(cfg, d->pt_host, a, why, why_len))
        return -1;
    if (d->prefix_len_dev == NULL)
        return lowp_why_set(why, why_len, "an extend workspace needs prefix_len_dev");
    if (!d->pt_indptr_dev || !d->pt_indices_dev || !d->qo_indptr_dev || !d->kv_indptr_dev ||
        !d->k_chunk_dev || !d->v_chunk_dev || !k_ws_dev || !v_ws_dev)
        return lowp_why_set(why, why_len, "device pointers must not be NULL");
    if (((uintptr_t)d->k_chunk_dev | (uintptr_t)d->v_chunk_dev | (uintptr_t)k_ws_dev |
         (uintptr_t)v_ws_dev) % 16)
        return lowp_why_set(why, why_len, "chunk and workspace must be 16-byte aligned");
    if (ws_tables(why, why_len))
        return -1;
    const lowp_gpu_kvcache *c = d->cache;
    WsParams p = ws_params(cfg, c->n_global, c->k_codes, c->v_codes, c->k_scales, c->v_scales,
                           c->k_global, c->v_global, d->pt_indptr_dev, d->pt_indices_dev,
                           d->qo_indptr_dev, d->kv_indptr_dev, d->prefix_len_dev, d->k_chunk_dev,
                           d->v_chunk_dev, k_ws_dev, v_ws_dev, NULL, g_e4m3.load());
    size_t pmax = 0, cmax = 0, nmax = 0;
    for (size_t b = 0; b < a->batch; b++) {
        const size_t pre = (size_t)a->prefix_len[b];
        const size_t n = (size_t)(a->qo_indptr[b + 1] - a->qo_indptr[b]);
        pmax = pre > pmax ? pre : pmax;
        cmax = n > cmax ? n : cmax;
        nmax = pre + n > nmax ? pre + n : nmax;
    }
    /* ws_rows: nb <= 32 blocks a row (dims <= 256), ny rows a CTA of 256 threads; enough
     * CTAs for the longest sequence's rows (grid-stride beyond 65535 CTAs) */
    const size_t nb = (cfg->qk_dim + cfg->vo_dim) / 16, ny = 256 / nb, H = cfg->num_heads;
    int mode = 0;
    if (ws_fill_choice(&mode, why, why_len))
        return -1;
    const int want_staged =
        ws_fill_staged(mode, a->prefix_len, a->batch, H, cfg->qk_dim, cfg->vo_dim);
    ws_staged_plan(&p);
    /* the staged kernel's 16- and 4-byte copies need the buffers so aligned (cudaMalloc's
     * are; a cache made of other pointers may not be) */
    const int aligned = ((uintptr_t)p.kc | (uintptr_t)p.vc) % 16 == 0 &&
                        ((uintptr_t)p.ks | (uintptr_t)p.vs) % 4 == 0;
    const size_t units = ws_units(p, pmax);
    cudaError_t e = cudaSuccess;
    if (want_staged && p.staged && aligned &&
        units + 4 * 8 * (size_t)65536 < (size_t)INT32_MAX) {
        int sms = 0, dev = 0, per_sm = 0;
        const size_t smem = (size_t)8 * WS_STAGES * (size_t)p.stage_bytes;
        e = cudaGetDevice(&dev);
        if (e == cudaSuccess)
            e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        if (e == cudaSuccess)
            e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, ws_fill_staged_kernel, 256, smem);
        if (e != cudaSuccess)
            return lowp_why_set(why, why_len, "workspace fill: %s", cudaGetErrorString(e));
        /* the prefix: one wave of resident CTAs (8 warps each), each warp at least 4 units
         * (at least 1 or 2 timed the same within 2 us at every bench shape, 2026-12-06);
         * the chunk: ws_rows' CTAs for its rows; both z planes get the larger count */
        size_t sx = (units + 8 * 4 - 1) / (8 * 4);
        const size_t wave = (size_t)sms * (size_t)(per_sm > 0 ? per_sm : 1);
        sx = sx < wave ? sx : wave;
        size_t bx = (cmax * H + ny * WS_U - 1) / (ny * WS_U);
        bx = sx > bx ? sx : bx;
        bx = bx > 65535 ? 65535 : bx;
        ws_fill_staged_kernel<<<dim3((unsigned)(bx ? bx : 1), (unsigned)a->batch, 2), 256, smem,
                                stream>>>(p);
    } else {
        size_t blocks = (nmax * H + ny * WS_U - 1) / (ny * WS_U);
        blocks = blocks > 65535 ? 65535 : blocks;
        ws_fill_kernel<<<dim3((unsigned)(blocks ? blocks : 1), (unsigned)a->batch),
                         dim3((unsigned)nb, (unsigned)ny), 0, stream>>>(p);
    }
    e = cudaGetLastError();
    if (e != cudaSuccess)
        return lowp_why_set(why, why_len, "workspace kernel launch: %s", cudaGetErrorString(e));
    return 0;
}

extern "C" int lowp_gpu_extend_ws_cast(uint8_t *full, uint8_t *fast, char *why, size_t why_len)
{
    if (full == NULL || fast == NULL)
        return lowp_why_set(why, why_len, "full and fast must not be NULL");
    uint8_t *d = NULL;
    cudaError_t e = cudaMalloc(&d, 2 * 65536);
    if (e == cudaSuccess) {
        ws_cast_kernel<<<128, 256>>>(d, d + 65536);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess)
        e = cudaMemcpy(full, d, 65536, cudaMemcpyDeviceToHost);
    if (e == cudaSuccess)
        e = cudaMemcpy(fast, d + 65536, 65536, cudaMemcpyDeviceToHost);
    cudaFree(d);
    if (e != cudaSuccess)
        return lowp_why_set(why, why_len, "workspace cast check: %s", cudaGetErrorString(e));
    return 0;
}

extern "C" int lowp_gpu_extend_ws_cast_emulate(uint8_t *full, uint8_t *fast, char *why,
                                               size_t why_len)
{
    if (full == NULL || fast == NULL)
        return lowp_why_set(why, why_len, "full and fast must not be NULL");
    lowp_codec cvt; /* lowp's model of cvt.rn.satfinite.e4m3x2.f32 */
    if (lowp_codec_init(&cvt, LOWP_E4M3, LOWP_PROFILE_CUDA, LOWP_RN, 1, why, why_len))
        return -1;
    for (uint32_t i = 0; i < 32768; i++) {
        const uint32_t w = (2 * i) | (2 * i + 1) << 16;
        const uint32_t r = lowp_encode_f32(&cvt, lowp_f32_from_bits(w << 16)) |
                           (uint32_t)lowp_encode_f32(&cvt, lowp_f32_from_bits(w & 0xFFFF0000u))
                               << 8;
        const uint32_t a = ws_patch(w, r);
        full[2 * i] = (uint8_t)a;
        full[2 * i + 1] = (uint8_t)(a >> 8);
        fast[2 * i] = (uint8_t)r;
        fast[2 * i + 1] = (uint8_t)(r >> 8);
    }
    return 0;
}

extern "C" long long lowp_gpu_extend_ws_lut_check(int gpu, size_t *blocks, char *why,
                                                  size_t why_len)
{
    const uint32_t n = 65536u * WS_LUT_NG;
    *blocks = (size_t)WS_LUT_NG * 65536u / 256u * 254u; /* the finite scale codes */
    long long divbad = 0; /* lowp_div32_q (div32.h): integer arithmetic, the same on both sides */
    uint64_t rs = 0x9E3779B97F4A7C15ull;
    for (uint32_t d = 1; d < 8192; d++) {
        const lowp_div32 v = lowp_div32_make(d);
        divbad += lowp_div32_q(v, 0) != 0 || lowp_div32_q(v, 0x7FFFFFFFu) != 0x7FFFFFFFu / d;
        for (uint32_t m = d; m < (1u << 20); m += d)
            divbad += lowp_div32_q(v, m) != m / d || lowp_div32_q(v, m - 1) != (m - 1) / d ||
                      lowp_div32_q(v, m + 1) != (m + 1) / d;
        for (int k = 0; k < 4096; k++) {
            rs = rs * 6364136223846793005ull + 1442695040888963407ull;
            const uint32_t x = (uint32_t)(rs >> 33); /* < 2^31 */
            divbad += lowp_div32_q(v, x) != x / d;
        }
    }
    if (divbad)
        return lowp_why_set(why, why_len, "workspace index division: %lld wrong quotients", divbad);
    if (!gpu) {
        if (ws_host_tables(why, why_len))
            return -1;
        WsParams p = {};
        p.cast = h_cast;
        long long bad = 0;
        for (uint32_t i = 0; i < n; i++)
            bad += ws_lut_one(p, h_e4m3, i);
        return bad;
    }
    if (ws_tables(why, why_len))
        return -1;
    unsigned long long *d = NULL, bad = 0;
    cudaError_t e = cudaMalloc(&d, sizeof *d);
    if (e == cudaSuccess)
        e = cudaMemset(d, 0, sizeof *d);
    if (e == cudaSuccess) {
        ws_lut_kernel<<<(n + 255) / 256, 256>>>(g_e4m3.load(), d);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess)
        e = cudaMemcpy(&bad, d, sizeof bad, cudaMemcpyDeviceToHost);
    cudaFree(d);
    if (e != cudaSuccess)
        return lowp_why_set(why, why_len, "workspace table check: %s", cudaGetErrorString(e));
    return (long long)bad;
}
