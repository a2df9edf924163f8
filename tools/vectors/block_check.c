/* tools/vectors/block_check.c: lowp vectors check-block, run-block and verify-block, which
 * hold another implementation, or block.c and the oracle, to the block vector files. */
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

/* Codes of test t under block.c (lowp_block_quantize). */
static void bv_run_block(const bv_vfile *V, const bv_vtest *t, uint8_t *scale, uint16_t *code)
{
    uint8_t packed[2 * BV_MAX];
    uint8_t sc[BV_MAX] = {0};
    char why[256];
    const bv_vgroup *g = &V->g[t->group];
    if (lowp_block_quantize(V->f, V->r, g->gs, g->qflags, t->x, (size_t)t->n, packed, sc, NULL, why,
                            sizeof why) != 0)
        lowp_cli_fail("%s: lowp_block_quantize refuses tcId %ld: %s", V->path, t->id, why);
    for (int i = 0; i < t->n; i++)
        code[i] = lowp_block_code_at(V->f, packed, (size_t)i);
    memcpy(scale, sc, sizeof sc);
}

static void bv_run_oracle(const bv_vfile *V, const bv_vtest *t, uint8_t *scale, uint16_t *code)
{
    const bv_vgroup *g = &V->g[t->group];
    size_t bs = lowp_oracle_block_size(V->f);
    for (int b = 0; b * (int)bs < t->n; b++)
        lowp_oracle_block_quantize(V->f, V->r, g->gs, g->qflags, t->x + b * bs, code + b * bs,
                                   &scale[b], NULL, NULL);
}

/* One failure line: which tcId, flags, the scale(s) and every element that differs. */
static void bv_print_diff(const bv_vfile *V, const bv_vtest *t, const uint8_t *gs,
                          const uint16_t *gc, const char *got, const char *exp)
{
    size_t bs = lowp_oracle_block_size(V->f);
    int d = lowp_vec_code_digits(lowp_block_element_format(V->f));
    printf("%s tcId %ld (line %ld) [%s]:", V->name, t->id, t->line, t->flags);
    if (lowp_block_has_scales(V->f))
        for (int b = 0; b * (int)bs < t->n; b++)
            if (gs[b] != t->scale[b])
                printf(" scale %s 0x%02x %s 0x%02x;", got, gs[b], exp, t->scale[b]);
    for (int i = 0; i < t->n; i++)
        if (gc[i] != t->code[i])
            printf(" element %d (input 0x%08" PRIx32 ") %s 0x%0*x %s 0x%0*x;", i, lowp_f32_bits(t->x[i]),
                   got, d, gc[i], exp, d, t->code[i]);
    putchar('\n');
}

static int bv_same(const bv_vfile *V, const bv_vtest *t, const uint8_t *s, const uint16_t *c)
{
    size_t bs = lowp_oracle_block_size(V->f);
    for (int b = 0; lowp_block_has_scales(V->f) && b * (int)bs < t->n; b++)
        if (s[b] != t->scale[b])
            return 0;
    for (int i = 0; i < t->n; i++)
        if (c[i] != t->code[i])
            return 0;
    return 1;
}

/* ---- check-block ---- */

static void check_block_usage(FILE *f)
{
    fprintf(f, "usage: lowp vectors check-block FILE --results R [--errors N]\n"
               "  Compare another implementation's block codes with a block vector file.\n"
               "  R: one line per test, 'TCID SCALES CODES' (vectors/README.md): TCID decimal,\n"
               "     SCALES the block scale codes concatenated (2 hex digits each; '-' for\n"
               "     formats without block scales), CODES the element codes concatenated\n"
               "     (1, 2 or 4 hex digits each, element 0 first); '#' comments, blank lines\n"
               "     ignored; every tcId exactly once, in any order.\n"
               "  --errors N   print at most N failure lines (default 20; 0: all)\n"
               "  Exit status: 0 all match, 1 mismatches, 2 bad input.\n");
}

