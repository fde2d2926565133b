/*
 * This file contains the module loader: a compiled program's cubin handed to
 * cuLibraryLoadData and each of its kernels looked up by the name stored with it.
 *
 * cuLibraryLoadData is context-independent (the driver loads the library into each context
 * on first use), so one load serves every context and thread of the process; kernels are
 * found by their extern "C" names, never by scraping symbols from the cubin.
 */
#include "runtime/loader.h"

#include <stdio.h>
#include <string.h>

#include "core/status.h"

moejit_status mj_module_load(const mj_program *program, mj_module *out)
{
    if (!program || !out)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "module load: program and out must not be NULL");
    memset(out, 0, sizeof *out);
    if (!program->cubin || program->cubin_len == 0)
        return mj_fail(MOEJIT_ERR_INTERNAL, "module load: program for %s has no cubin",
                       program->canonical_spec ? program->canonical_spec : "(unknown spec)");
    if (program->n_kernels < 1 || program->n_kernels > MJ_MAX_KERNELS)
        return mj_fail(MOEJIT_ERR_INTERNAL, "module load: program has %d kernels; allowed: 1..%d",
                       program->n_kernels, MJ_MAX_KERNELS);

    const mj_driver *d;
    moejit_status st = mj_driver_get(&d);
    if (st != MOEJIT_OK) return st;

    CUlibrary lib = NULL;
    CUresult r = d->cuLibraryLoadData(&lib, program->cubin, NULL, NULL, 0, NULL, NULL, 0);
    if (r != CUDA_SUCCESS) {
        char what[128];
        snprintf(what, sizeof what, "cuLibraryLoadData (%s cubin, %zu bytes)",
                 program->arch ? program->arch : "unknown arch", program->cubin_len);
        return mj_cuda_fail(d, r, what);
    }
    for (int i = 0; i < program->n_kernels; i++) {
        const char *name = program->kernels[i].name;
        r = d->cuLibraryGetKernel(&out->kernels[i], lib, name);
        if (r != CUDA_SUCCESS) {
            char what[MJ_KERNEL_NAME_MAX + 96];
            snprintf(what, sizeof what, "cuLibraryGetKernel: kernel \"%s\" not found in the cubin",
                     name);
            st = mj_cuda_fail(d, r, what);
            d->cuLibraryUnload(lib);
            memset(out, 0, sizeof *out);
            return st;
        }
    }
    out->library = lib;
    out->n_kernels = program->n_kernels;
    return MOEJIT_OK;
}

void mj_module_unload(mj_module *m)
{
    if (!m || !m->library) return;
    const mj_driver *d;
    /* A loaded module implies the driver loaded, so this cannot fail (and cannot clobber the
     * thread's message); a failing unload at teardown has nobody to report to. */
    if (mj_driver_get(&d) == MOEJIT_OK) d->cuLibraryUnload(m->library);
    memset(m, 0, sizeof *m);
}
