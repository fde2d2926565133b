/*
 * This file contains the one definition of what the host hands the simt kernels: the
 * kernel parameter struct (passed by value to every entry kernel), the kernel list in launch
 * order, the block sizes, and the table of tile configurations. It is plain C, included by
 * the templates (NVRTC, C++17) and by runtime/launch.c and codegen/emit.c (C11), so host and
 * device can never disagree about a field's offset or a block's size.
 *
 * Only types whose width is the same on both sides appear in the struct: device addresses
 * are `unsigned long long` (a CUdeviceptr), counts `long long` or `int`. A static assert on
 * both sides pins the size.
 */
#ifndef MJ_TEMPLATES_COMMON_PARAMS_H
#define MJ_TEMPLATES_COMMON_PARAMS_H

/* ---- kernels: the module's kernel table (codegen/emit.c lists the names, launch.c indexes) */
/* Every layer has all ten entries (one kernel table for every spec). Indices 0..5 are the
 * stages every backend shares the numbering of (common/mma_params.h); the fp8 activation
 * stages follow, and run only for a quant that quantizes activations (their bodies are
 * empty elsewhere). Launch order is MJ_SIMT_LAUNCH_ORDER: the fp8 stages sit between the
 * scatter and GEMM1, and between GEMM1 and GEMM2. */
enum {
    MJ_SIMT_K_ROUTE = 0,      /* per token: top-k ids (local, or -1) and weights; counts */
    MJ_SIMT_K_EXPERT_OFFSETS, /* one block: row offsets and row-tile offsets per expert */
    MJ_SIMT_K_SCATTER,        /* (token, slot) pairs into per-expert row lists */
    MJ_SIMT_K_GEMM1_ACT,      /* gathered x · W1[e]ᵀ (+ b1), activation, intermediate in dtype */
    MJ_SIMT_K_GEMM2,          /* intermediate · W2[e]ᵀ (+ b2) -> y per (token, slot), fp32 */
    MJ_SIMT_K_FINALIZE,       /* out[t] = Σ_j w[t,j]·y[t,j] in fixed slot order */
    MJ_SIMT_K_X_AMAX,         /* fp8 per-tensor: amax of |x| over [T, H] */
    MJ_SIMT_K_X_QUANT,        /* fp8: x -> e4m3 with its scales (tensor, token, 1x128) */
    MJ_SIMT_K_INTER_AMAX,     /* fp8 per-tensor: amax of |intermediate| over the routed rows */
    MJ_SIMT_K_INTER_QUANT,    /* fp8: intermediate -> e4m3 with its scales */
    MJ_SIMT_NUM_KERNELS
};
#define MJ_SIMT_KERNEL_NAME_LIST                                                                 \
    "mj_route", "mj_expert_offsets", "mj_scatter", "mj_gemm1_act", "mj_gemm2", "mj_finalize",   \
        "mj_x_amax", "mj_x_quant", "mj_inter_amax", "mj_inter_quant"
#define MJ_SIMT_LAUNCH_ORDER                                                                     \
    MJ_SIMT_K_ROUTE, MJ_SIMT_K_EXPERT_OFFSETS, MJ_SIMT_K_SCATTER, MJ_SIMT_K_X_AMAX,             \
        MJ_SIMT_K_X_QUANT, MJ_SIMT_K_GEMM1_ACT, MJ_SIMT_K_INTER_AMAX, MJ_SIMT_K_INTER_QUANT,    \
        MJ_SIMT_K_GEMM2, MJ_SIMT_K_FINALIZE

