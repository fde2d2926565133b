// This file contains the GEMMs of the tensor-core layers for 4-bit weights (w4a16, mxfp4):
// GEMM1 with the activation in its epilogue and GEMM2, each in the small (decode: weight rows
// on M) and the large path, on the 4-bit mainloop (mma_w4_mainloop.cuh). Tiles, the W1 tile
// rows (up and gate rows in groups of 8, mma_gemm1_act.cuh), the grids, the row tiles, the
// K splits of the decode GEMM2 and the epilogues are the 16-bit GEMMs' (mma_gemm1_act.cuh,
// mma_gemm2.cuh), so the rest of the layer runs unchanged and each output has one rounding
// model whatever the weight format. What changes is the weight operand: each weight row is a
// W4Row (packed bytes, scales, zero points) of the physical W1 / W2 row, which the layer's
// W1 layout picks (w4_w1_row); its biases and overrides come with the epilogues (layer extras X).
#pragma once

#include "weight_layout.cuh"

#include "act.cuh"
#include "common/grid_dep.cuh"
#include "common/mma_params.h"
#include "common/mma_w4_params.h"
#include "common/params.h"
#include "common/types.cuh"
#include "mma_gemm1_act.cuh"
#include "mma_gemm2.cuh"
#include "mma_w4_mainloop.cuh"
#include "permute.cuh"

