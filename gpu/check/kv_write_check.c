/* gpu/check/kv_write_check.c: lowp_gpu_kv_write_check, the byte-for-byte check of the GPU
 * quantize-on-write kernels (lowp/gpu_kvcache.h) against lowp's CPU cache writer.
 *
 *   lowp_gpu_kv_write_check REPORT.md [--quick] [--cases N] [--host-only] [--seed S]
 *                           [--threads N]
 *
 * For every format (nvfp4 mxfp4 mxfp8 fp8_e4m3 fp8_e5m2 bf16) and every valid variant of
 * it (recipe x LOWP_BLOCK_SCALE_UP where it matters x layout x K and V scale order x
 * scale granularity, as lowp_kv_config_check allows), N random cases per format (default
 * 100000, --quick 3000), round-robin over the variants. A case is a small cache (1..20
 * heads, dims multiples of the block size up to 512, qk_dim != vo_dim sometimes, page size
 * 1..64, a few pages), global scales (1.0, random, tiny down to subnormal, huge up to
 * FLT_MAX, amax-calibrated; per tensor or per head), a shuffled slot mapping with -1
 * padding, and BF16 or FP8 E4M3 inputs drawn per 16/32-element segment from a mixture:
 * Gaussian at magnitudes from 2^-133 to 2^127 (so E4M3 block scales go subnormal and
 * zero), all-zero blocks (+-0), single outliers, NaN and Inf injected, BF16 subnormals,
 * raw random bit patterns, and values on the E2M1 grid (rounding ties).
 *
 * Each case: the CPU cache (lowp_kvcache_create, set scales, lowp_kvcache_write per
 * token with the binary32 value of each input) is the reference. The GPU writes the same
 * tokens with lowp_gpu_kv_write into a poisoned (0xFF) cache; all four buffers come back
 * and are compared byte for byte, untouched poison included. The same write run on the
 * CPU through the kernels' own code (lowp_gpu_kv_write_emulate) is compared too: when
 * only the GPU differs, the difference is device arithmetic; when both do, it is logic.
 * Bulk cases run in batches: one device arena holds many small caches (lowp_gpu_kvcache
 * views into it), one upload, one kernel pair per case, one download. API cases
 * (a few per variant) go through lowp_gpu_kvcache_create / upload (of a CPU cache that
 * already holds tokens, so some slots are overwritten) / write / download. Adversarial
 * host-side refusals (NULL pointers, slots out of range or repeated, host pointers,
 * inconsistent configs, bad global scales, mismatched upload/download) must each give a
 * message and leave the cache unchanged (nothing launched).
 *
 * Prints one line per format and writes a Markdown report: per-variant counts, the
 * refusal messages, and the first mismatches (format, recipe, layout, buffer, byte
 * offset with its page/slot/head/block, CPU byte, GPU byte, emulated byte, global scale
 * and the block's input values in hex). Seeds: --seed or LOWP_SEED, printed; a case is a
 * pure function of (seed, format, case index).
 * Exit status: 0 no mismatch and every refusal as expected, 1 otherwise, 2 bad usage,
 * 3 a CUDA error, 77 no GPU (without --host-only, which runs only the emulation check). */
#define _POSIX_C_SOURCE 200809L
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include <cuda_runtime_api.h>

#include "cli_parse.h"

#include "lowp/bits.h"
#include "lowp/block.h"
#include "lowp/cases.h"
#include "lowp/format.h"
#include "lowp/gpu_kvcache.h"
#include "lowp/kvcache.h"

#define PROG "lowp_gpu_kv_write_check"
#define NFMT 6
#define MAX_FIRST 12    /* mismatches described in detail */
#define ALIGN 256u
#define BATCH_CASES 2048

static const lowp_block_format formats[NFMT] = {LOWP_NVFP4, LOWP_MXFP4, LOWP_MXFP8,
                                                LOWP_FP8_E4M3, LOWP_FP8_E5M2, LOWP_BF16_PASS};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ------------------------------------------------------------------ random numbers */

static uint32_t rnd_below(uint64_t *s, uint32_t n) { return (uint32_t)(lowp_splitmix64(s) % n); }
static double rnd_unit(uint64_t *s) { return (double)(lowp_splitmix64(s) >> 11) * 0x1p-53; } /* [0,1) */
static double rnd_range(uint64_t *s, double lo, double hi) { return lo + (hi - lo) * rnd_unit(s); }
/* Approximately standard normal (Irwin-Hall of four 16-bit uniforms, |x| < 3.47): cheap,
 * and tails come from the injected outliers anyway. */
static double rnd_gauss(uint64_t *s)
{
    uint64_t r = lowp_splitmix64(s);
    double sum = (double)(r & 0xffff) + (double)((r >> 16) & 0xffff) + (double)((r >> 32) & 0xffff) +
                 (double)(r >> 48);
    return (sum * 0x1p-16 - 2.0) * 1.7320508075688772;
}

/* ------------------------------------------------------------------ variants */

typedef struct variant {
    lowp_block_format f;
    lowp_recipe r;
    unsigned flags;
    lowp_kv_layout layout;
    lowp_kv_sf_order ko, vo;
    lowp_kv_scale_gran gran;
    /* results */
    uint64_t cases, tokens, bytes, gpu_bad, emu_bad, api_cases, api_bad;
} variant;

static variant *variants;
static size_t n_variants;
static size_t fmt_first[NFMT], fmt_count[NFMT]; /* variants of each format */

static void add_variant(lowp_block_format f, lowp_recipe r, unsigned flags, lowp_kv_layout l,
                        lowp_kv_sf_order ko, lowp_kv_sf_order vo, lowp_kv_scale_gran g)
{
    variant v;
    memset(&v, 0, sizeof v);
    v.f = f;
    v.r = r;
    v.flags = flags;
    v.layout = l;
    v.ko = ko;
    v.vo = vo;
    v.gran = g;
    variants[n_variants++] = v;
}

static void build_variants(void)
{
    variants = calloc(512, sizeof *variants);
    if (!variants) {
        fprintf(stderr, PROG ": out of memory\n");
        exit(3);
    }
    for (int fi = 0; fi < NFMT; fi++) {
        lowp_block_format f = formats[fi];
        fmt_first[fi] = n_variants;
        for (int r = 0; r < LOWP_RECIPE_COUNT; r++) {
            lowp_kv_config rc = lowp_kv_config_default(f, 1, 1, 1, 16, 16);
            rc.recipe = (lowp_recipe)r;
            if (lowp_recipe_check(f, (lowp_recipe)r, NULL, 0) || lowp_gpu_kv_recipe_check(&rc, NULL, 0))
                continue;
            /* LOWP_BLOCK_SCALE_UP changes exact and modelopt; elsewhere it is ignored, so
             * the flagged variant also checks that it is ignored on the GPU (NVFP4 only) */
            int nflags = f == LOWP_NVFP4 ? 2 : 1;
            int norders = f == LOWP_NVFP4 ? 2 : 1;
            for (int fl = 0; fl < nflags; fl++)
                for (int l = 0; l < 2; l++)
                    for (int ko = 0; ko < norders; ko++)
                        for (int vo = 0; vo < norders; vo++)
                            for (int g = 0; g < 2; g++)
                                add_variant(f, (lowp_recipe)r, fl ? LOWP_BLOCK_SCALE_UP : 0u,
                                            (lowp_kv_layout)l, (lowp_kv_sf_order)ko,
                                            (lowp_kv_sf_order)vo, (lowp_kv_scale_gran)g);
        }
        fmt_count[fi] = n_variants - fmt_first[fi];
    }
}

/* ------------------------------------------------------------------ cases */

typedef struct kcase {
    size_t variant;
    lowp_kv_config cfg;
    lowp_gpu_kv_input in;
    size_t n_tokens; /* including padding (-1) entries */
    size_t n_pad;    /* how many of them are padding */
    size_t n_global;
    /* staging (input) offsets: K, V, slots, K and V global scales */
    size_t off_k, off_v, off_slots, off_kg, off_vg, in_bytes;
    /* output offsets (arena): k codes, k scales, v codes, v scales */
    size_t off_out[4], bytes_out[4], out_bytes;
    lowp_kvcache *ref; /* CPU writer */
    lowp_kvcache *emu; /* the kernels' code run on the CPU (lowp_gpu_kv_write_emulate) */
    int emu_bad;       /* emulation differed from ref */
    int err;           /* generation/reference failure (message in errmsg) */
    char errmsg[400];
    uint64_t seed;
} kcase;

static size_t align_up(size_t x) { return (x + ALIGN - 1) / ALIGN * ALIGN; }

static const size_t head_choices[] = {1, 2, 3, 5, 8, 12, 20};
static const size_t page_choices[] = {1, 2, 4, 16, 64};

/* A dim: a multiple of gran up to 512, mostly small. Element-wise formats (gran 1) get
 * any dim from 1 to 64 (odd ones too) or multiples of 16 up to 512. */
