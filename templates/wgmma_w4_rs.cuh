// This file contains the `wgmma` layer's 4-bit prefill GEMMs with the weights as the wgmma's
// register operand (quant w4a16, mxfp4): the consumer warpgroups dequantize their own weight
// rows into A fragments in registers and multiply them with the activations in shared memory,
// so no dequantized weight is ever stored (the producer-decoding kernel of
// wgmma_w4_producer.cuh writes each weight to shared memory as 16 bits and reads it back, 17 %
// of its layer's time, docs/PERFORMANCE.md). The orientation is the decode path's: weight rows
// on M, tokens on N (mma_w4_mainloop.cuh, weights on A).
//
//   tile       MJ_WGMMA_W4_RS_BW = 256 weight rows (two m64 blocks per consumer warpgroup) x
//              128 token rows (the large tiles' row tiles: mj_expert_offsets tiles the rows by
//              128) x 64 k a stage, 8 stages; gated GEMM1's rows in groups of 16, 8 up rows then
//              the same 8 columns' gate rows (w4_w1_row), so a thread's two rows of an m16 are
//              one column's up and gate; wgmma.m64n128k16, A from registers, B (the
//              activations) K-major with the 128B swizzle, as the 16-bit kernels' A stages
//   producer   warpgroups 0 and 1, per stage: wait for its empty barrier, gather the token rows
//              (WgAGather, 4 rows x one 16-byte chunk per thread) and copy the packed weights
//              (thread t: 16 bytes each of k half t % 2 of tile rows t / 2 and t / 2 + 128),
//              all with cp.async arriving on the stage's full barrier (256 arrivals); the tile's
//              first weight row stands in for rows past N, whose outputs are never stored; k
//              past K is zero-filled
//   consumers  warpgroups 2 and 3, a k step (16 k) at a time: step i + 1 is decoded while
//              step i's two wgmmas (one per block) run. A thread's A fragment of k step s
//              holds, for its rows g and g + 8 of the m16, k 2t, 2t + 1 and 2t + 8, 2t + 9 (t =
//              lane % 4): byte t of packed words 2s and 2s + 1 of each row, so a thread loads 8
//              bytes of each of its four rows a step (loaded before the wait for step i - 1) and
//              decodes one pair per word (mma_w4_dequant.cuh: the same arithmetic and rounding
//              as every 4-bit GEMM). The scale groups come from global memory a stage ahead
//              (W::group; k past K gets scale 0, so it adds exact zeros)
//   epilogue   straight from the accumulators: a thread holds one output column (gated) or two
//              for 32 tokens; lanes l and l ^ 4 hold adjacent columns and trade one value of
//              each token pair, so each stores two adjacent columns of one token (4 bytes).
//              Biases, overrides and the W1 layouts as in every GEMM1 / GEMM2 epilogue
//              (weight_layout.cuh)
//
// Determinism: each output is a fixed sequence of wgmmas over k whose result depends on its
// weight row and token row only. (Machete's idea of dequantizing into the MMA's register
// operand, on the contract's packed layout: the k order of a fragment is fixed by the
// activations' layout, so each thread picks its byte of every word instead of owning a run.)
#pragma once

#include "common/wgmma_params.h"
#include "mma_w4_dequant.cuh"
#include "mma_w4_gemm.cuh"
#include "wgmma_gemm.cuh"
#include "wgmma_w4_producer.cuh"

