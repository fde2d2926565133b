/*
 * This file contains the launch side of the `wgmma` layer (sm_90a): its workspace (mma's
 * layout), the choice of GEMM path per forward (mma's heuristic: the decode path is mma's
 * small-tile kernels, the large path the persistent warpgroup-MMA GEMMs), the two tensor maps
 * the large GEMMs load weights through, and the stream-ordered driver calls of one forward.
 *
 * Workspace layout (every region on a 256-byte boundary, in this order; P = T·k), as mma's:
 *
 *   ids          int32 [P]             local expert id of each (token, slot), or -1
 *   weights      fp32  [P]             routing weight of each (token, slot)
 *   counters     int32 [2·E_local]     rows per local expert, then scatter cursors (zeroed)
 *   offsets      int32 [E_local + 1]   first row of each expert in the row list
 *   tile_offsets int32 [E_local + 1]   first row tile of each expert (path's tile size)
 *   rows         int32 [P]             pair indices t·k + j grouped by expert
 *   inter        dtype [P, I]          activation output, row = position in the row list
 *   y            fp32  [P, H]          GEMM2 output, row = pair index
 *
 * Tensor maps (cuTensorMapEncodeTiled, 128B swizzle, boxes of 64 k x 128 rows x 1, out of
 * bounds read as zeros), encoded on the host at every forward: that is host work only, so a
 * forward still allocates nothing, never synchronises, and can be captured in a CUDA graph
 * (the maps travel inside the captured launches' parameters):
 *
 *   W1, gated    dims (H, I, 2·E_local): plane 2e = expert e's up rows, 2e + 1 its gate rows,
 *                so one box never crosses from up into gate rows, and rows j >= I are zeros
 *   W1, ungated  dims (H, I, E_local)
 *   W2           dims (I, H, E_local)
 *
 * The large GEMMs' grid is min(SMs, an upper bound on their tiles) CTAs of 384 threads: a
 * function of the shape and the device only.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/mma_params.h"
#include "common/params.h"
#include "common/wgmma_params.h"
#include "launch.h"
#include "launch_backends.h"
#include "status.h"

#define WS_ALIGN 256

typedef struct ws_layout {
    size_t ids, weights, counters, offsets, tile_offsets, rows, inter, y;
    size_t total;
} ws_layout;

static size_t align_up(size_t v) { return (v + WS_ALIGN - 1) / WS_ALIGN * WS_ALIGN; }

static int64_t local_experts(const moejit_moe_args *a)
{
    return a->num_local_experts ? a->num_local_experts : a->num_experts;
}

/* The shape must have passed mj_launch_check_shape (P < 2^31, H, I <= 2^20). */
static void layout_of(const moejit_spec *spec, const moejit_moe_args *a, ws_layout *w)
{
    memset(w, 0, sizeof *w);
    if (a->num_tokens == 0) return;
    size_t pairs = (size_t)a->num_tokens * (size_t)a->topk;
    size_t e_local = (size_t)local_experts(a);
    size_t elem = spec->dtype == MJ_DTYPE_FP32 ? 4 : 2;
    size_t at = 0;
    w->ids = at;
    at = align_up(at + pairs * 4);
    w->weights = at;
    at = align_up(at + pairs * 4);
    w->counters = at;
    at = align_up(at + 2 * e_local * 4);
    w->offsets = at;
    at = align_up(at + (e_local + 1) * 4);
    w->tile_offsets = at;
    at = align_up(at + (e_local + 1) * 4);
    w->rows = at;
    at = align_up(at + pairs * 4);
    w->inter = at;
    at = align_up(at + pairs * (size_t)a->inter * elem);
    w->y = at;
    at = align_up(at + pairs * (size_t)a->hidden * 4);
    w->total = at;
}

