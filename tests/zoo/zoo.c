/* tests/zoo/zoo.c: the bug zoo (issue #20 item 6). Each of the 12 production bugs of
 * shared/research/kernels.md section 6 re-created as a mutant of lowp's GPU-kernel CPU
 * emulator (lowp/attn_gpu_emul.h), of its inputs or of a cache layout, written as a
 * `lowp certify` case:
 *
 *   lowp_zoo DIR        writes DIR/NN.slug/ for every bug: the cache as the framework's
 *                       contract says it holds it (.npy in the layout's memory order), the
 *                       queries, the page table, the mutant's output (out.npy), `args`
 *                       (the certify arguments, one per line), `expect` (exit 1, then a
 *                       line the report must hold) and `meta` (key TAB value: bug, source,
 *                       mutant, the owners' tolerance test and its verdicts).
 *
 * The frame: what is certified is the pipeline (write, move, attend) against the cache
 * that lowp's model writes from the same K/V under the declared layout and scales. A bug
 * in the writer (bugs 1, 4, 5, 10) therefore shows as a kernel output that the declared
 * cache does not explain; a bug in the kernel (the others) as the same. The declared
 * arithmetic is always lowp's kernel's (BF16 Q, BF16 P, MMA k 16, split-K at the
 * emulator's chunk, BF16 out): an unmutated emulator run is within bound (test_certify
 * shows it under every layout; tests/test_zoo.sh checks it here too, case 00.clean).
 *
 * The tolerance test: for each case, the FlashInfer test closest to the bug's entry point,
 * as kernels.md 3.4 quotes it (torch.testing-style: |got - ref| <= atol + rtol |ref| for
 * every element, NaN fails), ref = the exact attention of the dequantized cache (binary64,
 * lowp_certify_run's exact array; FlashInfer's own reference is fp16/fp32 on the same
 * values, a difference far below these tolerances):
 *   T1 test_batch_decode_kernels.py, NVFP4 fa2 decode: atol = rtol = 1e-1; its inputs
 *      (create_nvfp4_kv): codes masked with 0x77 (no negative element), block scales in
 *      {1/8, 1/4, 1/2, 1}, global scale 1;
 *   T2 test_decode_fp8_calibration_scale.py, batch decode: atol 1e-2, rtol 2e-1; its
 *      inputs: k_scale = amax(k) / 256, v_scale = amax(v) / 256 (non-unit, K != V);
 *   T3 test_fp8_prefill.py: atol = rtol = 1e-2; its inputs: unit scales.
 * Each is applied twice: to the zoo's case ("zoo inputs") and to the same mutant run on
 * inputs drawn the way that test draws them ("owner inputs": only the value and scale
 * conventions above change; shapes stay the zoo's). Exit 0, or 2 with a line on stderr. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lowp/attn_gpu_emul.h"
#include "lowp/certify.h"
#include "lowp/format.h"
#include "lowp/kvcache.h"
#include "lowp/tensor.h"
#include "lowp_test_base.h"

#define ZB 3      /* sequences per case */
#define ZMAXP 64  /* pages per pool */
#define ZMAXB 16  /* page-table columns */

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("lowp_zoo: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}

static void *xmalloc(size_t n)
{
    void *p = calloc(1, n ? n : 1);
    if (p == NULL)
        die("out of memory (%zu bytes)", n);
    return p;
}

typedef enum { T1 = 1, T2 = 2, T3 = 3 } tol_test;

/* One case: the declared cache and everything certify reads. */
typedef struct zoo {
    /* set by the case before zoo_build */
    lowp_block_format fmt;
    lowp_certify_layout layout;
    lowp_kv_layout order;
    lowp_kv_sf_order v_sf;
    size_t P, H, Hq, Dqk, Dvo;
    int32_t lens[ZB];
    float ks, vs;           /* decode-side global scales (T2 owner inputs: replaced) */
    double kmag, vmag;      /* standard deviations of the drawn K and V */
    tol_test test;
    int owner;              /* 1: the tolerance test's own input conventions */
    uint64_t rng;
    /* built by zoo_build */
    size_t np, maxb, maxlen;
    int32_t indptr[ZB + 1], indices[ZMAXP], last[ZB], bt[ZB * ZMAXB];
    lowp_kv_page_table pt;
    lowp_kv_config cfg;
    lowp_kvcache *c;        /* the declared cache */
    float *kx, *vx;         /* drawn values [ZB][maxlen][H][D] (before quantization) */
    uint16_t *qb;           /* BF16 queries [ZB][Hq][Dqk] */
    float *q, *out;         /* q as float; the mutant's output [ZB][Hq][Dvo] */
} zoo;

static float *kx_at(zoo *z, size_t b, size_t t) { return z->kx + ((b * z->maxlen + t) * z->H) * z->Dqk; }
static float *vx_at(zoo *z, size_t b, size_t t) { return z->vx + ((b * z->maxlen + t) * z->H) * z->Dvo; }

static lowp_kvcache *make_cache(const lowp_kv_config *cfg, float ks, float vs)
{
    lowp_kvcache *c;
    char why[256];
    if (lowp_kvcache_create(cfg, &c, why, sizeof why))
        die("cache: %s", why);
    if (lowp_block_has_global_scale(cfg->format) && lowp_kvcache_set_global_scales(c, &ks, &vs, 1, why, sizeof why))
        die("scales: %s", why);
    return c;
}

static void write_all(zoo *z, lowp_kvcache *c)
{
    char why[256];
    for (size_t b = 0; b < ZB; b++)
        for (size_t t = 0; t < (size_t)z->lens[b]; t++)
            if (lowp_kvcache_write_pos(c, &z->pt, b, t, kx_at(z, b, t), vx_at(z, b, t), NULL, NULL, why, sizeof why))
                die("write: %s", why);
}

/* The owner inputs of T1 (create_nvfp4_kv): every written code byte masked with 0x77, every
 * block scale one of E4M3 1/8, 1/4, 1/2, 1 (0x20 0x28 0x30 0x38), global 1 (set by the
 * caller). Unwritten slots keep the poison. */
static void owner_nvfp4_bytes(zoo *z, lowp_kvcache *c)
{
    for (int w = 0; w < 2; w++) {
        size_t dim = w ? z->Dvo : z->Dqk, rb = dim / 2, S = dim / 16;
        uint8_t *codes = lowp_kvcache_buffer(c, (lowp_kv_which)w, LOWP_KV_CODES, NULL);
        uint8_t *sf = lowp_kvcache_buffer(c, (lowp_kv_which)w, LOWP_KV_SCALES, NULL);
        for (size_t b = 0; b < ZB; b++)
            for (size_t t = 0; t < (size_t)z->lens[b]; t++) {
                size_t page = (size_t)z->indices[z->indptr[b] + (int32_t)(t / z->P)], slot = t % z->P;
                for (size_t h = 0; h < z->H; h++) {
                    uint8_t *row = codes + lowp_kvcache_code_offset(c, (lowp_kv_which)w, page, slot, h);
                    for (size_t i = 0; i < rb; i++)
                        row[i] = (uint8_t)(lowp_splitmix64(&z->rng) & 0x77u);
                    for (size_t s = 0; s < S; s++)
                        sf[lowp_kvcache_scale_offset(c, (lowp_kv_which)w, page, slot, h, s)] =
                            (uint8_t)(0x20u + 8u * (unsigned)lowp_test_irange(&z->rng, 0, 3));
                }
            }
    }
}

/* Draws the tokens and queries, lays out the pages (shuffled, two spare pages per used one
 * for the cases that move pages) and writes the declared cache. */
static void zoo_build(zoo *z)
{
    z->maxlen = 0;
    size_t need = 0;
    z->indptr[0] = 0;
    for (size_t b = 0; b < ZB; b++) {
        size_t n = ((size_t)z->lens[b] + z->P - 1) / z->P;
        if ((size_t)z->lens[b] > z->maxlen)
            z->maxlen = (size_t)z->lens[b];
        z->indptr[b + 1] = z->indptr[b] + (int32_t)n;
        z->last[b] = z->lens[b] - (int32_t)((n - 1) * z->P);
        need += n;
    }
    z->np = 2 * need + 2;
    if (z->np > ZMAXP || z->maxlen > ZMAXB * z->P)
        die("case too large (%zu pages)", z->np);
    int32_t perm[ZMAXP];
    for (size_t i = 0; i < z->np; i++)
        perm[i] = (int32_t)i;
    for (size_t i = z->np; i > 1; i--) {
        size_t j = (size_t)lowp_test_irange(&z->rng, 0, (int)i - 1);
        int32_t t = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = t;
    }
    memcpy(z->indices, perm, need * sizeof *perm);
    z->maxb = 0;
    memset(z->bt, 0xFF, sizeof z->bt);
    for (size_t b = 0; b < ZB; b++) {
        size_t n = (size_t)(z->indptr[b + 1] - z->indptr[b]);
        if (n > z->maxb)
            z->maxb = n;
    }
    for (size_t b = 0; b < ZB; b++)
        for (int32_t i = z->indptr[b]; i < z->indptr[b + 1]; i++)
            z->bt[b * z->maxb + (size_t)(i - z->indptr[b])] = z->indices[i];
    z->pt = (lowp_kv_page_table){ZB, z->indptr, z->indices, z->last};

    z->kx = xmalloc(ZB * z->maxlen * z->H * z->Dqk * sizeof *z->kx);
    z->vx = xmalloc(ZB * z->maxlen * z->H * z->Dvo * sizeof *z->vx);
    double ka = 0, va = 0;
    for (size_t i = 0; i < ZB * z->maxlen * z->H * z->Dqk; i++) {
        z->kx[i] = (float)(z->kmag * lowp_test_gauss(&z->rng));
        ka = fmax(ka, fabs(z->kx[i]));
    }
    for (size_t i = 0; i < ZB * z->maxlen * z->H * z->Dvo; i++) {
        z->vx[i] = (float)(z->vmag * lowp_test_gauss(&z->rng));
        va = fmax(va, fabs(z->vx[i]));
    }
    if (z->owner && z->test == T2) { /* FlashInfer's calibration: amax / 256 */
        z->ks = (float)(ka / 256);
        z->vs = (float)(va / 256);
    }
    if (z->owner && (z->test == T3 || z->test == T1))
        z->ks = z->vs = 1.0f;
    z->cfg = lowp_kv_config_default(z->fmt, z->np, z->P, z->H, z->Dqk, z->Dvo);
    z->cfg.layout = z->order;
    z->cfg.v_sf_order = z->v_sf;
    z->c = make_cache(&z->cfg, z->ks, z->vs);
    write_all(z, z->c);
    if (z->owner && z->test == T1)
        owner_nvfp4_bytes(z, z->c);
    size_t nq = ZB * z->Hq * z->Dqk;
    z->qb = xmalloc(nq * sizeof *z->qb);
    z->q = xmalloc(nq * sizeof *z->q);
    for (size_t i = 0; i < nq; i++) {
        z->qb[i] = lowp_bf16_from_f32((float)lowp_test_gauss(&z->rng));
        z->q[i] = lowp_f32_from_bf16(z->qb[i]);
    }
    z->out = xmalloc(ZB * z->Hq * z->Dvo * sizeof *z->out);
}

static void zoo_free(zoo *z)
{
    lowp_kvcache_destroy(z->c);
    free(z->kx);
    free(z->vx);
    free(z->qb);
    free(z->q);
    free(z->out);
}

/* lowp's kernel (the emulator) on cache c with queries qb (BF16) and softmax scale sm (0:
 * 1/sqrt(qk_dim)) into z->out. */
static void emulate(zoo *z, const lowp_kvcache *c, const uint16_t *qb, double sm)
{
    char why[256];
    lowp_kv_view view = lowp_kvcache_view(c);
    lowp_gpu_decode_args ga = {c, &view, &z->pt, z->Hq, sm, qb, 0, NULL, 0};
    size_t n = ZB * z->Hq * z->Dvo;
    uint16_t *ob = xmalloc(n * sizeof *ob);
    if (lowp_gpu_decode_emulate(&ga, ob, why, sizeof why))
        die("emulator: %s", why);
    for (size_t i = 0; i < n; i++)
        z->out[i] = lowp_f32_from_bf16(ob[i]);
    free(ob);
}

/* A cache of config cfg holding src's bytes (the sizes must agree): the same memory read
 * under another layout, or with other global scales. */
static lowp_kvcache *clone_as(const lowp_kvcache *src, const lowp_kv_config *cfg, float ks, float vs)
{
    lowp_kvcache *c = make_cache(cfg, ks, vs);
    for (int w = 0; w < 2; w++)
        for (int p = 0; p < 2; p++) {
            size_t nd = 0, ns = 0;
            uint8_t *d = lowp_kvcache_buffer(c, (lowp_kv_which)w, (lowp_kv_part)p, &nd);
            const uint8_t *s = lowp_kvcache_cbuffer(src, (lowp_kv_which)w, (lowp_kv_part)p, &ns);
            if ((d == NULL) != (s == NULL) || nd != ns)
                die("clone: buffer sizes differ (%zu vs %zu)", nd, ns);
            if (d != NULL)
                memcpy(d, s, nd);
        }
    return c;
}

/* The kernel reading the declared cache's bytes as cfg says, with global scales ks, vs. */
static void emulate_read_as(zoo *z, const lowp_kv_config *cfg, float ks, float vs)
{
    lowp_kvcache *k = clone_as(z->c, cfg, ks, vs);
    emulate(z, k, z->qb, 0);
    lowp_kvcache_destroy(k);
}

/* ---- the 12 mutants ------------------------------------------------------------------ */
typedef struct zcase {
    const char *slug, *bug, *source, *mutant, *expect;
    void (*run)(zoo *z);
} zcase;

static void lens3(zoo *z, int a, int b, int c)
{
    z->lens[0] = a;
    z->lens[1] = b;
    z->lens[2] = c;
}

static void nvfp4_trtllm(zoo *z)
{
    z->fmt = LOWP_NVFP4;
    z->layout = LOWP_CERTIFY_TRTLLM;
    z->order = LOWP_KV_HND;
    z->v_sf = LOWP_KV_SF_INTERLEAVE4;
    z->P = 16, z->H = 2, z->Hq = 8, z->Dqk = z->Dvo = 64;
    z->ks = 0.02f, z->vs = 0.03f;
    z->kmag = z->vmag = 4.0 * 6 * 448 * 0.02 / 448; /* block scales well inside E4M3 */
    z->test = T1;
    lens3(z, 37, 70, 21);
}

static void fp8_vllm(zoo *z)
{
    z->fmt = LOWP_FP8_E4M3;
    z->layout = LOWP_CERTIFY_VLLM_FP8;
    z->order = LOWP_KV_NHD;
    z->v_sf = LOWP_KV_SF_LINEAR;
    z->P = 16, z->H = 2, z->Hq = 8, z->Dqk = z->Dvo = 64;
    z->ks = 0.25f, z->vs = 0.5f; /* k != v, non-unit (kernels.md 6, bug 7's lesson) */
    z->kmag = 20, z->vmag = 40;
    z->test = T2;
    lens3(z, 40, 90, 23);
}

static void fp8_flashinfer(zoo *z)
{
    fp8_vllm(z);
    z->layout = LOWP_CERTIFY_FLASHINFER;
}

/* 1. vLLM #50085: the writer interleaved V scales, the XQA consumer read them linearly. */
static void m_v_scale_order(zoo *z)
{
    nvfp4_trtllm(z);
    zoo_build(z);
    lowp_kv_config rd = z->cfg;
    rd.v_sf_order = LOWP_KV_SF_LINEAR;
    emulate_read_as(z, &rd, z->ks, z->vs);
}

/* 2. vLLM #53681: an HND pool read as NHD (num_heads = page_size = 8: every shape fits). */
static void m_hnd_as_nhd(zoo *z)
{
    fp8_flashinfer(z);
    z->order = LOWP_KV_HND;
    z->P = z->H = 8;
    z->Hq = 16;
    zoo_build(z);
    lowp_kv_config rd = z->cfg;
    rd.layout = LOWP_KV_NHD;
    emulate_read_as(z, &rd, z->ks, z->vs);
}

/* 3. vLLM #49011: the block-scale region carved at the wrong offset once K and V were folded
 * into 2 num_kv_heads: each head's K scale tile read one head further on (wrapping). */
static void m_scale_carve(zoo *z)
{
    nvfp4_trtllm(z);
    zoo_build(z);
    lowp_kvcache *k = clone_as(z->c, &z->cfg, z->ks, z->vs);
    size_t n = 0, tile = z->P * (z->Dqk / 16);
    uint8_t *sf = lowp_kvcache_buffer(k, LOWP_KV_K, LOWP_KV_SCALES, &n);
    const uint8_t *src = lowp_kvcache_cbuffer(z->c, LOWP_KV_K, LOWP_KV_SCALES, NULL);
    for (size_t i = 0; i < n; i++)
        sf[i] = src[(i + tile) % n];
    emulate(z, k, z->qb, 0);
    lowp_kvcache_destroy(k);
}

/* 4. sglang #29913: HiCache offload / reload of sequence 0's pages moved the codes but not
 * the block scales: the reloaded pages keep the scales of their previous occupant. */
static void m_reload_without_scales(zoo *z)
{
    nvfp4_trtllm(z);
    zoo_build(z);
    lowp_kvcache *k = clone_as(z->c, &z->cfg, z->ks, z->vs);
    size_t used = (size_t)z->indptr[ZB], n0 = (size_t)z->indptr[1];
    int32_t dst[ZMAXP];
    size_t nd = 0;
    for (size_t p = 0; p < z->np && nd < n0; p++) { /* free pages: not in the table */
        int inuse = 0;
        for (size_t i = 0; i < used; i++)
            inuse |= z->indices[i] == (int32_t)p;
        if (!inuse)
            dst[nd++] = (int32_t)p;
    }
    char why[256];
    float junk_k[8 * 512], junk_v[8 * 512];
    for (size_t i = 0; i < nd; i++) {
        size_t src = (size_t)z->indices[i];
        for (size_t s = 0; s < z->P; s++) { /* the previous occupant of the page */
            for (size_t e = 0; e < z->H * z->Dqk; e++)
                junk_k[e] = (float)(z->kmag * 0.1 * lowp_test_gauss(&z->rng));
            for (size_t e = 0; e < z->H * z->Dvo; e++)
                junk_v[e] = (float)(z->vmag * 0.1 * lowp_test_gauss(&z->rng));
            if (lowp_kvcache_write(z->c, (size_t)dst[i], s, junk_k, junk_v, NULL, NULL, why, sizeof why) ||
                lowp_kvcache_write(k, (size_t)dst[i], s, junk_k, junk_v, NULL, NULL, why, sizeof why))
                die("stale page: %s", why);
        }
        if (lowp_kvcache_copy_page(z->c, src, (size_t)dst[i], why, sizeof why)) /* the contract */
            die("copy: %s", why);
        for (int w = 0; w < 2; w++) { /* the bug: codes only */
            size_t rb = lowp_kv_row_code_bytes(&z->cfg, (lowp_kv_which)w) * z->P * z->H;
            uint8_t *d = lowp_kvcache_buffer(k, (lowp_kv_which)w, LOWP_KV_CODES, NULL);
            memcpy(d + lowp_kvcache_code_offset(k, (lowp_kv_which)w, (size_t)dst[i], 0, 0),
                   d + lowp_kvcache_code_offset(k, (lowp_kv_which)w, src, 0, 0), rb);
        }
        z->indices[i] = dst[i];
        z->bt[i] = dst[i]; /* sequence 0's row of the block table */
    }
    emulate(z, k, z->qb, 0);
    lowp_kvcache_destroy(k);
}

/* 5. b12x #86: the writer fixed the global scale at 1.0 for a low-magnitude layer (|x| ~
 * 1e-3): block scales fall to E4M3 subnormals or flush to 0. Declared: the calibrated
 * decode scale amax / (6 * 448). Under T1's inputs the global scale is 1 already: the bug
 * cannot happen there, and the mutant is the kernel itself. */
static void m_global_scale_one(zoo *z)
{
    nvfp4_trtllm(z);
    if (!z->owner) {
        z->kmag = z->vmag = 1e-3;
        z->ks = z->vs = (float)(4.5e-3 / (6 * 448));
    }
    zoo_build(z);
    if (z->owner) {
        emulate(z, z->c, z->qb, 0);
        return;
    }
    lowp_kvcache *k = make_cache(&z->cfg, 1.0f, 1.0f);
    write_all(z, k);
    emulate(z, k, z->qb, 0);
    lowp_kvcache_destroy(k);
}

/* 6. sglang #25790: FP8 KV decode and extend diverge from kv_len >= 97: FA3's fp8 extend
 * tile rounds P to E4M3 before P.V. Sequences of >= 97 positions take that path: fp32
 * scores and sums, P rounded to E4M3 (saturating) for P.V, BF16 out; the shorter ones the
 * decode kernel (the emulator). Declared: the decode kernel's arithmetic (P BF16). */
static void m_extend_p_fp8(zoo *z)
{
    fp8_vllm(z);
    lens3(z, 60, 130, 96);
    zoo_build(z);
    emulate(z, z->c, z->qb, 0);
    lowp_codec e4m3;
    char why[256];
    if (lowp_codec_init(&e4m3, LOWP_E4M3, LOWP_PROFILE_CUDA, LOWP_RN, LOWP_SAT_ON, why, sizeof why))
        die("codec: %s", why);
    lowp_kv_view view = lowp_kvcache_view(z->c);
    size_t G = z->Hq / z->H;
    double *K = xmalloc(z->maxlen * z->H * z->Dqk * sizeof *K), *V = xmalloc(z->maxlen * z->H * z->Dvo * sizeof *V);
    float *s = xmalloc(z->maxlen * sizeof *s);
    for (size_t b = 0; b < ZB; b++) {
        size_t n = (size_t)z->lens[b];
        if (n < 97)
            continue;
        if (lowp_kvcache_gather(z->c, &view, &z->pt, b, n, K, V, why, sizeof why))
            die("gather: %s", why);
        for (size_t h = 0; h < z->Hq; h++) {
            const float *q = z->q + (b * z->Hq + h) * z->Dqk;
            size_t kh = h / G;
            float m = -INFINITY, l = 0;
            for (size_t j = 0; j < n; j++) {
                float acc = 0;
                for (size_t d = 0; d < z->Dqk; d++)
                    acc += q[d] * (float)K[(j * z->H + kh) * z->Dqk + d];
                s[j] = acc * (float)(1.0 / sqrt((double)z->Dqk)); /* K holds k_scale */
                m = fmaxf(m, s[j]);
            }
            for (size_t d = 0; d < z->Dvo; d++) {
                float o = 0;
                l = 0;
                for (size_t j = 0; j < n; j++) {
                    float p = expf(s[j] - m);
                    l += p;
                    o += (float)lowp_decode_f64(LOWP_E4M3, lowp_encode_f64(&e4m3, p)) *
                         (float)V[(j * z->H + kh) * z->Dvo + d];
                }
                z->out[(b * z->Hq + h) * z->Dvo + d] = lowp_f32_from_bf16(lowp_bf16_from_f32(o / l)); /* V holds v_scale */
            }
        }
    }
    free(K);
    free(V);
    free(s);
}

/* 7. FlashInfer #4979: the ragged prefill ignored k_scale and v_scale for an fp8 cache. */
static void m_scales_ignored(zoo *z)
{
    fp8_flashinfer(z);
    zoo_build(z);
    emulate_read_as(z, &z->cfg, 1.0f, 1.0f);
}

/* 8. FlashInfer #4976: fp8 prefill with head_dim_qk 192 / head_dim_vo 128 (DeepSeek): the
 * mutant's Q.K loop stops at head_dim_vo (the first 128 dims), softmax scale 1/sqrt(192). */
static void m_unequal_head_dims(zoo *z)
{
    fp8_flashinfer(z);
    z->Dqk = 192, z->Dvo = 128;
    zoo_build(z);
    lowp_kv_config rd = z->cfg;
    rd.qk_dim = 128;
    lowp_kvcache *k = make_cache(&rd, z->ks, z->vs);
    char why[256];
    float kt[2 * 128];
    for (size_t b = 0; b < ZB; b++) /* per-tensor FP8: the first 128 dims' codes are the same */
        for (size_t t = 0; t < (size_t)z->lens[b]; t++) {
            for (size_t h = 0; h < z->H; h++)
                memcpy(kt + h * 128, kx_at(z, b, t) + h * z->Dqk, 128 * sizeof *kt);
            if (lowp_kvcache_write_pos(k, &z->pt, b, t, kt, vx_at(z, b, t), NULL, NULL, why, sizeof why))
                die("write: %s", why);
        }
    uint16_t *qt = xmalloc(ZB * z->Hq * 128 * sizeof *qt);
    for (size_t r = 0; r < ZB * z->Hq; r++)
        memcpy(qt + r * 128, z->qb + r * z->Dqk, 128 * sizeof *qt);
    emulate(z, k, qt, 1.0 / sqrt(192.0));
    free(qt);
    lowp_kvcache_destroy(k);
}

/* 9. TRT-LLM #16916: the MLA generation kernel was not handed the fp8 KV scale (None) and
 * ran unscaled: one latent KV head, 16 query heads, one scale for K and V (XQA's
 * kvCacheScale). */
static void m_scale_not_delivered(zoo *z)
{
    fp8_vllm(z);
    z->H = 1, z->Hq = 16, z->Dqk = z->Dvo = 128;
    z->ks = z->vs = 0.3f;
    zoo_build(z);
    emulate_read_as(z, &z->cfg, 1.0f, 1.0f);
}

/* 10. sglang #20705 / vLLM #54705: k_scale never loaded (1.0), V with outliers > 448, written
 * by torch's non-saturating .to(float8_e4m3fn): |x| >= 480 becomes NaN (0x7F | sign), [448,
 * 480) rounds to 448. Declared: the saturating write (vLLM / TRT-LLM, lowp's model) at 1.0.
 * T3's inputs (unit scales, Gaussian values) have no element near 448. */
static void m_nonsaturating_v_cast(zoo *z)
{
    fp8_vllm(z);
    z->ks = z->vs = 1.0f;
    z->kmag = 1, z->vmag = 2;
    z->test = T3;
    zoo_build(z);
    lowp_kvcache *k = clone_as(z->c, &z->cfg, 1.0f, 1.0f);
    if (!z->owner) { /* an outlier channel: V dim 5 of head 1 at 600 in every third token */
        uint8_t *vc = lowp_kvcache_buffer(k, LOWP_KV_V, LOWP_KV_CODES, NULL);
        uint8_t *vd = lowp_kvcache_buffer(z->c, LOWP_KV_V, LOWP_KV_CODES, NULL);
        for (size_t b = 0; b < ZB; b++)
            for (size_t t = 0; t < (size_t)z->lens[b]; t += 3) {
                size_t page = (size_t)z->indices[z->indptr[b] + (int32_t)(t / z->P)];
                size_t off = lowp_kvcache_code_offset(k, LOWP_KV_V, page, t % z->P, 1) + 5;
                vd[off] = 0x7E; /* saturated: 448 */
                vc[off] = 0x7F; /* torch: NaN */
            }
    }
    emulate(z, k, z->qb, 0);
    lowp_kvcache_destroy(k);
}

/* 11. vLLM #51011: fp8 MLA decode with 12 query heads per rank (Kimi TP8): the mutant's
 * query rows are strided for 16 heads, so sequence b > 0 reads another sequence's heads. */
static void m_heads_not_16(zoo *z)
{
    fp8_vllm(z);
    z->H = 1, z->Hq = 12, z->Dqk = z->Dvo = 128;
    zoo_build(z);
    size_t rows = ZB * z->Hq;
    uint16_t *qs = xmalloc(rows * z->Dqk * sizeof *qs);
    for (size_t b = 0; b < ZB; b++)
        for (size_t h = 0; h < z->Hq; h++)
            memcpy(qs + (b * z->Hq + h) * z->Dqk, z->qb + ((b * 16 + h) % rows) * z->Dqk, z->Dqk * sizeof *qs);
    emulate(z, z->c, qs, 0);
    free(qs);
}

/* 12. kekzl/imp #1342/#1344: head_dim 512 staged half its row per cp.async: dims 256..511 of
 * every K and V row come from stale shared memory, the previous stage's row (the slot
 * before, within the page; a page's first slot keeps its own: the first stage was right).
 * Silent: every value read is a written, finite one. */
static void m_half_row_copy(zoo *z)
{
    fp8_flashinfer(z);
    z->Dqk = z->Dvo = 512;
    lens3(z, 30, 45, 19);
    zoo_build(z);
    lowp_kvcache *k = clone_as(z->c, &z->cfg, z->ks, z->vs);
    for (int w = 0; w < 2; w++) {
        uint8_t *d = lowp_kvcache_buffer(k, (lowp_kv_which)w, LOWP_KV_CODES, NULL);
        const uint8_t *s = lowp_kvcache_cbuffer(z->c, (lowp_kv_which)w, LOWP_KV_CODES, NULL);
        for (size_t p = 0; p < z->np; p++)
            for (size_t t = 0; t < z->P; t++)
                for (size_t h = 0; h < z->H; h++)
                    memcpy(d + lowp_kvcache_code_offset(k, (lowp_kv_which)w, p, t, h) + 256,
                           s + lowp_kvcache_code_offset(k, (lowp_kv_which)w, p, t ? t - 1 : 0, h) + 256, 256);
    }
    emulate(z, k, z->qb, 0);
    lowp_kvcache_destroy(k);
}

/* 0. No bug: the emulator on the declared cache (the control: certify must pass it). */
static void m_clean(zoo *z)
{
    fp8_vllm(z);
    zoo_build(z);
    emulate(z, z->c, z->qb, 0);
}

static const zcase CASES[] = {
    {"00.clean", "none (control)", "-", "lowp's kernel emulator, unmutated", "outside bound 0, nan mismatch 0",
     m_clean},
    {"01.v-scales-interleaved-read-linear", "NVFP4 V scales written 4-token interleaved, read linearly",
     "vLLM #50085", "trtllm cache (V interleaved); the kernel reads V scales linearly",
     "diagnosis: V scales look linear, layout says 4-token interleaved", m_v_scale_order},
    {"02.hnd-read-as-nhd", "HND pool taken for NHD (num_heads = page_size)", "vLLM #53681",
     "flashinfer fp8 HND pool, P = H = 8; the kernel reads it NHD", "diagnosis: HND/NHD swapped", m_hnd_as_nhd},
    {"03.scale-region-carve", "NVFP4 data + scale page carved wrong after the 2*num_kv_heads fold",
     "vLLM #49011 / #46329", "trtllm cache; K block scales read one head's tile further on", "outside bound",
     m_scale_carve},
    {"04.reload-without-scales", "offload / reload moved codes, not block scales", "sglang #29913",
     "trtllm cache; sequence 0's pages reloaded into stale pages, codes only", "outside bound",
     m_reload_without_scales},
    {"05.global-scale-one", "NVFP4 global scale fixed at 1.0: subnormal / zero block scales", "b12x #86",
     "trtllm cache, K and V ~ 1e-3, declared global amax/(6*448); the writer used 1.0", "outside bound",
     m_global_scale_one},
    {"06.extend-p-fp8", "FP8 decode and extend diverge from kv_len >= 97", "sglang #25790",
     "vllm-fp8; sequences >= 97 take an extend path with P rounded to E4M3", "outside bound", m_extend_p_fp8},
    {"07.scales-ignored", "fp8 ragged prefill ignored k_scale / v_scale", "FlashInfer #4979 (#1023)",
     "flashinfer fp8 NHD, k 0.25 v 0.5; the kernel runs unscaled",
     "diagnosis: the kernel looks to ignore k_scale and v_scale", m_scales_ignored},
    {"08.qk192-vo128", "fp8 prefill wrong for head_dim_qk 192 / head_dim_vo 128", "FlashInfer #4976",
     "flashinfer fp8, qk 192 vo 128; Q.K stops at 128 dims", "outside bound", m_unequal_head_dims},
    {"09.scale-not-delivered", "fp8 KV scale not delivered to the MLA generation kernel", "TRT-LLM #16916",
     "vllm-fp8, 1 KV head 16 q heads, kv scale 0.3; the kernel runs at 1.0",
     "diagnosis: the kernel looks to ignore k_scale and v_scale", m_scale_not_delivered},
    {"10.nonsaturating-v-cast", "scale left at 1.0, V outliers > 448 cast without saturation",
     "sglang #20705, vLLM #54705", "vllm-fp8 at 1.0, V outliers 600; NaN codes where 448 is declared",
     "nan mismatch", m_nonsaturating_v_cast},
    {"11.heads-not-dividing-16", "fp8 MLA decode wrong when heads per rank don't divide 16", "vLLM #51011",
     "vllm-fp8, 12 q heads on 1 KV head; query rows strided for 16 heads", "outside bound", m_heads_not_16},
    {"12.head-dim-512-half-copy", "head_dim 512 staged half the row, rest from stale smem",
     "kekzl/imp #1342/#1344", "flashinfer fp8, d 512; dims 256..511 from the previous slot's row",
     "outside bound", m_half_row_copy},
};
#define NCASES (sizeof CASES / sizeof CASES[0])

/* ---- writing a case ------------------------------------------------------------------- */
static void save(const char *dir, const char *name, lowp_dtype dt, int ndim, const size_t *shape, const void *data)
{
    lowp_tensor t;
    char why[256], path[4096];
    if (lowp_tensor_alloc(&t, name, dt, ndim, shape, why, sizeof why))
        die("%s: %s", name, why);
    memcpy(t.data, data, t.nbytes);
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        die("cannot write %s: %s", path, strerror(errno));
    if (lowp_npy_emit(f, &t, why, sizeof why) || fclose(f) != 0)
        die("%s: %s", path, why);
    lowp_tensor_free(&t);
}

/* The cache tensors in the layout's memory order (lowp/certify.h) and the arguments. */
static void save_case(const zoo *z, const char *dir, FILE *args)
{
    const lowp_kvcache *c = z->c;
    int nv = z->fmt == LOWP_NVFP4, bf = z->fmt == LOWP_BF16_PASS;
    lowp_dtype dt = bf ? LOWP_DT_BF16 : LOWP_DT_U8;
    for (int w = 0; w < 2; w++) {
        size_t D = w ? z->Dvo : z->Dqk;
        size_t shp[4] = {z->np, z->P, z->H, nv ? D / 2 : D};
        if (z->order == LOWP_KV_HND)
            shp[1] = z->H, shp[2] = z->P;
        save(dir, w ? "v" : "k", dt, 4, shp, lowp_kvcache_cbuffer(c, (lowp_kv_which)w, LOWP_KV_CODES, NULL));
        if (nv) {
            size_t ss[4] = {z->np, z->H, z->P, D / 16};
            save(dir, w ? "v_sf" : "k_sf", LOWP_DT_U8, 4, ss, lowp_kvcache_cbuffer(c, (lowp_kv_which)w, LOWP_KV_SCALES, NULL));
            fprintf(args, "--%s\n%s.npy\n", w ? "v-sf" : "k-sf", w ? "v_sf" : "k_sf");
        }
    }
    size_t qs[3] = {ZB, z->Hq, z->Dqk}, os[3] = {ZB, z->Hq, z->Dvo};
    save(dir, "q", LOWP_DT_F32, 3, qs, z->q);
    save(dir, "out", LOWP_DT_F32, 3, os, z->out);
    fprintf(args, "--layout\n%s\n--k-cache\nk.npy\n--v-cache\nv.npy\n--k-scale\n%.9g\n--v-scale\n%.9g\n--q\nq.npy\n"
            "--out\nout.npy\n", lowp_certify_layout_name(z->layout), (double)z->ks, (double)z->vs);
    if (z->layout == LOWP_CERTIFY_FLASHINFER) {
        size_t n1 = ZB + 1, n = (size_t)z->indptr[ZB], nb = ZB;
        save(dir, "indptr", LOWP_DT_I32, 1, &n1, z->indptr);
        save(dir, "indices", LOWP_DT_I32, 1, &n, z->indices);
        save(dir, "last_page_len", LOWP_DT_I32, 1, &nb, z->last);
        fprintf(args, "--page-order\n%s\n--indptr\nindptr.npy\n--indices\nindices.npy\n--last-page-len\n"
                "last_page_len.npy\n", lowp_kv_layout_name(z->order));
    } else {
        size_t bs[2] = {ZB, z->maxb}, nb = ZB;
        save(dir, "block_table", LOWP_DT_I32, 2, bs, z->bt);
        save(dir, "seq_lens", LOWP_DT_I32, 1, &nb, z->lens);
        fprintf(args, "--block-table\nblock_table.npy\n--seq-lens\nseq_lens.npy\n");
    }
    /* lowp's kernel as declared (lowp/attn_gpu_emul.h): BF16 Q, P and out, MMA k 16, the
     * emulator's split length */
    fprintf(args, "--q-dtype\nbf16\n--mma-k\n16\n--split-tokens\n%zu\n",
            lowp_gpu_decode_chunk_tokens(ZB, z->H, z->maxlen));
}

/* The tolerance test on z->out: 0 pass, else the number of failing elements. The reference
 * is the exact attention of the declared cache (lowp_certify_run's exact array). */
static size_t tolerance(const zoo *z, double *worst_excess)
{
    static const double atol[4] = {0, 1e-1, 1e-2, 1e-2}, rtol[4] = {0, 1e-1, 2e-1, 1e-2};
    lowp_certify_cache cc = lowp_certify_cache_init(z->layout, z->np, z->P, z->H, z->Dqk, z->Dvo);
    cc.format = z->fmt;
    cc.code_order = cc.sf_order = z->order;
    cc.v_sf_order = z->v_sf;
    cc.k = lowp_kvcache_cbuffer(z->c, LOWP_KV_K, LOWP_KV_CODES, NULL);
    cc.v = lowp_kvcache_cbuffer(z->c, LOWP_KV_V, LOWP_KV_CODES, NULL);
    cc.k_sf = lowp_kvcache_cbuffer(z->c, LOWP_KV_K, LOWP_KV_SCALES, NULL);
    cc.v_sf = lowp_kvcache_cbuffer(z->c, LOWP_KV_V, LOWP_KV_SCALES, NULL);
    cc.k_scale = z->ks;
    cc.v_scale = z->vs;
    cc.batch = ZB;
    cc.indptr = z->indptr;
    cc.indices = z->indices;
    cc.last_page_len = z->last;
    lowp_certify_arith a = lowp_certify_arith_default();
    a.q_dtype = LOWP_CERTIFY_BF16;
    lowp_certify_args args = lowp_certify_args_init(&cc, &a, z->Hq, z->q, z->out);
    size_t n = ZB * z->Hq * z->Dvo;
    double *ex = xmalloc(n * sizeof *ex);
    args.exact = ex;
    args.diagnose = 0;
    lowp_certify_result r;
    char why[256];
    if (lowp_certify_run(&args, &r, why, sizeof why))
        die("reference: %s", why);
    size_t bad = 0;
    *worst_excess = 0;
    for (size_t i = 0; i < n; i++) {
        double tol = atol[z->test] + rtol[z->test] * fabs(ex[i]), e = fabs((double)z->out[i] - ex[i]);
        if (!(e <= tol)) { /* NaN fails, as in torch.testing.assert_close */
            bad++;
            *worst_excess = isnan(e) ? INFINITY : fmax(*worst_excess, e / tol);
        }
    }
    free(ex);
    return bad;
}

/* The tolerance test's verdict on the mutant, and on the unmutated kernel (the emulator on
 * the declared cache and queries): a test that also fails the correct kernel has not caught
 * the bug, it cannot tell them apart. */
static void verdict_text(zoo *z, char *buf, size_t len)
{
    double ex = 0, ex0 = 0;
    size_t n = ZB * z->Hq * z->Dvo, bad = tolerance(z, &ex);
    emulate(z, z->c, z->qb, 0);
    size_t bad0 = tolerance(z, &ex0);
    if (bad == 0)
        snprintf(buf, len, "passes (missed)");
    else if (bad0 > 0)
        snprintf(buf, len, "fails, but fails the unmutated kernel too (%zu elements): no verdict", bad0);
    else if (isinf(ex))
        snprintf(buf, len, "fails (caught): %zu of %zu elements, NaN among them", bad, n);
    else
        snprintf(buf, len, "fails (caught): %zu of %zu elements, worst %.3g x tol", bad, n, ex);
}

static const char *TEST_NAME[4] = {"", "T1 FlashInfer NVFP4 decode, atol = rtol = 1e-1",
                                   "T2 FlashInfer fp8 calibration decode, atol 1e-2 rtol 2e-1",
                                   "T3 FlashInfer fp8 prefill, atol = rtol = 1e-2"};

int main(int argc, char **argv)
{
    if (argc != 2)
        die("usage: lowp_zoo DIR (writes DIR/NN.slug/ for every bug)");
    if (mkdir(argv[1], 0777) && errno != EEXIST)
        die("cannot create %s: %s", argv[1], strerror(errno));
    for (size_t i = 0; i < NCASES; i++) {
        const zcase *k = &CASES[i];
        char dir[4096], path[4200], tz[160], to[160];
        zoo z;
        memset(&z, 0, sizeof z);
        z.rng = lowp_test_stream(0x2007, i, 0, 0);
        k->run(&z);
        snprintf(dir, sizeof dir, "%s/%s", argv[1], k->slug);
        if (mkdir(dir, 0777) && errno != EEXIST)
            die("cannot create %s: %s", dir, strerror(errno));
        snprintf(path, sizeof path, "%s/args", dir);
        FILE *args = fopen(path, "w");
        if (args == NULL)
            die("cannot write %s", path);
        save_case(&z, dir, args);
        verdict_text(&z, tz, sizeof tz); /* after save_case: it overwrites z.out */
        tol_test test = z.test;
        zoo_free(&z);
        if (fclose(args) != 0)
            die("cannot write %s", path);
        memset(&z, 0, sizeof z); /* the same mutant on the owner test's inputs */
        z.rng = lowp_test_stream(0x2007, i, 1, 0);
        z.owner = 1;
        k->run(&z);
        verdict_text(&z, to, sizeof to);
        zoo_free(&z);
        snprintf(path, sizeof path, "%s/expect", dir);
        FILE *f = fopen(path, "w");
        if (f == NULL || fprintf(f, "%d\n%s\n", i == 0 ? 0 : 1, k->expect) < 0 || fclose(f) != 0)
            die("cannot write %s", path);
        snprintf(path, sizeof path, "%s/meta", dir);
        f = fopen(path, "w");
        if (f == NULL ||
            fprintf(f, "bug\t%s\nsource\t%s\nmutant\t%s\ntest\t%s\ntol_zoo\t%s\ntol_owner\t%s\n", k->bug, k->source,
                    k->mutant, TEST_NAME[test], tz, to) < 0 ||
            fclose(f) != 0)
            die("cannot write %s", path);
    }
    return 0;
}
