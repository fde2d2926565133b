/*
 * This file contains the inputs of one GPU-suite case: seeded values snapped to what the
 * spec's formats can carry losslessly, the weights of every format drawn and quantized on
 * several threads (through tests/lib/quant_ref.c), and the float64 reference layer that
 * describes them. It also holds the case text that --case reads back, and the suite's
 * ASSUMPTIONs about the kernels (to reconcile with them; each has one place here):
 *   A1 fp8_tensor: fp8_act=tensor quantizes x over all T·H and the intermediate over all
 *      local (token, expert) rows with one dynamic scale each; token: one per row; static:
 *      x arrives in e4m3 with args.x_scale, the intermediate is per tensor (dynamic).
 *      fp8_block: x and the intermediate per row per 128. Scale = amax/448 in fp32.
 *   A2 the intermediate is stored once in the dtype, then (fp8) quantized; y stays fp32 in
 *      simt and is stored in the dtype by mma and wgmma, which also round 4-bit weights to it:
 *      the reference's mj_ref_replay_flags and mj_ref_gemm_slack say so per spec.
 *   A3 dimensions: multiples of 8 (all), 128 (fp8_block), g (w4a16; 2g with zero points),
 *      32 (mxfp4). Tensor layouts: see tests/lib/quant_ref.h.
 *   A4 per-expert overrides: swiglu alpha/beta (and limit where the value clamps), situ
 *      gate_scale (and linear_scale where present), swiglu_step limit.
 */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/halfconv.h"
#include "core/status.h"
#include "suite.h"

const char *const part_names[PART_COUNT] = {"activations", "formats", "fuzz"};

/* ---- the kernels' conventions (A1-A3) ---------------------------------------------------------- */


/* A1: how the kernel quantizes activations for the spec. */
mj_ref_act_quant act_quant_of(const moejit_spec *spec)
{
    if (spec->quant == MJ_QUANT_FP8_BLOCK)
        return MJ_REF_AQ_FP8_BLOCK;
    if (spec->quant != MJ_QUANT_FP8_TENSOR)
        return MJ_REF_AQ_NONE;
    return spec->fp8_act == MJ_FP8_ACT_TOKEN ? MJ_REF_AQ_FP8_TOKEN : MJ_REF_AQ_FP8_TENSOR;
}

int static_x(const moejit_spec *spec)
{
    return spec->quant == MJ_QUANT_FP8_TENSOR && spec->fp8_act == MJ_FP8_ACT_STATIC;
}


/* A3 */
int64_t spec_granule(const moejit_spec *spec)
{
    switch (spec->quant) {
    case MJ_QUANT_FP8_BLOCK: return 128;
    case MJ_QUANT_FP8_TENSOR: return spec->backend == MJ_BACKEND_SIMT ? 8 : 16; /* 1-byte TMA rows */
    case MJ_QUANT_W4A16: return spec->zero_point ? 2 * spec->group_size : spec->group_size;
    case MJ_QUANT_MXFP4: return 32;
    default: return 8;
    }
}

void fit_routing(const moejit_spec *spec, shape *s)
{
    if (spec->routing == MJ_ROUTING_LLAMA4)
        s->k = 1;
    if (spec->routing == MJ_ROUTING_DEEPSEEK_V3) {
        int64_t ng = spec->n_group;
        if (s->E % ng)
            s->E += ng - s->E % ng;
        int64_t eligible = spec->topk_group * (s->E / ng);
        if (s->k > eligible)
            s->k = eligible;
    }
    if (s->k > s->E)
        s->k = s->E;
    if (s->local && s->offset + s->local > s->E) {
        s->offset = 0;
        s->local = s->local < s->E ? s->local : 0;
    }
}

/* ---- case text --------------------------------------------------------------------------------- */

void gcase_format(const gcase *c, char *buf, size_t cap)
{
    const shape *s = &c->s;
    int n = snprintf(buf, cap, "T=%lld H=%lld I=%lld E=%lld k=%lld", (long long)s->T, (long long)s->H,
                     (long long)s->I, (long long)s->E, (long long)s->k);
    if (s->local && n >= 0 && (size_t)n < cap)
        n += snprintf(buf + n, cap - (size_t)n, " ep=%lld+%lld", (long long)s->offset, (long long)s->local);
    if (c->overrides && n >= 0 && (size_t)n < cap)
        n += snprintf(buf + n, cap - (size_t)n, " ovr=1");
    if (c->routing_bias && n >= 0 && (size_t)n < cap)
        snprintf(buf + n, cap - (size_t)n, " rbias=1");
}

