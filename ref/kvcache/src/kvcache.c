/* Paged KV cache: storage, page table, quantize-on-write, exact reads (lowp/kvcache.h).
 *
 * The cache only places bytes. Every code and scale byte comes from lowp_block_quantize on
 * the token's row and goes back through lowp_block_dequantize_f64; what this file adds is
 * the addressing (NHD/HND pages, the 4-token V-scale interleave), the page-table checks,
 * and the reader/writer contract (lowp_kv_view). Sources are cited in the header.
 */
#include "lowp/names.h"
#include "lowp/bits.h"
#include "lowp/kvcache.h"

#include "lowp/why.h"
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct lowp_kvcache {
    lowp_kv_config cfg;
    size_t dim[2];        /* qk_dim, vo_dim */
    size_t rb[2];         /* code bytes per (slot, head) row */
    size_t S[2];          /* block scales per row (0 without block scales) */
    size_t code_bytes[2]; /* whole buffers */
    size_t scale_bytes[2];
    uint8_t *codes[2], *scales[2];
    float *gs[2];         /* decode-side global scale per head (per tensor: all equal) */
    lowp_quant_counts counts[2];
    size_t tokens_written;
    /* write scratch: one token's quantized rows, [num_heads][rb] and [num_heads][S] */
    uint8_t *tmp_codes, *tmp_scales;
    /* exact values of every element code (formats of at most 8 bits) and scale code, from
     * lowp_decode_f64: reads multiply the same factors as lowp_block_dequantize_f64, in
     * the same order, without a decode call per element */
    double elem_val[256], scale_val[256];
};

/* a * b, or 0 with *ok cleared on size_t overflow (sizes here are never legitimately 0) */
static size_t mul_chk(size_t a, size_t b, int *ok)
{
    if (a != 0 && b > SIZE_MAX / a) {
        *ok = 0;
        return 0;
    }
    return a * b;
}

/* ---- names ------------------------------------------------------------------ */

static const char *const layout_names[] = {"nhd", "hnd"};
static const char *const order_names[] = {"linear", "interleave4"};
static const char *const gran_names[] = {"tensor", "head"};
static const char *const which_names[] = {"k", "v"};

const char *lowp_kv_layout_name(lowp_kv_layout l)
{
    return (unsigned)l < 2 ? layout_names[l] : "?";
}
const char *lowp_kv_sf_order_name(lowp_kv_sf_order o)
{
    return (unsigned)o < 2 ? order_names[o] : "?";
}
const char *lowp_kv_scale_gran_name(lowp_kv_scale_gran g)
{
    return (unsigned)g < 2 ? gran_names[g] : "?";
}

int lowp_kv_layout_parse(const char *name, lowp_kv_layout *out)
{
    int i;
    if ((i = lowp_name_index(layout_names, 2, name)) < 0)
        return -1;
    *out = (lowp_kv_layout)i;
    return 0;
}
int lowp_kv_sf_order_parse(const char *name, lowp_kv_sf_order *out)
{
    int i;
    if ((i = lowp_name_index(order_names, 2, name)) < 0)
        return -1;
    *out = (lowp_kv_sf_order)i;
    return 0;
}
int lowp_kv_scale_gran_parse(const char *name, lowp_kv_scale_gran *out)
{
    int i;
    if ((i = lowp_name_index(gran_names, 2, name)) < 0)
        return -1;
    *out = (lowp_kv_scale_gran)i;
    return 0;
}

/* ---- config ----------------------------------------------------------------- */

lowp_kv_config lowp_kv_config_default(lowp_block_format f, size_t num_pages, size_t page_size,
                                      size_t num_heads, size_t qk_dim, size_t vo_dim)
{
    lowp_kv_config c;
    memset(&c, 0, sizeof c);
    c.format = f;
    /* SGLang ships NVFP4 KV through FlashInfer nvfp4_kv_quantize (ref/notes/kernels.md 1.4) */
    c.recipe = f == LOWP_NVFP4 ? LOWP_RECIPE_SGLANG_KV : lowp_recipe_default(f);
    c.quant_flags = 0;
    c.layout = LOWP_KV_NHD;
    c.k_sf_order = LOWP_KV_SF_LINEAR;
    c.v_sf_order = LOWP_KV_SF_LINEAR;
    c.scale_gran = LOWP_KV_SCALE_TENSOR;
    c.num_pages = num_pages;
    c.page_size = page_size;
    c.num_heads = num_heads;
    c.qk_dim = qk_dim;
    c.vo_dim = vo_dim;
    return c;
}

static size_t cfg_dim(const lowp_kv_config *cfg, lowp_kv_which w)
{
    return w == LOWP_KV_K ? cfg->qk_dim : cfg->vo_dim;
}
static lowp_kv_sf_order cfg_order(const lowp_kv_config *cfg, lowp_kv_which w)
{
    return w == LOWP_KV_K ? cfg->k_sf_order : cfg->v_sf_order;
}

