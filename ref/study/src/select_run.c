/* ref/study/src/select_run.c: a selector over query rows, beside the reference keys, and
 * the drift of every selection (lowp/select_run.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lowp/format.h"
#include "lowp/select_run.h"
#include "lowp/stats.h"
#include "lowp/why.h"

static const char *const selector_names[LOWP_SELECTOR_COUNT] = {"qsa", "dsa", "moba", "nsa"};

const char *lowp_selector_name(lowp_selector_kind k)
{
    return (unsigned)k < LOWP_SELECTOR_COUNT ? selector_names[k] : "?";
}

int lowp_selector_parse(const char *name, lowp_selector_kind *out)
{
    for (int i = 0; i < LOWP_SELECTOR_COUNT; i++)
        if (strcmp(name, selector_names[i]) == 0) {
            *out = (lowp_selector_kind)i;
            return 0;
        }
    return -1;
}

lowp_select_spec lowp_select_spec_default(lowp_selector_kind kind, size_t q_heads, size_t kv_heads, size_t dim)
{
    lowp_select_spec s;
    memset(&s, 0, sizeof s);
    s.kind = kind;
    s.keys = "bf16";
    s.scale = LOWP_SWEEP_SCALE_CALIBRATED;
    s.qsa = lowp_qsa_config_default();
    s.qsa.index_heads = q_heads;
    s.qsa.head_dim = dim;
    if (s.qsa.rotary_dim > dim)
        s.qsa.rotary_dim = dim - dim % 2;
    s.dsa = lowp_dsa_config_default();
    s.dsa.heads = q_heads;
    s.dsa.head_dim = dim;
    s.bs.method = kind == LOWP_SEL_NSA ? LOWP_BLOCKSEL_NSA : LOWP_BLOCKSEL_MOBA;
    s.bs.q_heads = q_heads;
    s.bs.kv_heads = kv_heads;
    s.bs.head_dim = dim;
    s.bs.block = kind == LOWP_SEL_NSA ? 64 : 512;
    s.bs.topk = kind == LOWP_SEL_NSA ? 16 : 3;
    s.bs.sink_blocks = kind == LOWP_SEL_NSA ? 1 : 0;
    s.bs.local_blocks = kind == LOWP_SEL_NSA ? 2 : 1;
    return s;
}

/* The prepared keys of one side (the spec's format, or the reference). */
typedef struct prepared {
    lowp_qsa_config qsa;
    lowp_dsa_config dsa;
    double *qsa_kb, *qsa_kd; /* QSA: the stored index keys and their element bounds */
    float *dsa_kq, *dsa_ks, *main_k;
    double *dsa_kd;          /* DSA: the keys' element bounds */
    double *kdsum;           /* MoBA: per block, the sum of the keys' element bounds */
    int bounded;             /* the score bounds hold for these keys */
    lowp_quant_counts counts;
    float dec;
} prepared;

static void prepared_free(prepared *p)
{
    free(p->qsa_kb);
    free(p->qsa_kd);
    free(p->kdsum);
    free(p->dsa_kq);
    free(p->dsa_ks);
    free(p->dsa_kd);
    free(p->main_k);
    memset(p, 0, sizeof *p);
}

static size_t to_bf16(float *x, size_t n)
{
    lowp_codec c;
    lowp_codec_init(&c, LOWP_BF16, LOWP_PROFILE_TORCH, LOWP_RN, 0, NULL, 0);
    size_t changed = 0;
    for (size_t i = 0; i < n; i++) {
        float r = lowp_decode_f32(LOWP_BF16, lowp_encode_f32(&c, x[i]));
        changed += r != x[i];
        x[i] = r;
    }
    return changed;
}

/* Rows of the main keys quantized per call of lowp_block_quantize: bounds the scratch
 * (QUANT_ROWS x padded dim binary64 values, a few MiB) whatever the context. */
#define QUANT_ROWS 4096

/* MoBA's and NSA's quantized main keys: each row of d quantized along the head dim, padded
 * with zeros to whole blocks and to an even count (lowp_sweep_quantize_exact's layout, so a
 * block never straddles two rows), dequantized exactly and rounded once to binary32 (the
 * value a kernel reads). Each element's bound (lowp_select_quant_bound,
 * the padded zeros' included: they are quantized with their block) is checked against the
 * binary32 key and summed per block into kdsum; where one fails (a clamp the bound does not
 * cover, or NaN), nothing is certified. */
static int quantize_keys(lowp_block_format f, lowp_recipe r, lowp_global_scale gs, const float *k, size_t ctx,
                         size_t kvh, size_t d, size_t block, prepared *p, char *why, size_t wl)
{
    size_t bs = lowp_block_size(f), dp = (d + bs - 1) / bs * bs;
    dp += dp % 2;
    size_t cap = QUANT_ROWS * dp, rows = ctx * kvh;
    float *pad = calloc(cap, sizeof *pad);
    uint8_t *codes = malloc(lowp_block_code_bytes(f, cap) + 1);
    uint8_t *scales = malloc(cap / bs + 1);
    double *deq = malloc(cap * sizeof *deq), *dl = malloc(cap * sizeof *dl);
    int rc = pad == NULL || codes == NULL || scales == NULL || deq == NULL || dl == NULL
                 ? lowp_why_set(why, wl, "out of memory for the keys")
                 : 0;
    p->bounded = 1;
    for (size_t t0 = 0; rc == 0 && t0 < rows; t0 += QUANT_ROWS) {
        size_t nr = rows - t0 < QUANT_ROWS ? rows - t0 : QUANT_ROWS;
        for (size_t j = 0; j < nr; j++)
            memcpy(pad + j * dp, k + (t0 + j) * d, d * sizeof *pad); /* the padding stays 0 */
        rc = lowp_block_quantize(f, r, gs, 0, pad, nr * dp, codes, scales, &p->counts, why, wl);
        if (rc)
            break;
        lowp_stats_dequantize_f64(f, gs.dec, codes, scales, nr * dp, deq);
        lowp_select_quant_bound(f, gs.dec, codes, scales, nr * dp, dl);
        for (size_t j = 0; j < nr; j++) {
            size_t t = t0 + j;
            float *o = p->main_k + t * d;
            const double *v = deq + j * dp;
            for (size_t e = 0; e < d; e++)
                o[e] = (float)v[e];
            double *sum = p->kdsum + ((t / kvh) / block * kvh + t % kvh) * d;
            const double *de = dl + j * dp;
            for (size_t e = 0; e < d; e++) {
                if (!(fabs(v[e] - (double)k[t * d + e]) <= de[e]))
                    p->bounded = 0;
                sum[e] += de[e];
            }
        }
    }
    free(pad);
    free(codes);
    free(scales);
    free(deq);
    free(dl);
    return rc;
}

