/* Paged decode attention kernels (lowp/gpu_decode.h). The arithmetic, step by step, is
 * lowp/attn_gpu_emul.h's definition; the comments below name the step each piece is.
 * Compiled with --fmad=false (gpu/decode.cmake): every a*b+c here is two roundings, as
 * in the emulator, and only the explicit fmaf calls of exp2_sw are fused.
 *
 * Thread roles (one warp per work item, lane = 4g + t):
 *   QK^T  mma.m16n8k16: A = Q (rows = the group's query heads, zero past G), B = K^T of
 *         8 positions; lane (g, t) loads K rows of tile positions g and g+8, the 16 dims
 *         64c + 16t .. 64c + 16t + 15 of chunk c (one NVFP4 block, contiguous bytes), so
 *         the MMA k order of k-step ks is the permutation dim(c, ks, kk) of the header.
 *   P V   mma.m16n8k16: A = P (the QK accumulators reused as BF16, FlashAttention-2's
 *         register trick), B = V of the 16 positions; lane (g, t) loads V rows of
 *         positions 2t, 2t+1, 2t+8, 2t+9, dims vbase + 8g .. + 7, and output column g of
 *         n-tile jn is dim vbase + 8g + jn.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "lowp/attn_gpu_emul.h"
#include "lowp/exp2_sw.h"
#include "lowp/gpu_decode.h"
#include "decode_internal.h"

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 1000) && defined(__CUDA_ARCH_FAMILY_SPECIFIC__)
#define LOWP_DEC_BLACKWELL_E2M1 1 /* hardware cvt.rn.f16x2.e2m1x2: compiled, never run */
#else
#define LOWP_DEC_BLACKWELL_E2M1 0
#endif

namespace {

enum Fmt { F_BF16 = 0, F_FP8 = 1, F_NVFP4 = 2, F_MXFP4 = 3 };

constexpr int WARPS = 4; /* work items (splits) per CTA: they share the staged Q */

typedef lowp_gpu_decode_params Params;

__device__ __forceinline__ int seq_len(const Params &p, int b)
{
    int np = p.indptr[b + 1] - p.indptr[b];
    return (np - 1) * p.PS + p.last[b];
}

/* Row index of (page, slot, head) in units of rows (codes and scales alike). */
__device__ __forceinline__ size_t row_of(const Params &p, size_t page, int slot, int h)
{
    return p.hnd ? ((page * p.H + h) * p.PS + slot) : ((page * p.PS + slot) * p.H + h);
}

/* Byte offset of block scale s of (page, slot, head), after the 4-token interleave. */
__device__ __forceinline__ size_t scale_off(const Params &p, size_t page, int slot, int h, int s,
                                            int S, int il)
{
    int tt = slot, u = s;
    if (il) {
        int q4 = S / 4;
        tt = (slot / 4) * 4 + s / q4;
        u = (s % q4) * 4 + slot % 4;
    }
    return row_of(p, page, tt, h) * S + u;
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi)
{
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&v);
}

__device__ __forceinline__ float bf16_lo(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t w) { return __uint_as_float(w & 0xFFFF0000u); }

/* Four E2M1 codes (low 16 bits of x, element 0 in the low nibble) -> BF16 pairs
 * (e0, e1), (e2, e3), exact. */
