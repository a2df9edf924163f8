/* gpu/check/extend_check.c: the conformance run of the GPU extend / prefill attention kernel
 * (lowp/gpu_extend.h) against its CPU emulator (bit for bit) and binary64 attention (within
 * the bound derived in lowp/attn_gpu_extend.h): lowp_gpu_extend_conform_run
 * (lowp/gpu_extend_conform.h), behind `lowp gpu conform --kernel extend|prefill` (the
 * options below are that command's) and tools/gpu_run.sh step extend.
 *
 *   lowp gpu conform --kernel extend,prefill [--quick] [--cases N] [--long N] [--ws N]
 *                    [--ws-long N] [--seed S] [--threads N] [--emulator-only] [--small]
 *                    [--only I] [--from I]
 *
 * Cases (default 10^5 short ones and 4 long per kernel; --quick 2000 and 2; --cases N and
 * --long N are per kernel): case indices 0..2N-1, the even ones initial prefills
 * (prefix_len NULL, path PREFILL), the odd ones extends (path EXTEND); a run of one kernel
 * runs its indices alone, the same cases: ragged batches of 1..4 sequences, chunks 1..8K (log-uniform, most short),
 * prefixes 0..128K (a few long cases, many short ones), GQA ratios 1..16 (5, 6, 12 drawn
 * more often), qk_dim and vo_dim in 64..256 independently; every workspace row past a
 * sequence's kv_len, and every row past kv_indptr[batch], is NaN (0x7F). One case in 8 is
 * adversarial: E4M3 codes over the whole range (subnormals, 448), equal keys, and one in
 * 4 of those NaN codes at visible positions (compared bit for bit only). Long cases:
 * only every k-th warp is emulated (the emulator's sample), and with chunks over 256 the
 * binary64 comparison is skipped (its cost is chunk x prefix x heads x dims).
 * --ws N, --ws-long N (default 2000 and 2; --quick 100 and 1): cases of the workspace path
 * (ws_case below: the dequantize kernel's bytes, the attention on them, the chunk's
 * quantize-on-write; the short ones in parallel, a thread each, like the short attention
 * cases); with --emulator-only the fill runs on the host
 * (lowp_gpu_extend_workspace_emulate: the kernel's block function) against the model.
 * The extend kernel's run also checks the fill's E4M3 cast on all 65,536 BF16 codes
 * against lowp's codec (ws_cast_check; its mismatches count as failed checks): on the GPU
 * the device's, with --emulator-only its patch logic over lowp's model of the cvt.
 * --small: one small case (for compute-sanitizer memcheck / racecheck). --only I: short case
 * I of the run alone (to reproduce a failure it printed). --from I: the short cases from
 * index I per kernel on (a run too long for one device call, split: `--cases N --long 0 --ws 0
 * --from N/2` and `--cases N/2` cover the same cases as `--cases N`).
 *
 * A differing output is reported with its sequence, query, head and dim and both BF16
 * values in hex; so is the first output outside the bound.
 * The run returns 0 (the counts say whether every case is bit-exact and inside the bound),
 * 77 no GPU (unless --emulator-only: then the emulator is held to the bound alone), -1 a
 * failure.
 */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "lowp/attn_gpu_emul.h"
#include "lowp/attn_gpu_extend.h"
#include "lowp/bits.h"
#include "lowp/cases.h"
#include "lowp/format.h"
#include "lowp/gpu_extend.h"
#include "lowp/gpu_extend_conform.h"
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
    /* precheck's summary of a short case (its thread computes it; the serial loop adds it) */
    int pre_done, pre_clean, pre_compared;
    size_t pre_outputs;
    double pre_worst;
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

/* A case's arrays freed, its description and counts kept. */
static void ecase_release(ecase *c)
{
    free(c->q32);
    free(c->q);
    free(c->k);
    free(c->v);
    free(c->emu);
    free(c->gpu);
    free(c->ref);
    free(c->bound);
    c->q32 = NULL, c->q = c->emu = c->gpu = NULL, c->k = c->v = NULL, c->ref = c->bound = NULL;
}

