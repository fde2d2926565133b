/*
 * This file contains the launch side of the `mma` layer: its workspace layout, the choice
 * of GEMM path per forward, and the stream-ordered driver calls that run one forward.
 *
 * Workspace layout (every region on a 256-byte boundary, in this order; P = T·k), the same
 * regions as the simt layer's because route, scatter and finalize are the simt stages:
 *
 *   ids          int32 [P]             local expert id of each (token, slot), or -1
 *   weights      fp32  [P]             routing weight of each (token, slot)
 *   counters     int32 [(C + 1)·E_local] rows per local expert in C = MJ_ROUTE_COUNT_COPIES
 *                                      copies, then scatter cursors (zeroed; runtime/launch.c)
 *   offsets      int32 [E_local + 1]   first row of each expert in the row list
 *   tile_offsets int32 [E_local + 1]   first row tile of each expert (path's tile size)
 *   tiles        int32 [R, 4]          {expert, first row, rows, 0} of each row tile;
 *                                      R = ceil(P / 16) + min(E_local, P) (permute.cuh)
 *   rows         int32 [P]             pair indices t·k + j grouped by expert
 *   inter        dtype [P, I]          activation output, row = position in the row list
 *   y            fp32  [S, P, H]       GEMM2 output, row = pair index; S = the K splits of a
 *                                      decode GEMM2 (runtime/gemm_plan.h), else 1
 *
 * A forward: route, offsets, scatter, GEMM1, GEMM2, finalize of ONE path (the plan of
 * runtime/gemm_plan.h: what it decides, launch_mma.c carries out), after one memset of the counters where the
 * route blocks do not zero their own (T > 256: MJ_ROUTE_ZEROES_COUNTERS, common/params.h), and
 * without the scatter where the pairs fit one scatter block (the offsets kernel scatters them:
 * MJ_OFFSETS_SCATTER). On the decode path at T <= 16 the first three kernels are one fused
 * routing launch, and at T = 1 (routing not precomputed) none at all: GEMM1's blocks route for
 * themselves; then, for k = 8 or 6 with every expert local and an unsplit GEMM2, GEMM2 and
 * finalize are one kernel
 * too (two launches). At T <= 4 where GEMM1 would run in more than one wave (and at T <= 8
 * where the shape suits it), the whole layer is instead one persistent grid after a kernel
 * that zeroes its sync words (its sync words live in the counters region). The path
 * depends on T, the shape and the spec only (never on the routing's data), every grid on the
 * shape only, so a forward can be captured in a CUDA graph; a graph holds the path of the T
 * it was captured with.
 *
 * On sm_90 and newer every kernel is a programmatic dependent launch: its blocks become
 * resident while the previous kernel's last blocks still run (hiding the launch of each of
 * the chain's kernels: 2-13 us per decode forward on the H200), and each waits in
 * griddepcontrol.wait before it reads or writes anything the chain holds or an input the
 * stream may still be writing (templates/common/grid_dep.cuh), so the forward still computes
 * on what the stream ran before it. MOEJIT_PDL=inner launches the forward's first kernel
 * plainly, MOEJIT_PDL=0 every kernel (launch_common.h).
 *
 * Paths: small (decode, mma's swapped-operand GEMMs), large, and for wgmma tall (256 x 128
 * prefill tiles with their own expert-offsets kernel, appended to the kernel table:
 * common/wgmma_params.h), and pair. The plan (gemm_plan.h) picks one per forward.
 *
 * The wgmma layer shares all of this but its large-path GEMMs, so the steps are exported in
 * pieces (launch_backends.h: mj_launch_mma_begin, _grids_fit, _enqueue) that launch_wgmma.c
 * calls around its own grids and tensor maps; an mj_mma_launcher says which layer is run.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "templates/common/mma_params.h"
#include "templates/common/mma_w4_params.h"
#include "templates/common/params.h"
#include "templates/common/wgmma_params.h"
#include "runtime/args_check.h"
#include "runtime/gemm_plan.h"
#include "runtime/launch_backends.h"
#include "runtime/launch_common.h"
#include "runtime/launch_tc_fp8.h"
#include "core/status.h"

static const mj_mma_launcher mma_launcher = {MJ_BACKEND_MMA, 0, "16-byte cp.async loads"};

static moejit_status check_spec(const mj_mma_launcher *l, const moejit_spec *spec)
{
    const char *be = mj_backend_names[l->backend];
    if (spec->backend != l->backend)
        return mj_fail(MOEJIT_ERR_INTERNAL, "backend: the %s launcher got a %s spec", be,
                       (unsigned)spec->backend < MJ_BACKEND_COUNT ? mj_backend_names[spec->backend] : "?");
    if (l->sm90a_only && spec->arch != MJ_ARCH_SM90A)
        return mj_fail(MOEJIT_ERR_UNSUPPORTED, "arch: backend %s runs on sm_90a only; got %s", be,
                       (unsigned)spec->arch < MJ_ARCH_COUNT ? mj_arch_names[spec->arch] : "?");
    const int path = mj_mma_path_of(spec->tile), has_tall_and_pair = mj_backend_has_tall_and_pair_paths(l->backend);
    if (path < 0 || ((path == MJ_MMA_PATH_TALL || path == MJ_MMA_PATH_PAIR) && !has_tall_and_pair))
        return mj_fail(MOEJIT_ERR_UNSUPPORTED, "tile: backend %s knows %s; got %s", be,
                       has_tall_and_pair ? MJ_WGMMA_TILE_NAMES : MJ_MMA_TILE_NAMES, spec->tile);
    /* e4m3 weights: wgmma's fp8 GEMMs, on every path but mma's 16-bit small tiles */
    if (mj_tc_is_fp8(spec) && l->backend != MJ_BACKEND_WGMMA)
        return mj_fail(MOEJIT_ERR_UNSUPPORTED, "quant: backend %s supports bf16, fp16; got %s", be,
                       mj_quant_names[spec->quant]);
    if (mj_tc_is_fp8(spec) && path == MJ_MMA_PATH_SMALL)
        return mj_fail(MOEJIT_ERR_UNSUPPORTED,
                       "tile: an fp8 %s layer has no small path; use auto, large, tall or pair; got %s", be, spec->tile);
    return MOEJIT_OK;
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* The workspace of the tensor-core layers under plan: y in the dtype, 2 bytes (fp16 and bf16
 * are their only dtypes), or a split decode GEMM2's fp32 partial sums (templates/finalize.cuh),
 * as many copies as the plan's workspace_splits (the most the forward may run, whatever the
 * device: the workspace must not depend on it). */
