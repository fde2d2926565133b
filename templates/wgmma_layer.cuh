// This file contains the extern "C" entry kernels of the `wgmma` layer (sm_90a), in the
// order of the mma kernel table (common/mma_params.h): the wgmma layer IS the mma layer with
// its two large-batch GEMMs replaced by the persistent warp-specialized warpgroup-MMA kernel
// of wgmma_gemm.cuh. Route, offsets, scatter, finalize and the whole decode path (small-tile
// GEMMs with swapped operands, the fused routing kernel) are the mma stages unchanged:
//
//   mj_route                 grid ceil(T/8) x 256
//   mj_expert_offsets        grid 1 x 512             row tiles of 128 tokens (= MJ_WGMMA_BM)
//   mj_scatter               grid ceil(T·k/256) x 256
//   mj_gemm1_act             grid min(SMs, tiles) x 384, MJ_WGMMA_SMEM; (params, W1 tensor map)
//   mj_gemm2                 grid min(SMs, tiles) x 384, MJ_WGMMA_SMEM; (params, W2 tensor map)
//   mj_finalize              grid T x 128
//   mj_expert_offsets_small, mj_gemm1_act_small, mj_gemm2_small, mj_route_fused_small: mma's
//
// The generated source defines namespace mj::cfg before including this file, with the names
// mma_layer.cuh reads (kDtype, kLogitsDtype, kActKind, kGated, kActParam0..2,
// kActPresent0..2, kRouting, kNGroup, kTopkGroup, kRoutedScaling, kPinned*).
#pragma once

#include "act.cuh"
#include "common/mma_params.h"
#include "common/params.h"
#include "common/types.cuh"
#include "common/wgmma_params.h"
#include "finalize.cuh"
#include "mma_gemm1_act.cuh"
#include "mma_gemm2.cuh"
#include "permute.cuh"
#include "route.cuh"
#include "wgmma_gemm.cuh"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "the wgmma layer needs sm_90a (wgmma, setmaxnreg): compile with --gpu-architecture=sm_90a"
#endif

namespace mj {
namespace wgmma_layer {

using namespace mj::cfg;

static_assert(kDtype == Dtype::bf16 || kDtype == Dtype::fp16, "the wgmma layer computes in bf16 or fp16");
static_assert(act_is_known(kActKind), "kActKind must be an activation ABI number of the contract");
static_assert(act_is_gated(kActKind) == kGated, "kGated must match the activation kind");
static_assert(kPinnedExperts >= 0 && kPinnedExperts <= MJ_SIMT_MAX_EXPERTS, "a pinned E must be in 1..512");
static_assert(kPinnedTopk >= 0 && kPinnedTopk <= MJ_SIMT_MAX_TOPK, "a pinned k must be in 1..32");
static_assert(kPinnedHidden % 8 == 0 && kPinnedInter % 8 == 0, "pinned H and I must be multiples of 8");
static_assert(MJ_WGMMA_BM == MJ_MMA_LARGE_BM, "mj_expert_offsets tiles rows for the large GEMMs");

template <int kPinned>
__device__ __forceinline__ int dim(int runtime_value) { return kPinned ? kPinned : runtime_value; }

constexpr int kMaxE = kPinnedExperts ? kPinnedExperts : MJ_SIMT_MAX_EXPERTS;
constexpr int kMaxK = kPinnedTopk ? kPinnedTopk : MJ_SIMT_MAX_TOPK;
constexpr WgGemm kGemm1 = kGated ? WgGemm::gemm1_gated : WgGemm::gemm1;

__device__ __forceinline__ ActParams act_params()
{
    ActParams a;
    a.v[0] = kActParam0;
    a.v[1] = kActParam1;
    a.v[2] = kActParam2;
    a.present[0] = kActPresent0;
    a.present[1] = kActPresent1;
    a.present[2] = kActPresent2;
    return a;
}

} // namespace wgmma_layer
} // namespace mj

// 1024-byte alignment is what the 128B swizzle needs; wgmma_gemm aligns by hand as well.
extern __shared__ __align__(1024) unsigned char mj_wgmma_smem[];

extern "C" __global__ void __launch_bounds__(MJ_SIMT_ROUTE_THREADS)
mj_route(const __grid_constant__ mj_layer_params p)
{
    using namespace mj::wgmma_layer;
    const int lane = threadIdx.x % mj::kWarp;
    const long long t = static_cast<long long>(blockIdx.x) * mj::kRouteWarpsPerBlock + threadIdx.x / mj::kWarp;
    if (t >= p.num_tokens) return;
    const mj::GroupRouting gr = {kNGroup, kTopkGroup, kRoutedScaling};
    mj::route_token<kRouting, kLogitsDtype, kMaxE>(p, t, dim<kPinnedExperts>(p.num_experts),
                                                   dim<kPinnedTopk>(p.topk), lane, gr);
}

