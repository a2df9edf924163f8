/* lowp/kvcache.h: a paged KV cache as production systems store it, and the data paths
 * that turn it into the K/V/Q an attention kernel actually consumes.
 *
 * Sources (restated in ref/notes/kernels.md, section numbers below):
 *   - FlashInfer docs/tutorials/kv_layout.rst: NHD/HND pages, CSR page table (3.1);
 *   - SGLang NVFP4KVCacheMethod / _store_nvfp4_kv_kernel: packed E2M1 (low nibble = even
 *     element), E4M3 block scales per 16 elements of head_dim, V scales 4-token
 *     interleaved for TRT-LLM-gen (1.2); TRT-LLM quantizeAndWriteFP4KVCache (2.2);
 *   - FP8 per-tensor K/V scales, decode-side: fp8 = sat_rne(x / s), x ~= fp8 * s (0.5);
 *   - vLLM #50085 (V scales written in one order, read in another: silent corruption),
 *     vLLM #53681 (num_heads mistaken for page_size), FlashInfer's 0x7F workspace poison,
 *     ROCm #6054 (byte offsets past 2^32) (section 6).
 *
 * Storage model. A cache has num_pages pages of page_size token slots. Every slot holds,
 * for each of num_heads KV heads, one K row of qk_dim elements and one V row of vo_dim
 * elements (qk_dim may differ from vo_dim: DeepSeek prefill 192/128, FlashInfer #4976).
 * K and V live in four separate buffers (codes and block scales for each; TRT-LLM keeps
 * block scales in a separate pool with the same page index, SGLang in separate buffers):
 *
 *   codes   NHD: [num_pages][page_size][num_heads][row_bytes]
 *           HND: [num_pages][num_heads][page_size][row_bytes]
 *   scales  NHD: [num_pages][page_size][num_heads][S]      S = dim / block_size
 *           HND: [num_pages][num_heads][page_size][S]      (SGLang native_*_scale_buffer)
 *
 * row_bytes = lowp_block_code_bytes(format, dim): 4-bit codes two per byte, element 2i in
 * the low nibble; FP8 one byte; BF16 two bytes, little-endian. Block scales are one byte
 * (E4M3 for NVFP4, E8M0 for MX). Within a page and head, the [page_size][S] scale tile is
 * stored either linearly (scale (t, s) at tile position (t, s)) or, for NVFP4 only, in the
 * TRT-LLM / SGLang 4-token interleaved order (needs page_size % 4 == 0 and S % 4 == 0,
 * i.e. dim % 64 == 0; SGLang raises on either, ref/notes/kernels.md 1.2):
 *
 *   (t, s) -> (t', s') = ((t/4)*4 + s/(S/4), (s % (S/4))*4 + t%4)
 *   flat:     t'*S + s' = (t/4)*4*S + s*4 + t%4                    (TRT-LLM, 2.2)
 *
 * and the interleaved position (t', s') is then laid out as NHD or HND like (t, s). All
 * byte offsets are size_t (64-bit): a pool past 4 GiB addresses correctly.
 *
 * Global scales are decode-side (x ~= element * block scale * g), one per tensor or one
 * per KV head, separately for K and V: the NVFP4 global scale and the FP8 k_scale/v_scale.
 * They default to 1.0, the uncalibrated value every system ships (ref/notes/kernels.md 0.5, 1.3).
 * MX and BF16 have none (1.0). A scale must be finite and > 0: a missing or zero scale is
 * an error, never silently something else (TRT-LLM #16916).
 *
 * Invariants:
 *   - Writing a token stores exactly the bytes lowp_block_quantize gives for each (head,
 *     K or V) row under the cache's recipe and that head's global scale
 *     (lowp_global_scale_from_dec); the cache never changes a byte, only places it.
 *   - Reading is exact: lowp_block_dequantize_f64 of those bytes (NaN scale -> NaN block).
 *   - Every read takes the reader's lowp_kv_view; one that differs from what the writer
 *     stamped in any field fails with -1 and a sentence naming the field. Nothing is read.
 *   - A new cache is poisoned (every code and scale byte 0xFF, which is NaN in E4M3,
 *     E5M2, E8M0 and BF16, and gives NVFP4/MXFP4 blocks a NaN scale): a slot read before
 *     it was written, or through a wrong offset, shows up as NaN.
 *
 * Error convention: functions returning int give 0, or -1 with one sentence in why (may be
 * NULL) that names the offending argument. Nothing here is thread-safe for concurrent
 * writes to one cache; concurrent reads are fine.
 */
