/* tests/test_cuda_host.c: lowp's "cuda" profile against CUDA 13's own host conversion
 * functions (tools/oracle_cuda_host.cu), bit for bit.
 *
 *   test_cuda_host            quick: for every (format, mode, saturation) of the cuda
 *                             profile, all 2^16 bf16 and all 2^16 f16 bit patterns widened
 *                             to binary32, the structured case set (lowp/cases.h), and
 *                             binary64 inputs (the case set widened, its binary64
 *                             neighbours, random non-binary32 doubles, NaN payloads)
 *   test_cuda_host --full     every one of the 2^32 binary32 inputs, for every combination
 *   --only FORMAT[:MODE]      restrict either run to one format (and mode), e.g. e8m0:ru
 *
 * The set of combinations lowp_codec_init accepts for the cuda profile must equal the set
 * CUDA has host functions for. Failure lines read like TestFloat's, at most 20 per case
 * set; the summary line comes last; the exit status is non-zero on any mismatch.
 * Seeds are printed and LOWP_SEED overrides them. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>

#include <math.h>
#include <stdint.h>
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
#include "oracle_cuda_host.h"
#include "lowp_test.h"

#define MAX_LINES 20                 /* failure lines per case set */
#define FULL_CHUNK (UINT64_C(1) << 24) /* binary32 inputs per chunk (few OpenMP barriers) */

typedef struct {
    lowp_format f;
    lowp_round r;
    int sat;
    lowp_codec c;
} combo;

static combo combos[LOWP_FORMAT_COUNT * LOWP_ROUND_COUNT * 2];
static int n_combos;
static uint64_t seed = LOWP_DEFAULT_SEED;
static int only_format = -1, only_round = -1;

/* Totals for the summary line (CK_NOFORK: the tests run in this process). */
static uint64_t total_f32, total_f64, total_mismatches;
static int combos_run;

/* ---- reporting ------------------------------------------------------------------ */

typedef struct {
    const combo *k;
    const char *set;   /* case set */
    const char *entry; /* lowp entry point */
    const char *cuda;  /* CUDA function */
    uint64_t mismatches;
} report;

static const char *sat_name(int sat)
{
    return sat ? "sat" : "nosat";
}

static int code_digits(lowp_format f)
{
    unsigned b = lowp_format_bits(f);
    return b == 4 ? 1 : b == 8 ? 2 : 4;
}

static void print_code(FILE *o, lowp_format f, unsigned code)
{
    fprintf(o, "0x%0*x (%.9g)", code_digits(f), code, lowp_decode_f64(f, (uint16_t)code));
}

static void report_begin(report *rp, const combo *k, const char *set, const char *entry,
                         int in_bits)
{
    rp->k = k;
    rp->set = set;
    rp->entry = entry;
    rp->cuda = lowp_cuda_host_function(k->f, k->r, k->sat, in_bits);
    rp->mismatches = 0;
}

static void report_head(const report *rp)
{
    printf("%s cuda %s %s: ", lowp_format_name(rp->k->f), lowp_round_name(rp->k->r),
           sat_name(rp->k->sat));
}

static void mismatch_f32(report *rp, float x, unsigned got, unsigned expected)
{
    if (rp->mismatches++ >= MAX_LINES)
        return;
    report_head(rp);
    printf("input 0x%08x (%.9g) got ", (unsigned)lowp_f32_bits(x), (double)x);
    print_code(stdout, rp->k->f, got);
    printf(" expected ");
    print_code(stdout, rp->k->f, expected);
    printf(" [%s: %s vs %s]\n", rp->set, rp->entry, rp->cuda);
}

static void mismatch_f64(report *rp, double x, unsigned got, unsigned expected)
{
    if (rp->mismatches++ >= MAX_LINES)
        return;
    report_head(rp);
    printf("input 0x%016llx (%.17g) got ", (unsigned long long)lowp_f64_bits(x), x);
    print_code(stdout, rp->k->f, got);
    printf(" expected ");
    print_code(stdout, rp->k->f, expected);
    printf(" [%s: %s vs %s]\n", rp->set, rp->entry, rp->cuda);
}

static void report_end(const report *rp)
{
    if (rp->mismatches > MAX_LINES) {
        report_head(rp);
        printf("... %llu more mismatches [%s: %s]\n",
               (unsigned long long)(rp->mismatches - MAX_LINES), rp->set, rp->entry);
    }
    total_mismatches += rp->mismatches;
    fflush(stdout);
}

/* ---- inputs --------------------------------------------------------------------- */

