/* lowp/oracle_block.h: the slow MPFR model of the block quantizer recipes.
 *
 * Written from ref/recipes.md, apart from ref/block/src/block.c and sharing no code with it.
 * Every binary32 multiply and divide of a recipe is an exact MPFR product or quotient
 * rounded once to binary32 (round to nearest even, subnormals kept, overflow to Inf); the
 * element and scale conversions are lowp_oracle_encode_f32 (lowp/oracle.h) under the
 * profile recipes.md names; scale values are lowp_oracle_decode; rcp~ is
 * lowp_rcp_approx_ftz, which recipes.md makes the definition of rcp.approx.ftz.f32. Use it
 * to check lowp_block_quantize, never as a fast path: one 16-element block costs some
 * microseconds.
 *
 * NaN: a NaN that an operation produces (an invalid operation, or a NaN operand) is the
 * positive quiet NaN 0x7FC00000, as a GPU produces its canonical NaN. Only two conversions
 * read a NaN's sign: e4m3_torch (modelopt) and the rounded-up e4m3 of LOWP_BLOCK_SCALE_UP.
 *
 * Thread safety: every function may run concurrently (MPFR with thread-local storage).
 * Each sets the calling thread's MPFR exponent range and restores it before returning.
 */
#ifndef LOWP_ORACLE_BLOCK_H
#define LOWP_ORACLE_BLOCK_H

#include <stddef.h>
#include <stdint.h>

#include "lowp/block.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LOWP_ORACLE_BLOCK_MAX 32 /* the largest block size (MXFP4, MXFP8) */

/* The oracle's own tables (the test compares them with block.c's accessors): block size
 * of a format (16, 32, 32, 1, 1, 1) and whether recipes.md defines recipe r for format f
 * (1) or not (0). */
size_t lowp_oracle_block_size(lowp_block_format f);
int lowp_oracle_recipe_defined(lowp_block_format f, lowp_recipe r);

/* What one block's quantization computed on the way, for tests and for flagging vectors.
 * Values are binary32 as the recipe holds them. */
typedef struct lowp_oracle_block_trace {
    float amax;     /* m: amax_ign or amax_nan of the block */
    float scale_in; /* the value the scale conversion rounds: sf (NVFP4 trtllm, exact,
                       sglang-kv), s after its guards (modelopt), m * RN(1/max) or
                       m * rcp~(max) (MX rceil, trtllm), m (MX ocp); NaN if none */
    float factor;   /* the element factor: o (multiplied) or the divisor (d, 2^e, val(q), g);
                       1 for BF16 */
    int divides;    /* 1: scaled = x / factor; 0: scaled = x * factor */
    float scaled[LOWP_ORACLE_BLOCK_MAX]; /* per element: the binary32 value converted */
} lowp_oracle_block_trace;

/* Quantize one block of lowp_oracle_block_size(f) elements x under recipe r (ref/recipes.md)
 * with global scale gs and LOWP_BLOCK_* flags. codes[i] gets element i's code (unpacked,
 * one per element), *scale the block scale code (0 for formats without block scales; may
 * be NULL). counts (may be NULL) is added to, as lowp_block_quantize does; trace (may be
 * NULL) is filled. Returns 0, or -1 if recipes.md has no such recipe for the format. */
int lowp_oracle_block_quantize(lowp_block_format f, lowp_recipe r, lowp_global_scale gs,
                               unsigned flags, const float *x, uint16_t *codes, uint8_t *scale,
                               lowp_quant_counts *counts, lowp_oracle_block_trace *trace);

/* The global scale a recipe derives from a tensor amax, and from a stored decode-side
 * value, in the recipe's own arithmetic (ref/recipes.md; see lowp_recipe_global_scale).
 * A field the recipe does not use is set as the note in oracle_block.c says. */
lowp_global_scale lowp_oracle_recipe_global_scale(lowp_block_format f, lowp_recipe r, float amax);
lowp_global_scale lowp_oracle_global_scale_from_dec(lowp_block_format f, lowp_recipe r, float dec);

/* The oracle's binary32 arithmetic, exposed for its own tests: RN(a * b), RN(a / b) with
 * subnormals and overflow to Inf; a NaN result is +qNaN 0x7FC00000. */
float lowp_oracle_f32_mul(float a, float b);
float lowp_oracle_f32_div(float a, float b);

