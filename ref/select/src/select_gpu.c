/* ref/select/src/select_gpu.c: the storage the sparse-selection GPU kernels share with the
 * CPU (lowp/select_gpu.h gives the definitions). */
#include <stdlib.h>
#include <string.h>

#include "lowp/attn_gpu_emul.h"
#include "lowp/format.h"
#include "lowp/select_gpu.h"
#include "lowp/why.h"

lowp_block_format lowp_qsa_keycache_format(lowp_qsa_keys k)
{
    switch (k) {
    case LOWP_QSA_KEYS_BF16: return LOWP_BF16_PASS;
    case LOWP_QSA_KEYS_E4M3: return LOWP_FP8_E4M3;
    case LOWP_QSA_KEYS_NVFP4: return LOWP_NVFP4;
    case LOWP_QSA_KEYS_MXFP4: return LOWP_MXFP4;
    default: return LOWP_MXFP8;
    }
}

size_t lowp_qsa_keycache_row_bytes(const lowp_qsa_config *c)
{
    return lowp_block_code_bytes(lowp_qsa_keycache_format(c->keys), c->head_dim);
}

size_t lowp_qsa_keycache_row_scales(const lowp_qsa_config *c)
{
    if (c->keys == LOWP_QSA_KEYS_BF16 || c->keys == LOWP_QSA_KEYS_E4M3)
        return 0;
    return c->head_dim / lowp_block_size(lowp_qsa_keycache_format(c->keys));
}

int lowp_qsa_keycache_bytes(const lowp_qsa_config *c, const float *k, size_t seq_len, const float *wk,
                            uint8_t *codes, uint8_t *scales, char *why, size_t wl)
{
    if (c == NULL)
        return lowp_why_set(why, wl, "QSA key cache: NULL configuration");
    lowp_qsa_config cb = *c;
    cb.keys = LOWP_QSA_KEYS_BF16; /* the BF16 rows, before the key format */
    size_t d = c->head_dim, nb = seq_len / (c->ratio ? c->ratio : 1);
    size_t rb = lowp_qsa_keycache_row_bytes(c), rs = lowp_qsa_keycache_row_scales(c);
    if (rs && scales == NULL)
        return lowp_why_set(why, wl, "QSA key cache: NULL scales for %s keys",
                            lowp_block_format_name(lowp_qsa_keycache_format(c->keys)));
    double *kb = malloc((nb * d + 1) * sizeof *kb);
    float *row = malloc((d + 1) * sizeof *row);
    int rc = kb && row ? 0 : lowp_why_set(why, wl, "QSA key cache: out of memory for %zu blocks", nb);
    if (rc == 0)
        rc = lowp_qsa_compress(&cb, k, seq_len, wk, kb, NULL, why, wl);
    lowp_codec e4m3; /* torch's float8_e4m3fn cast: nearest even, no saturation */
    if (rc == 0 && c->keys == LOWP_QSA_KEYS_E4M3)
        rc = lowp_codec_init(&e4m3, LOWP_E4M3, LOWP_PROFILE_TORCH, LOWP_RN, 0, why, wl);
    for (size_t b = 0; rc == 0 && b < nb; b++) {
        uint8_t *o = codes + b * rb;
        for (size_t i = 0; i < d; i++)
            row[i] = (float)kb[b * d + i]; /* a BF16 value: exact */
        if (c->keys == LOWP_QSA_KEYS_BF16) {
            for (size_t i = 0; i < d; i++) {
                uint16_t h = lowp_bf16_from_f32(row[i]);
                o[2 * i] = (uint8_t)(h & 0xffu);
                o[2 * i + 1] = (uint8_t)(h >> 8);
            }
        } else if (c->keys == LOWP_QSA_KEYS_E4M3) {
            for (size_t i = 0; i < d; i++)
                o[i] = (uint8_t)lowp_encode_f32(&e4m3, row[i]);
        } else {
            rc = lowp_block_quantize(lowp_qsa_keycache_format(c->keys), c->recipe, c->gs, 0, row, d, o,
                                     scales + b * rs, NULL, why, wl);
        }
    }
    free(kb);
    free(row);
    return rc;
}

