/* ref/study/src/workload.c: seeded attention workloads (see lowp/workload.h for the models).
 *
 * Determinism: all randomness comes from lowp_gen (itself thread-count independent) and
 * from splitmix64 streams seeded by (seed, tag); the whitening statistics are sums in a
 * fixed order (token-major, serial); the RoPE rotation is elementwise. Each element is
 * computed in binary64 and rounded once to binary32. */
#include "lowp/workload.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lowp/why.h"
#include "lowp/cases.h"
#include "lowp/gen.h"
#include "lowp/names.h"

static const char *const kind_names[LOWP_WORKLOAD_KIND_COUNT] = {"gaussian", "k-outlier", "rope", "needle",
                                                                     "small"};

/* Sub-seeds: one per kind of draw, so that q, k, v and the needle are independent. */
#define TAG_Q UINT64_C(0x77712d71)      /* "wq-q" */
#define TAG_K UINT64_C(0x77712d6b)      /* "wq-k" */
#define TAG_V UINT64_C(0x77712d76)      /* "wq-v" */
#define TAG_DIR UINT64_C(0x77712d64)    /* needle directions */
#define TAG_POS UINT64_C(0x77712d70)    /* needle positions */
#define TAG_NOISE UINT64_C(0x77712d6e)  /* needle key noise */

#define ROPE_BASE 10000.0

const char *lowp_workload_name(lowp_workload_kind k)
{
    return lowp_name_of(kind_names, LOWP_WORKLOAD_KIND_COUNT, (int)k, "unknown");
}

int lowp_workload_parse(const char *name, lowp_workload_kind *out)
{
    const int k = lowp_name_index(kind_names, LOWP_WORKLOAD_KIND_COUNT, name);
    if (k < 0)
        return -1;
    *out = (lowp_workload_kind)k;
    return 0;
}

void lowp_workload_free(lowp_workload *w)
{
    if (w == NULL)
        return;
    free(w->q);
    free(w->k);
    free(w->v);
    free(w->needle);
    memset(w, 0, sizeof *w);
}

static uint64_t sub_seed(uint64_t seed, uint64_t tag)
{
    uint64_t st = seed ^ (tag * UINT64_C(0x9e3779b97f4a7c15));
    return lowp_splitmix64(&st);
}

/* a * b, or 0 when it would overflow SIZE_MAX / 8 (so byte counts of doubles fit too). */
static size_t mul_size(size_t a, size_t b)
{
    size_t r;
    if (__builtin_mul_overflow(a, b, &r) || r > SIZE_MAX / 8)
        return 0;
    return r;
}

/* Rotate-half RoPE of one row of D values at position pos, in binary64 (D even). */
static void rope_row(double *row, size_t D, double pos, const double *inv_freq)
{
    for (size_t i = 0; i < D / 2; i++) {
        double th = pos * inv_freq[i], cs = cos(th), sn = sin(th);
        double xa = row[i], xb = row[i + D / 2];
        row[i] = xa * cs - xb * sn;
        row[i + D / 2] = xb * cs + xa * sn;
    }
}

/* Per-(KV head, channel) mean m and per-(KV head, rotary pair) root mean square r of k over
 * the tokens, then the whitened queries of lowp/workload.h with alignment a:
 * q = (z + a sqrt(D) (m/r) / ||m/r||) / r. z is q's own N(0, 1) draw, already in q.
 * Channels with r = 0 (all-zero pairs) get q_c = z_c. D is even (checked by the caller). */
static int whiten_queries(const lowp_attn_shape *s, const float *k, double align, float *q, char *why,
                          size_t len)
{
    size_t H = s->num_kv_heads, D = s->qk_dim, T = s->ctx, G = s->num_q_heads / s->num_kv_heads;
    double *sum = calloc(H * D, sizeof *sum), *sq = calloc(H * D, sizeof *sq), *dir = calloc(H * D, sizeof *dir);
    if (sum == NULL || sq == NULL || dir == NULL) {
        free(sum);
        free(sq);
        free(dir);
        return lowp_why_set(why, len, "out of memory for the whitening statistics");
    }
    for (size_t t = 0; t < T; t++) {
        const float *row = k + t * H * D;
        for (size_t j = 0; j < H * D; j++) {
            double x = row[j];
            sum[j] += x;
            sq[j] += x * x;
        }
    }
    for (size_t g = 0; g < H; g++) {
        for (size_t c = 0; c < D; c++)
            sum[g * D + c] /= (double)T;
        /* r over the rotary pair (c, c + D/2): the same for both members, so that the
         * whitening commutes with the rotation (a massive channel's energy moves to its
         * partner as RoPE turns the pair) */
        for (size_t c = 0; c < D / 2; c++) {
            size_t a = g * D + c, b = a + D / 2;
            double r = sqrt((sq[a] + sq[b]) / (2.0 * (double)T));
            sq[a] = sq[b] = r;
        }
        double nrm = 0.0;
        for (size_t c = 0; c < D; c++) {
            size_t j = g * D + c;
            dir[j] = sq[j] > 0 ? sum[j] / sq[j] : 0.0;
            nrm += dir[j] * dir[j];
        }
        nrm = sqrt(nrm);
        for (size_t c = 0; c < D; c++)
            dir[g * D + c] = nrm > 0 ? align * sqrt((double)D) * dir[g * D + c] / nrm : 0.0;
    }
    for (size_t i = 0; i < s->q_len; i++)
        for (size_t h = 0; h < s->num_q_heads; h++) {
            size_t g = h / G;
            float *qr = q + (i * s->num_q_heads + h) * D;
            for (size_t c = 0; c < D; c++) {
                double r = sq[g * D + c];
                qr[c] = r > 0 ? (float)(((double)qr[c] + dir[g * D + c]) / r) : qr[c];
            }
        }
    free(sum);
    free(sq);
    free(dir);
    return 0;
}