/* Binary64 inputs for format f: the binary32 case set widened, the binary64 neighbours
 * of each of its values (the double-rounding hazards: a tie plus one binary64 ulp),
 * binary64 specials and NaN payloads, and random doubles with full 52-bit fractions. */
static size_t make_f64_set(lowp_format f, const float *v, size_t n, uint64_t s, double **out)
{
    lowp_test_f64_list b = {0};
    for (size_t i = 0; i < n; i++) {
        double x = (double)v[i];
        lowp_test_push_f64(&b, x);
        if (isfinite(x)) {
            lowp_test_push_f64(&b, nextafter(x, INFINITY));
            lowp_test_push_f64(&b, nextafter(x, -INFINITY));
        }
    }
    static const uint64_t specials[] = {
        0x7ff8000000000000u, 0xfff8000000000000u, 0x7ff0000000000001u, 0xfff0000000000001u,
        0x7ff4000000000000u, 0xfff4000000000000u, 0x7ffc000000000000u, 0xfffc000000000000u,
        0x7ff2000000000000u, 0x7ffa000000000001u, 0x7fffffffffffffffu, 0xffffffffffffffffu,
        0x7ff0000020000000u, 0xfff0000010000000u, /* payload only in bits below binary32's */
        0x0000000000000001u, 0x8000000000000001u, 0x000fffffffffffffu, 0x800fffffffffffffu,
        0x0010000000000000u, 0x7fefffffffffffffu, 0xffefffffffffffffu,
        0x7ff0000000000000u, 0xfff0000000000000u, 0x0000000000000000u, 0x8000000000000000u,
        0x47efffffe0000000u, /* FLT_MAX + half an ulp: binary32 RN overflows */
        0x47efffffe0000001u, 0x47efffffdfffffffu, 0x47f0000000000000u, 0xc7f0000000000000u,
        0x36a0000000000000u, 0x36a0000000000001u, 0x369fffffffffffffu, /* 2^-149 */
        0x3690000000000000u, 0x3690000000000001u, 0x368fffffffffffffu, /* 2^-150 */
        0x3800000000000000u, 0x3800000000000001u, 0x37ffffffffffffffu, /* 2^-127 */
        0x3808000000000000u, 0x3808000000000001u, 0x3807ffffffffffffu, /* 1.5 * 2^-127 */
        0x4c80000000000000u, 0x7e37e43c8800759cu, 0xfe37e43c8800759cu, /* 2^201, 1e300 */
        0x3ff8000000000001u, 0x3ff7ffffffffffffu, 0xbff8000000000001u,
    };
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++)
        lowp_test_push_f64(&b, lowp_f64_from_bits(specials[i]));
    /* Random doubles: half with any binary64 exponent, half near the format's range. */
    int emax = f == LOWP_E8M0 ? 127 : (1 << lowp_format_exponent_bits(f)) - 1 - lowp_format_bias(f);
    int emin = f == LOWP_E8M0 ? -127 : 1 - lowp_format_bias(f) - lowp_format_mantissa_bits(f);
    uint64_t st = s;
    for (unsigned k = 0; k < (1u << 19); k++) {
        uint64_t r = lowp_splitmix64(&st);
        uint64_t sign = r & (UINT64_C(1) << 63);
        uint64_t frac = lowp_splitmix64(&st) & ((UINT64_C(1) << 52) - 1);
        uint64_t e;
        if (k & 1)
            e = (r >> 20) % 2047u;
        else
            e = (uint64_t)(1023 + emin - 4 + (int)((r >> 20) % (unsigned)(emax - emin + 8)));
        lowp_test_push_f64(&b, lowp_f64_from_bits(sign | (e << 52) | frac));
    }
    *out = b.v;
    return b.n;
}

/* ---- comparisons -------------------------------------------------------------------- */

