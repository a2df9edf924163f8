/* tools/cmd_gpu.c: `lowp gpu`: the GPU kernels and their CPU emulators.
 *
 *   lowp gpu conform [--quick] [--cases N] [--broad N] [--long N] [--max-ctx N] [--formats a,b]
 *                    [--seed S] [--report FILE] [--emulator-only]
 *       every GPU decode case against its emulator bit for bit and against binary64
 *       attention within the derived bound (lowp/gpu_conform.h); --emulator-only runs the
 *       emulator against the bound on any machine. --cases N: exactly N cases per format
 *       (the --long configurations' included), the same ones on any thread count. Exit 0
 *       all pass, 1 a failure. --shard K/N [--result F.json] runs configurations u with
 *       u mod N = K (tools/shard.h); --merge A.json ... [--report R] [--result F] writes
 *       the report and result of the whole run from the shards' results.
 *   lowp gpu conform --kernel extend|prefill|all [--quick] [--cases N] [--long N] [--ws N]
 *                    [--ws-long N] [--seed S] [--threads N] [--report FILE] [--emulator-only]
 *                    [--small] [--only I] [--from I]
 *       --kernel decode (the default) is the run above; extend / prefill (a list: extend,prefill)
 *       run the extend kernel's cases (lowp/gpu_extend_conform.h, gpu/check/extend_check.c):
 *       N per kernel (default 10^5 short and 4 long), bit for bit against its emulator and
 *       within the derived bound of binary64 attention, plus the workspace path's cases
 *       (--ws, --ws-long; extend only). all: decode, then extend and prefill, with the
 *       options both take (--quick --cases --seed --emulator-only).
 *   lowp gpu attn --q Q --k K --v V --kv-format F --out O.npy [--emulate] [options]
 *       `lowp attn`'s decode on the GPU: K and V (rounded to BF16, the kernel's input type)
 *       are written into a paged cache by the quantize-on-write kernel, the query (rounded
 *       to BF16) attends in the decode kernel; O is its BF16 output as float32
 *       [1, num_q_heads, vo_dim]. --emulate runs the CPU emulators of both kernels instead
 *       (any machine): the two files are identical byte for byte.
 *   lowp gpu attn --path extend|prefill --q Q --k K --v V --kv-format F --out O.npy
 *                 [--emulate] [--chunk-start C] [--recipe R] [--k-scale G] [--v-scale G]
 *                 [--sm-scale S] [--check-against A.npy]
 *       `lowp attn --path extend|prefill` on the GPU's extend kernel (lowp/gpu_extend.h):
 *       Q [q_len, num_q_heads, qk_dim] are the chunk's queries at positions ctx - q_len ..
 *       ctx - 1; the FP8 workspace holds the path's values (lowp_kv_path_run: the NVFP4
 *       prefix dequantized and cast to E4M3 for extend, the chunk's BF16 K/V cast to E4M3);
 *       O is the kernel's BF16 output as float32 [q_len, num_q_heads, vo_dim]. --emulate
 *       runs lowp_gpu_extend_emulate instead (any machine; identical bytes). --check-against
 *       A.npy (`lowp attn --path ...`'s output, exact attention on the same path values):
 *       every output must lie within the kernel's derived bound (lowp/attn_gpu_extend.h) of
 *       it, plus A's own binary32 rounding; exit 1 otherwise. The workspace is built on the
 *       host from the CPU data-path model (the GPU dequantize kernel is not in this build).
 *   lowp gpu bench [--formats a,b] [--batch a,b] [--ctx a,b] [--q-heads N] [--kv-heads N]
 *                  [--head-dim N] [--page-size N] [--layout nhd|hnd] [--reps N]
 *                  [--max-gb X] [--chunk N] [--settle-ms-per-gb X] [--stages N] [--warps N]
 *                  [--csv FILE]
 *       decode time and bandwidth beside a streaming read (lowp/gpu_bench.h). --stages
 *       (2..8) and --warps (1..4) size the decode's shared-memory ring (at most; the
 *       default without them), which changes its speed and never an output bit.
 *   lowp gpu bench --kernel extend|prefill [--chunks a,b] [--prefixes a,b] [--reps N]
 *                  [--batch B] [--q-heads N] [--kv-heads N] [--head-dim N] [--csv FILE]
 *       the extend kernel's time and TFLOP/s on SGLang's shapes (gpu/bench/extend_bench.c):
 *       prefill rows have prefix 0, extend rows prefix > 0 (with the workspace fill and the
 *       chunk's quantize-on-write timed beside them).
 *   lowp gpu bench --kernel kv-write [--formats a,b] [--tokens a,b] [--dims a,b] [--heads N]
 *                  [--page-size N] [--reps N] [--csv FILE]
 *       the quantize-on-write kernel (lowp_gpu_kv_write) from 1 to 32K tokens, head dims
 *       64..512: the call, its device time alone and a copy of the same bytes
 *       (gpu/bench/kv_write_bench.cu).
 *
 * Built without CUDA, only `lowp gpu attn --emulate` and `lowp gpu conform
 * --emulator-only` work; the rest says so (exit 2). Without a GPU they exit 77. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gpu_rank.h"
#include "shard.h"
#include "lowp/attn_gpu_emul.h"
#include "lowp/attn_gpu_extend.h"
#include "lowp/attn_sweep.h"
#include "lowp/block.h"
#include "lowp/calib.h"
#include "lowp/format.h"
#include "lowp/kvcache.h"
#ifdef LOWP_HAVE_GPU
#include <cuda_runtime_api.h>

#include "lowp/gpu_bench.h"
#include "lowp/gpu_conform.h"
#include "lowp/gpu_decode.h"
#include "lowp/gpu_extend.h"
#include "lowp/gpu_extend_conform.h"
#include "lowp/gpu_kvcache.h"
#include "lowp/gpu_kv_bench.h"
#endif

LOWP_COMMAND_DEFINE(gpu, "GPU kernels: conform (vs their emulators), attn (decode), bench");

static void gpu_usage(FILE *f)
{
    fputs("usage: lowp gpu conform [--quick] [--cases N] [--broad N] [--long N] [--max-ctx N] [--formats a,b]\n"
          "                        [--seed S] [--report FILE] [--emulator-only]\n"
          "                        [--shard K/N | --shard auto] [--result FILE.json]\n"
          "       lowp gpu conform --kernel extend|prefill|all [--quick] [--cases N] [--long N] [--ws N]\n"
          "                        [--ws-long N] [--seed S] [--threads N] [--report FILE] [--emulator-only]\n"
          "                        [--small] [--only I] [--from I]\n"
          "       lowp gpu conform --merge A.json B.json ... [--result FILE.json] [--report FILE]\n"
          "       lowp gpu attn --q Q --k K --v V --kv-format F --out O.npy [--emulate]\n"
          "                     [--recipe R] [--k-scale G] [--v-scale G] [--sm-scale S]\n"
          "                     [--page-size N] [--layout nhd|hnd] [--k-sf-order O] [--v-sf-order O]\n"
          "                     [--chunk N]\n"
          "       lowp gpu attn --path extend|prefill --q Q --k K --v V --kv-format F --out O.npy\n"
          "                     [--emulate] [--chunk-start C] [--recipe R] [--k-scale G] [--v-scale G]\n"
          "                     [--sm-scale S] [--check-against A.npy]\n"
          "       lowp gpu bench [--formats a,b] [--batch a,b] [--ctx a,b] [--q-heads N] [--kv-heads N]\n"
          "                      [--head-dim N] [--page-size N] [--layout nhd|hnd] [--reps N]\n"
          "                      [--max-gb X] [--chunk N] [--settle-ms-per-gb X] [--stages N] [--warps N]\n"
          "                      [--csv FILE]\n"
          "       lowp gpu bench --kernel extend|prefill [--chunks a,b] [--prefixes a,b] [--reps N]\n"
          "                      [--batch B] [--q-heads N] [--kv-heads N] [--head-dim N] [--csv FILE]\n"
          "       lowp gpu bench --kernel kv-write [--formats a,b] [--tokens a,b] [--dims a,b]\n"
          "                      [--heads N] [--page-size N] [--reps N] [--csv FILE]\n"
          "  Q [1, num_q_heads, qk_dim], K [ctx, num_kv_heads, qk_dim], V [ctx, num_kv_heads, vo_dim]:\n"
          "  a decode (one query token at position ctx - 1); with --path extend|prefill, Q [q_len, ...] is\n"
          "  the chunk at positions ctx - q_len .. ctx - 1 (extend: an nvfp4 cache). Formats: bf16 fp8_e4m3 fp8_e5m2 nvfp4 mxfp4;\n"
          "  head dims multiples of 64 up to 512; up to 16 query heads per KV head.\n"
          "  The GPU: local rank mod visible devices under MPI / Slurm (OMPI_COMM_WORLD_LOCAL_RANK,\n"
          "  MPI_LOCALRANKID, SLURM_LOCALID), LOWP_GPU_DEVICE=N over it; lowp rank --devices D shows it.\n",
          f);
}

#ifndef LOWP_HAVE_GPU
static void no_cuda(const char *what)
{
    lowp_cli_fail("lowp gpu %s: this lowp was built without CUDA (nvcc was not found at configure "
                  "time)", what);
}
#endif

#ifdef LOWP_HAVE_GPU
/* The visible CUDA devices (0 when there are none, or CUDA cannot say), with the rank's
 * device selected (tools/gpu_rank.h: local rank mod count, or LOWP_GPU_DEVICE) before any
 * kernel or allocation, and the choice said once on stderr. Every GPU path of `lowp gpu`
 * calls this first instead of cudaGetDeviceCount; the emulators do not (no device). */
