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
#include "shard.h"
#include "lowp/cases.h"
#include "lowp/select_run.h"
#include "lowp/workload.h"

LOWP_COMMAND_DEFINE(select_sweep, "selection drift of every key format across selectors, workloads, contexts");

static void sweep_usage(FILE *f)
{
    fputs("usage: lowp select-sweep [--contexts N,N,...] [--selectors S,...] [--workloads W,...] [--q-len N]\n"
          "                         [--seed S] [--csv FILE] [--quick] [--moba-block N] [--nsa-block N]\n"
          "                         [--shard K/N --result FILE]\n"
          "       lowp select-sweep --merge A.json B.json ... [--csv FILE] [--result FILE]\n"
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
          "  --shard K/N    run the cases i with i mod N = K (0-based; auto: the MPI / Slurm rank and\n"
          "           size), numbered selector by selector, then workload, then context (real keys: layer,\n"
          "           then context, then selector); needs --result, prints and writes no table\n"
          "  --result FILE  the run's deterministic result (JSON: every row, no times)\n"
          "  --merge A.json B.json ...  the shards' results: checked to be shards 0..N-1 of one run,\n"
          "           then the table, --csv and --result written as one unsharded run writes them (the\n"
          "           CSV's seconds column empty)\n"
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
 * to stdout, or a shard runs), the progress line. */
typedef struct sweep_out {
    FILE *rows;
    int table, progress;
} sweep_out;

/* ---- results (tools/shard.h): a unit is one (selector, workload or layer, context) case,
 * in the order of one unsharded sweep; it holds what its table lines and CSV rows say, the
 * seconds excepted. Runs and merges print every unit through render_unit, so that a merge
 * prints what one run prints. ------------------------------------------------------------- */

/* One CSV row and table line: one key format of a case. */
typedef struct sel_row {
    char sel[16], wl[32], keys[32], values[16];
    size_t ctx;
    int certifiable;
    double secs; /* NaN in a merge: results hold no times (its CSV cell is empty) */
#define SEL_SIZES(X)                                                                                \
    X(selections) X(unchanged) X(lost) X(deepest) X(needle_kept) X(needle_kept_ref) \
        X(needles) X(zero_scales) X(blocks) X(certified)
#define SEL_DOUBLES(X) X(jaccard_mean) X(jaccard_min) X(recall_mean) X(err_sel) X(err_val) X(err_both) X(sel_share)
#define DECL(f) size_t f;
    SEL_SIZES(DECL)
#undef DECL
#define DECL(f) double f;
    SEL_DOUBLES(DECL)
#undef DECL
} sel_row;

static json_t *new_array_in(json_t *o, const char *key)
{
    json_t *a = json_array();
    if (a == NULL || json_object_set_new(o, key, a) != 0)
        lowp_cli_fail("out of memory");
    return a;
}

static void row_put(json_t *list, const sel_row *w)
{
    json_t *o = json_object();
    if (o == NULL || json_array_append_new(list, o) != 0)
        lowp_cli_fail("out of memory");
    lowp_json_set_str(o, "selector", w->sel);
    lowp_json_set_str(o, "workload", w->wl);
    lowp_json_set_u64(o, "ctx", w->ctx);
    lowp_json_set_str(o, "keys", w->keys);
    lowp_json_set_str(o, "values", w->values);
    lowp_json_set_i64(o, "certifiable", w->certifiable);
#define PUT(f) lowp_json_set_u64(o, #f, w->f);
    SEL_SIZES(PUT)
#undef PUT
#define PUT(f) lowp_json_set_f64(o, #f, w->f);
    SEL_DOUBLES(PUT)
#undef PUT
}

static void str_get(const json_t *o, const char *key, char *dst, size_t len)
{
    const char *v = lowp_json_str(o, key);
    if (strlen(v) >= len)
        lowp_cli_fail("merge: field '%s' is '%.40s', longer than %zu characters", key, v, len - 1);
    strcpy(dst, v);
}

static void row_get(const json_t *o, sel_row *w)
{
    memset(w, 0, sizeof *w);
    str_get(o, "selector", w->sel, sizeof w->sel);
    str_get(o, "workload", w->wl, sizeof w->wl);
    str_get(o, "keys", w->keys, sizeof w->keys);
    str_get(o, "values", w->values, sizeof w->values);
    w->ctx = (size_t)lowp_json_u64(o, "ctx");
    w->certifiable = (int)lowp_json_i64(o, "certifiable");
#define GET(f) w->f = (size_t)lowp_json_u64(o, #f);
    SEL_SIZES(GET)
#undef GET
#define GET(f) w->f = lowp_json_f64(o, #f);
    SEL_DOUBLES(GET)
#undef GET
    w->secs = NAN;
}

/* The CSV row and the table line of w. */
static void emit_row(const sweep_out *o, const sel_row *w)
{
    char cert[32] = "", secs[32] = "";
    if (w->certifiable)
        snprintf(cert, sizeof cert, "%zu", w->certified);
    if (!isnan(w->secs))
        snprintf(secs, sizeof secs, "%.3f", w->secs);
    fprintf(o->rows, "%s,%s,%zu,%s,%zu,%zu,%.6f,%.6f,%.6f,%zu,%zu,%zu,%zu,%zu,%zu,%zu,%s,%s,%s,%.6g,%.6g,%.6g,%.4f\n",
            w->sel, w->wl, w->ctx, w->keys, w->selections, w->unchanged, w->jaccard_mean, w->jaccard_min,
            w->recall_mean, w->lost, w->deepest, w->needle_kept, w->needle_kept_ref, w->needles, w->zero_scales,
            w->blocks, secs, cert, w->values, w->err_sel, w->err_val, w->err_both, w->sel_share);
    if (o->table) {
        char nd[32] = "-";
        if (w->needles)
            snprintf(nd, sizeof nd, "%zu/%zu(%zu)", w->needle_kept, w->needles, w->needle_kept_ref);
        printf("%-5s %-10s %7zu %-20s %6zu %6zu %8.4f %8.4f %8.4f %7zu %7zu %9s %5s %9.3g %9.3g %6.3f\n", w->sel,
               w->wl, w->ctx, w->keys, w->selections, w->unchanged, w->jaccard_mean, w->jaccard_min, w->recall_mean,
               w->lost, w->deepest, nd, w->certifiable ? cert : "-", w->err_sel, w->err_val, w->sel_share);
        fflush(stdout);
    }
}

/* A unit's table lines and rows, in the order one sweep prints them: the layer line (the
 * first unit of a real-key layer), the dense line (a skipped case), the rows. secs: the
 * rows' run times (a run), or NULL (a merge). */
static void render_unit(const sweep_out *o, const json_t *unit, const double *secs)
{
    if (o->table && json_object_get(unit, "layer_tokens") != NULL)
        printf("# %s: %llu tokens, %llu query / %llu KV heads x %llu; K amax %.4g, rms %.4g\n",
               lowp_json_str(unit, "workload"), (unsigned long long)lowp_json_u64(unit, "layer_tokens"),
               (unsigned long long)lowp_json_u64(unit, "layer_q_heads"),
               (unsigned long long)lowp_json_u64(unit, "layer_kv_heads"),
               (unsigned long long)lowp_json_u64(unit, "layer_dim"), lowp_json_f64(unit, "layer_k_amax"),
               lowp_json_f64(unit, "layer_k_rms"));
    if (o->table && json_object_get(unit, "dense_topk") != NULL)
        printf("# %s at %llu tokens: top-%llu of %llu candidates selects them all (dense); skipped\n",
               lowp_json_str(unit, "selector"), (unsigned long long)lowp_json_u64(unit, "ctx"),
               (unsigned long long)lowp_json_u64(unit, "dense_topk"),
               (unsigned long long)lowp_json_u64(unit, "dense_cand"));
    const json_t *rows = json_object_get(unit, "rows");
    for (size_t x = 0; x < json_array_size(rows); x++) {
        sel_row w;
        row_get(json_array_get(rows, x), &w);
        if (secs != NULL)
            w.secs = secs[x];
        emit_row(o, &w);
    }
}

/* A unit of selector sk, workload (or layer) wl, context ctx. */
static json_t *unit_new(json_t *res, size_t u, lowp_selector_kind kind, const char *wl, size_t ctx)
{
    json_t *unit = lowp_result_unit(res, u);
    lowp_json_set_str(unit, "selector", lowp_selector_name(kind));
    lowp_json_set_str(unit, "workload", wl);
    lowp_json_set_u64(unit, "ctx", ctx);
    return unit;
}

/* 1 (after recording it in unit) when the selector's top-k covers every candidate a
 * context of ctx tokens has: the selection is everything and there is no drift to measure. */
static int dense_case(json_t *unit, const lowp_select_spec *sp, size_t ctx)
{
    lowp_selector_kind kind = sp->kind;
    size_t cand = kind == LOWP_SEL_QSA ? ctx / sp->qsa.ratio : kind == LOWP_SEL_DSA ? ctx : (ctx - 1) / sp->bs.block + 1;
    size_t topk = kind == LOWP_SEL_QSA ? sp->qsa.topk : kind == LOWP_SEL_DSA ? sp->dsa.topk : sp->bs.topk;
    if (topk < cand)
        return 0;
    lowp_json_set_u64(unit, "dense_topk", topk);
    lowp_json_set_u64(unit, "dense_cand", cand);
    return 1;
}

#define MAX_CHOICES 8

/* One case: every key format of base's selector (choices) on in against the BF16
 * reference, which the first format's run makes and the others reuse; one row per format
 * into unit's rows, its run time into secs[format]. wl names the workload (or the real
 * layer); needle: the needle token per KV head of a needle workload, else NULL. */
static void sweep_case(const sweep_out *o, const lowp_select_spec *base, const char *wl, const lowp_select_inputs *in,
                       const size_t *needle, json_t *unit, double *secs)
{
    lowp_selector_kind kind = base->kind;
    size_t ctx = in->ctx, hq = in->q_heads, hk = in->kv_heads;
    char why[512];
    key_choice kc[MAX_CHOICES];
    size_t nk = choices(kind, kc);
    json_t *rows = new_array_in(unit, "rows");
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
        sel_row w;
        memset(&w, 0, sizeof w);
        secs[j] = now_s() - t0;
        snprintf(w.sel, sizeof w.sel, "%s", lowp_selector_name(kind));
        snprintf(w.wl, sizeof w.wl, "%s", wl);
        snprintf(w.keys, sizeof w.keys, "%s", kc[j].label);
        snprintf(w.values, sizeof w.values, "%s", r.values);
        w.ctx = ctx;
        if (needle != NULL) {
            w.needles = r.selections;
            w.needle_kept = needle_hits(&sp, r.indices, in->q_len, r.units, r.k, needle, hk, hq);
            w.needle_kept_ref = needle_hits(&sp, r.ref_indices, in->q_len, r.units, r.k, needle, hk, hq);
        }
        w.selections = r.selections;
        w.unchanged = r.unchanged;
        w.jaccard_mean = r.jaccard_sum / (double)r.selections;
        w.jaccard_min = r.jaccard_min;
        w.recall_mean = r.recall_sum / (double)r.selections;
        w.lost = r.lost;
        w.deepest = r.deepest;
        w.zero_scales = r.counts.scale_zero;
        w.blocks = r.counts.blocks;
        w.certifiable = r.certifiable;
        w.certified = r.certified;
        w.err_sel = r.err_sel;
        w.err_val = r.err_val;
        w.err_both = r.err_both;
        w.sel_share = r.sel_share;
        row_put(rows, &w);
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

/* The options that choose a sweep's units and their inputs (the result's args). */
typedef struct sweep_cfg {
    size_t ctxs[16], nctx, qlen, dsa_heads, moba_block, nsa_block, layers[256], nlayers;
    unsigned sels, wls;
    uint64_t seed;
    const char *keys_from; /* NULL: the seeded workloads */
    int ctx_set;
} sweep_cfg;

/* "a,b,c" of n counts into buf (the lists are at most 256 numbers of 7 digits). */
static const char *list_str(char *buf, size_t len, const size_t *v, size_t n)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t j = 0; j < n && used < len; j++)
        used += (size_t)snprintf(buf + used, len - used, "%s%zu", j ? "," : "", v[j]);
    if (used >= len)
        lowp_cli_fail("a list of %zu numbers is too long", n);
    return buf;
}

