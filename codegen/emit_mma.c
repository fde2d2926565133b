/*
 * This file contains the code generator of the `mma` backend: a spec becomes a short
 * instantiation of templates/mma_layer.cuh — a comment with the canonical spec and the
 * kernel list, the constants of namespace mj::cfg (the same names simt_layer.cuh reads, so
 * act.cuh and route.cuh serve both backends), then one include.
 *
 * Both GEMM paths (large: tokens on the MMA's M; small: weights on M, for decode) are in
 * every cubin; the spec's tile field only tells the launcher which one to use ("auto": the
 * heuristic of common/mma_params.h, per forward). The bytes depend only on the spec and the
 * versions in the header comment, as for simt (emit.c).
 *
 * The wgmma layer reads the same constants, so this file writes its source too: what differs
 * (the arch it needs, a comment, the layer header) comes in an mj_mma_flavour from
 * emit_wgmma.c. The lines every backend writes alike come from emit_common.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/activation.h"
#include "core/matrix.h"
#include "templates/common/mma_params.h"
#include "templates/common/params.h"
#include "codegen/emit_backends.h"
#include "codegen/emit_common.h"
#include "core/spec.h"
#include "core/status.h"
#include "core/strbuf.h"

static const char *const kernel_names[MJ_MMA_NUM_KERNELS] = {MJ_MMA_KERNEL_NAME_LIST};
_Static_assert(MJ_MMA_NUM_KERNELS <= MJ_MAX_KERNELS, "the mma layer must fit in mj_program.kernels");

static int is_w4(const moejit_spec *s) { return s->quant == MJ_QUANT_W4A16 || s->quant == MJ_QUANT_MXFP4; }

/* What a 4-bit layer adds: its dtype and pinned dimensions in whole scale groups (its tiles are
 * the backend's: check_emittable). */
static moejit_status check_w4(const moejit_spec *s)
{
    if (s->dtype != MJ_DTYPE_BF16 && s->dtype != MJ_DTYPE_FP16)
        return mj_fail(MOEJIT_ERR_UNSUPPORTED, "dtype: quant %s needs dtype bf16 or fp16, got %s",
                       mj_quant_names[s->quant], mj_emit_name_or(mj_dtype_names, MJ_DTYPE_COUNT, (int)s->dtype));
    const int m = s->quant == MJ_QUANT_MXFP4 ? MJ_MXFP4_GROUP : s->zero_point ? 2 * s->group_size : s->group_size;
    if (s->hidden % m || s->inter % m)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "%s: quant=%s%s needs a multiple of %d (its scale groups along K), got %d",
                       s->hidden % m ? "hidden" : "inter", mj_quant_names[s->quant],
                       s->quant == MJ_QUANT_W4A16 && s->zero_point ? " with zero points" : "", m,
                       s->hidden % m ? s->hidden : s->inter);
    return MOEJIT_OK;
}

/* The quantizations of the flavour: 16-bit everywhere, 4-bit (small and large paths, and
 * wgmma's tall) on both, fp8 (e4m3 weights) where it has the fp8 GEMMs; the dtype (x, out) is
 * the 16-bit quant's own, or either for fp8 and 4-bit. The fp8 and 4-bit GEMMs' epilogues know none of
 * weight_layout.cuh's options: their layers take up_gate without biases or overrides. */
static moejit_status check_quant(const moejit_spec *s, const mj_mma_flavour *f)
{
    const char *be = mj_backend_names[f->backend];
    const int fp8 = s->quant == MJ_QUANT_FP8_TENSOR || s->quant == MJ_QUANT_FP8_BLOCK, w4 = is_w4(s);
    if (s->quant != MJ_QUANT_BF16 && s->quant != MJ_QUANT_FP16 && !(fp8 && f->has_fp8) && !w4)
        return mj_fail(MOEJIT_ERR_UNSUPPORTED, "quant: backend %s supports %s; got %s", be,
                       f->has_fp8 ? "bf16, fp16, fp8_tensor, fp8_block, w4a16, mxfp4" : "bf16, fp16, w4a16, mxfp4",
                       mj_emit_name_or(mj_quant_names, MJ_QUANT_COUNT, (int)s->quant));
    if (fp8 || w4) {
        if (w4) {
            moejit_status st = check_w4(s);
            if (st != MOEJIT_OK) return st;
        } else if (s->dtype != MJ_DTYPE_BF16 && s->dtype != MJ_DTYPE_FP16) {
            return mj_fail(MOEJIT_ERR_UNSUPPORTED, "dtype: quant %s needs dtype bf16 or fp16, got %s",
                           mj_quant_names[s->quant], mj_emit_name_or(mj_dtype_names, MJ_DTYPE_COUNT, (int)s->dtype));
        } else if (s->quant == MJ_QUANT_FP8_BLOCK && s->fp8_act != MJ_FP8_ACT_TENSOR) {
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                           "fp8_act: only quant=fp8_tensor chooses it (tensor, token, static)");
        }
        return mj_check_combinations(s); /* up_gate, no biases, no overrides: the matrix's rule */
    }
    mj_dtype want = s->quant == MJ_QUANT_BF16 ? MJ_DTYPE_BF16 : MJ_DTYPE_FP16;
    if (s->dtype != want)
        return mj_fail(MOEJIT_ERR_UNSUPPORTED, "dtype: quant %s needs dtype %s, got %s",
                       mj_quant_names[s->quant], mj_dtype_names[want],
                       mj_emit_name_or(mj_dtype_names, MJ_DTYPE_COUNT, (int)s->dtype));
    return MOEJIT_OK;
}