static int prepare(const lowp_select_spec *s, const char *keys, const lowp_select_inputs *in, const float *k,
                   const float *wk, prepared *p, char *why, size_t wl)
{
    memset(p, 0, sizeof *p);
    p->qsa = s->qsa;
    p->dsa = s->dsa;
    p->dec = 1.0f;
    size_t ctx = in->ctx, d = in->dim;
    if (s->kind == LOWP_SEL_QSA) {
        static const char *names[] = {"bf16", "e4m3", "nvfp4", "mxfp4", "mxfp8"};
        size_t f = 0;
        while (f < 5 && strcmp(keys, names[f]) != 0)
            f++;
        if (f == 5)
            return lowp_why_set(why, wl, "keys '%s' (bf16 e4m3 nvfp4 mxfp4 mxfp8)", keys);
        p->qsa.keys = (lowp_qsa_keys)f;
        if (f >= 2) {
            lowp_block_format bf = f == 2 ? LOWP_NVFP4 : f == 3 ? LOWP_MXFP4 : LOWP_MXFP8;
            lowp_recipe r = bf == LOWP_NVFP4 ? LOWP_RECIPE_TRTLLM : LOWP_RECIPE_OCP;
            if (s->recipe != NULL && lowp_recipe_parse(s->recipe, &r))
                return lowp_why_set(why, wl, "unknown recipe '%s'", s->recipe);
            p->qsa.recipe = r;
        }
        p->qsa_kb = malloc((ctx / p->qsa.ratio + 1) * d * sizeof *p->qsa_kb);
        p->qsa_kd = malloc((ctx / p->qsa.ratio + 1) * d * sizeof *p->qsa_kd);
        if (p->qsa_kb == NULL || p->qsa_kd == NULL)
            return lowp_why_set(why, wl, "out of memory for the index keys");
        p->bounded = 1;
        return lowp_qsa_compress(&p->qsa, k, ctx, wk, p->qsa_kb, p->qsa_kd, why, wl);
    }
    if (s->kind == LOWP_SEL_DSA) {
        if (strcmp(keys, "fp8") == 0)
            p->dsa.keys = LOWP_DSA_KEYS_FP8;
        else if (strcmp(keys, "fp4") == 0 || strcmp(keys, "fp4-deepgemm") == 0) {
            p->dsa.keys = LOWP_DSA_KEYS_FP4;
            p->dsa.fp4_round = keys[3] ? LOWP_DSA_FP4_DEEPGEMM : LOWP_DSA_FP4_RNE;
        } else if (strcmp(keys, "bf16") == 0)
            p->dsa.keys = LOWP_DSA_KEYS_BF16;
        else
            return lowp_why_set(why, wl, "keys '%s' (bf16 fp8 fp4 fp4-deepgemm)", keys);
        p->dsa_kq = malloc(ctx * d * sizeof *p->dsa_kq + 1);
        p->dsa_ks = malloc(ctx * sizeof *p->dsa_ks + 1);
        p->dsa_kd = malloc(ctx * d * sizeof *p->dsa_kd + 1);
        if (p->dsa_kq == NULL || p->dsa_ks == NULL || p->dsa_kd == NULL)
            return lowp_why_set(why, wl, "out of memory for the index keys");
        p->bounded = 1; /* scales from each row's amax: no clamp the bound misses */
        return lowp_dsa_keys_quantize(&p->dsa, k, ctx, p->dsa_kq, p->dsa_ks, p->dsa_kd, why, wl);
    }
    size_t n = ctx * in->kv_heads * d;
    p->main_k = malloc(n * sizeof *p->main_k + 1);
    if (p->main_k == NULL)
        return lowp_why_set(why, wl, "out of memory for the keys");
    /* MoBA and NSA both bound their scores from the keys' per-block sums of element bounds */
    size_t nbk = (ctx + s->bs.block - 1) / (s->bs.block ? s->bs.block : 1), kvh = in->kv_heads;
    p->kdsum = calloc(nbk * kvh * d + 1, sizeof *p->kdsum);
    if (p->kdsum == NULL)
        return lowp_why_set(why, wl, "out of memory for the key bounds");
    if (strcmp(keys, "bf16") == 0) {
        memcpy(p->main_k, k, n * sizeof *k);
        to_bf16(p->main_k, n);
        /* |bf16(x) - x| <= half an ulp <= 2^-8 |bf16(x)| + 2^-134 (subnormals) */
        for (size_t i = 0; i < n; i++)
            p->kdsum[(i / (kvh * d) / s->bs.block) * kvh * d + i % (kvh * d)] +=
                0x1p-8 * fabs((double)p->main_k[i]) + 0x1p-134;
        p->bounded = 1;
        return 0;
    }
    lowp_block_format f;
    if (lowp_block_format_parse(keys, &f) || f == LOWP_BF16_PASS)
        return lowp_why_set(why, wl, "keys '%s' (bf16 fp8_e4m3 fp8_e5m2 nvfp4 mxfp4 mxfp8)", keys);
    lowp_recipe r = lowp_recipe_default(f);
    if (s->recipe != NULL && lowp_recipe_parse(s->recipe, &r))
        return lowp_why_set(why, wl, "unknown recipe '%s'", s->recipe);
    if (lowp_recipe_check(f, r, why, wl))
        return -1;
    float amax = 0;
    for (size_t i = 0; i < n; i++)
        amax = fabsf(k[i]) > amax ? fabsf(k[i]) : amax;
    lowp_global_scale gs = lowp_sweep_global_scale(f, r, s->scale, amax);
    p->dec = gs.dec;
    return quantize_keys(f, r, gs, k, ctx, kvh, d, s->bs.block, p, why, wl);
}

