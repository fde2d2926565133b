/*
 * This file contains the weight formats of `moejit bench layer --quant` (bench_quant.h): their
 * spec fields, their device inputs for the model-shape runs, and their float64 reference cases
 * on small layers.
 */
#include "tools/bench_quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/halfconv.h"
#include "reference/reference.h"
#include "runtime/gemm_plan.h"
#include "templates/common/mma_params.h"

/* The float64 cases' shapes: fp8_block's H and I are multiples of 128 (640 = 2.5 GEMM2 column
 * tiles of 256: the last one half past H); fp8_tensor's of 16 only, with K tails in both GEMMs
 * (272 = 2 x 128 + 16, 208 = 128 + 80). */
static const bench_quant quants[] = {
    {"bf16", "quant=bf16", 0, 0, 0, 264, 200},
    {"fp8_tensor", "quant=fp8_tensor", 1, 0, 0, 272, 208},
    {"fp8_token", "quant=fp8_tensor,fp8_act=token", 1, 0, 0, 272, 208},
    {"fp8_static", "quant=fp8_tensor,fp8_act=static", 1, 0, 1, 272, 208},
    {"fp8_block", "quant=fp8_block", 1, 1, 0, 640, 384},
    {"w4a16", "quant=w4a16,group=128", 0, 0, 0, 0, 0, 1},
    {"mxfp4", "quant=mxfp4", 0, 0, 0, 0, 0, 1},
};

const bench_quant *bench_quant_find(const char *name)
{
    for (size_t i = 0; i < sizeof quants / sizeof quants[0]; i++)
        if (!strcmp(quants[i].name, name)) return &quants[i];
    return NULL;
}

size_t bench_quant_scales(const bench_quant *q, int64_t E, int64_t N, int64_t K)
{
    if (!q->fp8) return 0;
    return q->block ? (size_t)E * (size_t)(N / 128) * (size_t)(K / 128) : (size_t)E;
}

moejit_status bench_quant_alloc(const mj_gpu *g, const bench_fill *f, const bench_quant *q, int64_t E,
                                int64_t rows1, int64_t H, int64_t I, uint64_t seed, CUstream stream,
                                bench_quant_bufs *b)
{
    memset(b, 0, sizeof *b);
    if (!q->fp8) return MOEJIT_OK;
    const size_t n1 = bench_quant_scales(q, E, rows1, H), n2 = bench_quant_scales(q, E, H, I);
    /* codes span +-448: a scale of about 1 / (448 sqrt(K)) gives weights of about 1 / sqrt(K) */
    moejit_status st = mj_gpu_alloc(g, n1 * 4, &b->w1_scale);
    if (st == MOEJIT_OK) st = mj_gpu_alloc(g, n2 * 4, &b->w2_scale);
    if (st == MOEJIT_OK) st = bench_fill_scales(g, f, b->w1_scale, n1, seed + 11, 1.0f / (448.0f * sqrtf((float)H)), stream);
    if (st == MOEJIT_OK) st = bench_fill_scales(g, f, b->w2_scale, n2, seed + 12, 1.0f / (448.0f * sqrtf((float)I)), stream);
    if (st == MOEJIT_OK && q->static_x) {
        st = mj_gpu_alloc(g, 4, &b->x_scale);
        if (st == MOEJIT_OK) st = bench_fill_scales(g, f, b->x_scale, 1, seed + 13, 1.0f / 448.0f, stream);
    }
    return st;
}

void bench_quant_free(const mj_gpu *g, bench_quant_bufs *b)
{
    mj_gpu_free(g, b->w1_scale), mj_gpu_free(g, b->w2_scale), mj_gpu_free(g, b->x_scale);
    memset(b, 0, sizeof *b);
}

void bench_quant_args(const bench_quant *q, const bench_quant_bufs *b, moejit_moe_args *a)
{
    if (!q->fp8) return;
    a->w1_scale = (const void *)b->w1_scale, a->w2_scale = (const void *)b->w2_scale;
    if (q->static_x) a->x_scale = (const float *)b->x_scale;
}

