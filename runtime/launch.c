/*
 * This file contains the launch side of the simt layer: the shape rules of every format, the
 * tensors each spec requires (and refuses), the workspace layout, and the sequence of
 * stream-ordered driver calls that runs one forward.
 *
 * Tensors per spec (E_l = E_local, rows = 2I for a gated activation else I, all row-major,
 * K (the reduction dimension) contiguous; "dtype" is the spec's dtype, bf16 or fp16):
 *
 *   quant       w1 / w2 elements                    w1_scale / w2_scale
 *   bf16, fp16  dtype [E_l, rows, H] / [E_l, H, I]  none
 *   fp8_tensor  e4m3 [E_l, rows, H] / [E_l, H, I]   fp32 [E_l] / fp32 [E_l]
 *   fp8_block   e4m3, same shapes                   fp32 [E_l, rows/128, H/128] / [E_l, H/128, I/128]
 *   w4a16       u8 [E_l, rows, H/2] / [E_l, H, I/2] dtype [E_l, rows, H/g] / [E_l, H, I/g]
 *               (two int4 per byte, even k in the low nibble; w1_zero / w2_zero with
 *               zero_point=1: u8 [E_l, rows, H/g/2] / [E_l, H, I/g/2], packed the same way)
 *   mxfp4       u8 [E_l, rows, H/2] / [E_l, H, I/2] u8 e8m0 [E_l, rows, H/32] / [E_l, H, I/32]
 *               (two e2m1 per byte, even k in the low nibble)
 *
 *   x [T, H] dtype (fp8_tensor with fp8_act=static: e4m3, with x_scale fp32 [1]); out [T, H]
 *   dtype; router_logits [T, E] fp32 or bf16 (spec logits=); routing_bias fp32 [E], optional,
 *   deepseek_v3 only; b1 dtype [E_l, rows] in W1's row order; b2 dtype [E_l, H];
 *   act_param[i] fp32 [E_l] for the activation's parameter i.
 *
 * Shape rules: H, I multiples of 8 (all), of 128 (fp8_block), of g (w4a16; 2g with zero
 * points, so each row's zero points fill whole bytes), of 32 (mxfp4).
 *
 * Workspace layout (every region starts on a 256-byte boundary, in this order; P = T·k):
 *
 *   ids          int32 [P]             local expert id of each (token, slot), or -1
 *   weights      fp32  [P]             routing weight of each (token, slot)
 *   counters     int32 [(C + 1)·E_local + 2] rows per local expert in C = MJ_ROUTE_COUNT_COPIES
 *                                      copies (common/params.h), scatter cursors, then the
 *                                      two fp8 amax words (all zeroed by one memset)
 *   offsets      int32 [E_local + 1]   first row of each expert in the row list
 *   tile_offsets int32 [E_local + 1]   first BLOCK_M row tile of each expert
 *   tiles        int32 [R, 4]          {expert, first row, rows, 0} of each row tile;
 *                                      R = ceil(P / 16) + min(E_local, P) (permute.cuh)
 *   rows         int32 [P]             pair indices t·k + j grouped by expert
 *   inter        dtype [P, I]          activation output, row = position in the row list
 *   y            fp32  [P, H]          GEMM2 output (+ b2), row = pair index
 *   fp8 only:
 *   xq           e4m3  [T, H]          quantized x (not for fp8_act=static)
 *   xscale       fp32  [1] / [T] / [T, H/128]   per tensor / per token / fp8_block
 *   interq       e4m3  [P, I]          quantized intermediate
 *   interscale   fp32  [1] / [P] / [P, I/128]
 *
 * T = 0 needs no workspace and launches nothing. A forward allocates nothing, never
 * synchronises and only enqueues (one memset and the launches), so it can be graph-captured;
 * the grids depend on the shape only, never on the routing. The regions up to y, the
 * workspace checks and the parameter block are built as for every backend (launch_common.c).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "templates/common/params.h"
#include "runtime/args_check.h"
#include "runtime/launch.h"
#include "runtime/launch_backends.h"
#include "runtime/launch_common.h"
#include "core/status.h"

static int is_fp8(const moejit_spec *s) { return s->quant == MJ_QUANT_FP8_TENSOR || s->quant == MJ_QUANT_FP8_BLOCK; }

/* The regions of every layer (launch_common.c), with the two fp8 amax words after the
 * counters, then the fp8 regions. Regions a spec does not use stay at offset 0, size 0. */
