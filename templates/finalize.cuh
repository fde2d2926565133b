// This file contains the finalize stage: out[t, h] = Σ_j w[t, j] · y[t, j, h] over the slots
// j = 0..k−1 routed to this rank, in that FIXED order, accumulated in fp32 and rounded once
// to the dtype. A token with no local expert gets +0. Every element of out is written.
#pragma once

#include "common/params.h"
#include "common/types.cuh"

namespace mj {

// One block per token; thread i handles columns 4i, 4i + 512, ... (4 per step).
template <Dtype D, int kMaxK>
__device__ __forceinline__ void finalize_token(const mj_layer_params &p, i64 t, int H, int k)
{
    static_assert(kMaxK >= 1 && kMaxK <= MJ_SIMT_MAX_TOPK, "k must be in 1..32");
    __shared__ int ids[kMaxK];
    __shared__ float weights[kMaxK];
    if (threadIdx.x < k) {
        ids[threadIdx.x] = reinterpret_cast<const int *>(p.ws_ids)[t * k + threadIdx.x];
        weights[threadIdx.x] = reinterpret_cast<const float *>(p.ws_weights)[t * k + threadIdx.x];
    }
    __syncthreads();

    const float *y = reinterpret_cast<const float *>(p.ws_y);
    u16 *out = reinterpret_cast<u16 *>(p.out) + t * H;
    for (int c = threadIdx.x * 4; c < H; c += MJ_SIMT_FINALIZE_THREADS * 4) {
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int j = 0; j < k; ++j) {
            if (ids[j] < 0) continue; // another rank's expert (or none): adds nothing
            const Float4 v = *reinterpret_cast<const Float4 *>(y + (t * k + j) * H + c);
            const float w = weights[j];
#pragma unroll
            for (int q = 0; q < 4; ++q) acc[q] = fmaf(w, v.v[q], acc[q]);
        }
        Vec8 o;
        o.w[0] = pack2(from_float<D>(acc[0]), from_float<D>(acc[1]));
        o.w[1] = pack2(from_float<D>(acc[2]), from_float<D>(acc[3]));
        *reinterpret_cast<Vec8 *>(out + c) = o;
    }
}

} // namespace mj
