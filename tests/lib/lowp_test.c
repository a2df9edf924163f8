/* tests/lib/lowp_test.c: see lowp_test.h. */
#include "lowp_test.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int lowp_test_seed_parse(const char *s, uint64_t *out)
{
    if (s == NULL || *s == '\0')
        return -1;
    unsigned base = 10;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        base = 16;
        s += 2;
        if (*s == '\0') /* "0x" alone */
            return -1;
    }
    uint64_t v = 0;
    for (; *s != '\0'; s++) {
        unsigned d;
        if (*s >= '0' && *s <= '9')
            d = (unsigned)(*s - '0');
        else if (base == 16 && *s >= 'a' && *s <= 'f')
            d = (unsigned)(*s - 'a') + 10;
        else if (base == 16 && *s >= 'A' && *s <= 'F')
            d = (unsigned)(*s - 'A') + 10;
        else
            return -1;
        /* v * base + d <= UINT64_MAX, checked without overflowing */
        if (v > (UINT64_MAX - d) / base)
            return -1;
        v = v * base + d;
    }
    *out = v;
    return 0;
}

uint64_t lowp_test_seed(const char *prog, uint64_t dflt)
{
    const char *env = getenv("LOWP_SEED");
    if (env == NULL || *env == '\0')
        return dflt;
    uint64_t v;
    if (lowp_test_seed_parse(env, &v) != 0) {
        fprintf(stderr,
                "%s: LOWP_SEED=\"%s\" is not a decimal or 0x hexadecimal number below 2^64\n",
                prog, env);
        exit(2);
    }
    return v;
}

int lowp_test_tier(const char *prog, int argc, char **argv)
{
    if (argc <= 1)
        return 0;
    if (argc == 2 && strcmp(argv[1], "--full") == 0)
        return 1;
    fprintf(stderr, "usage: %s [--full]\n", prog);
    exit(2);
}

int lowp_test_run(Suite *s, int mode, int *ran)
{
    SRunner *sr = srunner_create(s);
    if (mode == LOWP_TEST_NOFORK)
        srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    if (ran != NULL)
        *ran = srunner_ntests_run(sr);
    srunner_free(sr);
    return failed;
}

int lowp_test_main(Suite *s, int mode)
{
    return lowp_test_run(s, mode, NULL) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

TCase *lowp_test_tcase(Suite *s, const char *name, double timeout, const TTest *const *tests,
                       size_t n)
{
    TCase *tc = tcase_create(name);
    if (timeout > 0)
        tcase_set_timeout(tc, timeout);
    for (size_t i = 0; i < n; i++)
        tcase_add_test(tc, tests[i]);
    suite_add_tcase(s, tc);
    return tc;
}

void lowp_test_say(const char *prog, const char *fmt, ...)
{
    static atomic_int said;
    const int k = atomic_fetch_add(&said, 1) + 1;
    if (k > LOWP_TEST_SAY_MAX) {
        if (k == LOWP_TEST_SAY_MAX + 1)
            printf("%s: further failures not shown\n", prog);
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
}

void *lowp_test_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL) {
        fprintf(stderr, "out of memory (%zu bytes)\n", n);
        exit(2);
    }
    return p;
}

void lowp_test_push_f64(lowp_test_f64_list *b, double x)
{
    if (b->n == b->cap) {
        const size_t cap = b->cap ? 2 * b->cap : 4096;
        double *v = realloc(b->v, cap * sizeof *v);
        if (v == NULL) {
            fprintf(stderr, "out of memory (%zu bytes)\n", cap * sizeof *v);
            exit(2);
        }
        b->v = v;
        b->cap = cap;
    }
    b->v[b->n++] = x;
}

char *lowp_test_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    size_t cap = (size_t)1 << 16, n = 0;
    char *buf = lowp_test_xmalloc(cap + 1);
    for (;;) {
        if (n == cap) {
            char *nb = realloc(buf, 2 * cap + 1);
            if (nb == NULL) {
                fprintf(stderr, "out of memory (%zu bytes)\n", 2 * cap + 1);
                exit(2);
            }
            buf = nb;
            cap *= 2;
        }
        const size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    const int err = ferror(f);
    fclose(f);
    if (err) {
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    if (len != NULL)
        *len = n;
    return buf;
}

const char *lowp_test_json_string(const char *text, const char *end, const char *key, char *out,
                                  size_t len)
{
    char pat[128];
    const int pl = snprintf(pat, sizeof pat, "\"%s\": \"", key);
    if (pl < 0 || (size_t)pl >= sizeof pat || len == 0)
        return NULL;
    const char *q = strstr(text, pat);
    if (q == NULL || (end != NULL && q >= end))
        return NULL;
    q += pl;
    size_t k = strcspn(q, "\"");
    if (k >= len)
        k = len - 1;
    memcpy(out, q, k);
    out[k] = '\0';
    return out;
}
