/* tools/cmd_certify.c: `lowp certify`: a third-party paged-decode kernel's output against the
 * arithmetic it declares, per output element (lowp/certify.h).
 *
 *   lowp certify --layout L --k-cache K --v-cache V [--k-sf KS --v-sf VS] --k-scale S
 *                --v-scale S (--block-table BT --seq-lens SL | --indptr I --indices X
 *                --last-page-len LP) --q Q --out O [--qo-indptr QI] [declared arithmetic] [--seq B]
 *
 * The cache tensors are the framework's own, as they sit in memory (.npy, or .safetensors
 * holding one tensor); their shapes give the sizes:
 *   vllm-fp8      K, V uint8 (or F8_E4M3) [num_blocks, block_size, num_kv_heads, head_size]
 *   flashinfer    K, V [pages, page_size, H, D] (--page-order nhd, default) or [pages, H,
 *                 page_size, D] (hnd); BF16 (a bf16 cache) or uint8 / F8_E4M3 (fp8_e4m3)
 *   sglang-nvfp4  K, V uint8 [size, H, D/2]; KS, VS uint8 / F8_E4M3 [size/page_size, H,
 *                 page_size, D/16] (V 4-token interleaved)
 *   trtllm        K, V uint8 [pages, H, page_size, D/2]; KS, VS [pages, H, page_size, D/16]
 * Page tables are int32 .npy (FlashInfer requires int32; so do vLLM's block tables). Q is
 * [batch, num_q_heads, qk_dim] and O [batch, num_q_heads, vo_dim], any float dtype (O may
 * hold NaN: that is a verdict, not bad input). Extend / prefill: --qo-indptr QI, int32
 * [batch + 1], makes Q [total_q, num_q_heads, qk_dim] and O [total_q, ...], total_q =
 * QI[batch]: sequence b's queries are its last QI[b+1] - QI[b] tokens, causal (lowp/certify.h).
 *
 * Exit status: 0 when every output is exact or within bound, 1 when any is outside or a
 * NaN mismatch, 2 on bad input (one line on stderr, nothing on stdout).
 *
 * --shard K/N --result R and --merge (tools/shard.h): a unit is one sequence of the batch
 * (with all its --qo-indptr query rows); the merged certificate is one run's.
 *
 *   lowp certify --kv-write --layout L --k-cache K --v-cache V [--k-sf KS --v-sf VS]
 *                --k-scale S --v-scale S --slot-mapping SM --k-in KI --v-in VI [--recipe R]
 * checks a quantize-on-write instead (lowp_certify_kv_write): the pools K, V (KS, VS) as the
 * user's writer left them, SM int64 or int32 [num_tokens] (page * page_size + slot, < 0:
 * padding), KI / VI the values written, float [num_tokens, H, D]; exit 0 when every
 * written token's bytes are lowp's, 1 when one differs. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "shard.h"
#include "lowp/certify.h"
#include "lowp/tensor.h"

LOWP_COMMAND_DEFINE(certify, "certify a paged-decode kernel's output in a production cache layout against its declared arithmetic");

static void certify_usage(FILE *f)
{
    fputs("usage: lowp certify --layout L --k-cache K --v-cache V --k-scale S --v-scale S\n"
          "         (--block-table BT --seq-lens SL | --indptr I --indices X --last-page-len LP)\n"
          "         --q Q --out O [options]\n"
          "  --layout L          vllm-fp8 flashinfer sglang-nvfp4 trtllm (lowp/certify.h: memory orders)\n"
          "  --k-cache, --v-cache  the K / V pools as the framework holds them (.npy / .safetensors)\n"
          "  --k-sf, --v-sf      NVFP4 block scales (sglang-nvfp4, trtllm)\n"
          "  --k-scale, --v-scale  decode-side scales (x = code x scale); required, 1 for bf16\n"
          "  --page-order O      flashinfer: nhd (default) or hnd\n"
          "  --k-sf-order, --v-sf-order  linear interleave4 (default: the layout's own)\n"
          "  --q Q, --out O      [batch, num_q_heads, qk_dim] queries (before the kernel's cast) and\n"
          "                      [batch, num_q_heads, vo_dim] the kernel's output\n"
          "  --qo-indptr QI      extend / prefill: int32 [batch + 1]; Q and O are [QI[batch], ...], sequence b's\n"
          "                      queries its last QI[b+1] - QI[b] tokens, causal (query i sees 0 .. prefix + i)\n"
          "declared arithmetic:\n"
          "  --q-dtype T         f32 (default) bf16 f16 e4m3: Q rounded (RN) to T before Q.K\n"
          "  --q-scale S         e4m3 Q: q8 = e4m3(q / S), scores use q8 x S (default 1)\n"
          "  --p-dtype T         P rounded to T before P.V: f32 bf16 (default) f16 e4m3\n"
          "  --out-dtype T       output rounding: f32 bf16 (default) f16\n"
          "  --split-tokens N    split-K with N positions per split (default: none)\n"
          "  --partial-dtype T   split-K partial outputs stored in f32 (default) bf16 f16\n"
          "  --mma-k N           positions summed per fp32 accumulation step (default 1)\n"
          "  --prod-dtype T      each Q.K product rounded to T before the sum: f32 (default) bf16 f16\n"
          "  --l-unrounded       l sums the weights before their rounding to the P dtype (Triton's e_sum)\n"
          "  --mma-frac F        tensor-core dots keeping F fraction bits per step (8..25; default 0: fp32 adds)\n"
          "  --v-scale-after-output  out = RN(RN(o/l) x v_scale) (FlashInfer's out *= v_scale)\n"
          "  --sm-scale S        softmax scale (default 1/sqrt(qk_dim))\n"
          "  --seq B             certify sequence B only (the reproducer of a worst element)\n"
          "  --worst N           worst elements printed (default 8, at most 16)\n"
          "  --no-diagnose       do not re-read the cache under other layouts when it fails\n"
          "  --threads N         OpenMP threads over (sequence, KV head) (default: all)\n"
          "quantize-on-write (--kv-write, no --q/--out/page table): the cache bytes a writer left for tokens\n"
          "  --slot-mapping SM   int64 / int32 [num_tokens]: page x page_size + slot (< 0: padding, skipped)\n"
          "  --k-in, --v-in      the values written, float [num_tokens, H, D] (bf16 / f16 / f32)\n"
          "  --recipe R          the writer's rounding recipe (default: sglang-kv for nvfp4, else the format's)\n"
          "                      (one run: --kv-write takes no --shard, --result or --merge)\n"
          "sharded runs (a unit is one sequence of the batch, with its --qo-indptr query rows):\n"
          "  --shard K/N         certify the sequences b with b mod N = K (0-based; auto: the MPI /\n"
          "                      Slurm rank and size); needs --result, prints one line, exits 1 when one\n"
          "                      of its outputs is outside or a NaN mismatch; it also tries the\n"
          "                      diagnosis's alternative readings on every sequence (--no-diagnose: not)\n"
          "  --result FILE       the run's deterministic result (JSON: counts, worst elements, the\n"
          "                      alternatives' verdicts per sequence)\n"
          "  lowp certify --merge A.json B.json ... [--result FILE]: the shards' results, checked to\n"
          "                      be shards 0..N-1 of one run (the same options in the same order), give\n"
          "                      the certificate, exit status and --result of one unsharded run\n"
          "exit 0: every output exact or within bound (every token's bytes lowp's); 1: any outside or NaN\n"
          "mismatch (a token's bytes differ); 2: bad input\n",
          f);
}

/* One tensor of a .npy or single-tensor .safetensors file, owned by tf. */
static const lowp_tensor *load_one(const char *opt, const char *path, lowp_tensor_file *tf)
{
    char why[256];
    lowp_tensor_file_init(tf);
    if (lowp_tensor_file_read(path, tf, why, sizeof why))
        lowp_cli_fail("%s %s: %s", opt, path, why);
    if (tf->n_tensors != 1)
        lowp_cli_fail("%s %s: holds %zu tensors, expected one", opt, path, tf->n_tensors);
    return &tf->tensors[0];
}

