/* ref/study/src/select_run.c: a selector over query rows, beside the reference keys, and
 * the drift of every selection (lowp/select_run.h). */
#include <math.h>
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
    double *qsa_kb;
    float *dsa_kq, *dsa_ks, *main_k;
    lowp_quant_counts counts;
    float dec;
} prepared;

static void prepared_free(prepared *p)
{
    free(p->qsa_kb);
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
        if (p->qsa_kb == NULL)
            return lowp_why_set(why, wl, "out of memory for the index keys");
        return lowp_qsa_compress(&p->qsa, k, ctx, wk, p->qsa_kb, NULL, why, wl);
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
    if (strcmp(keys, "bf16") == 0) {
        memcpy(p->main_k, k, n * sizeof *k);
        to_bf16(p->main_k, n);
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
static int score_row(const lowp_select_spec *s, const prepared *p, const lowp_select_inputs *in, const float *q,
                     const float *wq, const float *w, size_t units, size_t cand, size_t r, float *sc, size_t *vis,
                     char *why, size_t wl)
{
    size_t pos = in->q_offset + r, d = in->dim, H = in->q_heads;
    for (size_t i = 0; i < units * cand; i++)
        sc[i] = -INFINITY;
    if (s->kind == LOWP_SEL_QSA) {
        float *qo = malloc(H * d * sizeof *qo);
        if (qo == NULL)
            return lowp_why_set(why, wl, "out of memory");
        int rc = lowp_qsa_query(&p->qsa, q + r * H * d, pos, wq, qo, why, wl) ||
                 lowp_qsa_scores(&p->qsa, qo, p->qsa_kb, in->ctx, pos, sc, vis, why, wl);
        free(qo);
        return rc ? -1 : 0;
    }
    if (s->kind == LOWP_SEL_DSA)
        return lowp_dsa_scores(&p->dsa, q + r * H * d, w + r * H, p->dsa_kq, p->dsa_ks, in->ctx, pos, sc, vis,
                               why, wl);
    size_t nb;
    float *tmp = malloc(units * (pos / s->bs.block + 1) * sizeof *tmp);
    if (tmp == NULL)
        return lowp_why_set(why, wl, "out of memory");
    int rc = lowp_blocksel_scores(&s->bs, q + r * H * d, p->main_k, in->ctx, pos, tmp, &nb, why, wl);
    for (size_t u = 0; rc == 0 && u < units; u++)
        memcpy(sc + u * cand, tmp + u * nb, nb * sizeof *tmp);
    free(tmp);
    *vis = nb;
    return rc;
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
    char inner[256];
    for (size_t r = 0; rc == 0 && r < qlen; r++) {
        size_t vis = 0, rvis = 0;
        float *sc = out->scores + r * units * cand;
        if (score_row(s, &mine, in, q, wq, w, units, cand, r, sc, &vis, inner, sizeof inner) ||
            score_row(s, &ref, in, q, wq, w, units, cand, r, rsc, &rvis, inner, sizeof inner)) {
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
            out->jaccard_sum += dr.jaccard;
            out->recall_sum += dr.recall;
            out->jaccard_min = dr.jaccard < out->jaccard_min ? dr.jaccard : out->jaccard_min;
            out->lost += dr.lost;
            out->deepest = dr.max_intruder_rank > out->deepest ? dr.max_intruder_rank : out->deepest;
            out->unchanged += dr.lost == 0 && dr.intruders == 0;
            out->selections++;
        }
        if (rc == 0 && progress != NULL)
            progress(arg, r + 1, qlen);
    }
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
