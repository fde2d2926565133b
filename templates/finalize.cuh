// This file contains the finalize stage: out[t, h] = Σ_j w[t, j] · y[t, j, h] over the slots
// j = 0..k−1 routed to this rank, in that FIXED order, accumulated in fp32 and rounded once
// to the dtype. A token with no local expert gets +0. Every element of out is written.
//
// Grid: blockIdx.x = token, blockIdx.y = a chunk of MJ_SIMT_FINALIZE_COLS columns; a thread
// owns 4 adjacent columns of one chunk. Why chunks and not a block looping over the row: at
// decode (T = 1..16) a block per token left one SM issuing H / 512 dependent rounds of k
// loads from L2 (~0.5 µs each: DeepSeek-V3, H = 7168, k = 8, was ~50 µs of a 215 µs layer);
// now every thread issues its k loads back to back (slots in groups of kBatch, each slot's id
// and weight loaded with its y row) and the whole stage is one round. The sum's order, hence
// every bit of out, is unchanged.
//
// How y holds a slot's value (kYInDtype): simt's GEMM2 stores it in fp32; the tensor-core
// backends' GEMM2s round it once to the layer's dtype (moe-semantics.md §5's "bf16 storage of
// y"; the replay's MJ_REF_ROUND_Y), which halves y's round trip through memory, the largest
// traffic of a prefill layer after the weights (Qwen3-30B-A3B, B = 4096: 0.27 GB written and
// read back in fp32, 9 % of the layer in finalize alone). A split decode GEMM2
// (p.gemm2_splits = S > 1, tensor-core small path only) writes S fp32 partial sums per pair
// instead; a slot's value is their sum in split order, rounded here to the dtype as the
// unsplit GEMM2s round it, then weighted as above.
#pragma once

#include "common/params.h"
#include "common/types.cuh"

namespace mj {

template <Dtype D, int kMaxK, bool kYInDtype>
__device__ __forceinline__ void finalize_token(const mj_layer_params &p, i64 t, int chunk, int H, int k)
{
    static_assert(kMaxK >= 1 && kMaxK <= MJ_SIMT_MAX_TOPK, "k must be in 1..32");
    const int c = chunk * MJ_SIMT_FINALIZE_COLS + static_cast<int>(threadIdx.x) * 4;
    if (c >= H) return; // H % 8 == 0: a thread's 4 columns are all in or all out
    const int *ids = reinterpret_cast<const int *>(p.ws_ids) + t * k;
    const float *weights = reinterpret_cast<const float *>(p.ws_weights) + t * k;
    const int splits = p.gemm2_splits > 1 ? p.gemm2_splits : 1;
    const bool y16 = kYInDtype && splits == 1; // else fp32 (simt, or a split GEMM2's partial sums)
    const float *y = reinterpret_cast<const float *>(p.ws_y) + t * k * H + c;
    const u16 *yh = reinterpret_cast<const u16 *>(p.ws_y) + t * k * H + c;
    const i64 split_stride = p.num_pairs * H;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    // Up to kBatch slots in flight at once, their id, weight and y loads issued together (one
    // L2 round trip, not an id round trip and then a y one: a slot of another rank's expert
    // loads a y row GEMM2 never wrote, and skips it below); the sums still go in slot order.
    constexpr int kBatch = kMaxK < 8 ? kMaxK : 8;
    for (int j0 = 0; j0 < k; j0 += kBatch) {
        Float4 v[kBatch];
        int id[kBatch];
        float w[kBatch];
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
            const int j = j0 + b;
            if (j >= k) continue;
            id[b] = ids[j];
            w[b] = weights[j];
            if (y16) {
                const Vec8 h = *reinterpret_cast<const Vec8 *>(yh + static_cast<i64>(j) * H);
#pragma unroll
                for (int q = 0; q < 4; ++q) v[b].v[q] = to_float<D>(static_cast<u16>(h.w[q >> 1] >> ((q & 1) * 16)));
            } else {
                v[b] = *reinterpret_cast<const Float4 *>(y + static_cast<i64>(j) * H);
            }
        }
        for (int s = 1; s < splits; ++s) // only a split decode GEMM2's
#pragma unroll
            for (int b = 0; b < kBatch; ++b) {
                const int j = j0 + b;
                if (j >= k) continue;
                const Float4 u = *reinterpret_cast<const Float4 *>(y + s * split_stride + static_cast<i64>(j) * H);
#pragma unroll
                for (int q = 0; q < 4; ++q) v[b].v[q] += u.v[q];
            }
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
            const int j = j0 + b;
            if (j >= k || id[b] < 0) continue; // another rank's expert (or none): adds nothing
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                float yv = v[b].v[q];
                if (kYInDtype && splits > 1) yv = to_float<D>(from_float<D>(yv)); // as an unsplit GEMM2 stores it
                acc[q] = fmaf(w[b], yv, acc[q]);
            }
        }
    }
    Vec8 o;
    o.w[0] = pack2(from_float<D>(acc[0]), from_float<D>(acc[1]));
    o.w[1] = pack2(from_float<D>(acc[2]), from_float<D>(acc[3]));
    *reinterpret_cast<Vec8 *>(reinterpret_cast<u16 *>(p.out) + t * H + c) = o;
}

