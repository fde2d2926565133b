/*
 * program.h — one compiled layer: what NVRTC produced for one spec, before loading.
 *
 * This is the unit the disk cache stores and the loader loads (jitify2's CompiledProgram).
 * Everything in it is plain host data, so it exists and is testable without a GPU.
 */
#ifndef MJ_PROGRAM_H
#define MJ_PROGRAM_H

#include <stddef.h>
#include <stdint.h>

#include "moejit.h"

#define MJ_MAX_KERNELS 32
#define MJ_KERNEL_NAME_MAX 64

typedef struct mj_kernel_info {
    char name[MJ_KERNEL_NAME_MAX]; /* extern "C" entry name */
    int registers;                 /* from ptxas' verbose report; -1 if unknown */
    int shared_bytes;
    int stack_bytes;
    int spill_store_bytes;
    int spill_load_bytes;
} mj_kernel_info;

typedef struct mj_program {
    char *canonical_spec;          /* owned */
    char *arch;                    /* NVRTC target, "sm_90a"; owned */
    char *log;                     /* NVRTC's log (with ptxas' resource report); owned */
    uint8_t *cubin;                /* owned */
    size_t cubin_len;
    int n_kernels;
    mj_kernel_info kernels[MJ_MAX_KERNELS];
    double compile_seconds;        /* wall time of the compile (0 if loaded from cache) */
} mj_program;

void mj_program_free(mj_program *p); /* frees the members; p itself may be on the stack */

/* Fills kernels[].registers etc. from a ptxas verbose log ("ptxas info : Function properties
 * for mj_gemm1 ... Used 40 registers, ..."); kernels whose names the log lacks keep -1. */
void mj_program_parse_resources(mj_program *p);

#endif
