/*
 * This file contains the modules of a tensor-core layer's kernel (context.h): each built at
 * most once per kernel, on the first forward that takes its path or in moejit_warm, through
 * the context's cache (one entry per module) and compile worker processes.
 *
 * A build claims the absent modules it needs under the kernel's lock, builds them without it
 * (those on disk read on the calling thread, the others compiled several at once, each on its
 * own thread driving its own worker process; every thread is joined before the call returns),
 * loads them on the device on the calling thread, then publishes each module's kernels at their
 * launch-table index before setting its bit in ready_modules, so a forward that sees the bit
 * (one atomic load, the hit path) sees the kernels. Threads needing a module another one
 * builds wait.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include "cache/store.h"
#include "codegen/build_inputs.h"
#include "codegen/layer_modules.h"
#include "core/status.h"
#include "runtime/args_check.h"
#include "runtime/context.h"
#include "runtime/path_modules.h"
#include "templates/common/tc_modules.h"

moejit_status mj_kernel_modules_init(moejit_kernel *k, moejit_context *ctx)
{
    k->n_modules = mj_layer_module_count(k->spec);
    k->modules = calloc((size_t)k->n_modules, sizeof *k->modules);
    if (!k->modules) return mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "kernel_get: out of memory");
    k->ctx = ctx;
    atomic_init(&k->ready_modules, 0u);
    pthread_mutex_init(&k->modules_lock, NULL);
    pthread_cond_init(&k->modules_settled, NULL);
    /* the launch table, its resources unknown (-1) until its module builds */
    const int n = mj_layer_kernel_count(k->spec);
    for (int i = 0; i < n; i++) {
        mj_kernel_info *ki = &k->program.kernels[i];
        snprintf(ki->name, sizeof ki->name, "%s", mj_layer_kernel_name(k->spec, i));
        ki->registers = ki->shared_bytes = ki->stack_bytes = ki->spill_store_bytes = ki->spill_load_bytes = -1;
    }
    k->program.n_kernels = k->module.n_kernels = n;
    return MOEJIT_OK;
}

void mj_kernel_modules_free(moejit_kernel *k)
{
    if (!k->modules) return;
    for (int m = 0; m < k->n_modules; m++) {
        mj_module_unload(&k->modules[m].module);
        mj_program_free(&k->modules[m].program);
    }
    free(k->modules);
    k->modules = NULL;
    mj_build_inputs_free(&k->layer_inputs);
    pthread_cond_destroy(&k->modules_settled);
    pthread_mutex_destroy(&k->modules_lock);
}

unsigned mj_kernel_modules_all(const moejit_kernel *k) { return k->n_modules ? (1u << k->n_modules) - 1 : 0; }

/* One module to build, on its own thread or the caller's. */
typedef struct module_task {
    moejit_kernel *k;
    int module;
    mj_build_inputs in;  /* derived from the layer's (prepare) */
    int have_in;
    int on_disk;         /* its entry file exists: read it on the calling thread, no worker */
    mj_program program;
    mj_module loaded;
    int compiled;
    moejit_status status;
    char *message; /* owned: the failing thread's message */
    pthread_t thread;
    int started;
} module_task;

/* The module's inputs (its key), and whether its entry is on disk (caller's thread). */
static void prepare(module_task *t)
{
    t->status = mj_build_inputs_for_module(&t->k->layer_inputs, t->k->spec, t->module, &t->in);
    t->have_in = t->status == MOEJIT_OK;
    if (!t->have_in) {
        t->message = strdup(moejit_last_error());
        return;
    }
    char path[MJ_CACHE_PATH_MAX + 128];
    struct stat st;
    mj_cache_entry_path(mj_cache_get_config(t->k->ctx->cache), t->in.key.hex, path, sizeof path);
    t->on_disk = stat(path, &st) == 0;
}

/* Compiles (or reads from the cache) one prepared module. */
static void *build_module(void *arg)
{
    module_task *t = arg;
    moejit_kernel *k = t->k;
    if (!t->have_in) return NULL; /* prepare failed: its status and message are set */
    const mj_build_inputs *in = &t->in;
    mj_build_job job = {k->ctx, k->spec, in};
    int hit = 0;
    moejit_status st = mj_cache_get_or_build(k->ctx->cache, &in->key, in->preimage.data ? in->preimage.data : "",
                                             k->spec->canonical, mj_context_build_program, &job, &t->program, &hit);
    t->compiled = st == MOEJIT_OK && !hit;
    if (st == MOEJIT_OK && t->program.n_kernels != in->source.n_kernels)
        st = mj_fail(MOEJIT_ERR_INTERNAL, "module %s of %s: %d kernels, its source defines %d",
                     mj_layer_module_name(t->module), k->spec->canonical, t->program.n_kernels, in->source.n_kernels);
    t->status = st;
    if (st != MOEJIT_OK) t->message = strdup(moejit_last_error());
    return NULL;
}

