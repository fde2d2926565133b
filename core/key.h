/*
 * key.h — the cache key: SHA-256 over a tagged preimage of everything that changes the
 * compiled binary.
 *
 * The preimage is text, one tagged field per line ("spec <canonical>", "header <name>
 * <sha256 of bytes>", "option <opt>", ...), so that it can be stored beside the entry and
 * diffed to explain a miss (`moejit inspect --why`). Each field is length-delimited so that
 * no two different inputs share a preimage.
 */
#ifndef MJ_KEY_H
#define MJ_KEY_H

#include <stddef.h>

#include "moejit.h"
#include "core/header.h"
#include "core/strbuf.h"

typedef struct mj_key_inputs {
    int generator_version;          /* MJ_GENERATOR_VERSION */
    const char *canonical_spec;
    const char *source;             /* the full generated source */
    size_t source_len;
    const mj_header *headers;       /* every header the compile reads (the include closure) */
    size_t n_headers;
    const char (*header_sha256)[65];/* optional: headers[i]'s SHA-256 hex, already known (the
                                       embedded headers never change in a process); NULL:
                                       hash the bytes here */
    const char *const *options;     /* compile options, in order */
    int n_options;
    const char *arch;               /* "sm_90a" */
    int nvrtc_major, nvrtc_minor;
    const char *nvrtc_build_id;     /* GNU build id of libnvrtc */
} mj_key_inputs;

typedef struct mj_key {
    char hex[65];                   /* lowercase SHA-256, NUL-terminated */
} mj_key;

/* Computes the key; when preimage is not NULL it receives the preimage text. */
moejit_status mj_key_compute(const mj_key_inputs *in, mj_key *out, mj_buf *preimage);

/* Pays libcrypto's one-time initialisation (provider and config loading, 0.6-1.9 ms on the
 * first digest of a process) once, at context creation, instead of inside the first
 * kernel lookup, which must stay under a millisecond. Thread-safe, idempotent. */
void mj_sha256_prewarm(void);

/* SHA-256 of bytes as lowercase hex (used for header digests and checksums). */
moejit_status mj_sha256_hex(const void *data, size_t n, char hex[65]);

#endif
