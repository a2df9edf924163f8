/* tools/cmd_bench.c: lowp bench convert -- encode throughput beside the peers.
 *
 *   lowp bench convert [--n N] [--threads T] [--seed S] [--reps R]
 *
 * For every format, N binary32 inputs (Gaussian values times 2^e, e uniform over the
 * format's whole range from below its smallest subnormal to above its largest value, so
 * every path of an encoder runs: subnormals, normals, overflow) are encoded by lowp under
 * each profile, on one thread and on T threads (OpenMP), and in the same run by:
 *   - CUDA 13's host conversion functions (tools/oracle_cuda_host.cu), for the cuda row;
 *   - ml_dtypes `astype` (numpy float16 for f16) through python3, for the ml_dtypes row,
 *     when `import ml_dtypes` works (the Python of lowp_cli_python). The inputs go to a temporary file; a short embedded
 *     script times astype with time.perf_counter and writes its codes back.
 * Every timing is the median of R runs after one warm-up, on buffers far above the caches
 * (N = 2^24 by default: 64 MiB of input). Speedups are the peer's time over lowp's at the
 * same thread count; the codes column says whether the two produced identical codes. */
#define _POSIX_C_SOURCE 200809L
#include "bench.h"
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "lowp/cases.h"
#include "lowp/format.h"
#ifdef LOWP_HAVE_CUDA_HOST
#include "oracle_cuda_host.h"
#endif

LOWP_COMMAND_DEFINE(bench, "benchmarks: convert (vs CUDA host, ml_dtypes), quantize (vs memcpy), attn");

#define BENCH_MAX_REPS 101

static const char *const bench_usage =
    "usage: lowp bench convert  [--n N] [--threads T] [--seed S] [--reps R]\n"
    "       lowp bench quantize [--n N] [--threads T] [--reps R] [--seed S] [--path P]\n"
    "       lowp bench attn     [--format F] [--ctx N] [--batch B] ... (lowp bench attn --help)\n"
    "  convert: encode throughput against CUDA's host functions and ml_dtypes (the Python of\n"
    "  $LOWP_PYTHON, else .venv beside the source tree, else python3); quantize: block\n"
    "  quantization against memcpy (lowp bench quantize --help); attn: the CPU paged decode.\n"
    "convert options:\n"
    "  --n N        binary32 inputs per format (default 16777216 = 2^24, 64 MiB)\n"
    "  --threads T  threads for the parallel column (default: all cores)\n"
    "  --seed S     input seed (default 0x6c6f7770)\n"
    "  --reps R     timed runs per measurement, median reported (default 7, at most 101)\n";

/* ---- helpers -------------------------------------------------------------------- */

