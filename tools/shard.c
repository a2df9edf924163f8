/* tools/shard.c: results of sharded runs and their merge (tools/shard.h). */
#include "shard.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define RESULT_VERSION 1

static json_t *need(json_t *x)
{
    if (x == NULL)
        lowp_cli_fail("out of memory building a result");
    return x;
}

static void set(json_t *o, const char *key, json_t *v)
{
    if (json_object_set_new(o, key, need(v)) != 0)
        lowp_cli_fail("out of memory building a result");
}

void lowp_json_set_str(json_t *o, const char *key, const char *v)
{
    set(o, key, json_string(v));
}

void lowp_json_set_u64(json_t *o, const char *key, uint64_t v)
{
    /* json_int_t is long long: counts beyond 2^63 go as decimal strings */
    if (v <= (uint64_t)INT64_MAX) {
        set(o, key, json_integer((json_int_t)v));
        return;
    }
    char b[32];
    snprintf(b, sizeof b, "%" PRIu64, v);
    set(o, key, json_string(b));
}

void lowp_json_set_f64(json_t *o, const char *key, double v)
{
    char b[64];
    snprintf(b, sizeof b, "%a", v); /* exact, and NaN / Inf have a spelling */
    set(o, key, json_string(b));
}

void lowp_json_set_i64(json_t *o, const char *key, int64_t v)
{
    set(o, key, json_integer((json_int_t)v));
}

static const json_t *field(const json_t *o, const char *key)
{
    const json_t *v = json_is_object(o) ? json_object_get(o, key) : NULL;
    if (v == NULL)
        lowp_cli_fail("merge: a result has no field '%s'", key);
    return v;
}

const char *lowp_json_str(const json_t *o, const char *key)
{
    const json_t *v = field(o, key);
    if (!json_is_string(v))
        lowp_cli_fail("merge: field '%s' is not a string", key);
    return json_string_value(v);
}

uint64_t lowp_json_u64(const json_t *o, const char *key)
{
    const json_t *v = field(o, key);
    if (json_is_integer(v) && json_integer_value(v) >= 0)
        return (uint64_t)json_integer_value(v);
    if (json_is_string(v))
        return lowp_cli_parse_u64(key, json_string_value(v), 0, UINT64_MAX);
    lowp_cli_fail("merge: field '%s' is not a count", key);
}

int64_t lowp_json_i64(const json_t *o, const char *key)
{
    const json_t *v = field(o, key);
    if (!json_is_integer(v))
        lowp_cli_fail("merge: field '%s' is not an integer", key);
    return (int64_t)json_integer_value(v);
}

double lowp_json_f64(const json_t *o, const char *key)
{
    const char *s = lowp_json_str(o, key);
    char *end;
    double x = strtod(s, &end);
    if (*s == '\0' || *end != '\0')
        lowp_cli_fail("merge: field '%s' is '%.40s', not a number", key, s);
    return x;
}

void lowp_shard_opts_init(lowp_shard_opts *so, int argc)
{
    memset(so, 0, sizeof *so);
    so->shard = (lowp_shard){0, 1};
    so->files = calloc((size_t)(argc > 0 ? argc : 0) + 1, sizeof *so->files);
    if (so->files == NULL)
        lowp_cli_fail("out of memory");
}

void lowp_shard_opts_free(lowp_shard_opts *so)
{
    free(so->files);
    so->files = NULL;
    so->n_files = 0;
}

int lowp_shard_option(lowp_shard_opts *so, int argc, char **argv, int *i)
{
    const char *a = argv[*i];
    if (strcmp(a, "--shard") == 0)
        lowp_cli_parse_shard("--shard", lowp_cli_option_value(argc, argv, i), &so->shard.k, &so->shard.n);
    else if (strcmp(a, "--result") == 0)
        so->result = lowp_cli_option_value(argc, argv, i);
    else if (strcmp(a, "--merge") == 0)
        so->merge = 1;
    else if (so->merge && a[0] != '-')
        so->files[so->n_files++] = argv[*i]; /* at most argc - 1 of them */
    else
        return 0;
    return 1;
}

void lowp_shard_opts_check(const lowp_shard_opts *so, const char *command, int case_opts)
{
    if (so->merge && so->n_files == 0)
        lowp_cli_fail("%s --merge: no result files given", command);
    if (so->merge && (case_opts || so->shard.n > 1))
        lowp_cli_fail("%s --merge: the cases come from the results; case options and --shard do not apply", command);
    if (so->shard.n > 1 && so->result == NULL)
        lowp_cli_fail("%s --shard %zu/%zu: a shard writes only its result: give --result FILE", command, so->shard.k,
                      so->shard.n);
}

json_t *lowp_result_new(const char *command, json_t *args, const lowp_shard *sh, size_t units)
{
    json_t *r = need(json_object());
    char b[64];
    set(r, "lowp_result", json_integer(RESULT_VERSION));
    set(r, "command", json_string(command));
    set(r, "args", args);
    snprintf(b, sizeof b, "%zu/%zu", sh->k, sh->n);
    set(r, "shard", json_string(b));
    set(r, "units", json_integer((json_int_t)units));
    set(r, "results", json_array());
    return r;
}

