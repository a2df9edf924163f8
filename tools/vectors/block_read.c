/* tools/vectors/block_read.c: reading a block vector file (JSON, through jansson) into a
 * bv_vfile, with lowp's limits and one-line reasons. */
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
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

/* ---- reading: JSON through jansson, inside lowp's limits ---- */

/* Vector files nest 6 deep (root, testGroups, a group, its tests, a test, a test's arrays);
 * the limit, 64, is the one lowp's former parser of these files had. */
#define BV_JSON_MAX_DEPTH 64

/* The raw text, scanned once before jansson parses it (jansson keeps no positions): the
 * nesting depth, and the line of every "tcId" key in document order, for messages. Strings
 * are skipped with their escapes; a key is a string followed by ':' (in valid JSON a value
 * string never is). Returns 0, or -1 with why set when the depth passes the limit. */
static int bv_scan(const char *s, size_t n, long **lines, size_t *n_lines, char *why,
                   size_t why_len)
{
    int depth = 0;
    long line = 1;
    size_t cap = 0;
    *lines = NULL;
    *n_lines = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '\n') {
            line++;
        } else if (c == '[' || c == '{') {
            if (++depth > BV_JSON_MAX_DEPTH) {
                snprintf(why, why_len, "line %ld: JSON nested deeper than %d levels", line,
                         BV_JSON_MAX_DEPTH);
                free(*lines);
                *lines = NULL;
                return -1;
            }
        } else if (c == ']' || c == '}') {
            depth--;
        } else if (c == '"') {
            size_t start = ++i;
            while (i < n && s[i] != '"' && s[i] != '\n')
                i += s[i] == '\\' ? 2 : 1;
            if (i >= n || s[i] == '\n') { /* not a string jansson accepts: it reports it */
                if (i < n)
                    line++;
                continue;
            }
            size_t j = i + 1;
            while (j < n && (s[j] == ' ' || s[j] == '\t' || s[j] == '\r' || s[j] == '\n'))
                j++;
            if (i - start == 4 && memcmp(s + start, "tcId", 4) == 0 && j < n && s[j] == ':') {
                if (*n_lines == cap) {
                    cap = cap ? 2 * cap : 256;
                    long *nl = realloc(*lines, cap * sizeof *nl);
                    if (nl == NULL) {
                        free(*lines);
                        *lines = NULL;
                        snprintf(why, why_len, "out of memory");
                        return -1;
                    }
                    *lines = nl;
                }
                (*lines)[(*n_lines)++] = line;
            }
        }
    }
    return 0;
}

void lowp_vec_bv_vfile_free(bv_vfile *V)
{
    free(V->g);
    free(V->t);
    V->g = NULL;
    V->t = NULL;
}

/* A string of exactly `digits` hex digits, as *out; -1 otherwise. */
static int bv_hex_str(const json_t *j, int digits, uint32_t *out)
{
    if (!json_is_string(j) || json_string_length(j) != (size_t)digits ||
        lowp_vec_hex_fixed(json_string_value(j), digits) < 0)
        return -1;
    *out = (uint32_t)lowp_vec_hex_fixed(json_string_value(j), digits);
    return 0;
}

/* Fill V from the text of a vector file (buf, len); path names it in messages. Returns 0,
 * or -1 with one line in why and V freed: the caller frees what it holds and fails, so
 * that nothing is left allocated on the exit-2 path. */