/* q and out: rank 3, no zero dimension. */
static void expect_rank(const char *opt, const lowp_tensor *t, int ndim, const char *what)
{
    if (t->ndim != ndim)
        lowp_cli_fail("%s: rank %d, expected %s", opt, t->ndim, what);
    for (int k = 0; k < ndim; k++)
        if (t->shape[k] == 0)
            lowp_cli_fail("%s: dimension %d is 0 (expected %s)", opt, k, what);
}

static const int32_t *load_i32(const char *opt, const char *path, lowp_tensor_file *tf, int ndim, size_t *shape)
{
    const lowp_tensor *t = load_one(opt, path, tf);
    if (t->dtype != LOWP_DT_I32)
        lowp_cli_fail("%s %s: dtype %s, expected I32 (FlashInfer and vLLM index with int32)", opt, path,
                      lowp_dtype_name(t->dtype));
    if (t->ndim != ndim)
        lowp_cli_fail("%s %s: rank %d, expected %d", opt, path, t->ndim, ndim);
    for (int k = 0; k < ndim; k++)
        shape[k] = t->shape[k];
    return (const int32_t *)(const void *)t->data;
}

static int byte_codes(lowp_dtype d)
{
    return d == LOWP_DT_U8 || d == LOWP_DT_F8_E4M3 || d == LOWP_DT_I8;
}

typedef struct {
    const char *layout, *k, *v, *ksf, *vsf, *bt, *sl, *indptr, *indices, *lpl, *q, *out, *qo;
    const char *slots, *k_in, *v_in, *recipe; /* --kv-write */
    int kv_write;
    const char *page_order, *k_sf_order, *v_sf_order, *q_dtype, *p_dtype, *out_dtype, *partial_dtype, *prod_dtype;
    double k_scale, v_scale, q_scale, sm_scale;
    int k_scale_set, v_scale_set, v_after, no_diag, l_unrounded, mma_frac;
    size_t split, mma_k, worst, threads;
    long seq;
    lowp_shard_opts so; /* --shard, --result, --merge */
    int others;         /* an option other than those given */
    char command[4096]; /* "lowp certify ..." without --shard and --result: the reproducer */
} certify_opts;

/* --kv-write: its own options, and none of the attention check's. */
static void kv_write_opts(const certify_opts *o)
{
    if (!o->kv_write)
        lowp_cli_fail("certify: --slot-mapping, --k-in, --v-in and --recipe belong to --kv-write");
    if (o->layout == NULL || o->k == NULL || o->v == NULL || o->slots == NULL || o->k_in == NULL || o->v_in == NULL)
        lowp_cli_fail("certify --kv-write: --layout, --k-cache, --v-cache, --slot-mapping, --k-in and --v-in are "
                      "required (see lowp certify --help)");
    if (!o->k_scale_set || !o->v_scale_set)
        lowp_cli_fail("certify --kv-write: --k-scale and --v-scale are required (the writer's decode-side scales; 1 "
                      "for an unscaled cache)");
    if (o->q || o->out || o->qo || o->bt || o->sl || o->indptr || o->indices || o->lpl || o->seq >= 0 ||
        o->q_dtype || o->p_dtype || o->out_dtype || o->partial_dtype || o->split || o->mma_k || o->v_after ||
        o->prod_dtype || o->l_unrounded || o->mma_frac ||
        o->sm_scale != 0 || o->q_scale != 0)
        lowp_cli_fail("certify --kv-write: --q, --out, --qo-indptr, --seq, page tables and the declared arithmetic "
                      "belong to the attention check, not to a cache write");
    if (o->so.shard.n > 1 || o->so.result != NULL)
        lowp_cli_fail("certify --kv-write: one run checks the writer's tokens; --shard and --result belong to the "
                      "attention check");
}

