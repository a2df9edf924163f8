/* gpu/kernels/cvt.cu: hardware conversions through inline PTX cvt, and the GPU half of the
 * exhaustive sweeps (see lowp/gpu_cvt.h).
 *
 * Built for sm_90, sm_100a and sm_120a (gpu/CMakeLists.txt). The E2M1 and UE8M0
 * instructions exist only in the family-specific Blackwell images (__CUDA_ARCH__ >= 1000
 * with __CUDA_ARCH_FAMILY_SPECIFIC__, the same guard cuda_fp8.h uses); those code paths
 * are COMPILED HERE BUT HAVE NEVER RUN ANYWHERE: the project had no Blackwell GPU. Other
 * images carry a stub that raises a device flag, and the host refuses such combinations
 * before launching (lowp_gpu_supported), from the capabilities the loaded image reports. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "cvt_internal.h"
#include "lowp/gpu_cvt.h"

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 1000) && defined(__CUDA_ARCH_FAMILY_SPECIFIC__)
#define LOWP_DEV_BLACKWELL_CVT 1 /* e2m1x2 / ue8m0x2: compiled, never run (see above) */
#else
#define LOWP_DEV_BLACKWELL_CVT 0
#endif

/* ---------------------------------------------------------------- errors */

static char g_err[512];
static int g_inited = 0;
static lowp_gpu_info g_info;

static int set_err(int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_err, sizeof g_err, fmt, ap);
    va_end(ap);
    return rc;
}

static int cuda_err(cudaError_t e, const char *what, int line)
{
    return set_err(LOWP_GPU_ECUDA, "%s failed: %s (%s) [cvt.cu:%d]", what, cudaGetErrorName(e),
                   cudaGetErrorString(e), line);
}

