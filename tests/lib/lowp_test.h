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
 *   lowp_test_urand, lowp_test_gauss, lowp_test_stream
 *                         the tests' random draws, all from lowp_splitmix64 (the one RNG)
 *   lowp_test_f32_bits, lowp_test_f64_bits, lowp_test_f32_from_bits, lowp_test_now
 *                         bit patterns of floats, and a monotonic clock for timings
 *
 * The test prints the seed it uses itself (with what else its first line says), so a
 * failure can be reproduced with LOWP_SEED=<that value>. */
#ifndef LOWP_TEST_H
#define LOWP_TEST_H

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "lowp/cases.h"

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

/* Uniform on [0, 1): the top 53 bits of one lowp_splitmix64 step. */
static inline double lowp_test_urand(uint64_t *s)
{
    return (double)(lowp_splitmix64(s) >> 11) * 0x1p-53;
}

/* A standard normal draw (Box-Muller from two lowp_test_urand draws, the first kept at
 * least 2^-60 so the logarithm is finite). */
static inline double lowp_test_gauss(uint64_t *s)
{
    double u = lowp_test_urand(s), v = lowp_test_urand(s);
    if (u < 0x1p-60)
        u = 0x1p-60;
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* The state of an independent stream for (a, b, c) under seed: reproducible from
 * LOWP_SEED and the three indices alone, whatever ran before. */
static inline uint64_t lowp_test_stream(uint64_t seed, uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t s = seed ^ (a * UINT64_C(0x9E3779B97F4A7C15)) ^ (b * UINT64_C(0xD1B54A32D192ED03)) ^
                 (c * UINT64_C(0x8CB92BA72F3D8DD7));
    (void)lowp_splitmix64(&s);
    return s;
}

static inline uint32_t lowp_test_f32_bits(float x)
{
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    return b;
}

static inline uint64_t lowp_test_f64_bits(double x)
{
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    return b;
}

static inline float lowp_test_f32_from_bits(uint32_t b)
{
    float x;
    memcpy(&x, &b, sizeof x);
    return x;
}

/* Seconds on CLOCK_MONOTONIC. */
static inline double lowp_test_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#endif
