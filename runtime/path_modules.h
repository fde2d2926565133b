/*
 * path_modules.h — which modules of a tensor-core layer (templates/common/tc_modules.h) a
 * forward launches from, decided by the same plan the launcher carries out (gemm_plan.h), and
 * the on-demand building of a kernel's modules (kernel_modules.c).
 *
 * A forward compiles (or loads from the cache) only the modules of its path, several at once
 * in worker processes; other paths build on their first forward or in moejit_warm. A forward
 * on a stream that is capturing a CUDA graph never compiles or loads: it fails with
 * MOEJIT_ERR_NOT_WARMED naming the modules it lacks.
 */
#ifndef MJ_PATH_MODULES_H
#define MJ_PATH_MODULES_H

#include <stdint.h>

#include "core/spec.h"
#include "runtime/gemm_plan.h"
#include "runtime/launch.h"

/* The modules (a mask of 1 << MJ_TC_MOD_*) the launches of plan come from. */
unsigned mj_path_modules_of_plan(const moejit_spec *spec, const mj_gemm_plan *plan);
/* The modules a forward of args (a valid shape) takes on a device of sms SMs
 * (MJ_GEMM_PLAN_SMS_UNKNOWN: the decode chain, never the persistent layer) in decode mode
 * decode (MJ_DECODE_*); 0 for no tokens. */
unsigned mj_path_modules_needed(const moejit_spec *spec, const moejit_moe_args *args, int sms, int decode);
/* The names of the modules in mask, ", "-separated, into buf (for messages). */
void mj_path_modules_describe(unsigned mask, char *buf, size_t cap);

#endif
