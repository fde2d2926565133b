/*
 * This file contains moejit_context and its kernel registry: moejit_kernel_get turns a spec
 * into a compiled (and, with a GPU, loaded) kernel, at most once per spec and context.
 *
 * The registry is a chained hash table keyed by the spec's canonical text (hashed once, when
 * the immutable spec was made). A hit costs one lock, one bucket walk and one strcmp. A miss
 * inserts an entry in state COMPILING and builds it WITHOUT the lock, so other specs build in
 * parallel while threads asking for the same spec wait on the context's condition variable.
 * A failed build hands its status and message to every waiter and leaves the registry, so a
 * later call may try again (a compile timeout, say, need not be permanent).
 */
#include "runtime/context.h"
#include "runtime/abi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/build_inputs.h"
#include "codegen/layer_modules.h"
#include "core/matrix.h"
#include "codegen/nvrtc_compile.h"
#include "core/status.h"

/* Initial bucket count; the table doubles when entries outnumber buckets. */
#define k_initial_buckets 64

typedef enum entry_state { ENTRY_COMPILING = 0, ENTRY_READY, ENTRY_FAILED } entry_state;

struct mj_registry_entry {
    mj_registry_entry *next;   /* bucket chain */
    uint64_t hash;             /* spec->hash */
    char *canonical;           /* owned copy of the spec's canonical text */
    entry_state state;
    int waiters;               /* threads blocked on this entry; the last one frees a FAILED one */
    moejit_kernel *kernel;     /* READY */
    moejit_status status;      /* FAILED: what every waiter re-raises */
    char *message;             /* FAILED: owned copy of the builder's message (may be NULL) */
};

/* ---- options ------------------------------------------------------------------------ */

static moejit_status copy_string(const char *s, char **out)
{
    *out = NULL;
    if (!s) return MOEJIT_OK;
    *out = strdup(s);
    return *out ? MOEJIT_OK : mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "context: out of memory");
}

moejit_status moejit_context_create(const moejit_options *opts, moejit_context **out)
{
    if (!out) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "context_create: out must not be NULL");
    *out = NULL;
    moejit_options given; /* the caller's fields, the ones its struct_size lacks at their defaults */
    if (opts) {
        moejit_status st = mj_abi_copy("moejit_options", opts, MOEJIT_OPTIONS_SIZE_V1, sizeof given, &given);
        if (st != MOEJIT_OK) return st;
        opts = &given;
    }
    if (opts && opts->device < 0)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "options.device: must be a CUDA device ordinal >= 0; got %d", opts->device);
    if (opts && opts->compile_only != 0 && opts->compile_only != 1)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "options.compile_only: must be 0 or 1; got %lld",
                       (long long)opts->compile_only);

    moejit_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "context: out of memory");
    if (opts) ctx->opts = *opts;
    moejit_status st = copy_string(ctx->opts.cache_dir, &ctx->cache_dir);
    if (st == MOEJIT_OK) st = copy_string(ctx->opts.cache_mode, &ctx->cache_mode);
    ctx->opts.cache_dir = ctx->cache_dir;
    ctx->opts.cache_mode = ctx->cache_mode;
    if (st == MOEJIT_OK) st = mj_settings_resolve(&ctx->opts, NULL, &ctx->settings);
    ctx->compile_timeout_s = ctx->settings.compile_timeout_s;
    if (st == MOEJIT_OK) {
        ctx->n_buckets = k_initial_buckets;
        ctx->buckets = calloc(ctx->n_buckets, sizeof *ctx->buckets);
        if (!ctx->buckets) st = mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "context: out of memory");
    }
    if (st == MOEJIT_OK) st = mj_cache_open_settings(&ctx->settings, &ctx->cache);
    if (st == MOEJIT_OK) st = mj_build_inputs_prewarm();
    if (st != MOEJIT_OK) {
        free(ctx->buckets);
        free(ctx->cache_dir);
        free(ctx->cache_mode);
        free(ctx);
        return st;
    }
    pthread_mutex_init(&ctx->lock, NULL);
    pthread_cond_init(&ctx->settled, NULL);
    atomic_init(&ctx->compile_count, 0);
    atomic_init(&ctx->build_count, 0);
    *out = ctx;
    return MOEJIT_OK;
}

static void kernel_destroy(moejit_kernel *k)
{
    if (!k) return;
    mj_module_unload(&k->module);
    mj_kernel_modules_free(k);
    mj_program_free(&k->program);
    moejit_spec_destroy(k->spec);
    free(k->unloaded_message);
    free(k);
}

