/* ref/study/src/calib.c: global-scale calibration (see lowp/calib.h for the methods).
 *
 * Work layout: a "slice" is a contiguous, zero-padded run of the elements one global
 * scale applies to: the whole tensor (scope tensor; the input itself when its length
 * needs no padding) or x[:, h, :] gathered as [T, D] (scope head; one head at a time into
 * one buffer). Padding to the block size (and to an even count for 4-bit codes) adds
 * only exact zeros, which no recipe lets raise a block amax and which reconstruct to 0,
 * so they change neither the scales nor any error sum. Every error sum is the
 * deterministic compensated sum of lowp_stats_quant_sse / lowp_stats_compute; the row
 * statistics read the reconstruction from the codes a chunk at a time
 * (lowp_stats_compute_quant), so no binary64 copy of the tensor is held.
 * Memory: the input, its codes (at most 2 bytes an element, BF16) and block scales, one
 * head slice, the statistics' per-block arrays (about 2 bytes an element for 16-element
 * blocks), and a padded copy of the input only when T H D is not a multiple of 32. */
#include "lowp/bits.h"
#include "lowp/calib.h"

#include "lowp/why.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const method_names[LOWP_CALIB_METHOD_COUNT] = {"none", "fixed-1.0", "amax",
                                                                   "p99.9", "p99.99", "mse"};

const char *lowp_calib_method_name(lowp_calib_method m)
{
    return (unsigned)m < LOWP_CALIB_METHOD_COUNT ? method_names[m] : "unknown";
}

const char *lowp_calib_scope_name(lowp_calib_scope s)
{
    return s == LOWP_CALIB_HEAD ? "head" : "tensor";
}

/* ---------------------------------------------------------------------------------- */
/* amax and percentiles                                                                */

float lowp_calib_amax(const float *x, size_t n)
{
    float m = 0.0f;
    for (size_t i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        if (a > m) /* false for NaN */
            m = a;
    }
    return m;
}

static uint32_t abs_bits(float x)
{
    return lowp_f32_bits(x) & 0x7fffffffu;
}

/* |x| bit patterns order like the magnitudes (Inf = 0x7f800000 above every finite);
 * NaN patterns lie above 0x7f800000 and are left out. Two 16-bit histogram passes find
 * the rank-th smallest exactly. */
float lowp_calib_abs_quantile(const float *x, size_t n, unsigned num, unsigned den)
{
    size_t *hist = calloc(65536, sizeof *hist);
    if (hist == NULL || den == 0)
        return (free(hist), NAN);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t b = abs_bits(x[i]);
        if (b > 0x7f800000u)
            continue;
        hist[b >> 16]++;
        m++;
    }
    if (m == 0) {
        free(hist);
        return 0.0f;
    }
    /* rank = ceil(num m / den) in 1..m; in integers so that no rounding moves it. */
    size_t rank = (size_t)(((unsigned long long)num * m + den - 1) / den);
    if (rank < 1)
        rank = 1;
    if (rank > m)
        rank = m;
    size_t below = 0, hi = 0;
    for (hi = 0; hi < 65536; hi++) {
        if (below + hist[hi] >= rank)
            break;
        below += hist[hi];
    }
    memset(hist, 0, 65536 * sizeof *hist);
    for (size_t i = 0; i < n; i++) {
        uint32_t b = abs_bits(x[i]);
        if (b <= 0x7f800000u && (b >> 16) == hi)
            hist[b & 0xffffu]++;
    }
    size_t lo;
    for (lo = 0; lo < 65536; lo++) {
        if (below + hist[lo] >= rank)
            break;
        below += hist[lo];
    }
    free(hist);
    uint32_t r = (uint32_t)(hi << 16 | lo);
    return lowp_f32_from_bits(r);
}

/* ---------------------------------------------------------------------------------- */
/* default specs                                                                       */

static void push(lowp_calib_spec *s, size_t *k, lowp_block_format f, lowp_recipe r, lowp_calib_method m,
                 lowp_calib_scope sc, unsigned flags)
{
    if (*k >= LOWP_CALIB_MAX_SPECS)
        return;
    lowp_calib_spec v = {f, r, m, sc, flags};
    s[(*k)++] = v;
}

