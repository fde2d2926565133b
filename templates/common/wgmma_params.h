/*
 * This file contains what the host and the `wgmma` templates share beyond mj_layer_params
 * (common/params.h) and the mma constants (common/mma_params.h, whose kernel table, small
 * path the wgmma layer reuses unchanged): the block shape, tiles, stages
 * and shared memory of the warpgroup-MMA GEMMs, and the shape of their tensor maps. Plain C,
 * included by the templates (NVRTC, C++17) and by runtime/launch_wgmma.c and
 * codegen/emit_wgmma.c (C11).
 *
 * The prefill GEMMs of a wgmma layer, sm_90a only, in three tile shapes and three paths (chosen
 * per forward like mma's small/large: the spec's tile field, a `moejit tune` table, else the
 * rule of runtime/gemm_plan.c):
 *
 *   block        3 warpgroups = 384 threads, one CTA per SM, persistent over all experts'
 *                tiles (grid = min(SMs, tile upper bound))
 *   warpgroup 0  producer (setmaxnreg.dec to MJ_WGMMA_PRODUCER_REGS): token / intermediate
 *                rows gathered with 16-byte cp.async into the 128B-swizzled A stage, weight
 *                rows by TMA (cp.async.bulk.tensor, 128B swizzle) into the B stage; both
 *                complete on the stage's full barrier
 *   warpgroups   consumers (setmaxnreg.inc to MJ_WGMMA_CONSUMER_REGS): consumer c owns BM/2
 *   1, 2         rows of the tile as BM/128 m64 blocks, each a wgmma.m64nBNk16 over all BN
 *                weight rows
 *   large        BM 128 token rows x BN 256 weight rows (mj_gemm1_act, mj_gemm2)
 *   tall         BM 256 token rows x BN 128 weight rows (mj_gemm1_act_tall, mj_gemm2_tall)
 *   pair         the large tiles in clusters of two CTAs sharing weight tiles (below;
 *                mj_gemm1_act_pair, mj_gemm2_pair)
 *   short        the large path's tiles at few rows per expert: BM 64 x BN 256, 5 stages of
 *                40 KiB (below; mj_gemm1_act_short, mj_gemm2_short): consumer 1 has no rows
 *                (gated GEMM1: BN/2 up rows, then the BN/2 gate rows of the same columns ->
 *                BN/2 intermediate columns; ungated GEMM1 and GEMM2: BN output columns);
 *                BK 64 (one 128-byte swizzle row), 4 stages of 48 KiB in both
 *
 * Why two shapes: a weight tile is streamed once per row tile, and an expert's row tiles run
 * on different CTAs that drift apart over a persistent schedule, so the second one finds the
 * tile evicted from L2; tall tiles read it once per 256 rows, but gather every A row for twice
 * as many column tiles and make n128 MMAs, so they only pay off with many rows per expert and
 * weights too large to stay in L2 (docs/PERFORMANCE.md). The pair path (below) beats both
 * wherever an expert fills a row tile, so tile=auto takes small, large or pair; tall stays for
 * tile=tall and tuning tables.
 *
 * The kernel table is the mma one (MJ_MMA_K_*) plus the tall and pair paths' kernels
 * (MJ_WGMMA_K_*): the large GEMMs change body and signature (a CUtensorMap follows
 * mj_layer_params), the route, permute, finalize and decode kernels are mma's.
 */
#ifndef MJ_TEMPLATES_COMMON_WGMMA_PARAMS_H
#define MJ_TEMPLATES_COMMON_WGMMA_PARAMS_H

