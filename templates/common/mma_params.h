/*
 * This file contains what the host and the `mma` templates share beyond mj_layer_params
 * (common/params.h, reused unchanged): the mma kernel list in launch-table order, the block
 * sizes and tiles of its two GEMM paths, their shared-memory sizes, and the launch-time
 * heuristic that picks a path. Plain C, included by the templates (NVRTC, C++17) and by
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
 * (runtime/launch_mma.c: t1_kernel says why exactly then) and the decode GEMM2 is not split,
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
 * one rule for the launcher (runtime/launch_mma.c: t1_kernel) and the routed GEMM1, which
 * then lets it launch at once (tc_layer_stages.cuh); splits <= 1: GEMM2 not split. */
#define MJ_MMA_T1_GEMM2_FINALIZE(T, splits, k, e_local, experts)                                            \
    ((T) == 1 && (splits) <= 1 && (e_local) == (experts) && ((k) == MJ_MMA_T1_SLOTS || (k) == 6))

/* Up to MJ_MMA_PERSISTENT_MAX_TOKENS tokens, routing not precomputed: the persistent layer
 * (decode_persistent.cuh) instead of the chain (batch 1: the routed GEMM1 and the GEMM2 (+
 * finalize) after it; 2..32: the fused routing kernel, GEMM1, GEMM2, finalize): one grid of
 * MJ_MMA_DECODE_BLOCKS_PER_SM blocks per SM routes, then takes GEMM1 and then GEMM2 tiles from a
 * queue, so no grid boundary stalls the weight stream. Its sync words live in ws_counts (these
 * batches count nothing there): the queue, a count per row tile and GEMM2 K split, a count per 64 columns of out.
 * Up to MJ_MMA_PERSISTENT_ANY_SHAPE_TOKENS it runs at every shape (where the GEMM1 tiles
 * outnumber the resident blocks: mj_mma_decode_persistent). From 5 tokens only where a GEMM1
 * tile is at most 4 times as long as a GEMM2 tile (mj_mma_decode_persistent_shape): with more
 * tokens the chain's kernel boundaries weigh less and the persistent layer's own weakness more,
 * the GEMM2 tiles of the experts whose GEMM1 tiles ran last waiting for them
 * (docs/PERFORMANCE.md). */
#define MJ_MMA_PERSISTENT_MAX_TOKENS 8 /* <= MJ_MMA_SMALL_BT: one row tile per expert */
#define MJ_MMA_PERSISTENT_ANY_SHAPE_TOKENS 4
/* Its blocks per SM and their pipeline depth (MJ_MMA_DECODE_SMEM: two fit an sm_90 SM). More,
 * shallower blocks hold as many bytes in flight per SM and cut the tiles' tail, but are slower
 * where the GEMM1 tiles make about one round of them (docs/PERFORMANCE.md). */
#define MJ_MMA_DECODE_BLOCKS_PER_SM 2
#define MJ_MMA_DECODE_STAGES 9
/* ... except where its GEMM1 tiles make at least 1.5 rounds of 3 blocks per SM
 * (mj_mma_decode_persistent_shallow): then 3 blocks of 6 stages per SM (as many stages in
 * flight per SM, a finer grain at the end of GEMM1), which is faster there and slower at one
 * round or less (docs/PERFORMANCE.md). */
#define MJ_MMA_DECODE_SHALLOW_BLOCKS_PER_SM 3
#define MJ_MMA_DECODE_SHALLOW_STAGES 6
#define MJ_MMA_DECODE_RESET_THREADS 128
#define MJ_MMA_DECODE_SYNC_WORDS(max_tiles, H)                                                            \
    (1 + (max_tiles) * MJ_MMA_DECODE_SPLIT_MAX + ((H) + MJ_MMA_SMALL_BW - 1) / MJ_MMA_SMALL_BW)
/* Its GEMM2 tiles are split along K into runs of about MJ_MMA_DECODE_SPLIT_K elements (the
 * power of two nearest I / MJ_MMA_DECODE_SPLIT_K, at most MJ_MMA_DECODE_SPLIT_MAX), so that the
 * GEMM2 tiles a late expert's GEMM1 gates are short. */
#define MJ_MMA_DECODE_SPLIT_K 1024
#define MJ_MMA_DECODE_SPLIT_MAX 8
/* The K range of each split but the last when `splits` split a GEMM2 over `inter` columns:
 * whole k tiles of MJ_MMA_BK (one rule for the kernels, mma_gemm2.cuh: gemm2_split_k, and
 * the launcher's shape rule, mj_mma_decode_persistent_shape). */
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

/* Decode GEMM2 split along its K (= I): a decode GEMM2 makes (H / 64) x (row tiles) CTAs,
 * each streaming 64 whole W2 rows of its expert; when few of them are live (their expert was
 * routed to), the SMs hold one CTA each or the last wave runs half empty, and one CTA's 9
 * stages in flight cannot cover the loaded DRAM latency. Each of S splits takes a contiguous
 * run of whole k tiles of every row and writes its partial sums to its own copy of y; finalize
 * adds the S copies in split order (fixed order, no atomics, bit-identical reruns). The kernels
 * take any S; the rule picks 2 when the live CTAs a uniform routing is expected to leave,
 * (H / 64) x E_local x (1 - (1 - k/E)^T), are fewer than MJ_MMA_SPLIT_MAX_LIVE_CTAS and each
 * half keeps >= MJ_MMA_SPLIT_MIN_K elements of a row. */
