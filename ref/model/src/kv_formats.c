/* ref/model/src/kv_formats.c: the model's K/V cache in lowp's formats, and the recording
 * store (lowp/kv_formats.h states both). */
#include "lowp/kv_formats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lowp/attn_gpu_emul.h"
#include "lowp/why.h"

const char *lowp_kv_attn_mode_name(lowp_kv_attn_mode a)
{
    switch (a) {
    case LOWP_KV_ATTN_EMUL:
        return "emul";
    case LOWP_KV_ATTN_PREFILL:
        return "prefill";
    case LOWP_KV_ATTN_EXTEND:
        return "extend";
    default:
        return "exact";
    }
}

const char *lowp_kv_attn_label(lowp_kv_attn_mode a, size_t chunk, char *buf, size_t n)
{
    if (a == LOWP_KV_ATTN_EXTEND)
        snprintf(buf, n, "extend:%zu", chunk);
    else
        snprintf(buf, n, "%s", lowp_kv_attn_mode_name(a));
    return buf;
}

int lowp_kv_attn_mode_parse(const char *s, lowp_kv_attn_mode *out, size_t *chunk)
{
    *chunk = 0;
    if (strcmp(s, "exact") == 0)
        *out = LOWP_KV_ATTN_EXACT;
    else if (strcmp(s, "emul") == 0)
        *out = LOWP_KV_ATTN_EMUL;
    else if (strcmp(s, "prefill") == 0)
        *out = LOWP_KV_ATTN_PREFILL;
    else if (strncmp(s, "extend:", 7) == 0) {
        /* digits only (strtoull would take a sign or spaces); at most 9, so no overflow */
        size_t c = 0, nd = strspn(s + 7, "0123456789");
        if (nd == 0 || nd > 9 || s[7 + nd] != '\0')
            return -1;
        for (size_t i = 0; i < nd; i++)
            c = c * 10 + (size_t)(s[7 + i] - '0');
        if (c == 0)
            return -1;
        *out = LOWP_KV_ATTN_EXTEND;
        *chunk = c;
    } else
        return -1;
    return 0;
}

int lowp_kv_choice_parse(const char *s, lowp_kv_choice *out, char *why, size_t why_len)
{
    memset(out, 0, sizeof *out);
    char buf[64];
    if (strlen(s) >= sizeof buf)
        return lowp_why_set(why, why_len, "cache format '%.40s...' is too long", s);
    strcpy(buf, s);
    char *opt = strchr(buf, ':');
    if (opt != NULL)
        *opt++ = '\0';
    if (lowp_block_format_parse(buf, &out->format))
        return lowp_why_set(why, why_len,
                            "unknown cache format '%s' (bf16 fp8_e4m3 fp8_e5m2 nvfp4 mxfp4 mxfp8, then "
                            ":recipe, :1.0, :tensor or :head)",
                            buf);
    int has_gs = lowp_block_has_global_scale(out->format);
    out->recipe = out->format == LOWP_NVFP4 ? LOWP_RECIPE_SGLANG_KV : lowp_recipe_default(out->format);
    out->gran = LOWP_KV_SCALE_TENSOR;
    out->calibrated = has_gs && out->format != LOWP_NVFP4; /* fp8: a checkpoint's scale */
    int saw_recipe = 0, saw_scale = 0;
    while (opt != NULL) {
        char *next = strchr(opt, ':');
        if (next != NULL)
            *next++ = '\0';
        lowp_recipe r;
        if (lowp_recipe_parse(opt, &r) == 0) {
            if (saw_recipe++)
                return lowp_why_set(why, why_len, "cache format '%s' names two recipes", s);
            if (lowp_recipe_check(out->format, r, why, why_len))
                return -1;
            out->recipe = r;
        } else if (strcmp(opt, "1.0") == 0 || strcmp(opt, "tensor") == 0 || strcmp(opt, "head") == 0) {
            if (saw_scale++)
                return lowp_why_set(why, why_len, "cache format '%s' names two global scales", s);
            if (!has_gs)
                return lowp_why_set(why, why_len, "cache format '%s': %s has no global scale", s,
                                    lowp_block_format_name(out->format));
            out->calibrated = strcmp(opt, "1.0") != 0;
            out->gran = strcmp(opt, "head") == 0 ? LOWP_KV_SCALE_HEAD : LOWP_KV_SCALE_TENSOR;
        } else {
            return lowp_why_set(why, why_len,
                                "cache format '%s': '%s' is neither a recipe nor a global scale (1.0, tensor, "
                                "head)",
                                s, opt);
        }
        opt = next;
    }
    const char *fmt = lowp_block_format_name(out->format);
    const char *sc = !has_gs ? "" : !out->calibrated ? ":1.0" : out->gran == LOWP_KV_SCALE_HEAD ? ":head" : ":tensor";
    lowp_recipe def = out->format == LOWP_NVFP4 ? LOWP_RECIPE_SGLANG_KV : lowp_recipe_default(out->format);
    snprintf(out->name, sizeof out->name, "%s%s%s%s", fmt, sc, out->recipe == def ? "" : ":",
             out->recipe == def ? "" : lowp_recipe_name(out->recipe));
    return 0;
}