/* Helpers for building blocks that sit on an edge (tests, golden vectors).
 *
 * lowp_oracle_solve_scaled: a binary32 x whose scaled value is exactly t, i.e.
 * RN(x / factor) == t when divides, RN(x * factor) == t otherwise (factor finite and
 * nonzero), searched among the 16 binary32 values nearest to t * factor (t / factor).
 * Returns 0 with *x, or -1 if none of them scales onto t.
 *
 * lowp_oracle_amax_for_scale_in: by bisection on m, the smallest binary32 m in [+0, +Inf]
 * for which the block {m, 0, ..., 0} has trace.scale_in >= target under (f, r, gs, flags)
 * (scale_in is monotone in m for a positive global scale, away from modelopt's s == 0
 * guard). Returns 1 with *m when scale_in(m) == target, 0 when only >=, -1 when no m
 * reaches the target or the recipe has no scale_in. */
int lowp_oracle_solve_scaled(float factor, int divides, float t, float *x);
int lowp_oracle_amax_for_scale_in(lowp_block_format f, lowp_recipe r, lowp_global_scale gs,
                                  unsigned flags, float target, float *m);

/* ---------------------------------------------------------------------------------------
 * Where NVFP4 trtllm and exact disagree, for one encode global scale S, computed rather
 * than sampled.
 *
 * Both recipes map a block amax m to a scale code (q_t, q_e) and a scale code q to an
 * element factor (o_t, o_e); an element x then gets e2m1(x * o). All of these are monotone
 * non-decreasing in m, resp. x >= 0, so each is a step function on the ordered binary32
 * bit patterns, and its steps are found exactly by bisection with the oracle's arithmetic.
 * The set where two step functions differ is then a finite union of intervals:
 *   (a) amax intervals: the m >= +0 (bits 0x00000000..0x7F800000, +Inf included) where
 *       q_t(m) != q_e(m);
 *   (b) the scale codes q in 0x00..0x7E where o_t(q) != o_e(q) (bitwise);
 *   (c) for each such q, the intervals of x >= +0 where e2m1(x * o_t) != e2m1(x * o_e).
 *       Whether the codes differ is the same for x and -x (the code of -v is the code of
 *       v with the sign bit, and a NaN product, 0 * Inf, is 0x7 for either sign), so each
 *       interval stands for its mirror image too, and the counts below cover both signs.
 *       q = 0 is always in (b): o_t = rcp~(0) = Inf, o_e = FLT_MAX; its elements' codes
 *       differ but decode to 0 under both.
 * Flags are 0 (round-to-nearest block scales). */
typedef struct lowp_oracle_f32_run {
    uint32_t lo, hi;  /* inclusive binary32 bit patterns of nonnegative values, lo <= hi */
    uint16_t a, b;    /* the constant codes on the run: trtllm's, exact's */
} lowp_oracle_f32_run;

typedef struct lowp_oracle_nvfp4_q_diff {
    uint8_t q;                  /* e4m3 scale code */
    float o_trtllm, o_exact;    /* element factors, o_trtllm != o_exact bitwise */
    size_t n_runs;
    lowp_oracle_f32_run *runs;  /* x >= +0 where the element codes differ */
    uint64_t x_count;           /* binary32 x of both signs in these runs: 2 * sum(hi-lo+1) */
} lowp_oracle_nvfp4_q_diff;

typedef struct lowp_oracle_nvfp4_diff {
    float S;
    size_t n_amax_runs;
    lowp_oracle_f32_run *amax_runs; /* (a): codes a = q_t, b = q_e */
    uint64_t amax_count;            /* binary32 m in (a) */
    size_t n_q;
    lowp_oracle_nvfp4_q_diff *q;    /* (b) and (c), q increasing */
    uint64_t x_count;               /* sum of q[i].x_count */
} lowp_oracle_nvfp4_diff;

/* Compute the sets for S (finite, > 0). Returns 0, -1 for an S outside that range, -2 on
 * allocation failure. Free with lowp_oracle_nvfp4_diff_free. */
int lowp_oracle_nvfp4_diff_compute(float S, lowp_oracle_nvfp4_diff *out);
void lowp_oracle_nvfp4_diff_free(lowp_oracle_nvfp4_diff *d);

/* The single steps the sets are made of (the same arithmetic as the block oracle): the
 * scale code of block amax m >= 0, and the element factor of scale code q in a block with
 * m != 0, under trtllm (exact = 0) or exact (exact = 1) with encode scale S. */
uint8_t lowp_oracle_nvfp4_scale_code(int exact, float S, float m);
float lowp_oracle_nvfp4_factor(int exact, float S, uint8_t q);

#ifdef __cplusplus
}
#endif
#endif /* LOWP_ORACLE_BLOCK_H */
