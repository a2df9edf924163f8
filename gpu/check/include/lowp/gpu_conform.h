/* lowp/gpu_conform.h: the conformance run of the GPU decode kernel (`lowp gpu conform`,
 * gpu/check/decode_check.c).
 *
 * A case is one decode problem: one sequence's query against its pages. Cases are drawn
 * in groups that share a cache configuration (format, layout, scale orders and scope,
 * heads, group ratio, head dims, page size) and run as one batched launch, like a
 * serving step. Each configuration is drawn at random from: formats bf16, fp8-e4m3,
 * fp8-e5m2, nvfp4, mxfp4; KV heads 1..20 (incl. 12, 20); group ratio 1..16 (incl. 5, 6,
 * 12); qk_dim, vo_dim in {64, 128, 192, 256, 512}, often different (after broad_cases
 * cases, small configurations: heads <= 4, group <= 6, dims 64/128, lengths <= 128, so that 10^5 cases
 * per format fit a few minutes of CPU emulation); page sizes 1..64;
 * NHD/HND; linear or 4-token-interleaved NVFP4 scales; per-tensor or per-head global
 * scales; lengths from 1 up (a few configurations reach 128K tokens); pages shuffled;
 * unused slots left poisoned (0xFF = NaN); workspace and output poisoned with NaN
 * before every launch. Content: tokens quantized by lowp's CPU writer from K-like /
 * V-like data, or raw random codes with zero blocks, saturated blocks, extreme scales,
 * and (in the adversarial share) NaN / Inf codes and queries.
 *
 * Checks per case:
 *   1. bit-exact: every output BF16 of the kernel equals lowp_gpu_decode_emulate's;
 *   2. accuracy (cases whose inputs are finite): |gpu - exact| <= bound for every output,
 *      exact = binary64 attention on the exactly dequantized cache, and bound the
 *      first-order bound derived in gpu/check/conform.c (bf16 rounding of P and of the output,
 *      MMA truncation of the scores, exp2_sw, binary32 sums), with its worst ratio.
 */
#ifndef LOWP_GPU_CONFORM_H
#define LOWP_GPU_CONFORM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

struct lowp_gpu_conform_unit;

typedef struct lowp_gpu_conform_opts {
    size_t cases_per_format; /* exactly this many cases for each format, the long
                              * configurations' included; the same cases on any
                              * number of threads */
    size_t broad_cases;      /* of them, from the broad configurations (the rest small) */
    size_t long_configs;     /* configurations per format with contexts up to max_ctx */
    size_t max_ctx;          /* longest context of the long configurations */
    uint64_t seed;
    int threads;             /* emulator threads, 0 = OpenMP default */
    const char *formats;     /* comma list, NULL = all five */
    int emulator_only;       /* no GPU: check the emulator against the bound (self-test) */
    /* Sharding (tools/shard.h): with shard_n > 1 only the units u with u mod shard_n ==
     * shard_k run (0-based). A unit is one configuration, numbered over the formats in run
     * order (per format: its long configurations, then the plan); the plan is drawn whole
     * in every shard, so a unit's cases are the same in any shard. on_unit (may be NULL)
     * receives every unit that ran, in increasing order, after the run. */
    size_t shard_k, shard_n;
    void (*on_unit)(void *arg, const struct lowp_gpu_conform_unit *u);
    void *unit_arg;
} lowp_gpu_conform_opts;

/* What one unit (configuration) gave: its format (0..4: bf16 fp8_e4m3 fp8_e5m2 nvfp4
 * mxfp4), whether it is a long or broad configuration and its planned cases, and its
 * counts; first / ref_first describe its first mismatch / output outside the bound ("" if
 * none). Deterministic: no times. */
typedef struct lowp_gpu_conform_unit {
    size_t unit;
    int format, broad;
    size_t planned;
    size_t cases, configs, outputs, mism_cases, mism_out, nonfinite_cases, ref_cases, ref_outside;
    double ref_worst;
    char first[512], ref_first[256];
} lowp_gpu_conform_unit;

/* 10^5 cases per format (6000 from broad configurations), 2 long configurations of up
 * to 128K tokens, LOWP_DEFAULT_SEED. */
lowp_gpu_conform_opts lowp_gpu_conform_defaults(void);

typedef struct lowp_gpu_conform_result {
    size_t cases, configs, outputs;
    size_t mismatched_cases, mismatched_outputs; /* check 1 */
    size_t ref_cases, ref_outside;               /* check 2 */
    double worst_ratio;                          /* max |gpu - exact| / bound */
    double seconds;
    size_t units;                                /* configurations of the whole run, all shards */
} lowp_gpu_conform_result;

/* Runs the conformance cases; writes a markdown report to report (may be NULL) and a
 * progress line per format to log (may be NULL). Returns 0 when it ran (look at the
 * result for mismatches), 77 when there is no CUDA device, -1 with a reason otherwise. */
int lowp_gpu_conform_run(const lowp_gpu_conform_opts *o, FILE *report, FILE *log,
                         lowp_gpu_conform_result *res, char *why, size_t why_len);

/* The report and result of a whole run from its units (all of them, in increasing unit
 * order: a merge of the shards' on_unit records), with no device or times: the same
 * bytes whatever the shards ran on. rep may be NULL. Returns 0, or -1 with a reason. */
int lowp_gpu_conform_report(FILE *rep, const lowp_gpu_conform_opts *o,
                            const lowp_gpu_conform_unit *units, size_t n,
                            lowp_gpu_conform_result *res, char *why, size_t why_len);

#ifdef __cplusplus
}
#endif
#endif /* LOWP_GPU_CONFORM_H */