/* ---- the format store ---- */

struct lowp_kv_format {
    lowp_llama_config c;
    lowp_kv_format_spec spec;
    size_t cap, width, qwidth, pages; /* width = n_head_kv * head_dim, qwidth = n_head * head_dim */
    lowp_kvcache **cache;             /* [n_layer] */
    float *kd, *vd;                   /* decoded [layer][cap][width] */
    float *kx, *vx;                   /* exact inputs, with stats */
    lowp_kv_err *err;                 /* [layer][n_head_kv K, n_head_kv V, n_head ATTN] */
    double *clip;                     /* [layer][n_head_kv K, n_head_kv V]: lowp_kv_err.clipped's bound */
    double *row;                      /* one decoded slot: K then V */
    int paused;                       /* statistics paused */
    /* prefill / extend (lowp/kv_formats.h): */
    lowp_kv_config cfg;               /* the caches' configuration (for lowp_kv_path_run) */
    float *kf, *vf;                   /* [layer][cap][width]: the chunk rule's values */
    float *kp, *vp;                   /* extend: the cached-prefix rule's values */
    float *kw, *vw;                   /* extend: one layer's [cap][width] attention input */
};

void lowp_kv_format_free(lowp_kv_format *f)
{
    if (f == NULL)
        return;
    if (f->cache != NULL)
        for (size_t l = 0; l < f->c.n_layer; l++)
            lowp_kvcache_destroy(f->cache[l]);
    free(f->cache);
    free(f->kd);
    free(f->vd);
    free(f->kx);
    free(f->vx);
    free(f->err);
    free(f->clip);
    free(f->row);
    free(f->kf);
    free(f->vf);
    free(f->kp);
    free(f->vp);
    free(f->kw);
    free(f->vw);
    free(f);
}

static size_t err_stride(const lowp_llama_config *c) { return 2 * c->n_head_kv + c->n_head; }

static void err_add(lowp_kv_err *e, const float *x, const double *y, size_t n, double clip)
{
    for (size_t i = 0; i < n; i++) {
        double d = y[i] - (double)x[i], r = (double)x[i];
        e->err2 += d * d;
        e->ref2 += r * r;
        e->amax = fabs(r) > e->amax ? fabs(r) : e->amax;
        e->clipped += fabs(r) > clip;
    }
    e->n += n;
}

/* The largest magnitude a format holds at global scale 1 (lowp_kv_err.clipped). */
static double format_max(lowp_block_format f)
{
    switch (f) {
    case LOWP_NVFP4:
        return 6.0 * 448.0;
    case LOWP_FP8_E4M3:
        return 448.0;
    case LOWP_FP8_E5M2:
        return 57344.0;
    default:
        return INFINITY;
    }
}

