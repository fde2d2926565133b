// This file contains the fp8 prefill GEMMs of the `wgmma` backend (sm_90a; quant=fp8_tensor
// with every fp8_act, and quant=fp8_block): the persistent warp-specialized kernel of
// wgmma_gemm.cuh (its schedule, tile shapes, TMA weight boxes, barriers and epilogue) on
// e4m3 operands:
//
//   producer   per k stage (BK = 128 codes: one 128-byte swizzle row, one K block of the
//              128x128 weight scales): thread 0 waits for the stage and issues the weight
//              boxes as for bf16 (1-byte elements); all 128 threads fill the BM A rows and
//              each row's dequant scale (stored per stage after the barriers), one of two ways:
//                copy      e4m3 rows quantized before this GEMM, gathered by 16-byte cp.async
//                          exactly as the 16-bit GEMMs gather, the scales by 4-byte cp.async:
//                          x of fp8_block (1 x 128 scales) and fp8_act=token (per token), both
//                          quantized by the route kernel (tc_fp8_quant.cuh); x of
//                          fp8_act=tensor, quantized once by the scatter kernel (the scale of
//                          every row the one after the route kernel's amax words); static x
//                          with x_scale; fp8_block's intermediate, quantized by GEMM1's epilogue
//                quantize  16-bit rows loaded, 16 values per lane, and quantized on their way
//                          into the stage (v / s through the scale's reciprocal, Fp8Div: the
//                          IEEE quotient's codes without a division per value; padding rows
//                          and k past K stored as zero codes), cvt to e4m3: fp8_tensor's
//                          intermediate (per row or per tensor, from GEMM1's epilogue amax),
//                          and fp8_block's intermediate in the tall gated tiles (64 columns of
//                          a 128-wide group per GEMM1 tile: the group's amax is the producer's)
//              then the stage's full barrier (cp.async arrival, or fence.proxy.async and an
//              arrival after plain stores)
//   consumers  per stage, per n128 half of B (large and short tiles) or per m64 block (tall):
//              4 x wgmma.m64n128k32.e4m3 into a temporary accumulator, wait, then
//              acc += tmp · (s_a[row] · s_b[the 64-row group of B]) in fp32, the promotion: the
//              weight block scales apply exactly per 128 K, and the tensor cores' internal
//              sums never run over more than 128 products; then the stage is released
//   epilogue   GEMM1: the activation on the promoted (fully scaled) fp32 accumulators, rounded
//              once to the dtype; fp8_block quantizes that stored value per row per 128
//              columns right there (wg_fp8_store_quantized: codes and scales for GEMM2 to
//              copy); fp8_tensor stores it and takes the amax of the stored values (an
//              atomicMax per row and quad for fp8_act=token, per warp otherwise) for GEMM2's
//              producer; GEMM2 writes y rounded to the dtype (wg_store_block)
//
// Every quantization is the contract's (docs/SEMANTICS.md §5): scale = amax / 448 in fp32 over
// the group, code = e4m3(v / s) by IEEE division and a round-to-nearest-even, saturating
// conversion; the intermediate from its stored dtype value.
//
// NOTES: amax words and scales live in the workspace (runtime/launch_tc_fp8.h); the route
// kernel zeroes the intermediate's amax words, and every reader runs after its
// griddepcontrol.wait. Amax is an integer max over |v|'s bits, so NaN wins and the result does
// not depend on the order of the atomics; reruns are bit-identical.
#pragma once

#include "quant_act.cuh"
#include "tc_fp8_quant.cuh"
#include "wgmma_gemm.cuh"

