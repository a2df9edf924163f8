/* tools/cmd_conform.c: `lowp conform`, the main job.
 *
 * Runs the CPU model against every oracle available on this machine:
 *   decode     every code of every format against the MPFR model's value;
 *   mpfr       every supported (format, profile, mode, saturation): all 2^16 bf16 and f16
 *              inputs widened to binary32 plus the structured set (lowp/cases.h), and the
 *              structured set as binary64, against the independent MPFR model;
 *   cuda-host  every cuda combination against CUDA 13's own host conversion functions
 *              (built when nvcc exists): the same inputs, or all 2^32 with --full;
 *   ml_dtypes  the ml_dtypes profile against ml_dtypes itself (tests/interop_mldtypes.py),
 *              where Python with numpy and ml_dtypes is found;
 *   gpu        the hardware cvt instructions against the model (gpu/lowp_gpu_cvt_check),
 *              where it was built and a GPU is present.
 * One TestFloat-style line per failure (at most 20 per case set), a summary line last,
 * a Markdown report (default reports/conform.md); exit 1 on any mismatch. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "shard.h"
#include "lowp/bits.h"
#include "lowp/cases.h"
#include "lowp/format.h"
#include "lowp/oracle.h"
#ifdef LOWP_HAVE_CUDA_HOST
#include "oracle_cuda_host.h"
#endif

LOWP_COMMAND_DEFINE(conform, "check the CPU model against every oracle on this machine");

#define MAX_FAIL_LINES 20

typedef struct {
    char name[96];   /* e.g. "e4m3 cuda rn sat" */
    char oracle[16]; /* decode, mpfr, cuda-host, ml_dtypes, gpu */
    char input[24];  /* binary32, binary64, all binary32, ... */
    size_t cases, mismatches;
    double seconds;
    int skipped;
    char note[160];
    size_t unit;       /* its index in an unsharded run's order (tools/shard.h) */
    long fail_at;      /* where its failure lines start in the run's fail_log */
    char *fail;        /* its failure lines (after the run), "" if none */
    char *appendix;    /* the GPU check's own report (gpu set only), else NULL */
} case_set;

typedef struct {
    case_set *sets;
    size_t n, cap;
    FILE *fail_log; /* failure lines for the report */
    lowp_shard shard;
    size_t next_unit; /* units declared so far (owned or not) */
    size_t cur_unit;  /* the unit the next new_set is */
} conform_run;

/* Declares the next unit (a case set, in the unsharded order) as the one the next new_set
 * makes; 1 if this shard runs it. */