double lowp_bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double now_s(void)
{
    return lowp_bench_now();
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void lowp_bench_set_threads(int t)
{
#ifdef _OPENMP
    omp_set_num_threads(t);
#else
    (void)t;
#endif
}

int lowp_bench_max_threads(void)
{
#ifdef _OPENMP
    return omp_get_num_procs();
#else
    return 1;
#endif
}

static void set_threads(int t)
{
    lowp_bench_set_threads(t);
}

double lowp_bench_median(void (*fn)(void *), void *arg, int reps)
{
    double t[BENCH_MAX_REPS];
    reps = reps < 1 ? 1 : reps > BENCH_MAX_REPS ? BENCH_MAX_REPS : reps;
    fn(arg);
    for (int i = 0; i < reps; i++) {
        double t0 = lowp_bench_now();
        fn(arg);
        t[i] = lowp_bench_now() - t0;
    }
    qsort(t, (size_t)reps, sizeof t[0], cmp_double);
    return t[reps / 2];
}


unsigned long long lowp_bench_parse_count(const char *opt, const char *s, unsigned long long lo,
                                          unsigned long long hi)
{
    if (s == NULL)
        lowp_cli_fail("bench: %s needs a value", opt);
    return lowp_cli_parse_u64(opt, s, lo, hi);
}

/* One timed operation: encode n values of in into out. */
typedef struct {
    int kind; /* 0 lowp, 1 CUDA host, 2 copy floor */
    const lowp_codec *codec;
    lowp_format f;
    lowp_round r;
    int sat;
    const float *in;
    void *out;
    size_t n;
    int narrow; /* one byte per code */
} bench_op;

static void op_run(const bench_op *op)
{
    switch (op->kind) {
    case 0:
        if (op->narrow)
            lowp_encode_f32_u8(op->codec, op->in, op->out, op->n);
        else
            lowp_encode_f32_u16(op->codec, op->in, op->out, op->n);
        break;
#ifdef LOWP_HAVE_CUDA_HOST
    case 1:
        if (op->narrow)
            lowp_cuda_host_encode_f32_u8(op->f, op->r, op->sat, op->in, op->out, op->n);
        else
            lowp_cuda_host_encode_f32(op->f, op->r, op->sat, op->in, op->out, op->n);
        break;
#endif
    default: {
        /* The memory floor: read binary32, write one code per value, no arithmetic. */
        const long n = (long)op->n;
        const float *x = op->in;
        if (op->narrow) {
            uint8_t *o = op->out;
#pragma omp parallel for schedule(static)
            for (long i = 0; i < n; i++) {
                uint32_t b;
                memcpy(&b, &x[i], sizeof b);
                o[i] = (uint8_t)(b >> 24);
            }
        } else {
            uint16_t *o = op->out;
#pragma omp parallel for schedule(static)
            for (long i = 0; i < n; i++) {
                uint32_t b;
                memcpy(&b, &x[i], sizeof b);
                o[i] = (uint16_t)(b >> 16);
            }
        }
        break;
    }
    }
}

/* Median ns per value over reps runs after one warm-up, on t threads. */
static double time_op(const bench_op *op, int threads, int reps)
{
    double t[BENCH_MAX_REPS];
    set_threads(threads);
    op_run(op);
    for (int i = 0; i < reps; i++) {
        double t0 = now_s();
        op_run(op);
        t[i] = now_s() - t0;
    }
    qsort(t, (size_t)reps, sizeof t[0], cmp_double);
    return t[reps / 2] * 1e9 / (double)op->n;
}

/* Inputs: x = g * 2^e, g standard Gaussian (Box-Muller), e uniform in [elo, ehi]. Each
 * value depends on (seed, index) only, so any thread count gives the same inputs. */
static void make_inputs(float *x, size_t n, uint64_t seed, int elo, int ehi)
{
    const long m = (long)n;
    const double two_pi = 6.283185307179586476925286766559;
#pragma omp parallel for schedule(static)
    for (long i = 0; i < m; i++) {
        uint64_t st = seed + (uint64_t)i * UINT64_C(0x9e3779b97f4a7c15) * 4u;
        double u1 = ((double)(lowp_splitmix64(&st) >> 11) + 1.0) * 0x1p-53; /* (0, 1] */
        double u2 = (double)(lowp_splitmix64(&st) >> 11) * 0x1p-53;
        int e = elo + (int)(lowp_splitmix64(&st) % (uint64_t)(ehi - elo + 1));
        double g = sqrt(-2.0 * log(u1)) * cos(two_pi * u2);
        x[i] = (float)ldexp(g, e);
    }
}

/* The binary exponent range a format's values span: its smallest positive value and its
 * largest finite value. */
static void format_exp_range(lowp_format f, int *elo, int *ehi)
{
    int e;
    frexp(lowp_decode_f64(f, f == LOWP_E8M0 ? 0 : 1), &e);
    *elo = e - 1;
    frexp(lowp_decode_f64(f, lowp_format_max_code(f)), &e);
    *ehi = e - 1;
}

/* The mode a profile row uses: round to nearest where the profile has it, else the first
 * it has (CUDA E8M0: ru, as CUDA's own __nv_fp8_e8m0 constructor). Saturation: the
 * profile's default. Returns 0, or -1 where the profile has no conversion at all. */
static int profile_codec(lowp_format f, lowp_profile p, lowp_codec *c)
{
    static const lowp_round order[] = {LOWP_RN, LOWP_RU, LOWP_RZ, LOWP_RD, LOWP_RNA};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        if (lowp_codec_init(c, f, p, order[i], LOWP_SAT_DEFAULT, NULL, 0) == 0)
            return 0;
    return -1;
}

static size_t count_diff(const void *a, const void *b, size_t n, int narrow)
{
    size_t d = 0;
    if (narrow) {
        const uint8_t *x = a, *y = b;
        for (size_t i = 0; i < n; i++)
            d += x[i] != y[i];
    } else {
        const uint16_t *x = a, *y = b;
        for (size_t i = 0; i < n; i++)
            d += x[i] != y[i];
    }
    return d;
}

/* ---- ml_dtypes through python3 ---------------------------------------------------- */

static const char *const py_script =
    "import sys, time, warnings\n"
    "import numpy as np\n"
    "import ml_dtypes\n"
    "inp, outp, name, reps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])\n"
    "x = np.fromfile(inp, dtype='<f4')\n"
    "dt = np.float16 if name == 'float16' else getattr(ml_dtypes, name)\n"
    "warnings.simplefilter('ignore')  # overflow to Inf/NaN is part of the input mix\n"
    "y = x.astype(dt)\n"
    "ts = []\n"
    "for _ in range(reps):\n"
    "    t0 = time.perf_counter()\n"
    "    y = x.astype(dt)\n"
    "    ts.append(time.perf_counter() - t0)\n"
    "ts.sort()\n"
    "y.view(np.uint8 if y.itemsize == 1 else '<u2').tofile(outp)\n"
    "print('%.6f ml_dtypes-%s numpy-%s' % (ts[len(ts) // 2] * 1e9 / x.size,\n"
    "      ml_dtypes.__version__, np.__version__))\n";

typedef struct {
    int ok;
    char dir[1024];
    char script[1100], in[1100], out[1100];
    char python[4096]; /* lowp_cli_python */
    char versions[128];
} py_env;

static const char *ml_dtypes_name(lowp_format f)
{
    switch (f) {
    case LOWP_E2M1: return "float4_e2m1fn";
    case LOWP_E4M3: return "float8_e4m3fn";
    case LOWP_E5M2: return "float8_e5m2";
    case LOWP_E8M0: return "float8_e8m0fnu";
    case LOWP_BF16: return "bfloat16";
    default: return "float16";
    }
}

static int write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        return -1;
    size_t w = fwrite(data, 1, len, f);
    int bad = (w != len) | (fclose(f) != 0);
    return bad ? -1 : 0;
}

