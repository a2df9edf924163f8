/* gpu/kernels/decode_bf16.cuh: the BF16-pair operations of the decode kernels (gpu/kernels/decode.cu),
 * shared with the kernels of gpu/experiments/floor.cu, which time the same instruction mix. A pair is
 * two BF16 values in one 32-bit register, the low half first, as mma.sync takes them.
 * CUDA only; not installed. */
#ifndef LOWP_DECODE_BF16_CUH
#define LOWP_DECODE_BF16_CUH

#include <stdint.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

namespace {

/* (lo, hi) rounded to nearest even, as a BF16 pair. */
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi)
{
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&v);
}

/* The BF16 pair a x s, each half binary32's product rounded to BF16 (the H200's HMUL2;
 * lowp_gpu_mma_probe checks all 2^32 products). */
__device__ __forceinline__ uint32_t bf16x2_mul(uint32_t a, uint32_t s)
{
    __nv_bfloat162 r = __hmul2(*reinterpret_cast<__nv_bfloat162 *>(&a),
                               *reinterpret_cast<__nv_bfloat162 *>(&s));
    return *reinterpret_cast<uint32_t *>(&r);
}

/* Two FP8 codes (low 16 bits) -> BF16 pair, exact. */
__device__ __forceinline__ uint32_t fp8x2_bf16(uint32_t x, int e5m2)
{
    __half2_raw h = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(x & 0xFFFF),
                                               e5m2 ? __NV_E5M2 : __NV_E4M3);
    float2 f = __half22float2(__half2(h));
    return pack_bf16(f.x, f.y);
}

/* d += A B on the tensor cores: A the 16x16 BF16 fragment a, B the 16x8 fragment (b0, b1),
 * FP32 accumulators (lowp/mma.h models the arithmetic). */
__device__ __forceinline__ void mma_bf16(float *d, uint4 a, uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b0), "r"(b1));
}

} // namespace

#endif /* LOWP_DECODE_BF16_CUH */