namespace mj {

// The tile: what WgAGather and WgStages read of a shape, and the packed weights after each
// stage's activations.
struct WgW4RsShape {
    static constexpr int BM = MJ_WGMMA_BM;       // token rows (the wgmma's N); the row tiles' rows
    static constexpr int BW = MJ_WGMMA_W4_RS_BW; // weight rows (the wgmma's M)
    static constexpr int BK = MJ_WGMMA_BK;
    static constexpr int kBlocks = BW / (64 * MJ_WGMMA_CONSUMERS); // m64 blocks per consumer warpgroup
    static constexpr int kStages = MJ_WGMMA_W4_RS_STAGES;
    static constexpr int kProducerThreads = 128 * MJ_WGMMA_W4_PRODUCERS;
    static constexpr int kRowBytes = BK * 2;
    static constexpr int kChunks = 1, kLanesPerRow = 8;
    static constexpr int kRowsPerPass = kProducerThreads / kLanesPerRow;
    static constexpr int kRowsA = BM / kRowsPerPass;
    static constexpr u32 kXBytes = BM * kRowBytes;
    static constexpr int kWRowBytes = BK / 2;
    static constexpr u32 kWBytes = BW * kWRowBytes;
    static constexpr int kWCopies = BW * 2 / kProducerThreads; // 16-byte weight copies per producer thread
    static constexpr u32 kStageBytes = kXBytes + kWBytes;
    static_assert(kBlocks == 1 || kBlocks == 2, "a consumer warpgroup owns one or two m64 blocks of weight rows");
    static_assert(kWCopies * kProducerThreads == BW * 2, "the producer threads copy whole weight halves");
    static_assert(kStageBytes % 1024 == 0, "every stage's activations start on the swizzle's 1024-byte repeat");
    static_assert(kStages * kStageBytes + 1024 + 16 * kStages <= MJ_WGMMA_W4_SMEM,
                  "the stages and barriers fit the 4-bit GEMMs' shared memory");
};

// Tile row r's weight row of expert e, as its row in the [E_l · N, K] matrix (an int: the
// consumers keep four, where four W4Rows spilled): gated GEMM1 in w4_w1_row's groups of 16,
// GEMM2 rows h0 + r; a row past N reads the tile's first row.
template <WgGemm kKind, class X>
__device__ __forceinline__ int wg_w4rs_row(int e, int r, int col, int H, int I)
{
    constexpr bool kGated = kKind == WgGemm::gemm1_gated;
    constexpr int BW = WgW4RsShape::BW;
    if constexpr (kKind == WgGemm::gemm2) {
        const int h = col * BW + r;
        return e * H + (h < H ? h : col * BW);
    } else {
        constexpr int kCols = kGated ? BW / 2 : BW;
        const int rows1 = kGated ? 2 * I : I;
        const int j0 = col * kCols;
        const i64 n = w4_w1_row<kGated, X::kLayout>(r, j0, I);
        return e * rows1 + static_cast<int>(n >= 0 ? n : w4_w1_row<kGated, X::kLayout>(0, j0, I));
    }
}

// Row n of the GEMM's [E_l · N, K] 4-bit weights (W4Format::row).
template <class W, WgGemm kKind>
__device__ __forceinline__ W4Row wg_w4rs_w4row(const mj_layer_params &p, int n, int K)
{
    constexpr bool kGemm2 = kKind == WgGemm::gemm2;
    return W::row(reinterpret_cast<const void *>(kGemm2 ? p.w2 : p.w1),
                  reinterpret_cast<const void *>(kGemm2 ? p.w2_scale : p.w1_scale),
                  reinterpret_cast<const void *>(kGemm2 ? p.w2_zero : p.w1_zero), 0, 0, n, K);
}

// Warpgroups 0 and 1: the stages' activations and packed weights (see the top of this file).
template <class W, WgGemm kKind, class X>
__device__ __forceinline__ void wg_w4rs_producer(const mj_layer_params &p, int H, int I, int k,
                                                 const WgStages<WgW4RsShape> &sm, const WgSchedule sc)
{
    using S = WgW4RsShape;
    constexpr bool kGemm2 = kKind == WgGemm::gemm2;
    setmaxnreg_dec<MJ_WGMMA_W4_RS_PRODUCER_REGS>();
    // read after setmaxnreg: live across it, ptxas parks values in local memory
    const int row_tiles = reinterpret_cast<const int *>(p.ws_tile_offsets)[p.num_local_experts];
    const int total = row_tiles * sc.n_col;
    const int tid = threadIdx.x; // 0 .. S::kProducerThreads - 1
    WgAGather<S, kGemm2> a(p, H, I, tid);
    // weight copy i of this thread: k half tid % 2 of tile row tid / 2 + i·kProducerThreads / 2
    const int wh = tid % 2;
    PipeState<S::kStages> pipe;
    for (int t = sc.first_tile; t < total; t += sc.tile_step) {
        RowTile rt;
        int col, b_expert;
        bool shared;
        wg_tile_of<S::BM, false>(p, t, sc.n_col, row_tiles, row_tiles, 0u, &rt, &col, &b_expert, &shared);
        a.rows_of(p, rt, k);
        const u8 *w_src[S::kWCopies];
#pragma unroll
        for (int i = 0; i < S::kWCopies; ++i)
            w_src[i] = wg_w4rs_w4row<W, kKind>(
                           p, wg_w4rs_row<kKind, X>(rt.expert, tid / 2 + i * (S::kProducerThreads / 2), col, H, I), sc.K)
                           .data;
        for (int kt = 0; kt < sc.k_tiles; ++kt) {
            mbar_wait(sm.empty_bar(pipe.stage), pipe.phase ^ 1u);
            const u32 stage = sm.a(pipe.stage);
            a.copy(stage, kt, sc.K, rt);
            const int kw = kt * S::BK + wh * 32;
            const bool live = kw < sc.K; // K % 32 == 0: a half is all in or all out
#pragma unroll
            for (int i = 0; i < S::kWCopies; ++i)
                cp_async_16(stage + S::kXBytes + static_cast<u32>((tid + i * S::kProducerThreads) * 16), // row·32 + half·16
                            w_src[i] + (live ? kw / 2 : 0), live ? 16 : 0);
            cp_async_arrive_noinc(sm.full_bar(pipe.stage));
            pipe.advance();
        }
    }
    cp_async_wait_all(); // nothing of this thread may still write shared memory at exit
}

// The scale groups of a stage that a thread's rows use (row r + 8h of block b): one, or two for
// groups of 32.
template <class W>
struct WgW4RsGroups {
    static constexpr int kBlocks = WgW4RsShape::kBlocks;
    static constexpr int kPerStage = MJ_WGMMA_BK > W::kGroup ? MJ_WGMMA_BK / W::kGroup : 1;
    W4Group g[kBlocks][2][kPerStage];

