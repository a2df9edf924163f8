/* ref/study/src/attn_bench.c: the CPU decode benchmark behind `lowp bench attn`
 * (lowp/attn_bench.h). Study code: it times lowp_attn_paged_decode (ref/attn) and is not
 * part of the attention layer itself.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lowp/attn_bench.h"
#include "lowp/cases.h"
#include "lowp/format.h"
#include "lowp/why.h"


lowp_attn_bench_decode_opts lowp_attn_bench_decode_defaults(void)
{
    lowp_attn_bench_decode_opts o = {LOWP_NVFP4, 1, 131072, 8, 4, 128, 16, 0, 5, LOWP_DEFAULT_SEED};
    return o;
}

/* A random finite code byte of the element format, magnitudes below 2 for 8-bit ones. */
static uint8_t rand_code(lowp_block_format f, uint64_t *st)
{
    uint8_t b = (uint8_t)lowp_splitmix64(st);
    if (f == LOWP_MXFP8 || f == LOWP_FP8_E4M3 || f == LOWP_FP8_E5M2)
        b &= 0xBF; /* top exponent bit clear: no NaN/Inf, |x| < 2 */
    return b;
}

static uint8_t rand_scale(lowp_block_format f, uint64_t *st)
{
    uint64_t x = lowp_splitmix64(st) % 9;
    return f == LOWP_NVFP4 ? (uint8_t)(0x28 + 4 * x) /* E4M3 2^-2 .. 2^2 */
                           : (uint8_t)(123 + x);     /* E8M0 2^-4 .. 2^4 */
}

static double now_s(void)
{
    return omp_get_wtime();
}

/* CPU seconds of the whole process (all threads), for a rate that a loaded machine does
 * not distort: pairs per CPU-second is what one core does when it runs. */
static double cpu_s(void)
{
#if defined(CLOCK_PROCESS_CPUTIME_ID)
    struct timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) == 0)
        return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
#endif
    return (double)clock() / CLOCKS_PER_SEC;
}