/* scores of row r into sc[units][cand] (-Inf past the visible ones), *vis the visible
 * count, and where bnd is not NULL and the selector has one, the score bounds (else 0) */
static int score_row(const lowp_select_spec *s, const prepared *p, const lowp_select_inputs *in, const float *q,
                     const float *wq, const float *w, size_t units, size_t cand, size_t r, float *sc, double *bnd,
                     size_t *vis, char *why, size_t wl)
{
    size_t pos = in->q_offset + r, d = in->dim, H = in->q_heads;
    for (size_t i = 0; i < units * cand; i++) {
        sc[i] = -INFINITY;
        if (bnd)
            bnd[i] = 0.0;
    }
    if (s->kind == LOWP_SEL_QSA) {
        float *qo = malloc(H * d * sizeof *qo);
        if (qo == NULL)
            return lowp_why_set(why, wl, "out of memory");
        int rc = lowp_qsa_query(&p->qsa, q + r * H * d, pos, wq, qo, why, wl) ||
                 lowp_qsa_scores(&p->qsa, qo, p->qsa_kb, in->ctx, pos, sc, vis, why, wl) ||
                 (bnd && lowp_qsa_score_bounds(&p->qsa, qo, p->qsa_kb, p->qsa_kd, in->ctx, pos, sc, bnd, why, wl));
        free(qo);
        return rc ? -1 : 0;
    }
    if (s->kind == LOWP_SEL_DSA)
        return lowp_dsa_scores(&p->dsa, q + r * H * d, w + r * H, p->dsa_kq, p->dsa_ks, in->ctx, pos, sc, vis,
                               why, wl) ||
                       (bnd && lowp_dsa_score_bounds(&p->dsa, q + r * H * d, w + r * H, p->dsa_kq, p->dsa_ks,
                                                     p->dsa_kd, in->ctx, pos, sc, bnd, why, wl))
                   ? -1
                   : 0;
    size_t nb, m = units * (pos / s->bs.block + 1);
    float *tmp = malloc(m * sizeof *tmp);
    double *btmp = malloc(m * sizeof *btmp);
    if (tmp == NULL || btmp == NULL) {
        free(tmp);
        free(btmp);
        return lowp_why_set(why, wl, "out of memory");
    }
    int rc = lowp_blocksel_scores(&s->bs, q + r * H * d, p->main_k, in->ctx, pos, tmp, &nb, why, wl);
    int bounds = rc == 0 && bnd;
    if (bounds)
        rc = (s->kind == LOWP_SEL_MOBA ? lowp_moba_score_bounds : lowp_nsa_score_bounds)(
            &s->bs, q + r * H * d, p->main_k, p->kdsum, in->ctx, pos, tmp, btmp, why, wl);
    for (size_t u = 0; rc == 0 && u < units; u++) {
        memcpy(sc + u * cand, tmp + u * nb, nb * sizeof *tmp);
        if (bounds)
            memcpy(bnd + u * cand, btmp + u * nb, nb * sizeof *btmp);
    }
    free(tmp);
    free(btmp);
    *vis = nb;
    return rc;
}

/* ------------------------------------------------------------------ rows read once */

/* The rows of a [ctx][kvh][d] tensor as the sparse attention reads them: BF16 values, or a
 * block format's elements x block scales (the decode-side global scale left out: it is the
 * attention's k_scale / v_scale), converted the first time a row is read, in chunks of
 * ROW_CHUNK tokens of one KV head. A run thus converts each row at most once, not once per
 * query head and run, and only the chunks its selections reach (memory follows what the
 * selections touch, not the context). A chunk quantized at once equals its rows quantized
 * one by one: d is a multiple of the block size (values_setup checks it), so no block
 * straddles two rows. */
#define ROW_CHUNK 64

typedef struct row_cache {
    const float *x;
    size_t ctx, kvh, d, nchunks;
    lowp_block_format f; /* LOWP_BF16_PASS: BF16 values */
    lowp_recipe r;
    lowp_global_scale gs;
    float **chunk;           /* [ctx / ROW_CHUNK rounded up][kvh], NULL until read */
    uint8_t *codes, *scales; /* scratch of one chunk */
    double *deq;
} row_cache;

static int row_cache_init(row_cache *c, const float *x, size_t ctx, size_t kvh, size_t d, lowp_block_format f,
                          lowp_recipe r, lowp_global_scale gs)
{
    *c = (row_cache){.x = x, .ctx = ctx, .kvh = kvh, .d = d, .f = f, .r = r, .gs = gs,
                     .nchunks = (ctx + ROW_CHUNK - 1) / ROW_CHUNK * kvh};
    c->chunk = calloc(c->nchunks + 1, sizeof *c->chunk);
    if (f != LOWP_BF16_PASS) {
        c->codes = malloc(lowp_block_code_bytes(f, ROW_CHUNK * d) + 1);
        c->scales = malloc(ROW_CHUNK * d / lowp_block_size(f) + 1);
        c->deq = malloc(ROW_CHUNK * d * sizeof *c->deq);
    }
    return c->chunk == NULL || (f != LOWP_BF16_PASS && (c->codes == NULL || c->scales == NULL || c->deq == NULL))
               ? -1
               : 0;
}

static void row_cache_free(row_cache *c)
{
    for (size_t i = 0; c->chunk != NULL && i < c->nchunks; i++)
        free(c->chunk[i]);
    free(c->chunk);
    free(c->codes);
    free(c->scales);
    free(c->deq);
    memset(c, 0, sizeof *c);
}

