// This file contains the prefill GEMMs of the `wgmma` backend (sm_90a): GEMM1 with the
// activation in its epilogue, and GEMM2, as ONE persistent warp-specialized kernel body,
// templated on the tile shape (common/wgmma_params.h: large 128 x 256, tall 256 x 128, short
// 64 x 256):
//
//   schedule    tile t = blockIdx.x, + gridDim.x, ... over row tiles (BM rows of one expert's
//               row list) x column tiles, in grouped raster order (raster_grouped: 8 row tiles
//               fastest, in the pair path 4 units of two, so the CTAs resident together share
//               weight tiles in L2; the large tiles, with at most 8 row tiles in all, the
//               column tile fastest)
//   producer    warpgroup 0 (wg_producer). Per k stage: wait empty_bar[stage]; thread 0 arms
//               full_bar[stage] with the B bytes and issues the TMA box of the BN weight rows
//               (gated GEMM1: BN/2 up rows, then the same columns' BN/2 gate rows from the
//               next plane); all 128 threads gather the BM A rows (x rows through the row list
//               for GEMM1, intermediate rows in GEMM2) with 16-byte cp.async into the
//               128B-swizzled layout, then cp.async.mbarrier.arrive.noinc on full_bar[stage]
//               (full_bar counts 128 such arrivals + the arming one + the TMA bytes)
//   consumers   warpgroups 1 and 2 (wg_consumer, its k loop wg_consumer_k_loop), rows
//               [c·BM/2, (c+1)·BM/2) of the tile as BM/128 m64 blocks. Per k stage: wait
//               full_bar[stage]; 4 x wgmma.m64nBNk16 per live block; commit; wait until at
//               most this group is in flight, then one arrival per warp on the PREVIOUS
//               stage's empty_bar (8 per phase). A block whose 64 rows are all padding (past
//               the expert's rows) skips its MMAs; a warpgroup with none keeps the barrier
//               protocol.
//   epilogue    (wg_store_block) straight from the accumulators: GEMM1 pairs up column n
//               (register block n/8) with its gate (block n/8 + BN/16), applies the
//               activation, rounds once and writes the intermediate at row = position in the
//               row list; GEMM2 writes y[pair, h] rounded once to the dtype, which the shared
//               finalize sums in order. GEMM2 stores 8 bytes (four columns) per thread, two
//               lanes trading halves of their register blocks: with 4-byte stores a warp store
//               fills half of each 32-byte sector, which shows in GEMM2's epilogue, long next to
//               a short K. GEMM1 keeps 4-byte stores: the exchange gained nothing there and made
//               GELU's erf spill in the pair kernel.
//
//   weights     (Wt) where the B stages come from: WgTmaWeights, the producer above; a 4-bit
//               format's policy (wgmma_w4_producer.cuh) runs its own producer, which dequantizes
//               the weights into the same B layout, with its own full-barrier count, shared
//               memory after the stages and register split, in two warpgroups (the shape's
//               kProducerWarpgroups: 512 threads, the consumers warpgroups 2 and 3, each wgmma
//               issued as two n128 halves, since the launch's 128 registers are fewer than
//               ptxas needs to issue one n256).
//
// The stage index and its phase bit (PipeState) run on across tiles, so the producer fills the
// next tile's stages while the consumers finish the current one.
//
//   PDL         every GEMM waits (griddepcontrol.wait) before it reads the chain's data, but
//               the producer first issues the weight boxes of its first tile's first stages
//               (pre_wait: always in GEMM2, in GEMM1 where a scatter kernel runs after the
//               offsets kernel): the weights and the tile table are complete before the kernel
//               before lets this one launch; the A rows may not be.
//
//   pair        (kPair, the large shape in clusters of two CTAs: the pair path) the schedule
//               runs per cluster over units of two row tiles, entries 2u and 2u + 1 of the
//               tile table (listed in the pair order by mj_expert_offsets_pair: an expert's
//               tiles two by two, then pairs of odd tiles); CTA r takes tile 2u + r. Where both
//               are one expert's, each producer's thread 0 multicasts its
//               half of the weight tile (BN/2 rows) into both CTAs, so each full barrier still
//               counts the whole B; else each loads its own tile. empty_bar counts the
//               consumer warps of both CTAs (each arrives on its own and, mapped with mapa, on
//               the other's), so no producer refills a stage the other CTA still reads; the
//               barriers are initialised before, and the CTAs leave after, a cluster barrier.
//
// NOTES: determinism — every output is a fixed sequence of wgmmas over k whose result depends
// on its A row and B row only (the same tiles on every run, zero-filled padding adds exact
// zeros), so reruns are bit-identical whichever CTA takes a tile. Out-of-bounds weight rows
// (j >= I, h >= H) and k >= K arrive from TMA as zeros.
#pragma once

#include "act.cuh"
#include "common/params.h"
#include "common/ptx.cuh"
#include "common/types.cuh"
#include "common/wgmma_params.h"
#include "mma_gemm2.cuh"
#include "mma_mainloop.cuh"
#include "permute.cuh"
#include "weight_layout.cuh"
#include "wgmma_ptx.cuh"