/* Check a CUDA call; on failure record it and return from the function (or jump). */
#define CK(call)                                                                          \
    do {                                                                                  \
        cudaError_t e_ = (call);                                                          \
        if (e_ != cudaSuccess)                                                            \
            return cuda_err(e_, #call, __LINE__);                                         \
    } while (0)
#define CKG(call)                                                                         \
    do {                                                                                  \
        cudaError_t e_ = (call);                                                          \
        if (e_ != cudaSuccess) {                                                          \
            rc = cuda_err(e_, #call, __LINE__);                                           \
            goto done;                                                                    \
        }                                                                                 \
    } while (0)

/* snprintf through a va_list: messages may be cut to the buffer, on purpose. */
static void put(char *dst, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst, len, fmt, ap);
    va_end(ap);
}

extern "C" const char *lowp_gpu_last_error(void)
{
    return g_err;
}

extern "C" const char *lowp_gpu_strerror(int rc)
{
    switch (rc) {
    case LOWP_GPU_OK: return "ok";
    case LOWP_GPU_ENODEV: return "no usable CUDA GPU";
    case LOWP_GPU_EUNSUPPORTED: return "not supported by the running device";
    case LOWP_GPU_EINVAL: return "invalid argument";
    case LOWP_GPU_ECUDA: return "CUDA error";
    case LOWP_GPU_ENOMEM: return "out of host memory";
    default: return "unknown error";
    }
}

extern "C" void lowp_gpu_version_string(int v, char *buf, size_t len)
{
    snprintf(buf, len, "%d.%d", v / 1000, (v % 1000) / 10);
}

/* ---------------------------------------------------------------- device side */

/* The conversions. Each (format, mode, saturation) is one compile-time op. */
enum {
    OP_E4M3_RN_SAT,
    OP_E5M2_RN_SAT,
    OP_E2M1_RN_SAT,
    OP_E8M0_RZ_SAT,
    OP_E8M0_RZ,
    OP_E8M0_RP_SAT,
    OP_E8M0_RP,
    OP_BF16_RN,
    OP_BF16_RZ,
    OP_BF16_RM,
    OP_BF16_RP,
    OP_F16_RN,
    OP_F16_RZ,
    OP_F16_RM,
    OP_F16_RP,
    OP_COUNT
};

__device__ unsigned int g_unsupported; /* set when a stub ran (never expected) */

/* Two binary32 inputs to two codes: result bits [15:0] = code(a), [31:16] = code(b).
 * For the x2 forms, PTX puts its first source operand in the upper half of the result,
 * so a is passed second. */
template <int OP>
__device__ __forceinline__ uint32_t cvt2(float a, float b)
{
    uint16_t r = 0;
    if (OP == OP_E4M3_RN_SAT) {
        asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(b), "f"(a));
        return (uint32_t)(r & 0xFFu) | ((uint32_t)(r >> 8) << 16);
    } else if (OP == OP_E5M2_RN_SAT) {
        asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(r) : "f"(b), "f"(a));
        return (uint32_t)(r & 0xFFu) | ((uint32_t)(r >> 8) << 16);
    } else if (OP == OP_E2M1_RN_SAT) {
#if LOWP_DEV_BLACKWELL_CVT
        /* compiled for sm_100a / sm_120a only; never run */
        asm("{ .reg .b8 t;\n\t"
            "cvt.rn.satfinite.e2m1x2.f32 t, %1, %2;\n\t"
            "mov.b16 %0, {t, 0}; }"
            : "=h"(r) : "f"(b), "f"(a));
        return (uint32_t)(r & 0xFu) | ((uint32_t)((r >> 4) & 0xFu) << 16);
#else
        atomicOr(&g_unsupported, 1u);
        return 0xFFFFFFFFu;
#endif
    } else if (OP >= OP_E8M0_RZ_SAT && OP <= OP_E8M0_RP) {
#if LOWP_DEV_BLACKWELL_CVT
        /* compiled for sm_100a / sm_120a only; never run */
        if (OP == OP_E8M0_RZ_SAT)
            asm("cvt.rz.satfinite.ue8m0x2.f32 %0, %1, %2;" : "=h"(r) : "f"(b), "f"(a));
        else if (OP == OP_E8M0_RZ)
            asm("cvt.rz.ue8m0x2.f32 %0, %1, %2;" : "=h"(r) : "f"(b), "f"(a));
        else if (OP == OP_E8M0_RP_SAT)
            asm("cvt.rp.satfinite.ue8m0x2.f32 %0, %1, %2;" : "=h"(r) : "f"(b), "f"(a));
        else
            asm("cvt.rp.ue8m0x2.f32 %0, %1, %2;" : "=h"(r) : "f"(b), "f"(a));
        return (uint32_t)(r & 0xFFu) | ((uint32_t)(r >> 8) << 16);
#else
        atomicOr(&g_unsupported, 1u);
        return 0xFFFFFFFFu;
#endif
    } else {
        uint16_t ra = 0, rb = 0;
        switch (OP) {
        case OP_BF16_RN:
            asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(ra) : "f"(a));
            asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(rb) : "f"(b));
            break;
        case OP_BF16_RZ:
            asm("cvt.rz.bf16.f32 %0, %1;" : "=h"(ra) : "f"(a));
            asm("cvt.rz.bf16.f32 %0, %1;" : "=h"(rb) : "f"(b));
            break;
        case OP_BF16_RM:
            asm("cvt.rm.bf16.f32 %0, %1;" : "=h"(ra) : "f"(a));
            asm("cvt.rm.bf16.f32 %0, %1;" : "=h"(rb) : "f"(b));
            break;
        case OP_BF16_RP:
            asm("cvt.rp.bf16.f32 %0, %1;" : "=h"(ra) : "f"(a));
            asm("cvt.rp.bf16.f32 %0, %1;" : "=h"(rb) : "f"(b));
            break;
        case OP_F16_RN:
            asm("cvt.rn.f16.f32 %0, %1;" : "=h"(ra) : "f"(a));
            asm("cvt.rn.f16.f32 %0, %1;" : "=h"(rb) : "f"(b));
            break;
        case OP_F16_RZ:
            asm("cvt.rz.f16.f32 %0, %1;" : "=h"(ra) : "f"(a));
            asm("cvt.rz.f16.f32 %0, %1;" : "=h"(rb) : "f"(b));
            break;
        case OP_F16_RM:
            asm("cvt.rm.f16.f32 %0, %1;" : "=h"(ra) : "f"(a));
            asm("cvt.rm.f16.f32 %0, %1;" : "=h"(rb) : "f"(b));
            break;
        default: /* OP_F16_RP */
            asm("cvt.rp.f16.f32 %0, %1;" : "=h"(ra) : "f"(a));
            asm("cvt.rp.f16.f32 %0, %1;" : "=h"(rb) : "f"(b));
            break;
        }
        return (uint32_t)ra | ((uint32_t)rb << 16);
    }
}

/* Encode d_in[0..n) to out (uint8_t or uint16_t), two elements per step. */
template <int OP, typename T>
__global__ void k_encode_f32(const float *__restrict__ in, T *__restrict__ out, size_t n)
{
    size_t pairs = (n + 1) / 2;
    for (size_t p = blockIdx.x * (size_t)blockDim.x + threadIdx.x; p < pairs;
         p += (size_t)gridDim.x * blockDim.x) {
        size_t i = 2 * p;
        float a = in[i];
        float b = i + 1 < n ? in[i + 1] : 0.0f;
        uint32_t r = cvt2<OP>(a, b);
        out[i] = (T)(r & 0xFFFFu);
        if (i + 1 < n)
            out[i + 1] = (T)(r >> 16);
    }
}

