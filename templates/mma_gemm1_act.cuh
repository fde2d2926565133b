// This file contains GEMM1 of the `mma` backend with the activation fused into its epilogue,
// in its two paths (common/mma_params.h). Both read token rows of x straight through the
// expert's row list (no permuted copy of x) and both keep a gated activation's up row j (u,
// FIRST half of W1) and gate row I + j (g, SECOND half) in the same CTA and the same thread:
//
//   W1 tile rows are taken in groups of 8, alternating up / gate:
//     tile row r -> half (r / 8) % 2, column j = j0 + (r / 16)·8 + r % 8
//   large path: the weight rows are the MMA's N; n8 fragments 2p and 2p+1 are the up and the
//               gate rows of the same 8 columns, so c[mf][2p][q] and c[mf][2p+1][q] pair up
//   small path: the weight rows are the MMA's M; one m16 fragment is 8 up rows over 8 gate
//               rows, so c[.][nf][0..1] (row g: u) pair with c[.][nf][2..3] (row g+8: g)
//
// Which physical rows are a column's up and gate rows is the layer's W1 layout (w1_tile_row);
// b1 of those rows and the expert's activation parameters enter the epilogue (weight_layout.cuh,
// fc1_act). The intermediate is written once, in the spec dtype, at row = position in the row list.
#pragma once

#include "act.cuh"
#include "common/grid_dep.cuh"
#include "common/mma_params.h"
#include "common/params.h"
#include "common/types.cuh"
#include "mma_mainloop.cuh"
#include "permute.cuh"
#include "weight_layout.cuh"

namespace mj {

// W1 row of weight-tile row r (the interleaving above, half (r / 8) % 2 of column j, in the
// layer's W1 layout); nullptr past I.
template <bool kGated, W1Layout kLayout = W1Layout::up_gate>
__device__ __forceinline__ const u16 *w1_tile_row(const u16 *w1e, int r, int j0, int I, int H)
{
    const int j = kGated ? j0 + (r / 16) * 8 + r % 8 : j0 + r;
    if (j >= I) return nullptr;
    i64 row;
    if constexpr (kGated && kLayout != W1Layout::up_gate) row = w1_row<kLayout, true>((r / 8) % 2, j, I);
    else row = kGated ? static_cast<i64>((r / 8) % 2) * I + j : static_cast<i64>(j);
    return w1e + row * H;
}

template <Dtype D>
__device__ __forceinline__ u32 act_pack2(float a, float b)
{
    return pack2(from_float<D>(a), from_float<D>(b));
}

// ---- large path: tokens on M (128), weight rows on N (128) ----------------------------------

// The large path's epilogue: the activation of the accumulators' fc1 values, stored in the dtype.
template <Dtype D, int kAct, class X, class Main>
__device__ __forceinline__ void gemm1_large_epilogue(const mj_layer_params &p, const ActParams &act,
                                                     const typename Main::Acc &acc, const RowTile &tile, int j0,
                                                     int I)
{
    constexpr bool kGated = act_is_gated(kAct);
    const int e = tile.expert;
    u16 *inter = reinterpret_cast<u16 *>(p.ws_inter);
#pragma unroll
    for (int mf = 0; mf < 4; ++mf)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int m = Main::a_index(mf, h);
            if (m >= tile.rows) continue;
            u16 *dst = inter + static_cast<i64>(tile.row0 + m) * I;
            if constexpr (kGated) {
#pragma unroll
                for (int pr = 0; pr < 2; ++pr) {
                    // n8 fragment 2pr covers tile rows wn·32 + 16pr + [0, 8): up rows of
                    // columns j0 + (wn·2 + pr)·8 + [0, 8); b_index gives 2t within them
                    const int j = j0 + (Main::b_index(2 * pr, 0) / 16) * 8 + Main::b_index(2 * pr, 0) % 8;
                    if (j >= I) continue;
                    const float *u = acc.c[mf][2 * pr];
                    const float *g = acc.c[mf][2 * pr + 1];
                    const u32 v = act_pack2<D>(fc1_act<D, kAct, X>(p, act, e, I, j, u[2 * h], g[2 * h]),
                                               fc1_act<D, kAct, X>(p, act, e, I, j + 1, u[2 * h + 1], g[2 * h + 1]));
                    *reinterpret_cast<u32 *>(dst + j) = v;
                }
            } else {
#pragma unroll
                for (int nf = 0; nf < 4; ++nf) {
                    const int j = j0 + Main::b_index(nf, 0);
                    if (j >= I) continue; // I % 8 == 0: both columns in or both out
                    const float *c = acc.c[mf][nf];
                    *reinterpret_cast<u32 *>(dst + j) = act_pack2<D>(fc1_act<D, kAct, X>(p, act, e, I, j, c[2 * h], 0.0f),
                                                                     fc1_act<D, kAct, X>(p, act, e, I, j + 1, c[2 * h + 1], 0.0f));
                }
            }
        }
}

