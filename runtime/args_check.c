/*
 * This file contains the shape checks of a forward's arguments (args_check.h), shared by every
 * backend's launcher before it sizes a workspace or enqueues anything.
 */
#include "runtime/args_check.h"

#include <stdint.h>
#include <stdio.h>

#include "core/activation.h"
#include "core/strbuf.h"

#include "core/status.h"
#include "runtime/launch_common.h"
#include "templates/common/params.h"

/* H and I against the scale groups of the weight format (a group never straddles a row). */
static moejit_status check_format_shape(const moejit_spec *spec, const moejit_moe_args *a)
{
    int64_t m = 8;
    const char *why = NULL;
    char buf[96];
    switch (spec->quant) {
    case MJ_QUANT_FP8_BLOCK:
        m = MJ_FP8_BLOCK;
        why = "quant=fp8_block scales 128x128 weight blocks and 1x128 activation groups";
        break;
    case MJ_QUANT_W4A16:
        m = spec->zero_point ? 2 * spec->group_size : spec->group_size;
        snprintf(buf, sizeof buf, "quant=w4a16 has one scale per %d along K%s", spec->group_size,
                 spec->zero_point ? ", and two 4-bit zero points per byte" : "");
        why = buf;
        break;
    case MJ_QUANT_MXFP4:
        m = MJ_MXFP4_GROUP;
        why = "quant=mxfp4 has one e8m0 scale per 32 along K";
        break;
    default: return MOEJIT_OK;
    }
    if (a->hidden % m)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "args.hidden: must be a multiple of %lld (%s), got %lld",
                       (long long)m, why, (long long)a->hidden);
    if (a->inter % m)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "args.inter: must be a multiple of %lld (%s), got %lld",
                       (long long)m, why, (long long)a->inter);
    return MOEJIT_OK;
}

/* The routing methods' own rules on E and k. */
static moejit_status check_routing_shape(const moejit_spec *spec, const moejit_moe_args *a)
{
    if (spec->routing == MJ_ROUTING_LLAMA4 && a->topk != 1)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "args.topk: routing=llama4 is top-1, must be 1, got %lld",
                       (long long)a->topk);
    if (spec->routing != MJ_ROUTING_DEEPSEEK_V3) return MOEJIT_OK;
    if (spec->n_group > a->num_experts || a->num_experts % spec->n_group)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "args.num_experts: routing=deepseek_v3 needs num_experts divisible by n_group (%d), "
                       "got %lld",
                       spec->n_group, (long long)a->num_experts);
    int64_t eligible = (int64_t)spec->topk_group * (a->num_experts / spec->n_group);
    if (a->topk > eligible)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "args.topk: routing=deepseek_v3 chooses among topk_group x num_experts/n_group = "
                       "%d x %lld = %lld experts, got %lld",
                       spec->topk_group, (long long)(a->num_experts / spec->n_group), (long long)eligible,
                       (long long)a->topk);
    return MOEJIT_OK;
}