namespace mj {

// How an fp8 GEMM's producer fills its A stages (see the header): quantizing 16-bit rows with
// scales of 1 x 128 groups (block), per row (row) or per tensor (tensor), or copying e4m3 rows
// quantized before it, with the scale per tensor (static x), per row or per 128-wide K block,
// or per tensor from the workspace (copy_ws_tensor: x of fp8_act=tensor, quantized by the
// scatter kernel, its scale after the T amax words).
enum class Fp8Scale : int { block = 0, row, tensor, copy_tensor, copy_row, copy_block, copy_ws_tensor };

// kInterQ: GEMM1's epilogue quantized the intermediate (fp8_block where a tile's intermediate
// columns are whole 128-wide groups: every shape but the tall gated one).
template <Quant kQ, Fp8Act kFa, bool kGemm2, bool kInterQ>
__host__ __device__ constexpr Fp8Scale fp8_scale_of()
{
    if (kQ == Quant::fp8_block) return !kGemm2 || kInterQ ? Fp8Scale::copy_block : Fp8Scale::block;
    if (kGemm2) return kFa == Fp8Act::token ? Fp8Scale::row : Fp8Scale::tensor;
    return kFa == Fp8Act::token ? Fp8Scale::copy_row : kFa == Fp8Act::static_scale ? Fp8Scale::copy_tensor
                                                                                     : Fp8Scale::copy_ws_tensor;
}
__host__ __device__ constexpr bool fp8_scale_copies(Fp8Scale s) { return s >= Fp8Scale::copy_tensor; }

// 16 consecutive 16-bit values (lo: the first 8) -> 16 e4m3 codes with scale d.s, packed 4 per
// word: through the reciprocal where d is fast (tc_fp8_quant.cuh), else dividing.
template <Dtype D>
__device__ __forceinline__ void quantize16(const Vec16 &lo, const Vec16 &hi, const Fp8Div &d, u32 (&q)[4])
{
    Vec8 a, b;
    if (d.fast) {
        auto f = [&d](float x) { return fp8_quotient_fast(x, d); };
        a = quantize8_by<D>(lo, f), b = quantize8_by<D>(hi, f);
    } else {
        a = quantize8<D>(lo, d.s), b = quantize8<D>(hi, d.s);
    }
    q[0] = a.w[0], q[1] = a.w[1], q[2] = b.w[0], q[3] = b.w[1];
}

template <Dtype D>
__device__ __forceinline__ u32 amax16(const Vec16 &lo, const Vec16 &hi)
{
    u32 a = 0u;
#pragma unroll
    for (int e = 0; e < 16; ++e) {
        const u32 b = abs_bits(to_float<D>(vec16_elem(e < 8 ? lo : hi, e % 8)));
        a = b > a ? b : a;
    }
    return a;
}

// The GEMM's K, column tiles and k tiles, worked out inside each role after its setmaxnreg
// (values computed before it and live across it are parked in local memory by ptxas).
template <class S, WgGemm kKind>
__device__ __forceinline__ void wg_fp8_extents(int H, int I, WgSchedule &sc)
{
    constexpr int kCols = kKind == WgGemm::gemm1_gated ? S::BN / 2 : S::BN;
    sc.K = kKind == WgGemm::gemm2 ? I : H;
    const int N = kKind == WgGemm::gemm2 ? H : I;
    sc.n_col = (N + kCols - 1) / kCols;
    sc.k_tiles = (sc.K + S::BK - 1) / S::BK;
}

// One producer thread's share of one stage: rows row_in + 16·i of the tile, 16 values from
// K element kk each, quantized into the stage, the rows' scales beside it (lane kc 0 of a row).
// Padding (rows past the tile's, k past K) is stored as zero codes without a quotient.
template <class S, Dtype D, bool kGemm2, Fp8Scale kScale>
__device__ __forceinline__ void wg_fp8_fill_stage(const mj_layer_params &p, const WgStages<S> &sm, int stage,
                                                  const RowTile &rt, const int *rows, int k, int K, int kt,
                                                  int row_in, int kc, u32 a_dst, const Fp8Div &d_all)
{
    constexpr int kRowsPerPass = S::kProducerThreads / 8;
    const int kk = kt * S::BK + kc * 16;
    const bool in_k = kk < K; // K % 16 == 0 (runtime/launch_wgmma.c): 16 values all in or all out
    const i64 ld = kGemm2 ? p.inter : p.hidden;
    const u32 a_stage = sm.a(stage), scales = sm.row_scales(stage);
    // two rows' loads in flight per thread: all of them would not fit the producer's registers
#pragma unroll 2
    for (int i = 0; i < S::BM / kRowsPerPass; ++i) {
        const int m = row_in + i * kRowsPerPass;
        const bool has_row = m < rt.rows;
        const i64 row = !has_row ? 0 : kGemm2 ? static_cast<i64>(rt.row0 + m) : static_cast<i64>(rows[m] / k);
        u32 q[4] = {0u, 0u, 0u, 0u};
        Fp8Div d = d_all;
        const u16 *src = reinterpret_cast<const u16 *>(kGemm2 ? p.ws_inter : p.x) + row * ld + kk;
        const Vec16 lo = has_row && in_k ? ld_nc_16(src) : vec16_zero();
        const Vec16 hi = has_row && in_k ? ld_nc_16(src + 8) : vec16_zero();
        if constexpr (kScale == Fp8Scale::block) {
            d = fp8_div_of(scale_of(max_over_lanes<8>(amax16<D>(lo, hi)))); // the row's 8 lanes: its 128 values
        } else if constexpr (kScale == Fp8Scale::row) { // the intermediate's (x's are copied)
            d = fp8_div_of(has_row ? scale_of(reinterpret_cast<const u32 *>(p.ws_interscale)[rt.row0 + m]) : 0.0f);
        }
        if (has_row && in_k) quantize16<D>(lo, hi, d, q);
        st_shared_v4(a_stage + a_dst + static_cast<u32>(i * kRowsPerPass * S::kRowBytes), q);
        if (kc == 0) st_shared_u32(scales + 4u * static_cast<u32>(m), __float_as_uint(d.s));
    }
}

// The copy modes' sources of one producer thread for one tile, in wg_producer's gather
// layout (S::kLanesPerRow lanes per row, S::kChunks 16-byte chunks per lane, S::kRowsA rows
// per thread): its rows' e4m3 codes (nullptr: padding) and, for the rows whose scale it
// copies (rows i = kc, kc + kLanesPerRow, ...: each row's scale once per stage), the scale's
// address (before the k block's offset) and its place among the stage's row scales.
template <class S>
struct WgFp8Copy {
    static constexpr int kScaleRows = (S::kRowsA + S::kLanesPerRow - 1) / S::kLanesPerRow;
    const u8 *src[S::kRowsA];
    const u8 *base;                 // a valid address for the zero-filling copies (they read nothing)
    const float *scale[kScaleRows];
    const float *scales;            // the first row's scale: what a padding row copies
    int scale_row[kScaleRows]; // -1: none
};

// The rows of tile rt for thread (row_in, kc): x's codes by token (rows[m] / k), GEMM2's by
// position; the scale per tensor (one address), per row or per row and 128-wide K block.
template <class S, bool kGemm2, Fp8Scale kScale>
__device__ __forceinline__ void wg_fp8_copy_rows(const mj_layer_params &p, const RowTile &rt, const int *rows, int k,
                                                 int K, int row_in, int kc, WgFp8Copy<S> &c)
{
    constexpr bool kOne = kScale == Fp8Scale::copy_tensor || kScale == Fp8Scale::copy_ws_tensor; // one scale
    const u8 *base = reinterpret_cast<const u8 *>(kGemm2 ? p.ws_interq : kScale == Fp8Scale::copy_tensor ? p.x : p.ws_xq);
    const float *scales = kScale == Fp8Scale::copy_tensor ? reinterpret_cast<const float *>(p.x_scale)
                          : kScale == Fp8Scale::copy_ws_tensor
                              ? reinterpret_cast<const float *>(p.ws_xscale) + p.num_tokens
                              : reinterpret_cast<const float *>(kGemm2 ? p.ws_interscale : p.ws_xscale);
    const int stride = kOne ? 0 : kScale == Fp8Scale::copy_row ? 1 : K / MJ_FP8_BLOCK;
    c.base = base, c.scales = scales;
#pragma unroll
    for (int i = 0; i < S::kRowsA; ++i) {
        const int m = row_in + i * S::kRowsPerPass;
        c.src[i] = m >= rt.rows ? nullptr : base + (kGemm2 ? static_cast<i64>(rt.row0 + m) : static_cast<i64>(rows[m] / k)) * K;
    }
#pragma unroll
    for (int j = 0; j < WgFp8Copy<S>::kScaleRows; ++j) {
        const int i = kc + j * S::kLanesPerRow, m = row_in + i * S::kRowsPerPass;
        const bool has = i < S::kRowsA && m < rt.rows;
        c.scale_row[j] = i < S::kRowsA ? m : -1;
        c.scale[j] = !has ? nullptr
                          : scales + (kGemm2 ? static_cast<i64>(rt.row0 + m) : static_cast<i64>(rows[m] / k)) * stride;
    }
}

// The copy modes' share of one stage: wg_producer's 16-byte cp.async gather on e4m3 rows
// quantized before this GEMM (x by the route kernel or the caller, the intermediate by GEMM1's
// epilogue), and the row scales by 4-byte cp.async; padding codes and k past K land as zeros.
template <class S, Fp8Scale kScale>
__device__ __forceinline__ void wg_fp8_copy_stage(const WgStages<S> &sm, int stage, const WgFp8Copy<S> &c, int K,
                                                  int kt, int kc, const u32 (&a_dst)[S::kChunks])
{
    const u32 a_stage = sm.a(stage), row_scales = sm.row_scales(stage);
#pragma unroll
    for (int ch = 0; ch < S::kChunks; ++ch) {
        const int kk = kt * S::BK + (kc + ch * S::kLanesPerRow) * 16;
        const bool in_k = kk < K; // K % 16 == 0: a chunk is all in or all out
#pragma unroll
        for (int i = 0; i < S::kRowsA; ++i) {
            const bool live = in_k && c.src[i] != nullptr;
            cp_async_16(a_stage + a_dst[ch] + static_cast<u32>(i * S::kRowsPerPass * S::kRowBytes),
                        live ? c.src[i] + kk : c.base, live ? 16 : 0);
        }
    }
    // A padding row's scale never reaches a stored value (its codes are zeros and every
    // epilogue skips it), so it copies the first row's rather than zero-filling (cp_async_4).
#pragma unroll
    for (int j = 0; j < WgFp8Copy<S>::kScaleRows; ++j) {
        if (c.scale_row[j] < 0) continue;
        const int at = kScale == Fp8Scale::copy_block ? kt : 0;
        cp_async_4(row_scales + 4u * static_cast<u32>(c.scale_row[j]), (c.scale[j] ? c.scale[j] : c.scales) + at);
    }
}

// Warpgroup 0 of an fp8 GEMM: wg_producer's schedule and weight boxes; its A rows quantized on
// the way into the stage (wg_fp8_fill_stage, arriving after plain stores) or copied quantized
// (wg_fp8_copy_stage, arriving through cp.async as the 16-bit GEMMs do).
template <class S, WgGemm kKind, bool kPair, Dtype D, Fp8Scale kScale>
__device__ __forceinline__ void wg_producer_fp8(const mj_layer_params &p, const TmaDesc &tmap, int H, int I, int k,
                                                const WgStages<S> &sm, WgSchedule sc, bool pre_wait)
{
    constexpr bool kGated = kKind == WgGemm::gemm1_gated;
    constexpr bool kGemm2 = kKind == WgGemm::gemm2;
    constexpr int kCols = kGated ? S::BN / 2 : S::BN;
    setmaxnreg_dec<MJ_WGMMA_PRODUCER_REGS>();
    wg_fp8_extents<S, kKind>(H, I, sc);
    const int row_tiles = load_s32_l2(reinterpret_cast<const int *>(p.ws_tile_offsets) + p.num_local_experts);
    const int units = kPair ? (row_tiles + 1) / 2 : row_tiles;
    const int total = units * sc.n_col;
    const int tid = threadIdx.x; // 0..127
    const int row_in = tid / 8, kc = tid % 8; // the quantizing modes: 8 lanes x 16 values per row
    const u32 a_dst = static_cast<u32>(row_in * S::kRowBytes + ((kc ^ (row_in % 8)) * 16));
    // the copy modes: wg_producer's gather layout
    const int crow_in = tid / S::kLanesPerRow, ckc = tid % S::kLanesPerRow;
    u32 ca_dst[S::kChunks];
#pragma unroll
    for (int c = 0; c < S::kChunks; ++c)
        ca_dst[c] = static_cast<u32>(crow_in * S::kRowBytes + (((ckc + c * S::kLanesPerRow) ^ (crow_in % 8)) * 16));
    // as in wg_producer: the first tile's first weight stages before the wait
    const int pre = wg_issue_first_stages<S, kGated, kPair, PlainLayer>(p, tmap, sm, sc, units, row_tiles, total, I,
                                                                        pre_wait);
    Fp8Div d_all = fp8_div_of(0.0f); // the per-tensor scale (tensor: GEMM2's), with its reciprocal
    static_assert(kScale != Fp8Scale::tensor || kGemm2, "x per tensor is quantized by the scatter kernel");
    if constexpr (kScale == Fp8Scale::tensor)
        d_all = fp8_div_of(scale_of(*reinterpret_cast<const u32 *>(p.ws_interscale)));
    PipeState<S::kStages> pipe;
    for (int t = sc.first_tile; t < total; t += sc.tile_step) {
        RowTile rt;
        int col;
        int b_expert;
        bool shared;
        wg_tile_of<S::BM, kPair>(p, t, sc.n_col, units, row_tiles, sc.rank, &rt, &col, &b_expert, &shared);
        const int *rows = reinterpret_cast<const int *>(p.ws_rows) + rt.row0;
        const int c1 = col * kCols;
        const int c2a = kGated ? 2 * b_expert : b_expert;
        // copy modes: this thread's rows, once per tile (x: the pair's token; GEMM2: its position)
        WgFp8Copy<S> cp;
        if constexpr (fp8_scale_copies(kScale))
            wg_fp8_copy_rows<S, kGemm2, kScale>(p, rt, rows, k, sc.K, crow_in, ckc, cp);
        for (int kt = 0; kt < sc.k_tiles; ++kt) {
            if (t != sc.first_tile || kt >= pre) { // else issued before the wait
                mbar_wait(sm.empty_bar(pipe.stage), pipe.phase ^ 1u);
                if (tid == 0) wg_issue_b<S, kGated, kPair>(tmap, sm, sc.rank, pipe.stage, kt, c1, c2a, shared);
            }
            // pair: a CTA without rows leaves its A stage alone (its consumers skip the MMAs)
            if constexpr (fp8_scale_copies(kScale)) {
                if (rt.rows > 0) wg_fp8_copy_stage<S, kScale>(sm, pipe.stage, cp, sc.K, kt, ckc, ca_dst);
                cp_async_arrive_noinc(sm.full_bar(pipe.stage));
            } else {
                if (rt.rows > 0)
                    wg_fp8_fill_stage<S, D, kGemm2, kScale>(p, sm, pipe.stage, rt, rows, k, sc.K, kt, row_in, kc,
                                                            a_dst, d_all);
                fence_proxy_async(); // the generic-proxy stores, before wgmma (async proxy) reads them
                mbar_arrive(sm.full_bar(pipe.stage));
            }
            pipe.advance();
        }
    }
    if constexpr (fp8_scale_copies(kScale)) cp_async_wait_all(); // nothing may still write shared memory at exit
}

// tmp = A[64 x 128] · B[128 x 128]ᵀ of one stage: 4 x m64n128k32 (+32 bytes per k32), waited for.
__device__ __forceinline__ void wg_fp8_mma(float (&tmp)[64], u32 a_addr, u32 b_addr)
{
    const u64 da = smem_desc_sw128(a_addr), db = smem_desc_sw128(b_addr);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) wgmma_m64n128k32_e4m3(tmp, da + 2u * ks, db + 2u * ks, ks != 0 ? 1u : 0u);
    wgmma_commit();
    wgmma_wait<0>();
    fence_operands(tmp);
}

