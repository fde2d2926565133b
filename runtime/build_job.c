/*
 * This file contains the compile callback every kernel build hands the cache
 * (mj_cache_get_or_build): a simt layer's one program and each module of a tensor-core layer
 * compile through it, counted in the context's compile_count. A failure keeps what NVRTC was
 * given and said in the cache's failed/<key>/ (compile_failures.h); a success removes that
 * folder, which is then stale.
 */
#include "codegen/build_inputs.h"
#include "core/status.h"
#include "runtime/compile_failures.h"
#include "runtime/context.h"

/* The cache's build callback: the NVRTC compile, in a worker process. */
moejit_status mj_context_build_program(void *arg, mj_program *out)
{
    mj_build_job *job = arg;
    atomic_fetch_add(&job->ctx->compile_count, 1);
    moejit_status st = mj_build_inputs_compile(job->in, job->spec->canonical, job->ctx->compile_timeout_s,
                                               job->ctx->settings.compile_worker, out);
    if (st != MOEJIT_OK)
        mj_compile_failure_keep(job->ctx->cache, job->in, job->spec->canonical, out->log, moejit_last_error());
    else
        mj_compile_failure_forget(job->ctx->cache, job->in->key.hex);
    return st;
}