#define MJ_WGMMA_THREADS 384       /* producer warpgroup + 2 consumer warpgroups */
#define MJ_WGMMA_CONSUMERS 2       /* consumer warpgroups */
#define MJ_WGMMA_BM 128            /* large path: token rows per tile (one m64 block per consumer) */
#define MJ_WGMMA_BN 256            /* large path: weight rows per tile (wgmma.m64n256k16) */
#define MJ_WGMMA_TALL_BM 256       /* tall path: token rows per tile (two m64 blocks per consumer) */
#define MJ_WGMMA_TALL_BN 128       /* tall path: weight rows per tile (wgmma.m64n128k16) */
#define MJ_WGMMA_BK 64             /* k per stage: 64 bf16 = 128 bytes = the 128B swizzle span */
#define MJ_WGMMA_STAGES 4

/* The pair path (tile=pair): the large path's row tiles and 128 x 256 tiles, run by clusters
 * of MJ_WGMMA_PAIR_CTAS CTAs, each cluster two row tiles of one column tile, listed by
 * mj_expert_offsets_pair so that each expert's tiles pair up with each other (its odd tile, if
 * any, with another expert's odd tile: templates/permute.cuh); where both are one expert's they
 * share the weight tile, each CTA loading one half of it by TMA into the shared memory of both
 * (multicast). What it fixes in the other two: the large path streams an expert's weight tile
 * once per 128-row tile from CTAs that drift apart in the persistent schedule (the second
 * read misses L2); the tall path reads it once per 256 rows but gathers every token row for
 * twice as many column tiles, issues n128 wgmmas and pads an expert's rows to 256; a cluster's
 * two CTAs consume each stage in lock step, one weight read per 256 rows, with the large
 * path's A gather, n256 wgmmas and 128-row padding. Every output is computed by the large
 * path's own sequence of wgmmas, so its bits are the large path's. Where tile=auto takes it:
 * runtime/gemm_plan.c. */
#define MJ_WGMMA_PAIR_CTAS 2

/* The order of the pair path's row tiles: mj_expert_offsets_pair lists them in the pair order
 * (templates/permute.cuh: an expert's tiles two by two, its odd tile with the next odd
 * expert's), mj_expert_offsets in expert order; which one a forward takes is
 * runtime/gemm_plan.c's (MJ_WGMMA_PAIR_ORDER_MAX_ROWS). */

/* The pair path's raster group (raster_grouped): 4 units of two row tiles, so that, as in the
 * large path's groups of 8 row tiles, 8 x 128 token rows of activations stay in L2 over a
 * group's column sweep; larger groups were slower (docs/PERFORMANCE.md). */
#define MJ_WGMMA_PAIR_RASTER_UNITS 4

/* The large path's short tiles: with a gated activation and few rows per local expert
 * (runtime/gemm_plan.c: MJ_WGMMA_SHORT_MAX_ROWS_PER_EXPERT) its row tiles are
 * MJ_WGMMA_SHORT_BM = 64 rows, whose stage (8 KiB of A,
 * 32 KiB of weights) leaves room for MJ_WGMMA_SHORT_STAGES = 5 stages instead of 4: 160 KiB of
 * weights in flight per SM instead of 128. At so few rows an expert fits one 64-row tile, whose
 * one m64 block consumer 0 computes (consumer 1 keeps the barrier protocol only, as it does on
 * the 128-row tiles there, whose rows 64..127 are all padding); the weight stream is what the
 * time goes to, and DRAM serves it better with more of it requested. The same wgmmas per output
 * row, so the same bits. What gains is the gated GEMM1 (two 128-row boxes per stage); the
 * ungated layer does not, hence gated only (docs/PERFORMANCE.md). An ungated spec's cubin holds
 * the short kernels unused. */
#define MJ_WGMMA_SHORT_BM 64
#define MJ_WGMMA_SHORT_BN MJ_WGMMA_BN /* the large tiles' weight rows: the same tensor-map boxes */
#define MJ_WGMMA_SHORT_STAGES 5

