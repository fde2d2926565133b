/*
 * reference.h — the float64 CPU reference of one whole fused-MoE layer, written from the
 * contract (docs/SEMANTICS.md), never from the templates.
 *
 * This file contains the description of a layer as the reference sees it (mj_ref_layer), the
 * activation and routing primitives on their own (so tests can check them by hand), and the
 * forward pass in two modes:
 *   - ideal:  every step in float64 (the contract's tolerance is measured against this);
 *   - replay: float64, but rounding to the storage dtype exactly where the kernel stores a
 *             value in 16 bits (mj_ref_round flags), which allows a much tighter bar.
 *
 * Tensors are float arrays holding the values the kernel sees: inputs already snapped to their
 * dtype, weights already dequantized (tests/lib/quant_ref.c turns each quantized format into
 * these arrays, independently of the templates). The one quantization that happens inside the
 * layer, fp8 activations (x before GEMM1, the intermediate a before GEMM2), is a property of
 * the layer (act_quant) that only the replay applies (MJ_REF_QUANT_* flags): the ideal pass
 * stays the unquantized float64 math the contract's tolerance is measured against.
 */
#ifndef MJ_TEST_REFERENCE_H
#define MJ_TEST_REFERENCE_H

#include <stdint.h>

#include "core/activation.h"
#include "moejit.h"
#include "core/spec.h"

/* Largest k the reference routes (the kernels allow 32), and largest E. */
#define MJ_REF_MAX_TOPK 512
#define MJ_REF_MAX_EXPERTS 1024

/* Where the reference replays a rounding of the kernel to the layer's dtype. */
typedef enum mj_ref_round {
    MJ_REF_ROUND_FC1 = 1u << 0, /* fc1 (after b1) stored before the activation */
    MJ_REF_ROUND_ACT = 1u << 1, /* the activation output a, stored once before GEMM2 */
    MJ_REF_ROUND_Y = 1u << 2,   /* each expert's y (after b2) stored before the weighted sum */
    MJ_REF_QUANT_X = 1u << 3,   /* x quantized to e4m3 per act_quant before GEMM1 */
    MJ_REF_QUANT_ACT = 1u << 4, /* a (after ROUND_ACT, if set) quantized to e4m3 before GEMM2 */
    /* With QUANT_ACT and ROUND_ACT, a dynamic scale of a (per tensor, row or block) from the
     * amax of the group's values rounded to the dtype after moving each unrounded |a| down
     * (AMAX_LOW) or up (AMAX_HIGH) by MJ_REF_AMAX_SLACK: the two sides of an amax whose
     * unrounded value lies within the slack of a rounding midpoint of the dtype, where the
     * kernel's fp32 GEMM1 may land on either side (mj_ref_forward_ex counts such groups). */
    MJ_REF_AMAX_LOW = 1u << 5,
    MJ_REF_AMAX_HIGH = 1u << 6,
    /* w1 and w2 rounded once to the dtype before use: the tensor-core backends' 4-bit layers
     * multiply the dequantized weights in the dtype (the ideal layer keeps them exact) */
    MJ_REF_ROUND_W = 1u << 7
} mj_ref_round;

/* Relative distance from a rounding midpoint of the dtype within which an unrounded value the
 * replay rounds (an amax, fc1, a, y) counts as ambiguous: fp32 accumulation and the
 * activation's few-ulp fp32 functions stay far inside it (2^-22 on the case that showed it:
 * an amax of 8.718751188 in float64, rounded to bf16 8.75, while the H200 stored 8.6875). */
#define MJ_REF_AMAX_SLACK 0x1p-16
/* Hopper's fp8 wgmma (QGMMA) sums its products inside the tensor core with about 14 bits kept
 * (its sums are promoted into fp32 every 128 K): the slack of the wgmma fp8 GEMMs. */
#define MJ_REF_QGMMA_SLACK 0x1p-13

/* The replay of the simt kernels: a is stored once in bf16/fp16. */
#define MJ_REF_REPLAY_SIMT ((unsigned)MJ_REF_ROUND_ACT)
/* The replay of the tensor-core backends (mma, wgmma): a, and each expert's y, stored once in
 * bf16/fp16 (templates/finalize.cuh). */
