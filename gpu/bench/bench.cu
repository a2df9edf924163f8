/* `lowp gpu bench`: lowp/gpu_bench.h. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime.h>

#include "decode_internal.h"
#include "lowp/attn_gpu_emul.h"
#include "lowp/cases.h"
#include "lowp/cuda_check.h"
#include "lowp/gpu_bench.h"
#include "lowp/gpu_kvcache.h"
#include "sm_clock.h"
#include "lowp/why.h"

namespace {

__device__ __forceinline__ uint32_t mix32(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return (uint32_t)x;
}

/* Random element bytes: kind 0 any byte (E2M1 pairs), 1 BF16 pairs of moderate magnitude,
 * 2 FP8 without NaN / Inf codes. */
__global__ void fill_codes(uint8_t *p, size_t n, int kind, uint64_t seed)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint32_t r = mix32(seed + i);
        uint8_t b = (uint8_t)r;
        if (kind == 1 && (i & 1)) /* high byte of a BF16: sign + exponent 120..127 */
            b = (uint8_t)((r & 0x80) | 0x3C | ((r >> 8) & 0x3));
        if (kind == 2 && (b & 0x7C) == 0x7C)
            b &= 0xBB;
        p[i] = b;
    }
}

/* Block scales: E4M3 0x30..0x4F (NVFP4), E8M0 120..135 (MX). */
__global__ void fill_scales(uint8_t *p, size_t n, int nv, uint64_t seed)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint32_t r = mix32(seed ^ (i * 0x9E3779B97F4A7C15ULL));
        p[i] = nv ? (uint8_t)(0x30 + (r & 31)) : (uint8_t)(120 + (r & 15));
    }
}

/* Streaming read: every 16-byte word once; the xor keeps the loads alive. */
__global__ void stream_read(const uint4 *p, size_t n, uint32_t *sink)
{
    uint32_t acc = 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint4 v = __ldcs(p + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x9E3779B9u)
        sink[0] = acc;
}

int parse_list(const char *s, size_t *v, size_t cap, size_t *n)
{
    *n = 0;
    while (s && *s) {
        char *end;
        unsigned long long x = strtoull(s, &end, 10);
        if (end == s || x == 0 || *n == cap)
            return -1;
        v[(*n)++] = (size_t)x;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return -1;
    }
    return *n ? 0 : -1;
}

int cmp_f(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

#define CK(call) LOWP_CUDA_CK(call)

struct stats {
    float med, p10, p90;
};

stats summarize(float *ms, int n)
{
    qsort(ms, (size_t)n, sizeof *ms, cmp_f);
    stats s = {ms[n / 2], ms[n / 10], ms[(9 * n) / 10]};
    return s;
}

/* Device bytes this process freed since the last settle(). */
double freed_bytes = 0.0;

/* The default wait before timing a shape, in ms per GB freed since the last one
 * (lowp_gpu_bench_opts.settle_ms_per_gb). On the H200, right
 * after the bench freed a shape's 34.4 GB (BF16, batch 32, 128K tokens: cache and
 * streaming buffer), the next shape's decode and streaming read both ran 12% slower
 * (1153 instead of 1023 us; 3.93 instead of 4.48 TB/s) until about 50 ms had passed;
 * the device does work after a free that takes HBM bandwidth (we did not identify it).
 * Waits of 1, 2, 3 and 5 ms per GB gave 1154, 1023, 1023 and 1023 us, so 3 ms keeps a
 * 50% margin. Without the wait the grid's shapes after large ones were 8-14% slow (FP8
 * at batch 32, 32K: 622 instead of 573 us) and the CSVs depended on the grid's order. */
#define SETTLE_MS_PER_GB 3.0

void settle(double ms_per_gb)
{
    const double ms = ms_per_gb * freed_bytes / 1e9;
    freed_bytes = 0.0;
    if (ms <= 0.0)
        return;
    struct timespec ts;
    ts.tv_sec = (time_t)(ms / 1000.0);
    ts.tv_nsec = (long)(fmod(ms, 1000.0) * 1e6);
    nanosleep(&ts, NULL);
}

} // namespace

