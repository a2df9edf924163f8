/* tools/cli.c: error reporting, outputs, option values, numbers and input reading for
 * the CLI. */
#define _XOPEN_SOURCE 700 /* realpath */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char pending_tmp[4096 + 64]; /* the target (< 4064 bytes, out_classify) + ".tmp.<pid>" */
static char pending_final[4096];
static FILE *pending_file;
/* 1 when pending_file writes the path itself (a device or FIFO): nothing to unlink. */
static int pending_in_place;

void lowp_cli_fail(const char *fmt, ...)
{
    va_list ap;
    fflush(stdout);
    fputs("lowp: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    if (pending_file != NULL) {
        fclose(pending_file);
        pending_file = NULL;
        if (!pending_in_place)
            unlink(pending_tmp);
    }
    exit(LOWP_EXIT_USAGE);
}

/* How an output path is written (lowp_out_open's rules in cli.h). */
enum out_kind { OUT_REPLACE, OUT_IN_PLACE };

/* Classify path; *target receives the path to write (the resolved target of a symlink).
 * Refusals fail with one line naming opt. */
static enum out_kind out_classify(const char *opt, const char *path, char *target, size_t target_len)
{
    struct stat st;
    if (strlen(path) + 32 >= target_len)
        lowp_cli_fail("%s: output path is too long: %.64s...", opt, path);
    snprintf(target, target_len, "%s", path);
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT)
            return OUT_REPLACE;
        lowp_cli_fail("%s: cannot write '%s': %s", opt, path, strerror(errno));
    }
    if (S_ISLNK(st.st_mode)) {
        char resolved[PATH_MAX];
        if (realpath(path, resolved) == NULL)
            lowp_cli_fail("%s: '%s' is a symlink that does not resolve (%s); refusing to replace it", opt,
                          path, strerror(errno));
        if (strlen(resolved) + 32 >= target_len)
            lowp_cli_fail("%s: the target of '%s' is too long a path", opt, path);
        snprintf(target, target_len, "%s", resolved);
        if (stat(resolved, &st) != 0)
            lowp_cli_fail("%s: cannot write '%s': %s", opt, path, strerror(errno));
    }
    if (S_ISREG(st.st_mode))
        return OUT_REPLACE;
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))
        return OUT_IN_PLACE;
    lowp_cli_fail("%s: '%s' is %s, not a file lowp can write", opt, path,
                  S_ISDIR(st.st_mode) ? "a directory" : S_ISBLK(st.st_mode) ? "a block device" : "a socket");
}

