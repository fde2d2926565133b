// This file contains the small floating-point formats of the quantized layers, written out
// bit by bit (no toolkit header, no hardware conversion instruction, so every arch from
// sm_80 decodes the same way):
//
//   e4m3fn  1 sign, 4 exponent (bias 7), 3 mantissa; no infinity; S.1111.111 is NaN;
//           largest finite ±448 (S.1111.110); subnormals m·2^-9 (fp8 weights, activations)
//   e2m1    1 sign, 2 exponent (bias 1), 1 mantissa: ±{0, 0.5, 1, 1.5, 2, 3, 4, 6} (mxfp4)
//   e8m0    an unsigned biased exponent: byte s is 2^(s−127); s = 255 is NaN (mxfp4 scales)
//
// NOTES: encoding is only needed for e4m3 (activations quantized in the kernel): round to
// nearest, ties to even, saturating to ±448 (an input beyond 448 — including ±inf — gives
// ±448, as every fp8 GEMM stack does), NaN gives the NaN code with the input's sign.
#pragma once

#include "common/types.cuh"

namespace mj {

constexpr float kE4m3Max = 448.0f;

// e4m3fn byte -> fp32 (exact: every e4m3 value is an fp32 value).
__device__ __forceinline__ float e4m3_to_float(u32 b)
{
    const u32 sign = (b & 0x80u) << 24;
    const u32 e = (b >> 3) & 0xfu, m = b & 0x7u;
    if (e == 0xfu && m == 0x7u) return __uint_as_float(sign | 0x7fc00000u); // NaN
    if (e == 0u) {
        // subnormal: m · 2^-9 (m = 0 gives a signed zero)
        const float v = static_cast<float>(m) * 0x1p-9f;
        return __uint_as_float(sign | __float_as_uint(v));
    }
    // normal: (1 + m/8) · 2^(e−7): fp32 exponent e − 7 + 127, mantissa m in the top 3 bits
    return __uint_as_float(sign | ((e + 120u) << 23) | (m << 20));
}

// fp32 -> e4m3fn byte: round to nearest even, saturate to ±448, NaN -> NaN.
__device__ __forceinline__ u32 float_to_e4m3(float x)
{
    const u32 bits = __float_as_uint(x);
    const u32 sign = (bits >> 24) & 0x80u;
    const u32 mag = bits & 0x7fffffffu;
    if (mag > 0x7f800000u) return sign | 0x7fu;           // NaN
    if (mag >= 0x43e00000u) return sign | 0x7eu;          // |x| >= 448 (and inf): saturate
    if (mag < 0x3c800000u) {                              // |x| < 2^-6: subnormal grid m·2^-9
        // |x|·2^9 is exact (a power-of-two scaling of a value far from overflow); rintf
        // rounds half to even. The result 0..8 is already the code: 8 = 0.0001.000 = 2^-6.
        const float q = rintf(__uint_as_float(mag) * 0x1p9f);
        return sign | static_cast<u32>(q);
    }
    // normal: keep 3 of fp32's 23 mantissa bits, rounding the 20 dropped bits to nearest
    // even; a carry out of the mantissa correctly bumps the exponent.
    const u32 r = mag + 0x7ffffu + ((mag >> 20) & 1u);
    const u32 e = (r >> 23) - 120u; // 1..15 (values below 448 never round past 448)
    const u32 m = (r >> 20) & 0x7u;
    return sign | (e << 3) | m;
}

// e2m1 nibble (low 4 bits of n) -> fp32: sign·{0, 0.5, 1, 1.5, 2, 3, 4, 6}.
__device__ __forceinline__ float e2m1_to_float(u32 n)
{
    const u32 sign = (n & 0x8u) << 28;
    const u32 e = (n >> 1) & 0x3u, m = n & 0x1u;
    // e = 0: subnormal m·0.5; else (1 + m/2)·2^(e−1): fp32 exponent e − 1 + 127
    const u32 mag = e == 0u ? (m ? 0x3f000000u : 0u) : (((e + 126u) << 23) | (m << 22));
    return __uint_as_float(sign | mag);
}

// e8m0 byte -> fp32: 2^(s−127); s = 0 is 2^-127 (an fp32 subnormal), s = 255 is NaN.
__device__ __forceinline__ float e8m0_to_float(u32 s)
{
    s &= 0xffu;
    if (s == 0xffu) return __uint_as_float(0x7fc00000u);
    if (s == 0u) return __uint_as_float(0x00400000u);
    return __uint_as_float(s << 23);
}

} // namespace mj
