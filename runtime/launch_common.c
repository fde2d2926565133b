/*
 * This file contains the launch steps that every backend takes alike (launch_common.h): the
 * workspace regions all layers share (route, scatter and finalize are the same stages in
 * each), the checks of the caller's workspace, the parameter block every kernel receives,
 * and one kernel launch whose failure names the kernel.
 *
 * None of it allocates, synchronises or reads device memory: a forward built from these
 * steps can still be captured in a CUDA graph.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/launch_common.h"
#include "core/status.h"

size_t mj_launch_align_up(size_t v) { return (v + MJ_WS_ALIGN - 1) / MJ_WS_ALIGN * MJ_WS_ALIGN; }

int64_t mj_launch_local_experts(const moejit_moe_args *a)
{
    return a->num_local_experts ? a->num_local_experts : a->num_experts;
}

size_t mj_launch_counter_words(int64_t e_local) { return (size_t)(MJ_ROUTE_COUNT_COPIES + 1) * (size_t)e_local; }

void mj_launch_layout(const moejit_spec *spec, const moejit_moe_args *a, size_t extra_counters, int y_copies,
                      size_t y_elem, mj_ws_layout *w)
{
    memset(w, 0, sizeof *w);
    if (a->num_tokens == 0) return;
    size_t pairs = (size_t)a->num_tokens * (size_t)a->topk;
    size_t e_local = (size_t)mj_launch_local_experts(a);
    size_t elem = spec->dtype == MJ_DTYPE_FP32 ? 4 : 2;
    size_t at = 0;
    w->ids = at;
    at = mj_launch_align_up(at + pairs * 4);
    w->weights = at;
    at = mj_launch_align_up(at + pairs * 4);
    w->counters = at;
    at = mj_launch_align_up(at + (mj_launch_counter_words((int64_t)e_local) + extra_counters) * 4);
    w->offsets = at;
    at = mj_launch_align_up(at + (e_local + 1) * 4);
    w->tile_offsets = at;
    at = mj_launch_align_up(at + (e_local + 1) * 4);
    w->tiles = at;
    at = mj_launch_align_up(at + (size_t)mj_simt_max_tiles((long long)pairs, MJ_MIN_BLOCK_M, (int)e_local) * 16);
    w->rows = at;
    at = mj_launch_align_up(at + pairs * 4);
    w->inter = at;
    at = mj_launch_align_up(at + pairs * (size_t)a->inter * elem);
    w->y = at;
    at = mj_launch_align_up(at + (size_t)y_copies * pairs * (size_t)a->hidden * y_elem);
    w->total = at;
}

moejit_status mj_launch_check_workspace(size_t total, const moejit_moe_args *a, const void *workspace,
                                        size_t workspace_bytes)
{
    if (workspace_bytes < total)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "workspace_bytes: must be at least %zu for num_tokens=%lld (see "
                       "moejit_workspace_size), got %zu",
                       total, (long long)a->num_tokens, workspace_bytes);
    if (a->num_tokens == 0) return MOEJIT_OK; /* nothing to do, nothing read or written */
    if (!workspace)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "workspace: must not be NULL for num_tokens > 0");
    if ((uintptr_t)workspace % MJ_WS_ALIGN)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "workspace: must be %d-byte aligned, got %p",
                       MJ_WS_ALIGN, workspace);
    return MOEJIT_OK;
}

void mj_launch_fill_params(const moejit_moe_args *args, const mj_ws_layout *w, void *workspace, int64_t max_tiles,
                           mj_layer_params *p)
{
    const unsigned long long ws = (unsigned long long)(uintptr_t)workspace;
    const int64_t e_local = mj_launch_local_experts(args);
    memset(p, 0, sizeof *p);
    p->x = (uintptr_t)args->x;
    p->router_logits = (uintptr_t)args->router_logits;
    p->topk_ids = (uintptr_t)args->topk_ids;
    p->topk_weights = (uintptr_t)args->topk_weights;
    p->w1 = (uintptr_t)args->w1;
    p->w2 = (uintptr_t)args->w2;
    p->out = (uintptr_t)args->out;
    p->routing_bias = (uintptr_t)args->routing_bias;
    p->b1 = (uintptr_t)args->b1;
    p->b2 = (uintptr_t)args->b2;
    p->w1_scale = (uintptr_t)args->w1_scale;
    p->w2_scale = (uintptr_t)args->w2_scale;
    p->w1_zero = (uintptr_t)args->w1_zero;
    p->w2_zero = (uintptr_t)args->w2_zero;
    for (int i = 0; i < 3; i++) p->act_param[i] = (uintptr_t)args->act_param[i];
    p->x_scale = (uintptr_t)args->x_scale;
    p->ws_ids = ws + w->ids;
    p->ws_weights = ws + w->weights;
    p->ws_counts = ws + w->counters;
    p->ws_cursors = ws + w->counters + (unsigned long long)(MJ_ROUTE_COUNT_COPIES * e_local) * 4;
    p->ws_offsets = ws + w->offsets;
    p->ws_tile_offsets = ws + w->tile_offsets;
    p->ws_tiles = ws + w->tiles;
    p->ws_rows = ws + w->rows;
    p->ws_inter = ws + w->inter;
    p->ws_y = ws + w->y;
    if (w->xq) p->ws_xq = ws + w->xq;
    if (w->xscale) p->ws_xscale = ws + w->xscale;
    if (w->interq) p->ws_interq = ws + w->interq;
    if (w->interscale) p->ws_interscale = ws + w->interscale;
    p->num_tokens = args->num_tokens;
    p->num_pairs = args->num_tokens * args->topk;
    p->hidden = (int)args->hidden;
    p->inter = (int)args->inter;
    p->num_experts = (int)args->num_experts;
    p->topk = (int)args->topk;
    p->expert_offset = (int)args->expert_offset;
    p->num_local_experts = (int)e_local;
    p->max_tiles = (int)max_tiles;
}

moejit_status mj_launch_kernel(const mj_driver *d, const mj_module *m, int index, const char *name, unsigned gx,
                               unsigned gy, unsigned block, unsigned smem, CUstream stream, void **params,
                               int programmatic)
{
    CUresult r;
    if (programmatic) {
        CUlaunchAttribute attr;
        memset(&attr, 0, sizeof attr);
        attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr.value.programmaticStreamSerializationAllowed = 1;
        CUlaunchConfig cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.gridDimX = gx, cfg.gridDimY = gy, cfg.gridDimZ = 1;
        cfg.blockDimX = block, cfg.blockDimY = 1, cfg.blockDimZ = 1;
        cfg.sharedMemBytes = smem;
        cfg.hStream = stream;
        cfg.attrs = &attr, cfg.numAttrs = 1;
        r = d->cuLaunchKernelEx(&cfg, (CUfunction)m->kernels[index], params, NULL);
    } else {
        r = d->cuLaunchKernel((CUfunction)m->kernels[index], gx, gy, 1, block, 1, 1, smem, stream, params, NULL);
    }
    if (r == CUDA_SUCCESS) return MOEJIT_OK;
    char what[96];
    snprintf(what, sizeof what, "%s(%s)", programmatic ? "cuLaunchKernelEx" : "cuLaunchKernel", name);
    return mj_cuda_fail(d, r, what);
}
