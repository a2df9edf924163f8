/* ref/model/src/llama.c: the Llama forward pass in binary32 (lowp/llama.h states the model
 * and the arithmetic).
 *
 * Weights are dequantized once at load and packed for the matrix kernels (gemm.h): every
 * linear layer W[out][in] as B = W^T panels. With a tied head the embedding is kept only
 * packed (the LM head's B); a token's embedding row is read back out of the panels
 * (element k of row t sits at panel t / 32, offset k * 32 + t % 32).
 *
 * Attention, per KV head g: K_g is packed as B (keys as columns) and V_g as B (keys as
 * rows); for each of its query heads and each block of the kernel's rows of queries, the
 * scores against keys 0 .. (the block's last position) come from the kernel, then per row:
 * scale by 1/sqrt(head_dim) (a power of two for 64: exact), keys past the row's position
 * set to probability 0, p = exp(s - max) with the kernels' exp and their fixed-order
 * binary64 sum (gemm.h; ggml's soft_max also sums in binary64), p scaled by 1 / sum, and the
 * output is the kernel's P V (keys in order). */
#include "lowp/llama.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm.h"
#include "lowp/why.h"

typedef struct layer_w {
    const float *attn_norm, *ffn_norm; /* into norms */
    float *wqkv;  /* packed [q; k; v] rows: one product gives q, k and v side by side */
    float *wo;
    float *wgu;   /* packed [gate; up] rows */
    float *wdown;
} layer_w;

struct lowp_llama {
    lowp_llama_config c;
    const lowp_gemm_isa *isa;
    float *head;     /* packed LM head: N = n_vocab, K = n_embd */
    float *embd;     /* [n_vocab][n_embd] when the head is not tied, else NULL */
    float *norms;    /* every norm vector, concatenated */
    const float *output_norm;
    layer_w *layers;
};

const lowp_llama_config *lowp_llama_config_of(const lowp_llama *m) { return &m->c; }
const char *lowp_llama_isa(const lowp_llama *m) { return m->isa->name; }

void lowp_llama_free(lowp_llama *m)
{
    if (m == NULL)
        return;
    if (m->layers != NULL)
        for (size_t l = 0; l < m->c.n_layer; l++) {
            layer_w *w = &m->layers[l];
            free(w->wqkv);
            free(w->wo);
            free(w->wgu);
            free(w->wdown);
        }
    free(m->layers);
    free(m->head);
    free(m->embd);
    free(m->norms);
    free(m);
}

static int cfg_uint(const lowp_gguf *g, const char *key, size_t *out, char *why, size_t why_len)
{
    uint64_t v;
    if (lowp_gguf_get_uint(g, key, &v, why, why_len))
        return -1;
    if (v == 0 || v > (1u << 30))
        return lowp_why_set(why, why_len, "metadata %s = %llu is outside 1 .. 2^30", key, (unsigned long long)v);
    *out = (size_t)v;
    return 0;
}

/* The tensor name with shape ne = {in, out} (ne[0] fastest), dequantized; NULL on refusal. */
static float *tensor(const lowp_gguf *g, const char *name, size_t in, size_t out, char *why, size_t why_len)
{
    const lowp_gguf_tensor *t = lowp_gguf_find_tensor(g, name);
    if (t == NULL) {
        lowp_why_set(why, why_len, "the model has no tensor '%s'", name);
        return NULL;
    }
    if (t->ne[0] != in || t->n_elements != (uint64_t)in * out || (out > 1 && t->ne[1] != out)) {
        lowp_why_set(why, why_len, "tensor '%s' has shape [%llu, %llu], expected [%zu, %zu] (ne0, ne1)", name,
                     (unsigned long long)t->ne[0], (unsigned long long)t->ne[1], in, out);
        return NULL;
    }
    char inner[300];
    float *y = lowp_gguf_tensor_f32(t, inner, sizeof inner);
    if (y == NULL)
        lowp_why_set(why, why_len, "tensor '%s': %s", name, inner);
    return y;
}

/* Linear layers [out_i][in] (the names, in order) dequantized, stacked row-wise and packed
 * as one B = W^T: their outputs come out side by side, in the same order. */
