/* gpu/kernels/select.cu: the sparse-selection kernels of lowp/gpu_select.h.
 *
 * Bit-exactness with the CPU models (ref/select/src/qsa.c, dsa.c, topk.c). Every kernel
 * below runs the model's binary32 / binary64 operations in the model's order, one thread
 * per output (compressed block, key): compiled with --fmad=false, IEEE division and square
 * root, no flush to zero (gpu/select.cmake), so each operation is the CPU's. The only
 * changes of form, each exact:
 *   - a binary64 product of the dot products is exact (lowp/select.h: at most 8 + 30
 *     significant bits), so fma(q, k, s) = fl64(fl64(q k) + s) = the model's s += q * k;
 *   - the element decodes are the codec core's (lowp/codec_core.h), the CPU's own code;
 *   - torch's BF16 rounding (nearest even, overflow to Inf) is __float2bfloat16_rn; a NaN
 *     may differ in sign or payload, never in being NaN, and only NaN-ness reaches a score
 *     (the index-key cache stores BF16 NaN as 0x7FFF, lowp_bf16_from_f32's rule).
 * The RoPE cos / sin come from the host (lowp_qsa_rope_blocks): the model takes them from
 * the C library's binary64 cos, sin and pow, which the device does not reproduce.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cub/block/block_scan.cuh>

#include "lowp/codec_core.h"
#include "lowp/gpu_select.h"
#include "lowp/select_gpu.h"
#include "lowp/why.h"
#include "select_bits.h"

#define SEL_MAX_DIM 256
#define SEL_MAX_QSA_HEADS 8
#define SEL_MAX_DSA_QFLOATS 12288 /* DSA query heads x head_dim in shared memory (48 KiB) */
#define SEL_WARPS 4               /* warps per CTA of the scoring kernel */
#define SEL_TOPK_THREADS 512

namespace {

__device__ __forceinline__ float bf16r(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }
__device__ __forceinline__ float bf16v(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }

/* torch's float -> float8_e4m3fn (nearest even, no saturation; lowp_codec_init(E4M3, torch,
 * RN, 0) resolves to these settings: max code 0x7E, overflow and NaN to 0x7F / 0xFF) */
__device__ __forceinline__ uint8_t e4m3_torch(float x)
{
    return (uint8_t)lowp_encode_core_signed(__float_as_uint(x), LOWP_RN, 3, -6, 0x7eu, 0x80u, 0u, 0x7fu, 0x7fu,
                                            LOWP_NAN_FIXED, 0x7fu, 0xffu);
}
__device__ __forceinline__ float e4m3_val(uint32_t q) { return lowp_decode_core_signed(q, 8, 3, -6, 0u, 0x7fu); }

/* ---------------------------------------------------------------- QSA compression */

/* lowp_qsa_compress up to the BF16 row (lowp/select.h's QSA definition), one thread per
 * compressed block; rows[blk_off[b] + j][d] get the BF16 bits. */
__global__ void qsa_compress_kernel(const uint16_t *__restrict__ k, const float *__restrict__ wk,
                                    const float *__restrict__ rope, const int64_t *__restrict__ tok_off,
                                    const int64_t *__restrict__ blk_off, const int32_t *__restrict__ nblk, int d,
                                    int R, int rd, float eps, uint16_t *__restrict__ rows)
{
    int b = blockIdx.y;
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= nblk[b])
        return;
    const uint16_t *g = k + (size_t)(tok_off[b] + (int64_t)j * R) * (size_t)d;
    float m[SEL_MAX_DIM];
    for (int i = 0; i < d; i++) {
        float s = 0.0f; /* fp32 in token order, then / ratio */
        for (int t = 0; t < R; t++)
            s += bf16v(g[(size_t)t * d + i]);
        m[i] = bf16r(s / (float)R);
    }
    double ss = 0.0; /* RMSNorm1w: binary64 sum of the binary32 squares, in order */
    for (int i = 0; i < d; i++) {
        float sq = m[i] * m[i];
        ss += (double)sq;
    }
    float var = __double2float_rn(ss) / (float)d;
    float r = 1.0f / sqrtf(var + eps);
    for (int i = 0; i < d; i++)
        m[i] = bf16r((m[i] * r) * (1.0f + wk[i]));
    const float *tb = rope + (size_t)j * (size_t)rd; /* rd / 2 pairs (cos, sin) */
    int h = rd / 2;
    for (int i = 0; i < h; i++) { /* NeoX rotate_half, per-op BF16 */
        float a = m[i], bb = m[i + h], cs = tb[2 * i], sn = tb[2 * i + 1];
        float lo = bf16r(bf16r(a * cs) + bf16r(-bb * sn));
        float hi = bf16r(bf16r(bb * cs) + bf16r(a * sn));
        m[i] = lo;
        m[i + h] = hi;
    }
    uint16_t *o = rows + (size_t)(blk_off[b] + j) * (size_t)d;
    for (int i = 0; i < d; i++)
        o[i] = __bfloat16_as_ushort(__float2bfloat16_rn(m[i]));
}

/* E4M3 index keys: the BF16 rows cast to E4M3 codes (unit scale) */
__global__ void e4m3_cast_kernel(const uint16_t *__restrict__ in, size_t n, uint8_t *__restrict__ out)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = e4m3_torch(bf16v(in[i]));
}

__global__ void iota_kernel(int64_t *s, size_t n)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        s[i] = (int64_t)i;
}

/* ---------------------------------------------------------------- QSA scoring */

/* Exact binary64 values from codes without the (slow) binary32 -> binary64 conversion:
 * the double's bits are built from the code's fields where it is a normal number, and
 * the conversion handles the rest (zero, subnormal, Inf, NaN: rare, so the branch costs
 * nothing on typical data). Every value is the code's exact value, as before. */
__device__ __forceinline__ double bf16_f64(uint32_t h)
{
    uint32_t m = h & 0x7fffu; /* normal: exponent field 1..254, i.e. m in [0x80, 0x7f80) */
    if (m - 0x80u >= 0x7f00u)
        return (double)bf16v((uint16_t)h);
    return __hiloint2double((int)(((h << 16) & 0x80000000u) | ((m << 13) + 0x38000000u)), 0); /* rebias +896 */
}
__device__ __forceinline__ double e4m3_f64(uint32_t q)
{
    uint32_t m = q & 0x7fu; /* normal: exponent field >= 1 and not the NaN code 0x7F */
    if (m - 8u >= 0x77u)
        return (double)e4m3_val(q);
    return __hiloint2double((int)(((q & 0x80u) << 24) | ((m << 17) + 0x3f800000u)), 0); /* rebias +1016 */
}
/* E2M1 magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6 with the sign (no specials) */
__device__ __forceinline__ double e2m1_f64(uint32_t c)
{
    uint32_t m = c & 7u, E = m >> 1, hi = E ? ((E + 1022u) << 20) | ((m & 1u) << 19) : (m ? 0x3fe00000u : 0u);
    return __hiloint2double((int)(((c & 8u) << 28) | hi), 0);
}