/* ---- float64 cases ------------------------------------------------------------------------ */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double uniform(void)
{
    rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
    return (double)((rng * 0x2545f4914f6cdd1dull) >> 40) / (double)(1 << 24) * 2.0 - 1.0;
}

/* The host side of one case: inputs as the kernel reads them and as the reference sees them. */
typedef struct fp8_host {
    long long T;
    int H, I, E, K, rows;
    int E_w;                            /* the experts with weights: E, or an expert-parallel rank's */
    float *x, *logits, *w1, *w2;        /* reference values */
    uint8_t *xq, *w1q, *w2q;            /* e4m3 codes (xq: static x only) */
    float *s1, *s2;                     /* weight scales */
    size_t n_s1, n_s2;
    double x_scale;                     /* static x: its dequant scale */
} fp8_host;

/* A scale about `base`, exact in a few bits: 2^round(log2 base) · (1 + m/8), so that every
 * code times it is exact in fp32. */
static float grid_scale(double base) { return (float)(ldexp(1.0, (int)lround(log2(base))) * (1.0 + floor((uniform() + 1.0) * 4.0) / 8.0)); }

/* [E, N, K] codes and scales (per matrix, or per 128 x 128 block), and their values. */
static void fill_weights(const bench_quant *q, int E, int N, int K, uint8_t *codes, float *scales, size_t n_s,
                         float *values)
{
    for (size_t i = 0; i < n_s; i++) scales[i] = grid_scale(1.0 / (448.0 * sqrt((double)K)));
    const int nb = N / 128, kb = K / 128;
    for (int e = 0; e < E; e++)
        for (int n = 0; n < N; n++)
            for (int k = 0; k < K; k++) {
                const size_t i = ((size_t)e * N + n) * K + k;
                codes[i] = mj_half_e4m3_from_double(448.0 * uniform());
                const float s = q->block ? scales[((size_t)e * nb + n / 128) * kb + k / 128] : scales[e];
                values[i] = mj_half_e4m3_to_float(codes[i]) * s;
            }
}

static void fp8_host_free(fp8_host *h)
{
    free(h->x), free(h->logits), free(h->w1), free(h->w2), free(h->xq), free(h->w1q), free(h->w2q);
    free(h->s1), free(h->s2);
    memset(h, 0, sizeof *h);
}

/* The float64 cases' k: 2, or 1 under llama4 (top-1); an expert-parallel rank owns experts
 * [2, 6) of the 8. */
static int ref_k = 2;
enum { REF_EP_OFFSET = 2, REF_EP_LOCAL = 4 };

/* x on the e4m3 grid times 2^-6, the first value of every row's every 128 exactly 448 · 2^-6:
 * the amax of each group of every fp8 grouping, so quantizing x is exact. Static x: codes. */
static int fp8_host_make(const bench_quant *q, const moejit_spec *spec, long long T, int ep, fp8_host *h)
{
    memset(h, 0, sizeof *h);
    h->T = T, h->H = q->check_h, h->I = q->check_i, h->E = 8, h->K = ref_k, h->E_w = ep ? REF_EP_LOCAL : 8;
    h->rows = moejit_activation_is_gated(&spec->act) ? 2 * h->I : h->I;
    const size_t nx = (size_t)T * h->H, nw1 = (size_t)h->E_w * h->rows * h->H, nw2 = (size_t)h->E_w * h->H * h->I;
    h->n_s1 = bench_quant_scales(q, h->E_w, h->rows, h->H), h->n_s2 = bench_quant_scales(q, h->E_w, h->H, h->I);
    h->x = malloc(nx * sizeof *h->x), h->logits = malloc((size_t)T * h->E * sizeof *h->logits);
    h->xq = malloc(nx), h->w1q = malloc(nw1), h->w2q = malloc(nw2);
    h->w1 = malloc(nw1 * sizeof *h->w1), h->w2 = malloc(nw2 * sizeof *h->w2);
    h->s1 = malloc(h->n_s1 * sizeof *h->s1), h->s2 = malloc(h->n_s2 * sizeof *h->s2);
    if (!h->x || !h->logits || !h->xq || !h->w1q || !h->w2q || !h->w1 || !h->w2 || !h->s1 || !h->s2) return -1;
    h->x_scale = ldexp(1.0, -6);
    for (size_t i = 0; i < nx; i++) {
        h->xq[i] = i % (size_t)h->H % 128 == 0 ? 0x7e : mj_half_e4m3_from_double(448.0 * uniform()); /* 0x7e: +448 */
        h->x[i] = (float)(mj_half_e4m3_to_float(h->xq[i]) * h->x_scale);
    }
    for (size_t i = 0; i < (size_t)T * h->E; i++) h->logits[i] = mj_half_snap((float)(2.0 * uniform()), spec->logits_dtype);
    fill_weights(q, h->E_w, h->rows, h->H, h->w1q, h->s1, h->n_s1, h->w1);
    fill_weights(q, h->E_w, h->H, h->I, h->w2q, h->s2, h->n_s2, h->w2);
    return 0;
}

