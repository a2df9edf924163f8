/* tests/test_rcp_approx.c: lowp_rcp_approx_ftz, the sm_90 rcp.approx.ftz.f32 model, and
 * its embedded correction table (ref/block/data/rcp_approx_sm90.bin, format in
 * ref/block/src/rcp_approx.c).
 *
 * Expectations come from ref/notes/formats.md section 5.7 (the H200 measurement:
 * 1,108,522 mismatching mantissas, 733,799 at RN + 1 ulp and 374,723 at RN - 1 ulp; never
 * more than one ulp; exponent-invariant; 6, 448 and 2688 equal RN), from the PTX ISA's
 * table of rcp.approx.ftz special inputs (+-0 and subnormals -> +-Inf, +-Inf -> +-0,
 * subnormal results -> +-0, NaN -> canonical NaN 0x7FFFFFFF), and from exact arithmetic
 * here (RN(1/x) through binary64, see lowp_test_rcp_rn). The measured list itself
 * (ref/block/data/rcp_approx_ftz_f32_sm90_mismatch.u32.xz, its path compiled in as
 * LOWP_RCP_MISMATCH_XZ by tests/CMakeLists.txt) is read to compare every entry.
 *
 *   test_rcp_approx          quick: tables, specials, all 2^23 mantissas, samples
 *   test_rcp_approx --full   also every one of the 2^32 binary32 inputs against the rules
 */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lowp/block.h"
#include "lowp/cases.h"

/* Internal interface of ref/block/src/rcp_approx.c (same prototypes there). */
#include "rcp_table.h" /* ref/block/internal, named in tests/CMakeLists.txt */
#include "lowp_test.h"
#include "lowp_test_rcp.h" /* lowp_test_rcp_model, lowp_test_rcp_rn */

#define NMANT (UINT32_C(1) << 23)
#define WANT_ENTRIES 1108522u
#define WANT_UP 733799u
#define WANT_DOWN 374723u
#ifndef LOWP_RCP_MISMATCH_XZ
#error "LOWP_RCP_MISMATCH_XZ (path of the measured mismatch list) is set by tests/CMakeLists.txt"
#endif
#define CANON_NAN 0x7FFFFFFFu

static int g_full; /* --full: the 2^32 sweep runs */

/* ---------------------------------------------------------------------------------- */
/* helpers                                                                             */

/* sign(1/x - y) for positive normal x and y: the product of two 24-bit significands fits
 * in binary64 exactly, so 1 - x*y is exact as fma(-x, y, 1). */
static int exact_minus(float x, float y)
{
    double r = fma(-(double)x, (double)y, 1.0);
    return (r > 0) - (r < 0);
}

/* zlib's CRC-32, written here from the definition (table-driven) so the check does not
 * depend on the library's own CRC. */