#ifndef LOWP_KVCACHE_H
#define LOWP_KVCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "lowp/block.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum lowp_kv_layout {
    LOWP_KV_NHD = 0, /* page: [page_size][num_heads][dim] (FlashInfer default, SGLang slot-major) */
    LOWP_KV_HND = 1  /* page: [num_heads][page_size][dim] (TRT-LLM getKVLocalIdx, GenMHA view) */
} lowp_kv_layout;

typedef enum lowp_kv_sf_order {
    LOWP_KV_SF_LINEAR = 0,     /* scale (t, s) at (t, s): K always; V for XQA/FA2 (SM120) */
    LOWP_KV_SF_INTERLEAVE4 = 1 /* 4-token interleave: V for TRT-LLM-gen (SM100); NVFP4 only */
} lowp_kv_sf_order;

typedef enum lowp_kv_scale_gran {
    LOWP_KV_SCALE_TENSOR = 0, /* one decode-side global scale for K, one for V */
    LOWP_KV_SCALE_HEAD = 1    /* one per KV head, for K and for V */
} lowp_kv_scale_gran;

typedef enum lowp_kv_which { LOWP_KV_K = 0, LOWP_KV_V = 1 } lowp_kv_which;
typedef enum lowp_kv_part { LOWP_KV_CODES = 0, LOWP_KV_SCALES = 1 } lowp_kv_part;

/* Names: "nhd" "hnd"; "linear" "interleave4"; "tensor" "head"; "k" "v". Parsers: 0 or -1. */
const char *lowp_kv_layout_name(lowp_kv_layout l);
const char *lowp_kv_sf_order_name(lowp_kv_sf_order o);
const char *lowp_kv_scale_gran_name(lowp_kv_scale_gran g);
int lowp_kv_layout_parse(const char *name, lowp_kv_layout *out);
int lowp_kv_sf_order_parse(const char *name, lowp_kv_sf_order *out);
int lowp_kv_scale_gran_parse(const char *name, lowp_kv_scale_gran *out);

/* What a cache stores. format is one of LOWP_BF16_PASS, LOWP_FP8_E4M3, LOWP_FP8_E5M2,
 * LOWP_NVFP4, LOWP_MXFP4, LOWP_MXFP8 (one format for K and V, as in every system).
 * recipe/quant_flags are the writer's (lowp_recipe_check must accept them for format).
 * qk_dim and vo_dim must be multiples of the block size (16 NVFP4, 32 MX). The scale
 * orders must be LINEAR for formats without block scales; INTERLEAVE4 is NVFP4 only. */
typedef struct lowp_kv_config {
    lowp_block_format format;
    lowp_recipe recipe;
    unsigned quant_flags;              /* LOWP_BLOCK_* flags passed to lowp_block_quantize */
    lowp_kv_layout layout;
    lowp_kv_sf_order k_sf_order, v_sf_order;
    lowp_kv_scale_gran scale_gran;
    size_t num_pages, page_size, num_heads;
    size_t qk_dim, vo_dim;
} lowp_kv_config;

/* A config with the production defaults: the format's default recipe (sglang-kv for
 * NVFP4, as SGLang ships it; lowp_recipe_default otherwise), NHD, K linear, V linear,
 * per-tensor scales. The caller sets sizes and anything else afterwards. */
lowp_kv_config lowp_kv_config_default(lowp_block_format f, size_t num_pages, size_t page_size,
                                      size_t num_heads, size_t qk_dim, size_t vo_dim);

/* 0 if a cache with this config can exist, else -1 with a reason: zero sizes, a dim not a
 * multiple of the block size, interleave with page_size % 4 != 0 or dim % 64 != 0 or a
 * non-NVFP4 format, a recipe the format lacks, a size whose byte count overflows size_t. */
int lowp_kv_config_check(const lowp_kv_config *cfg, char *why, size_t why_len);

/* Per-row geometry: element code bytes and block scales for one (token, head) row. */
size_t lowp_kv_row_code_bytes(const lowp_kv_config *cfg, lowp_kv_which w);
size_t lowp_kv_row_scales(const lowp_kv_config *cfg, lowp_kv_which w); /* S; 0 without */

/* The reader's statement of what it expects to find. Every field must equal the writer's
 * stamp (lowp_kvcache_view); num_pages and the recipe are not part of it (a reader does
 * not depend on them). */