static void parse(int argc, char **argv, certify_opts *o)
{
    memset(o, 0, sizeof *o);
    o->seq = -1;
    o->worst = 8;
    lowp_shard_opts_init(&o->so, argc);
    size_t used = (size_t)snprintf(o->command, sizeof o->command, "lowp %s", argv[0]);
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        const char **str = NULL;
        if (lowp_shard_option(&o->so, argc, argv, &i))
            continue;
        o->others = 1;
        int first = i;
        if (strcmp(s, "--layout") == 0) str = &o->layout;
        else if (strcmp(s, "--k-cache") == 0) str = &o->k;
        else if (strcmp(s, "--v-cache") == 0) str = &o->v;
        else if (strcmp(s, "--k-sf") == 0) str = &o->ksf;
        else if (strcmp(s, "--v-sf") == 0) str = &o->vsf;
        else if (strcmp(s, "--block-table") == 0) str = &o->bt;
        else if (strcmp(s, "--seq-lens") == 0) str = &o->sl;
        else if (strcmp(s, "--indptr") == 0) str = &o->indptr;
        else if (strcmp(s, "--indices") == 0) str = &o->indices;
        else if (strcmp(s, "--last-page-len") == 0) str = &o->lpl;
        else if (strcmp(s, "--q") == 0) str = &o->q;
        else if (strcmp(s, "--out") == 0) str = &o->out;
        else if (strcmp(s, "--qo-indptr") == 0) str = &o->qo;
        else if (strcmp(s, "--slot-mapping") == 0) str = &o->slots;
        else if (strcmp(s, "--k-in") == 0) str = &o->k_in;
        else if (strcmp(s, "--v-in") == 0) str = &o->v_in;
        else if (strcmp(s, "--recipe") == 0) str = &o->recipe;
        else if (strcmp(s, "--page-order") == 0) str = &o->page_order;
        else if (strcmp(s, "--k-sf-order") == 0) str = &o->k_sf_order;
        else if (strcmp(s, "--v-sf-order") == 0) str = &o->v_sf_order;
        else if (strcmp(s, "--q-dtype") == 0) str = &o->q_dtype;
        else if (strcmp(s, "--p-dtype") == 0) str = &o->p_dtype;
        else if (strcmp(s, "--out-dtype") == 0) str = &o->out_dtype;
        else if (strcmp(s, "--partial-dtype") == 0) str = &o->partial_dtype;
        else if (strcmp(s, "--prod-dtype") == 0) str = &o->prod_dtype;
        if (str != NULL)
            *str = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(s, "--k-scale") == 0) {
            o->k_scale = lowp_cli_parse_positive(s, lowp_cli_option_value(argc, argv, &i));
            o->k_scale_set = 1;
        } else if (strcmp(s, "--v-scale") == 0) {
            o->v_scale = lowp_cli_parse_positive(s, lowp_cli_option_value(argc, argv, &i));
            o->v_scale_set = 1;
        } else if (strcmp(s, "--q-scale") == 0)
            o->q_scale = lowp_cli_parse_positive(s, lowp_cli_option_value(argc, argv, &i));
        else if (strcmp(s, "--sm-scale") == 0)
            o->sm_scale = lowp_cli_parse_positive(s, lowp_cli_option_value(argc, argv, &i));
        else if (strcmp(s, "--split-tokens") == 0)
            o->split = lowp_cli_parse_count(s, lowp_cli_option_value(argc, argv, &i), 0);
        else if (strcmp(s, "--mma-k") == 0)
            o->mma_k = (size_t)lowp_cli_parse_u64(s, lowp_cli_option_value(argc, argv, &i), 1, 4096);
        else if (strcmp(s, "--worst") == 0)
            o->worst = (size_t)lowp_cli_parse_u64(s, lowp_cli_option_value(argc, argv, &i), 0,
                                                  LOWP_CERTIFY_WORST_MAX);
        else if (strcmp(s, "--threads") == 0)
            o->threads = (size_t)lowp_cli_parse_u64(s, lowp_cli_option_value(argc, argv, &i), 1, 4096);
        else if (strcmp(s, "--seq") == 0)
            o->seq = (long)lowp_cli_parse_i64(s, lowp_cli_option_value(argc, argv, &i), 0, INT32_MAX);
        else if (strcmp(s, "--v-scale-after-output") == 0)
            o->v_after = 1;
        else if (strcmp(s, "--l-unrounded") == 0)
            o->l_unrounded = 1;
        else if (strcmp(s, "--mma-frac") == 0)
            o->mma_frac = (int)lowp_cli_parse_u64(s, lowp_cli_option_value(argc, argv, &i), 8, 25);
        else if (strcmp(s, "--no-diagnose") == 0)
            o->no_diag = 1;
        else if (strcmp(s, "--kv-write") == 0)
            o->kv_write = 1;
        else if (strcmp(s, "--help") == 0 || strcmp(s, "-h") == 0) {
            certify_usage(stdout);
            exit(LOWP_EXIT_OK);
        } else
            lowp_cli_fail("certify: unknown argument '%s' (see lowp certify --help)", s);
        for (int j = first; j <= i && used < sizeof o->command; j++)
            used += (size_t)snprintf(o->command + used, sizeof o->command - used, " %s", argv[j]);
    }
    if (used >= sizeof o->command)
        lowp_cli_fail("certify: the command line is longer than %zu characters", sizeof o->command - 1);
    lowp_shard_opts_check(&o->so, "certify", o->others);
    if (o->so.merge)
        return;
    if (o->kv_write || o->slots != NULL || o->k_in != NULL || o->v_in != NULL || o->recipe != NULL) {
        kv_write_opts(o);
        return;
    }
    if (o->seq >= 0 && (o->so.shard.n > 1 || o->so.result != NULL))
        lowp_cli_fail("certify --seq certifies one sequence (a reproducer): it takes no --shard or --result");
    if (o->so.result != NULL) {
        lowp_out_check("--result", o->so.result);
        const char *const in[][2] = {{"--k-cache", o->k},        {"--v-cache", o->v},    {"--k-sf", o->ksf},
                                     {"--v-sf", o->vsf},         {"--block-table", o->bt}, {"--seq-lens", o->sl},
                                     {"--indptr", o->indptr},    {"--indices", o->indices},
                                     {"--last-page-len", o->lpl}, {"--q", o->q},          {"--out", o->out},
                                     {"--qo-indptr", o->qo}};
        for (size_t j = 0; j < sizeof in / sizeof in[0]; j++)
            lowp_cli_check_not_input("--result", o->so.result, in[j][0], in[j][1]);
    }
    if (o->layout == NULL || o->k == NULL || o->v == NULL || o->q == NULL || o->out == NULL)
        lowp_cli_fail("certify: --layout, --k-cache, --v-cache, --q and --out are required (see lowp certify --help)");
    if (!o->k_scale_set || !o->v_scale_set)
        lowp_cli_fail("certify: --k-scale and --v-scale are required (an unset scale is a bug, never 1.0 by default; "
                      "give 1 for an unscaled cache)");
    int bt = o->bt != NULL || o->sl != NULL, csr = o->indptr != NULL || o->indices != NULL || o->lpl != NULL;
    if (bt == csr)
        lowp_cli_fail("certify: give one page table: --block-table and --seq-lens, or --indptr, --indices and "
                      "--last-page-len");
    if ((bt && (o->bt == NULL || o->sl == NULL)) || (csr && (o->indptr == NULL || o->indices == NULL || o->lpl == NULL)))
        lowp_cli_fail("certify: the page table is incomplete (--block-table needs --seq-lens; --indptr needs --indices "
                      "and --last-page-len)");
}

