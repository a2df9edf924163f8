/* Paged decode attention kernels (lowp/gpu_decode.h). The arithmetic, step by step, is
 * lowp/attn_gpu_emul.h's definition; the comments below name the step each piece is.
 * Compiled with --fmad=false (gpu/decode.cmake): every a*b+c here is two roundings, as
 * in the emulator. The exponential is the hardware's ex2.approx.ftz.f32 (MUFU.EX2), which
 * the emulator models exactly (lowp_exp2_hw, lowp/ex2_approx.h); until 2026-12-06 it was
 * lowp/exp2_sw.h, about 16 FMA-pipe instructions an exponential.
 *
 * Thread roles (one warp per work item, lane = 4g + t):
 *   QK^T  mma.m16n8k16: A = Q (rows = the group's query heads, zero past G), B = K^T of
 *         8 positions; lane (g, t) loads K rows of tile positions g and g+8, the 16 dims
 *         64c + 16t .. 64c + 16t + 15 of chunk c (one NVFP4 block, contiguous bytes), so
 *         the MMA k order of k-step ks is the permutation dim(c, ks, kk) of the header.
 *   P V   as (P V)^T = V^T P^T, mma.m16n8k16: A = V^T (16 dims x the 16 positions), B =
 *         P^T of 8 heads (the QK accumulators reused as BF16, FlashAttention-2's register
 *         trick: lane (g, t) holds heads g and g+8's P at positions 2t, 2t+1, 2t+8, 2t+9,
 *         which is B's fragment of n-tile 0 and 1); lane (g, t) loads V rows of those
 *         positions, dims vbase + 8g .. + 7, and row g (g + 8) of m-tile i is dim vbase +
 *         8g + 2i (+ 1). Groups of up to 8 heads (HG = 1) need only n-tile 0.
 * Each output element of the MMA is the same function of its 16 products whichever
 * operand holds P (lowp/mma.h), so the roles change no bit; with heads as the n side, a
 * group of up to 8 heads takes 4 MMAs and 16 accumulators a lane per 64 dims (8 and 32
 * with P as A). The freed registers end the loop's rematerialization of lane offsets:
 * on the H200 NVFP4 went from 844 to 770 instructions a tile and from 691 to 615 us
 * (batch 32, 32K tokens; reports/gpu-bench-h200.md).
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
#include "lowp/ex2_approx.h"
#include "lowp/gpu_decode.h"
#include "decode_bf16.cuh"
#include "decode_e2m1.h"
#include "decode_internal.h"
#include "lowp/why.h"

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 1000) && defined(__CUDA_ARCH_FAMILY_SPECIFIC__)
#define LOWP_DEC_BLACKWELL_E2M1 1 /* hardware cvt.rn.f16x2.e2m1x2: compiled, never run */
#else
#define LOWP_DEC_BLACKWELL_E2M1 0
#endif

namespace {

enum Fmt { F_BF16 = 0, F_FP8 = 1, F_NVFP4 = 2, F_MXFP4 = 3 };

/* Work items (splits) per CTA, sharing the staged Q: at most 4, fewer when asked
 * (lowp_gpu_decode_desc.cta_warps) or when the stages of 4 warps do not fit in shared
 * memory (lowp_gpu_decode_prepare). */
#define LOWP_DEC_MAX_WARPS LOWP_GPU_DECODE_MAX_WARPS

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

/* Eight E2M1 codes (the nibbles q0..q7 of w) -> the BF16 pairs (q0, q4), (q1, q5), (q2,
 * q6), (q3, q7) (low half = the first code). sm_90: gpu/kernels/decode_e2m1.h's bit placement,
 * which gives 2^-126 x the codes' values, then a multiply by 2^126 only when EXACT
 * (MXFP4; NVFP4 folds 2^126 into its block scales, NVFP4_SCALE_FIX). The H200's BF16
 * multiply keeps subnormal inputs: lowp_gpu_mma_probe checks all 2^32 products.
 * Blackwell: the hardware cvt, the values themselves whatever EXACT. */
template <bool EXACT>
__device__ __forceinline__ void e2m1x8_bf16(uint32_t w, uint32_t *o)
{
#if LOWP_DEC_BLACKWELL_E2M1
    uint32_t p[4]; /* BF16 pairs (q0, q1), (q2, q3), (q4, q5), (q6, q7) */
#pragma unroll
    for (int i = 0; i < 4; i++) {
        uint32_t h;
        const uint16_t b = (uint16_t)((w >> (8 * i)) & 0xFF);
        asm("{ .reg .b8 t, z;\n\t"
            "mov.b16 {t, z}, %1;\n\t"
            "cvt.rn.f16x2.e2m1x2 %0, t; }"
            : "=r"(h) : "h"(b));
        const float2 f = __half22float2(*reinterpret_cast<__half2 *>(&h));
        p[i] = pack_bf16(f.x, f.y);
    }
    o[0] = lowp_dec_prmt(p[0], p[2], 0x5410u);
    o[1] = lowp_dec_prmt(p[0], p[2], 0x7632u);
    o[2] = lowp_dec_prmt(p[1], p[3], 0x5410u);
    o[3] = lowp_dec_prmt(p[1], p[3], 0x7632u);
#else
    lowp_dec_e2m1x8_sub(w, o);
    if (EXACT) {
#pragma unroll
        for (int i = 0; i < 4; i++)
            o[i] = bf16x2_mul(o[i], LOWP_DEC_E2M1_UNBIAS);
    }
#endif
}

/* Two MXFP4 E8M0 scale bytes -> the BF16 pair (2^(sa-127), 2^(sb-127)), exact, NaN for
 * 0xFF (gpu/kernels/decode_e2m1.h).
 * Step 1 for FP4 is one BF16 multiply of each decoded pair by its scale pair:
 *   NVFP4: pairs from e2m1x8_bf16<false>, scales from nvfp4_scales: exact;
 *   MXFP4: pairs from e2m1x8_bf16<true> (the values), scales from mxfp4_scales. The
 *          H200's BF16 multiply is binary32's product rounded to BF16 (lowp_gpu_mma_probe,
 *          all 2^32 pairs), and a value (2 significant bits) times a power of two is exact
 *          in binary32 from 2^-128 up, so this is step 1's fl32(value x 2^(c-127)) rounded
 *          to BF16 bit for bit, Inf at 6 x 2^127 and NaN for c = 0xFF included. */
__device__ __forceinline__ uint32_t mxfp4_scales(uint8_t sa, uint8_t sb)
{
    return lowp_dec_e8m0_bf16(sa) | (lowp_dec_e8m0_bf16(sb) << 16);
}

/* Two NVFP4 E4M3 scale bytes -> the BF16 pair (sa, sb) x NVFP4_SCALE_FIX, exact (448 x
 * 2^119 < 2^128; NaN stays NaN): the factor that takes e2m1x8_bf16<false>'s pairs to
 * step 1's 2^-7 x value x scale. */
#if LOWP_DEC_BLACKWELL_E2M1
#define NVFP4_SCALE_FIX 0x3C003C00u /* the BF16 pair (2^-7, 2^-7): the cvt gives values */
#else
#define NVFP4_SCALE_FIX LOWP_DEC_NVFP4_SCALE_FIX
#endif
__device__ __forceinline__ uint32_t nvfp4_scales(uint8_t sa, uint8_t sb)
{
    return bf16x2_mul(fp8x2_bf16(lowp_dec_prmt(sa, sb, 0x0040u), 0), NVFP4_SCALE_FIX);
}

/* ---- The cp.async ring ------------------------------------------------------------------
 * Each warp streams its split through a ring of p.stages stages in shared memory; a stage
 * holds one tile (16 positions): K code rows, the V code rows of the CTA's 128-dim slice,
 * and for FP4 the K and V scale rows (gpu/kernels/decode.cu's geometry, lowp_gpu_decode_params).
 * Positions past the split's end are zero-filled (src-size 0: nothing is read), except
 * FP4 rows at head dim 128 in one page, which are read whatever they hold. Row
 * strides carry padding so that the fragment loads below are free of bank conflicts. */
__device__ __forceinline__ uint32_t smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* 16 bytes, global -> shared, zero-filled past `bytes`. The L2 prefetch size of 128
 * bytes took BF16 decode from 89.9% to 92.2% of the streaming read on the H200 (batch 32,
 * 32K; FP8 and NVFP4, bound by issue, unchanged). */
__device__ __forceinline__ void cp16(uint32_t dst, const void *src, int bytes)
{
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;" ::"r"(dst), "l"(src),
                 "r"(bytes));
}

__device__ __forceinline__ void cp4(uint32_t dst, const void *src, int bytes)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(dst), "l"(src),
                 "r"(bytes));
}

__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;"); }

/* Wait until at most n groups of this thread are pending (n is 0..6: p.stages <= 8). */
static_assert(LOWP_GPU_DECODE_MAX_STAGES <= 8, "cp_wait waits for at most 6 pending groups");
__device__ __forceinline__ void cp_wait(int n)
{
    switch (n) {
    case 0: asm volatile("cp.async.wait_group 0;" ::: "memory"); break;
    case 1: asm volatile("cp.async.wait_group 1;" ::: "memory"); break;
    case 2: asm volatile("cp.async.wait_group 2;" ::: "memory"); break;
    case 3: asm volatile("cp.async.wait_group 3;" ::: "memory"); break;
    case 4: asm volatile("cp.async.wait_group 4;" ::: "memory"); break;
    case 5: asm volatile("cp.async.wait_group 5;" ::: "memory"); break;
    default: asm volatile("cp.async.wait_group 6;" ::: "memory"); break;
    }
}

/* ---- Stage geometry, the same on host and device -----------------------------------------
 * A stage is [16 K code rows][16 V code rows][16 K scale windows][16 V scale windows][32
 * shift bytes]. Row strides carry padding so that each fragment load of a half warp
 * (LDS.64) or quarter warp (LDS.128) hits distinct banks:
 *   FP4  K: LDS.64 at g*rs + 8t          -> rs = 32 or 96 mod 128
 *   FP4  V: LDS.32 at (2t+i)*rs + 4g     -> rs = 16 or 48 mod 64
 *   FP8  K: LDS.128 at g*rs + 16t        -> rs = 64 mod 128
 *   FP8  V: LDS.64 at (2t+i)*rs + 8g     -> rs = 16 mod 64
 *   BF16 K: LDS.128 at g*rs + 32t (+16)  -> rs = 16 mod 128
 *   BF16 V: LDS.128 at (2t+i)*rs + 16g   -> rs = 16 mod 64
 * A scale window holds one row's S scale bytes; S % 4 != 0 (MXFP4 with a dim that is an
 * odd multiple of 64) leaves the row 0 or 2 bytes into its window, recorded per row in
 * the shift bytes. */
