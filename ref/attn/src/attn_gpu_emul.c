/* The CPU emulator of lowp's GPU paged-decode kernel: the definition in
 * lowp/attn_gpu_emul.h, step by step, in the kernel's order. Work items (sequence, KV
 * head, split) are independent and run in parallel; the merge runs splits in order, so
 * the bits do not depend on the thread count. */
#include "lowp/attn_gpu_emul.h"

#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lowp/why.h"
#include "lowp/ex2_approx.h"
#include "lowp/format.h"

uint16_t lowp_bf16_from_f32(float x)
{
    uint32_t u = lowp_f32_bits(x);
    if (x != x) /* canonical, whatever the sign: cvt.rn.bf16.f32 (measured on the H200) */
        return 0x7FFFu;
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

int lowp_gpu_decode_check(const lowp_kv_config *cfg, size_t num_q_heads, char *why,
                          size_t why_len)
{
    if (cfg == NULL)
        return lowp_why_set(why, why_len, "cache config is NULL");
    switch (cfg->format) {
    case LOWP_BF16_PASS:
    case LOWP_FP8_E4M3:
    case LOWP_FP8_E5M2:
    case LOWP_NVFP4:
    case LOWP_MXFP4:
        break;
    default:
        return lowp_why_set(why, why_len,
                            "the GPU decode kernel has no %s path (it reads bf16, fp8-e4m3, "
                            "fp8-e5m2, nvfp4, mxfp4)",
                            lowp_block_format_name(cfg->format));
    }
    if (cfg->qk_dim % 64 || cfg->qk_dim < 64 || cfg->qk_dim > 512)
        return lowp_why_set(why, why_len,
                            "qk_dim %zu: the GPU decode kernel needs a multiple of 64 in "
                            "[64, 512]",
                            cfg->qk_dim);
    if (cfg->vo_dim % 64 || cfg->vo_dim < 64 || cfg->vo_dim > 512)
        return lowp_why_set(why, why_len,
                            "vo_dim %zu: the GPU decode kernel needs a multiple of 64 in "
                            "[64, 512]",
                            cfg->vo_dim);
    if (cfg->num_heads == 0 || num_q_heads == 0 || num_q_heads % cfg->num_heads)
        return lowp_why_set(why, why_len,
                            "num_q_heads (%zu) is not a positive multiple of the cache's "
                            "%zu KV heads",
                            num_q_heads, cfg->num_heads);
    if (num_q_heads / cfg->num_heads > LOWP_GPU_DECODE_MAX_GROUP)
        return lowp_why_set(why, why_len,
                            "group ratio %zu: the GPU decode kernel takes at most %d query "
                            "heads per KV head",
                            num_q_heads / cfg->num_heads, LOWP_GPU_DECODE_MAX_GROUP);
    return 0;
}

size_t lowp_gpu_decode_chunk_tokens(size_t batch, size_t num_kv_heads, size_t max_len)
{
    size_t work = batch * num_kv_heads * max_len;
    size_t c = (work + 8191) / 8192;   /* about 8192 work items */
    size_t floor_len = max_len / 64;   /* at most 64 splits per sequence ... */
    if (floor_len > 4096)
        floor_len = 4096;
    if (c < floor_len)
        c = floor_len;
    size_t few = (work + 1023) / 1024; /* ... but at least about 1024 work items */
    if (c > few)
        c = few;
    c = (c + 15) / 16 * 16;
    if (c < 128)
        c = 128;
    if (c > 16384)
        c = 16384;
    size_t cap = (max_len + 15) / 16 * 16;
    if (cap < 16)
        cap = 16;
    return c < cap ? c : cap;
}

float lowp_gpu_decode_score_scale(lowp_block_format f, double sm_scale, float k_global)
{
    return (float)(sm_scale * 1.4426950408889634073599246810019 * (double)k_global) *
           lowp_gpu_decode_unscale(f);
}

uint16_t lowp_gpu_decode_element_bf16(lowp_block_format f, uint16_t code, uint8_t scale)
{
    switch (f) {
    case LOWP_BF16_PASS:
        return code;
    case LOWP_FP8_E4M3:
        return lowp_bf16_from_f32(lowp_decode_f32(LOWP_E4M3, code & 0xFF));
    case LOWP_FP8_E5M2:
        return lowp_bf16_from_f32(lowp_decode_f32(LOWP_E5M2, code & 0xFF));
    case LOWP_NVFP4: {
        /* exact: the factors and their products fit BF16 (the header's step 1) */
        float x = lowp_decode_f32(LOWP_E2M1, code & 0xF) * lowp_decode_f32(LOWP_E4M3, scale);
        return lowp_bf16_from_f32(x * 0x1p-7f);
    }
    case LOWP_MXFP4: {
        float s;
        if (scale == 0xFF)
            s = NAN;
        else if (scale == 0)
            s = 0x1p-127f;
        else
            s = lowp_pow2i_f32((int)scale - 127);
        return lowp_bf16_from_f32(lowp_decode_f32(LOWP_E2M1, code & 0xF) * s);
    }
    default:
        return 0x7FFF;
    }
}

float lowp_gpu_decode_unscale(lowp_block_format f)
{
    return f == LOWP_NVFP4 ? 128.0f : 1.0f;
}

/* One side (K or V) of the cache, resolved for row reads. */
typedef struct side {
    const uint8_t *codes, *scales;
    size_t dim, block; /* block: elements per scale (0 without scales) */
    lowp_block_format f;
} side;

/* BF16 element values of the row (page, slot, head). */
static void read_row(const lowp_kvcache *c, const side *sd, lowp_kv_which w, size_t page,
                     size_t slot, size_t head, uint16_t *e)
{
    const uint8_t *p = sd->codes + lowp_kvcache_code_offset(c, w, page, slot, head);
    for (size_t d = 0; d < sd->dim; d++) {
        uint8_t sc = 0;
        if (sd->block)
            sc = sd->scales[lowp_kvcache_scale_offset(c, w, page, slot, head, d / sd->block)];
        uint16_t code;
        switch (sd->f) {
        case LOWP_BF16_PASS:
            code = (uint16_t)(p[2 * d] | (p[2 * d + 1] << 8));
            break;
        case LOWP_NVFP4:
        case LOWP_MXFP4:
            code = (uint16_t)((p[d / 2] >> (4 * (d & 1))) & 0xF);
            break;
        default:
            code = p[d];
            break;
        }
        e[d] = lowp_gpu_decode_element_bf16(sd->f, code, sc);
    }
}

/* MMA k index kk of k-step ks of 64-dim chunk c -> dim (the header's step 2; fp4: NVFP4
 * and MXFP4). */
static size_t k_dim(int fp4, size_t c, size_t ks, size_t kk)
{
    if (fp4)
        return 64 * c + 16 * ((kk % 8) / 2) + 8 * (ks / 2) + 2 * (ks % 2) + (kk >= 8) +
               4 * (kk % 2);
    return 64 * c + 16 * ((kk % 8) / 2) + 4 * ks + (kk % 2) + 2 * (kk >= 8);
}

typedef struct job {
    const lowp_gpu_decode_args *a;
    const lowp_kv_config *cfg;
    side K, V;
    size_t G, H, chunk, nch_max;
    const lowp_mma_params *mma;
    float *ws_o, *ws_m, *ws_l; /* [b][h][chunk][G](x vo_dim) */
} job;

static void run_item(const job *J, size_t b, size_t h, size_t ci, uint16_t *kr, uint16_t *vr,
                     float *S)
{
    const lowp_gpu_decode_args *a = J->a;
    const lowp_kv_config *cfg = J->cfg;
    const size_t G = J->G, Dq = cfg->qk_dim, Dv = cfg->vo_dim;
    size_t n = lowp_kv_seq_len(a->pt, cfg->page_size, b);
    size_t t0 = ci * J->chunk, t1 = t0 + J->chunk < n ? t0 + J->chunk : n;
    size_t item = (b * J->H + h) * J->nch_max + ci;
    float *o = J->ws_o + item * G * Dv, *m = J->ws_m + item * G, *l = J->ws_l + item * G;
    float qks = lowp_gpu_decode_score_scale(cfg->format, a->sm_scale,
                                            lowp_kvcache_global_scale(a->cache, LOWP_KV_K, h));
    const uint16_t *q = a->q + (b * a->num_q_heads + h * G) * Dq;
    /* Q and K rows are kept in MMA k order (k-step s = 4c + ks at 16 s .. 16 s + 15) and V
     * transposed ([dim][position]), so each MMA call reads 16 contiguous values and no
     * row is permuted more than once. */
    uint16_t qp[LOWP_GPU_DECODE_MAX_GROUP * 512], row[512];
    const int fp4 = cfg->format == LOWP_NVFP4 || cfg->format == LOWP_MXFP4;
    for (size_t r = 0; r < G; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
        for (size_t c = 0; c < Dq / 64; c++)
            for (size_t ks = 0; ks < 4; ks++)
                for (size_t kk = 0; kk < 16; kk++)
                    qp[r * Dq + 16 * (4 * c + ks) + kk] = q[r * Dq + k_dim(fp4, c, ks, kk)];
    }
    memset(o, 0, G * Dv * sizeof *o);
    for (size_t tt = t0; tt < t1; tt += LOWP_GPU_DECODE_TILE) {
        int valid[LOWP_GPU_DECODE_TILE];
        for (size_t j = 0; j < LOWP_GPU_DECODE_TILE; j++) {
            size_t pos = tt + j, page, slot;
            valid[j] = pos < t1;
            if (valid[j]) {
                lowp_kv_locate(a->pt, cfg->page_size, b, pos, &page, &slot, NULL, 0);
                read_row(a->cache, &J->K, LOWP_KV_K, page, slot, h, row);
                for (size_t c = 0; c < Dq / 64; c++)
                    for (size_t ks = 0; ks < 4; ks++)
                        for (size_t kk = 0; kk < 16; kk++)
                            kr[j * Dq + 16 * (4 * c + ks) + kk] = row[k_dim(fp4, c, ks, kk)];
                read_row(a->cache, &J->V, LOWP_KV_V, page, slot, h, row);
                for (size_t d = 0; d < Dv; d++)
                    vr[d * LOWP_GPU_DECODE_TILE + j] = row[d];
            } else {
                memset(kr + j * Dq, 0, Dq * sizeof *kr);
                for (size_t d = 0; d < Dv; d++) /* +0 enters the MMA */
                    vr[d * LOWP_GPU_DECODE_TILE + j] = 0;
            }
        }
        for (size_t r = 0; r < G; r++) {
            const uint16_t *qr = qp + r * Dq;
            float mt = -INFINITY;
            for (size_t j = 0; j < LOWP_GPU_DECODE_TILE; j++) {
                float acc = 0.0f;
                for (size_t st = 0; st < Dq / 16; st++)
                    acc = lowp_mma_dot_add_bf16(qr + 16 * st, kr + j * Dq + 16 * st, 16, acc,
                                                J->mma);
                S[j] = valid[j] ? acc * qks : -INFINITY;
                mt = fmaxf(mt, S[j]);
            }
            float mn = fmaxf(m[r], mt);
            float alpha = mn == -INFINITY ? 1.0f : lowp_exp2_hw(m[r] - mn);
            float p[LOWP_GPU_DECODE_TILE];
            uint16_t pb[LOWP_GPU_DECODE_TILE];
            for (size_t j = 0; j < LOWP_GPU_DECODE_TILE; j++) {
                p[j] = mn == -INFINITY ? 0.0f : lowp_exp2_hw(S[j] - mn);
                pb[j] = lowp_bf16_from_f32(p[j]);
            }
            float L[4];
            for (size_t t = 0; t < 4; t++)
                L[t] = ((p[2 * t] + p[2 * t + 1]) + p[2 * t + 8]) + p[2 * t + 9];
            float tsum = (L[0] + L[1]) + (L[2] + L[3]);
            l[r] = l[r] * alpha + tsum;
            m[r] = mn;
            for (size_t d = 0; d < Dv; d++) {
                o[r * Dv + d] = lowp_mma_dot_add_bf16(pb, vr + d * LOWP_GPU_DECODE_TILE, 16,
                                                      o[r * Dv + d] * alpha, J->mma);
            }
        }
    }
}

static int side_init(side *sd, const lowp_kvcache *c, lowp_kv_which w)
{
    const lowp_kv_config *cfg = lowp_kvcache_config(c);
    size_t bytes;
    sd->f = cfg->format;
    sd->dim = w == LOWP_KV_K ? cfg->qk_dim : cfg->vo_dim;
    sd->codes = lowp_kvcache_cbuffer(c, w, LOWP_KV_CODES, &bytes);
    sd->block = lowp_block_has_scales(cfg->format) ? lowp_block_size(cfg->format) : 0;
    sd->scales = sd->block ? lowp_kvcache_cbuffer(c, w, LOWP_KV_SCALES, &bytes) : NULL;
    return sd->codes == NULL || (sd->block && sd->scales == NULL) ? -1 : 0;
}

int lowp_gpu_decode_emulate(const lowp_gpu_decode_args *a0, uint16_t *out, char *why,
                            size_t why_len)
{
    if (a0 == NULL || a0->cache == NULL || a0->view == NULL || a0->pt == NULL || a0->q == NULL ||
        out == NULL)
        return lowp_why_set(why, why_len,
                            "args, cache, view, page table, q and out must not be NULL");
    lowp_gpu_decode_args A = *a0;
    const lowp_gpu_decode_args *a = &A;
    const lowp_kv_config *cfg = lowp_kvcache_config(a->cache);
    if (lowp_kvcache_check_view(a->cache, a->view, why, why_len) ||
        lowp_kv_page_table_check(a->pt, cfg->num_pages, cfg->page_size, why, why_len) ||
        lowp_gpu_decode_check(cfg, a->num_q_heads, why, why_len))
        return -1;
    if (A.sm_scale == 0.0)
        A.sm_scale = 1.0 / sqrt((double)cfg->qk_dim);
    if (!isfinite(A.sm_scale))
        return lowp_why_set(why, why_len, "sm_scale is not finite");
    size_t B = a->pt->batch, H = cfg->num_heads, G = a->num_q_heads / H, max_len = 0;
    for (size_t b = 0; b < B; b++) {
        size_t n = lowp_kv_seq_len(a->pt, cfg->page_size, b);
        if (n == 0)
            return lowp_why_set(why, why_len,
                                "sequence %zu is empty: a decode needs at least one token", b);
        max_len = n > max_len ? n : max_len;
    }
    size_t chunk = a->chunk_tokens ? a->chunk_tokens
                                   : lowp_gpu_decode_chunk_tokens(B, H, max_len);
    if (chunk % 16)
        return lowp_why_set(why, why_len, "chunk_tokens %zu is not a multiple of 16", chunk);
    job J = {.a = a, .cfg = cfg, .G = G, .H = H, .chunk = chunk,
             .nch_max = (max_len + chunk - 1) / chunk,
             .mma = a->mma ? a->mma : &lowp_mma_sm90_bf16};
    if (side_init(&J.K, a->cache, LOWP_KV_K) || side_init(&J.V, a->cache, LOWP_KV_V))
        return lowp_why_set(why, why_len, "the cache has no buffers");
    size_t n_items = B * H * J.nch_max;
    J.ws_o = malloc(n_items * G * cfg->vo_dim * sizeof(float));
    J.ws_m = malloc(n_items * G * sizeof(float));
    J.ws_l = malloc(n_items * G * sizeof(float));
    int rc = 0;
    if (J.ws_o == NULL || J.ws_m == NULL || J.ws_l == NULL) {
        rc = lowp_why_set(why, why_len, "out of memory for %zu decode work items", n_items);
        goto done;
    }
    int threads = a->threads > 0 ? a->threads : omp_get_max_threads();
#pragma omp parallel num_threads(threads)
    {
        uint16_t *kr = malloc(16 * cfg->qk_dim * sizeof *kr);
        uint16_t *vr = malloc(16 * cfg->vo_dim * sizeof *vr);
        float S[LOWP_GPU_DECODE_TILE];
        int ok = kr != NULL && vr != NULL;
#pragma omp for schedule(dynamic, 1)
        for (size_t it = 0; it < n_items; it++) {
            size_t ci = it % J.nch_max, h = (it / J.nch_max) % H, b = it / J.nch_max / H;
            size_t n = lowp_kv_seq_len(a->pt, cfg->page_size, b);
            if (ok && ci * chunk < n)
                run_item(&J, b, h, ci, kr, vr, S);
        }
        if (!ok) {
#pragma omp atomic write
            rc = -1;
        }
        free(kr);
        free(vr);
    }
    if (rc) {
        lowp_why_set(why, why_len, "out of memory for the emulator's row buffers");
        goto done;
    }
    /* Step 5. The kernel computes w and L in every output thread; they do not depend on
     * the dim, so they are computed once per row here (same operations, same order). */
    float *w = malloc((J.nch_max ? J.nch_max : 1) * sizeof *w);
    if (w == NULL) {
        rc = lowp_why_set(why, why_len, "out of memory for the merge");
        goto done;
    }
    for (size_t b = 0; b < B; b++) {
        size_t n = lowp_kv_seq_len(a->pt, cfg->page_size, b), nch = (n + chunk - 1) / chunk;
        for (size_t h = 0; h < H; h++) {
            float vs = lowp_kvcache_global_scale(a->cache, LOWP_KV_V, h) *
                       lowp_gpu_decode_unscale(cfg->format);
            size_t item0 = (b * H + h) * J.nch_max;
            for (size_t r = 0; r < G; r++) {
                float M = -INFINITY, L = 0.0f;
                for (size_t c = 0; c < nch; c++)
                    M = fmaxf(M, J.ws_m[(item0 + c) * G + r]);
                for (size_t c = 0; c < nch; c++) {
                    w[c] = lowp_exp2_hw(J.ws_m[(item0 + c) * G + r] - M);
                    L = L + J.ws_l[(item0 + c) * G + r] * w[c];
                }
                for (size_t d = 0; d < cfg->vo_dim; d++) {
                    float O = 0.0f;
                    for (size_t c = 0; c < nch; c++)
                        O = O + J.ws_o[((item0 + c) * G + r) * cfg->vo_dim + d] * w[c];
                    out[((b * a->num_q_heads) + h * G + r) * cfg->vo_dim + d] =
                        lowp_bf16_from_f32((O / L) * vs);
                }
            }
        }
    }
    free(w);
done:
    free(J.ws_o);
    free(J.ws_m);
    free(J.ws_l);
    return rc;
}