/* Sweep: input i of this chunk is the binary32 with bits first + i (n even). */
template <int OP, typename T>
__global__ void k_sweep_f32(uint32_t first, T *__restrict__ out, size_t n)
{
    size_t pairs = n / 2;
    for (size_t p = blockIdx.x * (size_t)blockDim.x + threadIdx.x; p < pairs;
         p += (size_t)gridDim.x * blockDim.x) {
        uint32_t bits = first + (uint32_t)(2 * p);
        uint32_t r = cvt2<OP>(__uint_as_float(bits), __uint_as_float(bits + 1u));
        if (sizeof(T) == 1) {
            /* two codes as one aligned 16-bit store */
            reinterpret_cast<uint16_t *>(out)[p] = (uint16_t)((r & 0xFFu) | ((r >> 8) & 0xFF00u));
        } else {
            reinterpret_cast<uint32_t *>(out)[p] = r;
        }
    }
}

/* binary16 pairs to E4M3 / E5M2 (FMT 1 or 2). */
template <int FMT>
__global__ void k_encode_f16(const uint16_t *__restrict__ in, uint8_t *__restrict__ out, size_t n)
{
    size_t pairs = (n + 1) / 2;
    for (size_t p = blockIdx.x * (size_t)blockDim.x + threadIdx.x; p < pairs;
         p += (size_t)gridDim.x * blockDim.x) {
        size_t i = 2 * p;
        uint32_t lo = in[i], hi = i + 1 < n ? in[i + 1] : 0u;
        uint32_t h2 = lo | (hi << 16); /* low half -> low byte */
        uint16_t r;
        if (FMT == LOWP_E4M3)
            asm("cvt.rn.satfinite.e4m3x2.f16x2 %0, %1;" : "=h"(r) : "r"(h2));
        else
            asm("cvt.rn.satfinite.e5m2x2.f16x2 %0, %1;" : "=h"(r) : "r"(h2));
        out[i] = (uint8_t)(r & 0xFFu);
        if (i + 1 < n)
            out[i + 1] = (uint8_t)(r >> 8);
    }
}

/* Decode one code per element (FMT: E4M3, E5M2 -> f16; E2M1 -> f16; E8M0 -> bf16). */
template <int FMT>
__global__ void k_decode(const uint8_t *__restrict__ in, uint16_t *__restrict__ out, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint16_t c = in[i];
        uint32_t r = 0;
        if (FMT == LOWP_E4M3) {
            asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(r) : "h"(c));
        } else if (FMT == LOWP_E5M2) {
            asm("cvt.rn.f16x2.e5m2x2 %0, %1;" : "=r"(r) : "h"(c));
        } else if (FMT == LOWP_E2M1) {
#if LOWP_DEV_BLACKWELL_CVT
            /* compiled for sm_100a / sm_120a only; never run */
            uint16_t c4 = (uint16_t)(c & 0xFu);
            asm("{ .reg .b8 t, z;\n\t"
                "mov.b16 {t, z}, %1;\n\t"
                "cvt.rn.f16x2.e2m1x2 %0, t; }"
                : "=r"(r) : "h"(c4));
#else
            atomicOr(&g_unsupported, 1u);
            r = 0xFFFFu;
#endif
        } else {
#if LOWP_DEV_BLACKWELL_CVT
            /* compiled for sm_100a / sm_120a only; never run */
            asm("cvt.rn.bf16x2.ue8m0x2 %0, %1;" : "=r"(r) : "h"(c));
#else
            atomicOr(&g_unsupported, 1u);
            r = 0xFFFFu;
#endif
        }
        out[i] = (uint16_t)(r & 0xFFFFu); /* low byte's result is the low half */
    }
}

/* What this image can do. out: [0] __CUDA_ARCH__, [1] family-specific arch, [2] caps. */
__global__ void k_probe(int *out)
{
#ifdef __CUDA_ARCH__
    unsigned caps = 0;
#if __CUDA_ARCH__ >= 890
    caps |= LOWP_GPU_CAP_FP8;
#endif
#if __CUDA_ARCH__ >= 900
    caps |= LOWP_GPU_CAP_F16;
#endif
#if LOWP_DEV_BLACKWELL_CVT
    caps |= LOWP_GPU_CAP_FP4 | LOWP_GPU_CAP_UE8M0;
#endif
    out[0] = __CUDA_ARCH__;
#ifdef __CUDA_ARCH_FAMILY_SPECIFIC__
    out[1] = __CUDA_ARCH_FAMILY_SPECIFIC__;
#else
    out[1] = 0;
#endif
    out[2] = (int)caps;
#endif
}

/* ---------------------------------------------------------------- host side */

