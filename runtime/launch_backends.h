/*
 * launch_backends.h — the launch sequences of the backends other than simt (launch.c keeps
 * simt, the shape rules every backend shares, and the dispatch on spec->backend).
 *
 * Same contract as launch.h: nothing is allocated, nothing synchronises, only stream-ordered
 * driver calls are made and every grid is sized from the shape alone, so a forward can be
 * captured in a CUDA graph.
 */
#ifndef MJ_LAUNCH_BACKENDS_H
#define MJ_LAUNCH_BACKENDS_H

#include "driver.h"
#include "loader.h"
#include "spec.h"

/* backend=mma (templates/mma_layer.cuh). Workspace as for simt (ids, weights, counters,
 * offsets, tile offsets, rows, intermediate, y). */
moejit_status mj_launch_mma_workspace_size(const moejit_spec *spec, const moejit_moe_args *args,
                                           size_t *bytes);
moejit_status mj_launch_mma_forward(const mj_driver *d, const moejit_spec *spec, const mj_module *m,
                                    const moejit_moe_args *args, void *workspace,
                                    size_t workspace_bytes, CUstream stream);
/* The GEMM path a forward of args takes (MJ_MMA_PATH_LARGE or MJ_MMA_PATH_SMALL of
 * templates/common/mma_params.h): the spec's tile=large|small, else the heuristic. For
 * benchmarks and tests; the shape must be valid. */
int mj_launch_mma_path(const moejit_spec *spec, const moejit_moe_args *args);

/* backend=wgmma (templates/wgmma_layer.cuh, sm_90a). Workspace as mma's; the large-batch
 * GEMMs take a W1 / W2 tensor map encoded here per forward (cuTensorMapEncodeTiled). */
moejit_status mj_launch_wgmma_workspace_size(const moejit_spec *spec, const moejit_moe_args *args,
                                             size_t *bytes);
moejit_status mj_launch_wgmma_forward(const mj_driver *d, const moejit_spec *spec, const mj_module *m,
                                      const moejit_moe_args *args, void *workspace,
                                      size_t workspace_bytes, CUstream stream);
/* As mj_launch_mma_path: MJ_MMA_PATH_SMALL (mma's decode kernels) or MJ_MMA_PATH_LARGE (the
 * warpgroup-MMA GEMMs). */
int mj_launch_wgmma_path(const moejit_spec *spec, const moejit_moe_args *args);

#endif
