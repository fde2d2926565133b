// This file contains the tensor-core GEMM mainloop of the `mma` backend (sm_80 and newer):
// a CTA computes a kRowsA x kRowsB tile of A · Bᵀ where A's and B's rows are K-contiguous
// 16-bit rows found through caller-supplied row functions (so GEMM1 gathers token rows
// straight from x and reads W1's up and gate rows in one tile, and the decode path can put
// the WEIGHT rows on the MMA's M side). Only the fp32 accumulator crosses to the epilogue.
//
//   global -> shared  cp.async.cg 16-byte chunks, kStages stages in flight (multistage
//                     pipeline: wait_group(kStages-2), one __syncthreads per k tile, the
//                     next load issued before this tile's math)
//   shared layout     per stage: kRowsA then kRowsB rows of BK = 64 elements = 128 bytes =
//                     8 chunks; chunk c of row r sits at chunk c ^ (r % 8), so the 8 rows an
//                     ldmatrix phase reads hit 8 different 16-byte bank groups
//   shared -> regs    ldmatrix.x4 (A: one m16k16 fragment; B: two n8k16 fragments)
//   math              mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16} with fp32 accumulate
//   warps             kWarpsM x kWarpsN; warp (wm, wn) owns rows [wm·MF·16, +MF·16) of A and
//                     [wn·NF·8, +NF·8) of B
//
// Accumulator fragment of mma m16n8 (g = lane / 4, t = lane % 4):
//   c[0], c[1] = (A row g,     B row 2t, 2t+1)      c[2], c[3] = (A row g + 8, B row 2t, 2t+1)
//
// NOTES: determinism — an output (i, j) is a fixed sequence of MMAs over k in increasing
// order whose result depends only on A row i and B row j, so neither the position of a row
// in the tile nor which CTA computes it changes a bit. Zero-filled chunks (rows past the
// tile, k past K) add exact zeros. K must be a multiple of 8.
#pragma once

#include "common/mma_params.h"
#include "common/ptx.cuh"
#include "common/types.cuh"

