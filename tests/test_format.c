/* tests/test_format.c: unit tests of the fast codec (lowp/format.h).
 *
 * Every expected code below comes from the documents, never from lowp's output:
 *   - ref/notes/formats.md (measured tables, cited by section: §1.1 ...),
 *   - ref/profiles.md (the per-profile contract: support matrix, NaN, Inf, -0,
 *     binary64 input, E8M0 rules),
 *   - the format definitions in lowp/format.h (bit fields, bias), from which the
 *     decode test computes every value with ldexp.
 * Each test is named after the documented edge it checks. A mismatching row is printed
 * on stderr TestFloat style before the test fails, so one run shows every bad row. */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lowp/format.h"
#include "lowp/cases.h"
#include "lowp_test.h"

/* ---------------------------------------------------------------------------------- */
/* helpers                                                                             */

#define NOCODE 0xFFFFu /* "no expectation" in a table cell; not a code of any format */
#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

static const char *fmt_name(lowp_format f)
{
    static const char *const n[] = {"e2m1", "e4m3", "e5m2", "e8m0", "bf16", "f16"};
    return (unsigned)f < N_ELEMS(n) ? n[f] : "?";
}

static const char *prof_name(lowp_profile p)
{
    static const char *const n[] = {"cuda", "torch", "ml_dtypes", "ocp"};
    return (unsigned)p < N_ELEMS(n) ? n[p] : "?";
}

static const char *round_name(lowp_round r)
{
    static const char *const n[] = {"rn", "rz", "ru", "rd", "rna"};
    return (unsigned)r < N_ELEMS(n) ? n[r] : "?";
}

static const char *sat_name(int sat)
{
    return sat < 0 ? "default" : (sat ? "sat" : "nosat");
}

static unsigned code_digits(lowp_format f)
{
    return f == LOWP_E2M1 ? 1u : (f == LOWP_BF16 || f == LOWP_F16) ? 4u : 2u;
}

static lowp_codec open_codec(lowp_format f, lowp_profile p, lowp_round r, int sat)
{
    lowp_codec c;
    char why[256] = "";
    memset(&c, 0, sizeof c);
    int rc = lowp_codec_init(&c, f, p, r, sat, why, sizeof why);
    ck_assert_msg(rc == 0, "lowp_codec_init(%s, %s, %s, %s) refused: %s", fmt_name(f),
                  prof_name(p), round_name(r), sat_name(sat), why);
    return c;
}

/* One check of a binary32 input; prints a TestFloat-style line and returns 1 on mismatch. */
static int expect_f32(const lowp_codec *c, const char *tag, float x, uint16_t want)
{
    if (want == NOCODE)
        return 0;
    uint16_t got = lowp_encode_f32(c, x);
    if (got == want)
        return 0;
    unsigned d = code_digits(c->format);
    fprintf(stderr, "%s %s %s %s: input 0x%08x (%a) got 0x%0*x expected 0x%0*x  [%s]\n",
            fmt_name(c->format), prof_name(c->profile), round_name(c->round),
            c->saturate ? "sat" : "nosat", (unsigned)lowp_f32_bits(x), (double)x, (int)d,
            (unsigned)got, (int)d, (unsigned)want, tag);
    return 1;
}

static int expect_f64(const lowp_codec *c, const char *tag, double x, uint16_t want)
{
    if (want == NOCODE)
        return 0;
    uint16_t got = lowp_encode_f64(c, x);
    if (got == want)
        return 0;
    unsigned d = code_digits(c->format);
    fprintf(stderr, "%s %s %s %s: f64 input 0x%016llx (%a) got 0x%0*x expected 0x%0*x  [%s]\n",
            fmt_name(c->format), prof_name(c->profile), round_name(c->round),
            c->saturate ? "sat" : "nosat", (unsigned long long)lowp_f64_bits(x), x, (int)d,
            (unsigned)got, (int)d, (unsigned)want, tag);
    return 1;
}

/* A table row: input x (or the NaN bit pattern nan when that is non-zero) and the
 * expected code for each column of the table. */
typedef struct {
    float x;
    uint32_t nan;
    uint16_t want[8];
} row;
#define X(v) (v), 0u
#define NANBITS(b) 0.0f, (b)

typedef struct {
    lowp_profile p;
    lowp_round r;
    int sat;
} column;

static float row_input(const row *r)
{
    return r->nan ? lowp_f32_from_bits(r->nan) : r->x;
}

/* Runs every row under every column, through lowp_encode_f32 and, for non-NaN rows
 * (where a double holding the same value must give the same code in every profile),
 * through lowp_encode_f64. Returns the mismatch count. */
static int run_table(const char *table, lowp_format f, const column *cols, size_t ncols,
                     const row *rows, size_t nrows)
{
    int bad = 0;
    for (size_t k = 0; k < ncols; k++) {
        lowp_codec c = open_codec(f, cols[k].p, cols[k].r, cols[k].sat);
        for (size_t i = 0; i < nrows; i++) {
            float x = row_input(&rows[i]);
            bad += expect_f32(&c, table, x, rows[i].want[k]);
            if (!isnan(x))
                bad += expect_f64(&c, table, (double)x, rows[i].want[k]);
        }
    }
    return bad;
}

#define RUN_TABLE(name, f, cols, rows) \
    run_table(name, f, cols, N_ELEMS(cols), rows, N_ELEMS(rows))

#define ASSERT_NO_MISMATCH(bad) \
    ck_assert_msg((bad) == 0, "%d mismatching rows (listed on stderr)", (bad))

/* The support matrix of profiles.md ("Supported combinations"). Returns 1 when
 * (f, p, r, sat) must be accepted, and the resolved saturation in *resolved. */
static int doc_supported(lowp_format f, lowp_profile p, lowp_round r, int sat, int *resolved)
{
    int mode_ok = 0, sat_default = 0, sat_on_ok = 0, sat_off_ok = 0;
    switch (p) {
    case LOWP_PROFILE_CUDA:
        switch (f) {
        case LOWP_E2M1: mode_ok = r == LOWP_RN || r == LOWP_RZ; break;
        case LOWP_E4M3:
        case LOWP_E5M2: mode_ok = r == LOWP_RN; break;
        case LOWP_E8M0: mode_ok = r == LOWP_RZ || r == LOWP_RU; break;
        default: mode_ok = r != LOWP_RNA; break; /* bf16, f16: rn rz ru rd */
        }
        break;
    case LOWP_PROFILE_TORCH: mode_ok = f != LOWP_E2M1 && r == LOWP_RN; break;
    case LOWP_PROFILE_ML_DTYPES: mode_ok = r == LOWP_RN; break;
    default: mode_ok = 1; break; /* ocp: all modes */
    }
    if (f == LOWP_E2M1) { /* saturating only, every profile */
        sat_default = 1;
        sat_on_ok = 1;
        sat_off_ok = 0;
    } else if (p == LOWP_PROFILE_TORCH || p == LOWP_PROFILE_ML_DTYPES) {
        sat_default = 0;
        sat_on_ok = 0;
        sat_off_ok = 1;
    } else if (f == LOWP_BF16 || f == LOWP_F16) {
        sat_default = 0;
        sat_on_ok = p == LOWP_PROFILE_OCP; /* cuda: nosat only; ocp: nosat (default) or sat */
        sat_off_ok = 1;
    } else { /* e4m3 e5m2 e8m0 under cuda or ocp: sat (default) or nosat */
        sat_default = 1;
        sat_on_ok = 1;
        sat_off_ok = 1;
    }
    int sat_ok = sat < 0 ? 1 : sat ? sat_on_ok : sat_off_ok;
    if (resolved)
        *resolved = sat < 0 ? sat_default : sat;
    return mode_ok && sat_ok;
}

/* Largest finite code magnitude and its value per the format definitions. */
static uint16_t doc_max_code(lowp_format f)
{
    static const uint16_t m[] = {0x7, 0x7E, 0x7B, 0xFE, 0x7F7F, 0x7BFF};
    return m[f];
}

static uint16_t doc_sign_bit(lowp_format f)
{
    static const uint16_t s[] = {0x8, 0x80, 0x80, 0x0, 0x8000, 0x8000};
    return s[f];
}

/* ---------------------------------------------------------------------------------- */
/* metadata, names, codec_init                                                          */

START_TEST(format_metadata_matches_definitions)
{
    /* format.h: 1-2-1 bias 1; 1-4-3 bias 7; 1-5-2 bias 15; E8M0 bias 127; bf16; binary16 */
    static const struct {
        unsigned bits, count;
        int mbits, ebits, bias;
    } want[] = {{4, 16, 1, 2, 1},      {8, 256, 3, 4, 7},         {8, 256, 2, 5, 15},
                {8, 256, 0, 8, 127},   {16, 65536, 7, 8, 127},    {16, 65536, 10, 5, 15}};
    static const double max_value[] = {6.0, 448.0, 57344.0, 0x1p127, 0x1.fep127, 65504.0};
    for (int f = 0; f < LOWP_FORMAT_COUNT; f++) {
        ck_assert_uint_eq(lowp_format_bits((lowp_format)f), want[f].bits);
        ck_assert_uint_eq(lowp_format_code_count((lowp_format)f), want[f].count);
        ck_assert_int_eq(lowp_format_mantissa_bits((lowp_format)f), want[f].mbits);
        ck_assert_int_eq(lowp_format_exponent_bits((lowp_format)f), want[f].ebits);
        ck_assert_int_eq(lowp_format_bias((lowp_format)f), want[f].bias);
        ck_assert_uint_eq(lowp_format_max_code((lowp_format)f), doc_max_code((lowp_format)f));
        ck_assert_msg(lowp_decode_f64((lowp_format)f, doc_max_code((lowp_format)f)) ==
                          max_value[f],
                      "%s max code decodes to %a, expected %a", fmt_name((lowp_format)f),
                      lowp_decode_f64((lowp_format)f, doc_max_code((lowp_format)f)),
                      max_value[f]);
    }
}
END_TEST

START_TEST(names_parse_round_trip)
{
    for (int f = 0; f < LOWP_FORMAT_COUNT; f++) {
        lowp_format g;
        ck_assert_str_eq(lowp_format_name((lowp_format)f), fmt_name((lowp_format)f));
        ck_assert_int_eq(lowp_format_parse(fmt_name((lowp_format)f), &g), 0);
        ck_assert_int_eq((int)g, f);
    }
    for (int r = 0; r < LOWP_ROUND_COUNT; r++) {
        lowp_round g;
        ck_assert_str_eq(lowp_round_name((lowp_round)r), round_name((lowp_round)r));
        ck_assert_int_eq(lowp_round_parse(round_name((lowp_round)r), &g), 0);
        ck_assert_int_eq((int)g, r);
    }
    for (int p = 0; p < LOWP_PROFILE_COUNT; p++) {
        lowp_profile g;
        ck_assert_str_eq(lowp_profile_name((lowp_profile)p), prof_name((lowp_profile)p));
        ck_assert_int_eq(lowp_profile_parse(prof_name((lowp_profile)p), &g), 0);
        ck_assert_int_eq((int)g, p);
    }
    lowp_format fo;
    lowp_round ro;
    lowp_profile po;
    ck_assert_int_eq(lowp_format_parse("e3m4", &fo), -1);
    ck_assert_int_eq(lowp_round_parse("rp", &ro), -1);
    ck_assert_int_eq(lowp_profile_parse("jax", &po), -1);
    ck_assert_int_eq(lowp_format_parse("", &fo), -1);
}
END_TEST

