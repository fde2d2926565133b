/*
 * This file contains the 4-bit weight formats of `moejit bench layer` (bench_layer_w4.h): the
 * device weights of the 4-bit model shapes, their floor, and the float64 reference cases of the
 * tensor-core backends' 4-bit layers.
 *
 * A reference case draws its own codes, scales and zero points (seeded), packs them as the
 * contract says (docs/SEMANTICS.md §5: two nibbles per byte along K, the even element low;
 * w4a16 scales in the dtype [E, N, K/g] and zero points packed along the group index; mxfp4
 * e8m0 bytes [E, N, K/32]) and hands the reference the exact dequantized values, so the kernel
 * is checked against the contract's decoding, not against a decoder of its own. The bars are
 * the tensor-core float64 cases' (docs/SEMANTICS.md §7) over the finite outputs; the mxfp4 NaN
 * case sets the e8m0 byte of W2 row 3, group 0 of every expert to 255, so column 3 of every
 * token with a local expert must be NaN and every other output finite. The row-scaled identity
 * case (w4_row_scaled_run) checks that the mxfp4 decode mainloop's two forms give the same bits.
 */
#include "tools/bench_layer_w4.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/halfconv.h"
#include "core/settings.h"
#include "core/spec.h"
#include "reference/reference.h"
#include "runtime/gemm_plan.h"
#include "templates/common/mma_params.h"

int bench_w4_is_4bit(const char *quant) { return quant && (!strncmp(quant, "w4a16", 5) || !strcmp(quant, "mxfp4")); }

/* A 4-bit format as the spec fields name it. */
typedef struct w4_fmt {
    int mx, group, zp;
} w4_fmt;

static w4_fmt fmt_of(const char *quant)
{
    w4_fmt f = {!strcmp(quant, "mxfp4"), 32, 0};
    if (!f.mx) {
        const char *g = strstr(quant, "group=");
        f.group = g ? atoi(g + 6) : 128;
        f.zp = strstr(quant, "zero_point=1") != NULL;
    }
    return f;
}

double bench_w4_bytes_per_weight(const char *quant)
{
    if (!bench_w4_is_4bit(quant)) return 2.0;
    const w4_fmt f = fmt_of(quant);
    return f.mx ? 0.5 + 1.0 / 32 : 0.5 + 2.0 / f.group + (f.zp ? 0.5 / f.group : 0.0);
}

bench_floor bench_w4_floor(bench_floor m, const char *quant, double bw, double peak)
{
    m.weight_bytes *= bench_w4_bytes_per_weight(quant) / 2.0;
    const double t_bw = m.weight_bytes / (bw * 1e12), t_fl = m.flops / (peak * 1e12);
    m.floor_us = 1e6 * (t_bw > t_fl ? t_bw : t_fl);
    return m;
}

/* ---- the model shapes' device weights ------------------------------------------------------ */

/* Bytes whose values cycle through a few e8m0 scales (2^-8 .. 2^-6) or zero-point pairs. */
static moejit_status upload_pattern(const mj_gpu *g, size_t n, int e8m0, uint64_t seed, CUdeviceptr *out)
{
    unsigned char *h = malloc(n ? n : 1);
    if (!h) return MOEJIT_ERR_OUT_OF_MEMORY;
    for (size_t i = 0; i < n; i++) {
        const uint64_t v = (i + seed) * 0x9e3779b97f4a7c15ull;
        h[i] = e8m0 ? (unsigned char)(119 + (v >> 61) % 3) : (unsigned char)(v >> 56);
    }
    moejit_status st = mj_gpu_alloc(g, n, out);
    if (st == MOEJIT_OK) st = mj_gpu_upload(g, *out, h, n);
    free(h);
    return st;
}

/* One matrix [E, N, K]: packed codes (random bf16 patterns are random nibbles), its scales and
 * zero points. */
