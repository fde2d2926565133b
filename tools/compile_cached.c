/*
 * This file contains cli_compile_cached (compile_cached.h): the cache's get-or-build with an
 * NVRTC compile in a worker process as its build.
 */
#include "tools/compile_cached.h"

#include <stdlib.h>
#include <string.h>

#include "codegen/nvrtc_compile.h"
#include "core/status.h"

typedef struct build_ctx {
    const mj_build_inputs *in;
    const char *canonical;
    double timeout_s;
} build_ctx;

static moejit_status build(void *arg, mj_program *out)
{
    const build_ctx *b = arg;
    mj_compile_request req = {
        .source = &b->in->source,
        .arch = b->in->arch,
        .headers = mj_embedded_headers,
        .n_headers = mj_embedded_headers_len,
        .timeout_s = b->timeout_s,
    };
    moejit_status st = mj_nvrtc_compile(&req, out);
    if (st == MOEJIT_OK && !out->canonical_spec && !(out->canonical_spec = strdup(b->canonical)))
        st = mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "compile: out of memory");
    return st;
}

moejit_status cli_compile_cached(mj_cache *cache, const mj_build_inputs *in, const char *canonical,
                                 double timeout_s, mj_program *out, int *hit)
{
    build_ctx b = {in, canonical, timeout_s};
    return mj_cache_get_or_build(cache, &in->key, in->preimage.data ? in->preimage.data : "", canonical, build, &b,
                                 out, hit);
}
