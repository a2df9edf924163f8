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
 *    format), exit 1 with a failure line naming the line of a flipped code (and, with
 *    --errors N, N such lines and one counting the rest), exit 2 with one line naming the
 *    results file and line on malformed or short results, and on unknown options (writing
 *    nothing).
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

static int is_elem_file(const char *name)
{
    const size_t l = strlen(name);
    return strncmp(name, "f32_to_", 7) == 0 && l >= 5 && strcmp(name + l - 4, ".txt") == 0;
}

static int is_block_file(const char *name)
{
    const size_t l = strlen(name);
    return l >= 6 && strcmp(name + l - 5, ".json") == 0;
}

/* Sorted names of the files in dir that keep accepts (NULL-terminated; *n set). */
static char **list_files(const char *dir, int (*keep)(const char *), size_t *n)
{
    DIR *d = opendir(dir);
    ck_assert_msg(d != NULL, "cannot read directory %s: %s", dir, strerror(errno));
    size_t cap = 16, k = 0;
    char **v = malloc(cap * sizeof *v);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!keep(e->d_name))
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

/* A test's scratch space: a fresh temporary directory (under TMPDIR or /tmp, removed by
 * remove_tree) and the names of the files the test writes there: a results file, and
 * lowp's stdout and stderr (run_lowp). */
typedef struct {
    char dir[4096], res[4200], out[4200], err[4200];
} scratch;