extern "C" lowp_gpu_bench_opts lowp_gpu_bench_defaults(void)
{
    lowp_gpu_bench_opts o;
    memset(&o, 0, sizeof o);
    o.q_heads = 32;
    o.kv_heads = 8;
    o.head_dim = 128;
    o.page_size = 16;
    o.reps = 30;
    o.max_gb = 40.0;
    o.settle_ms_per_gb = SETTLE_MS_PER_GB;
    o.seed = LOWP_DEFAULT_SEED;
    return o;
}

/* One (format, batch, ctx) point. */
static int bench_one(const lowp_gpu_bench_opts *o, lowp_block_format f, size_t B, size_t ctx,
                     lowp_sm_clock *clk, FILE *csv, FILE *table, char *why, size_t wl)
{
    int rc = 0;
    const size_t H = o->kv_heads, NQ = o->q_heads, D = o->head_dim, PS = o->page_size;
    size_t pps = (ctx + PS - 1) / PS, pages_copy = B * pps;
    lowp_kv_config cfg = lowp_kv_config_default(f, 1, PS, H, D, D);
    cfg.layout = o->hnd ? LOWP_KV_HND : LOWP_KV_NHD;
    size_t per_page = PS * H *
                      (lowp_kv_row_code_bytes(&cfg, LOWP_KV_K) + lowp_kv_row_code_bytes(&cfg, LOWP_KV_V) +
                       lowp_kv_row_scales(&cfg, LOWP_KV_K) + lowp_kv_row_scales(&cfg, LOWP_KV_V));
    double bytes = (double)B * (double)ctx * (double)per_page / (double)PS;
    if ((double)pages_copy * per_page > o->max_gb * 1e9) {
        if (table)
            fprintf(table, "%-9s batch %3zu ctx %6zu: skipped (%.1f GB > --max-gb)\n",
                    lowp_block_format_name(f), B, ctx, (double)pages_copy * per_page / 1e9);
        return 0;
    }
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    double copy_bytes = (double)pages_copy * per_page;
    size_t R = (size_t)ceil(512.0 * 1048576.0 / copy_bytes);
    if (R < 1)
        R = 1;
    /* the cache copies plus the same for the streaming read, inside 80% of free memory */
    while (R > 1 && 2.0 * (double)R * copy_bytes > 0.8 * (double)free_b)
        R--;
    cfg.num_pages = R * pages_copy;
    lowp_gpu_kvcache *gc = NULL;
    int32_t *h_indptr = NULL, *h_indices = NULL, *h_last = NULL, *d_pt = NULL;
    uint16_t *d_q = NULL, *d_out = NULL, *h_q = NULL;
    void *d_ws = NULL;
    uint8_t *d_read = NULL;
    uint32_t *d_sink = NULL;
    lowp_gpu_decode_params *prm = NULL;
    cudaEvent_t *ev = NULL;
    float *ms = NULL, *rms = NULL;
    lowp_sm_clock_stats clk_stats = {0, NAN, NAN, NAN};
    int reps = o->reps > 3 ? o->reps : 3;
    size_t ws_bytes = 0;
    if (lowp_gpu_kvcache_create(&cfg, &gc, why, wl))
        return -1;
    {
        int kind = (f == LOWP_BF16_PASS) ? 1 : (f == LOWP_NVFP4 || f == LOWP_MXFP4) ? 0 : 2;
        fill_codes<<<1024, 256>>>(gc->k_codes, gc->k_codes_bytes, kind, o->seed);
        fill_codes<<<1024, 256>>>(gc->v_codes, gc->v_codes_bytes, kind, o->seed + 7);
        if (gc->k_scales) {
            fill_scales<<<1024, 256>>>(gc->k_scales, gc->k_scales_bytes, f == LOWP_NVFP4, o->seed);
            fill_scales<<<1024, 256>>>(gc->v_scales, gc->v_scales_bytes, f == LOWP_NVFP4,
                                       o->seed + 3);
        }
        CK(cudaGetLastError());
    }
    h_indptr = (int32_t *)malloc((B + 1) * sizeof *h_indptr);
    h_last = (int32_t *)malloc(B * sizeof *h_last);
    h_indices = (int32_t *)malloc(R * pages_copy * sizeof *h_indices);
    h_q = (uint16_t *)malloc(B * NQ * D * sizeof *h_q);
    prm = (lowp_gpu_decode_params *)calloc(R, sizeof *prm);
    ev = (cudaEvent_t *)calloc(2 * (size_t)reps, sizeof *ev);
    ms = (float *)malloc((size_t)reps * sizeof *ms);
    rms = (float *)malloc((size_t)reps * sizeof *rms);
    if (!h_indptr || !h_last || !h_indices || !h_q || !prm || !ev || !ms || !rms) {
        rc = lowp_why_set(why, wl, "out of memory");
        goto out;
    }
    for (size_t b = 0; b <= B; b++)
        h_indptr[b] = (int32_t)(b * pps);
    for (size_t b = 0; b < B; b++)
        h_last[b] = (int32_t)(ctx - (pps - 1) * PS);
    for (size_t i = 0; i < R * pages_copy; i++) /* copy r = pages r*P .. (r+1)*P-1 */
        h_indices[i] = (int32_t)i;
    for (size_t i = 0; i < B * NQ * D; i++)
        h_q[i] = (uint16_t)(0x3C00 | (i * 2654435761u >> 20 & 0x3FF) | ((i & 1) << 15));
    CK(cudaMalloc(&d_pt, ((B + 1) + B + R * pages_copy) * sizeof(int32_t)));
    CK(cudaMemcpy(d_pt, h_indptr, (B + 1) * sizeof(int32_t), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_pt + B + 1, h_last, B * sizeof(int32_t), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_pt + 2 * B + 1, h_indices, R * pages_copy * sizeof(int32_t),
                  cudaMemcpyHostToDevice));
    CK(cudaMalloc(&d_q, B * NQ * D * 2));
    CK(cudaMemcpy(d_q, h_q, B * NQ * D * 2, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&d_out, B * NQ * D * 2));
    for (size_t r = 0; r < R; r++) {
        lowp_kv_page_table pt = {B, h_indptr, h_indices + r * pages_copy, h_last};
        lowp_gpu_decode_desc dd;
        memset(&dd, 0, sizeof dd);
        dd.cache = gc;
        dd.pt_host = &pt;
        dd.indptr_dev = d_pt;
        dd.last_page_len_dev = d_pt + B + 1;
        dd.indices_dev = d_pt + 2 * B + 1 + r * pages_copy;
        dd.num_q_heads = NQ;
        dd.q_dev = d_q;
        dd.chunk_tokens = o->chunk;
        dd.ring_stages = o->stages;
        dd.cta_warps = o->warps;
        if (r == 0) {
            ws_bytes = lowp_gpu_decode_workspace_bytes(&dd, why, wl);
            if (ws_bytes == 0) {
                rc = -1;
                goto out;
            }
            CK(cudaMalloc(&d_ws, ws_bytes));
        }
        if (lowp_gpu_decode_prepare(&dd, d_ws, ws_bytes, d_out, 0, &prm[r], why, wl)) {
            rc = -1;
            goto out;
        }
    }
    CK(cudaMalloc(&d_read, (size_t)(R * copy_bytes) + 16));
    CK(cudaMemset(d_read, 1, (size_t)(R * copy_bytes)));
    CK(cudaMalloc(&d_sink, 4));
    for (int i = 0; i < 2 * reps; i++)
        CK(cudaEventCreate(&ev[i]));
    CK(cudaDeviceSynchronize()); /* the fills are done: only the last frees' work remains */
    settle(o->settle_ms_per_gb);
    for (int w = 0; w < 3; w++) /* warm-up */
        CK(lowp_gpu_decode_enqueue(&prm[w % R], 0));
    CK(cudaDeviceSynchronize());
    lowp_sm_clock_start(clk); /* the calls are queued at once and run while it samples */
    for (int i = 0; i < reps; i++) {
        CK(cudaEventRecord(ev[2 * i], 0));
        CK(lowp_gpu_decode_enqueue(&prm[i % R], 0));
        CK(cudaEventRecord(ev[2 * i + 1], 0));
    }
    CK(cudaDeviceSynchronize());
    lowp_sm_clock_stop(clk, &clk_stats);
    for (int i = 0; i < reps; i++)
        CK(cudaEventElapsedTime(&ms[i], ev[2 * i], ev[2 * i + 1]));
    {
        size_t words = (size_t)(bytes / 16.0);
        size_t stride = (size_t)(copy_bytes / 16.0);
        for (int w = 0; w < 3; w++)
            stream_read<<<132 * 16, 512>>>((const uint4 *)d_read, words, d_sink);
        CK(cudaDeviceSynchronize());
        for (int i = 0; i < reps; i++) {
            CK(cudaEventRecord(ev[2 * i], 0));
            stream_read<<<132 * 16, 512>>>((const uint4 *)d_read + (size_t)(i % R) * stride,
                                           words, d_sink);
            CK(cudaEventRecord(ev[2 * i + 1], 0));
        }
        CK(cudaDeviceSynchronize());
        CK(cudaGetLastError());
        for (int i = 0; i < reps; i++)
            CK(cudaEventElapsedTime(&rms[i], ev[2 * i], ev[2 * i + 1]));
    }
    {
        stats s = summarize(ms, reps), r = summarize(rms, reps);
        double gbps = bytes / (s.med * 1e-3) / 1e9, rgbps = bytes / (r.med * 1e-3) / 1e9;
        char clk_csv[64] = ",,,", clk_txt[64] = "";
        if (clk_stats.samples > 0) {
            snprintf(clk_csv, sizeof clk_csv, ",%.0f,%.0f,%.3f", clk_stats.mean_mhz,
                     clk_stats.min_mhz, clk_stats.limited);
            snprintf(clk_txt, sizeof clk_txt, "  SM %.0f MHz (min %.0f, limited %.0f%%)",
                     clk_stats.mean_mhz, clk_stats.min_mhz, 100.0 * clk_stats.limited);
        }
        if (csv)
            fprintf(csv, "decode,%s,%zu,%zu,%.2f,%.2f,%.2f,%.0f,%.1f,%.1f,%.4f%s\n",
                    lowp_block_format_name(f), B, ctx, s.med * 1e3, s.p10 * 1e3, s.p90 * 1e3,
                    bytes, gbps, rgbps, gbps / rgbps, clk_csv);
        if (table)
            fprintf(table, "%-9s batch %3zu ctx %6zu: %9.1f us  %7.1f GB/s  read %7.1f GB/s  "
                    "%5.1f%%  (R=%zu copies, splits of %zu)%s\n", lowp_block_format_name(f),
                    B, ctx, s.med * 1e3, gbps, rgbps, 100.0 * gbps / rgbps, R,
                    o->chunk ? o->chunk : lowp_gpu_decode_chunk_tokens(B, H, ctx), clk_txt);
    }
out:
    if (ev)
        for (int i = 0; i < 2 * reps; i++)
            if (ev[i])
                cudaEventDestroy(ev[i]);
    free(ev);
    free(ms);
    free(rms);
    free(prm);
    free(h_indptr);
    free(h_last);
    free(h_indices);
    free(h_q);
    cudaFree(d_pt);
    cudaFree(d_q);
    cudaFree(d_out);
    cudaFree(d_ws);
    cudaFree(d_read);
    cudaFree(d_sink);
    if (gc)
        freed_bytes += (double)(gc->k_codes_bytes + gc->v_codes_bytes + gc->k_scales_bytes +
                                gc->v_scales_bytes);
    if (d_read)
        freed_bytes += (double)R * copy_bytes;
    lowp_gpu_kvcache_destroy(gc);
    return rc;
}

