// This file contains what the two tensor-core layers (mma_layer.cuh, wgmma_layer.cuh) share:
// the checks of the generated configuration, and every entry kernel but the two large-batch
// GEMMs — route, expert offsets (rows in tiles of the layer's MJ_TC_LARGE_BM), scatter, finalize, and the
// whole decode path (offsets in tiles of MJ_MMA_SMALL_BT, the swapped-operand small GEMMs and
// the fused routing kernel). Route, scatter and finalize are the simt stages (same
// mj_layer_params, same workspace), finalize reading y in the dtype, as the tensor-core
// GEMM2s store it (finalize.cuh). Each layer file adds its mj_gemm1_act and mj_gemm2, which
// use mj_tc_smem and the helpers of namespace mj::tc_layer.
//
// The generated source defines namespace mj::cfg before including the layer (the same names
// as for simt_layer.cuh): kDtype, kLogitsDtype, kActKind, kGated, kActParam0..2,
// kActPresent0..2, kRouting, kNGroup, kTopkGroup, kRoutedScaling (route.cuh's grouping),
// kPinnedHidden/Inter/Experts/Topk (0 = runtime); only where they differ from up_gate without
// biases or overrides, kW1Layout, kHasB1, kHasB2, kActOverrides (tc_defaults below); an fp8
// layer (wgmma only) also kQuant and kFp8Act, announced by MJ_TC_QUANT_FP8 (a 16-bit layer's
// source stays as it was).
#pragma once

#include "act.cuh"
#include "common/grid_dep.cuh"
#include "common/layer_config.cuh"
#include "common/mma_params.h"
#include "common/params.h"
#include "common/tc_modules.h"
#include "common/types.cuh"
#include "decode_persistent.cuh"
#include "decode_route.cuh"
#include "finalize.cuh"
#include "mma_gemm1_act.cuh"
#include "mma_gemm2.cuh"
#include "permute.cuh"
#include "route.cuh"
#include "tc_fp8_quant.cuh"
#include "weight_layout.cuh"

#ifndef MJ_TC_LARGE_BM
#error "a tensor-core layer defines MJ_TC_LARGE_BM (its large GEMMs' rows per tile) before including this file"
#endif

namespace mj {

// The W1 layout and biases a generated source implies when it names none of them: the code
// generator writes them only where they differ, so that a plain layer's source, hence its key
// and its cubin, stays what it was. Qualified lookup in mj::cfg finds cfg's own constant
// first and these only where cfg has none.
namespace tc_defaults {
constexpr W1Layout kW1Layout = W1Layout::up_gate;
constexpr bool kHasB1 = false;
constexpr bool kHasB2 = false;
constexpr bool kActOverrides = false;
} // namespace tc_defaults
namespace cfg {
using namespace mj::tc_defaults;
} // namespace cfg

namespace tc_layer {

using namespace mj::cfg;
using namespace mj::layer_cfg;

// The epilogue options of every GEMM of this layer (weight_layout.cuh).
using Extras = LayerExtras<cfg::kW1Layout, cfg::kHasB1, cfg::kHasB2, cfg::kActOverrides>;

#ifdef MJ_TC_QUANT_FP8
constexpr Quant kTcQuant = kQuant;
constexpr Fp8Act kTcFp8Act = kFp8Act;
#else
constexpr Quant kTcQuant = kDtype == Dtype::bf16 ? Quant::bf16 : Quant::fp16;
constexpr Fp8Act kTcFp8Act = Fp8Act::tensor;
#endif
// e4m3 weights: the layer runs the fp8 GEMMs of wgmma_fp8.cuh on every path, and its decode
// kernels (mma's 16-bit small tiles) are compiled empty and never launched (runtime/gemm_plan.c)
constexpr bool kTcFp8 = quant_fp8(kTcQuant);
static_assert(!kTcFp8 || kTcQuant == Quant::fp8_block || kTcQuant == Quant::fp8_tensor, "fp8: tensor or block");

} // namespace tc_layer
} // namespace mj