typedef struct lowp_kv_view {
    lowp_block_format format;
    lowp_kv_layout layout;
    lowp_kv_sf_order k_sf_order, v_sf_order;
    lowp_kv_scale_gran scale_gran;
    size_t page_size, num_heads, qk_dim, vo_dim;
} lowp_kv_view;

lowp_kv_view lowp_kv_view_of(const lowp_kv_config *cfg);

/* ---- Page table (FlashInfer CSR, ref/notes/kernels.md 3.1) ---------------------------
 * Sequence b owns pages indices[indptr[b] .. indptr[b+1]-1], in order; its length is
 * page_size*(n_b - 1) + last_page_len[b] when n_b > 0 pages, and 0 when n_b == 0 (then
 * last_page_len[b] must be 0). int32 as FlashInfer requires. Pages may be shared between
 * sequences (prefix reuse, TRT-LLM #2699) but not repeated within one. */
typedef struct lowp_kv_page_table {
    size_t batch;
    const int32_t *indptr;        /* [batch + 1], indptr[0] == 0, non-decreasing */
    const int32_t *indices;       /* [indptr[batch]], each in [0, num_pages) */
    const int32_t *last_page_len; /* [batch], 1..page_size (0 for an empty sequence) */
} lowp_kv_page_table;

int lowp_kv_page_table_check(const lowp_kv_page_table *pt, size_t num_pages, size_t page_size,
                             char *why, size_t why_len);
/* Length of sequence b (pt already checked). */
size_t lowp_kv_seq_len(const lowp_kv_page_table *pt, size_t page_size, size_t b);
/* Physical (page, slot) of position pos of sequence b; -1 with a reason if b >= batch or
 * pos >= its length. */
int lowp_kv_locate(const lowp_kv_page_table *pt, size_t page_size, size_t b, size_t pos,
                   size_t *page, size_t *slot, char *why, size_t why_len);

/* ---- Scale interleave (pure functions of the documented formula) --------------------- */
/* (t, s) in a [page_size][S] tile -> interleaved tile position; S % 4 == 0, t < page_size
 * with page_size % 4 == 0. Spot values (SGLang unit test, ref/notes/kernels.md 1.8), S = 8:
 * (3,7)->(3,7), (1,4)->(2,1). The inverse maps back. */
void lowp_kv_sf_interleave(size_t t, size_t s, size_t S, size_t *t_out, size_t *s_out);
void lowp_kv_sf_deinterleave(size_t t, size_t s, size_t S, size_t *t_out, size_t *s_out);

/* ---- The cache --------------------------------------------------------------------- */
typedef struct lowp_kvcache lowp_kvcache;

/* Allocate (and poison with 0xFF) a cache; *out is NULL on failure. All byte counts are
 * checked for size_t overflow before allocating. */
int lowp_kvcache_create(const lowp_kv_config *cfg, lowp_kvcache **out, char *why, size_t why_len);
void lowp_kvcache_destroy(lowp_kvcache *c);

const lowp_kv_config *lowp_kvcache_config(const lowp_kvcache *c);
lowp_kv_view lowp_kvcache_view(const lowp_kvcache *c); /* the writer's stamp */
/* 0 if view matches the stamp, else -1 naming the first differing field, e.g.
 * "view.v_sf_order is linear but the cache was written interleave4". */
int lowp_kvcache_check_view(const lowp_kvcache *c, const lowp_kv_view *view, char *why,
                            size_t why_len);

/* Fill every code and scale byte of every page, used or not, with byte. LOWP_KV_POISON
 * (0xFF) is NaN in E4M3/E5M2/E8M0/BF16 codes and in E4M3/E8M0 scales; E2M1 has no NaN,
 * but its blocks get a NaN scale. FlashInfer's 0x7F is also NaN for E4M3, not for E8M0. */
#define LOWP_KV_POISON 0xFFu
void lowp_kvcache_poison(lowp_kvcache *c, uint8_t byte);

/* Decode-side global scales: n = 1 (per tensor) or num_heads (per head), as the config's
 * scale_gran says; k or v may be NULL to leave that side unchanged. Formats without a
 * global scale (MX, BF16) accept only 1.0. Set them before writing: the quantizer uses
 * them. Values must be finite and > 0. */
int lowp_kvcache_set_global_scales(lowp_kvcache *c, const float *k, const float *v, size_t n,
                                   char *why, size_t why_len);
