// This file contains GEMM1 with the activation fused into its epilogue: a block owns
// BLOCK_M gathered token rows x BLOCK_N intermediate columns of ONE local expert e and
// writes a[row, j] = act(fc1) to the intermediate, once, in the spec dtype.
//
//   A row m   x[token(m)]: gathered through the row list, no permuted copy of x
//   B rows    ungated: W1[e] row j;  gated: W1[e] row j (up, u: FIRST half) AND row I + j
//             (gate, g: SECOND half), both in the same tile, so act(u, g) needs no exchange
//   output    intermediate[position, j], position = the row's index in the row list, so
//             GEMM2 reads each expert's rows contiguously
#pragma once

#include "act.cuh"
#include "common/params.h"
#include "common/types.cuh"
#include "permute.cuh"
#include "simt_mainloop.cuh"

namespace mj {

template <Dtype D, int kAct, int BLOCK_M, int BLOCK_N, int BLOCK_K>
__device__ __forceinline__ void gemm1_act(const mj_layer_params &p, const ActParams &act, int H,
                                          int I, int k)
{
    constexpr bool kGated = act_is_gated(kAct);
    using Main = SimtMainloop<D, BLOCK_M, BLOCK_N, BLOCK_K, kGated ? 2 : 1>;
    static_assert(Main::TN == 4, "the epilogue stores 4 columns (8 bytes) per thread and row");
    __shared__ typename Main::Smem smem;

    RowTile tile;
    if (!find_row_tile<BLOCK_M>(p, blockIdx.x, &tile)) return; // past the real tiles: whole block
    const int n0 = blockIdx.y * BLOCK_N;
    const i64 rows1 = kGated ? 2 * static_cast<i64>(I) : static_cast<i64>(I);

    const u16 *x = reinterpret_cast<const u16 *>(p.x);
    const u16 *w1 = reinterpret_cast<const u16 *>(p.w1) + static_cast<i64>(tile.expert) * rows1 * H;
    const int *rows = reinterpret_cast<const int *>(p.ws_rows) + tile.row0;

    auto a_row = [&](int m) -> const u16 * {
        if (m >= tile.rows) return nullptr;
        const i64 token = rows[m] / k; // rows hold pair indices t*k + slot
        return x + token * H;
    };
    auto b_row = [&](int n) -> const u16 * {
        const int half = n / BLOCK_N; // 0: up (u), 1: gate (g)
        const int j = n0 + n % BLOCK_N;
        if (j >= I) return nullptr;
        return w1 + (static_cast<i64>(half) * I + j) * H;
    };

    typename Main::Acc acc;
    Main::run(smem, a_row, b_row, H, acc);

    // ---- epilogue: activation, round once to dtype, 8-byte stores ----
    u16 *inter = reinterpret_cast<u16 *>(p.ws_inter);
    const int c = n0 + Main::thread_col(0);
    if (c >= I) return; // I % 8 == 0 and c % 4 == 0: the thread's 4 columns are all in or all out
#pragma unroll
    for (int i = 0; i < Main::TM; ++i) {
        const int r = Main::thread_row(i);
        if (r >= tile.rows) continue;
        u16 o[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            float a;
            if constexpr (kGated) a = apply_gated_act<kAct>(acc.v[i][0][j], acc.v[i][1][j], act);
            else a = apply_act<kAct>(acc.v[i][0][j], act);
            o[j] = from_float<D>(a);
        }
        Vec8 v;
        v.w[0] = pack2(o[0], o[1]);
        v.w[1] = pack2(o[2], o[3]);
        *reinterpret_cast<Vec8 *>(inter + static_cast<i64>(tile.row0 + r) * I + c) = v;
    }
}

} // namespace mj
