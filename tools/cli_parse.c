/* tools/cli_parse.c: the one number parser of lowp's command lines, LOWP_SEED and the GPU
 * check programs (tools/cli_parse.h). Failures go through lowp_cli_fail: tools/cli.c's in the
 * lowp CLI, tools/cli_fail.c's in the stand-alone programs. */
#include "cli_parse.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

uint64_t lowp_cli_parse_u64(const char *opt, const char *s, uint64_t lo, uint64_t hi)
{
    const char *p = s;
    unsigned base = 10;
    if (*s == '\0')
        lowp_cli_fail("%s: an empty string is not a number", opt);
    if (*s == '-')
        lowp_cli_fail("%s: '%.40s' is negative (expected an integer in [%llu, %llu])", opt, s,
                      (unsigned long long)lo, (unsigned long long)hi);
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
        base = 16;
        p += 2;
    }
    uint64_t v = 0;
    int overflow = 0;
    const char *digits = p;
    for (; *p != '\0'; p++) {
        unsigned d;
        if (*p >= '0' && *p <= '9')
            d = (unsigned)(*p - '0');
        else if (base == 16 && *p >= 'a' && *p <= 'f')
            d = (unsigned)(*p - 'a' + 10);
        else if (base == 16 && *p >= 'A' && *p <= 'F')
            d = (unsigned)(*p - 'A' + 10);
        else
            break;
        /* v * base + d would exceed 2^64 - 1: remember it, keep checking the syntax */
        if (v > (UINT64_MAX - d) / base)
            overflow = 1;
        else
            v = v * base + d;
    }
    if (p == digits || *p != '\0')
        lowp_cli_fail("%s: '%.40s' is not an integer (decimal digits, or 0x and hex digits)", opt, s);
    if (overflow)
        lowp_cli_fail("%s: '%.40s' is beyond 2^64 - 1, the largest integer lowp reads", opt, s);
    if (v < lo || v > hi)
        lowp_cli_fail("%s: %.40s is out of range (expected an integer in [%llu, %llu])", opt, s,
                      (unsigned long long)lo, (unsigned long long)hi);
    return v;
}

#define SHARD_MAX ((uint64_t)1 << 20)

