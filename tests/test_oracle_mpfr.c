/* tests/test_oracle_mpfr.c: the fast codecs (format.c, format_array.c) against the MPFR
 * oracle (oracle_format.c), the way TestFloat checks SoftFloat against slowfloat.
 *
 * For every (format, profile, mode, saturate) that lowp_codec_init accepts: every code's
 * decoded value; all 2^16 bf16 and all 2^16 f16 inputs widened to binary32; the structured
 * binary32 set of lowp_cases_f32 through the scalar and array encoders; that set widened to
 * binary64, plus binary64 values that are not binary32 values. The oracle itself is pinned
 * by hand-written expectations taken from ref/notes/formats.md and ref/profiles.md.
 *
 * One line per mismatch, at most MAX_REPORT per case set, then counting goes on; the last
 * line is the summary "oracle_mpfr: N cases, M mismatches". The seed (env LOWP_SEED,
 * default LOWP_DEFAULT_SEED) is printed first. Exit status is non-zero on any mismatch.
 */
#include <check.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <mpfr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lowp/cases.h"
#include "lowp/format.h"
#include "lowp/oracle.h"
#include "lowp_test.h"

#define MAX_REPORT 20
#define PER_EXPONENT 8
#define N_RANDOM 20000
#define N_RANDOM_F64 20000

/* Totals over the whole run; the runner does not fork, so every test adds to them. */
static unsigned long long total_cases, total_bad;
static uint64_t seed = LOWP_DEFAULT_SEED;

/* ---------------------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------------------- */

static int code_digits(lowp_format f)
{
    return (int)(lowp_format_bits(f) + 3) / 4;
}

/* One (format, profile, mode, saturate) that lowp_codec_init accepts. */
typedef struct {
    lowp_format f;
    lowp_profile p;
    lowp_round r;
    int sat;
    lowp_codec codec;
    char label[48]; /* "e4m3 cuda rn sat" */
} combo;

static combo combos[LOWP_FORMAT_COUNT * LOWP_PROFILE_COUNT * LOWP_ROUND_COUNT * 2];
static int n_combos;

/* A case set being compared: counts and the TestFloat-style report. */
typedef struct {
    const char *label;
    const char *set;
    lowp_format f;
    unsigned long long n, bad;
} tally;

static tally tally_begin(const char *label, const char *set, lowp_format f)
{
    tally t = {label, set, f, 0, 0};
    return t;
}

static int tally_show(tally *t)
{
    t->bad++;
    if (t->bad <= MAX_REPORT)
        return 1;
    if (t->bad == MAX_REPORT + 1)
        printf("%s [%s]: further mismatches not shown\n", t->label, t->set);
    return 0;
}

static void check_f32(tally *t, float x, uint16_t got, uint16_t want)
{
    t->n++;
    if (got == want || !tally_show(t))
        return;
    const int w = code_digits(t->f);
    printf("%s [%s]: input 0x%08" PRIx32 " (%.9g) got 0x%0*x expected 0x%0*x\n", t->label,
           t->set, lowp_f32_bits(x), (double)x, w, got, w, want);
}

static void check_f64(tally *t, double x, uint16_t got, uint16_t want)
{
    t->n++;
    if (got == want || !tally_show(t))
        return;
    const int w = code_digits(t->f);
    printf("%s [%s]: input 0x%016" PRIx64 " (%.17g) got 0x%0*x expected 0x%0*x\n", t->label,
           t->set, lowp_f64_bits(x), x, w, got, w, want);
}

static unsigned long long tally_end(tally *t)
{
    if (t->bad)
        printf("%s [%s]: %llu of %llu mismatch\n", t->label, t->set, t->bad, t->n);
    total_cases += t->n;
    total_bad += t->bad;
    return t->bad;
}

/* Oracle codes for a batch, in parallel (MPFR is thread-safe with TLS; the oracle keeps
 * all its MPFR state per call). Returns the number of inputs the oracle refused. */
static long oracle_f32(const combo *c, const float *in, uint16_t *want, size_t n)
{
    long err = 0;
#pragma omp parallel for schedule(dynamic, 4096) reduction(+ : err)
    for (long i = 0; i < (long)n; i++)
        if (lowp_oracle_encode_f32(c->f, c->p, c->r, c->sat, in[i], &want[i]) != 0)
            err++;
    return err;
}

static long oracle_f64(const combo *c, const double *in, uint16_t *want, size_t n)
{
    long err = 0;
#pragma omp parallel for schedule(dynamic, 4096) reduction(+ : err)
    for (long i = 0; i < (long)n; i++)
        if (lowp_oracle_encode_f64(c->f, c->p, c->r, c->sat, in[i], &want[i]) != 0)
            err++;
    return err;
}

/* ---------------------------------------------------------------------------------------
 * Input sets, built once in main (they depend on the format and the seed only).
 * ------------------------------------------------------------------------------------- */

static float *inputs16;          /* 2^16 bf16 then 2^16 f16 values, as binary32 */
static float *cases32[LOWP_FORMAT_COUNT];
static size_t n_cases32[LOWP_FORMAT_COUNT];
static double *extra64[LOWP_FORMAT_COUNT];
static size_t n_extra64[LOWP_FORMAT_COUNT];

static void dpush_pm(lowp_test_f64_list *b, double x)
{
    lowp_test_push_f64(b, x);
    lowp_test_push_f64(b, -x);
}

/* x and binary64 values close to it that binary32 cannot hold: both signs. */
static void dpush_around(lowp_test_f64_list *b, double x)
{
    if (!isfinite(x))
        return;
    dpush_pm(b, x);
    dpush_pm(b, x * (1.0 + 0x1p-40));
    dpush_pm(b, x * (1.0 - 0x1p-40));
    dpush_pm(b, nextafter(x, INFINITY));
    dpush_pm(b, nextafter(x, 0.0));
}

/* Binary64 inputs that are not binary32 values: around every code value and every tie of
 * the format (where one rounding and two differ), midpoints between binary32 neighbours of
 * every structured case (ties for the first rounding of torch/ml_dtypes), values below
 * 2^-149 and above FLT_MAX, NaN payloads, and random doubles of moderate exponent. */