static json_t *cfg_args(const sweep_cfg *c)
{
    json_t *a = json_object();
    if (a == NULL)
        lowp_cli_fail("out of memory");
    char b[256 * 8];
    snprintf(b, sizeof b, "0x%llx", (unsigned long long)c->seed);
    lowp_json_set_str(a, "seed", b);
    lowp_json_set_str(a, "keys_from", c->keys_from != NULL ? c->keys_from : "");
    lowp_json_set_str(a, "layers", list_str(b, sizeof b, c->layers, c->nlayers));
    lowp_json_set_str(a, "contexts", list_str(b, sizeof b, c->ctxs, c->nctx));
    lowp_json_set_i64(a, "contexts_given", c->ctx_set);
    lowp_json_set_u64(a, "selectors", c->sels);
    lowp_json_set_u64(a, "workloads", c->wls);
    lowp_json_set_u64(a, "q_len", c->qlen);
    lowp_json_set_u64(a, "dsa_heads", c->dsa_heads);
    lowp_json_set_u64(a, "moba_block", c->moba_block);
    lowp_json_set_u64(a, "nsa_block", c->nsa_block);
    return a;
}

static size_t list_get(const json_t *a, const char *key, size_t max_n, uint64_t lo, uint64_t hi, size_t *dst)
{
    const char *s = lowp_json_str(a, key);
    uint64_t v[256];
    if (*s == '\0')
        return 0;
    size_t n = lowp_cli_parse_list("merge: args", s, 1, max_n, lo, hi, v);
    for (size_t j = 0; j < n; j++)
        dst[j] = (size_t)v[j];
    return n;
}

