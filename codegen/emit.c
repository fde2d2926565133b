/*
 * This file contains the code generator: it turns a spec into the CUDA source of one
 * translation unit, a short instantiation of the embedded simt templates (DeepGEMM's
 * generate_impl model): a comment with the canonical spec, the specialisation constants as
 * text, then one include of the layer header that defines every extern "C" kernel.
 *
 * Determinism is the point: the bytes depend only on the spec and on the two versions named
 * in the header comment. Floats go through mj_buf_hexfloat (exact, locale-free); integers
 * through %d; nothing else (time, path, pointer, locale) can reach the text. The lines every
 * backend writes alike (header, element types, activation, routing, pinned shape) come from
 * emit_common.c; this file adds simt's checks, quantization, layout, bias and tile constants.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/activation.h"
#include "templates/common/params.h"
#include "codegen/emit.h"
#include "codegen/emit_backends.h"
#include "codegen/emit_common.h"
#include "core/spec.h"
#include "core/status.h"
#include "core/strbuf.h"

static const char *const kernel_names[MJ_SIMT_NUM_KERNELS] = {MJ_SIMT_KERNEL_NAME_LIST};
_Static_assert(MJ_SIMT_NUM_KERNELS <= MJ_MAX_KERNELS, "the simt layer must fit in mj_program.kernels");

/* Template spellings of the simt-only constants (templates/common/types.cuh), indexed by the
 * host enums; the shared ones are in emit_common.c. */
static const char *const quant_token[MJ_QUANT_COUNT] = {
    "Quant::bf16", "Quant::fp16", "Quant::fp8_tensor", "Quant::fp8_block", "Quant::w4a16", "Quant::mxfp4"};
_Static_assert(MJ_QUANT_BF16 == 0 && MJ_QUANT_MXFP4 == 5 && MJ_QUANT_COUNT == 6, "quant_token order");

static const char *const fp8_act_token[MJ_FP8_ACT_COUNT] = {"Fp8Act::tensor", "Fp8Act::token",
                                                            "Fp8Act::static_scale"};
_Static_assert(MJ_FP8_ACT_TENSOR == 0 && MJ_FP8_ACT_STATIC == 2, "fp8_act_token order");

/* The multiple a pinned H or I must be for quant (0: no rule beyond 8). */
static int dim_multiple(const moejit_spec *s)
{
    switch (s->quant) {
    case MJ_QUANT_FP8_BLOCK: return MJ_FP8_BLOCK;
    case MJ_QUANT_W4A16: return s->zero_point ? 2 * s->group_size : s->group_size;
    case MJ_QUANT_MXFP4: return MJ_MXFP4_GROUP;
    default: return 8;
    }
}

static moejit_status check_pinned_dim(const moejit_spec *s, const char *field, int v)
{
    if (v < 0 || v % 8 || v > MJ_SIMT_MAX_DIM)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "%s: a pinned value must be 0 (runtime) or a multiple of 8 up to %d, got %d", field,
                       MJ_SIMT_MAX_DIM, v);
    int m = dim_multiple(s);
    if (v % m)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "%s: quant=%s%s needs a multiple of %d (its scale groups along K), got %d", field,
                       mj_quant_names[s->quant], s->quant == MJ_QUANT_W4A16 && s->zero_point ? " with zero points" : "",
                       m, v);
    return MOEJIT_OK;
}

/* What this generator can emit (the capability matrix should never let anything else
 * through; this is the last line before NVRTC, so each refusal names the field). */
