// This file contains the routing stage: one warp per token chooses its k experts and their
// weights, maps them to this rank's local ids and counts rows per local expert.
//
//   softmax_topk   : p = softmax over all E logits; the k largest; weights p (not renormalised)
//   renormalize    : the k largest raw logits; weights = softmax over those k
//   sigmoid_topk   : the k largest logits; weights σ(logit)
//   sigmoid_renorm : the k largest logits; weights σ / (Σ_k σ + 1e-20)
//   deepseek_v3    : score = σ(logit) + routing_bias[e] (selection only); groups of E/n_group
//                    consecutive experts ranked by the sum of their top-2 scores (the top
//                    score alone for a group of one); the best topk_group groups are kept,
//                    the others' scores masked to −inf; the k best scores; weights = σ(logit)
//                    of the k, divided by their sum, × routed_scaling
//   llama4         : top-1 (k = 1); weight σ(logit)
//   precomputed    : ids [T, k] (int32, global) and weights [T, k] (fp32) given by the caller
//
// Selection is rounds of a warp argmax; ties go to the lower id (expert, or group), and a NaN
// key ranks as −inf (so the order is total and every lane agrees on the winner). Selection by
// logit equals selection by probability (softmax and σ are monotone) without the ties that
// fp32 rounding of the probabilities would add. Sums over the k slots are butterfly
// reductions: symmetric, so every lane gets the same bits, and the order is fixed.
//
// Expert parallelism: global id g is local id g − expert_offset when that is in
// [0, E_local); any other id (another rank's expert, or a precomputed id outside [0, E))
// becomes −1 and contributes nothing. Counts use integer atomics, so they are exact.
#pragma once

#include "act.cuh"
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

// One routed token, as the route stage leaves it in lane j < k: slot j's global id and weight.
struct RoutedSlot {
    int id;
    float weight;
};

// Parameters of deepseek_v3 routing (compile-time constants of the spec, folded).
struct GroupRouting {
    int n_group;
    int topk_group;
    float routed_scaling;
};

// A float key as an unsigned integer of the same order: for keys a, b (NaN already made
// −inf), a > b ⟺ ordered_key(a) > ordered_key(b) and a == b ⟺ equal integers (−0 is made +0
// first, as the float comparison ties them). Every result is >= ordered_key(−inf) > 0, so 0
// can stand for "no candidate".
__device__ __forceinline__ u32 ordered_key(float key)
{
    if (key != key) key = neg_inf();
    if (key == 0.0f) key = 0.0f; // −0 → +0
    const u32 b = __float_as_uint(key);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// `rounds` rounds of a warp argmax over the items id = lane + 32·i < n with keys key[i]
// (NaN ranks as −inf; ties go to the lower id). Lane j < rounds returns round j's winner (its
// id, and its payload[i] in weight); *taken receives, in each item's owner lane, bit i set
// for the items chosen. rounds <= n.
//
// A round: each lane scans its own items (a strict > keeps its lowest id among equal keys),
// then two redux.sync (sm_80) pick the largest key and, among the lanes holding it, the
// lowest id — the same winner as a butterfly of (key, id) comparisons, in 2 integer
// reductions instead of 5 steps of 3 shuffles each: the decode routing kernel runs k rounds
// back to back per token, so a round's latency is on the decode path.
template <int kPerLane>
__device__ __forceinline__ RoutedSlot warp_select(const float (&key)[kPerLane], const float (&payload)[kPerLane],
                                                  int n, int rounds, int lane, u32 *taken_out)
{
    static_assert(kPerLane >= 1 && kPerLane <= 32, "a lane's taken-mask is one 32-bit word");
    RoutedSlot mine = {-1, 0.0f};
    u32 taken = 0u;
    // Items per lane that exist: the arrays are sized for the largest E the kernel allows
    // (512 unless the spec pins num_experts), and each round's scan is a dependent chain,
    // so stopping at the real count (warp-uniform) makes a round 4x shorter at E = 128.
    const int per_lane = (n + kWarp - 1) / kWarp;
    u32 okey[kPerLane];
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) okey[i] = ordered_key(key[i]);
    for (int j = 0; j < rounds; ++j) {
        u32 best = 0u; // no candidate
        int best_id = 0x7fffffff;
        float best_pay = 0.0f;
#pragma unroll
        for (int i = 0; i < kPerLane; ++i) {
            if (i >= per_lane) break;
            const int id = lane + i * kWarp;
            if (id < n && !((taken >> i) & 1u) && okey[i] > best) {
                best = okey[i];
                best_pay = payload[i];
                best_id = id;
            }
        }
        const u32 top = __reduce_max_sync(kFullMask, best); // > 0: rounds <= n leaves a candidate
        const int win = static_cast<int>(__reduce_min_sync(kFullMask, best == top ? static_cast<u32>(best_id) : 0xffffffffu));
        const float pay = __shfl_sync(kFullMask, best_pay, win % kWarp);
        if (win % kWarp == lane) taken |= 1u << (win / kWarp); // its owner marks it taken
        if (lane == j) {
            mine.id = win;
            mine.weight = pay;
        }
    }
    *taken_out = taken;
    return mine;
}

