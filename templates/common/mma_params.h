/*
 * This file contains what the host and the `mma` templates share beyond mj_layer_params
 * (common/params.h, reused unchanged): the mma kernel list in launch-table order, the block
 * sizes and tiles of its two GEMM paths and their shared-memory sizes (which path a forward
 * takes, and every host-only threshold of that choice, is runtime/gemm_plan.c's). Plain C, included by the templates (NVRTC, C++17) and by
 * runtime/launch_mma.c and codegen/emit_mma.c (C11).
 *
 * Two GEMM paths live in every mma cubin, so the choice is made per forward from T:
 *
 *   large (prefill)  tokens are the MMA's M: a CTA owns 128 gathered token rows x 128 weight
 *                    rows (gated GEMM1: 64 up + 64 gate rows -> 64 intermediate columns);
 *                    8 warps as 2 (M) x 4 (N), warp tile 64 x 32; BK 64; 3 cp.async stages.
 *   small (decode)   operands swapped: WEIGHT rows are M (m16), tokens are N (n8): a CTA owns
 *                    64 weight rows x 16 token rows; 4 warps, each 16 weight rows x 16 tokens;
 *                    BK 64; 9 cp.async stages, so ~64 KB of weights are in flight per CTA and
 *                    CTAs = (weight rows / 64) x (token tiles) fill the 132 SMs already at T=1.
 *                    9 stages (90 KB, two CTAs per SM on sm_90), not 6 (60 KB, three): a
 *                    decode grid's last partial wave streams at its CTAs' bytes in flight.
 *
 * Each path has its own row-tile size, hence its own expert-offsets kernel (the tile offsets
 * are computed for the BLOCK_M the GEMMs use); route, scatter and finalize are shared.
 */
#ifndef MJ_TEMPLATES_COMMON_MMA_PARAMS_H
#define MJ_TEMPLATES_COMMON_MMA_PARAMS_H

/* ---- kernels, in the order of the module's kernel table ---------------------------------- */
/* 0..5 are the simt indices (common/params.h) with the large-path GEMMs; 6..8 the small path.
 * A forward launches route, offsets, scatter, gemm1, gemm2, finalize of ONE path. */
enum {
    MJ_MMA_K_ROUTE = 0,
    MJ_MMA_K_EXPERT_OFFSETS,       /* row tiles of MJ_MMA_LARGE_BM tokens */
    MJ_MMA_K_SCATTER,
    MJ_MMA_K_GEMM1_ACT,            /* large path */
    MJ_MMA_K_GEMM2,                /* large path */
    MJ_MMA_K_FINALIZE,
    MJ_MMA_K_EXPERT_OFFSETS_SMALL, /* row tiles of MJ_MMA_SMALL_BT tokens */
    MJ_MMA_K_GEMM1_ACT_SMALL,
    MJ_MMA_K_GEMM2_SMALL,
    MJ_MMA_K_ROUTE_FUSED_SMALL,    /* T <= MJ_MMA_FUSED_ROUTE_MAX_TOKENS: counters, route,
                                      offsets (small tiles) and scatter in ONE block */
    MJ_MMA_K_GEMM1_ACT_SMALL_ROUTED, /* T <= MJ_MMA_ROUTED_GEMM1_MAX_TOKENS: each block routes
                                        the batch itself, then GEMM1 (decode_route.cuh) */
    MJ_MMA_K_GEMM2_FINALIZE_T1,      /* after the routed GEMM1 (k = MJ_MMA_T1_SLOTS, GEMM2 not
                                        split): GEMM2 and finalize in one kernel */
    MJ_MMA_K_GEMM2_FINALIZE_T1_SHALLOW, /* the same with MJ_MMA_T1_SHALLOW_STAGES (k = 6) */
    MJ_MMA_K_DECODE_RESET,         /* the persistent decode layer: zero its sync words, then */
    MJ_MMA_K_DECODE_PERSISTENT,    /* route, GEMM1, GEMM2 and finalize in one grid */
    MJ_MMA_K_DECODE_PERSISTENT_SHALLOW, /* the same, more blocks of fewer stages */
    MJ_MMA_NUM_KERNELS
};
#define MJ_MMA_KERNEL_NAME_LIST                                                                 \
    "mj_route", "mj_expert_offsets", "mj_scatter", "mj_gemm1_act", "mj_gemm2", "mj_finalize", \
        "mj_expert_offsets_small", "mj_gemm1_act_small", "mj_gemm2_small", "mj_route_fused_small", \
        "mj_gemm1_act_small_routed", "mj_gemm2_finalize_t1", \
        "mj_gemm2_finalize_t1_shallow", "mj_decode_reset", "mj_decode_persistent", "mj_decode_persistent_shallow"