#define MJ_REF_REPLAY_TC ((unsigned)(MJ_REF_ROUND_ACT | MJ_REF_ROUND_Y))
/* fp8 formats: a stored once in the dtype, then x and a quantized to e4m3 as act_quant says. */
#define MJ_REF_REPLAY_FP8 ((unsigned)(MJ_REF_ROUND_ACT | MJ_REF_QUANT_X | MJ_REF_QUANT_ACT))

/* The replay flags of spec's kernels: MJ_REF_REPLAY_SIMT or _FP8 on simt; on mma and wgmma
 * also each expert's y stored in the dtype (MJ_REF_REPLAY_TC) and 4-bit weights rounded to it
 * (MJ_REF_ROUND_W). */
unsigned mj_ref_replay_flags(const moejit_spec *spec);
/* mj_ref_layer.gemm_slack for spec's kernels: MJ_REF_QGMMA_SLACK for wgmma's fp8 layers, else
 * 0 (fp32 accumulation). */
double mj_ref_gemm_slack(const moejit_spec *spec);

/* How the fp8 formats quantize activations in the layer (docs/SEMANTICS.md §5): the scale of a
 * group of values is amax/448 (fp32), each value becomes e4m3(v / scale) · scale. The
 * intermediate a is grouped like x, with I in place of H and one row per (token, expert). */
typedef enum mj_ref_act_quant {
    MJ_REF_AQ_NONE = 0,   /* activations stay in the dtype (bf16, fp16, w4a16, mxfp4) */
    MJ_REF_AQ_FP8_TENSOR, /* one scale for the whole tensor (all tokens; all local pairs) */
    MJ_REF_AQ_FP8_TOKEN,  /* one scale per row */
    MJ_REF_AQ_FP8_BLOCK,  /* one scale per row per 128 consecutive elements along K */
    MJ_REF_AQ_COUNT
} mj_ref_act_quant;

/* Group width of MJ_REF_AQ_FP8_BLOCK along K. */
#define MJ_REF_FP8_BLOCK 128

typedef struct mj_ref_layer {
    /* shape (the reference does not impose the kernels' multiple-of-8 rules) */
    int64_t num_tokens;        /* T >= 0 */
    int64_t hidden;            /* H >= 1 */
    int64_t inter;             /* I >= 1 */
    int64_t num_experts;       /* E: global experts, width of the router */
    int64_t topk;              /* k, 1..E */
    int64_t expert_offset;     /* first expert owned (EP); 0 */
    int64_t num_local_experts; /* experts owned; 0 means all E */

    /* semantics */
    const moejit_activation *act;
    mj_routing routing;
    mj_w1_layout w1_layout;
    mj_dtype dtype;            /* storage type of x/out and of the kernel's intermediates */

    /* routing parameters; 0 means the default */
    int64_t n_group;           /* deepseek_v3: groups of E/n_group consecutive ids; 0: 1 */
    int64_t topk_group;        /* deepseek_v3: groups kept; 0: n_group (no masking) */
    double routed_scaling;     /* deepseek_v3: factor on the renormalised weights; 0: 1 */
    const float *routing_bias; /* [E] deepseek_v3 selection-only bias, or NULL (zeros) */

    /* fp8 activation quantization of the kernel (applied by the replay only) */
    mj_ref_act_quant act_quant;
    double x_scale;            /* MJ_REF_AQ_FP8_TENSOR: static scale of x; 0: dynamic */
    double a_scale;            /* MJ_REF_AQ_FP8_TENSOR: static scale of a; 0: dynamic */
    double gemm_slack;         /* relative error of the kernel's GEMMs around which a rounding
                                  midpoint of the dtype counts as ambiguous (flip bound, amax
                                  sides); 0: MJ_REF_AMAX_SLACK (fp32 accumulation) */

    /* tensors, row-major; values exactly as the kernel sees them */
    const float *x;            /* [T, H] */
    const float *router_logits;/* [T, E] (logit routings) */
    const int32_t *topk_ids;   /* [T, k] global ids (precomputed) */
    const float *topk_weights; /* [T, k] (precomputed) */
    const float *w1;           /* [E_local, rows, H], rows = 2I gated / I, in w1_layout */
    const float *w2;           /* [E_local, H, I] */
    const float *b1;           /* [E_local, rows] or NULL */
    const float *b2;           /* [E_local, H] or NULL */
    const float *act_param[MJ_ACT_MAX_PARAMS]; /* [E_local] overrides in the activation's
                                                  parameter order, or NULL */
} mj_ref_layer;

