/* ref/attn/src/attn_ref.c: scaled-dot-product attention in binary64, and its error bound
 * (lowp/attn.h).
 *
 * The arithmetic, in this order (attn.h states it; the kernels are attn_internal.h's, which
 * the paged decode of lowp/attn_paged.h uses too, so the two agree bit for bit and the
 * chunking below is the decode's split-K):
 *
 *   t_j  = dot(q, k_j)            8 lanes, lane l sums d = l (mod 8) in increasing d,
 *                                 lanes combined ((l0+l4)+(l1+l5))+((l2+l6)+(l3+l7))
 *   s_j  = sm_scale * t_j
 *   per chunk c of LOWP_ATTN_CHUNK visible keys:
 *     m_c = max s_j (NaN ignored; -Inf when none), shift_c = m_c, or 0 if m_c is -Inf
 *     w_j = exp(s_j - shift_c), 2^-1074 if that underflows to 0 with a finite argument
 *     L_c = sum w_j,  N_c[e] = sum w_j v_je          (increasing j, from 0.0)
 *   M = max_c m_c;  alpha_c = exp(m_c - M) (floored the same way; 0 if m_c is -Inf)
 *   L = sum_c alpha_c L_c,  N[e] = sum_c alpha_c N_c[e],  out[e] = N[e] / L,
 *   p_j = (alpha_c w_j) / L.
 *
 * The floor keeps every finite score's weight positive, as it is in exact arithmetic, so
 * an Inf in V propagates as Inf (0 * Inf would be NaN); it costs at most 2^-1074 per weight,
 * which the bound carries. Special values then follow attn.h without any special-casing.
 *
 * Work is split into items (query token, KV head, chunk): the group's query heads are
 * scored against each K row together and accumulate each V row together, so a row is read
 * once per KV head (a 128K-token decode with 32 query heads over 8 KV heads of dimension
 * 128, 2 GiB of binary64 K/V, takes about 0.4 s on one core here). Items are independent
 * and merged in chunk order: the result does not depend on the thread count.
 *
 * ---- The bound (lowp_attn_bound_eval) -------------------------------------------------
 * u = 2^-53, gamma_k = k u / (1 - k u), tiny = 2^-1074. For one output (i, h, e) with n
 * visible keys, D = qk_dim, sigma = |sm_scale|, S >= max_j sum_d |q_d k_jd|, V >= max_j
 * |v_je|, C chunks. The exact output is o = N/L with w_j = exp(s_j - M) for the computed
 * shift M (softmax does not depend on the shift), N = sum w_j v_je, L = sum w_j.
 *
 * 1. Scores. A dot product of D terms in any summation order: |t^ - t| <= gamma_D
 *    sum|q_d k_jd| (Higham, Accuracy and Stability, 2nd ed., eq. 3.5, any order); one more
 *    rounding for sm_scale; each product may underflow (<= tiny/2 each):
 *        |s^_j - s_j| <= delta = sigma S gamma_{D+1} + (sigma D + 1) tiny.
 *    Hence |s^_j| <= R = sigma S + delta.
 * 2. Exponents. s^_j - m_c is rounded once: error <= u |s^_j - m_c| <= 2 u R; so is
 *    m_c - M (C > 1). With the score error the argument of each weight (alpha_c w_j taken
 *    together) is off from s_j - M by at most
 *        Delta = delta + 2 u R (C = 1),   delta + 4 u R (C > 1).
 * 3. exp. glibc's exp is documented at most 1 ulp in error on x86-64 and AArch64
 *    (manual, "Known Maximum Errors in Math Functions"; the implementation since 2.28 is
 *    0.51 ulp); we use 1 ulp = 2u relative in the normal range, and tiny absolute in the
 *    subnormal range, where the floor adds another tiny. So each effective weight is
 *        w^_j = w_j (1 + theta_j) + eta_j,  |theta_j| <= theta = e^Delta (1+2u)^k - 1,
 *        |eta_j| <= eta = 2^-1072,  k = 1 (C = 1) or 2 (C > 1).
 * 4. Sums. Each term of L passes through at most n_c - 1 additions in its chunk, one
 *    product by alpha_c and C - 1 merge additions, each term of N through one more
 *    product: all within gamma_m, m = n + C. Products may underflow: n + C times tiny/2.
 *        |L^ - L| <= beta L,
 *          beta = (1+theta)(1+gamma_m) - 1 + ((1+gamma_m) n eta + C tiny) e^delta,
 *        |N^ - N| <= ((1+theta)(1+gamma_m) - 1) A + ((1+gamma_m) n eta V + (n+C) tiny) e^delta L
 *    where A = sum w_j |v_je| <= V L, and L >= e^-delta because the key with the largest
 *    computed score has s_j >= M - delta.
 * 5. Quotient. N^/L^ - o = (dN - o dL) / (L + dL), |o| <= V, and the division adds u|o|
 *    and (subnormal) tiny:
 *        |out - o| <= (1+u) (alpha_N V + nu + beta V) / (1 - beta) + u V + tiny,
 *    alpha_N = (1+theta)(1+gamma_m) - 1, nu = the absolute terms of step 4 over L.
 * 6. A trivial cap: |out| <= V (1+gamma_m)/(1-gamma_m) (1+u) + ..., |o| <= V; the bound
 *    is the smaller of the two. It is +Inf where sigma S or (n+C) V could overflow, where
 *    beta >= 1/2 would void step 5 (then the cap is used), or for non-finite inputs.
 * The bound itself is evaluated in binary64 with some 40 roundings of positive terms and
 * two libm calls, all covered by the final factor (1 + 2^-40).
 *
 * It is an a-priori bound: it uses only the magnitudes, not the computed probabilities, so
 * it is loose where V has an outlier the softmax does not pick (it charges every key V).
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn_internal.h"
#include "lowp/why.h"
#include "lowp/attn.h"

static int mul_ok(size_t a, size_t b, size_t *out)
{
    if (b != 0 && a > SIZE_MAX / b)
        return 0;
    *out = a * b;
    return 1;
}

int lowp_attn_check_shape(lowp_attn_shape *s, char *why, size_t why_len)
{
    if (s == NULL)
        return lowp_why_set(why, why_len, "shape is NULL");
    if (s->q_len == 0)
        return lowp_why_set(why, why_len, "q_len is 0");
    if (s->num_q_heads == 0 || s->num_kv_heads == 0)
        return lowp_why_set(why, why_len, "num_q_heads and num_kv_heads must be at least 1");
    if (s->num_q_heads % s->num_kv_heads != 0)
        return lowp_why_set(why, why_len, "num_q_heads is not a multiple of num_kv_heads");
    if (s->qk_dim == 0 || s->vo_dim == 0)
        return lowp_why_set(why, why_len, "qk_dim and vo_dim must be at least 1");
    if (s->ctx == 0)
        return lowp_why_set(why, why_len, "ctx is 0");
    if (s->q_offset > s->ctx || s->q_len > s->ctx - s->q_offset)
        return lowp_why_set(why, why_len, "q_offset + q_len > ctx");
    size_t a, b;
    if (!mul_ok(s->q_len, s->num_q_heads, &a) || !mul_ok(a, s->qk_dim, &b) ||
        !mul_ok(b, sizeof(double), &b) || !mul_ok(a, s->vo_dim, &b) ||
        !mul_ok(b, sizeof(double), &b) || !mul_ok(a, s->ctx, &b) ||
        !mul_ok(b, sizeof(double), &b) || !mul_ok(s->ctx, s->num_kv_heads, &a) ||
        !mul_ok(a, s->qk_dim > s->vo_dim ? s->qk_dim : s->vo_dim, &b) ||
        !mul_ok(b, sizeof(double), &b))
        return lowp_why_set(why, why_len, "the tensor sizes overflow size_t");
    if (s->sm_scale == 0.0)
        s->sm_scale = 1.0 / sqrt((double)s->qk_dim);
    else if (!isfinite(s->sm_scale))
        return lowp_why_set(why, why_len, "sm_scale is not finite");
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * The reference: work items (query token i, KV head g, chunk c), the group's query heads
 * together (each K and V row read once per group), items chunk-major within a token so
 * that neighbouring items share cache lines; the kernels are attn_internal.h's, which the
 * paged decode uses too.
 * ------------------------------------------------------------------------------------- */

