/* tools/cmd_select_sweep.c: `lowp select-sweep`: how often each index-key (QSA, DSA) or
 * main-key (MoBA, NSA) format changes the selection, across seeded workloads and
 * contexts, with the needle's survival where the workload has one.
 *
 * Every row is one (selector, workload, context, keys): lowp_select_run (lowp/select_run.h)
 * over the last q_len query positions of a lowp/workload.h workload, against the BF16
 * reference keys. The file name gives the C name select_sweep; the dispatcher shows and
 * accepts `select-sweep`. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "lowp/cases.h"
#include "lowp/select_run.h"
#include "lowp/workload.h"

LOWP_COMMAND_DEFINE(select_sweep, "selection drift of every key format across selectors, workloads, contexts");

static void sweep_usage(FILE *f)
{
    fputs("usage: lowp select-sweep [--contexts N,N,...] [--selectors S,...] [--workloads W,...] [--q-len N]\n"
          "                         [--seed S] [--csv FILE] [--quick] [--moba-block N] [--nsa-block N]\n"
          "       lowp select-sweep --keys-from DIR [--layers L,L,...] [--contexts N,...] [--q-len N] [...]\n"
          "  default: contexts 4096 16384 65536 131072; selectors qsa dsa moba nsa; workloads k-outlier\n"
          "           rope needle small (lowp/workload.h); the last 4 query positions; seed 0x6c6f7770\n"
          "  shapes:  qsa 4 index heads x 128 over 1 index-key head (Qwen3.8-Flash-Next), top-512 blocks of 4;\n"
          "           dsa 64 heads x 128 over 1 (DeepSeek-V3.2), top-2048 tokens; moba 32 / 8 heads x 128,\n"
          "           blocks of 512, top-3; nsa the same heads, blocks of 64, top-16 with 1 sink and 2 local\n"
          "  keys:    qsa e4m3 nvfp4 mxfp4 mxfp8; dsa fp8 fp4 fp4-deepgemm; moba / nsa fp8_e4m3 and nvfp4\n"
          "           (sglang-kv) each with the global scale calibrated and at 1.0, mxfp4, mxfp8; each against\n"
          "           the BF16 keys' selection\n"
          "  --quick  contexts 4096 8192, 16 DSA heads, 2 query positions (under a minute on 2 cores)\n"
          "  a context whose candidates the top-k covers (QSA up to 2048 tokens, DSA up to 2048, MoBA up\n"
          "  to 1536) selects everything and is skipped with a line saying so\n"
          "  --moba-block N, --nsa-block N   tokens per block (default 512, 64; top-k and forced blocks\n"
          "           unchanged)\n"
          "  --keys-from DIR   real keys: DIR/blk.L.{q,k,v}.npy, float32 [T, heads, dim] as `lowp model\n"
          "           export` writes them (q after RoPE, k after RoPE, v); per layer, the model's own queries\n"
          "           at the last --q-len positions (default 64) of each context (default: the export's T\n"
          "           tokens; the first N of them otherwise: the model is causal, so they are the keys a\n"
          "           context of N has) go through moba and nsa (the selectors that score the main keys;\n"
          "           qsa and dsa score a separate index-key cache a model without an indexer does not\n"
          "           have, and are refused); the workload column is the layer, blk.L; heads and dim are\n"
          "           the export's (query heads a multiple of the KV heads)\n"
          "  --layers L,L,...  with --keys-from: these layers (default: blk.0, blk.1, ... up to the first missing)\n"
          "  --csv    the table as CSV ('-': stdout, replacing the text table)\n"
          "  columns: selections (rows x units), unchanged (identical sets), jaccard mean / min, recall@k\n"
          "           mean, lost (reference blocks dropped, summed), deepest (the largest rank an intruder\n"
          "           has in the reference order), needle kept / kept by the reference (needle workload),\n"
          "           certified (selections certified stable; empty / '-' where a key lies outside its\n"
          "           element bound), values (the cache of the attention's quantized-values runs), err_sel /\n"
          "           err_val / err_both (relative L2 output error of the sparse attention against the exact\n"
          "           one: the quantized keys' selection with exact values, the reference selection with\n"
          "           quantized values, both; lowp select --help), sel_share = err_sel / (err_sel + err_val)\n",
          f);
}

typedef struct {
    const char *keys, *recipe;
    lowp_sweep_scale_mode scale;
    const char *label;
} key_choice;

static size_t choices(lowp_selector_kind k, key_choice *c)
{
    static const key_choice qsa[] = {{"e4m3", NULL, 0, "e4m3"},
                                     {"nvfp4", NULL, 0, "nvfp4"},
                                     {"mxfp4", NULL, 0, "mxfp4"},
                                     {"mxfp8", NULL, 0, "mxfp8"}};
    static const key_choice dsa[] = {
        {"fp8", NULL, 0, "fp8"}, {"fp4", NULL, 0, "fp4"}, {"fp4-deepgemm", NULL, 0, "fp4-deepgemm"}};
    static const key_choice main_keys[] = {
        {"fp8_e4m3", NULL, LOWP_SWEEP_SCALE_CALIBRATED, "fp8_e4m3 g=amax/448"},
        {"fp8_e4m3", NULL, LOWP_SWEEP_SCALE_ONE, "fp8_e4m3 g=1"},
        {"nvfp4", "sglang-kv", LOWP_SWEEP_SCALE_CALIBRATED, "nvfp4 g=amax/2688"},
        {"nvfp4", "sglang-kv", LOWP_SWEEP_SCALE_ONE, "nvfp4 g=1"},
        {"mxfp4", NULL, LOWP_SWEEP_SCALE_CALIBRATED, "mxfp4"},
        {"mxfp8", NULL, LOWP_SWEEP_SCALE_CALIBRATED, "mxfp8"}};
    const key_choice *src = k == LOWP_SEL_QSA ? qsa : k == LOWP_SEL_DSA ? dsa : main_keys;
    size_t n = k == LOWP_SEL_QSA ? 4 : k == LOWP_SEL_DSA ? 3 : 6;
    memcpy(c, src, n * sizeof *c);
    return n;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* how many selections hold the needle's candidate (block or token) */
