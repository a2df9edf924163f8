/* Causal extend / prefill attention over an FP8 E4M3 workspace (lowp/gpu_extend.h). The
 * arithmetic, step by step, is lowp/attn_gpu_extend.h's definition; the comments below
 * name the step each piece is. Compiled with --fmad=false (gpu/extend.cmake): every a*b+c
 * here is two roundings, as in the emulator; only exp2_sw's explicit fmaf calls are fused.
 *
 * One CTA of 4 warps per (sequence b, KV head h, 64 packed query rows); warp w owns rows
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
 * What to expect (d = 128, per warp and 64-position block): 128 mma.sync (64 QK, 64 PV),
 * and about 2000 other instructions (1024 scores: 32 exp2_sw per lane at about 16
 * instructions; the FP8 -> BF16 conversions of K and V, done by each of the 4 warps).
 * Issue, not the tensor cores, bounds it: roughly a third of mma.sync's peak, 150-250
 * TFLOP/s on the H200 (measured by `lowp gpu bench --extend`, reports under reports/).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "lowp/attn_gpu_emul.h"
#include "lowp/attn_gpu_extend.h"
#include "lowp/exp2_sw.h"
#include "lowp/format.h"
#include "lowp/gpu_extend.h"
#include "lowp/why.h"
#include "decode_bf16.cuh"
#include "decode_e2m1.h"

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
    const float alpha = none ? 1.0f : lowp_exp2_sw(m - mn);
    float L = 0.0f;
#pragma unroll
    for (int n = 0; n < 8; n++) {
        s[n][0] = none ? 0.0f : lowp_exp2_sw(s[n][0] - mn);
        s[n][1] = none ? 0.0f : lowp_exp2_sw(s[n][1] - mn);
        L = L + s[n][0];
        L = L + s[n][1];
    }
    l = l * alpha + L;
    m = mn;
    return alpha;
}

template <int DV>
__global__ void __launch_bounds__(128) extend_kernel(Params p)
{
    extern __shared__ __align__(16) uint8_t sm[];
    const int b = blockIdx.z, h = blockIdx.y;
    const int q0 = p.qo[b], ql = p.qo[b + 1] - q0, P = p.pre ? p.pre[b] : 0;
    const int kvlen = P + ql, nrows = ql * p.G, Rc = blockIdx.x * CROWS;
    const size_t row0 = (size_t)p.kv[b];
    if (Rc >= nrows)
        return;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    /* step 3: the CTA streams the blocks its last row needs, each warp those of its own */
    const int nb_cta = (P + min(Rc + CROWS - 1, nrows - 1) / p.G) / KB + 1;
    const int R0 = Rc + warp * 16;
    const int nb_w = R0 < nrows ? (P + min(R0 + 15, nrows - 1) / p.G) / KB + 1 : 0;
    const int Ra = R0 + g, Rb = R0 + g + 8;
    const int seeA = Ra < nrows ? P + Ra / p.G : -1, seeB = Rb < nrows ? P + Rb / p.G : -1;

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
#pragma unroll
            for (int n = 0; n < 8; n++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int pos = kb * KB + 8 * n + 2 * t + e;
                    sA[n][e] = pos <= seeA ? S[n][e] * p.qks : -INFINITY;
                    sB[n][e] = pos <= seeB ? S[n][2 + e] * p.qks : -INFINITY;
                }
            /* step 5 */
            const float alA = softmax_row(sA, mA, lA), alB = softmax_row(sB, mB, lB);
#pragma unroll
            for (int n = 0; n < DV / 8; n++) {
                o[n][0] = o[n][0] * alA;
                o[n][1] = o[n][1] * alA;
                o[n][2] = o[n][2] * alB;
                o[n][3] = o[n][3] * alB;
            }
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const uint4 pa = make_uint4(pack_bf16(sA[2 * j][0], sA[2 * j][1]),
                                            pack_bf16(sB[2 * j][0], sB[2 * j][1]),
                                            pack_bf16(sA[2 * j + 1][0], sA[2 * j + 1][1]),
                                            pack_bf16(sB[2 * j + 1][0], sB[2 * j + 1][1]));
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
    lA = lA + __shfl_xor_sync(0xffffffffu, lA, 1);
    lA = lA + __shfl_xor_sync(0xffffffffu, lA, 2);
    lB = lB + __shfl_xor_sync(0xffffffffu, lB, 1);
    lB = lB + __shfl_xor_sync(0xffffffffu, lB, 2);
#pragma unroll
    for (int e = 0; e < 4; e++) {
        const int R = e < 2 ? Ra : Rb;
        if (R >= nrows)
            continue;
        const float l = e < 2 ? lA : lB;
        uint16_t *dst = p.out + ((size_t)(q0 + R / p.G) * p.NQ + (size_t)(h * p.G + R % p.G)) *
                                    (size_t)p.Dv;
#pragma unroll
        for (int c = 0; c < DV / 64; c++)
#pragma unroll
            for (int i = 0; i < 8; i++)
                dst[64 * c + 8 * (2 * t + (e & 1)) + i] =
                    (uint16_t)(pack_bf16(o[8 * c + i][e] / l, 0.0f) & 0xFFFFu);
    }
}

template <int DV> cudaError_t launch(const Params &p, dim3 grid, size_t smem, cudaStream_t s)
{
    cudaError_t e = cudaFuncSetAttribute(extend_kernel<DV>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess)
        return e;
    extend_kernel<DV><<<grid, 128, smem, s>>>(p);
    return cudaGetLastError();
}

} // namespace

extern "C" size_t lowp_gpu_extend_smem_bytes(size_t qk_dim, size_t vo_dim)
{
    return (size_t)CROWS * q_row_stride((int)qk_dim) +
           2 * (size_t)KB * (kv_row_stride((int)qk_dim) + kv_row_stride((int)vo_dim));
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
    if (qmax * G > (size_t)INT32_MAX - CROWS)
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
    const size_t smem = lowp_gpu_extend_smem_bytes(a->qk_dim, a->vo_dim);
    const dim3 grid((unsigned)((qmax * G + CROWS - 1) / CROWS), (unsigned)a->num_kv_heads,
                    (unsigned)a->batch);
    cudaError_t e;
    switch (p.Dv) {
    case 64: e = launch<64>(p, grid, smem, stream); break;
    case 128: e = launch<128>(p, grid, smem, stream); break;
    case 192: e = launch<192>(p, grid, smem, stream); break;
    default: e = launch<256>(p, grid, smem, stream); break;
    }
    if (e != cudaSuccess)
        return lowp_why_set(why, why_len, "extend kernel launch (%zu bytes of shared memory): %s",
                            smem, cudaGetErrorString(e));
    return 0;
}