static float *linear(const lowp_gguf *g, const char *const *names, const size_t *outs, int count, size_t in,
                     char *why, size_t why_len)
{
    size_t total = 0;
    for (int i = 0; i < count; i++)
        total += outs[i];
    float *w = malloc(total * in * sizeof *w), *bp = malloc(lowp_gemm_packed_size(total, in) * sizeof *bp);
    if (w == NULL || bp == NULL) {
        free(w);
        free(bp);
        lowp_why_set(why, why_len, "out of memory for tensor '%s'", names[0]);
        return NULL;
    }
    size_t row = 0;
    for (int i = 0; i < count; i++) {
        float *t = tensor(g, names[i], in, outs[i], why, why_len);
        if (t == NULL) {
            free(w);
            free(bp);
            return NULL;
        }
        memcpy(w + row * in, t, outs[i] * in * sizeof *t);
        free(t);
        row += outs[i];
    }
    lowp_gemm_pack_nk(total, in, w, in, bp);
    free(w);
    return bp;
}

int lowp_llama_load(const lowp_gguf *g, lowp_llama **out, char *why, size_t why_len)
{
    *out = NULL;
    lowp_gguf_str arch;
    if (lowp_gguf_get_string(g, "general.architecture", &arch, why, why_len))
        return -1;
    if (!lowp_gguf_str_eq(arch, "llama"))
        return lowp_why_set(why, why_len, "architecture '%.*s' is not supported (only 'llama')",
                            (int)(arch.len < 40 ? arch.len : 40), arch.data);
    lowp_llama *m = calloc(1, sizeof *m);
    if (m == NULL)
        return lowp_why_set(why, why_len, "out of memory for the model");
    lowp_llama_config *c = &m->c;
    size_t rope_dims;
    if (cfg_uint(g, "llama.block_count", &c->n_layer, why, why_len) ||
        cfg_uint(g, "llama.embedding_length", &c->n_embd, why, why_len) ||
        cfg_uint(g, "llama.feed_forward_length", &c->n_ff, why, why_len) ||
        cfg_uint(g, "llama.attention.head_count", &c->n_head, why, why_len) ||
        cfg_uint(g, "llama.attention.head_count_kv", &c->n_head_kv, why, why_len) ||
        cfg_uint(g, "llama.context_length", &c->n_ctx, why, why_len) ||
        lowp_gguf_get_float(g, "llama.attention.layer_norm_rms_epsilon", &c->rms_eps, why, why_len) ||
        lowp_gguf_get_float(g, "llama.rope.freq_base", &c->rope_base, why, why_len))
        goto fail;
    if (c->n_embd % c->n_head != 0 || c->n_head % c->n_head_kv != 0) {
        lowp_why_set(why, why_len, "head counts %zu / %zu do not divide the width %zu", c->n_head, c->n_head_kv,
                     c->n_embd);
        goto fail;
    }
    c->head_dim = c->n_embd / c->n_head;
    if (c->head_dim % 2 != 0) {
        lowp_why_set(why, why_len, "head dimension %zu is odd", c->head_dim);
        goto fail;
    }
    rope_dims = c->head_dim;
    if (lowp_gguf_find(g, "llama.rope.dimension_count") != NULL &&
        cfg_uint(g, "llama.rope.dimension_count", &rope_dims, why, why_len))
        goto fail;
    if (rope_dims != c->head_dim) {
        lowp_why_set(why, why_len, "partial RoPE (%zu of %zu dimensions) is not supported", rope_dims, c->head_dim);
        goto fail;
    }
    if (!(c->rms_eps > 0 && c->rms_eps < 1) || !(c->rope_base > 1)) {
        lowp_why_set(why, why_len, "RMSNorm epsilon %g or RoPE base %g is out of range", c->rms_eps, c->rope_base);
        goto fail;
    }
    const lowp_gguf_tensor *te = lowp_gguf_find_tensor(g, "token_embd.weight");
    if (te == NULL) {
        lowp_why_set(why, why_len, "the model has no tensor 'token_embd.weight'");
        goto fail;
    }
    c->n_vocab = (size_t)te->ne[1];
    size_t E = c->n_embd, F = c->n_ff, KV = c->n_head_kv * c->head_dim, V = c->n_vocab;
    m->isa = lowp_gemm_best();
    m->norms = malloc((2 * c->n_layer + 1) * E * sizeof *m->norms);
    m->layers = calloc(c->n_layer, sizeof *m->layers);
    if (m->norms == NULL || m->layers == NULL) {
        lowp_why_set(why, why_len, "out of memory for the model");
        goto fail;
    }
    char name[LOWP_GGUF_MAX_NAME + 16];
    for (size_t l = 0; l <= c->n_layer; l++) {
        for (int which = 0; which < (l < c->n_layer ? 2 : 1); which++) {
            if (l < c->n_layer)
                snprintf(name, sizeof name, "blk.%zu.%s.weight", l, which ? "ffn_norm" : "attn_norm");
            else
                snprintf(name, sizeof name, "output_norm.weight");
            float *v = tensor(g, name, E, 1, why, why_len);
            if (v == NULL)
                goto fail;
            float *dst = m->norms + (2 * l + (size_t)which) * E;
            memcpy(dst, v, E * sizeof *v);
            free(v);
            if (l < c->n_layer) {
                if (which)
                    m->layers[l].ffn_norm = dst;
                else
                    m->layers[l].attn_norm = dst;
            } else {
                m->output_norm = dst;
            }
        }
    }
    for (size_t l = 0; l < c->n_layer; l++) {
        layer_w *w = &m->layers[l];
        char nm[7][LOWP_GGUF_MAX_NAME + 16];
        static const char *const suffix[7] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up",
                                              "ffn_down"};
        const char *p[7];
        for (int i = 0; i < 7; i++) {
            snprintf(nm[i], sizeof nm[i], "blk.%zu.%s.weight", l, suffix[i]);
            p[i] = nm[i];
        }
        const size_t qkv[3] = {E, KV, KV}, o[1] = {E}, gu[2] = {F, F};
        if ((w->wqkv = linear(g, p, qkv, 3, E, why, why_len)) == NULL ||
            (w->wo = linear(g, p + 3, o, 1, E, why, why_len)) == NULL ||
            (w->wgu = linear(g, p + 4, gu, 2, E, why, why_len)) == NULL ||
            (w->wdown = linear(g, p + 6, o, 1, F, why, why_len)) == NULL)
            goto fail;
    }
    c->tied_head = lowp_gguf_find_tensor(g, "output.weight") == NULL;
    const char *head_name = c->tied_head ? "token_embd.weight" : "output.weight";
    if ((m->head = linear(g, &head_name, &V, 1, E, why, why_len)) == NULL)
        goto fail;
    if (!c->tied_head && (m->embd = tensor(g, "token_embd.weight", E, V, why, why_len)) == NULL)
        goto fail;
    *out = m;
    return 0;
