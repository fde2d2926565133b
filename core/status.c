/*
 * This file contains the thread-local error message and the status names.
 */
#include "core/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char t_message[MJ_ERROR_MAX];

size_t mj_escape_text(char *dst, size_t cap, const char *src)
{
    static const char hex[] = "0123456789abcdef";
    size_t n = 0;
    if (!cap) return 0;
    for (const unsigned char *p = (const unsigned char *)src; *p; p++) {
        char esc[9];
        size_t k = 0;
        unsigned c = *p;
        if (c == '\n' || c == '\r' || c == '\t') {
            esc[k++] = '\\';
            esc[k++] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
        } else if (c < 0x20 || c == 0x7f) {
            esc[k++] = '\\', esc[k++] = 'x', esc[k++] = hex[c >> 4], esc[k++] = hex[c & 15];
        } else if (c == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) {
            /* A C1 control such as U+009B (CSI), which some terminals obey like ESC [. */
            esc[k++] = '\\', esc[k++] = 'x', esc[k++] = 'c', esc[k++] = '2';
            esc[k++] = '\\', esc[k++] = 'x', esc[k++] = hex[p[1] >> 4], esc[k++] = hex[p[1] & 15];
            p++;
        } else {
            esc[k++] = (char)c;
        }
        if (n + k >= cap) break;
        memcpy(dst + n, esc, k);
        n += k;
    }
    dst[n] = '\0';
    return n;
}

moejit_status mj_fail(moejit_status status, const char *fmt, ...)
{
    char raw[MJ_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    mj_escape_text(t_message, sizeof t_message, raw);
    return status;
}

moejit_status mj_fail_prefix(moejit_status status, const char *fmt, ...)
{
    char prefix[512];
    char old[MJ_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, t_message, sizeof old);
    size_t n = strlen(prefix);
    if (n + 2 >= sizeof t_message) n = sizeof t_message - 3;
    memcpy(t_message, prefix, n);
    memcpy(t_message + n, ": ", 2);
    size_t room = sizeof t_message - n - 3;
    size_t m = strnlen(old, room);
    memcpy(t_message + n + 2, old, m);
    t_message[n + 2 + m] = '\0';
    memcpy(old, t_message, sizeof old);
    mj_escape_text(t_message, sizeof t_message, old); /* the prefix may quote input too */
    return status;
}

void mj_clear_error(void) { t_message[0] = '\0'; }

const char *moejit_last_error(void) { return t_message; }

const char *moejit_status_name(moejit_status status)
{
    /* NOTE: indexed by the persisted numbers of moejit_status. */
    static const char *const names[] = {
        "MOEJIT_OK",           "MOEJIT_ERR_INVALID_ARGUMENT", "MOEJIT_ERR_UNSUPPORTED",
        "MOEJIT_ERR_OUT_OF_MEMORY", "MOEJIT_ERR_COMPILE",      "MOEJIT_ERR_NO_DRIVER",
        "MOEJIT_ERR_NO_DEVICE", "MOEJIT_ERR_CUDA",             "MOEJIT_ERR_IO",
        "MOEJIT_ERR_CACHE_MISS", "MOEJIT_ERR_INTERNAL",        "MOEJIT_ERR_BUFFER_TOO_SMALL",
        "MOEJIT_ERR_NOT_WARMED",
    };
    if ((unsigned)status < sizeof names / sizeof names[0]) return names[status];
    return "MOEJIT_ERR_UNKNOWN";
}

const char *moejit_version(void) { return MOEJIT_VERSION_STRING; }