static size_t n_chunks(size_t n)
{
    return (n + LOWP_ATTN_CHUNK - 1) / LOWP_ATTN_CHUNK;
}

typedef struct {
    size_t i, g, c;
} ritem;

typedef struct {
    const lowp_attn_shape *s;
    const double *q, *k, *v;
    double *probs;
    size_t r;
    double *pm, *pL, *pN; /* per item: m, L [r]; N [r][vo_dim] */
} rjob;

ATTN_CLONES
static void ref_item(const rjob *J, size_t idx, const ritem *it, double *sc)
{
    const lowp_attn_shape *s = J->s;
    const size_t D = s->qk_dim, E = s->vo_dim, nkv = s->num_kv_heads, r = J->r;
    const size_t n = s->q_offset + it->i + 1, CH = LOWP_ATTN_CHUNK;
    const size_t t0 = it->c * CH, t1 = t0 + CH < n ? t0 + CH : n, nt = t1 - t0;
    const double *qg = J->q + (it->i * s->num_q_heads + it->g * r) * D;
    for (size_t t = t0; t < t1; t++)
        attn_scores(qg, r, D, J->k + (t * nkv + it->g) * D, sc + (t - t0), CH, s->sm_scale);
    for (size_t h = 0; h < r; h++) {
        attn_weights(sc + h * CH, nt, &J->pm[idx * r + h], &J->pL[idx * r + h]);
        if (J->probs != NULL) /* the weights; the merge scales them */
            memcpy(J->probs + ((it->i * s->num_q_heads + it->g * r + h) * s->ctx + t0),
                   sc + h * CH, nt * sizeof(double));
    }
    double *N = J->pN + idx * r * E;
    for (size_t x = 0; x < r * E; x++)
        N[x] = 0.0;
    const double *vg = J->v + it->g * E;
    const size_t vs = nkv * E;
    size_t t = t0;
    for (; t + 4 <= t1; t += 4)
        attn_pv4(N, r, E, sc + (t - t0), CH, vg + t * vs, vg + (t + 1) * vs, vg + (t + 2) * vs,
                 vg + (t + 3) * vs);
    for (; t < t1; t++)
        attn_pv1(N, r, E, sc + (t - t0), CH, vg + t * vs);
}

