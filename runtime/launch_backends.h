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

#include "templates/common/params.h"
#include "runtime/driver.h"
#include "runtime/gemm_plan.h"
#include "runtime/launch.h"
#include "runtime/loader.h"
#include "core/spec.h"

/* backend=mma (templates/mma_layer.cuh). Workspace as for simt (ids, weights, counters,
 * offsets, tile offsets, rows, intermediate, y). */
moejit_status mj_launch_mma_workspace_size(const moejit_spec *spec, const moejit_moe_args *args,
                                           size_t *bytes);
moejit_status mj_launch_mma_forward(const mj_driver *d, const moejit_spec *spec, const mj_module *m,
                                    const moejit_moe_args *args, void *workspace,
                                    size_t workspace_bytes, CUstream stream, const mj_launch_knobs *knobs);
/* backend=wgmma (templates/wgmma_layer.cuh, sm_90a). Workspace as mma's; the large-batch
 * GEMMs take a W1 / W2 tensor map encoded here per forward (cuTensorMapEncodeTiled). */
moejit_status mj_launch_wgmma_workspace_size(const moejit_spec *spec, const moejit_moe_args *args,
                                             size_t *bytes);
moejit_status mj_launch_wgmma_forward(const mj_driver *d, const moejit_spec *spec, const mj_module *m,
                                      const moejit_moe_args *args, void *workspace,
                                      size_t workspace_bytes, CUstream stream, const mj_launch_knobs *knobs);

/* ---- the steps mma and wgmma share (launch_mma.c), for launch_wgmma.c ---------------------- */

/* Which mma-family layer a step serves. */
typedef struct mj_mma_launcher {
    mj_backend backend;      /* MJ_BACKEND_MMA or MJ_BACKEND_WGMMA: checked, and named in messages */
    int sm90a_only;          /* refuse every arch but sm_90a */
    const char *weights_why; /* why w1 and w2 must be 16-byte aligned */
} mj_mma_launcher;

/* A checked forward with T > 0: its shape, its path, and the parameter block every kernel
 * receives (the GEMMs may take more). */
typedef struct mj_mma_forward {
    mj_gemm_plan plan;      /* path, kernels, K splits and decode layer (decided on this device) */
    int64_t T, pairs, H, I, e_local;
    int gated;
    int precomputed;        /* routing=precomputed: ids may repeat an expert within a token */
    int scatter_x;          /* the scatter kernel quantizes x (fp8_act=tensor): launched at every T */
    int programmatic; /* MJ_PDL_* (launch_common.h); MJ_PDL_OFF before sm_90 */
    int sms;               /* the device's SMs (set where the plan's decode layer was decided) */
    int w4;                /* 4-bit weights: the GEMMs' pipelines are common/mma_w4_params.h's */
    mj_layer_params p;
} mj_mma_forward;

/* The two GEMM launches of a forward: grids, block size, dynamic shared memory, and their
 * parameter lists (NULL: the parameter block alone). */
typedef struct mj_mma_gemms {
    int64_t g1, g2;
    unsigned threads;
    int smem;
    void **params1, **params2;
} mj_mma_gemms;

moejit_status mj_launch_mma_family_workspace_size(const mj_mma_launcher *l, const moejit_spec *spec,
                                                  const moejit_moe_args *args, size_t *bytes);
/* Checks spec, shape, tensors and workspace, then fills f (decode mode and PDL from knobs, NULL:
 * the defaults); OK with num_tokens = 0 means there is nothing to launch (f is then unset). */
moejit_status mj_launch_mma_begin(const mj_mma_launcher *l, const mj_driver *d, const moejit_spec *spec,
                                  const mj_module *m, const moejit_moe_args *args, void *workspace,
                                  size_t workspace_bytes, const mj_launch_knobs *knobs, mj_mma_forward *f);
/* Refuses GEMM grids (or row tiles) past INT32_MAX, naming num_tokens. */
moejit_status mj_launch_mma_grids_fit(const mj_mma_launcher *l, const mj_mma_forward *f, int64_t g1, int64_t g2);
/* The decode (small) path's GEMM grids, the same in both layers: weight tiles x row tiles,
 * GEMM2 times its K splits. */
void mj_launch_mma_small_grids(const mj_mma_forward *f, int64_t *g1, int64_t *g2);
/* The GEMMs' shared-memory opt-in on dev, the counter memset (unless the decode path's fused
 * routing runs: it counts in shared memory), then route, offsets, scatter, GEMM1, GEMM2,
 * finalize on stream. At T <= MJ_MMA_ROUTED_GEMM1_MAX_TOKENS on the decode path (routing not
 * precomputed) only GEMM1 (the blocks route for themselves), GEMM2 and finalize. */
moejit_status mj_launch_mma_enqueue(const mj_driver *d, const mj_module *m, mj_mma_forward *f, CUdevice dev,
                                    const mj_mma_gemms *g, CUstream stream);

#endif
