/* tools/cmd_vectors.c: elementwise and block golden vectors.
 *
 *   lowp vectors gen    [--dir DIR] [--seed S] [--commit C]
 *   lowp vectors check  FILE --results R [--errors N] [--nan-any]
 *   lowp vectors verify [--dir DIR] [--errors N]
 *   lowp vectors gen-block    [--dir DIR] [--seed S] [--commit C]
 *   lowp vectors check-block  FILE --results R [--errors N]
 *   lowp vectors run-block    FILE [--out R]
 *   lowp vectors verify-block [--dir DIR] [--errors N]
 *
 * Elementwise: one text file per (operation, profile, rounding mode, saturation) that
 * lowp_codec_init accepts, in the TestFloat style: '#' header lines, then one case per line,
 * "<binary32 input bits> <expected code> [# flags]". Block: one JSON file per (block format,
 * recipe) that lowp_recipe_check accepts, in the Wycheproof style, expected codes from the
 * MPFR recipe oracle (lowp/oracle_block.h), read back through jansson. vectors/README.md is
 * the contract.
 *
 * Reproducibility: a file is a pure function of (format, profile, mode, saturation, seed,
 * commit string). The commit is provenance only: gen takes it from --commit (default:
 * lowp_source_commit, else "unknown"), and the regeneration test
 * passes the one recorded in the committed files, so it can compare byte for byte. */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include "lowp/block.h"
#include "lowp/cases.h"
#include "lowp/format.h"
#include "lowp/oracle_block.h"

#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#ifndef LOWP_VERSION
#define LOWP_VERSION "unknown" /* tools/CMakeLists.txt passes the project version */
#endif

LOWP_COMMAND_DEFINE(vectors, "generate or check elementwise and block golden vectors");

#define VEC_DEFAULT_DIR "vectors/elementwise"
#define VEC_PER_EXPONENT 1u
#define VEC_N_RANDOM 500u
#define VEC_ERRORS_DEFAULT 20L
#define VEC_OP_PREFIX "f32_to_"

/* ---------------------------------------------------------------------------------
 * Flags: what edge of the format a case input sits on. Properties of the input and the
 * format only (the same for every profile); see vectors/README.md. */
enum {
    VF_NAN = 1u << 0,
    VF_INF = 1u << 1,
    VF_ZERO = 1u << 2,
    VF_EXACT = 1u << 3,     /* |x| is a finite value of the format */
    VF_BOUNDARY = 1u << 4,  /* |x| is one binary32 ulp from a finite value */
    VF_TIE = 1u << 5,       /* |x| is the midpoint of two adjacent values */
    VF_NEAR_TIE = 1u << 6,  /* |x| is one binary32 ulp from such a midpoint */
    VF_SUBNORMAL = 1u << 7, /* binary32 subnormal, or below the format's smallest normal */
    VF_OVERFLOW = 1u << 8,  /* |x| above the largest finite value */
    VF_RANDOM = 1u << 9     /* from the random part, and none of the above */
};
static const char *const vf_names[] = {"nan",      "inf",       "zero",     "exact", "boundary",
                                       "tie",      "near-tie",  "subnormal", "overflow", "random"};
#define VF_COUNT (sizeof vf_names / sizeof vf_names[0])

static const char *const profile_about[LOWP_PROFILE_COUNT] = {
    "CUDA 13 cuda_fp8.h / cuda_fp4.h / cuda_bf16.h / cuda_fp16.h host conversions and PTX cvt",
    "PyTorch 2.11 tensor.to(dtype) on CPU tensors",
    "ml_dtypes 0.6 astype (numpy float16 for f16)",
    "OCP 8-bit FP and MX v1.0 specifications, IEEE 754 rounding",
};
static const char *const format_about[LOWP_FORMAT_COUNT] = {
    "OCP MX FP4 E2M1: 1 sign, 2 exponent, 1 fraction bit; bias 1; max 6; no Inf or NaN; "
    "code in the low nibble",
    "OCP FP8 E4M3 (fn): 1 sign, 4 exponent, 3 fraction bits; bias 7; max 448; "
    "NaN S.1111.111; no Inf",
    "OCP FP8 E5M2: 1 sign, 5 exponent, 2 fraction bits; bias 15; max 57344; IEEE Inf and NaN",
    "OCP MX E8M0 scale: unsigned 2^(c-127) for c = 0..254; 0xff is NaN; no zero, sign or Inf",
    "bfloat16: 1 sign, 8 exponent, 7 fraction bits",
    "IEEE 754 binary16: 1 sign, 5 exponent, 10 fraction bits",
};
static const char *const round_about[LOWP_ROUND_COUNT] = {
    "to nearest, ties to even (e8m0: to the nearer power of two, 1.5*2^e going up)",
    "toward zero",
    "toward +Inf (e8m0: magnitude up)",
    "toward -Inf (e8m0: magnitude down)",
    "to nearest, ties away from zero",
};

/* ---------------------------------------------------------------------------------
 * Small helpers. */

static float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL)
        lowp_cli_fail("out of memory");
    return p;
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (p == NULL)
        lowp_cli_fail("out of memory");
    return p;
}

/* Hex digits of a code of format f: 1 (e2m1), 2 (8-bit formats) or 4 (16-bit formats). */
static int code_digits(lowp_format f)
{
    return (int)(lowp_format_bits(f) + 3) / 4;
}

/* A number for a human: "464", "-0", "nan", "-inf", "1.40129846e-45". */
static void fmt_value(char *buf, size_t len, double v)
{
    if (isnan(v))
        snprintf(buf, len, "%snan", signbit(v) ? "-" : "");
    else if (isinf(v))
        snprintf(buf, len, "%sinf", v < 0 ? "-" : "");
    else
        snprintf(buf, len, "%.9g", v);
}

static const char *sat_name(int sat)
{
    return sat ? "sat" : "nosat";
}

/* "f32_to_e4m3.cuda.rn.sat" */
static void vec_name(char *buf, size_t len, lowp_format f, lowp_profile p, lowp_round r, int sat)
{
    snprintf(buf, len, VEC_OP_PREFIX "%s.%s.%s.%s", lowp_format_name(f), lowp_profile_name(p),
             lowp_round_name(r), sat_name(sat));
}

/* "--name VALUE" or "--name=VALUE" at argv[*i]; returns the value or NULL if argv[*i] is
 * not this option. */
static const char *opt_value(int argc, char **argv, int *i, const char *name)
{
    size_t n = strlen(name);
    const char *a = argv[*i];
    if (strncmp(a, name, n) != 0)
        return NULL;
    if (a[n] == '=')
        return a + n + 1;
    if (a[n] != '\0')
        return NULL;
    if (*i + 1 >= argc)
        lowp_cli_fail("vectors: option %s needs a value", name);
    return argv[++*i];
}

static uint64_t parse_seed(const char *s)
{
    char *end;
    errno = 0;
    if (*s == '\0' || *s == '-' || *s == '+' || *s == ' ')
        lowp_cli_fail("vectors: --seed '%s' is not a non-negative integer", s);
    unsigned long long v = strtoull(s, &end, 0);
    if (errno != 0 || *end != '\0')
        lowp_cli_fail("vectors: --seed '%s' is not an integer below 2^64 (decimal or 0x hex)", s);
    return (uint64_t)v;
}

static long parse_errors(const char *s)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || *end != '\0' || *s == '\0' || v < 0)
        lowp_cli_fail("vectors: --errors '%s' is not a non-negative integer", s);
    return v;
}

/* A commit string is one printable token: it lands on one header line. */
static int commit_ok(const char *c)
{
    size_t n = strlen(c);
    if (n == 0 || n > 64)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (c[i] <= ' ' || c[i] > '~')
            return 0;
    return 1;
}

/* ---------------------------------------------------------------------------------
 * The format's ladder: its positive finite values and the midpoints between them, for
 * classifying inputs. */

typedef struct {
    lowp_format f;
    double *val; /* val[c]: value of positive code c, c = 0..maxc (increasing) */
    size_t nval;
    double *mid; /* mid[i]: midpoint below code i+1; mid[maxc] is the overflow threshold */
    size_t nmid;
    double maxv, min_normal;
} ladder;

static void ladder_init(ladder *L, lowp_format f)
{
    uint16_t maxc = lowp_format_max_code(f);
    L->f = f;
    L->nval = (size_t)maxc + 1;
    L->nmid = (size_t)maxc + 1;
    L->val = xmalloc(L->nval * sizeof *L->val);
    L->mid = xmalloc(L->nmid * sizeof *L->mid);
    for (uint32_t c = 0; c <= maxc; c++)
        L->val[c] = lowp_decode_f64(f, (uint16_t)c);
    for (uint32_t c = 1; c <= maxc; c++)
        L->mid[c - 1] = (f == LOWP_E8M0) ? 0.75 * L->val[c] : 0.5 * (L->val[c - 1] + L->val[c]);
    L->maxv = L->val[maxc];
    L->mid[maxc] = (f == LOWP_E8M0) ? 1.5 * L->maxv : L->maxv + 0.5 * (L->maxv - L->val[maxc - 1]);
    L->min_normal = (f == LOWP_E8M0) ? L->val[0] : ldexp(1.0, 1 - lowp_format_bias(f));
}

static void ladder_free(ladder *L)
{
    free(L->val);
    free(L->mid);
}

static long find_sorted(const double *a, size_t n, double x)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t m = lo + (hi - lo) / 2;
        if (a[m] < x)
            lo = m + 1;
        else
            hi = m;
    }
    return (lo < n && a[lo] == x) ? (long)lo : -1;
}

/* Flags of input u (VF_RANDOM excepted) and, through *anchor, the positive code the
 * input is a boundary or tie case of (the upper code for a tie; maxc+1 for the overflow
 * threshold), or -1. */
static unsigned classify(const ladder *L, uint32_t u, long *anchor)
{
    float x = f32_from_bits(u);
    *anchor = -1;
    if (isnan(x))
        return VF_NAN;
    if (isinf(x))
        return VF_INF;
    if (x == 0.0f)
        return VF_ZERO;
    float a = fabsf(x);
    float lo = nextafterf(a, 0.0f), hi = nextafterf(a, INFINITY);
    unsigned fl = 0;
    long k;
    if ((k = find_sorted(L->val, L->nval, a)) >= 0) {
        fl |= VF_EXACT;
        *anchor = k;
    } else if ((k = find_sorted(L->val, L->nval, lo)) >= 0 ||
               (k = find_sorted(L->val, L->nval, hi)) >= 0) {
        fl |= VF_BOUNDARY;
        *anchor = k;
    }
    if ((k = find_sorted(L->mid, L->nmid, a)) >= 0) {
        fl |= VF_TIE;
        *anchor = k + 1;
    } else if ((k = find_sorted(L->mid, L->nmid, lo)) >= 0 ||
               (k = find_sorted(L->mid, L->nmid, hi)) >= 0) {
        fl |= VF_NEAR_TIE;
        *anchor = k + 1;
    }
    if ((u & 0x7f800000u) == 0 || (double)a < L->min_normal)
        fl |= VF_SUBNORMAL;
    if ((double)a > L->maxv)
        fl |= VF_OVERFLOW;
    return fl;
}

/* 16-bit formats: boundary and tie cases are kept only around codes whose fraction field
 * is 0 or 1 (both ends of every binade: both tie parities, the power-of-two steps) and the
 * largest finite code and overflow threshold. The full sets have ~390k cases per file. */
static int anchor_kept(lowp_format f, long anchor)
{
    if (lowp_format_bits(f) <= 8 || anchor < 0)
        return 1;
    long mmask = (1L << lowp_format_mantissa_bits(f)) - 1;
    return (anchor & mmask) <= 1 || anchor >= (long)lowp_format_max_code(f);
}

/* ---------------------------------------------------------------------------------
 * A format's case set: lowp_cases_f32, duplicates (same bits) removed keeping the first
 * occurrence, flags attached, 16-bit formats thinned as above. */

typedef struct {
    uint32_t *in;
    uint16_t *flags;
    size_t n;
} case_set;

static void case_set_build(case_set *cs, lowp_format f, uint64_t seed)
{
    float *v = NULL;
    size_t n = lowp_cases_f32(f, seed, VEC_PER_EXPONENT, VEC_N_RANDOM, &v);
    size_t n_random = 510u * VEC_PER_EXPONENT + VEC_N_RANDOM; /* 255 exponents x 2 signs */
    if (n == 0 || v == NULL)
        lowp_cli_fail("vectors: out of memory building the %s case set", lowp_format_name(f));
    if (n < n_random)
        lowp_cli_fail("vectors: %s case set has %zu cases, fewer than its random part",
                      lowp_format_name(f), n);
    size_t n_struct = n - n_random;

    size_t cap = 1;
    while (cap < 2 * n)
        cap <<= 1;
    uint64_t *seen = xcalloc(cap, sizeof *seen); /* bits + 1; 0 = empty */
    ladder L;
    ladder_init(&L, f);
    cs->in = xmalloc(n * sizeof *cs->in);
    cs->flags = xmalloc(n * sizeof *cs->flags);
    cs->n = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t u = f32_bits(v[i]);
        size_t h = (size_t)((u * UINT64_C(0x9e3779b97f4a7c15)) >> 17) & (cap - 1);
        int dup = 0;
        while (seen[h] != 0) {
            if (seen[h] == (uint64_t)u + 1) {
                dup = 1;
                break;
            }
            h = (h + 1) & (cap - 1);
        }
        if (dup)
            continue;
        seen[h] = (uint64_t)u + 1;
        long anchor;
        unsigned fl = classify(&L, u, &anchor);
        if (i < n_struct) {
            if (!anchor_kept(f, anchor))
                continue;
        } else if (fl == 0) {
            fl = VF_RANDOM;
        }
        cs->in[cs->n] = u;
        cs->flags[cs->n] = (uint16_t)fl;
        cs->n++;
    }
    ladder_free(&L);
    free(seen);
    free(v);
}

static void case_set_free(case_set *cs)
{
    free(cs->in);
    free(cs->flags);
}

/* ---------------------------------------------------------------------------------
 * gen */

static void gen_usage(FILE *f)
{
    fprintf(f, "usage: lowp vectors gen [--dir DIR] [--seed S] [--commit C]\n"
               "  Write one file per (f32_to_FORMAT, profile, mode, saturation) lowp accepts.\n"
               "  --dir DIR    output directory (default " VEC_DEFAULT_DIR "; created if missing;\n"
               "               stale f32_to_*.txt files in it are removed)\n"
               "  --seed S     seed of the random cases (default 0x%" PRIx64 ")\n"
               "  --commit C   commit recorded in the headers (default: git rev-parse --short=12\n"
               "               HEAD of the source tree, or \"unknown\")\n",
            (uint64_t)LOWP_DEFAULT_SEED);
}

static void mkdir_p(const char *dir)
{
    char path[4096];
    if (strlen(dir) >= sizeof path)
        lowp_cli_fail("vectors: directory path is too long: %.64s...", dir);
    snprintf(path, sizeof path, "%s", dir);
    for (char *p = path + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(path, 0777) != 0 && errno != EEXIST)
                lowp_cli_fail("vectors: cannot create directory '%s': %s", path, strerror(errno));
            *p = c;
            if (c == '\0')
                break;
        }
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        lowp_cli_fail("vectors: '%s' is not a directory", dir);
}

