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
#include "lowp/attn_sweep.h"
#include "lowp/format.h"
#include "lowp/select.h"
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
        "  --ratio R        qsa: tokens per block (4);  --block B  moba/nsa: tokens per block (64)\n"
        "  --rotary-dim D, --theta T, --no-divide       qsa's RoPE (64, 1e7) and score divisor\n"
        "  --q-norm-weight W, --k-norm-weight W          qsa's RMSNorm weights, dim values (0)\n"
        "  --weights W      dsa: the head weights, q_len x heads values (1)\n"
        "  --no-ue8m0, --q-floor X                       dsa's scales (UE8M0, 1e-4)\n"
        "  --sink N, --local N                           nsa's forced blocks (1, 2; moba: 0, 1)\n"
        "  --q-offset P     position of query row 0 (default ctx - q_len)\n"
        "  --indices I.npy  int32 [q_len, units, topk]: the selected blocks (dsa: tokens), best\n"
        "                   first, -1 past the count; units: 1 (qsa, dsa), q_heads (moba),\n"
        "                   kv_heads (nsa)\n"
        "  --index-list L.npy  qsa: int32 [q_len, 2 * ... + 1]: the production index list\n"
        "                   (selected tokens, open tail, -1 padding, the count column)\n"
        "  --scores S.npy   float32 [q_len, units, candidates] (-inf past a row's visible ones)\n"
        "  stdout: the drift of every selection against the reference keys' selection: Jaccard,\n"
        "  recall@k, blocks lost, the deepest intruder's rank in the reference order, and the rows\n"
        "  whose selection did not change at all\n",
        f);
}

typedef struct {
    const char *selector, *q, *k, *keys, *recipe, *indices, *index_list, *scores, *wq, *wk, *w, *scale;
    size_t topk, budget, ratio, block, rotary, sink, local, q_offset;
    int topk_set, budget_set, ratio_set, block_set, rotary_set, sink_set, local_set, q_offset_set;
    int no_divide, no_ue8m0, theta_set, q_floor_set;
    double theta, q_floor;
} select_args;

enum { SEL_QSA, SEL_DSA, SEL_MOBA, SEL_NSA };

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

/* round in place to BF16 (torch's cast); returns how many values changed */
static size_t to_bf16(float *x, size_t n)
{
    lowp_codec c;
    lowp_codec_init(&c, LOWP_BF16, LOWP_PROFILE_TORCH, LOWP_RN, 0, NULL, 0);
    size_t changed = 0;
    for (size_t i = 0; i < n; i++) {
        float r = lowp_decode_f32(LOWP_BF16, lowp_encode_f32(&c, x[i]));
        changed += r != x[i];
        x[i] = r;
    }
    return changed;
}

static void write_i32_3(const char *path, const int32_t *x, size_t d0, size_t d1, size_t d2)
{
    lowp_tensor_file tf;
    size_t shape[3] = {d0, d1, d2};
    char why[256];
    lowp_tensor_file_init(&tf);
    lowp_tensor *t = lowp_tensor_file_add(&tf, "out", LOWP_DT_I32, d2 ? 3 : 2, shape, why, sizeof why);
    if (t == NULL)
        lowp_cli_fail("%s", why);
    memcpy(t->data, x, t->nbytes);
    lowp_tensor_file_kind kind = lowp_tensor_file_kind_of(path);
    if (kind == LOWP_FILE_UNKNOWN)
        lowp_cli_fail("%s: the name ends neither in .npy nor in .safetensors", path);
    FILE *o = lowp_out_open(path, 1);
    if (kind == LOWP_FILE_NPY ? lowp_npy_emit(o, t, why, sizeof why) : lowp_safetensors_emit(o, &tf, why, sizeof why))
        lowp_cli_fail("cannot write '%s': %s", path, why);
    lowp_out_commit(o);
    lowp_tensor_file_free(&tf);
}

