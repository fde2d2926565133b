// This file contains GEMM2 of the `mma` backend in its two paths: intermediate · W2[e]ᵀ in
// fp32 for one local expert's rows, written as y[pair, h] (fp32) so that the shared finalize
// stage sums a token's k slots in a fixed order (no float atomics: bit-identical reruns).
//
//   large path: intermediate rows (contiguous positions of the row list) on M (128), W2 rows
//               on N (128); 8-byte stores of 2 adjacent h
//   small path: W2 rows on M (64), intermediate rows on N (16): the decode path, where the
//               weights are what must stream at full bandwidth; split along K into
//               p.gemm2_splits runs of whole k tiles when the grid is too small to keep two
//               CTAs on every SM (common/mma_params.h), run s writing its partial sums to
//               copy s of y
#pragma once

#include "common/mma_params.h"
#include "common/params.h"
#include "common/types.cuh"
#include "mma_mainloop.cuh"
#include "permute.cuh"

namespace mj {

// Two adjacent fp32 outputs, one 8-byte store (types.cuh brings no toolkit vector types).
struct alignas(8) Float2 {
    float v[2];
};

template <Dtype D>
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

    const int *rows = reinterpret_cast<const int *>(p.ws_rows) + tile.row0;
    float *y = reinterpret_cast<float *>(p.ws_y);
#pragma unroll
    for (int mf = 0; mf < 4; ++mf)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int m = Main::a_index(mf, h);
            if (m >= tile.rows) continue;
            float *dst = y + static_cast<i64>(rows[m]) * H;
#pragma unroll
            for (int nf = 0; nf < 4; ++nf) {
                const int col = h0 + Main::b_index(nf, 0);
                if (col >= H) continue; // H % 8 == 0: both columns in or both out
                Float2 v;
                v.v[0] = acc.c[mf][nf][2 * h];
                v.v[1] = acc.c[mf][nf][2 * h + 1];
                *reinterpret_cast<Float2 *>(dst + col) = v;
            }
        }
}

// K split `split` of a decode GEMM2 over I: whole k tiles [k0, k0 + klen) of every row
// (klen <= 0: a zero partial sum).
__device__ __forceinline__ void gemm2_split_range(int I, int splits, int split, int *k0, int *klen)
{
    const int k_tiles = (I + MJ_MMA_BK - 1) / MJ_MMA_BK;
    const int k_per = (k_tiles + splits - 1) / splits * MJ_MMA_BK;
    *k0 = split * k_per;
    *klen = I - *k0 < k_per ? I - *k0 : k_per;
}

template <Dtype D>
__device__ __forceinline__ void gemm2_small(const mj_layer_params &p, int H, int I, unsigned char *smem)
{
    constexpr int BW = MJ_MMA_SMALL_BW, BT = MJ_MMA_SMALL_BT;
    using Main = MmaMainloop<D, MJ_MMA_SMALL_THREADS, BW, BT, MJ_MMA_SMALL_STAGES, BW / 16, 1, 1, 2>;

    // block -> (row tile, column tile, K split), the row tile fastest (as without splits)
    const int bid = static_cast<int>(blockIdx.x);
    const int col_tiles = (H + BW - 1) / BW;
    const int rest = bid / p.max_tiles;
    const int h0 = (rest % col_tiles) * BW, split = rest / col_tiles;
    RowTile tile;
    if (!find_row_tile<BT>(p, bid % p.max_tiles, &tile)) return;
    static_assert(Main::BK == MJ_MMA_BK, "gemm2_split_range splits in k tiles of MJ_MMA_BK");
    int k0, klen;
    gemm2_split_range(I, p.gemm2_splits > 1 ? p.gemm2_splits : 1, split, &k0, &klen);

    const u16 *inter = reinterpret_cast<const u16 *>(p.ws_inter) + static_cast<i64>(tile.row0) * I + k0;
    const u16 *w2e = reinterpret_cast<const u16 *>(p.w2) + static_cast<i64>(tile.expert) * H * I + k0;

    auto a_row = [&](int r) -> const u16 * { return h0 + r < H ? w2e + static_cast<i64>(h0 + r) * I : nullptr; };
    auto b_row = [&](int n) -> const u16 * { return n < tile.rows ? inter + static_cast<i64>(n) * I : nullptr; };

    typename Main::Acc acc;
    Main::run(smem, a_row, b_row, klen, acc);

    const int *rows = reinterpret_cast<const int *>(p.ws_rows) + tile.row0;
    float *y = reinterpret_cast<float *>(p.ws_y) + static_cast<i64>(split) * p.num_pairs * H;
#pragma unroll
    for (int nf = 0; nf < 2; ++nf)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const int n = Main::b_index(nf, e);
            if (n >= tile.rows) continue;
            float *dst = y + static_cast<i64>(rows[n]) * H;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int col = h0 + Main::a_index(0, h);
                if (col < H) dst[col] = acc.c[0][nf][2 * h + e];
            }
        }
}

} // namespace mj