static uint32_t crc32_indep(const unsigned char *p, size_t n)
{
    static uint32_t tab[256];
    if (!tab[1])
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++)
                c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            tab[i] = c;
        }
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++)
        c = tab[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Decoded embedded table (entries in the measured u32 form), shared by several tests. */
static uint32_t *decode_embedded(size_t *n)
{
    size_t len;
    const unsigned char *buf = lowp_rcp_table_embedded(&len);
    uint32_t *e = malloc(sizeof *e * NMANT);
    ck_assert_ptr_nonnull(e);
    char why[160] = "";
    int rc = lowp_rcp_table_decode(buf, len, e, NMANT, n, why, sizeof why);
    ck_assert_msg(rc == 0, "embedded table does not decode: %s", why);
    return e;
}

#define ASSERT_NO_BAD(bad, what)                                                          \
    ck_assert_msg((bad) == 0, "%llu %s (first ones on stderr)", (unsigned long long)(bad), what)

static void report(unsigned long long *bad, const char *what, uint32_t x, uint32_t got,
                   uint32_t want)
{
    if ((*bad)++ < 10)
        fprintf(stderr, "  %s: x=0x%08x got 0x%08x want 0x%08x\n", what, x, got, want);
}

/* ---------------------------------------------------------------------------------- */
/* (a) the embedded table                                                              */

START_TEST(embedded_table_header_crc_and_counts_s5_7)
{
    size_t len;
    const unsigned char *buf = lowp_rcp_table_embedded(&len);
    ck_assert_uint_ge(len, 40);
    ck_assert_msg(memcmp(buf, "LOWPRCPT", 8) == 0, "magic");
    ck_assert_uint_eq(le32(buf + 8), 1);   /* version */
    ck_assert_uint_eq(le32(buf + 12), 40); /* header bytes */
    ck_assert_uint_eq(le32(buf + 16), 23); /* mantissa bits */
    ck_assert_uint_eq(le32(buf + 20), WANT_ENTRIES);
    ck_assert_uint_eq(le32(buf + 24), WANT_UP);
    ck_assert_uint_eq(le32(buf + 28), len - 40);
    ck_assert_uint_eq(le32(buf + 32), crc32_indep(buf + 40, len - 40));
    ck_assert_uint_eq(le32(buf + 36), crc32_indep(buf, 36));
    ck_assert_msg(len <= 1300000, "table is %zu bytes, more than the 1.3 MB aimed at", len);

    size_t n;
    uint32_t *e = decode_embedded(&n);
    ck_assert_uint_eq(n, WANT_ENTRIES);
    size_t up = 0, down = 0;
    for (size_t i = 0; i < n; i++) {
        ck_assert_uint_eq(e[i] & 0x7F800000u, 0);
        if (i)
            ck_assert_uint_lt(e[i - 1] & (NMANT - 1), e[i] & (NMANT - 1));
        if (e[i] >> 31)
            up++;
        else
            down++;
    }
    ck_assert_uint_eq(up, WANT_UP);
    ck_assert_uint_eq(down, WANT_DOWN);

    /* The encoding is canonical: re-encoding the decoded entries gives the same bytes. */
    size_t need = lowp_rcp_table_encode(e, n, NULL, 0);
    ck_assert_uint_eq(need, len);
    unsigned char *again = malloc(need);
    ck_assert_ptr_nonnull(again);
    ck_assert_uint_eq(lowp_rcp_table_encode(e, n, again, need), len);
    ck_assert_msg(memcmp(again, buf, len) == 0, "re-encoded table differs");
    free(again);
    free(e);
}
END_TEST

START_TEST(decoder_rejects_damaged_tables)
{
    size_t len, n;
    const unsigned char *buf = lowp_rcp_table_embedded(&len);
    unsigned char *c = malloc(len);
    ck_assert_ptr_nonnull(c);
    char why[160];
    const size_t flips[] = {0, 8, 20, 24, 28, 32, 36, 40, 41, 1000, len / 2, len - 1};
    for (size_t i = 0; i < sizeof flips / sizeof flips[0]; i++) {
        memcpy(c, buf, len);
        c[flips[i]] ^= 0x10;
        ck_assert_msg(lowp_rcp_table_decode(c, len, NULL, 0, &n, why, sizeof why) != 0,
                      "flipped byte %zu accepted", flips[i]);
    }
    memcpy(c, buf, len);
    ck_assert_int_ne(lowp_rcp_table_decode(c, len - 1, NULL, 0, &n, why, sizeof why), 0);
    ck_assert_int_ne(lowp_rcp_table_decode(c, 39, NULL, 0, &n, why, sizeof why), 0);
    ck_assert_int_eq(lowp_rcp_table_decode(c, len, NULL, 0, &n, why, sizeof why), 0);
    ck_assert_uint_eq(n, WANT_ENTRIES);

    /* Encoder: invalid entry lists are refused; gaps of every length class round-trip. */
    const uint32_t unsorted[] = {5, 3}, dup[] = {7, 7}, expbits[] = {0x00800000u};
    ck_assert_uint_eq(lowp_rcp_table_encode(unsorted, 2, NULL, 0), 0);
    ck_assert_uint_eq(lowp_rcp_table_encode(dup, 2, NULL, 0), 0);
    ck_assert_uint_eq(lowp_rcp_table_encode(expbits, 1, NULL, 0), 0);
    const uint32_t edge[] = {0, 0x80000000u | 127, 128 + 127, 0x80000000u | (128 + 127 + 128),
                             0x80000000u | 20000, 3000000, 0x80000000u | (NMANT - 1)};
    const size_t ne = sizeof edge / sizeof edge[0];
    unsigned char f[128];
    size_t fl = lowp_rcp_table_encode(edge, ne, f, sizeof f);
    ck_assert_uint_gt(fl, 40);
    uint32_t back[16];
    ck_assert_int_eq(lowp_rcp_table_decode(f, fl, back, 16, &n, why, sizeof why), 0);
    ck_assert_uint_eq(n, ne);
    for (size_t i = 0; i < ne; i++)
        ck_assert_uint_eq(back[i], edge[i]);
    ck_assert_uint_eq(lowp_rcp_table_encode(NULL, 0, f, sizeof f), 40); /* empty table */
    ck_assert_int_eq(lowp_rcp_table_decode(f, 40, NULL, 0, &n, why, sizeof why), 0);
    ck_assert_uint_eq(n, 0);
    free(c);
}
END_TEST

/* ---------------------------------------------------------------------------------- */
/* (b) the embedded table against the measured list                                    */

START_TEST(embedded_table_equals_shared_measured_list)
{
    const char *path = LOWP_RCP_MISMATCH_XZ;
    /* The list is part of the repository: a missing file is a failure, not a skip. */
    FILE *probe = fopen(path, "rb");
    ck_assert_msg(probe != NULL, "cannot open the measured list %s", path);
    fclose(probe);
    if (system("xz --version >/dev/null 2>&1") != 0) {
        fprintf(stderr, "  skip: xz is not installed; cannot read %s\n", path);
        return;
    }
    ck_assert_msg(strchr(path, '\'') == NULL, "path with a quote: %s", path);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "xz -dc '%s'", path);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    uint32_t *m = malloc(sizeof *m * NMANT);
    ck_assert_ptr_nonnull(m);
    size_t got = 0;
    unsigned char b4[4];
    while (got < NMANT && fread(b4, 1, 4, p) == 4)
        m[got++] = le32(b4); /* the list is little-endian u32 (ref/notes/formats.md 5.7) */
    ck_assert_int_eq(pclose(p), 0);

    size_t n;
    uint32_t *e = decode_embedded(&n);
    ck_assert_uint_eq(got, n);
    unsigned long long bad = 0;
    for (size_t i = 0; i < n; i++)
        if (m[i] != e[i] && bad++ < 10)
            fprintf(stderr, "  entry %zu: shared 0x%08x embedded 0x%08x\n", i, m[i], e[i]);
    ASSERT_NO_BAD(bad, "entries differ from the shared list");
    fprintf(stderr, "  compared all %zu entries with %s\n", n, path);
    free(m);
    free(e);
}
END_TEST

