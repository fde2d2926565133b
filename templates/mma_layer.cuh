// This file contains the extern "C" entry kernels of the `mma` layer (warp-level tensor
// cores, sm_80 and newer), in the order of common/mma_params.h. Route, scatter and finalize
// are the simt stages unchanged (same mj_layer_params, same workspace); each GEMM path has
// its own expert-offsets kernel because the row-tile size differs:
//
//   mj_route                 grid ceil(T/8) x 256     one warp per token
//   mj_expert_offsets        grid 1 x 512             row tiles of 128 tokens (large path)
//   mj_scatter               grid ceil(T·k/256) x 256
//   mj_gemm1_act             grid n_tiles(I) · max_tiles x 256, dynamic smem MJ_MMA_LARGE_SMEM
//   mj_gemm2                 grid n_tiles(H) · max_tiles x 256
//   mj_finalize              grid T x 128
//   mj_expert_offsets_small  grid 1 x 512             row tiles of 16 tokens (small path)
//   mj_gemm1_act_small       grid max_tiles · n_tiles(I) x 128, dynamic smem MJ_MMA_SMALL_SMEM
//   mj_gemm2_small           grid max_tiles · n_tiles(H) x 128
//   mj_route_fused_small     grid 1 x 512             T <= 16: zero the counters, route (a warp
//                                                     per token), offsets, scatter; replaces
//                                                     the memset and the first three kernels
//
// The generated source defines namespace mj::cfg before including this file (the same names
// as for simt_layer.cuh): kDtype, kLogitsDtype, kActKind, kGated, kActParam0..2,
// kActPresent0..2, kRouting, kNGroup, kTopkGroup, kRoutedScaling (route.cuh's grouping),
// kPinnedHidden/Inter/Experts/Topk (0 = runtime).
#pragma once

#include "act.cuh"
#include "common/mma_params.h"
#include "common/params.h"
#include "common/types.cuh"
#include "finalize.cuh"
#include "mma_gemm1_act.cuh"
#include "mma_gemm2.cuh"
#include "permute.cuh"
#include "route.cuh"

namespace mj {
namespace mma_layer {

using namespace mj::cfg;

static_assert(kDtype == Dtype::bf16 || kDtype == Dtype::fp16, "the mma layer computes in bf16 or fp16");
static_assert(act_is_known(kActKind), "kActKind must be an activation ABI number of the contract");
static_assert(act_is_gated(kActKind) == kGated, "kGated must match the activation kind");
static_assert(kPinnedExperts >= 0 && kPinnedExperts <= MJ_SIMT_MAX_EXPERTS, "a pinned E must be in 1..512");
static_assert(kPinnedTopk >= 0 && kPinnedTopk <= MJ_SIMT_MAX_TOPK, "a pinned k must be in 1..32");
static_assert(kPinnedHidden % 8 == 0 && kPinnedInter % 8 == 0, "pinned H and I must be multiples of 8");

template <int kPinned>
__device__ __forceinline__ int dim(int runtime_value) { return kPinned ? kPinned : runtime_value; }

constexpr int kMaxE = kPinnedExperts ? kPinnedExperts : MJ_SIMT_MAX_EXPERTS;
constexpr int kMaxK = kPinnedTopk ? kPinnedTopk : MJ_SIMT_MAX_TOPK;

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

} // namespace mma_layer
} // namespace mj

// 128-byte alignment keeps the XOR swizzle aligned with the 32 banks.
extern __shared__ __align__(128) unsigned char mj_mma_smem[];

extern "C" __global__ void __launch_bounds__(MJ_SIMT_ROUTE_THREADS)
mj_route(const __grid_constant__ mj_layer_params p)
{
    using namespace mj::mma_layer;
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
    mj::expert_offsets<MJ_MMA_LARGE_BM>(p);
}

extern "C" __global__ void __launch_bounds__(MJ_SIMT_SCATTER_THREADS)
mj_scatter(const __grid_constant__ mj_layer_params p)
{
    const long long i = static_cast<long long>(blockIdx.x) * MJ_SIMT_SCATTER_THREADS + threadIdx.x;
    if (i < p.num_pairs) mj::scatter_pair(p, i);
}

// (256, 2): two CTAs per SM (2 x 96 KB of stages), so one CTA's epilogue and prologue hide
// behind the other's mainloop; caps registers at 128 per thread.
extern "C" __global__ void __launch_bounds__(MJ_MMA_LARGE_THREADS, 2)
mj_gemm1_act(const __grid_constant__ mj_layer_params p)
{
    using namespace mj::mma_layer;
    mj::gemm1_act_large<kDtype, kActKind>(p, act_params(), dim<kPinnedHidden>(p.hidden),
                                          dim<kPinnedInter>(p.inter), dim<kPinnedTopk>(p.topk), mj_mma_smem);
}

extern "C" __global__ void __launch_bounds__(MJ_MMA_LARGE_THREADS, 2)
mj_gemm2(const __grid_constant__ mj_layer_params p)
{
    using namespace mj::mma_layer;
    mj::gemm2_large<kDtype>(p, dim<kPinnedHidden>(p.hidden), dim<kPinnedInter>(p.inter), mj_mma_smem);
}

extern "C" __global__ void __launch_bounds__(MJ_SIMT_FINALIZE_THREADS)
mj_finalize(const __grid_constant__ mj_layer_params p)
{
    using namespace mj::mma_layer;
    mj::finalize_token<kDtype, kMaxK>(p, static_cast<long long>(blockIdx.x), dim<kPinnedHidden>(p.hidden),
                                      dim<kPinnedTopk>(p.topk));
}

extern "C" __global__ void __launch_bounds__(MJ_SIMT_OFFSETS_THREADS)
mj_expert_offsets_small(const __grid_constant__ mj_layer_params p)
{
    mj::expert_offsets<MJ_MMA_SMALL_BT>(p);
}

extern "C" __global__ void __launch_bounds__(MJ_MMA_SMALL_THREADS)
mj_gemm1_act_small(const __grid_constant__ mj_layer_params p)
{
    using namespace mj::mma_layer;
    mj::gemm1_act_small<kDtype, kActKind>(p, act_params(), dim<kPinnedHidden>(p.hidden),
                                          dim<kPinnedInter>(p.inter), dim<kPinnedTopk>(p.topk), mj_mma_smem);
}

extern "C" __global__ void __launch_bounds__(MJ_MMA_SMALL_THREADS)
mj_gemm2_small(const __grid_constant__ mj_layer_params p)
{
    using namespace mj::mma_layer;
    mj::gemm2_small<kDtype>(p, dim<kPinnedHidden>(p.hidden), dim<kPinnedInter>(p.inter), mj_mma_smem);
}

// One block of 512 threads: the decode prologue in one launch. __syncthreads orders the
// block's global writes and atomics between the phases (all of them are this block's).
extern "C" __global__ void __launch_bounds__(MJ_SIMT_OFFSETS_THREADS)
mj_route_fused_small(const __grid_constant__ mj_layer_params p)
{
    using namespace mj::mma_layer;
    static_assert(MJ_MMA_FUSED_ROUTE_MAX_TOKENS <= MJ_SIMT_OFFSETS_THREADS / 32,
                  "the fused routing kernel routes one token per warp");
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
