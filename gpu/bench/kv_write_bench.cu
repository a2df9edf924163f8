/* gpu/bench/kv_write_bench.cu: lowp/gpu_kv_bench.h. `lowp gpu bench --kernel kv-write`
 * times lowp_gpu_kv_write over the shapes users write: a decode step writes one token a
 * sequence (batch 1..64 tokens), a prefill or chunked-prefill step thousands; head dims
 * 64..512.
 *
 *   call_us   one lowp_gpu_kv_write between two events on an idle stream: its host
 *             checks (three cudaPointerGetAttributes, the config check) and launch included
 *   dev_us    the same call with lowp_gpu_spin_us (20 us) enqueued before the first event,
 *             so the host's part overlaps the spin: the device time alone
 *   copy_us   cudaMemcpyAsync device to device of (bytes / 2), timed as dev_us: the same
 *             bytes moved (half read, half written); eff = copy_us / dev_us
 *   bytes     the BF16 K and V read plus the codes and scales written
 * Medians of --reps launches each, after 3 warm-up calls. The inputs are random BF16 of
 * moderate magnitude (the kernel has no data-dependent branch: every element takes the
 * same encode). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "lowp/cuda_check.h"
#include "lowp/gpu_kv_bench.h"
#include "lowp/gpu_kvcache.h"
#include "lowp/kvcache.h"
#include "lowp/why.h"

namespace {

__global__ void spin_kernel(long long cycles)
{
    const long long t0 = clock64();
    while (clock64() - t0 < cycles) {
    }
}

/* BF16 pairs of magnitude 2^-4 .. 2^3, random sign and mantissa. */
__global__ void fill_bf16(uint16_t *p, size_t n, uint64_t seed)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint64_t x = (seed + i) * 0x9E3779B97F4A7C15ull;
        x ^= x >> 29;
        x *= 0xBF58476D1CE4E5B9ull;
        x ^= x >> 32;
        const uint32_t r = (uint32_t)x;
        p[i] = (uint16_t)((r & 0x8000u) | ((123u + (r >> 16) % 8u) << 7) | (r & 0x7Fu));
    }
}

double g_cycles_per_us = 0.0; /* spin calibration */

int cmp_f(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

} /* namespace */

extern "C" int lowp_gpu_spin_us(cudaStream_t s, double us, char *why, size_t why_len)
{
    cudaError_t e;
    if (g_cycles_per_us == 0.0) { /* one calibration: 10^6 cycles timed by events */
        cudaEvent_t a, b;
        float ms = 0.0f;
        if ((e = cudaEventCreate(&a)) != cudaSuccess || (e = cudaEventCreate(&b)) != cudaSuccess)
            return lowp_why_set(why, why_len, "spin: %s", cudaGetErrorString(e));
        spin_kernel<<<1, 1, 0, s>>>(100000); /* warm-up */
        cudaEventRecord(a, s);
        spin_kernel<<<1, 1, 0, s>>>(1000000);
        cudaEventRecord(b, s);
        if ((e = cudaEventSynchronize(b)) != cudaSuccess)
            return lowp_why_set(why, why_len, "spin calibration: %s", cudaGetErrorString(e));
        cudaEventElapsedTime(&ms, a, b);
        cudaEventDestroy(a);
        cudaEventDestroy(b);
        g_cycles_per_us = ms > 0.0f ? 1e6 / (1e3 * (double)ms) : 1e3;
    }
    spin_kernel<<<1, 1, 0, s>>>((long long)(us * g_cycles_per_us));
    if ((e = cudaGetLastError()) != cudaSuccess)
        return lowp_why_set(why, why_len, "spin launch: %s", cudaGetErrorString(e));
    return 0;
}

