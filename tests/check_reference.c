/*
 * This file contains the tests of the float64 CPU reference (reference/reference.c) and of the
 * host half conversions (core/halfconv.c): every activation against values computed by
 * hand from the contract's formulas, every routing method (weights, ties, deepseek_v3's group
 * masking and selection-only bias, EP), tiny layers worked out by hand, the fp8 activation
 * replay, and the conversions' round-to-nearest-even and NaN behaviour. The GPU
 * suite trusts this code as its oracle, so it is checked against numbers, not against itself.
 */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/check_main.h"
#include "core/halfconv.h"
#include "reference/reference.h"

#define REL_EPS 1e-12

static void assert_close(double got, double want, double rel)
{
    double tol = rel * fmax(fabs(want), 1e-300);
    ck_assert_msg(fabs(got - want) <= tol, "got %.17g, want %.17g (rel %.1e)", got, want, rel);
}

static double sig(double x)
{
    return 1.0 / (1.0 + exp(-x));
}

static mj_ref_act resolve(const moejit_activation *act)
{
    mj_ref_act p;
    ck_assert_int_eq(mj_ref_act_resolve(act, NULL, 0, &p), MOEJIT_OK);
    return p;
}

static moejit_activation *make(moejit_act_kind kind)
{
    moejit_activation *a = NULL;
    ck_assert_int_eq(moejit_activation_create(kind, &a), MOEJIT_OK);
    return a;
}

/* ---- activations ---------------------------------------------------------------------------- */

START_TEST(swiglu_at_defaults_is_silu_of_gate_times_up)
{
    moejit_activation *a = make(MOEJIT_ACT_SWIGLU);
    mj_ref_act p = resolve(a);
    const double us[] = {1.5, -2.25, 0.0, 30.0}, gs[] = {-3.0, 0.5, 2.0, 40.0};
    for (int i = 0; i < 4; i++)
        assert_close(mj_ref_act_apply(&p, us[i], gs[i]), gs[i] * sig(gs[i]) * us[i], REL_EPS);
    /* the gate half is the one inside SiLU: swapping u and g changes the value */
    ck_assert(fabs(mj_ref_act_apply(&p, 1.5, -3.0) - mj_ref_act_apply(&p, -3.0, 1.5)) > 0.1);
    moejit_activation_destroy(a);
}
END_TEST

START_TEST(gpt_oss_swiglu_clamps_gate_above_and_up_both_ways)
{
    moejit_activation *a = NULL;
    ck_assert_int_eq(moejit_activation_swiglu(1.702f, 1.0f, 7.0f, &a), MOEJIT_OK);
    mj_ref_act p = resolve(a);
    /* The hand values use alpha = 1.702 exactly; the value holds the float 1.702f, 2.2e-8
     * away, hence 1e-6 rather than 1e-12. */
    /* u = 9, g = 8: both clamp to 7; 7 * σ(1.702*7) * (7 + 1) */
    assert_close(mj_ref_act_apply(&p, 9.0, 8.0), 55.99962502642654, 1e-6);
    /* u = -9 clamps to -7; g = -3 is below the limit and stays: -3 * σ(-5.106) * (-7 + 1) */
    assert_close(mj_ref_act_apply(&p, -9.0, -3.0), 0.10842785824671582, 1e-6);
    /* g is clamped from above only: g = -20 is not raised to -7 */
    assert_close(mj_ref_act_apply(&p, 0.0, -20.0), -20.0 * sig(1.702f * -20.0) * 1.0, 1e-9);
    /* inside the limit nothing clamps */
    assert_close(mj_ref_act_apply(&p, 2.0, 3.0), 3.0 * sig((double)1.702f * 3.0) * 3.0, REL_EPS);
    moejit_activation_destroy(a);
}
END_TEST

START_TEST(swiglu_step_clamps_after_silu_not_the_gate_before)
{
    moejit_activation *a = make(MOEJIT_ACT_SWIGLU_STEP); /* limit 7 */
    mj_ref_act p = resolve(a);
    /* silu(10) = 9.9995 > 7 -> exactly 7; 7 * 5 = 35. Clamping g first would give
     * silu(7) * 5 = 34.968. */
    ck_assert_double_eq(mj_ref_act_apply(&p, 5.0, 10.0), 35.0);
    ck_assert(fabs(mj_ref_act_apply(&p, 5.0, 10.0) - 34.96811320819597) > 0.03);
    ck_assert_double_eq(mj_ref_act_apply(&p, -9.0, 10.0), -49.0); /* u clamps to -7 */
    assert_close(mj_ref_act_apply(&p, 2.0, 3.0), 3.0 * sig(3.0) * 2.0, REL_EPS);
    moejit_activation_destroy(a);
}
END_TEST

START_TEST(situ_default_matches_hand_value)
{
    moejit_activation *a = make(MOEJIT_ACT_SITU); /* gate_scale 4, linear_scale 25, no clamp */
    mj_ref_act p = resolve(a);
    ck_assert(p.has_linear_scale && !p.has_clamp);
    /* 25 tanh(2/25) * 4 tanh(1/4) * σ(1) */
    assert_close(mj_ref_act_apply(&p, 2.0, 1.0), 1.4293511315552199, 1e-14);
    moejit_activation_destroy(a);
}
END_TEST

START_TEST(situ_without_linear_scale_and_with_clamp_matches_hand_value)
{
    moejit_activation *a = NULL;
    float clamp = 5.0f;
    ck_assert_int_eq(moejit_activation_situ(4.0f, NULL, &clamp, &a), MOEJIT_OK);
    mj_ref_act p = resolve(a);
    ck_assert(!p.has_linear_scale && p.has_clamp);
    /* u = 8 -> 5 (linear, no tanh), g = 6 -> 5: 5 * 4 tanh(5/4) * σ(5) */
    assert_close(mj_ref_act_apply(&p, 8.0, 6.0), 16.852124080275352, 1e-14);
    /* σ is of the clamped but un-squashed g; σ(4 tanh(g/4)) would give 16.414 */
    ck_assert(fabs(mj_ref_act_apply(&p, 8.0, 6.0) - 16.414106612497424) > 0.4);
    /* the clamp is on g from above only */
    assert_close(mj_ref_act_apply(&p, 1.0, -6.0), 4.0 * tanh(-1.5) * sig(-6.0), 1e-14);
    moejit_activation_destroy(a);
}
END_TEST

START_TEST(geglu_and_geglu_tanh_are_close_but_different)
{
    moejit_activation *e = make(MOEJIT_ACT_GEGLU), *t = make(MOEJIT_ACT_GEGLU_TANH);
    mj_ref_act pe = resolve(e), pt = resolve(t);
    assert_close(mj_ref_act_apply(&pe, 1.0, 1.0), 0.8413447460685429, 1e-15);
    assert_close(mj_ref_act_apply(&pt, 1.0, 1.0), 0.841191990607477, 1e-14);
    for (double g = -3.0; g <= 3.0; g += 0.75) {
        double ve = mj_ref_act_apply(&pe, 2.0, g), vt = mj_ref_act_apply(&pt, 2.0, g);
        ck_assert(fabs(ve - vt) < 2e-3);
        if (g != 0.0)
            ck_assert_msg(ve != vt, "geglu and geglu_tanh agree exactly at g=%g", g);
    }
    /* GeGLU's GELU is on the gate half */
    assert_close(mj_ref_act_apply(&pe, 3.0, 1.0), 3.0 * 0.8413447460685429, 1e-15);
    moejit_activation_destroy(e);
    moejit_activation_destroy(t);
}
END_TEST

START_TEST(relu_and_relu2_differ)
{
    moejit_activation *r = make(MOEJIT_ACT_RELU), *r2 = make(MOEJIT_ACT_RELU2);
    mj_ref_act p = resolve(r), p2 = resolve(r2);
    ck_assert_double_eq(mj_ref_act_apply(&p, 0, 3.0), 3.0);
    ck_assert_double_eq(mj_ref_act_apply(&p2, 0, 3.0), 9.0);
    ck_assert_double_eq(mj_ref_act_apply(&p, 0, 0.5), 0.5);
    ck_assert_double_eq(mj_ref_act_apply(&p2, 0, 0.5), 0.25);
    ck_assert_double_eq(mj_ref_act_apply(&p, 0, -2.0), 0.0);
    ck_assert_double_eq(mj_ref_act_apply(&p2, 0, -2.0), 0.0);
    moejit_activation_destroy(r);
    moejit_activation_destroy(r2);
}
END_TEST

