/* The CPU emulator of lowp's GPU extend / prefill attention kernel: the definition in
 * lowp/attn_gpu_extend.h, step by step, in the kernel's order, and the binary64 reference
 * with the header's derived bound. Work items (sequence, KV head, warp of 16 packed rows)
 * are independent: they run in parallel and the bits do not depend on the thread count. */
#include "lowp/attn_gpu_extend.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "lowp/attn.h"
#include "lowp/attn_gpu_emul.h"
#include "lowp/bits.h"
#include "lowp/ex2_approx.h"
#include "lowp/format.h"
#include "lowp/why.h"

#define KB LOWP_GPU_EXTEND_KBLOCK
#define WR LOWP_GPU_EXTEND_WARP_ROWS

static size_t prefix_of(const lowp_gpu_extend_args *a, size_t b)
{
    return a->prefix_len ? (size_t)a->prefix_len[b] : 0;
}

static int dim_ok(size_t d)
{
    return d >= 64 && d <= LOWP_GPU_EXTEND_MAX_DIM && d % 64 == 0;
}

int lowp_gpu_extend_check(const lowp_gpu_extend_args *a, char *why, size_t why_len)
{
    if (a == NULL || a->qo_indptr == NULL || a->kv_indptr == NULL || a->q == NULL ||
        a->k == NULL || a->v == NULL)
        return lowp_why_set(why, why_len,
                            "args, qo_indptr, kv_indptr, q, k and v must not be NULL");
    if (a->batch == 0)
        return lowp_why_set(why, why_len, "batch is 0");
    if (!dim_ok(a->qk_dim))
        return lowp_why_set(why, why_len,
                            "qk_dim %zu: the extend kernel needs a multiple of 64 in [64, %d]",
                            a->qk_dim, LOWP_GPU_EXTEND_MAX_DIM);
    if (!dim_ok(a->vo_dim))
        return lowp_why_set(why, why_len,
                            "vo_dim %zu: the extend kernel needs a multiple of 64 in [64, %d]",
                            a->vo_dim, LOWP_GPU_EXTEND_MAX_DIM);
    if (a->num_kv_heads == 0 || a->num_q_heads == 0 || a->num_q_heads % a->num_kv_heads)
        return lowp_why_set(why, why_len,
                            "num_q_heads (%zu) is not a positive multiple of num_kv_heads "
                            "(%zu)",
                            a->num_q_heads, a->num_kv_heads);
    if (a->num_q_heads / a->num_kv_heads > LOWP_GPU_EXTEND_MAX_GROUP)
        return lowp_why_set(why, why_len,
                            "group ratio %zu: the extend kernel takes at most %d query heads "
                            "per KV head",
                            a->num_q_heads / a->num_kv_heads, LOWP_GPU_EXTEND_MAX_GROUP);
    if (a->qo_indptr[0] != 0 || a->kv_indptr[0] != 0)
        return lowp_why_set(why, why_len, "qo_indptr[0] and kv_indptr[0] must be 0");
    for (size_t b = 0; b < a->batch; b++) {
        int64_t ql = (int64_t)a->qo_indptr[b + 1] - a->qo_indptr[b];
        int64_t region = (int64_t)a->kv_indptr[b + 1] - a->kv_indptr[b];
        int64_t P = a->prefix_len ? a->prefix_len[b] : 0;
        if (ql < 1)
            return lowp_why_set(why, why_len,
                                "sequence %zu has %lld queries (qo_indptr must increase by at "
                                "least 1)",
                                b, (long long)ql);
        if (region < 0)
            return lowp_why_set(why, why_len, "kv_indptr decreases at sequence %zu", b);
        if (P < 0)
            return lowp_why_set(why, why_len, "prefix_len[%zu] = %lld is negative", b,
                                (long long)P);
        if (P + ql > region)
            return lowp_why_set(why, why_len,
                                "sequence %zu: prefix %lld + chunk %lld positions do not fit "
                                "its workspace region of %lld rows",
                                b, (long long)P, (long long)ql, (long long)region);
    }
    if ((size_t)a->kv_indptr[a->batch] > a->kv_rows)
        return lowp_why_set(why, why_len,
                            "workspace too small: kv_indptr ends at row %d, the workspace "
                            "holds %zu rows",
                            a->kv_indptr[a->batch], a->kv_rows);
    if (!isfinite(a->sm_scale))
        return lowp_why_set(why, why_len, "sm_scale is not finite");
    return 0;
}