static moejit_status check_spec(const moejit_spec *spec)
{
    if (spec->backend != MJ_BACKEND_WGMMA)
        return mj_fail(MOEJIT_ERR_INTERNAL, "backend: the wgmma launcher got a %s spec",
                       (unsigned)spec->backend < MJ_BACKEND_COUNT ? mj_backend_names[spec->backend] : "?");
    if (spec->arch != MJ_ARCH_SM90A)
        return mj_fail(MOEJIT_ERR_UNSUPPORTED, "arch: backend wgmma runs on sm_90a only; got %s",
                       (unsigned)spec->arch < MJ_ARCH_COUNT ? mj_arch_names[spec->arch] : "?");
    if (mj_mma_path_of(spec->tile) < 0)
        return mj_fail(MOEJIT_ERR_UNSUPPORTED, "tile: backend wgmma knows %s; got %s", MJ_MMA_TILE_NAMES,
                       spec->tile);
    return MOEJIT_OK;
}

moejit_status mj_launch_wgmma_workspace_size(const moejit_spec *spec, const moejit_moe_args *args,
                                             size_t *bytes)
{
    if (!bytes) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "workspace_size: bytes must not be NULL");
    *bytes = 0;
    moejit_status st = mj_launch_check_shape(spec, args);
    if (st == MOEJIT_OK) st = check_spec(spec);
    if (st != MOEJIT_OK) return st;
    ws_layout w;
    layout_of(spec, args, &w);
    *bytes = w.total;
    return MOEJIT_OK;
}

int mj_launch_wgmma_path(const moejit_spec *spec, const moejit_moe_args *args)
{
    int forced = mj_mma_path_of(spec->tile);
    int64_t pairs = args->num_tokens * args->topk;
    return mj_mma_use_small(pairs, (int)local_experts(args), forced < 0 ? MJ_MMA_PATH_AUTO : forced)
               ? MJ_MMA_PATH_SMALL
               : MJ_MMA_PATH_LARGE;
}

/* Tensors a bf16/fp16 wgmma layer cannot honour: refusing beats silently ignoring them. */
static moejit_status check_pointers(const moejit_spec *spec, const moejit_moe_args *a)
{
    const int tokens = a->num_tokens > 0, pre = spec->routing == MJ_ROUTING_PRECOMPUTED;
    const size_t logit_align = spec->logits_dtype == MJ_DTYPE_FP32 ? 4 : 2;
    const struct { const void *p; const char *name; int needed; size_t align; const char *why; } ptrs[] = {
        {a->w1, "w1", 1, 16, "TMA tensor maps and 16-byte cp.async loads"},
        {a->w2, "w2", 1, 16, "TMA tensor maps and 16-byte cp.async loads"},
        {a->x, "x", tokens, 16, "16-byte cp.async loads"},
        {a->out, "out", tokens, 16, "vector stores"},
        {a->router_logits, "router_logits", tokens && !pre, logit_align, "its element size"},
        {a->topk_ids, "topk_ids", tokens && pre, 4, "int32 elements"},
        {a->topk_weights, "topk_weights", tokens && pre, 4, "fp32 elements"},
    };
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++) {
        if (!ptrs[i].needed) continue;
        if (!ptrs[i].p)
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "args.%s: must not be NULL (routing=%s)",
                           ptrs[i].name, mj_routing_names[spec->routing]);
        if ((uintptr_t)ptrs[i].p % ptrs[i].align)
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "args.%s: must be %zu-byte aligned (%s), got %p",
                           ptrs[i].name, ptrs[i].align, ptrs[i].why, ptrs[i].p);
    }
    const struct { const void *p; const char *name, *why; } unused[] = {
        {a->b1, "b1", "the spec has bias=none"},
        {a->b2, "b2", "the spec has bias=none"},
        {a->w1_scale, "w1_scale", "bf16/fp16 weights have no scales"},
        {a->w2_scale, "w2_scale", "bf16/fp16 weights have no scales"},
        {a->w1_zero, "w1_zero", "bf16/fp16 weights have no zero points"},
        {a->w2_zero, "w2_zero", "bf16/fp16 weights have no zero points"},
        {a->routing_bias, "routing_bias", "only deepseek_v3 routing has a selection bias"},
        {a->act_param[0], "act_param[0]", "per-expert activation overrides are not supported by wgmma"},
        {a->act_param[1], "act_param[1]", "per-expert activation overrides are not supported by wgmma"},
        {a->act_param[2], "act_param[2]", "per-expert activation overrides are not supported by wgmma"},
    };
    for (size_t i = 0; i < sizeof unused / sizeof unused[0]; i++)
        if (unused[i].p)
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "args.%s: must be NULL: %s", unused[i].name,
                           unused[i].why);
    return MOEJIT_OK;
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* A 3-D tensor map over 16-bit rows of length k_len: dims (k_len, rows, planes), row stride
 * k_len elements, plane stride rows_stride rows; boxes of MJ_WGMMA_BK x MJ_WGMMA_TMA_ROWS x 1. */