namespace mj {

// Physical W1 row of weight-tile row r (w1_tile_row's interleaving, in the layer's W1
// layout), or -1 past I.
template <bool kGated, W1Layout kLayout>
__device__ __forceinline__ i64 w4_w1_row(int r, int j0, int I)
{
    const int j = kGated ? j0 + (r / 16) * 8 + r % 8 : j0 + r;
    if (j >= I) return -1;
    if constexpr (kGated && kLayout != W1Layout::up_gate) return w1_row<kLayout, true>((r / 8) % 2, j, I);
    return kGated ? static_cast<i64>((r / 8) % 2) * I + j : static_cast<i64>(j);
}

// Weight row `row` of expert e of W1 (rows1 rows of H), or a padding row for row < 0.
template <class W>
__device__ __forceinline__ W4Row w4_w1(const mj_layer_params &p, int e, i64 rows1, i64 row, int H)
{
    if (row < 0) return W4Row{nullptr, nullptr, nullptr};
    return W::row(reinterpret_cast<const void *>(p.w1), reinterpret_cast<const void *>(p.w1_scale),
                  reinterpret_cast<const void *>(p.w1_zero), e, rows1, row, H);
}

template <class W>
__device__ __forceinline__ W4Row w4_w2(const mj_layer_params &p, int e, int h, int H, int I)
{
    if (h >= H) return W4Row{nullptr, nullptr, nullptr};
    return W::row(reinterpret_cast<const void *>(p.w2), reinterpret_cast<const void *>(p.w2_scale),
                  reinterpret_cast<const void *>(p.w2_zero), e, H, h, I);
}

// ---- small path: weight rows on M (64), tokens on N (16) ------------------------------------

template <Dtype D, class W, int kStages = MJ_W4_SMALL_STAGES>
using W4SmallMain = MmaW4Mainloop<D, W, MJ_MMA_SMALL_THREADS, MJ_MMA_SMALL_BW, MJ_MMA_SMALL_BT, MJ_W4_SMALL_BK,
                                  kStages, true, MJ_MMA_SMALL_BW / 16, 1, 1, 2>;

// gemm1_act_small with 4-bit W1 (same tile, grid, epilogue, layer extras X); kStages: the
// chain's MJ_W4_SMALL_STAGES or the persistent decode layer's depth.
template <Dtype D, class W, int kAct, int kStages = MJ_W4_SMALL_STAGES, class X = PlainLayer>
__device__ __forceinline__ void w4_gemm1_act_small(const mj_layer_params &p, const ActParams &spec_act, int H, int I,
                                                   int k, unsigned char *smem, const RowTile &tile, const int *rows,
                                                   int col_tile)
{
    constexpr bool kGated = act_is_gated(kAct);
    constexpr int BW = MJ_MMA_SMALL_BW;
    constexpr int kCols = kGated ? BW / 2 : BW;
    using Main = W4SmallMain<D, W, kStages>;
    static_assert(Main::kSmemBytes == kStages * MJ_W4_STAGE_BYTES(MJ_MMA_SMALL_BW, MJ_MMA_SMALL_BT, MJ_W4_SMALL_BK),
                  "host and device must agree on shared memory");
    const int j0 = col_tile * kCols;
    const i64 rows1 = kGated ? 2 * static_cast<i64>(I) : static_cast<i64>(I);
    const u16 *x = reinterpret_cast<const u16 *>(p.x);
    auto w_row = [&](int r) { return w4_w1<W>(p, tile.expert, rows1, w4_w1_row<kGated, X::kLayout>(r, j0, I), H); };
    auto x_row = [&](int n) -> const u16 * {
        if (n >= tile.rows) return nullptr;
        return x + static_cast<i64>(rows[n] / k) * H;
    };
    typename Main::Acc acc;
    Main::run(smem, w_row, x_row, 0, H, acc);
    grid_dep_launch(); // only after the mainloop (gemm1_act_small says why)
    with_expert_act<kAct, X::kOverrides>(p, spec_act, tile.expert, [&](const ActParams &act) {
        gemm1_small_epilogue<D, kAct, X, Main>(p, act, acc, tile, j0, I);
    });
}

// gemm2_small_tile with 4-bit W2: one split's K range of W2 rows [h0, h0 + 64); gate: the
// mainloop's (mma_w4_mainloop.cuh: run_gated).
template <Dtype D, class W, int kStages, class Gate, class X = PlainLayer>
__device__ __forceinline__ void w4_gemm2_small_tile(const mj_layer_params &p, int H, int I, unsigned char *smem,
                                                    const RowTile &tile, const int *rows, int h0, int split, Gate gate)
{
    using Main = W4SmallMain<D, W, kStages>;
    int k0, klen;
    gemm2_split_range(I, p.gemm2_splits > 1 ? p.gemm2_splits : 1, split, &k0, &klen);
    const u16 *inter = reinterpret_cast<const u16 *>(p.ws_inter) + static_cast<i64>(tile.row0) * I;
    auto w_row = [&](int r) { return w4_w2<W>(p, tile.expert, h0 + r, H, I); };
    auto x_row = [&](int n) -> const u16 * { return n < tile.rows ? inter + static_cast<i64>(n) * I : nullptr; };
    typename Main::Acc acc;
    Main::run_gated(smem, w_row, x_row, k0, k0 + (klen > 0 ? klen : 0), acc, gate);
    gemm2_small_epilogue<D, X, Main>(p, acc, tile, rows, h0, split, H);
}

// gemm2_small with 4-bit W2 (same block order).
template <Dtype D, class W, class X = PlainLayer>
__device__ __forceinline__ void w4_gemm2_small(const mj_layer_params &p, int H, int I, unsigned char *smem)
{
    const int bid = static_cast<int>(blockIdx.x);
    const int col_tiles = (H + MJ_MMA_SMALL_BW - 1) / MJ_MMA_SMALL_BW;
    const int rest = bid / col_tiles;
    RowTile tile;
    if (!find_row_tile<MJ_MMA_SMALL_BT>(p, rest % p.max_tiles, &tile)) return;
    w4_gemm2_small_tile<D, W, MJ_W4_SMALL_STAGES, typename W4SmallMain<D, W>::NoGate, X>(
        p, H, I, smem, tile, reinterpret_cast<const int *>(p.ws_rows) + tile.row0, (bid % col_tiles) * MJ_MMA_SMALL_BW,
        rest / p.max_tiles, typename W4SmallMain<D, W>::NoGate{});
}

// ---- large path: tokens on M (128), weight rows on N (128) ----------------------------------

template <Dtype D, class W>
using W4LargeMain = MmaW4Mainloop<D, W, MJ_MMA_LARGE_THREADS, MJ_MMA_LARGE_BN, MJ_MMA_LARGE_BM, MJ_W4_LARGE_BK,
                                  MJ_W4_LARGE_STAGES, false, 2, 4, 4, 4>;

// gemm1_act_large with 4-bit W1 (same raster, tile, epilogue, layer extras X).
template <Dtype D, class W, int kAct, class X = PlainLayer>
__device__ __forceinline__ void w4_gemm1_act_large(const mj_layer_params &p, const ActParams &spec_act, int H, int I,
                                                   int k, unsigned char *smem)
{
    constexpr bool kGated = act_is_gated(kAct);
    constexpr int BM = MJ_MMA_LARGE_BM, BN = MJ_MMA_LARGE_BN;
    constexpr int kCols = kGated ? BN / 2 : BN;
    using Main = W4LargeMain<D, W>;
    static_assert(Main::kSmemBytes == MJ_W4_LARGE_SMEM, "host and device must agree on shared memory");
    const int n_tiles = (I + kCols - 1) / kCols;
    int row_tile, col_tile;
    raster_grouped(static_cast<int>(blockIdx.x), n_tiles, p.max_tiles, &row_tile, &col_tile);
    RowTile tile;
    if (!find_row_tile<BM>(p, row_tile, &tile)) return;
    const int j0 = col_tile * kCols;
    const i64 rows1 = kGated ? 2 * static_cast<i64>(I) : static_cast<i64>(I);
    const u16 *x = reinterpret_cast<const u16 *>(p.x);
    const int *rows = reinterpret_cast<const int *>(p.ws_rows) + tile.row0;
    auto x_row = [&](int m) -> const u16 * {
        if (m >= tile.rows) return nullptr;
        return x + static_cast<i64>(rows[m] / k) * H;
    };
    auto w_row = [&](int r) { return w4_w1<W>(p, tile.expert, rows1, w4_w1_row<kGated, X::kLayout>(r, j0, I), H); };
    typename Main::Acc acc;
    Main::run(smem, w_row, x_row, 0, H, acc);
    with_expert_act<kAct, X::kOverrides>(p, spec_act, tile.expert, [&](const ActParams &act) {
        gemm1_large_epilogue<D, kAct, X, Main>(p, act, acc, tile, j0, I);
    });
}

// gemm2_large with 4-bit W2.
template <Dtype D, class W, class X = PlainLayer>
__device__ __forceinline__ void w4_gemm2_large(const mj_layer_params &p, int H, int I, unsigned char *smem)
{
    constexpr int BM = MJ_MMA_LARGE_BM, BN = MJ_MMA_LARGE_BN;
    using Main = W4LargeMain<D, W>;
    const int n_tiles = (H + BN - 1) / BN;
    int row_tile, col_tile;
    raster_grouped(static_cast<int>(blockIdx.x), n_tiles, p.max_tiles, &row_tile, &col_tile);
    RowTile tile;
    if (!find_row_tile<BM>(p, row_tile, &tile)) return;
    const int h0 = col_tile * BN;
    const u16 *inter = reinterpret_cast<const u16 *>(p.ws_inter) + static_cast<i64>(tile.row0) * I;
    auto x_row = [&](int m) -> const u16 * { return m < tile.rows ? inter + static_cast<i64>(m) * I : nullptr; };
    auto w_row = [&](int r) { return w4_w2<W>(p, tile.expert, h0 + r, H, I); };
    typename Main::Acc acc;
    Main::run(smem, w_row, x_row, 0, I, acc);
    gemm2_large_epilogue<D, X, Main>(p, acc, tile, h0, H);
}

// The persistent decode layer's two GEMMs for 4-bit weights (decode_persistent.cuh: its
// Gemms parameter), at its pipeline depth kStages, with the layer's extras X.
template <Dtype D, class W, int kAct, int kStages, class X = PlainLayer>
struct W4DecodeGemms {
    using Extras = X; // the epilogues' W1 layout, biases and overrides (weight_layout.cuh)
    __device__ __forceinline__ static void gemm1(const mj_layer_params &p, const ActParams &act, int H, int I, int k,
                                                 unsigned char *smem, const RowTile &tile, const int *rows, int c)
    {
        w4_gemm1_act_small<D, W, kAct, kStages, X>(p, act, H, I, k, smem, tile, rows, c);
    }
    template <class Gate>
    __device__ __forceinline__ static void gemm2(const mj_layer_params &p, int H, int I, unsigned char *smem,
                                                 const RowTile &tile, const int *rows, int h0, int split, Gate gate)
    {
        w4_gemm2_small_tile<D, W, kStages, Gate, X>(p, H, I, smem, tile, rows, h0, split, gate);
    }
};

} // namespace mj