/* Back from cfg_args; keys_from points into a (which must outlive c). */
static void cfg_from_args(const json_t *a, sweep_cfg *c)
{
    memset(c, 0, sizeof *c);
    c->seed = lowp_cli_parse_seed("merge: seed", lowp_json_str(a, "seed"));
    c->keys_from = lowp_json_str(a, "keys_from");
    if (*c->keys_from == '\0')
        c->keys_from = NULL;
    c->nlayers = list_get(a, "layers", 256, 0, 4095, c->layers);
    c->nctx = list_get(a, "contexts", 16, 64, (uint64_t)1 << 21, c->ctxs);
    c->ctx_set = (int)lowp_json_i64(a, "contexts_given");
    c->sels = (unsigned)lowp_json_u64(a, "selectors");
    c->wls = (unsigned)lowp_json_u64(a, "workloads");
    c->qlen = (size_t)lowp_json_u64(a, "q_len");
    c->dsa_heads = (size_t)lowp_json_u64(a, "dsa_heads");
    c->moba_block = (size_t)lowp_json_u64(a, "moba_block");
    c->nsa_block = (size_t)lowp_json_u64(a, "nsa_block");
    if (c->nctx == 0 || c->qlen == 0 || c->moba_block == 0 || c->nsa_block == 0 || (c->keys_from && c->nlayers == 0))
        lowp_cli_fail("merge: the results' options are not those of a select-sweep run");
}

