/* tools/vectors/common.c: what the lowp vectors sub-commands share (bits, hex, options and
 * their parsing, file names, directories, reading text files line by line, the failure-line
 * limit, the codec combinations a vector set covers). */
#define _POSIX_C_SOURCE 200809L

#include "vectors/vectors.h"

#include "cli.h"
#include "lowp/block.h"
#include "lowp/cases.h"
#include "lowp/format.h"
#include "lowp/oracle_block.h"

#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

/* ---------------------------------------------------------------------------------
 * Small helpers. */


void *lowp_vec_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL)
        lowp_cli_fail("out of memory");
    return p;
}

void *lowp_vec_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (p == NULL)
        lowp_cli_fail("out of memory");
    return p;
}

/* Hex digits of a code of format f: 1 (e2m1), 2 (8-bit formats) or 4 (16-bit formats). */
int lowp_vec_code_digits(lowp_format f)
{
    return (int)(lowp_format_bits(f) + 3) / 4;
}

/* A number for a human: "464", "-0", "nan", "-inf", "1.40129846e-45". */
void lowp_vec_fmt_value(char *buf, size_t len, double v)
{
    if (isnan(v))
        snprintf(buf, len, "%snan", signbit(v) ? "-" : "");
    else if (isinf(v))
        snprintf(buf, len, "%sinf", v < 0 ? "-" : "");
    else
        snprintf(buf, len, "%.9g", v);
}

const char *lowp_vec_sat_name(int sat)
{
    return sat ? "sat" : "nosat";
}

/* "f32_to_e4m3.cuda.rn.sat" */
void lowp_vec_vec_name(char *buf, size_t len, lowp_format f, lowp_profile p, lowp_round r, int sat)
{
    snprintf(buf, len, VEC_OP_PREFIX "%s.%s.%s.%s", lowp_format_name(f), lowp_profile_name(p),
             lowp_round_name(r), lowp_vec_sat_name(sat));
}

/* "--name VALUE" or "--name=VALUE" at argv[*i]; returns the value or NULL if argv[*i] is
 * not this option. */
const char *lowp_vec_opt_value(int argc, char **argv, int *i, const char *name)
{
    size_t n = strlen(name);
    const char *a = argv[*i];
    if (strncmp(a, name, n) != 0)
        return NULL;
    if (a[n] == '=')
        return a + n + 1;
    if (a[n] != '\0')
        return NULL;
    if (*i + 1 >= argc)
        lowp_cli_fail("vectors: option %s needs a value", name);
    return argv[++*i];
}

/* A commit string is one printable token: it lands on one header line. */
int lowp_vec_commit_ok(const char *c)
{
    size_t n = strlen(c);
    if (n == 0 || n > 64)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (c[i] <= ' ' || c[i] > '~')
            return 0;
    return 1;
}


void lowp_vec_mkdir_p(const char *dir)
{
    char path[4096];
    if (strlen(dir) >= sizeof path)
        lowp_cli_fail("vectors: directory path is too long: %.64s...", dir);
    snprintf(path, sizeof path, "%s", dir);
    for (char *p = path + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(path, 0777) != 0 && errno != EEXIST)
                lowp_cli_fail("vectors: cannot create directory '%s': %s", path, strerror(errno));
            *p = c;
            if (c == '\0')
                break;
        }
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        lowp_cli_fail("vectors: '%s' is not a directory", dir);
}

void lowp_vec_name_list_add(name_list *l, const char *s)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 128;
        l->names = realloc(l->names, l->cap * sizeof *l->names);
        if (l->names == NULL)
            lowp_cli_fail("out of memory");
    }
    snprintf(l->names[l->n++], sizeof l->names[0], "%s", s);
}

int lowp_vec_name_list_has(const name_list *l, const char *s)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->names[i], s) == 0)
            return 1;
    return 0;
}

