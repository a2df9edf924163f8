/* ref/common/include/lowp/names.h: an enumeration's names as a table (private header).
 *
 * Each lowp enumeration with text names (formats, recipes, workload kinds, ...) keeps them
 * in a table indexed by the enum value; the name of a value and the value of a name are
 * these two lookups on it. Not an installed header (ref/CMakeLists.txt installs no common
 * header); static inline, so nothing is added to liblowp. */
#ifndef LOWP_COMMON_NAMES_H
#define LOWP_COMMON_NAMES_H

#include <string.h>

/* names[k] for 0 <= k < n, else fallback (an out-of-range value, cast from anything). */
static inline const char *lowp_name_of(const char *const *names, int n, int k,
                                       const char *fallback)
{
    return k >= 0 && k < n ? names[k] : fallback;
}

/* The k with names[k] equal to name (exactly, case included), or -1 when none is or name
 * is NULL. */
static inline int lowp_name_index(const char *const *names, int n, const char *name)
{
    for (int k = 0; name != NULL && k < n; k++)
        if (strcmp(name, names[k]) == 0)
            return k;
    return -1;
}

#endif