int gcase_parse(const char *text, gcase *c)
{
    memset(c, 0, sizeof *c);
    const char *p = text;
    while (*p) {
        while (*p == ' ' || *p == ',')
            p++;
        if (!*p)
            break;
        long long a = 0, b = 0;
        int used = 0;
        if (sscanf(p, "ep=%lld+%lld%n", &a, &b, &used) == 2) {
            c->s.offset = a;
            c->s.local = b;
        } else {
            char key[8];
            if (sscanf(p, "%7[a-zA-Z]=%lld%n", key, &a, &used) != 2)
                return -1;
            if (!strcmp(key, "T")) c->s.T = a;
            else if (!strcmp(key, "H")) c->s.H = a;
            else if (!strcmp(key, "I")) c->s.I = a;
            else if (!strcmp(key, "E")) c->s.E = a;
            else if (!strcmp(key, "k")) c->s.k = a;
            else if (!strcmp(key, "ovr")) c->overrides = (int)a;
            else if (!strcmp(key, "rbias")) c->routing_bias = (int)a;
            else if (!strcmp(key, "graph")) c->graph = (int)a;
            else return -1;
        }
        p += used;
    }
    return c->s.H > 0 && c->s.I > 0 && c->s.E > 0 && c->s.k > 0 ? 0 : -1;
}

/* ---- random numbers ----------------------------------------------------------------------------- */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double uniform(uint64_t *s)
{
    return (double)(splitmix(s) >> 11) * 0x1p-53;
}

/* Unit-variance bell (Irwin-Hall of four uniforms): test data needs the shape, not exact
 * Gaussian tails, and Box-Muller's log/cos made input generation the slowest part. */
static double normal(uint64_t *s)
{
    uint64_t a = splitmix(s), b = splitmix(s);
    double sum = (double)(a >> 32) + (double)(a & 0xffffffffu) + (double)(b >> 32) +
                 (double)(b & 0xffffffffu);
    return (sum * 0x1p-32 - 2.0) * 1.7320508075688772;
}