/* RoPE on every K row (position t) and every query row (position q_offset + i). */
static int rope_apply(const lowp_attn_shape *s, float *q, float *k, char *why, size_t len)
{
    size_t D = s->qk_dim, H = s->num_kv_heads;
    double *inv_freq = malloc(D / 2 * sizeof *inv_freq);
    if (inv_freq == NULL)
        return lowp_why_set(why, len, "out of memory for the RoPE table");
    for (size_t i = 0; i < D / 2; i++)
        inv_freq[i] = pow(ROPE_BASE, -2.0 * (double)i / (double)D);
    int oom = 0;
    long long nt = (long long)s->ctx;
#pragma omp parallel if (s->ctx * H * D >= ((size_t)1 << 16))
    {
        double *row = malloc(D * sizeof *row);
        if (row == NULL) {
#pragma omp atomic write
            oom = 1;
        }
#pragma omp for schedule(static)
        for (long long t = 0; t < nt; t++) {
            if (row == NULL)
                continue;
            for (size_t g = 0; g < H; g++) {
                float *kr = k + ((size_t)t * H + g) * D;
                for (size_t c = 0; c < D; c++)
                    row[c] = kr[c];
                rope_row(row, D, (double)t, inv_freq);
                for (size_t c = 0; c < D; c++)
                    kr[c] = (float)row[c];
            }
        }
        free(row);
    }
    if (!oom) {
        double *row = malloc(D * sizeof *row);
        if (row == NULL)
            oom = 1;
        for (size_t i = 0; row != NULL && i < s->q_len; i++)
            for (size_t h = 0; h < s->num_q_heads; h++) {
                float *qr = q + (i * s->num_q_heads + h) * D;
                for (size_t c = 0; c < D; c++)
                    row[c] = qr[c];
                rope_row(row, D, (double)(s->q_offset + i), inv_freq);
                for (size_t c = 0; c < D; c++)
                    qr[c] = (float)row[c];
            }
        free(row);
    }
    free(inv_freq);
    return oom ? lowp_why_set(why, len, "out of memory for a RoPE row") : 0;
}

/* The needle: directions u_g, positions n_g, queries sqrt(D) u_g + z, needle keys. */
static int plant_needle(const lowp_attn_shape *s, uint64_t seed, float *q, float *k, size_t *pos, char *why,
                        size_t len)
{
    size_t H = s->num_kv_heads, D = s->qk_dim, G = s->num_q_heads / s->num_kv_heads;
    float *u = malloc(H * D * sizeof *u), *noise = malloc(H * D * sizeof *noise);
    if (u == NULL || noise == NULL) {
        free(u);
        free(noise);
        return lowp_why_set(why, len, "out of memory for the needle");
    }
    if (lowp_gen(LOWP_GEN_GAUSSIAN, NULL, sub_seed(seed, TAG_DIR), 1, 1, H * D, u, why, len) ||
        lowp_gen(LOWP_GEN_GAUSSIAN, NULL, sub_seed(seed, TAG_NOISE), 1, 1, H * D, noise, why, len)) {
        free(u);
        free(noise);
        return -1;
    }
    uint64_t st = sub_seed(seed, TAG_POS);
    for (size_t g = 0; g < H; g++) {
        /* uniform in [0, q_offset]: the top 53 bits as a fraction of q_offset + 1 */
        double f = (double)(lowp_splitmix64(&st) >> 11) * 0x1p-53;
        size_t n = (size_t)(f * (double)(s->q_offset + 1));
        pos[g] = n > s->q_offset ? s->q_offset : n;
        double nrm = 0.0;
        for (size_t c = 0; c < D; c++)
            nrm += (double)u[g * D + c] * u[g * D + c];
        nrm = sqrt(nrm);
        float *kr = k + (pos[g] * H + g) * D;
        for (size_t c = 0; c < D; c++) {
            double uc = nrm > 0 ? u[g * D + c] / nrm : (c == 0);
            kr[c] = (float)(LOWP_WORKLOAD_NEEDLE_GAIN * uc + 0.1 * noise[g * D + c]);
            for (size_t i = 0; i < s->q_len; i++)
                for (size_t hh = g * G; hh < (g + 1) * G; hh++) {
                    float *qc = q + (i * s->num_q_heads + hh) * D + c;
                    *qc = (float)(sqrt((double)D) * uc + *qc);
                }
        }
    }
    free(u);
    free(noise);
    return 0;
}