/* The SGLang path's effective K/V of n new positions of layer l (rows k, v) into kout,
 * vout: lowp_kv_path_run with the cache's configuration and global scales; PREFILL gives
 * the chunk rule, EXTEND with chunk_start = n the cached-prefix rule (every position read
 * back from the cache's bytes). The values are FP8 E4M3 (or NaN), exact in binary32. */
static int path_values(const lowp_kv_format *f, lowp_kv_path path, size_t layer, size_t n, const float *k,
                       const float *v, float *kout, float *vout, char *why, size_t why_len)
{
    size_t W = f->width, H = f->c.n_head_kv;
    float *gs = malloc(2 * H * sizeof *gs);
    double *kd = malloc(n * W * sizeof *kd), *vd = malloc(n * W * sizeof *vd);
    int rc = 0;
    if (gs == NULL || kd == NULL || vd == NULL) {
        rc = lowp_why_set(why, why_len, "out of memory for the %s path of %zu positions", lowp_kv_path_name(path), n);
        goto done;
    }
    for (size_t h = 0; h < H; h++) { /* per head; path_run reads [0] only for a per-tensor scale */
        gs[h] = lowp_kvcache_global_scale(f->cache[layer], LOWP_KV_K, h);
        gs[H + h] = lowp_kvcache_global_scale(f->cache[layer], LOWP_KV_V, h);
    }
    lowp_kv_path_args a = lowp_kv_path_args_init(path, &f->cfg, n, 0, 0, NULL, k, v);
    if (lowp_block_has_global_scale(f->cfg.format)) {
        a.k_gs = gs;
        a.v_gs = gs + H;
    }
    a.chunk_start = path == LOWP_KV_PATH_EXTEND ? n : 0;
    if (lowp_kv_path_run(&a, 1, NULL, kd, vd, NULL, NULL, NULL, why, why_len)) {
        rc = -1;
        goto done;
    }
    for (size_t i = 0; i < n * W; i++) {
        kout[i] = (float)kd[i];
        vout[i] = (float)vd[i];
    }
done:
    free(gs);
    free(kd);
    free(vd);
    return rc;
}

static int fmt_write(void *ctx, size_t layer, size_t pos0, size_t n, const float *k_pre, const float *k,
                     const float *v, char *why, size_t why_len)
{
    (void)k_pre;
    lowp_kv_format *f = ctx;
    size_t W = f->width, hd = f->c.head_dim, H = f->c.n_head_kv;
    if (layer >= f->c.n_layer || pos0 > f->cap || n > f->cap - pos0)
        return lowp_why_set(why, why_len, "positions %zu .. %zu are past the cache's %zu", pos0, pos0 + n, f->cap);
    lowp_kvcache *c = f->cache[layer];
    lowp_kv_view view = lowp_kvcache_view(c);
    double *kr = f->row, *vr = f->row + W;
    for (size_t i = 0; i < n; i++) {
        size_t p = pos0 + i, page = p / LOWP_KV_FORMAT_PAGE, slot = p % LOWP_KV_FORMAT_PAGE;
        if (lowp_kvcache_write(c, page, slot, k + i * W, v + i * W, NULL, NULL, why, why_len) ||
            lowp_kvcache_read(c, &view, page, slot, kr, vr, why, why_len))
            return -1;
        float *kd = f->kd + (layer * f->cap + p) * W, *vd = f->vd + (layer * f->cap + p) * W;
        for (size_t j = 0; j < W; j++) {
            kd[j] = (float)kr[j]; /* RN to binary32 (lowp/kv_formats.h) */
            vd[j] = (float)vr[j];
        }
        if (f->spec.stats) {
            memcpy(f->kx + (layer * f->cap + p) * W, k + i * W, W * sizeof(float));
            memcpy(f->vx + (layer * f->cap + p) * W, v + i * W, W * sizeof(float));
            lowp_kv_err *e = f->err + layer * err_stride(&f->c);
            const double *clip = f->clip + layer * 2 * H;
            for (size_t h = 0; h < H && !f->paused; h++) {
                err_add(&e[h], k + i * W + h * hd, kr + h * hd, hd, clip[h]);
                err_add(&e[H + h], v + i * W + h * hd, vr + h * hd, hd, clip[H + h]);
            }
        }
    }
    size_t off = (layer * f->cap + pos0) * W;
    if (f->kf != NULL && path_values(f, LOWP_KV_PATH_PREFILL, layer, n, k, v, f->kf + off, f->vf + off, why, why_len))
        return -1;
    if (f->kp != NULL && path_values(f, LOWP_KV_PATH_EXTEND, layer, n, k, v, f->kp + off, f->vp + off, why, why_len))
        return -1;
    return 0;
}

