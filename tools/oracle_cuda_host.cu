/* tools/oracle_cuda_host.cu: CUDA 13's host conversion functions behind a C API.
 *
 * Compiled by nvcc; only host code is used. Every conversion below is CUDA's own inline
 * header function (cuda_fp8.hpp, cuda_fp4.hpp, cuda_bf16.hpp, cuda_fp16.hpp) taking its
 * host path, the software emulation CUDA documents and that the research notes measured
 * against the H200's cvt instructions. See oracle_cuda_host.h for the map. */
#include "oracle_cuda_host.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp4.h>
#include <cuda_fp8.h>

#include <cstddef>
#include <type_traits>

namespace {

/* Below this many values the loop runs on the calling thread only. (A macro: nvcc's
 * front end does not see a variable used only inside an OpenMP clause.) */
#define LOWP_CUDA_HOST_PARALLEL_MIN 32768

template <typename In, typename Out, typename Fn>
void run(const In *in, Out *out, size_t n, Fn fn)
{
    const std::ptrdiff_t m = (std::ptrdiff_t)n;
#pragma omp parallel for schedule(static) if (n >= LOWP_CUDA_HOST_PARALLEL_MIN)
    for (std::ptrdiff_t i = 0; i < m; i++)
        out[i] = (Out)fn(in[i]);
}

/* One overload per input type, so each case below is written once. */
inline unsigned fp8(float x, __nv_saturation_t s, __nv_fp8_interpretation_t k)
{
    return __nv_cvt_float_to_fp8(x, s, k);
}
inline unsigned fp8(double x, __nv_saturation_t s, __nv_fp8_interpretation_t k)
{
    return __nv_cvt_double_to_fp8(x, s, k);
}
inline unsigned fp4(float x, cudaRoundMode r)
{
    return __nv_cvt_float_to_fp4(x, __NV_E2M1, r);
}
inline unsigned fp4(double x, cudaRoundMode r)
{
    return __nv_cvt_double_to_fp4(x, __NV_E2M1, r);
}
inline unsigned e8m0(float x, __nv_saturation_t s, cudaRoundMode r)
{
    return __nv_cvt_float_to_e8m0(x, s, r);
}
inline unsigned e8m0(double x, __nv_saturation_t s, cudaRoundMode r)
{
    return __nv_cvt_double_to_e8m0(x, s, r);
}
inline unsigned bits(__nv_bfloat16 h)
{
    return static_cast<__nv_bfloat16_raw>(h).x;
}
inline unsigned bits(__half h)
{
    return static_cast<__half_raw>(h).x;
}

/* CUDA's default where the caller leaves it open: the fp8/fp4/e8m0 struct constructors
 * saturate; bf16/f16 conversions never do. */
int resolve_sat(lowp_format f, int saturate)
{
    if (saturate == LOWP_SAT_DEFAULT)
        return (f == LOWP_BF16 || f == LOWP_F16) ? 0 : 1;
    return saturate;
}

int has(lowp_format f, lowp_round r, int saturate, bool f64)
{
    int s = resolve_sat(f, saturate);
    if (s != 0 && s != 1)
        return 0;
    switch (f) {
    case LOWP_E2M1:
        return s == 1 && (r == LOWP_RN || r == LOWP_RZ);
    case LOWP_E4M3:
    case LOWP_E5M2:
        return r == LOWP_RN;
    case LOWP_E8M0:
        return r == LOWP_RZ || r == LOWP_RU;
    case LOWP_BF16:
    case LOWP_F16:
        if (s != 0)
            return 0;
        if (f64)
            return r == LOWP_RN;
        return r == LOWP_RN || r == LOWP_RZ || r == LOWP_RU || r == LOWP_RD;
    }
    return 0;
}

#define LOWP_RUN(expr) run(in, out, n, [](In x) { return (expr); })

template <typename In, typename Out>
int encode(lowp_format f, lowp_round r, int saturate, const In *in, Out *out, size_t n)
{
    const bool f64 = std::is_same<In, double>::value;
    if (!has(f, r, saturate, f64))
        return -1;
    if (sizeof(Out) == 1 && (f == LOWP_BF16 || f == LOWP_F16))
        return -1;
    const bool sat = resolve_sat(f, saturate) == 1;
    switch (f) {
    case LOWP_E2M1:
        if (r == LOWP_RN)
            LOWP_RUN(fp4(x, cudaRoundNearest));
        else
            LOWP_RUN(fp4(x, cudaRoundZero));
        return 0;
    case LOWP_E4M3:
        if (sat)
            LOWP_RUN(fp8(x, __NV_SATFINITE, __NV_E4M3));
        else
            LOWP_RUN(fp8(x, __NV_NOSAT, __NV_E4M3));
        return 0;
    case LOWP_E5M2:
        if (sat)
            LOWP_RUN(fp8(x, __NV_SATFINITE, __NV_E5M2));
        else
            LOWP_RUN(fp8(x, __NV_NOSAT, __NV_E5M2));
        return 0;
    case LOWP_E8M0:
        if (r == LOWP_RZ && sat)
            LOWP_RUN(e8m0(x, __NV_SATFINITE, cudaRoundZero));
        else if (r == LOWP_RZ)
            LOWP_RUN(e8m0(x, __NV_NOSAT, cudaRoundZero));
        else if (sat)
            LOWP_RUN(e8m0(x, __NV_SATFINITE, cudaRoundPosInf));
        else
            LOWP_RUN(e8m0(x, __NV_NOSAT, cudaRoundPosInf));
        return 0;
    case LOWP_BF16:
        if (f64)
            LOWP_RUN(bits(__double2bfloat16((double)x)));
        else if (r == LOWP_RN)
            LOWP_RUN(bits(__float2bfloat16_rn((float)x)));
        else if (r == LOWP_RZ)
            LOWP_RUN(bits(__float2bfloat16_rz((float)x)));
        else if (r == LOWP_RU)
            LOWP_RUN(bits(__float2bfloat16_ru((float)x)));
        else
            LOWP_RUN(bits(__float2bfloat16_rd((float)x)));
        return 0;
    case LOWP_F16:
        if (f64)
            LOWP_RUN(bits(__double2half((double)x)));
        else if (r == LOWP_RN)
            LOWP_RUN(bits(__float2half_rn((float)x)));
        else if (r == LOWP_RZ)
            LOWP_RUN(bits(__float2half_rz((float)x)));
        else if (r == LOWP_RU)
            LOWP_RUN(bits(__float2half_ru((float)x)));
        else
            LOWP_RUN(bits(__float2half_rd((float)x)));
        return 0;
    }
    return -1;
}

#undef LOWP_RUN

} /* namespace */