namespace mj {

enum class WgGemm : int { gemm1_gated = 0, gemm1, gemm2 };


// A tile shape: BM token rows x BN weight rows, kStagesT stages of BK. BM 64 (the short
// tiles): consumer 0 owns the one m64 block and consumer 1 none (its rows start at 64).
// kElemBytes 1 (the fp8 GEMMs, wgmma_fp8.cuh): BK 128 codes per 128-byte row, and a row scale
// per stage after the barriers.
template <int kBM, int kBN, int kStagesT, int kSmem, int kElemBytes = 2, int kProducerWarpgroupsT = 1>
struct WgShape {
    static constexpr int BM = kBM, BN = kBN, BK = 128 / kElemBytes;
    static constexpr int kStages = kStagesT;
    static constexpr int kProducerWarpgroups = kProducerWarpgroupsT; // 2: the 4-bit GEMMs' decoding producers
    static constexpr int kProducerThreads = 128 * kProducerWarpgroups;
    static constexpr int kConsumerWarps = MJ_WGMMA_CONSUMERS * 4;
    static constexpr int kRowsPerConsumer = BM >= 128 ? BM / MJ_WGMMA_CONSUMERS : 64;
    static constexpr int kBlocks = kRowsPerConsumer / 64; // m64 blocks per consumer
    static constexpr int kAcc = BN / 2;                   // fp32 accumulators of one m64 x BN block per thread
    static constexpr int kAcc1 = kBlocks == 2 ? kAcc : 1; // block 1's (tall); a placeholder of one otherwise
    static constexpr int kRowBytes = BK * kElemBytes;
    static constexpr u32 kABytes = BM * kRowBytes;
    static constexpr u32 kBBytes = BN * kRowBytes;
    static constexpr u32 kStageBytes = kABytes + kBBytes;
    // A gather: kLanesPerRow lanes per row, each copying kChunks 16-byte chunks of it (chunk
    // kc + c·kLanesPerRow), so a thread keeps 8 row pointers in the large and tall shapes.
    // Large: 8 lanes x 1 chunk, one warp instruction reads 4 whole 128-byte rows. Tall: 4 lanes
    // x 2 chunks (one chunk per lane would need 16 pointers, which overflowed the producer's 56
    // registers), 8 rows x 64 bytes per instruction. Short: 8 lanes x 1 chunk, 4 row pointers.
    static constexpr int kChunks = BM >= 128 ? BM / 128 : 1;
    static constexpr int kLanesPerRow = 8 / kChunks;
    static constexpr int kRowsPerPass = kProducerThreads / kLanesPerRow;
    static constexpr int kRowsA = BM / kRowsPerPass; // rows per producer thread: 8

