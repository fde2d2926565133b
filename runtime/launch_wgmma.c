/*
 * This file contains the launch side of the `wgmma` layer (sm_90a): its workspace (mma's
 * layout), the GEMM grids of the path its plan names (gemm_plan.h: the decode path is mma's
 * small-tile kernels, the others the persistent warpgroup-MMA GEMMs), the two tensor maps
 * the large GEMMs load weights through, and the stream-ordered driver calls of one forward.
 *
 * Workspace layout: mma's (launch_mma.c), one layout for every path.
 *
 * Tensor maps (cuTensorMapEncodeTiled, 128B swizzle, boxes of 64 k x BN rows x 1 for the
 * path's tile: BN 256 large and short, 128 tall; gated W1 BN/2 rows, the up and the gate half of a
 * tile; pair: 128 rows, the half of a 256-row tile each CTA of a cluster loads for both; out
 * of bounds read as zeros), encoded on the host at every forward: that is host
 * work only, so a forward still allocates nothing, never synchronises, and can be captured
 * in a CUDA graph (the maps travel inside the captured launches' parameters):
 *
 *   W1, gated    dims (H, I, 2·E_local): up_gate: plane 2e = expert e's up rows, 2e + 1 its
 *                gate rows (gate_up the other way round), so one box never crosses from up
 *                into gate rows, and rows j >= I are zeros; interleaved: dims (H, I, 2I·E_local)
 *                with rows 2H apart and planes one row apart (w1_map_shape)
 *   W1, ungated  dims (H, I, E_local)
 *   W2           dims (I, H, E_local)
 *
 * The large GEMMs' grid is min(SMs, an upper bound on their tiles) CTAs of 384 threads (512
 * for 4-bit weights, whose producer is two warpgroups): a function of the shape and the device
 * only. The pair path's is two CTAs per cluster times
 * min(the clusters the device keeps resident at once, an upper bound on its tiles): a
 * persistent schedule wants every cluster resident (one that is not runs its share of the
 * tiles after another cluster finishes: correct, but up to twice as long), and whether 66
 * clusters of two fit 132 SMs depends on how the SMs are grouped, so the driver is asked
 * (cuOccupancyMaxActiveClusters, host only; a few microseconds per prefill forward).
 *
 * Everything else (checks, workspace, parameter block, the launch sequence) is mma's, run
 * through the shared steps of launch_mma.c with this layer's mj_mma_launcher.
 */
#include <stdint.h>
#include <string.h>

#include "templates/common/mma_params.h"
#include "templates/common/mma_w4_params.h"
#include "templates/common/wgmma_params.h"
#include "runtime/launch_backends.h"
#include "runtime/launch_tc_fp8.h"
#include "core/status.h"

static const mj_mma_launcher wgmma_launcher = {MJ_BACKEND_WGMMA, 1, "TMA tensor maps and 16-byte cp.async loads"};

moejit_status mj_launch_wgmma_workspace_size(const moejit_spec *spec, const moejit_moe_args *args,
                                             size_t *bytes)
{
    return mj_launch_mma_family_workspace_size(&wgmma_launcher, spec, args, bytes);
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* How many clusters of MJ_WGMMA_PAIR_CTAS CTAs of the pair path's GEMM `kernel` the device
 * keeps resident at once (its shared-memory opt-in set first, as the launch will). */
static moejit_status pair_resident_clusters(const mj_driver *d, const mj_module *m, int kernel, CUdevice dev,
                                            CUstream stream, int threads, int smem, int *clusters)
{
    CUresult r = d->cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem,
                                         m->kernels[kernel], dev);
    if (r != CUDA_SUCCESS) return mj_cuda_fail(d, r, "cuKernelSetAttribute(max dynamic shared memory)");
    CUfunction fn;
    r = d->cuKernelGetFunction(&fn, m->kernels[kernel]);
    if (r != CUDA_SUCCESS) return mj_cuda_fail(d, r, "cuKernelGetFunction(pair GEMM)");
    CUlaunchAttribute attr;
    memset(&attr, 0, sizeof attr);
    attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.clusterDim.x = MJ_WGMMA_PAIR_CTAS, attr.value.clusterDim.y = 1, attr.value.clusterDim.z = 1;
    CUlaunchConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDimX = MJ_WGMMA_PAIR_CTAS, cfg.gridDimY = 1, cfg.gridDimZ = 1;
    cfg.blockDimX = (unsigned)threads, cfg.blockDimY = 1, cfg.blockDimZ = 1;
    cfg.sharedMemBytes = (unsigned)smem;
    cfg.hStream = stream;
    cfg.attrs = &attr, cfg.numAttrs = 1;
    *clusters = 0;
    r = d->cuOccupancyMaxActiveClusters(clusters, fn, &cfg);
    if (r != CUDA_SUCCESS) return mj_cuda_fail(d, r, "cuOccupancyMaxActiveClusters(pair GEMM)");
    if (*clusters < 1)
        return mj_fail(MOEJIT_ERR_CUDA,
                       "tile: this device cannot keep one cluster of %d CTAs of %d bytes of shared memory "
                       "resident (cuOccupancyMaxActiveClusters: %d); use tile=large or tall",
                       MJ_WGMMA_PAIR_CTAS, smem, *clusters);
    return MOEJIT_OK;
}

