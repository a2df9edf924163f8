/* lowp/kv_formats.h: the model's K/V cache (lowp/llama.h lowp_kv_store) held in lowp's
 * cache formats, and a recording store for export and calibration.
 *
 * The format store. Every layer has its own paged cache (lowp/kvcache.h: NHD, pages of
 * LOWP_KV_FORMAT_PAGE tokens, pages 0, 1, 2 .. in position order) in one format and
 * recipe, with decode-side global scales per layer (one per tensor or one per KV head,
 * separately for K and V; set at creation, before any write, as the cache requires).
 * write quantizes each new position's K (after RoPE) and V through lowp_kvcache_write,
 * so the stored bytes are exactly lowp_block_quantize's; K before RoPE is not stored
 * (attention never reads it). Attention then reads:
 *   exact  the cache's exact decoded values (lowp_kvcache_read: element x block scale x
 *          global scale in binary64) rounded once to binary32 (RN; exact for BF16, MX and
 *          fp8/nvfp4 with a power-of-two global scale such as 1.0, else within 2^-24
 *          relative), then the forward pass's own binary32 attention
 *          (lowp_llama_attention): the format's cost alone;
 *   emul   lowp's GPU paged-decode kernel (lowp/attn_gpu_emul.h, bit for bit): each
 *          query position i is one decode of a sequence of length i + 1 that shares the
 *          layer's pages (a page table of n sequences over the same pages), q rounded to
 *          BF16 as the kernel takes it, the BF16 output widened to binary32. The split
 *          length is lowp_gpu_decode_chunk_tokens of a batch of one (128 positions for any
 *          sequence shorter than 8,256), what a decode step at that position would use.
 *          Formats the kernel lacks (mxfp8, fp8_e5m2) are refused at creation.
 *   prefill  SGLang's initial prefill (lowp/kvcache.h LOWP_KV_PATH_PREFILL): attention on
 *          the positions' own K/V cast to FP8 E4M3 (RN_bf16, then torch e4m3); the cache is
 *          written in the format (statistics, later readers) but not read. Any format.
 *   extend:C SGLang's chunked prefill / extend (LOWP_KV_PATH_EXTEND), NVFP4 only: positions
 *          in chunks [jC, (j+1)C) of absolute position; a query in chunk j attends over the
 *          positions before jC read back from the NVFP4 cache through the FP8 workspace rule
 *          (fp32 (e x sf) x g -> BF16 -> torch e4m3) and over its chunk's positions (up to
 *          its own) cast to FP8 as prefill does. C >= the window (one call from 0) is prefill.
 *          A call that starts inside a chunk (decode steps of generation) continues it.
 *   For both, the effective values are lowp_kv_path_run's (the per-element rules live there
 *   only): each write runs the PREFILL path on the new positions' K/V (the chunk rule) and,
 *   for extend, the EXTEND path with chunk_start = n (every new position as a cached prefix
 *   token: the same bytes lowp_kvcache_write stores, with the cache's global scales).
 *   Queries are rounded to BF16 (the paths' Q, "BF16 Query with FP8 Key/Value"), then the
 *   forward pass's exact binary32 attention (lowp_llama_attention) runs on those values; the
 *   GPU extend emulator is not used (its fixed tiles would cost a second attention code).
 *
 * Statistics (spec.stats): the store also keeps the exact binary32 K and V it was given
 * and accumulates, per layer and KV head, the sum of squared errors of decoded K and V
 * against them, the sum of their squares and their amax; per layer and query head, the
 * same for the attention output against lowp_llama_attention over the exact K and V with
 * the same queries (the layer's own error, the upstream layers' error held fixed).
 *
 * The recording store: exact binary32, bit-identical to lowp_kv_f32_create's forward
 * pass (its attention is lowp_llama_attention over the same arrays), keeping every
 * layer's K before and after RoPE, V and (optionally) the queries after RoPE.
 *
 * Errors: 0, or -1 with one sentence (lowp_why_set). */
#ifndef LOWP_KV_FORMATS_H
#define LOWP_KV_FORMATS_H

#include <stddef.h>
#include <stdint.h>

#include "lowp/block.h"
#include "lowp/kvcache.h"
#include "lowp/llama.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LOWP_KV_FORMAT_PAGE 16 /* tokens per cache page */

typedef enum lowp_kv_attn_mode {
    LOWP_KV_ATTN_EXACT = 0, /* binary32 attention over the exactly decoded cache */
    LOWP_KV_ATTN_EMUL = 1,   /* the GPU decode kernel's emulator */
    LOWP_KV_ATTN_PREFILL = 2, /* SGLang prefill: the FP8 cast of the positions' own K/V */
    LOWP_KV_ATTN_EXTEND = 3   /* SGLang extend in chunks: NVFP4 prefix via the FP8 workspace */
} lowp_kv_attn_mode;

/* "exact" "emul" "prefill" "extend". */
const char *lowp_kv_attn_mode_name(lowp_kv_attn_mode a);
/* The label of a mode with its chunk: "extend:256", else the mode's name; buf of n bytes. */
const char *lowp_kv_attn_label(lowp_kv_attn_mode a, size_t chunk, char *buf, size_t n);
/* "exact" "emul" "prefill" or "extend:C" (C a decimal count >= 1, *chunk = C; 0 for the
 * others); 0, or -1 for anything else (also "extend" without C, or C = 0). */
int lowp_kv_attn_mode_parse(const char *s, lowp_kv_attn_mode *out, size_t *chunk);

