/* ref/common/src/why.c: lowp_why_set (see why.h). */
#include "lowp/why.h"

#include <stdarg.h>
#include <stdio.h>

int lowp_why_set(char *why, size_t why_len, const char *fmt, ...)
{
    /* why_len == 0 would make vsnprintf write nothing anyway; NULL with a length would not
     * be safe, so both are checked. vsnprintf NUL-terminates within why_len bytes. */
    if (why != NULL && why_len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, why_len, fmt, ap);
        va_end(ap);
    }
    return -1;
}
