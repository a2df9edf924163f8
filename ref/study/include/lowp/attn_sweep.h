/* lowp/attn_sweep.h: what a KV-cache format costs in attention, across formats and
 * workloads, and what the binary64 arithmetic costs beside it.
 *
 * Two costs are kept apart:
 *   - the format's cost: attention over the dequantized cache against attention over the
 *     unquantized (binary32) cache, both computed by the same exact-math reference
 *     (lowp_attn_ref_f64, binary64 with a derived bound; its own error is measured
 *     separately and is many orders of magnitude smaller than any format's);
 *   - the arithmetic's cost: lowp_attn_ref_f64 against the MPFR oracle
 *     (lowp_attn_oracle_mpfr at 128 bits, rounded to binary64) on the same inputs, run on
 *     the small contexts only (the oracle is for small cases), next to the bound
 *     lowp_attn_ref_bounds, evaluated at every output of every case and context.
 * The reference is lowp_attn_ref_f64 at every context: lowp_attn_paged_decode
 * (lowp/attn_paged.h) computes the same bits on a paged cache, but returns no softmax
 * distribution, which the total-variation metric needs.
 *
 * Quantization (the "exact" data path): K and V are each quantized as a whole tensor
 * [ctx][num_kv_heads][dim] with blocks along the head dim (a block never straddles two
 * heads or tokens; a dim that is not a multiple of the block size is zero-padded per row,
 * which changes no scale), the global scale taken from the whole K or V tensor, and
 * dequantized exactly (lowp_block_dequantize_f64): no intermediate rounding.
 *
 * Error statistics of an output o against a reference r over a set of rows (query token i,
 * query head h) (one head, or all), binary64 sums:
 *   rel_l2   ||o - r||_2 / ||r||_2 over the rows' vo_dim elements (0 if both are 0)
 *   max_abs  max |o - r|
 *   cosine   <o, r> / (||o|| ||r||) over the same elements (1 if both are 0)
 *   tv_mean, tv_max  mean and max over the rows of the total-variation distance of the
 *            softmax distributions, 0.5 sum_j |p_ij - p~_ij| (masked positions are 0 in both)
 *   nonfinite  elements where exactly one of o, r is NaN or infinite, or both are but
 *            differ; these are left out of the sums above (rel_l2, max_abs and cosine are
 *            NaN when every element is nonfinite); a NaN distribution row counts TV 1
 */
#ifndef LOWP_ATTN_SWEEP_H
#define LOWP_ATTN_SWEEP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "lowp/attn.h"
#include "lowp/block.h"
#include "lowp/workload.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lowp_attn_err {
    size_t rows, elements, nonfinite;
    double rel_l2, max_abs, cosine;
    double tv_mean, tv_max; /* NaN when no distributions were given */
} lowp_attn_err;

/* Statistics of out against ref ([q_len][num_q_heads][vo_dim]) and, when both are not
 * NULL, of the distributions p against p_ref ([q_len][num_q_heads][ctx]), over query head
 * `head`, or all heads when head < 0. */
void lowp_attn_err_compute(const lowp_attn_shape *s, const double *ref, const double *out,
                           const double *p_ref, const double *p, long head, lowp_attn_err *e);
/* The same with each row's total-variation distance given (tv_rows [q_len][num_q_heads],
 * lowp_attn_tv of the row's distributions; NULL: none), so that a caller can compute the
 * distributions a block of rows at a time and drop them: identical results. */
void lowp_attn_err_compute_tv(const lowp_attn_shape *s, const double *ref, const double *out,
                              const double *tv_rows, long head, lowp_attn_err *e);
/* The total-variation distance 0.5 sum_j |p_j - p_ref_j| of one row of n probabilities,
 * summed in increasing j; 1 (the largest) when it is NaN. Zeros past the visible keys add
 * exactly 0, so n may be any length that covers them. */
double lowp_attn_tv(const double *p_ref, const double *p, size_t n);

/* How the global scale of a format that has one is chosen. */
typedef enum lowp_sweep_scale_mode {
    LOWP_SWEEP_SCALE_ONE = 0,       /* decode-side 1.0: what SGLang ships uncalibrated */
    LOWP_SWEEP_SCALE_CALIBRATED = 1 /* from the tensor amax: the recipe's own
                                       (lowp_recipe_global_scale), and amax/2688 for the
                                       sglang-kv recipe (whose own is 1.0), as a calibrated
                                       checkpoint provides it (lowp/calib.h "amax") */
} lowp_sweep_scale_mode;

/* The global scale of (f, r) for a tensor with amax (NaN ignored) under mode; {1, 1} for
 * formats without one. */
lowp_global_scale lowp_sweep_global_scale(lowp_block_format f, lowp_recipe r, lowp_sweep_scale_mode mode,
                                          float amax);

/* Quantize x [rows][dim] in blocks along dim under (f, r, gs) and dequantize exactly into
 * out [rows][dim] (binary64). counts (may be NULL) is added to. Returns 0, or -1 with a
 * reason (a recipe the format lacks, out of memory). */