/* The refusals the brief and profiles.md name explicitly, each with a reason. */
START_TEST(codec_init_refuses_missing_conversions_with_reason)
{
    static const struct {
        lowp_format f;
        lowp_profile p;
        lowp_round r;
        int sat;
        const char *what;
    } refused[] = {
        {LOWP_E2M1, LOWP_PROFILE_TORCH, LOWP_RN, LOWP_SAT_DEFAULT,
         "torch has no float to float4_e2m1fn_x2 cast"},
        {LOWP_E8M0, LOWP_PROFILE_CUDA, LOWP_RN, LOWP_SAT_DEFAULT, "CUDA e8m0 has no rn"},
        {LOWP_E8M0, LOWP_PROFILE_CUDA, LOWP_RNA, LOWP_SAT_DEFAULT, "CUDA e8m0 has no rna"},
        {LOWP_E4M3, LOWP_PROFILE_CUDA, LOWP_RZ, LOWP_SAT_DEFAULT, "CUDA e4m3 has rn only"},
        {LOWP_E5M2, LOWP_PROFILE_CUDA, LOWP_RU, LOWP_SAT_DEFAULT, "CUDA e5m2 has rn only"},
        {LOWP_E4M3, LOWP_PROFILE_ML_DTYPES, LOWP_RN, LOWP_SAT_ON, "ml_dtypes astype never saturates e4m3"},
        {LOWP_E4M3, LOWP_PROFILE_TORCH, LOWP_RN, LOWP_SAT_ON, "torch 2.11 e4m3 never saturates"},
        {LOWP_E2M1, LOWP_PROFILE_CUDA, LOWP_RN, LOWP_SAT_OFF, "e2m1 has no Inf/NaN: nosat"},
        {LOWP_E2M1, LOWP_PROFILE_ML_DTYPES, LOWP_RN, LOWP_SAT_OFF, "e2m1 has no Inf/NaN: nosat"},
        {LOWP_E2M1, LOWP_PROFILE_OCP, LOWP_RN, LOWP_SAT_OFF, "e2m1 has no Inf/NaN: nosat"},
        {LOWP_E2M1, LOWP_PROFILE_OCP, LOWP_RZ, LOWP_SAT_OFF, "e2m1 has no Inf/NaN: nosat"},
        {LOWP_E2M1, LOWP_PROFILE_CUDA, LOWP_RU, LOWP_SAT_DEFAULT, "CUDA e2m1 has rn, rz only"},
        {LOWP_BF16, LOWP_PROFILE_CUDA, LOWP_RN, LOWP_SAT_ON, "CUDA bf16 does not saturate"},
        {LOWP_F16, LOWP_PROFILE_CUDA, LOWP_RNA, LOWP_SAT_DEFAULT, "CUDA f16 has no rna"},
        {LOWP_BF16, LOWP_PROFILE_ML_DTYPES, LOWP_RZ, LOWP_SAT_DEFAULT, "ml_dtypes has rn only"},
    };
    int bad = 0;
    for (size_t i = 0; i < N_ELEMS(refused); i++) {
        lowp_codec c;
        char why[256];
        memset(why, 0, sizeof why);
        memset(&c, 0, sizeof c);
        int rc = lowp_codec_init(&c, refused[i].f, refused[i].p, refused[i].r, refused[i].sat,
                                 why, sizeof why);
        if (rc != -1 || why[0] == '\0') {
            fprintf(stderr, "codec_init %s %s %s %s: rc %d, reason '%s'; expected -1 with a"
                            " reason (%s)\n",
                    fmt_name(refused[i].f), prof_name(refused[i].p), round_name(refused[i].r),
                    sat_name(refused[i].sat), rc, why, refused[i].what);
            bad++;
        }
        /* why may be NULL */
        ck_assert_int_eq(lowp_codec_init(&c, refused[i].f, refused[i].p, refused[i].r,
                                         refused[i].sat, NULL, 0),
                         -1);
    }
    ASSERT_NO_MISMATCH(bad);
}
END_TEST

/* profiles.md "Supported combinations": every (format, profile, mode, saturation) is
 * accepted or refused as the table says, and the default saturation resolves as stated. */
START_TEST(support_matrix_and_default_saturation)
{
    int bad = 0;
    for (int f = 0; f < LOWP_FORMAT_COUNT; f++)
        for (int p = 0; p < LOWP_PROFILE_COUNT; p++)
            for (int r = 0; r < LOWP_ROUND_COUNT; r++)
                for (int sat = -1; sat <= 1; sat++) {
                    int resolved = -1;
                    int want = doc_supported((lowp_format)f, (lowp_profile)p, (lowp_round)r,
                                             sat, &resolved);
                    lowp_codec c;
                    char why[256] = "";
                    memset(&c, 0, sizeof c);
                    int rc = lowp_codec_init(&c, (lowp_format)f, (lowp_profile)p,
                                             (lowp_round)r, sat, why, sizeof why);
                    if ((rc == 0) != want || (rc != 0 && rc != -1) ||
                        (rc == -1 && why[0] == '\0')) {
                        fprintf(stderr, "codec_init %s %s %s %s: rc %d (%s); profiles.md says %s\n",
                                fmt_name((lowp_format)f), prof_name((lowp_profile)p),
                                round_name((lowp_round)r), sat_name(sat), rc, why,
                                want ? "supported" : "refused, with a reason");
                        bad++;
                        continue;
                    }
                    if (rc == 0 && (c.saturate != resolved || (int)c.format != f ||
                                    (int)c.profile != p || (int)c.round != r)) {
                        fprintf(stderr, "codec_init %s %s %s %s: resolved saturate %d, expected"
                                        " %d (or fields not kept)\n",
                                fmt_name((lowp_format)f), prof_name((lowp_profile)p),
                                round_name((lowp_round)r), sat_name(sat), c.saturate, resolved);
                        bad++;
                    }
                }
    ASSERT_NO_MISMATCH(bad);
}
END_TEST

/* ---------------------------------------------------------------------------------- */
/* E2M1                                                                                 */

/* ref/notes/formats.md §1.1: CUDA host emulation, RN / RZ, on special inputs; the same finite rows
 * hold for ocp rn/rz and ml_dtypes rn (§1.1 "CUDA RN equals ml_dtypes on every non-NaN");
 * NaN columns from profiles.md (ocp 0x7|s, ml_dtypes +NaN 0x8, -NaN 0x0). */
START_TEST(e2m1_special_inputs_rn_rz_s1_1)
{
    static const column cols[] = {
        {LOWP_PROFILE_CUDA, LOWP_RN, LOWP_SAT_DEFAULT}, {LOWP_PROFILE_CUDA, LOWP_RZ, LOWP_SAT_DEFAULT},
        {LOWP_PROFILE_OCP, LOWP_RN, LOWP_SAT_DEFAULT},  {LOWP_PROFILE_OCP, LOWP_RZ, LOWP_SAT_DEFAULT},
        {LOWP_PROFILE_ML_DTYPES, LOWP_RN, LOWP_SAT_DEFAULT},
    };
    /*                                 cuda rn cuda rz ocp rn ocp rz mld rn */
    static const row rows[] = {
        {X(0.0f), {0x0, 0x0, 0x0, 0x0, 0x0}},
        {X(-0.0f), {0x8, 0x8, 0x8, 0x8, 0x8}},
        {X(0.25f), {0x0, 0x0, 0x0, 0x0, 0x0}},
        {X(0.26f), {0x1, 0x0, 0x1, 0x0, 0x1}},
        {X(0.75f), {0x2, 0x1, 0x2, 0x1, 0x2}},
        {X(1.25f), {0x2, 0x2, 0x2, 0x2, 0x2}},
        {X(1.75f), {0x4, 0x3, 0x4, 0x3, 0x4}},
        {X(2.5f), {0x4, 0x4, 0x4, 0x4, 0x4}},
        {X(3.5f), {0x6, 0x5, 0x6, 0x5, 0x6}},
        {X(5.0f), {0x6, 0x6, 0x6, 0x6, 0x6}},
        {X(5.9f), {0x7, 0x6, 0x7, 0x6, 0x7}},
        {X(6.5f), {0x7, 0x7, 0x7, 0x7, 0x7}},
        {X(INFINITY), {0x7, 0x7, 0x7, 0x7, 0x7}},
        {X(-INFINITY), {0xF, 0xF, 0xF, 0xF, 0xF}},
        {NANBITS(0x7fc00000u), {0x7, 0x7, 0x7, 0x7, 0x8}},
        {NANBITS(0xffc00000u), {0x7, 0x7, 0xF, 0xF, 0x0}},
        {X(-0.25f), {0x8, 0x8, 0x8, 0x8, 0x8}},
        {X(-5.0f), {0xE, 0xE, 0xE, 0xE, 0xE}},
    };
    ASSERT_NO_MISMATCH(RUN_TABLE("ref/notes/formats.md 1.1", LOWP_E2M1, cols, rows));
}
END_TEST

/* ref/notes/formats.md §1.3: ml_dtypes 0.6.0 measured list. */
START_TEST(e2m1_ml_dtypes_measured_list_s1_3)
{
    static const column cols[] = {{LOWP_PROFILE_ML_DTYPES, LOWP_RN, LOWP_SAT_DEFAULT}};
    static const row rows[] = {
        {X(0.0f), {0x0}},        {X(-0.0f), {0x8}},       {X(0.25f), {0x0}},
        {X(0x1.000002p-2f), {0x1}}, /* 0.25 + ulp */
        {X(0.75f), {0x2}},       {X(1.25f), {0x2}},       {X(1.75f), {0x4}},
        {X(2.5f), {0x4}},        {X(3.5f), {0x6}},        {X(5.0f), {0x6}},
        {X(6.0f), {0x7}},        {X(7.0f), {0x7}},        {X(INFINITY), {0x7}},
        {X(-INFINITY), {0xF}},   {NANBITS(0x7fc00000u), {0x8}}, {NANBITS(0xffc00000u), {0x0}},
        {X(-0.25f), {0x8}},      {X(-5.0f), {0xE}},
    };
    ASSERT_NO_MISMATCH(RUN_TABLE("ref/notes/formats.md 1.3", LOWP_E2M1, cols, rows));
}
END_TEST

/* ref/notes/formats.md §1.6 tie table: RNE column for cuda/ml_dtypes/ocp rn, ties-away column for
 * ocp rna; both signs. */
