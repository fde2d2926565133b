/*
 * This file contains the GPU suite: every activation × {bf16, fp16} × {softmax_topk,
 * renormalize, precomputed} of the simt backend, run through the public API on the device and
 * compared with the float64 CPU reference (tests/lib/reference.c), plus negative controls
 * that the checker must reject.
 *
 * Per spec, a sequence of shapes covers T ∈ {0, 1, 3, 17, 129, 1000}, H ∈ {264, 1000},
 * I ∈ {136, 72}, E ∈ {8, 64}, k ∈ {1, 2, 8} and one expert-parallel shard. Each run: the
 * output (and a guard region past it) and the workspace are poisoned first; every element
 * must be finite and the guard untouched; the error (the contract's max|out-ref|/max|ref|,
 * per token, worst token) is checked against the contract's bar with the ideal reference and
 * a tighter bar with the replay reference; a second run must give the same
 * bytes, and one CUDA-graph replay per spec must match the eager run bit for bit.
 *
 *   build/tests/gpu_suite [FILTER]     FILTER: substring of the spec text
 *   MOEJIT_GPU_SEED=N                  repeat a run's inputs (the seed is printed)
 *
 * Without a driver or device it prints one "no CUDA device: ...; skipping GPU suite" line
 * and exits 0. Otherwise the last line is "N passed, N failed[, N skipped]".
 */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpu_harness.h"
#include "halfconv.h"
#include "moejit.h"
#include "reference.h"
#include "spec.h"
#include "status.h"

/* The contract's bar for bf16/fp16 (moe-semantics.md §5), measured against the ideal
 * float64 reference. */
#define TOL_IDEAL 0.05
/* Replay bars, against the reference that rounds the intermediate a to the dtype as the
 * kernel stores it (MJ_REF_REPLAY_SIMT). What is left is the final rounding of out (unit
 * roundoff 2^-8 = 0.0039 in bf16, 2^-11 = 0.00049 in fp16, relative to each element and so at
 * most that relative to the token's largest), fp32 accumulation and fp32 exp/erf/tanh
 * (~1e-6), and rare one-ulp flips of a where fp32 and float64 straddle a rounding boundary
 * (each ~2^-8·|a_i·w2_hi|, far below the rest). A CPU dry run that models exactly these
 * roundings measured 0.0039 (bf16) and 0.00048 (fp16) over the whole matrix. The bars leave
 * 2.5x / 6x of margin and stay 5x / 17x under the contract's 0.05, which catches what the loose
 * bar lets through: a constant off by 1%, tanh.approx in SiTU (×25), a clamp missing on a
 * few elements, an intermediate stored twice. (A kernel that also stored y in 16 bits would
 * need MJ_REF_ROUND_Y in the replay: the dry run gives 0.013 for bf16 without it.) */
#define TOL_REPLAY_BF16 0.01
#define TOL_REPLAY_FP16 0.003
/* Bytes past the end of out that must stay poisoned (out-of-bounds writes). */
#define GUARD_BYTES 4096
#define MAX_SPECS 96

/* ---- the matrix ------------------------------------------------------------------------------ */

static const char *const k_acts[] = {
    "gelu", "relu", "silu", "swiglu", "swiglu(alpha=1.702,beta=1,limit=7)", "geglu", "relu2",
    "swiglu_step", "geglu_tanh", "identity", "situ",
    "situ(gate_scale=4,linear_scale=none,clamp_limit=5)",
};
static const char *const k_quants[] = {"bf16", "fp16"};
static const char *const k_routings[] = {"softmax_topk", "renormalize", "precomputed"};

typedef struct shape {
    int64_t T, H, I, E, k;
    int64_t offset, local; /* expert parallelism; local = 0: all experts */
} shape;

/* Together every value of every axis; not the cross product. The big case keeps H·I small
 * enough that the float64 reference stays well under a second per spec. */
static const shape k_shapes[] = {
    {0, 264, 136, 8, 2, 0, 0},
    {1, 264, 136, 64, 8, 0, 0},
    {3, 1000, 72, 8, 1, 0, 0},
    {17, 264, 136, 64, 2, 16, 24},   /* EP shard: experts [16, 40) of 64 */
    {129, 1000, 72, 8, 8, 0, 0},
    {1000, 264, 136, 64, 8, 0, 0},
};
#define N_SHAPES (sizeof k_shapes / sizeof k_shapes[0])
#define GRAPH_SHAPE 3   /* the case also replayed through a CUDA graph */
#define CONTROL_SHAPE 4 /* the case the negative controls use */