static void write_header(FILE *o, const char *name, const lowp_codec *c, uint64_t seed,
                         const char *commit, size_t n)
{
    lowp_format f = c->format;
    int d = code_digits(f);
    fprintf(o, "# lowp elementwise golden vectors: %s\n", name);
    fprintf(o, "# operation: " VEC_OP_PREFIX "%s (IEEE 754 binary32 input -> %s code)\n",
            lowp_format_name(f), lowp_format_name(f));
    fprintf(o, "# format: %s\n", lowp_format_name(f));
    fprintf(o, "# profile: %s\n", lowp_profile_name(c->profile));
    fprintf(o, "# rounding: %s\n", lowp_round_name(c->round));
    fprintf(o, "# saturation: %s\n", sat_name(c->saturate));
    fprintf(o, "# format %s = %s\n", lowp_format_name(f), format_about[f]);
    fprintf(o, "# profile %s = %s\n", lowp_profile_name(c->profile), profile_about[c->profile]);
    fprintf(o, "# rounding %s = %s\n", lowp_round_name(c->round), round_about[c->round]);
    fprintf(o, "# saturation %s = %s\n", sat_name(c->saturate),
            c->saturate ? "overflow and Inf give the largest finite value with the input's sign"
                        : "overflow gives Inf, or NaN where the format has no Inf");
    fprintf(o, "# seed: 0x%" PRIx64 "\n", seed);
    fprintf(o, "# case set: lowp_cases_f32(%s, seed, per_exponent %u, n_random %u); "
               "repeated inputs dropped, first kept\n",
            lowp_format_name(f), VEC_PER_EXPONENT, VEC_N_RANDOM);
    if (lowp_format_bits(f) > 8)
        fprintf(o, "# case set: boundary and tie cases only around codes whose fraction field is "
                   "0 or 1, the largest finite code and the overflow threshold\n");
    fprintf(o, "# cases: %zu\n", n);
    fprintf(o, "# line format: <input: binary32 bits, 8 hex digits> <expected code: %d hex "
               "digit%s> [# flags]\n",
            d, d > 1 ? "s" : "");
    fprintf(o, "# flags:");
    for (size_t i = 0; i < VF_COUNT; i++)
        fprintf(o, " %s", vf_names[i]);
    fprintf(o, " (see vectors/README.md)\n");
    fprintf(o, "# generated by: lowp vectors gen --seed 0x%" PRIx64 "\n", seed);
    fprintf(o, "# lowp version: " LOWP_VERSION "\n");
    fprintf(o, "# commit: %s\n", commit);
}

static void write_flags(FILE *o, unsigned fl)
{
    if (fl == 0)
        return;
    fputs(" #", o);
    for (size_t i = 0; i < VF_COUNT; i++)
        if (fl & (1u << i)) {
            fputc(' ', o);
            fputs(vf_names[i], o);
        }
}

static void gen_one(const char *dir, const case_set *cs, const lowp_codec *c, uint64_t seed,
                   const char *commit, float *xs, uint16_t *codes, char *name, size_t name_len)
{
    vec_name(name, name_len, c->format, c->profile, c->round, c->saturate);
    char path[4352];
    snprintf(path, sizeof path, "%s/%s.txt", dir, name);
    for (size_t i = 0; i < cs->n; i++)
        codes[i] = lowp_encode_f32(c, xs[i]);
    FILE *o = lowp_out_open(path, 0);
    write_header(o, name, c, seed, commit, cs->n);
    int d = code_digits(c->format);
    for (size_t i = 0; i < cs->n; i++) {
        fprintf(o, "%08" PRIx32 " %0*x", cs->in[i], d, (unsigned)codes[i]);
        write_flags(o, cs->flags[i]);
        fputc('\n', o);
    }
    lowp_out_commit(o);
}

typedef struct {
    char (*names)[96];
    size_t n, cap;
} name_list;

static void name_list_add(name_list *l, const char *s)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 128;
        l->names = realloc(l->names, l->cap * sizeof *l->names);
        if (l->names == NULL)
            lowp_cli_fail("out of memory");
    }
    snprintf(l->names[l->n++], sizeof l->names[0], "%s", s);
}

static int name_list_has(const name_list *l, const char *s)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->names[i], s) == 0)
            return 1;
    return 0;
}

static int is_vector_file_name(const char *s)
{
    size_t n = strlen(s);
    return strncmp(s, VEC_OP_PREFIX, strlen(VEC_OP_PREFIX)) == 0 && n > 4 &&
           strcmp(s + n - 4, ".txt") == 0;
}

static int cmd_gen(int argc, char **argv)
{
    const char *dir = VEC_DEFAULT_DIR;
    uint64_t seed = LOWP_DEFAULT_SEED;
    const char *commit_arg = NULL;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            gen_usage(stdout);
            return LOWP_EXIT_OK;
        } else if ((v = opt_value(argc, argv, &i, "--dir")) != NULL) {
            if (*v == '\0')
                lowp_cli_fail("vectors gen: --dir is empty");
            dir = v;
        } else if ((v = opt_value(argc, argv, &i, "--seed")) != NULL) {
            seed = parse_seed(v);
        } else if ((v = opt_value(argc, argv, &i, "--commit")) != NULL) {
            if (!commit_ok(v))
                lowp_cli_fail("vectors gen: --commit '%.80s' must be 1 to 64 printable "
                              "characters without spaces",
                              v);
            commit_arg = v;
        } else {
            lowp_cli_fail("vectors gen: unknown argument '%s' (try 'lowp vectors gen --help')",
                          argv[i]);
        }
    }
    if (strlen(dir) > 3800)
        lowp_cli_fail("vectors gen: --dir path is too long");
    char commit[80];
    if (commit_arg != NULL)
        snprintf(commit, sizeof commit, "%s", commit_arg);
    else
        lowp_source_commit(commit, sizeof commit);
    if (!commit_ok(commit))
        snprintf(commit, sizeof commit, "unknown");

    mkdir_p(dir);
    name_list written = {0};
    size_t files = 0, total = 0;
    int progress = lowp_progress_wanted();
    for (int f = 0; f < LOWP_FORMAT_COUNT; f++) {
        case_set cs;
        case_set_build(&cs, (lowp_format)f, seed);
        float *xs = xmalloc(cs.n * sizeof *xs);
        uint16_t *codes = xmalloc(cs.n * sizeof *codes);
        for (size_t i = 0; i < cs.n; i++)
            xs[i] = f32_from_bits(cs.in[i]);
        for (int p = 0; p < LOWP_PROFILE_COUNT; p++)
            for (int r = 0; r < LOWP_ROUND_COUNT; r++)
                for (int sat = 1; sat >= 0; sat--) {
                    lowp_codec c;
                    if (lowp_codec_init(&c, (lowp_format)f, (lowp_profile)p, (lowp_round)r,
                                        sat ? LOWP_SAT_ON : LOWP_SAT_OFF, NULL, 0) != 0)
                        continue;
                    char name[96], file[128];
                    gen_one(dir, &cs, &c, seed, commit, xs, codes, name, sizeof name);
                    snprintf(file, sizeof file, "%s.txt", name);
                    name_list_add(&written, file);
                    files++;
                    total += cs.n;
                    if (progress)
                        fprintf(stderr, "\rlowp vectors gen: %zu files", files);
                }
        free(xs);
        free(codes);
        case_set_free(&cs);
    }
    if (progress)
        fputc('\n', stderr);

    /* The directory holds exactly the generated set: drop files of combinations that no
     * longer exist. */
    DIR *d = opendir(dir);
    if (d != NULL) {
        struct dirent *e;
        name_list stale = {0};
        while ((e = readdir(d)) != NULL)
            if (is_vector_file_name(e->d_name) && !name_list_has(&written, e->d_name))
                name_list_add(&stale, e->d_name);
        closedir(d);
        for (size_t i = 0; i < stale.n; i++) {
            char path[4352];
            snprintf(path, sizeof path, "%s/%s", dir, stale.names[i]);
            if (remove(path) == 0)
                printf("removed stale %s\n", path);
        }
        free(stale.names);
    }
    free(written.names);
    printf("wrote %zu vector files, %zu cases, to %s (seed 0x%" PRIx64 ", commit %s)\n", files,
           total, dir, seed, commit);
    return LOWP_EXIT_OK;
}

/* ---------------------------------------------------------------------------------
 * Reading a vector file (check and verify). */

typedef struct {
    const char *path;
    char name[256]; /* file name without directory and ".txt" */
    unsigned char *buf;
    int have_format, have_profile, have_round, have_sat;
    lowp_format format;
    lowp_profile profile;
    lowp_round round;
    int sat;
    long declared; /* "# cases:" or -1 */
    size_t n;
    uint32_t *in;
    uint16_t *code;
    long *line;       /* line number of each case */
    const char **note; /* flags text of each case ("" if none) */
} vec_file;