/* Compare a binary32 input set through every lowp entry point; returns mismatches. */
static uint64_t check_f32_set(const combo *k, const char *set, const float *in, size_t n,
                              int scalar)
{
    uint16_t *got = lowp_test_xmalloc(n * sizeof *got), *exp = lowp_test_xmalloc(n * sizeof *exp);
    uint64_t before = total_mismatches;
    report rp;

    ck_assert_int_eq(lowp_cuda_host_encode_f32(k->f, k->r, k->sat, in, exp, n), 0);
    lowp_encode_f32_u16(&k->c, in, got, n);
    report_begin(&rp, k, set, "lowp_encode_f32_u16", 32);
    for (size_t i = 0; i < n; i++)
        if (got[i] != exp[i])
            mismatch_f32(&rp, in[i], got[i], exp[i]);
    report_end(&rp);

    if (lowp_format_bits(k->f) <= 8) {
        uint8_t *got8 = lowp_test_xmalloc(n), *exp8 = lowp_test_xmalloc(n);
        ck_assert_int_eq(lowp_cuda_host_encode_f32_u8(k->f, k->r, k->sat, in, exp8, n), 0);
        lowp_encode_f32_u8(&k->c, in, got8, n);
        report_begin(&rp, k, set, "lowp_encode_f32_u8", 32);
        for (size_t i = 0; i < n; i++)
            if (got8[i] != exp8[i])
                mismatch_f32(&rp, in[i], got8[i], exp8[i]);
        report_end(&rp);
        /* the CUDA wrapper's two widths agree */
        size_t width_diff = 0;
        for (size_t i = 0; i < n; i++)
            width_diff += exp8[i] != exp[i];
        ck_assert_msg(width_diff == 0, "CUDA u8 and u16 wrappers differ on %zu inputs", width_diff);
        free(got8);
        free(exp8);
    }

    if (scalar) {
        report_begin(&rp, k, set, "lowp_encode_f32", 32);
        for (size_t i = 0; i < n; i++) {
            unsigned g = lowp_encode_f32(&k->c, in[i]);
            if (g != exp[i])
                mismatch_f32(&rp, in[i], g, exp[i]);
        }
        report_end(&rp);
    }
    total_f32 += n;
    free(got);
    free(exp);
    return total_mismatches - before;
}

static uint64_t check_f64_set(const combo *k, const char *set, const double *in, size_t n)
{
    if (!lowp_cuda_host_has_f64(k->f, k->r, k->sat))
        return 0;
    uint16_t *exp = lowp_test_xmalloc(n * sizeof *exp);
    report rp;
    ck_assert_int_eq(lowp_cuda_host_encode_f64(k->f, k->r, k->sat, in, exp, n), 0);
    report_begin(&rp, k, set, "lowp_encode_f64", 64);
    for (size_t i = 0; i < n; i++) {
        unsigned g = lowp_encode_f64(&k->c, in[i]);
        if (g != exp[i])
            mismatch_f64(&rp, in[i], g, exp[i]);
    }
    report_end(&rp);
    total_f64 += n;
    free(exp);
    return rp.mismatches;
}

static int selected(const combo *k)
{
    return (only_format < 0 || (int)k->f == only_format) &&
           (only_round < 0 || (int)k->r == only_round);
}

/* ---- tests -------------------------------------------------------------------------- */

/* CUDA's default saturation (the struct constructors saturate; bf16/f16 cannot). */
static int cuda_default_sat(lowp_format f)
{
    return (f == LOWP_BF16 || f == LOWP_F16) ? 0 : 1;
}

START_TEST(test_supported_set)
{
    int accepted = 0, cuda_has = 0;
    for (int f = 0; f < LOWP_FORMAT_COUNT; f++)
        for (int r = 0; r < LOWP_ROUND_COUNT; r++) {
            for (int sat = 0; sat <= 1; sat++) {
                lowp_codec c;
                char why[256] = "";
                int ok = lowp_codec_init(&c, (lowp_format)f, LOWP_PROFILE_CUDA, (lowp_round)r, sat,
                                         why, sizeof why) == 0;
                int has = lowp_cuda_host_has_f32((lowp_format)f, (lowp_round)r, sat);
                accepted += ok;
                cuda_has += has;
                ck_assert_msg(ok == has, "%s cuda %s %s: lowp %s it, CUDA %s (%s)",
                              lowp_format_name((lowp_format)f), lowp_round_name((lowp_round)r),
                              sat_name(sat), ok ? "accepts" : "refuses",
                              has ? lowp_cuda_host_function((lowp_format)f, (lowp_round)r, sat, 32)
                                  : "has no such host function",
                              why);
                if (!ok)
                    ck_assert_msg(why[0] != '\0', "%s cuda %s %s: refused without a reason",
                                  lowp_format_name((lowp_format)f), lowp_round_name((lowp_round)r),
                                  sat_name(sat));
            }
            lowp_codec c;
            if (lowp_codec_init(&c, (lowp_format)f, LOWP_PROFILE_CUDA, (lowp_round)r,
                                LOWP_SAT_DEFAULT, NULL, 0) == 0)
                ck_assert_msg(c.saturate == cuda_default_sat((lowp_format)f),
                              "%s cuda %s: default saturation %d, CUDA's is %d",
                              lowp_format_name((lowp_format)f), lowp_round_name((lowp_round)r),
                              c.saturate, cuda_default_sat((lowp_format)f));
        }
    ck_assert_int_eq(accepted, cuda_has);
    ck_assert_int_eq(accepted, n_combos);
}
END_TEST