static void tc_layout(const moejit_spec *spec, const moejit_moe_args *args, const mj_gemm_plan *plan,
                      mj_ws_layout *w)
{
    const int splits = plan->workspace_splits;
    /* the persistent decode layer keeps its sync words where the counters are (it counts
     * nothing there): the region grows to hold them where E_local is small against H */
    size_t extra = 0;
    if (plan->persistent_candidate) {
        const int64_t e_local = mj_launch_local_experts(args);
        const size_t words = (size_t)MJ_MMA_DECODE_SYNC_WORDS(
                                 mj_simt_max_tiles(args->num_tokens * args->topk, MJ_MMA_SMALL_BT, (int)e_local),
                                 args->hidden),
                     have = mj_launch_counter_words(e_local);
        extra = words > have ? words - have : 0;
    }
    if (splits > 1) mj_launch_layout(spec, args, extra, splits, 4, w);
    else mj_launch_layout(spec, args, extra, 1, 2, w);
    mj_tc_fp8_layout(spec, args, w);
}

/* What of a plan sets the workspace's layout besides T (tc_layout): a regime. */
typedef struct ws_regime {
    int path, splits, persistent;
} ws_regime;

static ws_regime regime_at(const moejit_spec *spec, moejit_moe_args *a, int64_t T, size_t *bytes)
{
    a->num_tokens = T;
    mj_gemm_plan plan;
    mj_gemm_plan_make(spec, a, MJ_GEMM_PLAN_SMS_UNKNOWN, MJ_DECODE_AUTO, &plan);
    if (bytes) {
        mj_ws_layout w;
        tc_layout(spec, a, &plan, &w);
        *bytes = w.total;
    }
    return (ws_regime){plan.path, plan.workspace_splits, plan.persistent_candidate};
}