static int hexval(int ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* Exactly `digits` hex digits at s; returns the value or -1. */
static long hex_fixed(const char *s, int digits)
{
    long v = 0;
    for (int i = 0; i < digits; i++) {
        int h = hexval((unsigned char)s[i]);
        if (h < 0)
            return -1;
        v = v * 16 + h;
    }
    return v;
}

static void header_value(const char *line, const char *key, char *out, size_t len)
{
    const char *v = line + 2 + strlen(key) + 1;
    while (*v == ' ' || *v == '\t')
        v++;
    size_t k = strcspn(v, " \t");
    if (k >= len)
        k = len - 1;
    memcpy(out, v, k);
    out[k] = '\0';
}

/* "# key:" at the start of line? */
static int is_header(const char *line, const char *key)
{
    size_t k = strlen(key);
    return strncmp(line, "# ", 2) == 0 && strncmp(line + 2, key, k) == 0 && line[2 + k] == ':';
}

static void vec_file_read(vec_file *vf, const char *path)
{
    memset(vf, 0, sizeof *vf);
    vf->path = path;
    vf->declared = -1;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    snprintf(vf->name, sizeof vf->name, "%s", base);
    size_t bl = strlen(vf->name);
    if (bl > 4 && strcmp(vf->name + bl - 4, ".txt") == 0)
        vf->name[bl - 4] = '\0';

    size_t len;
    vf->buf = lowp_read_all(path, &len);
    unsigned char *nb = realloc(vf->buf, len + 1);
    if (nb == NULL)
        lowp_cli_fail("out of memory");
    vf->buf = nb;
    vf->buf[len] = '\0';
    if (memchr(vf->buf, '\0', len) != NULL)
        lowp_cli_fail("%s: not a text file (contains a NUL byte)", path);

    size_t cap = 1;
    for (size_t i = 0; i < len; i++)
        cap += vf->buf[i] == '\n';
    vf->in = xmalloc(cap * sizeof *vf->in);
    vf->code = xmalloc(cap * sizeof *vf->code);
    vf->line = xmalloc(cap * sizeof *vf->line);
    vf->note = xmalloc(cap * sizeof *vf->note);

    char *s = (char *)vf->buf, *end = s + len;
    long lineno = 0;
    while (s < end) {
        char *nl = memchr(s, '\n', (size_t)(end - s));
        char *e = nl ? nl : end;
        lineno++;
        *e = '\0';
        if (e > s && e[-1] == '\r')
            e[-1] = '\0';
        char *line = s;
        s = nl ? nl + 1 : end;
        if (line[0] == '#') {
            char v[64];
            if (is_header(line, "format")) {
                header_value(line, "format", v, sizeof v);
                if (lowp_format_parse(v, &vf->format) != 0)
                    lowp_cli_fail("%s line %ld: unknown format '%s'", path, lineno, v);
                if (vf->n > 0 && vf->have_format)
                    lowp_cli_fail("%s line %ld: second '# format:' line after cases", path, lineno);
                vf->have_format = 1;
            } else if (is_header(line, "profile")) {
                header_value(line, "profile", v, sizeof v);
                if (lowp_profile_parse(v, &vf->profile) != 0)
                    lowp_cli_fail("%s line %ld: unknown profile '%s'", path, lineno, v);
                vf->have_profile = 1;
            } else if (is_header(line, "rounding")) {
                header_value(line, "rounding", v, sizeof v);
                if (lowp_round_parse(v, &vf->round) != 0)
                    lowp_cli_fail("%s line %ld: unknown rounding mode '%s'", path, lineno, v);
                vf->have_round = 1;
            } else if (is_header(line, "saturation")) {
                header_value(line, "saturation", v, sizeof v);
                if (strcmp(v, "sat") == 0)
                    vf->sat = 1;
                else if (strcmp(v, "nosat") == 0)
                    vf->sat = 0;
                else
                    lowp_cli_fail("%s line %ld: saturation '%s' is neither sat nor nosat", path,
                                  lineno, v);
                vf->have_sat = 1;
            } else if (is_header(line, "cases")) {
                header_value(line, "cases", v, sizeof v);
                char *ep;
                errno = 0;
                long c = strtol(v, &ep, 10);
                if (errno != 0 || *ep != '\0' || *v == '\0' || c < 0)
                    lowp_cli_fail("%s line %ld: '# cases:' is not a count", path, lineno);
                vf->declared = c;
            }
            continue;
        }
        if (!vf->have_format)
            lowp_cli_fail("%s line %ld: a case line before the '# format:' header line", path,
                          lineno);
        int d = code_digits(vf->format);
        long in = hex_fixed(line, 8), code = -1;
        const char *rest = "";
        if (in >= 0 && line[8] == ' ') {
            code = hex_fixed(line + 9, d);
            if (code >= 0)
                rest = line + 9 + d;
        }
        if (in < 0 || code < 0 || (rest[0] != '\0' && strncmp(rest, " #", 2) != 0) ||
            code > (long)((1u << lowp_format_bits(vf->format)) - 1))
            lowp_cli_fail("%s line %ld: expected '<8 hex digits> <%d hex digit%s> [# flags]', "
                          "found '%.40s'",
                          path, lineno, d, d > 1 ? "s" : "", line);
        const char *note = rest[0] ? rest + 2 : "";
        while (*note == ' ')
            note++;
        vf->in[vf->n] = (uint32_t)in;
        vf->code[vf->n] = (uint16_t)code;
        vf->line[vf->n] = lineno;
        vf->note[vf->n] = note;
        vf->n++;
    }
    if (!vf->have_format)
        lowp_cli_fail("%s: no '# format:' header line: not a lowp vector file", path);
    if (vf->declared >= 0 && (size_t)vf->declared != vf->n)
        lowp_cli_fail("%s: the header says %ld cases but the file has %zu (truncated?)", path,
                      vf->declared, vf->n);
}

static void vec_file_free(vec_file *vf)
{
    free(vf->buf);
    free(vf->in);
    free(vf->code);
    free(vf->line);
    free(vf->note);
}

/* One TestFloat-style line:
 * "f32_to_e4m3.cuda.rn.sat line 123: input 0x43e80000 (464) got 0x7f expected 0x7e (nan vs 448) [tie overflow]" */
static void print_failure(const vec_file *vf, size_t k, unsigned got, const char *got_word,
                          const char *exp_word)
{
    char xs[40], gs[40], es[40];
    int d = code_digits(vf->format);
    fmt_value(xs, sizeof xs, (double)f32_from_bits(vf->in[k]));
    fmt_value(gs, sizeof gs, lowp_decode_f64(vf->format, (uint16_t)got));
    fmt_value(es, sizeof es, lowp_decode_f64(vf->format, vf->code[k]));
    printf("%s line %ld: input 0x%08" PRIx32 " (%s) %s 0x%0*x %s 0x%0*x (%s vs %s)", vf->name,
           vf->line[k], vf->in[k], xs, got_word, d, got, exp_word, d, (unsigned)vf->code[k], gs,
           es);
    if (vf->note[k][0] != '\0')
        printf(" [%s]", vf->note[k]);
    putchar('\n');
}

/* ---------------------------------------------------------------------------------
 * check */

static void check_usage(FILE *f)
{
    fprintf(f,
            "usage: lowp vectors check FILE --results R [--errors N] [--nan-any]\n"
            "  Compare another implementation's codes with a vector file.\n"
            "  R: one code per line in hex, in the order of FILE's cases ('0x' optional;\n"
            "     blank lines and '#' comments ignored); lines 'INPUT CODE' (FILE's own\n"
            "     format) are accepted too, and INPUT must then equal the case's input.\n"
            "  --errors N   print at most N failure lines (default 20; 0: all)\n"
            "  --nan-any    any NaN code matches an expected NaN code\n"
            "  Exit status: 0 all match, 1 mismatches, 2 bad input.\n");
}

/* A hex token: optional 0x, 1..max_digits digits. Returns -1 if malformed. */
static long parse_hex_token(const char *t, size_t len, int max_digits)
{
    if (len > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X')) {
        t += 2;
        len -= 2;
    }
    if (len == 0 || len > (size_t)max_digits)
        return -1;
    return hex_fixed(t, (int)len);
}

static uint16_t *read_results(const char *rpath, const vec_file *vf)
{
    size_t len;
    unsigned char *buf = lowp_read_all(rpath, &len);
    unsigned char *nb = realloc(buf, len + 1);
    if (nb == NULL)
        lowp_cli_fail("out of memory");
    buf = nb;
    buf[len] = '\0';
    if (memchr(buf, '\0', len) != NULL)
        lowp_cli_fail("%s: not a text file (contains a NUL byte)", rpath);
    uint16_t *got = xmalloc((vf->n ? vf->n : 1) * sizeof *got);
    unsigned maxcode = (1u << lowp_format_bits(vf->format)) - 1;
    size_t k = 0;
    char *s = (char *)buf, *end = s + len;
    long lineno = 0;
    while (s < end) {
        char *nl = memchr(s, '\n', (size_t)(end - s));
        char *e = nl ? nl : end;
        lineno++;
        *e = '\0';
        char *line = s;
        s = nl ? nl + 1 : end;
        char *hash = strchr(line, '#');
        if (hash != NULL)
            *hash = '\0';
        const char *tok[3];
        size_t tlen[3];
        int nt = 0;
        for (char *p = line; *p;) {
            while (*p == ' ' || *p == '\t' || *p == '\r' || *p == ',')
                p++;
            if (*p == '\0')
                break;
            char *q = p;
            while (*q && *q != ' ' && *q != '\t' && *q != '\r' && *q != ',')
                q++;
            if (nt == 3)
                break;
            tok[nt] = p;
            tlen[nt] = (size_t)(q - p);
            nt++;
            p = q;
        }
        if (nt == 0)
            continue;
        if (nt > 2)
            lowp_cli_fail("%s line %ld: expected 'CODE' or 'INPUT CODE' in hex, found more fields",
                          rpath, lineno);
        if (k >= vf->n)
            lowp_cli_fail("%s line %ld: more results than %s has cases (%zu)", rpath, lineno,
                          vf->path, vf->n);
        if (nt == 2) {
            long in = parse_hex_token(tok[0], tlen[0], 8);
            if (in < 0)
                lowp_cli_fail("%s line %ld: input '%.*s' is not a binary32 bit pattern in hex",
                              rpath, lineno, (int)(tlen[0] > 20 ? 20 : tlen[0]), tok[0]);
            if ((uint32_t)in != vf->in[k])
                lowp_cli_fail("%s line %ld: input 0x%08lx, but case %zu of %s (line %ld) has "
                              "input 0x%08" PRIx32 ": results out of order",
                              rpath, lineno, (unsigned long)in, k + 1, vf->path, vf->line[k],
                              vf->in[k]);
        }
        const char *ct = tok[nt - 1];
        size_t cl = tlen[nt - 1];
        long code = parse_hex_token(ct, cl, 8);
        if (code < 0)
            lowp_cli_fail("%s line %ld: '%.*s' is not a code in hex", rpath, lineno,
                          (int)(cl > 20 ? 20 : cl), ct);
        if ((unsigned long)code > maxcode)
            lowp_cli_fail("%s line %ld: code 0x%lx does not fit in %u bits (%s)", rpath, lineno,
                          (unsigned long)code, lowp_format_bits(vf->format),
                          lowp_format_name(vf->format));
        got[k++] = (uint16_t)code;
    }
    free(buf);
    if (k != vf->n)
        lowp_cli_fail("%s: %zu results, but %s has %zu cases", rpath, k, vf->path, vf->n);
    return got;
}

static int cmd_check(int argc, char **argv)
{
    const char *file = NULL, *results = NULL;
    long max_errors = VEC_ERRORS_DEFAULT;
    int nan_any = 0;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            check_usage(stdout);
            return LOWP_EXIT_OK;
        } else if ((v = opt_value(argc, argv, &i, "--results")) != NULL) {
            results = v;
        } else if ((v = opt_value(argc, argv, &i, "--errors")) != NULL) {
            max_errors = parse_errors(v);
        } else if (strcmp(argv[i], "--nan-any") == 0) {
            nan_any = 1;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            lowp_cli_fail("vectors check: unknown option '%s' (try 'lowp vectors check --help')",
                          argv[i]);
        } else if (file == NULL) {
            file = argv[i];
        } else {
            lowp_cli_fail("vectors check: one vector FILE at a time ('%s' is a second one)",
                          argv[i]);
        }
    }
    if (file == NULL)
        lowp_cli_fail("vectors check: no vector FILE given (try 'lowp vectors check --help')");
    if (results == NULL)
        lowp_cli_fail("vectors check: --results R is required");
    if (strcmp(file, "-") == 0 && strcmp(results, "-") == 0)
        lowp_cli_fail("vectors check: FILE and R cannot both be standard input");

    vec_file vf;
    vec_file_read(&vf, file);
    uint16_t *got = read_results(results, &vf);
    size_t bad = 0;
    for (size_t k = 0; k < vf.n; k++) {
        unsigned g = got[k], e = vf.code[k];
        if (g == e || (nan_any && lowp_code_is_nan(vf.format, (uint16_t)g) &&
                       lowp_code_is_nan(vf.format, (uint16_t)e)))
            continue;
        if (max_errors == 0 || (long)bad < max_errors)
            print_failure(&vf, k, g, "got", "expected");
        bad++;
    }
    if (max_errors > 0 && (long)bad > max_errors)
        printf("(%zu more mismatches not shown; --errors 0 shows all)\n", bad - (size_t)max_errors);
    printf("%zu cases, %zu mismatches in %s\n", vf.n, bad, vf.name);
    free(got);
    vec_file_free(&vf);
    return bad ? LOWP_EXIT_MISMATCH : LOWP_EXIT_OK;
}

/* ---------------------------------------------------------------------------------
 * verify */

static void verify_usage(FILE *f)
{
    fprintf(f, "usage: lowp vectors verify [--dir DIR] [--errors N]\n"
               "  Re-derive every expected code in DIR (default " VEC_DEFAULT_DIR ") with this\n"
               "  lowp and report differences, files lowp would not generate and files missing.\n"
               "  --errors N   print at most N difference lines (default 20; 0: all)\n"
               "  Exit status: 0 no difference, 1 differences, 2 bad input.\n");
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp((const char *)a, (const char *)b);
}

static int cmd_verify(int argc, char **argv)
{
    const char *dir = VEC_DEFAULT_DIR;
    long max_errors = VEC_ERRORS_DEFAULT;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            verify_usage(stdout);
            return LOWP_EXIT_OK;
        } else if ((v = opt_value(argc, argv, &i, "--dir")) != NULL) {
            dir = v;
        } else if ((v = opt_value(argc, argv, &i, "--errors")) != NULL) {
            max_errors = parse_errors(v);
        } else {
            lowp_cli_fail("vectors verify: unknown argument '%s' (try 'lowp vectors verify "
                          "--help')",
                          argv[i]);
        }
    }
    if (strlen(dir) > 3800)
        lowp_cli_fail("vectors verify: --dir path is too long");
    DIR *d = opendir(dir);
    if (d == NULL)
        lowp_cli_fail("vectors verify: cannot read directory '%s': %s", dir, strerror(errno));
    name_list present = {0};
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (is_vector_file_name(e->d_name))
            name_list_add(&present, e->d_name);
    closedir(d);
    if (present.n > 0)
        qsort(present.names, present.n, sizeof present.names[0], cmp_names);
    if (present.n == 0)
        lowp_cli_fail("vectors verify: no " VEC_OP_PREFIX "*.txt files in '%s'", dir);

    size_t cases = 0, diffs = 0, shown = 0, problems = 0;
    for (size_t i = 0; i < present.n; i++) {
        char path[4352];
        snprintf(path, sizeof path, "%s/%s", dir, present.names[i]);
        vec_file vf;
        vec_file_read(&vf, path);
        if (!vf.have_profile || !vf.have_round || !vf.have_sat)
            lowp_cli_fail("%s: missing one of the '# profile:', '# rounding:', '# saturation:' "
                          "header lines",
                          path);
        char want[96];
        vec_name(want, sizeof want, vf.format, vf.profile, vf.round, vf.sat);
        if (strcmp(want, vf.name) != 0)
            lowp_cli_fail("%s: the header describes %s; the file name does not match", path, want);
        lowp_codec c;
        char why[256];
        if (lowp_codec_init(&c, vf.format, vf.profile, vf.round, vf.sat ? LOWP_SAT_ON : LOWP_SAT_OFF,
                            why, sizeof why) != 0) {
            printf("%s: lowp refuses this combination (%s); gen would not write it\n", vf.name,
                   why);
            problems++;
            vec_file_free(&vf);
            continue;
        }
        /* Both entry points: the scalar encoder (what gen writes) and the array encoder,
         * which format.h promises gives the same codes. */
        float *xs = xmalloc(vf.n * sizeof *xs);
        uint16_t *arr = xmalloc(vf.n * sizeof *arr);
        for (size_t k = 0; k < vf.n; k++)
            xs[k] = f32_from_bits(vf.in[k]);
        lowp_encode_f32_u16(&c, xs, arr, vf.n);
        for (size_t k = 0; k < vf.n; k++) {
            unsigned now = lowp_encode_f32(&c, xs[k]);
            const char *who = "lowp_encode_f32 gives";
            if (now == vf.code[k]) {
                now = arr[k];
                who = "lowp_encode_f32_u16 gives";
            }
            if (now == vf.code[k])
                continue;
            if (max_errors == 0 || (long)shown < max_errors) {
                print_failure(&vf, k, now, who, "file has");
                shown++;
            }
            diffs++;
        }
        free(xs);
        free(arr);
        cases += vf.n;
        vec_file_free(&vf);
    }
    if (max_errors > 0 && diffs > shown)
        printf("(%zu more differences not shown; --errors 0 shows all)\n", diffs - shown);
    /* Every combination lowp accepts has its file. */
    for (int f = 0; f < LOWP_FORMAT_COUNT; f++)
        for (int p = 0; p < LOWP_PROFILE_COUNT; p++)
            for (int r = 0; r < LOWP_ROUND_COUNT; r++)
                for (int sat = 1; sat >= 0; sat--) {
                    lowp_codec c;
                    if (lowp_codec_init(&c, (lowp_format)f, (lowp_profile)p, (lowp_round)r,
                                        sat ? LOWP_SAT_ON : LOWP_SAT_OFF, NULL, 0) != 0)
                        continue;
                    char name[96], file[128];
                    vec_name(name, sizeof name, (lowp_format)f, (lowp_profile)p, (lowp_round)r,
                             sat);
                    snprintf(file, sizeof file, "%s.txt", name);
                    if (!name_list_has(&present, file)) {
                        printf("%s: missing (lowp accepts this combination; run lowp vectors "
                               "gen)\n",
                               name);
                        problems++;
                    }
                }
    printf("%zu files, %zu cases, %zu differences, %zu missing or extra files in %s\n", present.n,
           cases, diffs, problems, dir);
    free(present.names);
    return (diffs || problems) ? LOWP_EXIT_MISMATCH : LOWP_EXIT_OK;
}

/* =================================================================================
 * Block golden vectors: vectors/block/<format>.<recipe>.json (vectors/README.md, "Block
 * vectors"). Every expected code comes from the MPFR recipe oracle (lowp/oracle_block.h),
 * never from block.c; verify-block then holds block.c to the files.
 * ================================================================================= */

#define BV_DEFAULT_DIR "vectors/block"
#define BV_MAX 32     /* elements of one test: one block (16 or 32), or 16 elements */
#define BV_ELEMS_1 16 /* elements of a test of a format with block size 1 */
#define BV_SCHEMA "lowp_block_vectors_v1"
#define BV_SOURCE_VERSION 1

/* Flags: what edge a test sits on. All are computed from the oracle's results (trace,
 * codes, counts) and the group, never from how the input was built. */
enum {
    BF_ZERO_BLOCK,
    BF_NAN_IN,
    BF_INF_IN,
    BF_DENORMAL,
    BF_SCALE_ZERO,
    BF_SCALE_SUB,
    BF_SCALE_NAN,
    BF_SCALE_MAX,
    BF_E2M1_TIE,
    BF_E4M3_TIE,
    BF_E5M2_TIE,
    BF_BF16_TIE,
    BF_E8M0_BOUNDARY,
    BF_SATURATION,
    BF_FLUSH,
    BF_GAMAX_ZERO,
    BF_GAMAX_INF,
    BF_GAMAX_NAN,
    BF_SCALE_UP,
    BF_DISAGREE,
    BF_RANDOM,
    BF_COUNT
};
static const struct {
    const char *name, *bug, *desc;
} bv_notes[BF_COUNT] = {
    {"zero-block", "EDGE_CASE",
     "Every element is +0 or -0: amax 0, the recipes' m != 0 guards and modelopt's all-zero scale "
     "1.0."},
    {"nan-in-block", "EDGE_CASE",
     "A NaN element: ignored by amax_ign (trtllm, exact, sglang-kv, MX trtllm), propagated by "
     "amax_nan (modelopt, MX ocp and rceil)."},
    {"inf-in-block", "EDGE_CASE",
     "A +-Inf element: amax Inf, the scale saturates (or is NaN for MX ocp/rceil and modelopt)."},
    {"denormal-input", "EDGE_CASE",
     "A binary32 subnormal element (no flush to zero anywhere in the recipes)."},
    {"scale-zero", "EDGE_CASE",
     "The E4M3 block scale is 0: nonzero elements are multiplied by rcp~(0) = Inf (trtllm, "
     "sglang-kv) or FLT_MAX (exact)."},
    {"scale-subnormal", "EDGE_CASE",
     "The E4M3 block scale is an E4M3 subnormal (codes 0x01..0x07)."},
    {"scale-nan", "EDGE_CASE",
     "The block scale code is NaN (E4M3 0x7f/0xff, E8M0 0xff): every element decodes to NaN."},
    {"scale-max", "EDGE_CASE",
     "The block scale is the largest finite code (E4M3 0x7e = 448, E8M0 0xfe = 2^127)."},
    {"e2m1-tie", "EDGE_CASE",
     "An element lands exactly on an E2M1 midpoint (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5, or 7) "
     "after scaling: round to nearest even decides."},
    {"e4m3-tie", "EDGE_CASE",
     "An E4M3 midpoint is hit exactly: the NVFP4 block scale input (sf or s) or, for MXFP8 and FP8 "
     "E4M3, a scaled element."},
    {"e5m2-tie", "EDGE_CASE", "A scaled element lands exactly on an E5M2 midpoint."},
    {"bf16-tie", "EDGE_CASE",
     "An element lies exactly halfway between two bfloat16 values (low 16 bits 0x8000)."},
    {"e8m0-boundary", "EDGE_CASE",
     "The MX scale input is at a power-of-two boundary: m * (1/max) is a power of two (rceil, "
     "trtllm round up from there), or m is a power of two or the binary32 just below one (ocp "
     "floor)."},
    {"saturation", "EDGE_CASE",
     "A finite nonzero element is coded as the largest finite magnitude while its scaled value "
     "exceeded it (lowp_quant_counts.saturated)."},
    {"flush", "EDGE_CASE", "A finite nonzero element decodes to zero (lowp_quant_counts.flushed)."},
    {"global-amax-zero", "EDGE_CASE",
     "The group's global scale is derived from a tensor amax of 0 (trtllm: S = Inf; exact: S = 1; "
     "modelopt: g = 0; FP8: g = 1)."},
    {"global-amax-inf", "EDGE_CASE",
     "The group's global scale is derived from a tensor amax of +Inf."},
    {"global-amax-nan", "EDGE_CASE", "The group's global scale is derived from a NaN tensor amax."},
    {"scale-up", "DEFINED",
     "LOWP_BLOCK_SCALE_UP: the E4M3 block scale is rounded up (NVFP4 exact and modelopt)."},
    {"recipes-disagree", "DEFINED",
     "Another recipe of the same format gives a different scale or element code for the same input "
     "and the same stored global scale (the group's dec, and its enc for trtllm and exact); "
     "disagreesWith lists which."},
    {"random", "BASIC", "A random block with none of the other flags."},
};