/* The temporary files, removed also when a signal ends the run (Ctrl-C, a closed pipe):
 * unlink and rmdir are async-signal-safe. */
static py_env *volatile py_live;

static void py_remove_files(py_env *py)
{
    unlink(py->script);
    unlink(py->in);
    unlink(py->out);
    rmdir(py->dir);
}

static void py_on_signal(int sig)
{
    py_env *py = py_live;
    if (py != NULL)
        py_remove_files(py);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void py_init(py_env *py)
{
    memset(py, 0, sizeof *py);
    lowp_cli_python(py->python, sizeof py->python);
    char probe[4352];
    snprintf(probe, sizeof probe, "'%s' -c 'import ml_dtypes' >/dev/null 2>&1", py->python);
    if (system(probe) != 0)
        return;
    const char *tmp = getenv("TMPDIR");
    snprintf(py->dir, sizeof py->dir, "%s/lowp-bench-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (mkdtemp(py->dir) == NULL)
        return;
    snprintf(py->script, sizeof py->script, "%s/astype.py", py->dir);
    snprintf(py->in, sizeof py->in, "%s/in.f32", py->dir);
    snprintf(py->out, sizeof py->out, "%s/out.codes", py->dir);
    py_live = py;
    signal(SIGINT, py_on_signal);
    signal(SIGTERM, py_on_signal);
    signal(SIGPIPE, py_on_signal);
    signal(SIGHUP, py_on_signal);
    if (write_file(py->script, py_script, strlen(py_script)) != 0) {
        py_remove_files(py);
        py->dir[0] = '\0';
        return;
    }
    py->ok = 1;
}

static void py_cleanup(py_env *py)
{
    if (py->dir[0] == '\0')
        return;
    py_remove_files(py);
    py->dir[0] = '\0';
    py_live = NULL;
}

/* Run ml_dtypes astype on the inputs already in py->in; ns per value, or a negative
 * value on failure. The codes are read into out (n values of the format's width). */
static double py_time(py_env *py, lowp_format f, int reps, void *out, size_t n, int narrow)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' '%s' '%s' '%s' %s %d", py->python, py->script, py->in, py->out,
             ml_dtypes_name(f), reps);
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        return -1.0;
    char line[256] = "";
    double ns = -1.0;
    char ver[128] = "";
    if (fgets(line, sizeof line, p) != NULL && sscanf(line, "%lf %127[^\n]", &ns, ver) >= 1)
        snprintf(py->versions, sizeof py->versions, "%s", ver);
    if (pclose(p) != 0)
        return -1.0;
    FILE *o = fopen(py->out, "rb");
    if (o == NULL)
        return -1.0;
    size_t width = narrow ? 1 : 2;
    size_t got = fread(out, width, n, o);
    fclose(o);
    unlink(py->out);
    return got == n ? ns : -1.0;
}