static size_t draw_dim(uint64_t *s, size_t gran)
{
    uint32_t u = rnd_below(s, 100);
    if (gran == 1) {
        if (u < 30)
            return 1 + rnd_below(s, 64);
        if (u < 85)
            return 16 * (1 + rnd_below(s, 8));
        return 16 * (1 + rnd_below(s, 32));
    }
    size_t maxk = 512 / gran;
    size_t k;
    if (u < 50)
        k = 1 + rnd_below(s, (uint32_t)(maxk < 4 ? maxk : 4));
    else if (u < 85)
        k = 1 + rnd_below(s, (uint32_t)(maxk < 16 ? maxk : 16));
    else
        k = 1 + rnd_below(s, (uint32_t)maxk);
    return k * gran;
}

/* Draw the case's shape (everything but the inputs). */
static void draw_shape(kcase *c, uint64_t *s)
{
    const variant *v = &variants[c->variant];
    lowp_kv_config cfg = lowp_kv_config_default(v->f, 1, 1, 1, 16, 16);
    cfg.recipe = v->r;
    /* the device's NaNs are canonical: the CPU writer models that with NAN_CANONICAL */
    cfg.quant_flags = v->flags | LOWP_BLOCK_NAN_CANONICAL;
    cfg.layout = v->layout;
    cfg.k_sf_order = v->ko;
    cfg.v_sf_order = v->vo;
    cfg.scale_gran = v->gran;
    size_t bs = lowp_block_size(v->f);
    cfg.num_heads = head_choices[rnd_below(s, 7)];
    size_t gk = v->ko == LOWP_KV_SF_INTERLEAVE4 ? 64 : bs;
    size_t gv = v->vo == LOWP_KV_SF_INTERLEAVE4 ? 64 : bs;
    cfg.qk_dim = draw_dim(s, gk);
    if (rnd_below(s, 100) < 60 && cfg.qk_dim % gv == 0)
        cfg.vo_dim = cfg.qk_dim;
    else
        cfg.vo_dim = draw_dim(s, gv);
    int inter = v->ko == LOWP_KV_SF_INTERLEAVE4 || v->vo == LOWP_KV_SF_INTERLEAVE4;
    cfg.page_size = inter ? page_choices[2 + rnd_below(s, 3)] : page_choices[rnd_below(s, 5)];
    /* pages: up to 3, within a byte budget so caches stay small */
    size_t row = lowp_block_code_bytes(v->f, cfg.qk_dim) + lowp_block_code_bytes(v->f, cfg.vo_dim);
    size_t page_bytes = cfg.page_size * cfg.num_heads * row;
    size_t maxp = page_bytes ? (size_t)(256 * 1024) / page_bytes : 3;
    maxp = maxp < 1 ? 1 : maxp > 3 ? 3 : maxp;
    cfg.num_pages = 1 + rnd_below(s, (uint32_t)maxp);
    c->cfg = cfg;
    c->in = rnd_below(s, 100) < 70 ? LOWP_GPU_IN_BF16 : LOWP_GPU_IN_E4M3;
    size_t cap = cfg.num_pages * cfg.page_size;
    size_t real = 1 + rnd_below(s, (uint32_t)(cap < 8 ? cap : 8));
    c->n_pad = rnd_below(s, 4) == 0 ? 1 + rnd_below(s, 3) : 0;
    c->n_tokens = real + c->n_pad;
    c->n_global = cfg.scale_gran == LOWP_KV_SCALE_HEAD ? cfg.num_heads : 1;
}

/* Staging and arena layout of a case: offsets relative to the case's own start. */
static void layout_case(kcase *c)
{
    size_t es = c->in == LOWP_GPU_IN_BF16 ? 2 : 1, H = c->cfg.num_heads;
    size_t o = 0;
    c->off_k = o;
    o = align_up(o + c->n_tokens * H * c->cfg.qk_dim * es);
    c->off_v = o;
    o = align_up(o + c->n_tokens * H * c->cfg.vo_dim * es);
    c->off_slots = o;
    o = align_up(o + c->n_tokens * sizeof(int64_t));
    c->off_kg = o;
    o = align_up(o + c->n_global * sizeof(float));
    c->off_vg = o;
    o = align_up(o + c->n_global * sizeof(float));
    c->in_bytes = o;
    size_t rows = c->cfg.num_pages * c->cfg.page_size * H;
    c->bytes_out[0] = rows * lowp_kv_row_code_bytes(&c->cfg, LOWP_KV_K);
    c->bytes_out[1] = rows * lowp_kv_row_scales(&c->cfg, LOWP_KV_K);
    c->bytes_out[2] = rows * lowp_kv_row_code_bytes(&c->cfg, LOWP_KV_V);
    c->bytes_out[3] = rows * lowp_kv_row_scales(&c->cfg, LOWP_KV_V);
    o = 0;
    for (int i = 0; i < 4; i++) {
        c->off_out[i] = o;
        o = align_up(o + c->bytes_out[i]);
    }
    c->out_bytes = o;
}

/* Codecs the generator uses to make valid inputs (read-only after init: thread-safe). */
static lowp_codec codec_bf16, codec_e4m3;

/* Fill n input codes (BF16 bits or E4M3 codes) of one row. */
static void gen_row(uint64_t *s, lowp_gpu_kv_input in, size_t n, size_t seg, void *dst)
{
    /* row magnitude */
    double lg;
    uint32_t u = rnd_below(s, 100);
    if (u < 70)
        lg = rnd_range(s, -12, 12);
    else if (u < 80)
        lg = rnd_range(s, -40, -15); /* E4M3 block scales subnormal or zero at g = 1 */
    else if (u < 90)
        lg = rnd_range(s, -133, -100);
    else
        lg = rnd_range(s, 12, 127);
    double mag = ldexp(1.0, (int)floor(lg)) * exp2(lg - floor(lg));
    static const float grid[] = {0.0f, 0.25f, 0.5f, 0.75f, 1.0f, 1.25f, 1.5f, 1.75f, 2.0f,
                                 2.5f, 3.0f, 3.5f, 4.0f, 5.0f, 6.0f, 7.0f};
    for (size_t i0 = 0; i0 < n; i0 += seg) {
        size_t len = n - i0 < seg ? n - i0 : seg;
        uint32_t mode = rnd_below(s, 100);
        float vals[32];
        int raw = 0;
        uint16_t rawc[32];
        if (mode < 75) /* the modes that start from a Gaussian */
            for (size_t i = 0; i < len; i++)
                vals[i] = (float)(rnd_gauss(s) * mag);
        if (mode < 45) {
            /* Gaussian at the row magnitude */
        } else if (mode < 53) { /* all zero, either sign */
            for (size_t i = 0; i < len; i++)
                vals[i] = rnd_below(s, 2) ? -0.0f : 0.0f;
        } else if (mode < 63) { /* one outlier */
            size_t j = rnd_below(s, (uint32_t)len);
            vals[j] = (float)((double)vals[j] * ldexp(1.0, 3 + (int)rnd_below(s, 12)));
        } else if (mode < 69) { /* NaN */
            vals[rnd_below(s, (uint32_t)len)] = rnd_below(s, 2) ? NAN : -NAN;
            if (rnd_below(s, 3) == 0)
                vals[rnd_below(s, (uint32_t)len)] = NAN;
        } else if (mode < 75) { /* Inf */
            vals[rnd_below(s, (uint32_t)len)] = rnd_below(s, 2) ? INFINITY : -INFINITY;
        } else if (mode < 83) { /* raw random codes */
            raw = 1;
            for (size_t i = 0; i < len; i++)
                rawc[i] = (uint16_t)(in == LOWP_GPU_IN_BF16 ? lowp_splitmix64(s) & 0xffffu : lowp_splitmix64(s) & 0xffu);
        } else if (mode < 90) { /* BF16 subnormals and tiny values */
            for (size_t i = 0; i < len; i++)
                vals[i] = (float)(rnd_gauss(s) * ldexp(1.0, -(int)(120 + rnd_below(s, 30))));
        } else { /* the E2M1 grid times one power of two: ties under power-of-two scales */
            int k = (int)rnd_below(s, 40) - 20;
            for (size_t i = 0; i < len; i++)
                vals[i] = ldexpf(grid[rnd_below(s, 16)], k) * (rnd_below(s, 2) ? -1.0f : 1.0f);
        }
        for (size_t i = 0; i < len; i++) {
            if (in == LOWP_GPU_IN_BF16) {
                uint16_t c = raw ? rawc[i] : lowp_encode_f32(&codec_bf16, vals[i]);
                ((uint16_t *)dst)[i0 + i] = c;
            } else {
                uint8_t c = raw ? (uint8_t)rawc[i] : (uint8_t)lowp_encode_f32(&codec_e4m3, vals[i]);
                ((uint8_t *)dst)[i0 + i] = c;
            }
        }
    }
}

static float e4m3_value[256]; /* lowp_decode_f32(LOWP_E4M3, code), filled in main */

/* The binary32 value of input element i (what the CPU writer is given). */
static float input_value(lowp_gpu_kv_input in, const void *x, size_t i)
{
    if (in == LOWP_GPU_IN_BF16)
        return lowp_f32_from_bits((uint32_t)((const uint16_t *)x)[i] << 16);
    return e4m3_value[((const uint8_t *)x)[i]];
}