static int bv_parse(bv_vfile *V, const char *path, const char *buf, size_t len, char *why,
                    size_t why_len)
{
#define BV_FAIL(...)                                                                           \
    do {                                                                                       \
        char msg_[400];                                                                        \
        snprintf(msg_, sizeof msg_, __VA_ARGS__);                                              \
        snprintf(why, why_len, "%s%s", path, msg_);                                            \
        goto fail;                                                                             \
    } while (0)
    json_t *root = NULL;
    long *lines = NULL;
    size_t n_lines = 0;
    char scan_why[128];
    if (memchr(buf, '\0', len) != NULL)
        BV_FAIL(": not a text file (contains a NUL byte)");
    if (bv_scan(buf, len, &lines, &n_lines, scan_why, sizeof scan_why))
        BV_FAIL(" %s", scan_why);
    /* JSON_REJECT_DUPLICATES: a key twice in one object is an error, not a silent pick */
    json_error_t err;
    root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &err);
    if (root == NULL) {
        for (char *c = err.text; *c != '\0'; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f)
                *c = '?';
        BV_FAIL(" line %d column %d: %s", err.line, err.column, err.text);
    }
    const json_t *fs = json_object_get(root, "format"), *rs = json_object_get(root, "recipe"),
                 *sc = json_object_get(root, "schema");
    if (!json_is_string(sc) || strcmp(json_string_value(sc), BV_SCHEMA) != 0)
        BV_FAIL(": not a lowp block vector file (\"schema\" is not \"" BV_SCHEMA "\")");
    if (!json_is_string(fs) || lowp_block_format_parse(json_string_value(fs), &V->f) != 0)
        BV_FAIL(": missing or unknown \"format\"");
    if (!json_is_string(rs) || lowp_recipe_parse(json_string_value(rs), &V->r) != 0)
        BV_FAIL(": missing or unknown \"recipe\"");
    const json_t *groups = json_object_get(root, "testGroups");
    if (!json_is_array(groups))
        BV_FAIL(": no \"testGroups\" array");
    size_t bs = lowp_oracle_block_size(V->f);
    int d = lowp_vec_code_digits(lowp_block_element_format(V->f)), has_scale = lowp_block_has_scales(V->f);
    size_t ng = json_array_size(groups), cap = 64;
    V->g = calloc(ng ? ng : 1, sizeof *V->g);
    V->t = malloc(cap * sizeof *V->t);
    if (V->g == NULL || V->t == NULL)
        BV_FAIL(": out of memory");
    V->ng = ng;
    for (size_t gi = 0; gi < ng; gi++) {
        const json_t *g = json_array_get(groups, gi), *v;
        bv_vgroup *vg = &V->g[gi];
        uint32_t bits;
        vg->gs.dec = vg->gs.enc = 1.0f;
        if ((v = json_object_get(g, "globalScaleDec")) != NULL) {
            if (bv_hex_str(v, 8, &bits))
                BV_FAIL(" test group %zu: globalScaleDec must be a string of 8 hex digits", gi + 1);
            vg->gs.dec = lowp_f32_from_bits(bits);
        }
        if ((v = json_object_get(g, "globalScaleEnc")) != NULL) {
            if (bv_hex_str(v, 8, &bits))
                BV_FAIL(" test group %zu: globalScaleEnc must be a string of 8 hex digits", gi + 1);
            vg->gs.enc = lowp_f32_from_bits(bits);
        }
        if (json_is_true(json_object_get(g, "scaleUp")))
            vg->qflags = LOWP_BLOCK_SCALE_UP;
        const json_t *tests = json_object_get(g, "tests");
        if (!json_is_array(tests))
            BV_FAIL(" test group %zu: no \"tests\" array", gi + 1);
        for (size_t ti = 0; ti < json_array_size(tests); ti++) {
            const json_t *t = json_array_get(tests, ti);
            if (V->nt == cap) {
                cap *= 2;
                bv_vtest *nt = realloc(V->t, cap * sizeof *V->t);
                if (nt == NULL)
                    BV_FAIL(": out of memory");
                V->t = nt;
            }
            bv_vtest *vt = &V->t[V->nt++];
            memset(vt, 0, sizeof *vt);
            vt->group = gi;
            const json_t *id = json_object_get(t, "tcId"), *in = json_object_get(t, "input"),
                         *co = json_object_get(t, "codes"), *scn = json_object_get(t, "scales"),
                         *fl = json_object_get(t, "flags");
            if (!json_is_integer(id) || json_integer_value(id) < 1 ||
                json_integer_value(id) > LONG_MAX)
                BV_FAIL(" test %zu of group %zu: no positive integer \"tcId\"", ti + 1, gi + 1);
            vt->id = (long)json_integer_value(id);
            size_t n = json_array_size(in);
            if (!json_is_array(in) || n == 0 || n > BV_MAX || n % bs != 0)
                BV_FAIL(" tcId %ld: \"input\" must hold 1 to %d elements, a multiple of the block "
                        "size %zu", vt->id, BV_MAX, bs);
            vt->n = (int)n;
            if (!json_is_array(co) || json_array_size(co) != n)
                BV_FAIL(" tcId %ld: \"codes\" must have one code per input", vt->id);
            for (int i = 0; i < vt->n; i++) {
                uint32_t code;
                if (bv_hex_str(json_array_get(in, (size_t)i), 8, &bits))
                    BV_FAIL(" tcId %ld: an input must be a string of 8 hex digits", vt->id);
                if (bv_hex_str(json_array_get(co, (size_t)i), d, &code))
                    BV_FAIL(" tcId %ld: a code must be a string of %d hex digits", vt->id, d);
                vt->x[i] = lowp_f32_from_bits(bits);
                vt->code[i] = (uint16_t)code;
            }
            if (has_scale) {
                if (!json_is_array(scn) || json_array_size(scn) != n / bs)
                    BV_FAIL(" tcId %ld: \"scales\" must have one code per block", vt->id);
                for (size_t b = 0; b < n / bs; b++) {
                    if (bv_hex_str(json_array_get(scn, b), 2, &bits))
                        BV_FAIL(" tcId %ld: a scale code must be a string of 2 hex digits", vt->id);
                    vt->scale[b] = (uint8_t)bits;
                }
            }
            /* flags are UTF-8 as jansson decoded them (\u escapes, surrogate pairs); the
             * ones that do not fit in vt->flags are left out */
            for (size_t k = 0; json_is_array(fl) && k < json_array_size(fl); k++) {
                const json_t *f = json_array_get(fl, k);
                if (json_is_string(f) &&
                    strlen(vt->flags) + json_string_length(f) + 2 < sizeof vt->flags) {
                    if (vt->flags[0])
                        strcat(vt->flags, " ");
                    strcat(vt->flags, json_string_value(f));
                }
            }
            for (size_t k = 0; k + 1 < V->nt; k++)
                if (V->t[k].id == vt->id)
                    BV_FAIL(" tcId %ld appears twice", vt->id);
        }
    }
    const json_t *nt = json_object_get(root, "numberOfTests");
    if (!json_is_integer(nt) || json_integer_value(nt) < 0 ||
        (size_t)json_integer_value(nt) != V->nt)
        BV_FAIL(": \"numberOfTests\" does not match the %zu tests (truncated?)", V->nt);
    /* lines for messages: only when every test's "tcId" key was found, in order */
    for (size_t k = 0; n_lines == V->nt && k < V->nt; k++)
        V->t[k].line = lines[k];
    free(lines);
    json_decref(root);
    return 0;
fail:
    free(lines);
    json_decref(root);
    lowp_vec_bv_vfile_free(V);
    return -1;
#undef BV_FAIL
}

/* Read a vector file; on bad input, 0 is not returned: -1 with why set and V freed. */
int lowp_vec_bv_read(bv_vfile *V, const char *path, char *why, size_t why_len)
{
    memset(V, 0, sizeof *V);
    V->path = path;
    lowp_vec_base_name(V->name, sizeof V->name, path, ".json");
    size_t len;
    unsigned char *buf = lowp_read_all(path, &len);
    int rc = bv_parse(V, path, (const char *)buf, len, why, why_len);
    free(buf);
    return rc;
}