int lowp_vec_cmd_check_block(int argc, char **argv)
{
    const char *file = NULL, *results = NULL;
    long max_errors;
    if (lowp_vec_args(argc, argv, "check-block", check_block_usage,
                      &(lowp_vec_opts){.file = &file, .results = &results,
                                       .max_errors = &max_errors}))
        return LOWP_EXIT_OK;
    /* The results text first: it fails by itself, holding nothing else. Bad input anywhere
     * below: the line goes to why, everything is freed, then exit 2. */
    char why[512];
    size_t len;
    char *buf = lowp_vec_read_text(results, &len);
    bv_vfile V;
    if (lowp_vec_bv_read(&V, file, why, sizeof why)) {
        free(buf);
        lowp_cli_fail("%s", why);
    }
#define CB_FAIL(...)                                                                           \
    do {                                                                                       \
        snprintf(why, sizeof why, __VA_ARGS__);                                                \
        goto bad_input;                                                                        \
    } while (0)
    size_t bs = lowp_oracle_block_size(V.f);
    int d = lowp_vec_code_digits(lowp_block_element_format(V.f)), has_scale = lowp_block_has_scales(V.f);
    uint8_t(*gsc)[BV_MAX] = calloc(V.nt ? V.nt : 1, sizeof *gsc);
    uint16_t(*gco)[BV_MAX] = calloc(V.nt ? V.nt : 1, sizeof *gco);
    char *seen = calloc(V.nt ? V.nt : 1, 1);
    if (gsc == NULL || gco == NULL || seen == NULL)
        CB_FAIL("out of memory");
    char *s = buf, *end = s + len, *line;
    long lineno = 0;
    size_t got_n = 0;
    while ((line = lowp_vec_next_line(&s, end, &lineno)) != NULL) {
        char *hash = strchr(line, '#');
        if (hash != NULL)
            *hash = '\0';
        char *tok[4];
        int nt = 0;
        for (char *p = strtok(line, " \t\r"); p != NULL; p = strtok(NULL, " \t\r"))
            if (nt < 4)
                tok[nt++] = p;
            else
                nt = 5;
        if (nt == 0)
            continue;
        if (nt != 3)
            CB_FAIL("%s line %ld: expected 'TCID SCALES CODES'", results, lineno);
        char *ep;
        long id = strtol(tok[0], &ep, 10);
        if (*ep != '\0' || id < 1)
            CB_FAIL("%s line %ld: '%.20s' is not a tcId", results, lineno, tok[0]);
        size_t k = 0;
        while (k < V.nt && V.t[k].id != id)
            k++;
        if (k == V.nt)
            CB_FAIL("%s line %ld: tcId %ld is not in %s", results, lineno, id, file);
        if (seen[k])
            CB_FAIL("%s line %ld: tcId %ld appears twice", results, lineno, id);
        seen[k] = 1;
        got_n++;
        const bv_vtest *t = &V.t[k];
        size_t nblk = (size_t)t->n / bs;
        if (!has_scale) {
            if (strcmp(tok[1], "-") != 0)
                CB_FAIL("%s line %ld: %s has no block scales; SCALES must be '-'", results,
                              lineno, lowp_block_format_name(V.f));
        } else {
            if (strlen(tok[1]) != 2 * nblk)
                CB_FAIL(
                    "%s line %ld: tcId %ld has %zu block%s: SCALES must be %zu hex digits", results,
                    lineno, id, nblk, nblk > 1 ? "s" : "", 2 * nblk);
            for (size_t b = 0; b < nblk; b++) {
                long v = lowp_vec_hex_fixed(tok[1] + 2 * b, 2);
                if (v < 0)
                    CB_FAIL("%s line %ld: SCALES '%.40s' is not hex", results, lineno,
                                  tok[1]);
                gsc[k][b] = (uint8_t)v;
            }
        }
        if (strlen(tok[2]) != (size_t)t->n * (size_t)d)
            CB_FAIL("%s line %ld: tcId %ld has %d elements: CODES must be %d hex digits",
                          results, lineno, id, t->n, t->n * d);
        for (int i = 0; i < t->n; i++) {
            long v = lowp_vec_hex_fixed(tok[2] + i * d, d);
            if (v < 0)
                CB_FAIL("%s line %ld: CODES '%.40s' is not hex", results, lineno, tok[2]);
            gco[k][i] = (uint16_t)v;
        }
    }
    if (got_n != V.nt) {
        size_t k = 0;
        while (k < V.nt && seen[k])
            k++;
        CB_FAIL("%s: %zu results, but %s has %zu tests (tcId %ld is missing)", results, got_n,
                      file, V.nt, V.t[k].id);
    }
    size_t bad = 0;
    for (size_t k = 0; k < V.nt; k++) {
        if (bv_same(&V, &V.t[k], gsc[k], gco[k]))
            continue;
        if (lowp_vec_error_shown(max_errors, bad))
            bv_print_diff(&V, &V.t[k], gsc[k], gco[k], "got", "expected");
        bad++;
    }
    lowp_vec_more_not_shown(bad, max_errors, "mismatches");
    printf("%zu tests, %zu mismatches in %s\n", V.nt, bad, V.name);
    free(gsc);
    free(gco);
    free(seen);
    free(buf);
    lowp_vec_bv_vfile_free(&V);
    return bad ? LOWP_EXIT_MISMATCH : LOWP_EXIT_OK;
bad_input:
    free(gsc);
    free(gco);
    free(seen);
    free(buf);
    lowp_vec_bv_vfile_free(&V);
    lowp_cli_fail("%s", why);
#undef CB_FAIL
}

/* ---- run-block: lowp's own results, in the results format ---- */

static void run_block_usage(FILE *f)
{
    fprintf(f, "usage: lowp vectors run-block FILE [--out R]\n"
               "  Run lowp_block_quantize on every test of a block vector file and write the\n"
               "  results file check-block reads (to R, default standard output).\n");
}