static int unit_mine(conform_run *run)
{
    run->cur_unit = run->next_unit++;
    return lowp_shard_mine(&run->shard, run->cur_unit);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static case_set *new_set(conform_run *run, const char *oracle, const char *name, const char *input)
{
    if (run->n == run->cap) {
        run->cap = run->cap ? 2 * run->cap : 64;
        case_set *ns = realloc(run->sets, run->cap * sizeof *ns);
        if (ns == NULL)
            lowp_cli_fail("out of memory");
        run->sets = ns;
    }
    case_set *s = &run->sets[run->n++];
    memset(s, 0, sizeof *s);
    s->unit = run->cur_unit; /* unit_mine declared it */
    if (run->fail_log != NULL) {
        fflush(run->fail_log);
        s->fail_at = ftell(run->fail_log);
    }
    snprintf(s->oracle, sizeof s->oracle, "%s", oracle);
    snprintf(s->name, sizeof s->name, "%s", name);
    snprintf(s->input, sizeof s->input, "%s", input);
    return s;
}

static void fail_line(conform_run *run, case_set *s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fail_line(conform_run *run, case_set *s, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (s->mismatches <= MAX_FAIL_LINES) {
        printf("%s [%s]: %s\n", s->name, s->oracle, line);
        if (run->fail_log != NULL)
            fprintf(run->fail_log, "%s [%s]: %s\n", s->name, s->oracle, line);
    }
}

static void codec_label(const lowp_codec *c, char *buf, size_t len)
{
    int has_sat_choice = !(c->format == LOWP_E2M1);
    snprintf(buf, len, "%s %s %s%s", lowp_format_name(c->format), lowp_profile_name(c->profile),
             lowp_round_name(c->round), has_sat_choice ? (c->saturate ? " sat" : " nosat") : "");
}

/* Compare code arrays and account for them in s. Inputs are given as bit patterns. */
static void compare(conform_run *run, case_set *s, lowp_format f, const uint32_t *in32,
                    const uint64_t *in64, const uint16_t *got, const uint16_t *want, size_t n)
{
    int digits = (int)lowp_format_bits(f) / 4;
    for (size_t i = 0; i < n; i++) {
        if (got[i] == want[i])
            continue;
        s->mismatches++;
        if (in32 != NULL) {
            float x;
            memcpy(&x, &in32[i], sizeof x);
            fail_line(run, s, "input 0x%08x (%.9g) got 0x%0*x expected 0x%0*x", in32[i], (double)x, digits,
                      got[i], digits, want[i]);
        } else {
            double x;
            memcpy(&x, &in64[i], sizeof x);
            fail_line(run, s, "input 0x%016llx (%.17g) got 0x%0*x expected 0x%0*x",
                      (unsigned long long)in64[i], x, digits, got[i], digits, want[i]);
        }
    }
    s->cases += n;
}

/* Every supported codec, in a fixed order: format, profile, mode, saturation. */
static size_t all_codecs(lowp_codec *out, size_t cap, int only_profile)
{
    size_t n = 0;
    for (int f = 0; f < LOWP_FORMAT_COUNT; f++)
        for (int p = 0; p < LOWP_PROFILE_COUNT; p++) {
            if (only_profile >= 0 && p != only_profile)
                continue;
            for (int r = 0; r < LOWP_ROUND_COUNT; r++)
                for (int sat = 1; sat >= 0; sat--)
                    if (n < cap && lowp_codec_init(&out[n], (lowp_format)f, (lowp_profile)p, (lowp_round)r, sat, NULL, 0) == 0)
                        n++;
        }
    return n;
}

/* The binary32 inputs of the quick tier for format f: all bf16 and f16 values, then the
 * structured set. */
static size_t quick_inputs(lowp_format f, uint64_t seed, size_t n_random, uint32_t **out)
{
    float *cases;
    size_t nc = lowp_cases_f32(f, seed, 4, n_random, &cases);
    if (nc == 0)
        lowp_cli_fail("out of memory building the case set");
    size_t n = 2 * 65536 + nc;
    uint32_t *v = malloc(n * sizeof *v);
    if (v == NULL)
        lowp_cli_fail("out of memory");
    lowp_codec h;
    lowp_codec_init(&h, LOWP_F16, LOWP_PROFILE_OCP, LOWP_RN, LOWP_SAT_OFF, NULL, 0);
    for (uint32_t i = 0; i < 65536; i++) {
        v[i] = i << 16; /* bf16 widened: exact */
        float x = lowp_decode_f32(LOWP_F16, (uint16_t)i);
        uint32_t b = lowp_f32_bits(x);
        if (lowp_code_is_nan(LOWP_F16, (uint16_t)i)) /* keep the f16 NaN payload, as a cast does */
            b = ((i & 0x8000u) << 16) | 0x7f800000u | ((i & 0x3ffu) << 13);
        v[65536 + i] = b;
    }
    memcpy(v + 2 * 65536, cases, nc * sizeof *cases);
    free(cases);
    *out = v;
    return n;
}

/* Binary64 inputs: the binary32 structured set widened, nudged off binary32 values, and
 * beyond binary32's range. */
static size_t f64_inputs(lowp_format f, uint64_t seed, uint64_t **out)
{
    float *cases;
    size_t nc = lowp_cases_f32(f, seed, 2, 2000, &cases);
    if (nc == 0)
        lowp_cli_fail("out of memory building the case set");
    size_t n = 3 * nc + 8;
    uint64_t *v = malloc(n * sizeof *v);
    if (v == NULL)
        lowp_cli_fail("out of memory");
    size_t k = 0;
    for (size_t i = 0; i < nc; i++) {
        double d = cases[i];
        double up = d * (1.0 + 0x1p-40), down = d * (1.0 - 0x1p-40);
        memcpy(&v[k++], &d, sizeof d);
        memcpy(&v[k++], &up, sizeof up);
        memcpy(&v[k++], &down, sizeof down);
    }
    const double extra[8] = {0x1p-160, -0x1p-160, 0x1p-1074, 1e300, -1e300, 0x1.fffffffffffffp+127,
                             0x1.000000fffffffp+0, -0x1.0000010000001p-126};
    for (int i = 0; i < 8; i++)
        memcpy(&v[k++], &extra[i], sizeof extra[i]);
    free(cases);
    *out = v;
    return k;
}

static void run_decode(conform_run *run)
{
    if (!unit_mine(run))
        return;
    case_set *s = new_set(run, "decode", "every code, every format", "codes");
    double t0 = now_s();
    for (int f = 0; f < LOWP_FORMAT_COUNT; f++) {
        lowp_format fm = (lowp_format)f;
        for (uint32_t c = 0; c < lowp_format_code_count(fm); c++) {
            double want = lowp_oracle_decode(fm, (uint16_t)c);
            double got = lowp_decode_f64(fm, (uint16_t)c);
            float got32 = lowp_decode_f32(fm, (uint16_t)c);
            int sw = signbit(want) != 0, sg = signbit(got) != 0, sg32 = signbit(got32) != 0;
            int same = (isnan(want) && isnan(got) && isnan(got32) && sw == sg && sw == sg32) ||
                       (got == want && (double)got32 == want && sw == sg && sw == sg32);
            s->cases++;
            if (!same) {
                s->mismatches++;
                fail_line(run, s, "%s code 0x%x got %a expected %a", lowp_format_name(fm), c, got, want);
            }
        }
    }
    s->seconds = now_s() - t0;
}

static void run_mpfr(conform_run *run, uint64_t seed)
{
    lowp_codec codecs[128];
    size_t nc = all_codecs(codecs, 128, -1);
    /* The oracle and lowp_codec_init must agree on what exists. */
    case_set *sup = unit_mine(run) ? new_set(run, "mpfr", "supported combinations", "(f,p,r,sat)") : NULL;
    for (int f = 0; f < LOWP_FORMAT_COUNT && sup != NULL; f++)
        for (int p = 0; p < LOWP_PROFILE_COUNT; p++)
            for (int r = 0; r < LOWP_ROUND_COUNT; r++)
                for (int sat = 0; sat < 2; sat++) {
                    lowp_codec c;
                    int lowp_has = lowp_codec_init(&c, (lowp_format)f, (lowp_profile)p, (lowp_round)r, sat, NULL, 0) == 0;
                    int oracle_has = lowp_oracle_supported((lowp_format)f, (lowp_profile)p, (lowp_round)r, sat) == 1;
                    sup->cases++;
                    if (lowp_has != oracle_has) {
                        sup->mismatches++;
                        fail_line(run, sup, "%s %s %s %s: lowp %s, oracle %s", lowp_format_name((lowp_format)f),
                                  lowp_profile_name((lowp_profile)p), lowp_round_name((lowp_round)r),
                                  sat ? "sat" : "nosat", lowp_has ? "has it" : "refuses",
                                  oracle_has ? "has it" : "refuses");
                    }
                }

    uint32_t *in32[LOWP_FORMAT_COUNT] = {0};
    uint64_t *in64[LOWP_FORMAT_COUNT] = {0};
    size_t n32[LOWP_FORMAT_COUNT], n64[LOWP_FORMAT_COUNT];
    for (int f = 0; f < LOWP_FORMAT_COUNT; f++) {
        n32[f] = quick_inputs((lowp_format)f, seed, 4096, &in32[f]);
        n64[f] = f64_inputs((lowp_format)f, seed, &in64[f]);
    }
    int progress = lowp_progress_wanted();
    for (size_t k = 0; k < nc; k++) {
        const lowp_codec *c = &codecs[k];
        char label[96];
        codec_label(c, label, sizeof label);
        if (progress)
            fprintf(stderr, "\rmpfr %zu/%zu %-28s", k + 1, nc, label);
        for (int width = 32; width <= 64; width += 32) {
            if (!unit_mine(run))
                continue;
            case_set *s = new_set(run, "mpfr", label, width == 32 ? "binary32" : "binary64");
            double t0 = now_s();
            size_t n = width == 32 ? n32[c->format] : n64[c->format];
            uint16_t *got = malloc(n * sizeof *got), *want = malloc(n * sizeof *want);
            if (got == NULL || want == NULL)
                lowp_cli_fail("out of memory");
            int bad_oracle = 0;
            if (width == 32)
                lowp_encode_f32_u16(c, (const float *)(const void *)in32[c->format], got, n);
#pragma omp parallel for schedule(dynamic, 4096) reduction(| : bad_oracle)
            for (long i = 0; i < (long)n; i++) {
                if (width == 32) {
                    float x;
                    memcpy(&x, &in32[c->format][i], sizeof x);
                    bad_oracle |= lowp_oracle_encode_f32(c->format, c->profile, c->round, c->saturate, x, &want[i]) != 0;
                } else {
                    double x;
                    memcpy(&x, &in64[c->format][i], sizeof x);
                    got[i] = lowp_encode_f64(c, x);
                    bad_oracle |= lowp_oracle_encode_f64(c->format, c->profile, c->round, c->saturate, x, &want[i]) != 0;
                }
            }
            if (bad_oracle) {
                s->mismatches++;
                fail_line(run, s, "the MPFR oracle failed on this combination");
            }
            compare(run, s, c->format, width == 32 ? in32[c->format] : NULL, width == 64 ? in64[c->format] : NULL,
                    got, want, n);
            free(got);
            free(want);
            s->seconds = now_s() - t0;
        }
    }
    if (progress)
        fprintf(stderr, "\r%60s\r", "");
    for (int f = 0; f < LOWP_FORMAT_COUNT; f++) {
        free(in32[f]);
        free(in64[f]);
    }
}

#ifdef LOWP_HAVE_CUDA_HOST
static void run_cuda_host(conform_run *run, uint64_t seed, int full)
{
    lowp_codec codecs[64];
    size_t nc = all_codecs(codecs, 64, LOWP_PROFILE_CUDA);
    int progress = lowp_progress_wanted();
    for (size_t k = 0; k < nc; k++) {
        const lowp_codec *c = &codecs[k];
        char label[96];
        codec_label(c, label, sizeof label);
        if (!lowp_cuda_host_has_f32(c->format, c->round, c->saturate)) {
            if (!unit_mine(run))
                continue;
            case_set *s = new_set(run, "cuda-host", label, "binary32");
            s->mismatches = 1;
            fail_line(run, s, "lowp has this cuda combination but CUDA has no such host function");
            continue;
        }
        int mine32 = unit_mine(run);
        size_t u32 = run->cur_unit;
        int has64 = lowp_cuda_host_has_f64(c->format, c->round, c->saturate);
        int mine64 = has64 && unit_mine(run);
        size_t u64 = run->cur_unit;
        run->cur_unit = u32;
        case_set *s = mine32 ? new_set(run, "cuda-host", label, full ? "all binary32" : "binary32") : NULL;
        double t0 = now_s();
        if (s == NULL) {
            /* the binary32 set is another shard's */
        } else if (full) {
            const size_t chunk = (size_t)1 << 24;
            uint32_t *in = malloc(chunk * sizeof *in);
            uint16_t *got = malloc(chunk * sizeof *got), *want = malloc(chunk * sizeof *want);
            if (in == NULL || got == NULL || want == NULL)
                lowp_cli_fail("out of memory");
            for (uint64_t base = 0; base < ((uint64_t)1 << 32); base += chunk) {
                if (progress)
                    fprintf(stderr, "\rcuda-host %-24s %5.1f%%", label, 100.0 * (double)base / 4294967296.0);
#pragma omp parallel for schedule(static)
                for (long i = 0; i < (long)chunk; i++)
                    in[i] = (uint32_t)(base + (uint64_t)i);
                lowp_encode_f32_u16(c, (const float *)(const void *)in, got, chunk);
                lowp_cuda_host_encode_f32(c->format, c->round, c->saturate, (const float *)(const void *)in, want, chunk);
                compare(run, s, c->format, in, NULL, got, want, chunk);
            }
            free(in);
            free(got);
            free(want);
        } else {
            uint32_t *in;
            size_t n = quick_inputs(c->format, seed, (size_t)1 << 20, &in);
            uint16_t *got = malloc(n * sizeof *got), *want = malloc(n * sizeof *want);
            if (got == NULL || want == NULL)
                lowp_cli_fail("out of memory");
            lowp_encode_f32_u16(c, (const float *)(const void *)in, got, n);
            lowp_cuda_host_encode_f32(c->format, c->round, c->saturate, (const float *)(const void *)in, want, n);
            compare(run, s, c->format, in, NULL, got, want, n);
            free(in);
            free(got);
            free(want);
        }
        if (s != NULL)
            s->seconds = now_s() - t0;
        if (mine64) {
            run->cur_unit = u64;
            case_set *s64 = new_set(run, "cuda-host", label, "binary64");
            t0 = now_s();
            uint64_t *in;
            size_t n = f64_inputs(c->format, seed, &in);
            uint16_t *got = malloc(n * sizeof *got), *want = malloc(n * sizeof *want);
            if (got == NULL || want == NULL)
                lowp_cli_fail("out of memory");
            for (size_t i = 0; i < n; i++) {
                double x;
                memcpy(&x, &in[i], sizeof x);
                got[i] = lowp_encode_f64(c, x);
            }
            lowp_cuda_host_encode_f64(c->format, c->round, c->saturate, (const double *)(const void *)in, want, n);
            compare(run, s64, c->format, NULL, in, got, want, n);
            free(in);
            free(got);
            free(want);
            s64->seconds = now_s() - t0;
        }
    }
    if (progress)
        fprintf(stderr, "\r%60s\r", "");
}
#endif

static int file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* The path of one of conform's helpers, found relative to the running lowp executable
 * (never through the source or build tree it was compiled in, which an installed lowp may
 * no longer have): first where `cmake --install` puts it relative to the bin directory
 * (installed, e.g. "../share/lowp/interop_mldtypes.py"; tools/CMakeLists.txt computes
 * these from GNUInstallDirs), then where the build tree has it relative to build/tools
 * (build_rel, e.g. "../ref/liblowp.so"). Returns 0 and the path found; 1 with buf holding
 * the installed candidate when neither exists (the report names it). */
static int helper_path(char *buf, size_t len, const char *installed_rel, const char *build_rel)
{
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        snprintf(buf, len, "%s", installed_rel);
        return 1;
    }
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash != NULL)
        *slash = '\0';
    /* a path that does not fit buf is treated as absent */
    if ((size_t)snprintf(buf, len, "%s/%s", exe, installed_rel) < len && file_exists(buf))
        return 0;
    if ((size_t)snprintf(buf, len, "%s/%s", exe, build_rel) < len && file_exists(buf))
        return 0;
    if ((size_t)snprintf(buf, len, "%s/%s", exe, installed_rel) >= len)
        snprintf(buf, len, "%s", installed_rel);
    return 1;
}

