/*
 * This file contains the device side of one GPU-suite case: uploading every tensor the
 * spec's format needs (device bytes from tests/lib/quant_ref.c, scales, zero points, biases,
 * the selection bias, overrides, a static x scale) into moejit_moe_args, and one run with
 * poisoned outputs, eager or through a captured CUDA graph. Every driver call is checked.
 */
#include <stdlib.h>
#include <string.h>

#include "core/halfconv.h"
#include "core/status.h"
#include "suite.h"

void device_free(const mj_gpu *g, device_case *d)
{
    for (int i = 0; i < B_COUNT; i++) {
        mj_gpu_free(g, d->p[i]);
        d->p[i] = 0;
    }
}

static moejit_status up(const mj_gpu *g, const void *src, size_t bytes, CUdeviceptr *out)
{
    moejit_status st = mj_gpu_alloc(g, bytes, out);
    return st ? st : mj_gpu_upload(g, *out, src, bytes);
}

static const void *dp(CUdeviceptr p)
{
    return (const void *)(uintptr_t)p;
}

moejit_moe_args shape_args(const shape *s)
{
    return (moejit_moe_args){.struct_size = sizeof(moejit_moe_args), .num_tokens = s->T, .hidden = s->H,
                             .inter = s->I, .num_experts = s->E, .topk = s->k, .expert_offset = s->offset,
                             .num_local_experts = s->local};
}

moejit_status device_upload(const mj_gpu *g, const entry *e, const case_data *c, device_case *d)
{
    memset(d, 0, sizeof *d);
    const moejit_spec *sp = e->spec;
    const shape *s = &c->c.s;
    int64_t T = s->T, H = s->H, E = s->E, k = s->k;
    mj_dtype dt = sp->dtype;
    moejit_status st;
    CUdeviceptr *p = d->p;
    if (static_x(sp)) {
        uint8_t *q = malloc((size_t)(T * H) + 1);
        if (!q)
            return mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "suite: out of host memory");
        mj_qref_fp8_encode(c->x, (size_t)(T * H), STATIC_X_SCALE, q);
        float xs = (float)STATIC_X_SCALE;
        st = up(g, q, (size_t)(T * H), &p[B_X]);
        free(q);
        if (st || (st = up(g, &xs, sizeof xs, &p[B_XSCALE])))
            return st;
    } else if ((st = mj_gpu_upload_values(g, c->x, (size_t)(T * H), dt, &p[B_X]))) {
        return st;
    }
    if ((st = up(g, c->w1.data, c->w1.data_bytes, &p[B_W1])) ||
        (st = up(g, c->w2.data, c->w2.data_bytes, &p[B_W2])))
        return st;
    if (c->w1.scale && ((st = up(g, c->w1.scale, c->w1.scale_bytes, &p[B_W1S])) ||
                        (st = up(g, c->w2.scale, c->w2.scale_bytes, &p[B_W2S]))))
        return st;
    if (c->w1.zero && ((st = up(g, c->w1.zero, c->w1.zero_bytes, &p[B_W1Z])) ||
                       (st = up(g, c->w2.zero, c->w2.zero_bytes, &p[B_W2Z]))))
        return st;
    if (c->b1 && (st = mj_gpu_upload_values(g, c->b1, (size_t)(c->local * c->rows), dt, &p[B_B1])))
        return st;
    if (c->b2 && (st = mj_gpu_upload_values(g, c->b2, (size_t)(c->local * H), dt, &p[B_B2])))
        return st;
    for (int i = 0; i < MJ_ACT_MAX_PARAMS; i++)
        if (c->act_param[i] &&
            (st = mj_gpu_upload_values(g, c->act_param[i], (size_t)c->local, MJ_DTYPE_FP32, &p[B_AP0 + i])))
            return st;
    int pre = sp->routing == MJ_ROUTING_PRECOMPUTED;
    if (pre) {
        if ((st = mj_gpu_upload_values(g, c->topk_weights, (size_t)(T * k), MJ_DTYPE_FP32, &p[B_WEIGHTS])) ||
            (st = up(g, c->topk_ids, sizeof(int32_t) * (size_t)(T * k), &p[B_IDS])))
            return st;
    } else if ((st = mj_gpu_upload_values(g, c->logits, (size_t)(T * E), sp->logits_dtype, &p[B_LOGITS]))) {
        return st;
    }
    int rb = sp->routing == MJ_ROUTING_DEEPSEEK_V3 && c->c.routing_bias;
    if (rb && (st = mj_gpu_upload_values(g, c->rbias, (size_t)E, MJ_DTYPE_FP32, &p[B_RBIAS])))
        return st;
    d->out_bytes = (size_t)(T * H) * mj_half_dtype_size(dt);
    if ((st = mj_gpu_alloc(g, d->out_bytes + GUARD_BYTES, &p[B_OUT])))
        return st;
    moejit_moe_args *a = &d->args;
    *a = shape_args(s);
    a->x = dp(p[B_X]), a->router_logits = pre ? NULL : dp(p[B_LOGITS]);
    a->topk_ids = pre ? (const int32_t *)dp(p[B_IDS]) : NULL;
    a->topk_weights = pre ? (const float *)dp(p[B_WEIGHTS]) : NULL;
    a->routing_bias = rb ? (const float *)dp(p[B_RBIAS]) : NULL;
    a->w1 = dp(p[B_W1]), a->w2 = dp(p[B_W2]);
    a->b1 = c->b1 ? dp(p[B_B1]) : NULL, a->b2 = c->b2 ? dp(p[B_B2]) : NULL;
    a->w1_scale = c->w1.scale ? dp(p[B_W1S]) : NULL, a->w2_scale = c->w2.scale ? dp(p[B_W2S]) : NULL;
    a->w1_zero = c->w1.zero ? dp(p[B_W1Z]) : NULL, a->w2_zero = c->w2.zero ? dp(p[B_W2Z]) : NULL;
    a->x_scale = static_x(sp) ? (const float *)dp(p[B_XSCALE]) : NULL;
    a->out = (void *)(uintptr_t)p[B_OUT];
    for (int i = 0; i < MJ_ACT_MAX_PARAMS; i++)
        d->args.act_param[i] = c->act_param[i] ? (const float *)dp(p[B_AP0 + i]) : NULL;
    if ((st = moejit_workspace_size(e->kernel, &d->args, &d->ws_bytes)))
        return mj_fail_prefix(st, "moejit_workspace_size");
    return mj_gpu_alloc(g, d->ws_bytes, &p[B_WS]);
}

