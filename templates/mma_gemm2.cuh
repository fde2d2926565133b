// This file contains GEMM2 of the `mma` backend in its two paths: intermediate · W2[e]ᵀ in
// fp32 for one local expert's rows, rounded once to the dtype and written as y[pair, h], so
// that the shared finalize stage sums a token's k slots in a fixed order (no float atomics:
// bit-identical reruns). Why the dtype and not fp32: finalize.cuh. b2, where the layer has
// it, is added to the fp32 sum before that rounding (a split GEMM2's: by finalize).
//
//   large path: intermediate rows (contiguous positions of the row list) on M (128), W2 rows
//               on N (128); 4-byte stores of 2 adjacent h
//   small path: W2 rows on M (64), intermediate rows on N (16): the decode path, where the
//               weights are what must stream at full bandwidth; split along K into
//               p.gemm2_splits runs of whole k tiles when the grid is too small to keep two
//               CTAs on every SM (common/mma_params.h), run s writing its fp32 partial sums
//               to copy s of y (finalize adds them and rounds the sum)
#pragma once

#include "common/grid_dep.cuh"
#include "common/mma_params.h"
#include "common/params.h"
#include "common/types.cuh"
#include "mma_mainloop.cuh"
#include "permute.cuh"
#include "route.cuh"
#include "weight_layout.cuh"

namespace mj {

// The gate of the batch-1 GEMM2 + finalize (mma_mainloop.cuh, run_gated): the block requests
// its first W2 stages, then waits in griddepcontrol.wait for GEMM1 (and so everything before
// it) and lets the next kernel launch, then requests the intermediate. Its blocks are placed
// once every GEMM1 block has passed its own wait, so the layer's inputs are complete by then:
// a block may read them (the router logits) before its wait.
struct GridDepGate {
    static constexpr bool kWaits = true;
    __device__ __forceinline__ void operator()() const { grid_dep_enter(); }
};

// Two adjacent fp32 outputs, one 8-byte store (types.cuh brings no toolkit vector types).
struct alignas(8) Float2 {
    float v[2];
};

// The large path's epilogue: y rows of the tile's pairs, (b2 added,) rounded once, 4-byte
// stores of 2 adjacent h.
template <Dtype D, class X, class Main>
__device__ __forceinline__ void gemm2_large_epilogue(const mj_layer_params &p, const typename Main::Acc &acc,
                                                     const RowTile &tile, int h0, int H)
{
    const int *rows = reinterpret_cast<const int *>(p.ws_rows) + tile.row0;
    u16 *y = reinterpret_cast<u16 *>(p.ws_y);
#pragma unroll
    for (int mf = 0; mf < 4; ++mf)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int m = Main::a_index(mf, h);
            if (m >= tile.rows) continue;
            u16 *dst = y + static_cast<i64>(rows[m]) * H;
#pragma unroll
            for (int nf = 0; nf < 4; ++nf) {
                const int col = h0 + Main::b_index(nf, 0);
                if (col >= H) continue; // H % 8 == 0: both columns in or both out
                *reinterpret_cast<u32 *>(dst + col) =
                    pack2_rn<D>(y_value<D, X>(p, tile.expert, H, col, acc.c[mf][nf][2 * h]),
                                y_value<D, X>(p, tile.expert, H, col + 1, acc.c[mf][nf][2 * h + 1]));
            }
        }
}

template <Dtype D, class X = PlainLayer>
__device__ __forceinline__ void gemm2_large(const mj_layer_params &p, int H, int I, unsigned char *smem)
{
    constexpr int BM = MJ_MMA_LARGE_BM, BN = MJ_MMA_LARGE_BN;
    using Main = MmaMainloop<D, MJ_MMA_LARGE_THREADS, BM, BN, MJ_MMA_LARGE_STAGES, 2, 4, 4, 4>;

    const int n_tiles = (H + BN - 1) / BN;
    int row_tile, col_tile;
    raster_grouped(static_cast<int>(blockIdx.x), n_tiles, p.max_tiles, &row_tile, &col_tile);
    RowTile tile;
    if (!find_row_tile<BM>(p, row_tile, &tile)) return;
    const int h0 = col_tile * BN;

    const u16 *inter = reinterpret_cast<const u16 *>(p.ws_inter) + static_cast<i64>(tile.row0) * I;
    const u16 *w2e = reinterpret_cast<const u16 *>(p.w2) + static_cast<i64>(tile.expert) * H * I;

    auto a_row = [&](int m) -> const u16 * { return m < tile.rows ? inter + static_cast<i64>(m) * I : nullptr; };
    auto b_row = [&](int r) -> const u16 * { return h0 + r < H ? w2e + static_cast<i64>(h0 + r) * I : nullptr; };

    typename Main::Acc acc;
    Main::run(smem, a_row, b_row, I, acc);
    gemm2_large_epilogue<D, X, Main>(p, acc, tile, h0, H);
}

