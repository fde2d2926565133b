// This file contains the producer of the `wgmma` layer's 4-bit prefill GEMMs (quant w4a16,
// mxfp4): wgmma_gemm.cuh's persistent kernel on the large tiles (128 token rows x 256 weight
// rows) and the tall ones (256 x 128; common/wgmma_params.h: MJ_WGMMA_W4_*), whose warpgroups
// 0 and 1 dequantize each stage's weights into the 16-bit, 128B-swizzled B stage that TMA fills
// for 16-bit weights. The consumers' wgmmas, barriers and epilogues are the 16-bit kernels', so
// an output's bits are those of the 16-bit GEMM on the dequantized weights, each (q − zp) · s
// rounded once to the dtype as mma's 4-bit GEMMs round it (mma_w4_dequant.cuh, the same
// arithmetic).
//
//   units    a stage is BN weight rows x 64 k. Thread t of the 256 decodes units i < BN/128
//            (two on the large tiles, one on the tall): B row t/2 + 128i, k half t % 2 (32 k:
//            16 packed bytes in one scale group, groups being 32, 64 or 128 k from multiples of
//            32), and stores each 8 k as one 16-byte chunk of the swizzled row (chunk c of row
//            r at r·128 + (c ^ (r % 8))·16: the 8 lanes of a store phase write 4 rows x 2
//            halves, 8 distinct chunk columns, no bank conflict)
//   slots    each thread copies its own units' packed bytes (cp.async, 16 bytes) and the
//            aligned 4-byte words holding their scale and zero point (cp.async, 4 bytes) into
//            one of kSlots slots, kAhead = kSlots − 1 stages before it decodes them, across
//            tile boundaries (WgW4Copier runs kAhead stages ahead of the decode); one commit
//            group per stage, so cp.async.wait_group kAhead means this thread's copies of the
//            stage it decodes have landed. No other thread reads them: no barrier guards a slot
//   stage    wait for the stage's empty barrier; gather A (WgAGather, arriving on the full
//            barrier as it lands); copy the stage kAhead ahead; wait for this stage's slot;
//            decode into B; arrive on the full barrier, which counts 256 cp.async arrivals and
//            256 decode arrivals. The consumers fence the async proxy after their wait, as for
//            the A rows (a fence here as well cost 2-3 %)
//   rows     as the 16-bit kernels' TMA boxes hold them: GEMM2 rows h0 + r; gated GEMM1 BN/2
//            rows of the activation's first operand (w1_row h = 0), then the same columns'
//            second operand; ungated GEMM1 rows j0 + r. A row past N reads row N − 1 (its
//            columns are never stored); k past K is copied as zeros and decoded with scale 0,
//            so it adds exact zeros (the A gather zero-fills it too), whatever the scales hold
//   pair     (kPair: clusters of two, wgmma_gemm.cuh's pair schedule) where the two CTAs share
//            their weight tile, each decodes only unit `rank` (its half of the B rows: gated
//            GEMM1's up or gate half) into its own B stage, and each producer warp copies its 16
//            decoded rows into the other CTA's stage with one shared-to-shared bulk copy that
//            completes on that CTA's full barrier, whose thread 0 arms it with the half's bytes
//            (an extra arrival, made plain where the tile is not shared); the empty barrier
//            counts both CTAs' consumers, so a stage is free in both before either writes it.
//            Correct and as fast as the large and tall tiles on the H200, not faster: tile=auto
//            does not take it (docs/PERFORMANCE.md)
//   words    a (row, group)'s scale is one byte (e8m0) or two (the dtype's) at element
//            row · groups + g; its copy reads the aligned 4-byte word holding it, which stays
//            inside the aligned 4 bytes of a byte the tensor owns (memory is mapped in pages),
//            and the decode shifts the scale out; a zero point likewise (nibble g % 2 of byte
//            row · groups / 2 + g / 2)
//
// Why a producer and not the consumers: the wgmma reads B from shared memory only, so a
// dequantized operand must be stored there once per stage for both consumer warpgroups; the
// producer does it while they run the stage before (the idea of Machete's and the CUTLASS
// mixed-input kernels, here with the 16-bit kernel's TMA replaced, not its consumers). Why two
// producer warpgroups: with one, each scheduler had a single producer warp, which spent most of
// a stage waiting on its own dependences (a stage's chain of 640-760 instructions set the
// stage's time, the tensor pipe 34-44 % busy); two give each scheduler two such warps of half
// the work, in 56 registers each, which the consumers' 200 leave at 512 threads
// (common/wgmma_params.h).
#pragma once