// Dynamic shared memory of the GEMM kernels. 1024-byte alignment is what wgmma's 128B swizzle
// needs (and more than the 128 bytes mma's XOR swizzle needs); the GEMMs have no static shared
// memory, so their dynamic window starts at offset 0. NOTE: ptxas rounds the static shared
// memory of the small kernels that have some (offsets, finalize) up to 1024 bytes because of
// this declaration; they run one or few blocks per SM, so it costs no occupancy that matters.
extern __shared__ __align__(1024) unsigned char mj_tc_smem[];

// The decode GEMMs of the layer's weight format (the chain's and the persistent layer's):
// 16-bit, or 4-bit where the layer header (mma_w4_layer.cuh) defines MJ_TC_W4 and the format
// mj::tc_layer::W4. The batch-1 GEMM2 + finalize and the persistent layer's shallow blocks are
// 16-bit only (4-bit, the shallow kernel spilled at the 128 registers ptxas gave it): a 4-bit
// plan never launches them (runtime/gemm_plan.c), so their 4-bit entries are empty, and the
// routed GEMM1 always publishes the tile table and routing its GEMM2 and finalize read.
#ifdef MJ_TC_W4
#define MJ_TC_GEMM1_ACT_SMALL(...) mj::w4_gemm1_act_small<kDtype, W4, kActKind, MJ_W4_SMALL_STAGES, Extras>(__VA_ARGS__)
#define MJ_TC_GEMM2_SMALL(...) mj::w4_gemm2_small<kDtype, W4, Extras>(__VA_ARGS__)
#define MJ_TC_16BIT_ONLY(p) return
#define MJ_TC_T1_BUILT false
#define MJ_TC_DECODE_GEMMS(stages) mj::W4DecodeGemms<kDtype, W4Lean, kActKind, stages, Extras>
// their blocks per SM as a bound: without it ptxas aimed at more and spilled (the routed GEMM1
// at 7); the persistent layer's depends on the SM's shared memory and the format
// (MJ_W4_DECODE_BLOCKS_PER_SM)
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 900 || __CUDA_ARCH__ == 1000)
#define MJ_TC_BIG_SM 1
#else
#define MJ_TC_BIG_SM 0
#endif
#define MJ_TC_DECODE_BOUNDS                                                                                  \
    MJ_MMA_SMALL_THREADS,                                                                                    \
        MJ_W4_DECODE_BLOCKS_PER_SM(MJ_TC_BIG_SM, mj::tc_layer::kInt4Zero, mj::tc_layer::kQuant == mj::Quant::mxfp4, \
                                   mj::tc_layer::kDtype == mj::Dtype::fp16)
#define MJ_TC_SMALL_BOUNDS MJ_MMA_SMALL_THREADS, MJ_W4_SMALL_BLOCKS_PER_SM
#define MJ_TC_DECODE_STAGES MJ_W4_DECODE_STAGES
#else
#define MJ_TC_GEMM1_ACT_SMALL(...) mj::gemm1_act_small<kDtype, kActKind, MJ_MMA_SMALL_STAGES, Extras>(__VA_ARGS__)
#define MJ_TC_GEMM2_SMALL(...) mj::gemm2_small<kDtype, Extras>(__VA_ARGS__)
#define MJ_TC_16BIT_ONLY(p) (void)0
#define MJ_TC_T1_BUILT true
#define MJ_TC_DECODE_GEMMS(stages) mj::DecodeGemms16<kDtype, kActKind, stages, Extras>
#define MJ_TC_DECODE_BOUNDS MJ_MMA_SMALL_THREADS
#define MJ_TC_SMALL_BOUNDS MJ_MMA_SMALL_THREADS
#define MJ_TC_DECODE_STAGES MJ_MMA_DECODE_STAGES
#endif


