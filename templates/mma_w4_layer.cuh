// This file contains the `mma` layer for 4-bit weights (quant w4a16, mxfp4): the 16-bit layer
// (mma_layer.cuh, every kernel in its table order) with its four GEMMs on the 4-bit mainloop
// (mma_w4_gemm.cuh), the persistent decode layer's included. Route, offsets, scatter, the
// fused decode routing, the GEMM1 blocks that route for themselves and finalize are unchanged;
// the batch-1 GEMM2 + finalize and the persistent layer's shallow blocks are 16-bit only, so
// their entries are empty here and the launch plan never takes them for a 4-bit layer
// (runtime/gemm_plan.c).
//
// The generated source defines, besides the 16-bit layer's constants of namespace mj::cfg,
// kQuant (Quant::w4a16 or Quant::mxfp4), kInt4Group and kInt4Zero.
#pragma once

#define MJ_TC_W4 1
#include "common/layer_config.cuh"
#include "mma_w4_gemm.cuh"

namespace mj {
namespace tc_layer {
using namespace mj::cfg;
// The weight format of every GEMM of this layer, and of the persistent decode kernel's.
using W4 = W4Format<kQuant, kDtype, kInt4Group, kInt4Zero>;
using W4Lean = W4Format<kQuant, kDtype, kInt4Group, kInt4Zero, true>;
} // namespace tc_layer
} // namespace mj

#include "mma_layer.cuh"
