// This file contains the finalize stage: out[t, h] = Σ_j w[t, j] · y[t, j, h] over the slots
// j = 0..k−1 routed to this rank, in that FIXED order, accumulated in fp32 and rounded once
// to the dtype. A token with no local expert gets +0. Every element of out is written.
//
// Grid: blockIdx.x = token, blockIdx.y = a chunk of columns; a thread owns 4 (or 8: below)
// adjacent columns of one chunk. Why chunks and not a block looping over the row: at decode
// (T = 1..16) a block per token leaves one SM issuing H / 512 dependent rounds of k loads from
// L2; here every thread issues its k loads back to back (slots in groups of kBatch, each
// slot's id and weight loaded with its y row) and the whole stage is one round. The sum's
// order, hence every bit of out, is the same either way.
//
// How y holds a slot's value (kYInDtype): simt's GEMM2 stores it in fp32; the tensor-core
// backends' GEMM2s round it once to the layer's dtype (docs/SEMANTICS.md §6: y rounded once;
// the replay's MJ_REF_ROUND_Y), which halves y's round trip through memory, the largest
// traffic of a prefill layer after the weights. A split decode GEMM2
// (p.gemm2_splits = S > 1, tensor-core small path only) writes S fp32 partial sums per pair
// instead; a slot's value is their sum in split order (+ b2 where the layer has it: kB2), rounded
// here to the dtype as the unsplit GEMM2s round it, then weighted as above.
#pragma once

#include "common/params.h"
#include "common/types.cuh"

namespace mj {

// 8 or 16 bytes of y, through L1 (ld.global) or from L2 only (ld.global.cg, kFromL2): the
// persistent decode kernel finalizes columns whose y other blocks wrote while it ran, which an
// L1 line of this SM must not answer for (decode_persistent.cuh).
template <bool kFromL2>
__device__ __forceinline__ Vec8 load_y8(const void *src)
{
    if constexpr (kFromL2) {
        Vec8 v;
        asm volatile("ld.global.cg.v2.u32 {%0, %1}, [%2];\n" : "=r"(v.w[0]), "=r"(v.w[1]) : "l"(src));
        return v;
    } else {
        return *reinterpret_cast<const Vec8 *>(src);
    }
}

template <bool kFromL2>
__device__ __forceinline__ Vec16 load_y16(const void *src)
{
    if constexpr (kFromL2) {
        Vec16 v;
        asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(v.w[0]), "=r"(v.w[1]), "=r"(v.w[2]), "=r"(v.w[3])
                     : "l"(src));
        return v;
    } else {
        return *reinterpret_cast<const Vec16 *>(src);
    }
}

// A slot's kCols values of y for one thread, as loaded: y in the dtype packs two values in a
// word (kCols = 4: 8 bytes, kCols = 8: 16), fp32 y (kCols = 4 only) one. They are widened only
// where they are summed (slot_value), so the 16-bit ones hold half the registers while the
// slots' loads are in flight.
template <int kCols, bool kFromL2>
__device__ __forceinline__ void load_y_slot(u32 (&raw)[kCols], const u16 *yh, const float *yf, bool y16)
{
    if constexpr (kCols == 8) {
        const Vec16 h = load_y16<kFromL2>(yh);
#pragma unroll
        for (int q = 0; q < 4; ++q) raw[q] = h.w[q];
    } else if (y16) {
        const Vec8 h = load_y8<kFromL2>(yh);
        raw[0] = h.w[0];
        raw[1] = h.w[1];
    } else {
        const Vec16 f = load_y16<kFromL2>(yf);
#pragma unroll
        for (int q = 0; q < 4; ++q) raw[q] = f.w[q];
    }
}

template <Dtype D, int kCols>
__device__ __forceinline__ float slot_value(const u32 (&raw)[kCols], int q, bool y16)
{
    return y16 ? to_float<D>(static_cast<u16>(raw[q >> 1] >> ((q & 1) * 16))) : __uint_as_float(raw[q]);
}

