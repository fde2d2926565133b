// This file contains the `wgmma` layer for 4-bit weights (quant w4a16, mxfp4): mma's 4-bit
// layer (mma_w4_layer.cuh) under wgmma's kernel table. Both the decode and the large path run
// mma's 4-bit GEMMs (warp-level mma.sync with the dequantization in registers, 128 x 128
// large tiles), not warpgroup MMAs: the wgmma GEMMs take their weight tiles through TMA into
// the 16-bit swizzled layout HGMMA reads, and a dequantizing producer for them is not built.
// The tall, pair and short paths' entries are therefore empty, and the launch plan never
// takes them for a 4-bit layer (runtime/gemm_plan.c).
#pragma once

#include "common/wgmma_params.h"
#include "mma_w4_layer.cuh"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "the wgmma layer needs sm_90a: compile with --gpu-architecture=sm_90a"
#endif

static_assert(MJ_WGMMA_BM == MJ_MMA_LARGE_BM, "mj_expert_offsets tiles rows for mma's large GEMMs");

// Not launched for 4-bit weights (see above); present so the kernel table is wgmma's.
#define MJ_W4_ABSENT_KERNEL(name)                                                                              \
    extern "C" __global__ void name(const __grid_constant__ mj_layer_params p) { (void)p; }
MJ_W4_ABSENT_KERNEL(mj_expert_offsets_tall)
MJ_W4_ABSENT_KERNEL(mj_gemm1_act_tall)
MJ_W4_ABSENT_KERNEL(mj_gemm2_tall)
MJ_W4_ABSENT_KERNEL(mj_gemm1_act_pair)
MJ_W4_ABSENT_KERNEL(mj_gemm2_pair)
MJ_W4_ABSENT_KERNEL(mj_expert_offsets_pair)
MJ_W4_ABSENT_KERNEL(mj_expert_offsets_short)
MJ_W4_ABSENT_KERNEL(mj_gemm1_act_short)
MJ_W4_ABSENT_KERNEL(mj_gemm2_short)
