// This file contains GEMM2: a block owns BLOCK_M rows of ONE local expert e's slice of the
// intermediate x BLOCK_N hidden columns, computes intermediate · W2[e]ᵀ in fp32 and writes
// y[pair, h] for the (token, slot) pair each row belongs to, in fp32, so that finalize can
// sum the k slots of a token in a fixed order.
#pragma once

#include "common/params.h"
#include "common/types.cuh"
#include "permute.cuh"
#include "simt_mainloop.cuh"

namespace mj {

template <Dtype D, int BLOCK_M, int BLOCK_N, int BLOCK_K>
__device__ __forceinline__ void gemm2(const mj_layer_params &p, int H, int I)
{
    using Main = SimtMainloop<D, BLOCK_M, BLOCK_N, BLOCK_K, 1>;
    static_assert(Main::TN == 4, "the epilogue stores 4 fp32 columns (16 bytes) per thread and row");
    __shared__ typename Main::Smem smem;

    RowTile tile;
    if (!find_row_tile<BLOCK_M>(p, blockIdx.x, &tile)) return; // past the real tiles: whole block
    const int n0 = blockIdx.y * BLOCK_N;

    const u16 *inter = reinterpret_cast<const u16 *>(p.ws_inter) + static_cast<i64>(tile.row0) * I;
    const u16 *w2 = reinterpret_cast<const u16 *>(p.w2) + static_cast<i64>(tile.expert) * H * I;

    auto a_row = [&](int m) -> const u16 * { return m < tile.rows ? inter + static_cast<i64>(m) * I : nullptr; };
    auto b_row = [&](int n) -> const u16 * {
        const int h = n0 + n;
        return h < H ? w2 + static_cast<i64>(h) * I : nullptr;
    };

    typename Main::Acc acc;
    Main::run(smem, a_row, b_row, I, acc);

    // ---- epilogue: fp32 rows of y addressed by pair index ----
    const int c = n0 + Main::thread_col(0);
    if (c >= H) return; // H % 8 == 0 and c % 4 == 0: all 4 columns in or all out
    const int *rows = reinterpret_cast<const int *>(p.ws_rows) + tile.row0;
    float *y = reinterpret_cast<float *>(p.ws_y);
#pragma unroll
    for (int i = 0; i < Main::TM; ++i) {
        const int r = Main::thread_row(i);
        if (r >= tile.rows) continue;
        const i64 pair = rows[r];
        Float4 v;
#pragma unroll
        for (int j = 0; j < 4; ++j) v.v[j] = acc.v[i][0][j];
        *reinterpret_cast<Float4 *>(y + pair * H + c) = v;
    }
}

} // namespace mj
