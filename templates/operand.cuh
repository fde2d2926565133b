// This file contains the operand formats of the SIMT mainloop: how one 8-element chunk of a
// K-contiguous row is loaded from global memory and turned into 8 fp32 values.
//
//   Elem::f16   bf16/fp16, 16 bytes per chunk                       value = x
//   Elem::e4m3  e4m3fn, 8 bytes per chunk                           value = q · scale
//   Elem::u4    unsigned int4, 4 bytes, even index in the low nibble value = (q − zp) · scale
//   Elem::e2m1  e2m1 (mxfp4), 4 bytes, even index in the low nibble  value = q · 2^(s−127)
//
// and where the scale of a chunk comes from:
//
//   Scale::none    no scale (f16)
//   Scale::scalar  one fp32 value for the whole row (fp8 per tensor / per token / static),
//                  found once when the row is named
//   Scale::per_k   one per kGroup elements of K, read with each chunk: fp32 (e4m3, groups of
//                  128), the layer dtype (u4, groups of 32/64/128), or e8m0 bytes (e2m1, 32)
//
// A row is named by a Src (data == nullptr: a padding row, which reads as zeros). K, every
// group size and every chunk offset are multiples of 8, so a chunk never straddles a group:
// its scale (and zero point) is one value.
//
// NOTES: the loads are issued in the mainloop's prefetch step (load) and the arithmetic in
// its shared-memory step (dequant), so quantized formats keep the load/compute overlap.
// Padding chunks read as q = 0 with scale 0, which adds exact zeros, even where the real
// scales of that matrix are NaN (mxfp4 s = 255 propagates only through the rows it scales).
#pragma once

#include "common/minifloat.cuh"
#include "common/params.h"
#include "common/types.cuh"

namespace mj {

enum class Elem : int { f16 = 0, e4m3, u4, e2m1 };
enum class Scale : int { none = 0, scalar, per_k };

// One operand row: its elements, its scales / zero points, or its one scalar scale.
struct Src {
    const u8 *data;  // first element of the row; nullptr = padding row
    const u8 *scale; // per_k: the row's scales, indexed by k / kGroup
    const u8 *zero;  // u4 with zero points: the row's packed zero points; else nullptr
    float s0;        // scalar: the row's scale
};

__device__ __forceinline__ Src src_pad()
{
    Src s;
    s.data = nullptr;
    s.scale = nullptr;
    s.zero = nullptr;
    s.s0 = 0.0f;
    return s;
}

// D: the layer dtype (f16 elements, u4 scales). kGroup: elements per scale for per_k.
template <Elem kElem, Scale kScale, Dtype D, int kGroup, bool kZero>
struct Operand {
    static constexpr int kWords = kElem == Elem::f16 ? 4 : kElem == Elem::e4m3 ? 2 : 1;
    static_assert(kScale != Scale::per_k || (kGroup >= 8 && kGroup % 8 == 0),
                  "a per-K scale group must hold whole 8-element chunks");
    static_assert(kElem != Elem::f16 || kScale == Scale::none, "16-bit operands carry no scale");
    static_assert(kElem == Elem::f16 || kScale != Scale::none, "quantized operands need a scale");
    static_assert(!kZero || kElem == Elem::u4, "only int4 has zero points");
    static_assert(D == Dtype::bf16 || D == Dtype::fp16, "the layer dtype is bf16 or fp16");

    // Bytes of a row of K elements (K a multiple of 8).
    __host__ __device__ static constexpr i64 row_bytes(i64 K)
    {
        return kElem == Elem::f16 ? 2 * K : kElem == Elem::e4m3 ? K : K / 2;
    }

    // Raw chunk as loaded: its element words, its scale, its zero point.
    struct Raw {
        u32 w[kWords];
        float s;
        u32 z;
    };

    // Chunk at element k of row src (k a multiple of 8); zeros past K or for a padding row.
    __device__ __forceinline__ static Raw load(const Src &src, int k, int K)
    {
        Raw r;
#pragma unroll
        for (int i = 0; i < kWords; ++i) r.w[i] = 0u;
        r.s = 0.0f;
        r.z = 0u;
        if (src.data == nullptr || k >= K) return r;
        if constexpr (kElem == Elem::f16) {
            const Vec16 v = ld_nc_16(src.data + 2 * static_cast<i64>(k));
#pragma unroll
            for (int i = 0; i < 4; ++i) r.w[i] = v.w[i];
            r.s = 1.0f;
        } else if constexpr (kElem == Elem::e4m3) {
            ld_nc_8(src.data + k, &r.w[0], &r.w[1]);
        } else {
            r.w[0] = ld_nc_4(src.data + k / 2);
        }
        if constexpr (kScale == Scale::scalar) {
            r.s = src.s0;
        } else if constexpr (kScale == Scale::per_k) {
            const int g = k / kGroup;
            if constexpr (kElem == Elem::e4m3) r.s = reinterpret_cast<const float *>(src.scale)[g];
            else if constexpr (kElem == Elem::u4) r.s = to_float<D>(reinterpret_cast<const u16 *>(src.scale)[g]);
            else r.s = e8m0_to_float(src.scale[g]);
            if constexpr (kZero) r.z = (static_cast<u32>(src.zero[g >> 1]) >> ((g & 1) * 4)) & 0xfu;
        }
        if constexpr (kElem == Elem::u4 && !kZero) r.z = MJ_INT4_DEFAULT_ZERO;
        return r;
    }

