/*
 * reference.c — the float64 CPU reference of the fused-MoE layer.
 *
 * This file contains the contract's layer (docs/SEMANTICS.md §1, §2, §4) computed in double
 * precision: routing, GEMM1, the activation, GEMM2 and the weighted finalize, optionally
 * replaying the kernel's 16-bit stores. It is written from the contract alone; it shares no
 * code with templates/, so a misreading there cannot be repeated here.
 */
#include "reference/reference.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/halfconv.h"
#include "core/status.h"

/* ---- activations ------------------------------------------------------------------------ */

static double sigmoid(double x)
{
    return 1.0 / (1.0 + exp(-x));
}

static double gelu_erf(double x)
{
    return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
}

static double clampd(double v, double lo, double hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

moejit_status mj_ref_act_resolve(const moejit_activation *act, const float *const *param,
                                 int64_t index, mj_ref_act *out)
{
    if (!act || !out)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "reference.act: NULL activation");
    const mj_act_desc *d = mj_act_desc_of(act->kind);
    if (!d)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "reference.act: kind %d is no user activation; allowed: the ABI kinds of the contract",
                       (int)act->kind);
    memset(out, 0, sizeof *out);
    out->kind = act->kind;
    out->gated = d->gated;
    for (int i = 0; i < d->n_params; i++) {
        const char *name = d->params[i].name;
        int over = param && param[i];
        double v = over ? (double)param[i][index] : (double)act->value[i];
        int present = over ? 1 : act->present[i];
        if (!strcmp(name, "alpha")) out->alpha = v;
        else if (!strcmp(name, "beta")) out->beta = v;
        else if (!strcmp(name, "limit")) out->limit = v;
        else if (!strcmp(name, "gate_scale")) out->gate_scale = v;
        else if (!strcmp(name, "linear_scale")) { out->linear_scale = v; out->has_linear_scale = present; }
        else if (!strcmp(name, "clamp_limit")) { out->clamp = v; out->has_clamp = present; }
        else
            return mj_fail(MOEJIT_ERR_INTERNAL,
                           "reference.act: parameter '%s' of %s is unknown to the reference", name, d->name);
    }
    return MOEJIT_OK;
}

double mj_ref_act_apply(const mj_ref_act *p, double u, double x)
{
    switch (p->kind) {
    case MOEJIT_ACT_GELU: return gelu_erf(x);
    case MOEJIT_ACT_RELU: return x > 0.0 ? x : 0.0;
    case MOEJIT_ACT_SILU: return x * sigmoid(x);
    case MOEJIT_ACT_SWIGLU: {
        double g = x < p->limit ? x : p->limit; /* the gate is clamped from above only */
        double uu = clampd(u, -p->limit, p->limit);
        return g * sigmoid(p->alpha * g) * (uu + p->beta);
    }
    case MOEJIT_ACT_GEGLU: return gelu_erf(x) * u;
    case MOEJIT_ACT_RELU2: return x > 0.0 ? x * x : 0.0;
    case MOEJIT_ACT_SWIGLU_STEP: {
        double s = x * sigmoid(x); /* clamp AFTER SiLU, not the gate before it */
        return (s < p->limit ? s : p->limit) * clampd(u, -p->limit, p->limit);
    }
    case MOEJIT_ACT_GEGLU_TANH:
        return 0.5 * x * (1.0 + tanh(0.7978845608 * (x + 0.044715 * x * x * x))) * u;
    case MOEJIT_ACT_IDENTITY: return x;
    case MOEJIT_ACT_SITU: {
        double g = x, uu = u;
        if (p->has_clamp) {
            uu = clampd(uu, -p->clamp, p->clamp);
            g = g < p->clamp ? g : p->clamp;
        }
        double lin = p->has_linear_scale ? p->linear_scale * tanh(uu / p->linear_scale) : uu;
        /* σ of the un-squashed (but clamped) g */
        return lin * p->gate_scale * tanh(g / p->gate_scale) * sigmoid(g);
    }
    }
    return NAN; /* unreachable for a resolved activation */
}

/* ---- routing ---------------------------------------------------------------------------- */

/* The k largest scores by repeated arg-max; the strict '>' over ascending ids gives ties to
 * the lower id. NaN scores are never selected unless nothing else is left; masked (-inf)
 * ones only after every finite one. */
static void select_topk(const double *score, int64_t E, int64_t k, int32_t *ids)
{
    for (int64_t j = 0; j < k; j++) {
        int64_t best = -1;
        for (int64_t e = 0; e < E; e++) {
            int taken = 0;
            for (int64_t q = 0; q < j; q++)
                taken |= ids[q] == e;
            if (taken)
                continue;
            if (best < 0 || (isnan(score[best]) && !isnan(score[e])) || score[e] > score[best])
                best = e;
        }
        ids[j] = (int32_t)best;
    }
}