/* The multiple a pinned H or I must be of: 8, 16 for fp8_tensor (1-byte rows of the TMA boxes
 * and the 16-value groups the producer quantizes), 128 for fp8_block (its scale blocks). */
static int mj_tc_dim_multiple(mj_quant q)
{
    return q == MJ_QUANT_FP8_BLOCK ? MJ_FP8_BLOCK : q == MJ_QUANT_FP8_TENSOR ? 16 : 8;
}

/* The last line before NVRTC: each refusal names the field and what is allowed. */
static moejit_status check_emittable(const moejit_spec *s, const mj_mma_flavour *f)
{
    const char *be = mj_backend_names[f->backend];
    if (s->backend != f->backend)
        return mj_fail(MOEJIT_ERR_INTERNAL, "backend: mj_emit_%s got a %s spec", be,
                       mj_emit_name_or(mj_backend_names, MJ_BACKEND_COUNT, (int)s->backend));
    if (f->sm90a_only && s->arch != MJ_ARCH_SM90A)
        return mj_fail(MOEJIT_ERR_UNSUPPORTED,
                       "arch: backend %s needs sm_90a (wgmma.mma_async, setmaxnreg); got %s", be,
                       mj_emit_name_or(mj_arch_names, MJ_ARCH_COUNT, (int)s->arch));
    moejit_status st = check_quant(s, f);
    if (st != MOEJIT_OK) return st;
    /* every routing method: route.cuh serves the route kernel, the fused decode routing, the
     * GEMM1 blocks that route for themselves and the persistent decode layer alike */
    st = mj_emit_check_routing(s);
    if (st != MOEJIT_OK) return st;
    if ((unsigned)s->w1_layout >= MJ_W1_LAYOUT_COUNT)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "w1_layout: %d is no layout; allowed: up_gate, gate_up, interleaved",
                       (int)s->w1_layout);
    if ((unsigned)s->bias >= MJ_BIAS_COUNT)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "bias: %d is no bias value; allowed: none, b1, b2, both",
                       (int)s->bias);
    if (!mj_act_desc_of(s->act.kind))
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "act: kind %d is no activation of the contract",
                       (int)s->act.kind);
    const int m = mj_tc_dim_multiple(s->quant);
    if (s->hidden < 0 || s->hidden % m || s->hidden > MJ_SIMT_MAX_DIM)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "hidden: a pinned H must be 0 (runtime) or a multiple of %d up to %d (quant=%s), got %d", m,
                       MJ_SIMT_MAX_DIM, mj_quant_names[s->quant], s->hidden);
    if (s->inter < 0 || s->inter % m || s->inter > MJ_SIMT_MAX_DIM)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "inter: a pinned I must be 0 (runtime) or a multiple of %d up to %d (quant=%s), got %d", m,
                       MJ_SIMT_MAX_DIM, mj_quant_names[s->quant], s->inter);
    const int path = mj_mma_path_of(s->tile);
    if (path < 0 || ((path == MJ_MMA_PATH_TALL || path == MJ_MMA_PATH_PAIR) && !f->has_tall_and_pair))
        return mj_fail(MOEJIT_ERR_UNSUPPORTED, "tile: backend %s knows %s; got %s", be,
                       f->has_tall_and_pair ? MJ_WGMMA_TILE_NAMES : MJ_MMA_TILE_NAMES, s->tile);
    if (path == MJ_MMA_PATH_SMALL && (s->quant == MJ_QUANT_FP8_TENSOR || s->quant == MJ_QUANT_FP8_BLOCK))
        return mj_fail(MOEJIT_ERR_UNSUPPORTED,
                       "tile: an fp8 %s layer has no small path (decode runs its fp8 GEMMs' short tiles); "
                       "use auto, large, tall or pair; got %s", be, s->tile);
    return MOEJIT_OK;
}

