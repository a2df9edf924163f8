/* tools/vectors/elementwise.c: lowp vectors gen, check and verify, the elementwise golden
 * vectors (vectors/elementwise, one TestFloat-style text file per conversion). */
#define _POSIX_C_SOURCE 200809L

#include "vectors/vectors.h"

#include "cli.h"
#include "lowp/block.h"
#include "lowp/cases.h"
#include "lowp/format.h"
#include "lowp/oracle_block.h"

#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#define VEC_DEFAULT_DIR "vectors/elementwise"
#define VEC_PER_EXPONENT 1u
#define VEC_N_RANDOM 500u

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
    L->val = lowp_vec_xmalloc(L->nval * sizeof *L->val);
    L->mid = lowp_vec_xmalloc(L->nmid * sizeof *L->mid);
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
    float x = lowp_f32_from_bits(u);
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
    uint64_t *seen = lowp_vec_xcalloc(cap, sizeof *seen); /* bits + 1; 0 = empty */
    ladder L;
    ladder_init(&L, f);
    cs->in = lowp_vec_xmalloc(n * sizeof *cs->in);
    cs->flags = lowp_vec_xmalloc(n * sizeof *cs->flags);
    cs->n = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t u = lowp_f32_bits(v[i]);
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

static void write_header(FILE *o, const char *name, const lowp_codec *c, uint64_t seed,
                         const char *commit, size_t n)
{
    lowp_format f = c->format;
    int d = lowp_vec_code_digits(f);
    fprintf(o, "# lowp elementwise golden vectors: %s\n", name);
    fprintf(o, "# operation: " VEC_OP_PREFIX "%s (IEEE 754 binary32 input -> %s code)\n",
            lowp_format_name(f), lowp_format_name(f));
    fprintf(o, "# format: %s\n", lowp_format_name(f));
    fprintf(o, "# profile: %s\n", lowp_profile_name(c->profile));
    fprintf(o, "# rounding: %s\n", lowp_round_name(c->round));
    fprintf(o, "# saturation: %s\n", lowp_vec_sat_name(c->saturate));
    fprintf(o, "# format %s = %s\n", lowp_format_name(f), format_about[f]);
    fprintf(o, "# profile %s = %s\n", lowp_profile_name(c->profile), profile_about[c->profile]);
    fprintf(o, "# rounding %s = %s\n", lowp_round_name(c->round), round_about[c->round]);
    fprintf(o, "# saturation %s = %s\n", lowp_vec_sat_name(c->saturate),
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
    lowp_vec_vec_name(name, name_len, c->format, c->profile, c->round, c->saturate);
    char path[4352];
    snprintf(path, sizeof path, "%s/%s.txt", dir, name);
    for (size_t i = 0; i < cs->n; i++)
        codes[i] = lowp_encode_f32(c, xs[i]);
    FILE *o = lowp_out_open(path, 0);
    write_header(o, name, c, seed, commit, cs->n);
    int d = lowp_vec_code_digits(c->format);
    for (size_t i = 0; i < cs->n; i++) {
        fprintf(o, "%08" PRIx32 " %0*x", cs->in[i], d, (unsigned)codes[i]);
        write_flags(o, cs->flags[i]);
        fputc('\n', o);
    }
    lowp_out_commit(o);
}

static int is_vector_file_name(const char *s)
{
    size_t n = strlen(s);
    return strncmp(s, VEC_OP_PREFIX, strlen(VEC_OP_PREFIX)) == 0 && n > 4 &&
           strcmp(s + n - 4, ".txt") == 0;
}

int lowp_vec_cmd_gen(int argc, char **argv)
{
    const char *dir = VEC_DEFAULT_DIR;
    uint64_t seed = LOWP_DEFAULT_SEED;
    char commit[80];
    if (lowp_vec_gen_start(argc, argv, "gen", gen_usage, &dir, &seed, commit, sizeof commit))
        return LOWP_EXIT_OK;
    name_list written = {0};
    size_t files = 0, total = 0;
    int progress = lowp_progress_wanted();
    for (int f = 0; f < LOWP_FORMAT_COUNT; f++) {
        case_set cs;
        case_set_build(&cs, (lowp_format)f, seed);
        float *xs = lowp_vec_xmalloc(cs.n * sizeof *xs);
        uint16_t *codes = lowp_vec_xmalloc(cs.n * sizeof *codes);
        for (size_t i = 0; i < cs.n; i++)
            xs[i] = lowp_f32_from_bits(cs.in[i]);
        lowp_codec cc[VEC_MAX_CODECS];
        const size_t nc = lowp_vec_codecs((lowp_format)f, cc);
        for (size_t k = 0; k < nc; k++) {
            char name[96], file[128];
            gen_one(dir, &cs, &cc[k], seed, commit, xs, codes, name, sizeof name);
            snprintf(file, sizeof file, "%s.txt", name);
            lowp_vec_name_list_add(&written, file);
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
    lowp_vec_remove_stale(dir, is_vector_file_name, &written);
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
    char *buf;
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
    lowp_vec_base_name(vf->name, sizeof vf->name, path, ".txt");

    size_t len;
    vf->buf = lowp_vec_read_text(path, &len);

    size_t cap = 1;
    for (size_t i = 0; i < len; i++)
        cap += vf->buf[i] == '\n';
    vf->in = lowp_vec_xmalloc(cap * sizeof *vf->in);
    vf->code = lowp_vec_xmalloc(cap * sizeof *vf->code);
    vf->line = lowp_vec_xmalloc(cap * sizeof *vf->line);
    vf->note = lowp_vec_xmalloc(cap * sizeof *vf->note);

    char *s = vf->buf, *end = s + len, *line;
    long lineno = 0;
    while ((line = lowp_vec_next_line(&s, end, &lineno)) != NULL) {
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
        int d = lowp_vec_code_digits(vf->format);
        long in = lowp_vec_hex_fixed(line, 8), code = -1;
        const char *rest = "";
        if (in >= 0 && line[8] == ' ') {
            code = lowp_vec_hex_fixed(line + 9, d);
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
    int d = lowp_vec_code_digits(vf->format);
    lowp_vec_fmt_value(xs, sizeof xs, (double)lowp_f32_from_bits(vf->in[k]));
    lowp_vec_fmt_value(gs, sizeof gs, lowp_decode_f64(vf->format, (uint16_t)got));
    lowp_vec_fmt_value(es, sizeof es, lowp_decode_f64(vf->format, vf->code[k]));
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
    return lowp_vec_hex_fixed(t, (int)len);
}

static uint16_t *read_results(const char *rpath, const vec_file *vf)
{
    size_t len;
    char *buf = lowp_vec_read_text(rpath, &len);
    uint16_t *got = lowp_vec_xmalloc((vf->n ? vf->n : 1) * sizeof *got);
    unsigned maxcode = (1u << lowp_format_bits(vf->format)) - 1;
    size_t k = 0;
    char *s = buf, *end = s + len, *line;
    long lineno = 0;
    while ((line = lowp_vec_next_line(&s, end, &lineno)) != NULL) {
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

int lowp_vec_cmd_check(int argc, char **argv)
{
    const char *file = NULL, *results = NULL;
    long max_errors;
    int nan_any = 0;
    if (lowp_vec_args(argc, argv, "check", check_usage,
                      &(lowp_vec_opts){.file = &file, .results = &results,
                                       .max_errors = &max_errors, .nan_any = &nan_any}))
        return LOWP_EXIT_OK;
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
        if (lowp_vec_error_shown(max_errors, bad))
            print_failure(&vf, k, g, "got", "expected");
        bad++;
    }
    lowp_vec_more_not_shown(bad, max_errors, "mismatches");
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

int lowp_vec_cmd_verify(int argc, char **argv)
{
    const char *dir = VEC_DEFAULT_DIR;
    long max_errors;
    name_list present = {0};
    if (lowp_vec_verify_start(argc, argv, "verify", verify_usage, &dir, &max_errors,
                              is_vector_file_name, VEC_OP_PREFIX "*.txt", &present))
        return LOWP_EXIT_OK;

    size_t cases = 0, diffs = 0, problems = 0;
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
        lowp_vec_vec_name(want, sizeof want, vf.format, vf.profile, vf.round, vf.sat);
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
        float *xs = lowp_vec_xmalloc(vf.n * sizeof *xs);
        uint16_t *arr = lowp_vec_xmalloc(vf.n * sizeof *arr);
        for (size_t k = 0; k < vf.n; k++)
            xs[k] = lowp_f32_from_bits(vf.in[k]);
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
            if (lowp_vec_error_shown(max_errors, diffs))
                print_failure(&vf, k, now, who, "file has");
            diffs++;
        }
        free(xs);
        free(arr);
        cases += vf.n;
        vec_file_free(&vf);
    }
    lowp_vec_more_not_shown(diffs, max_errors, "differences");
    /* Every combination lowp accepts has its file. */
    for (int f = 0; f < LOWP_FORMAT_COUNT; f++) {
        lowp_codec cc[VEC_MAX_CODECS];
        const size_t nc = lowp_vec_codecs((lowp_format)f, cc);
        for (size_t k = 0; k < nc; k++) {
            char name[96], file[128];
            lowp_vec_vec_name(name, sizeof name, cc[k].format, cc[k].profile, cc[k].round,
                              cc[k].saturate);
            snprintf(file, sizeof file, "%s.txt", name);
            if (!lowp_vec_name_list_has(&present, file)) {
                printf("%s: missing (lowp accepts this combination; run lowp vectors gen)\n",
                       name);
                problems++;
            }
        }
    }
    printf("%zu files, %zu cases, %zu differences, %zu missing or extra files in %s\n", present.n,
           cases, diffs, problems, dir);
    free(present.names);
    return (diffs || problems) ? LOWP_EXIT_MISMATCH : LOWP_EXIT_OK;
}
