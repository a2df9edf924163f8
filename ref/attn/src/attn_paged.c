/* ref/attn/src/attn_paged.c: fused binary64 decode over a paged KV cache (lowp/attn_paged.h).
 *
 * Reproduces lowp_attn_ref_f64 (attn_ref.c) operation for operation: both are built from
 * the kernels of attn_internal.h; only the row fetch differs. A work item is (sequence b,
 * KV head g, chunk c of LOWP_ATTN_CHUNK positions), chunk-major (a chunk's KV heads one
 * after another: in NHD they share cache lines):
 *   pass A  for each token: locate (page, slot) through the page table, dequantize the K
 *           row once, score it against the r = num_q_heads / num_kv_heads query heads of
 *           the group (8-lane dot products, attn.h's order);
 *   pass B  per query head: chunk max, weights exp(s - m_c) with the floor, their sum;
 *   pass C  for each token: dequantize the V row once, N_h[e] += w_h v_e for the r heads
 *           (four tokens per sweep over e, which keeps N in registers and leaves the
 *           rounding sequence of N += w v unchanged).
 * Items run in parallel; the merge (exp(m_c - M), in chunk order) is attn_ref.c's. The
 * per-token dequantization is exact (element * (block scale * global scale): at most
 * 2 x 4 x 24 significant bits, no underflow), hence equal to lowp_kvcache_read's values.
 *
 * Cache addressing: codes of (page, slot, head) at page*a + slot*b + head*c, scales of
 * block s at page*d + head*e + rel[slot][s] (rel holds the 4-token interleave). Both are
 * read from lowp_kvcache_code_offset / lowp_kvcache_scale_offset once per call and checked
 * at the extremes, so a layout the formula does not fit is refused, never misread.
 */
#define _POSIX_C_SOURCE 200809L
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn_internal.h"
#include "lowp/bits.h"
#include "lowp/why.h"
#include "lowp/attn_paged.h"
#include "lowp/format.h"

#define CH LOWP_ATTN_CHUNK

/* ---------------------------------------------------------------------------------------
 * Dequantization
 * ------------------------------------------------------------------------------------- */

typedef struct {
    double pair[256][2]; /* E2M1: byte -> (low nibble, high nibble) values */
    double el[256];      /* 8-bit element values */
    double sv[256];      /* block scale values */
} luts;

typedef struct {
    lowp_block_format f;
    size_t dim, S, bs;
    const uint8_t *codes, *scales;
    size_t rb; /* code bytes per row */
    size_t c_page, c_slot, c_head, s_page, s_head;
    size_t *srel; /* [page_size][S] */
    double *g;    /* [num_heads] */
} side;

static void luts_init(luts *t, lowp_block_format f)
{
    memset(t, 0, sizeof *t);
    for (unsigned c = 0; c < 256; c++) {
        t->pair[c][0] = lowp_decode_f64(LOWP_E2M1, (uint16_t)(c & 15));
        t->pair[c][1] = lowp_decode_f64(LOWP_E2M1, (uint16_t)(c >> 4));
        lowp_format ef = lowp_block_element_format(f);
        if (lowp_format_bits(ef) == 8)
            t->el[c] = lowp_decode_f64(ef, (uint16_t)c);
        if (f == LOWP_NVFP4)
            t->sv[c] = lowp_decode_f64(LOWP_E4M3, (uint16_t)c);
        else if (f == LOWP_MXFP4 || f == LOWP_MXFP8)
            t->sv[c] = lowp_decode_f64(LOWP_E8M0, (uint16_t)c);
    }
}

/* out[i] = el[c[i]] * f, four at a time with 32-byte stores (see deq_row). */
ATTN_HOT void deq_bytes(const double *el, const uint8_t *c, double f, size_t n,
                        double *restrict out)
{
    size_t i = 0;
#if defined(ATTN_VEC)
    const attn_v4d fv = {f, f, f, f};
    for (; i + 4 <= n; i += 4) {
        attn_v4d x = {el[c[i]], el[c[i + 1]], el[c[i + 2]], el[c[i + 3]]};
        x *= fv;
        memcpy(out + i, &x, sizeof x);
    }
#endif
    for (; i < n; i++)
        out[i] = el[c[i]] * f;
}

