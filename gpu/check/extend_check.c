/* lowp_gpu_extend_check: the conformance run of the GPU extend / prefill attention kernel
 * (lowp/gpu_extend.h) against its CPU emulator (bit for bit) and binary64 attention (within
 * the bound derived in lowp/attn_gpu_extend.h), as a ctest program and for tools/gpu_run.sh.
 *
 *   lowp_gpu_extend_check REPORT.md [--quick] [--cases N] [--long N] [--seed S]
 *                         [--emulator-only] [--small] [--only I]
 *
 * Cases (default 2 x 10^5 short ones and 8 long; --quick 4000 and 4), half initial prefill (prefix_len NULL, path PREFILL) and half extend (path
 * EXTEND): ragged batches of 1..4 sequences, chunks 1..8K (log-uniform, most short),
 * prefixes 0..128K (a few long cases, many short ones), GQA ratios 1..16 (5, 6, 12 drawn
 * more often), qk_dim and vo_dim in 64..256 independently; every workspace row past a
 * sequence's kv_len, and every row past kv_indptr[batch], is NaN (0x7F). One case in 8 is
 * adversarial: E4M3 codes over the whole range (subnormals, 448), equal keys, and one in
 * 4 of those NaN codes at visible positions (compared bit for bit only). Long cases:
 * only every k-th warp is emulated (the emulator's sample), and with chunks over 256 the
 * binary64 comparison is skipped (its cost is chunk x prefix x heads x dims).
 * --small: one small case (for compute-sanitizer memcheck / racecheck). --only I: short case
 * I of the run alone (to reproduce a failure it printed).
 *
 * A differing output is reported with its sequence, query, head and dim and both BF16
 * values in hex; so is the first output outside the bound.
 * Exit: 0 all cases bit-exact and inside the bound, 1 otherwise, 2 bad usage or a failure,
 * 77 no GPU (unless --emulator-only: then the emulator is held to the bound alone).
 */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "cli_parse.h"
#include "lowp/attn_gpu_emul.h"
#include "lowp/attn_gpu_extend.h"
#include "lowp/bits.h"
#include "lowp/cases.h"
#include "lowp/gpu_extend.h"
#include "lowp_test_base.h" /* tests/lib, named in gpu/extend.cmake */

typedef struct ecase {
    lowp_gpu_extend_args a;
    int32_t qo[5], kv[5], pre[5];
    float *q32;
    uint16_t *q, *emu, *gpu;
    uint8_t *k, *v;
    double *ref, *bound;
    size_t nout;
    int kind;      /* 0 prefill, 1 extend */
    int adversarial, nan_visible, ref_skipped;
    char desc[200];
} ecase;

typedef struct stats {
    size_t cases[2], mismatched[2], ref_cases[2], ref_outside[2], ref_skipped[2];
    size_t outputs_compared[2];
    double worst[2];
    char first_mismatch[512], first_outside[512];
} stats;

/* The draws are tests/lib/lowp_test_base.h's (lowp_splitmix64 underneath). */
static size_t irange(uint64_t *s, size_t lo, size_t hi) /* [lo, hi], hi < 2^31 */
{
    return (size_t)lowp_test_irange(s, (int)lo, (int)hi);
}
static size_t loguni(uint64_t *s, size_t lo, size_t hi) /* log-uniform in [lo, hi] */
{
    double x = exp(log((double)lo) +
                   lowp_test_urand(s) * (log((double)hi + 1.0) - log((double)lo)));
    size_t v = (size_t)x;
    return v < lo ? lo : (v > hi ? hi : v);
}

static uint8_t draw_code(uint64_t *s, int adversarial)
{
    unsigned sign = (lowp_splitmix64(s) & 1) ? 0x80u : 0u;
    if (adversarial) {
        uint8_t c = (uint8_t)(lowp_splitmix64(s) & 0x7F);
        return (uint8_t)(sign | (c == 0x7F ? 0x7E : c)); /* every finite code */
    }
    unsigned e = (unsigned)irange(s, 4, 10), m = (unsigned)irange(s, 0, 7);
    return (uint8_t)(sign | (e << 3) | m);
}