template <int F> struct fmt_of;
template <> struct fmt_of<0> { enum { EPC = 8, BS = 8 }; };   /* BF16: 8 a chunk */
template <> struct fmt_of<1> { enum { EPC = 16, BS = 16 }; }; /* E4M3, unit scale */
template <> struct fmt_of<2> { enum { EPC = 32, BS = 16 }; }; /* NVFP4 */
template <> struct fmt_of<3> { enum { EPC = 32, BS = 32 }; }; /* MXFP4 */
template <> struct fmt_of<4> { enum { EPC = 16, BS = 16 }; }; /* MXFP8 (32-element blocks: two chunks) */

/* the block scale times the global scale as the dot reads it (exact): lowp_block_dequantize_f64 */
template <int F> __device__ __forceinline__ double block_scale(const uint8_t *sc, int i, double g)
{
    if (F == 2)
        return (double)e4m3_val(sc[i / 16]) * g;
    if (F == 3 || F == 4)
        return (double)lowp_decode_core_e8m0(sc[i / 32]);
    return 1.0;
}

/* element e of a 16-byte chunk w, times the block scale bs (F 2..4) */
template <int F> __device__ __forceinline__ double elem(const uint32_t w[4], int e, double bs)
{
    if (F == 0)
        return bf16_f64((w[e / 2] >> (16 * (e % 2))) & 0xffffu);
    if (F == 2 || F == 3) {
        uint32_t byte = (w[e / 8] >> (8 * ((e / 2) % 4))) & 0xffu;
        return e2m1_f64(e % 2 ? byte >> 4 : byte & 0xfu) * bs; /* at most 2 x 30 bits: exact */
    }
    uint32_t byte = (w[e / 4] >> (8 * (e % 4))) & 0xffu;
    return F == 1 ? e4m3_f64(byte) : e4m3_f64(byte) * bs;
}

/* lowp_qsa_scores: RPL blocks a lane (rows lane, lane + 32, ...), 32 RPL a warp; each warp
 * copies its rows (contiguous in the cache) into shared memory with coalesced 16-byte
 * loads, then every lane runs the model's loops on each of its rows: per head the binary64
 * dot in dim order, fl32, ReLU (NaN kept), the binary64 head sum in head order, fl32, the
 * binary32 division. The query is in shared memory as binary64, dim-major ([dim][head]):
 * one 16-byte load gives two heads of a dim, and serves the lane's RPL rows (the loads of
 * q, not the arithmetic, bound the kernel at RPL = 1). HC: the head count at compile time
 * (0: any H <= 8, tested per head). RPL changes the speed, never a bit of the output. */
template <int F, int HC, int RPL>
__global__ void __launch_bounds__(32 * SEL_WARPS) qsa_score_kernel(
    const uint8_t *__restrict__ codes, const uint8_t *__restrict__ scales, double g, int rb, int rs,
    const float *__restrict__ qo, const int64_t *__restrict__ blk_off, const int32_t *__restrict__ nvis, int H, int d,
    int divide, float div, float *__restrict__ scores)
{
    extern __shared__ __align__(16) unsigned char smem[];
    constexpr int HM = HC ? HC : SEL_MAX_QSA_HEADS; /* the accumulators and the query row stride */
    constexpr int RW = 32 * RPL;                    /* rows a warp */
    int b = blockIdx.y, n = nvis[b];
    double *qd = (double *)smem;
    unsigned char *rows = smem + (size_t)HM * d * sizeof(double);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int j0 = (blockIdx.x * SEL_WARPS + warp) * RW;
    if (blockIdx.x * SEL_WARPS * RW >= n)
        return; /* the whole CTA: nothing visible here */
    for (int t = threadIdx.x; t < HM * d; t += blockDim.x) {
        int i = t / HM, h = t % HM;
        qd[t] = h < H ? (double)qo[((size_t)b * H + h) * d + i] : 0.0;
    }
    __syncthreads();
    if (j0 >= n)
        return;
    int nrow = n - j0 < RW ? n - j0 : RW, stride = rb + 16, cpr = rb / 16;
    unsigned char *wrows = rows + (size_t)warp * RW * stride;
    const unsigned char *src = codes + (size_t)(blk_off[b] + j0) * (size_t)rb;
    for (int c = lane; c < nrow * cpr; c += 32)
        *(uint4 *)(wrows + (c / cpr) * stride + (c % cpr) * 16) = __ldg((const uint4 *)(src + (size_t)c * 16));
    __syncwarp();
    if (lane >= nrow)
        return;
    const uint8_t *sc[RPL];
#pragma unroll
    for (int k = 0; k < RPL; k++) {
        int64_t row = blk_off[b] + j0 + lane + 32 * k;
        sc[k] = scales && lane + 32 * k < nrow ? scales + (size_t)row * rs : scales; /* a valid row's scales */
    }
    double acc[RPL][HM];
#pragma unroll
    for (int k = 0; k < RPL; k++)
#pragma unroll
        for (int h = 0; h < HM; h++)
            acc[k][h] = 0.0;
    constexpr int EPC = fmt_of<F>::EPC, BS = fmt_of<F>::BS;
    for (int c = 0; c < cpr; c++) {
        uint32_t w[RPL][4];
#pragma unroll
        for (int k = 0; k < RPL; k++) {
            uint4 v = *(const uint4 *)(wrows + (lane + 32 * k) * stride + c * 16);
            w[k][0] = v.x, w[k][1] = v.y, w[k][2] = v.z, w[k][3] = v.w;
        }
        double bs[RPL];
#pragma unroll
        for (int e = 0; e < EPC; e++) {
            int i = c * EPC + e;
            double kv[RPL];
#pragma unroll
            for (int k = 0; k < RPL; k++) {
                if (e % BS == 0)
                    bs[k] = block_scale<F>(sc[k], i, g);
                kv[k] = elem<F>(w[k], e, bs[k]);
            }
            const double2 *qp = (const double2 *)(qd + (size_t)i * HM);
#pragma unroll
            for (int h2 = 0; h2 < HM / 2; h2++) {
                double2 qq = qp[h2];
#pragma unroll
                for (int k = 0; k < RPL; k++) {
                    if (HC || 2 * h2 < H)
                        acc[k][2 * h2] = __fma_rn(qq.x, kv[k], acc[k][2 * h2]); /* the product is exact */
                    if (HC || 2 * h2 + 1 < H)
                        acc[k][2 * h2 + 1] = __fma_rn(qq.y, kv[k], acc[k][2 * h2 + 1]);
                }
            }
        }
    }
#pragma unroll
    for (int k = 0; k < RPL; k++) {
        if (lane + 32 * k >= nrow)
            break;
        double hs = 0.0;
#pragma unroll
        for (int h = 0; h < HM; h++)
            if (HC || h < H) {
                float dot = __double2float_rn(acc[k][h]);
                float relu = dot > 0.0f ? dot : (dot != dot ? dot : 0.0f);
                hs += (double)relu;
            }
        float s = __double2float_rn(hs);
        scores[blk_off[b] + j0 + lane + 32 * k] = divide ? s / div : s;
    }
}