#include "common/wgmma_params.h"
#include "mma_w4_dequant.cuh"
#include "wgmma_gemm.cuh"

namespace mj {

// The producer's A operand: each stage's BM rows of a tile (x rows through the row list in
// GEMM1, intermediate rows in GEMM2) gathered with 16-byte cp.async into the 128B-swizzled
// layout, kRowsA rows of kChunks chunks per thread; padding rows and k past K are zero-filled:
// wg_producer's gather (wgmma_gemm.cuh), which keeps its own loop and with it its SASS.
template <class S, bool kGemm2>
struct WgAGather {
    const u16 *base; // also the valid address the zero-fill copies name (they read nothing)
    i64 ld;
    int row_in, kc; // this thread's first row and chunk: chunks kc + c·kLanesPerRow
    u32 dst[S::kChunks];
    const u16 *src[S::kRowsA]; // the global row each of this thread's rows reads (nullptr: padding)

    __device__ __forceinline__ WgAGather(const mj_layer_params &p, int H, int I, int tid)
    {
        row_in = tid / S::kLanesPerRow, kc = tid % S::kLanesPerRow;
#pragma unroll
        for (int c = 0; c < S::kChunks; ++c)
            dst[c] = static_cast<u32>(row_in * S::kRowBytes + (((kc + c * S::kLanesPerRow) ^ (row_in % 8)) * 16));
        base = reinterpret_cast<const u16 *>(kGemm2 ? p.ws_inter : p.x);
        ld = kGemm2 ? I : H;
    }

    __device__ __forceinline__ void rows_of(const mj_layer_params &p, const RowTile &rt, int k)
    {
        const int *rows = reinterpret_cast<const int *>(p.ws_rows) + rt.row0;
#pragma unroll
        for (int i = 0; i < S::kRowsA; ++i) {
            const int m = row_in + i * S::kRowsPerPass;
            if (m >= rt.rows) src[i] = nullptr;
            else if constexpr (kGemm2) src[i] = base + static_cast<i64>(rt.row0 + m) * ld;
            else src[i] = base + static_cast<i64>(rows[m] / k) * ld; // rows hold pairs t*k + slot
        }
    }

