// This file contains what every layer (simt_layer.cuh, tc_layer_stages.cuh) reads from the
// generated configuration namespace mj::cfg in the same way: the checks of the constants all
// backends share, pinned dimensions (a compile-time constant the compiler folds; 0 means "from
// params"), the loop bounds they imply, and the activation's parameters as one value.
#pragma once

#include "act.cuh"
#include "common/params.h"
#include "common/types.cuh"

namespace mj {
namespace layer_cfg {

using namespace mj::cfg;

static_assert(kDtype == Dtype::bf16 || kDtype == Dtype::fp16, "a layer computes in bf16 or fp16");
static_assert(act_is_known(kActKind), "kActKind must be an activation ABI number of the contract");
static_assert(act_is_gated(kActKind) == kGated, "kGated must match the activation kind");
static_assert(kPinnedExperts >= 0 && kPinnedExperts <= MJ_SIMT_MAX_EXPERTS, "a pinned E must be in 1..512");
static_assert(kPinnedTopk >= 0 && kPinnedTopk <= MJ_SIMT_MAX_TOPK, "a pinned k must be in 1..32");
static_assert(kPinnedHidden % 8 == 0 && kPinnedInter % 8 == 0, "pinned H and I must be multiples of 8");
static_assert(kPinnedTopk == 0 || kPinnedExperts == 0 || kPinnedTopk <= kPinnedExperts,
              "a pinned k may not exceed a pinned E");

template <int kPinned>
__device__ __forceinline__ int dim(int runtime_value) { return kPinned ? kPinned : runtime_value; }

constexpr int kMaxE = kPinnedExperts ? kPinnedExperts : MJ_SIMT_MAX_EXPERTS;
constexpr int kMaxK = kPinnedTopk ? kPinnedTopk : MJ_SIMT_MAX_TOPK;

__device__ __forceinline__ ActParams act_params()
{
    ActParams a;
    a.v[0] = kActParam0;
    a.v[1] = kActParam1;
    a.v[2] = kActParam2;
    a.present[0] = kActPresent0;
    a.present[1] = kActPresent1;
    a.present[2] = kActPresent2;
    return a;
}

} // namespace layer_cfg
} // namespace mj