ATTN_HOT void deq_row(const side *sd, const luts *lt, size_t page, size_t slot, size_t head,
                           double *restrict out)
{
    const uint8_t *c = sd->codes + page * sd->c_page + slot * sd->c_slot + head * sd->c_head;
    const double g = sd->g[head];
    switch (sd->f) {
    case LOWP_NVFP4:
    case LOWP_MXFP4: {
        const uint8_t *sb = sd->scales + page * sd->s_page + head * sd->s_head;
        const size_t *rel = sd->srel + slot * sd->S, half = sd->bs / 2;
        for (size_t b = 0; b < sd->S; b++) {
            const double f = lt->sv[sb[rel[b]]] * g;
            const uint8_t *cb = c + b * half;
            double *o = out + b * sd->bs;
#if defined(ATTN_VEC)
            /* 32-byte stores: the dot products load 32 bytes, which a pair of 16-byte
             * stores cannot forward (a stack round trip would defeat it as badly) */
            const attn_v4d fv = {f, f, f, f};
            for (size_t i = 0; i < half; i += 2) {
                attn_v2d p0, p1;
                memcpy(&p0, lt->pair[cb[i]], sizeof p0);
                memcpy(&p1, lt->pair[cb[i + 1]], sizeof p1);
                attn_v4d x = __builtin_shufflevector(p0, p1, 0, 1, 2, 3);
                x *= fv;
                memcpy(o + 2 * i, &x, sizeof x);
            }
#else
            for (size_t i = 0; i < half; i++) {
                o[2 * i] = lt->pair[cb[i]][0] * f;
                o[2 * i + 1] = lt->pair[cb[i]][1] * f;
            }
#endif
        }
        break;
    }
    case LOWP_MXFP8: {
        const uint8_t *sb = sd->scales + page * sd->s_page + head * sd->s_head;
        const size_t *rel = sd->srel + slot * sd->S;
        for (size_t b = 0; b < sd->S; b++)
            deq_bytes(lt->el, c + b * sd->bs, lt->sv[sb[rel[b]]] * g, sd->bs, out + b * sd->bs);
        break;
    }
    case LOWP_FP8_E4M3:
    case LOWP_FP8_E5M2:
        deq_bytes(lt->el, c, g, sd->dim, out);
        break;
    default: /* BF16: the top half of a binary32 */
        for (size_t i = 0; i < sd->dim; i++) {
            float x = lowp_f32_from_bf16((uint16_t)(c[2 * i] | c[2 * i + 1] << 8));
            out[i] = (double)x * g;
        }
        break;
    }
}

/* Prefetch the code and scale bytes of a row a few tokens ahead: per KV head the rows are
 * strided (NHD: num_heads rows apart), which the hardware prefetchers follow poorly. */
#if defined(__GNUC__)
#define PREFETCH(p) __builtin_prefetch((p), 0, 3)
#else
#define PREFETCH(p) ((void)(p))
#endif
#define PF_AHEAD 8

/* A macro, not a function: GCC's IPA finds a void function holding only prefetches
 * "const" and deletes the calls. */
#define PREFETCH_ROW(sd, page, slot, head)                                                  \
    do {                                                                                    \
        const uint8_t *pc_ =                                                                \
            (sd)->codes + (page) * (sd)->c_page + (slot) * (sd)->c_slot + (head) * (sd)->c_head; \
        PREFETCH(pc_);                                                                      \
        PREFETCH(pc_ + (sd)->rb - 1);                                                       \
        if ((sd)->S) {                                                                      \
            const uint8_t *ps_ = (sd)->scales + (page) * (sd)->s_page + (head) * (sd)->s_head; \
            PREFETCH(ps_ + (sd)->srel[(slot) * (sd)->S]);                                   \
            PREFETCH(ps_ + (sd)->srel[(slot) * (sd)->S + (sd)->S - 1]);                     \
        }                                                                                   \
    } while (0)