static int gpu_devices(void)
{
    static int said;
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess)
        return 0;
    lowp_gpu_rank r;
    lowp_gpu_rank_choose(ndev, &r);
    if (r.device < 0)
        return ndev;
    cudaError_t e = cudaSetDevice(r.device);
    if (e != cudaSuccess)
        lowp_cli_fail("cudaSetDevice(%d): %s", r.device, cudaGetErrorString(e));
    if (!said) {
        struct cudaDeviceProp prop;
        char line[384];
        lowp_gpu_rank_line(&r, ndev, cudaGetDeviceProperties(&prop, r.device) == cudaSuccess ? prop.name : NULL,
                           line, sizeof line);
        fprintf(stderr, "%s\n", line);
        said = 1;
    }
    return ndev;
}
#endif

/* ---- conform ------------------------------------------------------------------------ */
#ifdef LOWP_HAVE_GPU
/* Results (tools/shard.h): a unit is one configuration (lowp_gpu_conform_unit). */
static json_t *conform_args(const lowp_gpu_conform_opts *o)
{
    json_t *a = json_object();
    if (a == NULL)
        lowp_cli_fail("out of memory");
    char b[32];
    snprintf(b, sizeof b, "0x%llx", (unsigned long long)o->seed);
    lowp_json_set_u64(a, "cases", o->cases_per_format);
    lowp_json_set_u64(a, "broad", o->broad_cases);
    lowp_json_set_u64(a, "long", o->long_configs);
    lowp_json_set_u64(a, "max_ctx", o->max_ctx);
    lowp_json_set_str(a, "seed", b);
    lowp_json_set_str(a, "formats", o->formats ? o->formats : "");
    lowp_json_set_u64(a, "emulator_only", (uint64_t)o->emulator_only);
    return a;
}

#define UNIT_COUNTS(X)                                                                             \
    X(planned) X(cases) X(configs) X(outputs) X(mism_cases) X(mism_out) X(nonfinite_cases)         \
        X(ref_cases) X(ref_outside)

static void unit_put(void *arg, const lowp_gpu_conform_unit *u)
{
    json_t *o = lowp_result_unit(arg, u->unit);
    lowp_json_set_u64(o, "format", (uint64_t)u->format);
    lowp_json_set_u64(o, "broad", (uint64_t)u->broad);
#define PUT(f) lowp_json_set_u64(o, #f, u->f);
    UNIT_COUNTS(PUT)
#undef PUT
    lowp_json_set_f64(o, "ref_worst", u->ref_worst);
    lowp_json_set_str(o, "first", u->first);
    lowp_json_set_str(o, "ref_first", u->ref_first);
}

static void unit_get(const json_t *o, size_t index, lowp_gpu_conform_unit *u)
{
    memset(u, 0, sizeof *u);
    u->unit = index;
    u->format = (int)lowp_json_u64(o, "format");
    u->broad = lowp_json_u64(o, "broad") != 0;
#define GET(f) u->f = (size_t)lowp_json_u64(o, #f);
    UNIT_COUNTS(GET)
#undef GET
    u->ref_worst = lowp_json_f64(o, "ref_worst");
    snprintf(u->first, sizeof u->first, "%s", lowp_json_str(o, "first"));
    snprintf(u->ref_first, sizeof u->ref_first, "%s", lowp_json_str(o, "ref_first"));
}
#endif

#ifdef LOWP_HAVE_GPU
/* The end of a run of `lowp gpu <cmd>` (its library's status rc, its reason why): 77 (no
 * GPU) says so, with hint, and is returned; any other failure is fatal (exit 2, out left
 * uncommitted); else out (NULL: none) is committed and 0 returned. */
static int gpu_run_end(const char *cmd, int rc, FILE *out, const char *why, const char *hint)
{
    if (rc == 77) {
        fprintf(stderr, "lowp gpu %s: %s%s\n", cmd, why, hint);
        return 77;
    }
    if (rc)
        lowp_cli_fail("lowp gpu %s: %s", cmd, why);
    if (out)
        lowp_out_commit(out);
    return 0;
}

/* A bench's run once its options are parsed: no GPU is said before the CSV (csv_path, or
 * none) is opened, so no temporary file is left behind; then run(opts, csv, stdout, why)
 * and gpu_run_end. */
typedef int (*gpu_bench_fn)(const void *opts, FILE *csv, FILE *log, char *why, size_t why_len);
static int gpu_bench_end(const char *csv_path, gpu_bench_fn run, const void *opts)
{
    if (gpu_devices() == 0)
        return gpu_run_end("bench", 77, NULL, "no CUDA device", "");
    FILE *csv = csv_path ? lowp_out_open(csv_path, 0) : NULL;
    char why[512] = "";
    int rc = run(opts, csv, stdout, why, sizeof why);
    return gpu_run_end("bench", rc, csv, why, "");
}

static int run_bench_decode(const void *o, FILE *csv, FILE *log, char *why, size_t n)
{
    return lowp_gpu_bench_run(o, csv, log, why, n);
}

static int run_bench_extend(const void *o, FILE *csv, FILE *log, char *why, size_t n)
{
    return lowp_gpu_extend_bench_run(o, csv, log, why, n);
}

static int run_bench_kv_write(const void *o, FILE *csv, FILE *log, char *why, size_t n)
{
    return lowp_gpu_kv_bench_run(o, csv, log, why, n);
}
#endif

