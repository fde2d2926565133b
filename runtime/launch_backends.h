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
/* The GEMM path a forward of args takes (MJ_MMA_PATH_LARGE, _SMALL or, for wgmma, _TALL or
 * _PAIR of templates/common/mma_params.h): the spec's tile=large|small|tall|pair, else the tuning table's
 * entry for the shape and T (tune_table.h), else the heuristic. For
 * benchmarks and tests; the shape must be valid. */
int mj_launch_mma_path(const moejit_spec *spec, const moejit_moe_args *args);
/* The built-in rule alone (what tile=auto takes without a tuning table entry): small up to
 * MJ_MMA_SMALL_MAX_ROWS_PER_EXPERT rows per expert (wgmma: MJ_WGMMA_SMALL_MAX_ROWS_PER_EXPERT);
 * for wgmma, pair from MJ_WGMMA_PAIR_MIN_ROWS_PER_EXPERT rows; else large (tall only when
 * forced or tuned). */
int mj_launch_heuristic_path(const moejit_spec *spec, const moejit_moe_args *args);
/* The K splits of the forward's GEMM2 (1 but on the small path of a decode GEMM2 with few
 * CTAs over a long I: mj_mma_small_gemm2_splits); mma and wgmma specs, valid shape. */
int mj_launch_mma_gemm2_splits(const moejit_spec *spec, const moejit_moe_args *args);
/* Whether the forward's GEMM2 and finalize are one kernel (batch 1: launch_mma.c's rule);
 * mma and wgmma specs, valid shape. */
int mj_launch_mma_t1_fused(const moejit_spec *spec, const moejit_moe_args *args);
/* The persistent decode layer (templates/decode_persistent.cuh) on a device of sms SMs under
 * decode mode `decode` (MJ_DECODE_*, core/settings.h): its GEMM2 K splits when the forward runs
 * it, else 0 (the chain of kernels); mma and wgmma specs, valid shape. */
int mj_launch_mma_decode_persistent(const moejit_spec *spec, const moejit_moe_args *args, int sms, int decode);
/* ... and, where it runs, whether in its shallow blocks (mj_decode_persistent_shallow, 3 per
 * SM; common/mma_params.h: mj_mma_decode_persistent_shallow), else 0. */
int mj_launch_mma_decode_shallow(const moejit_spec *spec, const moejit_moe_args *args, int sms, int decode);
/* Whether the forward's large path runs its short tiles (wgmma, a gated activation, up to
 * MJ_WGMMA_SHORT_MAX_ROWS_PER_EXPERT rows per local expert: common/wgmma_params.h); mma and
 * wgmma specs, valid shape. */
int mj_launch_mma_short_tiles(const moejit_spec *spec, const moejit_moe_args *args);
/* Which decode layer runs at T <= MJ_MMA_PERSISTENT_MAX_TOKENS is the forward's decode mode
 * (mj_launch_knobs.decode, MJ_DECODE_* of core/settings.h): MJ_DECODE_AUTO (the rule),
 * _PERSISTENT or _CHAIN (always / never the persistent one), _PERSISTENT_DEEP or
 * _PERSISTENT_SHALLOW (always the persistent one, in its 2 x 9-stage or 3 x 6-stage blocks per
 * SM; _PERSISTENT and _AUTO pick those by their rule). A context takes it from $MOEJIT_DECODE;
 * the benchmark's float64 cases pass each mode explicitly to run every layer. */

/* backend=wgmma (templates/wgmma_layer.cuh, sm_90a). Workspace as mma's; the large-batch
 * GEMMs take a W1 / W2 tensor map encoded here per forward (cuTensorMapEncodeTiled). */
moejit_status mj_launch_wgmma_workspace_size(const moejit_spec *spec, const moejit_moe_args *args,
                                             size_t *bytes);
moejit_status mj_launch_wgmma_forward(const mj_driver *d, const moejit_spec *spec, const mj_module *m,
                                      const moejit_moe_args *args, void *workspace,
                                      size_t workspace_bytes, CUstream stream, const mj_launch_knobs *knobs);
/* As mj_launch_mma_path: MJ_MMA_PATH_SMALL (mma's decode kernels), MJ_MMA_PATH_LARGE,
 * MJ_MMA_PATH_TALL or MJ_MMA_PATH_PAIR (the warpgroup-MMA GEMMs in 128 x 256 or 256 x 128
 * tiles, or 128 x 256 in clusters of two sharing weight tiles). */
int mj_launch_wgmma_path(const moejit_spec *spec, const moejit_moe_args *args);

/* ---- the steps mma and wgmma share (launch_mma.c), for launch_wgmma.c ---------------------- */

/* Which mma-family layer a step serves. */
typedef struct mj_mma_launcher {
    mj_backend backend;      /* MJ_BACKEND_MMA or MJ_BACKEND_WGMMA: checked, and named in messages */
    int sm90a_only;          /* refuse every arch but sm_90a */
    int large_bm;            /* token rows per tile of the large path (the small path's is mma's) */
    const char *weights_why; /* why w1 and w2 must be 16-byte aligned */
} mj_mma_launcher;

/* Whether backend b has the tall and pair prefill paths (wgmma's 256 x 128 tiles and its
 * clusters of two, common/wgmma_params.h): the one answer the launchers, the heuristic, the
 * tuning table and `moejit tune` share. */
static inline int mj_backend_has_tall_and_pair_paths(mj_backend b) { return b == MJ_BACKEND_WGMMA; }

/* A checked forward with T > 0: its shape, its path, and the parameter block every kernel
 * receives (the GEMMs may take more). */
typedef struct mj_mma_forward {
    int64_t T, pairs, H, I, e_local, max_tiles;
    int gated, small, tall, pair; /* path: small (decode), tall or pair (wgmma), else large */
    int short_tiles;        /* the large path in its short tiles (mj_launch_mma_short_tiles) */
    int precomputed;        /* routing=precomputed: ids may repeat an expert within a token */
    int programmatic; /* MJ_PDL_* (launch_common.h); MJ_PDL_OFF before sm_90 */
    int persistent_splits; /* the persistent decode layer's GEMM2 K splits, or 0 (the chain) */
    int persistent_shallow; /* it runs in its shallow blocks (mj_launch_mma_decode_shallow) */
    int sms;               /* the device's SMs (set where persistent_splits was decided) */
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
