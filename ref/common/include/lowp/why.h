/* ref/common/include/lowp/why.h: the library's one way to report a refusal (private header).
 *
 * Every lowp function that can refuse its input takes a caller's buffer (why, why_len) and
 * fills it with one sentence, without a trailing newline, for the CLI to print after
 * "lowp: ". lowp_why_set is that fill: it formats into why (truncated to why_len - 1 bytes
 * and always NUL-terminated when why_len > 0; nothing written when why is NULL or why_len
 * is 0) and returns -1, so a refusal reads `return lowp_why_set(why, why_len, "...");`.
 *
 * The bottom layer of ref/ (ref/CMakeLists.txt): every layer, gpu/ host code and the fuzz
 * targets include it as "lowp/why.h". Not an installed header.
 * The symbol is exported by liblowp (it has the lowp_ prefix) but is not public API. */
#ifndef LOWP_COMMON_WHY_H
#define LOWP_COMMON_WHY_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

int lowp_why_set(char *why, size_t why_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#ifdef __cplusplus
}
#endif

#endif