    static_assert(kRowBytes == 128 && (kElemBytes == 2 || BK == MJ_FP8_BLOCK),
                  "a stage row must be exactly one 128-byte swizzle row (fp8: one 128-wide scale block)");
    static_assert(kRowBytes / 16 == 8 && kLanesPerRow * kChunks == 8, "a row is 8 chunks: lanes x chunks per lane");
    static_assert(kRowsA * kProducerWarpgroups == 8 || (BM == 64 && kRowsA == 4),
                  "a producer thread keeps 8 row pointers (short, or two producer warpgroups: 4)");
    static_assert(kBlocks == 1 || kBlocks == 2, "a consumer owns one or two m64 blocks of rows");
    static_assert(BN == 128 || BN == 256, "one wgmma.m64n128k16 or m64n256k16 spans the weight rows");
    static_assert(kBlocks * BN / 2 == 128, "a consumer holds 128 fp32 accumulators");
    static_assert(kRowsPerPass % 8 == 0, "a producer thread's rows must keep one swizzle phase");
    static_assert(kABytes % 1024 == 0 && kStageBytes % 1024 == 0 && (BN / 2 * kRowBytes) % 1024 == 0,
                  "every operand (and the gate half of B) must start on the 1024-byte repeat of the swizzle");
    static_assert(kSmem >= kStages * kStageBytes + 1024 + (kElemBytes == 2 ? 16 * kStages : 256 + kStages * BM * 4),
                  "host and device must agree on shared memory: stages, alignment slack, barriers (fp8: and the "
                  "A row scales of each stage)");
    static_assert(16 * kStages <= 256, "the barriers fit the 256 bytes before the fp8 row scales");
};
static_assert(MJ_WGMMA_PRODUCER_REGS + MJ_WGMMA_CONSUMER_REGS * MJ_WGMMA_CONSUMERS <=
                  MJ_WGMMA_LAUNCH_REGS * (1 + MJ_WGMMA_CONSUMERS),
              "setmaxnreg.inc can take only the registers the CTA's setmaxnreg.dec gave back");
using WgLarge = WgShape<MJ_WGMMA_BM, MJ_WGMMA_BN, MJ_WGMMA_STAGES, MJ_WGMMA_SMEM>;
using WgTall = WgShape<MJ_WGMMA_TALL_BM, MJ_WGMMA_TALL_BN, MJ_WGMMA_STAGES, MJ_WGMMA_SMEM>;
using WgShort = WgShape<MJ_WGMMA_SHORT_BM, MJ_WGMMA_SHORT_BN, MJ_WGMMA_SHORT_STAGES, MJ_WGMMA_SHORT_SMEM>;
static_assert(WgLarge::kStageBytes == MJ_WGMMA_STAGE_BYTES && WgTall::kStageBytes == MJ_WGMMA_STAGE_BYTES &&
                  WgShort::kStageBytes == MJ_WGMMA_SHORT_STAGE_BYTES,
              "host and device must agree on the stage sizes");

// Tile t of the persistent schedule -> this CTA's rows (expert, first position, count; count 0
// for none) and column tile, and the weight tile it loads: the expert (and, pair, whether the
// cluster's two CTAs share it). The schedule runs over `units` x n_col tiles: a unit is one
// row tile, or (kPair) the row tiles 2u and 2u + 1 of the table, which the pair path lists in
// the pair order (permute.cuh), CTA rank r taking tile 2u + r. They share the weight tile when
// both are one expert's (every pair of an expert's own tiles; not a pair of two experts' odd
// tiles) or when 2u + 1 is past the last row tile (that CTA then has no rows and only loads
// its half).
template <int kBM, bool kPair, bool kFromL2 = false>
__device__ __forceinline__ void wg_tile_of(const mj_layer_params &p, int t, int n_col, int units, int row_tiles,
                                           u32 rank, RowTile *rows, int *col, int *b_expert, bool *shared)
{
    int unit;
    // The large tiles, at most one raster group of row tiles (a decode-sized batch: an expert
    // or two's rows each): the column tile runs fastest, so the CTAs resident together stream
    // neighbouring weight tiles of one expert, not one tile of each of up to 8 (the short tiles
    // too). Tiles and MMAs are the same. Not in the tall kernels, which no decode batch takes
    // and where the branch made GEMM1 spill.
    if ((kBM == MJ_WGMMA_BM || kBM == MJ_WGMMA_SHORT_BM) && !kPair && units <= kRasterGroup)
        raster_grouped<1>(t, n_col, units, &unit, col);
    else raster_grouped<kPair ? MJ_WGMMA_PAIR_RASTER_UNITS : kRasterGroup>(t, n_col, units, &unit, col);
    if constexpr (!kPair) {
        find_row_tile<kBM, kFromL2>(p, unit, rows); // true: unit < row_tiles
        *b_expert = rows->expert;
        *shared = false;
    } else {
        RowTile first, second;
        find_row_tile<kBM, kFromL2>(p, 2 * unit, &first); // 2·unit < row_tiles
        const bool has_second = 2 * unit + 1 < row_tiles;
        if (has_second) find_row_tile<kBM, kFromL2>(p, 2 * unit + 1, &second);
        *shared = !has_second || second.expert == first.expert;
        if (rank == 0) *rows = first;
        else if (has_second) *rows = second;
        else *rows = RowTile{first.expert, first.row0, 0};
        *b_expert = *shared ? first.expert : rows->expert;
    }
}

// A ring of kStages pipeline stages as one role walks it: the stage it is on and the parity of
// that stage's barrier phase, which flips each time the ring wraps. Producer and consumers
// each keep one, running on across tiles.
template <int kStages>
struct PipeState {
    int stage = 0;
    u32 phase = 0;
    __device__ __forceinline__ void advance()
    {
        if (++stage == kStages) {
            stage = 0;
            phase ^= 1u;
        }
    }
};

// A CTA's stages in shared memory (from a 1024-byte aligned base: A then B per stage) and
// their barriers after them: kStages full barriers, then kStages empty barriers.
template <class S>
struct WgStages {
    u32 base;
    u32 bars;
    __device__ __forceinline__ u32 a(int s) const { return base + static_cast<u32>(s) * S::kStageBytes; }
    __device__ __forceinline__ u32 full_bar(int s) const { return bars + 8u * static_cast<u32>(s); }
    __device__ __forceinline__ u32 empty_bar(int s) const { return bars + 8u * static_cast<u32>(S::kStages + s); }
    // fp8: the BM fp32 dequant scales of stage s's A rows (one per row: the stage is one K block)
    __device__ __forceinline__ u32 row_scales(int s) const { return bars + 256u + static_cast<u32>(s * S::BM) * 4u; }
};

// The persistent schedule of one CTA (pair: of its cluster, both CTAs running the same tiles)
// and the GEMM's extents: tiles first_tile, + tile_step, ... of the units x n_col tiles. The
// roles take it by value, so its fields reach them as plain values, as locals would.
// The W1 tensor map's plane of expert e's up rows (gated) or of its rows (ungated), and the
// offset from it to the gate rows' plane (launch_wgmma.c builds the map per layout):
//   up_gate      planes of I rows: 2e up, 2e + 1 gate
//   gate_up      planes of I rows: 2e gate, 2e + 1 up
//   interleaved  rows 2H elements apart, planes one row apart: plane 2I·e + 1 holds expert e's
//                up rows (2j + 1), plane 2I·e its gate rows (2j)
template <bool kGated, W1Layout kLayout>
__device__ __forceinline__ int w1_weight_plane(int e, int I)
{
    if constexpr (!kGated || kLayout == W1Layout::up_gate) return kGated ? 2 * e : e;
    else if constexpr (kLayout == W1Layout::gate_up) return 2 * e + 1;
    else return 2 * I * e + 1;
}

template <W1Layout kLayout>
__host__ __device__ constexpr int w1_gate_plane_delta()
{
    return kLayout == W1Layout::up_gate ? 1 : -1;
}

struct WgSchedule {
    u32 rank; // the CTA's rank in its cluster (0 outside the pair path)
    int first_tile, tile_step;
    int n_col, k_tiles, K;
};

// Thread 0 of the producer: the weight tile of stage `st`, k tile `kt`, output columns from c1
// of weight plane c2a; it arms the stage's full barrier with the B bytes and issues the TMA
// boxes. Pair: where the two CTAs share the tile (`shared`), half `rank` of it into both.
template <class S, bool kGated, bool kPair, int kGateDelta = 1>
__device__ __forceinline__ void wg_issue_b(const TmaDesc &tmap, const WgStages<S> &sm, u32 rank, int st, int kt,
                                           int c1, int c2a, bool shared)
{
    const u32 b_stage = sm.a(st) + S::kABytes;
    const u32 fb = sm.full_bar(st);
    mbar_arrive_expect_tx(fb, S::kBBytes); // pair: both halves land here
    if (kPair && shared) {
        // half `rank` of the tile (gated: the up or the gate rows) into both CTAs
        const u32 half = rank * (S::BN / 2) * S::kRowBytes;
        if constexpr (kGated)
            tma_load_3d_multicast(b_stage + half, &tmap, kt * S::BK, c1, c2a + static_cast<int>(rank) * kGateDelta,
                                  fb, 0x3);
        else
            tma_load_3d_multicast(b_stage + half, &tmap, kt * S::BK, c1 + static_cast<int>(rank) * (S::BN / 2),
                                  c2a, fb, 0x3);
    } else if constexpr (kPair) { // its own whole tile, in two boxes of BN/2 rows
        const u32 half = (S::BN / 2) * S::kRowBytes;
        tma_load_3d(b_stage, &tmap, kt * S::BK, c1, c2a, fb);
        if constexpr (kGated)
            tma_load_3d(b_stage + half, &tmap, kt * S::BK, c1, c2a + kGateDelta, fb);
        else
            tma_load_3d(b_stage + half, &tmap, kt * S::BK, c1 + S::BN / 2, c2a, fb);
    } else {
        tma_load_3d(b_stage, &tmap, kt * S::BK, c1, c2a, fb);
        if constexpr (kGated)
            tma_load_3d(b_stage + (S::BN / 2) * S::kRowBytes, &tmap, kt * S::BK, c1, c2a + kGateDelta, fb);
    }
}

// The producer's start (pre_wait): the weight boxes of the first tile's first `pre` stages
// are requested before the wait, so that the CTAs placed while the kernel before drains
// stream weights meanwhile; only the A rows wait (GEMM2: GEMM1's intermediate; GEMM1: the row
// list the scatter kernel writes). The tile comes from the tile table, which the offsets
// kernel wrote before the kernel before this one passed its own wait (and that kernel lets
// this grid launch only after its wait), read from L2 (common/grid_dep.cuh, (c)): always for
// GEMM2; for GEMM1 where the scatter kernel runs between offsets and GEMM1 (T·k beyond one
// scatter block), not where the offsets kernel scatters (it is then the kernel right before).
// L2 prefetches of the following k tiles on top of this were slower. Returns `pre` (0 without
// pre_wait: every stage is issued in the k loop).
template <class S, bool kGated, bool kPair, class X>
__device__ __forceinline__ int wg_issue_first_stages(const mj_layer_params &p, const TmaDesc &tmap,
                                                     const WgStages<S> &sm, const WgSchedule sc, int units,
                                                     int row_tiles, int total, int I, bool pre_wait)
{
    constexpr int kCols = kGated ? S::BN / 2 : S::BN;
    constexpr int kGateDelta = w1_gate_plane_delta<X::kLayout>();
    int pre = 0;
    if (pre_wait) {
        if (sc.first_tile < total) {
            RowTile rt;
            int col, b_expert;
            bool shared;
            wg_tile_of<S::BM, kPair, /*kFromL2=*/true>(p, sc.first_tile, sc.n_col, units, row_tiles, sc.rank, &rt,
                                                       &col, &b_expert, &shared);
            pre = sc.k_tiles < S::kStages ? sc.k_tiles : S::kStages;
            if (threadIdx.x == 0)
                for (int kt = 0; kt < pre; ++kt)
                    wg_issue_b<S, kGated, kPair, kGateDelta>(tmap, sm, sc.rank, kt, kt, col * kCols,
                                                             w1_weight_plane<kGated, X::kLayout>(b_expert, I), shared);
        }
        grid_dep_enter();
    }
    return pre;
}

// Warpgroup 0, the producer: per k stage of each tile, waits for the stage to be empty, has
// thread 0 issue the weight boxes (wg_issue_b) and gathers the tile's A rows with 16-byte
// cp.async into the 128B-swizzled layout, all completing on the stage's full barrier.
template <class S, WgGemm kKind, bool kPair, class X = PlainLayer>
__device__ __forceinline__ void wg_producer(const mj_layer_params &p, const TmaDesc &tmap, int H, int I, int k,
                                            const WgStages<S> &sm, const WgSchedule sc, bool pre_wait)
{
    constexpr bool kGated = kKind == WgGemm::gemm1_gated;
    constexpr int kGateDelta = w1_gate_plane_delta<X::kLayout>();
    constexpr bool kGemm2 = kKind == WgGemm::gemm2;
    constexpr int kCols = kGated ? S::BN / 2 : S::BN; // output columns per tile
    setmaxnreg_dec<MJ_WGMMA_PRODUCER_REGS>();
    // read after setmaxnreg in each role: live across it, ptxas parks values in local memory
    const int row_tiles = load_s32_l2(reinterpret_cast<const int *>(p.ws_tile_offsets) + p.num_local_experts);
    const int units = kPair ? (row_tiles + 1) / 2 : row_tiles;
    const int total = units * sc.n_col;
    const int tid = threadIdx.x; // 0..127
    const int row_in = tid / S::kLanesPerRow, kc = tid % S::kLanesPerRow; // chunks kc + c·kLanesPerRow
    u32 a_dst[S::kChunks];
#pragma unroll
    for (int c = 0; c < S::kChunks; ++c)
        a_dst[c] = static_cast<u32>(row_in * S::kRowBytes + (((kc + c * S::kLanesPerRow) ^ (row_in % 8)) * 16));
    // A rows: x rows (GEMM1) or intermediate rows (GEMM2); a_base is also the valid address
    // the zero-fill copies name (they read nothing)
    const u16 *a_base = reinterpret_cast<const u16 *>(kGemm2 ? p.ws_inter : p.x);
    const i64 a_ld = kGemm2 ? I : H;
    const int pre = wg_issue_first_stages<S, kGated, kPair, X>(p, tmap, sm, sc, units, row_tiles, total, I, pre_wait);
    PipeState<S::kStages> pipe;
    for (int t = sc.first_tile; t < total; t += sc.tile_step) {
        RowTile rt;
        int col;
        int b_expert;
        bool shared;
        wg_tile_of<S::BM, kPair>(p, t, sc.n_col, units, row_tiles, sc.rank, &rt, &col, &b_expert, &shared);
        const int *rows = reinterpret_cast<const int *>(p.ws_rows) + rt.row0;
        // the global row each of this thread's rows reads (nullptr: padding, zero-filled)
        const u16 *src[S::kRowsA];
#pragma unroll
        for (int i = 0; i < S::kRowsA; ++i) {
            const int m = row_in + i * S::kRowsPerPass;
            if (m >= rt.rows) src[i] = nullptr;
            else if constexpr (kGemm2) src[i] = a_base + static_cast<i64>(rt.row0 + m) * a_ld;
            else src[i] = a_base + static_cast<i64>(rows[m] / k) * a_ld; // rows hold pairs t*k + slot
        }
        // weight boxes: (k, row in the plane, plane) of the tensor maps launch_wgmma.c builds;
        // gated: 64 up rows of expert e's up plane, then the same 64 columns' gate rows of the
        // plane kGateDelta from it (up_gate: planes 2e and 2e + 1)
        const int c1 = col * kCols;
        const int c2a = w1_weight_plane<kGated, X::kLayout>(b_expert, I);
        for (int kt = 0; kt < sc.k_tiles; ++kt) {
            const u32 a_stage = sm.a(pipe.stage);
            if (t != sc.first_tile || kt >= pre) { // else issued before the wait
                mbar_wait(sm.empty_bar(pipe.stage), pipe.phase ^ 1u);
                if (tid == 0)
                    wg_issue_b<S, kGated, kPair, kGateDelta>(tmap, sm, sc.rank, pipe.stage, kt, c1, c2a, shared);
            }
#pragma unroll
            for (int c = 0; c < S::kChunks; ++c) {
                if (rt.rows == 0) break; // pair: no rows here; the consumers skip the stage's MMAs
                const int kk = kt * S::BK + (kc + c * S::kLanesPerRow) * 8;
                const bool in_k = kk < sc.K; // K % 8 == 0: a chunk is all in or all out
#pragma unroll
                for (int i = 0; i < S::kRowsA; ++i) {
                    const bool live = in_k && src[i] != nullptr;
                    cp_async_16(a_stage + a_dst[c] + static_cast<u32>(i * S::kRowsPerPass * S::kRowBytes),
                                live ? src[i] + kk : a_base, live ? 16 : 0);
                }
            }
            cp_async_arrive_noinc(sm.full_bar(pipe.stage));
            pipe.advance();
        }
    }
    cp_async_wait_all(); // nothing of this thread may still write shared memory at exit
}

// Where the B stages come from. WgTmaWeights: 16-bit weights by TMA (wg_producer); a 4-bit
// format's policy dequantizes them into the same layout instead (wgmma_w4_producer.cuh).
// kFullArrivals (kPairFullArrivals in the pair path): the full barrier's count; kExtraSmem:
// bytes between the stages and the barriers; kConsumerRegs (kPairConsumerRegs): the
// consumers' setmaxnreg.
struct WgTmaWeights {
    static constexpr u32 kFullArrivals = 128 + 1; // cp.async arrivals + the TMA arming
    static constexpr u32 kPairFullArrivals = kFullArrivals;
    static constexpr u32 kExtraSmem = 0;
    static constexpr int kConsumerRegs = MJ_WGMMA_CONSUMER_REGS;
    static constexpr int kPairConsumerRegs = kConsumerRegs;
    static constexpr bool kTma = true;
    template <class S, WgGemm kKind, bool kPair, class X>
    __device__ __forceinline__ static void produce(const mj_layer_params &p, const TmaDesc &tmap, int H, int I, int k,
                                                   const WgStages<S> &sm, const WgSchedule sc, bool pre_wait)
    {
        wg_producer<S, kKind, kPair, X>(p, tmap, H, I, k, sm, sc, pre_wait);
    }
};

// One consumer warpgroup's k loop over a tile, inlined once per wgmma pattern: `two` (both
// blocks; a constant at each call, so each copy folds it) and `live` (block 0 at all; a
// warpgroup with no rows keeps only the barrier protocol). Per k stage: wait for the full
// barrier, 4 x wgmma per live block, commit, wait until at most this group is in flight, then
// release the PREVIOUS stage (one arrival per warp; pair: on both CTAs' empty barriers). One
// loop testing the block count made ptxas inject warpgroup arrives and waits (C7519 / C7517)
// around the conditionally written second accumulator.
template <class S, Dtype D, bool kPair>
__device__ __forceinline__ void wg_consumer_k_loop(const WgStages<S> &sm, int k_tiles, PipeState<S::kStages> &pipe,
                                                   float (&acc0)[S::kAcc], float (&acc1)[S::kAcc1], int r0,
                                                   int lane, u32 peer_bars, const bool live, const bool two)
{
    auto release = [&](int s) {
        mbar_arrive(sm.empty_bar(s));
        if constexpr (kPair) mbar_arrive_cluster(peer_bars + 8u * static_cast<u32>(S::kStages + s));
    };
    int prev = 0;
    fence_operands(acc0);
    if (two) fence_operands(acc1); // else dead here: its 64 registers are free
    for (int kt = 0; kt < k_tiles; ++kt) {
        mbar_wait(sm.full_bar(pipe.stage), pipe.phase);
        if (live) {
            fence_proxy_async(); // A arrived through cp.async (generic proxy)
            const u32 a_stage = sm.a(pipe.stage);
            const u64 da0 = smem_desc_sw128(a_stage + static_cast<u32>(r0 * S::kRowBytes));
            const u64 da1 = smem_desc_sw128(a_stage + static_cast<u32>((r0 + 64) * S::kRowBytes));
            const u64 db = smem_desc_sw128(a_stage + S::kABytes);
            wgmma_fence();
#pragma unroll
            for (int ks = 0; ks < S::BK / 16; ++ks) { // +32 bytes per k16 = +2 in the >>4 field
                const u32 acc_in = (kt | ks) != 0 ? 1u : 0u;
                if constexpr (S::BN == 256 && S::kProducerWarpgroups > 1) // 512 threads: 128 registers at launch
                    wgmma_m64n256k16_as_n128<D>(acc0, da0 + 2u * ks, db + 2u * ks, acc_in);
                else wgmma_m64nNk16<D, S::BN>(acc0, da0 + 2u * ks, db + 2u * ks, acc_in);
                if constexpr (S::kBlocks == 2) {
                    if (two) wgmma_m64nNk16<D, S::BN>(acc1, da1 + 2u * ks, db + 2u * ks, acc_in);
                }
            }
            wgmma_commit();
            wgmma_wait<1>(); // the previous stage's group is done with its operands
            fence_operands(acc0);
            if (two) fence_operands(acc1); // else dead here: its 64 registers are free
        }
        if (kt > 0 && lane == 0) release(prev);
        prev = pipe.stage;
        pipe.advance();
    }
    wgmma_wait<0>(); // also where no block is live (nothing pending): ptxas then sees the wait
    fence_operands(acc0);
    if (two) fence_operands(acc1); // else dead here: its 64 registers are free
    if (lane == 0) release(prev);
}

// GEMM2's epilogue of m64 block b with b2 (wg_store_block's y stores, the same lanes and
// stores): column pairs outermost, so that each of a thread's b2 pairs is loaded once, as one
// 4-byte load, for both of its rows, and only a column pair's are live at a time (all of them
// hoisted above the stores spilled).
template <class S, Dtype D>
__device__ __forceinline__ void wg_store_y_b2(const mj_layer_params &p, int H, const RowTile &rt, int col, int r0,
                                              int wq, int lane, const float (&acc)[S::kAcc], int b)
{
    const int c_in = 2 * (lane % 4);
    const bool odd = (lane & 1) != 0;
    const u16 *b2e = reinterpret_cast<const u16 *>(p.b2) + static_cast<i64>(rt.expert) * H;
    bool row_ok[2];
    u16 *dst[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int m = r0 + 64 * b + wq * 16 + lane / 4 + 8 * h;
        row_ok[h] = m < rt.rows;
        const int pair = row_ok[h] ? reinterpret_cast<const int *>(p.ws_rows)[rt.row0 + m] : 0;
        dst[h] = reinterpret_cast<u16 *>(p.ws_y) + static_cast<i64>(pair) * H;
    }
    const int c0 = col * S::BN + (c_in & ~2);
#pragma unroll
    for (int j = 0; j < S::BN / 8; j += 2) {
        const int cj = col * S::BN + c_in + 8 * j; // this thread's columns of blocks j (cj, +1), j + 1 (+8, +9)
        const u32 bj = cj < H ? *reinterpret_cast<const u32 *>(b2e + cj) : 0u; // H % 8 == 0: pairs in or out
        const u32 bk = cj + 8 < H ? *reinterpret_cast<const u32 *>(b2e + cj + 8) : 0u;
        const float bj0 = to_float<D>(static_cast<u16>(bj)), bj1 = to_float<D>(static_cast<u16>(bj >> 16));
        const float bk0 = to_float<D>(static_cast<u16>(bk)), bk1 = to_float<D>(static_cast<u16>(bk >> 16));
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const u32 pj = pack2_rn<D>(acc[4 * j + 2 * h] + bj0, acc[4 * j + 2 * h + 1] + bj1);
            const u32 pj1 = pack2_rn<D>(acc[4 * j + 4 + 2 * h] + bk0, acc[4 * j + 4 + 2 * h + 1] + bk1);
            const u32 got = __shfl_xor_sync(0xffffffffu, odd ? pj : pj1, 1);
            const int c = c0 + 8 * (odd ? j + 1 : j);
            Vec8 v;
            v.w[0] = odd ? got : pj;
            v.w[1] = odd ? pj1 : got;
            if (row_ok[h] && c < H) *reinterpret_cast<Vec8 *>(dst[h] + c) = v;
        }
    }
}

