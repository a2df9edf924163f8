/* The conformance run of the GPU decode kernel: lowp/gpu_conform.h.
 *
 * The accuracy bound (check 2). For query row r, position j, output dim d, with exact
 * binary64 values from the dequantized cache (global scales included):
 *   A_j = sum_d |q_d k_jd|, s2_j = sm_scale log2(e) q.k_j, p_j = 2^(s2_j - max) / sum,
 *   V_d = sum_j p_j |v_jd|  (the probability-weighted |v|), T = tiles, C = splits.
 * First-order error sources of the kernel (lowp/attn_gpu_emul.h), u = 2^-24:
 *   - score: each chained MMA step truncates its 17 aligned terms (< 2u relative to the
 *     step's largest term each, by the 25 kept fraction bits) and rounds toward zero
 *     (< 2u): |acc - q.k| <= (qk_dim/16) 36 u A_j; with the two roundings of the score
 *     scale: Ds_j = sm log2(e) (qk_dim/16) 36 u A_j + 2u |s2_j|  (log2 units);
 *   - probability: ex2 = ex2.approx.ftz.f32 (lowp/ex2_approx.h) within 4.39u of 2^x,
 *     charged 5u (its input truncated to 2^-23: 1.39u; its mantissa within 1.5 ulp of
 *     2^(k 2^-23): 3u; lowp/attn_gpu_extend.h derives it); the subtraction s - m within
 *     u |s - m|. Position j's weight in O / L is p_j times the alphas of the tiles after
 *     its own in its split (at most ceil(chunk / 16) - 1 of them, each within 5u, their
 *     subtractions m - m' within u |m - m'|, which sum to at most u |s2_j - max| over a
 *     split) times its split's merge weight w_c (5u and u |m_c - M|). An error common to
 *     every weight (the running max's) cancels in O / L, these do not: the relative error
 *     of a weight is at most delta = ln2 max_j (Ds_j + 3u |s2_j - max|)
 *     + 5u (ceil(chunk / 16) + 1) (until 2026-12-06 the exponential was exp2_sw, 3u, and
 *     the alphas and merge weights were not charged);
 *   - P rounded to BF16 in the numerator only: 2^-8 V_d;
 *   - P V MMA steps: T 36 u V_d; binary32 sums of l, of the splits, the rescalings, the
 *     division and the V scale: (T + C + 24) 2u (|out_d| + V_d);
 *   - the output rounded to BF16: 2^-8 |out_d|;
 *   - underflow: ex2.approx.ftz flushes a result below 2^-126 to +0 (a p, an alpha or a
 *     merge weight), so a position whose weight is below 2^-126 may be lost, an absolute
 *     error below 2^-126 |v_jd| each, of L >= 1 (the largest probability is 1):
 *     n 2^-125 max_j |v_jd| (doubled); an output below 2^-126 is rounded to the BF16
 *     subnormal spacing 2^-133 (half of it, doubled).
 * Bound = 2 x (2^-8 |out_d| + 2^-8 V_d + 2 delta V_d + T 36 u V_d
 *              + (T + C + 24) 2u (|out_d| + V_d)) + n 2^-125 max_j |v_jd| + 2^-133,
 * the factor 2 covering second-order terms. The report gives the worst |gpu - exact| /
 * bound, so how tight it is can be seen. Cases whose K or V elements leave the BF16 range
 * (the kernel's element is Inf) or whose scores approach binary32 overflow are counted as
 * non-finite and only checked bit for bit.
 */
#include "lowp/gpu_conform.h"

#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "lowp/attn_gpu_emul.h"
#include "lowp/cases.h"
#include "lowp/cuda_check.h"
#include "lowp/format.h"
#include "lowp/gpu_decode.h"
#include "lowp/gpu_kvcache.h"
#include "lowp/why.h"

lowp_gpu_conform_opts lowp_gpu_conform_defaults(void)
{
    lowp_gpu_conform_opts o = {.cases_per_format = 100000, .broad_cases = 6000,
                               .long_configs = 2, .max_ctx = 131072,
                               .seed = LOWP_DEFAULT_SEED};
    return o;
}

/* ---- random numbers (splitmix64) ------------------------------------------------------ */
typedef struct rng {
    uint64_t s;
} rng;
/* the library's one generator (lowp/cases.h), on this stream's state */
static uint64_t rnext(rng *r) { return lowp_splitmix64(&r->s); }
static size_t rbelow(rng *r, size_t n) { return n ? (size_t)(rnext(r) % n) : 0; }
static double runif(rng *r) { return (double)(rnext(r) >> 11) * 0x1p-53; }
static double rgauss(rng *r)
{
    double u = runif(r), v = runif(r);
    if (u < 1e-300)
        u = 1e-300;
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}
static size_t rpick(rng *r, const size_t *v, size_t n) { return v[rbelow(r, n)]; }

/* ---- one configuration ----------------------------------------------------------------- */
typedef enum content { C_QUANT = 0, C_RANDOM = 1, C_ADVERSARIAL = 2 } content;
static const char *content_name(content c)
{
    return c == C_QUANT ? "quantized" : c == C_RANDOM ? "random-codes" : "adversarial";
}

typedef struct config {
    lowp_kv_config cfg;
    size_t batch, G, *len;
    content mode;
    int32_t *indptr, *indices, *last;
    float *kg, *vg; /* n_global */
    size_t n_global;
} config;

static void config_free(config *c)
{
    free(c->len);
    free(c->indptr);
    free(c->indices);
    free(c->last);
    free(c->kg);
    free(c->vg);
    memset(c, 0, sizeof *c);
}

static const size_t DIMS[] = {64, 64, 128, 128, 128, 192, 256, 512};
static const size_t HEADS[] = {1, 1, 2, 3, 4, 5, 8, 8, 12, 20};
static const size_t GROUPS[] = {1, 2, 3, 4, 4, 5, 6, 7, 8, 12, 16};
static const size_t PAGES[] = {1, 2, 3, 4, 8, 16, 16, 32, 64};

static const size_t BULK_DIMS[] = {64, 64, 128};
static const size_t BULK_HEADS[] = {1, 2, 3, 4};
static const size_t BULK_GROUPS[] = {1, 2, 3, 4, 5, 6};

