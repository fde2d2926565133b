// This file contains the fp8 activation quantization of the tensor-core fp8 layers (wgmma:
// quant=fp8_tensor, fp8_block) outside their GEMMs' producers: the e4m3 encode of the
// contract in one hardware conversion, and the route kernel's share, done while it routes
// (no extra pass over x):
//
//   fp8_block         x -> e4m3 [T, H] (ws_xq) with one fp32 scale per token per 128 of H
//                     (ws_xscale [T, H/128]); the 8 warps of a route block share its tokens'
//                     groups, so a decode batch of one token is spread over the whole block
//   fp8_act=token     x -> e4m3 with one fp32 scale per token (ws_xscale [T]), a warp per token
//   fp8_act=tensor    the bits of each token's amax|x| (ws_xscale [T], u32); one scale needs
//                     every row, so x is quantized once by the next kernel that runs after every
//                     route block, the scatter kernel (scatter_quantize_x_tensor, below: the max
//                     of the T words, x -> e4m3 [T, H] in ws_xq and the scale after the words),
//                     whose codes the GEMM1 producers copy as they copy fp8_block's
//
// and, for fp8_tensor, the zeroing of the intermediate's amax words that GEMM1's epilogue
// raises with atomicMax (per (token, slot) for fp8_act=token, else the one word).
//
// NOTES: cvt.rn.satfinite.e4m3x2.f32 rounds to nearest even and saturates to ±448 (±inf
// included), NaN stays NaN: quant_act.cuh's float_to_e4m3 in one instruction (sm_89+). The
// quotient v / s is IEEE fp32 (no fast math), as in every layer; a group of zeros has scale 0
// and codes 0.
#pragma once

#include "common/params.h"
#include "common/types.cuh"
#include "quant_act.cuh"

namespace mj {

// Two values -> their e4m3 codes, lo in the low byte.
__device__ __forceinline__ u32 e4m3x2(float lo, float hi)
{
    unsigned short d;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(d) : "f"(hi), "f"(lo));
    return d;
}

// v / s for the encode, 0 for a zero scale (a group of zeros)
__device__ __forceinline__ float fp8_quotient(float v, float s) { return s == 0.0f ? 0.0f : v / s; }

// One scale for many encodes (the GEMM producers' quantizing modes): s and r = 1 / s, divided
// once. With s in [2^-60, 2^60] (`fast`) the quotient of a value v with |v| <= 448·s (every
// value of the group s is the amax scale of) is v·r corrected by one fma of its remainder
// (Markstein), whose e4m3 code is the IEEE quotient's: the division's own fast path without
// its reciprocal and range check per value, three instructions and no branch; checked against
// the IEEE quotient's codes for every bf16 and fp16 amax, exhaustively over v at some
// (tests/check_fp8_quotient.c). A zero keeps its sign (v itself). Any other s (0, NaN, inf, or
// extreme) divides.
struct Fp8Div {
    float s, r;
    bool fast;
};
__device__ __forceinline__ Fp8Div fp8_div_of(float s)
{
    const bool fast = s >= 0x1p-60f && s <= 0x1p60f; // false for NaN
    return Fp8Div{s, fast ? 1.0f / s : 0.0f, fast};
}
__device__ __forceinline__ float fp8_quotient_fast(float v, const Fp8Div &d)
{
    const float q = __fmul_rn(v, d.r);
    const float q1 = __fmaf_rn(__fmaf_rn(-d.s, q, v), d.r, q);
    return v == 0.0f ? v : q1;
}

// 8 values of a 16-bit chunk -> 8 codes (the first in the low byte of w[0]), by the quotient
// function f (fp8_quotient with s, or fp8_quotient_fast with an Fp8Div).
template <Dtype D, class F>
__device__ __forceinline__ Vec8 quantize8_by(const Vec16 &v, F f)
{
    Vec8 q;
#pragma unroll
    for (int w = 0; w < 2; ++w) {
        const u32 lo = e4m3x2(f(to_float<D>(vec16_elem(v, 4 * w))), f(to_float<D>(vec16_elem(v, 4 * w + 1))));
        const u32 hi = e4m3x2(f(to_float<D>(vec16_elem(v, 4 * w + 2))), f(to_float<D>(vec16_elem(v, 4 * w + 3))));
        q.w[w] = lo | hi << 16;
    }
    return q;
}
template <Dtype D>
__device__ __forceinline__ Vec8 quantize8(const Vec16 &v, float s)
{
    return quantize8_by<D>(v, [s](float x) { return fp8_quotient(x, s); });
}

template <Dtype D>
__device__ __forceinline__ u32 amax8(const Vec16 &v)
{
    u32 a = 0u;
#pragma unroll
    for (int e = 0; e < 8; ++e) {
        const u32 b = abs_bits(to_float<D>(vec16_elem(v, e)));
        a = b > a ? b : a;
    }
    return a;
}