static int same_regime(ws_regime a, ws_regime b)
{
    return a.path == b.path && a.splits == b.splits && a.persistent == b.persistent;
}

/* The most any batch of at most args->num_tokens needs, so that the size for the largest batch
 * serves every smaller one (a decode batch may need more than a larger one: the persistent
 * layer's sync words, a split GEMM2's fp32 partial sums). Within a regime the layout grows with
 * T, and each regime is a range of T (the launch rule's thresholds), so the most is at the top
 * of one of them: from T down, each regime's layout at its top, its bottom found by bisection. */
moejit_status mj_launch_mma_family_workspace_size(const mj_mma_launcher *l, const moejit_spec *spec,
                                                  const moejit_moe_args *args, size_t *bytes)
{
    if (!bytes) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "workspace_size: bytes must not be NULL");
    *bytes = 0;
    moejit_status st = mj_launch_check_shape(spec, args);
    if (st == MOEJIT_OK) st = check_spec(l, spec);
    if (st != MOEJIT_OK) return st;
    moejit_moe_args a = *args;
    size_t most = 0, here = 0;
    int64_t T = args->num_tokens;
    do {
        const ws_regime r = regime_at(spec, &a, T, &here);
        if (here > most) most = here;
        int64_t lo = 1, hi = T; /* the smallest batch of regime r */
        while (lo < hi) {
            const int64_t mid = lo + (hi - lo) / 2;
            if (same_regime(regime_at(spec, &a, mid, NULL), r)) hi = mid;
            else lo = mid + 1;
        }
        T = lo - 1;
    } while (T >= 1);
    *bytes = most;
    return MOEJIT_OK;
}

moejit_status mj_launch_mma_workspace_size(const moejit_spec *spec, const moejit_moe_args *args,
                                           size_t *bytes)
{
    return mj_launch_mma_family_workspace_size(&mma_launcher, spec, args, bytes);
}