static int gpu_conform_decode(int argc, char **argv)
{
#ifdef LOWP_HAVE_GPU
    lowp_gpu_conform_opts o = lowp_gpu_conform_defaults();
    const char *report = NULL, *result = NULL;
    int merge = 0, case_opts = 0;
    lowp_shard shard = {0, 1};
    char **files = calloc((size_t)argc + 1, sizeof *files);
    size_t n_files = 0;
    if (files == NULL)
        lowp_cli_fail("out of memory");
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--shard")) {
            lowp_cli_parse_shard(a, lowp_cli_option_value(argc, argv, &i), &shard.k, &shard.n);
            continue;
        } else if (!strcmp(a, "--result")) {
            result = lowp_cli_option_value(argc, argv, &i);
            lowp_out_check("--result", result);
            continue;
        } else if (!strcmp(a, "--merge")) {
            merge = 1;
            continue;
        } else if (merge && a[0] != '-') {
            files[n_files++] = argv[i];
            continue;
        }
        case_opts |= strcmp(a, "--report") != 0;
        if (!strcmp(a, "--quick")) {
            o.cases_per_format = 2000;
            o.broad_cases = 1000;
            o.long_configs = 1;
            o.max_ctx = 32768;
        } else if (!strcmp(a, "--emulator-only"))
            o.emulator_only = 1;
        else if (!strcmp(a, "--cases"))
            o.cases_per_format = lowp_cli_parse_count(a, lowp_cli_option_value(argc, argv, &i), 0);
        else if (!strcmp(a, "--broad"))
            o.broad_cases = lowp_cli_parse_count(a, lowp_cli_option_value(argc, argv, &i), 1);
        else if (!strcmp(a, "--long"))
            o.long_configs = lowp_cli_parse_count(a, lowp_cli_option_value(argc, argv, &i), 1);
        else if (!strcmp(a, "--max-ctx"))
            o.max_ctx = lowp_cli_parse_count(a, lowp_cli_option_value(argc, argv, &i), 0);
        else if (!strcmp(a, "--formats"))
            o.formats = lowp_cli_option_value(argc, argv, &i);
        else if (!strcmp(a, "--seed"))
            o.seed = lowp_cli_parse_seed(a, lowp_cli_option_value(argc, argv, &i));
        else if (!strcmp(a, "--report"))
            report = lowp_cli_option_value(argc, argv, &i);
        else {
            lowp_cli_fail("lowp gpu conform: unknown option '%s' (see lowp gpu --help)", a);
        }
    }
    if (merge) {
        if (case_opts || shard.n > 1 || n_files == 0)
            lowp_cli_fail(n_files == 0 ? "lowp gpu conform --merge: no result files given"
                                       : "lowp gpu conform --merge: the cases come from the results; only "
                                         "--report and --result apply");
        json_t *res = lowp_result_merge("gpu conform", files, n_files);
        const json_t *args = lowp_result_args(res);
        o.cases_per_format = (size_t)lowp_json_u64(args, "cases");
        o.broad_cases = (size_t)lowp_json_u64(args, "broad");
        o.long_configs = (size_t)lowp_json_u64(args, "long");
        o.max_ctx = (size_t)lowp_json_u64(args, "max_ctx");
        o.seed = lowp_cli_parse_seed("merge: seed", lowp_json_str(args, "seed"));
        size_t n = lowp_result_count(res);
        lowp_gpu_conform_unit *us = calloc(n ? n : 1, sizeof *us);
        if (us == NULL)
            lowp_cli_fail("out of memory");
        for (size_t u = 0; u < n; u++)
            unit_get(lowp_result_at(res, u), u, &us[u]);
        if (result != NULL)
            lowp_result_write(res, result);
        FILE *rep = report ? lowp_out_open(report, 0) : NULL;
        lowp_gpu_conform_result r;
        char why[512] = "";
        if (lowp_gpu_conform_report(rep, &o, us, n, &r, why, sizeof why))
            lowp_cli_fail("lowp gpu conform --merge: %s", why);
        if (rep)
            lowp_out_commit(rep);
        printf("lowp gpu conform --merge: %zu shard results, %zu configurations: %zu cases, %zu not "
               "bit-exact, %zu of %zu finite cases outside the bound (worst ratio %.3g)\n", n_files, n, r.cases,
               r.mismatched_cases, r.ref_outside, r.ref_cases, r.worst_ratio);
        free(us);
        free(files);
        json_decref(res);
        return r.mismatched_cases || r.ref_outside ? 1 : 0;
    }
    free(files);
    if (shard.n > 1 && result == NULL)
        lowp_cli_fail("lowp gpu conform --shard %zu/%zu: a shard writes only its result: give --result FILE",
                      shard.k, shard.n);
    if (shard.n > 1 && report != NULL)
        lowp_cli_fail("lowp gpu conform --shard: a shard writes no report (--merge writes it)");
    if (result != NULL && report != NULL)
        lowp_cli_check_distinct_outputs("--report", report, "--result", result);
    if (o.max_ctx < 16)
        lowp_cli_fail("--max-ctx must be at least 16");
    if (o.formats) {
        char buf[256];
        size_t nf = 0;
        snprintf(buf, sizeof buf, "%s", o.formats);
        for (char *t = strtok(buf, ","); t; t = strtok(NULL, ","), nf++) {
            lowp_block_format f;
            lowp_kv_config c = lowp_kv_config_default(LOWP_NVFP4, 1, 16, 1, 64, 64);
            if (lowp_block_format_parse(t, &f))
                lowp_cli_fail("--formats: unknown format '%s'", t);
            c.format = f;
            char why[256];
            if (lowp_gpu_decode_check(&c, 1, why, sizeof why))
                lowp_cli_fail("--formats: %s", why);
        }
        if (nf == 0)
            lowp_cli_fail("--formats '%s': no format named (bf16 fp8_e4m3 fp8_e5m2 nvfp4 mxfp4)",
                          o.formats);
    }
    json_t *res = NULL;
    if (result != NULL) {
        res = lowp_result_new("gpu conform", conform_args(&o), &shard, 0);
        o.on_unit = unit_put;
        o.unit_arg = res;
    }
    o.shard_k = shard.k;
    o.shard_n = shard.n;
    /* the device before the report is opened: a bad LOWP_GPU_DEVICE, or no GPU, leaves
     * no file (not even a temporary one) */
    if (!o.emulator_only && gpu_devices() == 0)
        return gpu_run_end("conform", 77, NULL, "no CUDA device", " (use --emulator-only on a machine without a GPU)");
    FILE *rep = report ? lowp_out_open(report, 0) : NULL;
    lowp_gpu_conform_result r;
    char why[512] = "";
    int rc = lowp_gpu_conform_run(&o, rep, stdout, &r, why, sizeof why);
    if (gpu_run_end("conform", rc, rep, why, " (use --emulator-only on a machine without a GPU)"))
        return 77;
    if (res != NULL) {
        json_object_set_new(res, "units", json_integer((json_int_t)r.units));
        lowp_result_write(res, result);
        json_decref(res);
    }
    printf("lowp gpu conform: %zu cases, %zu not bit-exact, %zu of %zu finite cases outside the "
           "bound (worst ratio %.3g), %.1f s\n", r.cases, r.mismatched_cases, r.ref_outside,
           r.ref_cases, r.worst_ratio, r.seconds);
    return r.mismatched_cases || r.ref_outside ? 1 : 0;
#else
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--emulator-only"))
            lowp_cli_fail("lowp gpu conform --emulator-only: the conformance driver is built with "
                          "the GPU code; this lowp was built without CUDA");
    no_cuda("conform");
    return 2;
#endif
}

/* --kernel's list (decode, extend, prefill, all, kv-write; comma-separated) as bits: 1
 * decode, LOWP_GPU_EXTEND_KIND_* shifted by one (2 prefill, 4 extend), 8 the
 * quantize-on-write kernel (bench only; `all` does not include it). */
static int parse_kernels(const char *v)
{
    char buf[128];
    int bits = 0;
    if (strlen(v) >= sizeof buf)
        lowp_cli_fail("--kernel '%s': too long", v);
    snprintf(buf, sizeof buf, "%s", v);
    for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) {
        if (!strcmp(t, "decode"))
            bits |= 1;
        else if (!strcmp(t, "prefill"))
            bits |= 2;
        else if (!strcmp(t, "extend"))
            bits |= 4;
        else if (!strcmp(t, "all"))
            bits |= 7;
        else if (!strcmp(t, "kv-write"))
            bits |= 8;
        else
            lowp_cli_fail("--kernel: '%s' is not one of decode, extend, prefill, all, kv-write", t);
    }
    if (bits == 0)
        lowp_cli_fail("--kernel '%s': no kernel named", v);
    return bits;
}

/* The kernels --kernel K names in *bits (parse_kernels' bits; 1, the decode, without it);
 * returns the other arguments, *n of them, in order (freed by the caller). */
static char **take_kernel_option(int argc, char **argv, int *bits, int *n)
{
    int kidx = -1;
    *bits = 1;
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--kernel")) {
            if (kidx >= 0)
                lowp_cli_fail("--kernel given twice (name the kernels in one list)");
            kidx = i;
            *bits = parse_kernels(lowp_cli_option_value(argc, argv, &i));
        }
    char **rest = calloc((size_t)argc + 1, sizeof *rest);
    *n = 0;
    if (rest == NULL)
        lowp_cli_fail("out of memory");
    for (int i = 0; i < argc; i++)
        if (kidx < 0 || (i != kidx && i != kidx + 1))
            rest[(*n)++] = argv[i];
    return rest;
}

/* `lowp gpu conform --kernel extend|prefill`: lowp_gpu_extend_conform_run. --cases and
 * --long count per kernel (case indices 0..2N-1, the even ones prefills, the odd ones
 * extends); the decode's --broad, --max-ctx, --formats and the sharding do not apply (the
 * kernel reads an FP8 workspace; the run is not split into units). */
/* An option's value; again: the arguments were parsed once already (--kernel all runs the
 * decode on them first), so a repeated name is not a second giving of it. */
#ifdef LOWP_HAVE_GPU
static const char *opt_value(int argc, char **argv, int *i, int again)
{
    return again ? lowp_cli_option_repeated(argc, argv, i) : lowp_cli_option_value(argc, argv, i);
}
#endif

static int gpu_conform_extend(int argc, char **argv, int kinds, int again)
{
#ifdef LOWP_HAVE_GPU
    lowp_gpu_extend_conform_opts o = lowp_gpu_extend_conform_defaults();
    const char *report = NULL;
    size_t cases = 0, longc = 0;
    int cases_set = 0, long_set = 0;
    o.kinds = kinds;
    o.cases /= 2; /* per kernel, until doubled below */
    o.long_cases /= 2;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--quick")) {
            lowp_gpu_extend_conform_quick(&o);
            o.cases /= 2;
            o.long_cases /= 2;
        } else if (!strcmp(a, "--emulator-only"))
            o.emulator_only = 1;
        else if (!strcmp(a, "--small"))
            o.small = 1;
        else if (!strcmp(a, "--cases")) {
            cases = lowp_cli_parse_count(a, opt_value(argc, argv, &i, again), 1);
            cases_set = 1;
        } else if (!strcmp(a, "--long")) {
            longc = lowp_cli_parse_count(a, opt_value(argc, argv, &i, again), 1);
            long_set = 1;
        } else if (!strcmp(a, "--ws"))
            o.ws_cases = lowp_cli_parse_count(a, opt_value(argc, argv, &i, again), 1);
        else if (!strcmp(a, "--ws-long"))
            o.ws_long = lowp_cli_parse_count(a, opt_value(argc, argv, &i, again), 1);
        else if (!strcmp(a, "--only"))
            o.only = (long long)lowp_cli_parse_u64(a, opt_value(argc, argv, &i, again), 0,
                                                   UINT32_MAX);
        else if (!strcmp(a, "--from"))
            o.first = lowp_cli_parse_u64(a, opt_value(argc, argv, &i, again), 0, (uint64_t)1 << 40);
        else if (!strcmp(a, "--seed"))
            o.seed = lowp_cli_parse_seed(a, opt_value(argc, argv, &i, again));
        else if (!strcmp(a, "--threads"))
            o.threads = (int)lowp_cli_parse_u64(a, opt_value(argc, argv, &i, again), 1, 1024);
        else if (!strcmp(a, "--report"))
            report = opt_value(argc, argv, &i, again);
        else if (!strcmp(a, "--broad") || !strcmp(a, "--max-ctx") || !strcmp(a, "--formats"))
            lowp_cli_fail("lowp gpu conform --kernel extend|prefill: %s is the decode's (the "
                          "extend kernel reads an FP8 E4M3 workspace of its own shapes)", a);
        else if (!strcmp(a, "--shard") || !strcmp(a, "--result") || !strcmp(a, "--merge"))
            lowp_cli_fail("lowp gpu conform --kernel extend|prefill: %s: the extend run is not "
                          "split into shards (run it whole)", a);
        else
            lowp_cli_fail("lowp gpu conform: unknown option '%s' (see lowp gpu --help)", a);
    }
    if (cases_set)
        o.cases = cases;
    if (long_set)
        o.long_cases = longc;
    if (o.cases > (size_t)1 << 40 || o.long_cases > (size_t)1 << 20)
        lowp_cli_fail("--cases / --long: at most 2^40 / 2^20 per kernel");
    o.cases *= 2;
    o.long_cases *= 2;
    o.first *= 2; /* --from is per kernel, like --cases */
    if (o.first > 0 && o.first >= o.cases)
        lowp_cli_fail("--from %zu: the run has %zu short cases per kernel", o.first / 2,
                      o.cases / 2);
    if (o.only >= 0 && (size_t)o.only >= o.cases)
        lowp_cli_fail("--only %lld: the run has short cases 0..%zu", o.only,
                      o.cases ? o.cases - 1 : 0);
    /* no GPU: said before the report is opened (no temporary file left behind) */
    int ndev = 0;
    if (!o.emulator_only && (ndev = gpu_devices()) == 0)
        return gpu_run_end("conform", 77, NULL, "no CUDA device",
                           " (use --emulator-only on a machine without a GPU)");
    FILE *rep = report ? lowp_out_open(report, 0) : NULL;
    lowp_gpu_extend_conform_result r;
    char why[512] = "";
    int rc = lowp_gpu_extend_conform_run(&o, rep, stdout, &r, why, sizeof why);
    if (gpu_run_end("conform", rc, rep, why, " (use --emulator-only on a machine without a GPU)"))
        return 77;
    char ws[96] = ""; /* the workspace path is the extend's */
    if (kinds & LOWP_GPU_EXTEND_KIND_EXTEND)
        snprintf(ws, sizeof ws, ", workspace path %zu cases with %zu failed checks", r.ws_cases,
                 r.ws_bad);
    printf("lowp gpu conform --kernel %s: %zu cases, %zu not bit-exact, %zu of %zu cases outside "
           "the bound (worst ratio %.3g)%s, %.1f s\n",
           kinds == 3 ? "extend,prefill" : kinds == 2 ? "extend" : "prefill",
           r.cases[0] + r.cases[1], r.mismatched[0] + r.mismatched[1],
           r.ref_outside[0] + r.ref_outside[1], r.ref_cases[0] + r.ref_cases[1],
           r.worst[0] > r.worst[1] ? r.worst[0] : r.worst[1], ws, r.seconds);
    return r.bad ? 1 : 0;
