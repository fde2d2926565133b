/*
 * gemm_plan.h — the one place that decides how a forward of the tensor-core layers (mma,
 * wgmma) runs: its GEMM path (small decode chain, large, large in 64-row tiles, tall, pair),
 * its row tiles and kernels, the decode shortcuts (routed GEMM1, fused routing, batch 1's
 * GEMM2 + finalize), the K splits of the decode GEMM2 and whether the persistent decode layer
 * (deep or shallow blocks) runs instead of the chain. The launchers (launch_mma.c,
 * launch_wgmma.c) carry out a plan; the tools and tests ask it.
 *
 * Every threshold here is host-only: the kernels never read it. What both sides must agree on
 * (tile sizes, stages, block sizes, kernel indices, the rules a kernel re-evaluates such as
 * MJ_MMA_T1_GEMM2_FINALIZE or MJ_TC_FINALIZE_WIDE) stays in the headers of templates/common. A plan
 * depends on the shape, T, the spec, the tuning table, the device's SM count and the decode
 * mode, never on the routing's data, so a forward can be captured in a CUDA graph.
 */
#ifndef MJ_GEMM_PLAN_H
#define MJ_GEMM_PLAN_H

#include <stdint.h>

#include "core/spec.h"

/* ---- the path rule (tile=auto without a tuning-table entry), by rows per local expert ------ */
/* mma takes its small path up to 24 rows per expert: there the layer is weight-streaming bound
 * and the small path's 16-token tiles fill 132 SMs even at T = 1, while from 32 the large path
 * ties or wins. */
#define MJ_MMA_SMALL_MAX_ROWS_PER_EXPERT 24
/* wgmma takes the small path only up to 8: its warpgroup-MMA large path already streams weights
 * at full rate at 12-16 rows per expert. */
#define MJ_WGMMA_SMALL_MAX_ROWS_PER_EXPERT 8
/* 4-bit weights on mma take it up to 48: the large path pads each expert's rows to 128 and its
 * time barely moves below that, while the small one dequantizes each weight tile once per 16
 * tokens and grows with the rows; they cross between 48 and 56 (H200: gpt-oss-120b mxfp4 at
 * 40 / 48 / 56 rows: small 2.50 / 2.86-2.88 / 3.33 ms, large 2.86 / 2.88 / 2.90; Qwen3-30B-A3B
 * w4a16 0.39-0.41 / 0.47 / 0.54 against 0.51 / 0.52 / 0.52-0.53). On wgmma, whose large path
 * dequantizes into warpgroup MMAs, up to 28: they cross near 29 (gpt-oss-120b at 16 / 32 rows:
 * small 1.20 / 2.00 ms, large 1.86 / 1.87; Qwen3-30B-A3B 0.20 / 0.32 against 0.29 / 0.30). */
#define MJ_W4_SMALL_MAX_ROWS_PER_EXPERT 48
#define MJ_W4_WGMMA_SMALL_MAX_ROWS_PER_EXPERT 28
/* 4-bit weights on wgmma take the tall tiles (256 token rows, each weight decoded once per 256
 * rows of its expert) from 256 rows per expert, where the large tiles pad more rows and decode
 * each weight stage twice as often: gpt-oss-120b mxfp4 at 256 rows 4.70-4.73 against 4.91-4.93
 * ms, Qwen3-30B-A3B w4a16 at 512 rows 1.59-1.61 against 1.63-1.64; at 128 and 256 rows
 * respectively the two tie (3.00-3.01 against 2.98-3.00, 0.87-0.88 against 0.87-0.88), and
 * below tall is slower (1.4 x at 32 rows). */
#define MJ_W4_WGMMA_TALL_MIN_ROWS_PER_EXPERT 256
/* wgmma takes the pair path (clusters of two sharing weight tiles) from 128 rows per expert,
 * where most clusters hold two row tiles of one expert; below, large tiles are as fast. */
#define MJ_WGMMA_PAIR_MIN_ROWS_PER_EXPERT 128
/* Below 384 rows per expert the pair path lists its row tiles in the pair order (an expert's
 * tiles two by two), from there in expert order, whose straddling clusters are then few and
 * find both weight tiles in L2. */
