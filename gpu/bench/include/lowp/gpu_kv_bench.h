/* lowp/gpu_kv_bench.h: the bench of the quantize-on-write kernel (lowp_gpu_kv_write,
 * lowp/gpu_kvcache.h) behind `lowp gpu bench --kernel kv-write` (tools/cmd_gpu.c), and
 * the device-time helper the benches share. gpu/bench/kv_write_bench.cu. */
#ifndef LOWP_GPU_KV_BENCH_H
#define LOWP_GPU_KV_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cuda_runtime_api.h>

#include "lowp/block.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Keep the device busy for about us microseconds on stream s (a one-thread kernel that
 * spins on the SM clock, calibrated against CUDA events on first use). Enqueued before an
 * event pair, it lets the host finish a call's checks and launch while the device spins,
 * so that the pair times the device work alone. 0, or -1 with why. */
int lowp_gpu_spin_us(cudaStream_t s, double us, char *why, size_t why_len);

typedef struct lowp_gpu_kv_bench_opts {
    lowp_block_format formats[8];
    uint64_t tokens[16], dims[8];
    size_t n_formats, n_tokens, n_dims, heads, page_size, reps;
} lowp_gpu_kv_bench_opts;

/* nvfp4 mxfp4 mxfp8 fp8_e4m3 bf16; tokens 1, 8, 64, 512, 4096, 32768; dims 64, 128, 256,
 * 512; 8 KV heads; page size 16; 20 reps. */
lowp_gpu_kv_bench_opts lowp_gpu_kv_bench_defaults(void);

/* Times lowp_gpu_kv_write of K and V (BF16 in, NHD cache, contiguous slots; NVFP4 with
 * recipe sglang-kv, MX ocp) on every (format, tokens, dim) shape: the call (host checks
 * and launch included), the device time alone (lowp_gpu_spin_us first) and a
 * cudaMemcpyAsync of as many bytes read + written, each the median of reps. A table to
 * log, a CSV row a shape to csv (NULL: none). 0, 77 no GPU, -1 a failure (why). */
int lowp_gpu_kv_bench_run(const lowp_gpu_kv_bench_opts *o, FILE *csv, FILE *log, char *why,
                          size_t why_len);

#ifdef __cplusplus
}
#endif
#endif /* LOWP_GPU_KV_BENCH_H */