static void layout_of(const moejit_spec *spec, const moejit_moe_args *a, mj_ws_layout *w)
{
    mj_launch_layout(spec, a, 2, 1, 4, w); /* y in fp32 (templates/finalize.cuh) */
    if (a->num_tokens == 0) return;
    size_t pairs = (size_t)a->num_tokens * (size_t)a->topk;
    size_t at = w->total;
    if (is_fp8(spec)) {
        const size_t T = (size_t)a->num_tokens, H = (size_t)a->hidden, I = (size_t)a->inter;
        const int block = spec->quant == MJ_QUANT_FP8_BLOCK;
        const int token = spec->quant == MJ_QUANT_FP8_TENSOR && spec->fp8_act == MJ_FP8_ACT_TOKEN;
        if (!(spec->quant == MJ_QUANT_FP8_TENSOR && spec->fp8_act == MJ_FP8_ACT_STATIC)) {
            w->xq = at;
            at = mj_launch_align_up(at + T * H);
            w->xscale = at;
            at = mj_launch_align_up(at + 4 * (block ? T * (H / MJ_FP8_BLOCK) : token ? T : 1));
        }
        w->interq = at;
        at = mj_launch_align_up(at + pairs * I);
        w->interscale = at;
        at = mj_launch_align_up(at + 4 * (block ? pairs * (I / MJ_FP8_BLOCK) : token ? pairs : 1));
    }
    w->total = at;
}

moejit_status mj_launch_workspace_size(const moejit_spec *spec, const moejit_moe_args *args,
                                       size_t *bytes)
{
    if (!bytes) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "workspace_size: bytes must not be NULL");
    *bytes = 0;
    if (spec && spec->backend == MJ_BACKEND_MMA) return mj_launch_mma_workspace_size(spec, args, bytes);
    if (spec && spec->backend == MJ_BACKEND_WGMMA) return mj_launch_wgmma_workspace_size(spec, args, bytes);
    moejit_status st = mj_launch_check_shape(spec, args);
    if (st != MOEJIT_OK) return st;
    mj_ws_layout w;
    layout_of(spec, args, &w);
    *bytes = w.total;
    return MOEJIT_OK;
}

/* Required pointers and their alignment. With T = 0 the per-token tensors may be NULL (an
 * empty framework tensor often has no storage); the weights and their scales are always
 * required. */
static moejit_status check_pointers(const moejit_spec *spec, const moejit_moe_args *a)
{
    const int tokens = a->num_tokens > 0, pre = spec->routing == MJ_ROUTING_PRECOMPUTED;
    const size_t logit_align = spec->logits_dtype == MJ_DTYPE_FP32 ? 4 : 2;
    const int per_token = tokens ? MJ_ARG_REQUIRED : MJ_ARG_OPTIONAL;
    /* the other routing's tensors are ignored, as they always were (callers often pass both) */
    const mj_ptr_rule rules[] = {
        {a->w1, "w1", MJ_ARG_REQUIRED, 16, "16-byte aligned rows for vector loads"},
        {a->w2, "w2", MJ_ARG_REQUIRED, 16, "16-byte aligned rows for vector loads"},
        {a->x, "x", per_token, 16, "vector loads"},
        {a->out, "out", per_token, 16, "vector stores"},
        {a->router_logits, "router_logits", pre ? MJ_ARG_IGNORED : per_token, logit_align, "its element size"},
        {a->topk_ids, "topk_ids", pre ? per_token : MJ_ARG_IGNORED, 4, "int32 elements, routing=precomputed"},
        {a->topk_weights, "topk_weights", pre ? per_token : MJ_ARG_IGNORED, 4, "fp32 elements, routing=precomputed"},
    };
    moejit_status st = mj_check_ptr_rules(rules, sizeof rules / sizeof rules[0]);
    if (st != MOEJIT_OK) return st;
    return mj_launch_check_format_inputs(spec, a);
}

static unsigned ceil_div(int64_t a, int64_t b) { return (unsigned)((a + b - 1) / b); }

/* Blocks of a grid-stride amax over `chunks` 8-element chunks: enough to fill the GPU,
 * fixed by the shape. */
static unsigned amax_blocks(int64_t chunks)
{
    int64_t b = (chunks + MJ_SIMT_AMAX_THREADS - 1) / MJ_SIMT_AMAX_THREADS;
    return (unsigned)(b < 1 ? 1 : b > MJ_SIMT_AMAX_MAX_BLOCKS ? MJ_SIMT_AMAX_MAX_BLOCKS : b);
}

