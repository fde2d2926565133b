/*
 * This file contains the code generator of the `wgmma` backend: a spec becomes a short
 * instantiation of templates/wgmma_layer.cuh — a comment with the canonical spec and the
 * kernel list, the constants of namespace mj::cfg (the names mma_layer.cuh reads, so act.cuh,
 * route.cuh and mma's decode path serve unchanged), then one include.
 *
 * The wgmma layer is sm_90a only (wgmma.mma_async and setmaxnreg exist on no other target),
 * so any other arch is refused here, naming it, before NVRTC would fail on the PTX. The
 * kernel table is mma's (common/mma_params.h); the spec's tile field (auto, large, small) has
 * mma's meaning: the launcher picks the path per forward. The bytes depend only on the spec
 * and the versions in the header comment.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "activation.h"
#include "common/mma_params.h"
#include "common/params.h"
#include "common/wgmma_params.h"
#include "emit_backends.h"
#include "spec.h"
#include "status.h"
#include "strbuf.h"

static const char *const kernel_names[MJ_MMA_NUM_KERNELS] = {MJ_MMA_KERNEL_NAME_LIST};
_Static_assert(MJ_MMA_NUM_KERNELS <= MJ_MAX_KERNELS, "the wgmma layer must fit in mj_program.kernels");

static const char *const dtype_token[MJ_DTYPE_COUNT] = {"Dtype::bf16", "Dtype::fp16", "Dtype::fp32"};
_Static_assert(MJ_DTYPE_BF16 == 0 && MJ_DTYPE_FP16 == 1 && MJ_DTYPE_FP32 == 2, "dtype_token order");

static const char *const routing_token[MJ_ROUTING_COUNT] = {
    "Routing::softmax_topk", "Routing::renormalize", "Routing::sigmoid_topk",
    "Routing::sigmoid_renorm", "Routing::deepseek_v3", "Routing::llama4", "Routing::precomputed"};
_Static_assert(MJ_ROUTING_SOFTMAX_TOPK == 0 && MJ_ROUTING_PRECOMPUTED == 6, "routing_token order");

static const char *name_or(const char *const *names, int count, int value)
{
    return value >= 0 && value < count && names[value] ? names[value] : "?";
}

/* The last line before NVRTC: each refusal names the field and what is allowed. */
static moejit_status check_emittable(const moejit_spec *s)
{
    if (s->backend != MJ_BACKEND_WGMMA)
        return mj_fail(MOEJIT_ERR_INTERNAL, "backend: mj_emit_wgmma got a %s spec",
                       name_or(mj_backend_names, MJ_BACKEND_COUNT, (int)s->backend));
    if (s->arch != MJ_ARCH_SM90A)
        return mj_fail(MOEJIT_ERR_UNSUPPORTED,
                       "arch: backend wgmma needs sm_90a (wgmma.mma_async, setmaxnreg); got %s",
                       name_or(mj_arch_names, MJ_ARCH_COUNT, (int)s->arch));
    if (s->quant != MJ_QUANT_BF16 && s->quant != MJ_QUANT_FP16)
        return mj_fail(MOEJIT_ERR_UNSUPPORTED, "quant: backend wgmma supports bf16, fp16; got %s",
                       name_or(mj_quant_names, MJ_QUANT_COUNT, (int)s->quant));
    mj_dtype want = s->quant == MJ_QUANT_BF16 ? MJ_DTYPE_BF16 : MJ_DTYPE_FP16;
    if (s->dtype != want)
        return mj_fail(MOEJIT_ERR_UNSUPPORTED, "dtype: quant %s needs dtype %s, got %s",
                       mj_quant_names[s->quant], mj_dtype_names[want],
                       name_or(mj_dtype_names, MJ_DTYPE_COUNT, (int)s->dtype));
    if (s->logits_dtype < 0 || s->logits_dtype >= MJ_DTYPE_COUNT)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "logits: must be fp32, bf16 or fp16");
    if (s->routing != MJ_ROUTING_SOFTMAX_TOPK && s->routing != MJ_ROUTING_RENORMALIZE &&
        s->routing != MJ_ROUTING_PRECOMPUTED)
        return mj_fail(MOEJIT_ERR_UNSUPPORTED,
                       "routing: backend wgmma supports softmax_topk, renormalize, precomputed; got %s",
                       name_or(mj_routing_names, MJ_ROUTING_COUNT, (int)s->routing));
    if (s->w1_layout != MJ_W1_UP_GATE)
        return mj_fail(MOEJIT_ERR_UNSUPPORTED, "w1_layout: backend wgmma supports up_gate; got %s",
                       name_or(mj_w1_layout_names, MJ_W1_LAYOUT_COUNT, (int)s->w1_layout));
    if (s->bias != MJ_BIAS_NONE)
        return mj_fail(MOEJIT_ERR_UNSUPPORTED, "bias: backend wgmma supports none; got %s",
                       name_or(mj_bias_names, MJ_BIAS_COUNT, (int)s->bias));
    if (!mj_act_desc_of(s->act.kind))
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "act: kind %d is no activation of the contract",
                       (int)s->act.kind);
    if (s->hidden < 0 || s->hidden % 8 || s->hidden > MJ_SIMT_MAX_DIM)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "hidden: a pinned H must be 0 (runtime) or a multiple of 8 up to %d, got %d",
                       MJ_SIMT_MAX_DIM, s->hidden);
    if (s->inter < 0 || s->inter % 8 || s->inter > MJ_SIMT_MAX_DIM)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "inter: a pinned I must be 0 (runtime) or a multiple of 8 up to %d, got %d",
                       MJ_SIMT_MAX_DIM, s->inter);
    if (s->experts < 0 || s->experts > MJ_SIMT_MAX_EXPERTS)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "experts: a pinned E must be 0 (runtime) or 1..%d, got %d", MJ_SIMT_MAX_EXPERTS,
                       s->experts);
    if (s->topk < 0 || s->topk > MJ_SIMT_MAX_TOPK || (s->experts && s->topk > s->experts))
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "topk: a pinned k must be 0 (runtime) or 1..min(%d, experts), got %d",
                       MJ_SIMT_MAX_TOPK, s->topk);
    if (mj_mma_path_of(s->tile) < 0)
        return mj_fail(MOEJIT_ERR_UNSUPPORTED, "tile: backend wgmma knows %s; got %s", MJ_MMA_TILE_NAMES,
                       s->tile);
    return MOEJIT_OK;
}

