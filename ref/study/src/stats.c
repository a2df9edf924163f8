/* ref/study/src/stats.c: error statistics (see lowp/stats.h for every definition).
 *
 * Reduction discipline: the element range is cut into fixed chunks of LOWP_STATS_CHUNK
 * elements; each chunk is reduced sequentially (Neumaier-compensated sums, maxima,
 * counts) into its own slot, and the slots are combined in chunk order on one thread.
 * Nothing depends on which thread reduced which chunk, so the bytes of the result are
 * the same for every OpenMP thread count. */
#include "lowp/bits.h"
#include "lowp/stats.h"

#include "lowp/why.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------- */
/* compensated sums                                                                    */

/* Neumaier's variant of Kahan summation: the rounding error of every addition is kept in
 * c, whatever the relative sizes of the running sum and the term. |error| <= 2u|S| +
 * O(n u^2) sum |x_i| (u = 2^-53). Needs strict IEEE evaluation (no reassociation: the
 * library is built without -ffast-math, and ISO C11 mode does not contract). */
typedef struct {
    double s, c;
} ksum;

static inline void kadd(ksum *k, double x)
{
    double t = k->s + x;
    if (fabs(k->s) >= fabs(x))
        k->c += (k->s - t) + x;
    else
        k->c += (x - t) + k->s;
    k->s = t;
}

static inline double kval(ksum k)
{
    return k.s + k.c;
}

/* Below this many elements one thread does the work: a parallel region costs more than
 * it saves (and spinning threads hurt on a loaded machine). The chunking, and so the
 * result, is the same either way. */
#define LOWP_STATS_PARALLEL_MIN ((size_t)1 << 17)

static inline double load(const void *p, lowp_stats_type t, size_t i)
{
    return t == LOWP_STATS_F32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}

/* 1 / ulp_bf16(r), where ulp_bf16(r) = 2^(max(floor(log2|r|), -126) - 7) is the bf16
 * spacing in r's binade (2^-133 for r = 0 and the bf16 subnormals). Read from the
 * binary64 exponent field: floor(log2|r|) = field - 1023 for normal r; zero and
 * binary64 subnormals lie far below 2^-126 and take the clamp. The result is a power of
 * two between 2^-1016 and 2^133, so multiplying by it is exact. */
static inline double inv_ulp_bf16(double r)
{
    uint64_t b = lowp_f64_bits(r);
    int e = (int)((b >> 52) & 0x7ff) - 1023;
    if (e < -126)
        e = -126;
    return lowp_f64_from_bits((uint64_t)(7 - e + 1023) << 52);
}

/* ---------------------------------------------------------------------------------- */
/* exact decode                                                                        */

static lowp_format scale_format_of(lowp_block_format f)
{
    return f == LOWP_NVFP4 ? LOWP_E4M3 : LOWP_E8M0;
}

/* Exact decode tables. Element value x scale value x g is exact in binary64 (block.h),
 * so a table lookup gives the bits lowp_block_dequantize_f64 gives (it forms the same
 * product in the same order), only without a decode call per element. */
typedef struct {
    lowp_block_format f;
    size_t bs;
    int wide;          /* 16-bit element codes (BF16) */
    int nibbles;       /* 4-bit codes, two per byte, element 2i in the low nibble */
    double g;
    double etab[256];  /* element values (4/8-bit codes) */
    double stab[256];  /* scale values; 1.0 for formats without scales */
} dq_tables;

static void dq_init(dq_tables *t, lowp_block_format f, float global_scale)
{
    lowp_format ef = lowp_block_element_format(f);
    t->f = f;
    t->bs = lowp_block_size(f);
    t->wide = lowp_format_bits(ef) == 16;
    t->nibbles = lowp_format_bits(ef) == 4;
    t->g = lowp_block_has_global_scale(f) ? (double)global_scale : 1.0;
    unsigned nc = t->wide ? 0 : lowp_format_code_count(ef);
    for (unsigned c = 0; c < 256; c++) {
        t->etab[c] = c < nc ? lowp_decode_f64(ef, (uint16_t)c) : 0.0;
        t->stab[c] = lowp_block_has_scales(f) ? lowp_decode_f64(scale_format_of(f), (uint16_t)c) : 1.0;
    }
}

/* Element i of the reconstruction (i indexes the codes/scales arrays given). */
static inline double dq_at(const dq_tables *t, const uint8_t *codes, const uint8_t *scales, size_t i)
{
    if (t->wide) {
        /* BF16: the code is the top half of its binary32 value (exact; NaN stays NaN) */
        float v = lowp_f32_from_bf16((uint16_t)(codes[2 * i] | (codes[2 * i + 1] << 8)));
        return (double)v * 1.0 * t->g;
    }
    unsigned c = t->nibbles ? (codes[i / 2] >> (4 * (i & 1))) & 0xfu : codes[i];
    double s = t->bs > 1 ? t->stab[scales[i / t->bs]] : 1.0;
    return t->etab[c] * s * t->g;
}

