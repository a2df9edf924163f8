/* ref/study/src/attn_sweep.c: the attention error study (see lowp/attn_sweep.h).
 *
 * For each (size, workload): the workload is generated once, the unquantized attention
 * (the baseline) is computed once by lowp_attn_ref_f64, and each config quantizes K and V,
 * runs the same reference and is compared with the baseline. On small contexts the MPFR
 * oracle recomputes a subset of the outputs of every config, which measures the binary64
 * reference's own error against its bound.
 *
 * Determinism: the workload, the quantizer and the statistics are thread-count
 * independent; the statistics below are serial sums in a fixed order. */
#define _POSIX_C_SOURCE 200809L
#include "lowp/attn_sweep.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lowp/why.h"
#include "lowp/calib.h"
#include "lowp/stats.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---------------------------------------------------------------------------------- */
/* statistics                                                                          */

double lowp_attn_tv(const double *p_ref, const double *p, size_t n)
{
    double tv = 0.0;
    for (size_t j = 0; j < n; j++)
        tv += fabs(p[j] - p_ref[j]);
    tv *= 0.5;
    return isnan(tv) ? 1.0 : tv; /* a NaN distribution is as far as a distribution can be */
}

/* The statistics over rows (i, h) in increasing i, then h (the order of every sum); the
 * total-variation distance of a row from p_ref / p when both are given, else from tv
 * (either NULL: none). */
static void err_core(const lowp_attn_shape *s, const double *ref, const double *out, const double *p_ref,
                     const double *p, const double *tv_rows, long head, lowp_attn_err *e)
{
    memset(e, 0, sizeof *e);
    double se = 0.0, sr = 0.0, so = 0.0, sd = 0.0, tv_sum = 0.0, tv_max = 0.0;
    int have_tv = (p_ref != NULL && p != NULL) || tv_rows != NULL;
    size_t h0 = head < 0 ? 0 : (size_t)head, h1 = head < 0 ? s->num_q_heads : (size_t)head + 1;
    for (size_t i = 0; i < s->q_len; i++)
        for (size_t h = h0; h < h1; h++) {
            size_t row = i * s->num_q_heads + h;
            const double *r = ref + row * s->vo_dim, *o = out + row * s->vo_dim;
            for (size_t d = 0; d < s->vo_dim; d++) {
                e->elements++;
                if (!isfinite(r[d]) || !isfinite(o[d])) {
                    /* the same infinity on both sides is agreement; anything else is not */
                    if (!(isinf(r[d]) && r[d] == o[d]))
                        e->nonfinite++;
                    continue;
                }
                double df = o[d] - r[d];
                se += df * df;
                sr += r[d] * r[d];
                so += o[d] * o[d];
                sd += r[d] * o[d];
                if (fabs(df) > e->max_abs)
                    e->max_abs = fabs(df);
            }
            if (have_tv) {
                double tv = tv_rows != NULL ? tv_rows[row] : lowp_attn_tv(p_ref + row * s->ctx, p + row * s->ctx, s->ctx);
                tv_sum += tv;
                if (tv > tv_max)
                    tv_max = tv;
            }
            e->rows++;
        }
    e->rel_l2 = sr > 0 ? sqrt(se / sr) : (se > 0 ? INFINITY : 0.0);
    e->cosine = (sr > 0 && so > 0) ? sd / (sqrt(sr) * sqrt(so)) : (sr == 0 && so == 0 ? 1.0 : 0.0);
    if (e->nonfinite == e->elements && e->elements > 0) /* nothing compared: no error to state */
        e->rel_l2 = e->max_abs = e->cosine = NAN;
    if (have_tv && e->rows > 0) {
        e->tv_mean = tv_sum / (double)e->rows;
        e->tv_max = tv_max;
    } else {
        e->tv_mean = e->tv_max = NAN;
    }
}

void lowp_attn_err_compute(const lowp_attn_shape *s, const double *ref, const double *out, const double *p_ref,
                           const double *p, long head, lowp_attn_err *e)
{
    err_core(s, ref, out, p_ref, p, NULL, head, e);
}

void lowp_attn_err_compute_tv(const lowp_attn_shape *s, const double *ref, const double *out,
                              const double *tv_rows, long head, lowp_attn_err *e)
{
    err_core(s, ref, out, NULL, NULL, tv_rows, head, e);
}

/* ---------------------------------------------------------------------------------- */
/* quantization (the exact data path)                                                  */

lowp_global_scale lowp_sweep_global_scale(lowp_block_format f, lowp_recipe r, lowp_sweep_scale_mode mode,
                                          float amax)
{
    lowp_global_scale one = {1.0f, 1.0f};
    if (!lowp_block_has_global_scale(f))
        return one;
    if (mode == LOWP_SWEEP_SCALE_ONE)
        return lowp_global_scale_from_dec(f, r, 1.0f);
    if (r == LOWP_RECIPE_SGLANG_KV) { /* as lowp/calib.h's amax method for sglang-kv */
        float g = (float)((double)amax / 2688.0);
        if (!(amax > 0.0f) || !isfinite(amax) || !(g > 0.0f))
            g = 1.0f;
        return lowp_global_scale_from_dec(f, r, g);
    }
    return lowp_recipe_global_scale(f, r, amax);
}