/* Draw a configuration of at most max_batch (>= 1) sequences; long_ctx > 0 makes a
 * long-context one (batch 1-2); bulk makes a small one (heads <= 4 x 6, dims 64/128, lengths <= 128): the same kinds of content,
 * layouts, pages and edge values at a fraction of the emulator's cost. */
static int config_draw(config *c, lowp_block_format f, rng *r, size_t long_ctx, int bulk,
                       size_t max_batch, char *why, size_t wl)
{
    memset(c, 0, sizeof *c);
    size_t ps = rpick(r, PAGES, sizeof PAGES / sizeof *PAGES);
    size_t H = rpick(r, HEADS, sizeof HEADS / sizeof *HEADS);
    size_t G = rpick(r, GROUPS, sizeof GROUPS / sizeof *GROUPS);
    size_t Dq = rpick(r, DIMS, sizeof DIMS / sizeof *DIMS);
    size_t Dv = rbelow(r, 3) ? Dq : rpick(r, DIMS, sizeof DIMS / sizeof *DIMS);
    size_t B = 1 + rbelow(r, 48);
    if (bulk) {
        H = rpick(r, BULK_HEADS, sizeof BULK_HEADS / sizeof *BULK_HEADS);
        G = rpick(r, BULK_GROUPS, sizeof BULK_GROUPS / sizeof *BULK_GROUPS);
        Dq = rpick(r, BULK_DIMS, 3);
        Dv = rbelow(r, 3) ? Dq : rpick(r, BULK_DIMS, 3);
    }
    if (long_ctx) {
        ps = rbelow(r, 2) ? 16 : 64;
        H = 1 + rbelow(r, 8);
        G = rpick(r, GROUPS, sizeof GROUPS / sizeof *GROUPS);
        Dq = 128;
        Dv = 128;
        B = 1 + rbelow(r, 2);
    }
    /* the last configuration of a format holds only the cases still wanted (>= 1); the
     * random draws above do not depend on the cap, so neither do the other choices */
    if (B > max_batch)
        B = max_batch;
    c->mode = long_ctx ? C_RANDOM : (content)(rbelow(r, 20) < 8 ? C_QUANT
                                              : rbelow(r, 12) < 9 ? C_RANDOM : C_ADVERSARIAL);
    c->batch = B;
    c->G = G;
    c->len = calloc(B, sizeof *c->len);
    c->indptr = calloc(B + 1, sizeof *c->indptr);
    c->last = calloc(B, sizeof *c->last);
    if (!c->len || !c->indptr || !c->last)
        return lowp_why_set(why, wl, "out of memory");
    size_t total_pages = 0, total_tokens = 0;
    size_t cap = c->mode == C_QUANT ? 1024 : 4096; /* tokens per configuration */
    /* and at most 2^24 (token, query head, dim) triples, so that no configuration costs
     * the CPU emulator much more than the others (they run side by side) */
    size_t per_token = H * G * (Dq + Dv);
    if (cap > ((size_t)1 << 24) / per_token)
        cap = ((size_t)1 << 24) / per_token;
    if (cap < 16)
        cap = 16;
    for (size_t b = 0; b < B; b++) {
        size_t n;
        if (long_ctx)
            n = long_ctx - rbelow(r, long_ctx / 4);
        else {
            /* log-uniform 1..1024 (1..256 in bulk), with page-boundary and tile-boundary
             * lengths */
            double e = runif(r) * (bulk ? 7.0 : 10.0);
            n = (size_t)exp2(e);
            if (rbelow(r, 4) == 0)
                n = (1 + rbelow(r, 8)) * (rbelow(r, 2) ? ps : 16) + rbelow(r, 3) - 1;
            if (n < 1)
                n = 1;
            if (total_tokens + n > cap)
                n = 1 + rbelow(r, 16);
        }
        c->len[b] = n;
        total_tokens += n;
        size_t np = (n + ps - 1) / ps;
        c->indptr[b + 1] = (int32_t)(c->indptr[b] + np);
        c->last[b] = (int32_t)(n - (np - 1) * ps);
        total_pages += np;
    }
    size_t num_pages = total_pages + rbelow(r, 4);
    c->indices = malloc((total_pages + 1) * sizeof *c->indices);
    size_t *perm = malloc(num_pages * sizeof *perm);
    if (!c->indices || !perm) {
        free(perm);
        return lowp_why_set(why, wl, "out of memory");
    }
    for (size_t i = 0; i < num_pages; i++)
        perm[i] = i;
    for (size_t i = num_pages; i > 1; i--) { /* shuffled pages */
        size_t j = rbelow(r, i), t = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = t;
    }
    for (size_t i = 0; i < total_pages; i++)
        c->indices[i] = (int32_t)perm[i];
    free(perm);

    lowp_kv_config k = lowp_kv_config_default(f, num_pages, ps, H, Dq, Dv);
    k.layout = rbelow(r, 2) ? LOWP_KV_HND : LOWP_KV_NHD;
    if (f == LOWP_NVFP4) {
        static const lowp_recipe rc[] = {LOWP_RECIPE_EXACT, LOWP_RECIPE_TRTLLM,
                                         LOWP_RECIPE_SGLANG_KV};
        k.recipe = rc[rbelow(r, 3)];
        if (ps % 4 == 0) {
            k.v_sf_order = rbelow(r, 2) ? LOWP_KV_SF_INTERLEAVE4 : LOWP_KV_SF_LINEAR;
            k.k_sf_order = rbelow(r, 4) == 0 ? LOWP_KV_SF_INTERLEAVE4 : LOWP_KV_SF_LINEAR;
        }
    }
    int has_global = lowp_block_has_global_scale(f) && k.recipe != LOWP_RECIPE_SGLANG_KV;
    k.scale_gran = has_global && rbelow(r, 2) ? LOWP_KV_SCALE_HEAD : LOWP_KV_SCALE_TENSOR;
    c->cfg = k;
    c->n_global = k.scale_gran == LOWP_KV_SCALE_HEAD ? H : 1;
    c->kg = malloc(c->n_global * sizeof *c->kg);
    c->vg = malloc(c->n_global * sizeof *c->vg);
    if (!c->kg || !c->vg)
        return lowp_why_set(why, wl, "out of memory");
    for (size_t i = 0; i < c->n_global; i++) {
        c->kg[i] = has_global && rbelow(r, 3) ? (float)exp2(runif(r) * 8.0 - 4.0) : 1.0f;
        c->vg[i] = has_global && rbelow(r, 3) ? (float)exp2(runif(r) * 8.0 - 4.0) : 1.0f;
    }
    return lowp_kv_config_check(&c->cfg, why, wl);
}

