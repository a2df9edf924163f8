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
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "shard.h"
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
          "  --csv FILE, --md FILE  outputs ('-' for stdout replaces the table)\n"
          "  --shard K/N    run the (size, workload) cases i with i mod N = K, in the order above\n"
          "                 (0-based; auto: the MPI rank and size); needs --result, writes no CSV/MD\n"
          "  --result FILE  the run's deterministic result (JSON: every row, no times)\n"
          "  --merge A.json B.json ...  the shards' results: checked to be shards 0..N-1 of one run,\n"
          "                 then the CSV, MD and --result written as for one unsharded run (no times)\n",
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

/* ---- results (tools/shard.h): a unit is one (size, workload) case, in lowp_sweep_run's
 * order; its rows are all of lowp_sweep_row but the time ---------------------------------- */

#define COUNT_FIELDS(X)                                                                            \
    X(elements) X(blocks) X(nan_in) X(inf_in) X(saturated) X(flushed) X(nan_out) X(scale_zero)     \
        X(scale_subnormal) X(scale_nan)

static void counts_put(json_t *o, const char *pre, const lowp_quant_counts *c)
{
    char key[64];
#define PUT(f)                                                                                     \
    snprintf(key, sizeof key, "%s_%s", pre, #f);                                                   \
    lowp_json_set_u64(o, key, c->f);
    COUNT_FIELDS(PUT)
#undef PUT
}

static void counts_get(const json_t *o, const char *pre, lowp_quant_counts *c)
{
    char key[64];
#define GET(f)                                                                                     \
    snprintf(key, sizeof key, "%s_%s", pre, #f);                                                   \
    c->f = (size_t)lowp_json_u64(o, key);
    COUNT_FIELDS(GET)
#undef GET
}

/* (json key, lowp_sweep_row member): sizes, then doubles */
#define ROW_SIZES(X)                                                                               \
    X(q_len, shape.q_len) X(num_q_heads, shape.num_q_heads) X(num_kv_heads, shape.num_kv_heads)     \
        X(qk_dim, shape.qk_dim) X(vo_dim, shape.vo_dim) X(ctx, shape.ctx)                          \
            X(q_offset, shape.q_offset) X(config, config) X(err_rows, err.rows)                    \
                X(err_elements, err.elements) X(err_nonfinite, err.nonfinite)                      \
                    X(arith_outputs, arith_outputs) X(bound_outputs, bound_outputs)
#define ROW_DOUBLES(X)                                                                             \
    X(sm_scale, shape.sm_scale) X(rel_l2, err.rel_l2) X(max_abs, err.max_abs) X(cosine, err.cosine) \
        X(tv_mean, err.tv_mean) X(tv_max, err.tv_max) X(needle_p_ref, needle_p_ref)                \
            X(needle_p, needle_p) X(arith_max_abs, arith_max_abs) X(arith_rel, arith_rel)          \
                X(bound_max, bound_max)

static void row_put(json_t *list, const lowp_sweep_row *w)
{
    json_t *o = json_object();
    if (o == NULL || json_array_append_new(list, o) != 0)
        lowp_cli_fail("out of memory");
    lowp_json_set_str(o, "workload", lowp_workload_name(w->workload));
    lowp_json_set_i64(o, "head", w->head);
#define PUT_Z(k, m) lowp_json_set_u64(o, #k, w->m);
#define PUT_D(k, m) lowp_json_set_f64(o, #k, w->m);
    ROW_SIZES(PUT_Z)
    ROW_DOUBLES(PUT_D)
#undef PUT_Z
#undef PUT_D
    lowp_json_set_f64(o, "k_scale", (double)w->k_scale);
    lowp_json_set_f64(o, "v_scale", (double)w->v_scale);
    lowp_json_set_i64(o, "bound_held", w->bound_held); /* -1: not evaluated */
    counts_put(o, "k", &w->k_counts);
    counts_put(o, "v", &w->v_counts);
}

static void row_get(const json_t *o, lowp_sweep_row *w)
{
    memset(w, 0, sizeof *w);
    if (lowp_workload_parse(lowp_json_str(o, "workload"), &w->workload))
        lowp_cli_fail("merge: unknown workload '%s'", lowp_json_str(o, "workload"));
    w->head = (long)lowp_json_i64(o, "head");
#define GET_Z(k, m) w->m = (size_t)lowp_json_u64(o, #k);
#define GET_D(k, m) w->m = lowp_json_f64(o, #k);
    ROW_SIZES(GET_Z)
    ROW_DOUBLES(GET_D)
#undef GET_Z
#undef GET_D
    w->k_scale = (float)lowp_json_f64(o, "k_scale");
    w->v_scale = (float)lowp_json_f64(o, "v_scale");
    w->bound_held = (int)lowp_json_i64(o, "bound_held");
    counts_get(o, "k", &w->k_counts);
    counts_get(o, "v", &w->v_counts);
    w->seconds = NAN; /* not part of a result */
}

/* The options that choose the cases and their inputs. */
static json_t *sweep_args(const lowp_sweep_options *o)
{
    json_t *a = json_object();
    if (a == NULL)
        lowp_cli_fail("out of memory");
    char b[96], sizes[LOWP_SWEEP_MAX_SIZES * 96] = "";
    snprintf(b, sizeof b, "0x%llx", (unsigned long long)o->seed);
    lowp_json_set_str(a, "seed", b);
    lowp_json_set_u64(a, "qk_dim", o->qk_dim);
    lowp_json_set_u64(a, "vo_dim", o->vo_dim);
    for (size_t z = 0; z < o->n_sizes; z++) {
        const lowp_sweep_size *s = &o->sizes[z];
        snprintf(b, sizeof b, "%s%zu:%zu:%zu:%zu", z ? "," : "", s->ctx, s->q_len, s->num_q_heads, s->num_kv_heads);
        strcat(sizes, b);
    }
    lowp_json_set_str(a, "sizes", sizes);
    lowp_json_set_u64(a, "workloads", o->workloads);
    lowp_json_set_u64(a, "configs", o->n_configs);
    lowp_json_set_u64(a, "oracle_ctx", o->oracle_max_ctx);
    lowp_json_set_u64(a, "oracle_heads", o->oracle_kv_heads);
    return a;
}

/* Back from sweep_args (the configs are the defaults, as on the command line). */
static void sweep_from_args(const json_t *a, lowp_sweep_options *o)
{
    lowp_sweep_default_options(o);
    o->seed = lowp_cli_parse_seed("merge: seed", lowp_json_str(a, "seed"));
    o->qk_dim = (size_t)lowp_json_u64(a, "qk_dim");
    o->vo_dim = (size_t)lowp_json_u64(a, "vo_dim");
    o->workloads = (unsigned)lowp_json_u64(a, "workloads");
    o->oracle_max_ctx = (size_t)lowp_json_u64(a, "oracle_ctx");
    o->oracle_kv_heads = (size_t)lowp_json_u64(a, "oracle_heads");
    if (lowp_json_u64(a, "configs") != o->n_configs)
        lowp_cli_fail("merge: the results have %llu configs, this lowp %zu",
                      (unsigned long long)lowp_json_u64(a, "configs"), o->n_configs);
    const char *s = lowp_json_str(a, "sizes");
    o->n_sizes = 0;
    while (*s && o->n_sizes < LOWP_SWEEP_MAX_SIZES) {
        lowp_sweep_size *z = &o->sizes[o->n_sizes++];
        int used = 0;
        if (sscanf(s, "%zu:%zu:%zu:%zu%n", &z->ctx, &z->q_len, &z->num_q_heads, &z->num_kv_heads, &used) != 4)
            lowp_cli_fail("merge: bad sizes '%s'", lowp_json_str(a, "sizes"));
        s += used;
        s += *s == ',';
    }
}

/* The units of o in lowp_sweep_run's order: unit u is (size zs[u], workload ks[u]). */
static size_t sweep_units(const lowp_sweep_options *o, size_t *zs, int *ks)
{
    size_t n = 0;
    for (size_t z = 0; z < o->n_sizes; z++)
        for (int k = 0; k < LOWP_WORKLOAD_KIND_COUNT; k++)
            if ((o->workloads >> k) & 1u) {
                zs[n] = z;
                ks[n++] = k;
            }
    return n;
}

/* Append w to r's rows. */
static void push_row(lowp_sweep_result *r, const lowp_sweep_row *w)
{
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 256;
        lowp_sweep_row *nr = realloc(r->rows, r->cap * sizeof *nr);
        if (nr == NULL)
            lowp_cli_fail("out of memory");
        r->rows = nr;
    }
    r->rows[r->n++] = *w;
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
    int sizes_given = 0, contexts_given = 0, quick = 0, dim_given = 0, case_opts = 0, outs_given = 0;
    lowp_shard_opts so;
    lowp_shard_opts_init(&so, argc);
    char buf[1024];
    char *items[MAX_LIST];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--csv") == 0) {
            csv = lowp_cli_option_value(argc, argv, &i);
            outs_given = 1;
        } else if (strcmp(a, "--md") == 0) {
            md = lowp_cli_option_value(argc, argv, &i);
            outs_given = 1;
        } else if (lowp_shard_option(&so, argc, argv, &i))
            continue;
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
            case_opts = 1;
        } else if (strcmp(a, "--dim") == 0) {
            o.qk_dim = o.vo_dim = parse_size_t(a, lowp_cli_option_value(argc, argv, &i), 32, 1024);
            if (o.qk_dim % 32 != 0)
                lowp_cli_fail("--dim %zu: not a multiple of 32 (the MX block size)", o.qk_dim);
            dim_given = 1;
        } else if (strcmp(a, "--seed") == 0) {
            o.seed = lowp_cli_parse_seed("--seed", lowp_cli_option_value(argc, argv, &i));
            case_opts = 1;
        } else if (strcmp(a, "--oracle-ctx") == 0) {
            o.oracle_max_ctx = parse_size_t(a, lowp_cli_option_value(argc, argv, &i), 0, (size_t)1 << 24);
            case_opts = 1;
        } else if (strcmp(a, "--oracle-heads") == 0) {
            o.oracle_kv_heads = parse_size_t(a, lowp_cli_option_value(argc, argv, &i), 1, 1024);
            case_opts = 1;
        }
        else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            sweep_usage(stdout);
            lowp_shard_opts_free(&so);
            return LOWP_EXIT_OK;
        } else
            lowp_cli_fail("attn-sweep: unknown argument '%s' (see lowp attn-sweep --help)", a);
    }
    case_opts |= quick | sizes_given | contexts_given | dim_given;
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

    lowp_shard_opts_check(&so, "attn-sweep", case_opts);
    const lowp_shard shard = so.shard;
    const char *result = so.result;
    const int merge = so.merge;
    if (shard.n > 1 && outs_given)
        lowp_cli_fail("attn-sweep --shard: a shard writes no CSV or Markdown (attn-sweep --merge writes them)");
    int tables = shard.n == 1;
    if (tables) {
        check_writable("--csv", csv);
        check_writable("--md", md);
    }
    if (result != NULL) {
        check_writable("--result", result);
        if (tables && (strcmp(result, csv) == 0 || strcmp(result, md) == 0))
            lowp_cli_fail("--result names the same file as --csv or --md");
    }

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
    json_t *res = NULL;
    memset(&r, 0, sizeof r);
    if (merge) {
        res = lowp_result_merge("attn-sweep", so.files, so.n_files);
        sweep_from_args(lowp_result_args(res), &o);
        r.opt = o;
        r.seconds = NAN; /* results record no times */
        for (size_t u = 0; u < lowp_result_count(res); u++) {
            const json_t *rows = json_object_get(lowp_result_at(res, u), "rows");
            for (size_t x = 0; x < json_array_size(rows); x++) {
                lowp_sweep_row w;
                row_get(json_array_get(rows, x), &w);
                push_row(&r, &w);
            }
        }
        /* what a merged report can say the same whatever the shards ran on */
        snprintf(command, sizeof command, "lowp attn-sweep --merge (shard results)");
        snprintf(machine, sizeof machine, "not recorded (merged shard results)");
        snprintf(commit, sizeof commit, "not recorded");
    } else {
        /* every unit this shard owns is a sweep of its own: the same rows as in one sweep
         * (a case's inputs depend on the seed, workload and size only) */
        size_t zs[LOWP_SWEEP_MAX_SIZES * LOWP_WORKLOAD_KIND_COUNT];
        int ks[LOWP_SWEEP_MAX_SIZES * LOWP_WORKLOAD_KIND_COUNT];
        size_t units = sweep_units(&o, zs, ks);
        res = lowp_result_new("attn-sweep", sweep_args(&o), &shard, units);
        r.opt = o;
        for (size_t u = 0; u < units; u++) {
            if (!lowp_shard_mine(&shard, u))
                continue;
            lowp_sweep_options ou = o;
            ou.n_sizes = 1;
            ou.sizes[0] = o.sizes[zs[u]];
            ou.workloads = 1u << ks[u];
            lowp_sweep_result ru;
            if (lowp_sweep_run(&ou, &ru, why, sizeof why))
                lowp_cli_fail("attn-sweep: %s", why);
            json_t *rows = json_array();
            if (rows == NULL || json_object_set_new(lowp_result_unit(res, u), "rows", rows) != 0)
                lowp_cli_fail("out of memory");
            for (size_t x = 0; x < ru.n; x++) {
                row_put(rows, &ru.rows[x]);
                push_row(&r, &ru.rows[x]);
            }
            r.seconds += ru.seconds;
            lowp_sweep_result_free(&ru);
        }
    }
    if (result != NULL)
        lowp_result_write(res, result);
    json_decref(res);
    lowp_shard_opts_free(&so);
    if (!tables) {
        printf("attn-sweep: shard %zu/%zu: %zu rows in %.1f s; result %s\n", shard.k, shard.n, r.n, r.seconds,
               result);
        lowp_sweep_result_free(&r);
        return LOWP_EXIT_OK;
    }

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