/* The launcher's rank: the first of the MPI launchers' pairs that is set (both names). */
static int launcher_rank(size_t *k, size_t *n)
{
    static const char *const env[][2] = {{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                         {"PMI_RANK", "PMI_SIZE"},
                                         {"SLURM_PROCID", "SLURM_NTASKS"}};
    for (size_t e = 0; e < sizeof env / sizeof env[0]; e++) {
        const char *r = getenv(env[e][0]), *z = getenv(env[e][1]);
        if (r == NULL || z == NULL)
            continue;
        *n = (size_t)lowp_cli_parse_u64(env[e][1], z, 1, SHARD_MAX);
        *k = (size_t)lowp_cli_parse_u64(env[e][0], r, 0, *n - 1);
        return 1;
    }
    return 0;
}

/* A Slurm job array's task: index SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN of
 * SLURM_ARRAY_TASK_COUNT. Only a contiguous array of step 1 (MAX - MIN + 1 = COUNT) numbers
 * its tasks 0..COUNT-1 that way; any other (--array=0,4,9 or 0-9:2) is refused, since
 * guessing would run some shards twice and others never. */
static int array_task(size_t *k, size_t *n)
{
    const char *id = getenv("SLURM_ARRAY_TASK_ID");
    if (id == NULL)
        return 0;
    const char *cnt = getenv("SLURM_ARRAY_TASK_COUNT"), *mn = getenv("SLURM_ARRAY_TASK_MIN"),
               *mx = getenv("SLURM_ARRAY_TASK_MAX");
    if (cnt == NULL || mn == NULL || mx == NULL)
        lowp_cli_fail("--shard auto: SLURM_ARRAY_TASK_ID is set without SLURM_ARRAY_TASK_COUNT, _MIN "
                      "and _MAX (give --shard K/N)");
    uint64_t c = lowp_cli_parse_u64("SLURM_ARRAY_TASK_COUNT", cnt, 1, SHARD_MAX);
    uint64_t lo = lowp_cli_parse_u64("SLURM_ARRAY_TASK_MIN", mn, 0, UINT32_MAX);
    uint64_t hi = lowp_cli_parse_u64("SLURM_ARRAY_TASK_MAX", mx, lo, UINT32_MAX);
    if (hi - lo + 1 != c)
        lowp_cli_fail("--shard auto: the job array %llu-%llu has %llu tasks, not one per index (a step "
                      "or a list): give --shard K/N", (unsigned long long)lo, (unsigned long long)hi,
                      (unsigned long long)c);
    *k = (size_t)(lowp_cli_parse_u64("SLURM_ARRAY_TASK_ID", id, lo, hi) - lo);
    *n = (size_t)c;
    return 1;
}

int lowp_cli_env_shard(size_t *k, size_t *n)
{
    size_t rk = 0, rn = 1, ak = 0, an = 1;
    int have_rank = launcher_rank(&rk, &rn), have_array = array_task(&ak, &an);
    if (!have_rank && !have_array)
        return 0;
    if ((uint64_t)an * rn > SHARD_MAX)
        lowp_cli_fail("--shard auto: %zu array tasks of %zu ranks are more than %llu shards", an, rn,
                      (unsigned long long)SHARD_MAX);
    /* array task a's ranks are shards a*rn .. a*rn + rn-1: every (task, rank) pair once */
    *k = ak * rn + rk;
    *n = an * rn;
    return 1;
}

void lowp_cli_parse_shard(const char *opt, const char *s, size_t *k, size_t *n)
{
    if (strcmp(s, "auto") == 0) {
        if (lowp_cli_env_shard(k, n))
            return;
        lowp_cli_fail("%s auto: no MPI rank in the environment (OMPI_COMM_WORLD_RANK/SIZE, "
                      "PMI_RANK/SIZE, SLURM_PROCID/NTASKS or SLURM_ARRAY_TASK_ID)", opt);
    }
    const char *slash = strchr(s, '/');
    char kbuf[64];
    if (slash == NULL || (size_t)(slash - s) >= sizeof kbuf)
        lowp_cli_fail("%s: '%.40s' is not K/N (shard K of N, 0-based) or auto", opt, s);
    memcpy(kbuf, s, (size_t)(slash - s));
    kbuf[slash - s] = '\0';
    *n = (size_t)lowp_cli_parse_u64(opt, slash + 1, 1, SHARD_MAX);
    *k = (size_t)lowp_cli_parse_u64(opt, kbuf, 0, *n - 1);
}

int64_t lowp_cli_parse_i64(const char *opt, const char *s, int64_t lo, int64_t hi)
{
    int neg = s[0] == '-';
    const char *body = s + neg;
    if (neg && !(body[0] >= '0' && body[0] <= '9'))
        lowp_cli_fail("%s: '%.40s' is not an integer (an optional '-', then decimal digits or 0x and hex digits)",
                      opt, s);
    uint64_t m = lowp_cli_parse_u64(opt, body, 0, UINT64_MAX);
    /* |v| <= 2^63 - 1 keeps the negation defined; lo > -2^63 by contract */
    if (m > (uint64_t)INT64_MAX)
        lowp_cli_fail("%s: %.40s is out of range (expected an integer in [%lld, %lld])", opt, s, (long long)lo,
                      (long long)hi);
    int64_t v = neg ? -(int64_t)m : (int64_t)m;
    if (v < lo || v > hi)
        lowp_cli_fail("%s: %.40s is out of range (expected an integer in [%lld, %lld])", opt, s, (long long)lo,
                      (long long)hi);
    return v;
}

uint64_t lowp_cli_parse_seed(const char *opt, const char *s)
{
    return lowp_cli_parse_u64(opt, s, 0, UINT64_MAX);
}

size_t lowp_cli_parse_count(const char *opt, const char *s, int allow_zero)
{
    return (size_t)lowp_cli_parse_u64(opt, s, allow_zero ? 0 : 1, (uint64_t)1 << 40);
}

static double parse_real(const char *opt, const char *s, int allow_zero)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || !(allow_zero ? v >= 0 : v > 0) || !isfinite(v))
        lowp_cli_fail("%s: '%.40s' is not a %s finite number", opt, s,
                      allow_zero ? "non-negative" : "positive");
    return v;
}

double lowp_cli_parse_positive(const char *opt, const char *s) { return parse_real(opt, s, 0); }

double lowp_cli_parse_nonnegative(const char *opt, const char *s) { return parse_real(opt, s, 1); }

size_t lowp_cli_parse_list(const char *opt, const char *s, size_t min_n, size_t max_n, uint64_t lo, uint64_t hi,
                           uint64_t *out)
{
    char buf[256];
    if (strlen(s) >= sizeof buf)
        lowp_cli_fail("%s: '%.40s...' is too long", opt, s);
    strcpy(buf, s);
    size_t items = 1;
    for (const char *p = s; *p != '\0'; p++)
        items += *p == ',';
    if (items < min_n || items > max_n) {
        if (min_n == max_n)
            lowp_cli_fail("%s: '%.60s' is not %zu comma-separated integers", opt, s, min_n);
        lowp_cli_fail("%s: '%.60s' is not %zu to %zu comma-separated integers", opt, s, min_n, max_n);
    }
    char *p = buf;
    for (size_t k = 0; k < items; k++) {
        char *comma = strchr(p, ',');
        if (comma != NULL)
            *comma = '\0';
        out[k] = lowp_cli_parse_u64(opt, p, lo, hi); /* an empty item fails here */
        if (comma != NULL)
            p = comma + 1;
    }
    return items;
}
