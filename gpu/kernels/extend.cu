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
 * What to expect (d = 128). Shared memory 55,296 bytes a CTA (Q 18,432 + two stages of
 * K and V, 36,864): 4 CTAs an SM by shared memory; ptxas gives 158 registers a thread
 * (224 for vo_dim 256, no spills), so 3 CTAs (12 warps) an SM. Per warp and 64-position
 * block: 128 mma.sync m16n8k16 (64 for Q.K, 64 for P.V: 524,288 FLOP) and about 2,000
 * other instructions (1,024 scores: 32 exp2_sw a lane at about 16 instructions each; the
 * FP8 -> BF16 conversions of K and V, which each of the 4 warps repeats; byte permutes of
 * V; the rescales). Issue, not the tensor cores, bounds it: at 4 instructions a clock an
 * SM, about 525 clocks a warp-block, i.e. at most ~260 TFLOP/s on 132 SMs at 1.98 GHz,
 * realistically 150-250 (causal imbalance, latency at 12 warps an SM). That would meet
 * the issue's 0.5x of SDPA on extends (cuDNN ~300 TFLOP/s there) and likely not on 4K-8K
 * prefills (cuDNN 521-617). The next steps, if measured so: K/V converted once a CTA into
 * BF16 shared memory (ldmatrix), the hardware ex2 modelled (issue item 3).
 * Measured by lowp_gpu_extend_bench (tools/gpu_run.sh step extend).
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
#include "lowp/kvcache.h"
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
    /* the last query tiles (the most key blocks) first, so that the short ones fill the
     * tail of the grid; the CTA grouping changes no bit (step 2) */
    const int kvlen = P + ql, nrows = ql * p.G, Rc = (gridDim.x - 1 - blockIdx.x) * CROWS;
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

/* ---- The workspace fill (lowp/gpu_extend.h, lowp_gpu_extend_workspace) ----------------
 * Thread x of a CTA owns block x of a workspace row: blockDim (nb, NY), nb = (Dq + Dv) / 16
 * blocks a (position, head) row (K blocks first); an iteration covers WS_U x NY rows, every
 * thread loading its WS_U blocks before it stores one; grid-stride over the sequence's rows
 * (position t, head h). The device computes torch's E4M3 cast with cvt.rn.satfinite
 * (ws_cast2) and the E2M1 values by bit placement (lowp_dec_e2m1x8_sub); the host emulator
 * runs the same ws_load / ws_bytes / ws_dst with lowp's codec table for the cast, so the
 * kernel's indexing and arithmetic run on the CPU and the cast alone is proven on the
 * device (lowp_gpu_extend_ws_cast, all 65,536 BF16 codes, gpu/check/extend_check.c). */
struct WsParams {
    const uint8_t *kc, *vc, *ks, *vs; /* the NVFP4 cache's codes and block scales */
    const float *kg, *vg;             /* decode-side global scales, n_global each */
    const int32_t *pt_indptr, *pt_indices, *qo, *kv, *pre;
    const uint16_t *kch, *vch;        /* the chunk, BF16 */
    uint8_t *kws, *vws;
    const uint8_t *cast;              /* host only, [65536]: BF16 bits -> torch E4M3 code */
    const float *e4m3;                /* [256]: binary32 values of the codes */
    int H, Dq, Dv, PS, hnd, k_il, v_il, per_head;
};

/* Row (page, slot, head) -> row index of codes and of (linear) scales. */
__host__ __device__ __forceinline__ size_t ws_row(const WsParams &p, size_t page, int slot, int h)
{
    return p.hnd ? (page * p.H + h) * p.PS + slot : (page * p.PS + slot) * p.H + h;
}

/* Offset of block scale s of (page, slot, head) among S a row: lowp/kvcache.h's formula,
 * the 4-token interleave when il. */
