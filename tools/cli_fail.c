/* tools/cli_fail.c: lowp_cli_fail for the stand-alone programs that use tools/cli_parse.h
 * (the GPU check programs): "<program>: <message>", exit status 2. They write their report
 * only after parsing their options, so there is no pending output to remove. */
#define _GNU_SOURCE /* program_invocation_short_name */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli_parse.h"

void lowp_cli_fail(const char *fmt, ...)
{
    va_list ap;
    fflush(stdout);
    fprintf(stderr, "%s: ", program_invocation_short_name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(2);
}
