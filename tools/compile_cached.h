/*
 * compile_cached.h — one kernel through the cache's single-flight path without a context
 * (`moejit inspect` compiles exactly the module it shows, from inputs it built itself).
 */
#ifndef MJ_CLI_COMPILE_CACHED_H
#define MJ_CLI_COMPILE_CACHED_H

#include "cache/cache.h"
#include "codegen/build_inputs.h"
#include "moejit.h"

/* A valid entry for in's key is returned (*hit = 1), else in is compiled in a
 * moejit-compile-worker (timeout_s <= 0: the default) and published. */
moejit_status cli_compile_cached(mj_cache *cache, const mj_build_inputs *in, const char *canonical,
                                 double timeout_s, mj_program *out, int *hit);

#endif
