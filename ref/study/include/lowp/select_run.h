/* lowp/select_run.h: one selector (lowp/select.h) over a run of query rows, with its keys
 * in a chosen format, beside the same selector over the reference keys, and the drift of
 * every selection. `lowp select` and `lowp select-sweep` both run selections this way.
 *
 * The reference keys are BF16 (the unquantized cache production compares against): QSA's
 * BF16 index-key cache, DSA's unquantized BF16 q and k, and for MoBA / NSA the main keys
 * rounded to BF16. Quantized main keys (MoBA, NSA) are the values a kernel reads: blocks
 * quantized along the head dim and dequantized exactly, then rounded to binary32.
 */
#ifndef LOWP_SELECT_RUN_H
#define LOWP_SELECT_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "lowp/attn_sweep.h"
#include "lowp/select.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum lowp_selector_kind {
    LOWP_SEL_QSA = 0,
    LOWP_SEL_DSA = 1,
    LOWP_SEL_MOBA = 2,
    LOWP_SEL_NSA = 3
} lowp_selector_kind;
#define LOWP_SELECTOR_COUNT 4

/* "qsa" "dsa" "moba" "nsa"; the parser returns 0 or -1. */
const char *lowp_selector_name(lowp_selector_kind k);
int lowp_selector_parse(const char *name, lowp_selector_kind *out);

typedef struct lowp_select_spec {
    lowp_selector_kind kind;
    lowp_qsa_config qsa;     /* kind QSA: geometry; keys and recipe are set from `keys` */
    lowp_dsa_config dsa;     /* kind DSA */
    lowp_blocksel_config bs; /* kind MoBA / NSA */
    const char *keys;        /* qsa: bf16 e4m3 nvfp4 mxfp4 mxfp8; dsa: bf16 fp8 fp4 fp4-deepgemm;
                                moba/nsa: bf16 fp8_e4m3 fp8_e5m2 nvfp4 mxfp4 mxfp8 */
    const char *recipe;      /* NULL: the format's default (qsa nvfp4: trtllm; mx: ocp) */
    lowp_sweep_scale_mode scale; /* moba/nsa nvfp4 and fp8 keys, and the values' cache: the global scale */
    /* The main K/V cache format of the sparse attention's quantized-values runs: bf16
     * fp8_e4m3 fp8_e5m2 nvfp4 mxfp4 mxfp8 (its default recipe, `scale` for its global scale).
     * NULL: moba/nsa the keys' format and recipe (one cache); qsa e4m3 -> fp8_e4m3, dsa fp8
     * -> fp8_e4m3, dsa fp4 -> mxfp4, otherwise the keys' format name. */
    const char *values;
} lowp_select_spec;

/* A spec with the selector's defaults for the given shape (heads, dim): QSA's and DSA's
 * production geometry with the heads and dim given; MoBA block 512 top-3 (current block
 * forced); NSA block 64 top-16 with 1 sink and 2 local blocks; keys "bf16". */
lowp_select_spec lowp_select_spec_default(lowp_selector_kind kind, size_t q_heads, size_t kv_heads, size_t dim);

/* Inputs: q [q_len][q_heads][dim] and k [ctx][kv_heads][dim] (binary32; QSA and DSA round
 * both to BF16 first, as the model holds them, and need kv_heads 1), query row r at
 * position q_offset + r; wq, wk: QSA's RMSNorm weights [dim] (NULL: 0); w: DSA's head
 * weights [q_len][q_heads] (NULL: 1).
 * v [ctx][kv_heads][dim] (NULL: no attention) are the values of the sparse attention over
 * the selected tokens (lowp_sparse_attn), gate [q_len][q_heads][dim] its output gate (NULL:
 * none). The attention's queries and keys are q and k (BF16): for MoBA and NSA they are the
 * main attention's own; for QSA and DSA, whose index heads have their own projections in
 * the model, the index tensors stand in for the main attention's (a synthetic pairing: lowp
 * has no separate main-attention inputs for them yet). Query head h attends the tokens of
 * its unit's selection (QSA, DSA: the row's; MoBA: head h's; NSA: its KV group's) up to its
 * position, in ascending order; QSA adds the open tail. */