#define MJ_MMA_SPLIT_MAX_LIVE_CTAS 400
#define MJ_MMA_SPLIT_MIN_K 2048
#define MJ_MMA_SPLIT_MAX 2 /* the most the rule picks (the workspace holds this many y) */

#ifndef __CUDACC_RTC__
#include <string.h>

/* The K splits of a decode GEMM2 with col_tiles = H / 64 over I = inter, for T tokens routed
 * to k of E experts, e_local of them on this rank. (1 - k/E)^T by squaring: plain IEEE
 * products, the same answer on every host, in O(log T). */
static inline int mj_mma_small_gemm2_splits(long long col_tiles, long long tokens, int topk, int experts,
                                            int e_local, long long inter)
{
    if (inter / 2 < MJ_MMA_SPLIT_MIN_K || experts < 1) return 1;
    double base = 1.0 - (double)topk / (double)experts, untouched = 1.0;
    for (long long n = tokens; n > 0; n >>= 1) {
        if (n & 1) untouched *= base;
        base *= base;
    }
    const double live = (double)col_tiles * (double)e_local * (1.0 - untouched);
    return live < MJ_MMA_SPLIT_MAX_LIVE_CTAS ? 2 : 1;
}

/* The persistent layer's GEMM2 K splits for an intermediate of `inter` columns. */
static inline int mj_mma_decode_persistent_splits(long long inter)
{
    int s = 1; /* nearest in log2: step up while inter / (2s) is at least sqrt(1/2) of SPLIT_K */
    while (s < MJ_MMA_DECODE_SPLIT_MAX && inter * 1000 >= (long long)(2 * s) * MJ_MMA_DECODE_SPLIT_K * 707) s *= 2;
    return s;
}

/* Whether a batch of at most MJ_MMA_PERSISTENT_MAX_TOKENS takes the persistent layer (routing
 * not precomputed): when the GEMM1 tiles of the routed experts (routed = min(T·k, E_local) of
 * them, ceil(I / columns per tile) each) are
 * more than the device holds at once (MJ_MMA_DECODE_BLOCKS_PER_SM per SM). The chain's GEMM1
 * then runs in waves whose boundaries leave the weight stream idle, which the persistent grid
 * fills with GEMM2 tiles; in one wave there is nothing to fill, and the chain's one-kernel GEMM2
 * + finalize wins. From two tokens every model shape has more than one wave (Qwen3-30B: 16 x 24
 * tiles). */
static inline int mj_mma_decode_persistent(long long routed, long long inter, int gated, int sms)
{
    const long long cols = gated ? MJ_MMA_SMALL_BW / 2 : MJ_MMA_SMALL_BW;
    return routed * ((inter + cols - 1) / cols) > (long long)sms * MJ_MMA_DECODE_BLOCKS_PER_SM;
}

/* Whether the persistent layer runs its shallow blocks (MJ_MMA_DECODE_SHALLOW_BLOCKS_PER_SM of
 * MJ_MMA_DECODE_SHALLOW_STAGES, see there): where the routed experts' GEMM1 tiles make at least
 * 1.5 rounds of that many blocks per SM, and one expert's tiles alone do not outnumber them
 * (there the shallow blocks do not gain). */
static inline int mj_mma_decode_persistent_shallow(long long routed, long long inter, int gated, int sms)
{
    const long long cols = gated ? MJ_MMA_SMALL_BW / 2 : MJ_MMA_SMALL_BW;
    const long long per_expert = (inter + cols - 1) / cols, blocks = (long long)sms * MJ_MMA_DECODE_SHALLOW_BLOCKS_PER_SM;
    return per_expert < blocks && 2 * routed * per_expert >= 3 * blocks;
}

/* ... and, above MJ_MMA_PERSISTENT_ANY_SHAPE_TOKENS tokens, whether the shape suits it (see
 * MJ_MMA_PERSISTENT_MAX_TOKENS): a GEMM1 tile's k (hidden) at most 4 times a GEMM2 tile's (the
 * persistent split's K range, decode_persistent.cuh: gemm2_split_k). */
static inline int mj_mma_decode_persistent_shape(long long tokens, long long hidden, long long inter)
{
    if (tokens <= MJ_MMA_PERSISTENT_ANY_SHAPE_TOKENS) return 1;
    const long long splits = mj_mma_decode_persistent_splits(inter);
    return hidden <= 4 * MJ_MMA_GEMM2_SPLIT_K(inter, splits);
}

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

/* The launch-time heuristic (tile=auto) of mma (runtime/launch_mma.c; wgmma has its own
 * bound, MJ_WGMMA_SMALL_MAX_ROWS_PER_EXPERT). Average rows per local expert = pairs / E_local.
 * Up to 24 the layer is weight-streaming bound: the small path reads each 64-row weight tile
 * once per 16-token tile (repeats of one expert run side by side and hit L2) and makes
 * (2I/64 or H/64) x tiles CTAs, enough for 132 SMs even at T = 1; the large path would make
 * far fewer CTAs and compute mostly padding; from 32 rows per expert they tie or large wins. */
#define MJ_MMA_SMALL_MAX_ROWS_PER_EXPERT 24
#endif

#endif
