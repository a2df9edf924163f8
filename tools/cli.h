/* tools/cli.h: what every lowp subcommand shares.
 *
 * Error discipline (README "Bad input"): one line on stderr that names the problem,
 * exit status 2, and no output file left behind. Output files are written to a
 * temporary name beside the target and renamed only when complete (lowp_out_open). */
#ifndef LOWP_CLI_H
#define LOWP_CLI_H

#include <stdio.h>
#include <stddef.h>
#include <stdint.h>

#include "cli_parse.h" /* lowp_cli_fail, the number parsers */
#include "lowp/tensor.h"

#define LOWP_EXIT_OK 0
#define LOWP_EXIT_MISMATCH 1 /* a check ran and found a difference */
#define LOWP_EXIT_USAGE 2    /* bad input: nothing was written */


/* An output file. lowp_out_open gives stdout when path is NULL or "-"; otherwise what
 * happens depends on what is at the path (lstat):
 *   - nothing, or a regular file: written to "<path>.tmp.<pid>" and renamed onto the path
 *     by lowp_out_commit, so the file appears whole or not at all;
 *   - a symlink: resolved (realpath) and the target is treated as above, so the link
 *     itself stays and a regular target is replaced atomically; a dangling link, or one
 *     whose target is a directory, is refused;
 *   - a character device or FIFO (/dev/null, /dev/full, a pipe): written in place, never
 *     replaced; a write error (ENOSPC on /dev/full) fails with one line;
 *   - a directory, block device or socket: refused.
 * lowp_out_commit flushes and closes (and renames); a failure in between (lowp_cli_fail)
 * unlinks the temporary. One pending output at a time. lowp_out_check runs the same
 * classification without opening, so that a command can refuse a bad output path before
 * any work. */
FILE *lowp_out_open(const char *path, int binary);
void lowp_out_commit(FILE *f);
void lowp_out_check(const char *opt, const char *path);

/* An output must not be one of the inputs: fails with one line when out_path names the
 * same file as in_path (same st_dev and st_ino, so links and "./x" count). Either path
 * NULL, "-", or not existing yet passes. */
void lowp_cli_check_not_input(const char *out_opt, const char *out_path, const char *in_opt,
                              const char *in_path);

/* Two outputs of one run must differ: the same name, or the same existing regular file,
 * fails with one line (devices and FIFOs at the path are written in place and pass). */
void lowp_cli_check_distinct_outputs(const char *opt1, const char *path1, const char *opt2, const char *path2);

/* The value of option argv[*i] (advancing *i), or a clear failure when it is missing.
 * Every option taking a value is given at most once: a second occurrence of the same
 * option name in one run fails with a line naming it (the run's options are recorded,
 * up to 64 distinct names). */
const char *lowp_cli_option_value(int argc, char **argv, int *i);
/* The same for the few options documented as repeatable (attn-sweep --size). */
const char *lowp_cli_option_repeated(int argc, char **argv, int *i);

/* Mutually exclusive flags: *slot holds the flag of the group given so far (NULL at
 * first); a second flag of the group, the same or another one, fails with a line naming
 * both ("--no-saturate conflicts with --saturate"). */
void lowp_cli_flag_once(const char *flag, const char **slot);

/* Read a whole file (or stdin for NULL / "-") into memory; fails with a clear line. */
unsigned char *lowp_read_all(const char *path, size_t *len);

/* True when stderr is a terminal: progress lines are shown only then. */
int lowp_progress_wanted(void);
/* The progress line of a long command (tools/cli_progress.c): nothing at all unless
 * lowp_progress_wanted. lowp_progress_show rewrites one stderr line "lowp CMD: WHAT
 * done/total UNIT (rate UNIT/s, elapsed s)", the rate counted from the last
 * lowp_progress_phase (or init); at most about ten updates a second, always the last
 * (done == total). lowp_progress_end ends the line if one was shown. */