fail:
    lowp_llama_free(m);
    return -1;
}

/* ---- the exact cache ---- */

typedef struct kv_f32 {
    size_t n_layer, cap, width; /* width = n_head_kv * head_dim */
    float *k, *v;               /* [layer][position][width] */
} kv_f32;

static int kv_f32_write(void *ctx, size_t layer, size_t pos0, size_t n, const float *k_pre, const float *k,
                        const float *v, char *why, size_t why_len)
{
    (void)k_pre;
    kv_f32 *s = ctx;
    if (layer >= s->n_layer || pos0 > s->cap || n > s->cap - pos0)
        return lowp_why_set(why, why_len, "positions %zu .. %zu are past the cache's %zu", pos0, pos0 + n, s->cap);
    size_t base = (layer * s->cap + pos0) * s->width;
    memcpy(s->k + base, k, n * s->width * sizeof(float));
    memcpy(s->v + base, v, n * s->width * sizeof(float));
    return 0;
}

static int kv_f32_read(void *ctx, size_t layer, size_t n, const float **k, const float **v, size_t *ld, char *why,
                       size_t why_len)
{
    kv_f32 *s = ctx;
    if (layer >= s->n_layer || n > s->cap)
        return lowp_why_set(why, why_len, "the cache holds %zu positions, %zu asked", s->cap, n);
    *k = s->k + layer * s->cap * s->width;
    *v = s->v + layer * s->cap * s->width;
    *ld = s->width;
    return 0;
}

int lowp_kv_f32_create(const lowp_llama_config *c, size_t capacity, lowp_kv_store *out, char *why, size_t why_len)
{
    memset(out, 0, sizeof *out);
    kv_f32 *s = calloc(1, sizeof *s);
    if (s == NULL)
        return lowp_why_set(why, why_len, "out of memory for the cache");
    s->n_layer = c->n_layer;
    s->cap = capacity;
    s->width = c->n_head_kv * c->head_dim;
    size_t n = c->n_layer * capacity * s->width;
    s->k = malloc(n * sizeof(float) + 1);
    s->v = malloc(n * sizeof(float) + 1);
    if (s->k == NULL || s->v == NULL) {
        free(s->k);
        free(s->v);
        free(s);
        return lowp_why_set(why, why_len, "out of memory for a cache of %zu positions", capacity);
    }
    out->ctx = s;
    out->write = kv_f32_write;
    out->read = kv_f32_read;
    return 0;
}