/* Moves a built module into k: its kernels at their launch-table index (a kernel two modules
 * hold keeps the first one's handle), then its ready bit (caller holds modules_lock). */
static void publish(moejit_kernel *k, module_task *t)
{
    mj_kernel_module *km = &k->modules[t->module];
    int idx[MJ_MAX_KERNELS];
    const int n = mj_layer_module_kernels(k->spec, t->module, idx);
    for (int i = 0; i < n && i < t->program.n_kernels; i++) {
        if (!k->module.kernels[idx[i]]) k->module.kernels[idx[i]] = t->loaded.kernels[i];
        k->program.kernels[idx[i]] = t->program.kernels[i];
    }
    km->program = t->program;
    km->module = t->loaded;
    memset(&t->program, 0, sizeof t->program);
    km->state = MJ_MODULE_READY;
    atomic_fetch_or_explicit(&k->ready_modules, 1u << t->module, memory_order_release);
}

/* Runs tasks[0..n): those on disk one after the other on the caller's thread (a read takes
 * less than starting a thread), then the rest up to jobs at once, each compile on its own
 * thread driving its own worker process (the caller's thread is one of them). */
static void run_tasks(module_task *tasks, int n, int jobs)
{
    module_task *compile[32];
    int c = 0;
    for (int i = 0; i < n; i++) prepare(&tasks[i]);
    for (int i = 0; i < n; i++) {
        if (tasks[i].on_disk || !tasks[i].have_in) build_module(&tasks[i]);
        else compile[c++] = &tasks[i];
    }
    for (int base = 0; base < c; base += jobs) {
        const int end = base + jobs < c ? base + jobs : c;
        for (int i = base + 1; i < end; i++)
            compile[i]->started = pthread_create(&compile[i]->thread, NULL, build_module, compile[i]) == 0;
        build_module(compile[base]);
        for (int i = base + 1; i < end; i++) {
            if (compile[i]->started) pthread_join(compile[i]->thread, NULL);
            else build_module(compile[i]); /* no thread to be had: build it here */
        }
    }
}

/* Loads the built modules on the device, on the calling thread (the compile threads have no
 * CUDA context; a serving thread has its own), making the options' device's primary context
 * current where none is, as moejit_kernel_get does. */
static void load_built(moejit_kernel *k, module_task *tasks, int n)
{
    int major, minor;
    for (int i = 0; i < n && k->loaded; i++) {
        module_task *t = &tasks[i];
        if (t->status != MOEJIT_OK) continue;
        moejit_status st = mj_driver_ensure_context(k->ctx->opts.device, &major, &minor);
        if (st == MOEJIT_OK) st = mj_module_load(&t->program, &t->loaded);
        if (st != MOEJIT_OK) {
            t->status = mj_fail_prefix(st, "loading module %s of %s", mj_layer_module_name(t->module), k->spec->canonical);
            t->message = strdup(moejit_last_error());
        }
    }
}

moejit_status mj_kernel_modules_build(moejit_kernel *k, unsigned need, int jobs, int *compiled)
{
    if (compiled) *compiled = 0;
    need &= mj_kernel_modules_all(k);
    if ((need & ~atomic_load_explicit(&k->ready_modules, memory_order_acquire)) == 0) return MOEJIT_OK;
    module_task tasks[32];
    int n = 0;
    pthread_mutex_lock(&k->modules_lock);
    for (int m = 0; m < k->n_modules; m++)
        if ((need & (1u << m)) && k->modules[m].state == MJ_MODULE_ABSENT) {
            k->modules[m].state = MJ_MODULE_BUILDING;
            memset(&tasks[n], 0, sizeof tasks[n]);
            tasks[n].k = k, tasks[n].module = m;
            n++;
        }
    pthread_mutex_unlock(&k->modules_lock);

    run_tasks(tasks, n, jobs < 1 ? 1 : jobs);
    load_built(k, tasks, n);

    moejit_status st = MOEJIT_OK;
    const char *message = NULL;
    int from_task = 0;
    pthread_mutex_lock(&k->modules_lock);
    for (int i = 0; i < n; i++) {
        if (tasks[i].status == MOEJIT_OK) {
            publish(k, &tasks[i]);
            if (compiled) *compiled += tasks[i].compiled;
        } else { /* absent again: a later forward may try again */
            k->modules[tasks[i].module].state = MJ_MODULE_ABSENT;
            if (st == MOEJIT_OK) st = tasks[i].status, message = tasks[i].message, from_task = 1;
        }
    }
    pthread_cond_broadcast(&k->modules_settled);
    /* the modules other threads were building */
    for (int m = 0; m < k->n_modules && st == MOEJIT_OK; m++) {
        while ((need & (1u << m)) && k->modules[m].state == MJ_MODULE_BUILDING)
            pthread_cond_wait(&k->modules_settled, &k->modules_lock);
        if ((need & (1u << m)) && k->modules[m].state != MJ_MODULE_READY)
            st = mj_fail(MOEJIT_ERR_COMPILE, "module %s of %s: its build in another thread failed",
                         mj_layer_module_name(m), k->spec->canonical);
    }
    pthread_mutex_unlock(&k->modules_lock);
    if (from_task)
        st = message ? mj_fail(st, "%s", message) : mj_fail(st, "module build: out of memory keeping its message");
    for (int i = 0; i < n; i++) {
        mj_program_free(&tasks[i].program);
        if (tasks[i].have_in) mj_build_inputs_free(&tasks[i].in);
        free(tasks[i].message);
    }
    return st;
}