size_t lowp_kv_row_code_bytes(const lowp_kv_config *cfg, lowp_kv_which w)
{
    return lowp_block_code_bytes(cfg->format, cfg_dim(cfg, w));
}

size_t lowp_kv_row_scales(const lowp_kv_config *cfg, lowp_kv_which w)
{
    return lowp_block_has_scales(cfg->format) ? cfg_dim(cfg, w) / lowp_block_size(cfg->format)
                                              : 0;
}

int lowp_kv_config_check(const lowp_kv_config *cfg, char *why, size_t why_len)
{
    if (!cfg)
        return lowp_why_set(why, why_len, "cfg is NULL");
    lowp_block_format f = cfg->format;
    if ((unsigned)f >= LOWP_BLOCK_FORMAT_COUNT)
        return lowp_why_set(why, why_len, "cfg.format %d is not a block format", (int)f);
    char rwhy[160];
    if (lowp_recipe_check(f, cfg->recipe, rwhy, sizeof rwhy))
        return lowp_why_set(why, why_len, "cfg.recipe %s does not exist for %s: %s",
                            lowp_recipe_name(cfg->recipe), lowp_block_format_name(f), rwhy);
    if ((unsigned)cfg->layout > LOWP_KV_HND)
        return lowp_why_set(why, why_len, "cfg.layout %d is neither nhd nor hnd", (int)cfg->layout);
    if ((unsigned)cfg->scale_gran > LOWP_KV_SCALE_HEAD)
        return lowp_why_set(why, why_len, "cfg.scale_gran %d is neither tensor nor head",
                            (int)cfg->scale_gran);
    if (cfg->num_pages == 0)
        return lowp_why_set(why, why_len, "cfg.num_pages is 0");
    if (cfg->page_size == 0)
        return lowp_why_set(why, why_len, "cfg.page_size is 0");
    if (cfg->num_heads == 0)
        return lowp_why_set(why, why_len, "cfg.num_heads is 0");
    if (cfg->page_size > (size_t)INT32_MAX || cfg->num_pages > (size_t)INT32_MAX)
        return lowp_why_set(
            why, why_len, "cfg.num_pages and cfg.page_size must fit int32 (page tables are int32)");
    size_t bs = lowp_block_size(f);
    for (int w = 0; w < 2; w++) {
        const char *dn = w == 0 ? "cfg.qk_dim" : "cfg.vo_dim";
        size_t d = cfg_dim(cfg, (lowp_kv_which)w);
        if (d == 0)
            return lowp_why_set(why, why_len, "%s is 0", dn);
        if (d % bs)
            return lowp_why_set(why, why_len, "%s %zu is not a multiple of the %s block size %zu",
                                dn, d, lowp_block_format_name(f), bs);
        lowp_kv_sf_order o = cfg_order(cfg, (lowp_kv_which)w);
        const char *on = w == 0 ? "cfg.k_sf_order" : "cfg.v_sf_order";
        if ((unsigned)o > LOWP_KV_SF_INTERLEAVE4)
            return lowp_why_set(why, why_len, "%s %d is neither linear nor interleave4", on,
                                (int)o);
        if (o == LOWP_KV_SF_INTERLEAVE4) {
            if (f != LOWP_NVFP4)
                return lowp_why_set(why, why_len,
                                    "%s is interleave4 but %s has no interleaved scale layout (the "
                                    "4-token interleave is TRT-LLM's NVFP4 order)",
                                    on, lowp_block_format_name(f));
            if (cfg->page_size % 4)
                return lowp_why_set(
                    why, why_len, "%s is interleave4 but cfg.page_size %zu is not a multiple of 4",
                    on, cfg->page_size);
            if (d % 64)
                return lowp_why_set(why, why_len,
                                    "%s is interleave4 but %s %zu is not a multiple of 64 (S = "
                                    "dim/16 must be a multiple of 4)",
                                    on, dn, d);
        }
    }
    /* byte counts: pages * page_size * heads * row bytes, and the same for scales */
    int ok = 1;
    size_t rows = mul_chk(mul_chk(cfg->num_pages, cfg->page_size, &ok), cfg->num_heads, &ok);
    for (int w = 0; w < 2; w++) {
        (void)mul_chk(rows, lowp_kv_row_code_bytes(cfg, (lowp_kv_which)w), &ok);
        (void)mul_chk(rows, cfg_dim(cfg, (lowp_kv_which)w), &ok); /* bounds element indices */
    }
    (void)mul_chk(cfg->num_heads, sizeof(float), &ok);
    if (!ok)
        return lowp_why_set(
            why, why_len,
            "cfg.num_pages * cfg.page_size * cfg.num_heads * row bytes overflows size_t");
    return 0;
}