/* ---------------------------------------------------------------------------------- */
/* element statistics                                                                  */

typedef struct {
    ksum err2, ref2, rec2, dot, ulp;
    double max_abs, ulp_max;
    size_t compared, nan_ref, nan_rec, inf_equal, inf_other;
} chunk_acc;

/* Per-block sums gathered during the chunk pass (when the block is a multiple of the
 * group and divides the chunk): plain sums of the blocks' group sums. */
typedef struct {
    double *se, *sr;
    size_t *used;
    size_t block; /* 0: not fused */
} block_acc;

/* One chunk: groups of LOWP_STATS_GROUP consecutive pairs are summed plainly in order
 * (error <= (G-1) u of the group's sum of absolute terms), the group sums are added
 * Neumaier-compensated. lowp_stats_quant_sse forms sum_err2 the same way. One copy per
 * (ref type, rec type), so the element loop has no type test. */
#define DEFINE_REDUCE(NAME, RT, QT)                                                               \
    static void NAME(const void *refv, const void *recv, size_t rec_lo, size_t lo, size_t hi,    \
                     chunk_acc *a, const block_acc *ba)                                           \
    {                                                                                             \
        const RT *ref = refv;                                                                     \
        const QT *rec = recv; /* element i is rec[i - rec_lo] */                                  \
        memset(a, 0, sizeof *a);                                                                  \
        double max_abs = 0, ulp_max = 0; /* locals: no store per element */                       \
        for (size_t g = lo; g < hi; g += LOWP_STATS_GROUP) {                                      \
            size_t ge = hi - g < LOWP_STATS_GROUP ? hi : g + LOWP_STATS_GROUP, used = 0;          \
            double se = 0, sr = 0, sq = 0, sd = 0, su = 0;                                        \
            for (size_t i = g; i < ge; i++) {                                                     \
                double r = (double)ref[i], q = (double)rec[i - rec_lo];                           \
                if (!isfinite(r) || !isfinite(q)) {                                               \
                    if (isnan(r))                                                                 \
                        a->nan_ref++;                                                             \
                    else if (isnan(q))                                                            \
                        a->nan_rec++;                                                             \
                    else if (r == q)                                                              \
                        a->inf_equal++;                                                           \
                    else                                                                          \
                        a->inf_other++;                                                           \
                    continue;                                                                     \
                }                                                                                 \
                double e = q - r, ae = fabs(e);                                                   \
                double u = ae * inv_ulp_bf16(r); /* exact: a power of two */                      \
                used++;                                                                           \
                se += e * e;                                                                      \
                sr += r * r;                                                                      \
                sq += q * q;                                                                      \
                sd += r * q;                                                                      \
                su += u;                                                                          \
                max_abs = ae > max_abs ? ae : max_abs;                                            \
                ulp_max = u > ulp_max ? u : ulp_max;                                              \
            }                                                                                     \
            a->compared += used;                                                                  \
            kadd(&a->err2, se);                                                                   \
            kadd(&a->ref2, sr);                                                                   \
            kadd(&a->rec2, sq);                                                                   \
            kadd(&a->dot, sd);                                                                    \
            kadd(&a->ulp, su);                                                                    \
            if (ba->block != 0) {                                                                 \
                size_t b = g / ba->block;                                                         \
                if (g % ba->block == 0) {                                                         \
                    ba->se[b] = se;                                                               \
                    ba->sr[b] = sr;                                                               \
                    ba->used[b] = used;                                                           \
                } else {                                                                          \
                    ba->se[b] += se;                                                              \
                    ba->sr[b] += sr;                                                              \
                    ba->used[b] += used;                                                          \
                }                                                                                 \
            }                                                                                     \
        }                                                                                         \
        a->max_abs = max_abs;                                                                     \
        a->ulp_max = ulp_max;                                                                     \
    }

DEFINE_REDUCE(reduce_ff, float, float)
DEFINE_REDUCE(reduce_fd, float, double)
DEFINE_REDUCE(reduce_df, double, float)
DEFINE_REDUCE(reduce_dd, double, double)

/* Sort non-negative doubles (+Inf allowed, no NaN): their bit patterns order like their
 * values, so an LSD radix sort on the 64-bit patterns (four 16-bit digits) sorts them. */
static int sort_nonneg(double *v, size_t m)
{
    uint64_t *a = malloc(m * sizeof *a), *b = malloc(m * sizeof *b);
    size_t *cnt = malloc(65536 * sizeof *cnt);
    if (a == NULL || b == NULL || cnt == NULL) {
        free(a);
        free(b);
        free(cnt);
        return -1;
    }
    memcpy(a, v, m * sizeof *a);
    for (int pass = 0; pass < 4; pass++) {
        int sh = 16 * pass;
        memset(cnt, 0, 65536 * sizeof *cnt);
        for (size_t i = 0; i < m; i++)
            cnt[(a[i] >> sh) & 0xffff]++;
        size_t sum = 0;
        for (size_t d = 0; d < 65536; d++) {
            size_t c = cnt[d];
            cnt[d] = sum;
            sum += c;
        }
        for (size_t i = 0; i < m; i++)
            b[cnt[(a[i] >> sh) & 0xffff]++] = a[i];
        uint64_t *t = a;
        a = b;
        b = t;
    }
    memcpy(v, a, m * sizeof *v);
    free(a);
    free(b);
    free(cnt);
    return 0;
}