/* A 3-D tensor map over rows of length k_len: dims (k_len, rows, planes), row stride row_stride
 * elements, plane stride plane_stride elements; boxes of one 128-byte swizzle row (MJ_WGMMA_BK
 * 16-bit elements, or MJ_WGMMA_FP8_BK e4m3 bytes) x box_rows x 1. */
typedef struct map_shape {
    int64_t k_len, row_stride, rows, plane_stride, planes;
} map_shape;

static moejit_status encode_map(const mj_driver *d, const moejit_spec *spec, CUtensorMap *map, const void *base,
                                map_shape m, unsigned box_rows, const char *what)
{
    const int fp8 = mj_tc_is_fp8(spec);
    const cuuint64_t elem = fp8 ? 1 : 2;
    const cuuint64_t dims[3] = {(cuuint64_t)m.k_len, (cuuint64_t)m.rows, (cuuint64_t)m.planes};
    const cuuint64_t strides[2] = {(cuuint64_t)m.row_stride * elem, (cuuint64_t)m.plane_stride * elem};
    const cuuint32_t box[3] = {fp8 ? MJ_WGMMA_FP8_BK : MJ_WGMMA_BK, box_rows, 1};
    const cuuint32_t elem_strides[3] = {1, 1, 1};
    const CUtensorMapDataType type = fp8                          ? CU_TENSOR_MAP_DATA_TYPE_UINT8
                                     : spec->dtype == MJ_DTYPE_FP16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                                    : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    if (!d->cuTensorMapEncodeTiled)
        return mj_fail(MOEJIT_ERR_NO_DRIVER, "%s: the driver has no cuTensorMapEncodeTiled (CUDA 12.0+)", what);
    CUresult r = d->cuTensorMapEncodeTiled(map, type, 3, (void *)base, dims, strides, box, elem_strides,
                                           CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                           CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) return mj_cuda_fail(d, r, what);
    return MOEJIT_OK;
}

/* W1's map for the layer's layout (templates/wgmma_gemm.cuh, w1_weight_plane, reads it):
 *   ungated      planes of I rows, one per expert
 *   up_gate      planes of I rows: 2e up, 2e + 1 gate
 *   gate_up      the same planes: 2e gate, 2e + 1 up
 *   interleaved  rows 2H apart (one half of a column pair each), planes one row apart: plane
 *                2I·e + h holds expert e's rows 2j + h, so a box of plane 2I·e + 1 is its up
 *                rows; the planes overlap, which a tensor map allows (it only reads) */
static map_shape w1_map_shape(const moejit_spec *spec, int gated, int64_t H, int64_t I, int64_t e_local)
{
    if (!gated) return (map_shape){H, H, I, I * H, e_local};
    if (spec->w1_layout == MJ_W1_INTERLEAVED) return (map_shape){H, 2 * H, I, H, 2 * I * e_local};
    return (map_shape){H, H, I, I * H, 2 * e_local};
}