/* ---- block sizes (threads per block, x dimension only) ------------------------------------ */
#define MJ_SIMT_ROUTE_THREADS 256    /* 8 warps = 8 tokens per block */
#define MJ_SIMT_OFFSETS_THREADS 512  /* one thread per local expert: E_local <= 512 */
#define MJ_SIMT_SCATTER_THREADS 256  /* x MJ_SCATTER_PAIRS_PER_THREAD (token, slot) pairs */
#define MJ_SIMT_GEMM_THREADS 256     /* 16 x 16 threads over a BLOCK_M x BLOCK_N tile */
#define MJ_SIMT_FINALIZE_THREADS 128 /* 4 columns per thread: a block sums one token's ... */
#define MJ_SIMT_FINALIZE_COLS (4 * MJ_SIMT_FINALIZE_THREADS) /* ... 512 columns (grid T x H/512) */
/* The tensor-core layers' finalize: where y is one copy in the dtype and the narrow grid
 * (T x ceil(H / MJ_SIMT_FINALIZE_COLS) blocks) would be at least MJ_TC_FINALIZE_WIDE_MIN_BLOCKS
 * (about two waves of 128-thread blocks on an H200), 8 columns per thread and a grid of
 * T x ceil(H / MJ_TC_FINALIZE_COLS); else 4 columns per thread (finalize.cuh,
 * finalize_token). The launch and the kernel both decide with this rule. */
#define MJ_TC_FINALIZE_COLS (8 * MJ_SIMT_FINALIZE_THREADS)
#define MJ_TC_FINALIZE_WIDE_MIN_BLOCKS 4096
#define MJ_TC_FINALIZE_WIDE(T, H, splits) \
    ((splits) <= 1 && (long long)(T) * (((H) + MJ_SIMT_FINALIZE_COLS - 1) / MJ_SIMT_FINALIZE_COLS) >= MJ_TC_FINALIZE_WIDE_MIN_BLOCKS)
#define MJ_SIMT_AMAX_THREADS 256     /* grid-stride over 8-element chunks */
#define MJ_SIMT_AMAX_MAX_BLOCKS 2048 /* the amax grid: enough to fill any GPU, fixed by shape */
#define MJ_SIMT_QUANT_THREADS 256    /* one block per row, one 8-element chunk per thread per step */

/* How the routing stage counts rows per expert and the scatter stage hands out row slots
 * without serialising on a few cache lines: with every (token, slot) pair adding 1 to one of
 * E_local adjacent int32 counters in global memory, the L2 executes the atomics on one line one
 * after another, a cost that grows with T·k.
 *  - MJ_ROUTE_COUNT_COPIES: route block b adds to copy b % C of the counters ([C][E_local]
 *    int32, zeroed with the cursors); expert_offsets sums the copies the route blocks wrote
 *    (MJ_ROUTE_COPIES_USED: all C, or one per block when there are fewer blocks than C).
 *  - MJ_ROUTE_ZEROES_COUNTERS(T): when the route grid has at most one block per copy, the
 *    tensor-core layers' route block b zeroes copy b itself (block 0 also the cursors) before it
 *    counts, instead of a memset before the forward (launch_mma.c). A memset is a graph node
 *    that waits for the kernel before it in full, and the route kernel after it cannot launch
 *    early (programmatic dependent launch links kernels only; docs/PERFORMANCE.md). The simt
 *    layer keeps its memset (it also zeroes the amax words).
 *  - MJ_SCATTER_PAIRS_PER_THREAD: a scatter block ranks its 256·P pairs per expert in shared
 *    memory, then takes one range of slots per expert it holds with a single global atomic. */
#define MJ_ROUTE_COUNT_COPIES 32
#define MJ_ROUTE_TOKENS_PER_BLOCK (MJ_SIMT_ROUTE_THREADS / 32) /* one warp per token */
#define MJ_ROUTE_BLOCKS(T) (((T) + MJ_ROUTE_TOKENS_PER_BLOCK - 1) / MJ_ROUTE_TOKENS_PER_BLOCK)
#define MJ_ROUTE_ZEROES_COUNTERS(T) (MJ_ROUTE_BLOCKS(T) <= MJ_ROUTE_COUNT_COPIES)
#define MJ_ROUTE_COPIES_USED(T) (MJ_ROUTE_ZEROES_COUNTERS(T) ? (int)MJ_ROUTE_BLOCKS(T) : MJ_ROUTE_COUNT_COPIES)
/* Where a batch's pairs fit one scatter block, the tensor-core layers' offsets kernel also
 * scatters them (permute.cuh, offsets_stage) and mj_scatter is not launched: one kernel
 * boundary fewer (docs/PERFORMANCE.md). */