static void build_extra64(lowp_format f)
{
    lowp_test_f64_list b = {0};
    const uint16_t maxc = lowp_format_max_code(f);
    for (uint32_t c = 0; c <= maxc; c++) {
        const double v = lowp_oracle_decode(f, (uint16_t)c);
        dpush_around(&b, v);
        const double w = c < maxc ? lowp_oracle_decode(f, (uint16_t)(c + 1))
                                  : v + (v - lowp_oracle_decode(f, (uint16_t)(c - 1)));
        dpush_around(&b, f == LOWP_E8M0 ? 1.5 * v : 0.5 * (v + w)); /* the tie above v */
    }
    dpush_around(&b, 2.0 * lowp_oracle_decode(f, maxc));
    for (size_t i = 0; i < n_cases32[f]; i++) {
        const float x = cases32[f][i];
        if (!isfinite(x) || x == 0.0f)
            continue;
        const float up = nextafterf(x, x > 0 ? INFINITY : -INFINITY);
        if (isfinite(up))
            lowp_test_push_f64(&b, 0.5 * ((double)x + (double)up));
        lowp_test_push_f64(&b, (double)x * (1.0 + 0x1p-40));
    }
    static const double tiny[] = {0x1p-150, 0x1.8p-150, 0x1.8p-151, 0x1p-151, 0x1p-200,
                                  0x1p-1074, 0x1p-1022, 0x1.0000000001p-150,
                                  0x1.fffffffffp-151, 0x1.7ffffffffp-150};
    static const double huge[] = {0x1.ffffffp127, 0x1.ffffff0000001p127,
                                  0x1.fffffefffffffp127, 0x1.fffffe0000001p127, 0x1p128,
                                  0x1.0000000001p128, 0x1p200, 1e300, DBL_MAX, 0x1p1023};
    for (size_t i = 0; i < sizeof tiny / sizeof tiny[0]; i++)
        dpush_pm(&b, tiny[i]);
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++)
        dpush_pm(&b, huge[i]);
    static const uint64_t nans[] = {
        UINT64_C(0x7FF8000000000000), UINT64_C(0x7FF0000000000001),
        UINT64_C(0x7FFC000000000000), UINT64_C(0x7FF4000000000000),
        UINT64_C(0x7FFFFFFFFFFFFFFF), UINT64_C(0x7FF0000020000000),
        UINT64_C(0x7FF000001FFFFFFF), UINT64_C(0x7FF8000000000001),
        UINT64_C(0x7FF0000000000000), UINT64_C(0x0000000000000000),
        UINT64_C(0x0000000000000001), UINT64_C(0x000FFFFFFFFFFFFF)};
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
        lowp_test_push_f64(&b, lowp_f64_from_bits(nans[i]));
        lowp_test_push_f64(&b, lowp_f64_from_bits(nans[i] | UINT64_C(0x8000000000000000)));
    }
    uint64_t st = seed ^ UINT64_C(0x6636340000000000) ^ (uint64_t)f; /* "f64" */
    for (size_t k = 0; k < N_RANDOM_F64; k++) {
        const uint64_t r = lowp_splitmix64(&st);
        const uint64_t e = 1023 - 160 + (lowp_splitmix64(&st) % 301); /* 2^-160 .. 2^140 */
        lowp_test_push_f64(&b,
                           lowp_f64_from_bits((r & UINT64_C(0x800FFFFFFFFFFFFF)) | (e << 52)));
    }
    for (size_t k = 0; k < N_RANDOM_F64 / 10; k++)
        lowp_test_push_f64(&b, lowp_f64_from_bits(lowp_splitmix64(&st)));
    extra64[f] = b.v;
    n_extra64[f] = b.n;
}

static void build_inputs(void)
{
    inputs16 = malloc(2 * 65536 * sizeof *inputs16);
    if (inputs16 == NULL) {
        fprintf(stderr, "oracle_mpfr: out of memory\n");
        exit(2);
    }
    for (uint32_t i = 0; i < 65536; i++) {
        inputs16[i] = lowp_f32_from_bits(i << 16); /* bf16 widening is a shift, exactly */
        inputs16[65536 + i] = lowp_test_f16_widen((uint16_t)i);
    }
    for (int f = 0; f < LOWP_FORMAT_COUNT; f++) {
        n_cases32[f] = lowp_cases_f32((lowp_format)f, seed, PER_EXPONENT, N_RANDOM, &cases32[f]);
        if (n_cases32[f] == 0) {
            fprintf(stderr, "oracle_mpfr: lowp_cases_f32 failed for %s\n",
                    lowp_format_name((lowp_format)f));
            exit(2);
        }
        build_extra64((lowp_format)f);
    }
}

static void build_combos(void)
{
    for (int f = 0; f < LOWP_FORMAT_COUNT; f++)
        for (int p = 0; p < LOWP_PROFILE_COUNT; p++)
            for (int r = 0; r < LOWP_ROUND_COUNT; r++)
                for (int sat = 0; sat <= 1; sat++) {
                    combo *c = &combos[n_combos];
                    if (lowp_codec_init(&c->codec, (lowp_format)f, (lowp_profile)p,
                                        (lowp_round)r, sat, NULL, 0) != 0)
                        continue;
                    c->f = (lowp_format)f;
                    c->p = (lowp_profile)p;
                    c->r = (lowp_round)r;
                    c->sat = sat;
                    snprintf(c->label, sizeof c->label, "%s %s %s %s",
                             lowp_format_name(c->f), lowp_profile_name(c->p),
                             lowp_round_name(c->r), sat ? "sat" : "nosat");
                    n_combos++;
                }
}

/* ---------------------------------------------------------------------------------------
 * The oracle pinned to the documents.
 * ------------------------------------------------------------------------------------- */

enum { IN_F32, IN_F32_BITS, IN_F64, IN_F64_BITS };

typedef struct {
    lowp_format f;
    lowp_profile p;
    lowp_round r;
    int sat;
    int kind;
    double x;      /* IN_F32 (must be a binary32 value), IN_F64 */
    uint64_t bits; /* IN_F32_BITS, IN_F64_BITS */
    uint16_t want;
    const char *src;
} named;

