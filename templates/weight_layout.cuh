// This file contains what every backend's GEMM epilogues read besides the accumulators: which
// physical W1 row holds each half of a gated activation (the spec's w1_layout), the biases b1
// and b2, and an expert's activation parameters with the per-expert overrides applied — and,
// for the tensor-core GEMMs, those options as one type (LayerExtras) so that a kernel that has
// none of them is the same code as before they existed.
#pragma once

#include "act.cuh"
#include "common/params.h"
#include "common/types.cuh"

namespace mj {

// The physical W1 row holding half h (0: up u, 1: gate g) of intermediate column j.
//   up_gate      [up; gate]   u_j = row j,      g_j = row I + j   (the contract's canonical)
//   gate_up      [gate; up]   u_j = row I + j,  g_j = row j
//   interleaved  gpt-oss      u_j = row 2j + 1, g_j = row 2j
// An ungated activation has one half of I rows: row j whatever the layout.
template <W1Layout kLayout, bool kGated>
__device__ __forceinline__ i64 w1_row(int h, i64 j, i64 I)
{
    if constexpr (!kGated) return j;
    else if constexpr (kLayout == W1Layout::up_gate) return h == 0 ? j : I + j;
    else if constexpr (kLayout == W1Layout::gate_up) return h == 0 ? I + j : j;
    else return h == 0 ? 2 * j + 1 : 2 * j;
}

// The activation parameters of local expert e: the spec's values, each replaced by
// act_param[i][e] where the caller gave that override array (which also makes an optional
// SiTU parameter present). Only parameters the activation has can be overridden (launch.c).
template <int kNParams>
__device__ __forceinline__ ActParams expert_act_params(const mj_layer_params &p, ActParams a, int e)
{
#pragma unroll
    for (int i = 0; i < kNParams; ++i) {
        if (p.act_param[i] != 0ull) {
            a.v[i] = reinterpret_cast<const float *>(p.act_param[i])[e];
            a.present[i] = true;
        }
    }
    return a;
}

// Runs epilogue(act) with the spec's parameters, constants the activation folds (a default
// SwiGLU's clamps vanish), in a layer without overrides (kOverrides false: the epilogue is
// exactly what it was before overrides existed), and in a layer with them with expert e's
// (each replaced where the forward gives its array: run-time values, one epilogue).
template <int kAct, bool kOverrides, class Epilogue>
__device__ __forceinline__ void with_expert_act(const mj_layer_params &p, const ActParams &spec_act, int e,
                                                Epilogue &&epilogue)
{
    constexpr int kN = act_n_params(kAct);
    if constexpr (kN == 0 || !kOverrides) epilogue(spec_act);
    else epilogue(expert_act_params<kN>(p, spec_act, e));
}

// The tensor-core epilogues' options: W1's layout, whether b1 and b2 are given, whether the
// forward may override the activation's parameters per expert. PlainLayer (up_gate, none of
// them) is what the generated source implies when it names none of them.
template <W1Layout kLayout_, bool kB1_, bool kB2_, bool kOverrides_ = false>
struct LayerExtras {
    static constexpr W1Layout kLayout = kLayout_;
    static constexpr bool kB1 = kB1_, kB2 = kB2_, kOverrides = kOverrides_;
};
using PlainLayer = LayerExtras<W1Layout::up_gate, false, false, false>;

// b1 of W1 row `row` of local expert e in fp32 (b1: [E_local, rows1] in the dtype).
template <Dtype D>
__device__ __forceinline__ float b1_at(const mj_layer_params &p, int e, i64 rows1, i64 row)
{
    return to_float<D>(reinterpret_cast<const u16 *>(p.b1)[static_cast<i64>(e) * rows1 + row]);
}

// b2 of output column h of local expert e in fp32 (b2: [E_local, H] in the dtype).
template <Dtype D>
__device__ __forceinline__ float b2_at(const mj_layer_params &p, int e, int H, int h)
{
    return to_float<D>(reinterpret_cast<const u16 *>(p.b2)[static_cast<i64>(e) * H + h]);
}

// The intermediate value of column j of expert e from its fc1 accumulators (gated: u and g;
// ungated: u): + b1 of the rows they came from where the layer has b1 (only then: x + 0.0f
// would turn a −0 into +0), then the activation.
template <Dtype D, int kAct, class X>
__device__ __forceinline__ float fc1_act(const mj_layer_params &p, const ActParams &act, int e, int I, i64 j,
                                         float u, float g)
{
    constexpr bool kGated = act_is_gated(kAct);
    if constexpr (X::kB1) {
        const i64 rows1 = kGated ? 2 * static_cast<i64>(I) : static_cast<i64>(I);
        u += b1_at<D>(p, e, rows1, w1_row<X::kLayout, kGated>(0, j, I));
        if constexpr (kGated) g += b1_at<D>(p, e, rows1, w1_row<X::kLayout, kGated>(1, j, I));
    }
    if constexpr (kGated) return apply_gated_act<kAct>(u, g, act);
    else return apply_act<kAct>(u, act);
}

// y's value before its rounding: the accumulator, + b2 where the layer has it.
template <Dtype D, class X>
__device__ __forceinline__ float y_value(const mj_layer_params &p, int e, int H, int h, float acc)
{
    if constexpr (X::kB2) return acc + b2_at<D>(p, e, H, h);
    else return acc;
}

} // namespace mj
