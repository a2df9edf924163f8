/* tools/cli_progress.c: the progress line of the long commands (attn, calibrate, stats).
 *
 * Shown only when stderr is a terminal (lowp_progress_wanted): tests and pipelines that
 * read stderr see nothing from here. One line, rewritten in place ("\r" and erase to the
 * end of the line), at most about ten times a second, and always at the last step of a
 * phase, so a finished phase never shows a stale count. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void lowp_progress_init(lowp_progress *p, const char *cmd)
{
    memset(p, 0, sizeof *p);
    p->on = lowp_progress_wanted();
    p->cmd = cmd;
    p->phase_t0 = now_s();
    p->last = -1.0;
}

void lowp_progress_phase(lowp_progress *p)
{
    p->phase_t0 = now_s();
    p->last = -1.0;
}

void lowp_progress_show(lowp_progress *p, size_t done, size_t total, const char *unit, const char *fmt, ...)
{
    if (!p->on)
        return;
    double t = now_s();
    if (done < total && p->last >= 0 && t - p->last < 0.1)
        return;
    p->last = t;
    char what[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    double el = t - p->phase_t0;
    fprintf(stderr, "\r\033[Klowp %s: %s %zu/%zu %s", p->cmd, what, done, total, unit);
    if (el >= 0.5 && done > 0)
        fprintf(stderr, " (%.3g %s/s, %.0f s)", (double)done / el, unit, el);
    fflush(stderr);
    p->shown = 1;
}

void lowp_progress_end(lowp_progress *p)
{
    if (p->on && p->shown) {
        fputc('\n', stderr);
        fflush(stderr);
    }
    p->shown = 0;
}