/* Run an external checker; its stdout lines are passed through (and into the report).
 * When first / last are not NULL, the first and the last line starting with prefix are
 * kept there (each at most len bytes, newline dropped; "" if none). Returns its exit
 * status, or -1 if it could not be started or did not exit normally. */
static int run_external(conform_run *run, const char *cmd, const char *prefix, char *first, char *last,
                        size_t len)
{
    if (first != NULL)
        first[0] = last[0] = '\0';
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        return -1;
    char line[1024];
    while (fgets(line, sizeof line, p) != NULL) {
        fputs(line, stdout);
        if (run->fail_log != NULL)
            fputs(line, run->fail_log);
        if (first != NULL && strncmp(line, prefix, strlen(prefix)) == 0) {
            size_t n = strcspn(line, "\n");
            n = n < len - 1 ? n : len - 1;
            if (first[0] == '\0') {
                memcpy(first, line, n);
                first[n] = '\0';
            }
            memcpy(last, line, n);
            last[n] = '\0';
        }
    }
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A mkstemp / mkdtemp template in $TMPDIR (else /tmp). */
static void temp_name(char *buf, size_t len, const char *leaf)
{
    const char *d = getenv("TMPDIR");
    snprintf(buf, len, "%s/%s", d != NULL && d[0] != '\0' ? d : "/tmp", leaf);
}

/* The first line of a file (at most len bytes, newline dropped; "" if none). */
static void first_line(const char *path, char *buf, size_t len)
{
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return;
    if (fgets(buf, (int)len, f) == NULL)
        buf[0] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
    fclose(f);
}

static void run_mldtypes(conform_run *run, int full)
{
    char python[4096], script[4096], lib[4096], cmd[20480];
    int no_script = helper_path(script, sizeof script, LOWP_INSTALLED_DATA "/interop_mldtypes.py",
                                "../share/lowp/interop_mldtypes.py");
    int no_lib = helper_path(lib, sizeof lib, LOWP_INSTALLED_LIB "/liblowp.so", "../ref/liblowp.so");
    lowp_cli_python(python, sizeof python);
    if (!unit_mine(run))
        return;
    case_set *s = new_set(run, "ml_dtypes", "ml_dtypes profile, every format", full ? "all binary32" : "binary32+64");
    if (no_script || no_lib) {
        s->skipped = 1;
        snprintf(s->note, sizeof s->note, "helper not installed beside lowp (%.100s)", no_script ? script : lib);
        return;
    }
    /* The helper's stderr goes to a temporary file: on a failure that is not a comparison
     * (Python or a module missing, liblowp.so not loadable, as in a sanitizer build where
     * the ASan runtime is not first in the process), its first line is the reason. */
    char errpath[4200];
    temp_name(errpath, sizeof errpath, "lowp-conform-mldtypes-XXXXXX");
    int efd = mkstemp(errpath);
    if (efd < 0) {
        s->skipped = 1;
        snprintf(s->note, sizeof s->note, "cannot create a temporary file for the helper's stderr");
        return;
    }
    close(efd);
    snprintf(cmd, sizeof cmd, "'%s' '%s' --lib '%s' --quick-summary%s 2>'%s'", python, script, lib,
             full ? " --full" : "", errpath);
    double t0 = now_s();
    char head[256], summary[256], err[256];
    int rc = run_external(run, cmd, "interop_mldtypes: ", head, summary, sizeof summary);
    s->seconds = now_s() - t0;
    first_line(errpath, err, sizeof err);
    unlink(errpath);
    /* A comparison ran iff the helper printed its "N passed, M failed" summary and did
     * not say first that it cannot load the library (it then reports "0 passed, 1
     * failed" too). Anything else is a setup failure, reported as a skip with its reason,
     * never as a mismatch. */
    size_t np = 0, nf = 0;
    int compared = sscanf(summary, "interop_mldtypes: %zu passed, %zu failed", &np, &nf) == 2 &&
                   strstr(head, "cannot load") == NULL;
    if (rc == 77 || rc == 127) {
        s->skipped = 1;
        snprintf(s->note, sizeof s->note, "Python with numpy and ml_dtypes not found (%.100s)", python);
    } else if ((rc == 0 && compared && nf == 0) || (rc == 1 && compared && nf > 0)) {
        s->cases = 1;
        s->mismatches = nf;
        snprintf(s->note, sizeof s->note, "tests/interop_mldtypes.py exit %d: %zu of %zu case sets failed", rc,
                 nf, np + nf);
    } else {
        s->skipped = 1;
        snprintf(s->note, sizeof s->note, "setup failed, nothing compared (helper exit %d): %.100s", rc,
                 err[0] ? err : head[0] ? head : "no output");
    }
}

/* The whole of a (small) text file, NUL-terminated, or NULL if it cannot be read; at most
 * 4 MiB (the GPU cvt report is a few KiB). */
static char *read_text(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    while (b != NULL && n < ((size_t)4 << 20)) {
        if (n + 1 >= cap) {
            char *nb = realloc(b, cap *= 2);
            if (nb == NULL) {
                free(b);
                b = NULL;
                break;
            }
            b = nb;
        }
        size_t got = fread(b + n, 1, cap - 1 - n, f);
        if (got == 0)
            break;
        n += got;
    }
    fclose(f);
    if (b != NULL)
        b[n] = '\0';
    return b;
}

/* The GPU cvt check (LOWP_GPU_CVT_CHECK, else the installed or built lowp_gpu_cvt_check) writes
 * a Markdown report of its own. It writes it into a private temporary folder, removed
 * afterwards; the text is returned (NULL if none) to become the last section of the
 * conform report when one is written. So --report D/x.md writes D/x.md and nothing
 * beside it, and --no-report writes nothing. */
static char *run_gpu(conform_run *run)
{
    char exe[4096], cmd[12288], dir[4096], path[4200], tmp[4300];
    temp_name(dir, sizeof dir, "lowp-conform-gpu-XXXXXX");
    const char *env_exe = getenv("LOWP_GPU_CVT_CHECK");
    if (env_exe != NULL)
        snprintf(exe, sizeof exe, "%s", env_exe);
    else
        helper_path(exe, sizeof exe, LOWP_INSTALLED_LIBEXEC "/lowp_gpu_cvt_check", "../gpu/lowp_gpu_cvt_check");
    if (!unit_mine(run))
        return NULL;
    case_set *s = new_set(run, "gpu", "hardware cvt (E4M3/E5M2/BF16/F16)", "all binary32");
    if (!file_exists(exe)) {
        s->skipped = 1;
        snprintf(s->note, sizeof s->note, "GPU harness not built (no nvcc at build time)");
        return NULL;
    }
    if (mkdtemp(dir) == NULL) {
        s->skipped = 1;
        snprintf(s->note, sizeof s->note, "cannot create a temporary folder for its report");
        return NULL;
    }
    snprintf(path, sizeof path, "%s/gpu-cvt.md", dir);
    snprintf(cmd, sizeof cmd, "'%s' '%s' 2>&1", exe, path);
    double t0 = now_s();
    int rc = run_external(run, cmd, NULL, NULL, NULL, 0);
    s->seconds = now_s() - t0;
    char *text = read_text(path);
    snprintf(tmp, sizeof tmp, "%s.tmp", path); /* the helper's own temporary, if it stopped */
    unlink(path);
    unlink(tmp);
    rmdir(dir);
    if (rc == 77) {
        s->skipped = 1;
        snprintf(s->note, sizeof s->note, "no GPU on this machine");
    } else {
        s->cases = 1;
        s->mismatches = rc != 0;
        snprintf(s->note, sizeof s->note, "lowp_gpu_cvt_check exit %d%s", rc,
                 text != NULL ? "; its report is the last section" : "; it wrote no report");
    }
    return text;
}

/* The Markdown report. timed: a run (its machine, date, thread count and seconds are
 * known); 0 for a merged result, which holds none of them (tools/shard.h), so that the
 * report of a merge is the same bytes whatever the shards ran on. */
static void write_report(const conform_run *run, const char *path, int full, uint64_t seed, double seconds,
                         int timed)
{
    FILE *f = lowp_out_open(path, 0);
    size_t sets = 0, failed = 0, skipped = 0, cases = 0;
    for (size_t i = 0; i < run->n; i++) {
        sets++;
        skipped += run->sets[i].skipped != 0;
        failed += run->sets[i].mismatches != 0;
        cases += run->sets[i].cases;
    }
    fprintf(f, "# lowp conform%s\n\n", full ? " --full" : "");
    fprintf(f, "- command: `lowp conform%s --seed 0x%llx`\n", full ? " --full" : "", (unsigned long long)seed);
    if (timed) {
        char machine[512], commit[64], date[64];
        lowp_machine_description(machine, sizeof machine);
        lowp_source_commit(commit, sizeof commit);
        time_t t = time(NULL);
        strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&t));
        fprintf(f, "- machine: %s\n- lowp %s, commit %s, %s\n- %d OpenMP threads, %.1f s\n\n", machine,
                LOWP_VERSION, commit, date, omp_get_max_threads(), seconds);
    } else {
        fprintf(f, "- merged from shard results (`lowp conform --merge`), which record no machine, date or "
                "times\n\n");
    }
    fprintf(f, "**%zu case sets: %zu passed, %zu failed, %zu skipped; %zu inputs compared.**\n\n", sets,
            sets - failed - skipped, failed, skipped, cases);
    fprintf(f, "| oracle | combination | inputs | cases | mismatches | seconds | note |\n|---|---|---|---:|---:|---:|---|\n");
    for (size_t i = 0; i < run->n; i++) {
        const case_set *s = &run->sets[i];
        char mism[32], secs[32];
        snprintf(mism, sizeof mism, s->mismatches ? "**%zu**" : "%zu", s->mismatches);
        snprintf(secs, sizeof secs, timed ? "%.2f" : "-", s->seconds);
        fprintf(f, "| %s | %s | %s | %zu | %s | %s | %s |\n", s->oracle, s->name, s->input, s->cases,
                s->skipped ? "skipped" : mism, secs, s->note);
    }
    if (failed > 0) {
        fprintf(f, "\n## Failures (at most %d lines per case set)\n\n```\n", MAX_FAIL_LINES);
        for (size_t i = 0; i < run->n; i++)
            fputs(run->sets[i].fail ? run->sets[i].fail : "", f);
        fputs("```\n", f);
    }
    for (size_t i = 0; i < run->n; i++)
        if (run->sets[i].appendix != NULL)
            fprintf(f, "\n## The GPU cvt check's report (lowp_gpu_cvt_check)\n\n%s", run->sets[i].appendix);
    lowp_out_commit(f);
}

