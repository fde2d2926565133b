// This file contains the PTX the tensor-core backends share, each instruction wrapped once:
// shared-memory addresses, loads and stores, cp.async (16- and 4-byte copies, groups, and the
// mbarrier arrival that tracks them), ldmatrix, mbarriers (init, arrive, arrive with an expected transaction count,
// parity wait, remote arrival), the proxy and barrier-initialisation fences, the acquire load
// of a sync word, the 3-D TMA tile load (cp.async.bulk.tensor) alone or multicast to a
// cluster, the cluster special registers, barrier, address mapping and shared-to-shared bulk
// copy, and setmaxnreg.
// The MMA instructions themselves stay with their backend (mma_mainloop.cuh, wgmma_ptx.cuh).
//
// NOTES: a tensor map lives in the kernel's parameter space (__grid_constant__), and TMA takes
// its generic address. Instructions past sm_80 (mbarrier transactions, TMA, clusters,
// setmaxnreg) are only instantiated by the sm_90a kernels that call them.
#pragma once

#include "common/types.cuh"

namespace mj {

// ---- shared memory, cp.async, ldmatrix (sm_80) -----------------------------------------------

__device__ __forceinline__ u32 smem_addr(const void *p)
{
    return static_cast<u32>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared; src_bytes 0 writes 16 zero bytes and reads nothing.
__device__ __forceinline__ void cp_async_16(u32 dst, const void *src, int src_bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes)
                 : "memory");
}

// 4 bytes global -> shared. Always a whole read: the zero-filling form (src-size 0) of this
// 4-byte copy raised an illegal address on the H200 (wgmma_fp8.cuh, wg_fp8_copy_stage).
__device__ __forceinline__ void cp_async_4(u32 dst, const void *src)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(dst), "l"(src) : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

template <int N>
__device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

__device__ __forceinline__ void st_shared_v4(u32 addr, const u32 (&q)[4])
{
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(q[0]), "r"(q[1]), "r"(q[2]),
                 "r"(q[3])
                 : "memory");
}
__device__ __forceinline__ void st_shared_u32(u32 addr, u32 v)
{
    asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}
__device__ __forceinline__ u32 ld_shared_u32(u32 addr)
{
    u32 v;
    asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(addr) : "memory");
    return v;
}
__device__ __forceinline__ void ld_shared_v4(u32 addr, u32 (&q)[4])
{
    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(q[0]), "=r"(q[1]), "=r"(q[2]), "=r"(q[3])
                 : "r"(addr)
                 : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(u32 addr, u32 &r0, u32 &r1, u32 &r2, u32 &r3)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}

// ---- global sync words -----------------------------------------------------------------------

// A load that orders this thread's later reads after it (the counterpart of a producer's
// __threadfence before its count).
__device__ __forceinline__ int load_acquire(const int *p)
{
    int v;
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
    return v;
}

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

// ---- fences ----------------------------------------------------------------------------------

// Generic-proxy shared-memory writes (cp.async, ordinary stores) ordered before the async
// proxy's reads (wgmma, TMA), and barrier initialisation made visible to the copy engine.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// Barrier initialisation made visible to the other CTAs of the cluster (and their copies).
__device__ __forceinline__ void fence_mbarrier_init()
{
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// ---- TMA -------------------------------------------------------------------------------------

// A CUtensorMap as the kernel sees it: 128 opaque bytes, 64-byte aligned (cuda.h's layout;
// the toolkit headers are not available to NVRTC here).
struct alignas(64) TmaDesc {
    u64 opaque[16];
};
static_assert(sizeof(TmaDesc) == 128, "a CUtensorMap is 128 bytes");

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

// `bytes` (a multiple of 16) of this CTA's shared memory at src into another CTA's of the
// cluster at dst, completing (bytes) on that CTA's barrier at bar (dst and bar are
// shared::cluster addresses, cluster_map_shared). The copy engine reads src: ordinary stores
// to it need fence_proxy_async first.
__device__ __forceinline__ void bulk_copy_to_cluster(u32 dst, u32 src, u32 bytes, u32 bar)
{
    asm volatile("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
                 ::"r"(dst), "r"(src), "r"(bytes), "r"(bar)
                 : "memory");
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

} // namespace mj
