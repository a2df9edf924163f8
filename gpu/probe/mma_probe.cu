/* gpu/probe/mma_probe.cu: the device half of lowp_gpu_mma_probe (gpu/probe/mma_probe_main.c holds
 * the rest: cases, the CPU model, the report). It runs
 *     mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
 * on many independent tiles, one warp per tile, and returns D's bit patterns.
 *
 * Tile layout in memory (what the host fills; tile t starts at t * the tile size):
 *   A  uint16_t[16][16]  A[i][k] at i*16 + k   (bf16 bits, row-major: .row)
 *   B  uint16_t[16][8]   B[k][j] at k*8 + j    (bf16 bits, K x N; held per column: .col)
 *   C  uint32_t[16][8]   C[i][j] at i*8 + j    (binary32 bits)
 *   D  uint32_t[16][8]   D[i][j] at i*8 + j    (binary32 bits, written)
 * D[i][j] = sum_k A[i][k] * B[k][j] + C[i][j] as the tensor core computes it.
 *
 * Fragments (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type",
 * .f16/.bf16), lane L, g = L >> 2, t = L & 3; two bf16 per 32-bit register, the lower k
 * (or column) index in the low half:
 *   A: a0,a1 = A[g][2t..2t+1]      a2,a3 = A[g+8][2t..2t+1]
 *      a4,a5 = A[g][2t+8..2t+9]    a6,a7 = A[g+8][2t+8..2t+9]   (registers ra0..ra3)
 *   B: b0,b1 = B[2t..2t+1][g]      b2,b3 = B[2t+8..2t+9][g]     (registers rb0, rb1)
 *   C/D: c0,c1 = C[g][2t..2t+1]    c2,c3 = C[g+8][2t..2t+1]
 * A wrong layout cannot go unnoticed: the main program runs two tiles of exact small
 * integers first (every (i, k, j) contributes distinguishably) and stops if they differ.
 *
 * Bits pass through float registers unchanged (no arithmetic touches C or D on the way),
 * so NaN payloads and -0 in C reach the instruction as given.
 *
 * f16 = 1 runs mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 instead (the instruction
 * Triton 3.6 emits for an FP8 tl.dot on sm_90: its E4M3 operands widened to f16), each bf16
 * operand converted to f16 on the way (exact for the values the caller puts there: E4M3
 * values and the like; the caller checks which are).
 *
 * Every CUDA call is checked; a failure returns 3 with one line in err. */
#include <cstddef>
#include <cstdint>
#include <cstdio>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

/* The interface with gpu/probe/mma_probe_main.c (C), declared identically there. */
extern "C" {
int lowp_mma_gpu_device(char *desc, size_t len);
int lowp_mma_gpu_run(const uint16_t *A, const uint16_t *B, const uint32_t *C, uint32_t *D,
                     size_t ntiles, int f16, char *err, size_t errlen);
int lowp_mma_gpu_bf16_mul_sweep(unsigned long long *bad, unsigned long long *bad_sub,
                                uint32_t *first_bad, char *err, size_t errlen);
}

#define CK(call)                                                                         \
    do {                                                                                 \
        cudaError_t e_ = (call);                                                         \
        if (e_ != cudaSuccess) {                                                         \
            snprintf(err, errlen, "%s failed: %s (%s) [mma_probe.cu:%d]", #call,         \
                     cudaGetErrorName(e_), cudaGetErrorString(e_), __LINE__);            \
            rc = 3;                                                                      \
            goto done;                                                                   \
        }                                                                                \
    } while (0)

/* A bf16 bit pattern as f16 bits (RN: exact for the values lowp_mma_gpu_run's f16 callers give). */
__device__ __forceinline__ uint32_t f16_of_bf16(uint16_t x)
{
    const __half h = __float2half_rn(__uint_as_float((uint32_t)x << 16));
    return (uint32_t)__half_as_ushort(h);
}