__device__ __forceinline__ void e2m1x4_bf16(uint32_t x, uint32_t &p01, uint32_t &p23)
{
#if LOWP_DEC_BLACKWELL_E2M1
    uint32_t h01, h23;
    uint16_t b01 = (uint16_t)(x & 0xFF), b23 = (uint16_t)((x >> 8) & 0xFF);
    asm("{ .reg .b8 t, z;\n\t"
        "mov.b16 {t, z}, %1;\n\t"
        "cvt.rn.f16x2.e2m1x2 %0, t; }"
        : "=r"(h01) : "h"(b01));
    asm("{ .reg .b8 t, z;\n\t"
        "mov.b16 {t, z}, %1;\n\t"
        "cvt.rn.f16x2.e2m1x2 %0, t; }"
        : "=r"(h23) : "h"(b23));
    float2 f01 = __half22float2(*reinterpret_cast<__half2 *>(&h01));
    float2 f23 = __half22float2(*reinterpret_cast<__half2 *>(&h23));
    p01 = pack_bf16(f01.x, f01.y);
    p23 = pack_bf16(f23.x, f23.y);
#else
    /* Byte tables of the BF16 magnitudes 0, .5, 1, 1.5, 2, 3, 4, 6 (high and low byte),
     * selected by PRMT with the 3-bit magnitude; the sign bit goes to bit 15 / 31. */
    uint32_t idx = x & 0x7777u;
    uint32_t hi = __byte_perm(0x3F3F3F00u, 0x40404040u, idx);
    uint32_t lo = __byte_perm(0xC0800000u, 0xC0804000u, idx);
    p01 = __byte_perm(lo, hi, 0x5140) | ((x << 12) & 0x8000u) | ((x << 24) & 0x80000000u);
    p23 = __byte_perm(lo, hi, 0x7362) | ((x << 4) & 0x8000u) | ((x << 16) & 0x80000000u);
#endif
}

__device__ __forceinline__ uint32_t bf16x2_mul(uint32_t a, uint32_t s)
{
    __nv_bfloat162 r = __hmul2(*reinterpret_cast<__nv_bfloat162 *>(&a),
                               *reinterpret_cast<__nv_bfloat162 *>(&s));
    return *reinterpret_cast<uint32_t *>(&r);
}

/* E4M3 scale byte -> BF16 pair (s, s), exact. */
__device__ __forceinline__ uint32_t e4m3_scale_bf16x2(uint8_t c)
{
    __half_raw h = __nv_cvt_fp8_to_halfraw(c, __NV_E4M3);
    float f = __half2float(__half(h));
    return pack_bf16(f, f);
}

/* E8M0 scale byte -> binary32 2^(c-127), NaN for 0xFF (step 1, MXFP4). */
__device__ __forceinline__ float e8m0_f32(uint8_t c)
{
    if (c == 0xFF)
        return __uint_as_float(0x7FC00000u);
    if (c == 0)
        return __uint_as_float(0x00400000u);
    return __uint_as_float((uint32_t)c << 23);
}

/* Two FP8 codes (low 16 bits) -> BF16 pair, exact. */
__device__ __forceinline__ uint32_t fp8x2_bf16(uint32_t x, int e5m2)
{
    __half2_raw h = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(x & 0xFFFF),
                                               e5m2 ? __NV_E5M2 : __NV_E4M3);
    float2 f = __half22float2(__half2(h));
    return pack_bf16(f.x, f.y);
}

/* E2M1 word (8 codes) -> 4 BF16 pairs, times the block scale (step 1). */
template <int FMT>
__device__ __forceinline__ void e2m1x8_scaled(uint32_t w, uint32_t sc_bf2, float sc_f32,
                                              uint32_t *o)
{
    e2m1x4_bf16(w & 0xFFFFu, o[0], o[1]);
    e2m1x4_bf16(w >> 16, o[2], o[3]);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        if (FMT == F_NVFP4)
            o[i] = bf16x2_mul(o[i], sc_bf2); /* exact product */
        else
            o[i] = pack_bf16(bf16_lo(o[i]) * sc_f32, bf16_hi(o[i]) * sc_f32);
    }
}