extern "C" int lowp_gpu_init(int device, lowp_gpu_info *info)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver || (e == cudaSuccess && count == 0))
        return set_err(LOWP_GPU_ENODEV, "no CUDA GPU: cudaGetDeviceCount gave %s (%s), %d device(s)",
                       cudaGetErrorName(e), cudaGetErrorString(e), count);
    if (e != cudaSuccess)
        return cuda_err(e, "cudaGetDeviceCount", __LINE__);
    if (device < 0 || device >= count)
        return set_err(LOWP_GPU_EINVAL, "device %d does not exist (%d device(s))", device, count);
    CK(cudaSetDevice(device));
    lowp_gpu_info in;
    memset(&in, 0, sizeof in);
    in.device = device;
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, device));
    snprintf(in.name, sizeof in.name, "%s", p.name);
    in.cc_major = p.major;
    in.cc_minor = p.minor;
    in.sm_count = p.multiProcessorCount;
    in.global_mem = p.totalGlobalMem;
    CK(cudaDriverGetVersion(&in.driver_version));
    CK(cudaRuntimeGetVersion(&in.runtime_version));
    int *d = NULL, h[3] = {0, 0, 0};
    CK(cudaMalloc(&d, sizeof h));
    CK(cudaMemset(d, 0, sizeof h));
    k_probe<<<1, 1>>>(d);
    e = cudaGetLastError();
    if (e == cudaSuccess)
        e = cudaDeviceSynchronize();
    if (e == cudaErrorNoKernelImageForDevice || e == cudaErrorInvalidDeviceFunction) {
        cudaFree(d);
        (void)cudaGetLastError();
        return set_err(LOWP_GPU_EUNSUPPORTED,
                       "no kernel image for %s (compute capability %d.%d): built for sm_90, sm_100a, sm_120a",
                       in.name, in.cc_major, in.cc_minor);
    }
    if (e != cudaSuccess) {
        cudaFree(d);
        return cuda_err(e, "k_probe launch", __LINE__);
    }
    CK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    CK(cudaFree(d));
    in.image_arch = h[0];
    in.image_family = h[1];
    in.caps = (unsigned)h[2];
    unsigned zero = 0;
    CK(cudaMemcpyToSymbol(g_unsupported, &zero, sizeof zero));
    g_info = in;
    g_inited = 1;
    if (info)
        *info = in;
    return LOWP_GPU_OK;
}

static int ensure_init(void)
{
    return g_inited ? LOWP_GPU_OK : lowp_gpu_init(0, NULL);
}

/* The op for (f, r, saturate), or -1 with a reason. */
static int op_for(lowp_format f, lowp_round r, int saturate, char *why, size_t wl)
{
    int sat = saturate;
    const char *fn = lowp_format_name(f), *rn = lowp_round_name(r);
    if (f == LOWP_E2M1 || f == LOWP_E4M3 || f == LOWP_E5M2 || f == LOWP_E8M0) {
        if (sat == LOWP_SAT_DEFAULT)
            sat = 1;
    } else if (f == LOWP_BF16 || f == LOWP_F16) {
        if (sat == LOWP_SAT_DEFAULT)
            sat = 0;
    } else {
        put(why, wl, "unknown format %d", (int)f);
        return -1;
    }
    switch (f) {
    case LOWP_E4M3:
    case LOWP_E5M2:
    case LOWP_E2M1:
        if (r != LOWP_RN) {
            put(why, wl, "PTX converts binary32 to %s with .rn only, not %s", fn, rn ? rn : "?");
            return -1;
        }
        if (!sat) {
            put(why, wl, "PTX has %s conversions only with .satfinite (CUDA's __NV_NOSAT is software)", fn);
            return -1;
        }
        return f == LOWP_E4M3 ? OP_E4M3_RN_SAT : f == LOWP_E5M2 ? OP_E5M2_RN_SAT : OP_E2M1_RN_SAT;
    case LOWP_E8M0:
        if (r == LOWP_RZ)
            return sat ? OP_E8M0_RZ_SAT : OP_E8M0_RZ;
        if (r == LOWP_RU)
            return sat ? OP_E8M0_RP_SAT : OP_E8M0_RP;
        put(why, wl, "PTX converts to ue8m0 with .rz or .rp only, not %s", rn ? rn : "?");
        return -1;
    default: /* BF16, F16 */
        if (sat) {
            put(why, wl, "lowp's cuda profile has no saturating %s conversion", fn);
            return -1;
        }
        if (r == LOWP_RNA) {
            put(why, wl, "PTX has no round-to-nearest-away conversion to %s", fn);
            return -1;
        }
        {
            int base = f == LOWP_BF16 ? OP_BF16_RN : OP_F16_RN;
            return base + (r == LOWP_RN ? 0 : r == LOWP_RZ ? 1 : r == LOWP_RD ? 2 : 3);
        }
    }
}

static unsigned caps_for_op(int op)
{
    if (op == OP_E2M1_RN_SAT)
        return LOWP_GPU_CAP_FP4;
    if (op >= OP_E8M0_RZ_SAT && op <= OP_E8M0_RP)
        return LOWP_GPU_CAP_UE8M0;
    if (op >= OP_BF16_RN)
        return LOWP_GPU_CAP_F16;
    return LOWP_GPU_CAP_FP8;
}