/* lowp_qsa_scores, second kernel (BF16 and unit-scale E4M3 keys, 4 index heads): the same
 * operations in the same order as qsa_score_kernel - per head the binary64 dot in dim order,
 * each product an exact fma - with fewer instructions around them, because Nsight showed
 * the first kernel issue-bound at ~21 instructions per element and row of which 4 are the
 * DFMAs (reports/select-gpu-h200.md):
 *  - each warp streams its 32 RPL rows through shared memory a step (32 bytes a row) at a
 *    time with cp.async, V2_NST - 1 steps ahead of the arithmetic, copying whole sectors
 *    (loading a row per lane straight from global memory instead touched 32 lines per
 *    instruction: on the H200 that L1 traffic bounded the kernel at 62-65 us for BF16);
 *  - each pair of query loads (4 heads of a dim, binary64) serves RPL rows;
 *  - a key is turned into a double by moving its bits, no conversion: the double kx holds
 *    k 2^-S exactly (S = 896 for BF16, 1016 for E4M3: the codes' sign, exponent and
 *    fraction bits land unchanged in the double's, zero and subnormal codes becoming the
 *    double's zero and subnormals with the same fraction), and the query is stored
 *    pre-multiplied, qx = q 2^S (exact: a power of two, finite while |q| 2^S < 2^1024).
 *    qx kx is then the same real number as q k, so fma(qx, kx, acc) rounds exactly as
 *    fma(q, k, acc) does: every partial sum, hence every output bit, is the first kernel's.
 *    The move is wrong only for Inf/NaN codes (BF16 exponent 255, E4M3 magnitude 0x7F),
 *    which each step tests for (a few integer operations a word, one vote a warp), and the
 *    scaling only when the query is not finite (BF16) or some |q| >= 2^7 (E4M3: 2^1016 q
 *    must stay below 2^1023): a CTA whose query fails, or a step where any lane of the
 *    warp has such a code, takes the exact conversions with the unscaled query instead.
 * Rows past the sequence's end read its last row (valid codes, every lane in the vote) and
 * store nothing. */
#define V2_SROW 48 /* bytes a staged row: a 32-byte step + 16 (LDS.128 at this stride: no bank conflict) */
template <int F> struct v2_fmt;
template <> struct v2_fmt<0> { enum { EPW = 2, S = 896 }; };  /* BF16: elements a 32-bit word */
template <> struct v2_fmt<1> { enum { EPW = 4, S = 1016 }; }; /* E4M3 */

template <int F> __device__ __forceinline__ uint32_t v2_special(uint32_t w)
{
    return F == 0 ? lowp_sel_bf16_special(w) : lowp_sel_e4m3_special(w);
}
template <int F> __device__ __forceinline__ uint32_t v2_hi(uint32_t w, uint32_t w1, int e)
{
    return F == 0 ? lowp_sel_bf16_kx_hi(w, e) : lowp_sel_e4m3_kx_hi(w, w1, e);
}

/* element e's exact double by conversion (any code) */
template <int F> __device__ __forceinline__ double v2_exact(uint32_t w, int e)
{
    if (F == 0)
        return (double)bf16v((uint16_t)(w >> (16 * e)));
    return (double)e4m3_val((w >> (8 * e)) & 0xffu);
}

template <int F, int RPL, int V2_NST> /* V2_NST: cp.async stages a warp, 2 or 3 */
__global__ void __launch_bounds__(32 * SEL_WARPS) qsa_score_v2_kernel(
    const uint8_t *__restrict__ codes, int rb, const float *__restrict__ qo, const int64_t *__restrict__ blk_off,
    const int32_t *__restrict__ nvis, int d, int divide, float div, float *__restrict__ scores)
{
    extern __shared__ __align__(16) unsigned char smem[];
    constexpr int H = 4, RW = 32 * RPL, EPW = v2_fmt<F>::EPW, EPS = 8 * EPW; /* elements a step */
    const int b = blockIdx.y, n = nvis[b];
    double *qe = (double *)smem, *qs = qe + H * d; /* [dim][head]: q, and q 2^S */
    if (blockIdx.x * SEL_WARPS * RW >= n)
        return; /* the whole CTA */
    int ok = 1;
    for (int t = threadIdx.x; t < H * d; t += blockDim.x) {
        const float q = qo[((size_t)b * H + t % H) * d + t / H];
        qe[t] = (double)q;
        qs[t] = (double)q * (F == 0 ? 0x1p896 : 0x1p1016); /* exact where ok */
        ok &= F == 0 ? fabsf(q) <= 3.4028235e38f : fabsf(q) < 128.0f;
    }
    const int fast = __syncthreads_and(ok);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int j0 = (blockIdx.x * SEL_WARPS + warp) * RW;
    if (j0 >= n)
        return; /* the whole warp */
    const int64_t base = blk_off[b];
    /* the warp's copy of its rows, a step (32 bytes a row) at a time, into V2_NST stages of
     * RW rows x V2_SROW bytes: chunk c = lane + 32 i (i < 2 RPL) is half c & 1 of row c >> 1,
     * so each copy instruction reads 16 whole 32-byte sectors */
    unsigned char *wst = (unsigned char *)(qs + H * d) + (size_t)warp * V2_NST * RW * V2_SROW;
    const unsigned char *csrc[2 * RPL];
#pragma unroll
    for (int i = 0; i < 2 * RPL; i++) {
        const int c = lane + 32 * i, j = j0 + (c >> 1);
        csrc[i] = codes + (size_t)(base + (j < n ? j : n - 1)) * (size_t)rb + 16 * (c & 1);
    }
    const int steps = rb / 32;
    auto issue = [&](int st) {
        unsigned char *dst = wst + (st % V2_NST) * RW * V2_SROW;
#pragma unroll
        for (int i = 0; i < 2 * RPL; i++) {
            const int c = lane + 32 * i;
            const unsigned sa = (unsigned)__cvta_generic_to_shared(dst + (c >> 1) * V2_SROW + 16 * (c & 1));
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(sa), "l"(csrc[i] + 32 * st));
        }
    };
    double acc[RPL][H];