/* ---- results (tools/shard.h) ----------------------------------------------------------- */

static json_t *result_args(int full, uint64_t seed, const char *only)
{
    json_t *a = json_object();
    if (a == NULL)
        lowp_cli_fail("out of memory");
    char b[32];
    snprintf(b, sizeof b, "0x%llx", (unsigned long long)seed);
    lowp_json_set_u64(a, "full", (uint64_t)full);
    lowp_json_set_str(a, "seed", b);
    lowp_json_set_str(a, "only", only != NULL ? only : "");
#ifdef LOWP_HAVE_CUDA_HOST
    lowp_json_set_u64(a, "cuda_host_built", 1);
#else
    lowp_json_set_u64(a, "cuda_host_built", 0);
#endif
    return a;
}

static void write_result(const conform_run *run, const char *path, int full, uint64_t seed, const char *only)
{
    json_t *res = lowp_result_new("conform", result_args(full, seed, only), &run->shard, run->next_unit);
    for (size_t i = 0; i < run->n; i++) {
        const case_set *s = &run->sets[i];
        json_t *o = lowp_result_unit(res, s->unit);
        lowp_json_set_str(o, "oracle", s->oracle);
        lowp_json_set_str(o, "name", s->name);
        lowp_json_set_str(o, "input", s->input);
        lowp_json_set_u64(o, "cases", s->cases);
        lowp_json_set_u64(o, "mismatches", s->mismatches);
        lowp_json_set_u64(o, "skipped", (uint64_t)s->skipped);
        lowp_json_set_str(o, "note", s->note);
        lowp_json_set_str(o, "failures", s->fail ? s->fail : "");
        lowp_json_set_str(o, "appendix", s->appendix ? s->appendix : "");
    }
    lowp_result_write(res, path);
    json_decref(res);
}