static moejit_status encode_map(const mj_driver *d, const moejit_spec *spec, CUtensorMap *map, const void *base,
                                int64_t k_len, int64_t rows, int64_t rows_stride, int64_t planes,
                                const char *what)
{
    const cuuint64_t dims[3] = {(cuuint64_t)k_len, (cuuint64_t)rows, (cuuint64_t)planes};
    const cuuint64_t strides[2] = {(cuuint64_t)k_len * 2, (cuuint64_t)(rows_stride * k_len * 2)};
    const cuuint32_t box[3] = {MJ_WGMMA_BK, MJ_WGMMA_TMA_ROWS, 1};
    const cuuint32_t elem_strides[3] = {1, 1, 1};
    const CUtensorMapDataType type =
        spec->dtype == MJ_DTYPE_FP16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    if (!d->cuTensorMapEncodeTiled)
        return mj_fail(MOEJIT_ERR_NO_DRIVER, "%s: the driver has no cuTensorMapEncodeTiled (CUDA 12.0+)", what);
    CUresult r = d->cuTensorMapEncodeTiled(map, type, 3, (void *)base, dims, strides, box, elem_strides,
                                           CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                           CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) return mj_cuda_fail(d, r, what);
    return MOEJIT_OK;
}

typedef struct launch_cfg {
    int kernel;       /* index into the module's kernel table */
    int64_t blocks;   /* 1-D grid */
    unsigned threads;
    unsigned smem;    /* dynamic shared memory bytes */
    void **params;
} launch_cfg;