typedef struct entry {
    char text[192];  /* the spec as written (what FILTER matches) */
    char label[128]; /* "bf16 swiglu renormalize" */
    moejit_spec *spec;
    moejit_kernel *kernel;
    moejit_status status; /* of moejit_kernel_get */
    char error[1024];
    double compile_s;
    int done;
} entry;

/* ---- utilities -------------------------------------------------------------------------------- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

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

/* Unit-variance bell (Irwin-Hall: four uniforms, centred and scaled by sqrt(3)). Box-Muller's
 * log and cos made input generation the slowest part of the suite; test data needs the
 * shape, not exact Gaussian tails (the 6x tokens supply the large values). */
static double normal(uint64_t *s)
{
    uint64_t a = splitmix(s), b = splitmix(s);
    double sum = (double)(a >> 32) + (double)(a & 0xffffffffu) + (double)(b >> 32) +
                 (double)(b & 0xffffffffu);
    return (sum * 0x1p-32 - 2.0) * 1.7320508075688772;
}

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

static int cpu_count(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 64 ? 64 : (int)n;
}

/* ---- concurrent compiles -------------------------------------------------------------------- */

/* Kernels compile on a pool of threads (each compile is its own worker process), while the
 * main thread tests the ones already done, in order. */
typedef struct pool {
    entry *e;
    int n, next;
    moejit_context *ctx;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} pool;

