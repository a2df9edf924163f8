/* ref/attn/src/attn_internal.h: the binary64 attention kernels shared by attn_ref.c (dense) and
 * attn_paged.c (paged decode). Private: not installed, not part of the API.
 *
 * Both references are built from these functions only, so they perform the same
 * operations in the same order (lowp/attn.h states the order) and agree bit for bit; only
 * the way a K or V row is fetched differs (a pointer into a dense array, or a row
 * dequantized from the cache's pages).
 *
 * Vector code uses GCC's vector extensions, whose arithmetic is lane-wise IEEE: with
 * -ffp-contract=off it rounds exactly as the scalar loops beside it (no FMA is ever formed,
 * in any clone). The hot loops of both files are also compiled for AVX2 (ATTN_CLONES);
 * every helper here is force-inlined so that the clone compiles it for AVX2 as well.
 */
#ifndef LOWP_ATTN_INTERNAL_H
#define LOWP_ATTN_INTERNAL_H

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "lowp/attn.h"

#if defined(__GNUC__)
#define ATTN_HOT static inline __attribute__((always_inline))
#else
#define ATTN_HOT static inline
#endif

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && \
    !defined(LOWP_NO_TARGET_CLONES)
#define ATTN_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define ATTN_CLONES
#endif

/* GCC 12 or later (for __builtin_shufflevector); others take the plain C loops, which give
 * the same bits (LOWP_NO_VEC forces them, for testing that). */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12 && !defined(LOWP_NO_VEC)
#define ATTN_VEC 1
typedef double attn_v4d __attribute__((vector_size(32)));
typedef double attn_v2d __attribute__((vector_size(16)));
typedef long long attn_v4i __attribute__((vector_size(32)));
/* a macro: a function returning a 32-byte vector would trip -Wpsabi */
#define ATTN_LD4(v, p) memcpy(&(v), (p), sizeof(attn_v4d))
#endif

/* sum_d a_d b_d in 8 lanes (lane l: d = l mod 8, increasing d), combined
 * ((l0+l4)+(l1+l5))+((l2+l6)+(l3+l7)). */