int lowp_qsa_rope_blocks(const lowp_qsa_config *c, size_t nblocks, float *table, char *why, size_t wl)
{
    if (c == NULL)
        return lowp_why_set(why, wl, "QSA RoPE table: NULL configuration");
    size_t h = c->rotary_dim / 2;
    float *cs = malloc((2 * h + 1) * sizeof *cs);
    if (cs == NULL)
        return lowp_why_set(why, wl, "QSA RoPE table: out of memory");
    int rc = 0;
    for (size_t b = 0; rc == 0 && b < nblocks; b++) {
        rc = lowp_qsa_rope_table(c, b * c->ratio, cs, cs + h, why, wl);
        for (size_t i = 0; rc == 0 && i < h; i++) {
            table[(b * h + i) * 2] = cs[i];
            table[(b * h + i) * 2 + 1] = cs[h + i];
        }
    }
    free(cs);
    return rc;
}

int lowp_select_gather_config(const lowp_kv_config *m, lowp_kv_config *v, char *why, size_t wl)
{
    if (m == NULL || v == NULL)
        return lowp_why_set(why, wl, "gather view: NULL configuration");
    if (lowp_kv_config_check(m, why, wl))
        return -1;
    if (m->layout == LOWP_KV_HND && m->page_size > 1)
        return lowp_why_set(why, wl, "gather view: an HND cache with pages of %zu tokens has no page-size-1 view "
                                     "(a token's rows are not adjacent)", m->page_size);
    if (m->k_sf_order != LOWP_KV_SF_LINEAR || m->v_sf_order != LOWP_KV_SF_LINEAR)
        return lowp_why_set(why, wl, "gather view: interleaved block scales have no page-size-1 view");
    if (m->num_pages > SIZE_MAX / m->page_size)
        return lowp_why_set(why, wl, "gather view: %zu pages of %zu tokens overflow", m->num_pages, m->page_size);
    *v = *m;
    v->num_pages = m->num_pages * m->page_size;
    v->page_size = 1;
    return lowp_kv_config_check(v, why, wl);
}

int lowp_select_gather_rows(const lowp_kv_page_table *pt, size_t page_size, size_t b, const int32_t *tokens,
                            size_t n, int32_t *rows, char *why, size_t wl)
{
    for (size_t i = 0; i < n; i++) {
        size_t page, slot;
        if (tokens[i] < 0)
            return lowp_why_set(why, wl, "gather: token %d at %zu is negative", (int)tokens[i], i);
        if (lowp_kv_locate(pt, page_size, b, (size_t)tokens[i], &page, &slot, why, wl))
            return -1;
        size_t r = page * page_size + slot;
        if (r > (size_t)INT32_MAX)
            return lowp_why_set(why, wl, "gather: row %zu of token %d beyond int32", r, (int)tokens[i]);
        rows[i] = (int32_t)r;
    }
    return 0;
}

int lowp_select_gather_cache(const lowp_kvcache *m, lowp_kvcache **view, char *why, size_t wl)
{
    *view = NULL;
    lowp_kv_config vc;
    const lowp_kv_config *mc = lowp_kvcache_config(m);
    if (lowp_select_gather_config(mc, &vc, why, wl) || lowp_kvcache_create(&vc, view, why, wl))
        return -1;
    size_t ng = mc->scale_gran == LOWP_KV_SCALE_HEAD ? mc->num_heads : 1;
    float *g = malloc(2 * ng * sizeof *g);
    if (g == NULL) {
        lowp_kvcache_destroy(*view);
        *view = NULL;
        return lowp_why_set(why, wl, "gather view: out of memory");
    }
    for (size_t h = 0; h < ng; h++) {
        g[h] = lowp_kvcache_global_scale(m, LOWP_KV_K, h);
        g[ng + h] = lowp_kvcache_global_scale(m, LOWP_KV_V, h);
    }
    int rc = lowp_kvcache_set_global_scales(*view, g, g + ng, ng, why, wl);
    free(g);
    for (int w = 0; rc == 0 && w < 2; w++)
        for (int p = 0; p < 2; p++) {
            size_t nm = 0, nv = 0;
            const uint8_t *src = lowp_kvcache_cbuffer(m, (lowp_kv_which)w, (lowp_kv_part)p, &nm);
            uint8_t *dst = lowp_kvcache_buffer(*view, (lowp_kv_which)w, (lowp_kv_part)p, &nv);
            if (src == NULL && dst == NULL)
                continue;
            if (src == NULL || dst == NULL || nm != nv) {
                rc = lowp_why_set(why, wl, "gather view: buffer sizes %zu and %zu differ", nm, nv);
                break;
            }
            memcpy(dst, src, nm);
        }
    if (rc) {
        lowp_kvcache_destroy(*view);
        *view = NULL;
    }
    return rc;
}