int lowp_attn_ref_f64(const lowp_attn_shape *s_in, const double *q, const double *k,
                      const double *v, double *out, double *probs, char *why, size_t why_len)
{
    if (s_in == NULL)
        return lowp_why_set(why, why_len, "shape is NULL");
    lowp_attn_shape s = *s_in;
    if (lowp_attn_check_shape(&s, why, why_len))
        return -1;
    if (q == NULL || k == NULL || v == NULL || out == NULL)
        return lowp_why_set(why, why_len, "q, k, v and out must not be NULL");
    const size_t nkv = s.num_kv_heads, r = s.num_q_heads / nkv, E = s.vo_dim;
    size_t n_items = 0;
    for (size_t i = 0; i < s.q_len; i++)
        n_items += nkv * n_chunks(s.q_offset + i + 1);
    rjob J = {&s, q, k, v, probs, r, NULL, NULL, NULL};
    ritem *items = malloc(n_items * sizeof *items);
    size_t *first = malloc(s.q_len * sizeof *first);
    J.pm = malloc(2 * n_items * r * sizeof(double));
    J.pN = malloc(n_items * r * E * sizeof(double));
    if (items == NULL || first == NULL || J.pm == NULL || J.pN == NULL) {
        free(items);
        free(first);
        free(J.pm);
        free(J.pN);
        return lowp_why_set(why, why_len, "out of memory for the attention reference");
    }
    J.pL = J.pm + n_items * r;
    size_t x = 0;
    for (size_t i = 0; i < s.q_len; i++) {
        first[i] = x;
        for (size_t c = 0; c < n_chunks(s.q_offset + i + 1); c++)
            for (size_t g = 0; g < nkv; g++)
                items[x++] = (ritem){i, g, c};
    }
    const long rows = (long)(s.q_len * s.num_q_heads);
    double work = (double)n_items * LOWP_ATTN_CHUNK * (double)r * (double)(s.qk_dim + E);
    int failed = 0;
#pragma omp parallel if (work > 4e6 && n_items + (size_t)rows > 2) reduction(| : failed)
    {
        double *sc = malloc(r * LOWP_ATTN_CHUNK * sizeof(double));
        double *alpha = malloc(n_chunks(s.ctx) * sizeof(double));
        if (sc == NULL || alpha == NULL)
            failed = 1;
#pragma omp for schedule(dynamic, 1)
        for (long it = 0; it < (long)n_items; it++)
            if (sc != NULL)
                ref_item(&J, (size_t)it, &items[it], sc);
#pragma omp for schedule(dynamic, 4)
        for (long row = 0; row < rows; row++) {
            if (alpha == NULL)
                continue;
            const size_t i = (size_t)row / s.num_q_heads, h = (size_t)row % s.num_q_heads;
            const size_t g = h / r, hl = h % r, n = s.q_offset + i + 1, C = n_chunks(n);
            const size_t f = first[i] + g, step = nkv;
            double L = attn_merge(C, J.pm + f * r + hl, J.pL + f * r + hl, step * r,
                                  J.pN + (f * r + hl) * E, step * r * E, E,
                                  out + (size_t)row * E, alpha);
            if (probs != NULL) {
                double *p = probs + (size_t)row * s.ctx;
                for (size_t j = 0; j < n; j++)
                    p[j] = alpha[j / LOWP_ATTN_CHUNK] * p[j] / L;
                for (size_t j = n; j < s.ctx; j++)
                    p[j] = 0.0;
            }
        }
        free(sc);
        free(alpha);
    }
    free(items);
    free(first);
    free(J.pm);
    free(J.pN);
    if (failed)
        return lowp_why_set(why, why_len, "out of memory for the attention reference");
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * The bound
 * ------------------------------------------------------------------------------------- */

static double gam(double k)
{
    const double u = 0x1p-53;
    return k * u / (1.0 - k * u);
}

double lowp_attn_bound_eval(const lowp_attn_bound_terms *t)
{
    const double u = 0x1p-53, tiny = 0x1p-1074, eta = 0x1p-1072;
    if (t == NULL || t->n == 0 || t->qk_dim == 0)
        return NAN;
    const double n = (double)t->n, D = (double)t->qk_dim;
    const double C = (double)(t->chunks > 1 ? t->chunks : 1);
    const double sig = fabs(t->sm_scale), S = t->qk_abs, V = t->v_abs;
    if (!(sig <= DBL_MAX && S >= 0 && S <= DBL_MAX && V >= 0 && V <= DBL_MAX))
        return INFINITY;
    /* binary64 overflow anywhere (scores, their differences, the sums) voids the analysis */
    if (!(sig * S <= 0x1p1000) || !(V * (n + C) <= 0x1p1000))
        return INFINITY;
    const double gm = gam(n + C);
    if (!(gm < 0x1p-10))
        return INFINITY;
    const double delta = sig * S * gam(D + 1) + (sig * D + 1) * tiny;
    const double R = sig * S + delta;
    const int merged = t->chunks > 1;
    const double Delta = delta + (merged ? 4 : 2) * u * R;
    const double rexp = merged ? 4 * u + 4 * u * u : 2 * u; /* (1+2u)^k - 1 */
    const double theta = expm1(Delta) + exp(Delta) * rexp;
    const double EL = exp(delta);
    const double aN = theta + gm + theta * gm;
    const double beta = aN + ((1 + gm) * n * eta + C * tiny) * EL;
    const double triv = V + (V * (1 + gm) / (1 - gm) + (n + C) * tiny) * (1 + u) + tiny;
    double b = triv;
    if (beta < 0.5) {
        const double nu = ((1 + gm) * n * eta * V + (n + C) * tiny) * EL;
        const double err1 = (aN * V + nu + beta * V) / (1 - beta);
        const double err = err1 * (1 + u) + u * V + tiny;
        if (err < b)
            b = err;
    }
    return b * (1 + 0x1p-40);
}

/* The exact score of a key whose k row (or q) holds an Inf or NaN: -1 for -Inf (weight
 * exactly 0, in the reference too), +1 for anything else non-finite (+Inf or NaN: the row
 * is NaN), by the IEEE rules on the exact products. q is finite here. */
static int special_score(const double *qr, const double *kr, size_t D, double sm_scale)
{
    int pos = 0, neg = 0;
    for (size_t d = 0; d < D; d++) {
        double a = qr[d], b = kr[d];
        if (isnan(b) || (isinf(b) && a == 0.0))
            return 1;
        if (isinf(b)) {
            int sgn = (a < 0) != (b < 0) ? -1 : 1;
            if (sm_scale < 0)
                sgn = -sgn;
            if (sgn > 0)
                pos = 1;
            else
                neg = 1;
        }
    }
    return pos ? 1 : (neg ? -1 : 0);
}

/* Magnitudes of one row: an upper bound on max_j sum_d |q_d k_jd| over the visible keys
 * that take part (a key whose exact score is -Inf has weight 0 and adds no error), or
 * +Inf when the row's exact output is not finite (a non-finite q, a visible score NaN or
 * +Inf, every visible score -Inf) or could overflow. */
static double row_qk_abs(const lowp_attn_shape *s, const double *q, const double *k, size_t i,
                         size_t h)
{
    const size_t D = s->qk_dim, nkv = s->num_kv_heads;
    const size_t g = h / (s->num_q_heads / nkv), n = s->q_offset + i + 1;
    const double *qr = q + (i * s->num_q_heads + h) * D;
    for (size_t d = 0; d < D; d++)
        if (!(fabs(qr[d]) <= DBL_MAX))
            return INFINITY;
    double S = 0.0;
    size_t live = 0;
    for (size_t j = 0; j < n; j++) {
        const double *kr = k + (j * nkv + g) * D;
        int finite = 1;
        for (size_t d = 0; d < D; d++)
            finite &= fabs(kr[d]) <= DBL_MAX;
        if (!finite) {
            if (special_score(qr, kr, D, s->sm_scale) > 0)
                return INFINITY;
            /* -Inf: the finite part must not overflow into +Inf on the way */
            double a = 0.0;
            for (size_t d = 0; d < D; d++)
                if (fabs(kr[d]) <= DBL_MAX)
                    a += fabs(qr[d]) * fabs(kr[d]);
            if (!(a <= 0x1p1000))
                return INFINITY;
            continue;
        }
        double a = attn_absdot8(qr, kr, D);
        if (a > S)
            S = a;
        live++;
    }
    if (live == 0 || !(S <= DBL_MAX))
        return INFINITY;
    /* the computed sum of D nonnegative terms is >= (1 - gamma_D) times the exact one */
    return S * (1 + 2 * gam((double)D));
}

static double bound_at(const lowp_attn_shape *s, double S, double V, size_t n)
{
    if (!(S <= DBL_MAX) || !(V <= DBL_MAX))
        return INFINITY;
    lowp_attn_bound_terms t = {n, s->qk_dim, n_chunks(n), s->sm_scale, S, V};
    return lowp_attn_bound_eval(&t);
}

double lowp_attn_ref_bound(const lowp_attn_shape *s_in, const double *q, const double *k,
                           const double *v, size_t i, size_t h, size_t d)
{
    if (s_in == NULL || q == NULL || k == NULL || v == NULL)
        return NAN;
    lowp_attn_shape s = *s_in;
    if (lowp_attn_check_shape(&s, NULL, 0) || i >= s.q_len || h >= s.num_q_heads || d >= s.vo_dim)
        return NAN;
    const size_t E = s.vo_dim, nkv = s.num_kv_heads, g = h / (s.num_q_heads / nkv);
    const size_t n = s.q_offset + i + 1;
    double V = 0.0;
    for (size_t j = 0; j < n; j++) {
        double a = fabs(v[(j * nkv + g) * E + d]);
        if (!(a <= DBL_MAX))
            return INFINITY; /* NaN or Inf: the exact output is not finite */
        if (a > V)
            V = a;
    }
    if (!(V <= DBL_MAX))
        return INFINITY;
    return bound_at(&s, row_qk_abs(&s, q, k, i, h), V, n);
}

int lowp_attn_ref_bounds(const lowp_attn_shape *s_in, const double *q, const double *k,
                         const double *v, double *bound, char *why, size_t why_len)
{
    if (s_in == NULL)
        return lowp_why_set(why, why_len, "shape is NULL");
    lowp_attn_shape s = *s_in;
    if (lowp_attn_check_shape(&s, why, why_len))
        return -1;
    if (q == NULL || k == NULL || v == NULL || bound == NULL)
        return lowp_why_set(why, why_len, "q, k, v and bound must not be NULL");
    const size_t E = s.vo_dim, nkv = s.num_kv_heads, G = s.num_q_heads / nkv;
    const long rows = (long)(s.q_len * s.num_q_heads);
    double work = (double)rows * (double)(s.q_offset + s.q_len) * (double)(s.qk_dim + s.vo_dim);
    int failed = 0;
#pragma omp parallel if (work > 4e6 && rows > 1) reduction(| : failed)
    {
        double *Vm = malloc(E * sizeof *Vm);
        if (Vm == NULL) {
            failed = 1;
        } else {
#pragma omp for schedule(dynamic, 1)
            for (long r = 0; r < rows; r++) {
                size_t i = (size_t)r / s.num_q_heads, h = (size_t)r % s.num_q_heads, g = h / G;
                size_t n = s.q_offset + i + 1;
                for (size_t e = 0; e < E; e++)
                    Vm[e] = 0.0;
                for (size_t j = 0; j < n; j++) {
                    const double *vr = v + (j * nkv + g) * E;
                    for (size_t e = 0; e < E; e++) {
                        double a = fabs(vr[e]);
                        a = a <= DBL_MAX ? a : INFINITY; /* NaN counts as Inf: no bound */
                        Vm[e] = a > Vm[e] ? a : Vm[e];
                    }
                }
                double S = row_qk_abs(&s, q, k, i, h);
                for (size_t e = 0; e < E; e++)
                    bound[(size_t)r * E + e] = bound_at(&s, S, Vm[e], n);
            }
        }
        free(Vm);
    }
    if (failed)
        return lowp_why_set(why, why_len, "out of memory for the attention bound");
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * The a-posteriori bound (lowp_attn_ref_f64_bounded)
 *
 * The a-priori bound above charges every key max|v| and every addition n u; on a 32K-token
 * decode it is ~1e-11 while the reference is ~1e-15 off, so most binary32 roundings stay
 * open. This bound re-runs the reference's own operations (the same kernels, so the same
 * bits: the output is lowp_attn_ref_f64's, which a test checks) and charges each rounding
 * what it can have cost given the values actually met. u = 2^-53, tiny = 2^-1074,
 * gamma_k = k u / (1 - k u). RN: |fl(x) - x| <= u |fl(x)| for a normal result; an
 * addition is exact when it underflows; a product or quotient that underflows is off by at
 * most tiny/2.
 *
 * Row (i, h), visible keys j = 0..n-1 in chunks c; the reference computes s^_j, per chunk
 * m_c and x^_j = s^_j - m_c (rounded), w^_j = wexp(x^_j), L^_c, N^_c[e] (sequential sums
 * from 0), then M = max m_c, y^_c = m_c - M (rounded), a^_c = wexp(y^_c), L^, N^[e] (the
 * merge, sequential from 0), out = N^[e] / L^. The exact output is o = sum w_j v_j / sum
 * w_j with w_j = e^{s_j - M} (softmax does not depend on the shift; M is the computed one).
 *
 * 1. Score of key j. attn_dot8 puts each product through 1 rounding, then its lane's
 *    additions (a lane of m = ceil(D/8) terms: m - 1 of them round; the first, to 0.0, is
 *    exact) and the lane tree (depth 3 for D >= 5; 2 for D 3..4, 1 for D = 2, 0 for D = 1:
 *    additions of an empty lane's 0.0 are exact), so each term meets at most
 *    k_D = m + depth roundings (Higham, Accuracy and Stability, 2nd ed., lemma 3.3 and
 *    eq. 3.5); the product by sm_scale adds one more unless sm_scale is a power of two.
 *    With A_j = sum_d |q_d k_jd| <= A^_j / (1 - gamma_{k_D}) (attn_absdot8, same order):
 *        |s^_j - s_j| <= delta_j = |sigma| gamma_k A_j + (2 |sigma| D + 1) tiny.
 * 2. The weights the reference uses, W_j = a^_c w^_j taken as exact products. The
 *    exponent of W_j differs from s_j - M by at most a_j = delta_j + u |x^_j| + u |y^_c|
 *    (two subtractions, each rounded once), and glibc's exp is within 1 ulp (2u relative)
 *    in the normal range (manual, "Known Maximum Errors in Math Functions"; the floor and
 *    subnormal results are absolute errors, step 3). So W_j = w_j (1 + theta_j) with
 *    |theta_j| <= e^{a_j} (1 + 2u)^2 - 1, and for a_j <= 2^-20 (checked, else no bound)
 *        tau_j := |theta_j| / (1 - |theta_j|) <= (a_j + 4u) (1 + 2^-18).
 * 3. Absolute terms. A weight or alpha that is subnormal or floored is off by at most
 *    2^-1073 absolute; a key with x^_j + delta_j + u |x^_j| <= -746 (its exact weight below
 *    2^-1076), or in a chunk with y^_c + u |y^_c| + max delta <= -746, is treated as wholly
 *    absolute: |W_j - w_j| <= 2^-1071 for those. So W_j = w_j (1 + theta_j) + zeta_j with
 *    |zeta_j| (1 + tau_j) <= 2^-1069 =: z for every key.
 * 4. Weights to output. With L' = sum W_j and o' = sum W_j v_j / L' (exact sums of the
 *    computed weights), sum w_j (v_j - o) = 0 gives
 *        o' - o = sum_j (W_j tau'_j + zeta'_j) (v_j - o) / L',  |tau'_j| <= tau_j, |zeta'_j| <= z,
 *    and |v_j - o| <= |v_j| + |o'| + |o - o'|, so with O1 >= |o'| (step 6), T = (sum W_j
 *    tau_j + n z) / L' and Vm = max |v_j|:
 *        |o' - o| <= (sum_j W_j tau_j |v_j| + O1 sum_j W_j tau_j + n z (Vm + O1)) / (L' (1 - T)).
 *    The sums are formed per chunk: Q_c[e] = sum_{j in c} w^_j (delta_j + u |x^_j|) |v_je|,
 *    P_c[e] = sum w^_j |v_je|, SD_c = sum w^_j (delta_j + u |x^_j|), then times a^_c with the
 *    chunk's (u |y^_c| + 4u) on P_c and on sum w^_j <= L^_c + u RL_c.
 * 5. Sums. A sequential sum s_k = fl(s_{k-1} + t_k) from 0 is off from the exact sum of its
 *    terms by at most u sum_k |s_k| (each addition's own error, exactly accumulated), the
 *    running error bound (Higham, section 3.3). The partial sums are the reference's own,
 *    recomputed here bit for bit: RL_c = sum of L^_c's partial sums, R_c[e] = sum |partial
 *    N^_c[e]|, Rm = those of the merge. Products w^_j v_je and a^_c N^_c[e]: u |result| +
 *    tiny/2 each, u (1 + u) w^_j |v_je| for the former. Hence, against L' and N' = sum W_j v_j,
 *        dL = u (sum_c a^_c RL_c + RmL + PmL) + C tiny,
 *        dN = u (sum_c a^_c (R_c + (1 + u) P_c) + Rm + Pm) + (n + C) tiny,
 *    PmL, Pm the sums of |merge products|, and L' >= L_lo = L^ - dL > 0 (L^ >= 1: the key
 *    with the largest score has weight 1 in the chunk whose alpha is 1).
 * 6. Quotient. N^/L^ - o' = ((N^ - N') - o' (L^ - L')) / L^, |o'| <= O1 = (|N^| + dN) / L_lo,
 *    and fl(N^/L^) adds u |out| + tiny/2:
 *        |out - o| <= u |out| + tiny + (dN + O1 dL) / L^ + (step 4).
 * The bound is evaluated in binary64 from nonnegative terms: sums of at most 2^28 + C terms
 * and a few dozen products and quotients, each a relative error below 2^-21 in all, covered
 * by the final factor (1 + 2^-20). It is +Inf (no bound) where the output is not finite,
 * an input or score is not finite (a key whose exact score is -Inf, weight 0 on both
 * sides, is fine), |sm_scale| A_j or Vm (n + C) exceeds 2^1000 (overflow), a_j > 2^-20 on a
 * key that counts, or n > 2^28.
 * ------------------------------------------------------------------------------------- */