/* Nearest rank: the ceil(num m / den)-th smallest, in integers so that no binary
 * rounding of num/den moves the rank. */
static double quantile(const double *sorted, size_t m, size_t num, size_t den)
{
    size_t rank = (num * m + den - 1) / den;
    if (rank == 0)
        rank = 1;
    return sorted[rank - 1];
}

/* The reconstruction of view q, elements lo..hi-1 of the whole, into out[0 .. hi-lo). */
static void dq_fill(const dq_tables *tabs, const lowp_stats_quant_view *q, size_t lo, size_t hi, double *out)
{
    const size_t P = q->parts, w = q->width;
    for (size_t i = lo; i < hi;) {
        size_t p = (i / w) % P, c = i % w, base = i / (P * w) * w + c;
        size_t run = w - c < hi - i ? w - c : hi - i;
        const uint8_t *sc = q->scales != NULL ? q->scales[p] : NULL;
        for (size_t j = 0; j < run; j++)
            out[i - lo + j] = dq_at(&tabs[p], q->codes[p], sc, base + j);
        i += run;
    }
}

/* lowp_stats_compute on (ref, rec), or, when q is not NULL, on ref and the reconstruction
 * of q formed a chunk at a time (rec unused): the same chunks, the same reduce, so the same
 * bytes. */