double lowp_gpu_extend_pairs(const lowp_gpu_extend_args *a)
{
    if (lowp_gpu_extend_check(a, NULL, 0))
        return 0.0;
    double n = 0.0;
    for (size_t b = 0; b < a->batch; b++) {
        double P = (double)prefix_of(a, b), ql = a->qo_indptr[b + 1] - a->qo_indptr[b];
        n += ql * (P + 1.0) + ql * (ql - 1.0) / 2.0;
    }
    return n;
}

typedef struct job {
    const lowp_gpu_extend_args *a;
    uint16_t e4m3[256]; /* step 1's element of every code (lowp_gpu_decode_element_bf16) */
    size_t G, nw_max; /* warps per (sequence, head): the most any sequence needs */
    float qks;
    const lowp_mma_params *mma;
    uint16_t *out;
} job;

/* Warp w of (sequence b, KV head h): steps 2..6 for its 16 rows. kr [64][Dq], vt [Dv][64]
 * (V transposed so that each MMA call reads 16 contiguous positions), o [16][Dv]. */
static void run_warp(const job *J, size_t b, size_t h, size_t w, uint16_t *kr, uint16_t *vt,
                     float *o)
{
    const lowp_gpu_extend_args *a = J->a;
    const size_t G = J->G, Dq = a->qk_dim, Dv = a->vo_dim, NQ = a->num_q_heads;
    const size_t HK = a->num_kv_heads;
    const size_t q0 = (size_t)a->qo_indptr[b], ql = (size_t)a->qo_indptr[b + 1] - q0;
    const size_t P = prefix_of(a, b), kvlen = P + ql, row0 = (size_t)a->kv_indptr[b];
    const size_t R0 = w * WR;
    size_t nrows = ql * G > R0 ? ql * G - R0 : 0;
    if (nrows == 0)
        return;
    if (nrows > WR)
        nrows = WR;
    const size_t pmax = P + (R0 + nrows - 1) / G; /* the last valid row's last position */
    const size_t nblocks = pmax / KB + 1;
    float m[WR], lt[WR][4], S[KB], p[KB];
    uint16_t pb[KB];
    for (size_t r = 0; r < nrows; r++) {
        m[r] = -INFINITY;
        for (int t = 0; t < 4; t++)
            lt[r][t] = 0.0f;
    }
    memset(o, 0, WR * Dv * sizeof *o);
    for (size_t kb = 0; kb < nblocks; kb++) {
        for (size_t j = 0; j < KB; j++) {
            size_t pos = kb * KB + j;
            if (pos < kvlen) {
                const uint8_t *kc = a->k + ((row0 + pos) * HK + h) * Dq;
                const uint8_t *vc = a->v + ((row0 + pos) * HK + h) * Dv;
                for (size_t d = 0; d < Dq; d++)
                    kr[j * Dq + d] = J->e4m3[kc[d]];
                for (size_t d = 0; d < Dv; d++)
                    vt[d * KB + j] = J->e4m3[vc[d]];
            } else { /* never read: +0 */
                memset(kr + j * Dq, 0, Dq * sizeof *kr);
                for (size_t d = 0; d < Dv; d++)
                    vt[d * KB + j] = 0;
            }
        }
        for (size_t r = 0; r < nrows; r++) {
            const size_t R = R0 + r, i = R / G, g = R % G, sees = P + i;
            const uint16_t *qr = a->q + ((q0 + i) * NQ + h * G + g) * Dq;
            float mb = -INFINITY;
            for (size_t j = 0; j < KB; j++) {
                size_t pos = kb * KB + j;
                float acc = 0.0f;
                if (pos <= sees) { /* sees < kvlen always */
                    for (size_t ks = 0; ks < Dq / 16; ks++)
                        acc = lowp_mma_dot_add_bf16(qr + 16 * ks, kr + j * Dq + 16 * ks, 16,
                                                    acc, J->mma);
                    S[j] = acc * J->qks;
                } else {
                    S[j] = -INFINITY;
                }
                mb = fmaxf(mb, S[j]);
            }
            const float mn = fmaxf(m[r], mb);
            const float alpha = mn == -INFINITY ? 1.0f : lowp_exp2_hw(m[r] - mn);
            for (size_t j = 0; j < KB; j++) {
                p[j] = mn == -INFINITY ? 0.0f : lowp_exp2_hw(S[j] - mn);
                pb[j] = lowp_bf16_from_f32(p[j]);
            }
            for (size_t t = 0; t < 4; t++) {
                float L = 0.0f;
                for (size_t n = 0; n < 8; n++) {
                    L = L + p[8 * n + 2 * t];
                    L = L + p[8 * n + 2 * t + 1];
                }
                lt[r][t] = lt[r][t] * alpha + L;
            }
            m[r] = mn;
            for (size_t d = 0; d < Dv; d++) {
                float acc = o[r * Dv + d] * alpha;
                for (size_t sb = 0; sb < KB / 16; sb++)
                    acc = lowp_mma_dot_add_bf16(pb + 16 * sb, vt + d * KB + 16 * sb, 16, acc,
                                                J->mma);
                o[r * Dv + d] = acc;
            }
        }
    }
    for (size_t r = 0; r < nrows; r++) {
        const size_t R = R0 + r, i = R / G, g = R % G;
        const float l = (lt[r][0] + lt[r][1]) + (lt[r][2] + lt[r][3]);
        uint16_t *dst = J->out + ((q0 + i) * NQ + h * G + g) * Dv;
        for (size_t d = 0; d < Dv; d++)
            dst[d] = lowp_bf16_from_f32(o[r * Dv + d] / l);
    }
}

