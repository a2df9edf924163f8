/* ref/select/src/qsa.c: the QSA indexer of Qwen3.8-Flash-Next (lowp/select.h gives the
 * definition operation by operation; ref/notes/selection.md the sources). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lowp/format.h"
#include "lowp/select.h"
#include "lowp/why.h"

lowp_qsa_config lowp_qsa_config_default(void)
{
    lowp_qsa_config c;
    memset(&c, 0, sizeof c);
    c.index_heads = 4;
    c.head_dim = 128;
    c.rotary_dim = 64;
    c.ratio = 4;
    c.topk = 512;
    c.divide = 1;
    c.rope_theta = 1e7;
    c.eps = 1e-6f;
    c.keys = LOWP_QSA_KEYS_BF16;
    c.recipe = LOWP_RECIPE_TRTLLM;
    c.gs.dec = 1.0f;
    c.gs.enc = 1.0f;
    return c;
}

size_t lowp_qsa_index_width(const lowp_qsa_config *c) { return c->topk * c->ratio + c->ratio - 1; }

static lowp_block_format key_block_format(lowp_qsa_keys k)
{
    switch (k) {
    case LOWP_QSA_KEYS_NVFP4: return LOWP_NVFP4;
    case LOWP_QSA_KEYS_MXFP4: return LOWP_MXFP4;
    default: return LOWP_MXFP8;
    }
}

static int check_config(const lowp_qsa_config *c, char *why, size_t wl)
{
    if (c == NULL)
        return lowp_why_set(why, wl, "QSA: NULL configuration");
    if (c->index_heads < 1 || c->index_heads > 64)
        return lowp_why_set(why, wl, "QSA: %zu index heads (1..64)", c->index_heads);
    if (c->head_dim < 2 || c->head_dim > 1024 || c->head_dim % 2)
        return lowp_why_set(why, wl, "QSA: index head dim %zu (even, 2..1024)", c->head_dim);
    if (c->rotary_dim % 2 || c->rotary_dim > c->head_dim)
        return lowp_why_set(why, wl, "QSA: rotary dim %zu (even, at most the head dim %zu)", c->rotary_dim,
                            c->head_dim);
    if (c->ratio < 1 || c->ratio > 1024)
        return lowp_why_set(why, wl, "QSA: compression ratio %zu (1..1024)", c->ratio);
    if (c->topk < 1 || c->topk > ((size_t)1 << 20))
        return lowp_why_set(why, wl, "QSA: top-k %zu blocks (1..2^20)", c->topk);
    if (!(c->rope_theta > 0) || !isfinite(c->rope_theta))
        return lowp_why_set(why, wl, "QSA: RoPE theta %g (finite, positive)", c->rope_theta);
    if (!(c->eps >= 0) || !isfinite(c->eps))
        return lowp_why_set(why, wl, "QSA: RMSNorm epsilon %g (finite, >= 0)", (double)c->eps);
    if ((unsigned)c->keys > LOWP_QSA_KEYS_MXFP8)
        return lowp_why_set(why, wl, "QSA: unknown index-key format %d", (int)c->keys);
    if (c->keys >= LOWP_QSA_KEYS_NVFP4) {
        lowp_block_format f = key_block_format(c->keys);
        if (c->head_dim % lowp_block_size(f))
            return lowp_why_set(why, wl, "QSA: %s index keys need a head dim that is a multiple of %zu, not %zu",
                                lowp_block_format_name(f), lowp_block_size(f), c->head_dim);
    }
    return 0;
}

/* torch's float -> bfloat16 (round to nearest even) and float -> float8_e4m3fn (nearest
 * even, no saturation: beyond 464 NaN), both exact on the way back. */
typedef struct qsa_codecs {
    lowp_codec bf16, e4m3;
} qsa_codecs;

static int codecs_init(qsa_codecs *k, char *why, size_t wl)
{
    if (lowp_codec_init(&k->bf16, LOWP_BF16, LOWP_PROFILE_TORCH, LOWP_RN, 0, why, wl) ||
        lowp_codec_init(&k->e4m3, LOWP_E4M3, LOWP_PROFILE_TORCH, LOWP_RN, 0, why, wl))
        return -1;
    return 0;
}

static float bf16(const qsa_codecs *k, float x) { return lowp_decode_f32(LOWP_BF16, lowp_encode_f32(&k->bf16, x)); }
static float e4m3(const qsa_codecs *k, float x) { return lowp_decode_f32(LOWP_E4M3, lowp_encode_f32(&k->e4m3, x)); }