typedef struct fp8_dev {
    CUdeviceptr x, logits, other, w1, w2, s1, s2, xs, out, ws;
    size_t ws_bytes;
} fp8_dev;

static moejit_status fp8_dev_make(const mj_gpu *g, const bench_layer *L, const bench_quant *q, fp8_host *h,
                                  moejit_moe_args *a, fp8_dev *d)
{
    memset(d, 0, sizeof *d);
    const mj_dtype dt = L->spec->dtype, ldt = L->spec->logits_dtype;
    const size_t nx = (size_t)h->T * h->H, nl = (size_t)h->T * h->E;
    const size_t nw1 = (size_t)h->E_w * h->rows * h->H, nw2 = (size_t)h->E_w * h->H * h->I;
    const float xs = (float)h->x_scale;
    moejit_status st = q->static_x ? mj_gpu_alloc(g, nx, &d->x) : mj_gpu_upload_values(g, h->x, nx, dt, &d->x);
    if (!st && q->static_x) st = mj_gpu_upload(g, d->x, h->xq, nx);
    if (!st && q->static_x) st = mj_gpu_upload_values(g, &xs, 1, MJ_DTYPE_FP32, &d->xs);
    if (!st) st = mj_gpu_upload_values(g, h->logits, nl, ldt, &d->logits);
    for (size_t i = 0; i < nl; i++) h->logits[i] = -h->logits[i];
    if (!st) st = mj_gpu_upload_values(g, h->logits, nl, ldt, &d->other);
    for (size_t i = 0; i < nl; i++) h->logits[i] = -h->logits[i]; /* the reference routes the real ones */
    if (!st) st = mj_gpu_alloc(g, nw1, &d->w1);
    if (!st) st = mj_gpu_upload(g, d->w1, h->w1q, nw1);
    if (!st) st = mj_gpu_alloc(g, nw2, &d->w2);
    if (!st) st = mj_gpu_upload(g, d->w2, h->w2q, nw2);
    if (!st) st = mj_gpu_upload_values(g, h->s1, h->n_s1, MJ_DTYPE_FP32, &d->s1);
    if (!st) st = mj_gpu_upload_values(g, h->s2, h->n_s2, MJ_DTYPE_FP32, &d->s2);
    if (!st) st = mj_gpu_alloc(g, nx * 2, &d->out);
    moejit_moe_args_init(a);
    a->num_tokens = h->T, a->hidden = h->H, a->inter = h->I, a->num_experts = h->E, a->topk = h->K;
    if (h->E_w != h->E) a->expert_offset = REF_EP_OFFSET, a->num_local_experts = h->E_w;
    a->x = (void *)d->x, a->router_logits = (void *)d->logits, a->w1 = (void *)d->w1, a->w2 = (void *)d->w2;
    a->w1_scale = (const void *)d->s1, a->w2_scale = (const void *)d->s2, a->out = (void *)d->out;
    if (q->static_x) a->x_scale = (const float *)d->xs;
    if (!st) st = bench_layer_workspace(L, a, &d->ws_bytes);
    if (!st) st = mj_gpu_alloc(g, d->ws_bytes, &d->ws);
    return st;
}