__host__ __device__ constexpr int bytes_per_2(int fmt)
{
    return fmt == F_BF16 ? 4 : (fmt == F_FP8 ? 2 : 1);
}

__host__ __device__ constexpr int k_row_stride(int fmt, int k_rb)
{
    return fmt >= F_NVFP4 ? k_rb + (k_rb % 64 == 0 ? 32 : 0)
                          : (fmt == F_FP8 ? k_rb + (k_rb % 128 == 0 ? 64 : 0) : k_rb + 16);
}

__host__ __device__ constexpr int v_row_stride(int fmt) { return 64 * bytes_per_2(fmt) + 16; }

__host__ __device__ constexpr int scales_per_row(int fmt, int dim)
{
    return fmt == F_NVFP4 ? dim / 16 : (fmt == F_MXFP4 ? dim / 32 : 0);
}

__host__ __device__ constexpr int scale_window(int S)
{
    return S == 0 ? 0 : (S + 3) / 4 * 4 + (S % 4 ? 4 : 0);
}

/* A stage's size from the offset of its 32 shift bytes, the last part, rounded to 16. */
__host__ __device__ constexpr int stage_size(int off_sh) { return (off_sh + 32 + 15) / 16 * 16; }

/* One row's S scale bytes starting at byte off of the scale array, into its window:
 * 4-byte copies from off rounded down to 4 (S % 4 == 0 rows start aligned). */
__device__ __forceinline__ void cp_scales(const uint8_t *base, size_t off, int S, int sw,
                                          uint32_t dst, bool valid, int hf)
{
    if ((S & 3) == 0) {
        for (int w = hf; w < (S >> 2); w += 2)
            cp4(dst + 4 * w, base + (valid ? off + 4 * w : 0), valid ? 4 : 0);
        return;
    }
    const size_t a = off & ~(size_t)3;
    for (int w = hf; w < (sw >> 2); w += 2) {
        long rem = (long)(off + S) - (long)(a + 4 * w);
        int nb = valid ? (rem >= 4 ? 4 : (rem > 0 ? (int)rem : 0)) : 0;
        cp4(dst + 4 * w, nb ? base + a + 4 * w : base, nb);
    }
}

/* Block scale s of tile row r in a stage's scale windows (sc, sw bytes a row). Linear:
 * row r's bytes start sh[r] bytes in (sh only when S % 4 != 0). Interleave4 (IL; S % 4
 * == 0, page_size % 4 == 0 and tiles start at multiples of 16, so a 4-slot group is 4
 * aligned rows of the tile): lowp/kvcache.h's formula within the group. */
template <bool IL>
__device__ __forceinline__ uint8_t scale_at(const uint8_t *sc, int sw, const uint8_t *sh, int r,
                                            int s, int S)
{
    if (IL) {
        const int q4 = S >> 2;
        return sc[((r & ~3) + s / q4) * sw + (s % q4) * 4 + (r & 3)];
    }
    return sc[r * sw + (sh != nullptr ? sh[r] : 0) + s];
}

/* Four words of FP8 codes w[i] (two codes a half) -> 8 BF16 pairs, exact: o[2i] from the
 * low half of w[i], o[2i + 1] from its high half. */
__device__ __forceinline__ void fp8x8_bf16(const uint32_t *w, int e5m2, uint32_t *o)
{
#pragma unroll
    for (int i = 0; i < 4; i++) {
        o[2 * i] = fp8x2_bf16(w[i], e5m2);
        o[2 * i + 1] = fp8x2_bf16(w[i] >> 16, e5m2);
    }
}

/* Sixteen E2M1 codes (the nibbles of x0, then of x1) -> 8 BF16 pairs in e2m1x8_bf16's
 * order (o[0..3] from x0, o[4..7] from x1), each times the scale pair s2: step 1 (above
 * mxfp4_scales). */
template <int FMT>
__device__ __forceinline__ void fp4x16_bf16(uint32_t x0, uint32_t x1, uint32_t s2, uint32_t *o)
{
    e2m1x8_bf16<FMT == F_MXFP4>(x0, o);
    e2m1x8_bf16<FMT == F_MXFP4>(x1, o + 4);
#pragma unroll
    for (int i = 0; i < 8; i++)
        o[i] = bf16x2_mul(o[i], s2);
}

/* Lane (g, t)'s K fragment of one chunk of one tile row (row points at dims 64c + 16t):
 * 8 BF16 pairs, pairs (2ks, 2ks + 1) being k-step ks's b0, b1: dims 4ks .. 4ks + 3 of the
 * 16 for BF16 and FP8, and for FP4 (whose decode pairs codes 4 apart) dims i, i + 4 (b0)
 * and i + 1, i + 5 (b1), i = 8 (ks / 2) + 2 (ks % 2). s2: the FP4 block scale as a pair
 * (nvfp4_scales / mxfp4_scales). */
template <int FMT>
__device__ __forceinline__ void k_frag(const uint8_t *row, uint32_t s2, int e5m2, uint32_t *o)
{
    if (FMT == F_BF16) {
        const uint4 a = *reinterpret_cast<const uint4 *>(row);
        const uint4 b = *reinterpret_cast<const uint4 *>(row + 16);
        o[0] = a.x; o[1] = a.y; o[2] = a.z; o[3] = a.w;
        o[4] = b.x; o[5] = b.y; o[6] = b.z; o[7] = b.w;
    } else if (FMT == F_FP8) {
        const uint4 a = *reinterpret_cast<const uint4 *>(row);
        const uint32_t w[4] = {a.x, a.y, a.z, a.w};
        fp8x8_bf16(w, e5m2, o);
    } else {
        const uint2 a = *reinterpret_cast<const uint2 *>(row);
        fp4x16_bf16<FMT>(a.x, a.y, s2, o);
    }
}

/* V pairs along positions for two neighbouring tile rows A, B (pointing at the lane's 8
 * dims): o[j] = (e(A, j), e(B, j)), j = 0..7. s2: FP4 only, their block scales as a BF16
 * pair (nvfp4_scales / mxfp4_scales of A's and B's scale bytes). */
