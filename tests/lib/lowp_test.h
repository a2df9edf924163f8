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
 *   lowp_test_tcase, LOWP_TESTS
 *                         a test case and its list of tests, in one call
 *   lowp_test_say         a failure line, at most LOWP_TEST_SAY_MAX per process
 *   lowp_test_xmalloc, lowp_test_push_f64
 *                         allocation that ends the run with one line when it fails, and a
 *                         growing array of binary64 inputs
 *   lowp_test_read_file   a whole file in memory
 *   lowp_test_json_string the string value of a key in a JSON text lowp wrote
 *   lowp_test_base.h      (included) random draws, float bit patterns, the MMA model's
 *                         input builders and a clock: what needs no Check
 *
 * The test prints the seed it uses itself (with what else its first line says), so a
 * failure can be reproduced with LOWP_SEED=<that value>. */
#ifndef LOWP_TEST_H
#define LOWP_TEST_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>

#include "lowp_test_base.h"

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

/* A test case named name holding the n tests, in this order, added to s. With timeout > 0
 * each test may run that many seconds (else Check's default: CK_DEFAULT_TIMEOUT, or 4 s).
 * Returns the test case, for loop tests added after the list. */
TCase *lowp_test_tcase(Suite *s, const char *name, double timeout, const TTest *const *tests,
                       size_t n);

/* The tests argument pair of lowp_test_tcase: LOWP_TESTS(a, b, c) for START_TEST(a) ...
 * (a block-scope compound literal, so only inside a function). */
#define LOWP_TESTS(...)                                                                         \
    (const TTest *const[]){__VA_ARGS__},                                                        \
        sizeof((const TTest *const[]){__VA_ARGS__}) / sizeof(const TTest *)

/* One report line (fmt as printf, the caller ends it with '\n'), at most LOWP_TEST_SAY_MAX
 * per process over all threads; the first line past that is "<prog>: further failures not
 * shown", the rest are dropped. The counts a test asserts on are the caller's: this only
 * keeps a run of many mismatches readable. */
#define LOWP_TEST_SAY_MAX 20
void lowp_test_say(const char *prog, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* malloc(n ? n : 1); when that fails, "out of memory (N bytes)" on stderr and exit 2 (in a
 * forked test Check reports the exit; in the runner's own process it ends the run). */
void *lowp_test_xmalloc(size_t n);

/* A growing array of binary64 values (start from {0}; free v). */
typedef struct {
    double *v;
    size_t n, cap;
} lowp_test_f64_list;

/* Append x (capacity doubles, from 4096; out of memory as lowp_test_xmalloc). */
void lowp_test_push_f64(lowp_test_f64_list *b, double x);

/* The whole file at path, NUL-terminated (it may hold NUL bytes too: *len, when len is not
 * NULL, gets the byte count), in memory the caller frees; NULL when it cannot be opened or
 * read. Out of memory as lowp_test_xmalloc. */
char *lowp_test_read_file(const char *path, size_t *len);

/* The value of the first string member "key": "..." in text[0 .. end) (end NULL: up to the
 * NUL), in the layout lowp's JSON writers use (one space after the colon, no escapes in the
 * value), starting before end: copied into out (truncated to len - 1 bytes) and returned;
 * NULL when absent. A scraper for files lowp wrote, not a JSON parser: the tools read JSON
 * through jansson. */
const char *lowp_test_json_string(const char *text, const char *end, const char *key, char *out,
                                  size_t len);

#endif