/* A random code of the format for the raw-content modes: finite, moderate magnitudes
 * (scores stay far from binary32 overflow), with NaN / Inf codes in the adversarial
 * mode. */
static uint16_t raw_code(lowp_block_format f, rng *r, int adv)
{
    uint64_t x = rnext(r);
    switch (f) {
    case LOWP_BF16_PASS: {
        if (adv && (x & 1023) == 0)
            return (x >> 10) & 1 ? 0x7F80 : 0x7FC1; /* Inf, NaN */
        double v = rgauss(r) * exp2((double)((x >> 20) % 9) - 4.0);
        return lowp_bf16_from_f32((float)v);
    }
    case LOWP_FP8_E4M3: {
        uint16_t c = (uint16_t)(x & 0xFF);
        if ((c & 0x7F) == 0x7F && !(adv && (x & 0x300) == 0))
            c &= 0xFE;
        return c;
    }
    case LOWP_FP8_E5M2: {
        uint16_t c = (uint16_t)(x & 0xFF);
        if ((c & 0x7C) == 0x7C && !(adv && (x & 0x300) == 0))
            c &= 0xBB; /* exponent 31 -> 30... keep finite */
        return c;
    }
    default:
        return (uint16_t)(x & 0xF);
    }
}

static uint8_t raw_scale(lowp_block_format f, rng *r, int adv)
{
    uint64_t x = rnext(r);
    if (f == LOWP_NVFP4) {
        if ((x & 31) == 0)
            return 0x00; /* zero block scale */
        if ((x & 31) == 1)
            return (uint8_t)(1 + ((x >> 8) & 7)); /* E4M3 subnormal scale */
        if ((x & 31) == 2)
            return 0x7E; /* 448 */
        if (adv && (x & 63) == 3)
            return 0x7F; /* NaN */
        return (uint8_t)(0x20 + ((x >> 8) % 0x30));
    }
    /* MXFP4: E8M0 */
    if (adv && (x & 31) == 0)
        return (x >> 8) & 1 ? 0xFF : ((x >> 9) & 1 ? 0x00 : 0xFE);
    return (uint8_t)(127 - 8 + ((x >> 8) % 17));
}

/* Fill the pages of every sequence. */
static int config_fill(const config *c, lowp_kvcache *kc, rng *r, char *why, size_t wl)
{
    const lowp_kv_config *k = &c->cfg;
    if (lowp_kvcache_set_global_scales(kc, c->kg, c->vg, c->n_global, why, wl))
        return -1;
    lowp_kv_page_table pt = {c->batch, c->indptr, c->indices, c->last};
    if (c->mode == C_QUANT) {
        size_t nk = k->num_heads * k->qk_dim, nv = k->num_heads * k->vo_dim;
        float *kv = malloc((nk + nv) * sizeof *kv);
        double *ch = malloc((k->qk_dim + k->vo_dim) * sizeof *ch);
        if (!kv || !ch) {
            free(kv);
            free(ch);
            return lowp_why_set(why, wl, "out of memory");
        }
        /* K-like: per-channel magnitudes with a few outlier channels; V-like: O(1) */
        for (size_t d = 0; d < k->qk_dim; d++)
            ch[d] = rbelow(r, 16) == 0 ? 20.0 + 30.0 * runif(r) : 0.5 + runif(r);
        for (size_t d = 0; d < k->vo_dim; d++)
            ch[k->qk_dim + d] = 0.5 + runif(r);
        for (size_t b = 0; b < c->batch; b++)
            for (size_t pos = 0; pos < c->len[b]; pos++) {
                for (size_t i = 0; i < nk; i++)
                    kv[i] = (float)(rgauss(r) * ch[i % k->qk_dim]);
                for (size_t i = 0; i < nv; i++)
                    kv[nk + i] = (float)(rgauss(r) * ch[k->qk_dim + i % k->vo_dim]);
                if (lowp_kvcache_write_pos(kc, &pt, b, pos, kv, kv + nk, NULL, NULL, why, wl)) {
                    free(kv);
                    free(ch);
                    return -1;
                }
            }
        free(kv);
        free(ch);
        return 0;
    }
    int adv = c->mode == C_ADVERSARIAL;
    for (int w = 0; w < 2; w++) {
        lowp_kv_which which = w ? LOWP_KV_V : LOWP_KV_K;
        size_t dim = w ? k->vo_dim : k->qk_dim, bytes;
        size_t S = lowp_kv_row_scales(k, which);
        uint8_t *codes = lowp_kvcache_buffer(kc, which, LOWP_KV_CODES, &bytes);
        uint8_t *scales = S ? lowp_kvcache_buffer(kc, which, LOWP_KV_SCALES, &bytes) : NULL;
        for (size_t b = 0; b < c->batch; b++)
            for (size_t pos = 0; pos < c->len[b]; pos++) {
                size_t page, slot;
                if (lowp_kv_locate(&pt, k->page_size, b, pos, &page, &slot, why, wl))
                    return -1;
                for (size_t h = 0; h < k->num_heads; h++) {
                    uint8_t *row = codes + lowp_kvcache_code_offset(kc, which, page, slot, h);
                    int zero_row = rbelow(r, 64) == 0, sat_row = rbelow(r, 64) == 0;
                    for (size_t d = 0; d < dim; d++) {
                        uint16_t code = raw_code(k->format, r, adv);
                        if (zero_row)
                            code = 0;
                        if (sat_row && (k->format == LOWP_NVFP4 || k->format == LOWP_MXFP4))
                            code = (uint16_t)(0x7 | (code & 8));
                        switch (k->format) {
                        case LOWP_BF16_PASS:
                            row[2 * d] = (uint8_t)code;
                            row[2 * d + 1] = (uint8_t)(code >> 8);
                            break;
                        case LOWP_NVFP4:
                        case LOWP_MXFP4:
                            row[d / 2] = (uint8_t)((row[d / 2] & (0xF0 >> (4 * (d & 1)))) |
                                                   (code << (4 * (d & 1))));
                            break;
                        default:
                            row[d] = (uint8_t)code;
                        }
                    }
                    for (size_t s = 0; s < S; s++)
                        scales[lowp_kvcache_scale_offset(kc, which, page, slot, h, s)] =
                            raw_scale(k->format, r, adv);
                }
            }
    }
    return 0;
}

