/*
 * This file contains the launch side of the simt layer: the shape rules, the workspace
 * layout, and the sequence of stream-ordered driver calls that runs one forward.
 *
 * Workspace layout (every region starts on a 256-byte boundary, in this order; P = T·k):
 *
 *   ids          int32 [P]             local expert id of each (token, slot), or -1
 *   weights      fp32  [P]             routing weight of each (token, slot)
 *   counters     int32 [2·E_local]     rows per local expert, then scatter cursors (zeroed)
 *   offsets      int32 [E_local + 1]   first row of each expert in the row list
 *   tile_offsets int32 [E_local + 1]   first BLOCK_M row tile of each expert
 *   rows         int32 [P]             pair indices t·k + j grouped by expert
 *   inter        dtype [P, I]          activation output, row = position in the row list
 *   y            fp32  [P, H]          GEMM2 output, row = pair index
 *
 * T = 0 needs no workspace and launches nothing. A forward allocates nothing, never
 * synchronises and only enqueues (one memset, six launches), so it can be graph-captured;
 * the grids depend on the shape only, never on the routing.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/params.h"
#include "launch.h"
#include "status.h"

#define WS_ALIGN 256

typedef struct ws_layout {
    size_t ids, weights, counters, offsets, tile_offsets, rows, inter, y;
    size_t total;
} ws_layout;

static size_t align_up(size_t v) { return (v + WS_ALIGN - 1) / WS_ALIGN * WS_ALIGN; }

/* E_local: num_local_experts, where 0 means every expert (moejit.h). */
static int64_t local_experts(const moejit_moe_args *a)
{
    return a->num_local_experts ? a->num_local_experts : a->num_experts;
}

moejit_status mj_launch_check_shape(const moejit_spec *spec, const moejit_moe_args *a)
{
    if (!spec || !a) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "args: spec and args must not be NULL");
    if (a->hidden <= 0 || a->hidden % 8 || a->hidden > MJ_SIMT_MAX_DIM)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "args.hidden: must be a positive multiple of 8 up to %d, got %lld",
                       MJ_SIMT_MAX_DIM, (long long)a->hidden);
    if (a->inter <= 0 || a->inter % 8 || a->inter > MJ_SIMT_MAX_DIM)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "args.inter: must be a positive multiple of 8 up to %d, got %lld",
                       MJ_SIMT_MAX_DIM, (long long)a->inter);
    if (a->num_experts < 1 || a->num_experts > MJ_SIMT_MAX_EXPERTS)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "args.num_experts: must be in 1..%d, got %lld",
                       MJ_SIMT_MAX_EXPERTS, (long long)a->num_experts);
    int64_t kmax = a->num_experts < MJ_SIMT_MAX_TOPK ? a->num_experts : MJ_SIMT_MAX_TOPK;
    if (a->topk < 1 || a->topk > kmax)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "args.topk: must be in 1..min(%d, num_experts) = 1..%lld, got %lld",
                       MJ_SIMT_MAX_TOPK, (long long)kmax, (long long)a->topk);
    if (a->num_tokens < 0)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "args.num_tokens: must be >= 0, got %lld",
                       (long long)a->num_tokens);
    if (a->num_tokens > INT32_MAX / a->topk)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "args.num_tokens: num_tokens * topk must be at most %d (32-bit row indices), "
                       "got %lld * %lld",
                       INT32_MAX, (long long)a->num_tokens, (long long)a->topk);
    if (a->expert_offset < 0 || a->expert_offset >= a->num_experts)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "args.expert_offset: must be in 0..num_experts-1 = 0..%lld, got %lld",
                       (long long)a->num_experts - 1, (long long)a->expert_offset);
    if (a->num_local_experts < 0 || a->num_local_experts > a->num_experts)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "args.num_local_experts: must be in 0..num_experts = 0..%lld (0 = all), got %lld",
                       (long long)a->num_experts, (long long)a->num_local_experts);
    if (a->expert_offset + local_experts(a) > a->num_experts)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "args.num_local_experts: expert_offset + num_local_experts must be <= "
                       "num_experts = %lld (0 means all experts, which needs offset 0), got %lld + %lld",
                       (long long)a->num_experts, (long long)a->expert_offset,
                       (long long)a->num_local_experts);
    static const char *const pin_name[4] = {"hidden", "inter", "num_experts", "topk"};
    const int pinned[4] = {spec->hidden, spec->inter, spec->experts, spec->topk};
    const int64_t given[4] = {a->hidden, a->inter, a->num_experts, a->topk};
    for (int i = 0; i < 4; i++)
        if (pinned[i] && pinned[i] != given[i])
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                           "args.%s: the spec pins it to %d, got %lld", pin_name[i], pinned[i],
                           (long long)given[i]);
    return MOEJIT_OK;
}

