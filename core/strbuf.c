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

/* The length of the well-formed UTF-8 sequence at s (RFC 3629: no overlong forms, no
 * surrogates, nothing above U+10FFFF), or minus the length of its maximal ill-formed subpart. */
static int utf8_sequence(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    if (c < 0x80) return 1;
    int len;
    unsigned lo = 0x80, hi = 0xbf; /* the range of the second byte */
    if (c >= 0xc2 && c <= 0xdf) len = 2;
    else if (c >= 0xe0 && c <= 0xef) len = 3, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
    else if (c >= 0xf0 && c <= 0xf4) len = 4, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
    else return -1;
    for (int i = 1; i < len; i++) {
        if ((size_t)i >= n || s[i] < (i == 1 ? lo : 0x80) || s[i] > (i == 1 ? hi : 0xbf)) return -i;
    }
    return len;
}

void mj_buf_put_utf8(mj_buf *b, const char *s, size_t n)
{
    if (!s || !n) {
        mj_buf_append(b, "", 0);
        return;
    }
    const unsigned char *p = (const unsigned char *)s;
    size_t run = 0; /* well-formed bytes not yet appended */
    for (size_t i = 0; i < n;) {
        int k = utf8_sequence(p + i, n - i);
        if (k > 0) {
            i += (size_t)k;
            run += (size_t)k;
            continue;
        }
        mj_buf_append(b, p + i - run, run);
        mj_buf_append(b, "\xef\xbf\xbd", 3);
        run = 0;
        i += (size_t)-k;
    }
    mj_buf_append(b, p + n - run, run);
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
