/*
 * This file contains cli_compile_cached (compile_cached.h): the cache's get-or-build with an
 * NVRTC compile in a worker process as its build.
 */
#include "tools/compile_cached.h"

#include "codegen/build_inputs.h"

typedef struct build_ctx {
    const mj_build_inputs *in;
    const char *canonical;
    double timeout_s;
} build_ctx;

static moejit_status build(void *arg, mj_program *out)
{
    const build_ctx *b = arg;
    return mj_build_inputs_compile(b->in, b->canonical, b->timeout_s, NULL, out);
}

moejit_status cli_compile_cached(mj_cache *cache, const mj_build_inputs *in, const char *canonical,
                                 double timeout_s, mj_program *out, int *hit)
{
    build_ctx b = {in, canonical, timeout_s};
    return mj_cache_get_or_build(cache, &in->key, in->preimage.data ? in->preimage.data : "", canonical, build, &b,
                                 out, hit);
}
