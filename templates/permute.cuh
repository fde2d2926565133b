// This file contains the permutation stage: from the per-expert row counts of the route
// stage, the row offsets and row-tile offsets of every local expert (one block, one thread
// per expert, a block-wide exclusive scan), then the scatter of (token, slot) pairs into
// per-expert row lists.
//
// NOTES: the scatter's atomics decide only the ORDER of rows inside an expert's list. Every
// row of a GEMM tile is computed on its own (a fixed-order dot product per output) and its
// result is written by pair index, so the order never changes a single output bit.
#pragma once

#include "common/params.h"
#include "common/types.cuh"

namespace mj {

constexpr int kOffsetsWarps = MJ_SIMT_OFFSETS_THREADS / 32;
static_assert(MJ_SIMT_OFFSETS_THREADS >= MJ_SIMT_MAX_EXPERTS,
              "the offsets block has one thread per local expert, so it needs >= 512 threads");
static_assert(MJ_SIMT_OFFSETS_THREADS % 32 == 0 && kOffsetsWarps <= 32,
              "the offsets scan combines at most 32 warp totals in one warp");

// Two exclusive prefix sums at once over the threads of the block (rows and row tiles).
// Returns the exclusive sums; *total receives the block totals (all threads).
__device__ __forceinline__ void block_exclusive_scan2(int a, int b, int *excl_a, int *excl_b,
                                                      int *total_a, int *total_b)
{
    __shared__ int warp_a[kOffsetsWarps], warp_b[kOffsetsWarps];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    int ia = a, ib = b; // inclusive within the warp
    for (int off = 1; off < 32; off <<= 1) {
        const int na = __shfl_up_sync(0xffffffffu, ia, off);
        const int nb = __shfl_up_sync(0xffffffffu, ib, off);
        if (lane >= off) {
            ia += na;
            ib += nb;
        }
    }
    if (lane == 31) {
        warp_a[warp] = ia;
        warp_b[warp] = ib;
    }
    __syncthreads();
    int before_a = 0, before_b = 0, sum_a = 0, sum_b = 0;
    for (int w = 0; w < kOffsetsWarps; ++w) { // 16 shared reads, all threads alike
        if (w < warp) {
            before_a += warp_a[w];
            before_b += warp_b[w];
        }
        sum_a += warp_a[w];
        sum_b += warp_b[w];
    }
    *excl_a = before_a + ia - a;
    *excl_b = before_b + ib - b;
    *total_a = sum_a;
    *total_b = sum_b;
}

// The last x in [0, n) with f(x) <= v, for f nondecreasing with f(0) <= v < f(n).
template <class F>
__device__ __forceinline__ int last_at_most(int n, int v, F f)
{
    int lo = 0, hi = n; // invariant: f(lo) <= v < f(hi)
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (f(mid) <= v) lo = mid;
        else hi = mid;
    }
    return lo;
}

// An int of the routing tables from L2 only (ld.global.cg): for a block that reads it before
// its griddepcontrol.wait, which no line of this SM's L1 may answer for (common/grid_dep.cuh,
// (c)).
__device__ __forceinline__ int load_s32_l2(const int *src)
{
    int v;
    asm volatile("ld.global.cg.s32 %0, [%1];\n" : "=r"(v) : "l"(src));
    return v;
}

// One row tile of the GEMMs: local expert, first position in ws_rows, rows (1..BLOCK_M).
struct alignas(16) TileEntry {
    int expert;
    int row0;
    int rows;
    int pad;
};

