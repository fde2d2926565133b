/*
 * strbuf.h — a growable byte buffer for building text (canonical forms, generated
 * source, key preimages) without fixed-size truncation.
 *
 * Allocation failure is sticky: after one failed append every later append is a no-op and
 * mj_buf_ok() returns 0, so callers check once at the end instead of after every append.
 */
#ifndef MJ_STRBUF_H
#define MJ_STRBUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct mj_buf {
    char *data;   /* NUL-terminated when len > 0 or after any append */
    size_t len;
    size_t cap;
    int failed;   /* an allocation failed: contents are incomplete */
} mj_buf;

#define MJ_BUF_INIT {NULL, 0, 0, 0}

void mj_buf_free(mj_buf *b);
void mj_buf_reset(mj_buf *b);          /* length 0, keeps the allocation */
int mj_buf_ok(const mj_buf *b);        /* 1 when no append failed */
void mj_buf_append(mj_buf *b, const void *data, size_t n);
void mj_buf_puts(mj_buf *b, const char *s);
void mj_buf_printf(mj_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Exact, locale- and libc-independent hex form of a float: "0x1.b3b646p+0", "-0x0p+0",
 * "0x1.fffffep+127", subnormals as "0x0.000002p-126". strtof() reads it back bit-exactly. */
void mj_buf_hexfloat(mj_buf *b, float f);
/* Appends the n bytes of s with every ill-formed UTF-8 sequence (each maximal subpart, as
 * Unicode recommends) replaced by U+FFFD, so that text from any byte source (a path, an
 * environment variable) is valid UTF-8 where it must be, as in JSON. */
void mj_buf_put_utf8(mj_buf *b, const char *s, size_t n);
/* Detaches the string (caller frees); returns NULL if an append failed. */
char *mj_buf_take(mj_buf *b);

#endif