int lowp_sweep_quantize_exact(lowp_block_format f, lowp_recipe r, lowp_global_scale gs, const float *x,
                              size_t rows, size_t dim, double *out, lowp_quant_counts *counts, char *why,
                              size_t why_len)
{
    if (lowp_recipe_check(f, r, why, why_len))
        return -1;
    size_t bs = lowp_block_size(f);
    /* rows padded to a whole number of blocks (and to an even count for 4-bit codes) */
    size_t dp = (dim + bs - 1) / bs * bs;
    if (dp % 2)
        dp++;
    if (rows != 0 && dp > SIZE_MAX / 8 / rows)
        return lowp_why_set(why, why_len, "the tensor is too large to quantize");
    size_t n = rows * dp;
    const float *src = x;
    float *pad = NULL;
    if (dp != dim) {
        pad = calloc(n ? n : 1, sizeof *pad);
        if (pad == NULL)
            return lowp_why_set(why, why_len, "out of memory for the padded tensor");
        for (size_t t = 0; t < rows; t++)
            memcpy(pad + t * dp, x + t * dim, dim * sizeof *pad);
        src = pad;
    }
    uint8_t *codes = malloc(lowp_block_code_bytes(f, n) + 1);
    uint8_t *scales = lowp_block_has_scales(f) ? malloc(n / bs + 1) : NULL;
    double *deq = dp != dim ? malloc((n ? n : 1) * sizeof *deq) : out;
    if (codes == NULL || (lowp_block_has_scales(f) && scales == NULL) || deq == NULL) {
        free(pad);
        free(codes);
        free(scales);
        if (deq != out)
            free(deq);
        return lowp_why_set(why, why_len, "out of memory for the quantized tensor");
    }
    int rc = lowp_block_quantize(f, r, gs, 0, src, n, codes, scales, counts, why, why_len);
    if (rc == 0) {
        lowp_stats_dequantize_f64(f, gs.dec, codes, scales, n, deq);
        if (deq != out)
            for (size_t t = 0; t < rows; t++)
                memcpy(out + t * dim, deq + t * dp, dim * sizeof *out);
    }
    free(pad);
    free(codes);
    free(scales);
    if (deq != out)
        free(deq);
    return rc;
}

/* ---------------------------------------------------------------------------------- */
/* configuration                                                                       */

size_t lowp_sweep_default_configs(lowp_sweep_config *cfg)
{
    static const lowp_sweep_config def[] = {
        {"f32", 0, LOWP_BF16_PASS, LOWP_RECIPE_EXACT, LOWP_SWEEP_SCALE_ONE},
        {"bf16", 1, LOWP_BF16_PASS, LOWP_RECIPE_EXACT, LOWP_SWEEP_SCALE_ONE},
        {"fp8 g=amax/448", 1, LOWP_FP8_E4M3, LOWP_RECIPE_EXACT, LOWP_SWEEP_SCALE_CALIBRATED},
        {"fp8 g=1", 1, LOWP_FP8_E4M3, LOWP_RECIPE_EXACT, LOWP_SWEEP_SCALE_ONE},
        {"nvfp4 g=1", 1, LOWP_NVFP4, LOWP_RECIPE_SGLANG_KV, LOWP_SWEEP_SCALE_ONE},
        {"nvfp4 g=amax/2688", 1, LOWP_NVFP4, LOWP_RECIPE_SGLANG_KV, LOWP_SWEEP_SCALE_CALIBRATED},
        {"mxfp4", 1, LOWP_MXFP4, LOWP_RECIPE_OCP, LOWP_SWEEP_SCALE_ONE},
        {"mxfp8", 1, LOWP_MXFP8, LOWP_RECIPE_OCP, LOWP_SWEEP_SCALE_ONE},
    };
    size_t n = sizeof def / sizeof def[0];
    memcpy(cfg, def, sizeof def);
    return n;
}

void lowp_sweep_default_options(lowp_sweep_options *o)
{
    memset(o, 0, sizeof *o);
    o->seed = UINT64_C(0x6c6f7770);
    o->qk_dim = o->vo_dim = 128;
    static const lowp_sweep_size sizes[] = {
        {1024, 4, 32, 8}, {8192, 4, 32, 8}, {32768, 1, 32, 8}, {131072, 1, 8, 2}};
    o->n_sizes = sizeof sizes / sizeof sizes[0];
    memcpy(o->sizes, sizes, sizeof sizes);
    o->workloads = (1u << LOWP_WORKLOAD_KIND_COUNT) - 1;
    o->n_configs = lowp_sweep_default_configs(o->configs);
    o->oracle_max_ctx = 1024;
    o->oracle_kv_heads = 1;
}

/* ---------------------------------------------------------------------------------- */
/* the run                                                                             */

static int push_row(lowp_sweep_result *r, const lowp_sweep_row *row)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 256;
        lowp_sweep_row *nr = realloc(r->rows, cap * sizeof *nr);
        if (nr == NULL)
            return -1;
        r->rows = nr;
        r->cap = cap;
    }
    r->rows[r->n++] = *row;
    return 0;
}

void lowp_sweep_result_free(lowp_sweep_result *r)
{
    if (r == NULL)
        return;
    free(r->rows);
    memset(r, 0, sizeof *r);
}

static double *to_double(const float *x, size_t n)
{
    double *d = malloc((n ? n : 1) * sizeof *d);
    if (d != NULL)
        for (size_t i = 0; i < n; i++)
            d[i] = x[i];
    return d;
}

/* The arithmetic's cost for one query head of one config: the oracle comparison (heads the
 * oracle covered) and the bound (every head). */
typedef struct {
    size_t outputs, bound_outputs;
    double max_abs, rel, bound_max;
    int held;
} arith_acc;

static void arith_init(arith_acc *a)
{
    memset(a, 0, sizeof *a);
    a->held = 1;
}

static void arith_merge(arith_acc *into, const arith_acc *a)
{
    into->outputs += a->outputs;
    into->bound_outputs += a->bound_outputs;
    if (a->max_abs > into->max_abs || isnan(a->max_abs))
        into->max_abs = a->max_abs;
    if (a->rel > into->rel || isnan(a->rel))
        into->rel = a->rel;
    if (a->bound_max > into->bound_max || isnan(a->bound_max))
        into->bound_max = a->bound_max;
    into->held &= a->held;
}