#define E2M1 LOWP_E2M1
#define E4M3 LOWP_E4M3
#define E5M2 LOWP_E5M2
#define E8M0 LOWP_E8M0
#define BF16 LOWP_BF16
#define F16 LOWP_F16
#define CUDA LOWP_PROFILE_CUDA
#define TORCH LOWP_PROFILE_TORCH
#define MLD LOWP_PROFILE_ML_DTYPES
#define OCP LOWP_PROFILE_OCP
#define RN LOWP_RN
#define RZ LOWP_RZ
#define RU LOWP_RU
#define RD LOWP_RD
#define RNA LOWP_RNA
#define V(f, p, r, s, x, w, src) {f, p, r, s, IN_F32, x, 0, w, src}
#define B(f, p, r, s, b, w, src) {f, p, r, s, IN_F32_BITS, 0, b, w, src}
#define V64(f, p, r, s, x, w, src) {f, p, r, s, IN_F64, x, 0, w, src}
#define B64(f, p, r, s, b, w, src) {f, p, r, s, IN_F64_BITS, 0, b, w, src}
#define QNAN 0x7FC00000u
#define NQNAN 0xFFC00000u
#define PINF ((double)INFINITY)

static const named NAMED[] = {
    /* ref/notes/formats.md 1.1: CUDA host emulation, RN and RZ columns */
    V(E2M1, CUDA, RN, 1, 0.0, 0x0, "1.1"), V(E2M1, CUDA, RZ, 1, 0.0, 0x0, "1.1"),
    V(E2M1, CUDA, RN, 1, -0.0, 0x8, "1.1"), V(E2M1, CUDA, RZ, 1, -0.0, 0x8, "1.1"),
    V(E2M1, CUDA, RN, 1, 0.25, 0x0, "1.1"), V(E2M1, CUDA, RZ, 1, 0.25, 0x0, "1.1"),
    V(E2M1, CUDA, RN, 1, 0.26f, 0x1, "1.1"), V(E2M1, CUDA, RZ, 1, 0.26f, 0x0, "1.1"),
    V(E2M1, CUDA, RN, 1, 0.75, 0x2, "1.1"), V(E2M1, CUDA, RZ, 1, 0.75, 0x1, "1.1"),
    V(E2M1, CUDA, RN, 1, 1.25, 0x2, "1.1"), V(E2M1, CUDA, RZ, 1, 1.25, 0x2, "1.1"),
    V(E2M1, CUDA, RN, 1, 1.75, 0x4, "1.1"), V(E2M1, CUDA, RZ, 1, 1.75, 0x3, "1.1"),
    V(E2M1, CUDA, RN, 1, 2.5, 0x4, "1.1"), V(E2M1, CUDA, RZ, 1, 2.5, 0x4, "1.1"),
    V(E2M1, CUDA, RN, 1, 3.5, 0x6, "1.1"), V(E2M1, CUDA, RZ, 1, 3.5, 0x5, "1.1"),
    V(E2M1, CUDA, RN, 1, 5.0, 0x6, "1.1"), V(E2M1, CUDA, RZ, 1, 5.0, 0x6, "1.1"),
    V(E2M1, CUDA, RN, 1, 5.9f, 0x7, "1.1"), V(E2M1, CUDA, RZ, 1, 5.9f, 0x6, "1.1"),
    V(E2M1, CUDA, RN, 1, 6.5, 0x7, "1.1"), V(E2M1, CUDA, RZ, 1, 6.5, 0x7, "1.1"),
    V(E2M1, CUDA, RN, 1, PINF, 0x7, "1.1"), V(E2M1, CUDA, RN, 1, -PINF, 0xF, "1.1"),
    V(E2M1, CUDA, RZ, 1, PINF, 0x7, "1.1"), V(E2M1, CUDA, RZ, 1, -PINF, 0xF, "1.1"),
    B(E2M1, CUDA, RN, 1, QNAN, 0x7, "1.1"), B(E2M1, CUDA, RN, 1, NQNAN, 0x7, "1.1"),
    B(E2M1, CUDA, RZ, 1, NQNAN, 0x7, "1.1"), B64(E2M1, CUDA, RN, 1, 0xFFF8000000000000u, 0x7, "1.1"),
    V(E2M1, CUDA, RN, 1, -0.25, 0x8, "1.1"), V(E2M1, CUDA, RN, 1, -5.0, 0xE, "1.1"),
    /* ref/notes/formats.md 1.3: ml_dtypes 0.6.0 measured */
    V(E2M1, MLD, RN, 1, 0.0, 0x0, "1.3"), V(E2M1, MLD, RN, 1, -0.0, 0x8, "1.3"),
    V(E2M1, MLD, RN, 1, 0.25, 0x0, "1.3"), B(E2M1, MLD, RN, 1, 0x3E800001u, 0x1, "1.3"),
    V(E2M1, MLD, RN, 1, 0.75, 0x2, "1.3"), V(E2M1, MLD, RN, 1, 1.25, 0x2, "1.3"),
    V(E2M1, MLD, RN, 1, 1.75, 0x4, "1.3"), V(E2M1, MLD, RN, 1, 2.5, 0x4, "1.3"),
    V(E2M1, MLD, RN, 1, 3.5, 0x6, "1.3"), V(E2M1, MLD, RN, 1, 5.0, 0x6, "1.3"),
    V(E2M1, MLD, RN, 1, 6.0, 0x7, "1.3"), V(E2M1, MLD, RN, 1, 7.0, 0x7, "1.3"),
    V(E2M1, MLD, RN, 1, PINF, 0x7, "1.3"), V(E2M1, MLD, RN, 1, -PINF, 0xF, "1.3"),
    B(E2M1, MLD, RN, 1, QNAN, 0x8, "1.3"), B(E2M1, MLD, RN, 1, NQNAN, 0x0, "1.3"),
    V(E2M1, MLD, RN, 1, -0.25, 0x8, "1.3"), V(E2M1, MLD, RN, 1, -5.0, 0xE, "1.3"),
    /* ref/notes/formats.md 1.6: tie table, RNE and ties-away */
    V(E2M1, OCP, RN, 1, 0.25, 0x0, "1.6"), V(E2M1, OCP, RNA, 1, 0.25, 0x1, "1.6"),
    V(E2M1, OCP, RN, 1, 0.75, 0x2, "1.6"), V(E2M1, OCP, RNA, 1, 0.75, 0x2, "1.6"),
    V(E2M1, OCP, RN, 1, 1.25, 0x2, "1.6"), V(E2M1, OCP, RNA, 1, 1.25, 0x3, "1.6"),
    V(E2M1, OCP, RN, 1, 1.75, 0x4, "1.6"), V(E2M1, OCP, RNA, 1, 1.75, 0x4, "1.6"),
    V(E2M1, OCP, RN, 1, 2.5, 0x4, "1.6"), V(E2M1, OCP, RNA, 1, 2.5, 0x5, "1.6"),
    V(E2M1, OCP, RN, 1, 3.5, 0x6, "1.6"), V(E2M1, OCP, RNA, 1, 3.5, 0x6, "1.6"),
    V(E2M1, OCP, RN, 1, 5.0, 0x6, "1.6"), V(E2M1, OCP, RNA, 1, 5.0, 0x7, "1.6"),
    V(E2M1, OCP, RNA, 1, -2.5, 0xD, "1.6"), V(E2M1, OCP, RN, 1, 1e30f, 0x7, "8.4"),
    B(E2M1, OCP, RN, 1, QNAN, 0x7, "profiles"), B(E2M1, OCP, RN, 1, NQNAN, 0xF, "profiles"),
    /* ref/notes/formats.md 2.1/2.2/8.2: E4M3 overflow band and subnormal ties */
    V(E4M3, CUDA, RN, 1, 448.0, 0x7E, "2.1"), V(E4M3, CUDA, RN, 1, 464.0, 0x7E, "2.1"),
    B(E4M3, CUDA, RN, 1, 0x43E80001u, 0x7E, "2.1"), B(E4M3, CUDA, RN, 0, 0x43E80001u, 0x7F, "2.1"),
    V(E4M3, CUDA, RN, 0, 464.0, 0x7E, "2.1"), B(E4M3, CUDA, RN, 1, 0x43EFFFFFu, 0x7E, "8.2"),
    B(E4M3, CUDA, RN, 0, 0x43EFFFFFu, 0x7F, "8.2"), V(E4M3, CUDA, RN, 1, 480.0, 0x7E, "8.2"),
    V(E4M3, CUDA, RN, 0, 480.0, 0x7F, "8.2"), V(E4M3, CUDA, RN, 0, -500.0, 0xFF, "2.1"),
    V(E4M3, CUDA, RN, 1, PINF, 0x7E, "2.2"), V(E4M3, CUDA, RN, 1, -PINF, 0xFE, "2.2"),
    V(E4M3, CUDA, RN, 0, PINF, 0x7F, "2.1"), V(E4M3, CUDA, RN, 0, -PINF, 0xFF, "2.1"),
    B(E4M3, CUDA, RN, 1, QNAN, 0x7F, "2.1"), B(E4M3, CUDA, RN, 1, NQNAN, 0x7F, "2.1"),
    B(E4M3, CUDA, RN, 0, NQNAN, 0x7F, "2.1"), B64(E4M3, CUDA, RN, 1, 0xFFF8000000000000u, 0xFF, "2.1"),
    B64(E4M3, CUDA, RN, 1, 0x7FF8000000000000u, 0x7F, "2.1"),
    V(E4M3, CUDA, RN, 1, 0x1p-10, 0x00, "2.1"), B(E4M3, CUDA, RN, 1, 0x3A800001u, 0x01, "8.2"),
    V(E4M3, CUDA, RN, 1, 0x1.8p-9, 0x02, "2.1"), V(E4M3, CUDA, RN, 1, -0.0, 0x80, "8.1"),
    /* ref/notes/formats.md 2.3/2.4: torch 2.11 and ml_dtypes, non-saturating */
    V(E4M3, TORCH, RN, 0, 448.0, 0x7E, "2.4"), V(E4M3, TORCH, RN, 0, 464.0, 0x7E, "2.4"),
    B(E4M3, TORCH, RN, 0, 0x43E80001u, 0x7F, "2.4"), V(E4M3, TORCH, RN, 0, 480.0, 0x7F, "2.4"),
    V(E4M3, TORCH, RN, 0, 500.0, 0x7F, "2.4"), V(E4M3, TORCH, RN, 0, 1e6, 0x7F, "2.4"),
    V(E4M3, TORCH, RN, 0, -500.0, 0xFF, "2.4"), V(E4M3, TORCH, RN, 0, PINF, 0x7F, "2.4"),
    V(E4M3, TORCH, RN, 0, -PINF, 0xFF, "2.4"), B(E4M3, TORCH, RN, 0, QNAN, 0x7F, "2.4"),
    B(E4M3, TORCH, RN, 0, NQNAN, 0xFF, "2.4"),
    V(E4M3, MLD, RN, 0, 464.0, 0x7E, "2.3"), B(E4M3, MLD, RN, 0, 0x43E80001u, 0x7F, "2.3"),
    V(E4M3, MLD, RN, 0, -PINF, 0xFF, "2.3"), B(E4M3, MLD, RN, 0, NQNAN, 0xFF, "2.3"),
    /* profiles.md: IEEE overflow rules under the other modes */
    V(E4M3, OCP, RNA, 1, 464.0, 0x7E, "profiles"), V(E4M3, OCP, RNA, 0, 464.0, 0x7F, "profiles"),
    V(E4M3, OCP, RZ, 0, 1e6, 0x7E, "profiles"), V(E4M3, OCP, RZ, 0, 480.0, 0x7E, "profiles"),
    V(E4M3, OCP, RZ, 0, PINF, 0x7F, "profiles"), V(E4M3, OCP, LOWP_RD, 0, -1e6, 0xFF, "profiles"),
    V(E4M3, OCP, RU, 0, -1e6, 0xFE, "profiles"), V(E4M3, OCP, RU, 0, 448.5, 0x7F, "profiles"),
    /* conformance 3.3 (MPFR checks) and profiles.md: E5M2 */
    V(E5M2, OCP, RN, 0, 61440.0, 0x7C, "c3.3"), V(E5M2, OCP, RN, 1, 61440.0, 0x7B, "profiles"),
    V(E5M2, OCP, RN, 0, 0x1p-17, 0x00, "c3.3"), V(E5M2, OCP, RN, 0, 0x1.8p-17, 0x01, "c3.3"),
    V(E5M2, OCP, RN, 1, -PINF, 0xFB, "profiles"), V(E5M2, OCP, RZ, 0, PINF, 0x7C, "profiles"),
    B(E5M2, CUDA, RN, 1, NQNAN, 0x7F, "profiles"), B(E5M2, TORCH, RN, 0, NQNAN, 0xFF, "profiles"),
    B(E5M2, MLD, RN, 0, QNAN, 0x7E, "profiles"), B(E5M2, MLD, RN, 0, NQNAN, 0xFE, "profiles"),
    B64(E5M2, CUDA, RN, 1, 0x7FF8000000000000u, 0x7E, "profiles"),
    B64(E5M2, CUDA, RN, 1, 0xFFF8000000000000u, 0xFE, "profiles"),
    B64(E5M2, CUDA, RN, 1, 0x7FFC000000000000u, 0x7F, "profiles"),
    B64(E5M2, CUDA, RN, 0, 0xFFF4000000000000u, 0xFF, "profiles"),
    B64(E5M2, CUDA, RN, 0, 0x7FF0000000000001u, 0x7E, "profiles"),
    /* ref/notes/formats.md 3.1: CUDA E8M0, columns RZ-sat RZ-nosat RP-sat RP-nosat */
#define E8C(x, a, b, c, d)                                                                  \
    V(E8M0, CUDA, RZ, 1, x, a, "3.1"), V(E8M0, CUDA, RZ, 0, x, b, "3.1"),                   \
        V(E8M0, CUDA, RU, 1, x, c, "3.1"), V(E8M0, CUDA, RU, 0, x, d, "3.1")
    E8C(0.0, 0x00, 0x00, 0x00, 0x00), E8C(-0.0, 0x00, 0x00, 0x00, 0x00),
    E8C(1.0, 0x7F, 0x7F, 0x7F, 0x7F), E8C(1.25, 0x7F, 0x7F, 0x80, 0x80),
    E8C(1.5, 0x7F, 0x7F, 0x80, 0x80), E8C(1.75, 0x7F, 0x7F, 0x80, 0x80),
    E8C(3.0, 0x80, 0x80, 0x81, 0x81), E8C(-3.0, 0x80, 0x80, 0x81, 0x81),
    E8C(-4.0, 0x81, 0x81, 0x81, 0x81), E8C(0x1p-127, 0x00, 0x00, 0x00, 0x00),
    E8C(0x1.8p-127, 0x00, 0x00, 0x01, 0x01), E8C(0x1p-149, 0x00, 0x00, 0x00, 0x00),
    E8C(0x1.666666p127, 0xFE, 0xFE, 0xFE, 0xFF), E8C(FLT_MAX, 0xFE, 0xFE, 0xFE, 0xFF),
    E8C(PINF, 0xFE, 0xFF, 0xFE, 0xFF), E8C(-PINF, 0xFE, 0xFF, 0xFE, 0xFF),
    B(E8M0, CUDA, RZ, 1, QNAN, 0xFF, "3.1"), B(E8M0, CUDA, RU, 0, NQNAN, 0xFF, "3.1"),
    /* ref/notes/formats.md 3.3: torch, nearest with 1.5 up, no saturation */
    V(E8M0, TORCH, RN, 0, 0.0, 0x00, "3.3"), V(E8M0, TORCH, RN, 0, -0.0, 0x00, "3.3"),
    V(E8M0, TORCH, RN, 0, 1.4999999f, 0x7F, "3.3"), V(E8M0, TORCH, RN, 0, 1.5, 0x80, "3.3"),
    V(E8M0, TORCH, RN, 0, 1.75, 0x80, "3.3"), V(E8M0, TORCH, RN, 0, 2.0, 0x80, "3.3"),
    V(E8M0, TORCH, RN, 0, 3.0, 0x81, "3.3"), V(E8M0, TORCH, RN, 0, -3.0, 0x81, "3.3"),
    V(E8M0, TORCH, RN, 0, -4.0, 0x81, "3.3"), V(E8M0, TORCH, RN, 0, 0x1p-127, 0x00, "3.3"),
    V(E8M0, TORCH, RN, 0, 0x1.8p-127, 0x01, "3.3"), V(E8M0, TORCH, RN, 0, 0x1p-149, 0x00, "3.3"),
    V(E8M0, TORCH, RN, 0, 0x1p-128, 0x00, "3.3"), V(E8M0, TORCH, RN, 0, 0x1p127, 0xFE, "3.3"),
    V(E8M0, TORCH, RN, 0, 0x1.666666p127, 0xFE, "3.3"), V(E8M0, TORCH, RN, 0, 0x1.8p127, 0xFF, "3.3"),
    V(E8M0, TORCH, RN, 0, FLT_MAX, 0xFF, "3.3"), V(E8M0, TORCH, RN, 0, PINF, 0xFF, "3.3"),
    V(E8M0, TORCH, RN, 0, -PINF, 0xFF, "3.3"), B(E8M0, TORCH, RN, 0, QNAN, 0xFF, "3.3"),
    /* profiles.md: the torch/ml_dtypes subnormal quirk, and ocp's plain nearest */
    B(E8M0, TORCH, RN, 0, 0x00400001u, 0x01, "profiles"), B(E8M0, TORCH, RN, 0, 0x005FFFFFu, 0x01, "profiles"),
    B(E8M0, TORCH, RN, 0, 0x00400000u, 0x00, "profiles"), B(E8M0, MLD, RN, 0, 0x00400001u, 0x01, "profiles"),
    B(E8M0, OCP, RN, 1, 0x00400001u, 0x00, "profiles"), B(E8M0, OCP, RN, 1, 0x005FFFFFu, 0x00, "profiles"),
    B(E8M0, OCP, RN, 1, 0x00600000u, 0x01, "profiles"), B(E8M0, OCP, RD, 1, 0x00600000u, 0x00, "profiles"),
    /* ref/notes/formats.md 3.4: ml_dtypes, zero and negatives are NaN */
    V(E8M0, MLD, RN, 0, 0.0, 0xFF, "3.4"), V(E8M0, MLD, RN, 0, -0.0, 0xFF, "3.4"),
    V(E8M0, MLD, RN, 0, -4.0, 0xFF, "3.4"), V(E8M0, MLD, RN, 0, -3.0, 0xFF, "3.4"),
    V(E8M0, MLD, RN, 0, 1.5, 0x80, "3.4"), V(E8M0, MLD, RN, 0, 0x1.8p-127, 0x01, "3.4"),
    V(E8M0, MLD, RN, 0, FLT_MAX, 0xFF, "3.4"), V(E8M0, MLD, RN, 0, 0x1p127, 0xFE, "3.4"),
    V(E8M0, OCP, RN, 1, 0.0, 0xFF, "profiles"), V(E8M0, OCP, RN, 1, -2.0, 0xFF, "profiles"),
    V(E8M0, OCP, RN, 1, FLT_MAX, 0xFE, "profiles"), V(E8M0, OCP, RZ, 0, FLT_MAX, 0xFE, "profiles"),
    V(E8M0, OCP, RNA, 1, 1.5, 0x80, "profiles"), V(E8M0, OCP, RN, 1, 1.4999999f, 0x7F, "profiles"),
    /* profiles.md: BF16 and F16 NaN and Inf tables */
    B(BF16, CUDA, RN, 0, NQNAN, 0x7FFF, "profiles"), B(BF16, TORCH, RN, 0, NQNAN, 0xFFFF, "profiles"),
    B(F16, TORCH, RN, 0, 0x7F802000u, 0x7E01, "profiles"), /* torch 2.11 CPU, measured */
    B(BF16, MLD, RN, 0, NQNAN, 0xFFC0, "profiles"), B(BF16, OCP, RN, 0, NQNAN, 0xFFC0, "profiles"),
    V(BF16, OCP, RN, 1, -PINF, 0xFF7F, "profiles"), V(BF16, OCP, RN, 0, -PINF, 0xFF80, "profiles"),
    V(BF16, CUDA, RZ, 0, PINF, 0x7F80, "profiles"), V(BF16, CUDA, RZ, 0, FLT_MAX, 0x7F7F, "profiles"),
    V(BF16, CUDA, RN, 0, FLT_MAX, 0x7F80, "profiles"),
    B(F16, CUDA, RN, 0, NQNAN, 0x7FFF, "profiles"), B(F16, TORCH, RN, 0, NQNAN, 0xFE00, "profiles"),
    B(F16, MLD, RN, 0, QNAN, 0x7E00, "profiles"), B(F16, MLD, RN, 0, NQNAN, 0xFE00, "profiles"),
    B(F16, MLD, RN, 0, 0x7F800001u, 0x7C01, "profiles"), B(F16, MLD, RN, 0, 0x7FFFFFFFu, 0x7FFF, "profiles"),
    B(F16, MLD, RN, 0, 0xFFA00000u, 0xFD00, "profiles"), B(F16, OCP, RN, 0, NQNAN, 0xFE00, "profiles"),
    V(F16, OCP, RN, 1, PINF, 0x7BFF, "profiles"), V(F16, OCP, RN, 0, 65520.0, 0x7C00, "profiles"),
    V(F16, OCP, RN, 1, 65520.0, 0x7BFF, "profiles"),
    /* profiles.md "Binary64 input": two roundings (torch, ml_dtypes) against one */
    V64(BF16, TORCH, RN, 0, 1.0 + 0x1p-8 + 0x1p-40, 0x3F80, "profiles"),
    V64(BF16, OCP, RN, 0, 1.0 + 0x1p-8 + 0x1p-40, 0x3F81, "profiles"),
    V64(BF16, CUDA, RN, 0, 1.0 + 0x1p-8 + 0x1p-40, 0x3F81, "profiles"),
    /* numpy float16 rounds a double once (measured: numpy 2.4 gives 0x3C01 here) */
    V64(F16, MLD, RN, 0, 1.0 + 0x1p-11 + 0x1p-40, 0x3C01, "profiles"),
    V64(BF16, MLD, RN, 0, 1.0 + 0x1p-8 + 0x1p-40, 0x3F80, "profiles"),
    V64(F16, OCP, RN, 0, 1.0 + 0x1p-11 + 0x1p-40, 0x3C01, "profiles"),
    V64(E4M3, TORCH, RN, 0, 464.0 + 0x1p-20, 0x7E, "profiles"),
    V64(E4M3, OCP, RN, 0, 464.0 + 0x1p-20, 0x7F, "profiles"),
    V64(E4M3, CUDA, RN, 1, 464.0 + 0x1p-20, 0x7E, "profiles"),
    V64(E2M1, MLD, RN, 1, 0.25 + 0x1p-40, 0x0, "profiles"),
    V64(E2M1, CUDA, RN, 1, 0.25 + 0x1p-40, 0x1, "profiles"),
    V64(E8M0, TORCH, RN, 0, 0x1.8p0 - 0x1p-40, 0x80, "profiles"),
    V64(E8M0, OCP, RN, 1, 0x1.8p0 - 0x1p-40, 0x7F, "profiles"),
    V64(E8M0, CUDA, RZ, 0, 0x1p200, 0xFE, "profiles"),
    V64(E8M0, CUDA, RU, 0, 0x1p200, 0xFF, "profiles"),
    V64(E8M0, CUDA, RU, 1, 0x1p-200, 0x00, "profiles"),
    V64(E8M0, MLD, RN, 0, 0x1p-200, 0xFF, "profiles"),
    V64(E8M0, TORCH, RN, 0, -0x1p-200, 0x00, "profiles"),
};

