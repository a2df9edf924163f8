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
    lowp_sweep_scale_mode scale; /* moba/nsa nvfp4 and fp8: the global scale */
} lowp_select_spec;

/* A spec with the selector's defaults for the given shape (heads, dim): QSA's and DSA's
 * production geometry with the heads and dim given; MoBA block 512 top-3 (current block
 * forced); NSA block 64 top-16 with 1 sink and 2 local blocks; keys "bf16". */
lowp_select_spec lowp_select_spec_default(lowp_selector_kind kind, size_t q_heads, size_t kv_heads, size_t dim);

/* Inputs: q [q_len][q_heads][dim] and k [ctx][kv_heads][dim] (binary32; QSA and DSA round
 * both to BF16 first, as the model holds them, and need kv_heads 1), query row r at
 * position q_offset + r; wq, wk: QSA's RMSNorm weights [dim] (NULL: 0); w: DSA's head
 * weights [q_len][q_heads] (NULL: 1). */
typedef struct lowp_select_inputs {
    const float *q, *k, *wq, *wk, *w;
    size_t q_len, q_heads, ctx, kv_heads, dim, q_offset;
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
} lowp_select_result;

/* Runs the spec over the inputs. Refuses (-1 with a reason naming the row) a NaN score,
 * inputs that do not fit the selector, a top-k larger than the candidates the whole
 * sequence has. progress (may be NULL) is called after each row. */
int lowp_select_run(const lowp_select_spec *spec, const lowp_select_inputs *in, lowp_select_result *out,
                    void (*progress)(void *arg, size_t done, size_t total), void *arg, char *why,
                    size_t why_len);
void lowp_select_result_free(lowp_select_result *r); /* NULL-safe, idempotent */

#ifdef __cplusplus
}
#endif
#endif /* LOWP_SELECT_RUN_H */