    template <WgGemm kKind>
    __device__ __forceinline__ void load(const mj_layer_params &p, const int (&rows)[kBlocks][2], int kt, int K)
    {
#pragma unroll
        for (int b = 0; b < kBlocks; ++b)
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
                for (int q = 0; q < kPerStage; ++q) {
                    const int kq = kt * MJ_WGMMA_BK + q * W::kGroup;
                    g[b][h][q] = W::group(wg_w4rs_w4row<W, kKind>(p, rows[b][h], K), static_cast<unsigned>(kq) / W::kGroup,
                                          kq < K);
                }
    }
};

// The packed words of k step s (16 k) of the stage whose packed weights start at w_stage: of
// row r + 64b + 8h, words 2s and 2s + 1 (one 8-byte load a row).
__device__ __forceinline__ void wg_w4rs_load_step(u32 w_stage, int r, int s, u32 (&q)[WgW4RsShape::kBlocks][2][2])
{
#pragma unroll
    for (int b = 0; b < WgW4RsShape::kBlocks; ++b)
#pragma unroll
        for (int h = 0; h < 2; ++h)
            ld_shared_v2(w_stage + static_cast<u32>((r + 64 * b + 8 * h) * WgW4RsShape::kWRowBytes + 8 * s), q[b][h]);
}

// Those words decoded into each block's A fragment: a[b][2·half + h] is row r + 64b + 8h, k
// 2t + 8·half of the step: byte t of word 2s + half.
template <class W>
__device__ __forceinline__ void wg_w4rs_decode_step(const u32 (&q)[WgW4RsShape::kBlocks][2][2], int t, int s,
                                                    const WgW4RsGroups<W> &grp, u32 (&a)[WgW4RsShape::kBlocks][4])
{
    const int gq = WgW4RsGroups<W>::kPerStage == 2 ? s / 2 : 0; // groups of 32: k steps 0-1, 2-3
#pragma unroll
    for (int b = 0; b < WgW4RsShape::kBlocks; ++b)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int half = 0; half < 2; ++half)
                a[b][2 * half + h] = W::pair(q[b][h][half], W::aux(q[b][h][half]), t, grp.g[b][h][gq]);
}

template <int N>
__device__ __forceinline__ void fence_regs(u32 (&r)[N])
{
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+r"(r[i])::"memory");
}