ATTN_HOT double attn_dot8(const double *a, const double *b, size_t n)
{
    double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    size_t d = 0;
    for (; d + 8 <= n; d += 8)
        for (int l = 0; l < 8; l++)
            acc[l] += a[d + l] * b[d + l];
    for (int l = 0; d + (size_t)l < n; l++)
        acc[l] += a[d + l] * b[d + l];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

/* sum_d |a_d b_d|, same order (callers turn it into an upper bound). */
ATTN_HOT double attn_absdot8(const double *a, const double *b, size_t n)
{
    double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    size_t d = 0;
    for (; d + 8 <= n; d += 8)
        for (int l = 0; l < 8; l++)
            acc[l] += fabs(a[d + l]) * fabs(b[d + l]);
    for (int l = 0; d + (size_t)l < n; l++)
        acc[l] += fabs(a[d + l]) * fabs(b[d + l]);
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

/* exp with the floor: a finite argument never gives weight 0 (attn.h). */
ATTN_HOT double attn_wexp(double x)
{
    double w = exp(x);
    if (w == 0.0 && x >= -DBL_MAX)
        w = 0x1p-1074;
    return w;
}

/* attn_dot8 for NH = 4 or 2 query heads (rows D apart) against one K row, times sm, to
 * out[h * stride]: the same operations per head (lanes 0-3 and 4-7 as two 4-wide vectors),
 * with 2 NH independent chains to hide the addition latency. */
#if defined(ATTN_VEC)
#define ATTN_DOTN(NH)                                                                       \
    ATTN_HOT void attn_dot8_##NH(const double *q, size_t D, const double *b, double *out,   \
                                 size_t stride, double sm)                                 \
    {                                                                                       \
        attn_v4d lo[NH], hi[NH];                                                            \
        for (int h = 0; h < NH; h++)                                                        \
            lo[h] = hi[h] = (attn_v4d){0, 0, 0, 0};                                         \
        size_t d = 0;                                                                       \
        for (; d + 8 <= D; d += 8) {                                                        \
            attn_v4d b0, b1, x0, x1;                                                        \
            ATTN_LD4(b0, b + d);                                                            \
            ATTN_LD4(b1, b + d + 4);                                                        \
            for (int h = 0; h < NH; h++) {                                                  \
                ATTN_LD4(x0, q + (size_t)h * D + d);                                        \
                ATTN_LD4(x1, q + (size_t)h * D + d + 4);                                    \
                lo[h] += x0 * b0;                                                           \
                hi[h] += x1 * b1;                                                           \
            }                                                                               \
        }                                                                                   \
        if (NH == 4 && d == D) {                                                            \
            /* ((l0+l4)+(l1+l5))+((l2+l6)+(l3+l7)) of the 4 heads at once, by shuffles */    \
            const attn_v4i ev = {0, 4, 2, 6}, od = {1, 5, 3, 7};                            \
            const attn_v4i lo2 = {0, 1, 4, 5}, hi2 = {2, 3, 6, 7};                          \
            attn_v4d t0 = lo[0] + hi[0], t1 = lo[1 % NH] + hi[1 % NH];                      \
            attn_v4d t2 = lo[2 % NH] + hi[2 % NH], t3 = lo[3 % NH] + hi[3 % NH];            \
            attn_v4d u01 = __builtin_shuffle(t0, t1, ev) + __builtin_shuffle(t0, t1, od);   \
            attn_v4d u23 = __builtin_shuffle(t2, t3, ev) + __builtin_shuffle(t2, t3, od);   \
            attn_v4d s4 = (__builtin_shuffle(u01, u23, lo2) + __builtin_shuffle(u01, u23, hi2)) * \
                          (attn_v4d){sm, sm, sm, sm};                                       \
            for (int h = 0; h < 4; h++)                                                     \
                out[(size_t)h * stride] = s4[h];                                            \
            return;                                                                         \
        }                                                                                   \
        for (int h = 0; h < NH; h++) {                                                      \
            double a[8];                                                                    \
            memcpy(a, &lo[h], sizeof lo[h]);                                                \
            memcpy(a + 4, &hi[h], sizeof hi[h]);                                            \
            for (int l = 0; d + (size_t)l < D; l++)                                         \
                a[l] += q[(size_t)h * D + d + l] * b[d + l];                                \
            out[(size_t)h * stride] =                                                       \
                sm * (((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7])));   \
        }                                                                                   \
    }
#else
#define ATTN_DOTN(NH)                                                                       \
    ATTN_HOT void attn_dot8_##NH(const double *q, size_t D, const double *b, double *out,   \
                                 size_t stride, double sm)                                 \
    {                                                                                       \
        for (int h = 0; h < NH; h++)                                                        \
            out[(size_t)h * stride] = sm * attn_dot8(q + (size_t)h * D, b, D);              \
    }
#endif
ATTN_DOTN(4)
ATTN_DOTN(2)

/* Scores of one K row against the r query heads of a group (q rows D apart):
 * sc[h * stride] = sm * dot(q_h, k). */
ATTN_HOT void attn_scores(const double *qg, size_t r, size_t D, const double *kr, double *sc,
                          size_t stride, double sm)
{
    size_t h = 0;
    for (; h + 4 <= r; h += 4)
        attn_dot8_4(qg + h * D, D, kr, sc + h * stride, stride, sm);
    for (; h + 2 <= r; h += 2)
        attn_dot8_2(qg + h * D, D, kr, sc + h * stride, stride, sm);
    for (; h < r; h++)
        sc[h * stride] = sm * attn_dot8(qg + h * D, kr, D);
}

/* One head's chunk: m = max s_j (NaN ignored, -Inf if none), s_j <- exp(s_j - shift) with
 * shift = m (0 if m is -Inf), floored; L = their sum in increasing j. */