lowp_kv_view lowp_kv_view_of(const lowp_kv_config *cfg)
{
    lowp_kv_view v;
    memset(&v, 0, sizeof v);
    v.format = cfg->format;
    v.layout = cfg->layout;
    v.k_sf_order = cfg->k_sf_order;
    v.v_sf_order = cfg->v_sf_order;
    v.scale_gran = cfg->scale_gran;
    v.page_size = cfg->page_size;
    v.num_heads = cfg->num_heads;
    v.qk_dim = cfg->qk_dim;
    v.vo_dim = cfg->vo_dim;
    return v;
}

/* ---- page table --------------------------------------------------------------- */

/* Checks what sequence b uses: its indptr pair, its page indices, its last_page_len, and
 * (when seen is given, num_pages bytes of zeros) pages repeated within it. The indptr
 * entries b and b+1 must already be known to be in order and in range. */
static int check_seq(const lowp_kv_page_table *pt, size_t num_pages, size_t page_size, size_t b,
                     unsigned char *seen, char *why, size_t why_len)
{
    int32_t lo = pt->indptr[b], hi = pt->indptr[b + 1];
    int32_t last = pt->last_page_len[b];
    int rc = 0;
    for (int32_t j = lo; j < hi && rc == 0; j++) {
        int32_t p = pt->indices[j];
        if (p < 0 || (size_t)p >= num_pages)
            rc = lowp_why_set(
                why, why_len,
                "pt.indices[%d] = %d (sequence %zu) is outside [0, %zu), the cache's pages", (int)j,
                (int)p, b, num_pages);
        else if (seen) {
            if (seen[p])
                rc = lowp_why_set(why, why_len,
                                  "pt.indices[%d] = %d repeats a page already used by sequence %zu",
                                  (int)j, (int)p, b);
            seen[p] = 1;
        }
    }
    if (seen) /* clear what this sequence marked */
        for (int32_t j = lo; j < hi; j++) {
            int32_t p = pt->indices[j];
            if (p >= 0 && (size_t)p < num_pages)
                seen[p] = 0;
        }
    if (rc)
        return rc;
    if (hi == lo) {
        if (last != 0)
            return lowp_why_set(
                why, why_len,
                "pt.last_page_len[%zu] = %d but sequence %zu has no pages (it must be 0)", b,
                (int)last, b);
    } else if (last < 1 || (size_t)last > page_size) {
        return lowp_why_set(why, why_len,
                            "pt.last_page_len[%zu] = %d is outside [1, page_size = %zu]", b,
                            (int)last, page_size);
    }
    return 0;
}

static int check_pt_head(const lowp_kv_page_table *pt, size_t page_size, char *why, size_t why_len)
{
    if (!pt)
        return lowp_why_set(why, why_len, "pt is NULL");
    if (page_size == 0)
        return lowp_why_set(why, why_len, "page_size is 0");
    if (!pt->indptr)
        return lowp_why_set(why, why_len, "pt.indptr is NULL");
    if (pt->batch > 0 && !pt->last_page_len)
        return lowp_why_set(why, why_len, "pt.last_page_len is NULL");
    if (pt->indptr[0] != 0)
        return lowp_why_set(why, why_len, "pt.indptr[0] = %d, not 0", (int)pt->indptr[0]);
    if (pt->batch > 0 && pt->indptr[pt->batch] > 0 && !pt->indices)
        return lowp_why_set(why, why_len, "pt.indices is NULL but pt.indptr[batch] = %d",
                            (int)pt->indptr[pt->batch]);
    return 0;
}

int lowp_kv_page_table_check(const lowp_kv_page_table *pt, size_t num_pages, size_t page_size,
                             char *why, size_t why_len)
{
    if (check_pt_head(pt, page_size, why, why_len))
        return -1;
    for (size_t b = 0; b < pt->batch; b++)
        if (pt->indptr[b + 1] < pt->indptr[b])
            return lowp_why_set(why, why_len,
                                "pt.indptr[%zu] = %d is less than pt.indptr[%zu] = %d", b + 1,
                                (int)pt->indptr[b + 1], b, (int)pt->indptr[b]);
    unsigned char *seen = calloc(num_pages ? num_pages : 1, 1);
    if (!seen)
        return lowp_why_set(why, why_len, "out of memory checking the page table");
    int rc = 0;
    for (size_t b = 0; b < pt->batch && rc == 0; b++)
        rc = check_seq(pt, num_pages, page_size, b, seen, why, why_len);
    free(seen);
    return rc;
}

/* The checks one sequence's reader or writer needs, without touching the others. */
static int check_one(const lowp_kv_page_table *pt, size_t num_pages, size_t page_size, size_t b,
                     char *why, size_t why_len)
{
    if (check_pt_head(pt, page_size, why, why_len))
        return -1;
    if (b >= pt->batch)
        return lowp_why_set(why, why_len, "sequence b = %zu is not below pt.batch = %zu", b,
                            pt->batch);
    if (pt->indptr[b] < 0)
        return lowp_why_set(why, why_len, "pt.indptr[%zu] = %d is negative", b, (int)pt->indptr[b]);
    if (pt->indptr[b + 1] < pt->indptr[b])
        return lowp_why_set(why, why_len, "pt.indptr[%zu] = %d is less than pt.indptr[%zu] = %d",
                            b + 1, (int)pt->indptr[b + 1], b, (int)pt->indptr[b]);
    return check_seq(pt, num_pages, page_size, b, NULL, why, why_len);
}