// One consumer warpgroup's k loop over a tile, a k step at a time: step i's wgmmas (one per
// block) are issued on fragments decoded during step i - 1; then the wait for step i - 1's lets
// step i + 1 be decoded into the fragments step i - 1 read, while step i runs. A stage is
// released (one arrival per warp) once its last step is done. The fragments stay pinned
// (fence_regs) until their wgmmas are done, since the asm reads them asynchronously.
template <class W, Dtype D, WgGemm kKind>
__device__ __forceinline__ void wg_w4rs_k_loop(const mj_layer_params &p, const WgStages<WgW4RsShape> &sm, int k_tiles,
                                               int K, PipeState<WgW4RsShape::kStages> &pipe,
                                               const int (&rows)[WgW4RsShape::kBlocks][2], int r, int t, int lane,
                                               float (&acc)[WgW4RsShape::kBlocks][64])
{
    using S = WgW4RsShape;
    constexpr int kB = S::kBlocks;
    WgW4RsGroups<W> grp, nxt; // the stage's and the next one's, loaded a stage ahead
    grp.load<kKind>(p, rows, 0, K);
    u32 a[2][kB][4], q[kB][2][2];
    mbar_wait(sm.full_bar(pipe.stage), pipe.phase);
    wg_w4rs_load_step(sm.a(pipe.stage) + S::kXBytes, r, 0, q);
    wg_w4rs_decode_step<W>(q, t, 0, grp, a[0]);
#pragma unroll
    for (int b = 0; b < kB; ++b) fence_operands(acc[b]);
    int prev = -1; // the stage before, released after its last step's wait
    for (int kt = 0; kt < k_tiles; ++kt) {
        const int stage = pipe.stage;
        fence_proxy_async(); // the activations arrived through cp.async (generic proxy)
        const u64 db = smem_desc_sw128(sm.a(stage));
        const u32 w_stage = sm.a(stage) + S::kXBytes;
#pragma unroll
        for (int s = 0; s < 4; ++s) {
            const int cur = s % 2; // 4 steps a stage: the same buffers in every stage
            wgmma_fence();
#pragma unroll
            for (int b = 0; b < kB; ++b) wgmma_m64n128k16_rs<D>(acc[b], a[cur][b], db + 2u * s, (kt | s) != 0 ? 1u : 0u);
            wgmma_commit();
            // the next step's words (and at a stage's end its scale groups) before the wait, so
            // that only their decoding follows it
            const bool more = s < 3 || kt + 1 < k_tiles;
            if (s == 0) nxt.load<kKind>(p, rows, kt + 1, K); // past K: scale 0, nothing read
            if (s < 3) {
                wg_w4rs_load_step(w_stage, r, s + 1, q);
            } else {
                pipe.advance();
                grp = nxt;
                if (more) {
                    mbar_wait(sm.full_bar(pipe.stage), pipe.phase);
                    wg_w4rs_load_step(sm.a(pipe.stage) + S::kXBytes, r, 0, q);
                }
            }
            wgmma_wait<1>(); // step i - 1 is done: its fragments are free
#pragma unroll
            for (int b = 0; b < kB; ++b) {
                fence_operands(acc[b]);
                fence_regs(a[cur ^ 1][b]);
            }
            if (s == 0 && prev >= 0 && lane == 0) mbar_arrive(sm.empty_bar(prev));
            if (more) wg_w4rs_decode_step<W>(q, t, (s + 1) % 4, grp, a[cur ^ 1]);
        }
        prev = stage;
    }
    wgmma_wait<0>();
#pragma unroll
    for (int b = 0; b < kB; ++b) {
        fence_operands(acc[b]);
        fence_regs(a[0][b]);
        fence_regs(a[1][b]);
    }
    if (lane == 0) mbar_arrive(sm.empty_bar(prev));
}

// Stores a thread's 32 values of one column, value(i) of token 8(i / 2) + 2t + i % 2, as 4-byte
// pairs of columns c0, c0 + 1 (c0 even): lanes l and l ^ 4 hold the two columns (odd: this
// lane the second) and trade one value of each token pair, the even lane storing token
// 8j + 2t, the odd one 8j + 2t + 1. Output row of token n: n, or (kPairs) rows[n]; tokens from
// nmax are not stored (every lane takes part in the shuffles). The values are computed as they
// are stored, so that no array of them is live beside the accumulators.
template <Dtype D, bool kPairs, class Value>
__device__ __forceinline__ void wg_w4rs_store(u16 *base, i64 ld, const int *rows, int c0, int nmax, int t, bool odd,
                                              Value value)
{
#pragma unroll
    for (int j = 0; j < 16; ++j) {
        const float v0 = value(2 * j), v1 = value(2 * j + 1);
        const float got = __shfl_xor_sync(0xffffffffu, odd ? v0 : v1, 4);
        const int n = 8 * j + 2 * t + (odd ? 1 : 0);
        if (n < nmax) {
            const i64 row = kPairs ? rows[n] : n;
            const float lo = odd ? got : v0, hi = odd ? v1 : got;
            *reinterpret_cast<u32 *>(base + row * ld + c0) = kPairs ? pack2_rn<D>(lo, hi) : act_pack2<D>(lo, hi);
        }
    }
}