#define BND_U 0x1p-53
#define BND_TINY 0x1p-1074
#define BND_Z 0x1p-1069
#define BND_ITEM_CAP 4096 /* work items held at once: about 4 r E doubles each */

/* Roundings one product term of attn_dot8 meets (step 1). */
static size_t dot_roundings(size_t D)
{
    size_t lanes = D < 8 ? D : 8;
    size_t depth = lanes <= 1 ? 0 : lanes <= 2 ? 1 : lanes <= 4 ? 2 : 3;
    return (D + 7) / 8 + depth;
}

/* 1 if the exact score of key kr (q finite) is -Inf with a finite part that cannot
 * overflow on the way (so the reference's -Inf is the exact one). */
static int exact_minus_inf(const double *qr, const double *kr, size_t D, double sm)
{
    int finite = 1;
    for (size_t d = 0; d < D; d++)
        finite &= fabs(kr[d]) <= DBL_MAX;
    if (finite || special_score(qr, kr, D, sm) != -1)
        return 0;
    double a = 0.0;
    for (size_t d = 0; d < D; d++)
        if (fabs(kr[d]) <= DBL_MAX)
            a += fabs(qr[d]) * fabs(kr[d]);
    return a <= 0x1p1000;
}

typedef struct {
    const lowp_attn_shape *s;
    const double *q, *k, *v;
    size_t r, E;
    double gk, gkD; /* gamma_k of the score, gamma_{k_D} of the dot */
    /* per (item, head): chunk max, L^_c, RL_c, SD_c, max delta, bad */
    double *m, *L, *RL, *SD, *Dm;
    unsigned char *bad;
    /* per (item, head, e): N^_c, R_c, P_c, Q_c; per (item, e): max |v| */
    double *N, *R, *P, *Q, *Vm;
} bjob;