static void ecase_free(ecase *c)
{
    ecase_release(c);
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
 * per case would cost more than the kernel. One set an OpenMP thread: the short cases run
 * on the GPU from the thread that made them, each on its own per-thread stream
 * (cudaStreamPerThread), so one thread's copies and kernel overlap the other threads'
 * emulation instead of waiting in one serial loop. Buffers 0..6 are the attention cases',
 * WS_DBUF.. the workspace cases' (ws_case). */
typedef struct dbuf {
    void *p;
    size_t cap;
} dbuf;
enum { WS_DBUF = 7, NDBUF = WS_DBUF + 12 };
static dbuf *g_dev;  /* [g_ndev_sets][NDBUF] */
static int g_ndev_sets;

static cudaError_t dev_get(int i, size_t bytes, void **out)
{
    dbuf *d = &g_dev[(size_t)omp_get_thread_num() * NDBUF + (size_t)i];
    if (bytes > d->cap) {
        cudaFree(d->p);
        d->p = NULL;
        d->cap = 0;
        cudaError_t e = cudaMalloc(&d->p, bytes);
        if (e != cudaSuccess)
            return e;
        d->cap = bytes;
    }
    *out = d->p;
    return cudaSuccess;
}

static int run_gpu(ecase *c, char *why, size_t wl)
{
    const lowp_gpu_extend_args *a = &c->a;
    const cudaStream_t st = cudaStreamPerThread;
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
    CK(cudaMemcpyAsync(dq, c->q, nq * a->num_q_heads * a->qk_dim * 2, cudaMemcpyHostToDevice, st));
    CK(cudaMemcpyAsync(dk, c->k, a->kv_rows * a->num_kv_heads * a->qk_dim, cudaMemcpyHostToDevice,
                       st));
    CK(cudaMemcpyAsync(dv, c->v, a->kv_rows * a->num_kv_heads * a->vo_dim, cudaMemcpyHostToDevice,
                       st));
    CK(cudaMemcpyAsync(dqo, c->qo, sizeof c->qo, cudaMemcpyHostToDevice, st));
    CK(cudaMemcpyAsync(dkv, c->kv, sizeof c->kv, cudaMemcpyHostToDevice, st));
    CK(cudaMemcpyAsync(dpre, c->pre, sizeof c->pre, cudaMemcpyHostToDevice, st));
    CK(cudaMemsetAsync(dout, 0xFF, c->nout * 2, st)); /* 0xFFFF: never an output of the kernel */
    lowp_gpu_extend_desc d = {.host = *a, .qo_indptr_dev = dqo, .kv_indptr_dev = dkv,
                              .prefix_len_dev = a->prefix_len ? dpre : NULL, .q_dev = dq,
                              .k_dev = dk, .v_dev = dv};
    if (lowp_gpu_extend(&d, dout, st, why, wl)) {
        rc = -1;
        goto out;
    }
    CK(cudaMemcpyAsync(c->gpu, dout, c->nout * 2, cudaMemcpyDeviceToHost, st));
    CK(cudaStreamSynchronize(st));
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

/* Failure lines printed at most (the counts in the report are complete). */
#define MAX_LINES 20
static size_t g_lines;
/* Where the run's progress and failure lines go (lowp_gpu_extend_conform_run's log). */
static FILE *g_log;

/* The counts compare() would add for case c (gpu NULL: emulator only; the reference always
 * wanted), computed where the case was made so that the serial loop does not walk every
 * output again; pre_clean: nothing differs and nothing is outside the bound, so compare()
 * would print nothing (unclean cases go through compare() itself). */
static void precheck(ecase *c, const uint16_t *gpu)
{
    size_t n = 0;
    int clean = 1;
    for (size_t x = 0; gpu && x < c->nout; x++) {
        if (c->emu[x] == 0xFFFFu)
            continue;
        n++;
        clean &= gpu[x] == c->emu[x];
    }
    const uint16_t *got = gpu ? gpu : c->emu;
    double worst = 0.0;
    int compared = 0;
    for (size_t x = 0; !c->ref_skipped && x < c->nout; x++) {
        if (!isfinite(c->bound[x]) || (gpu == NULL && c->emu[x] == 0xFFFFu))
            continue;
        compared = 1;
        double err = fabs((double)lowp_f32_from_bf16(got[x]) - c->ref[x]);
        double ratio = c->bound[x] > 0 ? err / c->bound[x] : (err > 0 ? INFINITY : 0.0);
        clean &= ratio <= 1.0;
        worst = ratio > worst ? ratio : worst;
    }
    c->pre_done = 1;
    c->pre_clean = clean;
    c->pre_compared = compared;
    c->pre_outputs = n;
    c->pre_worst = worst;
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
            if (st->mismatched[0] + st->mismatched[1] == 1) {
                /* the first failing case in detail: how far apart (BF16 ulps when both are
                 * finite and of one sign), and which rows (a wrong index shows as whole rows
                 * or heads, an arithmetic difference as scattered 1-ulp outputs) */
                size_t near = 0, shown = 0, Dv = c->a.vo_dim;
                for (size_t x = 0; x < c->nout; x++) {
                    if (c->emu[x] == 0xFFFFu || gpu[x] == c->emu[x])
                        continue;
                    int dist = (int)gpu[x] - (int)c->emu[x];
                    near += (gpu[x] >> 15) == (c->emu[x] >> 15) && (dist == 1 || dist == -1);
                    if (shown < 8 && x % Dv == 0) {
                        size_t b2, i2, h2, d2;
                        locate(c, x, &b2, &i2, &h2, &d2);
                        fprintf(g_log, "  differing row: seq %zu query %zu head %zu\n", b2, i2, h2);
                        shown++;
                    }
                }
                fprintf(g_log, "  %zu of %zu differing outputs are 1 BF16 ulp apart\n", near, ndiff);
            }
            locate(c, first, &b, &i, &hq, &d);
            if (g_lines++ < MAX_LINES)
                fprintf(g_log, "MISMATCH %s: %zu outputs differ; first: seq %zu query %zu head %zu dim %zu: "
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
        if (g_lines++ < MAX_LINES)
            fprintf(g_log, "OUTSIDE BOUND %s: %zu outputs; first: seq %zu query %zu head %zu dim %zu: "
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

/* Every workspace byte of a workspace case against the model's values (value, sign of
 * zero, NaN); prints the first difference. Returns 1 if any differs. */
static size_t ws_compare(size_t idx, size_t nseq, size_t HK, size_t Dq, size_t Dv,
                         const size_t *len, const int32_t *kv, const int32_t *pre,
                         const uint8_t *kws, const uint8_t *vws, double *const *kexp,
                         double *const *vexp, size_t *bytes_checked)
{
    size_t wbad = 0;
    for (size_t b = 0; b < nseq && !wbad; b++)
        for (size_t w = 0; w < 2 && !wbad; w++) {
            size_t D = w ? Dv : Dq, n = len[b] * HK * D;
            const uint8_t *ws = (w ? vws : kws) + (size_t)kv[b] * HK * D;
            const double *ex = w ? vexp[b] : kexp[b];
            for (size_t x = 0; x < n; x++) {
                double got = lowp_decode_f64(LOWP_E4M3, ws[x]);
                int same = (isnan(got) && isnan(ex[x])) ||
                           (got == ex[x] && signbit(got) == signbit(ex[x]));
                (*bytes_checked)++;
                if (!same) {
                    fprintf(g_log, "WORKSPACE MISMATCH case %zu: seq %zu %s position %zu head %zu "
                           "dim %zu (prefix %d): gpu code 0x%02x (%a), model %a\n",
                           idx, b, w ? "V" : "K", x / (HK * D), x / D % HK, x % D, pre[b],
                           ws[x], got, ex[x]);
                    wbad = 1;
                    break;
                }
            }
        }
    return wbad;
}

/* ---- The workspace path (SGLang path 2): gather + dequantize, attention, quantize-on-write
 * One case: a random NVFP4 cache (layout, V scale order, page size 1 / 16 / 64, shuffled
 * pages, per-tensor or per-head global scales, some large enough that the workspace cast
 * overflows to NaN), sequences with cached prefixes and BF16 chunks. Checked: every
 * workspace byte against lowp_kv_path_run(EXTEND) (value, sign of zero, NaN), the
 * attention on the GPU workspace against the emulator on the same bytes, and the chunk's
 * quantize-on-write (lowp_gpu_kv_write) against lowp_kvcache_write_pos, every cache byte.
 * Returns 0 (adds to *bad the failed checks) or -1 on an error (why). */
static int ws_case(uint64_t seed, size_t idx, int longc, int gpu, size_t *bad,
                   size_t *bytes_checked, char *why, size_t wl)
{
    static const size_t dims[] = {64, 128, 192, 256}, pss[] = {1, 16, 64};
    uint64_t s = seed ^ (0xD1B54A32D192ED03ull * (idx + 7));
    lowp_splitmix64(&s);
    size_t nseq = irange(&s, 1, 3), HK = irange(&s, 1, 3), G = irange(&s, 1, 6);
    size_t Dq = dims[irange(&s, 0, 3)], Dv = dims[irange(&s, 0, 3)], PS = pss[irange(&s, 0, 2)];
    if (!longc && irange(&s, 0, 3) == 0) {
        /* a quarter of the short cases: 5, 8 or 12 KV heads, so that the fill's staged units
         * (gpu/kernels/extend.cu, ws_staged_plan) also split a position's heads into groups
         * (more than 1 KB of code bytes a position: 8 heads at Dq + Dv >= 320; 5 at 512,
         * where the group is one head) besides holding several positions */
        static const size_t many[] = {5, 8, 12};
        HK = many[irange(&s, 0, 2)];
        G = irange(&s, 1, 2);
    }
    lowp_kv_config cfg = lowp_kv_config_default(LOWP_NVFP4, 1, PS, HK, Dq, Dv);
    cfg.layout = irange(&s, 0, 1) ? LOWP_KV_HND : LOWP_KV_NHD;
    if (PS % 4 == 0 && irange(&s, 0, 1))
        cfg.v_sf_order = LOWP_KV_SF_INTERLEAVE4;
    cfg.scale_gran = irange(&s, 0, 1) ? LOWP_KV_SCALE_HEAD : LOWP_KV_SCALE_TENSOR;
    int32_t qo[4] = {0}, kv[4] = {0}, pre[3], ptr[4] = {0}, last[3];
    size_t len[3], pages = 0;
    for (size_t b = 0; b < nseq; b++) {
        pre[b] = (int32_t)(longc ? loguni(&s, 16384, 131072) : loguni(&s, 1, 300) - 1);
        size_t ql = loguni(&s, 1, 64);
        qo[b + 1] = qo[b] + (int32_t)ql;
        len[b] = (size_t)pre[b] + ql; /* the chunk's slots are allocated: it is written after */
        kv[b + 1] = kv[b] + (int32_t)(len[b] + irange(&s, 0, 2));
        size_t np = (len[b] + PS - 1) / PS;
        ptr[b + 1] = ptr[b] + (int32_t)np;
        last[b] = (int32_t)(len[b] - (np - 1) * PS);
        pages += np;
    }
    cfg.num_pages = pages + irange(&s, 0, 3); /* unused pages stay poisoned */
    size_t NQ = HK * G, nq = (size_t)qo[nseq], rows = (size_t)kv[nseq];
    size_t ng = cfg.scale_gran == LOWP_KV_SCALE_HEAD ? HK : 1;
    float kg[12], vg[12];
    for (size_t h = 0; h < ng; h++) { /* 2^-9 .. 2^-1: the large ones overflow the cast */
        kg[h] = (float)exp2(-(double)irange(&s, 1, 9));
        vg[h] = (float)exp2(-(double)irange(&s, 1, 9));
    }
    int32_t *idxs = malloc(pages * sizeof *idxs);
    int64_t *slots = malloc(nq * sizeof *slots);
    size_t nkf = 0, nvf = 0;
    for (size_t b = 0; b < nseq; b++) {
        nkf = len[b] * HK * Dq > nkf ? len[b] * HK * Dq : nkf;
        nvf = len[b] * HK * Dv > nvf ? len[b] * HK * Dv : nvf;
    }
    float *kf = malloc(nkf * sizeof *kf), *vf = malloc(nvf * sizeof *vf);
    uint16_t *kch = malloc(nq * HK * Dq * 2), *vch = malloc(nq * HK * Dv * 2);
    uint16_t *q = malloc(nq * NQ * Dq * 2), *og = malloc(nq * NQ * Dv * 2),
             *oe = malloc(nq * NQ * Dv * 2);
    uint8_t *kws = malloc(rows * HK * Dq), *vws = malloc(rows * HK * Dv);
    lowp_kvcache *cc = NULL, *back = NULL;
    lowp_gpu_kvcache *gc = NULL;
    void *dbufs[9] = {NULL};
    int rc = 0;
    if (!idxs || !slots || !kf || !vf || !kch || !vch || !q || !og || !oe || !kws || !vws) {
        rc = -1;
        snprintf(why, wl, "workspace case %zu: out of memory", idx);
        goto out;
    }
    for (size_t i = 0; i < pages; i++) /* shuffled pages */
        idxs[i] = (int32_t)i;
    for (size_t i = pages; i > 1; i--) {
        size_t j = irange(&s, 0, i - 1);
        int32_t t = idxs[i - 1];
        idxs[i - 1] = idxs[j];
        idxs[j] = t;
    }
    lowp_kv_page_table pt = {nseq, ptr, idxs, last};
    if (lowp_kvcache_create(&cfg, &cc, why, wl) || lowp_kvcache_create(&cfg, &back, why, wl) ||
        lowp_kvcache_set_global_scales(cc, kg, vg, ng, why, wl) ||
        (gpu && (lowp_gpu_kvcache_create(&cfg, &gc, why, wl) ||
                 lowp_gpu_kvcache_set_global_scales(gc, kg, vg, ng, why, wl)))) {
        rc = -1;
        goto out;
    }
    for (size_t x = 0; x < nq * NQ * Dq; x++)
        q[x] = lowp_bf16_from_f32((float)lowp_test_gauss(&s));
    /* per sequence: float K/V (the chunk's rounded to BF16, the kernels' input), the prefix
     * written into the CPU cache, the model's workspace values kept for the comparison */
    double **kexp = calloc(nseq, sizeof *kexp), **vexp = calloc(nseq, sizeof *vexp);
    if (!kexp || !vexp) {
        rc = -1;
        snprintf(why, wl, "out of memory");
        goto out2;
    }
    for (size_t b = 0; b < nseq; b++) {
        double amp = exp2((double)irange(&s, 0, 12)); /* up to 4096: past 448 after scaling */
        for (size_t x = 0; x < len[b] * HK * Dq; x++)
            kf[x] = (float)(amp * lowp_test_gauss(&s));
        for (size_t x = 0; x < len[b] * HK * Dv; x++)
            vf[x] = (float)(amp * lowp_test_gauss(&s));
        size_t P = (size_t)pre[b];
        for (size_t t = P; t < len[b]; t++) { /* the chunk: BF16 values */
            size_t i = (size_t)qo[b] + t - P;
            for (size_t x = 0; x < HK * Dq; x++) {
                kch[i * HK * Dq + x] = lowp_bf16_from_f32(kf[t * HK * Dq + x]);
                kf[t * HK * Dq + x] = lowp_f32_from_bf16(kch[i * HK * Dq + x]);
            }
            for (size_t x = 0; x < HK * Dv; x++) {
                vch[i * HK * Dv + x] = lowp_bf16_from_f32(vf[t * HK * Dv + x]);
                vf[t * HK * Dv + x] = lowp_f32_from_bf16(vch[i * HK * Dv + x]);
            }
            size_t page, slot;
            lowp_kv_locate(&pt, PS, b, t, &page, &slot, NULL, 0);
            slots[i] = (int64_t)(page * PS + slot);
        }
        for (size_t t = 0; t < P; t++)
            if (lowp_kvcache_write_pos(cc, &pt, b, t, kf + t * HK * Dq, vf + t * HK * Dv, NULL,
                                       NULL, why, wl)) {
                rc = -1;
                goto out2;
            }
        lowp_kv_path_args pa = lowp_kv_path_args_init(LOWP_KV_PATH_EXTEND, &cfg, len[b], 0, NQ,
                                                       NULL, kf, vf);
        pa.k_gs = kg;
        pa.v_gs = vg;
        pa.chunk_start = P;
        kexp[b] = malloc(len[b] * HK * Dq * sizeof(double));
        vexp[b] = malloc(len[b] * HK * Dv * sizeof(double));
        if (!kexp[b] || !vexp[b] ||
            lowp_kv_path_run(&pa, 1, NULL, kexp[b], vexp[b], NULL, NULL, NULL, why, wl)) {
            rc = -1;
            goto out2;
        }
    }
    if (!gpu) { /* the kernel's own block function on the host */
        lowp_gpu_extend_args ea = {.batch = nseq, .qo_indptr = qo, .kv_indptr = kv,
                                   .prefix_len = pre, .kv_rows = rows, .num_q_heads = NQ,
                                   .num_kv_heads = HK, .qk_dim = Dq, .vo_dim = Dv, .q = q,
                                   .k = kws, .v = vws};
        memset(kws, 0x7F, rows * HK * Dq);
        memset(vws, 0x7F, rows * HK * Dv);
        if (lowp_gpu_extend_workspace_emulate(cc, &pt, &ea, kch, vch, kws, vws, why, wl)) {
            rc = -1;
            goto out2;
        }
        *bad += ws_compare(idx, nseq, HK, Dq, Dv, len, kv, pre, kws, vws, kexp, vexp,
                           bytes_checked);
        goto out2;
    }
    if (lowp_gpu_kvcache_upload(gc, cc, why, wl)) {
        rc = -1;
        goto out2;
    }
    {
#define WCK(call)                                                                                  \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            snprintf(why, wl, "%s: %s", #call, cudaGetErrorString(e_));                            \
            rc = -1;                                                                               \
            goto out2;                                                                             \
        }                                                                                          \
    } while (0)
        const cudaStream_t st = cudaStreamPerThread;
        size_t sz[9] = {sizeof ptr, pages * 4, sizeof qo, sizeof kv, sizeof pre,
                        nq * HK * Dq * 2, nq * HK * Dv * 2, rows * HK * Dq, rows * HK * Dv};
        for (int i = 0; i < 9; i++)
            WCK(dev_get(WS_DBUF + i, sz[i] ? sz[i] : 16, &dbufs[i]));
        const void *hs[7] = {ptr, idxs, qo, kv, pre, kch, vch};
        for (int i = 0; i < 7; i++)
            WCK(cudaMemcpyAsync(dbufs[i], hs[i], sz[i], cudaMemcpyHostToDevice, st));
        /* NaN poison where nothing is written (the pooled buffers hold an earlier case's) */
        WCK(cudaMemsetAsync(dbufs[7], 0x7F, sz[7], st));
        WCK(cudaMemsetAsync(dbufs[8], 0x7F, sz[8], st));
        lowp_gpu_extend_args ea = {.batch = nseq, .qo_indptr = qo, .kv_indptr = kv,
                                   .prefix_len = pre, .kv_rows = rows, .num_q_heads = NQ,
                                   .num_kv_heads = HK, .qk_dim = Dq, .vo_dim = Dv, .q = q,
                                   .k = kws, .v = vws, .threads = 1};
        lowp_gpu_extend_ws_desc wd = {.cache = gc, .pt_host = &pt, .pt_indptr_dev = dbufs[0],
                                      .pt_indices_dev = dbufs[1], .host = ea,
                                      .qo_indptr_dev = dbufs[2], .kv_indptr_dev = dbufs[3],
                                      .prefix_len_dev = dbufs[4], .k_chunk_dev = dbufs[5],
                                      .v_chunk_dev = dbufs[6]};
        if (lowp_gpu_extend_workspace(&wd, dbufs[7], dbufs[8], st, why, wl)) {
            rc = -1;
            goto out2;
        }
        WCK(cudaMemcpyAsync(kws, dbufs[7], sz[7], cudaMemcpyDeviceToHost, st));
        WCK(cudaMemcpyAsync(vws, dbufs[8], sz[8], cudaMemcpyDeviceToHost, st));
        WCK(cudaStreamSynchronize(st));
        *bad += ws_compare(idx, nseq, HK, Dq, Dv, len, kv, pre, kws, vws, kexp, vexp,
                           bytes_checked);
        /* the attention on the GPU's workspace, against the emulator on the same bytes */
        lowp_gpu_extend_desc d = {.host = ea, .qo_indptr_dev = dbufs[2], .kv_indptr_dev = dbufs[3],
                                  .prefix_len_dev = dbufs[4], .q_dev = NULL, .k_dev = dbufs[7],
                                  .v_dev = dbufs[8]};
        void *dq = NULL, *dout = NULL;
        WCK(dev_get(WS_DBUF + 9, nq * NQ * Dq * 2, &dq));
        WCK(dev_get(WS_DBUF + 10, nq * NQ * Dv * 2, &dout));
        WCK(cudaMemcpyAsync(dq, q, nq * NQ * Dq * 2, cudaMemcpyHostToDevice, st));
        d.q_dev = dq;
        int arc = lowp_gpu_extend(&d, dout, st, why, wl);
        cudaError_t e2 = cudaSuccess;
        if (!arc)
            e2 = cudaMemcpyAsync(og, dout, nq * NQ * Dv * 2, cudaMemcpyDeviceToHost, st);
        if (!arc && e2 == cudaSuccess)
            e2 = cudaStreamSynchronize(st);
        if (arc || e2 != cudaSuccess) {
            if (e2 != cudaSuccess)
                snprintf(why, wl, "extend after the workspace: %s", cudaGetErrorString(e2));
            rc = -1;
            goto out2;
        }
        memset(oe, 0xFF, nq * NQ * Dv * 2); /* 0xFFFF: not emulated (a long case) */
        if (longc)
            ea.sample = 31, ea.sample_phase = idx, ea.threads = 0;
        if (lowp_gpu_extend_emulate(&ea, oe, why, wl)) {
            rc = -1;
            goto out2;
        }
        for (size_t x = 0; x < nq * NQ * Dv; x++)
            if (oe[x] != 0xFFFFu && og[x] != oe[x]) {
                fprintf(g_log, "ATTENTION MISMATCH (workspace case %zu): output %zu: gpu 0x%04x emulator "
                       "0x%04x\n", idx, x, og[x], oe[x]);
                (*bad)++;
                break;
            }
        /* the chunk into the cache: the GPU writer against the CPU writer, every byte */
        void *dslots = NULL;
        WCK(dev_get(WS_DBUF + 11, nq * sizeof *slots, &dslots));
        WCK(cudaMemcpyAsync(dslots, slots, nq * sizeof *slots, cudaMemcpyHostToDevice, st));
        int wrc = lowp_gpu_kv_write(gc, LOWP_GPU_IN_BF16, dbufs[5], dbufs[6], dslots, slots, nq,
                                    st, why, wl);
        cudaError_t e3 = wrc ? cudaSuccess : cudaStreamSynchronize(st);
        if (wrc || e3 != cudaSuccess) {
            if (e3 != cudaSuccess)
                snprintf(why, wl, "quantize-on-write: %s", cudaGetErrorString(e3));
            rc = -1;
            goto out2;
        }
        for (size_t b = 0; b < nseq; b++)
            for (size_t t = (size_t)pre[b]; t < len[b]; t++) {
                size_t i = (size_t)qo[b] + t - (size_t)pre[b];
                float kr[12 * 256], vr[12 * 256]; /* HK <= 12 (ws_case), dims <= 256 */
                for (size_t x = 0; x < HK * Dq; x++)
                    kr[x] = lowp_f32_from_bf16(kch[i * HK * Dq + x]);
                for (size_t x = 0; x < HK * Dv; x++)
                    vr[x] = lowp_f32_from_bf16(vch[i * HK * Dv + x]);
                if (lowp_kvcache_write_pos(cc, &pt, b, t, kr, vr, NULL, NULL, why, wl)) {
                    rc = -1;
                    goto out2;
                }
            }
        if (lowp_gpu_kvcache_download(gc, back, why, wl)) {
            rc = -1;
            goto out2;
        }
        for (int w = 0; w < 2; w++)
            for (int part = 0; part < 2; part++) {
                size_t n1 = 0, n2 = 0;
                const uint8_t *x1 = lowp_kvcache_cbuffer(cc, (lowp_kv_which)w, (lowp_kv_part)part, &n1);
                const uint8_t *x2 = lowp_kvcache_cbuffer(back, (lowp_kv_which)w, (lowp_kv_part)part, &n2);
                if (x1 && x2 && (n1 != n2 || memcmp(x1, x2, n1))) {
                    fprintf(g_log, "CACHE MISMATCH (workspace case %zu): %s %s after the chunk's write\n",
                           idx, w ? "V" : "K", part ? "scales" : "codes");
                    (*bad)++;
                }
            }
#undef WCK
    }
out2:
    for (size_t b = 0; kexp && vexp && b < nseq; b++) {
        free(kexp[b]);
        free(vexp[b]);
    }
    free(kexp);
    free(vexp);
out:
    if (gpu) /* nothing of this case may still be in flight into its host buffers */
        cudaStreamSynchronize(cudaStreamPerThread);
    lowp_gpu_kvcache_destroy(gc);
    lowp_kvcache_destroy(cc);
    lowp_kvcache_destroy(back);
    free(idxs);
    free(slots);
    free(kf);
    free(vf);
    free(kch);
    free(vch);
    free(q);
    free(og);
    free(oe);
    free(kws);
    free(vws);
    return rc;
}

/* The fill's device cast (lowp_gpu_extend_ws_cast; gpu = 0: its host model,
 * lowp_gpu_extend_ws_cast_emulate) on all 65,536 BF16 codes against lowp's codec (e4m3,
 * torch, rn, no saturation): the full path must equal it everywhere, the fast path
 * wherever the codec's answer is not NaN (the fill takes it only there). Returns the
 * mismatches (the first few printed), or (size_t)-1 with why on failure. */
static size_t ws_cast_check(int gpu, char *why, size_t wl)
{
    static uint8_t full[65536], fast[65536];
    lowp_codec torch_e4m3;
    if (lowp_codec_init(&torch_e4m3, LOWP_E4M3, LOWP_PROFILE_TORCH, LOWP_RN, LOWP_SAT_OFF, why,
                        wl) ||
        (gpu ? lowp_gpu_extend_ws_cast : lowp_gpu_extend_ws_cast_emulate)(full, fast, why, wl))
        return (size_t)-1;
    size_t bad = 0;
    for (unsigned c = 0; c < 65536; c++) {
        const unsigned want = lowp_encode_f32(&torch_e4m3, lowp_f32_from_bf16((uint16_t)c));
        const int bad_full = full[c] != want;
        const int bad_fast = (want & 0x7Fu) != 0x7Fu && fast[c] != want;
        if (bad_full || bad_fast) {
            if (bad++ < 8)
                fprintf(g_log, "CAST MISMATCH: bf16 0x%04x: torch e4m3 0x%02x, %s %s 0x%02x\n", c,
                        want, gpu ? "device" : "host model", bad_full ? "full" : "fast",
                        bad_full ? full[c] : fast[c]);
        }
    }
    return bad;
}

lowp_gpu_extend_conform_opts lowp_gpu_extend_conform_defaults(void)
{
    lowp_gpu_extend_conform_opts o = {.cases = 200000, .long_cases = 8, .ws_cases = 2000,
                                      .ws_long = 2, .seed = 0x5eed2026ull,
                                      .kinds = LOWP_GPU_EXTEND_KIND_PREFILL |
                                               LOWP_GPU_EXTEND_KIND_EXTEND,
                                      .only = -1};
    return o;
}

void lowp_gpu_extend_conform_quick(lowp_gpu_extend_conform_opts *o)
{
    o->cases = 4000;
    o->long_cases = 4;
    o->ws_cases = 100;
    o->ws_long = 1;
}

/* Whether case kind k (0 prefill, 1 extend) is in the run's kinds. */
static int kind_wanted(const lowp_gpu_extend_conform_opts *o, int k)
{
    return (o->kinds >> k) & 1;
}

int lowp_gpu_extend_conform_run(const lowp_gpu_extend_conform_opts *opt, FILE *rep, FILE *log,
                                lowp_gpu_extend_conform_result *r, char *why_out,
                                size_t why_len)
{
    lowp_gpu_extend_conform_opts o = *opt;
    memset(r, 0, sizeof *r);
    g_log = log ? log : stdout;
    g_lines = 0;
    if ((o.kinds & 3) == 0) {
        snprintf(why_out, why_len, "no kernel chosen (prefill, extend)");
        return -1;
    }
    int ndev = 0;
    if (!o.emulator_only && (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0)) {
        snprintf(why_out, why_len, "no CUDA device");
        return 77;
    }
    if (o.threads > 0)
        omp_set_num_threads(o.threads);
    if (o.small) {
        o.cases = 1;
        o.long_cases = 0;
        o.ws_cases = 1;
        o.ws_long = 0;
    }
    if (o.only >= 0 || !kind_wanted(&o, 1)) /* the workspace path is the extend's */
        o.ws_cases = o.ws_long = 0;
    if (o.emulator_only && o.ws_cases > 200) /* on the host: the kernel's block function alone */
        o.ws_cases = 200;
    stats st;
    memset(&st, 0, sizeof st);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    /* cases made a parallel loop at a time: a clean case keeps only its counts (ecase_release),
     * so the batch is large and the loop's end waits on its slowest case rarely (at 1024
     * cases, 16 threads ran at about 44%: one case of the largest shape outlasts the rest) */
    const size_t batch = 16384, total = o.cases + o.long_cases;
    ecase *cs = calloc(batch, sizeof *cs);
    g_ndev_sets = omp_get_max_threads();
    g_dev = calloc((size_t)g_ndev_sets * NDBUF, sizeof *g_dev);
    int fail = 0;
    char why[512] = "";
    if (cs == NULL || g_dev == NULL) {
        free(cs);
        free(g_dev);
        g_dev = NULL;
        snprintf(why_out, why_len, "out of memory");
        return -1;
    }
    double t_cpu = 0, t_gpu = 0; /* thread-seconds of the short cases' two sides */
    for (size_t c0 = 0; c0 < total && !fail; c0 += batch) {
        size_t n = total - c0 < batch ? total - c0 : batch;
        /* short cases on the CPU in parallel (one thread each), long ones one at a time
         * with every thread; a case of a kind not run is not made (its index stays its) */
#pragma omp parallel for schedule(dynamic, 1)
        for (size_t j = 0; j < n; j++) {
            size_t idx = c0 + j;
            int longc = idx >= o.cases;
            if (longc || idx < o.first || (o.only >= 0 && (long long)idx != o.only) ||
                (!o.small && !kind_wanted(&o, (int)(idx % 2))))
                continue;
            char w[256];
            const double a0 = omp_get_wtime();
            int e = ecase_make(&cs[j], o.seed, idx, 0, o.small) || cpu_side(&cs[j], 1, w, sizeof w);
            const double a1 = omp_get_wtime();
            e = e || (!o.emulator_only && run_gpu(&cs[j], w, sizeof w));
            const double a2 = omp_get_wtime();
            if (!e) {
                precheck(&cs[j], o.emulator_only ? NULL : cs[j].gpu);
                if (cs[j].pre_clean) /* only its counts are needed now: the memory goes back */
                    ecase_release(&cs[j]);
            }
#pragma omp atomic
            t_cpu += a1 - a0;
#pragma omp atomic
            t_gpu += a2 - a1;
            if (e) {
#pragma omp critical
                {
                    snprintf(why, sizeof why, "case %zu: %s", idx, w);
                    fail = 1;
                }
            }
        }
        for (size_t j = 0; j < n && !fail; j++) {
            size_t idx = c0 + j;
            if ((o.only >= 0 && (long long)idx != o.only) || idx < o.first)
                continue;
            size_t kidx = idx >= o.cases ? idx - o.cases : idx;
            if (!o.small && !kind_wanted(&o, (int)(kidx % 2)))
                continue;
            if (idx >= o.cases) {
                if (ecase_make(&cs[j], o.seed, kidx, 1, 0) ||
                    cpu_side(&cs[j], 1, why, sizeof why)) {
                    fail = 1;
                    break;
                }
            }
            if (idx >= o.cases && !o.emulator_only && run_gpu(&cs[j], why, sizeof why)) {
                fail = 1;
                break;
            }
            const ecase *c = &cs[j];
            if (c->pre_done && c->pre_clean) { /* what compare() would add, no lines */
                const int k = c->kind;
                st.cases[k]++;
                st.outputs_compared[k] += c->pre_outputs;
                if (c->ref_skipped)
                    st.ref_skipped[k]++;
                else {
                    st.ref_cases[k] += (size_t)c->pre_compared;
                    st.worst[k] = c->pre_worst > st.worst[k] ? c->pre_worst : st.worst[k];
                }
            } else
                compare(&cs[j], o.emulator_only ? NULL : cs[j].gpu, 1, &st);
            if (idx >= o.cases || o.small)
                fprintf(g_log, "%s: done\n", cs[j].desc);
        }
        for (size_t j = 0; j < n; j++)
            ecase_free(&cs[j]);
    }
    free(cs);
    struct timespec tw;
    clock_gettime(CLOCK_MONOTONIC, &tw);
    fprintf(g_log, "timing: %zu cases in %.1f s (short cases: %.1f thread-seconds of "
                   "making, emulating and the binary64 reference, %.1f on the GPU side, %d threads)\n",
            total, (double)(tw.tv_sec - t0.tv_sec) + 1e-9 * (double)(tw.tv_nsec - t0.tv_nsec), t_cpu,
            t_gpu, omp_get_max_threads());
    size_t ws_bad = 0, ws_bytes = 0, ws_done = 0, cast_bad = 0, lut_blocks = 0;
    long long lut_bad = 0;
    const int cast_run = !fail && kind_wanted(&o, 1) && o.only < 0;
    if (cast_run) {
        cast_bad = ws_cast_check(!o.emulator_only, why, sizeof why);
        if (cast_bad == (size_t)-1)
            fail = 1;
        else
            ws_bad += cast_bad;
        lut_bad = fail ? 0 : lowp_gpu_extend_ws_lut_check(!o.emulator_only, &lut_blocks, why, sizeof why);
        if (lut_bad < 0)
            fail = 1;
        else {
            ws_bad += (size_t)lut_bad;
            fprintf(g_log, "gpu extend workspace table path (%s): %zu blocks, %lld differing from "
                           "the per-element path\n",
                    o.emulator_only ? "host" : "device", lut_blocks, lut_bad);
        }
    }
    /* the short workspace cases in parallel, one thread each (on the GPU from the thread
     * that made the case, on its per-thread stream, its buffers from the thread's set); the
     * long ones one at a time, their emulation on every thread. The counts are sums, the
     * same whatever the threads. */
    if (!fail) {
#pragma omp parallel for schedule(dynamic, 1)
        for (size_t i = 0; i < o.ws_cases; i++) {
            int stop;
#pragma omp atomic read
            stop = fail;
            if (stop)
                continue;
            size_t nb = 0, nby = 0;
            char w[512];
            const int e = ws_case(o.seed, i, 0, !o.emulator_only, &nb, &nby, w, sizeof w);
#pragma omp critical(ws_counts)
            {
                ws_bad += nb;
                ws_bytes += nby;
                if (e && !fail) {
                    snprintf(why, sizeof why, "%s", w);
#pragma omp atomic write
                    fail = 1;
                } else if (!e)
                    ws_done++;
            }
        }
    }
    for (size_t i = o.ws_cases; i < o.ws_cases + o.ws_long && !fail; i++) {
        if (ws_case(o.seed, i, 1, !o.emulator_only, &ws_bad, &ws_bytes, why, sizeof why)) {
            fail = 1;
            break;
        }
        ws_done++;
    }
    for (int i = 0; i < g_ndev_sets * NDBUF; i++)
        cudaFree(g_dev[i].p);
    free(g_dev);
    g_dev = NULL;
    g_ndev_sets = 0;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    fprintf(g_log, "timing: the cast and table checks and %zu workspace cases in %.1f s\n",
            ws_done, (double)(t1.tv_sec - tw.tv_sec) + 1e-9 * (double)(t1.tv_nsec - tw.tv_nsec));
    double sec = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (fail) {
        snprintf(why_out, why_len, "%s", why);
        return -1;
    }
    size_t bad = 0;
    if (rep) {
        fprintf(rep, "# GPU extend / prefill attention: conformance\n\n");
        char part[96] = "";
        if (o.first)
            snprintf(part, sizeof part, " (short cases %zu..%zu of this seed's run)", o.first,
                     o.cases - 1);
        fprintf(rep, "Seed %llu, %zu short%s + %zu long cases, %s, %.1f s "
                     "(lowp/attn_gpu_extend.h; gpu/check/extend_check.c).\n\n",
                (unsigned long long)o.seed, o.cases - o.first, part, o.long_cases,
                o.emulator_only ? "emulator against binary64 only (no GPU)" : "GPU", sec);
        fprintf(rep, "| kernel | cases | outputs compared bit for bit | cases not bit-exact | "
                     "cases vs binary64 | outside bound | worst err/bound | binary64 skipped |\n");
        fprintf(rep, "|---|---:|---:|---:|---:|---:|---:|---:|\n");
    }
    for (int k = 0; k < 2; k++) {
        r->cases[k] = st.cases[k];
        r->outputs_compared[k] = st.outputs_compared[k];
        r->mismatched[k] = st.mismatched[k];
        r->ref_cases[k] = st.ref_cases[k];
        r->ref_outside[k] = st.ref_outside[k];
        r->ref_skipped[k] = st.ref_skipped[k];
        r->worst[k] = st.worst[k];
        bad += st.mismatched[k] + st.ref_outside[k];
        if (!kind_wanted(&o, k))
            continue;
        if (rep)
            fprintf(rep, "| %s | %zu | %zu | %zu | %zu | %zu | %.3g | %zu |\n",
                    k ? "extend" : "prefill", st.cases[k], st.outputs_compared[k],
                    st.mismatched[k], st.ref_cases[k], st.ref_outside[k], st.worst[k],
                    st.ref_skipped[k]);
        fprintf(g_log, "gpu extend conform (%s): %zu cases, %zu outputs compared, %zu not "
                       "bit-exact, %zu/%zu outside bound, worst ratio %.3g, %zu without binary64\n",
                k ? "extend" : "prefill", st.cases[k], st.outputs_compared[k], st.mismatched[k],
                st.ref_outside[k], st.ref_cases[k], st.worst[k], st.ref_skipped[k]);
    }
    if (kind_wanted(&o, 1)) {
        if (rep)
            fprintf(rep, "\nWorkspace path (NVFP4 paged prefix -> FP8 workspace, attention on it, "
                         "the chunk's quantize-on-write): %zu cases (%zu long), %zu workspace "
                         "bytes against lowp_kv_path_run, %zu failed checks.\n",
                    ws_done, o.ws_long, ws_bytes, ws_bad);
        fprintf(g_log, "gpu extend workspace path: %zu cases, %zu workspace bytes compared, %zu "
                       "failed checks\n", ws_done, ws_bytes, ws_bad);
        if (cast_run) {
            if (rep)
                fprintf(rep, "\nThe fill's E4M3 cast (cvt.rn.satfinite + torch's NaN above 464; "
                             "%s) on all 65536 BF16 codes against lowp's codec: %zu mismatches "
                             "(counted in the failed checks above).\n",
                        o.emulator_only ? "host model: lowp's cuda-profile cvt" : "on the GPU",
                        cast_bad);
            fprintf(g_log, "gpu extend workspace cast (%s): 65536 BF16 codes, %zu mismatches\n",
                    o.emulator_only ? "host model" : "GPU", cast_bad);
            if (rep)
                fprintf(rep, "\nThe fill's table path (a block's 8 E2M1 magnitudes converted once, "
                             "looked up by code, the sign flipped; %s) against its per-element "
                             "path: %zu blocks (every code byte, finite scale code and 17 global "
                             "scales), %lld differing (counted in the failed checks above).\n",
                        o.emulator_only ? "host" : "on the GPU", lut_blocks, lut_bad);
        }
    }
    bad += ws_bad;
    if (rep && st.first_mismatch[0])
        fprintf(rep, "\nFirst output not bit-exact: %s\n", st.first_mismatch);
    if (rep && st.first_outside[0])
        fprintf(rep, "\nFirst output outside the bound: %s\n", st.first_outside);
    r->ws_cases = ws_done;
    r->ws_bytes = ws_bytes;
    r->ws_bad = ws_bad;
    r->bad = bad;
    r->seconds = sec;
    return 0;
}
