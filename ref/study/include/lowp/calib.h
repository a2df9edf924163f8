/* lowp/calib.h: calibration of the NVFP4 and FP8 global scale.
 *
 * The tensor is [tokens T, heads H, head_dim D], row-major; quantization blocks run along
 * D. A global scale g is decode-side (x ~= element * block scale * g, lowp/block.h).
 *
 * Methods (for a slice: the whole tensor, or one head's [T, D]):
 *   fixed-1.0  g = 1.0: what SGLang ships for its NVFP4 KV cache (and the FP8 fallback
 *              when a checkpoint has no scale).
 *   amax       the recipe's own global scale from the slice amax (NaN ignored):
 *              lowp_recipe_global_scale(f, r, amax); for sglang-kv, whose own is 1.0,
 *              g = RN(amax / 2688), the value a calibrated checkpoint provides.
 *   p99.9, p99.99  the same with amax replaced by the nearest-rank percentile of |x|
 *              (NaN left out): the ceil(q m)-th smallest |x| of the m non-NaN elements.
 *              Elements above it clip (NVFP4: block scale saturates at 448; FP8: at 448 g).
 *   mse        ModelOpt-style search (modelopt/torch/quantization/calib/mse.py
 *              MseCalibrator: amax multipliers linspace(0.25, 4.0, 39)): candidates
 *              g = RN(amax m / M) (M = 2688 for NVFP4, 448 for FP8 E4M3, 57344 for E5M2)
 *              for each multiplier m of the grid, plus the amax method's own g; the one
 *              with the least sum of squared error after quantize-dequantize wins (ties:
 *              the earlier candidate, amax's own first). The grid is scored on a
 *              deterministic subsample of at most search_max elements (every s-th token
 *              row); the grid winner and the amax candidate are then re-scored on the
 *              whole slice and the better kept, so mse is never worse than amax on the
 *              slice. Per head, the per-tensor mse choice is a further candidate (scored
 *              on the whole head slice), so per-head mse is never worse than per-tensor
 *              mse when D is a multiple of the block size (blocks never straddle heads).
 * Scopes: tensor (one g) or head (one g per head slice x[:, h, :]).
 * Scale rounding: nearest (flags 0) or up (LOWP_BLOCK_SCALE_UP; NVFP4 exact and modelopt).
 *
 * Formats without a global scale (MXFP4, MXFP8, BF16) take method "none": one row with
 * their recipe, for comparison. */
#ifndef LOWP_CALIB_H
#define LOWP_CALIB_H

#include <stddef.h>
#include <stdint.h>

#include "lowp/block.h"
#include "lowp/stats.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum lowp_calib_method {
    LOWP_CALIB_NONE = 0,  /* no global scale */
    LOWP_CALIB_FIXED = 1, /* g = 1.0 */
    LOWP_CALIB_AMAX = 2,
    LOWP_CALIB_P999 = 3,
    LOWP_CALIB_P9999 = 4,
    LOWP_CALIB_MSE = 5
} lowp_calib_method;
#define LOWP_CALIB_METHOD_COUNT 6

typedef enum lowp_calib_scope { LOWP_CALIB_TENSOR = 0, LOWP_CALIB_HEAD = 1 } lowp_calib_scope;

/* Names: "none" "fixed-1.0" "amax" "p99.9" "p99.99" "mse"; "tensor" "head". */
const char *lowp_calib_method_name(lowp_calib_method m);
const char *lowp_calib_scope_name(lowp_calib_scope s);

/* One calibration to run. */
typedef struct lowp_calib_spec {
    lowp_block_format format;
    lowp_recipe recipe;
    lowp_calib_method method;
    lowp_calib_scope scope;
    unsigned flags; /* 0 or LOWP_BLOCK_SCALE_UP */
} lowp_calib_spec;