ATTN_CLONES
static void bound_item(const bjob *J, size_t idx, const ritem *it, double *sc, double *xs)
{
    const lowp_attn_shape *s = J->s;
    const size_t D = s->qk_dim, E = J->E, nkv = s->num_kv_heads, r = J->r;
    const size_t n = s->q_offset + it->i + 1, CH = LOWP_ATTN_CHUNK;
    const size_t t0 = it->c * CH, t1 = t0 + CH < n ? t0 + CH : n, nt = t1 - t0;
    const double sig = fabs(s->sm_scale), tiny_d = (2 * sig * (double)D + 1) * BND_TINY;
    const double *qg = J->q + (it->i * s->num_q_heads + it->g * r) * D;
    const double *vg = J->v + it->g * E;
    const size_t vs = nkv * E;
    for (size_t t = t0; t < t1; t++)
        attn_scores(qg, r, D, J->k + (t * nkv + it->g) * D, sc + (t - t0), CH, s->sm_scale);
    for (size_t h = 0; h < r; h++) {
        const size_t x = idx * r + h;
        double *w = sc + h * CH, *coef = xs + h * CH;
        const double *qr = qg + h * D;
        memcpy(coef, w, nt * sizeof *coef); /* the scores s^_j, before they become weights */
        attn_weights(w, nt, &J->m[x], &J->L[x]);
        const double shift = J->m[x] == -INFINITY ? 0.0 : J->m[x];
        int bad = 0;
        for (size_t d = 0; d < D; d++)
            bad |= !(fabs(qr[d]) <= DBL_MAX);
        double RL = 0.0, Lp = 0.0, SD = 0.0, Dm = 0.0;
        for (size_t j = 0; j < nt && !bad; j++) {
            const double sj = coef[j];
            Lp += w[j]; /* L^_c's partial sums, as attn_weights forms them */
            RL += Lp;
            coef[j] = 0.0;
            if (sj == -INFINITY) {
                bad |= !exact_minus_inf(qr, J->k + ((t0 + j) * nkv + it->g) * D, D, s->sm_scale);
                continue;
            }
            const double A = attn_absdot8(qr, J->k + ((t0 + j) * nkv + it->g) * D, D);
            if (!(sig * A <= 0x1p1000) || !(fabs(sj) <= 0x1p1000)) {
                bad = 1; /* NaN, +Inf or overflow */
                continue;
            }
            const double delta = sig * J->gk * (A / (1 - J->gkD)) + tiny_d;
            const double xj = sj - shift, aj = delta + BND_U * fabs(xj);
            if (xj + aj <= -746.0)
                continue; /* step 3: absolute */
            if (!(delta <= 0x1p-21)) {
                bad = 1;
                continue;
            }
            coef[j] = w[j] * aj;
            SD += coef[j];
            Dm = delta > Dm ? delta : Dm;
        }
        if (bad) /* no bound for the row (the output is still the reference's) */
            for (size_t j = 0; j < nt; j++)
                coef[j] = 0.0;
        J->RL[x] = RL;
        J->SD[x] = SD;
        J->Dm[x] = Dm;
        J->bad[x] = (unsigned char)bad;
    }
    /* the sums, every V row read once for the group (as attn_pv4 does) */
    double *Vm = J->Vm + idx * E;
    double *N = J->N + idx * r * E, *R = J->R + idx * r * E, *P = J->P + idx * r * E,
           *Q = J->Q + idx * r * E;
    for (size_t x = 0; x < r * E; x++)
        N[x] = R[x] = P[x] = Q[x] = 0.0;
    for (size_t e = 0; e < E; e++)
        Vm[e] = 0.0;
    for (size_t j = 0; j < nt; j++) {
        const double *vr = vg + (t0 + j) * vs;
        for (size_t e = 0; e < E; e++) {
            double a = fabs(vr[e]);
            a = a <= DBL_MAX ? a : INFINITY; /* NaN counts as Inf: no bound */
            Vm[e] = a > Vm[e] ? a : Vm[e];
        }
        for (size_t h = 0; h < r; h++) {
            const double wj = sc[h * CH + j], cj = xs[h * CH + j];
            double *Nh = N + h * E, *Rh = R + h * E, *Ph = P + h * E, *Qh = Q + h * E;
            for (size_t e = 0; e < E; e++) {
                const double ve = vr[e], av = fabs(ve);
                Nh[e] = Nh[e] + wj * ve; /* the reference's partial sum, bit for bit */
                Rh[e] += fabs(Nh[e]);
                Ph[e] += wj * av;
                Qh[e] += cj * av;
            }
        }
    }
}