moejit_status mj_launch_wgmma_forward(const mj_driver *d, const moejit_spec *spec, const mj_module *m,
                                      const moejit_moe_args *args, void *workspace,
                                      size_t workspace_bytes, CUstream stream)
{
    if (!d || !spec || !m || !args)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "forward: driver, spec, module and args must not be NULL");
    moejit_status st = check_spec(spec);
    if (st == MOEJIT_OK) st = mj_launch_check_shape(spec, args);
    if (st == MOEJIT_OK) st = check_pointers(spec, args);
    if (st != MOEJIT_OK) return st;

    ws_layout w;
    layout_of(spec, args, &w);
    if (workspace_bytes < w.total)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "workspace_bytes: must be at least %zu for num_tokens=%lld (see "
                       "moejit_workspace_size), got %zu",
                       w.total, (long long)args->num_tokens, workspace_bytes);
    if (args->num_tokens == 0) return MOEJIT_OK;
    if (!workspace)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "workspace: must not be NULL for num_tokens > 0");
    if ((uintptr_t)workspace % WS_ALIGN)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "workspace: must be %d-byte aligned, got %p",
                       WS_ALIGN, workspace);
    if (m->n_kernels < MJ_MMA_NUM_KERNELS)
        return mj_fail(MOEJIT_ERR_INTERNAL, "module: has %d kernels, the wgmma layer has %d", m->n_kernels,
                       MJ_MMA_NUM_KERNELS);

    const int64_t T = args->num_tokens, k = args->topk, pairs = T * k;
    const int64_t H = args->hidden, I = args->inter, e_local = local_experts(args);
    const int gated = moejit_activation_is_gated(&spec->act);
    const int small = mj_launch_wgmma_path(spec, args) == MJ_MMA_PATH_SMALL;
    const int tile_rows = small ? MJ_MMA_SMALL_BT : MJ_WGMMA_BM;
    const int64_t max_tiles = mj_simt_max_tiles(pairs, tile_rows, (int)e_local);

    CUdevice dev;
    CUresult r = d->cuCtxGetDevice(&dev);
    if (r != CUDA_SUCCESS) return mj_cuda_fail(d, r, "cuCtxGetDevice");

    /* Grids: the small path as mma's (weight tiles x token tiles); the large path persistent,
     * min(SMs, tile upper bound) CTAs over max_tiles x column tiles. */
    int64_t g1, g2;
    if (small) {
        const int64_t cols1 = gated ? MJ_MMA_SMALL_BW / 2 : MJ_MMA_SMALL_BW;
        g1 = ceil_div(I, cols1) * max_tiles;
        g2 = ceil_div(H, MJ_MMA_SMALL_BW) * max_tiles;
    } else {
        int sms = 0;
        r = d->cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
        if (r != CUDA_SUCCESS) return mj_cuda_fail(d, r, "cuDeviceGetAttribute(multiprocessor count)");
        if (sms < 1)
            return mj_fail(MOEJIT_ERR_CUDA, "cuDeviceGetAttribute(multiprocessor count): reported %d", sms);
        const int64_t cols1 = gated ? MJ_WGMMA_BN / 2 : MJ_WGMMA_BN;
        g1 = ceil_div(I, cols1) * max_tiles;
        g2 = ceil_div(H, MJ_WGMMA_BN) * max_tiles;
        if (g1 > INT32_MAX || g2 > INT32_MAX)
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                           "args.num_tokens: %lld tokens make %lld tiles; the wgmma layer indexes at most %d "
                           "(split the batch)",
                           (long long)T, (long long)(g1 > g2 ? g1 : g2), INT32_MAX);
        g1 = g1 < sms ? g1 : sms;
        g2 = g2 < sms ? g2 : sms;
    }
    if (g1 > INT32_MAX || g2 > INT32_MAX || max_tiles > INT32_MAX)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "args.num_tokens: %lld tokens need %lld GEMM blocks; the wgmma layer allows %d "
                       "(split the batch)",
                       (long long)T, (long long)(g1 > g2 ? g1 : g2), INT32_MAX);

    const unsigned long long ws = (unsigned long long)(uintptr_t)workspace;
    mj_layer_params p;
    memset(&p, 0, sizeof p);
    p.x = (uintptr_t)args->x;
    p.router_logits = (uintptr_t)args->router_logits;
    p.topk_ids = (uintptr_t)args->topk_ids;
    p.topk_weights = (uintptr_t)args->topk_weights;
    p.w1 = (uintptr_t)args->w1;
    p.w2 = (uintptr_t)args->w2;
    p.out = (uintptr_t)args->out;
    p.ws_ids = ws + w.ids;
    p.ws_weights = ws + w.weights;
    p.ws_counts = ws + w.counters;
    p.ws_cursors = ws + w.counters + (unsigned long long)e_local * 4;
    p.ws_offsets = ws + w.offsets;
    p.ws_tile_offsets = ws + w.tile_offsets;
    p.ws_rows = ws + w.rows;
    p.ws_inter = ws + w.inter;
    p.ws_y = ws + w.y;
    p.num_tokens = T;
    p.num_pairs = pairs;
    p.hidden = (int)H;
    p.inter = (int)I;
    p.num_experts = (int)args->num_experts;
    p.topk = (int)k;
    p.expert_offset = (int)args->expert_offset;
    p.num_local_experts = (int)e_local;
    p.max_tiles = (int)max_tiles;

    /* The weight tensor maps of the large GEMMs (host-side encoding, no stream work). */
    CUtensorMap w1_map, w2_map;
    memset(&w1_map, 0, sizeof w1_map);
    memset(&w2_map, 0, sizeof w2_map);
    if (!small) {
        st = gated ? encode_map(d, spec, &w1_map, args->w1, H, I, I, 2 * e_local, "cuTensorMapEncodeTiled(w1)")
                   : encode_map(d, spec, &w1_map, args->w1, H, I, I, e_local, "cuTensorMapEncodeTiled(w1)");
        if (st == MOEJIT_OK) st = encode_map(d, spec, &w2_map, args->w2, I, H, H, e_local, "cuTensorMapEncodeTiled(w2)");
        if (st != MOEJIT_OK) return st;
    }

    /* The GEMMs take more than 48 KiB of dynamic shared memory: the opt-in attribute is
     * idempotent and no stream operation, so it is legal during graph capture. */
    const int gemms[2] = {small ? MJ_MMA_K_GEMM1_ACT_SMALL : MJ_MMA_K_GEMM1_ACT,
                          small ? MJ_MMA_K_GEMM2_SMALL : MJ_MMA_K_GEMM2};
    const int smem = small ? MJ_MMA_SMALL_SMEM : MJ_WGMMA_SMEM;
    for (int i = 0; i < 2; i++) {
        r = d->cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem,
                                    m->kernels[gemms[i]], dev);
        if (r != CUDA_SUCCESS) return mj_cuda_fail(d, r, "cuKernelSetAttribute(max dynamic shared memory)");
    }

    const int fused = small && T <= MJ_MMA_FUSED_ROUTE_MAX_TOKENS;
    if (!fused) {
        r = d->cuMemsetD32Async((CUdeviceptr)p.ws_counts, 0u, (size_t)(2 * e_local), stream);
        if (r != CUDA_SUCCESS) return mj_cuda_fail(d, r, "cuMemsetD32Async(workspace counters)");
    }

    void *params[] = {&p};
    void *params1[] = {&p, &w1_map};
    void *params2[] = {&p, &w2_map};
    const unsigned gemm_threads = small ? MJ_MMA_SMALL_THREADS : MJ_WGMMA_THREADS;
    const launch_cfg seq[6] = {
        {MJ_MMA_K_ROUTE, ceil_div(T, MJ_SIMT_ROUTE_THREADS / 32), MJ_SIMT_ROUTE_THREADS, 0, params},
        {small ? MJ_MMA_K_EXPERT_OFFSETS_SMALL : MJ_MMA_K_EXPERT_OFFSETS, 1, MJ_SIMT_OFFSETS_THREADS, 0, params},
        {MJ_MMA_K_SCATTER, ceil_div(pairs, MJ_SIMT_SCATTER_THREADS), MJ_SIMT_SCATTER_THREADS, 0, params},
        {gemms[0], g1, gemm_threads, (unsigned)smem, small ? params : params1},
        {gemms[1], g2, gemm_threads, (unsigned)smem, small ? params : params2},
        {MJ_MMA_K_FINALIZE, T, MJ_SIMT_FINALIZE_THREADS, 0, params},
    };
    const launch_cfg fused_cfg = {MJ_MMA_K_ROUTE_FUSED_SMALL, 1, MJ_SIMT_OFFSETS_THREADS, 0, params};
    static const char *const names[MJ_MMA_NUM_KERNELS] = {MJ_MMA_KERNEL_NAME_LIST};
    for (int i = fused ? 2 : 0; i < 6; i++) {
        const launch_cfg *c = fused && i == 2 ? &fused_cfg : &seq[i];
        r = d->cuLaunchKernel((CUfunction)m->kernels[c->kernel], (unsigned)c->blocks, 1, 1, c->threads, 1, 1,
                              c->smem, stream, c->params, NULL);
        if (r != CUDA_SUCCESS) {
            char what[96];
            snprintf(what, sizeof what, "cuLaunchKernel(%s)", names[c->kernel]);
            return mj_cuda_fail(d, r, what);
        }
    }
    return MOEJIT_OK;
}