/* ---- the table ------------------------------------------------------------------- */

static void print_rule(void)
{
    printf("%.*s\n", 118,
           "----------------------------------------------------------------------------------"
           "----------------------------------------------------------------------------------");
}

static void print_lowp_cols(double ns1, double nsT)
{
    printf("| %7.3f %6.2f | %7.3f %6.2f ", ns1, 1.0 / ns1, nsT, 1.0 / nsT);
}

static int bench_convert(int argc, char **argv)
{
    unsigned long long n = 1ull << 24, seed = LOWP_DEFAULT_SEED;
    int reps = 7;
#ifdef _OPENMP
    int threads = omp_get_num_procs();
#else
    int threads = 1;
#endif
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(bench_usage, stdout);
            return LOWP_EXIT_OK;
        } else if (strcmp(a, "--n") == 0) {
            n = lowp_cli_parse_u64("--n", lowp_cli_option_value(argc, argv, &i), 1, 1ull << 31);
        } else if (strcmp(a, "--threads") == 0) {
            threads = (int)lowp_cli_parse_u64("--threads", lowp_cli_option_value(argc, argv, &i), 1, 1024);
        } else if (strcmp(a, "--seed") == 0) {
            seed = lowp_cli_parse_u64("--seed", lowp_cli_option_value(argc, argv, &i), 0, UINT64_MAX);
        } else if (strcmp(a, "--reps") == 0) {
            reps = (int)lowp_cli_parse_u64("--reps", lowp_cli_option_value(argc, argv, &i), 1, BENCH_MAX_REPS);
        } else {
            lowp_cli_fail("bench convert: unknown argument '%s' (try 'lowp bench convert --help')", a);
        }
    }
#ifndef _OPENMP
    threads = 1;