static void fp8_dev_free(const mj_gpu *g, fp8_dev *d)
{
    mj_gpu_free(g, d->x), mj_gpu_free(g, d->logits), mj_gpu_free(g, d->other), mj_gpu_free(g, d->w1);
    mj_gpu_free(g, d->w2), mj_gpu_free(g, d->s1), mj_gpu_free(g, d->s2), mj_gpu_free(g, d->xs);
    mj_gpu_free(g, d->out), mj_gpu_free(g, d->ws);
}

/* Three forwards into out (rep 0 on a poisoned workspace, rep 1 after a forward with negated
 * logits, rep 2 on what rep 1 left); *same: reps 1 and 2 gave rep 0's bits. */
static moejit_status fp8_forwards(const mj_gpu *g, const bench_layer *L, moejit_moe_args *a, const fp8_dev *d,
                                  size_t n, mj_dtype dt, float *out, float *again, int *same)
{
    moejit_status st = MOEJIT_OK;
    *same = 1;
    for (int rep = 0; rep < 3 && !st; rep++) {
        st = mj_gpu_poison(g, d->out, 0xff, n * 2, NULL);
        if (!st && rep == 0) st = mj_gpu_poison(g, d->ws, 0xff, d->ws_bytes, NULL);
        if (!st && rep == 1) {
            a->router_logits = (void *)d->other;
            st = bench_layer_forward(g, L, a, d->ws, d->ws_bytes, NULL);
            a->router_logits = (void *)d->logits;
        }
        if (!st) st = bench_layer_forward(g, L, a, d->ws, d->ws_bytes, NULL);
        if (!st) st = mj_gpu_sync(g, NULL);
        if (!st) st = mj_gpu_download_values(g, d->out, n, dt, rep ? again : out);
        if (!st && rep) *same = *same && memcmp(out, again, n * sizeof *out) == 0;
    }
    return st;
}

/* One case at T tokens (ep: on an expert-parallel rank); returns 1 when it passes. */
static int fp8_run(const mj_gpu *g, const bench_layer *L, const bench_quant *q, const char *act, long long T, int ep,
                   FILE *log)
{
    fp8_host h;
    fp8_dev d;
    memset(&d, 0, sizeof d);
    moejit_moe_args a;
    memset(&a, 0, sizeof a); /* read into the reference's fields even when the device set-up failed */
    int ok = 0, same = 0;
    const size_t n = (size_t)T * (size_t)q->check_h;
    float *out = malloc(n * sizeof *out), *again = malloc(n * sizeof *again);
    double *ideal = malloc(n * sizeof *ideal), *replay = malloc(n * sizeof *replay);
    moejit_status st = MOEJIT_ERR_OUT_OF_MEMORY;
    if (fp8_host_make(q, L->spec, T, ep, &h) == 0 && out && again && ideal && replay)
        st = fp8_dev_make(g, L, q, &h, &a, &d);
    if (!st) st = fp8_forwards(g, L, &a, &d, n, L->spec->dtype, out, again, &same);
    mj_ref_layer R;
    memset(&R, 0, sizeof R);
    R.num_tokens = T, R.hidden = h.H, R.inter = h.I, R.num_experts = h.E, R.topk = h.K;
    R.expert_offset = a.expert_offset, R.num_local_experts = a.num_local_experts;
    R.act = &L->spec->act, R.routing = L->spec->routing, R.w1_layout = L->spec->w1_layout;
    R.dtype = L->spec->dtype, R.x = h.x, R.router_logits = h.logits, R.w1 = h.w1, R.w2 = h.w2;
    R.act_quant = q->block ? MJ_REF_AQ_FP8_BLOCK : strstr(q->spec, "token") ? MJ_REF_AQ_FP8_TOKEN : MJ_REF_AQ_FP8_TENSOR;
    R.x_scale = q->static_x ? h.x_scale : 0.0;
    if (L->spec->routing == MJ_ROUTING_DEEPSEEK_V3)
        R.n_group = L->spec->n_group, R.topk_group = L->spec->topk_group, R.routed_scaling = L->spec->routed_scaling;
    if (!st && mj_ref_forward(&R, 4, ideal, replay, mj_ref_replay_flags(L->spec)) != MOEJIT_OK) st = MOEJIT_ERR_INTERNAL;
    if (st) {
        fprintf(log, "reference %-10s %-40s T=%-4lld FAILED: %s\n", q->name, act, T, moejit_last_error());
    } else {
        double e_ideal = 0, e_replay = 0, m = 0;
        long long bad = 0;
        for (size_t i = 0; i < n; i++) {
            if (!isfinite(out[i])) bad++;
            e_ideal = fmax(e_ideal, fabs(out[i] - ideal[i]));
            e_replay = fmax(e_replay, fabs(out[i] - replay[i]));
            m = fmax(m, fabs(replay[i]));
        }
        mj_gemm_plan plan;
        mj_gemm_plan_make(L->spec, &a, g->sms, L->knobs.decode, &plan);
        /* on an EP rank every token may route only to other ranks' experts: then exact zeros */
        ok = bad == 0 && same && (m > 0 || ep) && e_ideal <= 0.15 * m && e_replay <= 0.04 * m;
        fprintf(log, "reference %-10s %-40s T=%-4lld path=%s%-6s%s err/max: ideal %.2e replay %.2e  non-finite %lld  "
                     "rerun %s  %s\n",
                q->name, act, T, mj_mma_path_name(plan.path), plan.short_tiles ? "/64" : "", ep ? ",ep" : "",
                m > 0 ? e_ideal / m : e_ideal,
                m > 0 ? e_replay / m : e_replay, bad, same ? "identical" : "DIFFERS", ok ? "ok" : "FAIL");
    }
    fp8_dev_free(g, &d);
    fp8_host_free(&h);
    free(out), free(again), free(ideal), free(replay);
    return ok;
}