size_t lowp_calib_default_specs(lowp_block_format f, int all, lowp_calib_spec *s)
{
    static const lowp_calib_method searched[] = {LOWP_CALIB_AMAX, LOWP_CALIB_P999, LOWP_CALIB_P9999, LOWP_CALIB_MSE};
    size_t k = 0;
    if (all || f == LOWP_NVFP4) {
        push(s, &k, LOWP_NVFP4, LOWP_RECIPE_SGLANG_KV, LOWP_CALIB_FIXED, LOWP_CALIB_TENSOR, 0);
        push(s, &k, LOWP_NVFP4, LOWP_RECIPE_SGLANG_KV, LOWP_CALIB_AMAX, LOWP_CALIB_TENSOR, 0);
        for (int sc = 0; sc < 2; sc++)
            for (int up = 0; up < 2; up++)
                for (size_t m = 0; m < 4; m++)
                    push(s, &k, LOWP_NVFP4, LOWP_RECIPE_EXACT, searched[m], (lowp_calib_scope)sc,
                         up ? LOWP_BLOCK_SCALE_UP : 0);
    }
    if (all || f == LOWP_MXFP4) {
        push(s, &k, LOWP_MXFP4, LOWP_RECIPE_OCP, LOWP_CALIB_NONE, LOWP_CALIB_TENSOR, 0);
        push(s, &k, LOWP_MXFP4, LOWP_RECIPE_RCEIL, LOWP_CALIB_NONE, LOWP_CALIB_TENSOR, 0);
    }
    if (all || f == LOWP_MXFP8) {
        push(s, &k, LOWP_MXFP8, LOWP_RECIPE_OCP, LOWP_CALIB_NONE, LOWP_CALIB_TENSOR, 0);
        push(s, &k, LOWP_MXFP8, LOWP_RECIPE_RCEIL, LOWP_CALIB_NONE, LOWP_CALIB_TENSOR, 0);
    }
    if (all || f == LOWP_FP8_E4M3) {
        push(s, &k, LOWP_FP8_E4M3, LOWP_RECIPE_EXACT, LOWP_CALIB_FIXED, LOWP_CALIB_TENSOR, 0);
        for (int sc = 0; sc < 2; sc++)
            for (size_t m = 0; m < 4; m++)
                push(s, &k, LOWP_FP8_E4M3, LOWP_RECIPE_EXACT, searched[m], (lowp_calib_scope)sc, 0);
    }
    if (all || f == LOWP_FP8_E5M2)
        push(s, &k, LOWP_FP8_E5M2, LOWP_RECIPE_EXACT, LOWP_CALIB_AMAX, LOWP_CALIB_TENSOR, 0);
    if (all || f == LOWP_BF16_PASS)
        push(s, &k, LOWP_BF16_PASS, LOWP_RECIPE_EXACT, LOWP_CALIB_NONE, LOWP_CALIB_TENSOR, 0);
    return k;
}

/* ---------------------------------------------------------------------------------- */
/* slices                                                                              */

typedef struct {
    const float *x; /* np elements: the real ones, then zeros */
    float *own;   /* x when the slice owns it (a padded copy or a sample), else NULL */
    size_t n;     /* real elements */
    size_t np;    /* padded length */
    size_t rows;  /* rows of `row` elements (tokens x heads, or tokens) */
    size_t row;   /* elements per sampled unit: H D (tensor) or D (head) */
} slice;

/* A multiple of every block size (16, 32) and even (4-bit codes pack in pairs). */
static size_t padded_len(size_t n)
{
    return (n + 31) / 32 * 32;
}

/* Every s-th unit of `row` elements from sl, zero-padded. */
static int sample_slice(const slice *sl, size_t s, slice *out)
{
    size_t units = (sl->rows + s - 1) / s;
    size_t n = units * sl->row, np = padded_len(n);
    out->own = calloc(np ? np : 32, sizeof *out->own);
    if (out->own == NULL)
        return -1;
    out->x = out->own;
    for (size_t u = 0; u < units; u++)
        memcpy(out->own + u * sl->row, sl->x + u * s * sl->row, sl->row * sizeof *sl->x);
    out->n = n;
    out->np = np;
    out->rows = units;
    out->row = sl->row;
    return 0;
}

/* ---------------------------------------------------------------------------------- */
/* global scale of one slice                                                           */

static double range_max(lowp_block_format f)
{
    switch (f) {
    case LOWP_NVFP4: return 2688.0;      /* 6 x 448 */
    case LOWP_FP8_E4M3: return 448.0;
    case LOWP_FP8_E5M2: return 57344.0;
    default: return 1.0;
    }
}

