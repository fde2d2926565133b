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
#include "codegen/build_inputs.h"
#include "codegen/emit.h"
#include "runtime/driver.h"
#include "runtime/launch.h"
#include "runtime/loader.h"
#include "moejit.h"
#include "core/program.h"
#include "core/settings.h"
#include "core/spec.h"

/* One module of a tensor-core layer (codegen/layer_modules.h) as its kernel holds it. */
typedef enum mj_module_state { MJ_MODULE_ABSENT = 0, MJ_MODULE_BUILDING, MJ_MODULE_READY } mj_module_state;
typedef struct mj_kernel_module {
    mj_module_state state;         /* guarded by the kernel's modules_lock */
    mj_program program;            /* READY: its cubin, log and kernels */
    mj_module module;              /* READY on a device: its library */
} mj_kernel_module;

struct moejit_kernel {
    moejit_spec *spec;             /* owned clone: outlives the caller's spec */
    char key[65];                  /* lowercase SHA-256 hex of the preimage (tensor-core layers:
                                      of the whole layer's source; each module has its own) */
    mj_program program;            /* cubin, log, kernel names and resources (tensor-core layers:
                                      no cubin; the launch table's kernels, filled as modules build) */
    int loaded;                    /* 1: module is loaded and forward can run (tensor-core layers:
                                      a device is there, and modules load as forwards need them) */
    mj_module module;              /* the launch table (tensor-core layers: each module's kernels
                                      placed at their launch-table index as it loads) */
    /* tensor-core layers only (n_modules > 0): modules built on demand (kernel_modules.c) */
    moejit_context *ctx;
    mj_build_inputs layer_inputs;  /* the whole layer's: each module's inputs derive from them */
    int n_modules;
    mj_kernel_module *modules;
    atomic_uint ready_modules;     /* bit m: modules[m] is READY (stored after its kernels) */
    pthread_mutex_t modules_lock;
    pthread_cond_t modules_settled; /* broadcast when a module leaves BUILDING */
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

/* The compile callback of mj_cache_get_or_build (a build_job), shared with kernel_modules.c; a
 * failed compile keeps its inputs in the cache's failed/<key>/ (compile_failures.h). */
typedef struct mj_build_job {
    moejit_context *ctx;
    const moejit_spec *spec;
    const mj_build_inputs *in;     /* the source, NVRTC options and key of what compiles */
} mj_build_job;
moejit_status mj_context_build_program(void *job, mj_program *out);

/* ---- a tensor-core layer's modules (kernel_modules.c) ---------------------------------------- */
/* Makes k (its spec a tensor-core layer) a kernel of modules built on demand: no module yet. */
moejit_status mj_kernel_modules_init(moejit_kernel *k, moejit_context *ctx);
void mj_kernel_modules_free(moejit_kernel *k);
/* Builds (compiles or loads from the cache, and loads on a device) the modules in need that are
 * not ready, up to jobs at once, and waits for those other threads build; *compiled (may be
 * NULL) counts the NVRTC compiles this call ran. */
moejit_status mj_kernel_modules_build(moejit_kernel *k, unsigned need, int jobs, int *compiled);
/* Every module of k's layer, as a mask. */
unsigned mj_kernel_modules_all(const moejit_kernel *k);
/* Before a forward: builds the modules it takes, unless the stream is capturing a graph
 * (MOEJIT_ERR_NOT_WARMED naming them). */
moejit_status mj_kernel_modules_for_forward(moejit_kernel *k, const moejit_moe_args *args,
                                            const mj_launch_knobs *knobs, CUstream stream);
/* The sum of the compile times of k's modules built so far. */
double mj_kernel_modules_compile_seconds(moejit_kernel *k);

/* Test-visible counters. */
long mj_context_compile_count(const moejit_context *ctx);
long mj_context_build_count(const moejit_context *ctx);
/* Kernels currently in the registry (ready ones and ones being built). */
size_t mj_context_entry_count(moejit_context *ctx);
/* 1 when the registry already holds spec's kernel, ready (warming reports it as no compile). */
int mj_context_has_kernel(moejit_context *ctx, const moejit_spec *spec);

#endif