START_TEST(ungated_activations_match_known_values)
{
    moejit_activation *g = make(MOEJIT_ACT_GELU), *s = make(MOEJIT_ACT_SILU),
                      *i = make(MOEJIT_ACT_IDENTITY);
    mj_ref_act pg = resolve(g), ps = resolve(s), pi = resolve(i);
    ck_assert(!pg.gated && !ps.gated && !pi.gated);
    assert_close(mj_ref_act_apply(&pg, 0, 1.0), 0.8413447460685429, 1e-15);
    assert_close(mj_ref_act_apply(&ps, 0, 1.0), 0.7310585786300049, 1e-15);
    ck_assert_double_eq(mj_ref_act_apply(&pi, 123.0, -2.5), -2.5); /* u is ignored */
    moejit_activation_destroy(g);
    moejit_activation_destroy(s);
    moejit_activation_destroy(i);
}
END_TEST

START_TEST(per_expert_override_replaces_the_parameter)
{
    moejit_activation *a = make(MOEJIT_ACT_SWIGLU);
    const float limits[2] = {100.0f, 1.0f};
    const float *param[MJ_ACT_MAX_PARAMS] = {NULL, NULL, limits};
    mj_ref_act p;
    ck_assert_int_eq(mj_ref_act_resolve(a, param, 1, &p), MOEJIT_OK);
    ck_assert_double_eq(p.limit, 1.0);
    ck_assert_double_eq(p.alpha, 1.0); /* the others keep the value's */
    assert_close(mj_ref_act_apply(&p, 5.0, 3.0), sig(1.0) * 1.0, REL_EPS);
    moejit_activation_destroy(a);
}
END_TEST

/* ---- routing ---------------------------------------------------------------------------------- */

static mj_ref_layer routing_layer(mj_routing routing, const float *logits, int64_t E, int64_t k,
                                  const moejit_activation *act)
{
    return (mj_ref_layer){.num_tokens = 1, .hidden = 1, .inter = 1, .num_experts = E,
                          .topk = k, .act = act, .routing = routing, .dtype = MJ_DTYPE_BF16,
                          .router_logits = logits};
}

START_TEST(softmax_topk_weights_are_plain_probabilities)
{
    moejit_activation *a = make(MOEJIT_ACT_RELU);
    /* softmax of {0, ln 2, ln 4, 0} = {1, 2, 4, 1} / 8 */
    const float lg[4] = {0.0f, (float)log(2.0), (float)log(4.0), 0.0f};
    mj_ref_layer L = routing_layer(MJ_ROUTING_SOFTMAX_TOPK, lg, 4, 2, a);
    int32_t ids[2];
    double w[2];
    ck_assert_int_eq(mj_ref_route_token(&L, 0, ids, w), MOEJIT_OK);
    ck_assert_int_eq(ids[0], 2);
    ck_assert_int_eq(ids[1], 1);
    assert_close(w[0], 0.5, 1e-7);
    assert_close(w[1], 0.25, 1e-7);
    ck_assert(w[0] + w[1] < 0.76); /* not renormalised */
    moejit_activation_destroy(a);
}
END_TEST

START_TEST(renormalize_weights_sum_to_one)
{
    moejit_activation *a = make(MOEJIT_ACT_RELU);
    const float lg[4] = {0.0f, (float)log(2.0), (float)log(4.0), 0.0f};
    mj_ref_layer L = routing_layer(MJ_ROUTING_RENORMALIZE, lg, 4, 2, a);
    int32_t ids[2];
    double w[2];
    ck_assert_int_eq(mj_ref_route_token(&L, 0, ids, w), MOEJIT_OK);
    ck_assert_int_eq(ids[0], 2);
    ck_assert_int_eq(ids[1], 1);
    assert_close(w[0], 4.0 / 6.0, 1e-7);
    assert_close(w[1], 2.0 / 6.0, 1e-7);
    /* and on arbitrary logits */
    const float lg8[8] = {0.3f, -1.2f, 2.5f, 0.7f, -0.1f, 1.9f, -3.0f, 0.0f};
    for (int64_t k = 1; k <= 8; k++) {
        mj_ref_layer L8 = routing_layer(MJ_ROUTING_RENORMALIZE, lg8, 8, k, a);
        int32_t id8[8];
        double w8[8], sum = 0;
        ck_assert_int_eq(mj_ref_route_token(&L8, 0, id8, w8), MOEJIT_OK);
        for (int64_t j = 0; j < k; j++)
            sum += w8[j];
        assert_close(sum, 1.0, 1e-14);
        L8.routing = MJ_ROUTING_SOFTMAX_TOPK;
        ck_assert_int_eq(mj_ref_route_token(&L8, 0, id8, w8), MOEJIT_OK);
        sum = 0;
        for (int64_t j = 0; j < k; j++)
            sum += w8[j];
        if (k < 8)
            ck_assert_msg(sum < 1.0 - 1e-3, "softmax_topk k=%lld sums to %g", (long long)k, sum);
        else
            assert_close(sum, 1.0, 1e-14);
    }
    moejit_activation_destroy(a);
}
END_TEST

START_TEST(routing_ties_go_to_the_lower_expert_id)
{
    moejit_activation *a = make(MOEJIT_ACT_RELU);
    const float lg[4] = {1.0f, 3.0f, 3.0f, 0.0f};
    int32_t ids[2];
    double w[2];
    mj_ref_layer L = routing_layer(MJ_ROUTING_RENORMALIZE, lg, 4, 1, a);
    ck_assert_int_eq(mj_ref_route_token(&L, 0, ids, w), MOEJIT_OK);
    ck_assert_int_eq(ids[0], 1);
    ck_assert_double_eq(w[0], 1.0);
    const float lg2[4] = {3.0f, 1.0f, 3.0f, 3.0f};
    L = routing_layer(MJ_ROUTING_SOFTMAX_TOPK, lg2, 4, 2, a);
    ck_assert_int_eq(mj_ref_route_token(&L, 0, ids, w), MOEJIT_OK);
    ck_assert_int_eq(ids[0], 0);
    ck_assert_int_eq(ids[1], 2); /* 3 ties with 0 and 2 and loses to both */
    ck_assert_double_eq(w[0], w[1]);
    moejit_activation_destroy(a);
}
END_TEST


/* logit(p) = ln(p / (1 - p)), so that σ(logit) = p up to the float rounding of the logit */
static float logit(double p)
{
    return (float)log(p / (1.0 - p));
}

START_TEST(sigmoid_topk_weighs_by_sigma_without_renormalising)
{
    moejit_activation *a = make(MOEJIT_ACT_RELU);
    const float lg[4] = {0.0f, logit(0.75), logit(0.25), 2.0f};
    mj_ref_layer L = routing_layer(MJ_ROUTING_SIGMOID_TOPK, lg, 4, 2, a);
    int32_t ids[2];
    double w[2];
    ck_assert_int_eq(mj_ref_route_token(&L, 0, ids, w), MOEJIT_OK);
    ck_assert_int_eq(ids[0], 3);
    ck_assert_int_eq(ids[1], 1);
    assert_close(w[0], 0.8807970779778823, 1e-15);
    assert_close(w[1], 0.75, 1e-7);
    moejit_activation_destroy(a);
}
END_TEST

START_TEST(sigmoid_renorm_divides_by_the_sum_plus_1e_minus_20)
{
    moejit_activation *a = make(MOEJIT_ACT_RELU);
    const float lg[4] = {0.0f, logit(0.75), logit(0.25), 2.0f};
    mj_ref_layer L = routing_layer(MJ_ROUTING_SIGMOID_RENORM, lg, 4, 2, a);
    int32_t ids[2];
    double w[2];
    ck_assert_int_eq(mj_ref_route_token(&L, 0, ids, w), MOEJIT_OK);
    ck_assert_int_eq(ids[0], 3);
    ck_assert_int_eq(ids[1], 1);
    assert_close(w[0], 0.8807970779778823 / (0.8807970779778823 + 0.75), 1e-7);
    assert_close(w[0] + w[1], 1.0, 1e-15);
    /* the 1e-20 is what keeps σ sums that underflow finite: logits of -1000 give 0 / 1e-20 */
    const float low[2] = {-1000.0f, -1000.0f};
    L = routing_layer(MJ_ROUTING_SIGMOID_RENORM, low, 2, 2, a);
    ck_assert_int_eq(mj_ref_route_token(&L, 0, ids, w), MOEJIT_OK);
    ck_assert_double_eq(w[0], 0.0);
    ck_assert_double_eq(w[1], 0.0);
    moejit_activation_destroy(a);
}
END_TEST

