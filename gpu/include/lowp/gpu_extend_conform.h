/* lowp/gpu_extend_conform.h: the conformance run of the GPU extend / prefill attention kernel
 * (lowp/gpu_extend.h) against its CPU emulator (bit for bit) and binary64 attention (within
 * the bound of lowp/attn_gpu_extend.h), and the bench of that kernel on SGLang's shapes.
 * Behind `lowp gpu conform --kernel extend|prefill` and `lowp gpu bench --kernel
 * extend|prefill` (tools/cmd_gpu.c); gpu/check/extend_check.c and gpu/bench/extend_bench.c
 * say what the cases and the timings are.
 */
#ifndef LOWP_GPU_EXTEND_CONFORM_H
#define LOWP_GPU_EXTEND_CONFORM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Kernel bits: the initial prefill (prefix_len NULL, path PREFILL) and the extend. */
enum { LOWP_GPU_EXTEND_KIND_PREFILL = 1, LOWP_GPU_EXTEND_KIND_EXTEND = 2 };

typedef struct lowp_gpu_extend_conform_opts {
    /* short case indices 0..cases-1 and long ones 0..long_cases-1: index i is a prefill
     * when i is even, an extend when odd; only the kinds in `kinds` run (a case is the same
     * whichever others run). */
    size_t cases, long_cases;
    size_t first;             /* short cases first..cases-1 run (0: all): a run split across
                               * calls, each part its own report */
    size_t ws_cases, ws_long; /* workspace-path cases (extend only) */
    uint64_t seed;
    int kinds;                /* LOWP_GPU_EXTEND_KIND_* bits, not 0 */
    int emulator_only;        /* no GPU: the emulator held to the bound alone */
    int small;                /* one small extend case (for compute-sanitizer) */
    long long only;           /* >= 0: short case `only` alone */
    int threads;              /* OpenMP threads for the CPU side; 0 = OpenMP's default */
} lowp_gpu_extend_conform_opts;

/* 2 x 10^5 short and 8 long cases (half each kind), 2000 + 2 workspace cases; --quick's
 * sizes are lowp_gpu_extend_conform_quick's. */
lowp_gpu_extend_conform_opts lowp_gpu_extend_conform_defaults(void);
void lowp_gpu_extend_conform_quick(lowp_gpu_extend_conform_opts *o);

typedef struct lowp_gpu_extend_conform_result {
    /* [0] prefill, [1] extend */
    size_t cases[2], outputs_compared[2], mismatched[2], ref_cases[2], ref_outside[2],
        ref_skipped[2];
    double worst[2];
    size_t ws_cases, ws_bytes, ws_bad;
    size_t bad; /* mismatched + ref_outside + ws_bad: 0 iff the run passed */
    double seconds;
} lowp_gpu_extend_conform_result;

/* Runs the cases; writes the markdown report to rep (NULL: none) and the progress and
 * failure lines to log. 0 (r->bad says whether it passed), 77 no GPU and not
 * emulator_only, -1 a failure (why: one sentence). */
int lowp_gpu_extend_conform_run(const lowp_gpu_extend_conform_opts *o, FILE *rep, FILE *log,
                                lowp_gpu_extend_conform_result *r, char *why, size_t why_len);

typedef struct lowp_gpu_extend_bench_opts {
    uint64_t chunks[16], prefixes[16]; /* chunk lengths 1..65536; prefixes 0..2^21 */
    size_t n_chunks, n_prefixes, reps, batch, q_heads, kv_heads, dim;
} lowp_gpu_extend_bench_opts;

/* chunks 512..8192, prefixes 0, 4K, 16K, 32K, 128K, 10 reps, batch 1, 32 q / 8 kv heads,
 * dim 128. */
lowp_gpu_extend_bench_opts lowp_gpu_extend_bench_defaults(void);

/* Times every (chunk, prefix) shape; the table to log, a CSV row per shape to csv (NULL:
 * none). 0, 77 no GPU, -1 a failure (why). */
int lowp_gpu_extend_bench_run(const lowp_gpu_extend_bench_opts *o, FILE *csv, FILE *log,
                              char *why, size_t why_len);

#ifdef __cplusplus
}
#endif
#endif /* LOWP_GPU_EXTEND_CONFORM_H */