typedef struct lowp_select_inputs {
    const float *q, *k, *wq, *wk, *w;
    size_t q_len, q_heads, ctx, kv_heads, dim, q_offset;
    const float *v, *gate;
} lowp_select_inputs;

typedef struct lowp_select_result {
    size_t units, cand, k;    /* selections per row; candidates per row (the widest); top-k */
    int32_t *indices;         /* [q_len][units][k], best first, -1 past the count */
    float *scores;            /* [q_len][units][cand], -Inf past a row's visible candidates */
    int32_t *index_list;      /* QSA: [q_len][lowp_qsa_index_width + 1]; else NULL */
    size_t list_width;        /* lowp_qsa_index_width + 1, or 0 */
    size_t rounded;           /* input values that rounding to BF16 changed (QSA, DSA) */
    lowp_quant_counts counts; /* what the main keys' quantizer did (MoBA, NSA) */
    float dec;                /* their decode-side global scale (1 where none) */
    /* drift against the reference keys' selection, over all rows and units */
    size_t selections, unchanged, lost;
    double jaccard_sum, jaccard_min, recall_sum;
    size_t deepest;           /* the largest intruder rank */
    int32_t *ref_indices;     /* [q_len][units][k]: the reference selections */
    /* The output-error split (when v was given): relative L2 error, over every row, head and
     * dim, of the attention output against the exact one (reference selection, BF16 K and
     * V, lowp_sparse_attn's binary64 path) of
     *   err_sel:  the quantized keys' selection with the exact values (binary64, BF16 K/V)
     *   err_val:  the reference selection with K and V in the `values` cache, through QSA's
     *             production path (LOWP_SPARSE_BF16 for bf16, LOWP_SPARSE_FP8 otherwise)
     *   err_both: the quantized keys' selection through that production path.
     * sel_share = err_sel / (err_sel + err_val): the changed selection's share of the two
     * separate errors (0 when both are 0). */
    int attn;
    char values[16];
    double err_sel, err_val, err_both, sel_share;
    /* Certified stability (lowp/select.h): 1 when the selector has a score bound (QSA,
     * DSA, MoBA) and every quantized key was within its element bound; certified counts the
     * selections certified stable (both sides certified). */
    int certifiable;
    size_t certified;
} lowp_select_result;

/* Runs the spec over the inputs. Refuses (-1 with a reason naming the row) a NaN score,
 * inputs that do not fit the selector, a top-k larger than the candidates the whole
 * sequence has. progress (may be NULL) is called after each row. */
int lowp_select_run(const lowp_select_spec *spec, const lowp_select_inputs *in, lowp_select_result *out,
                    void (*progress)(void *arg, size_t done, size_t total), void *arg, char *why,
                    size_t why_len);
void lowp_select_result_free(lowp_select_result *r); /* NULL-safe, idempotent */

/* The reference side of a run: the inputs as the selectors read them, the reference keys,
 * their scores, bounds and selections, and the exact attention outputs. It depends only on
 * the selector's kind and geometry and on the inputs, not on the keys, recipe, scale or
 * values of the spec, so a sweep over key formats makes it once per case:
 * lowp_select_run_ref fills an empty ref on its first call and reuses it after, refusing
 * (-1) a spec of another kind or geometry, or other inputs (compared by pointer and size:
 * the caller must not change the arrays between calls). lowp_select_run is
 * lowp_select_run_ref with a fresh ref. The results are the same either way. */
typedef struct lowp_select_ref lowp_select_ref;
lowp_select_ref *lowp_select_ref_new(void); /* NULL: out of memory */
void lowp_select_ref_free(lowp_select_ref *ref); /* NULL-safe */
int lowp_select_run_ref(const lowp_select_spec *spec, const lowp_select_inputs *in, lowp_select_ref *ref,
                        lowp_select_result *out, void (*progress)(void *arg, size_t done, size_t total), void *arg,
                        char *why, size_t why_len);

#ifdef __cplusplus
}
#endif
#endif /* LOWP_SELECT_RUN_H */