void lowp_out_check(const char *opt, const char *path)
{
    if (path == NULL || strcmp(path, "-") == 0)
        return;
    char target[4096];
    if (out_classify(opt, path, target, sizeof target) == OUT_IN_PLACE) {
        if (access(target, W_OK) != 0)
            lowp_cli_fail("%s: cannot write '%s': %s", opt, path, strerror(errno));
        return;
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", target);
    char *slash = strrchr(dir, '/');
    if (slash == NULL)
        strcpy(dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    if (access(dir, W_OK | X_OK) != 0)
        lowp_cli_fail("%s: cannot write '%s': %s", opt, path, strerror(errno));
}

FILE *lowp_out_open(const char *path, int binary)
{
    if (path == NULL || strcmp(path, "-") == 0)
        return stdout;
    char target[4096];
    enum out_kind kind = out_classify("output", path, target, sizeof target);
    if (kind == OUT_IN_PLACE) {
        /* "w" on a device or FIFO opens it for writing; O_TRUNC does nothing there. */
        pending_in_place = 1;
        pending_file = fopen(target, binary ? "wb" : "w");
    } else {
        pending_in_place = 0;
        snprintf(pending_tmp, sizeof pending_tmp, "%s.tmp.%ld", target, (long)getpid());
        pending_file = fopen(pending_tmp, binary ? "wb" : "w");
    }
    if (pending_file == NULL)
        lowp_cli_fail("cannot write '%s': %s", path, strerror(errno));
    snprintf(pending_final, sizeof pending_final, "%s", target);
    return pending_file;
}

void lowp_out_commit(FILE *f)
{
    if (f == stdout) {
        if (fflush(stdout) != 0)
            lowp_cli_fail("cannot write to standard output: %s", strerror(errno));
        return;
    }
    if (f != pending_file)
        return;
    if (fflush(f) != 0 || ferror(f)) {
        int e = errno;
        lowp_cli_fail("cannot write '%s': %s", pending_final, strerror(e));
    }
    if (fclose(f) != 0) {
        int e = errno;
        pending_file = NULL;
        if (!pending_in_place)
            unlink(pending_tmp);
        lowp_cli_fail("cannot write '%s': %s", pending_final, strerror(e));
    }
    pending_file = NULL;
    if (pending_in_place)
        return;
    if (rename(pending_tmp, pending_final) != 0) {
        int e = errno;
        unlink(pending_tmp);
        lowp_cli_fail("cannot write '%s': %s", pending_final, strerror(e));
    }
}

void lowp_cli_check_not_input(const char *out_opt, const char *out_path, const char *in_opt,
                              const char *in_path)
{
    if (out_path == NULL || in_path == NULL || strcmp(out_path, "-") == 0 || strcmp(in_path, "-") == 0)
        return;
    struct stat so, si;
    if (stat(out_path, &so) != 0 || stat(in_path, &si) != 0)
        return;
    /* Devices and FIFOs are written in place and read as streams: /dev/null as both is
     * harmless, so only regular files count. */
    if (S_ISREG(so.st_mode) && so.st_dev == si.st_dev && so.st_ino == si.st_ino)
        lowp_cli_fail("%s '%s' is the same file as %s '%s': refusing to overwrite an input", out_opt, out_path,
                      in_opt, in_path);
}

void lowp_cli_check_distinct_outputs(const char *opt1, const char *path1, const char *opt2, const char *path2)
{
    if (path1 == NULL || path2 == NULL || strcmp(path1, "-") == 0 || strcmp(path2, "-") == 0)
        return;
    struct stat s1, s2;
    int e1 = stat(path1, &s1) == 0, e2 = stat(path2, &s2) == 0;
    /* a device or FIFO takes both streams in place (--csv /dev/null --json /dev/null) */
    if ((e1 && !S_ISREG(s1.st_mode)) || (e2 && !S_ISREG(s2.st_mode)))
        return;
    if (strcmp(path1, path2) == 0 || (e1 && e2 && s1.st_dev == s2.st_dev && s1.st_ino == s2.st_ino))
        lowp_cli_fail("%s '%s' and %s '%s' are the same file: one output would replace the other", opt1, path1,
                      opt2, path2);
}

/* The names of the value options given so far in this run (a process runs one command). */
static const char *seen_options[64];
static size_t n_seen_options;

const char *lowp_cli_option_repeated(int argc, char **argv, int *i)
{
    if (*i + 1 >= argc)
        lowp_cli_fail("option %s needs a value", argv[*i]);
    return argv[++*i];
}

const char *lowp_cli_option_value(int argc, char **argv, int *i)
{
    const char *opt = argv[*i];
    if (*i + 1 >= argc)
        lowp_cli_fail("option %s needs a value", opt);
    for (size_t k = 0; k < n_seen_options; k++)
        if (strcmp(seen_options[k], opt) == 0)
            lowp_cli_fail("option %s is given twice (once is enough; it takes one value)", opt);
    if (n_seen_options < sizeof seen_options / sizeof seen_options[0])
        seen_options[n_seen_options++] = opt;
    return argv[++*i];
}

void lowp_cli_flag_once(const char *flag, const char **slot)
{
    if (*slot != NULL) {
        if (strcmp(*slot, flag) == 0)
            lowp_cli_fail("option %s is given twice", flag);
        lowp_cli_fail("option %s conflicts with %s: give one", flag, *slot);
    }
    *slot = flag;
}

unsigned char *lowp_read_all(const char *path, size_t *len)
{
    int use_stdin = (path == NULL || strcmp(path, "-") == 0);
    FILE *f = use_stdin ? stdin : fopen(path, "rb");
    if (f == NULL)
        lowp_cli_fail("cannot read '%s': %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = malloc(cap);
    if (buf == NULL)
        lowp_cli_fail("out of memory reading input");
    for (;;) {
        if (n == cap) {
            cap *= 2;
            unsigned char *nb = realloc(buf, cap);
            if (nb == NULL)
                lowp_cli_fail("out of memory reading input");
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    if (ferror(f))
        lowp_cli_fail("cannot read '%s': %s", use_stdin ? "standard input" : path, strerror(errno));
    if (!use_stdin)
        fclose(f);
    *len = n;
    return buf;
}

int lowp_progress_wanted(void)
{
    return isatty(STDERR_FILENO);
}

void lowp_machine_description(char *buf, size_t len)
{
    char host[256] = "unknown-host", cpu[256] = "unknown CPU";
    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "unknown-host");
    host[sizeof host - 1] = '\0';
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f != NULL) {
        char line[512];
        while (fgets(line, sizeof line, f) != NULL) {
            if (strncmp(line, "model name", 10) == 0) {
                char *colon = strchr(line, ':');
                if (colon != NULL) {
                    snprintf(cpu, sizeof cpu, "%s", colon + 2);
                    cpu[strcspn(cpu, "\n")] = '\0';
                }
                break;
            }
        }
        fclose(f);
    }
    snprintf(buf, len, "%s, %s, %ld cores", host, cpu, sysconf(_SC_NPROCESSORS_ONLN));
}

void lowp_cli_cpu_isa(char *buf, size_t len)
{
    if (len == 0)
        return;
    buf[0] = '\0';
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    /* __builtin_cpu_supports takes a string literal, hence the macro */
#define LOWP_ISA_FEATURE(name)                                                                    \
    if (__builtin_cpu_supports(name) && strlen(buf) + sizeof name + 1 < len)                        \
    snprintf(buf + strlen(buf), len - strlen(buf), "%s%s", buf[0] ? " " : "", name)
    LOWP_ISA_FEATURE("sse4.2");
    LOWP_ISA_FEATURE("avx");
    LOWP_ISA_FEATURE("avx2");
    LOWP_ISA_FEATURE("fma");
    LOWP_ISA_FEATURE("avx512f");
    LOWP_ISA_FEATURE("avx512bw");
    LOWP_ISA_FEATURE("avx512dq");
    LOWP_ISA_FEATURE("avx512vl");
#undef LOWP_ISA_FEATURE
#endif
    if (buf[0] == '\0')
        snprintf(buf, len, "(none of the x86-64 vector extensions)");
}

void lowp_cli_python(char *buf, size_t len)
{
    const char *env = getenv("LOWP_PYTHON");
    if (env != NULL && env[0] != '\0') {
        snprintf(buf, len, "%s", env);
        return;
    }
#ifdef LOWP_SOURCE_DIR
    snprintf(buf, len, "%s/.venv/bin/python", LOWP_SOURCE_DIR);
    if (access(buf, X_OK) == 0)
        return;
#endif
    snprintf(buf, len, "python3");
}

void lowp_source_commit(char *buf, size_t len)
{
    snprintf(buf, len, "unknown");
#ifdef LOWP_SOURCE_DIR
    char cmd[4352];
    snprintf(cmd, sizeof cmd, "git -C '%s' rev-parse --short=12 HEAD 2>/dev/null", LOWP_SOURCE_DIR);
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        return;
    char line[128];
    if (fgets(line, sizeof line, p) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        if (line[0] != '\0')
            snprintf(buf, len, "%s", line);
    }
    pclose(p);
#endif
}