static moejit_status check_emittable(const moejit_spec *s, const mj_simt_tile **tile)
{
    if (s->backend != MJ_BACKEND_SIMT)
        return mj_fail(MOEJIT_ERR_UNSUPPORTED, "backend: the code generator emits simt only, got %s",
                       mj_emit_name_or(mj_backend_names, MJ_BACKEND_COUNT, (int)s->backend));
    if (s->quant < 0 || s->quant >= MJ_QUANT_COUNT)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "quant: value %d is no quantization", (int)s->quant);
    if (s->dtype != MJ_DTYPE_BF16 && s->dtype != MJ_DTYPE_FP16)
        return mj_fail(MOEJIT_ERR_UNSUPPORTED, "dtype: backend simt computes in bf16 or fp16, got %s",
                       mj_emit_name_or(mj_dtype_names, MJ_DTYPE_COUNT, (int)s->dtype));
    if ((s->quant == MJ_QUANT_BF16 && s->dtype != MJ_DTYPE_BF16) ||
        (s->quant == MJ_QUANT_FP16 && s->dtype != MJ_DTYPE_FP16))
        return mj_fail(MOEJIT_ERR_UNSUPPORTED, "dtype: quant %s needs dtype %s, got %s",
                       mj_quant_names[s->quant], mj_quant_names[s->quant], mj_dtype_names[s->dtype]);
    if (s->quant == MJ_QUANT_W4A16 && s->group_size != 32 && s->group_size != 64 && s->group_size != 128)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "group: must be 32, 64 or 128, got %d", s->group_size);
    if (s->fp8_act < 0 || s->fp8_act >= MJ_FP8_ACT_COUNT ||
        (s->quant != MJ_QUANT_FP8_TENSOR && s->fp8_act != MJ_FP8_ACT_TENSOR))
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "fp8_act: only quant=fp8_tensor chooses it (tensor, token, static)");
    moejit_status st = mj_emit_check_routing(s);
    if (st != MOEJIT_OK) return st;
    if (s->w1_layout < 0 || s->w1_layout >= MJ_W1_LAYOUT_COUNT)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "w1_layout: value %d is no layout", (int)s->w1_layout);
    if (s->bias < 0 || s->bias >= MJ_BIAS_COUNT)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "bias: value %d is no bias setting", (int)s->bias);
    if (!mj_act_desc_of(s->act.kind))
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "act: kind %d is no activation of the contract",
                       (int)s->act.kind);
    st = check_pinned_dim(s, "hidden", s->hidden);
    if (st != MOEJIT_OK) return st;
    st = check_pinned_dim(s, "inter", s->inter);
    if (st != MOEJIT_OK) return st;
    *tile = mj_simt_tile_find(s->tile);
    if (!*tile)
        return mj_fail(MOEJIT_ERR_UNSUPPORTED, "tile: backend simt knows %s; got %s",
                       MJ_SIMT_TILE_NAMES, s->tile);
    return MOEJIT_OK;
}

moejit_status mj_emit(const moejit_spec *spec, mj_source *out)
{
    if (!spec || !out) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "mj_emit: spec and out must not be NULL");
    memset(out, 0, sizeof *out);
    if (spec->backend == MJ_BACKEND_MMA) return mj_emit_mma(spec, out);
    if (spec->backend == MJ_BACKEND_WGMMA) return mj_emit_wgmma(spec, out);
    const mj_simt_tile *tile = NULL;
    moejit_status st = check_emittable(spec, &tile);
    if (st != MOEJIT_OK) return st;
    const char *canonical = NULL;
    st = mj_emit_canonical(spec, &canonical);
    if (st != MOEJIT_OK) return st;

    mj_buf b = MJ_BUF_INIT;
    mj_emit_header(&b, canonical, NULL, "// kernels, in the order of the launch table (common/params.h):",
                   kernel_names, MJ_SIMT_NUM_KERNELS);
    mj_emit_dtypes(&b, spec, "// element type of x, out, the biases and the intermediate (and of 16-bit weights)\n");
    mj_buf_puts(&b, "// weight format; fp8 activation scaling; int4 group and zero points\n");
    mj_buf_printf(&b, "constexpr Quant kQuant = %s;\n", quant_token[spec->quant]);
    mj_buf_printf(&b, "constexpr Fp8Act kFp8Act = %s;\n", fp8_act_token[spec->fp8_act]);
    mj_buf_printf(&b, "constexpr int kInt4Group = %d;\n", spec->quant == MJ_QUANT_W4A16 ? spec->group_size : 0);
    mj_buf_printf(&b, "constexpr bool kInt4Zero = %s;\n\n",
                  spec->quant == MJ_QUANT_W4A16 && spec->zero_point ? "true" : "false");
    mj_emit_w1_layout_and_biases(&b, spec);
    mj_emit_activation(&b, &spec->act, 1);
    mj_emit_routing(&b, spec, "// deepseek_v3 grouping (1, 1, 1.0 for every other method)\n");
    mj_emit_pinned_shape(&b, spec);
    mj_buf_printf(&b, "// tile %s (spec tile=%s)\n", tile->name, spec->tile);
    mj_buf_printf(&b, "constexpr int BLOCK_M = %d;\n", tile->block_m);
    mj_buf_printf(&b, "constexpr int BLOCK_N = %d;\n", tile->block_n);
    mj_buf_printf(&b, "constexpr int BLOCK_K = %d;\n\n", tile->block_k);
    return mj_emit_finish(&b, "simt_layer.cuh", "mj_emit", kernel_names, MJ_SIMT_NUM_KERNELS, out);
}

void mj_source_free(mj_source *src)
{
    if (!src) return;
    free(src->text);
    memset(src, 0, sizeof *src);
}
