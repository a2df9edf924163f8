/* tests/test_vectors.c: the committed golden vectors and `lowp vectors`.
 *
 *   test_vectors <vectors-dir> <path-to-lowp>
 *
 * Elementwise (<vectors-dir>/elementwise):
 * 1. Regeneration changes nothing: `lowp vectors gen` into a temporary directory, with
 *    the seed and commit recorded in the committed files' headers, gives the same set of
 *    file names and the same bytes (vectors/README.md, "Regenerating").
 * 2. `lowp vectors verify` finds no difference in the committed directory.
 * 3. `lowp vectors check`: exit 0 on correct results (bare codes, and the vector file's own
 *    format), exit 1 with a failure line naming the line of a flipped code, exit 2 with one
 *    line naming the results file and line on malformed or short results, and on unknown
 *    options (writing nothing).
 * Block (<vectors-dir>/block, vectors/README.md "Block vectors"):
 * 4. Regeneration changes nothing: `lowp vectors gen-block` with the seed and commit recorded
 *    in the committed files gives the same file names and bytes.
 * 5. `lowp vectors verify-block`: the oracle and lowp_block_quantize (block.c) reproduce
 *    every scale and element code of every test.
 * 6. `lowp vectors check-block`: exit 0 on the file's own codes (results written by this test
 *    from the JSON) and on `lowp vectors run-block` output (block.c); exit 1 with a line
 *    naming the tcId of a flipped code; exit 2 with one line on malformed or missing
 *    results.
 * 7. Reading block vector files (JSON): \u escapes beyond ASCII and surrogate pairs decoded,
 *    escaped quotes kept; duplicate keys, non-JSON numbers, lone surrogates and truncated
 *    files refused with one line and exit 2, by check-block and run-block. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#include "lowp_test.h"

static const char *g_vectors_dir; /* argv[1] */
static const char *g_lowp;        /* argv[2] */
static char g_elem_dir[4096];     /* argv[1]/elementwise */
static char g_block_dir[4096];    /* argv[1]/block */

/* The file the check tests use (falls back to the first file if it is absent). */
#define CHECK_FILE "f32_to_e4m3.cuda.rn.sat.txt"

/* ----------------------------------------------------------------------------- */

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    for (;;) {
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap + 1);
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    fclose(f);
    buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