/* read of a store holding [layer][cap][width] arrays K and V. */
static int layer_rows(const float *K, const float *V, size_t n_layer, size_t cap, size_t width, size_t layer,
                      size_t n, const float **k, const float **v, size_t *ld, char *why, size_t why_len)
{
    if (layer >= n_layer || n > cap)
        return lowp_why_set(why, why_len, "the cache holds %zu positions, %zu asked", cap, n);
    *k = K + layer * cap * width;
    *v = V + layer * cap * width;
    *ld = width;
    return 0;
}

static int fmt_read(void *ctx, size_t layer, size_t n, const float **k, const float **v, size_t *ld, char *why,
                    size_t why_len)
{
    lowp_kv_format *f = ctx;
    return layer_rows(f->kd, f->vd, f->c.n_layer, f->cap, f->width, layer, n, k, v, ld, why, why_len);
}

/* The emulator over layer l's cache: query row i is a decode of a sequence of length
 * pos0 + i + 1 over pages 0 .. (pos0 + i) / PAGE (lowp/kv_formats.h). */
static int emul_attend(lowp_kv_format *f, size_t layer, size_t pos0, size_t n, const float *q, size_t ldq,
                       float *out, char *why, size_t why_len)
{
    const lowp_llama_config *c = &f->c;
    size_t T = pos0 + n, hd = c->head_dim, QW = f->qwidth, npg = (T + LOWP_KV_FORMAT_PAGE - 1) / LOWP_KV_FORMAT_PAGE;
    int32_t *indptr = malloc((n + 1) * sizeof *indptr), *last = malloc(n * sizeof *last),
            *indices = malloc(n * npg * sizeof *indices);
    uint16_t *qb = malloc(n * QW * sizeof *qb), *ob = malloc(n * QW * sizeof *ob);
    int rc = 0;
    if (indptr == NULL || last == NULL || indices == NULL || qb == NULL || ob == NULL) {
        rc = lowp_why_set(why, why_len, "out of memory for the decode emulator's %zu queries", n);
        goto done;
    }
    indptr[0] = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len = pos0 + i + 1, np = (len + LOWP_KV_FORMAT_PAGE - 1) / LOWP_KV_FORMAT_PAGE;
        for (size_t p = 0; p < np; p++)
            indices[(size_t)indptr[i] + p] = (int32_t)p;
        indptr[i + 1] = indptr[i] + (int32_t)np;
        last[i] = (int32_t)(len - (np - 1) * LOWP_KV_FORMAT_PAGE);
        for (size_t j = 0; j < QW; j++)
            qb[i * QW + j] = lowp_bf16_from_f32(q[i * ldq + j]);
    }
    lowp_kv_page_table pt = {n, indptr, indices, last};
    lowp_kv_view view = lowp_kvcache_view(f->cache[layer]);
    lowp_gpu_decode_args a = {0};
    a.cache = f->cache[layer];
    a.view = &view;
    a.pt = &pt;
    a.num_q_heads = c->n_head;
    a.sm_scale = 1.0 / sqrt((double)hd);
    a.q = qb;
    a.chunk_tokens = lowp_gpu_decode_chunk_tokens(1, c->n_head_kv, T);
    if (lowp_gpu_decode_emulate(&a, ob, why, why_len)) {
        rc = -1;
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < QW; j++)
            out[i * c->n_embd + j] = lowp_f32_from_bf16(ob[i * QW + j]);