START_TEST(test_named)
{
    unsigned long long bad = 0;
    for (size_t i = 0; i < sizeof NAMED / sizeof NAMED[0]; i++) {
        const named *t = &NAMED[i];
        uint16_t got = 0xFFFF;
        int rc;
        char in[64];
        if (t->kind == IN_F32 || t->kind == IN_F32_BITS) {
            const float x =
                t->kind == IN_F32 ? (float)t->x : lowp_f32_from_bits((uint32_t)t->bits);
            if (t->kind == IN_F32 && (double)x != t->x) {
                bad++; /* the table itself is wrong: it must hold binary32 values */
                printf("named case %zu: %.17g is not a binary32 value\n", i, t->x);
                continue;
            }
            rc = lowp_oracle_encode_f32(t->f, t->p, t->r, t->sat, x, &got);
            snprintf(in, sizeof in, "0x%08" PRIx32 " (%.9g)", lowp_f32_bits(x), (double)x);
        } else {
            const double x = t->kind == IN_F64 ? t->x : lowp_f64_from_bits(t->bits);
            rc = lowp_oracle_encode_f64(t->f, t->p, t->r, t->sat, x, &got);
            snprintf(in, sizeof in, "0x%016" PRIx64 " (%.17g)", lowp_f64_bits(x), x);
        }
        total_cases++;
        if (rc != 0 || got != t->want) {
            bad++;
            const int w = code_digits(t->f);
            printf("named %s %s %s %s (%s): input %s got 0x%0*x (rc %d) expected 0x%0*x\n",
                   lowp_format_name(t->f), lowp_profile_name(t->p), lowp_round_name(t->r),
                   t->sat ? "sat" : "nosat", t->src, in, w, got, rc, w, t->want);
        }
    }
    total_bad += bad;
    ck_assert_msg(bad == 0, "%llu named expectations fail", bad);
}
END_TEST