size_t lowp_kv_seq_len(const lowp_kv_page_table *pt, size_t page_size, size_t b)
{
    size_t n = (size_t)(pt->indptr[b + 1] - pt->indptr[b]);
    return n == 0 ? 0 : page_size * (n - 1) + (size_t)pt->last_page_len[b];
}

int lowp_kv_locate(const lowp_kv_page_table *pt, size_t page_size, size_t b, size_t pos,
                   size_t *page, size_t *slot, char *why, size_t why_len)
{
    if (!pt || !pt->indptr || b >= pt->batch)
        return lowp_why_set(why, why_len,
                            "sequence b = %zu is not in the page table (pt.batch = %zu)", b,
                            pt ? pt->batch : 0);
    size_t len = lowp_kv_seq_len(pt, page_size, b);
    if (pos >= len)
        return lowp_why_set(why, why_len, "pos %zu is past the end of sequence %zu (length %zu)",
                            pos, b, len);
    *page = (size_t)pt->indices[pt->indptr[b] + (int32_t)(pos / page_size)];
    *slot = pos % page_size;
    return 0;
}

/* ---- interleave ----------------------------------------------------------------- */

void lowp_kv_sf_interleave(size_t t, size_t s, size_t S, size_t *t_out, size_t *s_out)
{
    size_t q = S / 4; /* scales per 4-token group row */
    *t_out = (t / 4) * 4 + s / q;
    *s_out = (s % q) * 4 + t % 4;
}

void lowp_kv_sf_deinterleave(size_t t, size_t s, size_t S, size_t *t_out, size_t *s_out)
{
    /* flat = (t/4)*4*S + s_orig*4 + t%4 with flat = t*S + s: invert the flat index */
    size_t flat_in_group = (t % 4) * S + s; /* = s_orig*4 + t_orig%4 */
    *t_out = (t / 4) * 4 + flat_in_group % 4;
    *s_out = flat_in_group / 4;
}

/* ---- the cache ---------------------------------------------------------------------- */

int lowp_kvcache_create(const lowp_kv_config *cfg, lowp_kvcache **out, char *why, size_t why_len)
{
    if (!out)
        return lowp_why_set(why, why_len, "out is NULL");
    *out = NULL;
    if (lowp_kv_config_check(cfg, why, why_len))
        return -1;
    lowp_kvcache *c = calloc(1, sizeof *c);
    if (!c)
        return lowp_why_set(why, why_len, "out of memory allocating the cache");
    c->cfg = *cfg;
    size_t rows = cfg->num_pages * cfg->page_size * cfg->num_heads; /* checked above */
    size_t max_rb = 0, max_S = 0;
    for (int w = 0; w < 2; w++) {
        c->dim[w] = cfg_dim(cfg, (lowp_kv_which)w);
        c->rb[w] = lowp_kv_row_code_bytes(cfg, (lowp_kv_which)w);
        c->S[w] = lowp_kv_row_scales(cfg, (lowp_kv_which)w);
        c->code_bytes[w] = rows * c->rb[w];
        c->scale_bytes[w] = rows * c->S[w];
        c->codes[w] = malloc(c->code_bytes[w]);
        c->scales[w] = c->scale_bytes[w] ? malloc(c->scale_bytes[w]) : NULL;
        c->gs[w] = malloc(cfg->num_heads * sizeof(float));
        if (!c->codes[w] || (c->scale_bytes[w] && !c->scales[w]) || !c->gs[w]) {
            lowp_kvcache_destroy(c);
            return lowp_why_set(why, why_len, "out of memory allocating %zu code bytes for %s",
                                c->code_bytes[w], which_names[w]);
        }
        for (size_t h = 0; h < cfg->num_heads; h++)
            c->gs[w][h] = 1.0f; /* uncalibrated default everywhere (ref/notes/kernels.md 0.5) */
        if (c->rb[w] > max_rb)
            max_rb = c->rb[w];
        if (c->S[w] > max_S)
            max_S = c->S[w];
    }
    /* room for K and V of one token: both are quantized before either is placed */
    c->tmp_codes = malloc(2 * cfg->num_heads * max_rb);
    c->tmp_scales = malloc(2 * cfg->num_heads * (max_S ? max_S : 1));
    if (!c->tmp_codes || !c->tmp_scales) {
        lowp_kvcache_destroy(c);
        return lowp_why_set(why, why_len, "out of memory allocating write scratch");
    }
    lowp_format ef = lowp_block_element_format(cfg->format);
    if (lowp_format_bits(ef) <= 8)
        for (unsigned i = 0; i < lowp_format_code_count(ef); i++)
            c->elem_val[i] = lowp_decode_f64(ef, (uint16_t)i);
    for (unsigned i = 0; i < 256; i++)
        c->scale_val[i] = lowp_block_has_scales(cfg->format)
                              ? lowp_decode_f64(cfg->format == LOWP_NVFP4 ? LOWP_E4M3 : LOWP_E8M0,
                                                (uint16_t)i)
                              : 1.0;
    lowp_kvcache_poison(c, LOWP_KV_POISON);
    *out = c;
    return 0;
}