/* 16 K elements (dims d0 .. d0+15, d0 = 64c + 16t) of one row -> 8 BF16 pairs. */
template <int FMT>
__device__ __forceinline__ void load_k16(const Params &p, size_t page, int slot, int h, int d0,
                                         bool valid, uint32_t *o)
{
    if (!valid) {
#pragma unroll
        for (int i = 0; i < 8; i++)
            o[i] = 0;
        return;
    }
    size_t row = row_of(p, page, slot, h);
    if (FMT == F_BF16) {
        const uint4 *src = reinterpret_cast<const uint4 *>(p.kc + row * p.k_rb + 2 * d0);
        uint4 a = src[0], b = src[1];
        o[0] = a.x; o[1] = a.y; o[2] = a.z; o[3] = a.w;
        o[4] = b.x; o[5] = b.y; o[6] = b.z; o[7] = b.w;
    } else if (FMT == F_FP8) {
        uint4 a = *reinterpret_cast<const uint4 *>(p.kc + row * p.k_rb + d0);
        uint32_t w[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            o[2 * i] = fp8x2_bf16(w[i], p.e5m2);
            o[2 * i + 1] = fp8x2_bf16(w[i] >> 16, p.e5m2);
        }
    } else {
        uint2 a = *reinterpret_cast<const uint2 *>(p.kc + row * p.k_rb + d0 / 2);
        int blk = FMT == F_NVFP4 ? d0 / 16 : d0 / 32;
        uint8_t sc = p.ks[scale_off(p, page, slot, h, blk, p.k_S, p.k_il)];
        uint32_t s2 = FMT == F_NVFP4 ? e4m3_scale_bf16x2(sc) : 0;
        float sf = FMT == F_MXFP4 ? e8m0_f32(sc) : 0.0f;
        e2m1x8_scaled<FMT>(a.x, s2, sf, o);
        e2m1x8_scaled<FMT>(a.y, s2, sf, o + 4);
    }
}

/* The stored bytes of 8 V elements (dims d0 .. d0+7, d0 = vbase + 8g) of one row and their
 * block scale, loaded at the start of a tile (before the scores need them, so the loads
 * of K and V are in flight together); zero for a position past the end (never read). */
struct VRaw {
    uint4 w;
    uint32_t sc;
};

template <int FMT>
__device__ __forceinline__ void load_v8_raw(const Params &p, size_t page, int slot, int h, int d0,
                                            bool valid, VRaw &r)
{
    r.w = make_uint4(0, 0, 0, 0);
    r.sc = 0;
    if (!valid)
        return;
    size_t row = row_of(p, page, slot, h);
    if (FMT == F_BF16) {
        r.w = *reinterpret_cast<const uint4 *>(p.vc + row * p.v_rb + 2 * d0);
    } else if (FMT == F_FP8) {
        uint2 a = *reinterpret_cast<const uint2 *>(p.vc + row * p.v_rb + d0);
        r.w.x = a.x;
        r.w.y = a.y;
    } else {
        r.w.x = *reinterpret_cast<const uint32_t *>(p.vc + row * p.v_rb + d0 / 2);
        int blk = FMT == F_NVFP4 ? d0 / 16 : d0 / 32;
        r.sc = p.vs[scale_off(p, page, slot, h, blk, p.v_S, p.v_il)];
    }
}

/* VRaw -> 4 BF16 pairs (step 1). A position past the end gives +0 (its raw bytes are 0 and
 * its scale 0: every format's code 0 times any scale is +0). */
template <int FMT>
__device__ __forceinline__ void dequant_v8(const Params &p, const VRaw &r, uint32_t *o)
{
    if (FMT == F_BF16) {
        o[0] = r.w.x; o[1] = r.w.y; o[2] = r.w.z; o[3] = r.w.w;
    } else if (FMT == F_FP8) {
        o[0] = fp8x2_bf16(r.w.x, p.e5m2);
        o[1] = fp8x2_bf16(r.w.x >> 16, p.e5m2);
        o[2] = fp8x2_bf16(r.w.y, p.e5m2);
        o[3] = fp8x2_bf16(r.w.y >> 16, p.e5m2);
    } else {
        uint8_t sc = (uint8_t)r.sc;
        uint32_t s2 = FMT == F_NVFP4 ? e4m3_scale_bf16x2(sc) : 0;
        float sf = FMT == F_MXFP4 ? e8m0_f32(sc) : 0.0f;
        e2m1x8_scaled<FMT>(r.w.x, s2, sf, o);
    }
}

__device__ __forceinline__ void mma_bf16(float *d, uint4 a, uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b0), "r"(b1));
}

