/*
 * include_closure.h — which headers a translation unit reads: the headers its include lines
 * reach, directly or through other headers.
 *
 * The cache key hashes exactly these headers and NVRTC is handed exactly these, so editing a
 * header only invalidates the kernels that read it, and a header the scan missed would fail
 * the compile instead of entering a binary unkeyed.
 *
 * The scan over-approximates, never under: every `#include "x"` / `<x>` (also #include_next,
 * #import, the %: digraph, __has_include("x")) counts wherever it stands, whatever #if
 * surrounds it and even inside a comment; "x" names every header whose name is x or ends in
 * "/x" (so a lookup relative to the including file's folder is covered); line splices are
 * undone first. An include the scan cannot resolve to names (`#include MACRO`, a ".."
 * segment, an absolute path, an unterminated name) reaches every header.
 */
#ifndef MJ_INCLUDE_CLOSURE_H
#define MJ_INCLUDE_CLOSURE_H

#include <stddef.h>

#include "moejit.h"
#include "core/header.h"

/* Sets reached[i] to 1 when headers[i] is in the include closure of source, else 0 (reached
 * holds n_headers bytes). The include graph of mj_embedded_headers is scanned once per
 * process; any other header array is scanned on each call. */
moejit_status mj_include_closure(const char *source, size_t source_len, const mj_header *headers,
                                 size_t n_headers, unsigned char *reached);

/* Scans the embedded headers' include graph now (thread-safe, idempotent). */
moejit_status mj_include_closure_prewarm(void);

#endif
