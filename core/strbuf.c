/*
 * This file contains the growable text buffer and the exact hex-float formatter.
 */
#include "core/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void mj_buf_free(mj_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    b->failed = 0;
}

void mj_buf_reset(mj_buf *b)
{
    b->len = 0;
    b->failed = 0;
    if (b->data) b->data[0] = '\0';
}

int mj_buf_ok(const mj_buf *b) { return !b->failed; }

static int reserve(mj_buf *b, size_t extra)
{
    if (b->failed) return 0;
    if (b->len + extra + 1 <= b->cap) return 1;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1) cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p) {
        b->failed = 1;
        return 0;
    }
    b->data = p;
    b->cap = cap;
    return 1;
}

void mj_buf_append(mj_buf *b, const void *data, size_t n)
{
    if (!reserve(b, n)) return;
    if (n) memcpy(b->data + b->len, data, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void mj_buf_puts(mj_buf *b, const char *s) { mj_buf_append(b, s, strlen(s)); }

void mj_buf_printf(mj_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !reserve(b, (size_t)n)) {
        b->failed = 1;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void mj_buf_hexfloat(mj_buf *b, float f)
{
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    unsigned sign = bits >> 31, exp = (bits >> 23) & 0xff;
    uint32_t man = bits & 0x7fffff;
    char out[32];
    size_t n = 0;
    if (sign) out[n++] = '-';
    if (exp == 0xff) { /* never produced for validated values, but keep it total */
        mj_buf_puts(b, man ? (sign ? "-nan" : "nan") : (sign ? "-inf" : "inf"));
        return;
    }
    int e = exp ? (int)exp - 127 : (man ? -126 : 0);
    out[n++] = '0';
    out[n++] = 'x';
    out[n++] = exp ? '1' : '0';
    /* 23 mantissa bits shifted to 24 = 6 hex digits; trailing zero digits dropped. */
    uint32_t m24 = man << 1;
    int digits = 6;
    while (digits > 0 && (m24 & 0xf) == 0) {
        m24 >>= 4;
        digits--;
    }
    if (digits) {
        out[n++] = '.';
        for (int i = digits - 1; i >= 0; i--) out[n++] = "0123456789abcdef"[(m24 >> (4 * i)) & 0xf];
    }
    out[n] = '\0';
    mj_buf_printf(b, "%sp%+d", out, e);
}

char *mj_buf_take(mj_buf *b)
{
    if (b->failed) {
        mj_buf_free(b);
        return NULL;
    }
    if (!b->data) mj_buf_append(b, "", 0);
    char *s = b->data;
    b->data = NULL;
    b->len = b->cap = 0;
    return s;
}