/* ---------------------------------------------------------------------------------- */
/* (c) the model                                                                       */

START_TEST(every_mantissa_rn_plus_table_and_faithful)
{
    /* x = 1.m for all 2^23 m: the model is RN(1/x) moved by the table's correction; never
     * more than one ulp; a moved result is always the other faithful neighbour (the one
     * on the other side of 1/x), which is what makes +1/-1 follow from RN's direction. */
    size_t n;
    uint32_t *e = decode_embedded(&n);
    unsigned long long bad = 0, up = 0, down = 0;
    size_t k = 0;
    for (uint32_t m = 0; m < NMANT; m++) {
        uint32_t xb = 0x3F800000u | m, rn = lowp_test_rcp_rn(xb), got = lowp_test_rcp_model(xb);
        if (lowp_rcp_rn_bits(m) != rn)
            report(&bad, "integer RN differs from binary64 RN", xb, lowp_rcp_rn_bits(m), rn);
        int c = 0;
        if (k < n && (e[k] & (NMANT - 1)) == m)
            c = e[k++] >> 31 ? 1 : -1;
        if (lowp_rcp_table_correction(m) != c)
            report(&bad, "decoded lookup differs from the entry list", xb,
                   (uint32_t)lowp_rcp_table_correction(m), (uint32_t)c);
        if (got != rn + (uint32_t)c)
            report(&bad, "model != RN + table", xb, got, rn + (uint32_t)c);
        if ((got >> 23) != (rn >> 23) && m != 0)
            report(&bad, "correction left the binade", xb, got, rn);
        if (c) {
            /* > 0: RN below 1/x */
            int side_rn = exact_minus(lowp_f32_from_bits(xb), lowp_f32_from_bits(rn));
            if (side_rn != c)
                report(&bad, "moved result is not the other faithful neighbour", xb, got, rn);
            if (c > 0)
                up++;
            else
                down++;
        }
    }
    ASSERT_NO_BAD(bad, "mantissas wrong");
    ck_assert_uint_eq(up, WANT_UP);
    ck_assert_uint_eq(down, WANT_DOWN);
    free(e);
}
END_TEST