/* The real-key sweep: per layer, per context (the layer's tokens when none were given), per
 * main-key selector (MoBA, NSA): units numbered in that order; the shard's own run and are
 * rendered as each ends. A layer no unit of the shard needs is not read. */
static size_t real_sweep(const sweep_out *o, const sweep_cfg *c, const lowp_shard *sh, json_t *res)
{
    size_t nctx = c->ctx_set ? c->nctx : 1, nsel = 0;
    for (int sk = LOWP_SEL_MOBA; sk <= LOWP_SEL_NSA; sk++)
        nsel += (c->sels >> sk) & 1u;
    const size_t per_layer = nctx * nsel;
    for (size_t li = 0; li < c->nlayers; li++) {
        int any = 0;
        for (size_t x = 0; x < per_layer; x++)
            any |= lowp_shard_mine(sh, li * per_layer + x);
        if (!any)
            continue;
        real_layer rl;
        real_load(c->keys_from, c->layers[li], &rl);
        char wl[32];
        snprintf(wl, sizeof wl, "blk.%zu", c->layers[li]);
        size_t ctxs[16];
        if (c->ctx_set)
            memcpy(ctxs, c->ctxs, nctx * sizeof *ctxs);
        else
            ctxs[0] = rl.t;
        /* the key magnitude the global-scale failure depends on: amax and rms over T */
        double amax = 0, ss = 0;
        size_t n = rl.t * rl.hk * rl.d;
        for (size_t i = 0; i < n; i++) {
            double a = fabs((double)rl.k[i]);
            amax = a > amax ? a : amax;
            ss += a * a;
        }
        size_t u = li * per_layer;
        for (size_t ci = 0; ci < nctx; ci++) {
            size_t ctx = ctxs[ci], rows_q = c->qlen < ctx ? c->qlen : ctx;
            if (ctx > rl.t)
                lowp_cli_fail("--contexts %zu: %s has only %zu tokens", ctx, wl, rl.t);
            for (int sk = LOWP_SEL_MOBA; sk <= LOWP_SEL_NSA; sk++) {
                if (!(c->sels & (1u << sk)))
                    continue;
                if (!lowp_shard_mine(sh, u++))
                    continue;
                json_t *unit = unit_new(res, u - 1, (lowp_selector_kind)sk, wl, ctx);
                if (u - 1 == li * per_layer) { /* the layer line goes with the layer's first unit */
                    lowp_json_set_u64(unit, "layer_tokens", rl.t);
                    lowp_json_set_u64(unit, "layer_q_heads", rl.hq);
                    lowp_json_set_u64(unit, "layer_kv_heads", rl.hk);
                    lowp_json_set_u64(unit, "layer_dim", rl.d);
                    lowp_json_set_f64(unit, "layer_k_amax", amax);
                    lowp_json_set_f64(unit, "layer_k_rms", sqrt(ss / (double)n));
                }
                lowp_select_spec base = lowp_select_spec_default((lowp_selector_kind)sk, rl.hq, rl.hk, rl.d);
                base.bs.block = sk == LOWP_SEL_MOBA ? c->moba_block : c->nsa_block;
                double secs[MAX_CHOICES];
                if (!dense_case(unit, &base, ctx)) {
                    /* queries at positions ctx - rows_q .. ctx - 1: rows of the export's q */
                    lowp_select_inputs in = {rl.q + (ctx - rows_q) * rl.hq * rl.d, rl.k, NULL, NULL, NULL, rows_q,
                                             rl.hq, ctx, rl.hk, rl.d, ctx - rows_q, rl.v, NULL};
                    sweep_case(o, &base, wl, &in, NULL, unit, secs);
                }
                render_unit(o, unit, secs);
            }
        }
        real_free(&rl);
    }
    return c->nlayers * per_layer;
}