/* A cache format as a user names it: FORMAT[:OPT[:OPT]] with FORMAT one of bf16 fp8_e4m3
 * fp8_e5m2 nvfp4 mxfp4 mxfp8 and each OPT a recipe name (lowp_recipe_parse) or a global
 * scale choice: "1.0" (fixed, what uncalibrated systems ship), "tensor" (calibrated, one
 * scale per layer for K and one for V) or "head" (calibrated, one per KV head).
 * Defaults: nvfp4 sglang-kv 1.0 (SGLang's NVFP4 KV cache); fp8 exact tensor (a
 * checkpoint's k_scale / v_scale); mxfp4, mxfp8 ocp; bf16 exact. A scale choice on a
 * format without a global scale, or a recipe the format lacks, is refused. */
typedef struct lowp_kv_choice {
    lowp_block_format format;
    lowp_recipe recipe;
    lowp_kv_scale_gran gran; /* of the global scales */
    int calibrated;          /* 1: scales from calibration K/V (the caller's), 0: 1.0 */
    char name[48];           /* canonical: "nvfp4:1.0", "fp8_e4m3:head", "mxfp4", ... */
} lowp_kv_choice;
int lowp_kv_choice_parse(const char *s, lowp_kv_choice *out, char *why, size_t why_len);

typedef struct lowp_kv_format_spec {
    lowp_kv_choice choice;
    /* decode-side global scales, [n_layer][1 or n_head_kv by choice.gran]; NULL: 1.0 */
    const float *k_scale, *v_scale;
    lowp_kv_attn_mode attn;
    int stats; /* 1: keep the exact K/V and accumulate the error statistics */
    size_t chunk; /* extend: tokens per chunk, 1 .. capacity (refused otherwise); else ignored */
} lowp_kv_format_spec;

typedef struct lowp_kv_format lowp_kv_format;

/* A store for positions 0 .. capacity - 1 of every layer of a model with config c. */
int lowp_kv_format_create(const lowp_llama_config *c, size_t capacity, const lowp_kv_format_spec *spec,
                          lowp_kv_format **out, char *why, size_t why_len);
void lowp_kv_format_free(lowp_kv_format *f); /* NULL-safe */
/* The lowp_kv_store to hand to lowp_llama_forward (valid while f lives). */
lowp_kv_store lowp_kv_format_store(lowp_kv_format *f);
/* Layer l's cache (its bytes, counts and global scales). */
const lowp_kvcache *lowp_kv_format_cache(const lowp_kv_format *f, size_t layer);
/* Layer l's decoded K or V (what exact attention reads), positions 0 .. capacity - 1 (only
 * those written are defined), rows of n_head_kv * head_dim floats. */
const float *lowp_kv_format_decoded(const lowp_kv_format *f, lowp_kv_which w, size_t layer);
/* prefill / extend: layer l's effective K or V as the SGLang path sees it, rows as above;
 * prefix = 0: the chunk rule (FP8 cast of the input), 1: the cached-prefix rule (extend
 * only). NULL for another mode, prefix = 1 without extend, or a layer out of range. */
const float *lowp_kv_format_path_rows(const lowp_kv_format *f, lowp_kv_which w, size_t layer, int prefix);

/* An error statistic: sum of squared errors, sum of squared reference values, reference
 * amax and element count. Relative RMS error = sqrt(err2 / ref2). */
typedef struct lowp_kv_err {
    double err2, ref2;
    double amax;
    size_t n;
    size_t clipped; /* K, V: elements above the largest magnitude the cache can hold at that
                       head's global scale g (NVFP4 6 x 448 g, FP8 E4M3 448 g, E5M2 57344 g;
                       none for MX and BF16), i.e. clipped by a saturating scale */
} lowp_kv_err;
typedef enum lowp_kv_err_what { LOWP_KV_ERR_K = 0, LOWP_KV_ERR_V = 1, LOWP_KV_ERR_ATTN = 2 } lowp_kv_err_what;
/* The statistic of (layer, head): a KV head for K and V, a query head for ATTN. All zero
 * without spec.stats or for an index out of range. Sums over every write (K, V) and
 * attention call (ATTN) since creation or the last lowp_kv_format_clear_stats. */
lowp_kv_err lowp_kv_format_err(const lowp_kv_format *f, lowp_kv_err_what what, size_t layer, size_t head);
void lowp_kv_format_clear_stats(lowp_kv_format *f);
/* paused != 0: writes and attention calls add nothing to the statistics until resumed. */
void lowp_kv_format_pause_stats(lowp_kv_format *f, int paused);

/* ---- the recording store ---- */
typedef enum lowp_kv_rec_what {
    LOWP_KV_REC_K_PRE = 0, /* K before RoPE, [pos][n_head_kv * head_dim] */
    LOWP_KV_REC_K = 1,     /* K after RoPE */
    LOWP_KV_REC_V = 2,
    LOWP_KV_REC_Q = 3      /* queries after RoPE, [pos][n_head * head_dim]; with record_q */
} lowp_kv_rec_what;

typedef struct lowp_kv_record lowp_kv_record;
int lowp_kv_record_create(const lowp_llama_config *c, size_t capacity, int record_q, lowp_kv_record **out,
                          char *why, size_t why_len);
void lowp_kv_record_free(lowp_kv_record *r); /* NULL-safe */
lowp_kv_store lowp_kv_record_store(lowp_kv_record *r);
/* Layer l's recorded rows of what, positions 0 .. capacity - 1; NULL for Q without
 * record_q or a layer out of range. */
const float *lowp_kv_record_get(const lowp_kv_record *r, lowp_kv_rec_what what, size_t layer);

#ifdef __cplusplus
}
#endif
#endif /* LOWP_KV_FORMATS_H */