// Σ over the warp of v (lanes past k pass 0); every lane gets the same bits.
__device__ __forceinline__ float warp_sum(float v)
{
    for (int off = kWarp / 2; off > 0; off >>= 1) v += __shfl_xor_sync(kFullMask, v, off);
    return v;
}

// deepseek_v3: masks key[] (the biased scores of this lane's experts) to −inf outside the
// best topk_group groups. grp[i] is the group of item i (−1 past E).
template <int kPerLane>
__device__ __forceinline__ void mask_groups(float (&key)[kPerLane], const int (&grp)[kPerLane], int gsize,
                                            const GroupRouting &gr, int lane)
{
    float gkey[kPerLane]; // group g = lane + 32·j; n_group <= E, so kPerLane slots suffice
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) gkey[j] = neg_inf();
    for (int g = 0; g < gr.n_group; ++g) { // warp-uniform
        // this lane's top-2 of group g, then a butterfly merge of (top, second) pairs
        float b1 = neg_inf(), b2 = neg_inf();
#pragma unroll
        for (int i = 0; i < kPerLane; ++i) {
            if (grp[i] != g) continue;
            const float x = key[i] != key[i] ? neg_inf() : key[i];
            if (x > b1) {
                b2 = b1;
                b1 = x;
            } else if (x > b2) {
                b2 = x;
            }
        }
        for (int off = kWarp / 2; off > 0; off >>= 1) {
            const float o1 = __shfl_xor_sync(kFullMask, b1, off);
            const float o2 = __shfl_xor_sync(kFullMask, b2, off);
            const float n2 = fmaxf(fminf(b1, o1), fmaxf(b2, o2));
            b1 = fmaxf(b1, o1);
            b2 = n2;
        }
        const float score = gsize >= 2 ? b1 + b2 : b1;
#pragma unroll
        for (int j = 0; j < kPerLane; ++j)
            if (lane + j * kWarp == g) gkey[j] = score;
    }
    u32 kept = 0u;
    (void)warp_select<kPerLane>(gkey, gkey, gr.n_group, gr.topk_group, lane, &kept);
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
        const int g = grp[i] < 0 ? 0 : grp[i];
        const u32 owner_kept = __shfl_sync(kFullMask, kept, g % kWarp); // every lane shuffles
        if (grp[i] < 0 || !((owner_kept >> (g / kWarp)) & 1u)) key[i] = neg_inf();
    }
}