/* The amax method's scale from a (percentile) amax a. */
static lowp_global_scale scale_from_amax(lowp_block_format f, lowp_recipe r, float a)
{
    if (r == LOWP_RECIPE_SGLANG_KV) {
        float g = (float)((double)a / 2688.0);
        if (!(a > 0.0f) || !isfinite(a) || !(g > 0.0f))
            g = 1.0f;
        return lowp_global_scale_from_dec(f, r, g);
    }
    return lowp_recipe_global_scale(f, r, a);
}

typedef struct {
    lowp_global_scale gs;
    double mult;
} choice;

static int slice_sse(const lowp_calib_spec *sp, lowp_global_scale gs, const slice *sl, double *sse, char *why,
                     size_t len)
{
    return lowp_stats_quant_sse(sp->format, sp->recipe, gs, sp->flags, sl->x, sl->np, sse, NULL, why, len);
}

/* The mse search on one slice. extra (may be NULL) is a further candidate scored on the
 * whole slice (the per-tensor choice, for per-head search). */
static int mse_search(const lowp_calib_spec *sp, const slice *sl, size_t cap, const lowp_global_scale *extra,
                      choice *out, char *why, size_t len)
{
    float a = lowp_calib_amax(sl->x, sl->n);
    lowp_global_scale g_amax = scale_from_amax(sp->format, sp->recipe, a);
    out->gs = g_amax;
    out->mult = 1.0;
    double M = range_max(sp->format);
    double base = (double)a / M;
    if (!(a > 0.0f) || !isfinite(a)) /* no search possible: the recipe's guarded choice */
        return 0;
    /* Subsample: every units_s-th unit (token row), at most about cap elements. */
    size_t units_s = 1;
    if (cap > 0 && sl->n > cap) {
        size_t want_units = cap / sl->row ? cap / sl->row : 1;
        units_s = (sl->rows + want_units - 1) / want_units;
    }
    slice sam = *sl;
    int own = 0;
    if (units_s > 1) {
        if (sample_slice(sl, units_s, &sam))
            return lowp_why_set(why, len, "out of memory for the search sample");
        own = 1;
    }
    int rc = -1;
    double best;
    if (slice_sse(sp, g_amax, &sam, &best, why, len))
        goto done;
    lowp_global_scale g_best = g_amax;
    double m_best = 1.0;
    for (int k = 0; k < LOWP_CALIB_MSE_GRID; k++) {
        double m = 0.25 + (4.0 - 0.25) * (double)k / (double)(LOWP_CALIB_MSE_GRID - 1);
        float g = (float)(base * m);
        if (!(g > 0.0f) || !isfinite(g))
            continue;
        lowp_global_scale gs = lowp_global_scale_from_dec(sp->format, sp->recipe, g);
        double e;
        if (slice_sse(sp, gs, &sam, &e, why, len))
            goto done;
        if (e < best) {
            best = e;
            g_best = gs;
            m_best = m;
        }
    }
    /* Re-score on the whole slice: amax first, so a tie keeps it. When the sample chose
     * the amax candidate, only the extra candidate needs a whole-slice score to beat. */
    if (own && (m_best != 1.0 || extra != NULL)) {
        double e_amax, e_grid;
        if (slice_sse(sp, g_amax, sl, &e_amax, why, len))
            goto done;
        if (m_best != 1.0 && slice_sse(sp, g_best, sl, &e_grid, why, len))
            goto done;
        if (m_best != 1.0 && e_grid < e_amax) {
            best = e_grid;
        } else {
            best = e_amax;
            g_best = g_amax;
            m_best = 1.0;
        }
    }
    if (extra != NULL) {
        double e;
        if (slice_sse(sp, *extra, sl, &e, why, len))
            goto done;
        if (e < best) {
            best = e;
            g_best = *extra;
            m_best = (double)extra->dec / base;
        }
    }
    out->gs = g_best;
    out->mult = m_best;
    rc = 0;
done:
    if (own)
        free(sam.own);
    return rc;
}

