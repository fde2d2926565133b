// This file contains the tensor-core GEMM mainloop of the `mma` backend for 4-bit weights
// (w4a16, mxfp4): the weights stream into shared memory as the packed bytes they are (a
// quarter of a bf16 layer's bytes) and are dequantized there (mma_w4_dequant.cuh), and the
// 16-bit activations come in as in the 16-bit mainloop. The weight rows are the MMA's M
// (kWOnA: the decode path, where each thread dequantizes its own MMA operand registers) or its
// N (the large path, where the CTA dequantizes each stage once into a 16-bit B buffer).
//
//   k order, weights on A (decode)
//              an MMA sums its 16 k in any order as long as A and B agree, so inside a stage of
//              BKW = 256 k, thread t of each quad (t = lane % 4) owns the contiguous run
//              [64t, 64t + 64) of every row: k-step s of the stage multiplies elements
//              4s..4s+3 of the runs (MMA k-index 2t, 2t+1 -> run 4s, 4s+1; 2t+8, 2t+9 ->
//              4s+2, 4s+3). A thread's weights are then two 16-byte shared loads per row and
//              stage, a run spans one scale group or two (groups of >= 32, aligned), and its
//              activations are 16-byte loads of 4 words that feed two k-steps. Chunk c of
//              weight row r sits at c ^ ((r & 3) << 1) ^ (r & 1), activation chunk c of row r at
//              c ^ (r & 1) ^ (((c >> 3) & 3) << 1), so the 8 lanes of a 16-byte load phase
//              (2 rows x 4 runs) hit 8 bank groups. 256 k a stage (not 128) halves the loop,
//              copy and barrier instructions a weight costs, and the decode GEMMs' time follows
//              their instructions (docs/PERFORMANCE.md)
//   narrow     a decode tile of at most 8 tokens (nearly every decode tile: a token's k
//              experts rarely share one) multiplies only the first n8 fragment of tokens, and
//              the threads of the activation rows past it copy nothing: 16 MMAs, 8 shared
//              loads and half the activation copies fewer a stage (k_loop<1>)
//   weights on B (large)
//              each stage's weights are dequantized by the whole CTA into a 16-bit buffer in
//              the 16-bit mainloop's B layout (dequant_stage_wb) during the stage before, and
//              the 16-bit mainloop's step (MmaMainloop::compute_ab: ldmatrix, MMA) multiplies
//              them: each weight is decoded once, not once per warp of its column, and the
//              decode's registers are not live across the MMAs, so the 64 accumulators fit
//              the 128-register cap of two CTAs per SM (run_wb)
//   global ->  cp.async.cg 16-byte chunks. On A kStages stages in flight (the 16-bit
//   shared     mainloop's pipeline: wait_group(kStages-2), one __syncthreads per stage), per
//              stage the weights' kRowsW rows of BKW/2 bytes, then the activations' kRowsX rows
//              of 2·BKW bytes; on B the packed weights one stage further ahead (run_wb). On
//              A a thread copies 4 chunks, 2 apart, of one weight row and 4 chunks,
//              8 apart, of one activation row, each from one pointer (offsets in the
//              instruction; the swizzle is an XOR of each chunk's shared address, the stages
//              being 1024-byte aligned: mj_tc_smem), and tests k only in a stage that reaches
//              past K; on B (no swizzle of the weights: a load phase reads consecutive bytes)
//              a thread's chunks are a column of rows
//   scales     read from global (ld.global.nc): on A per thread for its own rows one stage
//              ahead (the next stage's before this stage's math); on B a thread per (row,
//              group) into a shared buffer, two stages ahead of the dequantization that reads
//              it; a row's scales along K are contiguous, so most of these loads hit L1
//
// The accumulator fragment and a_index / b_index are the 16-bit mainloop's (mma_mainloop.cuh),
// so its epilogues apply unchanged. Determinism: each output is a fixed sequence of MMAs over
// the stages in order, independent of the tile position. k_lo and k_hi - k_lo are multiples of
// 32 (4-bit shapes are, docs/SEMANTICS.md), so a 16-byte weight chunk is wholly in or past K.
// (Marlin and Machete dequantize in registers the same way after cp.async of packed bytes;
// their offline weight permutation is replaced here by the choice of k order above, which
// leaves the contract's layout untouched.)
#pragma once

#include "common/mma_params.h"
#include "common/ptx.cuh"
#include "common/types.cuh"
#include "mma_mainloop.cuh"
#include "mma_w4_dequant.cuh"