int lowp_vec_cmd_run_block(int argc, char **argv)
{
    const char *file = NULL, *out = NULL;
    if (lowp_vec_args(argc, argv, "run-block", run_block_usage,
                      &(lowp_vec_opts){.file = &file, .out = &out}))
        return LOWP_EXIT_OK;
    bv_vfile V;
    char why[512];
    if (lowp_vec_bv_read(&V, file, why, sizeof why))
        lowp_cli_fail("%s", why);
    size_t bs = lowp_oracle_block_size(V.f);
    int d = lowp_vec_code_digits(lowp_block_element_format(V.f));
    FILE *o = lowp_out_open(out, 0);
    fprintf(o, "# lowp_block_quantize on %s: TCID SCALES CODES\n", V.name);
    for (size_t k = 0; k < V.nt; k++) {
        uint8_t sc[BV_MAX];
        uint16_t co[BV_MAX];
        bv_run_block(&V, &V.t[k], sc, co);
        fprintf(o, "%ld ", V.t[k].id);
        if (lowp_block_has_scales(V.f))
            for (int b = 0; b * (int)bs < V.t[k].n; b++)
                fprintf(o, "%02x", sc[b]);
        else
            fputc('-', o);
        fputc(' ', o);
        for (int i = 0; i < V.t[k].n; i++)
            fprintf(o, "%0*x", d, co[i]);
        fputc('\n', o);
    }
    lowp_out_commit(o);
    lowp_vec_bv_vfile_free(&V);
    return LOWP_EXIT_OK;
}

/* ---- verify-block ---- */

static void verify_block_usage(FILE *f)
{
    fprintf(f,
            "usage: lowp vectors verify-block [--dir DIR] [--errors N]\n"
            "  Re-derive every test in DIR (default " BV_DEFAULT_DIR ") with the oracle and with\n"
            "  lowp_block_quantize; report differences and files missing or extra.\n"
            "  Exit status: 0 no difference, 1 differences, 2 bad input.\n");
}

int lowp_vec_cmd_verify_block(int argc, char **argv)
{
    const char *dir = BV_DEFAULT_DIR;
    long max_errors;
    name_list present = {0};
    if (lowp_vec_verify_start(argc, argv, "verify-block", verify_block_usage, &dir, &max_errors,
                              lowp_vec_bv_is_file_name, "*.json", &present))
        return LOWP_EXIT_OK;
    size_t tests = 0, diffs = 0, problems = 0;
    for (size_t i = 0; i < present.n; i++) {
        char path[4352], want[64];
        snprintf(path, sizeof path, "%s/%s", dir, present.names[i]);
        bv_vfile V;
        char why[512];
        if (lowp_vec_bv_read(&V, path, why, sizeof why)) {
            free(present.names);
            lowp_cli_fail("%s", why);
        }
        lowp_vec_bv_file_name(want, sizeof want, V.f, V.r);
        if (strcmp(want, present.names[i]) != 0)
            lowp_cli_fail("%s: the file holds %s/%s; its name should be %s", path,
                          lowp_block_format_name(V.f), lowp_recipe_name(V.r), want);
        if (lowp_recipe_check(V.f, V.r, NULL, 0) != 0) {
            printf("%s: lowp has no such recipe; gen-block would not write it\n", V.name);
            problems++;
        } else {
            for (size_t k = 0; k < V.nt; k++) {
                uint8_t sc[BV_MAX];
                uint16_t co[BV_MAX];
                for (int who = 0; who < 2; who++) {
                    if (who == 0)
                        bv_run_oracle(&V, &V.t[k], sc, co);
                    else
                        bv_run_block(&V, &V.t[k], sc, co);
                    if (bv_same(&V, &V.t[k], sc, co))
                        continue;
                    if (lowp_vec_error_shown(max_errors, diffs))
                        bv_print_diff(&V, &V.t[k], sc, co,
                                      who ? "lowp_block_quantize gives" : "the oracle gives",
                                      "file has");
                    diffs++;
                }
            }
        }
        tests += V.nt;
        lowp_vec_bv_vfile_free(&V);
    }
    lowp_vec_more_not_shown(diffs, max_errors, "differences");
    for (int f = 0; f < LOWP_BLOCK_FORMAT_COUNT; f++)
        for (int r = 0; r < LOWP_RECIPE_COUNT; r++) {
            if (lowp_recipe_check((lowp_block_format)f, (lowp_recipe)r, NULL, 0) != 0)
                continue;
            char name[64];
            lowp_vec_bv_file_name(name, sizeof name, (lowp_block_format)f, (lowp_recipe)r);
            if (!lowp_vec_name_list_has(&present, name)) {
                printf("%s: missing (lowp has this recipe; run lowp vectors gen-block)\n", name);
                problems++;
            }
        }
    printf("%zu files, %zu tests, %zu differences, %zu missing or extra files in %s\n", present.n,
           tests, diffs, problems, dir);
    free(present.names);
    return (diffs || problems) ? LOWP_EXIT_MISMATCH : LOWP_EXIT_OK;
}