done:
    free(indptr);
    free(last);
    free(indices);
    free(qb);
    free(ob);
    return rc;
}

/* prefill / extend attention of query rows pos0 .. pos0 + n - 1 (lowp/kv_formats.h): q
 * rounded to BF16, then lowp_llama_attention per chunk [s, e) (absolute positions, chunk
 * C; prefill: one chunk) over rows 0 .. e - 1 of the working arrays, which hold the
 * prefix rule's values before s and the chunk rule's from s. The working arrays start as
 * the prefix values and each chunk's rows are put back after it: O(T) copies per call. */
static int path_attend(lowp_kv_format *f, const lowp_llama *m, size_t layer, size_t pos0, size_t n, const float *q,
                       size_t ldq, float *out, char *why, size_t why_len)
{
    size_t W = f->width, QW = f->qwidth, E = f->c.n_embd, T = pos0 + n;
    const float *KF = f->kf + layer * f->cap * W, *VF = f->vf + layer * f->cap * W;
    float *qb = malloc(n * QW * sizeof *qb);
    if (qb == NULL)
        return lowp_why_set(why, why_len, "out of memory for the queries of %zu positions", n);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < QW; j++)
            qb[i * QW + j] = lowp_f32_from_bf16(lowp_bf16_from_f32(q[i * ldq + j]));
    int rc = 0;
    if (f->spec.attn == LOWP_KV_ATTN_PREFILL) {
        rc = lowp_llama_attention(m, qb, QW, n, pos0, KF, VF, W, out, why, why_len);
        free(qb);
        return rc;
    }
    size_t C = f->spec.chunk, bytes = W * sizeof(float);
    const float *KP = f->kp + layer * f->cap * W, *VP = f->vp + layer * f->cap * W;
    memcpy(f->kw, KP, T * bytes);
    memcpy(f->vw, VP, T * bytes);
    for (size_t p = pos0; rc == 0 && p < T;) {
        size_t s = p / C * C, e = s + C < T ? s + C : T; /* the chunk of position p, cut at T */
        memcpy(f->kw + s * W, KF + s * W, (e - s) * bytes);
        memcpy(f->vw + s * W, VF + s * W, (e - s) * bytes);
        rc = lowp_llama_attention(m, qb + (p - pos0) * QW, QW, e - p, p, f->kw, f->vw, W, out + (p - pos0) * E, why,
                                  why_len);
        memcpy(f->kw + s * W, KP + s * W, (e - s) * bytes);
        memcpy(f->vw + s * W, VP + s * W, (e - s) * bytes);
        p = e;
    }
    free(qb);
    return rc;
}

static int fmt_attend(void *ctx, const lowp_llama *m, size_t layer, size_t pos0, size_t n, const float *q,
                      size_t ldq, float *out, char *why, size_t why_len)
{
    lowp_kv_format *f = ctx;
    const lowp_llama_config *c = &f->c;
    size_t W = f->width, E = c->n_embd, hd = c->head_dim, T = pos0 + n;
    if (layer >= c->n_layer || T > f->cap)
        return lowp_why_set(why, why_len, "the cache holds %zu positions, %zu asked", f->cap, T);
    const float *K = f->kd + layer * f->cap * W, *V = f->vd + layer * f->cap * W;
    if (f->spec.attn == LOWP_KV_ATTN_EMUL) {
        if (emul_attend(f, layer, pos0, n, q, ldq, out, why, why_len))
            return -1;
    } else if (f->kf != NULL) {
        if (path_attend(f, m, layer, pos0, n, q, ldq, out, why, why_len))
            return -1;
    } else if (lowp_llama_attention(m, q, ldq, n, pos0, K, V, W, out, why, why_len)) {
        return -1;
    }
    if (!f->spec.stats || f->paused)
        return 0;
    float *ref = malloc(n * E * sizeof *ref);
    double *od = malloc(hd * sizeof *od);
    if (ref == NULL || od == NULL) {
        free(ref);
        free(od);
        return lowp_why_set(why, why_len, "out of memory for the reference attention of %zu queries", n);
    }
    int rc = lowp_llama_attention(m, q, ldq, n, pos0, f->kx + layer * f->cap * W, f->vx + layer * f->cap * W, W,
                                  ref, why, why_len);
    lowp_kv_err *e = f->err + layer * err_stride(c) + 2 * c->n_head_kv;
    for (size_t i = 0; rc == 0 && i < n; i++)
        for (size_t h = 0; h < c->n_head; h++) {
            for (size_t d = 0; d < hd; d++)
                od[d] = out[i * E + h * hd + d];
            err_add(&e[h], ref + i * E + h * hd, od, hd, INFINITY);
        }
    free(ref);
    free(od);
    return rc;
}