// The epilogue of one m64 block whose thread rows are rb and rb + 8 (register 4j + 2h + e: row
// rb + 8h, token 8j + 2t + e): GEMM2 y[pair, h] + b2, gated GEMM1 the activation of up (row rb)
// and gate (rb + 8) of one column, ungated GEMM1 the activation of two columns.
template <Dtype D, WgGemm kKind, int kAct, class X>
__device__ __forceinline__ void wg_w4rs_epilogue(const mj_layer_params &p, const ActParams &act, int H, int I,
                                                 const RowTile &rt, int col, int rb, int t, bool odd,
                                                 const float (&acc)[64])
{
    constexpr int BW = WgW4RsShape::BW;
    constexpr bool kGated = kKind == WgGemm::gemm1_gated;
    if constexpr (kKind == WgGemm::gemm2) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int hc = col * BW + rb + 8 * h;
            const float b = X::kB2 && hc < H ? y_value<D, X>(p, rt.expert, H, hc, 0.0f) : 0.0f;
            wg_w4rs_store<D, true>(reinterpret_cast<u16 *>(p.ws_y), H, reinterpret_cast<const int *>(p.ws_rows) + rt.row0,
                                   hc & ~1, (hc & ~1) < H ? rt.rows : 0, t, odd, [&](int i) -> float {
                                       const float a = acc[4 * (i / 2) + 2 * h + i % 2];
                                       return X::kB2 ? a + b : a;
                                   });
        }
    } else {
        u16 *inter = reinterpret_cast<u16 *>(p.ws_inter) + static_cast<i64>(rt.row0) * I;
        const i64 rows1 = kGated ? 2 * static_cast<i64>(I) : static_cast<i64>(I);
        if constexpr (kGated) {
            // rows rb (up) and rb + 8 (gate) of column j0 + (rb / 16)·8 + rb % 8
            const int c = col * (BW / 2) + (rb / 16) * 8 + rb % 8;
            float bu = 0.0f, bg = 0.0f;
            if (X::kB1 && c < I) {
                bu = b1_at<D>(p, rt.expert, rows1, w1_row<X::kLayout, true>(0, c, I));
                bg = b1_at<D>(p, rt.expert, rows1, w1_row<X::kLayout, true>(1, c, I));
            }
            wg_w4rs_store<D, false>(inter, I, nullptr, c & ~1, (c & ~1) < I ? rt.rows : 0, t, odd, [&](int i) -> float {
                float u = acc[4 * (i / 2) + i % 2], g = acc[4 * (i / 2) + 2 + i % 2];
                if constexpr (X::kB1) u += bu, g += bg;
                return apply_gated_act<kAct>(u, g, act);
            });
        } else {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int c = col * BW + rb + 8 * h;
                float b = 0.0f;
                if (X::kB1 && c < I) b = b1_at<D>(p, rt.expert, rows1, w1_row<X::kLayout, false>(0, c, I));
                wg_w4rs_store<D, false>(inter, I, nullptr, c & ~1, (c & ~1) < I ? rt.rows : 0, t, odd, [&](int i) -> float {
                    float u = acc[4 * (i / 2) + 2 * h + i % 2];
                    if constexpr (X::kB1) u += b;
                    return apply_act<kAct>(u, act);
                });
            }
        }
    }
}