/* An activation's parameters resolved by name from its descriptor (mj_act_desc_of), so the
 * reference never depends on the order of moejit_activation.value[]. */
typedef struct mj_ref_act {
    moejit_act_kind kind;
    int gated;
    double alpha, beta, limit;               /* swiglu (limit also swiglu_step) */
    double gate_scale, linear_scale, clamp;  /* situ */
    int has_linear_scale, has_clamp;         /* situ: 0 = "none" */
} mj_ref_act;

/* Resolves act. param (may be NULL) are per-expert override arrays in the descriptor's
 * parameter order (mj_ref_layer.act_param); where param[i] is set, param[i][index] replaces
 * the value (and makes an optional SiTU parameter present). */
moejit_status mj_ref_act_resolve(const moejit_activation *act, const float *const *param,
                                 int64_t index, mj_ref_act *out);
/* The contract's formula in float64. Ungated activations read `x` and ignore `u`; gated
 * ones read the up half `u` and the gate half `g` (passed as `x`). */
double mj_ref_act_apply(const mj_ref_act *p, double u, double x);

/* Routes token t: writes k global ids and their weights (for precomputed routing the given
 * ones), by the contract's §4: softmax_topk, renormalize, sigmoid_topk, sigmoid_renorm
 * (σ / (Σσ + 1e-20)), deepseek_v3 (σ + bias selects, groups by the sum of their top-2 biased
 * scores, unbiased σ renormalised × routed_scaling weighs), llama4 (σ of each chosen logit).
 * Selection ties go to the lower expert id (and, for groups, to the lower group). */
moejit_status mj_ref_route_token(const mj_ref_layer *L, int64_t t, int32_t *ids, double *weights);

/* The dynamic fp8 scale of values whose absolute maximum is amax: amax/448 rounded to fp32,
 * as a kernel computes it in fp32; 1 when amax is 0 (zeros quantize to zeros at any scale). */
double mj_ref_fp8_scale(double amax);
/* v[i] <- e4m3(v[i] / s) · s for n values in groups of `group` consecutive values (the last
 * one may be shorter); s = scale when scale > 0, else each group's mj_ref_fp8_scale. The
 * quotient is the kernel's: fp32 v by fp32 s, rounded to fp32, before e4m3's rounding. */
void mj_ref_fp8_fake_quant(double *v, int64_t n, int64_t group, double scale);

/* Checks shapes, pointers and the routing method; messages name the field. */
moejit_status mj_ref_validate(const mj_ref_layer *L);

/* The forward pass. `ideal` and `replay` ([T, H] each) may each be NULL; `replay_flags` is
 * a mask of mj_ref_round (the MJ_REF_QUANT_* bits act only where act_quant is set; a dynamic
 * per-tensor scale of a costs the replay a first pass over GEMM1 for the amax). `threads` <= 1
 * runs on the calling thread; the result does not depend on the thread count (tokens are split,
 * never sums). */
moejit_status mj_ref_forward(const mj_ref_layer *L, int threads, double *ideal, double *replay,
                             unsigned replay_flags);
/* mj_ref_forward, and in *ambiguous (may be NULL) the number of dynamic scale groups of a
 * (a per-tensor scale is one group; rows and blocks each one) whose amax differs between
 * MJ_REF_AMAX_LOW and MJ_REF_AMAX_HIGH: where it is 0 those flags change nothing. The
 * ideal pass ignores both flags. flip_bound ([T, H], may be NULL; with replay) receives how
 * far each replay output may move where the kernel stores a value the replay rounds (fc1, a, y,
 * as the flags say) on the other side of a midpoint of the dtype (its unrounded value within
 * the layer's slack of it): Σ over the token's slots of |w| (Σ_i |W2[h, i]| δ_i + the step of
 * y_h), δ_i how far a_i may then land, e4m3 (QUANT_ACT) taking it a step further; 0 where no
 * value lies that close to a midpoint, and without rounding flags. */
moejit_status mj_ref_forward_ex(const mj_ref_layer *L, int threads, double *ideal, double *replay,
                                unsigned replay_flags, int64_t *ambiguous, double *flip_bound);

#endif