static int compute_core(const void *ref, lowp_stats_type ref_type, const void *rec, lowp_stats_type rec_type,
                        const lowp_stats_quant_view *qv, size_t n, size_t block, lowp_stats *out, char *why,
                        size_t why_len)
{
    memset(out, 0, sizeof *out);
    if (block == 0)
        block = 16;
    out->n = n;
    out->block = block;
    size_t nchunks = (n + LOWP_STATS_CHUNK - 1) / LOWP_STATS_CHUNK;
    size_t nblocks = (n + block - 1) / block;
    chunk_acc *acc = malloc((nchunks ? nchunks : 1) * sizeof *acc);
    double *brel = malloc((nblocks ? nblocks : 1) * sizeof *brel);
    signed char *bkind = malloc(nblocks ? nblocks : 1); /* -1 skipped, 0 normal, 1 ref zero */
    dq_tables *tabs = qv != NULL ? malloc(qv->parts * sizeof *tabs) : NULL; /* one per piece */
    if (acc == NULL || brel == NULL || bkind == NULL || (qv != NULL && tabs == NULL)) {
        free(acc);
        free(brel);
        free(bkind);
        free(tabs);
        return lowp_why_set(why, why_len, "out of memory for the statistics");
    }
    /* Per-block sums come from the chunk pass when blocks are whole groups inside whole
     * chunks (block 16, 32, ...); otherwise from a separate pass. */
    int fused = block % LOWP_STATS_GROUP == 0 && LOWP_STATS_CHUNK % block == 0;
    block_acc ba = {NULL, NULL, NULL, 0};
    if (fused) {
        ba.se = malloc(nblocks * sizeof *ba.se);
        ba.sr = malloc(nblocks * sizeof *ba.sr);
        ba.used = malloc(nblocks * sizeof *ba.used);
        ba.block = block;
        if ((nblocks && (ba.se == NULL || ba.sr == NULL || ba.used == NULL))) {
            free(ba.se);
            free(ba.sr);
            free(ba.used);
            free(acc);
            free(brel);
            free(bkind);
            free(tabs);
            return lowp_why_set(why, why_len, "out of memory for the statistics");
        }
    }
    if (qv != NULL)
        rec_type = LOWP_STATS_F64;
    void (*reduce)(const void *, const void *, size_t, size_t, size_t, chunk_acc *, const block_acc *) =
        ref_type == LOWP_STATS_F32 ? (rec_type == LOWP_STATS_F32 ? reduce_ff : reduce_fd)
                                   : (rec_type == LOWP_STATS_F32 ? reduce_df : reduce_dd);
    if (qv != NULL)
        for (size_t p = 0; p < qv->parts; p++)
            dq_init(&tabs[p], qv->format, qv->gscales[p]);
    long long nc = (long long)nchunks, nb = (long long)nblocks;
    int failed = 0;
#pragma omp parallel if (n >= LOWP_STATS_PARALLEL_MIN) reduction(| : failed)
    {
        double *buf = qv != NULL ? malloc(LOWP_STATS_CHUNK * sizeof *buf) : NULL;
        if (qv != NULL && buf == NULL)
            failed = 1;
#pragma omp for schedule(static)
        for (long long k = 0; k < nc; k++) {
            size_t lo = (size_t)k * LOWP_STATS_CHUNK;
            size_t hi = n - lo < LOWP_STATS_CHUNK ? n : lo + LOWP_STATS_CHUNK;
            if (qv == NULL) {
                reduce(ref, rec, 0, lo, hi, &acc[k], &ba);
            } else if (buf != NULL) {
                dq_fill(tabs, qv, lo, hi, buf);
                reduce(ref, buf, lo, lo, hi, &acc[k], &ba);
            }
        }
        free(buf);
#pragma omp for schedule(static)
        for (long long b = 0; b < nb; b++) {
            size_t used = 0;
            double se = 0, sr = 0; /* plain: error <= (block-1) u relative, positive terms */
            if (fused) {
                se = ba.se[b];
                sr = ba.sr[b];
                used = ba.used[b];
            } else {
                size_t lo = (size_t)b * block, hi = n - lo < block ? n : lo + block;
                for (size_t i = lo; i < hi; i++) {
                    double r = load(ref, ref_type, i), q = load(rec, rec_type, i);
                    if (!isfinite(r) || !isfinite(q))
                        continue;
                    used++;
                    se += (q - r) * (q - r);
                    sr += r * r;
                }
            }
            if (used == 0) {
                bkind[b] = -1;
                brel[b] = 0;
            } else if (sr == 0.0) {
                bkind[b] = 1;
                brel[b] = se == 0.0 ? 0.0 : INFINITY;
            } else {
                bkind[b] = 0;
                brel[b] = sqrt(se / sr);
            }
        }
    }
    free(ba.se);
    free(ba.sr);
    free(ba.used);
    free(tabs);
    if (failed) {
        free(acc);
        free(brel);
        free(bkind);
        return lowp_why_set(why, why_len, "out of memory for the statistics");
    }
    /* Combine in chunk order. */
    ksum err2 = {0, 0}, ref2 = {0, 0}, rec2 = {0, 0}, dot = {0, 0}, ulp = {0, 0};
    for (size_t k = 0; k < nchunks; k++) {
        const chunk_acc *a = &acc[k];
        kadd(&err2, kval(a->err2));
        kadd(&ref2, kval(a->ref2));
        kadd(&rec2, kval(a->rec2));
        kadd(&dot, kval(a->dot));
        kadd(&ulp, kval(a->ulp));
        out->compared += a->compared;
        out->nan_ref += a->nan_ref;
        out->nan_rec += a->nan_rec;
        out->inf_equal += a->inf_equal;
        out->inf_other += a->inf_other;
        if (a->max_abs > out->max_abs)
            out->max_abs = a->max_abs;
        if (a->ulp_max > out->ulp_max)
            out->ulp_max = a->ulp_max;
    }
    double se = kval(err2), sr = kval(ref2), sq = kval(rec2);
    out->sum_err2 = se;
    out->sum_ref2 = sr;
    out->sum_rec2 = sq;
    out->sum_dot = kval(dot);
    if (out->compared > 0) {
        out->rmse = sqrt(se / (double)out->compared);
        out->ulp_mean = kval(ulp) / (double)out->compared;
    }
    if (sr == 0.0) {
        out->rel_l2 = se == 0.0 ? 0.0 : INFINITY;
        out->sqnr_db = se == 0.0 ? INFINITY : -INFINITY;
    } else {
        out->rel_l2 = sqrt(se / sr);
        out->sqnr_db = se == 0.0 ? INFINITY : 10.0 * log10(sr / se);
    }
    if (sr == 0.0 && sq == 0.0)
        out->cosine = 1.0;
    else if (sr == 0.0 || sq == 0.0)
        out->cosine = 0.0;
    else
        out->cosine = out->sum_dot / (sqrt(sr) * sqrt(sq));

    /* Per-block quantiles: compact the compared blocks in block order, then sort. */
    size_t m = 0;
    for (size_t b = 0; b < nblocks; b++) {
        if (bkind[b] < 0)
            continue;
        out->blocks_ref_zero += bkind[b] == 1;
        brel[m++] = brel[b];
    }
    out->blocks = nblocks;
    out->blocks_compared = m;
    if (m > 0) {
        if (sort_nonneg(brel, m)) {
            free(acc);
            free(brel);
            free(bkind);
            return lowp_why_set(why, why_len, "out of memory for the per-block quantiles");
        }
        out->blk_p50 = quantile(brel, m, 50, 100);
        out->blk_p90 = quantile(brel, m, 90, 100);
        out->blk_p99 = quantile(brel, m, 99, 100);
        out->blk_max = brel[m - 1];
    }
    free(acc);
    free(brel);
    free(bkind);
    return 0;
}

int lowp_stats_compute(const void *ref, lowp_stats_type ref_type, const void *rec, lowp_stats_type rec_type,
                       size_t n, size_t block, lowp_stats *out, char *why, size_t why_len)
{
    return compute_core(ref, ref_type, rec, rec_type, NULL, n, block, out, why, why_len);
}

