/* gpu/kernels/kvcache_gpu.cu: the GPU paged KV cache's storage (lowp/gpu_kvcache.h): allocation
 * and poisoning like lowp_kvcache_create, global scales like
 * lowp_kvcache_set_global_scales, and byte-for-byte upload/download against a CPU cache.
 *
 * Invariants: the four buffers have exactly the byte counts of the CPU cache's
 * (lowp_kvcache_buffer) for the same config: rows * row bytes with rows = num_pages *
 * page_size * num_heads, and rows * S for the block scales (NULL and 0 without them);
 * k_global/v_global hold n_global floats on the device, mirrored in the host copies, set
 * only through lowp_gpu_kvcache_set_global_scales (or upload). Every CUDA call is checked;
 * a failure gives -1 and names the call. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "lowp/gpu_kvcache.h"
#include "lowp/why.h"

#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess)                                                                     \
            return lowp_why_set(why, why_len, "%s failed: %s (%s)", #call, cudaGetErrorName(e_),   \
                                cudaGetErrorString(e_));                                           \
    } while (0)

/* Byte counts a config implies (cfg checked): the CPU cache's buffer sizes. */
static void expected_bytes(const lowp_kv_config *cfg, size_t codes[2], size_t scales[2],
                           size_t *n_global)
{
    size_t rows = cfg->num_pages * cfg->page_size * cfg->num_heads; /* no overflow: checked */
    for (int w = 0; w < 2; w++) {
        codes[w] = rows * lowp_kv_row_code_bytes(cfg, (lowp_kv_which)w);
        scales[w] = rows * lowp_kv_row_scales(cfg, (lowp_kv_which)w);
    }
    *n_global = cfg->scale_gran == LOWP_KV_SCALE_HEAD ? cfg->num_heads : 1;
}

/* Field-by-field equality of two configs; -1 naming the first that differs. */
static int config_equal(const lowp_kv_config *a, const lowp_kv_config *b, char *why,
                        size_t why_len)
{
#define SAME(field, fmt, conv)                                                                     \
    if (a->field != b->field)                                                                      \
    return lowp_why_set(why, why_len,                                                              \
                        "config field " #field " differs: GPU cache " fmt ", CPU cache " fmt,      \
                        conv(a->field), conv(b->field))
    SAME(format, "%s", lowp_block_format_name);
    SAME(recipe, "%s", lowp_recipe_name);
    SAME(quant_flags, "%u", (unsigned));
    SAME(layout, "%s", lowp_kv_layout_name);
    SAME(k_sf_order, "%s", lowp_kv_sf_order_name);
    SAME(v_sf_order, "%s", lowp_kv_sf_order_name);
    SAME(scale_gran, "%s", lowp_kv_scale_gran_name);
    SAME(num_pages, "%zu", (size_t));
    SAME(page_size, "%zu", (size_t));
    SAME(num_heads, "%zu", (size_t));
    SAME(qk_dim, "%zu", (size_t));
    SAME(vo_dim, "%zu", (size_t));
#undef SAME
    return 0;
}

