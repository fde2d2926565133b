/*
 * This file contains the public face of a built kernel: its accessors, the workspace query,
 * moejit_moe_forward, and the NVRTC version query.
 *
 * moejit_moe_forward is the serving hot path: it checks its arguments, then hands the loaded
 * module to the launch sequence (runtime/launch.c). A kernel that could not be loaded (no
 * driver, no device, another arch) re-raises the reason kept when it was built.
 */
#include <stddef.h>

#include "runtime/context.h"
#include "runtime/abi.h"
#include "runtime/launch.h"
#include "codegen/nvrtc_compile.h"
#include "core/status.h"

const moejit_spec *moejit_kernel_spec(const moejit_kernel *k) { return k ? k->spec : NULL; }

const char *moejit_kernel_key(const moejit_kernel *k) { return k ? k->key : ""; }

double moejit_kernel_compile_seconds(const moejit_kernel *k)
{
    if (k && k->n_modules) return mj_kernel_modules_compile_seconds((moejit_kernel *)k); /* locks; changes nothing */
    return k ? k->program.compile_seconds : 0.0;
}

int moejit_kernel_is_loaded(const moejit_kernel *k) { return k ? k->loaded : 0; }

int moejit_kernel_count(const moejit_kernel *k) { return k ? k->program.n_kernels : 0; }

moejit_status moejit_kernel_resources_get(const moejit_kernel *k, int index,
                                          moejit_kernel_resources *out)
{
    if (!k) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "kernel_resources_get: kernel must not be NULL");
    if (!out) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "kernel_resources_get: out must not be NULL");
    if (index < 0 || index >= k->program.n_kernels)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "kernel_resources_get: index %d out of range; "
                       "allowed: 0..%d", index, k->program.n_kernels - 1);
    /* a tensor-core layer's modules fill in their kernels' resources as they build */
    if (k->n_modules) pthread_mutex_lock(&((moejit_kernel *)k)->modules_lock);
    const mj_kernel_info *info = &k->program.kernels[index];
    out->name = info->name;
    out->registers = info->registers;
    out->shared_bytes = info->shared_bytes;
    out->stack_bytes = info->stack_bytes;
    out->spill_store_bytes = info->spill_store_bytes;
    out->spill_load_bytes = info->spill_load_bytes;
    if (k->n_modules) pthread_mutex_unlock(&((moejit_kernel *)k)->modules_lock);
    return MOEJIT_OK;
}

moejit_status moejit_workspace_size(const moejit_kernel *k, const moejit_moe_args *args,
                                    size_t *bytes)
{
    if (!k) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "workspace_size: kernel must not be NULL");
    if (!args) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "workspace_size: args must not be NULL");
    if (!bytes) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "workspace_size: bytes must not be NULL");
    moejit_moe_args copy;
    moejit_status st = mj_abi_moe_args(args, &copy, &args);
    return st != MOEJIT_OK ? st : mj_launch_workspace_size(k->spec, args, bytes);
}

moejit_status mj_kernel_forward(const moejit_kernel *k, const moejit_moe_args *args, void *workspace,
                                size_t workspace_bytes, void *stream, const mj_launch_knobs *knobs)
{
    if (!k) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "moe_forward: kernel must not be NULL");
    if (!args) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "moe_forward: args must not be NULL");
    moejit_moe_args copy;
    moejit_status st = mj_abi_moe_args(args, &copy, &args);
    if (st != MOEJIT_OK) return st;
    if (!k->loaded)
        return mj_fail(k->unloaded_status, "%s",
                       k->unloaded_message ? k->unloaded_message : "moe_forward: kernel not loaded");
    if (!knobs) knobs = &k->knobs;
    /* a tensor-core layer's forward first builds the modules of its path (never while capturing) */
    if (k->n_modules) st = mj_kernel_modules_for_forward((moejit_kernel *)k, args, knobs, (CUstream)stream);
    if (st != MOEJIT_OK) return st;
    return mj_launch_forward(k->driver, k->spec, &k->module, args, workspace, workspace_bytes,
                             (CUstream)stream, knobs);
}

mj_launch_knobs mj_kernel_knobs(const moejit_kernel *k) { return k->knobs; }

moejit_status moejit_moe_forward(const moejit_kernel *k, const moejit_moe_args *args,
                                 void *workspace, size_t workspace_bytes, void *stream)
{
    return mj_kernel_forward(k, args, workspace, workspace_bytes, stream, NULL);
}

moejit_status moejit_nvrtc_version(int *major, int *minor)
{
    if (!major || !minor)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "nvrtc_version: major and minor must not be NULL");
    char build_id[41];
    return mj_nvrtc_identity(major, minor, build_id);
}