static void write_file(const char *path, const char *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot write %s: %s", path, strerror(errno));
    ck_assert(fwrite(data, 1, len, f) == len);
    ck_assert(fclose(f) == 0);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted names of the f32_to_*.txt files in dir (NULL-terminated; *n set). */
static char **list_vector_files(const char *dir, size_t *n)
{
    DIR *d = opendir(dir);
    ck_assert_msg(d != NULL, "cannot read directory %s: %s", dir, strerror(errno));
    size_t cap = 16, k = 0;
    char **v = malloc(cap * sizeof *v);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        if (strncmp(e->d_name, "f32_to_", 7) != 0 || l < 5 || strcmp(e->d_name + l - 4, ".txt") != 0)
            continue;
        if (k + 1 >= cap) {
            cap *= 2;
            v = realloc(v, cap * sizeof *v);
        }
        v[k++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(v, k, sizeof *v, cmp_str);
    v[k] = NULL;
    *n = k;
    return v;
}

static void free_list(char **v)
{
    for (size_t i = 0; v[i] != NULL; i++)
        free(v[i]);
    free(v);
}

/* A fresh temporary directory (under TMPDIR or /tmp). */
static void make_tmpdir(char *buf, size_t len)
{
    const char *t = getenv("TMPDIR");
    snprintf(buf, len, "%s/vectors-test-XXXXXX", (t && *t) ? t : "/tmp");
    ck_assert_msg(mkdtemp(buf) != NULL, "mkdtemp failed: %s", strerror(errno));
}

/* Remove dir and the plain files in it, and one level of subdirectories. */
static void remove_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char p[8192];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
            remove_tree(p);
        else
            unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

/* Run lowp with args (NULL-terminated, without argv[0]); stdout and stderr go to files
 * out/err (created). Returns the exit status, or -1 if it did not exit normally. */
static int run_lowp(const char *const *args, const char *out, const char *err)
{
    const char *argv[32];
    size_t n = 0;
    argv[n++] = g_lowp;
    for (size_t i = 0; args[i] != NULL && n < 31; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0) {
        int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int fe = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fo < 0 || fe < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0)
            _exit(126);
        execv(g_lowp, (char *const *)argv);
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        ck_assert(errno == EINTR);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The value of header line "# key: value" in text (first token), or "" if absent. */
static void header_value(const char *text, const char *key, char *out, size_t len)
{
    char pat[64];
    snprintf(pat, sizeof pat, "# %s: ", key);
    out[0] = '\0';
    for (const char *p = text; p && *p == '#'; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, pat, strlen(pat)) == 0) {
            const char *v = p + strlen(pat);
            size_t k = strcspn(v, " \r\n");
            if (k >= len)
                k = len - 1;
            memcpy(out, v, k);
            out[k] = '\0';
            return;
        }
    }
}

/* Line number (1-based) of the first difference between a and b. */
static long first_diff_line(const char *a, size_t na, const char *b, size_t nb, size_t *off)
{
    size_t i = 0;
    long line = 1;
    while (i < na && i < nb && a[i] == b[i]) {
        if (a[i] == '\n')
            line++;
        i++;
    }
    while (i > 0 && a[i - 1] != '\n')
        i--;
    *off = i;
    return line;
}

static void copy_line(char *out, size_t len, const char *s)
{
    size_t k = strcspn(s, "\n");
    if (k >= len)
        k = len - 1;
    memcpy(out, s, k);
    out[k] = '\0';
}

/* The check-test vector file: its path and contents. */
static char *check_file(char *path, size_t len, size_t *n)
{
    snprintf(path, len, "%s/%s", g_elem_dir, CHECK_FILE);
    char *text = read_file(path, n);
    if (text == NULL) {
        size_t k;
        char **names = list_vector_files(g_elem_dir, &k);
        ck_assert_msg(k > 0, "no vector files in %s", g_elem_dir);
        snprintf(path, len, "%s/%s", g_elem_dir, names[0]);
        free_list(names);
        text = read_file(path, n);
    }
    ck_assert_msg(text != NULL, "cannot read %s", path);
    return text;
}

/* Results file text: the code column of every case line, one per line. With flip_case >= 0
 * that case's code has its low bit flipped and *flip_line gets the case's line number. */
static char *results_from(const char *text, long flip_case, long *flip_line, size_t *cases)
{
    size_t cap = strlen(text) + 1, n = 0;
    char *r = malloc(cap);
    long line = 0, k = 0;
    for (const char *p = text; *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : p + strlen(p)) {
        line++;
        if (*p == '#')
            continue;
        char code[8];
        size_t cl = strcspn(p + 9, " \r\n");
        ck_assert(cl > 0 && cl < sizeof code);
        memcpy(code, p + 9, cl);
        code[cl] = '\0';
        if (k == flip_case) {
            unsigned v = (unsigned)strtoul(code, NULL, 16) ^ 1u;
            snprintf(code, sizeof code, "%0*x", (int)cl, v);
            *flip_line = line;
        }
        n += (size_t)snprintf(r + n, cap - n, "%s\n", code);
        k++;
    }
    *cases = (size_t)k;
    return r;
}

/* ----------------------------------------------------------------------------- */

START_TEST(regeneration_changes_nothing)
{
    size_t n_old;
    char **old = list_vector_files(g_elem_dir, &n_old);
    ck_assert_msg(n_old > 0, "no f32_to_*.txt vector files in %s", g_elem_dir);

    /* Seed and commit: from the committed headers, the same in every file. */
    char seed[64] = "", commit[96] = "";
    for (size_t i = 0; i < n_old; i++) {
        char p[8192], s[64], c[96];
        snprintf(p, sizeof p, "%s/%s", g_elem_dir, old[i]);
        char *t = read_file(p, NULL);
        ck_assert_msg(t != NULL, "cannot read %s", p);
        header_value(t, "seed", s, sizeof s);
        header_value(t, "commit", c, sizeof c);
        free(t);
        ck_assert_msg(s[0] && c[0], "%s lacks a '# seed:' or '# commit:' header line", old[i]);
        if (i == 0) {
            snprintf(seed, sizeof seed, "%s", s);
            snprintf(commit, sizeof commit, "%s", c);
        }
        ck_assert_msg(strcmp(s, seed) == 0 && strcmp(c, commit) == 0,
                      "%s has seed %s commit %s but %s has seed %s commit %s: the set was not "
                      "generated in one run",
                      old[i], s, c, old[0], seed, commit);
    }

    char tmp[4096], gen_dir[4200], out[4200], err[4200];
    make_tmpdir(tmp, sizeof tmp);
    snprintf(gen_dir, sizeof gen_dir, "%s/elementwise", tmp);
    snprintf(out, sizeof out, "%s/gen.out", tmp);
    snprintf(err, sizeof err, "%s/gen.err", tmp);
    const char *args[] = {"vectors", "gen", "--dir", gen_dir, "--seed", seed, "--commit", commit,
                          NULL};
    int rc = run_lowp(args, out, err);
    char *errtext = read_file(err, NULL);
    ck_assert_msg(rc == 0, "lowp vectors gen exited %d: %s", rc, errtext ? errtext : "");
    free(errtext);

    size_t n_new;
    char **fresh = list_vector_files(gen_dir, &n_new);
    size_t differ = 0;
    char first[1024] = "";
    for (size_t i = 0, j = 0; i < n_old || j < n_new;) {
        int c = (i == n_old) ? 1 : (j == n_new) ? -1 : strcmp(old[i], fresh[j]);
        if (c < 0) {
            fprintf(stderr, "%s: committed, but lowp vectors gen no longer writes it\n", old[i]);
            if (!differ++)
                snprintf(first, sizeof first, "%s is committed but no longer generated", old[i]);
            i++;
            continue;
        }
        if (c > 0) {
            fprintf(stderr, "%s: generated, but not committed\n", fresh[j]);
            if (!differ++)
                snprintf(first, sizeof first, "%s is generated but not committed", fresh[j]);
            j++;
            continue;
        }
        char pa[8192], pb[8192];
        snprintf(pa, sizeof pa, "%s/%s", g_elem_dir, old[i]);
        snprintf(pb, sizeof pb, "%s/%s", gen_dir, fresh[j]);
        size_t na, nb;
        char *a = read_file(pa, &na), *b = read_file(pb, &nb);
        ck_assert(a != NULL && b != NULL);
        if (na != nb || memcmp(a, b, na) != 0) {
            size_t off;
            long line = first_diff_line(a, na, b, nb, &off);
            char la[160], lb[160];
            copy_line(la, sizeof la, a + (off < na ? off : na));
            copy_line(lb, sizeof lb, b + (off < nb ? off : nb));
            fprintf(stderr, "%s line %ld: committed '%s', regenerated '%s'\n", old[i], line, la,
                    lb);
            if (!differ++)
                snprintf(first, sizeof first, "%s line %ld: committed '%s', regenerated '%s'",
                         old[i], line, la, lb);
        }
        free(a);
        free(b);
        i++;
        j++;
    }
    fprintf(stderr, "regeneration: %zu committed files, %zu generated, %zu differ\n", n_old, n_new,
            differ);
    free_list(old);
    free_list(fresh);
    remove_tree(tmp);
    ck_assert_msg(differ == 0,
                  "%zu vector files differ from a regeneration (first: %s); if the change is "
                  "intended, run 'lowp vectors gen' and commit vectors/elementwise",
                  differ, first);
}
END_TEST

START_TEST(verify_finds_no_difference)
{
    char tmp[4096], out[4200], err[4200];
    make_tmpdir(tmp, sizeof tmp);
    snprintf(out, sizeof out, "%s/out", tmp);
    snprintf(err, sizeof err, "%s/err", tmp);
    const char *args[] = {"vectors", "verify", "--dir", g_elem_dir, NULL};
    int rc = run_lowp(args, out, err);
    char *o = read_file(out, NULL), *e = read_file(err, NULL);
    ck_assert_msg(rc == 0, "lowp vectors verify exited %d:\n%s%s", rc, o ? o : "", e ? e : "");
    ck_assert_msg(o != NULL && strstr(o, " 0 differences, 0 missing or extra files") != NULL,
                  "unexpected verify summary: %s", o ? o : "");
    free(o);
    free(e);
    remove_tree(tmp);
}
END_TEST

START_TEST(check_accepts_correct_results)
{
    char path[8192], tmp[4096], res[4200], out[4200], err[4200];
    size_t n, cases;
    long unused = 0;
    char *text = check_file(path, sizeof path, &n);
    make_tmpdir(tmp, sizeof tmp);
    snprintf(res, sizeof res, "%s/results.txt", tmp);
    snprintf(out, sizeof out, "%s/out", tmp);
    snprintf(err, sizeof err, "%s/err", tmp);

    char *r = results_from(text, -1, &unused, &cases);
    write_file(res, r, strlen(r));
    const char *args[] = {"vectors", "check", path, "--results", res, NULL};
    int rc = run_lowp(args, out, err);
    char *o = read_file(out, NULL);
    char want[64];
    snprintf(want, sizeof want, "%zu cases, 0 mismatches", cases);
    ck_assert_msg(rc == 0 && o && strstr(o, want), "check on correct codes: exit %d, output %s",
                  rc, o ? o : "");
    free(o);

    /* The vector file itself is a valid results file ("INPUT CODE # flags" lines). */
    const char *args2[] = {"vectors", "check", path, "--results", path, NULL};
    rc = run_lowp(args2, out, err);
    o = read_file(out, NULL);
    ck_assert_msg(rc == 0 && o && strstr(o, want), "check on the vector file: exit %d, output %s",
                  rc, o ? o : "");
    free(o);
    free(r);
    free(text);
    remove_tree(tmp);
}
END_TEST

START_TEST(check_reports_a_flipped_code)
{
    char path[8192], tmp[4096], res[4200], out[4200], err[4200];
    size_t n, cases;
    long flip_line = -1;
    char *text = check_file(path, sizeof path, &n);
    make_tmpdir(tmp, sizeof tmp);
    snprintf(res, sizeof res, "%s/results.txt", tmp);
    snprintf(out, sizeof out, "%s/out", tmp);
    snprintf(err, sizeof err, "%s/err", tmp);

    char *probe = results_from(text, -1, &flip_line, &cases);
    free(probe);
    char *r = results_from(text, (long)(cases / 2), &flip_line, &cases);
    write_file(res, r, strlen(r));
    const char *args[] = {"vectors", "check", path, "--results", res, NULL};
    int rc = run_lowp(args, out, err);
    char *o = read_file(out, NULL);
    char want_line[64], want_sum[64];
    snprintf(want_line, sizeof want_line, " line %ld: input 0x", flip_line);
    snprintf(want_sum, sizeof want_sum, "%zu cases, 1 mismatches", cases);
    ck_assert_msg(rc == 1, "check on a flipped code exited %d, not 1: %s", rc, o ? o : "");
    ck_assert_msg(o && strstr(o, want_line) && strstr(o, want_sum),
                  "check output does not name line %ld: %s", flip_line, o ? o : "");
    free(o);
    free(r);
    free(text);
    remove_tree(tmp);
}
END_TEST

START_TEST(check_rejects_malformed_results)
{
    char path[8192], tmp[4096], res[4200], out[4200], err[4200];
    size_t n, cases;
    long unused = 0;
    char *text = check_file(path, sizeof path, &n);
    make_tmpdir(tmp, sizeof tmp);
    snprintf(res, sizeof res, "%s/results.txt", tmp);
    snprintf(out, sizeof out, "%s/out", tmp);
    snprintf(err, sizeof err, "%s/err", tmp);
    char *r = results_from(text, -1, &unused, &cases);

    /* Line 3 is not hex. */
    char *bad = malloc(strlen(r) + 8);
    const char *third = strchr(strchr(r, '\n') + 1, '\n') + 1;
    size_t head = (size_t)(third - r);
    memcpy(bad, r, head);
    strcpy(bad + head, "zz");
    strcat(bad, strchr(third, '\n'));
    write_file(res, bad, strlen(bad));
    const char *args[] = {"vectors", "check", path, "--results", res, NULL};
    int rc = run_lowp(args, out, err);
    char *e = read_file(err, NULL);
    char want[4300];
    snprintf(want, sizeof want, "%s line 3:", res);
    ck_assert_msg(rc == 2, "check on malformed results exited %d, not 2", rc);
    ck_assert_msg(e && strstr(e, want) && strchr(e, '\n') == e + strlen(e) - 1,
                  "want one line naming %s, got: %s", want, e ? e : "");
    free(e);

    /* Too few results. */
    write_file(res, r, strlen(r) / 2 - (strlen(r) / 2) % 3);
    rc = run_lowp(args, out, err);
    e = read_file(err, NULL);
    ck_assert_msg(rc == 2 && e && strstr(e, "results, but"), "short results: exit %d, %s", rc,
                  e ? e : "");
    free(e);

    /* Unknown options and a missing --results write nothing and exit 2. */
    char gen_dir[4200];
    snprintf(gen_dir, sizeof gen_dir, "%s/gen", tmp);
    const char *gen_bad[] = {"vectors", "gen", "--dir", gen_dir, "--bogus", NULL};
    ck_assert_int_eq(run_lowp(gen_bad, out, err), 2);
    ck_assert_msg(access(gen_dir, F_OK) != 0, "gen with a bad option created %s", gen_dir);
    const char *chk_bad[] = {"vectors", "check", path, NULL};
    ck_assert_int_eq(run_lowp(chk_bad, out, err), 2);
    const char *chk_missing[] = {"vectors", "check", path, "--results", gen_dir, NULL};
    ck_assert_int_eq(run_lowp(chk_missing, out, err), 2);

    free(bad);
    free(r);
    free(text);
    remove_tree(tmp);
}
END_TEST


/* ----------------------------------------------------------------------------- */
/* Block vectors. */

/* Sorted names of the *.json files in dir (NULL-terminated; *n set). */
static char **list_json_files(const char *dir, size_t *n)
{
    DIR *d = opendir(dir);
    ck_assert_msg(d != NULL, "cannot read directory %s: %s", dir, strerror(errno));
    size_t cap = 16, k = 0;
    char **v = malloc(cap * sizeof *v);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        if (l < 6 || strcmp(e->d_name + l - 5, ".json") != 0)
            continue;
        if (k + 1 >= cap) {
            cap *= 2;
            v = realloc(v, cap * sizeof *v);
        }
        v[k++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(v, k, sizeof *v, cmp_str);
    v[k] = NULL;
    *n = k;
    return v;
}

/* The value of a top-level "key": "value" line of a block vector file, or "". */
static void json_top_value(const char *text, const char *key, char *out, size_t len)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\n  \"%s\": \"", key);
    out[0] = '\0';
    const char *p = strstr(text, pat);
    if (p == NULL)
        return;
    p += strlen(pat);
    size_t k = strcspn(p, "\"");
    if (k >= len)
        k = len - 1;
    memcpy(out, p, k);
    out[k] = '\0';
}

