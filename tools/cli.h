/* tools/cli.h: what every lowp subcommand shares.
 *
 * Error discipline (README "Bad input"): one line on stderr that names the problem,
 * exit status 2, and no output file left behind. Output files are written to a
 * temporary name beside the target and renamed only when complete. */
#ifndef LOWP_CLI_H
#define LOWP_CLI_H

#include <stdio.h>
#include <stddef.h>
#include <stdint.h>

#define LOWP_EXIT_OK 0
#define LOWP_EXIT_MISMATCH 1 /* a check ran and found a difference */
#define LOWP_EXIT_USAGE 2    /* bad input: nothing was written */

/* Print "lowp: <message>" and exit(2), first removing any pending output file. */
void lowp_cli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* An output that appears atomically: lowp_out_open gives a FILE* on "<path>.tmp.<pid>"
 * (or stdout when path is NULL or "-"); lowp_out_commit flushes, closes and renames. A
 * failure in between (lowp_cli_fail) unlinks the temporary. One pending output at a time. */
FILE *lowp_out_open(const char *path, int binary);
void lowp_out_commit(FILE *f);

/* The value of option argv[*i] (advancing *i), or a clear failure when it is missing. */
const char *lowp_cli_option_value(int argc, char **argv, int *i);

/* Read a whole file (or stdin for NULL / "-") into memory; fails with a clear line. */
unsigned char *lowp_read_all(const char *path, size_t *len);

/* True when stderr is a terminal: progress lines are shown only then. */
int lowp_progress_wanted(void);

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
/* Short git commit of the source tree lowp was built from, or "unknown". */
void lowp_source_commit(char *buf, size_t len);

/* Tensor input shared by stats and calibrate (tools/cli_input.c): lowp_cli_input_option
 * consumes argv[*i] (and its value) if it is an input option and returns 1; the loader
 * returns a malloc'd [T, H, D] binary32 tensor and a one-line description. */
int lowp_cli_input_option(int argc, char **argv, int *i);
float *lowp_cli_input_load(size_t shape[3], char *desc, size_t desc_len);
const char *lowp_cli_input_usage(void);


/* Shared by the attention commands (tools/cli_attn_io.c). */
const char *lowp_cli_need_value(int argc, char **argv, int *i);
size_t lowp_cli_parse_count(const char *opt, const char *s, int allow_zero);
double lowp_cli_parse_positive(const char *opt, const char *s);
double lowp_cli_parse_nonnegative(const char *opt, const char *s);
/* A finite float tensor of rank 3 (.npy / .safetensors, any float dtype), malloc'ed. */
float *lowp_cli_load_f32_3(const char *opt, const char *path, size_t dims[3], const char *expect);
/* A .npy vector of page indices (any integer dtype), each checked into int32. */
int32_t *lowp_cli_load_page_table(const char *path, size_t *n);
void lowp_cli_check_writable(const char *opt, const char *path);
void lowp_cli_write_npy_f32_3(const char *path, const float *x, size_t d0, size_t d1, size_t d2);

#endif