#pragma unroll
    for (int k = 0; k < RPL; k++)
#pragma unroll
        for (int h = 0; h < H; h++)
            acc[k][h] = 0.0;
#pragma unroll
    for (int st = 0; st < V2_NST - 1; st++) { /* groups 0 .. NST - 2, empty past the row */
        if (st < steps)
            issue(st);
        asm volatile("cp.async.commit_group;");
    }
    for (int st = 0; st < steps; st++) {
        /* groups 0 .. st + NST - 2 committed: all but the last NST - 2 done is step st */
        asm volatile("cp.async.wait_group %0;" ::"n"(V2_NST - 2) : "memory");
        __syncwarp();
        uint32_t w[RPL][8], bad = 0;
        const unsigned char *stg = wst + (st % V2_NST) * RW * V2_SROW;
#pragma unroll
        for (int k = 0; k < RPL; k++) {
            const uint4 a0 = *(const uint4 *)(stg + (lane + 32 * k) * V2_SROW);
            const uint4 a1 = *(const uint4 *)(stg + (lane + 32 * k) * V2_SROW + 16);
            w[k][0] = a0.x, w[k][1] = a0.y, w[k][2] = a0.z, w[k][3] = a0.w;
            w[k][4] = a1.x, w[k][5] = a1.y, w[k][6] = a1.z, w[k][7] = a1.w;
#pragma unroll
            for (int x = 0; x < 8; x++)
                bad |= v2_special<F>(w[k][x]);
        }
        __syncwarp(); /* every lane has read the stage before it is refilled */
        if (st + V2_NST - 1 < steps)
            issue(st + V2_NST - 1);
        asm volatile("cp.async.commit_group;");
        if (__any_sync(0xffffffffu, bad != 0u || !fast)) {
            const double2 *qp = (const double2 *)(qe + (size_t)st * EPS * H);
#pragma unroll
            for (int e = 0; e < EPS; e++) {
                const double2 q01 = qp[2 * e], q23 = qp[2 * e + 1];
#pragma unroll
                for (int k = 0; k < RPL; k++) {
                    const double kv = v2_exact<F>(w[k][e / EPW], e % EPW);
                    acc[k][0] = __fma_rn(q01.x, kv, acc[k][0]);
                    acc[k][1] = __fma_rn(q01.y, kv, acc[k][1]);
                    acc[k][2] = __fma_rn(q23.x, kv, acc[k][2]);
                    acc[k][3] = __fma_rn(q23.y, kv, acc[k][3]);
                }
            }
        } else {
            const double2 *qp = (const double2 *)(qs + (size_t)st * EPS * H);
            uint32_t w1[RPL][8];
#pragma unroll
            for (int k = 0; k < RPL; k++)
#pragma unroll
                for (int x = 0; x < 8; x++)
                    w1[k][x] = w[k][x] << 1;
#pragma unroll
            for (int e = 0; e < EPS; e++) {
                const double2 q01 = qp[2 * e], q23 = qp[2 * e + 1];
#pragma unroll
                for (int k = 0; k < RPL; k++) {
                    const double kv =
                        __hiloint2double((int)v2_hi<F>(w[k][e / EPW], w1[k][e / EPW], e % EPW), 0);
                    acc[k][0] = __fma_rn(q01.x, kv, acc[k][0]); /* qx kx = q k exactly */
                    acc[k][1] = __fma_rn(q01.y, kv, acc[k][1]);
                    acc[k][2] = __fma_rn(q23.x, kv, acc[k][2]);
                    acc[k][3] = __fma_rn(q23.y, kv, acc[k][3]);
                }
            }
        }
    }
    asm volatile("cp.async.wait_group 0;" ::: "memory");
#pragma unroll
    for (int k = 0; k < RPL; k++) {
        const int j = j0 + lane + 32 * k;
        if (j >= n)
            break;
        double hs = 0.0;
#pragma unroll
        for (int h = 0; h < H; h++) {
            const float dot = __double2float_rn(acc[k][h]);
            const float relu = dot > 0.0f ? dot : (dot != dot ? dot : 0.0f);
            hs += (double)relu;
        }
        const float sc = __double2float_rn(hs);
        scores[base + j] = divide ? sc / div : sc;
    }
}

/* ---------------------------------------------------------------- DSA */

/* act_quant of lowp_dsa_keys_quantize (FP8 keys), one thread per token */
__global__ void dsa_quant_kernel(const uint16_t *__restrict__ k, size_t n, int d, float floor, int ue8m0,
                                 uint8_t *__restrict__ codes, float *__restrict__ scales)
{
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n)
        return;
    const uint16_t *x = k + t * (size_t)d;
    float amax = 0.0f;
    int nan = 0;
    for (int i = 0; i < d; i++) {
        float a = fabsf(bf16v(x[i]));
        nan |= a != a;
        amax = a > amax ? a : amax;
    }
    amax = nan ? __uint_as_float(0x7fc00000u) : (amax > floor ? amax : floor);
    float s = amax * (1.0f / 448.0f);
    if (ue8m0 && !nan && !isinf(s)) { /* fast_round_scale: 2^ceil(log2 s) from the bits */
        uint32_t bs = __float_as_uint(s);
        int e = (int)((bs >> 23) & 0xffu) - 127 + ((bs & 0x7fffffu) != 0);
        s = __uint_as_float((uint32_t)(e + 127) << 23);
    }
    for (int i = 0; i < d; i++) {
        float y = bf16v(x[i]) / s;
        y = y > 448.0f ? 448.0f : (y < -448.0f ? -448.0f : y);
        codes[t * (size_t)d + i] = e4m3_torch(y);
    }
    scales[t] = s;
}

/* lowp_dsa_scores, one thread per key: per head the binary64 dot in dim order of E4M3
 * values, fl32, ReLU, fl32(ReLU x w_h), the binary64 head sum in order, fl32, x k scale */