template <int FMT>
__device__ __forceinline__ void v_pairs(const uint8_t *A, const uint8_t *B, uint32_t s2,
                                        int e5m2, uint32_t *o)
{
    if (FMT == F_BF16) {
        const uint4 a = *reinterpret_cast<const uint4 *>(A);
        const uint4 b = *reinterpret_cast<const uint4 *>(B);
        const uint32_t wa[4] = {a.x, a.y, a.z, a.w}, wb[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
        for (int j = 0; j < 8; j++)
            o[j] = lowp_dec_prmt(wa[j >> 1], wb[j >> 1], (j & 1) ? 0x7632u : 0x5410u);
    } else if (FMT == F_FP8) {
        const uint2 a = *reinterpret_cast<const uint2 *>(A);
        const uint2 b = *reinterpret_cast<const uint2 *>(B);
        const uint32_t x[4] = {lowp_dec_prmt(a.x, b.x, 0x5140u), lowp_dec_prmt(a.x, b.x, 0x7362u),
                               lowp_dec_prmt(a.y, b.y, 0x5140u), lowp_dec_prmt(a.y, b.y, 0x7362u)};
        fp8x8_bf16(x, e5m2, o);
    } else {
        const uint32_t a = *reinterpret_cast<const uint32_t *>(A);
        const uint32_t b = *reinterpret_cast<const uint32_t *>(B);
        /* x0: A's dims 0..3 then B's, x1: dims 4..7; codes 4 apart pair A with B */
        const uint32_t x0 = lowp_dec_prmt(a, b, 0x5410u), x1 = lowp_dec_prmt(a, b, 0x7632u);
        fp4x16_bf16<FMT>(x0, x1, s2, o);
    }
}

/* Logical page of position pos. */
__device__ __forceinline__ int page_of_pos(const Params &p, int pos)
{
    return p.ps_shift >= 0 ? pos >> p.ps_shift : pos / p.PS;
}

/* Thread roles (one warp per work item, lane = 4g + t):
 *   copies: BF16 / FP8 rows are copied line by line by the whole warp, FP4 rows (and
 *           scale windows) by lanes l and l + 16, 16-byte chunks (l >> 4), (l >> 4) + 2,
 *           ..., except FP4 code rows at head dim 128 in one page: 4 lanes a row (below,
 *           f_code). With a page size that is a power of two >= 16, a tile is 16 slots of one
 *           page, looked up once, and row addresses follow by adding; otherwise lane l
 *           looks up tile row (l & 15) (position t0 + 16k + (l & 15)) and hands its pool
 *           row to the lanes that copy it.
 *   Q.K^T   as in the header; rows g + 8 of A hold heads g + 8 (zero when HG = 1).
 *   P V     as in the header: A = V^T, B = P^T; accumulator O[hh][s][i] of lane (g, t)
 *           holds dims vbase + 64s + 8g + 2i (c0, c1) and + 1 (c2, c3), heads 8hh + 2t
 *           (c0, c2) and 8hh + 2t + 1 (c1, c3).
 * HG: 1 for groups of up to 8 query heads, 2 for 9..16 (n-tile 1, its own registers).
 * KCH > 0: qk_dim = vo_dim = 64 KCH (launch_fmt picks it only then), so the whole stage
 * geometry is known at compile time. With only the K side known, the V side's row bytes,
 * scale counts and stage size came from the parameters, and the copies and V scale loads
 * recomputed addresses from them every tile: on the H200 (batch 32, 32K tokens, head dim
 * 128) fixing both sides, with the branch-free exponentials of step 3, took NVFP4 from
 * 770 to 651 instructions a tile and from 613 to 523 us, MXFP4 from 687 to 577 us.
 * IL: bit 0 K scales interleave4, bit 1 V scales (NVFP4 only).
 * Registers: at most 128 (4 CTAs of 4 warps an SM), and at most 80 (6 CTAs) for FP4 at
 * head dim 128 with up to 8 heads a group (ctas_per_sm). MXFP4 ran at 3 CTAs while it
 * scaled in binary32 (139-151 registers; at 128 it spilled); with one BF16 multiply a
 * pair it needs 101-122, or 80 at 6 CTAs. */
template <int FMT, int KCH, int HG>
__host__ __device__ constexpr int ctas_per_sm()
{
    /* FP4's ring (29 KB a CTA at head dim 128) leaves room for 6 CTAs; on the H200
     * (batch 32, 32K) 6 CTAs at 80 registers took NVFP4 from 522.7 to 513.8 us and MXFP4
     * from 578.4 to 567.4, 5 CTAs gave the same, and FP8 (smem for 4 CTAs only) went
     * from 563.8 to 574.1 us at 5: its registers were squeezed for nothing. */
    return FMT >= F_NVFP4 && KCH > 0 && HG == 1 ? 6 : 4;
}
/* ---- The split kernel's stages -------------------------------------------------------------
 * decode_split (below) is the algorithm; each piece it calls is one stage of it:
 *   Geom, Item     the stage geometry and the warp's work item (what every stage reads);
 *   Ring           the cp.async ring: which tiles are in flight, and copying one tile;
 *   stage_q        the group's Q into shared memory as MMA A fragments;
 *   qk_scores      step 2's Q.K^T of one tile on the tensor cores;
 *   scale_scores   step 2's scale by qk_scale, -Inf past the split's end;
 *   softmax_tile   step 3 for one tile: new maxima, p = exp2(s - m), row sums, P as BF16;
 *   rescale        step 3's o * alpha and the running (m, l);
 *   pv_tile        P V of one tile on the tensor cores (V dequantized in registers);
 *   write_partial  step 4: the split's (m, l, o) into the workspace.
 * All are forced inline, so that to the compiler the kernel is still one function. Each
 * keeps the floating-point operations of the body it was cut from, with the same
 * operands in the same order, so the arithmetic is the emulator's as before; the
 * instruction schedule and register allocation are not byte for byte the single body's
 * (nvcc simplifies a helper on its own before inlining it, and its code generator
 * follows the order it is given), so a change here is proven again by `lowp gpu conform`
 * on the H200, not by tools/sass_compare.sh alone. */

/* One kernel instance's stage geometry (host: stage_geometry, from the same functions):
 * compile-time constants when KCH > 0 (qk_dim = vo_dim = 64 KCH), else the parameters'. */
template <int FMT, int KCH>
struct Geom {
    static constexpr bool FIX = KCH > 0;
    static constexpr int E2 = bytes_per_2(FMT);
    static constexpr int v_rs = v_row_stride(FMT);
    int Dq, Dv, nvr, k_rb, v_rb, k_rs, k_S, v_S, k_sw, v_sw;
    int off_v, off_ks, off_vs, off_sh, stage_bytes;
    /* Scale rows start off their 4-byte window only for MXFP4 with a dim that is an odd
     * multiple of 64 (S = dim / 32, S % 4 != 0); NVFP4's S = dim / 16 is a multiple of 4
     * (lowp_gpu_decode_check: dims are multiples of 64), so it needs no shift bytes. */
    bool k_sh, v_sh;

    __device__ __forceinline__ explicit Geom(const Params &p)
    {
        Dq = FIX ? 64 * KCH : p.Dq;
        Dv = FIX ? 64 * KCH : p.Dv;
        nvr = FIX ? (64 * KCH + 127) / 128 : p.nvr;
        k_rb = FIX ? KCH * 32 * E2 : p.k_rb;
        v_rb = FIX ? KCH * 32 * E2 : p.v_rb;
        k_rs = FIX ? k_row_stride(FMT, KCH * 32 * E2) : p.k_rs;
        k_S = FIX ? scales_per_row(FMT, 64 * KCH) : p.k_S;
        v_S = FIX ? scales_per_row(FMT, 64 * KCH) : p.v_S;
        k_sw = FIX ? scale_window(k_S) : p.k_sw;
        v_sw = FIX ? scale_window(v_S) : p.v_sw;
        off_v = 16 * k_rs;
        off_ks = off_v + 16 * v_rs;
        off_vs = off_ks + 16 * k_sw;
        off_sh = off_vs + 16 * v_sw;
        stage_bytes = FIX ? stage_size(off_sh) : p.stage_bytes;
        k_sh = FMT == F_MXFP4 && (k_S & 3) != 0;
        v_sh = FMT == F_MXFP4 && (v_S & 3) != 0;
    }
};

/* The warp's work item and the lane's place in it: sequence b (n positions), KV head h,
 * V slice vr (dims vbase .. vbase + 64 nsl - 1, nsl = 1 or 2), split ci = positions
 * [t0, t1) in ntiles tiles of 16 (ntiles <= 0: t0 >= n, no work); lane = 4g + t. */
struct Item {
    int b, h, vr, warp, lane, g, t;
    int n, ci, t0, t1, ntiles;
    int vbase, nsl;
};

/* Grid: x = groups of p.warps splits, y = (KV head, V slice), z = sequence. */
template <int FMT, int KCH>
__device__ __forceinline__ Item work_item(const Params &p, const Geom<FMT, KCH> &gm)
{
    Item w;
    w.b = blockIdx.z, w.h = blockIdx.y / gm.nvr, w.vr = blockIdx.y % gm.nvr;
    w.warp = threadIdx.x >> 5, w.lane = threadIdx.x & 31, w.g = w.lane >> 2, w.t = w.lane & 3;
    w.n = seq_len(p, w.b);
    w.ci = blockIdx.x * (blockDim.x >> 5) + w.warp;
    w.t0 = w.ci * p.chunk;
    w.t1 = min(w.n, w.t0 + p.chunk);
    w.ntiles = (w.t1 - w.t0 + 15) >> 4;
    w.vbase = 128 * w.vr;
    w.nsl = min(2, (gm.Dv - w.vbase) / 64);
    return w;
}

/* The warp's cp.async ring (the geometry above): tile k of the split goes to stage
 * k mod S, S = p.stages; tiles 0 .. S - 2 are issued before Q is staged (start), and
 * reading tile it first waits for it and refills the stage tile it - 1 used with tile
 * it + S - 1 (next), so S - 1 tiles are in flight while one is computed. Every tile
 * index, issued or not, commits one cp.async group, so that "at most S - 2 groups
 * pending" always means "tile it has landed". */
template <int FMT, int KCH, int IL>
struct Ring {
    static constexpr bool K_IL = FMT == F_NVFP4 && (IL & 1), V_IL = FMT == F_NVFP4 && (IL & 2);
    static constexpr int v_rs = Geom<FMT, KCH>::v_rs;
    const Params &p;
    const Geom<FMT, KCH> &gm;
    /* the item's (Item), and the V slice's first code byte in a row */
    int lane, h, t0, t1, ntiles, vb0, nsl;
    uint8_t *ring; /* the warp's S stages (ring_s: as a shared-memory address) */
    uint32_t ring_s;
    /* copy roles, fixed for the lane (the constructor says what each is) */
    int jj, hf, lim_sc;
    const int *pages;
    bool one_page;
    int rstep;
    size_t page_rows;
    int lane_row, RK, RV;
    bool lines_fast;
    int k_r0, v_r0, k_rows32, v_rows32, k_lane_off, v_lane_off;
    uint32_t k_lane_s, v_lane_s;
    int k_step32, v_step32;
    uint32_t f_code, f_sc, f_kd, f_vd, f_sd;
    /* the walk (start, begin, next): S stages; the page of the next tile to issue, and
     * the stages of the tile to read and of the tile to issue */
    int S, next_page, st_use, st_iss;

    __device__ __forceinline__ Ring(const Params &p_, const Geom<FMT, KCH> &gm_, const Item &w,
                                    uint8_t *ring_)
        : p(p_), gm(gm_), lane(w.lane), h(w.h), t0(w.t0), t1(w.t1), ntiles(w.ntiles),
          vb0(w.vbase * Geom<FMT, KCH>::E2 / 2), nsl(w.nsl), ring(ring_)
    {
        const int g = w.g, t = w.t;
        S = p.stages;
        ring_s = smem_addr(ring);
        jj = lane & 15;
        hf = lane >> 4;
        /* Scale rows are needed up to the end of the last 4-slot group when an interleaved
         * order spreads a slot's scales over its group's rows. */
        lim_sc = (K_IL || V_IL) ? ((t1 + 3) & ~3) : t1;
        pages = p.indices + p.indptr[w.b];
        /* Page size a power of two >= 16 (tiles start at multiples of 16): a tile's 16
         * positions are 16 consecutive slots of one page, and tile row r is pool row row0 +
         * r * rstep (row0 that of its first slot). One page index a tile, row addresses by
         * adding, no shuffles: on the H200 the generic copy below cost NVFP4 about 250 of
         * its 1074 instructions a tile, BF16 about 200 of 657. */
        one_page = p.ps_shift >= 4;
        rstep = p.hnd ? 1 : p.H;
        /* pool row of tile row r = page * PS * H + (slot0 + r) * rstep + h * (HND ? PS : 1);
         * lane_row: that sum's part fixed for the lane (FP4: its tile row jj; else row 0) */
        page_rows = (size_t)p.PS * p.H;
        lane_row = (FMT >= F_NVFP4 ? jj * rstep : 0) + h * (p.hnd ? p.PS : 1);
        /* BF16 and FP8 code rows travel as whole lines: chunk q = lane + 32i of the tile's
         * 16 rows x R 16-byte chunks is row q / R, chunk q % R, so a warp's copy
         * instruction reads 32 consecutive chunks of 32 / R rows (R is even). In the
         * generic path lane r < 16 knows row r's index in the pool and hands it to the
         * lanes that copy that row. On the H200 line copies took BF16 from 60% to 90% of
         * the streaming read (batch 32, 32K); FP4, bound by issue, copies one row per lane
         * pair. */
        RK = gm.k_rb >> 4;
        RV = 2 * nsl * Geom<FMT, KCH>::E2;
        /* BF16 / FP8 lines in one page when a row's R 16-byte chunks divide 32 (R a power
         * of two, 16 at head dim 128 in BF16): lane l copies chunk l % R of tile rows l / R
         * + (32 / R) i, i = 0 .. R / 2 - 1, so its addresses step by a fixed amount. */
        lines_fast = FMT < F_NVFP4 && one_page && RK <= 32 && 32 % RK == 0 && 32 % RV == 0;
        k_r0 = lines_fast ? lane / RK : 0;
        v_r0 = lines_fast ? lane / RV : 0;
        k_rows32 = lines_fast ? 32 / RK : 0;
        v_rows32 = lines_fast ? 32 / RV : 0;
        k_lane_off = k_r0 * rstep * gm.k_rb + 16 * (lane - k_r0 * RK);
        v_lane_off = v_r0 * rstep * gm.v_rb + 16 * (lane - v_r0 * RV);
        k_lane_s = k_r0 * gm.k_rs + 16 * (lane - k_r0 * RK);
        v_lane_s = gm.off_v + v_r0 * v_rs + 16 * (lane - v_r0 * RV);
        k_step32 = k_rows32 * rstep * gm.k_rb;
        v_step32 = v_rows32 * rstep * gm.v_rb;
        /* FP4 at head dim 128 (FIX) in one page: K and V rows have the same bytes, and so
         * do their scale rows (one V slice: vb0 = 0), so a lane needs one code offset, one
         * scale offset and three stage offsets, all fixed for the lane; each tile adds only
         * its page's base row. The offsets are pinned (an empty asm) so that the loop does
         * not rebuild them from the thread index every tile: on the H200 that took NVFP4
         * from 631 to 610 instructions a tile (batch 32, 32K). Pinning kofs and vofs too
         * made two interleaved-scale NVFP4 kernels spill.
         * Code rows (64 bytes) are copied by 4 lanes each, lane (g, t) 16-byte chunk t of
         * tile rows g and g + 8, so that one copy instruction reads 8 whole rows: the L2
         * sees one request per row and instruction. With a lane pair per row (chunks hf
         * and hf + 2, as the scale windows still are) it saw two, and its tag lookups were
         * the busiest part of the memory system: on the H200 (ncu, batch 32, 32K) L2 tag
         * lookups fell from 78% to 62% of peak and NVFP4 from 501-503 to 488 us, for 10
         * more instructions a tile (603 -> 613). */
        f_code = 0, f_sc = 0, f_kd = 0, f_vd = 0, f_sd = 0;
        if constexpr (FMT >= F_NVFP4 && KCH > 0) {
            f_code = (uint32_t)((g * rstep + h * (p.hnd ? p.PS : 1)) * gm.k_rb + 16 * t);
            f_sc = (uint32_t)(lane_row * gm.k_S + 4 * hf);
            f_kd = (uint32_t)(g * gm.k_rs + 16 * t);
            f_vd = (uint32_t)(gm.off_v + g * v_rs + 16 * t);
            f_sd = (uint32_t)(gm.off_ks + jj * gm.k_sw + 4 * hf);
            asm volatile("" : "+r"(f_code), "+r"(f_sc), "+r"(f_kd), "+r"(f_vd), "+r"(f_sd));
        }
    }

    /* The page of tile k: in one page the tile's (one lookup a tile), else lane jj's row's
     * (page 0, an existing page, for rows whose scales are not needed). */
    __device__ __forceinline__ int lookup(int k) const
    {
        if (one_page)
            return pages[(t0 + 16 * k) >> p.ps_shift];
        const int pos = t0 + 16 * k + jj;
        return pos < lim_sc ? pages[page_of_pos(p, pos)] : 0;
    }

    /* FP4 (bound by issue, not by bytes): lane jj copies its own tile row, pool row
     * `row`, without shuffles: 16-byte chunks hf, hf + 2, ... of its K row and V slice,
     * and its scale windows. vc: the row holds a position of the split (else
     * zero-filled); vs: its scales are needed (interleaved orders reach to the end of a
     * 4-slot group). A row outside the split may come from the generic path's page 0 (an
     * address that exists), so its address is formed only when vc (or vs) holds; in one
     * page every tile row is a real slot (in_page), so the address needs no test. */
    __device__ __forceinline__ void copy_fp4_row(int stage, size_t row, bool vc, bool vs,
                                                 bool in_page) const
    {
        const int k_rb = gm.k_rb, k_rs = gm.k_rs, k_S = gm.k_S, v_S = gm.v_S;
        const int k_sw = gm.k_sw, v_sw = gm.v_sw, off_v = gm.off_v;
        const uint32_t s0 = ring_s + stage * gm.stage_bytes;
        const uint8_t *ksrc = p.kc + (vc || in_page ? row * k_rb : 0);
#pragma unroll 4
        for (int i = 0; i < (RK >> 1); i++) {
            const int c = 2 * i + hf;
            cp16(s0 + jj * k_rs + 16 * c, ksrc + 16 * c, vc ? 16 : 0);
        }
        const uint8_t *vsrc = p.vc + (vc || in_page ? row * gm.v_rb + vb0 : 0);
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const int c = 2 * i + hf;
            if (i < nsl)
                cp16(s0 + off_v + jj * v_rs + 16 * c, vsrc + 16 * c, vc ? 16 : 0);
        }
        cp_scales(p.ks, row * k_S, k_S, k_sw, s0 + gm.off_ks + jj * k_sw, vs, hf);
        if (in_page && (v_S == 8 || v_S == 4)) { /* head dim 128: 1 or 2 aligned words */
            if (hf < (v_S >> 2))
                cp4(s0 + gm.off_vs + jj * v_sw + 4 * hf, p.vs + row * v_S + 4 * hf,
                    vs ? 4 : 0);
        } else {
            cp_scales(p.vs, row * v_S, v_S, v_sw, s0 + gm.off_vs + jj * v_sw, vs, hf);
        }
        uint8_t *st = ring + stage * gm.stage_bytes;
        if (hf == 0 && gm.k_sh)
            st[gm.off_sh + jj] = (uint8_t)((row * k_S) & 3);
        if (hf == 0 && gm.v_sh)
            st[gm.off_sh + 16 + jj] = (uint8_t)((row * v_S) & 3);
    }

    /* Tile k into stage `stage` when its 16 positions are slots of one page `page`. */
    __device__ __forceinline__ void issue_one_page(int k, int stage, int page) const
    {
        const int k_rb = gm.k_rb, v_rb = gm.v_rb, k_rs = gm.k_rs, k_S = gm.k_S;
        const int off_v = gm.off_v;
        const int pos0 = t0 + 16 * k;
        const int nc = t1 - pos0; /* tile rows r < nc hold positions of the split */
        const uint32_t s0 = ring_s + stage * gm.stage_bytes;
        if constexpr (FMT >= F_NVFP4 && KCH > 0) {
            const size_t base = (size_t)page * page_rows + (size_t)((pos0 & (p.PS - 1)) * rstep);
            const uint8_t *ksrc = p.kc + base * k_rb + f_code, *vsrc = p.vc + base * k_rb + f_code;
            const uint8_t *kssrc = p.ks + base * k_S + f_sc, *vssrc = p.vs + base * k_S + f_sc;
            /* All 16 rows, also those past the split's end: in one page each is a slot of
             * the pool, and what it holds never reaches the output (step 2 gives those
             * positions -Inf, and their V enters the MMA as +0; see pv_tile), so no size
             * tests are needed. */
            const size_t step8 = (size_t)(8 * rstep * k_rb);
            cp16(s0 + f_kd, ksrc, 16);
            cp16(s0 + f_kd + 8 * k_rs, ksrc + step8, 16);
            cp16(s0 + f_vd, vsrc, 16);
            cp16(s0 + f_vd + 8 * v_rs, vsrc + step8, 16);
            if (k_S == 8 || hf == 0) { /* NVFP4: 2 scale words a row; MXFP4: 1 */
                cp4(s0 + f_sd, kssrc, 4);
                cp4(s0 + f_sd + 16 * gm.k_sw, vssrc, 4);
            }
            return;
        }
        const size_t row0 =
            (size_t)page * page_rows + (size_t)((pos0 & (p.PS - 1)) * rstep + lane_row);
        if constexpr (FMT >= F_NVFP4) {
            copy_fp4_row(stage, row0, jj < nc, jj < lim_sc - pos0, true);
        } else if (lines_fast) {
            const uint8_t *kl = p.kc + row0 * k_rb + k_lane_off;
            const uint8_t *vl = p.vc + row0 * v_rb + vb0 + v_lane_off;
            const uint32_t ks0 = s0 + k_lane_s, vs0 = s0 + v_lane_s;
            if (nc >= 16) {
#pragma unroll 4
                for (int i = 0; i < (RK >> 1); i++)
                    cp16(ks0 + i * k_rows32 * k_rs, kl + (size_t)i * k_step32, 16);
#pragma unroll 4
                for (int i = 0; i < (RV >> 1); i++)
                    cp16(vs0 + i * v_rows32 * v_rs, vl + (size_t)i * v_step32, 16);
            } else { /* the split's last tile: rows past its end are zero-filled */
                for (int i = 0; i < (RK >> 1); i++)
                    cp16(ks0 + i * k_rows32 * k_rs, kl + (size_t)i * k_step32,
                         k_r0 + i * k_rows32 < nc ? 16 : 0);
                for (int i = 0; i < (RV >> 1); i++)
                    cp16(vs0 + i * v_rows32 * v_rs, vl + (size_t)i * v_step32,
                         v_r0 + i * v_rows32 < nc ? 16 : 0);
            }
        } else {
            const uint8_t *kb = p.kc + row0 * k_rb, *vb = p.vc + row0 * v_rb + vb0;
            const int kstep = rstep * k_rb, vstep = rstep * v_rb;
            if (nc >= 16) {
#pragma unroll 4
                for (int q = lane; q < 16 * RK; q += 32) {
                    const int r = q / RK, c = q - r * RK;
                    cp16(s0 + r * k_rs + 16 * c, kb + r * kstep + 16 * c, 16);
                }
#pragma unroll 4
                for (int q = lane; q < 16 * RV; q += 32) {
                    const int r = q / RV, c = q - r * RV;
                    cp16(s0 + off_v + r * v_rs + 16 * c, vb + r * vstep + 16 * c, 16);
                }
            } else { /* the split's last tile: rows past its end are zero-filled */
                for (int q = lane; q < 16 * RK; q += 32) {
                    const int r = q / RK, c = q - r * RK;
                    cp16(s0 + r * k_rs + 16 * c, kb + r * kstep + 16 * c, r < nc ? 16 : 0);
                }
                for (int q = lane; q < 16 * RV; q += 32) {
                    const int r = q / RV, c = q - r * RV;
                    cp16(s0 + off_v + r * v_rs + 16 * c, vb + r * vstep + 16 * c,
                         r < nc ? 16 : 0);
                }
            }
        }
    }

    /* Tile k (of the split) into stage `stage`; page: lookup(k). Rows past the split's end
     * are zero-filled or, in one page, copied but never used (issue_one_page). */
    __device__ __forceinline__ void issue(int k, int stage, int page) const
    {
        if (one_page) {
            issue_one_page(k, stage, page);
            return;
        }
        const int k_rb = gm.k_rb, v_rb = gm.v_rb, k_rs = gm.k_rs, off_v = gm.off_v;
        const int pos = t0 + 16 * k + jj;
        const int slot = p.ps_shift >= 0 ? (pos & (p.PS - 1)) : pos - (pos / p.PS) * p.PS;
        const size_t row = row_of(p, (size_t)page, slot, h);
        const uint32_t s0 = ring_s + stage * gm.stage_bytes;
        if constexpr (FMT >= F_NVFP4) {
            copy_fp4_row(stage, row, pos < t1, pos < lim_sc, false);
        } else {
            const int nc = t1 - (t0 + 16 * k); /* rows before the split's end */
            if (RK == RV) {
#pragma unroll 4
                for (int q = lane; q < 16 * RK; q += 32) {
                    const int r = q / RK, c = q - r * RK;
                    const size_t rr = __shfl_sync(0xFFFFFFFFu, row, r);
                    const bool v = r < nc;
                    cp16(s0 + r * k_rs + 16 * c, p.kc + (v ? rr * k_rb + 16 * c : 0), v ? 16 : 0);
                    cp16(s0 + off_v + r * v_rs + 16 * c,
                         p.vc + (v ? rr * v_rb + vb0 + 16 * c : 0), v ? 16 : 0);
                }
            } else {
#pragma unroll 4
                for (int q = lane; q < 16 * RK; q += 32) {
                    const int r = q / RK, c = q - r * RK;
                    const size_t rr = __shfl_sync(0xFFFFFFFFu, row, r);
                    const bool v = r < nc;
                    cp16(s0 + r * k_rs + 16 * c, p.kc + (v ? rr * k_rb + 16 * c : 0), v ? 16 : 0);
                }
#pragma unroll 4
                for (int q = lane; q < 16 * RV; q += 32) {
                    const int r = q / RV, c = q - r * RV;
                    const size_t rr = __shfl_sync(0xFFFFFFFFu, row, r);
                    const bool v = r < nc;
                    cp16(s0 + off_v + r * v_rs + 16 * c,
                         p.vc + (v ? rr * v_rb + vb0 + 16 * c : 0), v ? 16 : 0);
                }
            }
        }
    }

    /* Tiles 0 .. S - 2 in flight (one group each, empty past ntiles). */
    __device__ __forceinline__ void start()
    {
        for (int k = 0; k < S - 1; k++) {
            if (k < ntiles)
                issue(k, k, lookup(k));
            cp_commit();
        }
    }

    /* After start: tile 0 is next; the page of tile S - 1 is looked up ahead. */
    __device__ __forceinline__ void begin()
    {
        next_page = S - 1 < ntiles ? lookup(S - 1) : 0;
        st_use = 0;
        st_iss = S - 1; /* stage of tile it, and of tile it + S - 1 */
    }

    /* Tile it's stage, once its copies have landed; the stage tile it - 1 used is refilled
     * with tile it + S - 1 first (the warp has finished reading it: __syncwarp), and the
     * page of the tile after that is looked up a tile ahead. */
    __device__ __forceinline__ const uint8_t *next(int it)
    {
        if (S == 2) /* the default ring: skip cp_wait's jump table */
            asm volatile("cp.async.wait_group 0;" ::: "memory");
        else
            cp_wait(S - 2);
        __syncwarp();
        { /* refill the stage that tile it - 1 used */
            const int k = it + S - 1;
            if (k < ntiles)
                issue(k, st_iss, next_page);
            cp_commit();
            if (k + 1 < ntiles)
                next_page = lookup(k + 1);
            st_iss = st_iss + 1 == S ? 0 : st_iss + 1;
        }
        const uint8_t *st = ring + st_use * gm.stage_bytes;
        st_use = st_use + 1 == S ? 0 : st_use + 1;
        return st;
    }
};