// GEMM1's epilogue of m64 block b with b1 (wg_store_block's intermediate stores, the same lanes,
// values and stores): columns outermost, so that each of a thread's b1 values is loaded once for
// both of its rows, and through the read-only path, so that the loads need not wait behind the
// stores before them (plain loads could alias the intermediate for all the compiler knows, which
// kept each after the previous column's stores: one L2 round trip per column, ~18 % of the 4-bit
// consumers' time with gpt-oss-120b's biases, docs/PERFORMANCE.md).
template <class S, Dtype D, WgGemm kKind, int kAct, class X>
__device__ __forceinline__ void wg_store_inter_b1(const mj_layer_params &p, const ActParams &act, int I,
                                                  const RowTile &rt, int col, int r0, int wq, int lane,
                                                  const float (&acc)[S::kAcc], int b)
{
    constexpr bool kGated = kKind == WgGemm::gemm1_gated;
    constexpr int kCols = kGated ? S::BN / 2 : S::BN; // output columns per tile
    const int c_in = 2 * (lane % 4);                 // column pair inside each 8-column block
    const i64 rows1 = kGated ? 2 * static_cast<i64>(I) : static_cast<i64>(I);
    const u16 *b1e = reinterpret_cast<const u16 *>(p.b1) + static_cast<i64>(rt.expert) * rows1;
    bool row_ok[2];
    u16 *dst[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int m = r0 + 64 * b + wq * 16 + lane / 4 + 8 * h;
        row_ok[h] = m < rt.rows;
        dst[h] = reinterpret_cast<u16 *>(p.ws_inter) + static_cast<i64>(rt.row0 + (row_ok[h] ? m : 0)) * I;
    }
    const int j0 = col * kCols;
#pragma unroll
    for (int j = 0; j < kCols / 8; ++j) {
        const int c = j0 + 8 * j + c_in;
        if (c >= I) continue; // I % 8 == 0
        float bu[2], bg[2] = {0.0f, 0.0f};
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            bu[i] = to_float<D>(__ldg(b1e + w1_row<X::kLayout, kGated>(0, c + i, I)));
            if constexpr (kGated) bg[i] = to_float<D>(__ldg(b1e + w1_row<X::kLayout, kGated>(1, c + i, I)));
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            if (!row_ok[h]) continue;
            float v[2];
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                // fc1_act's arithmetic: + b1, then the activation (up column: register block j;
                // its gate: block j + BN/16, B rows BN/2..)
                const float u = acc[4 * j + 2 * h + i] + bu[i];
                if constexpr (kGated) v[i] = apply_gated_act<kAct>(u, acc[S::BN / 4 + 4 * j + 2 * h + i] + bg[i], act);
                else v[i] = apply_act<kAct>(u, act);
            }
            *reinterpret_cast<u32 *>(dst[h] + c) = pack2(from_float<D>(v[0]), from_float<D>(v[1]));
        }
    }
}

