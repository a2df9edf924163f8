/* tools/cmd_select.c: `lowp select`: a sparse-attention selector (lowp/select.h) on given
 * queries and keys, with the index keys (QSA, DSA) or main keys (MoBA, NSA) in a chosen
 * format, and the drift of each selection against the one the unquantized keys make.
 *
 * Contract (as `lowp attn`'s): inputs are tensor files, read whole and checked before any
 * work; every output is written only after every selection succeeded, so a refusal
 * (a NaN score, shapes that disagree) writes nothing and exits 2. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "lowp/select_run.h"
#include "lowp/tensor.h"

LOWP_COMMAND_DEFINE(select, "a sparse-attention selector (QSA, DSA, MoBA, NSA) and its drift under quantized keys");

static void select_usage(FILE *f)
{
    fputs(
        "usage: lowp select --selector S --q Q.npy --k K.npy [options]\n"
        "  S: qsa  Q [q_len, index_heads, dim] raw index queries, K [ctx, 1, dim] raw index keys\n"
        "          (Qwen3.8-Flash-Next; both rounded to BF16 as the model holds them)\n"
        "     dsa  Q [q_len, heads, dim], K [ctx, 1, dim] after RoPE and the Hadamard rotation\n"
        "          (DeepSeek-V3.2's lightning indexer; rounded to BF16)\n"
        "     moba, nsa  Q [q_len, q_heads, dim], K [ctx, kv_heads, dim]: the main keys\n"
        "  --keys F         qsa: bf16 (reference) e4m3 nvfp4 mxfp4 mxfp8; dsa: bf16 (reference)\n"
        "                   fp8 fp4 fp4-deepgemm; moba/nsa: bf16 (reference) fp8_e4m3 fp8_e5m2\n"
        "                   nvfp4 mxfp4 mxfp8 (the main cache's format) (default: the reference)\n"
        "  --recipe R       the block quantizer of nvfp4 / mxfp4 / mxfp8 keys (their default)\n"
        "  --scale M        moba/nsa nvfp4 and fp8 keys: the global scale, calibrated (default:\n"
        "                   from the keys' amax) or one (1.0, what SGLang ships uncalibrated)\n"
        "  --topk K         blocks (qsa, moba, nsa) or tokens (dsa) kept (512, 2048, 3, 16)\n"
        "  --budget N       qsa: tokens, a multiple of the ratio (topk = budget / ratio)\n"
        "  --ratio R        qsa: tokens per block (4);  --block B  moba/nsa: tokens per block\n"
        "                   (moba 512, nsa 64)\n"
        "  --rotary-dim D, --theta T, --no-divide       qsa's RoPE (64, 1e7) and score divisor\n"
        "  --q-norm-weight W, --k-norm-weight W          qsa's RMSNorm weights, dim values (0)\n"
        "  --weights W      dsa: the head weights, q_len x heads values (1)\n"
        "  --no-ue8m0, --q-floor X                       dsa's scales (UE8M0, 1e-4)\n"
        "  --sink N, --local N                           nsa's forced blocks (1, 2; moba: 0, 1)\n"
        "  --q-offset P     position of query row 0 (default ctx - q_len)\n"
        "  --v V.npy        [ctx, kv_heads, dim]: values; then the sparse attention over the selected\n"
        "                   tokens runs (q and k as its queries and keys; QSA's open tail added) and\n"
        "                   stdout splits its output error against the exact attention (reference\n"
        "                   selection, BF16 K/V, binary64) into: the quantized keys' selection with\n"
        "                   exact values, the reference selection with K/V in the --values cache\n"
        "                   through QSA's production path, and both\n"
        "  --values F       that cache: bf16 fp8_e4m3 fp8_e5m2 nvfp4 mxfp4 mxfp8 (moba/nsa: the keys'\n"
        "                   format; qsa e4m3, dsa fp8: fp8_e4m3; dsa fp4: mxfp4; else the keys')\n"
        "  --gate G         q_len x heads x dim values: the output gate (sigmoid), default none\n"
        "  --indices I.npy  int32 [q_len, units, topk]: the selected blocks (dsa: tokens), best\n"
        "                   first, -1 past the count; units: 1 (qsa, dsa), q_heads (moba),\n"
        "                   kv_heads (nsa)\n"
        "  --index-list L.npy  qsa: int32 [q_len, 2 * ... + 1]: the production index list\n"
        "                   (selected tokens, open tail, -1 padding, the count column)\n"
        "  --scores S.npy   float32 [q_len, units, candidates] (-inf past a row's visible ones)\n"
        "  stdout: the drift of every selection against the reference keys' selection: Jaccard,\n"
        "  recall@k, blocks lost, the deepest intruder's rank in the reference order, and the rows\n"
        "  whose selection did not change at all; the selections certified stable (score error\n"
        "  bounds prove the top-k is the exact scores' for both key sets)\n",
        f);
}

typedef struct {
    const char *selector, *q, *k, *keys, *recipe, *indices, *index_list, *scores, *wq, *wk, *w, *scale, *v, *gate,
        *values;
    size_t topk, budget, ratio, block, rotary, sink, local, q_offset;
    int topk_set, budget_set, ratio_set, block_set, rotary_set, sink_set, local_set, q_offset_set;
    int no_divide, no_ue8m0, theta_set, q_floor_set;
    double theta, q_floor;
} select_args;

static void parse_args(int argc, char **argv, select_args *a)
{
    memset(a, 0, sizeof *a);
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
#define OPT(name, field) else if (strcmp(s, name) == 0) a->field = lowp_cli_option_value(argc, argv, &i)
#define NUM(name, field, lo, hi)                                                                   \
    else if (strcmp(s, name) == 0)                                                                 \
    {                                                                                              \
        a->field = (size_t)lowp_cli_parse_u64(name, lowp_cli_option_value(argc, argv, &i), lo, hi); \
        a->field##_set = 1;                                                                        \
    }
        if (strcmp(s, "--help") == 0 || strcmp(s, "-h") == 0) {
            select_usage(stdout);
            exit(LOWP_EXIT_OK);
        }
        OPT("--selector", selector);
        OPT("--q", q);
        OPT("--k", k);
        OPT("--keys", keys);
        OPT("--recipe", recipe);
        OPT("--indices", indices);
        OPT("--index-list", index_list);
        OPT("--scores", scores);
        OPT("--q-norm-weight", wq);
        OPT("--k-norm-weight", wk);
        OPT("--weights", w);
        OPT("--scale", scale);
        OPT("--v", v);
        OPT("--gate", gate);
        OPT("--values", values);
        NUM("--topk", topk, 1, (uint64_t)1 << 20)
        NUM("--budget", budget, 1, (uint64_t)1 << 22)
        NUM("--ratio", ratio, 1, 1024)
        NUM("--block", block, 1, (uint64_t)1 << 20)
        NUM("--rotary-dim", rotary, 0, 1024)
        NUM("--sink", sink, 0, (uint64_t)1 << 20)
        NUM("--local", local, 1, (uint64_t)1 << 20)
        NUM("--q-offset", q_offset, 0, (uint64_t)1 << 40)
        else if (strcmp(s, "--theta") == 0)
        {
            a->theta = lowp_cli_parse_positive("--theta", lowp_cli_option_value(argc, argv, &i));
            a->theta_set = 1;
        }
        else if (strcmp(s, "--q-floor") == 0)
        {
            a->q_floor = lowp_cli_parse_positive("--q-floor", lowp_cli_option_value(argc, argv, &i));
            a->q_floor_set = 1;
        }
        else if (strcmp(s, "--no-divide") == 0) a->no_divide = 1;
        else if (strcmp(s, "--no-ue8m0") == 0) a->no_ue8m0 = 1;
        else lowp_cli_fail("select: unknown argument '%s' (see lowp select --help)", s);
#undef OPT
#undef NUM
    }
}

/* a tensor file with exactly n values (any shape), finite, as float32 */
static float *load_vector(const char *opt, const char *path, size_t n)
{
    lowp_tensor t;
    char why[256];
    if (lowp_tensor_load_float(path, NULL, &t, NULL, NULL, why, sizeof why))
        lowp_cli_fail("%s %s: %s", opt, path, why);
    if (t.count != n)
        lowp_cli_fail("%s %s: %zu values, expected %zu", opt, path, t.count, n);
    float *x = malloc(n * sizeof *x + 1);
    if (x == NULL)
        lowp_cli_fail("out of memory for %s", opt);
    memcpy(x, t.data, n * sizeof *x);
    lowp_tensor_free(&t);
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            lowp_cli_fail("%s %s: value %zu is not finite", opt, path, i);
    return x;
}

