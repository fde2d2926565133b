// This file contains the extern "C" entry kernels of the simt layer, one per stage, in
// launch order (common/params.h lists the kernel table, whose order differs: the fp8 stages
// were appended after the six every layer has):
//
//   mj_route           grid ceil(T/8) x 256      one warp per token
//   mj_expert_offsets  grid 1 x 512              one thread per local expert
//   mj_scatter         grid ceil(T·k/2048) x 256 eight (token, slot) pairs per thread
//   mj_x_amax          grid <= 2048 x 256        fp8 per-tensor only: amax|x|
//   mj_x_quant         grid T x 256              fp8 only (not static): x -> e4m3, scales
//   mj_gemm1_act       grid (max_tiles, ceil(I/BLOCK_N)) x 256
//   mj_inter_amax      grid <= 2048 x 256        fp8 per-tensor only: amax|intermediate|
//   mj_inter_quant     grid T·k x 256            fp8 only: intermediate -> e4m3, scales
//   mj_gemm2           grid (max_tiles, ceil(H/BLOCK_N)) x 256
//   mj_finalize        grid (T, H/512) x 128     a block per token and 512 columns
//
// The generated source defines namespace mj::cfg before including this file:
//   kDtype, kLogitsDtype (mj::Dtype), kQuant (mj::Quant), kFp8Act (mj::Fp8Act),
//   kInt4Group (int), kInt4Zero (bool), kW1Layout (mj::W1Layout), kHasB1, kHasB2 (bool),
//   kActKind (ABI int), kGated, kActNParams (int), kActParam0..2 (float),
//   kActPresent0..2 (bool), kRouting (mj::Routing), kNGroup, kTopkGroup (int),
//   kRoutedScaling (float), kPinnedHidden/Inter/Experts/Topk (0 = runtime), BLOCK_M,
//   BLOCK_N, BLOCK_K.
// Every kernel takes the parameter struct by value as a __grid_constant__ (no local copy).
// The fp8 stages of a layer without fp8 activations compile to empty bodies (launch.c does
// not launch them), so every layer has the same kernel list.
#pragma once

#include "act.cuh"
#include "common/layer_config.cuh"
#include "common/params.h"
#include "common/types.cuh"
#include "finalize.cuh"
#include "permute.cuh"
#include "quant_act.cuh"
#include "route.cuh"
#include "simt_gemm1_act.cuh"
#include "simt_gemm2.cuh"

namespace mj {
namespace layer {

using namespace mj::cfg;
using namespace mj::layer_cfg;

static_assert(kQuant != Quant::bf16 || kDtype == Dtype::bf16, "quant bf16 has bf16 activations");
static_assert(kQuant != Quant::fp16 || kDtype == Dtype::fp16, "quant fp16 has fp16 activations");
static_assert(kQuant != Quant::w4a16 || kInt4Group == 32 || kInt4Group == 64 || kInt4Group == 128,
              "the int4 group is 32, 64 or 128");
static_assert(kQuant == Quant::w4a16 || !kInt4Zero, "only w4a16 has zero points");
static_assert(kQuant == Quant::fp8_tensor || kFp8Act == Fp8Act::tensor,
              "fp8_act applies to fp8_tensor only");
static_assert(kActNParams >= 0 && kActNParams <= 3, "an activation has at most 3 parameters");
static_assert(kActNParams == mj::act_n_params(kActKind), "kActNParams must be the activation's parameter count (act.cuh)");
static_assert(kRouting != Routing::deepseek_v3 ||
                  (kNGroup >= 1 && kTopkGroup >= 1 && kTopkGroup <= kNGroup && kNGroup <= MJ_SIMT_MAX_EXPERTS),
              "deepseek_v3 needs 1 <= topk_group <= n_group <= 512");
static_assert(kRouting != Routing::llama4 || kPinnedTopk == 0 || kPinnedTopk == 1, "llama4 routes top-1");
static_assert(kQuant != Quant::fp8_block || (kPinnedHidden % MJ_FP8_BLOCK == 0 && kPinnedInter % MJ_FP8_BLOCK == 0),
              "fp8_block needs pinned H and I multiples of 128");

// Minimum resident blocks per SM promised to ptxas for the GEMMs: 0 leaves its default (64
// registers for 256 threads) for 16-bit weights; the dequantizing loaders of the other
// formats get up to 80 registers (3 blocks), or 128 (2 blocks) with the 64-row tile's larger
// accumulator, which they need to stay free of spills (ptxas would otherwise spill around
// the division calls of SiTU's epilogue, for example).
constexpr int kGemmMinBlocks = (kQuant == Quant::bf16 || kQuant == Quant::fp16) ? 0 : BLOCK_M >= 64 ? 2 : 3;

} // namespace layer
} // namespace mj