extern "C" lowp_gpu_kv_bench_opts lowp_gpu_kv_bench_defaults(void)
{
    lowp_gpu_kv_bench_opts o;
    memset(&o, 0, sizeof o);
    const lowp_block_format f[] = {LOWP_NVFP4, LOWP_MXFP4, LOWP_MXFP8, LOWP_FP8_E4M3, LOWP_BF16_PASS};
    const uint64_t t[] = {1, 8, 64, 512, 4096, 32768};
    const uint64_t d[] = {64, 128, 256, 512};
    memcpy(o.formats, f, sizeof f);
    memcpy(o.tokens, t, sizeof t);
    memcpy(o.dims, d, sizeof d);
    o.n_formats = sizeof f / sizeof f[0];
    o.n_tokens = sizeof t / sizeof t[0];
    o.n_dims = sizeof d / sizeof d[0];
    o.heads = 8;
    o.page_size = 16;
    o.reps = 20;
    return o;
}

extern "C" int lowp_gpu_kv_bench_run(const lowp_gpu_kv_bench_opts *o, FILE *csv, FILE *log,
                                     char *why, size_t wl)
{
    if (o->n_formats == 0 || o->n_tokens == 0 || o->n_dims == 0 || o->heads == 0 ||
        o->page_size == 0 || o->reps == 0)
        return lowp_why_set(why, wl, "kv-write bench: empty format, token, dim or rep list");
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        (void)cudaGetLastError();
        lowp_why_set(why, wl, "no CUDA device");
        return 77;
    }
    int rc = 0;
    uint64_t tmax = 0, dmax = 0;
    for (size_t i = 0; i < o->n_tokens; i++)
        tmax = o->tokens[i] > tmax ? o->tokens[i] : tmax;
    for (size_t i = 0; i < o->n_dims; i++)
        dmax = o->dims[i] > dmax ? o->dims[i] : dmax;
    const size_t H = o->heads, reps = o->reps;
    const size_t in_max = (size_t)tmax * H * dmax; /* elements of K (and of V) */
    uint16_t *dk = NULL, *dv = NULL;
    int64_t *dslots = NULL, *hslots = NULL;
    void *ca = NULL, *cb = NULL;
    float *ms = (float *)malloc(reps * sizeof *ms);
    cudaEvent_t e0 = NULL, e1 = NULL;
    cudaDeviceProp prop;
    hslots = (int64_t *)malloc((size_t)tmax * sizeof *hslots);
    if (ms == NULL || hslots == NULL) {
        rc = lowp_why_set(why, wl, "out of host memory");
        goto out;
    }
    for (size_t i = 0; i < tmax; i++)
        hslots[i] = (int64_t)i;
    LOWP_CUDA_CK(cudaGetDeviceProperties(&prop, 0));
    LOWP_CUDA_CK(cudaMalloc(&dk, in_max * 2));
    LOWP_CUDA_CK(cudaMalloc(&dv, in_max * 2));
    LOWP_CUDA_CK(cudaMalloc(&dslots, (size_t)tmax * sizeof *dslots));
    LOWP_CUDA_CK(cudaMemcpy(dslots, hslots, (size_t)tmax * sizeof *dslots, cudaMemcpyHostToDevice));
    /* half of the largest shape's bytes (BF16 in and out: 8 bytes an element), with room */
    LOWP_CUDA_CK(cudaMalloc(&ca, 4 * in_max + 64));
    LOWP_CUDA_CK(cudaMalloc(&cb, 4 * in_max + 64));
    fill_bf16<<<1024, 256>>>(dk, in_max, 1);
    fill_bf16<<<1024, 256>>>(dv, in_max, 2);
    LOWP_CUDA_CK(cudaGetLastError());
    LOWP_CUDA_CK(cudaEventCreate(&e0));
    LOWP_CUDA_CK(cudaEventCreate(&e1));
    if (csv)
        fprintf(csv, "format,recipe,tokens,kv_heads,dim,page_size,bytes,call_us,dev_us,copy_us,"
                     "dev_gbps,eff\n");
    fprintf(log, "lowp gpu bench --kernel kv-write on %s: %zu KV heads, page size %zu, NHD, BF16 "
                 "in; median of %zu\n",
            prop.name, H, o->page_size, reps);
    fprintf(log, "%-9s %7s %5s %10s %9s %9s %9s %6s\n", "format", "tokens", "dim", "bytes",
            "call_us", "dev_us", "copy_us", "eff");
    for (size_t fi = 0; fi < o->n_formats; fi++)
        for (size_t di = 0; di < o->n_dims; di++)
            for (size_t ti = 0; ti < o->n_tokens; ti++) {
                const size_t T = o->tokens[ti], D = o->dims[di], ps = o->page_size;
                lowp_kv_config cfg =
                    lowp_kv_config_default(o->formats[fi], (T + ps - 1) / ps, ps, H, D, D);
                lowp_gpu_kvcache *gc = NULL;
                char cw[256];
                if (lowp_gpu_kvcache_create(&cfg, &gc, cw, sizeof cw)) {
                    rc = lowp_why_set(why, wl, "%s dim %zu: %s",
                                      lowp_block_format_name(o->formats[fi]), D, cw);
                    goto out;
                }
                const double bytes = 2.0 * (double)T * (double)H * (2.0 * (double)D) +
                                     2.0 * (double)T * (double)H *
                                         (double)(lowp_kv_row_code_bytes(&cfg, LOWP_KV_K) +
                                                  lowp_kv_row_scales(&cfg, LOWP_KV_K));
                const size_t half = (size_t)(bytes / 2) / 16 * 16 + 16;
                double t[3];
                for (int pass = 0; pass < 3; pass++) { /* call, device, copy */
                    char w[256] = "";
                    for (size_t r = 0; r < reps + 3; r++) {
                        if (pass > 0 && lowp_gpu_spin_us(0, 20.0, w, sizeof w)) {
                            rc = lowp_why_set(why, wl, "%s", w);
                            lowp_gpu_kvcache_destroy(gc);
                            goto out;
                        }
                        LOWP_CUDA_CK(cudaEventRecord(e0, 0));
                        int bad = pass < 2 ? lowp_gpu_kv_write(gc, LOWP_GPU_IN_BF16, dk, dv, dslots,
                                                               NULL, T, 0, w, sizeof w)
                                           : cudaMemcpyAsync(cb, ca, half, cudaMemcpyDeviceToDevice,
                                                             0) != cudaSuccess;
                        LOWP_CUDA_CK(cudaEventRecord(e1, 0));
                        LOWP_CUDA_CK(cudaEventSynchronize(e1));
                        if (bad) {
                            rc = lowp_why_set(why, wl, "%s", pass < 2 ? w : "cudaMemcpyAsync failed");
                            lowp_gpu_kvcache_destroy(gc);
                            goto out;
                        }
                        if (r >= 3)
                            LOWP_CUDA_CK(cudaEventElapsedTime(&ms[r - 3], e0, e1));
                    }
                    qsort(ms, reps, sizeof *ms, cmp_f);
                    t[pass] = 1e3 * ms[reps / 2];
                }
                lowp_gpu_kvcache_destroy(gc);
                const double gbps = t[1] > 0 ? bytes / (t[1] * 1e-6) / 1e9 : 0.0;
                const double eff = t[1] > 0 ? t[2] / t[1] : 0.0;
                const char *fn = lowp_block_format_name(o->formats[fi]);
                fprintf(log, "%-9s %7zu %5zu %10.0f %9.2f %9.2f %9.2f %6.3f\n", fn, T, D, bytes,
                        t[0], t[1], t[2], eff);
                if (csv)
                    fprintf(csv, "%s,%s,%zu,%zu,%zu,%zu,%.0f,%.2f,%.2f,%.2f,%.1f,%.3f\n", fn,
                            lowp_recipe_name(cfg.recipe), T, H, D, ps, bytes, t[0], t[1], t[2],
                            gbps, eff);
            }
out:
    if (e0)
        cudaEventDestroy(e0);
    if (e1)
        cudaEventDestroy(e1);
    cudaFree(dk);
    cudaFree(dv);
    cudaFree(dslots);
    cudaFree(ca);
    cudaFree(cb);
    free(ms);
    free(hslots);
    return rc;
}