/* One row: the reference's merge, bit for bit, and the bound of every column. ws holds
 * 6 E doubles. */
static void bound_row(const bjob *J, size_t row, size_t first, double *out, double *bound,
                      double *ws)
{
    const lowp_attn_shape *s = J->s;
    const size_t E = J->E, nkv = s->num_kv_heads, r = J->r;
    const size_t i = row / s->num_q_heads, h = row % s->num_q_heads, g = h / r, hl = h % r;
    const size_t n = s->q_offset + i + 1, C = n_chunks(n);
    const double U = BND_U;
    double *Rs = ws, *Ps = ws + E, *Qt = ws + 2 * E, *Rm = ws + 3 * E, *Pm = ws + 4 * E,
           *Vm = ws + 5 * E;
    int bad = n > ((size_t)1 << 28);
    double M = -INFINITY;
    for (size_t c = 0; c < C; c++) {
        const size_t x = (first + c * nkv + g) * r + hl;
        M = J->m[x] > M ? J->m[x] : M;
        bad |= J->bad[x];
    }
    bad |= M == -INFINITY; /* every visible score -Inf: the row is NaN */
    double Lt = 0.0, RmL = 0.0, PmL = 0.0, aRL = 0.0, SW = 0.0;
    for (size_t e = 0; e < E; e++)
        out[e] = Rs[e] = Ps[e] = Qt[e] = Rm[e] = Pm[e] = Vm[e] = 0.0;
    for (size_t c = 0; c < C; c++) {
        const size_t it = first + c * nkv + g, x = it * r + hl;
        const double mc = J->m[x];
        const double a = mc == -INFINITY ? 0.0 : attn_wexp(mc - M);
        const double y = mc == -INFINITY ? 0.0 : mc - M;
        const double pl = a * J->L[x];
        Lt += pl;
        RmL += Lt;
        PmL += pl;
        aRL += a * J->RL[x];
        /* step 3: a chunk whose every weight is below 2^-1076 is wholly absolute */
        const int negl = mc == -INFINITY || y + U * fabs(y) + J->Dm[x] <= -746.0;
        const double cy = U * fabs(y) + 4 * U;
        if (!negl) {
            bad |= !(U * fabs(y) <= 0x1p-22);
            SW += a * (J->SD[x] + cy * (J->L[x] + U * J->RL[x]));
        }
        const double *Nc = J->N + x * E, *Rc = J->R + x * E, *Pc = J->P + x * E,
                     *Qc = J->Q + x * E, *Vc = J->Vm + it * E;
        for (size_t e = 0; e < E; e++) {
            const double pn = a * Nc[e];
            out[e] += pn; /* attn_merge's operations */
            Rm[e] += fabs(out[e]);
            Pm[e] += fabs(pn);
            Rs[e] += a * Rc[e];
            Ps[e] += a * Pc[e];
            if (!negl)
                Qt[e] += a * (Qc[e] + cy * Pc[e]);
            Vm[e] = Vc[e] > Vm[e] ? Vc[e] : Vm[e];
        }
    }
    const double Cd = (double)C, nd = (double)n, nz = nd * BND_Z;
    const double dL = U * (aRL + RmL + PmL) + Cd * BND_TINY;
    const double Llo = Lt - dL;
    const double SWt = SW * (1 + 0x1p-18);
    const double T = (SWt + nz) / Llo;
    bad |= !(Llo > 0) || !(T < 0.5);
    for (size_t e = 0; e < E; e++) {
        const double Nh = out[e];
        out[e] = Nh / Lt;
        if (bound == NULL)
            continue;
        if (bad || !(Vm[e] * (nd + Cd) <= 0x1p1000) || !(fabs(out[e]) <= DBL_MAX)) {
            bound[e] = INFINITY;
            continue;
        }
        const double dN = U * (Rs[e] + (1 + U) * Ps[e] + Rm[e] + Pm[e]) + (nd + Cd) * BND_TINY;
        const double O1 = (fabs(Nh) + dN) / Llo;
        const double E1 = (Qt[e] * (1 + 0x1p-18) + O1 * SWt + nz * (Vm[e] + O1)) / (Llo * (1 - T));
        const double b = U * fabs(out[e]) + BND_TINY + (dN + O1 * dL) / Lt + E1;
        bound[e] = b <= DBL_MAX ? b * (1 + 0x1p-20) : INFINITY;
    }
}