moejit_status mj_launch_check_shape(const moejit_spec *spec, const moejit_moe_args *a)
{
    if (!spec || !a) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "args: spec and args must not be NULL");
    if (a->hidden <= 0 || a->hidden % 8 || a->hidden > MJ_SIMT_MAX_DIM)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "args.hidden: must be a positive multiple of 8 up to %d, got %lld",
                       MJ_SIMT_MAX_DIM, (long long)a->hidden);
    if (a->inter <= 0 || a->inter % 8 || a->inter > MJ_SIMT_MAX_DIM)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "args.inter: must be a positive multiple of 8 up to %d, got %lld",
                       MJ_SIMT_MAX_DIM, (long long)a->inter);
    if (a->num_experts < 1 || a->num_experts > MJ_SIMT_MAX_EXPERTS)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "args.num_experts: must be in 1..%d, got %lld",
                       MJ_SIMT_MAX_EXPERTS, (long long)a->num_experts);
    int64_t kmax = a->num_experts < MJ_SIMT_MAX_TOPK ? a->num_experts : MJ_SIMT_MAX_TOPK;
    if (a->topk < 1 || a->topk > kmax)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "args.topk: must be in 1..min(%d, num_experts) = 1..%lld, got %lld",
                       MJ_SIMT_MAX_TOPK, (long long)kmax, (long long)a->topk);
    if (a->num_tokens < 0)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "args.num_tokens: must be >= 0, got %lld",
                       (long long)a->num_tokens);
    if (a->num_tokens > INT32_MAX / a->topk)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "args.num_tokens: num_tokens * topk must be at most %d (32-bit row indices), "
                       "got %lld * %lld",
                       INT32_MAX, (long long)a->num_tokens, (long long)a->topk);
    if (a->expert_offset < 0 || a->expert_offset >= a->num_experts)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "args.expert_offset: must be in 0..num_experts-1 = 0..%lld, got %lld",
                       (long long)a->num_experts - 1, (long long)a->expert_offset);
    if (a->num_local_experts < 0 || a->num_local_experts > a->num_experts)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "args.num_local_experts: must be in 0..num_experts = 0..%lld (0 = all), got %lld",
                       (long long)a->num_experts, (long long)a->num_local_experts);
    if (a->expert_offset + mj_launch_local_experts(a) > a->num_experts)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "args.num_local_experts: expert_offset + num_local_experts must be <= "
                       "num_experts = %lld (0 means all experts, which needs offset 0), got %lld + %lld",
                       (long long)a->num_experts, (long long)a->expert_offset,
                       (long long)a->num_local_experts);
    moejit_status st = check_format_shape(spec, a);
    if (st != MOEJIT_OK) return st;
    st = check_routing_shape(spec, a);
    if (st != MOEJIT_OK) return st;
    static const char *const pin_name[4] = {"hidden", "inter", "num_experts", "topk"};
    const int pinned[4] = {spec->hidden, spec->inter, spec->experts, spec->topk};
    const int64_t given[4] = {a->hidden, a->inter, a->num_experts, a->topk};
    for (int i = 0; i < 4; i++)
        if (pinned[i] && pinned[i] != given[i])
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                           "args.%s: the spec pins it to %d, got %lld", pin_name[i], pinned[i],
                           (long long)given[i]);
    return MOEJIT_OK;
}

moejit_status mj_check_ptr_rules(const mj_ptr_rule *r, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (r[i].need == MJ_ARG_IGNORED) continue;
        if (r[i].need == MJ_ARG_REFUSED) {
            if (r[i].p)
                return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "args.%s: must be NULL: %s", r[i].name, r[i].why);
            continue;
        }
        if (!r[i].p) {
            if (r[i].need == MJ_ARG_OPTIONAL) continue;
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "args.%s: must not be NULL (%s)", r[i].name, r[i].why);
        }
        if ((uintptr_t)r[i].p % r[i].align)
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "args.%s: must be %zu-byte aligned (%s), got %p",
                           r[i].name, r[i].align, r[i].why, r[i].p);
    }
    return MOEJIT_OK;
}