typedef struct {
    float x[BV_MAX];
    int n;
    char comment[160];
} bv_test;

enum { GS_AMAX, GS_DEC, GS_NONE };

typedef struct {
    int from; /* GS_AMAX: value is a tensor amax; GS_DEC: value is the decode scale */
    float value;
    unsigned qflags; /* LOWP_BLOCK_SCALE_UP or 0 */
    char comment[200];
    bv_test *t;
    size_t n, cap;
} bv_group;

typedef struct {
    lowp_block_format f;
    lowp_recipe r;
    bv_group *g;
    size_t ng, capg;
    uint64_t rng;
} bv_file;

static int bv_uses_enc(lowp_block_format f, lowp_recipe r)
{
    return f == LOWP_NVFP4 && (r == LOWP_RECIPE_TRTLLM || r == LOWP_RECIPE_EXACT);
}

static lowp_global_scale bv_gs(lowp_block_format f, lowp_recipe r, const bv_group *g)
{
    lowp_global_scale one = {1.0f, 1.0f};
    if (g->from == GS_AMAX)
        return lowp_oracle_recipe_global_scale(f, r, g->value);
    if (g->from == GS_DEC)
        return lowp_oracle_global_scale_from_dec(f, r, g->value);
    return one;
}

static bv_group *bv_group_add(bv_file *F, int from, float value, unsigned qflags, const char *fmt,
                              ...) __attribute__((format(printf, 5, 6)));

static bv_group *bv_group_add(bv_file *F, int from, float value, unsigned qflags, const char *fmt,
                              ...)
{
    if (F->ng == F->capg) {
        F->capg = F->capg ? 2 * F->capg : 8;
        F->g = realloc(F->g, F->capg * sizeof *F->g);
        if (F->g == NULL)
            lowp_cli_fail("out of memory");
    }
    bv_group *g = &F->g[F->ng++];
    memset(g, 0, sizeof *g);
    g->from = from;
    g->value = value;
    g->qflags = qflags;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->comment, sizeof g->comment, fmt, ap);
    va_end(ap);
    return g;
}

static bv_test *bv_test_add(bv_group *g, const float *x, int n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static bv_test *bv_test_add(bv_group *g, const float *x, int n, const char *fmt, ...)
{
    if (g->n == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 32;
        g->t = realloc(g->t, g->cap * sizeof *g->t);
        if (g->t == NULL)
            lowp_cli_fail("out of memory");
    }
    bv_test *t = &g->t[g->n++];
    memset(t, 0, sizeof *t);
    memcpy(t->x, x, (size_t)n * sizeof *x);
    t->n = n;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->comment, sizeof t->comment, fmt, ap);
    va_end(ap);
    return t;
}

static void bv_file_free(bv_file *F)
{
    for (size_t i = 0; i < F->ng; i++)
        free(F->g[i].t);
    free(F->g);
}

/* ---- input builders (deterministic in F->rng) ---- */

static double bv_urand(uint64_t *s)
{
    return (double)(lowp_splitmix64(s) >> 11) * 0x1p-53;
}

static double bv_gauss(uint64_t *s)
{
    double u = bv_urand(s), v = bv_urand(s);
    if (u < 0x1p-60)
        u = 0x1p-60;
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* Test length: one block, or BV_ELEMS_1 elements for block size 1. */
static int bv_len(lowp_block_format f)
{
    size_t bs = lowp_oracle_block_size(f);
    return bs == 1 ? BV_ELEMS_1 : (int)bs;
}

/* Gaussian elements with largest magnitude exactly mag (at a random position, random
 * sign); the others |x| < mag. */
static void bv_gauss_block(uint64_t *s, float *x, int n, float mag)
{
    for (int i = 0; i < n; i++) {
        double v = bv_gauss(s) * (double)mag / 3.5;
        if (fabs(v) >= (double)mag)
            v = v > 0 ? 0.9 * (double)mag : -0.9 * (double)mag;
        x[i] = (float)v;
    }
    int at = (int)(bv_urand(s) * n);
    x[at] = bv_urand(s) < 0.5 ? mag : -mag;
}

static float bv_max_elem(lowp_block_format f)
{
    lowp_format ef = lowp_block_element_format(f);
    return lowp_decode_f32(ef, lowp_format_max_code(ef));
}

/* The trace of x under the file's recipe and the group. */
static void bv_trace(const bv_file *F, const bv_group *g, const float *x, int n,
                     lowp_oracle_block_trace *t)
{
    uint16_t codes[BV_MAX];
    (void)n;
    lowp_oracle_block_quantize(F->f, F->r, bv_gs(F->f, F->r, g), g->qflags, x, codes, NULL, NULL,
                               t);
}

/* Element ties of the element format, positive, increasing (midpoints of adjacent values,
 * then the overflow threshold). */
static int bv_elem_ties(lowp_format ef, double *out, int cap)
{
    int n = 0;
    uint16_t maxc = lowp_format_max_code(ef);
    for (uint32_t c = 0; c < maxc && n < cap - 1; c++)
        out[n++] =
            0.5 * (lowp_decode_f64(ef, (uint16_t)c) + lowp_decode_f64(ef, (uint16_t)(c + 1)));
    double mx = lowp_decode_f64(ef, maxc), below = lowp_decode_f64(ef, (uint16_t)(maxc - 1));
    out[n++] = mx + 0.5 * (mx - below);
    return n;
}

/* Put elements 1.. (skipping the amax element) on the given scaled values t[k] (signs
 * alternate), keeping |x| <= amax; block size 1 formats: every element is one block. */
static void bv_place(const bv_file *F, const bv_group *g, float *x, int n, const double *t, int nt,
                     int near)
{
    if (lowp_oracle_block_size(F->f) == 1) {
        lowp_oracle_block_trace tr;
        bv_trace(F, g, x, 1, &tr);
        for (int i = 0; i < n && i < nt; i++) {
            float v;
            float tv = (float)(i % 2 ? -t[i] : t[i]);
            if (lowp_oracle_solve_scaled(tr.factor, tr.divides, tv, &v) == 0)
                x[i] = near && i % 3 == 2 ? nextafterf(v, 0.0f) : v;
        }
        return;
    }
    lowp_oracle_block_trace tr;
    bv_trace(F, g, x, n, &tr);
    int at = 0;
    for (int i = 1; i < n; i++)
        if (fabsf(x[i]) > fabsf(x[at]))
            at = i;
    for (int i = 0, k = 0; i < n && k < nt; i++) {
        if (i == at)
            continue;
        float v, tv = (float)(k % 2 ? -t[k] : t[k]);
        k++;
        if (lowp_oracle_solve_scaled(tr.factor, tr.divides, tv, &v) == 0 && fabsf(v) <= tr.amax)
            x[i] = near && k % 3 == 0 ? nextafterf(v, 0.0f) : v;
    }
}

/* A block whose amax puts the scale input on target (NVFP4: sf or s; MX: the E8M0 input),
 * or one ulp below that amax. Returns 0, or -1 when no amax reaches the target. */
static int bv_scale_target(bv_file *F, const bv_group *g, float target, int below, float *x, int n)
{
    float m;
    if (lowp_oracle_amax_for_scale_in(F->f, F->r, bv_gs(F->f, F->r, g), g->qflags, target, &m) <
            0 ||
        !isfinite(m) || m == 0.0f)
        return -1;
    if (below)
        m = nextafterf(m, 0.0f);
    bv_gauss_block(&F->rng, x, n, m);
    return 0;
}

static const uint32_t bv_s58[3][3] = {
    {0x43d48c1eu, 0x43b195d8u, 0x4172e948u},
    {0x441cf392u, 0x44152797u, 0x41c25222u},
    {0x441061a7u, 0x437683cdu, 0x41f782d5u},
};

/* The common edge tests of a block-scaled group, around tensor magnitude A. */
static void bv_block_edges(bv_file *F, bv_group *g, float A, int many)
{
    int n = bv_len(F->f);
    float x[BV_MAX];
    uint64_t *s = &F->rng;
    for (int i = 0; i < n; i++)
        x[i] = 0.0f;
    bv_test_add(g, x, n, "all elements +0");
    if (many) {
        for (int i = 0; i < n; i++)
            x[i] = i % 2 ? -0.0f : 0.0f;
        bv_test_add(g, x, n, "+0 and -0 alternating");
    }
    bv_gauss_block(s, x, n, A / 2);
    x[3] = f32_from_bits(0x7fc00000u);
    bv_test_add(g, x, n, "Gaussian block with a quiet NaN at element 3");
    if (many) {
        bv_gauss_block(s, x, n, A / 2);
        x[5] = f32_from_bits(0xffa5a5a5u);
        bv_test_add(g, x, n, "Gaussian block with a negative signalling NaN at element 5");
        for (int i = 0; i < n; i++)
            x[i] = f32_from_bits(i % 2 ? 0xffc00000u : 0x7fc00001u);
        bv_test_add(g, x, n, "every element NaN");
    }
    bv_gauss_block(s, x, n, A / 2);
    x[2] = INFINITY;
    bv_test_add(g, x, n, "Gaussian block with +Inf at element 2");
    if (many) {
        bv_gauss_block(s, x, n, A / 4);
        x[0] = -INFINITY;
        x[n - 1] = INFINITY;
        bv_test_add(g, x, n, "-Inf first, +Inf last");
        for (int i = 0; i < n; i++)
            x[i] = f32_from_bits((uint32_t)(lowp_splitmix64(s) & 0x807fffffu) | 1u);
        bv_test_add(g, x, n, "binary32 subnormals only");
    }
    bv_gauss_block(s, x, n, A / 4);
    for (int i = 1; i < n; i += 2)
        x[i] = f32_from_bits((uint32_t)(lowp_splitmix64(s) & 0x807fffffu) | 1u);
    bv_test_add(g, x, n, "Gaussian block, odd elements binary32 subnormals");
    /* Element ties after scaling. */
    lowp_format ef = lowp_block_element_format(F->f);
    double et[512];
    int net = bv_elem_ties(ef, et, 512);
    double pick[BV_MAX];
    if (ef == LOWP_E2M1) {
        bv_gauss_block(s, x, n, A);
        bv_place(F, g, x, n, et, net, 0);
        bv_test_add(g, x, n, "elements scaled exactly onto every E2M1 midpoint, signs alternating");
        bv_gauss_block(s, x, n, A / 3);
        bv_place(F, g, x, n, et, net, 1);
        bv_test_add(g, x, n, "E2M1 midpoints after scaling, every third one binary32 ulp toward 0");
    } else {
        for (int k = 0; k < BV_MAX; k++)
            pick[k] = et[(size_t)(bv_urand(s) * net)];
        bv_gauss_block(s, x, n, A);
        bv_place(F, g, x, n, pick, BV_MAX, 0);
        bv_test_add(g, x, n, "elements scaled exactly onto random %s midpoints",
                    lowp_format_name(ef));
    }
    /* Scale edges. */
    if (F->f == LOWP_NVFP4) {
        static const float targets[] = {0x1.8p-8f, 0x1p-10f, 0x1p-11f, 0x1.4p-9f, 0x1.1p0f, 464.0f};
        static const char *const what[] = {
            "E4M3 subnormal scale (scale input 3*2^-9)",
            "scale input 2^-10: the tie between 0 and the smallest E4M3 subnormal",
            "scale input 2^-11: the scale underflows to 0",
            "scale input 1.25*2^-9: an E4M3 subnormal tie",
            "scale input 1.0625: an E4M3 normal tie",
            "scale input 464: the E4M3 overflow threshold"};
        for (size_t k = 0; k < sizeof targets / sizeof targets[0]; k++) {
            if (!many && k % 2)
                continue;
            if (bv_scale_target(F, g, targets[k], 0, x, n) == 0)
                bv_test_add(g, x, n, "%s", what[k]);
            if (many && k >= 1 && k != 2 && bv_scale_target(F, g, targets[k], 1, x, n) == 0)
                bv_test_add(g, x, n, "%s, amax one binary32 ulp lower", what[k]);
        }
        bv_gauss_block(s, x, n, (float)((double)A * 0x1p-24));
        bv_test_add(g, x, n, "block amax 2^-24 of the tensor amax");
    }
    /* Random. */
    bv_gauss_block(s, x, n, A);
    bv_test_add(g, x, n, "Gaussian block, amax = tensor amax");
    bv_gauss_block(s, x, n, (float)((double)A * 0x1p-7 * (1 + bv_urand(s))));
    bv_test_add(g, x, n, "Gaussian block, amax about 2^-7 of the tensor amax");
    if (many) {
        for (int i = 0; i < n; i++)
            x[i] = f32_from_bits((uint32_t)lowp_splitmix64(s));
        bv_test_add(g, x, n, "random binary32 bit patterns");
    }
}

/* NVFP4: the trtllm/exact disagreement set of the group's S, as blocks. */
static void bv_disagreement(bv_file *F, bv_group *g, float gamax, int nq_max)
{
    lowp_global_scale gt = lowp_oracle_recipe_global_scale(LOWP_NVFP4, LOWP_RECIPE_TRTLLM, gamax);
    lowp_oracle_nvfp4_diff d;
    if (lowp_oracle_nvfp4_diff_compute(gt.enc, &d) != 0)
        return;
    int n = bv_len(F->f);
    float x[BV_MAX];
    for (size_t i = 0; i < d.n_amax_runs && i < 2; i++) {
        float m = f32_from_bits(d.amax_runs[i].lo);
        bv_gauss_block(&F->rng, x, n, m);
        bv_test_add(g, x, n,
                    "trtllm/exact disagreement: block amax 0x%08" PRIx32
                    " gives scale 0x%02x under trtllm, 0x%02x under exact",
                    d.amax_runs[i].lo, d.amax_runs[i].a, d.amax_runs[i].b);
    }
    int done = 0;
    for (size_t j = 0; j < d.n_q && done < nq_max; j++) {
        const lowp_oracle_nvfp4_q_diff *qd = &d.q[j];
        if (qd->q == 0)
            continue;
        /* The largest amax whose scale code is q under both recipes. */
        uint32_t lo = 0, hi = 0x7F800000u;
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            float v = f32_from_bits(mid);
            if (lowp_oracle_nvfp4_scale_code(0, gt.enc, v) > qd->q ||
                lowp_oracle_nvfp4_scale_code(1, gt.enc, v) > qd->q)
                hi = mid;
            else
                lo = mid + 1;
        }
        float m = f32_from_bits(lo - 1);
        if (lowp_oracle_nvfp4_scale_code(0, gt.enc, m) != qd->q ||
            lowp_oracle_nvfp4_scale_code(1, gt.enc, m) != qd->q)
            continue;
        bv_gauss_block(&F->rng, x, n, m);
        int at = 0;
        for (int i = 0; i < n; i++)
            if (fabsf(x[i]) == m)
                at = i;
        int placed = 0;
        for (size_t r = 0, i = 0; r < qd->n_runs && (int)i < n; r++) {
            float v = f32_from_bits(qd->runs[r].lo);
            if (!(v <= m))
                continue;
            if ((int)i == at)
                i++;
            if ((int)i >= n)
                break;
            x[i++] = placed % 2 ? -v : v;
            placed++;
        }
        if (placed == 0)
            continue;
        bv_test_add(g, x, n,
                    "trtllm/exact disagreement: scale 0x%02x under both, factors 0x%08" PRIx32
                    " / 0x%08" PRIx32 ", %d elements in the set",
                    qd->q, f32_bits(qd->o_trtllm), f32_bits(qd->o_exact), placed);
        done++;
    }
    lowp_oracle_nvfp4_diff_free(&d);
}

