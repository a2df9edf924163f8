/* tools/vectors/vectors.h: what the lowp vectors sub-commands (the files of tools/vectors/, dispatched
 * by tools/cmd_vectors.c) share. Private to the CLI; every name carries the lowp_vec_ prefix.
 * Bad input ends in lowp_cli_fail (one line, exit 2) unless a function says otherwise. */
#ifndef LOWP_VECTORS_H
#define LOWP_VECTORS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "lowp/bits.h"
#include "lowp/block.h"
#include "lowp/format.h"

#ifndef LOWP_VERSION
#define LOWP_VERSION "unknown" /* tools/CMakeLists.txt passes the project version */
#endif

#define VEC_ERRORS_DEFAULT 20L
#define VEC_OP_PREFIX "f32_to_"

#define BV_DEFAULT_DIR "vectors/block"
#define BV_MAX 32     /* elements of one test: one block (16 or 32), or 16 elements */
#define BV_SCHEMA "lowp_block_vectors_v1"

typedef struct {
    char (*names)[96];
    size_t n, cap;
} name_list;

/* ---- a vector file in memory ---- */

typedef struct {
    long id;
    long line; /* of its "tcId" key; 0 when the file's keys did not allow finding it */
    int n;
    float x[BV_MAX];
    uint8_t scale[BV_MAX];
    uint16_t code[BV_MAX];
    char flags[256];
    size_t group;
} bv_vtest;

typedef struct {
    lowp_global_scale gs;
    unsigned qflags;
} bv_vgroup;

typedef struct {
    const char *path;
    char name[128];
    lowp_block_format f;
    lowp_recipe r;
    bv_vgroup *g;
    size_t ng;
    bv_vtest *t;
    size_t nt;
} bv_vfile;

/* common.c: allocation that fails with one line, options, hex, file names,
 * directories, text files line by line, the failure-line limit, codec combinations
 * (bit casts: lowp/bits.h) */
void *lowp_vec_xmalloc(size_t n);
void *lowp_vec_xcalloc(size_t n, size_t size);
int lowp_vec_code_digits(lowp_format f);
void lowp_vec_fmt_value(char *buf, size_t len, double v);
const char *lowp_vec_sat_name(int sat);
void lowp_vec_vec_name(char *buf, size_t len, lowp_format f, lowp_profile p, lowp_round r, int sat);
const char *lowp_vec_opt_value(int argc, char **argv, int *i, const char *name);
int lowp_vec_commit_ok(const char *c);
void lowp_vec_mkdir_p(const char *dir);
void lowp_vec_name_list_add(name_list *l, const char *s);
int lowp_vec_name_list_has(const name_list *l, const char *s);
int lowp_vec_hexval(int ch);
long lowp_vec_hex_fixed(const char *s, int digits);
int lowp_vec_cmp_names(const void *a, const void *b);

/* The options of a sub-command: each non-NULL pointer names one it takes and receives its
 * value (holding the default on entry, except max_errors, set to VEC_ERRORS_DEFAULT):
 *   --dir DIR     not empty, at most 3800 bytes (paths "DIR/NAME" fit 4352-byte buffers)
 *   --seed S      lowp_cli_parse_seed (decimal or 0x hex)
 *   --commit C    lowp_vec_commit_ok
 *   --results R   required when asked for
 *   --out R       an output path (lowp_out_open: "-" or absent is standard output)
 *   --errors N    0 .. 2^40 (0: every failure line)
 *   --nan-any     a flag
 *   FILE          one positional argument ("-" included), required when asked for
 * Returns 1 when --help printed the usage (the command then exits 0), else 0; anything
 * else (an unknown option, a bad value, a second FILE) fails with one line. */
typedef struct {
    const char **dir;
    uint64_t *seed;
    const char **commit;
    const char **results;
    const char **out;
    long *max_errors;
    int *nan_any;
    const char **file;
} lowp_vec_opts;
int lowp_vec_args(int argc, char **argv, const char *cmd, void (*usage)(FILE *),
                  const lowp_vec_opts *o);