/* A global scale: 1.0, random, tiny, huge, or calibrated from the side's amax. */
static float draw_scale(uint64_t *s, const kcase *c, float amax)
{
    if (!lowp_block_has_global_scale(c->cfg.format))
        return 1.0f;
    uint32_t u = rnd_below(s, 100);
    static const float tiny[] = {0x1p-126f, 1e-30f, 0x1p-140f, 0x1p-149f, 0x1p-128f, 1e-20f};
    static const float huge[] = {1e30f, 0x1p100f, FLT_MAX, 3e38f, 0x1p127f, 1e20f};
    if (u < 35)
        return 1.0f;
    if (u < 70)
        return (float)exp2(rnd_range(s, -24, 24));
    if (u < 80)
        return tiny[rnd_below(s, 6)];
    if (u < 90)
        return huge[rnd_below(s, 6)];
    lowp_global_scale gs = lowp_recipe_global_scale(c->cfg.format, c->cfg.recipe, amax);
    float g = gs.dec;
    return (isfinite(g) && g > 0.0f) ? g : 1.0f;
}

/* Generate inputs, slots and scales into stage (the case's staging bytes), build the
 * CPU reference and the emulated cache, compare those two. */
static void make_case(kcase *c, uint8_t *stage, float **fbuf, size_t *fcap)
{
    uint64_t s = c->seed ^ UINT64_C(0x5bd1e9955bd1e995);
    lowp_splitmix64(&s);
    const lowp_kv_config *cfg = &c->cfg;
    size_t H = cfg->num_heads, n = c->n_tokens;
    size_t seg = lowp_block_size(cfg->format) > 16 ? lowp_block_size(cfg->format) : 16;
    void *kx = stage + c->off_k, *vx = stage + c->off_v;
    size_t es = c->in == LOWP_GPU_IN_BF16 ? 2 : 1;
    for (size_t t = 0; t < n; t++)
        for (size_t h = 0; h < H; h++) {
            gen_row(&s, c->in, cfg->qk_dim, seg, (uint8_t *)kx + ((t * H + h) * cfg->qk_dim) * es);
            gen_row(&s, c->in, cfg->vo_dim, seg, (uint8_t *)vx + ((t * H + h) * cfg->vo_dim) * es);
        }
    /* slots: n_pad positions are -1 (padding); the others get distinct slots, a random
     * sample of the capacity in random order (partial Fisher-Yates); real <= cap */
    int64_t *slots = (int64_t *)(stage + c->off_slots);
    size_t cap = cfg->num_pages * cfg->page_size; /* <= 3 * 64 */
    int64_t perm[3 * 64];
    for (size_t i = 0; i < cap; i++)
        perm[i] = (int64_t)i;
    for (size_t t = 0; t < n; t++)
        slots[t] = 0;
    for (size_t k = 0; k < c->n_pad;) {
        size_t t = rnd_below(&s, (uint32_t)n);
        if (slots[t] == 0) {
            slots[t] = -1;
            k++;
        }
    }
    size_t real = 0;
    for (size_t t = 0; t < n; t++) {
        if (slots[t] < 0)
            continue;
        size_t j = real + rnd_below(&s, (uint32_t)(cap - real));
        int64_t tmp = perm[real];
        perm[real] = perm[j];
        perm[j] = tmp;
        slots[t] = perm[real++];
    }
    /* binary32 inputs for the CPU writer */
    size_t nk = n * H * cfg->qk_dim, nv = n * H * cfg->vo_dim;
    if (*fcap < nk + nv) {
        free(*fbuf);
        *fbuf = malloc((nk + nv) * sizeof(float));
        *fcap = *fbuf ? nk + nv : 0;
        if (!*fbuf) {
            c->err = 1;
            snprintf(c->errmsg, sizeof c->errmsg, "out of host memory");
            return;
        }
    }
    float *kf = *fbuf, *vf = *fbuf + nk;
    float kamax = 0.0f, vamax = 0.0f;
    for (size_t i = 0; i < nk; i++) {
        kf[i] = input_value(c->in, kx, i);
        if (isfinite(kf[i]) && fabsf(kf[i]) > kamax)
            kamax = fabsf(kf[i]);
    }
    for (size_t i = 0; i < nv; i++) {
        vf[i] = input_value(c->in, vx, i);
        if (isfinite(vf[i]) && fabsf(vf[i]) > vamax)
            vamax = fabsf(vf[i]);
    }
    float *kg = (float *)(stage + c->off_kg), *vg = (float *)(stage + c->off_vg);
    int same = rnd_below(&s, 3) == 0; /* per head: sometimes all equal */
    for (size_t i = 0; i < c->n_global; i++) {
        kg[i] = (same && i) ? kg[0] : draw_scale(&s, c, kamax);
        vg[i] = (same && i) ? vg[0] : draw_scale(&s, c, vamax);
    }
    /* the CPU reference */
    char why[256];
    if (lowp_kvcache_create(cfg, &c->ref, why, sizeof why) ||
        lowp_kvcache_set_global_scales(c->ref, kg, vg, c->n_global, why, sizeof why)) {
        c->err = 1;
        snprintf(c->errmsg, sizeof c->errmsg, "CPU cache: %s", why);
        return;
    }
    for (size_t t = 0; t < n; t++) {
        if (slots[t] < 0)
            continue;
        size_t page = (size_t)slots[t] / cfg->page_size, sl = (size_t)slots[t] % cfg->page_size;
        if (lowp_kvcache_write(c->ref, page, sl, kf + t * H * cfg->qk_dim, vf + t * H * cfg->vo_dim,
                               NULL, NULL, why, sizeof why)) {
            c->err = 1;
            snprintf(c->errmsg, sizeof c->errmsg, "lowp_kvcache_write: %s", why);
            return;
        }
    }
}

