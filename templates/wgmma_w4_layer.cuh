// This file contains the `wgmma` layer for 4-bit weights (quant w4a16, mxfp4): mma's 4-bit
// layer (mma_w4_layer.cuh) under wgmma's kernel table, with its two large-batch GEMMs replaced
// by wgmma's persistent warp-specialized kernel (wgmma_gemm.cuh) on the large and the tall
// tiles, whose two producer warpgroups dequantize each stage's weights into the 16-bit B stage
// (wgmma_w4_producer.cuh), and on the pair path, clusters of two whose producers decode one
// half each of a weight tile the two CTAs share. The decode path (small tiles, the persistent
// decode layer) runs mma's 4-bit GEMMs. The short path's entries are empty, and the launch
// plan never takes it for a 4-bit layer (runtime/gemm_plan.c).
#pragma once

#include "common/wgmma_params.h"
#define MJ_TC_OWN_LARGE_GEMMS 1
#include "mma_w4_layer.cuh"
#include "wgmma_w4_producer.cuh"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "the wgmma layer needs sm_90a: compile with --gpu-architecture=sm_90a"
#endif

static_assert(MJ_WGMMA_BM == MJ_MMA_LARGE_BM, "mj_expert_offsets tiles rows for the large GEMMs' 128-row tiles");

namespace mj {
namespace tc_layer {

// The body of the large and tall GEMMs (S: WgW4Large, WgW4Tall): the 16-bit kernel with the
// 4-bit producer.
template <class S, WgGemm kKind, bool kPair = false>
__device__ __forceinline__ void layer_w4_gemm(const mj_layer_params &p, const TmaDesc &unused)
{
    wgmma_gemm<S, kDtype, kKind, kActKind, kPair, Extras, WgW4Weights<W4>>(
        p, unused, act_params(), dim<kPinnedHidden>(p.hidden), dim<kPinnedInter>(p.inter), dim<kPinnedTopk>(p.topk),
        mj_tc_smem);
}

constexpr WgGemm kW4Gemm1 = kGated ? WgGemm::gemm1_gated : WgGemm::gemm1;

} // namespace tc_layer
} // namespace mj

// (512, 1): the 16-bit large GEMMs' block (wgmma_layer.cuh) with a second producer warpgroup
// (common/wgmma_params.h); the tensor map parameter keeps their signature and is not read (the
// weights come through the producer's copies).
#if MJ_TC_BUILDS(MJ_TC_BIT_LARGE)
extern "C" __global__ void __launch_bounds__(MJ_WGMMA_W4_THREADS, 1)
mj_gemm1_act(const __grid_constant__ mj_layer_params p, const __grid_constant__ mj::TmaDesc w1_map)
{
    mj::tc_layer::layer_w4_gemm<mj::WgW4Large, mj::tc_layer::kW4Gemm1>(p, w1_map);
}
#endif

#if MJ_TC_BUILDS(MJ_TC_BIT_LARGE)
extern "C" __global__ void __launch_bounds__(MJ_WGMMA_W4_THREADS, 1)
mj_gemm2(const __grid_constant__ mj_layer_params p, const __grid_constant__ mj::TmaDesc w2_map)
{
    mj::tc_layer::layer_w4_gemm<mj::WgW4Large, mj::WgGemm::gemm2>(p, w2_map);
}
#endif

// The tall path (256 token rows x 128 weight rows): each decoded weight serves up to 256 rows
// of its expert, half the decoding per row of the large tiles' (common/wgmma_params.h).
static_assert(MJ_WGMMA_K_EXPERT_OFFSETS_TALL == MJ_MMA_NUM_KERNELS, "the tall kernels follow the mma table");

#if MJ_TC_BUILDS(MJ_TC_BIT_TALL)
extern "C" __global__ void __launch_bounds__(MJ_SIMT_OFFSETS_THREADS)
mj_expert_offsets_tall(const __grid_constant__ mj_layer_params p)
{
    mj::grid_dep_enter();
    mj::offsets_stage<MJ_WGMMA_TALL_BM>(p);
}
#endif

#if MJ_TC_BUILDS(MJ_TC_BIT_TALL)
extern "C" __global__ void __launch_bounds__(MJ_WGMMA_W4_THREADS, 1)
mj_gemm1_act_tall(const __grid_constant__ mj_layer_params p, const __grid_constant__ mj::TmaDesc w1_map)
{
    mj::tc_layer::layer_w4_gemm<mj::WgW4Tall, mj::tc_layer::kW4Gemm1>(p, w1_map);
}
#endif

#if MJ_TC_BUILDS(MJ_TC_BIT_TALL)
extern "C" __global__ void __launch_bounds__(MJ_WGMMA_W4_THREADS, 1)
mj_gemm2_tall(const __grid_constant__ mj_layer_params p, const __grid_constant__ mj::TmaDesc w2_map)
{
    mj::tc_layer::layer_w4_gemm<mj::WgW4Tall, mj::WgGemm::gemm2>(p, w2_map);
}
#endif

// The pair path (clusters of two, an expert's weight tile decoded half by each CTA into both;
// wgmma_w4_producer.cuh) and its offsets, as wgmma_layer.cuh's.
#if MJ_TC_BUILDS(MJ_TC_BIT_PAIR)
extern "C" __global__ void __cluster_dims__(MJ_WGMMA_PAIR_CTAS, 1, 1) __launch_bounds__(MJ_WGMMA_W4_THREADS, 1)
mj_gemm1_act_pair(const __grid_constant__ mj_layer_params p, const __grid_constant__ mj::TmaDesc w1_map)
{
    mj::tc_layer::layer_w4_gemm<mj::WgW4Large, mj::tc_layer::kW4Gemm1, true>(p, w1_map);
}
#endif

#if MJ_TC_BUILDS(MJ_TC_BIT_PAIR)
extern "C" __global__ void __cluster_dims__(MJ_WGMMA_PAIR_CTAS, 1, 1) __launch_bounds__(MJ_WGMMA_W4_THREADS, 1)
mj_gemm2_pair(const __grid_constant__ mj_layer_params p, const __grid_constant__ mj::TmaDesc w2_map)
{
    mj::tc_layer::layer_w4_gemm<mj::WgW4Large, mj::WgGemm::gemm2, true>(p, w2_map);
}
#endif

#if MJ_TC_BUILDS(MJ_TC_BIT_PAIR)
extern "C" __global__ void __launch_bounds__(MJ_SIMT_OFFSETS_THREADS)
mj_expert_offsets_pair(const __grid_constant__ mj_layer_params p)
{
    mj::grid_dep_enter();
    mj::offsets_stage<MJ_WGMMA_BM, true>(p);
}
#endif

// Not launched for 4-bit weights (see above); present so the kernel table is wgmma's.
#define MJ_W4_ABSENT_KERNEL(name)                                                                              \
    extern "C" __global__ void name(const __grid_constant__ mj_layer_params p) { (void)p; }
MJ_W4_ABSENT_KERNEL(mj_expert_offsets_short)
MJ_W4_ABSENT_KERNEL(mj_gemm1_act_short)
MJ_W4_ABSENT_KERNEL(mj_gemm2_short)