extern "C" {

#define LOWP_STR2(x) #x
#define LOWP_STR(x) LOWP_STR2(x)
const char *lowp_cuda_host_version(void)
{
    return "CUDA " LOWP_STR(__CUDACC_VER_MAJOR__) "." LOWP_STR(__CUDACC_VER_MINOR__)
           " (cuda_fp8.h, cuda_fp4.h, cuda_bf16.h, cuda_fp16.h host code, nvcc)";
}

int lowp_cuda_host_has_f32(lowp_format f, lowp_round r, int saturate)
{
    return has(f, r, saturate, false);
}

int lowp_cuda_host_has_f64(lowp_format f, lowp_round r, int saturate)
{
    return has(f, r, saturate, true);
}

const char *lowp_cuda_host_function(lowp_format f, lowp_round r, int saturate, int input_bits)
{
    const bool f64 = input_bits == 64;
    if (!has(f, r, saturate, f64))
        return "(none)";
    const bool sat = resolve_sat(f, saturate) == 1;
    switch (f) {
    case LOWP_E2M1:
        if (r == LOWP_RN)
            return f64 ? "__nv_cvt_double_to_fp4(x, __NV_E2M1, cudaRoundNearest)"
                       : "__nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest)";
        return f64 ? "__nv_cvt_double_to_fp4(x, __NV_E2M1, cudaRoundZero)"
                   : "__nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundZero)";
    case LOWP_E4M3:
        if (sat)
            return f64 ? "__nv_cvt_double_to_fp8(x, __NV_SATFINITE, __NV_E4M3)"
                       : "__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3)";
        return f64 ? "__nv_cvt_double_to_fp8(x, __NV_NOSAT, __NV_E4M3)"
                   : "__nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E4M3)";
    case LOWP_E5M2:
        if (sat)
            return f64 ? "__nv_cvt_double_to_fp8(x, __NV_SATFINITE, __NV_E5M2)"
                       : "__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2)";
        return f64 ? "__nv_cvt_double_to_fp8(x, __NV_NOSAT, __NV_E5M2)"
                   : "__nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E5M2)";
    case LOWP_E8M0:
        if (r == LOWP_RZ)
            return sat ? (f64 ? "__nv_cvt_double_to_e8m0(x, __NV_SATFINITE, cudaRoundZero)"
                              : "__nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundZero)")
                       : (f64 ? "__nv_cvt_double_to_e8m0(x, __NV_NOSAT, cudaRoundZero)"
                              : "__nv_cvt_float_to_e8m0(x, __NV_NOSAT, cudaRoundZero)");
        return sat ? (f64 ? "__nv_cvt_double_to_e8m0(x, __NV_SATFINITE, cudaRoundPosInf)"
                          : "__nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundPosInf)")
                   : (f64 ? "__nv_cvt_double_to_e8m0(x, __NV_NOSAT, cudaRoundPosInf)"
                          : "__nv_cvt_float_to_e8m0(x, __NV_NOSAT, cudaRoundPosInf)");
    case LOWP_BF16:
        if (f64)
            return "__double2bfloat16(x)";
        switch (r) {
        case LOWP_RN: return "__float2bfloat16_rn(x)";
        case LOWP_RZ: return "__float2bfloat16_rz(x)";
        case LOWP_RU: return "__float2bfloat16_ru(x)";
        default: return "__float2bfloat16_rd(x)";
        }
    case LOWP_F16:
        if (f64)
            return "__double2half(x)";
        switch (r) {
        case LOWP_RN: return "__float2half_rn(x)";
        case LOWP_RZ: return "__float2half_rz(x)";
        case LOWP_RU: return "__float2half_ru(x)";
        default: return "__float2half_rd(x)";
        }
    }
    return "(none)";
}

int lowp_cuda_host_encode_f32(lowp_format f, lowp_round r, int saturate, const float *in,
                              uint16_t *out, size_t n)
{
    return encode<float, uint16_t>(f, r, saturate, in, out, n);
}

int lowp_cuda_host_encode_f32_u8(lowp_format f, lowp_round r, int saturate, const float *in,
                                 uint8_t *out, size_t n)
{
    return encode<float, uint8_t>(f, r, saturate, in, out, n);
}

int lowp_cuda_host_encode_f64(lowp_format f, lowp_round r, int saturate, const double *in,
                              uint16_t *out, size_t n)
{
    return encode<double, uint16_t>(f, r, saturate, in, out, n);
}

} /* extern "C" */