#else
    (void)kinds;
    (void)again;
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--emulator-only"))
            lowp_cli_fail("lowp gpu conform --emulator-only: the conformance driver is built with "
                          "the GPU code; this lowp was built without CUDA");
    no_cuda("conform");
    return 2;
#endif
}

/* `lowp gpu conform [--kernel K]`: without --kernel (or --kernel decode) the decode's run,
 * unchanged; extend / prefill the extend kernel's; both families (all): each in turn with
 * the options they share (--quick, --cases, --seed, --emulator-only), exit 1 if either
 * fails. */
static int gpu_conform(int argc, char **argv)
{
    int n, bits;
    char **rest = take_kernel_option(argc, argv, &bits, &n);
    int rc;
    if (bits & 8)
        lowp_cli_fail("lowp gpu conform --kernel kv-write: the quantize-on-write kernel's check "
                      "is the program lowp_gpu_kv_write_check (ctest -R gpu_kv_write)");
    if (bits == 1)
        rc = gpu_conform_decode(n, rest);
    else if (!(bits & 1))
        rc = gpu_conform_extend(n, rest, bits >> 1, 0);
    else {
        for (int i = 0; i < n; i++) {
            const char *a = rest[i];
            if (strcmp(a, "--quick") && strcmp(a, "--emulator-only") && strcmp(a, "--cases") &&
                strcmp(a, "--seed"))
                lowp_cli_fail("lowp gpu conform --kernel all: %s: only --quick, --cases, --seed "
                              "and --emulator-only apply to both kernels (run decode and "
                              "extend,prefill separately for the rest)", a);
            if (!strcmp(a, "--cases") || !strcmp(a, "--seed"))
                i++;
        }
        int r1 = gpu_conform_decode(n, rest);
        int r2 = r1 == 77 ? 77 : gpu_conform_extend(n, rest, bits >> 1, 1);
        rc = r1 == 1 || r2 == 1 ? 1 : (r1 == 77 || r2 == 77 ? 77 : 0);
    }
    free(rest);
    return rc;
}

/* ---- bench -------------------------------------------------------------------------- */
static int gpu_bench_decode(int argc, char **argv)
{
#ifdef LOWP_HAVE_GPU
    lowp_gpu_bench_opts o = lowp_gpu_bench_defaults();
    const char *csv_path = NULL;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--formats"))
            o.formats = lowp_cli_option_value(argc, argv, &i);
        else if (!strcmp(a, "--batch") || !strcmp(a, "--ctx")) {
            /* checked here, before any GPU is looked for; the bench reads at most 16 each */
            const char *v = lowp_cli_option_value(argc, argv, &i);
            uint64_t items[16];
            lowp_cli_parse_list(a, v, 1, 16, 1, (uint64_t)1 << 40, items);
            *(a[2] == 'b' ? &o.batches : &o.contexts) = v;
        }
        else if (!strcmp(a, "--q-heads"))
            o.q_heads = lowp_cli_parse_count(a, lowp_cli_option_value(argc, argv, &i), 0);
        else if (!strcmp(a, "--kv-heads"))
            o.kv_heads = lowp_cli_parse_count(a, lowp_cli_option_value(argc, argv, &i), 0);
        else if (!strcmp(a, "--head-dim"))
            o.head_dim = lowp_cli_parse_count(a, lowp_cli_option_value(argc, argv, &i), 0);
        else if (!strcmp(a, "--page-size"))
            o.page_size = lowp_cli_parse_count(a, lowp_cli_option_value(argc, argv, &i), 0);
        else if (!strcmp(a, "--layout")) {
            const char *v = lowp_cli_option_value(argc, argv, &i);
            lowp_kv_layout lay;
            if (lowp_kv_layout_parse(v, &lay))
                lowp_cli_fail("--layout: '%s' is neither nhd nor hnd", v);
            o.hnd = lay == LOWP_KV_HND;
        } else if (!strcmp(a, "--reps"))
            o.reps = (int)lowp_cli_parse_count(a, lowp_cli_option_value(argc, argv, &i), 0);
        else if (!strcmp(a, "--max-gb"))
            o.max_gb = lowp_cli_parse_positive(a, lowp_cli_option_value(argc, argv, &i));
        else if (!strcmp(a, "--settle-ms-per-gb"))
            o.settle_ms_per_gb = lowp_cli_parse_nonnegative(a, lowp_cli_option_value(argc, argv, &i));
        else if (!strcmp(a, "--chunk")) {
            o.chunk = lowp_cli_parse_count(a, lowp_cli_option_value(argc, argv, &i), 0);
            if (o.chunk % 16)
                lowp_cli_fail("--chunk %zu: a multiple of 16 tokens", o.chunk);
        } else if (!strcmp(a, "--stages")) /* the ring's bounds: lowp_gpu_decode_desc */
            o.stages = (int)lowp_cli_parse_u64(a, lowp_cli_option_value(argc, argv, &i), 2,
                                               LOWP_GPU_DECODE_MAX_STAGES);
        else if (!strcmp(a, "--warps"))
            o.warps = (int)lowp_cli_parse_u64(a, lowp_cli_option_value(argc, argv, &i), 1,
                                              LOWP_GPU_DECODE_MAX_WARPS);
        else if (!strcmp(a, "--csv"))
            csv_path = lowp_cli_option_value(argc, argv, &i);
        else {
            lowp_cli_fail("lowp gpu bench: unknown option '%s' (see lowp gpu --help)", a);
        }
    }
    if (o.reps > 100000)
        lowp_cli_fail("--reps: at most 100000");
    return gpu_bench_end(csv_path, run_bench_decode, &o);
#else
    (void)argc;
    (void)argv;
    no_cuda("bench");
    return 2;
#endif
}

/* `lowp gpu bench --kernel extend|prefill`: lowp_gpu_extend_bench_run. The default prefixes
 * are those of the kernels named (prefill: 0; extend: 4K..128K; both: all five); a prefix
 * of a kernel not named is refused. */