#define MJ_OFFSETS_SCATTER(pairs) ((pairs) <= MJ_SCATTER_PAIRS_PER_BLOCK)
#define MJ_SCATTER_PAIRS_PER_THREAD 8
#define MJ_SCATTER_PAIRS_PER_BLOCK (MJ_SIMT_SCATTER_THREADS * MJ_SCATTER_PAIRS_PER_THREAD)

/* Limits of the backend (launch.c checks them; the templates static_assert what they rely on). */
#define MJ_SIMT_MAX_EXPERTS 512
#define MJ_SIMT_MAX_TOPK 32
#define MJ_SIMT_MAX_DIM 1048576 /* H, I: column indices and grid.y stay far inside 32 bits */

/* Quantization constants of the contract (docs/SEMANTICS.md §5). */
#define MJ_FP8_BLOCK 128   /* fp8_block: 128x128 weight blocks, 1x128 activation groups */
#define MJ_MXFP4_GROUP 32  /* mxfp4: one e8m0 scale per 32 elements along K */
#define MJ_INT4_DEFAULT_ZERO 8 /* w4a16 without zero points */

/* ---- the kernel parameter struct ------------------------------------------------------- */
/* All device addresses are 0 when unused. Shapes are the runtime values (the kernels use a
 * pinned constant instead where the spec pins one; launch.c checks they agree). Element
 * types and layouts per quantization are listed in runtime/launch.c's header comment. */
typedef struct mj_layer_params {
    /* caller tensors */
    unsigned long long x;             /* [T, H] dtype (e4m3 for fp8_act=static), 16-byte aligned */
    unsigned long long router_logits; /* [T, E] logits dtype; 0 for routing=precomputed */
    unsigned long long topk_ids;      /* [T, k] int32 global expert ids (precomputed) */
    unsigned long long topk_weights;  /* [T, k] fp32 (precomputed) */
    unsigned long long w1;            /* [E_local, rows1, H] weights; rows1 = 2I gated, else I */
    unsigned long long w2;            /* [E_local, H, I] weights */
    unsigned long long out;           /* [T, H] dtype, every element written */
    unsigned long long routing_bias;  /* [E] fp32 selection bias (deepseek_v3), or 0 */
    unsigned long long b1, b2;        /* [E_local, rows1] / [E_local, H] dtype, or 0 */
    unsigned long long w1_scale, w2_scale, w1_zero, w2_zero; /* per quant, see launch.c */
    unsigned long long act_param[3];  /* [E_local] fp32 per-expert overrides, or 0 */
    unsigned long long x_scale;       /* [1] fp32 dequant scale of a pre-quantized e4m3 x */
    /* workspace regions (see runtime/launch.c for the layout) */
    unsigned long long ws_ids;          /* [T*k] int32: local expert id, or -1 (not on this rank) */
    unsigned long long ws_weights;      /* [T*k] fp32 routing weight of each slot */
    unsigned long long ws_counts;       /* [MJ_ROUTE_COUNT_COPIES][E_local] int32 rows per local
                                           expert, in copies summed by expert_offsets (zeroed first:
                                           by a memset, or MJ_ROUTE_ZEROES_COUNTERS) */
    unsigned long long ws_cursors;      /* [E_local] int32 scatter cursors (zeroed with the counts) */
    unsigned long long ws_amax;         /* [2] u32: bits of amax|x|, amax|inter| (zeroed first) */
    unsigned long long ws_offsets;      /* [E_local + 1] int32 first row of each expert */
    unsigned long long ws_tile_offsets; /* [E_local + 1] int32 first row tile of each expert */
    unsigned long long ws_rows;         /* [T*k] int32 pair index t*k+j, grouped by expert */
    unsigned long long ws_inter;        /* [T*k, I] dtype, row = position in ws_rows */
    unsigned long long ws_y;            /* [T*k, H], row = pair index t*k+j: fp32 (simt), the dtype
                                         * (mma, wgmma), fp32 x gemm2_splits (a split decode GEMM2) */
    unsigned long long ws_xq;           /* fp8: [T, H] e4m3 quantized x */
    unsigned long long ws_xscale;       /* fp8: fp32 [1] tensor, [T] token, [T, H/128] block */
    unsigned long long ws_interq;       /* fp8: [T*k, I] e4m3 quantized intermediate */
    unsigned long long ws_interscale;   /* fp8: fp32 [1] tensor, [T*k] token, [T*k, I/128] block */
    unsigned long long ws_tiles;        /* [max row tiles] {expert, first row, rows, 0} int32 x 4 of
                                           each row tile (permute.cuh: one load per GEMM tile) */
    unsigned long long reserved_ptr;
    /* shape */
    long long num_tokens;    /* T >= 1 (T = 0 launches nothing) */
    long long num_pairs;     /* T*k <= INT32_MAX (row indices are int32) */
    int hidden;              /* H */
    int inter;               /* I */
    int num_experts;         /* E, global: width of the router */
    int topk;                /* k */
    int expert_offset;       /* first global expert id this rank owns */
    int num_local_experts;   /* E_local >= 1 */
    int max_tiles;           /* row tiles the GEMM grids were sized for (grid.x) */
    int gemm2_splits;        /* K splits of the decode GEMM2: y holds that many partial sums
                                per pair, [splits][T*k][H], added in split order by finalize
                                (0 or 1: one, as every layer but mma's decode path has) */
} mj_layer_params;