// acc[kOff + i] += tmp[i] · s, s by tmp register i's row half ((i/2) % 2: lo, hi) and 64-column
// group (i / 32: g0, g1).
template <int kOff, int N>
__device__ __forceinline__ void wg_fp8_promote(float (&acc)[N], const float (&tmp)[64], float lo0, float hi0,
                                               float lo1, float hi1)
{
#pragma unroll
    for (int i = 0; i < 64; ++i) {
        const float s = i < 32 ? ((i / 2) % 2 ? hi0 : lo0) : ((i / 2) % 2 ? hi1 : lo1);
        acc[kOff + i] = fmaf(tmp[i], s, acc[kOff + i]);
    }
}

// One consumer warpgroup's k loop over an fp8 tile (`two`, `live` as in wg_consumer_k_loop):
// per stage the B scales of its 64-row groups (sb[sb_off[g] + kt·sb_step]), the wait, the MMAs
// into tmp and their promotion into acc0 / acc1, then the release of the stage itself.
template <class S, bool kPair>
__device__ __forceinline__ void wg_fp8_k_loop(const WgStages<S> &sm, int k_tiles, PipeState<S::kStages> &pipe,
                                              float (&acc0)[S::kAcc], float (&acc1)[S::kAcc1], int r0, int rq, int lane, u32 peer_bars, const float *sb,
                                              const int (&sb_off)[S::BN / 64], int sb_step, const bool live,
                                              const bool two)
{
    auto release = [&](int s) {
        mbar_arrive(sm.empty_bar(s));
        if constexpr (kPair) mbar_arrive_cluster(peer_bars + 8u * static_cast<u32>(S::kStages + s));
    };
    for (int kt = 0; kt < k_tiles; ++kt) {
        float sbv[S::BN / 64];
#pragma unroll
        for (int g = 0; g < S::BN / 64; ++g) sbv[g] = sb[sb_off[g] + kt * sb_step];
        mbar_wait(sm.full_bar(pipe.stage), pipe.phase);
        if (live) {
            // a stage's own: live from its first wgmma to its promotion only, so that the
            // epilogue has these registers back
            float tmp[64];
            fence_proxy_async();
            const u32 a_stage = sm.a(pipe.stage), b_stage = a_stage + S::kABytes;
            const u32 sa = sm.row_scales(pipe.stage) + 4u * static_cast<u32>(r0 + rq);
            const float lo = __uint_as_float(ld_shared_u32(sa)), hi = __uint_as_float(ld_shared_u32(sa + 32u));
            const u32 a0 = a_stage + static_cast<u32>(r0 * S::kRowBytes);
            wg_fp8_mma(tmp, a0, b_stage);
            wg_fp8_promote<0>(acc0, tmp, lo * sbv[0], hi * sbv[0], lo * sbv[1], hi * sbv[1]);
            if constexpr (S::kBlocks == 1 && S::BN == 256) { // the second n128 half of B
                wg_fp8_mma(tmp, a0, b_stage + 128u * S::kRowBytes);
                wg_fp8_promote<64>(acc0, tmp, lo * sbv[2], hi * sbv[2], lo * sbv[3], hi * sbv[3]);
            }
            if constexpr (S::kBlocks == 2) {
                if (two) { // the second m64 block of rows (tall)
                    const float lo1 = __uint_as_float(ld_shared_u32(sa + 256u));
                    const float hi1 = __uint_as_float(ld_shared_u32(sa + 288u));
                    wg_fp8_mma(tmp, a0 + 64u * S::kRowBytes, b_stage);
                    wg_fp8_promote<0>(acc1, tmp, lo1 * sbv[0], hi1 * sbv[0], lo1 * sbv[1], hi1 * sbv[1]);
                }
            }
        }
        if (lane == 0) release(pipe.stage);
        pipe.advance();
    }
}

