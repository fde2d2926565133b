/*
 * This file contains the split of the tensor-core layers into modules (layer_modules.h): the
 * module of each launch-table kernel, and a module's source, made from the layer's by one
 * define before its last include, so that every module shares the layer's constants byte for byte.
 */
#include "codegen/layer_modules.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "core/strbuf.h"
#include "templates/common/mma_params.h"
#include "templates/common/tc_modules.h"
#include "templates/common/wgmma_params.h"

static const char *const module_names[MJ_TC_MOD_COUNT] = {MJ_TC_MODULE_NAME_LIST};
static const unsigned kernel_modules[MJ_WGMMA_NUM_KERNELS] = {MJ_TC_KERNEL_MODULES_LIST};
static const char *const kernel_names[MJ_WGMMA_NUM_KERNELS] = {MJ_MMA_KERNEL_NAME_LIST, MJ_WGMMA_TALL_KERNEL_NAME_LIST};
_Static_assert(sizeof kernel_modules / sizeof kernel_modules[0] == MJ_WGMMA_NUM_KERNELS, "modules for every wgmma kernel");
_Static_assert(MJ_TC_MOD_COUNT <= MJ_LAYER_MODULES_MAX, "MJ_LAYER_MODULES_MAX holds every module");
_Static_assert(MJ_TC_MODULES_ALL == (1 << MJ_TC_MOD_COUNT) - 1, "a mask bit per module");
_Static_assert(MJ_TC_BIT_ROUTE == 1 << MJ_TC_MOD_ROUTE && MJ_TC_BIT_LARGE == 1 << MJ_TC_MOD_LARGE &&
                   MJ_TC_BIT_SHORT == 1 << MJ_TC_MOD_SHORT && MJ_TC_BIT_PERSISTENT == 1 << MJ_TC_MOD_PERSISTENT,
               "bit m is module m");

int mj_layer_module_count(const moejit_spec *spec)
{
    if (!spec) return 0;
    return spec->backend == MJ_BACKEND_MMA ? MJ_TC_MOD_MMA_COUNT : spec->backend == MJ_BACKEND_WGMMA ? MJ_TC_MOD_COUNT : 0;
}

const char *mj_layer_module_name(int module)
{
    if (module == MJ_LAYER_WHOLE) return "whole";
    return module >= 0 && module < MJ_TC_MOD_COUNT ? module_names[module] : "?";
}

int mj_layer_module_find(const moejit_spec *spec, const char *name)
{
    for (int m = 0; name && m < mj_layer_module_count(spec); m++)
        if (strcmp(module_names[m], name) == 0) return m;
    return -2;
}

/* The number of kernels in the spec's launch table. */
static int table_size(const moejit_spec *spec)
{
    return spec->backend == MJ_BACKEND_WGMMA ? MJ_WGMMA_NUM_KERNELS : MJ_MMA_NUM_KERNELS;
}

int mj_layer_module_kernels(const moejit_spec *spec, int module, int idx[MJ_MAX_KERNELS])
{
    int n = 0;
    if (module < 0 || module >= mj_layer_module_count(spec)) return 0;
    for (int i = 0; i < table_size(spec); i++)
        if (kernel_modules[i] & (1u << module)) idx[n++] = i;
    return n;
}

const char *mj_layer_kernel_name(const moejit_spec *spec, int kernel)
{
    return mj_layer_module_count(spec) && kernel >= 0 && kernel < table_size(spec) ? kernel_names[kernel] : NULL;
}

int mj_layer_kernel_count(const moejit_spec *spec) { return mj_layer_module_count(spec) ? table_size(spec) : 0; }

unsigned mj_layer_kernel_modules(const moejit_spec *spec, int kernel)
{
    if (!mj_layer_module_count(spec) || kernel < 0 || kernel >= table_size(spec)) return 0;
    return kernel_modules[kernel];
}

moejit_status mj_emit_module(const moejit_spec *spec, int module, mj_source *out)
{
    mj_source whole;
    moejit_status st = mj_emit(spec, module == MJ_LAYER_WHOLE ? out : &whole);
    if (st != MOEJIT_OK || module == MJ_LAYER_WHOLE) return st;
    st = mj_module_source(spec, module, &whole, out);
    mj_source_free(&whole);
    return st;
}

moejit_status mj_module_source(const moejit_spec *spec, int module, const mj_source *whole, mj_source *out)
{
    memset(out, 0, sizeof *out);
    if (module < 0 || module >= mj_layer_module_count(spec))
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "module: %d is no module of a %s layer", module,
                       spec->backend < MJ_BACKEND_COUNT ? mj_backend_names[spec->backend] : "?");
    /* the layer's source ends in the include of its layer header: the mask goes right before it */
    const char *last = NULL;
    for (const char *p = strstr(whole->text, "\n#include \""); p; p = strstr(p + 1, "\n#include \"")) last = p;
    if (!last)
        return mj_fail(MOEJIT_ERR_INTERNAL, "module: the %s source has no include", mj_backend_names[spec->backend]);
    int idx[MJ_MAX_KERNELS];
    const int n = mj_layer_module_kernels(spec, module, idx);
    mj_buf b = MJ_BUF_INIT;
    mj_buf_append(&b, whole->text, (size_t)(last - whole->text) + 1);
    mj_buf_printf(&b, "// module %s of the layer (templates/common/tc_modules.h):", module_names[module]);
    for (int i = 0; i < n; i++) mj_buf_printf(&b, " %s", kernel_names[idx[i]]);
    mj_buf_printf(&b, "\n#define MJ_TC_MODULES 0x%04x\n", 1u << module);
    mj_buf_puts(&b, last + 1);
    const size_t len = b.len;
    char *text = mj_buf_take(&b);
    if (!text) return mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "module: out of memory building the source");
    out->text = text;
    out->len = len;
    out->name = whole->name;
    out->n_kernels = n;
    for (int i = 0; i < n; i++) out->kernel_names[i] = kernel_names[idx[i]];
    return MOEJIT_OK;
}
