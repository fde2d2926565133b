/*
 * This file contains moejit_warm: a serving process compiles (or loads from the cache) every
 * layer it will run at start-up, on several threads, instead of paying for each on its first
 * request. Each spec goes through moejit_kernel_get, so warming and serving share one registry,
 * one cache and one single flight per spec; each compile runs in its own worker process, so
 * `jobs` threads keep up to `jobs` compiles going at once.
 *
 * The work is a list of items: a simt spec is one (its kernel), a tensor-core spec one per
 * module of its layer (codegen/layer_modules.h), so the modules of one layer compile in
 * parallel too; a spec's progress call comes when its last item finishes, naming the folder
 * its first failing item's compile kept (runtime/compile_failures.h).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codegen/build_inputs.h"
#include "codegen/layer_modules.h"
#include "core/status.h"
#include "moejit.h"
#include "runtime/compile_failures.h"
#include "runtime/context.h"

/* One spec's items as they finish. */
typedef struct warm_spec {
    size_t first_item, items, finished;
    double start, seconds;
    int compiled, present;
    moejit_status status;
    char *message;    /* owned: the first failing item's */
    char *failed_dir; /* owned: the folder that item's compile kept, or NULL */
} warm_spec;

typedef struct warm_job {
    moejit_context *ctx;
    const moejit_spec *const *specs;
    size_t n, n_items;
    size_t *item_spec;         /* [n_items]: the spec of each item */
    int *item_module;          /* [n_items]: its module, or MJ_LAYER_WHOLE for the kernel alone */
    warm_spec *per_spec;       /* [n] */
    moejit_warm_progress_fn progress;
    void *user;
    pthread_mutex_t mu;        /* guards next, done, failed, first_error, per_spec and the callback */
    size_t next, done, failed;
    moejit_status first_error; /* of the first spec that failed, in completion order */
} warm_job;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One item: the spec's kernel, then (tensor-core layers) one module of it. */
static moejit_status run_item(warm_job *w, size_t i, int *compiled)
{
    const moejit_spec *spec = w->specs[w->item_spec[i]];
    moejit_kernel *k = NULL;
    *compiled = 0;
    moejit_status st = moejit_kernel_get(w->ctx, spec, &k);
    if (st == MOEJIT_OK && w->item_module[i] != MJ_LAYER_WHOLE)
        st = mj_kernel_modules_build(k, 1u << w->item_module[i], 1, compiled);
    else if (st == MOEJIT_OK)
        *compiled = moejit_kernel_compile_seconds(k) > 0;
    return st;
}

/* The failed/<key>/ folder item i's failed compile kept, or NULL (no compile ran, or none was
 * kept): its key comes from its inputs again, as the registry does not keep a failure's. */
static char *kept_failure(const warm_job *w, size_t i, moejit_status st)
{
    if (st == MOEJIT_ERR_UNSUPPORTED || st == MOEJIT_ERR_INVALID_ARGUMENT) return NULL;
    mj_build_inputs in;
    if (mj_build_inputs_make_module(w->specs[w->item_spec[i]], w->item_module[i], mj_embedded_headers,
                                    mj_embedded_headers_len, &in) != MOEJIT_OK)
        return NULL;
    char dir[MJ_CACHE_PATH_MAX + 96];
    const int kept = mj_compile_failure_dir(w->ctx->cache, in.key.hex, dir, sizeof dir);
    mj_build_inputs_free(&in);
    return kept ? strdup(dir) : NULL;
}

/* Records item i's outcome, taking message and failed_dir (NULL when it succeeded); the spec's
 * last item reports the spec (caller holds w->mu). */