extern "C" int lowp_gpu_kvcache_check(const lowp_gpu_kvcache *c, char *why, size_t why_len)
{
    if (c == NULL)
        return lowp_why_set(why, why_len, "cache is NULL");
    char cw[256];
    if (lowp_kv_config_check(&c->cfg, cw, sizeof cw))
        return lowp_why_set(why, why_len, "cache config is invalid: %s", cw);
    size_t cb[2], sb[2], ng;
    expected_bytes(&c->cfg, cb, sb, &ng);
    const size_t have_cb[2] = {c->k_codes_bytes, c->v_codes_bytes};
    const size_t have_sb[2] = {c->k_scales_bytes, c->v_scales_bytes};
    const char *const wn[2] = {"k", "v"};
    for (int w = 0; w < 2; w++) {
        if (have_cb[w] != cb[w])
            return lowp_why_set(why, why_len,
                                "cache %s_codes_bytes is %zu but its config implies %zu (config "
                                "changed after create?)",
                                wn[w], have_cb[w], cb[w]);
        if (have_sb[w] != sb[w])
            return lowp_why_set(why, why_len,
                                "cache %s_scales_bytes is %zu but its config implies %zu (config "
                                "changed after create?)",
                                wn[w], have_sb[w], sb[w]);
    }
    if (c->n_global != ng)
        return lowp_why_set(
            why, why_len, "cache n_global is %zu but scale_gran %s with %zu heads implies %zu",
            c->n_global, lowp_kv_scale_gran_name(c->cfg.scale_gran), c->cfg.num_heads, ng);
    if (c->k_codes == NULL || c->v_codes == NULL)
        return lowp_why_set(why, why_len, "cache %s_codes is NULL", c->k_codes == NULL ? "k" : "v");
    if ((sb[0] != 0) != (c->k_scales != NULL))
        return lowp_why_set(why, why_len, "cache k_scales is %s but %s has %s",
                            c->k_scales ? "set" : "NULL", lowp_block_format_name(c->cfg.format),
                            sb[0] ? "block scales" : "no block scales");
    if ((sb[1] != 0) != (c->v_scales != NULL))
        return lowp_why_set(why, why_len, "cache v_scales is %s but %s has %s",
                            c->v_scales ? "set" : "NULL", lowp_block_format_name(c->cfg.format),
                            sb[1] ? "block scales" : "no block scales");
    if (c->k_global == NULL || c->v_global == NULL)
        return lowp_why_set(why, why_len, "cache %s_global is NULL",
                            c->k_global == NULL ? "k" : "v");
    if (c->k_global_host == NULL || c->v_global_host == NULL)
        return lowp_why_set(why, why_len, "cache %s_global_host is NULL",
                            c->k_global_host == NULL ? "k" : "v");
    return 0;
}

extern "C" void lowp_gpu_kvcache_destroy(lowp_gpu_kvcache *c)
{
    if (c == NULL)
        return;
    /* cudaFree of NULL is a no-op; errors here have nowhere to go (the memory is lost to
     * the process either way) */
    (void)cudaFree(c->k_codes);
    (void)cudaFree(c->v_codes);
    (void)cudaFree(c->k_scales);
    (void)cudaFree(c->v_scales);
    (void)cudaFree(c->k_global);
    (void)cudaFree(c->v_global);
    free(c->k_global_host);
    free(c->v_global_host);
    free(c);
}

