/* tools/cmd_attn.c: `lowp attn`: attention over a quantized KV cache, one case.
 *
 *   lowp attn --q Q.npy --k K.npy --v V.npy --kv-format F [--recipe R] [--sm-scale S]
 *             [--q-offset P] [--path exact|decode|extend|prefill|fp8kv] --out O.npy
 *             [--baseline B.npy] [cache and scale options]
 *
 * Q is float [q_len, num_q_heads, qk_dim], K [ctx, num_kv_heads, qk_dim], V [ctx,
 * num_kv_heads, vo_dim] (F32, F16, BF16; F64 rounded to binary32; lowp_tensor_load_float).
 * K and V are quantized to F under recipe R (default: the cache's, lowp_kv_config_default)
 * with blocks along the head dim and a global scale from the whole K or V tensor
 * (lowp_sweep_global_scale, calibrated; --k-scale / --v-scale override it). Query token i
 * sits at position P + i (P defaults to ctx - q_len) and sees positions 0..P+i.
 *
 * The tokens are written one by one into a paged cache (lowp/kvcache.h: --page-size,
 * --page-table, --num-pages, --layout, --k-sf-order, --v-sf-order). The cache starts
 * poisoned (every byte 0xFF, NaN in every scale format), so a slot read that was never
 * written shows up as NaN in the output. The exact path reads the cache through the page
 * table (lowp_kvcache_gather_range); every path is also computed by lowp_kv_path_run, and
 * the exact values read from the cache must equal the path's exact values bit for bit.
 *
 * O is the exact attention over the path's effective values, correctly rounded to
 * binary32: the binary64 reference (lowp_attn_ref_f64) decides an output when its bound
 * (lowp_attn_ref_bounds) puts the exact value inside one binary32 rounding interval, and the
 * MPFR oracle (lowp_attn_oracle_mpfr) computes the rows where it does not (--mpfr-all: every
 * row). --baseline writes the same for the unquantized K/V (and Q as given). Error
 * statistics of the path's attention against the unquantized one (both exact math,
 * binary64) go to stdout, per query head and overall (lowp/attn_sweep.h defines them).
 *
 * Memory: after the cache is written the work runs one KV head at a time (see the loop),
 * so what is held is the float K and V (once when --v is --k's file), the quantized cache,
 * binary64 copies of one head's K and V (the path's and the unquantized), and the
 * probabilities of a block of query tokens; about 2 x the K/V bytes at 8 KV heads.
 * A terminal gets a progress line (cache write, then per KV head: effective values,
 * reference, bounds, oracle). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "lowp/attn.h"
#include "lowp/attn_sweep.h"
#include "lowp/block.h"
#include "lowp/calib.h"
#include "lowp/kvcache.h"
#include "lowp/tensor.h"

LOWP_COMMAND_DEFINE(attn, "attention over a quantized paged KV cache: correctly rounded output, error stats");

static void attn_usage(FILE *f)
{
    fputs("usage: lowp attn --q Q.npy --k K.npy --v V.npy --kv-format F --out O.npy [options]\n"
          "  Q [q_len, num_q_heads, qk_dim], K [ctx, num_kv_heads, qk_dim], V [ctx, num_kv_heads, vo_dim]\n"
          "  (.npy or .safetensors; F32, F16, BF16, F64 rounded to binary32; finite values only)\n"
          "  --kv-format F     bf16 fp8_e4m3 fp8_e5m2 nvfp4 mxfp4 mxfp8\n"
          "  --recipe R        the quantizer (default: sglang-kv for nvfp4, else the format's default)\n"
          "  --k-scale G, --v-scale G  decode-side global scales (default: from the tensor amax,\n"
          "                    lowp_sweep_global_scale; only 1 for formats without a global scale)\n"
          "  --sm-scale S      softmax scale (default 1/sqrt(qk_dim))\n"
          "  --q-offset P      position of query token 0 (default ctx - q_len)\n"
          "  --path P          exact (default) decode extend prefill fp8kv (lowp/kvcache.h)\n"
          "  --chunk-start C   extend: first token of the current chunk (default: the q-offset)\n"
          "  --q-type T        default f32 bf16 fp8: Q as the kernel sees it (default: the path's)\n"
          "  --page-size N     cache page size in tokens (default 16)\n"
          "  --page-table FILE .npy of integers: the physical page of each logical page, exactly\n"
          "                    ceil(ctx / page-size) entries, distinct (default 0, 1, 2, ...)\n"
          "  --num-pages N     pages in the pool (default: the largest page index + 1); unused\n"
          "                    pages and slots stay poisoned (NaN)\n"
          "  --layout L        nhd (default) hnd;  --k-sf-order / --v-sf-order linear interleave4\n"
          "  --out O.npy       the attention output, float32 [q_len, num_q_heads, vo_dim]; a name\n"
          "                    ending in .safetensors writes one tensor \"out\" instead\n"
          "  --baseline B.npy  the same over the unquantized K/V\n"
          "  --mpfr-all        compute every output row with the MPFR oracle (slow; a check of the\n"
          "                    reference-plus-bound fast path)\n"
          "  stdout: the case, what the quantizer did, and per-head / overall rel_L2, max_abs,\n"
          "  cosine and softmax total-variation distance against the unquantized attention\n",
          f);
}








/* ---------------------------------------------------------------------------------- */
/* correctly rounded output                                                            */