// fp8_tensor's intermediate amax of one stored m64 block (rows r0 + 64·b + 16·wq + lane/4 + 8h):
// per row (kRow: the quad's max, one atomicMax per row) or per tensor (the warp's max).
template <bool kRow>
__device__ __forceinline__ void wg_fp8_publish_amax(const mj_layer_params &p, const RowTile &rt, int r0, int wq,
                                                    int lane, int b, const u32 (&amax)[2])
{
    u32 *words = reinterpret_cast<u32 *>(p.ws_interscale);
    if constexpr (kRow) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const u32 v = max_over_lanes<4>(amax[h]);
            const int m = r0 + 64 * b + wq * 16 + lane / 4 + 8 * h;
            if (lane % 4 == 0 && m < rt.rows && v != 0u) atomicMax(words + rt.row0 + m, v);
        }
    } else {
        const u32 v = max_over_lanes<32>(amax[0] > amax[1] ? amax[0] : amax[1]);
        if (lane == 0 && v != 0u) atomicMax(words, v);
    }
}

// fp8_block's GEMM1 epilogue where the tile's intermediate columns are whole 128-wide groups
// (kInterQ): m64 block b's activations (as wg_store_block computes them) rounded once to the
// dtype, then quantized from that stored value per row per group: the quad of lanes holding a
// row shares its amax (two shuffles), the codes go to ws_interq [position, I] (2 bytes per
// register pair) and the scale to ws_interscale [position, I/128]; GEMM2 copies both.
template <class S, Dtype D, WgGemm kKind, int kAct>
__device__ __forceinline__ void wg_fp8_store_quantized(const mj_layer_params &p, const ActParams &act, int I,
                                                       const RowTile &rt, int col, int r0, int wq, int lane,
                                                       const float (&acc)[S::kAcc], int b)
{
    constexpr bool kGated = kKind == WgGemm::gemm1_gated;
    constexpr int kCols = kGated ? S::BN / 2 : S::BN;
    static_assert(kCols % MJ_FP8_BLOCK == 0, "a tile's intermediate columns are whole groups");
    const int c_in = 2 * (lane % 4), groups = I / MJ_FP8_BLOCK;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int m = r0 + 64 * b + wq * 16 + lane / 4 + 8 * h;
#pragma unroll
        for (int gi = 0; gi < kCols / MJ_FP8_BLOCK; ++gi) {
            float v[32]; // this lane's 32 values of the group: column 8·jj + c_in + {0, 1}
            u32 a = 0u;
#pragma unroll
            for (int jj = 0; jj < 16; ++jj) {
                const int j = gi * 16 + jj;
                float v0, v1;
                if constexpr (kGated) {
                    constexpr int g = S::BN / 4;
                    v0 = apply_gated_act<kAct>(acc[4 * j + 2 * h], acc[g + 4 * j + 2 * h], act);
                    v1 = apply_gated_act<kAct>(acc[4 * j + 2 * h + 1], acc[g + 4 * j + 2 * h + 1], act);
                } else {
                    v0 = apply_act<kAct>(acc[4 * j + 2 * h], act);
                    v1 = apply_act<kAct>(acc[4 * j + 2 * h + 1], act);
                }
                v[2 * jj] = to_float<D>(from_float<D>(v0)); // the stored value (the contract)
                v[2 * jj + 1] = to_float<D>(from_float<D>(v1));
                const u32 b0 = abs_bits(v[2 * jj]), b1 = abs_bits(v[2 * jj + 1]);
                a = b0 > a ? b0 : a;
                a = b1 > a ? b1 : a;
            }
            const float sc = scale_of(max_over_lanes<4>(a)); // the quad holds the row's 128
            const int g = col * (kCols / MJ_FP8_BLOCK) + gi;
            if (m >= rt.rows || g >= groups) continue;
            u8 *dst = reinterpret_cast<u8 *>(p.ws_interq) + static_cast<i64>(rt.row0 + m) * I + g * MJ_FP8_BLOCK + c_in;
#pragma unroll
            for (int jj = 0; jj < 16; ++jj)
                *reinterpret_cast<u16 *>(dst + 8 * jj) =
                    static_cast<u16>(e4m3x2(fp8_quotient(v[2 * jj], sc), fp8_quotient(v[2 * jj + 1], sc)));
            if (lane % 4 == 0) reinterpret_cast<float *>(p.ws_interscale)[static_cast<i64>(rt.row0 + m) * groups + g] = sc;
        }
    }
}

