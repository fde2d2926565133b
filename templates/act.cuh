// This file contains the activations of the contract (docs/SEMANTICS.md §2), one __device__
// function each, in fp32, plus the dispatch the GEMM1 epilogue calls.
//
// NOTES: no fast-math intrinsics anywhere (__expf, tanh.approx): SiTU multiplies tanh by up
// to 25, which turns tanh.approx's ~2^-11 error into visible error. σ(x) = 1/(1+expf(-x)),
// tanh(z) = 2σ(2z)−1 with expf where the contract asks for it, erff for exact GELU.
#pragma once

#include "common/types.cuh"

namespace mj {

// The integer ABI shared with the CUTLASS / TensorRT-LLM MoE kernels (5 is internal).
enum ActKind : int {
    kActGelu = 0, kActRelu = 1, kActSilu = 2, kActSwiglu = 3, kActGeglu = 4, kActRelu2 = 6,
    kActSwigluStep = 7, kActGegluTanh = 8, kActIdentity = 9, kActSitu = 10
};

// 1 for the kinds that consume the (up, gate) halves of fc1.
__host__ __device__ constexpr bool act_is_gated(int kind)
{
    return kind == kActSwiglu || kind == kActGeglu || kind == kActSwigluStep ||
           kind == kActGegluTanh || kind == kActSitu;
}

// How many parameters a kind has (core/activation.c's descriptors; simt_layer.cuh holds the
// generated kActNParams to it): the overrides the tensor-core layers apply.
__host__ __device__ constexpr int act_n_params(int kind)
{
    return kind == kActSwiglu || kind == kActSitu ? 3 : kind == kActSwigluStep ? 1 : 0;
}

__host__ __device__ constexpr bool act_is_known(int kind)
{
    return (kind >= kActGelu && kind <= kActGeglu) || (kind >= kActRelu2 && kind <= kActSitu);
}

// An activation's parameters in its descriptor order (core/activation.h): SwiGLU
// (alpha, beta, limit), SwiGLUStep (limit), SiTU (gate_scale, linear_scale, clamp_limit).
// present[i] == false means "none" (SiTU's optional fields). The generated source supplies
// the values as exact hex literals; per-expert overrides (act_param) replace v[i] per block
// (weight_layout.cuh, expert_act_params).
struct ActParams {
    float v[3];
    bool present[3];
};

// σ(x) = 1/(1+e^−x)
__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// tanh(z) = 2σ(2z) − 1 (the reference kernels' accurate fp32 tanh for SiTU)
__device__ __forceinline__ float tanh_via_sigmoid(float z) { return 2.0f * sigmoid(2.0f * z) - 1.0f; }

// clamp(x, lo, hi) = min(max(x, lo), hi)
__device__ __forceinline__ float clampf(float x, float lo, float hi) { return fminf(fmaxf(x, lo), hi); }

// GELU (0): 0.5·x·(1 + erf(x/√2))
__device__ __forceinline__ float act_gelu(float x)
{
    const float kRsqrt2 = 0x1.6a09e6p-1f; // 1/√2 rounded to fp32
    return 0.5f * x * (1.0f + erff(x * kRsqrt2));
}

// ReLU (1): max(x, 0)
__device__ __forceinline__ float act_relu(float x) { return fmaxf(x, 0.0f); }

// SiLU (2): x·σ(x)
__device__ __forceinline__ float act_silu(float x) { return x * sigmoid(x); }

// SwiGLU (3): g' = min(g, L); u' = clamp(u, −L, L); g'·σ(alpha·g')·(u' + beta)
__device__ __forceinline__ float act_swiglu(float u, float g, float alpha, float beta, float limit)
{
    const float gc = fminf(g, limit);
    const float uc = clampf(u, -limit, limit);
    return gc * sigmoid(alpha * gc) * (uc + beta);
}

// GeGLU (4): gelu_erf(g)·u
__device__ __forceinline__ float act_geglu(float u, float g) { return act_gelu(g) * u; }

// ReLU2 (6): relu(x)²
__device__ __forceinline__ float act_relu2(float x)
{
    const float r = act_relu(x);
    return r * r;
}

// SwiGLUStep (7): min(silu(g), L)·clamp(u, −L, L)   (the clamp comes AFTER the SiLU)
__device__ __forceinline__ float act_swiglu_step(float u, float g, float limit)
{
    return fminf(act_silu(g), limit) * clampf(u, -limit, limit);
}

// GeGLUTanh (8): 0.5·g·(1 + tanh(0.7978845608·(g + 0.044715·g³)))·u
__device__ __forceinline__ float act_geglu_tanh(float u, float g)
{
    const float kSqrt2OverPi = 0x1.988454p-1f; // 0.7978845608
    const float kCubic = 0x1.6e4e26p-5f;       // 0.044715
    const float inner = kSqrt2OverPi * (g + kCubic * g * g * g);
    return 0.5f * g * (1.0f + tanhf(inner)) * u;
}

// Identity (9): x
__device__ __forceinline__ float act_identity(float x) { return x; }

// SiTU (10): [clamp c: u = clamp(u,−c,c), g = min(g,c)]; lin = u or ls·tanh(u/ls);
//            lin · gs·tanh(g/gs) · σ(g)   (σ of the un-squashed g)
__device__ __forceinline__ float act_situ(float u, float g, float gate_scale, bool has_linear,
                                          float linear_scale, bool has_clamp, float clamp_limit)
{
    if (has_clamp) {
        u = clampf(u, -clamp_limit, clamp_limit);
        g = fminf(g, clamp_limit);
    }
    const float lin = has_linear ? linear_scale * tanh_via_sigmoid(u / linear_scale) : u;
    return lin * (gate_scale * tanh_via_sigmoid(g / gate_scale)) * sigmoid(g);
}

// ---- dispatch (kKind is a compile-time constant: one branch survives) ---------------------

// Gated: u is the FIRST half of fc1 (W1 rows 0..I−1), g the SECOND (rows I..2I−1).
template <int kKind>
__device__ __forceinline__ float apply_gated_act(float u, float g, const ActParams &p)
{
    static_assert(act_is_gated(kKind), "apply_gated_act needs a gated activation kind");
    if constexpr (kKind == kActSwiglu) return act_swiglu(u, g, p.v[0], p.v[1], p.v[2]);
    else if constexpr (kKind == kActGeglu) return act_geglu(u, g);
    else if constexpr (kKind == kActSwigluStep) return act_swiglu_step(u, g, p.v[0]);
    else if constexpr (kKind == kActGegluTanh) return act_geglu_tanh(u, g);
    else return act_situ(u, g, p.v[0], p.present[1], p.v[1], p.present[2], p.v[2]);
}

template <int kKind>
__device__ __forceinline__ float apply_act(float x, const ActParams &p)
{
    static_assert(act_is_known(kKind) && !act_is_gated(kKind),
                  "apply_act needs an ungated activation kind of the contract");
    (void)p;
    if constexpr (kKind == kActGelu) return act_gelu(x);
    else if constexpr (kKind == kActRelu) return act_relu(x);
    else if constexpr (kKind == kActSilu) return act_silu(x);
    else if constexpr (kKind == kActRelu2) return act_relu2(x);
    else return act_identity(x);
}

} // namespace mj
