/* tests/test_testlib.c: the shared test library (tests/lib/lowp_test.h) itself.
 *
 * LOWP_SEED's syntax is decimal or 0x hexadecimal, the whole string, below 2^64. The five
 * test mains that read it used strtoull(s, &end, 0), which reads "010" as eight, takes
 * "-1" as 2^64 - 1, " 5" as 5 and clamps 2^64 and above to 2^64 - 1 without a word; each
 * of those is refused here.
 *
 * The input builders (lowp_test_bf16_make, lowp_test_f32_make) against their definition
 * computed in binary64 with ldexp and floor; the draws stay in their ranges and reach both
 * ends; lowp_test_say stops at LOWP_TEST_SAY_MAX lines plus one note; lowp_test_push_f64
 * keeps every value; lowp_test_json_string finds a key's string, and only before end;
 * lowp_test_tcase adds every listed test (main checks the count run). */
#define _POSIX_C_SOURCE 200112L /* setenv, unsetenv, fileno */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "lowp_test.h"

START_TEST(seed_accepts_decimal_and_hex)
{
    static const struct {
        const char *s;
        uint64_t v;
    } ok[] = {
        {"0", 0},
        {"1", 1},
        {"010", 10}, /* decimal, not octal */
        {"12345678901234567890", UINT64_C(12345678901234567890)},
        {"18446744073709551615", UINT64_MAX},
        {"0x0", 0},
        {"0x10", 16},
        {"0X1f", 31},
        {"0xFFFFFFFFFFFFFFFF", UINT64_MAX},
        {"0x00000000000000000001", 1}, /* leading zeros do not count towards 64 bits */
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        uint64_t v = 12345;
        ck_assert_msg(lowp_test_seed_parse(ok[i].s, &v) == 0, "\"%s\" refused", ok[i].s);
        ck_assert_msg(v == ok[i].v, "\"%s\" read as %llu", ok[i].s, (unsigned long long)v);
    }
}
END_TEST

START_TEST(seed_refuses_the_rest)
{
    static const char *const bad[] = {
        "", "-1", "+1", " 5", "5 ", "5x", "abc", "0x", "0x-1", "1e3", "0b101", "0o17",
        "18446744073709551616", /* 2^64 */
        "99999999999999999999", "0x10000000000000000", "0xg",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t v = 12345;
        ck_assert_msg(lowp_test_seed_parse(bad[i], &v) == -1, "\"%s\" accepted as %llu",
                      bad[i], (unsigned long long)v);
        ck_assert_msg(v == 12345, "\"%s\" refused but *out was written", bad[i]);
    }
    ck_assert(lowp_test_seed_parse(NULL, NULL) == -1);
}
END_TEST

START_TEST(seed_from_the_environment)
{
    unsetenv("LOWP_SEED");
    ck_assert(lowp_test_seed("testlib", 77) == 77);
    setenv("LOWP_SEED", "", 1);
    ck_assert(lowp_test_seed("testlib", 77) == 77); /* empty: the default */
    setenv("LOWP_SEED", "0x2a", 1);
    ck_assert(lowp_test_seed("testlib", 77) == 42);
    setenv("LOWP_SEED", "010", 1);
    ck_assert(lowp_test_seed("testlib", 77) == 10);
    unsetenv("LOWP_SEED");
}
END_TEST

/* (-1)^neg (1 + f/2^m) 2^e with f's low m bits, e clamped to 127, cut to a multiple of
 * 2^(-126 - m) below 2^-126: the builders' definition, in binary64 (exact for m <= 23). */
static double made_value(int neg, int e, uint32_t f, int m)
{
    f &= (UINT32_C(1) << m) - 1;
    if (e > 127)
        e = 127;
    double v = ldexp(1.0 + ldexp((double)f, -m), e);
    if (e < -126)
        v = ldexp(floor(ldexp(v, 126 + m)), -126 - m);
    return neg ? -v : v;
}

START_TEST(builders_match_their_definition)
{
    static const uint32_t fr[] = {0, 1, 0x3F, 0x40, 0x7F, 0x80, 0x12345, 0x7FFFFF, 0xFFFFFFFFu};
    long n = 0;
    for (int neg = 0; neg < 2; neg++)
        for (int e = -160; e <= 140; e++)
            for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) {
                const double wb = made_value(neg, e, fr[i], 7), wf = made_value(neg, e, fr[i], 23);
                const float gb = lowp_test_bf16_value(lowp_test_bf16_make(neg, e, fr[i]));
                const float gf = lowp_f32_from_bits(lowp_test_f32_make(neg, e, fr[i]));
                ck_assert_msg((double)gb == wb && !!signbit(gb) == (neg != 0),
                              "bf16_make(%d, %d, 0x%x) = %a, want %a", neg, e, (unsigned)fr[i],
                              (double)gb, wb);
                ck_assert_msg((double)gf == wf && !!signbit(gf) == (neg != 0),
                              "f32_make(%d, %d, 0x%x) = %a, want %a", neg, e, (unsigned)fr[i],
                              (double)gf, wf);
                n++;
            }
    ck_assert_int_eq(n, 2 * 301 * 9);
    ck_assert_uint_eq(lowp_f32_bits(-0.0f), 0x80000000u);
    ck_assert(lowp_f64_from_bits(lowp_f64_bits(-1.5)) == -1.5);
}
END_TEST

