/*
 * This file contains the tensor-core layers' launch policy (gemm_plan.h): which GEMM path,
 * row tiles, kernels, decode GEMM2 K splits and decode layer a forward takes, from the spec,
 * the shape, T, the tuning table, the device's SM count and the decode mode.
 */
#include <stdint.h>

#include "templates/common/mma_params.h"
#include "templates/common/mma_w4_params.h"
#include "templates/common/params.h"
#include "templates/common/wgmma_params.h"
#include "runtime/gemm_plan.h"
#include "runtime/launch_backends.h"
#include "runtime/launch_common.h"
#include "runtime/tune_table.h"

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* (1 - k/E)^T by squaring: plain IEEE products, the same answer on every host, in O(log T). */
int mj_gemm_plan_chain_splits(long long col_tiles, long long tokens, int topk, int experts, int e_local,
                              long long inter, long long min_k)
{
    if (inter / 2 < min_k || experts < 1) return 1;
    double base = 1.0 - (double)topk / (double)experts, untouched = 1.0;
    for (long long n = tokens; n > 0; n >>= 1) {
        if (n & 1) untouched *= base;
        base *= base;
    }
    const double live = (double)col_tiles * (double)e_local * (1.0 - untouched);
    return live < MJ_MMA_SPLIT_MAX_LIVE_CTAS ? MJ_MMA_SPLIT_MAX : 1;
}

/* The power of two nearest inter / MJ_MMA_DECODE_SPLIT_K in log2, at most MJ_MMA_DECODE_SPLIT_MAX:
 * step up while inter / (2s) is at least sqrt(1/2) of the split length. */
int mj_gemm_plan_persistent_splits(long long inter)
{
    int s = 1;
    while (s < MJ_MMA_DECODE_SPLIT_MAX && inter * 1000 >= (long long)(2 * s) * MJ_MMA_DECODE_SPLIT_K * 707) s *= 2;
    return s;
}

/* The chain's GEMM1 runs in waves whose boundaries leave the weight stream idle, which the
 * persistent grid fills with GEMM2 tiles; in one wave there is nothing to fill. */
int mj_gemm_plan_persistent_fills(long long routed, long long inter, int gated, long long blocks)
{
    const long long cols = gated ? MJ_MMA_SMALL_BW / 2 : MJ_MMA_SMALL_BW;
    return routed * ((inter + cols - 1) / cols) > blocks;
}

int mj_gemm_plan_persistent_blocks_per_sm(const moejit_spec *spec, int shallow)
{
    if (mj_quant_is_4bit(spec->quant))
        return MJ_W4_DECODE_BLOCKS_PER_SM(spec->arch == MJ_ARCH_SM90A || spec->arch == MJ_ARCH_SM100A,
                                          spec->zero_point, spec->quant == MJ_QUANT_MXFP4,
                                          spec->dtype == MJ_DTYPE_FP16);
    return shallow ? MJ_MMA_DECODE_SHALLOW_BLOCKS_PER_SM : MJ_MMA_DECODE_BLOCKS_PER_SM;
}

/* Shallow where the routed GEMM1 tiles make enough rounds of the shallow blocks and one
 * expert's tiles alone do not outnumber them (there the shallow blocks do not gain). */
int mj_gemm_plan_persistent_shallow(long long routed, long long inter, int gated, int sms)
{
    const long long cols = gated ? MJ_MMA_SMALL_BW / 2 : MJ_MMA_SMALL_BW;
    const long long per_expert = (inter + cols - 1) / cols, blocks = (long long)sms * MJ_MMA_DECODE_SHALLOW_BLOCKS_PER_SM;
    return per_expert < blocks &&
           MJ_MMA_SHALLOW_MIN_ROUNDS_DEN * routed * per_expert >= MJ_MMA_SHALLOW_MIN_ROUNDS_NUM * blocks;
}

/* A GEMM2 tile's K range is the persistent split's (MJ_MMA_GEMM2_SPLIT_K, as the kernel runs it). */
int mj_gemm_plan_persistent_shape(long long tokens, long long hidden, long long inter)
{
    if (tokens <= MJ_MMA_PERSISTENT_ANY_SHAPE_TOKENS) return 1;
    const long long splits = mj_gemm_plan_persistent_splits(inter);
    return hidden <= MJ_MMA_PERSISTENT_MAX_K_RATIO * MJ_MMA_GEMM2_SPLIT_K(inter, splits);
}