/* The seeded sweep: per selector, workload, context: units numbered in that order. */
static size_t seeded_sweep(const sweep_out *o, const sweep_cfg *c, const lowp_shard *sh, json_t *res)
{
    char why[512];
    size_t u = 0;
    for (int sk = 0; sk < LOWP_SELECTOR_COUNT; sk++) {
        if (!(c->sels & (1u << sk)))
            continue;
        lowp_selector_kind kind = (lowp_selector_kind)sk;
        int index_keys = kind == LOWP_SEL_QSA || kind == LOWP_SEL_DSA;
        size_t hq = kind == LOWP_SEL_QSA ? 4 : kind == LOWP_SEL_DSA ? c->dsa_heads : 32, hk = index_keys ? 1 : 8;
        lowp_select_spec base = lowp_select_spec_default(kind, hq, hk, 128);
        base.bs.block = kind == LOWP_SEL_NSA ? c->nsa_block : c->moba_block;
        for (int wk = 0; wk < LOWP_WORKLOAD_KIND_COUNT; wk++) {
            if (!(c->wls & (1u << wk)))
                continue;
            for (size_t ci = 0; ci < c->nctx; ci++) {
                if (!lowp_shard_mine(sh, u++))
                    continue;
                size_t ctx = c->ctxs[ci], rows_q = c->qlen < ctx ? c->qlen : ctx;
                const char *wl = lowp_workload_name((lowp_workload_kind)wk);
                json_t *unit = unit_new(res, u - 1, kind, wl, ctx);
                double secs[MAX_CHOICES];
                if (!dense_case(unit, &base, ctx)) {
                    lowp_attn_shape shape = {rows_q, hq, hk, 128, 128, ctx, ctx - rows_q, 0};
                    lowp_workload w;
                    if (lowp_workload_make((lowp_workload_kind)wk, c->seed, &shape, &w, why, sizeof why))
                        lowp_cli_fail("select-sweep: %s", why);
                    lowp_select_inputs in = {w.q, w.k, NULL, NULL, NULL, rows_q, hq, ctx, hk, 128, ctx - rows_q, w.v,
                                             NULL};
                    sweep_case(o, &base, wl, &in, w.needle, unit, secs);
                    lowp_workload_free(&w);
                }
                render_unit(o, unit, secs);
            }
        }
    }
    return u;
}