void lowp_kvcache_destroy(lowp_kvcache *c)
{
    if (!c)
        return;
    for (int w = 0; w < 2; w++) {
        free(c->codes[w]);
        free(c->scales[w]);
        free(c->gs[w]);
    }
    free(c->tmp_codes);
    free(c->tmp_scales);
    free(c);
}

const lowp_kv_config *lowp_kvcache_config(const lowp_kvcache *c)
{
    return &c->cfg;
}

lowp_kv_view lowp_kvcache_view(const lowp_kvcache *c)
{
    return lowp_kv_view_of(&c->cfg);
}

int lowp_kvcache_check_view(const lowp_kvcache *c, const lowp_kv_view *view, char *why,
                            size_t why_len)
{
    if (!c)
        return lowp_why_set(why, why_len, "cache is NULL");
    if (!view)
        return lowp_why_set(why, why_len,
                            "view is NULL (a reader must state the layout it expects)");
    lowp_kv_view s = lowp_kvcache_view(c);
    if (view->format != s.format)
        return lowp_why_set(why, why_len, "view.format is %s but the cache was written %s",
                            lowp_block_format_name(view->format), lowp_block_format_name(s.format));
    if (view->layout != s.layout)
        return lowp_why_set(why, why_len, "view.layout is %s but the cache was written %s",
                            lowp_kv_layout_name(view->layout), lowp_kv_layout_name(s.layout));
    if (view->k_sf_order != s.k_sf_order)
        return lowp_why_set(why, why_len, "view.k_sf_order is %s but the cache was written %s",
                            lowp_kv_sf_order_name(view->k_sf_order),
                            lowp_kv_sf_order_name(s.k_sf_order));
    if (view->v_sf_order != s.v_sf_order)
        return lowp_why_set(why, why_len, "view.v_sf_order is %s but the cache was written %s",
                            lowp_kv_sf_order_name(view->v_sf_order),
                            lowp_kv_sf_order_name(s.v_sf_order));
    if (view->scale_gran != s.scale_gran)
        return lowp_why_set(why, why_len, "view.scale_gran is %s but the cache was written per %s",
                            lowp_kv_scale_gran_name(view->scale_gran),
                            lowp_kv_scale_gran_name(s.scale_gran));
    if (view->page_size != s.page_size)
        return lowp_why_set(why, why_len,
                            "view.page_size is %zu but the cache was written with %zu",
                            view->page_size, s.page_size);
    if (view->num_heads != s.num_heads)
        return lowp_why_set(why, why_len,
                            "view.num_heads is %zu but the cache was written with %zu",
                            view->num_heads, s.num_heads);
    if (view->qk_dim != s.qk_dim)
        return lowp_why_set(why, why_len, "view.qk_dim is %zu but the cache was written with %zu",
                            view->qk_dim, s.qk_dim);
    if (view->vo_dim != s.vo_dim)
        return lowp_why_set(why, why_len, "view.vo_dim is %zu but the cache was written with %zu",
                            view->vo_dim, s.vo_dim);
    return 0;
}

void lowp_kvcache_poison(lowp_kvcache *c, uint8_t byte)
{
    for (int w = 0; w < 2; w++) {
        memset(c->codes[w], byte, c->code_bytes[w]);
        if (c->scales[w])
            memset(c->scales[w], byte, c->scale_bytes[w]);
    }
}

int lowp_kvcache_set_global_scales(lowp_kvcache *c, const float *k, const float *v, size_t n,
                                   char *why, size_t why_len)
{
    if (!c)
        return lowp_why_set(why, why_len, "cache is NULL");
    size_t H = c->cfg.num_heads;
    size_t want = c->cfg.scale_gran == LOWP_KV_SCALE_HEAD ? H : 1;
    if (n != want)
        return lowp_why_set(
            why, why_len,
            "n = %zu global scales given but the cache keeps %zu per side (scale_gran %s)", n, want,
            lowp_kv_scale_gran_name(c->cfg.scale_gran));
    int has = lowp_block_has_global_scale(c->cfg.format);
    const float *src[2] = {k, v};
    for (int w = 0; w < 2; w++) {
        if (!src[w])
            continue;
        for (size_t i = 0; i < n; i++) {
            float g = src[w][i];
            if (!(isfinite(g) && g > 0.0f))
                return lowp_why_set(why, why_len, "%s[%zu] = %g is not a finite positive scale",
                                    which_names[w], i, (double)g);
            if (!has && g != 1.0f)
                return lowp_why_set(
                    why, why_len, "%s[%zu] = %g but %s has no global scale (only 1.0)",
                    which_names[w], i, (double)g, lowp_block_format_name(c->cfg.format));
        }
    }
    for (int w = 0; w < 2; w++) {
        if (!src[w])
            continue;
        for (size_t h = 0; h < H; h++)
            c->gs[w][h] = src[w][n == 1 ? 0 : h];
    }
    return 0;
}

