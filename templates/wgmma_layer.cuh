// This file contains the extern "C" entry kernels of the `wgmma` layer (sm_90a), in the
// order of the mma kernel table (common/mma_params.h) and then the tall and pair paths'
// (common/wgmma_params.h): the wgmma layer IS the mma layer with its two large-batch GEMMs
// replaced by the persistent warp-specialized warpgroup-MMA kernel of wgmma_gemm.cuh, in two
// tile shapes. Route, offsets, scatter, finalize and the whole decode path (small-tile
// GEMMs with swapped operands, the fused routing kernel) are the mma stages unchanged:
//
//   mj_route                 grid ceil(T/8) x 256
//   mj_expert_offsets        grid 1 x 512             row tiles of 128 tokens (= MJ_WGMMA_BM)
//   mj_scatter               grid ceil(T·k/2048) x 256 2048 pairs per block (permute.cuh); not
//                                                     launched at T·k <= 2048: the offsets
//                                                     kernels scatter them (offsets_stage);
//                                                     fp8_act=tensor: at every T, also
//                                                     quantizing x (>= T/32 blocks)
//   mj_gemm1_act             grid min(SMs, tiles) x 384, MJ_WGMMA_SMEM; (params, W1 tensor map)
//   mj_gemm2                 grid min(SMs, tiles) x 384, MJ_WGMMA_SMEM; (params, W2 tensor map)
//   mj_finalize              grid (T, H/512) x 128
//   mj_expert_offsets_small, mj_gemm1_act_small, mj_gemm2_small, mj_route_fused_small: mma's
//   mj_expert_offsets_tall   grid 1 x 512             row tiles of 256 tokens (MJ_WGMMA_TALL_BM)
//   mj_gemm1_act_tall        as mj_gemm1_act, 256 x 128 tiles (the tall path)
//   mj_gemm2_tall            as mj_gemm2, 256 x 128 tiles
//   mj_gemm1_act_pair        as mj_gemm1_act in clusters of 2 CTAs, two row tiles each, an
//   mj_gemm2_pair            expert's weight tile multicast to both (the pair path)
//   mj_expert_offsets_pair   as mj_expert_offsets, the table in the pair order (permute.cuh)
//   mj_expert_offsets_short  grid 1 x 512             row tiles of 64 tokens (MJ_WGMMA_SHORT_BM)
//   mj_gemm1_act_short       as mj_gemm1_act, 64 x 256 tiles in 5 stages (the large path at
//   mj_gemm2_short           few rows per expert), MJ_WGMMA_SHORT_SMEM
//
// Everything but the two large-batch GEMMs is in tc_layer_stages.cuh, shared with the mma
// layer; the generated source defines namespace mj::cfg before including this file.
#pragma once

#include "common/wgmma_params.h"
#define MJ_TC_LARGE_BM MJ_WGMMA_BM /* mj_expert_offsets tiles rows for this layer's large GEMMs */
#include "tc_layer_stages.cuh"
#include "wgmma_fp8.cuh"
#include "wgmma_gemm.cuh"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "the wgmma layer needs sm_90a (wgmma, setmaxnreg): compile with --gpu-architecture=sm_90a"
#endif

namespace mj {
namespace tc_layer {

constexpr WgGemm kGemm1 = kGated ? WgGemm::gemm1_gated : WgGemm::gemm1;

// The body of every GEMM entry point below: tile shape S (S8 for an fp8 layer), GEMM kKind,
// kPair (clusters of two), with this layer's dtype, activation and pinned dimensions.
template <class S, class S8, WgGemm kKind, bool kPair = false>
__device__ __forceinline__ void layer_gemm(const mj_layer_params &p, const TmaDesc &map)
{
    // griddepcontrol.wait and launch_dependents are inside (wgmma_gemm.cuh, pre_wait: the
    // producer may request its first weight stages before it waits)
    if constexpr (kTcFp8)
        wgmma_gemm_fp8<S8, kDtype, kKind, kActKind, kPair, kTcQuant, kTcFp8Act, kGated>(
            p, map, act_params(), dim<kPinnedHidden>(p.hidden), dim<kPinnedInter>(p.inter), dim<kPinnedTopk>(p.topk),
            mj_tc_smem);
    else
        wgmma_gemm<S, kDtype, kKind, kActKind, kPair, Extras>(p, map, act_params(), dim<kPinnedHidden>(p.hidden),
                                                              dim<kPinnedInter>(p.inter), dim<kPinnedTopk>(p.topk),
                                                              mj_tc_smem);
}

} // namespace tc_layer
} // namespace mj

// (384, 1): one CTA per SM (its ~194 KB of stages), and a register cap at entry, without
// which setmaxnreg is ignored. The large path's GEMMs (128 x 256 tiles):
#if MJ_TC_BUILDS(MJ_TC_BIT_LARGE)
extern "C" __global__ void __launch_bounds__(MJ_WGMMA_THREADS, 1)
mj_gemm1_act(const __grid_constant__ mj_layer_params p, const __grid_constant__ mj::TmaDesc w1_map)
{
    mj::tc_layer::layer_gemm<mj::WgLarge, mj::WgLarge8, mj::tc_layer::kGemm1>(p, w1_map);
}
#endif