static const char *cap_need(unsigned cap)
{
    switch (cap) {
    case LOWP_GPU_CAP_FP4: return "cvt.*.e2m1x2 needs an sm_100a/sm_120a image (built, never run)";
    case LOWP_GPU_CAP_UE8M0: return "cvt.*.ue8m0x2 needs an sm_100a/sm_120a image (built, never run)";
    case LOWP_GPU_CAP_F16: return "cvt.{rm,rp}.bf16.f32 needs sm_90";
    default: return "cvt.*.e4m3x2/e5m2x2 needs sm_89";
    }
}

/* Resolve and check against the device; returns op or a negative error. */
static int resolve(lowp_format f, lowp_round r, int saturate, char *why, size_t wl)
{
    char tmp[256];
    if (!why) {
        why = tmp;
        wl = sizeof tmp;
    }
    why[0] = 0;
    int rc = ensure_init();
    if (rc != LOWP_GPU_OK) {
        put(why, wl, "%s", g_err);
        return rc;
    }
    int op = op_for(f, r, saturate, why, wl);
    if (op < 0)
        return set_err(LOWP_GPU_EUNSUPPORTED, "%s", why);
    unsigned need = caps_for_op(op);
    if (!(g_info.caps & need)) {
        put(why, wl, "%s; the running %s (cc %d.%d) loaded an sm_%d image", cap_need(need),
                 g_info.name, g_info.cc_major, g_info.cc_minor, g_info.image_arch / 10);
        return set_err(LOWP_GPU_EUNSUPPORTED, "%s", why);
    }
    return op;
}

extern "C" int lowp_gpu_supported(lowp_format f, lowp_round r, int saturate, char *why, size_t why_len)
{
    int op = resolve(f, r, saturate, why, why_len);
    return op < 0 ? op : LOWP_GPU_OK;
}

static void grid_for(size_t work, int *blocks)
{
    size_t b = (work + 255) / 256;
    size_t cap = (size_t)(g_info.sm_count > 0 ? g_info.sm_count : 1) * 16;
    if (b > cap)
        b = cap;
    if (b < 1)
        b = 1;
    *blocks = (int)b;
}

/* Launch helper tables: one instantiation per op. */
template <typename T>
static void launch_encode(int op, int blocks, cudaStream_t s, const float *in, T *out, size_t n)
{
#define CASE(o) case o: k_encode_f32<o, T><<<blocks, 256, 0, s>>>(in, out, n); break;
    switch (op) {
        CASE(OP_E4M3_RN_SAT) CASE(OP_E5M2_RN_SAT) CASE(OP_E2M1_RN_SAT)
        CASE(OP_E8M0_RZ_SAT) CASE(OP_E8M0_RZ) CASE(OP_E8M0_RP_SAT) CASE(OP_E8M0_RP)
        CASE(OP_BF16_RN) CASE(OP_BF16_RZ) CASE(OP_BF16_RM) CASE(OP_BF16_RP)
        CASE(OP_F16_RN) CASE(OP_F16_RZ) CASE(OP_F16_RM) CASE(OP_F16_RP)
    default: break;
    }
#undef CASE
}

template <typename T>
static void launch_sweep(int op, int blocks, cudaStream_t s, uint32_t first, T *out, size_t n)
{
#define CASE(o) case o: k_sweep_f32<o, T><<<blocks, 256, 0, s>>>(first, out, n); break;
    switch (op) {
        CASE(OP_E4M3_RN_SAT) CASE(OP_E5M2_RN_SAT) CASE(OP_E2M1_RN_SAT)
        CASE(OP_E8M0_RZ_SAT) CASE(OP_E8M0_RZ) CASE(OP_E8M0_RP_SAT) CASE(OP_E8M0_RP)
        CASE(OP_BF16_RN) CASE(OP_BF16_RZ) CASE(OP_BF16_RM) CASE(OP_BF16_RP)
        CASE(OP_F16_RN) CASE(OP_F16_RZ) CASE(OP_F16_RM) CASE(OP_F16_RP)
    default: break;
    }
#undef CASE
}

static int check_unsupported_flag(void)
{
    unsigned flag = 0;
    CK(cudaMemcpyFromSymbol(&flag, g_unsupported, sizeof flag));
    if (flag)
        return set_err(LOWP_GPU_EUNSUPPORTED, "a conversion ran in an image without its instruction (stub)");
    return LOWP_GPU_OK;
}