// The route stage for token t, run by one whole warp (t is warp-uniform). gr matters for
// deepseek_v3 only (a layer without it may leave the default). Rows are counted in counts
// (ws_counts, or a shared-memory array of the caller's; nullptr: not counted); local_ids, if
// given, receives each slot's local id (or −1) as ws_ids does; publish = false leaves ws_ids
// and ws_weights unwritten (the decode GEMM1 blocks that route for themselves: only one of
// them publishes, decode_route.cuh); local_weights, if given, receives the slots' weights as
// ws_weights does (the persistent decode kernel's blocks keep both in shared memory).
template <Routing kRouting, Dtype kLogits, int kMaxE>
__device__ __forceinline__ void route_token(const mj_layer_params &p, i64 t, int E, int k, int lane,
                                            const GroupRouting &gr, int *counts, int *local_ids = nullptr,
                                            bool publish = true, float *local_weights = nullptr)
{
    static_assert(kLogits == Dtype::fp32 || kLogits == Dtype::bf16 || kLogits == Dtype::fp16,
                  "router logits are fp32, bf16 or fp16");
    static_assert(kMaxE >= 1 && kMaxE <= MJ_SIMT_MAX_EXPERTS, "E must be in 1..512");
    constexpr int kPerLane = (kMaxE + kWarp - 1) / kWarp;

    RoutedSlot s = {-1, 0.0f};
    if constexpr (kRouting == Routing::precomputed) {
        if (lane < k) {
            const i64 at = t * k + lane;
            s.id = reinterpret_cast<const int *>(p.topk_ids)[at];
            s.weight = reinterpret_cast<const float *>(p.topk_weights)[at];
            if (s.id < 0 || s.id >= E) s.id = -1; // an invalid id routes nowhere
        }
    } else {
        const void *logits = reinterpret_cast<const void *>(p.router_logits);
        float v[kPerLane];
        float local_max = neg_inf();
#pragma unroll
        for (int i = 0; i < kPerLane; ++i) {
            const int e = lane + i * kWarp;
            v[i] = e < E ? load_logit<kLogits>(logits, t * E + e) : neg_inf();
            if (e < E) local_max = fmaxf(local_max, v[i]);
        }
        u32 taken = 0u;
        if constexpr (kRouting == Routing::softmax_topk) {
            // max and Σ exp over all E: butterfly reductions give every lane the same bits
            float m = local_max;
            for (int off = kWarp / 2; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(kFullMask, m, off));
            float sum = 0.0f;
#pragma unroll
            for (int i = 0; i < kPerLane; ++i)
                if (lane + i * kWarp < E) sum += expf(v[i] - m);
            sum = warp_sum(sum);
            s = warp_select<kPerLane>(v, v, E, k, lane, &taken);
            if (lane < k) s.weight = expf(s.weight - m) / sum;
        } else if constexpr (kRouting == Routing::renormalize) {
            s = warp_select<kPerLane>(v, v, E, k, lane, &taken);
            // softmax over the k selected logits; slot 0 holds the largest
            const float top = __shfl_sync(kFullMask, s.weight, 0);
            const float e = lane < k ? expf(s.weight - top) : 0.0f;
            s.weight = e / warp_sum(e);
        } else if constexpr (kRouting == Routing::sigmoid_topk || kRouting == Routing::llama4) {
            s = warp_select<kPerLane>(v, v, E, k, lane, &taken); // llama4: k == 1 (launch.c)
            if (lane < k) s.weight = sigmoid(s.weight);
        } else if constexpr (kRouting == Routing::sigmoid_renorm) {
            s = warp_select<kPerLane>(v, v, E, k, lane, &taken);
            const float w = lane < k ? sigmoid(s.weight) : 0.0f;
            s.weight = w / (warp_sum(w) + 1e-20f);
        } else {
            static_assert(kRouting == Routing::deepseek_v3, "a routing method of the contract");
            const float *bias = reinterpret_cast<const float *>(p.routing_bias); // may be null: 0
            const int gsize = E / gr.n_group; // launch.c: n_group divides E
            float sig[kPerLane], key[kPerLane];
            int grp[kPerLane];
#pragma unroll
            for (int i = 0; i < kPerLane; ++i) {
                const int e = lane + i * kWarp;
                sig[i] = e < E ? sigmoid(v[i]) : 0.0f;
                key[i] = e < E ? sig[i] + (bias ? bias[e] : 0.0f) : neg_inf();
                grp[i] = e < E ? e / gsize : -1;
            }
            if (gr.topk_group < gr.n_group) mask_groups<kPerLane>(key, grp, gsize, gr, lane);
            s = warp_select<kPerLane>(key, sig, E, k, lane, &taken);
            const float w = lane < k ? s.weight : 0.0f;
            s.weight = w / warp_sum(w) * gr.routed_scaling;
        }
    }

    if (lane < k) {
        const int local = s.id - p.expert_offset;
        const bool mine = s.id >= 0 && local >= 0 && local < p.num_local_experts;
        const i64 at = t * k + lane;
        if (publish) {
            reinterpret_cast<int *>(p.ws_ids)[at] = mine ? local : -1;
            reinterpret_cast<float *>(p.ws_weights)[at] = s.weight;
        }
        if (local_ids) local_ids[at] = mine ? local : -1;
        if (local_weights) local_weights[at] = s.weight;
        if (mine && counts) atomicAdd(counts + local, 1);
    }
}

} // namespace mj