moejit_status mj_launch_wgmma_forward(const mj_driver *d, const moejit_spec *spec, const mj_module *m,
                                      const moejit_moe_args *args, void *workspace,
                                      size_t workspace_bytes, CUstream stream, const mj_launch_knobs *knobs)
{
    mj_mma_forward f;
    moejit_status st =
        mj_launch_mma_begin(&wgmma_launcher, d, spec, m, args, workspace, workspace_bytes, knobs, &f);
    if (st != MOEJIT_OK || args->num_tokens == 0) return st;
    const int64_t T = f.T, H = f.H, I = f.I, e_local = f.e_local, max_tiles = f.plan.max_tiles;
    const int gated = f.gated, small = f.plan.path == MJ_MMA_PATH_SMALL, pair = f.plan.path == MJ_MMA_PATH_PAIR;
    /* 4-bit weights: mma's 4-bit decode GEMMs, and large GEMMs whose producer dequantizes the
     * weights it copies itself (no tensor maps; templates/wgmma_w4_producer.cuh) */
    const int w4 = f.w4;
    /* weight rows per tile (the short tiles have the large ones': MJ_WGMMA_SHORT_BN) */
    const int64_t bn = f.plan.path == MJ_MMA_PATH_TALL ? MJ_WGMMA_TALL_BN : MJ_WGMMA_BN;

    CUdevice dev;
    CUresult r = d->cuCtxGetDevice(&dev);
    if (r != CUDA_SUCCESS) return mj_cuda_fail(d, r, "cuCtxGetDevice");

    /* Grids: the small path as mma's (weight tiles x token tiles); the large path persistent,
     * min(SMs, tile upper bound) CTAs over max_tiles x column tiles. */
    int64_t g1, g2;
    if (small) {
        mj_launch_mma_small_grids(&f, &g1, &g2);
    } else {
        int sms = 0;
        r = d->cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
        if (r != CUDA_SUCCESS) return mj_cuda_fail(d, r, "cuDeviceGetAttribute(multiprocessor count)");
        if (sms < 1)
            return mj_fail(MOEJIT_ERR_CUDA, "cuDeviceGetAttribute(multiprocessor count): reported %d", sms);
        const int64_t cols1 = gated ? bn / 2 : bn;
        g1 = ceil_div(I, cols1) * max_tiles;
        g2 = ceil_div(H, bn) * max_tiles;
        if (g1 > INT32_MAX || g2 > INT32_MAX)
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                           "args.num_tokens: %lld tokens make %lld tiles; the wgmma layer indexes at most %d "
                           "(split the batch)",
                           (long long)T, (long long)(g1 > g2 ? g1 : g2), INT32_MAX);
        if (pair) { /* a cluster of two CTAs runs two row tiles: units of ceil(max_tiles / 2) */
            g1 = ceil_div(I, cols1) * ceil_div(max_tiles, MJ_WGMMA_PAIR_CTAS);
            g2 = ceil_div(H, bn) * ceil_div(max_tiles, MJ_WGMMA_PAIR_CTAS);
            int c1 = 0, c2 = 0;
            const int smem = w4 ? MJ_WGMMA_W4_SMEM : mj_tc_is_fp8(spec) ? MJ_WGMMA_FP8_SMEM : MJ_WGMMA_SMEM;
            const int threads = w4 ? MJ_WGMMA_W4_THREADS : MJ_WGMMA_THREADS;
            st = pair_resident_clusters(d, m, MJ_WGMMA_K_GEMM1_ACT_PAIR, dev, stream, threads, smem, &c1);
            if (st == MOEJIT_OK)
                st = pair_resident_clusters(d, m, MJ_WGMMA_K_GEMM2_PAIR, dev, stream, threads, smem, &c2);
            if (st != MOEJIT_OK) return st;
            g1 = MJ_WGMMA_PAIR_CTAS * (g1 < c1 ? g1 : c1);
            g2 = MJ_WGMMA_PAIR_CTAS * (g2 < c2 ? g2 : c2);
        } else {
            g1 = g1 < sms ? g1 : sms;
            g2 = g2 < sms ? g2 : sms;
        }
    }
    st = mj_launch_mma_grids_fit(&wgmma_launcher, &f, g1, g2);
    if (st != MOEJIT_OK) return st;

    /* The weight tensor maps of the large GEMMs (host-side encoding, no stream work). */
    CUtensorMap w1_map, w2_map;
    memset(&w1_map, 0, sizeof w1_map);
    memset(&w2_map, 0, sizeof w2_map);
    if (!small && !w4) {
        /* a tile's bn weight rows in one box; gated: bn/2 up rows, then a box of the same
         * columns' bn/2 gate rows; pair: each CTA of a cluster loads bn/2 rows (gated: the up
         * or the gate half) for both */
        const unsigned box = (unsigned)(pair ? bn / MJ_WGMMA_PAIR_CTAS : bn);
        st = encode_map(d, spec, &w1_map, args->w1, w1_map_shape(spec, gated, H, I, e_local),
                        gated ? (unsigned)bn / 2 : box, "cuTensorMapEncodeTiled(w1)");
        if (st == MOEJIT_OK)
            st = encode_map(d, spec, &w2_map, args->w2, (map_shape){I, I, H, H * I, e_local}, box,
                            "cuTensorMapEncodeTiled(w2)");
        if (st != MOEJIT_OK) return st;
    }

    void *params1[] = {&f.p, &w1_map};
    void *params2[] = {&f.p, &w2_map};
    /* the fp8 GEMMs keep each stage's A row scales after the barriers */
    const int fp8 = mj_tc_is_fp8(spec);
    const int big_smem = w4                  ? MJ_WGMMA_W4_SMEM
                         : f.plan.short_tiles ? (fp8 ? MJ_WGMMA_FP8_SHORT_SMEM : MJ_WGMMA_SHORT_SMEM)
                                              : (fp8 ? MJ_WGMMA_FP8_SMEM : MJ_WGMMA_SMEM);
    const int small_smem = w4 ? MJ_W4_SMALL_SMEM : MJ_MMA_SMALL_SMEM;
    const mj_mma_gemms g = {g1, g2, small ? MJ_MMA_SMALL_THREADS : w4 ? MJ_WGMMA_W4_THREADS : MJ_WGMMA_THREADS,
                            small ? small_smem : big_smem,
                            small ? NULL : params1, small ? NULL : params2};
    return mj_launch_mma_enqueue(d, m, &f, dev, &g, stream);
}