/* Decode: at most this many tokens (one per warp of a block of MJ_SIMT_OFFSETS_THREADS; the
 * kernel takes up to two) take the fused routing kernel: one launch instead of route and
 * offsets (which scatters at these batches: MJ_OFFSETS_SCATTER), each of which costs a few
 * microseconds of launch and drain. More tokens serialise more warp-argmax chains per warp;
 * 16 is where the fused kernel still beats route + offsets (docs/PERFORMANCE.md). */
#define MJ_MMA_FUSED_ROUTE_MAX_TOKENS 16

/* Decode: at most this many tokens (and a routing that selects, not precomputed ids, which
 * may repeat an expert) skip the routing kernel altogether: every GEMM1 block routes the
 * batch itself (a warp per token, 4 warps) and derives its row tile, the layer being GEMM1,
 * GEMM2, finalize (decode_route.cuh). Must be <= MJ_MMA_SMALL_BT (one row tile per routed
 * expert). Batch 1 only: with 2-4 tokens every block routes them all before its first weight
 * load, where the routing kernel did it once and ran alongside the GEMM's launch. */
#define MJ_MMA_ROUTED_GEMM1_MAX_TOKENS 1

/* Batch 1 after the routed GEMM1: when the token's k slots are all on this rank, k is 8 or 6
 * (runtime/gemm_plan.c: t1_kernel says why exactly then) and the decode GEMM2 is not split,
 * GEMM2 and finalize are one kernel (mma_gemm2.cuh: gemm2_finalize_t1): a block takes
 * MJ_MMA_SMALL_BW / MJ_MMA_T1_SLOTS = 8 hidden columns of every routed expert and sums the
 * token's slots itself, in finalize's order, so the layer is two launches and no y round trip
 * through L2. Its tile is the small path's; its pipeline depth is 9 stages (two blocks per SM)
 * for k = 8, and 6 (three per SM) for k = 6, whose H / 8 blocks of 48 live rows outnumber the
 * unfused GEMM2's (Nemotron: 336 against 252) and fit one wave of the H200 only three to an SM. */
#define MJ_MMA_T1_SLOTS 8
#define MJ_MMA_T1_STAGES 9
#define MJ_MMA_T1_SHALLOW_STAGES 6
/* Whether the routed GEMM1 (T <= MJ_MMA_ROUTED_GEMM1_MAX_TOKENS) is followed by that kernel:
 * one rule for the launch plan (runtime/gemm_plan.c: t1_kernel) and the routed GEMM1, which
 * then lets it launch at once (tc_layer_stages.cuh); splits <= 1: GEMM2 not split. */
#define MJ_MMA_T1_GEMM2_FINALIZE(T, splits, k, e_local, experts)                                            \
    ((T) == 1 && (splits) <= 1 && (e_local) == (experts) && ((k) == MJ_MMA_T1_SLOTS || (k) == 6))