template <Dtype D, int kAct, class X = PlainLayer>
__device__ __forceinline__ void gemm1_act_large(const mj_layer_params &p, const ActParams &spec_act, int H,
                                                int I, int k, unsigned char *smem)
{
    constexpr bool kGated = act_is_gated(kAct);
    constexpr int BM = MJ_MMA_LARGE_BM, BN = MJ_MMA_LARGE_BN;
    constexpr int kCols = kGated ? BN / 2 : BN; // intermediate columns per CTA
    using Main = MmaMainloop<D, MJ_MMA_LARGE_THREADS, BM, BN, MJ_MMA_LARGE_STAGES, 2, 4, 4, 4>;
    static_assert(Main::kSmemBytes == MJ_MMA_LARGE_SMEM, "host and device must agree on shared memory");

    // 1-D grid in grouped raster order (raster_grouped): weight tiles and x rows reused in L2.
    const int n_tiles = (I + kCols - 1) / kCols;
    int row_tile, col_tile;
    raster_grouped(static_cast<int>(blockIdx.x), n_tiles, p.max_tiles, &row_tile, &col_tile);
    RowTile tile;
    if (!find_row_tile<BM>(p, row_tile, &tile)) return; // past the real tiles: whole CTA
    const int j0 = col_tile * kCols;
    const i64 rows1 = kGated ? 2 * static_cast<i64>(I) : static_cast<i64>(I);

    const u16 *x = reinterpret_cast<const u16 *>(p.x);
    const u16 *w1e = reinterpret_cast<const u16 *>(p.w1) + static_cast<i64>(tile.expert) * rows1 * H;
    const int *rows = reinterpret_cast<const int *>(p.ws_rows) + tile.row0;

    auto a_row = [&](int m) -> const u16 * {
        if (m >= tile.rows) return nullptr;
        return x + static_cast<i64>(rows[m] / k) * H; // rows hold pair indices t*k + slot
    };
    auto b_row = [&](int r) -> const u16 * { return w1_tile_row<kGated, X::kLayout>(w1e, r, j0, I, H); };

    typename Main::Acc acc;
    Main::run(smem, a_row, b_row, H, acc);

    // ---- epilogue: (b1,) activation, round once, 4-byte stores of 2 adjacent columns ----
    with_expert_act<kAct, X::kOverrides>(p, spec_act, tile.expert, [&](const ActParams &act) {
        gemm1_large_epilogue<D, kAct, X, Main>(p, act, acc, tile, j0, I);
    });
}

// ---- small path: weight rows on M (64), tokens on N (16) ------------------------------------