int lowp_stats_compute_quant(const float *ref, const lowp_stats_quant_view *q, size_t n, size_t block,
                             lowp_stats *out, char *why, size_t why_len)
{
    if (block == 0)
        block = 16;
    if (q == NULL || q->parts == 0 || q->width == 0 || q->codes == NULL || q->gscales == NULL ||
        n % (q->parts * q->width) != 0)
        return lowp_why_set(why, why_len, "the quantized view does not tile %zu elements", n);
    if (block % LOWP_STATS_GROUP != 0 || LOWP_STATS_CHUNK % block != 0) {
        /* per-block sums need the reconstruction again (the unfused pass): form it whole */
        double *rec = malloc((n ? n : 1) * sizeof *rec);
        dq_tables *tabs = malloc(q->parts * sizeof *tabs);
        int rc = -1;
        if (rec == NULL || tabs == NULL) {
            lowp_why_set(why, why_len, "out of memory for the reconstruction");
        } else {
            for (size_t p = 0; p < q->parts; p++)
                dq_init(&tabs[p], q->format, q->gscales[p]);
            dq_fill(tabs, q, 0, n, rec);
            rc = compute_core(ref, LOWP_STATS_F32, rec, LOWP_STATS_F64, NULL, n, block, out, why, why_len);
        }
        free(rec);
        free(tabs);
        return rc;
    }
    return compute_core(ref, LOWP_STATS_F32, NULL, LOWP_STATS_F64, q, n, block, out, why, why_len);
}

void lowp_stats_set_counts(lowp_stats *s, const lowp_quant_counts *c)
{
    s->has_counts = 1;
    s->counts = *c;
}

void lowp_stats_add_scales(lowp_stats *s, lowp_format fmt, const uint8_t *scales, size_t n)
{
    s->has_scales = 1;
    s->scale_format = fmt;
    s->scales += n;
    for (size_t i = 0; i < n; i++) {
        uint8_t q = scales[i];
        s->scale_hist[q]++;
        if (fmt == LOWP_E4M3) {
            unsigned mag = q & 0x7fu;
            if (mag == 0x7f)
                s->scale_nan++;
            else if (mag == 0)
                s->scale_zero++;
            else if ((mag >> 3) == 0)
                s->scale_subnormal++;
            else
                s->scale_normal++;
        } else {
            if (q == 0xff)
                s->scale_nan++;
            else
                s->scale_normal++;
        }
    }
}

/* ---------------------------------------------------------------------------------- */
/* quantize, dequantize, measure                                                       */

void lowp_stats_dequantize_f64(lowp_block_format f, float global_scale, const uint8_t *codes,
                               const uint8_t *scales, size_t n, double *out)
{
    dq_tables tab, *t = &tab;
    dq_init(t, f, global_scale);
    long long nn = (long long)n;
#pragma omp parallel for schedule(static) if (n >= LOWP_STATS_PARALLEL_MIN)
    for (long long i = 0; i < nn; i++)
        out[i] = dq_at(t, codes, scales, (size_t)i);
}

int lowp_stats_quantized(lowp_block_format f, lowp_recipe r, lowp_global_scale gs, unsigned flags,
                         const float *x, size_t n, double *rec_out, lowp_stats *out, char *why,
                         size_t why_len)
{
    memset(out, 0, sizeof *out);
    if (lowp_recipe_check(f, r, why, why_len))
        return -1;
    size_t bs = lowp_block_size(f);
    size_t pad_to = bs > 1 ? bs : 2; /* 4-bit codes are packed in pairs */
    size_t np = (n + pad_to - 1) / pad_to * pad_to;
    const float *xp = x;
    float *xbuf = NULL;
    uint8_t *codes = malloc(lowp_block_code_bytes(f, np ? np : pad_to));
    uint8_t *scales = lowp_block_has_scales(f) ? malloc(np / bs ? np / bs : 1) : NULL;
    int rc = -1;
    if (codes == NULL || (lowp_block_has_scales(f) && scales == NULL)) {
        lowp_why_set(why, why_len, "out of memory for the quantized tensor");
        goto done;
    }
    if (np != n) {
        xbuf = calloc(np, sizeof *xbuf);
        if (xbuf == NULL) {
            lowp_why_set(why, why_len, "out of memory for the padded tensor");
            goto done;
        }
        memcpy(xbuf, x, n * sizeof *x);
        xp = xbuf;
    }
    lowp_quant_counts qc;
    memset(&qc, 0, sizeof qc);
    if (lowp_block_quantize(f, r, gs, flags, xp, np, codes, scales, &qc, why, why_len))
        goto done;
    /* the statistics read the reconstruction from the codes a chunk at a time: no binary64
     * copy of the whole tensor */
    size_t sblock = bs > 1 ? bs : 16;
    const uint8_t *cp[1] = {codes}, *sp[1] = {scales};
    float g1[1] = {gs.dec};
    lowp_stats_quant_view qv = {f, 1, n ? n : 1, cp, sp, g1};
    if (lowp_stats_compute_quant(x, &qv, n, sblock, out, why, why_len))
        goto done;
    /* The zero padding is never flushed, saturated or NaN; it only adds elements (and, for
     * the elementwise formats, "blocks"). */
    qc.elements -= np - n;
    if (bs == 1)
        qc.blocks -= np - n;
    lowp_stats_set_counts(out, &qc);
    if (scales != NULL)
        lowp_stats_add_scales(out, scale_format_of(f), scales, np / bs);
    if (rec_out != NULL)
        lowp_stats_dequantize_f64(f, gs.dec, codes, scales, n, rec_out);
    rc = 0;
done:
    free(xbuf);
    free(codes);
    free(scales);
    return rc;
}