/* The query heads of KV head h of sequence b (G rows of Dq from q), staged by the CTA as
 * each lane's A fragment per k-step: qs[ks * 32 + lane], ks = 0 .. Dq / 16 - 1. a0 / a2
 * hold the dims (kq, kq + dk) / (kq + dn, kq + dn + dk), the K fragment's pairing
 * (k_frag), the header's dim(c, ks, kk); a1 / a3 the same for row g + 8. Rows past the
 * group's G heads are zero. */
template <int FMT, int KCH, int HG>
__device__ __forceinline__ void stage_q(const Params &p, const Geom<FMT, KCH> &gm, int b, int h,
                                        uint4 *qs)
{
    const int Dq = gm.Dq, nks = Dq / 16;
    const uint16_t *q = p.q + ((size_t)b * p.NQ + (size_t)h * p.G) * Dq;
    for (int e = threadIdx.x; e < nks * 32; e += blockDim.x) {
        const int ks = e >> 5, ln = e & 31, gg = ln >> 2, tt = ln & 3, kl = ks & 3;
        const int kq = 64 * (ks >> 2) + 16 * tt +
                       (FMT >= F_NVFP4 ? 8 * (kl >> 1) + 2 * (kl & 1) : 4 * kl);
        const int dk = FMT >= F_NVFP4 ? 4 : 1, dn = FMT >= F_NVFP4 ? 1 : 2;
        auto pair = [&](int row, int d) -> uint32_t {
            const uint16_t *qr = q + row * Dq;
            return (uint32_t)qr[d] | ((uint32_t)qr[d + dk] << 16);
        };
        uint32_t r[4] = {0, 0, 0, 0};
        if (gg < p.G) {
            r[0] = pair(gg, kq);
            r[2] = pair(gg, kq + dn);
        }
        if (HG == 2 && gg + 8 < p.G) {
            r[1] = pair(gg + 8, kq);
            r[3] = pair(gg + 8, kq + dn);
        }
        qs[e] = make_uint4(r[0], r[1], r[2], r[3]);
    }
}