    // Stage kt's copies into a_stage (none where the tile has no rows: a pair CTA without any).
    __device__ __forceinline__ void copy(u32 a_stage, int kt, int K, const RowTile &rt) const
    {
#pragma unroll
        for (int c = 0; c < S::kChunks; ++c) {
            if (rt.rows == 0) break; // pair: no rows here; the consumers skip the stage's MMAs
            const int kk = kt * S::BK + (kc + c * S::kLanesPerRow) * 8;
            const bool in_k = kk < K; // K % 8 == 0: a chunk is all in or all out
#pragma unroll
            for (int i = 0; i < S::kRowsA; ++i) {
                const bool live = in_k && src[i] != nullptr;
                cp_async_16(a_stage + dst[c] + static_cast<u32>(i * S::kRowsPerPass * S::kRowBytes),
                            live ? src[i] + kk : base, live ? 16 : 0);
            }
        }
    }
};

// One thread's slots: kUnits units of 16 packed bytes, then their scale words, then their
// zero-point words, each array unit-major so that a warp's access is 32 consecutive elements.
template <class S>
struct WgW4Slots {
    static constexpr int kThreads = S::kProducerThreads;
    static constexpr int kUnits = S::BN * 2 / kThreads; // (row, 32-k half) units per thread per stage
    static constexpr int kRowStep = kThreads / 2;         // unit i of thread t: B row t/2 + kRowStep·i
    static constexpr int kSlots = MJ_WGMMA_W4_SLOTS, kAhead = kSlots - 1;
    static constexpr u32 kData = 0, kScales = kUnits * kThreads * 16, kZeros = kScales + kUnits * kThreads * 4;
    static constexpr u32 kBytes = MJ_WGMMA_W4_SLOT_BYTES; // the slots' stride (tall tiles fill half of each)
    static_assert(S::BK == 64 && kUnits * kThreads == 2 * S::BN && S::kRowBytes == 128,
                  "a unit is a quarter of a 128-byte B row, each decoded by one thread");
    static_assert(kZeros + kUnits * kThreads * 4 == (S::BN == 256 ? kBytes : kBytes / 2),
                  "host and device must agree on a slot's bytes");
    static_assert(kAhead >= 1 && kAhead <= 7, "cp.async.wait_group takes the stages ahead as its immediate");
};

// The aligned 4-byte word holding byte *b (see "words" above).
__device__ __forceinline__ const void *aligned_word(const u8 *b)
{
    return reinterpret_cast<const void *>(reinterpret_cast<u64>(b) & ~static_cast<u64>(3));
}

// The rows of the [E_l · N, K] weight matrix that a thread's units read in a tile: the
// expert's first row and each unit's row within the expert (an int each: registers are the
// producer's limit).
template <int kUnits>
struct WgW4Rows {
    i64 first;
    int n[kUnits];
    __device__ __forceinline__ i64 operator[](int i) const { return first + n[i]; }
};

// The rows thread tid's units read in a tile of column tile col of expert b_expert's weights.
template <class S, WgGemm kKind, class X>
__device__ __forceinline__ void wg_w4_rows_of(int col, int b_expert, int H, int I, int tid,
                                              WgW4Rows<WgW4Slots<S>::kUnits> &row)
{
    constexpr bool kGated = kKind == WgGemm::gemm1_gated;
    constexpr bool kGemm2 = kKind == WgGemm::gemm2;
    constexpr int kCols = kGated ? S::BN / 2 : S::BN;
    const i64 nrows = kGemm2 ? H : kGated ? 2 * static_cast<i64>(I) : I;
    const int n_last = (kGemm2 ? H : I) - 1;
    row.first = static_cast<i64>(b_expert) * nrows;
#pragma unroll
    for (int i = 0; i < WgW4Slots<S>::kUnits; ++i) {
        const int r = tid / 2 + WgW4Slots<S>::kRowStep * i;
        int j = col * kCols + (kGated ? r % (S::BN / 2) : r);
        j = j < n_last ? j : n_last;
        row.n[i] = kGated ? static_cast<int>(w1_row<X::kLayout, true>(r / (S::BN / 2), j, I)) : j;
    }
}

// The rows thread tid's units read in tile t (units: the schedule's units, row tiles or, pair,
// pairs of them) and whether the cluster's two CTAs share its weight tile (pair; else false).
template <class S, WgGemm kKind, class X, bool kPair>
__device__ __forceinline__ void wg_w4_tile_rows(const mj_layer_params &p, const WgSchedule &sc, int t, int units,
                                                int row_tiles, int H, int I, int tid,
                                                WgW4Rows<WgW4Slots<S>::kUnits> &row, bool &shared)
{
    RowTile rt;
    int col, b_expert;
    // from L2: the copier may run before griddepcontrol.wait (wg_issue_first_stages says why
    // the table is complete then)
    wg_tile_of<S::BM, kPair, /*kFromL2=*/true>(p, t, sc.n_col, units, row_tiles, sc.rank, &rt, &col, &b_expert,
                                               &shared);
    wg_w4_rows_of<S, kKind, X>(col, b_expert, H, I, tid, row);
}

// The copy cursor: the stage (tile t, k tile kt) whose units this thread copies next, into
// slot `slot`, kAhead stages before the decode reaches it. Pair: where the cluster shares the
// tile's weights (`half`), only unit sc.rank, the half of the B stage this CTA decodes.
template <class S, class W, WgGemm kKind, class X, bool kPair>
struct WgW4Copier {
    using Sl = WgW4Slots<S>;
    int t, kt, slot;
    bool half;
    WgW4Rows<Sl::kUnits> row;