typedef struct lowp_progress {
    int on, shown;
    const char *cmd;
    double phase_t0, last;
} lowp_progress;
void lowp_progress_init(lowp_progress *p, const char *cmd);
void lowp_progress_phase(lowp_progress *p);
void lowp_progress_show(lowp_progress *p, size_t done, size_t total, const char *unit, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
void lowp_progress_end(lowp_progress *p);

/* Subcommands: tools/cmd_NAME.c defines
 *     int lowp_cmd_NAME(int argc, char **argv);    returns the exit status
 *     const char lowp_cmd_NAME_summary[];          one line for `lowp --help`
 * and the build lists it in the dispatch table (tools/CMakeLists.txt). A command file
 * starts with LOWP_COMMAND_DEFINE(NAME, "summary") to get both declared and the summary set. */
#define LOWP_COMMAND_DEFINE(name, summary)                                                         \
    int lowp_cmd_##name(int argc, char **argv);                                                    \
    extern const char lowp_cmd_##name##_summary[];                                                 \
    const char lowp_cmd_##name##_summary[] = summary

/* "<hostname>, <CPU model>, <N> cores" for report headers. */
void lowp_machine_description(char *buf, size_t len);
/* The Python interpreter lowp's helpers run under: $LOWP_PYTHON if set, else the virtual
 * environment tools/setup.sh made beside the source tree (.venv/bin/python, which has
 * numpy and ml_dtypes), else "python3" from PATH. */
void lowp_cli_python(char *buf, size_t len);
/* The x86-64 vector extensions this CPU has ("sse4.2 avx avx2 fma avx512f ..."), or a
 * phrase saying it has none of them; benchmarks print it beside their numbers. */
void lowp_cli_cpu_isa(char *buf, size_t len);
/* Short git commit of the source tree lowp was built from, or "unknown". */
void lowp_source_commit(char *buf, size_t len);

/* Tensor input shared by stats and calibrate (tools/cli_input.c): lowp_cli_input_option
 * consumes argv[*i] (and its value) if it is an input option and returns 1; the loader
 * returns a malloc'd [T, H, D] binary32 tensor and a one-line description. */
int lowp_cli_input_option(int argc, char **argv, int *i);
float *lowp_cli_input_load(size_t shape[3], char *desc, size_t desc_len);
const char *lowp_cli_input_usage(void);
/* A command's --help: its usage line, the input options, then its own options. */
void lowp_cli_input_print_usage(FILE *f, const char *usage_line, const char *options);
/* The --in path given, or NULL (for lowp_cli_check_not_input). */
const char *lowp_cli_input_path(void);
/* Their table outputs: --csv FILE and --json FILE ('-' is stdout, and then replaces the
 * text table). lowp_cli_table_option consumes argv[*i] (and its value) if it is one and
 * returns 1; lowp_cli_table_check runs the checks before any work (not both on stdout,
 * writable, not the --in file, distinct); lowp_cli_table_on_stdout says whether the text
 * table goes to stdout; lowp_cli_table_write writes the files. */
typedef struct lowp_cli_table_out {
    const char *csv, *json;
} lowp_cli_table_out;
struct lowp_stats_row;
int lowp_cli_table_option(int argc, char **argv, int *i, lowp_cli_table_out *o);
void lowp_cli_table_check(const lowp_cli_table_out *o);
int lowp_cli_table_on_stdout(const lowp_cli_table_out *o);
void lowp_cli_table_write(const lowp_cli_table_out *o, const struct lowp_stats_row *rows, size_t n);


/* Shared by the attention commands (tools/cli_attn_io.c). */
/* A finite float tensor of rank 3 (.npy / .safetensors, any float dtype), malloc'ed. */
float *lowp_cli_load_f32_3(const char *opt, const char *path, size_t dims[3], const char *expect);
/* A .npy vector of page indices (any integer dtype), each checked into int32. */
int32_t *lowp_cli_load_page_table(const char *path, size_t *n);
/* A tensor output path: the name ends in .npy or .safetensors (else refused) and
 * lowp_out_check passes. */
void lowp_cli_check_writable(const char *opt, const char *path);
/* x as a [d0, d1, d2] F32 tensor: .npy, or .safetensors with one tensor named "out", by
 * the path's extension. */
void lowp_cli_write_f32_3(const char *path, const float *x, size_t d0, size_t d1, size_t d2);
/* The same for any dtype and rank (one tensor "out"; .npy or .safetensors by the name). */
void lowp_cli_write_tensor(const char *path, lowp_dtype dt, const void *x, int ndim, const size_t *shape);

#endif