/* The emulated write (the kernels' code on the CPU) into c->emu; 0, or -1 on an error. */
static int emulate_case(kcase *c, const uint8_t *stage)
{
    char why[256];
    const float *kg = (const float *)(stage + c->off_kg), *vg = (const float *)(stage + c->off_vg);
    if (lowp_kvcache_create(&c->cfg, &c->emu, why, sizeof why) ||
        lowp_kvcache_set_global_scales(c->emu, kg, vg, c->n_global, why, sizeof why) ||
        lowp_gpu_kv_write_emulate(c->emu, c->in, stage + c->off_k, stage + c->off_v,
                                  (const int64_t *)(stage + c->off_slots), c->n_tokens, why,
                                  sizeof why)) {
        c->err = 1;
        snprintf(c->errmsg, sizeof c->errmsg, "emulation: %s", why);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ mismatch reports */

typedef struct first_mm {
    char text[2048];
} first_mm;
static first_mm firsts[MAX_FIRST];
static int n_firsts;
static uint64_t n_mm_total;

static const char *const part_names[4] = {"k_codes", "k_scales", "v_codes", "v_scales"};

/* Describe byte off of buffer part (0..3) of case c: where it is, which token wrote it,
 * the bytes, the global scale and the block's inputs. emu may be NULL. */
static void describe(const kcase *c, const uint8_t *stage, int part, size_t off, uint8_t cpu,
                     const char *other_name, uint8_t other, int emu, const char *what, char *out,
                     size_t len)
{
    const lowp_kv_config *cfg = &c->cfg;
    int w = part / 2, isscale = part % 2;
    size_t H = cfg->num_heads, P = cfg->page_size;
    size_t dim = w ? cfg->vo_dim : cfg->qk_dim;
    size_t bs = lowp_block_size(cfg->format);
    size_t rb = lowp_kv_row_code_bytes(cfg, (lowp_kv_which)w);
    size_t S = lowp_kv_row_scales(cfg, (lowp_kv_which)w);
    size_t unit = isscale ? S : rb;
    size_t row = off / unit, in_row = off % unit;
    size_t page, slot, head;
    if (cfg->layout == LOWP_KV_NHD) {
        head = row % H;
        slot = (row / H) % P;
        page = row / H / P;
    } else {
        slot = row % P;
        head = (row / P) % H;
        page = row / P / H;
    }
    size_t blk, elem0, nelem;
    if (isscale) {
        size_t t = slot, sidx = in_row;
        if ((w ? cfg->v_sf_order : cfg->k_sf_order) == LOWP_KV_SF_INTERLEAVE4)
            lowp_kv_sf_deinterleave(slot, in_row, S, &t, &sidx);
        slot = t;
        blk = sidx;
        elem0 = blk * bs;
        nelem = bs;
    } else {
        size_t e = lowp_block_code_bytes(cfg->format, 2) == 1 ? 2 * in_row /* 4-bit */
                   : lowp_block_code_bytes(cfg->format, 1) == 2 ? in_row / 2
                                                                 : in_row;
        blk = e / bs;
        elem0 = bs > 1 ? blk * bs : (e >= 4 ? e - 4 : 0);
        nelem = bs > 1 ? bs : 8;
        if (elem0 + nelem > dim)
            nelem = dim - elem0;
    }
    const int64_t *slots = (const int64_t *)(stage + c->off_slots);
    size_t tok = c->n_tokens;
    for (size_t t = 0; t < c->n_tokens; t++)
        if (slots[t] == (int64_t)(page * P + slot))
            tok = t;
    const variant *v = &variants[c->variant];
    const float *g = (const float *)(stage + (w ? c->off_vg : c->off_kg));
    float gh = g[c->n_global == 1 ? 0 : head];
    int n = snprintf(out, len,
                     "%s: %s recipe %s flags %u %s k_sf %s v_sf %s scales per %s, input %s, "
                     "heads %zu qk_dim %zu vo_dim %zu page_size %zu pages %zu, case seed 0x%016llx\n"
                     "  %s byte offset %zu (page %zu slot %zu head %zu, %s %zu): CPU 0x%02x %s 0x%02x",
                     what, lowp_block_format_name(v->f), lowp_recipe_name(v->r), v->flags,
                     lowp_kv_layout_name(v->layout), lowp_kv_sf_order_name(v->ko),
                     lowp_kv_sf_order_name(v->vo), lowp_kv_scale_gran_name(v->gran),
                     lowp_gpu_kv_input_name(c->in), H, cfg->qk_dim, cfg->vo_dim, P, cfg->num_pages,
                     (unsigned long long)c->seed, part_names[part], off, page, slot, head,
                     isscale ? "block" : "byte in row", isscale ? blk : in_row, cpu, other_name, other);
    if (n < 0 || (size_t)n >= len)
        return;
    if (emu >= 0)
        n += snprintf(out + n, len - (size_t)n, " emulated 0x%02x", emu);
    if ((size_t)n >= len)
        return;
    if (tok == c->n_tokens) {
        snprintf(out + n, len - (size_t)n, "\n  no token was written to this slot (poison expected)");
        return;
    }
    n += snprintf(out + n, len - (size_t)n,
                  "\n  token %zu (slot %lld), global scale %a (%.9g), elements %zu..%zu in %s:",
                  tok, (long long)slots[tok], (double)gh, (double)gh, elem0, elem0 + nelem - 1,
                  lowp_gpu_kv_input_name(c->in));
    const uint8_t *x = stage + (w ? c->off_v : c->off_k);
    size_t es = c->in == LOWP_GPU_IN_BF16 ? 2 : 1;
    size_t base = (tok * H + head) * dim;
    for (size_t i = 0; i < nelem && (size_t)n < len; i++) {
        size_t k = base + elem0 + i;
        if (es == 2)
            n += snprintf(out + n, len - (size_t)n, " %04x", ((const uint16_t *)x)[k]);
        else
            n += snprintf(out + n, len - (size_t)n, " %02x", x[k]);
    }
}

/* Compare buffers of case c with its reference: the GPU's (out, NULL to skip) and the
 * emulated cache's. Counts differing GPU bytes into *gpu_diffs, sets c->emu_bad, and
 * records the first differing byte of each buffer (at most MAX_FIRST overall). */
static void compare_case(kcase *c, const uint8_t *stage, const uint8_t *out, uint64_t *gpu_diffs)
{
    uint64_t diffs = 0;
    for (int part = 0; part < 4; part++) {
        size_t bytes, ebytes;
        const uint8_t *x = lowp_kvcache_cbuffer(c->ref, (lowp_kv_which)(part / 2),
                                                (lowp_kv_part)(part % 2), &bytes);
        const uint8_t *e = lowp_kvcache_cbuffer(c->emu, (lowp_kv_which)(part / 2),
                                                (lowp_kv_part)(part % 2), &ebytes);
        if (bytes == 0)
            continue;
        int ebad = memcmp(x, e, bytes) != 0;
        c->emu_bad |= ebad;
        const uint8_t *y = out ? out + c->off_out[part] : NULL;
        int gbad = y != NULL && memcmp(x, y, bytes) != 0;
        if (!ebad && !gbad)
            continue;
        size_t first = bytes;
        for (size_t i = 0; i < bytes; i++) {
            int d = y != NULL ? x[i] != y[i] : x[i] != e[i];
            if (d && first == bytes)
                first = i;
            if (y != NULL)
                diffs += x[i] != y[i];
        }
        int record = 0;
#pragma omp critical(kvw_firsts)
        {
            if (n_firsts < MAX_FIRST)
                record = n_firsts++ + 1;
        }
        if (record && y != NULL)
            describe(c, stage, part, first, x[first], "GPU", y[first], e[first],
                     ebad ? "GPU differs from CPU (the emulation differs too: logic)"
                          : "GPU differs from CPU (the emulation matches: device arithmetic)",
                     firsts[record - 1].text, sizeof firsts[record - 1].text);
        else if (record)
            describe(c, stage, part, first, x[first], "emulated", e[first], -1,
                     "the kernels' code run on the CPU differs from the CPU writer",
                     firsts[record - 1].text, sizeof firsts[record - 1].text);
    }
    *gpu_diffs = diffs;
}

/* ------------------------------------------------------------------ refusal tests */

typedef struct refusal {
    char name[128];
    int ok;
    char msg[300];
} refusal;
static refusal refusals[64];
static int n_refusals;

static void add_refusal(const char *name, int ok, const char *msg)
{
    if (n_refusals >= 64)
        return;
    refusal *r = &refusals[n_refusals++];
    snprintf(r->name, sizeof r->name, "%s", name);
    r->ok = ok;
    snprintf(r->msg, sizeof r->msg, "%s", msg);
}

/* Expect rc == -1 with a nonempty message. */
static void expect_refused(const char *name, int rc, const char *why)
{
    add_refusal(name, rc == -1 && why[0] != 0, rc == -1 ? why : "ACCEPTED (expected a refusal)");
}

#define CUDA_OR_DIE(call)                                                                   \
    do {                                                                                    \
        cudaError_t e_ = (call);                                                            \
        if (e_ != cudaSuccess) {                                                            \
            fprintf(stderr, PROG ": %s failed: %s (%s) [%s:%d]\n", #call, cudaGetErrorName(e_), \
                    cudaGetErrorString(e_), __FILE__, __LINE__);                            \
            exit(3);                                                                        \
        }                                                                                   \
    } while (0)

/* 1 if every byte of the GPU cache equals the CPU cache's (downloaded into scratch). */
static int gpu_equals_cpu(const lowp_gpu_kvcache *g, const lowp_kvcache *cpu, char *why, size_t len)
{
    lowp_kvcache *d = NULL;
    if (lowp_kvcache_create(lowp_kvcache_config(cpu), &d, why, len))
        return 0;
    int eq = lowp_gpu_kvcache_download(g, d, why, len) == 0;
    for (int w = 0; w < 2 && eq; w++)
        for (int p = 0; p < 2 && eq; p++) {
            size_t b1, b2;
            const uint8_t *x = lowp_kvcache_cbuffer(cpu, (lowp_kv_which)w, (lowp_kv_part)p, &b1);
            const uint8_t *y = lowp_kvcache_cbuffer(d, (lowp_kv_which)w, (lowp_kv_part)p, &b2);
            eq = b1 == b2 && (b1 == 0 || memcmp(x, y, b1) == 0);
            if (!eq)
                snprintf(why, len, "%s %s bytes differ", w ? "v" : "k", p ? "scales" : "codes");
        }
    for (int w = 0; w < 2 && eq; w++)
        for (size_t h = 0; h < lowp_kvcache_config(cpu)->num_heads && eq; h++)
            if (lowp_f32_bits(lowp_kvcache_global_scale(cpu, (lowp_kv_which)w, h)) !=
                lowp_f32_bits(lowp_kvcache_global_scale(d, (lowp_kv_which)w, h))) {
                eq = 0;
                snprintf(why, len, "%s global scale of head %zu differs", w ? "v" : "k", h);
            }
    lowp_kvcache_destroy(d);
    return eq;
}

/* Record whether the GPU cache still equals the CPU cache. */
static void expect_equal(const char *name, const lowp_gpu_kvcache *g, const lowp_kvcache *cpu,
                         const char *okmsg)
{
    char why[300] = "";
    int eq = gpu_equals_cpu(g, cpu, why, sizeof why);
    add_refusal(name, eq, eq ? okmsg : why);
}

static void run_refusals(void)
{
    char why[300];
    lowp_kv_config cfg = lowp_kv_config_default(LOWP_NVFP4, 2, 4, 2, 64, 64);
    cfg.v_sf_order = LOWP_KV_SF_INTERLEAVE4;
    lowp_gpu_kvcache *g = NULL;
    lowp_kvcache *fresh = NULL;
    if (lowp_gpu_kvcache_create(&cfg, &g, why, sizeof why) ||
        lowp_kvcache_create(&cfg, &fresh, why, sizeof why)) {
        add_refusal("setup: create a GPU and a CPU cache", 0, why);
        lowp_gpu_kvcache_destroy(g);
        lowp_kvcache_destroy(fresh);
        return;
    }
    expect_equal("fresh GPU cache equals a fresh CPU cache (0xFF poison, scales 1.0)", g, fresh,
                 "identical");
    size_t n = 3, H = cfg.num_heads;
    uint16_t *kd = NULL, *vd = NULL;
    int64_t *sd = NULL;
    CUDA_OR_DIE(cudaMalloc((void **)&kd, n * H * 64 * 2));
    CUDA_OR_DIE(cudaMalloc((void **)&vd, n * H * 64 * 2));
    CUDA_OR_DIE(cudaMalloc((void **)&sd, n * sizeof(int64_t)));
    CUDA_OR_DIE(cudaMemset(kd, 0x3f, n * H * 64 * 2));
    CUDA_OR_DIE(cudaMemset(vd, 0x3f, n * H * 64 * 2));
    int64_t ok_slots[3] = {0, 5, 7};
    CUDA_OR_DIE(cudaMemcpy(sd, ok_slots, sizeof ok_slots, cudaMemcpyHostToDevice));
    uint16_t host_k[3 * 2 * 64];
    memset(host_k, 0, sizeof host_k);

    why[0] = 0;
    expect_refused("write: cache NULL",
                   lowp_gpu_kv_write(NULL, LOWP_GPU_IN_BF16, kd, vd, sd, ok_slots, n, 0, why, sizeof why), why);
    why[0] = 0;
    expect_refused("write: k_dev NULL",
                   lowp_gpu_kv_write(g, LOWP_GPU_IN_BF16, NULL, vd, sd, ok_slots, n, 0, why, sizeof why), why);
    why[0] = 0;
    expect_refused("write: v_dev NULL",
                   lowp_gpu_kv_write(g, LOWP_GPU_IN_BF16, kd, NULL, sd, ok_slots, n, 0, why, sizeof why), why);
    why[0] = 0;
    expect_refused("write: slots_dev NULL",
                   lowp_gpu_kv_write(g, LOWP_GPU_IN_BF16, kd, vd, NULL, ok_slots, n, 0, why, sizeof why), why);
    why[0] = 0;
    expect_refused("write: k_dev is a host pointer",
                   lowp_gpu_kv_write(g, LOWP_GPU_IN_BF16, host_k, vd, sd, ok_slots, n, 0, why, sizeof why), why);
    why[0] = 0;
    expect_refused("write: slots_dev is a host pointer",
                   lowp_gpu_kv_write(g, LOWP_GPU_IN_BF16, kd, vd, ok_slots, ok_slots, n, 0, why, sizeof why), why);
    why[0] = 0;
    expect_refused("write: unknown input type 7",
                   lowp_gpu_kv_write(g, (lowp_gpu_kv_input)7, kd, vd, sd, ok_slots, n, 0, why, sizeof why), why);
    int64_t oob[3] = {0, 8, 1}; /* capacity 2 pages * 4 = 8 */
    why[0] = 0;
    expect_refused("write: slot 8 with num_pages * page_size = 8",
                   lowp_gpu_kv_write(g, LOWP_GPU_IN_BF16, kd, vd, sd, oob, n, 0, why, sizeof why), why);
    int64_t dup[3] = {3, -1, 3};
    why[0] = 0;
    expect_refused("write: slot 3 given to two tokens",
                   lowp_gpu_kv_write(g, LOWP_GPU_IN_BF16, kd, vd, sd, dup, n, 0, why, sizeof why), why);
    why[0] = 0;
    expect_refused("write: n_tokens overflows the input size",
                   lowp_gpu_kv_write(g, LOWP_GPU_IN_BF16, kd, vd, sd, NULL, SIZE_MAX / 4, 0, why, sizeof why), why);
    /* inconsistent configs: a copy of the struct edited after create */
    lowp_gpu_kvcache bad = *g;
    bad.cfg.num_heads = 3;
    why[0] = 0;
    expect_refused("write: cfg.num_heads changed after create",
                   lowp_gpu_kv_write(&bad, LOWP_GPU_IN_BF16, kd, vd, sd, ok_slots, n, 0, why, sizeof why), why);
    bad = *g;
    bad.cfg.qk_dim = 80;
    why[0] = 0;
    expect_refused("write: cfg.qk_dim changed to 80 after create",
                   lowp_gpu_kv_write(&bad, LOWP_GPU_IN_BF16, kd, vd, sd, ok_slots, n, 0, why, sizeof why), why);
    bad = *g;
    bad.cfg.format = LOWP_MXFP4;
    bad.cfg.recipe = LOWP_RECIPE_OCP;
    why[0] = 0;
    expect_refused("write: format changed to mxfp4 with V interleave4",
                   lowp_gpu_kv_write(&bad, LOWP_GPU_IN_BF16, kd, vd, sd, ok_slots, n, 0, why, sizeof why), why);
    bad = *g;
    bad.v_scales = NULL;
    why[0] = 0;
    expect_refused("write: v_scales NULL for nvfp4",
                   lowp_gpu_kv_write(&bad, LOWP_GPU_IN_BF16, kd, vd, sd, ok_slots, n, 0, why, sizeof why), why);
    bad = *g;
    bad.n_global = 2;
    why[0] = 0;
    expect_refused("write: n_global 2 with per-tensor scales",
                   lowp_gpu_kv_write(&bad, LOWP_GPU_IN_BF16, kd, vd, sd, ok_slots, n, 0, why, sizeof why), why);
    /* nothing above may have launched or changed anything */
    CUDA_OR_DIE(cudaDeviceSynchronize());
    expect_equal("after the refused writes the GPU cache is still all poison", g, fresh, "unchanged");
    /* accepted no-ops */
    int rc = lowp_gpu_kv_write(g, LOWP_GPU_IN_BF16, NULL, NULL, NULL, NULL, 0, 0, why, sizeof why);
    add_refusal("write: n_tokens 0 is a no-op (accepted)", rc == 0, rc == 0 ? "accepted" : why);
    int64_t pads[3] = {-1, -1, -1};
    CUDA_OR_DIE(cudaMemcpy(sd, pads, sizeof pads, cudaMemcpyHostToDevice));
    rc = lowp_gpu_kv_write(g, LOWP_GPU_IN_BF16, kd, vd, sd, pads, n, 0, why, sizeof why);
    CUDA_OR_DIE(cudaDeviceSynchronize());
    if (rc == 0)
        expect_equal("write: all slots -1 is accepted and writes nothing", g, fresh,
                     "accepted, cache unchanged");
    else
        add_refusal("write: all slots -1 is accepted and writes nothing", 0, why);
    int64_t far[3] = {100, -1, 1000000};
    CUDA_OR_DIE(cudaMemcpy(sd, far, sizeof far, cudaMemcpyHostToDevice));
    rc = lowp_gpu_kv_write(g, LOWP_GPU_IN_BF16, kd, vd, sd, NULL, n, 0, why, sizeof why);
    CUDA_OR_DIE(cudaDeviceSynchronize());
    if (rc == 0)
        expect_equal("write: out-of-range slots without slots_host are skipped on the device", g,
                     fresh, "accepted, cache unchanged");
    else
        add_refusal("write: out-of-range slots without slots_host are skipped on the device", 0, why);

    /* create, scales, upload, download */
    lowp_gpu_kvcache *g2 = (lowp_gpu_kvcache *)1;
    lowp_kv_config bc = cfg;
    bc.qk_dim = 40;
    why[0] = 0;
    rc = lowp_gpu_kvcache_create(&bc, &g2, why, sizeof why);
    expect_refused("create: qk_dim 40 not a multiple of 16", rc, why);
    add_refusal("create: *out is NULL after a refusal", g2 == NULL, g2 == NULL ? "NULL" : "not NULL");
    why[0] = 0;
    expect_refused("create: cfg NULL", lowp_gpu_kvcache_create(NULL, &g2, why, sizeof why), why);
    float two[2] = {2.0f, 2.0f}, nanv[1] = {NAN}, zero[1] = {0.0f}, one[1] = {1.0f};
    why[0] = 0;
    expect_refused("set_global_scales: n 2 for per-tensor scales",
                   lowp_gpu_kvcache_set_global_scales(g, two, two, 2, why, sizeof why), why);
    why[0] = 0;
    expect_refused("set_global_scales: NaN", lowp_gpu_kvcache_set_global_scales(g, nanv, NULL, 1, why, sizeof why), why);
    why[0] = 0;
    expect_refused("set_global_scales: 0", lowp_gpu_kvcache_set_global_scales(g, NULL, zero, 1, why, sizeof why), why);
    why[0] = 0;
    expect_refused("set_global_scales: cache NULL", lowp_gpu_kvcache_set_global_scales(NULL, one, one, 1, why, sizeof why), why);
    lowp_kv_config mc = lowp_kv_config_default(LOWP_MXFP4, 1, 4, 1, 32, 32);
    lowp_gpu_kvcache *gm = NULL;
    if (lowp_gpu_kvcache_create(&mc, &gm, why, sizeof why) == 0) {
        why[0] = 0;
        expect_refused("set_global_scales: 2.0 on mxfp4 (no global scale)",
                       lowp_gpu_kvcache_set_global_scales(gm, two, NULL, 1, why, sizeof why), why);
        why[0] = 0;
        expect_refused("upload: CPU cache of another config",
                       lowp_gpu_kvcache_upload(gm, fresh, why, sizeof why), why);
        why[0] = 0;
        expect_refused("download: into a CPU cache of another config",
                       lowp_gpu_kvcache_download(gm, fresh, why, sizeof why), why);
        lowp_gpu_kvcache_destroy(gm);
    } else {
        add_refusal("setup: create an mxfp4 GPU cache", 0, why);
    }
    lowp_kv_config pc = cfg;
    pc.page_size = 8;
    lowp_kvcache *other = NULL;
    if (lowp_kvcache_create(&pc, &other, why, sizeof why) == 0) {
        why[0] = 0;
        expect_refused("upload: page_size 8 against 4", lowp_gpu_kvcache_upload(g, other, why, sizeof why), why);
        lowp_kvcache_destroy(other);
    }
    why[0] = 0;
    expect_refused("upload: host cache NULL", lowp_gpu_kvcache_upload(g, NULL, why, sizeof why), why);
    why[0] = 0;
    expect_refused("download: GPU cache NULL", lowp_gpu_kvcache_download(NULL, fresh, why, sizeof why), why);
    expect_equal("after the refused scale/upload calls the GPU cache is unchanged", g, fresh,
                 "unchanged");
    CUDA_OR_DIE(cudaFree(kd));
    CUDA_OR_DIE(cudaFree(vd));
    CUDA_OR_DIE(cudaFree(sd));
    lowp_gpu_kvcache_destroy(g);
    lowp_kvcache_destroy(fresh);
}

/* ------------------------------------------------------------------ API cases */

/* One case through create / upload / write / download. A first set of tokens (another
 * draw of the same shape) is written by the CPU writer only; that CPU cache is uploaded
 * (bytes and global scales); then the case's tokens are written into it by the CPU and
 * into the GPU cache by lowp_gpu_kv_write (some slots hold earlier tokens: overwrites),
 * and the downloaded GPU cache must equal the CPU cache, global scales included.
 * Returns 1 if it does; else 0 with the reason in why. */
static int api_case(const kcase *c, uint8_t *stage, float **fbuf, size_t *fcap, char *why, size_t len)
{
    kcase pre = *c, now = *c;
    pre.seed = c->seed ^ UINT64_C(0xabcdef);
    make_case(&pre, stage, fbuf, fcap); /* pre.ref: the CPU cache with the first tokens */
    lowp_gpu_kvcache *g = NULL;
    int ok = !pre.err;
    if (!ok)
        snprintf(why, len, "%s", pre.errmsg);
    if (ok)
        ok = lowp_gpu_kvcache_create(&c->cfg, &g, why, len) == 0 &&
             lowp_gpu_kvcache_upload(g, pre.ref, why, len) == 0;
    if (ok) {
        make_case(&now, stage, fbuf, fcap); /* the case's tokens into the staging */
        lowp_kvcache_destroy(now.ref);      /* (its own reference is not used) */
        ok = !now.err;
        if (!ok)
            snprintf(why, len, "%s", now.errmsg);
    }
    const lowp_kv_config *cfg = &c->cfg;
    size_t H = cfg->num_heads, n = c->n_tokens;
    const int64_t *slots = (const int64_t *)(stage + c->off_slots);
    if (ok) { /* CPU: the case's tokens on top of pre's (pre's global scales) */
        float *kf = *fbuf, *vf = *fbuf + n * H * cfg->qk_dim; /* make_case sized fbuf */
        for (size_t i = 0; i < n * H * cfg->qk_dim; i++)
            kf[i] = input_value(c->in, stage + c->off_k, i);
        for (size_t i = 0; i < n * H * cfg->vo_dim; i++)
            vf[i] = input_value(c->in, stage + c->off_v, i);
        for (size_t t = 0; ok && t < n; t++)
            if (slots[t] >= 0)
                ok = lowp_kvcache_write(pre.ref, (size_t)slots[t] / cfg->page_size,
                                        (size_t)slots[t] % cfg->page_size, kf + t * H * cfg->qk_dim,
                                        vf + t * H * cfg->vo_dim, NULL, NULL, why, len) == 0;
    }
    if (ok) { /* GPU: the same tokens, from device copies of the staging */
        void *kd = NULL, *vd = NULL, *sd = NULL;
        size_t es = c->in == LOWP_GPU_IN_BF16 ? 2 : 1;
        size_t kb = n * H * cfg->qk_dim * es, vb = n * H * cfg->vo_dim * es;
        CUDA_OR_DIE(cudaMalloc(&kd, kb));
        CUDA_OR_DIE(cudaMalloc(&vd, vb));
        CUDA_OR_DIE(cudaMalloc(&sd, n * sizeof(int64_t)));
        CUDA_OR_DIE(cudaMemcpy(kd, stage + c->off_k, kb, cudaMemcpyHostToDevice));
        CUDA_OR_DIE(cudaMemcpy(vd, stage + c->off_v, vb, cudaMemcpyHostToDevice));
        CUDA_OR_DIE(cudaMemcpy(sd, slots, n * sizeof(int64_t), cudaMemcpyHostToDevice));
        ok = lowp_gpu_kv_write(g, c->in, kd, vd, (const int64_t *)sd, slots, n, 0, why, len) == 0;
        CUDA_OR_DIE(cudaDeviceSynchronize());
        if (ok)
            ok = gpu_equals_cpu(g, pre.ref, why, len);
        CUDA_OR_DIE(cudaFree(kd));
        CUDA_OR_DIE(cudaFree(vd));
        CUDA_OR_DIE(cudaFree(sd));
    }
    lowp_gpu_kvcache_destroy(g);
    lowp_kvcache_destroy(pre.ref);
    return ok;
}

/* ------------------------------------------------------------------ main loop */

typedef struct fmt_result {
    uint64_t cases, tokens, bytes, gpu_bad_cases, gpu_bad_bytes, emu_bad_cases, errors, api_cases, api_bad;
    double seconds;
    lowp_quant_counts cov; /* what the CPU writer met, K and V together: input coverage */
} fmt_result;

static fmt_result fres[NFMT];
static char first_error[640];

static uint64_t case_seed(uint64_t seed, int fi, uint64_t i)
{
    uint64_t s = seed ^ ((uint64_t)fi << 56) ^ (i * UINT64_C(0x9E3779B97F4A7C15));
    return lowp_splitmix64(&s);
}

/* Device arena and pinned staging, grown on demand. */
static uint8_t *d_in, *d_out, *h_in, *h_out;
static size_t cap_in, cap_out;

static void ensure_buffers(size_t in_bytes, size_t out_bytes)
{
    if (in_bytes > cap_in) {
        size_t nc = in_bytes * 2;
        if (d_in)
            CUDA_OR_DIE(cudaFree(d_in));
        if (h_in)
            CUDA_OR_DIE(cudaFreeHost(h_in));
        CUDA_OR_DIE(cudaMalloc((void **)&d_in, nc));
        CUDA_OR_DIE(cudaMallocHost((void **)&h_in, nc));
        cap_in = nc;
    }
    if (out_bytes > cap_out) {
        size_t nc = out_bytes * 2;
        if (d_out)
            CUDA_OR_DIE(cudaFree(d_out));
        if (h_out)
            CUDA_OR_DIE(cudaFreeHost(h_out));
        CUDA_OR_DIE(cudaMalloc((void **)&d_out, nc));
        CUDA_OR_DIE(cudaMallocHost((void **)&h_out, nc));
        cap_out = nc;
    }
}

static void run_format(int fi, uint64_t seed, uint64_t ncases, uint64_t napi, int host_only,
                       cudaStream_t stream)
{
    double t0 = now_s();
    fmt_result *R = &fres[fi];
    kcase *cs = calloc(BATCH_CASES, sizeof *cs);
    size_t *in_off = calloc(BATCH_CASES + 1, sizeof *in_off);
    size_t *out_off = calloc(BATCH_CASES + 1, sizeof *out_off);
    uint8_t *host_stage = NULL; /* --host-only: plain memory instead of pinned */
    size_t host_stage_cap = 0;
    if (!cs || !in_off || !out_off) {
        fprintf(stderr, PROG ": out of memory\n");
        exit(3);
    }
    for (uint64_t b0 = 0; b0 < ncases; b0 += BATCH_CASES) {
        size_t nb = (size_t)(ncases - b0 < BATCH_CASES ? ncases - b0 : BATCH_CASES);
        /* shapes first (cheap, serial): they fix the staging and arena layout */
        in_off[0] = out_off[0] = 0;
        for (size_t i = 0; i < nb; i++) {
            kcase *c = &cs[i];
            memset(c, 0, sizeof *c);
            uint64_t idx = b0 + i;
            c->variant = fmt_first[fi] + (size_t)(idx % fmt_count[fi]);
            c->seed = case_seed(seed, fi, idx);
            uint64_t s = c->seed;
            draw_shape(c, &s);
            layout_case(c);
            in_off[i + 1] = in_off[i] + c->in_bytes;
            out_off[i + 1] = out_off[i] + c->out_bytes;
        }
        uint8_t *stage;
        if (host_only) {
            if (in_off[nb] > host_stage_cap) {
                free(host_stage);
                host_stage_cap = in_off[nb] * 2;
                host_stage = malloc(host_stage_cap);
                if (!host_stage) {
                    fprintf(stderr, PROG ": out of memory\n");
                    exit(3);
                }
            }
            stage = host_stage;
        } else {
            ensure_buffers(in_off[nb], out_off[nb]);
            stage = h_in;
        }
        /* inputs, CPU references, emulation (parallel) */
#pragma omp parallel
        {
            float *fbuf = NULL;
            size_t fcap = 0;
#pragma omp for schedule(dynamic, 4)
            for (long i = 0; i < (long)nb; i++) {
                kcase *c = &cs[i];
                make_case(c, stage + in_off[i], &fbuf, &fcap);
                if (!c->err)
                    emulate_case(c, stage + in_off[i]);
            }
            free(fbuf);
        }
        if (!host_only) {
            /* poison the arena, upload the inputs, write every case, download */
            CUDA_OR_DIE(cudaMemsetAsync(d_out, 0xFF, out_off[nb], stream));
            CUDA_OR_DIE(cudaMemcpyAsync(d_in, h_in, in_off[nb], cudaMemcpyHostToDevice, stream));
            for (size_t i = 0; i < nb; i++) {
                kcase *c = &cs[i];
                if (c->err)
                    continue;
                uint8_t *di = d_in + in_off[i], *hi = h_in + in_off[i], *dout = d_out + out_off[i];
                lowp_gpu_kvcache v;
                memset(&v, 0, sizeof v);
                v.cfg = c->cfg;
                v.k_codes = dout + c->off_out[0];
                v.k_scales = c->bytes_out[1] ? dout + c->off_out[1] : NULL;
                v.v_codes = dout + c->off_out[2];
                v.v_scales = c->bytes_out[3] ? dout + c->off_out[3] : NULL;
                v.k_codes_bytes = c->bytes_out[0];
                v.k_scales_bytes = c->bytes_out[1];
                v.v_codes_bytes = c->bytes_out[2];
                v.v_scales_bytes = c->bytes_out[3];
                v.k_global = (float *)(di + c->off_kg);
                v.v_global = (float *)(di + c->off_vg);
                v.k_global_host = (float *)(hi + c->off_kg);
                v.v_global_host = (float *)(hi + c->off_vg);
                v.n_global = c->n_global;
                char why[300];
                if (lowp_gpu_kv_write(&v, c->in, di + c->off_k, di + c->off_v,
                                      (const int64_t *)(di + c->off_slots),
                                      (const int64_t *)(hi + c->off_slots), c->n_tokens, stream, why,
                                      sizeof why)) {
                    c->err = 1;
                    snprintf(c->errmsg, sizeof c->errmsg, "lowp_gpu_kv_write refused: %s", why);
                }
            }
            CUDA_OR_DIE(cudaMemcpyAsync(h_out, d_out, out_off[nb], cudaMemcpyDeviceToHost, stream));
            CUDA_OR_DIE(cudaStreamSynchronize(stream));
        }
        /* compare (parallel) */
        uint64_t tok = 0, bytes = 0, gbad = 0, gbytes = 0, ebad = 0, errs = 0;
#pragma omp parallel for schedule(dynamic, 8) reduction(+ : tok, bytes, gbad, gbytes, ebad, errs)
        for (long i = 0; i < (long)nb; i++) {
            kcase *c = &cs[i];
            variant *v = &variants[c->variant];
            uint64_t d = 0;
            if (c->err) {
                errs++;
#pragma omp critical(kvw_err)
                if (!first_error[0])
                    snprintf(first_error, sizeof first_error, "%s %s case seed 0x%016llx: %s",
                             lowp_block_format_name(v->f), lowp_recipe_name(v->r),
                             (unsigned long long)c->seed, c->errmsg);
            } else {
                compare_case(c, stage + in_off[i], host_only ? NULL : h_out + out_off[i], &d);
            }
            const int64_t *sl = (const int64_t *)(stage + in_off[i] + c->off_slots);
            uint64_t real = 0;
            for (size_t t = 0; t < c->n_tokens; t++)
                real += sl[t] >= 0;
            uint64_t by = c->bytes_out[0] + c->bytes_out[1] + c->bytes_out[2] + c->bytes_out[3];
            tok += real;
            bytes += by;
            gbad += d != 0;
            gbytes += d;
            ebad += (uint64_t)c->emu_bad;
#pragma omp atomic
            v->cases++;
#pragma omp atomic
            v->tokens += real;
#pragma omp atomic
            v->bytes += by;
            if (d) {
#pragma omp atomic
                v->gpu_bad++;
            }
            if (c->emu_bad) {
#pragma omp atomic
                v->emu_bad++;
            }
            if (c->ref) {
#pragma omp critical(kvw_cov)
                {
                    lowp_quant_counts_add(&R->cov, lowp_kvcache_counts(c->ref, LOWP_KV_K));
                    lowp_quant_counts_add(&R->cov, lowp_kvcache_counts(c->ref, LOWP_KV_V));
                }
            }
            lowp_kvcache_destroy(c->ref);
            lowp_kvcache_destroy(c->emu);
            c->ref = c->emu = NULL;
        }
        R->cases += nb;
        R->tokens += tok;
        R->bytes += bytes;
        R->gpu_bad_cases += gbad;
        R->gpu_bad_bytes += gbytes;
        R->emu_bad_cases += ebad;
        R->errors += errs;
        n_mm_total += gbytes;
    }
    /* API cases: create / upload / write / download, serial (synchronous calls) */
    if (!host_only) {
        float *fbuf = NULL;
        size_t fcap = 0;
        uint8_t *stage = NULL;
        size_t scap = 0;
        for (uint64_t i = 0; i < napi; i++) {
            kcase c;
            memset(&c, 0, sizeof c);
            c.variant = fmt_first[fi] + (size_t)(i % fmt_count[fi]);
            c.seed = case_seed(seed ^ UINT64_C(0x617069), fi, i);
            uint64_t s = c.seed;
            draw_shape(&c, &s);
            layout_case(&c);
            if (c.in_bytes > scap) {
                free(stage);
                scap = c.in_bytes;
                stage = malloc(scap);
                if (!stage) {
                    fprintf(stderr, PROG ": out of memory\n");
                    exit(3);
                }
            }
            char why[600] = "";
            int ok = api_case(&c, stage, &fbuf, &fcap, why, sizeof why);
            variant *v = &variants[c.variant];
            v->api_cases++;
            R->api_cases++;
            if (!ok) {
                v->api_bad++;
                R->api_bad++;
                int record = n_firsts < MAX_FIRST;
                if (record)
                    snprintf(firsts[n_firsts++].text, sizeof firsts[0].text,
                             "API case (create/upload/write/download) failed: %s %s flags %u %s k_sf %s v_sf %s per %s, input %s, case seed 0x%016llx: %s",
                             lowp_block_format_name(v->f), lowp_recipe_name(v->r), v->flags,
                             lowp_kv_layout_name(v->layout), lowp_kv_sf_order_name(v->ko),
                             lowp_kv_sf_order_name(v->vo), lowp_kv_scale_gran_name(v->gran),
                             lowp_gpu_kv_input_name(c.in), (unsigned long long)c.seed, why);
            }
        }
        free(fbuf);
        free(stage);
    }
    free(cs);
    free(in_off);
    free(out_off);
    free(host_stage);
    R->seconds = now_s() - t0;
}

/* ------------------------------------------------------------------ report */

static void write_report(FILE *f, const char *device, uint64_t seed, int quick, int host_only,
                         uint64_t ncases, int threads, double total, int skipped, const char *skipmsg)
{
    fprintf(f, "# GPU quantize-on-write vs lowp_kvcache_write\n\n");
    fprintf(f, "Program `" PROG "` (gpu/check/kv_write_check.c). Device: %s. Seed 0x%016llx; %s%s; "
               "%llu bulk cases per format; %d host threads; %.1f s.\n\n",
            device, (unsigned long long)seed, quick ? "--quick" : "full run",
            host_only ? ", --host-only (no GPU used: emulation vs CPU only)" : "",
            (unsigned long long)ncases, threads, total);
    if (skipped) {
        fprintf(f, "**Skipped**: %s\n", skipmsg);
        return;
    }
    fprintf(f, "Every case compares all four cache buffers (K/V codes and block scales) byte for "
               "byte, poison bytes of untouched slots included, between lowp's CPU writer and the GPU "
               "kernels (column GPU), and between the CPU writer and the kernels' own code run on the "
               "CPU (column emulated). API cases go through create, upload of a CPU cache that "
               "already holds tokens, write and download.\n\n");
    fprintf(f, "| format | cases | tokens | bytes compared | GPU mismatching cases | GPU mismatching bytes | emulated mismatching cases | API cases | API failures | errors | s |\n");
    fprintf(f, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int fi = 0; fi < NFMT; fi++) {
        fmt_result *r = &fres[fi];
        fprintf(f, "| %s | %llu | %llu | %llu | %llu | %llu | %llu | %llu | %llu | %llu | %.1f |\n",
                lowp_block_format_name(formats[fi]), (unsigned long long)r->cases,
                (unsigned long long)r->tokens, (unsigned long long)r->bytes,
                (unsigned long long)r->gpu_bad_cases, (unsigned long long)r->gpu_bad_bytes,
                (unsigned long long)r->emu_bad_cases, (unsigned long long)r->api_cases,
                (unsigned long long)r->api_bad, (unsigned long long)r->errors, r->seconds);
    }
    if (first_error[0])
        fprintf(f, "\nFirst error: %s\n", first_error);
    fprintf(f, "\nInput coverage (lowp_kvcache_counts of the CPU writer, K and V, bulk cases): how "
               "often the edge rules were exercised.\n\n");
    fprintf(f, "| format | elements | blocks | NaN in | Inf in | saturated | flushed to 0 | NaN out | "
               "scales 0 | scales subnormal | scales NaN |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int fi = 0; fi < NFMT; fi++) {
        const lowp_quant_counts *k = &fres[fi].cov;
        fprintf(f, "| %s | %zu | %zu | %zu | %zu | %zu | %zu | %zu | %zu | %zu | %zu |\n",
                lowp_block_format_name(formats[fi]), k->elements, k->blocks, k->nan_in, k->inf_in,
                k->saturated, k->flushed, k->nan_out, k->scale_zero, k->scale_subnormal, k->scale_nan);
    }
    fprintf(f, "\n## Host-side refusals\n\n| check | result | message |\n|---|---|---|\n");
    if (n_refusals == 0)
        fprintf(f, "| (not run%s) | | |\n", host_only ? ": --host-only" : "");
    for (int i = 0; i < n_refusals; i++)
        fprintf(f, "| %s | %s | %s |\n", refusals[i].name, refusals[i].ok ? "ok" : "**FAIL**", refusals[i].msg);
    fprintf(f, "\n## First mismatches\n\n");
    if (n_firsts == 0)
        fprintf(f, "None.\n");
    for (int i = 0; i < n_firsts; i++)
        fprintf(f, "```\n%s\n```\n", firsts[i].text);
    fprintf(f, "\n## Variants\n\n| format | recipe | flags | layout | K scales | V scales | global scale | cases | tokens | bytes | GPU bad | emulated bad | API cases | API bad |\n");
    fprintf(f, "|---|---|---:|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for (size_t i = 0; i < n_variants; i++) {
        variant *v = &variants[i];
        fprintf(f, "| %s | %s | %u | %s | %s | %s | %s | %llu | %llu | %llu | %llu | %llu | %llu | %llu |\n",
                lowp_block_format_name(v->f), lowp_recipe_name(v->r), v->flags,
                lowp_kv_layout_name(v->layout), lowp_kv_sf_order_name(v->ko),
                lowp_kv_sf_order_name(v->vo), lowp_kv_scale_gran_name(v->gran),
                (unsigned long long)v->cases, (unsigned long long)v->tokens,
                (unsigned long long)v->bytes, (unsigned long long)v->gpu_bad,
                (unsigned long long)v->emu_bad, (unsigned long long)v->api_cases,
                (unsigned long long)v->api_bad);
    }
}

static int save_report(const char *path, const char *device, uint64_t seed, int quick,
                       int host_only, uint64_t ncases, int threads, double total, int skipped,
                       const char *skipmsg)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, PROG ": cannot write %s\n", tmp);
        return -1;
    }
    write_report(f, device, seed, quick, host_only, ncases, threads, total, skipped, skipmsg);
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        fprintf(stderr, PROG ": cannot write %s\n", path);
        remove(tmp);
        return -1;
    }
    return 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: " PROG " REPORT.md [--quick] [--cases N] [--host-only] [--seed S] [--threads N]\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *report = NULL;
    int quick = 0, host_only = 0, threads = 0;
    long long cases_arg = -1;
    uint64_t seed = UINT64_C(0x6c6f7770);
    const char *env = getenv("LOWP_SEED");
    if (env && *env)
        seed = lowp_cli_parse_seed("LOWP_SEED", env);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            quick = 1;
        else if (strcmp(argv[i], "--host-only") == 0)
            host_only = 1;
        else if (strcmp(argv[i], "--cases") == 0 && i + 1 < argc)
            cases_arg = (long long)lowp_cli_parse_count("--cases", argv[++i], 0);
        else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
            seed = lowp_cli_parse_seed("--seed", argv[++i]);
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            threads = (int)lowp_cli_parse_u64("--threads", argv[++i], 1, 4096);
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage();
            return 0;
        } else if (argv[i][0] == '-' || report)
            return usage();
        else
            report = argv[i];
    }
    if (!report || cases_arg == 0 || cases_arg < -1)
        return usage();
    uint64_t ncases = cases_arg > 0 ? (uint64_t)cases_arg : quick ? 3000 : 100000;
