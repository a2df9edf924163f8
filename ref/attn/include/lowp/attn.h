/* lowp/attn.h: scaled-dot-product attention references (oracle and binary64).
 *
 * Shapes (row-major, contiguous):
 *   q   [q_len][num_q_heads][qk_dim]
 *   k   [ctx][num_kv_heads][qk_dim]
 *   v   [ctx][num_kv_heads][vo_dim]
 *   out [q_len][num_q_heads][vo_dim]
 * Query token i sits at position q_offset + i and sees cache positions 0..q_offset+i
 * (causal; q_len 1 with q_offset ctx-1 is decode). Grouped-query attention: query head
 * h reads KV head h / (num_q_heads / num_kv_heads); any integer group ratio (5, 6, 12 ...).
 *
 *   score_ij = sm_scale * sum_d q_id k_jd;  p_ij = softmax_j(score_ij);  out_i = sum_j p_ij v_j
 *
 * The inputs are given exactly (doubles holding dequantized values); these functions
 * compute the attention on them. What a format or a production data path costs is
 * decided before (lowp/kvcache.h): this module only does the math, two ways:
 *   - lowp_attn_oracle_mpfr: every sum, exp and quotient in MPFR at `prec` bits, then
 *     rounded once to binary32 (and to binary64 for the error analysis);
 *   - lowp_attn_ref_f64: binary64 with a stated error bound (lowp_attn_ref_bound), fast
 *     enough to check a 128K-context decode in well under a second per sequence.
 */
#ifndef LOWP_ATTN_H
#define LOWP_ATTN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lowp_attn_shape {
    size_t q_len;
    size_t num_q_heads, num_kv_heads;
    size_t qk_dim, vo_dim;
    size_t ctx;      /* cache positions 0..ctx-1 */
    size_t q_offset; /* position of query token 0; q_offset + q_len <= ctx */
    double sm_scale; /* softmax scale; 1/sqrt(qk_dim) when 0 is given */
} lowp_attn_shape;

/* 0, or -1 with one sentence naming the offending argument (num_q_heads not a multiple
 * of num_kv_heads, q_offset + q_len > ctx, a zero dimension, ...). Fills in sm_scale. */
int lowp_attn_check_shape(lowp_attn_shape *s, char *why, size_t why_len);

/* Exact attention for the given inputs: MPFR at prec bits (128 when prec is 0), each
 * output rounded once to binary32 (out32, may be NULL) and binary64 (out64, may be NULL).
 * NaN/Inf inputs propagate as IEEE arithmetic would (a NaN key in the visible range
 * makes the row NaN). Returns 0, or -1 with a reason. */
int lowp_attn_oracle_mpfr(const lowp_attn_shape *s, const double *q, const double *k,
                          const double *v, unsigned prec, float *out32, double *out64,
                          char *why, size_t why_len);

/* The same attention in binary64 (max-subtracted softmax, plain sums in chunks of
 * LOWP_ATTN_CHUNK: the bound does not need compensation). probs, if not NULL, receives p_ij as [q_len][num_q_heads][ctx]
 * (zero where masked). Returns 0, or -1 with a reason. */
int lowp_attn_ref_f64(const lowp_attn_shape *s, const double *q, const double *k,
                      const double *v, double *out, double *probs, char *why, size_t why_len);

/* Bound on |lowp_attn_ref_f64 - exact| for output (i, h, d), derived in ref/attn/src/attn_ref.c
 * from the inputs' magnitudes; the tests hold the reference to it against the oracle. */
double lowp_attn_ref_bound(const lowp_attn_shape *s, const double *q, const double *k,
                           const double *v, size_t i, size_t h, size_t d);

/* ---- Extensions ---------------------------------------------------------------------
 *
 * Special values (both functions). With the exact scores s_j (IEEE rules on the exact
 * products and sums: NaN from a NaN, from 0 * Inf or from +Inf + -Inf):
 *   - a visible score that is NaN or +Inf, or every visible score -Inf: the row is NaN;
 *   - a score of -Inf gives weight exactly 0, and 0 * (NaN or +-Inf) is NaN;
 *   - every finite score gives a weight > 0 (however small: the references never let it
 *     underflow to 0), so a visible +-Inf in V makes that output +-Inf, both signs NaN,
 *     and a visible NaN in V makes it NaN.
 * The sign of a zero output is not specified (compare with ==).
 *
 * Order of the binary64 reference (lowp_attn_ref_f64, and the paged decode of
 * lowp/attn_paged.h, which reproduces it bit for bit): dot products in 8 lanes (lane l
 * sums d = l (mod 8) in increasing d, lanes combined as ((l0+l4)+(l1+l5))+((l2+l6)+(l3+l7))),
 * times sm_scale; the visible keys in chunks of LOWP_ATTN_CHUNK positions; per chunk the
 * max m_c, weights exp(s_j - m_c) (glibc exp, floored at 2^-1074 for finite arguments),
 * their sum and sum_j w_j v_j in increasing j; chunks merged in order with
 * alpha_c = exp(m_c - max_c m_c) (floored likewise; 0 for an all -Inf chunk); out = N / L. */