ATTN_HOT void attn_weights(double *s, size_t nt, double *m_out, double *L_out)
{
    double m = -INFINITY;
    for (size_t j = 0; j < nt; j++)
        if (s[j] > m)
            m = s[j];
    double shift = m == -INFINITY ? 0.0 : m, L = 0.0;
    for (size_t j = 0; j < nt; j++) {
        s[j] = attn_wexp(s[j] - shift);
        L += s[j];
    }
    *m_out = m;
    *L_out = L;
}

/* N_h[e] += w_h,t v_t[e] for four tokens t = 0..3 in order (N_h at N + h E, w_h,t at
 * w[h * stride + t]): (((N + w0 v0) + w1 v1) + w2 v2) + w3 v3, the rounding sequence of
 * four single updates. */
ATTN_HOT void attn_pv4(double *N, size_t r, size_t E, const double *w, size_t stride,
                       const double *v0, const double *v1, const double *v2, const double *v3)
{
#if defined(ATTN_VEC)
    if (E % 4 == 0 && r <= 16) {
        /* each V vector loaded once for the whole group */
        attn_v4d W[16][4];
        for (size_t h = 0; h < r; h++)
            for (int u = 0; u < 4; u++) {
                const double x = w[h * stride + (size_t)u];
                W[h][u] = (attn_v4d){x, x, x, x};
            }
        for (size_t e = 0; e < E; e += 4) {
            attn_v4d a0, a1, a2, a3, x;
            ATTN_LD4(a0, v0 + e);
            ATTN_LD4(a1, v1 + e);
            ATTN_LD4(a2, v2 + e);
            ATTN_LD4(a3, v3 + e);
            for (size_t h = 0; h < r; h++) {
                ATTN_LD4(x, N + h * E + e);
                x = (((x + W[h][0] * a0) + W[h][1] * a1) + W[h][2] * a2) + W[h][3] * a3;
                memcpy(N + h * E + e, &x, sizeof x);
            }
        }
        return;
    }
#endif
    for (size_t h = 0; h < r; h++) {
        const double *wh = w + h * stride;
        const double w0 = wh[0], w1 = wh[1], w2 = wh[2], w3 = wh[3];
        double *Nh = N + h * E;
        for (size_t e = 0; e < E; e++)
            Nh[e] = (((Nh[e] + w0 * v0[e]) + w1 * v1[e]) + w2 * v2[e]) + w3 * v3[e];
    }
}

ATTN_HOT void attn_pv1(double *N, size_t r, size_t E, const double *w, size_t stride,
                       const double *v0)
{
    for (size_t h = 0; h < r; h++) {
        const double w0 = w[h * stride];
        double *Nh = N + h * E;
        for (size_t e = 0; e < E; e++)
            Nh[e] += w0 * v0[e];
    }
}

/* The merge of one head's C chunks (chunk c: max m[c ms], sum L[c ms], N + c ns):
 * alpha_c = exp(m_c - M) (floored; 0 for an all -Inf chunk), out[e] = sum_c alpha_c N_c[e]
 * / sum_c alpha_c L_c, in chunk order. alpha (may be NULL) receives the alpha_c; returns
 * the total L. */
static inline double attn_merge(size_t C, const double *m, const double *L, size_t ms,
                                const double *N, size_t ns, size_t E, double *out,
                                double *alpha)
{
    double M = -INFINITY;
    for (size_t c = 0; c < C; c++)
        if (m[c * ms] > M)
            M = m[c * ms];
    double Lt = 0.0;
    for (size_t e = 0; e < E; e++)
        out[e] = 0.0;
    for (size_t c = 0; c < C; c++) {
        const double mc = m[c * ms];
        const double a = mc == -INFINITY ? 0.0 : attn_wexp(mc - M);
        if (alpha != NULL)
            alpha[c] = a;
        Lt += a * L[c * ms];
        const double *Nc = N + c * ns;
        for (size_t e = 0; e < E; e++)
            out[e] += a * Nc[e];
    }
    for (size_t e = 0; e < E; e++)
        out[e] = out[e] / Lt;
    return Lt;
}

#endif /* LOWP_ATTN_INTERNAL_H */