/* out = bf16(RMSNorm1w(x, w)) over d values (the definition in lowp/select.h) */
static void rmsnorm_bf16(const qsa_codecs *k, const float *x, const float *w, size_t d, float eps, float *out)
{
    double ss = 0.0;
    for (size_t i = 0; i < d; i++) {
        float sq = x[i] * x[i]; /* x.pow(2): a binary32 rounding */
        ss += (double)sq;       /* the open-order sum: binary64, rounded once below */
    }
    float var = (float)ss / (float)d;
    float r = 1.0f / sqrtf(var + eps);
    for (size_t i = 0; i < d; i++)
        out[i] = bf16(k, (x[i] * r) * (1.0f + w[i]));
}

/* cos and sin at position pos for the rd/2 frequencies, as BF16 values */
static void rope_table(const qsa_codecs *k, double theta, size_t rd, size_t pos, float *cs, float *sn)
{
    for (size_t i = 0; i < rd / 2; i++) {
        float e = (float)(2 * i) / (float)rd;
        float p = (float)pow((double)(float)theta, (double)e);
        float inv = 1.0f / p;
        float ang = (float)pos * inv;
        cs[i] = bf16(k, (float)cos((double)ang));
        sn[i] = bf16(k, (float)sin((double)ang));
    }
}

/* x (BF16 values) rotated in place on its first rd dims, NeoX rotate_half, per-op BF16 */
static void rope_bf16(const qsa_codecs *k, float *x, size_t rd, const float *cs, const float *sn)
{
    size_t h = rd / 2;
    for (size_t i = 0; i < h; i++) {
        float a = x[i], b = x[i + h];
        float lo = bf16(k, bf16(k, a * cs[i]) + bf16(k, -b * sn[i]));
        float hi = bf16(k, bf16(k, b * cs[i]) + bf16(k, a * sn[i]));
        x[i] = lo;
        x[i + h] = hi;
    }
}

int lowp_qsa_rope_table(const lowp_qsa_config *c, size_t pos, float *cs, float *sn, char *why, size_t wl)
{
    qsa_codecs k;
    if (check_config(c, why, wl) || codecs_init(&k, why, wl))
        return -1;
    rope_table(&k, c->rope_theta, c->rotary_dim, pos, cs, sn);
    return 0;
}

int lowp_qsa_compress(const lowp_qsa_config *c, const float *kraw, size_t seq_len, const float *wk,
                      double *kb, double *kdelta, char *why, size_t wl)
{
    qsa_codecs k;
    if (check_config(c, why, wl) || codecs_init(&k, why, wl))
        return -1;
    size_t d = c->head_dim, R = c->ratio, nb = seq_len / R;
    float *m = malloc(2 * d * sizeof *m + c->rotary_dim * sizeof *m);
    uint8_t *codes = malloc(d + 8), *scales = malloc(d + 8);
    if (m == NULL || codes == NULL || scales == NULL) {
        free(m);
        free(codes);
        free(scales);
        return lowp_why_set(why, wl, "QSA: out of memory");
    }
    float *row = m + d, *cs = m + 2 * d, *sn = cs + c->rotary_dim / 2;
    int rc = 0;
    for (size_t b = 0; b < nb && rc == 0; b++) {
        const float *g = kraw + b * R * d;
        for (size_t i = 0; i < d; i++) {
            float s = 0.0f; /* the compression kernel's fp32 accumulation, token order */
            for (size_t t = 0; t < R; t++)
                s += g[t * d + i];
            m[i] = bf16(&k, s / (float)R);
        }
        rmsnorm_bf16(&k, m, wk, d, c->eps, row);
        rope_table(&k, c->rope_theta, c->rotary_dim, b * R, cs, sn);
        rope_bf16(&k, row, c->rotary_dim, cs, sn);
        double *o = kb + b * d, *od = kdelta ? kdelta + b * d : NULL;
        switch (c->keys) {
        case LOWP_QSA_KEYS_BF16:
            for (size_t i = 0; i < d; i++) {
                o[i] = row[i];
                if (od)
                    od[i] = 0.0; /* the BF16 row is the unquantized key */
            }
            break;
        case LOWP_QSA_KEYS_E4M3:
            for (size_t i = 0; i < d; i++) {
                o[i] = e4m3(&k, row[i]);
                if (od)
                    od[i] = lowp_select_elem_bound(LOWP_E4M3, o[i], 1.0);
            }
            break;
        default: {
            lowp_block_format f = key_block_format(c->keys);
            rc = lowp_block_quantize(f, c->recipe, c->gs, 0, row, d, codes, scales, NULL, why, wl);
            if (rc == 0)
                lowp_block_dequantize_f64(f, c->gs.dec, codes, scales, d, o);
            if (rc == 0 && od)
                lowp_select_quant_bound(f, c->gs.dec, codes, scales, d, od);
        }
        }
    }
    free(m);
    free(codes);
    free(scales);
    return rc;
}