#if MJ_TC_BUILDS(MJ_TC_BIT_ROUTE)
extern "C" __global__ void __launch_bounds__(MJ_SIMT_ROUTE_THREADS)
mj_route(const __grid_constant__ mj_layer_params p)
{
    mj::grid_dep_enter();
    using namespace mj::tc_layer;
    if (MJ_ROUTE_ZEROES_COUNTERS(p.num_tokens)) { // no memset before this forward (common/params.h)
        int *const copy = mj::route_counts_copy(p, blockIdx.x), *const cursors = reinterpret_cast<int *>(p.ws_cursors);
        for (int e = threadIdx.x; e < p.num_local_experts; e += blockDim.x) {
            copy[e] = 0;
            if (blockIdx.x == 0) cursors[e] = 0; // read by the scatter kernel, two grids later
        }
        __syncthreads(); // the zeros before any warp of the block counts into them
    }
    const int lane = threadIdx.x % mj::kWarp;
    // fp8_block: the block's tokens' x quantized by all of its warps (tc_fp8_quant.cuh)
    if constexpr (kTcQuant == mj::Quant::fp8_block)
        mj::route_quantize_x_blocks<kDtype>(p, dim<kPinnedHidden>(p.hidden), threadIdx.x / mj::kWarp, lane);
    const long long t = static_cast<long long>(blockIdx.x) * mj::kRouteWarpsPerBlock + threadIdx.x / mj::kWarp;
    if (t >= p.num_tokens) return;
    const mj::GroupRouting gr = {kNGroup, kTopkGroup, kRoutedScaling};
    mj::route_token<kRouting, kLogitsDtype, kMaxE>(p, t, dim<kPinnedExperts>(p.num_experts),
                                                   dim<kPinnedTopk>(p.topk), lane, gr,
                                                   mj::route_counts_copy(p, blockIdx.x));
    if constexpr (kTcQuant == mj::Quant::fp8_tensor) { // x's amax or codes, the intermediate's amax words
        if constexpr (kTcFp8Act != mj::Fp8Act::static_scale)
            mj::route_quantize_x_row<kDtype, kTcFp8Act>(p, dim<kPinnedHidden>(p.hidden), t, lane);
        mj::route_zero_inter_amax<kTcFp8Act>(p, t, dim<kPinnedTopk>(p.topk), lane);
    }
}
#endif

#if MJ_TC_BUILDS(MJ_TC_BIT_LARGE | MJ_TC_BIT_PAIR)
extern "C" __global__ void __launch_bounds__(MJ_SIMT_OFFSETS_THREADS)
mj_expert_offsets(const __grid_constant__ mj_layer_params p)
{
    mj::grid_dep_enter();
    mj::offsets_stage<MJ_TC_LARGE_BM>(p);
}
#endif

#if MJ_TC_BUILDS(MJ_TC_BIT_ROUTE)
extern "C" __global__ void __launch_bounds__(MJ_SIMT_SCATTER_THREADS)
mj_scatter(const __grid_constant__ mj_layer_params p)
{
    mj::grid_dep_enter();
    using namespace mj::tc_layer;
    if constexpr (kTcQuant == mj::Quant::fp8_tensor && kTcFp8Act == mj::Fp8Act::tensor) {
        // launched at every T for x's quantization (tc_fp8_quant.cuh); it scatters where the
        // offsets kernel did not, in its first blocks (the grid may hold more)
        if (!MJ_OFFSETS_SCATTER(p.num_pairs) &&
            blockIdx.x < (p.num_pairs + MJ_SCATTER_PAIRS_PER_BLOCK - 1) / MJ_SCATTER_PAIRS_PER_BLOCK)
            mj::scatter_block(p, blockIdx.x);
        mj::scatter_quantize_x_tensor<kDtype>(p, dim<kPinnedHidden>(p.hidden));
    } else {
        mj::scatter_block(p, blockIdx.x);
    }
}
#endif

#if MJ_TC_BUILDS(MJ_TC_BIT_FINALIZE)
extern "C" __global__ void __launch_bounds__(MJ_SIMT_FINALIZE_THREADS)
mj_finalize(const __grid_constant__ mj_layer_params p)
{
    mj::grid_dep_enter();
    using namespace mj::tc_layer;
    const int H = dim<kPinnedHidden>(p.hidden), k = dim<kPinnedTopk>(p.topk);
    if (MJ_TC_FINALIZE_WIDE(p.num_tokens, H, p.gemm2_splits)) // the launch's grid follows the same rule
        mj::finalize_token<kDtype, kMaxK, /*kYInDtype=*/true, 8, Extras::kB2>(p, static_cast<long long>(blockIdx.x),
                                                                              static_cast<int>(blockIdx.y), H, k);
    else
        mj::finalize_token<kDtype, kMaxK, /*kYInDtype=*/true, 4, Extras::kB2>(p, static_cast<long long>(blockIdx.x),
                                                                              static_cast<int>(blockIdx.y), H, k);
}
#endif