/* Position pos of sequence b -> (page, slot). */
__device__ __forceinline__ void locate(const Params &p, int b, int pos, size_t &page, int &slot)
{
    int lp, sl;
    if (p.ps_shift >= 0) { /* power-of-two page size: no integer division */
        lp = pos >> p.ps_shift;
        sl = pos & (p.PS - 1);
    } else {
        lp = pos / p.PS;
        sl = pos - lp * p.PS;
    }
    page = (size_t)p.indices[p.indptr[b] + lp];
    slot = sl;
}

template <int FMT, int KCH>
__global__ void __launch_bounds__(WARPS * 32) decode_split(const Params p)
{
    extern __shared__ uint4 qs[]; /* [Dq/16][32]: each lane's A fragment per k-step */
    const int b = blockIdx.z, h = blockIdx.y / p.nvr, vr = blockIdx.y % p.nvr;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int nks = p.Dq / 16;
    const uint16_t *q = p.q + ((size_t)b * p.NQ + (size_t)h * p.G) * p.Dq;
    for (int e = threadIdx.x; e < nks * 32; e += blockDim.x) {
        int ks = e >> 5, ln = e & 31, gg = ln >> 2, tt = ln & 3;
        int base = 64 * (ks >> 2) + 16 * tt + 4 * (ks & 3);
        uint32_t r[4] = {0, 0, 0, 0};
        if (gg < p.G) {
            r[0] = *reinterpret_cast<const uint32_t *>(q + gg * p.Dq + base);
            r[2] = *reinterpret_cast<const uint32_t *>(q + gg * p.Dq + base + 2);
        }
        if (gg + 8 < p.G) {
            r[1] = *reinterpret_cast<const uint32_t *>(q + (gg + 8) * p.Dq + base);
            r[3] = *reinterpret_cast<const uint32_t *>(q + (gg + 8) * p.Dq + base + 2);
        }
        qs[e] = make_uint4(r[0], r[1], r[2], r[3]);
    }
    __syncthreads();

    const int n = seq_len(p, b);
    const int ci = blockIdx.x * WARPS + warp;
    const int t0 = ci * p.chunk;
    if (t0 >= n)
        return;
    const int t1 = min(n, t0 + p.chunk);
    const int kch = KCH > 0 ? KCH : p.kch;
    const int vbase = 128 * vr, nsl = min(2, (p.Dv - vbase) / 64);
    const float qks = p.qk_scale[h];

    float mA = -INFINITY, mB = -INFINITY, lA = 0.0f, lB = 0.0f; /* rows g and g+8 */
    float O[2][8][4];
#pragma unroll
    for (int s = 0; s < 2; s++)
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int i = 0; i < 4; i++)
                O[s][j][i] = 0.0f;

    for (int tt = t0; tt < t1; tt += 16) {
        /* V rows of positions 2t, 2t+1, 2t+8, 2t+9: located and loaded first */
        const int pz = tt + 2 * t;
        const bool val[4] = {pz < t1, pz + 1 < t1, pz + 8 < t1, pz + 9 < t1};
        VRaw vraw[2][4];
        {
            size_t pg[4] = {0, 0, 0, 0};
            int sl[4] = {0, 0, 0, 0};
#pragma unroll
            for (int i = 0; i < 4; i++)
                if (val[i])
                    locate(p, b, pz + (i & 1) + 8 * (i >> 1), pg[i], sl[i]);
#pragma unroll
            for (int s = 0; s < 2; s++)
#pragma unroll
                for (int i = 0; i < 4; i++)
                    load_v8_raw<FMT>(p, pg[i], sl[i], h, vbase + 64 * s + 8 * g,
                                     val[i] && s < nsl, vraw[s][i]);
        }
        /* step 2: scores of positions tt+g (n-tile 0) and tt+8+g (n-tile 1) */
        float S0[4] = {0.0f, 0.0f, 0.0f, 0.0f}, S1[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        const bool vKa = tt + g < t1, vKb = tt + 8 + g < t1;
        size_t pgA = 0, pgB = 0;
        int slA = 0, slB = 0;
        if (vKa)
            locate(p, b, tt + g, pgA, slA);
        if (vKb)
            locate(p, b, tt + 8 + g, pgB, slB);
#pragma unroll(KCH > 0 ? KCH : 1)
        for (int c = 0; c < kch; c++) {
            uint32_t ka[8], kb[8];
            load_k16<FMT>(p, pgA, slA, h, 64 * c + 16 * t, vKa, ka);
            load_k16<FMT>(p, pgB, slB, h, 64 * c + 16 * t, vKb, kb);
#pragma unroll
            for (int ks = 0; ks < 4; ks++) {
                uint4 a = qs[(c * 4 + ks) * 32 + lane];
                mma_bf16(S0, a, ka[2 * ks], ka[2 * ks + 1]);
                mma_bf16(S1, a, kb[2 * ks], kb[2 * ks + 1]);
            }
        }
        /* positions of this lane's scores: 2t, 2t+1 (S0), 2t+8, 2t+9 (S1) */
        float sA[4] = {S0[0] * qks, S0[1] * qks, S1[0] * qks, S1[1] * qks};
        float sB[4] = {S0[2] * qks, S0[3] * qks, S1[2] * qks, S1[3] * qks};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            if (!val[i]) {
                sA[i] = -INFINITY;
                sB[i] = -INFINITY;
            }
        }
        /* step 3 */
        float mtA = fmaxf(fmaxf(sA[0], sA[1]), fmaxf(sA[2], sA[3]));
        float mtB = fmaxf(fmaxf(sB[0], sB[1]), fmaxf(sB[2], sB[3]));
        mtA = fmaxf(mtA, __shfl_xor_sync(0xFFFFFFFFu, mtA, 1));
        mtB = fmaxf(mtB, __shfl_xor_sync(0xFFFFFFFFu, mtB, 1));
        mtA = fmaxf(mtA, __shfl_xor_sync(0xFFFFFFFFu, mtA, 2));
        mtB = fmaxf(mtB, __shfl_xor_sync(0xFFFFFFFFu, mtB, 2));
        const float mnA = fmaxf(mA, mtA), mnB = fmaxf(mB, mtB);
        const float alA = mnA == -INFINITY ? 1.0f : lowp_exp2_sw(mA - mnA);
        const float alB = mnB == -INFINITY ? 1.0f : lowp_exp2_sw(mB - mnB);
        float pA[4], pB[4];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            pA[i] = mnA == -INFINITY ? 0.0f : lowp_exp2_sw(sA[i] - mnA);
            pB[i] = mnB == -INFINITY ? 0.0f : lowp_exp2_sw(sB[i] - mnB);
        }
        float LA = ((pA[0] + pA[1]) + pA[2]) + pA[3];
        float LB = ((pB[0] + pB[1]) + pB[2]) + pB[3];
        LA = LA + __shfl_xor_sync(0xFFFFFFFFu, LA, 1);
        LB = LB + __shfl_xor_sync(0xFFFFFFFFu, LB, 1);
        LA = LA + __shfl_xor_sync(0xFFFFFFFFu, LA, 2);
        LB = LB + __shfl_xor_sync(0xFFFFFFFFu, LB, 2);
        lA = lA * alA + LA;
        lB = lB * alB + LB;
        mA = mnA;
        mB = mnB;
        const uint4 P = make_uint4(pack_bf16(pA[0], pA[1]), pack_bf16(pB[0], pB[1]),
                                   pack_bf16(pA[2], pA[3]), pack_bf16(pB[2], pB[3]));