int bench_quant_reference(const mj_gpu *g, moejit_context *ctx, const char *backend, const bench_quant *q,
                          const char *routing, FILE *log, int *runs)
{
    static const char *const acts[] = {"swiglu", "relu2"};
    /* tile=auto also on an expert-parallel rank at T = 1 and 3 (ep: the index of the first such run) */
    static const struct { const char *tile; long long ts[6]; int n, ep; } layers[] = {
        {"auto", {1, 5, 37, 300, 1, 3}, 6, 4}, {"tall", {640}, 1, 0}, {"pair", {300, 1024}, 2, 0}};
    const int tc = !strcmp(backend, "wgmma") || !strcmp(backend, "mma");
    ref_k = strncmp(routing, "llama4", 6) ? 2 : 1;
    int failed = 0;
    for (size_t a = 0; a < sizeof acts / sizeof acts[0]; a++)
        for (size_t l = 0; l < sizeof layers / sizeof layers[0]; l++) {
            if (l > 0 && strcmp(backend, "wgmma") != 0) continue; /* tall and pair: wgmma's */
            char text[512];
            snprintf(text, sizeof text,
                     "backend=%s,%s,act=%s,routing=%s,hidden=%d,inter=%d,experts=8,topk=%d,arch=native%s%s", backend,
                     q->spec, acts[a], routing, q->check_h, q->check_i, ref_k, tc ? ",tile=" : "",
                     tc ? layers[l].tile : "");
            if (!g) {
                printf("%s\n", text);
                continue;
            }
            bench_layer L;
            if (bench_layer_build(ctx, text, &L) != MOEJIT_OK) {
                fprintf(log, "reference %-10s %-40s BUILD FAILED (%s): %s\n", q->name, acts[a], text,
                        moejit_last_error());
                failed += layers[l].n, *runs += layers[l].n;
            } else {
                for (int i = 0; i < layers[l].n; i++, (*runs)++)
                    failed += !fp8_run(g, &L, q, acts[a], layers[l].ts[i], layers[l].ep && i >= layers[l].ep, log);
            }
            bench_layer_free(&L);
        }
    fflush(log);
    return failed;
}