/* create's body; on failure the caller destroys the partial cache. */
static int create_into(lowp_gpu_kvcache *c, char *why, size_t why_len)
{
    size_t cb[2], sb[2];
    expected_bytes(&c->cfg, cb, sb, &c->n_global);
    c->k_codes_bytes = cb[0];
    c->v_codes_bytes = cb[1];
    c->k_scales_bytes = sb[0];
    c->v_scales_bytes = sb[1];
    CK(cudaMalloc((void **)&c->k_codes, cb[0]));
    CK(cudaMalloc((void **)&c->v_codes, cb[1]));
    if (sb[0])
        CK(cudaMalloc((void **)&c->k_scales, sb[0]));
    if (sb[1])
        CK(cudaMalloc((void **)&c->v_scales, sb[1]));
    CK(cudaMalloc((void **)&c->k_global, c->n_global * sizeof(float)));
    CK(cudaMalloc((void **)&c->v_global, c->n_global * sizeof(float)));
    c->k_global_host = (float *)malloc(c->n_global * sizeof(float));
    c->v_global_host = (float *)malloc(c->n_global * sizeof(float));
    if (c->k_global_host == NULL || c->v_global_host == NULL)
        return lowp_why_set(why, why_len, "out of host memory for %zu global scales", c->n_global);
    for (size_t i = 0; i < c->n_global; i++)
        c->k_global_host[i] = c->v_global_host[i] = 1.0f; /* uncalibrated default */
    /* poison like lowp_kvcache_create: every code and scale byte LOWP_KV_POISON */
    CK(cudaMemset(c->k_codes, (int)LOWP_KV_POISON, cb[0]));
    CK(cudaMemset(c->v_codes, (int)LOWP_KV_POISON, cb[1]));
    if (sb[0])
        CK(cudaMemset(c->k_scales, (int)LOWP_KV_POISON, sb[0]));
    if (sb[1])
        CK(cudaMemset(c->v_scales, (int)LOWP_KV_POISON, sb[1]));
    CK(cudaMemcpy(c->k_global, c->k_global_host, c->n_global * sizeof(float), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(c->v_global, c->v_global_host, c->n_global * sizeof(float), cudaMemcpyHostToDevice));
    CK(cudaDeviceSynchronize());
    return 0;
}

extern "C" int lowp_gpu_kvcache_create(const lowp_kv_config *cfg, lowp_gpu_kvcache **out,
                                       char *why, size_t why_len)
{
    if (out == NULL)
        return lowp_why_set(why, why_len, "out is NULL");
    *out = NULL;
    if (lowp_kv_config_check(cfg, why, why_len) || lowp_gpu_kv_recipe_check(cfg, why, why_len))
        return -1;
    lowp_gpu_kvcache *c = (lowp_gpu_kvcache *)calloc(1, sizeof *c);
    if (c == NULL)
        return lowp_why_set(why, why_len, "out of host memory allocating the cache");
    c->cfg = *cfg;
    if (create_into(c, why, why_len)) {
        lowp_gpu_kvcache_destroy(c);
        return -1;
    }
    *out = c;
    return 0;
}

extern "C" int lowp_gpu_kvcache_set_global_scales(lowp_gpu_kvcache *c, const float *k,
                                                  const float *v, size_t n, char *why,
                                                  size_t why_len)
{
    if (lowp_gpu_kvcache_check(c, why, why_len))
        return -1;
    if (n != c->n_global)
        return lowp_why_set(
            why, why_len,
            "n = %zu global scales given but the cache keeps %zu per side (scale_gran %s)", n,
            c->n_global, lowp_kv_scale_gran_name(c->cfg.scale_gran));
    int has = lowp_block_has_global_scale(c->cfg.format);
    const float *src[2] = {k, v};
    const char *const wn[2] = {"k", "v"};
    /* validate both sides before changing either (lowp_kvcache_set_global_scales' rules) */
    for (int w = 0; w < 2; w++) {
        if (src[w] == NULL)
            continue;
        for (size_t i = 0; i < n; i++) {
            float g = src[w][i];
            if (!(isfinite(g) && g > 0.0f))
                return lowp_why_set(why, why_len, "%s[%zu] = %g is not a finite positive scale",
                                    wn[w], i, (double)g);
            if (!has && g != 1.0f)
                return lowp_why_set(why, why_len,
                                    "%s[%zu] = %g but %s has no global scale (only 1.0)", wn[w], i,
                                    (double)g, lowp_block_format_name(c->cfg.format));
        }
    }
    float *dev[2] = {c->k_global, c->v_global};
    float *hst[2] = {c->k_global_host, c->v_global_host};
    for (int w = 0; w < 2; w++) {
        if (src[w] == NULL)
            continue;
        CK(cudaMemcpy(dev[w], src[w], n * sizeof(float), cudaMemcpyHostToDevice));
        memcpy(hst[w], src[w], n * sizeof(float));
    }
    return 0;
}

extern "C" int lowp_gpu_kvcache_upload(lowp_gpu_kvcache *c, const lowp_kvcache *host, char *why,
                                       size_t why_len)
{
    if (lowp_gpu_kvcache_check(c, why, why_len))
        return -1;
    if (host == NULL)
        return lowp_why_set(why, why_len, "host cache is NULL");
    if (config_equal(&c->cfg, lowp_kvcache_config(host), why, why_len))
        return -1;
    uint8_t *dst[2][2] = {{c->k_codes, c->k_scales}, {c->v_codes, c->v_scales}};
    const size_t want[2][2] = {{c->k_codes_bytes, c->k_scales_bytes},
                               {c->v_codes_bytes, c->v_scales_bytes}};
    for (int w = 0; w < 2; w++)
        for (int p = 0; p < 2; p++) {
            size_t bytes = 0;
            const uint8_t *src = lowp_kvcache_cbuffer(host, (lowp_kv_which)w, (lowp_kv_part)p, &bytes);
            if (bytes != want[w][p])
                return lowp_why_set(why, why_len,
                                    "host cache buffer %s %s has %zu bytes, the GPU cache %zu",
                                    w ? "v" : "k", p ? "scales" : "codes", bytes, want[w][p]);
            if (bytes)
                CK(cudaMemcpy(dst[w][p], src, bytes, cudaMemcpyHostToDevice));
        }
    /* per tensor: head 0 holds it (the CPU cache stores it for every head) */
    float *g = (float *)malloc(2 * c->n_global * sizeof(float));
    if (g == NULL)
        return lowp_why_set(why, why_len, "out of host memory");
    for (int w = 0; w < 2; w++)
        for (size_t h = 0; h < c->n_global; h++)
            g[(size_t)w * c->n_global + h] = lowp_kvcache_global_scale(host, (lowp_kv_which)w, h);
    int rc = lowp_gpu_kvcache_set_global_scales(c, g, g + c->n_global, c->n_global, why, why_len);
    free(g);
    return rc;
}

extern "C" int lowp_gpu_kvcache_download(const lowp_gpu_kvcache *c, lowp_kvcache *host,
                                         char *why, size_t why_len)
{
    if (lowp_gpu_kvcache_check(c, why, why_len))
        return -1;
    if (host == NULL)
        return lowp_why_set(why, why_len, "host cache is NULL");
    if (config_equal(&c->cfg, lowp_kvcache_config(host), why, why_len))
        return -1;
    const uint8_t *src[2][2] = {{c->k_codes, c->k_scales}, {c->v_codes, c->v_scales}};
    const size_t have[2][2] = {{c->k_codes_bytes, c->k_scales_bytes},
                               {c->v_codes_bytes, c->v_scales_bytes}};
    for (int w = 0; w < 2; w++)
        for (int p = 0; p < 2; p++) {
            size_t bytes = 0;
            uint8_t *dst = lowp_kvcache_buffer(host, (lowp_kv_which)w, (lowp_kv_part)p, &bytes);
            if (bytes != have[w][p])
                return lowp_why_set(why, why_len,
                                    "host cache buffer %s %s has %zu bytes, the GPU cache %zu",
                                    w ? "v" : "k", p ? "scales" : "codes", bytes, have[w][p]);
            if (bytes)
                CK(cudaMemcpy(dst, src[w][p], bytes, cudaMemcpyDeviceToHost));
        }
    /* the device arrays are what the kernels read: download them, not the host copies */
    float *g = (float *)malloc(2 * c->n_global * sizeof(float));
    if (g == NULL)
        return lowp_why_set(why, why_len, "out of host memory");
    cudaError_t e1 = cudaMemcpy(g, c->k_global, c->n_global * sizeof(float), cudaMemcpyDeviceToHost);
    cudaError_t e2 = e1 == cudaSuccess
                         ? cudaMemcpy(g + c->n_global, c->v_global, c->n_global * sizeof(float),
                                      cudaMemcpyDeviceToHost)
                         : e1;
    int rc;
    if (e2 != cudaSuccess)
        rc = lowp_why_set(why, why_len,
                          "cudaMemcpy of the global scales to the host failed: %s (%s)",
                          cudaGetErrorName(e2), cudaGetErrorString(e2));
    else
        rc = lowp_kvcache_set_global_scales(host, g, g + c->n_global, c->n_global, why, why_len);
    free(g);
    return rc;
}
