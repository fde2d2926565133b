// This file contains the routing stage: one warp per token chooses its k experts and their
// weights, maps them to this rank's local ids and counts rows per local expert.
//
//   softmax_topk : p = softmax over all E logits; the k largest; weights p (not renormalised)
//   renormalize  : the k largest raw logits; weights = softmax over those k
//   precomputed  : ids [T, k] (int32, global) and weights [T, k] (fp32) given by the caller
//
// Selection is k rounds of a warp argmax; ties go to the lower expert id, and a NaN logit
// ranks as −inf (so the order is total and every lane agrees on the winner). Selection by
// logit equals selection by probability (softmax is monotone) without the ties that fp32
// rounding of the probabilities would add.
//
// Expert parallelism: global id g is local id g − expert_offset when that is in
// [0, E_local); any other id (another rank's expert, or a precomputed id outside [0, E))
// becomes −1 and contributes nothing. Counts use integer atomics, so they are exact.
#pragma once

#include "common/params.h"
#include "common/types.cuh"

namespace mj {

constexpr int kWarp = 32;
constexpr int kRouteWarpsPerBlock = MJ_SIMT_ROUTE_THREADS / kWarp;
constexpr int kMaxExpertsPerLane = (MJ_SIMT_MAX_EXPERTS + kWarp - 1) / kWarp;

static_assert(MJ_SIMT_ROUTE_THREADS % kWarp == 0, "the route block is a whole number of warps");
static_assert(MJ_SIMT_MAX_TOPK <= kWarp, "lane j holds slot j, so k may not exceed a warp");
static_assert(kMaxExpertsPerLane * kWarp >= MJ_SIMT_MAX_EXPERTS,
              "every expert must have a register slot in some lane");
static_assert(kMaxExpertsPerLane <= 32, "a lane's taken-mask is one 32-bit word");

constexpr unsigned kFullMask = 0xffffffffu;

template <Dtype D>
__device__ __forceinline__ float load_logit(const void *base, i64 index)
{
    if constexpr (D == Dtype::fp32) return static_cast<const float *>(base)[index];
    else return to_float<D>(static_cast<const u16 *>(base)[index]);
}

// (key, id) with the larger key winning and ties going to the lower id; id < 0 = no candidate.
__device__ __forceinline__ bool beats(float key, int id, float best_key, int best_id)
{
    if (id < 0) return false;
    if (best_id < 0) return true;
    return key > best_key || (key == best_key && id < best_id);
}

// One routed token, as the route stage leaves it in lane j < k: slot j's global id and weight.
struct RoutedSlot {
    int id;
    float weight;
};

// Top-k over the logits of one token; lane j < k returns slot j (global id, raw logit in
// weight). kMaxE bounds the register array (a pinned E shrinks it).
template <Dtype kLogits, int kMaxE>
__device__ __forceinline__ RoutedSlot select_topk(const void *logits, i64 row, int E, int k,
                                                  int lane, float *row_max, float *row_sum,
                                                  bool want_softmax)
{
    constexpr int kPerLane = (kMaxE + kWarp - 1) / kWarp;
    float v[kPerLane];
    float local_max = neg_inf();
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
        const int e = lane + i * kWarp;
        v[i] = e < E ? load_logit<kLogits>(logits, row + e) : neg_inf();
        if (e < E) local_max = fmaxf(local_max, v[i]);
    }
    if (want_softmax) {
        // max and Σ exp over all E: butterfly reductions give every lane the same bits
        // (each step combines the same two operands), and the order is fixed.
        float m = local_max;
        for (int off = kWarp / 2; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(kFullMask, m, off));
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < kPerLane; ++i)
            if (lane + i * kWarp < E) s += expf(v[i] - m);
        for (int off = kWarp / 2; off > 0; off >>= 1) s += __shfl_xor_sync(kFullMask, s, off);
        *row_max = m;
        *row_sum = s;
    }

    RoutedSlot mine = {-1, 0.0f};
    u32 taken = 0u;
    for (int j = 0; j < k; ++j) {
        float best_key = 0.0f, best_raw = 0.0f;
        int best_id = -1;
#pragma unroll
        for (int i = 0; i < kPerLane; ++i) {
            const int e = lane + i * kWarp;
            const float key = v[i] != v[i] ? neg_inf() : v[i];
            if (e < E && !((taken >> i) & 1u) && beats(key, e, best_key, best_id)) {
                best_key = key;
                best_raw = v[i];
                best_id = e;
            }
        }
        for (int off = kWarp / 2; off > 0; off >>= 1) {
            const float ok = __shfl_xor_sync(kFullMask, best_key, off);
            const float oraw = __shfl_xor_sync(kFullMask, best_raw, off);
            const int oid = __shfl_xor_sync(kFullMask, best_id, off);
            if (beats(ok, oid, best_key, best_id)) {
                best_key = ok;
                best_raw = oraw;
                best_id = oid;
            }
        }
        // k <= E guarantees a winner; the owner lane marks it taken.
        if (best_id >= 0 && (best_id % kWarp) == lane) taken |= 1u << (best_id / kWarp);
        if (lane == j) {
            mine.id = best_id;
            mine.weight = best_raw;
        }
    }
    return mine;
}