/* --qo-indptr: int32 [batch + 1] (NULL without the option), and the query rows it gives in
 * *rows (batch without it). Monotonicity and chunk lengths are lowp_certify_run's checks;
 * the last entry is checked here because it sizes --q and --out. */
static const int32_t *load_qo_indptr(const char *path, lowp_tensor_file *f, size_t batch, size_t *rows)
{
    lowp_tensor_file_init(f);
    *rows = batch;
    if (path == NULL)
        return NULL;
    size_t sh[1];
    const int32_t *qo = load_i32("--qo-indptr", path, f, 1, sh);
    if (sh[0] != batch + 1)
        lowp_cli_fail("--qo-indptr: %zu entries, expected batch + 1 = %zu", sh[0], batch + 1);
    if (qo[batch] <= 0)
        lowp_cli_fail("--qo-indptr: ends at %d, expected the number of queries (> 0)", (int)qo[batch]);
    *rows = (size_t)qo[batch];
    return qo;
}

static lowp_certify_dtype dtype_opt(const char *opt, const char *name, lowp_certify_dtype dflt)
{
    lowp_certify_dtype d = dflt;
    if (name != NULL && lowp_certify_dtype_parse(name, &d))
        lowp_cli_fail("%s: unknown dtype '%s' (f32 bf16 f16 e4m3)", opt, name);
    return d;
}

/* One float input of --kv-write: [num_tokens, H, dim], binary32 values exactly. */
static void load_written(const char *opt, const char *path, lowp_tensor *t, size_t n, size_t H, size_t dim)
{
    char why[512];
    size_t rounded = 0;
    if (lowp_tensor_load_float(path, NULL, t, NULL, &rounded, why, sizeof why))
        lowp_cli_fail("%s %s: %s", opt, path, why);
    if (rounded > 0)
        lowp_cli_fail("%s %s: %zu values are not binary32 (give the writer's bf16 / f16 / f32 values)", opt, path,
                      rounded);
    if (t->ndim != 3 || t->shape[0] != n || t->shape[1] != H || t->shape[2] != dim)
        lowp_cli_fail("%s: shape [%zu, %zu, %zu] (rank %d), expected [num_tokens %zu, H %zu, dim %zu]", opt,
                      t->shape[0], t->ndim > 1 ? t->shape[1] : 0, t->ndim > 2 ? t->shape[2] : 0, t->ndim, n, H, dim);
}

/* lowp certify --kv-write, once the pools are in c: the report and the exit status. */
static int certify_kv_write(const certify_opts *o, const lowp_certify_cache *c)
{
    lowp_tensor_file fs;
    const lowp_tensor *ts = load_one("--slot-mapping", o->slots, &fs);
    if (ts->ndim != 1 || ts->shape[0] == 0 || (ts->dtype != LOWP_DT_I64 && ts->dtype != LOWP_DT_I32))
        lowp_cli_fail("--slot-mapping %s: expected int64 or int32 [num_tokens] (dtype %s, rank %d)", o->slots,
                      lowp_dtype_name(ts->dtype), ts->ndim);
    const size_t n = ts->shape[0];
    int64_t *slots = malloc(n * sizeof *slots);
    if (slots == NULL)
        lowp_cli_fail("--slot-mapping: out of memory for %zu slots", n);
    for (size_t i = 0; i < n; i++) {
        if (ts->dtype == LOWP_DT_I64)
            memcpy(&slots[i], ts->data + 8 * i, 8);
        else {
            int32_t v;
            memcpy(&v, ts->data + 4 * i, 4);
            slots[i] = v;
        }
    }
    lowp_tensor tk, tv;
    load_written("--k-in", o->k_in, &tk, n, c->num_kv_heads, c->qk_dim);
    load_written("--v-in", o->v_in, &tv, n, c->num_kv_heads, c->vo_dim);
    lowp_certify_kv_write_args a = {*c, lowp_recipe_default(c->format), n, slots,
                                    (const float *)(const void *)tk.data, (const float *)(const void *)tv.data, NULL};
    if (c->format == LOWP_NVFP4)
        a.recipe = lowp_kv_config_default(c->format, 1, 1, 1, 16, 16).recipe;
    if (o->recipe != NULL && lowp_recipe_parse(o->recipe, &a.recipe))
        lowp_cli_fail("--recipe: unknown recipe '%s' (%s)", o->recipe, lowp_recipe_names());
    lowp_certify_kv_write_result r;
    char why[512];
    if (lowp_certify_kv_write(&a, &r, why, sizeof why))
        lowp_cli_fail("certify --kv-write: %s", why);
    printf("# lowp certify --kv-write: layout %s (%s", o->layout, lowp_block_format_name(c->format));
    if (c->format == LOWP_NVFP4)
        printf(", K scales %s, V scales %s", lowp_kv_sf_order_name(c->k_sf_order), lowp_kv_sf_order_name(c->v_sf_order));
    printf("), %zu pages of %zu, %zu KV heads, dims %zu / %zu; recipe %s, k_scale %.9g v_scale %.9g\n", c->num_pages,
           c->page_size, c->num_kv_heads, c->qk_dim, c->vo_dim, lowp_recipe_name(a.recipe), (double)c->k_scale,
           (double)c->v_scale);
    printf("# tokens %zu: exact %zu, differs %zu, padding %zu (slot < 0, not written)\n", r.tokens, r.exact, r.differs,
           r.padding);
    if (r.differs > 0)
        printf("# first difference: token %zu (slot %zu), %s %s, head %zu, %s %zu: got 0x%02x, lowp wrote 0x%02x\n",
               r.token, r.slot, r.which ? "V" : "K", r.scales ? "block scales" : "codes", r.head,
               r.scales ? "scale" : "byte", r.index, r.got, r.want);
    if (r.diagnosis[0] != '\0')
        printf("# diagnosis: %s\n", r.diagnosis);
    if (fflush(stdout) != 0)
        lowp_cli_fail("cannot write to standard output");
    free(slots);
    lowp_tensor_free(&tk);
    lowp_tensor_free(&tv);
    lowp_tensor_file_free(&fs);
    return r.differs > 0 ? LOWP_EXIT_MISMATCH : LOWP_EXIT_OK;
}