START_TEST(block_regeneration_changes_nothing)
{
    size_t n_old;
    char **old = list_json_files(g_block_dir, &n_old);
    ck_assert_msg(n_old > 0, "no *.json block vector files in %s", g_block_dir);
    char seed[64] = "", commit[96] = "";
    for (size_t i = 0; i < n_old; i++) {
        char p[8192], sd[64], c[96];
        snprintf(p, sizeof p, "%s/%s", g_block_dir, old[i]);
        char *t = read_file(p, NULL);
        ck_assert_msg(t != NULL, "cannot read %s", p);
        json_top_value(t, "seed", sd, sizeof sd);
        json_top_value(t, "lowpCommit", c, sizeof c);
        free(t);
        ck_assert_msg(sd[0] && c[0], "%s lacks a \"seed\" or \"lowpCommit\" field", old[i]);
        if (i == 0) {
            snprintf(seed, sizeof seed, "%s", sd);
            snprintf(commit, sizeof commit, "%s", c);
        }
        ck_assert_msg(strcmp(sd, seed) == 0 && strcmp(c, commit) == 0,
                      "%s has seed %s commit %s but %s has seed %s commit %s: the set was not "
                      "generated in one run",
                      old[i], sd, c, old[0], seed, commit);
    }
    char tmp[4096], gen_dir[4200], out[4200], err[4200];
    make_tmpdir(tmp, sizeof tmp);
    snprintf(gen_dir, sizeof gen_dir, "%s/block", tmp);
    snprintf(out, sizeof out, "%s/gen.out", tmp);
    snprintf(err, sizeof err, "%s/gen.err", tmp);
    const char *args[] = {"vectors", "gen-block", "--dir", gen_dir, "--seed",
                          seed,      "--commit",  commit,  NULL};
    int rc = run_lowp(args, out, err);
    char *errtext = read_file(err, NULL);
    ck_assert_msg(rc == 0, "lowp vectors gen-block exited %d: %s", rc, errtext ? errtext : "");
    free(errtext);
    size_t n_new;
    char **fresh = list_json_files(gen_dir, &n_new);
    size_t differ = 0;
    char first[1024] = "";
    for (size_t i = 0, j = 0; i < n_old || j < n_new;) {
        int c = (i == n_old) ? 1 : (j == n_new) ? -1 : strcmp(old[i], fresh[j]);
        if (c != 0) {
            const char *nm = c < 0 ? old[i] : fresh[j];
            fprintf(stderr, "%s: %s\n", nm,
                    c < 0 ? "committed, but gen-block no longer writes it"
                          : "generated, but not committed");
            if (!differ++)
                snprintf(first, sizeof first, "%s is %s", nm,
                         c < 0 ? "committed but no longer generated"
                               : "generated but not committed");
            if (c < 0)
                i++;
            else
                j++;
            continue;
        }
        char pa[8192], pb[8192];
        snprintf(pa, sizeof pa, "%s/%s", g_block_dir, old[i]);
        snprintf(pb, sizeof pb, "%s/%s", gen_dir, fresh[j]);
        size_t na, nb;
        char *a = read_file(pa, &na), *b = read_file(pb, &nb);
        ck_assert(a != NULL && b != NULL);
        if (na != nb || memcmp(a, b, na) != 0) {
            size_t off;
            long line = first_diff_line(a, na, b, nb, &off);
            char la[160], lb[160];
            copy_line(la, sizeof la, a + (off < na ? off : na));
            copy_line(lb, sizeof lb, b + (off < nb ? off : nb));
            fprintf(stderr, "%s line %ld: committed '%s', regenerated '%s'\n", old[i], line, la,
                    lb);
            if (!differ++)
                snprintf(first, sizeof first, "%s line %ld differs", old[i], line);
        }
        free(a);
        free(b);
        i++;
        j++;
    }
    fprintf(stderr, "block regeneration: %zu committed files, %zu generated, %zu differ\n", n_old,
            n_new, differ);
    free_list(old);
    free_list(fresh);
    remove_tree(tmp);
    ck_assert_msg(differ == 0,
                  "%zu block vector files differ from a regeneration (first: %s); if the change is "
                  "intended, run 'lowp vectors gen-block' and commit vectors/block",
                  differ, first);
}
END_TEST