static void ecase_free(ecase *c)
{
    free(c->q32);
    free(c->q);
    free(c->k);
    free(c->v);
    free(c->emu);
    free(c->gpu);
    free(c->ref);
    free(c->bound);
    memset(c, 0, sizeof *c);
}

/* Case idx of the run (kind = idx % 2), from its own stream of the seed. longc: a long
 * case; small: the sanitizer's case. Returns 0, or -1 when out of memory. */
static int ecase_make(ecase *c, uint64_t seed, size_t idx, int longc, int small)
{
    static const size_t groups[] = {1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 5, 6, 12};
    static const size_t dims[] = {64, 64, 128, 128, 192, 256}; /* cost ~ dims: most short */
    memset(c, 0, sizeof *c);
    uint64_t s = seed ^ (0x9E3779B97F4A7C15ull * (idx + 1)) ^ (longc ? 0x10000000000ull : 0);
    lowp_splitmix64(&s);
    c->kind = small ? 1 : (int)(idx % 2); /* the sanitizer's case: an extend */
    c->adversarial = !longc && !small && irange(&s, 0, 7) == 0;
    c->nan_visible = c->adversarial && irange(&s, 0, 3) == 0;
    size_t nseq = small ? 2 : irange(&s, 1, longc ? 2 : 3);
    size_t G = small ? 5 : groups[irange(&s, 0, 12)];
    size_t HK = small ? 2 : (longc ? 8 / (G > 8 ? 8 : G) : (irange(&s, 0, 3) ? 1 : 2));
    if (HK == 0)
        HK = 1;
    size_t Dq = small ? 128 : dims[irange(&s, 0, 5)], Dv = small ? 64 : dims[irange(&s, 0, 5)];
    int long_chunk = longc && (idx % 4 != 3); /* else a long prefix (extend only) */
    c->qo[0] = c->kv[0] = 0;
    for (size_t b = 0; b < nseq; b++) {
        size_t ql, P;
        if (small) {
            ql = b ? 70 : 3;
            P = b ? 0 : 130;
        } else if (longc) {
            ql = long_chunk ? loguni(&s, 1024, 8192) : loguni(&s, 1, 64);
            P = long_chunk ? loguni(&s, 1, 16384) : loguni(&s, 16384, 131072);
        } else {
            ql = loguni(&s, 1, irange(&s, 0, 15) ? 40 : 512);
            P = irange(&s, 0, 3) ? loguni(&s, 1, 300) - 1 : 0;
        }
        if (c->kind == 0)
            P = 0;
        size_t slack = irange(&s, 0, 3);
        c->pre[b] = (int32_t)P;
        c->qo[b + 1] = c->qo[b] + (int32_t)ql;
        c->kv[b + 1] = c->kv[b] + (int32_t)(P + ql + slack);
    }
    size_t NQ = HK * G, nq = (size_t)c->qo[nseq], rows = (size_t)c->kv[nseq] + irange(&s, 0, 2);
    c->nout = nq * NQ * Dv;
    c->q32 = malloc(nq * NQ * Dq * sizeof *c->q32);
    c->q = malloc(nq * NQ * Dq * sizeof *c->q);
    c->k = malloc(rows * HK * Dq);
    c->v = malloc(rows * HK * Dv);
    c->emu = malloc(c->nout * sizeof *c->emu);
    c->gpu = malloc(c->nout * sizeof *c->gpu);
    c->ref = malloc(c->nout * sizeof *c->ref);
    c->bound = malloc(c->nout * sizeof *c->bound);
    if (!c->q32 || !c->q || !c->k || !c->v || !c->emu || !c->gpu || !c->ref || !c->bound)
        return -1;
    double qsc = c->adversarial ? exp2((double)irange(&s, 0, 12) - 6.0) : 0.5 + 3.5 * lowp_test_urand(&s);
    for (size_t x = 0; x < nq * NQ * Dq; x++) {
        c->q32[x] = (float)(qsc * lowp_test_gauss(&s));
        c->q[x] = lowp_bf16_from_f32(c->q32[x]);
    }
    memset(c->k, 0x7F, rows * HK * Dq); /* NaN poison: rows past each kv_len, and unused */
    memset(c->v, 0x7F, rows * HK * Dv);
    int equal_keys = c->adversarial && irange(&s, 0, 2) == 0;
    for (size_t b = 0; b < nseq; b++) {
        size_t r0 = (size_t)c->kv[b], n = (size_t)(c->pre[b] + c->qo[b + 1] - c->qo[b]);
        for (size_t r = r0; r < r0 + n; r++) {
            for (size_t x = 0; x < HK * Dq; x++)
                c->k[r * HK * Dq + x] =
                    equal_keys && r > r0 ? c->k[r0 * HK * Dq + x] : draw_code(&s, c->adversarial);
            for (size_t x = 0; x < HK * Dv; x++)
                c->v[r * HK * Dv + x] = draw_code(&s, c->adversarial);
        }
        if (c->nan_visible) { /* one NaN K code and one NaN V code inside the sequence */
            size_t r = r0 + irange(&s, 0, n - 1);
            c->k[r * HK * Dq + irange(&s, 0, HK * Dq - 1)] = 0x7F;
            r = r0 + irange(&s, 0, n - 1);
            c->v[r * HK * Dv + irange(&s, 0, HK * Dv - 1)] = 0xFF;
        }
    }
    c->a = (lowp_gpu_extend_args){.batch = nseq, .qo_indptr = c->qo, .kv_indptr = c->kv,
                                  .prefix_len = c->kind ? c->pre : NULL, .kv_rows = rows,
                                  .num_q_heads = NQ, .num_kv_heads = HK, .qk_dim = Dq,
                                  .vo_dim = Dv, .q = c->q, .k = c->k, .v = c->v, .threads = 1};
    if (longc) {
        c->a.sample = 61; /* a prime: the sampled warps fall on every sequence and head */
        c->a.sample_phase = idx;
        c->a.threads = 0;
    }
    c->ref_skipped = longc && long_chunk;
    snprintf(c->desc, sizeof c->desc,
             "%s case %zu%s: batch %zu, G %zu x %zu kv heads, dims %zu/%zu, q_len0 %d, prefix0 %d%s",
             c->kind ? "extend" : "prefill", idx, longc ? " (long)" : "", nseq, G, HK, Dq, Dv,
             c->qo[1], c->pre[0], c->adversarial ? ", adversarial" : "");
    return 0;
}

