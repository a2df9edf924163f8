/* lowp/stats.h: error statistics of a reconstruction against a reference.
 *
 * Definitions (ref = reference, rec = reconstruction, e_i = rec_i - ref_i, all binary64):
 *   compared pairs  i with ref_i and rec_i both finite. Pairs with a NaN on either side
 *                   are counted (nan_ref, nan_rec) and left out of every metric below;
 *                   so are pairs with an infinity (inf_equal when both are the same
 *                   infinity, inf_other otherwise). The metrics describe the rest.
 *   max_abs         max |e_i|
 *   rmse            sqrt(sum e_i^2 / compared)
 *   rel_l2          ||e||_2 / ||ref||_2 (0 if both are 0; +Inf if only ||ref|| is 0)
 *   sqnr_db         10 log10(sum ref_i^2 / sum e_i^2) (+Inf if e = 0; -Inf if ref = 0 != e)
 *   cosine          <ref, rec> / (||ref|| ||rec||); 1 if both are 0, 0 if exactly one is
 *   ulp (BF16)      |e_i| / ulp_bf16(ref_i), ulp_bf16(r) = 2^(max(floor(log2|r|), -126) - 7):
 *                   the bf16 spacing of the reference's binade (for r = 0 and bf16
 *                   subnormals, the subnormal spacing 2^-133). A bf16 neighbour of r in
 *                   its binade is 1 ulp away; the neighbour below a power of two is 1/2.
 *                   ulp_max and ulp_mean over the compared pairs.
 *   per-block       rel_b = ||e_b||_2 / ||ref_b||_2 over consecutive blocks of `block`
 *                   elements (the last one may be shorter), NaN/Inf pairs left out;
 *                   0 if both norms are 0, +Inf if only ||ref_b|| is 0; blocks with no
 *                   compared pair are skipped. Quantiles are nearest-rank: q-quantile =
 *                   the ceil(q m)-th smallest of the m values (p50, p90, p99, max).
 *
 * Accuracy: each sum is formed in binary64 in three levels: groups of LOWP_STATS_GROUP
 * consecutive elements summed in order, group sums added Neumaier-compensated within fixed
 * chunks of LOWP_STATS_CHUNK elements, chunk sums added compensated in chunk order. The
 * error is at most about (G-1) u sum|terms| + 2u |sum| (u = 2^-53, G = 16), i.e. a relative
 * 2e-15 for the sums of squares, far below any reported digit. Per-block sums are plain
 * (a block is 16 or 32 terms).
 * Determinism: chunk boundaries and the combine order do not depend on the thread count,
 * maxima and counts are order-free, and quantiles come from a sort, so the result is the
 * same bytes (the struct is zeroed first, padding included) for any OpenMP thread count. */
#ifndef LOWP_STATS_H
#define LOWP_STATS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "lowp/block.h"
#include "lowp/format.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LOWP_STATS_CHUNK 4096 /* elements per partial sum */
#define LOWP_STATS_GROUP 16   /* elements summed plainly before compensation */

typedef enum lowp_stats_type { LOWP_STATS_F32 = 0, LOWP_STATS_F64 = 1 } lowp_stats_type;

typedef struct lowp_stats {
    /* elements */
    size_t n;                 /* pairs given */
    size_t compared;          /* both finite */
    size_t nan_ref, nan_rec;  /* NaN in ref (either side) / NaN in rec only */
    size_t inf_equal, inf_other;
    double max_abs, rmse, rel_l2, sqnr_db, cosine;
    double ulp_max, ulp_mean;
    double sum_err2, sum_ref2, sum_rec2, sum_dot; /* the compensated sums behind the above */
    /* per-block relative error */
    size_t block, blocks, blocks_compared, blocks_ref_zero;
    double blk_p50, blk_p90, blk_p99, blk_max;
    /* what the quantizer counted (lowp_stats_set_counts) */
    int has_counts;
    lowp_quant_counts counts;
    /* block scale codes (lowp_stats_add_scales) */
    int has_scales;
    lowp_format scale_format; /* E4M3 or E8M0 */
    size_t scales, scale_zero, scale_subnormal, scale_normal, scale_nan;
    size_t scale_hist[256];   /* count of each scale code */
} lowp_stats;

/* The error statistics of rec against ref (n elements each, of the given types), per-block
 * quantiles over blocks of `block` elements (0 means 16). Zeroes *out first. Returns 0, or
 * -1 with a reason (out of memory). OpenMP-parallel, deterministic. */
int lowp_stats_compute(const void *ref, lowp_stats_type ref_type, const void *rec, lowp_stats_type rec_type,
                       size_t n, size_t block, lowp_stats *out, char *why, size_t why_len);