static size_t needle_hits(const lowp_select_spec *sp, const int32_t *idx, size_t rows, size_t units, size_t k,
                          const size_t *needle, size_t kvh, size_t hq)
{
    size_t hits = 0;
    for (size_t r = 0; r < rows; r++)
        for (size_t u = 0; u < units; u++) {
            size_t g = sp->kind == LOWP_SEL_MOBA ? u / (hq / kvh) : sp->kind == LOWP_SEL_NSA ? u : 0;
            size_t n = needle[g];
            int32_t want = (int32_t)(sp->kind == LOWP_SEL_QSA   ? n / sp->qsa.ratio
                                     : sp->kind == LOWP_SEL_DSA ? n
                                                                : n / sp->bs.block);
            hits += lowp_select_contains(idx + (r * units + u) * k, k, want);
        }
    return hits;
}

/* Where a sweep's rows go: the CSV lines (a memory stream, written out only when every
 * case has run, so a refusal leaves no file), the text table (table: 1 unless the CSV goes
 * to stdout), the progress line. */
typedef struct sweep_out {
    FILE *rows;
    int table, progress;
} sweep_out;

/* 1 (after saying so) when the selector's top-k covers every candidate a context of ctx
 * tokens has: the selection is everything and there is no drift to measure. */
static int dense_case(const sweep_out *o, const lowp_select_spec *sp, size_t ctx)
{
    lowp_selector_kind kind = sp->kind;
    size_t cand = kind == LOWP_SEL_QSA ? ctx / sp->qsa.ratio : kind == LOWP_SEL_DSA ? ctx : (ctx - 1) / sp->bs.block + 1;
    size_t topk = kind == LOWP_SEL_QSA ? sp->qsa.topk : kind == LOWP_SEL_DSA ? sp->dsa.topk : sp->bs.topk;
    if (topk < cand)
        return 0;
    if (o->table)
        printf("# %s at %zu tokens: top-%zu of %zu candidates selects them all (dense); skipped\n",
               lowp_selector_name(kind), ctx, topk, cand);
    return 1;
}

/* One case: every key format of base's selector (choices) on in against the BF16
 * reference, which the first format's run makes and the others reuse; one CSV row and one
 * table line per format. wl names the workload (or the real layer); needle: the needle
 * token per KV head of a needle workload, else NULL. */