#pragma unroll
        for (int s = 0; s < 2; s++) {
            if (s < nsl) {
                uint32_t v[4][4];
#pragma unroll
                for (int i = 0; i < 4; i++)
                    dequant_v8<FMT>(p, vraw[s][i], v[i]);
#pragma unroll
                for (int j = 0; j < 8; j++) {
                    const unsigned sel = (j & 1) ? 0x7632u : 0x5410u;
                    uint32_t b0 = __byte_perm(v[0][j >> 1], v[1][j >> 1], sel);
                    uint32_t b1 = __byte_perm(v[2][j >> 1], v[3][j >> 1], sel);
                    O[s][j][0] = O[s][j][0] * alA;
                    O[s][j][1] = O[s][j][1] * alA;
                    O[s][j][2] = O[s][j][2] * alB;
                    O[s][j][3] = O[s][j][3] * alB;
                    mma_bf16(O[s][j], P, b0, b1);
                }
            }
        }
    }

    /* step 4: this split's (m, l, o) */
    const size_t item = ((size_t)b * p.H + h) * p.nch_max + ci;
    if (vr == 0 && t == 0) {
        if (g < p.G) {
            p.ws_m[item * p.G + g] = mA;
            p.ws_l[item * p.G + g] = lA;
        }
        if (g + 8 < p.G) {
            p.ws_m[item * p.G + g + 8] = mB;
            p.ws_l[item * p.G + g + 8] = lB;
        }
    }