static size_t dtype_bytes(mj_dtype d) { return d == MJ_DTYPE_FP32 ? 4 : 2; }

/* The shape must have passed mj_launch_check_shape (so every product below fits: P < 2^31,
 * H, I <= 2^20, and P·H·4 < 2^53). */
static void layout_of(const moejit_spec *spec, const moejit_moe_args *a, ws_layout *w)
{
    memset(w, 0, sizeof *w);
    if (a->num_tokens == 0) return;
    size_t pairs = (size_t)a->num_tokens * (size_t)a->topk;
    size_t e_local = (size_t)local_experts(a);
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
    at = align_up(at + pairs * (size_t)a->inter * dtype_bytes(spec->dtype));
    w->y = at;
    at = align_up(at + pairs * (size_t)a->hidden * 4);
    w->total = at;
}

moejit_status mj_launch_workspace_size(const moejit_spec *spec, const moejit_moe_args *args,
                                       size_t *bytes)
{
    if (!bytes) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "workspace_size: bytes must not be NULL");
    *bytes = 0;
    moejit_status st = mj_launch_check_shape(spec, args);
    if (st != MOEJIT_OK) return st;
    ws_layout w;
    layout_of(spec, args, &w);
    *bytes = w.total;
    return MOEJIT_OK;
}

/* Tensors a bf16/fp16 simt layer cannot honour: refusing beats silently ignoring them. */
static moejit_status check_unused_inputs(const moejit_spec *spec, const moejit_moe_args *a)
{
    const struct { const void *p; const char *name, *why; } unused[] = {
        {a->b1, "b1", "the spec has bias=none"},
        {a->b2, "b2", "the spec has bias=none"},
        {a->w1_scale, "w1_scale", "bf16/fp16 weights have no scales"},
        {a->w2_scale, "w2_scale", "bf16/fp16 weights have no scales"},
        {a->w1_zero, "w1_zero", "bf16/fp16 weights have no zero points"},
        {a->w2_zero, "w2_zero", "bf16/fp16 weights have no zero points"},
        {a->routing_bias, "routing_bias", "only deepseek_v3 routing has a selection bias"},
        {a->act_param[0], "act_param[0]", "per-expert activation overrides are not supported by simt yet"},
        {a->act_param[1], "act_param[1]", "per-expert activation overrides are not supported by simt yet"},
        {a->act_param[2], "act_param[2]", "per-expert activation overrides are not supported by simt yet"},
    };
    (void)spec;
    for (size_t i = 0; i < sizeof unused / sizeof unused[0]; i++)
        if (unused[i].p)
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "args.%s: must be NULL: %s", unused[i].name,
                           unused[i].why);
    return MOEJIT_OK;
}

/* Required pointers and their alignment. With T = 0 the per-token tensors may be NULL (an
 * empty framework tensor often has no storage); the weights are always required. */