START_TEST(llama4_takes_the_top_logit_with_its_sigma)
{
    moejit_activation *a = make(MOEJIT_ACT_RELU);
    const float lg[4] = {0.5f, -1.0f, 2.0f, 2.0f};
    mj_ref_layer L = routing_layer(MJ_ROUTING_LLAMA4, lg, 4, 1, a);
    int32_t ids[1];
    double w[1];
    ck_assert_int_eq(mj_ref_route_token(&L, 0, ids, w), MOEJIT_OK);
    ck_assert_int_eq(ids[0], 2); /* the tie with 3 goes to the lower id */
    assert_close(w[0], 0.8807970779778823, 1e-15); /* σ(2), not 1 */
    moejit_activation_destroy(a);
}
END_TEST

/* E = 8 in 4 groups of 2 ({0,1} {2,3} {4,5} {6,7}), σ = p below. Group scores (sum of the
 * two): 1.0, 1.2, 1.25, 0.2; the best 2 groups are {4,5} and {2,3}, so expert 0 (the best
 * single score, 0.95) is masked: the top-2 is {4 (0.7), 2 (0.6, tie with 3 to the lower id)}
 * where plain sigmoid top-2 would be {0, 4}. */
static const double ds_p[8] = {0.95, 0.05, 0.6, 0.6, 0.7, 0.55, 0.1, 0.1};

START_TEST(deepseek_v3_group_masking_changes_the_selection)
{
    moejit_activation *a = make(MOEJIT_ACT_RELU);
    float lg[8];
    for (int e = 0; e < 8; e++)
        lg[e] = logit(ds_p[e]);
    mj_ref_layer L = routing_layer(MJ_ROUTING_DEEPSEEK_V3, lg, 8, 2, a);
    L.n_group = 4;
    L.topk_group = 2;
    L.routed_scaling = 2.5;
    int32_t ids[2];
    double w[2];
    ck_assert_int_eq(mj_ref_route_token(&L, 0, ids, w), MOEJIT_OK);
    ck_assert_int_eq(ids[0], 4);
    ck_assert_int_eq(ids[1], 2);
    assert_close(w[0], 0.7 / 1.3 * 2.5, 1e-6); /* renormalised, times routed_scaling */
    assert_close(w[1], 0.6 / 1.3 * 2.5, 1e-6);
    /* without masking (one group, or groups of one expert) expert 0 wins */
    L.n_group = 1;
    L.topk_group = 1;
    ck_assert_int_eq(mj_ref_route_token(&L, 0, ids, w), MOEJIT_OK);
    ck_assert_int_eq(ids[0], 0);
    ck_assert_int_eq(ids[1], 4);
    L.n_group = 8;
    L.topk_group = 2;
    ck_assert_int_eq(mj_ref_route_token(&L, 0, ids, w), MOEJIT_OK);
    ck_assert_int_eq(ids[0], 0);
    ck_assert_int_eq(ids[1], 4);
    assert_close(w[0], 0.95 / 1.65 * 2.5, 1e-6);
    moejit_activation_destroy(a);
}
END_TEST

START_TEST(deepseek_v3_bias_selects_but_does_not_weigh)
{
    moejit_activation *a = make(MOEJIT_ACT_RELU);
    float lg[8];
    for (int e = 0; e < 8; e++)
        lg[e] = logit(ds_p[e]);
    /* +0.2 on expert 3: biased 0.8 beats 4 (0.7); the weights stay the unbiased 0.6, 0.7 */
    float bias[8] = {0, 0, 0, 0.2f, 0, 0, 0, 0};
    mj_ref_layer L = routing_layer(MJ_ROUTING_DEEPSEEK_V3, lg, 8, 2, a);
    L.n_group = 4;
    L.topk_group = 2;
    L.routing_bias = bias;
    int32_t ids[2];
    double w[2];
    ck_assert_int_eq(mj_ref_route_token(&L, 0, ids, w), MOEJIT_OK);
    ck_assert_int_eq(ids[0], 3);
    ck_assert_int_eq(ids[1], 4);
    assert_close(w[0], 0.6 / 1.3, 1e-6); /* routed_scaling 0 means 1 */
    assert_close(w[1], 0.7 / 1.3, 1e-6);
    /* a bias also lifts its group: +1.2 on 6 makes {6,7} score 1.3 + 0.1 = 1.4, the best
     * group; 6 is chosen first, weighed by its unbiased σ = 0.1 */
    float lift[8] = {0, 0, 0, 0, 0, 0, 1.2f, 0};
    L.routing_bias = lift;
    ck_assert_int_eq(mj_ref_route_token(&L, 0, ids, w), MOEJIT_OK);
    ck_assert_int_eq(ids[0], 6);
    ck_assert_int_eq(ids[1], 4); /* groups kept: {6,7} (1.4) and {4,5} (1.25) */
    assert_close(w[0], 0.1 / 0.8, 1e-6);
    moejit_activation_destroy(a);
}
END_TEST

START_TEST(bf16_snapped_logits_route_on_the_snapped_values)
{
    /* 1.00390625 is 1 + 2^-8: a tie in bf16 that rounds to 1.0, tying with expert 1 */
    moejit_activation *a = make(MOEJIT_ACT_RELU);
    float lg[2] = {1.00390625f, 1.0f};
    int32_t ids[1];
    double w[1];
    mj_ref_layer L = routing_layer(MJ_ROUTING_LLAMA4, lg, 2, 1, a);
    lg[0] = 0.99f;
    ck_assert_int_eq(mj_ref_route_token(&L, 0, ids, w), MOEJIT_OK);
    ck_assert_int_eq(ids[0], 1);
    lg[0] = mj_half_snap(1.00390625f, MJ_DTYPE_BF16);
    ck_assert_float_eq(lg[0], 1.0f);
    ck_assert_int_eq(mj_ref_route_token(&L, 0, ids, w), MOEJIT_OK);
    ck_assert_int_eq(ids[0], 0);
    moejit_activation_destroy(a);
}
END_TEST

/* ---- whole layers by hand ---------------------------------------------------------------------- */

/* One token, one expert, H = 2, I = 1, SwiGLU at defaults, precomputed weight 0.5:
 * x = [1, 2]; W1 = [up row [1, 0]; gate row [0, 1]] -> u = 1, g = 2;
 * a = silu(2) * 1 = 1.7615941559557646; W2 = [[1], [-2]] -> out = 0.5 * [a, -2a]. */
static const float one_x[2] = {1.0f, 2.0f};
static const float one_w1[4] = {1.0f, 0.0f, 0.0f, 1.0f};
static const float one_w2[2] = {1.0f, -2.0f};
static const int32_t one_id[1] = {0};
static const float one_wt[1] = {0.5f};

static mj_ref_layer one_layer(const moejit_activation *act, mj_dtype dt)
{
    return (mj_ref_layer){.num_tokens = 1, .hidden = 2, .inter = 1, .num_experts = 1, .topk = 1,
                          .act = act, .routing = MJ_ROUTING_PRECOMPUTED, .dtype = dt,
                          .x = one_x, .topk_ids = one_id, .topk_weights = one_wt,
                          .w1 = one_w1, .w2 = one_w2};
}

START_TEST(one_token_one_expert_layer_matches_hand_computation)
{
    moejit_activation *a = make(MOEJIT_ACT_SWIGLU);
    mj_ref_layer L = one_layer(a, MJ_DTYPE_BF16);
    double ideal[2], replay[2];
    ck_assert_int_eq(mj_ref_forward(&L, 1, ideal, replay, MJ_REF_REPLAY_SIMT), MOEJIT_OK);
    assert_close(ideal[0], 0.8807970779778823, 1e-15);
    assert_close(ideal[1], -1.7615941559557646, 1e-15);
    /* replay: a stored in bf16 (ulp 2^-7 on [1, 2)): 1.76159 -> 1.7578125 */
    ck_assert_double_eq(replay[0], 0.87890625);
    ck_assert_double_eq(replay[1], -1.7578125);
    /* in fp16 (ulp 2^-10): 1.76159 -> 1804/1024 = 1.76171875 */
    L.dtype = MJ_DTYPE_FP16;
    ck_assert_int_eq(mj_ref_forward(&L, 1, NULL, replay, MJ_REF_REPLAY_SIMT), MOEJIT_OK);
    ck_assert_double_eq(replay[0], 0.880859375);
    /* softmax routing over a single expert gives it weight 1 */
    const float lg[1] = {-3.0f};
    L.routing = MJ_ROUTING_SOFTMAX_TOPK;
    L.router_logits = lg;
    ck_assert_int_eq(mj_ref_forward(&L, 1, ideal, NULL, 0), MOEJIT_OK);
    assert_close(ideal[0], 1.7615941559557646, 1e-15);
    moejit_activation_destroy(a);
}
END_TEST