/* ---------------------------------------------------------------------------------------
 * lowp_codec_init and the oracle agree on which combinations exist, and on the default.
 * ------------------------------------------------------------------------------------- */

START_TEST(test_combinations)
{
    tally t = tally_begin("combinations", "init-vs-oracle", LOWP_E2M1);
    for (int f = 0; f < LOWP_FORMAT_COUNT; f++)
        for (int p = 0; p < LOWP_PROFILE_COUNT; p++) {
            const int def = lowp_oracle_default_saturate((lowp_format)f, (lowp_profile)p);
            for (int r = 0; r < LOWP_ROUND_COUNT; r++)
                for (int sat = LOWP_SAT_DEFAULT; sat <= LOWP_SAT_ON; sat++) {
                    lowp_codec c;
                    char why[256] = "";
                    const int init_ok =
                        lowp_codec_init(&c, (lowp_format)f, (lowp_profile)p, (lowp_round)r,
                                        sat, why, sizeof why) == 0;
                    const int want_sat = sat == LOWP_SAT_DEFAULT ? def : sat;
                    const int oracle_ok =
                        want_sat >= 0 && lowp_oracle_supported((lowp_format)f, (lowp_profile)p,
                                                               (lowp_round)r, want_sat);
                    uint16_t code;
                    const int enc_ok =
                        sat == LOWP_SAT_DEFAULT ||
                        (lowp_oracle_encode_f32((lowp_format)f, (lowp_profile)p,
                                                (lowp_round)r, sat, 1.0f, &code) == 0) ==
                            oracle_ok;
                    t.n++;
                    int ok = init_ok == oracle_ok && enc_ok;
                    if (ok && init_ok)
                        ok = c.saturate == want_sat && c.format == (lowp_format)f &&
                             c.profile == (lowp_profile)p && c.round == (lowp_round)r;
                    if (ok && !init_ok)
                        ok = why[0] != '\0'; /* a refusal gives a reason */
                    if (!ok && tally_show(&t))
                        printf("combinations: %s %s %s sat=%d: lowp_codec_init %s "
                               "(saturate %d, why \"%s\"), oracle %s (saturate %d)\n",
                               lowp_format_name((lowp_format)f),
                               lowp_profile_name((lowp_profile)p),
                               lowp_round_name((lowp_round)r), sat,
                               init_ok ? "accepts" : "refuses", init_ok ? c.saturate : -1,
                               why, oracle_ok ? "accepts" : "refuses", want_sat);
                }
        }
    ck_assert_msg(tally_end(&t) == 0, "lowp_codec_init and the oracle disagree");
    ck_assert_int_eq(n_combos, 84); /* the count of profiles.md's table */
}
END_TEST