int lowp_stats_quant_sse(lowp_block_format f, lowp_recipe r, lowp_global_scale gs, unsigned flags,
                         const float *x, size_t n, double *sse, size_t *nonfinite, char *why,
                         size_t why_len)
{
    if (lowp_recipe_check(f, r, why, why_len))
        return -1;
    size_t bs = lowp_block_size(f);
    lowp_format ef = lowp_block_element_format(f);
    if (n % bs != 0 || (lowp_format_bits(ef) == 4 && n % 2 != 0))
        return lowp_why_set(why, why_len, "element count is not a multiple of the block size");
    dq_tables tab;
    dq_init(&tab, f, gs.dec);
    size_t nchunks = (n + LOWP_STATS_CHUNK - 1) / LOWP_STATS_CHUNK;
    double *part = malloc((nchunks ? nchunks : 1) * sizeof *part);
    size_t *bad = calloc(nchunks ? nchunks : 1, sizeof *bad);
    int err = 0;
    if (part == NULL || bad == NULL) {
        free(part);
        free(bad);
        return lowp_why_set(why, why_len, "out of memory for the partial sums");
    }
    long long nc = (long long)nchunks;
#pragma omp parallel if (n >= LOWP_STATS_PARALLEL_MIN)
    {
        uint8_t *codes = malloc(2 * LOWP_STATS_CHUNK);
        uint8_t *scales = malloc(LOWP_STATS_CHUNK);
        if (codes == NULL || scales == NULL) {
#pragma omp atomic write
            err = 1;
        }
#pragma omp for schedule(static)
        for (long long k = 0; k < nc; k++) {
            if (codes == NULL || scales == NULL)
                continue;
            size_t lo = (size_t)k * LOWP_STATS_CHUNK;
            size_t len = n - lo < LOWP_STATS_CHUNK ? n - lo : LOWP_STATS_CHUNK;
            if (lowp_block_quantize(f, r, gs, flags, x + lo, len, codes, scales, NULL, NULL, 0)) {
#pragma omp atomic write
                err = 1;
                continue;
            }
            ksum e2 = {0, 0};
            size_t nb = 0;
            for (size_t g = 0; g < len; g += LOWP_STATS_GROUP) {
                size_t ge = len - g < LOWP_STATS_GROUP ? len : g + LOWP_STATS_GROUP;
                double se = 0;
                for (size_t i = g; i < ge; i++) {
                    double q = dq_at(&tab, codes, scales, i), rv = (double)x[lo + i];
                    if (!isfinite(rv) || !isfinite(q)) {
                        nb++;
                        continue;
                    }
                    se += (q - rv) * (q - rv);
                }
                kadd(&e2, se);
            }
            part[k] = kval(e2);
            bad[k] = nb;
        }
        free(codes);
        free(scales);
    }
    if (err) {
        free(part);
        free(bad);
        return lowp_why_set(why, why_len, "quantization failed in the error search");
    }
    ksum tot = {0, 0};
    size_t nbad = 0;
    for (size_t k = 0; k < nchunks; k++) {
        kadd(&tot, part[k]);
        nbad += bad[k];
    }
    *sse = kval(tot);
    if (nonfinite != NULL)
        *nonfinite = nbad;
    free(part);
    free(bad);
    return 0;
}

/* ---------------------------------------------------------------------------------- */
/* output                                                                              */

static const char *lab(const char *s)
{
    return s != NULL && s[0] != '\0' ? s : "-";
}

static void gscale_text(char *buf, size_t len, const lowp_stats_row *row)
{
    if (row->n_gscales == 0 || row->gscales == NULL) {
        snprintf(buf, len, "-");
        return;
    }
    float lo = row->gscales[0], hi = row->gscales[0];
    for (size_t i = 1; i < row->n_gscales; i++) {
        if (row->gscales[i] < lo)
            lo = row->gscales[i];
        if (row->gscales[i] > hi)
            hi = row->gscales[i];
    }
    if (row->n_gscales == 1 || lo == hi)
        snprintf(buf, len, "%.5g", (double)lo);
    else
        snprintf(buf, len, "%.3g..%.3g", (double)lo, (double)hi);
}