/* ---- reference and bound --------------------------------------------------------------- */
typedef struct refstat {
    size_t cases, outside;
    double worst;
    char first[256];
} refstat;

/* Compares gpu (BF16) with binary64 attention for sequence b; returns 1 if the inputs
 * were finite (and the case was compared). */
static int ref_check(const config *c, const lowp_kvcache *kc, const lowp_kv_view *view,
                     const uint16_t *q, const uint16_t *gpu, double sm, size_t chunk,
                     size_t b, refstat *st, double *kbuf, double *vbuf, double *e, double *A,
                     double *ov, double *vbv, double *vmx)
{
    const lowp_kv_config *k = &c->cfg;
    size_t n = c->len[b], H = k->num_heads, Dq = k->qk_dim, Dv = k->vo_dim, G = c->G;
    lowp_kv_page_table pt = {c->batch, c->indptr, c->indices, c->last};
    if (lowp_kvcache_gather(kc, view, &pt, b, n, kbuf, vbuf, NULL, 0))
        return 0;
    /* BF16 / binary32 range: an element past 0x1.fep127 is Inf in the kernel's BF16 */
    for (size_t i = 0; i < n * H * Dq; i++)
        if (!(fabs(kbuf[i]) <= 0x1.fep127))
            return 0;
    for (size_t i = 0; i < n * H * Dv; i++)
        if (!(fabs(vbuf[i]) <= 0x1.fep127))
            return 0;
    size_t NQ = H * G;
    for (size_t i = 0; i < NQ * Dq; i++)
        if (!isfinite(lowp_f32_from_bf16(q[b * NQ * Dq + i])))
            return 0;
    const double L2E = 1.4426950408889634, u = 0x1p-24;
    size_t T = (n + 15) / 16, C = (n + chunk - 1) / chunk;
    for (size_t qh = 0; qh < NQ; qh++) {
        size_t h = qh / G;
        const uint16_t *qr = q + (b * NQ + qh) * Dq;
        double mx = -INFINITY;
        for (size_t j = 0; j < n; j++) {
            double dot = 0.0, abs = 0.0;
            const double *kr = kbuf + (j * H + h) * Dq;
            for (size_t d = 0; d < Dq; d++) {
                double x = (double)lowp_f32_from_bf16(qr[d]) * kr[d];
                dot += x;
                abs += fabs(x);
            }
            e[j] = sm * L2E * dot;
            A[j] = abs;
            if (!(abs * sm * L2E < 0x1p100)) /* scores near binary32 overflow: not compared */
                return 0;
            if (e[j] > mx)
                mx = e[j];
        }
        double delta = 0.0, L = 0.0;
        for (size_t j = 0; j < n; j++) {
            double ds = sm * L2E * (double)(Dq / 16) * 36.0 * u * A[j] + 2.0 * u * fabs(e[j]);
            double dj = 0.69314718055994530942 * (ds + 3.0 * u * fabs(e[j] - mx));
            if (dj > delta)
                delta = dj;
            e[j] = exp2(e[j] - mx);
            L += e[j];
        }
        /* ex2 of p, of the alphas after a position's tile in its split, of the merge weight */
        delta += 5.0 * u * (double)((chunk + 15) / 16 + 1);
        for (size_t d = 0; d < Dv; d++)
            ov[d] = vbv[d] = vmx[d] = 0.0;
        for (size_t j = 0; j < n; j++) {
            const double *vr = vbuf + (j * H + h) * Dv;
            for (size_t d = 0; d < Dv; d++) {
                double v = vr[d], av = fabs(v);
                ov[d] += e[j] * v;
                vbv[d] += e[j] * av;
                vmx[d] = av > vmx[d] ? av : vmx[d];
            }
        }
        for (size_t d = 0; d < Dv; d++) {
            double o = ov[d] / L, vb = vbv[d] / L, vmax = vmx[d];
            double bound = 2.0 * (0x1p-8 * fabs(o) + 0x1p-8 * vb + 2.0 * delta * vb +
                                  (double)T * 36.0 * u * vb +
                                  (double)(T + C + 24) * 2.0 * u * (fabs(o) + vb)) +
                           (double)n * 0x1p-125 * vmax + 0x1p-133;
            double g = (double)lowp_f32_from_bf16(gpu[(b * NQ + qh) * Dv + d]);
            double err = fabs(g - o);
            double ratio = bound > 0 ? err / bound : (err > 0 ? INFINITY : 0.0);
            if (!(ratio <= 1.0)) {
                if (st->outside == 0)
                    snprintf(st->first, sizeof st->first,
                             "seq %zu head %zu dim %zu: gpu %.9g exact %.9g bound %.3g", b, qh,
                             d, g, o, bound);
                st->outside++;
            }
            if (ratio > st->worst || ratio != ratio)
                st->worst = ratio;
        }
    }
    st->cases++;
    return 1;
}

/* ---- device buffers (grow-only) -------------------------------------------------------- */
typedef struct dbuf {
    void *p;
    size_t n;
} dbuf;
static int dgrow(dbuf *b, size_t n, char *why, size_t wl)
{
    if (n <= b->n)
        return 0;
    cudaFree(b->p);
    b->p = NULL;
    b->n = 0;
    cudaError_t e = cudaMalloc(&b->p, n);
    if (e != cudaSuccess)
        return lowp_why_set(why, wl, "cudaMalloc of %zu bytes: %s", n, cudaGetErrorString(e));
    b->n = n;
    return 0;
}

#define CK(call) LOWP_CUDA_CK(call)

typedef struct fmt_stat {
    size_t cases, configs, outputs, mism_cases, mism_out, nonfinite_cases;
    refstat ref;
    double seconds;
    char first[512];
    size_t first_at, ref_first_at; /* configuration index of first / ref.first */
    size_t broad_cases, broad_configs; /* of the cases and configurations: the broad ones */
} fmt_stat;