#define MJ_WGMMA_PAIR_ORDER_MAX_ROWS 384
/* wgmma's large path runs its short (64-row, 5-stage) tiles up to 32 rows per expert with a
 * gated activation: an expert fits one 64-row tile and more weight bytes in flight win; the
 * ungated layer does not gain. */
#define MJ_WGMMA_SHORT_MAX_ROWS_PER_EXPERT 32

/* ---- the chain's decode GEMM2 K splits --------------------------------------------------- */
/* Split in 2 where the live GEMM2 CTAs a uniform routing is expected to leave are fewer than
 * 400: then the SMs hold one CTA each or a last wave runs half empty, and one CTA's stages in
 * flight cannot cover the loaded DRAM latency. */
#define MJ_MMA_SPLIT_MAX_LIVE_CTAS 400
/* ... and only where each half keeps at least 2048 elements of a row (shorter runs lose more
 * to the extra y copy than they gain), or 1024 of a 4-bit row: a 4-bit CTA spends about as
 * long on a k as a 16-bit one, and its GEMM2 at batch 1 runs as few CTAs (gpt-oss-120b: 180
 * of 64 rows, I = 2880; split, the layer went 52.2 -> 51.1 µs on the H200). */
#define MJ_MMA_SPLIT_MIN_K 2048
#define MJ_W4_SPLIT_MIN_K 1024
/* The most splits the chain's rule picks (the workspace holds this many y copies). */
#define MJ_MMA_SPLIT_MAX 2

/* ---- the persistent decode layer ---------------------------------------------------------- */
/* Up to 4 tokens it runs at every shape where it fills more than one wave of blocks; beyond,
 * only where the shape suits it (mj_gemm_plan_persistent_shape). */
#define MJ_MMA_PERSISTENT_ANY_SHAPE_TOKENS 4
/* The shape suits it where a GEMM1 tile's k (H) is at most 4 times a GEMM2 tile's (its split's
 * K range): longer GEMM1 tiles leave the late experts' GEMM2 tiles waiting. */
#define MJ_MMA_PERSISTENT_MAX_K_RATIO 4
/* Its GEMM2 is split along K into runs of about 1024 elements, so that the GEMM2 tiles a late
 * expert's GEMM1 gates are short. */
#define MJ_MMA_DECODE_SPLIT_K 1024
/* Its shallow blocks run where the routed GEMM1 tiles make at least 3/2 rounds of them (at one
 * round or less the deep blocks are faster). */
#define MJ_MMA_SHALLOW_MIN_ROUNDS_NUM 3
#define MJ_MMA_SHALLOW_MIN_ROUNDS_DEN 2

/* Whether backend b has the tall and pair prefill paths (wgmma's 256 x 128 tiles and its
 * clusters of two, common/wgmma_params.h): the one answer the launchers, the plan, the tuning
 * table and `moejit tune` share. */
static inline int mj_backend_has_tall_and_pair_paths(mj_backend b) { return b == MJ_BACKEND_WGMMA; }

/* Which decode layer runs at T <= MJ_MMA_PERSISTENT_MAX_TOKENS is the forward's decode mode
 * (mj_launch_knobs.decode, MJ_DECODE_* of core/settings.h): MJ_DECODE_AUTO (the rule),
 * _PERSISTENT or _CHAIN (always / never the persistent one), _PERSISTENT_DEEP or
 * _PERSISTENT_SHALLOW (always the persistent one, in its 2 x 9-stage or 3 x 6-stage blocks per
 * SM; _PERSISTENT and _AUTO pick those by their rule). A context takes it from $MOEJIT_DECODE;
 * the benchmark's float64 cases pass each mode explicitly to run every layer. */