// The epilogue of m64 block b of a consumer warpgroup (rows r0 + 64·b of the tile), straight
// from its accumulators (by reference: a pointer picking acc0 or acc1 would put them in local
// memory). GEMM2: y[pair, h] rounded once, 8 bytes per thread; GEMM1: the activation (gated:
// column n with its gate, register block n/8 + BN/16), rounded once, into the intermediate.
// kAmax (fp8 per-tensor or per-row intermediate scales): amax[h] gathers the bits of the
// largest |stored value| of the thread's row h.
template <class S, Dtype D, WgGemm kKind, int kAct, class X = PlainLayer, bool kAmax = false>
__device__ __forceinline__ void wg_store_block(const mj_layer_params &p, const ActParams &act, int H, int I,
                                               const RowTile &rt, int col, int r0, int wq, int lane,
                                               const float (&acc)[S::kAcc], int b, u32 *amax = nullptr)
{
    constexpr bool kGated = kKind == WgGemm::gemm1_gated;
    constexpr bool kGemm2 = kKind == WgGemm::gemm2;
    constexpr int kCols = kGated ? S::BN / 2 : S::BN; // output columns per tile
    if constexpr (kGemm2 && X::kB2) {
        wg_store_y_b2<S, D>(p, H, rt, col, r0, wq, lane, acc, b);
        return;
    }
    if constexpr (!kGemm2 && X::kB1 && !kAmax) {
        wg_store_inter_b1<S, D, kKind, kAct, X>(p, act, I, rt, col, r0, wq, lane, acc, b);
        return;
    }
    const int c_in = 2 * (lane % 4); // column pair inside each 8-column block
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int m = r0 + 64 * b + wq * 16 + lane / 4 + 8 * h;
        if constexpr (kGemm2) {
            // A thread holds 2 adjacent columns of each 8-column block; lanes 2i and
            // 2i + 1 (one row) trade halves of blocks j and j + 1 so that each stores
            // 4 adjacent columns (8 bytes: a whole 32-byte sector per row per warp
            // store, not half): the even lane block j's, the odd lane block j + 1's.
            // Every lane shuffles; only the stores skip rows past the tile's.
            const bool row_ok = m < rt.rows;
            const int pair = row_ok ? reinterpret_cast<const int *>(p.ws_rows)[rt.row0 + m] : 0;
            u16 *dst = reinterpret_cast<u16 *>(p.ws_y) + static_cast<i64>(pair) * H;
            const bool odd = (lane & 1) != 0;
            const int c0 = col * S::BN + (c_in & ~2); // + 8j (even) or 8(j + 1) (odd)
#pragma unroll
            for (int j = 0; j < S::BN / 8; j += 2) {
                const u32 pj = pack2_rn<D>(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
                const u32 pj1 = pack2_rn<D>(acc[4 * j + 4 + 2 * h], acc[4 * j + 4 + 2 * h + 1]);
                const u32 got = __shfl_xor_sync(0xffffffffu, odd ? pj : pj1, 1);
                const int c = c0 + 8 * (odd ? j + 1 : j);
                Vec8 v;
                v.w[0] = odd ? got : pj;
                v.w[1] = odd ? pj1 : got;
                if (row_ok && c < H) *reinterpret_cast<Vec8 *>(dst + c) = v; // H % 8 == 0
            }
        } else {
            if (m >= rt.rows) continue;
            u16 *dst = reinterpret_cast<u16 *>(p.ws_inter) + static_cast<i64>(rt.row0 + m) * I;
            const int j0 = col * kCols;
#pragma unroll
            for (int j = 0; j < kCols / 8; ++j) {
                const int c = j0 + 8 * j + c_in;
                if (c >= I) continue; // I % 8 == 0
                float v0, v1;
                if constexpr (kGated) {
                    // up column c: register block j; its gate: block j + BN/16 (B rows BN/2..)
                    constexpr int g = S::BN / 4;
                    v0 = fc1_act<D, kAct, X>(p, act, rt.expert, I, c, acc[4 * j + 2 * h], acc[g + 4 * j + 2 * h]);
                    v1 = fc1_act<D, kAct, X>(p, act, rt.expert, I, c + 1, acc[4 * j + 2 * h + 1],
                                             acc[g + 4 * j + 2 * h + 1]);
                } else {
                    v0 = fc1_act<D, kAct, X>(p, act, rt.expert, I, c, acc[4 * j + 2 * h], 0.0f);
                    v1 = fc1_act<D, kAct, X>(p, act, rt.expert, I, c + 1, acc[4 * j + 2 * h + 1], 0.0f);
                }
                const u16 q0 = from_float<D>(v0), q1 = from_float<D>(v1);
                *reinterpret_cast<u32 *>(dst + c) = pack2(q0, q1);
                if constexpr (kAmax) {
                    const u32 a0 = __float_as_uint(to_float<D>(q0)) & 0x7fffffffu;
                    const u32 a1 = __float_as_uint(to_float<D>(q1)) & 0x7fffffffu;
                    amax[h] = a0 > amax[h] ? a0 : amax[h];
                    amax[h] = a1 > amax[h] ? a1 : amax[h];
                }
            }
        }
    }
}