/* ---- kernels beyond the mma table (common/mma_params.h), in launch-table order ---------- */
enum {
    MJ_WGMMA_K_EXPERT_OFFSETS_TALL = 16, /* == MJ_MMA_NUM_KERNELS: row tiles of MJ_WGMMA_TALL_BM */
    MJ_WGMMA_K_GEMM1_ACT_TALL,
    MJ_WGMMA_K_GEMM2_TALL,
    MJ_WGMMA_K_GEMM1_ACT_PAIR, /* the pair path's GEMMs (clusters of two; offsets: the large ones) */
    MJ_WGMMA_K_GEMM2_PAIR,
    MJ_WGMMA_K_EXPERT_OFFSETS_PAIR, /* the large row tiles in the pair path's order (permute.cuh) */
    MJ_WGMMA_K_EXPERT_OFFSETS_SHORT, /* the large path's short tiles: row tiles of MJ_WGMMA_SHORT_BM */
    MJ_WGMMA_K_GEMM1_ACT_SHORT,
    MJ_WGMMA_K_GEMM2_SHORT,
    MJ_WGMMA_NUM_KERNELS
};
#define MJ_WGMMA_TALL_KERNEL_NAME_LIST \
    "mj_expert_offsets_tall", "mj_gemm1_act_tall", "mj_gemm2_tall", "mj_gemm1_act_pair", "mj_gemm2_pair", \
        "mj_expert_offsets_pair", "mj_expert_offsets_short", "mj_gemm1_act_short", "mj_gemm2_short"

/* Registers after setmaxnreg: 128·56 + 256·224 = 64512, the 168 a thread of the 384 that
 * __launch_bounds__(384, 1) allocate at launch; setmaxnreg.inc only takes what the CTA's own
 * setmaxnreg.dec gave back (more, and the consumers wait for it forever). The consumers hold
 * 128 fp32 accumulators each (one m64n256 or two m64n128 blocks); the producer holds 4 or 8
 * row pointers and loop state. */
#define MJ_WGMMA_LAUNCH_REGS (65536 / MJ_WGMMA_THREADS / 8 * 8) /* a thread's share, in steps of 8: 168 */
#define MJ_WGMMA_PRODUCER_REGS 56
#define MJ_WGMMA_CONSUMER_REGS 224

/* A stage: BM + BN rows of 128 bytes, 48 KiB in the large and tall shapes */
#define MJ_WGMMA_STAGE_BYTES ((MJ_WGMMA_BM + MJ_WGMMA_BN) * MJ_WGMMA_BK * 2)
/* Dynamic shared memory: the stages, 1 KiB of slack to align them to the 1024-byte repeat of
 * the 128B swizzle, and the full/empty mbarriers. 197,888 bytes: within the 227 KiB a block
 * of sm_90 may opt in to. */
#define MJ_WGMMA_SMEM (MJ_WGMMA_STAGES * MJ_WGMMA_STAGE_BYTES + 1024 + 256)
#if (MJ_WGMMA_TALL_BM + MJ_WGMMA_TALL_BN) != (MJ_WGMMA_BM + MJ_WGMMA_BN)
#error "the large and tall tiles must have the same stage size (one MJ_WGMMA_SMEM)"
#endif
/* The short tiles': 5 stages of 40 KiB, 206,080 bytes */
#define MJ_WGMMA_SHORT_STAGE_BYTES ((MJ_WGMMA_SHORT_BM + MJ_WGMMA_SHORT_BN) * MJ_WGMMA_BK * 2)
#define MJ_WGMMA_SHORT_SMEM (MJ_WGMMA_SHORT_STAGES * MJ_WGMMA_SHORT_STAGE_BYTES + 1024 + 256)
/* The fp8 GEMMs (templates/wgmma_fp8.cuh: quant=fp8_tensor, fp8_block): the same tiles and
 * stage bytes (a 128-byte row holds 128 e4m3 codes, so BK is 128: one K block of the 128x128
 * weight scales per stage), and after the barriers the fp32 scale of every A row of every
 * stage, written by the producer that quantizes the rows (up to 256 rows per stage: tall). */