float lowp_kvcache_global_scale(const lowp_kvcache *c, lowp_kv_which w, size_t head)
{
    return c->gs[w][head];
}

size_t lowp_kvcache_code_offset(const lowp_kvcache *c, lowp_kv_which w, size_t page, size_t slot,
                                size_t head)
{
    size_t P = c->cfg.page_size, H = c->cfg.num_heads;
    size_t row = c->cfg.layout == LOWP_KV_NHD ? (page * P + slot) * H + head
                                              : (page * H + head) * P + slot;
    return row * c->rb[w];
}

size_t lowp_kvcache_scale_offset(const lowp_kvcache *c, lowp_kv_which w, size_t page, size_t slot,
                                 size_t head, size_t s)
{
    size_t P = c->cfg.page_size, H = c->cfg.num_heads, S = c->S[w];
    size_t t = slot, u = s;
    if (cfg_order(&c->cfg, w) == LOWP_KV_SF_INTERLEAVE4)
        lowp_kv_sf_interleave(slot, s, S, &t, &u);
    size_t row = c->cfg.layout == LOWP_KV_NHD ? (page * P + t) * H + head : (page * H + head) * P + t;
    return row * S + u;
}

static int check_slot(const lowp_kvcache *c, size_t page, size_t slot, char *why, size_t why_len)
{
    if (page >= c->cfg.num_pages)
        return lowp_why_set(why, why_len, "page %zu is not below num_pages = %zu", page,
                            c->cfg.num_pages);
    if (slot >= c->cfg.page_size)
        return lowp_why_set(why, why_len, "slot %zu is not below page_size = %zu", slot,
                            c->cfg.page_size);
    return 0;
}

int lowp_kvcache_write(lowp_kvcache *c, size_t page, size_t slot, const float *k, const float *v,
                       lowp_quant_counts *k_counts, lowp_quant_counts *v_counts, char *why,
                       size_t why_len)
{
    if (!c)
        return lowp_why_set(why, why_len, "cache is NULL");
    if (check_slot(c, page, slot, why, why_len))
        return -1;
    const float *x[2] = {k, v};
    if (!k || !v)
        return lowp_why_set(why, why_len, "%s is NULL", !k ? "k" : "v");
    lowp_block_format f = c->cfg.format;
    lowp_recipe r = c->cfg.recipe;
    size_t H = c->cfg.num_heads;
    lowp_quant_counts cnt[2];
    memset(cnt, 0, sizeof cnt);
    /* Quantize K and V into scratch first, so that a refused write leaves the page as it
     * was; then place the bytes. */
    uint8_t *tc[2], *ts[2];
    size_t max_rb = c->rb[0] > c->rb[1] ? c->rb[0] : c->rb[1];
    size_t max_S = c->S[0] > c->S[1] ? c->S[0] : c->S[1];
    for (int w = 0; w < 2; w++) {
        tc[w] = c->tmp_codes + (size_t)w * H * max_rb;
        ts[w] = c->tmp_scales + (size_t)w * H * (max_S ? max_S : 1);
        size_t d = c->dim[w];
        if (c->cfg.scale_gran == LOWP_KV_SCALE_TENSOR) {
            /* one call for all heads: the token's [H][d] row is contiguous and blocks never
             * straddle heads (d is a multiple of the block size) */
            lowp_global_scale gs = lowp_global_scale_from_dec(f, r, c->gs[w][0]);
            if (lowp_block_quantize(f, r, gs, c->cfg.quant_flags, x[w], H * d, tc[w],
                                    c->S[w] ? ts[w] : NULL, &cnt[w], why, why_len))
                return -1;
        } else {
            for (size_t h = 0; h < H; h++) {
                lowp_global_scale gs = lowp_global_scale_from_dec(f, r, c->gs[w][h]);
                if (lowp_block_quantize(f, r, gs, c->cfg.quant_flags, x[w] + h * d, d,
                                        tc[w] + h * c->rb[w], c->S[w] ? ts[w] + h * c->S[w] : NULL,
                                        &cnt[w], why, why_len))
                    return -1;
            }
        }
    }
    for (int w = 0; w < 2; w++) {
        for (size_t h = 0; h < H; h++) {
            memcpy(c->codes[w] + lowp_kvcache_code_offset(c, (lowp_kv_which)w, page, slot, h),
                   tc[w] + h * c->rb[w], c->rb[w]);
            for (size_t s = 0; s < c->S[w]; s++)
                c->scales[w][lowp_kvcache_scale_offset(c, (lowp_kv_which)w, page, slot, h, s)] =
                    ts[w][h * c->S[w] + s];
        }
    }
    lowp_quant_counts_add(k_counts, &cnt[0]);
    lowp_quant_counts_add(v_counts, &cnt[1]);
    lowp_quant_counts_add(&c->counts[0], &cnt[0]);
    lowp_quant_counts_add(&c->counts[1], &cnt[1]);
    c->tokens_written++;
    return 0;
}