/* The tensor-core replay also stores y in the dtype: with W2 = [[1], [-3]], y = a · [1, -3] =
 * [1.7578125, -5.2734375] (a already in bf16); -5.2734375 = 101.0100011b has 10 significant
 * bits, bf16 keeps 8: -5.28125, so out[1] = 0.5 · -5.28125, where simt's replay keeps y. */
START_TEST(tc_replay_rounds_each_expert_output)
{
    static const float w2[2] = {1.0f, -3.0f};
    moejit_activation *a = make(MOEJIT_ACT_SWIGLU);
    mj_ref_layer L = one_layer(a, MJ_DTYPE_BF16);
    L.w2 = w2;
    double simt[2], tc[2];
    ck_assert_int_eq(mj_ref_forward(&L, 1, NULL, simt, MJ_REF_REPLAY_SIMT), MOEJIT_OK);
    ck_assert_int_eq(mj_ref_forward(&L, 1, NULL, tc, MJ_REF_REPLAY_TC), MOEJIT_OK);
    ck_assert_double_eq(simt[0], 0.87890625);
    ck_assert_double_eq(tc[0], 0.87890625);
    ck_assert_double_eq(simt[1], -2.63671875);
    ck_assert_double_eq(tc[1], -2.640625);
    moejit_activation_destroy(a);
}
END_TEST

/* MJ_REF_ROUND_W: the replay multiplies weights rounded to the dtype, the ideal layer the given
 * ones. 1 + 2^-8 lies halfway between bf16's 1 and 1 + 2^-7 and rounds to even: 1. */
START_TEST(round_w_rounds_the_weights_for_the_replay_only)
{
    static const float w2[2] = {1.0f, 1.00390625f}, w2_rounded[2] = {1.0f, 1.0f};
    moejit_activation *a = make(MOEJIT_ACT_SWIGLU);
    mj_ref_layer L = one_layer(a, MJ_DTYPE_BF16);
    L.w2 = w2;
    double ideal[2], replay[2], ideal_plain[2], want[2];
    ck_assert_int_eq(mj_ref_forward(&L, 1, ideal, replay, MJ_REF_REPLAY_TC | MJ_REF_ROUND_W), MOEJIT_OK);
    ck_assert_int_eq(mj_ref_forward(&L, 1, ideal_plain, NULL, 0), MOEJIT_OK);
    L.w2 = w2_rounded;
    ck_assert_int_eq(mj_ref_forward(&L, 1, NULL, want, MJ_REF_REPLAY_TC), MOEJIT_OK);
    for (int i = 0; i < 2; i++) {
        ck_assert_double_eq(ideal[i], ideal_plain[i]);
        ck_assert_double_eq(replay[i], want[i]);
    }
    ck_assert_double_ne(ideal[1], ideal[0]); /* the unrounded weight reached the ideal layer */
    moejit_activation_destroy(a);
}
END_TEST

/* Which roundings each backend's kernels make, per spec: simt keeps y in fp32; the tensor
 * cores store it, round 4-bit weights, and wgmma's fp8 GEMM1 sums with QGMMA's slack. */
START_TEST(replay_flags_follow_the_backend_and_format)
{
    static const struct { const char *spec; unsigned flags; double slack; } c[] = {
        {"backend=simt,quant=bf16,act=silu,arch=sm_80", MJ_REF_REPLAY_SIMT, 0.0},
        {"backend=simt,quant=fp8_block,act=silu,arch=sm_90a", MJ_REF_REPLAY_FP8, 0.0},
        {"backend=simt,quant=mxfp4,act=silu,arch=sm_90a", MJ_REF_REPLAY_SIMT, 0.0},
        {"backend=mma,quant=bf16,act=silu,arch=sm_80", MJ_REF_REPLAY_TC, 0.0},
        {"backend=mma,quant=w4a16,act=silu,arch=sm_90a", MJ_REF_REPLAY_TC | MJ_REF_ROUND_W, 0.0},
        {"backend=wgmma,quant=mxfp4,act=silu,arch=sm_90a", MJ_REF_REPLAY_TC | MJ_REF_ROUND_W, 0.0},
        {"backend=wgmma,quant=fp8_tensor,fp8_act=static,act=silu,arch=sm_90a",
         MJ_REF_REPLAY_TC | MJ_REF_QUANT_X | MJ_REF_QUANT_ACT, MJ_REF_QGMMA_SLACK},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        moejit_spec *sp = NULL;
        ck_assert_int_eq(moejit_spec_parse(c[i].spec, &sp), MOEJIT_OK);
        ck_assert_msg(mj_ref_replay_flags(sp) == c[i].flags, "%s: flags %#x", c[i].spec, mj_ref_replay_flags(sp));
        ck_assert_double_eq(mj_ref_gemm_slack(sp), c[i].slack);
        moejit_spec_destroy(sp);
    }
}
END_TEST

START_TEST(swapped_halves_change_the_layer)
{
    moejit_activation *a = make(MOEJIT_ACT_SWIGLU);
    mj_ref_layer L = one_layer(a, MJ_DTYPE_BF16);
    L.w1_layout = MJ_W1_GATE_UP; /* now g = 1, u = 2: silu(1) * 2 */
    double out[2];
    ck_assert_int_eq(mj_ref_forward(&L, 1, out, NULL, 0), MOEJIT_OK);
    assert_close(out[0], 0.5 * 0.7310585786300049 * 2.0, 1e-15);
    moejit_activation_destroy(a);
}
END_TEST

START_TEST(each_w1_layout_takes_its_own_rows)
{
    /* H = 2, I = 2, x = [1, 0]: fc1 is W1's first column = [1, 2, 3, 4]; W2 = identity. */
    moejit_activation *a = make(MOEJIT_ACT_SWIGLU);
    const float x[2] = {1, 0}, w1[8] = {1, 0, 2, 0, 3, 0, 4, 0}, w2[4] = {1, 0, 0, 1};
    const int32_t id[1] = {0};
    const float wt[1] = {1.0f};
    mj_ref_layer L = {.num_tokens = 1, .hidden = 2, .inter = 2, .num_experts = 1, .topk = 1,
                      .act = a, .routing = MJ_ROUTING_PRECOMPUTED, .dtype = MJ_DTYPE_BF16,
                      .x = x, .topk_ids = id, .topk_weights = wt, .w1 = w1, .w2 = w2};
    const mj_w1_layout layouts[3] = {MJ_W1_UP_GATE, MJ_W1_GATE_UP, MJ_W1_INTERLEAVED};
    /* (u, g) per column: up_gate (1,3),(2,4); gate_up (3,1),(4,2); interleaved (2,1),(4,3) */
    const double u[3][2] = {{1, 2}, {3, 4}, {2, 4}}, g[3][2] = {{3, 4}, {1, 2}, {1, 3}};
    for (int l = 0; l < 3; l++) {
        L.w1_layout = layouts[l];
        double out[2];
        ck_assert_int_eq(mj_ref_forward(&L, 1, out, NULL, 0), MOEJIT_OK);
        for (int i = 0; i < 2; i++)
            assert_close(out[i], g[l][i] * sig(g[l][i]) * u[l][i], 1e-15);
    }
    moejit_activation_destroy(a);
}
END_TEST

START_TEST(biases_enter_before_the_activation_and_inside_the_sum)
{
    moejit_activation *a = make(MOEJIT_ACT_IDENTITY);
    const float x[2] = {1, 0}, w1[4] = {1, 0, 0, 1}, w2[4] = {1, 0, 0, 1};
    const float b1[2] = {1, -1}, b2[2] = {10, 20};
    const int32_t id[1] = {0};
    const float wt[1] = {0.5f};
    mj_ref_layer L = {.num_tokens = 1, .hidden = 2, .inter = 2, .num_experts = 1, .topk = 1,
                      .act = a, .routing = MJ_ROUTING_PRECOMPUTED, .dtype = MJ_DTYPE_BF16,
                      .x = x, .topk_ids = id, .topk_weights = wt, .w1 = w1, .w2 = w2,
                      .b1 = b1, .b2 = b2};
    double out[2];
    ck_assert_int_eq(mj_ref_forward(&L, 1, out, NULL, 0), MOEJIT_OK);
    ck_assert_double_eq(out[0], 0.5 * (2 + 10));
    ck_assert_double_eq(out[1], 0.5 * (-1 + 20));
    moejit_activation_destroy(a);
}
END_TEST