// The K splits of a decode GEMM2 over I: split `split` takes whole k tiles [k0, k0 + klen) of
// every row (klen <= 0: a zero partial sum); every split but the last has gemm2_split_k
// elements.
__device__ __forceinline__ int gemm2_split_k(int I, int splits) { return MJ_MMA_GEMM2_SPLIT_K(I, splits); }

__device__ __forceinline__ void gemm2_split_range(int I, int splits, int split, int *k0, int *klen)
{
    const int k_per = gemm2_split_k(I, splits);
    *k0 = split * k_per;
    *klen = I - *k0 < k_per ? I - *k0 : k_per;
}

// The small path's epilogue, K split `split`: y gets the split's fp32 partial sums (finalize
// adds them, then rounds), or, unsplit, each value (b2 added,) rounded once to the dtype like
// the large GEMM2's.
template <Dtype D, class X, class Main>
__device__ __forceinline__ void gemm2_small_epilogue(const mj_layer_params &p, const typename Main::Acc &acc,
                                                     const RowTile &tile, const int *rows, int h0, int split, int H)
{
    const bool split_y = p.gemm2_splits > 1;
    float *y = reinterpret_cast<float *>(p.ws_y) + static_cast<i64>(split) * p.num_pairs * H;
    u16 *yh = reinterpret_cast<u16 *>(p.ws_y);
#pragma unroll
    for (int nf = 0; nf < 2; ++nf)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const int n = Main::b_index(nf, e);
            if (n >= tile.rows) continue;
            const i64 row = static_cast<i64>(rows[n]) * H;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int col = h0 + Main::a_index(0, h);
                if (col >= H) continue;
                if (split_y) y[row + col] = acc.c[0][nf][2 * h + e];
                else yh[row + col] = from_float<D>(y_value<D, X>(p, tile.expert, H, col, acc.c[0][nf][2 * h + e]));
            }
        }
}

// One decode GEMM2 tile: W2 rows [h0, h0 + 64) of row tile `tile`'s expert times its
// intermediate rows, K split `split` of p.gemm2_splits; rows: the tile's pair indices (where
// y goes); gate: the mainloop's (mma_mainloop.cuh: run_gated), which the persistent decode
// kernel uses to wait for the tile's intermediate.
template <Dtype D, int kStages, class Gate, class X = PlainLayer>
__device__ __forceinline__ void gemm2_small_tile(const mj_layer_params &p, int H, int I, unsigned char *smem,
                                                 const RowTile &tile, const int *rows, int h0, int split, Gate gate)
{
    constexpr int BW = MJ_MMA_SMALL_BW, BT = MJ_MMA_SMALL_BT;
    using Main = MmaMainloop<D, MJ_MMA_SMALL_THREADS, BW, BT, kStages, BW / 16, 1, 1, 2>;
    static_assert(Main::BK == MJ_MMA_BK, "gemm2_split_range splits in k tiles of MJ_MMA_BK");
    static_assert(Main::kSmemBytes == MJ_MMA_SMALL_STAGE_BYTES * kStages,
                  "host and device must agree on shared memory");
    int k0, klen;
    gemm2_split_range(I, p.gemm2_splits > 1 ? p.gemm2_splits : 1, split, &k0, &klen);

    const u16 *inter = reinterpret_cast<const u16 *>(p.ws_inter) + static_cast<i64>(tile.row0) * I + k0;
    const u16 *w2e = reinterpret_cast<const u16 *>(p.w2) + static_cast<i64>(tile.expert) * H * I + k0;

    auto a_row = [&](int r) -> const u16 * { return h0 + r < H ? w2e + static_cast<i64>(h0 + r) * I : nullptr; };
    auto b_row = [&](int n) -> const u16 * { return n < tile.rows ? inter + static_cast<i64>(n) * I : nullptr; };

    typename Main::Acc acc;
    Main::run_gated(smem, a_row, b_row, klen, acc, gate);
    gemm2_small_epilogue<D, X, Main>(p, acc, tile, rows, h0, split, H);
}