static char *dup_or_fail(const char *s)
{
    char *d = strdup(s);
    if (d == NULL)
        lowp_cli_fail("out of memory");
    return d;
}

/* The case sets of a merged result into run; *full and *seed from its args. */
static void load_merged(conform_run *run, const json_t *res, int *full, uint64_t *seed)
{
    const json_t *args = lowp_result_args(res);
    *full = lowp_json_u64(args, "full") != 0;
    *seed = lowp_cli_parse_seed("merge: seed", lowp_json_str(args, "seed"));
    size_t n = lowp_result_count(res);
    run->sets = calloc(n ? n : 1, sizeof *run->sets);
    if (run->sets == NULL)
        lowp_cli_fail("out of memory");
    for (size_t u = 0; u < n; u++) {
        const json_t *o = lowp_result_at(res, u);
        case_set *s = &run->sets[run->n++];
        s->unit = u;
        snprintf(s->oracle, sizeof s->oracle, "%s", lowp_json_str(o, "oracle"));
        snprintf(s->name, sizeof s->name, "%s", lowp_json_str(o, "name"));
        snprintf(s->input, sizeof s->input, "%s", lowp_json_str(o, "input"));
        snprintf(s->note, sizeof s->note, "%s", lowp_json_str(o, "note"));
        s->cases = (size_t)lowp_json_u64(o, "cases");
        s->mismatches = (size_t)lowp_json_u64(o, "mismatches");
        s->skipped = lowp_json_u64(o, "skipped") != 0;
        s->fail = dup_or_fail(lowp_json_str(o, "failures"));
        const char *ap = lowp_json_str(o, "appendix");
        s->appendix = ap[0] ? dup_or_fail(ap) : NULL;
    }
    run->next_unit = n;
}