int lowp_vec_hexval(int ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* Exactly `digits` hex digits at s; returns the value or -1. */
long lowp_vec_hex_fixed(const char *s, int digits)
{
    long v = 0;
    for (int i = 0; i < digits; i++) {
        int h = lowp_vec_hexval((unsigned char)s[i]);
        if (h < 0)
            return -1;
        v = v * 16 + h;
    }
    return v;
}

int lowp_vec_cmp_names(const void *a, const void *b)
{
    return strcmp((const char *)a, (const char *)b);
}

/* ---------------------------------------------------------------------------------
 * Options: the three shapes the sub-commands take. Numbers go through the CLI's one parser
 * (tools/cli.h: decimal or 0x hex, the whole string, no sign). */

/* A --dir value the commands can build "DIR/NAME" paths from (4352-byte buffers). */
static const char *dir_value(const char *cmd, const char *v)
{
    if (*v == '\0')
        lowp_cli_fail("vectors %s: --dir is empty", cmd);
    if (strlen(v) > 3800)
        lowp_cli_fail("vectors %s: --dir path is too long", cmd);
    return v;
}

int lowp_vec_args(int argc, char **argv, const char *cmd, void (*usage)(FILE *),
                  const lowp_vec_opts *o)
{
    if (o->max_errors != NULL)
        *o->max_errors = VEC_ERRORS_DEFAULT;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 1;
        } else if (o->dir != NULL && (v = lowp_vec_opt_value(argc, argv, &i, "--dir")) != NULL) {
            *o->dir = dir_value(cmd, v);
        } else if (o->seed != NULL && (v = lowp_vec_opt_value(argc, argv, &i, "--seed")) != NULL) {
            *o->seed = lowp_cli_parse_seed("--seed", v);
        } else if (o->commit != NULL &&
                   (v = lowp_vec_opt_value(argc, argv, &i, "--commit")) != NULL) {
            if (!lowp_vec_commit_ok(v))
                lowp_cli_fail("vectors %s: --commit '%.80s' must be 1 to 64 printable "
                              "characters without spaces",
                              cmd, v);
            *o->commit = v;
        } else if (o->results != NULL &&
                   (v = lowp_vec_opt_value(argc, argv, &i, "--results")) != NULL) {
            *o->results = v;
        } else if (o->out != NULL && (v = lowp_vec_opt_value(argc, argv, &i, "--out")) != NULL) {
            *o->out = v;
        } else if (o->max_errors != NULL &&
                   (v = lowp_vec_opt_value(argc, argv, &i, "--errors")) != NULL) {
            *o->max_errors = (long)lowp_cli_parse_count("--errors", v, 1);
        } else if (o->nan_any != NULL && strcmp(argv[i], "--nan-any") == 0) {
            *o->nan_any = 1;
        } else if (o->file != NULL && (argv[i][0] != '-' || argv[i][1] == '\0')) {
            if (*o->file != NULL)
                lowp_cli_fail("vectors %s: one vector FILE at a time ('%s' is a second one)", cmd,
                              argv[i]);
            *o->file = argv[i];
        } else {
            lowp_cli_fail("vectors %s: unknown %s '%s' (try 'lowp vectors %s --help')", cmd,
                          argv[i][0] == '-' ? "option" : "argument", argv[i], cmd);
        }
    }
    if (o->file != NULL && *o->file == NULL)
        lowp_cli_fail("vectors %s: no vector FILE given (try 'lowp vectors %s --help')", cmd, cmd);
    if (o->results != NULL && *o->results == NULL)
        lowp_cli_fail("vectors %s: --results R is required", cmd);
    return 0;
}

int lowp_vec_gen_start(int argc, char **argv, const char *cmd, void (*usage)(FILE *),
                       const char **dir, uint64_t *seed, char *commit, size_t commit_len)
{
    const char *given = NULL;
    if (lowp_vec_args(argc, argv, cmd, usage,
                      &(lowp_vec_opts){.dir = dir, .seed = seed, .commit = &given}))
        return 1;
    if (given != NULL)
        snprintf(commit, commit_len, "%s", given);
    else
        lowp_source_commit(commit, commit_len);
    if (!lowp_vec_commit_ok(commit))
        snprintf(commit, commit_len, "unknown");
    lowp_vec_mkdir_p(*dir);
    return 0;
}