/* Sequence, query, head, dim of output x. */
static void locate(const ecase *c, size_t x, size_t *b, size_t *i, size_t *hq, size_t *d)
{
    size_t NQ = c->a.num_q_heads, Dv = c->a.vo_dim, row = x / (NQ * Dv);
    *d = x % Dv;
    *hq = (x / Dv) % NQ;
    *b = 0;
    while (*b + 1 < c->a.batch && (size_t)c->qo[*b + 1] <= row)
        (*b)++;
    *i = row - (size_t)c->qo[*b];
}

/* Device buffers reused from case to case (grown when a case needs more): a cudaMalloc
 * per case would cost more than the kernel. */
typedef struct dbuf {
    void *p;
    size_t cap;
} dbuf;
static dbuf g_dev[7];

static cudaError_t dev_get(int i, size_t bytes, void **out)
{
    if (bytes > g_dev[i].cap) {
        cudaFree(g_dev[i].p);
        g_dev[i].p = NULL;
        g_dev[i].cap = 0;
        cudaError_t e = cudaMalloc(&g_dev[i].p, bytes);
        if (e != cudaSuccess)
            return e;
        g_dev[i].cap = bytes;
    }
    *out = g_dev[i].p;
    return cudaSuccess;
}

static int run_gpu(ecase *c, char *why, size_t wl)
{
    const lowp_gpu_extend_args *a = &c->a;
    size_t nq = (size_t)c->qo[a->batch];
    void *dq = NULL, *dk = NULL, *dv = NULL, *dout = NULL, *dqo = NULL, *dkv = NULL, *dpre = NULL;
    int rc = 0;
#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            snprintf(why, wl, "%s: %s", #call, cudaGetErrorString(e_));                            \
            rc = -1;                                                                               \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)
    CK(dev_get(0, nq * a->num_q_heads * a->qk_dim * 2, &dq));
    CK(dev_get(1, a->kv_rows * a->num_kv_heads * a->qk_dim, &dk));
    CK(dev_get(2, a->kv_rows * a->num_kv_heads * a->vo_dim, &dv));
    CK(dev_get(3, c->nout * 2, &dout));
    CK(dev_get(4, sizeof c->qo, &dqo));
    CK(dev_get(5, sizeof c->kv, &dkv));
    CK(dev_get(6, sizeof c->pre, &dpre));
    CK(cudaMemcpy(dq, c->q, nq * a->num_q_heads * a->qk_dim * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dk, c->k, a->kv_rows * a->num_kv_heads * a->qk_dim, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dv, c->v, a->kv_rows * a->num_kv_heads * a->vo_dim, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dqo, c->qo, sizeof c->qo, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dkv, c->kv, sizeof c->kv, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dpre, c->pre, sizeof c->pre, cudaMemcpyHostToDevice));
    CK(cudaMemset(dout, 0xFF, c->nout * 2)); /* 0xFFFF: never an output of the kernel */
    lowp_gpu_extend_desc d = {.host = *a, .qo_indptr_dev = dqo, .kv_indptr_dev = dkv,
                              .prefix_len_dev = a->prefix_len ? dpre : NULL, .q_dev = dq,
                              .k_dev = dk, .v_dev = dv};
    if (lowp_gpu_extend(&d, dout, 0, why, wl)) {
        rc = -1;
        goto out;
    }
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(c->gpu, dout, c->nout * 2, cudaMemcpyDeviceToHost));
out:
    return rc;