int lowp_gpu_extend_emulate(const lowp_gpu_extend_args *a, uint16_t *out, char *why,
                            size_t why_len)
{
    if (lowp_gpu_extend_check(a, why, why_len))
        return -1;
    if (out == NULL)
        return lowp_why_set(why, why_len, "out must not be NULL");
    double sm = a->sm_scale != 0.0 ? a->sm_scale : 1.0 / sqrt((double)a->qk_dim);
    job J = {.a = a, .G = a->num_q_heads / a->num_kv_heads,
             .qks = lowp_gpu_decode_score_scale(LOWP_FP8_E4M3, sm, 1.0f),
             .mma = a->mma ? a->mma : &lowp_mma_sm90_bf16, .out = out};
    for (unsigned c = 0; c < 256; c++)
        J.e4m3[c] = lowp_gpu_decode_element_bf16(LOWP_FP8_E4M3, (uint16_t)c, 0);
    size_t qmax = 0;
    for (size_t b = 0; b < a->batch; b++) {
        size_t ql = (size_t)(a->qo_indptr[b + 1] - a->qo_indptr[b]);
        qmax = ql > qmax ? ql : qmax;
    }
    J.nw_max = (qmax * J.G + WR - 1) / WR;
    const size_t HK = a->num_kv_heads, n_items = a->batch * HK * J.nw_max;
    int threads = a->threads > 0 ? a->threads : omp_get_max_threads();
    int rc = 0;
#pragma omp parallel num_threads(threads)
    {
        uint16_t *kr = malloc(KB * a->qk_dim * sizeof *kr);
        uint16_t *vt = malloc(KB * a->vo_dim * sizeof *vt);
        float *o = malloc(WR * a->vo_dim * sizeof *o);
        int ok = kr != NULL && vt != NULL && o != NULL;
#pragma omp for schedule(dynamic, 1)
        for (size_t it = 0; it < n_items; it++) {
            size_t w = it % J.nw_max, h = (it / J.nw_max) % HK, b = it / J.nw_max / HK;
            if (ok && (a->sample <= 1 || it % a->sample == a->sample_phase % a->sample))
                run_warp(&J, b, h, w, kr, vt, o);
        }
        if (!ok) {
#pragma omp atomic write
            rc = -1;
        }
        free(kr);
        free(vt);
        free(o);
    }
    if (rc)
        return lowp_why_set(why, why_len, "out of memory for the emulator's block buffers");
    return 0;
}

