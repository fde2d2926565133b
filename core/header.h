/*
 * header.h — a named source text: a template header handed to NVRTC by its include name.
 *
 * Code generation hands headers to the compiler and the key hashes the ones a compile
 * reads, so the type sits below both.
 */
#ifndef MJ_HEADER_H
#define MJ_HEADER_H

#include <stddef.h>

typedef struct mj_header {
    const char *name;     /* include name, e.g. "mj/simt_layer.cuh" */
    const char *data;     /* contents (NUL-terminated) */
    size_t size;          /* bytes, without the NUL */
} mj_header;

#endif
