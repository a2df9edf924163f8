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