static moejit_status make_matrix(const mj_gpu *g, const bench_fill *fl, const w4_fmt *f, size_t rows, int K,
                                 uint64_t seed, CUdeviceptr *data, CUdeviceptr *scale, CUdeviceptr *zero,
                                 CUstream stream)
{
    const size_t n = rows * (size_t)K, groups = rows * (size_t)(K / f->group);
    moejit_status st = mj_gpu_alloc(g, n / 2, data);
    if (st == MOEJIT_OK) st = bench_fill_run(g, fl, *data, n / 4, MJ_DTYPE_BF16, seed, 1.0f, stream);
    if (st == MOEJIT_OK && f->mx) st = upload_pattern(g, groups, 1, seed, scale);
    if (st == MOEJIT_OK && !f->mx) st = mj_gpu_alloc(g, groups * 2, scale);
    if (st == MOEJIT_OK && !f->mx)
        st = bench_fill_run(g, fl, *scale, groups, MJ_DTYPE_BF16, seed + 1, 0.25f / sqrtf((float)K), stream);
    if (st == MOEJIT_OK && f->zp) st = upload_pattern(g, groups / 2, 0, seed, zero);
    return st;
}

moejit_status bench_w4_weights_make(const mj_gpu *g, const bench_fill *f, const char *quant, int H, int I, int E,
                                    int rows1, uint64_t seed, bench_w4_weights *w, CUstream stream)
{
    memset(w, 0, sizeof *w);
    const w4_fmt fm = fmt_of(quant);
    moejit_status st = make_matrix(g, f, &fm, (size_t)E * (size_t)rows1, H, seed + 1, &w->w1, &w->w1_scale,
                                   &w->w1_zero, stream);
    if (st == MOEJIT_OK)
        st = make_matrix(g, f, &fm, (size_t)E * (size_t)H, I, seed + 2, &w->w2, &w->w2_scale, &w->w2_zero, stream);
    return st;
}

void bench_w4_args(const bench_w4_weights *w, moejit_moe_args *a)
{
    a->w1 = (void *)w->w1, a->w2 = (void *)w->w2;
    a->w1_scale = (void *)w->w1_scale, a->w2_scale = (void *)w->w2_scale;
    a->w1_zero = (void *)w->w1_zero, a->w2_zero = (void *)w->w2_zero;
}

void bench_w4_weights_free(const mj_gpu *g, bench_w4_weights *w)
{
    mj_gpu_free(g, w->w1), mj_gpu_free(g, w->w2), mj_gpu_free(g, w->w1_scale), mj_gpu_free(g, w->w2_scale);
    mj_gpu_free(g, w->w1_zero), mj_gpu_free(g, w->w2_zero);
    memset(w, 0, sizeof *w);
}

/* ---- the float64 cases ------------------------------------------------------------------------ */

static uint64_t w4_rng = 0x6a09e667f3bcc908ull;
static uint32_t next_u32(void)
{
    w4_rng ^= w4_rng >> 12, w4_rng ^= w4_rng << 25, w4_rng ^= w4_rng >> 27;
    return (uint32_t)((w4_rng * 0x2545f4914f6cdd1dull) >> 32);
}
static double uniform_pm1(void) { return next_u32() / 2147483648.0 - 1.0; }