static int gpu_bench_extend(int argc, char **argv, int kinds)
{
#ifdef LOWP_HAVE_GPU
    lowp_gpu_extend_bench_opts o = lowp_gpu_extend_bench_defaults();
    const char *csv_path = NULL;
    int prefixes_set = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--csv"))
            csv_path = lowp_cli_option_value(argc, argv, &i);
        else if (!strcmp(a, "--chunks"))
            o.n_chunks = lowp_cli_parse_list(a, lowp_cli_option_value(argc, argv, &i), 1, 16, 1,
                                             65536, o.chunks);
        else if (!strcmp(a, "--prefixes")) {
            o.n_prefixes = lowp_cli_parse_list(a, lowp_cli_option_value(argc, argv, &i), 1, 16,
                                               0, (uint64_t)1 << 21, o.prefixes);
            prefixes_set = 1;
        } else if (!strcmp(a, "--reps"))
            o.reps = (size_t)lowp_cli_parse_u64(a, lowp_cli_option_value(argc, argv, &i), 1,
                                                100000);
        else if (!strcmp(a, "--batch"))
            o.batch = (size_t)lowp_cli_parse_u64(a, lowp_cli_option_value(argc, argv, &i), 1, 4);
        else if (!strcmp(a, "--q-heads"))
            o.q_heads = (size_t)lowp_cli_parse_u64(a, lowp_cli_option_value(argc, argv, &i), 1,
                                                   128);
        else if (!strcmp(a, "--kv-heads"))
            o.kv_heads = (size_t)lowp_cli_parse_u64(a, lowp_cli_option_value(argc, argv, &i), 1,
                                                    128);
        else if (!strcmp(a, "--head-dim"))
            o.dim = (size_t)lowp_cli_parse_u64(a, lowp_cli_option_value(argc, argv, &i), 64, 256);
        else
            lowp_cli_fail("lowp gpu bench --kernel extend|prefill: unknown option '%s' (see "
                          "lowp gpu --help)", a);
    }
    size_t np = 0;
    for (size_t i = 0; i < o.n_prefixes; i++) {
        int kind = o.prefixes[i] ? LOWP_GPU_EXTEND_KIND_EXTEND : LOWP_GPU_EXTEND_KIND_PREFILL;
        if (kinds & kind)
            o.prefixes[np++] = o.prefixes[i];
        else if (prefixes_set)
            lowp_cli_fail("--prefixes: %llu is %s, not a kernel --kernel names",
                          (unsigned long long)o.prefixes[i],
                          o.prefixes[i] ? "an extend (prefix > 0)" : "a prefill (prefix 0)");
    }
    o.n_prefixes = np;
    return gpu_bench_end(csv_path, run_bench_extend, &o);
#else
    (void)argc;
    (void)argv;
    (void)kinds;
    no_cuda("bench");
    return 2;
#endif
}

/* `lowp gpu bench --kernel kv-write`: lowp_gpu_kv_bench_run. */
static int gpu_bench_kv_write(int argc, char **argv)
{
#ifdef LOWP_HAVE_GPU
    lowp_gpu_kv_bench_opts o = lowp_gpu_kv_bench_defaults();
    const char *csv_path = NULL;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--csv"))
            csv_path = lowp_cli_option_value(argc, argv, &i);
        else if (!strcmp(a, "--formats")) {
            const char *v = lowp_cli_option_value(argc, argv, &i);
            char buf[256];
            if (strlen(v) >= sizeof buf)
                lowp_cli_fail("--formats '%s': too long", v);
            snprintf(buf, sizeof buf, "%s", v);
            o.n_formats = 0;
            for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) {
                lowp_block_format f;
                if (lowp_block_format_parse(t, &f))
                    lowp_cli_fail("--formats: '%s' is not a format (nvfp4 mxfp4 mxfp8 fp8_e4m3 "
                                  "fp8_e5m2 bf16)", t);
                if (o.n_formats == 8)
                    lowp_cli_fail("--formats: at most 8");
                o.formats[o.n_formats++] = f;
            }
            if (o.n_formats == 0)
                lowp_cli_fail("--formats '%s': no format named", v);
        } else if (!strcmp(a, "--tokens"))
            o.n_tokens = lowp_cli_parse_list(a, lowp_cli_option_value(argc, argv, &i), 1, 16, 1,
                                             (uint64_t)1 << 20, o.tokens);
        else if (!strcmp(a, "--dims"))
            o.n_dims = lowp_cli_parse_list(a, lowp_cli_option_value(argc, argv, &i), 1, 8, 32,
                                           4096, o.dims);
        else if (!strcmp(a, "--heads"))
            o.heads = (size_t)lowp_cli_parse_u64(a, lowp_cli_option_value(argc, argv, &i), 1, 128);
        else if (!strcmp(a, "--page-size"))
            o.page_size = (size_t)lowp_cli_parse_u64(a, lowp_cli_option_value(argc, argv, &i), 1,
                                                     1024);
        else if (!strcmp(a, "--reps"))
            o.reps = (size_t)lowp_cli_parse_u64(a, lowp_cli_option_value(argc, argv, &i), 1, 10000);
        else
            lowp_cli_fail("lowp gpu bench --kernel kv-write: unknown option '%s' (see lowp gpu "
                          "--help)", a);
    }
    for (size_t f = 0; f < o.n_formats; f++) /* a dim the format cannot hold, before the GPU */
        for (size_t d = 0; d < o.n_dims; d++)
            if (o.dims[d] % lowp_block_size(o.formats[f]))
                lowp_cli_fail("--dims: %llu is not a multiple of the %s block size %zu",
                              (unsigned long long)o.dims[d],
                              lowp_block_format_name(o.formats[f]),
                              lowp_block_size(o.formats[f]));
    return gpu_bench_end(csv_path, run_bench_kv_write, &o);
#else
    (void)argc;
    (void)argv;
    no_cuda("bench");
    return 2;
#endif
}

/* `lowp gpu bench [--kernel K]`: the decode's bench (no --kernel, or decode) or the extend
 * kernel's; one family a run (their options and tables differ). */
static int gpu_bench(int argc, char **argv)
{
    int n, bits;
    char **rest = take_kernel_option(argc, argv, &bits, &n);
    if (((bits & 1) && bits != 1) || ((bits & 8) && bits != 8))
        lowp_cli_fail("lowp gpu bench --kernel: decode, extend / prefill and kv-write are "
                      "separate benches (their options and tables differ): run them one at a time");
    int rc = bits == 1   ? gpu_bench_decode(n, rest)
             : bits == 8 ? gpu_bench_kv_write(n, rest)
                         : gpu_bench_extend(n, rest, bits >> 1);
    free(rest);
    return rc;
}

/* ---- attn --------------------------------------------------------------------------- */
typedef struct gattn {
    const char *q, *k, *v, *out, *format, *recipe, *layout, *k_sf, *v_sf, *path, *check;
    double k_scale, v_scale, sm_scale;
    int k_scale_set, v_scale_set, emulate, chunk_start_set, decode_opts;
    size_t page_size, chunk, chunk_start;
} gattn;

/* The values of x, a [d0, d1, d2] array (option opt), as a BF16 kernel input: each
 * finite, and rounding to a finite BF16 value (round to nearest even: |x| < 0x1.ffp127,
 * the midpoint between the largest finite BF16 0x1.fep127 and 2^128). The first bad
 * element is refused with one line naming it, as the loader names a non-finite one;
 * nothing is rounded or written here. */
static void bf16_input_check(const char *opt, const float *x, const size_t d[3])
{
    size_t n = d[0] * d[1] * d[2];
    for (size_t i = 0; i < n; i++) {
        int fin = isfinite(x[i]);
        if (fin && isfinite(lowp_f32_from_bf16(lowp_bf16_from_f32(x[i]))))
            continue;
        size_t i2 = i % d[2], i1 = i / d[2] % d[1], i0 = i / d[2] / d[1];
        if (!fin)
            lowp_cli_fail("%s: element [%zu, %zu, %zu] is %s (inputs must be finite)", opt, i0,
                          i1, i2, isnan(x[i]) ? "NaN" : "infinite");
        lowp_cli_fail("%s: element [%zu, %zu, %zu] = %.9g overflows BF16 (the kernels' input "
                      "type; its largest finite value is %.9g)", opt, i0, i1, i2, (double)x[i],
                      (double)lowp_f32_from_bf16(0x7F7F));
    }
}