__host__ __device__ __forceinline__ size_t ws_scale_off(const WsParams &p, size_t page, int slot,
                                                        int h, int s, int S, int il)
{
    int t = slot, u = s;
    if (il) {
        const int q4 = S / 4;
        t = (slot / 4) * 4 + s / q4;
        u = (s % q4) * 4 + slot % 4;
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
        const size_t page = (size_t)p.pt_indices[s.pt0 + t / p.PS];
        const int slot = t % p.PS;
        const uint8_t *code = (isk ? p.kc : p.vc) + ws_row(p, page, slot, h) * (D / 2) + 8 * j;
        in.sc = (isk ? p.ks : p.vs)[ws_scale_off(p, page, slot, h, j, D / 16,
                                                 isk ? p.k_il : p.v_il)];
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

__host__ __device__ __forceinline__ uint4 ws_bytes(const WsParams &p, const float *e4m3,
                                                   const WsIn &in)
{
    uint32_t wv[8]; /* the block's 16 BF16 values, element i in half i & 1 of word i / 2 */
    bool ovf;
    if (in.prefix) {
        const float sf = e4m3[in.sc], g = in.g;
        /* e[q][k]: elements of word q; pair k of lowp_dec_e2m1x8_sub is elements k (low
         * half) and k + 4, each 2^-126 x the E2M1 value, exact; x 2^126 is exact too
         * (no flush: --ftz=false), giving the value the codec's table has */
        uint32_t e[2][4];
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
        /* |x_i| = fl(|v_i sf| |g|) <= fl(6 sf |g|) (v_i sf and 6 sf exact, rounding
         * monotone), so fl(6 sf |g|) <= 448 bounds every BF16 below WS_NAN_FROM; a NaN
         * sf or g fails the test */
        ovf = !((6.0f * sf) * fabsf(g) <= 448.0f);
    } else {
        wv[0] = in.a.x, wv[1] = in.a.y, wv[2] = in.a.z, wv[3] = in.a.w;
        wv[4] = in.c.x, wv[5] = in.c.y, wv[6] = in.c.z, wv[7] = in.c.w;
        uint32_t any = 0;
        for (int i = 0; i < 8; i++)
            any |= (wv[i] & 0x7FFF7FFFu) + WS_OVF_ADD;
        ovf = (any & 0x80008000u) != 0;
    }
    uint32_t r[8];
    for (int i = 0; i < 8; i++)
        r[i] = ws_cast2(p, wv[i], ovf);
    return make_uint4(r[0] | r[1] << 16, r[2] | r[3] << 16, r[4] | r[5] << 16, r[6] | r[7] << 16);
}

/* WS_U rows a thread an iteration: rows base + u NY + y, u < WS_U (each u a warp's
 * consecutive rows, so the loads and stores stay coalesced), all loaded before any is
 * stored. Rows past the end load the last row again and store nothing. */
constexpr int WS_U = 4;

/* The rows (t, h) = (r / H, r % H) of sequence b: I is uint32_t when the sequence has at
 * most 2^31 - 1 rows (base + step < 2^31 + 2^23 cannot wrap: step <= 65535 x 32 x WS_U),
 * else size_t. */
template <typename I>
__device__ __forceinline__ void ws_rows(const WsParams &p, const float *e4m3, int b, I rows)
{
    const WsSeq s = ws_seq(p, b);
    const I ny = (I)blockDim.y, step = (I)gridDim.x * ny * WS_U;
    for (I base = (I)blockIdx.x * ny * WS_U + threadIdx.y; base < rows; base += step) {
        WsIn in[WS_U];
        int t[WS_U], h[WS_U];
#pragma unroll
        for (int u = 0; u < WS_U; u++) {
            I r = base + (I)u * ny;
            r = r < rows ? r : rows - 1;
            const I tq = r / (I)p.H;
            t[u] = (int)tq;
            h[u] = (int)(r - tq * (I)p.H);
            in[u] = ws_load(p, s, t[u], h[u], (int)threadIdx.x);
        }
#pragma unroll
        for (int u = 0; u < WS_U; u++)
            if (base + (I)u * ny < rows)
                *ws_dst(p, s, t[u], h[u], (int)threadIdx.x) = ws_bytes(p, e4m3, in[u]);
    }
}

__global__ void __launch_bounds__(256) ws_fill_kernel(WsParams p)
{
    __shared__ float e4m3[256];
    for (int i = threadIdx.y * blockDim.x + threadIdx.x; i < 256; i += blockDim.x * blockDim.y)
        e4m3[i] = p.e4m3[i];
    __syncthreads();
    const int b = blockIdx.y;
    const size_t rows = (size_t)(p.pre[b] + p.qo[b + 1] - p.qo[b]) * p.H;
    if (rows <= (size_t)INT32_MAX)
        ws_rows<uint32_t>(p, e4m3, b, (uint32_t)rows);
    else
        ws_rows<size_t>(p, e4m3, b, rows);
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

/* The workspace's tables, made once (lowp's codec on the host): the E4M3 values of the
 * block scales (host and device) and the torch cast of every BF16 code (the host's; the
 * device computes it, ws_cast2). Not thread-safe on first use. */
static float *g_e4m3;         /* [256] on the device */
static uint8_t h_cast[65536]; /* the emulator's */
static float h_e4m3[256];
static int h_ready;

static int ws_host_tables(char *why, size_t why_len)
{
    if (h_ready)
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
    if (g_e4m3)
        return 0;
    if (ws_host_tables(why, why_len))
        return -1;
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
                  vws, cast, e4m3, 0, 0, 0, 0, 0, 0, 0, 0};
    p.H = (int)cfg->num_heads;
    p.Dq = (int)cfg->qk_dim;
    p.Dv = (int)cfg->vo_dim;
    p.PS = (int)cfg->page_size;
    p.hnd = cfg->layout == LOWP_KV_HND;
    p.k_il = cfg->k_sf_order == LOWP_KV_SF_INTERLEAVE4;
    p.v_il = cfg->v_sf_order == LOWP_KV_SF_INTERLEAVE4;
    p.per_head = n_global > 1;
    return p;
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
    const int nb = (p.Dq + p.Dv) / 16;
    for (size_t b = 0; b < a->batch; b++) {
        const WsSeq s = ws_seq(p, (int)b);
        const int n = a->prefix_len[b] + a->qo_indptr[b + 1] - a->qo_indptr[b];
        for (int t = 0; t < n; t++)
            for (int h = 0; h < p.H; h++)
                for (int blk = 0; blk < nb; blk++)
                    *ws_dst(p, s, t, h, blk) = ws_bytes(p, p.e4m3, ws_load(p, s, t, h, blk));
    }
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
                           d->v_chunk_dev, k_ws_dev, v_ws_dev, NULL, g_e4m3);
    size_t nmax = 0;
    for (size_t b = 0; b < a->batch; b++) {
        size_t n = (size_t)a->prefix_len[b] + (size_t)(a->qo_indptr[b + 1] - a->qo_indptr[b]);
        nmax = n > nmax ? n : nmax;
    }
    /* blockDim (nb, NY): nb <= 32 blocks a row (dims <= 256), NY rows a CTA; the grid
     * covers the longest sequence's rows (grid-stride beyond 65535 CTAs) */
    const unsigned nb = (unsigned)((cfg->qk_dim + cfg->vo_dim) / 16), ny = 256 / nb;
    size_t blocks = (nmax * cfg->num_heads + (size_t)ny * WS_U - 1) / ((size_t)ny * WS_U);
    if (blocks > 65535)
        blocks = 65535;
    ws_fill_kernel<<<dim3((unsigned)(blocks ? blocks : 1), (unsigned)a->batch), dim3(nb, ny), 0,
                     stream>>>(p);
    cudaError_t e = cudaGetLastError();
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
