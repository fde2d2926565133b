// This file contains the SIMT GEMM mainloop shared by GEMM1 and GEMM2: a block computes a
// BLOCK_M x (kHalves x BLOCK_N) tile of A · Bᵀ, where A's rows and B's rows are both
// K-contiguous rows found through caller-supplied row functions (so GEMM1 gathers token
// rows straight from x, and reads the up and gate rows of W1 in one tile), in any operand
// format of operand.cuh (16-bit, e4m3, int4, e2m1), dequantized to fp32 on the way into
// shared memory. Only the fp32 accumulator crosses to the epilogue.
//
//   threads      256 = 16 (ty, rows) x 16 (tx, columns)
//   thread tile  TM = BLOCK_M/16 rows x, per half h, TN = BLOCK_N/16 adjacent columns
//                h·BLOCK_N + tx·TN + [0, TN): the same tx owns column j of EVERY half, so a
//                gated epilogue finds u and g of one output in one thread's registers
//   k loop       global -> registers (one 8-element chunk per load: 16, 8 or 4 bytes, plus
//                its scale; the next stage prefetched while this one computes) -> shared
//                memory as dequantized fp32, transposed to [k][row]
//
// NOTES: each output is Σ_k a·b accumulated with fmaf in increasing k, by one thread, so
// the result does not depend on which block or which row position computes it. Zero-filled
// padding (rows past the tile, columns past N, k past K) adds exact zeros to nothing that
// is stored. K must be a multiple of 8 (one chunk is wholly in or out of range).
#pragma once

#include "common/params.h"
#include "common/types.cuh"
#include "operand.cuh"

namespace mj {

template <class AOp, class BOp, int BLOCK_M, int BLOCK_N, int BLOCK_K, int kHalves>
struct SimtMainloop {
    static constexpr int kThreads = MJ_SIMT_GEMM_THREADS;
    static constexpr int kThreadRows = 16;
    static constexpr int kThreadCols = 16;
    static constexpr int TM = BLOCK_M / kThreadRows;
    static constexpr int TN = BLOCK_N / kThreadCols;
    static constexpr int kBRows = kHalves * BLOCK_N;
    static constexpr int kChunksPerRow = BLOCK_K / 8;
    static constexpr int kAChunks = BLOCK_M * kChunksPerRow;
    static constexpr int kBChunks = kBRows * kChunksPerRow;
    static constexpr int kAPerThread = (kAChunks + kThreads - 1) / kThreads;
    static constexpr int kBPerThread = (kBChunks + kThreads - 1) / kThreads;

    static_assert(kThreadRows * kThreadCols == kThreads, "the thread grid must cover the block exactly");
    static_assert(BLOCK_M % kThreadRows == 0 && TM >= 1 && TM <= 4,
                  "BLOCK_M must be 16, 32, 48 or 64 (16 thread rows, 1..4 rows each)");
    static_assert(BLOCK_N % kThreadCols == 0 && TN >= 1 && 8 % TN == 0,
                  "BLOCK_N/16 must divide 8, so a thread's columns are all inside N or all past it");
    static_assert(BLOCK_K % 8 == 0 && BLOCK_K >= 8, "BLOCK_K must be a multiple of the 8-element load");
    static_assert(kHalves == 1 || kHalves == 2, "a tile has one half (ungated, GEMM2) or two (gated)");
    static_assert(kAPerThread <= 4 && kBPerThread <= 4, "at most 4 prefetched chunks per operand per thread");

    struct Smem {
        alignas(16) float a[BLOCK_K][BLOCK_M];
        alignas(16) float b[BLOCK_K][kBRows];
    };
    static_assert(sizeof(Smem) <= 48 * 1024,
                  "static shared memory must stay within 48 KiB (no opt-in attribute is set)");

    struct Acc {
        float v[TM][kHalves][TN];
    };

    // Per thread: the row of each chunk it loads (data == nullptr: zero-fill), fixed for the
    // whole k loop; the chunk's k offset inside a stage is (chunk / rows) * 8.
    struct Sources {
        Src a[kAPerThread];
        Src b[kBPerThread];
    };

    struct Staged {
        typename AOp::Raw a[kAPerThread];
        typename BOp::Raw b[kBPerThread];
    };

