/* tests/lib/lowp_test.h: what every Check suite of lowp shares (static library lowp_test,
 * linked by lowp_check_test in tests/CMakeLists.txt).
 *
 *   lowp_test_seed_parse  LOWP_SEED's number syntax: decimal, or 0x/0X hexadecimal,
 *                         the whole string, 0 .. 2^64 - 1; no sign, no spaces, no octal
 *   lowp_test_seed        the seed of a run: LOWP_SEED when set (and not empty), else the
 *                         test's default; a bad LOWP_SEED is one line on stderr and exit 2
 *   lowp_test_tier        the tier flag: no argument (quick) or --full; anything else is a
 *                         usage line on stderr and exit 2
 *   lowp_test_run         run a suite, return how many tests failed
 *   lowp_test_main        run a suite, return the process exit status
 *
 * The test prints the seed it uses itself (with what else its first line says), so a
 * failure can be reproduced with LOWP_SEED=<that value>. */
#ifndef LOWP_TEST_H
#define LOWP_TEST_H

#include <check.h>
#include <stdint.h>

/* Parse s as a seed. Returns 0 and sets *out, or -1 (and leaves *out alone) when s is
 * NULL, empty, has a sign, a space or any other character outside the number, or the
 * value does not fit 64 bits. "010" is ten, not eight. */
int lowp_test_seed_parse(const char *s, uint64_t *out);

/* LOWP_SEED if set and not empty, else dflt. prog names the test in the error line. */
uint64_t lowp_test_seed(const char *prog, uint64_t dflt);

/* 1 for --full, 0 for no argument; exits 2 with "usage: PROG [--full]" otherwise. */
int lowp_test_tier(const char *prog, int argc, char **argv);

/* How lowp_test_run runs the tests: in the runner's default mode (forked, unless the
 * CK_FORK environment variable says otherwise) or in this process (the totals some tests
 * keep live in this process; the tests are pure computations). */
#define LOWP_TEST_FORK 0
#define LOWP_TEST_NOFORK 1

/* Run every test of s (srunner_run_all, CK_NORMAL output) and free the runner (which owns
 * s). Returns the number of tests that failed; *ran (may be NULL) gets the number run. */
int lowp_test_run(Suite *s, int mode, int *ran);

/* lowp_test_run, then EXIT_SUCCESS when nothing failed, else EXIT_FAILURE. */
int lowp_test_main(Suite *s, int mode);

#endif
