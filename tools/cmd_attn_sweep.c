/* tools/cmd_attn_sweep.c: `lowp attn-sweep`: what each KV-cache format costs in attention,
 * across workloads and contexts, next to what the binary64 arithmetic costs
 * (lowp/attn_sweep.h states the method and every column).
 *
 * Writes the full table as CSV and a Markdown summary (default reports/attn-sweep.csv and
 * reports/attn-sweep.md, relative to the current directory), prints the all-heads table
 * on stdout, and shows progress on a terminal.
 *
 * The file name gives the C name attn_sweep (a C identifier has no dash); the dispatcher
 * (tools/lowp.c) shows and accepts it as `attn-sweep`. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "lowp/attn_sweep.h"

LOWP_COMMAND_DEFINE(attn_sweep, "attention error of every KV format across workloads and contexts (reports/)");

static void sweep_usage(FILE *f)
{
    fputs("usage: lowp attn-sweep [--csv FILE] [--md FILE] [--contexts N,N,...] [--size CTX:QLEN:HQ:HKV ...]\n"
          "                       [--workloads W,W,...] [--dim D] [--seed S] [--oracle-ctx N]\n"
          "                       [--oracle-heads N] [--quick]\n"
          "  default: contexts 1024 8192 32768 131072; 32 query / 8 KV heads (8 / 2 above 32K), q_len 4 up\n"
          "           to 8K and 1 above; dim 128; every workload and format; MPFR oracle at ctx <= 1024\n"
          "           on the first KV head's query group; reports/attn-sweep.csv and reports/attn-sweep.md\n"
          "  --contexts     context sizes, each with the default shape rule above\n"
          "  --size         one size with an explicit shape (repeatable; replaces the contexts)\n"
          "  --workloads    gaussian k-outlier rope needle small (lowp/workload.h)\n"
          "  --dim D        qk_dim = vo_dim (a multiple of 32; default 128)\n"
          "  --seed S       workload seed (decimal or 0x hex; default 0x6c6f7770)\n"
          "  --oracle-ctx N run the MPFR oracle on contexts up to N (0: never; default 1024)\n"
          "  --oracle-heads N  KV heads whose query groups the oracle covers (default 1)\n"
          "  --quick        contexts 256 and 1024, 8 query / 2 KV heads, q_len 2, dim 64 (seconds)\n"
          "  --csv FILE, --md FILE  outputs ('-' for stdout replaces the table)\n",
          f);
}

static size_t parse_size_t(const char *opt, const char *s, size_t min, size_t max)
{
    return (size_t)lowp_cli_parse_u64(opt, s, min, max);
}

/* The default shape for a context (lowp_sweep_default_options' rule). */
static lowp_sweep_size size_for(size_t ctx)
{
    lowp_sweep_size z = {ctx, ctx <= 8192 ? 4 : 1, ctx <= 32768 ? 32 : 8, ctx <= 32768 ? 8 : 2};
    if (z.q_len > ctx)
        z.q_len = ctx;
    return z;
}

static void progress(void *arg, size_t done, size_t total, const char *what)
{
    (void)arg;
    fprintf(stderr, "\r\033[Klowp attn-sweep: [%zu/%zu] %s", done, total, what);
    if (strcmp(what, "done") == 0)
        fputc('\n', stderr);
    fflush(stderr);
}

/* An output path is writable: checked before the sweep, so that minutes are not spent
 * before a typo fails, and so that a failing second output never leaves the first one
 * behind. */
static void check_writable(const char *opt, const char *path)
{
    lowp_out_check(opt, path);
}

#define MAX_LIST 64

/* Split a comma list into at most MAX_LIST items (modifies buf). */
static size_t split(char *buf, char **items, const char *opt)
{
    size_t n = 0;
    for (char *p = buf;;) {
        char *c = strchr(p, ',');
        if (c != NULL)
            *c = '\0';
        if (*p == '\0')
            lowp_cli_fail("%s: empty item in the list", opt);
        if (n == MAX_LIST)
            lowp_cli_fail("%s: more than %d items", opt, MAX_LIST);
        items[n++] = p;
        if (c == NULL)
            break;
        p = c + 1;
    }
    return n;
}