/* Up to MJ_MMA_PERSISTENT_MAX_TOKENS tokens, routing not precomputed: the persistent layer
 * (decode_persistent.cuh) instead of the chain (batch 1: the routed GEMM1 and the GEMM2 (+
 * finalize) after it; 2..32: the fused routing kernel, GEMM1, GEMM2, finalize): one grid of
 * MJ_MMA_DECODE_BLOCKS_PER_SM blocks per SM routes, then takes GEMM1 and then GEMM2 tiles from a
 * queue, so no grid boundary stalls the weight stream. Its sync words live in ws_counts (these
 * batches count nothing there): the queue, a count per row tile and GEMM2 K split, a count per 64 columns of out.
 * Where it runs instead of the chain is runtime/gemm_plan.c's rule. */
#define MJ_MMA_PERSISTENT_MAX_TOKENS 8 /* <= MJ_MMA_SMALL_BT: one row tile per expert */
/* Its blocks per SM and their pipeline depth (MJ_MMA_DECODE_SMEM: two fit an sm_90 SM). More,
 * shallower blocks hold as many bytes in flight per SM and cut the tiles' tail, but are slower
 * where the GEMM1 tiles make about one round of them (docs/PERFORMANCE.md). */
#define MJ_MMA_DECODE_BLOCKS_PER_SM 2
#define MJ_MMA_DECODE_STAGES 9
/* ... or its shallow blocks, 3 of 6 stages per SM (as many stages in flight per SM, a finer
 * grain at the end of GEMM1; where: runtime/gemm_plan.c, docs/PERFORMANCE.md). */
#define MJ_MMA_DECODE_SHALLOW_BLOCKS_PER_SM 3
#define MJ_MMA_DECODE_SHALLOW_STAGES 6
#define MJ_MMA_DECODE_RESET_THREADS 128
#define MJ_MMA_DECODE_SYNC_WORDS(max_tiles, H)                                                            \
    (1 + (max_tiles) * MJ_MMA_DECODE_SPLIT_MAX + ((H) + MJ_MMA_SMALL_BW - 1) / MJ_MMA_SMALL_BW)
/* The most K splits of its GEMM2 (the sync words hold a count per row tile and split; how many
 * it runs is runtime/gemm_plan.c's). */
#define MJ_MMA_DECODE_SPLIT_MAX 8
/* The K range of each split but the last when `splits` split a GEMM2 over `inter` columns:
 * whole k tiles of MJ_MMA_BK (one rule for the kernels, mma_gemm2.cuh: gemm2_split_k, and
 * the launcher's shape rule, runtime/gemm_plan.c). */
#define MJ_MMA_GEMM2_SPLIT_K(inter, splits) \
    ((((inter) + MJ_MMA_BK - 1) / MJ_MMA_BK + (splits) - 1) / (splits) * MJ_MMA_BK)

/* ---- the two GEMM paths ------------------------------------------------------------------- */
#define MJ_MMA_BK 64 /* k per stage: 128-byte smem rows, 8 x 16-byte chunks, XOR swizzle */

#define MJ_MMA_LARGE_THREADS 256
#define MJ_MMA_LARGE_BM 128 /* token rows per CTA (row tile) */
#define MJ_MMA_LARGE_BN 128 /* weight rows per CTA (gated GEMM1: 64 up + 64 gate) */
#define MJ_MMA_LARGE_STAGES 3

#define MJ_MMA_SMALL_THREADS (MJ_MMA_SMALL_BW / 16 * 32) /* a warp per 16 weight rows */
#define MJ_MMA_SMALL_BW 64 /* weight rows per CTA (gated GEMM1: 32 up + 32 gate) */
#define MJ_MMA_SMALL_BT 16 /* token rows per CTA (row tile) */
#define MJ_MMA_SMALL_STAGES 9

/* Dynamic shared memory of each path's GEMM kernels (bytes); above 48 KiB, so the launcher
 * raises CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES first. Both fit the 99 KiB per
 * block of sm_86/sm_89/sm_120. */