/* How many units c has (the same count the sweeps number). */
static size_t count_units(const sweep_cfg *c)
{
    size_t nsel = 0, nwl = 0;
    for (int sk = 0; sk < LOWP_SELECTOR_COUNT; sk++)
        nsel += (c->sels >> sk) & 1u;
    for (int wk = 0; wk < LOWP_WORKLOAD_KIND_COUNT; wk++)
        nwl += (c->wls >> wk) & 1u;
    return c->keys_from != NULL ? c->nlayers * (c->ctx_set ? c->nctx : 1) * nsel : nsel * nwl * c->nctx;
}

static void print_header(const sweep_cfg *c)
{
    if (c->keys_from != NULL)
        printf("# lowp select-sweep: real keys from %s, the model's queries at the last %zu positions of each "
               "context; moba blocks of %zu, nsa blocks of %zu; drift against the BF16 keys\n",
               c->keys_from, c->qlen, c->moba_block, c->nsa_block);
    else
        printf("# lowp select-sweep: seed 0x%llx, the last %zu query positions; drift against the BF16 keys\n",
               (unsigned long long)c->seed, c->qlen);
    printf("%-5s %-10s %7s %-20s %6s %6s %8s %8s %8s %7s %7s %9s %5s %9s %9s %6s\n", "sel", "workload", "ctx", "keys",
           "sels", "same", "jacc", "jmin", "recall", "lost", "deepest", "needle", "cert", "err_sel", "err_val",
           "share");
}