extern "C" int lowp_gpu_bench_run(const lowp_gpu_bench_opts *o, FILE *csv, FILE *table,
                                  char *why, size_t wl)
{
    if (o == NULL)
        return lowp_why_set(why, wl, "options are NULL");
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        lowp_why_set(why, wl, "no CUDA device");
        return 77;
    }
    size_t bs[16], cs[16], nb, nc;
    if (parse_list(o->batches ? o->batches : "1,4,16,32,64", bs, 16, &nb))
        return lowp_why_set(why, wl, "--batch: a comma list of positive integers (at most 16)");
    if (parse_list(o->contexts ? o->contexts : "4096,8192,16384,32768,65536,131072", cs, 16,
                   &nc))
        return lowp_why_set(why, wl, "--ctx: a comma list of positive integers (at most 16)");
    const char *fl = o->formats ? o->formats : "bf16,fp8_e4m3,nvfp4,mxfp4";
    lowp_block_format fmts[8];
    size_t nf = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", fl);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (nf == 8 || lowp_block_format_parse(tok, &fmts[nf]))
            return lowp_why_set(why, wl, "--formats: unknown format '%s'", tok);
        nf++;
    }
    lowp_kv_config probe = lowp_kv_config_default(fmts[0], 1, o->page_size, o->kv_heads,
                                                  o->head_dim, o->head_dim);
    for (size_t i = 0; i < nf; i++) {
        probe.format = fmts[i];
        if (lowp_gpu_decode_check(&probe, o->q_heads, why, wl))
            return -1;
    }
    if (csv)
        fprintf(csv, "kernel,format,batch,ctx,median_us,p10_us,p90_us,bytes,gbps,read_gbps,"
                     "ratio,sm_mhz,sm_mhz_min,sm_limited\n");
    if (table) {
        struct cudaDeviceProp prop;
        cudaGetDeviceProperties(&prop, 0);
        /* the ring asked for (upper bounds: lowp_gpu_decode_desc), only when one was: the
         * default header stays as it was */
        char ring[96] = "", st_s[16] = "default", wa_s[16] = "default";
        if (o->stages)
            snprintf(st_s, sizeof st_s, "%d", o->stages);
        if (o->warps)
            snprintf(wa_s, sizeof wa_s, "%d", o->warps);
        if (o->stages || o->warps)
            snprintf(ring, sizeof ring, ", ring stages %s, warps a CTA %s", st_s, wa_s);
        fprintf(table, "lowp gpu bench on %s: %zu query heads, %zu KV heads, head dim %zu, page "
                "size %zu (%s), median of %d calls%s\n", prop.name, o->q_heads, o->kv_heads,
                o->head_dim, o->page_size, o->hnd ? "hnd" : "nhd", o->reps, ring);
    }
    /* NULL without NVML: the clock columns stay empty */
    lowp_sm_clock *clk = NULL;
    {
        int dev = 0;
        char bus[32];
        if (cudaGetDevice(&dev) == cudaSuccess &&
            cudaDeviceGetPCIBusId(bus, (int)sizeof bus, dev) == cudaSuccess)
            clk = lowp_sm_clock_open(bus);
    }
    int rc = 0;
    for (size_t fi = 0; fi < nf && rc == 0; fi++)
        for (size_t bi = 0; bi < nb && rc == 0; bi++)
            for (size_t ci = 0; ci < nc && rc == 0; ci++) {
                rc = bench_one(o, fmts[fi], bs[bi], cs[ci], clk, csv, table, why, wl) ? -1 : 0;
                if (csv)
                    fflush(csv);
                if (table)
                    fflush(table);
            }
    lowp_sm_clock_close(clk);
    return rc;
}