int lowp_sweep_quantize_exact(lowp_block_format f, lowp_recipe r, lowp_global_scale gs, const float *x,
                              size_t rows, size_t dim, double *out, lowp_quant_counts *counts, char *why,
                              size_t why_len);

/* One column of the study: a format, a recipe, a global-scale choice. Config 0 is the
 * unquantized binary32 cache itself (format ignored): its format cost is 0 by definition
 * and it carries the arithmetic's cost on unquantized inputs. */
typedef struct lowp_sweep_config {
    const char *label; /* "bf16", "fp8_e4m3 g=amax/448", "nvfp4 g=1.0", ... */
    int quantized;
    lowp_block_format format;
    lowp_recipe recipe;
    lowp_sweep_scale_mode scale;
} lowp_sweep_config;

#define LOWP_SWEEP_MAX_CONFIGS 16
/* The default configurations: f32, bf16, fp8_e4m3 (calibrated and 1.0), nvfp4 sglang-kv
 * (1.0 and calibrated), mxfp4 ocp, mxfp8 ocp. Returns the count, fills cfg. */
size_t lowp_sweep_default_configs(lowp_sweep_config *cfg);

/* One context size of the sweep and the shape it runs at. */
typedef struct lowp_sweep_size {
    size_t ctx, q_len, num_q_heads, num_kv_heads;
} lowp_sweep_size;

#define LOWP_SWEEP_MAX_SIZES 16
typedef struct lowp_sweep_options {
    uint64_t seed;
    size_t qk_dim, vo_dim;
    size_t n_sizes;
    lowp_sweep_size sizes[LOWP_SWEEP_MAX_SIZES];
    unsigned workloads;           /* bit k: lowp_workload_kind k */
    size_t n_configs;
    lowp_sweep_config configs[LOWP_SWEEP_MAX_CONFIGS];
    size_t oracle_max_ctx;        /* the MPFR oracle runs on contexts up to this (0: never) */
    size_t oracle_kv_heads;       /* on the first this many KV heads' query groups */
    /* progress (may be NULL): called before each case with done/total cases */
    void (*progress)(void *arg, size_t done, size_t total, const char *what);
    void *progress_arg;
} lowp_sweep_options;

/* The default sweep: dims 128, contexts 1K, 8K, 32K (32 query heads, 8 KV heads; q_len 4
 * at 1K and 8K, 1 at 32K) and 128K (8 query heads, 2 KV heads, q_len 1), every workload,
 * the default configs, the oracle at contexts <= 1K on one KV group. */
void lowp_sweep_default_options(lowp_sweep_options *o);

/* One result row: a (workload, size, config) case over one query head, or all (head -1). */
typedef struct lowp_sweep_row {
    lowp_workload_kind workload;
    lowp_attn_shape shape;
    size_t config;        /* index into the options' configs */
    long head;            /* -1: all query heads */
    float k_scale, v_scale; /* decode-side global scales used (1 where the format has none) */
    lowp_quant_counts k_counts, v_counts; /* what quantizing did (zeros for f32) */
    lowp_attn_err err;    /* the format's cost */
    double needle_p_ref, needle_p; /* needle: mean softmax mass at the needle; else NaN */
    /* the arithmetic's cost (NaN where not evaluated) */
    size_t arith_outputs;  /* outputs compared with the oracle */
    double arith_max_abs;  /* max |lowp_attn_ref_f64 - oracle| over them */
    double arith_rel;      /* max |ref - oracle| / |oracle| over them (nonzero oracle) */
    size_t bound_outputs;  /* outputs at which the bound was evaluated (all of them) */
    double bound_max;      /* max lowp_attn_ref_bounds over them */
    int bound_held;        /* 1 if |ref - oracle| <= bound at every compared output */
    double seconds;        /* wall time of the case (all heads row) */
} lowp_sweep_row;

typedef struct lowp_sweep_result {
    lowp_sweep_options opt;
    lowp_sweep_row *rows;
    size_t n, cap;
    double seconds; /* the whole sweep */
} lowp_sweep_result;

/* Run the sweep. Returns 0, or -1 with a reason (bad options, out of memory); *r is then
 * empty. */
int lowp_sweep_run(const lowp_sweep_options *o, lowp_sweep_result *r, char *why, size_t why_len);
void lowp_sweep_result_free(lowp_sweep_result *r);

/* Output. CSV: a header line and one line per row (per-head rows included). The text
 * table: the all-heads rows. Markdown: the summary tables and the method, with the
 * command line and machine line given (either may be NULL). Return 0 or -1 on a write
 * error. */
int lowp_sweep_write_csv(FILE *f, const lowp_sweep_result *r);
int lowp_sweep_print_table(FILE *f, const lowp_sweep_result *r);
int lowp_sweep_write_markdown(FILE *f, const lowp_sweep_result *r, const char *command, const char *machine,
                              const char *commit);

#ifdef __cplusplus
}
#endif
#endif /* LOWP_ATTN_SWEEP_H */