START_TEST(specials_zero_subnormal_inf_nan_s5_7)
{
    static const struct {
        uint32_t x, want;
        const char *what;
    } t[] = {
        {0x00000000u, 0x7F800000u, "+0 -> +Inf"},
        {0x80000000u, 0xFF800000u, "-0 -> -Inf"},
        {0x00000001u, 0x7F800000u, "min subnormal flushed -> +Inf"},
        {0x807FFFFFu, 0xFF800000u, "-max subnormal flushed -> -Inf"},
        {0x00400000u, 0x7F800000u, "subnormal 2^-127 -> +Inf"},
        {0x7F800000u, 0x00000000u, "+Inf -> +0"},
        {0xFF800000u, 0x80000000u, "-Inf -> -0"},
        {0x7FC00000u, CANON_NAN, "qNaN"},
        {0xFFC00000u, CANON_NAN, "-qNaN (sign dropped)"},
        {0x7F800001u, CANON_NAN, "sNaN"},
        {0xFF800001u, CANON_NAN, "-sNaN"},
        {0x7FFFFFFFu, CANON_NAN, "canonical NaN"},
        {0xFFFFFFFFu, CANON_NAN, "all ones"},
        {0x7F7FFFFFu, 0x00000000u, "FLT_MAX: 1/x subnormal -> +0"},
        {0xFF7FFFFFu, 0x80000000u, "-FLT_MAX -> -0"},
        {0x7F000000u, 0x00000000u, "2^127: 1/x = 2^-127 subnormal -> +0"},
        {0x7E800001u, 0x00000000u, "(1+2^-23)2^126: 1/x just below 2^-126 -> +0"},
        {0xFE800001u, 0x80000000u, "-(1+2^-23)2^126 -> -0"},
        {0x7E800000u, 0x00800000u, "2^126 -> 2^-126, the smallest normal"},
        {0xFE800000u, 0x80800000u, "-2^126 -> -2^-126"},
        {0x00800000u, 0x7E800000u, "2^-126 -> 2^126"},
        {0x3F800000u, 0x3F800000u, "1 -> 1"},
        {0xBF800000u, 0xBF800000u, "-1 -> -1"},
        {0x40000000u, 0x3F000000u, "2 -> 0.5"},
    };
    unsigned long long bad = 0;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        uint32_t got = lowp_test_rcp_model(t[i].x);
        if (got != t[i].want)
            report(&bad, t[i].what, t[i].x, got, t[i].want);
    }
    /* 6, 448 and 2688 (the NVFP4 recipe constants) equal RN (section 5.7), both signs. */
    const float consts[] = {6.0f, 448.0f, 2688.0f};
    for (int i = 0; i < 3; i++)
        for (int s = 0; s < 2; s++) {
            float x = s ? -consts[i] : consts[i];
            const uint32_t xb = lowp_f32_bits(x), want = lowp_test_rcp_rn(xb);
            if (lowp_test_rcp_model(xb) != want)
                report(&bad, "recipe constant != RN", xb, lowp_test_rcp_model(xb), want);
        }
    ck_assert_uint_eq(lowp_test_rcp_model(lowp_f32_bits(6.0f)), 0x3E2AAAABu); /* RN(1/6) */
    /* Every subnormal input gives Inf of its sign; every input just above the flush
     * threshold (E = 253: 1/x < 2^-126 unless m = 0) gives zero of its sign. */
    for (uint32_t m = 1; m < NMANT; m += 4099) {
        if (lowp_test_rcp_model(m) != 0x7F800000u)
            report(&bad, "subnormal -> +Inf", m, lowp_test_rcp_model(m), 0x7F800000u);
        if (lowp_test_rcp_model(0x80000000u | m) != 0xFF800000u)
            report(&bad, "-subnormal -> -Inf", 0x80000000u | m,
                   lowp_test_rcp_model(0x80000000u | m), 0xFF800000u);
        if (lowp_test_rcp_model((253u << 23) | m) != 0)
            report(&bad, "1/x below 2^-126 -> +0", (253u << 23) | m,
                   lowp_test_rcp_model((253u << 23) | m), 0);
        if (lowp_test_rcp_model(0xFF800000u | m) != CANON_NAN)
            report(&bad, "NaN", 0xFF800000u | m, lowp_test_rcp_model(0xFF800000u | m), CANON_NAN);
    }
    ASSERT_NO_BAD(bad, "special inputs wrong");
}
END_TEST