int lowp_qsa_query(const lowp_qsa_config *c, const float *q, size_t pos, const float *wq, float *qo,
                   char *why, size_t wl)
{
    qsa_codecs k;
    if (check_config(c, why, wl) || codecs_init(&k, why, wl))
        return -1;
    float *cs = malloc(c->rotary_dim * sizeof *cs + sizeof *cs);
    if (cs == NULL)
        return lowp_why_set(why, wl, "QSA: out of memory");
    float *sn = cs + c->rotary_dim / 2;
    rope_table(&k, c->rope_theta, c->rotary_dim, pos, cs, sn);
    size_t d = c->head_dim;
    for (size_t h = 0; h < c->index_heads; h++) {
        float *o = qo + h * d;
        rmsnorm_bf16(&k, q + h * d, wq, d, c->eps, o);
        rope_bf16(&k, o, c->rotary_dim, cs, sn);
        if (c->keys == LOWP_QSA_KEYS_E4M3)
            for (size_t i = 0; i < d; i++)
                o[i] = e4m3(&k, o[i]);
    }
    free(cs);
    return 0;
}

int lowp_qsa_scores(const lowp_qsa_config *c, const float *qo, const double *kb, size_t seq_len,
                    size_t pos, float *scores, size_t *visible, char *why, size_t wl)
{
    *visible = 0;
    if (check_config(c, why, wl))
        return -1;
    if (pos >= seq_len)
        return lowp_why_set(why, wl, "QSA: query position %zu outside the sequence of %zu tokens", pos, seq_len);
    size_t d = c->head_dim, R = c->ratio;
    size_t vis = (pos + 1) / R < seq_len / R ? (pos + 1) / R : seq_len / R;
    float div = sqrtf((float)d);
    for (size_t b = 0; b < vis; b++) {
        double hs = 0.0; /* the open-order head sum: binary64, rounded once */
        for (size_t h = 0; h < c->index_heads; h++) {
            const float *qh = qo + h * d;
            const double *kv = kb + b * d;
            double s = 0.0;
            for (size_t i = 0; i < d; i++)
                s += (double)qh[i] * kv[i]; /* exact: at most 8 + 30 significant bits */
            float dot = (float)s;
            float relu = dot > 0.0f ? dot : (dot != dot ? dot : 0.0f); /* torch.relu keeps NaN */
            hs += (double)relu;
        }
        float sc = (float)hs;
        scores[b] = c->divide ? sc / div : sc;
    }
    *visible = vis;
    return 0;
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

int lowp_qsa_select(const lowp_qsa_config *c, const float *scores, size_t visible, size_t pos,
                    int32_t *index, int32_t *blocks, size_t *nblocks, char *why, size_t wl)
{
    if (nblocks != NULL)
        *nblocks = 0;
    if (check_config(c, why, wl))
        return -1;
    size_t R = c->ratio, W = lowp_qsa_index_width(c);
    if (visible != (pos + 1) / R) /* what lowp_qsa_scores gives for pos < seq_len */
        return lowp_why_set(why, wl, "QSA: %zu visible blocks at position %zu (the complete blocks are %zu)",
                            visible, pos, (pos + 1) / R);
    if (pos >= (size_t)INT32_MAX || W >= (size_t)INT32_MAX)
        return lowp_why_set(why, wl, "QSA: position %zu or width %zu beyond int32", pos, W);
    int32_t *sel = malloc((c->topk + 1) * sizeof *sel);
    if (sel == NULL)
        return lowp_why_set(why, wl, "QSA: out of memory");
    size_t n = 0;
    if (lowp_topk(scores, visible, c->topk, sel, &n, why, wl)) {
        free(sel);
        return -1;
    }
    if (blocks != NULL)
        memcpy(blocks, sel, n * sizeof *sel);
    qsort(sel, n, sizeof *sel, cmp_i32);
    size_t w = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t t = 0; t < R; t++)
            index[w++] = (int32_t)((size_t)sel[i] * R + t);
    /* the open tail: pos+1 - (pos+1) % R .. pos, always kept */
    for (size_t p = visible * R; p <= pos; p++)
        index[w++] = (int32_t)p;
    int32_t count = (int32_t)w;
    while (w < W)
        index[w++] = -1;
    index[W] = count;
    if (nblocks != NULL)
        *nblocks = n;
    free(sel);
    return 0;
}