// offsets[e] = Σ_{e'<e} count[e'], tile_offsets[e] = Σ_{e'<e} ceil(count[e'] / BLOCK_M);
// both have E_local + 1 entries, the last being the totals. Then the tile table: entry b of
// ws_tiles for every real row tile b, so that a GEMM block finds its tile with one 16-byte
// load instead of a binary search over tile_offsets (log2(E_local) + 2 dependent L2 round
// trips before its first weight load, on every decode GEMM's critical path). The block
// fills all p.max_tiles entries the GEMM grids index (entry b: a binary search in shared
// memory; expert −1 past the real tiles), so a skewed routing that gives one expert
// thousands of tiles costs no single thread a long loop.
//
// kPairOrder (the wgmma pair path, whose clusters take table entries 2u and 2u + 1 and share
// the weight tile when both are one expert's): the same tiles in an order that pairs every
// expert's tiles with each other as far as they go. Expert by expert: its tiles two by two;
// then, if it has an odd tile left (its last, the partial one when there is one), that tile
// with the next expert's odd tile; a last odd tile without a partner goes alone at the end
// (the pair's second CTA then has no rows). An odd pair sits right after its first expert's
// pairs and just before the next odd expert (whose weight tile it loads first), so both
// weight tiles are likely still in L2. In expert order (the other paths' order) an expert
// with an odd tile count moves every later expert's pairs off by one, so that about half of
// them straddle two experts, load both weight tiles and put a partial tile beside a full one
// (its CTA idling in lock step); this order loads fewer weight tiles per column.
//
// counts: rows per local expert in `copies` arrays of E_local, summed here (ws_counts: the
// route stage's MJ_ROUTE_COUNT_COPIES copies; the fused decode routing's shared array: 1);
// row0_out, if given, receives offsets[e] for e < E_local (shared memory of the caller).
template <int kBlockM, bool kPairOrder = false>
__device__ __forceinline__ void expert_offsets(const mj_layer_params &p, const int *counts, int copies,
                                               int *row0_out = nullptr)
{
    static_assert(kBlockM >= MJ_MIN_BLOCK_M, "the tile table is sized for row tiles of >= MJ_MIN_BLOCK_M rows");
    __shared__ int s_tile0[MJ_SIMT_OFFSETS_THREADS + 1];
    __shared__ int s_row0[MJ_SIMT_OFFSETS_THREADS + 1];
    __shared__ int s_pair0[kPairOrder ? MJ_SIMT_OFFSETS_THREADS + 1 : 1]; // pair order: pairs before e
    const int e = threadIdx.x;
    const int n_local = p.num_local_experts;
    int count = 0;
    if (e < n_local)
        for (int c = 0; c < copies; ++c) count += counts[c * n_local + e]; // independent loads, one round trip
    const int tiles = (count + kBlockM - 1) / kBlockM;
    int row0, tile0, rows_total, tiles_total;
    block_exclusive_scan2(count, tiles, &row0, &tile0, &rows_total, &tiles_total);
    int pair0 = 0, pairs_total = 0;
    if constexpr (kPairOrder) {
        __syncthreads(); // the scan's warp totals are read before the next scan writes them
        int unused0, unused1;
        block_exclusive_scan2(tiles / 2, 0, &pair0, &unused0, &pairs_total, &unused1);
    }
    int *offsets = reinterpret_cast<int *>(p.ws_offsets);
    int *tile_offsets = reinterpret_cast<int *>(p.ws_tile_offsets);
    if (e < n_local) {
        offsets[e] = row0;
        tile_offsets[e] = tile0;
        s_row0[e] = row0;
        s_tile0[e] = tile0;
        if constexpr (kPairOrder) s_pair0[e] = pair0;
        if (row0_out) row0_out[e] = row0;
    }
    if (e == 0) {
        offsets[n_local] = rows_total;
        tile_offsets[n_local] = tiles_total;
        s_row0[n_local] = rows_total;
        s_tile0[n_local] = tiles_total;
        if constexpr (kPairOrder) s_pair0[n_local] = pairs_total;
    }
    __syncthreads();
    TileEntry *table = reinterpret_cast<TileEntry *>(p.ws_tiles);
    for (int b = threadIdx.x; b < p.max_tiles; b += MJ_SIMT_OFFSETS_THREADS) {
        if (b >= tiles_total) { // past the real tiles: the GEMM block of this index exits
            table[b] = TileEntry{-1, 0, 0, 0};
            continue;
        }
        // (expert lo, its tile number j) of entry b
        int lo, j = 0;
        if constexpr (!kPairOrder) { // the last expert with s_tile0 <= b: non-empty, since b < total
            lo = last_at_most(n_local, b, [&](int x) { return s_tile0[x]; });
            j = b - s_tile0[lo];
        } else {
            // pair order, unit u = b / 2 (tiles 2u, 2u + 1). Expert x's units: its pairs, then
            // the pair of odd tiles that its own odd tile starts (if it starts one: the odd
            // tiles pair up in expert order, 0 with 1, 2 with 3, ...); an odd tile left alone
            // is the last unit. units(x): the units before expert x's.
            auto left = [&](int x) { return s_tile0[x] - 2 * s_pair0[x]; }; // odd tiles before x
            const int odd_pairs = left(n_local) / 2;
            auto units = [&](int x) {
                const int started = (left(x) + 1) / 2;
                return s_pair0[x] + (started < odd_pairs ? started : odd_pairs);
            };
            // the expert x with left(x) == i and an odd tile
            auto odd_tile_owner = [&](int i) { return last_at_most(n_local, i, left); };
            const int u = b / 2;
            bool odd_tile = true;
            if (u < units(n_local)) {
                lo = last_at_most(n_local, u, units); // units(lo) <= u < units(lo + 1): lo has unit u
                const int k = u - units(lo);
                if (k < s_pair0[lo + 1] - s_pair0[lo]) { // one of lo's pairs
                    j = 2 * k + b % 2;
                    odd_tile = false;
                } else if (b % 2 == 1) { // the pair of odd tiles lo's starts: the next expert's
                    lo = odd_tile_owner(left(lo) + 1);
                }
            } else { // the last odd tile, alone (b < total, so b is even)
                lo = odd_tile_owner(left(n_local) - 1);
            }
            if (odd_tile) j = s_tile0[lo + 1] - s_tile0[lo] - 1; // its expert's last tile
        }
        const int first = s_row0[lo] + j * kBlockM;
        const int end = s_row0[lo + 1];
        table[b] = TileEntry{lo, first, end - first < kBlockM ? end - first : kBlockM, 0};
    }
}