static int slice_scale(const lowp_calib_spec *sp, const slice *sl, size_t cap, const lowp_global_scale *extra,
                       choice *out, char *why, size_t len)
{
    out->mult = NAN;
    switch (sp->method) {
    case LOWP_CALIB_FIXED:
        out->gs = lowp_global_scale_from_dec(sp->format, sp->recipe, 1.0f);
        return 0;
    case LOWP_CALIB_AMAX:
        out->gs = scale_from_amax(sp->format, sp->recipe, lowp_calib_amax(sl->x, sl->n));
        return 0;
    case LOWP_CALIB_P999:
    case LOWP_CALIB_P9999: {
        unsigned num = sp->method == LOWP_CALIB_P999 ? 999 : 9999, den = sp->method == LOWP_CALIB_P999 ? 1000 : 10000;
        float q = lowp_calib_abs_quantile(sl->x, sl->n, num, den);
        if (isnan(q))
            return lowp_why_set(why, len, "out of memory for the percentile");
        out->gs = scale_from_amax(sp->format, sp->recipe, q);
        return 0;
    }
    case LOWP_CALIB_MSE:
        return mse_search(sp, sl, cap, extra, out, why, len);
    default:
        out->gs = lowp_global_scale_from_dec(sp->format, sp->recipe, 1.0f);
        return 0;
    }
}

/* Quantize a slice into codes / scales (room for sl->np elements); add counts and scale
 * codes to st. */
static int quant_slice(const lowp_calib_spec *sp, lowp_global_scale gs, const slice *sl, uint8_t *codes,
                       uint8_t *scales, lowp_quant_counts *qc, lowp_stats *st, char *why, size_t len)
{
    lowp_block_format f = sp->format;
    size_t bs = lowp_block_size(f), np = sl->np;
    if (!lowp_block_has_scales(f))
        scales = NULL;
    lowp_quant_counts k;
    memset(&k, 0, sizeof k);
    if (lowp_block_quantize(f, sp->recipe, gs, sp->flags, sl->x, np, codes, scales, &k, why, len))
        return -1;
    /* the zero padding is neither flushed, saturated nor NaN: it only adds elements */
    k.elements -= np - sl->n;
    if (bs == 1)
        k.blocks -= np - sl->n;
    lowp_quant_counts_add(qc, &k);
    if (scales != NULL)
        lowp_stats_add_scales(st, f == LOWP_NVFP4 ? LOWP_E4M3 : LOWP_E8M0, scales, np / bs);
    return 0;
}

/* ---------------------------------------------------------------------------------- */
/* run                                                                                 */

static int check_spec(const lowp_calib_spec *sp, char *why, size_t len)
{
    if ((unsigned)sp->format >= LOWP_BLOCK_FORMAT_COUNT || (unsigned)sp->recipe >= LOWP_RECIPE_COUNT ||
        (unsigned)sp->method >= LOWP_CALIB_METHOD_COUNT)
        return lowp_why_set(why, len, "unknown format, recipe or method");
    if (lowp_recipe_check(sp->format, sp->recipe, why, len))
        return -1;
    int has_g = lowp_block_has_global_scale(sp->format);
    if (has_g && sp->method == LOWP_CALIB_NONE)
        return lowp_why_set(
            why, len,
            "NVFP4 and FP8 need a global-scale method (fixed-1.0, amax, p99.9, p99.99, mse)");
    if (!has_g && sp->method != LOWP_CALIB_NONE)
        return lowp_why_set(
            why, len, "MXFP4, MXFP8 and BF16 have no global scale to calibrate (method none)");
    return 0;
}

/* Per-tensor mse choices remembered for the per-head search: key (format, recipe, flags). */
typedef struct {
    int valid;
    lowp_calib_spec key;
    lowp_global_scale gs;
} tensor_memo;

int lowp_calib_run(const float *x, const lowp_calib_options *o, const lowp_calib_spec *specs, size_t nspecs,
                   lowp_calib_table *out, char *why, size_t why_len)
{
    return lowp_calib_run_progress(x, o, specs, nspecs, NULL, NULL, out, why, why_len);
}

