/* lowp_gpu_select_check: the sparse-selection GPU kernels (lowp/gpu_select.h) against the
 * CPU models of lowp/select.h, and the sparse decode (the paged decode through the token
 * indirection, lowp/select_gpu.h definition 2) against the decode emulator; then, with
 * --bench, the timings of issue #19 item 6.
 *
 *   lowp_gpu_select_check REPORT.md [--quick] [--cases N] [--max-ctx N] [--seed S]
 *                         [--threads T] [--only qsa|dsa|sparse] [--bench] [--bench-only]
 *                         [--bench-ctx N] [--sparse-cases N] [--budget-s S]
 *
 * Per selector and format, --cases cases (default 10^5; --quick 2000 and contexts up to
 * 2048; the sparse decode --sparse-cases, default 20000, --quick 500: its emulator is the
 * slow part), random and adversarial: Gaussian keys over 2^+-8, an outlier channel, all-zero and
 * three-valued keys (ReLU zeros: ties everywhere, the smaller index must win), NaN / Inf
 * keys (a NaN score: lowp_topk refuses, the kernel must report status 1), huge keys
 * (overflow to Inf in the mean), norm weights that push E4M3 keys past 464 (NaN), k larger
 * than the visible blocks (lowp_qsa_select then keeps them all), query positions inside
 * the sequence (the open tail). Compared: QSA index-key cache bytes (BF16 / E4M3 codes
 * NaN-equal: only NaN-ness is defined), scores bit for bit (NaN-equal), the index list with
 * its count column as int32 bytes and the refusals; DSA FP8 key values and scales, scores,
 * selections; sparse decode BF16 outputs bit for bit over page sizes 1..64 with shuffled
 * pages, BF16 / FP8 / NVFP4 caches. The first difference of each kind is printed with its
 * indices and both values.
 *
 * --budget-s S shares S seconds equally among the checks that run (--only picks them): a
 * check that reaches its share stops adding batches, and the report says so.
 *
 * Exit: 0 everything equal, 1 a difference, 2 bad usage or a failure (one line on stderr;
 * arguments are checked before any GPU is looked for), 77 no CUDA device. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>
#include <omp.h>

#include "cli_parse.h"
#include "decode_internal.h"

#include "lowp/attn_gpu_emul.h"
#include "lowp/cases.h"
#include "lowp/cuda_check.h"
#include "lowp/gpu_decode.h"
#include "lowp/gpu_select.h"
#include "lowp/select_gpu.h"
#include "lowp/why.h"

typedef struct opts {
    size_t cases, sparse_cases, max_ctx, bench_ctx;
    double budget_s; /* 0: none; else each check that runs stops adding batches after its share */
    uint64_t seed;
    int threads, bench, bench_only;
    const char *only;
} opts;

typedef struct stat {
    char name[64];
    size_t cases, refused, compared, differ;
    char first[600];
    double seconds;
} stat;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static uint64_t rbelow(uint64_t *r, uint64_t n) { return n ? lowp_splitmix64(r) % n : 0; }
static double runif(uint64_t *r) { return (double)(lowp_splitmix64(r) >> 11) * 0x1p-53; }
static double rgauss(uint64_t *r)
{
    double u = runif(r), v = runif(r);
    return sqrt(-2.0 * log(u > 0 ? u : 0x1p-60)) * cos(6.283185307179586 * v);
}
static float bf(double x) { return lowp_f32_from_bf16(lowp_bf16_from_f32((float)x)); }

/* record one difference (the first one in full) */
static void differ(stat *s, const char *fmt, ...)
{
    if (s->differ++ == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(s->first, sizeof s->first, fmt, ap);
        va_end(ap);
        printf("  FIRST DIFFERENCE (%s): %s\n", s->name, s->first);
    }
}

/* the first CPU-model failure of a parallel loop (one line kept) */
static void note_fail(int *fail, char *fwhy, size_t n, const char *w)
{
#pragma omp critical
    {
        if (!*fail)
            snprintf(fwhy, n, "%s", w);
        *fail = 1;
    }
}

static int f32_same(float a, float b) { return (a != a && b != b) || lowp_f32_bits(a) == lowp_f32_bits(b); }

/* ------------------------------------------------------------------ random keys */

/* BF16 key rows x[n][d] of one of the adversarial kinds (see the top of this file) */
static void gen_keys(uint64_t *r, int kind, float *x, size_t n, size_t d)
{
    double sc = exp2((double)rbelow(r, 17) - 8.0);
    size_t out_ch = rbelow(r, d);
    for (size_t t = 0; t < n; t++)
        for (size_t i = 0; i < d; i++) {
            double v;
            switch (kind) {
            case 3: v = rgauss(r) * sc * (i == out_ch ? 30.0 : 1.0); break;
            case 4: v = 0.0; break;
            case 5: v = ((double)rbelow(r, 3) - 1.0) * sc; break;
            case 7: v = rgauss(r) * 0x1p120; break;
            default: v = rgauss(r) * sc; break;
            }
            x[t * d + i] = bf(v);
        }
    if (kind == 6 && n) { /* one NaN or Inf element */
        size_t t = rbelow(r, n), i = rbelow(r, d);
        x[t * d + i] = rbelow(r, 2) ? NAN : (rbelow(r, 2) ? INFINITY : -INFINITY);
    }
}

static size_t gen_len(uint64_t *r, size_t max_ctx, size_t lo)
{
    size_t cap = rbelow(r, 10) == 0 ? max_ctx : (max_ctx < 300 ? max_ctx : 300);
    return lo + rbelow(r, cap - lo + 1);
}

/* device scratch: slot i holds one allocation of at least n bytes, replaced when it is
 * too small (freed at exit) */
#define NBUF 12
static void *g_dev[NBUF];
static size_t g_len[NBUF];
static int dev_need(int i, size_t n, char *why, size_t wl)
{
    if (n <= g_len[i] && g_dev[i])
        return 0;
    cudaFree(g_dev[i]);
    g_len[i] = 0;
    if (cudaMalloc(&g_dev[i], n ? n : 1) != cudaSuccess)
        return lowp_why_set(why, wl, "cudaMalloc of %zu bytes for scratch %d failed", n, i);
    g_len[i] = n;
    return 0;
}
#define CK(call) LOWP_CUDA_CK(call)

/* ------------------------------------------------------------------ QSA */

static const lowp_qsa_keys qsa_formats[] = {LOWP_QSA_KEYS_BF16, LOWP_QSA_KEYS_E4M3, LOWP_QSA_KEYS_NVFP4,
                                            LOWP_QSA_KEYS_MXFP4};
static const char *qsa_names[] = {"bf16", "e4m3", "nvfp4", "mxfp4"};

static int codes_same(lowp_qsa_keys k, const uint8_t *a, const uint8_t *b, size_t i)
{
    if (k == LOWP_QSA_KEYS_BF16) { /* NaN-equal: only NaN-ness is defined */
        uint16_t x = (uint16_t)(a[2 * i] | a[2 * i + 1] << 8), y = (uint16_t)(b[2 * i] | b[2 * i + 1] << 8);
        return x == y || ((x & 0x7fffu) > 0x7f80u && (y & 0x7fffu) > 0x7f80u);
    }
    if (k == LOWP_QSA_KEYS_E4M3)
        return a[i] == b[i] || ((a[i] & 0x7fu) == 0x7fu && (b[i] & 0x7fu) == 0x7fu);
    return a[i] == b[i];
}