/* One CPU thread's GPU resources: grow-only buffers and its own stream. */
typedef struct worker {
    dbuf dq, dpt, dws, dout;
    cudaStream_t st;
} worker;

static int run_config(const config *c, rng *r, const lowp_gpu_conform_opts *o, fmt_stat *fs,
                      worker *wk, int emu_threads, char *why, size_t wl)
{
    dbuf *dq = &wk->dq, *dpt = &wk->dpt, *dws = &wk->dws, *dout = &wk->dout;
    int rc = 0;
    const lowp_kv_config *k = &c->cfg;
    lowp_kvcache *kc = NULL;
    lowp_gpu_kvcache *gc = NULL;
    size_t NQ = k->num_heads * c->G, B = c->batch;
    uint16_t *q = NULL, *gout = NULL, *eout = NULL;
    double *kbuf = NULL, *vbuf = NULL, *e = NULL, *A = NULL, *ov = NULL;
    size_t maxn = 0;
    for (size_t b = 0; b < B; b++)
        maxn = c->len[b] > maxn ? c->len[b] : maxn;
    if (lowp_kvcache_create(k, &kc, why, wl) || config_fill(c, kc, r, why, wl))
        return -1;
    q = malloc(B * NQ * k->qk_dim * sizeof *q);
    gout = malloc(B * NQ * k->vo_dim * sizeof *gout);
    eout = malloc(B * NQ * k->vo_dim * sizeof *eout);
    if (!q || !gout || !eout) {
        rc = lowp_why_set(why, wl, "out of memory");
        goto out;
    }
    double qmag = exp2((double)rbelow(r, 5) - 2.0);
    for (size_t i = 0; i < B * NQ * k->qk_dim; i++) {
        q[i] = lowp_bf16_from_f32((float)(rgauss(r) * qmag));
        if (c->mode == C_ADVERSARIAL && rbelow(r, 4096) == 0)
            q[i] = rbelow(r, 2) ? 0x7F80 : 0xFFC0;
    }
    lowp_kv_page_table pt = {B, c->indptr, c->indices, c->last};
    if (!o->emulator_only) {
    if (lowp_gpu_kvcache_create(k, &gc, why, wl) || lowp_gpu_kvcache_upload(gc, kc, why, wl)) {
        rc = -1;
        goto out;
    }
    size_t npt = c->indptr[B];
    size_t pt_bytes = ((B + 1) + npt + B) * sizeof(int32_t);
    if (dgrow(dq, B * NQ * k->qk_dim * 2, why, wl) || dgrow(dpt, pt_bytes, why, wl) ||
        dgrow(dout, B * NQ * k->vo_dim * 2, why, wl)) {
        rc = -1;
        goto out;
    }
    int32_t *d_indptr = dpt->p, *d_indices = d_indptr + (B + 1), *d_last = d_indices + npt;
    CK(cudaMemcpyAsync(dq->p, q, B * NQ * k->qk_dim * 2, cudaMemcpyHostToDevice, wk->st));
    CK(cudaMemcpyAsync(d_indptr, c->indptr, (B + 1) * sizeof(int32_t), cudaMemcpyHostToDevice,
                       wk->st));
    CK(cudaMemcpyAsync(d_indices, c->indices, npt * sizeof(int32_t), cudaMemcpyHostToDevice,
                       wk->st));
    CK(cudaMemcpyAsync(d_last, c->last, B * sizeof(int32_t), cudaMemcpyHostToDevice, wk->st));
    lowp_gpu_decode_desc dd = {.cache = gc, .pt_host = &pt, .indptr_dev = d_indptr,
                               .indices_dev = d_indices, .last_page_len_dev = d_last,
                               .num_q_heads = NQ, .sm_scale = 0.0, .q_dev = dq->p};
    size_t wsb = lowp_gpu_decode_workspace_bytes(&dd, why, wl);
    if (wsb == 0 || dgrow(dws, wsb, why, wl)) {
        rc = -1;
        goto out;
    }
    /* NaN: a split read before it is written, or an output never written, shows */
    CK(cudaMemsetAsync(dws->p, 0xFF, wsb, wk->st));
    CK(cudaMemsetAsync(dout->p, 0xFF, B * NQ * k->vo_dim * 2, wk->st));
    if (lowp_gpu_decode(&dd, dws->p, wsb, dout->p, wk->st, why, wl)) {
        rc = -1;
        goto out;
    }
    CK(cudaMemcpyAsync(gout, dout->p, B * NQ * k->vo_dim * 2, cudaMemcpyDeviceToHost, wk->st));
    CK(cudaStreamSynchronize(wk->st));

    }
    lowp_kv_view view = lowp_kv_view_of(k);
    lowp_gpu_decode_args ea = {.cache = kc, .view = &view, .pt = &pt, .num_q_heads = NQ,
                               .q = q, .threads = emu_threads};
    if (lowp_gpu_decode_emulate(&ea, eout, why, wl)) {
        rc = -1;
        goto out;
    }
    if (o->emulator_only) /* self-check without a GPU: the emulator against the bound */
        memcpy(gout, eout, B * NQ * k->vo_dim * sizeof *gout);
    size_t chunk = lowp_gpu_decode_chunk_tokens(B, k->num_heads, maxn);
    kbuf = malloc(maxn * k->num_heads * k->qk_dim * sizeof *kbuf);
    vbuf = malloc(maxn * k->num_heads * k->vo_dim * sizeof *vbuf);
    e = malloc(maxn * sizeof *e);
    A = malloc(maxn * sizeof *A);
    ov = malloc(3 * k->vo_dim * sizeof *ov);
    if (!kbuf || !vbuf || !e || !A || !ov) {
        rc = lowp_why_set(why, wl, "out of memory");
        goto out;
    }
    fs->configs++;
    for (size_t b = 0; b < B; b++) {
        size_t per = NQ * k->vo_dim, bad = 0, first = 0;
        for (size_t i = 0; i < per; i++)
            if (gout[b * per + i] != eout[b * per + i]) {
                if (!bad)
                    first = i;
                bad++;
            }
        fs->cases++;
        fs->outputs += per;
        if (bad) {
            if (fs->mism_cases == 0)
                snprintf(fs->first, sizeof fs->first,
                         "%s %s, %s, heads %zu x %zu, dims %zu/%zu, page %zu, seq %zu (len %zu), "
                         "output %zu: gpu 0x%04x emulator 0x%04x (%zu outputs differ)",
                         lowp_block_format_name(k->format), lowp_recipe_name(k->recipe),
                         content_name(c->mode), k->num_heads, c->G, k->qk_dim, k->vo_dim,
                         k->page_size, b, c->len[b], first, gout[b * per + first],
                         eout[b * per + first], bad);
            fs->mism_cases++;
            fs->mism_out += bad;
        }
        if (!ref_check(c, kc, &view, q, gout, 1.0 / sqrt((double)k->qk_dim), chunk, b, &fs->ref,
                       kbuf, vbuf, e, A, ov, ov + k->vo_dim, ov + 2 * k->vo_dim))
            fs->nonfinite_cases++;
    }
out:
    free(q);
    free(gout);
    free(eout);
    free(kbuf);
    free(vbuf);
    free(e);
    free(A);
    free(ov);
    lowp_gpu_kvcache_destroy(gc);
    lowp_kvcache_destroy(kc);
    return rc;
}