moejit_status mj_launch_forward(const mj_driver *d, const moejit_spec *spec, const mj_module *m,
                                const moejit_moe_args *args, void *workspace,
                                size_t workspace_bytes, CUstream stream, const mj_launch_knobs *knobs)
{
    if (!d || !spec || !m || !args)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "forward: driver, spec, module and args must not be NULL");
    if (spec->backend == MJ_BACKEND_MMA)
        return mj_launch_mma_forward(d, spec, m, args, workspace, workspace_bytes, stream, knobs);
    if (spec->backend == MJ_BACKEND_WGMMA)
        return mj_launch_wgmma_forward(d, spec, m, args, workspace, workspace_bytes, stream, knobs);
    if (spec->backend != MJ_BACKEND_SIMT)
        return mj_fail(MOEJIT_ERR_UNSUPPORTED, "backend: the launcher runs simt layers only, got %s",
                       (unsigned)spec->backend < MJ_BACKEND_COUNT ? mj_backend_names[spec->backend] : "?");
    const mj_simt_tile *tile = mj_simt_tile_find(spec->tile);
    if (!tile)
        return mj_fail(MOEJIT_ERR_UNSUPPORTED, "tile: backend simt knows %s; got %s", MJ_SIMT_TILE_NAMES,
                       spec->tile);
    moejit_status st = mj_launch_check_shape(spec, args);
    if (st != MOEJIT_OK) return st;
    st = check_pointers(spec, args);
    if (st != MOEJIT_OK) return st;

    mj_ws_layout w;
    layout_of(spec, args, &w);
    st = mj_launch_check_workspace(w.total, args, workspace, workspace_bytes);
    if (st != MOEJIT_OK || args->num_tokens == 0) return st;
    if (m->n_kernels < MJ_SIMT_NUM_KERNELS)
        return mj_fail(MOEJIT_ERR_INTERNAL, "module: has %d kernels, the simt layer launches %d",
                       m->n_kernels, MJ_SIMT_NUM_KERNELS);

    const int64_t T = args->num_tokens, k = args->topk, pairs = T * k;
    const int64_t e_local = mj_launch_local_experts(args);
    mj_layer_params p;
    mj_launch_fill_params(args, &w, workspace, mj_simt_max_tiles(pairs, tile->block_m, (int)e_local), &p);
    p.ws_amax = p.ws_cursors + (unsigned long long)e_local * 4;

    /* counts, cursors and the two amax words are contiguous: one memset */
    CUresult r = d->cuMemsetD32Async((CUdeviceptr)p.ws_counts, 0u, mj_launch_counter_words(e_local) + 2, stream);
    if (r != CUDA_SUCCESS) return mj_cuda_fail(d, r, "cuMemsetD32Async(workspace counters)");

    /* The fp8 activation stages run only where the spec quantizes activations. */
    const int fp8 = is_fp8(spec), tensor_q = spec->quant == MJ_QUANT_FP8_TENSOR;
    int run[MJ_SIMT_NUM_KERNELS];
    for (int i = 0; i < MJ_SIMT_NUM_KERNELS; i++) run[i] = 1;
    run[MJ_SIMT_K_X_AMAX] = tensor_q && spec->fp8_act == MJ_FP8_ACT_TENSOR;
    run[MJ_SIMT_K_X_QUANT] = fp8 && !(tensor_q && spec->fp8_act == MJ_FP8_ACT_STATIC);
    run[MJ_SIMT_K_INTER_AMAX] = tensor_q && spec->fp8_act != MJ_FP8_ACT_TOKEN;
    run[MJ_SIMT_K_INTER_QUANT] = fp8;
    const int64_t x_chunks = T * args->hidden / 8, inter_chunks = pairs * args->inter / 8;

    static const char *const names[MJ_SIMT_NUM_KERNELS] = {MJ_SIMT_KERNEL_NAME_LIST};
    const struct { unsigned gx, gy, block; } cfg[MJ_SIMT_NUM_KERNELS] = {
        [MJ_SIMT_K_ROUTE] = {MJ_ROUTE_BLOCKS(T), 1, MJ_SIMT_ROUTE_THREADS},
        [MJ_SIMT_K_EXPERT_OFFSETS] = {1, 1, MJ_SIMT_OFFSETS_THREADS},
        [MJ_SIMT_K_SCATTER] = {ceil_div(pairs, MJ_SCATTER_PAIRS_PER_BLOCK), 1, MJ_SIMT_SCATTER_THREADS},
        [MJ_SIMT_K_X_AMAX] = {amax_blocks(x_chunks), 1, MJ_SIMT_AMAX_THREADS},
        [MJ_SIMT_K_X_QUANT] = {(unsigned)T, 1, MJ_SIMT_QUANT_THREADS},
        [MJ_SIMT_K_GEMM1_ACT] = {(unsigned)p.max_tiles, ceil_div(args->inter, tile->block_n), MJ_SIMT_GEMM_THREADS},
        [MJ_SIMT_K_INTER_AMAX] = {amax_blocks(inter_chunks), 1, MJ_SIMT_AMAX_THREADS},
        [MJ_SIMT_K_INTER_QUANT] = {(unsigned)pairs, 1, MJ_SIMT_QUANT_THREADS},
        [MJ_SIMT_K_GEMM2] = {(unsigned)p.max_tiles, ceil_div(args->hidden, tile->block_n), MJ_SIMT_GEMM_THREADS},
        [MJ_SIMT_K_FINALIZE] = {(unsigned)T, ceil_div(args->hidden, MJ_SIMT_FINALIZE_COLS), MJ_SIMT_FINALIZE_THREADS},
    };
    void *params[] = {&p};
    static const int order[MJ_SIMT_NUM_KERNELS] = {MJ_SIMT_LAUNCH_ORDER};
    for (int o = 0; o < MJ_SIMT_NUM_KERNELS; o++) {
        const int i = order[o];
        if (!run[i]) continue;
        st = mj_launch_kernel(d, m, i, names[i], cfg[i].gx, cfg[i].gy, cfg[i].block, 0, stream, params, 0);
        if (st != MOEJIT_OK) return st;
    }
    return MOEJIT_OK;
}