float lowp_kvcache_global_scale(const lowp_kvcache *c, lowp_kv_which w, size_t head);

/* Quantize-on-write of one token into (page, slot): k is [num_heads][qk_dim], v is
 * [num_heads][vo_dim] (binary32). Each (head) row is quantized by lowp_block_quantize
 * with the config's recipe and flags and lowp_global_scale_from_dec(format, recipe,
 * global scale of that head), blocks along the head dim. Counts are added to k_counts /
 * v_counts (may be NULL) and to the cache's totals. */
int lowp_kvcache_write(lowp_kvcache *c, size_t page, size_t slot, const float *k, const float *v,
                       lowp_quant_counts *k_counts, lowp_quant_counts *v_counts, char *why,
                       size_t why_len);
/* The same at position pos of sequence b of a page table (sequence b's entries are
 * checked against this cache; run lowp_kv_page_table_check once for the whole table). */
int lowp_kvcache_write_pos(lowp_kvcache *c, const lowp_kv_page_table *pt, size_t b, size_t pos,
                           const float *k, const float *v, lowp_quant_counts *k_counts,
                           lowp_quant_counts *v_counts, char *why, size_t why_len);
/* Cumulative counts of every write so far, and the number of token writes. */
const lowp_quant_counts *lowp_kvcache_counts(const lowp_kvcache *c, lowp_kv_which w);
size_t lowp_kvcache_tokens_written(const lowp_kvcache *c);

/* Exact read of one slot: k [num_heads][qk_dim], v [num_heads][vo_dim] (either NULL to
 * skip), element * block scale * global scale in binary64 (exact). */
int lowp_kvcache_read(const lowp_kvcache *c, const lowp_kv_view *view, size_t page, size_t slot,
                      double *k, double *v, char *why, size_t why_len);
/* The stored bytes of one (slot, head) row in logical order (scales de-interleaved):
 * codes gets lowp_kv_row_code_bytes, scales lowp_kv_row_scales bytes (NULL to skip). */
int lowp_kvcache_read_row_bytes(const lowp_kvcache *c, const lowp_kv_view *view, lowp_kv_which w,
                                size_t page, size_t slot, size_t head, uint8_t *codes,
                                uint8_t *scales, char *why, size_t why_len);
/* Dense K and V of sequence b, positions 0..len-1 (len <= its length): k [len][num_heads]
 * [qk_dim], v [len][num_heads][vo_dim] (either may be NULL), exact, the shapes of
 * lowp/attn.h. Sequence b's part of the page table (its indptr pair, page indices and
 * last_page_len) is checked first; only slots inside the sequence are read. For NVFP4,
 * FP8 and BF16 caches this is also the folded K/V of the EXACT, DECODE and FP8KV paths
 * below (their BF16 products are exact), so attention on a gather is those paths' output. */
int lowp_kvcache_gather(const lowp_kvcache *c, const lowp_kv_view *view,
                        const lowp_kv_page_table *pt, size_t b, size_t len, double *k, double *v,
                        char *why, size_t why_len);

/* The same for positions pos0..pos0+len-1 and heads h0..h0+nh-1 of sequence b: k
 * [len][nh][qk_dim], v [len][nh][vo_dim] (either may be NULL), so that a caller can read
 * one head, or a block of positions, without holding the whole cache in binary64.
 * lowp_kvcache_gather is this with pos0 = 0, h0 = 0, nh = num_heads. */
int lowp_kvcache_gather_range(const lowp_kvcache *c, const lowp_kv_view *view,
                              const lowp_kv_page_table *pt, size_t b, size_t pos0, size_t len,
                              size_t h0, size_t nh, double *k, double *v, char *why,
                              size_t why_len);

/* Copy page src to page dst: codes and scales of K and V, bit for bit (the interleave is
 * within a page, so it travels with it; SGLang move_nvfp4_native_scales, sglang #29913). */
int lowp_kvcache_copy_page(lowp_kvcache *c, size_t src, size_t dst, char *why, size_t why_len);

/* Raw buffers (for harnesses that upload the pool) and byte offsets into them. */
uint8_t *lowp_kvcache_buffer(lowp_kvcache *c, lowp_kv_which w, lowp_kv_part p, size_t *bytes);
/* The same for readers: a const view of the buffer (NULL for the scales of a format
 * without block scales). */
const uint8_t *lowp_kvcache_cbuffer(const lowp_kvcache *c, lowp_kv_which w, lowp_kv_part p,
                                    size_t *bytes);