START_TEST(exponent_invariance_sample_s5_7)
{
    /* model(+-1.m * 2^(E-127)) == +-model(1.m) * 2^(127-E), or +-0 when that is below
     * 2^-126; the sample mixes random mantissas with corrected ones. */
    size_t n;
    uint32_t *e = decode_embedded(&n);
    uint64_t s = 42;
    unsigned long long bad = 0, checked = 0;
    for (int i = 0; i < 3000; i++) {
        uint32_t m = i % 2 ? (uint32_t)lowp_splitmix64(&s) & (NMANT - 1)
                           : e[lowp_splitmix64(&s) % n] & (NMANT - 1);
        uint32_t base = lowp_test_rcp_model(0x3F800000u | m);
        for (uint32_t E = 1; E <= 254; E++)
            for (uint32_t sg = 0; sg < 2; sg++) {
                uint32_t xb = sg << 31 | E << 23 | m;
                int re = (int)(base >> 23) + 127 - (int)E;
                uint32_t mag = re >= 1 ? (uint32_t)re << 23 | (base & (NMANT - 1)) : 0;
                uint32_t want = sg << 31 | mag;
                if (lowp_test_rcp_model(xb) != want)
                    report(&bad, "exponent invariance", xb, lowp_test_rcp_model(xb), want);
                checked++;
            }
    }
    ASSERT_NO_BAD(bad, "exponent-invariance violations");
    ck_assert_uint_eq(checked, 3000ull * 254 * 2);
    free(e);
}
END_TEST

/* The rules for one input, independent of the table: returns 0 when the model obeys
 * them (NaN, zero, subnormal, Inf as documented; normal: within one ulp of RN(1/x),
 * faithful, and +-0 exactly when RN(1/x) is below 2^-126). */