static void entry_free(mj_registry_entry *e)
{
    free(e->canonical);
    free(e->message);
    free(e);
}

void moejit_context_destroy(moejit_context *ctx)
{
    if (!ctx) return;
    /* NOTE: destroying a context while another thread still uses it is the caller's bug;
     * an entry still COMPILING then has no kernel yet and its builder owns nothing here. */
    for (size_t i = 0; i < ctx->n_buckets; i++) {
        mj_registry_entry *e = ctx->buckets[i];
        while (e) {
            mj_registry_entry *next = e->next;
            kernel_destroy(e->kernel);
            entry_free(e);
            e = next;
        }
    }
    free(ctx->buckets);
    mj_cache_close(ctx->cache);
    pthread_cond_destroy(&ctx->settled);
    pthread_mutex_destroy(&ctx->lock);
    free(ctx->cache_dir);
    free(ctx->cache_mode);
    free(ctx);
}

/* ---- the hash table (caller holds ctx->lock) --------------------------------------------- */

static mj_registry_entry *find(const moejit_context *ctx, uint64_t hash, const char *canonical)
{
    for (mj_registry_entry *e = ctx->buckets[hash & (ctx->n_buckets - 1)]; e; e = e->next)
        if (e->hash == hash && strcmp(e->canonical, canonical) == 0) return e;
    return NULL;
}

/* Doubles the bucket array; a failed allocation only leaves chains longer. */
static void grow(moejit_context *ctx)
{
    size_t n = ctx->n_buckets * 2;
    mj_registry_entry **b = calloc(n, sizeof *b);
    if (!b) return;
    for (size_t i = 0; i < ctx->n_buckets; i++) {
        mj_registry_entry *e = ctx->buckets[i];
        while (e) {
            mj_registry_entry *next = e->next;
            e->next = b[e->hash & (n - 1)];
            b[e->hash & (n - 1)] = e;
            e = next;
        }
    }
    free(ctx->buckets);
    ctx->buckets = b;
    ctx->n_buckets = n;
}

static mj_registry_entry *insert(moejit_context *ctx, uint64_t hash, const char *canonical)
{
    mj_registry_entry *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->canonical = strdup(canonical);
    if (!e->canonical) {
        free(e);
        return NULL;
    }
    e->hash = hash;
    e->state = ENTRY_COMPILING;
    if (ctx->n_entries >= ctx->n_buckets) grow(ctx);
    mj_registry_entry **head = &ctx->buckets[hash & (ctx->n_buckets - 1)];
    e->next = *head;
    *head = e;
    ctx->n_entries++;
    return e;
}

static void unlink_entry(moejit_context *ctx, mj_registry_entry *e)
{
    mj_registry_entry **p = &ctx->buckets[e->hash & (ctx->n_buckets - 1)];
    while (*p && *p != e) p = &(*p)->next;
    if (*p) {
        *p = e->next;
        ctx->n_entries--;
    }
}

/* Waits until e is built by another thread and returns its outcome (caller holds the lock). */
static moejit_status await_entry(moejit_context *ctx, mj_registry_entry *e, moejit_kernel **out)
{
    e->waiters++;
    while (e->state == ENTRY_COMPILING) pthread_cond_wait(&ctx->settled, &ctx->lock);
    e->waiters--;
    if (e->state == ENTRY_READY) {
        *out = e->kernel;
        return MOEJIT_OK;
    }
    /* FAILED: the builder unlinked e already; the last thread to look at it frees it. */
    moejit_status st = e->message ? mj_fail(e->status, "%s", e->message)
                                  : mj_fail(e->status, "kernel_get: the build in another thread "
                                                       "failed (its message was lost: out of memory)");
    if (e->waiters == 0) entry_free(e);
    return st;
}

/* ---- building one kernel (no lock held) ----------------------------------------------------- */

/* Keeps the reason the kernel cannot run here (the thread's current message), for forward,
 * and puts back the message the thread had before: kernel_get succeeds, and a successful
 * call leaves the caller's last error alone. */
static moejit_status leave_unloaded(moejit_kernel *k, moejit_status why, const char *saved)
{
    k->loaded = 0;
    k->unloaded_status = why;
    k->unloaded_message = strdup(moejit_last_error());
    if (!k->unloaded_message) return mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "kernel_get: out of memory");
    if (*saved)
        mj_fail(MOEJIT_OK, "%s", saved);
    else
        mj_clear_error();
    return MOEJIT_OK;
}