void lowp_kv_f32_free(lowp_kv_store *st)
{
    if (st == NULL || st->ctx == NULL)
        return;
    kv_f32 *s = st->ctx;
    free(s->k);
    free(s->v);
    free(s);
    memset(st, 0, sizeof *st);
}

/* ---- the pass ---- */

/* y = (x * 1/sqrt(mean(x^2) + eps)) * w, the sum of squares in binary64 (ggml's rms_norm,
 * then its mul by the weight). */
static void rmsnorm(const float *x, const float *w, size_t n, float eps, float *y)
{
    double sum = 0.0;
    for (size_t i = 0; i < n; i++)
        sum += (double)(x[i] * x[i]);
    float mean = (float)(sum / (double)n);
    float scale = 1.0f / sqrtf(mean + eps);
    for (size_t i = 0; i < n; i++)
        y[i] = (x[i] * scale) * w[i];
}

/* The RoPE table of position pos: cs[2i], cs[2i + 1] = cos, sin of theta_i (theta as
 * lowp/llama.h states), i < hd / 2. Made once per position and forward pass (the layers
 * and q, k share it: 1/60 of the cosf/sinf calls of computing it per rope call). */
static void rope_table(float *cs, size_t hd, size_t pos, float theta_scale)
{
    float theta = (float)pos;
    for (size_t i = 0; i < hd / 2; i++) {
        cs[2 * i] = cosf(theta);
        cs[2 * i + 1] = sinf(theta);
        theta *= theta_scale;
    }
}

/* NORM RoPE on n_heads heads of row x with the position's table cs (rope_table). */
static void rope(float *x, size_t n_heads, size_t hd, const float *cs)
{
    for (size_t h = 0; h < n_heads; h++) {
        float *v = x + h * hd;
        for (size_t i = 0; i < hd / 2; i++) {
            float x0 = v[2 * i], x1 = v[2 * i + 1], c = cs[2 * i], s = cs[2 * i + 1];
            v[2 * i] = x0 * c - x1 * s;
            v[2 * i + 1] = x0 * s + x1 * c;
        }
    }
}

/* One row of scores: keys 0 .. valid - 1 scaled, p = exp(s - max) (the kernels' exp and
 * their fixed-order binary64 sum, gemm.h), p times 1 / sum; keys valid .. L - 1 get
 * probability 0. The simd loops are elementwise (and a max, exact in any order): no result
 * depends on how they are vectorized. */
static void softmax_row(const lowp_gemm_isa *isa, float *s, size_t valid, size_t L, float scale)
{
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (size_t j = 0; j < valid; j++) {
        s[j] *= scale;
        mx = s[j] > mx ? s[j] : mx;
    }
    double sum = isa->softmax_exp(s, valid, mx);
    float inv = (float)(1.0 / sum);
#pragma omp simd
    for (size_t j = 0; j < valid; j++)
        s[j] *= inv;
    for (size_t j = valid; j < L; j++)
        s[j] = 0.0f;
}

/* Causal GQA attention of n queries (rows of q, ldq apart) at positions pos0 .. over keys
 * 0 .. pos0 + n - 1 (rows of K, V, ld apart) into out (n x n_embd). One parallel region:
 * the K and V of every KV head are packed, then (query head, block of rows) pairs are
 * shared out dynamically (later blocks see more keys). */