int lowp_cmd_attn_sweep(int argc, char **argv)
{
    lowp_sweep_options o;
    lowp_sweep_default_options(&o);
    const char *csv = "reports/attn-sweep.csv", *md = "reports/attn-sweep.md";
    int sizes_given = 0, contexts_given = 0, quick = 0, dim_given = 0;
    char buf[1024];
    char *items[MAX_LIST];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--csv") == 0)
            csv = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(a, "--md") == 0)
            md = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(a, "--quick") == 0)
            quick = 1;
        else if (strcmp(a, "--contexts") == 0) {
            const char *v = lowp_cli_option_value(argc, argv, &i);
            if (strlen(v) >= sizeof buf)
                lowp_cli_fail("--contexts: the list is too long");
            strcpy(buf, v);
            size_t n = split(buf, items, a);
            if (n > LOWP_SWEEP_MAX_SIZES)
                lowp_cli_fail("--contexts: at most %d contexts", LOWP_SWEEP_MAX_SIZES);
            o.n_sizes = n;
            for (size_t k = 0; k < n; k++)
                o.sizes[k] = size_for(parse_size_t("--contexts", items[k], 1, (size_t)1 << 24));
            contexts_given = 1;
        } else if (strcmp(a, "--size") == 0) {
            const char *v = lowp_cli_option_repeated(argc, argv, &i);
            if (strlen(v) >= sizeof buf)
                lowp_cli_fail("--size: '%.40s...' is too long", v);
            strcpy(buf, v);
            char *f[4];
            size_t nf = 0;
            for (char *p = buf; nf < 4;) {
                f[nf++] = p;
                char *c = strchr(p, ':');
                if (c == NULL)
                    break;
                *c = '\0';
                p = c + 1;
            }
            if (nf != 4 || strchr(f[3], ':') != NULL)
                lowp_cli_fail("--size: '%s' is not CTX:QLEN:HQ:HKV", v);
            if (!sizes_given)
                o.n_sizes = 0;
            if (o.n_sizes == LOWP_SWEEP_MAX_SIZES)
                lowp_cli_fail("--size: at most %d sizes", LOWP_SWEEP_MAX_SIZES);
            lowp_sweep_size z;
            z.ctx = parse_size_t("--size CTX", f[0], 1, (size_t)1 << 24);
            z.q_len = parse_size_t("--size QLEN", f[1], 1, z.ctx);
            z.num_q_heads = parse_size_t("--size HQ", f[2], 1, 1024);
            z.num_kv_heads = parse_size_t("--size HKV", f[3], 1, 1024);
            if (z.num_q_heads % z.num_kv_heads != 0)
                lowp_cli_fail("--size %s: %zu query heads are not a multiple of %zu KV heads", v, z.num_q_heads,
                              z.num_kv_heads);
            o.sizes[o.n_sizes++] = z;
            sizes_given = 1;
        } else if (strcmp(a, "--workloads") == 0) {
            const char *v = lowp_cli_option_value(argc, argv, &i);
            if (strlen(v) >= sizeof buf)
                lowp_cli_fail("--workloads: the list is too long");
            strcpy(buf, v);
            size_t n = split(buf, items, a);
            o.workloads = 0;
            for (size_t k = 0; k < n; k++) {
                lowp_workload_kind w;
                if (lowp_workload_parse(items[k], &w))
                    lowp_cli_fail("--workloads: unknown workload '%s' (gaussian k-outlier rope needle small)",
                                  items[k]);
                o.workloads |= 1u << w;
            }
        } else if (strcmp(a, "--dim") == 0) {
            o.qk_dim = o.vo_dim = parse_size_t(a, lowp_cli_option_value(argc, argv, &i), 32, 1024);
            if (o.qk_dim % 32 != 0)
                lowp_cli_fail("--dim %zu: not a multiple of 32 (the MX block size)", o.qk_dim);
            dim_given = 1;
        } else if (strcmp(a, "--seed") == 0) {
            o.seed = lowp_cli_parse_seed("--seed", lowp_cli_option_value(argc, argv, &i));
        } else if (strcmp(a, "--oracle-ctx") == 0)
            o.oracle_max_ctx = parse_size_t(a, lowp_cli_option_value(argc, argv, &i), 0, (size_t)1 << 24);
        else if (strcmp(a, "--oracle-heads") == 0)
            o.oracle_kv_heads = parse_size_t(a, lowp_cli_option_value(argc, argv, &i), 1, 1024);
        else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            sweep_usage(stdout);
            return LOWP_EXIT_OK;
        } else
            lowp_cli_fail("attn-sweep: unknown argument '%s' (see lowp attn-sweep --help)", a);
    }
    if (sizes_given && contexts_given)
        lowp_cli_fail("--contexts and --size are alternatives: give one");
    if (quick) {
        if (sizes_given || contexts_given)
            lowp_cli_fail("--quick sets the sizes; it does not combine with --contexts or --size");
        static const lowp_sweep_size q[] = {{256, 2, 8, 2}, {1024, 2, 8, 2}};
        o.n_sizes = 2;
        memcpy(o.sizes, q, sizeof q);
        if (!dim_given)
            o.qk_dim = o.vo_dim = 64;
    }
    if (strcmp(csv, "-") == 0 && strcmp(md, "-") == 0)
        lowp_cli_fail("--csv - and --md - would both write to standard output");
    if (strcmp(csv, md) == 0)
        lowp_cli_fail("--csv and --md name the same file '%s'", csv);

    check_writable("--csv", csv);
    check_writable("--md", md);

    char command[2048];
    size_t used = (size_t)snprintf(command, sizeof command, "lowp attn-sweep");
    for (int i = 1; i < argc && used < sizeof command; i++)
        used += (size_t)snprintf(command + used, sizeof command - used, " %s", argv[i]);
    char machine[512], commit[64];
    lowp_machine_description(machine, sizeof machine);
    lowp_source_commit(commit, sizeof commit);

    if (lowp_progress_wanted())
        o.progress = progress;
    lowp_sweep_result r;
    char why[512];
    if (lowp_sweep_run(&o, &r, why, sizeof why))
        lowp_cli_fail("attn-sweep: %s", why);

    if (strcmp(csv, "-") != 0 && strcmp(md, "-") != 0) {
        printf("# lowp attn-sweep: %.1f s on %s; format cost = quantized vs unquantized attention (binary64 "
               "reference); ref-oracle = |binary64 reference - MPFR oracle| where the oracle ran\n",
               r.seconds, machine);
        if (lowp_sweep_print_table(stdout, &r) || fflush(stdout) != 0)
            lowp_cli_fail("cannot write to standard output");
    }
    FILE *f = lowp_out_open(csv, 0);
    if (lowp_sweep_write_csv(f, &r))
        lowp_cli_fail("cannot write '%s'", csv);
    lowp_out_commit(f);
    f = lowp_out_open(md, 0);
    if (lowp_sweep_write_markdown(f, &r, command, machine, commit))
        lowp_cli_fail("cannot write '%s'", md);
    lowp_out_commit(f);
    lowp_sweep_result_free(&r);
    return LOWP_EXIT_OK;
}
