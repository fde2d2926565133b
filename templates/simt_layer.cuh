// This file contains the extern "C" entry kernels of the simt layer, one per stage, in
// launch order (common/params.h lists the same names for the host):
//
//   mj_route           grid ceil(T/8) x 256      one warp per token
//   mj_expert_offsets  grid 1 x 512              one thread per local expert
//   mj_scatter         grid ceil(T·k/256) x 256  one thread per (token, slot)
//   mj_gemm1_act       grid (max_tiles, ceil(I/BLOCK_N)) x 256
//   mj_gemm2           grid (max_tiles, ceil(H/BLOCK_N)) x 256
//   mj_finalize        grid T x 128              one block per token
//
// The generated source defines namespace mj::cfg before including this file:
//   kDtype, kLogitsDtype (mj::Dtype), kActKind (ABI int), kGated, kActParam0..2 (float),
//   kActPresent0..2 (bool), kRouting (mj::Routing), kPinnedHidden/Inter/Experts/Topk
//   (0 = runtime), BLOCK_M, BLOCK_N, BLOCK_K.
// Every kernel takes the parameter struct by value as a __grid_constant__ (no local copy).
#pragma once

#include "act.cuh"
#include "common/params.h"
#include "common/types.cuh"
#include "finalize.cuh"
#include "permute.cuh"
#include "route.cuh"
#include "simt_gemm1_act.cuh"
#include "simt_gemm2.cuh"

namespace mj {
namespace layer {

using namespace mj::cfg;

static_assert(kDtype == Dtype::bf16 || kDtype == Dtype::fp16, "the simt layer computes in bf16 or fp16");
static_assert(act_is_known(kActKind), "kActKind must be an activation ABI number of the contract");
static_assert(act_is_gated(kActKind) == kGated, "kGated must match the activation kind");
static_assert(kPinnedExperts >= 0 && kPinnedExperts <= MJ_SIMT_MAX_EXPERTS, "a pinned E must be in 1..512");
static_assert(kPinnedTopk >= 0 && kPinnedTopk <= MJ_SIMT_MAX_TOPK, "a pinned k must be in 1..32");
static_assert(kPinnedHidden % 8 == 0 && kPinnedInter % 8 == 0, "pinned H and I must be multiples of 8");
static_assert(kPinnedTopk == 0 || kPinnedExperts == 0 || kPinnedTopk <= kPinnedExperts,
              "a pinned k may not exceed a pinned E");

// A pinned dimension is a compile-time constant the compiler folds; 0 means "from params".
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

} // namespace layer
} // namespace mj

extern "C" __global__ void __launch_bounds__(MJ_SIMT_ROUTE_THREADS)
mj_route(const __grid_constant__ mj_layer_params p)
{
    using namespace mj::layer;
    const int lane = threadIdx.x % mj::kWarp;
    const long long t = static_cast<long long>(blockIdx.x) * mj::kRouteWarpsPerBlock + threadIdx.x / mj::kWarp;
    if (t >= p.num_tokens) return; // warp-uniform: the whole warp leaves together
    mj::route_token<kRouting, kLogitsDtype, kMaxE>(p, t, dim<kPinnedExperts>(p.num_experts),
                                                   dim<kPinnedTopk>(p.topk), lane);
}

extern "C" __global__ void __launch_bounds__(MJ_SIMT_OFFSETS_THREADS)
mj_expert_offsets(const __grid_constant__ mj_layer_params p)
{
    mj::expert_offsets<mj::cfg::BLOCK_M>(p);
}

extern "C" __global__ void __launch_bounds__(MJ_SIMT_SCATTER_THREADS)
mj_scatter(const __grid_constant__ mj_layer_params p)
{
    const long long i = static_cast<long long>(blockIdx.x) * MJ_SIMT_SCATTER_THREADS + threadIdx.x;
    if (i < p.num_pairs) mj::scatter_pair(p, i);
}

extern "C" __global__ void __launch_bounds__(MJ_SIMT_GEMM_THREADS)
mj_gemm1_act(const __grid_constant__ mj_layer_params p)
{
    using namespace mj::layer;
    mj::gemm1_act<kDtype, kActKind, BLOCK_M, BLOCK_N, BLOCK_K>(
        p, act_params(), dim<kPinnedHidden>(p.hidden), dim<kPinnedInter>(p.inter), dim<kPinnedTopk>(p.topk));
}

extern "C" __global__ void __launch_bounds__(MJ_SIMT_GEMM_THREADS)
mj_gemm2(const __grid_constant__ mj_layer_params p)
{
    using namespace mj::layer;
    mj::gemm2<kDtype, BLOCK_M, BLOCK_N, BLOCK_K>(p, dim<kPinnedHidden>(p.hidden), dim<kPinnedInter>(p.inter));
}

extern "C" __global__ void __launch_bounds__(MJ_SIMT_FINALIZE_THREADS)
mj_finalize(const __grid_constant__ mj_layer_params p)
{
    using namespace mj::layer;
    static_assert(MJ_SIMT_FINALIZE_THREADS >= MJ_SIMT_MAX_TOPK, "finalize loads one slot per thread");
    mj::finalize_token<kDtype, kMaxK>(p, static_cast<long long>(blockIdx.x), dim<kPinnedHidden>(p.hidden),
                                      dim<kPinnedTopk>(p.topk));
}