START_TEST(block_verify_finds_no_difference)
{
    char tmp[4096], out[4200], err[4200];
    make_tmpdir(tmp, sizeof tmp);
    snprintf(out, sizeof out, "%s/out", tmp);
    snprintf(err, sizeof err, "%s/err", tmp);
    const char *args[] = {"vectors", "verify-block", "--dir", g_block_dir, NULL};
    int rc = run_lowp(args, out, err);
    char *o = read_file(out, NULL), *e = read_file(err, NULL);
    ck_assert_msg(rc == 0, "lowp vectors verify-block exited %d:\n%s%s", rc, o ? o : "",
                  e ? e : "");
    ck_assert_msg(o != NULL && strstr(o, " 0 differences, 0 missing or extra files") != NULL,
                  "unexpected verify-block summary: %s", o ? o : "");
    free(o);
    free(e);
    remove_tree(tmp);
}
END_TEST

/* Results text from a block vector file's own expected codes, via the one-test-per-line
 * layout gen-block writes: "TCID SCALES CODES" per test. With flip_id > 0 the first code of
 * that test gets its low bit flipped. Returns the number of tests in *n. */
static char *block_results_from(const char *text, long flip_id, size_t *n)
{
    size_t cap = strlen(text) + 64, len = 0;
    char *r = malloc(cap);
    r[0] = '\0';
    *n = 0;
    for (const char *p = strstr(text, "{\"tcId\": "); p; p = strstr(p + 1, "{\"tcId\": ")) {
        long id = strtol(p + 9, NULL, 10);
        const char *eol = strchr(p, '\n');
        char scales[64] = "-", codes[160] = "";
        const char *sc = strstr(p, "\"scales\": [");
        if (sc != NULL && (eol == NULL || sc < eol)) {
            size_t k = 0;
            for (const char *q = sc + 11; *q != ']'; q++)
                if (*q != '"' && *q != ',' && *q != ' ' && k + 1 < sizeof scales)
                    scales[k++] = *q;
            scales[k] = '\0';
        }
        const char *co = strstr(p, "\"codes\": [");
        ck_assert(co != NULL && (eol == NULL || co < eol));
        size_t k = 0;
        for (const char *q = co + 10; *q != ']'; q++)
            if (*q != '"' && *q != ',' && *q != ' ' && k + 1 < sizeof codes)
                codes[k++] = *q;
        codes[k] = '\0';
        if (id == flip_id) {
            int v = codes[0] <= '9' ? codes[0] - '0' : codes[0] - 'a' + 10;
            codes[0] = "0123456789abcdef"[v ^ 1];
        }
        len += (size_t)snprintf(r + len, cap - len, "%ld %s %s\n", id, scales, codes);
        ck_assert(len < cap);
        (*n)++;
    }
    return r;
}