// The small path's epilogue: weight rows on M, so a thread's fc1 values are one column's u and
// g of its tokens.
template <Dtype D, int kAct, class X, class Main>
__device__ __forceinline__ void gemm1_small_epilogue(const mj_layer_params &p, const ActParams &act,
                                                     const typename Main::Acc &acc, const RowTile &tile, int j0,
                                                     int I)
{
    constexpr bool kGated = act_is_gated(kAct);
    const int e = tile.expert;
    u16 *inter = reinterpret_cast<u16 *>(p.ws_inter);
    const int g8 = Main::a_index(0, 0); // warp's first row + lane / 4
#pragma unroll
    for (int nf = 0; nf < 2; ++nf)
#pragma unroll
        for (int q = 0; q < 2; ++q) {
            const int n = Main::b_index(nf, q);
            if (n >= tile.rows) continue;
            u16 *dst = inter + static_cast<i64>(tile.row0 + n) * I;
            const float *c = acc.c[0][nf];
            if constexpr (kGated) {
                // rows g8 (up) and g8 + 8 (gate) of the warp's m16 = column j0 + wm·8 + lane/4
                const int j = j0 + (g8 / 16) * 8 + g8 % 8;
                if (j < I) dst[j] = from_float<D>(fc1_act<D, kAct, X>(p, act, e, I, j, c[q], c[2 + q]));
            } else {
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int j = j0 + g8 + 8 * h;
                    if (j < I) dst[j] = from_float<D>(fc1_act<D, kAct, X>(p, act, e, I, j, c[2 * h + q], 0.0f));
                }
            }
        }
}

// The block's tile is given: row tile `tile` (its pair indices at rows[0, tile.rows): ws_rows,
// or the shared copy of a block that routed for itself, decode_route.cuh) times the column
// tile col_tile. The entry kernels (tc_layer_stages.cuh) map a 1-D grid to the two, row
// tiles fastest: the CTAs of one weight tile run side by side, so an expert's weight tile
// comes from DRAM once however many token tiles it has.
template <Dtype D, int kAct, int kStages = MJ_MMA_SMALL_STAGES, class X = PlainLayer>
__device__ __forceinline__ void gemm1_act_small(const mj_layer_params &p, const ActParams &spec_act, int H,
                                                int I, int k, unsigned char *smem, const RowTile &tile,
                                                const int *rows, int col_tile)
{
    constexpr bool kGated = act_is_gated(kAct);
    constexpr int BW = MJ_MMA_SMALL_BW, BT = MJ_MMA_SMALL_BT;
    constexpr int kCols = kGated ? BW / 2 : BW;
    using Main = MmaMainloop<D, MJ_MMA_SMALL_THREADS, BW, BT, kStages, BW / 16, 1, 1, 2>;
    static_assert(Main::kSmemBytes == MJ_MMA_SMALL_STAGE_BYTES * kStages,
                  "host and device must agree on shared memory");

    const int j0 = col_tile * kCols;
    const i64 rows1 = kGated ? 2 * static_cast<i64>(I) : static_cast<i64>(I);

    const u16 *x = reinterpret_cast<const u16 *>(p.x);
    const u16 *w1e = reinterpret_cast<const u16 *>(p.w1) + static_cast<i64>(tile.expert) * rows1 * H;

    auto a_row = [&](int r) -> const u16 * { return w1_tile_row<kGated, X::kLayout>(w1e, r, j0, I, H); };
    auto b_row = [&](int n) -> const u16 * {
        if (n >= tile.rows) return nullptr;
        return x + static_cast<i64>(rows[n] / k) * H;
    };

    typename Main::Acc acc;
    Main::run(smem, a_row, b_row, H, acc);
    // Only now may GEMM2's blocks be scheduled (common/grid_dep.cuh): triggered at the start,
    // they took the SMs that freed first while this grid's last wave ran and stacked up to
    // three long decode-GEMM2 blocks on one SM.
    grid_dep_launch();

    // ---- epilogue: 2-byte stores (a decode intermediate is a few KB) ----
    with_expert_act<kAct, X::kOverrides>(p, spec_act, tile.expert, [&](const ActParams &act) {
        gemm1_small_epilogue<D, kAct, X, Main>(p, act, acc, tile, j0, I);
    });
}

} // namespace mj