/* row (t, g), t < ctx, g < kvh; NULL with a reason on failure */
static const float *row_at(row_cache *c, size_t t, size_t g, char *why, size_t wl)
{
    size_t ci = t / ROW_CHUNK * c->kvh + g, t0 = t / ROW_CHUNK * ROW_CHUNK, d = c->d;
    if (c->chunk[ci] == NULL) {
        size_t nt = c->ctx - t0 < ROW_CHUNK ? c->ctx - t0 : ROW_CHUNK;
        float *o = malloc(nt * d * sizeof *o);
        if (o == NULL) {
            lowp_why_set(why, wl, "out of memory for the cache rows");
            return NULL;
        }
        for (size_t j = 0; j < nt; j++)
            memcpy(o + j * d, c->x + ((t0 + j) * c->kvh + g) * d, d * sizeof *o);
        if (c->f == LOWP_BF16_PASS)
            to_bf16(o, nt * d);
        else if (lowp_block_quantize(c->f, c->r, c->gs, 0, o, nt * d, c->codes, c->scales, NULL, why, wl)) {
            free(o);
            return NULL;
        } else { /* exact, then rounded once: lowp_block_dequantize_f32's value, from tables */
            lowp_stats_dequantize_f64(c->f, 1.0f, c->codes, c->scales, nt * d, c->deq);
            for (size_t i = 0; i < nt * d; i++)
                o[i] = (float)c->deq[i];
        }
        c->chunk[ci] = o;
    }
    return c->chunk[ci] + (t - t0) * d;
}

/* ------------------------------------------------------------------ the sparse attention */

/* The values' cache of the quantized-values runs: a block format (LOWP_BF16_PASS: the
 * unquantized BF16 cache), its recipe and the K and V global scales. */
typedef struct values_cache {
    lowp_block_format f;
    lowp_recipe r;
    lowp_global_scale gk, gv;
} values_cache;