/* One selector instance over a whole run: scores one query row under the given keys. */
typedef struct {
    int sel;
    size_t units, cand; /* selections per row; candidates at the last row (the widest) */
    lowp_quant_counts counts; /* what the main keys' quantizer did (moba, nsa) */
    float dec;                /* their decode-side global scale */
    lowp_qsa_config qsa;
    lowp_dsa_config dsa;
    lowp_blocksel_config bs;
    /* prepared keys */
    double *qsa_kb;
    float *dsa_kq, *dsa_ks, *main_k;
} selector;

/* scores of row r (position pos) into sc[units][cand], -inf past the visible ones;
 * *vis gets the visible count */
static void score_row(const selector *s, const select_args *a, const float *q, const float *wq, const float *w,
                      size_t ctx, size_t r, size_t pos, float *sc, size_t *vis)
{
    char why[256];
    for (size_t i = 0; i < s->units * s->cand; i++)
        sc[i] = -INFINITY;
    if (s->sel == SEL_QSA) {
        size_t d = s->qsa.head_dim, H = s->qsa.index_heads;
        float *qo = malloc(H * d * sizeof *qo);
        if (qo == NULL)
            lowp_cli_fail("out of memory");
        if (lowp_qsa_query(&s->qsa, q + r * H * d, pos, wq, qo, why, sizeof why) ||
            lowp_qsa_scores(&s->qsa, qo, s->qsa_kb, ctx, pos, sc, vis, why, sizeof why))
            lowp_cli_fail("select: %s", why);
        free(qo);
    } else if (s->sel == SEL_DSA) {
        size_t d = s->dsa.head_dim, H = s->dsa.heads;
        if (lowp_dsa_scores(&s->dsa, q + r * H * d, w + r * H, s->dsa_kq, s->dsa_ks, ctx, pos, sc, vis, why,
                            sizeof why))
            lowp_cli_fail("select: %s", why);
    } else {
        size_t nb, d = s->bs.head_dim, H = s->bs.q_heads;
        float *tmp = malloc(s->units * (pos / s->bs.block + 1) * sizeof *tmp);
        if (tmp == NULL)
            lowp_cli_fail("out of memory");
        if (lowp_blocksel_scores(&s->bs, q + r * H * d, s->main_k, ctx, pos, tmp, &nb, why, sizeof why))
            lowp_cli_fail("select: %s", why);
        for (size_t u = 0; u < s->units; u++)
            memcpy(sc + u * s->cand, tmp + u * nb, nb * sizeof *tmp);
        free(tmp);
        *vis = nb;
    }
    (void)a;
}