/* e4m3 weights: no small path (mma's small tiles read 16-bit weights); decode takes the
 * large path, in its short tiles where gated (templates/wgmma_fp8.cuh). */
static int fp8_weights(const moejit_spec *spec)
{
    return spec->quant == MJ_QUANT_FP8_TENSOR || spec->quant == MJ_QUANT_FP8_BLOCK;
}

/* Whether the rule gives a forward of spec wgmma's pair and short tiles: a 4-bit layer of
 * wgmma has no short tiles, and takes its pair tiles only where the spec's tile names them
 * (templates/wgmma_w4_layer.cuh). */
static int wgmma_prefill(const moejit_spec *spec)
{
    return mj_backend_has_tall_and_pair_paths(spec->backend) && !mj_quant_is_4bit(spec->quant);
}

/* The built-in rule: small up to the format's and backend's rows per local expert, wgmma's
 * pair from MJ_WGMMA_PAIR_MIN_ROWS_PER_EXPERT (4-bit: tall from
 * MJ_W4_WGMMA_TALL_MIN_ROWS_PER_EXPERT), else large (16-bit and fp8 tall only when forced or
 * tuned). */
static int rule_path(const moejit_spec *spec, const moejit_moe_args *args)
{
    const int64_t pairs = args->num_tokens * args->topk, e_local = mj_launch_local_experts(args);
    const int wgmma = mj_backend_has_tall_and_pair_paths(spec->backend);
    const int64_t small_max = mj_quant_is_4bit(spec->quant)
                                  ? (wgmma ? MJ_W4_WGMMA_SMALL_MAX_ROWS_PER_EXPERT : MJ_W4_SMALL_MAX_ROWS_PER_EXPERT)
                              : wgmma_prefill(spec) ? MJ_WGMMA_SMALL_MAX_ROWS_PER_EXPERT
                                                    : MJ_MMA_SMALL_MAX_ROWS_PER_EXPERT;
    if (pairs <= small_max * e_local && !fp8_weights(spec)) return MJ_MMA_PATH_SMALL;
    if (wgmma_prefill(spec) &&
        pairs >= (int64_t)MJ_WGMMA_PAIR_MIN_ROWS_PER_EXPERT * e_local)
        return MJ_MMA_PATH_PAIR;
    if (wgmma && mj_quant_is_4bit(spec->quant) && pairs >= (int64_t)MJ_W4_WGMMA_TALL_MIN_ROWS_PER_EXPERT * e_local)
        return MJ_MMA_PATH_TALL;
    return MJ_MMA_PATH_LARGE;
}

/* The spec's forced tile, else a choice `moejit tune` recorded for this shape and batch bucket,
 * else the rule. */
static int chosen_path(const moejit_spec *spec, const moejit_moe_args *args, int rule)
{
    const int forced = mj_mma_path_of(spec->tile);
    if (forced > MJ_MMA_PATH_AUTO) return forced;
    /* the table holds 16-bit layers' measurements only (tune_table.h), and mma's entries name
     * no tall or pair path, so what it returns is a path of this layer */
    const int tuned = mj_tune_path(spec, args);
    return tuned != MJ_MMA_PATH_AUTO ? tuned : rule;
}

/* Batch 1's one-kernel GEMM2 + finalize after the routed GEMM1 (MJ_MMA_T1_GEMM2_FINALIZE, which
 * the routed GEMM1 evaluates too): its kernel, or -1. With k = 8 its H / 8 blocks are as many,
 * as full, as the unfused GEMM2's; with k = 6 they outnumber them and fit one wave only three
 * to an SM (the shallow kernel); other k, untried, and an expert-parallel rank keep GEMM2 and
 * finalize. */
static int t1_kernel(const moejit_spec *spec, const moejit_moe_args *args, const mj_gemm_plan *p, int precomputed,
                     int64_t e_local)
{
    if (p->path != MJ_MMA_PATH_SMALL || precomputed || mj_quant_is_4bit(spec->quant) || /* 16-bit only */
        !MJ_MMA_T1_GEMM2_FINALIZE(args->num_tokens, p->chain_splits, args->topk, e_local, args->num_experts))
        return -1;
    return args->topk == MJ_MMA_T1_SLOTS ? MJ_MMA_K_GEMM2_FINALIZE_T1 : MJ_MMA_K_GEMM2_FINALIZE_T1_SHALLOW;
}