#undef CK
}

/* CPU side of a case: emulator (into emu, 0xFFFF where not emulated) and reference. */
static int cpu_side(ecase *c, int want_ref, char *why, size_t wl)
{
    memset(c->emu, 0xFF, c->nout * sizeof *c->emu);
    if (lowp_gpu_extend_emulate(&c->a, c->emu, why, wl))
        return -1;
    if (!want_ref || c->ref_skipped)
        return 0;
    return lowp_gpu_extend_reference(&c->a, c->q32, c->ref, c->bound, why, wl);
}

/* Compare one case (gpu NULL: emulator only) and add to st. */
static void compare(const ecase *c, const uint16_t *gpu, int want_ref, stats *st)
{
    int k = c->kind;
    st->cases[k]++;
    size_t b, i, hq, d;
    if (gpu) {
        size_t ndiff = 0, first = 0;
        for (size_t x = 0; x < c->nout; x++) {
            if (c->emu[x] == 0xFFFFu) /* not emulated (a long case's unsampled warp) */
                continue;
            st->outputs_compared[k]++;
            if (gpu[x] != c->emu[x] && ndiff++ == 0)
                first = x;
        }
        if (ndiff) {
            st->mismatched[k]++;
            locate(c, first, &b, &i, &hq, &d);
            printf("MISMATCH %s: %zu outputs differ; first: seq %zu query %zu head %zu dim %zu: "
                   "gpu 0x%04x (%a) emulator 0x%04x (%a)\n",
                   c->desc, ndiff, b, i, hq, d, gpu[first],
                   (double)lowp_f32_from_bf16(gpu[first]), c->emu[first],
                   (double)lowp_f32_from_bf16(c->emu[first]));
            if (!st->first_mismatch[0])
                snprintf(st->first_mismatch, sizeof st->first_mismatch,
                         "%s: seq %zu query %zu head %zu dim %zu: gpu 0x%04x emulator 0x%04x",
                         c->desc, b, i, hq, d, gpu[first], c->emu[first]);
        }
    }
    if (!want_ref)
        return;
    if (c->ref_skipped) {
        st->ref_skipped[k]++;
        return;
    }
    const uint16_t *got = gpu ? gpu : c->emu;
    int compared = 0;
    size_t outside = 0, first = 0;
    for (size_t x = 0; x < c->nout; x++) {
        if (!isfinite(c->bound[x]) || (gpu == NULL && c->emu[x] == 0xFFFFu))
            continue; /* not compared, or not emulated (a long case's unsampled warp) */
        compared = 1;
        double err = fabs((double)lowp_f32_from_bf16(got[x]) - c->ref[x]);
        double ratio = c->bound[x] > 0 ? err / c->bound[x] : (err > 0 ? INFINITY : 0.0);
        if (!(ratio <= 1.0) && outside++ == 0)
            first = x;
        if (ratio > st->worst[k] || ratio != ratio)
            st->worst[k] = ratio;
    }
    st->ref_cases[k] += compared;
    if (outside) {
        st->ref_outside[k]++;
        locate(c, first, &b, &i, &hq, &d);
        printf("OUTSIDE BOUND %s: %zu outputs; first: seq %zu query %zu head %zu dim %zu: "
               "got %.9g exact %.9g bound %.3g\n",
               c->desc, outside, b, i, hq, d, (double)lowp_f32_from_bf16(got[first]),
               c->ref[first], c->bound[first]);
        if (!st->first_outside[0])
            snprintf(st->first_outside, sizeof st->first_outside,
                     "%s: seq %zu query %zu head %zu dim %zu: got %.9g exact %.9g bound %.3g",
                     c->desc, b, i, hq, d, (double)lowp_f32_from_bf16(got[first]), c->ref[first],
                     c->bound[first]);
    }
}

