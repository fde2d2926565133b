// This file contains the routing a decode GEMM1 block does for itself when the batch has at
// most MJ_MMA_ROUTED_GEMM1_MAX_TOKENS tokens (common/mma_params.h): every block of
// mj_gemm1_act_small_routed routes all T tokens (a warp per token, route.cuh) and derives its
// own row tile, so neither a routing kernel nor an L2 round trip for the tile table and the
// row list stands between the start of the layer and the block's first weight load.
//
// Why the tile follows from the routing alone: with T <= MJ_MMA_SMALL_BT no expert has more
// rows than one row tile holds, so the row tiles are the routed local experts in increasing
// order, one tile each. Block tile b is the b-th set bit of the block's bitmask of routed
// experts; its rows are the pairs routed to that expert, in pair order; its first row is the
// number of pairs routed to lower experts. That is the row list and tile table the offsets
// and scatter stages build (up to the order of rows inside an expert, which changes no
// output bit: permute.cuh), computed identically in every block.
//
// What the rest of the chain reads is published once: the blocks of the first column tile
// write their tile's entry of ws_tiles (expert −1 past the real tiles) and its rows of
// ws_rows, for GEMM2; block 0 writes ws_ids and ws_weights, for finalize. GEMM2 and finalize
// read them after griddepcontrol.wait, i.e. after this grid has completed. Before the batch-1
// GEMM2 + finalize (mma_gemm2.cuh), which routes the token itself, nothing is published.
#pragma once

#include "common/grid_dep.cuh"
#include "common/mma_params.h"
#include "common/params.h"
#include "common/types.cuh"
#include "permute.cuh"
#include "route.cuh"

namespace mj {

static_assert(MJ_MMA_ROUTED_GEMM1_MAX_TOKENS <= MJ_MMA_SMALL_BT,
              "one row tile per routed expert needs T <= the small path's row tile");
static_assert(MJ_SIMT_MAX_EXPERTS / 32 <= 32, "one warp scans the routed-expert bitmask, a word per lane");

// Before its wait, a decode layer's first kernel requests into L2 what its blocks read first:
// the routing's inputs (the router logits, deepseek_v3's bias; or the precomputed ids and
// weights) and the T tokens' rows of x (16-bit: the tensor-core dtypes). common/grid_dep.cuh
// says why this is safe before the wait.
template <Routing kRouting, Dtype kLogits>
__device__ __forceinline__ void prefetch_decode_inputs(const mj_layer_params &p, int E, int H)
{
    const long long T = p.num_tokens;
    if constexpr (kRouting == Routing::precomputed) {
        prefetch_l2_spread(p.topk_ids, p.num_pairs * 4);
        prefetch_l2_spread(p.topk_weights, p.num_pairs * 4);
    } else {
        prefetch_l2_spread(p.router_logits, T * E * (kLogits == Dtype::fp32 ? 4 : 2));
        if constexpr (kRouting == Routing::deepseek_v3) prefetch_l2_spread(p.routing_bias, E * 4ll);
    }
    prefetch_l2_spread(p.x, T * H * 2);
}

// Shared memory of a block that routes for itself.
struct DecodeRouting {
    int ids[MJ_MMA_ROUTED_GEMM1_MAX_TOKENS * MJ_SIMT_MAX_TOPK]; // local id of each pair, or −1
    u32 routed[MJ_SIMT_MAX_EXPERTS / 32];                      // bit e: local expert e has rows
    int rows[MJ_MMA_SMALL_BT];                                  // pair index of each row of the tile
    int expert, row0, nrows;                                    // the block's tile (expert −1: none)
};

// Routes the batch and finds row tile b; false (in every thread) when b is past the real
// tiles. publish_tile: write ws_tiles[b] and the tile's ws_rows; publish_routing: write
// ws_ids and ws_weights. Called by the whole block (it synchronises); T <= the bound above.
template <Routing kRouting, Dtype kLogits, int kMaxE>
__device__ __forceinline__ bool route_decode_tile(const mj_layer_params &p, int E, int k, const GroupRouting &gr,
                                                  int b, bool publish_tile, bool publish_routing,
                                                  DecodeRouting &s, RowTile *out)
{
    constexpr int kWords = MJ_SIMT_MAX_EXPERTS / 32;
    const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
    for (int w = threadIdx.x; w < kWords; w += blockDim.x) s.routed[w] = 0u;
    for (i64 t = warp; t < p.num_tokens; t += warps)
        route_token<kRouting, kLogits, kMaxE>(p, t, E, k, lane, gr, nullptr, s.ids, publish_routing);
    __syncthreads();
    const int pairs = static_cast<int>(p.num_pairs);
    for (int i = threadIdx.x; i < pairs; i += blockDim.x) {
        const int e = s.ids[i];
        if (e >= 0) atomicOr(&s.routed[e / 32], 1u << (e % 32));
    }
    __syncthreads();
    if (warp == 0) {
        // the b-th routed expert: a warp scan of the words' popcounts finds its word
        const u32 word = lane < kWords ? s.routed[lane] : 0u;
        const int n = __popc(word);
        int incl = n;
        for (int off = 1; off < kWarp; off <<= 1) {
            const int v = __shfl_up_sync(kFullMask, incl, off);
            if (lane >= off) incl += v;
        }
        const bool here = b >= incl - n && b < incl;
        u32 w = word;
        if (here)
            for (int j = incl - n; j < b; ++j) w &= w - 1; // drop the lower set bits
        const u32 owner = __ballot_sync(kFullMask, here);
        const int expert = owner ? __shfl_sync(kFullMask, lane * 32 + __ffs(w) - 1, __ffs(owner) - 1) : -1;
        // its rows in pair order, and the pairs of lower experts before them
        int row0 = 0, nrows = 0;
        if (expert >= 0) {
            for (int i0 = 0; i0 < pairs; i0 += kWarp) {
                const int i = i0 + lane;
                const int e = i < pairs ? s.ids[i] : -1;
                row0 += __popc(__ballot_sync(kFullMask, e >= 0 && e < expert));
                const u32 same = __ballot_sync(kFullMask, e == expert);
                const int at = nrows + __popc(same & ((1u << lane) - 1u));
                if (e == expert && at < MJ_MMA_SMALL_BT) s.rows[at] = i; // see below
                nrows += __popc(same);
            }
        }
        // A selection never takes an expert twice for one token, so nrows <= T <= BT; only
        // precomputed ids could repeat one, and the launcher never sends those here.
        if (nrows > MJ_MMA_SMALL_BT) nrows = MJ_MMA_SMALL_BT;
        if (lane == 0) {
            s.expert = expert;
            s.row0 = row0;
            s.nrows = nrows;
        }
        __syncwarp();
        if (publish_tile) {
            if (lane == 0) reinterpret_cast<TileEntry *>(p.ws_tiles)[b] = TileEntry{expert, row0, nrows, 0};
            if (lane < nrows) reinterpret_cast<int *>(p.ws_rows)[row0 + lane] = s.rows[lane];
        }
    }
    __syncthreads();
    if (s.expert < 0) return false;
    out->expert = s.expert;
    out->row0 = s.row0;
    out->rows = s.nrows;
    return true;
}

} // namespace mj