// Warpgroups 2 and 3: weight rows r + 64b (+ 8) of each tile, r = 64·kBlocks·cw + 16·wq +
// lane/4, its k loop, then each block's epilogue (see the top of this file).
template <class W, Dtype D, WgGemm kKind, int kAct, class X>
__device__ __forceinline__ void wg_w4rs_consumer(const mj_layer_params &p, const ActParams &spec_act, int H, int I,
                                                 const WgStages<WgW4RsShape> &sm, const WgSchedule sc, int warp,
                                                 int lane, int cw)
{
    using S = WgW4RsShape;
    constexpr int kB = S::kBlocks;
    setmaxnreg_inc<MJ_WGMMA_W4_RS_CONSUMER_REGS>();
    const int row_tiles = reinterpret_cast<const int *>(p.ws_tile_offsets)[p.num_local_experts];
    const int total = row_tiles * sc.n_col;
    const int t = lane % 4;
    const int r = 64 * kB * cw + 16 * (warp % 4) + lane / 4;
    PipeState<S::kStages> pipe;
    float acc[kB][64];
    for (int tile = sc.first_tile; tile < total; tile += sc.tile_step) {
        RowTile rt;
        int col, b_expert;
        bool shared;
        wg_tile_of<S::BM, false>(p, tile, sc.n_col, row_tiles, row_tiles, 0u, &rt, &col, &b_expert, &shared);
        // the rows' terms that depend on the lane only are computed per tile, not hoisted out of
        // the tile loop, where they would be live through the k loop and spill
        int rr = r;
        asm volatile("" : "+r"(rr));
        int rows[kB][2];
#pragma unroll
        for (int b = 0; b < kB; ++b)
#pragma unroll
            for (int h = 0; h < 2; ++h) rows[b][h] = wg_w4rs_row<kKind, X>(rt.expert, rr + 64 * b + 8 * h, col, H, I);
        wg_w4rs_k_loop<W, D, kKind>(p, sm, sc.k_tiles, sc.K, pipe, rows, r, t, lane, acc);
        // the epilogue's per-expert values (overrides, biases) are computed here, not hoisted
        // above the k loop, where they would be live beside the fragments and spill
        asm volatile("" : "+r"(rt.expert));
        int lane_e = lane; // as rr above, for the epilogue's terms
        asm volatile("" : "+r"(lane_e));
        const int re = 64 * kB * cw + 16 * (warp % 4) + lane_e / 4;
        auto store = [&](const ActParams &act) {
#pragma unroll
            for (int b = 0; b < kB; ++b)
                wg_w4rs_epilogue<D, kKind, kAct, X>(p, act, H, I, rt, col, re + 64 * b, lane_e % 4, (lane_e & 4) != 0,
                                                    acc[b]);
        };
        if constexpr (kKind == WgGemm::gemm2) store(spec_act);
        else with_expert_act<kAct, X::kOverrides>(p, spec_act, rt.expert, store);
    }
}

// The body of the 4-bit large GEMMs on register-A wgmmas (kKind gemm1_gated / gemm1 / gemm2).
template <class W, Dtype D, WgGemm kKind, int kAct, class X>
__device__ __forceinline__ void wgmma_w4rs_gemm(const mj_layer_params &p, const ActParams &act, int H, int I, int k,
                                                unsigned char *smem_raw)
{
    using S = WgW4RsShape;
    constexpr bool kGated = kKind == WgGemm::gemm1_gated;
    constexpr bool kGemm2 = kKind == WgGemm::gemm2;
    grid_dep_enter();
    WgSchedule sc;
    sc.rank = 0u;
    sc.first_tile = static_cast<int>(blockIdx.x);
    sc.tile_step = static_cast<int>(gridDim.x);
    constexpr int kCols = kGated ? S::BW / 2 : S::BW; // output columns per tile
    sc.K = kGemm2 ? I : H;
    sc.n_col = ((kGemm2 ? H : I) + kCols - 1) / kCols;
    sc.k_tiles = (sc.K + S::BK - 1) / S::BK;
    WgStages<S> sm;
    sm.base = (smem_addr(smem_raw) + 1023u) & ~1023u;
    sm.bars = sm.base + S::kStages * S::kStageBytes;
    const int warp = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 32, 0);
    const int lane = threadIdx.x % 32;
    const int wg = warp / 4;
    if (threadIdx.x == 0) {
        for (int s = 0; s < S::kStages; ++s) {
            mbar_init(sm.full_bar(s), S::kProducerThreads);
            mbar_init(sm.empty_bar(s), 4 * MJ_WGMMA_CONSUMERS);
        }
        fence_mbarrier_init();
    }
    __syncthreads();
    if (wg < MJ_WGMMA_W4_PRODUCERS) wg_w4rs_producer<W, kKind, X>(p, H, I, k, sm, sc);
    else wg_w4rs_consumer<W, D, kKind, kAct, X>(p, act, H, I, sm, sc, warp, lane, wg - MJ_WGMMA_W4_PRODUCERS);
}

static_assert(MJ_WGMMA_W4_RS_PRODUCER_REGS * MJ_WGMMA_W4_PRODUCERS + MJ_WGMMA_W4_RS_CONSUMER_REGS * MJ_WGMMA_CONSUMERS <=
                  MJ_WGMMA_W4_LAUNCH_REGS * (MJ_WGMMA_W4_PRODUCERS + MJ_WGMMA_CONSUMERS),
              "setmaxnreg.inc can take only the registers the CTA's setmaxnreg.dec gave back");

} // namespace mj