extern "C" __global__ void __launch_bounds__(MJ_SIMT_ROUTE_THREADS)
mj_route(const __grid_constant__ mj_layer_params p)
{
    using namespace mj::layer;
    const int lane = threadIdx.x % mj::kWarp;
    const long long t = static_cast<long long>(blockIdx.x) * mj::kRouteWarpsPerBlock + threadIdx.x / mj::kWarp;
    if (t >= p.num_tokens) return; // warp-uniform: the whole warp leaves together
    const mj::GroupRouting gr = {kNGroup, kTopkGroup, kRoutedScaling};
    mj::route_token<kRouting, kLogitsDtype, kMaxE>(p, t, dim<kPinnedExperts>(p.num_experts),
                                                   dim<kPinnedTopk>(p.topk), lane, gr,
                                                   mj::route_counts_copy(p, blockIdx.x));
}

extern "C" __global__ void __launch_bounds__(MJ_SIMT_OFFSETS_THREADS)
mj_expert_offsets(const __grid_constant__ mj_layer_params p)
{
    mj::expert_offsets<mj::cfg::BLOCK_M>(p);
}

extern "C" __global__ void __launch_bounds__(MJ_SIMT_SCATTER_THREADS)
mj_scatter(const __grid_constant__ mj_layer_params p)
{
    mj::scatter_block(p, blockIdx.x);
}

extern "C" __global__ void __launch_bounds__(MJ_SIMT_AMAX_THREADS)
mj_x_amax(const __grid_constant__ mj_layer_params p)
{
    using namespace mj::layer;
    mj::x_amax<kDtype, kQuant, kFp8Act>(p, dim<kPinnedHidden>(p.hidden));
}

extern "C" __global__ void __launch_bounds__(MJ_SIMT_QUANT_THREADS)
mj_x_quant(const __grid_constant__ mj_layer_params p)
{
    using namespace mj::layer;
    mj::x_quant<kDtype, kQuant, kFp8Act>(p, static_cast<long long>(blockIdx.x), dim<kPinnedHidden>(p.hidden));
}

extern "C" __global__ void __launch_bounds__(MJ_SIMT_GEMM_THREADS, mj::layer::kGemmMinBlocks)
mj_gemm1_act(const __grid_constant__ mj_layer_params p)
{
    using namespace mj::layer;
    mj::gemm1_act<kDtype, kQuant, kInt4Group, kInt4Zero, kW1Layout, kHasB1, kActKind, kActNParams, BLOCK_M,
                  BLOCK_N, BLOCK_K>(p, act_params(), kFp8Act, dim<kPinnedHidden>(p.hidden),
                                    dim<kPinnedInter>(p.inter), dim<kPinnedTopk>(p.topk));
}

extern "C" __global__ void __launch_bounds__(MJ_SIMT_AMAX_THREADS)
mj_inter_amax(const __grid_constant__ mj_layer_params p)
{
    using namespace mj::layer;
    mj::inter_amax<kDtype, kQuant, kFp8Act>(p, dim<kPinnedInter>(p.inter));
}

extern "C" __global__ void __launch_bounds__(MJ_SIMT_QUANT_THREADS)
mj_inter_quant(const __grid_constant__ mj_layer_params p)
{
    using namespace mj::layer;
    mj::inter_quant<kDtype, kQuant, kFp8Act>(p, static_cast<long long>(blockIdx.x), dim<kPinnedInter>(p.inter));
}

extern "C" __global__ void __launch_bounds__(MJ_SIMT_GEMM_THREADS, mj::layer::kGemmMinBlocks)
mj_gemm2(const __grid_constant__ mj_layer_params p)
{
    using namespace mj::layer;
    mj::gemm2<kDtype, kQuant, kInt4Group, kInt4Zero, kHasB2, BLOCK_M, BLOCK_N, BLOCK_K>(
        p, kFp8Act == mj::Fp8Act::token, dim<kPinnedHidden>(p.hidden), dim<kPinnedInter>(p.inter));
}

extern "C" __global__ void __launch_bounds__(MJ_SIMT_FINALIZE_THREADS)
mj_finalize(const __grid_constant__ mj_layer_params p)
{
    using namespace mj::layer;
    mj::finalize_token<kDtype, kMaxK, /*kYInDtype=*/false>(p, static_cast<long long>(blockIdx.x),
                                                           static_cast<int>(blockIdx.y), dim<kPinnedHidden>(p.hidden),
                                                           dim<kPinnedTopk>(p.topk));
}
