/* tools/bench_quantize.c: `lowp bench quantize`: block quantization throughput of
 * binary32 tensors beside memcpy of the same tensor, measured in the same run.
 *
 * Bandwidth counts the bytes a kernel must move: memcpy reads and writes 4 bytes per
 * element; a quantizer reads 4 and writes the packed codes and scales (NVFP4: 0.5 +
 * 1/16). The ratio "of memcpy" compares those byte rates at the same thread count.
 *
 * NVFP4 and MXFP4 have a fused kernel per instruction set (ref/block/src/block_fast.c), chosen at
 * run time; each row names the path it measured, and by default every path this CPU runs
 * is measured (the ISA limit of block_internal.h selects one). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"
#include "lowp/block.h"
#include "lowp/cases.h"
#include "block_internal.h" /* ref/block/internal, named in tools/CMakeLists.txt */

typedef struct {
    lowp_block_format f;
    lowp_recipe r;
    lowp_global_scale gs;
    const float *x;
    size_t n;
    uint8_t *codes, *scales;
    float *copy;
} quant_job;

static void run_quantize(void *arg)
{
    quant_job *j = arg;
    lowp_block_quantize(j->f, j->r, j->gs, 0, j->x, j->n, j->codes, j->scales, NULL, NULL, 0);
}

static void run_memcpy(void *arg)
{
    quant_job *j = arg;
    /* one memcpy per thread-sized slice, so the parallel column measures the same thing */
    long parts = 64;
    size_t per = (j->n + (size_t)parts - 1) / (size_t)parts;
#pragma omp parallel for schedule(static)
    for (long p = 0; p < parts; p++) {
        size_t lo = (size_t)p * per;
        if (lo < j->n)
            memcpy(j->copy + lo, j->x + lo, (j->n - lo < per ? j->n - lo : per) * sizeof(float));
    }
}