static void write_i32(const char *path, const int32_t *x, int ndim, size_t d0, size_t d1, size_t d2)
{
    size_t shape[3] = {d0, d1, d2};
    lowp_cli_write_tensor(path, LOWP_DT_I32, x, ndim, shape);
}

static void row_progress(void *arg, size_t done, size_t total)
{
    (void)arg;
    fprintf(stderr, "\rlowp select: query row %zu/%zu", done, total);
    if (done == total)
        fputc('\n', stderr);
}

int lowp_cmd_select(int argc, char **argv)
{
    select_args a;
    parse_args(argc, argv, &a);
    if (a.selector == NULL || a.q == NULL || a.k == NULL)
        lowp_cli_fail("select: --selector, --q and --k are required (see lowp select --help)");
    lowp_selector_kind sel;
    if (lowp_selector_parse(a.selector, &sel))
        lowp_cli_fail("select: unknown selector '%s' (qsa dsa moba nsa)", a.selector);
    const char *outs[3] = {a.indices, a.index_list, a.scores};
    const char *names[3] = {"--indices", "--index-list", "--scores"};
    for (int i = 0; i < 3; i++) {
        lowp_out_check(names[i], outs[i]);
        lowp_cli_check_not_input(names[i], outs[i], "--q", a.q);
        lowp_cli_check_not_input(names[i], outs[i], "--k", a.k);
        lowp_cli_check_not_input(names[i], outs[i], "--v", a.v);
        for (int j = 0; j < i; j++)
            lowp_cli_check_distinct_outputs(names[j], outs[j], names[i], outs[i]);
    }
    if (a.scale != NULL && sel != LOWP_SEL_MOBA && sel != LOWP_SEL_NSA)
        lowp_cli_fail("select: --scale is the main keys' global scale (--selector moba or nsa)");
    if (a.index_list != NULL && sel != LOWP_SEL_QSA)
        lowp_cli_fail("select: --index-list is QSA's production layout (--selector qsa)");

    size_t qd[3], kd[3];
    float *q = lowp_cli_load_f32_3("--q", a.q, qd, "[q_len, heads, dim]");
    float *k = lowp_cli_load_f32_3("--k", a.k, kd, "[ctx, kv_heads, dim]");
    size_t qlen = qd[0], H = qd[1], d = qd[2], ctx = kd[0], kvh = kd[1];
    if (kd[2] != d)
        lowp_cli_fail("select: --q has dim %zu, --k has %zu", d, kd[2]);
    /* heads, positions and top-k against the candidates: lowp_select_run checks them */
    size_t q0 = a.q_offset_set ? a.q_offset : (qlen <= ctx ? ctx - qlen : 0);
    float *v = NULL, *gate = NULL;
    if (a.v) {
        size_t vd[3];
        v = lowp_cli_load_f32_3("--v", a.v, vd, "[ctx, kv_heads, dim]");
        if (vd[0] != ctx || vd[1] != kvh || vd[2] != d)
            lowp_cli_fail("select: --v is [%zu, %zu, %zu], --k [%zu, %zu, %zu]", vd[0], vd[1], vd[2], ctx, kvh, d);
    } else if (a.gate || a.values)
        lowp_cli_fail("select: --gate and --values are the sparse attention's (give --v)");
    if (a.gate)
        gate = load_vector("--gate", a.gate, qlen * H * d);

    lowp_select_spec sp = lowp_select_spec_default(sel, H, kvh, d);
    sp.keys = a.keys ? a.keys : "bf16";
    sp.recipe = a.recipe;
    if (a.scale != NULL && strcmp(a.scale, "one") == 0)
        sp.scale = LOWP_SWEEP_SCALE_ONE;
    else if (a.scale != NULL && strcmp(a.scale, "calibrated") != 0)
        lowp_cli_fail("select: --scale '%s' (calibrated one)", a.scale);
    if (a.budget_set && a.topk_set)
        lowp_cli_fail("select: --budget and --topk both give the number of blocks; give one");
    if (a.budget_set && sel != LOWP_SEL_QSA)
        lowp_cli_fail("select %s: --budget is QSA's (tokens); give --topk", a.selector);
    float *wq = NULL, *wk = NULL, *w = NULL;
    if (sel == LOWP_SEL_QSA) {
        if (a.ratio_set)
            sp.qsa.ratio = a.ratio;
        if (a.rotary_set)
            sp.qsa.rotary_dim = a.rotary;
        if (a.theta_set)
            sp.qsa.rope_theta = a.theta;
        sp.qsa.divide = !a.no_divide;
        if (a.budget_set) {
            if (a.budget % sp.qsa.ratio)
                lowp_cli_fail("select qsa: --budget %zu is not a multiple of the ratio %zu", a.budget, sp.qsa.ratio);
            sp.qsa.topk = a.budget / sp.qsa.ratio;
        } else if (a.topk_set)
            sp.qsa.topk = a.topk;
        if (a.wq)
            wq = load_vector("--q-norm-weight", a.wq, d);
        if (a.wk)
            wk = load_vector("--k-norm-weight", a.wk, d);
    } else if (sel == LOWP_SEL_DSA) {
        if (a.topk_set)
            sp.dsa.topk = a.topk;
        sp.dsa.ue8m0 = !a.no_ue8m0;
        if (a.q_floor_set)
            sp.dsa.q_floor = (float)a.q_floor;
        if (a.w)
            w = load_vector("--weights", a.w, qlen * H);
    } else {
        if (a.block_set)
            sp.bs.block = a.block;
        if (a.topk_set)
            sp.bs.topk = a.topk;
        if (a.sink_set)
            sp.bs.sink_blocks = a.sink;
        if (a.local_set)
            sp.bs.local_blocks = a.local;
    }
    sp.values = a.values;
    lowp_select_inputs in = {q, k, wq, wk, w, qlen, H, ctx, kvh, d, q0, v, gate};
    lowp_select_result res;
    char why[512];
    if (lowp_select_run(&sp, &in, &res, lowp_progress_wanted() ? row_progress : NULL, NULL, why, sizeof why))
        lowp_cli_fail("select %s: %s", a.selector, why);
    printf("# lowp select %s: q [%zu, %zu, %zu], k [%zu, %zu, %zu], queries at %zu..%zu, top-%zu, keys %s "
           "against bf16\n",
           a.selector, qlen, H, d, ctx, kvh, d, q0, q0 + qlen - 1, res.k, sp.keys);
    if (res.rounded)
        printf("# rounded to BF16 as the model holds them: %zu query and key values\n", res.rounded);
    if (res.counts.elements)
        printf("# keys quantized with global scale %.9g (decode side): %zu of %zu blocks have a zero scale, "
               "%zu of %zu elements flushed to zero\n",
               (double)res.dec, res.counts.scale_zero, res.counts.blocks, res.counts.flushed, res.counts.elements);
    printf("selections %zu  unchanged %zu  jaccard mean %.6f min %.6f  recall mean %.6f  lost %zu  "
           "deepest intruder rank %zu\n",
           res.selections, res.unchanged, res.jaccard_sum / (double)res.selections, res.jaccard_min,
           res.recall_sum / (double)res.selections, res.lost, res.deepest);
    if (res.certifiable)
        printf("certified stable %zu of %zu selections (score error bounds separate the top-k from the rest)\n",
               res.certified, res.selections);
    else
        printf("certified stable: none (a key outside its element bound)\n");
    if (res.attn)
        printf("attention output error (relative L2 against the exact: reference selection, BF16 K/V, binary64): "
               "selection changed %.6g, values %s %.6g, both %.6g; the selection's share %.4f\n",
               res.err_sel, res.values, res.err_val, res.err_both, res.sel_share);
    if (fflush(stdout) != 0)
        lowp_cli_fail("cannot write to standard output");
    if (a.indices)
        write_i32(a.indices, res.indices, 3, qlen, res.units, res.k);
    if (a.index_list)
        write_i32(a.index_list, res.index_list, 2, qlen, res.list_width, 0);
    if (a.scores)
        lowp_cli_write_f32_3(a.scores, res.scores, qlen, res.units, res.cand);
    lowp_select_result_free(&res);
    free(q);
    free(k);
    free(wq);
    free(wk);
    free(w);
    free(v);
    free(gate);
    return LOWP_EXIT_OK;
}
