/* lowp/mma.h: bit-exact model of one output element of the tensor-core instruction
 * mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 (Hopper's legacy warp MMA, used by
 * the decode kernel for Q.K^T and P.V), parameterised so that competing hypotheses about
 * the hardware can be evaluated side by side (gpu/probe/mma_probe.cu measures which one holds).
 *
 * The arithmetic (MMA-Sim's "truncated fused dot-add", microsoft/MMA-Sim
 * mmasim/simulator/arithmetic.py fused_sum / nv_fused_dot_add, and its later revision
 * mmasim/arithmetic/fdpa.py t_fdpa; the MMA-Sim paper is arXiv 2511.10909):
 *
 *   d = sum_{i<k} a_i * b_i + c, evaluated in steps of `group` products:
 *   1. Decompose every operand x as x = s * 2^e: e = max(unbiased exponent, -126), so a
 *      normal has 1 <= |s| < 2 and a bf16 / binary32 subnormal has |s| < 1 and e = -126.
 *      A product is exact: s = sa * sb (in [1, 4) for normals: NOT renormalised unless
 *      prod_norm), e = ea + eb. C (binary32) keeps its own s and e.
 *   2. Exact zero terms (a zero product, a zero C) get an exponent by zero_mode (below).
 *   3. E = the largest exponent of the terms of the step (C included iff c_in_window).
 *      Every term is truncated TOWARD ZERO to a multiple of 2^(E - n_frac):
 *      t = trunc(s * 2^(n_frac + e - E)) * 2^(E - n_frac).
 *   4. The truncated terms are summed exactly (no normalisation, no carry loss).
 *   5. c_in_window = 0 (alternative): the products' truncated sum is added to C exactly.
 *   6. The sum is rounded once to binary32 toward zero (RZ), subnormals kept (no FTZ).
 *   The result of a step is C of the next step (k > group chains steps in k order).
 *
 * Rules for what the sources leave open (parameter-free; gpu/probe/mma_probe.cu checks each):
 *   - NaN: any NaN operand, Inf * 0, or Inf + (-Inf) among products and C gives the
 *     canonical NaN 0x7FFFFFFF (MMA-Sim; NVIDIA's canonical NaN).
 *   - Inf: otherwise an Inf product or an Inf C gives that Inf.
 *   - Overflow: a finite sum whose magnitude is >= 2^128 gives +-Inf, NOT FLT_MAX,
 *     although the rounding is RZ (MMA-Sim: its RZ-truncated double is converted to
 *     binary32 by an ordinary cast, which overflows to Inf). The probe checks both.
 *   - Sign of zero: every zero result is +0: an exact cancellation, a sum of -0 terms
 *     only (all products -0 and C = -0), and a negative sum that RZ rounds to zero alike.
 *     Measured on the H200 (probes zero-all-neg, neg-underflow; IEEE 754 would give -0 in
 *     the last two); it is what MMA-Sim's arithmetic.py gives (Python's math.trunc
 *     returns the integer 0), while its later fdpa.py (torch.trunc) keeps -0.
 *
 * zero_mode (how an exact zero term enters the max exponent E):
 *   LOWP_MMA_ZERO_SUBNORMAL (0): arithmetic.py: a zero operand decomposes as s = 0,
 *     e = -126, so a zero product has exponent ea + eb (0 * 2^100 counts as 2^-26!) and
 *     a zero C has -126;
 *   LOWP_MMA_ZERO_FIXED (1): fdpa.py: every zero term (product or C) has exponent e_zero
 *     (MMA-Sim uses -133 for Hopper f16 mma with n_frac 25);
 *   LOWP_MMA_ZERO_SKIP (2): zero terms do not take part in the max.
 *
 * Exact integer arithmetic throughout (no floating point): see ref/hw/src/mma.c.
 * Thread safety: all functions are pure. */
#ifndef LOWP_MMA_H
#define LOWP_MMA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LOWP_MMA_ZERO_SUBNORMAL 0
#define LOWP_MMA_ZERO_FIXED 1
#define LOWP_MMA_ZERO_SKIP 2

/* Largest n_frac the model accepts (the integer sum must fit 64 bits). */
#define LOWP_MMA_MAX_NFRAC 48