int lowp_kvcache_write_pos(lowp_kvcache *c, const lowp_kv_page_table *pt, size_t b, size_t pos,
                           const float *k, const float *v, lowp_quant_counts *k_counts,
                           lowp_quant_counts *v_counts, char *why, size_t why_len)
{
    if (!c)
        return lowp_why_set(why, why_len, "cache is NULL");
    if (check_one(pt, c->cfg.num_pages, c->cfg.page_size, b, why, why_len))
        return -1;
    size_t page, slot;
    if (lowp_kv_locate(pt, c->cfg.page_size, b, pos, &page, &slot, why, why_len))
        return -1;
    return lowp_kvcache_write(c, page, slot, k, v, k_counts, v_counts, why, why_len);
}

const lowp_quant_counts *lowp_kvcache_counts(const lowp_kvcache *c, lowp_kv_which w)
{
    return &c->counts[w];
}

size_t lowp_kvcache_tokens_written(const lowp_kvcache *c)
{
    return c->tokens_written;
}

/* Logical scales of one row into dst[S] (de-interleaved). */
static void row_scales(const lowp_kvcache *c, lowp_kv_which w, size_t page, size_t slot,
                       size_t head, uint8_t *dst)
{
    for (size_t s = 0; s < c->S[w]; s++)
        dst[s] = c->scales[w][lowp_kvcache_scale_offset(c, w, page, slot, head, s)];
}

/* Exact dequantization of one row; scratch holds S bytes. The same value as
 * lowp_block_dequantize_f64 (element * block scale * global scale, binary64, each product
 * exact), computed from the code tables; the tests hold the two equal bit for bit. */
static void read_row(const lowp_kvcache *c, lowp_kv_which w, size_t page, size_t slot, size_t head,
                     uint8_t *scratch, double *out)
{
    const uint8_t *codes = c->codes[w] + lowp_kvcache_code_offset(c, w, page, slot, head);
    lowp_block_format f = c->cfg.format;
    size_t d = c->dim[w];
    double g = lowp_block_has_global_scale(f) ? (double)c->gs[w][head] : 1.0;
    if (c->S[w])
        row_scales(c, w, page, slot, head, scratch);
    switch (f) {
    case LOWP_BF16_PASS:
        for (size_t i = 0; i < d; i++) {
            float v = lowp_f32_from_bf16((uint16_t)(codes[2 * i] | (codes[2 * i + 1] << 8)));
            out[i] = (double)v * 1.0 * g;
        }
        break;
    case LOWP_NVFP4:
    case LOWP_MXFP4: {
        size_t bs = lowp_block_size(f);
        for (size_t i = 0; i < d; i++) {
            unsigned code = (codes[i / 2] >> (4 * (i & 1))) & 0xfu; /* even element: low nibble */
            out[i] = c->elem_val[code] * c->scale_val[scratch[i / bs]] * g;
        }
        break;
    }
    case LOWP_MXFP8:
        for (size_t i = 0; i < d; i++)
            out[i] = c->elem_val[codes[i]] * c->scale_val[scratch[i / 32]] * g;
        break;
    default: /* FP8 per tensor / per head */
        for (size_t i = 0; i < d; i++)
            out[i] = c->elem_val[codes[i]] * 1.0 * g;
        break;
    }
}

static uint8_t *scale_scratch(const lowp_kvcache *c)
{
    size_t m = c->S[0] > c->S[1] ? c->S[0] : c->S[1];
    return malloc(m ? m : 1);
}

int lowp_kvcache_read(const lowp_kvcache *c, const lowp_kv_view *view, size_t page, size_t slot,
                      double *k, double *v, char *why, size_t why_len)
{
    if (lowp_kvcache_check_view(c, view, why, why_len) || check_slot(c, page, slot, why, why_len))
        return -1;
    uint8_t *scratch = scale_scratch(c);
    if (!scratch)
        return lowp_why_set(why, why_len, "out of memory");
    double *out[2] = {k, v};
    for (int w = 0; w < 2; w++)
        if (out[w])
            for (size_t h = 0; h < c->cfg.num_heads; h++)
                read_row(c, (lowp_kv_which)w, page, slot, h, scratch, out[w] + h * c->dim[w]);
    free(scratch);
    return 0;
}