    __device__ __forceinline__ static void load_stage(const Sources &src, int k0, int K, Staged &st)
    {
        const int tid = threadIdx.x;
#pragma unroll
        for (int s = 0; s < kAPerThread; ++s) {
            const int c = tid + s * kThreads;
            if (c < kAChunks) st.a[s] = AOp::load(src.a[s], k0 + (c / BLOCK_M) * 8, K);
        }
#pragma unroll
        for (int s = 0; s < kBPerThread; ++s) {
            const int c = tid + s * kThreads;
            if (c < kBChunks) st.b[s] = BOp::load(src.b[s], k0 + (c / kBRows) * 8, K);
        }
    }

    // Consecutive threads take consecutive rows of one k chunk, so each transposed store of
    // a warp fills 32 consecutive floats: no bank conflicts.
    __device__ __forceinline__ static void store_stage(const Staged &st, Smem &sm)
    {
        const int tid = threadIdx.x;
#pragma unroll
        for (int s = 0; s < kAPerThread; ++s) {
            const int c = tid + s * kThreads;
            if (c < kAChunks) {
                const int m = c % BLOCK_M, kb = (c / BLOCK_M) * 8;
#pragma unroll
                for (int i = 0; i < 8; ++i) sm.a[kb + i][m] = AOp::value(st.a[s], i);
            }
        }
#pragma unroll
        for (int s = 0; s < kBPerThread; ++s) {
            const int c = tid + s * kThreads;
            if (c < kBChunks) {
                const int n = c % kBRows, kb = (c / kBRows) * 8;
#pragma unroll
                for (int i = 0; i < 8; ++i) sm.b[kb + i][n] = BOp::value(st.b[s], i);
            }
        }
    }

    __device__ __forceinline__ static void compute_stage(const Smem &sm, Acc &acc)
    {
        const int tx = threadIdx.x % kThreadCols, ty = threadIdx.x / kThreadCols;
#pragma unroll
        for (int kk = 0; kk < BLOCK_K; ++kk) {
            float a[TM], b[kHalves][TN];
#pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = sm.a[kk][ty * TM + i];
#pragma unroll
            for (int h = 0; h < kHalves; ++h)
#pragma unroll
                for (int j = 0; j < TN; ++j) b[h][j] = sm.b[kk][h * BLOCK_N + tx * TN + j];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int h = 0; h < kHalves; ++h)
#pragma unroll
                    for (int j = 0; j < TN; ++j) acc.v[i][h][j] = fmaf(a[i], b[h][j], acc.v[i][h][j]);
        }
    }

    // a_row(m) / b_row(n): the Src of tile row m of A / row n of B (n in [0, kBRows)), with
    // data == nullptr for a padding row. K: the reduction length (multiple of 8).
    template <class ARow, class BRow>
    __device__ __forceinline__ static void run(Smem &sm, ARow a_row, BRow b_row, int K, Acc &acc)
    {
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int h = 0; h < kHalves; ++h)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc.v[i][h][j] = 0.0f;

        Sources src;
        const int tid = threadIdx.x;
#pragma unroll
        for (int s = 0; s < kAPerThread; ++s) {
            const int c = tid + s * kThreads;
            src.a[s] = c < kAChunks ? a_row(c % BLOCK_M) : src_pad();
        }
#pragma unroll
        for (int s = 0; s < kBPerThread; ++s) {
            const int c = tid + s * kThreads;
            src.b[s] = c < kBChunks ? b_row(c % kBRows) : src_pad();
        }

        Staged st;
        load_stage(src, 0, K, st);
        for (int k0 = 0; k0 < K; k0 += BLOCK_K) {
            store_stage(st, sm);
            __syncthreads();
            if (k0 + BLOCK_K < K) load_stage(src, k0 + BLOCK_K, K, st); // overlaps the math below
            compute_stage(sm, acc);
            __syncthreads();
        }
    }

    // Where this thread's outputs live in the tile.
    __device__ __forceinline__ static int thread_row(int i) { return (threadIdx.x / kThreadCols) * TM + i; }
    __device__ __forceinline__ static int thread_col(int j) { return (threadIdx.x % kThreadCols) * TN + j; }
};

} // namespace mj
