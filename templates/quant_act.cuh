// This file contains the fp8 activation quantization of the fp8 layers: x before GEMM1 and
// the intermediate (as stored, in the layer dtype) before GEMM2 become e4m3 with fp32
// dequant scales, q = RNE(v / scale) saturated to ±448, scale = amax / 448 over
//
//   tensor  the whole tensor: x [T, H], or the intermediate rows routed to this rank (two
//           kernels: a grid-stride amax with one integer atomicMax per warp, then the
//           quantization); the scale is stored once, at scale[0]
//   token   one row (a token of x; a (token, slot) row of the intermediate): scale[row]
//   block   each 128 consecutive elements of a row (fp8_block): scale[row, k / 128]
//
// NOTES: |v| is a non-negative float, whose bits order like unsigned integers, so the amax
// is an integer max over bit patterns: exact and independent of the order of the atomics;
// a NaN (bits above +inf) wins, so a NaN anywhere makes the scale NaN and propagates. An
// all-zero group has scale 0 and quantizes to 0 (not 0/0). The division is IEEE (no fast
// math), so the quantized bits are the same on every run and every arch.
#pragma once

#include "common/minifloat.cuh"
#include "common/params.h"
#include "common/types.cuh"

namespace mj {

enum class ActScale : int { tensor = 0, token, block };

__device__ __forceinline__ u32 abs_bits(float v) { return __float_as_uint(v) & 0x7fffffffu; }

template <int kWidth>
__device__ __forceinline__ u32 max_over_lanes(u32 v)
{
#pragma unroll
    for (int off = kWidth / 2; off > 0; off >>= 1) {
        const u32 o = __shfl_xor_sync(0xffffffffu, v, off);
        v = o > v ? o : v;
    }
    return v;
}

// atomicMax of amax|v| over the 8-element chunks [0, nchunks) of a 16-bit buffer, grid-stride.
template <Dtype D>
__device__ __forceinline__ void amax_chunks(const u16 *src, i64 nchunks, u32 *word)
{
    u32 local = 0u;
    const i64 stride = static_cast<i64>(gridDim.x) * MJ_SIMT_AMAX_THREADS;
    for (i64 i = static_cast<i64>(blockIdx.x) * MJ_SIMT_AMAX_THREADS + threadIdx.x; i < nchunks; i += stride) {
        const Vec16 v = ld_nc_16(src + i * 8);
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            const u32 b = abs_bits(to_float<D>(vec16_elem(v, e)));
            local = b > local ? b : local;
        }
    }
    local = max_over_lanes<32>(local);
    if (threadIdx.x % 32 == 0 && local != 0u) atomicMax(word, local);
}

// dequant scale of a group whose amax has bits amax_bits
__device__ __forceinline__ float scale_of(u32 amax_bits) { return __uint_as_float(amax_bits) / kE4m3Max; }

// q = RNE(v / s) saturated; s == 0 only when every |v| of the group is 0.
__device__ __forceinline__ u32 quantize(float v, float s) { return s == 0.0f ? 0u : float_to_e4m3(v / s); }

// Quantizes 8 elements (one chunk) with scale s and stores the 8 codes (8 bytes).
template <Dtype D>
__device__ __forceinline__ void quantize_chunk(const Vec16 &v, float s, u8 *dst)
{
    Vec8 q;
    q.w[0] = q.w[1] = 0u;
#pragma unroll
    for (int e = 0; e < 8; ++e) q.w[e >> 2] |= quantize(to_float<D>(vec16_elem(v, e)), s) << ((e & 3) * 8);
    *reinterpret_cast<Vec8 *>(dst) = q;
}

// One block quantizes one row of K elements (K a multiple of 8; of 128 for block mode).
// tensor: s = tensor_scale; token: the row's amax, stored at scale_out[0]; block: each
// group's amax, stored at scale_out[g].
template <Dtype D, ActScale kMode>
__device__ __forceinline__ void quantize_row(const u16 *src, int K, u8 *dst, float *scale_out,
                                             float tensor_scale)
{
    static_assert(MJ_SIMT_QUANT_THREADS % 32 == 0 && MJ_SIMT_QUANT_THREADS <= 1024, "whole warps");
    static_assert((MJ_SIMT_QUANT_THREADS * 8) % MJ_FP8_BLOCK == 0,
                  "a block step must cover whole 128-element groups (16 lanes each)");
    const int nchunks = K / 8;
    float s = tensor_scale;
    if constexpr (kMode == ActScale::token) {
        __shared__ u32 warp_max[MJ_SIMT_QUANT_THREADS / 32];
        u32 local = 0u;
        for (int c = threadIdx.x; c < nchunks; c += MJ_SIMT_QUANT_THREADS) {
            const Vec16 v = ld_nc_16(src + static_cast<i64>(c) * 8);
#pragma unroll
            for (int e = 0; e < 8; ++e) {
                const u32 b = abs_bits(to_float<D>(vec16_elem(v, e)));
                local = b > local ? b : local;
            }
        }
        local = max_over_lanes<32>(local);
        if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = local;
        __syncthreads();
        u32 amax = 0u;
#pragma unroll
        for (int w = 0; w < MJ_SIMT_QUANT_THREADS / 32; ++w) amax = warp_max[w] > amax ? warp_max[w] : amax;
        s = scale_of(amax);
        if (threadIdx.x == 0) scale_out[0] = s;
    }
    // every thread runs every step (block mode shuffles across lanes); c past the row idles
    for (int base = 0; base < nchunks; base += MJ_SIMT_QUANT_THREADS) {
        const int c = base + threadIdx.x;
        const Vec16 v = c < nchunks ? ld_nc_16(src + static_cast<i64>(c) * 8) : vec16_zero();
        if constexpr (kMode == ActScale::block) {
            // 16 consecutive chunks (lanes) form one 128-element group
            u32 local = 0u;
#pragma unroll
            for (int e = 0; e < 8; ++e) {
                const u32 b = abs_bits(to_float<D>(vec16_elem(v, e)));
                local = b > local ? b : local;
            }
            local = max_over_lanes<16>(local);
            s = scale_of(local);
            if (c < nchunks && c % 16 == 0) scale_out[c / 16] = s;
        }
        if (c < nchunks) quantize_chunk<D>(v, s, dst + static_cast<i64>(c) * 8);
    }
}