__global__ void dsa_score_kernel(const uint8_t *__restrict__ codes, const float *__restrict__ ks,
                                 const float *__restrict__ qq, const float *__restrict__ wh,
                                 const int64_t *__restrict__ blk_off, const int32_t *__restrict__ nvis, int H, int d,
                                 float *__restrict__ scores)
{
    extern __shared__ __align__(16) unsigned char smem[];
    float *q = (float *)smem, *w = q + H * d;
    int b = blockIdx.y, n = nvis[b];
    if (blockIdx.x * blockDim.x >= (unsigned)n)
        return;
    for (int t = threadIdx.x; t < H * d; t += blockDim.x)
        q[t] = qq[(size_t)b * H * d + t];
    for (int t = threadIdx.x; t < H; t += blockDim.x)
        w[t] = wh[(size_t)b * H + t];
    __syncthreads();
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n)
        return;
    int64_t row = blk_off[b] + j;
    const uint8_t *kr = codes + (size_t)row * d;
    double hs = 0.0;
    for (int h = 0; h < H; h++) {
        double s = 0.0;
        for (int i = 0; i < d; i++)
            s = __fma_rn((double)e4m3_val(kr[i]), (double)q[h * d + i], s); /* exact products */
        float dot = __double2float_rn(s);
        float relu = dot > 0.0f ? dot : (dot != dot ? dot : 0.0f);
        hs += (double)(relu * w[h]);
    }
    scores[row] = __double2float_rn(hs) * ks[row];
}

/* ---------------------------------------------------------------- top-k */

/* An order-preserving key of a non-NaN score: larger score, larger key; -0 and +0 one
 * key (lowp_topk's tie rule treats them as equal). -Inf maps to 0x007FFFFF, below every
 * finite score and above no candidate. */
__device__ __forceinline__ uint32_t order_key(float s)
{
    uint32_t u = s == 0.0f ? 0u : __float_as_uint(s);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
#define KEY_NEG_INF 0x007fffffu

typedef cub::BlockScan<int, SEL_TOPK_THREADS> topk_scan;

/* One CTA per sequence: count the candidates (not -Inf) and NaNs, radix-select the k-th
 * best key T (8 bits a pass, most significant first), then write in ascending index order
 * every candidate with key > T and the first (in index order) need_eq with key == T: the
 * set lowp_topk selects (an exact tie goes to the smaller index). */
__global__ void __launch_bounds__(SEL_TOPK_THREADS) topk_kernel(const float *__restrict__ scores,
                                                                 const int64_t *__restrict__ off,
                                                                 const int32_t *__restrict__ nn, int k, int R,
                                                                 const int32_t *__restrict__ pos, int width,
                                                                 int32_t *__restrict__ out, int32_t *__restrict__ status)
{
    __shared__ unsigned hist[256];
    __shared__ int sh_nan, sh_m, sh_digit, sh_rem;
    __shared__ typename topk_scan::TempStorage scan;
    int b = blockIdx.x, tid = threadIdx.x, n = nn[b];
    const float *s = scores + off[b];
    int32_t *o = out + (size_t)b * (width + 1);
    if (tid == 0) {
        sh_nan = 0;
        sh_m = 0;
    }
    __syncthreads();
    int m = 0, nanf = 0;
    for (int i = tid; i < n; i += blockDim.x) {
        float x = s[i];
        nanf |= x != x;
        m += x != x || x == -INFINITY ? 0 : 1;
    }
    if (nanf)
        atomicOr(&sh_nan, 1);
    atomicAdd(&sh_m, m);
    __syncthreads();
    if (sh_nan) { /* lowp_topk refuses */
        for (int i = tid; i <= width; i += blockDim.x)
            o[i] = -1;
        if (tid == 0)
            status[b] = 1;
        return;
    }
    m = sh_m;
    uint32_t T = KEY_NEG_INF; /* m <= k: every candidate */
    int need_eq = 0;
    if (m > k) {
        uint32_t prefix = 0, pmask = 0;
        int rem = k; /* still to take among the keys that match prefix */
        for (int shift = 24; shift >= 0; shift -= 8) {
            for (int t = tid; t < 256; t += blockDim.x)
                hist[t] = 0;
            __syncthreads();
            for (int i = tid; i < n; i += blockDim.x) {
                float x = s[i];
                if (x == -INFINITY)
                    continue;
                uint32_t key = order_key(x);
                if ((key & pmask) == prefix)
                    atomicAdd(&hist[(key >> shift) & 0xffu], 1u);
            }
            __syncthreads();
            if (tid == 0) {
                int cum = 0, dgt = 0;
                for (int dd = 255; dd >= 0; dd--) {
                    if (cum + (int)hist[dd] >= rem) {
                        dgt = dd;
                        break;
                    }
                    cum += (int)hist[dd];
                }
                sh_digit = dgt;
                sh_rem = rem - cum;
            }
            __syncthreads();
            prefix |= (uint32_t)sh_digit << shift;
            pmask |= 0xffu << shift;
            rem = sh_rem;
            __syncthreads();
        }
        T = prefix;
        need_eq = rem;
    }
    int eq_run = 0, sel_run = 0;
    for (int base = 0; base < n; base += blockDim.x) {
        int i = base + tid;
        float x = i < n ? s[i] : -INFINITY;
        uint32_t key = x == -INFINITY ? 0u : order_key(x);
        int gt = x != -INFINITY && key > T, eq = x != -INFINITY && key == T && m > k;
        int eqr, eqt;
        topk_scan(scan).ExclusiveSum(eq, eqr, eqt);
        __syncthreads();
        int sel = gt || (eq && eq_run + eqr < need_eq);
        int selr, selt;
        topk_scan(scan).ExclusiveSum(sel, selr, selt);
        __syncthreads();
        if (sel) {
            int at = sel_run + selr;
            if (R > 0)
                for (int t = 0; t < R; t++)
                    o[at * R + t] = i * R + t;
            else
                o[at] = i;
        }
        eq_run += eqt;
        sel_run += selt;
    }
    int w = R > 0 ? sel_run * R : sel_run;
    int count = w;
    if (R > 0) { /* the open tail n*R .. pos, always kept */
        int p0 = n * R, tail = pos[b] + 1 - p0;
        for (int t = tid; t < tail; t += blockDim.x)
            o[w + t] = p0 + t;
        count += tail > 0 ? tail : 0;
    }
    for (int i = count + tid; i < width; i += blockDim.x)
        o[i] = -1;
    if (tid == 0) {
        o[width] = count;
        status[b] = 0;
    }
}

int launch_err(const char *what, char *why, size_t wl)
{
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return lowp_why_set(why, wl, "%s: %s", what, cudaGetErrorString(e));
    return 0;
}

} /* namespace */

/* ---------------------------------------------------------------- host API */

