// This file contains the arithmetic half of the tensor-core backends' 4-bit weight decoding
// (the bit half is common/w4_bits.h): a weight row's constants for one scale group, and a
// packed pair turned into an MMA operand register of two dtype values by two packed FMAs:
//
//   w4a16  ((2^m + q) · 1 − (2^m + zp)) · s    the subtraction is exact; one rounding
//   mxfp4  ((e2m1 · 2^-u) · 2^u) · 2^(s−127)   both products exact within the dtype's range
//          (e2m1 · 2^-u) · 2^(u+s−127)         one product, where that factor is a normal
//                                              value of at most 2 (pair_fused: the same bits)
//
// so a dequantized weight is (q − zp) · s rounded once to the dtype (exact for mxfp4 in bf16),
// where simt keeps it in fp32 (docs/SEMANTICS.md). k past K gets s = 0 and so contributes
// exact zeros, whatever the real scales (NaN included); a padding row (past N) computes on
// the tile's first row, in accumulators no epilogue stores (mma_w4_mainloop.cuh).
#pragma once

#include "common/params.h"
#include "common/types.cuh"
#include "common/w4_bits.h"

namespace mj {

template <Dtype D>
__device__ __forceinline__ u32 hfma2(u32 a, u32 b, u32 c)
{
    u32 d;
    if constexpr (D == Dtype::bf16)
        asm("fma.rn.bf16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    else
        asm("fma.rn.f16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}

__device__ __forceinline__ u32 dup2(u32 h) { return (h & 0xffffu) * 0x10001u; }

__device__ __forceinline__ u32 ld_nc_u16(const void *p)
{
    unsigned short v;
    asm("ld.global.nc.u16 %0, [%1];\n" : "=h"(v) : "l"(p));
    return v;
}

__device__ __forceinline__ u32 ld_nc_u8(const void *p)
{
    unsigned short v;
    asm("ld.global.nc.u8 %0, [%1];\n" : "=h"(v) : "l"(p));
    return v & 0xffu;
}

// One weight row of a 4-bit matrix: its packed elements, scales and zero points, each at the
// row's first k (all nullptr: a padding row).
struct W4Row {
    const u8 *data;
    const u8 *scale;
    const u8 *zero;
};

// The constants of one (row, scale group): result = (v · m1 + a1) · s, -0 added last (with
// zero points a1 comes from s's upper half, see group()).
struct W4Group {
    u32 m1, a1, s;
};

// The 4-bit format of quant Q (w4a16 with group kG and zero points kZ, or mxfp4) in a layer
// of dtype D; kLean: int4 pairs built without a constant held in a register (the persistent
// decode kernel, at its 168-register bound, spilled it).
template <Quant Q, Dtype D, int kG, bool kZ, bool kLean = false>
struct W4Format {
    static_assert(Q == Quant::w4a16 || Q == Quant::mxfp4, "a 4-bit format is w4a16 or mxfp4");
    static_assert(D == Dtype::bf16 || D == Dtype::fp16, "a 4-bit layer computes in bf16 or fp16");
    static constexpr bool kMx = Q == Quant::mxfp4;
    static constexpr int kFp16 = D == Dtype::fp16 ? 1 : 0;
    static constexpr int kGroup = kMx ? MJ_MXFP4_GROUP : kG;
    static constexpr bool kZero = !kMx && kZ;
    static_assert(kGroup == 32 || kGroup == 64 || kGroup == 128, "a 4-bit scale group is 32, 64 or 128");
    static constexpr u32 kNegZero2 = 0x80008000u;

    // Row n of matrix e of [E_l, nrows, K] weights with their scales and zero points.
    __device__ __forceinline__ static W4Row row(const void *data, const void *scale, const void *zero, int e,
                                                i64 nrows, i64 n, int K)
    {
        const i64 r = static_cast<i64>(e) * nrows + n, groups = K / kGroup;
        W4Row w;
        w.data = reinterpret_cast<const u8 *>(data) + r * (K / 2);
        w.scale = reinterpret_cast<const u8 *>(scale) + r * groups * (kMx ? 1 : 2);
        w.zero = kZero ? reinterpret_cast<const u8 *>(zero) + r * (groups / 2) : nullptr;
        return w;
    }

    // The constants of group g of row w; live = false (padding, k past K): s = 0.
    __device__ __forceinline__ static W4Group group(const W4Row &w, int g, bool live)
    {
        W4Group c;
        if constexpr (kMx) {
            c.m1 = dup2(kFp16 ? MJ_W4_E2M1_UNIT_FP16 : MJ_W4_E2M1_UNIT_BF16);
            c.a1 = kNegZero2;
            c.s = live ? dup2(mj_w4_e8m0_scale(ld_nc_u8(w.scale + g), kFp16)) : 0u;
        } else {
            c.m1 = dup2(kFp16 ? 0x3c00u : 0x3f80u);
            c.a1 = dup2(mj_w4_u4_bias(MJ_INT4_DEFAULT_ZERO, kFp16) | 0x8000u);
            c.s = live ? ld_nc_u16(w.scale + 2 * g) : 0u;
            // with zero points s holds the scale's bits and the zero point above them (one
            // register per row and group: the large path's budget), unpacked in pair()
            if constexpr (kZero) c.s |= live ? ((ld_nc_u8(w.zero + (g >> 1)) >> ((g & 1) * 4)) & 0xfu) << 16 : 0u;
            else c.s = dup2(c.s);
        }
        return c;
    }

    // The group whose s is s (what group() returned, stored and read back).
    __device__ __forceinline__ static W4Group unpack(u32 s)
    {
        W4Group c;
        c.m1 = dup2(kMx ? (kFp16 ? MJ_W4_E2M1_UNIT_FP16 : MJ_W4_E2M1_UNIT_BF16) : (kFp16 ? 0x3c00u : 0x3f80u));
        c.a1 = kMx ? kNegZero2 : dup2(mj_w4_u4_bias(MJ_INT4_DEFAULT_ZERO, kFp16) | 0x8000u);
        c.s = s;
        return c;
    }

    // The word's shifted copy every pair of it shares (q >> 4 for int4, q << 4 for e2m1).
    __device__ __forceinline__ static u32 aux(u32 q) { return kMx ? q << 4 : q >> 4; }

    // Row-scaled mxfp4 (bf16, the decode mainloop): a tile whose row has largest e8m0 byte m
    // multiplies each pair by the one factor 2^(s − 1 − R), R = m − 128, instead of 2^126 and
    // then 2^(s − 127), and its accumulators by 2^R after the last stage. Every factor is then a
    // normal bf16 value of at most 2^127, and every product, e2m1 · 2^(s − 127 − R), the
    // contract's weight times 2^-R exactly (the smallest, 2^-133, a bf16 subnormal), as long
    // as m <= 252 (above, the contract's weights overflow) and m − (the row's smallest byte)
    // <= 133; the MMA's sums scale with their inputs, so the outputs are the two-multiply
    // form's bits (mma_w4_mainloop.cuh chooses the form per tile). A row with a byte 255 computes
    // garbage and ends NaN, as the contract's does. Not in the persistent decode kernel (the
    // lean format), whose code it makes too large.
    static constexpr bool kRowScaled = kMx && !kFp16 && !kLean;
    static constexpr int kRowScaledMaxByte = MJ_W4_ROW_SCALED_MAX_BYTE, kRowScaledSpread = MJ_W4_ROW_SCALED_SPREAD;

    // The row's bias, so that group_scaled's factor of byte s is 2^(s − 1 − R) in both halves.
    __device__ __forceinline__ static u32 row_bias(u32 m) { return mj_w4_row_bias(m); }

    // The group of byte g of a row-scaled row (s: its factor; live = false: 0).
    __device__ __forceinline__ static W4Group group_scaled(const W4Row &w, int g, bool live, u32 bias)
    {
        W4Group c;
        c.m1 = 0u;
        c.a1 = kNegZero2;
        c.s = live ? mj_w4_row_factor(ld_nc_u8(w.scale + g), bias) : 0u;
        return c;
    }

    // The factor 2^R of a row whose bias is bias (NaN for a row with a byte 255).
    __device__ __forceinline__ static float row_factor(u32 bias) { return __uint_as_float(mj_w4_row_scale_bits(bias)); }

    // Whether group c's pairs may take the one-multiply form (mxfp4 with a scale of 2^-126 .. 2
    // in bf16, 2^-14 .. 2 in fp16: common/w4_bits.h), and its factor there.
    __device__ __forceinline__ static bool fusable(const W4Group &c) { return kMx && mj_w4_e8m0_fusable(c.s, kFp16); }
    __device__ __forceinline__ static u32 fused(const W4Group &c) { return mj_w4_e8m0_fused(c.s, kFp16); }

    // Pair i of an mxfp4 word in the one-multiply form, f = fused(c) of a fusable group: the
    // same bits as pair() with c, one packed product instead of two.
    __device__ __forceinline__ static u32 pair_fused(u32 q, u32 q_aux, int i, u32 f)
    {
        static_assert(kMx, "only e2m1 pairs have the one-multiply form");
        return hfma2<D>(mj_w4_e2m1_pair(q, q_aux, i, kFp16), f, kNegZero2);
    }

    // Pair i (elements 2i, 2i + 1 of the word) as one operand register.
    __device__ __forceinline__ static u32 pair(u32 q, u32 q_aux, int i, const W4Group &c)
    {
        const u32 v = kMx ? mj_w4_e2m1_pair(q, q_aux, i, kFp16) : mj_w4_u4_pair(q, q_aux, i, kFp16, kLean);
        if constexpr (kZero)
            return hfma2<D>(hfma2<D>(v, c.m1, dup2(mj_w4_u4_bias(c.s >> 16, kFp16) | 0x8000u)), dup2(c.s), kNegZero2);
        return hfma2<D>(hfma2<D>(v, c.m1, c.a1), c.s, kNegZero2);
    }
};

} // namespace mj