static size_t count_of(const lowp_stats *s, size_t v)
{
    return s->has_counts ? v : 0;
}

int lowp_stats_print_table(FILE *f, const lowp_stats_row *rows, size_t n)
{
    int calib = 0;
    for (size_t i = 0; i < n; i++)
        if (rows[i].method != NULL || rows[i].scope != NULL || rows[i].rounding != NULL)
            calib = 1;
    fprintf(f, "%-8s %-9s ", "format", "recipe");
    if (calib)
        fprintf(f, "%-9s %-6s %-7s ", "method", "scope", "scale");
    fprintf(f, "%-15s %8s %9s %9s %9s %10s %9s %9s %8s %8s %6s %7s %7s %8s %8s %8s %8s\n", "global_scale",
            "SQNR_dB", "rel_L2", "RMSE", "max_abs", "cosine", "ulp_mean", "ulp_max", "sat", "flushed", "nan",
            "sc_zero", "sc_sub", "blk_p50", "blk_p90", "blk_p99", "blk_max");
    for (size_t i = 0; i < n; i++) {
        const lowp_stats_row *w = &rows[i];
        const lowp_stats *s = &w->st;
        char g[64];
        gscale_text(g, sizeof g, w);
        fprintf(f, "%-8s %-9s ", lab(w->format), lab(w->recipe));
        if (calib)
            fprintf(f, "%-9s %-6s %-7s ", lab(w->method), lab(w->scope), lab(w->rounding));
        fprintf(f, "%-15s %8.2f %9.3e %9.3e %9.3e %10.7f %9.3g %9.3g %8zu %8zu %6zu %7zu %7zu %8.4f %8.4f %8.4f %8.4f\n",
                g, s->sqnr_db, s->rel_l2, s->rmse, s->max_abs, s->cosine, s->ulp_mean, s->ulp_max,
                count_of(s, s->counts.saturated), count_of(s, s->counts.flushed),
                count_of(s, s->counts.nan_out), s->scale_zero, s->scale_subnormal, s->blk_p50, s->blk_p90,
                s->blk_p99, s->blk_max);
    }
    return ferror(f) ? -1 : 0;
}

