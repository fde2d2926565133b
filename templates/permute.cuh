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
// trips before its first weight load: ~2 µs of each decode GEMM at batch 1). The block
// fills all p.max_tiles entries the GEMM grids index (entry b: a binary search in shared
// memory; expert −1 past the real tiles), so a skewed routing that gives one expert
// thousands of tiles costs no single thread a long loop.
//
// counts: rows per local expert (ws_counts, or the fused decode routing's shared array);
// row0_out, if given, receives offsets[e] for e < E_local (shared memory of the caller).
template <int kBlockM>
__device__ __forceinline__ void expert_offsets(const mj_layer_params &p, const int *counts, int *row0_out = nullptr)
{
    static_assert(kBlockM >= MJ_MIN_BLOCK_M, "the tile table is sized for row tiles of >= MJ_MIN_BLOCK_M rows");
    __shared__ int s_tile0[MJ_SIMT_OFFSETS_THREADS + 1];
    __shared__ int s_row0[MJ_SIMT_OFFSETS_THREADS + 1];
    const int e = threadIdx.x;
    const int n_local = p.num_local_experts;
    const int count = e < n_local ? counts[e] : 0;
    const int tiles = (count + kBlockM - 1) / kBlockM;
    int row0, tile0, rows_total, tiles_total;
    block_exclusive_scan2(count, tiles, &row0, &tile0, &rows_total, &tiles_total);
    int *offsets = reinterpret_cast<int *>(p.ws_offsets);
    int *tile_offsets = reinterpret_cast<int *>(p.ws_tile_offsets);
    if (e < n_local) {
        offsets[e] = row0;
        tile_offsets[e] = tile0;
        s_row0[e] = row0;
        s_tile0[e] = tile0;
        if (row0_out) row0_out[e] = row0;
    }
    if (e == 0) {
        offsets[n_local] = rows_total;
        tile_offsets[n_local] = tiles_total;
        s_row0[n_local] = rows_total;
        s_tile0[n_local] = tiles_total;
    }
    __syncthreads();
    TileEntry *table = reinterpret_cast<TileEntry *>(p.ws_tiles);
    for (int b = threadIdx.x; b < p.max_tiles; b += MJ_SIMT_OFFSETS_THREADS) {
        if (b >= tiles_total) { // past the real tiles: the GEMM block of this index exits
            table[b] = TileEntry{-1, 0, 0, 0};
            continue;
        }
        // the last expert with s_tile0 <= b: non-empty, since b < total
        int lo = 0, hi = n_local; // invariant: s_tile0[lo] <= b < s_tile0[hi]
        while (hi - lo > 1) {
            const int mid = (lo + hi) / 2;
            if (s_tile0[mid] <= b) lo = mid;
            else hi = mid;
        }
        const int first = s_row0[lo] + (b - s_tile0[lo]) * kBlockM;
        const int end = s_row0[lo + 1];
        table[b] = TileEntry{lo, first, end - first < kBlockM ? end - first : kBlockM, 0};
    }
}

// The expert_offsets of a layer's own stage: counts from ws_counts.
template <int kBlockM>
__device__ __forceinline__ void expert_offsets(const mj_layer_params &p)
{
    expert_offsets<kBlockM>(p, reinterpret_cast<const int *>(p.ws_counts));
}

// Pair i = t*k + j routed to local expert e (ids[i]) takes the next free row of e's list
// (cursors[e]; its first row offsets[e]). The scatter stage passes ws_ids, ws_cursors and
// ws_offsets; the fused decode routing its shared-memory copies.
__device__ __forceinline__ void scatter_pair(const mj_layer_params &p, i64 i, const int *ids, int *cursors,
                                             const int *offsets)
{
    const int e = ids[i];
    if (e < 0) return;
    const int slot = atomicAdd(cursors + e, 1);
    reinterpret_cast<int *>(p.ws_rows)[offsets[e] + slot] = static_cast<int>(i);
}

__device__ __forceinline__ void scatter_pair(const mj_layer_params &p, i64 i)
{
    scatter_pair(p, i, reinterpret_cast<const int *>(p.ws_ids), reinterpret_cast<int *>(p.ws_cursors),
                 reinterpret_cast<const int *>(p.ws_offsets));
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
// synchronisation is needed. b < p.max_tiles.
template <int kBlockM>
__device__ __forceinline__ bool find_row_tile(const mj_layer_params &p, int b, RowTile *out)
{
    const TileEntry t = reinterpret_cast<const TileEntry *>(p.ws_tiles)[b];
    if (t.expert < 0) return false;
    out->expert = t.expert;
    out->row0 = t.row0;
    out->rows = t.rows;
    return true;
}

} // namespace mj
