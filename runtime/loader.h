/*
 * loader.h — a compiled program made runnable: the cubin loaded with cuLibraryLoadData
 * (context-independent) and its kernels found by their stored names.
 */
#ifndef MJ_LOADER_H
#define MJ_LOADER_H

#include "runtime/driver.h"
#include "core/program.h"

typedef struct mj_module {
    CUlibrary library;
    int n_kernels;
    CUkernel kernels[MJ_MAX_KERNELS]; /* in the program's kernel order */
} mj_module;

moejit_status mj_module_load(const mj_program *program, mj_module *out);
void mj_module_unload(mj_module *m);

#endif