static uint64_t fnv1a(const char *s, uint64_t h)
{
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

/* fnv1a of a spec's text with its arch field's value read as "native": the arch changes no
 * input, and a dry run writes arch=sm_90a where the device run wrote arch=native, so without
 * this a dry run of a device run's seed drew other inputs and could not replay its failure. */
static uint64_t fnv1a_spec(const char *text, uint64_t h)
{
    static const char field[] = "arch=";
    for (const char *s = text; *s;) {
        if ((s == text || s[-1] == ',') && !strncmp(s, field, sizeof field - 1)) {
            h = fnv1a("arch=native", h);
            s += strcspn(s, ",");
            continue;
        }
        h = (h ^ (unsigned char)*s++) * 0x100000001b3ull;
    }
    return h;
}

/* ---- inputs ---------------------------------------------------------------------------------------- */


void case_free(case_data *c)
{
    free(c->x);
    free(c->logits);
    free(c->rbias);
    free(c->topk_weights);
    free(c->topk_ids);
    free(c->b1);
    free(c->b2);
    for (int i = 0; i < MJ_ACT_MAX_PARAMS; i++)
        free(c->act_param[i]);
    mj_qref_weights_free(&c->w1);
    mj_qref_weights_free(&c->w2);
    free(c->alt_w1);
    free(c->alt_w2);
    memset(c, 0, sizeof *c);
}

/* Is stored row r of W1 a gate row (drawn at a different scale than the up rows, so that
 * swapped halves cannot cancel out)? */
static int gate_row(mj_w1_layout layout, int64_t I, int64_t r)
{
    switch (layout) {
    case MJ_W1_GATE_UP: return r < I;
    case MJ_W1_INTERLEAVED: return r % 2 == 0;
    default: return r >= I;
    }
}

/* A4: the per-expert values of parameter `name`, or 0 where the suite does not override it. */
static int override_values(const moejit_activation *act, const char *name, double *choices, int *n)
{
    float v;
    int present;
    if (moejit_activation_param(act, name, &v, &present) != MOEJIT_OK)
        return 0;
    static const double alpha[] = {1.0, 1.25, 1.5, 1.702, 2.0}, beta[] = {0.0, 0.5, 1.0},
                        limit[] = {3.0, 5.0, 7.0, 10.0}, gs[] = {2.0, 4.0, 6.0}, ls[] = {10.0, 25.0, 40.0};
    const double *t = NULL;
    int m = 0;
    moejit_act_kind kind = moejit_activation_kind(act);
    if (kind == MOEJIT_ACT_SWIGLU && !strcmp(name, "alpha")) t = alpha, m = 5;
    else if (kind == MOEJIT_ACT_SWIGLU && !strcmp(name, "beta")) t = beta, m = 3;
    else if ((kind == MOEJIT_ACT_SWIGLU || kind == MOEJIT_ACT_SWIGLU_STEP) && !strcmp(name, "limit") &&
             v < FLT_MAX) t = limit, m = 4;
    else if (kind == MOEJIT_ACT_SITU && !strcmp(name, "gate_scale")) t = gs, m = 3;
    else if (kind == MOEJIT_ACT_SITU && !strcmp(name, "linear_scale") && present) t = ls, m = 3;
    for (int i = 0; i < m; i++)
        choices[i] = t[i];
    *n = m;
    return m > 0;
}

/* ---- weights, drawn and quantized in parallel ------------------------------------------------------ */

/* One slice of experts of one matrix. Each expert draws from its own seed, so the weights
 * do not depend on how the experts are split between threads. */
typedef struct wjob {
    const mj_qref_format *f;
    int64_t e0, e1, N, K;
    int w1, gated;            /* W1 (rows may be a gate half) or W2 */
    mj_w1_layout layout;
    int64_t I;
    uint64_t seed;
    mj_qref_weights part;
    moejit_status status;
} wjob;

static void *weights_job(void *arg)
{
    wjob *j = arg;
    int64_t n = (j->e1 - j->e0) * j->N * j->K;
    float *src = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    if (!src) {
        j->status = MOEJIT_ERR_OUT_OF_MEMORY;
        return NULL;
    }
    double std = 1.0 / sqrt((double)j->K); /* 1/sqrt(fan-in): fc1 and y are O(1) */
    for (int64_t e = j->e0; e < j->e1; e++) {
        uint64_t s = j->seed ^ (0x9e3779b97f4a7c15ull * (uint64_t)(2 * e + (j->w1 ? 1 : 2)));
        splitmix(&s);
        float *d = src + (e - j->e0) * j->N * j->K;
        for (int64_t r = 0; r < j->N; r++) {
            double sc = j->w1 && j->gated && gate_row(j->layout, j->I, r) ? 1.25 * std : std;
            for (int64_t k = 0; k < j->K; k++)
                d[r * j->K + k] = (float)(sc * normal(&s));
        }
    }
    j->status = mj_qref_quantize(j->f, src, j->e1 - j->e0, j->N, j->K, &j->part);
    free(src);
    return NULL;
}

/* Appends src's bytes to *dst at *at (dst sized for the whole matrix). */
static void append(unsigned char *dst, size_t *at, const void *src, size_t bytes)
{
    if (bytes)
        memcpy(dst + *at, src, bytes);
    *at += bytes;
}

/* Draws and quantizes one matrix [E, N, K] on up to `threads` threads: every format keeps
 * the expert outermost in each of its tensors, so the slices concatenate. */
static moejit_status make_weights(const mj_qref_format *f, int64_t E, int64_t N, int64_t K, int w1,
                                  int gated, mj_w1_layout layout, int64_t I, uint64_t seed, int threads,
                                  mj_qref_weights *out)
{
    enum { MAXJ = 64 };
    wjob jobs[MAXJ];
    pthread_t tid[MAXJ];
    int nj = threads < 1 ? 1 : threads > MAXJ ? MAXJ : threads;
    if (nj > E)
        nj = E > 0 ? (int)E : 1;
    for (int i = 0; i < nj; i++)
        jobs[i] = (wjob){f, E * i / nj, E * (i + 1) / nj, N, K, w1, gated, layout, I, seed, {0}, MOEJIT_OK};
    int started[MAXJ] = {0};
    for (int i = 1; i < nj; i++)
        started[i] = pthread_create(&tid[i], NULL, weights_job, &jobs[i]) == 0;
    weights_job(&jobs[0]);
    for (int i = 1; i < nj; i++) {
        if (started[i])
            pthread_join(tid[i], NULL);
        else
            weights_job(&jobs[i]);
    }
    moejit_status st = MOEJIT_OK;
    for (int i = 0; i < nj && !st; i++)
        st = jobs[i].status;
    if (st) /* the jobs' own messages stayed on their threads */
        mj_fail(st, "suite: drawing and quantizing %s [%lld, %lld, %lld] failed (%s)", w1 ? "w1" : "w2",
                (long long)E, (long long)N, (long long)K, moejit_status_name(st));
    memset(out, 0, sizeof *out);
    if (!st) {
        out->experts = E;
        out->rows = N;
        out->cols = K;
        for (int i = 0; i < nj; i++) {
            out->data_bytes += jobs[i].part.data_bytes;
            out->scale_bytes += jobs[i].part.scale_bytes;
            out->zero_bytes += jobs[i].part.zero_bytes;
        }
        out->deq = malloc(sizeof(float) * (size_t)(E * N * K + 1));
        out->data = malloc(out->data_bytes + 1);
        out->scale = out->scale_bytes ? malloc(out->scale_bytes) : NULL;
        out->zero = out->zero_bytes ? malloc(out->zero_bytes) : NULL;
        if (!out->deq || !out->data || (out->scale_bytes && !out->scale) || (out->zero_bytes && !out->zero)) {
            mj_qref_weights_free(out);
            st = mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "suite: out of host memory");
        }
    }
    size_t at_d = 0, at_s = 0, at_z = 0, at_q = 0;
    for (int i = 0; i < nj; i++) {
        if (!st) {
            append((unsigned char *)out->deq, &at_q, jobs[i].part.deq,
                   sizeof(float) * (size_t)((jobs[i].e1 - jobs[i].e0) * N * K));
            append(out->data, &at_d, jobs[i].part.data, jobs[i].part.data_bytes);
            append(out->scale, &at_s, jobs[i].part.scale, jobs[i].part.scale_bytes);
            append(out->zero, &at_z, jobs[i].part.zero, jobs[i].part.zero_bytes);
        }
        mj_qref_weights_free(&jobs[i].part);
    }
    return st;
}