int lowp_kv_format_create(const lowp_llama_config *c, size_t capacity, const lowp_kv_format_spec *spec,
                          lowp_kv_format **out, char *why, size_t why_len)
{
    *out = NULL;
    if (capacity == 0)
        return lowp_why_set(why, why_len, "a cache of 0 positions");
    lowp_kv_format *f = calloc(1, sizeof *f);
    if (f == NULL)
        return lowp_why_set(why, why_len, "out of memory for the cache");
    f->c = *c;
    f->spec = *spec;
    f->cap = capacity;
    f->width = c->n_head_kv * c->head_dim;
    f->qwidth = c->n_head * c->head_dim;
    f->pages = (capacity + LOWP_KV_FORMAT_PAGE - 1) / LOWP_KV_FORMAT_PAGE;
    size_t H = c->n_head_kv, ns = spec->choice.gran == LOWP_KV_SCALE_HEAD ? H : 1;
    lowp_kv_config cfg = lowp_kv_config_default(spec->choice.format, f->pages, LOWP_KV_FORMAT_PAGE, H,
                                                c->head_dim, c->head_dim);
    cfg.recipe = spec->choice.recipe;
    cfg.scale_gran = spec->choice.gran;
    if (lowp_kv_config_check(&cfg, why, why_len))
        goto fail;
    if (spec->attn == LOWP_KV_ATTN_EMUL && lowp_gpu_decode_check(&cfg, c->n_head, why, why_len))
        goto fail;
    if (spec->attn == LOWP_KV_ATTN_EXTEND && cfg.format != LOWP_NVFP4) {
        lowp_why_set(why, why_len, "attention extend reads an NVFP4 prefix through SGLang's FP8 workspace; the cache "
                     "is %s (prefill takes any format)", lowp_block_format_name(cfg.format));
        goto fail;
    }
    if (spec->attn == LOWP_KV_ATTN_EXTEND && (spec->chunk == 0 || spec->chunk > capacity)) {
        lowp_why_set(why, why_len, "extend chunk %zu is not in 1 .. %zu (the cache's positions)", spec->chunk,
                     capacity);
        goto fail;
    }
    f->cfg = cfg;
    size_t n = c->n_layer * capacity * f->width;
    f->cache = calloc(c->n_layer, sizeof *f->cache);
    f->kd = malloc(n * sizeof(float));
    f->vd = malloc(n * sizeof(float));
    f->row = malloc(2 * f->width * sizeof(double));
    if (spec->stats) {
        f->kx = malloc(n * sizeof(float));
        f->vx = malloc(n * sizeof(float));
        f->err = calloc(c->n_layer * err_stride(c), sizeof *f->err);
        f->clip = malloc(c->n_layer * 2 * H * sizeof *f->clip);
    }
    int path = spec->attn == LOWP_KV_ATTN_PREFILL || spec->attn == LOWP_KV_ATTN_EXTEND,
        ext = spec->attn == LOWP_KV_ATTN_EXTEND;
    if (path) {
        f->kf = malloc(n * sizeof(float));
        f->vf = malloc(n * sizeof(float));
    }
    if (ext) {
        f->kp = malloc(n * sizeof(float));
        f->vp = malloc(n * sizeof(float));
        f->kw = malloc(capacity * f->width * sizeof(float));
        f->vw = malloc(capacity * f->width * sizeof(float));
    }
    if (f->cache == NULL || f->kd == NULL || f->vd == NULL || f->row == NULL ||
        (spec->stats && (f->kx == NULL || f->vx == NULL || f->err == NULL || f->clip == NULL)) ||
        (path && (f->kf == NULL || f->vf == NULL)) ||
        (ext && (f->kp == NULL || f->vp == NULL || f->kw == NULL || f->vw == NULL))) {
        lowp_why_set(why, why_len, "out of memory for a cache of %zu positions", capacity);
        goto fail;
    }
    for (size_t l = 0; l < c->n_layer; l++) {
        if (lowp_kvcache_create(&cfg, &f->cache[l], why, why_len))
            goto fail;
        if (lowp_block_has_global_scale(cfg.format) &&
            lowp_kvcache_set_global_scales(f->cache[l], spec->k_scale ? spec->k_scale + l * ns : NULL,
                                           spec->v_scale ? spec->v_scale + l * ns : NULL, ns, why, why_len))
            goto fail;
        for (size_t h = 0; spec->stats && h < H; h++)
            for (int w = 0; w < 2; w++)
                f->clip[(l * 2 + (size_t)w) * H + h] =
                    format_max(cfg.format) * lowp_kvcache_global_scale(f->cache[l], (lowp_kv_which)w, h);
    }
    f->spec.k_scale = f->spec.v_scale = NULL; /* the caches hold them now */
    *out = f;
    return 0;
fail:
    lowp_kv_format_free(f);
    return -1;
}