/* Step 2's Q.K^T of one tile (stage st): S0 += the products of the heads with positions
 * tt + g (n-tile 0), S1 += those with positions tt + 8 + g (n-tile 1), over the qk_dim /
 * 64 chunks; K is dequantized per chunk (k_frag, with step 1 for FP4 and the rows' block
 * scales). Lane (g, t) ends with heads 2t, 2t + 1 (c0, c1) and 2t + 8, 2t + 9 (c2, c3) of
 * its two positions. kofs: the lane's K fragment offset in a stage; ksh: the K shift
 * bytes (MXFP4 rows off their window) or null. */
template <int FMT, int KCH, bool K_IL>
__device__ __forceinline__ void qk_scores(const Params &p, const Geom<FMT, KCH> &gm,
                                          const Item &w, const uint8_t *st, const uint8_t *ksh,
                                          int kofs, const uint4 *qs, float *S0, float *S1)
{
    constexpr int E2 = Geom<FMT, KCH>::E2;
    const int kch = KCH > 0 ? KCH : p.kch, lane = w.lane, g = w.g, t = w.t, e5m2 = p.e5m2;
#pragma unroll(KCH > 0 ? KCH : 1)
    for (int c = 0; c < kch; c++) {
        uint32_t ka[8], kb[8];
        uint8_t sa = 0, sb = 0;
        if (FMT >= F_NVFP4) {
            const int blk = FMT == F_NVFP4 ? 4 * c + t : 2 * c + (t >> 1);
            sa = scale_at<K_IL>(st + gm.off_ks, gm.k_sw, ksh, g, blk, gm.k_S);
            sb = scale_at<K_IL>(st + gm.off_ks, gm.k_sw, ksh, g + 8, blk, gm.k_S);
        }
        uint32_t sa2 = 0, sb2 = 0; /* FP4: each scale as a BF16 pair (s, s) */
        if (FMT >= F_NVFP4) {
            const uint32_t sab = FMT == F_NVFP4 ? nvfp4_scales(sa, sb) : mxfp4_scales(sa, sb);
            sa2 = lowp_dec_prmt(sab, 0, 0x1010u);
            sb2 = lowp_dec_prmt(sab, 0, 0x3232u);
        }
        const uint8_t *kA = st + kofs + 32 * E2 * c;
        k_frag<FMT>(kA, sa2, e5m2, ka);
        k_frag<FMT>(kA + 8 * gm.k_rs, sb2, e5m2, kb);
#pragma unroll
        for (int ks = 0; ks < 4; ks++) {
            uint4 a = qs[(c * 4 + ks) * 32 + lane];
            mma_bf16(S0, a, ka[2 * ks], ka[2 * ks + 1]);
            mma_bf16(S1, a, kb[2 * ks], kb[2 * ks + 1]);
        }
    }
}

/* The rest of step 2: the lane's scores times qks, as heads g (sA) and g + 8 (sB) at
 * positions pz, pz + 1, pz + 8, pz + 9 (pz = tt + 2t); val[i]: that position is before
 * the split's end t1. Unless the tile is full, positions past the end score -Inf. */
__device__ __forceinline__ void scale_scores(const float *S0, const float *S1, float qks, int tt,
                                             int t, int t1, bool full, float *sA, float *sB,
                                             bool *val)
{
    sA[0] = S0[0] * qks, sA[1] = S0[1] * qks, sA[2] = S1[0] * qks, sA[3] = S1[1] * qks;
    sB[0] = S0[2] * qks, sB[1] = S0[3] * qks, sB[2] = S1[2] * qks, sB[3] = S1[3] * qks;
    const int pz = tt + 2 * t;
    val[0] = pz < t1, val[1] = pz + 1 < t1, val[2] = pz + 8 < t1, val[3] = pz + 9 < t1;
    if (!full) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            if (!val[i]) {
                sA[i] = -INFINITY;
                sB[i] = -INFINITY;
            }
        }
    }
}

/* The online softmax's running state for the lane's heads g (A) and g + 8 (B, HG = 2
 * only): the maximum m of the scores so far and the sum l of exp2(s - m) over them
 * (m = -Inf, l = 0 before the first tile). */
struct SoftmaxState {
    float mA, mB, lA, lB;
};

/* Step 3 for one tile, before the rescale: the new maxima mn (the row maximum over the
 * quad's 16 positions, reduced across t by shuffles), d = m - mn, triv (alpha is exactly
 * 1), the tile's row sums L, and P as the PV MMA's B fragments: P0[hh] = head g (+ 8)'s
 * p at positions 2t, 2t + 1, P1[hh] at 2t + 8, 2t + 9. */
struct TileSoftmax {
    float mnA, dA, LA, mnB, dB, LB;
    bool trivA, trivB;
    uint32_t P0[2], P1[2];
};

/* Heads g + 8 only when HG = 2: MMA rows are independent, and rows past G are never
 * stored. */