// The tensor-core layers' finalize of a large batch whose y is one copy in the dtype
// (MJ_TC_FINALIZE_WIDE, common/params.h): the same sums in the same order as finalize_token
// (so the same bits), but a thread owns 8 adjacent columns, one 16-byte load per slot instead
// of two 8-byte ones, and a block MJ_TC_FINALIZE_COLS columns. ncu on the H200 (wgmma, B =
// 4096 unless said): Qwen3-30B-A3B B = 16384 170.7 -> 152.0 µs, DeepSeek-V3 151.5 -> 133.3,
// Qwen3-235B-A22B 86.7 -> 77.7, Mixtral-8x7B 42.0 -> 29.1; two tokens per block, tried too,
// were slower at k = 8 (more registers, fewer blocks) and a little faster at Mixtral's k = 2.
// At decode batches the narrow blocks win (B = 64: 3.6-4.1 µs against 4.1-4.3): fewer loads
// per thread, more threads in flight.
template <Dtype D, int kMaxK>
__device__ __forceinline__ void finalize_token_wide(const mj_layer_params &p, i64 t, int chunk, int H, int k)
{
    static_assert(kMaxK >= 1 && kMaxK <= MJ_SIMT_MAX_TOPK, "k must be in 1..32");
    const int c = chunk * MJ_TC_FINALIZE_COLS + static_cast<int>(threadIdx.x) * 8;
    if (c >= H) return; // H % 8 == 0: a thread's 8 columns are all in or all out
    const int *ids = reinterpret_cast<const int *>(p.ws_ids) + t * k;
    const float *weights = reinterpret_cast<const float *>(p.ws_weights) + t * k;
    const u16 *yh = reinterpret_cast<const u16 *>(p.ws_y) + t * k * H + c;
    float acc[8];
#pragma unroll
    for (int q = 0; q < 8; ++q) acc[q] = 0.0f;
    constexpr int kBatch = kMaxK < 8 ? kMaxK : 8;
    for (int j0 = 0; j0 < k; j0 += kBatch) {
        Vec16 v[kBatch];
        int id[kBatch];
        float w[kBatch];
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
            const int j = j0 + b;
            if (j >= k) continue;
            id[b] = ids[j];
            w[b] = weights[j];
            v[b] = *reinterpret_cast<const Vec16 *>(yh + static_cast<i64>(j) * H);
        }
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
            const int j = j0 + b;
            if (j >= k || id[b] < 0) continue; // another rank's expert (or none): adds nothing
#pragma unroll
            for (int q = 0; q < 8; ++q)
                acc[q] = fmaf(w[b], to_float<D>(static_cast<u16>(v[b].w[q >> 1] >> ((q & 1) * 16))), acc[q]);
        }
    }
    Vec16 o;
#pragma unroll
    for (int q = 0; q < 4; ++q) o.w[q] = pack2(from_float<D>(acc[2 * q]), from_float<D>(acc[2 * q + 1]));
    *reinterpret_cast<Vec16 *>(reinterpret_cast<u16 *>(p.out) + t * H + c) = o;
}

} // namespace mj