/* The MPFR oracle on the first n_kv KV heads' query groups, compared with the binary64
 * reference's outputs (ref, full shape), and the bound at each compared output. */
static int oracle_check(const lowp_attn_shape *s, const double *q, const double *k, const double *v,
                        const double *ref, const double *bound, size_t n_kv, arith_acc *per_head, char *why,
                        size_t len)
{
    size_t G = s->num_q_heads / s->num_kv_heads, nq = n_kv * G;
    lowp_attn_shape sub = *s;
    sub.num_kv_heads = n_kv;
    sub.num_q_heads = nq;
    size_t D = s->qk_dim, Dv = s->vo_dim;
    double *qs = malloc(s->q_len * nq * D * sizeof *qs), *ks = malloc(s->ctx * n_kv * D * sizeof *ks);
    double *vs = malloc(s->ctx * n_kv * Dv * sizeof *vs), *o64 = malloc(s->q_len * nq * Dv * sizeof *o64);
    int rc = -1;
    if (qs == NULL || ks == NULL || vs == NULL || o64 == NULL) {
        lowp_why_set(why, len, "out of memory for the oracle check");
        goto done;
    }
    for (size_t i = 0; i < s->q_len; i++)
        memcpy(qs + i * nq * D, q + i * s->num_q_heads * D, nq * D * sizeof *qs);
    for (size_t t = 0; t < s->ctx; t++) {
        memcpy(ks + t * n_kv * D, k + t * s->num_kv_heads * D, n_kv * D * sizeof *ks);
        memcpy(vs + t * n_kv * Dv, v + t * s->num_kv_heads * Dv, n_kv * Dv * sizeof *vs);
    }
    if (lowp_attn_oracle_mpfr(&sub, qs, ks, vs, 0, NULL, o64, why, len))
        goto done;
    for (size_t i = 0; i < s->q_len; i++)
        for (size_t h = 0; h < nq; h++)
            for (size_t d = 0; d < Dv; d++) {
                size_t at = (i * s->num_q_heads + h) * Dv + d;
                double o = o64[(i * nq + h) * Dv + d], r = ref[at], b = bound[at];
                arith_acc *a = &per_head[h];
                a->outputs++;
                if (isnan(o) && isnan(r))
                    continue;
                double err = fabs(r - o);
                if (!(err <= a->max_abs))
                    a->max_abs = err;
                if (o != 0 && !(err / fabs(o) <= a->rel))
                    a->rel = err / fabs(o);
                /* the bound is on |ref - exact|; o64 is exact rounded once to binary64 */
                if (!(err <= b + fabs(o) * 0x1p-53))
                    a->held = 0;
            }
    rc = 0;
done:
    free(qs);
    free(ks);
    free(vs);
    free(o64);
    return rc;
}

/* The bound at every output (lowp_attn_ref_bounds), its maximum per query head. */
static void bound_all(const lowp_attn_shape *s, const double *bound, arith_acc *per_head)
{
    for (size_t i = 0; i < s->q_len; i++)
        for (size_t h = 0; h < s->num_q_heads; h++) {
            arith_acc *a = &per_head[h];
            for (size_t d = 0; d < s->vo_dim; d++) {
                double b = bound[(i * s->num_q_heads + h) * s->vo_dim + d];
                a->bound_outputs++;
                if (!(b <= a->bound_max))
                    a->bound_max = b;
            }
        }
}

static double needle_mass(const lowp_attn_shape *s, const double *p, const size_t *needle, long head)
{
    if (needle == NULL || p == NULL)
        return NAN;
    size_t G = s->num_q_heads / s->num_kv_heads, rows = 0;
    size_t h0 = head < 0 ? 0 : (size_t)head, h1 = head < 0 ? s->num_q_heads : (size_t)head + 1;
    double sum = 0.0;
    for (size_t i = 0; i < s->q_len; i++)
        for (size_t h = h0; h < h1; h++) {
            sum += p[(i * s->num_q_heads + h) * s->ctx + needle[h / G]];
            rows++;
        }
    return rows ? sum / (double)rows : NAN;
}

typedef struct {
    double *qd, *kd, *vd;       /* the workload as doubles (the unquantized cache) */
    double *kq, *vq;            /* a config's dequantized cache */
    double *out_b, *p_b;        /* baseline output and distributions */
    double *out_q, *p_q;        /* a config's */
    double *bound;              /* lowp_attn_ref_bounds of a config's reference */
    arith_acc *arith;           /* [num_q_heads] */
} bufs;

static void bufs_free(bufs *b)
{
    free(b->qd);
    free(b->kd);
    free(b->vd);
    free(b->kq);
    free(b->vq);
    free(b->out_b);
    free(b->p_b);
    free(b->out_q);
    free(b->p_q);
    free(b->arith);
    free(b->bound);
    memset(b, 0, sizeof *b);
}

