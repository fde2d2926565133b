// This file contains the device side of programmatic dependent launch (PDL, sm_90 and newer),
// which the tensor-core layers use to overlap each kernel of their chain with the tail of the
// one before (runtime/launch_common.h: the launcher sets the programmatic stream
// serialization attribute on every kernel, a forward's first too unless MOEJIT_PDL=inner,
// so the first kernel's wait is what orders the forward after the stream's earlier work).
//
//   grid_dep_wait()     griddepcontrol.wait: returns once every prerequisite grid has
//                       completed and its memory is visible. A kernel calls it in every
//                       block before it reads or writes anything an earlier kernel of the
//                       chain touches; it is a no-op for a plainly launched kernel. Since
//                       each kernel waits before it can complete, a wait covers the whole
//                       chain before it, not just the kernel right before.
//   grid_dep_launch()   griddepcontrol.launch_dependents: the next kernel may be scheduled
//                       once every block of this one has executed it (or exited). Called
//                       right after the wait: all of a kernel's blocks are then placed before
//                       any block of the next, so the next cannot take an SM that this one
//                       still needs; it only fills SMs as this kernel's last wave drains.
//                       The decode GEMM1 calls it after its mainloop instead, so that the
//                       decode GEMM2's few long blocks are spread over the SMs rather than
//                       stacked on the first ones to free up (mma_gemm1_act.cuh); the routed
//                       GEMM1 before the batch-1 GEMM2 + finalize right after its wait.
//
// Before its wait a kernel may only (a) request lines into L2 (prefetch_l2_spread below),
// (b) read the layer's inputs where the kernel before it passes its own wait before it lets
// this one launch (then the inputs' producers have completed): the batch-1 GEMM2 + finalize
// routes the token and requests its W2 stages there (mma_gemm2.cuh: GridDepGate), and (c) on
// the same condition read what the chain's kernels before THAT one wrote, from L2 only
// (ld.global.cg: no line of this SM's L1 may answer for it): the wgmma GEMM2's producer, and
// GEMM1's where a scatter kernel precedes it, reads the tile table (the offsets kernel's) and
// requests its first weight stages (wgmma_gemm.cuh, pre_wait).
//
// Before sm_90 both are empty (and the launcher does not use the attribute).
#pragma once

namespace mj {

__device__ __forceinline__ void grid_dep_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void grid_dep_launch()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// Both, in the order every stage of the chain uses at its start.
__device__ __forceinline__ void grid_dep_enter()
{
    grid_dep_wait();
    grid_dep_launch();
}

// The one thing a kernel does with its inputs before its wait: requests their lines
// [base, base + bytes) into L2, spread over the grid (each line by one thread of one block).
// A prefetch returns no value, so it cannot observe a write still in flight: L2 is where
// global memory is coherent, and a later store by the kernel before updates the line there;
// it only turns the read after the wait into an L2 hit. Used by the decode layers' first
// routing kernels, whose blocks are resident while the kernel before them drains: the router
// logits and the tokens' rows of x are the first loads on their critical path (a DRAM miss
// each when the forward before streamed its weights through L2).
__device__ __forceinline__ void prefetch_l2_spread(unsigned long long base, long long bytes)
{
    if (base == 0 || bytes <= 0) return;
    const unsigned long long first = base & ~127ull;
    const long long lines = static_cast<long long>((base + bytes - first + 127) / 128);
    const long long threads = static_cast<long long>(gridDim.x) * blockDim.x;
    for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < lines; i += threads)
        asm volatile("prefetch.global.L2 [%0];\n" ::"l"(first + 128ull * static_cast<unsigned long long>(i)));
}

} // namespace mj
