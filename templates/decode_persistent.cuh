// This file contains the persistent decode layer of batches up to MJ_MMA_PERSISTENT_MAX_TOKENS
// (common/mma_params.h): one grid does the routing, every GEMM1 tile, every GEMM2 tile and the
// finalize, its blocks taking work items from a queue in ws_counts, so that no kernel boundary
// (a grid's last wave draining while the next grid's blocks wait) stands between GEMM1 and
// GEMM2 and the weight stream never pauses.
//
// Why: at a few tokens the layer is a stream of the routed experts' weights, which the chain of
// two grids interrupts at GEMM1's last partial wave and GEMM2's ramp; at 2-8 tokens the chain
// adds a routing kernel. Here a block that finishes its last GEMM1 item takes a GEMM2 item at once and
// streams its W2 rows while other blocks finish GEMM1.
//
//   routing  every block routes the batch itself (route.cuh, a warp per token) into shared
//            memory: the pairs' local ids and weights, the row list (pairs grouped by expert)
//            and the row tiles: tile b is the b-th smallest routed local expert, all its rows
//            (at most T <= MJ_MMA_SMALL_BT: one tile each) — what the offsets and scatter
//            stages would build
//   items    0 .. n·C1 − 1: GEMM1 tile (b, column tile) of mma_gemm1_act.cuh's small path,
//            b slowest (C1 = ceil(I / intermediate columns per tile)); then n·S·C2 GEMM2
//            tiles (b, split, 64 columns of out) of mma_gemm2.cuh's small path (S: the K
//            splits of the layout, C2 = ceil(H / 64)); n = routed local experts
//   order    a GEMM2 item (b, split) waits (its gate, after its first W2 stages are requested:
//            mma_mainloop.cuh, run_gated) until the GEMM1 items of b that write its K range
//            have finished (a count per row tile and split: the expert-major GEMM1 order
//            finishes an expert's first splits first, so their GEMM2 items need not wait for
//            its last GEMM1 items); they precede every GEMM2 item in the queue, so each was
//            taken by a running block
//            before the waiting one took its item, and the lowest unfinished item can always
//            run: no deadlock whatever the grid size or how many blocks are resident
//   finalize the block that finishes the last of column tile c's n·S GEMM2 items sums out's
//            64 columns from y (finalize.cuh, y read from L2), in slot order as mj_finalize does
//
// Each tile is the same fixed MMA sequence as in the chain's kernels and the sum is
// finalize's, so out is bit for bit the three-kernel layer's (GEMM1, GEMM2, finalize) with the
// same K splits (its own rule picks them: common/mma_params.h), and every rerun the same.
//
// The sync words (MJ_MMA_DECODE_SYNC_WORDS, common/mma_params.h) are zeroed by mj_decode_reset,
// the forward's first kernel: [0] the queue's next item, [1, 1 + max_tiles · MJ_MMA_DECODE_SPLIT_MAX)
// the finished GEMM1 items per row tile and GEMM2 K split (b · S + split), then one count of
// finished GEMM2 items per 64-column tile of out.
#pragma once

#include "act.cuh"
#include "common/grid_dep.cuh"
#include "common/mma_params.h"
#include "common/params.h"
#include "common/ptx.cuh"
#include "common/types.cuh"
#include "decode_route.cuh"
#include "finalize.cuh"
#include "mma_gemm1_act.cuh"
#include "mma_gemm2.cuh"
#include "mma_mainloop.cuh"
#include "permute.cuh"
#include "route.cuh"
#include "weight_layout.cuh"