int lowp_gpu_extend_reference(const lowp_gpu_extend_args *a, const float *q32, double *ref,
                              double *bound, char *why, size_t why_len)
{
    if (lowp_gpu_extend_check(a, why, why_len))
        return -1;
    if (q32 == NULL || (ref == NULL && bound == NULL))
        return lowp_why_set(why, why_len, "q32 and one of ref, bound must not be NULL");
    const size_t NQ = a->num_q_heads, HK = a->num_kv_heads, G = NQ / HK, Dq = a->qk_dim,
                 Dv = a->vo_dim;
    const double sm = a->sm_scale != 0.0 ? a->sm_scale : 1.0 / sqrt((double)Dq);
    const double L2E = 1.4426950408889634, u = 0x1p-24;
    int rc = 0;
    for (size_t b = 0; b < a->batch && rc == 0; b++) {
        const size_t q0 = (size_t)a->qo_indptr[b], ql = (size_t)a->qo_indptr[b + 1] - q0;
        const size_t P = prefix_of(a, b), n = P + ql, row0 = (size_t)a->kv_indptr[b];
        double *qd = malloc(ql * NQ * Dq * sizeof *qd);
        double *kd = malloc(n * HK * Dq * sizeof *kd);
        double *vd = malloc(n * HK * Dv * sizeof *vd);
        double *od = malloc(ql * NQ * Dv * sizeof *od);
        unsigned char *vfin = malloc(HK);
        if (qd == NULL || kd == NULL || vd == NULL || od == NULL || vfin == NULL) {
            rc = lowp_why_set(why, why_len, "out of memory for sequence %zu's reference", b);
            goto next;
        }
        for (size_t x = 0; x < ql * NQ * Dq; x++)
            qd[x] = (double)q32[q0 * NQ * Dq + x];
        for (size_t x = 0; x < n * HK * Dq; x++)
            kd[x] = lowp_decode_f64(LOWP_E4M3, a->k[row0 * HK * Dq + x]);
        for (size_t x = 0; x < n * HK * Dv; x++)
            vd[x] = lowp_decode_f64(LOWP_E4M3, a->v[row0 * HK * Dv + x]);
        lowp_attn_shape sh = {.q_len = ql, .num_q_heads = NQ, .num_kv_heads = HK,
                              .qk_dim = Dq, .vo_dim = Dv, .ctx = n, .q_offset = P,
                              .sm_scale = sm};
        if (lowp_attn_ref_f64(&sh, qd, kd, vd, od, NULL, why, why_len)) {
            rc = -1;
            goto next;
        }
        if (ref)
            memcpy(ref + q0 * NQ * Dv, od, ql * NQ * Dv * sizeof *od);
        if (bound == NULL)
            goto next;
        /* V at every position of the sequence: a masked one still meets P = +0 in the
         * kernel's MMA (step 5), and 0 x NaN is NaN there, not in exact attention */
        for (size_t h = 0; h < HK; h++) {
            vfin[h] = 1;
            for (size_t j = 0; j < n && vfin[h]; j++)
                for (size_t d = 0; d < Dv; d++)
                    vfin[h] &= isfinite(vd[(j * HK + h) * Dv + d]) != 0;
        }
#pragma omp parallel for schedule(dynamic, 1)
        for (size_t row = 0; row < ql * NQ; row++) {
            const size_t i = row / NQ, hq = row % NQ, h = hq / G, nv = P + i + 1;
            const double *qr = qd + row * Dq;
            double *bd = bound + (q0 * NQ + row) * Dv;
            double *e = malloc(nv * sizeof *e), *A = malloc(nv * sizeof *A),
                   *Qe = malloc(nv * sizeof *Qe), *vb = malloc(Dv * sizeof *vb),
                   *vm = malloc(Dv * sizeof *vm);
            double qerr[LOWP_GPU_EXTEND_MAX_DIM]; /* |bf16(q) - q| per dim */
            int finite = e != NULL && A != NULL && Qe != NULL && vb != NULL && vm != NULL;
            for (size_t d = 0; finite && d < Dq; d++) {
                finite = isfinite(qr[d]);
                qerr[d] = fabs((double)lowp_f32_from_bf16(lowp_bf16_from_f32((float)qr[d])) -
                               qr[d]);
            }
            double mx = -INFINITY;
            for (size_t j = 0; finite && j < nv; j++) {
                const double *kr = kd + (j * HK + h) * Dq;
                double dot = 0.0, abs = 0.0, qe = 0.0;
                for (size_t d = 0; d < Dq; d++) {
                    dot += qr[d] * kr[d];
                    abs += fabs(qr[d] * kr[d]);
                    qe += qerr[d] * fabs(kr[d]);
                }
                e[j] = sm * L2E * dot;
                A[j] = abs;
                Qe[j] = qe;
                if (!(abs * sm * L2E < 0x1p100)) /* also a NaN or Inf key */
                    finite = 0;
                else if (e[j] > mx)
                    mx = e[j];
            }
            finite = finite && vfin[h];
            if (finite) {
                const size_t T = (nv + KB - 1) / KB;
                double delta = 0.0, L = 0.0;
                for (size_t j = 0; j < nv; j++) {
                    double ds = sm * L2E * ((double)(Dq / 16) * 36.0 * u * A[j] + Qe[j]) +
                                2.0 * u * fabs(e[j]);
                    double dj = 0.69314718055994530942 * (ds + 2.0 * u * fabs(e[j] - mx));
                    delta = dj > delta ? dj : delta;
                    e[j] = exp2(e[j] - mx);
                    L += e[j];
                }
                /* ex2.approx, |ln(result / 2^x)| < 4.39 u (header): p_j's and the alphas of
                 * the T - 1 blocks at most after its own */
                delta += 5.0 * u * (double)T;
                /* weights p_j (1 + e_j), |ln(1 + e_j)| <= delta, normalised: each moves by at
                 * most (e^(2 delta) - 1) of itself, whatever delta (not only to first order) */
                const double wexp = expm1(2.0 * delta), grow = 1.0 + wexp;
                for (size_t d = 0; d < Dv; d++)
                    vb[d] = vm[d] = 0.0;
                for (size_t j = 0; j < nv; j++) {
                    const double *vr = vd + (j * HK + h) * Dv;
                    for (size_t d = 0; d < Dv; d++) {
                        double av = fabs(vr[d]);
                        vb[d] += e[j] * av;
                        vm[d] = av > vm[d] ? av : vm[d];
                    }
                }
                for (size_t d = 0; d < Dv; d++) {
                    double o = fabs(od[row * Dv + d]), V = vb[d] / L;
                    bd[d] = 2.0 * grow *
                                (0x1p-8 * o + 0x1p-8 * V + wexp * V +
                                 4.0 * (double)T * 36.0 * u * V +
                                 (18.0 * (double)T + 4.0) * 2.0 * u * (o + V)) +
                            (double)nv * 0x1p-125 * vm[d] + 0x1p-133;
                }
            } else {
                for (size_t d = 0; d < Dv; d++)
                    bd[d] = INFINITY;
            }
            free(e);
            free(A);
            free(Qe);
            free(vb);
            free(vm);
        }
    next:
        free(qd);
        free(kd);
        free(vd);
        free(od);
        free(vfin);
    }
    return rc;
}
