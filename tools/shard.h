/* tools/shard.h: sharded runs (--shard K/N) and the merge of their results.
 *
 * A long command splits its work into units, numbered 0..units-1 in the order one
 * unsharded run does them (a conform case set, a gpu conform configuration, an attn-sweep
 * (size, workload) case). Shard K of N (0-based) runs the units u with u mod N == K; a
 * unit's inputs depend on the seed and the unit only, never on which other units ran, so a
 * unit gives the same outcome in any shard. Each run can write its result (--result FILE):
 *
 *   {"lowp_result": 1, "command": C, "args": {the options that choose the units and their
 *    inputs}, "shard": "K/N", "units": U, "results": [{"unit": u, ...}, ...]}
 *
 * holding only what is deterministic (no times, machine or date; doubles as C99 hex
 * floats, so that NaN, Inf and every bit survive). The merge (each command's --merge, or
 * `lowp merge`) checks that the N files are shards 0..N-1 of one run (same command, args,
 * N and units; every unit exactly once, each in its own shard), and writes the units in
 * order with "shard": "0/1": byte for byte what one unsharded run writes. */
#ifndef LOWP_SHARD_H
#define LOWP_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

typedef struct lowp_shard {
    size_t k, n; /* 0 <= k < n */
} lowp_shard;

/* Whether unit u is this shard's. */
static inline int lowp_shard_mine(const lowp_shard *s, size_t u)
{
    return u % s->n == s->k;
}

/* The options a sharded command takes: --shard K/N (or auto), --result FILE, --merge A.json
 * B.json ... (every argument after --merge that is no option is a result file). */
typedef struct lowp_shard_opts {
    lowp_shard shard;   /* {0, 1} unless --shard */
    const char *result; /* --result, or NULL */
    int merge;
    char **files;       /* --merge's files (argv entries), n_files of them */
    size_t n_files;
} lowp_shard_opts;

/* No options yet, room for argc files. Out of memory ends the program. */
void lowp_shard_opts_init(lowp_shard_opts *so, int argc);
void lowp_shard_opts_free(lowp_shard_opts *so);
/* 1 when argv[*i] is one of them (its value taken, *i advanced past it), else 0. */
int lowp_shard_option(lowp_shard_opts *so, int argc, char **argv, int *i);
/* Their rules, each broken one with one line naming command, exit 2: --merge needs files
 * and takes neither --shard nor an option that chooses the cases (case_opts != 0); a shard
 * (N > 1) writes only its result, so it needs --result. */
void lowp_shard_opts_check(const lowp_shard_opts *so, const char *command, int case_opts);

/* A new result of command over units units; args (an object, stolen) holds the options
 * that determine them. Out of memory ends the program (lowp_cli_fail). */
json_t *lowp_result_new(const char *command, json_t *args, const lowp_shard *sh, size_t units);
/* The object of unit u, appended to the results (units are appended in increasing order);
 * its fields follow "unit". */
json_t *lowp_result_unit(json_t *res, size_t u);
/* Field setters of a unit (or args) object; out of memory ends the program. */
void lowp_json_set_str(json_t *o, const char *key, const char *v);
void lowp_json_set_u64(json_t *o, const char *key, uint64_t v);
void lowp_json_set_f64(json_t *o, const char *key, double v); /* as "%a" */
void lowp_json_set_i64(json_t *o, const char *key, int64_t v);
/* Field getters for a merged result: a missing or mistyped field ends the program with a
 * line naming the key (results are written by lowp; a hand-edited one is bad input). */
const char *lowp_json_str(const json_t *o, const char *key);
uint64_t lowp_json_u64(const json_t *o, const char *key);
double lowp_json_f64(const json_t *o, const char *key);
int64_t lowp_json_i64(const json_t *o, const char *key);

/* Write res to path (lowp_out_open: whole or not at all; "-" is stdout). */
void lowp_result_write(const json_t *res, const char *path);

/* Load the n result files of command, check that they are the shards of one run and
 * return the merged result ("shard": "0/1", every unit in order). Bad input ends the
 * program with one line naming the file. */
json_t *lowp_result_merge(const char *command, char *const *paths, size_t n);
/* The merged result's units: results[u] is unit u. */
size_t lowp_result_count(const json_t *res);
const json_t *lowp_result_at(const json_t *res, size_t u);
const json_t *lowp_result_args(const json_t *res);

/* The command a result file was written by (for `lowp merge`), or a failure line. */
const char *lowp_result_file_command(const char *path, char *buf, size_t len);

#endif