START_TEST(block_check_results)
{
    size_t nf;
    char **files = list_json_files(g_block_dir, &nf);
    ck_assert_msg(nf > 0, "no block vector files in %s", g_block_dir);
    /* The NVFP4 trtllm file when present (4-bit codes, scales), else the first. */
    const char *pick = files[0];
    for (size_t i = 0; i < nf; i++)
        if (strcmp(files[i], "nvfp4.trtllm.json") == 0)
            pick = files[i];
    char path[8192], tmp[4096], res[4200], out[4200], err[4200];
    snprintf(path, sizeof path, "%s/%s", g_block_dir, pick);
    char *text = read_file(path, NULL);
    ck_assert_msg(text != NULL, "cannot read %s", path);
    make_tmpdir(tmp, sizeof tmp);
    snprintf(res, sizeof res, "%s/results.txt", tmp);
    snprintf(out, sizeof out, "%s/out", tmp);
    snprintf(err, sizeof err, "%s/err", tmp);
    const char *check[] = {"vectors", "check-block", path, "--results", res, NULL};

    /* The file's own codes. */
    size_t n;
    char *r = block_results_from(text, 0, &n);
    write_file(res, r, strlen(r));
    int rc = run_lowp(check, out, err);
    char *o = read_file(out, NULL), want[128];
    snprintf(want, sizeof want, "%zu tests, 0 mismatches", n);
    ck_assert_msg(rc == 0 && o && strstr(o, want), "check-block on the file's codes: exit %d, %s",
                  rc, o ? o : "");
    free(o);

    /* block.c's codes through run-block. */
    const char *run[] = {"vectors", "run-block", path, "--out", res, NULL};
    rc = run_lowp(run, out, err);
    ck_assert_msg(rc == 0, "run-block exited %d", rc);
    rc = run_lowp(check, out, err);
    o = read_file(out, NULL);
    ck_assert_msg(rc == 0 && o && strstr(o, want), "check-block on run-block output: exit %d, %s",
                  rc, o ? o : "");
    free(o);

    /* One flipped code: exit 1, a line naming the tcId. */
    long flip = (long)(n / 2);
    free(r);
    r = block_results_from(text, flip, &n);
    write_file(res, r, strlen(r));
    rc = run_lowp(check, out, err);
    o = read_file(out, NULL);
    char want_line[64], want_sum[64];
    snprintf(want_line, sizeof want_line, " tcId %ld (line ", flip);
    snprintf(want_sum, sizeof want_sum, "%zu tests, 1 mismatches", n);
    ck_assert_msg(rc == 1 && o && strstr(o, want_line) && strstr(o, want_sum),
                  "check-block on a flipped code: exit %d, %s", rc, o ? o : "");
    free(o);

    /* Malformed: a non-hex code; a missing test; exit 2, one line on stderr. */
    char *bad = strdup(r);
    char *sp = strrchr(bad, ' ');
    ck_assert(sp != NULL);
    sp[1] = 'z';
    write_file(res, bad, strlen(bad));
    rc = run_lowp(check, out, err);
    char *e = read_file(err, NULL);
    ck_assert_msg(rc == 2 && e && strstr(e, res) && strchr(e, '\n') == e + strlen(e) - 1,
                  "check-block on a bad code: exit %d, stderr %s", rc, e ? e : "");
    free(e);
    char *cut = strrchr(r, '\n');
    *cut = '\0';
    cut = strrchr(r, '\n');
    cut[1] = '\0';
    write_file(res, r, strlen(r));
    rc = run_lowp(check, out, err);
    e = read_file(err, NULL);
    ck_assert_msg(rc == 2 && e && strstr(e, "is missing"),
                  "check-block on a missing test: exit %d, %s", rc, e ? e : "");
    free(e);
    const char *bad_opt[] = {"vectors", "check-block", path, "--bogus", NULL};
    ck_assert_int_eq(run_lowp(bad_opt, out, err), 2);

    free(bad);
    free(r);
    free(text);
    free_list(files);
    remove_tree(tmp);
}
END_TEST