// The route stage for token t, run by one whole warp (t is warp-uniform).
template <Routing kRouting, Dtype kLogits, int kMaxE>
__device__ __forceinline__ void route_token(const mj_layer_params &p, i64 t, int E, int k, int lane)
{
    static_assert(kRouting == Routing::softmax_topk || kRouting == Routing::renormalize ||
                      kRouting == Routing::precomputed,
                  "the simt route stage implements softmax_topk, renormalize and precomputed");
    static_assert(kLogits == Dtype::fp32 || kLogits == Dtype::bf16 || kLogits == Dtype::fp16,
                  "router logits are fp32, bf16 or fp16");
    static_assert(kMaxE >= 1 && kMaxE <= MJ_SIMT_MAX_EXPERTS, "E must be in 1..512");

    RoutedSlot s = {-1, 0.0f};
    if constexpr (kRouting == Routing::precomputed) {
        if (lane < k) {
            const i64 at = t * k + lane;
            s.id = reinterpret_cast<const int *>(p.topk_ids)[at];
            s.weight = reinterpret_cast<const float *>(p.topk_weights)[at];
            if (s.id < 0 || s.id >= E) s.id = -1; // an invalid id routes nowhere
        }
    } else {
        float row_max = 0.0f, row_sum = 1.0f;
        constexpr bool kSoftmax = kRouting == Routing::softmax_topk;
        s = select_topk<kLogits, kMaxE>(reinterpret_cast<const void *>(p.router_logits), t * E, E,
                                        k, lane, &row_max, &row_sum, kSoftmax);
        if constexpr (kSoftmax) {
            if (lane < k) s.weight = expf(s.weight - row_max) / row_sum;
        } else {
            // softmax over the k selected logits; slot 0 holds the largest
            const float top = __shfl_sync(kFullMask, s.weight, 0);
            float e = lane < k ? expf(s.weight - top) : 0.0f;
            float sum = e;
            for (int off = kWarp / 2; off > 0; off >>= 1) sum += __shfl_xor_sync(kFullMask, sum, off);
            s.weight = e / sum;
        }
    }

    if (lane < k) {
        const int local = s.id - p.expert_offset;
        const bool mine = s.id >= 0 && local >= 0 && local < p.num_local_experts;
        const i64 at = t * k + lane;
        reinterpret_cast<int *>(p.ws_ids)[at] = mine ? local : -1;
        reinterpret_cast<float *>(p.ws_weights)[at] = s.weight;
        if (mine) atomicAdd(reinterpret_cast<int *>(p.ws_counts) + local, 1);
    }
}

} // namespace mj