#define MJ_WGMMA_FP8_BK 128
#define MJ_WGMMA_FP8_SMEM (MJ_WGMMA_SMEM + MJ_WGMMA_STAGES * MJ_WGMMA_TALL_BM * 4)
#define MJ_WGMMA_FP8_SHORT_SMEM (MJ_WGMMA_SHORT_SMEM + MJ_WGMMA_SHORT_STAGES * MJ_WGMMA_SHORT_BM * 4)
/* The 4-bit GEMMs (quant w4a16, mxfp4; templates/wgmma_w4_producer.cuh): the large tiles, whose
 * producer dequantizes each stage's weights into the 16-bit B stage the consumers' wgmmas read,
 * so the consumers, their MMAs and epilogues are the 16-bit kernels'. The packed weights, their
 * scales and zero points reach it through MJ_WGMMA_W4_SLOTS slots of shared memory that each
 * producer thread fills with its own cp.async copies MJ_WGMMA_W4_SLOTS - 1 stages ahead (a slot:
 * 4 units of 32 k of a weight row per thread, 16 bytes each, and a 4-byte word holding the
 * unit's scale and one holding its zero point); behind them MJ_WGMMA_W4_STAGES 16-bit stages,
 * which only need to cover the hand-over from producer to consumers. 210,176 bytes. The producer
 * is MJ_WGMMA_W4_PRODUCERS warpgroups, so a block is 512 threads with 128 registers each at
 * launch: 2 x 56 + 2 x 200 = 512 = 4 x MJ_WGMMA_W4_LAUNCH_REGS. A producer thread decodes 64
 * weights a stage and gathers 4 A rows (with one warpgroup it decoded 128 and gathered 8, in
 * 104 registers: one warp per scheduler, waiting on its own chain, set the stage's time); the
 * consumers issue each m64n256k16 as two m64n128k16 (wgmma_m64n256k16_as_n128), since ptxas
 * needs ~154 registers to issue one n256 and the launch allots 128. */
#define MJ_WGMMA_W4_STAGES 3
#define MJ_WGMMA_W4_SLOTS 5
#define MJ_WGMMA_W4_SLOT_BYTES (128 * 4 * (16 + 4 + 4))
#define MJ_WGMMA_W4_SMEM \
    (MJ_WGMMA_W4_STAGES * MJ_WGMMA_STAGE_BYTES + MJ_WGMMA_W4_SLOTS * MJ_WGMMA_W4_SLOT_BYTES + 1024 + 256)
#define MJ_WGMMA_W4_PRODUCERS 2 /* producer warpgroups */
#define MJ_WGMMA_W4_THREADS (128 * (MJ_WGMMA_W4_PRODUCERS + MJ_WGMMA_CONSUMERS))
#define MJ_WGMMA_W4_LAUNCH_REGS (65536 / MJ_WGMMA_W4_THREADS / 8 * 8)
#define MJ_WGMMA_W4_PRODUCER_REGS 56
#define MJ_WGMMA_W4_CONSUMER_REGS 200
/* The pair path's (clusters of two sharing a weight tile, each producer decoding half of it and
 * copying that half into the other CTA as well): its producer keeps both decode forms and the
 * cluster's addresses, which spilled at 56 registers; 2 x 64 + 2 x 192 = 512 again. */
#define MJ_WGMMA_W4_PAIR_PRODUCER_REGS 64
#define MJ_WGMMA_W4_PAIR_CONSUMER_REGS 192
#if MJ_WGMMA_FP8_SMEM > 232448 || MJ_WGMMA_FP8_SHORT_SMEM > 232448
#error "an fp8 wgmma GEMM block may opt in to at most 227 KiB of shared memory on sm_90"
#endif
#if MJ_WGMMA_SMEM > 232448 || MJ_WGMMA_SHORT_SMEM > 232448 || MJ_WGMMA_W4_SMEM > 232448
#error "a wgmma GEMM block may opt in to at most 227 KiB of shared memory on sm_90"
#endif

#endif