/* The oracle on the query group of KV head g at query token i: a sub-problem with that
 * token, the group's G query heads (contiguous), its KV head and the visible positions
 * only. The oracle runs the G rows in parallel (OpenMP). out32 gets [G][vo_dim]. With one
 * KV head (lowp attn's per-head sub-problems) the visible keys are the first rows of k and
 * v as they are; with more they are gathered. */
static void oracle_group(const lowp_attn_shape *s, const double *q, const double *k, const double *v, size_t i,
                         size_t g, float *out32)
{
    size_t G = s->num_q_heads / s->num_kv_heads, vis = s->q_offset + i + 1;
    size_t D = s->qk_dim, Dv = s->vo_dim;
    double *ks = NULL, *vs = NULL;
    if (s->num_kv_heads > 1) {
        ks = malloc(vis * D * sizeof *ks);
        vs = malloc(vis * Dv * sizeof *vs);
        if (ks == NULL || vs == NULL)
            lowp_cli_fail("out of memory for an oracle group");
        for (size_t t = 0; t < vis; t++) {
            memcpy(ks + t * D, k + (t * s->num_kv_heads + g) * D, D * sizeof *ks);
            memcpy(vs + t * Dv, v + (t * s->num_kv_heads + g) * Dv, Dv * sizeof *vs);
        }
    }
    lowp_attn_shape sub = *s;
    sub.q_len = 1;
    sub.num_q_heads = G;
    sub.num_kv_heads = 1;
    sub.ctx = vis;
    sub.q_offset = vis - 1;
    char why[256];
    if (lowp_attn_oracle_mpfr(&sub, q + (i * s->num_q_heads + g * G) * D, ks != NULL ? ks : k, vs != NULL ? vs : v, 0,
                              out32, NULL, why, sizeof why))
        lowp_cli_fail("the MPFR oracle failed on query token %zu, KV head %zu: %s", i, g, why);
    free(ks);
    free(vs);
}

/* out32 = RN_binary32(exact attention) from the binary64 reference ref and its bound, the
 * oracle where the bound leaves the rounding open (a non-finite reference output, whose
 * bound is +Inf, always goes to the oracle): every query group with an open output is
 * recomputed whole. Returns the number of rows the oracle computed. what names the
 * problem on the progress line. */
static size_t round_outputs(const lowp_attn_shape *s, const double *q, const double *k, const double *v,
                            const double *ref, int all_mpfr, float *out32, lowp_progress *pr, const char *what,
                            size_t *decided)
{
    size_t rows = s->q_len * s->num_q_heads, Dv = s->vo_dim, G = s->num_q_heads / s->num_kv_heads;
    char why[256];
    lowp_progress_phase(pr);
    if (all_mpfr) {
        lowp_progress_show(pr, 0, rows, "rows", "%s: MPFR oracle", what);
        if (lowp_attn_oracle_mpfr(s, q, k, v, 0, out32, NULL, why, sizeof why))
            lowp_cli_fail("the MPFR oracle failed: %s", why);
        lowp_progress_show(pr, rows, rows, "rows", "%s: MPFR oracle", what);
        return rows;
    }
    lowp_progress_show(pr, 0, rows, "rows", "%s: bounds", what);
    double *bound = malloc(rows * Dv * sizeof *bound);
    if (bound == NULL)
        lowp_cli_fail("out of memory for the bounds");
    if (lowp_attn_ref_f64_bounded(s, q, k, v, NULL, bound, why, sizeof why))
        lowp_cli_fail("attention bound: %s", why);
    size_t groups = s->q_len * s->num_kv_heads, n_oracle = 0, done = 0;
    unsigned char *open = calloc(groups, 1);
    if (open == NULL)
        lowp_cli_fail("out of memory for the bounds");
    size_t n_open = 0;
    for (size_t r = 0; r < rows; r++) {
        size_t grp = (r / s->num_q_heads) * s->num_kv_heads + (r % s->num_q_heads) / G;
        for (size_t d = 0; d < Dv; d++) {
            if (lowp_attn_f32_decided(ref[r * Dv + d], bound[r * Dv + d], &out32[r * Dv + d]))
                ++*decided;
            else if (!open[grp]) {
                open[grp] = 1;
                n_open++;
            }
        }
    }
    lowp_progress_show(pr, rows, rows, "rows", "%s: bounds", what);
    if (n_open > 0)
        lowp_progress_phase(pr);
    for (size_t grp = 0; grp < groups; grp++) {
        if (!open[grp])
            continue;
        size_t i = grp / s->num_kv_heads, g = grp % s->num_kv_heads;
        lowp_progress_show(pr, done, n_open, "query groups", "%s: MPFR oracle", what);
        oracle_group(s, q, k, v, i, g, out32 + (i * s->num_q_heads + g * G) * Dv);
        n_oracle += G;
        lowp_progress_show(pr, ++done, n_open, "query groups", "%s: MPFR oracle", what);
    }
    free(open);
    free(bound);
    return n_oracle;
}

/* ---------------------------------------------------------------------------------- */

typedef struct {
    const char *q, *k, *v, *out, *baseline, *page_table;
    const char *format, *recipe, *path, *layout, *k_sf, *v_sf, *q_type;
    double sm_scale, k_scale, v_scale;
    int sm_scale_set, k_scale_set, v_scale_set, q_offset_set, chunk_set, num_pages_set, mpfr_all;
    size_t q_offset, chunk_start, page_size, num_pages;
} attn_args;