static int alloc_f(float **p, int64_t n)
{
    *p = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    return *p ? 0 : -1;
}

/* Seeded inputs. Every value is snapped to what it is uploaded as, so the upload (and, for
 * fp8, the kernel's input quantization) is lossless and the reference sees what the kernel
 * sees. Weights are 1/sqrt(fan-in) draws quantized by quant_ref, the gate half 1.25x the up
 * half; every fourth token is 6x larger, so the clamps of gpt-oss SwiGLU, SwiGLUStep and
 * SiTU really trigger. Logits sit on a 1/64 grid in [-4, 4] (distinct values stay far apart
 * in fp32 and σ; exact ties, to the lower id, happen), every fifth token gets a forced tie
 * with its largest logit; the deepseek_v3 bias is on a 1/16 grid in [-1/4, 1/4]. */
int case_make(const suite *S, const entry *e, const gcase *gc, case_data *c)
{
    memset(c, 0, sizeof *c);
    c->c = *gc;
    c->spec = e->spec;
    c->fmt = mj_qref_format_of(e->spec);
    const moejit_activation *act = moejit_spec_activation(e->spec);
    c->gated = moejit_activation_is_gated(act);
    const shape *s = &gc->s;
    int64_t T = s->T, H = s->H, I = s->I, E = s->E, k = s->k;
    c->rows = c->gated ? 2 * I : I;
    c->local = s->local ? s->local : E;
    mj_dtype dt = e->spec->dtype;
    char ctext[160];
    gcase_format(gc, ctext, sizeof ctext);
    /* the inputs depend on the seed, the spec and the case only: --case reruns them */
    uint64_t seed = fnv1a(ctext, fnv1a_spec(e->text, S->seed ^ 0xcbf29ce484222325ull));
    if (alloc_f(&c->x, T * H) || alloc_f(&c->logits, T * E) || alloc_f(&c->rbias, E) ||
        alloc_f(&c->topk_weights, T * k))
        return -1;
    c->topk_ids = malloc(sizeof(int32_t) * (size_t)(T * k + 1));
    if (!c->topk_ids)
        return -1;

    for (int64_t t = 0; t < T; t++) {
        double scale = t % 4 == 3 ? 6.0 : 1.0;
        for (int64_t h = 0; h < H; h++)
            c->x[t * H + h] = mj_half_snap((float)(scale * normal(&seed)), dt);
    }
    if (static_x(e->spec)) {
        for (int64_t i = 0; i < T * H; i++)
            c->x[i] = (float)(mj_half_e4m3_round(c->x[i] / STATIC_X_SCALE) * STATIC_X_SCALE);
    } else {
        mj_qref_fp8_snap_input(c->x, T, H, act_quant_of(e->spec));
    }

    /* weights: drawn, then quantized into the format (device bytes + exact values) */
    uint64_t wseed = splitmix(&seed);
    if (make_weights(&c->fmt, c->local, c->rows, H, 1, c->gated, e->spec->w1_layout, I, wseed, S->threads, &c->w1) ||
        make_weights(&c->fmt, c->local, H, I, 0, 0, MJ_W1_UP_GATE, I, wseed, S->threads, &c->w2))
        return -1;

    mj_bias bias = e->spec->bias;
    if (bias == MJ_BIAS_B1 || bias == MJ_BIAS_BOTH) {
        if (alloc_f(&c->b1, c->local * c->rows))
            return -1;
        for (int64_t i = 0; i < c->local * c->rows; i++)
            c->b1[i] = mj_half_snap((float)(0.5 * normal(&seed)), dt);
    }
    if (bias == MJ_BIAS_B2 || bias == MJ_BIAS_BOTH) {
        if (alloc_f(&c->b2, c->local * H))
            return -1;
        for (int64_t i = 0; i < c->local * H; i++)
            c->b2[i] = mj_half_snap((float)(0.5 * normal(&seed)), dt);
    }
    if (gc->overrides) {
        const mj_act_desc *d = mj_act_desc_of(moejit_activation_kind(act));
        for (int p = 0; d && p < d->n_params; p++) {
            double choices[8];
            int n = 0;
            if (!override_values(act, d->params[p].name, choices, &n))
                continue;
            if (alloc_f(&c->act_param[p], c->local))
                return -1;
            for (int64_t le = 0; le < c->local; le++)
                c->act_param[p][le] = (float)choices[splitmix(&seed) % (uint64_t)n];
        }
    }
    for (int64_t x = 0; x < E; x++)
        c->rbias[x] = (float)((double)((int)(splitmix(&seed) % 9) - 4) / 16.0);

    for (int64_t t = 0; t < T; t++) {
        float *lg = c->logits + t * E;
        int64_t top = 0;
        for (int64_t x = 0; x < E; x++) {
            double v = nearbyint(normal(&seed) * 1.5 * 64.0) / 64.0;
            lg[x] = mj_half_snap((float)fmax(-4.0, fmin(4.0, v)), e->spec->logits_dtype);
            if (lg[x] > lg[top])
                top = x;
        }
        if (t % 5 == 4 && E > 1) {
            int64_t other = (int64_t)(splitmix(&seed) % (uint64_t)(E - 1));
            lg[other >= top ? other + 1 : other] = lg[top];
        }
        /* precomputed routing: k distinct random ids (a partial shuffle), random weights */
        int32_t perm[MJ_REF_MAX_EXPERTS];
        for (int64_t x = 0; x < E; x++)
            perm[x] = (int32_t)x;
        for (int64_t j = 0; j < k; j++) {
            int64_t pick = j + (int64_t)(splitmix(&seed) % (uint64_t)(E - j));
            int32_t tmp = perm[j];
            perm[j] = perm[pick];
            perm[pick] = tmp;
            c->topk_ids[t * k + j] = perm[j];
            c->topk_weights[t * k + j] = (float)(0.05 + 0.95 * uniform(&seed));
        }
    }
    return 0;
}

