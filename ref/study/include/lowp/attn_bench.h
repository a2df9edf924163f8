/* lowp/attn_bench.h: the CPU paged-decode benchmark (`lowp bench attn`). Study code
 * (ref/study): it measures lowp_attn_paged_decode (lowp/attn_paged.h), which it builds on.
 */
#ifndef LOWP_ATTN_BENCH_H
#define LOWP_ATTN_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "lowp/attn_paged.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Benchmark (called by `lowp bench attn`) ------------------------------------------
 * Builds a cache of batch sequences of ctx tokens (pages assigned in order, page_size
 * slots each) and fills its code and scale bytes with seeded random, finite values (no
 * quantizer run: the bytes are what a decode reads), draws Gaussian queries, then times
 * lowp_attn_paged_decode: one warm-up, then the median of reps runs. A (token, KV head)
 * pair is one K row and one V row read and used by the group's query heads. Beside it, the
 * same way, a plain read of the whole pool, so bytes_per_s / read_bytes_per_s says how far
 * the decode is from streaming the cache. */
typedef struct lowp_attn_bench_decode_opts {
    lowp_block_format format;
    size_t batch, ctx, num_kv_heads, group, head_dim, page_size;
    int threads; /* 0: OpenMP default */
    int reps;
    uint64_t seed;
} lowp_attn_bench_decode_opts;

typedef struct lowp_attn_bench_decode_result {
    double seconds;      /* median wall time of one decode call */
    double pairs_per_s;  /* batch * ctx * num_kv_heads / seconds */
    double cache_bytes;  /* K and V code and scale bytes one call reads */
    double bytes_per_s;  /* cache_bytes / seconds */
    double read_bytes_per_s; /* the peer, measured in the same run with the same threads:
                                reading the whole cache pool (codes and scales) once */
    double cpu_seconds;  /* CPU time of one call, all threads (mean over reps) */
    double pairs_per_cpu_s; /* pairs / cpu_seconds: the rate of one busy core */
    double checksum;     /* sum of all outputs (identical for every thread count) */
    int threads;         /* threads used */
} lowp_attn_bench_decode_result;

/* NVFP4, batch 1, ctx 131072, 8 KV heads, group 4, head dim 128, page size 16, threads 0,
 * reps 5, LOWP_DEFAULT_SEED (the benchmark). */
lowp_attn_bench_decode_opts lowp_attn_bench_decode_defaults(void);
int lowp_attn_bench_decode(const lowp_attn_bench_decode_opts *o, lowp_attn_bench_decode_result *r,
                           char *why, size_t why_len);

#ifdef __cplusplus
}
#endif
#endif /* LOWP_ATTN_BENCH_H */