// Warpgroups 1 and 2, the consumers: rows [cw·BM/2, (cw+1)·BM/2) of each tile as BM/128 m64
// blocks; per tile the k loop (wg_consumer_k_loop) on the live blocks, then their epilogue.
template <class S, Dtype D, WgGemm kKind, int kAct, bool kPair, class X = PlainLayer,
          int kRegs = MJ_WGMMA_CONSUMER_REGS>
__device__ __forceinline__ void wg_consumer(const mj_layer_params &p, const ActParams &spec_act, int H, int I,
                                            const WgStages<S> &sm, const WgSchedule sc, bool pre_wait, int warp,
                                            int lane, int wg)
{
    setmaxnreg_inc<kRegs>();
    if (pre_wait) grid_dep_enter();
    const int row_tiles = reinterpret_cast<const int *>(p.ws_tile_offsets)[p.num_local_experts];
    const int units = kPair ? (row_tiles + 1) / 2 : row_tiles;
    const int total = units * sc.n_col;
    const int cw = wg - 1;               // consumer warpgroup: rows [cw·BM/2, (cw+1)·BM/2)
    const int wq = warp % 4;             // warp inside the warpgroup: rows 16wq + [0, 16) of a block
    float acc0[S::kAcc];                 // block 0: rows c·BM/2 + [0, 64)
    float acc1[S::kAcc1];                // block 1 (tall): + [64, 128)
#pragma unroll
    for (int i = 0; i < S::kAcc; ++i) acc0[i] = 0.0f;
#pragma unroll
    for (int i = 0; i < S::kAcc1; ++i) acc1[i] = 0.0f;
    PipeState<S::kStages> pipe;
    // pair: the other CTA's empty barriers, which this CTA's consumers also release
    const u32 peer_bars = kPair ? cluster_map_shared(sm.bars, sc.rank ^ 1u) : 0u;
    for (int t = sc.first_tile; t < total; t += sc.tile_step) {
        RowTile rt;
        int col;
        int b_expert;
        bool shared;
        wg_tile_of<S::BM, kPair>(p, t, sc.n_col, units, row_tiles, sc.rank, &rt, &col, &b_expert, &shared);
        // live m64 blocks of this warpgroup (0, 1 or 2), warp-uniform through a shuffle
        const int r0 = cw * S::kRowsPerConsumer;
        const int blocks =
            __shfl_sync(0xffffffffu, S::kBlocks == 2 && rt.rows > r0 + 64 ? 2 : rt.rows > r0 ? 1 : 0, 0);
        if (S::kBlocks == 2 && blocks == 2)
            wg_consumer_k_loop<S, D, kPair>(sm, sc.k_tiles, pipe, acc0, acc1, r0, lane, peer_bars, true, true);
        else wg_consumer_k_loop<S, D, kPair>(sm, sc.k_tiles, pipe, acc0, acc1, r0, lane, peer_bars, blocks > 0, false);
        if (blocks == 0) continue;
        // with the tile's expert's activation parameters where the forward overrides them (GEMM1)
        auto store = [&](const ActParams &act) {
            wg_store_block<S, D, kKind, kAct, X>(p, act, H, I, rt, col, r0, wq, lane, acc0, 0);
            if constexpr (S::kBlocks == 2) {
                if (blocks == 2) wg_store_block<S, D, kKind, kAct, X>(p, act, H, I, rt, col, r0, wq, lane, acc1, 1);
            }
        };
        if constexpr (kKind == WgGemm::gemm2) store(spec_act);
        else with_expert_act<kAct, X::kOverrides>(p, spec_act, rt.expert, store);
    }
}