extern "C" int lowp_gpu_qsa_check(const lowp_qsa_config *c, char *why, size_t wl)
{
    if (c == NULL)
        return lowp_why_set(why, wl, "GPU QSA: NULL configuration");
    if (c->head_dim < 32 || c->head_dim > SEL_MAX_DIM || c->head_dim % 32)
        return lowp_why_set(why, wl, "GPU QSA: head dim %zu (a multiple of 32 in 32..%d)", c->head_dim, SEL_MAX_DIM);
    if (c->index_heads < 1 || c->index_heads > SEL_MAX_QSA_HEADS)
        return lowp_why_set(why, wl, "GPU QSA: %zu index heads (1..%d)", c->index_heads, SEL_MAX_QSA_HEADS);
    if (c->ratio < 1 || c->ratio > 64)
        return lowp_why_set(why, wl, "GPU QSA: compression ratio %zu (1..64)", c->ratio);
    if (c->rotary_dim % 2 || c->rotary_dim > c->head_dim)
        return lowp_why_set(why, wl, "GPU QSA: rotary dim %zu (even, at most the head dim)", c->rotary_dim);
    if ((unsigned)c->keys > LOWP_QSA_KEYS_MXFP8)
        return lowp_why_set(why, wl, "GPU QSA: unknown key format %d", (int)c->keys);
    if (c->topk < 1 || c->topk > ((size_t)1 << 20))
        return lowp_why_set(why, wl, "GPU QSA: top-k %zu (1..2^20)", c->topk);
    return 0;
}

extern "C" lowp_kv_config lowp_gpu_qsa_keycache_config(const lowp_qsa_config *c, size_t rows)
{
    lowp_block_format f = lowp_qsa_keycache_format(c->keys);
    size_t bs = lowp_block_size(f);
    lowp_kv_config k = lowp_kv_config_default(f, rows ? rows : 1, 1, 1, c->head_dim, bs < 16 ? 16 : bs);
    if (f == LOWP_NVFP4 || f == LOWP_MXFP4 || f == LOWP_MXFP8)
        k.recipe = c->recipe;
    k.quant_flags = 0;
    return k;
}

static int check_keys(const lowp_qsa_config *c, const lowp_gpu_kvcache *keys, size_t rows, char *why, size_t wl)
{
    if (lowp_gpu_qsa_check(c, why, wl) || lowp_gpu_kvcache_check(keys, why, wl))
        return -1;
    lowp_kv_config w = lowp_gpu_qsa_keycache_config(c, keys->cfg.num_pages);
    const lowp_kv_config *g = &keys->cfg;
    if (g->format != w.format || g->page_size != 1 || g->num_heads != 1 || g->qk_dim != w.qk_dim ||
        g->layout != LOWP_KV_NHD || g->k_sf_order != LOWP_KV_SF_LINEAR ||
        ((w.format == LOWP_NVFP4 || w.format == LOWP_MXFP4 || w.format == LOWP_MXFP8) && g->recipe != w.recipe))
        return lowp_why_set(why, wl, "GPU QSA: the index-key cache is not lowp_gpu_qsa_keycache_config's "
                                     "(format, page size 1, one head, head dim, NHD, linear scales, recipe)");
    if (g->num_pages < rows)
        return lowp_why_set(why, wl, "GPU QSA: the index-key cache has %zu rows, the batch needs %zu", g->num_pages,
                            rows);
    if (w.format == LOWP_NVFP4 && keys->k_global_host[0] != c->gs.dec)
        return lowp_why_set(why, wl, "GPU QSA: the key cache's global scale %g is not the configuration's %g",
                            (double)keys->k_global_host[0], (double)c->gs.dec);
    return 0;
}

static int check_batch(const lowp_gpu_select_batch *bt, char *why, size_t wl)
{
    if (bt == NULL || bt->batch < 1 || bt->batch > 65535 || bt->n == NULL || bt->blk_off == NULL)
        return lowp_why_set(why, wl, "GPU select: a batch of 1..65535 sequences with device offsets and lengths");
    if (bt->max_n > (size_t)INT32_MAX / 2)
        return lowp_why_set(why, wl, "GPU select: %zu rows per sequence (below 2^30)", bt->max_n);
    return 0;
}

extern "C" int lowp_gpu_qsa_compress(const lowp_qsa_config *c, const uint16_t *k_dev, const float *wk_dev,
                                     const float *rope_dev, const lowp_gpu_select_batch *bt, lowp_gpu_kvcache *keys,
                                     char *why, size_t wl)
{
    if (check_batch(bt, why, wl) || check_keys(c, keys, bt->total_rows, why, wl))
        return -1;
    if (k_dev == NULL || wk_dev == NULL || rope_dev == NULL || bt->tok_off == NULL)
        return lowp_why_set(why, wl, "GPU QSA compress: NULL keys, weights, RoPE table or token offsets");
    size_t d = c->head_dim, tot = bt->total_rows;
    if (tot == 0 || bt->max_n == 0)
        return 0;
    int direct = c->keys == LOWP_QSA_KEYS_BF16; /* the rows are the cache's codes */
    uint16_t *rows = direct ? (uint16_t *)keys->k_codes : NULL;
    uint16_t *vzero = NULL;
    int64_t *slots = NULL;
    int rc = 0;
    if (!direct && cudaMalloc(&rows, tot * d * sizeof *rows) != cudaSuccess)
        return lowp_why_set(why, wl, "GPU QSA compress: out of device memory for %zu rows", tot);
    dim3 grid((unsigned)((bt->max_n + 127) / 128), (unsigned)bt->batch);
    qsa_compress_kernel<<<grid, 128>>>(k_dev, wk_dev, rope_dev, bt->tok_off, bt->blk_off, bt->n, (int)d,
                                       (int)c->ratio, (int)c->rotary_dim, c->eps, rows);
    rc = launch_err("QSA compression kernel", why, wl);
    if (rc == 0 && c->keys == LOWP_QSA_KEYS_E4M3) {
        e4m3_cast_kernel<<<(unsigned)((tot * d + 255) / 256), 256>>>(rows, tot * d, keys->k_codes);
        rc = launch_err("E4M3 cast kernel", why, wl);
    } else if (rc == 0 && !direct) { /* the cache's quantize-on-write (lowp/gpu_kvcache.h) */
        size_t vd = keys->cfg.vo_dim;
        if (cudaMalloc(&vzero, tot * vd * sizeof *vzero) != cudaSuccess ||
            cudaMalloc(&slots, tot * sizeof *slots) != cudaSuccess)
            rc = lowp_why_set(why, wl, "GPU QSA compress: out of device memory for %zu rows", tot);
        if (rc == 0 && cudaMemset(vzero, 0, tot * vd * sizeof *vzero) != cudaSuccess)
            rc = lowp_why_set(why, wl, "GPU QSA compress: cudaMemset failed");
        if (rc == 0) {
            iota_kernel<<<(unsigned)((tot + 255) / 256), 256>>>(slots, tot);
            rc = launch_err("slot kernel", why, wl);
        }
        if (rc == 0)
            rc = lowp_gpu_kv_write(keys, LOWP_GPU_IN_BF16, rows, vzero, slots, NULL, tot, 0, why, wl);
    }
    cudaError_t e = cudaDeviceSynchronize();
    if (rc == 0 && e != cudaSuccess)
        rc = lowp_why_set(why, wl, "GPU QSA compress: %s", cudaGetErrorString(e));
    if (!direct)
        cudaFree(rows);
    cudaFree(vzero);
    cudaFree(slots);
    return rc;
}