static int values_setup(const lowp_select_spec *s, const lowp_select_inputs *in, const float *k, values_cache *vc,
                        char *name, char *why, size_t wl)
{
    const char *keys = s->keys ? s->keys : "bf16", *v = s->values;
    int main_keys = s->kind == LOWP_SEL_MOBA || s->kind == LOWP_SEL_NSA;
    if (v == NULL) {
        if (main_keys)
            v = keys;
        else if (strcmp(keys, "e4m3") == 0 || strcmp(keys, "fp8") == 0)
            v = "fp8_e4m3";
        else if (strncmp(keys, "fp4", 3) == 0)
            v = "mxfp4";
        else
            v = keys;
    }
    if (lowp_block_format_parse(v, &vc->f))
        return lowp_why_set(why, wl, "values '%s' (bf16 fp8_e4m3 fp8_e5m2 nvfp4 mxfp4 mxfp8)", v);
    snprintf(name, 16, "%s", lowp_block_format_name(vc->f));
    vc->r = lowp_recipe_default(vc->f);
    if (main_keys && s->values == NULL && s->recipe != NULL && lowp_recipe_parse(s->recipe, &vc->r))
        return lowp_why_set(why, wl, "unknown recipe '%s'", s->recipe);
    if (lowp_recipe_check(vc->f, vc->r, why, wl))
        return -1;
    size_t d = in->dim, bs = lowp_block_size(vc->f), n = in->ctx * in->kv_heads * d;
    if (d % bs || (bs > 1 && d % 2))
        return lowp_why_set(why, wl, "%s values need a head dim that is a multiple of %zu, not %zu",
                            lowp_block_format_name(vc->f), bs, d);
    float ka = 0, va = 0;
    for (size_t i = 0; i < n; i++) {
        ka = fabsf(k[i]) > ka ? fabsf(k[i]) : ka;
        va = fabsf(in->v[i]) > va ? fabsf(in->v[i]) : va;
    }
    vc->gk = lowp_sweep_global_scale(vc->f, vc->r, s->scale, ka);
    vc->gv = lowp_sweep_global_scale(vc->f, vc->r, s->scale, va);
    return 0;
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* tokens per candidate of the selector */
static size_t tokens_per(const lowp_select_spec *s)
{
    return s->kind == LOWP_SEL_QSA ? s->qsa.ratio : s->kind == LOWP_SEL_DSA ? 1 : s->bs.block;
}

/* the tokens a selection sel[0..n) attends at pos, ascending; returns their count */
static size_t selection_tokens(const lowp_select_spec *s, const int32_t *sel, size_t n, size_t pos, int32_t *blk,
                               int32_t *tok)
{
    memcpy(blk, sel, n * sizeof *blk);
    qsort(blk, n, sizeof *blk, cmp_i32);
    size_t w = 0, per = tokens_per(s);
    for (size_t i = 0; i < n; i++)
        for (size_t t = (size_t)blk[i] * per; t < ((size_t)blk[i] + 1) * per && t <= pos; t++)
            tok[w++] = (int32_t)t;
    if (s->kind == LOWP_SEL_QSA) /* the open tail */
        for (size_t t = (pos + 1) / per * per; t <= pos; t++)
            tok[w++] = (int32_t)t;
    return w;
}

/* Scratch of the attention runs: a selection's tokens, and the gathered K and V rows. */
typedef struct attn_work {
    int32_t *blk, *tok[2]; /* [0] the reference selection's tokens, [1] the quantized keys' */
    size_t ntok[2];
    float *kg, *vg;
    double *out;           /* [3][dim]: sel, val, both */
} attn_work;

static void attn_free(attn_work *a)
{
    free(a->blk);
    free(a->tok[0]);
    free(a->tok[1]);
    free(a->kg);
    free(a->vg);
    free(a->out);
    memset(a, 0, sizeof *a);
}

static int attn_alloc(attn_work *a, size_t cap, size_t d)
{
    a->blk = malloc((cap + 1) * sizeof *a->blk);
    a->tok[0] = malloc((cap + 1) * sizeof *a->tok[0]);
    a->tok[1] = malloc((cap + 1) * sizeof *a->tok[1]);
    a->kg = malloc((cap + 1) * d * sizeof *a->kg);
    a->vg = malloc((cap + 1) * d * sizeof *a->vg);
    a->out = malloc(3 * d * sizeof *a->out);
    return a->blk == NULL || a->tok[0] == NULL || a->tok[1] == NULL || a->kg == NULL || a->vg == NULL ||
                   a->out == NULL
               ? -1
               : 0;
}

/* The attention of query q (BF16 values) over tokens tok[0..n) of KV head g, K and V rows
 * from kc and vc, into out[dim]: the binary64 path when sa->path is LOWP_SPARSE_EXACT. */
static int attn_over(const lowp_sparse_attn_args *sa, row_cache *kc, row_cache *vc, attn_work *a, const int32_t *tok,
                     size_t n, size_t g, const float *q, const float *gate, double *out, char *why, size_t wl)
{
    size_t d = sa->dim;
    for (size_t j = 0; j < n; j++) {
        const float *kr = row_at(kc, (size_t)tok[j], g, why, wl), *vr = kr ? row_at(vc, (size_t)tok[j], g, why, wl) : NULL;
        if (vr == NULL)
            return -1;
        memcpy(a->kg + j * d, kr, d * sizeof *kr);
        memcpy(a->vg + j * d, vr, d * sizeof *vr);
    }
    return lowp_sparse_attn(sa, q, a->kg, a->vg, n, gate, out, why, wl);
}

/* ------------------------------------------------------------------ the reference side */

/* Everything a run computes from the reference (BF16) keys alone: the same for every keys /
 * recipe / scale / values choice of one case, so lowp-select-sweep makes it once per case. */
struct lowp_select_ref {
    int filled;
    lowp_select_spec spec;   /* the case it was made for (kind and geometry) */
    lowp_select_inputs in;
    size_t units, cand, K;
    float *q, *k, *w, *wq, *wk; /* the inputs as the selectors read them (QSA, DSA: BF16); k NULL: in.k */
    size_t rounded;
    prepared keys;           /* the reference keys */
    float *sc;               /* [q_len][units][cand] their scores */
    double *bnd;             /* [q_len][units][cand] the scores' bounds (where keys.bounded) */
    int32_t *sel;            /* [q_len][units][K] their selections, and sizes nsel[q_len][units] */
    size_t *nsel, *vis;      /* vis[q_len]: visible candidates */
    /* the sparse attention (in.v given) */
    float *qa;               /* [q_len][q_heads][dim] the queries in BF16 */
    row_cache kb, vb;        /* the BF16 K and V rows */
    double *exact;           /* [q_len][q_heads][dim] the exact outputs: reference selection, BF16 K / V */
    double ex2;              /* their sum of squares */
};

lowp_select_ref *lowp_select_ref_new(void) { return calloc(1, sizeof(lowp_select_ref)); }

static void ref_clear(lowp_select_ref *f)
{
    free(f->q);
    free(f->k);
    free(f->w);
    free(f->wq);
    free(f->wk);
    prepared_free(&f->keys);
    free(f->sc);
    free(f->bnd);
    free(f->sel);
    free(f->nsel);
    free(f->vis);
    free(f->qa);
    row_cache_free(&f->kb);
    row_cache_free(&f->vb);
    free(f->exact);
    memset(f, 0, sizeof *f);
}

void lowp_select_ref_free(lowp_select_ref *f)
{
    if (f == NULL)
        return;
    ref_clear(f);
    free(f);
}

/* 1 when specs a and b make the same reference: the kind and the geometry (keys, recipe,
 * scale and values do not enter it) */
static int same_case(const lowp_select_spec *a, const lowp_select_spec *b)
{
    if (a->kind != b->kind)
        return 0;
    if (a->kind == LOWP_SEL_QSA) {
        const lowp_qsa_config *x = &a->qsa, *y = &b->qsa;
        return x->index_heads == y->index_heads && x->head_dim == y->head_dim && x->rotary_dim == y->rotary_dim &&
               x->ratio == y->ratio && x->topk == y->topk && x->divide == y->divide &&
               x->rope_theta == y->rope_theta && x->eps == y->eps;
    }
    if (a->kind == LOWP_SEL_DSA) /* BF16 keys: no scales, so no floors or scale format */
        return a->dsa.heads == b->dsa.heads && a->dsa.head_dim == b->dsa.head_dim && a->dsa.topk == b->dsa.topk;
    const lowp_blocksel_config *x = &a->bs, *y = &b->bs;
    return x->method == y->method && x->q_heads == y->q_heads && x->kv_heads == y->kv_heads &&
           x->head_dim == y->head_dim && x->block == y->block && x->topk == y->topk &&
           x->sink_blocks == y->sink_blocks && x->local_blocks == y->local_blocks;
}

static int same_inputs(const lowp_select_inputs *a, const lowp_select_inputs *b)
{
    return a->q == b->q && a->k == b->k && a->wq == b->wq && a->wk == b->wk && a->w == b->w && a->q_len == b->q_len &&
           a->q_heads == b->q_heads && a->ctx == b->ctx && a->kv_heads == b->kv_heads && a->dim == b->dim &&
           a->q_offset == b->q_offset && a->v == b->v && a->gate == b->gate;
}

/* the K rows the attention reads: QSA's and DSA's BF16 copy, else the main keys */
static const float *attn_keys(const lowp_select_ref *f) { return f->k ? f->k : f->in.k; }

/* Fills f for spec s and inputs in (units, cand, K checked by the caller). */
static int ref_fill(lowp_select_ref *f, const lowp_select_spec *s, const lowp_select_inputs *in, size_t units,
                    size_t cand, size_t K, char *why, size_t wl)
{
    size_t ctx = in->ctx, d = in->dim, H = in->q_heads, qlen = in->q_len;
    f->spec = *s;
    f->in = *in;
    f->units = units;
    f->cand = cand;
    f->K = K;
    /* QSA and DSA hold q and k in BF16: round copies */
    f->q = malloc(qlen * H * d * sizeof *f->q);
    if (f->q == NULL)
        return lowp_why_set(why, wl, "out of memory");
    memcpy(f->q, in->q, qlen * H * d * sizeof *f->q);
    if (s->kind == LOWP_SEL_QSA || s->kind == LOWP_SEL_DSA) {
        f->k = malloc(ctx * d * sizeof *f->k);
        if (f->k == NULL)
            return lowp_why_set(why, wl, "out of memory");
        memcpy(f->k, in->k, ctx * d * sizeof *f->k);
        f->rounded = to_bf16(f->q, qlen * H * d) + to_bf16(f->k, ctx * d);
    }
    if (s->kind == LOWP_SEL_QSA) {
        f->wq = calloc(d, sizeof *f->wq);
        f->wk = calloc(d, sizeof *f->wk);
        if (f->wq == NULL || f->wk == NULL)
            return lowp_why_set(why, wl, "out of memory");
        if (in->wq)
            memcpy(f->wq, in->wq, d * sizeof *f->wq);
        if (in->wk)
            memcpy(f->wk, in->wk, d * sizeof *f->wk);
    }
    if (s->kind == LOWP_SEL_DSA) {
        f->w = malloc(qlen * H * sizeof *f->w);
        if (f->w == NULL)
            return lowp_why_set(why, wl, "out of memory");
        for (size_t i = 0; i < qlen * H; i++)
            f->w[i] = in->w ? in->w[i] : 1.0f;
        to_bf16(f->w, qlen * H);
    }
    if (prepare(s, "bf16", in, attn_keys(f), f->wk, &f->keys, why, wl))
        return -1;
    f->sc = malloc(qlen * units * cand * sizeof *f->sc);
    f->bnd = f->keys.bounded ? malloc(qlen * units * cand * sizeof *f->bnd) : NULL;
    f->sel = malloc(qlen * units * K * sizeof *f->sel);
    f->nsel = malloc(qlen * units * sizeof *f->nsel);
    f->vis = malloc(qlen * sizeof *f->vis);
    if (f->sc == NULL || (f->keys.bounded && f->bnd == NULL) || f->sel == NULL || f->nsel == NULL || f->vis == NULL)
        return lowp_why_set(why, wl, "out of memory for %zu reference selections", qlen * units);
    char inner[256];
    for (size_t r = 0; r < qlen; r++) {
        float *sc = f->sc + r * units * cand;
        if (score_row(s, &f->keys, in, f->q, f->wq, f->w, units, cand, r, sc,
                      f->bnd ? f->bnd + r * units * cand : NULL, &f->vis[r], inner, sizeof inner))
            return lowp_why_set(why, wl, "query row %zu, reference keys: %s", r, inner);
        for (size_t u = 0; u < units; u++)
            if (lowp_topk(sc + u * cand, f->vis[r], K, f->sel + (r * units + u) * K, &f->nsel[r * units + u],
                          inner, sizeof inner))
                return lowp_why_set(why, wl, "query row %zu, unit %zu, reference keys: %s", r, u, inner);
    }
    if (in->v == NULL)
        return 0;
    /* the exact attention over the reference selections */
    f->qa = malloc(qlen * H * d * sizeof *f->qa);
    f->exact = malloc(qlen * H * d * sizeof *f->exact);
    lowp_global_scale one = {1.0f, 1.0f};
    attn_work aw;
    memset(&aw, 0, sizeof aw);
    int rc = f->qa == NULL || f->exact == NULL || attn_alloc(&aw, K * tokens_per(s) + tokens_per(s), d) ||
             row_cache_init(&f->kb, attn_keys(f), ctx, in->kv_heads, d, LOWP_BF16_PASS, 0, one) ||
             row_cache_init(&f->vb, in->v, ctx, in->kv_heads, d, LOWP_BF16_PASS, 0, one);
    if (rc)
        rc = lowp_why_set(why, wl, "out of memory for the sparse attention");
    else {
        memcpy(f->qa, f->q, qlen * H * d * sizeof *f->qa);
        to_bf16(f->qa, qlen * H * d);
    }
    lowp_sparse_attn_args sa = {LOWP_SPARSE_EXACT, d, 1.0, 1.0};
    size_t G = H / in->kv_heads;
    for (size_t r = 0; rc == 0 && r < qlen; r++)
        for (size_t h = 0; rc == 0 && h < H; h++) {
            size_t u = s->kind == LOWP_SEL_MOBA ? h : s->kind == LOWP_SEL_NSA ? h / G : 0;
            size_t n = selection_tokens(s, f->sel + (r * units + u) * K, f->nsel[r * units + u], in->q_offset + r,
                                        aw.blk, aw.tok[0]);
            double *o = f->exact + (r * H + h) * d;
            if (attn_over(&sa, &f->kb, &f->vb, &aw, aw.tok[0], n, h / G, f->qa + (r * H + h) * d,
                          in->gate ? in->gate + (r * H + h) * d : NULL, o, inner, sizeof inner))
                rc = lowp_why_set(why, wl, "query row %zu, head %zu: attention: %s", r, h, inner);
            for (size_t e = 0; rc == 0 && e < d; e++)
                f->ex2 += o[e] * o[e];
        }
    attn_free(&aw);
    return rc;
}

/* ------------------------------------------------------------------ the run */

void lowp_select_result_free(lowp_select_result *r)
{
    if (r == NULL)
        return;
    free(r->indices);
    free(r->scores);
    free(r->index_list);
    free(r->ref_indices);
    memset(r, 0, sizeof *r);
}

/* units, candidates and top-k of spec s over the inputs, or -1 with a reason */
static int run_shape(const lowp_select_spec *s, const lowp_select_inputs *in, size_t *units, size_t *cand, size_t *K,
                     char *why, size_t wl)
{
    size_t ctx = in->ctx, d = in->dim, H = in->q_heads, kvh = in->kv_heads, qlen = in->q_len;
    if (qlen == 0 || ctx == 0 || d == 0 || H == 0 || kvh == 0)
        return lowp_why_set(why, wl, "an empty input");
    if (in->q_offset + qlen > ctx)
        return lowp_why_set(why, wl, "query rows at positions %zu..%zu, past the %zu keys", in->q_offset,
                            in->q_offset + qlen - 1, ctx);
    if ((s->kind == LOWP_SEL_QSA || s->kind == LOWP_SEL_DSA) && kvh != 1)
        return lowp_why_set(why, wl, "the index keys have one head, not %zu", kvh);
    if (s->kind == LOWP_SEL_QSA) {
        if (s->qsa.index_heads != H || s->qsa.head_dim != d)
            return lowp_why_set(why, wl, "qsa: the configuration has %zu heads of %zu, the queries %zu of %zu",
                                s->qsa.index_heads, s->qsa.head_dim, H, d);
        *units = 1;
        *cand = ctx / (s->qsa.ratio ? s->qsa.ratio : 1);
        *K = s->qsa.topk;
    } else if (s->kind == LOWP_SEL_DSA) {
        if (s->dsa.heads != H || s->dsa.head_dim != d)
            return lowp_why_set(why, wl, "dsa: the configuration has %zu heads of %zu, the queries %zu of %zu",
                                s->dsa.heads, s->dsa.head_dim, H, d);
        *units = 1;
        *cand = ctx;
        *K = s->dsa.topk;
    } else {
        if (s->bs.q_heads != H || s->bs.kv_heads != kvh || s->bs.head_dim != d)
            return lowp_why_set(why, wl, "%s: the configuration has %zu / %zu heads of %zu, the inputs %zu / %zu of %zu",
                                lowp_selector_name(s->kind), s->bs.q_heads, s->bs.kv_heads, s->bs.head_dim, H, kvh,
                                d);
        if (H % kvh)
            return lowp_why_set(why, wl, "%zu query heads are not a multiple of %zu KV heads", H, kvh);
        *units = lowp_blocksel_units(&s->bs);
        *cand = (ctx - 1) / (s->bs.block ? s->bs.block : 1) + 1;
        *K = s->bs.topk;
    }
    if (*K > *cand)
        return lowp_why_set(why, wl, "top-%zu of the %zu %s the %zu keys make", *K, *cand,
                            s->kind == LOWP_SEL_DSA ? "tokens" : "blocks", ctx);
    return 0;
}

int lowp_select_run(const lowp_select_spec *s, const lowp_select_inputs *in, lowp_select_result *out,
                    void (*progress)(void *arg, size_t done, size_t total), void *arg, char *why, size_t wl)
{
    lowp_select_ref *f = lowp_select_ref_new();
    if (f == NULL) {
        memset(out, 0, sizeof *out);
        return lowp_why_set(why, wl, "out of memory");
    }
    int rc = lowp_select_run_ref(s, in, f, out, progress, arg, why, wl);
    lowp_select_ref_free(f);
    return rc;
}

int lowp_select_run_ref(const lowp_select_spec *s, const lowp_select_inputs *in, lowp_select_ref *f,
                        lowp_select_result *out, void (*progress)(void *arg, size_t done, size_t total), void *arg,
                        char *why, size_t wl)
{
    memset(out, 0, sizeof *out);
    size_t units = 0, cand = 0, K = 0;
    if (run_shape(s, in, &units, &cand, &K, why, wl))
        return -1;
    if (f->filled && !(same_case(&f->spec, s) && same_inputs(&f->in, in)))
        return lowp_why_set(why, wl, "the reference was made for another selector, geometry or inputs");
    if (!f->filled) {
        if (ref_fill(f, s, in, units, cand, K, why, wl)) {
            ref_clear(f);
            return -1;
        }
        f->filled = 1;
    }
    size_t d = in->dim, H = in->q_heads, kvh = in->kv_heads, qlen = in->q_len, G = H / kvh;
    out->units = units;
    out->cand = cand;
    out->k = K;
    out->rounded = f->rounded;
    out->jaccard_min = 1.0;
    out->list_width = s->kind == LOWP_SEL_QSA ? lowp_qsa_index_width(&s->qsa) + 1 : 0;
    out->indices = malloc(qlen * units * K * sizeof *out->indices);
    out->ref_indices = malloc(qlen * units * K * sizeof *out->ref_indices);
    out->scores = malloc(qlen * units * cand * sizeof *out->scores);
    out->index_list = out->list_width ? malloc(qlen * out->list_width * sizeof *out->index_list) : NULL;
    double *bnd = malloc(units * cand * sizeof *bnd + 1);
    size_t *cnt = malloc(units * sizeof *cnt + 1);
    int rc = 0;
    if (out->indices == NULL || out->ref_indices == NULL || out->scores == NULL || bnd == NULL || cnt == NULL ||
        (out->list_width && out->index_list == NULL))
        rc = lowp_why_set(why, wl, "out of memory for %zu selections", qlen * units);
    else
        memcpy(out->ref_indices, f->sel, qlen * units * K * sizeof *f->sel);
    prepared mine;
    memset(&mine, 0, sizeof mine);
    if (rc == 0)
        rc = prepare(s, s->keys ? s->keys : "bf16", in, attn_keys(f), f->wk, &mine, why, wl);
    out->counts = mine.counts;
    out->dec = mine.dec;
    out->certifiable = rc == 0 && mine.bounded && f->keys.bounded;
    /* the sparse attention: the values' cache rows (the reference's BF16 rows for bf16) */
    attn_work aw;
    memset(&aw, 0, sizeof aw);
    values_cache vc;
    row_cache kq, vq;
    memset(&kq, 0, sizeof kq);
    memset(&vq, 0, sizeof vq);
    row_cache *kr = &f->kb, *vr = &f->vb;
    if (rc == 0 && in->v != NULL) {
        rc = values_setup(s, in, attn_keys(f), &vc, out->values, why, wl);
        if (rc == 0 && vc.f != LOWP_BF16_PASS) {
            kr = &kq;
            vr = &vq;
            if (row_cache_init(&kq, attn_keys(f), in->ctx, kvh, d, vc.f, vc.r, vc.gk) ||
                row_cache_init(&vq, in->v, in->ctx, kvh, d, vc.f, vc.r, vc.gv))
                rc = lowp_why_set(why, wl, "out of memory for the sparse attention");
        }
        if (rc == 0 && attn_alloc(&aw, K * tokens_per(s) + tokens_per(s), d))
            rc = lowp_why_set(why, wl, "out of memory for the sparse attention");
        out->attn = rc == 0;
    }
    lowp_sparse_attn_args exact = {LOWP_SPARSE_EXACT, d, 1.0, 1.0}, prod = exact;
    if (out->attn) {
        prod.path = vc.f == LOWP_BF16_PASS ? LOWP_SPARSE_BF16 : LOWP_SPARSE_FP8;
        prod.k_scale = vc.gk.dec;
        prod.v_scale = vc.gv.dec;
    }
    double se[3] = {0, 0, 0};
    char inner[256];
    for (size_t r = 0; rc == 0 && r < qlen; r++) {
        size_t vis = 0, rvis = f->vis[r], pos = in->q_offset + r;
        float *sc = out->scores + r * units * cand, *rsc = f->sc + r * units * cand;
        if (score_row(s, &mine, in, f->q, f->wq, f->w, units, cand, r, sc, out->certifiable ? bnd : NULL, &vis, inner,
                      sizeof inner)) {
            rc = lowp_why_set(why, wl, "query row %zu: %s", r, inner);
            break;
        }
        for (size_t u = 0; rc == 0 && u < units; u++) {
            size_t at = r * units + u, n = 0, rn = f->nsel[at];
            int32_t *sel = out->indices + at * K;
            const int32_t *rs = f->sel + at * K;
            lowp_select_drift dr;
            if (lowp_topk(sc + u * cand, vis, K, sel, &n, inner, sizeof inner))
                rc = lowp_why_set(why, wl, "query row %zu, unit %zu, keys %s: %s", r, u, s->keys, inner);
            else if (lowp_select_drift_of(rs, rn, sel, n, rsc + u * cand, rvis, &dr, inner, sizeof inner))
                rc = lowp_why_set(why, wl, "query row %zu: drift: %s", r, inner);
            else if (out->list_width && u == 0 &&
                     lowp_qsa_select(&mine.qsa, sc, vis, pos, out->index_list + r * out->list_width, NULL, NULL,
                                     inner, sizeof inner))
                rc = lowp_why_set(why, wl, "query row %zu: %s", r, inner);
            if (rc)
                break;
            cnt[u] = n;
            out->certified += out->certifiable && lowp_select_certified(sc + u * cand, bnd + u * cand, vis, sel, n) &&
                              lowp_select_certified(rsc + u * cand, f->bnd + at * cand, rvis, rs, rn);
            out->jaccard_sum += dr.jaccard;
            out->recall_sum += dr.recall;
            out->jaccard_min = dr.jaccard < out->jaccard_min ? dr.jaccard : out->jaccard_min;
            out->lost += dr.lost;
            out->deepest = dr.max_intruder_rank > out->deepest ? dr.max_intruder_rank : out->deepest;
            out->unchanged += dr.lost == 0 && dr.intruders == 0;
            out->selections++;
        }
        for (size_t h = 0; rc == 0 && out->attn && h < H; h++) {
            size_t u = s->kind == LOWP_SEL_MOBA ? h : s->kind == LOWP_SEL_NSA ? h / G : 0, at = r * units + u;
            aw.ntok[0] = selection_tokens(s, f->sel + at * K, f->nsel[at], pos, aw.blk, aw.tok[0]);
            aw.ntok[1] = selection_tokens(s, out->indices + at * K, cnt[u], pos, aw.blk, aw.tok[1]);
            const float *qh = f->qa + (r * H + h) * d, *gate = in->gate ? in->gate + (r * H + h) * d : NULL;
            const double *ex = f->exact + (r * H + h) * d;
            double *o_sel = aw.out, *o_val = aw.out + d, *o_both = aw.out + 2 * d;
            /* the same tokens give the same outputs: the changed selection's runs are the others' */
            int same = aw.ntok[0] == aw.ntok[1] && memcmp(aw.tok[0], aw.tok[1], aw.ntok[0] * sizeof *aw.tok[0]) == 0;
            if (attn_over(&prod, kr, vr, &aw, aw.tok[0], aw.ntok[0], h / G, qh, gate, o_val, inner, sizeof inner) ||
                (!same && (attn_over(&exact, &f->kb, &f->vb, &aw, aw.tok[1], aw.ntok[1], h / G, qh, gate, o_sel,
                                     inner, sizeof inner) ||
                           attn_over(&prod, kr, vr, &aw, aw.tok[1], aw.ntok[1], h / G, qh, gate, o_both, inner,
                                     sizeof inner)))) {
                rc = lowp_why_set(why, wl, "query row %zu, head %zu: attention: %s", r, h, inner);
                break;
            }
            if (same) {
                memcpy(o_sel, ex, d * sizeof *ex);
                memcpy(o_both, o_val, d * sizeof *o_val);
            }
            for (size_t e = 0; e < d; e++)
                for (int i = 0; i < 3; i++)
                    se[i] += (aw.out[i * d + e] - ex[e]) * (aw.out[i * d + e] - ex[e]);
        }
        if (rc == 0 && progress != NULL)
            progress(arg, r + 1, qlen);
    }
    if (rc == 0 && out->attn) {
        double nx = f->ex2 > 0 ? sqrt(f->ex2) : 1.0;
        out->err_sel = sqrt(se[0]) / nx;
        out->err_val = sqrt(se[1]) / nx;
        out->err_both = sqrt(se[2]) / nx;
        double t = out->err_sel + out->err_val;
        out->sel_share = t > 0 ? out->err_sel / t : 0.0;
    }
    attn_free(&aw);
    row_cache_free(&kq);
    row_cache_free(&vq);
    free(bnd);
    free(cnt);
    prepared_free(&mine);
    if (rc)
        lowp_select_result_free(out);
    return rc;
}
