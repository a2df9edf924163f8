/* tools/vectors/common.c: helpers shared by the lowp vectors sub-commands (bits, hex,
 * options, file names, directories). */
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

float lowp_vec_f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

uint32_t lowp_vec_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

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

uint64_t lowp_vec_parse_seed(const char *s)
{
    char *end;
    errno = 0;
    if (*s == '\0' || *s == '-' || *s == '+' || *s == ' ')
        lowp_cli_fail("vectors: --seed '%s' is not a non-negative integer", s);
    unsigned long long v = strtoull(s, &end, 0);
    if (errno != 0 || *end != '\0')
        lowp_cli_fail("vectors: --seed '%s' is not an integer below 2^64 (decimal or 0x hex)", s);
    return (uint64_t)v;
}

long lowp_vec_parse_errors(const char *s)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || *end != '\0' || *s == '\0' || v < 0)
        lowp_cli_fail("vectors: --errors '%s' is not a non-negative integer", s);
    return v;
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