/* --only: a comma-separated list of oracle names, each one of ORACLES; returned as given
 * (a refused list ends the program with exit 2). */
static const char *const ORACLES[] = {"decode", "mpfr", "cuda-host", "ml_dtypes", "gpu"};
static const char *oracle_list(const char *list)
{
    const char *p = list;
    do {
        size_t len = strcspn(p, ","), k;
        for (k = 0; k < sizeof ORACLES / sizeof *ORACLES; k++)
            if (strlen(ORACLES[k]) == len && strncmp(p, ORACLES[k], len) == 0)
                break;
        if (k == sizeof ORACLES / sizeof *ORACLES)
            lowp_cli_fail("conform: --only '%s': '%.*s' is not an oracle (decode, mpfr, cuda-host, ml_dtypes, "
                          "gpu)", list, (int)len, p);
        p += len;
    } while (*p++ == ',');
    return list;
}

/* Whether oracle name is in the --only list (every oracle when there is none). */
static int oracle_wanted(const char *only, const char *name)
{
    if (only == NULL)
        return 1;
    size_t n = strlen(name);
    for (const char *p = only; *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && strncmp(p, name, n) == 0)
            return 1;
        p += len + (p[len] == ',');
    }
    return 0;
}

static void usage(void)
{
    puts("usage: lowp conform [--full] [--seed S] [--report FILE | --no-report] [--only ORACLES]\n"
         "                    [--shard K/N | --shard auto] [--result FILE.json]\n"
         "       lowp conform --merge A.json B.json ... [--result FILE.json] [--report FILE | --no-report]\n"
         "checks the CPU model against every oracle on this machine (MPFR, CUDA's host\n"
         "functions, ml_dtypes, the GPU's cvt instructions); --full sweeps all 2^32 binary32\n"
         "inputs against CUDA's host functions and ml_dtypes. Report: reports/conform.md (the GPU\n"
         "check's own report is its last section; nothing else is written). --only runs the\n"
         "named oracles (decode,mpfr,cuda-host,ml_dtypes,gpu). Helpers: LOWP_PYTHON (ml_dtypes),\n"
         "LOWP_GPU_CVT_CHECK (the GPU cvt check program).\n"
         "--shard K/N runs case sets i with i mod N = K (0-based; auto: the MPI rank and size) and\n"
         "needs --result (no report: --merge writes it); --result writes the run's deterministic\n"
         "result (JSON, no times); --merge checks that the files are shards 0..N-1 of one run and\n"
         "writes the report and --result exactly as one unsharded run's --merge would.");
}