static int run_case(const lowp_sweep_options *o, lowp_workload_kind kind, const lowp_sweep_size *sz,
                    lowp_sweep_result *r, size_t *done, size_t total, char *why, size_t len)
{
    lowp_attn_shape s;
    memset(&s, 0, sizeof s);
    s.q_len = sz->q_len;
    s.num_q_heads = sz->num_q_heads;
    s.num_kv_heads = sz->num_kv_heads;
    s.qk_dim = o->qk_dim;
    s.vo_dim = o->vo_dim;
    s.ctx = sz->ctx;
    s.q_offset = sz->ctx - sz->q_len;
    if (sz->q_len > sz->ctx)
        return lowp_why_set(why, len, "a sweep size has q_len > ctx");
    if (lowp_attn_check_shape(&s, why, len))
        return -1;
    lowp_workload w;
    if (lowp_workload_make(kind, o->seed, &s, &w, why, len))
        return -1;
    size_t nq = s.q_len * s.num_q_heads * s.qk_dim, nk = s.ctx * s.num_kv_heads * s.qk_dim;
    size_t nv = s.ctx * s.num_kv_heads * s.vo_dim, no = s.q_len * s.num_q_heads * s.vo_dim;
    size_t np = s.q_len * s.num_q_heads * s.ctx;
    bufs b;
    memset(&b, 0, sizeof b);
    b.qd = to_double(w.q, nq);
    b.kd = to_double(w.k, nk);
    b.vd = to_double(w.v, nv);
    b.kq = malloc(nk * sizeof *b.kq);
    b.vq = malloc(nv * sizeof *b.vq);
    b.out_b = malloc(no * sizeof *b.out_b);
    b.out_q = malloc(no * sizeof *b.out_q);
    b.p_b = malloc(np * sizeof *b.p_b);
    b.p_q = malloc(np * sizeof *b.p_q);
    b.arith = malloc(s.num_q_heads * sizeof *b.arith);
    b.bound = malloc(no * sizeof *b.bound);
    int rc = -1;
    if (b.qd == NULL || b.kd == NULL || b.vd == NULL || b.kq == NULL || b.vq == NULL || b.out_b == NULL ||
        b.out_q == NULL || b.p_b == NULL || b.p_q == NULL || b.arith == NULL) {
        lowp_why_set(why, len, "out of memory for a sweep case");
        goto done;
    }
    char what[160];
    snprintf(what, sizeof what, "%s ctx %zu: baseline", lowp_workload_name(kind), s.ctx);
    if (o->progress != NULL)
        o->progress(o->progress_arg, *done, total, what);
    double t_base = now_s();
    if (lowp_attn_ref_f64(&s, b.qd, b.kd, b.vd, b.out_b, b.p_b, why, len))
        goto done;
    t_base = now_s() - t_base; /* counted in config 0's time below */
    float kamax = lowp_calib_amax(w.k, nk), vamax = lowp_calib_amax(w.v, nv);
    int oracle = o->oracle_max_ctx > 0 && s.ctx <= o->oracle_max_ctx && o->oracle_kv_heads > 0;
    size_t n_kv = o->oracle_kv_heads < s.num_kv_heads ? o->oracle_kv_heads : s.num_kv_heads;
    for (size_t c = 0; c < o->n_configs; c++) {
        const lowp_sweep_config *cf = &o->configs[c];
        double t0 = now_s();
        snprintf(what, sizeof what, "%s ctx %zu: %s", lowp_workload_name(kind), s.ctx, cf->label);
        if (o->progress != NULL)
            o->progress(o->progress_arg, *done, total, what);
        lowp_sweep_row row;
        memset(&row, 0, sizeof row);
        row.workload = kind;
        row.shape = s;
        row.config = c;
        row.k_scale = row.v_scale = 1.0f;
        const double *ke = b.kd, *ve = b.vd, *oq = b.out_b, *pq = b.p_b;
        if (cf->quantized) {
            lowp_global_scale kg = lowp_sweep_global_scale(cf->format, cf->recipe, cf->scale, kamax);
            lowp_global_scale vg = lowp_sweep_global_scale(cf->format, cf->recipe, cf->scale, vamax);
            row.k_scale = kg.dec;
            row.v_scale = vg.dec;
            if (lowp_sweep_quantize_exact(cf->format, cf->recipe, kg, w.k, s.ctx * s.num_kv_heads, s.qk_dim, b.kq,
                                          &row.k_counts, why, len) ||
                lowp_sweep_quantize_exact(cf->format, cf->recipe, vg, w.v, s.ctx * s.num_kv_heads, s.vo_dim, b.vq,
                                          &row.v_counts, why, len))
                goto done;
            if (lowp_attn_ref_f64(&s, b.qd, b.kq, b.vq, b.out_q, b.p_q, why, len))
                goto done;
            ke = b.kq;
            ve = b.vq;
            oq = b.out_q;
            pq = b.p_q;
        }
        for (size_t h = 0; h < s.num_q_heads; h++)
            arith_init(&b.arith[h]);
        int arith_run = 0;
        if (lowp_attn_ref_bounds(&s, b.qd, ke, ve, b.bound, why, len))
            goto done;
        bound_all(&s, b.bound, b.arith);
        if (oracle) {
            snprintf(what, sizeof what, "%s ctx %zu: %s (MPFR oracle)", lowp_workload_name(kind), s.ctx, cf->label);
            if (o->progress != NULL)
                o->progress(o->progress_arg, *done, total, what);
            if (oracle_check(&s, b.qd, ke, ve, oq, b.bound, n_kv, b.arith, why, len))
                goto done;
            arith_run = 1;
        }
        double secs = now_s() - t0 + (c == 0 ? t_base : 0.0);
        for (long h = -1; h < (long)s.num_q_heads; h++) {
            row.head = h;
            lowp_attn_err_compute(&s, b.out_b, oq, b.p_b, pq, h, &row.err);
            row.needle_p_ref = needle_mass(&s, b.p_b, w.needle, h);
            row.needle_p = needle_mass(&s, pq, w.needle, h);
            arith_acc a;
            arith_init(&a);
            if (h < 0)
                for (size_t hh = 0; hh < s.num_q_heads; hh++)
                    arith_merge(&a, &b.arith[hh]);
            else
                a = b.arith[h];
            row.arith_outputs = a.outputs;
            row.arith_max_abs = arith_run && a.outputs ? a.max_abs : NAN;
            row.arith_rel = arith_run && a.outputs ? a.rel : NAN;
            row.bound_outputs = a.bound_outputs;
            row.bound_max = a.bound_outputs ? a.bound_max : NAN;
            row.bound_held = arith_run && a.outputs ? a.held : -1;
            row.seconds = h < 0 ? secs : NAN;
            if (push_row(r, &row)) {
                lowp_why_set(why, len, "out of memory for the result rows");
                goto done;
            }
        }
        (*done)++;
    }
    rc = 0;
done:
    bufs_free(&b);
    lowp_workload_free(&w);
    return rc;
}