// fp8_block: the 1 x 128 groups of the route block's tokens (blockIdx.x · 8 + [0, 8)), two
// per warp at a time (16 lanes of 8 values each), spread over all 8 warps of the block.
template <Dtype D>
__device__ __forceinline__ void route_quantize_x_blocks(const mj_layer_params &p, int H, int warp, int lane)
{
    const long long t0 = static_cast<long long>(blockIdx.x) * (MJ_SIMT_ROUTE_THREADS / 32);
    const long long left = p.num_tokens - t0;
    const int tokens = left < MJ_SIMT_ROUTE_THREADS / 32 ? static_cast<int>(left) : MJ_SIMT_ROUTE_THREADS / 32;
    const int groups = H / MJ_FP8_BLOCK, items = tokens * groups, half = lane / 16, l16 = lane % 16;
    // unrolled so that several rounds' loads are in flight at once (a decode token of H = 7168 is
    // 56 groups: 3.5 rounds of the block's 8 warps, two groups each)
#pragma unroll 4
    for (int w = warp; 2 * w < items; w += MJ_SIMT_ROUTE_THREADS / 32) {
        const int item = 2 * w + half;
        const bool in = item < items; // the second half of the last pair may be past the end
        const long long t = t0 + (in ? item / groups : 0);
        const int g = in ? item % groups : 0;
        const i64 at = t * H + g * MJ_FP8_BLOCK + l16 * 8;
        const Vec16 v = in ? ld_nc_16(reinterpret_cast<const u16 *>(p.x) + at) : vec16_zero();
        const float s = scale_of(max_over_lanes<16>(amax8<D>(v)));
        if (!in) continue;
        *reinterpret_cast<Vec8 *>(reinterpret_cast<u8 *>(p.ws_xq) + at) = quantize8<D>(v, s);
        if (l16 == 0) reinterpret_cast<float *>(p.ws_xscale)[t * groups + g] = s;
    }
}

// fp8_tensor: token t's row, by its warp: the amax bits (fp8_act=tensor) or the codes and the
// scale (fp8_act=token).
template <Dtype D, Fp8Act kFa>
__device__ __forceinline__ void route_quantize_x_row(const mj_layer_params &p, int H, long long t, int lane)
{
    const u16 *row = reinterpret_cast<const u16 *>(p.x) + t * H;
    u32 a = 0u;
    for (int c = lane; c < H / 8; c += 32) {
        const u32 b = amax8<D>(ld_nc_16(row + c * 8));
        a = b > a ? b : a;
    }
    a = max_over_lanes<32>(a);
    if constexpr (kFa == Fp8Act::tensor) {
        if (lane == 0) reinterpret_cast<u32 *>(p.ws_xscale)[t] = a;
    } else {
        const float s = scale_of(a);
        u8 *dst = reinterpret_cast<u8 *>(p.ws_xq) + t * H;
        for (int c = lane; c < H / 8; c += 32)
            *reinterpret_cast<Vec8 *>(dst + c * 8) = quantize8<D>(ld_nc_16(row + c * 8), s);
        if (lane == 0) reinterpret_cast<float *>(p.ws_xscale)[t] = s;
    }
}

// fp8_act=tensor, in the scatter kernel (launched for it at every T): every block takes the max
// of the route kernel's T amax words (a 16 KB read at T = 4096), block 0 stores the scale as
// fp32 after them (ws_xscale [T]), and the blocks' warps quantize x's rows t = warp of the grid,
// + all the grid's warps, ... into ws_xq: each value once, as the GEMM1 producers did per tile
// (the same scale, the IEEE quotient's codes: Fp8Div).
template <Dtype D>
__device__ __forceinline__ void scatter_quantize_x_tensor(const mj_layer_params &p, int H)
{
    constexpr int kWarps = MJ_SIMT_SCATTER_THREADS / 32;
    __shared__ u32 s_max[kWarps];
    const u32 *words = reinterpret_cast<const u32 *>(p.ws_xscale);
    u32 a = 0u;
    for (long long i = threadIdx.x; i < p.num_tokens; i += MJ_SIMT_SCATTER_THREADS) {
        const u32 w = words[i];
        a = w > a ? w : a;
    }
    a = max_over_lanes<32>(a);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) s_max[warp] = a;
    __syncthreads();
#pragma unroll
    for (int w = 0; w < kWarps; ++w) a = s_max[w] > a ? s_max[w] : a;
    const Fp8Div d = fp8_div_of(scale_of(a));
    if (blockIdx.x == 0 && threadIdx.x == 0) reinterpret_cast<float *>(p.ws_xscale)[p.num_tokens] = d.s;
    auto fast = [&d](float x) { return fp8_quotient_fast(x, d); };
    for (long long t = static_cast<long long>(blockIdx.x) * kWarps + warp; t < p.num_tokens;
         t += static_cast<long long>(gridDim.x) * kWarps) {
        const u16 *row = reinterpret_cast<const u16 *>(p.x) + t * H;
        u8 *dst = reinterpret_cast<u8 *>(p.ws_xq) + t * H;
        for (int c = lane; c < H / 8; c += 32) {
            const Vec16 v = ld_nc_16(row + c * 8);
            *reinterpret_cast<Vec8 *>(dst + c * 8) = d.fast ? quantize8_by<D>(v, fast) : quantize8<D>(v, d.s);
        }
    }
}

// fp8_tensor: the intermediate's amax words of token t (fp8_act=token: one per slot), or the
// one word (by token 0), zeroed before GEMM1's epilogue raises them.
template <Fp8Act kFa>
__device__ __forceinline__ void route_zero_inter_amax(const mj_layer_params &p, long long t, int k, int lane)
{
    u32 *words = reinterpret_cast<u32 *>(p.ws_interscale);
    if constexpr (kFa == Fp8Act::token) {
        if (lane < k) words[t * k + lane] = 0u;
    } else if (t == 0 && lane == 0) {
        words[0] = 0u;
    }
}

} // namespace mj