/* deepseek_v3 (DeepSeek-V3's grouped top-k): the biased score σ + bias selects; a group's
 * score is the sum of its two best biased scores (its only one for groups of one); the best
 * topk_group groups stay and the others are masked with -inf; the k best unmasked experts
 * are chosen; their UNBIASED σ, renormalised to sum 1, times routed_scaling, are the weights. */
static void route_deepseek(const mj_ref_layer *L, const float *lg, int32_t *ids, double *w)
{
    int64_t E = L->num_experts, k = L->topk;
    int64_t ng = L->n_group ? L->n_group : 1;
    int64_t kg = L->topk_group ? L->topk_group : ng;
    int64_t gs = E / ng;
    double sig[MJ_REF_MAX_EXPERTS], biased[MJ_REF_MAX_EXPERTS];
    double gscore[MJ_REF_MAX_EXPERTS] = {0}; /* (only [0, ng) is read; gcc cannot tell) */
    for (int64_t e = 0; e < E; e++) {
        sig[e] = sigmoid((double)lg[e]);
        biased[e] = sig[e] + (L->routing_bias ? (double)L->routing_bias[e] : 0.0);
    }
    for (int64_t g = 0; g < ng; g++) {
        int32_t top[2];
        int64_t n = gs < 2 ? gs : 2;
        select_topk(biased + g * gs, gs, n, top);
        gscore[g] = 0.0;
        for (int64_t j = 0; j < n; j++)
            gscore[g] += biased[g * gs + top[j]];
    }
    int32_t keep[MJ_REF_MAX_EXPERTS];
    select_topk(gscore, ng, kg, keep);
    double masked[MJ_REF_MAX_EXPERTS];
    for (int64_t e = 0; e < E; e++)
        masked[e] = -INFINITY;
    for (int64_t j = 0; j < kg; j++)
        for (int64_t e = keep[j] * gs; e < (keep[j] + 1) * gs; e++)
            masked[e] = biased[e];
    select_topk(masked, E, k, ids);
    double sum = 0.0;
    for (int64_t j = 0; j < k; j++)
        sum += sig[ids[j]];
    double scale = L->routed_scaling > 0.0 ? L->routed_scaling : 1.0;
    for (int64_t j = 0; j < k; j++)
        w[j] = sig[ids[j]] / sum * scale;
}

moejit_status mj_ref_route_token(const mj_ref_layer *L, int64_t t, int32_t *ids, double *w)
{
    int64_t E = L->num_experts, k = L->topk;
    if (L->routing == MJ_ROUTING_PRECOMPUTED) {
        for (int64_t j = 0; j < k; j++) {
            ids[j] = L->topk_ids[t * k + j];
            w[j] = L->topk_weights[t * k + j];
        }
        return MOEJIT_OK;
    }
    if (E > MJ_REF_MAX_EXPERTS)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "reference.num_experts: must be <= %d, got %lld",
                       MJ_REF_MAX_EXPERTS, (long long)E);
    const float *lg = L->router_logits + t * E;
    double lgd[MJ_REF_MAX_EXPERTS];
    for (int64_t e = 0; e < E; e++)
        lgd[e] = lg[e];
    switch (L->routing) {
    case MJ_ROUTING_SOFTMAX_TOPK:
    case MJ_ROUTING_RENORMALIZE: {
        select_topk(lgd, E, k, ids);
        /* softmax_topk: probabilities over all E; renormalize: softmax over the k chosen.
         * Both subtract the maximum (the first selected) for range, exactly as in math. */
        double m = lgd[ids[0]], den = 0.0;
        if (L->routing == MJ_ROUTING_SOFTMAX_TOPK)
            for (int64_t e = 0; e < E; e++)
                den += exp(lgd[e] - m);
        else
            for (int64_t j = 0; j < k; j++)
                den += exp(lgd[ids[j]] - m);
        for (int64_t j = 0; j < k; j++)
            w[j] = exp(lgd[ids[j]] - m) / den;
        return MOEJIT_OK;
    }
    case MJ_ROUTING_SIGMOID_TOPK:
    case MJ_ROUTING_SIGMOID_RENORM:
    case MJ_ROUTING_LLAMA4: {
        /* σ is increasing: selecting on the logits is selecting on σ, without the ties that
         * σ rounding to 1 would invent for large logits */
        select_topk(lgd, E, k, ids);
        double sum = 0.0;
        for (int64_t j = 0; j < k; j++) {
            w[j] = sigmoid(lgd[ids[j]]);
            sum += w[j];
        }
        if (L->routing == MJ_ROUTING_SIGMOID_RENORM)
            for (int64_t j = 0; j < k; j++)
                w[j] /= sum + 1e-20;
        return MOEJIT_OK;
    }
    case MJ_ROUTING_DEEPSEEK_V3:
        route_deepseek(L, lg, ids, w);
        return MOEJIT_OK;
    default:
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "reference.routing: unknown method %d", (int)L->routing);
    }
}