static void bv_build_nvfp4(bv_file *F)
{
    int n = bv_len(F->f);
    float x[BV_MAX];
    for (int k = 0; k < 3; k++) {
        float gamax = f32_from_bits(bv_s58[k][0]);
        bv_group *g =
            bv_group_add(F, GS_AMAX, gamax, 0,
                         "tensor amax 0x%08" PRIx32 " (shared/research/formats.md 5.8, vector %d)",
                         bv_s58[k][0], k + 1);
        for (int i = 0; i < n; i++)
            x[i] = 0.0f;
        x[0] = f32_from_bits(bv_s58[k][1]);
        x[1] = f32_from_bits(bv_s58[k][2]);
        x[2] = -x[1];
        bv_test_add(g, x, n,
                    "formats.md 5.8 vector %d: block amax 0x%08" PRIx32 ", element 0x%08" PRIx32
                    " lands on an E2M1 tie under exact, one ulp off under trtllm",
                    k + 1, bv_s58[k][1], bv_s58[k][2]);
        if (k == 0)
            bv_block_edges(F, g, gamax, 1);
        bv_disagreement(F, g, gamax, k == 0 ? 3 : 2);
    }
    bv_group *g = bv_group_add(F, GS_AMAX, 1.0f, 0, "tensor amax 1.0");
    bv_block_edges(F, g, 1.0f, 0);
    g = bv_group_add(F, GS_DEC, 1.0f, 0,
                     "decode global scale 1.0 as stored (SGLang's uncalibrated KV cache)");
    bv_block_edges(F, g, 2688.0f, 0);
    static const float specials[3] = {0.0f, INFINITY, NAN};
    static const char *const sname[3] = {"0", "+Inf", "NaN"};
    for (int k = 0; k < 3; k++) {
        g = bv_group_add(F, GS_AMAX, specials[k], 0, "tensor amax %s", sname[k]);
        for (int i = 0; i < n; i++)
            x[i] = 0.0f;
        bv_test_add(g, x, n, "all elements +0");
        bv_gauss_block(&F->rng, x, n, 3.0f);
        bv_test_add(g, x, n, "Gaussian block, amax 3");
        bv_gauss_block(&F->rng, x, n, 3.0f);
        x[4] = NAN;
        bv_test_add(g, x, n, "Gaussian block, amax 3, NaN at element 4");
        bv_gauss_block(&F->rng, x, n, 3.0f);
        x[6] = -INFINITY;
        bv_test_add(g, x, n, "Gaussian block, -Inf at element 6");
    }
    if (F->r == LOWP_RECIPE_EXACT || F->r == LOWP_RECIPE_MODELOPT) {
        float gamax = f32_from_bits(bv_s58[0][0]);
        g = bv_group_add(F, GS_AMAX, gamax, LOWP_BLOCK_SCALE_UP,
                         "tensor amax 0x%08" PRIx32
                         ", block scales rounded up (LOWP_BLOCK_SCALE_UP)",
                         bv_s58[0][0]);
        bv_block_edges(F, g, gamax, 0);
    }
}

static void bv_build_mx(bv_file *F)
{
    int n = bv_len(F->f);
    float x[BV_MAX], mx = bv_max_elem(F->f);
    bv_group *g = bv_group_add(F, GS_NONE, 1.0f, 0, "no global scale");
    bv_block_edges(F, g, 1.0f, 1);
    /* Scale selection: OCP floor vs RCEIL (formats.md 4.4), powers of two, extremes. */
    static const float a4[] = {3.0f, 6.0f, 6.5f, 7.0f}, a8[] = {448.0f, 480.0f, 500.0f};
    const float *a = F->f == LOWP_MXFP4 ? a4 : a8;
    int na = F->f == LOWP_MXFP4 ? 4 : 3;
    for (int k = 0; k < na; k++) {
        bv_gauss_block(&F->rng, x, n, a[k]);
        bv_test_add(g, x, n, "block amax %g (formats.md 4.4: OCP floor vs RCEIL)", (double)a[k]);
    }
    float p[] = {mx,
                 nextafterf(mx, INFINITY),
                 nextafterf(mx, 0.0f),
                 nextafterf(8.0f, 0.0f),
                 nextafterf(0x1p-3f, 0.0f),
                 0x1p-3f,
                 mx * 0x1p-126f,
                 0x1p-130f,
                 1e-40f,
                 0x1p127f,
                 FLT_MAX};
    static const char *const pw[] = {"block amax = largest element value",
                                     "block amax one ulp above the largest element value",
                                     "block amax one ulp below the largest element value",
                                     "block amax just below 8 (fp32 log2 rounds up to 3)",
                                     "block amax just below 2^-3",
                                     "block amax 2^-3",
                                     "block amax max * 2^-126",
                                     "block amax 2^-130: the scale clamps at 2^-127",
                                     "block amax a binary32 subnormal",
                                     "block amax 2^127",
                                     "block amax FLT_MAX"};
    for (size_t k = 0; k < sizeof p / sizeof p[0]; k++) {
        bv_gauss_block(&F->rng, x, n, p[k]);
        bv_test_add(g, x, n, "%s", pw[k]);
    }
    /* Scale inputs exactly at a power of two and one ulp below (rceil, trtllm). */
    static const float t2[] = {1.0f, 0x1p-127f, 0x1p100f};
    for (size_t k = 0; k < sizeof t2 / sizeof t2[0]; k++)
        for (int below = 0; below < 2; below++)
            if (bv_scale_target(F, g, t2[k], below, x, n) == 0)
                bv_test_add(g, x, n, "scale input %s2^%d%s", below ? "just below " : "",
                            ilogbf(t2[k]), below ? " (amax one ulp lower)" : "");
}

static void bv_fp_tests(bv_file *F, bv_group *g, float A, int many)
{
    int n = BV_ELEMS_1;
    float x[BV_MAX];
    uint64_t *s = &F->rng;
    static const uint32_t sp[BV_ELEMS_1] = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u,
                                            0x7fc00000u, 0xffc00000u, 0x7fa5a5a5u, 0xffffffffu,
                                            0x00000001u, 0x80000001u, 0x007fffffu, 0x807fffffu,
                                            0x00800000u, 0x7f7fffffu, 0xff7fffffu, 0x3f800000u};
    for (int i = 0; i < n; i++)
        x[i] = f32_from_bits(sp[i]);
    bv_test_add(g, x, n, "zeros, infinities, NaNs, subnormal and normal extremes");
    lowp_format ef = lowp_block_element_format(F->f);
    if (ef != LOWP_BF16) {
        double et[512], pick[BV_ELEMS_1];
        int net = bv_elem_ties(ef, et, 512);
        for (int rep = 0; rep < (many ? 3 : 1); rep++) {
            for (int k = 0; k < n; k++)
                pick[k] = et[(size_t)(bv_urand(s) * net)];
            if (rep == 0) { /* the overflow threshold, the smallest ties */
                pick[0] = et[net - 1];
                pick[1] = et[0];
                pick[2] = et[1];
            }
            bv_gauss_block(s, x, n, A);
            bv_place(F, g, x, n, pick, n, rep == 2);
            bv_test_add(g, x, n, "elements scaled exactly onto %s midpoints%s",
                        lowp_format_name(ef), rep == 2 ? ", every third one ulp toward 0" : "");
        }
        double band[BV_ELEMS_1];
        double mx = lowp_decode_f64(ef, lowp_format_max_code(ef));
        for (int k = 0; k < n; k++)
            band[k] = k < 4 ? mx : k < 8 ? et[net - 1] : k < 12 ? mx * 1.0703125 : 1e30;
        bv_gauss_block(s, x, n, A);
        bv_place(F, g, x, n, band, n, 1);
        bv_test_add(g, x, n,
                    "scaled elements in the overflow band: max, the threshold, above, 1e30");
    } else {
        for (int rep = 0; rep < 3; rep++) {
            for (int i = 0; i < n; i++) {
                uint32_t b = (uint32_t)lowp_splitmix64(s);
                b = rep == 0   ? ((b & 0xffff0000u) | 0x8000u)
                    : rep == 1 ? ((b & 0xffff0000u) | 0x7fffu)
                               : ((b & 0x807f0000u) | 0x8000u);
                if ((b & 0x7f800000u) == 0x7f800000u)
                    b &= 0xbfffffffu;
                x[i] = f32_from_bits(b);
            }
            static const char *const w[] = {"bfloat16 midpoints (low 16 bits 0x8000)",
                                            "one ulp below bfloat16 midpoints",
                                            "midpoints of bfloat16 subnormals"};
            bv_test_add(g, x, n, "%s", w[rep]);
        }
        static const uint32_t band[BV_ELEMS_1] = {
            0x7f7f0000u, 0x7f7f7fffu, 0x7f7f8000u, 0x7f7f8001u, 0x7f7fffffu, 0xff7f7fffu,
            0xff7f8000u, 0x7f7e8000u, 0x00008000u, 0x80008000u, 0x00007fffu, 0x00018000u,
            0x3f808000u, 0x3f818000u, 0xbf808000u, 0x3f80ffffu};
        for (int i = 0; i < n; i++)
            x[i] = f32_from_bits(band[i]);
        bv_test_add(g, x, n, "the overflow threshold, the smallest subnormals, ties at 1");
    }
    bv_gauss_block(s, x, n, A);
    bv_test_add(g, x, n, "Gaussian elements, amax = tensor amax");
    if (many) {
        for (int i = 0; i < n; i++)
            x[i] = f32_from_bits((uint32_t)lowp_splitmix64(s));
        bv_test_add(g, x, n, "random binary32 bit patterns");
    }
}

static void bv_build_fp(bv_file *F)
{
    if (F->f == LOWP_BF16_PASS) {
        bv_group *g = bv_group_add(F, GS_NONE, 1.0f, 0, "no scale");
        bv_fp_tests(F, g, 3.0f, 1);
        return;
    }
    float mx = bv_max_elem(F->f);
    bv_group *g = bv_group_add(F, GS_AMAX, 1000.0f, 0, "tensor amax 1000");
    bv_fp_tests(F, g, 1000.0f, 1);
    g = bv_group_add(F, GS_AMAX, 0x1p-140f, 0, "tensor amax 2^-140: the decode scale underflows");
    bv_fp_tests(F, g, 0x1p-140f, 0);
    static const float specials[3] = {0.0f, INFINITY, NAN};
    static const char *const sname[3] = {"0", "+Inf", "NaN"};
    for (int k = 0; k < 3; k++) {
        g = bv_group_add(F, GS_AMAX, specials[k], 0, "tensor amax %s: decode scale 1", sname[k]);
        bv_fp_tests(F, g, mx, 0);
    }
    g = bv_group_add(F, GS_DEC, 0x1p-127f, 0,
                     "decode scale 2^-127 as stored (a binary32 subnormal)");
    bv_fp_tests(F, g, mx * 0x1p-127f, 0);
}

/* ---- evaluation with the oracle ---- */

typedef struct {
    uint8_t scale[BV_MAX]; /* per block */
    uint16_t code[BV_MAX];
    unsigned flags;    /* 1u << BF_* */
    unsigned disagree; /* 1u << recipe */
} bv_result;

static int bv_is_tie(lowp_format f, float v)
{
    if (!isfinite(v) || v == 0.0f)
        return 0;
    if (f == LOWP_BF16)
        return (f32_bits(v) & 0xffffu) == 0x8000u;
    double t[512];
    int n = bv_elem_ties(f, t, 512);
    double a = fabs((double)v);
    for (int i = 0; i < n; i++)
        if (t[i] == a)
            return 1;
    return 0;
}

static int bv_pow2(float v) /* a positive power of two (subnormals included) */
{
    if (!(v > 0.0f) || isinf(v))
        return 0;
    int e;
    return frexpf(v, &e) == 0.5f;
}

static void bv_eval_recipe(lowp_block_format f, lowp_recipe r, lowp_global_scale gs, unsigned qf,
                           const bv_test *t, uint8_t *scale, uint16_t *code, lowp_quant_counts *k,
                           lowp_oracle_block_trace *tr)
{
    size_t bs = lowp_oracle_block_size(f);
    for (int b = 0; b * (int)bs < t->n; b++)
        if (lowp_oracle_block_quantize(f, r, gs, qf, t->x + b * bs, code + b * bs, &scale[b], k,
                                       tr ? &tr[b] : NULL) != 0)
            lowp_cli_fail("vectors gen-block: the oracle has no %s %s", lowp_block_format_name(f),
                          lowp_recipe_name(r));
}