int lowp_attn_ref_f64_bounded(const lowp_attn_shape *s_in, const double *q, const double *k,
                              const double *v, double *out, double *bound, char *why,
                              size_t why_len)
{
    if (s_in == NULL)
        return lowp_why_set(why, why_len, "shape is NULL");
    lowp_attn_shape s = *s_in;
    if (lowp_attn_check_shape(&s, why, why_len))
        return -1;
    if (q == NULL || k == NULL || v == NULL || (out == NULL && bound == NULL))
        return lowp_why_set(why, why_len, "q, k and v must not be NULL, nor both out and bound");
    const size_t nkv = s.num_kv_heads, r = s.num_q_heads / nkv, E = s.vo_dim, D = s.qk_dim;
    int ex;
    const int pow2 = frexp(fabs(s.sm_scale), &ex) == 0.5; /* the product by it is exact */
    const size_t kD = dot_roundings(D);
    bjob J = {&s, q, k, v, r, E, gam((double)(kD + (pow2 ? 0 : 1))), gam((double)kD),
              NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    /* token blocks of at most BND_ITEM_CAP items (one token's items always fit together) */
    size_t cap = 0, total = 0;
    for (size_t i = 0; i < s.q_len; i++) {
        size_t ni = nkv * n_chunks(s.q_offset + i + 1);
        cap = ni > cap ? ni : cap;
        total += ni;
    }
    cap = cap > BND_ITEM_CAP ? cap : BND_ITEM_CAP;
    cap = cap < total ? cap : total;
    ritem *items = malloc(cap * sizeof *items);
    size_t *first = malloc(s.q_len * sizeof *first);
    J.m = malloc(5 * cap * r * sizeof(double));
    J.bad = malloc(cap * r);
    J.N = malloc(4 * cap * r * E * sizeof(double));
    J.Vm = malloc(cap * E * sizeof(double));
    double *obuf = out != NULL ? NULL : malloc(s.q_len * s.num_q_heads * E * sizeof(double));
    int failed = items == NULL || first == NULL || J.m == NULL || J.bad == NULL || J.N == NULL ||
                 J.Vm == NULL || (out == NULL && obuf == NULL);
    if (!failed) {
        J.L = J.m + cap * r;
        J.RL = J.L + cap * r;
        J.SD = J.RL + cap * r;
        J.Dm = J.SD + cap * r;
        J.R = J.N + cap * r * E;
        J.P = J.R + cap * r * E;
        J.Q = J.P + cap * r * E;
    }
    double *o = out != NULL ? out : obuf;
    for (size_t i0 = 0; i0 < s.q_len && !failed;) {
        size_t x = 0, i1 = i0;
        while (i1 < s.q_len && x + nkv * n_chunks(s.q_offset + i1 + 1) <= cap) {
            first[i1] = x;
            for (size_t c = 0; c < n_chunks(s.q_offset + i1 + 1); c++)
                for (size_t g = 0; g < nkv; g++)
                    items[x++] = (ritem){i1, g, c};
            i1++;
        }
        const long n_items = (long)x;
        const long r0 = (long)(i0 * s.num_q_heads), r1 = (long)(i1 * s.num_q_heads);
        double work = (double)n_items * LOWP_ATTN_CHUNK * (double)r * (double)(D + E);
#pragma omp parallel if (work > 4e6 && n_items + (r1 - r0) > 2) reduction(| : failed)
        {
            double *sc = malloc(2 * r * LOWP_ATTN_CHUNK * sizeof(double));
            double *ws = malloc(6 * E * sizeof(double));
            if (sc == NULL || ws == NULL)
                failed = 1;
#pragma omp for schedule(dynamic, 1)
            for (long it = 0; it < n_items; it++)
                if (sc != NULL)
                    bound_item(&J, (size_t)it, &items[it], sc, sc + r * LOWP_ATTN_CHUNK);
#pragma omp for schedule(dynamic, 4)
            for (long row = r0; row < r1; row++)
                if (ws != NULL)
                    bound_row(&J, (size_t)row, first[(size_t)row / s.num_q_heads],
                              o + (size_t)row * E, bound ? bound + (size_t)row * E : NULL, ws);
            free(sc);
            free(ws);
        }
        i0 = i1;
    }
    free(items);
    free(first);
    free(J.m);
    free(J.bad);
    free(J.N);
    free(J.Vm);
    free(obuf);
    if (failed)
        return lowp_why_set(why, why_len, "out of memory for the attention reference");
    return 0;
}