/* ---- fp8 activation quantization ---------------------------------------------------------- */

double mj_ref_fp8_scale(double amax)
{
    if (!(amax > 0.0))
        return 1.0;
    /* fp32 division of the fp32 amax: float(double(a) / 448) is that correctly rounded
     * quotient (53 >= 2·24 + 2 bits: no double-rounding error) */
    return (double)(float)((double)(float)amax / MJ_E4M3_MAX);
}

void mj_ref_fp8_fake_quant(double *v, int64_t n, int64_t group, double scale)
{
    if (group < 1)
        group = n;
    for (int64_t g0 = 0; g0 < n; g0 += group) {
        int64_t g1 = g0 + group < n ? g0 + group : n;
        double s = scale;
        if (!(s > 0.0)) {
            double amax = 0.0;
            for (int64_t i = g0; i < g1; i++)
                amax = fmax(amax, fabs(v[i]));
            s = mj_ref_fp8_scale(amax);
        }
        /* The kernel divides in fp32 (IEEE, round to nearest), and so must the replay. The
         * scale is inexact (amax/448 rounded to fp32), so v/s in float64 is v·448/amax·(1+δ),
         * |δ| < 2^-24; fp32 rounds that quotient back ONTO a midpoint of the e4m3 grid
         * whenever v·448/amax is one, where e4m3's round-half-to-even decides, while float64
         * stays off it by δ and rounds by δ's sign. Such exact midpoints are no rarity: v is a
         * bf16 value (8 significant bits) and one amax serves the whole tensor, so for about
         * one amax in eight a whole residue class of v (~1/128 of the elements, e.g. amax 152,
         * v = 114: 336 = the 320|352 midpoint) lands on one; each such element then moved by
         * an e4m3 step (1/8) and put the replay 0.01 (p90 token) off the H200's exact kernel.
         * The float64 quotient of the fp32 operands, rounded once to fp32, is the correctly
         * rounded fp32 quotient (53 >= 2·24 + 2 bits: no double-rounding error). */
        double sf = (double)(float)s;
        for (int64_t i = g0; i < g1; i++) {
            double q = (double)(float)((double)(float)v[i] / sf);
            v[i] = mj_half_e4m3_round(q) * sf;
        }
    }
}

/* ---- validation ----------------------------------------------------------------------------- */

moejit_status mj_ref_validate(const mj_ref_layer *L)
{
    if (!L)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "reference: layer is NULL");
    if (L->num_tokens < 0)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "reference.num_tokens: must be >= 0, got %lld",
                       (long long)L->num_tokens);
    if (L->hidden < 1 || L->inter < 1)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "reference.hidden/inter: must be >= 1, got %lld/%lld",
                       (long long)L->hidden, (long long)L->inter);
    if (L->num_experts < 1 || L->num_experts > MJ_REF_MAX_EXPERTS)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "reference.num_experts: must be 1..%d, got %lld",
                       MJ_REF_MAX_EXPERTS, (long long)L->num_experts);
    if (L->topk < 1 || L->topk > L->num_experts)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "reference.topk: must be in 1..num_experts (%lld), got %lld",
                       (long long)L->num_experts, (long long)L->topk);
    int64_t local = L->num_local_experts ? L->num_local_experts : L->num_experts;
    if (L->expert_offset < 0 || local < 1 || L->expert_offset + local > L->num_experts)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "reference.expert_offset/num_local_experts: [%lld, %lld) must lie in [0, %lld)",
                       (long long)L->expert_offset, (long long)(L->expert_offset + local),
                       (long long)L->num_experts);
    if ((unsigned)L->routing >= MJ_ROUTING_COUNT)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "reference.routing: unknown method %d", (int)L->routing);
    if (L->routing == MJ_ROUTING_DEEPSEEK_V3) {
        int64_t ng = L->n_group ? L->n_group : 1;
        int64_t kg = L->topk_group ? L->topk_group : ng;
        if (ng < 1 || L->num_experts % ng)
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "reference.n_group: must divide num_experts (%lld), got %lld",
                           (long long)L->num_experts, (long long)ng);
        if (kg < 1 || kg > ng)
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "reference.topk_group: must be 1..n_group (%lld), got %lld",
                           (long long)ng, (long long)kg);
        if (L->topk > kg * (L->num_experts / ng))
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                           "reference.topk: must be <= topk_group * experts per group (%lld), got %lld",
                           (long long)(kg * (L->num_experts / ng)), (long long)L->topk);
        if (!(L->routed_scaling >= 0.0) || isinf(L->routed_scaling))
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "reference.routed_scaling: must be finite and > 0 (0: 1), got %g",
                           L->routed_scaling);
    }
    if ((unsigned)L->w1_layout >= MJ_W1_LAYOUT_COUNT)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "reference.w1_layout: unknown layout %d; allowed: up_gate, gate_up, interleaved",
                       (int)L->w1_layout);
    if ((unsigned)L->dtype >= MJ_DTYPE_COUNT)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "reference.dtype: unknown dtype %d; allowed: bf16, fp16, fp32",
                       (int)L->dtype);
    if ((unsigned)L->act_quant >= MJ_REF_AQ_COUNT)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "reference.act_quant: unknown mode %d; allowed: none, fp8 tensor, token, block", (int)L->act_quant);
    if (!(L->x_scale >= 0.0) || isinf(L->x_scale) || !(L->a_scale >= 0.0) || isinf(L->a_scale))
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "reference.x_scale/a_scale: must be finite and >= 0 (0: dynamic), got %g/%g",
                       L->x_scale, L->a_scale);
    mj_ref_act p;
    moejit_status st = mj_ref_act_resolve(L->act, NULL, 0, &p);
    if (st)
        return st;
    if (L->num_tokens > 0) {
        if (!L->x || !L->w1 || !L->w2)
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "reference: x, w1 and w2 are required");
        if (L->routing == MJ_ROUTING_PRECOMPUTED && (!L->topk_ids || !L->topk_weights))
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                           "reference.topk_ids/topk_weights: required for routing=precomputed");
        if (L->routing != MJ_ROUTING_PRECOMPUTED && !L->router_logits)
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "reference.router_logits: required for routing=%s",
                           mj_routing_names[L->routing]);
    }
    return MOEJIT_OK;
}

