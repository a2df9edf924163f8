/* tools/bench.h: the `lowp bench` benchmarks other than convert (cmd_bench.c), one file
 * each. Every benchmark prints ratios measured side by side in the same run. */
#ifndef LOWP_BENCH_H
#define LOWP_BENCH_H

#include <stddef.h>

int lowp_bench_quantize(int argc, char **argv);
int lowp_bench_attn(int argc, char **argv);

/* Shared helpers (cmd_bench.c). */
double lowp_bench_now(void);
void lowp_bench_set_threads(int t);
int lowp_bench_max_threads(void);
unsigned long long lowp_bench_parse_count(const char *opt, const char *s, unsigned long long lo,
                                          unsigned long long hi);
/* Median seconds of reps runs of fn(arg) after one warm-up. */
double lowp_bench_median(void (*fn)(void *), void *arg, int reps);

#endif