/* The report after the header lines: oracle rows, the extend line (extend: "" for decode;
 * else the line, and the worst elements get their query's position and row), verdict
 * counts, worst elements (with the command that reproduces the first failing one), the
 * diagnosis. 1 when any output is outside its bound or a NaN mismatch. */
static int report(const char *header, const char *extend, const lowp_certify_result *r, long seq,
                  const char *command)
{
    fputs(header, stdout);
    printf("# exact: softmax(sm_scale q^ K^T) V of the declared Q and the cache's values, binary64 reference with its "
           "bound; %zu query rows by the MPFR oracle\n", r->oracle_rows);
    fputs(extend, stdout);
    if (seq >= 0)
        printf("# sequence %ld only\n", seq);
    printf("# verdicts of %zu outputs: exact %zu, within bound %zu, outside bound %zu, nan mismatch %zu; worst "
           "|got - exact| / bound %.4g\n",
           r->outputs, r->counts[0], r->counts[1], r->counts[2], r->counts[3], r->worst_ratio);
    if (r->n_worst > 0) {
        printf("%-6s %5s %5s %8s", "batch", "head", "dim", "seq_len");
        if (extend[0] != '\0')
            printf(" %8s %6s", "q_pos", "q_row");
        printf(" %16s %24s %11s %9s  %s\n", "got", "exact", "bound", "ratio", "verdict");
        for (size_t i = 0; i < r->n_worst; i++) {
            const lowp_certify_worst *w = &r->worst[i];
            printf("%-6zu %5zu %5zu %8zu", w->batch, w->head, w->dim, w->seq_len);
            if (extend[0] != '\0')
                printf(" %8zu %6zu", w->q_pos, w->row);
            printf(" %16.9g %24.17g %11.4g %9.4g  %s\n", w->got, w->exact, w->bound, w->ratio,
                   lowp_certify_verdict_name((lowp_certify_verdict)w->verdict));
        }
        if (r->counts[2] + r->counts[3] > 0 && seq < 0)
            printf("# reproduce the first: %s --seq %zu\n", command, r->worst[0].batch);
    }
    if (r->diagnosis[0] != '\0')
        printf("# diagnosis: %s\n", r->diagnosis);
    if (fflush(stdout) != 0)
        lowp_cli_fail("cannot write to standard output");
    return r->counts[2] + r->counts[3] > 0;
}

/* ---- results (tools/shard.h): a unit is one sequence b of the batch (an extend batch's:
 * with all its query rows, qo_indptr[b] .. qo_indptr[b+1] - 1), certified alone (only_seq b), with the verdict of every alternative reading of the diagnosis on it: 'p'
 * every output within bound, 'f' not, 'x' the reading is no valid cache, '-' it does not
 * apply. combine gives the certificate of one lowp_certify_run (lowp/certify.h: the run in
 * parts). ----------------------------------------------------------------------------------- */

/* the fields of a worst element (lowp_certify_worst) but its verdict */
#define WORST_SIZES(X) X(batch) X(head) X(dim) X(seq_len) X(q_pos) X(row)
#define WORST_DOUBLES(X) X(got) X(exact) X(ref_err) X(bound) X(ratio)

static const char *const verdict_keys[LOWP_CERTIFY_VERDICT_COUNT] = {"exact", "within", "outside", "nan_mismatch"};

static json_t *run_units(const certify_opts *o, const lowp_certify_args *args, const char *header,
                         const char *extend)
{
    char why[512];
    size_t batch = args->cache.batch;
    json_t *a = json_object(), *alts = json_array();
    if (a == NULL || alts == NULL)
        lowp_cli_fail("out of memory");
    lowp_json_set_str(a, "command", o->command);
    lowp_json_set_str(a, "header", header);
    lowp_json_set_str(a, "extend", extend);
    lowp_json_set_u64(a, "worst", args->n_worst);
    lowp_json_set_i64(a, "diagnose", args->diagnose);
    for (int alt = 0; alt < LOWP_CERTIFY_ALT_COUNT && args->diagnose; alt++) {
        lowp_certify_args b;
        char what[200] = "";
        if (!lowp_certify_alternative(args, alt, &b, what, sizeof what))
            what[0] = '\0';
        if (json_array_append_new(alts, json_string(what)) != 0)
            lowp_cli_fail("out of memory");
    }
    if (json_object_set_new(a, "alternatives", alts) != 0)
        lowp_cli_fail("out of memory");
    json_t *res = lowp_result_new("certify", a, &o->so.shard, batch);
    for (size_t b = 0; b < batch; b++) {
        if (!lowp_shard_mine(&o->so.shard, b))
            continue;
        lowp_certify_args one = *args;
        one.only_seq = (long)b;
        one.diagnose = 0; /* the alternatives run below, per sequence */
        lowp_certify_result r;
        if (lowp_certify_run(&one, &r, why, sizeof why))
            lowp_cli_fail("certify: %s", why);
        json_t *u = lowp_result_unit(res, b);
        lowp_json_set_u64(u, "outputs", r.outputs);
        for (int v = 0; v < LOWP_CERTIFY_VERDICT_COUNT; v++)
            lowp_json_set_u64(u, verdict_keys[v], r.counts[v]);
        lowp_json_set_u64(u, "oracle_rows", r.oracle_rows);
        lowp_json_set_f64(u, "worst_ratio", r.worst_ratio);
        json_t *list = json_array();
        if (list == NULL || json_object_set_new(u, "worst", list) != 0)
            lowp_cli_fail("out of memory");
        for (size_t i = 0; i < r.n_worst; i++) {
            const lowp_certify_worst *w = &r.worst[i];
            json_t *e = json_object();
            if (e == NULL || json_array_append_new(list, e) != 0)
                lowp_cli_fail("out of memory");
#define PUT_Z(f) lowp_json_set_u64(e, #f, w->f);
#define PUT_D(f) lowp_json_set_f64(e, #f, w->f);
            WORST_SIZES(PUT_Z)
            WORST_DOUBLES(PUT_D)
#undef PUT_Z
#undef PUT_D
            lowp_json_set_i64(e, "verdict", w->verdict);
        }
        char st[LOWP_CERTIFY_ALT_COUNT + 1] = "";
        for (int alt = 0; alt < LOWP_CERTIFY_ALT_COUNT && args->diagnose; alt++) {
            lowp_certify_args b2;
            char what[200];
            st[alt] = '-';
            if (!lowp_certify_alternative(&one, alt, &b2, what, sizeof what))
                continue;
            lowp_certify_result r2;
            if (lowp_certify_run(&b2, &r2, why, sizeof why))
                st[alt] = 'x';
            else
                st[alt] = r2.outputs > 0 && r2.counts[LOWP_CERTIFY_OUTSIDE] + r2.counts[LOWP_CERTIFY_NAN_MISMATCH] == 0
                              ? 'p'
                              : 'f';
        }
        lowp_json_set_str(u, "alternatives", st);
    }
    return res;
}