// The expert_offsets of a layer's own stage: the route stage's counts in ws_counts, the copies
// its blocks wrote (MJ_ROUTE_COPIES_USED: where the blocks zero their own copy, the others were
// never zeroed).
template <int kBlockM, bool kPairOrder = false>
__device__ __forceinline__ void expert_offsets(const mj_layer_params &p)
{
    expert_offsets<kBlockM, kPairOrder>(p, reinterpret_cast<const int *>(p.ws_counts),
                                        MJ_ROUTE_COPIES_USED(p.num_tokens));
}

// The copy of ws_counts that route block `block` adds to (common/params.h: atomics spread
// over MJ_ROUTE_COUNT_COPIES x more cache lines).
__device__ __forceinline__ int *route_counts_copy(const mj_layer_params &p, unsigned block)
{
    return reinterpret_cast<int *>(p.ws_counts) + (block % MJ_ROUTE_COUNT_COPIES) * p.num_local_experts;
}

// Pair i = t*k + j routed to local expert e (ids[i]) takes the next free row of e's list
// (cursors[e]; its first row offsets[e]). The fused decode routing passes its shared-memory
// ids, cursors and offsets (a few pairs: no contention to speak of).
__device__ __forceinline__ void scatter_pair(const mj_layer_params &p, i64 i, const int *ids, int *cursors,
                                             const int *offsets)
{
    const int e = ids[i];
    if (e < 0) return;
    const int slot = atomicAdd(cursors + e, 1);
    reinterpret_cast<int *>(p.ws_rows)[offsets[e] + slot] = static_cast<int>(i);
}

// The offsets kernels of the tensor-core layers: expert_offsets, and where the batch's pairs fit
// one scatter block (MJ_OFFSETS_SCATTER) the scatter as well, its cursors and the experts'
// first rows in shared memory (the launcher then skips mj_scatter). Which slot a pair takes in
// its expert's list is the order the shared atomics land in, as in scatter_block; it changes
// no output bit (file comment).
template <int kBlockM, bool kPairOrder = false>
__device__ __forceinline__ void offsets_stage(const mj_layer_params &p)
{
    if (!MJ_OFFSETS_SCATTER(p.num_pairs)) {
        expert_offsets<kBlockM, kPairOrder>(p);
        return;
    }
    __shared__ int s_first[MJ_SIMT_MAX_EXPERTS], s_cursors[MJ_SIMT_MAX_EXPERTS];
    for (int e = threadIdx.x; e < p.num_local_experts; e += blockDim.x) s_cursors[e] = 0;
    // (its barriers order the zeros above before the atomics below)
    expert_offsets<kBlockM, kPairOrder>(p, reinterpret_cast<const int *>(p.ws_counts),
                                        MJ_ROUTE_COPIES_USED(p.num_tokens), s_first);
    __syncthreads();
    const int *ids = reinterpret_cast<const int *>(p.ws_ids);
    for (int i = threadIdx.x; i < p.num_pairs; i += blockDim.x) scatter_pair(p, i, ids, s_cursors, s_first);
}