int lowp_bench_quantize(int argc, char **argv)
{
    size_t n = (size_t)1 << 24;
    int threads = lowp_bench_max_threads(), reps = 7;
    uint64_t seed = LOWP_DEFAULT_SEED;
    int only_path = -1; /* -1: every path this CPU runs */
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--n") == 0)
            n = (size_t)lowp_bench_parse_count("--n", v, 1024, (unsigned long long)1 << 30), i++;
        else if (strcmp(argv[i], "--threads") == 0)
            threads = (int)lowp_bench_parse_count("--threads", v, 1, 1024), i++;
        else if (strcmp(argv[i], "--reps") == 0)
            reps = (int)lowp_bench_parse_count("--reps", v, 1, 101), i++;
        else if (strcmp(argv[i], "--seed") == 0)
            seed = lowp_bench_parse_count("--seed", v, 0, ~0ull), i++;
        else if (strcmp(argv[i], "--path") == 0) {
            if (v == NULL)
                lowp_cli_fail("bench quantize: --path needs a value (scalar, avx2, avx512)");
            for (int k = LOWP_BLOCK_ISA_SCALAR; k <= LOWP_BLOCK_ISA_AVX512; k++)
                if (strcmp(v, lowp_block_fast_isa_name(k)) == 0)
                    only_path = k;
            if (only_path < 0)
                lowp_cli_fail("bench quantize: --path '%s': expected scalar, avx2 or avx512", v);
            if (only_path > lowp_block_fast_isa_supported())
                lowp_cli_fail("bench quantize: --path %s: this CPU does not run it (best: %s)", v,
                              lowp_block_fast_isa_name(lowp_block_fast_isa_supported()));
            i++;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            puts("usage: lowp bench quantize [--n N] [--threads T] [--reps R] [--seed S] [--path P]\n"
                 "block-quantizes N binary32 values (default 2^24, Gaussian) with every recipe, on one\n"
                 "thread and on T, beside memcpy of the same buffer; prints GB/s and the ratio.\n"
                 "NVFP4 and MXFP4 are measured on every path this CPU runs (scalar = the generic\n"
                 "code, avx2, avx512: the fused kernels), or only on P; other formats are scalar.");
            return LOWP_EXIT_OK;
        } else
            lowp_cli_fail("bench quantize: unknown argument '%s'", argv[i]);
    }
    n -= n % 32;
    float *x = malloc(n * sizeof *x), *copy = malloc(n * sizeof *copy);
    uint8_t *codes = malloc(2 * n), *scales = malloc(n / 16 + 1);
    if (x == NULL || copy == NULL || codes == NULL || scales == NULL)
        lowp_cli_fail("bench quantize: out of memory for %zu values", n);
    /* Gaussian by Box-Muller from splitmix64: realistic block amax spread. */
    uint64_t st = seed;
    for (size_t i = 0; i < n; i += 2) {
        double u1 = ((double)(lowp_splitmix64(&st) >> 11) + 0.5) * 0x1p-53;
        double u2 = (double)(lowp_splitmix64(&st) >> 11) * 0x1p-53;
        double r = sqrt(-2.0 * log(u1));
        x[i] = (float)(r * cos(6.283185307179586 * u2));
        x[i + 1] = (float)(r * sin(6.283185307179586 * u2));
    }
    memset(copy, 0, n * sizeof *copy);
    memset(codes, 0, 2 * n);

    char machine[512];
    lowp_machine_description(machine, sizeof machine);
    int best = lowp_block_fast_isa_supported();
    /* the x86-64 vector extensions this CPU (and OS) runs; __builtin_cpu_supports takes
     * only string literals */
    char isa[160];
    lowp_cli_cpu_isa(isa, sizeof isa);
    printf("lowp bench quantize: %zu binary32 values (%.0f MiB), Gaussian, seed 0x%llx, median of %d\n"
           "machine: %s\n"
           "ISA: %s; fused NVFP4/MXFP4 kernel: %s\n\n",
           n, (double)n * 4 / 1048576.0, (unsigned long long)seed, reps, machine,
           isa, lowp_block_fast_isa_name(best));
    quant_job j = {LOWP_NVFP4, LOWP_RECIPE_EXACT, {1, 1}, x, n, codes, scales, copy};
    double mem_gbs[2];
    int tcount[2] = {1, threads};
    for (int t = 0; t < 2; t++) {
        lowp_bench_set_threads(tcount[t]);
        double s = lowp_bench_median(run_memcpy, &j, reps);
        mem_gbs[t] = 8.0 * (double)n / s / 1e9;
    }
    printf("%-9s %-10s %-7s | %9s %9s %9s | %9s %9s %9s\n", "format", "recipe", "path", "1 thread",
           "GB/s", "of memcpy", "threads", "GB/s", "of memcpy");
    printf("%-9s %-10s %-7s | %9s %9.2f %8.0f%% | %9d %9.2f %8.0f%%\n", "memcpy", "-", "-", "",
           mem_gbs[0], 100.0, threads, mem_gbs[1], 100.0);
    int saved_limit = lowp_block_fast_limit_isa(LOWP_BLOCK_ISA_AVX512);
    for (int f = 0; f < LOWP_BLOCK_FORMAT_COUNT; f++)
        for (int r = 0; r < LOWP_RECIPE_COUNT; r++)
            for (int path = best; path >= LOWP_BLOCK_ISA_SCALAR; path--) {
            if (lowp_recipe_check((lowp_block_format)f, (lowp_recipe)r, NULL, 0))
                continue;
            /* only NVFP4 and MXFP4 have fused kernels; the rest is measured once, scalar */
            int fused = f == LOWP_NVFP4 || f == LOWP_MXFP4;
            if (!fused && path != LOWP_BLOCK_ISA_SCALAR)
                continue;
            if (fused && only_path >= 0 && path != only_path)
                continue;
            lowp_block_fast_limit_isa(path);
            j.f = (lowp_block_format)f;
            j.r = (lowp_recipe)r;
            j.gs = lowp_recipe_global_scale(j.f, j.r, 4.5f);
            double bytes = 4.0 * (double)n + (double)lowp_block_code_bytes(j.f, n) +
                           (lowp_block_has_scales(j.f) ? (double)(n / lowp_block_size(j.f)) : 0.0);
            double gbs[2];
            for (int t = 0; t < 2; t++) {
                lowp_bench_set_threads(tcount[t]);
                gbs[t] = bytes / lowp_bench_median(run_quantize, &j, reps) / 1e9;
            }
            printf("%-9s %-10s %-7s | %9s %9.2f %8.0f%% | %9d %9.2f %8.0f%%\n",
                   lowp_block_format_name(j.f), lowp_recipe_name(j.r), lowp_block_fast_isa_name(path),
                   "", gbs[0], 100.0 * gbs[0] / mem_gbs[0], threads, gbs[1],
                   100.0 * gbs[1] / mem_gbs[1]);
        }
    lowp_block_fast_limit_isa(saved_limit);
    printf("\nGB/s counts bytes read plus bytes written (memcpy: 8 per value; NVFP4: 4 + 0.5625).\n");
    free(x);
    free(copy);
    free(codes);
    free(scales);
    return LOWP_EXIT_OK;
}