/* Strides of one side, checked against the cache's own offset functions. */
static int side_init(side *sd, const lowp_kvcache *c, lowp_kv_which w, char *why, size_t len)
{
    const lowp_kv_config *cfg = lowp_kvcache_config(c);
    const size_t P = cfg->page_size, H = cfg->num_heads, NP = cfg->num_pages;
    memset(sd, 0, sizeof *sd);
    sd->f = cfg->format;
    sd->dim = w == LOWP_KV_K ? cfg->qk_dim : cfg->vo_dim;
    sd->bs = lowp_block_size(cfg->format);
    sd->S = lowp_kv_row_scales(cfg, w);
    sd->rb = lowp_kv_row_code_bytes(cfg, w);
    size_t bytes;
    sd->codes = lowp_kvcache_cbuffer(c, w, LOWP_KV_CODES, &bytes);
    sd->scales = sd->S ? lowp_kvcache_cbuffer(c, w, LOWP_KV_SCALES, &bytes) : NULL;
    size_t o0 = lowp_kvcache_code_offset(c, w, 0, 0, 0);
    sd->c_page = NP > 1 ? lowp_kvcache_code_offset(c, w, 1, 0, 0) - o0 : 0;
    sd->c_slot = P > 1 ? lowp_kvcache_code_offset(c, w, 0, 1, 0) - o0 : 0;
    sd->c_head = H > 1 ? lowp_kvcache_code_offset(c, w, 0, 0, 1) - o0 : 0;
    int ok = o0 == 0;
    size_t pg[2] = {0, NP - 1}, sl[2] = {0, P - 1}, hd[2] = {0, H - 1};
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++)
            for (int d = 0; d < 2; d++)
                ok &= lowp_kvcache_code_offset(c, w, pg[a], sl[b], hd[d]) ==
                      pg[a] * sd->c_page + sl[b] * sd->c_slot + hd[d] * sd->c_head;
    sd->g = malloc(H * sizeof *sd->g);
    if (sd->g == NULL)
        return lowp_why_set(why, len, "out of memory");
    for (size_t h = 0; h < H; h++)
        sd->g[h] = lowp_block_has_global_scale(cfg->format)
                       ? (double)lowp_kvcache_global_scale(c, w, h) : 1.0;
    if (sd->S) {
        sd->srel = malloc(P * sd->S * sizeof *sd->srel);
        if (sd->srel == NULL)
            return lowp_why_set(why, len, "out of memory");
        ok &= lowp_kvcache_scale_offset(c, w, 0, 0, 0, 0) == 0;
        sd->s_page = NP > 1 ? lowp_kvcache_scale_offset(c, w, 1, 0, 0, 0) : 0;
        sd->s_head = H > 1 ? lowp_kvcache_scale_offset(c, w, 0, 0, 1, 0) : 0;
        for (size_t t = 0; t < P; t++)
            for (size_t s = 0; s < sd->S; s++)
                sd->srel[t * sd->S + s] = lowp_kvcache_scale_offset(c, w, 0, t, 0, s);
        for (int a = 0; a < 2; a++)
            for (int b = 0; b < 2; b++)
                for (int d = 0; d < 2; d++)
                    for (size_t s = 0; s < sd->S; s += sd->S - 1 > 0 ? sd->S - 1 : 1)
                        ok &= lowp_kvcache_scale_offset(c, w, pg[a], sl[b], hd[d], s) ==
                              pg[a] * sd->s_page + hd[d] * sd->s_head + sd->srel[sl[b] * sd->S + s];
    }
    if (!ok)
        return lowp_why_set(why, len,
                            "the cache's %s layout is not page/slot/head affine: the paged "
                            "decode cannot address it",
                            w == LOWP_KV_K ? "K" : "V");
    return 0;
}

static void side_free(side *sd)
{
    free(sd->srel);
    free(sd->g);
}

/* ---------------------------------------------------------------------------------------
 * The decode
 * ------------------------------------------------------------------------------------- */

typedef struct {
    size_t b, g, c;
} item;

typedef struct {
    const lowp_attn_paged_args *a;
    const lowp_kv_config *cfg;
    side K, V;
    luts lt;
    size_t r, nq, D, E, P;
    double sm;
    int want_bound;
    /* partials per item: m, L, S [item][r]; N [item][r][E]; Vmax [item][E] */
    double *pm, *pL, *pS, *pN, *pV;
} job;

typedef struct {
    double *kbuf, *vbuf, *sc; /* [D], [4][E], [r][CH] */
} tbuf;

