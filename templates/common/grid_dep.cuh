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
//                       stacked on the first ones to free up (mma_gemm1_act.cuh).
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

} // namespace mj