static void scratch_make(scratch *w)
{
    const char *t = getenv("TMPDIR");
    snprintf(w->dir, sizeof w->dir, "%s/vectors-test-XXXXXX", (t && *t) ? t : "/tmp");
    ck_assert_msg(mkdtemp(w->dir) != NULL, "mkdtemp failed: %s", strerror(errno));
    snprintf(w->res, sizeof w->res, "%s/results.txt", w->dir);
    snprintf(w->out, sizeof w->out, "%s/out", w->dir);
    snprintf(w->err, sizeof w->err, "%s/err", w->dir);
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

/* How the check tests start: the check-test vector file (its path, and its text returned)
 * and the test's scratch space. */
static char *check_start(char *path, size_t len, scratch *w)
{
    snprintf(path, len, "%s/%s", g_elem_dir, CHECK_FILE);
    char *text = lowp_test_read_file(path, NULL);
    if (text == NULL) {
        size_t k;
        char **names = list_files(g_elem_dir, is_elem_file, &k);
        ck_assert_msg(k > 0, "no vector files in %s", g_elem_dir);
        snprintf(path, len, "%s/%s", g_elem_dir, names[0]);
        free_list(names);
        text = lowp_test_read_file(path, NULL);
    }
    ck_assert_msg(text != NULL, "cannot read %s", path);
    scratch_make(w);
    return text;
}

/* Results file text: the code column of every case line, one per line. With flip_case >= 0
 * that case's code has its low bit flipped and *flip_line gets the case's line number
 * (flip_line may be NULL when flip_case is -1). */
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

/* A committed vector set, as the regeneration test reads and regenerates it. */
typedef struct {
    const char *dir;   /* committed: <vectors-dir>/elementwise or /block */
    const char *sub;   /* its name in the temporary directory gen writes into */
    const char *gen;   /* the sub-command: "gen" or "gen-block" */
    int (*is_file)(const char *name);
    /* where the files record the seed and commit they were generated with */
    const char *seed_key, *commit_key;
    int json; /* 1: JSON string members (lowp_test_json_string); 0: "# key:" header lines */
} vec_set;

static void recorded(const vec_set *v, const char *text, const char *key, char *out, size_t len)
{
    out[0] = '\0';
    if (v->json)
        lowp_test_json_string(text, NULL, key, out, len);
    else
        header_value(text, key, out, len);
}

/* Regeneration changes nothing: `lowp vectors GEN` with the seed and commit the committed
 * files record (the same in every file: one run made them) writes the same file names and
 * the same bytes. Each difference is a line on stderr; the first is in the failure. */
static void check_regeneration(const vec_set *v)
{
    size_t n_old;
    char **old = list_files(v->dir, v->is_file, &n_old);
    ck_assert_msg(n_old > 0, "no vector files in %s", v->dir);
    char seed[64] = "", commit[96] = "";
    for (size_t i = 0; i < n_old; i++) {
        char p[8192], sd[64], c[96];
        snprintf(p, sizeof p, "%s/%s", v->dir, old[i]);
        char *t = lowp_test_read_file(p, NULL);
        ck_assert_msg(t != NULL, "cannot read %s", p);
        recorded(v, t, v->seed_key, sd, sizeof sd);
        recorded(v, t, v->commit_key, c, sizeof c);
        free(t);
        ck_assert_msg(sd[0] && c[0], "%s does not record its %s and %s", old[i], v->seed_key,
                      v->commit_key);
        if (i == 0) {
            snprintf(seed, sizeof seed, "%s", sd);
            snprintf(commit, sizeof commit, "%s", c);
        }
        ck_assert_msg(strcmp(sd, seed) == 0 && strcmp(c, commit) == 0,
                      "%s has seed %s commit %s but %s has seed %s commit %s: the set was not "
                      "generated in one run",
                      old[i], sd, c, old[0], seed, commit);
    }

    char gen_dir[4200];
    scratch w;
    scratch_make(&w);
    snprintf(gen_dir, sizeof gen_dir, "%s/%s", w.dir, v->sub);
    const char *args[] = {"vectors", v->gen, "--dir", gen_dir, "--seed", seed, "--commit", commit,
                          NULL};
    int rc = run_lowp(args, w.out, w.err);
    char *errtext = lowp_test_read_file(w.err, NULL);
    ck_assert_msg(rc == 0, "lowp vectors %s exited %d: %s", v->gen, rc, errtext ? errtext : "");
    free(errtext);

    size_t n_new;
    char **fresh = list_files(gen_dir, v->is_file, &n_new);
    size_t differ = 0;
    char first[1024] = "";
    for (size_t i = 0, j = 0; i < n_old || j < n_new;) {
        int c = (i == n_old) ? 1 : (j == n_new) ? -1 : strcmp(old[i], fresh[j]);
        if (c != 0) {
            const char *nm = c < 0 ? old[i] : fresh[j];
            fprintf(stderr, "%s: %s\n", nm,
                    c < 0 ? "committed, but no longer generated" : "generated, but not committed");
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
        snprintf(pa, sizeof pa, "%s/%s", v->dir, old[i]);
        snprintf(pb, sizeof pb, "%s/%s", gen_dir, fresh[j]);
        size_t na, nb;
        char *a = lowp_test_read_file(pa, &na), *b = lowp_test_read_file(pb, &nb);
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
    fprintf(stderr, "%s regeneration: %zu committed files, %zu generated, %zu differ\n", v->gen,
            n_old, n_new, differ);
    free_list(old);
    free_list(fresh);
    remove_tree(w.dir);
    ck_assert_msg(differ == 0,
                  "%zu files in %s differ from a regeneration (first: %s); if the change is "
                  "intended, run 'lowp vectors %s' and commit %s",
                  differ, v->dir, first, v->gen, v->dir);
}

START_TEST(regeneration_changes_nothing)
{
    const vec_set v = {g_elem_dir, "elementwise", "gen", is_elem_file, "seed", "commit", 0};
    check_regeneration(&v);
}
END_TEST

/* `lowp vectors CMD --dir DIR` (verify or verify-block) exits 0 and reports no difference
 * and no missing or extra file. */
static void check_verify(const char *cmd, const char *dir)
{
    scratch w;
    scratch_make(&w);
    const char *args[] = {"vectors", cmd, "--dir", dir, NULL};
    int rc = run_lowp(args, w.out, w.err);
    char *o = lowp_test_read_file(w.out, NULL), *e = lowp_test_read_file(w.err, NULL);
    ck_assert_msg(rc == 0, "lowp vectors %s exited %d:\n%s%s", cmd, rc, o ? o : "", e ? e : "");
    ck_assert_msg(o != NULL && strstr(o, " 0 differences, 0 missing or extra files") != NULL,
                  "unexpected %s summary: %s", cmd, o ? o : "");
    free(o);
    free(e);
    remove_tree(w.dir);
}

START_TEST(verify_finds_no_difference)
{
    check_verify("verify", g_elem_dir);
}
END_TEST

START_TEST(check_accepts_correct_results)
{
    char path[8192];
    size_t cases;
    scratch w;
    char *text = check_start(path, sizeof path, &w);

    char *r = results_from(text, -1, NULL, &cases);
    write_file(w.res, r, strlen(r));
    const char *args[] = {"vectors", "check", path, "--results", w.res, NULL};
    int rc = run_lowp(args, w.out, w.err);
    char *o = lowp_test_read_file(w.out, NULL);
    char want[64];
    snprintf(want, sizeof want, "%zu cases, 0 mismatches", cases);
    ck_assert_msg(rc == 0 && o && strstr(o, want), "check on correct codes: exit %d, output %s",
                  rc, o ? o : "");
    free(o);

    /* The vector file itself is a valid results file ("INPUT CODE # flags" lines). */
    const char *args2[] = {"vectors", "check", path, "--results", path, NULL};
    rc = run_lowp(args2, w.out, w.err);
    o = lowp_test_read_file(w.out, NULL);
    ck_assert_msg(rc == 0 && o && strstr(o, want), "check on the vector file: exit %d, output %s",
                  rc, o ? o : "");
    free(o);
    free(r);
    free(text);
    remove_tree(w.dir);
}
END_TEST

START_TEST(check_reports_a_flipped_code)
{
    char path[8192];
    size_t cases;
    long flip_line = -1;
    scratch w;
    char *text = check_start(path, sizeof path, &w);

    char *probe = results_from(text, -1, &flip_line, &cases);
    free(probe);
    char *r = results_from(text, (long)(cases / 2), &flip_line, &cases);
    write_file(w.res, r, strlen(r));
    const char *args[] = {"vectors", "check", path, "--results", w.res, NULL};
    int rc = run_lowp(args, w.out, w.err);
    char *o = lowp_test_read_file(w.out, NULL);
    char want_line[64], want_sum[64];
    snprintf(want_line, sizeof want_line, " line %ld: input 0x", flip_line);
    snprintf(want_sum, sizeof want_sum, "%zu cases, 1 mismatches", cases);
    ck_assert_msg(rc == 1, "check on a flipped code exited %d, not 1: %s", rc, o ? o : "");
    ck_assert_msg(o && strstr(o, want_line) && strstr(o, want_sum),
                  "check output does not name line %ld: %s", flip_line, o ? o : "");
    free(o);
    free(r);
    free(text);
    remove_tree(w.dir);
}
END_TEST

/* --errors N: at most N failure lines, then one line counting the rest when there is a
 * rest; --errors 0: every line. The mismatches: the saturating file's codes checked against
 * the non-saturating file of the same format and mode (the same inputs; they differ on
 * every overflowing one). Runs: --errors 1, --errors <the count>, --errors 0. */
START_TEST(check_limits_failure_lines)
{
    char sat[8192], nosat[8192], lim[32] = "1";
    snprintf(sat, sizeof sat, "%s/f32_to_e4m3.cuda.rn.sat.txt", g_elem_dir);
    snprintf(nosat, sizeof nosat, "%s/f32_to_e4m3.cuda.rn.nosat.txt", g_elem_dir);
    scratch w;
    scratch_make(&w);
    size_t bad = 0;
    for (int run = 0; run < 3; run++) {
        const char *args[] = {"vectors", "check", sat, "--results", nosat, "--errors", lim, NULL};
        ck_assert_int_eq(run_lowp(args, w.out, w.err), 1);
        char *o = lowp_test_read_file(w.out, NULL);
        ck_assert_ptr_nonnull(o);
        const char *sum = strstr(o, " cases, ");
        ck_assert_msg(sum != NULL && sscanf(sum, " cases, %zu mismatches", &bad) == 1 && bad > 2,
                      "no mismatch count in: %s", o);
        size_t lines = 0, more = 0;
        for (const char *p = o; (p = strstr(p, " line ")) != NULL; p++)
            lines++;
        const char *m = strstr(o, " more mismatches not shown; --errors 0 shows all)\n");
        if (m != NULL)
            ck_assert(sscanf(strrchr(o, '('), "(%zu more", &more) == 1);
        ck_assert_msg(lines == (run == 0 ? 1 : bad) && more == (run == 0 ? bad - 1 : 0) &&
                          (m != NULL) == (run == 0),
                      "--errors %s: %zu failure lines, %zu counted as not shown, of %zu", lim,
                      lines, more, bad);
        free(o);
        snprintf(lim, sizeof lim, "%zu", run == 0 ? bad : 0);
    }
    remove_tree(w.dir);
}
END_TEST

START_TEST(check_rejects_malformed_results)
{
    char path[8192];
    size_t cases;
    scratch w;
    char *text = check_start(path, sizeof path, &w);
    char *r = results_from(text, -1, NULL, &cases);

    /* Line 3 is not hex. */
    char *bad = malloc(strlen(r) + 8);
    const char *third = strchr(strchr(r, '\n') + 1, '\n') + 1;
    size_t head = (size_t)(third - r);
    memcpy(bad, r, head);
    strcpy(bad + head, "zz");
    strcat(bad, strchr(third, '\n'));
    write_file(w.res, bad, strlen(bad));
    const char *args[] = {"vectors", "check", path, "--results", w.res, NULL};
    int rc = run_lowp(args, w.out, w.err);
    char *e = lowp_test_read_file(w.err, NULL);
    char want[4300];
    snprintf(want, sizeof want, "%s line 3:", w.res);
    ck_assert_msg(rc == 2, "check on malformed results exited %d, not 2", rc);
    ck_assert_msg(e && strstr(e, want) && strchr(e, '\n') == e + strlen(e) - 1,
                  "want one line naming %s, got: %s", want, e ? e : "");
    free(e);

    /* Too few results. */
    write_file(w.res, r, strlen(r) / 2 - (strlen(r) / 2) % 3);
    rc = run_lowp(args, w.out, w.err);
    e = lowp_test_read_file(w.err, NULL);
    ck_assert_msg(rc == 2 && e && strstr(e, "results, but"), "short results: exit %d, %s", rc,
                  e ? e : "");
    free(e);

    /* Unknown options and a missing --results write nothing and exit 2. */
    char gen_dir[4200];
    snprintf(gen_dir, sizeof gen_dir, "%s/gen", w.dir);
    const char *gen_bad[] = {"vectors", "gen", "--dir", gen_dir, "--bogus", NULL};
    ck_assert_int_eq(run_lowp(gen_bad, w.out, w.err), 2);
    ck_assert_msg(access(gen_dir, F_OK) != 0, "gen with a bad option created %s", gen_dir);
    const char *chk_bad[] = {"vectors", "check", path, NULL};
    ck_assert_int_eq(run_lowp(chk_bad, w.out, w.err), 2);
    const char *chk_missing[] = {"vectors", "check", path, "--results", gen_dir, NULL};
    ck_assert_int_eq(run_lowp(chk_missing, w.out, w.err), 2);

    free(bad);
    free(r);
    free(text);
    remove_tree(w.dir);
}
END_TEST


/* ----------------------------------------------------------------------------- */
/* Block vectors. */

START_TEST(block_regeneration_changes_nothing)
{
    const vec_set v = {g_block_dir, "block", "gen-block", is_block_file, "seed", "lowpCommit", 1};
    check_regeneration(&v);
}
END_TEST

START_TEST(block_verify_finds_no_difference)
{
    check_verify("verify-block", g_block_dir);
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

/* The block file the check tests use: nvfp4.trtllm.json when present (4-bit codes, block
 * scales, a global scale), else the first; its path in path, its text returned. */
static char *block_file(char *path, size_t len)
{
    size_t nf;
    char **files = list_files(g_block_dir, is_block_file, &nf);
    ck_assert_msg(nf > 0, "no block vector files in %s", g_block_dir);
    const char *pick = files[0];
    for (size_t i = 0; i < nf; i++)
        if (strcmp(files[i], "nvfp4.trtllm.json") == 0)
            pick = files[i];
    snprintf(path, len, "%s/%s", g_block_dir, pick);
    free_list(files);
    char *text = lowp_test_read_file(path, NULL);
    ck_assert_msg(text != NULL, "cannot read %s", path);
    return text;
}

START_TEST(block_check_results)
{
    char path[8192];
    char *text = block_file(path, sizeof path);
    scratch w;
    scratch_make(&w);
    const char *check[] = {"vectors", "check-block", path, "--results", w.res, NULL};

    /* The file's own codes. */
    size_t n;
    char *r = block_results_from(text, 0, &n);
    write_file(w.res, r, strlen(r));
    int rc = run_lowp(check, w.out, w.err);
    char *o = lowp_test_read_file(w.out, NULL), want[128];
    snprintf(want, sizeof want, "%zu tests, 0 mismatches", n);
    ck_assert_msg(rc == 0 && o && strstr(o, want), "check-block on the file's codes: exit %d, %s",
                  rc, o ? o : "");
    free(o);

    /* block.c's codes through run-block. */
    const char *run[] = {"vectors", "run-block", path, "--out", w.res, NULL};
    rc = run_lowp(run, w.out, w.err);
    ck_assert_msg(rc == 0, "run-block exited %d", rc);
    rc = run_lowp(check, w.out, w.err);
    o = lowp_test_read_file(w.out, NULL);
    ck_assert_msg(rc == 0 && o && strstr(o, want), "check-block on run-block output: exit %d, %s",
                  rc, o ? o : "");
    free(o);

    /* One flipped code: exit 1, a line naming the tcId. */
    long flip = (long)(n / 2);
    free(r);
    r = block_results_from(text, flip, &n);
    write_file(w.res, r, strlen(r));
    rc = run_lowp(check, w.out, w.err);
    o = lowp_test_read_file(w.out, NULL);
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
    write_file(w.res, bad, strlen(bad));
    rc = run_lowp(check, w.out, w.err);
    char *e = lowp_test_read_file(w.err, NULL);
    ck_assert_msg(rc == 2 && e && strstr(e, w.res) && strchr(e, '\n') == e + strlen(e) - 1,
                  "check-block on a bad code: exit %d, stderr %s", rc, e ? e : "");
    free(e);
    char *cut = strrchr(r, '\n');
    *cut = '\0';
    cut = strrchr(r, '\n');
    cut[1] = '\0';
    write_file(w.res, r, strlen(r));
    rc = run_lowp(check, w.out, w.err);
    e = lowp_test_read_file(w.err, NULL);
    ck_assert_msg(rc == 2 && e && strstr(e, "is missing"),
                  "check-block on a missing test: exit %d, %s", rc, e ? e : "");
    free(e);
    const char *bad_opt[] = {"vectors", "check-block", path, "--bogus", NULL};
    ck_assert_int_eq(run_lowp(bad_opt, w.out, w.err), 2);

    free(bad);
    free(r);
    free(text);
    remove_tree(w.dir);
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
    char *e = lowp_test_read_file(err, NULL);
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
    char path[8192], vec[4200];
    char *text = block_file(path, sizeof path);
    const char *pick = strrchr(path, '/') + 1;
    scratch w;
    scratch_make(&w);
    snprintf(vec, sizeof vec, "%s/%s", w.dir, pick);
    const char *check[] = {"vectors", "check-block", vec, "--results", w.res, NULL};
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
    write_file(w.res, r, strlen(r));
    free(r);
    int rc = run_lowp(check, w.out, w.err);
    char *o = lowp_test_read_file(w.out, NULL);
    ck_assert_msg(rc == 1 && o && strstr(o, "tcId 1 (line ") &&
                      strstr(o, "[caf\xc3\xa9 \xf0\x9f\x98\x80 q\"t]"),
                  "check-block with escaped flags: exit %d, %s", rc, o ? o : "");
    free(o);
    /* a lone surrogate is not a character: bad input */
    char *lone = replace_once(edited, "\\ud83d\\ude00", "\\ud83d");
    write_file(vec, lone, strlen(lone));
    expect_one_line_exit_2(check, w.out, w.err, "Unicode", "lone high surrogate");
    free(lone);
    free(edited);

    /* A duplicate key, at the root and inside a test. */
    char *dup = replace_once(text, "\"schema\": ", "\"schema\": \"lowp_block_vectors_v1\", \"schema\": ");
    write_file(vec, dup, strlen(dup));
    expect_one_line_exit_2(run, w.out, w.err, "duplicate", "duplicate root key");
    free(dup);
    dup = replace_once(text, "{\"tcId\": 1,", "{\"tcId\": 1, \"tcId\": 1,");
    write_file(vec, dup, strlen(dup));
    expect_one_line_exit_2(run, w.out, w.err, "duplicate", "duplicate tcId key");
    free(dup);

    /* Not JSON numbers. */
    char *num = replace_once(text, "{\"tcId\": 1,", "{\"tcId\": 0x1,");
    write_file(vec, num, strlen(num));
    expect_one_line_exit_2(run, w.out, w.err, vec, "hex tcId");
    free(num);

    /* Truncated JSON: one line, exit 2 (and no leak under ASan) from both commands, at a
     * few cut points: inside the header, inside a test, before the last brace. */
    r = block_results_from(text, 0, &n);
    write_file(w.res, r, strlen(r));
    free(r);
    size_t len = strlen(text);
    const size_t cuts[] = {len / 50, len / 2, len - 2};
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
        write_file(vec, text, cuts[c]);
        char label[64];
        snprintf(label, sizeof label, "cut at %zu of %zu bytes", cuts[c], len);
        expect_one_line_exit_2(check, w.out, w.err, vec, label);
        expect_one_line_exit_2(run, w.out, w.err, vec, label);
    }

    free(text);
    remove_tree(w.dir);
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
    lowp_test_tcase(s, "elementwise", 600,
                    LOWP_TESTS(regeneration_changes_nothing, verify_finds_no_difference,
                               check_accepts_correct_results, check_reports_a_flipped_code,
                               check_limits_failure_lines, check_rejects_malformed_results));
    lowp_test_tcase(s, "block", 600,
                    LOWP_TESTS(block_regeneration_changes_nothing, block_verify_finds_no_difference,
                               block_check_results, block_json_reading));
    int ran;
    int failed = lowp_test_run(s, LOWP_TEST_FORK, &ran);
    fflush(stderr);
    printf("test_vectors: %d checks, %d failed (vectors %s, lowp %s)\n", ran, failed,
           g_vectors_dir, g_lowp);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