/* 1 when a cubin for arch runs on a device of compute capability major.minor: the same major
 * and a minor at least the cubin's; an arch-specific target ("sm_90a") only on its exact cc. */
static int arch_runs_on(const char *arch, int major, int minor)
{
    unsigned n = 0;
    char suffix = '\0';
    if (!arch || sscanf(arch, "sm_%u%c", &n, &suffix) < 1) return 1; /* let the driver judge */
    unsigned a_major = n / 10, a_minor = n % 10;
    if (a_major != (unsigned)major) return 0;
    return suffix == 'a' ? a_minor == (unsigned)minor : a_minor <= (unsigned)minor;
}

/* Loads k on the options' device when there is a driver and device and the context may load;
 * otherwise remembers why not, so that compiling and inspecting still work on a machine
 * without a GPU. */
static moejit_status load_kernel(const moejit_context *ctx, moejit_kernel *k)
{
    const mj_driver *d;
    int major = 0, minor = 0;
    char saved[MJ_ERROR_MAX];
    snprintf(saved, sizeof saved, "%s", moejit_last_error());
    if (ctx->opts.compile_only) { /* the driver is not even opened: a build machine may have none */
        mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                "moe_forward: %s was built by a compile-only context (moejit_options.compile_only), "
                "which never loads kernels; run it from a context without compile_only",
                k->spec->canonical);
        return leave_unloaded(k, MOEJIT_ERR_INVALID_ARGUMENT, saved);
    }
    moejit_status st = mj_driver_get(&d);
    if (st == MOEJIT_ERR_NO_DRIVER || st == MOEJIT_ERR_NO_DEVICE) return leave_unloaded(k, st, saved);
    if (st != MOEJIT_OK) return st;
    st = mj_driver_ensure_context(ctx->opts.device, &major, &minor);
    if (st == MOEJIT_ERR_NO_DEVICE) return leave_unloaded(k, st, saved);
    if (st != MOEJIT_OK) return st;
    const char *arch = mj_arch_target(k->spec->arch);
    if (!arch_runs_on(arch, major, minor)) {
        mj_fail(MOEJIT_ERR_NO_DEVICE,
                "spec.arch: %s kernels cannot run on the current device (compute capability "
                "%d.%d); use the device's arch or arch=native", arch, major, minor);
        return leave_unloaded(k, MOEJIT_ERR_NO_DEVICE, saved);
    }
    /* a tensor-core layer loads each module as it builds (kernel_modules.c) */
    st = k->n_modules ? MOEJIT_OK : mj_module_load(&k->program, &k->module);
    if (st != MOEJIT_OK) return mj_fail_prefix(st, "loading %s", k->spec->canonical);
    k->driver = d;
    k->loaded = 1;
    return MOEJIT_OK;
}

/* emit -> options -> key -> disk cache or NVRTC -> load. */
static moejit_status build_kernel(moejit_context *ctx, const moejit_spec *spec, moejit_kernel **out)
{
    moejit_kernel *k = calloc(1, sizeof *k);
    if (!k) return mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "kernel_get: out of memory");
    mj_build_inputs in;
    int hit = 0, have_inputs = 0;
    moejit_status st = mj_spec_clone(spec, &k->spec);
    if (st == MOEJIT_OK) have_inputs = (st = mj_build_inputs_make(spec, &in)) == MOEJIT_OK;
    if (st == MOEJIT_OK && mj_layer_module_count(spec)) {
        st = mj_kernel_modules_init(k, ctx); /* its modules build as forwards (or warming) need them */
        if (st == MOEJIT_OK) k->layer_inputs = in, have_inputs = 0; /* the kernel keeps them */
    } else if (st == MOEJIT_OK) {
        mj_build_job job = {ctx, spec, &in};
        st = mj_cache_get_or_build(ctx->cache, &in.key, in.preimage.data ? in.preimage.data : "",
                                   spec->canonical, mj_context_build_program, &job, &k->program, &hit);
    }
    if (st == MOEJIT_OK && (k->program.n_kernels < 1 || k->program.n_kernels > MJ_MAX_KERNELS))
        st = mj_fail(MOEJIT_ERR_INTERNAL, "kernel_get: the program for %s has %d kernels; "
                     "allowed: 1..%d", spec->canonical, k->program.n_kernels, MJ_MAX_KERNELS);
    if (st == MOEJIT_OK) {
        memcpy(k->key, in.key.hex, sizeof k->key);
        k->knobs = (mj_launch_knobs){ctx->settings.decode, ctx->settings.pdl};
        atomic_fetch_add(&ctx->build_count, 1);
        st = load_kernel(ctx, k);
    }
    if (have_inputs) mj_build_inputs_free(&in);
    if (st != MOEJIT_OK) {
        kernel_destroy(k);
        return st;
    }
    *out = k;
    return MOEJIT_OK;
}