#define LOWP_ATTN_CHUNK 2048

/* What the oracle did: outputs it rounded, how many needed more than prec bits (Ziv
 * retries), how many were rational (equal group means, rounded from an exact quotient),
 * and the largest precision used. Added to (not cleared). */
typedef struct lowp_attn_oracle_stats {
    unsigned long long outputs, retries, rational;
    unsigned long max_prec;
} lowp_attn_oracle_stats;

/* lowp_attn_oracle_mpfr with stats (may be NULL). */
int lowp_attn_oracle_mpfr_ex(const lowp_attn_shape *s, const double *q, const double *k,
                             const double *v, unsigned prec, float *out32, double *out64,
                             lowp_attn_oracle_stats *stats, char *why, size_t why_len);

/* lowp_attn_ref_bound for every output at once: bound [q_len][num_q_heads][vo_dim], in
 * one pass over the inputs (OpenMP over rows). +Inf where the exact output is not finite
 * or the binary64 computation could overflow (no bound). Returns 0, or -1 with a reason. */
int lowp_attn_ref_bounds(const lowp_attn_shape *s, const double *q, const double *k,
                         const double *v, double *bound, char *why, size_t why_len);

/* The bound as a function of the magnitudes it depends on (attn_ref.c derives it), for
 * one output of a row with n visible keys:
 *   qk_abs  >= max_j sum_d |q_d k_jd| over the visible keys (an upper bound will do),
 *   v_abs   >= max_j |v_jd| over the visible keys,
 *   chunks  = number of chunks merged (ceil(n / LOWP_ATTN_CHUNK) for the references).
 * Returns +Inf when the computation could overflow or an argument is not finite. */
typedef struct lowp_attn_bound_terms {
    size_t n, qk_dim, chunks;
    double sm_scale; /* its absolute value is used */
    double qk_abs, v_abs;
} lowp_attn_bound_terms;
double lowp_attn_bound_eval(const lowp_attn_bound_terms *t);

/* lowp_attn_ref_f64 with an a-posteriori bound: out (may be NULL) receives lowp_attn_ref_f64's
 * output bit for bit, bound (may be NULL, not both) a bound on |out - exact| per output,
 * [q_len][num_q_heads][vo_dim]. The reference's operations are re-run and each rounding is
 * charged what it can have cost on the values met (running error bounds of the sums, the
 * score error of each key weighted by its probability and |v|, the exact error terms of
 * exp); attn_ref.c derives it. On O(1) data it is some 10^3 times tighter than
 * lowp_attn_ref_bounds at 32K tokens (about 1e-14 against 1e-11), so that it decides the
 * binary32 rounding of nearly every output. +Inf where the exact output is not finite or
 * the analysis does not apply (overflow, scores beyond about 1e8). About twice the
 * reference's time. Returns 0, or -1 with a reason. */
int lowp_attn_ref_f64_bounded(const lowp_attn_shape *s, const double *q, const double *k,
                              const double *v, double *out, double *bound, char *why,
                              size_t why_len);

/* lowp_attn_oracle_mpfr (out32, out64 may be NULL) and dist[x] >= |x[x] - exact output|,
 * rounded up from the oracle's final enclosure of the exact value (at 128 bits or more:
 * within about 2^-120 |exact| of the true distance), for holding an approximation to a
 * bound far below an ulp of binary64. dist is NaN where the exact output or x is not
 * finite, or where the oracle decided the rounding without an enclosure (scores some 1e18
 * apart). Returns 0, or -1 with a reason. */
int lowp_attn_oracle_dist(const lowp_attn_shape *s, const double *q, const double *k,
                          const double *v, const double *x, double *dist, float *out32,
                          double *out64, char *why, size_t why_len);

/* 1 if every real number within bound of x rounds (RN) to the same binary32, which is then
 * *out (the interval is widened by two binary64 ulps each way, so that forming x - bound
 * and x + bound cannot shrink it); 0 otherwise (also for a non-finite x or bound). */
int lowp_attn_f32_decided(double x, double bound, float *out);

/* What lowp_attn_rounded did: outputs, decided by the binary64 reference and its bound,
 * computed by the MPFR oracle, and the rows the oracle visited. Added to (not cleared). */
typedef struct lowp_attn_rounded_stats {
    unsigned long long outputs, by_f64, by_oracle, oracle_rows;
} lowp_attn_rounded_stats;

/* The exact attention correctly rounded to binary32 (out32 [q_len][num_q_heads][vo_dim]),
 * the same bits as lowp_attn_oracle_mpfr's out32, fast: lowp_attn_ref_f64_bounded decides
 * every output whose bound interval rounds one way (lowp_attn_f32_decided), and the oracle
 * computes only the other outputs (in ref/oracle: it needs MPFR). OpenMP over the rows of
 * each stage. stats may be NULL. Returns 0, or -1 with a reason. */
int lowp_attn_rounded(const lowp_attn_shape *s, const double *q, const double *k,
                      const double *v, float *out32, lowp_attn_rounded_stats *stats, char *why,
                      size_t why_len);

#ifdef __cplusplus
}
#endif
#endif /* LOWP_ATTN_H */