namespace mj {

// The gate of a GEMM2 item: one thread waits until *count reaches target (acquire), then the
// block synchronises, so every thread's later reads of the intermediate see the GEMM1 items'
// stores. The stores are ordered before the count by those items' __threadfence.
struct WaitForCount {
    static constexpr bool kWaits = true;
    const int *count;
    int target;
    __device__ __forceinline__ void operator()() const
    {
        if (threadIdx.x == 0)
            while (load_acquire(count) < target) __nanosleep(64);
        __syncthreads();
    }
};

// A block's routing of the batch and the work it is on (shared memory).
struct PersistentDecode {
    static constexpr int kPairs = MJ_MMA_PERSISTENT_MAX_TOKENS * MJ_SIMT_MAX_TOPK;
    int ids[kPairs];         // pair i's local expert, or -1 (ws_ids' values)
    float weights[kPairs];   // pair i's routing weight (ws_weights' values)
    int rows[kPairs];        // the row list: pair indices grouped by expert, in pair order
    int tile_expert[kPairs]; // row tile b's local expert
    int tile_row0[kPairs];   // its first position in rows (= its first intermediate row)
    int tile_rows[kPairs];   // its rows: pairs routed to that expert (<= T <= MJ_MMA_SMALL_BT)
    static constexpr int kRoutedWords = MJ_SIMT_MAX_EXPERTS / 32;
    u32 routed[kRoutedWords];           // bit e % 32 of word e / 32: local expert e has rows
    int tiles_below[kRoutedWords];      // routed local experts in the words before this one
    u32 tokens[MJ_SIMT_MAX_EXPERTS / 4]; // byte e % 4 of word e / 4: bit t, token t routes to e
    int tiles;               // n: routed local experts
    int next;                // the queue item this block takes next
    int finalizes;           // this block sums its GEMM2 item's columns
};

// The row list and the row tiles, as the offsets and scatter stages would build them
// (permute.cuh, up to the order of rows inside an expert, which changes no bit), from the
// batch's routing in s.ids: tile b is the b-th smallest routed local expert; its rows are its
// pairs in pair order, after the pairs of the lower experts. Returns n, the routed local
// experts (s.tiles). The expert sets (s.routed, s.tokens) start cleared.
__device__ __forceinline__ int decode_row_list(PersistentDecode &s, int k, int tid, int lane, int warp, int pairs)
{
    // A selection never takes an expert twice for one token (the launcher never sends
    // precomputed ids), so an expert's pairs are distinct tokens: a bit set per expert gives
    // each pair's rank among them and the expert's row count, and the set of routed experts
    // gives each expert's tile — a few barriers whatever the number of pairs, where counting
    // pair by pair grows with the pairs.
    static_assert(MJ_MMA_PERSISTENT_MAX_TOKENS <= 8, "a byte of token bits per expert");
    for (int i = tid; i < pairs; i += MJ_MMA_SMALL_THREADS) {
        const int e = s.ids[i];
        if (e < 0) continue;
        atomicOr(&s.routed[e / 32], 1u << (e % 32));
        atomicOr(&s.tokens[e / 4], (1u << (i / k)) << (e % 4 * 8));
    }
    __syncthreads();
    if (warp == 0) { // routed experts before each word (an exclusive scan), and n
        const int c = lane < PersistentDecode::kRoutedWords ? __popc(s.routed[lane]) : 0;
        int incl = c;
        for (int off = 1; off < kWarp; off <<= 1) {
            const int v = __shfl_up_sync(kFullMask, incl, off);
            if (lane >= off) incl += v;
        }
        if (lane < PersistentDecode::kRoutedWords) s.tiles_below[lane] = incl - c;
        if (lane == kWarp - 1) s.tiles = incl;
    }
    __syncthreads();
    // pair i's expert, tile, token bits and rank among that expert's pairs (-1: no local expert)
    auto pair_tile = [&](int i, int *tile, u32 *tokens, int *rank) {
        const int e = s.ids[i];
        if (e < 0) return -1;
        *tile = s.tiles_below[e / 32] + __popc(s.routed[e / 32] & ((1u << (e % 32)) - 1u));
        *tokens = (s.tokens[e / 4] >> (e % 4 * 8)) & 0xffu;
        *rank = __popc(*tokens & ((1u << (i / k)) - 1u));
        return e;
    };
    for (int i = tid; i < pairs; i += MJ_MMA_SMALL_THREADS) { // each expert's first pair: its tile
        int tile, rank;
        u32 tokens;
        const int e = pair_tile(i, &tile, &tokens, &rank);
        if (e < 0 || rank != 0) continue;
        s.tile_expert[tile] = e;
        s.tile_rows[tile] = __popc(tokens);
    }
    __syncthreads();
    if (warp == 0) { // a tile's first row: the rows of the tiles before it (n <= kPairs)
        int base = 0;
        for (int b0 = 0; b0 < s.tiles; b0 += kWarp) {
            const int b = b0 + lane, r = b < s.tiles ? s.tile_rows[b] : 0;
            int incl = r;
            for (int off = 1; off < kWarp; off <<= 1) {
                const int v = __shfl_up_sync(kFullMask, incl, off);
                if (lane >= off) incl += v;
            }
            if (b < s.tiles) s.tile_row0[b] = base + incl - r;
            base += __shfl_sync(kFullMask, incl, kWarp - 1);
        }
    }
    __syncthreads();
    for (int i = tid; i < pairs; i += MJ_MMA_SMALL_THREADS) {
        int tile, rank;
        u32 tokens;
        if (pair_tile(i, &tile, &tokens, &rank) >= 0) s.rows[s.tile_row0[tile] + rank] = i;
    }
    __syncthreads();
    return s.tiles;
}

// The 16-bit GEMMs of the persistent decode layer (Gemms below; the 4-bit ones are
// mma_w4_gemm.cuh's W4DecodeGemms).
template <Dtype D, int kAct, int kStages, class X = PlainLayer>
struct DecodeGemms16 {
    using Extras = X; // the epilogues' W1 layout, biases and overrides (weight_layout.cuh)
    __device__ __forceinline__ static void gemm1(const mj_layer_params &p, const ActParams &act, int H, int I, int k,
                                                 unsigned char *smem, const RowTile &tile, const int *rows, int c)
    {
        gemm1_act_small<D, kAct, kStages, X>(p, act, H, I, k, smem, tile, rows, c);
    }
    template <class Gate>
    __device__ __forceinline__ static void gemm2(const mj_layer_params &p, int H, int I, unsigned char *smem,
                                                 const RowTile &tile, const int *rows, int h0, int split, Gate gate)
    {
        gemm2_small_tile<D, kStages, Gate, X>(p, H, I, smem, tile, rows, h0, split, gate);
    }
};

// The persistent decode layer: routes the batch, builds its row list (decode_row_list), then
// takes work items from the queue until none is left: GEMM1 tiles, then GEMM2 tiles behind
// their gates, the last GEMM2 tile of a column range summing out there. kStages:
// MJ_MMA_DECODE_STAGES or MJ_MMA_DECODE_SHALLOW_STAGES (the pipeline depth of every tile);
// Gemms: the tiles' GEMMs (DecodeGemms16, or the 4-bit weights' W4DecodeGemms) and their Extras.
template <Dtype D, int kAct, Routing kRouting, Dtype kLogits, int kMaxE, int kMaxK, int kStages,
          class Gemms = DecodeGemms16<D, kAct, kStages>>
__device__ __forceinline__ void decode_persistent(const mj_layer_params &p, const ActParams &act, int H, int I,
                                                  int E, int k, const GroupRouting &gr, unsigned char *smem)
{
    constexpr int BW = MJ_MMA_SMALL_BW;
    constexpr int kCols1 = act_is_gated(kAct) ? BW / 2 : BW; // intermediate columns per GEMM1 item
    constexpr int kWarps = MJ_MMA_SMALL_THREADS / kWarp;
    static_assert(MJ_MMA_PERSISTENT_MAX_TOKENS <= MJ_MMA_SMALL_BT, "one row tile per routed expert");
    static_assert(BW / 4 <= MJ_MMA_SMALL_THREADS, "finalize: 4 columns per thread");
    __shared__ PersistentDecode s;
    const int tid = static_cast<int>(threadIdx.x), lane = tid % kWarp, warp = tid / kWarp;
    const int T = static_cast<int>(p.num_tokens), pairs = static_cast<int>(p.num_pairs);
    int *const queue = reinterpret_cast<int *>(p.ws_counts);
    int *const gemm1_done = queue + 1;
    int *const gemm2_done = gemm1_done + p.max_tiles * MJ_MMA_DECODE_SPLIT_MAX;

    // Placed while the forward before drains (mj_decode_reset lets this grid launch before it
    // waits itself): the first loads are requested into L2 meanwhile, and the expert sets of
    // the row list are cleared (shared memory only).
    prefetch_decode_inputs<kRouting, kLogits>(p, E, H);
    for (int w = tid; w < MJ_SIMT_MAX_EXPERTS / 4; w += MJ_MMA_SMALL_THREADS) s.tokens[w] = 0u;
    if (tid < PersistentDecode::kRoutedWords) s.routed[tid] = 0u;
    grid_dep_enter(); // mj_decode_reset zeroed the sync words (and the stream's earlier work is done)
    if (tid == 0) s.next = atomicAdd(queue, 1); // its round trip overlaps the routing
    for (int t = warp; t < T; t += kWarps)
        route_token<kRouting, kLogits, kMaxE>(p, t, E, k, lane, gr, nullptr, s.ids, false, s.weights);
    __syncthreads();
    const int n = decode_row_list(s, k, tid, lane, warp, pairs);
    if (n == 0) { // no slot on this rank: out is +0 (finalize's sum of nothing), written by all
        u16 *out = reinterpret_cast<u16 *>(p.out);
        for (long long c = static_cast<long long>(blockIdx.x) * MJ_MMA_SMALL_THREADS + tid;
             c < static_cast<long long>(T) * H; c += static_cast<long long>(gridDim.x) * MJ_MMA_SMALL_THREADS)
            out[c] = from_float<D>(0.0f);
        return;
    }
    const int splits = p.gemm2_splits > 1 ? p.gemm2_splits : 1; // <= MJ_MMA_DECODE_SPLIT_MAX
    const int c1 = (I + kCols1 - 1) / kCols1, c2 = (H + BW - 1) / BW;
    // GEMM1 item c writes intermediate columns [c·kCols1, (c+1)·kCols1), inside one K split of
    // GEMM2 (a split is whole k tiles, a multiple of kCols1): its count is that split's.
    const int split_k = gemm2_split_k(I, splits);
    static_assert(MJ_MMA_BK % kCols1 == 0, "a GEMM1 item's columns lie in one GEMM2 K split");
    const int items1 = n * c1, items = items1 + n * splits * c2;

    for (;;) {
        __syncthreads(); // s.next is written; the last item's shared memory is no longer read
        const int item = s.next;
        __syncthreads(); // every thread has read it
        if (item >= items) break;
        if (tid == 0) s.next = atomicAdd(queue, 1); // needed only at the next item
        if (item < items1) {
            const int b = item / c1;
            const RowTile tile = {s.tile_expert[b], s.tile_row0[b], s.tile_rows[b]};
            const int c = item % c1;
            Gemms::gemm1(p, act, H, I, k, smem, tile, &s.rows[tile.row0], c);
            __threadfence(); // this thread's intermediate stores, before the count
            __syncthreads();
            if (tid == 0) atomicAdd(gemm1_done + b * splits + c * kCols1 / split_k, 1);
        } else {
            const int j = item - items1, b = j / (splits * c2), split = j / c2 % splits, col = j % c2;
            const RowTile tile = {s.tile_expert[b], s.tile_row0[b], s.tile_rows[b]};
            // its gate: the GEMM1 items of b that write its K range (none if the range is empty)
            const int first1 = split * split_k / kCols1;
            const int end1 = min(c1, ((split + 1) * split_k + kCols1 - 1) / kCols1);
            Gemms::gemm2(p, H, I, smem, tile, &s.rows[tile.row0], col * BW, split,
                         WaitForCount{gemm1_done + b * splits + split, max(end1 - first1, 0)});
            __threadfence(); // this thread's y stores, before the count
            __syncthreads();
            if (tid == 0) s.finalizes = atomicAdd(gemm2_done + col, 1) == n * splits - 1;
            __syncthreads();
            if (s.finalizes) {
                __threadfence(); // the other items' y stores, counted before ours, are visible
                const int c = col * BW + tid % (BW / 4) * 4; // BW / 4 threads per token
                for (int t = tid / (BW / 4); t < T && c < H; t += MJ_MMA_SMALL_THREADS / (BW / 4))
                    finalize_cols<D, kMaxK, /*kYInDtype=*/true, 4, /*kFromL2=*/true, Gemms::Extras::kB2>(
                        p, t, c, H, k, s.ids + t * k, s.weights + t * k);
            }
        }
    }
}

// The forward's first kernel before decode_persistent: zeroes its sync words once every
// kernel the stream ran before (a previous forward's persistent grid among them) is done.
// It lets decode_persistent launch before it waits, so that grid's blocks are placed as the
// forward before drains and prefetch their inputs there; they wait for this grid's end before
// anything else, and this grid is one block, already resident, so none of it can be crowded
// out by them.
__device__ __forceinline__ void decode_reset(const mj_layer_params &p, int H)
{
    grid_dep_launch();
    grid_dep_wait();
    int *const words = reinterpret_cast<int *>(p.ws_counts);
    const int n = MJ_MMA_DECODE_SYNC_WORDS(p.max_tiles, H);
    for (int i = static_cast<int>(threadIdx.x); i < n; i += static_cast<int>(blockDim.x)) words[i] = 0;
}

} // namespace mj
