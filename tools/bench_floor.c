/*
 * This file contains the roofline floor of `moejit bench layer` and the count of the experts a
 * benchmark input set routes to (bench_floor.h says why the count comes from the inputs).
 */
#include "tools/bench_floor.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "reference/reference.h"
#include "core/spec.h"

double bench_uniform_experts(int E, int k, long long B)
{
    if (B <= 0 || E <= 0) return 0.0;
    return E * (1.0 - pow(1.0 - (double)k / (double)E, (double)B));
}

moejit_status bench_routed_experts(const float *logits, long long B, int E, int k, int *experts)
{
    *experts = 0;
    if (E < 1 || E > MJ_REF_MAX_EXPERTS || k < 1 || k > E || k > MJ_REF_MAX_TOPK || B < 0)
        return MOEJIT_ERR_INVALID_ARGUMENT;
    /* the reference's routing, so that the count follows the kernels' selection rule */
    mj_ref_layer L;
    memset(&L, 0, sizeof L);
    L.num_tokens = B, L.hidden = 1, L.inter = 1, L.num_experts = E, L.topk = k;
    L.routing = MJ_ROUTING_RENORMALIZE;
    L.router_logits = logits;
    unsigned char *seen = calloc((size_t)E, 1);
    if (!seen) return MOEJIT_ERR_OUT_OF_MEMORY;
    int32_t ids[MJ_REF_MAX_TOPK];
    double weights[MJ_REF_MAX_TOPK];
    moejit_status st = MOEJIT_OK;
    int n = 0;
    for (long long t = 0; t < B && st == MOEJIT_OK; t++) {
        st = mj_ref_route_token(&L, t, ids, weights);
        for (int j = 0; j < k && st == MOEJIT_OK; j++)
            if (ids[j] >= 0 && ids[j] < E && !seen[ids[j]]) seen[ids[j]] = 1, n++;
    }
    free(seen);
    if (st == MOEJIT_OK) *experts = n;
    return st;
}

static double scale_blocks(int N, int K, int block)
{
    return (double)((N + block - 1) / block) * (double)((K + block - 1) / block);
}

double bench_expert_weight_bytes(int H, int I, int gated, double elem_bytes, int scale_block)
{
    const int rows1 = gated ? 2 * I : I;
    const double weights = ((double)rows1 + I) * H * elem_bytes;
    if (scale_block < 0) return weights;
    if (scale_block == 0) return weights + 2.0 * 4.0; /* one fp32 per matrix */
    return weights + 4.0 * (scale_blocks(rows1, H, scale_block) + scale_blocks(H, I, scale_block));
}

bench_floor bench_floor_of(int H, int I, int E, int k, int gated, long long B, double e_read, double expert_bytes,
                           double bw, double peak)
{
    bench_floor f;
    const double rows = (gated ? 2.0 : 1.0) * I + I; /* W1's rows and W2's columns per expert */
    f.e_uniform = bench_uniform_experts(E, k, B);
    f.e_read = e_read;
    f.weight_bytes = e_read * expert_bytes;
    f.flops = 2.0 * (double)B * k * rows * H;
    const double t_bw = f.weight_bytes / (bw * 1e12), t_fl = f.flops / (peak * 1e12);
    f.floor_us = 1e6 * (t_bw > t_fl ? t_bw : t_fl);
    return f;
}
