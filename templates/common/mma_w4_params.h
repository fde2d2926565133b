/*
 * This file contains what the host and the 4-bit GEMMs of the tensor-core layers share (quant
 * w4a16 and mxfp4, templates/mma_w4_gemm.cuh): each path's k per stage, pipeline depth and
 * dynamic shared memory. Their tiles are the 16-bit paths' (common/mma_params.h: 64 weight
 * rows x 16 tokens small, 128 x 128 large), so the row tiles, grids and workspace are too;
 * only the stages differ, since a stage of packed weights is a quarter of the bytes. Plain C,
 * included by the templates (NVRTC) and by runtime/launch_mma.c, launch_wgmma.c.
 *
 *   small (decode)  256 k per stage: 64 rows x 128 bytes of packed weights + 16 x 512 bytes of
 *                   activations = 16 KiB; 2 stages (32 KiB), bounded to five CTAs per SM (the
 *                   registers of five: ~90 used): the decode GEMMs issue ~4.5 instructions per
 *                   weight (dequantization, loads, MMAs), so their rate is set by how many warps
 *                   an SM can issue from and by the instructions a weight costs, not by the bytes
 *                   in flight (measured on the H200: 10 stages of 128 k at two CTAs per SM
 *                   streamed 1.35-1.47 TB/s, 4 at five 1.9-2.0; 2 of 256 k at five: w4a16 2-6 %
 *                   faster than 4 of 128, mxfp4 within -1.5 % and +3 %; 3 of 256 at four slower)
 *   persistent      the decode layer's deep blocks (run only when MOEJIT_DECODE names them:
 *                   the chain was as fast or faster): 3 stages of the small path's (48 KiB),
 *                   four per SM where an SM has 228 KiB (sm_90a, sm_100a: 128 registers; 3-8 %
 *                   faster from 3 tokens than three of 168, 4 % slower at gpt-oss-120b's 2),
 *                   three elsewhere, with zero points and in fp16 mxfp4 (they spilled at 128)
 *   large           64 k per stage: 128 rows x 32 bytes of packed weights in 4 slots (they
 *                   run a stage ahead: each is dequantized during the stage before its MMAs),
 *                   128 x 128 bytes of activations in 3; 2 KiB of scale constants and two
 *                   16 KiB buffers of dequantized weights (98 KiB, two CTAs per SM as the 16-bit
 *                   large path)
 */
#ifndef MJ_TEMPLATES_COMMON_MMA_W4_PARAMS_H
#define MJ_TEMPLATES_COMMON_MMA_W4_PARAMS_H

#define MJ_W4_SMALL_BK 256
#define MJ_W4_SMALL_STAGES 2
#define MJ_W4_SMALL_BLOCKS_PER_SM 5
#define MJ_W4_LARGE_BK 64
#define MJ_W4_LARGE_STAGES 3

/* one stage: packed weight rows (BK/2 bytes each), then activation rows (2·BK bytes each) */
#define MJ_W4_STAGE_BYTES(weight_rows, token_rows, bk) ((weight_rows) * (bk) / 2 + (token_rows) * (bk) * 2)
#define MJ_W4_SMALL_SMEM (MJ_W4_SMALL_STAGES * MJ_W4_STAGE_BYTES(64, 16, MJ_W4_SMALL_BK))
/* the large path: one more slot of packed weights than of activations, two buffers of the
 * stage's scale-group constants (128 rows x 2 x 4 bytes) and two of dequantized weights */
#define MJ_W4_LARGE_SMEM                                                                                      \
    ((MJ_W4_LARGE_STAGES + 1) * MJ_W4_STAGE_BYTES(128, 0, MJ_W4_LARGE_BK) +                                  \
     MJ_W4_LARGE_STAGES * MJ_W4_STAGE_BYTES(0, 128, MJ_W4_LARGE_BK) + 2 * 128 * 2 * 4 + 2 * 128 * MJ_W4_LARGE_BK * 2)
/* the persistent decode layer's deep blocks in 4-bit stages (its shallow blocks are 16-bit only) */
#define MJ_W4_DECODE_STAGES 3
/* its blocks per SM: four where an SM has 228 KiB (big_sm: sm_90a, sm_100a) and the format fits
 * four's 128 registers (w4a16 with zero points and fp16 mxfp4 spilled there), else three */
#define MJ_W4_DECODE_TIGHT(zero_point, mxfp4, fp16) ((zero_point) || ((mxfp4) && (fp16)))
#define MJ_W4_DECODE_BLOCKS_PER_SM(big_sm, zero_point, mxfp4, fp16) \
    ((big_sm) && !MJ_W4_DECODE_TIGHT(zero_point, mxfp4, fp16) ? 4 : 3)
#define MJ_W4_DECODE_SMEM (MJ_W4_DECODE_STAGES * MJ_W4_STAGE_BYTES(64, 16, MJ_W4_SMALL_BK))
#if MJ_W4_SMALL_SMEM > 101376 || MJ_W4_LARGE_SMEM > 101376
#error "the 4-bit GEMMs must fit the 99 KiB of dynamic shared memory a block of sm_86/sm_89/sm_120 may have"
#endif

#endif