static void bv_eval(const bv_file *F, const bv_group *g, const bv_test *t, bv_result *res)
{
    lowp_block_format f = F->f;
    size_t bs = lowp_oracle_block_size(f);
    int nb = t->n / (int)bs;
    lowp_quant_counts k = {0};
    static lowp_oracle_block_trace tr[BV_MAX];
    memset(res, 0, sizeof *res);
    bv_eval_recipe(f, F->r, bv_gs(f, F->r, g), g->qflags, t, res->scale, res->code, &k, tr);
    unsigned fl = 0;
    int zero = 1;
    for (int i = 0; i < t->n; i++) {
        float v = t->x[i];
        zero &= v == 0.0f;
        if (isnan(v))
            fl |= 1u << BF_NAN_IN;
        if (isinf(v))
            fl |= 1u << BF_INF_IN;
        if (v != 0.0f && fpclassify(v) == FP_SUBNORMAL)
            fl |= 1u << BF_DENORMAL;
    }
    if (zero)
        fl |= 1u << BF_ZERO_BLOCK;
    lowp_format ef = lowp_block_element_format(f);
    unsigned tie_flag = ef == LOWP_E2M1   ? BF_E2M1_TIE
                        : ef == LOWP_E4M3 ? BF_E4M3_TIE
                        : ef == LOWP_E5M2 ? BF_E5M2_TIE
                                          : BF_BF16_TIE;
    for (int b = 0; b < nb; b++) {
        for (size_t i = 0; i < bs; i++)
            if (bv_is_tie(ef, tr[b].scaled[i]))
                fl |= 1u << tie_flag;
        if (f == LOWP_NVFP4) {
            uint8_t a = res->scale[b] & 0x7f;
            if (a == 0)
                fl |= 1u << BF_SCALE_ZERO;
            else if (a < 8)
                fl |= 1u << BF_SCALE_SUB;
            else if (a == 0x7f)
                fl |= 1u << BF_SCALE_NAN;
            else if (a == 0x7e)
                fl |= 1u << BF_SCALE_MAX;
            if (bv_is_tie(LOWP_E4M3, tr[b].scale_in))
                fl |= 1u << BF_E4M3_TIE;
        } else if (f == LOWP_MXFP4 || f == LOWP_MXFP8) {
            if (res->scale[b] == 0xff)
                fl |= 1u << BF_SCALE_NAN;
            if (res->scale[b] == 0xfe)
                fl |= 1u << BF_SCALE_MAX;
            float si = tr[b].scale_in;
            if (F->r == LOWP_RECIPE_OCP ? (bv_pow2(si) || bv_pow2(nextafterf(si, INFINITY)))
                                        : bv_pow2(si))
                fl |= 1u << BF_E8M0_BOUNDARY;
        }
    }
    if (k.saturated)
        fl |= 1u << BF_SATURATION;
    if (k.flushed)
        fl |= 1u << BF_FLUSH;
    if (g->from == GS_AMAX && g->value == 0.0f)
        fl |= 1u << BF_GAMAX_ZERO;
    if (g->from == GS_AMAX && isinf(g->value))
        fl |= 1u << BF_GAMAX_INF;
    if (g->from == GS_AMAX && isnan(g->value))
        fl |= 1u << BF_GAMAX_NAN;
    if (g->qflags & LOWP_BLOCK_SCALE_UP)
        fl |= 1u << BF_SCALE_UP;
    /* The other recipes of the format on the same input with the same stored global
     * scale: this file's (dec, enc) for a recipe that also reads enc, else its decode
     * scale dec through lowp_oracle_global_scale_from_dec. So only the block arithmetic
     * differs (a recipe's own derivation from a tensor amax is not compared: sglang-kv's
     * is always 1.0). */
    lowp_global_scale gs_this = bv_gs(f, F->r, g);
    for (int r = 0; r < LOWP_RECIPE_COUNT; r++) {
        if (r == (int)F->r || !lowp_oracle_recipe_defined(f, (lowp_recipe)r))
            continue;
        unsigned qf = (f == LOWP_NVFP4 && (r == LOWP_RECIPE_EXACT || r == LOWP_RECIPE_MODELOPT))
                          ? g->qflags
                          : 0;
        lowp_global_scale g2 = gs_this;
        if (g->from != GS_NONE && !(bv_uses_enc(f, F->r) && bv_uses_enc(f, (lowp_recipe)r)))
            g2 = lowp_oracle_global_scale_from_dec(f, (lowp_recipe)r, gs_this.dec);
        uint8_t s2[BV_MAX];
        uint16_t c2[BV_MAX];
        bv_eval_recipe(f, (lowp_recipe)r, g2, qf, t, s2, c2, NULL, NULL);
        int differ = 0;
        for (int b = 0; b < nb && lowp_block_has_scales(f); b++)
            differ |= s2[b] != res->scale[b];
        for (int i = 0; i < t->n; i++)
            differ |= c2[i] != res->code[i];
        if (differ)
            res->disagree |= 1u << r;
    }
    if (res->disagree)
        fl |= 1u << BF_DISAGREE;
    if (fl == 0)
        fl = 1u << BF_RANDOM;
    res->flags = fl;
}

/* ---- writing ---- */

static void bv_file_name(char *buf, size_t len, lowp_block_format f, lowp_recipe r)
{
    snprintf(buf, len, "%s.%s.json", lowp_block_format_name(f), lowp_recipe_name(r));
}

static void bv_write(const char *dir, bv_file *F, uint64_t seed, const char *commit)
{
    lowp_block_format f = F->f;
    lowp_recipe r = F->r;
    lowp_format ef = lowp_block_element_format(f);
    int d = code_digits(ef), has_scale = lowp_block_has_scales(f);
    size_t ntests = 0;
    for (size_t i = 0; i < F->ng; i++)
        ntests += F->g[i].n;
    char name[64], path[4352];
    bv_file_name(name, sizeof name, f, r);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *o = lowp_out_open(path, 0);
    fprintf(o, "{\n");
    fprintf(o, "  \"algorithm\": \"lowp block quantize %s/%s\",\n", lowp_block_format_name(f),
            lowp_recipe_name(r));
    fprintf(o, "  \"schema\": \"" BV_SCHEMA "\",\n");
    fprintf(o, "  \"generatorVersion\": \"lowp " LOWP_VERSION "\",\n");
    fprintf(o, "  \"lowpCommit\": \"%s\",\n", commit);
    fprintf(o, "  \"seed\": \"0x%" PRIx64 "\",\n", seed);
    fprintf(o, "  \"format\": \"%s\",\n", lowp_block_format_name(f));
    fprintf(o, "  \"recipe\": \"%s\",\n", lowp_recipe_name(r));
    fprintf(o, "  \"blockSize\": %zu,\n", lowp_oracle_block_size(f));
    fprintf(o, "  \"elementFormat\": \"%s\",\n", lowp_format_name(ef));
    fprintf(o, "  \"scaleFormat\": \"%s\",\n",
            f == LOWP_NVFP4 ? "e4m3"
            : has_scale     ? "e8m0"
                            : "none");
    fprintf(o, "  \"numberOfTests\": %zu,\n", ntests);
    fprintf(o, "  \"header\": [\n");
    fprintf(o,
            "    \"Generated by: lowp vectors gen-block --seed 0x%" PRIx64
            " (expected codes from the MPFR recipe oracle, ref/src/oracle_block.c).\",\n",
            seed);
    fprintf(o,
            "    \"Recipe: ref/recipes.md, %s, %s. Format of this file: vectors/README.md, Block "
            "vectors.\",\n",
            f == LOWP_NVFP4                        ? "NVFP4"
            : (f == LOWP_MXFP4 || f == LOWP_MXFP8) ? "MXFP4 / MXFP8"
            : f == LOWP_BF16_PASS                  ? "BF16 passthrough"
                                                   : "FP8 per-tensor",
            lowp_recipe_name(r));
    fprintf(o,
            "    \"input: binary32 bit patterns, 8 hex digits each, element 0 first. codes: one "
            "per element, %d hex digit%s. scales: one %s code per block, 2 hex digits%s.\",\n",
            d, d > 1 ? "s" : "",
            f == LOWP_NVFP4 ? "E4M3"
            : has_scale     ? "E8M0"
                            : "(none)",
            has_scale ? "" : "; absent here");
    fprintf(o, "    \"globalScaleDec / globalScaleEnc: the binary32 bits of lowp_global_scale .dec "
               "and .enc that the recipe reads (absent: not read); globalAmax: the tensor amax "
               "they were derived from by the recipe's own rule.\"\n");
    fprintf(o, "  ],\n");
    fprintf(o, "  \"notes\": {\n");
    for (int k = 0; k < BF_COUNT; k++)
        fprintf(o, "    \"%s\": {\"bugType\": \"%s\", \"description\": \"%s\"}%s\n",
                bv_notes[k].name, bv_notes[k].bug, bv_notes[k].desc, k + 1 < BF_COUNT ? "," : "");
    fprintf(o, "  },\n");
    fprintf(o, "  \"testGroups\": [\n");
    long tc = 0;
    for (size_t gi = 0; gi < F->ng; gi++) {
        bv_group *g = &F->g[gi];
        lowp_global_scale gs = bv_gs(f, r, g);
        fprintf(o,
                "    {\"type\": \"BlockQuantizeTest\", \"source\": {\"name\": \"lowp vectors "
                "gen-block\", \"version\": %d}, \"comment\": \"%s\", ",
                BV_SOURCE_VERSION, g->comment);
        fprintf(o, "\"globalScaleFrom\": \"%s\", ",
                g->from == GS_AMAX  ? "amax"
                : g->from == GS_DEC ? "dec"
                                    : "none");
        if (g->from == GS_AMAX)
            fprintf(o, "\"globalAmax\": \"%08" PRIx32 "\", ", f32_bits(g->value));
        if (lowp_block_has_global_scale(f))
            fprintf(o, "\"globalScaleDec\": \"%08" PRIx32 "\", ", f32_bits(gs.dec));
        if (bv_uses_enc(f, r))
            fprintf(o, "\"globalScaleEnc\": \"%08" PRIx32 "\", ", f32_bits(gs.enc));
        fprintf(o, "\"scaleUp\": %s, \"tests\": [\n", g->qflags ? "true" : "false");
        for (size_t ti = 0; ti < g->n; ti++) {
            bv_test *t = &g->t[ti];
            bv_result res;
            bv_eval(F, g, t, &res);
            fprintf(o, "      {\"tcId\": %ld, \"comment\": \"%s\", \"flags\": [", ++tc, t->comment);
            int first = 1;
            for (int k = 0; k < BF_COUNT; k++)
                if (res.flags & (1u << k)) {
                    fprintf(o, "%s\"%s\"", first ? "" : ", ", bv_notes[k].name);
                    first = 0;
                }
            fprintf(o, "], \"input\": [");
            for (int i = 0; i < t->n; i++)
                fprintf(o, "%s\"%08" PRIx32 "\"", i ? ", " : "", f32_bits(t->x[i]));
            fprintf(o, "]");
            if (has_scale) {
                fprintf(o, ", \"scales\": [");
                for (int b = 0; b * (int)lowp_oracle_block_size(f) < t->n; b++)
                    fprintf(o, "%s\"%02x\"", b ? ", " : "", res.scale[b]);
                fprintf(o, "]");
            }
            fprintf(o, ", \"codes\": [");
            for (int i = 0; i < t->n; i++)
                fprintf(o, "%s\"%0*x\"", i ? ", " : "", d, res.code[i]);
            fprintf(o, "], \"disagreesWith\": [");
            first = 1;
            for (int k = 0; k < LOWP_RECIPE_COUNT; k++)
                if (res.disagree & (1u << k)) {
                    fprintf(o, "%s\"%s\"", first ? "" : ", ", lowp_recipe_name((lowp_recipe)k));
                    first = 0;
                }
            fprintf(o, "], \"result\": \"valid\"}%s\n", ti + 1 < g->n ? "," : "");
        }
        fprintf(o, "    ]}%s\n", gi + 1 < F->ng ? "," : "");
    }
    fprintf(o, "  ]\n}\n");
    lowp_out_commit(o);
}

static int bv_is_file_name(const char *s)
{
    size_t n = strlen(s);
    return n > 5 && strcmp(s + n - 5, ".json") == 0;
}

static void bv_build(bv_file *F, lowp_block_format f, lowp_recipe r, uint64_t seed)
{
    memset(F, 0, sizeof *F);
    F->f = f;
    F->r = r;
    /* Inputs depend on (seed, format, recipe) only. */
    F->rng = seed ^ (UINT64_C(0x9E3779B97F4A7C15) * (uint64_t)(1 + f * LOWP_RECIPE_COUNT + r));
    if (f == LOWP_NVFP4)
        bv_build_nvfp4(F);
    else if (f == LOWP_MXFP4 || f == LOWP_MXFP8)
        bv_build_mx(F);
    else
        bv_build_fp(F);
}

static void gen_block_usage(FILE *f)
{
    fprintf(f,
            "usage: lowp vectors gen-block [--dir DIR] [--seed S] [--commit C]\n"
            "  Write one JSON file per (block format, recipe) that lowp_recipe_check accepts,\n"
            "  expected codes from the MPFR recipe oracle.\n"
            "  --dir DIR    output directory (default " BV_DEFAULT_DIR "; created if missing;\n"
            "               stale *.json files in it are removed)\n"
            "  --seed S     seed of the random inputs (default 0x%" PRIx64 ")\n"
            "  --commit C   commit recorded in the files (default: git rev-parse --short=12\n"
            "               HEAD of the source tree, or \"unknown\")\n",
            (uint64_t)LOWP_DEFAULT_SEED);
}

static int cmd_gen_block(int argc, char **argv)
{
    const char *dir = BV_DEFAULT_DIR, *commit_arg = NULL;
    uint64_t seed = LOWP_DEFAULT_SEED;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            gen_block_usage(stdout);
            return LOWP_EXIT_OK;
        } else if ((v = opt_value(argc, argv, &i, "--dir")) != NULL) {
            if (*v == '\0')
                lowp_cli_fail("vectors gen-block: --dir is empty");
            dir = v;
        } else if ((v = opt_value(argc, argv, &i, "--seed")) != NULL) {
            seed = parse_seed(v);
        } else if ((v = opt_value(argc, argv, &i, "--commit")) != NULL) {
            if (!commit_ok(v))
                lowp_cli_fail("vectors gen-block: --commit '%.80s' must be 1 to 64 printable "
                              "characters without spaces",
                              v);
            commit_arg = v;
        } else {
            lowp_cli_fail(
                "vectors gen-block: unknown argument '%s' (try 'lowp vectors gen-block --help')",
                argv[i]);
        }
    }
    if (strlen(dir) > 3800)
        lowp_cli_fail("vectors gen-block: --dir path is too long");
    char commit[80];
    if (commit_arg != NULL)
        snprintf(commit, sizeof commit, "%s", commit_arg);
    else
        lowp_source_commit(commit, sizeof commit);
    if (!commit_ok(commit))
        snprintf(commit, sizeof commit, "unknown");
    mkdir_p(dir);
    name_list written = {0};
    size_t files = 0, tests = 0;
    for (int f = 0; f < LOWP_BLOCK_FORMAT_COUNT; f++)
        for (int r = 0; r < LOWP_RECIPE_COUNT; r++) {
            if (lowp_recipe_check((lowp_block_format)f, (lowp_recipe)r, NULL, 0) != 0)
                continue;
            bv_file F;
            bv_build(&F, (lowp_block_format)f, (lowp_recipe)r, seed);
            bv_write(dir, &F, seed, commit);
            for (size_t i = 0; i < F.ng; i++)
                tests += F.g[i].n;
            char name[64];
            bv_file_name(name, sizeof name, (lowp_block_format)f, (lowp_recipe)r);
            name_list_add(&written, name);
            files++;
            bv_file_free(&F);
        }
    DIR *d = opendir(dir);
    if (d != NULL) {
        struct dirent *e;
        name_list stale = {0};
        while ((e = readdir(d)) != NULL)
            if (bv_is_file_name(e->d_name) && !name_list_has(&written, e->d_name))
                name_list_add(&stale, e->d_name);
        closedir(d);
        for (size_t i = 0; i < stale.n; i++) {
            char path[4352];
            snprintf(path, sizeof path, "%s/%s", dir, stale.names[i]);
            if (remove(path) == 0)
                printf("removed stale %s\n", path);
        }
        free(stale.names);
    }
    free(written.names);
    printf("wrote %zu block vector files, %zu tests, to %s (seed 0x%" PRIx64 ", commit %s)\n",
           files, tests, dir, seed, commit);
    return LOWP_EXIT_OK;
}