/* The device's opt-in shared memory maximum (48 KiB when it cannot be read). A kernel's limit is raised to it, never to one launch's size: the
 * attribute belongs to the function, so host threads launching at once with different sizes
 * would otherwise lower it under each other's launch. */
static int sel_smem_optin(void)
{
    int dev = 0, bytes = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess)
        return 48 * 1024; /* the default every device allows */
    return bytes;
}

static int qsa_format_id(lowp_qsa_keys k) { return (int)k; } /* 0 BF16 .. 4 MXFP8, the template ids */

extern "C" int lowp_gpu_qsa_scores(const lowp_qsa_config *c, const lowp_gpu_kvcache *keys, const float *qo_dev,
                                   const lowp_gpu_select_batch *bt, float *scores_dev, cudaStream_t st, char *why,
                                   size_t wl)
{
    if (check_batch(bt, why, wl) || check_keys(c, keys, 0, why, wl))
        return -1;
    if (qo_dev == NULL || scores_dev == NULL)
        return lowp_why_set(why, wl, "GPU QSA scores: NULL query or scores");
    if (bt->max_n == 0)
        return 0;
    int d = (int)c->head_dim, H = (int)c->index_heads;
    int rb = (int)lowp_qsa_keycache_row_bytes(c), rs = (int)lowp_qsa_keycache_row_scales(c);
    int HM = H == 4 ? 4 : SEL_MAX_QSA_HEADS;
    /* rows a lane: LOWP_SELECT_RPL (1, 2, 4; a tuning knob, the output never changes),
     * default 1: on the H200, BF16 keys at 128K, 1, 2 and 4 took 83.3, 85.3 and 148.9 us */
    const char *env = getenv("LOWP_SELECT_RPL");
    int rpl = env && (env[0] == '2' || env[0] == '4') && !env[1] ? env[0] - '0' : 1;
    if (H != 4)
        rpl = 1;
    size_t smem = (size_t)HM * d * sizeof(double) + (size_t)SEL_WARPS * 32 * rpl * (rb + 16);
    dim3 grid((unsigned)((bt->max_n + SEL_WARPS * 32 * rpl - 1) / (SEL_WARPS * 32 * rpl)), (unsigned)bt->batch);
    double g = keys->cfg.format == LOWP_NVFP4 ? (double)keys->k_global_host[0] : 1.0;
    float div = sqrtf((float)d);
    const uint8_t *sc = keys->k_scales;
#define SEL_LAUNCH3(F, HC, RPL)                                                                                   \
    do {                                                                                                          \
        cudaFuncSetAttribute(qsa_score_kernel<F, HC, RPL>, cudaFuncAttributeMaxDynamicSharedMemorySize,           \
                             sel_smem_optin());                                                                   \
        qsa_score_kernel<F, HC, RPL><<<grid, 32 * SEL_WARPS, smem, st>>>(                                         \
            keys->k_codes, sc, g, rb, rs, qo_dev, bt->blk_off, bt->n, H, d, c->divide, div, scores_dev);          \
    } while (0)
#define SEL_LAUNCH(F)                                                                                             \
    do {                                                                                                          \
        if (H != 4)                                                                                               \
            SEL_LAUNCH3(F, 0, 1);                                                                                 \
        else if (rpl == 1)                                                                                        \
            SEL_LAUNCH3(F, 4, 1);                                                                                 \
        else if (rpl == 2)                                                                                        \
            SEL_LAUNCH3(F, 4, 2);                                                                                 \
        else                                                                                                      \
            SEL_LAUNCH3(F, 4, 4);                                                                                 \
    } while (0)
    /* the second kernel (qsa_score_v2_kernel) for BF16 and E4M3 keys with 4 heads and whole
     * 32-byte steps, unless LOWP_SELECT_KERNEL=v1; its rows a lane: LOWP_SELECT_RPL (1, 2,
     * 4), default 2. Either kernel computes the same bits. */
    const char *kenv = getenv("LOWP_SELECT_KERNEL"), *nenv = getenv("LOWP_SELECT_STAGES");
    const int nst = nenv && !strcmp(nenv, "2") ? 2 : 3; /* LOWP_SELECT_STAGES: 2 or 3 (default) */
    const int fid = qsa_format_id(c->keys);
    if (!(kenv && strcmp(kenv, "v1") == 0) && H == 4 && (fid == 0 || fid == 1) && rb % 32 == 0) {
        const int r2 = env ? rpl : 2;
        /* q and q 2^S, then each warp's stages */
        const size_t sm2 = (size_t)2 * 4 * d * sizeof(double) + (size_t)SEL_WARPS * nst * 32 * r2 * V2_SROW;
        const dim3 g2((unsigned)((bt->max_n + SEL_WARPS * 32 * r2 - 1) / (SEL_WARPS * 32 * r2)),
                      (unsigned)bt->batch);
#define SEL_V2N(F, R, N)                                                                                          \
    do {                                                                                                          \
        cudaFuncSetAttribute(qsa_score_v2_kernel<F, R, N>, cudaFuncAttributeMaxDynamicSharedMemorySize,           \
                             sel_smem_optin());                                                                   \
        qsa_score_v2_kernel<F, R, N><<<g2, 32 * SEL_WARPS, sm2, st>>>(keys->k_codes, rb, qo_dev, bt->blk_off,     \
                                                                    bt->n, d, c->divide, div, scores_dev);        \
    } while (0)
#define SEL_V2(F, R)                                                                                              \
    do {                                                                                                          \
        if (nst == 2)                                                                                             \
            SEL_V2N(F, R, 2);                                                                                     \
        else                                                                                                      \
            SEL_V2N(F, R, 3);                                                                                     \
    } while (0)
        if (fid == 0 && r2 == 1)
            SEL_V2(0, 1);
        else if (fid == 0 && r2 == 2)
            SEL_V2(0, 2);
        else if (fid == 0)
            SEL_V2(0, 4);
        else if (r2 == 1)
            SEL_V2(1, 1);
        else if (r2 == 2)
            SEL_V2(1, 2);
        else
            SEL_V2(1, 4);
#undef SEL_V2N
#undef SEL_V2
        return launch_err("QSA scoring kernel", why, wl);
    }
    switch (qsa_format_id(c->keys)) {
    case 0: SEL_LAUNCH(0); break;
    case 1: SEL_LAUNCH(1); break;
    case 2: SEL_LAUNCH(2); break;
    case 3: SEL_LAUNCH(3); break;
    default: SEL_LAUNCH(4); break;
    }
#undef SEL_LAUNCH3
#undef SEL_LAUNCH2
#undef SEL_LAUNCH
    return launch_err("QSA scoring kernel", why, wl);
}