/* ---------------------------------------------------------------------------------------
 * Decode: every code of every format.
 * ------------------------------------------------------------------------------------- */

static int same_value(double a, double b)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b) && !signbit(a) == !signbit(b);
    return lowp_f64_bits(a) == lowp_f64_bits(b); /* -0 and +0 differ */
}

START_TEST(test_decode)
{
    const lowp_format f = (lowp_format)_i;
    tally t = tally_begin(lowp_format_name(f), "decode", f);
    const unsigned count = lowp_format_code_count(f);
    ck_assert_uint_eq(count, 1u << lowp_format_bits(f));
    double maxv = -1.0;
    for (unsigned c = 0; c < count; c++) {
        const double want = lowp_oracle_decode(f, (uint16_t)c);
        const double got64 = lowp_decode_f64(f, (uint16_t)c);
        const double got32 = (double)lowp_decode_f32(f, (uint16_t)c);
        const int nan_ok = !lowp_code_is_nan(f, (uint16_t)c) == !isnan(want);
        const int inf_ok = !lowp_code_is_inf(f, (uint16_t)c) == !isinf(want);
        t.n++;
        if (isfinite(want) && want > maxv)
            maxv = want;
        if ((!same_value(got64, want) || !same_value(got32, want) || !nan_ok || !inf_ok) &&
            tally_show(&t))
            printf("%s [decode]: code 0x%0*x got %a / %a (f64/f32), is_nan %d is_inf %d; "
                   "expected %a\n",
                   lowp_format_name(f), code_digits(f), c, got64, got32,
                   lowp_code_is_nan(f, (uint16_t)c), lowp_code_is_inf(f, (uint16_t)c), want);
    }
    /* The accessors describe the same format as the oracle's own definition. */
    t.n++;
    if (lowp_oracle_decode(f, lowp_format_max_code(f)) != maxv && tally_show(&t))
        printf("%s [decode]: lowp_format_max_code 0x%x has value %a, largest finite is %a\n",
               lowp_format_name(f), lowp_format_max_code(f),
               lowp_oracle_decode(f, lowp_format_max_code(f)), maxv);
    ck_assert_msg(tally_end(&t) == 0, "%s decode mismatches", lowp_format_name(f));
}
END_TEST

