/* tools/cli_parse.h: the one number parser (and the failure line it ends with) shared by the
 * lowp CLI (tools/cli.h includes this) and the stand-alone GPU check programs under gpu/. */
#ifndef LOWP_CLI_PARSE_H
#define LOWP_CLI_PARSE_H

#include <stddef.h>
#include <stdint.h>

/* Print "<program>: <message>" on stderr and exit(2). The lowp CLI's (tools/cli.c) says
 * "lowp" and first removes any pending output file; the check programs' (tools/cli_fail.c)
 * names the program. */
void lowp_cli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* Numbers: one parser for every integer on the command line and in LOWP_SEED.
 * Accepted: decimal digits (leading zeros stay decimal: "010" is 10) or "0x"/"0X" and hex
 * digits; nothing else - no sign, no spaces, no empty string, no fraction or exponent
 * ("1e400", "5x", "abc" are refused). A value above 2^64 - 1 is refused, never clamped, and
 * so is one outside [lo, hi]; the line names opt, the text and the range. */
uint64_t lowp_cli_parse_u64(const char *opt, const char *s, uint64_t lo, uint64_t hi);
/* A signed integer: an optional '-' and then the same syntax; lo > -2^63. */
int64_t lowp_cli_parse_i64(const char *opt, const char *s, int64_t lo, int64_t hi);
/* A seed: any 64-bit value. */
uint64_t lowp_cli_parse_seed(const char *opt, const char *s);
/* A count or index in [allow_zero ? 0 : 1, 2^40]. */
size_t lowp_cli_parse_count(const char *opt, const char *s, int allow_zero);
/* Finite binary64 values (strtod syntax, whole string) > 0 or >= 0. */
double lowp_cli_parse_positive(const char *opt, const char *s);
double lowp_cli_parse_nonnegative(const char *opt, const char *s);
/* "A,B,C": min_n to max_n comma-separated integers, each in [lo, hi], into out (max_n
 * entries); returns how many. "16x,1,16", "1,,2", "1,2," and a wrong count are refused. */
size_t lowp_cli_parse_list(const char *opt, const char *s, size_t min_n, size_t max_n, uint64_t lo, uint64_t hi,
                           uint64_t *out);

/* "K/N": shard K of N, 0-based (0 <= K < N <= 2^20), both parsed by lowp_cli_parse_u64
 * (so "0x1/4" is shard 1 of 4). "auto": K and N from the environment (lowp_cli_env_shard);
 * none set is an error naming the variables. */
void lowp_cli_parse_shard(const char *opt, const char *s, size_t *k, size_t *n);

/* This process's shard from the launcher's environment: the rank r of R from
 * OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE (Open MPI), else PMI_RANK / PMI_SIZE (MPICH,
 * Intel MPI), else SLURM_PROCID / SLURM_NTASKS (srun), r = 0 and R = 1 if none is set; and
 * a Slurm job array's task a of A (SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN of
 * SLURM_ARRAY_TASK_COUNT; a = 0, A = 1 outside an array; an array that is not contiguous
 * of step 1 is an error). Shard K = a*R + r of N = A*R: each array task runs R ranks, and
 * every (task, rank) pair has its own shard. Returns 0 (K, N untouched) when neither a rank
 * nor an array task is set. Each value is parsed by lowp_cli_parse_u64. */
int lowp_cli_env_shard(size_t *k, size_t *n);

#endif