/* ---- forward ------------------------------------------------------------------------------ */

typedef struct work {
    const mj_ref_layer *L;
    int64_t t0, t1;           /* tokens [t0, t1) */
    double *ideal, *replay;
    unsigned flags;
    int amax_pass;            /* 1: only the replay's a, for its per-tensor amax */
    double x_scale, a_scale;  /* per-tensor fp8 scales, resolved (0 when not per-tensor) */
    double amax;              /* amax_pass: max |a| over this range (as the flags choose) */
    double amax_low, amax_high; /* amax_pass: the same with the slack down and up */
    int64_t ambiguous;        /* row and block groups of a whose two sides differ */
    double *flip;             /* [T, H] or NULL: the replay's flip bound (mj_ref_forward_ex) */
    moejit_status status;
    char message[512];
} work;

/* One dot product of n terms with four partial sums: the order is fixed (so results do not
 * depend on threads) and float64 makes it immaterial at these sizes. */
static double dot(const double *a, const float *b, int64_t n)
{
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += a[i] * b[i];
        s1 += a[i + 1] * b[i + 1];
        s2 += a[i + 2] * b[i + 2];
        s3 += a[i + 3] * b[i + 3];
    }
    for (; i < n; i++)
        s0 += a[i] * b[i];
    return (s0 + s1) + (s2 + s3);
}

/* Row indices of the up and gate halves for intermediate column i, per W1 layout. */
static void gated_rows(mj_w1_layout layout, int64_t I, int64_t i, int64_t *ru, int64_t *rg)
{
    switch (layout) {
    case MJ_W1_GATE_UP: *rg = i; *ru = I + i; break;
    case MJ_W1_INTERLEAVED: *rg = 2 * i; *ru = 2 * i + 1; break; /* gpt-oss: gate even, up odd */
    default: *ru = i; *rg = I + i; break;                         /* canonical [up; gate] */
    }
}

static double round_if(double v, unsigned flags, unsigned bit, mj_dtype dt)
{
    return (flags & bit) ? mj_half_round_double(v, dt) : v;
}

/* The fp8 quantization of one row of n activations (x: n = H; a: n = I) per the layer's
 * mode, with the per-tensor scale already resolved. */
static void quantize_row(mj_ref_act_quant mode, double *v, int64_t n, double tensor_scale)
{
    switch (mode) {
    case MJ_REF_AQ_FP8_TENSOR: mj_ref_fp8_fake_quant(v, n, n, tensor_scale); break;
    case MJ_REF_AQ_FP8_TOKEN: mj_ref_fp8_fake_quant(v, n, n, 0.0); break;
    case MJ_REF_AQ_FP8_BLOCK: mj_ref_fp8_fake_quant(v, n, MJ_REF_FP8_BLOCK, 0.0); break;
    default: break;
    }
}

/* The relative slack of the layer's GEMMs (mj_ref_layer.gemm_slack; 0: MJ_REF_AMAX_SLACK). */
static double slack_of(const mj_ref_layer *L)
{
    return L->gemm_slack > 0.0 ? L->gemm_slack : MJ_REF_AMAX_SLACK;
}

/* The two values a store the flags round at `bit` (ROUND_ACT: a's) may give an unrounded u: u
 * moved down and up by `slack` of |u|, each rounded; equal unless u lies that close to a midpoint. */
static void slack_sides(double u, unsigned flags, unsigned bit, mj_dtype dt, double slack, double *down, double *up)
{
    const double d = fabs(u) * slack;
    *down = round_if(u - d, flags, bit, dt);
    *up = round_if(u + d, flags, bit, dt);
}