namespace mj {

__device__ __forceinline__ void lds_128(u32 addr, u32 (&r)[4])
{
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// W: a W4Format. kRowsW weight rows x kRowsX activation rows per CTA; BKW k per stage (256
// on A, 64 on B); kWOnA: weights are A (M) and activations B (N), else the reverse.
template <Dtype D, class W, int kThreads, int kRowsW, int kRowsX, int BKW, int kStages, bool kWOnA, int kWarpsM,
          int kWarpsN, int MF, int NF>
struct MmaW4Mainloop {
    static constexpr int kSpan = BKW / 4;            // k of a row one thread owns per stage
    static constexpr int kPairs = BKW / 32;          // pairs of k-steps per stage
    // Weights on A: the scale groups a thread's run spans (a run of 64 k, groups of 32: two).
    static constexpr int kRunGroups = kSpan > W::kGroup ? kSpan / W::kGroup : 1;
    static constexpr int kWRowBytes = BKW / 2, kXRowBytes = BKW * 2;
    static constexpr int kWChunks = kWRowBytes / 16, kXChunks = kXRowBytes / 16;
    static constexpr int kWBytes = kRowsW * kWRowBytes;
    static constexpr int kStageBytes = kWBytes + kRowsX * kXRowBytes;
    // Weights on B: two buffers of a stage's group constants (W4Group::s) of every weight row,
    // at most two groups per stage.
    static constexpr int kStageGroups = BKW > W::kGroup ? BKW / W::kGroup : 1;
    static constexpr int kGroupBufBytes = kRowsW * 2 * 4;
    // Weights on B: then two buffers of a stage's weights dequantized (kRowsW rows of BKW
    // dtype values in the 16-bit mainloop's B layout), one written while the other is read.
    // Its packed weights run one stage ahead of the activations (kStages + 1 weight slots,
    // kStages activation slots), since a stage is dequantized during the stage before.
    static constexpr int kBfBytes = kRowsW * BKW * 2;
    static constexpr int kXBytes = kRowsX * kXRowBytes;
    static constexpr int kSmemBytes = kWOnA ? kStages * kStageBytes
                                            : (kStages + 1) * kWBytes + kStages * kXBytes + 2 * kGroupBufBytes +
                                                  2 * kBfBytes;
    static_assert(kWOnA || (kStageGroups <= 2 && kRowsW * kStageGroups <= kThreads),
                  "one thread loads the constants of one (row, group) of a stage");
    static constexpr int kWRowsPerPass = kThreads / kWChunks, kXRowsPerPass = kThreads / kXChunks;
    static constexpr int kLoadsW = kRowsW / kWRowsPerPass;
    static constexpr int kLoadsX = (kRowsX + kXRowsPerPass - 1) / kXRowsPerPass;
    static constexpr int kMyW = 2 * MF; // weights on A: the weight rows this thread dequantizes
    static constexpr int kRowsA = kWOnA ? kRowsW : kRowsX, kRowsB = kWOnA ? kRowsX : kRowsW;
    // Weights on A: a thread copies kWPerThread chunks, kWThreads apart, of one weight row and
    // kXPerThread chunks, kXThreads apart, of one activation row, each from one pointer, so
    // each copy instruction of a warp reads whole 32-byte sectors.
    static constexpr int kWThreads = kThreads / kRowsW, kWPerThread = kWChunks / kWThreads;
    static constexpr int kXThreads = kThreads / kRowsX, kXPerThread = kXChunks / kXThreads;
    static_assert(!kWOnA || (kWThreads == 2 && kWThreads * kRowsW == kThreads && kWPerThread * 2 == kWChunks &&
                             kXThreads == 8 && kXThreads * kRowsX == kThreads && kXPerThread * 8 == kXChunks),
                  "weights on A: each thread copies whole chunks of one weight row and one activation row");

    static_assert(kWOnA ? BKW == 256 : BKW == 64, "weights on A: 256 k a stage (runs of 64 k); on B: 64");
    static_assert(kWarpsM * kWarpsN * 32 == kThreads, "the warp grid must cover the CTA");
    static_assert(kWarpsM * MF * 16 == kRowsA, "the warps' m16 fragments must cover A's rows");
    static_assert(kWarpsN * NF * 8 == kRowsB, "the warps' n8 fragments must cover B's rows");
    static_assert(kRowsW % kWRowsPerPass == 0, "the weight rows must be whole load passes");
    static_assert(kXRowsPerPass % 2 == 0, "a thread's activation chunks must keep one swizzle phase");
    static_assert(kRowsX % kXRowsPerPass == 0 || kRowsX < kXRowsPerPass,
                  "the activation rows must be whole load passes, or fewer than one pass");
    static_assert(kStages >= 2, "a pipeline needs at least two stages");

    // The 16-bit mainloop of the same tile: its accumulators, and on B its stage step
    // (compute_ab) on the dequantized weights.
    using Mma16 = MmaMainloop<D, kThreads, kRowsA, kRowsB, kStages, kWarpsM, kWarpsN, MF, NF>;
    using Acc = typename Mma16::Acc;

    // Swizzled 16-byte chunk index of activation chunk c of row r (weights on B: the 16-bit
    // mainloop's c ^ (r % 8), which its ldmatrix reads need).
    __device__ __forceinline__ static int x_chunk(int r, int c)
    {
        if constexpr (kWOnA) return c ^ (r & 1) ^ (((c >> 3) & 3) << 1);
        else return c ^ (r & 7);
    }

    // Weights on A: swizzled chunk index of weight chunk c of row r, so that the copies (4 rows
    // x 2 chunks a phase) and the runs' reads (2 rows x 4 runs) each hit 8 bank groups.
    __device__ __forceinline__ static int w_chunk(int r, int c) { return c ^ ((r & 3) << 1) ^ (r & 1); }

    // A padding weight row reads the tile's first row: every accumulator of a padding row
    // stays in that row (an MMA's output row or column depends on its own operand row only),
    // which no epilogue stores, so its copies test only k (padding rows are an edge tile's). A
    // padding token's chunks are zero-filled instead (a decode tile is mostly padding, whose
    // reads would double the stage's bytes), by a mask of this thread's live token rows.
    // Weights on A use w[0], x[0] (the thread's one row of each) and x_live (that row is a
    // token's); on B every entry, x_rows and x_live as commented.
    struct Loader {
        const u8 *w[kLoadsW];
        const u16 *x[kLoadsX];
        u32 x_rows; // bit i: x[i] is a token's row
        int wc, xc;  // this thread's chunk column: weights (32 k each), activations (8 k each)
        u32 dst_w0, dst_x0;
        bool x_live; // kRowsX < kXRowsPerPass: only the first kRowsX row-threads load
    };

    template <class WRow, class XRow>
    __device__ __forceinline__ static void make_loader(Loader &ld, WRow w_row, XRow x_row)
    {
        const int tid = threadIdx.x;
        // a tile's first weight row and token exist (a tile has rows, a column tile starts in N)
        const u8 *w_pad = w_row(0).data;
        const u16 *x_pad = x_row(0);
        if constexpr (kWOnA) {
            // weight chunks wc + 2i of row wr; activation chunks xc + 8i of row xr
            const int wr = tid / kWThreads, xr = tid / kXThreads;
            ld.wc = tid % kWThreads;
            ld.xc = tid % kXThreads;
            const u8 *w = w_row(wr).data;
            const u16 *x = x_row(xr);
            ld.w[0] = w != nullptr ? w : w_pad;
            ld.x[0] = x != nullptr ? x : x_pad;
            ld.x_live = x != nullptr;
            // chunk i of the thread sits at dst_w0 ^ 32i and (dst_x0 ^ 32i) + 128i (w_chunk,
            // x_chunk: the XOR flips the chunk-index bits that i sets)
            ld.dst_w0 = static_cast<u32>(wr * kWRowBytes + w_chunk(wr, ld.wc) * 16);
            ld.dst_x0 = static_cast<u32>(kWBytes + xr * kXRowBytes + x_chunk(xr, ld.xc) * 16);
        } else {
            const int wr = tid / kWChunks, xr = tid / kXChunks;
            ld.wc = tid % kWChunks;
            ld.xc = tid % kXChunks;
#pragma unroll
            for (int i = 0; i < kLoadsW; ++i) {
                const u8 *r = w_row(wr + i * kWRowsPerPass).data;
                ld.w[i] = r != nullptr ? r : w_pad;
            }
            ld.x_live = xr < kRowsX;
            ld.x_rows = 0u;
#pragma unroll
            for (int i = 0; i < kLoadsX; ++i) {
                const u16 *r = ld.x_live ? x_row(xr + i * kXRowsPerPass) : nullptr;
                ld.x[i] = r != nullptr ? r : x_pad;
                ld.x_rows |= r != nullptr ? 1u << i : 0u;
            }
            ld.dst_w0 = static_cast<u32>(wr * kWRowBytes + ld.wc * 16);
            ld.dst_x0 = static_cast<u32>(kWBytes + xr * kXRowBytes + x_chunk(xr, ld.xc) * 16);
        }
    }

    // The weight chunks or the activation chunks of the stage at absolute k0 (k_hi: the
    // end of this tile's K range; a chunk past it is zero-filled, its address its row's start).
    // Weights on B: a thread's chunks of a stage share their k, so one test covers them. On A:
    // a stage wholly inside K copies without tests; the last, partial one tests each chunk.
    __device__ __forceinline__ static void load_stage_w(const Loader &ld, u32 stage_base, int k0, int k_hi)
    {
        if constexpr (kWOnA) {
            const u32 dst = stage_base + ld.dst_w0;
            const int kw = k0 + ld.wc * 32;
            if (k0 + BKW <= k_hi) {
                const u8 *src = ld.w[0] + kw / 2;
#pragma unroll
                for (int i = 0; i < kWPerThread; ++i) cp_async_16(dst ^ (i * 32), src + i * 32, 16);
            } else {
#pragma unroll
                for (int i = 0; i < kWPerThread; ++i) {
                    const bool live = kw + i * 64 < k_hi;
                    cp_async_16(dst ^ (i * 32), ld.w[0] + (live ? kw / 2 + i * 32 : 0), live ? 16 : 0);
                }
            }
        } else {
            const int kw = k0 + ld.wc * 32;
            const bool live = kw < k_hi;
            const int at = live ? kw / 2 : 0;
#pragma unroll
            for (int i = 0; i < kLoadsW; ++i)
                cp_async_16(stage_base + ld.dst_w0 + i * kWRowsPerPass * kWRowBytes, ld.w[i] + at, live ? 16 : 0);
        }
    }

    __device__ __forceinline__ static void load_stage_x(const Loader &ld, u32 stage_base, int k0, int k_hi)
    {
        if constexpr (kWOnA) {
            const u32 dst = stage_base + ld.dst_x0;
            const int kx = k0 + ld.xc * 8;
            if (k0 + BKW <= k_hi) {
                const u16 *src = ld.x[0] + kx;
                const int bytes = ld.x_live ? 16 : 0;
#pragma unroll
                for (int i = 0; i < kXPerThread; ++i) cp_async_16((dst ^ (i * 32)) + i * 128, src + i * 64, bytes);
            } else {
#pragma unroll
                for (int i = 0; i < kXPerThread; ++i) {
                    const bool live = ld.x_live && kx + i * 64 < k_hi;
                    cp_async_16((dst ^ (i * 32)) + i * 128, ld.x[0] + (live ? kx + i * 64 : 0), live ? 16 : 0);
                }
            }
        } else {
            const int kx = k0 + ld.xc * 8;
            const bool live = kx < k_hi;
            const int at = live ? kx : 0;
            if (ld.x_live) {
#pragma unroll
                for (int i = 0; i < kLoadsX; ++i)
                    cp_async_16(stage_base + ld.dst_x0 + i * kXRowsPerPass * kXRowBytes, ld.x[i] + at,
                                live && (ld.x_rows >> i & 1u) ? 16 : 0);
            }
        }
    }

    // Weights on A: tile row of this thread's j-th weight row (fragment j / 2, half j % 2).
    __device__ __forceinline__ static int my_w_row(int j)
    {
        const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
        return (warp % kWarpsM) * MF * 16 + (j / 2) * 16 + (j % 2) * 8 + lane / 4;
    }

    // Weights on A: tile row of this thread's activation row of n8 fragment j.
    __device__ __forceinline__ static int my_x_row(int j)
    {
        const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
        return (warp / kWarpsM) * NF * 8 + j * 8 + lane / 4;
    }

    // The scale-group constants of this thread's rows for the stage at absolute k0, group q of
    // its run in grp[j][q] (a padding row has the tile's first row's, as its weights; a group
    // past k_hi is s = 0, so the zero-filled k beyond a split's end add exact zeros). A run of
    // 64 in one group never straddles k_hi: K is a multiple of its group (>= 64) and a split
    // ends on whole tiles of MJ_MMA_BK = 64.
    // kScaled (row-scaled mxfp4, W4Format::kRowScaled): each group's one factor, by its row's bias.
    template <bool kScaled>
    __device__ __forceinline__ static void load_groups(const W4Row (&mine)[kMyW], const u32 (&bias)[kMyW], int k0,
                                                       int k_hi, W4Group (&grp)[kMyW][kRunGroups])
    {
        const int k = k0 + (threadIdx.x % 4) * kSpan;
#pragma unroll
        for (int j = 0; j < kMyW; ++j)
#pragma unroll
            for (int q = 0; q < kRunGroups; ++q) {
                const int kq = k + q * W::kGroup;
                const int g = static_cast<int>(static_cast<unsigned>(kq) / W::kGroup);
                if constexpr (kScaled) grp[j][q] = W::group_scaled(mine[j], g, kq < k_hi, bias[j]);
                else grp[j][q] = W::group(mine[j], g, kq < k_hi);
            }
    }

    // Row-scaled mxfp4: the bias of each of this thread's rows from its largest e8m0 byte over
    // the tile's groups (the quad's four threads share the rows, each reading every fourth
    // group), and whether a row breaks the form's bounds (W4Format::kRowScaled).
    __device__ __forceinline__ static bool row_biases(const W4Row (&mine)[kMyW], int k_lo, int k_hi,
                                                      u32 (&bias)[kMyW])
    {
        const int g_lo = k_lo / W::kGroup, g_hi = k_hi / W::kGroup;
        int mx[kMyW], mn[kMyW];
#pragma unroll
        for (int j = 0; j < kMyW; ++j) {
            mx[j] = 0;
            mn[j] = 255;
        }
#pragma unroll 4
        for (int g = g_lo + static_cast<int>(threadIdx.x % 4); g < g_hi; g += 4)
#pragma unroll
            for (int j = 0; j < kMyW; ++j) {
                const int b = static_cast<int>(ld_nc_u8(mine[j].scale + g));
                mx[j] = max(mx[j], b);
                mn[j] = min(mn[j], b);
            }
        bool off = false;
#pragma unroll
        for (int j = 0; j < kMyW; ++j) {
#pragma unroll
            for (int lane = 1; lane < 4; lane *= 2) {
                mx[j] = max(mx[j], __shfl_xor_sync(0xffffffffu, mx[j], lane));
                mn[j] = min(mn[j], __shfl_xor_sync(0xffffffffu, mn[j], lane));
            }
            bias[j] = W::row_bias(static_cast<u32>(mx[j]));
            off |= mx[j] != 255 && (mx[j] > W::kRowScaledMaxByte || mx[j] - mn[j] > W::kRowScaledSpread);
        }
        return off;
    }

    // This thread's packed weights of a stage: kPairs words per row.
    __device__ __forceinline__ static void load_weights(u32 stage_base, u32 (&wq)[kMyW][kPairs])
    {
        const int t = threadIdx.x % 4;
#pragma unroll
        for (int j = 0; j < kMyW; ++j) {
            const int r = my_w_row(j);
            const u32 row = stage_base + static_cast<u32>(r * kWRowBytes);
            u32 v[4], u[4];
            lds_128(row + static_cast<u32>(w_chunk(r, 2 * t) * 16), v);
            lds_128(row + static_cast<u32>(w_chunk(r, 2 * t + 1) * 16), u);
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                wq[j][q] = v[q];
                wq[j][q + 4] = u[q];
            }
        }
    }

    // Activation words 4p..4p+3 of this thread's run of its tile row r.
    __device__ __forceinline__ static void load_x(u32 stage_base, int r, int p, u32 (&v)[4])
    {
        const int c = (threadIdx.x % 4) * kPairs + p;
        lds_128(stage_base + static_cast<u32>(kWBytes + r * kXRowBytes + x_chunk(r, c) * 16), v);
    }

    // Pair i of word q with its group's constants (kScaled: the row-scaled factor alone).
    template <bool kScaled>
    __device__ __forceinline__ static u32 pair(u32 q, u32 aux, int i, const W4Group &c)
    {
        if constexpr (kScaled) return W::pair_fused(q, aux, i, c.s);
        else return W::pair(q, aux, i, c);
    }

    // One stage's math, weights on A: kPairs x (weight word p dequantized, 16-byte activation
    // loads, 2 k-steps), over the first kNF n8 fragments of tokens.
    template <int kNF = NF, bool kScaled = false>
    __device__ __forceinline__ static void compute_stage(u32 stage_base, const W4Group (&grp)[kMyW][kRunGroups],
                                                         Acc &acc)
    {
        u32 wq[kMyW][kPairs];
        load_weights(stage_base, wq);
#pragma unroll
        for (int p = 0; p < kPairs; ++p) {
            const int g = p / (kPairs / kRunGroups); // the word's group in the run
            u32 aux[kMyW];
#pragma unroll
            for (int j = 0; j < kMyW; ++j) aux[j] = W::aux(wq[j][p]);
            u32 xb[kNF][4];
#pragma unroll
            for (int nf = 0; nf < kNF; ++nf) load_x(stage_base, my_x_row(nf), p, xb[nf]);
#pragma unroll
            for (int ss = 0; ss < 2; ++ss)
#pragma unroll
                for (int mf = 0; mf < MF; ++mf) {
                    const int j0 = 2 * mf, j1 = 2 * mf + 1;
                    const u32 a[4] = {pair<kScaled>(wq[j0][p], aux[j0], 2 * ss, grp[j0][g]),
                                      pair<kScaled>(wq[j1][p], aux[j1], 2 * ss, grp[j1][g]),
                                      pair<kScaled>(wq[j0][p], aux[j0], 2 * ss + 1, grp[j0][g]),
                                      pair<kScaled>(wq[j1][p], aux[j1], 2 * ss + 1, grp[j1][g])};
#pragma unroll
                    for (int nf = 0; nf < kNF; ++nf) mma_16816<D>(acc.c[mf][nf], a, xb[nf][2 * ss], xb[nf][2 * ss + 1]);
                }
        }
    }

    // Weights on B (the large path): the CTA dequantizes each stage's weights once into a
    // 16-bit B buffer, and the 16-bit mainloop's step multiplies it (every warp of a column
    // of warps would otherwise decode the same weights, kWarpsM times over, and the decode's
    // registers on top of the 64 accumulators kept the kernel at one CTA per SM). Thread t
    // takes half t % 2 (32 k, 16 packed bytes: one scale group, groups being >= 32 and
    // aligned) of weight row t / 2 and stores each word's 8 k as one 16-byte chunk, chunk c of
    // row r at c ^ (r % 8) (the 8 lanes of a store phase: 4 rows x 2 halves, 8 bank groups).
    __device__ __forceinline__ static void dequant_stage_wb(u32 stage_base, const u32 *groups, u32 bf_base)
    {
        static_assert(kRowsW * 2 == kThreads && BKW == 64, "a thread dequantizes 32 k of one weight row a stage");
        const int r = threadIdx.x / 2, h = threadIdx.x % 2;
        const W4Group c = W::unpack(groups[(kStageGroups > 1 ? h * 32 / W::kGroup : 0) * kRowsW + r]);
        u32 q[4];
        lds_128(stage_base + static_cast<u32>(r * kWRowBytes + h * 16), q);
        const u32 row = bf_base + static_cast<u32>(r * BKW * 2);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const u32 aux = W::aux(q[i]);
            const u32 v[4] = {W::pair(q[i], aux, 0, c), W::pair(q[i], aux, 1, c), W::pair(q[i], aux, 2, c),
                              W::pair(q[i], aux, 3, c)};
            st_shared_v4(row + static_cast<u32>(((4 * h + i) ^ (r % 8)) * 16), v);
        }
    }