int lowp_workload_make(lowp_workload_kind kind, uint64_t seed, const lowp_attn_shape *s_in, lowp_workload *w,
                       char *why, size_t why_len)
{
    memset(w, 0, sizeof *w);
    if ((unsigned)kind >= LOWP_WORKLOAD_KIND_COUNT)
        return lowp_why_set(why, why_len, "unknown workload kind");
    lowp_attn_shape s = *s_in;
    if (lowp_attn_check_shape(&s, why, why_len))
        return -1;
    int klike = kind == LOWP_WL_K_OUTLIER || kind == LOWP_WL_ROPE; /* else gaussian Q, K, V */
    if (klike && s.qk_dim % 2 != 0)
        return lowp_why_set(why, why_len, "the k-outlier and rope workloads need an even qk_dim");
    size_t nq = mul_size(mul_size(s.q_len, s.num_q_heads), s.qk_dim);
    size_t nk = mul_size(mul_size(s.ctx, s.num_kv_heads), s.qk_dim);
    size_t nv = mul_size(mul_size(s.ctx, s.num_kv_heads), s.vo_dim);
    if (nq == 0 || nk == 0 || nv == 0)
        return lowp_why_set(why, why_len, "the workload shape is too large");
    w->shape = s;
    w->q = malloc(nq * sizeof *w->q);
    w->k = malloc(nk * sizeof *w->k);
    w->v = malloc(nv * sizeof *w->v);
    if (kind == LOWP_WL_NEEDLE)
        w->needle = malloc(s.num_kv_heads * sizeof *w->needle);
    if (w->q == NULL || w->k == NULL || w->v == NULL || (kind == LOWP_WL_NEEDLE && w->needle == NULL)) {
        lowp_workload_free(w);
        return lowp_why_set(why, why_len, "out of memory for the workload");
    }
    int rc = lowp_gen(LOWP_GEN_GAUSSIAN, NULL, sub_seed(seed, TAG_Q), 1, 1, nq, w->q, why, why_len);
    if (rc == 0 && !klike)
        rc = lowp_gen(LOWP_GEN_GAUSSIAN, NULL, sub_seed(seed, TAG_K), 1, 1, nk, w->k, why, why_len);
    if (rc == 0 && !klike)
        rc = lowp_gen(LOWP_GEN_GAUSSIAN, NULL, sub_seed(seed, TAG_V), 1, 1, nv, w->v, why, why_len);
    if (rc == 0 && klike) {
        lowp_gen_params p = lowp_gen_defaults(LOWP_GEN_K_LIKE);
        p.rope = 0; /* pre-RoPE keys; the rope kind rotates them below, q with them */
        rc = lowp_gen(LOWP_GEN_K_LIKE, &p, sub_seed(seed, TAG_K), s.ctx, s.num_kv_heads, s.qk_dim, w->k, why,
                      why_len);
        if (rc == 0)
            rc = lowp_gen(LOWP_GEN_V_LIKE, NULL, sub_seed(seed, TAG_V), s.ctx, s.num_kv_heads, s.vo_dim, w->v,
                          why, why_len);
        if (rc == 0)
            rc = whiten_queries(&s, w->k, kind == LOWP_WL_ROPE ? 1.0 : 0.0, w->q, why, why_len);
        if (rc == 0 && kind == LOWP_WL_ROPE)
            rc = rope_apply(&s, w->q, w->k, why, why_len);
    }
    if (rc == 0 && kind == LOWP_WL_SMALL) {
        /* powers of two: exact in binary32 for these magnitudes (no under/overflow) */
        for (size_t i = 0; i < nq; i++)
            w->q[i] *= 0x1p8f;
        for (size_t i = 0; i < nk; i++)
            w->k[i] *= 0x1p-8f;
        for (size_t i = 0; i < nv; i++)
            w->v[i] *= 0x1p-8f;
    }
    if (rc == 0 && kind == LOWP_WL_NEEDLE)
        rc = plant_needle(&s, seed, w->q, w->k, w->needle, why, why_len);
    if (rc != 0)
        lowp_workload_free(w);
    return rc;
}