static void attention(const lowp_llama *m, const float *q, size_t ldq, size_t n, size_t pos0, const float *K,
                      const float *V, size_t ld, float *out, float *kp, float *vp, float *scratch)
{
    const lowp_llama_config *c = &m->c;
    size_t hd = c->head_dim, E = c->n_embd, T = pos0 + n, mr = m->isa->mr, group = c->n_head / c->n_head_kv;
    size_t n_blocks = (n + mr - 1) / mr, kps = lowp_gemm_packed_size(T, hd), vps = lowp_gemm_packed_size(hd, T);
    float scale = 1.0f / sqrtf((float)hd);
#pragma omp parallel
    {
#pragma omp for schedule(static)
        for (size_t g = 0; g < 2 * c->n_head_kv; g++) {
            if (g < c->n_head_kv)
                lowp_gemm_pack_nk(T, hd, K + g * hd, ld, kp + g * kps); /* B[d][key] = K[key][d]; nested: serial */
            else
                lowp_gemm_pack_kn(T, hd, V + (g - c->n_head_kv) * hd, ld, vp + (g - c->n_head_kv) * vps);
        }
        float *S = scratch + (size_t)omp_get_thread_num() * LOWP_GEMM_MR_MAX * T;
#pragma omp for schedule(dynamic, 1)
        for (size_t job = 0; job < c->n_head * n_blocks; job++) {
            size_t h = job / n_blocks, b = job % n_blocks, gk = h / group;
            const float *kpg = kp + gk * kps, *vpg = vp + gk * vps;
            size_t m0 = b * mr, r = n - m0 < mr ? n - m0 : mr;
            size_t L = pos0 + m0 + r; /* keys 0 .. L - 1 cover every row of the block */
            const float *qr[LOWP_GEMM_MR_MAX], *pr[LOWP_GEMM_MR_MAX];
            for (size_t i = 0; i < r; i++) {
                qr[i] = q + (m0 + i) * ldq + h * hd;
                pr[i] = S + i * T;
            }
            for (size_t p = 0; p * LOWP_GEMM_NR < L; p++) {
                size_t nc = L - p * LOWP_GEMM_NR < LOWP_GEMM_NR ? L - p * LOWP_GEMM_NR : LOWP_GEMM_NR;
                m->isa->kernel(hd, qr, kpg + p * LOWP_GEMM_NR * hd, S + p * LOWP_GEMM_NR, T, r, nc);
            }
            for (size_t i = 0; i < r; i++)
                softmax_row(m->isa, S + i * T, pos0 + m0 + i + 1, L, scale);
            for (size_t p = 0; p * LOWP_GEMM_NR < hd; p++) {
                size_t nc = hd - p * LOWP_GEMM_NR < LOWP_GEMM_NR ? hd - p * LOWP_GEMM_NR : LOWP_GEMM_NR;
                m->isa->kernel(L, pr, vpg + p * LOWP_GEMM_NR * T, out + m0 * E + h * hd + p * LOWP_GEMM_NR, E, r, nc);
            }
        }
    }
}

int lowp_llama_attention(const lowp_llama *m, const float *q, size_t ldq, size_t n, size_t pos0, const float *K,
                         const float *V, size_t ld, float *out, char *why, size_t why_len)
{
    const lowp_llama_config *c = &m->c;
    size_t hd = c->head_dim, T = pos0 + n;
    if (n == 0)
        return 0;
    if (ldq < c->n_head * hd || ld < c->n_head_kv * hd)
        return lowp_why_set(why, why_len, "attention rows of %zu (q) and %zu (K, V) floats are shorter than %zu, %zu",
                            ldq, ld, c->n_head * hd, c->n_head_kv * hd);
    size_t kpn = c->n_head_kv * lowp_gemm_packed_size(T, hd), vpn = c->n_head_kv * lowp_gemm_packed_size(hd, T);
    float *buf = malloc((kpn + vpn + (size_t)omp_get_max_threads() * LOWP_GEMM_MR_MAX * T) * sizeof(float));
    if (buf == NULL)
        return lowp_why_set(why, why_len, "out of memory for the attention of %zu tokens over %zu", n, T);
    attention(m, q, ldq, n, pos0, K, V, ld, out, buf, buf + kpn, buf + kpn + vpn);
    free(buf);
    return 0;
}

static void embed(const lowp_llama *m, int32_t t, float *y)
{
    size_t E = m->c.n_embd;
    if (m->embd != NULL) {
        memcpy(y, m->embd + (size_t)t * E, E * sizeof *y);
        return;
    }
    const float *p = m->head + (size_t)t / LOWP_GEMM_NR * LOWP_GEMM_NR * E + (size_t)t % LOWP_GEMM_NR;
    for (size_t k = 0; k < E; k++)
        y[k] = p[k * LOWP_GEMM_NR];
}