int lowp_calib_run_progress(const float *x, const lowp_calib_options *o, const lowp_calib_spec *specs,
                            size_t nspecs, lowp_calib_progress_fn fn, void *arg, lowp_calib_table *out,
                            char *why, size_t why_len)
{
    memset(out, 0, sizeof *out);
    if (o == NULL)
        return lowp_why_set(why, why_len, "calibration needs the tensor shape");
    size_t T = o->tokens, H = o->heads, D = o->dim;
    if (T == 0 || H == 0 || D == 0)
        return lowp_why_set(why, why_len, "empty tensor");
    if (T > SIZE_MAX / H / D / 8)
        return lowp_why_set(why, why_len, "tensor too large");
    size_t n = T * H * D;
    size_t cap = o->search_max;
    for (size_t i = 0; i < nspecs; i++)
        if (check_spec(&specs[i], why, why_len))
            return -1;
    int need_heads = 0;
    for (size_t i = 0; i < nspecs; i++)
        need_heads |= specs[i].scope == LOWP_CALIB_HEAD;

    int rc = -1;
    slice whole = {0}, head = {0};
    tensor_memo memo[LOWP_CALIB_MAX_SPECS];
    size_t nmemo = 0;
    out->rows = calloc(nspecs ? nspecs : 1, sizeof *out->rows);
    whole.np = padded_len(n);
    whole.n = n;
    whole.rows = T;
    whole.row = H * D;
    if (whole.np == n) {
        whole.x = x; /* no padding needed: the input itself */
    } else {
        whole.own = calloc(whole.np, sizeof *whole.own);
        if (whole.own != NULL)
            memcpy(whole.own, x, n * sizeof *x);
        whole.x = whole.own;
    }
    /* one head slice at a time, in one zero-padded buffer */
    head.n = T * D;
    head.np = padded_len(T * D);
    head.rows = T;
    head.row = D;
    if (need_heads) {
        head.own = calloc(head.np, sizeof *head.own);
        head.x = head.own;
    }
    /* codes and block scales of the whole tensor, or of every head (2 bytes an element
     * covers BF16; a block scale per 16 elements covers every block format) */
    size_t elems = need_heads && H * head.np > whole.np ? H * head.np : whole.np;
    uint8_t *codes = malloc(2 * elems), *scales = malloc(elems / 16 + 1);
    const uint8_t **cp = malloc(H * sizeof *cp), **sp_ = malloc(H * sizeof *sp_);
    if (out->rows == NULL || whole.x == NULL || (need_heads && head.own == NULL) || codes == NULL ||
        scales == NULL || cp == NULL || sp_ == NULL) {
        lowp_why_set(why, why_len, "out of memory for the calibration");
        goto done;
    }

    for (size_t i = 0; i < nspecs; i++) {
        const lowp_calib_spec *sp = &specs[i];
        if (fn != NULL) {
            char what[96];
            snprintf(what, sizeof what, "%s %s %s %s%s", lowp_block_format_name(sp->format),
                     lowp_recipe_name(sp->recipe), lowp_calib_method_name(sp->method), lowp_calib_scope_name(sp->scope),
                     sp->flags & LOWP_BLOCK_SCALE_UP ? " up" : "");
            fn(arg, i, nspecs, what);
        }
        lowp_calib_row *row = &out->rows[i];
        out->n = i + 1;
        row->spec = *sp;
        int has_g = lowp_block_has_global_scale(sp->format);
        size_t ng = !has_g ? 0 : sp->scope == LOWP_CALIB_HEAD ? H : 1;
        row->n_gscales = ng;
        row->gscales = ng ? malloc(ng * sizeof *row->gscales) : NULL;
        row->multipliers = ng && sp->method == LOWP_CALIB_MSE ? malloc(ng * sizeof *row->multipliers) : NULL;
        if (ng && (row->gscales == NULL || (sp->method == LOWP_CALIB_MSE && row->multipliers == NULL))) {
            lowp_why_set(why, why_len, "out of memory for the global scales");
            goto done;
        }
        lowp_quant_counts qc;
        memset(&qc, 0, sizeof qc);
        lowp_stats scl;
        memset(&scl, 0, sizeof scl);
        lowp_stats_quant_view qv = {sp->format, 1, n, cp, sp_, NULL};
        float g1;
        if (sp->scope == LOWP_CALIB_TENSOR || !has_g) {
            choice c = {lowp_global_scale_from_dec(sp->format, sp->recipe, 1.0f), NAN};
            if (has_g && slice_scale(sp, &whole, cap, NULL, &c, why, why_len))
                goto done;
            if (quant_slice(sp, c.gs, &whole, codes, scales, &qc, &scl, why, why_len))
                goto done;
            if (ng) {
                row->gscales[0] = c.gs.dec;
                if (row->multipliers)
                    row->multipliers[0] = c.mult;
            }
            if (sp->method == LOWP_CALIB_MSE && nmemo < LOWP_CALIB_MAX_SPECS) {
                memo[nmemo].valid = 1;
                memo[nmemo].key = *sp;
                memo[nmemo].gs = c.gs;
                nmemo++;
            }
            cp[0] = codes;
            sp_[0] = scales;
            g1 = c.gs.dec;
            qv.gscales = &g1;
        } else {
            /* Per head. The per-tensor mse choice (run now if no earlier spec did) joins
             * the per-head mse candidates. */
            const lowp_global_scale *extra = NULL;
            lowp_global_scale tg;
            if (sp->method == LOWP_CALIB_MSE) {
                int found = 0;
                for (size_t j = 0; j < nmemo; j++)
                    if (memo[j].valid && memo[j].key.format == sp->format && memo[j].key.recipe == sp->recipe &&
                        memo[j].key.flags == sp->flags) {
                        tg = memo[j].gs;
                        found = 1;
                    }
                if (!found) {
                    lowp_calib_spec ts = *sp;
                    ts.scope = LOWP_CALIB_TENSOR;
                    choice c;
                    if (mse_search(&ts, &whole, cap, NULL, &c, why, why_len))
                        goto done;
                    tg = c.gs;
                }
                extra = &tg;
            }
            size_t hcap = cap == 0 ? 0 : (cap / H ? cap / H : 1);
            size_t cb = lowp_block_code_bytes(sp->format, head.np), sb = head.np / lowp_block_size(sp->format);
            for (size_t h = 0; h < H; h++) {
                for (size_t t = 0; t < T; t++)
                    memcpy(head.own + t * D, x + (t * H + h) * D, D * sizeof *x);
                choice c;
                if (slice_scale(sp, &head, hcap, extra, &c, why, why_len))
                    goto done;
                if (quant_slice(sp, c.gs, &head, codes + h * cb, scales + h * sb, &qc, &scl, why, why_len))
                    goto done;
                cp[h] = codes + h * cb;
                sp_[h] = scales + h * sb;
                row->gscales[h] = c.gs.dec;
                if (row->multipliers)
                    row->multipliers[h] = c.mult;
            }
            qv.parts = H;
            qv.width = D;
            qv.gscales = row->gscales;
        }
        if (!lowp_block_has_scales(sp->format))
            qv.scales = NULL;
        size_t bs = lowp_block_size(sp->format);
        if (lowp_stats_compute_quant(x, &qv, n, bs > 1 ? bs : 16, &row->st, why, why_len))
            goto done;
        lowp_stats_set_counts(&row->st, &qc);
        if (scl.has_scales) {
            row->st.has_scales = 1;
            row->st.scale_format = scl.scale_format;
            row->st.scales = scl.scales;
            row->st.scale_zero = scl.scale_zero;
            row->st.scale_subnormal = scl.scale_subnormal;
            row->st.scale_normal = scl.scale_normal;
            row->st.scale_nan = scl.scale_nan;
            memcpy(row->st.scale_hist, scl.scale_hist, sizeof scl.scale_hist);
        }
    }
    if (fn != NULL)
        fn(arg, nspecs, nspecs, "done");
    rc = 0;
done:
    free(whole.own);
    free(head.own);
    free(codes);
    free(scales);
    free(cp);
    free(sp_);
    if (rc != 0)
        lowp_calib_table_free(out);
    return rc;
}

void lowp_calib_table_free(lowp_calib_table *t)
{
    if (t->rows != NULL)
        for (size_t i = 0; i < t->n; i++) {
            free(t->rows[i].gscales);
            free(t->rows[i].multipliers);
        }
    free(t->rows);
    t->rows = NULL;
    t->n = 0;
}

void lowp_calib_rows(const lowp_calib_table *t, lowp_stats_row *rows)
{
    for (size_t i = 0; i < t->n; i++) {
        const lowp_calib_row *r = &t->rows[i];
        lowp_stats_row *w = &rows[i];
        w->format = lowp_block_format_name(r->spec.format);
        w->recipe = lowp_recipe_name(r->spec.recipe);
        w->method = lowp_calib_method_name(r->spec.method);
        w->scope = lowp_calib_scope_name(r->spec.scope);
        w->rounding = r->spec.format != LOWP_NVFP4 ? NULL : (r->spec.flags & LOWP_BLOCK_SCALE_UP) ? "up" : "nearest";
        w->n_gscales = r->n_gscales;
        w->gscales = r->gscales;
        w->st = r->st;
    }
}