#ifdef __cplusplus
static_assert(sizeof(mj_layer_params) == 320, "mj_layer_params must be 320 bytes on host and device");
#else
_Static_assert(sizeof(mj_layer_params) == 320, "mj_layer_params must be 320 bytes on host and device");
#endif

/* The smallest row tile of any layer (simt m16, mma's decode 16): the workspace's tile table
 * holds mj_simt_max_tiles(P, MJ_MIN_BLOCK_M, E_local) entries, enough for every path
 * (expert_offsets static_asserts its BLOCK_M against it). */
#define MJ_MIN_BLOCK_M 16

/* ---- tile configurations (host side: codegen emits the constants, launch sizes grids) ---- */
#ifndef __CUDACC_RTC__
#include <string.h>

typedef struct mj_simt_tile {
    const char *name;  /* spec field tile=...; "auto" picks the first row */
    int block_m;       /* gathered rows per block (16, 32 or 64: 16 thread rows x 1..4) */
    int block_n;       /* output columns per block (per half for gated GEMM1) */
    int block_k;       /* reduction depth per shared-memory stage */
} mj_simt_tile;

/* The tile for a spec's tile name, or NULL for a name the simt backend does not know. */
static inline const mj_simt_tile *mj_simt_tile_find(const char *name)
{
    static const mj_simt_tile tiles[] = {
        {"m32n64k32", 32, 64, 32}, /* the default ("auto") */
        {"m16n64k32", 16, 64, 32}, /* decode: few rows per expert */
        {"m64n64k32", 64, 64, 32}, /* prefill: more reuse of each W tile */
    };
    if (!name || !*name || strcmp(name, "auto") == 0) return &tiles[0];
    for (size_t i = 0; i < sizeof tiles / sizeof tiles[0]; i++)
        if (strcmp(name, tiles[i].name) == 0) return &tiles[i];
    return NULL;
}
#define MJ_SIMT_TILE_NAMES "auto, m32n64k32, m16n64k32, m64n64k32"

/* Upper bound on the number of BLOCK_M row tiles over all experts, whatever the routing:
 * Σ_e ceil(c_e / BM) <= ceil(P / BM) + min(E_local, P) for P pairs. The GEMM grids use it
 * so that their size never depends on data (CUDA graph capture). */
static inline long long mj_simt_max_tiles(long long pairs, int block_m, int e_local)
{
    long long nonempty = pairs < e_local ? pairs : e_local;
    return (pairs + block_m - 1) / block_m + nonempty;
}
#endif

#endif