static moejit_status check_pointers(const moejit_spec *spec, const moejit_moe_args *a)
{
    const int tokens = a->num_tokens > 0, pre = spec->routing == MJ_ROUTING_PRECOMPUTED;
    const size_t logit_align = spec->logits_dtype == MJ_DTYPE_FP32 ? 4 : 2;
    const struct { const void *p; const char *name; int needed; size_t align; const char *why; } ptrs[] = {
        {a->w1, "w1", 1, 16, "16-byte loads"},
        {a->w2, "w2", 1, 16, "16-byte loads"},
        {a->x, "x", tokens, 16, "16-byte loads"},
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
    return check_unused_inputs(spec, a);
}

static unsigned ceil_div(int64_t a, int64_t b) { return (unsigned)((a + b - 1) / b); }

moejit_status mj_launch_forward(const mj_driver *d, const moejit_spec *spec, const mj_module *m,
                                const moejit_moe_args *args, void *workspace,
                                size_t workspace_bytes, CUstream stream)
{
    if (!d || !spec || !m || !args)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "forward: driver, spec, module and args must not be NULL");
    if (spec->backend != MJ_BACKEND_SIMT)
        return mj_fail(MOEJIT_ERR_UNSUPPORTED, "backend: the launcher runs simt layers only, got %s",
                       mj_backend_names[spec->backend]);
    const mj_simt_tile *tile = mj_simt_tile_find(spec->tile);
    if (!tile)
        return mj_fail(MOEJIT_ERR_UNSUPPORTED, "tile: backend simt knows %s; got %s", MJ_SIMT_TILE_NAMES,
                       spec->tile);
    moejit_status st = mj_launch_check_shape(spec, args);
    if (st != MOEJIT_OK) return st;
    st = check_pointers(spec, args);
    if (st != MOEJIT_OK) return st;

    ws_layout w;
    layout_of(spec, args, &w);
    if (workspace_bytes < w.total)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "workspace_bytes: must be at least %zu for num_tokens=%lld (see "
                       "moejit_workspace_size), got %zu",
                       w.total, (long long)args->num_tokens, workspace_bytes);
    if (args->num_tokens == 0) return MOEJIT_OK; /* nothing to do, nothing read or written */
    if (!workspace)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "workspace: must not be NULL for num_tokens > 0");
    if ((uintptr_t)workspace % WS_ALIGN)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "workspace: must be %d-byte aligned, got %p",
                       WS_ALIGN, workspace);
    if (m->n_kernels < MJ_SIMT_NUM_KERNELS)
        return mj_fail(MOEJIT_ERR_INTERNAL, "module: has %d kernels, the simt layer launches %d",
                       m->n_kernels, MJ_SIMT_NUM_KERNELS);

    const int64_t T = args->num_tokens, k = args->topk, pairs = T * k;
    const int64_t e_local = local_experts(args);
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
    p.hidden = (int)args->hidden;
    p.inter = (int)args->inter;
    p.num_experts = (int)args->num_experts;
    p.topk = (int)k;
    p.expert_offset = (int)args->expert_offset;
    p.num_local_experts = (int)e_local;
    p.max_tiles = (int)mj_simt_max_tiles(pairs, tile->block_m, (int)e_local);

    CUresult r = d->cuMemsetD32Async((CUdeviceptr)p.ws_counts, 0u, (size_t)(2 * e_local), stream);
    if (r != CUDA_SUCCESS) return mj_cuda_fail(d, r, "cuMemsetD32Async(workspace counters)");

    static const char *const names[MJ_SIMT_NUM_KERNELS] = {MJ_SIMT_KERNEL_NAME_LIST};
    const struct { unsigned gx, gy, block; } cfg[MJ_SIMT_NUM_KERNELS] = {
        [MJ_SIMT_K_ROUTE] = {ceil_div(T, MJ_SIMT_ROUTE_THREADS / 32), 1, MJ_SIMT_ROUTE_THREADS},
        [MJ_SIMT_K_EXPERT_OFFSETS] = {1, 1, MJ_SIMT_OFFSETS_THREADS},
        [MJ_SIMT_K_SCATTER] = {ceil_div(pairs, MJ_SIMT_SCATTER_THREADS), 1, MJ_SIMT_SCATTER_THREADS},
        [MJ_SIMT_K_GEMM1_ACT] = {(unsigned)p.max_tiles, ceil_div(args->inter, tile->block_n), MJ_SIMT_GEMM_THREADS},
        [MJ_SIMT_K_GEMM2] = {(unsigned)p.max_tiles, ceil_div(args->hidden, tile->block_n), MJ_SIMT_GEMM_THREADS},
        [MJ_SIMT_K_FINALIZE] = {(unsigned)T, 1, MJ_SIMT_FINALIZE_THREADS},
    };
    void *params[] = {&p};
    for (int i = 0; i < MJ_SIMT_NUM_KERNELS; i++) {
        r = d->cuLaunchKernel((CUfunction)m->kernels[i], cfg[i].gx, cfg[i].gy, 1, cfg[i].block, 1, 1, 0,
                              stream, params, NULL);
        if (r != CUDA_SUCCESS) {
            char what[96];
            snprintf(what, sizeof what, "cuLaunchKernel(%s)", names[i]);
            return mj_cuda_fail(d, r, what);
        }
    }
    return MOEJIT_OK;
}