template <bool F16>
__global__ void mma_tiles(const uint16_t *__restrict__ A, const uint16_t *__restrict__ B,
                          const uint32_t *__restrict__ C, uint32_t *__restrict__ D,
                          size_t ntiles)
{
    const unsigned lane = threadIdx.x & 31u, g = lane >> 2, t = lane & 3u;
    const size_t warp = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const size_t nwarps = ((size_t)gridDim.x * blockDim.x) >> 5;
    /* tile depends on the warp only: the loop is warp-uniform, as mma.sync requires */
    for (size_t tile = warp; tile < ntiles; tile += nwarps) {
        const uint16_t *a = A + tile * 256;
        const uint16_t *b = B + tile * 128;
        const uint32_t *c = C + tile * 128;
        uint32_t *d = D + tile * 128;
        const unsigned r0 = g * 16, r1 = (g + 8) * 16, k0 = 2 * t, k1 = 2 * t + 8;
        /* two 16-bit operands a register, the lower index in the low half (f16: converted) */
        auto pk = [](uint16_t lo, uint16_t hi) -> uint32_t {
            return F16 ? f16_of_bf16(lo) | f16_of_bf16(hi) << 16 : (uint32_t)lo | (uint32_t)hi << 16;
        };
        const uint32_t ra0 = pk(a[r0 + k0], a[r0 + k0 + 1]);
        const uint32_t ra1 = pk(a[r1 + k0], a[r1 + k0 + 1]);
        const uint32_t ra2 = pk(a[r0 + k1], a[r0 + k1 + 1]);
        const uint32_t ra3 = pk(a[r1 + k1], a[r1 + k1 + 1]);
        const uint32_t rb0 = pk(b[k0 * 8 + g], b[(k0 + 1) * 8 + g]);
        const uint32_t rb1 = pk(b[k1 * 8 + g], b[(k1 + 1) * 8 + g]);
        const unsigned c0 = g * 8 + 2 * t, c2 = (g + 8) * 8 + 2 * t;
        const float fc0 = __uint_as_float(c[c0]), fc1 = __uint_as_float(c[c0 + 1]);
        const float fc2 = __uint_as_float(c[c2]), fc3 = __uint_as_float(c[c2 + 1]);
        float d0, d1, d2, d3;
        if (F16)
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                         "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"
                         : "=f"(d0), "=f"(d1), "=f"(d2), "=f"(d3)
                         : "r"(ra0), "r"(ra1), "r"(ra2), "r"(ra3), "r"(rb0), "r"(rb1), "f"(fc0),
                           "f"(fc1), "f"(fc2), "f"(fc3));
        else
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                         "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"
                         : "=f"(d0), "=f"(d1), "=f"(d2), "=f"(d3)
                         : "r"(ra0), "r"(ra1), "r"(ra2), "r"(ra3), "r"(rb0), "r"(rb1), "f"(fc0),
                           "f"(fc1), "f"(fc2), "f"(fc3));
        d[c0] = __float_as_uint(d0);
        d[c0 + 1] = __float_as_uint(d1);
        d[c2] = __float_as_uint(d2);
        d[c2 + 1] = __float_as_uint(d3);
    }
}

/* 0 with a description of device 0, 77 when there is no CUDA GPU (desc says why), 3 on
 * another CUDA error. */
extern "C" int lowp_mma_gpu_device(char *desc, size_t len)
{
    int n = 0, drv = 0, rt = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        snprintf(desc, len, "no CUDA GPU (%s)",
                 e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 77;
    }
    cudaDeviceProp p;
    e = cudaGetDeviceProperties(&p, 0);
    if (e == cudaSuccess)
        e = cudaDriverGetVersion(&drv);
    if (e == cudaSuccess)
        e = cudaRuntimeGetVersion(&rt);
    if (e != cudaSuccess) {
        snprintf(desc, len, "device query failed: %s", cudaGetErrorString(e));
        return 3;
    }
    snprintf(desc, len, "%s, sm_%d%d, %d SMs, CUDA driver %d.%d, runtime %d.%d", p.name, p.major,
             p.minor, p.multiProcessorCount, drv / 1000, (drv % 1000) / 10, rt / 1000,
             (rt % 1000) / 10);
    return p.major == 9 ? 0 : 1; /* 1: runs, but not the sm_90 this probe is about */
}

/* D for ntiles tiles (layout above), through the bf16 instruction or (f16) the f16 one. 0, or 3
 * with a reason in err. */