#if MJ_TC_BUILDS(MJ_TC_BIT_SMALL)
extern "C" __global__ void __launch_bounds__(MJ_SIMT_OFFSETS_THREADS)
mj_expert_offsets_small(const __grid_constant__ mj_layer_params p)
{
    mj::grid_dep_enter();
    mj::offsets_stage<MJ_MMA_SMALL_BT>(p);
}
#endif

#if MJ_TC_BUILDS(MJ_TC_BIT_SMALL)
extern "C" __global__ void __launch_bounds__(MJ_TC_SMALL_BOUNDS)
mj_gemm1_act_small(const __grid_constant__ mj_layer_params p)
{
    if constexpr (mj::tc_layer::kTcFp8) return; // decode runs the fp8 GEMMs
    mj::grid_dep_wait(); // and grid_dep_launch after its mainloop (mma_gemm1_act.cuh)
    using namespace mj::tc_layer;
    const int bid = static_cast<int>(blockIdx.x);
    mj::RowTile tile;
    if (!mj::find_row_tile<MJ_MMA_SMALL_BT>(p, bid % p.max_tiles, &tile)) return;
    MJ_TC_GEMM1_ACT_SMALL(p, act_params(), dim<kPinnedHidden>(p.hidden), dim<kPinnedInter>(p.inter),
                          dim<kPinnedTopk>(p.topk), mj_tc_smem, tile,
                          reinterpret_cast<const int *>(p.ws_rows) + tile.row0, bid / p.max_tiles);
}
#endif

// The decode layer's first kernel at T <= MJ_MMA_ROUTED_GEMM1_MAX_TOKENS (not precomputed
// routing): every block routes the batch itself and derives its row tile (decode_route.cuh),
// so the layer is three launches: this, mj_gemm2_small, mj_finalize (or two: this and
// mj_gemm2_finalize_t1).
#if MJ_TC_BUILDS(MJ_TC_BIT_ROUTED)
extern "C" __global__ void __launch_bounds__(MJ_TC_SMALL_BOUNDS)
mj_gemm1_act_small_routed(const __grid_constant__ mj_layer_params p)
{
    if constexpr (mj::tc_layer::kTcFp8) return; // decode runs the fp8 GEMMs
    using namespace mj::tc_layer;
    mj::prefetch_decode_inputs<kRouting, kLogitsDtype>(p, dim<kPinnedExperts>(p.num_experts),
                                                       dim<kPinnedHidden>(p.hidden));
    mj::grid_dep_wait(); // the forward's first kernel: waits for what the stream ran before
    // Before the batch-1 GEMM2 + finalize, whose blocks route for themselves and stream W2
    // before their wait (mma_gemm2.cuh), that grid may launch at once; before mj_gemm2_small,
    // only after the mainloop (mma_gemm1_act.cuh says why).
    const bool t1 = MJ_TC_T1_BUILT && MJ_MMA_T1_GEMM2_FINALIZE(p.num_tokens, p.gemm2_splits, dim<kPinnedTopk>(p.topk),
                                                               p.num_local_experts, dim<kPinnedExperts>(p.num_experts));
    if (t1) mj::grid_dep_launch();
    __shared__ mj::DecodeRouting routing;
    const int bid = static_cast<int>(blockIdx.x);
    const int b = bid % p.max_tiles, col_tile = bid / p.max_tiles;
    const mj::GroupRouting gr = {kNGroup, kTopkGroup, kRoutedScaling};
    mj::RowTile tile;
    // The tile table and the routing are published for mj_gemm2_small and mj_finalize; the
    // batch-1 GEMM2 + finalize reads neither (it routes for itself), so then nothing is written.
    if (!mj::route_decode_tile<kRouting, kLogitsDtype, kMaxE>(p, dim<kPinnedExperts>(p.num_experts),
                                                              dim<kPinnedTopk>(p.topk), gr, b, col_tile == 0 && !t1,
                                                              bid == 0 && !t1, routing, &tile))
        return;
    MJ_TC_GEMM1_ACT_SMALL(p, act_params(), dim<kPinnedHidden>(p.hidden), dim<kPinnedInter>(p.inter),
                          dim<kPinnedTopk>(p.topk), mj_tc_smem, tile, routing.rows, col_tile);
}
#endif