/* The amax of a group of a's values: of the stored (rounded) values, and of the unrounded
 * ones pre[] on either side of slack_sides. Rounding is monotonic, so *low <= *mid <= *high. */
static void amax_sides(const double *stored, const double *pre, int64_t n, unsigned flags, mj_dtype dt,
                       double slack, double *low, double *mid, double *high)
{
    double l = 0.0, m = 0.0, h = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double down, up;
        slack_sides(fabs(pre[i]), flags, MJ_REF_ROUND_ACT, dt, slack, &down, &up);
        m = fmax(m, fabs(stored[i]));
        l = fmax(l, down);
        h = fmax(h, up);
    }
    *low = l;
    *mid = m;
    *high = h;
}

/* The amax the flags choose among a group's three. */
static double amax_chosen(unsigned flags, double low, double mid, double high)
{
    return (flags & MJ_REF_AMAX_LOW) ? low : (flags & MJ_REF_AMAX_HIGH) ? high : mid;
}

/* quantize_row for a's rows and blocks (dynamic scales per group), each group's scale from
 * the amax the flags choose; counts the groups whose two sides differ. */
static void quantize_a_groups(mj_ref_act_quant mode, double *v, const double *pre, int64_t n, unsigned flags,
                              mj_dtype dt, double slack, int64_t *ambiguous, double *scale)
{
    int64_t group = mode == MJ_REF_AQ_FP8_BLOCK ? MJ_REF_FP8_BLOCK : n;
    for (int64_t g0 = 0; g0 < n; g0 += group) {
        int64_t len = g0 + group < n ? group : n - g0;
        double lo, mid, hi;
        amax_sides(v + g0, pre + g0, len, flags, dt, slack, &lo, &mid, &hi);
        *ambiguous += lo != hi;
        const double s = mj_ref_fp8_scale(amax_chosen(flags, lo, mid, hi));
        for (int64_t i = g0; i < g0 + len; i++)
            scale[i] = s;
        mj_ref_fp8_fake_quant(v + g0, len, len, s);
    }
}

/* The replay's rounding of u (where the flags hold `bit`) and in *alt the value the kernel may
 * store instead: where u lies within the layer's slack of a rounding midpoint of the dtype, the
 * neighbour on the midpoint's other side (the kernel's fp32 sums land on either side); elsewhere,
 * where the flags do not round, or for a value that is not finite, the same value. */
static double round_alt(double u, unsigned flags, unsigned bit, mj_dtype dt, double slack, double *alt)
{
    const double r = round_if(u, flags, bit, dt);
    *alt = r;
    if ((flags & bit) && isfinite(u)) { /* a NaN or infinity has no other side */
        double lo, hi;
        slack_sides(u, flags, bit, dt, slack, &lo, &hi);
        *alt = lo != r ? lo : hi;
    }
    return r;
}

/* How far the kernel's value of a may land from the replay's q: it may compute a from any of
 * the n unrounded candidates (the replay's own, and those of fc1 values stored on the other side
 * of their midpoints), round it to either side of a midpoint (ROUND_ACT), and with quant, e4m3
 * at scale s may then take it a step (1/8 to 1/16 of the value) further. */
static double a_flip(const double *cand, int n, double q, int quant, double s, unsigned flags, mj_dtype dt,
                     double slack)
{
    double most = 0.0;
    for (int c = 0; c < n; c++) {
        double v[2];
        v[0] = round_alt(cand[c], flags, MJ_REF_ROUND_ACT, dt, slack, &v[1]);
        for (int j = 0; j < 2; j++) {
            if (quant)
                mj_ref_fp8_fake_quant(&v[j], 1, 1, s);
            most = fmax(most, fabs(v[j] - q));
        }
    }
    return most;
}

/* The values of a the kernel may store apart from the replay's ar, each from the candidates
 * a_flip judges (the replay's unrounded apre, and a from fc1 values stored on the other side of
 * their midpoints, fc1a); their indices go to flipped[] and how far each may land to delta[],
 * and the count is returned. scale: each value's e4m3 scale with the activation's quantization,
 * else NULL. */
