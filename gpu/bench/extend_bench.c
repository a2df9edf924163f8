/* gpu/bench/extend_bench.c: lowp_gpu_extend_bench_run (lowp/gpu_extend_conform.h), behind
 * `lowp gpu bench --kernel extend|prefill`: time the extend / prefill attention kernel
 * (lowp/gpu_extend.h) on SGLang's shapes: one sequence, chunk C of queries over a prefix P
 * (P = 0: initial prefill), 32 query / 8 KV heads, head dim 128, the FP8 workspace sized
 * for P + C.
 *
 *   lowp gpu bench --kernel extend,prefill [--csv FILE] [--chunks a,b,..] [--prefixes a,b,..]
 *                  [--reps N] [--batch B] [--q-heads H] [--kv-heads H] [--head-dim D]
 *
 * Each shape: 3 warm-up launches, then --reps (default 10) launches timed one by one with
 * CUDA events; the median is reported. For an extend (P > 0) also, in the same way:
 *   ws_us    lowp_gpu_extend_workspace: the NVFP4 prefix (page size 16, NHD) dequantized
 *            into the FP8 workspace, plus the chunk cast (by rows, or with
 *            LOWP_GPU_WS_FILL=staged the staged kernel); its bytes = the prefix's codes and
 *            scales read + the chunk's BF16 read + the workspace written;
 *   stream   a cudaMemcpy device to device moving the same bytes (half read, half written):
 *            ws_eff = stream time / ws time (the target: >= 0.8);
 *   kvw_us   lowp_gpu_kv_write of the chunk (BF16 -> NVFP4, sglang-kv): its share of the
 *            attention time (the target: <= 1%); the call between two events on an
 *            idle stream, so its host checks and launch count;
 *   kvw_dev_us  the same write's device time alone: lowp_gpu_spin_us (20 us) enqueued
 *            before the first event lets the host's part overlap it, as in an engine's
 *            stream, where the write is enqueued behind other work (lowp/gpu_kv_bench.h). TFLOP/s counts 4 x q_heads x dim per visible
 * query-key pair (2 x dim for Q.K, 2 x dim for P.V: the convention), pairs =
 * C (P + 1) + C (C - 1) / 2 per sequence. The data are constant codes (the kernel has no
 * data-dependent branch: exp2_sw is branch-free, every block is streamed whatever it holds).
 * 77 without a GPU.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "lowp/gpu_extend.h"
#include "lowp/gpu_extend_conform.h"
#include "lowp/gpu_kv_bench.h"

static int cmp_f(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            snprintf(why_out, why_len, "%s: %s", #call, cudaGetErrorString(e_));                   \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

lowp_gpu_extend_bench_opts lowp_gpu_extend_bench_defaults(void)
{
    lowp_gpu_extend_bench_opts o = {.chunks = {512, 1024, 2048, 4096, 8192},
                                    .prefixes = {0, 4096, 16384, 32768, 131072},
                                    .n_chunks = 5, .n_prefixes = 5, .reps = 10, .batch = 1,
                                    .q_heads = 32, .kv_heads = 8, .dim = 128};
    return o;
}

int lowp_gpu_extend_bench_run(const lowp_gpu_extend_bench_opts *o, FILE *out, FILE *log,
                              char *why_out, size_t why_len)
{
    const uint64_t *chunks = o->chunks, *prefixes = o->prefixes;
    size_t nc = o->n_chunks, np = o->n_prefixes, reps = o->reps, batch = o->batch,
           HQ = o->q_heads, HK = o->kv_heads, D = o->dim;
    if (nc == 0 || np == 0 || nc > 16 || np > 16 || batch < 1 || batch > 4) {
        snprintf(why_out, why_len, "1..16 chunks and prefixes, batch 1..4");
        return -1;
    }
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        snprintf(why_out, why_len, "no CUDA device");
        return 77;
    }
    if (out)
        fprintf(out, "kernel,batch,chunk,prefix,q_heads,kv_heads,dim,us_median,tflops,smem_bytes,"
                     "ws_us,ws_bytes,ws_gbps,stream_gbps,ws_eff,kvw_us,kvw_share,kvw_dev_us,"
                     "kvw_dev_share\n");
    struct cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    const char *fill = lowp_gpu_extend_workspace_fill();
    fprintf(log, "lowp gpu bench --kernel extend on %s: batch %zu, %zu q / %zu kv heads, dim %zu, "
                 "median of %zu, %zu bytes of shared memory a CTA; workspace fill %s",
            prop.name, batch, HQ, HK, D, reps, lowp_gpu_extend_smem_bytes(D, D),
            fill ? fill : "(refused)");
    if (fill && strcmp(fill, "auto") == 0)
        fprintf(log, " (staged above %llu prefix elements)",
                lowp_gpu_extend_workspace_staged_elems());
    fprintf(log, "\n");
    fprintf(log, "%-8s %8s %8s %12s %10s\n", "kernel", "chunk", "prefix", "us", "TFLOP/s");
    uint64_t cmax = 0, pmax = 0;
    for (size_t i = 0; i < nc; i++)
        cmax = chunks[i] > cmax ? chunks[i] : cmax;
    for (size_t i = 0; i < np; i++)
        pmax = prefixes[i] > pmax ? prefixes[i] : pmax;
    size_t rows = batch * (size_t)(cmax + pmax);
    void *dq, *dk, *dv, *dout, *dqo, *dkv, *dpre;
    CK(cudaMalloc(&dq, batch * cmax * HQ * D * 2));
    CK(cudaMalloc(&dout, batch * cmax * HQ * D * 2));
    CK(cudaMalloc(&dk, rows * HK * D));
    CK(cudaMalloc(&dv, rows * HK * D));
    CK(cudaMalloc(&dqo, 5 * sizeof(int32_t)));
    CK(cudaMalloc(&dkv, 5 * sizeof(int32_t)));
    CK(cudaMalloc(&dpre, 4 * sizeof(int32_t)));
    CK(cudaMemset(dq, 0x3E, batch * cmax * HQ * D * 2)); /* BF16 0x3E3E: about 0.19 */
    CK(cudaMemset(dk, 0x30, rows * HK * D));             /* E4M3 0x30: 0.5 */
    CK(cudaMemset(dv, 0x30, rows * HK * D));
    /* the workspace path's buffers: the chunk in BF16, the FP8 workspace, slots */
    void *kch, *vch, *kws, *vws, *copy_a, *copy_b;
    int64_t *dslots;
    int32_t *dpt;
    CK(cudaMalloc(&kch, batch * cmax * HK * D * 2));
    CK(cudaMalloc(&vch, batch * cmax * HK * D * 2));
    CK(cudaMemset(kch, 0x3E, batch * cmax * HK * D * 2));
    CK(cudaMemset(vch, 0x3E, batch * cmax * HK * D * 2));
    kws = dk; /* the fill writes the workspace the attention reads */
    vws = dv;
    CK(cudaMalloc((void **)&dslots, batch * cmax * sizeof *dslots));
    size_t ps = 16, pages_per = (size_t)(cmax + pmax + ps - 1) / ps;
    CK(cudaMalloc((void **)&dpt, (2 * (batch + 1) + batch * pages_per) * sizeof *dpt));
    /* each copy buffer (copy_max / 2) must hold half of ws_bytes (below) at the largest
     * shape: 3.125 prefix + 6 chunk bytes per head element, a sequence; this gives
     * 4 (prefix + chunk) + 2 chunk. (It gave less than that at chunk 8K x prefix 128K.) */
    size_t copy_max = 4 * rows * HK * D * 2 + 2 * batch * cmax * HK * D * 2;
    CK(cudaMalloc(&copy_a, copy_max / 2 + 16));
    CK(cudaMalloc(&copy_b, copy_max / 2 + 16));
    lowp_kv_config kcfg = lowp_kv_config_default(LOWP_NVFP4, batch * pages_per, ps, HK, D, D);
    lowp_gpu_kvcache *gc = NULL;
    char cwhy[256];
    if (lowp_gpu_kvcache_create(&kcfg, &gc, cwhy, sizeof cwhy)) {
        snprintf(why_out, why_len, "cache: %s", cwhy);
        return -1;
    }
    /* A written cache: lowp_gpu_kvcache_create poisons every byte (0xFF), and scale code
     * 0xFF is E4M3 NaN, which sends every prefix block of the fill down its non-finite
     * per-element path (gpu/kernels/extend.cu ws_bytes) - a cache no writer produces. Codes
     * 0x4B (E2M1 2 and -1.5) and scale 0x38 (E4M3 1.0) are finite, as written caches are:
     * the fill takes its table path, and the workspace the attention reads is finite. */
    CK(cudaMemset(gc->k_codes, 0x4B, gc->k_codes_bytes));
    CK(cudaMemset(gc->v_codes, 0x4B, gc->v_codes_bytes));
    CK(cudaMemset(gc->k_scales, 0x38, gc->k_scales_bytes));
    CK(cudaMemset(gc->v_scales, 0x38, gc->v_scales_bytes));
    float *ms = malloc((reps ? reps : 1) * sizeof *ms);
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (size_t ci = 0; ci < nc; ci++)
        for (size_t pi = 0; pi < np; pi++) {
            int32_t qo[5], kv[5], pre[4];
            qo[0] = kv[0] = 0;
            for (size_t b = 0; b < batch; b++) {
                pre[b] = (int32_t)prefixes[pi];
                qo[b + 1] = qo[b] + (int32_t)chunks[ci];
                kv[b + 1] = kv[b] + (int32_t)(chunks[ci] + prefixes[pi]);
            }
            CK(cudaMemcpy(dqo, qo, sizeof qo, cudaMemcpyHostToDevice));
            CK(cudaMemcpy(dkv, kv, sizeof kv, cudaMemcpyHostToDevice));
            CK(cudaMemcpy(dpre, pre, sizeof pre, cudaMemcpyHostToDevice));
            lowp_gpu_extend_desc d = {
                .host = {.batch = batch, .qo_indptr = qo, .kv_indptr = kv, .prefix_len = pre,
                         .kv_rows = rows, .num_q_heads = HQ, .num_kv_heads = HK, .qk_dim = D,
                         .vo_dim = D, .q = dq, .k = dk, .v = dv},
                .qo_indptr_dev = dqo, .kv_indptr_dev = dkv, .prefix_len_dev = dpre,
                .q_dev = dq, .k_dev = dk, .v_dev = dv};
            char why[256];
            for (int w = 0; w < 3; w++)
                if (lowp_gpu_extend(&d, dout, 0, why, sizeof why)) {
                    snprintf(why_out, why_len, "%s", why);
                    return -1;
                }
            CK(cudaDeviceSynchronize());
            for (size_t r = 0; r < reps; r++) {
                CK(cudaEventRecord(e0, 0));
                lowp_gpu_extend(&d, dout, 0, why, sizeof why);
                CK(cudaEventRecord(e1, 0));
                CK(cudaEventSynchronize(e1));
                CK(cudaEventElapsedTime(&ms[r], e0, e1));
            }
            CK(cudaGetLastError());
            qsort(ms, reps, sizeof *ms, cmp_f);
            double us = reps ? 1e3 * ms[reps / 2] : 0.0;
            double ws_us = 0, ws_gbps = 0, st_gbps = 0, kvw_us = 0, kvw_dev_us = 0;
            double ws_bytes = 0;
            if (prefixes[pi] > 0 && reps) {
                /* page table: sequence b owns pages b * pages_per .., in order */
                size_t npg = (size_t)(prefixes[pi] + chunks[ci] + ps - 1) / ps;
                int32_t *hpt = malloc((2 * (batch + 1) + batch * npg) * sizeof *hpt);
                int64_t *hsl = malloc(batch * chunks[ci] * sizeof *hsl);
                if (!hpt || !hsl) {
                    snprintf(why_out, why_len, "out of memory");
                    return -1;
                }
                int32_t *ip = hpt, *last = hpt + batch + 1, *ix = hpt + 2 * (batch + 1);
                ip[0] = 0;
                for (size_t b = 0; b < batch; b++) {
                    ip[b + 1] = ip[b] + (int32_t)npg;
                    last[b] = (int32_t)(prefixes[pi] + chunks[ci] - (npg - 1) * ps);
                    for (size_t j = 0; j < npg; j++)
                        ix[b * npg + j] = (int32_t)(b * pages_per + j);
                    for (size_t i = 0; i < chunks[ci]; i++) {
                        size_t t = prefixes[pi] + i;
                        hsl[b * chunks[ci] + i] = (int64_t)((b * pages_per + t / ps) * ps + t % ps);
                    }
                }
                CK(cudaMemcpy(dpt, hpt, (2 * (batch + 1) + batch * npg) * sizeof *hpt,
                              cudaMemcpyHostToDevice));
                CK(cudaMemcpy(dslots, hsl, batch * chunks[ci] * sizeof *hsl,
                              cudaMemcpyHostToDevice));
                lowp_kv_page_table pt = {batch, ip, ix, last};
                lowp_gpu_extend_ws_desc wd = {.cache = gc, .pt_host = &pt, .pt_indptr_dev = dpt,
                                              .pt_indices_dev = dpt + 2 * (batch + 1),
                                              .host = d.host, .qo_indptr_dev = dqo,
                                              .kv_indptr_dev = dkv, .prefix_len_dev = dpre,
                                              .k_chunk_dev = kch, .v_chunk_dev = vch};
                ws_bytes = (double)batch * ((double)prefixes[pi] * HK * D * 2 * (0.5 + 1.0 / 16) +
                                            (double)chunks[ci] * HK * D * 2 * 2 +
                                            (double)(prefixes[pi] + chunks[ci]) * HK * D * 2);
                size_t half = (size_t)(ws_bytes / 2) / 16 * 16;
                for (int pass = 0; pass < 4; pass++) { /* fill, copy, write, write's device time */
                    for (int w = 0; w < 2; w++) { /* warm-up */
                        int r = pass == 0 ? lowp_gpu_extend_workspace(&wd, kws, vws, 0, why, sizeof why)
                              : pass == 1 ? (cudaMemcpy(copy_b, copy_a, half, cudaMemcpyDeviceToDevice) != cudaSuccess)
                                          : lowp_gpu_kv_write(gc, LOWP_GPU_IN_BF16, kch, vch, dslots, NULL,
                                                              batch * chunks[ci], 0, why, sizeof why);
                        if (r) {
                            snprintf(why_out, why_len, "%s",
                                     pass == 1 ? "cudaMemcpy failed" : why);
                            return -1;
                        }
                    }
                    CK(cudaDeviceSynchronize());
                    for (size_t r = 0; r < reps; r++) {
                        if (pass == 3 && lowp_gpu_spin_us(0, 20.0, why_out, why_len))
                            return -1;
                        CK(cudaEventRecord(e0, 0));
                        if (pass == 0)
                            lowp_gpu_extend_workspace(&wd, kws, vws, 0, why, sizeof why);
                        else if (pass == 1)
                            cudaMemcpyAsync(copy_b, copy_a, half, cudaMemcpyDeviceToDevice, 0);
                        else
                            lowp_gpu_kv_write(gc, LOWP_GPU_IN_BF16, kch, vch, dslots, NULL,
                                              batch * chunks[ci], 0, why, sizeof why);
                        CK(cudaEventRecord(e1, 0));
                        CK(cudaEventSynchronize(e1));
                        CK(cudaEventElapsedTime(&ms[r], e0, e1));
                    }
                    CK(cudaGetLastError());
                    qsort(ms, reps, sizeof *ms, cmp_f);
                    double t = 1e3 * ms[reps / 2];
                    if (pass == 0)
                        ws_us = t;
                    else if (pass == 1)
                        st_gbps = t > 0 ? 2.0 * (double)half / (t * 1e-6) / 1e9 : 0.0;
                    else if (pass == 2)
                        kvw_us = t;
                    else
                        kvw_dev_us = t;
                }
                ws_gbps = ws_us > 0 ? ws_bytes / (ws_us * 1e-6) / 1e9 : 0.0;
                free(hpt);
                free(hsl);
            }
            double pairs = lowp_gpu_extend_pairs(&d.host);
            double tf = us > 0 ? 4.0 * (double)HQ * (double)D * pairs / (us * 1e-6) / 1e12 : 0.0;
            const char *kind = prefixes[pi] ? "extend" : "prefill";
            fprintf(log, "%-8s %8llu %8llu %12.1f %10.1f", kind, (unsigned long long)chunks[ci],
                   (unsigned long long)prefixes[pi], us, tf);
            if (ws_us > 0)
                fprintf(log, "   ws %9.1f us %7.1f GB/s (stream %7.1f: %.2f)   kv write %7.1f us "
                       "(%.2f%% of the attention; device %.1f us, %.2f%%)",
                       ws_us, ws_gbps, st_gbps, st_gbps > 0 ? ws_gbps / st_gbps : 0.0, kvw_us,
                       us > 0 ? 100.0 * kvw_us / us : 0.0, kvw_dev_us,
                       us > 0 ? 100.0 * kvw_dev_us / us : 0.0);
            fprintf(log, "\n");
            if (out)
                fprintf(out, "%s,%zu,%llu,%llu,%zu,%zu,%zu,%.2f,%.2f,%zu,%.2f,%.0f,%.1f,%.1f,%.3f,"
                             "%.2f,%.4f,%.2f,%.4f\n",
                        kind, batch, (unsigned long long)chunks[ci],
                        (unsigned long long)prefixes[pi], HQ, HK, D, us, tf,
                        lowp_gpu_extend_smem_bytes(D, D), ws_us, ws_bytes, ws_gbps, st_gbps,
                        st_gbps > 0 ? ws_gbps / st_gbps : 0.0, kvw_us, us > 0 ? kvw_us / us : 0.0,
                        kvw_dev_us, us > 0 ? kvw_dev_us / us : 0.0);
        }
    free(ms);
    cudaFree(dq);
    cudaFree(dk);
    cudaFree(dv);
    cudaFree(dout);
    cudaFree(dqo);
    cudaFree(dkv);
    cudaFree(dpre);
    cudaFree(kch);
    cudaFree(vch);
    cudaFree(dslots);
    cudaFree(dpt);
    cudaFree(copy_a);
    cudaFree(copy_b);
    lowp_gpu_kvcache_destroy(gc);
    return 0;
}