/* ---------------------------------------------------------------------------------------
 * Encode: all bf16 and f16 inputs; structured binary32 set; binary64 sets.
 * ------------------------------------------------------------------------------------- */

static uint16_t *xalloc16(size_t n)
{
    uint16_t *p = malloc((n ? n : 1) * sizeof *p);
    ck_assert_ptr_nonnull(p);
    return p;
}

static unsigned long long compare_f32_scalar(const combo *c, const char *set, const float *in,
                                             const uint16_t *want, size_t n)
{
    tally t = tally_begin(c->label, set, c->f);
    for (size_t i = 0; i < n; i++)
        check_f32(&t, in[i], lowp_encode_f32(&c->codec, in[i]), want[i]);
    return tally_end(&t);
}

START_TEST(test_inputs16)
{
    const combo *c = &combos[_i];
    uint16_t *want = xalloc16(2 * 65536);
    ck_assert_int_eq(oracle_f32(c, inputs16, want, 2 * 65536), 0);
    unsigned long long bad = compare_f32_scalar(c, "bf16-inputs", inputs16, want, 65536);
    bad += compare_f32_scalar(c, "f16-inputs", inputs16 + 65536, want + 65536, 65536);
    free(want);
    ck_assert_msg(bad == 0, "%s: %llu mismatches on bf16/f16 inputs", c->label, bad);
}
END_TEST