/* Unit u of a run split into n shards belongs to shard k (lowp/gpu_conform.h). */
static int lowp_shard_unit_mine(size_t u, size_t k, size_t n)
{
    return u % n == k;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- units (sharded runs) and the report --------------------------------------------- */

static const lowp_block_format ALL_FORMATS[5] = {LOWP_BF16_PASS, LOWP_FP8_E4M3, LOWP_FP8_E5M2,
                                                 LOWP_NVFP4, LOWP_MXFP4};

static void unit_from(lowp_gpu_conform_unit *u, const fmt_stat *ls)
{
    u->cases = ls->cases;
    u->configs = ls->configs;
    u->outputs = ls->outputs;
    u->mism_cases = ls->mism_cases;
    u->mism_out = ls->mism_out;
    u->nonfinite_cases = ls->nonfinite_cases;
    u->ref_cases = ls->ref.cases;
    u->ref_outside = ls->ref.outside;
    u->ref_worst = ls->ref.worst;
    snprintf(u->first, sizeof u->first, "%s", ls->mism_cases ? ls->first : "");
    snprintf(u->ref_first, sizeof u->ref_first, "%s", ls->ref.outside ? ls->ref.first : "");
}

/* Per-format statistics from units in increasing unit order (the first mismatch of a
 * format is its lowest unit's: long configurations, then the plan, as one run meets them). */
static void aggregate(const lowp_gpu_conform_unit *us, size_t n, fmt_stat fs[5])
{
    for (size_t x = 0; x < n; x++) {
        const lowp_gpu_conform_unit *u = &us[x];
        fmt_stat *g = &fs[u->format];
        if (u->mism_cases && g->mism_cases == 0)
            snprintf(g->first, sizeof g->first, "%s", u->first);
        if (u->ref_outside && g->ref.outside == 0)
            snprintf(g->ref.first, sizeof g->ref.first, "%s", u->ref_first);
        g->cases += u->cases;
        g->configs += u->configs;
        g->outputs += u->outputs;
        g->mism_cases += u->mism_cases;
        g->mism_out += u->mism_out;
        g->nonfinite_cases += u->nonfinite_cases;
        g->ref.cases += u->ref_cases;
        g->ref.outside += u->ref_outside;
        if (u->ref_worst > g->ref.worst || u->ref_worst != u->ref_worst)
            g->ref.worst = u->ref_worst;
        if (u->broad) {
            g->broad_cases += u->planned;
            g->broad_configs++;
        }
    }
}

static void result_from(const fmt_stat fs[5], lowp_gpu_conform_result *res)
{
    for (size_t fi = 0; fi < 5; fi++) {
        res->cases += fs[fi].cases;
        res->configs += fs[fi].configs;
        res->outputs += fs[fi].outputs;
        res->mismatched_cases += fs[fi].mism_cases;
        res->mismatched_outputs += fs[fi].mism_out;
        res->ref_cases += fs[fi].ref.cases;
        res->ref_outside += fs[fi].ref.outside;
        if (fs[fi].ref.worst > res->worst_ratio || fs[fi].ref.worst != fs[fi].ref.worst)
            res->worst_ratio = fs[fi].ref.worst;
    }
}

/* The Markdown report; timed: a run (device and seconds known), else a merge. */
static void write_report(FILE *rep, const lowp_gpu_conform_opts *o, const fmt_stat fs[5],
                         const lowp_gpu_conform_result *res, const char *devname, int timed)
{
    fprintf(rep, "# GPU decode kernel conformance (`lowp gpu conform`)\n\n");
    fprintf(rep, "Device: %s. Seed 0x%llx; %zu cases per format requested, %zu "
            "long-context configurations per format (up to %zu tokens). A case is one "
            "sequence's decode; cases sharing a configuration run as one batched launch.\n\n",
            devname, (unsigned long long)o->seed,
            o->cases_per_format, o->long_configs, o->max_ctx);
    fprintf(rep, "Configurations: the long ones, then broad ones (heads 1..20 x group 1..16, "
            "dims 64..512, lengths up to 1024) until %zu cases, then small ones (heads <= 4 x "
            "6, dims 64/128, lengths up to 128) to the total; both with every layout, page "
            "size, scale order, recipe and content kind.\n\n", o->broad_cases);
    fprintf(rep, "| format | cases | (long + broad) | configurations | (long + broad) | "
            "outputs | cases not bit-exact vs emulator | outputs differing | cases vs "
            "binary64 | outside bound | worst err/bound | non-finite cases | seconds |\n");
    fprintf(rep, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | "
            "---: | ---: | ---: |\n");
    for (size_t fi = 0; fi < 5; fi++) {
        if (fs[fi].configs == 0)
            continue;
        char secs[32];
        snprintf(secs, sizeof secs, timed ? "%.1f" : "-", fs[fi].seconds);
        fprintf(rep, "| %s | %zu | %zu | %zu | %zu | %zu | %zu | %zu | %zu | %zu | %.3g | "
                "%zu | %s |\n",
                lowp_block_format_name(ALL_FORMATS[fi]), fs[fi].cases, fs[fi].broad_cases,
                fs[fi].configs, fs[fi].broad_configs,
                fs[fi].outputs, fs[fi].mism_cases, fs[fi].mism_out, fs[fi].ref.cases,
                fs[fi].ref.outside, fs[fi].ref.worst, fs[fi].nonfinite_cases, secs);
    }
    fprintf(rep, "\n");
    for (size_t fi = 0; fi < 5; fi++) {
        if (fs[fi].mism_cases)
            fprintf(rep, "- first mismatch (%s): %s\n", lowp_block_format_name(ALL_FORMATS[fi]),
                    fs[fi].first);
        if (fs[fi].ref.outside)
            fprintf(rep, "- first output outside the bound (%s): %s\n",
                    lowp_block_format_name(ALL_FORMATS[fi]), fs[fi].ref.first);
    }
    if (timed)
        fprintf(rep, "\nTotal: %zu cases, %zu outputs, %zu not bit-exact; %zu of %zu "
                "finite cases outside the bound; %.1f s.\n", res->cases, res->outputs,
                res->mismatched_cases, res->ref_outside, res->ref_cases, res->seconds);
    else
        fprintf(rep, "\nTotal: %zu cases, %zu outputs, %zu not bit-exact; %zu of %zu "
                "finite cases outside the bound (merged from shard results, which record no "
                "times).\n", res->cases, res->outputs, res->mismatched_cases, res->ref_outside,
                res->ref_cases);
}

static int unit_cmp(const void *a, const void *b)
{
    const lowp_gpu_conform_unit *x = a, *y = b;
    return (x->unit > y->unit) - (x->unit < y->unit);
}

int lowp_gpu_conform_report(FILE *rep, const lowp_gpu_conform_opts *o,
                            const lowp_gpu_conform_unit *units, size_t n,
                            lowp_gpu_conform_result *res, char *why, size_t wl)
{
    if (o == NULL || res == NULL || (units == NULL && n > 0))
        return lowp_why_set(why, wl, "options, units and result must not be NULL");
    memset(res, 0, sizeof *res);
    for (size_t x = 0; x < n; x++)
        if (units[x].format < 0 || units[x].format > 4 || (x > 0 && units[x].unit <= units[x - 1].unit))
            return lowp_why_set(why, wl, "unit %zu: bad format or not in increasing order", x);
    fmt_stat fs[5];
    memset(fs, 0, sizeof fs);
    aggregate(units, n, fs);
    result_from(fs, res);
    res->seconds = NAN;
    res->units = n;
    if (rep != NULL)
        write_report(rep, o, fs, res, "not recorded (merged shard results)", 0);
    return 0;
}

int lowp_gpu_conform_run(const lowp_gpu_conform_opts *o, FILE *rep, FILE *log,
                         lowp_gpu_conform_result *res, char *why, size_t wl)
{
    if (o == NULL || res == NULL)
        return lowp_why_set(why, wl, "options and result must not be NULL");
    memset(res, 0, sizeof *res);
    const size_t shard_n = o->shard_n > 1 ? o->shard_n : 1, shard_k = o->shard_k;
    if (shard_k >= shard_n)
        return lowp_why_set(why, wl, "shard %zu/%zu: K must be below N", shard_k, shard_n);
    int ndev = 0;
    if (!o->emulator_only && (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0)) {
        lowp_why_set(why, wl, "no CUDA device");
        return 77;
    }
    const lowp_block_format *all = ALL_FORMATS;
    size_t nsel = 0;
    for (size_t fi = 0; fi < 5; fi++)
        nsel += o->formats == NULL || strstr(o->formats, lowp_block_format_name(all[fi])) != NULL;
    if (nsel == 0)
        return lowp_why_set(why, wl, "formats '%s' names none of bf16 fp8_e4m3 fp8_e5m2 nvfp4 mxfp4", o->formats);
    fmt_stat fs[5];
    memset(fs, 0, sizeof fs);
    double fsec[5] = {0, 0, 0, 0, 0};
    int nt = o->threads > 0 ? o->threads : omp_get_max_threads();
    worker *wks = calloc((size_t)nt, sizeof *wks);
    if (wks == NULL)
        return lowp_why_set(why, wl, "out of memory");
    int rc = 0;
    for (int i = 0; i < nt && !o->emulator_only; i++)
        if (cudaStreamCreateWithFlags(&wks[i].st, cudaStreamNonBlocking) != cudaSuccess)
            rc = lowp_why_set(why, wl, "cudaStreamCreate failed");
    /* the units this shard ran, in any order until sorted at the end */
    lowp_gpu_conform_unit *us = NULL;
    size_t n_us = 0, cap_us = 0, unit_base = 0;
    double t_all = now_s();
    for (size_t fi = 0; fi < 5 && rc == 0; fi++) {
        lowp_block_format f = all[fi];
        if (o->formats && !strstr(o->formats, lowp_block_format_name(f)))
            continue;
        uint64_t fseed = o->seed ^ (UINT64_C(0x100000001B3) * (fi + 1));
        double t0 = now_s();
        /* The plan, drawn in order and so independent of the thread count and of the
         * shard: the long configurations first, then short ones, until exactly
         * cases_per_format cases (the last configuration's batch is cut to what is still
         * wanted). A short configuration is broad until broad_cases cases are planned,
         * small (bulk) after. Configuration i is drawn from its own seed and its planned
         * batch limit, so the cases depend on the seed and the counts only. Units: the
         * long configurations, then the plan, numbered on from the previous format's. */
        size_t planned = 0, nplan = 0, cap_plan = 0, n_long = 0, want = 0;
        size_t *plan_batch = NULL, *long_max = calloc(o->long_configs + 1, sizeof *long_max);
        unsigned char *plan_bulk = NULL;
        if (long_max == NULL)
            rc = lowp_why_set(why, wl, "out of memory");
        for (size_t li = 0; li < o->long_configs && planned < o->cases_per_format && rc == 0; li++) {
            rng r = {fseed ^ (UINT64_C(0xA0761D6478BD642F) * (li + 1))};
            config c;
            long_max[li] = o->cases_per_format - planned;
            rc = config_draw(&c, f, &r, o->max_ctx, 0, long_max[li], why, wl);
            planned += c.batch;
            n_long++;
            if (lowp_shard_unit_mine(unit_base + li, shard_k, shard_n))
                want += c.batch;
            config_free(&c);
        }
        for (size_t i = 0; planned < o->cases_per_format && rc == 0; i++) {
            if (nplan == cap_plan) {
                cap_plan = cap_plan ? 2 * cap_plan : 256;
                size_t *nb = realloc(plan_batch, cap_plan * sizeof *nb);
                unsigned char *nk = nb ? realloc(plan_bulk, cap_plan) : NULL;
                if (nb)
                    plan_batch = nb;
                if (nk)
                    plan_bulk = nk;
                if (!nb || !nk) {
                    rc = lowp_why_set(why, wl, "out of memory planning %zu cases", o->cases_per_format);
                    break;
                }
            }
            int bulk = planned >= o->broad_cases;
            rng r = {fseed + UINT64_C(0x9E3779B97F4A7C15) * (i + 1)};
            config c;
            rc = config_draw(&c, f, &r, 0, bulk, o->cases_per_format - planned, why, wl);
            plan_batch[nplan] = c.batch;
            plan_bulk[nplan++] = (unsigned char)bulk;
            planned += c.batch;
            if (lowp_shard_unit_mine(unit_base + n_long + i, shard_k, shard_n))
                want += c.batch;
            config_free(&c);
        }
        if (rc == 0 && n_us + n_long + nplan > cap_us) {
            size_t nc = 2 * (n_us + n_long + nplan) + 16;
            lowp_gpu_conform_unit *nu = realloc(us, nc * sizeof *nu);
            if (nu == NULL)
                rc = lowp_why_set(why, wl, "out of memory");
            else {
                us = nu;
                cap_us = nc;
            }
        }
        /* long contexts, one at a time, the emulator on every thread */
        for (size_t li = 0; li < n_long && rc == 0; li++) {
            if (!lowp_shard_unit_mine(unit_base + li, shard_k, shard_n))
                continue;
            rng r = {fseed ^ (UINT64_C(0xA0761D6478BD642F) * (li + 1))};
            config c;
            fmt_stat ls;
            memset(&ls, 0, sizeof ls);
            rc = config_draw(&c, f, &r, o->max_ctx, 0, long_max[li], why, wl);
            lowp_gpu_conform_unit *u = &us[n_us];
            memset(u, 0, sizeof *u);
            u->unit = unit_base + li;
            u->format = (int)fi;
            u->broad = 1;
            u->planned = c.batch;
            if (rc == 0)
                rc = run_config(&c, &r, o, &ls, &wks[0], nt, why, wl);
            config_free(&c);
            if (rc == 0) {
                unit_from(u, &ls);
                n_us++;
            }
        }
        /* then the short configurations of the plan, one per thread at a time */
        if (rc == 0) {
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
            for (size_t i = 0; i < nplan; i++) {
                if (!lowp_shard_unit_mine(unit_base + n_long + i, shard_k, shard_n))
                    continue;
                int me = omp_get_thread_num(), lrc;
                char lwhy[512] = "";
                fmt_stat ls;
                memset(&ls, 0, sizeof ls);
                rng r = {fseed + UINT64_C(0x9E3779B97F4A7C15) * (i + 1)};
                config c;
                lrc = config_draw(&c, f, &r, 0, plan_bulk[i], plan_batch[i], lwhy, sizeof lwhy);
                if (lrc == 0)
                    lrc = run_config(&c, &r, o, &ls, &wks[me], 1, lwhy, sizeof lwhy);
                config_free(&c);
#pragma omp critical(lowp_conform_merge)
                {
                    if (lrc && rc == 0) {
                        rc = lrc;
                        snprintf(why, wl, "configuration %zu: %s", i, lwhy);
                    }
                    if (lrc == 0) {
                        lowp_gpu_conform_unit *u = &us[n_us++];
                        memset(u, 0, sizeof *u);
                        u->unit = unit_base + n_long + i;
                        u->format = (int)fi;
                        u->broad = !plan_bulk[i];
                        u->planned = plan_batch[i];
                        unit_from(u, &ls);
                    }
                }
            }
        }
        free(plan_batch);
        free(plan_bulk);
        free(long_max);
        unit_base += n_long + nplan;
        fsec[fi] = now_s() - t0;
        /* this format's units, for its log line and the check of the count */
        fmt_stat one[5];
        memset(one, 0, sizeof one);
        qsort(us, n_us, sizeof *us, unit_cmp);
        aggregate(us, n_us, one);
        if (rc == 0 && one[fi].cases != want)
            rc = lowp_why_set(why, wl, "internal error: %zu cases of %s ran, %zu were planned", one[fi].cases,
                              lowp_block_format_name(f), want);
        if (log)
            fprintf(log, "gpu conform %-9s %7zu cases %5zu configs: %zu mismatched cases, "
                    "reference %zu cases %zu outside bound (worst ratio %.3g), %.1f s\n",
                    lowp_block_format_name(f), one[fi].cases, one[fi].configs, one[fi].mism_cases,
                    one[fi].ref.cases, one[fi].ref.outside, one[fi].ref.worst, fsec[fi]);
        if (log)
            fflush(log);
    }
    for (int i = 0; i < nt; i++) {
        cudaFree(wks[i].dq.p);
        cudaFree(wks[i].dpt.p);
        cudaFree(wks[i].dws.p);
        cudaFree(wks[i].dout.p);
        if (wks[i].st)
            cudaStreamDestroy(wks[i].st);
    }
    free(wks);
    if (rc == 0) {
        aggregate(us, n_us, fs);
        for (size_t fi = 0; fi < 5; fi++)
            fs[fi].seconds = fsec[fi];
        result_from(fs, res);
    }
    res->seconds = now_s() - t_all;
    res->units = unit_base;
    for (size_t x = 0; x < n_us && rc == 0 && o->on_unit != NULL; x++)
        o->on_unit(o->unit_arg, &us[x]);
    free(us);
    if (rep && rc == 0) {
        struct cudaDeviceProp prop;
        int dev = 0;
        char devname[300] = "none: the CPU emulator against the binary64 reference only";
        if (!o->emulator_only && cudaGetDevice(&dev) == cudaSuccess &&
            cudaGetDeviceProperties(&prop, dev) == cudaSuccess)
            snprintf(devname, sizeof devname, "%s (sm_%d%d)", prop.name, prop.major, prop.minor);
        write_report(rep, o, fs, res, devname, 1);
    }
    return rc;
}
