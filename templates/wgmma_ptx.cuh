// This file contains the sm_90a warpgroup-MMA PTX of the `wgmma` backend, each wrapped once:
// the shared-memory matrix descriptor of a 128B-swizzled K-major operand, wgmma.mma_async
// m64n128k16 / m64n256k16 with fp32 accumulators, and its fence / commit / wait. The
// mbarrier, cp.async, TMA, cluster and setmaxnreg wrappers it runs with are in common/ptx.cuh.
//
// NOTES: the descriptors are built at run time from shared-memory addresses (NVRTC 13.0 once
// crashed on a wgmma whose descriptors were compile-time zero).
#pragma once

#include "common/ptx.cuh"
#include "common/types.cuh"

namespace mj {

// ---- wgmma -------------------------------------------------------------------------------------

// Shared-memory matrix descriptor of a K-major operand stored as 128-byte rows with the 128B
// swizzle (16-byte chunk c of row r at chunk c ^ (r % 8)): start address >> 4 in bits 0-13,
// stride between 8-row groups (1024 bytes) >> 4 in bits 32-45, swizzle mode 1 (128B) in bits
// 62-63; the leading offset is unused for a swizzled K-major operand. A k16 step inside the
// 64-wide row is +32 bytes on the start address: the hardware applies the XOR to the final
// address bits, which is why a stage must start on a 1024-byte boundary.
__device__ __forceinline__ u64 smem_desc_sw128(u32 addr)
{
    u64 d = static_cast<u64>((addr & 0x3ffffu) >> 4);
    d |= static_cast<u64>(1024 >> 4) << 32;
    d |= static_cast<u64>(1) << 62;
    return d;
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }

template <int N>
__device__ __forceinline__ void wgmma_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// Keeps the compiler from moving accumulator registers across wgmma issue and wait (it would
// otherwise be free to, and ptxas then serialises the wgmmas).
__device__ __forceinline__ void fence_operand(float &r) { asm volatile("" : "+f"(r)::"memory"); }

template <int N>
__device__ __forceinline__ void fence_operands(float (&d)[N])
{
#pragma unroll
    for (int i = 0; i < N; ++i) fence_operand(d[i]);
}

#define MJ_F4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define MJ_F16(i) MJ_F4(i), MJ_F4(i + 4), MJ_F4(i + 8), MJ_F4(i + 12)

// d[64 x 128 of this warpgroup] = A[64 x 16] · B[128 x 16]ᵀ (+ d when accumulate != 0), both
// K-major in shared memory (descriptors), fp32 accumulate. Register i of thread (warp w,
// lane l) of the warpgroup holds row 16w + l/4 + 8·((i/2)%2), column 8·(i/4) + 2·(l%4) + i%2.
template <Dtype D>
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], u64 desc_a, u64 desc_b, u32 accumulate)
{
    static_assert(D == Dtype::bf16 || D == Dtype::fp16, "wgmma multiplies bf16 or fp16 here");
#define MJ_WGMMA_ASM(type)                                                                           \
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %66, 0;\n"                                   \
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32." type "." type " "                    \
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "           \
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "  \
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "  \
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, " \
                 "%64, %65, p, 1, 1, 0, 0;\n"                                                        \
                 "}\n"                                                                               \
                 : MJ_F16(0), MJ_F16(16), MJ_F16(32), MJ_F16(48)                                     \
                 : "l"(desc_a), "l"(desc_b), "r"(accumulate))
    if constexpr (D == Dtype::bf16) MJ_WGMMA_ASM("bf16");
    else MJ_WGMMA_ASM("f16");
#undef MJ_WGMMA_ASM
}

// d[64 x 256 of this warpgroup] = A[64 x 16] · B[256 x 16]ᵀ (+ d when accumulate != 0), both
// K-major in shared memory (descriptors), fp32 accumulate. Register i of thread (warp w,
// lane l) of the warpgroup holds row 16w + l/4 + 8·((i/2)%2), column 8·(i/4) + 2·(l%4) + i%2.
template <Dtype D>
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], u64 desc_a, u64 desc_b, u32 accumulate)
{
    static_assert(D == Dtype::bf16 || D == Dtype::fp16, "wgmma multiplies bf16 or fp16 here");
#define MJ_WGMMA_ASM(type)                                                                           \
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %130, 0;\n"                                  \
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32." type "." type " "                    \
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "           \
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "  \
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "  \
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "  \
                 "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "  \
                 "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "  \
                 "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, "   \
                 "%110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, "     \
                 "%123, %124, %125, %126, %127}, %128, %129, p, 1, 1, 0, 0;\n"                       \
                 "}\n"                                                                               \
                 : MJ_F16(0), MJ_F16(16), MJ_F16(32), MJ_F16(48), MJ_F16(64), MJ_F16(80), MJ_F16(96), \
                   MJ_F16(112)                                                                       \
                 : "l"(desc_a), "l"(desc_b), "r"(accumulate))
    if constexpr (D == Dtype::bf16) MJ_WGMMA_ASM("bf16");
    else MJ_WGMMA_ASM("f16");
#undef MJ_WGMMA_ASM
}

// The wgmma of a tile shape's N (templates/wgmma_gemm.cuh).
template <Dtype D, int N>
__device__ __forceinline__ void wgmma_m64nNk16(float (&d)[N / 2], u64 desc_a, u64 desc_b, u32 accumulate)
{
    static_assert(N == 128 || N == 256, "the tile shapes use n128 and n256");
    if constexpr (N == 256) wgmma_m64n256k16<D>(d, desc_a, desc_b, accumulate);
    else wgmma_m64n128k16<D>(d, desc_a, desc_b, accumulate);
}

// m64n256k16 as two m64n128k16 over B's two halves (rows 0..127 and 128..255, 16 KiB apart in
// the 128B-swizzled stage), into the same registers: an output's products and sums are the
// n256 instruction's. For kernels whose launch leaves fewer than the ~154 registers ptxas
// needs to issue one n256 instruction (4 warpgroups: 128).
template <Dtype D>
__device__ __forceinline__ void wgmma_m64n256k16_as_n128(float (&d)[128], u64 desc_a, u64 desc_b, u32 accumulate)
{
    wgmma_m64n128k16<D>(*reinterpret_cast<float(*)[64]>(&d[0]), desc_a, desc_b, accumulate);
    wgmma_m64n128k16<D>(*reinterpret_cast<float(*)[64]>(&d[64]), desc_a, desc_b + (128u * 128u >> 4), accumulate);
}

// The fp8 GEMMs' MMA (wgmma_fp8.cuh): d[64 x 128] = A[64 x 32] · B[128 x 32]ᵀ (+ d when
// accumulate != 0), e4m3 x e4m3 with fp32 accumulation, both K-major in shared memory as
// 128-byte swizzled rows of 128 codes; the register layout is m64n128k16's.
__device__ __forceinline__ void wgmma_m64n128k32_e4m3(float (&d)[64], u64 desc_a, u64 desc_b, u32 accumulate)
{
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
                 "%64, %65, p, 1, 1;\n"
                 "}\n"
                 : MJ_F16(0), MJ_F16(16), MJ_F16(32), MJ_F16(48)
                 : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

#undef MJ_F16
#undef MJ_F4

} // namespace mj