/* The canonical text goes into // comments: no control characters, no line splices. */
static int comment_safe(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e || *s == '\\') return 0;
    return 1;
}

static void emit_float(mj_buf *b, const char *name, float v)
{
    mj_buf_printf(b, "constexpr float %s = ", name);
    mj_buf_hexfloat(b, v);
    mj_buf_puts(b, "f;");
}

static void emit_activation(mj_buf *b, const moejit_activation *act)
{
    const mj_act_desc *d = mj_act_desc_of(act->kind);
    mj_buf_printf(b, "// activation %s (ABI %d, %s)\n", d->name, (int)d->kind,
                  d->gated ? "gated: u = first half of fc1, g = second" : "ungated");
    mj_buf_printf(b, "constexpr int kActKind = %d;\n", (int)d->kind);
    mj_buf_printf(b, "constexpr bool kGated = %s;\n", d->gated ? "true" : "false");
    mj_buf_puts(b, "// parameters in descriptor order: exact value, and whether it is set (not none)\n");
    for (int i = 0; i < MJ_ACT_MAX_PARAMS; i++) {
        int used = i < d->n_params;
        float value = used ? act->value[i] : 0.0f;
        int present = used ? act->present[i] != 0 : 0;
        char name[32];
        snprintf(name, sizeof name, "kActParam%d", i);
        emit_float(b, name, value);
        mj_buf_printf(b, " // %s\n", used ? d->params[i].name : "(unused)");
        mj_buf_printf(b, "constexpr bool kActPresent%d = %s;\n", i, present ? "true" : "false");
    }
    mj_buf_puts(b, "\n");
}