static void *compile_thread(void *arg)
{
    pool *p = arg;
    int cc_major, cc_minor;
    mj_driver_ensure_context(0, &cc_major, &cc_minor); /* a failure shows up in kernel_get */
    for (;;) {
        pthread_mutex_lock(&p->mu);
        int i = p->next++;
        pthread_mutex_unlock(&p->mu);
        if (i >= p->n)
            return NULL;
        entry *e = &p->e[i];
        double t0 = now_s();
        moejit_status st = moejit_kernel_get(p->ctx, e->spec, &e->kernel);
        double dt = now_s() - t0;
        pthread_mutex_lock(&p->mu);
        e->status = st;
        if (st)
            snprintf(e->error, sizeof e->error, "%s", moejit_last_error());
        e->compile_s = dt;
        e->done = 1;
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
}

static void wait_compiled(pool *p, int i)
{
    pthread_mutex_lock(&p->mu);
    while (!p->e[i].done)
        pthread_cond_wait(&p->cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

/* ---- inputs ----------------------------------------------------------------------------------- */

typedef struct case_data {
    shape s;
    int64_t rows, local;
    mj_dtype dtype, logits_dtype;
    float *x, *logits, *w1, *w2, *topk_weights;
    int32_t *topk_ids;
} case_data;

static void case_free(case_data *c)
{
    free(c->x);
    free(c->logits);
    free(c->w1);
    free(c->w2);
    free(c->topk_weights);
    free(c->topk_ids);
    memset(c, 0, sizeof *c);
}

/* Seeded random inputs, every value snapped to the dtype it is uploaded in (so the upload is
 * lossless and the reference sees what the kernel sees). Weights scale as 1/sqrt(fan-in), so
 * fc1 and y are O(1); every fourth token is 6x larger, so the clamps of gpt-oss SwiGLU,
 * SwiGLUStep and SiTU(clamp 5) really trigger. The up and gate halves are independent draws
 * of different scales: swapped halves cannot cancel out. Logits sit on a 1/64 grid: distinct
 * values are far apart for fp32 softmax, and exact ties (to the lower id) occur often; every
 * fifth token also gets a forced tie with its largest logit. */
static int case_make(const entry *e, size_t si, uint64_t base_seed, case_data *c)
{
    memset(c, 0, sizeof *c);
    c->s = k_shapes[si];
    c->dtype = e->spec->dtype;
    c->logits_dtype = e->spec->logits_dtype;
    int gated = moejit_activation_is_gated(moejit_spec_activation(e->spec));
    int64_t T = c->s.T, H = c->s.H, I = c->s.I, E = c->s.E, k = c->s.k;
    c->rows = gated ? 2 * I : I;
    c->local = c->s.local ? c->s.local : E;
    uint64_t seed = base_seed ^ fnv1a(e->text) ^ (0x51ed270b27a1f3c5ull * (si + 1));
    c->x = malloc(sizeof(float) * (size_t)(T * H + 1));
    c->logits = malloc(sizeof(float) * (size_t)(T * E + 1));
    c->topk_ids = malloc(sizeof(int32_t) * (size_t)(T * k + 1));
    c->topk_weights = malloc(sizeof(float) * (size_t)(T * k + 1));
    c->w1 = malloc(sizeof(float) * (size_t)(c->local * c->rows * H));
    c->w2 = malloc(sizeof(float) * (size_t)(c->local * H * I));
    if (!c->x || !c->logits || !c->topk_ids || !c->topk_weights || !c->w1 || !c->w2)
        return -1;
    for (int64_t t = 0; t < T; t++) {
        double scale = t % 4 == 3 ? 6.0 : 1.0;
        for (int64_t h = 0; h < H; h++)
            c->x[t * H + h] = mj_half_snap((float)(scale * normal(&seed)), c->dtype);
    }
    double s1 = 1.0 / sqrt((double)H), s2 = 1.0 / sqrt((double)I);
    for (int64_t le = 0; le < c->local; le++)
        for (int64_t r = 0; r < c->rows; r++) {
            double sc = (gated && r >= I) ? 1.25 * s1 : s1; /* rows [I, 2I) are the gate half */
            for (int64_t h = 0; h < H; h++)
                c->w1[(le * c->rows + r) * H + h] = mj_half_snap((float)(sc * normal(&seed)), c->dtype);
        }
    for (int64_t i = 0; i < c->local * H * I; i++)
        c->w2[i] = mj_half_snap((float)(s2 * normal(&seed)), c->dtype);
    for (int64_t t = 0; t < T; t++) {
        float *lg = c->logits + t * E;
        int64_t top = 0;
        for (int64_t x = 0; x < E; x++) {
            double v = nearbyint(normal(&seed) * 1.5 * 64.0) / 64.0;
            lg[x] = mj_half_snap((float)fmax(-4.0, fmin(4.0, v)), c->logits_dtype);
            if (lg[x] > lg[top])
                top = x;
        }
        if (t % 5 == 4 && E > 1) {
            int64_t other = (int64_t)(splitmix(&seed) % (uint64_t)(E - 1));
            lg[other >= top ? other + 1 : other] = lg[top];
        }
        /* precomputed routing: k distinct random ids (a partial shuffle), random weights */
        int32_t perm[512];
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

static mj_ref_layer case_layer(const case_data *c, const moejit_spec *spec,
                               const moejit_activation *act)
{
    return (mj_ref_layer){
        .num_tokens = c->s.T, .hidden = c->s.H, .inter = c->s.I, .num_experts = c->s.E,
        .topk = c->s.k, .expert_offset = c->s.offset, .num_local_experts = c->s.local,
        .act = act, .routing = spec->routing, .w1_layout = MJ_W1_UP_GATE, .dtype = c->dtype,
        .x = c->x, .router_logits = c->logits, .topk_ids = c->topk_ids,
        .topk_weights = c->topk_weights, .w1 = c->w1, .w2 = c->w2};
}

/* ---- the checker ------------------------------------------------------------------------------ */

/* The contract's measure max|out - ref| / max|ref|, taken per token and maximised over
 * tokens: never looser than the global one, and the large (6x) tokens cannot hide an error
 * on the small ones. A token whose reference is exactly zero (all its experts foreign) must
 * come out exactly zero. Any NaN/inf gives infinity. */
static double max_error(const float *out, const double *ref, int64_t T, int64_t H)
{
    double worst = 0.0;
    for (int64_t t = 0; t < T; t++) {
        double num = 0.0, den = 0.0;
        for (int64_t h = 0; h < H; h++) {
            double o = out[t * H + h], r = ref[t * H + h];
            if (!isfinite(o))
                return INFINITY;
            num = fmax(num, fabs(o - r));
            den = fmax(den, fabs(r));
        }
        double e = den > 0.0 ? num / den : (num > 0.0 ? INFINITY : 0.0);
        worst = fmax(worst, e);
    }
    return worst;
}

static int accepts(const float *out, const double *ref, int64_t T, int64_t H, double tol)
{
    return max_error(out, ref, T, H) <= tol;
}

/* ---- running on the device ------------------------------------------------------------------ */

typedef struct device_case {
    CUdeviceptr x, logits, ids, weights, w1, w2, out, ws;
    size_t out_bytes, ws_bytes;
    moejit_moe_args args;
} device_case;

static void device_free(const mj_gpu *g, device_case *d)
{
    CUdeviceptr *p[] = {&d->x, &d->logits, &d->ids, &d->weights, &d->w1, &d->w2, &d->out, &d->ws};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) {
        mj_gpu_free(g, *p[i]);
        *p[i] = 0;
    }
}

static moejit_status device_upload(const mj_gpu *g, const entry *e, const case_data *c,
                                   device_case *d)
{
    memset(d, 0, sizeof *d);
    int64_t T = c->s.T, H = c->s.H, I = c->s.I, E = c->s.E, k = c->s.k;
    moejit_status st;
    if ((st = mj_gpu_upload_values(g, c->x, (size_t)(T * H), c->dtype, &d->x)) ||
        (st = mj_gpu_upload_values(g, c->w1, (size_t)(c->local * c->rows * H), c->dtype, &d->w1)) ||
        (st = mj_gpu_upload_values(g, c->w2, (size_t)(c->local * H * I), c->dtype, &d->w2)))
        return st;
    int pre = e->spec->routing == MJ_ROUTING_PRECOMPUTED;
    if (pre) {
        if ((st = mj_gpu_upload_values(g, c->topk_weights, (size_t)(T * k), MJ_DTYPE_FP32, &d->weights)) ||
            (st = mj_gpu_alloc(g, sizeof(int32_t) * (size_t)(T * k), &d->ids)) ||
            (st = mj_gpu_upload(g, d->ids, c->topk_ids, sizeof(int32_t) * (size_t)(T * k))))
            return st;
    } else if ((st = mj_gpu_upload_values(g, c->logits, (size_t)(T * E), c->logits_dtype, &d->logits))) {
        return st;
    }
    d->out_bytes = (size_t)(T * H) * mj_half_dtype_size(c->dtype);
    if ((st = mj_gpu_alloc(g, d->out_bytes + GUARD_BYTES, &d->out)))
        return st;
    d->args = (moejit_moe_args){
        .num_tokens = T, .hidden = H, .inter = I, .num_experts = E, .topk = k,
        .expert_offset = c->s.offset, .num_local_experts = c->s.local,
        .x = (const void *)(uintptr_t)d->x,
        .router_logits = pre ? NULL : (const void *)(uintptr_t)d->logits,
        .topk_ids = pre ? (const int32_t *)(uintptr_t)d->ids : NULL,
        .topk_weights = pre ? (const float *)(uintptr_t)d->weights : NULL,
        .w1 = (const void *)(uintptr_t)d->w1, .w2 = (const void *)(uintptr_t)d->w2,
        .out = (void *)(uintptr_t)d->out};
    if ((st = moejit_workspace_size(e->kernel, &d->args, &d->ws_bytes)))
        return mj_fail_prefix(st, "moejit_workspace_size");
    return mj_gpu_alloc(g, d->ws_bytes, &d->ws);
}

/* Poisons out (and its guard) with 0xFF and the workspace with ws_byte, then runs the layer,
 * eagerly or through a captured graph, and downloads out and the guard into host
 * (out_bytes + GUARD_BYTES). */
static moejit_status device_run(const mj_gpu *g, const entry *e, device_case *d, CUstream stream,
                                unsigned char ws_byte, int graph, unsigned char *host)
{
    moejit_status st;
    if ((st = mj_gpu_poison(g, d->out, 0xFF, d->out_bytes + GUARD_BYTES, stream)) ||
        (st = mj_gpu_poison(g, d->ws, ws_byte, d->ws_bytes, stream)))
        return st;
    void *ws = (void *)(uintptr_t)d->ws;
    if (!graph) {
        if ((st = moejit_moe_forward(e->kernel, &d->args, ws, d->ws_bytes, stream)))
            return mj_fail_prefix(st, "moejit_moe_forward");
    } else {
        const mj_driver *D = g->d;
        CUgraph gr = NULL;
        CUgraphExec ex = NULL;
        /* THREAD_LOCAL: the compile threads may load modules meanwhile; only this thread's
         * calls are restricted while capturing. */
        CUresult r = D->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
        if (r != CUDA_SUCCESS)
            return mj_cuda_fail(D, r, "cuStreamBeginCapture");
        st = moejit_moe_forward(e->kernel, &d->args, ws, d->ws_bytes, stream);
        if (st)
            st = mj_fail_prefix(st, "moejit_moe_forward (captured)");
        r = D->cuStreamEndCapture(stream, &gr); /* always: the stream must leave capture */
        if (!st && r != CUDA_SUCCESS)
            st = mj_cuda_fail(D, r, "cuStreamEndCapture");
        if (!st && (r = D->cuGraphInstantiate(&ex, gr, 0)) != CUDA_SUCCESS)
            st = mj_cuda_fail(D, r, "cuGraphInstantiate");
        if (!st && (r = D->cuGraphLaunch(ex, stream)) != CUDA_SUCCESS)
            st = mj_cuda_fail(D, r, "cuGraphLaunch");
        if (!st)
            st = mj_gpu_sync(g, stream);
        if (ex)
            D->cuGraphExecDestroy(ex);
        if (gr)
            D->cuGraphDestroy(gr);
        if (st)
            return st;
    }
    if ((st = mj_gpu_sync(g, stream)))
        return mj_fail_prefix(st, "after the forward");
    return mj_gpu_download(g, host, d->out, d->out_bytes + GUARD_BYTES);
}

static int guard_intact(const unsigned char *host, size_t out_bytes)
{
    for (size_t i = 0; i < GUARD_BYTES; i++)
        if (host[out_bytes + i] != 0xFF)
            return 0;
    return 1;
}

/* ---- one spec --------------------------------------------------------------------------------- */

typedef struct result {
    double err, err_replay;
    char why[1536]; /* empty when passed */
} result;

static void describe(char *buf, size_t cap, const shape *s)
{
    if (s->local)
        snprintf(buf, cap, "T=%lld H=%lld I=%lld E=%lld k=%lld ep=[%lld,%lld)", (long long)s->T,
                 (long long)s->H, (long long)s->I, (long long)s->E, (long long)s->k,
                 (long long)s->offset, (long long)(s->offset + s->local));
    else
        snprintf(buf, cap, "T=%lld H=%lld I=%lld E=%lld k=%lld", (long long)s->T, (long long)s->H,
                 (long long)s->I, (long long)s->E, (long long)s->k);
}

/* Runs shape si of entry e: fills *r (worst errors so far) and returns 0, or fills r->why.
 * When out_keep is given, the first run's output (floats) and the case are handed back. */
static int run_case(const mj_gpu *g, const entry *e, size_t si, uint64_t seed, CUstream stream,
                    int threads, result *r, float **out_keep, case_data *case_keep)
{
    case_data c;
    device_case d;
    memset(&d, 0, sizeof d);
    char where[96];
    describe(where, sizeof where, &k_shapes[si]);
    int ok = 0;
    unsigned char *h1 = NULL, *h2 = NULL;
    float *out = NULL;
    double *ideal = NULL, *replay = NULL;
    if (case_make(e, si, seed, &c)) {
        snprintf(r->why, sizeof r->why, "%s: out of host memory", where);
        goto done;
    }
    int64_t T = c.s.T, H = c.s.H;
    size_t n = (size_t)(T * H);
    ideal = malloc(sizeof(double) * (n + 1));
    replay = malloc(sizeof(double) * (n + 1));
    out = malloc(sizeof(float) * (n + 1));
    moejit_status st = device_upload(g, e, &c, &d);
    /* NOTE: a pageable cuMemcpyHtoD may return before its DMA lands, and it runs on the
     * legacy stream, which a non-blocking stream does not wait for: wait here. */
    if (!st)
        st = mj_gpu_sync(g, NULL);
    h1 = malloc(d.out_bytes + GUARD_BYTES);
    h2 = malloc(d.out_bytes + GUARD_BYTES);
    if (!ideal || !replay || !out || !h1 || !h2) {
        snprintf(r->why, sizeof r->why, "%s: out of host memory", where);
        goto done;
    }
    if (st) {
        snprintf(r->why, sizeof r->why, "%s: %s", where, moejit_last_error());
        goto done;
    }
    const moejit_activation *act = moejit_spec_activation(e->spec);
    mj_ref_layer L = case_layer(&c, e->spec, act);
    if ((st = mj_ref_forward(&L, threads, ideal, replay, MJ_REF_REPLAY_SIMT))) {
        snprintf(r->why, sizeof r->why, "%s: reference: %s", where, moejit_last_error());
        goto done;
    }
    if ((st = device_run(g, e, &d, stream, 0xFF, 0, h1))) {
        snprintf(r->why, sizeof r->why, "%s: %s", where, moejit_last_error());
        goto done;
    }
    if (!guard_intact(h1, d.out_bytes)) {
        snprintf(r->why, sizeof r->why, "%s: wrote past the end of out (guard bytes changed)", where);
        goto done;
    }
    mj_half_unpack(h1, n, c.dtype, out);
    for (size_t i = 0; i < n; i++)
        if (!isfinite(out[i])) {
            snprintf(r->why, sizeof r->why, "%s: out[%zu] (token %zu) is %g: not written or overflowed",
                     where, i, i / (size_t)H, (double)out[i]);
            goto done;
        }
    double tol_r = c.dtype == MJ_DTYPE_FP16 ? TOL_REPLAY_FP16 : TOL_REPLAY_BF16;
    double ei = max_error(out, ideal, T, H), er = max_error(out, replay, T, H);
    r->err = fmax(r->err, ei);
    r->err_replay = fmax(r->err_replay, er);
    if (ei > TOL_IDEAL || er > tol_r) {
        snprintf(r->why, sizeof r->why, "%s: error %.3e (bar %.2g), replay error %.3e (bar %.2g)",
                 where, ei, TOL_IDEAL, er, tol_r);
        goto done;
    }
    /* a different workspace poison: a kernel that reads workspace it did not write differs */
    if ((st = device_run(g, e, &d, stream, 0x5A, 0, h2))) {
        snprintf(r->why, sizeof r->why, "%s: second run: %s", where, moejit_last_error());
        goto done;
    }
    if (memcmp(h1, h2, d.out_bytes + GUARD_BYTES)) {
        snprintf(r->why, sizeof r->why, "%s: two runs differ (not bit-identical)", where);
        goto done;
    }
    if (si == GRAPH_SHAPE) {
        if ((st = device_run(g, e, &d, stream, 0xA5, 1, h2))) {
            snprintf(r->why, sizeof r->why, "%s: graph: %s", where, moejit_last_error());
            goto done;
        }
        if (memcmp(h1, h2, d.out_bytes + GUARD_BYTES)) {
            snprintf(r->why, sizeof r->why, "%s: CUDA-graph replay differs from the eager run", where);
            goto done;
        }
    }
    ok = 1;
    if (out_keep) {
        *out_keep = out;
        out = NULL;
        *case_keep = c;
        memset(&c, 0, sizeof c);
    }
done:
    device_free(g, &d);
    case_free(&c);
    free(h1);
    free(h2);
    free(out);
    free(ideal);
    free(replay);
    return ok ? 0 : -1;
}

/* ---- negative controls ------------------------------------------------------------------------ */

typedef struct tally {
    int passed, failed, skipped;
} tally;

static int find(entry *es, int n, const char *quant, const char *act, const char *routing)
{
    char text[192];
    snprintf(text, sizeof text, "backend=simt,quant=%s,act=%s,arch=native,routing=%s", quant, act, routing);
    for (int i = 0; i < n; i++)
        if (!strcmp(es[i].text, text))
            return i;
    return -1;
}

static void report(tally *t, int ok, const char *what, const char *detail)
{
    printf("%s  control: %s%s%s\n", ok ? "PASS" : "FAIL", what, *detail ? ": " : "", detail);
    if (ok)
        t->passed++;
    else
        t->failed++;
}

/* Runs e's kernel on the control case (where it must pass every check against its own
 * reference), then asserts that the checker REJECTS that output against a wrong reference
 * (`wrong_act`, `wrong_layout`), or rejects an all-zero output (`zero_out`). A checker that
 * accepted any of these could not tell the bugs they stand for. */
static void control(const mj_gpu *g, entry *e, uint64_t seed, CUstream stream, int threads,
                    const moejit_activation *wrong_act, mj_w1_layout wrong_layout, int zero_out,
                    const char *what, tally *t)
{
    char detail[1600] = "";
    float *out = NULL;
    case_data c;
    memset(&c, 0, sizeof c);
    result r = {0};
    if (!e || !e->kernel) {
        printf("SKIP  control: %s (its spec was not run)\n", what);
        t->skipped++;
        return;
    }
    if (run_case(g, e, CONTROL_SHAPE, seed, stream, threads, &r, &out, &c)) {
        snprintf(detail, sizeof detail, "the kernel fails its own check (%s)", r.why);
        report(t, 0, what, detail);
        return;
    }
    size_t n = (size_t)(c.s.T * c.s.H);
    double *ref = malloc(sizeof(double) * (n + 1));
    if (!ref) {
        report(t, 0, what, "out of host memory");
        goto done;
    }
    mj_ref_layer L = case_layer(&c, e->spec, wrong_act ? wrong_act : moejit_spec_activation(e->spec));
    L.w1_layout = wrong_layout;
    if (mj_ref_forward(&L, threads, ref, NULL, 0)) {
        snprintf(detail, sizeof detail, "reference: %s", moejit_last_error());
        report(t, 0, what, detail);
        goto done;
    }
    if (zero_out)
        memset(out, 0, sizeof(float) * n);
    double err = max_error(out, ref, c.s.T, c.s.H);
    snprintf(detail, sizeof detail, "error %.3g > %.2g, rejected", err, TOL_IDEAL);
    if (accepts(out, ref, c.s.T, c.s.H, TOL_IDEAL))
        snprintf(detail, sizeof detail, "the checker ACCEPTED it (error %.3g <= %.2g)", err, TOL_IDEAL);
    report(t, !accepts(out, ref, c.s.T, c.s.H, TOL_IDEAL), what, detail);
done:
    free(ref);
    free(out);
    case_free(&c);
}

static void controls(const mj_gpu *g, entry *es, int n, uint64_t seed, CUstream stream,
                     int threads, tally *t)
{
    moejit_activation *relu2 = NULL, *unclamped = NULL;
    if (moejit_activation_create(MOEJIT_ACT_RELU2, &relu2) ||
        moejit_activation_swiglu(1.702f, 1.0f, FLT_MAX, &unclamped)) {
        report(t, 0, "setup", moejit_last_error());
        return;
    }
    int i;
    i = find(es, n, "bf16", "relu", "softmax_topk");
    control(g, i < 0 ? NULL : &es[i], seed, stream, threads, relu2, MJ_W1_UP_GATE, 0,
            "relu kernel vs relu2 reference", t);
    control(g, i < 0 ? NULL : &es[i], seed, stream, threads, NULL, MJ_W1_UP_GATE, 1,
            "all-zero output", t);
    i = find(es, n, "bf16", "swiglu", "softmax_topk");
    control(g, i < 0 ? NULL : &es[i], seed, stream, threads, NULL, MJ_W1_GATE_UP, 0,
            "swiglu kernel vs reference with swapped u/g halves", t);
    i = find(es, n, "bf16", "swiglu(alpha=1.702,beta=1,limit=7)", "renormalize");
    control(g, i < 0 ? NULL : &es[i], seed, stream, threads, unclamped, MJ_W1_UP_GATE, 0,
            "gpt-oss swiglu kernel vs unclamped reference (the clamp is exercised)", t);
    /* the checker itself: a never-written (poisoned, NaN) output is rejected */
    float nan_out[4] = {NAN, NAN, NAN, NAN};
    double ref[4] = {1, 2, 3, 4};
    report(t, !accepts(nan_out, ref, 1, 4, TOL_IDEAL), "poisoned (NaN) output", "");
    moejit_activation_destroy(relu2);
    moejit_activation_destroy(unclamped);
}

/* ---- main -------------------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    const char *filter = argc > 1 ? argv[1] : "";
    setvbuf(stdout, NULL, _IOLBF, 0);
    mj_gpu g;
    moejit_status gst = mj_gpu_open(0, &g);
    if (gst == MOEJIT_ERR_NO_DRIVER || gst == MOEJIT_ERR_NO_DEVICE) {
        printf("no CUDA device: %s; skipping GPU suite\n", moejit_last_error());
        return 0;
    }
    if (gst) { /* a device is there but unusable: that is a failure, not a skip */
        printf("FAIL  device 0: %s\n0 passed, 1 failed\n", moejit_last_error());
        return 1;
    }
    const char *env = getenv("MOEJIT_GPU_SEED");
    uint64_t seed = env && *env ? strtoull(env, NULL, 0)
                                : ((uint64_t)time(NULL) * 1000003u) ^ (uint64_t)getpid();
    int threads = cpu_count();

    static entry es[MAX_SPECS];
    int n = 0;
    tally t = {0};
    for (size_t q = 0; q < 2; q++)
        for (size_t a = 0; a < sizeof k_acts / sizeof k_acts[0]; a++)
            for (size_t r = 0; r < 3; r++) {
                entry *e = &es[n];
                snprintf(e->text, sizeof e->text, "backend=simt,quant=%s,act=%s,arch=native,routing=%s",
                         k_quants[q], k_acts[a], k_routings[r]);
                if (!strstr(e->text, filter))
                    continue;
                snprintf(e->label, sizeof e->label, "%s %s %s", k_quants[q], k_acts[a], k_routings[r]);
                if (moejit_spec_parse(e->text, &e->spec)) {
                    printf("FAIL  %s: spec: %s\n", e->label, moejit_last_error());
                    t.failed++;
                    continue;
                }
                n++;
            }
    printf("gpu suite: %s (sm_%d%d), %d specs, seed %llu (MOEJIT_GPU_SEED=%llu repeats it)\n",
           g.name, g.cc_major, g.cc_minor, n, (unsigned long long)seed, (unsigned long long)seed);

    moejit_context *ctx = NULL;
    if (moejit_context_create(NULL, &ctx)) {
        printf("FAIL  moejit_context_create: %s\n", moejit_last_error());
        printf("0 passed, %d failed\n", t.failed + 1);
        return 1;
    }
    CUstream stream = NULL;
    CUresult cr = g.d->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING);
    if (cr != CUDA_SUCCESS) {
        mj_cuda_fail(g.d, cr, "cuStreamCreate");
        printf("FAIL  %s\n", moejit_last_error());
        printf("0 passed, %d failed\n", t.failed + 1);
        return 1;
    }

    pool p = {.e = es, .n = n, .ctx = ctx};
    pthread_mutex_init(&p.mu, NULL);
    pthread_cond_init(&p.cv, NULL);
    int nthreads = threads < n ? threads : n;
    pthread_t tid[64];
    int started = 0;
    for (int i = 0; i < nthreads; i++)
        if (pthread_create(&tid[i], NULL, compile_thread, &p) == 0)
            started++;
    if (!started && n) /* compile here, one by one */
        compile_thread(&p);

    double t0 = now_s();
    for (int i = 0; i < n; i++) {
        entry *e = &es[i];
        wait_compiled(&p, i);
        if (e->status) {
            printf("FAIL  %s: compile: %s\n", e->label, e->error);
            e->kernel = NULL;
            t.failed++;
            continue;
        }
        if (!moejit_kernel_is_loaded(e->kernel)) {
            printf("FAIL  %s: compiled but not loaded on the device\n", e->label);
            e->kernel = NULL;
            t.failed++;
            continue;
        }
        result r = {0};
        int ok = 1;
        for (size_t si = 0; si < N_SHAPES && ok; si++)
            ok = run_case(&g, e, si, seed, stream, threads, &r, NULL, NULL) == 0;
        if (ok) {
            printf("PASS  %-70s err %.2e  replay %.2e  (compile %.1f s)\n", e->label, r.err,
                   r.err_replay, e->compile_s);
            t.passed++;
        } else {
            printf("FAIL  %-70s %s\n", e->label, r.why);
            t.failed++;
        }
    }
    for (int i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    controls(&g, es, n, seed, stream, threads, &t);

    if (t.failed)
        printf("rerun the same inputs: MOEJIT_GPU_SEED=%llu %s '%s'\n", (unsigned long long)seed,
               argv[0], filter);
    printf("time: %.1f s\n", now_s() - t0);
    g.d->cuStreamDestroy(stream);
    moejit_context_destroy(ctx);
    for (int i = 0; i < n; i++)
        moejit_spec_destroy(es[i].spec);
    if (t.skipped)
        printf("%d passed, %d failed, %d skipped\n", t.passed, t.failed, t.skipped);
    else
        printf("%d passed, %d failed\n", t.passed, t.failed);
    return t.failed ? 1 : 0;
}