/* text with the first occurrence of `from` replaced by `to` (malloc'ed; from must occur) */
static char *replace_once(const char *text, const char *from, const char *to)
{
    const char *p = strstr(text, from);
    ck_assert_msg(p != NULL, "'%s' not found", from);
    size_t a = (size_t)(p - text), fl = strlen(from), tl = strlen(to), n = strlen(text);
    char *r = malloc(n - fl + tl + 1);
    memcpy(r, text, a);
    memcpy(r + a, to, tl);
    memcpy(r + a + tl, p + fl, n - a - fl + 1);
    return r;
}

/* exit status 2 and exactly one line on stderr that contains want (NULL: any line) */
static void expect_one_line_exit_2(const char *const *args, const char *out, const char *err,
                                   const char *want, const char *label)
{
    int rc = run_lowp(args, out, err);
    char *e = read_file(err, NULL);
    ck_assert_msg(rc == 2 && e != NULL && strncmp(e, "lowp: ", 6) == 0 &&
                      strchr(e, '\n') == e + strlen(e) - 1 && (want == NULL || strstr(e, want)),
                  "%s: exit %d, stderr '%s' (want one line with '%s')", label, rc, e ? e : "",
                  want ? want : "");
    free(e);
}

/* What lowp's former ad hoc JSON reader got wrong, through check-block and run-block on
 * edited copies of a committed file (nvfp4.trtllm.json, or the first file):
 *   - \u escapes above U+007F and surrogate pairs became '?' (here: in "flags", which a
 *     failure line prints), and an escaped quote must stay a quote;
 *   - a duplicate key was taken silently (the first one won);
 *   - a number was read by strtod, so 0x1 was accepted as tcId 1;
 *   - truncated JSON leaked everything parsed so far on the exit path (under ASan: a leak
 *     report and exit 1 instead of 2). */
