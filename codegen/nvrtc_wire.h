/*
 * nvrtc_wire.h — the protocol between mj_nvrtc_compile and moejit-compile-worker, and the
 * encoders both sides use, so that the two ends of the socket are written from one place.
 */
#ifndef MJ_NVRTC_WIRE_H
#define MJ_NVRTC_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "core/strbuf.h"

/* The protocol between mj_nvrtc_compile and the worker, over a socket on the worker's stdin
 * and stdout. Integers are little-endian; str = u32 length + that many bytes (no NUL).
 *   request  = "MJRQ" u32 version, str program name, str source,
 *              u32 n_options, n_options x str option,
 *              u32 n_headers, n_headers x (str include name, str bytes),
 *              u32 n_kernels, n_kernels x str kernel name
 *   response = "MJRS" u32 version, i32 nvrtcResult, str log, str cubin (empty unless 0)
 * Nothing may follow either message. Bump MJ_WIRE_VERSION on any change. */
#define MJ_WIRE_REQUEST_MAGIC "MJRQ"
#define MJ_WIRE_RESPONSE_MAGIC "MJRS"
#define MJ_WIRE_VERSION 1u
#define MJ_WIRE_MAX_STR (512u << 20) /* longest str either side accepts */
#define MJ_WIRE_MAX_COUNT 4096u      /* most options / headers / kernels in a request */

/* Appends v little-endian. */
void mj_wire_put_u32(mj_buf *b, uint32_t v);
/* Appends a str: u32 length, then the bytes. */
void mj_wire_put_str(mj_buf *b, const void *data, size_t n);

#endif