/* The chain's kernels of the plan's path. */
static void chain_kernels(const moejit_spec *spec, const moejit_moe_args *args, int precomputed, int64_t e_local,
                          mj_gemm_plan *p)
{
    const int small = p->path == MJ_MMA_PATH_SMALL, tall = p->path == MJ_MMA_PATH_TALL;
    const int pair = p->path == MJ_MMA_PATH_PAIR, short_tiles = p->short_tiles;
    const int t1_k = t1_kernel(spec, args, p, precomputed, e_local);
    p->t1_fused = t1_k >= 0;
    p->k_gemm1 = small         ? (p->routed_gemm1 ? MJ_MMA_K_GEMM1_ACT_SMALL_ROUTED : MJ_MMA_K_GEMM1_ACT_SMALL)
                 : tall        ? MJ_WGMMA_K_GEMM1_ACT_TALL
                 : pair        ? MJ_WGMMA_K_GEMM1_ACT_PAIR
                 : short_tiles ? MJ_WGMMA_K_GEMM1_ACT_SHORT
                               : MJ_MMA_K_GEMM1_ACT;
    p->k_gemm2 = small         ? (p->t1_fused ? t1_k : MJ_MMA_K_GEMM2_SMALL)
                 : tall        ? MJ_WGMMA_K_GEMM2_TALL
                 : pair        ? MJ_WGMMA_K_GEMM2_PAIR
                 : short_tiles ? MJ_WGMMA_K_GEMM2_SHORT
                               : MJ_MMA_K_GEMM2;
    p->k_offsets = small         ? MJ_MMA_K_EXPERT_OFFSETS_SMALL
                   : tall        ? MJ_WGMMA_K_EXPERT_OFFSETS_TALL
                   : p->pair_order ? MJ_WGMMA_K_EXPERT_OFFSETS_PAIR
                   : short_tiles ? MJ_WGMMA_K_EXPERT_OFFSETS_SHORT
                                 : MJ_MMA_K_EXPERT_OFFSETS;
}

/* The row tiles of the plan's path: mma's small tiles, wgmma's tall or short ones, else the
 * backend's large ones. */
static int row_tile(const moejit_spec *spec, const mj_gemm_plan *p)
{
    if (p->path == MJ_MMA_PATH_SMALL) return MJ_MMA_SMALL_BT;
    if (p->path == MJ_MMA_PATH_TALL) return MJ_WGMMA_TALL_BM;
    if (p->short_tiles) return MJ_WGMMA_SHORT_BM;
    return spec->backend == MJ_BACKEND_WGMMA ? MJ_WGMMA_BM : MJ_MMA_LARGE_BM;
}