// The offsets into the weight scales of the tile's 64-row groups of B (fp8_block: a 128-row
// block each, clamped to the matrix where the last column tile passes its end); 0 per tensor.
template <class S, bool kGated, bool kBlock>
__device__ __forceinline__ void wg_fp8_b_scale_offsets(int e, int c1, int N, int K, int (&off)[S::BN / 64])
{
    constexpr int kG = S::BN / 64;
    const int n_blocks = (kGated ? 2 * N : N) / MJ_FP8_BLOCK, k_blocks = K / MJ_FP8_BLOCK;
#pragma unroll
    for (int g = 0; g < kG; ++g) {
        int row;
        if constexpr (kGated) row = g < kG / 2 ? min(c1 + 64 * g, N - 1) : N + min(c1 + 64 * (g - kG / 2), N - 1);
        else row = min(c1 + 64 * g, N - 1);
        off[g] = kBlock ? (e * n_blocks + row / MJ_FP8_BLOCK) * k_blocks : 0;
    }
}

// Warpgroups 1 and 2 of an fp8 GEMM: wg_consumer's tiles, the fp8 k loop, then the epilogue.
template <class S, Dtype D, WgGemm kKind, int kAct, bool kPair, Quant kQ, Fp8Act kFa, bool kInterQ>
__device__ __forceinline__ void wg_consumer_fp8(const mj_layer_params &p, const ActParams &act, int H, int I,
                                                const WgStages<S> &sm, WgSchedule sc, bool pre_wait, int warp,
                                                int lane, int wg)
{
    constexpr bool kGated = kKind == WgGemm::gemm1_gated;
    constexpr bool kGemm2 = kKind == WgGemm::gemm2;
    constexpr bool kBlock = kQ == Quant::fp8_block;
    constexpr bool kAmax = !kGemm2 && !kBlock; // fp8_tensor's intermediate scales
    constexpr int kCols = kGated ? S::BN / 2 : S::BN;
    setmaxnreg_inc<MJ_WGMMA_CONSUMER_REGS>();
    wg_fp8_extents<S, kKind>(H, I, sc);
    if (pre_wait) grid_dep_enter();
    const int row_tiles = reinterpret_cast<const int *>(p.ws_tile_offsets)[p.num_local_experts];
    const int units = kPair ? (row_tiles + 1) / 2 : row_tiles;
    const int total = units * sc.n_col;
    const int cw = wg - 1, wq = warp % 4;
    const int r0 = cw * S::kRowsPerConsumer, rq = wq * 16 + lane / 4;
    const float *wscale = reinterpret_cast<const float *>(kGemm2 ? p.w2_scale : p.w1_scale);
    float acc0[S::kAcc];
    float acc1[S::kAcc1];
    PipeState<S::kStages> pipe;
    const u32 peer_bars = kPair ? cluster_map_shared(sm.bars, sc.rank ^ 1u) : 0u;
    for (int t = sc.first_tile; t < total; t += sc.tile_step) {
        RowTile rt;
        int col, b_expert;
        bool shared;
        wg_tile_of<S::BM, kPair>(p, t, sc.n_col, units, row_tiles, sc.rank, &rt, &col, &b_expert, &shared);
        const int blocks =
            __shfl_sync(0xffffffffu, S::kBlocks == 2 && rt.rows > r0 + 64 ? 2 : rt.rows > r0 ? 1 : 0, 0);
#pragma unroll
        for (int i = 0; i < S::kAcc; ++i) acc0[i] = 0.0f;
#pragma unroll
        for (int i = 0; i < S::kAcc1; ++i) acc1[i] = 0.0f;
        int sb_off[S::BN / 64];
        wg_fp8_b_scale_offsets<S, kGated, kBlock>(b_expert, col * kCols, kGemm2 ? H : I, sc.K, sb_off);
        const float *sb = kBlock ? wscale : wscale + b_expert;
        if (S::kBlocks == 2 && blocks == 2)
            wg_fp8_k_loop<S, kPair>(sm, sc.k_tiles, pipe, acc0, acc1, r0, rq, lane, peer_bars, sb, sb_off,
                                    kBlock ? 1 : 0, true, true);
        else wg_fp8_k_loop<S, kPair>(sm, sc.k_tiles, pipe, acc0, acc1, r0, rq, lane, peer_bars, sb, sb_off,
                                     kBlock ? 1 : 0, blocks > 0, false);
        if (blocks == 0) continue;
        if constexpr (!kGemm2 && kInterQ) { // fp8_block: the intermediate quantized here
            wg_fp8_store_quantized<S, D, kKind, kAct>(p, act, I, rt, col, r0, wq, lane, acc0, 0);
            if constexpr (S::kBlocks == 2) {
                if (blocks == 2) wg_fp8_store_quantized<S, D, kKind, kAct>(p, act, I, rt, col, r0, wq, lane, acc1, 1);
            }
            continue;
        }
        u32 amax[2] = {0u, 0u};
        wg_store_block<S, D, kKind, kAct, PlainLayer, kAmax>(p, act, H, I, rt, col, r0, wq, lane, acc0, 0, amax);
        if constexpr (kAmax) wg_fp8_publish_amax<kFa == Fp8Act::token>(p, rt, r0, wq, lane, 0, amax);
        if constexpr (S::kBlocks == 2) {
            if (blocks == 2) {
                u32 amax1[2] = {0u, 0u};
                wg_store_block<S, D, kKind, kAct, PlainLayer, kAmax>(p, act, H, I, rt, col, r0, wq, lane, acc1, 1, amax1);
                if constexpr (kAmax) wg_fp8_publish_amax<kFa == Fp8Act::token>(p, rt, r0, wq, lane, 1, amax1);
            }
        }
    }
}

