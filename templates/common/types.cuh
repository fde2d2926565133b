// This file contains the storage types of the simt templates and their conversions to and
// from fp32: fixed-width integer typedefs, the dtype and routing enums that the generated
// source names, bf16 and fp16 conversions, and 16-byte global loads.
//
// NOTES: NVRTC compiles the layer with no include path (no toolkit headers: parsing
// cuda_bf16.h would dominate a small compile), so everything here is written out. bf16 and
// fp16 values are stored as their 16-bit patterns (unsigned short); arithmetic is fp32 only.
#pragma once

namespace mj {

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef int i32;
typedef long long i64;

static_assert(sizeof(u16) == 2 && sizeof(u32) == 4 && sizeof(u64) == 8 && sizeof(i64) == 8,
              "the fixed-width typedefs must have the widths their names promise");

// Element types. The generated source names them (mj::Dtype::bf16); the numbers are internal.
enum class Dtype : int { bf16 = 0, fp16 = 1, fp32 = 2 };

// Routing methods of the contract (section 4), all implemented by route.cuh.
enum class Routing : int {
    softmax_topk = 0, renormalize, sigmoid_topk, sigmoid_renorm, deepseek_v3, llama4, precomputed
};

// Weight formats (spec quant=, docs/SEMANTICS.md §5).
enum class Quant : int { bf16 = 0, fp16, fp8_tensor, fp8_block, w4a16, mxfp4 };

// The formats whose activations are e4m3 (quantized in the kernel, or given so).
__host__ __device__ constexpr bool quant_fp8(Quant q) { return q == Quant::fp8_tensor || q == Quant::fp8_block; }

// How fp8_tensor gets its e4m3 activations (spec fp8_act=): a dynamic scale per tensor or
// per token computed in the kernel, or x given already quantized with a static scale.
// fp8_block always uses one dynamic scale per token per 128 elements of K.
enum class Fp8Act : int { tensor = 0, token, static_scale };

// Order of W1's rows (spec w1_layout=): [up; gate] halves, [gate; up] halves, or rows
// alternating gate, up (gpt-oss: row 2j is gate j, row 2j+1 is up j).
enum class W1Layout : int { up_gate = 0, gate_up, interleaved };

// Eight 16-bit elements: the unit of every global load of 16-bit x, W1, W2 and intermediate.
struct alignas(16) Vec16 {
    u32 w[4];
};

// Four 16-bit outputs stored at once (8 bytes), and four fp32 values (16 bytes).
struct alignas(8) Vec8 {
    u32 w[2];
};

struct alignas(16) Float4 {
    float v[4];
};

// ---- bf16 ---------------------------------------------------------------------------------

__device__ __forceinline__ float bf16_to_float(u16 h)
{
    return __uint_as_float(static_cast<u32>(h) << 16);
}

// Round to nearest, ties to even, in integer code; a NaN stays a NaN (quiet, sign kept)
// instead of rounding up into an infinity; overflow rounds to infinity as IEEE says.
__device__ __forceinline__ u16 float_to_bf16(float f)
{
    u32 bits = __float_as_uint(f);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<u16>((bits >> 16) | 0x0040u);
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return static_cast<u16>(bits >> 16);
}

// ---- fp16 (PTX conversions exist on every arch this backend targets) -----------------------

__device__ __forceinline__ float fp16_to_float(u16 h)
{
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

__device__ __forceinline__ u16 float_to_fp16(float f)
{
    u16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

// ---- dtype-generic -----------------------------------------------------------------------

template <Dtype D>
__device__ __forceinline__ float to_float(u16 h)
{
    static_assert(D == Dtype::bf16 || D == Dtype::fp16, "16-bit storage is bf16 or fp16");
    if constexpr (D == Dtype::bf16) return bf16_to_float(h);
    else return fp16_to_float(h);
}

template <Dtype D>
__device__ __forceinline__ u16 from_float(float f)
{
    static_assert(D == Dtype::bf16 || D == Dtype::fp16, "16-bit storage is bf16 or fp16");
    if constexpr (D == Dtype::bf16) return float_to_bf16(f);
    else return float_to_fp16(f);
}

// Two fp32 values rounded to the dtype in ONE conversion (cvt.rn.{bf16,f16}x2.f32, sm_80+), lo
// in the low half: the bits of pack2(from_float<D>(lo), from_float<D>(hi)) for every finite
// value and infinity (both round to nearest, ties to even, subnormals kept); a NaN comes out
// as the canonical NaN. For epilogues that store many values (GEMM2's y): one instruction
// where from_float's integer rounding takes about six per value.
template <Dtype D>
__device__ __forceinline__ u32 pack2_rn(float lo, float hi)
{
    static_assert(D == Dtype::bf16 || D == Dtype::fp16, "16-bit storage is bf16 or fp16");
    u32 r;
    if constexpr (D == Dtype::bf16) asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    else asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

// Element i (0..7) of a Vec16 holding eight 16-bit values, low half first (little endian).
__device__ __forceinline__ u16 vec16_elem(const Vec16 &v, int i)
{
    return static_cast<u16>(v.w[i >> 1] >> ((i & 1) * 16));
}

__device__ __forceinline__ u32 pack2(u16 lo, u16 hi)
{
    return static_cast<u32>(lo) | (static_cast<u32>(hi) << 16);
}

// ---- memory ------------------------------------------------------------------------------

// 16-byte load through the read-only (non-coherent) path. Only for data no thread of the
// running kernel writes: x, W1, W2, and the intermediate that an EARLIER kernel wrote (the
// non-coherent cache does not outlive a launch). Not volatile: the compiler may schedule it
// freely because the data cannot change under it. The address must be 16-byte aligned
// (launch.c checks the base pointers; H and I multiples of 8 keep every row start aligned).
__device__ __forceinline__ Vec16 ld_nc_16(const void *p)
{
    Vec16 v;
    asm("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.w[0]), "=r"(v.w[1]), "=r"(v.w[2]), "=r"(v.w[3])
                 : "l"(p));
    return v;
}

// 8-byte and 4-byte loads through the same path (eight e4m3 / eight 4-bit elements); the
// address must be 8- / 4-byte aligned.
__device__ __forceinline__ void ld_nc_8(const void *p, u32 *w0, u32 *w1)
{
    asm("ld.global.nc.v2.u32 {%0, %1}, [%2];" : "=r"(*w0), "=r"(*w1) : "l"(p));
}

__device__ __forceinline__ u32 ld_nc_4(const void *p)
{
    u32 w;
    asm("ld.global.nc.u32 %0, [%1];" : "=r"(w) : "l"(p));
    return w;
}

__device__ __forceinline__ Vec16 vec16_zero()
{
    Vec16 v;
    v.w[0] = v.w[1] = v.w[2] = v.w[3] = 0u;
    return v;
}

__device__ __forceinline__ float neg_inf() { return __uint_as_float(0xff800000u); }

} // namespace mj