START_TEST(test_cases_f32)
{
    const combo *c = &combos[_i];
    const float *in = cases32[c->f];
    const size_t n = n_cases32[c->f];
    uint16_t *want = xalloc16(n), *got16 = xalloc16(n);
    uint8_t *got8 = malloc(n);
    ck_assert_ptr_nonnull(got8);
    ck_assert_int_eq(oracle_f32(c, in, want, n), 0);
    unsigned long long bad = compare_f32_scalar(c, "cases-f32", in, want, n);

    /* Array encoders: the whole set, then from an odd offset so that no vector lane lines
     * up with the first run and the tail loop is exercised. */
    for (size_t off = 0; off <= 1; off++) {
        tally t16 = tally_begin(c->label, off ? "cases-f32-u16+1" : "cases-f32-u16", c->f);
        memset(got16, 0xA5, n * sizeof *got16);
        lowp_encode_f32_u16(&c->codec, in + off, got16, n - off);
        for (size_t i = 0; i + off < n; i++)
            check_f32(&t16, in[i + off], got16[i], want[i + off]);
        bad += tally_end(&t16);
        if (lowp_format_bits(c->f) <= 8) {
            tally t8 = tally_begin(c->label, off ? "cases-f32-u8+1" : "cases-f32-u8", c->f);
            memset(got8, 0xA5, n);
            lowp_encode_f32_u8(&c->codec, in + off, got8, n - off);
            for (size_t i = 0; i + off < n; i++)
                check_f32(&t8, in[i + off], got8[i], want[i + off]);
            bad += tally_end(&t8);
        }
    }
    free(got8);
    free(got16);
    free(want);
    ck_assert_msg(bad == 0, "%s: %llu mismatches on the binary32 case set", c->label, bad);
}
END_TEST

static unsigned long long compare_f64(const combo *c, const char *set, const double *in,
                                      size_t n)
{
    uint16_t *want = xalloc16(n);
    ck_assert_int_eq(oracle_f64(c, in, want, n), 0);
    tally t = tally_begin(c->label, set, c->f);
    for (size_t i = 0; i < n; i++)
        check_f64(&t, in[i], lowp_encode_f64(&c->codec, in[i]), want[i]);
    free(want);
    return tally_end(&t);
}

START_TEST(test_cases_f64)
{
    const combo *c = &combos[_i];
    const size_t n = n_cases32[c->f];
    double *wide = malloc(n * sizeof *wide);
    ck_assert_ptr_nonnull(wide);
    for (size_t i = 0; i < n; i++)
        wide[i] = (double)cases32[c->f][i]; /* exact, NaN payloads kept (quiet) */
    unsigned long long bad = compare_f64(c, "cases-f64", wide, n);
    free(wide);
    bad += compare_f64(c, "extra-f64", extra64[c->f], n_extra64[c->f]);
    ck_assert_msg(bad == 0, "%s: %llu mismatches on binary64 inputs", c->label, bad);
}
END_TEST

/* ---------------------------------------------------------------------------------------
 * Runner
 * ------------------------------------------------------------------------------------- */

static Suite *oracle_suite(void)
{
    Suite *s = suite_create("oracle_mpfr");
    lowp_test_tcase(s, "oracle", 0, LOWP_TESTS(test_named));
    TCase *tc = lowp_test_tcase(s, "codec", 0, LOWP_TESTS(test_combinations));
    tcase_add_loop_test(tc, test_decode, 0, LOWP_FORMAT_COUNT);
    tcase_add_loop_test(tc, test_inputs16, 0, n_combos);
    tcase_add_loop_test(tc, test_cases_f32, 0, n_combos);
    tcase_add_loop_test(tc, test_cases_f64, 0, n_combos);
    return s;
}

int main(void)
{
    seed = lowp_test_seed("oracle_mpfr", seed);
    printf("oracle_mpfr: seed 0x%016" PRIx64 " (LOWP_SEED overrides), MPFR %s\n", seed,
           mpfr_get_version());
    if (!mpfr_buildopt_tls_p()) {
        fprintf(stderr, "oracle_mpfr: MPFR is not built with TLS; the oracle needs it\n");
        return 2;
    }
    build_combos();
    build_inputs();
    fflush(stdout);

    /* No fork: the totals live in this process, and the tests are pure computations. */
    const int failed = lowp_test_run(oracle_suite(), LOWP_TEST_NOFORK, NULL);

    for (int f = 0; f < LOWP_FORMAT_COUNT; f++) {
        free(cases32[f]);
        free(extra64[f]);
    }
    free(inputs16);
    printf("oracle_mpfr: %llu cases, %llu mismatches\n", total_cases, total_bad);
    return (failed || total_bad) ? EXIT_FAILURE : EXIT_SUCCESS;
}