template <int HG>
__device__ __forceinline__ TileSoftmax softmax_tile(const float *sA, const float *sB,
                                                    const SoftmaxState &sm, int G, int g)
{
    const float mA = sm.mA, mB = sm.mB;
    TileSoftmax r;
    float mtA = fmaxf(fmaxf(sA[0], sA[1]), fmaxf(sA[2], sA[3]));
    mtA = fmaxf(mtA, __shfl_xor_sync(0xFFFFFFFFu, mtA, 1));
    mtA = fmaxf(mtA, __shfl_xor_sync(0xFFFFFFFFu, mtA, 2));
    const float mnA = fmaxf(mA, mtA);
    /* alpha = exp2(m - m_new) is exactly 1 when m_new is -Inf or the maximum did not
     * move (a difference of +-0; Inf - Inf is NaN and takes the exp2 path), so ex2
     * for alpha and the o * alpha rescale run only when some lane needs them (rescale) */
    const float dA = mA - mnA;
    const bool trivA = mnA == -INFINITY || dA == 0.0f;
    /* p = 0 when m_new is -Inf (step 3), computed as ex2(-Inf), which is +0 (the
     * instruction's result, lowp/ex2_approx.h), so that the exponentials are one straight
     * run of independent instructions rather than a branch each */
    float xA[4], pA[4], pB[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int i = 0; i < 4; i++)
        xA[i] = mnA == -INFINITY ? -INFINITY : sA[i] - mnA;
    if (HG == 1 && G <= 4) {
        /* Rows g >= 4 of A are zeros (no such head), so lane (g ^ 4, t) = lane ^ 16
         * takes over lane (g, t)'s positions 2t + 8, 2t + 9 (xA[2], xA[3]) and hands
         * back their p: the same values with half the exponentials a lane. What the
         * lanes of rows g >= 4 end up holding reaches only MMA columns g >= G, which are
         * never stored. */
        const bool own = g < 4;
        const float y0 = __shfl_xor_sync(0xFFFFFFFFu, xA[2], 16);
        const float y1 = __shfl_xor_sync(0xFFFFFFFFu, xA[3], 16);
        pA[0] = lowp_exp2_hw(own ? xA[0] : y0);
        pA[1] = lowp_exp2_hw(own ? xA[1] : y1);
        pA[2] = __shfl_xor_sync(0xFFFFFFFFu, pA[0], 16);
        pA[3] = __shfl_xor_sync(0xFFFFFFFFu, pA[1], 16);
    } else {
#pragma unroll
        for (int i = 0; i < 4; i++)
            pA[i] = lowp_exp2_hw(xA[i]);
    }
    float LA = ((pA[0] + pA[1]) + pA[2]) + pA[3];
    LA = LA + __shfl_xor_sync(0xFFFFFFFFu, LA, 1);
    LA = LA + __shfl_xor_sync(0xFFFFFFFFu, LA, 2);
    float dB = 0.0f, mnB = mB, LB = 0.0f;
    bool trivB = true;
    if (HG == 2) {
        float mtB = fmaxf(fmaxf(sB[0], sB[1]), fmaxf(sB[2], sB[3]));
        mtB = fmaxf(mtB, __shfl_xor_sync(0xFFFFFFFFu, mtB, 1));
        mtB = fmaxf(mtB, __shfl_xor_sync(0xFFFFFFFFu, mtB, 2));
        mnB = fmaxf(mB, mtB);
        dB = mB - mnB;
        trivB = mnB == -INFINITY || dB == 0.0f;
#pragma unroll
        for (int i = 0; i < 4; i++)
            pB[i] = lowp_exp2_hw(mnB == -INFINITY ? -INFINITY : sB[i] - mnB);
        LB = ((pB[0] + pB[1]) + pB[2]) + pB[3];
        LB = LB + __shfl_xor_sync(0xFFFFFFFFu, LB, 1);
        LB = LB + __shfl_xor_sync(0xFFFFFFFFu, LB, 2);
    }
    /* B = P^T of n-tile hh: head g (+ 8)'s probabilities at positions 2t, 2t + 1 (b0)
     * and 2t + 8, 2t + 9 (b1) */
    r.P0[0] = pack_bf16(pA[0], pA[1]);
    r.P0[1] = pack_bf16(pB[0], pB[1]);
    r.P1[0] = pack_bf16(pA[2], pA[3]);
    r.P1[1] = pack_bf16(pB[2], pB[3]);
    r.mnA = mnA, r.dA = dA, r.LA = LA, r.trivA = trivA;
    r.mnB = mnB, r.dB = dB, r.LB = LB, r.trivB = trivB;
    return r;
}

/* The rest of step 3: o * alpha for the accumulators, l = l * alpha + L, m = m_new.
 * o * alpha is o when alpha is 1 (NaN stays NaN: the MMA gives the canonical NaN for a
 * NaN C either way). Accumulators of n-tile hh hold heads 8hh + 2t and 8hh + 2t + 1,
 * whose alpha lanes 8t and 8t + 4 computed (alA, or alB for hh = 1). */
template <int HG>
__device__ __forceinline__ void rescale(const TileSoftmax &ts, int t, float (&O)[HG][2][4][4],
                                        SoftmaxState &sm)
{
    float alA = 1.0f, alB = 1.0f;
    if (__any_sync(0xFFFFFFFFu, !ts.trivA || !ts.trivB)) {
        alA = ts.trivA ? 1.0f : lowp_exp2_hw(ts.dA);
        if (HG == 2)
            alB = ts.trivB ? 1.0f : lowp_exp2_hw(ts.dB);
#pragma unroll
        for (int hh = 0; hh < HG; hh++) {
            const float al = hh ? alB : alA;
            const float al0 = __shfl_sync(0xFFFFFFFFu, al, 8 * t);
            const float al1 = __shfl_sync(0xFFFFFFFFu, al, 8 * t + 4);
#pragma unroll
            for (int s = 0; s < 2; s++)
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    O[hh][s][i][0] = O[hh][s][i][0] * al0;
                    O[hh][s][i][1] = O[hh][s][i][1] * al1;
                    O[hh][s][i][2] = O[hh][s][i][2] * al0;
                    O[hh][s][i][3] = O[hh][s][i][3] * al1;
                }
        }
    }
    sm.lA = sm.lA * alA + ts.LA;
    sm.mA = ts.mnA;
    if (HG == 2) {
        sm.lB = sm.lB * alB + ts.LB;
        sm.mB = ts.mnB;
    }
}

/* P V of one tile (stage st): O[hh][s] += V^T P^T for the nsl 64-dim halves s of the V
 * slice, V dequantized in registers (v_pairs, with step 1 for FP4 and the rows' block
 * scales); a position past the split's end enters with V = +0. vofs: the lane's V
 * fragment offset in a stage; vsh: the V shift bytes or null; val, full: as scale_scores
 * gave them. */
template <int FMT, int KCH, bool V_IL, int HG>
__device__ __forceinline__ void pv_tile(const Params &p, const Geom<FMT, KCH> &gm, const Item &w,
                                        const uint8_t *st, const uint8_t *vsh, int vofs,
                                        bool full, const bool *val, const TileSoftmax &ts,
                                        float (&O)[HG][2][4][4])
{
    constexpr int E2 = Geom<FMT, KCH>::E2, v_rs = Geom<FMT, KCH>::v_rs;
    const int g = w.g, t = w.t, nsl = w.nsl, e5m2 = p.e5m2;
    const int vblk0 = FMT == F_NVFP4 ? w.vbase / 16 : w.vbase / 32; /* the slice's first block */
#pragma unroll
    for (int s = 0; s < 2; s++) {
        if (s < nsl) {
            /* FP4: the scales of rows 2t, 2t + 1 (s01) and 2t + 8, 2t + 9 (s89) in
             * block vblk, which depends on g only through g >> 1, so lanes (g, t) and
             * (g ^ 1, t) = lane ^ 4 need the same four: each converts one pair (even
             * g rows 2t, 2t + 1, odd g the other two) and they swap by a shuffle. On
             * the H200 (batch 32, 32K) NVFP4 went from 610 to 603 instructions a tile
             * at the same time (500 us), MXFP4 from 713 to 697 and from 543.4 to
             * 532.3 us. */
            uint32_t s01 = 0, s89 = 0;
            if (FMT >= F_NVFP4) {
                const int vblk = vblk0 + (FMT == F_NVFP4 ? 4 * s + (g >> 1) : 2 * s + (g >> 2));
                const uint8_t *sc = st + gm.off_vs;
                const bool odd = g & 1;
                const int r = 2 * t + (odd ? 8 : 0);
                const uint8_t ca = scale_at<V_IL>(sc, gm.v_sw, vsh, r, vblk, gm.v_S);
                const uint8_t cb = scale_at<V_IL>(sc, gm.v_sw, vsh, r + 1, vblk, gm.v_S);
                const uint32_t mine = FMT == F_NVFP4 ? nvfp4_scales(ca, cb) : mxfp4_scales(ca, cb);
                const uint32_t other = __shfl_xor_sync(0xFFFFFFFFu, mine, 4);
                s01 = odd ? other : mine;
                s89 = odd ? mine : other;
            }
            const uint8_t *vA = st + vofs + 32 * E2 * s;
            uint32_t b0[8], b1[8];
            v_pairs<FMT>(vA, vA + v_rs, s01, e5m2, b0);
            v_pairs<FMT>(vA + 8 * v_rs, vA + 9 * v_rs, s89, e5m2, b1);
            if (!full) { /* V of a position past the end enters as +0 */
                const uint32_t m0 = (val[0] ? 0xFFFFu : 0u) | (val[1] ? 0xFFFF0000u : 0u);
                const uint32_t m1 = (val[2] ? 0xFFFFu : 0u) | (val[3] ? 0xFFFF0000u : 0u);
#pragma unroll
                for (int j = 0; j < 8; j++) {
                    b0[j] &= m0;
                    b1[j] &= m1;
                }
            }
            /* m-tile i: rows g, g + 8 = the lane's dims 2i, 2i + 1 */
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const uint4 a = make_uint4(b0[2 * i], b0[2 * i + 1], b1[2 * i], b1[2 * i + 1]);
#pragma unroll
                for (int hh = 0; hh < HG; hh++)
                    mma_bf16(O[hh][s][i], a, ts.P0[hh], ts.P1[hh]);
            }
        }
    }
}

/* Step 4: the split's (m, l) of each head of the group (once, by the lanes t = 0 of V
 * slice 0) and its o, the unnormalized sum over its positions, for the slice's dims
 * (accumulator O[hh][s][i][c] is dim vbase + 64s + 8g + 2i + (c >> 1) of head 8hh + 2t +
 * (c & 1)), at workspace row (item * G + head) for item (b, h, ci). */