#if MJ_TC_BUILDS(MJ_TC_BIT_SMALL)
extern "C" __global__ void __launch_bounds__(MJ_TC_SMALL_BOUNDS)
mj_gemm2_small(const __grid_constant__ mj_layer_params p)
{
    if constexpr (mj::tc_layer::kTcFp8) return; // decode runs the fp8 GEMMs
    using namespace mj::tc_layer;
    mj::grid_dep_enter();
    MJ_TC_GEMM2_SMALL(p, dim<kPinnedHidden>(p.hidden), dim<kPinnedInter>(p.inter), mj_tc_smem);
}
#endif

// Batch 1 after mj_gemm1_act_small_routed, when the launcher says so (k = 8 or 6, GEMM2 not
// split): GEMM2 and finalize in one kernel, H / 8 blocks (mma_gemm2.cuh); two pipeline
// depths (common/mma_params.h: MJ_MMA_T1_SLOTS says which k takes which).
#if MJ_TC_BUILDS(MJ_TC_BIT_T1)
extern "C" __global__ void __launch_bounds__(MJ_MMA_SMALL_THREADS)
mj_gemm2_finalize_t1(const __grid_constant__ mj_layer_params p)
{
    if constexpr (mj::tc_layer::kTcFp8) return; // decode runs the fp8 GEMMs
    MJ_TC_16BIT_ONLY(p);
    using namespace mj::tc_layer;
    const mj::GroupRouting gr = {kNGroup, kTopkGroup, kRoutedScaling};
    mj::gemm2_finalize_t1<kDtype, MJ_MMA_T1_STAGES, MJ_MMA_T1_SMEM, kRouting, kLogitsDtype, kMaxE, Extras>(
        p, dim<kPinnedHidden>(p.hidden), dim<kPinnedInter>(p.inter), dim<kPinnedExperts>(p.num_experts),
        dim<kPinnedTopk>(p.topk), gr, mj_tc_smem);
}
#endif

#if MJ_TC_BUILDS(MJ_TC_BIT_T1_SHALLOW)
extern "C" __global__ void __launch_bounds__(MJ_MMA_SMALL_THREADS)
mj_gemm2_finalize_t1_shallow(const __grid_constant__ mj_layer_params p)
{
    if constexpr (mj::tc_layer::kTcFp8) return; // decode runs the fp8 GEMMs
    MJ_TC_16BIT_ONLY(p);
    using namespace mj::tc_layer;
    const mj::GroupRouting gr = {kNGroup, kTopkGroup, kRoutedScaling};
    mj::gemm2_finalize_t1<kDtype, MJ_MMA_T1_SHALLOW_STAGES, MJ_MMA_T1_SHALLOW_SMEM, kRouting, kLogitsDtype, kMaxE, Extras>(
        p, dim<kPinnedHidden>(p.hidden), dim<kPinnedInter>(p.inter), dim<kPinnedExperts>(p.num_experts),
        dim<kPinnedTopk>(p.topk), gr, mj_tc_smem);
}
#endif