START_TEST(test_quick)
{
    const combo *k = &combos[_i];
    if (!selected(k))
        return;
    size_t n16 = 1u << 16;
    float *in = lowp_test_xmalloc(n16 * sizeof *in);
    uint64_t bad = 0;

    for (size_t i = 0; i < n16; i++)
        in[i] = lowp_f32_from_bits((uint32_t)i << 16);
    bad += check_f32_set(k, "all bf16 patterns", in, n16, 1);
    for (size_t i = 0; i < n16; i++)
        in[i] = lowp_test_f16_widen((uint16_t)i);
    bad += check_f32_set(k, "all f16 patterns", in, n16, 1);
    free(in);

    float *v = NULL;
    size_t n = lowp_cases_f32(k->f, seed, 64, (size_t)1 << 20, &v);
    ck_assert_msg(n > 0 && v != NULL, "lowp_cases_f32 failed");
    bad += check_f32_set(k, "structured set", v, n, 1);

    double *d = NULL;
    size_t nd = make_f64_set(k->f, v, n, seed ^ UINT64_C(0x6636340000000000), &d);
    bad += check_f64_set(k, "binary64 set", d, nd);
    printf("%s cuda %s %s: %zu structured binary32, %zu binary64 inputs%s, %llu mismatches\n",
           lowp_format_name(k->f), lowp_round_name(k->r), sat_name(k->sat), n, nd,
           lowp_cuda_host_has_f64(k->f, k->r, k->sat) ? "" : " (no CUDA binary64 function: skipped)",
           (unsigned long long)bad);
    fflush(stdout);
    combos_run++;
    free(v);
    free(d);
    ck_assert_msg(bad == 0, "%s cuda %s %s: %llu mismatches", lowp_format_name(k->f),
                  lowp_round_name(k->r), sat_name(k->sat), (unsigned long long)bad);
}
END_TEST

START_TEST(test_full)
{
    const combo *k = &combos[_i];
    if (!selected(k))
        return;
    const size_t chunk = (size_t)FULL_CHUNK;
    float *in = lowp_test_xmalloc(chunk * sizeof *in);
    uint16_t *got = lowp_test_xmalloc(chunk * sizeof *got),
             *exp = lowp_test_xmalloc(chunk * sizeof *exp);
    /* formats of at most 8 bits: the u8 array entry point is swept as well */
    const int narrow = lowp_format_bits(k->f) <= 8;
    uint8_t *got8 = narrow ? lowp_test_xmalloc(chunk) : NULL;
    int progress = isatty(STDERR_FILENO);
    double t_lowp = 0, t_cuda = 0, t0 = lowp_test_now();
    report rp, rp8;
    report_begin(&rp, k, "all binary32", "lowp_encode_f32_u16", 32);
    report_begin(&rp8, k, "all binary32", "lowp_encode_f32_u8", 32);

    for (uint64_t base = 0; base < (UINT64_C(1) << 32); base += chunk) {
        const int64_t m = (int64_t)chunk;
        const uint32_t b32 = (uint32_t)base;
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < m; i++) {
            in[i] = lowp_f32_from_bits(b32 + (uint32_t)i);
        }
        const double ta = lowp_test_now();
        lowp_encode_f32_u16(&k->c, in, got, chunk);
        if (narrow)
            lowp_encode_f32_u8(&k->c, in, got8, chunk);
        const double tb = lowp_test_now();
        ck_assert_int_eq(lowp_cuda_host_encode_f32(k->f, k->r, k->sat, in, exp, chunk), 0);
        const double tc = lowp_test_now();
        t_lowp += tb - ta;
        t_cuda += tc - tb;
        int64_t diff = 0;
        if (narrow) {
#pragma omp parallel for schedule(static) reduction(+ : diff)
            for (int64_t i = 0; i < m; i++)
                diff += (got[i] != exp[i]) | (got8[i] != exp[i]);
        } else {
#pragma omp parallel for schedule(static) reduction(+ : diff)
            for (int64_t i = 0; i < m; i++)
                diff += got[i] != exp[i];
        }
        if (diff != 0)
            for (size_t i = 0; i < chunk; i++) {
                if (got[i] != exp[i])
                    mismatch_f32(&rp, in[i], got[i], exp[i]);
                if (narrow && got8[i] != exp[i])
                    mismatch_f32(&rp8, in[i], got8[i], exp[i]);
            }
        if (progress) {
            fprintf(stderr, "\r%s cuda %s %s: %3.0f%%", lowp_format_name(k->f),
                    lowp_round_name(k->r), sat_name(k->sat),
                    100.0 * (double)(base + chunk) / 4294967296.0);
            fflush(stderr);
        }
    }
    if (progress)
        fprintf(stderr, "\r%60s\r", "");
    const double t1 = lowp_test_now();
    report_end(&rp);
    report_end(&rp8);
    uint64_t bad = rp.mismatches + rp8.mismatches;
    total_f32 += UINT64_C(1) << 32;
    combos_run++;
    printf("%s cuda %s %s: 4294967296 inputs (%s), %llu mismatches, %.1f s "
           "(lowp %.1f s, CUDA host %.1f s)\n",
           lowp_format_name(k->f), lowp_round_name(k->r), sat_name(k->sat),
           narrow ? "u16 and u8" : "u16", (unsigned long long)bad, t1 - t0, t_lowp, t_cuda);
    fflush(stdout);
    free(in);
    free(got);
    free(got8);
    free(exp);
    ck_assert_msg(bad == 0, "%s cuda %s %s: %llu mismatches over all binary32 inputs",
                  lowp_format_name(k->f), lowp_round_name(k->r), sat_name(k->sat),
                  (unsigned long long)bad);
}
END_TEST