moejit_status mj_launch_check_format_inputs(const moejit_spec *spec, const moejit_moe_args *a)
{
    const mj_quant q = spec->quant;
    const int scaled = q != MJ_QUANT_BF16 && q != MJ_QUANT_FP16;
    const size_t scale_align = q == MJ_QUANT_W4A16 ? 2 : q == MJ_QUANT_MXFP4 ? 1 : 4;
    const char *scale_why = q == MJ_QUANT_FP8_TENSOR  ? "quant=fp8_tensor: fp32 [E_local] per matrix"
                            : q == MJ_QUANT_FP8_BLOCK ? "quant=fp8_block: fp32 [E_local, N/128, K/128]"
                            : q == MJ_QUANT_W4A16     ? "quant=w4a16: dtype [E_local, N, K/group]"
                            : q == MJ_QUANT_MXFP4     ? "quant=mxfp4: e8m0 bytes [E_local, N, K/32]"
                                                      : "bf16/fp16 weights have no scales";
    const int zero = q == MJ_QUANT_W4A16 && spec->zero_point;
    const char *zero_why = zero                      ? "quant=w4a16 with zero_point=1: u8 [E_local, N, K/group/2]"
                           : q == MJ_QUANT_MXFP4     ? "quant=mxfp4 has no zero points"
                           : q == MJ_QUANT_W4A16     ? "the spec has zero_point=0 (every zero point is 8)"
                                                     : "only w4a16 with zero_point=1 has zero points";
    const int b1 = spec->bias == MJ_BIAS_B1 || spec->bias == MJ_BIAS_BOTH;
    const int b2 = spec->bias == MJ_BIAS_B2 || spec->bias == MJ_BIAS_BOTH;
    const int stat = q == MJ_QUANT_FP8_TENSOR && spec->fp8_act == MJ_FP8_ACT_STATIC;
    const mj_ptr_rule rules[] = {
        {a->w1_scale, "w1_scale", scaled ? MJ_ARG_REQUIRED : MJ_ARG_REFUSED, scale_align, scale_why},
        {a->w2_scale, "w2_scale", scaled ? MJ_ARG_REQUIRED : MJ_ARG_REFUSED, scale_align, scale_why},
        {a->w1_zero, "w1_zero", zero ? MJ_ARG_REQUIRED : MJ_ARG_REFUSED, 1, zero_why},
        {a->w2_zero, "w2_zero", zero ? MJ_ARG_REQUIRED : MJ_ARG_REFUSED, 1, zero_why},
        {a->b1, "b1", b1 ? MJ_ARG_REQUIRED : MJ_ARG_REFUSED, 2, b1 ? "the spec has bias b1 or both: dtype [E_local, rows]" : "the spec has no bias b1"},
        {a->b2, "b2", b2 ? MJ_ARG_REQUIRED : MJ_ARG_REFUSED, 2, b2 ? "the spec has bias b2 or both: dtype [E_local, H]" : "the spec has no bias b2"},
        {a->routing_bias, "routing_bias", spec->routing == MJ_ROUTING_DEEPSEEK_V3 ? MJ_ARG_OPTIONAL : MJ_ARG_REFUSED, 4,
         spec->routing == MJ_ROUTING_DEEPSEEK_V3 ? "fp32 [num_experts]"
                                                 : "only deepseek_v3 routing has a selection bias"},
        {a->x_scale, "x_scale", stat && a->num_tokens > 0 ? MJ_ARG_REQUIRED : stat ? MJ_ARG_OPTIONAL : MJ_ARG_REFUSED, 4,
         stat ? "quant=fp8_tensor with fp8_act=static: the fp32 dequant scale of x"
              : "only quant=fp8_tensor with fp8_act=static takes a static x scale"},
    };
    moejit_status st = mj_check_ptr_rules(rules, sizeof rules / sizeof rules[0]);
    if (st != MOEJIT_OK) return st;

    /* Per-expert activation overrides: one per declared parameter, none past them. */
    const mj_act_desc *d = mj_act_desc_of(spec->act.kind);
    for (int i = 0; i < MJ_ACT_MAX_PARAMS; i++) {
        const void *ov = a->act_param[i];
        if (!ov) continue;
        if (!d || d->n_params == 0)
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                           "args.act_param[%d]: must be NULL: activation %s has no parameters to override",
                           i, d ? d->name : "?");
        if (i >= d->n_params) {
            mj_buf b = MJ_BUF_INIT;
            for (int j = 0; j < d->n_params; j++) mj_buf_printf(&b, "%s%d (%s)", j ? ", " : "", j, d->params[j].name);
            moejit_status f = mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                                      "args.act_param[%d]: must be NULL: activation %s has %d parameter%s; "
                                      "allowed indices: %s",
                                      i, d->name, d->n_params, d->n_params == 1 ? "" : "s",
                                      b.data ? b.data : "");
            mj_buf_free(&b);
            return f;
        }
        if ((uintptr_t)ov % 4)
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                           "args.act_param[%d]: must be 4-byte aligned (fp32 [E_local] values of %s), got %p",
                           i, d->params[i].name, ov);
    }
    return MOEJIT_OK;
}

moejit_status mj_launch_check_w4_shape(const moejit_spec *spec, const moejit_moe_args *a)
{
    if (!spec || !a) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "args: spec and args must not be NULL");
    if (!mj_quant_is_4bit(spec->quant)) return MOEJIT_OK;
    /* a packed row is K/2 bytes and its chunks are copied 16 bytes at a time */
    if (a->hidden % 32 || a->inter % 32)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "args.%s: must be a multiple of 32 (rows of 4-bit weights copied in 16-byte chunks), got %lld",
                       a->hidden % 32 ? "hidden" : "inter", (long long)(a->hidden % 32 ? a->hidden : a->inter));
    return MOEJIT_OK;
}
