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

/* ---- kernels, in launch order (codegen/emit.c lists the names, runtime/launch.c indexes) -- */
enum {
    MJ_SIMT_K_ROUTE = 0,      /* per token: top-k ids (local, or -1) and weights; counts */
    MJ_SIMT_K_EXPERT_OFFSETS, /* one block: row offsets and row-tile offsets per expert */
    MJ_SIMT_K_SCATTER,        /* (token, slot) pairs into per-expert row lists */
    MJ_SIMT_K_GEMM1_ACT,      /* gathered x · W1[e]ᵀ, activation, intermediate in dtype */
    MJ_SIMT_K_GEMM2,          /* intermediate · W2[e]ᵀ -> y per (token, slot), fp32 */
    MJ_SIMT_K_FINALIZE,       /* out[t] = Σ_j w[t,j]·y[t,j] in fixed slot order */
    MJ_SIMT_NUM_KERNELS
};
#define MJ_SIMT_KERNEL_NAME_LIST \
    "mj_route", "mj_expert_offsets", "mj_scatter", "mj_gemm1_act", "mj_gemm2", "mj_finalize"

/* ---- block sizes (threads per block, x dimension only) ------------------------------------ */
#define MJ_SIMT_ROUTE_THREADS 256    /* 8 warps = 8 tokens per block */
#define MJ_SIMT_OFFSETS_THREADS 512  /* one thread per local expert: E_local <= 512 */
#define MJ_SIMT_SCATTER_THREADS 256  /* one thread per (token, slot) pair */
#define MJ_SIMT_GEMM_THREADS 256     /* 16 x 16 threads over a BLOCK_M x BLOCK_N tile */
#define MJ_SIMT_FINALIZE_THREADS 128 /* one block per token, 4 columns per thread per step */

/* Limits of the backend (launch.c checks them; the templates static_assert what they rely on). */
#define MJ_SIMT_MAX_EXPERTS 512
#define MJ_SIMT_MAX_TOPK 32
#define MJ_SIMT_MAX_DIM 1048576 /* H, I: column indices and grid.y stay far inside 32 bits */

/* ---- the kernel parameter struct ------------------------------------------------------- */
/* All device addresses are 0 when unused. Shapes are the runtime values (the kernels use a
 * pinned constant instead where the spec pins one; launch.c checks they agree). */
typedef struct mj_layer_params {
    /* caller tensors */
    unsigned long long x;             /* [T, H] dtype, 16-byte aligned */
    unsigned long long router_logits; /* [T, E] logits dtype; 0 for routing=precomputed */
    unsigned long long topk_ids;      /* [T, k] int32 global expert ids (precomputed) */
    unsigned long long topk_weights;  /* [T, k] fp32 (precomputed) */
    unsigned long long w1;            /* [E_local, rows1, H] dtype; rows1 = 2I gated, else I */
    unsigned long long w2;            /* [E_local, H, I] dtype */
    unsigned long long out;           /* [T, H] dtype, every element written */
    /* reserved for later stages (selection bias, biases, quantization scales and zero
     * points, per-expert activation parameters); copied from the args, unread today */
    unsigned long long routing_bias;
    unsigned long long b1, b2;
    unsigned long long w1_scale, w2_scale, w1_zero, w2_zero;
    unsigned long long act_param[3];
    /* workspace regions (see runtime/launch.c for the layout) */
    unsigned long long ws_ids;          /* [T*k] int32: local expert id, or -1 (not on this rank) */
    unsigned long long ws_weights;      /* [T*k] fp32 routing weight of each slot */
    unsigned long long ws_counts;       /* [E_local] int32 rows per local expert (zeroed first) */
    unsigned long long ws_cursors;      /* [E_local] int32 scatter cursors (zeroed first) */
    unsigned long long ws_offsets;      /* [E_local + 1] int32 first row of each expert */
    unsigned long long ws_tile_offsets; /* [E_local + 1] int32 first row tile of each expert */
    unsigned long long ws_rows;         /* [T*k] int32 pair index t*k+j, grouped by expert */
    unsigned long long ws_inter;        /* [T*k, I] dtype, row = position in ws_rows */
    unsigned long long ws_y;            /* [T*k, H] fp32, row = pair index t*k+j */
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
    int reserved0;
} mj_layer_params;

#ifdef __cplusplus
static_assert(sizeof(mj_layer_params) == 256, "mj_layer_params must be 256 bytes on host and device");
#else
_Static_assert(sizeof(mj_layer_params) == 256, "mj_layer_params must be 256 bytes on host and device");
#endif

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
