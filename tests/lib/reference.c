/*
 * reference.c — the float64 CPU reference of the fused-MoE layer.
 *
 * This file contains the contract's layer (moe-semantics.md §1, §2, §4) computed in double
 * precision: routing, GEMM1, the activation, GEMM2 and the weighted finalize, optionally
 * replaying the kernel's 16-bit stores. It is written from the contract alone; it shares no
 * code with templates/, so a misreading there cannot be repeated here.
 */
#include "reference.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "halfconv.h"
#include "status.h"

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

/* The k largest logits by repeated arg-max; the strict '>' over ascending ids gives ties to
 * the lower id. NaN logits are never selected unless nothing else is left. */
static void select_topk(const float *logits, int64_t E, int64_t k, int32_t *ids)
{
    for (int64_t j = 0; j < k; j++) {
        int64_t best = -1;
        for (int64_t e = 0; e < E; e++) {
            int taken = 0;
            for (int64_t q = 0; q < j; q++)
                taken |= ids[q] == e;
            if (taken)
                continue;
            if (best < 0 || (isnan(logits[best]) && !isnan(logits[e])) || logits[e] > logits[best])
                best = e;
        }
        ids[j] = (int32_t)best;
    }
}

moejit_status mj_ref_route_token(const mj_ref_layer *L, int64_t t, int32_t *ids, double *w)
{
    int64_t E = L->num_experts, k = L->topk;
    switch (L->routing) {
    case MJ_ROUTING_PRECOMPUTED:
        for (int64_t j = 0; j < k; j++) {
            ids[j] = L->topk_ids[t * k + j];
            w[j] = L->topk_weights[t * k + j];
        }
        return MOEJIT_OK;
    case MJ_ROUTING_SOFTMAX_TOPK:
    case MJ_ROUTING_RENORMALIZE: {
        const float *lg = L->router_logits + t * E;
        select_topk(lg, E, k, ids);
        /* softmax_topk: probabilities over all E; renormalize: softmax over the k chosen.
         * Both subtract the maximum (the first selected) for range, exactly as in math. */
        double m = lg[ids[0]], den = 0.0;
        if (L->routing == MJ_ROUTING_SOFTMAX_TOPK)
            for (int64_t e = 0; e < E; e++)
                den += exp((double)lg[e] - m);
        else
            for (int64_t j = 0; j < k; j++)
                den += exp((double)lg[ids[j]] - m);
        for (int64_t j = 0; j < k; j++)
            w[j] = exp((double)lg[ids[j]] - m) / den;
        return MOEJIT_OK;
    }
    default:
        return mj_fail(MOEJIT_ERR_UNSUPPORTED,
                       "reference.routing: %s is not implemented yet; allowed: softmax_topk, renormalize, precomputed",
                       mj_routing_names[L->routing]);
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
    if (L->num_experts < 1)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "reference.num_experts: must be >= 1, got %lld",
                       (long long)L->num_experts);
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
    if ((unsigned)L->w1_layout >= MJ_W1_LAYOUT_COUNT)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "reference.w1_layout: unknown layout %d; allowed: up_gate, gate_up, interleaved",
                       (int)L->w1_layout);
    if ((unsigned)L->dtype >= MJ_DTYPE_COUNT)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "reference.dtype: unknown dtype %d; allowed: bf16, fp16, fp32",
                       (int)L->dtype);
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
    int32_t ids[1];
    double w[1];
    if (L->routing != MJ_ROUTING_PRECOMPUTED && L->routing != MJ_ROUTING_SOFTMAX_TOPK &&
        L->routing != MJ_ROUTING_RENORMALIZE)
        return mj_ref_route_token(L, 0, ids, w); /* the "not implemented" message */
    return MOEJIT_OK;
}

/* ---- forward ------------------------------------------------------------------------------ */

typedef struct work {
    const mj_ref_layer *L;
    int64_t t0, t1;           /* tokens [t0, t1) */
    double *ideal, *replay;
    unsigned flags;
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
    int do_ideal = wk->ideal != NULL, do_replay = wk->replay != NULL;
    double *buf = malloc(sizeof(double) * (size_t)(H + 2 * rows + 2 * I + 2 * H + 2 * k));
    if (!buf) {
        wk->status = mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "reference: out of memory");
        goto fail;
    }
    double *xd = buf, *fc1 = xd + H, *fc1r = fc1 + rows, *a = fc1r + rows, *ar = a + I;
    double *y = ar + I, *yr = y + H, *w = yr + H;
    int32_t ids[MJ_REF_MAX_TOPK];

    for (int64_t t = wk->t0; t < wk->t1; t++) {
        double *oi = do_ideal ? wk->ideal + t * H : NULL;
        double *orp = do_replay ? wk->replay + t * H : NULL;
        for (int64_t h = 0; h < H; h++) {
            xd[h] = L->x[t * H + h];
            if (oi) oi[h] = 0.0;
            if (orp) orp[h] = 0.0;
        }
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
                fc1[r] = dot(xd, W1 + r * H, H) + (L->b1 ? (double)L->b1[le * rows + r] : 0.0);
                fc1r[r] = round_if(fc1[r], wk->flags, MJ_REF_ROUND_FC1, L->dtype);
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
                ar[i] = round_if(ar[i], wk->flags, MJ_REF_ROUND_ACT, L->dtype);
            }
            for (int64_t h = 0; h < H; h++) {
                double b2 = L->b2 ? (double)L->b2[le * H + h] : 0.0;
                if (do_ideal) {
                    y[h] = dot(a, W2 + h * I, I) + b2;
                    oi[h] += w[j] * y[h];
                }
                if (do_replay) {
                    yr[h] = round_if(dot(ar, W2 + h * I, I) + b2, wk->flags, MJ_REF_ROUND_Y, L->dtype);
                    orp[h] += w[j] * yr[h];
                }
            }
        }
        if (wk->status)
            break;
    }
    free(buf);
fail:
    /* the message lives in this thread's error slot: carry it to the caller's thread */
    if (wk->status)
        snprintf(wk->message, sizeof wk->message, "%s", moejit_last_error());
    return NULL;
}

moejit_status mj_ref_forward(const mj_ref_layer *L, int threads, double *ideal, double *replay,
                             unsigned replay_flags)
{
    moejit_status st = mj_ref_validate(L);
    if (st)
        return st;
    if (L->topk > MJ_REF_MAX_TOPK)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "reference.topk: must be <= %d, got %lld",
                       MJ_REF_MAX_TOPK, (long long)L->topk);
    int64_t T = L->num_tokens;
    if (threads < 1)
        threads = 1;
    if (threads > T)
        threads = T > 0 ? (int)T : 1;
    work wk[64];
    pthread_t tid[64];
    if (threads > 64)
        threads = 64;
    for (int i = 0; i < threads; i++) {
        wk[i] = (work){L, T * i / threads, T * (i + 1) / threads, ideal, replay, replay_flags, MOEJIT_OK, ""};
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
    for (int i = 0; i < threads; i++)
        if (wk[i].status)
            return mj_fail(wk[i].status, "%s", wk[i].message);
    return MOEJIT_OK;
}