int lowp_sweep_run(const lowp_sweep_options *o, lowp_sweep_result *r, char *why, size_t why_len)
{
    memset(r, 0, sizeof *r);
    r->opt = *o;
    if (o->n_sizes == 0 || o->n_sizes > LOWP_SWEEP_MAX_SIZES)
        return lowp_why_set(why, why_len, "the sweep needs 1 to 16 sizes");
    if (o->n_configs == 0 || o->n_configs > LOWP_SWEEP_MAX_CONFIGS)
        return lowp_why_set(why, why_len, "the sweep needs 1 to 16 configs");
    if ((o->workloads & ((1u << LOWP_WORKLOAD_KIND_COUNT) - 1)) == 0)
        return lowp_why_set(why, why_len, "the sweep needs at least one workload");
    for (size_t c = 0; c < o->n_configs; c++)
        if (o->configs[c].quantized && lowp_recipe_check(o->configs[c].format, o->configs[c].recipe, why, why_len))
            return -1;
    size_t nw = 0;
    for (int k = 0; k < LOWP_WORKLOAD_KIND_COUNT; k++)
        nw += (o->workloads >> k) & 1u;
    size_t total = nw * o->n_sizes * o->n_configs, done = 0;
    double t0 = now_s();
    for (size_t z = 0; z < o->n_sizes; z++)
        for (int k = 0; k < LOWP_WORKLOAD_KIND_COUNT; k++) {
            if (!((o->workloads >> k) & 1u))
                continue;
            if (run_case(o, (lowp_workload_kind)k, &o->sizes[z], r, &done, total, why, why_len)) {
                lowp_sweep_result_free(r);
                return -1;
            }
        }
    r->seconds = now_s() - t0;
    if (o->progress != NULL)
        o->progress(o->progress_arg, done, total, "done");
    return 0;
}

/* ---------------------------------------------------------------------------------- */
/* output                                                                              */

/* %.4g, with NaN as "-" (not evaluated) and infinities spelled out */
static const char *num(char *buf, size_t len, double x)
{
    if (isnan(x))
        snprintf(buf, len, "-");
    else if (isinf(x))
        snprintf(buf, len, "%sinf", x < 0 ? "-" : "");
    else
        snprintf(buf, len, "%.4g", x);
    return buf;
}

/* CSV numbers: 9 significant digits (statistics, not values to reproduce bit for bit);
 * NaN as an empty field */
static void csv_num(FILE *f, double x)
{
    if (isnan(x))
        fputs(",", f);
    else if (isinf(x))
        fprintf(f, ",%sinf", x < 0 ? "-" : "");
    else
        fprintf(f, ",%.9g", x);
}

int lowp_sweep_write_csv(FILE *f, const lowp_sweep_result *r)
{
    fputs("workload,ctx,q_len,num_q_heads,num_kv_heads,qk_dim,vo_dim,config,format,recipe,quantized,head,"
          "k_scale,v_scale,rel_l2,max_abs,cosine,tv_mean,tv_max,nonfinite,needle_p_ref,needle_p,"
          "k_saturated,k_flushed,k_nan_out,k_scale_subnormal,k_scale_zero,v_saturated,v_flushed,v_nan_out,"
          "v_scale_subnormal,v_scale_zero,arith_outputs,arith_max_abs,arith_rel,bound_outputs,bound_max,"
          "bound_held,seconds\n",
          f);
    for (size_t i = 0; i < r->n; i++) {
        const lowp_sweep_row *w = &r->rows[i];
        const lowp_sweep_config *c = &r->opt.configs[w->config];
        fprintf(f, "%s,%zu,%zu,%zu,%zu,%zu,%zu,%s,%s,%s,%d,", lowp_workload_name(w->workload), w->shape.ctx,
                w->shape.q_len, w->shape.num_q_heads, w->shape.num_kv_heads, w->shape.qk_dim, w->shape.vo_dim,
                c->label, c->quantized ? lowp_block_format_name(c->format) : "f32",
                c->quantized ? lowp_recipe_name(c->recipe) : "-", c->quantized);
        if (w->head < 0)
            fputs("all", f);
        else
            fprintf(f, "%ld", w->head);
        csv_num(f, w->k_scale);
        csv_num(f, w->v_scale);
        csv_num(f, w->err.rel_l2);
        csv_num(f, w->err.max_abs);
        csv_num(f, w->err.cosine);
        csv_num(f, w->err.tv_mean);
        csv_num(f, w->err.tv_max);
        fprintf(f, ",%zu", w->err.nonfinite);
        csv_num(f, w->needle_p_ref);
        csv_num(f, w->needle_p);
        const lowp_quant_counts *kc = &w->k_counts, *vc = &w->v_counts;
        fprintf(f, ",%zu,%zu,%zu,%zu,%zu,%zu,%zu,%zu,%zu,%zu,%zu", kc->saturated, kc->flushed, kc->nan_out,
                kc->scale_subnormal, kc->scale_zero, vc->saturated, vc->flushed, vc->nan_out, vc->scale_subnormal,
                vc->scale_zero, w->arith_outputs);
        csv_num(f, w->arith_max_abs);
        csv_num(f, w->arith_rel);
        fprintf(f, ",%zu", w->bound_outputs);
        csv_num(f, w->bound_max);
        if (w->bound_held < 0)
            fputs(",", f);
        else
            fprintf(f, ",%d", w->bound_held);
        csv_num(f, w->seconds);
        fputc('\n', f);
    }
    return ferror(f) ? -1 : 0;
}