/* A quantized tensor as lowp_stats_compute_quant reads it: n elements in `parts` pieces
 * that interleave every `width` elements (element i is column i % width of row
 * i / (parts width) of piece (i / width) % parts: parts = H, width = D is a [T, H, D]
 * tensor quantized one head at a time; parts = 1, width = n a whole tensor). Piece p has
 * codes[p] and scales[p] (scales NULL, or an entry NULL, for a format without block
 * scales) over its own elements in order, and decode-side global scale gscales[p]. */
typedef struct lowp_stats_quant_view {
    lowp_block_format format;
    size_t parts, width;
    const uint8_t *const *codes;
    const uint8_t *const *scales;
    const float *gscales;
} lowp_stats_quant_view;

/* lowp_stats_compute(ref F32, rec F64) where rec is the exact reconstruction of q
 * (lowp_stats_dequantize_f64 of each piece), formed one chunk at a time instead of held
 * whole: the same sums in the same order, the same bytes. n must be a multiple of
 * parts * width. */
int lowp_stats_compute_quant(const float *ref, const lowp_stats_quant_view *q, size_t n, size_t block,
                             lowp_stats *out, char *why, size_t why_len);

/* Record quantizer counts (copied). */
void lowp_stats_set_counts(lowp_stats *s, const lowp_quant_counts *c);

/* Add n block-scale codes of format fmt (LOWP_E4M3 or LOWP_E8M0) to the histogram and
 * its classes: zero (value 0), subnormal (E4M3 exponent field 0, nonzero), normal (the
 * other finite nonzero codes; every E8M0 code but 0xFF), NaN. The sign bit of an E4M3
 * scale code is ignored for the class but kept in the per-code histogram. */
void lowp_stats_add_scales(lowp_stats *s, lowp_format fmt, const uint8_t *scales, size_t n);

/* Quantize x (n elements) under (f, r, gs, flags), dequantize exactly (binary64) and fill
 * *out with everything above: errors (per-block over the format's block, 16 for the
 * elementwise formats), counts and scales. n need not be a multiple of the block size:
 * the tail block is padded with zeros, which changes no scale of the recipes (zeros never
 * raise a block amax) and is left out of the statistics. rec_out, if not NULL, receives
 * the n reconstructed values. Returns 0, or -1 with a reason. */
int lowp_stats_quantized(lowp_block_format f, lowp_recipe r, lowp_global_scale gs, unsigned flags,
                         const float *x, size_t n, double *rec_out, lowp_stats *out, char *why,
                         size_t why_len);

/* Sum of squared errors of quantize-dequantize under (f, r, gs, flags), the same compensated,
 * chunked, deterministic sum as sum_err2 (NaN/Inf pairs left out; their count goes to
 * *nonfinite if not NULL). Fused per chunk so it is cheap enough for calibration searches.
 * n must be a multiple of the block size. Returns 0 or -1 with a reason. */
int lowp_stats_quant_sse(lowp_block_format f, lowp_recipe r, lowp_global_scale gs, unsigned flags,
                         const float *x, size_t n, double *sse, size_t *nonfinite, char *why,
                         size_t why_len);

/* The same values as lowp_block_dequantize_f64 (bit for bit on every non-NaN element;
 * NaN stays NaN), from decode tables instead of a decode call per element: element value x
 * scale value x g is exact in binary64, so a table lookup forms the identical product. */
void lowp_stats_dequantize_f64(lowp_block_format f, float global_scale, const uint8_t *codes,
                               const uint8_t *scales, size_t n, double *out);

/* One row of a result table: labels (NULL prints "-"), the global scale(s) used
 * (decode side; n_gscales 0 for none, more than one for per-head), and the statistics. */
typedef struct lowp_stats_row {
    const char *format, *recipe, *method, *scope, *rounding;
    size_t n_gscales;
    const float *gscales;
    lowp_stats st;
} lowp_stats_row;

/* Output. The text table has one line per row; the method/scope/rounding columns appear
 * only if some row sets them. CSV has a header line and every scalar field, the scale
 * histogram as "code:count" pairs joined by ';' (nonzero counts only), global scales
 * joined by ';'. JSON is an array of objects with every field and the full 256-entry
 * scale histogram; non-finite numbers are written as null. Return 0 or -1 on a write
 * error. */
int lowp_stats_print_table(FILE *f, const lowp_stats_row *rows, size_t n);
int lowp_stats_write_csv(FILE *f, const lowp_stats_row *rows, size_t n);
int lowp_stats_write_json(FILE *f, const lowp_stats_row *rows, size_t n);

#ifdef __cplusplus
}
#endif
#endif /* LOWP_STATS_H */