    // Tile t's rows (and, pair, whether its weight tile is shared; else half stays false).
    __device__ __forceinline__ void rows(const mj_layer_params &p, const WgSchedule &sc, int units, int row_tiles,
                                         int H, int I, int tid)
    {
        bool shared;
        wg_w4_tile_rows<S, kKind, X, kPair>(p, sc, t, units, row_tiles, H, I, tid, row, shared);
        if constexpr (kPair) half = shared;
    }

    __device__ __forceinline__ void start(const mj_layer_params &p, const WgSchedule &sc, int units, int row_tiles,
                                          int total, int H, int I, int tid)
    {
        t = sc.first_tile, kt = 0, slot = 0, half = false;
        if (t < total) rows(p, sc, units, row_tiles, H, I, tid);
    }

    // Copies the next stage (none past the schedule's end) and commits its group.
    __device__ __forceinline__ void copy_next(const mj_layer_params &p, const WgSchedule &sc, int units,
                                              int row_tiles, int total, int H, int I, int tid, u32 slots)
    {
        constexpr bool kGemm2 = kKind == WgGemm::gemm2;
        if (t < total) {
            const u8 *data = reinterpret_cast<const u8 *>(kGemm2 ? p.w2 : p.w1);
            const u8 *scale = reinterpret_cast<const u8 *>(kGemm2 ? p.w2_scale : p.w1_scale);
            const u8 *zero = reinterpret_cast<const u8 *>(kGemm2 ? p.w2_zero : p.w1_zero);
            const int K = sc.K, groups = K / W::kGroup;
            const int k0 = kt * S::BK + (tid % 2) * 32;
            const bool in_k = k0 < K; // K % 32 == 0: a unit is all in or all out
            const int g = in_k ? k0 / W::kGroup : 0;
            const u32 base = slots + static_cast<u32>(slot) * Sl::kBytes;
#pragma unroll
            for (int i = 0; i < Sl::kUnits; ++i) {
                if (kPair && half && i != static_cast<int>(sc.rank)) continue;
                const u32 idx = static_cast<u32>(i * Sl::kThreads + tid);
                cp_async_16(base + Sl::kData + idx * 16u, data + row[i] * (K / 2) + (in_k ? k0 / 2 : 0),
                            in_k ? 16 : 0);
                cp_async_4(base + Sl::kScales + idx * 4u, aligned_word(scale + (row[i] * groups + g) * (W::kMx ? 1 : 2)));
                if constexpr (W::kZero)
                    cp_async_4(base + Sl::kZeros + idx * 4u, aligned_word(zero + row[i] * (groups / 2) + g / 2));
            }
            if (++kt == sc.k_tiles) {
                kt = 0;
                t += sc.tile_step;
                if (t < total) rows(p, sc, units, row_tiles, H, I, tid);
            }
        }
        slot = slot + 1 == Sl::kSlots ? 0 : slot + 1;
        cp_async_commit();
    }
};

// Unit u's packed words q, its group constants c_s (W4Group::s), decoded into its B row of the
// stage at b_stage; kFused: in the one-multiply form (mma_w4_dequant.cuh).
template <class S, class W, bool kFused>
__device__ __forceinline__ void wg_w4_store_unit(const u32 (&q)[4], u32 c_s, u32 b_stage, int tid, int u)
{
    const int h = tid % 2;
    const W4Group c = W::unpack(c_s);
    const u32 f = kFused ? W::fused(c) : 0u;
    const int r = tid / 2 + WgW4Slots<S>::kRowStep * u;
    const u32 row_at = b_stage + static_cast<u32>(r * S::kRowBytes);
#pragma unroll
    for (int w = 0; w < 4; ++w) {
        const u32 aux = W::aux(q[w]);
        u32 v[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            if constexpr (kFused) v[j] = W::pair_fused(q[w], aux, j, f);
            else v[j] = W::pair(q[w], aux, j, c);
        }
        st_shared_v4(row_at + static_cast<u32>(((4 * h + w) ^ (r % 8)) * 16), v);
    }
}

// Decodes this thread's units from slot base `base` into the B stage at b_stage, unit i's
// group constants scale_of(i). A unit's packed words are loaded while the one before is
// decoded: the shared loads and stores are volatile asm, kept in program order, so a load
// issued after a unit's stores would wait for them.
template <class S, class W, bool kFused, class ScaleOf>
__device__ __forceinline__ void wg_w4_decode_units(u32 base, u32 b_stage, int tid, ScaleOf scale_of)
{
    using Sl = WgW4Slots<S>;
    u32 next[4];
    ld_shared_v4(base + Sl::kData + static_cast<u32>(tid) * 16u, next);
#pragma unroll
    for (int i = 0; i < Sl::kUnits; ++i) {
        u32 q[4];
#pragma unroll
        for (int w = 0; w < 4; ++w) q[w] = next[w];
        if (i + 1 < Sl::kUnits)
            ld_shared_v4(base + Sl::kData + static_cast<u32>((i + 1) * Sl::kThreads + tid) * 16u, next);
        wg_w4_store_unit<S, W, kFused>(q, scale_of(i), b_stage, tid, i);
    }
}

// Decodes unit u alone (pair, a shared weight tile: this CTA's half of the B stage), its
// group constants c_s.
template <class S, class W, bool kFused>
__device__ __forceinline__ void wg_w4_decode_unit(u32 base, u32 b_stage, int tid, int u, u32 c_s)
{
    using Sl = WgW4Slots<S>;
    u32 q[4];
    ld_shared_v4(base + Sl::kData + static_cast<u32>(u * Sl::kThreads + tid) * 16u, q);
    wg_w4_store_unit<S, W, kFused>(q, c_s, b_stage, tid, u);
}

// Decodes this thread's units of k tile kt from slot `slot` into the B stage at b_stage
// (only >= 0: unit `only` alone, pair's half of a shared tile). terms: the low two address
// bits of each unit's row in the scale and zero-point tensors (wg_w4_row_terms).
template <class S, class W, bool kOne = false>
__device__ __forceinline__ void wg_w4_decode(u32 slots, int slot, u32 b_stage, int kt, int K, int tid,
                                             u32 terms, int only = -1)
{
    using Sl = WgW4Slots<S>;
    const int h = tid % 2;
    const int k0 = kt * S::BK + h * 32;
    const bool live = k0 < K;
    const u32 g = live ? static_cast<u32>(k0 / W::kGroup) : 0u;
    const u32 base = slots + static_cast<u32>(slot) * Sl::kBytes;
    auto scale_word = [&](int i) {
        return ld_shared_u32(base + Sl::kScales + static_cast<u32>(i * Sl::kThreads + tid) * 4u);
    };
    if constexpr (W::kMx) {
        auto scale_at = [&](int i) -> u32 {
            const u32 byte = scale_word(i) >> ((((terms >> 2 * i) + g) & 3u) * 8u);
            return live ? dup2(mj_w4_e8m0_scale(byte, W::kFp16)) : 0u;
        };
        if constexpr (kOne) {
            const u32 s = scale_at(only);
            if (__all_sync(0xffffffffu, W::fusable(W::unpack(s))))
                wg_w4_decode_unit<S, W, true>(base, b_stage, tid, only, s);
            else wg_w4_decode_unit<S, W, false>(base, b_stage, tid, only, s);
            return;
        }
        // every unit's scale first: the warp takes the one-multiply form where all of its
        // stage's scales allow it (a vote, since the two forms are separate code)
        u32 s[Sl::kUnits];
        bool fused = true;
#pragma unroll
        for (int i = 0; i < Sl::kUnits; ++i) {
            s[i] = scale_at(i);
            fused = fused && W::fusable(W::unpack(s[i]));
        }
        auto scale_of = [&](int i) { return s[i]; };
        if (__all_sync(0xffffffffu, fused)) wg_w4_decode_units<S, W, true>(base, b_stage, tid, scale_of);
        else wg_w4_decode_units<S, W, false>(base, b_stage, tid, scale_of);
    } else {
        // each unit's scale (and zero point) as its decode starts: fewer registers live
        auto scale_of = [&](int i) -> u32 {
            const u32 half = (scale_word(i) >> ((((terms >> 2 * i) + 2u * g) & 3u) * 8u)) & 0xffffu;
            if constexpr (W::kZero) {
                const u32 zw = ld_shared_u32(base + Sl::kZeros + static_cast<u32>(i * Sl::kThreads + tid) * 4u);
                const u32 zp = (zw >> ((((terms >> (8 + 2 * i)) + g / 2u) & 3u) * 8u + (g & 1u) * 4u)) & 0xfu;
                return live ? half | zp << 16 : 0u;
            } else {
                return live ? dup2(half) : 0u;
            }
        };
        if constexpr (kOne) wg_w4_decode_unit<S, W, false>(base, b_stage, tid, only, scale_of(only));
        else wg_w4_decode_units<S, W, false>(base, b_stage, tid, scale_of);
    }
}

// The low two address bits of each unit's row start in the scale and zero-point tensors (all
// that the decode's shifts need), unit i's at bits 2i (scales) and 8 + 2i (zero points) of
// terms: one register instead of four, which the producer's 56 need.
template <class S, class W, WgGemm kKind>
__device__ __forceinline__ void wg_w4_row_terms(const mj_layer_params &p, int K,
                                                const WgW4Rows<WgW4Slots<S>::kUnits> &row, u32 &terms)
{
    constexpr bool kGemm2 = kKind == WgGemm::gemm2;
    const u32 groups = static_cast<u32>(K / W::kGroup);
    const u32 sbase = static_cast<u32>(reinterpret_cast<u64>(kGemm2 ? p.w2_scale : p.w1_scale));
    const u32 zbase = static_cast<u32>(reinterpret_cast<u64>(kGemm2 ? p.w2_zero : p.w1_zero));
    terms = 0u;
#pragma unroll
    for (int i = 0; i < WgW4Slots<S>::kUnits; ++i) {
        const u32 r = static_cast<u32>(row[i]);
        const u32 sterm = sbase + r * groups * (W::kMx ? 1u : 2u);
        const u32 zterm = W::kZero ? zbase + r * (groups / 2u) : 0u;
        terms |= (sterm & 3u) << (2 * i) | (zterm & 3u) << (8 + 2 * i);
    }
}

// Warpgroups 0 and 1 of a 4-bit GEMM (see the top of this file).
template <class S, class W, WgGemm kKind, bool kPair, class X>
__device__ __forceinline__ void wg_w4_producer(const mj_layer_params &p, int H, int I, int k, const WgStages<S> &sm,
                                               const WgSchedule sc, bool pre_wait)
{
    using Sl = WgW4Slots<S>;
    constexpr bool kGemm2 = kKind == WgGemm::gemm2;
    constexpr u32 kHalfBytes = S::BN / 2 * S::kRowBytes; // pair: one CTA's half of a shared B stage
    constexpr u32 kWarpBytes = 16 * S::kRowBytes;        // ... of which each producer warp decodes 16 rows
    static_assert(!kPair || kHalfBytes == kWarpBytes * (S::kProducerThreads / 32), "the warps' rows make the half");
    setmaxnreg_dec<kPair ? MJ_WGMMA_W4_PAIR_PRODUCER_REGS : MJ_WGMMA_W4_PRODUCER_REGS>();
    // read after setmaxnreg: live across it, ptxas parks values in local memory
    const int row_tiles = load_s32_l2(reinterpret_cast<const int *>(p.ws_tile_offsets) + p.num_local_experts);
    const int units = kPair ? (row_tiles + 1) / 2 : row_tiles;
    const int total = units * sc.n_col;
    const int tid = threadIdx.x; // 0 .. S::kProducerThreads - 1
    const u32 slots = sm.base + S::kStages * S::kStageBytes;
    // the first kAhead stages' weights: before griddepcontrol.wait where the tile table is
    // complete (pre_wait), as the 16-bit producer issues its first weight boxes
    WgW4Copier<S, W, kKind, X, kPair> copier;
    copier.start(p, sc, units, row_tiles, total, H, I, tid);
#pragma unroll 1
    for (int s = 0; s < Sl::kAhead; ++s) copier.copy_next(p, sc, units, row_tiles, total, H, I, tid, slots);
    if (pre_wait) grid_dep_enter();
    WgAGather<S, kGemm2> a(p, H, I, tid); // after the first copies: their registers are free then
    PipeState<S::kStages> pipe;
    int slot = 0;
    for (int t = sc.first_tile; t < total; t += sc.tile_step) {
        RowTile rt;
        int col, b_expert;
        bool shared;
        u32 terms;
        WgW4Rows<Sl::kUnits> row;
        if constexpr (kPair) { // the tile once: the pair producer's registers are short
            wg_tile_of<S::BM, true>(p, t, sc.n_col, units, row_tiles, sc.rank, &rt, &col, &b_expert, &shared);
            wg_w4_rows_of<S, kKind, X>(col, b_expert, H, I, tid, row);
            wg_w4_row_terms<S, W, kKind>(p, sc.K, row, terms);
        } else {
            wg_w4_tile_rows<S, kKind, X, false>(p, sc, t, units, row_tiles, H, I, tid, row, shared);
            wg_w4_row_terms<S, W, kKind>(p, sc.K, row, terms);
            wg_tile_of<S::BM, false>(p, t, sc.n_col, units, row_tiles, 0u, &rt, &col, &b_expert, &shared);
        }
        a.rows_of(p, rt, k);
        for (int kt = 0; kt < sc.k_tiles; ++kt) {
            mbar_wait(sm.empty_bar(pipe.stage), pipe.phase ^ 1u);
            const u32 a_stage = sm.a(pipe.stage);
            a.copy(a_stage, kt, sc.K, rt);
            cp_async_arrive_noinc(sm.full_bar(pipe.stage));
            copier.copy_next(p, sc, units, row_tiles, total, H, I, tid, slots);
            cp_async_wait<Sl::kAhead>(); // this thread's copies of stage kt (committed kAhead groups ago)
            const u32 b_stage = a_stage + S::kABytes;
            if (kPair && shared) {
                // this CTA's half into its own B stage, then each warp's rows of it (16 rows,
                // contiguous) by one bulk copy into the other CTA's, counted by that CTA's full
                // barrier (its producer's thread 0 arms it with the half's bytes below); the
                // empty barrier passed above counts both CTAs' consumers, so that stage is free
                wg_w4_decode<S, W, true>(slots, slot, b_stage, kt, sc.K, tid, terms, static_cast<int>(sc.rank));
                fence_proxy_async(); // the copy engine reads what this thread stored
                __syncwarp();
                if (tid % 32 == 0) {
                    const u32 rows = b_stage + sc.rank * kHalfBytes + static_cast<u32>(tid / 2) * S::kRowBytes;
                    const u32 peer = sc.rank ^ 1u;
                    bulk_copy_to_cluster(cluster_map_shared(rows, peer), rows, kWarpBytes,
                                         cluster_map_shared(sm.full_bar(pipe.stage), peer));
                }
                if (tid == 0) mbar_arrive_expect_tx(sm.full_bar(pipe.stage), kHalfBytes); // the peer's half
            } else {
                wg_w4_decode<S, W>(slots, slot, b_stage, kt, sc.K, tid, terms);
                if (kPair && tid == 0) mbar_arrive(sm.full_bar(pipe.stage)); // the shared form's arming arrival
            }
            mbar_arrive(sm.full_bar(pipe.stage)); // the consumers fence the async proxy after their wait
            slot = slot + 1 == Sl::kSlots ? 0 : slot + 1;
            pipe.advance();
        }
    }
    cp_async_wait_all(); // nothing of this thread may still write shared memory at exit
}

// The B stages of 4-bit format W dequantized by the producer (wgmma_gemm's Wt). Pair: one
// more arrival a stage, thread 0's (arming the peer's half of a shared tile, or plain).
template <class W>
struct WgW4Weights {
    static constexpr u32 kFullArrivals = 2 * 128 * MJ_WGMMA_W4_PRODUCERS; // cp.async (A) arrivals + decode arrivals
    static constexpr u32 kPairFullArrivals = kFullArrivals + 1;
    static constexpr u32 kExtraSmem = MJ_WGMMA_W4_SLOTS * MJ_WGMMA_W4_SLOT_BYTES;
    static constexpr int kConsumerRegs = MJ_WGMMA_W4_CONSUMER_REGS;
    static constexpr int kPairConsumerRegs = MJ_WGMMA_W4_PAIR_CONSUMER_REGS;
    static constexpr bool kTma = false;
    template <class S, WgGemm kKind, bool kPair, class X>
    __device__ __forceinline__ static void produce(const mj_layer_params &p, const TmaDesc &tmap, int H, int I, int k,
                                                   const WgStages<S> &sm, const WgSchedule sc, bool pre_wait)
    {
        (void)tmap;
        wg_w4_producer<S, W, kKind, kPair, X>(p, H, I, k, sm, sc, pre_wait);
    }
};

static_assert(MJ_WGMMA_W4_PRODUCER_REGS * MJ_WGMMA_W4_PRODUCERS + MJ_WGMMA_W4_CONSUMER_REGS * MJ_WGMMA_CONSUMERS <=
                  MJ_WGMMA_W4_LAUNCH_REGS * (MJ_WGMMA_W4_PRODUCERS + MJ_WGMMA_CONSUMERS),
              "setmaxnreg.inc can take only the registers the CTA's setmaxnreg.dec gave back");
static_assert(MJ_WGMMA_W4_PAIR_PRODUCER_REGS * MJ_WGMMA_W4_PRODUCERS +
                      MJ_WGMMA_W4_PAIR_CONSUMER_REGS * MJ_WGMMA_CONSUMERS <=
                  MJ_WGMMA_W4_LAUNCH_REGS * (MJ_WGMMA_W4_PRODUCERS + MJ_WGMMA_CONSUMERS),
              "the pair path's split must fit the same registers");
using WgW4Large = WgShape<MJ_WGMMA_BM, MJ_WGMMA_BN, MJ_WGMMA_W4_STAGES, MJ_WGMMA_W4_SMEM, 2, MJ_WGMMA_W4_PRODUCERS>;
using WgW4Tall =
    WgShape<MJ_WGMMA_TALL_BM, MJ_WGMMA_TALL_BN, MJ_WGMMA_W4_STAGES, MJ_WGMMA_W4_SMEM, 2, MJ_WGMMA_W4_PRODUCERS>;
static_assert(WgW4Large::kStages * WgW4Large::kStageBytes + MJ_WGMMA_W4_SLOTS * MJ_WGMMA_W4_SLOT_BYTES + 1024 +
                      16 * WgW4Large::kStages <=
                  MJ_WGMMA_W4_SMEM,
              "host and device must agree on the 4-bit GEMMs' shared memory");

} // namespace mj