extern "C" int lowp_mma_gpu_run(const uint16_t *A, const uint16_t *B, const uint32_t *C,
                                uint32_t *D, size_t ntiles, int f16, char *err, size_t errlen)
{
    int rc = 0;
    uint16_t *dA = nullptr, *dB = nullptr;
    uint32_t *dC = nullptr, *dD = nullptr;
    if (ntiles == 0)
        return 0;
    {
        CK(cudaSetDevice(0));
        CK(cudaMalloc(&dA, ntiles * 256 * sizeof(uint16_t)));
        CK(cudaMalloc(&dB, ntiles * 128 * sizeof(uint16_t)));
        CK(cudaMalloc(&dC, ntiles * 128 * sizeof(uint32_t)));
        CK(cudaMalloc(&dD, ntiles * 128 * sizeof(uint32_t)));
        CK(cudaMemcpy(dA, A, ntiles * 256 * sizeof(uint16_t), cudaMemcpyHostToDevice));
        CK(cudaMemcpy(dB, B, ntiles * 128 * sizeof(uint16_t), cudaMemcpyHostToDevice));
        CK(cudaMemcpy(dC, C, ntiles * 128 * sizeof(uint32_t), cudaMemcpyHostToDevice));
        /* Poison D so that a tile the kernel skipped cannot pass as a result. */
        CK(cudaMemset(dD, 0xA5, ntiles * 128 * sizeof(uint32_t)));
        const unsigned threads = 256; /* 8 warps */
        size_t blocks = (ntiles + 7) / 8;
        if (blocks > 65535)
            blocks = 65535; /* the kernel strides over the rest */
        if (f16)
            mma_tiles<true><<<(unsigned)blocks, threads>>>(dA, dB, dC, dD, ntiles);
        else
            mma_tiles<false><<<(unsigned)blocks, threads>>>(dA, dB, dC, dD, ntiles);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(D, dD, ntiles * 128 * sizeof(uint32_t), cudaMemcpyDeviceToHost));
    }
done:
    if (dA)
        cudaFree(dA);
    if (dB)
        cudaFree(dB);
    if (dC)
        cudaFree(dC);
    if (dD)
        cudaFree(dD);
    return rc;
}

/* ---- BF16 multiply sweep ----------------------------------------------------------------
 * Every product a * b of two BF16 (2^32 pairs, two a lane through one __hmul2, the
 * instruction gpu/kernels/decode.cu scales FP4 codes with) against binary32 arithmetic rounded
 * to BF16: the binary32 product of two BF16 is exact (16 significant bits) unless it
 * falls below 2^-149, where BF16 rounds to zero either way. Any NaN matches any NaN.
 * Counts the differences, those with a subnormal operand apart, and keeps one (a << 16 |
 * b). This is what lets the FP4 decode build 2^-126 x an E2M1 value as a BF16 subnormal
 * and multiply it by 2^126. Build without -ftz (the CMake target does). */
__global__ void bf16_mul_sweep(unsigned long long *bad, unsigned long long *bad_sub,
                               uint32_t *first)
{
    const size_t n = (size_t)1 << 31, stride = (size_t)gridDim.x * blockDim.x;
    unsigned long long nb = 0, ns = 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const uint32_t a = (uint32_t)(i >> 15), b0 = (uint32_t)(i & 0x7FFF) * 2;
        const uint32_t av = a | (a << 16), bv = b0 | ((b0 + 1) << 16);
        __nv_bfloat162 r = __hmul2(*reinterpret_cast<const __nv_bfloat162 *>(&av),
                                   *reinterpret_cast<const __nv_bfloat162 *>(&bv));
        const uint32_t rv = *reinterpret_cast<uint32_t *>(&r);
        for (int h = 0; h < 2; h++) {
            const uint32_t b = b0 + h, got = (rv >> (16 * h)) & 0xFFFF;
            const float x = __fmul_rn(__uint_as_float(a << 16), __uint_as_float(b << 16));
            __nv_bfloat16 w = __float2bfloat16_rn(x);
            const uint32_t want = *reinterpret_cast<uint16_t *>(&w);
            const bool nan_w = (want & 0x7FFF) > 0x7F80, nan_g = (got & 0x7FFF) > 0x7F80;
            if (nan_w && nan_g)
                continue;
            if (got != want) {
                nb++;
                if ((a & 0x7F80) == 0 || (b & 0x7F80) == 0)
                    ns++;
                atomicExch(first, (a << 16) | b);
            }
        }
    }
    if (nb) {
        atomicAdd(bad, nb);
        atomicAdd(bad_sub, ns);
    }
}

/* 0 with the counts, or 3 with a reason in err. */
extern "C" int lowp_mma_gpu_bf16_mul_sweep(unsigned long long *bad, unsigned long long *bad_sub,
                                           uint32_t *first_bad, char *err, size_t errlen)
{
    int rc = 0;
    unsigned long long *d = nullptr;
    {
        CK(cudaSetDevice(0));
        CK(cudaMalloc(&d, 3 * sizeof(unsigned long long)));
        CK(cudaMemset(d, 0, 3 * sizeof(unsigned long long)));
        bf16_mul_sweep<<<132 * 16, 256>>>(d, d + 1, reinterpret_cast<uint32_t *>(d + 2));
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        unsigned long long h[3];
        CK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
        *bad = h[0];
        *bad_sub = h[1];
        *first_bad = (uint32_t)h[2];
    }
done:
    if (d)
        cudaFree(d);
    return rc;
}