template <int FMT, int KCH, int HG>
__device__ __forceinline__ void write_partial(const Params &p, const Geom<FMT, KCH> &gm,
                                              const Item &w, const SoftmaxState &sm,
                                              const float (&O)[HG][2][4][4])
{
    const int g = w.g, t = w.t, Dv = gm.Dv, vbase = w.vbase, nsl = w.nsl;
    const size_t item = ((size_t)w.b * p.H + w.h) * p.nch_max + w.ci;
    const size_t row0 = item * p.G; /* workspace row of the group's first head */
    if (w.vr == 0 && t == 0) {
        if (g < p.G) {
            p.ws_m[row0 + g] = sm.mA;
            p.ws_l[row0 + g] = sm.lA;
        }
        if (HG == 2 && g + 8 < p.G) {
            p.ws_m[row0 + g + 8] = sm.mB;
            p.ws_l[row0 + g + 8] = sm.lB;
        }
    }
#pragma unroll
    for (int hh = 0; hh < HG; hh++)
#pragma unroll
        for (int s = 0; s < 2; s++) {
            if (s < nsl) {
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const int d = vbase + 64 * s + 8 * g + 2 * i;
#pragma unroll
                    for (int c = 0; c < 4; c++) {
                        const int r = 8 * hh + 2 * t + (c & 1);
                        if (r < p.G)
                            p.ws_o[(row0 + r) * Dv + d + (c >> 1)] = O[hh][s][i][c];
                    }
                }
            }
        }
}

/* Steps 1-4 for one work item a warp (the roles above): the split's (m, l, o) of each
 * query head of the group, for one 128-dim slice of vo_dim. */
template <int FMT, int KCH, int IL, int HG>
__global__ void __launch_bounds__(LOWP_DEC_MAX_WARPS * 32, (ctas_per_sm<FMT, KCH, HG>()))
    decode_split(const Params p)
{
    using RingT = Ring<FMT, KCH, IL>;
    constexpr int E2 = Geom<FMT, KCH>::E2;
    extern __shared__ uint4 smem[];
    uint4 *qs = smem; /* [Dq/16][32]: each lane's A fragment per k-step, then the rings */
    const Geom<FMT, KCH> gm(p);
    const Item w = work_item(p, gm);
    const float qks = p.qk_scale[w.h];
    /* the lane's fragment offsets inside a stage, the same for every tile */
    const int kofs = w.g * gm.k_rs + 8 * E2 * w.t;
    const int vofs = gm.off_v + 2 * w.t * Geom<FMT, KCH>::v_rs + 4 * E2 * w.g;

    /* The first tiles' copies are issued before Q is staged, so that the two latencies
     * overlap at the start of every split; a warp without work (t0 >= n) still stages
     * its share of Q. */
    RingT ring(p, gm, w,
               reinterpret_cast<uint8_t *>(smem + gm.Dq / 16 * 32) +
                   (size_t)w.warp * p.stages * gm.stage_bytes);
    ring.start();
    stage_q<FMT, KCH, HG>(p, gm, w.b, w.h, qs);
    __syncthreads();
    if (w.t0 >= w.n)
        return;
    ring.begin();

    SoftmaxState sm = {-INFINITY, -INFINITY, 0.0f, 0.0f};
    float O[HG][2][4][4];
#pragma unroll
    for (int hh = 0; hh < HG; hh++)
#pragma unroll
        for (int s = 0; s < 2; s++)
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int c = 0; c < 4; c++)
                    O[hh][s][i][c] = 0.0f;

    for (int it = 0; it < w.ntiles; it++) {
        const uint8_t *st = ring.next(it); /* tile it: positions tt .. tt + 15 */
        const int tt = w.t0 + 16 * it;
        const bool full = tt + 16 <= w.t1;
        const uint8_t *ksh = gm.k_sh ? st + gm.off_sh : nullptr;
        const uint8_t *vsh = gm.v_sh ? st + gm.off_sh + 16 : nullptr;

        float S0[4] = {0.0f, 0.0f, 0.0f, 0.0f}, S1[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        qk_scores<FMT, KCH, RingT::K_IL>(p, gm, w, st, ksh, kofs, qs, S0, S1);
        float sA[4], sB[4];
        bool val[4];
        scale_scores(S0, S1, qks, tt, w.t, w.t1, full, sA, sB, val);
        const TileSoftmax ts = softmax_tile<HG>(sA, sB, sm, p.G, w.g);
        rescale<HG>(ts, w.t, O, sm);
        pv_tile<FMT, KCH, RingT::V_IL, HG>(p, gm, w, st, vsh, vofs, full, val, ts, O);
    }
    cp_wait(0);
    write_partial<FMT, KCH, HG>(p, gm, w, sm, O);
}


/* Step 5, the merge: one CTA per (sequence, query head, 64 output dims), one thread per
 * output dim. The arithmetic is the definition's, in its order:
 *   M = fmaxf over the splits' m_c. fmaxf is exact and, over values that are never NaN
 *     (m starts at -Inf and ignores NaN scores), gives the same value in any order up to
 *     the sign of a zero M; the sign never matters, since M is only used in m_c - M
 *     (x - (+0) = x - (-0) for x != 0, and +-0 - +-0 is a zero, whose ex2 is 1).
 *     So the CTA reduces it as a tree.
 *   w_c = ex2(m_c - M); L = L + fl(l_c w_c); O_d = O_d + fl(o_c,d w_c), c in order.
 *     The sums stay sequential in c, so each thread runs them itself; the w_c and the
 *     products l_c w_c (the same roundings as computing them in the loop) are formed once
 *     per CTA, a tile of splits at a time, in shared memory.
 * The merge is bound by the latency of its o_c,d loads: at batch 1 it has only
 * num_q_heads x vo_dim threads, each summing up to 256 splits (1M tokens). So each
 * thread streams its o_c,d through a ring of MERGE_RING cp.async groups of MERGE_G splits
 * in shared memory, MERGE_RING - 1 groups in flight while it sums one. The version before
 * loaded the o_c,d in registers, 32 splits at a time; nvcc interleaved each load with its
 * sum, leaving 1 to 7 in flight, and on an H100 the merge took 29 us at batch 1 x 128K (128
 * splits a thread) and 55 us at 1M (256), against 80 and 629 us for the split kernel
 * (Nsight Compute). 64 dims a CTA spread those threads over more SMs and keep the ring
 * at 16 KB. */
#define MERGE_TILE 512
#define MERGE_DIMS 64
#define MERGE_G 16
#define MERGE_RING 4
__global__ void __launch_bounds__(MERGE_DIMS) decode_merge(const Params p)
{
    __shared__ float s_w[MERGE_TILE], s_lw[MERGE_TILE], s_max[MERGE_DIMS / 32];
    __shared__ float s_o[MERGE_RING * MERGE_G][MERGE_DIMS];
    const int qh = (int)blockIdx.x, b = (int)blockIdx.y, dl = (int)threadIdx.x;
    const int d = (int)blockIdx.z * MERGE_DIMS + dl; /* < Dv: Dv is a multiple of 64 */
    const int h = qh / p.G, r = qh % p.G;
    const int n = seq_len(p, b), nch = (n + p.chunk - 1) / p.chunk;
    const size_t item0 = ((size_t)b * p.H + h) * p.nch_max;
    const float *m_of = p.ws_m + item0 * p.G + r; /* split c at [c * G] */
    const float *l_of = p.ws_l + item0 * p.G + r;
    const size_t o_stride = (size_t)p.G * p.Dv;
    const float *o_of = p.ws_o + (item0 * p.G + r) * p.Dv + d; /* split c at [c * o_stride] */

    float M = -INFINITY;
    for (int c = dl; c < nch; c += MERGE_DIMS)
        M = fmaxf(M, m_of[(size_t)c * p.G]);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
    if ((dl & 31) == 0)
        s_max[dl >> 5] = M;
    __syncthreads();
    M = -INFINITY;
    for (int i = 0; i < MERGE_DIMS / 32; i++)
        M = fmaxf(M, s_max[i]);

    float L = 0.0f, Ov = 0.0f;
    for (int c0 = 0; c0 < nch; c0 += MERGE_TILE) {
        const int tn = min(MERGE_TILE, nch - c0), ng = (tn + MERGE_G - 1) / MERGE_G;
        const float *oc = o_of + (size_t)c0 * o_stride;
        /* group k: splits c0 + kG .. into ring slot k mod RING; always committed (empty
         * past the tile's end), so that "group k done" is wait_group RING - 1 */
        auto issue = [&](int k) {
            if (k < ng) {
                const int j0 = k * MERGE_G, gn = min(MERGE_G, tn - j0);
                float *slot = &s_o[(k % MERGE_RING) * MERGE_G][dl];
                for (int j = 0; j < gn; j++)
                    cp4(smem_addr(slot + j * MERGE_DIMS), oc + (size_t)(j0 + j) * o_stride, 4);
            }
            cp_commit();
        };
        for (int k = 0; k < MERGE_RING - 1; k++)
            issue(k);
        __syncthreads(); /* the previous tile's w are read */
        for (int i = dl; i < tn; i += MERGE_DIMS) {
            const float w = lowp_exp2_hw(m_of[(size_t)(c0 + i) * p.G] - M);
            s_w[i] = w;
            s_lw[i] = l_of[(size_t)(c0 + i) * p.G] * w;
        }
        __syncthreads();
        for (int k = 0; k < ng; k++) {
            issue(k + MERGE_RING - 1); /* into the slot group k - 1 was summed from */
            cp_wait(MERGE_RING - 1);   /* group k is in (this thread's own copies) */
            const int j0 = k * MERGE_G, gn = min(MERGE_G, tn - j0);
            const float *slot = &s_o[(k % MERGE_RING) * MERGE_G][dl];
            for (int j = 0; j < gn; j++) {
                L = L + s_lw[j0 + j];
                Ov = Ov + slot[j * MERGE_DIMS] * s_w[j0 + j];
            }
        }
    }
    cp_wait(0);
    float vs = p.v_global[p.n_v_global > 1 ? h : 0] * p.unscale;
    __nv_bfloat16 o = __float2bfloat16_rn((Ov / L) * vs);
    p.out[((size_t)b * p.NQ + qh) * p.Dv + d] = *reinterpret_cast<uint16_t *>(&o);
}

/* Shapes and workspace layout shared by the size query and the launch. */
struct Plan {
    size_t B, H, G, chunk, nch_max, max_len;
    size_t off_qks, off_m, off_l, off_o, bytes;
};