/* ---- main ----------------------------------------------------------------------------- */

static void usage_exit(const char *msg)
{
    fprintf(stderr, "test_cuda_host: %s\nusage: test_cuda_host [--full] [--only FORMAT[:MODE]]\n", msg);
    exit(2);
}

int main(int argc, char **argv)
{
    int full = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--full") == 0) {
            full = 1;
        } else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
            char name[32];
            snprintf(name, sizeof name, "%s", argv[++i]);
            char *colon = strchr(name, ':');
            if (colon != NULL)
                *colon = '\0';
            lowp_format f;
            lowp_round r;
            if (lowp_format_parse(name, &f) != 0)
                usage_exit("unknown format after --only");
            only_format = (int)f;
            if (colon != NULL) {
                if (lowp_round_parse(colon + 1, &r) != 0)
                    usage_exit("unknown rounding mode after --only FORMAT:");
                only_round = (int)r;
            }
        } else {
            usage_exit("unknown argument");
        }
    }
    seed = lowp_test_seed("cuda_host", seed);

    for (int f = 0; f < LOWP_FORMAT_COUNT; f++)
        for (int r = 0; r < LOWP_ROUND_COUNT; r++)
            for (int sat = 1; sat >= 0; sat--) {
                combo *k = &combos[n_combos];
                if (lowp_codec_init(&k->c, (lowp_format)f, LOWP_PROFILE_CUDA, (lowp_round)r, sat,
                                    NULL, 0) != 0)
                    continue;
                k->f = (lowp_format)f;
                k->r = (lowp_round)r;
                k->sat = sat;
                n_combos++;
            }

#ifdef _OPENMP
    int threads = omp_get_max_threads();
#else
    int threads = 1;
#endif
    printf("cuda_host: %s run, seed 0x%llx (LOWP_SEED overrides), %d threads\n",
           full ? "full" : "quick", (unsigned long long)seed, threads);
    fflush(stdout);

    Suite *s = suite_create("cuda_host");
    TCase *tc = tcase_create("supported");
    tcase_add_test(tc, test_supported_set);
    suite_add_tcase(s, tc);
    tc = tcase_create(full ? "full" : "quick");
    tcase_set_timeout(tc, full ? 7200 : 1200);
    if (full)
        tcase_add_loop_test(tc, test_full, 0, n_combos);
    else
        tcase_add_loop_test(tc, test_quick, 0, n_combos);
    suite_add_tcase(s, tc);

    int failed = lowp_test_run(s, LOWP_TEST_NOFORK, NULL);

    if (full)
        printf("cuda_host: %d combinations, 4294967296 inputs each, %llu mismatches\n", combos_run,
               (unsigned long long)total_mismatches);
    else
        printf("cuda_host: %d combinations, %llu binary32 and %llu binary64 inputs compared, "
               "%llu mismatches\n",
               combos_run, (unsigned long long)total_f32, (unsigned long long)total_f64,
               (unsigned long long)total_mismatches);
    return (failed == 0 && total_mismatches == 0) ? 0 : 1;
}
