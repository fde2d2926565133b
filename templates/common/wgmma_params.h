/*
 * This file contains what the host and the `wgmma` templates share beyond mj_layer_params
 * (common/params.h) and the mma constants (common/mma_params.h, whose kernel table, small
 * path and path heuristic the wgmma layer reuses unchanged): the block shape, tiles, stages
 * and shared memory of the warpgroup-MMA GEMMs, and the shape of their tensor maps. Plain C,
 * included by the templates (NVRTC, C++17) and by runtime/launch_wgmma.c and
 * codegen/emit_wgmma.c (C11).
 *
 * The large (prefill) GEMMs of a wgmma layer, sm_90a only:
 *
 *   block        3 warpgroups = 384 threads, one CTA per SM, persistent over all experts'
 *                tiles (grid = min(SMs, tile upper bound))
 *   warpgroup 0  producer (setmaxnreg.dec to MJ_WGMMA_PRODUCER_REGS): token / intermediate
 *                rows gathered with 16-byte cp.async into the 128B-swizzled A stage, weight
 *                rows by TMA (cp.async.bulk.tensor, 128B swizzle) into the B stage; both
 *                complete on the stage's full barrier
 *   warpgroups   consumers (setmaxnreg.inc to MJ_WGMMA_CONSUMER_REGS): consumer c owns rows
 *   1, 2         [128c, 128c + 128) of the 256-row tile as two m64 blocks, each a
 *                wgmma.m64n128k16 over all 128 weight rows
 *   tile         BM 256 token rows x BN 128 weight rows (gated GEMM1: 64 up rows, then the 64
 *                gate rows of the same columns -> 64 intermediate columns; ungated GEMM1 and
 *                GEMM2: 128 output columns), BK 64 (one 128-byte swizzle row), kStages 4
 *
 * Why 256 x 128 and not 128 x 256 (same shared memory, same MMA work per stage): a weight tile
 * is streamed once per row tile, and an expert's row tiles run on different CTAs that drift
 * apart over a persistent schedule, so the second one found the tile evicted from L2. ncu on
 * the H200 (2026-11-30, 128 x 256): GEMM1 read 1.9x its weight bytes from DRAM at Qwen3-30B
 * B=4096 (256 rows per expert) and 1.65x at DeepSeek-V3 B=4096 (128 +- 11 rows: half the
 * experts had a second, mostly empty row tile). 256-row tiles cover an expert in one tile up to
 * 256 rows, so its weights are read once; the 64-row blocks of a tile past the expert's rows
 * skip their MMAs.
 *
 * The kernel table is the mma one (MJ_MMA_K_*, MJ_MMA_KERNEL_NAME_LIST): only mj_gemm1_act and
 * mj_gemm2 change body and signature (a CUtensorMap follows mj_layer_params), so the route,
 * permute, finalize and decode kernels and their launch configuration are mma's.
 */
#ifndef MJ_TEMPLATES_COMMON_WGMMA_PARAMS_H
#define MJ_TEMPLATES_COMMON_WGMMA_PARAMS_H

#define MJ_WGMMA_THREADS 384       /* producer warpgroup + 2 consumer warpgroups */
#define MJ_WGMMA_CONSUMERS 2       /* consumer warpgroups */
#define MJ_WGMMA_BM 256            /* token rows per tile: 128 (two m64 blocks) per consumer */
#define MJ_WGMMA_BN 128            /* weight rows per tile: the N of one wgmma.m64n128k16 */
#define MJ_WGMMA_BK 64             /* k per stage: 64 bf16 = 128 bytes = the 128B swizzle span */
#define MJ_WGMMA_STAGES 4

/* Registers after setmaxnreg: 128·56 + 256·224 = 64512 <= 65536 per SM. The consumers hold
 * 2 x 64 fp32 accumulators each; the producer holds 16 row indices and loop state. */
#define MJ_WGMMA_PRODUCER_REGS 56
#define MJ_WGMMA_CONSUMER_REGS 224

#define MJ_WGMMA_A_STAGE_BYTES (MJ_WGMMA_BM * MJ_WGMMA_BK * 2)   /* 32 KiB */
#define MJ_WGMMA_B_STAGE_BYTES (MJ_WGMMA_BN * MJ_WGMMA_BK * 2)   /* 16 KiB */
#define MJ_WGMMA_STAGE_BYTES (MJ_WGMMA_A_STAGE_BYTES + MJ_WGMMA_B_STAGE_BYTES)
/* Dynamic shared memory: the stages, 1 KiB of slack to align them to the 1024-byte repeat of
 * the 128B swizzle, and the full/empty mbarriers. 197,888 bytes: within the 227 KiB a block
 * of sm_90 may opt in to. */
#define MJ_WGMMA_SMEM (MJ_WGMMA_STAGES * MJ_WGMMA_STAGE_BYTES + 1024 + 256)

#endif
