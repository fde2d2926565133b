// This file contains GEMM2: a block owns BLOCK_M rows of ONE local expert e's slice of the
// intermediate x BLOCK_N hidden columns, computes intermediate · W2[e]ᵀ in fp32, adds b2[e]
// when the spec has it, and writes y[pair, h] (+ b2) for the (token, slot) pair each row
// belongs to, in fp32, so that finalize can sum the k slots of a token in a fixed order:
// out = Σ w·(y + b2). For the fp8 formats the A operand is the e4m3 copy of the intermediate
// (mj_inter_quant) with its scales.
#pragma once

#include "common/params.h"
#include "common/types.cuh"
#include "operand.cuh"
#include "permute.cuh"
#include "simt_mainloop.cuh"

namespace mj {

template <Dtype D, Quant Q, int kInt4Group, bool kInt4Zero, bool kHasB2, int BLOCK_M, int BLOCK_N, int BLOCK_K>
__device__ __forceinline__ void gemm2(const mj_layer_params &p, bool inter_per_row, int H, int I)
{
    using AOp = typename ActOperandOf<Q, D>::type;
    using BOp = typename WeightOperandOf<Q, D, kInt4Group, kInt4Zero>::type;
    using Main = SimtMainloop<AOp, BOp, BLOCK_M, BLOCK_N, BLOCK_K, 1>;
    static_assert(Main::TN == 4, "the epilogue stores 4 fp32 columns (16 bytes) per thread and row");
    __shared__ typename Main::Smem smem;

    RowTile tile;
    if (!find_row_tile<BLOCK_M>(p, blockIdx.x, &tile)) return; // past the real tiles: whole block
    const int n0 = blockIdx.y * BLOCK_N;

    // ---- A: rows of the intermediate (position-indexed), or of its e4m3 copy ----
    auto a_row = [&](int m) -> Src {
        if (m >= tile.rows) return src_pad();
        const i64 pos = static_cast<i64>(tile.row0) + m;
        Src s = src_pad();
        if constexpr (Q == Quant::fp8_block) {
            s.data = reinterpret_cast<const u8 *>(p.ws_interq) + pos * I;
            s.scale = reinterpret_cast<const u8 *>(reinterpret_cast<const float *>(p.ws_interscale) +
                                                   pos * (I / MJ_FP8_BLOCK));
        } else if constexpr (Q == Quant::fp8_tensor) {
            s.data = reinterpret_cast<const u8 *>(p.ws_interq) + pos * I;
            s.s0 = reinterpret_cast<const float *>(p.ws_interscale)[inter_per_row ? pos : 0];
        } else {
            s.data = reinterpret_cast<const u8 *>(p.ws_inter) + pos * I * 2;
        }
        return s;
    };
    // ---- B: rows h of W2[e] ----
    auto b_row = [&](int n) -> Src {
        const int h = n0 + n;
        if (h >= H) return src_pad();
        return weight_row<BOp, Q, kInt4Group>(p.w2, p.w2_scale, p.w2_zero, tile.expert, H, h, I);
    };

    typename Main::Acc acc;
    Main::run(smem, a_row, b_row, I, acc);

    // ---- epilogue: fp32 rows of y addressed by pair index ----
    const int c = n0 + Main::thread_col(0);
    if (c >= H) return; // H % 8 == 0 and c % 4 == 0: all 4 columns in or all out
    const int *rows = reinterpret_cast<const int *>(p.ws_rows) + tile.row0;
    float *y = reinterpret_cast<float *>(p.ws_y);
    float bias[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if constexpr (kHasB2) {
        const u16 *b2 = reinterpret_cast<const u16 *>(p.b2) + static_cast<i64>(tile.expert) * H;
#pragma unroll
        for (int j = 0; j < 4; ++j) bias[j] = to_float<D>(b2[c + j]);
    }
#pragma unroll
    for (int i = 0; i < Main::TM; ++i) {
        const int r = Main::thread_row(i);
        if (r >= tile.rows) continue;
        const i64 pair = rows[r];
        Float4 v;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            v.v[j] = acc.v[i][0][j];
            if constexpr (kHasB2) v.v[j] += bias[j];
        }
        *reinterpret_cast<Float4 *>(y + pair * H + c) = v;
    }
}

} // namespace mj