int make_plan(const lowp_gpu_decode_desc *d, Plan *pl, char *why, size_t why_len)
{
    if (d == NULL || d->cache == NULL || d->pt_host == NULL)
        return lowp_why_set(why, why_len,
                            "decode descriptor, cache and host page table must not be NULL");
    const lowp_kv_config *cfg = &d->cache->cfg;
    if (lowp_gpu_kvcache_check(d->cache, why, why_len) ||
        lowp_gpu_decode_check(cfg, d->num_q_heads, why, why_len) ||
        lowp_kv_page_table_check(d->pt_host, cfg->num_pages, cfg->page_size, why, why_len))
        return -1;
    if (!(d->sm_scale == d->sm_scale) || isinf(d->sm_scale))
        return lowp_why_set(why, why_len, "sm_scale is not finite");
    if (d->ring_stages != 0 && (d->ring_stages < 2 || d->ring_stages > LOWP_GPU_DECODE_MAX_STAGES))
        return lowp_why_set(why, why_len, "ring_stages %d: 0 (the default) or 2..%d",
                            d->ring_stages, LOWP_GPU_DECODE_MAX_STAGES);
    if (d->cta_warps < 0 || d->cta_warps > LOWP_GPU_DECODE_MAX_WARPS)
        return lowp_why_set(why, why_len, "cta_warps %d: 0 (the default) or 1..%d", d->cta_warps,
                            LOWP_GPU_DECODE_MAX_WARPS);
    pl->B = d->pt_host->batch;
    pl->H = cfg->num_heads;
    pl->G = d->num_q_heads / cfg->num_heads;
    pl->max_len = 0;
    if (pl->B == 0)
        return lowp_why_set(why, why_len, "the page table has no sequences");
    for (size_t b = 0; b < pl->B; b++) {
        size_t n = lowp_kv_seq_len(d->pt_host, cfg->page_size, b);
        if (n == 0)
            return lowp_why_set(why, why_len,
                                "sequence %zu is empty: a decode needs at least one token", b);
        if (n > (size_t)1 << 30)
            return lowp_why_set(why, why_len,
                                "sequence %zu has %zu tokens; the kernel indexes positions "
                                "with int",
                                b, n);
        pl->max_len = n > pl->max_len ? n : pl->max_len;
    }
    pl->chunk = d->chunk_tokens ? d->chunk_tokens
                                : lowp_gpu_decode_chunk_tokens(pl->B, pl->H, pl->max_len);
    if (pl->chunk % 16 || pl->chunk == 0)
        return lowp_why_set(why, why_len, "chunk_tokens %zu is not a positive multiple of 16",
                            pl->chunk);
    pl->nch_max = (pl->max_len + pl->chunk - 1) / pl->chunk;
    size_t items = pl->B * pl->H * pl->nch_max;
    pl->off_qks = 0;
    pl->off_m = 256 + ((pl->H * sizeof(float) + 255) / 256) * 256;
    pl->off_l = pl->off_m + ((items * pl->G * sizeof(float) + 255) / 256) * 256;
    pl->off_o = pl->off_l + ((items * pl->G * sizeof(float) + 255) / 256) * 256;
    pl->bytes = pl->off_o + items * pl->G * cfg->vo_dim * sizeof(float);
    return 0;
}

/* Above 48 KiB of shared memory a kernel must opt in. The limit is an attribute of the
 * kernel, shared by every host thread, so it is always raised to the device's maximum,
 * never set to this call's size: otherwise a thread setting it for a smaller call can
 * lower it between another thread's set and launch, which then fails with "invalid
 * argument". `lowp gpu conform` (16 threads) hit that on the H200 once the kernel got
 * faster (configuration 47 of fp8_e4m3); with the maximum it passes the same seeds. */
template <int FMT, int KCH, int IL, int HG>
cudaError_t launch_one(const Params &p, dim3 grid, size_t smem, cudaStream_t st)
{
    if (smem > 48 * 1024) {
        cudaError_t e = cudaFuncSetAttribute(decode_split<FMT, KCH, IL, HG>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             p.smem_optin);
        if (e != cudaSuccess)
            return e;
    }
    decode_split<FMT, KCH, IL, HG><<<grid, p.warps * 32, smem, st>>>(p);
    return cudaGetLastError();
}

template <int FMT, int IL>
cudaError_t launch_fmt(const Params &p, dim3 grid, size_t smem, cudaStream_t st)
{
    const bool fix128 = p.Dq == 128 && p.Dv == 128; /* decode_split's KCH = 2 */
    if (p.G > 8)
        return fix128 ? launch_one<FMT, 2, IL, 2>(p, grid, smem, st)
                      : launch_one<FMT, 0, IL, 2>(p, grid, smem, st);
    return fix128 ? launch_one<FMT, 2, IL, 1>(p, grid, smem, st)
                  : launch_one<FMT, 0, IL, 1>(p, grid, smem, st);
}

/* The stage geometry of the kernels (the constexpr functions above) for this cache. */
void stage_geometry(const lowp_kv_config *cfg, Params *p)
{
    const int fmt = cfg->format == LOWP_BF16_PASS ? F_BF16
                    : (cfg->format == LOWP_NVFP4 ? F_NVFP4
                       : (cfg->format == LOWP_MXFP4 ? F_MXFP4 : F_FP8));
    p->k_rs = k_row_stride(fmt, p->k_rb);
    p->v_rs = v_row_stride(fmt);
    p->k_sw = scale_window(p->k_S);
    p->v_sw = scale_window(p->v_S);
    p->off_v = 16 * p->k_rs;
    p->off_ks = p->off_v + 16 * p->v_rs;
    p->off_vs = p->off_ks + 16 * p->k_sw;
    p->off_sh = p->off_vs + 16 * p->v_sw;
    p->stage_bytes = stage_size(p->off_sh);
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
        return lowp_why_set(why, why_len,
                            "workspace, output, queries and device page table must not be "
                            "NULL");
    if (ws_bytes < pl.bytes)
        return lowp_why_set(why, why_len,
                            "workspace of %zu bytes is smaller than the %zu this decode "
                            "needs",
                            ws_bytes, pl.bytes);
    if (pl.nch_max > 65535u || pl.B > 65535 || pl.H * 4 > 65535)
        return lowp_why_set(why, why_len, "grid too large: %zu splits, batch %zu", pl.nch_max,
                            pl.B);
    const lowp_gpu_kvcache *c = d->cache;
    const lowp_kv_config *cfg = &c->cfg;
    double sm = d->sm_scale == 0.0 ? 1.0 / sqrt((double)cfg->qk_dim) : d->sm_scale;
    float qks[LOWP_GPU_DECODE_MAX_GROUP * 1024];
    if (pl.H > sizeof qks / sizeof qks[0])
        return lowp_why_set(why, why_len, "%zu KV heads: at most %zu", pl.H,
                            sizeof qks / sizeof qks[0]);
    for (size_t h = 0; h < pl.H; h++)
        qks[h] = lowp_gpu_decode_score_scale(cfg->format, sm,
                                             c->k_global_host[c->n_global > 1 ? h : 0]);
    uint8_t *w = (uint8_t *)ws;
    cudaError_t e = cudaMemcpyAsync(w + pl.off_qks, qks, pl.H * sizeof(float),
                                    cudaMemcpyHostToDevice, st);
    if (e != cudaSuccess)
        return lowp_why_set(why, why_len, "cudaMemcpyAsync of the score scales: %s",
                            cudaGetErrorString(e));

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
    p.unscale = lowp_gpu_decode_unscale(cfg->format);
    p.ps_shift = -1;
    for (int sh = 0; sh < 31; sh++)
        if ((size_t)1 << sh == cfg->page_size)
            p.ps_shift = sh;

    /* Stages and warps change how bytes travel, never the arithmetic. By default about 8
     * KiB of ring per warp, at least 2 stages, at most 8: on the H200 (batch 32, 32K
     * tokens) 2 stages beat 3..8 for every format, because a smaller ring lets more CTAs
     * share an SM and the kernel is bound by issue, not by bytes in flight. The caller
     * may ask for others (d->ring_stages, d->cta_warps, checked by make_plan; for tuning
     * with `lowp gpu bench`); both are reduced below when the ring does not fit. */
    stage_geometry(cfg, &p);
    p.stages = d->ring_stages ? d->ring_stages : 8192 / p.stage_bytes;
    p.stages = p.stages < 2 ? 2
                            : (p.stages > LOWP_GPU_DECODE_MAX_STAGES ? LOWP_GPU_DECODE_MAX_STAGES
                                                                     : p.stages);
    const int max_warps = d->cta_warps ? d->cta_warps : LOWP_DEC_MAX_WARPS;
    const size_t q_bytes = (size_t)p.Dq * 32;
    int dev = 0, optin = 0;
    e = cudaGetDevice(&dev);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    if (e != cudaSuccess)
        return lowp_why_set(why, why_len, "shared memory per block: %s", cudaGetErrorString(e));
    const size_t smem_max = (size_t)optin;
    p.smem_optin = optin;
    p.warps = max_warps;
    while (p.warps > 1 &&
           q_bytes + (size_t)p.warps * p.stages * p.stage_bytes > smem_max)
        p.warps--;
    while (p.stages > 2 && q_bytes + (size_t)p.stages * p.stage_bytes > smem_max)
        p.stages--;
    if (q_bytes + (size_t)p.warps * p.stages * p.stage_bytes > smem_max)
        return lowp_why_set(why, why_len,
                            "a decode stage of %d bytes does not fit in shared memory",
                            p.stage_bytes);
    if (pl.nch_max > 65535u * (size_t)p.warps)
        return lowp_why_set(why, why_len, "grid too large: %zu splits", pl.nch_max);
    return 0;
}

extern "C" cudaError_t lowp_gpu_decode_enqueue(const Params *pp, cudaStream_t st)
{
    const Params &p = *pp;
    dim3 grid((unsigned)((p.nch_max + p.warps - 1) / p.warps), (unsigned)(p.H * p.nvr),
              (unsigned)p.B);
    size_t smem = (size_t)(p.Dq / 16) * 32 * sizeof(uint4) +
                  (size_t)p.warps * p.stages * p.stage_bytes;
    cudaError_t e;
    switch (p.format) {
    case LOWP_BF16_PASS: e = launch_fmt<F_BF16, 0>(p, grid, smem, st); break;
    case LOWP_FP8_E4M3:
    case LOWP_FP8_E5M2: e = launch_fmt<F_FP8, 0>(p, grid, smem, st); break;
    case LOWP_NVFP4:
        switch (p.k_il | (p.v_il << 1)) {
        case 0: e = launch_fmt<F_NVFP4, 0>(p, grid, smem, st); break;
        case 1: e = launch_fmt<F_NVFP4, 1>(p, grid, smem, st); break;
        case 2: e = launch_fmt<F_NVFP4, 2>(p, grid, smem, st); break;
        default: e = launch_fmt<F_NVFP4, 3>(p, grid, smem, st); break;
        }
        break;
    default: e = launch_fmt<F_MXFP4, 0>(p, grid, smem, st); break;
    }
    if (e != cudaSuccess)
        return e;
    decode_merge<<<dim3((unsigned)p.NQ, (unsigned)p.B, (unsigned)(p.Dv / MERGE_DIMS)), MERGE_DIMS, 0,
                   st>>>(p);
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
        return lowp_why_set(why, why_len, "decode kernel launch: %s", cudaGetErrorString(e));
    return 0;
}