/* Tensors a bf16/fp16 mma-family layer cannot honour: refusing beats silently ignoring them. */
static moejit_status check_pointers(const mj_mma_launcher *l, const moejit_spec *spec, const moejit_moe_args *a)
{
    const int tokens = a->num_tokens > 0, pre = spec->routing == MJ_ROUTING_PRECOMPUTED;
    const int dsv3 = spec->routing == MJ_ROUTING_DEEPSEEK_V3;
    const size_t logit_align = spec->logits_dtype == MJ_DTYPE_FP32 ? 4 : 2;
    /* needed: 1 must be given, 0 not read, -1 optional (checked for alignment when given) */
    const struct { const void *p; const char *name; int needed; size_t align; const char *why; } ptrs[] = {
        {a->w1, "w1", 1, 16, l->weights_why},
        {a->w2, "w2", 1, 16, l->weights_why},
        {a->x, "x", tokens, 16, "16-byte cp.async loads"},
        {a->out, "out", tokens, 16, "vector stores"},
        {a->router_logits, "router_logits", tokens && !pre, logit_align, "its element size"},
        {a->topk_ids, "topk_ids", tokens && pre, 4, "int32 elements"},
        {a->topk_weights, "topk_weights", tokens && pre, 4, "fp32 elements"},
        {a->routing_bias, "routing_bias", dsv3 ? -1 : 0, 4, "fp32 elements"},
    };
    moejit_status st = mj_tc_fp8_check_shape(spec, a);
    if (st != MOEJIT_OK) return st;
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++) {
        if (!ptrs[i].needed || (ptrs[i].needed < 0 && !ptrs[i].p)) continue;
        if (!ptrs[i].p)
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "args.%s: must not be NULL (routing=%s)",
                           ptrs[i].name, mj_routing_names[spec->routing]);
        if ((uintptr_t)ptrs[i].p % ptrs[i].align)
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "args.%s: must be %zu-byte aligned (%s), got %p",
                           ptrs[i].name, ptrs[i].align, ptrs[i].why, ptrs[i].p);
    }
    /* scales, zero points (none: 16-bit weights), b1, b2 and the overrides, as every backend
     * checks them; the overrides only in a layer built for them */
    st = mj_launch_check_w4_shape(spec, a);
    if (st == MOEJIT_OK) st = mj_launch_check_format_inputs(spec, a);
    if (st != MOEJIT_OK) return st;
    for (int i = 0; i < MJ_ACT_MAX_PARAMS; i++)
        if (a->act_param[i] && spec->act_overrides != MJ_OVERRIDES_PER_EXPERT)
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                           "args.act_param[%d]: must be NULL: backend %s applies per-expert activation overrides "
                           "only in a layer built for them (add act_overrides=per_expert to the spec)",
                           i, mj_backend_names[l->backend]);
    return MOEJIT_OK;
}

typedef struct launch_cfg {
    int kernel;       /* index into the module's kernel table */
    int64_t blocks;   /* grid x */
    unsigned blocks_y; /* grid y */
    unsigned threads;
    unsigned smem;    /* dynamic shared memory bytes */
    void **params;
} launch_cfg;

moejit_status mj_launch_mma_begin(const mj_mma_launcher *l, const mj_driver *d, const moejit_spec *spec,
                                  const mj_module *m, const moejit_moe_args *args, void *workspace,
                                  size_t workspace_bytes, const mj_launch_knobs *knobs, mj_mma_forward *f)
{
    if (!d || !spec || !m || !args)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "forward: driver, spec, module and args must not be NULL");
    moejit_status st = check_spec(l, spec);
    if (st == MOEJIT_OK) st = mj_launch_check_shape(spec, args);
    if (st == MOEJIT_OK) st = check_pointers(l, spec, args);
    if (st != MOEJIT_OK) return st;

    /* the plan without the device; the decode layer below where it may run */
    mj_gemm_plan plan;
    mj_gemm_plan_make(spec, args, MJ_GEMM_PLAN_SMS_UNKNOWN, MJ_DECODE_AUTO, &plan);
    mj_ws_layout w;
    tc_layout(spec, args, &plan, &w);
    st = mj_launch_check_workspace(w.total, args, workspace, workspace_bytes);
    if (st != MOEJIT_OK || args->num_tokens == 0) return st;
    /* a few tokens: the persistent layer or the chain (its rule needs the device's SM count) */
    const mj_launch_knobs k = knobs ? *knobs : MJ_LAUNCH_KNOBS_DEFAULT;
    f->sms = 0;
    if (plan.persistent_candidate) {
        CUdevice dev;
        int sms = 0;
        CUresult r = d->cuCtxGetDevice(&dev);
        if (r == CUDA_SUCCESS) r = d->cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
        if (r != CUDA_SUCCESS) return mj_cuda_fail(d, r, "cuDeviceGetAttribute(multiprocessor count)");
        if (sms < 1) return mj_fail(MOEJIT_ERR_CUDA, "cuDeviceGetAttribute(multiprocessor count): reported %d", sms);
        f->sms = sms;
        mj_gemm_plan_decode_layer(spec, args, sms, k.decode, &plan);
    }
    const int n_kernels = mj_backend_has_tall_and_pair_paths(l->backend) ? MJ_WGMMA_NUM_KERNELS : MJ_MMA_NUM_KERNELS;
    if (m->n_kernels < n_kernels)
        return mj_fail(MOEJIT_ERR_INTERNAL, "module: has %d kernels, the %s layer has %d", m->n_kernels,
                       mj_backend_names[l->backend], n_kernels);

    f->plan = plan;
    f->T = args->num_tokens, f->pairs = f->T * args->topk;
    f->H = args->hidden, f->I = args->inter, f->e_local = mj_launch_local_experts(args);
    f->gated = moejit_activation_is_gated(&spec->act);
    f->w4 = mj_quant_is_4bit(spec->quant);
    f->precomputed = spec->routing == MJ_ROUTING_PRECOMPUTED;
    f->scatter_x = mj_tc_fp8_scatter_quantizes_x(spec);
    /* griddepcontrol is sm_90's; the kernels of older archs run stream-ordered */
    f->programmatic = spec->arch >= MJ_ARCH_SM90A ? k.pdl : MJ_PDL_OFF;
    mj_launch_fill_params(args, &w, workspace, plan.max_tiles, &f->p);
    f->p.gemm2_splits = plan.gemm2_splits;
    return MOEJIT_OK;
}