int lowp_cmd_conform(int argc, char **argv)
{
    int full = 0, want_report = 1, merge = 0, case_opts = 0;
    const char *only = NULL, *result = NULL;
    uint64_t seed = LOWP_DEFAULT_SEED;
    const char *report = "reports/conform.md";
    const char *env_seed = getenv("LOWP_SEED");
    const char *report_flag = NULL; /* --report or --no-report, whichever was given */
    lowp_shard shard = {0, 1};
    int shard_given = 0;
    char **files = calloc((size_t)argc + 1, sizeof *files);
    size_t n_files = 0;
    if (files == NULL)
        lowp_cli_fail("out of memory");
    if (env_seed != NULL)
        seed = lowp_cli_parse_seed("LOWP_SEED", env_seed);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--full") == 0) {
            full = 1;
            case_opts = 1;
        } else if (strcmp(argv[i], "--seed") == 0) {
            seed = lowp_cli_parse_seed("--seed", lowp_cli_option_value(argc, argv, &i));
            case_opts = 1;
        } else if (strcmp(argv[i], "--report") == 0) {
            lowp_cli_flag_once("--report", &report_flag);
            report = lowp_cli_option_value(argc, argv, &i);
            lowp_out_check("--report", report);
        } else if (strcmp(argv[i], "--no-report") == 0) {
            lowp_cli_flag_once("--no-report", &report_flag);
            want_report = 0;
        } else if (strcmp(argv[i], "--only") == 0) {
            if (only != NULL)
                lowp_cli_fail("conform: --only given twice");
            only = oracle_list(lowp_cli_option_value(argc, argv, &i));
            case_opts = 1;
        } else if (strcmp(argv[i], "--shard") == 0) {
            lowp_cli_parse_shard("--shard", lowp_cli_option_value(argc, argv, &i), &shard.k, &shard.n);
            shard_given = 1;
        } else if (strcmp(argv[i], "--result") == 0) {
            result = lowp_cli_option_value(argc, argv, &i);
            lowp_out_check("--result", result);
        } else if (strcmp(argv[i], "--merge") == 0) {
            merge = 1;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage();
            free(files);
            return LOWP_EXIT_OK;
        } else if (merge && argv[i][0] != '-') {
            files[n_files++] = argv[i];
        } else
            lowp_cli_fail("conform: unknown argument '%s' (see lowp conform --help)", argv[i]);
    }
    if (merge && (case_opts || shard_given))
        lowp_cli_fail("conform --merge: the cases come from the results; --full, --seed, --only and --shard do "
                      "not apply (LOWP_SEED is ignored)");
    if (merge && n_files == 0)
        lowp_cli_fail("conform --merge: no result files given");
    if (shard.n > 1 && result == NULL)
        lowp_cli_fail("conform --shard %zu/%zu: a shard writes only its result: give --result FILE", shard.k,
                      shard.n);
    if (shard.n > 1 && report_flag != NULL && want_report)
        lowp_cli_fail("conform --shard: a shard writes no report (conform --merge writes it)");
    if (shard.n > 1)
        want_report = 0;
    if (result != NULL && want_report)
        lowp_cli_check_distinct_outputs("--report", report, "--result", result);
    char report_dir[4096];
    snprintf(report_dir, sizeof report_dir, "%s", report);
    char *slash = strrchr(report_dir, '/');
    if (slash != NULL)
        *slash = '\0';
    else
        snprintf(report_dir, sizeof report_dir, ".");

    conform_run run = {0};
    run.shard = shard;
    double seconds = 0.0;
    json_t *merged = NULL;
    if (merge) {
        merged = lowp_result_merge("conform", files, n_files);
        load_merged(&run, merged, &full, &seed);
        printf("lowp conform --merge: %zu shard results, %zu case sets, seed 0x%llx\n", n_files, run.n,
               (unsigned long long)seed);
    } else {
        char *fail_text = NULL;
        size_t fail_len = 0;
        run.fail_log = open_memstream(&fail_text, &fail_len);
        if (run.fail_log == NULL)
            lowp_cli_fail("out of memory");
        printf("lowp conform%s: seed 0x%llx (override with --seed or LOWP_SEED), %d threads", full ? " --full" : "",
               (unsigned long long)seed, omp_get_max_threads());
        if (shard.n > 1)
            printf(", shard %zu/%zu", shard.k, shard.n);
        printf("\n");
        fflush(stdout);
        double t0 = now_s();
        if (oracle_wanted(only, "decode"))
            run_decode(&run);
        if (oracle_wanted(only, "mpfr"))
            run_mpfr(&run, seed);
        if (oracle_wanted(only, "cuda-host")) {
#ifdef LOWP_HAVE_CUDA_HOST
            run_cuda_host(&run, seed, full);
#else
            if (unit_mine(&run)) {
                case_set *s = new_set(&run, "cuda-host", "CUDA host functions", "-");
                s->skipped = 1;
                snprintf(s->note, sizeof s->note, "not built: no nvcc at build time");
            }
#endif
        }
        char *gpu_text = NULL;
        if (oracle_wanted(only, "ml_dtypes"))
            run_mldtypes(&run, full);
        if (oracle_wanted(only, "gpu"))
            gpu_text = run_gpu(&run);
        seconds = now_s() - t0;
        fclose(run.fail_log);
        run.fail_log = NULL;
        /* each set's failure lines: from its start to the next set's */
        for (size_t i = 0; i < run.n; i++) {
            long a = run.sets[i].fail_at, b = i + 1 < run.n ? run.sets[i + 1].fail_at : (long)fail_len;
            run.sets[i].fail = malloc((size_t)(b - a) + 1);
            if (run.sets[i].fail == NULL)
                lowp_cli_fail("out of memory");
            memcpy(run.sets[i].fail, fail_text ? fail_text + a : "", (size_t)(b - a));
            run.sets[i].fail[b - a] = '\0';
            if (strcmp(run.sets[i].oracle, "gpu") == 0 && gpu_text != NULL) {
                run.sets[i].appendix = gpu_text;
                gpu_text = NULL;
            }
        }
        free(gpu_text);
        free(fail_text);
    }

    size_t passed = 0, failed = 0, skipped = 0, cases = 0;
    for (size_t i = 0; i < run.n; i++) {
        const case_set *cs = &run.sets[i];
        cases += cs->cases;
        if (cs->skipped) {
            skipped++;
            printf("skipped: %s [%s]: %s\n", cs->name, cs->oracle, cs->note);
        } else if (cs->mismatches) {
            failed++;
            printf("FAILED: %s [%s] %s: %zu mismatches\n", cs->name, cs->oracle, cs->input, cs->mismatches);
        } else
            passed++;
    }
    if (want_report && !file_exists(report_dir) && mkdir(report_dir, 0777) != 0)
        lowp_cli_fail("cannot create the report folder '%s'", report_dir);
    if (result != NULL) {
        if (merged != NULL)
            lowp_result_write(merged, result);
        else
            write_result(&run, result, full, seed, only);
    }
    if (want_report)
        write_report(&run, report, full, seed, seconds, !merge);
    if (merge)
        printf("conform: %zu inputs compared%s%s\n", cases, want_report ? "; report " : "",
               want_report ? report : "");
    else
        printf("conform: %zu inputs compared in %.1f s%s%s\n", cases, seconds, want_report ? "; report " : "",
               want_report ? report : "");
    printf("conform: %zu passed, %zu failed, %zu skipped\n", passed, failed, skipped);
    for (size_t i = 0; i < run.n; i++) {
        free(run.sets[i].fail);
        free(run.sets[i].appendix);
    }
    free(run.sets);
    free(files);
    json_decref(merged);
    return failed ? LOWP_EXIT_MISMATCH : LOWP_EXIT_OK;
}