mj_ref_layer case_layer(const case_data *c)
{
    const moejit_spec *sp = c->spec;
    const shape *s = &c->c.s;
    mj_ref_layer L = {
        .num_tokens = s->T, .hidden = s->H, .inter = s->I, .num_experts = s->E, .topk = s->k,
        .expert_offset = s->offset, .num_local_experts = s->local,
        .act = moejit_spec_activation(sp), .routing = sp->routing, .w1_layout = sp->w1_layout,
        .dtype = sp->dtype, .x = c->x, .router_logits = c->logits, .topk_ids = c->topk_ids,
        .topk_weights = c->topk_weights, .w1 = c->w1.deq, .w2 = c->w2.deq, .b1 = c->b1, .b2 = c->b2,
        .act_quant = act_quant_of(sp)};
    if (sp->routing == MJ_ROUTING_DEEPSEEK_V3) {
        L.n_group = sp->n_group;
        L.topk_group = sp->topk_group;
        L.routed_scaling = sp->routed_scaling;
        L.routing_bias = c->c.routing_bias ? c->rbias : NULL;
    }
    if (static_x(sp))
        L.x_scale = STATIC_X_SCALE;
    L.gemm_slack = mj_ref_gemm_slack(sp);
    for (int i = 0; i < MJ_ACT_MAX_PARAMS; i++)
        L.act_param[i] = c->act_param[i];
    return L;
}