START_TEST(e2m1_tie_table_rne_and_ties_away_s1_6)
{
    static const float tie[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
    static const uint16_t rne[] = {0x0, 0x2, 0x2, 0x4, 0x4, 0x6, 0x6};
    static const uint16_t away[] = {0x1, 0x2, 0x3, 0x4, 0x5, 0x6, 0x7}; /* 0.5 1 1.5 2 3 4 6 */
    static const lowp_profile rn_profiles[] = {LOWP_PROFILE_CUDA, LOWP_PROFILE_ML_DTYPES,
                                               LOWP_PROFILE_OCP};
    int bad = 0;
    for (size_t k = 0; k < N_ELEMS(rn_profiles); k++) {
        lowp_codec c = open_codec(LOWP_E2M1, rn_profiles[k], LOWP_RN, LOWP_SAT_DEFAULT);
        for (size_t i = 0; i < N_ELEMS(tie); i++) {
            bad += expect_f32(&c, "1.6 RNE", tie[i], rne[i]);
            bad += expect_f32(&c, "1.6 RNE", -tie[i], (uint16_t)(rne[i] | 0x8));
        }
    }
    lowp_codec a = open_codec(LOWP_E2M1, LOWP_PROFILE_OCP, LOWP_RNA, LOWP_SAT_DEFAULT);
    for (size_t i = 0; i < N_ELEMS(tie); i++) {
        bad += expect_f32(&a, "1.6 ties-away", tie[i], away[i]);
        bad += expect_f32(&a, "1.6 ties-away", -tie[i], (uint16_t)(away[i] | 0x8));
    }
    ASSERT_NO_MISMATCH(bad);
}
END_TEST

/* ref/notes/formats.md §8.4: nextafter on each side of every tie, 6.0, nextafter(6), 1e30 (saturates). */
START_TEST(e2m1_tie_neighbours_and_saturation_s8_4)
{
    static const float tie[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
    static const uint16_t lo[] = {0x0, 0x1, 0x2, 0x3, 0x4, 0x5, 0x6};
    static const lowp_profile profs[] = {LOWP_PROFILE_CUDA, LOWP_PROFILE_ML_DTYPES,
                                         LOWP_PROFILE_OCP};
    int bad = 0;
    for (size_t k = 0; k < N_ELEMS(profs); k++)
        for (int rna = 0; rna < 2; rna++) {
            if (rna && profs[k] != LOWP_PROFILE_OCP)
                continue;
            lowp_codec c = open_codec(LOWP_E2M1, profs[k], rna ? LOWP_RNA : LOWP_RN,
                                      LOWP_SAT_DEFAULT);
            for (size_t i = 0; i < N_ELEMS(tie); i++)
                for (int s = 0; s < 2; s++) {
                    float sg = s ? -1.0f : 1.0f;
                    uint16_t sb = s ? 0x8 : 0x0;
                    bad += expect_f32(&c, "8.4 below tie", sg * nextafterf(tie[i], 0.0f),
                                      (uint16_t)(lo[i] | sb));
                    bad += expect_f32(&c, "8.4 above tie", sg * nextafterf(tie[i], INFINITY),
                                      (uint16_t)((lo[i] + 1) | sb));
                }
            bad += expect_f32(&c, "8.4 6.0", 6.0f, 0x7);
            bad += expect_f32(&c, "8.4 nextafter(6)", nextafterf(6.0f, INFINITY), 0x7);
            bad += expect_f32(&c, "8.4 1e30", 1e30f, 0x7);
            bad += expect_f32(&c, "8.4 -1e30", -1e30f, 0xF);
            bad += expect_f32(&c, "8.4 FLT_MAX", FLT_MAX, 0x7);
        }
    ASSERT_NO_MISMATCH(bad);
}
END_TEST

/* ---------------------------------------------------------------------------------- */
/* E4M3                                                                                 */

/* ref/notes/formats.md §2.1-2.4 and §8.2: the overflow band 448 / 464 / nextafter(464) / 479.99997 /
 * 480 / 500, Inf, NaN, and the subnormal ties 2^-10, nextafter(2^-10), 1.5*2^-9. */
START_TEST(e4m3_overflow_band_and_subnormal_ties_s2)
{
    static const column cols[] = {
        {LOWP_PROFILE_CUDA, LOWP_RN, LOWP_SAT_ON},      {LOWP_PROFILE_CUDA, LOWP_RN, LOWP_SAT_OFF},
        {LOWP_PROFILE_TORCH, LOWP_RN, LOWP_SAT_DEFAULT}, {LOWP_PROFILE_ML_DTYPES, LOWP_RN, LOWP_SAT_DEFAULT},
        {LOWP_PROFILE_OCP, LOWP_RN, LOWP_SAT_ON},       {LOWP_PROFILE_OCP, LOWP_RN, LOWP_SAT_OFF},
    };
    /*                                      cuda sat nosat torch mld  ocp sat nosat */
    static const row rows[] = {
        {X(448.0f), {0x7E, 0x7E, 0x7E, 0x7E, 0x7E, 0x7E}},
        {X(-448.0f), {0xFE, 0xFE, 0xFE, 0xFE, 0xFE, 0xFE}},
        {X(464.0f), {0x7E, 0x7E, 0x7E, 0x7E, 0x7E, 0x7E}},           /* tie -> 448 (even) */
        {X(-464.0f), {0xFE, 0xFE, 0xFE, 0xFE, 0xFE, 0xFE}},
        {X(0x1.d00002p+8f), {0x7E, 0x7F, 0x7F, 0x7F, 0x7E, 0x7F}},   /* nextafter(464) */
        {X(-0x1.d00002p+8f), {0xFE, 0xFF, 0xFF, 0xFF, 0xFE, 0xFF}},
        {X(0x1.dffffep+8f), {0x7E, 0x7F, 0x7F, 0x7F, 0x7E, 0x7F}},   /* 479.99997 */
        {X(480.0f), {0x7E, 0x7F, 0x7F, 0x7F, 0x7E, 0x7F}},
        {X(500.0f), {0x7E, 0x7F, 0x7F, 0x7F, 0x7E, 0x7F}},
        {X(-500.0f), {0xFE, 0xFF, 0xFF, 0xFF, 0xFE, 0xFF}},
        {X(1e6f), {0x7E, 0x7F, 0x7F, 0x7F, 0x7E, 0x7F}},
        {X(INFINITY), {0x7E, 0x7F, 0x7F, 0x7F, 0x7E, 0x7F}},
        {X(-INFINITY), {0xFE, 0xFF, 0xFF, 0xFF, 0xFE, 0xFF}},
        {NANBITS(0x7fc00000u), {0x7F, 0x7F, 0x7F, 0x7F, 0x7F, 0x7F}},
        {NANBITS(0xffc00000u), {0x7F, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF}}, /* CUDA f32 path drops sign */
        {NANBITS(0x7f800001u), {0x7F, 0x7F, 0x7F, 0x7F, 0x7F, 0x7F}},
        {NANBITS(0xff800001u), {0x7F, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF}},
        {X(0x1p-10f), {0x00, 0x00, 0x00, 0x00, 0x00, 0x00}},          /* tie -> 0 */
        {X(-0x1p-10f), {0x80, 0x80, 0x80, 0x80, 0x80, 0x80}},
        {X(0x1.000002p-10f), {0x01, 0x01, 0x01, 0x01, 0x01, 0x01}},   /* nextafter(2^-10) */
        {X(0x1.8p-9f), {0x02, 0x02, 0x02, 0x02, 0x02, 0x02}},          /* tie 1.5*2^-9 -> 2 */
        {X(-0x1.8p-9f), {0x82, 0x82, 0x82, 0x82, 0x82, 0x82}},
        {X(0x1p-9f), {0x01, 0x01, 0x01, 0x01, 0x01, 0x01}},            /* min subnormal */
        {X(-0.0f), {0x80, 0x80, 0x80, 0x80, 0x80, 0x80}},
        {X(0.0f), {0x00, 0x00, 0x00, 0x00, 0x00, 0x00}},
        {X(1.0f), {0x38, 0x38, 0x38, 0x38, 0x38, 0x38}},
    };
    ASSERT_NO_MISMATCH(RUN_TABLE("ref/notes/formats.md 2.1-2.4", LOWP_E4M3, cols, rows));
}
END_TEST

/* ---------------------------------------------------------------------------------- */
/* E5M2                                                                                 */

/* profiles.md: max 57344, the 61440 tie (RNE threshold = CUDA threshold) overflows, Inf
 * (sat 0x7B|s, nosat 0x7C|s), NaN per profile; IEEE subnormal ties. */
START_TEST(e5m2_max_57344_tie_61440_inf_nan)
{
    static const column cols[] = {
        {LOWP_PROFILE_CUDA, LOWP_RN, LOWP_SAT_ON},      {LOWP_PROFILE_CUDA, LOWP_RN, LOWP_SAT_OFF},
        {LOWP_PROFILE_TORCH, LOWP_RN, LOWP_SAT_DEFAULT}, {LOWP_PROFILE_ML_DTYPES, LOWP_RN, LOWP_SAT_DEFAULT},
        {LOWP_PROFILE_OCP, LOWP_RN, LOWP_SAT_ON},       {LOWP_PROFILE_OCP, LOWP_RN, LOWP_SAT_OFF},
    };
    /*                                      cuda sat nosat torch mld  ocp sat nosat */
    static const row rows[] = {
        {X(57344.0f), {0x7B, 0x7B, 0x7B, 0x7B, 0x7B, 0x7B}},
        {X(-57344.0f), {0xFB, 0xFB, 0xFB, 0xFB, 0xFB, 0xFB}},
        {X(0x1.dffffep+15f), {0x7B, 0x7B, 0x7B, 0x7B, 0x7B, 0x7B}},  /* nextafter(61440, 0) */
        {X(61440.0f), {0x7B, 0x7C, 0x7C, 0x7C, 0x7B, 0x7C}},          /* tie: overflow */
        {X(-61440.0f), {0xFB, 0xFC, 0xFC, 0xFC, 0xFB, 0xFC}},
        {X(0x1.e00002p+15f), {0x7B, 0x7C, 0x7C, 0x7C, 0x7B, 0x7C}},  /* nextafter(61440) */
        {X(65536.0f), {0x7B, 0x7C, 0x7C, 0x7C, 0x7B, 0x7C}},
        {X(FLT_MAX), {0x7B, 0x7C, 0x7C, 0x7C, 0x7B, 0x7C}},
        {X(INFINITY), {0x7B, 0x7C, 0x7C, 0x7C, 0x7B, 0x7C}},
        {X(-INFINITY), {0xFB, 0xFC, 0xFC, 0xFC, 0xFB, 0xFC}},
        {NANBITS(0x7fc00000u), {0x7F, 0x7F, 0x7F, 0x7E, 0x7F, 0x7F}},
        {NANBITS(0xffc00000u), {0x7F, 0x7F, 0xFF, 0xFE, 0xFF, 0xFF}},
        {NANBITS(0x7f800001u), {0x7F, 0x7F, 0x7F, 0x7E, 0x7F, 0x7F}},
        {NANBITS(0xffffffffu), {0x7F, 0x7F, 0xFF, 0xFE, 0xFF, 0xFF}},
        {X(-0.0f), {0x80, 0x80, 0x80, 0x80, 0x80, 0x80}},
        {X(1.0f), {0x3C, 0x3C, 0x3C, 0x3C, 0x3C, 0x3C}},
        {X(0x1.2p+0f), {0x3C, 0x3C, 0x3C, 0x3C, 0x3C, 0x3C}},          /* 1.125: tie -> 1.0 */
        {X(0x1.6p+0f), {0x3E, 0x3E, 0x3E, 0x3E, 0x3E, 0x3E}},          /* 1.375: tie -> 1.5 */
        {X(0x1p-16f), {0x01, 0x01, 0x01, 0x01, 0x01, 0x01}},            /* min subnormal */
        {X(0x1p-17f), {0x00, 0x00, 0x00, 0x00, 0x00, 0x00}},            /* tie -> 0 */
        {X(-0x1p-17f), {0x80, 0x80, 0x80, 0x80, 0x80, 0x80}},
        {X(0x1.000002p-17f), {0x01, 0x01, 0x01, 0x01, 0x01, 0x01}},
        {X(0x1.8p-16f), {0x02, 0x02, 0x02, 0x02, 0x02, 0x02}},          /* tie -> 2 */
        {X(0x1p-14f), {0x04, 0x04, 0x04, 0x04, 0x04, 0x04}},            /* min normal */
    };
    ASSERT_NO_MISMATCH(RUN_TABLE("profiles.md e5m2", LOWP_E5M2, cols, rows));
}
END_TEST

/* ---------------------------------------------------------------------------------- */
/* E8M0                                                                                 */

/* ref/notes/formats.md §3.1 (CUDA RZ/RP x sat/nosat), §3.3 (torch), §3.4 (ml_dtypes) and
 * profiles.md "E8M0" (ocp rn: zero and negatives NaN; the subnormal guard-bit rule of
 * torch/ml_dtypes; clip to 2^-127). */
START_TEST(e8m0_cuda_rz_rp_torch_ml_dtypes_tables_s3)
{
    static const column cols[] = {
        {LOWP_PROFILE_CUDA, LOWP_RZ, LOWP_SAT_ON},      {LOWP_PROFILE_CUDA, LOWP_RZ, LOWP_SAT_OFF},
        {LOWP_PROFILE_CUDA, LOWP_RU, LOWP_SAT_ON},      {LOWP_PROFILE_CUDA, LOWP_RU, LOWP_SAT_OFF},
        {LOWP_PROFILE_TORCH, LOWP_RN, LOWP_SAT_DEFAULT}, {LOWP_PROFILE_ML_DTYPES, LOWP_RN, LOWP_SAT_DEFAULT},
        {LOWP_PROFILE_OCP, LOWP_RN, LOWP_SAT_ON},       {LOWP_PROFILE_OCP, LOWP_RN, LOWP_SAT_OFF},
    };
    /*                               RZs   RZn   RPs   RPn  torch   mld  ocp s  ocp n */
    static const row rows[] = {
        {X(0.0f), {0x00, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0xFF}},
        {X(-0.0f), {0x00, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0xFF}},
        {X(1.0f), {0x7F, 0x7F, 0x7F, 0x7F, 0x7F, 0x7F, 0x7F, 0x7F}},
        {X(1.25f), {0x7F, 0x7F, 0x80, 0x80, 0x7F, 0x7F, 0x7F, 0x7F}},
        {X(0x1.7ffffep+0f), {0x7F, 0x7F, 0x80, 0x80, 0x7F, 0x7F, 0x7F, 0x7F}}, /* 1.4999999 */
        {X(1.5f), {0x7F, 0x7F, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80}},
        {X(1.75f), {0x7F, 0x7F, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80}},
        {X(2.0f), {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80}},
        {X(3.0f), {0x80, 0x80, 0x81, 0x81, 0x81, 0x81, 0x81, 0x81}},
        {X(-3.0f), {0x80, 0x80, 0x81, 0x81, 0x81, 0xFF, 0xFF, 0xFF}},
        {X(-4.0f), {0x81, 0x81, 0x81, 0x81, 0x81, 0xFF, 0xFF, 0xFF}},
        {X(0x1p-127f), {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00}},
        {X(0x1.8p-127f), {0x00, 0x00, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01}},
        {X(0x1p-149f), {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00}},
        {X(0x1p-128f), {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00}},
        /* binary32 subnormal just above 2^-127 (0x00400001) and just below 1.5*2^-127
         * (0x005fffff): torch/ml_dtypes guard-bit rule rounds up, ocp rounds to nearest */
        {X(0x1.000004p-127f), {0x00, 0x00, 0x01, 0x01, 0x01, 0x01, 0x00, 0x00}},
        {X(0x1.7ffffcp-127f), {0x00, 0x00, 0x01, 0x01, 0x01, 0x01, 0x00, 0x00}},
        {X(0x1p127f), {0xFE, 0xFE, 0xFE, 0xFE, 0xFE, 0xFE, 0xFE, 0xFE}},
        {X(0x1.666666p+127f), {0xFE, 0xFE, 0xFE, 0xFF, 0xFE, 0xFE, 0xFE, 0xFE}}, /* 1.4*2^127 */
        {X(0x1.8p+127f), {0xFE, 0xFE, 0xFE, 0xFF, 0xFF, 0xFF, 0xFE, 0xFF}},      /* 1.5*2^127 */
        {X(FLT_MAX), {0xFE, 0xFE, 0xFE, 0xFF, 0xFF, 0xFF, 0xFE, 0xFF}},
        {X(INFINITY), {0xFE, 0xFF, 0xFE, 0xFF, 0xFF, 0xFF, 0xFE, 0xFF}},
        /* -Inf under ocp sat: "Inf 0xFE sat" vs "negative input 0xFF": not stated; skipped */
        {X(-INFINITY), {0xFE, 0xFF, 0xFE, 0xFF, 0xFF, 0xFF, NOCODE, 0xFF}},
        {NANBITS(0x7fc00000u), {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}},
        {NANBITS(0xffc00000u), {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}},
        {NANBITS(0x7f800001u), {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}},
    };
    ASSERT_NO_MISMATCH(RUN_TABLE("ref/notes/formats.md 3.1/3.3/3.4", LOWP_E8M0, cols, rows));
}
END_TEST

/* profiles.md "E8M0" rounding for every ocp mode: rz/rd down, ru up, rn/rna nearest with
 * 1.5*2^e going up; zero and negatives NaN. */
START_TEST(e8m0_ocp_every_mode_down_up_nearest)
{
    static const column cols[] = {
        {LOWP_PROFILE_OCP, LOWP_RZ, LOWP_SAT_DEFAULT}, {LOWP_PROFILE_OCP, LOWP_RD, LOWP_SAT_DEFAULT},
        {LOWP_PROFILE_OCP, LOWP_RU, LOWP_SAT_DEFAULT}, {LOWP_PROFILE_OCP, LOWP_RN, LOWP_SAT_DEFAULT},
        {LOWP_PROFILE_OCP, LOWP_RNA, LOWP_SAT_DEFAULT},
    };
    /*                           rz    rd    ru    rn   rna */
    static const row rows[] = {
        {X(1.0f), {0x7F, 0x7F, 0x7F, 0x7F, 0x7F}},
        {X(1.25f), {0x7F, 0x7F, 0x80, 0x7F, 0x7F}},
        {X(1.5f), {0x7F, 0x7F, 0x80, 0x80, 0x80}},
        {X(1.75f), {0x7F, 0x7F, 0x80, 0x80, 0x80}},
        {X(3.0f), {0x80, 0x80, 0x81, 0x81, 0x81}},
        {X(0x1p-20f), {0x6B, 0x6B, 0x6B, 0x6B, 0x6B}},
        {X(0x1.8p-127f), {0x00, 0x00, 0x01, 0x01, 0x01}},
        {X(0x1p-149f), {0x00, 0x00, 0x00, 0x00, 0x00}}, /* results below 2^-127 clip */
        {X(FLT_MAX), {0xFE, 0xFE, 0xFE, 0xFE, 0xFE}},    /* default sat: above 2^127 -> 0xFE */
        {X(0.0f), {0xFF, 0xFF, 0xFF, 0xFF, 0xFF}},
        {X(-0.0f), {0xFF, 0xFF, 0xFF, 0xFF, 0xFF}},
        {X(-2.0f), {0xFF, 0xFF, 0xFF, 0xFF, 0xFF}},
        {NANBITS(0x7fc00000u), {0xFF, 0xFF, 0xFF, 0xFF, 0xFF}},
    };
    ASSERT_NO_MISMATCH(RUN_TABLE("profiles.md e8m0 ocp", LOWP_E8M0, cols, rows));
}
END_TEST

/* ---------------------------------------------------------------------------------- */
/* BF16 and F16                                                                         */

/* Round to nearest (every profile): ties to even, overflow to Inf, subnormals, -0; the ocp
 * sat column turns overflow and Inf into the largest finite value. */
START_TEST(bf16_rn_ties_overflow_subnormals)
{
    static const column cols[] = {
        {LOWP_PROFILE_CUDA, LOWP_RN, LOWP_SAT_DEFAULT}, {LOWP_PROFILE_TORCH, LOWP_RN, LOWP_SAT_DEFAULT},
        {LOWP_PROFILE_ML_DTYPES, LOWP_RN, LOWP_SAT_DEFAULT}, {LOWP_PROFILE_OCP, LOWP_RN, LOWP_SAT_OFF},
        {LOWP_PROFILE_OCP, LOWP_RN, LOWP_SAT_ON},
    };
    /*                                    cuda    torch     mld   ocp n   ocp s */
    static const row rows[] = {
        {X(1.0f), {0x3F80, 0x3F80, 0x3F80, 0x3F80, 0x3F80}},
        {X(0x1.01p+0f), {0x3F80, 0x3F80, 0x3F80, 0x3F80, 0x3F80}},     /* 1+2^-8 tie -> even */
        {X(0x1.03p+0f), {0x3F82, 0x3F82, 0x3F82, 0x3F82, 0x3F82}},     /* 1+3*2^-8 tie -> even */
        {X(0x1.010002p+0f), {0x3F81, 0x3F81, 0x3F81, 0x3F81, 0x3F81}}, /* just above the tie */
        {X(-0x1.01p+0f), {0xBF80, 0xBF80, 0xBF80, 0xBF80, 0xBF80}},
        {X(0x1.fep+127f), {0x7F7F, 0x7F7F, 0x7F7F, 0x7F7F, 0x7F7F}},   /* bf16 max */
        {X(0x1.fefffep+127f), {0x7F7F, 0x7F7F, 0x7F7F, 0x7F7F, 0x7F7F}},
        {X(0x1.ffp+127f), {0x7F80, 0x7F80, 0x7F80, 0x7F80, 0x7F7F}},   /* tie above max */
        {X(FLT_MAX), {0x7F80, 0x7F80, 0x7F80, 0x7F80, 0x7F7F}},
        {X(-FLT_MAX), {0xFF80, 0xFF80, 0xFF80, 0xFF80, 0xFF7F}},
        {X(INFINITY), {0x7F80, 0x7F80, 0x7F80, 0x7F80, 0x7F7F}},
        {X(-INFINITY), {0xFF80, 0xFF80, 0xFF80, 0xFF80, 0xFF7F}},
        {X(0.0f), {0x0000, 0x0000, 0x0000, 0x0000, 0x0000}},
        {X(-0.0f), {0x8000, 0x8000, 0x8000, 0x8000, 0x8000}},
        {X(0x1p-133f), {0x0001, 0x0001, 0x0001, 0x0001, 0x0001}},      /* min subnormal */
        {X(0x1p-134f), {0x0000, 0x0000, 0x0000, 0x0000, 0x0000}},      /* tie -> 0 */
        {X(-0x1p-134f), {0x8000, 0x8000, 0x8000, 0x8000, 0x8000}},
        {X(0x1.0002p-134f), {0x0001, 0x0001, 0x0001, 0x0001, 0x0001}}, /* just above */
        {X(0x1.8p-133f), {0x0002, 0x0002, 0x0002, 0x0002, 0x0002}},    /* tie -> 2 */
        {X(0x1p-149f), {0x0000, 0x0000, 0x0000, 0x0000, 0x0000}},
        {X(-0x1p-149f), {0x8000, 0x8000, 0x8000, 0x8000, 0x8000}},
        {X(0x1p-126f), {0x0080, 0x0080, 0x0080, 0x0080, 0x0080}},      /* min normal */
    };
    ASSERT_NO_MISMATCH(RUN_TABLE("bf16 rn", LOWP_BF16, cols, rows));
}
END_TEST

START_TEST(f16_rn_ties_overflow_subnormals)
{
    static const column cols[] = {
        {LOWP_PROFILE_CUDA, LOWP_RN, LOWP_SAT_DEFAULT}, {LOWP_PROFILE_TORCH, LOWP_RN, LOWP_SAT_DEFAULT},
        {LOWP_PROFILE_ML_DTYPES, LOWP_RN, LOWP_SAT_DEFAULT}, {LOWP_PROFILE_OCP, LOWP_RN, LOWP_SAT_OFF},
        {LOWP_PROFILE_OCP, LOWP_RN, LOWP_SAT_ON},
    };
    /*                                    cuda    torch     mld   ocp n   ocp s */
    static const row rows[] = {
        {X(1.0f), {0x3C00, 0x3C00, 0x3C00, 0x3C00, 0x3C00}},
        {X(0x1.002p+0f), {0x3C00, 0x3C00, 0x3C00, 0x3C00, 0x3C00}},    /* 1+2^-11 tie -> even */
        {X(0x1.006p+0f), {0x3C02, 0x3C02, 0x3C02, 0x3C02, 0x3C02}},    /* 1+3*2^-11 -> even */
        {X(0x1.002002p+0f), {0x3C01, 0x3C01, 0x3C01, 0x3C01, 0x3C01}}, /* just above the tie */
        {X(-0x1.002p+0f), {0xBC00, 0xBC00, 0xBC00, 0xBC00, 0xBC00}},
        {X(65504.0f), {0x7BFF, 0x7BFF, 0x7BFF, 0x7BFF, 0x7BFF}},       /* f16 max */
        {X(0x1.ffdffep+15f), {0x7BFF, 0x7BFF, 0x7BFF, 0x7BFF, 0x7BFF}}, /* nextafter(65520,0) */
        {X(65520.0f), {0x7C00, 0x7C00, 0x7C00, 0x7C00, 0x7BFF}},       /* tie above max */
        {X(-65520.0f), {0xFC00, 0xFC00, 0xFC00, 0xFC00, 0xFBFF}},
        {X(1e6f), {0x7C00, 0x7C00, 0x7C00, 0x7C00, 0x7BFF}},
        {X(INFINITY), {0x7C00, 0x7C00, 0x7C00, 0x7C00, 0x7BFF}},
        {X(-INFINITY), {0xFC00, 0xFC00, 0xFC00, 0xFC00, 0xFBFF}},
        {X(0.0f), {0x0000, 0x0000, 0x0000, 0x0000, 0x0000}},
        {X(-0.0f), {0x8000, 0x8000, 0x8000, 0x8000, 0x8000}},
        {X(0x1p-24f), {0x0001, 0x0001, 0x0001, 0x0001, 0x0001}},       /* min subnormal */
        {X(0x1p-25f), {0x0000, 0x0000, 0x0000, 0x0000, 0x0000}},       /* tie -> 0 */
        {X(-0x1p-25f), {0x8000, 0x8000, 0x8000, 0x8000, 0x8000}},
        {X(0x1.000002p-25f), {0x0001, 0x0001, 0x0001, 0x0001, 0x0001}},
        {X(0x1.8p-24f), {0x0002, 0x0002, 0x0002, 0x0002, 0x0002}},     /* tie -> 2 */
        {X(0x1p-14f), {0x0400, 0x0400, 0x0400, 0x0400, 0x0400}},       /* min normal */
        {X(0x1p-149f), {0x0000, 0x0000, 0x0000, 0x0000, 0x0000}},
    };
    ASSERT_NO_MISMATCH(RUN_TABLE("f16 rn", LOWP_F16, cols, rows));
}
END_TEST

/* profiles.md: an overflow rounded toward zero (rz; rd for positive; ru for negative)
 * gives the largest finite value; other directed overflow gives Inf (nosat). Inf input
 * stays Inf without saturation. Subnormal and normal directed rounding. cuda and ocp. */
START_TEST(bf16_f16_directed_rz_ru_rd_at_max_and_subnormals)
{
    static const column cols[] = {
        {LOWP_PROFILE_CUDA, LOWP_RZ, LOWP_SAT_DEFAULT}, {LOWP_PROFILE_CUDA, LOWP_RU, LOWP_SAT_DEFAULT},
        {LOWP_PROFILE_CUDA, LOWP_RD, LOWP_SAT_DEFAULT}, {LOWP_PROFILE_OCP, LOWP_RZ, LOWP_SAT_DEFAULT},
        {LOWP_PROFILE_OCP, LOWP_RU, LOWP_SAT_DEFAULT},  {LOWP_PROFILE_OCP, LOWP_RD, LOWP_SAT_DEFAULT},
    };
    /*                                      rz      ru      rd   | ocp rz  ru      rd */
    static const row bf[] = {
        {X(FLT_MAX), {0x7F7F, 0x7F80, 0x7F7F, 0x7F7F, 0x7F80, 0x7F7F}},
        {X(-FLT_MAX), {0xFF7F, 0xFF7F, 0xFF80, 0xFF7F, 0xFF7F, 0xFF80}},
        {X(0x1.fe0002p+127f), {0x7F7F, 0x7F80, 0x7F7F, 0x7F7F, 0x7F80, 0x7F7F}},
        {X(0x1.fep+127f), {0x7F7F, 0x7F7F, 0x7F7F, 0x7F7F, 0x7F7F, 0x7F7F}},
        {X(INFINITY), {0x7F80, 0x7F80, 0x7F80, 0x7F80, 0x7F80, 0x7F80}},
        {X(-INFINITY), {0xFF80, 0xFF80, 0xFF80, 0xFF80, 0xFF80, 0xFF80}},
        {X(0x1.008p+0f), {0x3F80, 0x3F81, 0x3F80, 0x3F80, 0x3F81, 0x3F80}}, /* 1+2^-9 */
        {X(-0x1.008p+0f), {0xBF80, 0xBF80, 0xBF81, 0xBF80, 0xBF80, 0xBF81}},
        {X(0x1.01p+0f), {0x3F80, 0x3F81, 0x3F80, 0x3F80, 0x3F81, 0x3F80}},  /* 1+2^-8 */
        {X(0x1p-149f), {0x0000, 0x0001, 0x0000, 0x0000, 0x0001, 0x0000}},
        {X(-0x1p-149f), {0x8000, 0x8000, 0x8001, 0x8000, 0x8000, 0x8001}},
        {X(-0.0f), {0x8000, 0x8000, 0x8000, 0x8000, 0x8000, 0x8000}},
        {X(0.0f), {0x0000, 0x0000, 0x0000, 0x0000, 0x0000, 0x0000}},
    };
    static const row hf[] = {
        {X(65505.0f), {0x7BFF, 0x7C00, 0x7BFF, 0x7BFF, 0x7C00, 0x7BFF}},
        {X(-65505.0f), {0xFBFF, 0xFBFF, 0xFC00, 0xFBFF, 0xFBFF, 0xFC00}},
        {X(1e6f), {0x7BFF, 0x7C00, 0x7BFF, 0x7BFF, 0x7C00, 0x7BFF}},
        {X(FLT_MAX), {0x7BFF, 0x7C00, 0x7BFF, 0x7BFF, 0x7C00, 0x7BFF}},
        {X(-FLT_MAX), {0xFBFF, 0xFBFF, 0xFC00, 0xFBFF, 0xFBFF, 0xFC00}},
        {X(65504.0f), {0x7BFF, 0x7BFF, 0x7BFF, 0x7BFF, 0x7BFF, 0x7BFF}},
        {X(INFINITY), {0x7C00, 0x7C00, 0x7C00, 0x7C00, 0x7C00, 0x7C00}},
        {X(-INFINITY), {0xFC00, 0xFC00, 0xFC00, 0xFC00, 0xFC00, 0xFC00}},
        {X(0x1.001p+0f), {0x3C00, 0x3C01, 0x3C00, 0x3C00, 0x3C01, 0x3C00}}, /* 1+2^-12 */
        {X(-0x1.001p+0f), {0xBC00, 0xBC00, 0xBC01, 0xBC00, 0xBC00, 0xBC01}},
        {X(0x1p-149f), {0x0000, 0x0001, 0x0000, 0x0000, 0x0001, 0x0000}},
        {X(-0x1p-149f), {0x8000, 0x8000, 0x8001, 0x8000, 0x8000, 0x8001}},
        {X(0x1.8p-24f), {0x0001, 0x0002, 0x0001, 0x0001, 0x0002, 0x0001}},
        {X(-0.0f), {0x8000, 0x8000, 0x8000, 0x8000, 0x8000, 0x8000}},
    };
    int bad = RUN_TABLE("bf16 directed", LOWP_BF16, cols, bf);
    bad += RUN_TABLE("f16 directed", LOWP_F16, cols, hf);
    ASSERT_NO_MISMATCH(bad);
}
END_TEST

/* ocp rna: ties away from zero, for bf16 and f16. */
START_TEST(bf16_f16_rna_ties_away)
{
    static const column cols[] = {{LOWP_PROFILE_OCP, LOWP_RNA, LOWP_SAT_DEFAULT}};
    static const row bf[] = {
        {X(0x1.01p+0f), {0x3F81}}, {X(-0x1.01p+0f), {0xBF81}}, {X(0x1.03p+0f), {0x3F82}},
        {X(0x1p-134f), {0x0001}},  {X(0x1.ffp+127f), {0x7F80}}, {X(0x1.00fffep+0f), {0x3F80}},
    };
    static const row hf[] = {
        {X(0x1.002p+0f), {0x3C01}}, {X(-0x1.002p+0f), {0xBC01}}, {X(0x1p-25f), {0x0001}},
        {X(65520.0f), {0x7C00}},    {X(0x1.001ffep+0f), {0x3C00}},
    };
    int bad = RUN_TABLE("bf16 rna", LOWP_BF16, cols, bf);
    bad += RUN_TABLE("f16 rna", LOWP_F16, cols, hf);
    ASSERT_NO_MISMATCH(bad);
}
END_TEST

/* ---------------------------------------------------------------------------------- */
/* NaN, Inf, -0 across every codec                                                      */

/* profiles.md "NaN input (binary32 entry point)": the code for binary32 NaN bits b. */
static uint16_t doc_nan_f32(lowp_format f, lowp_profile p, uint32_t b)
{
    unsigned s = b >> 31;
    switch (f) {
    case LOWP_E2M1:
        return p == LOWP_PROFILE_CUDA ? 0x7
             : p == LOWP_PROFILE_ML_DTYPES ? (s ? 0x0 : 0x8)
             : (uint16_t)(0x7 | (s << 3));
    case LOWP_E4M3:
        return p == LOWP_PROFILE_CUDA ? 0x7F : (uint16_t)(0x7F | (s << 7));
    case LOWP_E5M2:
        return p == LOWP_PROFILE_CUDA ? 0x7F
             : p == LOWP_PROFILE_ML_DTYPES ? (uint16_t)(0x7E | (s << 7))
             : (uint16_t)(0x7F | (s << 7));
    case LOWP_E8M0:
        return 0xFF;
    case LOWP_BF16: /* torch: x86-64 AVX2/AVX-512 kernels give 0xFFFF for any NaN */
        return p == LOWP_PROFILE_CUDA ? 0x7FFF
             : p == LOWP_PROFILE_TORCH ? 0xFFFF
             : (uint16_t)(0x7FC0 | (s << 15));
    case LOWP_F16:
        if (p == LOWP_PROFILE_CUDA)
            return 0x7FFF;
        if (p == LOWP_PROFILE_TORCH) /* quiet payload: s | 0x7E00 | (mantissa >> 13) */
            return (uint16_t)(0x7E00 | ((b & 0x7fffffu) >> 13) | (s << 15));
        if (p == LOWP_PROFILE_ML_DTYPES) { /* numpy: s | 0x7C00 | (mantissa >> 13), never Inf */
            uint16_t mag = (uint16_t)(0x7C00 | ((b & 0x7fffffu) >> 13));
            if (mag == 0x7C00)
                mag = 0x7C01;
            return (uint16_t)(mag | (s << 15));
        }
        return (uint16_t)(0x7E00 | (s << 15));
    }
    return NOCODE;
}

/* profiles.md "NaN input (binary32 entry point)", several payloads of both signs. */
START_TEST(nan_codes_binary32_per_profile)
{
    static const uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u,
                                    0x7fffffffu, 0xffffffffu, 0x7fa00000u, 0x7f802000u,
                                    0xff801fffu, 0x7fbfffffu};
    int bad = 0;
    for (int f = 0; f < LOWP_FORMAT_COUNT; f++)
        for (int p = 0; p < LOWP_PROFILE_COUNT; p++)
            for (int r = 0; r < LOWP_ROUND_COUNT; r++)
                for (int sat = -1; sat <= 1; sat++) {
                    if (!doc_supported((lowp_format)f, (lowp_profile)p, (lowp_round)r, sat, NULL))
                        continue;
                    lowp_codec c = open_codec((lowp_format)f, (lowp_profile)p, (lowp_round)r, sat);
                    for (size_t i = 0; i < N_ELEMS(nans); i++)
                        bad += expect_f32(&c, "profiles.md NaN", lowp_f32_from_bits(nans[i]),
                                          doc_nan_f32((lowp_format)f, (lowp_profile)p, nans[i]));
                }
    ASSERT_NO_MISMATCH(bad);
}
END_TEST

/* profiles.md "Binary64 input": cuda's double entry points keep the NaN sign (E4M3
 * 0x7F|s, E5M2 0x7E|s|top two fraction bits, E2M1 0x7, E8M0 0xFF, BF16/F16 0x7FFF);
 * ocp as binary32; ml_dtypes F16 (numpy) keeps the double's top ten payload bits;
 * otherwise torch/ml_dtypes go through binary32 (checked with quiet NaNs, which become
 * the binary32 quiet NaN of the same sign). */
START_TEST(nan_codes_binary64_per_profile)
{
    static const uint64_t nans[] = {
        UINT64_C(0x7ff8000000000000), UINT64_C(0xfff8000000000000), /* top bits 10 */
        UINT64_C(0x7ff0000000000001), UINT64_C(0xfff0000000000001), /* top bits 00 */
        UINT64_C(0x7ff4000000000000), UINT64_C(0xfff4000000000000), /* top bits 01 */
        UINT64_C(0x7ffc000000000000), UINT64_C(0xfffc000000000000), /* top bits 11 */
        UINT64_C(0x7ff0000020000000), UINT64_C(0x7ff0040000000000), /* low payload bits */
        UINT64_C(0xfff7fc0000000000), UINT64_C(0x7fffffffffffffff),
    };
    int bad = 0;
    for (int f = 0; f < LOWP_FORMAT_COUNT; f++)
        for (int p = 0; p < LOWP_PROFILE_COUNT; p++)
            for (int r = 0; r < LOWP_ROUND_COUNT; r++)
                for (int sat = -1; sat <= 1; sat++) {
                    if (!doc_supported((lowp_format)f, (lowp_profile)p, (lowp_round)r, sat, NULL))
                        continue;
                    lowp_codec c = open_codec((lowp_format)f, (lowp_profile)p, (lowp_round)r, sat);
                    for (size_t i = 0; i < N_ELEMS(nans); i++) {
                        uint64_t b = nans[i];
                        unsigned s = (unsigned)(b >> 63);
                        unsigned top2 = (unsigned)(b >> 50) & 3u;
                        int quiet_only = (b & UINT64_C(0x7fffffffffffffff)) ==
                                         UINT64_C(0x7ff8000000000000);
                        uint16_t want = NOCODE;
                        if (p == LOWP_PROFILE_CUDA) {
                            switch ((lowp_format)f) {
                            case LOWP_E2M1: want = 0x7; break;
                            case LOWP_E4M3: want = (uint16_t)(0x7F | (s << 7)); break;
                            case LOWP_E5M2: want = (uint16_t)(0x7E | (s << 7) | top2); break;
                            case LOWP_E8M0: want = 0xFF; break;
                            default: want = 0x7FFF; break;
                            }
                        } else if (p == LOWP_PROFILE_ML_DTYPES && f == LOWP_F16) {
                            /* numpy float16 from a double: s | 0x7C00 | (fraction >> 42),
                             * or s | 0x7C01 if that is 0x7C00 */
                            uint16_t mag = (uint16_t)(0x7C00 | ((b >> 42) & 0x3FFu));
                            if (mag == 0x7C00)
                                mag = 0x7C01;
                            want = (uint16_t)(mag | (s << 15));
                        } else if (p == LOWP_PROFILE_OCP || quiet_only) {
                            /* ocp: as binary32 (fixed codes per sign); torch/ml_dtypes:
                             * the double quiet NaN is the binary32 quiet NaN of its sign */
                            want = doc_nan_f32((lowp_format)f, (lowp_profile)p,
                                               s ? 0xffc00000u : 0x7fc00000u);
                        }
                        bad += expect_f64(&c, "profiles.md binary64 NaN",
                                          lowp_f64_from_bits(b), want);
                    }
                }
    ASSERT_NO_MISMATCH(bad);
}
END_TEST

/* profiles.md "Binary64 input": torch and ml_dtypes round the double to binary32 first
 * (two roundings), except ml_dtypes F16 (numpy float16: one rounding); cuda fp8/fp4 and
 * ocp round once. Doubles just beside a tie of the target format that round to the tie
 * in binary32. */
START_TEST(f64_double_rounding_torch_ml_dtypes_vs_once)
{
    static const struct {
        lowp_format f;
        double x;
        uint16_t twice, once;
    } cases[] = {
        {LOWP_E2M1, 0.25 + 0x1p-40, 0x0, 0x1},
        {LOWP_E2M1, -(2.5 + 0x1p-40), 0xC, 0xD},
        {LOWP_E4M3, 1.0 + 0x1p-4 + 0x1p-40, 0x38, 0x39},
        {LOWP_E4M3, 464.0 + 0x1p-30, 0x7E, 0x7F}, /* nosat codecs only: see below */
        {LOWP_E5M2, 1.0 + 0x1p-3 + 0x1p-40, 0x3C, 0x3D},
        {LOWP_E8M0, 1.5 - 0x1p-40, 0x80, 0x7F},
        {LOWP_BF16, 1.0 + 0x1p-8 + 0x1p-40, 0x3F80, 0x3F81},
        {LOWP_F16, 1.0 + 0x1p-11 + 0x1p-40, 0x3C00, 0x3C01},
    };
    int bad = 0;
    for (size_t i = 0; i < N_ELEMS(cases); i++)
        for (int p = 0; p < LOWP_PROFILE_COUNT; p++) {
            if (!doc_supported(cases[i].f, (lowp_profile)p, LOWP_RN, LOWP_SAT_OFF, NULL) &&
                !doc_supported(cases[i].f, (lowp_profile)p, LOWP_RN, LOWP_SAT_DEFAULT, NULL))
                continue;
            int twice = p == LOWP_PROFILE_TORCH || p == LOWP_PROFILE_ML_DTYPES;
            /* profiles.md states one rounding for cuda only for fp8/fp4 */
            if (p == LOWP_PROFILE_CUDA && (cases[i].f == LOWP_BF16 || cases[i].f == LOWP_F16))
                continue;
            /* profiles.md: F16 under ml_dtypes is numpy's float16, which rounds the double
             * directly (one rounding) */
            if (p == LOWP_PROFILE_ML_DTYPES && cases[i].f == LOWP_F16)
                twice = 0;
            int sat = doc_supported(cases[i].f, (lowp_profile)p, LOWP_RN, LOWP_SAT_OFF, NULL)
                          ? LOWP_SAT_OFF
                          : LOWP_SAT_DEFAULT;
            lowp_codec c = open_codec(cases[i].f, (lowp_profile)p, LOWP_RN, sat);
            bad += expect_f64(&c, "profiles.md binary64 rounding", cases[i].x,
                              twice ? cases[i].twice : cases[i].once);
        }
    ASSERT_NO_MISMATCH(bad);
}
END_TEST

/* profiles.md: input -0 keeps its sign everywhere (0x8, 0x80, 0x8000) except E8M0
 * (cuda/torch 0x00, ml_dtypes/ocp 0xFF); +0 is code 0 (E8M0 as -0). Every codec, both
 * entry points. */
START_TEST(negative_zero_every_codec)
{
    int bad = 0;
    for (int f = 0; f < LOWP_FORMAT_COUNT; f++)
        for (int p = 0; p < LOWP_PROFILE_COUNT; p++)
            for (int r = 0; r < LOWP_ROUND_COUNT; r++)
                for (int sat = -1; sat <= 1; sat++) {
                    if (!doc_supported((lowp_format)f, (lowp_profile)p, (lowp_round)r, sat, NULL))
                        continue;
                    lowp_codec c = open_codec((lowp_format)f, (lowp_profile)p, (lowp_round)r, sat);
                    uint16_t wneg, wpos;
                    if (f == LOWP_E8M0) {
                        wneg = wpos = (p == LOWP_PROFILE_CUDA || p == LOWP_PROFILE_TORCH) ? 0x00
                                                                                          : 0xFF;
                    } else {
                        wneg = doc_sign_bit((lowp_format)f);
                        wpos = 0;
                    }
                    bad += expect_f32(&c, "-0", -0.0f, wneg);
                    bad += expect_f32(&c, "+0", 0.0f, wpos);
                    bad += expect_f64(&c, "-0", -0.0, wneg);
                    bad += expect_f64(&c, "+0", 0.0, wpos);
                    /* tiny negatives that round to zero keep the sign (ref/notes/formats.md 8.1) */
                    if (f != LOWP_E8M0 && (r == LOWP_RN || r == LOWP_RZ || r == LOWP_RNA)) {
                        bad += expect_f32(&c, "tiny negative", -0x1p-149f, wneg);
                        bad += expect_f64(&c, "tiny negative", -0x1p-1074, wneg);
                    }
                }
    ASSERT_NO_MISMATCH(bad);
}
END_TEST

/* profiles.md "Inf input" table, every codec and mode, both signs, both entry points. */
START_TEST(inf_input_table_every_codec)
{
    int bad = 0;
    for (int f = 0; f < LOWP_FORMAT_COUNT; f++)
        for (int p = 0; p < LOWP_PROFILE_COUNT; p++)
            for (int r = 0; r < LOWP_ROUND_COUNT; r++)
                for (int sat = -1; sat <= 1; sat++) {
                    int res = 0;
                    if (!doc_supported((lowp_format)f, (lowp_profile)p, (lowp_round)r, sat, &res))
                        continue;
                    lowp_codec c = open_codec((lowp_format)f, (lowp_profile)p, (lowp_round)r, sat);
                    uint16_t mag = 0;
                    switch ((lowp_format)f) {
                    case LOWP_E2M1: mag = 0x7; break;
                    case LOWP_E4M3: mag = res ? 0x7E : 0x7F; break;
                    case LOWP_E5M2: mag = res ? 0x7B : 0x7C; break;
                    case LOWP_E8M0: mag = res ? 0xFE : 0xFF; break;
                    case LOWP_BF16: mag = res ? 0x7F7F : 0x7F80; break;
                    case LOWP_F16: mag = res ? 0x7BFF : 0x7C00; break;
                    }
                    bad += expect_f32(&c, "Inf table", INFINITY, mag);
                    bad += expect_f64(&c, "Inf table", (double)INFINITY, mag);
                    uint16_t nmag = NOCODE;
                    if (f != LOWP_E8M0)
                        nmag = (uint16_t)(mag | doc_sign_bit((lowp_format)f));
                    else if (p == LOWP_PROFILE_CUDA || p == LOWP_PROFILE_TORCH)
                        nmag = mag; /* |x| */
                    else if (!res)
                        nmag = 0xFF; /* negative -> NaN and Inf nosat -> NaN agree */
                    bad += expect_f32(&c, "-Inf table", -INFINITY, nmag);
                    bad += expect_f64(&c, "-Inf table", -(double)INFINITY, nmag);
                }
    ASSERT_NO_MISMATCH(bad);
}
END_TEST

/* profiles.md "Finite values and overflow": an overflow rounded toward zero gives the
 * largest finite value; any other overflow gives max|s (sat) or Inf|s / NaN 0x7F|s. */
START_TEST(overflow_rounded_toward_zero_gives_max)
{
    static const float big[] = {100.0f, 1000.0f, 1e5f, 0.0f, FLT_MAX, 1e5f};
    int bad = 0;
    for (int f = 0; f < LOWP_FORMAT_COUNT; f++) {
        if (f == LOWP_E8M0)
            continue; /* unsigned; covered by the E8M0 tables */
        for (int p = 0; p < LOWP_PROFILE_COUNT; p++)
            for (int r = 0; r < LOWP_ROUND_COUNT; r++)
                for (int sat = -1; sat <= 1; sat++) {
                    int res = 0;
                    if (!doc_supported((lowp_format)f, (lowp_profile)p, (lowp_round)r, sat, &res))
                        continue;
                    lowp_codec c = open_codec((lowp_format)f, (lowp_profile)p, (lowp_round)r, sat);
                    uint16_t max = doc_max_code((lowp_format)f);
                    uint16_t ovf = res ? max
                                 : f == LOWP_E4M3 ? 0x7F
                                 : f == LOWP_E5M2 ? 0x7C
                                 : f == LOWP_BF16 ? 0x7F80
                                 : f == LOWP_F16 ? 0x7C00 : max;
                    uint16_t sb = doc_sign_bit((lowp_format)f);
                    int pos_toward0 = r == LOWP_RZ || r == LOWP_RD;
                    int neg_toward0 = r == LOWP_RZ || r == LOWP_RU;
                    bad += expect_f32(&c, "overflow +", big[f], pos_toward0 ? max : ovf);
                    bad += expect_f32(&c, "overflow -", -big[f],
                                      (uint16_t)((neg_toward0 ? max : ovf) | sb));
                    bad += expect_f64(&c, "overflow + f64", 1e300, pos_toward0 ? max : ovf);
                    bad += expect_f64(&c, "overflow - f64", -1e300,
                                      (uint16_t)((neg_toward0 ? max : ovf) | sb));
                }
    }
    ASSERT_NO_MISMATCH(bad);
}
END_TEST

/* ---------------------------------------------------------------------------------- */
/* decode, round trip, arrays                                                           */

/* The value of code c by the definitions in lowp/format.h, with ldexp. */
static double def_value(lowp_format f, unsigned c, int *is_nan, int *is_inf, int *neg)
{
    unsigned s = 0, e = 0, m = 0;
    int mb = 0, bias = 0;
    unsigned emax_field = 0;
    *is_nan = *is_inf = 0;
    switch (f) {
    case LOWP_E2M1: s = c >> 3 & 1u; e = c >> 1 & 3u; m = c & 1u; mb = 1; bias = 1; break;
    case LOWP_E4M3: s = c >> 7 & 1u; e = c >> 3 & 15u; m = c & 7u; mb = 3; bias = 7; break;
    case LOWP_E5M2: s = c >> 7 & 1u; e = c >> 2 & 31u; m = c & 3u; mb = 2; bias = 15; emax_field = 31; break;
    case LOWP_E8M0:
        *neg = 0;
        if (c == 0xFF) {
            *is_nan = 1;
            return NAN;
        }
        return ldexp(1.0, (int)c - 127);
    case LOWP_BF16: s = c >> 15 & 1u; e = c >> 7 & 255u; m = c & 127u; mb = 7; bias = 127; emax_field = 255; break;
    case LOWP_F16: s = c >> 15 & 1u; e = c >> 10 & 31u; m = c & 1023u; mb = 10; bias = 15; emax_field = 31; break;
    }
    *neg = (int)s;
    if (f == LOWP_E4M3 && e == 15 && m == 7) {
        *is_nan = 1;
        return NAN;
    }
    if (emax_field && e == emax_field) {
        if (m) {
            *is_nan = 1;
            return NAN;
        }
        *is_inf = 1;
        return s ? -INFINITY : INFINITY;
    }
    double v = e ? ldexp((double)((1u << mb) + m), (int)e - bias - mb)
                 : ldexp((double)m, 1 - bias - mb);
    return s ? -v : v;
}

START_TEST(decode_every_code_matches_bit_field_definition)
{
    int bad = 0;
    for (int f = 0; f < LOWP_FORMAT_COUNT; f++) {
        unsigned n = 1u << (f == LOWP_E2M1 ? 4 : (f >= LOWP_BF16 ? 16 : 8));
        for (unsigned c = 0; c < n; c++) {
            int is_nan, is_inf, neg;
            double v = def_value((lowp_format)f, c, &is_nan, &is_inf, &neg);
            double d64 = lowp_decode_f64((lowp_format)f, (uint16_t)c);
            float d32 = lowp_decode_f32((lowp_format)f, (uint16_t)c);
            int ok = 1;
            if (is_nan) {
                ok = isnan(d64) && isnan(d32);
                if (f != LOWP_E8M0) /* NaN codes decode to a NaN carrying the code's sign */
                    ok = ok && (!!signbit(d64) == neg) && (!!signbit(d32) == neg);
            } else {
                ok = d64 == v && (double)d32 == v && !!signbit(d64) == neg &&
                     !!signbit(d32) == neg;
            }
            if (!!lowp_code_is_nan((lowp_format)f, (uint16_t)c) != is_nan ||
                !!lowp_code_is_inf((lowp_format)f, (uint16_t)c) != is_inf)
                ok = 0;
            if (!ok) {
                fprintf(stderr, "decode %s 0x%0*x: f64 %a f32 %a is_nan %d is_inf %d;"
                                " definition %a (nan %d inf %d)\n",
                        fmt_name((lowp_format)f), (int)code_digits((lowp_format)f), c, d64,
                        (double)d32, lowp_code_is_nan((lowp_format)f, (uint16_t)c),
                        lowp_code_is_inf((lowp_format)f, (uint16_t)c), v, is_nan, is_inf);
                bad++;
            }
        }
    }
    ASSERT_NO_MISMATCH(bad);
}
END_TEST

/* encode(decode(c)) == c for every finite code (NaN and Inf codes excluded), through both
 * entry points, for every codec profiles.md supports (an exact value is unchanged by any
 * rounding direction; rn for every profile that has it). */
START_TEST(encode_decode_round_trip_every_finite_code)
{
    int bad = 0;
    for (int f = 0; f < LOWP_FORMAT_COUNT; f++)
        for (int p = 0; p < LOWP_PROFILE_COUNT; p++)
            for (int r = 0; r < LOWP_ROUND_COUNT; r++)
                for (int sat = -1; sat <= 1; sat++) {
                    if (!doc_supported((lowp_format)f, (lowp_profile)p, (lowp_round)r, sat, NULL))
                        continue;
                    lowp_codec c = open_codec((lowp_format)f, (lowp_profile)p, (lowp_round)r, sat);
                    unsigned n = 1u << (f == LOWP_E2M1 ? 4 : (f >= LOWP_BF16 ? 16 : 8));
                    int shown = 0;
                    for (unsigned code = 0; code < n; code++) {
                        int is_nan, is_inf, neg;
                        (void)def_value((lowp_format)f, code, &is_nan, &is_inf, &neg);
                        if (is_nan || is_inf)
                            continue;
                        int b = 0;
                        if (shown < 10) {
                            b += expect_f32(&c, "round trip", lowp_decode_f32((lowp_format)f, (uint16_t)code),
                                            (uint16_t)code);
                            b += expect_f64(&c, "round trip", lowp_decode_f64((lowp_format)f, (uint16_t)code),
                                            (uint16_t)code);
                        } else {
                            b += lowp_encode_f32(&c, lowp_decode_f32((lowp_format)f, (uint16_t)code)) != code;
                            b += lowp_encode_f64(&c, lowp_decode_f64((lowp_format)f, (uint16_t)code)) != code;
                        }
                        shown += b != 0;
                        bad += b;
                    }
                }
    ASSERT_NO_MISMATCH(bad);
}
END_TEST

/* Inputs for the array test: specials first, then random bit patterns, random values in
 * a window around the format's range, and values at binary32 exponents near it. */
static float *array_inputs(lowp_format f, size_t n, uint64_t seed)
{
    static const uint32_t specials[] = {
        0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u,
        0x7f800001u, 0xff800001u, 0x7fffffffu, 0xffffffffu, 0x7fa00000u, 0x7f802000u,
        0x00000001u, 0x80000001u, 0x007fffffu, 0x807fffffu, 0x00800000u, 0x00400000u,
        0x00400001u, 0x00600000u, 0x005fffffu, 0x7f7fffffu, 0xff7fffffu, 0x3f800000u,
        0x3e800000u, 0x3f400000u, 0x40a00000u, 0x40c00000u, 0x40d00000u, 0x43e00000u,
        0x43e80000u, 0x43e80001u, 0x43f00000u, 0x47600000u, 0x47700000u, 0x476fffffu,
        0x477fe000u, 0x477ff000u, 0x7f7f8000u, 0x7f000000u, 0x7f400000u, 0x3a800000u,
        0x3a800001u, 0x3b400000u, 0x33000000u, 0x33800000u, 0x00008000u, 0x00010000u,
    };
    /* binary32 biased exponents around each format's range (subnormals to overflow) */
    static const int lo_e[] = {123, 113, 107, 0, 0, 100};
    static const int hi_e[] = {132, 137, 145, 254, 254, 145};
    float *x = malloc((n ? n : 1) * sizeof *x);
    ck_assert_ptr_nonnull(x);
    uint64_t st = seed;
    for (size_t i = 0; i < n; i++) {
        uint32_t b;
        uint64_t r = lowp_splitmix64(&st);
        if (i < N_ELEMS(specials)) {
            b = specials[i];
        } else if (r % 3 == 0) {
            b = (uint32_t)(r >> 32);
        } else {
            uint32_t span = (uint32_t)(hi_e[f] - lo_e[f] + 1);
            uint32_t e = (uint32_t)lo_e[f] + (uint32_t)((r >> 8) % span);
            uint32_t m = (uint32_t)(r >> 40) & 0x7fffffu;
            if (r & 4) /* sometimes a value on or next to a format tie: few low bits set */
                m &= ~((1u << (uint32_t)(12 + (r >> 3) % 10)) - 1u);
            if (r & 2)
                m ^= (uint32_t)(r >> 5) & 1u;
            b = (uint32_t)((r >> 1) & 1u) << 31 | e << 23 | m;
        }
        x[i] = lowp_f32_from_bits(b);
    }
    return x;
}

/* lowp_encode_f32_u8 (formats of at most 8 bits) and _u16 equal the scalar encoder on
 * every supported codec, at sizes that hit every vector tail, at offsets that misalign
 * the buffers; nothing past n is written. */
START_TEST(array_encoders_equal_scalar_at_vector_tails)
{
    static const size_t sizes[] = {0, 1, 7, 8, 9, 31, 33, 1000003};
    enum { GUARD = 16, MAXOFF = 3 };
    const size_t nmax = 1000003 + MAXOFF;
    int bad = 0;
    for (int f = 0; f < LOWP_FORMAT_COUNT; f++) {
        float *in = array_inputs((lowp_format)f, nmax, UINT64_C(0x6c6f7770) + (uint64_t)f);
        uint16_t *ref = malloc(nmax * sizeof *ref);
        uint16_t *o16 = malloc((nmax + GUARD) * sizeof *o16);
        uint8_t *o8 = malloc(nmax + GUARD);
        ck_assert_ptr_nonnull(ref);
        ck_assert_ptr_nonnull(o16);
        ck_assert_ptr_nonnull(o8);
        for (int p = 0; p < LOWP_PROFILE_COUNT; p++)
            for (int r = 0; r < LOWP_ROUND_COUNT; r++)
                for (int sat = -1; sat <= 1; sat++) {
                    if (!doc_supported((lowp_format)f, (lowp_profile)p, (lowp_round)r, sat, NULL))
                        continue;
                    lowp_codec c = open_codec((lowp_format)f, (lowp_profile)p, (lowp_round)r, sat);
                    for (size_t i = 0; i < nmax; i++)
                        ref[i] = lowp_encode_f32(&c, in[i]);
                    for (size_t si = 0; si < N_ELEMS(sizes); si++)
                        for (size_t off = 0; off <= MAXOFF; off++) {
                            size_t n = sizes[si];
                            if (n > 100 && off > 1)
                                break;
                            for (size_t i = 0; i < n + GUARD && off + i < nmax + GUARD; i++)
                                o16[off + i] = 0xA5A5;
                            lowp_encode_f32_u16(&c, in + off, o16 + off, n);
                            size_t first = (size_t)-1, nbad = 0;
                            for (size_t i = 0; i < n; i++)
                                if (o16[off + i] != ref[off + i]) {
                                    if (first == (size_t)-1)
                                        first = i;
                                    nbad++;
                                }
                            for (size_t i = n; i < n + GUARD && off + i < nmax + GUARD; i++)
                                if (o16[off + i] != 0xA5A5) {
                                    fprintf(stderr, "u16 %s %s %s %s n=%zu off=%zu: wrote past"
                                                    " the end at %zu\n",
                                            fmt_name((lowp_format)f), prof_name((lowp_profile)p),
                                            round_name((lowp_round)r), sat_name(sat), n, off, i);
                                    bad++;
                                    break;
                                }
                            if (nbad) {
                                fprintf(stderr, "u16 %s %s %s %s n=%zu off=%zu: %zu differ from"
                                                " scalar; first input 0x%08x got 0x%x scalar 0x%x\n",
                                        fmt_name((lowp_format)f), prof_name((lowp_profile)p),
                                        round_name((lowp_round)r), sat_name(sat), n, off, nbad,
                                        (unsigned)lowp_f32_bits(in[off + first]),
                                        (unsigned)o16[off + first], (unsigned)ref[off + first]);
                                bad++;
                            }
                            if (f > LOWP_E8M0)
                                continue;
                            memset(o8 + off, 0xA5, n + GUARD);
                            lowp_encode_f32_u8(&c, in + off, o8 + off, n);
                            nbad = 0;
                            first = (size_t)-1;
                            for (size_t i = 0; i < n; i++)
                                if (o8[off + i] != ref[off + i]) {
                                    if (first == (size_t)-1)
                                        first = i;
                                    nbad++;
                                }
                            for (size_t i = n; i < n + GUARD; i++)
                                if (o8[off + i] != 0xA5) {
                                    fprintf(stderr, "u8 %s %s %s %s n=%zu off=%zu: wrote past"
                                                    " the end at %zu\n",
                                            fmt_name((lowp_format)f), prof_name((lowp_profile)p),
                                            round_name((lowp_round)r), sat_name(sat), n, off, i);
                                    bad++;
                                    break;
                                }
                            if (nbad) {
                                fprintf(stderr, "u8 %s %s %s %s n=%zu off=%zu: %zu differ from"
                                                " scalar; first input 0x%08x got 0x%x scalar 0x%x\n",
                                        fmt_name((lowp_format)f), prof_name((lowp_profile)p),
                                        round_name((lowp_round)r), sat_name(sat), n, off, nbad,
                                        (unsigned)lowp_f32_bits(in[off + first]),
                                        (unsigned)o8[off + first], (unsigned)ref[off + first]);
                                bad++;
                            }
                        }
                }
        free(in);
        free(ref);
        free(o16);
        free(o8);
    }
    ASSERT_NO_MISMATCH(bad);
}
END_TEST

/* E2M1 codes live in the low nibble (format.h): no encoder sets bits above bit 3. */
START_TEST(e2m1_codes_fit_in_low_nibble)
{
    int bad = 0;
    float *in = array_inputs(LOWP_E2M1, 100000, 7);
    for (int p = 0; p < LOWP_PROFILE_COUNT; p++)
        for (int r = 0; r < LOWP_ROUND_COUNT; r++) {
            if (!doc_supported(LOWP_E2M1, (lowp_profile)p, (lowp_round)r, LOWP_SAT_DEFAULT, NULL))
                continue;
            lowp_codec c = open_codec(LOWP_E2M1, (lowp_profile)p, (lowp_round)r, LOWP_SAT_DEFAULT);
            for (size_t i = 0; i < 100000; i++) {
                if (lowp_encode_f32(&c, in[i]) > 0xF ||
                    lowp_encode_f64(&c, (double)in[i]) > 0xF) {
                    fprintf(stderr, "e2m1 %s %s: input 0x%08x code above 0xF\n",
                            prof_name((lowp_profile)p), round_name((lowp_round)r),
                            (unsigned)lowp_f32_bits(in[i]));
                    bad++;
                    break;
                }
            }
        }
    free(in);
    ASSERT_NO_MISMATCH(bad);
}
END_TEST

/* ---------------------------------------------------------------------------------- */

static Suite *format_suite(void)
{
    Suite *s = suite_create("format");
    TCase *api = tcase_create("api");
    tcase_add_test(api, format_metadata_matches_definitions);
    tcase_add_test(api, names_parse_round_trip);
    tcase_add_test(api, codec_init_refuses_missing_conversions_with_reason);
    tcase_add_test(api, support_matrix_and_default_saturation);
    suite_add_tcase(s, api);

    TCase *docs = tcase_create("documented_edges");
    tcase_add_test(docs, e2m1_special_inputs_rn_rz_s1_1);
    tcase_add_test(docs, e2m1_ml_dtypes_measured_list_s1_3);
    tcase_add_test(docs, e2m1_tie_table_rne_and_ties_away_s1_6);
    tcase_add_test(docs, e2m1_tie_neighbours_and_saturation_s8_4);
    tcase_add_test(docs, e4m3_overflow_band_and_subnormal_ties_s2);
    tcase_add_test(docs, e5m2_max_57344_tie_61440_inf_nan);
    tcase_add_test(docs, e8m0_cuda_rz_rp_torch_ml_dtypes_tables_s3);
    tcase_add_test(docs, e8m0_ocp_every_mode_down_up_nearest);
    tcase_add_test(docs, bf16_rn_ties_overflow_subnormals);
    tcase_add_test(docs, f16_rn_ties_overflow_subnormals);
    tcase_add_test(docs, bf16_f16_directed_rz_ru_rd_at_max_and_subnormals);
    tcase_add_test(docs, bf16_f16_rna_ties_away);
    tcase_add_test(docs, nan_codes_binary32_per_profile);
    tcase_add_test(docs, nan_codes_binary64_per_profile);
    tcase_add_test(docs, f64_double_rounding_torch_ml_dtypes_vs_once);
    tcase_add_test(docs, negative_zero_every_codec);
    tcase_add_test(docs, inf_input_table_every_codec);
    tcase_add_test(docs, overflow_rounded_toward_zero_gives_max);
    suite_add_tcase(s, docs);

    TCase *all = tcase_create("every_code_and_arrays");
    tcase_set_timeout(all, 600);
    tcase_add_test(all, decode_every_code_matches_bit_field_definition);
    tcase_add_test(all, encode_decode_round_trip_every_finite_code);
    tcase_add_test(all, e2m1_codes_fit_in_low_nibble);
    tcase_add_test(all, array_encoders_equal_scalar_at_vector_tails);
    suite_add_tcase(s, all);
    return s;
}

int main(void)
{
    return lowp_test_main(format_suite(), LOWP_TEST_FORK);
}