/* ---- reading: JSON through jansson, inside lowp's limits ---- */

/* Vector files nest 6 deep (root, testGroups, a group, its tests, a test, a test's arrays);
 * the limit, 64, is the one lowp's former parser of these files had. */
#define BV_JSON_MAX_DEPTH 64

/* The raw text, scanned once before jansson parses it (jansson keeps no positions): the
 * nesting depth, and the line of every "tcId" key in document order, for messages. Strings
 * are skipped with their escapes; a key is a string followed by ':' (in valid JSON a value
 * string never is). Returns 0, or -1 with why set when the depth passes the limit. */
static int bv_scan(const char *s, size_t n, long **lines, size_t *n_lines, char *why,
                   size_t why_len)
{
    int depth = 0;
    long line = 1;
    size_t cap = 0;
    *lines = NULL;
    *n_lines = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '\n') {
            line++;
        } else if (c == '[' || c == '{') {
            if (++depth > BV_JSON_MAX_DEPTH) {
                snprintf(why, why_len, "line %ld: JSON nested deeper than %d levels", line,
                         BV_JSON_MAX_DEPTH);
                free(*lines);
                *lines = NULL;
                return -1;
            }
        } else if (c == ']' || c == '}') {
            depth--;
        } else if (c == '"') {
            size_t start = ++i;
            while (i < n && s[i] != '"' && s[i] != '\n')
                i += s[i] == '\\' ? 2 : 1;
            if (i >= n || s[i] == '\n') { /* not a string jansson accepts: it reports it */
                if (i < n)
                    line++;
                continue;
            }
            size_t j = i + 1;
            while (j < n && (s[j] == ' ' || s[j] == '\t' || s[j] == '\r' || s[j] == '\n'))
                j++;
            if (i - start == 4 && memcmp(s + start, "tcId", 4) == 0 && j < n && s[j] == ':') {
                if (*n_lines == cap) {
                    cap = cap ? 2 * cap : 256;
                    long *nl = realloc(*lines, cap * sizeof *nl);
                    if (nl == NULL) {
                        free(*lines);
                        *lines = NULL;
                        snprintf(why, why_len, "out of memory");
                        return -1;
                    }
                    *lines = nl;
                }
                (*lines)[(*n_lines)++] = line;
            }
        }
    }
    return 0;
}

/* ---- a vector file in memory ---- */

typedef struct {
    long id;
    long line; /* of its "tcId" key; 0 when the file's keys did not allow finding it */
    int n;
    float x[BV_MAX];
    uint8_t scale[BV_MAX];
    uint16_t code[BV_MAX];
    char flags[256];
    size_t group;
} bv_vtest;

typedef struct {
    lowp_global_scale gs;
    unsigned qflags;
} bv_vgroup;

typedef struct {
    const char *path;
    char name[128];
    lowp_block_format f;
    lowp_recipe r;
    bv_vgroup *g;
    size_t ng;
    bv_vtest *t;
    size_t nt;
} bv_vfile;

static void bv_vfile_free(bv_vfile *V)
{
    free(V->g);
    free(V->t);
    V->g = NULL;
    V->t = NULL;
}

/* A string of exactly `digits` hex digits, as *out; -1 otherwise. */
static int bv_hex_str(const json_t *j, int digits, uint32_t *out)
{
    if (!json_is_string(j) || json_string_length(j) != (size_t)digits ||
        hex_fixed(json_string_value(j), digits) < 0)
        return -1;
    *out = (uint32_t)hex_fixed(json_string_value(j), digits);
    return 0;
}

/* Fill V from the text of a vector file (buf, len); path names it in messages. Returns 0,
 * or -1 with one line in why and V freed: the caller frees what it holds and fails, so
 * that nothing is left allocated on the exit-2 path. */
static int bv_parse(bv_vfile *V, const char *path, const char *buf, size_t len, char *why,
                    size_t why_len)
{
#define BV_FAIL(...)                                                                           \
    do {                                                                                       \
        char msg_[400];                                                                        \
        snprintf(msg_, sizeof msg_, __VA_ARGS__);                                              \
        snprintf(why, why_len, "%s%s", path, msg_);                                            \
        goto fail;                                                                             \
    } while (0)
    json_t *root = NULL;
    long *lines = NULL;
    size_t n_lines = 0;
    char scan_why[128];
    if (memchr(buf, '\0', len) != NULL)
        BV_FAIL(": not a text file (contains a NUL byte)");
    if (bv_scan(buf, len, &lines, &n_lines, scan_why, sizeof scan_why))
        BV_FAIL(" %s", scan_why);
    /* JSON_REJECT_DUPLICATES: a key twice in one object is an error, not a silent pick */
    json_error_t err;
    root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &err);
    if (root == NULL) {
        for (char *c = err.text; *c != '\0'; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f)
                *c = '?';
        BV_FAIL(" line %d column %d: %s", err.line, err.column, err.text);
    }
    const json_t *fs = json_object_get(root, "format"), *rs = json_object_get(root, "recipe"),
                 *sc = json_object_get(root, "schema");
    if (!json_is_string(sc) || strcmp(json_string_value(sc), BV_SCHEMA) != 0)
        BV_FAIL(": not a lowp block vector file (\"schema\" is not \"" BV_SCHEMA "\")");
    if (!json_is_string(fs) || lowp_block_format_parse(json_string_value(fs), &V->f) != 0)
        BV_FAIL(": missing or unknown \"format\"");
    if (!json_is_string(rs) || lowp_recipe_parse(json_string_value(rs), &V->r) != 0)
        BV_FAIL(": missing or unknown \"recipe\"");
    const json_t *groups = json_object_get(root, "testGroups");
    if (!json_is_array(groups))
        BV_FAIL(": no \"testGroups\" array");
    size_t bs = lowp_oracle_block_size(V->f);
    int d = code_digits(lowp_block_element_format(V->f)), has_scale = lowp_block_has_scales(V->f);
    size_t ng = json_array_size(groups), cap = 64;
    V->g = calloc(ng ? ng : 1, sizeof *V->g);
    V->t = malloc(cap * sizeof *V->t);
    if (V->g == NULL || V->t == NULL)
        BV_FAIL(": out of memory");
    V->ng = ng;
    for (size_t gi = 0; gi < ng; gi++) {
        const json_t *g = json_array_get(groups, gi), *v;
        bv_vgroup *vg = &V->g[gi];
        uint32_t bits;
        vg->gs.dec = vg->gs.enc = 1.0f;
        if ((v = json_object_get(g, "globalScaleDec")) != NULL) {
            if (bv_hex_str(v, 8, &bits))
                BV_FAIL(" test group %zu: globalScaleDec must be a string of 8 hex digits", gi + 1);
            vg->gs.dec = f32_from_bits(bits);
        }
        if ((v = json_object_get(g, "globalScaleEnc")) != NULL) {
            if (bv_hex_str(v, 8, &bits))
                BV_FAIL(" test group %zu: globalScaleEnc must be a string of 8 hex digits", gi + 1);
            vg->gs.enc = f32_from_bits(bits);
        }
        if (json_is_true(json_object_get(g, "scaleUp")))
            vg->qflags = LOWP_BLOCK_SCALE_UP;
        const json_t *tests = json_object_get(g, "tests");
        if (!json_is_array(tests))
            BV_FAIL(" test group %zu: no \"tests\" array", gi + 1);
        for (size_t ti = 0; ti < json_array_size(tests); ti++) {
            const json_t *t = json_array_get(tests, ti);
            if (V->nt == cap) {
                cap *= 2;
                bv_vtest *nt = realloc(V->t, cap * sizeof *V->t);
                if (nt == NULL)
                    BV_FAIL(": out of memory");
                V->t = nt;
            }
            bv_vtest *vt = &V->t[V->nt++];
            memset(vt, 0, sizeof *vt);
            vt->group = gi;
            const json_t *id = json_object_get(t, "tcId"), *in = json_object_get(t, "input"),
                         *co = json_object_get(t, "codes"), *scn = json_object_get(t, "scales"),
                         *fl = json_object_get(t, "flags");
            if (!json_is_integer(id) || json_integer_value(id) < 1 ||
                json_integer_value(id) > LONG_MAX)
                BV_FAIL(" test %zu of group %zu: no positive integer \"tcId\"", ti + 1, gi + 1);
            vt->id = (long)json_integer_value(id);
            size_t n = json_array_size(in);
            if (!json_is_array(in) || n == 0 || n > BV_MAX || n % bs != 0)
                BV_FAIL(" tcId %ld: \"input\" must hold 1 to %d elements, a multiple of the block "
                        "size %zu", vt->id, BV_MAX, bs);
            vt->n = (int)n;
            if (!json_is_array(co) || json_array_size(co) != n)
                BV_FAIL(" tcId %ld: \"codes\" must have one code per input", vt->id);
            for (int i = 0; i < vt->n; i++) {
                uint32_t code;
                if (bv_hex_str(json_array_get(in, (size_t)i), 8, &bits))
                    BV_FAIL(" tcId %ld: an input must be a string of 8 hex digits", vt->id);
                if (bv_hex_str(json_array_get(co, (size_t)i), d, &code))
                    BV_FAIL(" tcId %ld: a code must be a string of %d hex digits", vt->id, d);
                vt->x[i] = f32_from_bits(bits);
                vt->code[i] = (uint16_t)code;
            }
            if (has_scale) {
                if (!json_is_array(scn) || json_array_size(scn) != n / bs)
                    BV_FAIL(" tcId %ld: \"scales\" must have one code per block", vt->id);
                for (size_t b = 0; b < n / bs; b++) {
                    if (bv_hex_str(json_array_get(scn, b), 2, &bits))
                        BV_FAIL(" tcId %ld: a scale code must be a string of 2 hex digits", vt->id);
                    vt->scale[b] = (uint8_t)bits;
                }
            }
            /* flags are UTF-8 as jansson decoded them (\u escapes, surrogate pairs); the
             * ones that do not fit in vt->flags are left out */
            for (size_t k = 0; json_is_array(fl) && k < json_array_size(fl); k++) {
                const json_t *f = json_array_get(fl, k);
                if (json_is_string(f) &&
                    strlen(vt->flags) + json_string_length(f) + 2 < sizeof vt->flags) {
                    if (vt->flags[0])
                        strcat(vt->flags, " ");
                    strcat(vt->flags, json_string_value(f));
                }
            }
            for (size_t k = 0; k + 1 < V->nt; k++)
                if (V->t[k].id == vt->id)
                    BV_FAIL(" tcId %ld appears twice", vt->id);
        }
    }
    const json_t *nt = json_object_get(root, "numberOfTests");
    if (!json_is_integer(nt) || json_integer_value(nt) < 0 ||
        (size_t)json_integer_value(nt) != V->nt)
        BV_FAIL(": \"numberOfTests\" does not match the %zu tests (truncated?)", V->nt);
    /* lines for messages: only when every test's "tcId" key was found, in order */
    for (size_t k = 0; n_lines == V->nt && k < V->nt; k++)
        V->t[k].line = lines[k];
    free(lines);
    json_decref(root);
    return 0;
fail:
    free(lines);
    json_decref(root);
    bv_vfile_free(V);
    return -1;
#undef BV_FAIL
}

/* Read a vector file; on bad input, 0 is not returned: -1 with why set and V freed. */
static int bv_read(bv_vfile *V, const char *path, char *why, size_t why_len)
{
    memset(V, 0, sizeof *V);
    V->path = path;
    const char *base = strrchr(path, '/');
    snprintf(V->name, sizeof V->name, "%s", base ? base + 1 : path);
    size_t nl = strlen(V->name);
    if (nl > 5 && strcmp(V->name + nl - 5, ".json") == 0)
        V->name[nl - 5] = '\0';
    size_t len;
    unsigned char *buf = lowp_read_all(path, &len);
    int rc = bv_parse(V, path, (const char *)buf, len, why, why_len);
    free(buf);
    return rc;
}

/* Codes of test t under block.c (lowp_block_quantize). */
static void bv_run_block(const bv_vfile *V, const bv_vtest *t, uint8_t *scale, uint16_t *code)
{
    uint8_t packed[2 * BV_MAX];
    uint8_t sc[BV_MAX] = {0};
    char why[256];
    const bv_vgroup *g = &V->g[t->group];
    if (lowp_block_quantize(V->f, V->r, g->gs, g->qflags, t->x, (size_t)t->n, packed, sc, NULL, why,
                            sizeof why) != 0)
        lowp_cli_fail("%s: lowp_block_quantize refuses tcId %ld: %s", V->path, t->id, why);
    for (int i = 0; i < t->n; i++)
        code[i] = lowp_block_code_at(V->f, packed, (size_t)i);
    memcpy(scale, sc, sizeof sc);
}

static void bv_run_oracle(const bv_vfile *V, const bv_vtest *t, uint8_t *scale, uint16_t *code)
{
    const bv_vgroup *g = &V->g[t->group];
    size_t bs = lowp_oracle_block_size(V->f);
    for (int b = 0; b * (int)bs < t->n; b++)
        lowp_oracle_block_quantize(V->f, V->r, g->gs, g->qflags, t->x + b * bs, code + b * bs,
                                   &scale[b], NULL, NULL);
}

/* One failure line: which tcId, flags, the scale(s) and every element that differs. */
static void bv_print_diff(const bv_vfile *V, const bv_vtest *t, const uint8_t *gs,
                          const uint16_t *gc, const char *got, const char *exp)
{
    size_t bs = lowp_oracle_block_size(V->f);
    int d = code_digits(lowp_block_element_format(V->f));
    printf("%s tcId %ld (line %ld) [%s]:", V->name, t->id, t->line, t->flags);
    if (lowp_block_has_scales(V->f))
        for (int b = 0; b * (int)bs < t->n; b++)
            if (gs[b] != t->scale[b])
                printf(" scale %s 0x%02x %s 0x%02x;", got, gs[b], exp, t->scale[b]);
    for (int i = 0; i < t->n; i++)
        if (gc[i] != t->code[i])
            printf(" element %d (input 0x%08" PRIx32 ") %s 0x%0*x %s 0x%0*x;", i, f32_bits(t->x[i]),
                   got, d, gc[i], exp, d, t->code[i]);
    putchar('\n');
}

static int bv_same(const bv_vfile *V, const bv_vtest *t, const uint8_t *s, const uint16_t *c)
{
    size_t bs = lowp_oracle_block_size(V->f);
    for (int b = 0; lowp_block_has_scales(V->f) && b * (int)bs < t->n; b++)
        if (s[b] != t->scale[b])
            return 0;
    for (int i = 0; i < t->n; i++)
        if (c[i] != t->code[i])
            return 0;
    return 1;
}

/* ---- check-block ---- */