// The scatter stage: block b places pairs [b·N, (b + 1)·N) (N = MJ_SCATTER_PAIRS_PER_BLOCK).
// Each pair's rank among the block's pairs of its expert comes from a shared-memory atomic;
// then one thread per expert present takes the block's range of that expert's slots with one
// global atomic on ws_cursors (at most E_local per block instead of one per pair: common/params.h
// says what the per-pair atomics cost). Which block gets which range is the order the atomics
// land in; like the order inside an expert's list it changes no output bit (file comment).
__device__ __forceinline__ void scatter_block(const mj_layer_params &p, i64 block)
{
    constexpr int kThreads = MJ_SIMT_SCATTER_THREADS, kPer = MJ_SCATTER_PAIRS_PER_THREAD;
    __shared__ int s_count[MJ_SIMT_MAX_EXPERTS]; // pairs of each expert in this block, then their first slot
    const int n_local = p.num_local_experts;
    const int *ids = reinterpret_cast<const int *>(p.ws_ids);
    for (int e = threadIdx.x; e < n_local; e += kThreads) s_count[e] = 0;
    __syncthreads();
    const i64 first = block * MJ_SCATTER_PAIRS_PER_BLOCK + threadIdx.x; // coalesced: pair first + kThreads·j
    int expert[kPer], rank[kPer];
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
        const i64 i = first + static_cast<i64>(j) * kThreads;
        expert[j] = i < p.num_pairs ? ids[i] : -1;
    }
#pragma unroll
    for (int j = 0; j < kPer; ++j) rank[j] = expert[j] >= 0 ? atomicAdd(&s_count[expert[j]], 1) : 0;
    __syncthreads();
    const int *offsets = reinterpret_cast<const int *>(p.ws_offsets);
    int *cursors = reinterpret_cast<int *>(p.ws_cursors);
    for (int e = threadIdx.x; e < n_local; e += kThreads) {
        const int n = s_count[e];
        if (n > 0) s_count[e] = offsets[e] + atomicAdd(cursors + e, n);
    }
    __syncthreads();
    int *rows = reinterpret_cast<int *>(p.ws_rows);
#pragma unroll
    for (int j = 0; j < kPer; ++j)
        if (expert[j] >= 0) rows[s_count[expert[j]] + rank[j]] = static_cast<int>(first + static_cast<i64>(j) * kThreads);
}

// The tile a GEMM block owns: expert e, rows [row0, row0 + rows) of the row list.
struct RowTile {
    int expert; // local expert id
    int row0;   // first position in ws_rows
    int rows;   // 1..BLOCK_M real rows
};

// Finds block b's tile in the tile table: one 16-byte load; false for a block past the real
// tile count (the grid is sized for the data-independent upper bound; those entries say
// expert −1). Every thread computes the same answer from the same load, so no
// synchronisation is needed. b < p.max_tiles. kFromL2: from L2 only, as load_s32_l2.
template <int kBlockM, bool kFromL2 = false>
__device__ __forceinline__ bool find_row_tile(const mj_layer_params &p, int b, RowTile *out)
{
    TileEntry t;
    if constexpr (kFromL2) {
        asm volatile("ld.global.cg.v4.s32 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(t.expert), "=r"(t.row0), "=r"(t.rows), "=r"(t.pad)
                     : "l"(reinterpret_cast<const TileEntry *>(p.ws_tiles) + b));
    } else {
        t = reinterpret_cast<const TileEntry *>(p.ws_tiles)[b];
    }
    if (t.expert < 0) return false;
    out->expert = t.expert;
    out->row0 = t.row0;
    out->rows = t.rows;
    return true;
}

} // namespace mj
