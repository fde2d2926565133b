// This file contains GEMM1 with the activation fused into its epilogue: a block owns
// BLOCK_M gathered token rows x BLOCK_N intermediate columns of ONE local expert e and
// writes a[row, j] = act(fc1 + b1) to the intermediate, once, in the spec dtype.
//
//   A row m   x[token(m)] (or its e4m3 copy for fp8): gathered through the row list, no
//             permuted copy of x
//   B rows    ungated: W1[e] row j;  gated: the up row of j (u) AND the gate row of j (g),
//             both in the same tile, so act(u, g) needs no exchange. Which physical rows
//             those are is the spec's w1_layout (w1_row below); scales, zero points and b1
//             are indexed by the same physical row
//   output    intermediate[position, j], position = the row's index in the row list, so
//             GEMM2 reads each expert's rows contiguously
#pragma once

#include "act.cuh"
#include "weight_layout.cuh"
#include "common/params.h"
#include "common/types.cuh"
#include "operand.cuh"
#include "permute.cuh"
#include "simt_mainloop.cuh"

namespace mj {

template <Dtype D, Quant Q, int kInt4Group, bool kInt4Zero, W1Layout kLayout, bool kHasB1, int kAct,
          int kNParams, int BLOCK_M, int BLOCK_N, int BLOCK_K>
__device__ __forceinline__ void gemm1_act(const mj_layer_params &p, const ActParams &spec_act,
                                          Fp8Act x_mode, int H, int I, int k)
{
    constexpr bool kGated = act_is_gated(kAct);
    using AOp = typename ActOperandOf<Q, D>::type;
    using BOp = typename WeightOperandOf<Q, D, kInt4Group, kInt4Zero>::type;
    using Main = SimtMainloop<AOp, BOp, BLOCK_M, BLOCK_N, BLOCK_K, kGated ? 2 : 1>;
    static_assert(Main::TN == 4, "the epilogue stores 4 columns (8 bytes) per thread and row");
    __shared__ typename Main::Smem smem;

    RowTile tile;
    if (!find_row_tile<BLOCK_M>(p, blockIdx.x, &tile)) return; // past the real tiles: whole block
    const int n0 = blockIdx.y * BLOCK_N;
    const i64 rows1 = kGated ? 2 * static_cast<i64>(I) : static_cast<i64>(I);
    const int *rows = reinterpret_cast<const int *>(p.ws_rows) + tile.row0;

    // ---- A: token rows of x (16-bit), or of its e4m3 copy with the scale of its mode ----
    auto a_row = [&](int m) -> Src {
        if (m >= tile.rows) return src_pad();
        const i64 token = rows[m] / k; // rows hold pair indices t*k + slot
        Src s = src_pad();
        if constexpr (Q == Quant::fp8_block) {
            s.data = reinterpret_cast<const u8 *>(p.ws_xq) + token * H;
            s.scale = reinterpret_cast<const u8 *>(reinterpret_cast<const float *>(p.ws_xscale) +
                                                   token * (H / MJ_FP8_BLOCK));
        } else if constexpr (Q == Quant::fp8_tensor) {
            if (x_mode == Fp8Act::static_scale) {
                s.data = reinterpret_cast<const u8 *>(p.x) + token * H;
                s.s0 = reinterpret_cast<const float *>(p.x_scale)[0];
            } else {
                s.data = reinterpret_cast<const u8 *>(p.ws_xq) + token * H;
                s.s0 = reinterpret_cast<const float *>(p.ws_xscale)[x_mode == Fp8Act::token ? token : 0];
            }
        } else {
            s.data = reinterpret_cast<const u8 *>(p.x) + token * H * 2;
        }
        return s;
    };
    // ---- B: the W1 rows of the tile's columns, in the spec's layout ----
    auto b_row = [&](int n) -> Src {
        const int half = n / BLOCK_N; // 0: up (u), 1: gate (g)
        const int j = n0 + n % BLOCK_N;
        if (j >= I) return src_pad();
        return weight_row<BOp, Q, kInt4Group>(p.w1, p.w1_scale, p.w1_zero, tile.expert, rows1,
                                              w1_row<kLayout, kGated>(half, j, I), H);
    };

    typename Main::Acc acc;
    Main::run(smem, a_row, b_row, H, acc);

    // ---- epilogue: b1, activation, round once to dtype, 8-byte stores ----
    const ActParams act = expert_act_params<kNParams>(p, spec_act, tile.expert);
    u16 *inter = reinterpret_cast<u16 *>(p.ws_inter);
    const int c = n0 + Main::thread_col(0);
    if (c >= I) return; // I % 8 == 0 and c % 4 == 0: the thread's 4 columns are all in or all out
    float bias[2][4];
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            bias[h][j] = 0.0f;
            if constexpr (kHasB1) {
                if (h == 0 || kGated) {
                    const u16 *b1 = reinterpret_cast<const u16 *>(p.b1) + static_cast<i64>(tile.expert) * rows1;
                    bias[h][j] = to_float<D>(b1[w1_row<kLayout, kGated>(h, c + j, I)]);
                }
            }
        }
#pragma unroll
    for (int i = 0; i < Main::TM; ++i) {
        const int r = Main::thread_row(i);
        if (r >= tile.rows) continue;
        u16 o[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            float u = acc.v[i][0][j], g = kGated ? acc.v[i][kGated ? 1 : 0][j] : 0.0f;
            if constexpr (kHasB1) { // only then: x + 0.0f would turn a −0 into +0
                u += bias[0][j];
                g += bias[1][j];
            }
            float a;
            if constexpr (kGated) a = apply_gated_act<kAct>(u, g, act);
            else a = apply_act<kAct>(u, act);
            o[j] = from_float<D>(a);
        }
        Vec8 v;
        v.w[0] = pack2(o[0], o[1]);
        v.w[1] = pack2(o[2], o[3]);
        *reinterpret_cast<Vec8 *>(inter + static_cast<i64>(tile.row0 + r) * I + c) = v;
    }
}

} // namespace mj