int lowp_kvcache_read_row_bytes(const lowp_kvcache *c, const lowp_kv_view *view, lowp_kv_which w,
                                size_t page, size_t slot, size_t head, uint8_t *codes,
                                uint8_t *scales, char *why, size_t why_len)
{
    if (lowp_kvcache_check_view(c, view, why, why_len) || check_slot(c, page, slot, why, why_len))
        return -1;
    if ((unsigned)w > LOWP_KV_V)
        return lowp_why_set(why, why_len, "w %d is neither k nor v", (int)w);
    if (head >= c->cfg.num_heads)
        return lowp_why_set(why, why_len, "head %zu is not below num_heads = %zu", head,
                            c->cfg.num_heads);
    if (codes)
        memcpy(codes, c->codes[w] + lowp_kvcache_code_offset(c, w, page, slot, head), c->rb[w]);
    if (scales)
        row_scales(c, w, page, slot, head, scales);
    return 0;
}

int lowp_kvcache_gather(const lowp_kvcache *c, const lowp_kv_view *view,
                        const lowp_kv_page_table *pt, size_t b, size_t len, double *k, double *v,
                        char *why, size_t why_len)
{
    size_t H = c ? c->cfg.num_heads : 0;
    return lowp_kvcache_gather_range(c, view, pt, b, 0, len, 0, H, k, v, why, why_len);
}

int lowp_kvcache_gather_range(const lowp_kvcache *c, const lowp_kv_view *view,
                              const lowp_kv_page_table *pt, size_t b, size_t pos0, size_t len,
                              size_t h0, size_t nh, double *k, double *v, char *why,
                              size_t why_len)
{
    if (lowp_kvcache_check_view(c, view, why, why_len))
        return -1;
    if (check_one(pt, c->cfg.num_pages, c->cfg.page_size, b, why, why_len))
        return -1;
    size_t have = lowp_kv_seq_len(pt, c->cfg.page_size, b);
    if (pos0 > have || len > have - pos0)
        return lowp_why_set(why, why_len,
                            "len %zu from position %zu is past the end of sequence %zu (length %zu)",
                            len, pos0, b, have);
    if (h0 > c->cfg.num_heads || nh > c->cfg.num_heads - h0)
        return lowp_why_set(why, why_len, "heads %zu..%zu run past num_heads = %zu", h0, h0 + nh,
                            c->cfg.num_heads);
    uint8_t *scratch = scale_scratch(c);
    if (!scratch)
        return lowp_why_set(why, why_len, "out of memory");
    size_t P = c->cfg.page_size;
    double *out[2] = {k, v};
    for (size_t j = 0; j < len; j++) {
        size_t pos = pos0 + j;
        size_t page = (size_t)pt->indices[pt->indptr[b] + (int32_t)(pos / P)], slot = pos % P;
        for (int w = 0; w < 2; w++)
            if (out[w])
                for (size_t h = 0; h < nh; h++)
                    read_row(c, (lowp_kv_which)w, page, slot, h0 + h, scratch,
                             out[w] + (j * nh + h) * c->dim[w]);
    }
    free(scratch);
    return 0;
}

int lowp_kvcache_copy_page(lowp_kvcache *c, size_t src, size_t dst, char *why, size_t why_len)
{
    if (!c)
        return lowp_why_set(why, why_len, "cache is NULL");
    if (src >= c->cfg.num_pages)
        return lowp_why_set(why, why_len, "src page %zu is not below num_pages = %zu", src,
                            c->cfg.num_pages);
    if (dst >= c->cfg.num_pages)
        return lowp_why_set(why, why_len, "dst page %zu is not below num_pages = %zu", dst,
                            c->cfg.num_pages);
    if (src == dst)
        return 0;
    /* Both layouts are page-major: a page is one contiguous run of page_size * num_heads
     * rows in every buffer, and the interleave permutes only within it. */
    size_t rows = c->cfg.page_size * c->cfg.num_heads;
    for (int w = 0; w < 2; w++) {
        memcpy(c->codes[w] + dst * rows * c->rb[w], c->codes[w] + src * rows * c->rb[w],
               rows * c->rb[w]);
        if (c->S[w])
            memcpy(c->scales[w] + dst * rows * c->S[w], c->scales[w] + src * rows * c->S[w],
                   rows * c->S[w]);
    }
    return 0;
}

uint8_t *lowp_kvcache_buffer(lowp_kvcache *c, lowp_kv_which w, lowp_kv_part p, size_t *bytes)
{
    if (p == LOWP_KV_CODES) {
        if (bytes)
            *bytes = c->code_bytes[w];
        return c->codes[w];
    }
    if (bytes)
        *bytes = c->scale_bytes[w];
    return c->scales[w];
}

const uint8_t *lowp_kvcache_cbuffer(const lowp_kvcache *c, lowp_kv_which w, lowp_kv_part p,
                                    size_t *bytes)
{
    if (bytes)
        *bytes = p == LOWP_KV_CODES ? c->code_bytes[w] : c->scale_bytes[w];
    return p == LOWP_KV_CODES ? c->codes[w] : c->scales[w];
}
