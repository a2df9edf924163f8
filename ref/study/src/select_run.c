/* ref/study/src/select_run.c: a selector over query rows, beside the reference keys, and
 * the drift of every selection (lowp/select_run.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lowp/format.h"
#include "lowp/select_run.h"
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

/* MoBA's quantized main keys with their bounds: the whole tensor quantized at once (the
 * rows align with the blocks, d being a multiple of the block size), the values the
 * selector reads rounded once to binary32, and per block the sum of the element bounds.
 * The bounds are checked against the binary32 keys; where one fails, nothing is certified. */
static int quantize_bounded(lowp_block_format f, lowp_recipe r, lowp_global_scale gs, const float *k, size_t ctx,
                            size_t kvh, size_t d, size_t block, prepared *p, char *why, size_t wl)
{
    size_t n = ctx * kvh * d, bs = lowp_block_size(f);
    uint8_t *codes = malloc(lowp_block_code_bytes(f, n) + 1);
    uint8_t *scales = malloc(n / bs + 1);
    double *row = malloc(2 * d * sizeof *row);
    int rc = codes == NULL || scales == NULL || row == NULL ? lowp_why_set(why, wl, "out of memory for the keys") : 0;
    if (rc == 0)
        rc = lowp_block_quantize(f, r, gs, 0, k, n, codes, scales, &p->counts, why, wl);
    if (rc == 0) {
        lowp_block_dequantize_f32(f, gs.dec, codes, scales, n, p->main_k);
        p->bounded = 1;
        double *dl = row + d;
        for (size_t t = 0; t < ctx * kvh; t++) {
            const uint8_t *c = codes + lowp_block_code_bytes(f, t * d), *sc = scales + t * d / bs;
            lowp_block_dequantize_f64(f, gs.dec, c, sc, d, row);
            lowp_select_quant_bound(f, gs.dec, c, sc, d, dl);
            double *sum = p->kdsum + ((t / kvh) / block * kvh + t % kvh) * d;
            for (size_t e = 0; e < d; e++) {
                if (!(fabs(row[e] - (double)k[t * d + e]) <= dl[e]))
                    p->bounded = 0; /* a clamp the bound does not cover (or NaN) */
                sum[e] += dl[e];
            }
        }
    }
    free(codes);
    free(scales);
    free(row);
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
        if (p->dsa_kq == NULL || p->dsa_ks == NULL)
            return lowp_why_set(why, wl, "out of memory for the index keys");
        return lowp_dsa_keys_quantize(&p->dsa, k, ctx, p->dsa_kq, p->dsa_ks, why, wl);
    }
    size_t n = ctx * in->kv_heads * d;
    p->main_k = malloc(n * sizeof *p->main_k + 1);
    if (p->main_k == NULL)
        return lowp_why_set(why, wl, "out of memory for the keys");
    int moba = s->kind == LOWP_SEL_MOBA;
    size_t nbk = (ctx + s->bs.block - 1) / (s->bs.block ? s->bs.block : 1), kvh = in->kv_heads;
    if (moba) {
        p->kdsum = calloc(nbk * kvh * d + 1, sizeof *p->kdsum);
        if (p->kdsum == NULL)
            return lowp_why_set(why, wl, "out of memory for the key bounds");
    }
    if (strcmp(keys, "bf16") == 0) {
        memcpy(p->main_k, k, n * sizeof *k);
        to_bf16(p->main_k, n);
        /* |bf16(x) - x| <= half an ulp <= 2^-8 |bf16(x)| + 2^-134 (subnormals) */
        for (size_t i = 0; moba && i < n; i++)
            p->kdsum[(i / (kvh * d) / s->bs.block) * kvh * d + i % (kvh * d)] +=
                0x1p-8 * fabs((double)p->main_k[i]) + 0x1p-134;
        p->bounded = moba;
        return 0;
    }
    lowp_block_format f;
    if (lowp_block_format_parse(keys, &f) || f == LOWP_BF16_PASS)
        return lowp_why_set(why, wl, "keys '%s' (bf16 fp8_e4m3 fp8_e5m2 nvfp4 mxfp4 mxfp8)", keys);
    lowp_recipe r = lowp_recipe_default(f);
    if (s->recipe != NULL && lowp_recipe_parse(s->recipe, &r))
        return lowp_why_set(why, wl, "unknown recipe '%s'", s->recipe);
    float amax = 0;
    for (size_t i = 0; i < n; i++)
        amax = fabsf(k[i]) > amax ? fabsf(k[i]) : amax;
    lowp_global_scale gs = lowp_sweep_global_scale(f, r, s->scale, amax);
    p->dec = gs.dec;
    if (moba && d % lowp_block_size(f) == 0)
        return quantize_bounded(f, r, gs, k, ctx, kvh, d, s->bs.block, p, why, wl);
    double *dq = malloc(n * sizeof *dq + 1);
    if (dq == NULL)
        return lowp_why_set(why, wl, "out of memory for the keys");
    int rc = lowp_sweep_quantize_exact(f, r, gs, k, ctx * in->kv_heads, d, dq, &p->counts, why, wl);
    for (size_t i = 0; rc == 0 && i < n; i++)
        p->main_k[i] = (float)dq[i]; /* the value a kernel reads, rounded to binary32 */
    free(dq);
    return rc;
}

