/*
 * emit_test_util.h — checks shared by the mma and wgmma generator suites
 * (tests/check_mma_emit.c, tests/check_wgmma_emit.c) on a compiled mma-family program.
 *
 * They return a failure text (NULL when all holds) for the suite to assert on, but for
 * mj_test_routing_constants, which asserts through Check itself (every binary that links
 * tests/lib, the GPU suite too, links Check).
 */
#ifndef MJ_TEST_EMIT_TEST_UTIL_H
#define MJ_TEST_EMIT_TEST_UTIL_H

#include "core/program.h"

/* Whether the cubin holds name as a NUL-terminated string (a symbol). */
int mj_test_cubin_contains(const mj_program *p, const char *name);

/* The program of spec text is an ELF cubin holding every kernel of the mma kernel table, in
 * table order, each present in the cubin with no spills and no stack frame, and GEMM1 and
 * GEMM2 (the large-path GEMMs) at most gemm_max_registers registers. NULL, or what failed
 * (valid until the next failure text). */
const char *mj_test_check_mma_program(const char *text, const mj_program *p, int gemm_max_registers);

/* Disassembles the program's cubin once with $MOEJIT_NVDISASM and counts, for each of the n
 * functions names[i], its HGMMA (warpgroup MMA) and its local-memory instructions (LDL, STL)
 * into hgmma[i] and local[i], and its listing lines into lines[i]. Returns 0, or -1 when no
 * disassembler is set (then nothing is counted). */
int mj_test_sass_scan(const mj_program *p, const char *const *names, int n, int *lines, int *hgmma, int *local);
/* The same with the instructions containing op (e.g. "QGMMA", the fp8 warpgroup MMA) counted
 * into ops[i]. */
int mj_test_sass_scan_op(const mj_program *p, const char *const *names, int n, const char *op, int *lines, int *ops,
                         int *local);

/* Every routing method (and bf16 logits) reaches the source of base (a spec without routing)
 * as the constants the templates read; source_of emits a spec's translation unit (malloc'd). */
void mj_test_routing_constants(const char *base, char *(*source_of)(const char *text));

#endif
