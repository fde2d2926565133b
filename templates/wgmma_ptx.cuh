// This file contains the sm_90a PTX the `wgmma` backend is built from, each wrapped once:
// mbarriers (init, arrive, arrive with an expected transaction count, parity wait), the
// cp.async arrive that makes a barrier track a thread's 16-byte copies, the 3-D TMA tile load
// (cp.async.bulk.tensor) completing on a barrier, alone or multicast to a cluster, the cluster
// special registers, barrier and address mapping, the shared-memory matrix descriptor of a
// 128B-swizzled K-major operand, wgmma.mma_async m64n128k16 / m64n256k16 with fp32 accumulators and its
// fence / commit / wait, and setmaxnreg.
//
// NOTES: the descriptors are built at run time from shared-memory addresses (NVRTC 13.0 once
// crashed on a wgmma whose descriptors were compile-time zero). A tensor map lives in the
// kernel's parameter space (__grid_constant__), and TMA takes its generic address.
#pragma once

#include "common/types.cuh"

namespace mj {

// A CUtensorMap as the kernel sees it: 128 opaque bytes, 64-byte aligned (cuda.h's layout;
// the toolkit headers are not available to NVRTC here).
struct alignas(64) TmaDesc {
    u64 opaque[16];
};
static_assert(sizeof(TmaDesc) == 128, "a CUtensorMap is 128 bytes");

// ---- mbarrier --------------------------------------------------------------------------------

__device__ __forceinline__ void mbar_init(u32 bar, u32 count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_arrive(u32 bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

// One arrival that also raises the phase's expected transaction bytes (the TMA loads that
// follow count them down as they land).
__device__ __forceinline__ void mbar_arrive_expect_tx(u32 bar, u32 bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
                 : "memory");
}

// Spins until the phase of parity `parity` has completed (a fresh barrier counts its
// "previous" phase, parity 1, as completed: producers start waiting on the empty barriers
// with parity 1 and pass at once).
__device__ __forceinline__ void mbar_wait(u32 bar, u32 parity)
{
    // The spin is inside the asm (its labels are local to the braces): a C++ loop here would
    // be a divergent path to the compiler, and ptxas serialises wgmmas that follow one.
    asm volatile("{\n .reg .pred p;\n"
                 "MJ_WAIT:\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
                 " @!p bra MJ_WAIT;\n}\n" ::"r"(bar),
                 "r"(parity)
                 : "memory");
}

// The barrier counts one arrival of this thread once all of its earlier cp.async copies have
// landed (.noinc: that arrival is one of the count the barrier was initialised with).
__device__ __forceinline__ void cp_async_arrive_noinc(u32 bar)
{
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}

__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

// Generic-proxy shared-memory writes (cp.async, ordinary stores) ordered before the async
// proxy's reads (wgmma, TMA), and barrier initialisation made visible to the copy engine.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// ---- TMA -------------------------------------------------------------------------------------

__device__ __forceinline__ void tma_prefetch_desc(const TmaDesc *desc)
{
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<u64>(desc)) : "memory");
}

// The box at (c0, c1, c2) of a 3-D tensor map into shared memory at dst; completes (bytes)
// on bar. Out-of-bounds elements land as zeros and still count.
__device__ __forceinline__ void tma_load_3d(u32 dst, const TmaDesc *desc, int c0, int c1, int c2, u32 bar)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(dst),
                 "l"(reinterpret_cast<u64>(desc)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
                 : "memory");
}

// The same box into shared memory at dst of every CTA of the cluster in cta_mask, each
// completing (bytes) on the barrier at bar in its own shared memory (dst and bar are this
// CTA's addresses; the copy engine applies them in every destination CTA).
__device__ __forceinline__ void tma_load_3d_multicast(u32 dst, const TmaDesc *desc, int c0, int c1, int c2, u32 bar,
                                                      u16 cta_mask)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%2, %3, %4}], [%5], %6;\n" ::"r"(dst),
                 "l"(reinterpret_cast<u64>(desc)), "r"(c0), "r"(c1), "r"(c2), "r"(bar), "h"(cta_mask)
                 : "memory");
}

// ---- clusters ----------------------------------------------------------------------------------

// This CTA's rank in its cluster, the cluster's index in the grid, and the number of clusters.
__device__ __forceinline__ u32 cluster_ctarank()
{
    u32 r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}
__device__ __forceinline__ u32 cluster_id_x()
{
    u32 r;
    asm volatile("mov.u32 %0, %%clusterid.x;\n" : "=r"(r));
    return r;
}
__device__ __forceinline__ u32 cluster_count_x()
{
    u32 r;
    asm volatile("mov.u32 %0, %%nclusterid.x;\n" : "=r"(r));
    return r;
}

// Every thread of every CTA of the cluster arrives, then waits for all: what one CTA wrote
// before (barrier initialisation included) is visible to the others after.
__device__ __forceinline__ void cluster_sync()
{
    asm volatile("barrier.cluster.arrive.release;\n"
                 "barrier.cluster.wait.acquire;\n" ::
                     : "memory");
}

// The address of this CTA's shared-memory location addr in the shared memory of cluster CTA
// `rank` (a shared::cluster address).
__device__ __forceinline__ u32 cluster_map_shared(u32 addr, u32 rank)
{
    u32 r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(addr), "r"(rank));
    return r;
}

// One arrival on a barrier in another CTA of the cluster (its shared::cluster address): this
// consumer is done with the stage, which that CTA's producer refills in both CTAs. The default
// (.release.cta) semantics, as CUTLASS's ClusterBarrier: with .release.cluster ptxas puts a
// MEMBAR.ALL.GPU before every arrival, which waits for the epilogue's global stores.
__device__ __forceinline__ void mbar_arrive_cluster(u32 remote_bar)
{
    asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(remote_bar) : "memory");
}

// ---- registers -------------------------------------------------------------------------------

template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec()
{
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc()
{
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

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

#undef MJ_F16
#undef MJ_F4

} // namespace mj