static void parse_args(int argc, char **argv, attn_args *a)
{
    memset(a, 0, sizeof *a);
    a->path = "exact";
    a->layout = "nhd";
    a->k_sf = a->v_sf = "linear";
    a->q_type = "default";
    a->page_size = 16;
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        if (strcmp(s, "--q") == 0)
            a->q = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(s, "--k") == 0)
            a->k = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(s, "--v") == 0)
            a->v = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(s, "--out") == 0)
            a->out = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(s, "--baseline") == 0)
            a->baseline = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(s, "--kv-format") == 0)
            a->format = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(s, "--recipe") == 0)
            a->recipe = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(s, "--path") == 0)
            a->path = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(s, "--layout") == 0)
            a->layout = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(s, "--k-sf-order") == 0)
            a->k_sf = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(s, "--v-sf-order") == 0)
            a->v_sf = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(s, "--q-type") == 0)
            a->q_type = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(s, "--page-table") == 0)
            a->page_table = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(s, "--sm-scale") == 0) {
            a->sm_scale = lowp_cli_parse_positive(s, lowp_cli_option_value(argc, argv, &i));
            a->sm_scale_set = 1;
        } else if (strcmp(s, "--k-scale") == 0) {
            a->k_scale = lowp_cli_parse_positive(s, lowp_cli_option_value(argc, argv, &i));
            a->k_scale_set = 1;
        } else if (strcmp(s, "--v-scale") == 0) {
            a->v_scale = lowp_cli_parse_positive(s, lowp_cli_option_value(argc, argv, &i));
            a->v_scale_set = 1;
        } else if (strcmp(s, "--q-offset") == 0) {
            a->q_offset = lowp_cli_parse_count(s, lowp_cli_option_value(argc, argv, &i), 1);
            a->q_offset_set = 1;
        } else if (strcmp(s, "--chunk-start") == 0) {
            a->chunk_start = lowp_cli_parse_count(s, lowp_cli_option_value(argc, argv, &i), 1);
            a->chunk_set = 1;
        } else if (strcmp(s, "--page-size") == 0)
            a->page_size = lowp_cli_parse_count(s, lowp_cli_option_value(argc, argv, &i), 0);
        else if (strcmp(s, "--num-pages") == 0) {
            a->num_pages = lowp_cli_parse_count(s, lowp_cli_option_value(argc, argv, &i), 0);
            a->num_pages_set = 1;
        } else if (strcmp(s, "--mpfr-all") == 0)
            a->mpfr_all = 1;
        else if (strcmp(s, "--help") == 0 || strcmp(s, "-h") == 0) {
            attn_usage(stdout);
            exit(LOWP_EXIT_OK);
        } else
            lowp_cli_fail("attn: unknown argument '%s' (see lowp attn --help)", s);
    }
    if (a->q == NULL || a->k == NULL || a->v == NULL)
        lowp_cli_fail("attn: --q, --k and --v are required (see lowp attn --help)");
    if (a->format == NULL)
        lowp_cli_fail("attn: --kv-format is required (bf16 fp8_e4m3 fp8_e5m2 nvfp4 mxfp4 mxfp8)");
    if (a->out == NULL)
        lowp_cli_fail("attn: --out is required");
    if (a->baseline != NULL && strcmp(a->baseline, a->out) == 0)
        lowp_cli_fail("--baseline and --out name the same file '%s'", a->out);
    if (strcmp(a->out, "-") == 0 || (a->baseline != NULL && strcmp(a->baseline, "-") == 0))
        lowp_cli_fail("attn: --out and --baseline are .npy files, not standard output (the statistics go there)");
}

static const char *const format_list = "bf16 fp8_e4m3 fp8_e5m2 nvfp4 mxfp4 mxfp8";