lowp_kv_store lowp_kv_format_store(lowp_kv_format *f)
{
    lowp_kv_store s = {f, fmt_write, fmt_read, fmt_attend};
    return s;
}

const lowp_kvcache *lowp_kv_format_cache(const lowp_kv_format *f, size_t layer)
{
    return layer < f->c.n_layer ? f->cache[layer] : NULL;
}

const float *lowp_kv_format_decoded(const lowp_kv_format *f, lowp_kv_which w, size_t layer)
{
    if (layer >= f->c.n_layer)
        return NULL;
    return (w == LOWP_KV_K ? f->kd : f->vd) + layer * f->cap * f->width;
}

const float *lowp_kv_format_path_rows(const lowp_kv_format *f, lowp_kv_which w, size_t layer, int prefix)
{
    const float *a = prefix ? (w == LOWP_KV_K ? f->kp : f->vp) : (w == LOWP_KV_K ? f->kf : f->vf);
    if (layer >= f->c.n_layer || a == NULL)
        return NULL;
    return a + layer * f->cap * f->width;
}

lowp_kv_err lowp_kv_format_err(const lowp_kv_format *f, lowp_kv_err_what what, size_t layer, size_t head)
{
    lowp_kv_err z = {0, 0, 0, 0, 0};
    size_t nh = what == LOWP_KV_ERR_ATTN ? f->c.n_head : f->c.n_head_kv;
    if (f->err == NULL || layer >= f->c.n_layer || head >= nh)
        return z;
    size_t off = what == LOWP_KV_ERR_K ? 0 : what == LOWP_KV_ERR_V ? f->c.n_head_kv : 2 * f->c.n_head_kv;
    return f->err[layer * err_stride(&f->c) + off + head];
}

void lowp_kv_format_pause_stats(lowp_kv_format *f, int paused) { f->paused = paused != 0; }

void lowp_kv_format_clear_stats(lowp_kv_format *f)
{
    if (f->err != NULL)
        memset(f->err, 0, f->c.n_layer * err_stride(&f->c) * sizeof *f->err);
}

/* ---- the recording store ---- */

struct lowp_kv_record {
    lowp_llama_config c;
    size_t cap, width, qwidth;
    float *kpre, *k, *v, *q; /* [layer][cap][width or qwidth]; q may be NULL */
};