static void sweep_case(const sweep_out *o, const lowp_select_spec *base, const char *wl, const lowp_select_inputs *in,
                       const size_t *needle)
{
    lowp_selector_kind kind = base->kind;
    size_t ctx = in->ctx, hq = in->q_heads, hk = in->kv_heads;
    char why[512];
    key_choice kc[8];
    size_t nk = choices(kind, kc);
    lowp_select_ref *ref = lowp_select_ref_new();
    if (ref == NULL)
        lowp_cli_fail("out of memory");
    for (size_t j = 0; j < nk; j++) {
        lowp_select_spec sp = *base;
        sp.keys = kc[j].keys;
        sp.recipe = kc[j].recipe;
        sp.scale = kc[j].scale;
        if (o->progress)
            fprintf(stderr, "\r\033[Klowp select-sweep: %s %s %zu %s", lowp_selector_name(kind), wl, ctx, kc[j].label);
        lowp_select_result r;
        double t0 = now_s();
        if (lowp_select_run_ref(&sp, in, ref, &r, NULL, NULL, why, sizeof why))
            lowp_cli_fail("select-sweep: %s %s ctx %zu keys %s: %s", lowp_selector_name(kind), wl, ctx, kc[j].label,
                          why);
        double secs = now_s() - t0;
        size_t kept = 0, kept_ref = 0, needles = 0;
        if (needle != NULL) {
            needles = r.selections;
            kept = needle_hits(&sp, r.indices, in->q_len, r.units, r.k, needle, hk, hq);
            kept_ref = needle_hits(&sp, r.ref_indices, in->q_len, r.units, r.k, needle, hk, hq);
        }
        double jm = r.jaccard_sum / (double)r.selections, rm = r.recall_sum / (double)r.selections;
        char cert[32] = "";
        if (r.certifiable)
            snprintf(cert, sizeof cert, "%zu", r.certified);
        fprintf(o->rows, "%s,%s,%zu,%s,%zu,%zu,%.6f,%.6f,%.6f,%zu,%zu,%zu,%zu,%zu,%zu,%zu,%.3f,%s,%s,%.6g,%.6g,%.6g,%.4f\n",
                lowp_selector_name(kind), wl, ctx, kc[j].label, r.selections, r.unchanged, jm, r.jaccard_min, rm, r.lost,
                r.deepest, kept, kept_ref, needles, r.counts.scale_zero, r.counts.blocks, secs, cert, r.values,
                r.err_sel, r.err_val, r.err_both, r.sel_share);
        if (o->table) {
            char nd[32] = "-";
            if (needles)
                snprintf(nd, sizeof nd, "%zu/%zu(%zu)", kept, needles, kept_ref);
            printf("%-5s %-10s %7zu %-20s %6zu %6zu %8.4f %8.4f %8.4f %7zu %7zu %9s %5s %9.3g %9.3g %6.3f\n",
                   lowp_selector_name(kind), wl, ctx, kc[j].label, r.selections, r.unchanged, jm, r.jaccard_min, rm,
                   r.lost, r.deepest, nd, r.certifiable ? cert : "-", r.err_sel, r.err_val, r.sel_share);
            fflush(stdout);
        }
        lowp_select_result_free(&r);
    }
    lowp_select_ref_free(ref);
}

/* One layer of a `lowp model export` directory: q [T][Hq][D], k and v [T][Hk][D]. */
typedef struct real_layer {
    float *q, *k, *v;
    size_t t, hq, hk, d;
} real_layer;

static void real_path(char *buf, size_t len, const char *dir, size_t layer, const char *what)
{
    if ((size_t)snprintf(buf, len, "%s/blk.%zu.%s.npy", dir, layer, what) >= len)
        lowp_cli_fail("--keys-from %s: path too long", dir);
}