static volatile uint64_t read_sink;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int lowp_attn_bench_decode(const lowp_attn_bench_decode_opts *o, lowp_attn_bench_decode_result *r,
                           char *why, size_t why_len)
{
    if (o == NULL || r == NULL)
        return lowp_why_set(why, why_len, "options and result must not be NULL");
    if (o->batch == 0 || o->ctx == 0 || o->num_kv_heads == 0 || o->group == 0 ||
        o->head_dim == 0 || o->page_size == 0 || o->reps < 1 || o->threads < 0)
        return lowp_why_set(why, why_len, "benchmark sizes, reps must be positive");
    if (o->ctx > (size_t)INT32_MAX / 2 || o->batch > 4096)
        return lowp_why_set(why, why_len, "ctx or batch too large for a benchmark");
    const size_t P = o->page_size, ppseq = (o->ctx + P - 1) / P, NP = ppseq * o->batch;
    if (NP > (size_t)INT32_MAX)
        return lowp_why_set(why, why_len, "%zu pages do not fit an int32 page table", NP);
    lowp_kv_config cfg = lowp_kv_config_default(o->format, NP, P, o->num_kv_heads, o->head_dim,
                                                o->head_dim);
    lowp_kvcache *c = NULL;
    int32_t *indptr = NULL, *indices = NULL, *last = NULL;
    double *q = NULL, *out = NULL, *times = NULL;
    int rc = -1;
    if (lowp_kv_config_check(&cfg, why, why_len) || lowp_kvcache_create(&cfg, &c, why, why_len))
        goto done;
    uint64_t st = o->seed;
    for (int w = 0; w < 2; w++) {
        size_t bytes = 0;
        uint8_t *buf = lowp_kvcache_buffer(c, (lowp_kv_which)w, LOWP_KV_CODES, &bytes);
        if (o->format == LOWP_BF16_PASS) {
            for (size_t i = 0; i + 1 < bytes; i += 2) {
                uint64_t x = lowp_splitmix64(&st);
                uint16_t bits =
                    (uint16_t)(((x >> 8) & 1) << 15 | (120 + x % 9) << 7 | ((x >> 16) & 0x7F));
                buf[i] = (uint8_t)bits;
                buf[i + 1] = (uint8_t)(bits >> 8);
            }
        } else {
            for (size_t i = 0; i < bytes; i++)
                buf[i] = rand_code(o->format, &st);
        }
        if (lowp_kv_row_scales(&cfg, (lowp_kv_which)w)) {
            buf = lowp_kvcache_buffer(c, (lowp_kv_which)w, LOWP_KV_SCALES, &bytes);
            for (size_t i = 0; i < bytes; i++)
                buf[i] = rand_scale(o->format, &st);
        }
    }
    indptr = malloc((o->batch + 1) * sizeof *indptr);
    indices = malloc(NP * sizeof *indices);
    last = malloc(o->batch * sizeof *last);
    const size_t nq = o->num_kv_heads * o->group;
    q = malloc(o->batch * nq * o->head_dim * sizeof *q);
    out = malloc(o->batch * nq * o->head_dim * sizeof *out);
    times = malloc((size_t)o->reps * sizeof *times);
    if (!indptr || !indices || !last || !q || !out || !times) {
        lowp_why_set(why, why_len, "out of memory for the benchmark");
        goto done;
    }
    for (size_t b = 0; b <= o->batch; b++)
        indptr[b] = (int32_t)(b * ppseq);
    for (size_t i = 0; i < NP; i++)
        indices[i] = (int32_t)i;
    for (size_t b = 0; b < o->batch; b++)
        last[b] = (int32_t)(o->ctx - (ppseq - 1) * P);
    for (size_t i = 0; i < o->batch * nq * o->head_dim; i++) {
        double u1 = ((double)(lowp_splitmix64(&st) >> 11) + 0.5) * 0x1p-53;
        double u2 = (double)(lowp_splitmix64(&st) >> 11) * 0x1p-53;
        q[i] = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
    }
    lowp_kv_page_table pt = {o->batch, indptr, indices, last};
    lowp_kv_view view = lowp_kvcache_view(c);
    lowp_attn_paged_args a = {c, &view, &pt, nq, 0.0, q, o->threads};
    if (lowp_attn_paged_decode(&a, out, NULL, why, why_len)) /* warm-up */
        goto done;
    double c0 = cpu_s();
    for (int i = 0; i < o->reps; i++) {
        double t0 = now_s();
        if (lowp_attn_paged_decode(&a, out, NULL, why, why_len))
            goto done;
        times[i] = now_s() - t0;
    }
    double cpu = (cpu_s() - c0) / o->reps;
    qsort(times, (size_t)o->reps, sizeof *times, cmp_double);
    const double decode_s = times[o->reps / 2];
    /* the peer: reading every code and scale byte of the cache once, same threads */
    {
        const uint8_t *bufs[4];
        size_t lens[4], nb = 0;
        for (int w = 0; w < 2; w++)
            for (int part = 0; part < 2; part++) {
                size_t bytes = 0;
                if (part == 1 && !lowp_kv_row_scales(&cfg, (lowp_kv_which)w))
                    continue;
                bufs[nb] = lowp_kvcache_buffer(c, (lowp_kv_which)w, (lowp_kv_part)part, &bytes);
                lens[nb++] = bytes;
            }
        int nt = o->threads > 0 ? o->threads : omp_get_max_threads();
        for (int i = 0; i <= o->reps; i++) {
            double t0 = now_s();
            uint64_t acc = 0;
            for (size_t bi = 0; bi < nb; bi++) {
                const size_t words = lens[bi] / 8;
                const uint8_t *bp = bufs[bi];
#pragma omp parallel for num_threads(nt) schedule(static) reduction(+ : acc)
                for (long x = 0; x < (long)words; x++) {
                    uint64_t wv;
                    memcpy(&wv, bp + (size_t)x * 8, 8);
                    acc += wv;
                }
            }
            double dt = now_s() - t0;
            if (i > 0) /* the first pass is the warm-up */
                times[i - 1] = dt;
            read_sink = acc; /* keeps the read */
        }
        qsort(times, (size_t)o->reps, sizeof *times, cmp_double);
        double all = 0;
        for (size_t bi = 0; bi < nb; bi++)
            all += (double)lens[bi];
        r->read_bytes_per_s = all / times[o->reps / 2];
    }

    double sum = 0.0;
    for (size_t i = 0; i < o->batch * nq * o->head_dim; i++)
        sum += out[i];
    const double pairs = (double)o->batch * (double)o->ctx * (double)o->num_kv_heads;
    const double row_bytes = (double)(lowp_kv_row_code_bytes(&cfg, LOWP_KV_K) +
                                      lowp_kv_row_code_bytes(&cfg, LOWP_KV_V) +
                                      lowp_kv_row_scales(&cfg, LOWP_KV_K) +
                                      lowp_kv_row_scales(&cfg, LOWP_KV_V));
    r->seconds = decode_s;
    r->pairs_per_s = pairs / r->seconds;
    r->cache_bytes = pairs * row_bytes;
    r->bytes_per_s = r->cache_bytes / r->seconds;
    r->checksum = sum;
    r->cpu_seconds = cpu;
    r->pairs_per_cpu_s = pairs / cpu;
    r->threads = o->threads > 0 ? o->threads : omp_get_max_threads();
    rc = 0;
done:
    lowp_kvcache_destroy(c);
    free(indptr);
    free(indices);
    free(last);
    free(q);
    free(out);
    free(times);
    return rc;
}
