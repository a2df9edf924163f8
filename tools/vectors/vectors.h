/* tools/vectors/vectors.h: what the lowp vectors sub-commands (the files of tools/vectors/, dispatched
 * by tools/cmd_vectors.c) share. Private to the CLI; every name carries the lowp_vec_ prefix.
 * Bad input ends in lowp_cli_fail (one line, exit 2) unless a function says otherwise. */
#ifndef LOWP_VECTORS_H
#define LOWP_VECTORS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

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

/* common.c: bits, allocation that fails with one line, option and number parsing,
 * hex, file names, directories */
float lowp_vec_f32_from_bits(uint32_t u);
uint32_t lowp_vec_f32_bits(float f);
void *lowp_vec_xmalloc(size_t n);
void *lowp_vec_xcalloc(size_t n, size_t size);
int lowp_vec_code_digits(lowp_format f);
void lowp_vec_fmt_value(char *buf, size_t len, double v);
const char *lowp_vec_sat_name(int sat);
void lowp_vec_vec_name(char *buf, size_t len, lowp_format f, lowp_profile p, lowp_round r, int sat);
const char *lowp_vec_opt_value(int argc, char **argv, int *i, const char *name);
uint64_t lowp_vec_parse_seed(const char *s);
long lowp_vec_parse_errors(const char *s);
int lowp_vec_commit_ok(const char *c);
void lowp_vec_mkdir_p(const char *dir);
void lowp_vec_name_list_add(name_list *l, const char *s);
int lowp_vec_name_list_has(const name_list *l, const char *s);
int lowp_vec_hexval(int ch);
long lowp_vec_hex_fixed(const char *s, int digits);
int lowp_vec_cmp_names(const void *a, const void *b);
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