/* scores of row r into sc[units][cand] (-Inf past the visible ones); *vis the visible count */
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
                               why, wl);
    size_t nb, m = units * (pos / s->bs.block + 1);
    float *tmp = malloc(m * sizeof *tmp);
    double *btmp = malloc(m * sizeof *btmp);
    if (tmp == NULL || btmp == NULL) {
        free(tmp);
        free(btmp);
        return lowp_why_set(why, wl, "out of memory");
    }
    int rc = lowp_blocksel_scores(&s->bs, q + r * H * d, p->main_k, in->ctx, pos, tmp, &nb, why, wl);
    int bounds = rc == 0 && bnd && s->kind == LOWP_SEL_MOBA;
    if (bounds)
        rc = lowp_moba_score_bounds(&s->bs, q + r * H * d, p->main_k, p->kdsum, in->ctx, pos, tmp, btmp, why, wl);
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

/* ------------------------------------------------------------------ the sparse attention */

/* The values' cache: a block format (LOWP_BF16_PASS: the unquantized BF16 cache), its
 * recipe and the K and V global scales. */
typedef struct values_cache {
    lowp_block_format f;
    lowp_recipe r;
    lowp_global_scale gk, gv;
    uint8_t *codes, *scales; /* one row's scratch */
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
    vc->codes = malloc(d + 8);
    vc->scales = malloc(d + 8);
    if (vc->codes == NULL || vc->scales == NULL)
        return lowp_why_set(why, wl, "out of memory");
    return 0;
}