template <Dtype D, class X = PlainLayer>
__device__ __forceinline__ void gemm2_small(const mj_layer_params &p, int H, int I, unsigned char *smem)
{
    using Main = MmaMainloop<D, MJ_MMA_SMALL_THREADS, MJ_MMA_SMALL_BW, MJ_MMA_SMALL_BT, MJ_MMA_SMALL_STAGES,
                             MJ_MMA_SMALL_BW / 16, 1, 1, 2>;
    // block -> (column tile, row tile, K split), the column tile fastest: the blocks resident at
    // once read neighbouring 64-row slices of a few experts' W2, not one slice of every expert
    // (docs/PERFORMANCE.md). The same tiles and MMA sequences either way: the same bits.
    const int bid = static_cast<int>(blockIdx.x);
    const int col_tiles = (H + MJ_MMA_SMALL_BW - 1) / MJ_MMA_SMALL_BW;
    const int rest = bid / col_tiles;
    RowTile tile;
    if (!find_row_tile<MJ_MMA_SMALL_BT>(p, rest % p.max_tiles, &tile)) return;
    gemm2_small_tile<D, MJ_MMA_SMALL_STAGES, typename Main::NoGate, X>(p, H, I, smem, tile, reinterpret_cast<const int *>(p.ws_rows) + tile.row0,
                                             (bid % col_tiles) * MJ_MMA_SMALL_BW, rest / p.max_tiles,
                                             typename Main::NoGate{});
}