// The body of mj_gemm1_act[_tall|_pair] (kKind gemm1_gated / gemm1) and mj_gemm2[_tall|_pair]
// (gemm2), S one of WgLarge, WgTall, WgShort: initialises the stages' barriers, then runs
// warpgroup 0 as the producer and warpgroups 1 and 2 as the consumers. kPair (S = WgLarge, a
// cluster of two CTAs): the schedule runs over pairs of row tiles (wg_tile_of), CTA rank r of
// the cluster taking the r-th; where the two share their weight tile each CTA loads half of it
// (BN/2 rows) into both CTAs' shared memory (TMA multicast), else each loads its own whole.
// Either way the full barrier of each CTA counts all of its B bytes, and a stage is refilled
// only once the consumers of BOTH CTAs have released it (each consumer warp arrives on its own
// CTA's empty barrier and on the other's), so the two CTAs run their k stages in lock step.
template <class S, Dtype D, WgGemm kKind, int kAct, bool kPair = false, class X = PlainLayer,
          class Wt = WgTmaWeights>
__device__ __forceinline__ void wgmma_gemm(const mj_layer_params &p, const TmaDesc &tmap, const ActParams &act,
                                           int H, int I, int k, unsigned char *smem_raw)
{
    static_assert(!kPair || S::BM == MJ_WGMMA_BM, "the pair path runs the large tiles");
    constexpr int kConsumerRegs = kPair ? Wt::kPairConsumerRegs : Wt::kConsumerRegs;
    constexpr int kEmptyArrivals = S::kConsumerWarps * (kPair ? 2 : 1);
    // the schedule's position (a cluster's in pair mode: both CTAs run the same tiles)
    WgSchedule sc;
    sc.rank = kPair ? cluster_ctarank() : 0u;
    sc.first_tile = kPair ? static_cast<int>(cluster_id_x()) : static_cast<int>(blockIdx.x);
    sc.tile_step = kPair ? static_cast<int>(cluster_count_x()) : static_cast<int>(gridDim.x);
    constexpr bool kGated = kKind == WgGemm::gemm1_gated;
    constexpr bool kGemm2 = kKind == WgGemm::gemm2;
    // pre_wait: the producer requests its first weight stages before its griddepcontrol.wait
    // (wg_producer); otherwise, and in the consumers, every thread waits at once
    // (common/grid_dep.cuh)
    const bool pre_wait = kGemm2 || !MJ_OFFSETS_SCATTER(p.num_pairs);
    if (!pre_wait) grid_dep_enter();
    constexpr int kCols = kGated ? S::BN / 2 : S::BN; // output columns per tile
    sc.K = kGemm2 ? I : H;
    const int N = kGemm2 ? H : I;
    sc.n_col = (N + kCols - 1) / kCols;
    sc.k_tiles = (sc.K + S::BK - 1) / S::BK;

    WgStages<S> sm;
    sm.base = (smem_addr(smem_raw) + 1023u) & ~1023u;
    sm.bars = sm.base + S::kStages * S::kStageBytes + Wt::kExtraSmem;

    // Warp-uniform roles (read through a shuffle, so the compiler knows every lane agrees):
    // ptxas serialises wgmmas it finds on a path it thinks divergent.
    const int warp = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 32, 0);
    const int lane = threadIdx.x % 32;
    const int wg = warp / 4;
    if (threadIdx.x == 0) {
        for (int s = 0; s < S::kStages; ++s) {
            mbar_init(sm.full_bar(s), kPair ? Wt::kPairFullArrivals : Wt::kFullArrivals);
            mbar_init(sm.empty_bar(s), kEmptyArrivals);
        }
        fence_proxy_async(); // the copy engine must see initialised barriers
        fence_mbarrier_init();
        if constexpr (Wt::kTma) tma_prefetch_desc(&tmap);
    }
    // pair: the other CTA multicasts into this one's stages and arrives on its barriers
    if constexpr (kPair) cluster_sync();
    else __syncthreads();

    // two forms: the general one changed the one-producer kernels' SASS (register allocation)
    if constexpr (S::kProducerWarpgroups == 1) {
        if (wg == 0) Wt::template produce<S, kKind, kPair, X>(p, tmap, H, I, k, sm, sc, pre_wait);
        else wg_consumer<S, D, kKind, kAct, kPair, X, kConsumerRegs>(p, act, H, I, sm, sc, pre_wait, warp, lane, wg);
    } else {
        // the consumers keep their numbering (1, 2) after the producer warpgroups
        if (wg < S::kProducerWarpgroups) Wt::template produce<S, kKind, kPair, X>(p, tmap, H, I, k, sm, sc, pre_wait);
        else
            wg_consumer<S, D, kKind, kAct, kPair, X, kConsumerRegs>(p, act, H, I, sm, sc, pre_wait, warp, lane,
                                                                       wg - S::kProducerWarpgroups + 1);
    }
    // pair: neither CTA may exit while the other can still multicast into its shared memory
    // or arrive on its barriers
    if constexpr (kPair) cluster_sync();
}

} // namespace mj