// ---- the four stage bodies (kernels in simt_layer.cuh) ----------------------------------

template <Quant Q>
__host__ __device__ constexpr ActScale x_scale_mode(Fp8Act a)
{
    return Q == Quant::fp8_block ? ActScale::block : a == Fp8Act::token ? ActScale::token : ActScale::tensor;
}

// The intermediate follows x, except that a static x scale has a dynamic per-tensor
// intermediate (nothing gives its scale).
template <Quant Q>
__host__ __device__ constexpr ActScale inter_scale_mode(Fp8Act a)
{
    return x_scale_mode<Q>(a);
}

template <Dtype D, Quant Q, Fp8Act kAct>
__device__ __forceinline__ void x_amax(const mj_layer_params &p, int H)
{
    if constexpr (Q == Quant::fp8_tensor && kAct == Fp8Act::tensor)
        amax_chunks<D>(reinterpret_cast<const u16 *>(p.x), p.num_tokens * H / 8,
                       reinterpret_cast<u32 *>(p.ws_amax));
}

template <Dtype D, Quant Q, Fp8Act kAct>
__device__ __forceinline__ void x_quant(const mj_layer_params &p, i64 t, int H)
{
    if constexpr (Q == Quant::fp8_block || (Q == Quant::fp8_tensor && kAct != Fp8Act::static_scale)) {
        constexpr ActScale kMode = x_scale_mode<Q>(kAct);
        const u16 *src = reinterpret_cast<const u16 *>(p.x) + t * H;
        u8 *dst = reinterpret_cast<u8 *>(p.ws_xq) + t * H;
        float *scales = reinterpret_cast<float *>(p.ws_xscale);
        float ts = 0.0f;
        if constexpr (kMode == ActScale::tensor) {
            ts = scale_of(reinterpret_cast<const u32 *>(p.ws_amax)[0]);
            if (t == 0 && threadIdx.x == 0) scales[0] = ts;
        }
        float *out = kMode == ActScale::block ? scales + t * (H / MJ_FP8_BLOCK) : scales + t;
        quantize_row<D, kMode>(src, H, dst, out, ts);
    }
}

template <Dtype D, Quant Q, Fp8Act kAct>
__device__ __forceinline__ void inter_amax(const mj_layer_params &p, int I)
{
    if constexpr (Q == Quant::fp8_tensor && inter_scale_mode<Q>(kAct) == ActScale::tensor) {
        const i64 rows = reinterpret_cast<const int *>(p.ws_offsets)[p.num_local_experts];
        amax_chunks<D>(reinterpret_cast<const u16 *>(p.ws_inter), rows * I / 8,
                       reinterpret_cast<u32 *>(p.ws_amax) + 1);
    }
}

template <Dtype D, Quant Q, Fp8Act kAct>
__device__ __forceinline__ void inter_quant(const mj_layer_params &p, i64 pos, int I)
{
    if constexpr (quant_fp8(Q)) {
        const i64 rows = reinterpret_cast<const int *>(p.ws_offsets)[p.num_local_experts];
        if (pos >= rows) return; // whole block: the grid covers every pair, fewer rows are routed here
        constexpr ActScale kMode = inter_scale_mode<Q>(kAct);
        const u16 *src = reinterpret_cast<const u16 *>(p.ws_inter) + pos * I;
        u8 *dst = reinterpret_cast<u8 *>(p.ws_interq) + pos * I;
        float *scales = reinterpret_cast<float *>(p.ws_interscale);
        float ts = 0.0f;
        if constexpr (kMode == ActScale::tensor) {
            ts = scale_of(reinterpret_cast<const u32 *>(p.ws_amax)[1]);
            if (pos == 0 && threadIdx.x == 0) scales[0] = ts;
        }
        float *out = kMode == ActScale::block ? scales + pos * (I / MJ_FP8_BLOCK) : scales + pos;
        quantize_row<D, kMode>(src, I, dst, out, ts);
    }
}

} // namespace mj