size_t lowp_kvcache_code_offset(const lowp_kvcache *c, lowp_kv_which w, size_t page, size_t slot,
                                size_t head);
/* Offset of the block scale of block s of row (page, slot, head), after the interleave. */
size_t lowp_kvcache_scale_offset(const lowp_kvcache *c, lowp_kv_which w, size_t page, size_t slot,
                                 size_t head, size_t s);

/* ---- Data paths (ref/kvcache/src/kvpath.c) --------------------------------------------------
 * A path maps the float K/V of a context (projection outputs, [ctx][num_heads][dim]) and
 * the float Q ([q_len][num_q_heads][qk_dim]) to the values a production kernel multiplies,
 * with that path's intermediate roundings applied exactly, plus the scale factors the
 * kernel applies to the scores (bmm1) and the output (bmm2). With those,
 *
 *   score = sm_scale * q_scale * k_scale[h_kv] * dot(q_eff, k_eff)
 *   out   = v_scale[h_kv] * sum_j p_j v_eff_j
 *
 * which is what lowp_attn_oracle_mpfr / lowp_attn_ref_f64 compute on the folded values
 * (fold = 1 multiplies the scales into q_eff/k_eff/v_eff; every such product is exact in
 * binary64: at most 8 significant bits times a binary32 scale). Not modelled here: the
 * kernel's own arithmetic (fp32 accumulation order, exp2 approximations, P rounded to BF16
 * before P*V, output dtype); lowp/attn.h is exact math on these inputs.
 *
 * Cached tokens are quantized exactly as lowp_kvcache_write would (same recipe, flags and
 * global scales, same bytes). The paths:
 *
 * EXACT    every token from the cache, dequantized exactly; k_eff = element * block scale
 *          (binary64), k_scale/v_scale = the global scales; Q exact (binary32 as given).
 *          The format's cost alone.
 * DECODE   SGLang/TRT-LLM GenMHA NVFP4 decode (lmsys blog 2026-09-16, ref/notes/seeds.md 1.3: packed
 *          E2M1 -> BF16 by cvt.rn.bf16x2.e2m1x2, E4M3 block scale -> BF16, packed BF16
 *          multiply, BF16 BMMs; global K/V scales as bmm1/bmm2 scales, ref/notes/kernels.md 1.3).
 *          k_eff = RN_bf16(bf16(element) * bf16(block scale)). For NVFP4 this is EXACT:
 *          E2M1 (<= 2 significant bits) and E4M3 (<= 4) are exact in BF16, their product
 *          has <= 6 significant bits and lies in [2^-10, 2688], inside BF16's normal range.
 *          FP8 and BF16 caches are exact too (one factor); MX products can round or
 *          overflow only at the E8M0 extremes (MXFP8 below 2^-133 or above BF16 max).
 *          Every token comes from the cache (the new token is written before the
 *          attention reads it); chunk_start is ignored. Q: BF16 (RN).
 * EXTEND   SGLang chunked prefill / extend on the shared FP8 E4M3 workspace (ref/notes/kernels.md
 *          1.5, ref/notes/seeds.md 1.2). NVFP4 caches only. Prefix tokens t < chunk_start:
 *          dequantize_prev_kv = nvfp4_kv_dequantize in fp32, (element * block scale) *
 *          global scale, RN to BF16, then torch .to(float8_e4m3fn) with no scale
 *          (non-saturating: |x| > 464 rounds past 448 and becomes NaN 0x7F, so every
 *          |x| >= 480 is NaN; lowp codec (e4m3, torch, rn)). Current-chunk tokens
 *          t >= chunk_start: the BF16 projection output (RN_bf16 of the input) cast the
 *          same way, never NVFP4-quantized. k_scale = v_scale = 1 (the global scale is
 *          already inside the workspace value). Q: BF16 by default — the article runs
 *          "BF16 Query with FP8 Key/Value" for initial prefill and says extend runs "the
 *          same as initial prefill" (ref/notes/seeds.md 1.1, 1.2); LOWP_KV_Q_FP8 is available.
 * PREFILL  SGLang initial prefill (ref/notes/seeds.md 1.1): attention on the unquantized FP8 K/V
 *          (RN_bf16 then torch e4m3, as the current chunk above) for every token; the
 *          cache is written in NVFP4 separately (lowp_kvcache_write) and not read.
 *          chunk_start must be 0. Q: BF16. Any cache format is accepted (not read).
 * FP8KV    FP8 E4M3 (or E5M2) cache in the QSA Triton kernel (ref/notes/seeds.md 2): FP8 tiles
 *          converted to Q's BF16 (exact), dot(Q, K_fp8) * k_scale,
 *          sum(P * V_fp8) * v_scale. k_eff = fp8 value, k_scale/v_scale = the decode-side
 *          scales. Q: BF16. Same values as DECODE on an FP8 cache, kept as its own name.
 */
