/*
 * This file contains moejit_warm: a serving process compiles (or loads from the cache) every
 * layer it will run at start-up, on several threads, instead of paying for each on its first
 * request. Each spec goes through moejit_kernel_get, so warming and serving share one registry,
 * one cache and one single flight per spec; each compile runs in its own worker process, so
 * `jobs` threads keep up to `jobs` compiles going at once.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/status.h"
#include "moejit.h"
#include "runtime/context.h"

typedef struct warm_job {
    moejit_context *ctx;
    const moejit_spec *const *specs;
    size_t n;
    moejit_warm_progress_fn progress;
    void *user;
    pthread_mutex_t mu;        /* guards next, done, failed, first_error and the callback */
    size_t next, done, failed;
    moejit_status first_error; /* of the first spec that failed, in completion order */
} warm_job;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *warm_worker(void *arg)
{
    warm_job *w = arg;
    for (;;) {
        pthread_mutex_lock(&w->mu);
        size_t i = w->next < w->n ? w->next++ : w->n;
        pthread_mutex_unlock(&w->mu);
        if (i >= w->n) return NULL;
        moejit_warm_result r;
        memset(&r, 0, sizeof r);
        r.index = i;
        r.spec = w->specs[i];
        double t0 = now_s();
        int present = mj_context_has_kernel(w->ctx, w->specs[i]);
        moejit_kernel *k = NULL;
        r.status = moejit_kernel_get(w->ctx, w->specs[i], &k);
        r.seconds = now_s() - t0;
        r.message = r.status == MOEJIT_OK ? "" : moejit_last_error();
        r.compiled = r.status == MOEJIT_OK && !present && moejit_kernel_compile_seconds(k) > 0;
        pthread_mutex_lock(&w->mu);
        w->done++;
        if (r.status != MOEJIT_OK && !w->failed++) w->first_error = r.status;
        r.done = w->done;
        r.total = w->n;
        if (w->progress) w->progress(w->user, &r);
        pthread_mutex_unlock(&w->mu);
    }
}

moejit_status moejit_warm(moejit_context *ctx, const moejit_spec *const *specs, size_t n, int jobs,
                          moejit_warm_progress_fn progress, void *user, size_t *failed)
{
    if (failed) *failed = 0;
    if (!ctx || (!specs && n))
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "warm: ctx and specs must not be NULL");
    for (size_t i = 0; i < n; i++)
        if (!specs[i]) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "warm: specs[%zu] is NULL", i);
    if (jobs < 1 || jobs > 256)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "warm: jobs must be in 1..256, got %d", jobs);
    warm_job w = {.ctx = ctx, .specs = specs, .n = n, .progress = progress, .user = user};
    pthread_mutex_init(&w.mu, NULL);
    size_t threads = (size_t)jobs < n ? (size_t)jobs : n;
    pthread_t tid[256];
    size_t started = 0;
    for (; started + 1 < threads; started++)
        if (pthread_create(&tid[started], NULL, warm_worker, &w) != 0) break;
    warm_worker(&w); /* the calling thread works too, so jobs = 1 starts no thread */
    for (size_t t = 0; t < started; t++) pthread_join(tid[t], NULL);
    pthread_mutex_destroy(&w.mu);
    if (failed) *failed = w.failed;
    if (w.failed)
        return mj_fail(w.first_error, "warm: %zu of %zu specs failed (the progress callback has each message)",
                       w.failed, n);
    return MOEJIT_OK;
}