#define MJ_MMA_LARGE_SMEM (MJ_MMA_LARGE_STAGES * (MJ_MMA_LARGE_BM + MJ_MMA_LARGE_BN) * MJ_MMA_BK * 2)
#define MJ_MMA_SMALL_STAGE_BYTES ((MJ_MMA_SMALL_BW + MJ_MMA_SMALL_BT) * MJ_MMA_BK * 2)
#define MJ_MMA_SMALL_SMEM (MJ_MMA_SMALL_STAGES * MJ_MMA_SMALL_STAGE_BYTES)
#define MJ_MMA_DECODE_SMEM (MJ_MMA_DECODE_STAGES * MJ_MMA_SMALL_STAGE_BYTES)
#define MJ_MMA_DECODE_SHALLOW_SMEM (MJ_MMA_DECODE_SHALLOW_STAGES * MJ_MMA_SMALL_STAGE_BYTES)
#define MJ_MMA_T1_SMEM (MJ_MMA_T1_STAGES * MJ_MMA_SMALL_STAGE_BYTES)
#define MJ_MMA_T1_SHALLOW_SMEM (MJ_MMA_T1_SHALLOW_STAGES * MJ_MMA_SMALL_STAGE_BYTES)
#if MJ_MMA_LARGE_SMEM > 101376 || MJ_MMA_SMALL_SMEM > 101376 || MJ_MMA_T1_SMEM > 101376 || MJ_MMA_DECODE_SMEM > 101376
#error "the mma GEMMs must fit the 99 KiB of dynamic shared memory a block of sm_86/sm_89/sm_120 may have"
#endif

/* Decode GEMM2 split along its K (= I): each of S splits takes a contiguous run of whole k
 * tiles of every row and writes its partial sums to its own copy of y; finalize adds the S
 * copies in split order (fixed order, no atomics, bit-identical reruns). The kernels take any
 * S (mj_layer_params.gemm2_splits); runtime/gemm_plan.c picks it. */

#ifndef __CUDACC_RTC__
#include <string.h>

/* Spec field tile=...: "auto" lets the launcher choose per forward; "large" and "small" force
 * one path (for benchmarks and tests; the cubin is the same). */
/* TALL and PAIR are the wgmma layer's third and fourth paths (256 x 128 prefill tiles; 128 x 256
 * tiles in clusters of two sharing weight tiles: common/wgmma_params.h). */
typedef enum mj_mma_path {
    MJ_MMA_PATH_AUTO = 0,
    MJ_MMA_PATH_LARGE,
    MJ_MMA_PATH_SMALL,
    MJ_MMA_PATH_TALL,
    MJ_MMA_PATH_PAIR
} mj_mma_path;
#define MJ_MMA_TILE_NAMES "auto, large, small"
#define MJ_WGMMA_TILE_NAMES "auto, large, small, tall, pair"

/* The path for a tile name; -1 for a name no mma-family backend knows (the launchers refuse
 * "tall" and "pair" where the backend has no such path). */
static inline int mj_mma_path_of(const char *tile)
{
    if (!tile || !*tile || strcmp(tile, "auto") == 0) return MJ_MMA_PATH_AUTO;
    if (strcmp(tile, "large") == 0) return MJ_MMA_PATH_LARGE;
    if (strcmp(tile, "small") == 0) return MJ_MMA_PATH_SMALL;
    if (strcmp(tile, "tall") == 0) return MJ_MMA_PATH_TALL;
    if (strcmp(tile, "pair") == 0) return MJ_MMA_PATH_PAIR;
    return -1;
}

/* A path's name ("large", "small", "tall", "pair"; "auto" for MJ_MMA_PATH_AUTO). */
static inline const char *mj_mma_path_name(int path)
{
    return path == MJ_MMA_PATH_LARGE ? "large" : path == MJ_MMA_PATH_SMALL ? "small"
         : path == MJ_MMA_PATH_TALL ? "tall" : path == MJ_MMA_PATH_PAIR ? "pair" : "auto";
}

#endif

#endif