#ifdef LOWP_HAVE_GPU
#define CUDA_OK(call)                                                                        \
    do {                                                                                     \
        cudaError_t e_ = (call);                                                             \
        if (e_ != cudaSuccess)                                                               \
            lowp_cli_fail("%s: %s", #call, cudaGetErrorString(e_));                          \
    } while (0)
#endif

/* `lowp gpu attn --path extend|prefill` (the header's description). */
static int gpu_attn_extend(const gattn *a, lowp_kv_path path)
{
#ifndef LOWP_HAVE_GPU
    if (!a->emulate)
        no_cuda("attn --path extend|prefill (without --emulate)");
#else
    if (!a->emulate) {
        int ndev = 0;
        if ((ndev = gpu_devices()) == 0) {
            fprintf(stderr, "lowp gpu attn: no CUDA device (--emulate runs the CPU emulator)\n");
            return 77;
        }
    }
#endif
    char why[512];
    lowp_block_format f;
    if (lowp_block_format_parse(a->format, &f))
        lowp_cli_fail("--kv-format: unknown format '%s'", a->format);
    if (path == LOWP_KV_PATH_EXTEND && f != LOWP_NVFP4)
        lowp_cli_fail("--path extend dequantizes an NVFP4 prefix into the FP8 workspace; "
                      "--kv-format is %s", a->format);
    if ((a->k_scale_set && a->k_scale != 1.0) || (a->v_scale_set && a->v_scale != 1.0))
        if (!lowp_block_has_global_scale(f))
            lowp_cli_fail("--k-scale / --v-scale: %s has no global scale (only 1 is accepted)",
                          a->format);
    lowp_cli_check_writable("--out", a->out);
    lowp_cli_check_not_input("--out", a->out, "--q", a->q);
    lowp_cli_check_not_input("--out", a->out, "--k", a->k);
    lowp_cli_check_not_input("--out", a->out, "--v", a->v);
    size_t qd[3], kd[3], vd[3], ad[3];
    float *q = lowp_cli_load_f32_3("--q", a->q, qd, "[q_len, num_q_heads, qk_dim]");
    float *k = lowp_cli_load_f32_3("--k", a->k, kd, "[ctx, num_kv_heads, qk_dim]");
    float *v = lowp_cli_load_f32_3("--v", a->v, vd, "[ctx, num_kv_heads, vo_dim]");
    if (vd[0] != kd[0] || vd[1] != kd[1])
        lowp_cli_fail("--v is [%zu, %zu, .] but --k is [%zu, %zu, .] (same tokens and KV heads)",
                      vd[0], vd[1], kd[0], kd[1]);
    if (qd[2] != kd[2])
        lowp_cli_fail("--q has qk_dim %zu but --k has %zu", qd[2], kd[2]);
    size_t ql = qd[0], ctx = kd[0], H = kd[1], NQ = qd[1], Dq = kd[2], Dv = vd[2];
    if (ql > ctx)
        lowp_cli_fail("--q has %zu query tokens but the context has %zu", ql, ctx);
    if (ctx > INT32_MAX)
        lowp_cli_fail("--k: %zu tokens; the kernel's indices are int32", ctx);
    size_t P = ctx - ql;
    if (a->chunk_start_set && a->chunk_start != P)
        lowp_cli_fail("--chunk-start %zu: the kernel's chunk is the queries, tokens %zu .. %zu",
                      a->chunk_start, P, ctx - 1);
    if (NQ % H)
        lowp_cli_fail("--q has %zu query heads, not a multiple of --k's %zu KV heads", NQ, H);
    float *ref_in = NULL;
    if (a->check) {
        ref_in = lowp_cli_load_f32_3("--check-against", a->check, ad,
                                     "[q_len, num_q_heads, vo_dim]");
        if (ad[0] != ql || ad[1] != NQ || ad[2] != Dv)
            lowp_cli_fail("--check-against is [%zu, %zu, %zu]; the output is [%zu, %zu, %zu]",
                          ad[0], ad[1], ad[2], ql, NQ, Dv);
    }
    bf16_input_check("--q", q, qd);
    bf16_input_check("--k", k, kd);
    bf16_input_check("--v", v, vd);
    lowp_kv_config cfg = lowp_kv_config_default(f, 1, 16, H, Dq, Dv);
    if (a->recipe && lowp_recipe_parse(a->recipe, &cfg.recipe))
        lowp_cli_fail("--recipe: unknown recipe '%s'", a->recipe);
    if (lowp_kv_config_check(&cfg, why, sizeof why))
        lowp_cli_fail("cache: %s", why);
    size_t nq = ql * NQ * Dq, nk = ctx * H * Dq, nv = ctx * H * Dv, no = ql * NQ * Dv;
    /* the global scales as `lowp attn` picks them (calibrated from the inputs' amax) */
    float kg = a->k_scale_set ? (float)a->k_scale
                              : lowp_sweep_global_scale(f, cfg.recipe, LOWP_SWEEP_SCALE_CALIBRATED,
                                                        lowp_calib_amax(k, nk)).dec;
    float vg = a->v_scale_set ? (float)a->v_scale
                              : lowp_sweep_global_scale(f, cfg.recipe, LOWP_SWEEP_SCALE_CALIBRATED,
                                                        lowp_calib_amax(v, nv)).dec;
    double *ke = malloc(nk * sizeof *ke), *ve = malloc(nv * sizeof *ve);
    uint8_t *kw = malloc(nk), *vw = malloc(nv);
    uint16_t *qb = malloc(nq * sizeof *qb), *ob = malloc(no * sizeof *ob);
    float *qr = malloc(nq * sizeof *qr), *o32 = malloc(no * sizeof *o32);
    if (!ke || !ve || !kw || !vw || !qb || !ob || !qr || !o32)
        lowp_cli_fail("out of memory");
    /* the workspace: the path's values (lowp/kvcache.h), each an E4M3 value or NaN */
    lowp_kv_path_args pa = lowp_kv_path_args_init(path, &cfg, ctx, ql, NQ, NULL, k, v);
    pa.k_gs = &kg;
    pa.v_gs = &vg;
    pa.chunk_start = path == LOWP_KV_PATH_EXTEND ? P : 0;
    lowp_kv_path_result pres;
    if (lowp_kv_path_run(&pa, 1, NULL, ke, ve, NULL, NULL, &pres, why, sizeof why))
        lowp_cli_fail("--path %s: %s", a->path, why);
    lowp_codec e4m3;
    if (lowp_codec_init(&e4m3, LOWP_E4M3, LOWP_PROFILE_CUDA, LOWP_RN, LOWP_SAT_OFF, why,
                        sizeof why))
        lowp_cli_fail("e4m3 codec: %s", why);
    for (size_t i = 0; i < nk + nv; i++) {
        double x = i < nk ? ke[i] : ve[i - nk];
        uint8_t c = isnan(x) ? 0x7F : (uint8_t)lowp_encode_f64(&e4m3, x);
        double back = lowp_decode_f64(LOWP_E4M3, c);
        if (!(back == x || (isnan(x) && isnan(back))))
            lowp_cli_fail("internal: the path's %s value %a is not an E4M3 value",
                          i < nk ? "K" : "V", x);
        *(i < nk ? &kw[i] : &vw[i - nk]) = c;
    }
    for (size_t i = 0; i < nq; i++) { /* the kernel's query, and the reference's */
        qb[i] = lowp_bf16_from_f32(q[i]);
        qr[i] = lowp_f32_from_bf16(qb[i]);
    }
    int32_t qo[2] = {0, (int32_t)ql}, kv[2] = {0, (int32_t)ctx}, pre[1] = {(int32_t)P};
    lowp_gpu_extend_args ea = {.batch = 1, .qo_indptr = qo, .kv_indptr = kv, .prefix_len = pre,
                               .kv_rows = ctx, .num_q_heads = NQ, .num_kv_heads = H,
                               .qk_dim = Dq, .vo_dim = Dv,
                               .sm_scale = a->sm_scale > 0 ? a->sm_scale : 0.0, .q = qb,
                               .k = kw, .v = vw};
    if (lowp_gpu_extend_check(&ea, why, sizeof why))
        lowp_cli_fail("%s", why);
    const char *engine;
    if (a->emulate) {
        engine = "CPU emulator (lowp_gpu_extend_emulate)";
        if (lowp_gpu_extend_emulate(&ea, ob, why, sizeof why))
            lowp_cli_fail("extend emulator: %s", why);
    } else {
#ifdef LOWP_HAVE_GPU
        engine = "GPU kernel (lowp_gpu_extend)";
        void *dq = NULL, *dk = NULL, *dv = NULL, *dout = NULL;
        int32_t *didx = NULL;
        CUDA_OK(cudaMalloc(&dq, nq * 2));
        CUDA_OK(cudaMalloc(&dk, nk));
        CUDA_OK(cudaMalloc(&dv, nv));
        CUDA_OK(cudaMalloc(&dout, no * 2));
        CUDA_OK(cudaMalloc((void **)&didx, 5 * sizeof *didx));
        CUDA_OK(cudaMemcpy(dq, qb, nq * 2, cudaMemcpyHostToDevice));
        CUDA_OK(cudaMemcpy(dk, kw, nk, cudaMemcpyHostToDevice));
        CUDA_OK(cudaMemcpy(dv, vw, nv, cudaMemcpyHostToDevice));
        CUDA_OK(cudaMemcpy(didx, qo, sizeof qo, cudaMemcpyHostToDevice));
        CUDA_OK(cudaMemcpy(didx + 2, kv, sizeof kv, cudaMemcpyHostToDevice));
        CUDA_OK(cudaMemcpy(didx + 4, pre, sizeof pre, cudaMemcpyHostToDevice));
        lowp_gpu_extend_desc d = {.host = ea, .qo_indptr_dev = didx, .kv_indptr_dev = didx + 2,
                                  .prefix_len_dev = didx + 4, .q_dev = dq, .k_dev = dk,
                                  .v_dev = dv};
        if (lowp_gpu_extend(&d, dout, 0, why, sizeof why))
            lowp_cli_fail("extend kernel: %s", why);
        CUDA_OK(cudaDeviceSynchronize());
        CUDA_OK(cudaMemcpy(ob, dout, no * 2, cudaMemcpyDeviceToHost));
        cudaFree(dq);
        cudaFree(dk);
        cudaFree(dv);
        cudaFree(dout);
        cudaFree(didx);
#else
        engine = "";
#endif
    }
    for (size_t i = 0; i < no; i++)
        o32[i] = lowp_f32_from_bf16(ob[i]);
    size_t outside = 0, compared = 0;
    double worst = 0.0;
    if (ref_in) {
        double *ref = malloc(no * sizeof *ref), *bd = malloc(no * sizeof *bd);
        if (!ref || !bd)
            lowp_cli_fail("out of memory");
        if (lowp_gpu_extend_reference(&ea, qr, ref, bd, why, sizeof why))
            lowp_cli_fail("reference: %s", why);
        for (size_t i = 0; i < no; i++) {
            if (!isfinite(bd[i]))
                continue; /* not compared: a non-finite input (the bound says so) */
            /* A is exact attention rounded once to binary32: within 2^-24 |A| of it */
            double tol = bd[i] + 0x1p-24 * fabs((double)ref_in[i]) + 0x1p-149;
            double err = fabs((double)o32[i] - (double)ref_in[i]);
            double r = err / tol;
            compared++;
            if (!(r <= 1.0)) {
                if (outside++ == 0)
                    fprintf(stderr, "lowp gpu attn: output [%zu, %zu, %zu] = %.9g is %.3g from "
                                    "--check-against's %.9g, past the bound %.3g\n",
                            i / (NQ * Dv), i / Dv % NQ, i % Dv, (double)o32[i], err,
                            (double)ref_in[i], tol);
            }
            worst = r > worst || r != r ? r : worst;
        }
        free(ref);
        free(bd);
    }
    lowp_cli_write_f32_3(a->out, o32, ql, NQ, Dv);
    printf("lowp gpu attn --path %s: %s\n  %zu queries at positions %zu..%zu, %zu KV heads x "
           "%zu, dims %zu/%zu, %s (%s); K scale %.9g, V scale %.9g; workspace NaN: %zu K, %zu "
           "V\n  wrote %s (BF16 output as float32 [%zu, %zu, %zu])\n",
           a->path, engine, ql, P, ctx - 1, H, NQ / H, Dq, Dv, a->format,
           lowp_recipe_name(cfg.recipe), (double)kg, (double)vg, pres.k_nan, pres.v_nan, a->out,
           ql, NQ, Dv);
    if (ref_in)
        printf("  against %s: %zu outputs compared, %zu outside the bound, worst err/bound %.3g\n",
               a->check, compared, outside, worst);
    free(q);
    free(k);
    free(v);
    free(ref_in);
    free(ke);
    free(ve);
    free(kw);
    free(vw);
    free(qb);
    free(ob);
    free(qr);
    free(o32);
    return outside ? 1 : 0;
}

static int gpu_attn(int argc, char **argv)
{
    gattn a = {.layout = "nhd", .k_sf = "linear", .v_sf = "linear", .page_size = 16};
    for (int i = 0; i < argc; i++) {
        const char *s = argv[i];
        if (!strcmp(s, "--q"))
            a.q = lowp_cli_option_value(argc, argv, &i);
        else if (!strcmp(s, "--k"))
            a.k = lowp_cli_option_value(argc, argv, &i);
        else if (!strcmp(s, "--v"))
            a.v = lowp_cli_option_value(argc, argv, &i);
        else if (!strcmp(s, "--out"))
            a.out = lowp_cli_option_value(argc, argv, &i);
        else if (!strcmp(s, "--kv-format"))
            a.format = lowp_cli_option_value(argc, argv, &i);
        else if (!strcmp(s, "--recipe"))
            a.recipe = lowp_cli_option_value(argc, argv, &i);
        else if (!strcmp(s, "--layout"))
            a.layout = lowp_cli_option_value(argc, argv, &i);
        else if (!strcmp(s, "--k-sf-order"))
            a.k_sf = lowp_cli_option_value(argc, argv, &i);
        else if (!strcmp(s, "--v-sf-order"))
            a.v_sf = lowp_cli_option_value(argc, argv, &i);
        else if (!strcmp(s, "--k-scale")) {
            a.k_scale = lowp_cli_parse_positive(s, lowp_cli_option_value(argc, argv, &i));
            a.k_scale_set = 1;
        } else if (!strcmp(s, "--v-scale")) {
            a.v_scale = lowp_cli_parse_positive(s, lowp_cli_option_value(argc, argv, &i));
            a.v_scale_set = 1;
        } else if (!strcmp(s, "--sm-scale"))
            a.sm_scale = lowp_cli_parse_positive(s, lowp_cli_option_value(argc, argv, &i));
        else if (!strcmp(s, "--page-size")) {
            a.page_size = lowp_cli_parse_count(s, lowp_cli_option_value(argc, argv, &i), 0);
            a.decode_opts = 1;
        } else if (!strcmp(s, "--chunk")) {
            a.chunk = lowp_cli_parse_count(s, lowp_cli_option_value(argc, argv, &i), 0);
            a.decode_opts = 1;
        } else if (!strcmp(s, "--path"))
            a.path = lowp_cli_option_value(argc, argv, &i);
        else if (!strcmp(s, "--chunk-start")) {
            a.chunk_start = lowp_cli_parse_count(s, lowp_cli_option_value(argc, argv, &i), 1);
            a.chunk_start_set = 1;
        } else if (!strcmp(s, "--check-against"))
            a.check = lowp_cli_option_value(argc, argv, &i);
        else if (!strcmp(s, "--emulate"))
            a.emulate = 1;
        else {
            lowp_cli_fail("lowp gpu attn: unknown option '%s' (see lowp gpu --help)", s);
        }
    }
    if (!a.q || !a.k || !a.v || !a.out || !a.format) {
        lowp_cli_fail("lowp gpu attn: --q, --k, --v, --kv-format and --out are required");
    }
    if (a.path && strcmp(a.path, "decode")) {
        lowp_kv_path pth;
        if (lowp_kv_path_parse(a.path, &pth) ||
            (pth != LOWP_KV_PATH_EXTEND && pth != LOWP_KV_PATH_PREFILL))
            lowp_cli_fail("--path: '%s' is not one the GPU runs (decode, extend, prefill)", a.path);
        if (a.decode_opts || strcmp(a.layout, "nhd") || strcmp(a.k_sf, "linear") ||
            strcmp(a.v_sf, "linear"))
            lowp_cli_fail("--page-size, --chunk, --layout and the scale orders are the decode's "
                          "(the extend kernel reads an FP8 workspace)");
        return gpu_attn_extend(&a, pth);
    }
    if (a.chunk_start_set || a.check)
        lowp_cli_fail("--chunk-start and --check-against apply to --path extend|prefill");
#ifndef LOWP_HAVE_GPU
    if (!a.emulate)
        no_cuda("attn (without --emulate)");
#else
    /* Whether there is a device is known before any input is read or any memory is
     * taken: the exit-77 path has nothing to free. */
    if (!a.emulate) {
        int ndev = 0;
        if ((ndev = gpu_devices()) == 0) {
            fprintf(stderr, "lowp gpu attn: no CUDA device (--emulate runs the CPU emulators)\n");
            return 77;
        }
    }
#endif
    char why[512];
    lowp_block_format f;
    if (lowp_block_format_parse(a.format, &f))
        lowp_cli_fail("--kv-format: unknown format '%s'", a.format);
    lowp_kv_layout layout;
    lowp_kv_sf_order k_sf, v_sf;
    if (lowp_kv_layout_parse(a.layout, &layout))
        lowp_cli_fail("--layout: '%s' is neither nhd nor hnd", a.layout);
    if (lowp_kv_sf_order_parse(a.k_sf, &k_sf) || lowp_kv_sf_order_parse(a.v_sf, &v_sf))
        lowp_cli_fail("--k-sf-order / --v-sf-order: linear or interleave4");
    if (a.chunk % 16)
        lowp_cli_fail("--chunk %zu: a multiple of 16 tokens", a.chunk);
    if ((a.k_scale_set && a.k_scale != 1.0) || (a.v_scale_set && a.v_scale != 1.0))
        if (!lowp_block_has_global_scale(f))
            lowp_cli_fail("--k-scale / --v-scale: %s has no global scale (only 1 is accepted)",
                          a.format);
    lowp_cli_check_writable("--out", a.out);
    lowp_cli_check_not_input("--out", a.out, "--q", a.q);
    lowp_cli_check_not_input("--out", a.out, "--k", a.k);
    lowp_cli_check_not_input("--out", a.out, "--v", a.v);
    size_t qd[3], kd[3], vd[3];
    float *q = lowp_cli_load_f32_3("--q", a.q, qd, "[1, num_q_heads, qk_dim]");
    float *k = lowp_cli_load_f32_3("--k", a.k, kd, "[ctx, num_kv_heads, qk_dim]");
    float *v = lowp_cli_load_f32_3("--v", a.v, vd, "[ctx, num_kv_heads, vo_dim]");
    if (qd[0] != 1)
        lowp_cli_fail("--q has %zu query tokens; the GPU kernel is a decode (one query token at "
                      "position ctx - 1)", qd[0]);
    if (vd[0] != kd[0] || vd[1] != kd[1])
        lowp_cli_fail("--v is [%zu, %zu, .] but --k is [%zu, %zu, .] (same tokens and KV heads)",
                      vd[0], vd[1], kd[0], kd[1]);
    if (qd[2] != kd[2])
        lowp_cli_fail("--q has qk_dim %zu but --k has %zu", qd[2], kd[2]);
    size_t ctx = kd[0], H = kd[1], NQ = qd[1], Dq = kd[2], Dv = vd[2], P = a.page_size;
    if (NQ % H)
        lowp_cli_fail("--q has %zu query heads, not a multiple of --k's %zu KV heads", NQ, H);
    lowp_recipe recipe;
    lowp_kv_config cfg = lowp_kv_config_default(f, (ctx + P - 1) / P, P, H, Dq, Dv);
    recipe = cfg.recipe;
    if (a.recipe && lowp_recipe_parse(a.recipe, &recipe))
        lowp_cli_fail("--recipe: unknown recipe '%s'", a.recipe);
    cfg.recipe = recipe;
    cfg.layout = layout;
    cfg.k_sf_order = k_sf;
    cfg.v_sf_order = v_sf;
    if (lowp_kv_config_check(&cfg, why, sizeof why))
        lowp_cli_fail("cache: %s", why);
    if (lowp_gpu_decode_check(&cfg, NQ, why, sizeof why))
        lowp_cli_fail("%s", why);

    /* the kernels' input types: BF16 queries, K and V. Every input is checked before any
     * is rounded (Q has NQ * Dq values, K ctx * H * Dq, V ctx * H * Dv). */
    size_t nq = NQ * Dq, nk = ctx * H * Dq, nv = ctx * H * Dv;
    bf16_input_check("--q", q, qd);
    bf16_input_check("--k", k, kd);
    bf16_input_check("--v", v, vd);
    uint16_t *qb = malloc(nq * sizeof *qb), *kb = malloc(nk * sizeof *kb),
             *vb = malloc(nv * sizeof *vb);
    uint16_t *ob = malloc(NQ * Dv * sizeof *ob);
    float *o32 = malloc(NQ * Dv * sizeof *o32);
    if (!qb || !kb || !vb || !ob || !o32)
        lowp_cli_fail("out of memory");
    /* K and V keep their BF16 values too: the emulated quantize-on-write and the global
     * scales' amax see what the kernel sees */
    for (size_t i = 0; i < nq; i++)
        qb[i] = lowp_bf16_from_f32(q[i]);
    for (size_t i = 0; i < nk; i++) {
        kb[i] = lowp_bf16_from_f32(k[i]);
        k[i] = lowp_f32_from_bf16(kb[i]);
    }
    for (size_t i = 0; i < nv; i++) {
        vb[i] = lowp_bf16_from_f32(v[i]);
        v[i] = lowp_f32_from_bf16(vb[i]);
    }
    float kg = a.k_scale_set ? (float)a.k_scale
                             : lowp_sweep_global_scale(f, recipe, LOWP_SWEEP_SCALE_CALIBRATED,
                                                       lowp_calib_amax(k, nk)).dec;
    float vg = a.v_scale_set ? (float)a.v_scale
                             : lowp_sweep_global_scale(f, recipe, LOWP_SWEEP_SCALE_CALIBRATED,
                                                       lowp_calib_amax(v, nv)).dec;
    size_t n_pages = cfg.num_pages;
    int32_t *indices = malloc(n_pages * sizeof *indices);
    int64_t *slots = malloc(ctx * sizeof *slots);
    if (!indices || !slots)
        lowp_cli_fail("out of memory");
    for (size_t i = 0; i < n_pages; i++)
        indices[i] = (int32_t)i;
    for (size_t t = 0; t < ctx; t++)
        slots[t] = (int64_t)t; /* page t / P, slot t % P: pages in order */
    int32_t indptr[2] = {0, (int32_t)n_pages}, last = (int32_t)(ctx - (n_pages - 1) * P);
    lowp_kv_page_table pt = {1, indptr, indices, &last};
    double sm = a.sm_scale > 0 ? a.sm_scale : 0.0;
    const char *engine;
    if (a.emulate) {
        engine = "CPU emulators (quantize-on-write = lowp_kvcache_write, decode = "
                 "lowp_gpu_decode_emulate)";
        lowp_kvcache *c;
        if (lowp_kvcache_create(&cfg, &c, why, sizeof why) ||
            lowp_kvcache_set_global_scales(c, &kg, &vg, 1, why, sizeof why))
            lowp_cli_fail("cache: %s", why);
        for (size_t t = 0; t < ctx; t++)
            if (lowp_kvcache_write_pos(c, &pt, 0, t, k + t * H * Dq, v + t * H * Dv, NULL, NULL,
                                       why, sizeof why))
                lowp_cli_fail("cache write of token %zu: %s", t, why);
        lowp_kv_view view = lowp_kv_view_of(&cfg);
        lowp_gpu_decode_args ea = {.cache = c, .view = &view, .pt = &pt, .num_q_heads = NQ,
                                   .sm_scale = sm, .q = qb, .chunk_tokens = a.chunk};
        if (lowp_gpu_decode_emulate(&ea, ob, why, sizeof why))
            lowp_cli_fail("decode emulator: %s", why);
        lowp_kvcache_destroy(c);
    } else {
#ifdef LOWP_HAVE_GPU
        engine = "GPU kernels (lowp_gpu_kv_write, lowp_gpu_decode)";
        lowp_gpu_kvcache *gc;
        if (lowp_gpu_kvcache_create(&cfg, &gc, why, sizeof why) ||
            lowp_gpu_kvcache_set_global_scales(gc, &kg, &vg, 1, why, sizeof why))
            lowp_cli_fail("GPU cache: %s", why);
        void *dk = NULL, *dv = NULL, *dq = NULL, *dout = NULL, *ws = NULL;
        int32_t *dpt = NULL;
        int64_t *dslots = NULL;
        CUDA_OK(cudaMalloc(&dk, nk * 2));
        CUDA_OK(cudaMalloc(&dv, nv * 2));
        CUDA_OK(cudaMalloc(&dq, nq * 2));
        CUDA_OK(cudaMalloc(&dout, NQ * Dv * 2));
        CUDA_OK(cudaMalloc((void **)&dslots, ctx * sizeof *dslots));
        CUDA_OK(cudaMalloc((void **)&dpt, (3 + n_pages) * sizeof *dpt));
        CUDA_OK(cudaMemcpy(dk, kb, nk * 2, cudaMemcpyHostToDevice));
        CUDA_OK(cudaMemcpy(dv, vb, nv * 2, cudaMemcpyHostToDevice));
        CUDA_OK(cudaMemcpy(dq, qb, nq * 2, cudaMemcpyHostToDevice));
        CUDA_OK(cudaMemcpy(dslots, slots, ctx * sizeof *slots, cudaMemcpyHostToDevice));
        CUDA_OK(cudaMemcpy(dpt, indptr, 2 * sizeof *dpt, cudaMemcpyHostToDevice));
        CUDA_OK(cudaMemcpy(dpt + 2, &last, sizeof last, cudaMemcpyHostToDevice));
        CUDA_OK(cudaMemcpy(dpt + 3, indices, n_pages * sizeof *dpt, cudaMemcpyHostToDevice));
        if (lowp_gpu_kv_write(gc, LOWP_GPU_IN_BF16, dk, dv, dslots, slots, ctx, 0, why,
                              sizeof why))
            lowp_cli_fail("quantize-on-write kernel: %s", why);
        lowp_gpu_decode_desc dd = {.cache = gc, .pt_host = &pt, .indptr_dev = dpt,
                                   .indices_dev = dpt + 3, .last_page_len_dev = dpt + 2,
                                   .num_q_heads = NQ, .sm_scale = sm, .q_dev = dq,
                                   .chunk_tokens = a.chunk};
        size_t wsb = lowp_gpu_decode_workspace_bytes(&dd, why, sizeof why);
        if (wsb == 0)
            lowp_cli_fail("decode: %s", why);
        CUDA_OK(cudaMalloc(&ws, wsb));
        if (lowp_gpu_decode(&dd, ws, wsb, dout, 0, why, sizeof why))
            lowp_cli_fail("decode kernel: %s", why);
        CUDA_OK(cudaDeviceSynchronize());
        CUDA_OK(cudaMemcpy(ob, dout, NQ * Dv * 2, cudaMemcpyDeviceToHost));
        cudaFree(dk);
        cudaFree(dv);
        cudaFree(dq);
        cudaFree(dout);
        cudaFree(ws);
        cudaFree(dpt);
        cudaFree(dslots);
        lowp_gpu_kvcache_destroy(gc);
#else
        engine = "";
#endif
    }
    for (size_t i = 0; i < NQ * Dv; i++)
        o32[i] = lowp_f32_from_bf16(ob[i]);
    lowp_cli_write_f32_3(a.out, o32, 1, NQ, Dv);
    printf("lowp gpu attn: %s\n  cache %s %s, %zu tokens, %zu KV heads x %zu, dims %zu/%zu, page "
           "size %zu, %s; K scale %.9g, V scale %.9g; split %zu tokens\n  wrote %s (BF16 output "
           "as float32 [1, %zu, %zu])\n",
           engine, a.format, lowp_recipe_name(recipe), ctx, H, NQ / H, Dq, Dv, P, a.layout,
           (double)kg, (double)vg, a.chunk ? a.chunk : lowp_gpu_decode_chunk_tokens(1, H, ctx),
           a.out, NQ, Dv);
    free(q);
    free(k);
    free(v);
    free(qb);
    free(kb);
    free(vb);
    free(ob);
    free(o32);
    free(indices);
    free(slots);
    return 0;
}

int lowp_cmd_gpu(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        gpu_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "conform"))
        return gpu_conform(argc - 2, argv + 2);
    if (!strcmp(argv[1], "attn"))
        return gpu_attn(argc - 2, argv + 2);
    if (!strcmp(argv[1], "bench"))
        return gpu_bench(argc - 2, argv + 2);
    lowp_cli_fail("lowp gpu: unknown subcommand '%s' (conform, attn, bench)", argv[1]);
}