// One block of 512 threads: the decode prologue in one launch. Counts, scatter cursors, row
// offsets and the slots' local ids stay in shared memory (the GEMMs read only the tile
// table, ws_rows and, in finalize, ws_ids/ws_weights), so no phase waits on an L2 round
// trip or a global atomic of the phase before. ws_counts and ws_cursors are left untouched.
#if MJ_TC_BUILDS(MJ_TC_BIT_FUSED)
extern "C" __global__ void __launch_bounds__(MJ_SIMT_OFFSETS_THREADS)
mj_route_fused_small(const __grid_constant__ mj_layer_params p)
{
    if constexpr (mj::tc_layer::kTcFp8) return; // decode runs the fp8 GEMMs
    using namespace mj::tc_layer;
    mj::prefetch_decode_inputs<kRouting, kLogitsDtype>(p, dim<kPinnedExperts>(p.num_experts),
                                                       dim<kPinnedHidden>(p.hidden));
    mj::grid_dep_enter();
    constexpr int kMaxTokens = 2 * (MJ_SIMT_OFFSETS_THREADS / 32); // at most two tokens per warp
    static_assert(MJ_MMA_FUSED_ROUTE_MAX_TOKENS <= kMaxTokens, "the fused routing kernel routes at most two tokens per warp");
    constexpr int kMaxPairs = kMaxTokens * MJ_SIMT_MAX_TOPK;
    __shared__ int counts[MJ_SIMT_MAX_EXPERTS], cursors[MJ_SIMT_MAX_EXPERTS], row0[MJ_SIMT_MAX_EXPERTS];
    __shared__ int ids[kMaxPairs];
    for (int e = threadIdx.x; e < p.num_local_experts; e += blockDim.x) {
        counts[e] = 0;
        cursors[e] = 0;
    }
    __syncthreads();
    const int lane = threadIdx.x % mj::kWarp, warp = threadIdx.x / mj::kWarp;
    const mj::GroupRouting gr = {kNGroup, kTopkGroup, kRoutedScaling};
    for (long long t = warp; t < p.num_tokens; t += MJ_SIMT_OFFSETS_THREADS / mj::kWarp)
        mj::route_token<kRouting, kLogitsDtype, kMaxE>(p, t, dim<kPinnedExperts>(p.num_experts),
                                                       dim<kPinnedTopk>(p.topk), lane, gr, counts, ids);
    __syncthreads();
    mj::expert_offsets<MJ_MMA_SMALL_BT>(p, counts, 1, row0);
    __syncthreads();
    for (long long i = threadIdx.x; i < p.num_pairs; i += MJ_SIMT_OFFSETS_THREADS)
        mj::scatter_pair(p, i, ids, cursors, row0);
}
#endif

// Batch 1, routing not precomputed (runtime/launch_mma.c says when): the persistent layer, two
// launches (decode_persistent.cuh).
#if MJ_TC_BUILDS(MJ_TC_BIT_PERSISTENT | MJ_TC_BIT_PERSISTENT_SHALLOW)
extern "C" __global__ void __launch_bounds__(MJ_MMA_DECODE_RESET_THREADS)
mj_decode_reset(const __grid_constant__ mj_layer_params p)
{
    if constexpr (mj::tc_layer::kTcFp8) return; // decode runs the fp8 GEMMs
    using namespace mj::tc_layer;
    mj::decode_reset(p, dim<kPinnedHidden>(p.hidden));
}
#endif

namespace mj {
namespace tc_layer {
template <int kStages>
__device__ __forceinline__ void decode_persistent_layer(const mj_layer_params &p)
{
    const GroupRouting gr = {kNGroup, kTopkGroup, kRoutedScaling};
    decode_persistent<kDtype, kActKind, kRouting, kLogitsDtype, kMaxE, kMaxK, kStages, MJ_TC_DECODE_GEMMS(kStages)>(
        p, act_params(), dim<kPinnedHidden>(p.hidden), dim<kPinnedInter>(p.inter), dim<kPinnedExperts>(p.num_experts),
        dim<kPinnedTopk>(p.topk), gr, mj_tc_smem);
}
} // namespace tc_layer
} // namespace mj

#if MJ_TC_BUILDS(MJ_TC_BIT_PERSISTENT)
extern "C" __global__ void __launch_bounds__(MJ_TC_DECODE_BOUNDS)
mj_decode_persistent(const __grid_constant__ mj_layer_params p)
{
    if constexpr (mj::tc_layer::kTcFp8) return; // decode runs the fp8 GEMMs
    mj::tc_layer::decode_persistent_layer<MJ_TC_DECODE_STAGES>(p);
}
#endif

// The same with MJ_MMA_DECODE_SHALLOW_STAGES, MJ_MMA_DECODE_SHALLOW_BLOCKS_PER_SM blocks per SM
// (runtime/gemm_plan.c: mj_gemm_plan_persistent_shallow says where).
#if MJ_TC_BUILDS(MJ_TC_BIT_PERSISTENT_SHALLOW)
extern "C" __global__ void __launch_bounds__(MJ_MMA_SMALL_THREADS)
mj_decode_persistent_shallow(const __grid_constant__ mj_layer_params p)
{
    if constexpr (mj::tc_layer::kTcFp8) return; // decode runs the fp8 GEMMs
    MJ_TC_16BIT_ONLY(p);
    mj::tc_layer::decode_persistent_layer<MJ_MMA_DECODE_SHALLOW_STAGES>(p);
}
#endif