static int by_element(const void *pa, const void *pb)
{
    const lowp_certify_worst *a = pa, *b = pb;
    if (a->batch != b->batch)
        return a->batch < b->batch ? -1 : 1;
    if (a->row != b->row)
        return a->row < b->row ? -1 : 1;
    if (a->head != b->head)
        return a->head < b->head ? -1 : 1;
    return a->dim < b->dim ? -1 : a->dim > b->dim;
}

/* The certificate of res's units (all of the batch after a merge; a shard's own otherwise,
 * then without the diagnosis). 1 when an output is outside or a NaN mismatch. */
static int combine(const json_t *res, lowp_certify_result *r)
{
    const json_t *a = lowp_result_args(res);
    size_t want = (size_t)lowp_json_u64(a, "worst"), n = lowp_result_count(res), nw = 0;
    if (want > LOWP_CERTIFY_WORST_MAX)
        lowp_cli_fail("merge: worst %zu is more than %d", want, LOWP_CERTIFY_WORST_MAX);
    memset(r, 0, sizeof *r);
    lowp_certify_worst *all = calloc(n * want + 1, sizeof *all);
    if (all == NULL)
        lowp_cli_fail("out of memory");
    for (size_t u = 0; u < n; u++) {
        const json_t *x = lowp_result_at(res, u);
        r->outputs += (size_t)lowp_json_u64(x, "outputs");
        for (int v = 0; v < LOWP_CERTIFY_VERDICT_COUNT; v++)
            r->counts[v] += (size_t)lowp_json_u64(x, verdict_keys[v]);
        r->oracle_rows += (size_t)lowp_json_u64(x, "oracle_rows");
        double wr = lowp_json_f64(x, "worst_ratio");
        if (wr > r->worst_ratio)
            r->worst_ratio = wr;
        const json_t *list = json_object_get(x, "worst");
        if (!json_is_array(list) || json_array_size(list) > want)
            lowp_cli_fail("merge: unit %zu's worst list is not a list of at most %zu", u, want);
        for (size_t i = 0; i < json_array_size(list); i++) {
            const json_t *e = json_array_get(list, i);
            lowp_certify_worst *w = &all[nw++];
#define GET_Z(f) w->f = (size_t)lowp_json_u64(e, #f);
#define GET_D(f) w->f = lowp_json_f64(e, #f);
            WORST_SIZES(GET_Z)
            WORST_DOUBLES(GET_D)
#undef GET_Z
#undef GET_D
            w->verdict = (int)lowp_json_i64(e, "verdict");
            if (w->verdict < 0 || w->verdict >= LOWP_CERTIFY_VERDICT_COUNT)
                lowp_cli_fail("merge: unit %zu has a worst element of verdict %d", u, w->verdict);
        }
    }
    /* ties in the list go by element order (batch, row, head, dim), as in one run */
    qsort(all, nw, sizeof *all, by_element);
    for (size_t i = 0; i < nw; i++)
        lowp_certify_worst_offer(r, want, &all[i]);
    free(all);
    int bad = r->counts[LOWP_CERTIFY_OUTSIDE] + r->counts[LOWP_CERTIFY_NAN_MISMATCH] > 0;
    const json_t *alts = json_object_get(a, "alternatives");
    if (!bad || !lowp_json_i64(a, "diagnose") || n != lowp_json_u64(res, "units"))
        return bad;
    /* the first reading that applies, is a valid cache for every sequence and holds every
     * output of every sequence within bound (lowp_certify_run's diagnosis) */
    for (size_t alt = 0; alt < json_array_size(alts); alt++) {
        const char *what = json_string_value(json_array_get(alts, alt));
        if (what == NULL)
            lowp_cli_fail("merge: alternative %zu is not a string", alt);
        if (*what == '\0')
            continue;
        int all_pass = 1, invalid = 0;
        for (size_t u = 0; u < n; u++) {
            const char *st = lowp_json_str(lowp_result_at(res, u), "alternatives");
            if (strlen(st) != json_array_size(alts))
                lowp_cli_fail("merge: unit %zu has %zu alternatives' verdicts, the run %zu", u, strlen(st),
                              json_array_size(alts));
            invalid |= st[alt] == 'x';
            all_pass &= st[alt] == 'p';
        }
        if (!invalid && all_pass) {
            lowp_certify_diagnosis_set(r, what, r->outputs);
            break;
        }
    }
    return bad;
}

/* --merge: the shards' results, the certificate of one run. */
static int certify_merge(certify_opts *o)
{
    if (o->so.result != NULL)
        lowp_out_check("--result", o->so.result);
    json_t *res = lowp_result_merge("certify", o->so.files, o->so.n_files);
    const json_t *a = lowp_result_args(res);
    lowp_certify_result r;
    combine(res, &r);
    int bad = report(lowp_json_str(a, "header"), lowp_json_str(a, "extend"), &r, -1, lowp_json_str(a, "command"));
    if (o->so.result != NULL)
        lowp_result_write(res, o->so.result);
    json_decref(res);
    lowp_shard_opts_free(&o->so);
    return bad ? LOWP_EXIT_MISMATCH : LOWP_EXIT_OK;
}