static int usage(void)
{
    fprintf(stderr, "usage: lowp_gpu_extend_check REPORT.md [--quick] [--cases N] [--long N] "
                    "[--seed S] [--emulator-only] [--small] [--only I]\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argv[1][0] == '-')
        return usage();
    size_t ncases = 200000, nlong = 8; /* short cases: half prefill, half extend */
    uint64_t seed = 0x5eed2026ull;
    int emulator_only = 0, small = 0;
    long long only = -1;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--quick")) {
            ncases = 4000;
            nlong = 4;
        } else if (!strcmp(a, "--emulator-only")) {
            emulator_only = 1;
        } else if (!strcmp(a, "--small")) {
            small = 1;
        } else if (v && !strcmp(a, "--cases")) {
            ncases = lowp_cli_parse_count("--cases", v, 1);
            i++;
        } else if (v && !strcmp(a, "--long")) {
            nlong = lowp_cli_parse_count("--long", v, 1);
            i++;
        } else if (v && !strcmp(a, "--only")) {
            only = (long long)lowp_cli_parse_u64("--only", v, 0, UINT32_MAX);
            i++;
        } else if (v && !strcmp(a, "--seed")) {
            seed = lowp_cli_parse_seed("--seed", v);
            i++;
        } else
            return usage();
    }
    int ndev = 0;
    if (!emulator_only && (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0)) {
        printf("lowp_gpu_extend_check: no CUDA device: skipped\n");
        return 77;
    }
    FILE *rep = fopen(argv[1], "w");
    if (!rep) {
        fprintf(stderr, "lowp_gpu_extend_check: cannot write %s\n", argv[1]);
        return 2;
    }
    if (small) {
        ncases = 1;
        nlong = 0;
    }
    stats st;
    memset(&st, 0, sizeof st);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const size_t batch = 512, total = ncases + nlong;
    ecase *cs = calloc(batch, sizeof *cs);
    int fail = 0;
    char why[512] = "";
    if (cs == NULL) {
        fprintf(stderr, "lowp_gpu_extend_check: out of memory\n");
        fclose(rep);
        return 2;
    }
    for (size_t c0 = 0; c0 < total && !fail; c0 += batch) {
        size_t n = total - c0 < batch ? total - c0 : batch;
        /* short cases on the CPU in parallel (one thread each), long ones one at a time
         * with every thread */
#pragma omp parallel for schedule(dynamic, 1)
        for (size_t j = 0; j < n; j++) {
            size_t idx = c0 + j;
            int longc = idx >= ncases;
            if (longc || (only >= 0 && (long long)idx != only))
                continue;
            char w[256];
            if (ecase_make(&cs[j], seed, idx, 0, small) || cpu_side(&cs[j], 1, w, sizeof w)) {
#pragma omp critical
                {
                    snprintf(why, sizeof why, "case %zu: %s", idx, w);
                    fail = 1;
                }
            }
        }
        for (size_t j = 0; j < n && !fail; j++) {
            size_t idx = c0 + j;
            if (only >= 0 && (long long)idx != only)
                continue;
            if (idx >= ncases) {
                if (ecase_make(&cs[j], seed, idx - ncases, 1, 0) ||
                    cpu_side(&cs[j], 1, why, sizeof why)) {
                    fail = 1;
                    break;
                }
            }
            if (!emulator_only && run_gpu(&cs[j], why, sizeof why)) {
                fail = 1;
                break;
            }
            compare(&cs[j], emulator_only ? NULL : cs[j].gpu, 1, &st);
            if (idx >= ncases || small)
                printf("%s: done\n", cs[j].desc);
        }
        for (size_t j = 0; j < n; j++)
            ecase_free(&cs[j]);
    }
    free(cs);
    for (int i = 0; i < 7; i++)
        cudaFree(g_dev[i].p);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double sec = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (fail) {
        fprintf(stderr, "lowp_gpu_extend_check: %s\n", why);
        fclose(rep);
        return 2;
    }
    size_t bad = 0;
    fprintf(rep, "# GPU extend / prefill attention: conformance\n\n");
    fprintf(rep, "Seed %llu, %zu short + %zu long cases, %s, %.1f s "
                 "(lowp/attn_gpu_extend.h; gpu/check/extend_check.c).\n\n",
            (unsigned long long)seed, ncases, nlong,
            emulator_only ? "emulator against binary64 only (no GPU)" : "GPU", sec);
    fprintf(rep, "| kernel | cases | outputs compared bit for bit | cases not bit-exact | "
                 "cases vs binary64 | outside bound | worst err/bound | binary64 skipped |\n");
    fprintf(rep, "|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int k = 0; k < 2; k++) {
        fprintf(rep, "| %s | %zu | %zu | %zu | %zu | %zu | %.3g | %zu |\n",
                k ? "extend" : "prefill", st.cases[k], st.outputs_compared[k], st.mismatched[k],
                st.ref_cases[k], st.ref_outside[k], st.worst[k], st.ref_skipped[k]);
        printf("gpu extend conform (%s): %zu cases, %zu outputs compared, %zu not bit-exact, "
               "%zu/%zu outside bound, worst ratio %.3g, %zu without binary64\n",
               k ? "extend" : "prefill", st.cases[k], st.outputs_compared[k], st.mismatched[k],
               st.ref_outside[k], st.ref_cases[k], st.worst[k], st.ref_skipped[k]);
        bad += st.mismatched[k] + st.ref_outside[k];
    }
    if (st.first_mismatch[0])
        fprintf(rep, "\nFirst output not bit-exact: %s\n", st.first_mismatch);
    if (st.first_outside[0])
        fprintf(rep, "\nFirst output outside the bound: %s\n", st.first_outside);
    fclose(rep);
    printf("lowp_gpu_extend_check: %s, %.1f s\n", bad ? "FAILED" : "passed", sec);
    return bad ? 1 : 0;
}