int lowp_sweep_print_table(FILE *f, const lowp_sweep_result *r)
{
    char b[8][32];
    fprintf(f, "%-10s %7s %5s %-18s %10s %10s %10s %10s %10s %9s %10s %10s\n", "workload", "ctx", "q_len", "config",
            "rel_L2", "max_abs", "cosine", "TV_mean", "TV_max", "needle_p", "ref-oracle", "ref_bound");
    for (size_t i = 0; i < r->n; i++) {
        const lowp_sweep_row *w = &r->rows[i];
        if (w->head >= 0)
            continue;
        fprintf(f, "%-10s %7zu %5zu %-18s %10s %10s %10.7f %10s %10s %9s %10s %10s\n", lowp_workload_name(w->workload),
                w->shape.ctx, w->shape.q_len, r->opt.configs[w->config].label, num(b[0], 32, w->err.rel_l2),
                num(b[1], 32, w->err.max_abs), w->err.cosine, num(b[2], 32, w->err.tv_mean),
                num(b[3], 32, w->err.tv_max), num(b[4], 32, w->needle_p), num(b[5], 32, w->arith_max_abs),
                num(b[6], 32, w->bound_max));
    }
    return ferror(f) ? -1 : 0;
}

/* The all-heads row of (workload, size index, config), or NULL. */
static const lowp_sweep_row *find_row(const lowp_sweep_result *r, lowp_workload_kind k, size_t ctx, size_t c)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->rows[i].head < 0 && r->rows[i].workload == k && r->rows[i].shape.ctx == ctx && r->rows[i].config == c)
            return &r->rows[i];
    return NULL;
}

/* The worst per-head value of a metric for (workload, ctx, config). */
typedef double (*metric_fn)(const lowp_sweep_row *w);
static double m_rel(const lowp_sweep_row *w) { return w->err.rel_l2; }
static double m_max_abs(const lowp_sweep_row *w) { return w->err.max_abs; }
static double m_tv_mean(const lowp_sweep_row *w) { return w->err.tv_mean; }
static double m_tv_max(const lowp_sweep_row *w) { return w->err.tv_max; }
static double m_needle(const lowp_sweep_row *w) { return w->needle_p; }
static double m_kflush(const lowp_sweep_row *w)
{
    double n = (double)(w->shape.ctx * w->shape.num_kv_heads * w->shape.qk_dim);
    return n > 0 ? 100.0 * (double)w->k_counts.flushed / n : NAN;
}

static double worst_head(const lowp_sweep_result *r, lowp_workload_kind k, size_t ctx, size_t c, metric_fn m,
                         int lower_is_worse)
{
    double worst = NAN;
    for (size_t i = 0; i < r->n; i++) {
        const lowp_sweep_row *w = &r->rows[i];
        if (w->head < 0 || w->workload != k || w->shape.ctx != ctx || w->config != c)
            continue;
        double v = m(w);
        if (isnan(worst) || (lower_is_worse ? v < worst : v > worst) || isnan(v))
            worst = v;
    }
    return worst;
}

/* One matrix: rows (workload, ctx), columns the quantized configs; "a / b" cells when
 * `second` is given (all heads / worst head, or mean / max). */
static void md_matrix(FILE *f, const lowp_sweep_result *r, const char *title, const char *note, metric_fn m,
                      int worst, int lower_is_worse, int needle_only)
{
    const lowp_sweep_options *o = &r->opt;
    fprintf(f, "\n### %s\n\n%s\n\n| workload | ctx |", title, note);
    for (size_t c = 0; c < o->n_configs; c++)
        if (o->configs[c].quantized || needle_only)
            fprintf(f, " %s |", o->configs[c].label);
    fputs("\n|---|---:|", f);
    for (size_t c = 0; c < o->n_configs; c++)
        if (o->configs[c].quantized || needle_only)
            fputs("---:|", f);
    fputc('\n', f);
    for (int k = 0; k < LOWP_WORKLOAD_KIND_COUNT; k++) {
        if (!((o->workloads >> k) & 1u) || (needle_only && k != LOWP_WL_NEEDLE))
            continue;
        for (size_t z = 0; z < o->n_sizes; z++) {
            size_t ctx = o->sizes[z].ctx;
            fprintf(f, "| %s | %zu |", lowp_workload_name((lowp_workload_kind)k), ctx);
            for (size_t c = 0; c < o->n_configs; c++) {
                if (!o->configs[c].quantized && !needle_only)
                    continue;
                const lowp_sweep_row *w = find_row(r, (lowp_workload_kind)k, ctx, c);
                char b0[32], b1[32];
                if (w == NULL)
                    fputs(" - |", f);
                else if (worst)
                    fprintf(f, " %s / %s |", num(b0, 32, m(w)),
                            num(b1, 32, worst_head(r, (lowp_workload_kind)k, ctx, c, m, lower_is_worse)));
                else
                    fprintf(f, " %s |", num(b0, 32, m(w)));
            }
            fputc('\n', f);
        }
    }
}

static double cosine_gap(const lowp_sweep_row *w) { return 1.0 - w->err.cosine; }