/* the element values (element x block scale) of one row of d, or its BF16 values */
static int row_elements(values_cache *vc, int quantized, lowp_global_scale gs, const float *x, size_t d, float *out,
                        char *why, size_t wl)
{
    if (!quantized || vc->f == LOWP_BF16_PASS) {
        memcpy(out, x, d * sizeof *out);
        to_bf16(out, d);
        return 0;
    }
    if (lowp_block_quantize(vc->f, vc->r, gs, 0, x, d, vc->codes, vc->scales, NULL, why, wl))
        return -1;
    lowp_block_dequantize_f32(vc->f, 1.0f, vc->codes, vc->scales, d, out);
    return 0;
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* the tokens a selection sel[0..n) attends at pos, ascending; returns their count */
static size_t selection_tokens(const lowp_select_spec *s, const int32_t *sel, size_t n, size_t pos, int32_t *blk,
                               int32_t *tok)
{
    memcpy(blk, sel, n * sizeof *blk);
    qsort(blk, n, sizeof *blk, cmp_i32);
    size_t w = 0, per = s->kind == LOWP_SEL_QSA ? s->qsa.ratio : s->kind == LOWP_SEL_DSA ? 1 : s->bs.block;
    for (size_t i = 0; i < n; i++)
        for (size_t t = (size_t)blk[i] * per; t < ((size_t)blk[i] + 1) * per && t <= pos; t++)
            tok[w++] = (int32_t)t;
    if (s->kind == LOWP_SEL_QSA) /* the open tail */
        for (size_t t = (pos + 1) / per * per; t <= pos; t++)
            tok[w++] = (int32_t)t;
    return w;
}

typedef struct attn_work {
    values_cache vc;
    int32_t *blk, *tok[2]; /* [0] the reference selection's tokens, [1] the quantized keys' */
    size_t ntok[2];
    float *kg, *vg;        /* gathered rows */
    double *out[4];        /* exact, sel, val, both: [dim] */
    double se[3], ex2;
} attn_work;

static void attn_free(attn_work *a)
{
    free(a->vc.codes);
    free(a->vc.scales);
    free(a->blk);
    free(a->tok[0]);
    free(a->tok[1]);
    free(a->kg);
    free(a->vg);
    free(a->out[0]);
}

static int attn_alloc(attn_work *a, size_t cap, size_t d)
{
    a->blk = malloc((cap + 1) * sizeof *a->blk);
    a->tok[0] = malloc((cap + 1) * sizeof *a->tok[0]);
    a->tok[1] = malloc((cap + 1) * sizeof *a->tok[1]);
    a->kg = malloc((cap + 1) * d * sizeof *a->kg);
    a->vg = malloc((cap + 1) * d * sizeof *a->vg);
    a->out[0] = malloc(4 * d * sizeof *a->out[0]);
    if (a->blk == NULL || a->tok[0] == NULL || a->tok[1] == NULL || a->kg == NULL || a->vg == NULL ||
        a->out[0] == NULL)
        return -1;
    for (int i = 1; i < 4; i++)
        a->out[i] = a->out[0] + i * d;
    return 0;
}

/* one query head h of row r over both selections, exact and quantized values, into the
 * error sums. q is the row's BF16 query, k the keys (BF16 for QSA / DSA, binary32 for MoBA
 * / NSA, rounded here). */
static int attn_head(attn_work *a, const lowp_select_inputs *in, const float *q, const float *k, size_t r, size_t h,
                     char *why, size_t wl)
{
    size_t d = in->dim, g = h / (in->q_heads / in->kv_heads), stride = in->kv_heads * d;
    const float *gate = in->gate ? in->gate + (r * in->q_heads + h) * d : NULL;
    static const int side[4] = {0, 1, 0, 1}, quant[4] = {0, 0, 1, 1};
    for (int run = 0; run < 4; run++) {
        const int32_t *tok = a->tok[side[run]];
        size_t n = a->ntok[side[run]];
        for (size_t j = 0; j < n; j++) {
            size_t t = (size_t)tok[j];
            if (row_elements(&a->vc, quant[run], a->vc.gk, k + t * stride + g * d, d, a->kg + j * d, why, wl) ||
                row_elements(&a->vc, quant[run], a->vc.gv, in->v + t * stride + g * d, d, a->vg + j * d, why, wl))
                return -1;
        }
        lowp_sparse_attn_args sa = {LOWP_SPARSE_EXACT, d, 1.0, 1.0};
        if (quant[run]) {
            sa.path = a->vc.f == LOWP_BF16_PASS ? LOWP_SPARSE_BF16 : LOWP_SPARSE_FP8;
            sa.k_scale = a->vc.gk.dec;
            sa.v_scale = a->vc.gv.dec;
        }
        if (lowp_sparse_attn(&sa, q + h * d, a->kg, a->vg, n, gate, a->out[run], why, wl))
            return -1;
    }
    for (size_t e = 0; e < d; e++) {
        double x = a->out[0][e];
        a->ex2 += x * x;
        for (int i = 0; i < 3; i++)
            a->se[i] += (a->out[i + 1][e] - x) * (a->out[i + 1][e] - x);
    }
    return 0;
}

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

int lowp_select_run(const lowp_select_spec *s, const lowp_select_inputs *in, lowp_select_result *out,
                    void (*progress)(void *arg, size_t done, size_t total), void *arg, char *why, size_t wl)
{
    memset(out, 0, sizeof *out);
    size_t ctx = in->ctx, d = in->dim, H = in->q_heads, kvh = in->kv_heads, qlen = in->q_len;
    if (qlen == 0 || ctx == 0 || d == 0 || H == 0 || kvh == 0)
        return lowp_why_set(why, wl, "an empty input");
    if (in->q_offset + qlen > ctx)
        return lowp_why_set(why, wl, "query rows at positions %zu..%zu, past the %zu keys", in->q_offset,
                            in->q_offset + qlen - 1, ctx);
    if ((s->kind == LOWP_SEL_QSA || s->kind == LOWP_SEL_DSA) && kvh != 1)
        return lowp_why_set(why, wl, "the index keys have one head, not %zu", kvh);
    size_t units, cand, K;
    if (s->kind == LOWP_SEL_QSA) {
        if (s->qsa.index_heads != H || s->qsa.head_dim != d)
            return lowp_why_set(why, wl, "qsa: the configuration has %zu heads of %zu, the queries %zu of %zu",
                                s->qsa.index_heads, s->qsa.head_dim, H, d);
        units = 1;
        cand = ctx / (s->qsa.ratio ? s->qsa.ratio : 1);
        K = s->qsa.topk;
    } else if (s->kind == LOWP_SEL_DSA) {
        if (s->dsa.heads != H || s->dsa.head_dim != d)
            return lowp_why_set(why, wl, "dsa: the configuration has %zu heads of %zu, the queries %zu of %zu",
                                s->dsa.heads, s->dsa.head_dim, H, d);
        units = 1;
        cand = ctx;
        K = s->dsa.topk;
    } else {
        if (s->bs.q_heads != H || s->bs.kv_heads != kvh || s->bs.head_dim != d)
            return lowp_why_set(why, wl, "%s: the configuration has %zu / %zu heads of %zu, the inputs %zu / %zu of %zu",
                                lowp_selector_name(s->kind), s->bs.q_heads, s->bs.kv_heads, s->bs.head_dim, H, kvh,
                                d);
        if (H % kvh)
            return lowp_why_set(why, wl, "%zu query heads are not a multiple of %zu KV heads", H, kvh);
        units = lowp_blocksel_units(&s->bs);
        cand = (ctx - 1) / (s->bs.block ? s->bs.block : 1) + 1;
        K = s->bs.topk;
    }
    if (K > cand)
        return lowp_why_set(why, wl, "top-%zu of the %zu %s the %zu keys make", K, cand,
                            s->kind == LOWP_SEL_DSA ? "tokens" : "blocks", ctx);
    /* QSA and DSA hold q and k in BF16: round copies */
    float *q = malloc(qlen * H * d * sizeof *q), *k = NULL, *w = NULL, *wq = NULL, *wk = NULL;
    int rc = q == NULL;
    if (!rc) {
        memcpy(q, in->q, qlen * H * d * sizeof *q);
        if (s->kind == LOWP_SEL_QSA || s->kind == LOWP_SEL_DSA) {
            k = malloc(ctx * d * sizeof *k);
            rc = k == NULL;
            if (!rc) {
                memcpy(k, in->k, ctx * d * sizeof *k);
                out->rounded = to_bf16(q, qlen * H * d) + to_bf16(k, ctx * d);
            }
        }
    }
    if (!rc && s->kind == LOWP_SEL_QSA) {
        wq = calloc(d, sizeof *wq);
        wk = calloc(d, sizeof *wk);
        rc = wq == NULL || wk == NULL;
        if (!rc && in->wq)
            memcpy(wq, in->wq, d * sizeof *wq);
        if (!rc && in->wk)
            memcpy(wk, in->wk, d * sizeof *wk);
    }
    if (!rc && s->kind == LOWP_SEL_DSA) {
        w = malloc(qlen * H * sizeof *w);
        rc = w == NULL;
        for (size_t i = 0; !rc && i < qlen * H; i++)
            w[i] = in->w ? in->w[i] : 1.0f;
        if (!rc)
            to_bf16(w, qlen * H);
    }
    if (rc) {
        free(q);
        free(k);
        free(w);
        free(wq);
        free(wk);
        return lowp_why_set(why, wl, "out of memory");
    }
    const float *keys_in = k ? k : in->k;
    prepared mine, ref;
    memset(&ref, 0, sizeof ref);
    out->units = units;
    out->cand = cand;
    out->k = K;
    out->jaccard_min = 1.0;
    out->list_width = s->kind == LOWP_SEL_QSA ? lowp_qsa_index_width(&s->qsa) + 1 : 0;
    out->indices = malloc(qlen * units * K * sizeof *out->indices);
    out->ref_indices = malloc(qlen * units * K * sizeof *out->ref_indices);
    out->scores = malloc(qlen * units * cand * sizeof *out->scores);
    out->index_list = out->list_width ? malloc(qlen * out->list_width * sizeof *out->index_list) : NULL;
    float *rsc = malloc(units * cand * sizeof *rsc);
    if (out->indices == NULL || out->ref_indices == NULL || out->scores == NULL || rsc == NULL ||
        (out->list_width && out->index_list == NULL))
        rc = lowp_why_set(why, wl, "out of memory for %zu selections", qlen * units);
    if (rc == 0)
        rc = prepare(s, s->keys ? s->keys : "bf16", in, keys_in, wk, &mine, why, wl);
    else
        memset(&mine, 0, sizeof mine);
    if (rc == 0)
        rc = prepare(s, "bf16", in, keys_in, wk, &ref, why, wl);
    out->counts = mine.counts;
    out->dec = mine.dec;
    out->certifiable = rc == 0 && mine.bounded && ref.bounded;
    double *bnd = malloc(2 * units * cand * sizeof *bnd + 1), *rbnd = bnd ? bnd + units * cand : NULL;
    size_t *cnt = malloc(2 * units * sizeof *cnt + 1);
    if (rc == 0 && (bnd == NULL || cnt == NULL))
        rc = lowp_why_set(why, wl, "out of memory for the score bounds");
    /* the sparse attention: the queries in BF16, the keys it reads (QSA, DSA: the BF16 copy) */
    attn_work aw;
    memset(&aw, 0, sizeof aw);
    float *qa = NULL;
    const float *ka = k ? k : in->k;
    if (rc == 0 && in->v != NULL) {
        size_t per = s->kind == LOWP_SEL_QSA ? s->qsa.ratio : s->kind == LOWP_SEL_DSA ? 1 : s->bs.block;
        qa = malloc(qlen * H * d * sizeof *qa);
        if (qa == NULL || attn_alloc(&aw, K * per + per, d))
            rc = lowp_why_set(why, wl, "out of memory for the sparse attention");
        else {
            memcpy(qa, q, qlen * H * d * sizeof *qa);
            to_bf16(qa, qlen * H * d);
            rc = values_setup(s, in, ka, &aw.vc, out->values, why, wl);
            out->attn = rc == 0;
        }
    }
    char inner[256];
    for (size_t r = 0; rc == 0 && r < qlen; r++) {
        size_t vis = 0, rvis = 0;
        float *sc = out->scores + r * units * cand;
        double *b1 = out->certifiable ? bnd : NULL, *b2 = out->certifiable ? rbnd : NULL;
        if (score_row(s, &mine, in, q, wq, w, units, cand, r, sc, b1, &vis, inner, sizeof inner) ||
            score_row(s, &ref, in, q, wq, w, units, cand, r, rsc, b2, &rvis, inner, sizeof inner)) {
            rc = lowp_why_set(why, wl, "query row %zu: %s", r, inner);
            break;
        }
        for (size_t u = 0; rc == 0 && u < units; u++) {
            int32_t *sel = out->indices + (r * units + u) * K, *rs = out->ref_indices + (r * units + u) * K;
            size_t n = 0, rn = 0;
            lowp_select_drift dr;
            if (lowp_topk(sc + u * cand, vis, K, sel, &n, inner, sizeof inner))
                rc = lowp_why_set(why, wl, "query row %zu, unit %zu, keys %s: %s", r, u, s->keys, inner);
            else if (lowp_topk(rsc + u * cand, rvis, K, rs, &rn, inner, sizeof inner))
                rc = lowp_why_set(why, wl, "query row %zu, unit %zu, reference keys: %s", r, u, inner);
            else if (lowp_select_drift_of(rs, rn, sel, n, rsc + u * cand, rvis, &dr, inner, sizeof inner))
                rc = lowp_why_set(why, wl, "query row %zu: drift: %s", r, inner);
            else if (out->list_width && u == 0 &&
                     lowp_qsa_select(&mine.qsa, sc, vis, in->q_offset + r, out->index_list + r * out->list_width,
                                     NULL, NULL, inner, sizeof inner))
                rc = lowp_why_set(why, wl, "query row %zu: %s", r, inner);
            if (rc)
                break;
            cnt[u] = n;
            cnt[units + u] = rn;
            out->certified += out->certifiable && lowp_select_certified(sc + u * cand, bnd + u * cand, vis, sel, n) &&
                              lowp_select_certified(rsc + u * cand, rbnd + u * cand, rvis, rs, rn);
            out->jaccard_sum += dr.jaccard;
            out->recall_sum += dr.recall;
            out->jaccard_min = dr.jaccard < out->jaccard_min ? dr.jaccard : out->jaccard_min;
            out->lost += dr.lost;
            out->deepest = dr.max_intruder_rank > out->deepest ? dr.max_intruder_rank : out->deepest;
            out->unchanged += dr.lost == 0 && dr.intruders == 0;
            out->selections++;
        }
        size_t G = H / kvh;
        for (size_t h = 0; rc == 0 && out->attn && h < H; h++) {
            size_t u = s->kind == LOWP_SEL_MOBA ? h : s->kind == LOWP_SEL_NSA ? h / G : 0, pos = in->q_offset + r;
            const int32_t *sel = out->indices + (r * units + u) * K, *rs = out->ref_indices + (r * units + u) * K;
            aw.ntok[0] = selection_tokens(s, rs, cnt[units + u], pos, aw.blk, aw.tok[0]);
            aw.ntok[1] = selection_tokens(s, sel, cnt[u], pos, aw.blk, aw.tok[1]);
            if (attn_head(&aw, in, qa + r * H * d, ka, r, h, inner, sizeof inner))
                rc = lowp_why_set(why, wl, "query row %zu, head %zu: attention: %s", r, h, inner);
        }
        if (rc == 0 && progress != NULL)
            progress(arg, r + 1, qlen);
    }
    if (rc == 0 && out->attn) {
        double nx = aw.ex2 > 0 ? sqrt(aw.ex2) : 1.0;
        out->err_sel = sqrt(aw.se[0]) / nx;
        out->err_val = sqrt(aw.se[1]) / nx;
        out->err_both = sqrt(aw.se[2]) / nx;
        double t = out->err_sel + out->err_val;
        out->sel_share = t > 0 ? out->err_sel / t : 0.0;
    }
    attn_free(&aw);
    free(qa);
    free(bnd);
    free(cnt);
    prepared_free(&mine);
    prepared_free(&ref);
    free(rsc);
    free(q);
    free(k);
    free(w);
    free(wq);
    free(wk);
    if (rc)
        lowp_select_result_free(out);
    return rc;
}