#endif

    size_t nn = (size_t)n;
    float *in = malloc(nn * sizeof *in);
    uint16_t *out_lowp = malloc(nn * sizeof(uint16_t));
    uint16_t *out_peer = malloc(nn * sizeof(uint16_t));
    if (in == NULL || out_lowp == NULL || out_peer == NULL)
        lowp_cli_fail("bench: out of memory for %llu values", n);
    /* touch every page once so no measurement pays for first faults */
    memset(out_lowp, 0, nn * sizeof(uint16_t));
    memset(out_peer, 0, nn * sizeof(uint16_t));

    py_env py;
    py_init(&py);

    printf("lowp bench convert: %llu binary32 inputs per format (%.1f MiB), Gaussian x 2^e with e "
           "uniform over each format's range\n",
           n, (double)nn * 4.0 / 1048576.0);
    char machine[256], commit[64];
    lowp_machine_description(machine, sizeof machine);
    lowp_source_commit(commit, sizeof commit);
    printf("machine: %s; lowp commit %s\n", machine, commit);
    char isa[160];
    lowp_cli_cpu_isa(isa, sizeof isa);
    printf("ISA: %s; array encoders: %s\n", isa, lowp_encode_isa());
    printf("seed 0x%llx, median of %d runs after 1 warm-up, 1 thread and %d threads (OpenMP)\n",
           seed, reps, threads);
#ifdef LOWP_HAVE_CUDA_HOST
    printf("CUDA peer: %s\n", lowp_cuda_host_version());
#else
    printf("CUDA peer: not built (no nvcc)\n");
#endif
    double load = -1.0;
    FILE *lf = fopen("/proc/loadavg", "r");
    if (lf != NULL) {
        if (fscanf(lf, "%lf", &load) != 1)
            load = -1.0;
        fclose(lf);
    }
#ifdef _OPENMP
    int cores = omp_get_num_procs();
#else
    int cores = 1;
