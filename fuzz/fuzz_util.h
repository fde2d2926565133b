/*
 * fuzz_util.h — what the libFuzzer targets share: a NUL-terminated copy of the input, and a
 * failed property that aborts so that libFuzzer records the input as a crash.
 */
#ifndef MJ_FUZZ_UTIL_H
#define MJ_FUZZ_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline char *mj_fuzz_cstr(const uint8_t *data, size_t n)
{
    char *s = malloc(n + 1);
    if (!s) abort();
    memcpy(s, data, n);
    s[n] = '\0';
    return s;
}

#define MJ_FUZZ_REQUIRE(cond, ...)                                    \
    do {                                                              \
        if (!(cond)) {                                                \
            fprintf(stderr, "fuzz property failed: %s: ", #cond);     \
            fprintf(stderr, __VA_ARGS__);                             \
            fputc('\n', stderr);                                      \
            abort();                                                  \
        }                                                             \
    } while (0)

#endif