static int64_t a_flips(const mj_ref_layer *L, const mj_ref_act *p, const double *fc1r, const double *fc1a,
                       const double *apre, const double *ar, const double *scale, unsigned flags, double slack,
                       double *delta, int64_t *flipped)
{
    int64_t flips = 0;
    for (int64_t i = 0; i < L->inter; i++) {
        double cand[4];
        int n = 0;
        cand[n++] = apre[i];
        if (p->gated) {
            int64_t ru, rg;
            gated_rows(L->w1_layout, L->inter, i, &ru, &rg);
            const double u = fc1r[ru], g = fc1r[rg], ua = fc1a[ru], ga = fc1a[rg];
            if (ua != u)
                cand[n++] = mj_ref_act_apply(p, ua, g);
            if (ga != g)
                cand[n++] = mj_ref_act_apply(p, u, ga);
            if (ua != u && ga != g)
                cand[n++] = mj_ref_act_apply(p, ua, ga);
        } else if (fc1a[i] != fc1r[i]) {
            cand[n++] = mj_ref_act_apply(p, 0.0, fc1a[i]);
        }
        const double d = a_flip(cand, n, ar[i], scale != NULL, scale ? scale[i] : 0.0, flags, L->dtype, slack);
        if (d != 0.0) {
            delta[flips] = d;
            flipped[flips++] = i;
        }
    }
    return flips;
}

/* The flip bound of one slot of weight w: every output of it moves by at most
 * |w| · Σ |W2[h, i]| δ_i over the flipped values of a. */
static void add_flip_bound(double *flip, const float *W2, int64_t H, int64_t I, double w, const double *delta,
                           const int64_t *flipped, int64_t flips)
{
    for (int64_t h = 0; flips && h < H; h++) {
        double b = 0.0;
        for (int64_t f = 0; f < flips; f++)
            b += fabs((double)W2[h * I + flipped[f]]) * delta[f];
        flip[h] += fabs(w) * b;
    }
}

static void *forward_range(void *arg)
{
    work *wk = arg;
    const mj_ref_layer *L = wk->L;
    int64_t H = L->hidden, I = L->inter, k = L->topk;
    int64_t local = L->num_local_experts ? L->num_local_experts : L->num_experts;
    mj_ref_act base;
    if ((wk->status = mj_ref_act_resolve(L->act, NULL, 0, &base)))
        goto fail;
    int64_t rows = base.gated ? 2 * I : I;
    int do_ideal = wk->ideal != NULL && !wk->amax_pass;
    int do_replay = wk->replay != NULL || wk->amax_pass;
    int quant = L->act_quant != MJ_REF_AQ_NONE;
    int qx = quant && (wk->flags & MJ_REF_QUANT_X), qa = quant && (wk->flags & MJ_REF_QUANT_ACT);
    const double slack = slack_of(L);
    double *buf = malloc(sizeof(double) * (size_t)(2 * H + 3 * rows + 5 * I + 2 * H + 2 * k));
    int64_t *flipped = malloc(sizeof(int64_t) * (size_t)(I + 1)); /* the a indices whose delta is not 0 */
    if (!buf || !flipped) {
        free(buf);
        free(flipped);
        wk->status = mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "reference: out of memory");
        goto fail;
    }
    double *xd = buf, *xq = xd + H, *fc1 = xq + H, *fc1r = fc1 + rows, *fc1a = fc1r + rows, *a = fc1a + rows;
    double *ar = a + I;
    double *apre = ar + I, *ascale = apre + I, *delta = ascale + I, *y = delta + I, *yr = y + H, *w = yr + H;
    int32_t ids[MJ_REF_MAX_TOPK];

    for (int64_t t = wk->t0; t < wk->t1; t++) {
        double *oi = do_ideal ? wk->ideal + t * H : NULL;
        double *orp = do_replay && !wk->amax_pass ? wk->replay + t * H : NULL;
        for (int64_t h = 0; h < H; h++) {
            xd[h] = xq[h] = L->x[t * H + h];
            if (oi) oi[h] = 0.0;
            if (orp) orp[h] = 0.0;
            if (wk->flip && !wk->amax_pass) wk->flip[t * H + h] = 0.0;
        }
        if (qx && do_replay)
            quantize_row(L->act_quant, xq, H, wk->x_scale);
        wk->status = mj_ref_route_token(L, t, ids, w);
        if (wk->status)
            break;
        for (int64_t j = 0; j < k; j++) {
            int64_t le = (int64_t)ids[j] - L->expert_offset;
            if (le < 0 || le >= local)
                continue; /* another rank's expert (or an invalid id): contributes nothing */
            mj_ref_act p = base;
            if (L->act_param[0] || L->act_param[1] || L->act_param[2])
                if ((wk->status = mj_ref_act_resolve(L->act, L->act_param, le, &p)))
                    break;
            const float *W1 = L->w1 + le * rows * H;
            const float *W2 = L->w2 + le * H * I;
            for (int64_t r = 0; r < rows; r++) {
                double b1 = L->b1 ? (double)L->b1[le * rows + r] : 0.0;
                fc1[r] = do_ideal ? dot(xd, W1 + r * H, H) + b1 : 0.0;
                /* the replay's own GEMM1 only where x was quantized differently */
                double f = qx ? dot(xq, W1 + r * H, H) + b1 : do_ideal ? fc1[r] : dot(xd, W1 + r * H, H) + b1;
                fc1r[r] = round_alt(f, wk->flags, MJ_REF_ROUND_FC1, L->dtype, slack, &fc1a[r]);
            }
            for (int64_t i = 0; i < I; i++) {
                if (p.gated) {
                    int64_t ru, rg;
                    gated_rows(L->w1_layout, I, i, &ru, &rg);
                    a[i] = mj_ref_act_apply(&p, fc1[ru], fc1[rg]);
                    ar[i] = mj_ref_act_apply(&p, fc1r[ru], fc1r[rg]);
                } else {
                    a[i] = mj_ref_act_apply(&p, 0.0, fc1[i]);
                    ar[i] = mj_ref_act_apply(&p, 0.0, fc1r[i]);
                }
                apre[i] = ar[i];
                ar[i] = round_if(ar[i], wk->flags, MJ_REF_ROUND_ACT, L->dtype);
            }
            if (wk->amax_pass) {
                double lo, mid, hi;
                amax_sides(ar, apre, I, wk->flags, L->dtype, slack, &lo, &mid, &hi);
                wk->amax = fmax(wk->amax, mid);
                wk->amax_low = fmax(wk->amax_low, lo);
                wk->amax_high = fmax(wk->amax_high, hi);
                continue;
            }
            if (qa && do_replay) {
                if (L->act_quant == MJ_REF_AQ_FP8_TENSOR) {
                    quantize_row(L->act_quant, ar, I, wk->a_scale);
                    for (int64_t i = 0; i < I; i++)
                        ascale[i] = wk->a_scale;
                } else {
                    quantize_a_groups(L->act_quant, ar, apre, I, wk->flags, L->dtype, slack, &wk->ambiguous,
                                      ascale);
                }
            }
            if (wk->flip) {
                const int64_t flips = a_flips(L, &p, fc1r, fc1a, apre, ar, qa ? ascale : NULL, wk->flags, slack,
                                              delta, flipped);
                add_flip_bound(wk->flip + t * H, W2, H, I, w[j], delta, flipped, flips);
            }
            for (int64_t h = 0; h < H; h++) {
                double b2 = L->b2 ? (double)L->b2[le * H + h] : 0.0;
                if (do_ideal) {
                    y[h] = dot(a, W2 + h * I, I) + b2;
                    oi[h] += w[j] * y[h];
                }
                if (orp) {
                    double alt;
                    yr[h] = round_alt(dot(ar, W2 + h * I, I) + b2, wk->flags, MJ_REF_ROUND_Y, L->dtype, slack, &alt);
                    orp[h] += w[j] * yr[h];
                    if (wk->flip && isfinite(yr[h])) /* y stored on the other side of its midpoint */
                        wk->flip[t * H + h] += fabs(w[j]) * fabs(alt - yr[h]);
                }
            }
        }
        if (wk->status)
            break;
    }
    free(buf);
    free(flipped);
