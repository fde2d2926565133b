/*
 * This file is a placeholder: it builds on every call and stores nothing. The disk cache
 * (issue 3) replaces it; the interface in cache.h stays.
 */
#include "cache.h"

#include <stdlib.h>

#include "status.h"

struct mj_cache {
    int unused;
};

moejit_status mj_cache_open(const moejit_options *opts, mj_cache **out)
{
    (void)opts;
    *out = calloc(1, sizeof **out);
    return *out ? MOEJIT_OK : mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "cache: out of memory");
}

void mj_cache_close(mj_cache *cache) { free(cache); }

moejit_status mj_cache_get_or_build(mj_cache *cache, const mj_key *key, const char *preimage,
                                    const char *canonical_spec, mj_build_fn build,
                                    void *build_ctx, mj_program *out, int *hit)
{
    (void)cache, (void)key, (void)preimage, (void)canonical_spec;
    *hit = 0;
    return build(build_ctx, out);
}