extern "C" __global__ void __launch_bounds__(MJ_SIMT_OFFSETS_THREADS)
mj_expert_offsets(const __grid_constant__ mj_layer_params p)
{
    mj::expert_offsets<MJ_WGMMA_BM>(p);
}

extern "C" __global__ void __launch_bounds__(MJ_SIMT_SCATTER_THREADS)
mj_scatter(const __grid_constant__ mj_layer_params p)
{
    const long long i = static_cast<long long>(blockIdx.x) * MJ_SIMT_SCATTER_THREADS + threadIdx.x;
    if (i < p.num_pairs) mj::scatter_pair(p, i);
}

// (384, 1): one CTA per SM (its ~194 KB of stages), and a register cap at entry, without
// which setmaxnreg is ignored.
extern "C" __global__ void __launch_bounds__(MJ_WGMMA_THREADS, 1)
mj_gemm1_act(const __grid_constant__ mj_layer_params p, const __grid_constant__ mj::TmaDesc w1_map)
{
    using namespace mj::wgmma_layer;
    mj::wgmma_gemm<kDtype, kGemm1, kActKind>(p, w1_map, act_params(), dim<kPinnedHidden>(p.hidden),
                                             dim<kPinnedInter>(p.inter), dim<kPinnedTopk>(p.topk), mj_wgmma_smem);
}

extern "C" __global__ void __launch_bounds__(MJ_WGMMA_THREADS, 1)
mj_gemm2(const __grid_constant__ mj_layer_params p, const __grid_constant__ mj::TmaDesc w2_map)
{
    using namespace mj::wgmma_layer;
    mj::wgmma_gemm<kDtype, mj::WgGemm::gemm2, kActKind>(p, w2_map, act_params(), dim<kPinnedHidden>(p.hidden),
                                                        dim<kPinnedInter>(p.inter), dim<kPinnedTopk>(p.topk),
                                                        mj_wgmma_smem);
}

extern "C" __global__ void __launch_bounds__(MJ_SIMT_FINALIZE_THREADS)
mj_finalize(const __grid_constant__ mj_layer_params p)
{
    using namespace mj::wgmma_layer;
    mj::finalize_token<kDtype, kMaxK>(p, static_cast<long long>(blockIdx.x), dim<kPinnedHidden>(p.hidden),
                                      dim<kPinnedTopk>(p.topk));
}

// ---- the decode path: mma's small-tile kernels ------------------------------------------------

extern "C" __global__ void __launch_bounds__(MJ_SIMT_OFFSETS_THREADS)
mj_expert_offsets_small(const __grid_constant__ mj_layer_params p)
{
    mj::expert_offsets<MJ_MMA_SMALL_BT>(p);
}

extern "C" __global__ void __launch_bounds__(MJ_MMA_SMALL_THREADS)
mj_gemm1_act_small(const __grid_constant__ mj_layer_params p)
{
    using namespace mj::wgmma_layer;
    mj::gemm1_act_small<kDtype, kActKind>(p, act_params(), dim<kPinnedHidden>(p.hidden),
                                          dim<kPinnedInter>(p.inter), dim<kPinnedTopk>(p.topk), mj_wgmma_smem);
}

extern "C" __global__ void __launch_bounds__(MJ_MMA_SMALL_THREADS)
mj_gemm2_small(const __grid_constant__ mj_layer_params p)
{
    using namespace mj::wgmma_layer;
    mj::gemm2_small<kDtype>(p, dim<kPinnedHidden>(p.hidden), dim<kPinnedInter>(p.inter), mj_wgmma_smem);
}

// One block of 512 threads: the decode prologue in one launch (as mma_layer.cuh).
extern "C" __global__ void __launch_bounds__(MJ_SIMT_OFFSETS_THREADS)
mj_route_fused_small(const __grid_constant__ mj_layer_params p)
{
    using namespace mj::wgmma_layer;
    int *counts = reinterpret_cast<int *>(p.ws_counts);
    int *cursors = reinterpret_cast<int *>(p.ws_cursors);
    for (int e = threadIdx.x; e < p.num_local_experts; e += blockDim.x) {
        counts[e] = 0;
        cursors[e] = 0;
    }
    __syncthreads();
    const int lane = threadIdx.x % mj::kWarp, warp = threadIdx.x / mj::kWarp;
    const mj::GroupRouting gr = {kNGroup, kTopkGroup, kRoutedScaling};
    for (long long t = warp; t < p.num_tokens; t += MJ_SIMT_OFFSETS_THREADS / mj::kWarp)
        mj::route_token<kRouting, kLogitsDtype, kMaxE>(p, t, dim<kPinnedExperts>(p.num_experts),
                                                       dim<kPinnedTopk>(p.topk), lane, gr);
    __syncthreads();
    mj::expert_offsets<MJ_MMA_SMALL_BT>(p);
    __syncthreads();
    for (long long i = threadIdx.x; i < p.num_pairs; i += MJ_SIMT_OFFSETS_THREADS) mj::scatter_pair(p, i);
}
