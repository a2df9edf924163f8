/* ref/select/src/sparse_attn.c: attention over the selected tokens, QSA's production path
 * and the binary64 reference (lowp/select.h states both step by step). */
#include <math.h>
#include <stdlib.h>

#include "lowp/bits.h"
#include "lowp/format.h"
#include "lowp/select.h"
#include "lowp/why.h"

/* Triton's fp32 -> bf16 / fp16 conversions (cvt.rn: nearest even, overflow to Inf) */
typedef struct sparse_codecs {
    lowp_codec bf16, f16;
} sparse_codecs;

/* A value the target format holds is its own rounding: those skip the codec (the cache's
 * elements, which are all of them in a quantized cache, widen exactly; the codec rounds the
 * rest). BF16 holds a binary32 whose low 16 bits are 0 (NaN included: the codec quiets it,
 * so NaN goes to it). fp16 holds a binary32 of magnitude in [2^-14, 65504] with the low 13
 * bits 0 (a normal fp16: 11 significant bits), and 0. */
static float to_bf16(const sparse_codecs *c, float x)
{
    if ((lowp_f32_bits(x) & 0xffffu) == 0 && x == x)
        return x;
    return lowp_decode_f32(LOWP_BF16, lowp_encode_f32(&c->bf16, x));
}

static float to_f16(const sparse_codecs *c, float x)
{
    float a = fabsf(x);
    if (x == 0.0f || (a >= 0x1p-14f && a <= 65504.0f && (lowp_f32_bits(x) & 0x1fffu) == 0))
        return x;
    return lowp_decode_f32(LOWP_F16, lowp_encode_f32(&c->f16, x));
}

static void exact_path(const lowp_sparse_attn_args *a, const float *q, const float *k, const float *v, size_t n,
                       const float *gate, double *out, double *w, double *acc)
{
    size_t d = a->dim;
    double sc = a->k_scale / sqrt((double)d), m = -INFINITY;
    for (size_t j = 0; j < n; j++) {
        double s = 0.0;
        for (size_t i = 0; i < d; i++)
            s += (double)q[i] * (double)k[j * d + i];
        w[j] = s * sc;
        m = w[j] > m ? w[j] : m;
    }
    double l = 0.0;
    for (size_t j = 0; j < n; j++) {
        w[j] = exp(w[j] - m);
        l += w[j];
    }
    /* acc[e] sums over j in order: the loops run j outside for V's row-major layout */
    for (size_t e = 0; e < d; e++)
        acc[e] = 0.0;
    for (size_t j = 0; j < n; j++)
        for (size_t e = 0; e < d; e++)
            acc[e] += w[j] * (double)v[j * d + e];
    for (size_t e = 0; e < d; e++) {
        double o = n ? a->v_scale * acc[e] / l : 0.0;
        out[e] = gate ? o / (1.0 + exp(-(double)gate[e])) : o;
    }
}

static void production_path(const sparse_codecs *c, const lowp_sparse_attn_args *a, const float *q, const float *k,
                            const float *v, size_t n, const float *gate, double *out, double *w, double *acc,
                            float *qb)
{
    size_t d = a->dim;
    int fp8 = a->path == LOWP_SPARSE_FP8;
    double ks = fp8 ? a->k_scale : 1.0, vs = fp8 ? a->v_scale : 1.0;
    float softmax_scale = (float)(pow((double)d, -0.5) * ks);         /* step 1 */
    float score_scale = softmax_scale * (float)1.4426950408889634;
    float output_scale = (float)vs;
    for (size_t i = 0; i < d; i++)
        qb[i] = to_bf16(c, q[i]);
    float m = -INFINITY;
    for (size_t j = 0; j < n; j++) {                                    /* step 3 */
        double s = 0.0;
        for (size_t i = 0; i < d; i++)
            s += (double)qb[i] * (double)to_bf16(c, k[j * d + i]); /* exact BF16 products */
        float sj = (float)s * score_scale;
        w[j] = sj;
        m = sj > m ? sj : m; /* tl.maximum; a NaN score is carried by its own p below */
    }
    double lsum = 0.0;
    for (size_t j = 0; j < n; j++) {                                    /* step 4 */
        float p = (float)exp2((double)((float)w[j] - m));
        lsum += (double)p;
        w[j] = fp8 ? to_f16(c, p) : to_bf16(c, p); /* step 5: P in V's dtype */
    }
    float l = (float)lsum;
    float inv = output_scale / (l > 1e-20f ? l : 1e-20f); /* step 6 */
    for (size_t e = 0; e < d; e++)
        acc[e] = 0.0;
    for (size_t j = 0; j < n; j++) /* acc[e] in order of j (j outside: V is row-major) */
        for (size_t e = 0; e < d; e++) {
            float ve = v[j * d + e];
            acc[e] += w[j] * (double)(fp8 ? to_f16(c, ve) : to_bf16(c, ve)); /* exact: 11 + 11 bits */
        }
    for (size_t e = 0; e < d; e++) {
        float o = n ? (float)acc[e] * inv : 0.0f;
        float ob = to_bf16(c, o);                                       /* step 7 */
        if (gate) {
            double g = (double)to_bf16(c, gate[e]);
            ob = ob * (float)(1.0 / (1.0 + exp(-g)));
        }
        out[e] = ob;
    }
}

int lowp_sparse_attn(const lowp_sparse_attn_args *a, const float *q, const float *k, const float *v, size_t n,
                     const float *gate, double *out, char *why, size_t wl)
{
    if (a == NULL || (unsigned)a->path > LOWP_SPARSE_FP8)
        return lowp_why_set(why, wl, "sparse attention: unknown path");
    if (a->dim < 1 || a->dim > 1024)
        return lowp_why_set(why, wl, "sparse attention: head dim %zu (1..1024)", a->dim);
    if (n >= ((size_t)1 << 31))
        return lowp_why_set(why, wl, "sparse attention: %zu tokens (below 2^31)", n);
    if (a->path != LOWP_SPARSE_BF16 &&
        (!(a->k_scale > 0) || !(a->v_scale > 0) || !isfinite(a->k_scale) || !isfinite(a->v_scale)))
        return lowp_why_set(why, wl, "sparse attention: K / V scales %g / %g (finite, positive)", a->k_scale,
                            a->v_scale);
    double *w = malloc((n + 1 + a->dim) * sizeof *w), *acc = w ? w + n + 1 : NULL;
    float *qb = malloc(a->dim * sizeof *qb);
    if (w == NULL || qb == NULL) {
        free(w);
        free(qb);
        return lowp_why_set(why, wl, "sparse attention: out of memory for %zu tokens", n);
    }
    if (a->path == LOWP_SPARSE_EXACT)
        exact_path(a, q, k, v, n, gate, out, w, acc);
    else {
        sparse_codecs c;
        lowp_codec_init(&c.bf16, LOWP_BF16, LOWP_PROFILE_CUDA, LOWP_RN, LOWP_SAT_OFF, NULL, 0);
        lowp_codec_init(&c.f16, LOWP_F16, LOWP_PROFILE_CUDA, LOWP_RN, LOWP_SAT_OFF, NULL, 0);
        production_path(&c, a, q, k, v, n, gate, out, w, acc, qb);
    }
    free(w);
    free(qb);
    return 0;
}