START_TEST(draws_stay_in_range_and_reach_both_ends)
{
    uint64_t s = 12345;
    int lo_seen = 0, hi_seen = 0;
    for (int i = 0; i < 4000; i++) {
        const int r = lowp_test_irange(&s, -3, 4);
        ck_assert(r >= -3 && r <= 4);
        lo_seen |= r == -3;
        hi_seen |= r == 4;
        const float b = lowp_test_bf16_value(lowp_test_bf16_draw(&s, -5, 5));
        const float f = lowp_f32_from_bits(lowp_test_f32_draw(&s, -5, 5));
        ck_assert(fabsf(b) >= 0x1p-5f && fabsf(b) < 0x1p6f);
        ck_assert(fabsf(f) >= 0x1p-5f && fabsf(f) < 0x1p6f);
        const double u = lowp_test_urand(&s);
        ck_assert(u >= 0.0 && u < 1.0);
    }
    ck_assert(lo_seen && hi_seen);
    /* the stream of (a, b, 0) is the two-index stream test_mma and the probe used */
    uint64_t t = 7 ^ (2 * UINT64_C(0x9E3779B97F4A7C15)) ^ (3 * UINT64_C(0xD1B54A32D192ED03));
    (void)lowp_splitmix64(&t);
    ck_assert_uint_eq(lowp_test_stream(7, 2, 3, 0), t);
}
END_TEST

START_TEST(say_stops_after_its_limit)
{
    fflush(stdout);
    FILE *cap = tmpfile();
    ck_assert_ptr_nonnull(cap);
    const int saved = dup(STDOUT_FILENO);
    ck_assert(saved >= 0 && dup2(fileno(cap), STDOUT_FILENO) >= 0);
    for (int i = 0; i < LOWP_TEST_SAY_MAX + 5; i++)
        lowp_test_say("testlib", "line %d\n", i);
    fflush(stdout);
    ck_assert(dup2(saved, STDOUT_FILENO) >= 0);
    close(saved);
    rewind(cap);
    char buf[128];
    int lines = 0, note = 0;
    while (fgets(buf, sizeof buf, cap) != NULL) {
        lines++;
        note += strcmp(buf, "testlib: further failures not shown\n") == 0;
    }
    fclose(cap);
    ck_assert_int_eq(lines, LOWP_TEST_SAY_MAX + 1);
    ck_assert_int_eq(note, 1);
}
END_TEST

START_TEST(f64_list_keeps_every_value)
{
    lowp_test_f64_list b = {0};
    for (int i = 0; i < 10000; i++)
        lowp_test_push_f64(&b, 0.5 * i);
    ck_assert_uint_eq(b.n, 10000);
    for (int i = 0; i < 10000; i++)
        ck_assert(b.v[i] == 0.5 * i);
    free(b.v);
}
END_TEST

START_TEST(json_string_scrapes_a_key)
{
    const char *t = "{\n  \"seed\": \"0x6c6f7770\",\n  \"lowpCommit\": \"abc\", \"n\": 3}";
    char out[16];
    ck_assert_str_eq(lowp_test_json_string(t, NULL, "seed", out, sizeof out), "0x6c6f7770");
    ck_assert_str_eq(lowp_test_json_string(t, NULL, "lowpCommit", out, sizeof out), "abc");
    ck_assert_ptr_null(lowp_test_json_string(t, NULL, "n", out, sizeof out)); /* not a string */
    ck_assert_ptr_null(lowp_test_json_string(t, strstr(t, "\"lowp"), "lowpCommit", out, 4));
    ck_assert_str_eq(lowp_test_json_string(t, NULL, "seed", out, 4), "0x6"); /* truncated */
}
END_TEST

static Suite *testlib_suite(void)
{
    Suite *s = suite_create("testlib");
    lowp_test_tcase(s, "seed", 0,
                    LOWP_TESTS(seed_accepts_decimal_and_hex, seed_refuses_the_rest,
                               seed_from_the_environment));
    lowp_test_tcase(s, "helpers", 0,
                    LOWP_TESTS(builders_match_their_definition,
                               draws_stay_in_range_and_reach_both_ends, say_stops_after_its_limit,
                               f64_list_keeps_every_value, json_string_scrapes_a_key));
    return s;
}

int main(int argc, char **argv)
{
    (void)lowp_test_tier("test_testlib", argc, argv);
    /* no fork: seed_from_the_environment's setenv stays in this process either way */
    int ran = 0;
    const int failed = lowp_test_run(testlib_suite(), LOWP_TEST_NOFORK, &ran);
    if (ran != 8) /* every test lowp_test_tcase was given */
        fprintf(stderr, "test_testlib: %d tests ran, 8 were listed\n", ran);
    return failed == 0 && ran == 8 ? EXIT_SUCCESS : EXIT_FAILURE;
}