#pragma unroll
    for (int s = 0; s < 2; s++) {
        if (s < nsl) {
#pragma unroll
            for (int j = 0; j < 8; j++) {
                int d0 = vbase + 64 * s + 8 * (2 * t) + j, d1 = d0 + 8;
                if (g < p.G) {
                    float *o = p.ws_o + (item * p.G + g) * p.Dv;
                    o[d0] = O[s][j][0];
                    o[d1] = O[s][j][1];
                }
                if (g + 8 < p.G) {
                    float *o = p.ws_o + (item * p.G + g + 8) * p.Dv;
                    o[d0] = O[s][j][2];
                    o[d1] = O[s][j][3];
                }
            }
        }
    }
}

/* step 5: one thread per (sequence, query head, output dim). */
__global__ void decode_merge(const Params p)
{
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t total = (size_t)p.B * p.NQ * p.Dv;
    if (idx >= total)
        return;
    int d = (int)(idx % p.Dv), qh = (int)((idx / p.Dv) % p.NQ), b = (int)(idx / p.Dv / p.NQ);
    int h = qh / p.G, r = qh % p.G;
    int n = seq_len(p, b), nch = (n + p.chunk - 1) / p.chunk;
    size_t item0 = ((size_t)b * p.H + h) * p.nch_max;
    float M = -INFINITY;
    for (int c = 0; c < nch; c++)
        M = fmaxf(M, p.ws_m[(item0 + c) * p.G + r]);
    float L = 0.0f, Ov = 0.0f;
    for (int c = 0; c < nch; c++) {
        float w = lowp_exp2_sw(p.ws_m[(item0 + c) * p.G + r] - M);
        L = L + p.ws_l[(item0 + c) * p.G + r] * w;
        Ov = Ov + p.ws_o[((item0 + c) * p.G + r) * p.Dv + d] * w;
    }
    float vs = p.v_global[p.n_v_global > 1 ? h : 0];
    __nv_bfloat16 o = __float2bfloat16_rn((Ov / L) * vs);
    p.out[idx] = *reinterpret_cast<uint16_t *>(&o);
}

