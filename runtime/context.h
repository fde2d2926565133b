/*
 * context.h — the insides of moejit_context and moejit_kernel, shared by context.c (the
 * registry that builds kernels) and kernel.c (the accessors and the forward call), plus the
 * counters tests read.
 *
 * A context owns a registry: spec canonical text -> kernel. Each spec is compiled at most
 * once per context, also when many threads ask for it at the same time; kernels live until
 * the context is destroyed.
 */
#ifndef MJ_CONTEXT_H
#define MJ_CONTEXT_H

#include <pthread.h>
#include <stdatomic.h>

#include "cache/cache.h"
#include "runtime/driver.h"
#include "runtime/launch.h"
#include "runtime/loader.h"
#include "moejit.h"
#include "core/program.h"
#include "core/settings.h"
#include "core/spec.h"

struct moejit_kernel {
    moejit_spec *spec;             /* owned clone: outlives the caller's spec */
    char key[65];                  /* lowercase SHA-256 hex of the preimage */
    mj_program program;            /* cubin, log, kernel names and resources */
    int loaded;                    /* 1: module is loaded and forward can run */
    mj_module module;
    const mj_driver *driver;       /* set when loaded */
    moejit_status unloaded_status; /* why not loaded (NO_DRIVER / NO_DEVICE) */
    char *unloaded_message;        /* owned; the message forward re-raises */
    mj_launch_knobs knobs;         /* its context's decode mode and PDL */
};

typedef struct mj_registry_entry mj_registry_entry;

struct moejit_context {
    char *cache_dir;               /* owned copies of the caller's option strings */
    char *cache_mode;
    moejit_options opts;           /* the caller's options, strings pointing at the copies */
    mj_settings settings;          /* every setting, resolved once at creation */
    double compile_timeout_s;      /* settings.compile_timeout_s */
    mj_cache *cache;

    pthread_mutex_t lock;          /* guards everything below */
    pthread_cond_t settled;        /* broadcast when any entry leaves COMPILING */
    mj_registry_entry **buckets;   /* chained hash table keyed by spec->hash */
    size_t n_buckets;              /* a power of two */
    size_t n_entries;

    atomic_long compile_count;     /* builds this context ran (NVRTC compiles) */
    atomic_long build_count;       /* kernels produced (compiled or from the disk cache) */
};

/* The context's resolved settings (core/settings.h), with their origins. */
const mj_settings *mj_context_settings(const moejit_context *ctx);
/* Whether the context may run kernel tuples built but not yet validated on hardware
 * ($MOEJIT_ALLOW_UNVALIDATED, moejit_options.allow_unvalidated): for the capability check. */
int mj_context_allow_unvalidated(const moejit_context *ctx);
/* The launch settings k's forwards run with (its context's). */
mj_launch_knobs mj_kernel_knobs(const moejit_kernel *k);
/* moejit_moe_forward with explicit launch settings (benchmarks and tests; NULL: k's own). */
moejit_status mj_kernel_forward(const moejit_kernel *k, const moejit_moe_args *args, void *workspace,
                                size_t workspace_bytes, void *stream, const mj_launch_knobs *knobs);

/* Test-visible counters. */
long mj_context_compile_count(const moejit_context *ctx);
long mj_context_build_count(const moejit_context *ctx);
/* Kernels currently in the registry (ready ones and ones being built). */
size_t mj_context_entry_count(moejit_context *ctx);
/* 1 when the registry already holds spec's kernel, ready (warming reports it as no compile). */
int mj_context_has_kernel(moejit_context *ctx, const moejit_spec *spec);

#endif