/* Loads layer `layer`, refusing shapes that do not pair up (one line naming the files). */
static void real_load(const char *dir, size_t layer, real_layer *rl)
{
    char pq[4200], pk[4200], pv[4200];
    size_t qd[3], kd[3], vd[3];
    real_path(pq, sizeof pq, dir, layer, "q");
    real_path(pk, sizeof pk, dir, layer, "k");
    real_path(pv, sizeof pv, dir, layer, "v");
    rl->q = lowp_cli_load_f32_3("--keys-from", pq, qd, "[T, query heads, dim]");
    rl->k = lowp_cli_load_f32_3("--keys-from", pk, kd, "[T, KV heads, dim]");
    rl->v = lowp_cli_load_f32_3("--keys-from", pv, vd, "[T, KV heads, dim]");
    if (memcmp(kd, vd, sizeof kd) != 0)
        lowp_cli_fail("--keys-from: %s is [%zu, %zu, %zu], %s [%zu, %zu, %zu] (k and v must match)", pk, kd[0], kd[1],
                      kd[2], pv, vd[0], vd[1], vd[2]);
    if (qd[0] != kd[0] || qd[2] != kd[2] || qd[1] % kd[1] != 0)
        lowp_cli_fail("--keys-from: %s is [%zu, %zu, %zu] and %s [%zu, %zu, %zu]: the same tokens and dim, and query "
                      "heads a multiple of the KV heads, are needed",
                      pq, qd[0], qd[1], qd[2], pk, kd[0], kd[1], kd[2]);
    rl->t = kd[0];
    rl->hq = qd[1];
    rl->hk = kd[1];
    rl->d = kd[2];
}

static void real_free(real_layer *rl)
{
    free(rl->q);
    free(rl->k);
    free(rl->v);
    memset(rl, 0, sizeof *rl);
}

/* The real-key sweep: per layer, per context, per main-key selector (sels: MoBA, NSA). */
static void real_sweep(const sweep_out *o, const char *dir, const size_t *layers, size_t nlayers, const size_t *ctxs_in,
                       size_t nctx, int ctx_set, size_t qlen, unsigned sels, size_t moba_block, size_t nsa_block)
{
    for (size_t li = 0; li < nlayers; li++) {
        real_layer rl;
        real_load(dir, layers[li], &rl);
        char wl[32];
        snprintf(wl, sizeof wl, "blk.%zu", layers[li]);
        size_t ctxs[16];
        if (ctx_set)
            memcpy(ctxs, ctxs_in, nctx * sizeof *ctxs);
        else
            ctxs[0] = rl.t, nctx = 1;
        /* the key magnitude the global-scale failure depends on: amax and rms over T */
        double amax = 0, ss = 0;
        size_t n = rl.t * rl.hk * rl.d;
        for (size_t i = 0; i < n; i++) {
            double a = fabs((double)rl.k[i]);
            amax = a > amax ? a : amax;
            ss += a * a;
        }
        if (o->table)
            printf("# %s: %zu tokens, %zu query / %zu KV heads x %zu; K amax %.4g, rms %.4g\n", wl, rl.t, rl.hq, rl.hk,
                   rl.d, amax, sqrt(ss / (double)n));
        for (size_t ci = 0; ci < nctx; ci++) {
            size_t ctx = ctxs[ci], rows_q = qlen < ctx ? qlen : ctx;
            if (ctx > rl.t)
                lowp_cli_fail("--contexts %zu: %s has only %zu tokens", ctx, wl, rl.t);
            for (int sk = LOWP_SEL_MOBA; sk <= LOWP_SEL_NSA; sk++) {
                if (!(sels & (1u << sk)))
                    continue;
                lowp_select_spec base = lowp_select_spec_default((lowp_selector_kind)sk, rl.hq, rl.hk, rl.d);
                base.bs.block = sk == LOWP_SEL_MOBA ? moba_block : nsa_block;
                if (dense_case(o, &base, ctx))
                    continue;
                /* queries at positions ctx - rows_q .. ctx - 1: rows of the export's q */
                lowp_select_inputs in = {rl.q + (ctx - rows_q) * rl.hq * rl.d, rl.k, NULL, NULL, NULL, rows_q, rl.hq,
                                         ctx, rl.hk, rl.d, ctx - rows_q, rl.v, NULL};
                sweep_case(o, &base, wl, &in, NULL);
            }
        }
        real_free(&rl);
    }
}

