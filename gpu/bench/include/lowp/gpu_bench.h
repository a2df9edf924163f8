/* lowp/gpu_bench.h: `lowp gpu bench`: decode time and effective bandwidth of the GPU
 * decode kernel (lowp/gpu_decode.h) for each KV format, beside a streaming-read kernel
 * reading the same number of bytes, measured in one run on one GPU.
 *
 * Method: CUDA events around each call (split kernel + merge), 3 warm-up calls, then the
 * median (and 10th / 90th percentiles) of reps calls. The cache pool holds R copies of the
 * workload (R * bytes >= 512 MiB, ten times the H200's 50 MiB L2, when memory allows) and
 * call i reads copy i mod R through its own page table, so every call reads from HBM. The
 * streaming read does the same over R buffers of the same size (16-byte loads, every byte
 * read once). Bytes per call: the K and V codes and block scales of every (token, KV head)
 * of every sequence; queries, page table and output are not counted (they are < 0.1%).
 * Cache contents: random codes with moderate block scales written on the GPU (no NaN);
 * the data do not change the kernel's work. Before timing a shape the bench waits
 * settle_ms_per_gb ms for every GB it freed on the device since the last shape: right
 * after a large free the H200 ran the next shape's decode and streaming read 12% slower
 * for tens of milliseconds (gpu/bench/bench.cu says what was measured).
 */
#ifndef LOWP_GPU_BENCH_H
#define LOWP_GPU_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lowp_gpu_bench_opts {
    const char *formats;   /* comma list of block format names; NULL = bf16,fp8_e4m3,nvfp4,mxfp4 */
    const char *batches;   /* comma list; NULL = 1,4,16,32,64 */
    const char *contexts;  /* comma list; NULL = 4096,8192,16384,32768,65536,131072 */
    size_t q_heads, kv_heads, head_dim, page_size;
    int hnd;               /* 1: HND page layout (a head's slots contiguous); 0: NHD */
    int reps;
    double max_gb;         /* skip shapes whose single copy exceeds this (default 40) */
    double settle_ms_per_gb; /* wait this long per GB the bench freed on the device before
                            * timing the next shape (default 3; see Method) */
    size_t chunk;          /* split length in tokens, a multiple of 16; 0 = the default
                            * (lowp_gpu_decode_chunk_tokens). Not a tuning-only knob: the
                            * split boundaries are part of the kernel's arithmetic. */
    int stages, warps;     /* the decode's ring: lowp_gpu_decode_desc.ring_stages and
                            * cta_warps (0 = its default); they change no output bit */
    uint64_t seed;
} lowp_gpu_bench_opts;

/* 32 query heads, 8 KV heads, head dim 128, page size 16, 30 reps (the shapes). */
lowp_gpu_bench_opts lowp_gpu_bench_defaults(void);

/* Runs the grid; one CSV row per (kernel, format, batch, ctx) to csv (may be NULL):
 *   kernel,format,batch,ctx,median_us,p10_us,p90_us,bytes,gbps,read_gbps,ratio,
 *   sm_mhz,sm_mhz_min,sm_limited
 * (kernel "decode"; read_gbps the streaming read of the same bytes, ratio gbps/read_gbps;
 * sm_*: the SM clock sampled through NVML while the timed decode calls ran, its mean and
 * minimum in MHz and the fraction of samples under a power or thermal limit, empty when
 * NVML is not available: gpu/bench/sm_clock.h),
 * and a table for people to table (may be NULL). 0, 77 without a CUDA device, or -1 with
 * a reason. */
int lowp_gpu_bench_run(const lowp_gpu_bench_opts *o, FILE *csv, FILE *table, char *why,
                       size_t why_len);

#ifdef __cplusplus
}
#endif
#endif /* LOWP_GPU_BENCH_H */