fail:
    /* the message lives in this thread's error slot: carry it to the caller's thread */
    if (wk->status)
        snprintf(wk->message, sizeof wk->message, "%s", moejit_last_error());
    return NULL;
}

/* Runs forward_range over the tokens split in `threads` ranges (proto is copied into each);
 * returns the first failure, and the ranges' results summed into *sum (amax: the max of
 * each side; ambiguous: the total). */
static moejit_status run_ranges(const work *proto, int threads, work *sum)
{
    int64_t T = proto->L->num_tokens;
    work wk[64];
    pthread_t tid[64];
    for (int i = 0; i < threads; i++) {
        wk[i] = *proto;
        wk[i].t0 = T * i / threads;
        wk[i].t1 = T * (i + 1) / threads;
    }
    int started = 0;
    for (int i = 1; i < threads; i++) {
        if (pthread_create(&tid[i], NULL, forward_range, &wk[i]) != 0)
            break;
        started = i;
    }
    /* threads that could not be started run here, in order */
    for (int i = started + 1; i < threads; i++)
        forward_range(&wk[i]);
    forward_range(&wk[0]);
    for (int i = 1; i <= started; i++)
        pthread_join(tid[i], NULL);
    for (int i = 0; i < threads; i++) {
        if (wk[i].status)
            return mj_fail(wk[i].status, "%s", wk[i].message);
        sum->amax = fmax(sum->amax, wk[i].amax);
        sum->amax_low = fmax(sum->amax_low, wk[i].amax_low);
        sum->amax_high = fmax(sum->amax_high, wk[i].amax_high);
        sum->ambiguous += wk[i].ambiguous;
    }
    return MOEJIT_OK;
}

moejit_status mj_ref_forward(const mj_ref_layer *L, int threads, double *ideal, double *replay,
                             unsigned replay_flags)
{
    return mj_ref_forward_ex(L, threads, ideal, replay, replay_flags, NULL, NULL);
}

