/*
 * compile_failures.h — the cache's failed/<key>/ folders: what a failed compile was given and
 * what it said, kept for a post-mortem or a bug report.
 *
 *   <cache>/failed/<key>/spec.txt      the spec's canonical text
 *   <cache>/failed/<key>/source.cu     the generated source NVRTC compiled
 *   <cache>/failed/<key>/options.txt   NVRTC's options, one a line
 *   <cache>/failed/<key>/log.txt       NVRTC's log, then the error message
 *
 * Only a read-write cache gets them (read-only and disabled caches are never written). Keeping
 * is best effort and never changes the compile's status or message: a full disk must not hide
 * the compile error behind an I/O one.
 */
#ifndef MJ_COMPILE_FAILURES_H
#define MJ_COMPILE_FAILURES_H

#include <stddef.h>

#include "cache/cache.h"
#include "codegen/build_inputs.h"

/* Keeps in's spec, source, options, and the compile's log (may be NULL) and message. */
void mj_compile_failure_keep(mj_cache *cache, const mj_build_inputs *in, const char *canonical,
                             const char *log, const char *message);
/* Removes key's folder: a compile that succeeds makes an earlier failure's folder stale. */
void mj_compile_failure_forget(mj_cache *cache, const char *key);
/* Writes key's folder path into out; 1 when the folder exists. */
int mj_compile_failure_dir(mj_cache *cache, const char *key, char *out, size_t cap);

#endif