#endif
    if (load >= 0.0)
        printf("load average %.2f on %d cores%s\n", load, cores,
               load > 0.5 * cores ? ": other work is running, timings will be noisy" : "");
    if (py.ok)
        printf("ml_dtypes peer: %s: ml_dtypes astype (single-threaded, allocates its output)\n",
               py.python);
    else
        printf("ml_dtypes peer: unavailable ('%s -c \"import ml_dtypes\"' failed; set LOWP_PYTHON)\n",
               py.python);
    printf("ns/v = nanoseconds per value, Gv/s = 10^9 values per second; speedup = peer time / lowp "
           "time at the same thread count\n\n");
    printf("%-6s %-9s %-4s %-5s | %-14s | %-14s | %-10s %7s %7s | %-15s | %s\n", "", "", "", "",
           " lowp 1 thread", "lowp threads", "peer", "1 thr", "threads", "lowp speedup", "codes");
    printf("%-6s %-9s %-4s %-5s | %7s %6s | %7s %6s | %-10s %7s %7s | %7s %7s | %s\n", "format",
           "profile", "mode", "sat", "ns/v", "Gv/s", "ns/v", "Gv/s", "", "ns/v", "ns/v", "1 thr",
           "threads", "");
    print_rule();

    /* The memory floor for both code widths. */
    for (int narrow = 1; narrow >= 0; narrow--) {
        make_inputs(in, nn, seed, -10, 10);
        bench_op op = {.kind = 2, .in = in, .out = out_lowp, .n = nn, .narrow = narrow};
        double ns1 = time_op(&op, 1, reps), nsT = time_op(&op, threads, reps);
        printf("%-6s %-9s %-4s %-5s ", "(copy)", narrow ? "f32->u8" : "f32->u16",
               "", "");
        print_lowp_cols(ns1, nsT);
        printf("| %-10s %7s %7s | %7s %7s | memory floor: read, shift, store\n", "", "", "", "", "");
    }
    print_rule();

    int any_diff = 0;
    for (int fi = 0; fi < LOWP_FORMAT_COUNT; fi++) {
        lowp_format f = (lowp_format)fi;
        int narrow = lowp_format_bits(f) <= 8;
        int elo, ehi;
        format_exp_range(f, &elo, &ehi);
        make_inputs(in, nn, seed ^ ((uint64_t)fi << 56), elo - 2, ehi + 1);
        int py_ready = py.ok && write_file(py.in, in, nn * sizeof *in) == 0;

        for (int pi = 0; pi < LOWP_PROFILE_COUNT; pi++) {
            lowp_profile p = (lowp_profile)pi;
            lowp_codec c;
            if (profile_codec(f, p, &c) != 0)
                continue;
            bench_op op = {.kind = 0, .codec = &c, .in = in, .out = out_lowp, .n = nn, .narrow = narrow};
            double ns1 = time_op(&op, 1, reps), nsT = time_op(&op, threads, reps);
            printf("%-6s %-9s %-4s %-5s ", lowp_format_name(f), lowp_profile_name(p),
                   lowp_round_name(c.round), c.saturate ? "sat" : "nosat");
            print_lowp_cols(ns1, nsT);

            if (p == LOWP_PROFILE_CUDA) {
#ifdef LOWP_HAVE_CUDA_HOST
                bench_op cop = {.kind = 1, .f = f, .r = c.round, .sat = c.saturate, .in = in,
                                .out = out_peer, .n = nn, .narrow = narrow};
                double c1 = time_op(&cop, 1, reps), cT = time_op(&cop, threads, reps);
                size_t d = count_diff(out_lowp, out_peer, nn, narrow);
                any_diff |= d != 0;
                printf("| %-10s %7.3f %7.3f | %6.1fx %6.1fx | ", "CUDA host", c1, cT, c1 / ns1, cT / nsT);
                if (d == 0)
                    printf("identical\n");
                else
                    printf("%zu differ\n", d);
#else
                printf("| %-10s %7s %7s | %7s %7s |\n", "(no nvcc)", "-", "-", "-", "-");
#endif
            } else if (p == LOWP_PROFILE_ML_DTYPES && py_ready) {
                fflush(stdout);
                double m1 = py_time(&py, f, reps, out_peer, nn, narrow);
                if (m1 < 0) {
                    printf("| %-10s %7s %7s | %7s %7s | python3 failed\n", "ml_dtypes", "-", "-", "-", "-");
                } else {
                    size_t d = count_diff(out_lowp, out_peer, nn, narrow);
                    any_diff |= d != 0;
                    printf("| %-10s %7.3f %7s | %6.1fx %7s | ", "ml_dtypes", m1, "-", m1 / ns1, "-");
                    if (d == 0)
                        printf("identical\n");
                    else
                        printf("%zu differ\n", d);
                }
            } else {
                printf("| %-10s %7s %7s | %7s %7s |\n", "", "", "", "", "");
            }
            fflush(stdout);
        }
        print_rule();
    }
    if (py.ok && py.versions[0] != '\0')
        printf("ml_dtypes peer versions: %s\n", py.versions);
    printf("torch has no E2M1 conversion (no row). Rows use round-to-nearest where the profile has it "
           "(CUDA E8M0: ru) and the profile's default saturation.\n");
    if (any_diff)
        printf("note: some codes differ from the peer's; run the conformance tests (ctest -L quick) "
               "for the inputs\n");
    py_cleanup(&py);
    free(in);
    free(out_lowp);
    free(out_peer);
    return LOWP_EXIT_OK;
}

int lowp_cmd_bench(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        if (argc < 2)
            lowp_cli_fail("bench: which benchmark? (convert, quantize or attn; lowp bench --help)");
        fputs(bench_usage, stdout);
        return LOWP_EXIT_OK;
    }
    if (strcmp(argv[1], "convert") == 0)
        return bench_convert(argc - 1, argv + 1);
    if (strcmp(argv[1], "quantize") == 0)
        return lowp_bench_quantize(argc - 1, argv + 1);
    if (strcmp(argv[1], "attn") == 0)
        return lowp_bench_attn(argc - 1, argv + 1);
    lowp_cli_fail("bench: unknown benchmark '%s' (there are: convert, quantize, attn)", argv[1]);
}