    // Element i (0..7) of a loaded chunk as fp32.
    __device__ __forceinline__ static float value(const Raw &r, int i)
    {
        if constexpr (kElem == Elem::f16) {
            return to_float<D>(static_cast<u16>(r.w[i >> 1] >> ((i & 1) * 16)));
        } else if constexpr (kElem == Elem::e4m3) {
            return e4m3_to_float((r.w[i >> 2] >> ((i & 3) * 8)) & 0xffu) * r.s;
        } else if constexpr (kElem == Elem::u4) {
            const int q = static_cast<int>((r.w[0] >> (i * 4)) & 0xfu);
            return static_cast<float>(q - static_cast<int>(r.z)) * r.s; // exact: |q − zp| <= 15
        } else {
            return e2m1_to_float(r.w[0] >> (i * 4)) * r.s;
        }
    }
};

// ---- the operands of each quantization ----------------------------------------------------

// Weights (B operand) of quant Q in a layer of dtype D.
template <Quant Q, Dtype D, int kInt4Group, bool kInt4Zero>
struct WeightOperandOf;
template <Dtype D, int G, bool Z>
struct WeightOperandOf<Quant::bf16, D, G, Z> { using type = Operand<Elem::f16, Scale::none, D, 8, false>; };
template <Dtype D, int G, bool Z>
struct WeightOperandOf<Quant::fp16, D, G, Z> { using type = Operand<Elem::f16, Scale::none, D, 8, false>; };
template <Dtype D, int G, bool Z>
struct WeightOperandOf<Quant::fp8_tensor, D, G, Z> { using type = Operand<Elem::e4m3, Scale::scalar, D, 8, false>; };
template <Dtype D, int G, bool Z>
struct WeightOperandOf<Quant::fp8_block, D, G, Z> { using type = Operand<Elem::e4m3, Scale::per_k, D, MJ_FP8_BLOCK, false>; };
template <Dtype D, int G, bool Z>
struct WeightOperandOf<Quant::w4a16, D, G, Z> { using type = Operand<Elem::u4, Scale::per_k, D, G, Z>; };
template <Dtype D, int G, bool Z>
struct WeightOperandOf<Quant::mxfp4, D, G, Z> { using type = Operand<Elem::e2m1, Scale::per_k, D, MJ_MXFP4_GROUP, false>; };

// Activations (A operand: x in GEMM1, the intermediate in GEMM2) of quant Q: e4m3 for the
// fp8 formats (a scalar scale per row, or one per 128 of K for fp8_block), else dtype.
template <Quant Q, Dtype D>
struct ActOperandOf { using type = Operand<Elem::f16, Scale::none, D, 8, false>; };
template <Dtype D>
struct ActOperandOf<Quant::fp8_tensor, D> { using type = Operand<Elem::e4m3, Scale::scalar, D, 8, false>; };
template <Dtype D>
struct ActOperandOf<Quant::fp8_block, D> { using type = Operand<Elem::e4m3, Scale::per_k, D, MJ_FP8_BLOCK, false>; };

// Names row n of matrix e of a weight tensor [E_local, nrows, K] in format W: the elements,
// and the scales / zero points laid out as the contract says (per_k scales [E_local, nrows,
// K/g] — or [E_local, nrows/128, K/128] for fp8 blocks — zero points [E_local, nrows, K/g/2]
// bytes, fp8 per-tensor scales [E_local]). All offsets in 64 bits.
template <class W, Quant Q, int kInt4Group>
__device__ __forceinline__ Src weight_row(u64 data, u64 scale, u64 zero, int e, i64 nrows, i64 n, int K)
{
    Src s = src_pad();
    const i64 row = static_cast<i64>(e) * nrows + n;
    s.data = reinterpret_cast<const u8 *>(data) + row * W::row_bytes(K);
    if constexpr (Q == Quant::fp8_tensor) {
        s.s0 = reinterpret_cast<const float *>(scale)[e];
    } else if constexpr (Q == Quant::fp8_block) {
        const i64 kb = K / MJ_FP8_BLOCK;
        const i64 block_row = static_cast<i64>(e) * (nrows / MJ_FP8_BLOCK) + n / MJ_FP8_BLOCK;
        s.scale = reinterpret_cast<const u8 *>(reinterpret_cast<const float *>(scale) + block_row * kb);
    } else if constexpr (Q == Quant::w4a16) {
        const i64 groups = K / kInt4Group;
        s.scale = reinterpret_cast<const u8 *>(reinterpret_cast<const u16 *>(scale) + row * groups);
        if (zero) s.zero = reinterpret_cast<const u8 *>(zero) + row * (groups / 2);
    } else if constexpr (Q == Quant::mxfp4) {
        s.scale = reinterpret_cast<const u8 *>(scale) + row * (K / MJ_MXFP4_GROUP);
    }
    return s;
}

} // namespace mj
