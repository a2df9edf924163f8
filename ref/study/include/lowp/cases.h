/* lowp/cases.h: structured binary32 input sets for conformance (TestFloat-style).
 *
 * A case set for a format holds, in this order:
 *   1. special values: +-0, +-Inf, NaNs of both signs with several payloads
 *      (quiet, signalling, all-ones, single low bit), binary32 subnormal extremes;
 *   2. for every finite code of the format: its value and the binary32 neighbours on
 *      both sides (every boundary);
 *   3. for every pair of adjacent finite values (and max..overflow threshold, and the
 *      underflow threshold): the midpoint and its two binary32 neighbours (every tie);
 *      E8M0 uses the linear midpoint 1.5*2^e as its tie;
 *   4. for every binary32 exponent (0..254) and both signs, random mantissas;
 *   5. uniformly random bit patterns.
 * Both signs of every value in 2-3 are included. The random parts are a pure function
 * of the seed (splitmix64), so a seed reproduces a set on any machine. */
#ifndef LOWP_CASES_H
#define LOWP_CASES_H

#include <stddef.h>
#include <stdint.h>

#include "lowp/format.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LOWP_DEFAULT_SEED UINT64_C(0x6c6f7770) /* "lowp" */

/* Fill *out (malloc'd; caller frees) with the case set for format f. per_exponent random
 * mantissas per (exponent, sign) and n_random uniform patterns. Returns the count, or 0
 * on allocation failure. */
size_t lowp_cases_f32(lowp_format f, uint64_t seed, unsigned per_exponent, size_t n_random,
                      float **out);

/* splitmix64 step: the one random generator of the project's tests and tools. */
uint64_t lowp_splitmix64(uint64_t *state);

#ifdef __cplusplus
}
#endif
#endif