namespace mj {

// ---- the warp MMA ----------------------------------------------------------------------

template <Dtype D>
__device__ __forceinline__ void mma_16816(float (&c)[4], const u32 (&a)[4], u32 b0, u32 b1)
{
    static_assert(D == Dtype::bf16 || D == Dtype::fp16, "the mma path multiplies bf16 or fp16");
    if constexpr (D == Dtype::bf16)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// ---- CTA rasterization of the large path -------------------------------------------------

// Block bid of a grid of n_tiles column tiles x max_tiles row tiles -> (row tile, column tile).
// Row tiles are taken in groups of kGroup (kRasterGroup); inside a group the row tiles vary fastest,
// then the column tiles. So the CTAs resident together share a few weight tiles (each read
// from DRAM once, by up to 8 CTAs at once: the repeats hit L2) and a few row tiles of
// activations (8 x 128 rows stay in L2 over the whole column sweep). Column-fastest order
// instead re-streams an expert's whole W1 from DRAM for every row tile.
constexpr int kRasterGroup = 8;

template <int kGroup = kRasterGroup>
__device__ __forceinline__ void raster_grouped(int bid, int n_tiles, int max_tiles, int *row_tile, int *col_tile)
{
    const int per_group = kGroup * n_tiles;
    const int group = bid / per_group;
    const int first = group * kGroup;
    const int rows_in = max_tiles - first < kGroup ? max_tiles - first : kGroup;
    const int within = bid - group * per_group;
    *row_tile = first + within % rows_in;
    *col_tile = within / rows_in;
}

// ---- the mainloop ------------------------------------------------------------------------

template <Dtype D, int kThreads, int kRowsA, int kRowsB, int kStages, int kWarpsM, int kWarpsN, int MF,
          int NF>
struct MmaMainloop {
    static constexpr int BK = MJ_MMA_BK;
    static constexpr int kRowBytes = BK * 2;         // 128
    static constexpr int kChunksPerRow = BK / 8;     // 8
    static constexpr int kStageBytes = (kRowsA + kRowsB) * kRowBytes;
    static constexpr int kSmemBytes = kStages * kStageBytes;
    static constexpr int kRowsPerPass = kThreads / kChunksPerRow; // rows one pass of the CTA loads
    static constexpr int kLoadsA = kRowsA / kRowsPerPass;
    static constexpr int kLoadsB = (kRowsB + kRowsPerPass - 1) / kRowsPerPass;

    static_assert(BK == 64 && kChunksPerRow == 8, "the swizzle assumes 128-byte rows of 8 chunks");
    static_assert(kWarpsM * kWarpsN * 32 == kThreads, "the warp grid must cover the CTA");
    static_assert(kWarpsM * MF * 16 == kRowsA, "the warps' m16 fragments must cover A's rows");
    static_assert(kWarpsN * NF * 8 == kRowsB, "the warps' n8 fragments must cover B's rows");
    static_assert(NF % 2 == 0, "B fragments are loaded in pairs (one ldmatrix.x4)");
    static_assert(kRowsPerPass % 8 == 0, "a thread's chunks must keep one swizzle phase (row % 8)");
    static_assert(kRowsA % kRowsPerPass == 0, "A's rows must be a whole number of load passes");
    static_assert(kRowsB % kRowsPerPass == 0 || kRowsB < kRowsPerPass,
                  "B's rows must be a whole number of load passes, or fewer than one pass");
    static_assert(kStages >= 2, "a pipeline needs at least two stages");

    struct Acc {
        float c[MF][NF][4];
    };

    __device__ __forceinline__ static void clear(Acc &acc)
    {
#pragma unroll
        for (int mf = 0; mf < MF; ++mf)
#pragma unroll
            for (int nf = 0; nf < NF; ++nf)
#pragma unroll
                for (int q = 0; q < 4; ++q) acc.c[mf][nf][q] = 0.0f;
    }

    // Per thread: the global row base of each chunk it copies (nullptr = zero-fill), fixed
    // for the whole k loop; its chunk column kc = tid % 8 and its swizzled smem offsets.
    struct Loader {
        const u16 *a[kLoadsA];
        const u16 *b[kLoadsB];
        int kc;       // k offset of this thread's chunks inside a stage, in 8-element units
        u32 dst_a0;   // smem byte offset (inside a stage) of its first A chunk
        u32 dst_b0;   // of its first B chunk
        bool b_live;  // kRowsB < kRowsPerPass: only the first kRowsB row-threads load B
        const u16 *safe; // a valid global address for zero-fill copies (they read nothing,
                         // but an address that is never null costs nothing to keep)
    };

    template <class ARow, class BRow>
    __device__ __forceinline__ static void make_loader(Loader &ld, ARow a_row, BRow b_row)
    {
        const int tid = threadIdx.x;
        const int row = tid / kChunksPerRow;
        ld.kc = tid % kChunksPerRow;
        const u32 phys = static_cast<u32>((ld.kc ^ (row % 8)) * 16);
#pragma unroll
        for (int i = 0; i < kLoadsA; ++i) ld.a[i] = a_row(row + i * kRowsPerPass);
        ld.b_live = row < kRowsB;
#pragma unroll
        for (int i = 0; i < kLoadsB; ++i) ld.b[i] = ld.b_live ? b_row(row + i * kRowsPerPass) : nullptr;
        ld.safe = a_row(0) != nullptr ? a_row(0) : b_row(0);
        ld.dst_a0 = static_cast<u32>(row * kRowBytes) + phys;
        ld.dst_b0 = static_cast<u32>((kRowsA + row) * kRowBytes) + phys;
    }

    // A's and B's chunks of one stage (k tile at k0), or both: load_stage.
    __device__ __forceinline__ static void load_stage_a(const Loader &ld, u32 stage_base, int k0, int K)
    {
        const int k = k0 + ld.kc * 8;
        const bool in_k = k < K;
#pragma unroll
        for (int i = 0; i < kLoadsA; ++i) {
            const u16 *src = ld.a[i];
            const bool live = in_k && src != nullptr;
            cp_async_16(stage_base + ld.dst_a0 + i * kRowsPerPass * kRowBytes, live ? src + k : ld.safe,
                        live ? 16 : 0);
        }
    }

    __device__ __forceinline__ static void load_stage_b(const Loader &ld, u32 stage_base, int k0, int K)
    {
        const int k = k0 + ld.kc * 8;
        const bool in_k = k < K;
        if (ld.b_live) {
#pragma unroll
            for (int i = 0; i < kLoadsB; ++i) {
                const u16 *src = ld.b[i];
                const bool live = in_k && src != nullptr;
                cp_async_16(stage_base + ld.dst_b0 + i * kRowsPerPass * kRowBytes,
                            live ? src + k : ld.safe, live ? 16 : 0);
            }
        }
    }

    __device__ __forceinline__ static void load_stage(const Loader &ld, u32 stage_base, int k0, int K)
    {
        load_stage_a(ld, stage_base, k0, K);
        load_stage_b(ld, stage_base, k0, K);
    }

    // One stage's math: BK/16 steps of (MF A fragments, NF B fragments, MF·NF MMAs).
    __device__ __forceinline__ static void compute_stage(u32 stage_base, Acc &acc)
    {
        compute_ab(stage_base, stage_base, acc);
    }

    // compute_stage with A's rows at a_base and B's row n at b_base + (kRowsA + n)·kRowBytes,
    // each row BK elements in the stage's swizzle (chunk c of row r at c ^ (r % 8)): also the
    // 4-bit large path's step, on its dequantized B (mma_w4_mainloop.cuh).
    __device__ __forceinline__ static void compute_ab(u32 a_base, u32 b_base, Acc &acc)
    {
        const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
        const int wm = warp % kWarpsM, wn = warp / kWarpsM;
        // ldmatrix row addresses: lane l names row (l % 8) of matrix l / 8; every such row
        // has row % 8 == l % 8, so the swizzle term is the same for all of this lane's rows.
        const int sw = lane % 8;
        const int a_row = wm * MF * 16 + (lane % 8) + ((lane / 8) % 2) * 8;
        const int a_hi = lane / 16;
        const int b_row = kRowsA + wn * NF * 8 + (lane % 8) + (lane / 16) * 8;
        const int b_hi = (lane / 8) % 2;
#pragma unroll
        for (int ks = 0; ks < BK / 16; ++ks) {
            u32 a[MF][4];
            u32 b[NF][2];
#pragma unroll
            for (int mf = 0; mf < MF; ++mf) {
                const u32 addr = a_base + static_cast<u32>((a_row + mf * 16) * kRowBytes) +
                                 static_cast<u32>(((ks * 2 + a_hi) ^ sw) * 16);
                ldmatrix_x4(addr, a[mf][0], a[mf][1], a[mf][2], a[mf][3]);
            }
#pragma unroll
            for (int np = 0; np < NF / 2; ++np) {
                const u32 addr = b_base + static_cast<u32>((b_row + np * 16) * kRowBytes) +
                                 static_cast<u32>(((ks * 2 + b_hi) ^ sw) * 16);
                ldmatrix_x4(addr, b[2 * np][0], b[2 * np][1], b[2 * np + 1][0], b[2 * np + 1][1]);
            }
#pragma unroll
            for (int mf = 0; mf < MF; ++mf)
#pragma unroll
                for (int nf = 0; nf < NF; ++nf) mma_16816<D>(acc.c[mf][nf], a[mf], b[nf][0], b[nf][1]);
        }
    }

    // a_row(r) / b_row(r): global base of A row r / B row r, or nullptr for a padding row.
    template <class ARow, class BRow>
    __device__ __forceinline__ static void run(unsigned char *smem, ARow a_row, BRow b_row, int K, Acc &acc)
    {
        run_gated(smem, a_row, b_row, K, acc, NoGate{});
    }

    struct NoGate {
        static constexpr bool kWaits = false;
        __device__ __forceinline__ void operator()() const {}
    };

    // run, but B's rows are read only once gate() has returned (a Gate with kWaits = true,
    // called by every thread; it synchronises the block): the prologue's A chunks (the
    // weights, on the decode path) are requested first, then the gate waits for whatever
    // produces B (decode_persistent.cuh: the GEMM1 tiles of an expert's intermediate), then
    // the prologue's B chunks follow as one more commit group per stage. The k loop's wait_group(kStages - 2) still finds tile
    // kt complete: the groups before it are the kStages - 1 A groups, then B groups 0..kt
    // (or, past the prologue, the loop's own); nothing drains the pipeline. With NoGate the
    // A and B chunks of a stage are one group, as they always were.
    template <class ARow, class BRow, class Gate>
    __device__ __forceinline__ static void run_gated(unsigned char *smem, ARow a_row, BRow b_row, int K, Acc &acc,
                                                     Gate gate)
    {
        clear(acc);

        Loader ld;
        make_loader(ld, a_row, b_row);
        const u32 base = smem_addr(smem);
        const int k_tiles = (K + BK - 1) / BK;
        constexpr bool kGated = Gate::kWaits;

        // prologue: kStages - 1 tiles in flight (empty groups keep the count uniform)
#pragma unroll
        for (int s = 0; s < kStages - 1; ++s) {
            if (s < k_tiles) {
                if constexpr (kGated) load_stage_a(ld, base + s * kStageBytes, s * BK, K);
                else load_stage(ld, base + s * kStageBytes, s * BK, K);
            }
            cp_async_commit();
        }
        if constexpr (kGated) {
            gate();
#pragma unroll
            for (int s = 0; s < kStages - 1; ++s) {
                if (s < k_tiles) load_stage_b(ld, base + s * kStageBytes, s * BK, K);
                cp_async_commit();
            }
        }
        int read_stage = 0, write_stage = kStages - 1;
        for (int kt = 0; kt < k_tiles; ++kt) {
            cp_async_wait<kStages - 2>(); // tile kt has landed (for this thread's copies)
            __syncthreads();              // ... for everyone's; and tile kt-1's stage is free
            const int next = kt + kStages - 1;
            if (next < k_tiles) load_stage(ld, base + write_stage * kStageBytes, next * BK, K);
            cp_async_commit();
            compute_stage(base + read_stage * kStageBytes, acc);
            read_stage = read_stage + 1 == kStages ? 0 : read_stage + 1;
            write_stage = write_stage + 1 == kStages ? 0 : write_stage + 1;
        }
        cp_async_wait<0>(); // nothing may still write shared memory when the CTA exits
    }

    // Where this thread's accumulators live: A row of c[mf][nf][2h + e] and B row of it.
    __device__ __forceinline__ static int a_index(int mf, int h)
    {
        const int lane = threadIdx.x % 32, wm = (threadIdx.x / 32) % kWarpsM;
        return wm * MF * 16 + mf * 16 + h * 8 + lane / 4;
    }
    __device__ __forceinline__ static int b_index(int nf, int e)
    {
        const int lane = threadIdx.x % 32, wn = (threadIdx.x / 32) / kWarpsM;
        return wn * NF * 8 + nf * 8 + (lane % 4) * 2 + e;
    }
};

} // namespace mj