static void finish_item(warm_job *w, size_t i, moejit_status st, int compiled, char *message, char *failed_dir)
{
    warm_spec *s = &w->per_spec[w->item_spec[i]];
    s->compiled |= compiled;
    if (st != MOEJIT_OK && s->status == MOEJIT_OK) {
        s->status = st;
        s->message = message, message = NULL;
        s->failed_dir = failed_dir, failed_dir = NULL;
    }
    free(message);
    free(failed_dir);
    if (++s->finished < s->items) return;
    s->seconds = now_s() - s->start;
    moejit_warm_result r;
    memset(&r, 0, sizeof r);
    r.index = w->item_spec[i];
    r.spec = w->specs[r.index];
    r.status = s->status;
    r.message = s->status == MOEJIT_OK ? "" : s->message ? s->message : "(out of memory keeping the message)";
    r.compiled = s->status == MOEJIT_OK && !s->present && s->compiled;
    r.seconds = s->seconds;
    r.failed_dir = s->status != MOEJIT_OK && s->failed_dir ? s->failed_dir : "";
    w->done++;
    if (s->status != MOEJIT_OK && !w->failed++) w->first_error = s->status;
    r.done = w->done;
    r.total = w->n;
    if (w->progress) w->progress(w->user, &r);
}

static void *warm_worker(void *arg)
{
    warm_job *w = arg;
    for (;;) {
        pthread_mutex_lock(&w->mu);
        size_t i = w->next < w->n_items ? w->next++ : w->n_items;
        if (i < w->n_items && w->per_spec[w->item_spec[i]].start == 0) {
            warm_spec *s = &w->per_spec[w->item_spec[i]];
            s->start = now_s();
            s->present = mj_context_has_kernel(w->ctx, w->specs[w->item_spec[i]]) &&
                         w->item_module[i] == MJ_LAYER_WHOLE;
        }
        pthread_mutex_unlock(&w->mu);
        if (i >= w->n_items) return NULL;
        int compiled = 0;
        moejit_status st = run_item(w, i, &compiled);
        char *message = st != MOEJIT_OK ? strdup(moejit_last_error()) : NULL; /* before the lookup */
        char *failed_dir = st != MOEJIT_OK ? kept_failure(w, i, st) : NULL;
        pthread_mutex_lock(&w->mu);
        finish_item(w, i, st, compiled, message, failed_dir);
        pthread_mutex_unlock(&w->mu);
    }
}

/* The items of every spec, in spec order. */
static moejit_status plan_items(warm_job *w)
{
    size_t n_items = 0;
    for (size_t i = 0; i < w->n; i++) {
        const int m = mj_layer_module_count(w->specs[i]);
        n_items += m > 0 ? (size_t)m : 1;
    }
    w->item_spec = calloc(n_items ? n_items : 1, sizeof *w->item_spec);
    w->item_module = calloc(n_items ? n_items : 1, sizeof *w->item_module);
    w->per_spec = calloc(w->n ? w->n : 1, sizeof *w->per_spec);
    if (!w->item_spec || !w->item_module || !w->per_spec)
        return mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "warm: out of memory");
    for (size_t i = 0; i < w->n; i++) {
        const int m = mj_layer_module_count(w->specs[i]);
        w->per_spec[i].first_item = w->n_items;
        w->per_spec[i].items = m > 0 ? (size_t)m : 1;
        for (int j = 0; j < (m > 0 ? m : 1); j++) {
            w->item_spec[w->n_items] = i;
            w->item_module[w->n_items++] = m > 0 ? j : MJ_LAYER_WHOLE;
        }
    }
    return MOEJIT_OK;
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
    moejit_status st = plan_items(&w);
    if (st == MOEJIT_OK) {
        pthread_mutex_init(&w.mu, NULL);
        size_t threads = (size_t)jobs < w.n_items ? (size_t)jobs : w.n_items;
        pthread_t tid[256];
        size_t started = 0;
        for (; started + 1 < threads; started++)
            if (pthread_create(&tid[started], NULL, warm_worker, &w) != 0) break;
        warm_worker(&w); /* the calling thread works too, so jobs = 1 starts no thread */
        for (size_t t = 0; t < started; t++) pthread_join(tid[t], NULL);
        pthread_mutex_destroy(&w.mu);
    }
    for (size_t i = 0; w.per_spec && i < n; i++) {
        free(w.per_spec[i].message);
        free(w.per_spec[i].failed_dir);
    }
    free(w.per_spec);
    free(w.item_spec);
    free(w.item_module);
    if (st != MOEJIT_OK) return st;
    if (failed) *failed = w.failed;
    if (w.failed)
        return mj_fail(w.first_error, "warm: %zu of %zu specs failed (the progress callback has each message)",
                       w.failed, n);
    return MOEJIT_OK;
}