// The body of the fp8 layer's GEMM entries (wgmma_layer.cuh), S one of WgLarge8, WgTall8,
// WgShort8: wgmma_gemm's set-up (schedule, barriers, roles, pair cluster barriers) with the
// fp8 roles. kLayerGated: the layer's activation, which decides for GEMM2 too whether GEMM1's
// tiles of this shape quantized the intermediate (whole 128-wide groups of columns).
template <class S, Dtype D, WgGemm kKind, int kAct, bool kPair, Quant kQ, Fp8Act kFa, bool kLayerGated>
__device__ __forceinline__ void wgmma_gemm_fp8(const mj_layer_params &p, const TmaDesc &tmap, const ActParams &act,
                                               int H, int I, int k, unsigned char *smem_raw)
{
    static_assert(S::BK == MJ_WGMMA_FP8_BK, "an fp8 stage is one 128-wide K block");
    static_assert(!kPair || S::BM == MJ_WGMMA_BM, "the pair path runs the large tiles");
    constexpr bool kGemm2 = kKind == WgGemm::gemm2;
    constexpr int kEmptyArrivals = S::kConsumerWarps * (kPair ? 2 : 1);
    WgSchedule sc; // its extents: wg_fp8_extents, in each role
    sc.rank = kPair ? cluster_ctarank() : 0u;
    sc.first_tile = kPair ? static_cast<int>(cluster_id_x()) : static_cast<int>(blockIdx.x);
    sc.tile_step = kPair ? static_cast<int>(cluster_count_x()) : static_cast<int>(gridDim.x);
    const bool pre_wait = kGemm2 || !MJ_OFFSETS_SCATTER(p.num_pairs);
    if (!pre_wait) grid_dep_enter();
    sc.K = sc.n_col = sc.k_tiles = 0;

    WgStages<S> sm;
    sm.base = (smem_addr(smem_raw) + 1023u) & ~1023u;
    sm.bars = sm.base + S::kStages * S::kStageBytes;
    const int warp = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 32, 0);
    const int lane = threadIdx.x % 32;
    const int wg = warp / 4;
    if (threadIdx.x == 0) {
        for (int s = 0; s < S::kStages; ++s) {
            mbar_init(sm.full_bar(s), S::kProducerThreads + 1); // the producer's arrivals + the TMA arming
            mbar_init(sm.empty_bar(s), kEmptyArrivals);
        }
        fence_proxy_async();
        fence_mbarrier_init();
        tma_prefetch_desc(&tmap);
    }
    if constexpr (kPair) cluster_sync();
    else __syncthreads();

    constexpr bool kInterQ = kQ == Quant::fp8_block && (kLayerGated ? S::BN / 2 : S::BN) % MJ_FP8_BLOCK == 0;
    constexpr Fp8Scale kScale = fp8_scale_of<kQ, kFa, kGemm2, kInterQ>();
    if (wg == 0) wg_producer_fp8<S, kKind, kPair, D, kScale>(p, tmap, H, I, k, sm, sc, pre_wait);
    else wg_consumer_fp8<S, D, kKind, kAct, kPair, kQ, kFa, kInterQ>(p, act, H, I, sm, sc, pre_wait, warp, lane, wg);
    if constexpr (kPair) cluster_sync();
}

using WgLarge8 = WgShape<MJ_WGMMA_BM, MJ_WGMMA_BN, MJ_WGMMA_STAGES, MJ_WGMMA_FP8_SMEM, 1>;
using WgTall8 = WgShape<MJ_WGMMA_TALL_BM, MJ_WGMMA_TALL_BN, MJ_WGMMA_STAGES, MJ_WGMMA_FP8_SMEM, 1>;
using WgShort8 = WgShape<MJ_WGMMA_SHORT_BM, MJ_WGMMA_SHORT_BN, MJ_WGMMA_SHORT_STAGES, MJ_WGMMA_FP8_SHORT_SMEM, 1>;
static_assert(WgLarge8::kStageBytes == MJ_WGMMA_STAGE_BYTES && WgShort8::kStageBytes == MJ_WGMMA_SHORT_STAGE_BYTES,
              "an fp8 stage has the bytes of a 16-bit one: twice the K, half the element");

} // namespace mj