unsigned mj_ref_replay_flags(const moejit_spec *spec)
{
    const int fp8 = spec->quant == MJ_QUANT_FP8_TENSOR || spec->quant == MJ_QUANT_FP8_BLOCK;
    if (spec->backend == MJ_BACKEND_SIMT)
        return fp8 ? MJ_REF_REPLAY_FP8 : MJ_REF_REPLAY_SIMT;
    return MJ_REF_REPLAY_TC | (fp8 ? MJ_REF_QUANT_X | MJ_REF_QUANT_ACT : 0u) |
           (mj_quant_is_4bit(spec->quant) ? (unsigned)MJ_REF_ROUND_W : 0u);
}

double mj_ref_gemm_slack(const moejit_spec *spec)
{
    const int fp8 = spec->quant == MJ_QUANT_FP8_TENSOR || spec->quant == MJ_QUANT_FP8_BLOCK;
    return spec->backend == MJ_BACKEND_WGMMA && fp8 ? MJ_REF_QGMMA_SLACK : 0.0;
}

/* A copy of the n weights w rounded once to dt (NULL: out of memory). */
static float *rounded_copy(const float *w, size_t n, mj_dtype dt)
{
    float *r = malloc(sizeof(float) * (n + 1));
    for (size_t i = 0; r && i < n; i++)
        r[i] = mj_half_snap(w[i], dt);
    return r;
}

/* MJ_REF_ROUND_W: the ideal layer on L's weights, the replay on copies rounded to the dtype. */
static moejit_status forward_rounded_weights(const mj_ref_layer *L, int threads, double *ideal, double *replay,
                                             unsigned replay_flags, int64_t *ambiguous, double *flip_bound)
{
    const unsigned flags = replay_flags & ~(unsigned)MJ_REF_ROUND_W;
    moejit_status st = ideal ? mj_ref_forward_ex(L, threads, ideal, NULL, flags, NULL, NULL) : MOEJIT_OK;
    if (st || !replay)
        return st;
    const size_t local = (size_t)(L->num_local_experts ? L->num_local_experts : L->num_experts);
    const size_t H = (size_t)L->hidden, I = (size_t)L->inter;
    const size_t rows = moejit_activation_is_gated(L->act) ? 2 * I : I;
    float *w1 = rounded_copy(L->w1, local * rows * H, L->dtype), *w2 = rounded_copy(L->w2, local * H * I, L->dtype);
    mj_ref_layer R = *L;
    R.w1 = w1, R.w2 = w2;
    st = w1 && w2 ? mj_ref_forward_ex(&R, threads, NULL, replay, flags, ambiguous, flip_bound)
                  : mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "reference: out of memory for the rounded weights");
    free(w1);
    free(w2);
    return st;
}

moejit_status mj_ref_forward_ex(const mj_ref_layer *L, int threads, double *ideal, double *replay,
                                unsigned replay_flags, int64_t *ambiguous, double *flip_bound)
{
    if (ambiguous)
        *ambiguous = 0;
    moejit_status st = mj_ref_validate(L);
    if (st)
        return st;
    if (replay_flags & MJ_REF_ROUND_W)
        return forward_rounded_weights(L, threads, ideal, replay, replay_flags, ambiguous, flip_bound);
    if (L->topk > MJ_REF_MAX_TOPK)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "reference.topk: must be <= %d, got %lld",
                       MJ_REF_MAX_TOPK, (long long)L->topk);
    int64_t T = L->num_tokens;
    if (threads < 1)
        threads = 1;
    if (threads > T)
        threads = T > 0 ? (int)T : 1;
    if (threads > 64)
        threads = 64;
    work proto = {L, 0, 0, ideal, replay, replay_flags, 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0, replay ? flip_bound : NULL,
                  MOEJIT_OK, ""};
    work sum = proto;
    if (replay && L->act_quant == MJ_REF_AQ_FP8_TENSOR) {
        /* a dynamic per-tensor scale needs the whole tensor's amax before any row is
         * quantized: x's is a scan; a's takes a first pass through GEMM1 and the activation */
        proto.x_scale = L->x_scale;
        proto.a_scale = L->a_scale;
        if ((replay_flags & MJ_REF_QUANT_X) && !(proto.x_scale > 0.0)) {
            double amax = 0.0;
            for (int64_t i = 0; i < T * L->hidden; i++)
                amax = fmax(amax, fabs((double)L->x[i]));
            proto.x_scale = mj_ref_fp8_scale(amax);
        }
        if ((replay_flags & MJ_REF_QUANT_ACT) && !(proto.a_scale > 0.0)) {
            work pass = proto;
            pass.amax_pass = 1;
            if ((st = run_ranges(&pass, threads, &sum)))
                return st;
            sum.ambiguous = sum.amax_low != sum.amax_high;
            proto.a_scale = mj_ref_fp8_scale(amax_chosen(replay_flags, sum.amax_low, sum.amax, sum.amax_high));
        }
    }
    if ((st = run_ranges(&proto, threads, &sum)))
        return st;
    if (ambiguous)
        *ambiguous = sum.ambiguous;
    return MOEJIT_OK;
}