/* QSA / DSA keys of one format; MoBA / NSA: the main keys through the cache's format */
static void prepare(selector *s, const select_args *a, const char *keys, const float *k, size_t ctx, size_t kvh,
                    size_t d, const float *wk)
{
    char why[256];
    if (s->sel == SEL_QSA) {
        static const char *names[] = {"bf16", "e4m3", "nvfp4", "mxfp4", "mxfp8"};
        size_t f = 0;
        while (f < 5 && strcmp(keys, names[f]) != 0)
            f++;
        if (f == 5)
            lowp_cli_fail("select qsa: --keys '%s' (bf16 e4m3 nvfp4 mxfp4 mxfp8)", keys);
        s->qsa.keys = (lowp_qsa_keys)f;
        if (f >= 2) {
            lowp_block_format bf = f == 2 ? LOWP_NVFP4 : f == 3 ? LOWP_MXFP4 : LOWP_MXFP8;
            lowp_recipe r = bf == LOWP_NVFP4 ? LOWP_RECIPE_TRTLLM : LOWP_RECIPE_OCP;
            if (a->recipe != NULL && lowp_recipe_parse(a->recipe, &r))
                lowp_cli_fail("select: unknown recipe '%s'", a->recipe);
            s->qsa.recipe = r;
        }
        s->qsa_kb = malloc((ctx / s->qsa.ratio + 1) * d * sizeof *s->qsa_kb);
        if (s->qsa_kb == NULL)
            lowp_cli_fail("out of memory for the index keys");
        if (lowp_qsa_compress(&s->qsa, k, ctx, wk, s->qsa_kb, why, sizeof why))
            lowp_cli_fail("select: %s", why);
    } else if (s->sel == SEL_DSA) {
        if (strcmp(keys, "fp8") == 0)
            s->dsa.keys = LOWP_DSA_KEYS_FP8;
        else if (strcmp(keys, "fp4") == 0 || strcmp(keys, "fp4-deepgemm") == 0) {
            s->dsa.keys = LOWP_DSA_KEYS_FP4;
            s->dsa.fp4_round = keys[3] ? LOWP_DSA_FP4_DEEPGEMM : LOWP_DSA_FP4_RNE;
        } else if (strcmp(keys, "bf16") == 0)
            s->dsa.keys = LOWP_DSA_KEYS_BF16;
        else
            lowp_cli_fail("select dsa: --keys '%s' (bf16 fp8 fp4 fp4-deepgemm)", keys);
        s->dsa_kq = malloc(ctx * d * sizeof *s->dsa_kq);
        s->dsa_ks = malloc(ctx * sizeof *s->dsa_ks);
        if (s->dsa_kq == NULL || s->dsa_ks == NULL)
            lowp_cli_fail("out of memory for the index keys");
        if (lowp_dsa_keys_quantize(&s->dsa, k, ctx, s->dsa_kq, s->dsa_ks, why, sizeof why))
            lowp_cli_fail("select: %s", why);
    } else {
        size_t n = ctx * kvh * d;
        s->main_k = malloc(n * sizeof *s->main_k);
        if (s->main_k == NULL)
            lowp_cli_fail("out of memory for the keys");
        if (strcmp(keys, "bf16") == 0) {
            memcpy(s->main_k, k, n * sizeof *k);
            to_bf16(s->main_k, n);
            return;
        }
        lowp_block_format f;
        if (lowp_block_format_parse(keys, &f) || f == LOWP_BF16_PASS)
            lowp_cli_fail("select %s: --keys '%s' (bf16 fp8_e4m3 fp8_e5m2 nvfp4 mxfp4 mxfp8)", a->selector, keys);
        lowp_recipe r = lowp_recipe_default(f);
        if (a->recipe != NULL && lowp_recipe_parse(a->recipe, &r))
            lowp_cli_fail("select: unknown recipe '%s'", a->recipe);
        float amax = 0;
        for (size_t i = 0; i < n; i++)
            amax = fabsf(k[i]) > amax ? fabsf(k[i]) : amax;
        lowp_sweep_scale_mode mode = LOWP_SWEEP_SCALE_CALIBRATED;
        if (a->scale != NULL && strcmp(a->scale, "one") == 0)
            mode = LOWP_SWEEP_SCALE_ONE;
        else if (a->scale != NULL && strcmp(a->scale, "calibrated") != 0)
            lowp_cli_fail("select: --scale '%s' (calibrated one)", a->scale);
        lowp_global_scale gs = lowp_sweep_global_scale(f, r, mode, amax);
        s->dec = gs.dec;
        double *dq = malloc(n * sizeof *dq);
        if (dq == NULL)
            lowp_cli_fail("out of memory for the keys");
        if (lowp_sweep_quantize_exact(f, r, gs, k, ctx * kvh, d, dq, &s->counts, why, sizeof why))
            lowp_cli_fail("select: %s", why);
        for (size_t i = 0; i < n; i++)
            s->main_k[i] = (float)dq[i]; /* the value a kernel reads, rounded to binary32 */
        free(dq);
    }
}

static void selector_free(selector *s)
{
    free(s->qsa_kb);
    free(s->dsa_kq);
    free(s->dsa_ks);
    free(s->main_k);
}