typedef enum lowp_kv_path {
    LOWP_KV_PATH_EXACT = 0,
    LOWP_KV_PATH_DECODE = 1,
    LOWP_KV_PATH_EXTEND = 2,
    LOWP_KV_PATH_PREFILL = 3,
    LOWP_KV_PATH_FP8KV = 4
} lowp_kv_path;
#define LOWP_KV_PATH_COUNT 5

typedef enum lowp_kv_qtype {
    LOWP_KV_Q_DEFAULT = 0, /* the path's own: F32 for EXACT, BF16 for the others */
    LOWP_KV_Q_F32 = 1,     /* Q as given (exact) */
    LOWP_KV_Q_BF16 = 2,    /* RN to BF16 (cuda rn) */
    LOWP_KV_Q_FP8 = 3      /* e4m3 (cuda rn satfinite) of RN_f32(q * RN_f32(1/q_scale)),
                              TRT-LLM's multiply by the reciprocal (ref/notes/kernels.md 2.1);
                              q_scale joins the score scale */
} lowp_kv_qtype;

/* Names "exact" "decode" "extend" "prefill" "fp8kv"; parser 0 or -1. */
const char *lowp_kv_path_name(lowp_kv_path p);
int lowp_kv_path_parse(const char *name, lowp_kv_path *out);

typedef struct lowp_kv_path_args {
    lowp_kv_path path;
    lowp_kv_config cfg;      /* cache format, recipe, flags, scale_gran, num_heads, qk/vo dim;
                                num_pages, page_size, layout and scale orders are ignored */
    const float *k_gs, *v_gs; /* decode-side global scales, 1 or num_heads values by
                                 cfg.scale_gran; NULL means 1.0 */
    size_t ctx;              /* tokens 0..ctx-1 */
    size_t chunk_start;      /* EXTEND: tokens chunk_start..ctx-1 are the current chunk */
    size_t q_len, num_q_heads;
    lowp_kv_qtype q_type;
    float q_scale;           /* LOWP_KV_Q_FP8 only; 0 means 1.0 */
    const float *q;          /* [q_len][num_q_heads][qk_dim], may be NULL (no Q output) */
    const float *k;          /* [ctx][num_heads][qk_dim] */
    const float *v;          /* [ctx][num_heads][vo_dim] */
} lowp_kv_path_args;

/* A zeroed args with path, cfg and the shapes filled in. */
lowp_kv_path_args lowp_kv_path_args_init(lowp_kv_path p, const lowp_kv_config *cfg, size_t ctx,
                                         size_t q_len, size_t num_q_heads, const float *q,
                                         const float *k, const float *v);

typedef struct lowp_kv_path_result {
    double q_scale;           /* multiplies every score (1 when folded) */
    lowp_quant_counts k_counts, v_counts; /* NVFP4/FP8/... quantization of cached tokens */
    size_t k_nan, v_nan, q_nan; /* effective values that are NaN (workspace overflow, ...) */
    size_t k_inf, v_inf;      /* effective values that are Inf */
} lowp_kv_path_result;

/* Run a path. q_eff [q_len][num_q_heads][qk_dim] (may be NULL), k_eff [ctx][num_heads]
 * [qk_dim], v_eff [ctx][num_heads][vo_dim]; k_scale, v_scale [num_heads] (may be NULL when
 * fold is 1, in which case the scales are multiplied in and reported as 1). res may be
 * NULL. -1 with a reason if the path does not exist for the format (EXTEND needs NVFP4,
 * FP8KV needs FP8), a scale is not finite and > 0, or a shape is inconsistent. */
int lowp_kv_path_run(const lowp_kv_path_args *a, int fold, double *q_eff, double *k_eff,
                     double *v_eff, double *k_scale, double *v_scale, lowp_kv_path_result *res,
                     char *why, size_t why_len);

#ifdef __cplusplus
}
#endif
#endif /* LOWP_KVCACHE_H */