// ---- batch 1: GEMM2 and finalize in one kernel ----------------------------------------------
//
// After the routed GEMM1 (T = 1: row tile b is the b-th routed local expert, one row, row0 =
// b; decode_route.cuh) the token's output needs no other block's work once a block holds
// EVERY routed expert's dot products for its columns. Block c owns the kCols = BW / kSlots
// hidden columns h0 = c · kCols of all kSlots tiles:
//
//   A row r  = W2 row h0 + r % kCols of tile r / kCols's expert (zero past the real tiles)
//   B row n  = tile n's intermediate row (n < kSlots; zero beyond)
//
// so the mainloop (the decode GEMM2's, same tile shape and pipeline) computes A · Bᵀ, of which
// the products (r, n = r / kCols) are wanted and the rest is dropped (tensor cores are idle at
// T = 1; every weight byte is still read once). Each wanted product is the same fixed sequence
// of MMAs over k as gemm2_small's for that (W2 row, intermediate row) (mma_mainloop.cuh), and
// the sum below is finalize_token's (slots in order, fmaf, other ranks' slots skipped, rounded
// once): out is bit for bit the three-kernel layer's.
//
// The block routes the token itself (route.cuh, as GEMM1's blocks did: the same ids and
// weights) before its wait, and requests its first W2 stages (GridDepGate): the routed GEMM1
// lets this grid launch as soon as its own blocks have waited (MJ_MMA_T1_GEMM2_FINALIZE), so
// these blocks take the SMs GEMM1 leaves free and stream W2 while GEMM1 runs; only the
// intermediate waits for GEMM1 (GEMM1 triggering only after its mainloop would let the routing
// delay the W2 stream).
// k <= kSlots: the launcher takes this kernel for k = 8 or 6 only (runtime/launch_mma.c,
// t1_kernel; tests/check_launch.c holds it to that), so slots index kSlots entries. kStages:
// MJ_MMA_T1_STAGES or MJ_MMA_T1_SHALLOW_STAGES, kSmem its shared memory (common/mma_params.h).
template <Dtype D, int kStages, int kSmem, Routing kRouting, Dtype kLogits, int kMaxE, class X = PlainLayer>
__device__ __forceinline__ void gemm2_finalize_t1(const mj_layer_params &p, int H, int I, int E, int k,
                                                  const GroupRouting &gr, unsigned char *smem)
{
    constexpr int BW = MJ_MMA_SMALL_BW, BT = MJ_MMA_SMALL_BT;
    constexpr int kSlots = MJ_MMA_T1_SLOTS, kCols = BW / kSlots;
    static_assert(BW % kSlots == 0 && kSlots <= BT, "a block holds kCols rows of each of kSlots tiles");
    static_assert(kSlots <= MJ_MMA_SMALL_THREADS && kCols <= MJ_MMA_SMALL_THREADS, "one thread per slot, per column");
    using Main = MmaMainloop<D, MJ_MMA_SMALL_THREADS, BW, BT, kStages, BW / 16, 1, 1, 2>;
    static_assert(Main::kSmemBytes == kSmem, "host and device must agree on shared memory");
    __shared__ int slot_id[kSlots];     // slot j's local expert, or -1 (another rank's)
    __shared__ float slot_weight[kSlots];
    __shared__ int tile_expert[kSlots]; // local expert of tile b, or -1
    __shared__ int slot_tile[kSlots];   // tile of slot j's expert, or -1
    __shared__ float ys[kSlots][kCols]; // tile b's dot products for the block's columns

    const int h0 = static_cast<int>(blockIdx.x) * kCols;
    const u16 *inter = reinterpret_cast<const u16 *>(p.ws_inter);
    const u16 *w2 = reinterpret_cast<const u16 *>(p.w2);
    const int tid = static_cast<int>(threadIdx.x);

    // Tile b is the b-th smallest routed local expert (decode_route.cuh): at T = 1 no expert
    // is routed twice, so slot j's tile is the number of routed local experts below its own.
    // Only slots j < k are read (the launcher takes this kernel for k <= kSlots).
    if (tid < kSlots) tile_expert[tid] = -1; // tiles past the routed experts have no rows
    if (tid < kWarp)
        route_token<kRouting, kLogits, kMaxE>(p, 0, E, k, tid, gr, nullptr, slot_id, false, slot_weight);
    __syncthreads();
    if (tid < k) {
        const int e = slot_id[tid];
        int below = 0;
        for (int j = 0; j < k; ++j) below += slot_id[j] >= 0 && slot_id[j] < e;
        slot_tile[tid] = e >= 0 ? below : -1;
        if (e >= 0) tile_expert[below] = e;
    }
    __syncthreads();
    auto a_row = [&](int r) -> const u16 * {
        const int e = tile_expert[r / kCols], h = h0 + r % kCols;
        return e >= 0 && h < H ? w2 + (static_cast<i64>(e) * H + h) * I : nullptr;
    };
    auto b_row = [&](int n) -> const u16 * {
        return n < kSlots && tile_expert[n] >= 0 ? inter + static_cast<i64>(n) * I : nullptr; // row0 = n
    };
    typename Main::Acc acc;
    Main::run_gated(smem, a_row, b_row, I, acc, GridDepGate{});

    // keep the wanted products: accumulator (row r, column n) with n == r / kCols
#pragma unroll
    for (int nf = 0; nf < 2; ++nf)
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const int r = Main::a_index(0, q / 2), n = Main::b_index(nf, q % 2);
            if (n == r / kCols && (!X::kB2 || h0 + r % kCols < H)) // as y is stored
                ys[n][r % kCols] = to_float<D>(from_float<D>(
                    y_value<D, X>(p, tile_expert[n] >= 0 ? tile_expert[n] : 0, H, h0 + r % kCols, acc.c[0][nf][q])));
        }
    __syncthreads();
    if (tid < kCols && h0 + tid < H) {
        float sum = 0.0f;
        for (int j = 0; j < k; ++j)
            if (slot_tile[j] >= 0) sum = fmaf(slot_weight[j], ys[slot_tile[j]][tid], sum);
        reinterpret_cast<u16 *>(p.out)[h0 + tid] = from_float<D>(sum);
    }
}

} // namespace mj