int lowp_llama_forward(const lowp_llama *m, lowp_kv_store *kv, const int32_t *tokens, size_t n, size_t pos0,
                       float *hidden, char *why, size_t why_len)
{
    const lowp_llama_config *c = &m->c;
    if (n == 0)
        return 0;
    if (pos0 > c->n_ctx || n > c->n_ctx - pos0)
        return lowp_why_set(why, why_len, "positions %zu .. %zu exceed the model's context of %zu", pos0,
                            pos0 + n - 1, c->n_ctx);
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || (size_t)tokens[i] >= c->n_vocab)
            return lowp_why_set(why, why_len, "token %zu is %d, outside the vocabulary of %zu", i, tokens[i],
                                c->n_vocab);
    size_t E = c->n_embd, F = c->n_ff, KV = c->n_head_kv * c->head_dim, hd = c->head_dim, T = pos0 + n;
    size_t QKV = E + 2 * KV;
    int nt = omp_get_max_threads();
    size_t kpn = c->n_head_kv * lowp_gemm_packed_size(T, hd), vpn = c->n_head_kv * lowp_gemm_packed_size(hd, T);
    size_t total = 3 * n * E + n * QKV + 3 * n * KV + 2 * n * F + n * F + kpn + vpn + (size_t)nt * LOWP_GEMM_MR_MAX * T +
                   n * hd;
    float *buf = malloc(total * sizeof(float));
    if (buf == NULL)
        return lowp_why_set(why, why_len, "out of memory for a forward pass of %zu tokens", n);
    float *x = buf, *h = x + n * E, *att = h + n * E, *qkv = att + n * E, *kpre = qkv + n * QKV, *k = kpre + n * KV,
          *v = k + n * KV, *gu = v + n * KV, *act = gu + 2 * n * F, *kp = act + n * F, *vp = kp + kpn,
          *scratch = vp + vpn, *cs = scratch + (size_t)nt * LOWP_GEMM_MR_MAX * T;
    float eps = (float)c->rms_eps, theta_scale = powf((float)c->rope_base, -2.0f / (float)hd);
    int rc = 0;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++)
        rope_table(cs + i * hd, hd, pos0 + i, theta_scale);
    for (size_t i = 0; i < n; i++)
        embed(m, tokens[i], x + i * E);
    const float *pending = NULL; /* the last block's output, added to x with the next norm */
    for (size_t l = 0; l < c->n_layer && rc == 0; l++) {
        const layer_w *w = &m->layers[l];
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++) {
            if (pending != NULL)
                for (size_t j = 0; j < E; j++)
                    x[i * E + j] += pending[i * E + j];
            rmsnorm(x + i * E, w->attn_norm, E, eps, h + i * E);
        }
        lowp_gemm(m->isa, n, QKV, E, h, E, w->wqkv, qkv, QKV);
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++) {
            float *qi = qkv + i * QKV;
            memcpy(kpre + i * KV, qi + E, KV * sizeof *qi);
            memcpy(k + i * KV, qi + E, KV * sizeof *qi);
            memcpy(v + i * KV, qi + E + KV, KV * sizeof *qi);
            rope(qi, c->n_head, hd, cs + i * hd);
            rope(k + i * KV, c->n_head_kv, hd, cs + i * hd);
        }
        const float *Kc, *Vc;
        size_t ld;
        if (kv->write(kv->ctx, l, pos0, n, kpre, k, v, why, why_len)) {
            rc = -1;
            break;
        }
        if (kv->attend != NULL) { /* the store's attention (lowp/llama.h) */
            if (kv->attend(kv->ctx, m, l, pos0, n, qkv, QKV, att, why, why_len)) {
                rc = -1;
                break;
            }
        } else {
            if (kv->read(kv->ctx, l, T, &Kc, &Vc, &ld, why, why_len)) {
                rc = -1;
                break;
            }
            attention(m, qkv, QKV, n, pos0, Kc, Vc, ld, att, kp, vp, scratch);
        }
        lowp_gemm(m->isa, n, E, E, att, E, w->wo, h, E);
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++) {
            for (size_t j = 0; j < E; j++)
                x[i * E + j] += h[i * E + j];
            rmsnorm(x + i * E, w->ffn_norm, E, eps, att + i * E);
        }
        lowp_gemm(m->isa, n, 2 * F, E, att, E, w->wgu, gu, 2 * F);
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++) {
            const float *gi = gu + i * 2 * F, *ui = gi + F;
            for (size_t j = 0; j < F; j++)
                act[i * F + j] = gi[j] / (1.0f + expf(-gi[j])) * ui[j];
        }
        lowp_gemm(m->isa, n, E, F, act, F, w->wdown, h, E);
        pending = h;
    }
    if (rc == 0 && hidden != NULL)
        for (size_t i = 0; i < n; i++) {
            for (size_t j = 0; j < E; j++)
                x[i * E + j] += h[i * E + j];
            rmsnorm(x + i * E, m->output_norm, E, eps, hidden + i * E);
        }
    free(buf);
    return rc;
}

void lowp_llama_logits(const lowp_llama *m, const float *hidden, size_t n, float *logits)
{
    lowp_gemm(m->isa, n, m->c.n_vocab, m->c.n_embd, hidden, m->c.n_embd, m->head, logits, m->c.n_vocab);
}