/* How one forward runs (T > 0), or, for T = 0, path MJ_MMA_PATH_AUTO and nothing to launch. */
typedef struct mj_gemm_plan {
    int path;        /* MJ_MMA_PATH_SMALL, _LARGE, _TALL or _PAIR (templates/common/mma_params.h) */
    int rule_path;   /* what the built-in rule alone picks (tile=auto without a table entry) */
    int short_tiles; /* the large path in wgmma's 64-row tiles */
    int pair_order;  /* the pair path's row tiles in the pair order (else expert order) */
    int row_tile;    /* token rows per row tile of the path */
    int64_t max_tiles; /* upper bound on the row tiles over all experts (the GEMM grids' x) */
    int k_offsets, k_gemm1, k_gemm2; /* the chain's expert-offsets and GEMM kernels (table indices) */
    int routed_gemm1; /* decode: GEMM1's blocks route the batch (no routing kernel) */
    int fused_route;  /* decode: one fused routing kernel instead of route, offsets, scatter */
    int t1_fused;     /* batch 1: GEMM2 and finalize are one kernel (k_gemm2 names it) */
    int finalize_wide; /* finalize in 8 columns per thread (MJ_TC_FINALIZE_WIDE) */
    int chain_splits; /* the chain's GEMM2 K splits (1: not split) */
    int persistent_candidate; /* the persistent layer may run: the workspace holds its sync words and
                                 y copies, and the launcher asks the device's SM count */
    int persistent_splits;  /* > 0: the persistent layer runs, its GEMM2 in this many K splits */
    int persistent_shallow; /* ... in its shallow blocks (3 of 6 stages per SM) */
    int persistent_blocks_per_sm; /* ... this many blocks per SM (mj_gemm_plan_persistent_blocks_per_sm) */
    int gemm2_splits;     /* the splits the forward's GEMM2 runs with (persistent's or the chain's) */
    int workspace_splits; /* the y copies the workspace holds (independent of the device) */
} mj_gemm_plan;

/* The SM count to pass while the device is not known yet. */
#define MJ_GEMM_PLAN_SMS_UNKNOWN (-1)

/* The plan of a forward of spec (mma or wgmma) on args (valid shape): the path is the spec's
 * tile if it forces one, else the tuning table's entry (tune_table.h), else the rule; the
 * decode layer is decided for a device of sms SMs under decode mode `decode` (MJ_DECODE_*),
 * or left to the chain for sms = MJ_GEMM_PLAN_SMS_UNKNOWN (mj_gemm_plan_decode_layer then
 * decides it once the device is known). */
void mj_gemm_plan_make(const moejit_spec *spec, const moejit_moe_args *args, int sms, int decode,
                       mj_gemm_plan *plan);
/* Decides plan's decode layer for a device of sms SMs under decode mode `decode`: for a
 * launcher that asks the device only when plan->persistent_candidate. */
void mj_gemm_plan_decode_layer(const moejit_spec *spec, const moejit_moe_args *args, int sms, int decode,
                               mj_gemm_plan *plan);

/* ---- the rules, for tests -------------------------------------------------------------- */
/* The chain's decode GEMM2 K splits with col_tiles = H / 64 over I = inter, T tokens routed to
 * k of E experts, e_local of them on this rank; min_k: the shortest half (MJ_MMA_SPLIT_MIN_K,
 * or MJ_W4_SPLIT_MIN_K for 4-bit weights). */
int mj_gemm_plan_chain_splits(long long col_tiles, long long tokens, int topk, int experts, int e_local,
                              long long inter, long long min_k);
/* The persistent layer's GEMM2 K splits for an intermediate of `inter` columns. */
int mj_gemm_plan_persistent_splits(long long inter);
/* The persistent layer's blocks per SM: its shallow or deep blocks, the 4-bit ones for w4a16
 * and mxfp4 (their stages are smaller, so more fit: MJ_W4_DECODE_BLOCKS_PER_SM of the spec's
 * arch and format). */
int mj_gemm_plan_persistent_blocks_per_sm(const moejit_spec *spec, int shallow);
/* Whether the routed experts' GEMM1 tiles outnumber the `blocks` deep blocks of the device. */
int mj_gemm_plan_persistent_fills(long long routed, long long inter, int gated, long long blocks);
/* Whether the persistent layer runs its shallow blocks. */
int mj_gemm_plan_persistent_shallow(long long routed, long long inter, int gated, int sms);
/* Whether the shape suits the persistent layer at this many tokens. */
int mj_gemm_plan_persistent_shape(long long tokens, long long hidden, long long inter);

#endif