moejit_status mj_launch_mma_grids_fit(const mj_mma_launcher *l, const mj_mma_forward *f, int64_t g1, int64_t g2)
{
    if (g1 > INT32_MAX || g2 > INT32_MAX || f->plan.max_tiles > INT32_MAX)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "args.num_tokens: %lld tokens need %lld GEMM blocks; the %s layer allows %d "
                       "(split the batch)",
                       (long long)f->T, (long long)(g1 > g2 ? g1 : g2), mj_backend_names[l->backend], INT32_MAX);
    return MOEJIT_OK;
}

void mj_launch_mma_small_grids(const mj_mma_forward *f, int64_t *g1, int64_t *g2)
{
    *g1 = ceil_div(f->I, f->gated ? MJ_MMA_SMALL_BW / 2 : MJ_MMA_SMALL_BW) * f->plan.max_tiles;
    *g2 = ceil_div(f->H, MJ_MMA_SMALL_BW) * f->plan.max_tiles * f->p.gemm2_splits;
}

moejit_status mj_launch_mma_enqueue(const mj_driver *d, const mj_module *m, mj_mma_forward *f, CUdevice dev,
                                    const mj_mma_gemms *g, CUstream stream)
{
    /* The GEMMs take more than 48 KiB of dynamic shared memory, which needs the opt-in
     * attribute on this device; setting it is idempotent and not a stream operation, so it
     * is legal while a graph is being captured. */
    const mj_gemm_plan *plan = &f->plan;
    /* decode: GEMM1's blocks may route the batch themselves (templates/decode_route.cuh), or
     * one fused kernel route it; batch 1's GEMM2 may finalize too */
    const int routed = plan->routed_gemm1, fused = plan->fused_route, t1 = plan->t1_fused;
    static const char *const names[MJ_WGMMA_NUM_KERNELS] = {MJ_MMA_KERNEL_NAME_LIST, MJ_WGMMA_TALL_KERNEL_NAME_LIST};
    CUresult r;
    if (plan->persistent_splits) {
        /* the persistent layer's blocks (mj_gemm_plan_persistent_blocks_per_sm: deep, shallow
         * or 4-bit) after the kernel that zeroes its sync words (templates/decode_persistent.cuh) */
        const int shallow = plan->persistent_shallow;
        const int kernel = shallow ? MJ_MMA_K_DECODE_PERSISTENT_SHALLOW : MJ_MMA_K_DECODE_PERSISTENT;
        const int smem = f->w4 ? MJ_W4_DECODE_SMEM /* 4-bit: deep blocks only */
                               : shallow ? MJ_MMA_DECODE_SHALLOW_SMEM : MJ_MMA_DECODE_SMEM;
        const int per_sm = plan->persistent_blocks_per_sm;
        r = d->cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem, m->kernels[kernel], dev);
        if (r != CUDA_SUCCESS) return mj_cuda_fail(d, r, "cuKernelSetAttribute(max dynamic shared memory)");
        void *pp[] = {&f->p};
        const int pdl_first = f->programmatic == MJ_PDL_ALL, pdl_inner = f->programmatic != MJ_PDL_OFF;
        moejit_status st = mj_launch_kernel(d, m, MJ_MMA_K_DECODE_RESET, names[MJ_MMA_K_DECODE_RESET], 1, 1,
                                            MJ_MMA_DECODE_RESET_THREADS, 0, stream, pp, pdl_first);
        if (st != MOEJIT_OK) return st;
        return mj_launch_kernel(d, m, kernel, names[kernel], (unsigned)(f->sms * per_sm), 1, MJ_MMA_SMALL_THREADS,
                                (unsigned)smem, stream, pp, pdl_inner);
    }
    const int gemms[2] = {plan->k_gemm1, plan->k_gemm2};
    const int gemm_smem[2] = {g->smem, !t1                                                 ? g->smem
                                       : plan->k_gemm2 == MJ_MMA_K_GEMM2_FINALIZE_T1_SHALLOW ? MJ_MMA_T1_SHALLOW_SMEM
                                                                                               : MJ_MMA_T1_SMEM};
    for (int i = 0; i < 2; i++) {
        r = d->cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, gemm_smem[i],
                                    m->kernels[gemms[i]], dev);
        if (r != CUDA_SUCCESS) return mj_cuda_fail(d, r, "cuKernelSetAttribute(max dynamic shared memory)");
    }

    /* decode: one fused routing launch (it counts in shared memory: no counters to zero); up
     * to MJ_ROUTE_ZEROES_COUNTERS tokens the route blocks zero their own counters */
    if (!fused && !routed && !MJ_ROUTE_ZEROES_COUNTERS(f->T)) {
        r = d->cuMemsetD32Async((CUdeviceptr)f->p.ws_counts, 0u, mj_launch_counter_words(f->e_local), stream);
        if (r != CUDA_SUCCESS) return mj_cuda_fail(d, r, "cuMemsetD32Async(workspace counters)");
    }

    void *params[] = {&f->p};
    /* fp8_act=tensor: the scatter kernel also quantizes x (once, with the one scale it needs
     * every route block's amax for), so it runs at every T, on enough blocks for x's rows */
    const int64_t pair_blocks = ceil_div(f->pairs, MJ_SCATTER_PAIRS_PER_BLOCK), x_blocks = mj_tc_fp8_x_blocks(f->T);
    const int64_t scatter_blocks = !f->scatter_x ? pair_blocks : pair_blocks > x_blocks ? pair_blocks : x_blocks;
    const launch_cfg seq[6] = {
        {MJ_MMA_K_ROUTE, MJ_ROUTE_BLOCKS(f->T), 1, MJ_SIMT_ROUTE_THREADS, 0, params},
        {plan->k_offsets, 1, 1, MJ_SIMT_OFFSETS_THREADS, 0, params},
        {MJ_MMA_K_SCATTER, scatter_blocks, 1, MJ_SIMT_SCATTER_THREADS, 0, params},
        {gemms[0], g->g1, 1, g->threads, (unsigned)g->smem, g->params1 ? g->params1 : params},
        {gemms[1], t1 ? ceil_div(f->H, MJ_MMA_SMALL_BW / MJ_MMA_T1_SLOTS) : g->g2, 1, g->threads,
         (unsigned)gemm_smem[1], g->params2 ? g->params2 : params},
        {MJ_MMA_K_FINALIZE, f->T, (unsigned)ceil_div(f->H, plan->finalize_wide ? MJ_TC_FINALIZE_COLS : MJ_SIMT_FINALIZE_COLS),
         MJ_SIMT_FINALIZE_THREADS, 0, params},
    };
    const launch_cfg fused_cfg = {MJ_MMA_K_ROUTE_FUSED_SMALL, 1, 1, MJ_SIMT_OFFSETS_THREADS, 0, params};
    const int first = routed ? 3 : fused ? 2 : 0, last = t1 ? 4 : 5; /* t1: no finalize launch */
    for (int i = first; i <= last; i++) {
        if (i == 2 && !fused && MJ_OFFSETS_SCATTER(f->pairs) && !f->scatter_x) continue; /* the offsets kernel scattered */
        const launch_cfg *c = fused && i == 2 ? &fused_cfg : &seq[i];
        /* Each kernel may start early and waits in griddepcontrol.wait; under MOEJIT_PDL=inner
         * the first one waits for whatever the stream ran before (and for the memset) in the
         * ordinary way. */
        const int programmatic = f->programmatic == MJ_PDL_ALL || (f->programmatic == MJ_PDL_INNER && i > first);
        moejit_status st = mj_launch_kernel(d, m, c->kernel, names[c->kernel], (unsigned)c->blocks, c->blocks_y,
                                            c->threads, c->smem, stream, c->params, programmatic);
        if (st != MOEJIT_OK) return st;
    }
    return MOEJIT_OK;
}