json_t *lowp_result_unit(json_t *res, size_t u)
{
    json_t *o = need(json_object());
    set(o, "unit", json_integer((json_int_t)u));
    if (json_array_append_new(json_object_get(res, "results"), o) != 0)
        lowp_cli_fail("out of memory building a result");
    return o;
}

void lowp_result_write(const json_t *res, const char *path)
{
    FILE *f = lowp_out_open(path, 0);
    /* one key order (insertion), two-space indent, a final newline: the same bytes for
     * the same content, whoever writes it */
    if (json_dumpf(res, f, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII) != 0 ||
        fputc('\n', f) == EOF)
        lowp_cli_fail("cannot write the result '%s'", path);
    lowp_out_commit(f);
}

static json_t *load(const char *path)
{
    json_error_t err;
    json_t *r = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
    if (r == NULL)
        lowp_cli_fail("merge: '%s': %s (line %d)", path, err.text, err.line);
    const json_t *v = json_object_get(r, "lowp_result");
    if (!json_is_integer(v) || json_integer_value(v) != RESULT_VERSION)
        lowp_cli_fail("merge: '%s' is not a lowp result (version %d)", path, RESULT_VERSION);
    return r;
}

const char *lowp_result_file_command(const char *path, char *buf, size_t len)
{
    json_t *r = load(path);
    snprintf(buf, len, "%s", lowp_json_str(r, "command"));
    json_decref(r);
    return buf;
}

json_t *lowp_result_merge(const char *command, char *const *paths, size_t n)
{
    if (n == 0)
        lowp_cli_fail("merge: no result files given");
    json_t **parts = calloc(n, sizeof *parts);
    unsigned char *seen_shard = calloc(n, 1);
    if (parts == NULL || seen_shard == NULL)
        lowp_cli_fail("out of memory");
    size_t units = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *r = parts[i] = load(paths[i]);
        if (strcmp(lowp_json_str(r, "command"), command) != 0)
            lowp_cli_fail("merge: '%s' is a result of '%s', not of '%s'", paths[i],
                          lowp_json_str(r, "command"), command);
        size_t k, nn;
        lowp_cli_parse_shard("merge: shard", lowp_json_str(r, "shard"), &k, &nn);
        if (nn != n)
            lowp_cli_fail("merge: '%s' is shard %zu/%zu but %zu files were given", paths[i], k, nn, n);
        if (seen_shard[k])
            lowp_cli_fail("merge: '%s' is shard %zu/%zu again", paths[i], k, nn);
        seen_shard[k] = 1;
        size_t u = (size_t)lowp_json_u64(r, "units");
        if (i == 0)
            units = u;
        else if (u != units || !json_equal(json_object_get(r, "args"), json_object_get(parts[0], "args")))
            lowp_cli_fail("merge: '%s' and '%s' are not shards of one run (their options or units differ)",
                          paths[0], paths[i]);
    }
    const json_t **at = calloc(units ? units : 1, sizeof *at);
    if (at == NULL)
        lowp_cli_fail("out of memory");
    for (size_t i = 0; i < n; i++) {
        size_t k, nn;
        lowp_cli_parse_shard("merge: shard", lowp_json_str(parts[i], "shard"), &k, &nn);
        const json_t *list = json_object_get(parts[i], "results");
        if (!json_is_array(list))
            lowp_cli_fail("merge: '%s' has no results list", paths[i]);
        for (size_t x = 0; x < json_array_size(list); x++) {
            const json_t *o = json_array_get(list, x);
            uint64_t u = lowp_json_u64(o, "unit");
            if (u >= units || u % n != k)
                lowp_cli_fail("merge: '%s' holds unit %" PRIu64 ", which is not shard %zu/%zu's", paths[i], u,
                              k, n);
            if (at[u] != NULL)
                lowp_cli_fail("merge: unit %" PRIu64 " appears twice in '%s'", u, paths[i]);
            at[u] = o;
        }
    }
    for (size_t u = 0; u < units; u++)
        if (at[u] == NULL)
            lowp_cli_fail("merge: unit %zu of %zu is missing (from shard %zu/%zu's file)", u, units, u % n, n);
    lowp_shard one = {0, 1};
    json_t *m = lowp_result_new(command, need(json_deep_copy(json_object_get(parts[0], "args"))), &one, units);
    json_t *list = json_object_get(m, "results");
    for (size_t u = 0; u < units; u++)
        if (json_array_append_new(list, need(json_deep_copy(at[u]))) != 0)
            lowp_cli_fail("out of memory");
    free(at);
    for (size_t i = 0; i < n; i++)
        json_decref(parts[i]);
    free(parts);
    free(seen_shard);
    return m;
}

size_t lowp_result_count(const json_t *res)
{
    return json_array_size(json_object_get(res, "results"));
}

const json_t *lowp_result_at(const json_t *res, size_t u)
{
    return json_array_get(json_object_get(res, "results"), u);
}

const json_t *lowp_result_args(const json_t *res)
{
    return json_object_get(res, "args");
}