int lowp_vec_verify_start(int argc, char **argv, const char *cmd, void (*usage)(FILE *),
                          const char **dir, long *max_errors, int (*is_name)(const char *),
                          const char *what, name_list *present)
{
    if (lowp_vec_args(argc, argv, cmd, usage,
                      &(lowp_vec_opts){.dir = dir, .max_errors = max_errors}))
        return 1;
    if (lowp_vec_list_dir(present, *dir, is_name) != 0)
        lowp_cli_fail("vectors %s: cannot read directory '%s': %s", cmd, *dir, strerror(errno));
    if (present->n == 0)
        lowp_cli_fail("vectors %s: no %s files in '%s'", cmd, what, *dir);
    return 0;
}

/* ---------------------------------------------------------------------------------
 * Failure lines: at most max_errors of them (0: all), then one line for the rest. */

int lowp_vec_error_shown(long max_errors, size_t before)
{
    return max_errors == 0 || before < (size_t)max_errors;
}

void lowp_vec_more_not_shown(size_t n, long max_errors, const char *what)
{
    if (max_errors > 0 && n > (size_t)max_errors)
        printf("(%zu more %s not shown; --errors 0 shows all)\n", n - (size_t)max_errors, what);
}

/* ---------------------------------------------------------------------------------
 * Files and directories. */

void lowp_vec_base_name(char *buf, size_t len, const char *path, const char *ext)
{
    const char *base = strrchr(path, '/');
    snprintf(buf, len, "%s", base ? base + 1 : path);
    const size_t n = strlen(buf), e = strlen(ext);
    if (n > e && strcmp(buf + n - e, ext) == 0)
        buf[n - e] = '\0';
}

int lowp_vec_list_dir(name_list *out, const char *dir, int (*is_name)(const char *))
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return -1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (is_name(e->d_name))
            lowp_vec_name_list_add(out, e->d_name);
    closedir(d);
    if (out->n > 0)
        qsort(out->names, out->n, sizeof out->names[0], lowp_vec_cmp_names);
    return 0;
}

void lowp_vec_remove_stale(const char *dir, int (*is_name)(const char *), const name_list *written)
{
    name_list present = {0};
    if (lowp_vec_list_dir(&present, dir, is_name) == 0)
        for (size_t i = 0; i < present.n; i++) {
            if (lowp_vec_name_list_has(written, present.names[i]))
                continue;
            char path[4352];
            snprintf(path, sizeof path, "%s/%s", dir, present.names[i]);
            if (remove(path) == 0)
                printf("removed stale %s\n", path);
        }
    free(present.names);
}

char *lowp_vec_read_text(const char *path, size_t *len)
{
    unsigned char *buf = lowp_read_all(path, len);
    unsigned char *nb = realloc(buf, *len + 1);
    if (nb == NULL) {
        free(buf);
        lowp_cli_fail("out of memory");
    }
    nb[*len] = '\0';
    if (memchr(nb, '\0', *len) != NULL) {
        free(nb);
        lowp_cli_fail("%s: not a text file (contains a NUL byte)", path);
    }
    return (char *)nb;
}

char *lowp_vec_next_line(char **s, char *end, long *lineno)
{
    if (*s >= end)
        return NULL;
    char *line = *s, *nl = memchr(line, '\n', (size_t)(end - line));
    char *e = nl ? nl : end;
    *e = '\0';
    if (e > line && e[-1] == '\r')
        e[-1] = '\0';
    *s = nl ? nl + 1 : end;
    ++*lineno;
    return line;
}

/* ---------------------------------------------------------------------------------
 * The elementwise set: every (profile, rounding, saturation) lowp accepts for a format. */

size_t lowp_vec_codecs(lowp_format f, lowp_codec *out)
{
    size_t n = 0;
    for (int p = 0; p < LOWP_PROFILE_COUNT; p++)
        for (int r = 0; r < LOWP_ROUND_COUNT; r++)
            for (int sat = 1; sat >= 0; sat--)
                if (lowp_codec_init(&out[n], f, (lowp_profile)p, (lowp_round)r,
                                    sat ? LOWP_SAT_ON : LOWP_SAT_OFF, NULL, 0) == 0)
                    n++;
    return n;
}