int lowp_cmd_attn(int argc, char **argv)
{
    attn_args a;
    parse_args(argc, argv, &a);
    char why[512];

    /* names first: a typo fails before any file is read */
    lowp_block_format f;
    if (lowp_block_format_parse(a.format, &f))
        lowp_cli_fail("--kv-format: unknown format '%s' (%s)", a.format, format_list);
    lowp_recipe recipe = lowp_kv_config_default(f, 1, 1, 1, 1, 1).recipe;
    if (a.recipe != NULL) {
        if (lowp_recipe_parse(a.recipe, &recipe))
            lowp_cli_fail("--recipe: unknown recipe '%s' (%s)", a.recipe, lowp_recipe_names());
        if (lowp_recipe_check(f, recipe, why, sizeof why))
            lowp_cli_fail("--recipe %s --kv-format %s: %s", a.recipe, a.format, why);
    }
    lowp_kv_path path;
    if (lowp_kv_path_parse(a.path, &path))
        lowp_cli_fail("--path: unknown data path '%s' (exact decode extend prefill fp8kv)", a.path);
    lowp_kv_layout layout;
    if (lowp_kv_layout_parse(a.layout, &layout))
        lowp_cli_fail("--layout: unknown layout '%s' (nhd hnd)", a.layout);
    lowp_kv_sf_order k_sf, v_sf;
    if (lowp_kv_sf_order_parse(a.k_sf, &k_sf))
        lowp_cli_fail("--k-sf-order: unknown scale order '%s' (linear interleave4)", a.k_sf);
    if (lowp_kv_sf_order_parse(a.v_sf, &v_sf))
        lowp_cli_fail("--v-sf-order: unknown scale order '%s' (linear interleave4)", a.v_sf);
    lowp_kv_qtype q_type;
    static const char *const qt_names[] = {"default", "f32", "bf16", "fp8"};
    int qt = -1;
    for (int i = 0; i < 4; i++)
        if (strcmp(a.q_type, qt_names[i]) == 0)
            qt = i;
    if (qt < 0)
        lowp_cli_fail("--q-type: unknown Q type '%s' (default f32 bf16 fp8)", a.q_type);
    q_type = (lowp_kv_qtype)qt;
    if ((a.k_scale_set && a.k_scale != 1.0) || (a.v_scale_set && a.v_scale != 1.0))
        if (!lowp_block_has_global_scale(f))
            lowp_cli_fail("--%s-scale: %s has no global scale (only 1 is accepted)",
                          a.k_scale_set && a.k_scale != 1.0 ? "k" : "v", a.format);
    if (a.k_scale_set && !((float)a.k_scale > 0 && isfinite((float)a.k_scale)))
        lowp_cli_fail("--k-scale: %g is not a positive finite binary32 value", a.k_scale);
    if (a.v_scale_set && !((float)a.v_scale > 0 && isfinite((float)a.v_scale)))
        lowp_cli_fail("--v-scale: %g is not a positive finite binary32 value", a.v_scale);
    /* the paths' format requirements (lowp/kvcache.h), before anything is allocated */
    if (path == LOWP_KV_PATH_EXTEND && f != LOWP_NVFP4)
        lowp_cli_fail("--path extend dequantizes an NVFP4 prefix into the FP8 workspace; --kv-format is %s",
                      a.format);
    if (path == LOWP_KV_PATH_FP8KV && f != LOWP_FP8_E4M3 && f != LOWP_FP8_E5M2)
        lowp_cli_fail("--path fp8kv reads an FP8 cache; --kv-format is %s", a.format);
    if (a.chunk_set && path != LOWP_KV_PATH_EXTEND)
        lowp_cli_fail("--chunk-start applies to --path extend only (the path is %s)", a.path);
    lowp_cli_check_writable("--out", a.out);
    if (a.baseline != NULL)
        lowp_cli_check_writable("--baseline", a.baseline);
    {
        const char *outs[2][2] = {{"--out", a.out}, {"--baseline", a.baseline}};
        const char *ins[4][2] = {{"--q", a.q}, {"--k", a.k}, {"--v", a.v}, {"--page-table", a.page_table}};
        for (int o = 0; o < 2; o++)
            for (int n = 0; n < 4; n++)
                lowp_cli_check_not_input(outs[o][0], outs[o][1], ins[n][0], ins[n][1]);
    }

    /* inputs and their shapes */
    size_t qd[3], kd[3], vd[3];
    float *q = lowp_cli_load_f32_3("--q", a.q, qd, "[q_len, num_q_heads, qk_dim]");
    float *k = lowp_cli_load_f32_3("--k", a.k, kd, "[ctx, num_kv_heads, qk_dim]");
    /* --v naming the same file as --k (K = V, as in a self-check) shares K's buffer */
    struct stat sk, sv;
    int same_kv = stat(a.k, &sk) == 0 && stat(a.v, &sv) == 0 && S_ISREG(sk.st_mode) && sk.st_dev == sv.st_dev &&
                  sk.st_ino == sv.st_ino;
    float *v = same_kv ? k : lowp_cli_load_f32_3("--v", a.v, vd, "[ctx, num_kv_heads, vo_dim]");
    if (same_kv)
        memcpy(vd, kd, sizeof vd);
    if (vd[0] != kd[0])
        lowp_cli_fail("--v has %zu tokens but --k has %zu (K and V hold the same context)", vd[0], kd[0]);
    if (vd[1] != kd[1])
        lowp_cli_fail("--v has %zu KV heads but --k has %zu", vd[1], kd[1]);
    if (qd[2] != kd[2])
        lowp_cli_fail("--q has qk_dim %zu but --k has %zu", qd[2], kd[2]);
    if (qd[1] % kd[1] != 0)
        lowp_cli_fail("--q has %zu query heads, not a multiple of --k's %zu KV heads", qd[1], kd[1]);
    lowp_attn_shape s;
    memset(&s, 0, sizeof s);
    s.q_len = qd[0];
    s.num_q_heads = qd[1];
    s.num_kv_heads = kd[1];
    s.qk_dim = kd[2];
    s.vo_dim = vd[2];
    s.ctx = kd[0];
    if (s.q_len > s.ctx)
        lowp_cli_fail("--q has %zu query tokens but the context (--k) has only %zu", s.q_len, s.ctx);
    s.q_offset = a.q_offset_set ? a.q_offset : s.ctx - s.q_len;
    if (s.q_offset + s.q_len > s.ctx)
        lowp_cli_fail("--q-offset %zu + %zu query tokens runs past the context of %zu tokens", s.q_offset, s.q_len,
                      s.ctx);
    s.sm_scale = a.sm_scale_set ? a.sm_scale : 0.0;
    if (lowp_attn_check_shape(&s, why, sizeof why))
        lowp_cli_fail("attn: %s", why);
    size_t chunk_start = a.chunk_set ? a.chunk_start : s.q_offset;
    if (chunk_start > s.ctx)
        lowp_cli_fail("--chunk-start %zu is past the context of %zu tokens", chunk_start, s.ctx);
    size_t bs = lowp_block_size(f);
    if (s.qk_dim % bs != 0 || s.vo_dim % bs != 0)
        lowp_cli_fail("--kv-format %s quantizes blocks of %zu along the head dim; qk_dim %zu and vo_dim %zu must "
                      "be multiples of it",
                      a.format, bs, s.qk_dim, s.vo_dim);

    /* the page table */
    size_t P = a.page_size, n_log = (s.ctx + P - 1) / P, n_tab = 0;
    int32_t *table;
    if (a.page_table != NULL) {
        table = lowp_cli_load_page_table(a.page_table, &n_tab);
        /* the failures below free the table first: a failing run leaks nothing (the
         * sanitized CLI tests check these exits too) */
        if (n_tab != n_log) {
            free(table);
            lowp_cli_fail("--page-table %s has %zu entries; a context of %zu tokens at --page-size %zu needs %zu",
                          a.page_table, n_tab, s.ctx, P, n_log);
        }
    } else {
        if (n_log > INT32_MAX)
            lowp_cli_fail("--page-size %zu: %zu pages exceed int32 page indices", P, n_log);
        table = malloc(n_log * sizeof *table);
        if (table == NULL)
            lowp_cli_fail("out of memory for the page table");
        for (size_t i = 0; i < n_log; i++)
            table[i] = (int32_t)i;
    }
    size_t max_page = 0;
    for (size_t i = 0; i < n_log; i++)
        if ((size_t)table[i] > max_page)
            max_page = (size_t)table[i];
    size_t num_pages = a.num_pages_set ? a.num_pages : max_page + 1;
    for (size_t i = 0; i < n_log; i++)
        if ((size_t)table[i] >= num_pages) {
            int bad = (int)table[i];
            free(table);
            lowp_cli_fail("--page-table entry %zu is page %d, outside the pool of --num-pages %zu", i, bad, num_pages);
        }
    int32_t indptr[2] = {0, (int32_t)n_log};
    int32_t last = (int32_t)(s.ctx - (n_log - 1) * P);
    lowp_kv_page_table pt = {1, indptr, table, &last};
    if (lowp_kv_page_table_check(&pt, num_pages, P, why, sizeof why)) {
        free(table);
        lowp_cli_fail("--page-table%s%s: %s", a.page_table ? " " : " (default)", a.page_table ? a.page_table : "",
                      why);
    }

    /* the cache */
    lowp_kv_config cfg = lowp_kv_config_default(f, num_pages, P, s.num_kv_heads, s.qk_dim, s.vo_dim);
    cfg.recipe = recipe;
    cfg.layout = layout;
    cfg.k_sf_order = k_sf;
    cfg.v_sf_order = v_sf;
    if (lowp_kv_config_check(&cfg, why, sizeof why))
        lowp_cli_fail("cache (--kv-format %s --page-size %zu --layout %s --k-sf-order %s --v-sf-order %s): %s",
                      a.format, P, a.layout, a.k_sf, a.v_sf, why);
    size_t nk = s.ctx * s.num_kv_heads * s.qk_dim, nv = s.ctx * s.num_kv_heads * s.vo_dim;
    size_t nq = s.q_len * s.num_q_heads * s.qk_dim, no = s.q_len * s.num_q_heads * s.vo_dim;
    float kamax = lowp_calib_amax(k, nk), vamax = lowp_calib_amax(v, nv);
    float kg = a.k_scale_set ? (float)a.k_scale : lowp_sweep_global_scale(f, recipe, LOWP_SWEEP_SCALE_CALIBRATED, kamax).dec;
    float vg = a.v_scale_set ? (float)a.v_scale : lowp_sweep_global_scale(f, recipe, LOWP_SWEEP_SCALE_CALIBRATED, vamax).dec;
    lowp_kvcache *cache;
    if (lowp_kvcache_create(&cfg, &cache, why, sizeof why))
        lowp_cli_fail("cache: %s", why);
    if (lowp_kvcache_set_global_scales(cache, &kg, &vg, 1, why, sizeof why))
        lowp_cli_fail("global scales: %s", why);
    lowp_progress pr;
    lowp_progress_init(&pr, "attn");
    for (size_t t = 0; t < s.ctx; t++) {
        if (lowp_kvcache_write_pos(cache, &pt, 0, t, k + t * s.num_kv_heads * s.qk_dim,
                                   v + t * s.num_kv_heads * s.vo_dim, NULL, NULL, why, sizeof why))
            lowp_cli_fail("cache write of token %zu: %s", t, why);
        if ((t & 1023) == 1023 || t + 1 == s.ctx)
            lowp_progress_show(&pr, t + 1, s.ctx, "tokens", "cache write");
    }

    /* The rest runs one KV head at a time: every value below (effective K/V, reference,
     * bound, oracle) of KV head g is a function of that head's K/V, its query group and the
     * visible positions alone (lowp/attn.h), so the per-head sub-problems give the outputs
     * of the whole problem bit for bit while binary64 copies of one head are held, not of
     * the whole cache. ke/ve: the path's effective values; kb/vb: the unquantized ones
     * (the baseline); kf/vf: the head's float K/V gathered for the path (the input itself
     * when there is one KV head), staged in kb/vb's memory, which they are done with
     * before kb/vb are filled. */
    const size_t H = s.num_kv_heads, G = s.num_q_heads / H, D = s.qk_dim, Dv = s.vo_dim;
    const size_t nhk = s.ctx * D, nhv = s.ctx * Dv, rows = s.q_len * s.num_q_heads;
    double *ke = malloc(nhk * sizeof *ke), *ve = malloc(nhv * sizeof *ve);
    double *kb = malloc(nhk * sizeof *kb), *vb = malloc(nhv * sizeof *vb);
    float *kf = (float *)(void *)kb, *vf = (float *)(void *)vb;
    /* the path's Q in binary64, whole: lowp_kv_path_run forms every query head at once
     * (the unquantized Q is read per sub-problem from q itself) */
    double *qe = malloc(nq * sizeof *qe);
    double *o64 = malloc(no * sizeof *o64), *b64 = malloc(no * sizeof *b64), *tv = malloc(rows * sizeof *tv);
    float *o32 = malloc(no * sizeof *o32), *b32 = malloc(no * sizeof *b32);
    if (ke == NULL || ve == NULL || kb == NULL || vb == NULL || qe == NULL || o64 == NULL ||
        b64 == NULL || tv == NULL || o32 == NULL || b32 == NULL)
        lowp_cli_fail("out of memory for the effective K/V");
    /* the exact path against the cache, a block of positions at a time */
    const size_t CB = 1024;
    double *kc = malloc(CB * D * sizeof *kc), *vc = malloc(CB * Dv * sizeof *vc);
    if (kc == NULL || vc == NULL)
        lowp_cli_fail("out of memory for the cache read");
    /* Query tokens per sub-problem: its two probability blocks ([tokens][G][ctx] binary64,
     * the path's and the baseline's, for the total-variation distance) held to the size
     * of one head's effective K/V, or 64 MiB if that is less. */
    size_t pbudget = (nhk + nhv) * sizeof(double);
    if (pbudget < ((size_t)64 << 20))
        pbudget = (size_t)64 << 20;
    size_t TB = pbudget / (2 * G * s.ctx * sizeof(double));
    TB = TB < 1 ? 1 : TB > s.q_len ? s.q_len : TB;
    size_t sub_rows = TB * G;
    double *qse = malloc(sub_rows * D * sizeof *qse), *qsb = malloc(sub_rows * D * sizeof *qsb);
    double *ose = malloc(sub_rows * Dv * sizeof *ose), *osb = malloc(sub_rows * Dv * sizeof *osb);
    float *oe32 = malloc(sub_rows * Dv * sizeof *oe32), *ob32 = malloc(sub_rows * Dv * sizeof *ob32);
    double *pq = malloc(sub_rows * s.ctx * sizeof *pq), *pb = malloc(sub_rows * s.ctx * sizeof *pb);
    if (qse == NULL || qsb == NULL || ose == NULL || osb == NULL || oe32 == NULL || ob32 == NULL || pq == NULL ||
        pb == NULL)
        lowp_cli_fail("out of memory for the attention");

    lowp_kv_config hcfg = cfg; /* one KV head: the path's per-head sub-problem */
    hcfg.num_heads = 1;
    lowp_kv_view view = lowp_kv_view_of(&cfg);
    lowp_kv_path_result pres;
    memset(&pres, 0, sizeof pres);
    size_t oracle_rows = 0, oracle_rows_b = 0, k_changed = 0, v_changed = 0, decided = 0, decided_b = 0;
    for (size_t g = 0; g < H; g++) {
        char what[64];
        snprintf(what, sizeof what, "KV head %zu/%zu", g + 1, H);
        lowp_progress_phase(&pr);
        lowp_progress_show(&pr, g, H, "KV heads", "effective values");
        const float *kh = k, *vh = v;
        if (H > 1) {
            for (size_t t = 0; t < s.ctx; t++) {
                memcpy(kf + t * D, k + (t * H + g) * D, D * sizeof *kf);
                memcpy(vf + t * Dv, v + (t * H + g) * Dv, Dv * sizeof *vf);
            }
            kh = kf;
            vh = vf;
        }
        /* Q is the same for every head: computed with head 0 */
        const float *qh = g == 0 ? q : NULL;
        double *qeh = g == 0 ? qe : NULL;
        lowp_kv_path_result r;
        /* the exact path must equal what the paged cache holds, bit for bit; on the exact
         * path it is also the path's own run (then with Q) */
        lowp_kv_path_args pa = lowp_kv_path_args_init(LOWP_KV_PATH_EXACT, &hcfg, s.ctx, s.q_len, s.num_q_heads,
                                                       path == LOWP_KV_PATH_EXACT ? qh : NULL, kh, vh);
        pa.k_gs = &kg;
        pa.v_gs = &vg;
        pa.q_type = path == LOWP_KV_PATH_EXACT ? q_type : LOWP_KV_Q_DEFAULT;
        if (lowp_kv_path_run(&pa, 1, path == LOWP_KV_PATH_EXACT ? qeh : NULL, ke, ve, NULL, NULL, &r, why,
                             sizeof why))
            lowp_cli_fail("--path exact: %s", why);
        for (size_t t0 = 0; t0 < s.ctx; t0 += CB) {
            size_t n = s.ctx - t0 < CB ? s.ctx - t0 : CB;
            if (lowp_kvcache_gather_range(cache, &view, &pt, 0, t0, n, g, 1, kc, vc, why, sizeof why))
                lowp_cli_fail("cache read: %s", why);
            for (size_t i = 0; i < n * (D + Dv); i++) {
                int isk = i < n * D;
                size_t j = isk ? i : i - n * D, d = isk ? D : Dv;
                double *e = (isk ? ke + t0 * D : ve + t0 * Dv) + j;
                double x = isk ? kc[j] : vc[j], y = *e;
                if (memcmp(&x, &y, sizeof x) != 0 && !(isnan(x) && isnan(y))) {
                    fprintf(stderr, "%slowp: internal mismatch: %s[%zu, %zu, %zu] read from the paged cache is %a, "
                                    "the exact path gives %a\n",
                            pr.shown ? "\n" : "", isk ? "K" : "V", t0 + j / d, g, j % d, x, y);
                    return LOWP_EXIT_MISMATCH;
                }
                if (path == LOWP_KV_PATH_EXACT) /* the exact path: the cache's own values */
                    *e = x;
                /* what the statistics are against: the inputs as given, which the cache
                 * changed here (or not, when the inputs are already dequantized values) */
                const float *in = isk ? k + ((t0 + j / d) * H + g) * D + j % d : v + ((t0 + j / d) * H + g) * Dv + j % d;
                *(isk ? &k_changed : &v_changed) += !(x == (double)*in);
            }
        }
        /* the path's effective values */
        if (path != LOWP_KV_PATH_EXACT) {
            pa = lowp_kv_path_args_init(path, &hcfg, s.ctx, s.q_len, s.num_q_heads, qh, kh, vh);
            pa.k_gs = &kg;
            pa.v_gs = &vg;
            pa.chunk_start = path == LOWP_KV_PATH_EXTEND ? chunk_start : 0;
            pa.q_type = q_type;
            if (lowp_kv_path_run(&pa, 1, qeh, ke, ve, NULL, NULL, &r, why, sizeof why))
                lowp_cli_fail("--path %s: %s", a.path, why);
        }
        pres.k_nan += r.k_nan;
        pres.k_inf += r.k_inf;
        pres.v_nan += r.v_nan;
        pres.v_inf += r.v_inf;
        if (g == 0)
            pres.q_nan = r.q_nan;
        for (size_t t = 0; t < s.ctx; t++) { /* kf/vf are dead from here: kb/vb overwrite them */
            for (size_t d = 0; d < D; d++)
                kb[t * D + d] = k[(t * H + g) * D + d];
            for (size_t d = 0; d < Dv; d++)
                vb[t * Dv + d] = v[(t * H + g) * Dv + d];
        }

        /* attention on the sub-problems of this head's query group, TB query tokens each */
        for (size_t i0 = 0; i0 < s.q_len; i0 += TB) {
            size_t i1 = s.q_len - i0 < TB ? s.q_len : i0 + TB, sr = (i1 - i0) * G;
            lowp_attn_shape sub = s;
            sub.q_len = i1 - i0;
            sub.num_q_heads = G;
            sub.num_kv_heads = 1;
            sub.ctx = s.q_offset + i1; /* the keys the last token sees */
            sub.q_offset = s.q_offset + i0;
            for (size_t i = i0; i < i1; i++) {
                size_t src = (i * s.num_q_heads + g * G) * D, dst = (i - i0) * G * D;
                memcpy(qse + dst, qe + src, G * D * sizeof *qse);
                for (size_t x = 0; x < G * D; x++)
                    qsb[dst + x] = q[src + x];
            }
            if (i0 == 0)
                lowp_progress_phase(&pr);
            lowp_progress_show(&pr, i0, s.q_len, "query tokens", "%s: reference", what);
            if (lowp_attn_ref_f64(&sub, qse, ke, ve, ose, pq, why, sizeof why) ||
                lowp_attn_ref_f64(&sub, qsb, kb, vb, osb, pb, why, sizeof why))
                lowp_cli_fail("attention: %s", why);
            oracle_rows += round_outputs(&sub, qse, ke, ve, ose, a.mpfr_all, oe32, &pr, what, &decided);
            if (a.baseline != NULL) {
                char wb[80];
                snprintf(wb, sizeof wb, "%s, baseline", what);
                oracle_rows_b += round_outputs(&sub, qsb, kb, vb, osb, a.mpfr_all, ob32, &pr, wb, &decided_b);
            }
            for (size_t x = 0; x < sr; x++) {
                size_t row = (i0 + x / G) * s.num_q_heads + g * G + x % G;
                tv[row] = lowp_attn_tv(pb + x * sub.ctx, pq + x * sub.ctx, sub.ctx);
                memcpy(o64 + row * Dv, ose + x * Dv, Dv * sizeof *o64);
                memcpy(b64 + row * Dv, osb + x * Dv, Dv * sizeof *b64);
                memcpy(o32 + row * Dv, oe32 + x * Dv, Dv * sizeof *o32);
                if (a.baseline != NULL)
                    memcpy(b32 + row * Dv, ob32 + x * Dv, Dv * sizeof *b32);
            }
        }
    }
    lowp_progress_end(&pr);
    free(kc);
    free(vc);
    free(qse);
    free(qsb);
    free(ose);
    free(osb);
    free(oe32);
    free(ob32);
    free(pq);
    free(pb);
    size_t nan_out = 0, inf_out = 0;
    for (size_t i = 0; i < no; i++) {
        nan_out += isnan(o32[i]) != 0;
        inf_out += isinf(o32[i]) != 0;
    }

    /* report */
    const lowp_quant_counts *kq = lowp_kvcache_counts(cache, LOWP_KV_K), *vq = lowp_kvcache_counts(cache, LOWP_KV_V);
    printf("# lowp attn: Q [%zu, %zu, %zu], K [%zu, %zu, %zu], V [%zu, %zu, %zu]; query token 0 at position %zu; "
           "sm_scale %.9g\n",
           s.q_len, s.num_q_heads, s.qk_dim, s.ctx, s.num_kv_heads, s.qk_dim, s.ctx, s.num_kv_heads, s.vo_dim,
           s.q_offset, s.sm_scale);
    printf("# format %s, recipe %s, path %s%s, Q %s; global scales (decode side) K %.9g%s, V %.9g%s\n",
           lowp_block_format_name(f), lowp_recipe_name(recipe), lowp_kv_path_name(path),
           path == LOWP_KV_PATH_EXTEND ? (chunk_start == s.ctx ? " (no current chunk)" : "") : "",
           q_type == LOWP_KV_Q_DEFAULT ? (path == LOWP_KV_PATH_EXACT ? "f32" : "bf16") : qt_names[qt], (double)kg,
           a.k_scale_set ? " (given)" : lowp_block_has_global_scale(f) ? " (from the amax)" : "", (double)vg,
           a.v_scale_set ? " (given)" : lowp_block_has_global_scale(f) ? " (from the amax)" : "");
    if (path == LOWP_KV_PATH_EXTEND)
        printf("# extend: tokens 0..%zu from the cache through the FP8 workspace, %zu..%zu the current chunk\n",
               chunk_start ? chunk_start - 1 : 0, chunk_start, s.ctx - 1);
    printf("# cache: %zu pages of %zu tokens (%zu used), layout %s, K scales %s, V scales %s; unused slots poisoned "
           "0x%02X\n",
           num_pages, P, n_log, lowp_kv_layout_name(layout), lowp_kv_sf_order_name(k_sf),
           lowp_kv_sf_order_name(v_sf), LOWP_KV_POISON);
    printf("# quantizer: K saturated %zu flushed %zu nan %zu subnormal-scales %zu zero-scales %zu; V saturated %zu "
           "flushed %zu nan %zu subnormal-scales %zu zero-scales %zu\n",
           kq->saturated, kq->flushed, kq->nan_out, kq->scale_subnormal, kq->scale_zero, vq->saturated, vq->flushed,
           vq->nan_out, vq->scale_subnormal, vq->scale_zero);
    printf("# effective values: K nan %zu inf %zu; V nan %zu inf %zu; Q nan %zu\n", pres.k_nan, pres.k_inf,
           pres.v_nan, pres.v_inf, pres.q_nan);
    printf("# output: binary32, correctly rounded; %zu of %zu rows by the MPFR oracle, the rest by the binary64 "
           "reference and its bound; nan %zu inf %zu\n",
           oracle_rows, s.q_len * s.num_q_heads, nan_out, inf_out);
    printf("# binary64 reference: its bound (lowp_attn_ref_f64_bounded) decides %zu of %zu outputs (%.2f%%)\n",
           decided, s.q_len * s.num_q_heads * Dv, 100.0 * (double)decided / (double)(s.q_len * s.num_q_heads * Dv));
    if (a.baseline != NULL)
        printf("# baseline: %zu of %zu rows by the MPFR oracle; the bound decides %zu outputs\n", oracle_rows_b,
               s.q_len * s.num_q_heads, decided_b);
    printf("# statistics compare: attention over the %s path's K/V (read from the quantized cache) against attention "
           "over the K/V and Q of the input files as given (not quantized), both exact math (binary64 reference); "
           "the cache changed %zu of %zu K and %zu of %zu V input elements%s\n",
           lowp_kv_path_name(path), k_changed, nk, v_changed, nv,
           k_changed + v_changed == 0 ? " (the inputs already are values of the format, e.g. dequantized K/V: the "
                                        "statistics measure the path's own roundings, not the format's cost)"
                                      : "");
    printf("%-5s %12s %12s %12s %12s %12s %9s\n", "head", "rel_L2", "max_abs", "cosine", "TV_mean", "TV_max",
           "nonfinite");
    for (long h = 0; h <= (long)s.num_q_heads; h++) {
        long hh = h == (long)s.num_q_heads ? -1 : h;
        lowp_attn_err e;
        lowp_attn_err_compute_tv(&s, b64, o64, tv, hh, &e);
        char lab[24];
        if (hh < 0)
            snprintf(lab, sizeof lab, "all");
        else
            snprintf(lab, sizeof lab, "%ld", hh);
        printf("%-5s %12.5e %12.5e %12.9f %12.5e %12.5e %9zu\n", lab, e.rel_l2, e.max_abs, e.cosine, e.tv_mean,
               e.tv_max, e.nonfinite);
    }
    if (fflush(stdout) != 0)
        lowp_cli_fail("cannot write to standard output");
    lowp_cli_write_f32_3(a.out, o32, s.q_len, s.num_q_heads, s.vo_dim);
    if (a.baseline != NULL)
        lowp_cli_write_f32_3(a.baseline, b32, s.q_len, s.num_q_heads, s.vo_dim);

    lowp_kvcache_destroy(cache);
    free(q);
    free(k);
    if (!same_kv)
        free(v);
    free(table);
    free(qe);
    free(ke);
    free(ve);
    free(kb);
    free(vb);
    free(o64);
    free(b64);
    free(tv);
    free(o32);
    free(b32);
    return LOWP_EXIT_OK;
}