static int qsa_batch(const opts *o, lowp_qsa_keys fmt, size_t bno, size_t B, stat *st, char *why, size_t wl)
{
    uint64_t r = o->seed ^ (0x9e3779b97f4a7c15ull * (bno + 1)) ^ ((uint64_t)fmt << 56);
    lowp_qsa_config c = lowp_qsa_config_default();
    c.keys = fmt;
    static const size_t ratios[] = {4, 4, 4, 4, 1, 2, 3, 8};
    static const size_t ks[] = {512, 512, 1, 2, 7, 16, 64, 100};
    c.ratio = ratios[rbelow(&r, 8)];
    c.topk = ks[rbelow(&r, 8)];
    c.divide = (int)rbelow(&r, 2);
    static const size_t nheads[] = {4, 4, 4, 4, 4, 1, 2, 8}; /* 4: the production kernel; others: the generic one */
    c.index_heads = nheads[rbelow(&r, 8)];
    if (fmt == LOWP_QSA_KEYS_MXFP4)
        c.recipe = lowp_recipe_default(LOWP_MXFP4);
    if (fmt == LOWP_QSA_KEYS_NVFP4)
        c.gs = lowp_global_scale_from_dec(LOWP_NVFP4, c.recipe, rbelow(&r, 2) ? 1.0f : (float)exp2((double)rbelow(&r, 9) - 4.0) * 0.75f);
    size_t d = c.head_dim, H = c.index_heads, R = c.ratio, W = lowp_qsa_index_width(&c), rb = lowp_qsa_keycache_row_bytes(&c),
           rs = lowp_qsa_keycache_row_scales(&c);
    size_t *len = malloc(B * sizeof *len), *pos = malloc(B * sizeof *pos);
    int64_t *toff = malloc(B * sizeof *toff), *boff = malloc(B * sizeof *boff);
    int32_t *nblk = malloc(B * sizeof *nblk), *nvis = malloc(B * sizeof *nvis), *ipos = malloc(B * sizeof *ipos);
    float *wk = malloc(d * sizeof *wk);
    int rc = 0;
    size_t T = 0, NB = 0, maxnb = 0, maxvis = 0;
    for (size_t b = 0; b < B; b++) {
        len[b] = gen_len(&r, o->max_ctx, 1);
        pos[b] = rbelow(&r, 2) ? len[b] - 1 : rbelow(&r, len[b]);
        toff[b] = (int64_t)T;
        boff[b] = (int64_t)NB;
        nblk[b] = (int32_t)(len[b] / R);
        nvis[b] = (int32_t)((pos[b] + 1) / R);
        ipos[b] = (int32_t)pos[b];
        T += len[b];
        NB += len[b] / R;
        maxnb = (size_t)nblk[b] > maxnb ? (size_t)nblk[b] : maxnb;
        maxvis = (size_t)nvis[b] > maxvis ? (size_t)nvis[b] : maxvis;
    }
    int wkind = (int)rbelow(&r, 4);
    for (size_t i = 0; i < d; i++) /* zero-centred norm weights; kind 3 pushes E4M3 keys past 464 */
        wk[i] = wkind == 0 ? 0.0f : bf(rgauss(&r) * (wkind == 3 ? 60.0 : 0.3));
    float *k = malloc((T * d + 1) * sizeof *k), *qo = malloc(B * H * d * sizeof *qo);
    uint16_t *kbits = malloc((T * d + 1) * sizeof *kbits);
    uint8_t *ecodes = malloc(NB * rb + 1), *escales = malloc(NB * rs + 1), *gcodes = malloc(NB * rb + 1),
            *gscales = malloc(NB * rs + 1);
    float *escore = malloc((NB + 1) * sizeof *escore), *gscore = malloc((NB + 1) * sizeof *gscore);
    int32_t *eidx = malloc(B * (W + 1) * sizeof *eidx), *gidx = malloc(B * (W + 1) * sizeof *gidx);
    int32_t *est = malloc(B * sizeof *est), *gst = malloc(B * sizeof *gst);
    float *rope = malloc(((maxnb + 1) * c.rotary_dim + 1) * sizeof *rope);
    uint64_t *seeds = malloc(B * sizeof *seeds);
    lowp_gpu_kvcache *keys = NULL;
    if (!len || !pos || !toff || !boff || !nblk || !nvis || !ipos || !wk || !k || !qo || !kbits || !ecodes || !escales ||
        !gcodes || !gscales || !escore || !gscore || !eidx || !gidx || !est || !gst || !rope || !seeds) {
        rc = lowp_why_set(why, wl, "out of memory for a QSA batch of %zu tokens", T);
        goto out;
    }
    for (size_t b = 0; b < B; b++)
        seeds[b] = lowp_splitmix64(&r);
    int fail = 0;
    char fwhy[256] = "";
#pragma omp parallel for schedule(dynamic, 1) num_threads(o->threads)
    for (size_t b = 0; b < B; b++) {
        uint64_t cr = seeds[b];
        int kind = (int)rbelow(&cr, 8);
        char w2[256];
        float *kk = k + (size_t)toff[b] * d;
        gen_keys(&cr, kind, kk, len[b], d);
        float q[8 * 256], wq[256];
        for (size_t i = 0; i < H * d; i++)
            q[i] = bf(rgauss(&cr) * (kind == 5 ? 0.01 : 1.0) - (kind == 5 ? 0.005 : 0.0));
        for (size_t i = 0; i < d; i++)
            wq[i] = bf(rgauss(&cr) * 0.3);
        double *kb = malloc((len[b] / R * d + 1) * sizeof *kb);
        size_t vis = 0;
        int e = kb == NULL;
        if (!e)
            e = lowp_qsa_keycache_bytes(&c, kk, len[b], wk, ecodes + (size_t)boff[b] * rb,
                                        rs ? escales + (size_t)boff[b] * rs : NULL, w2, sizeof w2) ||
                lowp_qsa_compress(&c, kk, len[b], wk, kb, NULL, w2, sizeof w2) ||
                lowp_qsa_query(&c, q, pos[b], wq, qo + b * H * d, w2, sizeof w2);
        if (!e) { /* one query in 16 scaled by 2^10, one in 16 with an Inf: the GPU kernel's
                   * pre-scaled fast path must step aside for both (exact powers of two, so
                   * the CPU model scores the same query) */
            const uint64_t qk = rbelow(&cr, 16);
            for (size_t i = 0; qk == 0 && i < H * d; i++)
                qo[b * H * d + i] *= 0x1p10f;
            if (qk == 1)
                qo[b * H * d + rbelow(&cr, H * d)] = rbelow(&cr, 2) ? INFINITY : -INFINITY;
        }
        if (!e)
            e = lowp_qsa_scores(&c, qo + b * H * d, kb, len[b], pos[b], escore + boff[b], &vis, w2, sizeof w2);
        if (!e)
            est[b] = lowp_qsa_select(&c, escore + boff[b], vis, pos[b], eidx + b * (W + 1), NULL, NULL, w2, sizeof w2)
                         ? 1
                         : 0;
        free(kb);
        if (e)
            note_fail(&fail, fwhy, sizeof fwhy, w2);
        for (size_t i = 0; i < len[b] * d; i++)
            kbits[(size_t)toff[b] * d + i] = lowp_bf16_from_f32(kk[i]);
    }
    if (fail) {
        rc = lowp_why_set(why, wl, "CPU model: %s", fwhy);
        goto out;
    }
    if (lowp_qsa_rope_blocks(&c, maxnb + 1, rope, why, wl)) {
        rc = -1;
        goto out;
    }
    /* the GPU */
    lowp_kv_config kc = lowp_gpu_qsa_keycache_config(&c, NB ? NB : 1);
    if (lowp_gpu_kvcache_create(&kc, &keys, why, wl) ||
        (fmt == LOWP_QSA_KEYS_NVFP4 && lowp_gpu_kvcache_set_global_scales(keys, &c.gs.dec, &c.gs.dec, 1, why, wl))) {
        rc = -1;
        goto out;
    }
    if (dev_need(0, T * d * 2 + 2, why, wl) || dev_need(1, B * 8, why, wl) ||
        dev_need(2, B * 8, why, wl) || dev_need(3, B * 4, why, wl) || dev_need(4, B * 4, why, wl) ||
        dev_need(5, B * 4, why, wl) || dev_need(6, ((maxnb + 1) * c.rotary_dim + 1) * 4, why, wl) ||
        dev_need(7, d * 4, why, wl) || dev_need(8, B * H * d * 4, why, wl) ||
        dev_need(9, (NB + 1) * 4, why, wl) || dev_need(10, B * (W + 1) * 4, why, wl) ||
        dev_need(11, B * 4, why, wl)) {
        rc = -1;
        goto out;
    }
    CK(cudaMemcpy(g_dev[0], kbits, T * d * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(g_dev[1], toff, B * 8, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(g_dev[2], boff, B * 8, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(g_dev[3], nblk, B * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(g_dev[4], nvis, B * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(g_dev[5], ipos, B * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(g_dev[6], rope, (maxnb + 1) * c.rotary_dim * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(g_dev[7], wk, d * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(g_dev[8], qo, B * H * d * 4, cudaMemcpyHostToDevice));
    CK(cudaMemset(g_dev[9], 0xff, (NB + 1) * 4));
    CK(cudaMemset(g_dev[10], 0x55, B * (W + 1) * 4));
    lowp_gpu_select_batch bt = {B, g_dev[1], g_dev[2], g_dev[3], maxnb, NB};
    if (lowp_gpu_qsa_compress(&c, g_dev[0], g_dev[7], g_dev[6], &bt, keys, why, wl)) {
        rc = -1;
        goto out;
    }
    bt.n = g_dev[4];
    bt.max_n = maxvis;
    if (lowp_gpu_qsa_scores(&c, keys, g_dev[8], &bt, g_dev[9], 0, why, wl) ||
        lowp_gpu_topk(g_dev[9], &bt, c.topk, R, g_dev[5], g_dev[10], g_dev[11], 0, why, wl)) {
        rc = -1;
        goto out;
    }
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(gcodes, keys->k_codes, NB * rb, cudaMemcpyDeviceToHost));
    if (rs)
        CK(cudaMemcpy(gscales, keys->k_scales, NB * rs, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(gscore, g_dev[9], (NB + 1) * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(gidx, g_dev[10], B * (W + 1) * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(gst, g_dev[11], B * 4, cudaMemcpyDeviceToHost));
    /* compare */
    for (size_t b = 0; b < B; b++) {
        int bad = 0;
        st->cases++;
        for (size_t j = 0; j < (size_t)nblk[b] && !bad; j++) {
            size_t row = (size_t)boff[b] + j, nel = fmt == LOWP_QSA_KEYS_BF16 ? d : rb;
            for (size_t i = 0; i < nel && !bad; i++)
                if (!codes_same(fmt, gcodes + row * rb, ecodes + row * rb, i)) {
                    bad = 1;
                    differ(st, "%s batch %zu seq %zu (len %zu, ratio %zu): key-cache row %zu byte/element %zu: gpu 0x%x cpu 0x%x",
                           qsa_names[fmt], bno, b, len[b], R, j, i,
                           fmt == LOWP_QSA_KEYS_BF16 ? gcodes[row * rb + 2 * i] | gcodes[row * rb + 2 * i + 1] << 8 : gcodes[row * rb + i],
                           fmt == LOWP_QSA_KEYS_BF16 ? ecodes[row * rb + 2 * i] | ecodes[row * rb + 2 * i + 1] << 8 : ecodes[row * rb + i]);
                }
            for (size_t i = 0; i < rs && !bad; i++)
                if (gscales[row * rs + i] != escales[row * rs + i]) {
                    bad = 1;
                    differ(st, "%s batch %zu seq %zu: key-cache row %zu scale %zu: gpu 0x%02x cpu 0x%02x", qsa_names[fmt],
                           bno, b, j, i, gscales[row * rs + i], escales[row * rs + i]);
                }
        }
        for (size_t j = 0; j < (size_t)nvis[b] && !bad; j++)
            if (!f32_same(gscore[boff[b] + j], escore[boff[b] + j])) {
                bad = 1;
                differ(st, "%s batch %zu seq %zu (len %zu, pos %zu, divide %d): score of block %zu: gpu %a cpu %a",
                       qsa_names[fmt], bno, b, len[b], pos[b], c.divide, j, (double)gscore[boff[b] + j],
                       (double)escore[boff[b] + j]);
            }
        if (!bad && gst[b] != est[b]) {
            bad = 1;
            differ(st, "%s batch %zu seq %zu: top-k status gpu %d cpu %d (1: NaN score refused)", qsa_names[fmt], bno, b,
                   gst[b], est[b]);
        }
        st->refused += est[b] != 0;
        if (!bad && est[b] == 0)
            for (size_t i = 0; i <= W && !bad; i++)
                if (gidx[b * (W + 1) + i] != eidx[b * (W + 1) + i]) {
                    bad = 1;
                    differ(st, "%s batch %zu seq %zu (pos %zu, %d visible, top-%zu, ratio %zu): index list slot %zu of %zu: gpu %d cpu %d",
                           qsa_names[fmt], bno, b, pos[b], nvis[b], c.topk, R, i, W, gidx[b * (W + 1) + i],
                           eidx[b * (W + 1) + i]);
                }
        st->compared++;
        (void)bad;
    }
out:
    lowp_gpu_kvcache_destroy(keys);
    free(len), free(pos), free(toff), free(boff), free(nblk), free(nvis), free(ipos), free(wk), free(k), free(qo);
    free(kbits), free(ecodes), free(escales), free(gcodes), free(gscales), free(escore), free(gscore), free(eidx);
    free(gidx), free(est), free(gst), free(rope), free(seeds);
    return rc;
}

/* ------------------------------------------------------------------ DSA (FP8 keys) */

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static int dsa_batch(const opts *o, size_t bno, size_t B, stat *st, char *why, size_t wl)
{
    uint64_t r = o->seed ^ (0xd1b54a32d192ed03ull * (bno + 1));
    lowp_dsa_config c = lowp_dsa_config_default();
    static const size_t heads[] = {64, 64, 64, 1, 8, 32};
    static const size_t ks[] = {2048, 2048, 1, 16, 256, 5};
    c.heads = heads[rbelow(&r, 6)];
    c.topk = ks[rbelow(&r, 6)];
    c.ue8m0 = (int)rbelow(&r, 2);
    c.q_floor = rbelow(&r, 2) ? 1e-4f : 1e-10f;
    size_t d = c.head_dim, H = c.heads, K = c.topk;
    size_t *len = malloc(B * sizeof *len), T = 0, maxvis = 0;
    int64_t *toff = malloc(B * sizeof *toff);
    int32_t *nvis = malloc(B * sizeof *nvis);
    uint64_t *seeds = malloc(B * sizeof *seeds);
    int rc = 0;
    float *k = NULL, *kq = NULL, *ks_ = NULL, *qq = NULL, *wh = NULL, *es = NULL, *gs = NULL, *gks = NULL;
    uint16_t *kbits = NULL;
    uint8_t *gcodes = NULL;
    int32_t *eidx = NULL, *gidx = NULL, *est = NULL, *gst = NULL;
    if (!len || !toff || !nvis || !seeds) {
        rc = lowp_why_set(why, wl, "out of memory");
        goto out;
    }
    size_t cap = o->max_ctx < 4096 ? o->max_ctx : 4096;
    for (size_t b = 0; b < B; b++) {
        len[b] = gen_len(&r, cap, 1);
        size_t pos = rbelow(&r, 2) ? len[b] - 1 : rbelow(&r, len[b]);
        toff[b] = (int64_t)T;
        nvis[b] = (int32_t)(pos + 1);
        T += len[b];
        maxvis = (size_t)nvis[b] > maxvis ? (size_t)nvis[b] : maxvis;
        seeds[b] = lowp_splitmix64(&r);
    }
    k = malloc((T * d + 1) * sizeof *k);
    kq = malloc((T * d + 1) * sizeof *kq);
    ks_ = malloc((T + 1) * sizeof *ks_);
    kbits = malloc((T * d + 1) * sizeof *kbits);
    gcodes = malloc(T * d + 1);
    gks = malloc((T + 1) * sizeof *gks);
    qq = malloc(B * H * d * sizeof *qq);
    wh = malloc(B * H * sizeof *wh);
    es = malloc((T + 1) * sizeof *es);
    gs = malloc((T + 1) * sizeof *gs);
    eidx = malloc(B * (K + 1) * sizeof *eidx);
    gidx = malloc(B * (K + 1) * sizeof *gidx);
    est = malloc(B * sizeof *est);
    gst = malloc(B * sizeof *gst);
    if (!k || !kq || !ks_ || !kbits || !gcodes || !gks || !qq || !wh || !es || !gs || !eidx || !gidx || !est || !gst) {
        rc = lowp_why_set(why, wl, "out of memory for a DSA batch of %zu keys", T);
        goto out;
    }
    int fail = 0;
    char fwhy[256] = "";
#pragma omp parallel for schedule(dynamic, 1) num_threads(o->threads)
    for (size_t b = 0; b < B; b++) {
        uint64_t cr = seeds[b];
        int kind = (int)rbelow(&cr, 8);
        char w2[256];
        size_t n = len[b];
        float *kk = k + (size_t)toff[b] * d;
        gen_keys(&cr, kind, kk, n, d);
        float *q = malloc(H * d * sizeof *q), *w = malloc(H * 4 * sizeof *w);
        int32_t *sel = malloc((K + 1) * sizeof *sel);
        int e = q == NULL || w == NULL || sel == NULL;
        if (!e) {
            for (size_t i = 0; i < H * d; i++)
                q[i] = bf(rgauss(&cr) * (kind == 4 ? 0.0 : 1.0));
            for (size_t h = 0; h < H; h++)
                w[h] = bf(rgauss(&cr));
            float dscale, *qs = w + H, *wb = w + 2 * H;
            size_t vis = 0, cnt = 0;
            e = lowp_dsa_keys_quantize(&c, kk, n, kq + (size_t)toff[b] * d, ks_ + toff[b], NULL, w2, sizeof w2) ||
                lowp_dsa_query(&c, q, w, qq + b * H * d, qs, wb, wh + b * H, &dscale, w2, sizeof w2) ||
                lowp_dsa_scores(&c, q, w, kq + (size_t)toff[b] * d, ks_ + toff[b], n, (size_t)nvis[b] - 1,
                                es + toff[b], &vis, w2, sizeof w2);
            if (!e) {
                int32_t *row = eidx + b * (K + 1);
                est[b] = lowp_topk(es + toff[b], vis, K, sel, &cnt, w2, sizeof w2) ? 1 : 0;
                if (!est[b]) {
                    qsort(sel, cnt, sizeof *sel, cmp_i32);
                    for (size_t i = 0; i < K; i++)
                        row[i] = i < cnt ? sel[i] : -1;
                    row[K] = (int32_t)cnt;
                }
            }
        }
        free(q);
        free(w);
        free(sel);
        if (e)
            note_fail(&fail, fwhy, sizeof fwhy, w2);
        for (size_t i = 0; i < n * d; i++)
            kbits[(size_t)toff[b] * d + i] = lowp_bf16_from_f32(kk[i]);
    }
    if (fail) {
        rc = lowp_why_set(why, wl, "CPU model: %s", fwhy);
        goto out;
    }
    if (dev_need(0, T * d * 2 + 2, why, wl) || dev_need(1, T * d + 16, why, wl) ||
        dev_need(2, (T + 1) * 4, why, wl) || dev_need(3, B * H * d * 4, why, wl) ||
        dev_need(4, B * H * 4, why, wl) || dev_need(5, B * 8, why, wl) || dev_need(6, B * 4, why, wl) ||
        dev_need(7, (T + 1) * 4, why, wl) || dev_need(8, B * (K + 1) * 4, why, wl) ||
        dev_need(9, B * 4, why, wl)) {
        rc = -1;
        goto out;
    }
    CK(cudaMemcpy(g_dev[0], kbits, T * d * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(g_dev[3], qq, B * H * d * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(g_dev[4], wh, B * H * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(g_dev[5], toff, B * 8, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(g_dev[6], nvis, B * 4, cudaMemcpyHostToDevice));
    CK(cudaMemset(g_dev[7], 0xff, (T + 1) * 4));
    lowp_gpu_select_batch bt = {B, g_dev[5], g_dev[5], g_dev[6], maxvis, T};
    if (lowp_gpu_dsa_quantize(&c, g_dev[0], T, g_dev[1], g_dev[2], 0, why, wl) ||
        lowp_gpu_dsa_scores(&c, g_dev[1], g_dev[2], g_dev[3], g_dev[4], &bt, g_dev[7], 0, why, wl) ||
        lowp_gpu_topk(g_dev[7], &bt, K, 0, NULL, g_dev[8], g_dev[9], 0, why, wl)) {
        rc = -1;
        goto out;
    }
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(gcodes, g_dev[1], T * d, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(gks, g_dev[2], T * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(gs, g_dev[7], T * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(gidx, g_dev[8], B * (K + 1) * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(gst, g_dev[9], B * 4, cudaMemcpyDeviceToHost));
    for (size_t b = 0; b < B; b++) {
        int bad = 0;
        st->cases++;
        for (size_t t = 0; t < len[b] && !bad; t++) {
            size_t row = (size_t)toff[b] + t;
            if (!f32_same(gks[row], ks_[row])) {
                bad = 1;
                differ(st, "fp8 batch %zu seq %zu: key %zu scale: gpu %a cpu %a", bno, b, t, (double)gks[row],
                       (double)ks_[row]);
            }
            for (size_t i = 0; i < d && !bad; i++) {
                float gv = lowp_decode_f32(LOWP_E4M3, gcodes[row * d + i]);
                if (!f32_same(gv, kq[row * d + i])) {
                    bad = 1;
                    differ(st, "fp8 batch %zu seq %zu: key %zu element %zu: gpu %a (code 0x%02x) cpu %a", bno, b, t, i,
                           (double)gv, gcodes[row * d + i], (double)kq[row * d + i]);
                }
            }
        }
        for (size_t j = 0; j < (size_t)nvis[b] && !bad; j++)
            if (!f32_same(gs[toff[b] + j], es[toff[b] + j])) {
                bad = 1;
                differ(st, "fp8 batch %zu seq %zu (%zu heads, ue8m0 %d): score of key %zu: gpu %a cpu %a", bno, b, H,
                       c.ue8m0, j, (double)gs[toff[b] + j], (double)es[toff[b] + j]);
            }
        if (!bad && gst[b] != est[b]) {
            bad = 1;
            differ(st, "fp8 batch %zu seq %zu: top-k status gpu %d cpu %d", bno, b, gst[b], est[b]);
        }
        st->refused += est[b] != 0;
        if (!bad && est[b] == 0)
            for (size_t i = 0; i <= K && !bad; i++)
                if (gidx[b * (K + 1) + i] != eidx[b * (K + 1) + i]) {
                    bad = 1;
                    differ(st, "fp8 batch %zu seq %zu (%d visible, top-%zu): selection slot %zu: gpu %d cpu %d", bno, b,
                           nvis[b], K, i, gidx[b * (K + 1) + i], eidx[b * (K + 1) + i]);
                }
        st->compared++;
    }
out:
    free(len), free(toff), free(nvis), free(seeds), free(k), free(kq), free(ks_), free(kbits), free(gcodes), free(gks);
    free(qq), free(wh), free(es), free(gs), free(eidx), free(gidx), free(est), free(gst);
    return rc;
}

/* ------------------------------------------------------------------ sparse decode */

static const lowp_block_format sparse_formats[] = {LOWP_BF16_PASS, LOWP_FP8_E4M3, LOWP_NVFP4};
static const char *sparse_names[] = {"bf16", "fp8_e4m3", "nvfp4"};

/* tokens[0..*n) of a sequence of len tokens, ascending: QSA-like (blocks of 4 and the open
 * tail), a random subset, all, or one; at most 2051 */
static void gen_selection(uint64_t *r, size_t len, int32_t *tok, size_t *n)
{
    int kind = (int)rbelow(r, 4);
    size_t m = 0;
    if (kind == 0) {
        size_t nb = len / 4, tail = len % 4;
        for (size_t b = 0; b < nb && m + 4 <= 2048; b++)
            if (rbelow(r, 3) || nb <= 512)
                for (size_t t = 0; t < 4; t++)
                    tok[m++] = (int32_t)(4 * b + t);
        for (size_t t = 0; t < tail; t++)
            tok[m++] = (int32_t)(4 * nb + t);
    } else if (kind == 1) {
        for (size_t t = 0; t < len && m < 2051; t++)
            if (rbelow(r, 2))
                tok[m++] = (int32_t)t;
    } else if (kind == 2) {
        for (size_t t = 0; t < len && m < 2051; t++)
            tok[m++] = (int32_t)t;
    }
    if (m == 0)
        tok[m++] = (int32_t)rbelow(r, len);
    *n = m;
}

static int sparse_batch(const opts *o, int fi, size_t bno, size_t B, stat *st, char *why, size_t wl)
{
    uint64_t r = o->seed ^ (0xa0761d6478bd642full * (bno + 1)) ^ ((uint64_t)fi << 60);
    static const size_t pss[] = {1, 4, 16, 16, 64};
    static const size_t hkv[] = {1, 2, 8};
    static const size_t groups[] = {1, 4, 8, 16};
    size_t P = pss[rbelow(&r, 5)], Hk = hkv[rbelow(&r, 3)], G = groups[rbelow(&r, 4)], dq = 64 * (1 + rbelow(&r, 2)),
           dv = dq, NQ = Hk * G;
    size_t cap = o->max_ctx < 4096 ? o->max_ctx : 4096;
    size_t *len = malloc(B * sizeof *len), npages = 0;
    int32_t *indptr = malloc((B + 1) * sizeof *indptr), *last = malloc(B * sizeof *last);
    int32_t *sindptr = malloc((B + 1) * sizeof *sindptr), *slast = malloc(B * sizeof *slast);
    int32_t *indices = NULL, *perm = NULL, *tok = NULL, *rows = NULL;
    uint16_t *q = NULL, *gout = NULL, *eout = NULL;
    float *kv = NULL;
    lowp_kvcache *kc = NULL, *view = NULL;
    lowp_gpu_kvcache *gc = NULL;
    int rc = 0;
    if (!len || !indptr || !last || !sindptr || !slast) {
        rc = lowp_why_set(why, wl, "out of memory");
        goto out;
    }
    indptr[0] = 0;
    for (size_t b = 0; b < B; b++) {
        len[b] = rbelow(&r, 16) == 0 ? 1 + rbelow(&r, cap) : 1 + rbelow(&r, cap < 128 ? cap : 128);
        size_t np = (len[b] + P - 1) / P;
        indptr[b + 1] = indptr[b] + (int32_t)np;
        last[b] = (int32_t)(len[b] - (np - 1) * P);
        npages += np;
    }
    size_t spare = 1 + rbelow(&r, 8);
    lowp_kv_config cfg = lowp_kv_config_default(sparse_formats[fi], npages + spare, P, Hk, dq, dv);
    if (sparse_formats[fi] == LOWP_FP8_E4M3 || sparse_formats[fi] == LOWP_NVFP4)
        cfg.scale_gran = rbelow(&r, 2) ? LOWP_KV_SCALE_HEAD : LOWP_KV_SCALE_TENSOR;
    indices = malloc((npages + 1) * sizeof *indices);
    perm = malloc((npages + spare) * sizeof *perm);
    tok = malloc(B * 2051 * sizeof *tok);
    rows = malloc(B * 2051 * sizeof *rows);
    q = malloc(B * NQ * dq * sizeof *q);
    gout = malloc(B * NQ * dv * sizeof *gout);
    eout = malloc(B * NQ * dv * sizeof *eout);
    kv = malloc(Hk * (dq + dv) * sizeof *kv);
    if (!indices || !perm || !tok || !rows || !q || !gout || !eout || !kv) {
        rc = lowp_why_set(why, wl, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < npages + spare; i++) /* shuffled pages */
        perm[i] = (int32_t)i;
    for (size_t i = npages + spare; i > 1; i--) {
        size_t j = rbelow(&r, i);
        int32_t t = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = t;
    }
    memcpy(indices, perm, npages * sizeof *indices);
    if (lowp_kvcache_create(&cfg, &kc, why, wl)) {
        rc = -1;
        goto out;
    }
    size_t ng = cfg.scale_gran == LOWP_KV_SCALE_HEAD ? Hk : 1;
    if (cfg.format != LOWP_BF16_PASS) {
        float gk[8], gv[8];
        for (size_t h = 0; h < ng; h++) {
            gk[h] = (float)exp2((double)rbelow(&r, 7) - 3.0);
            gv[h] = (float)exp2((double)rbelow(&r, 7) - 3.0);
        }
        if (lowp_kvcache_set_global_scales(kc, gk, gv, ng, why, wl)) {
            rc = -1;
            goto out;
        }
    }
    lowp_kv_page_table pt = {B, indptr, indices, last};
    double kmag = exp2((double)rbelow(&r, 5) - 2.0);
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < len[b]; t++) {
            for (size_t i = 0; i < Hk * (dq + dv); i++)
                kv[i] = bf(rgauss(&r) * kmag);
            if (lowp_kvcache_write_pos(kc, &pt, b, t, kv, kv + Hk * dq, NULL, NULL, why, wl)) {
                rc = -1;
                goto out;
            }
        }
    sindptr[0] = 0;
    size_t maxn = 0;
    for (size_t b = 0; b < B; b++) {
        size_t n = 0;
        gen_selection(&r, len[b], tok + sindptr[b], &n);
        if (lowp_select_gather_rows(&pt, P, b, tok + sindptr[b], n, rows + sindptr[b], why, wl)) {
            rc = -1;
            goto out;
        }
        sindptr[b + 1] = sindptr[b] + (int32_t)n;
        slast[b] = 1;
        maxn = n > maxn ? n : maxn;
    }
    for (size_t i = 0; i < B * NQ * dq; i++)
        q[i] = lowp_bf16_from_f32((float)rgauss(&r));
    lowp_kv_page_table spt = {B, sindptr, rows, slast};
    if (lowp_select_gather_cache(kc, &view, why, wl)) {
        rc = -1;
        goto out;
    }
    lowp_kv_view vv = lowp_kvcache_view(view);
    lowp_gpu_decode_args ea = {.cache = view, .view = &vv, .pt = &spt, .num_q_heads = NQ, .q = q, .threads = o->threads};
    if (lowp_gpu_decode_emulate(&ea, eout, why, wl)) {
        rc = -1;
        goto out;
    }
    lowp_gpu_kvcache gview;
    if (lowp_gpu_kvcache_create(&cfg, &gc, why, wl) || lowp_gpu_kvcache_upload(gc, kc, why, wl) ||
        lowp_gpu_kvcache_gather_view(gc, &gview, why, wl)) {
        rc = -1;
        goto out;
    }
    size_t nrows = (size_t)sindptr[B];
    if (dev_need(0, B * NQ * dq * 2, why, wl) || dev_need(1, (B + 1 + nrows + B) * 4, why, wl) ||
        dev_need(3, B * NQ * dv * 2, why, wl)) {
        rc = -1;
        goto out;
    }
    int32_t *d_ip = g_dev[1], *d_ix = d_ip + (B + 1), *d_l = d_ix + nrows;
    CK(cudaMemcpy(g_dev[0], q, B * NQ * dq * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_ip, sindptr, (B + 1) * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_ix, rows, nrows * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_l, slast, B * 4, cudaMemcpyHostToDevice));
    lowp_gpu_decode_desc dd = {.cache = &gview, .pt_host = &spt, .indptr_dev = d_ip, .indices_dev = d_ix,
                               .last_page_len_dev = d_l, .num_q_heads = NQ, .sm_scale = 0.0, .q_dev = g_dev[0]};
    size_t wsb = lowp_gpu_decode_workspace_bytes(&dd, why, wl);
    if (wsb == 0 || dev_need(2, wsb, why, wl)) {
        rc = -1;
        goto out;
    }
    CK(cudaMemset(g_dev[2], 0xff, wsb));
    CK(cudaMemset(g_dev[3], 0xff, B * NQ * dv * 2));
    if (lowp_gpu_decode(&dd, g_dev[2], wsb, g_dev[3], 0, why, wl)) {
        rc = -1;
        goto out;
    }
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(gout, g_dev[3], B * NQ * dv * 2, cudaMemcpyDeviceToHost));
    for (size_t b = 0; b < B; b++) {
        st->cases++;
        st->compared++;
        size_t per = NQ * dv;
        for (size_t i = 0; i < per; i++)
            if (gout[b * per + i] != eout[b * per + i]) {
                differ(st, "%s page %zu, heads %zu x %zu, dim %zu, seq %zu (len %zu, %d selected, first token %d): "
                           "output head %zu dim %zu: gpu 0x%04x emulator 0x%04x",
                       sparse_names[fi], P, Hk, G, dq, b, len[b], sindptr[b + 1] - sindptr[b], tok[sindptr[b]], i / dv,
                       i % dv, gout[b * per + i], eout[b * per + i]);
                break;
            }
    }
out:
    lowp_gpu_kvcache_destroy(gc);
    lowp_kvcache_destroy(kc);
    lowp_kvcache_destroy(view);
    free(len), free(indptr), free(last), free(sindptr), free(slast), free(indices), free(perm), free(tok), free(rows);
    free(q), free(gout), free(eout), free(kv);
    return rc;
}

/* ------------------------------------------------------------------ timings */

static double time_ms(cudaEvent_t a, cudaEvent_t b)
{
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    return (double)ms;
}

static int bench(const opts *o, FILE *md, char *why, size_t wl)
{
    int rc = 0;
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    const int iters = 20;
    size_t Bq = 16, ctx = o->bench_ctx;
    fprintf(md, "\n## Timings (H200)\n\n### QSA scoring at %zu context, %zu queries (one per sequence)\n\n", ctx, Bq);
    fprintf(md, "| keys | index-key bytes | scoring us | GB/s | plain read us | GB/s | scoring / read bandwidth |\n"
                "|---|---:|---:|---:|---:|---:|---:|\n");
    printf("QSA scoring at %zu context x %zu sequences:\n", ctx, Bq);
    for (int f = 0; f < 4; f++) {
        lowp_qsa_config c = lowp_qsa_config_default();
        c.keys = qsa_formats[f];
        if (c.keys == LOWP_QSA_KEYS_MXFP4)
            c.recipe = lowp_recipe_default(LOWP_MXFP4);
        size_t nb = ctx / c.ratio, NB = Bq * nb, rb = lowp_qsa_keycache_row_bytes(&c),
               rs = lowp_qsa_keycache_row_scales(&c);
        lowp_kv_config kc = lowp_gpu_qsa_keycache_config(&c, NB);
        lowp_gpu_kvcache *keys = NULL;
        if (lowp_gpu_kvcache_create(&kc, &keys, why, wl))
            return -1;
        CK(cudaMemset(keys->k_codes, 0x3c, NB * rb)); /* finite values: the time does not depend on them */
        if (rs)
            CK(cudaMemset(keys->k_scales, 0x38, NB * rs));
        int64_t *off = malloc(Bq * 8);
        int32_t *nv = malloc(Bq * 4);
        float *qo = malloc(Bq * c.index_heads * c.head_dim * 4);
        for (size_t b = 0; b < Bq; b++) {
            off[b] = (int64_t)(b * nb);
            nv[b] = (int32_t)nb;
        }
        for (size_t i = 0; i < Bq * c.index_heads * c.head_dim; i++)
            qo[i] = 0.125f;
        if (dev_need(0, Bq * 8, why, wl) || dev_need(1, Bq * 4, why, wl) ||
            dev_need(2, Bq * c.index_heads * c.head_dim * 4, why, wl) || dev_need(3, NB * 4, why, wl) ||
            dev_need(4, 1 << 20, why, wl)) {
            lowp_gpu_kvcache_destroy(keys);
            return -1;
        }
        CK(cudaMemcpy(g_dev[0], off, Bq * 8, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(g_dev[1], nv, Bq * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(g_dev[2], qo, Bq * c.index_heads * c.head_dim * 4, cudaMemcpyHostToDevice));
        free(off), free(nv), free(qo);
        lowp_gpu_select_batch bt = {Bq, NULL, g_dev[0], g_dev[1], nb, NB};
        double ts = 0, tr = 0;
        for (int pass = 0; pass < 2 && rc == 0; pass++) { /* pass 0 warms up */
            CK(cudaEventRecord(e0, 0));
            for (int it = 0; it < iters; it++)
                if (lowp_gpu_qsa_scores(&c, keys, g_dev[2], &bt, g_dev[3], 0, why, wl)) {
                    rc = -1;
                    goto out;
                }
            CK(cudaEventRecord(e1, 0));
            CK(cudaEventSynchronize(e1));
            ts = time_ms(e0, e1) * 1e3 / iters;
            CK(cudaEventRecord(e0, 0));
            for (int it = 0; it < iters; it++) {
                lowp_gpu_select_read(keys->k_codes, NB * rb, g_dev[4], 0);
                if (rs)
                    lowp_gpu_select_read(keys->k_scales, NB * rs, g_dev[4], 0);
            }
            CK(cudaEventRecord(e1, 0));
            CK(cudaEventSynchronize(e1));
            tr = time_ms(e0, e1) * 1e3 / iters;
        }
        double bytes = (double)NB * (double)(rb + rs);
        fprintf(md, "| %s | %.0f | %.1f | %.0f | %.1f | %.0f | %.2f |\n", qsa_names[f], bytes, ts, bytes / ts * 1e-3,
                tr, bytes / tr * 1e-3, tr / ts);
        printf("  %-6s %.0f MB: scoring %.1f us (%.0f GB/s), plain read %.1f us (%.0f GB/s): ratio %.2f\n",
               qsa_names[f], bytes * 1e-6, ts, bytes / ts * 1e-3, tr, bytes / tr * 1e-3, tr / ts);
        lowp_gpu_kvcache_destroy(keys);
    }
    /* sparse decode over 2051 selected tokens of a long context vs dense decode over 2051 */
    size_t B = 32, Hk = 8, G = 4, D = 128, N = 2051, P = 16, sctx = 32768;
    fprintf(md, "\n### Sparse decode over %zu selected tokens (of %zu) vs dense decode over %zu tokens\n\n"
                "batch %zu, %zu KV heads x %zu, head dim %zu, page size %zu; the selection is 512 random blocks of "
                "4 tokens and a tail of 3, ascending (QSA's index list); both through the same kernel "
                "(prepare once, enqueue %d times).\n\n| cache | dense us | sparse us | sparse / dense |\n|---|---:|---:|---:|\n",
            N, sctx, N, B, Hk, G, D, P, iters);
    printf("sparse decode (%zu of %zu tokens) vs dense (%zu tokens), batch %zu:\n", N, sctx, N, B);
    for (int fi = 0; fi < 3 && rc == 0; fi++) {
        double t[2] = {0, 0};
        for (int sp = 0; sp < 2 && rc == 0; sp++) {
            size_t len = sp ? sctx : N, np = (len + P - 1) / P;
            lowp_kv_config cfg = lowp_kv_config_default(sparse_formats[fi], B * np, P, Hk, D, D);
            lowp_gpu_kvcache *gc = NULL, gview;
            if (lowp_gpu_kvcache_create(&cfg, &gc, why, wl))
                return -1;
            CK(cudaMemset(gc->k_codes, 0x3c, gc->k_codes_bytes));
            CK(cudaMemset(gc->v_codes, 0x3c, gc->v_codes_bytes));
            if (gc->k_scales) {
                CK(cudaMemset(gc->k_scales, 0x38, gc->k_scales_bytes));
                CK(cudaMemset(gc->v_scales, 0x38, gc->v_scales_bytes));
            }
            int32_t *ip = malloc((B + 1) * 4), *ix = malloc(B * np * 4 + B * N * 4), *ls = malloc(B * 4);
            uint64_t r = o->seed + 77;
            size_t nidx = 0;
            const lowp_gpu_kvcache *use = gc;
            ip[0] = 0;
            if (!sp) {
                for (size_t i = 0; i < B * np; i++)
                    ix[i] = (int32_t)i;
                for (size_t b = 0; b < B; b++) {
                    ip[b + 1] = (int32_t)((b + 1) * np);
                    ls[b] = (int32_t)(len - (np - 1) * P);
                }
                nidx = B * np;
            } else {
                if (lowp_gpu_kvcache_gather_view(gc, &gview, why, wl)) {
                    rc = -1;
                    goto out;
                }
                use = &gview;
                for (size_t b = 0; b < B; b++) {
                    /* 512 distinct blocks of 4 of the first sctx - 4 tokens, ascending, then the tail */
                    size_t nbk = (sctx - 4) / 4, m = 0;
                    for (size_t blk = 0; blk < nbk && m < 512; blk++)
                        if (rbelow(&r, nbk - blk) < 512 - m) {
                            for (size_t t2 = 0; t2 < 4; t2++)
                                ix[b * N + 4 * m + t2] = (int32_t)(b * np * P + 4 * blk + t2);
                            m++;
                        }
                    for (size_t t2 = 0; t2 < 3; t2++)
                        ix[b * N + 2048 + t2] = (int32_t)(b * np * P + sctx - 3 + t2);
                    ip[b + 1] = (int32_t)((b + 1) * N);
                    ls[b] = 1;
                }
                nidx = B * N;
            }
            lowp_kv_page_table pt = {B, ip, ix, ls};
            uint16_t *qh = malloc(B * Hk * G * D * 2);
            for (size_t i = 0; i < B * Hk * G * D; i++)
                qh[i] = 0x3c00;
            lowp_gpu_decode_params prm;
            if (dev_need(5, B * Hk * G * D * 2, why, wl) || dev_need(6, (B + 1 + nidx + B) * 4, why, wl) ||
                dev_need(8, B * Hk * G * D * 2, why, wl))
                rc = -1;
            int32_t *d_ip = g_dev[6], *d_ix = d_ip + B + 1, *d_l = d_ix + nidx;
            if (rc == 0) {
                cudaMemcpy(g_dev[5], qh, B * Hk * G * D * 2, cudaMemcpyHostToDevice);
                cudaMemcpy(d_ip, ip, (B + 1) * 4, cudaMemcpyHostToDevice);
                cudaMemcpy(d_ix, ix, nidx * 4, cudaMemcpyHostToDevice);
                cudaMemcpy(d_l, ls, B * 4, cudaMemcpyHostToDevice);
            }
            lowp_gpu_decode_desc dd = {.cache = use, .pt_host = &pt, .indptr_dev = d_ip, .indices_dev = d_ix,
                                       .last_page_len_dev = d_l, .num_q_heads = Hk * G, .q_dev = g_dev[5]};
            size_t wsb = rc ? 0 : lowp_gpu_decode_workspace_bytes(&dd, why, wl);
            if (rc == 0 && (wsb == 0 || dev_need(7, wsb, why, wl) ||
                            lowp_gpu_decode_prepare(&dd, g_dev[7], wsb, g_dev[8], 0, &prm, why, wl)))
                rc = -1;
            for (int pass = 0; pass < 2 && rc == 0; pass++) {
                cudaEventRecord(e0, 0);
                for (int it = 0; it < iters; it++)
                    lowp_gpu_decode_enqueue(&prm, 0);
                cudaEventRecord(e1, 0);
                cudaEventSynchronize(e1);
                t[sp] = time_ms(e0, e1) * 1e3 / iters;
            }
            if (rc == 0 && cudaGetLastError() != cudaSuccess)
                rc = lowp_why_set(why, wl, "decode timing launch failed");
            free(ip), free(ix), free(ls), free(qh);
            lowp_gpu_kvcache_destroy(gc);
        }
        if (rc == 0) {
            fprintf(md, "| %s | %.1f | %.1f | %.2f |\n", sparse_names[fi], t[0], t[1], t[1] / t[0]);
            printf("  %-8s dense %.1f us, sparse %.1f us: ratio %.2f\n", sparse_names[fi], t[0], t[1], t[1] / t[0]);
        }
    }
out:
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return rc;
}

/* ------------------------------------------------------------------ main */

static int usage(void)
{
    fprintf(stderr, "usage: lowp_gpu_select_check REPORT.md [--quick] [--cases N] [--max-ctx N] [--seed S] "
                    "[--threads T] [--only qsa|dsa|sparse] [--bench] [--bench-only] [--bench-ctx N] "
                    "[--sparse-cases N] [--budget-s S]\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argv[1][0] == '-')
        return usage();
    opts o = {100000, 20000, 4096, 131072, 0.0, 20261201, 0, 0, 0, NULL};
    const char *env = getenv("LOWP_SEED");
    if (env)
        o.seed = lowp_cli_parse_seed("LOWP_SEED", env);
    int quick = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--quick"))
            quick = 1;
        else if (!strcmp(a, "--bench"))
            o.bench = 1;
        else if (!strcmp(a, "--bench-only"))
            o.bench = o.bench_only = 1;
        else if (v && !strcmp(a, "--cases"))
            o.cases = lowp_cli_parse_count("--cases", argv[++i], 0);
        else if (v && !strcmp(a, "--sparse-cases"))
            o.sparse_cases = lowp_cli_parse_count("--sparse-cases", argv[++i], 0);
        else if (v && !strcmp(a, "--budget-s"))
            o.budget_s = lowp_cli_parse_nonnegative("--budget-s", argv[++i]);
        else if (v && !strcmp(a, "--max-ctx"))
            o.max_ctx = (size_t)lowp_cli_parse_u64("--max-ctx", argv[++i], 16, (uint64_t)1 << 20);
        else if (v && !strcmp(a, "--bench-ctx"))
            o.bench_ctx = (size_t)lowp_cli_parse_u64("--bench-ctx", argv[++i], 4096, (uint64_t)1 << 22);
        else if (v && !strcmp(a, "--seed"))
            o.seed = lowp_cli_parse_seed("--seed", argv[++i]);
        else if (v && !strcmp(a, "--threads"))
            o.threads = (int)lowp_cli_parse_u64("--threads", argv[++i], 1, 4096);
        else if (v && !strcmp(a, "--only")) {
            o.only = argv[++i];
            if (strcmp(o.only, "qsa") && strcmp(o.only, "dsa") && strcmp(o.only, "sparse")) {
                fprintf(stderr, "lowp_gpu_select_check: --only: '%s' is not qsa, dsa or sparse\n", o.only);
                return 2;
            }
        } else
            return usage();
    }
    if (quick) {
        int given = 0;
        for (int i = 2; i < argc; i++)
            given |= !strcmp(argv[i], "--cases");
        if (!given) {
            o.cases = 2000;
            o.sparse_cases = 500;
        }
        o.max_ctx = o.max_ctx < 2048 ? o.max_ctx : 2048;
    }
    if (o.threads == 0)
        o.threads = omp_get_max_threads();
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("lowp_gpu_select_check: no CUDA device: skipped\n");
        return 77;
    }
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", argv[1]);
    FILE *md = fopen(tmp, "w");
    if (!md) {
        fprintf(stderr, "lowp_gpu_select_check: cannot write %s\n", tmp);
        return 2;
    }
    struct cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    fprintf(md, "# lowp sparse-selection GPU kernels vs the CPU models (%s)\n\n"
                "`lowp_gpu_select_check` (gpu/check/select_check.c), seed %llu, %zu cases per selector and format "
                "(%zu for the sparse decode), contexts up to %zu tokens. A case is one query (sequence): QSA its "
                "index-key cache rows, scores and index list; DSA its FP8 keys and scales, scores and selection; "
                "the sparse decode its outputs.\n\n| check | cases | refused (NaN score) | differing cases | seconds | first difference |\n"
                "|---|---:|---:|---:|---:|---|\n",
            prop.name, (unsigned long long)o.seed, o.cases, o.sparse_cases, o.max_ctx);
    stat sts[16];
    size_t ns = 0;
    char why[600] = "";
    int rc = 0;
    const size_t BATCH = 256;
    int cut = 0; /* checks that --budget-s ended before their cases */
    int nchecks = !o.only ? 8 : !strcmp(o.only, "qsa") ? 4 : !strcmp(o.only, "dsa") ? 1 : 3;
    for (int sel = 0; sel < 3 && rc == 0 && !o.bench_only; sel++) {
        const char *sn = sel == 0 ? "qsa" : sel == 1 ? "dsa" : "sparse";
        if (o.only && strcmp(o.only, sn))
            continue;
        int nf = sel == 0 ? 4 : sel == 1 ? 1 : 3;
        for (int f = 0; f < nf && rc == 0; f++) {
            stat *s = &sts[ns++];
            memset(s, 0, sizeof *s);
            snprintf(s->name, sizeof s->name, "%s %s", sel == 0 ? "QSA" : sel == 1 ? "DSA" : "sparse decode",
                     sel == 0 ? qsa_names[f] : sel == 1 ? "fp8" : sparse_names[f]);
            double t0 = now();
            size_t per = sel == 2 ? 64 : BATCH, want = sel == 2 ? o.sparse_cases : o.cases;
            for (size_t bno = 0; s->cases < want && rc == 0; bno++) {
                if (o.budget_s > 0 && now() - t0 > o.budget_s / nchecks) {
                    printf("  %s: the budget ends it after %zu of %zu cases\n", s->name, s->cases, want);
                    cut++;
                    break;
                }
                size_t B = want - s->cases < per ? want - s->cases : per;
                rc = sel == 0   ? qsa_batch(&o, qsa_formats[f], bno, B, s, why, sizeof why)
                     : sel == 1 ? dsa_batch(&o, bno, B, s, why, sizeof why)
                                : sparse_batch(&o, f, bno, B, s, why, sizeof why);
            }
            s->seconds = now() - t0;
            printf("%-22s %8zu cases, %6zu refused, %zu differ, %.1f s\n", s->name, s->cases, s->refused, s->differ,
                   s->seconds);
            fprintf(md, "| %s | %zu | %zu | %zu | %.1f | %s |\n", s->name, s->cases, s->refused, s->differ,
                    s->seconds, s->differ ? s->first : "");
            fflush(stdout);
        }
    }
    if (cut)
        fprintf(md, "\n%d of the checks above ran fewer cases than asked: --budget-s %.0f ended them.\n", cut,
                o.budget_s);
    if (rc == 0 && o.bench)
        rc = bench(&o, md, why, sizeof why);
    fclose(md);
    for (int i = 0; i < NBUF; i++)
        cudaFree(g_dev[i]);
    if (rc) {
        remove(tmp);
        fprintf(stderr, "lowp_gpu_select_check: %s\n", why);
        return 2;
    }
    if (rename(tmp, argv[1])) {
        fprintf(stderr, "lowp_gpu_select_check: cannot write %s\n", argv[1]);
        return 2;
    }
    size_t bad = 0;
    for (size_t i = 0; i < ns; i++)
        bad += sts[i].differ;
    printf("gpu select check: %zu differing cases\n", bad);
    return bad ? 1 : 0;
}