typedef struct lowp_calib_options {
    size_t tokens, heads, dim; /* the tensor's shape; T H D elements */
    size_t search_max;         /* elements the mse grid is scored on (per tensor; per head
                                  search_max / H); 0 means all. Default
                                  LOWP_CALIB_SEARCH_MAX. */
} lowp_calib_options;

#define LOWP_CALIB_SEARCH_MAX ((size_t)1 << 18)
#define LOWP_CALIB_MSE_GRID 39 /* linspace(0.25, 4.0, 39), ModelOpt's MseCalibrator defaults */

/* A result: the spec, its global scale(s) (decode side; one for tensor scope, H for head
 * scope, none for method "none"), the mse multiplier(s) chosen relative to the amax g
 * (1 when the amax candidate won; for per-head also relative to that head's amax) and
 * the statistics of the whole tensor quantized with them. */
typedef struct lowp_calib_row {
    lowp_calib_spec spec;
    size_t n_gscales;
    float *gscales;
    double *multipliers; /* mse only, n_gscales entries; else NULL */
    lowp_stats st;
} lowp_calib_row;

typedef struct lowp_calib_table {
    lowp_calib_row *rows;
    size_t n;
} lowp_calib_table;

/* The default set for a format (or every format when all != 0):
 *   NVFP4     sglang-kv fixed-1.0 (tensor) and sglang-kv amax (tensor: a checkpoint scale);
 *             exact x {tensor, head} x {nearest, up} x {amax, p99.9, p99.99, mse};
 *   FP8 E4M3  exact fixed-1.0 (tensor); exact x {tensor, head} x {amax, p99.9, p99.99, mse};
 *   FP8 E5M2  exact amax (tensor);
 *   MXFP4, MXFP8  ocp and rceil, method none;   BF16  exact, method none.
 * Writes up to LOWP_CALIB_MAX_SPECS specs and returns how many. */
#define LOWP_CALIB_MAX_SPECS 64
size_t lowp_calib_default_specs(lowp_block_format f, int all, lowp_calib_spec *specs);

/* Run the specs on x (T H D floats, the shape in *o, which must not be NULL). Fills *out
 * (free with lowp_calib_table_free). Returns 0, or -1 with a reason: a recipe that does
 * not exist for the format, a method the format has no use for (a global-scale method
 * for MX/BF16, "none" for NVFP4/FP8), an empty tensor, or out of memory. Counts that are
 * not a multiple of the block size are zero-padded (lowp_stats_quantized). */
int lowp_calib_run(const float *x, const lowp_calib_options *o, const lowp_calib_spec *specs, size_t nspecs,
                   lowp_calib_table *out, char *why, size_t why_len);
void lowp_calib_table_free(lowp_calib_table *t);
/* lowp_calib_run with progress: fn (may be NULL) is called before each spec with done =
 * its index, total = nspecs and a label ("nvfp4 exact mse head up"), and once at the end
 * with done = total and "done". */
typedef void (*lowp_calib_progress_fn)(void *arg, size_t done, size_t total, const char *what);
int lowp_calib_run_progress(const float *x, const lowp_calib_options *o, const lowp_calib_spec *specs,
                            size_t nspecs, lowp_calib_progress_fn fn, void *arg, lowp_calib_table *out,
                            char *why, size_t why_len);

/* Views of the rows for the lowp_stats_print_table / _write_csv / _write_json helpers
 * (rows must hold t->n entries; they point into t). */
void lowp_calib_rows(const lowp_calib_table *t, lowp_stats_row *rows);

/* The nearest-rank q-quantile of |x_i| (num/den = q, e.g. 999/1000), NaN left out; 0 for
 * no non-NaN element. Exact (a radix selection on the bit patterns), O(n). */
float lowp_calib_abs_quantile(const float *x, size_t n, unsigned num, unsigned den);

/* max |x_i|, NaN left out (Inf counts). */
float lowp_calib_amax(const float *x, size_t n);

#ifdef __cplusplus
}
#endif
#endif /* LOWP_CALIB_H */