typedef struct lowp_mma_params {
    int group;       /* products fused in one step: 16 = the whole k16 step fused with C;
                      * 8 = two chained fused steps (k 0..7 with C, then k 8..15 with that
                      * result), as MMA-Sim's split-K for Ampere. <= 0: all k in one step */
    int n_frac;      /* fraction bits kept after aligning every term to the largest term's
                      * exponent (MMA-Sim: 25 for Hopper mma); 0..LOWP_MMA_MAX_NFRAC */
    int c_in_window; /* 1: C is one of the aligned terms (MMA-Sim); 0: products fused first
                      * (aligned among themselves, truncated), result then added to C
                      * exactly and rounded once (alternative hypothesis) */
    int zero_mode;   /* LOWP_MMA_ZERO_*: the exponent of an exact zero term (above).
                      * 0 (a zero-initialised field) is arithmetic.py's rule */
    int e_zero;      /* that exponent under LOWP_MMA_ZERO_FIXED; -1000..1000 */
    int prod_norm;   /* 0 (MMA-Sim): a product's exponent is ea + eb, its significand in
                      * [1, 4); 1 (alternative): a product with significand >= 2 counts
                      * with exponent ea + eb + 1 (the multiplier's carry normalised) */
} lowp_mma_params;

/* The parameters the probe established for sm_90 (H200) mma.m16n8k16 bf16 -> f32:
 * {16, 25, 1, LOWP_MMA_ZERO_FIXED, -133, 0}, i.e. MMA-Sim's Hopper values (nv.py:
 * arch_accum_fractional_bits["Hopper"] = 25, no split-K on Hopper; fdpa.py L_max
 * 32 bytes / 2 = 16 products, e_zero -133), products not renormalised. Measured by
 * gpu/probe/mma_probe.cu on an H200: 0 mismatches in 48 probes and 2 x 10^7 random outputs,
 * the only one of 200 candidate sets; ref/hw/src/mma.c holds the record. */
extern const lowp_mma_params lowp_mma_sm90_bf16;

/* d = the fused dot-add of one m16n8k16 output element, sum_{i<k} a[i]*b[i] + c, a and
 * b bf16 bit patterns, evaluated as described above in ceil(k / group) chained steps
 * (the last one shorter when group does not divide k). k = 0 returns c unchanged.
 * Parameters out of range (n_frac < 0 or > LOWP_MMA_MAX_NFRAC, an unknown zero_mode,
 * e_zero outside -1000..1000) and steps of more than 64 products give the canonical NaN. */
float lowp_mma_dot_add_bf16(const uint16_t *a, const uint16_t *b, size_t k, float c,
                            const lowp_mma_params *p);

/* Same for np parameter sets at once: out[j] = lowp_mma_dot_add_bf16(a, b, k, c, &ps[j]),
 * bit for bit, with the products decoded once (the probe evaluates ~200 candidates per
 * output). k must be <= 64 here; a larger k gives canonical NaNs. */
void lowp_mma_dot_add_bf16_multi(const uint16_t *a, const uint16_t *b, size_t k, float c,
                                 const lowp_mma_params *ps, size_t np, float *out);

/* One-line description of p, e.g. "g16 f25 cin1 z-133 pn0" (zero: z-133 fixed, zsub
 * arithmetic.py, zskip). Returns buf. */
char *lowp_mma_params_str(const lowp_mma_params *p, char *buf, size_t len);

/* Hand-made probe vectors (k = 16) with hand-computed results: `expect` under
 * lowp_mma_sm90_bf16's hypothesis and, where given, `alt` under a named alternative
 * (alt_params when the alternative is a parameter set of this model, NULL when it is a
 * rule outside it, e.g. overflow to FLT_MAX). tests/test_mma.c checks every prediction
 * against an MPFR oracle and the model; gpu/probe/mma_probe.cu runs them on the hardware. */
typedef struct lowp_mma_probe {
    const char *name;      /* short id */
    const char *reveals;   /* what the outcome tells */
    uint16_t a[16], b[16];
    uint32_t c;            /* binary32 bits */
    uint32_t expect;       /* under lowp_mma_sm90_bf16 and the rules above */
    int has_alt;
    uint32_t alt;          /* under the alternative */
    const char *alt_what;  /* the alternative, in words */
    int alt_is_params;     /* 1: alt follows from alt_params with this model */
    lowp_mma_params alt_params;
} lowp_mma_probe;

/* The probe table (static, constant; thread-safe). *n gets the count. */
const lowp_mma_probe *lowp_mma_probes(size_t *n);

/* The candidate parameter sets the GPU probe holds the hardware to and tests/test_mma.c
 * holds the model to: group {8, 16} x n_frac 23..27 x C in window {0, 1} x zero rule
 * {arithmetic.py, e_zero -132, -133, -134, skip} x prod_norm {0, 1}, in that nesting
 * order (prod_norm fastest): LOWP_MMA_N_CANDIDATES sets written to out, the count
 * returned. lowp_mma_sm90_bf16 is one of them. */
#define LOWP_MMA_N_CANDIDATES 200
size_t lowp_mma_candidates(lowp_mma_params *out);

#ifdef __cplusplus
}
#endif
#endif /* LOWP_MMA_H */