START_TEST(expert_parallelism_drops_foreign_experts)
{
    /* E = 4, this rank owns [2, 4); identity activation, H = 2, I = 1.
     * Local expert 2: W1 [1, 0], W2 [[1], [1]]; local expert 3: W1 [0, 1], W2 [[2], [3]].
     * Token 0 routes to {0 (foreign), 3}: only 3 counts: fc1 = 2, y = [4, 6], * 0.5.
     * Token 1 routes to {1, 0}: both foreign: exactly zero. */
    moejit_activation *a = make(MOEJIT_ACT_IDENTITY);
    const float x[4] = {1, 2, 3, 4}, w1[4] = {1, 0, 0, 1}, w2[4] = {1, 1, 2, 3};
    const int32_t ids[4] = {0, 3, 1, 0};
    const float wt[4] = {0.25f, 0.5f, 0.7f, 0.3f};
    mj_ref_layer L = {.num_tokens = 2, .hidden = 2, .inter = 1, .num_experts = 4, .topk = 2,
                      .expert_offset = 2, .num_local_experts = 2, .act = a,
                      .routing = MJ_ROUTING_PRECOMPUTED, .dtype = MJ_DTYPE_BF16, .x = x,
                      .topk_ids = ids, .topk_weights = wt, .w1 = w1, .w2 = w2};
    double out[4];
    ck_assert_int_eq(mj_ref_forward(&L, 2, out, NULL, 0), MOEJIT_OK);
    ck_assert_double_eq(out[0], 2.0);
    ck_assert_double_eq(out[1], 3.0);
    ck_assert_double_eq(out[2], 0.0);
    ck_assert_double_eq(out[3], 0.0);
    moejit_activation_destroy(a);
}
END_TEST

/* Deterministic pseudo-random floats in [-1, 1) (xorshift), snapped to bf16. */
static void fill(float *v, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        v[i] = mj_half_snap((float)((double)(seed >> 11) * 0x1p-52 - 1.0), MJ_DTYPE_BF16);
    }
}

START_TEST(forward_does_not_depend_on_threads_and_replay_without_flags_is_ideal)
{
    enum { T = 37, H = 24, I = 16, E = 8, K = 3 };
    moejit_activation *a = make(MOEJIT_ACT_GEGLU);
    float *x = malloc(sizeof(float) * T * H), *lg = malloc(sizeof(float) * T * E);
    float *w1 = malloc(sizeof(float) * E * 2 * I * H), *w2 = malloc(sizeof(float) * E * H * I);
    fill(x, T * H, 1);
    fill(lg, T * E, 2);
    fill(w1, E * 2 * I * H, 3);
    fill(w2, E * H * I, 4);
    mj_ref_layer L = {.num_tokens = T, .hidden = H, .inter = I, .num_experts = E, .topk = K,
                      .act = a, .routing = MJ_ROUTING_SOFTMAX_TOPK, .dtype = MJ_DTYPE_BF16,
                      .x = x, .router_logits = lg, .w1 = w1, .w2 = w2};
    static double o1[T * H], o5[T * H], r0[T * H], rr[T * H];
    ck_assert_int_eq(mj_ref_forward(&L, 1, o1, r0, 0), MOEJIT_OK);
    ck_assert_int_eq(mj_ref_forward(&L, 5, o5, rr, MJ_REF_REPLAY_SIMT), MOEJIT_OK);
    ck_assert(memcmp(o1, o5, sizeof o1) == 0);
    ck_assert(memcmp(o1, r0, sizeof o1) == 0);
    /* replaying the bf16 store of a moves the result, but only by about bf16's precision */
    double maxd = 0, maxr = 0;
    for (int i = 0; i < T * H; i++) {
        maxd = fmax(maxd, fabs(rr[i] - o1[i]));
        maxr = fmax(maxr, fabs(o1[i]));
    }
    ck_assert(maxd > 0);
    ck_assert_msg(maxd / maxr < 0.02, "replay moved the result by %g of max", maxd / maxr);
    free(x);
    free(lg);
    free(w1);
    free(w2);
    moejit_activation_destroy(a);
}
END_TEST

START_TEST(invalid_layers_are_rejected_naming_the_field)
{
    moejit_activation *a = make(MOEJIT_ACT_SWIGLU);
    mj_ref_layer L = one_layer(a, MJ_DTYPE_BF16);
    double out[2];
    L.topk = 2; /* > E = 1 */
    ck_assert_int_eq(mj_ref_forward(&L, 1, out, NULL, 0), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "reference.topk"));
    L = one_layer(a, MJ_DTYPE_BF16);
    L.expert_offset = 1;
    ck_assert_int_eq(mj_ref_forward(&L, 1, out, NULL, 0), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "expert_offset"));
    /* deepseek_v3: groups must split E evenly, and leave k candidates */
    const float lg8[8] = {0};
    L = routing_layer(MJ_ROUTING_DEEPSEEK_V3, lg8, 8, 2, a);
    L.x = one_x;
    L.w1 = one_w1;
    L.w2 = one_w2;
    L.n_group = 3;
    ck_assert_int_eq(mj_ref_forward(&L, 1, out, NULL, 0), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "reference.n_group"));
    L.n_group = 4;
    L.topk_group = 1;
    L.topk = 3; /* one group of 2 experts */
    ck_assert_int_eq(mj_ref_forward(&L, 1, out, NULL, 0), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "topk_group"));
    L = one_layer(a, MJ_DTYPE_BF16);
    L.act_quant = MJ_REF_AQ_COUNT;
    ck_assert_int_eq(mj_ref_forward(&L, 1, out, NULL, 0), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "reference.act_quant"));
    moejit_activation_destroy(a);
}
END_TEST


/* ---- fp8 activation replay ---------------------------------------------------------------------- */

/* Identity activation, H = 2, I = 1, one expert of weight 1: W1 = [1, 1], W2 = [[1], [2]]. */
static mj_ref_layer fp8_layer(const moejit_activation *act, const float *x, int64_t T,
                              const int32_t *ids, const float *wt)
{
    static const float w1[2] = {1, 1}, w2[2] = {1, 2};
    return (mj_ref_layer){.num_tokens = T, .hidden = 2, .inter = 1, .num_experts = 1, .topk = 1,
                          .act = act, .routing = MJ_ROUTING_PRECOMPUTED, .dtype = MJ_DTYPE_BF16,
                          .x = x, .topk_ids = ids, .topk_weights = wt, .w1 = w1, .w2 = w2};
}

START_TEST(fp8_replay_quantizes_x_per_token_and_ideal_does_not)
{
    moejit_activation *a = make(MOEJIT_ACT_IDENTITY);
    const float x[2] = {1.0f, 0.3f};
    const int32_t ids[1] = {0};
    const float wt[1] = {1.0f};
    mj_ref_layer L = fp8_layer(a, x, 1, ids, wt);
    L.act_quant = MJ_REF_AQ_FP8_TOKEN;
    double ideal[2], replay[2];
    ck_assert_int_eq(mj_ref_forward(&L, 1, ideal, replay, MJ_REF_QUANT_X), MOEJIT_OK);
    /* scale s = fp32(1/448): x/s = {448, 134.4 -> 128 (ulp 16 in [128, 256))}; a = 576 s */
    double s = (double)(1.0f / 448.0f);
    assert_close(ideal[0], 1.3, 1e-7);
    assert_close(ideal[1], 2.6, 1e-7);
    ck_assert_double_eq(replay[0], 576.0 * s);
    ck_assert_double_eq(replay[1], 2.0 * 576.0 * s);
    /* without the flag the replay is the ideal */
    ck_assert_int_eq(mj_ref_forward(&L, 1, NULL, replay, 0), MOEJIT_OK);
    ck_assert_double_eq(replay[0], ideal[0]);
    moejit_activation_destroy(a);
}
END_TEST