double mj_kernel_modules_compile_seconds(moejit_kernel *k)
{
    double s = 0;
    pthread_mutex_lock(&k->modules_lock);
    for (int m = 0; m < k->n_modules; m++)
        if (k->modules[m].state == MJ_MODULE_READY) s += k->modules[m].program.compile_seconds;
    pthread_mutex_unlock(&k->modules_lock);
    return s;
}

/* The device's SM count where the plan may take the persistent decode layer (it decides with
 * it); MJ_GEMM_PLAN_SMS_UNKNOWN where it cannot. */
static moejit_status device_sms(const moejit_kernel *k, const moejit_moe_args *args, int *sms)
{
    *sms = MJ_GEMM_PLAN_SMS_UNKNOWN;
    mj_gemm_plan plan;
    mj_gemm_plan_make(k->spec, args, MJ_GEMM_PLAN_SMS_UNKNOWN, MJ_DECODE_AUTO, &plan);
    if (!plan.persistent_candidate) return MOEJIT_OK;
    CUdevice dev;
    CUresult r = k->driver->cuCtxGetDevice(&dev);
    if (r == CUDA_SUCCESS) r = k->driver->cuDeviceGetAttribute(sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
    return r == CUDA_SUCCESS ? MOEJIT_OK : mj_cuda_fail(k->driver, r, "cuDeviceGetAttribute(multiprocessor count)");
}

/* MOEJIT_ERR_NOT_WARMED when stream is capturing a graph (or cannot be used while another
 * stream captures), else OK: a capture must never wait for a compile, nor record a load. */
static moejit_status refuse_in_capture(const moejit_kernel *k, const moejit_moe_args *args, unsigned missing,
                                       CUstream stream)
{
    if (!k->driver->cuStreamIsCapturing) return MOEJIT_OK; /* a driver without capture */
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    const CUresult r = k->driver->cuStreamIsCapturing(stream, &cs);
    if (r == CUDA_SUCCESS && cs == CU_STREAM_CAPTURE_STATUS_NONE) return MOEJIT_OK;
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_STREAM_CAPTURE_IMPLICIT)
        return mj_cuda_fail(k->driver, r, "cuStreamIsCapturing");
    char names[256];
    mj_path_modules_describe(missing, names, sizeof names);
    return mj_fail(MOEJIT_ERR_NOT_WARMED,
                   "moe_forward: a forward of %lld tokens of %s needs module(s) %s, not loaded yet, and its stream "
                   "is capturing a CUDA graph, where moejit never compiles or loads: run one forward of this batch "
                   "size, or moejit_warm, before the capture",
                   (long long)args->num_tokens, k->spec->canonical, names);
}

moejit_status mj_kernel_modules_for_forward(moejit_kernel *k, const moejit_moe_args *args,
                                            const mj_launch_knobs *knobs, CUstream stream)
{
    const unsigned all = mj_kernel_modules_all(k);
    if (atomic_load_explicit(&k->ready_modules, memory_order_acquire) == all) return MOEJIT_OK; /* warmed */
    int sms;
    moejit_status st = mj_launch_check_shape(k->spec, args); /* the plan needs a valid shape */
    if (st == MOEJIT_OK) st = device_sms(k, args, &sms);
    if (st != MOEJIT_OK) return st;
    const unsigned need = mj_path_modules_needed(k->spec, args, sms, knobs->decode);
    const unsigned missing = need & ~atomic_load_explicit(&k->ready_modules, memory_order_acquire);
    if (!missing) return MOEJIT_OK;
    st = refuse_in_capture(k, args, missing, stream);
    return st == MOEJIT_OK ? mj_kernel_modules_build(k, need, MJ_TC_MOD_COUNT, NULL) : st;
}