    // run_gated's k loop over kNF n8 fragments of tokens (kNF < NF: a narrow tile, whose
    // activation rows past the first fragment are not copied); kScaled: row-scaled mxfp4, each
    // stage's groups by their rows' bias.
    template <int kNF, bool kScaled>
    __device__ __forceinline__ static void k_loop(const Loader &ld, const W4Row (&mine)[kMyW], const u32 (&bias)[kMyW],
                                                  u32 base, int k_lo, int k_hi, int k_tiles,
                                                  W4Group (&cur)[kMyW][kRunGroups], Acc &acc)
    {
        W4Group nxt[kMyW][kRunGroups];
        const bool copy_x = kNF == NF || ld.x_live;
        int read_stage = 0, write_stage = kStages - 1;
        for (int kt = 0; kt < k_tiles; ++kt) {
            cp_async_wait<kStages - 2>();
            __syncthreads();
            const int next = kt + kStages - 1;
            if (next < k_tiles) {
                load_stage_w(ld, base + write_stage * kStageBytes, k_lo + next * BKW, k_hi);
                if (copy_x) load_stage_x(ld, base + write_stage * kStageBytes, k_lo + next * BKW, k_hi);
            }
            cp_async_commit();
            // past the end: s = 0, nothing read
            load_groups<kScaled>(mine, bias, k_lo + (kt + 1) * BKW, k_hi, nxt);
            compute_stage<kNF, kScaled>(base + read_stage * kStageBytes, cur, acc);
#pragma unroll
            for (int j = 0; j < kMyW; ++j)
#pragma unroll
                for (int q = 0; q < kRunGroups; ++q) cur[j][q] = nxt[j][q];
            read_stage = read_stage + 1 == kStages ? 0 : read_stage + 1;
            write_stage = write_stage + 1 == kStages ? 0 : write_stage + 1;
        }
    }

