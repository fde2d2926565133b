/*
 * cache.h — the on-disk kernel cache as the registry sees it: look a key up, or build it
 * once (per machine) under a per-key lock and publish the result atomically.
 */
#ifndef MJ_CACHE_H
#define MJ_CACHE_H

#include "key.h"
#include "moejit.h"
#include "program.h"

typedef struct mj_cache mj_cache;

typedef enum mj_cache_mode {
    MJ_CACHE_READ_WRITE = 0,
    MJ_CACHE_READ_ONLY,   /* never writes; a miss compiles in memory */
    MJ_CACHE_OFFLINE,     /* a miss is MOEJIT_ERR_CACHE_MISS naming the spec */
    MJ_CACHE_OFF          /* no disk at all */
} mj_cache_mode;

/* Resolves the configuration (opts, then environment, then defaults; a bad value is an
 * error naming the setting) and opens the cache directory. opts may be NULL. */
moejit_status mj_cache_open(const moejit_options *opts, mj_cache **out);
void mj_cache_close(mj_cache *cache);

/* Builds a program on a miss (emit + NVRTC); called at most once per call. */
typedef moejit_status (*mj_build_fn)(void *build_ctx, mj_program *out);

/* On a hit, fills *out from the entry (after checking its checksum and that its stored
 * spec equals canonical_spec) and sets *hit = 1. On a miss, takes the key's lock, looks
 * again, else calls build, publishes the entry (in read-write mode) and returns the
 * program with *hit = 0. A corrupt entry is quarantined and rebuilt; a failure to write
 * (ENOSPC, EACCES, EROFS) still returns the built program, with one warning on stderr. */
moejit_status mj_cache_get_or_build(mj_cache *cache, const mj_key *key, const char *preimage,
                                    const char *canonical_spec, mj_build_fn build,
                                    void *build_ctx, mj_program *out, int *hit);

#endif