moejit_status mj_emit_wgmma(const moejit_spec *spec, mj_source *out)
{
    if (!spec || !out)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "mj_emit_wgmma: spec and out must not be NULL");
    memset(out, 0, sizeof *out);
    moejit_status st = check_emittable(spec);
    if (st != MOEJIT_OK) return st;
    const char *canonical = moejit_spec_canonical(spec);
    if (!canonical || !*canonical || !comment_safe(canonical))
        return mj_fail(MOEJIT_ERR_INTERNAL,
                       "spec.canonical: must be non-empty printable ASCII without backslashes");

    mj_buf b = MJ_BUF_INIT;
    mj_buf_puts(&b, "// moejit generated source: the fused-MoE layer of one spec. Do not edit.\n");
    mj_buf_printf(&b, "// generated by moejit %s, generator %d, backend wgmma\n", MOEJIT_VERSION_STRING,
                  MJ_GENERATOR_VERSION);
    mj_buf_printf(&b, "// spec: %s\n", canonical);
    mj_buf_puts(&b, "// kernels, in launch-table order:");
    for (int i = 0; i < MJ_MMA_NUM_KERNELS; i++) mj_buf_printf(&b, " %s", kernel_names[i]);
    mj_buf_puts(&b, "\n\n#include \"common/types.cuh\"\n\nnamespace mj {\nnamespace cfg {\n\n");
    mj_buf_puts(&b, "// element type of x, W1, W2, the intermediate and out\n");
    mj_buf_printf(&b, "constexpr Dtype kDtype = %s;\n", dtype_token[spec->dtype]);
    mj_buf_puts(&b, "// element type of router_logits\n");
    mj_buf_printf(&b, "constexpr Dtype kLogitsDtype = %s;\n\n", dtype_token[spec->logits_dtype]);
    emit_activation(&b, &spec->act);
    mj_buf_printf(&b, "constexpr Routing kRouting = %s;\n", routing_token[spec->routing]);
    /* route.cuh's group-limited selection, off for the routings wgmma accepts */
    mj_buf_puts(&b, "constexpr int kNGroup = 1;\nconstexpr int kTopkGroup = 1;\n");
    emit_float(&b, "kRoutedScaling", 1.0f);
    mj_buf_puts(&b, "\n\n");
    mj_buf_puts(&b, "// pinned shape: 0 = given at run time, else the kernels use the constant\n");
    mj_buf_printf(&b, "constexpr int kPinnedHidden = %d;\n", spec->hidden);
    mj_buf_printf(&b, "constexpr int kPinnedInter = %d;\n", spec->inter);
    mj_buf_printf(&b, "constexpr int kPinnedExperts = %d;\n", spec->experts);
    mj_buf_printf(&b, "constexpr int kPinnedTopk = %d;\n\n", spec->topk);
    mj_buf_printf(&b,
                  "// tile=%s: the wgmma GEMMs (%dx%dx%d, %d stages) and mma's decode path are both "
                  "compiled; the launcher picks per forward\n",
                  spec->tile, MJ_WGMMA_BM, MJ_WGMMA_BN, MJ_WGMMA_BK, MJ_WGMMA_STAGES);
    mj_buf_puts(&b, "} // namespace cfg\n} // namespace mj\n\n#include \"wgmma_layer.cuh\"\n");

    size_t len = b.len;
    char *text = mj_buf_take(&b);
    if (!text) return mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "mj_emit_wgmma: out of memory building the source");
    out->text = text;
    out->len = len;
    out->name = "moejit_layer.cu";
    out->n_kernels = MJ_MMA_NUM_KERNELS;
    for (int i = 0; i < MJ_MMA_NUM_KERNELS; i++) out->kernel_names[i] = kernel_names[i];
    return MOEJIT_OK;
}
