/*
 * This file contains the launch side of the fp8 layers of the tensor-core family (backend=wgmma,
 * templates/wgmma_fp8.cuh): the checks of their scales and shapes, and the amax words their
 * kernels exchange in the workspace (launch_tc_fp8.h).
 */
#include "runtime/launch_tc_fp8.h"

#include <stdint.h>

#include "core/status.h"
#include "templates/common/params.h"

int mj_tc_is_fp8(const moejit_spec *spec)
{
    return spec->quant == MJ_QUANT_FP8_TENSOR || spec->quant == MJ_QUANT_FP8_BLOCK;
}

/* fp8_tensor's H and I: the weight rows are 1-byte TMA rows, whose stride must be a multiple
 * of 16 bytes, and each producer lane quantizes 16 consecutive values. */
#define MJ_TC_FP8_TENSOR_DIM 16

moejit_status mj_tc_fp8_check_shape(const moejit_spec *spec, const moejit_moe_args *a)
{
    if (!mj_tc_is_fp8(spec)) return MOEJIT_OK;
    const char *q = mj_quant_names[spec->quant];
    const int64_t dims[2] = {a->hidden, a->inter};
    static const char *const dim_names[2] = {"hidden", "inter"};
    for (int i = 0; i < 2; i++)
        if (dims[i] % MJ_TC_FP8_TENSOR_DIM)
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                           "args.%s: must be a multiple of %d for quant=%s on backend %s (1-byte weight rows "
                           "loaded by TMA in 16-byte units), got %lld",
                           dim_names[i], MJ_TC_FP8_TENSOR_DIM, q, mj_backend_names[spec->backend],
                           (long long)dims[i]);
    return MOEJIT_OK;
}

void mj_tc_fp8_layout(const moejit_spec *spec, const moejit_moe_args *a, mj_ws_layout *w)
{
    if (!mj_tc_is_fp8(spec) || a->num_tokens == 0) return;
    const size_t T = (size_t)a->num_tokens, pairs = T * (size_t)a->topk, H = (size_t)a->hidden, I = (size_t)a->inter;
    const int block = spec->quant == MJ_QUANT_FP8_BLOCK, token = !block && spec->fp8_act == MJ_FP8_ACT_TOKEN;
    const int stat = !block && spec->fp8_act == MJ_FP8_ACT_STATIC;
    size_t at = w->total;
    if (!stat) { /* x quantized by the route kernel (block, token) or the scatter kernel (tensor) */
        w->xq = at;
        at = mj_launch_align_up(at + T * H);
    }
    if (!stat) { /* x's scales: per 128 of H, per token, or each token's amax and then the scale */
        w->xscale = at;
        at = mj_launch_align_up(at + 4 * (block ? T * (H / MJ_FP8_BLOCK) : token ? T : T + 1));
    }
    if (block) { /* the intermediate quantized by GEMM1's epilogue */
        w->interq = at;
        at = mj_launch_align_up(at + pairs * I);
    }
    w->interscale = at; /* its scales per 128 of I, or its amax words */
    at = mj_launch_align_up(at + 4 * (block ? pairs * (I / MJ_FP8_BLOCK) : token ? pairs : 1));
    w->total = at;
}

int mj_tc_fp8_scatter_quantizes_x(const moejit_spec *spec)
{
    return spec->quant == MJ_QUANT_FP8_TENSOR && spec->fp8_act == MJ_FP8_ACT_TENSOR;
}

/* Four rows of x per warp of a scatter block (templates/tc_fp8_quant.cuh strides over the
 * grid's warps whatever its size). */
int64_t mj_tc_fp8_x_blocks(int64_t T)
{
    const int64_t rows = 4 * (MJ_SIMT_SCATTER_THREADS / 32);
    return T > 0 ? (T + rows - 1) / rows : 1;
}
