/*
 * layer_modules.h — a tensor-core layer split into modules (templates/common/tc_modules.h):
 * which modules a spec has, which kernels of its launch table each holds, and the source of
 * one module, which is the layer's source with the module's mask defined before the layer
 * header (so a module's key covers exactly what its compile reads).
 *
 * A simt layer is one module, the whole layer: mj_layer_module_count says 0 for it.
 */
#ifndef MJ_LAYER_MODULES_H
#define MJ_LAYER_MODULES_H

#include "codegen/emit.h"
#include "core/spec.h"

/* At least the most modules a layer has (MJ_TC_MOD_COUNT). */
#define MJ_LAYER_MODULES_MAX 16

/* The whole layer in one source (simt's only module; for a tensor-core layer, inspect --bundle). */
#define MJ_LAYER_WHOLE (-1)

/* How many modules the spec's layer has: MJ_TC_MOD_MMA_COUNT (mma), MJ_TC_MOD_COUNT (wgmma), else 0. */
int mj_layer_module_count(const moejit_spec *spec);
/* "stages", "large", ...; "whole" for MJ_LAYER_WHOLE, "?" out of range. */
const char *mj_layer_module_name(int module);
/* The module named name, or -2 when the spec's layer has none of that name. */
int mj_layer_module_find(const moejit_spec *spec, const char *name);
/* Writes the launch-table indices of the module's kernels, ascending, to idx and returns how many. */
int mj_layer_module_kernels(const moejit_spec *spec, int module, int idx[MJ_MAX_KERNELS]);
/* The name of kernel index i of the spec's launch table; NULL out of range. */
const char *mj_layer_kernel_name(const moejit_spec *spec, int kernel);
/* The number of kernels in the launch table of the spec's tensor-core layer (0 for simt). */
int mj_layer_kernel_count(const moejit_spec *spec);
/* The modules (a mask of 1 << module) holding kernel index i of the spec's launch table; 0 if none. */
unsigned mj_layer_kernel_modules(const moejit_spec *spec, int kernel);
/* The source of one module (MJ_LAYER_WHOLE: mj_emit's); its kernel_names are the module's. */
moejit_status mj_emit_module(const moejit_spec *spec, int module, mj_source *out);
/* The same from the layer's source whole (mj_emit's), without emitting again. */
moejit_status mj_module_source(const moejit_spec *spec, int module, const mj_source *whole, mj_source *out);

#endif