int lowp_cmd_select_sweep(int argc, char **argv)
{
    size_t ctxs[16] = {4096, 16384, 65536, 131072}, nctx = 4, qlen = 4, dsa_heads = 64, moba_block = 512,
           nsa_block = 64, layers[256], nlayers = 0;
    unsigned sels = 0xf, wls = (1u << LOWP_WL_K_OUTLIER) | (1u << LOWP_WL_ROPE) | (1u << LOWP_WL_NEEDLE) |
                                (1u << LOWP_WL_SMALL);
    uint64_t seed = LOWP_DEFAULT_SEED;
    const char *csv = NULL, *keys_from = NULL;
    int quick = 0, ctx_set = 0, qlen_set = 0, sel_set = 0, wl_set = 0;
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        if (strcmp(s, "--help") == 0 || strcmp(s, "-h") == 0) {
            sweep_usage(stdout);
            return LOWP_EXIT_OK;
        } else if (strcmp(s, "--contexts") == 0) {
            uint64_t v[16];
            nctx = lowp_cli_parse_list("--contexts", lowp_cli_option_value(argc, argv, &i), 1, 16, 64,
                                       (uint64_t)1 << 21, v);
            for (size_t j = 0; j < nctx; j++)
                ctxs[j] = (size_t)v[j];
            ctx_set = 1;
        } else if (strcmp(s, "--layers") == 0) {
            uint64_t v[256];
            nlayers = lowp_cli_parse_list("--layers", lowp_cli_option_value(argc, argv, &i), 1, 256, 0, 4095, v);
            for (size_t j = 0; j < nlayers; j++)
                layers[j] = (size_t)v[j];
        } else if (strcmp(s, "--selectors") == 0 || strcmp(s, "--workloads") == 0) {
            int is_sel = s[2] == 's';
            char buf[256];
            snprintf(buf, sizeof buf, "%s", lowp_cli_option_value(argc, argv, &i));
            unsigned bits = 0;
            for (char *t = strtok(buf, ","); t != NULL; t = strtok(NULL, ",")) {
                lowp_selector_kind k;
                lowp_workload_kind w;
                if (is_sel && lowp_selector_parse(t, &k) == 0)
                    bits |= 1u << k;
                else if (!is_sel && lowp_workload_parse(t, &w) == 0)
                    bits |= 1u << w;
                else
                    lowp_cli_fail("%s: unknown %s '%s'", s, is_sel ? "selector (qsa dsa moba nsa)" : "workload", t);
            }
            if (bits == 0)
                lowp_cli_fail("%s: nothing named", s);
            *(is_sel ? &sels : &wls) = bits;
            *(is_sel ? &sel_set : &wl_set) = 1;
        } else if (strcmp(s, "--q-len") == 0) {
            qlen = (size_t)lowp_cli_parse_u64("--q-len", lowp_cli_option_value(argc, argv, &i), 1, 4096);
            qlen_set = 1;
        } else if (strcmp(s, "--moba-block") == 0 || strcmp(s, "--nsa-block") == 0)
            *(s[2] == 'm' ? &moba_block : &nsa_block) =
                (size_t)lowp_cli_parse_u64(s, lowp_cli_option_value(argc, argv, &i), 1, (uint64_t)1 << 20);
        else if (strcmp(s, "--seed") == 0)
            seed = lowp_cli_parse_seed("--seed", lowp_cli_option_value(argc, argv, &i));
        else if (strcmp(s, "--csv") == 0)
            csv = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(s, "--keys-from") == 0)
            keys_from = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(s, "--quick") == 0)
            quick = 1;
        else
            lowp_cli_fail("select-sweep: unknown argument '%s' (see lowp select-sweep --help)", s);
    }
    if (keys_from != NULL) {
        if (wl_set || quick)
            lowp_cli_fail("select-sweep --keys-from: the real keys are the workload (%s is for the seeded ones)",
                          wl_set ? "--workloads" : "--quick");
        if (sel_set && (sels & ((1u << LOWP_SEL_QSA) | (1u << LOWP_SEL_DSA))))
            lowp_cli_fail("select-sweep --keys-from: %s scores a separate index-key cache (its own 128-dim projections) "
                          "that the exported model does not have; real keys run moba and nsa",
                          sels & (1u << LOWP_SEL_QSA) ? "qsa" : "dsa");
        if (!sel_set)
            sels = (1u << LOWP_SEL_MOBA) | (1u << LOWP_SEL_NSA);
        if (!qlen_set)
            qlen = 64;
        if (nlayers == 0) { /* blk.0 .. the last present */
            char p[4200];
            for (; nlayers < 256; nlayers++) {
                real_path(p, sizeof p, keys_from, nlayers, "k");
                if (access(p, R_OK) != 0)
                    break;
            }
            if (nlayers == 0)
                lowp_cli_fail("--keys-from %s: no blk.0.k.npy there (the layout `lowp model export` writes)", keys_from);
            for (size_t j = 0; j < nlayers; j++)
                layers[j] = j;
        }
    } else if (nlayers != 0)
        lowp_cli_fail("select-sweep: --layers needs --keys-from");
    if (quick) {
        if (!ctx_set) {
            ctxs[0] = 4096;
            ctxs[1] = 8192;
            nctx = 2;
        }
        if (!qlen_set)
            qlen = 2;
        dsa_heads = 16;
    }
    lowp_out_check("--csv", csv);
    sweep_out o = {NULL, !(csv != NULL && strcmp(csv, "-") == 0), lowp_progress_wanted()};
    char *lines = NULL;
    size_t llen = 0;
    o.rows = open_memstream(&lines, &llen);
    if (o.rows == NULL)
        lowp_cli_fail("out of memory");
    fprintf(o.rows, "selector,workload,ctx,keys,selections,unchanged,jaccard_mean,jaccard_min,recall_mean,lost,"
                    "deepest,needle_kept,needle_kept_ref,needles,zero_scales,blocks,seconds,certified,values,err_sel,"
                    "err_val,err_both,sel_share\n");
    if (o.table) {
        if (keys_from != NULL)
            printf("# lowp select-sweep: real keys from %s, the model's queries at the last %zu positions of each "
                   "context; moba blocks of %zu, nsa blocks of %zu; drift against the BF16 keys\n",
                   keys_from, qlen, moba_block, nsa_block);
        else
            printf("# lowp select-sweep: seed 0x%llx, the last %zu query positions; drift against the BF16 keys\n",
                   (unsigned long long)seed, qlen);
        printf("%-5s %-10s %7s %-20s %6s %6s %8s %8s %8s %7s %7s %9s %5s %9s %9s %6s\n", "sel", "workload", "ctx",
               "keys", "sels", "same", "jacc", "jmin", "recall", "lost", "deepest", "needle", "cert", "err_sel",
               "err_val", "share");
    }
    char why[512];
    if (keys_from != NULL)
        real_sweep(&o, keys_from, layers, nlayers, ctxs, nctx, ctx_set, qlen, sels, moba_block, nsa_block);
    for (int sk = 0; keys_from == NULL && sk < LOWP_SELECTOR_COUNT; sk++) {
        if (!(sels & (1u << sk)))
            continue;
        lowp_selector_kind kind = (lowp_selector_kind)sk;
        int index_keys = kind == LOWP_SEL_QSA || kind == LOWP_SEL_DSA;
        size_t hq = kind == LOWP_SEL_QSA ? 4 : kind == LOWP_SEL_DSA ? dsa_heads : 32, hk = index_keys ? 1 : 8;
        lowp_select_spec base = lowp_select_spec_default(kind, hq, hk, 128);
        base.bs.block = kind == LOWP_SEL_NSA ? nsa_block : moba_block;
        for (int wk = 0; wk < LOWP_WORKLOAD_KIND_COUNT; wk++) {
            if (!(wls & (1u << wk)))
                continue;
            for (size_t ci = 0; ci < nctx; ci++) {
                size_t ctx = ctxs[ci], rows_q = qlen < ctx ? qlen : ctx;
                if (dense_case(&o, &base, ctx))
                    continue;
                lowp_attn_shape shape = {rows_q, hq, hk, 128, 128, ctx, ctx - rows_q, 0};
                lowp_workload w;
                if (lowp_workload_make((lowp_workload_kind)wk, seed, &shape, &w, why, sizeof why))
                    lowp_cli_fail("select-sweep: %s", why);
                lowp_select_inputs in = {w.q, w.k, NULL, NULL, NULL, rows_q, hq, ctx, hk, 128, ctx - rows_q, w.v, NULL};
                sweep_case(&o, &base, lowp_workload_name((lowp_workload_kind)wk), &in, w.needle);
                lowp_workload_free(&w);
            }
        }
    }
    if (o.progress)
        fputs("\r\033[K", stderr);
    if (fclose(o.rows) != 0)
        lowp_cli_fail("out of memory");
    if (csv != NULL) {
        FILE *out = lowp_out_open(csv, 0);
        if (fwrite(lines, 1, llen, out) != llen)
            lowp_cli_fail("cannot write '%s'", csv);
        lowp_out_commit(out);
    }
    free(lines);
    return LOWP_EXIT_OK;
}