/* The 4-bit weight format's constants (the 16-bit layers' source has none: it stays as it was). */
static void emit_w4(mj_buf *b, const moejit_spec *spec, const mj_mma_flavour *f)
{
    const int mx = spec->quant == MJ_QUANT_MXFP4;
    mj_buf_printf(b, "// 4-bit weights streamed packed, dequantized in registers%s\n",
                  f->has_tall_and_pair ? " (decode: mma's 4-bit GEMMs; large: wgmma's, dequantizing into its 16-bit "
                                         "stages)"
                                       : "");
    mj_buf_printf(b, "constexpr Quant kQuant = %s;\n", mx ? "Quant::mxfp4" : "Quant::w4a16");
    mj_buf_printf(b, "constexpr int kInt4Group = %d;\n", mx ? 0 : spec->group_size);
    mj_buf_printf(b, "constexpr bool kInt4Zero = %s;\n\n", !mx && spec->zero_point ? "true" : "false");
}

moejit_status mj_emit_mma_flavour(const moejit_spec *spec, const mj_mma_flavour *f, mj_source *out)
{
    const char *be = mj_backend_names[f->backend];
    if (!spec || !out)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "mj_emit_%s: spec and out must not be NULL", be);
    memset(out, 0, sizeof *out);
    moejit_status st = check_emittable(spec, f);
    if (st != MOEJIT_OK) return st;
    const char *canonical = NULL;
    st = mj_emit_canonical(spec, &canonical);
    if (st != MOEJIT_OK) return st;

    mj_buf b = MJ_BUF_INIT;
    mj_emit_header(&b, canonical, be, "// kernels, in launch-table order:", f->kernel_names, f->n_kernels);
    mj_emit_dtypes(&b, spec, "// element type of x, W1, W2, the intermediate and out\n");
    if (spec->quant == MJ_QUANT_FP8_TENSOR || spec->quant == MJ_QUANT_FP8_BLOCK) {
        /* only fp8 writes these lines, so a 16-bit layer's source is what it was */
        mj_buf_puts(&b, "// e4m3 weights with fp32 scales (W1, W2 e4m3; x, the intermediate and out in the dtype); "
                        "fp8 activation scaling\n");
        mj_buf_puts(&b, "#define MJ_TC_QUANT_FP8 1\n");
        mj_buf_printf(&b, "constexpr Quant kQuant = %s;\n",
                      spec->quant == MJ_QUANT_FP8_BLOCK ? "Quant::fp8_block" : "Quant::fp8_tensor");
        mj_buf_printf(&b, "constexpr Fp8Act kFp8Act = %s;\n\n",
                      spec->fp8_act == MJ_FP8_ACT_TOKEN    ? "Fp8Act::token"
                      : spec->fp8_act == MJ_FP8_ACT_STATIC ? "Fp8Act::static_scale"
                                                           : "Fp8Act::tensor");
    }
    mj_emit_activation(&b, &spec->act, 0);
    /* the grouping comment only with deepseek_v3, so the other methods' source stays as it was */
    mj_emit_routing(&b, spec,
                    spec->routing == MJ_ROUTING_DEEPSEEK_V3 ? "// deepseek_v3 grouping (1, 1, 1.0 for every other method)\n"
                                                            : NULL);
    mj_emit_pinned_shape(&b, spec);
    if (spec->w1_layout != MJ_W1_UP_GATE || spec->bias != MJ_BIAS_NONE) mj_emit_w1_layout_and_biases(&b, spec);
    if (spec->act_overrides == MJ_OVERRIDES_PER_EXPERT)
        mj_buf_puts(&b, "// per-expert activation overrides (act_param) applied in GEMM1's epilogue\n"
                        "constexpr bool kActOverrides = true;\n\n");
    const int w4 = is_w4(spec);
    if (w4) emit_w4(&b, spec, f);
    mj_buf_printf(&b, "// tile=%s: %s\n", spec->tile,
                  w4 && f->has_tall_and_pair ? "the 4-bit small, large, tall and pair paths are compiled; "
                                               "the launcher picks per forward"
                                             : f->tile_note);
    char who[32];
    snprintf(who, sizeof who, "mj_emit_%s", be);
    return mj_emit_finish(&b, w4 ? f->w4_layer_header : f->layer_header, who, f->kernel_names, f->n_kernels, out);
}

moejit_status mj_emit_mma(const moejit_spec *spec, mj_source *out)
{
    static const mj_mma_flavour mma = {MJ_BACKEND_MMA,
                                       0,
                                       "both GEMM paths are compiled; the launcher picks per forward",
                                       "mma_layer.cuh",
                                       kernel_names,
                                       MJ_MMA_NUM_KERNELS,
                                       0,
                                       0,
                                       "mma_w4_layer.cuh"};
    return mj_emit_mma_flavour(spec, &mma, out);
}