int lowp_cmd_select(int argc, char **argv)
{
    select_args a;
    parse_args(argc, argv, &a);
    if (a.selector == NULL || a.q == NULL || a.k == NULL)
        lowp_cli_fail("select: --selector, --q and --k are required (see lowp select --help)");
    int sel = strcmp(a.selector, "qsa") == 0    ? SEL_QSA
              : strcmp(a.selector, "dsa") == 0  ? SEL_DSA
              : strcmp(a.selector, "moba") == 0 ? SEL_MOBA
              : strcmp(a.selector, "nsa") == 0  ? SEL_NSA
                                                : -1;
    if (sel < 0)
        lowp_cli_fail("select: unknown selector '%s' (qsa dsa moba nsa)", a.selector);
    const char *outs[3] = {a.indices, a.index_list, a.scores};
    const char *names[3] = {"--indices", "--index-list", "--scores"};
    for (int i = 0; i < 3; i++) {
        lowp_out_check(names[i], outs[i]);
        lowp_cli_check_not_input(names[i], outs[i], "--q", a.q);
        lowp_cli_check_not_input(names[i], outs[i], "--k", a.k);
        for (int j = 0; j < i; j++)
            lowp_cli_check_distinct_outputs(names[j], outs[j], names[i], outs[i]);
    }
    if (a.scale != NULL && sel != SEL_MOBA && sel != SEL_NSA)
        lowp_cli_fail("select: --scale is the main keys' global scale (--selector moba or nsa)");
    if (a.index_list != NULL && sel != SEL_QSA)
        lowp_cli_fail("select: --index-list is QSA's production layout (--selector qsa)");

    size_t qd[3], kd[3];
    float *q = lowp_cli_load_f32_3("--q", a.q, qd, "[q_len, heads, dim]");
    float *k = lowp_cli_load_f32_3("--k", a.k, kd, "[ctx, kv_heads, dim]");
    size_t qlen = qd[0], H = qd[1], d = qd[2], ctx = kd[0], kvh = kd[1];
    if (kd[2] != d)
        lowp_cli_fail("select: --q has dim %zu, --k has %zu", d, kd[2]);
    if ((sel == SEL_QSA || sel == SEL_DSA) && kvh != 1)
        lowp_cli_fail("select %s: the index keys have one head, --k has %zu", a.selector, kvh);
    if ((sel == SEL_MOBA || sel == SEL_NSA) && H % kvh)
        lowp_cli_fail("select %s: %zu query heads are not a multiple of %zu KV heads", a.selector, H, kvh);
    size_t q0 = a.q_offset_set ? a.q_offset : (qlen <= ctx ? ctx - qlen : 0);
    if (qlen > ctx || q0 + qlen > ctx)
        lowp_cli_fail("select: query rows at positions %zu..%zu, past the %zu keys", q0, q0 + qlen - 1, ctx);

    selector s;
    memset(&s, 0, sizeof s);
    s.sel = sel;
    float *wq = NULL, *wk = NULL, *w = NULL;
    if (sel == SEL_QSA) {
        s.qsa = lowp_qsa_config_default();
        s.qsa.index_heads = H;
        s.qsa.head_dim = d;
        if (a.ratio_set)
            s.qsa.ratio = a.ratio;
        if (a.rotary_set)
            s.qsa.rotary_dim = a.rotary;
        else if (s.qsa.rotary_dim > d)
            s.qsa.rotary_dim = d - d % 2;
        if (a.theta_set)
            s.qsa.rope_theta = a.theta;
        s.qsa.divide = !a.no_divide;
        if (a.budget_set && a.topk_set)
            lowp_cli_fail("select: --budget and --topk both give the number of blocks; give one");
        if (a.budget_set) {
            if (a.budget % s.qsa.ratio)
                lowp_cli_fail("select qsa: --budget %zu is not a multiple of the ratio %zu", a.budget, s.qsa.ratio);
            s.qsa.topk = a.budget / s.qsa.ratio;
        } else if (a.topk_set)
            s.qsa.topk = a.topk;
        if (s.qsa.topk > ctx / s.qsa.ratio)
            lowp_cli_fail("select qsa: top-%zu of the %zu blocks the %zu keys make (at most %zu)", s.qsa.topk,
                          ctx / s.qsa.ratio, ctx, ctx / s.qsa.ratio);
        wq = a.wq ? load_vector("--q-norm-weight", a.wq, d) : calloc(d, sizeof *wq);
        wk = a.wk ? load_vector("--k-norm-weight", a.wk, d) : calloc(d, sizeof *wk);
        if (wq == NULL || wk == NULL)
            lowp_cli_fail("out of memory");
        s.units = 1;
        s.cand = ctx / s.qsa.ratio;
    } else if (sel == SEL_DSA) {
        s.dsa = lowp_dsa_config_default();
        s.dsa.heads = H;
        s.dsa.head_dim = d;
        if (a.topk_set)
            s.dsa.topk = a.topk;
        if (a.budget_set)
            lowp_cli_fail("select dsa: --budget is QSA's; DSA selects --topk tokens");
        if (s.dsa.topk > ctx)
            lowp_cli_fail("select dsa: top-%zu of %zu keys", s.dsa.topk, ctx);
        s.dsa.ue8m0 = !a.no_ue8m0;
        if (a.q_floor_set)
            s.dsa.q_floor = (float)a.q_floor;
        if (a.w) {
            w = load_vector("--weights", a.w, qlen * H);
            to_bf16(w, qlen * H);
        } else {
            w = malloc(qlen * H * sizeof *w);
            if (w == NULL)
                lowp_cli_fail("out of memory");
            for (size_t i = 0; i < qlen * H; i++)
                w[i] = 1.0f;
        }
        s.units = 1;
        s.cand = ctx;
    } else {
        s.bs.method = sel == SEL_MOBA ? LOWP_BLOCKSEL_MOBA : LOWP_BLOCKSEL_NSA;
        s.bs.q_heads = H;
        s.bs.kv_heads = kvh;
        s.bs.head_dim = d;
        s.bs.block = a.block_set ? a.block : 64;
        s.bs.topk = a.topk_set ? a.topk : (sel == SEL_MOBA ? 3 : 16);
        s.bs.sink_blocks = a.sink_set ? a.sink : (sel == SEL_MOBA ? 0 : 1);
        s.bs.local_blocks = a.local_set ? a.local : (sel == SEL_MOBA ? 1 : 2);
        size_t nbk = (ctx + s.bs.block - 1) / s.bs.block;
        if (s.bs.topk > nbk)
            lowp_cli_fail("select %s: top-%zu of the %zu blocks of %zu keys", a.selector, s.bs.topk, nbk, ctx);
        s.units = lowp_blocksel_units(&s.bs);
        s.cand = (ctx - 1) / s.bs.block + 1;
    }
    size_t rq = sel == SEL_MOBA || sel == SEL_NSA ? 0 : to_bf16(q, qlen * H * d);
    size_t rk = sel == SEL_MOBA || sel == SEL_NSA ? 0 : to_bf16(k, ctx * d);
    const char *keys = a.keys ? a.keys : "bf16";
    selector ref = s;
    prepare(&s, &a, keys, k, ctx, kvh, d, wk);
    prepare(&ref, &a, "bf16", k, ctx, kvh, d, wk);
    size_t K = sel == SEL_QSA ? s.qsa.topk : sel == SEL_DSA ? s.dsa.topk : s.bs.topk;

    size_t U = s.units, C = s.cand;
    float *sc = malloc(qlen * U * C * sizeof *sc), *rsc = malloc(U * C * sizeof *rsc);
    int32_t *idx = malloc(qlen * U * K * sizeof *idx), *ridx = malloc(K * sizeof *ridx);
    size_t W = sel == SEL_QSA ? lowp_qsa_index_width(&s.qsa) + 1 : 0;
    int32_t *list = W ? malloc(qlen * W * sizeof *list) : NULL;
    if (sc == NULL || rsc == NULL || idx == NULL || ridx == NULL || (W && list == NULL))
        lowp_cli_fail("out of memory for the selections");
    double jac_sum = 0, rec_sum = 0, jac_min = 1;
    size_t lost = 0, deepest = 0, n_sel = 0, unchanged = 0, progress = lowp_progress_wanted();
    char why[256];
    for (size_t r = 0; r < qlen; r++) {
        size_t pos = q0 + r, vis = 0, rvis = 0;
        if (progress)
            fprintf(stderr, "\rlowp select: query row %zu/%zu", r + 1, qlen);
        score_row(&s, &a, q, wq, w, ctx, r, pos, sc + r * U * C, &vis);
        score_row(&ref, &a, q, wq, w, ctx, r, pos, rsc, &rvis);
        for (size_t u = 0; u < U; u++) {
            const float *row = sc + (r * U + u) * C;
            int32_t *sel_u = idx + (r * U + u) * K;
            size_t n = 0, rn = 0;
            if (lowp_topk(row, vis, K, sel_u, &n, why, sizeof why))
                lowp_cli_fail("select: query row %zu, unit %zu, keys %s: %s", r, u, keys, why);
            if (lowp_topk(rsc + u * C, rvis, K, ridx, &rn, why, sizeof why))
                lowp_cli_fail("select: query row %zu, unit %zu, reference keys: %s", r, u, why);
            lowp_select_drift dr;
            if (lowp_select_drift_of(ridx, rn, sel_u, n, rsc + u * C, rvis, &dr, why, sizeof why))
                lowp_cli_fail("select: drift: %s", why);
            jac_sum += dr.jaccard;
            rec_sum += dr.recall;
            jac_min = dr.jaccard < jac_min ? dr.jaccard : jac_min;
            lost += dr.lost;
            deepest = dr.max_intruder_rank > deepest ? dr.max_intruder_rank : deepest;
            unchanged += dr.lost == 0 && dr.intruders == 0;
            n_sel++;
            if (W && u == 0 && lowp_qsa_select(&s.qsa, row, vis, pos, list + r * W, NULL, NULL, why, sizeof why))
                lowp_cli_fail("select: query row %zu: %s", r, why);
        }
    }
    if (progress)
        fputc('\n', stderr);
    printf("# lowp select %s: q [%zu, %zu, %zu], k [%zu, %zu, %zu], queries at %zu..%zu, top-%zu, keys %s "
           "against bf16\n",
           a.selector, qlen, H, d, ctx, kvh, d, q0, q0 + qlen - 1, K, keys);
    if (rq || rk)
        printf("# rounded to BF16 as the model holds them: %zu query and %zu key values\n", rq, rk);
    if (s.counts.elements)
        printf("# keys quantized with global scale %.9g (decode side): %zu of %zu blocks have a zero scale, "
               "%zu of %zu elements flushed to zero\n",
               (double)s.dec, s.counts.scale_zero, s.counts.blocks, s.counts.flushed, s.counts.elements);
    printf("selections %zu  unchanged %zu  jaccard mean %.6f min %.6f  recall mean %.6f  lost %zu  "
           "deepest intruder rank %zu\n",
           n_sel, unchanged, jac_sum / (double)n_sel, jac_min, rec_sum / (double)n_sel, lost, deepest);
    if (fflush(stdout) != 0)
        lowp_cli_fail("cannot write to standard output");
    if (a.indices)
        write_i32_3(a.indices, idx, qlen, U, K);
    if (a.index_list)
        write_i32_3(a.index_list, list, qlen, W, 0);
    if (a.scores)
        lowp_cli_write_f32_3(a.scores, sc, qlen, U, C);
    selector_free(&s);
    selector_free(&ref);
    free(q);
    free(k);
    free(wq);
    free(wk);
    free(w);
    free(sc);
    free(rsc);
    free(idx);
    free(ridx);
    free(list);
    return LOWP_EXIT_OK;
}