void lowp_kv_record_free(lowp_kv_record *r)
{
    if (r == NULL)
        return;
    free(r->kpre);
    free(r->k);
    free(r->v);
    free(r->q);
    free(r);
}

static int rec_write(void *ctx, size_t layer, size_t pos0, size_t n, const float *k_pre, const float *k,
                     const float *v, char *why, size_t why_len)
{
    lowp_kv_record *r = ctx;
    if (layer >= r->c.n_layer || pos0 > r->cap || n > r->cap - pos0)
        return lowp_why_set(why, why_len, "positions %zu .. %zu are past the cache's %zu", pos0, pos0 + n, r->cap);
    size_t base = (layer * r->cap + pos0) * r->width, bytes = n * r->width * sizeof(float);
    memcpy(r->kpre + base, k_pre, bytes);
    memcpy(r->k + base, k, bytes);
    memcpy(r->v + base, v, bytes);
    return 0;
}

static int rec_read(void *ctx, size_t layer, size_t n, const float **k, const float **v, size_t *ld, char *why,
                    size_t why_len)
{
    lowp_kv_record *r = ctx;
    return layer_rows(r->k, r->v, r->c.n_layer, r->cap, r->width, layer, n, k, v, ld, why, why_len);
}

/* Records the queries, then the forward pass's own attention over the same arrays. */
static int rec_attend(void *ctx, const lowp_llama *m, size_t layer, size_t pos0, size_t n, const float *q,
                      size_t ldq, float *out, char *why, size_t why_len)
{
    lowp_kv_record *r = ctx;
    const float *K = NULL, *V = NULL;
    size_t ld = 0;
    if (rec_read(ctx, layer, pos0 + n, &K, &V, &ld, why, why_len))
        return -1;
    for (size_t i = 0; i < n; i++)
        memcpy(r->q + (layer * r->cap + pos0 + i) * r->qwidth, q + i * ldq, r->qwidth * sizeof(float));
    return lowp_llama_attention(m, q, ldq, n, pos0, K, V, ld, out, why, why_len);
}

int lowp_kv_record_create(const lowp_llama_config *c, size_t capacity, int record_q, lowp_kv_record **out,
                          char *why, size_t why_len)
{
    *out = NULL;
    lowp_kv_record *r = calloc(1, sizeof *r);
    if (r == NULL)
        return lowp_why_set(why, why_len, "out of memory for the cache");
    r->c = *c;
    r->cap = capacity;
    r->width = c->n_head_kv * c->head_dim;
    r->qwidth = c->n_head * c->head_dim;
    size_t n = c->n_layer * capacity * r->width;
    r->kpre = malloc(n * sizeof(float) + 1);
    r->k = malloc(n * sizeof(float) + 1);
    r->v = malloc(n * sizeof(float) + 1);
    if (record_q)
        r->q = malloc(c->n_layer * capacity * r->qwidth * sizeof(float) + 1);
    if (r->kpre == NULL || r->k == NULL || r->v == NULL || (record_q && r->q == NULL)) {
        lowp_kv_record_free(r);
        return lowp_why_set(why, why_len, "out of memory for a recording of %zu positions", capacity);
    }
    *out = r;
    return 0;
}

lowp_kv_store lowp_kv_record_store(lowp_kv_record *r)
{
    lowp_kv_store s = {r, rec_write, rec_read, r->q != NULL ? rec_attend : NULL};
    return s;
}

const float *lowp_kv_record_get(const lowp_kv_record *r, lowp_kv_rec_what what, size_t layer)
{
    if (layer >= r->c.n_layer)
        return NULL;
    size_t base = layer * r->cap * r->width;
    switch (what) {
    case LOWP_KV_REC_K_PRE:
        return r->kpre + base;
    case LOWP_KV_REC_K:
        return r->k + base;
    case LOWP_KV_REC_V:
        return r->v + base;
    case LOWP_KV_REC_Q:
        return r->q != NULL ? r->q + layer * r->cap * r->qwidth : NULL;
    }
    return NULL;
}
