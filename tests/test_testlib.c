/* tests/test_testlib.c: the shared test library (tests/lib/lowp_test.h) itself.
 *
 * LOWP_SEED's syntax is decimal or 0x hexadecimal, the whole string, below 2^64. The five
 * test mains that read it used strtoull(s, &end, 0), which reads "010" as eight, takes
 * "-1" as 2^64 - 1, " 5" as 5 and clamps 2^64 and above to 2^64 - 1 without a word; each
 * of those is refused here. */
#define _POSIX_C_SOURCE 200112L /* setenv, unsetenv */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

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

static Suite *testlib_suite(void)
{
    Suite *s = suite_create("testlib");
    TCase *tc = tcase_create("seed");
    tcase_add_test(tc, seed_accepts_decimal_and_hex);
    tcase_add_test(tc, seed_refuses_the_rest);
    tcase_add_test(tc, seed_from_the_environment);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    (void)lowp_test_tier("test_testlib", argc, argv);
    /* no fork: seed_from_the_environment's setenv stays in this process either way */
    return lowp_test_main(testlib_suite(), LOWP_TEST_NOFORK);
}