ATTN_CLONES
static void run_item(const job *J, size_t it_idx, const item *it, tbuf *tb)
{
    const lowp_kv_page_table *pt = J->a->pt;
    const size_t r = J->r, D = J->D, E = J->E, P = J->P;
    const size_t n = lowp_kv_seq_len(pt, P, it->b);
    const size_t t0 = it->c * CH, t1 = t0 + CH < n ? t0 + CH : n, nt = t1 - t0;
    const int32_t *pages = pt->indices + pt->indptr[it->b];
    const double *qg = J->a->q + (it->b * J->nq + it->g * r) * D;
    double *sc = tb->sc, *kb = tb->kbuf;
    double *Sa = J->pS + it_idx * r;

    /* pass A: scores */
    if (J->want_bound)
        for (size_t h = 0; h < r; h++)
            Sa[h] = 0.0;
    for (size_t t = t0; t < t1; t++) {
        if (t + PF_AHEAD < t1)
            PREFETCH_ROW(&J->K, (size_t)pages[(t + PF_AHEAD) / P], (t + PF_AHEAD) % P, it->g);
        deq_row(&J->K, &J->lt, (size_t)pages[t / P], t % P, it->g, kb);
        attn_scores(qg, r, D, kb, sc + (t - t0), CH, J->sm);
        if (J->want_bound)
            for (size_t h = 0; h < r; h++) {
                double x = attn_absdot8(qg + h * D, kb, D);
                x = x <= DBL_MAX ? x : INFINITY;
                Sa[h] = x > Sa[h] ? x : Sa[h];
            }
    }
    /* pass B: weights */
    for (size_t h = 0; h < r; h++)
        attn_weights(sc + h * CH, nt, &J->pm[it_idx * r + h], &J->pL[it_idx * r + h]);
    /* pass C: N_h += w_h v, four tokens per sweep */
    double *N = J->pN + it_idx * r * E, *Vm = J->pV + it_idx * E;
    for (size_t x = 0; x < r * E; x++)
        N[x] = 0.0;
    if (J->want_bound)
        for (size_t e = 0; e < E; e++)
            Vm[e] = 0.0;
    double *v[4] = {tb->vbuf, tb->vbuf + E, tb->vbuf + 2 * E, tb->vbuf + 3 * E};
    size_t t = t0;
    for (; t < t1; t += 4) {
        const size_t k = t1 - t < 4 ? t1 - t : 4;
        for (size_t u = t + PF_AHEAD; u < t + PF_AHEAD + 4 && u < t1; u++)
            PREFETCH_ROW(&J->V, (size_t)pages[u / P], u % P, it->g);
        for (size_t u = 0; u < k; u++)
            deq_row(&J->V, &J->lt, (size_t)pages[(t + u) / P], (t + u) % P, it->g, v[u]);
        if (k == 4)
            attn_pv4(N, r, E, sc + (t - t0), CH, v[0], v[1], v[2], v[3]);
        else
            for (size_t u = 0; u < k; u++)
                attn_pv1(N, r, E, sc + (t + u - t0), CH, v[u]);
        if (J->want_bound)
            for (size_t u = 0; u < k; u++)
                for (size_t e = 0; e < E; e++) {
                    double a = fabs(v[u][e]);
                    a = a <= DBL_MAX ? a : INFINITY;
                    Vm[e] = a > Vm[e] ? a : Vm[e];
                }
    }
}

/* Merge of (b, query head h) over its chunks (items first, first + step, ...). */
static void merge(const job *J, size_t first, size_t step, size_t C, size_t b, size_t h,
                  double *out, double *bound)
{
    const size_t r = J->r, E = J->E, hl = h % r;
    attn_merge(C, J->pm + first * r + hl, J->pL + first * r + hl, step * r,
               J->pN + (first * r + hl) * E, step * r * E, E, out, NULL);
    if (bound != NULL) {
        const double u = 0x1p-53, Dd = (double)J->D;
        double S = 0.0;
        for (size_t c = 0; c < C; c++) {
            double x = J->pS[(first + c * step) * r + hl];
            S = x > S ? x : S;
        }
        S *= 1 + 2 * (Dd * u / (1 - Dd * u)); /* as attn_ref.c: computed sum -> upper bound */
        size_t n = lowp_kv_seq_len(J->a->pt, J->P, b);
        for (size_t e = 0; e < E; e++) {
            double V = 0.0;
            for (size_t c = 0; c < C; c++) {
                double x = J->pV[(first + c * step) * E + e];
                V = x > V ? x : V;
            }
            lowp_attn_bound_terms bt = {n, J->D, C, J->sm, S, V};
            bound[e] = S <= DBL_MAX && V <= DBL_MAX ? lowp_attn_bound_eval(&bt) : INFINITY;
        }
    }
}