/* Builds e's kernel, then publishes the outcome to the registry and its waiters. */
static moejit_status build_entry(moejit_context *ctx, mj_registry_entry *e,
                                 const moejit_spec *spec, moejit_kernel **out)
{
    moejit_kernel *k = NULL;
    moejit_status st = build_kernel(ctx, spec, &k);
    char *message = st != MOEJIT_OK ? strdup(moejit_last_error()) : NULL;
    int free_now = 0;

    pthread_mutex_lock(&ctx->lock);
    if (st == MOEJIT_OK) {
        e->kernel = k;
        e->state = ENTRY_READY;
    } else {
        e->status = st;
        e->message = message;
        e->state = ENTRY_FAILED;
        unlink_entry(ctx, e);
        free_now = e->waiters == 0;
    }
    pthread_cond_broadcast(&ctx->settled);
    pthread_mutex_unlock(&ctx->lock);

    if (free_now) entry_free(e);
    if (st == MOEJIT_OK) *out = k;
    return st; /* the thread's message is still the build's */
}

moejit_status moejit_kernel_get(moejit_context *ctx, const moejit_spec *spec, moejit_kernel **out)
{
    if (!out) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "kernel_get: out must not be NULL");
    *out = NULL;
    if (!ctx) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "kernel_get: context must not be NULL");
    if (!spec) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "kernel_get: spec must not be NULL");
    if (!spec->canonical)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "kernel_get: spec has no canonical form; "
                       "make specs with moejit_spec_parse or moejit_spec_from_json");

    /* The hit path: one lock, one bucket walk, one strcmp. */
    pthread_mutex_lock(&ctx->lock);
    mj_registry_entry *e = find(ctx, spec->hash, spec->canonical);
    if (e && e->state == ENTRY_READY) {
        *out = e->kernel;
        pthread_mutex_unlock(&ctx->lock);
        return MOEJIT_OK;
    }
    if (!e) {
        /* A spec in the registry passed the check already (same canonical text, same
         * fields); a new one is checked before anything is generated, so nothing
         * unsupported reaches NVRTC. */
        pthread_mutex_unlock(&ctx->lock);
        moejit_status st = mj_check_support(spec);
        /* what the backend builds but has not run on hardware is refused unless the context allows it */
        if (st == MOEJIT_OK) st = mj_check_validated(spec, ctx->settings.allow_unvalidated);
        if (st != MOEJIT_OK) return st;
        pthread_mutex_lock(&ctx->lock);
        e = find(ctx, spec->hash, spec->canonical);
        if (!e) {
            e = insert(ctx, spec->hash, spec->canonical);
            pthread_mutex_unlock(&ctx->lock);
            if (!e) return mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "kernel_get: out of memory");
            return build_entry(ctx, e, spec, out);
        }
    }
    moejit_status st = await_entry(ctx, e, out);
    pthread_mutex_unlock(&ctx->lock);
    return st;
}

/* ---- settings ---------------------------------------------------------------------------- */

const mj_settings *mj_context_settings(const moejit_context *ctx) { return &ctx->settings; }

int mj_context_allow_unvalidated(const moejit_context *ctx) { return ctx->settings.allow_unvalidated; }

/* ---- counters for tests ---------------------------------------------------------------- */

long mj_context_compile_count(const moejit_context *ctx)
{
    return atomic_load(&ctx->compile_count);
}

long mj_context_build_count(const moejit_context *ctx)
{
    return atomic_load(&ctx->build_count);
}

int mj_context_has_kernel(moejit_context *ctx, const moejit_spec *spec)
{
    pthread_mutex_lock(&ctx->lock);
    const mj_registry_entry *e = find(ctx, spec->hash, spec->canonical);
    int ready = e && e->state == ENTRY_READY;
    pthread_mutex_unlock(&ctx->lock);
    return ready;
}

size_t mj_context_entry_count(moejit_context *ctx)
{
    pthread_mutex_lock(&ctx->lock);
    size_t n = ctx->n_entries;
    pthread_mutex_unlock(&ctx->lock);
    return n;
}