#if MJ_TC_BUILDS(MJ_TC_BIT_LARGE)
extern "C" __global__ void __launch_bounds__(MJ_WGMMA_THREADS, 1)
mj_gemm2(const __grid_constant__ mj_layer_params p, const __grid_constant__ mj::TmaDesc w2_map)
{
    mj::tc_layer::layer_gemm<mj::WgLarge, mj::WgLarge8, mj::WgGemm::gemm2>(p, w2_map);
}
#endif

// ---- the tall path (256 x 128 tiles), after the mma table: MJ_WGMMA_K_* ------------------------
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
extern "C" __global__ void __launch_bounds__(MJ_WGMMA_THREADS, 1)
mj_gemm1_act_tall(const __grid_constant__ mj_layer_params p, const __grid_constant__ mj::TmaDesc w1_map)
{
    mj::tc_layer::layer_gemm<mj::WgTall, mj::WgTall8, mj::tc_layer::kGemm1>(p, w1_map);
}
#endif

#if MJ_TC_BUILDS(MJ_TC_BIT_TALL)
extern "C" __global__ void __launch_bounds__(MJ_WGMMA_THREADS, 1)
mj_gemm2_tall(const __grid_constant__ mj_layer_params p, const __grid_constant__ mj::TmaDesc w2_map)
{
    mj::tc_layer::layer_gemm<mj::WgTall, mj::WgTall8, mj::WgGemm::gemm2>(p, w2_map);
}
#endif

// ---- the pair path (clusters of two sharing each weight tile): MJ_WGMMA_K_*_PAIR -------------
#if MJ_TC_BUILDS(MJ_TC_BIT_PAIR)
extern "C" __global__ void __cluster_dims__(MJ_WGMMA_PAIR_CTAS, 1, 1) __launch_bounds__(MJ_WGMMA_THREADS, 1)
mj_gemm1_act_pair(const __grid_constant__ mj_layer_params p, const __grid_constant__ mj::TmaDesc w1_map)
{
    mj::tc_layer::layer_gemm<mj::WgLarge, mj::WgLarge8, mj::tc_layer::kGemm1, true>(p, w1_map);
}
#endif

#if MJ_TC_BUILDS(MJ_TC_BIT_PAIR)
extern "C" __global__ void __cluster_dims__(MJ_WGMMA_PAIR_CTAS, 1, 1) __launch_bounds__(MJ_WGMMA_THREADS, 1)
mj_gemm2_pair(const __grid_constant__ mj_layer_params p, const __grid_constant__ mj::TmaDesc w2_map)
{
    mj::tc_layer::layer_gemm<mj::WgLarge, mj::WgLarge8, mj::WgGemm::gemm2, true>(p, w2_map);
}
#endif
// The pair path's offsets: the large row tiles, listed so that clusters pair an expert's own
// tiles wherever it has two (permute.cuh, expert_offsets).
#if MJ_TC_BUILDS(MJ_TC_BIT_PAIR)
extern "C" __global__ void __launch_bounds__(MJ_SIMT_OFFSETS_THREADS)
mj_expert_offsets_pair(const __grid_constant__ mj_layer_params p)
{
    mj::grid_dep_enter();
    mj::offsets_stage<MJ_WGMMA_BM, true>(p);
}
#endif

// ---- the large path's short tiles (64 x 256, 5 stages): MJ_WGMMA_K_*_SHORT ---------------------
#if MJ_TC_BUILDS(MJ_TC_BIT_SHORT)
extern "C" __global__ void __launch_bounds__(MJ_SIMT_OFFSETS_THREADS)
mj_expert_offsets_short(const __grid_constant__ mj_layer_params p)
{
    mj::grid_dep_enter();
    mj::offsets_stage<MJ_WGMMA_SHORT_BM>(p);
}
#endif

#if MJ_TC_BUILDS(MJ_TC_BIT_SHORT)
extern "C" __global__ void __launch_bounds__(MJ_WGMMA_THREADS, 1)
mj_gemm1_act_short(const __grid_constant__ mj_layer_params p, const __grid_constant__ mj::TmaDesc w1_map)
{
    mj::tc_layer::layer_gemm<mj::WgShort, mj::WgShort8, mj::tc_layer::kGemm1>(p, w1_map);
}
#endif

#if MJ_TC_BUILDS(MJ_TC_BIT_SHORT)
extern "C" __global__ void __launch_bounds__(MJ_WGMMA_THREADS, 1)
mj_gemm2_short(const __grid_constant__ mj_layer_params p, const __grid_constant__ mj::TmaDesc w2_map)
{
    mj::tc_layer::layer_gemm<mj::WgShort, mj::WgShort8, mj::WgGemm::gemm2>(p, w2_map);
}
#endif