/* Poisons out (and its guard) with 0xFF and the workspace with ws_byte, then runs the layer,
 * eagerly or through a captured graph, and downloads out and the guard into host. */
moejit_status device_run(const mj_gpu *g, const entry *e, device_case *d, CUstream stream,
                                unsigned char ws_byte, int graph, unsigned char *host)
{
    moejit_status st;
    if ((st = mj_gpu_poison(g, d->p[B_OUT], 0xFF, d->out_bytes + GUARD_BYTES, stream)) ||
        (st = mj_gpu_poison(g, d->p[B_WS], ws_byte, d->ws_bytes, stream)))
        return st;
    void *ws = (void *)(uintptr_t)d->p[B_WS];
    if (!graph) {
        if ((st = moejit_moe_forward(e->kernel, &d->args, ws, d->ws_bytes, stream)))
            return mj_fail_prefix(st, "moejit_moe_forward");
    } else {
        const mj_driver *D = g->d;
        CUgraph gr = NULL;
        CUgraphExec ex = NULL;
        /* THREAD_LOCAL: the compile threads may load modules meanwhile */
        CUresult r = D->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
        if (r != CUDA_SUCCESS)
            return mj_cuda_fail(D, r, "cuStreamBeginCapture");
        st = moejit_moe_forward(e->kernel, &d->args, ws, d->ws_bytes, stream);
        if (st)
            st = mj_fail_prefix(st, "moejit_moe_forward (captured)");
        r = D->cuStreamEndCapture(stream, &gr); /* always: the stream must leave capture */
        if (!st && r != CUDA_SUCCESS)
            st = mj_cuda_fail(D, r, "cuStreamEndCapture");
        if (!st && (r = D->cuGraphInstantiate(&ex, gr, 0)) != CUDA_SUCCESS)
            st = mj_cuda_fail(D, r, "cuGraphInstantiate");
        if (!st && (r = D->cuGraphLaunch(ex, stream)) != CUDA_SUCCESS)
            st = mj_cuda_fail(D, r, "cuGraphLaunch");
        if (!st)
            st = mj_gpu_sync(g, stream);
        if (ex)
            D->cuGraphExecDestroy(ex);
        if (gr)
            D->cuGraphDestroy(gr);
        if (st)
            return st;
    }
    if ((st = mj_gpu_sync(g, stream)))
        return mj_fail_prefix(st, "after the forward");
    return mj_gpu_download(g, host, d->p[B_OUT], d->out_bytes + GUARD_BYTES);
}

int guard_intact(const unsigned char *host, size_t out_bytes)
{
    for (size_t i = 0; i < GUARD_BYTES; i++)
        if (host[out_bytes + i] != 0xFF)
            return 0;
    return 1;
}