static double e2m1_value(unsigned q)
{
    static const double mag[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
    return (q & 8u) ? -mag[q & 7u] : mag[q & 7u];
}

/* One matrix of a case on the host: device bytes and the exact dequantized values. */
typedef struct w4_host {
    unsigned char *data, *scale, *zero;
    size_t data_bytes, scale_bytes, zero_bytes;
    float *deq;
} w4_host;

static void host_free(w4_host *h)
{
    free(h->data), free(h->scale), free(h->zero), free(h->deq);
    memset(h, 0, sizeof *h);
}

/* The scale of group gi of row r (its bytes written), as a double. */
static double draw_scale(const w4_fmt *f, mj_dtype dt, int K, size_t at, unsigned char *scale)
{
    if (f->mx) {
        scale[at] = (unsigned char)(121 + next_u32() % 3); /* 2^-6 .. 2^-4 */
        return ldexp(1.0, scale[at] - 127);
    }
    const double u = (0.5 + 0.5 * fabs(uniform_pm1())) * (next_u32() & 1 ? -1.0 : 1.0) * 0.25 / sqrt((double)K);
    const uint16_t bits = dt == MJ_DTYPE_FP16 ? mj_half_fp16_from_float((float)u) : mj_half_bf16_from_float((float)u);
    scale[2 * at] = (unsigned char)(bits & 0xff), scale[2 * at + 1] = (unsigned char)(bits >> 8);
    return dt == MJ_DTYPE_FP16 ? mj_half_fp16_to_float(bits) : mj_half_bf16_to_float(bits);
}

/* rows x K weights of format f; nan_row >= 0: that row of every expert (of n_per_expert rows)
 * gets e8m0 byte 255 on its first group. */
static int host_make(const w4_fmt *f, mj_dtype dt, size_t rows, int K, size_t n_per_expert, long nan_row, w4_host *h)
{
    const int G = f->group;
    const size_t groups = (size_t)(K / G);
    memset(h, 0, sizeof *h);
    h->data_bytes = rows * (size_t)K / 2, h->scale_bytes = rows * groups * (f->mx ? 1 : 2);
    h->zero_bytes = f->zp ? rows * groups / 2 : 0;
    h->data = calloc(h->data_bytes, 1), h->scale = calloc(h->scale_bytes, 1);
    h->zero = calloc(h->zero_bytes ? h->zero_bytes : 1, 1), h->deq = malloc(rows * (size_t)K * sizeof *h->deq);
    if (!h->data || !h->scale || !h->zero || !h->deq) return -1;
    for (size_t r = 0; r < rows; r++)
        for (size_t gi = 0; gi < groups; gi++) {
            double s = draw_scale(f, dt, K, r * groups + gi, h->scale);
            if (f->mx && nan_row >= 0 && r % n_per_expert == (size_t)nan_row && gi == 0) {
                h->scale[r * groups] = 255;
                s = NAN;
            }
            const unsigned zp = f->zp ? next_u32() % 16 : 8;
            if (f->zp) h->zero[(r * groups + gi) / 2] |= (unsigned char)(zp << (4 * (gi & 1)));
            for (int k = (int)gi * G; k < (int)(gi + 1) * G; k++) {
                const unsigned q = next_u32() % 16;
                h->data[(r * (size_t)K + (size_t)k) / 2] |= (unsigned char)(q << (4 * (k & 1)));
                h->deq[r * (size_t)K + (size_t)k] =
                    (float)((f->mx ? e2m1_value(q) : (double)q - zp) * s); /* exact in float */
            }
        }
    return 0;
}

/* The device copies of one host matrix. */
static moejit_status upload_host(const mj_gpu *g, const w4_host *h, CUdeviceptr *data, CUdeviceptr *scale,
                                 CUdeviceptr *zero)
{
    moejit_status st = mj_gpu_alloc(g, h->data_bytes, data);
    if (st == MOEJIT_OK) st = mj_gpu_upload(g, *data, h->data, h->data_bytes);
    if (st == MOEJIT_OK) st = mj_gpu_alloc(g, h->scale_bytes, scale);
    if (st == MOEJIT_OK) st = mj_gpu_upload(g, *scale, h->scale, h->scale_bytes);
    if (st == MOEJIT_OK && h->zero_bytes) st = mj_gpu_alloc(g, h->zero_bytes, zero);
    if (st == MOEJIT_OK && h->zero_bytes) st = mj_gpu_upload(g, *zero, h->zero, h->zero_bytes);
    return st;
}

/* A case's layer: its format, shape and the run's options. */
typedef struct w4_case {
    w4_fmt f;
    const char *quant, *dtype, *act;
    int H, I, E, K, ep_local, nan;
    int row_scaled; /* 1-3: the row-scaled identity case's mode (w4_row_scaled_run), not a reference one */
    const char *routing; /* the spec's routing fields (NULL: renormalize) */
    const char *tile;    /* the spec's tile (NULL: auto) */
} w4_case;

/* A case's device inputs at T tokens (x, logits, an output, W1 and W2 of h1 and h2) in
 * d[0..8], and the layer's arguments pointing at them (an expert-parallel rank from expert 2). */
static moejit_status upload_case(const mj_gpu *g, const w4_case *c, long long T, mj_dtype dt, const float *x,
                                 const float *lg, const w4_host *h1, const w4_host *h2, CUdeviceptr *d,
                                 moejit_moe_args *a)
{
    const size_t n = (size_t)T * (size_t)c->H;
    moejit_moe_args_init(a);
    a->num_tokens = T, a->hidden = c->H, a->inter = c->I, a->num_experts = c->E, a->topk = c->K;
    if (c->ep_local > 0) a->expert_offset = 2, a->num_local_experts = c->ep_local;
    moejit_status st = mj_gpu_upload_values(g, x, n, dt, &d[0]);
    if (!st) st = mj_gpu_upload_values(g, lg, (size_t)T * (size_t)c->E, MJ_DTYPE_FP32, &d[1]);
    if (!st) st = mj_gpu_alloc(g, n * 2, &d[2]);
    if (!st) st = upload_host(g, h1, &d[3], &d[4], &d[5]);
    if (!st) st = upload_host(g, h2, &d[6], &d[7], &d[8]);
    a->x = (void *)d[0], a->router_logits = (void *)d[1], a->out = (void *)d[2];
    a->w1 = (void *)d[3], a->w1_scale = (void *)d[4], a->w1_zero = (void *)d[5];
    a->w2 = (void *)d[6], a->w2_scale = (void *)d[7], a->w2_zero = (void *)d[8];
    return st;
}

/* Errors of out against the reference over the finite reference values; the NaN positions
 * must agree. Returns 1 when the case passes. */
static int judge(const w4_case *c, const float *out, const float *again, const double *ideal, const double *replay,
                 long long n, char *line, size_t len)
{
    double e_ideal = 0, e_replay = 0, m = 0;
    long long bad = 0, nans = 0;
    for (long long i = 0; i < n; i++) {
        if (isnan(replay[i])) {
            nans++;
            bad += !isnan(out[i]);
            continue;
        }
        if (!isfinite(out[i])) bad++;
        e_ideal = fmax(e_ideal, fabs(out[i] - ideal[i]));
        e_replay = fmax(e_replay, fabs(out[i] - replay[i]));
        m = fmax(m, fabs(replay[i]));
    }
    const int same = memcmp(out, again, (size_t)n * sizeof *out) == 0;
    const int ok = bad == 0 && same && (m > 0 || c->ep_local > 0) && e_ideal <= 0.05 * m && e_replay <= 0.01 * m &&
                   (!c->nan || nans > 0);
    snprintf(line, len, "err/max: ideal %.2e replay %.2e  mismatched non-finite %lld (NaN expected %lld)  rerun %s  %s",
             m > 0 ? e_ideal / m : e_ideal, m > 0 ? e_replay / m : e_replay, bad, nans,
             same ? "identical" : "DIFFERS", ok ? "ok" : "FAIL");
    return ok;
}

/* Two forwards of the layer (each on a poisoned workspace and output) into out and again. */
static moejit_status forward_twice(const mj_gpu *g, const bench_layer *L, moejit_moe_args *a, CUdeviceptr dout,
                                   mj_dtype dt, float *out, float *again)
{
    size_t ws = 0;
    CUdeviceptr dws = 0;
    const size_t n = (size_t)a->num_tokens * (size_t)a->hidden;
    moejit_status st = bench_layer_workspace(L, a, &ws);
    if (st == MOEJIT_OK) st = mj_gpu_alloc(g, ws, &dws);
    for (int rep = 0; rep < 2 && st == MOEJIT_OK; rep++) {
        st = mj_gpu_poison(g, dout, 0xff, n * 2, NULL);
        if (st == MOEJIT_OK) st = mj_gpu_poison(g, dws, (unsigned char)(0xff - rep), ws, NULL);
        if (st == MOEJIT_OK) st = bench_layer_forward(g, L, a, dws, ws, NULL);
        if (st == MOEJIT_OK) st = mj_gpu_sync(g, NULL);
        if (st == MOEJIT_OK) st = mj_gpu_download_values(g, dout, n, dt, rep ? again : out);
    }
    mj_gpu_free(g, dws);
    return st;
}

/* One case at T tokens; returns 1 when it passes. */
static int w4_run(const mj_gpu *g, const bench_layer *L, const w4_case *c, long long T, FILE *log)
{
    const mj_dtype dt = L->spec->dtype;
    const int gated = moejit_activation_is_gated(&L->spec->act), H = c->H, I = c->I;
    const int e_local = c->ep_local > 0 ? c->ep_local : c->E;
    const size_t rows1 = (size_t)(gated ? 2 * I : I), n = (size_t)T * (size_t)H;
    float *x = malloc(n * sizeof *x), *lg = malloc((size_t)T * (size_t)c->E * sizeof *lg);
    float *out = malloc(n * sizeof *out), *again = malloc(n * sizeof *again);
    double *ideal = malloc(n * sizeof *ideal), *replay = malloc(n * sizeof *replay);
    w4_host h1, h2;
    memset(&h1, 0, sizeof h1), memset(&h2, 0, sizeof h2);
    CUdeviceptr d[10] = {0}; /* x, logits, out, w1, w1 scale, w1 zero, w2, w2 scale, w2 zero, bias */
    const int dsv3 = L->spec->routing == MJ_ROUTING_DEEPSEEK_V3;
    float bias[8]; /* deepseek_v3's selection bias (E = 8) */
    int ok = 0;
    char line[256] = "";
    moejit_status st = MOEJIT_ERR_OUT_OF_MEMORY;
    if (!x || !lg || !out || !again || !ideal || !replay ||
        host_make(&c->f, dt, (size_t)e_local * rows1, H, rows1, -1, &h1) ||
        host_make(&c->f, dt, (size_t)e_local * (size_t)H, I, (size_t)H, c->nan ? 3 : -1, &h2))
        goto done;
    for (size_t i = 0; i < n; i++) x[i] = mj_half_snap((float)uniform_pm1(), dt);
    for (size_t i = 0; i < (size_t)T * (size_t)c->E; i++) lg[i] = (float)(2.0 * uniform_pm1());
    moejit_moe_args a;
    st = upload_case(g, c, T, dt, x, lg, &h1, &h2, d, &a);
    for (int e = 0; e < 8; e++) bias[e] = (float)(0.5 * uniform_pm1());
    if (!st && dsv3) st = mj_gpu_upload_values(g, bias, (size_t)c->E, MJ_DTYPE_FP32, &d[9]);
    a.routing_bias = (const float *)d[9];
    if (!st) st = forward_twice(g, L, &a, d[2], dt, out, again);
    if (st) {
        snprintf(line, sizeof line, "RUN FAILED: %s", moejit_last_error());
        goto done;
    }
    mj_ref_layer R;
    memset(&R, 0, sizeof R);
    R.num_tokens = T, R.hidden = H, R.inter = I, R.num_experts = c->E, R.topk = c->K;
    R.expert_offset = a.expert_offset, R.num_local_experts = a.num_local_experts;
    R.act = &L->spec->act, R.routing = L->spec->routing, R.w1_layout = L->spec->w1_layout, R.dtype = dt;
    R.x = x, R.router_logits = lg, R.w1 = h1.deq, R.w2 = h2.deq;
    if (dsv3) {
        R.n_group = L->spec->n_group, R.topk_group = L->spec->topk_group;
        R.routed_scaling = L->spec->routed_scaling, R.routing_bias = bias;
    }
    /* the replay multiplies the weights as the kernels hold them: each dequantized value
     * rounded once to the dtype (docs/SEMANTICS.md §6); the ideal layer the exact ones */
    if (mj_ref_forward(&R, 4, ideal, replay, mj_ref_replay_flags(L->spec)) != MOEJIT_OK)
        snprintf(line, sizeof line, "REFERENCE FAILED: %s", moejit_last_error());
    else
        ok = judge(c, out, again, ideal, replay, (long long)n, line, sizeof line);
    /* the forced decode mode must have run the persistent layer (deep blocks) */
    const int mode = L->knobs.decode;
    mj_gemm_plan plan;
    mj_gemm_plan_make(L->spec, &a, g->sms, mode, &plan);
    if (mode == MJ_DECODE_PERSISTENT_DEEP && (!plan.persistent_splits || plan.persistent_shallow)) {
        snprintf(line, sizeof line, "not the persistent decode layer  FAIL");
        ok = 0;
    }
done:
    fprintf(log, "reference %-4s %-24s %-40s T=%-4lld%s%s %s\n", c->dtype, c->quant, c->act, T,
            c->ep_local > 0 ? " ep" : "",
            L->knobs.decode == MJ_DECODE_PERSISTENT_DEEP ? " persistent" : "",
            line);
    for (int i = 0; i < 10; i++) mj_gpu_free(g, d[i]);
    host_free(&h1), host_free(&h2);
    free(x), free(lg), free(out), free(again), free(ideal), free(replay);
    return ok;
}

/* The row-scaled identity case (mxfp4, bf16): the decode mainloop multiplies a tile's pairs by
 * one factor each and its rows by 2^R after the last stage when every row of the tile allows
 * it, else by the contract's two factors (templates/mma_w4_dequant.cuh), and the two forms
 * must give the same bits. Two forwards on W2 scale bytes that differ in one group of row 3 of
 * every expert only: 253 in its first group (past the form's largest byte; mode 1) or its last
 * (a later stage's, mode 3), or 135 in its first in rows whose bytes are 50-52 but for a 0
 * and a 131 (mode 2: too wide a row, where every other row is as wide as the form allows and
 * its smallest products are bf16 subnormals). The tile of output columns 0..63 then changes
 * form, so every output but column 3 must keep its bits, and column 3 must change. */
static int w4_row_scaled_run(const mj_gpu *g, const bench_layer *L, const w4_case *c, long long T, FILE *log)
{
    const mj_dtype dt = L->spec->dtype;
    const int gated = moejit_activation_is_gated(&L->spec->act), H = c->H, I = c->I, groups = I / 32;
    const size_t rows1 = (size_t)(gated ? 2 * I : I), n = (size_t)T * (size_t)H;
    float *x = malloc(n * sizeof *x), *lg = malloc((size_t)T * (size_t)c->E * sizeof *lg);
    float *out[2] = {malloc(n * sizeof(float)), malloc(n * sizeof(float))};
    float *again = malloc(n * sizeof *again);
    w4_host h1, h2;
    memset(&h1, 0, sizeof h1), memset(&h2, 0, sizeof h2);
    CUdeviceptr d[9] = {0}; /* x, logits, out, w1, w1 scale, w1 zero, w2, w2 scale, w2 zero */
    int ok = 0;
    char line[256] = "";
    moejit_status st = MOEJIT_ERR_OUT_OF_MEMORY;
    if (!x || !lg || !out[0] || !out[1] || !again || groups < 9 ||
        host_make(&c->f, dt, (size_t)c->E * rows1, H, rows1, -1, &h1) ||
        host_make(&c->f, dt, (size_t)c->E * (size_t)H, I, (size_t)H, -1, &h2))
        goto done;
    if (c->row_scaled == 2)
        for (size_t r = 0; r < (size_t)c->E * (size_t)H; r++) {
            for (int gi = 0; gi < groups; gi++)
                h2.scale[r * groups + gi] = (unsigned char)(h2.scale[r * groups + gi] - 71);
            h2.scale[r * groups + 1] = 0, h2.scale[r * groups + 2] = 131;
        }
    for (size_t i = 0; i < n; i++) x[i] = mj_half_snap((float)uniform_pm1(), dt);
    for (size_t i = 0; i < (size_t)T * (size_t)c->E; i++) lg[i] = (float)(2.0 * uniform_pm1());
    moejit_moe_args a;
    st = upload_case(g, c, T, dt, x, lg, &h1, &h2, d, &a);
    for (int v = 0; v < 2 && !st; v++) {
        if (v == 1) {
            for (int e = 0; e < c->E; e++)
                h2.scale[((size_t)e * (size_t)H + 3) * (size_t)groups + (c->row_scaled == 3 ? groups - 1 : 0)] =
                    c->row_scaled == 2 ? 135 : 253;
            st = mj_gpu_upload(g, d[7], h2.scale, h2.scale_bytes);
        }
        if (!st) st = forward_twice(g, L, &a, d[2], dt, out[v], again);
        if (!st && memcmp(out[v], again, n * sizeof *again) != 0) {
            snprintf(line, sizeof line, "rerun DIFFERS  FAIL");
            goto done;
        }
    }
    if (st) {
        snprintf(line, sizeof line, "RUN FAILED: %s", moejit_last_error());
        goto done;
    }
    long long differ = 0, col3 = 0, nonfinite = 0;
    for (size_t i = 0; i < n; i++) {
        nonfinite += !isfinite(out[0][i]);
        if (i % (size_t)H == 3) col3 += memcmp(&out[0][i], &out[1][i], sizeof(float)) != 0;
        else differ += memcmp(&out[0][i], &out[1][i], sizeof(float)) != 0;
    }
    ok = differ == 0 && col3 > 0 && nonfinite == 0;
    snprintf(line, sizeof line,
             "row-scaled, %s: other columns differing %lld, column 3 changed %lld of %lld, non-finite %lld  %s",
             c->row_scaled == 1   ? "past the largest byte"
             : c->row_scaled == 2 ? "too wide a row"
                                  : "a later stage's byte",
             differ, col3, T, nonfinite, ok ? "ok" : "FAIL");
done:
    fprintf(log, "identity  %-4s %-24s %-40s T=%-4lld%s %s\n", c->dtype, c->quant, c->act, T,
            L->knobs.decode == MJ_DECODE_PERSISTENT_DEEP ? " persistent" : "", line);
    for (int i = 0; i < 9; i++) mj_gpu_free(g, d[i]);
    host_free(&h1), host_free(&h2);
    free(x), free(lg), free(out[0]), free(out[1]), free(again);
    return ok;
}

/* The layer of case c (built once) at each T of ts; g NULL: prints its spec. Returns the runs. */
static int w4_layer(const mj_gpu *g, moejit_context *ctx, const char *backend, const w4_case *c,
                    const long long *ts, int n_ts, FILE *log, int *failed)
{
    char text[512];
    snprintf(text, sizeof text,
             "backend=%s,quant=%s,dtype=%s,act=%s,routing=%s,hidden=%d,inter=%d,experts=%d,topk=%d,"
             "arch=native%s%s",
             backend, c->quant, c->dtype, c->act, c->routing ? c->routing : "renormalize", c->H, c->I, c->E, c->K,
             c->tile ? ",tile=" : "", c->tile ? c->tile : "");
    if (!g) { /* (the NaN case reuses the first case's layer, the identity cases one layer) */
        static char last[512];
        if (c->nan) return 0;
        if (strcmp(last, text) != 0) printf("%s\n", text);
        snprintf(last, sizeof last, "%s", text);
        return 0;
    }
    bench_layer L;
    if (bench_layer_build(ctx, text, &L) != MOEJIT_OK) {
        fprintf(log, "reference %-24s BUILD FAILED (%s): %s\n", c->quant, text, moejit_last_error());
        *failed += n_ts;
        bench_layer_free(&L);
        return n_ts;
    }
    int runs = 0;
    int (*run)(const mj_gpu *, const bench_layer *, const w4_case *, long long, FILE *) =
        c->row_scaled ? w4_row_scaled_run : w4_run;
    for (int i = 0; i < n_ts; i++) {
        *failed += !run(g, &L, c, ts[i], log);
        runs++;
        if (ts[i] > MJ_MMA_PERSISTENT_MAX_TOKENS) continue;
        /* and the persistent decode layer, forced (4-bit: its deep blocks only) */
        const int mode = L.knobs.decode;
        L.knobs.decode = MJ_DECODE_PERSISTENT_DEEP;
        *failed += !run(g, &L, c, ts[i], log);
        L.knobs.decode = mode;
        runs++;
    }
    bench_layer_free(&L);
    fflush(log);
    return runs;
}

/* The cases of one format: H = 5m and I = 3m for m its shape multiple (K tails past a 128-k
 * stage, N tails past a 64-row tile), T = 1 (routed GEMM1), 5 (fused routing), 37 (small path),
 * 300 (large path), T = 3 on an expert-parallel rank; on wgmma the tall tiles, forced, at
 * T = 640 and 1100 (160 and 275 rows per expert: one 256-row tile, then two), and the pair
 * tiles, forced, at T = 300, 640 and 1100 (75 rows per expert: every cluster two experts'
 * tiles, each CTA decoding its own; 160: every cluster one expert's two, each CTA decoding half
 * for both; 275: both kinds, and an odd tile alone); more activations and fp16 on some. */
static int w4_format_cases(const mj_gpu *g, moejit_context *ctx, const char *backend, const char *quant,
                           const char *const *acts, int n_acts, int fp16, int nan, FILE *log, int *failed)
{
    static const long long ts[] = {1, 5, 37, 300}, ep_ts[] = {3}, nan_ts[] = {37, 300}, tall_ts[] = {640, 1100},
                           pair_ts[] = {300, 640, 1100};
    const w4_fmt f = fmt_of(quant);
    const int m = f.mx ? 32 : f.zp ? 2 * f.group : f.group;
    w4_case c = {f, quant, "bf16", acts[0], 5 * m, 3 * m, 8, 2, 0, 0, 0, NULL, NULL};
    int runs = w4_layer(g, ctx, backend, &c, ts, 4, log, failed);
    c.ep_local = 4;
    runs += w4_layer(g, ctx, backend, &c, ep_ts, 1, log, failed);
    c.ep_local = 0;
    if (!strcmp(backend, "wgmma")) {
        c.tile = "tall";
        runs += w4_layer(g, ctx, backend, &c, tall_ts, 2, log, failed);
        c.tile = "pair";
        runs += w4_layer(g, ctx, backend, &c, pair_ts, 3, log, failed);
        c.tile = NULL;
    }
    for (int i = 1; i < n_acts; i++) {
        c.act = acts[i];
        runs += w4_layer(g, ctx, backend, &c, ts, 4, log, failed);
    }
    c.act = acts[0];
    if (fp16) {
        c.dtype = "fp16";
        runs += w4_layer(g, ctx, backend, &c, ts, 4, log, failed);
        c.dtype = "bf16";
    }
    if (nan) {
        c.nan = 1;
        runs += w4_layer(g, ctx, backend, &c, nan_ts, 2, log, failed);
        c.nan = 0;
        static const long long id_ts[] = {1, 5, 37};
        c.I = 9 * m; /* two stages of 256 k in GEMM2 */
        for (c.row_scaled = 1; c.row_scaled <= 3; c.row_scaled++)
            runs += w4_layer(g, ctx, backend, &c, id_ts, 3, log, failed);
        c.row_scaled = 0, c.I = 3 * m;
    }
    return runs;
}

/* Each routing method of routings but renormalize on one 4-bit layer (mxfp4, gpt-oss's SwiGLU;
 * deepseek_v3 with a selection bias, llama4 top-1): the routing kernels are the 16-bit layers',
 * run here in front of the 4-bit GEMMs and inside the 4-bit persistent layer. */
static int w4_routing_cases(const mj_gpu *g, moejit_context *ctx, const char *backend, const char *const *routings,
                            int n_routings, FILE *log, int *failed)
{
    static const long long ts[] = {1, 5, 37, 300};
    w4_case c = {fmt_of("mxfp4"), "mxfp4", "bf16", "swiglu(alpha=1.702,beta=1,limit=7)", 160, 96, 8, 2, 0, 0, 0,
                 NULL, NULL};
    int runs = 0;
    for (int r = 0; r < n_routings; r++) {
        if (!strcmp(routings[r], "renormalize")) continue;
        const int llama4 = !strcmp(routings[r], "llama4");
        c.K = llama4 ? 1 : 2;
        c.routing = !strcmp(routings[r], "deepseek_v3") ? "deepseek_v3,n_group=4,topk_group=2,routed_scaling=2.5"
                                                         : routings[r];
        runs += w4_layer(g, ctx, backend, &c, ts, 4, log, failed);
    }
    return runs;
}

int bench_w4_reference_checks(const mj_gpu *g, moejit_context *ctx, const char *backend, const char *const *quants,
                              int n_quants, const char *const *routings, int n_routings, FILE *log, int *failed)
{
    int w4 = 0;
    for (int q = 0; q < n_quants; q++) w4 |= !strcmp(quants[q], "w4a16") || !strcmp(quants[q], "mxfp4");
    int runs = w4 ? w4_routing_cases(g, ctx, backend, routings, n_routings, log, failed) : 0;
    static const char *const gated[] = {"swiglu"}, *const two[] = {"swiglu", "relu2"},
                             *const oss[] = {"swiglu(alpha=1.702,beta=1,limit=7)", "relu2", "silu"};
    static const char *const w4a16[] = {"w4a16,group=32", "w4a16,group=64", "w4a16,group=128",
                                        "w4a16,group=32,zero_point=1", "w4a16,group=64,zero_point=1",
                                        "w4a16,group=128,zero_point=1"};
    for (int q = 0; q < n_quants; q++) {
        if (!strcmp(quants[q], "mxfp4")) {
            runs += w4_format_cases(g, ctx, backend, "mxfp4", oss, 3, 1, 1, log, failed);
            continue;
        }
        if (strcmp(quants[q], "w4a16") != 0) continue;
        for (int i = 0; i < 6; i++) /* g = 64 also ungated, g = 128 with zero points also fp16 */
            runs += w4_format_cases(g, ctx, backend, w4a16[i], i == 1 ? two : gated, i == 1 ? 2 : 1, i == 5, 0,
                                    log, failed);
    }
    return runs;
}