    struct NoGate {
        static constexpr bool kWaits = false;
        __device__ __forceinline__ void operator()() const {}
    };

    // w_row(r): weight tile row r (W4Row, data == nullptr: padding); x_row(n): activation tile
    // row n's base (nullptr: padding); both at k = 0; the tile's K range is [k_lo, k_hi).
    template <class WRow, class XRow>
    __device__ __forceinline__ static void run(unsigned char *smem, WRow w_row, XRow x_row, int k_lo, int k_hi, Acc &acc)
    {
        if constexpr (kWOnA) run_gated(smem, w_row, x_row, k_lo, k_hi, acc, NoGate{});
        else run_wb(smem, w_row, x_row, k_lo, k_hi, acc);
    }

    // run, but the activations are read only once gate() has returned (a Gate with kWaits =
    // true, called by every thread; decode_persistent.cuh: the GEMM1 tiles a GEMM2 tile
    // reads): the prologue's weight chunks (and scales) are requested first, then the gate
    // waits, then the prologue's activation chunks follow as one more commit group per stage,
    // as in MmaMainloop::run_gated (whose wait_group accounting holds here unchanged).
    // Row-scaled mxfp4 (W4Format::kRowScaled) takes that form in every tile whose rows all
    // allow it (one choice for the CTA, after a barrier).
    template <class WRow, class XRow, class Gate>
    __device__ __forceinline__ static void run_gated(unsigned char *smem, WRow w_row, XRow x_row, int k_lo, int k_hi,
                                                     Acc &acc, Gate gate)
    {
        constexpr bool kGated = Gate::kWaits;
        static_assert(kWOnA, "weights on B run run_wb");
        Mma16::clear(acc);
        Loader ld;
        make_loader(ld, w_row, x_row);
        W4Row mine[kMyW];
#pragma unroll
        for (int j = 0; j < kMyW; ++j) {
            mine[j] = w_row(my_w_row(j));
            if (mine[j].data == nullptr) mine[j] = w_row(0);
        }
        const u32 base = smem_addr(smem);
        const int k_tiles = k_hi > k_lo ? (k_hi - k_lo + BKW - 1) / BKW : 0;
        // a tile of at most 8 tokens (most decode tiles) runs only the first n8 fragment, and
        // the threads of the activation rows past it copy nothing (no fragment reads them)
        const bool narrow = NF > 1 && x_row(8) == nullptr;
        const bool copy_x = !narrow || ld.x_live;
#pragma unroll
        for (int s = 0; s < kStages - 1; ++s) {
            if (s < k_tiles) {
                load_stage_w(ld, base + s * kStageBytes, k_lo + s * BKW, k_hi);
                if (!kGated && copy_x) load_stage_x(ld, base + s * kStageBytes, k_lo + s * BKW, k_hi);
            }
            cp_async_commit();
        }
        u32 bias[kMyW] = {};
        bool scaled = false;
        if constexpr (W::kRowScaled) scaled = !__syncthreads_or(row_biases(mine, k_lo, k_hi, bias));
        W4Group cur[kMyW][kRunGroups];
        if (scaled) load_groups<true>(mine, bias, k_lo, k_hi, cur);
        else load_groups<false>(mine, bias, k_lo, k_hi, cur);
        if constexpr (kGated) {
            gate();
#pragma unroll
            for (int s = 0; s < kStages - 1; ++s) {
                if (s < k_tiles && copy_x) load_stage_x(ld, base + s * kStageBytes, k_lo + s * BKW, k_hi);
                cp_async_commit();
            }
        }
        if constexpr (W::kRowScaled) {
            if (scaled) {
                if (narrow) k_loop<1, true>(ld, mine, bias, base, k_lo, k_hi, k_tiles, cur, acc);
                else k_loop<NF, true>(ld, mine, bias, base, k_lo, k_hi, k_tiles, cur, acc);
                cp_async_wait<0>();
                scale_rows(bias, acc);
                return;
            }
        }
        if (narrow) k_loop<1, false>(ld, mine, bias, base, k_lo, k_hi, k_tiles, cur, acc);
        else k_loop<NF, false>(ld, mine, bias, base, k_lo, k_hi, k_tiles, cur, acc);
        cp_async_wait<0>();
    }