// Block (t, chunk): the kCols·MJ_SIMT_FINALIZE_THREADS columns of chunk, kCols per thread.
// kCols = 4 everywhere but the tensor-core layers' large batches whose y is one copy in the
// dtype (MJ_TC_FINALIZE_WIDE, common/params.h), which take 8: one 16-byte load per slot
// instead of two 8-byte ones, half the blocks; at decode batches 4 columns are faster: fewer
// loads per thread, more threads in flight. The sums are the same in the same order either
// way: the same bits.
//
// finalize_cols is the sum for one thread's kCols columns from c (c < H) of token t, its slots'
// local ids and weights at ids[0..k) and weights[0..k) (the workspace's, or the persistent
// decode kernel's shared copy: the same values); kFromL2: y's loads skip L1 (load_y8).
template <Dtype D, int kMaxK, bool kYInDtype, int kCols = 4, bool kFromL2 = false, bool kB2 = false>
__device__ __forceinline__ void finalize_cols(const mj_layer_params &p, i64 t, int c, int H, int k, const int *ids,
                                              const float *weights)
{
    static_assert(kMaxK >= 1 && kMaxK <= MJ_SIMT_MAX_TOPK, "k must be in 1..32");
    static_assert(kCols == 4 || (kCols == 8 && kYInDtype), "8 columns per thread read y in the dtype only");
    // 8 columns: never a split GEMM2's partial sums (the launch's rule)
    const int splits = kCols == 4 && p.gemm2_splits > 1 ? p.gemm2_splits : 1;
    const bool y16 = kYInDtype && splits == 1; // else fp32 (simt, or a split GEMM2's partial sums)
    const float *y = reinterpret_cast<const float *>(p.ws_y) + t * k * H + c;
    const u16 *yh = reinterpret_cast<const u16 *>(p.ws_y) + t * k * H + c;
    const i64 split_stride = p.num_pairs * H;
    float acc[kCols];
#pragma unroll
    for (int q = 0; q < kCols; ++q) acc[q] = 0.0f;
    // Up to kBatch slots in flight at once, their id, weight and y loads issued together (one
    // L2 round trip, not an id round trip and then a y one: a slot of another rank's expert
    // loads a y row GEMM2 never wrote, and skips it below); the sums still go in slot order.
    constexpr int kBatch = kMaxK < 8 ? kMaxK : 8;
    for (int j0 = 0; j0 < k; j0 += kBatch) {
        u32 v[kBatch][kCols];
        int id[kBatch];
        float w[kBatch];
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
            const int j = j0 + b;
            if (j >= k) continue;
            id[b] = ids[j];
            w[b] = weights[j];
            load_y_slot<kCols, kFromL2>(v[b], yh + static_cast<i64>(j) * H, y + static_cast<i64>(j) * H, y16);
        }
        if constexpr (kCols == 4) {
            for (int s = 1; s < splits; ++s) // only a split decode GEMM2's
#pragma unroll
                for (int b = 0; b < kBatch; ++b) {
                    const int j = j0 + b;
                    if (j >= k) continue;
                    const Vec16 u = load_y16<kFromL2>(y + s * split_stride + static_cast<i64>(j) * H);
#pragma unroll
                    for (int q = 0; q < 4; ++q)
                        v[b][q] = __float_as_uint(__uint_as_float(v[b][q]) + __uint_as_float(u.w[q]));
                }
        }
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
            const int j = j0 + b;
            if (j >= k || id[b] < 0) continue; // another rank's expert (or none): adds nothing
#pragma unroll
            for (int q = 0; q < kCols; ++q) {
                float yv = slot_value<D, kCols>(v[b], q, y16);
                if (kYInDtype && splits > 1) { // as an unsplit GEMM2 stores it
                    if constexpr (kB2)
                        yv += to_float<D>(reinterpret_cast<const u16 *>(p.b2)[static_cast<i64>(id[b]) * H + c + q]);
                    yv = to_float<D>(from_float<D>(yv));
                }
                acc[q] = fmaf(w[b], yv, acc[q]);
            }
        }
    }
    u32 o[kCols / 2];
#pragma unroll
    for (int q = 0; q < kCols / 2; ++q) o[q] = pack2(from_float<D>(acc[2 * q]), from_float<D>(acc[2 * q + 1]));
    u16 *dst = reinterpret_cast<u16 *>(p.out) + t * H + c;
    if constexpr (kCols == 8) *reinterpret_cast<Vec16 *>(dst) = Vec16{{o[0], o[1], o[2], o[3]}};
    else *reinterpret_cast<Vec8 *>(dst) = Vec8{{o[0], o[1]}};
}

template <Dtype D, int kMaxK, bool kYInDtype, int kCols = 4, bool kB2 = false>
__device__ __forceinline__ void finalize_token(const mj_layer_params &p, i64 t, int chunk, int H, int k)
{
    const int c = chunk * (kCols * MJ_SIMT_FINALIZE_THREADS) + static_cast<int>(threadIdx.x) * kCols;
    if (c >= H) return; // H % 8 == 0: a thread's columns are all in or all out
    finalize_cols<D, kMaxK, kYInDtype, kCols, false, kB2>(p, t, c, H, k, reinterpret_cast<const int *>(p.ws_ids) + t * k,
                                              reinterpret_cast<const float *>(p.ws_weights) + t * k);
}

} // namespace mj
