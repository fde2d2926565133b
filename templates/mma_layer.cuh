// This file contains the extern "C" entry kernels of the `mma` layer (warp-level tensor
// cores, sm_80 and newer), in the order of common/mma_params.h. Route, scatter and finalize
// are the simt stages (same mj_layer_params, same workspace), except that y holds each
// expert's output rounded to the dtype, not in fp32 (finalize.cuh says why); each GEMM path
// has its own expert-offsets kernel because the row-tile size differs:
//
//   mj_route                 grid ceil(T/8) x 256     one warp per token; up to 32 blocks each
//                                                     zeroes its own counter copy first
//   mj_expert_offsets        grid 1 x 512             row tiles of 128 tokens (large path)
//   mj_scatter               grid ceil(T·k/2048) x 256 2048 pairs per block (permute.cuh); not
//                                                     launched at T·k <= 2048: the offsets
//                                                     kernels scatter them (offsets_stage)
//   mj_gemm1_act             grid n_tiles(I) · max_tiles x 256, dynamic smem MJ_MMA_LARGE_SMEM
//   mj_gemm2                 grid n_tiles(H) · max_tiles x 256
//   mj_finalize              grid (T, H/512) x 128
//   mj_expert_offsets_small  grid 1 x 512             row tiles of 16 tokens (small path)
//   mj_gemm1_act_small       grid max_tiles · n_tiles(I) x 128, dynamic smem MJ_MMA_SMALL_SMEM
//   mj_gemm2_small           grid max_tiles · n_tiles(H) x 128
//   mj_route_fused_small     grid 1 x 512             T <= 16 (MJ_MMA_FUSED_ROUTE_MAX_TOKENS):
//                                                     route (a warp per token), offsets, scatter
//                                                     in shared memory; replaces the first three
//
// Everything but the two large-batch GEMMs is in tc_layer_stages.cuh, shared with the wgmma
// layer; the generated source defines namespace mj::cfg before including this file.
#pragma once

#define MJ_TC_LARGE_BM MJ_MMA_LARGE_BM /* mj_expert_offsets tiles rows for this layer's large GEMMs */
#include "tc_layer_stages.cuh"

// (256, 2): two CTAs per SM (2 x 96 KB of stages, the 4-bit layer's 2 x 98 KB), so one CTA's
// epilogue and prologue hide behind the other's mainloop; caps registers at 128 per thread.
// A layer that brings its own large GEMMs (wgmma_w4_layer.cuh) defines MJ_TC_OWN_LARGE_GEMMS.
#if MJ_TC_BUILDS(MJ_TC_BIT_LARGE) && !defined(MJ_TC_OWN_LARGE_GEMMS)
extern "C" __global__ void __launch_bounds__(MJ_MMA_LARGE_THREADS, 2)
mj_gemm1_act(const __grid_constant__ mj_layer_params p)
{
    using namespace mj::tc_layer;
    mj::grid_dep_enter();
#ifdef MJ_TC_W4
    mj::w4_gemm1_act_large<kDtype, W4, kActKind, Extras>(p, act_params(), dim<kPinnedHidden>(p.hidden),
                                                 dim<kPinnedInter>(p.inter), dim<kPinnedTopk>(p.topk), mj_tc_smem);
#else
    mj::gemm1_act_large<kDtype, kActKind, Extras>(p, act_params(), dim<kPinnedHidden>(p.hidden),
                                          dim<kPinnedInter>(p.inter), dim<kPinnedTopk>(p.topk), mj_tc_smem);
#endif
}
#endif

#if MJ_TC_BUILDS(MJ_TC_BIT_LARGE) && !defined(MJ_TC_OWN_LARGE_GEMMS)
extern "C" __global__ void __launch_bounds__(MJ_MMA_LARGE_THREADS, 2)
mj_gemm2(const __grid_constant__ mj_layer_params p)
{
    using namespace mj::tc_layer;
    mj::grid_dep_enter();
#ifdef MJ_TC_W4
    mj::w4_gemm2_large<kDtype, W4, Extras>(p, dim<kPinnedHidden>(p.hidden), dim<kPinnedInter>(p.inter), mj_tc_smem);
#else
    mj::gemm2_large<kDtype, Extras>(p, dim<kPinnedHidden>(p.hidden), dim<kPinnedInter>(p.inter), mj_tc_smem);
#endif
}
#endif