static void csv_str(FILE *f, const char *s)
{
    /* Labels are plain identifiers; quote anyway if a comma or quote ever appears. */
    s = lab(s);
    if (strpbrk(s, ",\"\n") == NULL) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

int lowp_stats_write_csv(FILE *f, const lowp_stats_row *rows, size_t n)
{
    fputs("format,recipe,method,scope,scale_rounding,global_scales,n,compared,nan_ref,nan_rec,inf_equal,"
          "inf_other,max_abs,rmse,rel_l2,sqnr_db,cosine,ulp_max,ulp_mean,sum_err2,sum_ref2,block,blocks,"
          "blocks_compared,blocks_ref_zero,blk_p50,blk_p90,blk_p99,blk_max,nan_in,inf_in,saturated,flushed,"
          "nan_out,scales,scale_zero,scale_subnormal,scale_normal,scale_nan,scale_hist\n",
          f);
    for (size_t i = 0; i < n; i++) {
        const lowp_stats_row *w = &rows[i];
        const lowp_stats *s = &w->st;
        csv_str(f, w->format);
        fputc(',', f);
        csv_str(f, w->recipe);
        fputc(',', f);
        csv_str(f, w->method);
        fputc(',', f);
        csv_str(f, w->scope);
        fputc(',', f);
        csv_str(f, w->rounding);
        fputc(',', f);
        for (size_t j = 0; j < w->n_gscales && w->gscales != NULL; j++)
            fprintf(f, "%s%.9g", j ? ";" : "", (double)w->gscales[j]);
        fprintf(f, ",%zu,%zu,%zu,%zu,%zu,%zu,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g", s->n,
                s->compared, s->nan_ref, s->nan_rec, s->inf_equal, s->inf_other, s->max_abs, s->rmse, s->rel_l2,
                s->sqnr_db, s->cosine, s->ulp_max, s->ulp_mean, s->sum_err2, s->sum_ref2);
        fprintf(f, ",%zu,%zu,%zu,%zu,%.17g,%.17g,%.17g,%.17g", s->block, s->blocks, s->blocks_compared,
                s->blocks_ref_zero, s->blk_p50, s->blk_p90, s->blk_p99, s->blk_max);
        fprintf(f, ",%zu,%zu,%zu,%zu,%zu", count_of(s, s->counts.nan_in), count_of(s, s->counts.inf_in),
                count_of(s, s->counts.saturated), count_of(s, s->counts.flushed), count_of(s, s->counts.nan_out));
        fprintf(f, ",%zu,%zu,%zu,%zu,%zu,", s->scales, s->scale_zero, s->scale_subnormal, s->scale_normal,
                s->scale_nan);
        int first = 1;
        for (unsigned c = 0; c < 256; c++)
            if (s->scale_hist[c] != 0) {
                fprintf(f, "%s0x%02x:%zu", first ? "" : ";", c, s->scale_hist[c]);
                first = 0;
            }
        fputc('\n', f);
    }
    return ferror(f) ? -1 : 0;
}

static void json_num(FILE *f, const char *key, double v, int comma)
{
    if (isfinite(v))
        fprintf(f, "\"%s\": %.17g", key, v);
    else
        fprintf(f, "\"%s\": null", key);
    if (comma)
        fputs(", ", f);
}

static void json_str(FILE *f, const char *key, const char *v)
{
    fprintf(f, "\"%s\": ", key);
    if (v == NULL) {
        fputs("null, ", f);
        return;
    }
    fputc('"', f);
    for (; *v; v++) {
        if (*v == '"' || *v == '\\')
            fputc('\\', f);
        if ((unsigned char)*v < 0x20)
            fprintf(f, "\\u%04x", (unsigned char)*v);
        else
            fputc(*v, f);
    }
    fputs("\", ", f);
}

int lowp_stats_write_json(FILE *f, const lowp_stats_row *rows, size_t n)
{
    fputs("[\n", f);
    for (size_t i = 0; i < n; i++) {
        const lowp_stats_row *w = &rows[i];
        const lowp_stats *s = &w->st;
        fputs("  {", f);
        json_str(f, "format", w->format);
        json_str(f, "recipe", w->recipe);
        json_str(f, "method", w->method);
        json_str(f, "scope", w->scope);
        json_str(f, "scale_rounding", w->rounding);
        fputs("\"global_scales\": [", f);
        for (size_t j = 0; j < w->n_gscales && w->gscales != NULL; j++)
            /* JSON has no Inf or NaN: a non-finite scale (an infinite amax) is null */
            fprintf(f, isfinite(w->gscales[j]) ? "%s%.9g" : "%snull", j ? ", " : "", (double)w->gscales[j]);
        fputs("],\n   ", f);
        fprintf(f, "\"n\": %zu, \"compared\": %zu, \"nan_ref\": %zu, \"nan_rec\": %zu, \"inf_equal\": %zu, "
                   "\"inf_other\": %zu,\n   ",
                s->n, s->compared, s->nan_ref, s->nan_rec, s->inf_equal, s->inf_other);
        json_num(f, "max_abs", s->max_abs, 1);
        json_num(f, "rmse", s->rmse, 1);
        json_num(f, "rel_l2", s->rel_l2, 1);
        json_num(f, "sqnr_db", s->sqnr_db, 1);
        json_num(f, "cosine", s->cosine, 1);
        json_num(f, "ulp_max", s->ulp_max, 1);
        json_num(f, "ulp_mean", s->ulp_mean, 1);
        json_num(f, "sum_err2", s->sum_err2, 1);
        json_num(f, "sum_ref2", s->sum_ref2, 0);
        fprintf(f, ",\n   \"block\": %zu, \"blocks\": %zu, \"blocks_compared\": %zu, \"blocks_ref_zero\": %zu, ",
                s->block, s->blocks, s->blocks_compared, s->blocks_ref_zero);
        json_num(f, "blk_p50", s->blk_p50, 1);
        json_num(f, "blk_p90", s->blk_p90, 1);
        json_num(f, "blk_p99", s->blk_p99, 1);
        json_num(f, "blk_max", s->blk_max, 0);
        if (s->has_counts)
            fprintf(f, ",\n   \"counts\": {\"elements\": %zu, \"blocks\": %zu, \"nan_in\": %zu, \"inf_in\": %zu, "
                       "\"saturated\": %zu, \"flushed\": %zu, \"nan_out\": %zu, \"scale_zero\": %zu, "
                       "\"scale_subnormal\": %zu, \"scale_nan\": %zu}",
                    s->counts.elements, s->counts.blocks, s->counts.nan_in, s->counts.inf_in, s->counts.saturated,
                    s->counts.flushed, s->counts.nan_out, s->counts.scale_zero, s->counts.scale_subnormal,
                    s->counts.scale_nan);
        else
            fputs(",\n   \"counts\": null", f);
        if (s->has_scales) {
            fprintf(f, ",\n   \"scales\": {\"format\": \"%s\", \"count\": %zu, \"zero\": %zu, \"subnormal\": %zu, "
                       "\"normal\": %zu, \"nan\": %zu, \"hist\": [",
                    lowp_format_name(s->scale_format), s->scales, s->scale_zero, s->scale_subnormal,
                    s->scale_normal, s->scale_nan);
            for (unsigned c = 0; c < 256; c++)
                fprintf(f, "%s%zu", c ? "," : "", s->scale_hist[c]);
            fputs("]}", f);
        } else {
            fputs(",\n   \"scales\": null", f);
        }
        fprintf(f, "}%s\n", i + 1 < n ? "," : "");
    }
    fputs("]\n", f);
    return ferror(f) ? -1 : 0;
}