int fail(char *why, size_t len, const char *fmt, ...)
{
    if (why != NULL && len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, len, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* Shapes and workspace layout shared by the size query and the launch. */
struct Plan {
    size_t B, H, G, chunk, nch_max, max_len;
    size_t off_qks, off_m, off_l, off_o, bytes;
};

int make_plan(const lowp_gpu_decode_desc *d, Plan *pl, char *why, size_t why_len)
{
    if (d == NULL || d->cache == NULL || d->pt_host == NULL)
        return fail(why, why_len, "decode descriptor, cache and host page table must not be NULL");
    const lowp_kv_config *cfg = &d->cache->cfg;
    if (lowp_gpu_kvcache_check(d->cache, why, why_len) ||
        lowp_gpu_decode_check(cfg, d->num_q_heads, why, why_len) ||
        lowp_kv_page_table_check(d->pt_host, cfg->num_pages, cfg->page_size, why, why_len))
        return -1;
    if (!(d->sm_scale == d->sm_scale) || isinf(d->sm_scale))
        return fail(why, why_len, "sm_scale is not finite");
    pl->B = d->pt_host->batch;
    pl->H = cfg->num_heads;
    pl->G = d->num_q_heads / cfg->num_heads;
    pl->max_len = 0;
    if (pl->B == 0)
        return fail(why, why_len, "the page table has no sequences");
    for (size_t b = 0; b < pl->B; b++) {
        size_t n = lowp_kv_seq_len(d->pt_host, cfg->page_size, b);
        if (n == 0)
            return fail(why, why_len, "sequence %zu is empty: a decode needs at least one token",
                        b);
        if (n > (size_t)1 << 30)
            return fail(why, why_len, "sequence %zu has %zu tokens; the kernel indexes positions "
                        "with int", b, n);
        pl->max_len = n > pl->max_len ? n : pl->max_len;
    }
    pl->chunk = d->chunk_tokens ? d->chunk_tokens
                                : lowp_gpu_decode_chunk_tokens(pl->B, pl->H, pl->max_len);
    if (pl->chunk % 16 || pl->chunk == 0)
        return fail(why, why_len, "chunk_tokens %zu is not a positive multiple of 16", pl->chunk);
    pl->nch_max = (pl->max_len + pl->chunk - 1) / pl->chunk;
    size_t items = pl->B * pl->H * pl->nch_max;
    pl->off_qks = 0;
    pl->off_m = 256 + ((pl->H * sizeof(float) + 255) / 256) * 256;
    pl->off_l = pl->off_m + ((items * pl->G * sizeof(float) + 255) / 256) * 256;
    pl->off_o = pl->off_l + ((items * pl->G * sizeof(float) + 255) / 256) * 256;
    pl->bytes = pl->off_o + items * pl->G * cfg->vo_dim * sizeof(float);
    return 0;
}

template <int FMT>
cudaError_t launch_fmt(const Params &p, dim3 grid, size_t smem, cudaStream_t st)
{
    if (p.kch == 2) {
        decode_split<FMT, 2><<<grid, WARPS * 32, smem, st>>>(p);
    } else {
        decode_split<FMT, 0><<<grid, WARPS * 32, smem, st>>>(p);
    }
    return cudaGetLastError();
}

} // namespace

extern "C" size_t lowp_gpu_decode_workspace_bytes(const lowp_gpu_decode_desc *d, char *why,
                                                  size_t why_len)
{
    Plan pl = {};
    if (make_plan(d, &pl, why, why_len))
        return 0;
    return pl.bytes;
}

extern "C" int lowp_gpu_decode_prepare(const lowp_gpu_decode_desc *d, void *ws, size_t ws_bytes,
                                       uint16_t *out, cudaStream_t st, Params *pp, char *why,
                                       size_t why_len)
{
    Plan pl = {};
    if (make_plan(d, &pl, why, why_len))
        return -1;
    if (ws == NULL || out == NULL || d->q_dev == NULL || d->indptr_dev == NULL ||
        d->indices_dev == NULL || d->last_page_len_dev == NULL)
        return fail(why, why_len, "workspace, output, queries and device page table must not be "
                    "NULL");
    if (ws_bytes < pl.bytes)
        return fail(why, why_len, "workspace of %zu bytes is smaller than the %zu this decode "
                    "needs", ws_bytes, pl.bytes);
    if (pl.nch_max > 65535u * WARPS || pl.B > 65535 || pl.H * 4 > 65535)
        return fail(why, why_len, "grid too large: %zu splits, batch %zu", pl.nch_max, pl.B);
    const lowp_gpu_kvcache *c = d->cache;
    const lowp_kv_config *cfg = &c->cfg;
    double sm = d->sm_scale == 0.0 ? 1.0 / sqrt((double)cfg->qk_dim) : d->sm_scale;
    float qks[LOWP_GPU_DECODE_MAX_GROUP * 1024];
    if (pl.H > sizeof qks / sizeof qks[0])
        return fail(why, why_len, "%zu KV heads: at most %zu", pl.H, sizeof qks / sizeof qks[0]);
    for (size_t h = 0; h < pl.H; h++)
        qks[h] = lowp_gpu_decode_score_scale(sm, c->k_global_host[c->n_global > 1 ? h : 0]);
    uint8_t *w = (uint8_t *)ws;
    cudaError_t e = cudaMemcpyAsync(w + pl.off_qks, qks, pl.H * sizeof(float),
                                    cudaMemcpyHostToDevice, st);
    if (e != cudaSuccess)
        return fail(why, why_len, "cudaMemcpyAsync of the score scales: %s", cudaGetErrorString(e));

    Params &p = *pp;
    memset(&p, 0, sizeof p);
    p.q = d->q_dev;
    p.kc = c->k_codes;
    p.vc = c->v_codes;
    p.ks = c->k_scales;
    p.vs = c->v_scales;
    p.indptr = d->indptr_dev;
    p.indices = d->indices_dev;
    p.last = d->last_page_len_dev;
    p.qk_scale = (const float *)(w + pl.off_qks);
    p.v_global = c->v_global;
    p.n_v_global = (int)c->n_global;
    p.ws_m = (float *)(w + pl.off_m);
    p.ws_l = (float *)(w + pl.off_l);
    p.ws_o = (float *)(w + pl.off_o);
    p.out = out;
    p.B = (int)pl.B;
    p.H = (int)pl.H;
    p.G = (int)pl.G;
    p.NQ = (int)d->num_q_heads;
    p.Dq = (int)cfg->qk_dim;
    p.Dv = (int)cfg->vo_dim;
    p.PS = (int)cfg->page_size;
    p.chunk = (int)pl.chunk;
    p.nch_max = (int)pl.nch_max;
    p.nvr = (int)((cfg->vo_dim + 127) / 128);
    p.kch = (int)(cfg->qk_dim / 64);
    p.hnd = cfg->layout == LOWP_KV_HND;
    p.k_il = cfg->k_sf_order == LOWP_KV_SF_INTERLEAVE4;
    p.v_il = cfg->v_sf_order == LOWP_KV_SF_INTERLEAVE4;
    p.e5m2 = cfg->format == LOWP_FP8_E5M2;
    p.k_rb = (int)lowp_kv_row_code_bytes(cfg, LOWP_KV_K);
    p.v_rb = (int)lowp_kv_row_code_bytes(cfg, LOWP_KV_V);
    p.k_S = (int)lowp_kv_row_scales(cfg, LOWP_KV_K);
    p.v_S = (int)lowp_kv_row_scales(cfg, LOWP_KV_V);

    p.format = (int)cfg->format;
    p.ps_shift = -1;
    for (int sh = 0; sh < 31; sh++)
        if ((size_t)1 << sh == cfg->page_size)
            p.ps_shift = sh;
    return 0;
}

extern "C" cudaError_t lowp_gpu_decode_enqueue(const Params *pp, cudaStream_t st)
{
    const Params &p = *pp;
    dim3 grid((unsigned)((p.nch_max + WARPS - 1) / WARPS), (unsigned)(p.H * p.nvr),
              (unsigned)p.B);
    size_t smem = (size_t)(p.Dq / 16) * 32 * sizeof(uint4);
    cudaError_t e;
    switch (p.format) {
    case LOWP_BF16_PASS: e = launch_fmt<F_BF16>(p, grid, smem, st); break;
    case LOWP_FP8_E4M3:
    case LOWP_FP8_E5M2: e = launch_fmt<F_FP8>(p, grid, smem, st); break;
    case LOWP_NVFP4: e = launch_fmt<F_NVFP4>(p, grid, smem, st); break;
    default: e = launch_fmt<F_MXFP4>(p, grid, smem, st); break;
    }
    if (e != cudaSuccess)
        return e;
    size_t total = (size_t)p.B * p.NQ * p.Dv;
    decode_merge<<<(unsigned)((total + 255) / 256), 256, 0, st>>>(p);
    return cudaGetLastError();
}

extern "C" int lowp_gpu_decode(const lowp_gpu_decode_desc *d, void *ws, size_t ws_bytes,
                               uint16_t *out, cudaStream_t st, char *why, size_t why_len)
{
    Params p;
    if (lowp_gpu_decode_prepare(d, ws, ws_bytes, out, st, &p, why, why_len))
        return -1;
    cudaError_t e = lowp_gpu_decode_enqueue(&p, st);
    if (e != cudaSuccess)
        return fail(why, why_len, "decode kernel launch: %s", cudaGetErrorString(e));
    return 0;
}