static int dsa_check(const lowp_dsa_config *c, char *why, size_t wl)
{
    if (c == NULL || c->keys != LOWP_DSA_KEYS_FP8)
        return lowp_why_set(why, wl, "GPU DSA: FP8 index keys only");
    if (c->head_dim < 1 || c->head_dim > SEL_MAX_DIM || c->heads < 1 || c->heads * c->head_dim > SEL_MAX_DSA_QFLOATS)
        return lowp_why_set(why, wl, "GPU DSA: %zu heads x head dim %zu (head dim 1..%d, heads x dim at most %d)",
                            c->heads, c->head_dim, SEL_MAX_DIM, SEL_MAX_DSA_QFLOATS);
    if (!(c->k_floor > 0) || !isfinite(c->k_floor))
        return lowp_why_set(why, wl, "GPU DSA: k amax floor %g (finite, positive)", (double)c->k_floor);
    return 0;
}

extern "C" int lowp_gpu_dsa_quantize(const lowp_dsa_config *c, const uint16_t *k_dev, size_t n, uint8_t *codes_dev,
                                     float *scales_dev, cudaStream_t st, char *why, size_t wl)
{
    if (dsa_check(c, why, wl))
        return -1;
    if (n == 0)
        return 0;
    if (k_dev == NULL || codes_dev == NULL || scales_dev == NULL)
        return lowp_why_set(why, wl, "GPU DSA quantize: NULL pointer");
    dsa_quant_kernel<<<(unsigned)((n + 127) / 128), 128, 0, st>>>(k_dev, n, (int)c->head_dim, c->k_floor, c->ue8m0,
                                                                  codes_dev, scales_dev);
    return launch_err("DSA quantize kernel", why, wl);
}

extern "C" int lowp_gpu_dsa_scores(const lowp_dsa_config *c, const uint8_t *codes_dev, const float *ks_dev,
                                   const float *qq_dev, const float *wh_dev, const lowp_gpu_select_batch *bt,
                                   float *scores_dev, cudaStream_t st, char *why, size_t wl)
{
    if (dsa_check(c, why, wl) || check_batch(bt, why, wl))
        return -1;
    if (codes_dev == NULL || ks_dev == NULL || qq_dev == NULL || wh_dev == NULL || scores_dev == NULL)
        return lowp_why_set(why, wl, "GPU DSA scores: NULL pointer");
    if (bt->max_n == 0)
        return 0;
    size_t smem = (c->heads * c->head_dim + c->heads) * sizeof(float);
    cudaFuncSetAttribute(dsa_score_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, sel_smem_optin());
    dim3 grid((unsigned)((bt->max_n + 127) / 128), (unsigned)bt->batch);
    dsa_score_kernel<<<grid, 128, smem, st>>>(codes_dev, ks_dev, qq_dev, wh_dev, bt->blk_off, bt->n, (int)c->heads,
                                              (int)c->head_dim, scores_dev);
    return launch_err("DSA scoring kernel", why, wl);
}

extern "C" size_t lowp_gpu_topk_row(size_t k, size_t ratio) { return (ratio ? k * ratio + ratio - 1 : k) + 1; }

extern "C" int lowp_gpu_topk(const float *scores_dev, const lowp_gpu_select_batch *bt, size_t k, size_t ratio,
                             const int32_t *pos_dev, int32_t *out_dev, int32_t *status_dev, cudaStream_t st,
                             char *why, size_t wl)
{
    if (check_batch(bt, why, wl))
        return -1;
    if (k < 1 || ratio > 64 || lowp_gpu_topk_row(k, ratio) > (size_t)INT32_MAX / 2)
        return lowp_why_set(why, wl, "GPU top-k: k %zu (at least 1) and ratio %zu (0..64) give too wide a row", k,
                            ratio);
    if (scores_dev == NULL || out_dev == NULL || status_dev == NULL || (ratio && pos_dev == NULL))
        return lowp_why_set(why, wl, "GPU top-k: NULL pointer");
    int width = (int)lowp_gpu_topk_row(k, ratio) - 1;
    topk_kernel<<<(unsigned)bt->batch, SEL_TOPK_THREADS, 0, st>>>(scores_dev, bt->blk_off, bt->n, (int)k,
                                                                 (int)ratio, pos_dev, width, out_dev, status_dev);
    return launch_err("top-k kernel", why, wl);
}

extern "C" int lowp_gpu_kvcache_gather_view(const lowp_gpu_kvcache *c, lowp_gpu_kvcache *view, char *why, size_t wl)
{
    if (lowp_gpu_kvcache_check(c, why, wl))
        return -1;
    lowp_kv_config vc;
    if (lowp_select_gather_config(&c->cfg, &vc, why, wl))
        return -1;
    *view = *c;
    view->cfg = vc;
    return lowp_gpu_kvcache_check(view, why, wl); /* the byte counts are the pool's */
}

/* ---------------------------------------------------------------- the bandwidth yardstick */

namespace {
/* every byte of p[0..n) read once with 16-byte loads (grid-stride), xor-folded into one
 * word per CTA so that no load is dead (n a multiple of 16) */
__global__ void read_kernel(const uint4 *__restrict__ p, size_t n16, unsigned *__restrict__ sink)
{
    unsigned acc = 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n16; i += (size_t)gridDim.x * blockDim.x) {
        uint4 v = __ldg(p + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x9e3779b9u) /* practically never: keeps acc live without a store per thread */
        sink[blockIdx.x & 0xffffu] = acc;
}
} /* namespace */

extern "C" int lowp_gpu_select_read(const void *p, size_t n, unsigned *sink_dev, cudaStream_t st)
{
    int dev = 0, sms = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    read_kernel<<<(unsigned)(sms * 8), 256, 0, st>>>((const uint4 *)p, n / 16, sink_dev);
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
}