static int rules_ok(uint32_t xb, uint32_t got)
{
    uint32_t a = xb & 0x7FFFFFFFu, sg = xb & 0x80000000u;
    if (a > 0x7F800000u)
        return got == CANON_NAN;
    if (a == 0x7F800000u)
        return got == sg;
    if (a < 0x00800000u)
        return got == (sg | 0x7F800000u);
    uint32_t rn = lowp_test_rcp_rn(xb);
    if ((rn & 0x7FFFFFFFu) < 0x00800000u) /* subnormal (or zero) result: flushed */
        return got == sg && (rn & 0x7FFFFFFFu) != 0; /* RN is never 0 for finite x */
    int64_t d = (int64_t)(got & 0x7FFFFFFFu) - (int64_t)(rn & 0x7FFFFFFFu);
    if ((got & 0x80000000u) != sg || d < -1 || d > 1)
        return 0;
    if (d != 0) /* the other faithful neighbour: 1/|x| lies between RN and the result */
        return exact_minus(fabsf(lowp_f32_from_bits(xb)),
                           fabsf(lowp_f32_from_bits(rn))) == (int)d;
    return 1;
}

START_TEST(sweep_within_one_ulp_of_rn)
{
    /* quick: a stride through all 2^32 inputs (and every mantissa at E = 1, 126, 252,
     * 253, 254 for the overflow-free and flush edges); --full: every input. */
    const uint64_t stride = g_full ? 1 : 97;
    unsigned long long bad = 0, n = 0;
#ifdef _OPENMP
#pragma omp parallel for reduction(+ : bad, n) schedule(static, 1 << 16)
#endif
    for (int64_t i = 0; i < (int64_t)(UINT64_C(1) << 32); i += (int64_t)stride) {
        uint32_t xb = (uint32_t)i, got = lowp_test_rcp_model(xb);
        n++;
        if (!rules_ok(xb, got)) {
            if (bad < 10)
                fprintf(stderr, "  rules: x=0x%08x got 0x%08x RN 0x%08x\n", xb, got,
                        lowp_test_rcp_rn(xb));
            bad++;
        }
    }
    const uint32_t es[] = {1, 126, 252, 253, 254};
    for (int j = 0; j < 5; j++)
        for (uint32_t m = 0; m < NMANT; m++) {
            uint32_t xb = es[j] << 23 | m, got = lowp_test_rcp_model(xb);
            n++;
            if (!rules_ok(xb, got))
                report(&bad, "rules", xb, got, lowp_test_rcp_rn(xb));
        }
    fprintf(stderr, "  %llu inputs checked against the rules%s\n", n, g_full ? " (full)" : "");
    ASSERT_NO_BAD(bad, "inputs break the rules");
}
END_TEST

START_TEST(concurrent_first_use_is_consistent)
{
    /* The lookup is decoded at first use under an atomic flag; in this fresh (forked)
     * process, threads race to that first use and must all see the finished table. */
    unsigned long long bad = 0;
#ifdef _OPENMP
#pragma omp parallel for reduction(+ : bad)
#endif
    for (int t = 0; t < 64; t++) {
        uint32_t xb = 0x3F800000u | (uint32_t)(t * 131071) % NMANT;
        int c = lowp_rcp_table_correction(xb & (NMANT - 1));
        if (lowp_test_rcp_model(xb) != lowp_test_rcp_rn(xb) + (uint32_t)c)
            bad++;
    }
    ASSERT_NO_BAD(bad, "inconsistent results at first use");
}
END_TEST

/* ---------------------------------------------------------------------------------- */

static Suite *rcp_suite(void)
{
    Suite *s = suite_create("rcp_approx");
    lowp_test_tcase(s, "table", 300,
                    LOWP_TESTS(concurrent_first_use_is_consistent,
                               embedded_table_header_crc_and_counts_s5_7,
                               decoder_rejects_damaged_tables,
                               embedded_table_equals_shared_measured_list));

    lowp_test_tcase(s, "model", g_full ? 5400 : 600,
                    LOWP_TESTS(every_mantissa_rn_plus_table_and_faithful,
                               specials_zero_subnormal_inf_nan_s5_7,
                               exponent_invariance_sample_s5_7, sweep_within_one_ulp_of_rn));
    return s;
}

int main(int argc, char **argv)
{
    g_full = lowp_test_tier("test_rcp_approx", argc, argv);
    return lowp_test_main(rcp_suite(), LOWP_TEST_FORK);
}