START_TEST(fp8_per_tensor_intermediate_shares_one_scale_across_tokens)
{
    /* two tokens, x = {448, 0} and {3.3, 0}: a = x[0] per token. Per tensor the scale is
     * 448/448 = 1 for both, so 3.3 -> 3.25 (ulp 0.25); per token 3.3 keeps its own scale. */
    moejit_activation *a = make(MOEJIT_ACT_IDENTITY);
    const float x[4] = {448.0f, 0.0f, 3.3f, 0.0f};
    const int32_t ids[2] = {0, 0};
    const float wt[2] = {1.0f, 1.0f};
    mj_ref_layer L = fp8_layer(a, x, 2, ids, wt);
    double out[4];
    L.act_quant = MJ_REF_AQ_FP8_TENSOR;
    ck_assert_int_eq(mj_ref_forward(&L, 2, NULL, out, MJ_REF_QUANT_ACT), MOEJIT_OK);
    ck_assert_double_eq(out[0], 448.0);
    ck_assert_double_eq(out[2], 3.25);
    ck_assert_double_eq(out[3], 6.5);
    L.act_quant = MJ_REF_AQ_FP8_TOKEN;
    ck_assert_int_eq(mj_ref_forward(&L, 2, NULL, out, MJ_REF_QUANT_ACT), MOEJIT_OK);
    assert_close(out[2], 3.3, 1e-7);
    /* a static scale of 0.5 saturates 448 / 0.5 = 896 to 448 · 0.5 = 224 */
    L.act_quant = MJ_REF_AQ_FP8_TENSOR;
    L.a_scale = 0.5;
    ck_assert_int_eq(mj_ref_forward(&L, 1, NULL, out, MJ_REF_QUANT_ACT), MOEJIT_OK);
    ck_assert_double_eq(out[0], 224.0);
    ck_assert_double_eq(out[2], 3.25); /* 6.6 -> 6.5 (ulp 0.5), · 0.5 */
    moejit_activation_destroy(a);
}
END_TEST

/* One token, one expert of weight *wt, H = I = 2, W1 = W2 = the unit matrix: with the identity
 * activation, out = wt · a, a = x after the layer's roundings. */
static mj_ref_layer unit_layer(const moejit_activation *act, const float *x, const int32_t *ids, const float *wt)
{
    static const float unit[4] = {1, 0, 0, 1};
    return (mj_ref_layer){.num_tokens = 1, .hidden = 2, .inter = 2, .num_experts = 1, .topk = 1, .act = act,
                          .routing = MJ_ROUTING_PRECOMPUTED, .dtype = MJ_DTYPE_BF16, .x = x, .topk_ids = ids,
                          .topk_weights = wt, .w1 = unit, .w2 = unit};
}

/* a = x (unit_layer): out is a after bf16 and e4m3. a[0] lies 2^-20 above the bf16 midpoint
 * 8.71875 between 8.6875 and 8.75, a[1] = 1. */
START_TEST(fp8_amax_on_a_rounding_midpoint_has_two_sides)
{
    moejit_activation *a = make(MOEJIT_ACT_IDENTITY);
    float x[2] = {(float)(8.71875 * (1.0 + 0x1p-20)), 1.0f};
    const int32_t ids[1] = {0};
    const float wt[1] = {1.0f};
    mj_ref_layer L = unit_layer(a, x, ids, wt);
    const unsigned f = MJ_REF_ROUND_ACT | MJ_REF_QUANT_ACT;
    static const mj_ref_act_quant modes[2] = {MJ_REF_AQ_FP8_TENSOR, MJ_REF_AQ_FP8_TOKEN};
    for (int m = 0; m < 2; m++) {
        L.act_quant = modes[m];
        x[0] = (float)(8.71875 * (1.0 + 0x1p-20));
        double out[2], low[2], high[2];
        int64_t amb = -1;
        ck_assert_int_eq(mj_ref_forward_ex(&L, 1, NULL, out, f, &amb, NULL), MOEJIT_OK);
        ck_assert_int_eq(amb, 1);
        /* nearest: a[0] -> 8.75, scale 8.75/448 = 5/256 exactly: 448 -> 8.75; 1 -> 51.2 -> 52 */
        ck_assert_double_eq(out[0], 8.75);
        ck_assert_double_eq(out[1], 52.0 * 5.0 / 256.0);
        ck_assert_int_eq(mj_ref_forward_ex(&L, 1, NULL, high, f | MJ_REF_AMAX_HIGH, &amb, NULL), MOEJIT_OK);
        ck_assert_double_eq(high[0], out[0]);
        ck_assert_double_eq(high[1], out[1]);
        /* the low side: amax 8.6875, so the stored 8.75 saturates at 448 and 1 -> 51.57 -> 52 */
        double s = mj_ref_fp8_scale(8.6875);
        ck_assert_double_ne(s, 5.0 / 256.0);
        ck_assert_int_eq(mj_ref_forward_ex(&L, 1, NULL, low, f | MJ_REF_AMAX_LOW, &amb, NULL), MOEJIT_OK);
        ck_assert_double_eq(low[0], 448.0 * s);
        ck_assert_double_eq(low[1], 52.0 * s);
        /* 8.7 is nowhere near a midpoint: one side, and the flags change nothing */
        x[0] = 8.7f;
        ck_assert_int_eq(mj_ref_forward_ex(&L, 1, NULL, out, f, &amb, NULL), MOEJIT_OK);
        ck_assert_int_eq(amb, 0);
        ck_assert_int_eq(mj_ref_forward_ex(&L, 1, NULL, low, f | MJ_REF_AMAX_LOW, &amb, NULL), MOEJIT_OK);
        ck_assert_int_eq(mj_ref_forward_ex(&L, 1, NULL, high, f | MJ_REF_AMAX_HIGH, &amb, NULL), MOEJIT_OK);
        ck_assert_mem_eq(low, out, sizeof out);
        ck_assert_mem_eq(high, out, sizeof out);
    }
    moejit_activation_destroy(a);
}
END_TEST

/* The flip bound's cases below: a value 2^-20 above the bf16 midpoint of 17 and 17.125 (a
 * flip the kernel's fp32 could make), one 2^-10 above it (none it could). */
#define NEAR_MIDPOINT ((float)(17.0625 * (1.0 + 0x1p-20)))
#define OFF_MIDPOINT ((float)(17.0625 * (1.0 + 0x1p-10)))

/* unit_layer with the slot weight 0.5, the flip bound's cases below. */
static mj_ref_layer half_weight_layer(const moejit_activation *act, const float *x)
{
    static const int32_t ids[1] = {0};
    static const float wt[1] = {0.5f};
    return unit_layer(act, x, ids, wt);
}

/* The flip bound: a = x (unit_layer), static a scale 1. a[0] = 17.0625 (1 + 2^-20)
 * lies just above the bf16 midpoint of 17 and 17.125; the replay stores 17.125, which e4m3
 * takes to 18 (step 2 in [16, 32)), while 17.0 would have gone to 16 (the tie, to even): the
 * kernel may land 2 away, so out[0] may. a[1] = 1 is far from any midpoint: 0. */
START_TEST(fp8_flip_bound_counts_a_value_on_a_midpoint_of_the_dtype)
{
    moejit_activation *a = make(MOEJIT_ACT_IDENTITY);
    float x[2] = {NEAR_MIDPOINT, 1.0f};
    mj_ref_layer L = half_weight_layer(a, x);
    L.act_quant = MJ_REF_AQ_FP8_TENSOR;
    L.a_scale = 1.0;
    const unsigned f = MJ_REF_ROUND_ACT | MJ_REF_QUANT_ACT;
    double out[2], flip[2] = {-1, -1};
    ck_assert_int_eq(mj_ref_forward_ex(&L, 1, NULL, out, f, NULL, flip), MOEJIT_OK);
    ck_assert_double_eq(out[0], 0.5 * 18.0);
    ck_assert_double_eq(out[1], 0.5 * 1.0);
    ck_assert_double_eq(flip[0], 0.5 * 2.0); /* the slot's weight times |W2| times the step */
    ck_assert_double_eq(flip[1], 0.0);
    /* 2^-10 above the midpoint is no flip the kernel's fp32 could make */
    x[0] = OFF_MIDPOINT;
    ck_assert_int_eq(mj_ref_forward_ex(&L, 1, NULL, out, f, NULL, flip), MOEJIT_OK);
    ck_assert_double_eq(flip[0], 0.0);
    moejit_activation_destroy(a);
}
END_TEST