void mj_gemm_plan_decode_layer(const moejit_spec *spec, const moejit_moe_args *args, int sms, int decode,
                               mj_gemm_plan *plan)
{
    plan->persistent_splits = 0;
    plan->persistent_shallow = 0;
    plan->persistent_blocks_per_sm = 0;
    plan->gemm2_splits = plan->chain_splits;
    if (!plan->persistent_candidate || decode == MJ_DECODE_CHAIN) return;
    const int64_t pairs = args->num_tokens * args->topk, e_local = mj_launch_local_experts(args);
    const int64_t routed = pairs < e_local ? pairs : e_local; /* the local experts routed to at most */
    const int gated = moejit_activation_is_gated(&spec->act);
    const int told = decode == MJ_DECODE_PERSISTENT || decode == MJ_DECODE_PERSISTENT_DEEP ||
                     decode == MJ_DECODE_PERSISTENT_SHALLOW;
    /* 4-bit: the chain's GEMMs (five blocks per SM, the row-scaled mxfp4 form) were as fast or
     * faster at every batch measured (B = 2-8, docs/PERFORMANCE.md), so only when told */
    if (!told && mj_quant_is_4bit(spec->quant)) return;
    const long long deep_blocks = (long long)sms * mj_gemm_plan_persistent_blocks_per_sm(spec, 0);
    if (!told && !(mj_gemm_plan_persistent_fills(routed, args->inter, gated, deep_blocks) &&
                   mj_gemm_plan_persistent_shape(args->num_tokens, args->hidden, args->inter)))
        return;
    plan->persistent_splits = mj_gemm_plan_persistent_splits(args->inter);
    plan->gemm2_splits = plan->persistent_splits;
    /* the shallow blocks need an SM of 228 KiB (sm_90a, sm_100a: three blocks of 60 KiB stages
     * and ~7 KiB of routing fit; measured on sm_90a only), unless the mode names the blocks */
    if (mj_quant_is_4bit(spec->quant)) /* 4-bit: the deep blocks only (templates/mma_w4_layer.cuh) */
        plan->persistent_shallow = 0;
    else if (decode == MJ_DECODE_PERSISTENT_SHALLOW || decode == MJ_DECODE_PERSISTENT_DEEP)
        plan->persistent_shallow = decode == MJ_DECODE_PERSISTENT_SHALLOW;
    else if (spec->arch == MJ_ARCH_SM90A || spec->arch == MJ_ARCH_SM100A)
        plan->persistent_shallow = mj_gemm_plan_persistent_shallow(routed, args->inter, gated, sms);
    plan->persistent_blocks_per_sm =
        mj_gemm_plan_persistent_blocks_per_sm(spec, plan->persistent_shallow);
}

void mj_gemm_plan_make(const moejit_spec *spec, const moejit_moe_args *args, int sms, int decode,
                       mj_gemm_plan *plan)
{
    mj_gemm_plan p = {0};
    const int64_t T = args->num_tokens, pairs = T * args->topk, e_local = mj_launch_local_experts(args);
    const int precomputed = spec->routing == MJ_ROUTING_PRECOMPUTED;
    const int gated = moejit_activation_is_gated(&spec->act);
    p.rule_path = rule_path(spec, args);
    p.path = T == 0 ? MJ_MMA_PATH_AUTO : chosen_path(spec, args, p.rule_path);
    const int small = p.path == MJ_MMA_PATH_SMALL;
    p.short_tiles = wgmma_prefill(spec) && p.path == MJ_MMA_PATH_LARGE && gated &&
                    pairs <= (int64_t)MJ_WGMMA_SHORT_MAX_ROWS_PER_EXPERT * e_local;
    p.pair_order = p.path == MJ_MMA_PATH_PAIR && pairs < (int64_t)MJ_WGMMA_PAIR_ORDER_MAX_ROWS * e_local;
    p.row_tile = row_tile(spec, &p);
    p.max_tiles = mj_simt_max_tiles(pairs, p.row_tile, (int)e_local);
    p.routed_gemm1 = small && T <= MJ_MMA_ROUTED_GEMM1_MAX_TOKENS && !precomputed;
    p.fused_route = small && !p.routed_gemm1 && T <= MJ_MMA_FUSED_ROUTE_MAX_TOKENS;
    p.chain_splits = !small ? 1
                            : mj_gemm_plan_chain_splits(ceil_div(args->hidden, MJ_MMA_SMALL_BW), T, (int)args->topk,
                                                        (int)args->num_experts, (int)e_local, args->inter,
                                                        mj_quant_is_4bit(spec->quant) ? MJ_W4_SPLIT_MIN_K
                                                                                      : MJ_MMA_SPLIT_MIN_K);
    chain_kernels(spec, args, precomputed, e_local, &p);
    p.finalize_wide = MJ_TC_FINALIZE_WIDE(T, args->hidden, p.chain_splits);
    p.persistent_candidate = T >= 1 && T <= MJ_MMA_PERSISTENT_MAX_TOKENS && !precomputed && small;
    p.workspace_splits = p.chain_splits;
    if (p.persistent_candidate) {
        const int ps = mj_gemm_plan_persistent_splits(args->inter);
        if (ps > p.workspace_splits) p.workspace_splits = ps;
    }
    p.gemm2_splits = p.chain_splits;
    if (sms != MJ_GEMM_PLAN_SMS_UNKNOWN) mj_gemm_plan_decode_layer(spec, args, sms, decode, &p);
    *plan = p;
}