extern "C" int lowp_gpu_encode_f32_u8(lowp_format f, lowp_round r, int saturate, const float *d_in,
                                      uint8_t *d_out, size_t n, cudaStream_t stream)
{
    int op = resolve(f, r, saturate, NULL, 0);
    if (op < 0)
        return op;
    if (lowp_format_bits(f) > 8)
        return set_err(LOWP_GPU_EINVAL, "%s codes do not fit uint8_t; use lowp_gpu_encode_f32_u16",
                       lowp_format_name(f));
    if (n == 0)
        return LOWP_GPU_OK;
    if (!d_in || !d_out)
        return set_err(LOWP_GPU_EINVAL, "NULL buffer");
    int blocks;
    grid_for((n + 1) / 2, &blocks);
    launch_encode<uint8_t>(op, blocks, stream, d_in, d_out, n);
    CK(cudaGetLastError());
    return LOWP_GPU_OK;
}

extern "C" int lowp_gpu_encode_f32_u16(lowp_format f, lowp_round r, int saturate, const float *d_in,
                                       uint16_t *d_out, size_t n, cudaStream_t stream)
{
    int op = resolve(f, r, saturate, NULL, 0);
    if (op < 0)
        return op;
    if (n == 0)
        return LOWP_GPU_OK;
    if (!d_in || !d_out)
        return set_err(LOWP_GPU_EINVAL, "NULL buffer");
    int blocks;
    grid_for((n + 1) / 2, &blocks);
    launch_encode<uint16_t>(op, blocks, stream, d_in, d_out, n);
    CK(cudaGetLastError());
    return LOWP_GPU_OK;
}

extern "C" int lowp_gpu_encode_f16_u8(lowp_format f, const uint16_t *d_in, uint8_t *d_out, size_t n,
                                      cudaStream_t stream)
{
    int rc = ensure_init();
    if (rc != LOWP_GPU_OK)
        return rc;
    if (f != LOWP_E4M3 && f != LOWP_E5M2)
        return set_err(LOWP_GPU_EUNSUPPORTED, "binary16 input is converted by cvt only to e4m3 and e5m2, not %s",
                       lowp_format_name(f));
    if (!(g_info.caps & LOWP_GPU_CAP_FP8))
        return set_err(LOWP_GPU_EUNSUPPORTED, "%s", cap_need(LOWP_GPU_CAP_FP8));
    if (n == 0)
        return LOWP_GPU_OK;
    if (!d_in || !d_out)
        return set_err(LOWP_GPU_EINVAL, "NULL buffer");
    int blocks;
    grid_for((n + 1) / 2, &blocks);
    if (f == LOWP_E4M3)
        k_encode_f16<LOWP_E4M3><<<blocks, 256, 0, stream>>>(d_in, d_out, n);
    else
        k_encode_f16<LOWP_E5M2><<<blocks, 256, 0, stream>>>(d_in, d_out, n);
    CK(cudaGetLastError());
    return LOWP_GPU_OK;
}

extern "C" int lowp_gpu_decode_u8(lowp_format f, const uint8_t *d_codes, uint16_t *d_out, size_t n,
                                  cudaStream_t stream)
{
    int rc = ensure_init();
    if (rc != LOWP_GPU_OK)
        return rc;
    unsigned need = f == LOWP_E2M1 ? LOWP_GPU_CAP_FP4 : f == LOWP_E8M0 ? LOWP_GPU_CAP_UE8M0 : LOWP_GPU_CAP_FP8;
    if (f != LOWP_E4M3 && f != LOWP_E5M2 && f != LOWP_E2M1 && f != LOWP_E8M0)
        return set_err(LOWP_GPU_EUNSUPPORTED, "no cvt decode for %s", lowp_format_name(f));
    if (!(g_info.caps & need))
        return set_err(LOWP_GPU_EUNSUPPORTED, "%s decode: %s", lowp_format_name(f), cap_need(need));
    if (n == 0)
        return LOWP_GPU_OK;
    if (!d_codes || !d_out)
        return set_err(LOWP_GPU_EINVAL, "NULL buffer");
    int blocks;
    grid_for(n, &blocks);
    switch (f) {
    case LOWP_E4M3: k_decode<LOWP_E4M3><<<blocks, 256, 0, stream>>>(d_codes, d_out, n); break;
    case LOWP_E5M2: k_decode<LOWP_E5M2><<<blocks, 256, 0, stream>>>(d_codes, d_out, n); break;
    case LOWP_E2M1: k_decode<LOWP_E2M1><<<blocks, 256, 0, stream>>>(d_codes, d_out, n); break;
    default: k_decode<LOWP_E8M0><<<blocks, 256, 0, stream>>>(d_codes, d_out, n); break;
    }
    CK(cudaGetLastError());
    return LOWP_GPU_OK;
}

/* ---------------------------------------------------------------- sweeps */

#define SWEEP_CHUNK ((size_t)1 << 26) /* inputs per transfer */