int lowp_cmd_certify(int argc, char **argv)
{
    certify_opts o;
    parse(argc, argv, &o);
    if (o.so.merge)
        return certify_merge(&o);
    lowp_certify_layout layout;
    if (lowp_certify_layout_parse(o.layout, &layout))
        lowp_cli_fail("--layout: unknown layout '%s' (vllm-fp8 flashinfer sglang-nvfp4 trtllm)", o.layout);
    lowp_certify_arith ar = lowp_certify_arith_default();
    ar.q_dtype = dtype_opt("--q-dtype", o.q_dtype, ar.q_dtype);
    ar.p_dtype = dtype_opt("--p-dtype", o.p_dtype, ar.p_dtype);
    ar.out_dtype = dtype_opt("--out-dtype", o.out_dtype, ar.out_dtype);
    ar.partial_dtype = dtype_opt("--partial-dtype", o.partial_dtype, ar.partial_dtype);
    ar.q_scale = (float)o.q_scale;
    ar.sm_scale = o.sm_scale;
    ar.split_tokens = o.split;
    ar.mma_k = o.mma_k;
    ar.v_scale_after_output = o.v_after;
    ar.prod_dtype = dtype_opt("--prod-dtype", o.prod_dtype, ar.prod_dtype);
    if (ar.prod_dtype == LOWP_CERTIFY_E4M3)
        lowp_cli_fail("--prod-dtype: products are rounded to f32, bf16 or f16, not e4m3");
    ar.l_unrounded = o.l_unrounded;
    ar.mma_frac = o.mma_frac;
    lowp_kv_layout page_order = LOWP_KV_NHD;
    if (o.page_order != NULL && lowp_kv_layout_parse(o.page_order, &page_order))
        lowp_cli_fail("--page-order: '%s' is not nhd or hnd", o.page_order);
    if (o.page_order != NULL && layout != LOWP_CERTIFY_FLASHINFER)
        lowp_cli_fail("--page-order: layout %s fixes its page order (flashinfer only)", o.layout);

    /* the pools: sizes from the shapes */
    lowp_tensor_file fk, fv, fks, fvs, f1, f2, f3;
    const lowp_tensor *tk = load_one("--k-cache", o.k, &fk), *tv = load_one("--v-cache", o.v, &fv);
    const lowp_tensor *tks = NULL, *tvs = NULL;
    int nvfp4 = layout == LOWP_CERTIFY_SGLANG_NVFP4 || layout == LOWP_CERTIFY_TRTLLM;
    if (nvfp4 != (o.ksf != NULL && o.vsf != NULL) || (!nvfp4 && (o.ksf != NULL || o.vsf != NULL)))
        lowp_cli_fail("--k-sf / --v-sf: layout %s %s block scales", o.layout, nvfp4 ? "needs both" : "has no");
    if (nvfp4) {
        tks = load_one("--k-sf", o.ksf, &fks);
        tvs = load_one("--v-sf", o.vsf, &fvs);
    }
    lowp_certify_cache c = lowp_certify_cache_init(layout, 0, 0, 0, 0, 0);
    if (layout == LOWP_CERTIFY_FLASHINFER)
        c.code_order = c.sf_order = page_order;
    if (tk->dtype != tv->dtype || (tks && tks->dtype != tvs->dtype))
        lowp_cli_fail("--k-cache/--v-cache (--k-sf/--v-sf): K and V of one dtype (%s, %s)", lowp_dtype_name(tk->dtype),
                      lowp_dtype_name(tv->dtype));
    if ((byte_codes(tk->dtype) ? 0 : tk->dtype != LOWP_DT_BF16) || (tks && !byte_codes(tks->dtype)))
        lowp_cli_fail("--k-cache: dtype %s is no cache dtype (uint8 / F8_E4M3 bytes, BF16)", lowp_dtype_name(tk->dtype));
    char why[512];
    if (lowp_certify_cache_shapes(&c, tk->ndim, tk->shape, tv->ndim, tv->shape, tks ? tks->ndim : 0,
                                  tks ? tks->shape : NULL, tvs ? tvs->ndim : 0, tvs ? tvs->shape : NULL,
                                  lowp_dtype_size(tk->dtype), why, sizeof why))
        lowp_cli_fail("%s: %s", o.layout, why);
    const lowp_block_format fmt = c.format;
    const size_t pages = c.num_pages, P = c.page_size, H = c.num_kv_heads, Dk = c.qk_dim, Dv = c.vo_dim;

    if (o.k_sf_order != NULL && lowp_kv_sf_order_parse(o.k_sf_order, &c.k_sf_order))
        lowp_cli_fail("--k-sf-order: '%s' is not linear or interleave4", o.k_sf_order);
    if (o.v_sf_order != NULL && lowp_kv_sf_order_parse(o.v_sf_order, &c.v_sf_order))
        lowp_cli_fail("--v-sf-order: '%s' is not linear or interleave4", o.v_sf_order);
    c.k = tk->data;
    c.v = tv->data;
    c.k_sf = tks ? tks->data : NULL;
    c.v_sf = tvs ? tvs->data : NULL;
    c.k_scale = (float)o.k_scale;
    c.v_scale = (float)o.v_scale;
    if (o.kv_write) {
        int rc = certify_kv_write(&o, &c);
        lowp_shard_opts_free(&o.so);
        lowp_tensor_file_free(&fk);
        lowp_tensor_file_free(&fv);
        if (nvfp4) {
            lowp_tensor_file_free(&fks);
            lowp_tensor_file_free(&fvs);
        }
        return rc;
    }

    /* page table */
    size_t sh[2], sh2[2], sh3[2];
    if (o.bt != NULL) {
        c.block_table = load_i32("--block-table", o.bt, &f1, 2, sh);
        c.seq_lens = load_i32("--seq-lens", o.sl, &f2, 1, sh2);
        c.batch = sh[0];
        c.max_blocks = sh[1];
        if (sh2[0] != sh[0])
            lowp_cli_fail("--seq-lens: %zu entries, --block-table has %zu rows", sh2[0], sh[0]);
        lowp_tensor_file_init(&f3);
    } else {
        c.indptr = load_i32("--indptr", o.indptr, &f1, 1, sh);
        c.indices = load_i32("--indices", o.indices, &f2, 1, sh2);
        c.last_page_len = load_i32("--last-page-len", o.lpl, &f3, 1, sh3);
        if (sh[0] < 2 || sh3[0] != sh[0] - 1)
            lowp_cli_fail("--indptr / --last-page-len: %zu and %zu entries, expected batch + 1 and batch", sh[0], sh3[0]);
        c.batch = sh3[0];
        if (c.indptr[c.batch] < 0 || (size_t)c.indptr[c.batch] > sh2[0])
            lowp_cli_fail("--indices: %zu entries, --indptr ends at %d", sh2[0], (int)c.indptr[c.batch]);
    }

    /* queries and the kernel's output */
    lowp_tensor_file fqo;
    size_t rows;
    const int32_t *qo = load_qo_indptr(o.qo, &fqo, c.batch, &rows);
    const char *rn = qo != NULL ? "total_q" : "batch";
    lowp_tensor tq, to;
    if (lowp_tensor_load_float(o.q, NULL, &tq, NULL, NULL, why, sizeof why))
        lowp_cli_fail("--q %s: %s", o.q, why);
    if (lowp_tensor_load_float(o.out, NULL, &to, NULL, NULL, why, sizeof why))
        lowp_cli_fail("--out %s: %s", o.out, why);
    expect_rank("--q", &tq, 3, qo ? "[total_q, num_q_heads, qk_dim]" : "[batch, num_q_heads, qk_dim]");
    expect_rank("--out", &to, 3, qo ? "[total_q, num_q_heads, vo_dim]" : "[batch, num_q_heads, vo_dim]");
    size_t Hq = tq.shape[1];
    if (tq.shape[0] != rows || tq.shape[2] != Dk)
        lowp_cli_fail("--q: shape [%zu, %zu, %zu], expected [%s %zu, num_q_heads, qk_dim %zu]", tq.shape[0],
                      tq.shape[1], tq.shape[2], rn, rows, Dk);
    if (to.shape[0] != rows || to.shape[1] != Hq || to.shape[2] != Dv)
        lowp_cli_fail("--out: shape [%zu, %zu, %zu], expected [%zu, %zu, %zu]", to.shape[0], to.shape[1], to.shape[2],
                      rows, Hq, Dv);
    const float *qf = (const float *)(const void *)tq.data;
    for (size_t i = 0; i < tq.count; i++)
        if (!isfinite(qf[i]))
            lowp_cli_fail("--q: element %zu is not finite", i);

    lowp_certify_args args = lowp_certify_args_init(&c, &ar, Hq, qf, (const float *)(const void *)to.data);
    args.only_seq = o.seq;
    args.diagnose = !o.no_diag;
    args.threads = (int)o.threads;
    args.n_worst = o.worst;
    args.qo_indptr = qo;

    /* the report's first lines: what the inputs and the declaration are */
    char *header = NULL;
    size_t hlen = 0;
    FILE *hf = open_memstream(&header, &hlen);
    if (hf == NULL)
        lowp_cli_fail("out of memory");
    fprintf(hf, "# lowp certify: layout %s (%s, pages %s", o.layout, lowp_block_format_name(fmt),
            lowp_kv_layout_name(c.code_order));
    if (fmt == LOWP_NVFP4)
        fprintf(hf, ", scales %s, K %s, V %s", lowp_kv_layout_name(c.sf_order), lowp_kv_sf_order_name(c.k_sf_order),
                lowp_kv_sf_order_name(c.v_sf_order));
    fprintf(hf, "), %zu pages of %zu, batch %zu, %zu query heads / %zu KV heads, qk_dim %zu vo_dim %zu; k_scale %.9g "
            "v_scale %.9g\n",
            pages, P, c.batch, Hq, H, Dk, Dv, o.k_scale, o.v_scale);
    fprintf(hf, "# declared: Q %s", lowp_certify_dtype_name(ar.q_dtype));
    if (ar.q_dtype == LOWP_CERTIFY_E4M3)
        fprintf(hf, " (q_scale %.9g)", ar.q_scale > 0 ? (double)ar.q_scale : 1.0);
    fprintf(hf, ", P %s, out %s, fp32 accumulation in steps of %zu position%s", lowp_certify_dtype_name(ar.p_dtype),
            lowp_certify_dtype_name(ar.out_dtype), ar.mma_k > 1 ? ar.mma_k : 1, ar.mma_k > 1 ? "s" : "");
    if (ar.prod_dtype != LOWP_CERTIFY_F32)
        fprintf(hf, ", Q.K products rounded to %s", lowp_certify_dtype_name(ar.prod_dtype));
    if (ar.l_unrounded)
        fprintf(hf, ", l of the unrounded weights");
    if (ar.mma_frac)
        fprintf(hf, ", tensor-core steps keeping %d fraction bits", ar.mma_frac);
    if (ar.split_tokens)
        fprintf(hf, ", split-K %zu (partials %s)", ar.split_tokens, lowp_certify_dtype_name(ar.partial_dtype));
    fprintf(hf, ", v_scale %s; sm_scale %.9g\n", ar.v_scale_after_output ? "after the output rounding" : "inside",
            ar.sm_scale != 0 ? ar.sm_scale : 1.0 / sqrt((double)Dk));
    if (fclose(hf) != 0)
        lowp_cli_fail("out of memory");
    char extend[200] = "";
    if (qo != NULL)
        snprintf(extend, sizeof extend, "# extend: %zu causal queries over %zu sequences (--qo-indptr), each certified "
                 "over its visible prefix\n", rows, c.batch);

    lowp_certify_result r;
    int bad;
    if (o.so.shard.n == 1 && o.so.result == NULL) { /* one run of the library over the batch */
        if (lowp_certify_run(&args, &r, why, sizeof why))
            lowp_cli_fail("certify: %s", why);
        bad = report(header, extend, &r, o.seq, o.command);
    } else {
        json_t *res = run_units(&o, &args, header, extend);
        if (o.so.shard.n == 1) {
            combine(res, &r);
            bad = report(header, extend, &r, -1, o.command);
        } else {
            bad = combine(res, &r);
            printf("certify: shard %zu/%zu: %zu of %zu sequences, %zu outputs (%zu outside, %zu nan mismatch); "
                   "result %s\n",
                   o.so.shard.k, o.so.shard.n, lowp_result_count(res), c.batch, r.outputs, r.counts[2], r.counts[3],
                   o.so.result);
            if (fflush(stdout) != 0)
                lowp_cli_fail("cannot write to standard output");
        }
        lowp_result_write(res, o.so.result);
        json_decref(res);
    }
    free(header);
    lowp_shard_opts_free(&o.so);
    lowp_tensor_free(&tq);
    lowp_tensor_free(&to);
    lowp_tensor_file_free(&fk);
    lowp_tensor_file_free(&fv);
    if (nvfp4) {
        lowp_tensor_file_free(&fks);
        lowp_tensor_file_free(&fvs);
    }
    lowp_tensor_file_free(&f1);
    lowp_tensor_file_free(&f2);
    lowp_tensor_file_free(&f3);
    lowp_tensor_file_free(&fqo);
    return bad ? LOWP_EXIT_MISMATCH : LOWP_EXIT_OK;
}