/* The flip bound of every rounding the replay makes (unit_layer, a = y = fc1 = x, slot weight
 * 0.5): x[0] = 17.0625 (1 + 2^-20) lies just above the bf16 midpoint of 17 and 17.125, so
 * whichever one of fc1, a and y is rounded there, the kernel may store 17.0 where the replay
 * stores 17.125, and out[0] may move by 0.5 · 0.125; rounded at fc1, a and y then hold 17.0 or
 * 17.125 exactly, no midpoint, so all three together count the one step once. x[1] = 1 and an
 * x[0] 2^-10 above the midpoint give 0. */
START_TEST(flip_bound_counts_fc1_a_and_y_on_a_midpoint_of_the_dtype)
{
    moejit_activation *a = make(MOEJIT_ACT_IDENTITY);
    float x[2] = {NEAR_MIDPOINT, 1.0f};
    mj_ref_layer L = half_weight_layer(a, x);
    static const unsigned flags[4] = {MJ_REF_ROUND_FC1, MJ_REF_ROUND_ACT, MJ_REF_ROUND_Y,
                                      MJ_REF_ROUND_FC1 | MJ_REF_ROUND_ACT | MJ_REF_ROUND_Y};
    for (int i = 0; i < 4; i++) {
        double out[2], flip[2] = {-1, -1};
        x[0] = NEAR_MIDPOINT;
        ck_assert_int_eq(mj_ref_forward_ex(&L, 1, NULL, out, flags[i], NULL, flip), MOEJIT_OK);
        ck_assert_double_eq(out[0], 0.5 * 17.125);
        ck_assert_double_eq(flip[0], 0.5 * 0.125);
        ck_assert_double_eq(flip[1], 0.0);
        x[0] = OFF_MIDPOINT;
        ck_assert_int_eq(mj_ref_forward_ex(&L, 1, NULL, out, flags[i], NULL, flip), MOEJIT_OK);
        ck_assert_double_eq(flip[0], 0.0);
        ck_assert_double_eq(flip[1], 0.0);
    }
    /* a NaN has no other side: the bound stays finite (0) whatever is rounded */
    x[0] = NAN;
    double nan_out[2], nan_flip[2] = {-1, -1};
    ck_assert_int_eq(mj_ref_forward_ex(&L, 1, NULL, nan_out, flags[3], NULL, nan_flip), MOEJIT_OK);
    ck_assert(isnan(nan_out[0]));
    ck_assert_double_eq(nan_flip[0], 0.0);
    ck_assert_double_eq(nan_flip[1], 0.0);
    /* no rounding replayed: nothing to flip */
    x[0] = NEAR_MIDPOINT;
    double out[2], flip[2] = {-1, -1};
    ck_assert_int_eq(mj_ref_forward_ex(&L, 1, NULL, out, 0u, NULL, flip), MOEJIT_OK);
    ck_assert_double_eq(flip[0], 0.0);
    moejit_activation_destroy(a);
}
END_TEST

/* A gated layer's fc1 flip reaches a through the activation: H = 2, I = 1, W1 the unit matrix
 * (up = x[0], gate = x[1] in up_gate), W2 = [1, 0], slot weight 0.5, only fc1 rounded. The up
 * half 17.0625 (1 + 2^-20) may be stored as 17.125 or 17.0, so a may be either product and
 * out[0] may move by 0.5 · |swiglu(17.0, g) − swiglu(17.125, g)|; a gate far from a midpoint and
 * an up half 2^-10 above it give 0. */
START_TEST(gated_flip_bound_follows_an_fc1_flip_through_the_activation)
{
    moejit_activation *a = make(MOEJIT_ACT_SWIGLU);
    float x[2] = {NEAR_MIDPOINT, 0.75f};
    static const float w1[4] = {1, 0, 0, 1}, w2[2] = {1, 0};
    mj_ref_layer L = half_weight_layer(a, x);
    L.inter = 1;
    L.w1 = w1;
    L.w2 = w2;
    mj_ref_act p;
    ck_assert_int_eq(mj_ref_act_resolve(a, NULL, 0, &p), MOEJIT_OK);
    double out[2], flip[2] = {-1, -1};
    ck_assert_int_eq(mj_ref_forward_ex(&L, 1, NULL, out, MJ_REF_ROUND_FC1, NULL, flip), MOEJIT_OK);
    ck_assert_double_eq(out[0], 0.5 * mj_ref_act_apply(&p, 17.125, 0.75));
    ck_assert_double_eq_tol(flip[0], 0.5 * fabs(mj_ref_act_apply(&p, 17.0, 0.75) - mj_ref_act_apply(&p, 17.125, 0.75)),
                            1e-15);
    ck_assert(flip[0] > 0.0);
    ck_assert_double_eq(flip[1], 0.0);
    x[0] = OFF_MIDPOINT;
    ck_assert_int_eq(mj_ref_forward_ex(&L, 1, NULL, out, MJ_REF_ROUND_FC1, NULL, flip), MOEJIT_OK);
    ck_assert_double_eq(flip[0], 0.0);
    moejit_activation_destroy(a);
}
END_TEST

START_TEST(fp8_block_mode_scales_each_128_elements_of_x_apart)
{
    /* H = 256: x[0] = 448 in block 0, x[128] = 0.3 in block 1; W1 reads x[128] alone. Per
     * block, 0.3 has its own scale and survives; per token (scale 1) it becomes 0.3125. */
    moejit_activation *a = make(MOEJIT_ACT_IDENTITY);
    float x[256] = {0}, w1[256] = {0};
    x[0] = 448.0f;
    x[128] = 0.3f;
    w1[128] = 1.0f;
    const float w2[256 * 1] = {1};
    const int32_t ids[1] = {0};
    const float wt[1] = {1.0f};
    mj_ref_layer L = {.num_tokens = 1, .hidden = 256, .inter = 1, .num_experts = 1, .topk = 1,
                      .act = a, .routing = MJ_ROUTING_PRECOMPUTED, .dtype = MJ_DTYPE_BF16,
                      .x = x, .topk_ids = ids, .topk_weights = wt, .w1 = w1, .w2 = w2,
                      .act_quant = MJ_REF_AQ_FP8_BLOCK};
    double out[256];
    ck_assert_int_eq(mj_ref_forward(&L, 1, NULL, out, MJ_REF_REPLAY_FP8), MOEJIT_OK);
    assert_close(out[0], (double)mj_half_snap(0.3f, MJ_DTYPE_BF16), 1e-7); /* a stored in bf16 */
    L.act_quant = MJ_REF_AQ_FP8_TOKEN;
    ck_assert_int_eq(mj_ref_forward(&L, 1, NULL, out, MJ_REF_QUANT_X), MOEJIT_OK);
    ck_assert_double_eq(out[0], 0.3125);
    moejit_activation_destroy(a);
}
END_TEST

/* ---- half conversions -------------------------------------------------------------------------- */

START_TEST(every_bf16_and_fp16_value_round_trips)
{
    for (uint32_t b = 0; b < 65536; b++) {
        uint16_t h = (uint16_t)b;
        float fb = mj_half_bf16_to_float(h), fh = mj_half_fp16_to_float(h);
        if (isnan(fb)) {
            uint16_t back = mj_half_bf16_from_float(fb);
            ck_assert(isnan(mj_half_bf16_to_float(back)));
            ck_assert_int_eq(back & 0x8000, h & 0x8000);
        } else {
            ck_assert_int_eq(mj_half_bf16_from_float(fb), h);
        }
        if (isnan(fh)) {
            uint16_t back = mj_half_fp16_from_float(fh);
            ck_assert(isnan(mj_half_fp16_to_float(back)));
            ck_assert_int_eq(back & 0x8000, h & 0x8000);
        } else {
            ck_assert_int_eq(mj_half_fp16_from_float(fh), h);
        }
    }
    ck_assert_float_eq(mj_half_fp16_to_float(0x3c00), 1.0f);
    ck_assert_float_eq(mj_half_fp16_to_float(0x7bff), 65504.0f);
    ck_assert_float_eq(mj_half_fp16_to_float(0x0001), 0x1p-24f);
    ck_assert_float_eq(mj_half_bf16_to_float(0x3f80), 1.0f);
    ck_assert_float_eq(mj_half_bf16_to_float(0xc040), -3.0f);
}
END_TEST