/* How gen and gen-block start: --dir, --seed, --commit (lowp_vec_args; *dir and *seed hold
 * the defaults), the commit the files record into commit (the one given, else the source
 * tree's, else "unknown"), and DIR created. Returns 1 after --help, else 0. */
int lowp_vec_gen_start(int argc, char **argv, const char *cmd, void (*usage)(FILE *),
                       const char **dir, uint64_t *seed, char *commit, size_t commit_len);
/* How verify and verify-block start: --dir, --errors (lowp_vec_args), then the names of the
 * files in DIR that is_name accepts, sorted, into present; a DIR that cannot be read, or
 * holds none of them (what says which: "*.json"), fails with one line. Returns 1 after
 * --help, else 0. */
int lowp_vec_verify_start(int argc, char **argv, const char *cmd, void (*usage)(FILE *),
                          const char **dir, long *max_errors, int (*is_name)(const char *),
                          const char *what, name_list *present);

/* Failure lines: whether the one after `before` others is printed (max_errors 0: all), and
 * the closing "(N more WHAT not shown; --errors 0 shows all)" when n passed the limit. */
int lowp_vec_error_shown(long max_errors, size_t before);
void lowp_vec_more_not_shown(size_t n, long max_errors, const char *what);

/* path without its directory and without the ending ext (kept when it does not end so). */
void lowp_vec_base_name(char *buf, size_t len, const char *path, const char *ext);
/* The names in dir for which is_name holds, added to out, sorted; -1 (errno set) when dir
 * cannot be opened. */
int lowp_vec_list_dir(name_list *out, const char *dir, int (*is_name)(const char *));
/* Remove the files of dir that is_name accepts and written does not hold, one line each
 * (a gen run leaves exactly the set it wrote). A dir that cannot be read is left alone. */
void lowp_vec_remove_stale(const char *dir, int (*is_name)(const char *), const name_list *written);
/* A whole text file (or stdin for "-"), NUL-terminated, *len bytes; a NUL byte inside, or
 * a read error, fails with one line. The caller frees it. */
char *lowp_vec_read_text(const char *path, size_t *len);
/* The next line of [*s, end) with its '\n' (and a '\r' before it) replaced by NUL; advances
 * *s and counts *lineno. NULL at the end. */
char *lowp_vec_next_line(char **s, char *end, long *lineno);

/* Every codec lowp accepts for format f, in the order the vector files are written
 * (profile, rounding mode, saturation on then off); out holds VEC_MAX_CODECS. */
#define VEC_MAX_CODECS (LOWP_PROFILE_COUNT * LOWP_ROUND_COUNT * 2)
size_t lowp_vec_codecs(lowp_format f, lowp_codec *out);
/* elementwise.c */
int lowp_vec_cmd_gen(int argc, char **argv);
int lowp_vec_cmd_check(int argc, char **argv);
int lowp_vec_cmd_verify(int argc, char **argv);
/* block_gen.c: "<format>.<recipe>.json", and whether a name has that form */
void lowp_vec_bv_file_name(char *buf, size_t len, lowp_block_format f, lowp_recipe r);
int lowp_vec_bv_is_file_name(const char *s);
int lowp_vec_cmd_gen_block(int argc, char **argv);
/* block_read.c: lowp_vec_bv_read returns 0, or -1 with one line in why and V freed (the
 * caller frees what it holds, then fails) */
void lowp_vec_bv_vfile_free(bv_vfile *V);
int lowp_vec_bv_read(bv_vfile *V, const char *path, char *why, size_t why_len);
/* block_check.c */
int lowp_vec_cmd_check_block(int argc, char **argv);
int lowp_vec_cmd_run_block(int argc, char **argv);
int lowp_vec_cmd_verify_block(int argc, char **argv);

#endif