static void check_block_usage(FILE *f)
{
    fprintf(f, "usage: lowp vectors check-block FILE --results R [--errors N]\n"
               "  Compare another implementation's block codes with a block vector file.\n"
               "  R: one line per test, 'TCID SCALES CODES' (vectors/README.md): TCID decimal,\n"
               "     SCALES the block scale codes concatenated (2 hex digits each; '-' for\n"
               "     formats without block scales), CODES the element codes concatenated\n"
               "     (1, 2 or 4 hex digits each, element 0 first); '#' comments, blank lines\n"
               "     ignored; every tcId exactly once, in any order.\n"
               "  --errors N   print at most N failure lines (default 20; 0: all)\n"
               "  Exit status: 0 all match, 1 mismatches, 2 bad input.\n");
}

static int cmd_check_block(int argc, char **argv)
{
    const char *file = NULL, *results = NULL;
    long max_errors = VEC_ERRORS_DEFAULT;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            check_block_usage(stdout);
            return LOWP_EXIT_OK;
        } else if ((v = opt_value(argc, argv, &i, "--results")) != NULL) {
            results = v;
        } else if ((v = opt_value(argc, argv, &i, "--errors")) != NULL) {
            max_errors = parse_errors(v);
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            lowp_cli_fail("vectors check-block: unknown option '%s'", argv[i]);
        } else if (file == NULL) {
            file = argv[i];
        } else {
            lowp_cli_fail("vectors check-block: one vector FILE at a time ('%s' is a second one)",
                          argv[i]);
        }
    }
    if (file == NULL)
        lowp_cli_fail(
            "vectors check-block: no vector FILE given (try 'lowp vectors check-block --help')");
    if (results == NULL)
        lowp_cli_fail("vectors check-block: --results R is required");
    /* Bad input anywhere below: the line goes to why, everything is freed, then exit 2. */
    char why[512];
    size_t len;
    unsigned char *buf = lowp_read_all(results, &len); /* first: it fails by itself */
    bv_vfile V;
    if (bv_read(&V, file, why, sizeof why)) {
        free(buf);
        lowp_cli_fail("%s", why);
    }
#define CB_FAIL(...)                                                                           \
    do {                                                                                       \
        snprintf(why, sizeof why, __VA_ARGS__);                                                \
        goto bad_input;                                                                        \
    } while (0)
    size_t bs = lowp_oracle_block_size(V.f);
    int d = code_digits(lowp_block_element_format(V.f)), has_scale = lowp_block_has_scales(V.f);
    uint8_t(*gsc)[BV_MAX] = calloc(V.nt ? V.nt : 1, sizeof *gsc);
    uint16_t(*gco)[BV_MAX] = calloc(V.nt ? V.nt : 1, sizeof *gco);
    char *seen = calloc(V.nt ? V.nt : 1, 1);
    unsigned char *nb = realloc(buf, len + 1);
    if (nb == NULL) {
        free(buf);
        buf = NULL;
        CB_FAIL("out of memory");
    }
    buf = nb;
    buf[len] = '\0';
    if (gsc == NULL || gco == NULL || seen == NULL)
        CB_FAIL("out of memory");
    if (memchr(buf, '\0', len) != NULL)
        CB_FAIL("%s: not a text file (contains a NUL byte)", results);
    char *s = (char *)buf, *end = s + len;
    long lineno = 0;
    size_t got_n = 0;
    while (s < end) {
        char *nlp = memchr(s, '\n', (size_t)(end - s));
        char *e = nlp ? nlp : end;
        lineno++;
        *e = '\0';
        char *line = s;
        s = nlp ? nlp + 1 : end;
        char *hash = strchr(line, '#');
        if (hash != NULL)
            *hash = '\0';
        char *tok[4];
        int nt = 0;
        for (char *p = strtok(line, " \t\r"); p != NULL; p = strtok(NULL, " \t\r"))
            if (nt < 4)
                tok[nt++] = p;
            else
                nt = 5;
        if (nt == 0)
            continue;
        if (nt != 3)
            CB_FAIL("%s line %ld: expected 'TCID SCALES CODES'", results, lineno);
        char *ep;
        long id = strtol(tok[0], &ep, 10);
        if (*ep != '\0' || id < 1)
            CB_FAIL("%s line %ld: '%.20s' is not a tcId", results, lineno, tok[0]);
        size_t k = 0;
        while (k < V.nt && V.t[k].id != id)
            k++;
        if (k == V.nt)
            CB_FAIL("%s line %ld: tcId %ld is not in %s", results, lineno, id, file);
        if (seen[k])
            CB_FAIL("%s line %ld: tcId %ld appears twice", results, lineno, id);
        seen[k] = 1;
        got_n++;
        const bv_vtest *t = &V.t[k];
        size_t nblk = (size_t)t->n / bs;
        if (!has_scale) {
            if (strcmp(tok[1], "-") != 0)
                CB_FAIL("%s line %ld: %s has no block scales; SCALES must be '-'", results,
                              lineno, lowp_block_format_name(V.f));
        } else {
            if (strlen(tok[1]) != 2 * nblk)
                CB_FAIL(
                    "%s line %ld: tcId %ld has %zu block%s: SCALES must be %zu hex digits", results,
                    lineno, id, nblk, nblk > 1 ? "s" : "", 2 * nblk);
            for (size_t b = 0; b < nblk; b++) {
                long v = hex_fixed(tok[1] + 2 * b, 2);
                if (v < 0)
                    CB_FAIL("%s line %ld: SCALES '%.40s' is not hex", results, lineno,
                                  tok[1]);
                gsc[k][b] = (uint8_t)v;
            }
        }
        if (strlen(tok[2]) != (size_t)t->n * (size_t)d)
            CB_FAIL("%s line %ld: tcId %ld has %d elements: CODES must be %d hex digits",
                          results, lineno, id, t->n, t->n * d);
        for (int i = 0; i < t->n; i++) {
            long v = hex_fixed(tok[2] + i * d, d);
            if (v < 0)
                CB_FAIL("%s line %ld: CODES '%.40s' is not hex", results, lineno, tok[2]);
            gco[k][i] = (uint16_t)v;
        }
    }
    if (got_n != V.nt) {
        size_t k = 0;
        while (k < V.nt && seen[k])
            k++;
        CB_FAIL("%s: %zu results, but %s has %zu tests (tcId %ld is missing)", results, got_n,
                      file, V.nt, V.t[k].id);
    }
    size_t bad = 0;
    for (size_t k = 0; k < V.nt; k++) {
        if (bv_same(&V, &V.t[k], gsc[k], gco[k]))
            continue;
        if (max_errors == 0 || (long)bad < max_errors)
            bv_print_diff(&V, &V.t[k], gsc[k], gco[k], "got", "expected");
        bad++;
    }
    if (max_errors > 0 && (long)bad > max_errors)
        printf("(%zu more mismatches not shown; --errors 0 shows all)\n", bad - (size_t)max_errors);
    printf("%zu tests, %zu mismatches in %s\n", V.nt, bad, V.name);
    free(gsc);
    free(gco);
    free(seen);
    free(buf);
    bv_vfile_free(&V);
    return bad ? LOWP_EXIT_MISMATCH : LOWP_EXIT_OK;
bad_input:
    free(gsc);
    free(gco);
    free(seen);
    free(buf);
    bv_vfile_free(&V);
    lowp_cli_fail("%s", why);
#undef CB_FAIL
}

/* ---- run-block: lowp's own results, in the results format ---- */

static void run_block_usage(FILE *f)
{
    fprintf(f, "usage: lowp vectors run-block FILE [--out R]\n"
               "  Run lowp_block_quantize on every test of a block vector file and write the\n"
               "  results file check-block reads (to R, default standard output).\n");
}

static int cmd_run_block(int argc, char **argv)
{
    const char *file = NULL, *out = NULL;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            run_block_usage(stdout);
            return LOWP_EXIT_OK;
        } else if ((v = opt_value(argc, argv, &i, "--out")) != NULL) {
            out = v;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            lowp_cli_fail("vectors run-block: unknown option '%s'", argv[i]);
        } else if (file == NULL) {
            file = argv[i];
        } else {
            lowp_cli_fail("vectors run-block: one vector FILE at a time");
        }
    }
    if (file == NULL)
        lowp_cli_fail("vectors run-block: no vector FILE given");
    bv_vfile V;
    char why[512];
    if (bv_read(&V, file, why, sizeof why))
        lowp_cli_fail("%s", why);
    size_t bs = lowp_oracle_block_size(V.f);
    int d = code_digits(lowp_block_element_format(V.f));
    FILE *o = lowp_out_open(out, 0);
    fprintf(o, "# lowp_block_quantize on %s: TCID SCALES CODES\n", V.name);
    for (size_t k = 0; k < V.nt; k++) {
        uint8_t sc[BV_MAX];
        uint16_t co[BV_MAX];
        bv_run_block(&V, &V.t[k], sc, co);
        fprintf(o, "%ld ", V.t[k].id);
        if (lowp_block_has_scales(V.f))
            for (int b = 0; b * (int)bs < V.t[k].n; b++)
                fprintf(o, "%02x", sc[b]);
        else
            fputc('-', o);
        fputc(' ', o);
        for (int i = 0; i < V.t[k].n; i++)
            fprintf(o, "%0*x", d, co[i]);
        fputc('\n', o);
    }
    lowp_out_commit(o);
    bv_vfile_free(&V);
    return LOWP_EXIT_OK;
}

/* ---- verify-block ---- */

static void verify_block_usage(FILE *f)
{
    fprintf(f,
            "usage: lowp vectors verify-block [--dir DIR] [--errors N]\n"
            "  Re-derive every test in DIR (default " BV_DEFAULT_DIR ") with the oracle and with\n"
            "  lowp_block_quantize; report differences and files missing or extra.\n"
            "  Exit status: 0 no difference, 1 differences, 2 bad input.\n");
}

static int cmd_verify_block(int argc, char **argv)
{
    const char *dir = BV_DEFAULT_DIR;
    long max_errors = VEC_ERRORS_DEFAULT;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            verify_block_usage(stdout);
            return LOWP_EXIT_OK;
        } else if ((v = opt_value(argc, argv, &i, "--dir")) != NULL) {
            dir = v;
        } else if ((v = opt_value(argc, argv, &i, "--errors")) != NULL) {
            max_errors = parse_errors(v);
        } else {
            lowp_cli_fail("vectors verify-block: unknown argument '%s'", argv[i]);
        }
    }
    if (strlen(dir) > 3800)
        lowp_cli_fail("vectors verify-block: --dir path is too long");
    DIR *dd = opendir(dir);
    if (dd == NULL)
        lowp_cli_fail("vectors verify-block: cannot read directory '%s': %s", dir, strerror(errno));
    name_list present = {0};
    struct dirent *e;
    while ((e = readdir(dd)) != NULL)
        if (bv_is_file_name(e->d_name))
            name_list_add(&present, e->d_name);
    closedir(dd);
    if (present.n == 0)
        lowp_cli_fail("vectors verify-block: no *.json files in '%s'", dir);
    qsort(present.names, present.n, sizeof present.names[0], cmp_names);
    size_t tests = 0, diffs = 0, shown = 0, problems = 0;
    for (size_t i = 0; i < present.n; i++) {
        char path[4352], want[64];
        snprintf(path, sizeof path, "%s/%s", dir, present.names[i]);
        bv_vfile V;
        char why[512];
        if (bv_read(&V, path, why, sizeof why)) {
            free(present.names);
            lowp_cli_fail("%s", why);
        }
        bv_file_name(want, sizeof want, V.f, V.r);
        if (strcmp(want, present.names[i]) != 0)
            lowp_cli_fail("%s: the file holds %s/%s; its name should be %s", path,
                          lowp_block_format_name(V.f), lowp_recipe_name(V.r), want);
        if (lowp_recipe_check(V.f, V.r, NULL, 0) != 0) {
            printf("%s: lowp has no such recipe; gen-block would not write it\n", V.name);
            problems++;
        } else {
            for (size_t k = 0; k < V.nt; k++) {
                uint8_t sc[BV_MAX];
                uint16_t co[BV_MAX];
                for (int who = 0; who < 2; who++) {
                    if (who == 0)
                        bv_run_oracle(&V, &V.t[k], sc, co);
                    else
                        bv_run_block(&V, &V.t[k], sc, co);
                    if (bv_same(&V, &V.t[k], sc, co))
                        continue;
                    if (max_errors == 0 || (long)shown < max_errors) {
                        bv_print_diff(&V, &V.t[k], sc, co,
                                      who ? "lowp_block_quantize gives" : "the oracle gives",
                                      "file has");
                        shown++;
                    }
                    diffs++;
                }
            }
        }
        tests += V.nt;
        bv_vfile_free(&V);
    }
    if (max_errors > 0 && diffs > shown)
        printf("(%zu more differences not shown; --errors 0 shows all)\n", diffs - shown);
    for (int f = 0; f < LOWP_BLOCK_FORMAT_COUNT; f++)
        for (int r = 0; r < LOWP_RECIPE_COUNT; r++) {
            if (lowp_recipe_check((lowp_block_format)f, (lowp_recipe)r, NULL, 0) != 0)
                continue;
            char name[64];
            bv_file_name(name, sizeof name, (lowp_block_format)f, (lowp_recipe)r);
            if (!name_list_has(&present, name)) {
                printf("%s: missing (lowp has this recipe; run lowp vectors gen-block)\n", name);
                problems++;
            }
        }
    printf("%zu files, %zu tests, %zu differences, %zu missing or extra files in %s\n", present.n,
           tests, diffs, problems, dir);
    free(present.names);
    return (diffs || problems) ? LOWP_EXIT_MISMATCH : LOWP_EXIT_OK;
}

/* ---------------------------------------------------------------------------------
 * lowp vectors */

static void usage(FILE *f)
{
    fprintf(f, "usage: lowp vectors gen    [--dir DIR] [--seed S] [--commit C]\n"
               "       lowp vectors check  FILE --results R [--errors N] [--nan-any]\n"
               "       lowp vectors verify [--dir DIR] [--errors N]\n"
               "       lowp vectors gen-block    [--dir DIR] [--seed S] [--commit C]\n"
               "       lowp vectors check-block  FILE --results R [--errors N]\n"
               "       lowp vectors run-block    FILE [--out R]\n"
               "       lowp vectors verify-block [--dir DIR] [--errors N]\n"
               "  Elementwise (vectors/elementwise) and block (vectors/block) golden vectors;\n"
               "  format: vectors/README.md.\n");
}

int lowp_cmd_vectors(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return LOWP_EXIT_USAGE;
    }
    const char *sub = argv[1];
    if (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0 || strcmp(sub, "help") == 0) {
        usage(stdout);
        return LOWP_EXIT_OK;
    }
    if (strcmp(sub, "gen") == 0)
        return cmd_gen(argc - 1, argv + 1);
    if (strcmp(sub, "check") == 0)
        return cmd_check(argc - 1, argv + 1);
    if (strcmp(sub, "verify") == 0)
        return cmd_verify(argc - 1, argv + 1);
    if (strcmp(sub, "gen-block") == 0)
        return cmd_gen_block(argc - 1, argv + 1);
    if (strcmp(sub, "check-block") == 0)
        return cmd_check_block(argc - 1, argv + 1);
    if (strcmp(sub, "run-block") == 0)
        return cmd_run_block(argc - 1, argv + 1);
    if (strcmp(sub, "verify-block") == 0)
        return cmd_verify_block(argc - 1, argv + 1);
    lowp_cli_fail("vectors: unknown subcommand '%s' (gen, check, verify, gen-block, check-block, "
                  "run-block or verify-block)", sub);
}
