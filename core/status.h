/*
 * status.h — the thread-local last-error message behind moejit_last_error().
 *
 * Every failing internal function returns mj_fail(status, "field: what is wrong, allowed
 * values"), which formats the message into the calling thread's buffer and returns status,
 * so that `return mj_fail(...)` is the one idiom for reporting an error.
 */
#ifndef MJ_STATUS_H
#define MJ_STATUS_H

#include "moejit.h"

/* Longest message kept; longer ones are cut (compile logs are exposed separately). */
#define MJ_ERROR_MAX 4096

moejit_status mj_fail(moejit_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Prefixes the current message with "context: " (for errors passed up a layer). */
moejit_status mj_fail_prefix(moejit_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void mj_clear_error(void);

/* Copies src into dst (always NUL-terminated, cut to cap) with every control character
 * escaped: \n \r \t as such, other C0 bytes, DEL and the UTF-8 C1 controls (U+0080..U+009F)
 * as \xHH. Messages quote input (paths, specs, arguments, file contents), which must not
 * forge lines or send escape sequences to a terminal; mj_fail applies it to every message.
 * Returns strlen(dst). */
size_t mj_escape_text(char *dst, size_t cap, const char *src);

#endif
