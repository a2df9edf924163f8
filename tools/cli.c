/* tools/cli.c: error reporting, atomic outputs and input reading for the CLI. */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char pending_tmp[4096];
static char pending_final[4096];
static FILE *pending_file;

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
        unlink(pending_tmp);
    }
    exit(LOWP_EXIT_USAGE);
}

FILE *lowp_out_open(const char *path, int binary)
{
    if (path == NULL || strcmp(path, "-") == 0)
        return stdout;
    if (strlen(path) + 32 >= sizeof pending_tmp)
        lowp_cli_fail("output path is too long: %.64s...", path);
    snprintf(pending_final, sizeof pending_final, "%s", path);
    snprintf(pending_tmp, sizeof pending_tmp, "%s.tmp.%ld", path, (long)getpid());
    pending_file = fopen(pending_tmp, binary ? "wb" : "w");
    if (pending_file == NULL)
        lowp_cli_fail("cannot write '%s': %s", path, strerror(errno));
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
        pending_file = NULL;
        unlink(pending_tmp);
        lowp_cli_fail("cannot write '%s': %s", pending_final, strerror(errno));
    }
    pending_file = NULL;
    if (rename(pending_tmp, pending_final) != 0) {
        int e = errno;
        unlink(pending_tmp);
        lowp_cli_fail("cannot write '%s': %s", pending_final, strerror(e));
    }
}

const char *lowp_cli_option_value(int argc, char **argv, int *i)
{
    if (*i + 1 >= argc)
        lowp_cli_fail("option %s needs a value", argv[*i]);
    return argv[++*i];
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