START_TEST(block_json_reading)
{
    size_t nf;
    char **files = list_json_files(g_block_dir, &nf);
    ck_assert_msg(nf > 0, "no block vector files in %s", g_block_dir);
    const char *pick = files[0];
    for (size_t i = 0; i < nf; i++)
        if (strcmp(files[i], "nvfp4.trtllm.json") == 0)
            pick = files[i];
    char path[8192], tmp[4096], vec[4200], res[4200], out[4200], err[4200];
    snprintf(path, sizeof path, "%s/%s", g_block_dir, pick);
    char *text = read_file(path, NULL);
    ck_assert_msg(text != NULL, "cannot read %s", path);
    make_tmpdir(tmp, sizeof tmp);
    snprintf(vec, sizeof vec, "%s/%s", tmp, pick);
    snprintf(res, sizeof res, "%s/results.txt", tmp);
    snprintf(out, sizeof out, "%s/out", tmp);
    snprintf(err, sizeof err, "%s/err", tmp);
    const char *check[] = {"vectors", "check-block", vec, "--results", res, NULL};
    const char *run[] = {"vectors", "run-block", vec, NULL};

    /* Escapes: tcId 1's flags become U+00E9, U+1F600 (a surrogate pair), an escaped quote;
     * its first code is flipped, so the failure line shows the decoded flags. */
    const char *tc1 = strstr(text, "{\"tcId\": 1,");
    ck_assert(tc1 != NULL);
    const char *fl = strstr(tc1, "\"flags\": [");
    ck_assert(fl != NULL && fl < strchr(tc1, '\n'));
    size_t fl_len = (size_t)(strchr(fl, ']') - fl) + 1;
    char from[512];
    ck_assert(fl_len < sizeof from);
    memcpy(from, fl, fl_len);
    from[fl_len] = '\0';
    char *esc = replace_once(tc1, from, "\"flags\": [\"caf\\u00e9\", \"\\ud83d\\ude00\", \"q\\\"t\"]");
    size_t head = (size_t)(tc1 - text);
    char *edited = malloc(head + strlen(esc) + 1);
    memcpy(edited, text, head);
    strcpy(edited + head, esc);
    free(esc);
    write_file(vec, edited, strlen(edited));
    size_t n;
    char *r = block_results_from(edited, 1, &n);
    write_file(res, r, strlen(r));
    free(r);
    int rc = run_lowp(check, out, err);
    char *o = read_file(out, NULL);
    ck_assert_msg(rc == 1 && o && strstr(o, "tcId 1 (line ") &&
                      strstr(o, "[caf\xc3\xa9 \xf0\x9f\x98\x80 q\"t]"),
                  "check-block with escaped flags: exit %d, %s", rc, o ? o : "");
    free(o);
    /* a lone surrogate is not a character: bad input */
    char *lone = replace_once(edited, "\\ud83d\\ude00", "\\ud83d");
    write_file(vec, lone, strlen(lone));
    expect_one_line_exit_2(check, out, err, "Unicode", "lone high surrogate");
    free(lone);
    free(edited);

    /* A duplicate key, at the root and inside a test. */
    char *dup = replace_once(text, "\"schema\": ", "\"schema\": \"lowp_block_vectors_v1\", \"schema\": ");
    write_file(vec, dup, strlen(dup));
    expect_one_line_exit_2(run, out, err, "duplicate", "duplicate root key");
    free(dup);
    dup = replace_once(text, "{\"tcId\": 1,", "{\"tcId\": 1, \"tcId\": 1,");
    write_file(vec, dup, strlen(dup));
    expect_one_line_exit_2(run, out, err, "duplicate", "duplicate tcId key");
    free(dup);

    /* Not JSON numbers. */
    char *num = replace_once(text, "{\"tcId\": 1,", "{\"tcId\": 0x1,");
    write_file(vec, num, strlen(num));
    expect_one_line_exit_2(run, out, err, vec, "hex tcId");
    free(num);

    /* Truncated JSON: one line, exit 2 (and no leak under ASan) from both commands, at a
     * few cut points: inside the header, inside a test, before the last brace. */
    r = block_results_from(text, 0, &n);
    write_file(res, r, strlen(r));
    free(r);
    size_t len = strlen(text);
    const size_t cuts[] = {len / 50, len / 2, len - 2};
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
        write_file(vec, text, cuts[c]);
        char label[64];
        snprintf(label, sizeof label, "cut at %zu of %zu bytes", cuts[c], len);
        expect_one_line_exit_2(check, out, err, vec, label);
        expect_one_line_exit_2(run, out, err, vec, label);
    }

    free(text);
    free_list(files);
    remove_tree(tmp);
}
END_TEST

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: test_vectors <vectors-dir> <path-to-lowp>\n");
        return 2;
    }
    g_vectors_dir = argv[1];
    g_lowp = argv[2];
    snprintf(g_elem_dir, sizeof g_elem_dir, "%s/elementwise", g_vectors_dir);
    snprintf(g_block_dir, sizeof g_block_dir, "%s/block", g_vectors_dir);

    Suite *s = suite_create("vectors");
    TCase *tc = tcase_create("elementwise");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, regeneration_changes_nothing);
    tcase_add_test(tc, verify_finds_no_difference);
    tcase_add_test(tc, check_accepts_correct_results);
    tcase_add_test(tc, check_reports_a_flipped_code);
    tcase_add_test(tc, check_rejects_malformed_results);
    suite_add_tcase(s, tc);
    TCase *tb = tcase_create("block");
    tcase_set_timeout(tb, 600);
    tcase_add_test(tb, block_regeneration_changes_nothing);
    tcase_add_test(tb, block_verify_finds_no_difference);
    tcase_add_test(tb, block_check_results);
    tcase_add_test(tb, block_json_reading);
    suite_add_tcase(s, tb);
    int ran;
    int failed = lowp_test_run(s, LOWP_TEST_FORK, &ran);
    fflush(stderr);
    printf("test_vectors: %d checks, %d failed (vectors %s, lowp %s)\n", ran, failed,
           g_vectors_dir, g_lowp);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