/* A whole forward of the mma layer. */
static moejit_status mma_kernels_forward(const mj_mma_launcher *l, const mj_driver *d, const moejit_spec *spec,
                                         const mj_module *m, const moejit_moe_args *args, void *workspace,
                                         size_t workspace_bytes, CUstream stream, const mj_launch_knobs *knobs)
{
    mj_mma_forward f;
    moejit_status st = mj_launch_mma_begin(l, d, spec, m, args, workspace, workspace_bytes, knobs, &f);
    if (st != MOEJIT_OK || args->num_tokens == 0) return st;

    /* 4-bit weights: the same tiles and grids, their own pipelines (common/mma_w4_params.h) */
    const int small = f.plan.path == MJ_MMA_PATH_SMALL, w4 = mj_quant_is_4bit(spec->quant);
    mj_mma_gemms g = {0, 0, small ? MJ_MMA_SMALL_THREADS : MJ_MMA_LARGE_THREADS,
                      small ? (w4 ? MJ_W4_SMALL_SMEM : MJ_MMA_SMALL_SMEM) : (w4 ? MJ_W4_LARGE_SMEM : MJ_MMA_LARGE_SMEM),
                      NULL, NULL};
    if (small) {
        mj_launch_mma_small_grids(&f, &g.g1, &g.g2);
    } else { /* intermediate columns per CTA of GEMM1, hidden columns per CTA of GEMM2 */
        g.g1 = ceil_div(f.I, f.gated ? MJ_MMA_LARGE_BN / 2 : MJ_MMA_LARGE_BN) * f.plan.max_tiles;
        g.g2 = ceil_div(f.H, MJ_MMA_LARGE_BN) * f.plan.max_tiles;
    }
    st = mj_launch_mma_grids_fit(l, &f, g.g1, g.g2);
    if (st != MOEJIT_OK) return st;

    CUdevice dev;
    CUresult r = d->cuCtxGetDevice(&dev);
    if (r != CUDA_SUCCESS) return mj_cuda_fail(d, r, "cuCtxGetDevice");
    return mj_launch_mma_enqueue(d, m, &f, dev, &g, stream);
}

moejit_status mj_launch_mma_forward(const mj_driver *d, const moejit_spec *spec, const mj_module *m,
                                    const moejit_moe_args *args, void *workspace,
                                    size_t workspace_bytes, CUstream stream, const mj_launch_knobs *knobs)
{
    return mma_kernels_forward(&mma_launcher, d, spec, m, args, workspace, workspace_bytes, stream, knobs);
}