#ifdef _OPENMP
    if (threads > 0)
        omp_set_num_threads(threads);
    threads = omp_get_max_threads();
#else
    threads = 1;
#endif
    setvbuf(stdout, NULL, _IOLBF, 0);
    double t0 = now_s();
    if (lowp_codec_init(&codec_bf16, LOWP_BF16, LOWP_PROFILE_CUDA, LOWP_RN, LOWP_SAT_DEFAULT, NULL, 0) ||
        lowp_codec_init(&codec_e4m3, LOWP_E4M3, LOWP_PROFILE_CUDA, LOWP_RN, LOWP_SAT_DEFAULT, NULL, 0)) {
        fprintf(stderr, PROG ": codec init failed\n");
        return 3;
    }
    build_variants();
    for (unsigned i = 0; i < 256; i++)
        e4m3_value[i] = lowp_decode_f32(LOWP_E4M3, (uint16_t)i);
    char device[400] = "none (--host-only)";
    cudaStream_t stream = NULL;
    if (!host_only) {
        int ndev = 0;
        cudaError_t e = cudaGetDeviceCount(&ndev);
        if (e != cudaSuccess || ndev == 0) {
            char msg[300];
            snprintf(msg, sizeof msg, "no usable CUDA GPU (%s)",
                     e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
            printf(PROG ": skipped (exit 77): %s\n", msg);
            save_report(report, "none", seed, quick, host_only, ncases, threads, 0.0, 1, msg);
            return 77;
        }
        struct cudaDeviceProp prop;
        int drv = 0, rt = 0;
        CUDA_OR_DIE(cudaSetDevice(0));
        CUDA_OR_DIE(cudaGetDeviceProperties(&prop, 0));
        CUDA_OR_DIE(cudaDriverGetVersion(&drv));
        CUDA_OR_DIE(cudaRuntimeGetVersion(&rt));
        snprintf(device, sizeof device, "%s, cc %d.%d, %d SMs, driver %d.%d, runtime %d.%d", prop.name,
                 prop.major, prop.minor, prop.multiProcessorCount, drv / 1000, (drv % 1000) / 10,
                 rt / 1000, (rt % 1000) / 10);
        CUDA_OR_DIE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
        printf(PROG ": %s; %d host threads; seed 0x%016llx; %llu cases per format%s\n", device,
               threads, (unsigned long long)seed, (unsigned long long)ncases, quick ? " (--quick)" : "");
        run_refusals();
        int bad = 0;
        for (int i = 0; i < n_refusals; i++)
            bad += !refusals[i].ok;
        printf("  host-side refusals: %d checks, %d failed\n", n_refusals, bad);
    } else {
        printf(PROG ": --host-only: the kernels' code on the CPU vs lowp_kvcache_write; seed 0x%016llx; %llu cases per format; %d threads\n",
               (unsigned long long)seed, (unsigned long long)ncases, threads);
    }
    uint64_t napi = quick ? 4 : 40; /* per format: a few per variant in the full run */
    for (int fi = 0; fi < NFMT; fi++) {
        uint64_t na = napi;
        if (!quick && na < fmt_count[fi] * 2)
            na = fmt_count[fi] * 2;
        run_format(fi, seed, ncases, na, host_only, stream);
        fmt_result *r = &fres[fi];
        printf("  %-9s %8llu cases %9llu tokens %12llu bytes: GPU mismatching cases %llu, emulated %llu, API %llu/%llu bad, errors %llu (%.1f s)\n",
               lowp_block_format_name(formats[fi]), (unsigned long long)r->cases,
               (unsigned long long)r->tokens, (unsigned long long)r->bytes,
               (unsigned long long)r->gpu_bad_cases, (unsigned long long)r->emu_bad_cases,
               (unsigned long long)r->api_bad, (unsigned long long)r->api_cases,
               (unsigned long long)r->errors, r->seconds);
        save_report(report, device, seed, quick, host_only, ncases, threads, now_s() - t0, 0, NULL);
    }
    if (!host_only) {
        CUDA_OR_DIE(cudaStreamDestroy(stream));
        CUDA_OR_DIE(cudaFree(d_in));
        CUDA_OR_DIE(cudaFree(d_out));
        CUDA_OR_DIE(cudaFreeHost(h_in));
        CUDA_OR_DIE(cudaFreeHost(h_out));
    }
    double total = now_s() - t0;
    if (save_report(report, device, seed, quick, host_only, ncases, threads, total, 0, NULL))
        return 3;
    uint64_t bad = 0;
    for (int fi = 0; fi < NFMT; fi++)
        bad += fres[fi].gpu_bad_cases + fres[fi].emu_bad_cases + fres[fi].errors + fres[fi].api_bad;
    for (int i = 0; i < n_refusals; i++)
        bad += !refusals[i].ok;
    for (int i = 0; i < n_firsts && i < 3; i++)
        printf("%s\n", firsts[i].text);
    if (first_error[0])
        printf("first error: %s\n", first_error);
    printf(PROG ": report %s; %.1f s; %s\n", report, total, bad ? "MISMATCHES OR FAILURES FOUND" : "all match");
    free(variants);
    return bad ? 1 : 0;
}