extern "C" int lowp_gpu_sweep_f32(lowp_gpu_sweep *s)
{
    if (!s)
        return set_err(LOWP_GPU_EINVAL, "NULL sweep");
    char why[256];
    int op = resolve(s->format, s->round, s->saturate, why, sizeof why);
    if (op < 0)
        return op;
    if (s->end > (UINT64_C(1) << 32) || s->begin > s->end)
        return set_err(LOWP_GPU_EINVAL, "bad range [%llu, %llu)", (unsigned long long)s->begin,
                       (unsigned long long)s->end);
    lowp_codec c;
    if (lowp_codec_init(&c, s->format, s->profile, s->round, s->saturate, why, sizeof why) != 0)
        return set_err(LOWP_GPU_EINVAL, "lowp refuses the CPU codec: %s", why);
    if (s->begin == s->end)
        return LOWP_GPU_OK;

    const int bytes = lowp_format_bits(s->format) <= 8 ? 1 : 2;
    const double t0 = lowp_gpu_now();
    int rc = LOWP_GPU_OK;
    void *d_buf[2] = {NULL, NULL}, *h_buf[2] = {NULL, NULL};
    cudaEvent_t ev[2] = {NULL, NULL};
    cudaStream_t st = NULL;
    uint64_t begin = s->begin & ~UINT64_C(1); /* the kernel works on even-aligned pairs */
    uint64_t end = (s->end + 1) & ~UINT64_C(1);
    uint64_t nchunks = (end - begin + SWEEP_CHUNK - 1) / SWEEP_CHUNK;
    size_t bufn = (size_t)(end - begin) < SWEEP_CHUNK ? (size_t)(end - begin) : SWEEP_CHUNK;
    int blocks;
    grid_for(bufn / 2, &blocks);
    double waited = 0.0;
    lowp_gpu_sweep acc;
    memset(&acc, 0, sizeof acc);

    CKG(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    for (int k = 0; k < 2; k++) {
        CKG(cudaMalloc(&d_buf[k], bufn * bytes));
        CKG(cudaHostAlloc(&h_buf[k], bufn * bytes, cudaHostAllocDefault));
        CKG(cudaEventCreateWithFlags(&ev[k], cudaEventDisableTiming));
    }
    for (uint64_t k = 0; k <= nchunks; k++) {
        if (k < nchunks) {
            uint64_t lo = begin + k * SWEEP_CHUNK;
            size_t n = (size_t)(end - lo < SWEEP_CHUNK ? end - lo : SWEEP_CHUNK);
            int b = (int)(k & 1);
            if (bytes == 1)
                launch_sweep<uint8_t>(op, blocks, st, (uint32_t)lo, (uint8_t *)d_buf[b], n);
            else
                launch_sweep<uint16_t>(op, blocks, st, (uint32_t)lo, (uint16_t *)d_buf[b], n);
            CKG(cudaGetLastError());
            CKG(cudaMemcpyAsync(h_buf[b], d_buf[b], n * bytes, cudaMemcpyDeviceToHost, st));
            CKG(cudaEventRecord(ev[b], st));
        }
        if (k > 0) {
            uint64_t j = k - 1;
            uint64_t lo = begin + j * SWEEP_CHUNK;
            size_t n = (size_t)(end - lo < SWEEP_CHUNK ? end - lo : SWEEP_CHUNK);
            int b = (int)(j & 1);
            double tw = lowp_gpu_now();
            CKG(cudaEventSynchronize(ev[b]));
            waited += lowp_gpu_now() - tw;
            /* compare only [s->begin, s->end): trim the alignment padding */
            uint64_t clo = lo < s->begin ? s->begin : lo;
            uint64_t chi = lo + n > s->end ? s->end : lo + n;
            if (chi > clo)
                lowp_gpu_compare_f32_chunk(&c, (uint32_t)clo, (size_t)(chi - clo),
                                           (const char *)h_buf[b] + (clo - lo) * bytes, bytes, s->threads,
                                           &acc);
        }
    }
    rc = check_unsupported_flag();
done:
    if (st)
        cudaStreamSynchronize(st);
    for (int k = 0; k < 2; k++) {
        if (d_buf[k])
            cudaFree(d_buf[k]);
        if (h_buf[k])
            cudaFreeHost(h_buf[k]);
        if (ev[k])
            cudaEventDestroy(ev[k]);
    }
    if (st)
        cudaStreamDestroy(st);
    if (rc == LOWP_GPU_OK) {
        s->inputs += acc.inputs;
        s->mismatches += acc.mismatches;
        s->nan_inputs += acc.nan_inputs;
        s->nan_input_mismatches += acc.nan_input_mismatches;
        s->gpu_nan_cpu_not += acc.gpu_nan_cpu_not;
        s->cpu_nan_gpu_not += acc.cpu_nan_gpu_not;
        lowp_gpu_merge_first(s, acc.first, acc.n_first);
        s->seconds += lowp_gpu_now() - t0;
        s->seconds_host_wait += waited;
    }
    return rc;
}

/* Copy n host elements of size sz to a fresh device buffer. */
static int to_device(const void *h, size_t bytes, void **d)
{
    CK(cudaMalloc(d, bytes));
    CK(cudaMemcpy(*d, h, bytes, cudaMemcpyHostToDevice));
    return LOWP_GPU_OK;
}

extern "C" int lowp_gpu_sweep_f16(lowp_gpu_sweep *s)
{
    if (!s)
        return set_err(LOWP_GPU_EINVAL, "NULL sweep");
    int rc = ensure_init();
    if (rc != LOWP_GPU_OK)
        return rc;
    char why[256];
    lowp_codec c;
    if (lowp_codec_init(&c, s->format, s->profile, LOWP_RN, s->saturate, why, sizeof why) != 0)
        return set_err(LOWP_GPU_EINVAL, "lowp refuses the CPU codec: %s", why);
    if (s->saturate == LOWP_SAT_OFF)
        return set_err(LOWP_GPU_EUNSUPPORTED, "PTX has binary16 to %s only with .satfinite",
                       lowp_format_name(s->format));
    const double t0 = lowp_gpu_now();
    const size_t n = 65536;
    uint16_t *h_in = (uint16_t *)malloc(n * 2);
    uint8_t *h_out = (uint8_t *)malloc(n);
    void *d_in = NULL, *d_out = NULL;
    if (!h_in || !h_out) {
        rc = set_err(LOWP_GPU_ENOMEM, "malloc failed");
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        h_in[i] = (uint16_t)i;
    rc = to_device(h_in, n * 2, &d_in);
    if (rc != LOWP_GPU_OK)
        goto done;
    CKG(cudaMalloc(&d_out, n));
    rc = lowp_gpu_encode_f16_u8(s->format, (const uint16_t *)d_in, (uint8_t *)d_out, n, 0);
    if (rc != LOWP_GPU_OK)
        goto done;
    CKG(cudaDeviceSynchronize());
    CKG(cudaMemcpy(h_out, d_out, n, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++) {
        float x = lowp_decode_f32(LOWP_F16, (uint16_t)i);
        lowp_gpu_record(s, s->format, (uint32_t)i, lowp_code_is_nan(LOWP_F16, (uint16_t)i), h_out[i],
                        lowp_encode_f32(&c, x));
    }
    s->seconds += lowp_gpu_now() - t0;
done:
    free(h_in);
    free(h_out);
    if (d_in)
        cudaFree(d_in);
    if (d_out)
        cudaFree(d_out);
    return rc;
}

extern "C" int lowp_gpu_sweep_decode(lowp_gpu_sweep *s)
{
    if (!s)
        return set_err(LOWP_GPU_EINVAL, "NULL sweep");
    int rc = ensure_init();
    if (rc != LOWP_GPU_OK)
        return rc;
    char why[256];
    lowp_format outf = s->format == LOWP_E8M0 ? LOWP_BF16 : LOWP_F16;
    lowp_codec c;
    if (lowp_codec_init(&c, outf, LOWP_PROFILE_CUDA, LOWP_RN, LOWP_SAT_OFF, why, sizeof why) != 0)
        return set_err(LOWP_GPU_EINVAL, "lowp refuses the CPU codec: %s", why);
    const double t0 = lowp_gpu_now();
    const size_t n = lowp_format_code_count(s->format);
    uint8_t h_in[256];
    uint16_t h_out[256];
    void *d_in = NULL, *d_out = NULL;
    for (size_t i = 0; i < n; i++)
        h_in[i] = (uint8_t)i;
    rc = to_device(h_in, n, &d_in);
    if (rc != LOWP_GPU_OK)
        goto done;
    CKG(cudaMalloc(&d_out, n * 2));
    rc = lowp_gpu_decode_u8(s->format, (const uint8_t *)d_in, (uint16_t *)d_out, n, 0);
    if (rc != LOWP_GPU_OK)
        goto done;
    CKG(cudaDeviceSynchronize());
    CKG(cudaMemcpy(h_out, d_out, n * 2, cudaMemcpyDeviceToHost));
    rc = check_unsupported_flag();
    if (rc != LOWP_GPU_OK)
        goto done;
    for (size_t i = 0; i < n; i++) {
        /* Exact for every non-NaN code; a NaN code decodes to a NaN that lowp's cuda
         * binary16/bfloat16 codec writes as the canonical 0x7FFF. */
        float v = lowp_decode_f32(s->format, (uint16_t)i);
        lowp_gpu_record(s, outf, (uint32_t)i, lowp_code_is_nan(s->format, (uint16_t)i), h_out[i],
                        lowp_encode_f32(&c, v));
    }
    s->seconds += lowp_gpu_now() - t0;
done:
    if (d_in)
        cudaFree(d_in);
    if (d_out)
        cudaFree(d_out);
    return rc;
}