int lowp_sweep_write_markdown(FILE *f, const lowp_sweep_result *r, const char *command, const char *machine,
                              const char *commit)
{
    const lowp_sweep_options *o = &r->opt;
    fputs("# Attention error across KV-cache formats\n\n", f);
    fprintf(f, "Generated by `%s`", command != NULL ? command : "lowp attn-sweep");
    if (machine != NULL)
        fprintf(f, " on %s", machine);
    if (commit != NULL)
        fprintf(f, " (source commit %s)", commit);
    fprintf(f, "; the sweep took %.1f s. Seed 0x%llx. Every number below is reproduced by the same command "
               "(the workloads, the quantizers and the statistics do not depend on the thread count).\n",
            r->seconds, (unsigned long long)o->seed);

    fputs("\n## What is measured\n\n"
          "**The format's cost.** For each workload, K and V are quantized as whole tensors "
          "`[ctx, num_kv_heads, dim]` (blocks along the head dim; the global scale, where the format has "
          "one, from the whole K or V tensor) and dequantized exactly (the `exact` data path: no "
          "intermediate rounding). The attention over that cache is compared with the attention over the "
          "unquantized binary32 cache, **both computed by the same binary64 reference** "
          "(`lowp_attn_ref_f64` at every context; `lowp_attn_paged_decode` gives the same bits on a paged "
          "cache but no softmax distribution, which the TV metric needs), exact math up to its bound: the "
          "difference is what the format costs, nothing else. Query token i sits at position ctx - q_len + i (causal decode / speculative "
          "verify), softmax scale 1/sqrt(qk_dim).\n\n"
          "**The arithmetic's cost.** At contexts up to ",
          f);
    fprintf(f, "%zu tokens the MPFR oracle (`lowp_attn_oracle_mpfr`, 128 bits, Ziv retries where needed, "
               "rounded once to binary64) recomputes every output of the first %zu KV head(s)' query group, for "
               "every config (the unquantized cache included); the tables report max |binary64 reference - "
               "oracle| beside the reference's derived a-priori bound (`lowp_attn_ref_bounds`, ref/attn/src/attn_ref.c: "
               "dot products within gamma_{D+1}, glibc exp within 1 ulp, sums within gamma_{n+C}, from the "
               "magnitudes max_j sum_d |q_d k_jd| and max_j |v_je| only) and whether the bound held at every "
               "compared output. The oracle is for small cases and is not run on the longer contexts; there the "
               "bound alone, evaluated at every output, covers the reference. Wherever the bound is far below the "
               "format's error, the format numbers are the format's alone.\n",
            o->oracle_max_ctx, o->oracle_kv_heads);
    fputs("\n**Configs.** `bf16`: RN to BF16. `fp8 g=amax/448`: FP8 E4M3 with a calibrated per-tensor scale "
          "(the vLLM/TRT-LLM/SGLang FP8 KV write, saturating). `fp8 g=1`: the same with the uncalibrated "
          "1.0 scale (a checkpoint without scales). `nvfp4 g=1`: NVFP4 with FlashInfer's `nvfp4_kv_quantize` "
          "arithmetic (recipe `sglang-kv`) and the global scale 1.0 SGLang ships. `nvfp4 g=amax/2688`: the "
          "same kernel with a calibrated global scale (amax / (6 x 448), what a calibrated checkpoint "
          "provides). `mxfp4`, `mxfp8`: OCP MX v1.0 (E8M0 block scale from floor(log2 amax)), no global "
          "scale.\n\n"
          "**Workloads** (`lowp/workload.h`): `gaussian` i.i.d. N(0,1) Q/K/V (flat softmax); `k-outlier` "
          "pre-RoPE keys with 4 massive channels per head (20..200x; lowp k-like generator), whitened "
          "queries, v-like values; `rope` the same keys and queries rotated by RoPE at their positions, "
          "queries aligned with the key mean (relative-position structure); `needle` one key per KV head "
          "strongly aligned with its queries among Gaussian keys (most of the softmax mass at 1K, about "
          "three quarters at 128K); `small` the gaussian workload with K and V scaled by 2^-8 and Q by 2^8 "
          "(the same scores): a low-magnitude layer, where a global scale left at 1.0 puts NVFP4 block "
          "scales and FP8 elements into the E4M3 subnormals.\n\n"
          "**Metrics** over all query tokens and heads (per head in the CSV): relative L2 error of the "
          "output, max abs error, cosine similarity, and the total-variation distance 0.5 sum_j |p_j - p~_j| "
          "of each row's softmax distribution (mean and max over rows).\n",
          f);
    fputs("\n**Sizes.**\n\n| ctx | q_len | query heads | KV heads | qk_dim | vo_dim |\n|---:|---:|---:|---:|---:|---:|\n",
          f);
    for (size_t z = 0; z < o->n_sizes; z++)
        fprintf(f, "| %zu | %zu | %zu | %zu | %zu | %zu |\n", o->sizes[z].ctx, o->sizes[z].q_len,
                o->sizes[z].num_q_heads, o->sizes[z].num_kv_heads, o->qk_dim, o->vo_dim);

    fputs("\n## The format's cost\n", f);
    md_matrix(f, r, "Relative L2 error of the output", "All heads / worst head.", m_rel, 1, 0, 0);
    md_matrix(f, r, "Max abs error of the output", "All heads.", m_max_abs, 0, 0, 0);
    md_matrix(f, r, "1 - cosine similarity of the output", "All heads / worst head.", cosine_gap, 1, 0, 0);
    md_matrix(f, r, "Softmax total-variation distance, mean", "Mean over query rows (all heads).", m_tv_mean, 0,
              0, 0);
    md_matrix(f, r, "Softmax total-variation distance, worst row", "Max over rows and heads.", m_tv_max, 0, 0, 0);
    md_matrix(f, r, "K elements flushed to zero, percent",
              "Nonzero K elements the quantizer coded as zero (all heads): what a block scale set by an outlier, "
              "or a subnormal scale, erases.",
              m_kflush, 0, 0, 0);
    md_matrix(f, r, "Softmax mass on the needle",
              "Mean over query rows; `f32` is the unquantized cache (needle workload only).", m_needle, 0, 1, 1);

    fputs("\n## The arithmetic's cost\n\nPer case, over every config (the unquantized cache included): the "
          "outputs compared with the MPFR oracle, the largest |binary64 reference - oracle| among them, the "
          "largest bound of the reference at any output, whether |ref - oracle| <= bound + half an ulp of "
          "binary64 held at every compared output, and, for scale, the smallest max abs error of any format "
          "in that case with the ratio of the two (the bound covers the reference where the oracle does not "
          "run). Per config in the CSV (`arith_*`, `bound_*`).\n\n"
          "| workload | ctx | outputs vs oracle | max abs ref-oracle | max bound | held | smallest format max abs | "
          "bound / that |\n|---|---:|---:|---:|---:|---|---:|---:|\n",
          f);
    double worst_ratio = 0.0;
    const lowp_sweep_row *worst_at = NULL;
    for (int k = 0; k < LOWP_WORKLOAD_KIND_COUNT; k++) {
        if (!((o->workloads >> k) & 1u))
            continue;
        for (size_t z = 0; z < o->n_sizes; z++) {
            size_t outputs = 0;
            double amax = NAN, bmax = 0.0, fmin = INFINITY;
            int held = -1;
            const lowp_sweep_row *fmin_at = NULL;
            for (size_t c = 0; c < o->n_configs; c++) {
                const lowp_sweep_row *w = find_row(r, (lowp_workload_kind)k, o->sizes[z].ctx, c);
                if (w == NULL)
                    continue;
                outputs += w->arith_outputs;
                if (!isnan(w->arith_max_abs) && (isnan(amax) || w->arith_max_abs > amax))
                    amax = w->arith_max_abs;
                if (!(w->bound_max <= bmax))
                    bmax = w->bound_max;
                if (w->bound_held >= 0)
                    held = held < 0 ? w->bound_held : (held && w->bound_held);
                if (o->configs[c].quantized && w->err.max_abs < fmin) {
                    fmin = w->err.max_abs;
                    fmin_at = w;
                }
            }
            double ratio = fmin_at != NULL && fmin > 0 ? bmax / fmin : NAN;
            if (!isnan(ratio) && ratio > worst_ratio) {
                worst_ratio = ratio;
                worst_at = fmin_at;
            }
            char b0[32], b1[32], b2[32], b3[32];
            fprintf(f, "| %s | %zu | %zu | %s | %s | %s | %s (%s) | %s |\n", lowp_workload_name((lowp_workload_kind)k),
                    o->sizes[z].ctx, outputs, num(b0, 32, amax), num(b1, 32, bmax),
                    held < 0 ? "-" : held ? "yes" : "**no**", num(b2, 32, fmin),
                    fmin_at != NULL ? o->configs[fmin_at->config].label : "-", num(b3, 32, ratio));
        }
    }
    if (worst_at != NULL) {
        char b0[32];
        fprintf(f, "\nThe largest ratio of the reference's bound to a format's max abs error anywhere in the sweep is "
                   "%s (%s, ctx %zu, %s): the arithmetic's cost is that much below the cheapest format's.\n",
                num(b0, 32, worst_ratio), lowp_workload_name(worst_at->workload), worst_at->shape.ctx,
                o->configs[worst_at->config].label);
    }

    fputs("\n## What the quantizers did\n\nElements of K and V saturated (coded as the largest magnitude while "
          "beyond it), flushed to zero, or NaN, and E4M3 block scales in the subnormal range, summed over "
          "the cases of each config (all contexts and workloads).\n\n"
          "| config | K saturated | K flushed | K NaN | K subnormal scales | V saturated | V flushed | V NaN | V "
          "subnormal scales |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
          f);
    for (size_t c = 0; c < o->n_configs; c++) {
        if (!o->configs[c].quantized)
            continue;
        lowp_quant_counts kc, vc;
        memset(&kc, 0, sizeof kc);
        memset(&vc, 0, sizeof vc);
        for (size_t i = 0; i < r->n; i++) {
            const lowp_sweep_row *w = &r->rows[i];
            if (w->head >= 0 || w->config != c)
                continue;
            lowp_quant_counts_add(&kc, &w->k_counts);
            lowp_quant_counts_add(&vc, &w->v_counts);
        }
        fprintf(f, "| %s | %zu | %zu | %zu | %zu | %zu | %zu | %zu | %zu |\n", o->configs[c].label, kc.saturated,
                kc.flushed, kc.nan_out, kc.scale_subnormal, vc.saturated, vc.flushed, vc.nan_out,
                vc.scale_subnormal);
    }

    fputs("\n## Runtime\n\nSeconds per case (quantize K and V, the reference, the oracle check where it runs), "
          "summed over the configs.\n\n| workload | ctx | seconds |\n|---|---:|---:|\n",
          f);
    for (int k = 0; k < LOWP_WORKLOAD_KIND_COUNT; k++) {
        if (!((o->workloads >> k) & 1u))
            continue;
        for (size_t z = 0; z < o->n_sizes; z++) {
            double sec = 0.0;
            for (size_t c = 0; c < o->n_configs; c++) {
                const lowp_sweep_row *w = find_row(r, (lowp_workload_kind)k, o->sizes[z].ctx, c);
                if (w != NULL && !isnan(w->seconds))
                    sec += w->seconds;
            }
            fprintf(f, "| %s | %zu | %.2f |\n", lowp_workload_name((lowp_workload_kind)k), o->sizes[z].ctx, sec);
        }
    }
    fputs("\nThe full table, per head, is the CSV beside this file.\n", f);
    return ferror(f) ? -1 : 0;
}