int lowp_cmd_select_sweep(int argc, char **argv)
{
    sweep_cfg c = {{4096, 16384, 65536, 131072}, 4, 4, 64, 512, 64, {0}, 0, 0xf, 0, LOWP_DEFAULT_SEED, NULL, 0};
    c.wls = (1u << LOWP_WL_K_OUTLIER) | (1u << LOWP_WL_ROPE) | (1u << LOWP_WL_NEEDLE) | (1u << LOWP_WL_SMALL);
    const char *csv = NULL;
    int quick = 0, qlen_set = 0, sel_set = 0, wl_set = 0, case_opts = 0;
    lowp_shard_opts so;
    lowp_shard_opts_init(&so, argc);
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        int case_opt = 1;
        if (strcmp(s, "--help") == 0 || strcmp(s, "-h") == 0) {
            sweep_usage(stdout);
            lowp_shard_opts_free(&so);
            return LOWP_EXIT_OK;
        } else if (lowp_shard_option(&so, argc, argv, &i))
            case_opt = 0;
        else if (strcmp(s, "--contexts") == 0) {
            uint64_t v[16];
            c.nctx = lowp_cli_parse_list("--contexts", lowp_cli_option_value(argc, argv, &i), 1, 16, 64,
                                         (uint64_t)1 << 21, v);
            for (size_t j = 0; j < c.nctx; j++)
                c.ctxs[j] = (size_t)v[j];
            c.ctx_set = 1;
        } else if (strcmp(s, "--layers") == 0) {
            uint64_t v[256];
            c.nlayers = lowp_cli_parse_list("--layers", lowp_cli_option_value(argc, argv, &i), 1, 256, 0, 4095, v);
            for (size_t j = 0; j < c.nlayers; j++)
                c.layers[j] = (size_t)v[j];
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
            *(is_sel ? &c.sels : &c.wls) = bits;
            *(is_sel ? &sel_set : &wl_set) = 1;
        } else if (strcmp(s, "--q-len") == 0) {
            c.qlen = (size_t)lowp_cli_parse_u64("--q-len", lowp_cli_option_value(argc, argv, &i), 1, 4096);
            qlen_set = 1;
        } else if (strcmp(s, "--moba-block") == 0 || strcmp(s, "--nsa-block") == 0)
            *(s[2] == 'm' ? &c.moba_block : &c.nsa_block) =
                (size_t)lowp_cli_parse_u64(s, lowp_cli_option_value(argc, argv, &i), 1, (uint64_t)1 << 20);
        else if (strcmp(s, "--seed") == 0)
            c.seed = lowp_cli_parse_seed("--seed", lowp_cli_option_value(argc, argv, &i));
        else if (strcmp(s, "--csv") == 0) {
            csv = lowp_cli_option_value(argc, argv, &i);
            case_opt = 0;
        } else if (strcmp(s, "--keys-from") == 0)
            c.keys_from = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(s, "--quick") == 0)
            quick = 1;
        else
            lowp_cli_fail("select-sweep: unknown argument '%s' (see lowp select-sweep --help)", s);
        case_opts |= case_opt;
    }
    lowp_shard_opts_check(&so, "select-sweep", case_opts);
    const lowp_shard shard = so.shard;
    const char *result = so.result;
    const int merge = so.merge;
    if (shard.n > 1 && csv != NULL)
        lowp_cli_fail("select-sweep --shard: a shard writes no CSV or table (select-sweep --merge writes them)");
    if (c.keys_from != NULL) {
        if (wl_set || quick)
            lowp_cli_fail("select-sweep --keys-from: the real keys are the workload (%s is for the seeded ones)",
                          wl_set ? "--workloads" : "--quick");
        if (sel_set && (c.sels & ((1u << LOWP_SEL_QSA) | (1u << LOWP_SEL_DSA))))
            lowp_cli_fail("select-sweep --keys-from: %s scores a separate index-key cache (its own 128-dim projections) "
                          "that the exported model does not have; real keys run moba and nsa",
                          c.sels & (1u << LOWP_SEL_QSA) ? "qsa" : "dsa");
        if (!sel_set)
            c.sels = (1u << LOWP_SEL_MOBA) | (1u << LOWP_SEL_NSA);
        if (!qlen_set)
            c.qlen = 64;
        if (c.nlayers == 0) { /* blk.0 .. the last present */
            char p[4200];
            for (; c.nlayers < 256; c.nlayers++) {
                real_path(p, sizeof p, c.keys_from, c.nlayers, "k");
                if (access(p, R_OK) != 0)
                    break;
            }
            if (c.nlayers == 0)
                lowp_cli_fail("--keys-from %s: no blk.0.k.npy there (the layout `lowp model export` writes)",
                              c.keys_from);
            for (size_t j = 0; j < c.nlayers; j++)
                c.layers[j] = j;
        }
    } else if (c.nlayers != 0)
        lowp_cli_fail("select-sweep: --layers needs --keys-from");
    if (quick) {
        if (!c.ctx_set) {
            c.ctxs[0] = 4096;
            c.ctxs[1] = 8192;
            c.nctx = 2;
        }
        if (!qlen_set)
            c.qlen = 2;
        c.dsa_heads = 16;
    }
    int tables = shard.n == 1;
    if (tables)
        lowp_out_check("--csv", csv);
    if (result != NULL) {
        lowp_out_check("--result", result);
        if (tables && csv != NULL && strcmp(result, csv) == 0)
            lowp_cli_fail("--result and --csv name the same file '%s'", csv);
    }
    json_t *res = NULL;
    if (merge) {
        res = lowp_result_merge("select-sweep", so.files, so.n_files);
        cfg_from_args(lowp_result_args(res), &c);
        if (count_units(&c) != lowp_result_count(res))
            lowp_cli_fail("merge: the results hold %zu units, their options make %zu", lowp_result_count(res),
                          count_units(&c));
    }
    sweep_out o = {NULL, tables && !(csv != NULL && strcmp(csv, "-") == 0), !merge && lowp_progress_wanted()};
    char *lines = NULL;
    size_t llen = 0;
    o.rows = open_memstream(&lines, &llen);
    if (o.rows == NULL)
        lowp_cli_fail("out of memory");
    fprintf(o.rows, "selector,workload,ctx,keys,selections,unchanged,jaccard_mean,jaccard_min,recall_mean,lost,"
                    "deepest,needle_kept,needle_kept_ref,needles,zero_scales,blocks,seconds,certified,values,err_sel,"
                    "err_val,err_both,sel_share\n");
    if (o.table)
        print_header(&c);
    if (merge) {
        for (size_t u = 0; u < lowp_result_count(res); u++)
            render_unit(&o, lowp_result_at(res, u), NULL);
    } else {
        res = lowp_result_new("select-sweep", cfg_args(&c), &shard, count_units(&c));
        size_t units = c.keys_from != NULL ? real_sweep(&o, &c, &shard, res) : seeded_sweep(&o, &c, &shard, res);
        if (units != count_units(&c))
            lowp_cli_fail("select-sweep: %zu units run, %zu counted (a bug)", units, count_units(&c));
    }
    if (o.progress)
        fputs("\r\033[K", stderr);
    if (fclose(o.rows) != 0)
        lowp_cli_fail("out of memory");
    if (result != NULL)
        lowp_result_write(res, result);
    if (tables && csv != NULL) {
        FILE *out = lowp_out_open(csv, 0);
        if (fwrite(lines, 1, llen, out) != llen)
            lowp_cli_fail("cannot write '%s'", csv);
        lowp_out_commit(out);
    }
    if (!tables)
        printf("select-sweep: shard %zu/%zu: %zu of %zu cases; result %s\n", shard.k, shard.n,
               lowp_result_count(res), count_units(&c), result);
    json_decref(res);
    free(lines);
    lowp_shard_opts_free(&so);
    return LOWP_EXIT_OK;
}