START_TEST(conversions_round_half_to_even)
{
    /* bf16 spacing at 1 is 2^-7 */
    ck_assert_uint_eq(mj_half_bf16_from_float(1.0f + 0x1p-8f), 0x3f80);      /* tie -> even 1.0 */
    ck_assert_uint_eq(mj_half_bf16_from_float(1.0f + 3 * 0x1p-8f), 0x3f82);  /* tie -> even up */
    ck_assert_uint_eq(mj_half_bf16_from_float(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81); /* above tie */
    ck_assert_uint_eq(mj_half_bf16_from_float(FLT_MAX), 0x7f80);            /* overflow -> inf */
    /* fp16 spacing at 1 is 2^-10 */
    ck_assert_uint_eq(mj_half_fp16_from_float(1.0f + 0x1p-11f), 0x3c00);
    ck_assert_uint_eq(mj_half_fp16_from_float(1.0f + 3 * 0x1p-11f), 0x3c02);
    ck_assert_uint_eq(mj_half_fp16_from_float(-(1.0f + 3 * 0x1p-11f)), 0xbc02);
    ck_assert_uint_eq(mj_half_fp16_from_float(65519.0f), 0x7bff);
    ck_assert_uint_eq(mj_half_fp16_from_float(65520.0f), 0x7c00); /* tie above 65504 -> inf */
    /* fp16 subnormals: spacing 2^-24 */
    ck_assert_uint_eq(mj_half_fp16_from_float(0x1p-25f), 0x0000);
    ck_assert_uint_eq(mj_half_fp16_from_float(3 * 0x1p-25f), 0x0002);
    ck_assert_uint_eq(mj_half_fp16_from_float(-0x1p-24f), 0x8001);
    ck_assert_uint_eq(mj_half_fp16_from_float(0x1p-14f - 0x1p-26f), 0x0400); /* up to min normal */
}
END_TEST

START_TEST(conversions_keep_nan_and_its_sign)
{
    float qn = NAN, nn = -NAN;
    ck_assert(isnan(mj_half_bf16_to_float(mj_half_bf16_from_float(qn))));
    ck_assert(isnan(mj_half_fp16_to_float(mj_half_fp16_from_float(qn))));
    ck_assert_uint_eq(mj_half_bf16_from_float(nn) & 0x8000, 0x8000);
    ck_assert_uint_eq(mj_half_fp16_from_float(nn) & 0x8000, 0x8000);
    /* a NaN whose payload sits only in the low bits must not become inf */
    uint32_t low = 0x7f800001u;
    float lowf;
    memcpy(&lowf, &low, sizeof lowf);
    ck_assert(isnan(mj_half_bf16_to_float(mj_half_bf16_from_float(lowf))));
    ck_assert(isnan(mj_half_fp16_to_float(mj_half_fp16_from_float(lowf))));
    /* the 0xFF poison is NaN in every dtype */
    ck_assert(isnan(mj_half_bf16_to_float(0xffff)) && isnan(mj_half_fp16_to_float(0xffff)));
    ck_assert(isnan(mj_half_round_double(NAN, MJ_DTYPE_BF16)));
}
END_TEST

START_TEST(rounding_a_double_rounds_once)
{
    /* just above a bf16 tie: one rounding goes up; rounding through float first lands on the
     * tie and then goes to even (down) */
    double x = 1.0 + 0x1p-8 + 0x1p-40;
    ck_assert_double_eq(mj_half_round_double(x, MJ_DTYPE_BF16), 1.0 + 0x1p-7);
    ck_assert_float_eq(mj_half_snap((float)x, MJ_DTYPE_BF16), 1.0f);
    ck_assert_double_eq(mj_half_round_double(65520.0, MJ_DTYPE_FP16), INFINITY);
    ck_assert_double_eq(mj_half_round_double(-65519.0, MJ_DTYPE_FP16), -65504.0);
    ck_assert_double_eq(mj_half_round_double(3 * 0x1p-25, MJ_DTYPE_FP16), 0x1p-23);
    ck_assert_double_eq(mj_half_round_double(0x1p-25, MJ_DTYPE_FP16), 0.0);
    /* on values that are floats, it agrees with the bit-level conversions */
    uint64_t s = 88172645463325252ull;
    for (int i = 0; i < 200000; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        uint32_t bits = (uint32_t)s;
        float f;
        memcpy(&f, &bits, sizeof f);
        if (isnan(f))
            continue;
        ck_assert_double_eq(mj_half_round_double(f, MJ_DTYPE_BF16), (double)mj_half_snap(f, MJ_DTYPE_BF16));
        ck_assert_double_eq(mj_half_round_double(f, MJ_DTYPE_FP16), (double)mj_half_snap(f, MJ_DTYPE_FP16));
    }
}
END_TEST

static Suite *reference_suite(void)
{
    Suite *s = suite_create("reference");
    TCase *act = tcase_create("activations");
    tcase_add_test(act, swiglu_at_defaults_is_silu_of_gate_times_up);
    tcase_add_test(act, gpt_oss_swiglu_clamps_gate_above_and_up_both_ways);
    tcase_add_test(act, swiglu_step_clamps_after_silu_not_the_gate_before);
    tcase_add_test(act, situ_default_matches_hand_value);
    tcase_add_test(act, situ_without_linear_scale_and_with_clamp_matches_hand_value);
    tcase_add_test(act, geglu_and_geglu_tanh_are_close_but_different);
    tcase_add_test(act, relu_and_relu2_differ);
    tcase_add_test(act, ungated_activations_match_known_values);
    tcase_add_test(act, per_expert_override_replaces_the_parameter);
    suite_add_tcase(s, act);
    TCase *route = tcase_create("routing");
    tcase_add_test(route, softmax_topk_weights_are_plain_probabilities);
    tcase_add_test(route, renormalize_weights_sum_to_one);
    tcase_add_test(route, routing_ties_go_to_the_lower_expert_id);
    tcase_add_test(route, sigmoid_topk_weighs_by_sigma_without_renormalising);
    tcase_add_test(route, sigmoid_renorm_divides_by_the_sum_plus_1e_minus_20);
    tcase_add_test(route, llama4_takes_the_top_logit_with_its_sigma);
    tcase_add_test(route, deepseek_v3_group_masking_changes_the_selection);
    tcase_add_test(route, deepseek_v3_bias_selects_but_does_not_weigh);
    tcase_add_test(route, bf16_snapped_logits_route_on_the_snapped_values);
    suite_add_tcase(s, route);
    TCase *layer = tcase_create("layer");
    tcase_add_test(layer, one_token_one_expert_layer_matches_hand_computation);
    tcase_add_test(layer, tc_replay_rounds_each_expert_output);
    tcase_add_test(layer, round_w_rounds_the_weights_for_the_replay_only);
    tcase_add_test(layer, replay_flags_follow_the_backend_and_format);
    tcase_add_test(layer, swapped_halves_change_the_layer);
    tcase_add_test(layer, each_w1_layout_takes_its_own_rows);
    tcase_add_test(layer, biases_enter_before_the_activation_and_inside_the_sum);
    tcase_add_test(layer, expert_parallelism_drops_foreign_experts);
    tcase_add_test(layer, forward_does_not_depend_on_threads_and_replay_without_flags_is_ideal);
    tcase_add_test(layer, invalid_layers_are_rejected_naming_the_field);
    tcase_add_test(layer, flip_bound_counts_fc1_a_and_y_on_a_midpoint_of_the_dtype);
    tcase_add_test(layer, gated_flip_bound_follows_an_fc1_flip_through_the_activation);
    suite_add_tcase(s, layer);
    TCase *fp8 = tcase_create("fp8 replay");
    tcase_add_test(fp8, fp8_replay_quantizes_x_per_token_and_ideal_does_not);
    tcase_add_test(fp8, fp8_amax_on_a_rounding_midpoint_has_two_sides);
    tcase_add_test(fp8, fp8_flip_bound_counts_a_value_on_a_midpoint_of_the_dtype);
    tcase_add_test(fp8, fp8_per_tensor_intermediate_shares_one_scale_across_tokens);
    tcase_add_test(fp8, fp8_block_mode_scales_each_128_elements_of_x_apart);
    suite_add_tcase(s, fp8);
    TCase *half = tcase_create("halfconv");
    tcase_add_test(half, every_bf16_and_fp16_value_round_trips);
    tcase_add_test(half, conversions_round_half_to_even);
    tcase_add_test(half, conversions_keep_nan_and_its_sign);
    tcase_add_test(half, rounding_a_double_rounds_once);
    suite_add_tcase(s, half);
    return s;
}

MJ_CHECK_MAIN(reference_suite)