    // Row-scaled mxfp4: the accumulators of each row times its 2^R (NaN for a row with a scale
    // byte 255); row j of this thread holds c[j / 2][nf][2 (j % 2) + e].
    __device__ __forceinline__ static void scale_rows(const u32 (&bias)[kMyW], Acc &acc)
    {
#pragma unroll
        for (int j = 0; j < kMyW; ++j) {
            const float f = W::row_factor(bias[j]);
#pragma unroll
            for (int nf = 0; nf < NF; ++nf)
#pragma unroll
                for (int e = 0; e < 2; ++e) acc.c[j / 2][nf][2 * (j % 2) + e] *= f;
        }
    }

    // run, weights on B. Shared memory: kStages + 1 slots of packed weights, kStages of
    // activations, two buffers of group constants, two of dequantized weights. The commit
    // group issued in step j holds stage j + 3's weights and stage j + 2's activations (the
    // prologue's two: stages 0 and 1's weights with stage 0's activations, stage 2's weights
    // with stage 1's), so step kt's wait_group(1) finds stage kt's activations and stage kt +
    // 1's weights landed, as the 16-bit mainloop finds its stage two steps after the copy.
    // Step kt: barrier; copy; store stage kt + 2's constants; dequantize stage kt + 1 into
    // one buffer; multiply stage kt from the other. The barrier orders each buffer's writes
    // before its reads and its reads before the writes that reuse it (a slot's last reader
    // ran in step kt - 1 or before).
    template <class WRow, class XRow>
    __device__ __forceinline__ static void run_wb(unsigned char *smem, WRow w_row, XRow x_row, int k_lo, int k_hi,
                                                  Acc &acc)
    {
        static_assert(!kWOnA && kStages == 3, "weights on B: 4 weight slots and 3 activation slots");
        constexpr int kWSlots = kStages + 1;
        Mma16::clear(acc);
        Loader ld;
        make_loader(ld, w_row, x_row);
        const u32 base = smem_addr(smem);
        const u32 w_base = base, x_base = base + kWSlots * kWBytes;
        u32 *const group_buf = reinterpret_cast<u32 *>(smem + kWSlots * kWBytes + kStages * kXBytes);
        const u32 bf_base = x_base + kStages * kXBytes + 2 * kGroupBufBytes;
        // the Loader's activation offsets count from a stage's start, kWBytes before them
        auto load_x = [&](int s) {
            load_stage_x(ld, x_base + (s % kStages) * kXBytes - kWBytes, k_lo + s * BKW, k_hi);
        };
        auto load_w = [&](int s) { load_stage_w(ld, w_base + (s % kWSlots) * kWBytes, k_lo + s * BKW, k_hi); };
        // thread tid loads the constants of row tid % kRowsW, group tid / kRowsW of each stage
        const int g_row = threadIdx.x % kRowsW, g_q = threadIdx.x / kRowsW;
        const bool g_loads = g_q < kStageGroups;
        const W4Row g_w = w_row(g_row);
        auto stage_group = [&](int kt) -> u32 {
            const int k = k_lo + kt * BKW + g_q * W::kGroup;
            return W::group(g_w, k / W::kGroup, k < k_hi && g_w.scale != nullptr).s;
        };
        auto groups_of = [&](int kt) { return group_buf + (kt % 2) * (kGroupBufBytes / 4); };
        const int k_tiles = k_hi > k_lo ? (k_hi - k_lo + BKW - 1) / BKW : 0;
        if (k_tiles > 0) load_w(0);
        if (k_tiles > 1) load_w(1);
        if (k_tiles > 0) load_x(0);
        cp_async_commit();
        if (k_tiles > 2) load_w(2);
        if (k_tiles > 1) load_x(1);
        cp_async_commit();
        u32 pending = 0;
        if (g_loads) {
            groups_of(0)[g_q * kRowsW + g_row] = stage_group(0);
            groups_of(1)[g_q * kRowsW + g_row] = stage_group(1);
            pending = stage_group(2);
        }
        if (k_tiles > 0) {
            cp_async_wait<1>();
            __syncthreads();
            dequant_stage_wb(w_base, groups_of(0), bf_base);
        }
        for (int kt = 0; kt < k_tiles; ++kt) {
            cp_async_wait<1>();
            __syncthreads();
            if (kt + 3 < k_tiles) load_w(kt + 3);
            if (kt + 2 < k_tiles) load_x(kt + 2);
            cp_async_commit();
            if (g_loads) {
                groups_of(kt)[g_q * kRowsW + g_row] = pending; // stage kt + 2's
                pending = stage_group(kt + 3);                 // past the end: nothing read
            }
            if (kt + 1 < k_tiles)
                dequant_stage_wb(w_base + ((kt + 1) % kWSlots) * kWBytes, groups_of(kt + 1),
                                 bf_base + ((kt + 1) % 2) * kBfBytes);
            // compute_ab reads B row n at its base + (kRowsX + n) rows
            Mma16::compute_ab(x_base + (kt % kStages) * kXBytes,
                              bf_base + (kt % 2) * kBfBytes - kRowsX * kXRowBytes, acc);
        }
        cp_async_wait<0>();
    }

    // Where this thread's accumulators live (as MmaMainloop: A row of c[mf][nf][2h + e], B row).
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
