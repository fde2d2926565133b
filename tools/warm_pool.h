/*
 * warm_pool.h — compiling many specs with forked worker processes (`moejit warm --jobs N`).
 *
 * NVRTC does not scale with threads in one process (jit-cache-lessons.md: 16 compiles take
 * 2.3 s serially, 1.0 s with 16 threads, 0.23 s with 16 processes), so warm forks N workers.
 * They are forked before this process touches the CUDA driver (warm never does), while it
 * has a single thread. The parent hands each idle worker one job index at a time over the
 * worker's job pipe (so fast and slow compiles balance themselves) and reads one result per
 * job from the worker's result pipe. A worker compiles through the cache's single-flight path
 * (a per-key lock, so a server or another warm starting at the same time compiles nothing
 * twice) and publishes the entry; NVRTC itself runs in moejit-compile-worker, so an NVRTC
 * crash fails one job, not the worker.
 *
 * A failed compile leaves <cache>/failed/<key>/{spec.txt,source.cu,options.txt,log.txt}.
 */
#ifndef MJ_CLI_WARM_POOL_H
#define MJ_CLI_WARM_POOL_H

#include "codegen/build_inputs.h"
#include "cache/cache.h"
#include "moejit.h"

typedef struct warm_job {
    const moejit_spec *spec;
    int module;                 /* the module of a tensor-core layer (codegen/layer_modules.h),
                                   MJ_LAYER_WHOLE for a simt layer's one entry */
    char key[65];               /* the key the plan computed (checked again by the worker) */
} warm_job;

typedef struct warm_result {
    int job;                    /* index into the jobs array */
    moejit_status status;
    int present;                /* another process published it while we waited for its lock */
    double seconds;             /* wall time of the job in the worker */
    const char *message;        /* the error (first 4 KiB), "" on success */
    const char *failed_dir;     /* where the source, options and log were kept, or "" */
} warm_result;

typedef void (*warm_result_fn)(void *ctx, const warm_result *r);
/* Called about every 200 ms while waiting (progress redraws); may be NULL. */
typedef void (*warm_tick_fn)(void *ctx);

/* Runs jobs on n_workers forked processes (1..n); compile_timeout_s <= 0: the default.
 * Calls on_result once per job, in completion order. Returns MOEJIT_OK when the pool ran
 * (individual jobs may have failed), or an error when no worker could be started. */
moejit_status warm_pool_run(const warm_job *jobs, int n_jobs, int n_workers, double compile_timeout_s,
                            warm_result_fn on_result, warm_tick_fn on_tick, void *ctx);

/* One kernel through the cache's single-flight path: a valid entry is returned (*hit = 1),
 * else the spec is compiled in a moejit-compile-worker and published. On a compile failure
 * *failed_log (optional) receives NVRTC's log (caller frees). Used by the workers and by
 * `moejit inspect`. */
moejit_status cli_compile_cached(mj_cache *cache, const mj_build_inputs *in, const char *canonical,
                                 double timeout_s, mj_program *out, int *hit, char **failed_log);

#endif
