/* tests/lib/lowp_test.c: see lowp_test.h. */
#include "lowp_test.h"

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