int lowp_attn_paged_decode(const lowp_attn_paged_args *a, double *out, double *bound, char *why,
                           size_t why_len)
{
    if (a == NULL || a->cache == NULL || a->view == NULL || a->pt == NULL || a->q == NULL ||
        out == NULL)
        return lowp_why_set(why, why_len,
                            "args, cache, view, page table, q and out must not be NULL");
    if (lowp_kvcache_check_view(a->cache, a->view, why, why_len))
        return -1;
    const lowp_kv_config *cfg = lowp_kvcache_config(a->cache);
    const lowp_kv_page_table *pt = a->pt;
    if (lowp_kv_page_table_check(pt, cfg->num_pages, cfg->page_size, why, why_len))
        return -1;
    const size_t H = cfg->num_heads, nq = a->num_q_heads;
    if (nq == 0 || nq % H != 0)
        return lowp_why_set(why, why_len,
                            "num_q_heads (%zu) is not a positive multiple of the cache's "
                            "num_heads",
                            nq);
    double sm = a->sm_scale == 0.0 ? 1.0 / sqrt((double)cfg->qk_dim) : a->sm_scale;
    if (!isfinite(sm))
        return lowp_why_set(why, why_len, "sm_scale is not finite");
    size_t n_items = 0;
    for (size_t b = 0; b < pt->batch; b++) {
        size_t n = lowp_kv_seq_len(pt, cfg->page_size, b);
        if (n == 0)
            return lowp_why_set(why, why_len,
                                "sequence %zu is empty: a decode needs at least one token", b);
        n_items += H * ((n + CH - 1) / CH);
    }

    job J;
    memset(&J, 0, sizeof J);
    J.a = a;
    J.cfg = cfg;
    J.r = nq / H;
    J.nq = nq;
    J.D = cfg->qk_dim;
    J.E = cfg->vo_dim;
    J.P = cfg->page_size;
    J.sm = sm;
    J.want_bound = bound != NULL;
    int rc = -1;
    item *items = malloc((n_items ? n_items : 1) * sizeof *items);
    size_t *first = malloc((pt->batch + 1) * sizeof *first);
    size_t *nch = malloc((pt->batch + 1) * sizeof *nch);
    J.pm = malloc(n_items * J.r * 3 * sizeof(double) + 1);
    J.pN = malloc(n_items * J.r * J.E * sizeof(double) + 1);
    J.pV = malloc(n_items * J.E * sizeof(double) + 1);
    if (items == NULL || first == NULL || nch == NULL || J.pm == NULL || J.pN == NULL ||
        J.pV == NULL) {
        lowp_why_set(why, why_len, "out of memory for %zu decode work items", n_items);
        goto done;
    }
    J.pL = J.pm + n_items * J.r;
    J.pS = J.pL + n_items * J.r;
    if (side_init(&J.K, a->cache, LOWP_KV_K, why, why_len) ||
        side_init(&J.V, a->cache, LOWP_KV_V, why, why_len))
        goto done;
    luts_init(&J.lt, cfg->format);
    {
        size_t k = 0;
        for (size_t b = 0; b < pt->batch; b++) {
            size_t n = lowp_kv_seq_len(pt, cfg->page_size, b), C = (n + CH - 1) / CH;
            nch[b] = C;
            /* chunk-major: a chunk's KV heads run one after another, so the cache lines
             * they share (NHD rows of neighbouring heads, a slot's scales) are still near */
            first[b] = k;
            for (size_t c = 0; c < C; c++)
                for (size_t g = 0; g < H; g++)
                    items[k++] = (item){b, g, c};
        }
    }
    int nt = a->threads > 0 ? a->threads : omp_get_max_threads();
    int nomem = 0;
#pragma omp parallel num_threads(nt) reduction(| : nomem)
    {
        tbuf tb;
        tb.kbuf = malloc(J.D * sizeof(double));
        tb.vbuf = malloc(4 * J.E * sizeof(double));
        tb.sc = malloc(J.r * CH * sizeof(double));
        if (tb.kbuf == NULL || tb.vbuf == NULL || tb.sc == NULL)
            nomem = 1;
#pragma omp for schedule(dynamic, 1)
        for (long i = 0; i < (long)n_items; i++)
            if (tb.kbuf != NULL && tb.vbuf != NULL && tb.sc != NULL)
                run_item(&J, (size_t)i, &items[i], &tb);
#pragma omp barrier
#pragma omp for schedule(static)
        for (long x = 0; x < (long)(pt->batch * nq); x++) {
            size_t b = (size_t)x / nq, h = (size_t)x % nq;
            merge(&J, first[b] + h / J.r, H, nch[b], b, h, out + (size_t)x * J.E,
                  bound ? bound + (size_t)x * J.E : NULL);
        }
        free(tb.kbuf);
        free(tb.vbuf);
        free(tb.sc);
    }
    if (nomem) {
        lowp_why_set(why, why_len, "out of memory for the decode's thread buffers");
        goto done;
    }
    rc = 0;
done:
    side_free(&J.K);
    side_free(&J.V);
    free(items);
    free(first);
    free(nch);
    free(J.pm);
    free(J.pN);
    free(J.pV);
    return rc;
}
