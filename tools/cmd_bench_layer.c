/*
 * This file contains `moejit bench layer` (bench_layer.h): for each model shape of
 * docs/PERFORMANCE.md and each batch, the whole layer (route -> finalize) timed by CUDA-graph
 * replay over rotating input sets, reported as median µs, effective TB/s on the weight bytes
 * the batch touches, TFLOP/s, and the fraction of the roofline floor; --check first compares
 * each timed backend with simt on the same inputs (and with the float64 CPU reference on
 * small shapes, every activation, both GEMM paths).
 *
 * Floor (docs/PERFORMANCE.md, bench_floor.h): W = E_read·(rows1 + I)·H·2 bytes (fp8: 1 byte per
 * weight plus its fp32 scales), where E_read is the number of experts the timed input sets route to (averaged over the sets; E_act = E·(1 −
 * (1 − k/E)^B) under uniform routing is reported beside it), F = 2·B·k·(rows1 + I)·H,
 * floor = max(W / bw, F / peak) with the ceilings measured on the lent H200 (4.48 TB/s read
 * stream, 790 TFLOP/s bf16).
 * Routing: renormalize on fp32 logits drawn uniform in [-2, 2) from a seeded hash (seeded
 * uniform routing), also for DeepSeek-V3 (whose own deepseek_v3 routing mma does not take);
 * each rotated input set has its own seed, so a (shape, B) row's inputs do not depend on the
 * other batches of the command.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tools/bench_floor.h"
#include "tools/bench_layer.h"
#include "tools/bench_layer_run.h"
#include "tools/bench_layer_w4.h"
#include "tools/cli.h"
#include "core/halfconv.h"
#include "codegen/emit.h"
#include "codegen/layer_modules.h"
#include "runtime/context.h"
#include "runtime/gemm_plan.h"
#include "runtime/launch_backends.h"
#include "templates/common/mma_params.h"
#include "reference/reference.h"
#include "core/spec.h"
#include "tools/bench_quant.h"

typedef bench_model_shape model_shape;

static const model_shape shapes[] = {
    {"mixtral-8x7b", 4096, 14336, 8, 2, "swiglu"},
    {"qwen3-30b-a3b", 2048, 768, 128, 8, "swiglu"},
    {"qwen3-235b-a22b", 4096, 1536, 128, 8, "swiglu"},
    {"deepseek-v3", 7168, 2048, 256, 8, "swiglu"},
    {"nemotron", 2688, 1856, 128, 6, "relu2"},
    {"gpt-oss-bf16", 2880, 2880, 128, 4, "swiglu(alpha=1.702,beta=1,limit=7)"},
    {"kimi-k2", 7168, 2048, 384, 8, "swiglu"},
    /* 4-bit weights (bench_layer_w4.c); gpt-oss-120b's layer as it ships: interleaved W1, b1 and b2 */
    {"gpt-oss-120b-mxfp4", 2880, 2880, 128, 4, "swiglu(alpha=1.702,beta=1,limit=7)", "mxfp4",
     ",w1_layout=interleaved,bias=both"},
    {"qwen3-30b-a3b-w4a16", 2048, 768, 128, 8, "swiglu", "w4a16,group=128"},
};
#define N_SHAPES ((int)(sizeof shapes / sizeof shapes[0]))
#define N_BF16_SHAPES 6 /* the 4-bit shapes follow (`moejit tune` takes the bf16 ones) */
#define W4_SHAPES "gpt-oss-120b-mxfp4, qwen3-30b-a3b-w4a16"
#define DEFAULT_SHAPES "mixtral-8x7b,qwen3-30b-a3b,qwen3-235b-a22b,deepseek-v3,nemotron"

const bench_model_shape *bench_layer_shape(int i) { return i >= 0 && i < N_BF16_SHAPES ? &shapes[i] : NULL; }

static const char usage[] =
    "usage: moejit bench layer [--shapes LIST] [--batches LIST] [--backend LIST] [--tile LIST] [--quant LIST]\n"
    "                          [--check [--no-reference] [--extras] [--routing LIST]] [--no-time] [--json FILE]\n"
    "                          [--append FILE]\n"
    "                          [--layer-routing METHOD]\n"
    "                          [--list-specs]\n"
    "                          [--commit SHA]\n"
    "                          [--cubin-dir DIR] [--rotate N] [--reps N] [--bw TBPS] [--peak TFLOPS]\n"
    "\n"
    "Times the whole MoE layer (routing -> finalize) of each model shape and batch on the GPU by\n"
    "CUDA-graph replay over rotating input sets (so L2 holds no inputs), and prints the median\n"
    "time, effective TB/s on the weight bytes the batch touches, TFLOP/s and the fraction of the\n"
    "roofline floor max(W / bw, F / peak).\n"
    "\n"
    "  --shapes LIST    " DEFAULT_SHAPES " (default), gpt-oss-bf16, kimi-k2, " W4_SHAPES "\n"
    "                   (each in its own 4-bit format), or all\n"
    "  --batches LIST   tokens per forward (default 1,8,64,512,4096)\n"
    "  --backend LIST   simt, mma, wgmma (default mma)\n"
    "  --tile LIST      mma/wgmma tile field: auto (default: the launch-time heuristic), large, small,\n"
    "                   tall, pair (wgmma only; skipped for mma)\n"
    "  --quant LIST     weight formats: bf16 (default), fp8_tensor, fp8_token, fp8_static (fp8_tensor\n"
    "                   with fp8_act=tensor, token, static), fp8_block, w4a16, mxfp4, or all; each\n"
    "                   shape runs in each (fp8: e4m3 weights with fp32 scales, skipped for mma; a\n"
    "                   shape the format cannot hold, such as Nemotron's I = 1856 in w4a16's\n"
    "                   128-k groups, is skipped with the rule named); with --check, the float64\n"
    "                   cases of each format (fp8: on wgmma, gated and ungated, every GEMM path, x on\n"
    "                   the e4m3 grid, bars 0.15 of max |ref| against the ideal layer and 0.04\n"
    "                   against the replay of its rounding and quantization; 4-bit: every group\n"
    "                   with and without zero points, mxfp4, bf16 and fp16, on mma and wgmma) and\n"
    "                   the shapes against simt in the same format\n"
    "  --check          first compare each backend with simt on the same inputs (poisoned\n"
    "                   output, bit-identical rerun), and with the float64 CPU reference on\n"
    "                   small shapes for every activation and both mma GEMM paths\n"
    "  --routing LIST   with --check: the float64 cases' routing methods: renormalize (default: every\n"
    "                   activation), softmax_topk, sigmoid_topk, sigmoid_renorm, deepseek_v3 (with a\n"
    "                   selection bias), llama4 (k = 1), or all; each but renormalize on two layers,\n"
    "                   fp32 and bf16 logits, every decode path\n"
    "  --extras         with --check: instead of those, the float64 cases of the W1 layouts\n"
    "                   (gate_up, interleaved), biases (b1, b2, both) and per-expert activation\n"
    "                   overrides on every decode and prefill path, and a negative control per\n"
    "                   family\n"
    "  --layer-routing METHOD  the timed layers' routing method (default renormalize; deepseek_v3\n"
    "                   with DeepSeek-V3's grouping: 8 groups, 4 kept, routed_scaling 2.5)\n"
    "  --no-reference   with --check: the model-shape comparisons only (no float64 cases, whose\n"
    "                   ~50 small layers per backend take minutes to compile)\n"
    "  --no-time        checks only\n"
    "  --list-specs     print the spec of every layer these options would compile (the float64\n"
    "                   cases' with --check, then each shape's), one per line, and exit (no\n"
    "                   GPU): `moejit warm -j N $(moejit bench layer --check --backend wgmma\n"
    "                   --list-specs)` compiles them in parallel first\n"
    "  --json FILE      also write every row as JSON (one object per line)\n"
    "  --append FILE    append the table in Markdown with date, commit, device and method\n"
    "  --cubin-dir DIR  write each layer's cubin there (for cuobjdump --dump-sass)\n"
    "  --bw, --peak     ceilings of the floor (default 4.48 TB/s, 790 TFLOP/s: the H200's measured)\n"
    "\n"
    "Examples:\n"
    "  moejit bench layer --check\n"
    "  moejit bench layer --backend wgmma --quant fp8_block --shapes deepseek-v3,kimi-k2,qwen3-235b-a22b\n"
    "  moejit bench layer --shapes qwen3-30b-a3b --batches 1,64 --tile small,large --backend mma,simt\n"
    "  moejit bench layer --check --quant w4a16,mxfp4 --no-time --shapes gpt-oss-120b-mxfp4 \\\n"
    "      --backend mma,wgmma\n";

typedef struct options {
    int shape[N_SHAPES], n_shapes;
    long long batch[32];
    int n_batches;
    const char *backend[8];
    int n_backends;
    const char *tile[5];
    int n_tiles;
    const bench_quant *quant[8]; /* --quant */
    int n_quants;
    int check, reference, time, list_specs, extras;
    const char *layer_routing; /* --layer-routing: the timed layers' routing method */
    const char *routing[8]; /* --routing: the float64 cases' routing methods */
    int n_routings;
    const char *json, *append, *commit, *cubin_dir;
    int rotate, reps;
    double bw, peak;
} options;

/* ---- option lists ------------------------------------------------------------------------------ */

static int split(const char *value, char out[][32], int max)
{
    int n = 0;
    const char *p = value;
    while (*p && n < max) {
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= 32) return -1;
        memcpy(out[n], p, len);
        out[n][len] = '\0';
        n++;
        p += len;
        if (*p == ',') p++;
    }
    return *p ? -1 : n;
}

static int parse_shapes(const char *value, options *o)
{
    char items[N_SHAPES + 1][32];
    int n = split(value, items, N_SHAPES + 1);
    o->n_shapes = 0;
    for (int i = 0; i < n; i++) {
        if (!strcmp(items[i], "all")) {
            for (int s = 0; s < N_SHAPES; s++) o->shape[o->n_shapes++] = s;
            return 0;
        }
        int found = -1;
        for (int s = 0; s < N_SHAPES; s++)
            if (!strcmp(items[i], shapes[s].name)) found = s;
        if (found < 0 || o->n_shapes >= N_SHAPES) n = -1;
        else o->shape[o->n_shapes++] = found;
    }
    if (n <= 0) {
        cli_error("bench layer: --shapes: unknown or empty list '%s'; allowed: " DEFAULT_SHAPES
                  ", gpt-oss-bf16, " W4_SHAPES ", all",
                  value);
        return -1;
    }
    return 0;
}

static int parse_word_list(const char *opt, const char *value, const char **out, int max, int *n,
                           const char *const *allowed, int n_allowed, const char *allowed_text)
{
    char items[8][32];
    int c = split(value, items, max < 8 ? max : 8);
    *n = 0;
    for (int i = 0; i < c; i++) {
        int found = -1;
        for (int a = 0; a < n_allowed; a++)
            if (!strcmp(items[i], allowed[a])) found = a;
        if (found < 0) c = -1;
        else out[(*n)++] = allowed[found];
    }
    if (c <= 0) {
        cli_error("bench layer: %s: bad list '%s'; allowed: %s", opt, value, allowed_text);
        return -1;
    }
    return 0;
}

static int parse_quants(const char *value, options *o)
{
    char items[9][32];
    int n = split(value, items, 9);
    o->n_quants = 0;
    if (n == 1 && !strcmp(items[0], "all")) { /* every format once */
        static const char *const all[] = {"bf16", "fp8_tensor", "fp8_token", "fp8_static", "fp8_block", "w4a16", "mxfp4"};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) o->quant[o->n_quants++] = bench_quant_find(all[i]);
        return 0;
    }
    for (int i = 0; i < n && n <= 8; i++) {
        const bench_quant *q = bench_quant_find(items[i]);
        if (!q) n = -1;
        else o->quant[o->n_quants++] = q;
    }
    if (n <= 0 || n > 8) {
        cli_error("bench layer: --quant: bad list '%s'; allowed: " BENCH_QUANT_NAMES ", all", value);
        return -1;
    }
    return 0;
}

/* ---- the floor ------------------------------------------------------------------------------- */

/* W on the format's own bytes: 2 per bf16 weight; 1 per e4m3 weight with its fp32 scales */
static bench_floor floor_of(const model_shape *s, const bench_quant *q, int gated, long long B, double e_read,
                            const options *o)
{
    const double expert_bytes = bench_expert_weight_bytes(s->hidden, s->inter, gated, q->fp8 ? 1.0 : 2.0,
                                                          !q->fp8 ? -1 : q->block ? 128 : 0);
    return bench_floor_of(s->hidden, s->inter, s->experts, s->topk, gated, B, e_read, expert_bytes, o->bw, o->peak);
}

/* ---- device buffers of one shape ----------------------------------------------------------- */

typedef struct shape_bufs {
    CUdeviceptr w1, w2, x, logits, out, out2, ws;
    CUdeviceptr b1, b2; /* the shape's biases (layer fields with bias=both), else 0 */
    bench_w4_weights w4; /* a 4-bit shape's weights (w1 and w2 unused) */
    size_t ws_bytes, x_set, logits_set; /* elements per input set (at the largest batch) */
    size_t x_elem;                      /* bytes per x element: 2, or 1 (static fp8 x) */
    int sets;
    const bench_quant *quant;
    bench_quant_bufs scales; /* fp8: the weight scales and the static x scale */
} shape_bufs;

typedef struct enqueue_ctx {
    const mj_gpu *g;
    const bench_layer *layer;
    moejit_moe_args args;
    const shape_bufs *b;
    long long B;
    int H, E;
} enqueue_ctx;

static moejit_status enqueue_forward(void *vctx, int i, CUstream stream)
{
    enqueue_ctx *c = vctx;
    moejit_moe_args a = c->args;
    int set = i % c->b->sets;
    a.x = (void *)(c->b->x + (size_t)set * c->b->x_set * c->b->x_elem);
    a.router_logits = (void *)(c->b->logits + (size_t)set * c->b->logits_set * 4);
    return bench_layer_forward(c->g, c->layer, &a, c->b->ws, c->b->ws_bytes, stream);
}

/* The 4-bit format fields of shape s's weights in a run of q ("mxfp4", "w4a16,group=128"), or
 * NULL for 16-bit and fp8 weights: a 4-bit shape's own, else q's. */
static const char *shape_w4_quant(const model_shape *s, const bench_quant *q)
{
    if (bench_w4_is_4bit(s->quant)) return s->quant;
    return q && q->w4 ? q->spec + strlen("quant=") : NULL;
}

static void args_of(const model_shape *s, long long B, const shape_bufs *b, CUdeviceptr out,
                    moejit_moe_args *a)
{
    moejit_moe_args_init(a);
    a->num_tokens = B, a->hidden = s->hidden, a->inter = s->inter;
    a->num_experts = s->experts, a->topk = s->topk;
    a->x = (void *)b->x, a->router_logits = (void *)b->logits;
    a->w1 = (void *)b->w1, a->w2 = (void *)b->w2, a->out = (void *)out;
    if (b->quant) bench_quant_args(b->quant, &b->scales, a);
    if (shape_w4_quant(s, b->quant)) bench_w4_args(&b->w4, a);
    a->b1 = (const void *)b->b1, a->b2 = (const void *)b->b2;
}

/* Runs one forward of set 0 into out (poisoned first) and downloads it as floats. */
static moejit_status run_once(const mj_gpu *g, const bench_layer *L, const model_shape *s, long long B,
                              const shape_bufs *b, CUdeviceptr out, float *host, CUstream stream)
{
    moejit_moe_args a;
    args_of(s, B, b, out, &a);
    size_t n = (size_t)B * (size_t)s->hidden;
    moejit_status st = mj_gpu_poison(g, out, 0xff, n * 2, stream);
    if (st == MOEJIT_OK) st = bench_layer_forward(g, L, &a, b->ws, b->ws_bytes, stream);
    if (st == MOEJIT_OK) st = mj_gpu_sync(g, stream);
    if (st == MOEJIT_OK) st = mj_gpu_download_values(g, out, n, MJ_DTYPE_BF16, host);
    return st;
}

/* The experts the timed forwards of B tokens read: each rotated set's distinct experts
 * (bench_floor.h), averaged over the sets, from the logits downloaded as the layer sees them. */
static moejit_status experts_read(const mj_gpu *g, const model_shape *s, long long B, const shape_bufs *b,
                                  double *mean)
{
    const size_t n = (size_t)B * (size_t)s->experts;
    float *lg = malloc((n ? n : 1) * sizeof *lg);
    if (!lg) return MOEJIT_ERR_OUT_OF_MEMORY;
    moejit_status st = MOEJIT_OK;
    long long total = 0;
    for (int set = 0; set < b->sets && st == MOEJIT_OK; set++) {
        int e = 0;
        st = mj_gpu_download_values(g, b->logits + (size_t)set * b->logits_set * 4, n, MJ_DTYPE_FP32, lg);
        if (st == MOEJIT_OK) st = bench_routed_experts(lg, B, s->experts, s->topk, &e);
        total += e;
    }
    free(lg);
    *mean = (double)total / b->sets;
    if (st != MOEJIT_OK) cli_error("bench layer: %s B=%lld: counting the routed experts: %s", s->name, B,
                                   moejit_last_error());
    return st;
}

typedef struct cmp_result {
    double max_err, max_ref, rel_l2;
    long long nonfinite;
} cmp_result;

static cmp_result compare(const float *got, const float *ref, size_t n)
{
    cmp_result c = {0, 0, 0, 0};
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i])) {
            c.nonfinite++;
            continue;
        }
        double d = (double)got[i] - (double)ref[i];
        c.max_err = fmax(c.max_err, fabs(d));
        c.max_ref = fmax(c.max_ref, fabs((double)ref[i]));
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    c.rel_l2 = den > 0 ? sqrt(num / den) : sqrt(num);
    return c;
}

/* ---- CPU-reference checks on small shapes ------------------------------------------------- */

static uint64_t rng = 0x243f6a8885a308d3ull;
static float uniform(void)
{
    rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
    return (float)((rng * 0x2545f4914f6cdd1dull) >> 40) / (float)(1 << 24) * 2.0f - 1.0f;
}

static float *host_random(size_t n, float scale, mj_dtype dt)
{
    float *v = malloc((n ? n : 1) * sizeof *v);
    if (v)
        for (size_t i = 0; i < n; i++) v[i] = mj_half_snap(uniform() * scale, dt);
    return v;
}

/* "small", "large", "tall", "pair" for mma and wgmma, "small/2" for a decode GEMM2 split in two along
 * K, "small/t1" for batch 1's one-kernel GEMM2 + finalize, "small/p" or "small/p8" for the
 * persistent decode layer (its GEMM2 split in 8) on a device of sms SMs, "small/ps" or
 * "small/p8s" in its shallow blocks, "large/64" for wgmma's short (64-row) tiles; "-" for simt. */
static void path_label(const moejit_spec *spec, const moejit_moe_args *a, int sms, int decode, char *buf, size_t n)
{
    snprintf(buf, n, "-");
    if (spec->backend != MJ_BACKEND_MMA && spec->backend != MJ_BACKEND_WGMMA) return;
    mj_gemm_plan plan;
    mj_gemm_plan_make(spec, a, sms, decode, &plan);
    const char *name = mj_mma_path_name(plan.path);
    const int splits = plan.chain_splits, persistent = plan.persistent_splits;
    const char *shallow = plan.persistent_shallow ? "s" : "";
    if (persistent > 1) snprintf(buf, n, "%s/p%d%s", name, persistent, shallow);
    else if (persistent) snprintf(buf, n, "%s/p%s", name, shallow);
    else if (splits > 1) snprintf(buf, n, "%s/%d", name, splits);
    else if (plan.t1_fused) snprintf(buf, n, "%s/t1", name); /* GEMM2 finalizes */
    else if (plan.short_tiles) snprintf(buf, n, "%s/64", name); /* 64-row tiles */
    else snprintf(buf, n, "%s", name);
}

/* One small layer (H x I) against the float64 reference (replay of the intermediate's
 * rounding) at T tokens; returns 1 when it passes. H and I are not multiples of 64 (K and N
 * tails). want_splits > 0: the forward's GEMM2 must also have that many K splits; -1: its
 * GEMM2 and finalize must be one kernel (batch 1, launch_mma.c); -2: it must be the
 * persistent decode layer. */
static const int ref_H = 264, ref_I = 200, ref_E = 8, ref_K = 2;
/* The split-GEMM2 case: I long enough (and the grid small enough) for 2 K splits, the second
 * ending in a partial k tile (4104 = 64 x 64 + 8). */
static const int ref_split_I = 4104;
/* The batch-1 cases whose GEMM2 and finalize are one kernel: every expert a slot (8 of 8),
 * and 6 of the 8 (the shallow kernel, launch_mma.c: t1_kernel). */
static const int ref_t1_K = 8, ref_t1_shallow_K = 6;

/* ep_local > 0: an expert-parallel rank owning experts [ref_ep_offset, + ep_local) of the E. */
static const int ref_ep_offset = 2;

/* The routing fields of the reference layers' specs (--routing), and the runs done so far. */
static char ref_routing[160] = "renormalize";
static int ref_runs_done;

/* --extras: whether the next runs give per-expert activation overrides (ref_override_values),
 * and a negative control: the W1 layout the reference is told instead of the kernel's (-1:
 * the kernel's), which must then fail. */
static int ref_overrides;
static int ref_wrong_layout = -1;
/* --extras: fields appended to every reference layer's spec (",w1_layout=...,bias=..."), and
 * a negative control: b2 or the overrides left out of the reference (which must then fail) */
static char ref_fields[128];
static int ref_drop_b2, ref_drop_overrides;

/* Expert e's override of parameter i of activation d: the first parameter scaled by 0.5 +
 * 0.25·e (SwiGLU's alpha, SiTU's gate scale: visible at any input scale) and the last (a limit
 * or clamp) 2 + 0.5·e; the others stay the spec's. */
static float *ref_override_values(const moejit_activation *act, int i, int e_local)
{
    const mj_act_desc *d = mj_act_desc_of(act->kind);
    float *v = malloc((size_t)(e_local > 0 ? e_local : 1) * sizeof *v);
    if (!v || !d) return v;
    for (int e = 0; e < e_local; e++)
        v[e] = i == 0 && d->n_params > 1   ? act->value[0] * (0.5f + 0.25f * (float)e)
               : i == d->n_params - 1 ? 2.0f + 0.5f * (float)e
                                      : act->value[i];
    return v;
}

static int reference_run(const mj_gpu *g, const bench_layer *L, const char *act, const char *dtype,
                         long long T, int I, int K, int want_splits, int ep_local, FILE *log)
{
    const int H = ref_H, E = ref_E;
    const mj_dtype dt = L->spec->dtype;
    const int gated = moejit_activation_is_gated(&L->spec->act);
    const size_t rows = (size_t)(gated ? 2 * I : I);
    const mj_dtype ldt = L->spec->logits_dtype;
    const int dsv3 = L->spec->routing == MJ_ROUTING_DEEPSEEK_V3;
    float *x = host_random((size_t)T * H, 1.0f, dt), *lg = host_random((size_t)T * E, 2.0f, ldt);
    float *bias = dsv3 ? host_random((size_t)E, 0.5f, MJ_DTYPE_FP32) : NULL; /* a selection bias, never null */
    CUdeviceptr dbias = 0;
    float *w1 = host_random((size_t)E * rows * H, 1.0f / sqrtf((float)H), dt);
    float *w2 = host_random((size_t)E * H * I, 1.0f / sqrtf((float)I), dt);
    const int has_b1 = L->spec->bias == MJ_BIAS_B1 || L->spec->bias == MJ_BIAS_BOTH;
    const int has_b2 = L->spec->bias == MJ_BIAS_B2 || L->spec->bias == MJ_BIAS_BOTH;
    float *b1 = has_b1 ? host_random((size_t)E * rows, 0.5f, dt) : NULL;
    float *b2 = has_b2 ? host_random((size_t)E * H, 0.5f, dt) : NULL;
    const mj_act_desc *ad = mj_act_desc_of(L->spec->act.kind);
    const int n_over = ref_overrides && ad ? ad->n_params : 0;
    float *over[MJ_ACT_MAX_PARAMS] = {NULL, NULL, NULL};
    CUdeviceptr db1 = 0, db2 = 0, dover[MJ_ACT_MAX_PARAMS] = {0, 0, 0};
    float *out = malloc((size_t)T * H * sizeof *out), *out2 = malloc((size_t)T * H * sizeof *out2);
    double *ideal = malloc((size_t)T * H * sizeof *ideal), *replay = malloc((size_t)T * H * sizeof *replay);
    CUdeviceptr dx = 0, dl = 0, dl_other = 0, dw1 = 0, dw2 = 0, dout = 0, dws = 0;
    size_t ws = 0;
    int ok = 0, same = 1;
    char path[24] = "-";
    moejit_status st = MOEJIT_ERR_OUT_OF_MEMORY;
    moejit_moe_args a;
    moejit_moe_args_init(&a);
    if (!x || !lg || !w1 || !w2 || !out || !out2 || !ideal || !replay) goto done;
    a.num_tokens = T, a.hidden = H, a.inter = I, a.num_experts = E, a.topk = K;
    if (ep_local > 0) a.expert_offset = ref_ep_offset, a.num_local_experts = ep_local; /* weights: a prefix */
    st = mj_gpu_upload_values(g, x, (size_t)T * H, dt, &dx);
    if (!st) st = mj_gpu_upload_values(g, lg, (size_t)T * E, ldt, &dl);
    if (!st && bias) st = mj_gpu_upload_values(g, bias, (size_t)E, MJ_DTYPE_FP32, &dbias);
    a.routing_bias = (const float *)dbias;
    for (size_t i = 0; i < (size_t)T * E; i++) lg[i] = -lg[i];
    if (!st) st = mj_gpu_upload_values(g, lg, (size_t)T * E, ldt, &dl_other);
    for (size_t i = 0; i < (size_t)T * E; i++) lg[i] = -lg[i]; /* the reference routes the real ones */
    if (!st) st = mj_gpu_upload_values(g, w1, (size_t)E * rows * H, dt, &dw1);
    if (!st) st = mj_gpu_upload_values(g, w2, (size_t)E * H * I, dt, &dw2);
    if (!st) st = mj_gpu_alloc(g, (size_t)T * H * 2, &dout);
    a.x = (void *)dx, a.router_logits = (void *)dl, a.w1 = (void *)dw1, a.w2 = (void *)dw2, a.out = (void *)dout;
    if (!st && b1) st = mj_gpu_upload_values(g, b1, (size_t)E * rows, dt, &db1);
    if (!st && b2) st = mj_gpu_upload_values(g, b2, (size_t)E * H, dt, &db2);
    for (int i = 0; i < n_over && !st; i++) {
        over[i] = ref_override_values(&L->spec->act, i, E);
        st = over[i] ? mj_gpu_upload_values(g, over[i], (size_t)E, MJ_DTYPE_FP32, &dover[i]) : MOEJIT_ERR_OUT_OF_MEMORY;
        a.act_param[i] = (const float *)dover[i];
    }
    a.b1 = (const void *)db1, a.b2 = (const void *)db2;
    if (!st) st = bench_layer_workspace(L, &a, &ws);
    if (!st) st = mj_gpu_alloc(g, ws, &dws);
    /* No stage may rely on the workspace's contents: rep 0 runs on a poisoned one, rep 1 on
     * what a forward with other routing (negated logits) left there, rep 2 on what rep 1 left
     * (a stage that read a tile table, row list or routing weight before its producer wrote
     * it would see poison, another routing's, and the right one); reps 1 and 2 must give
     * rep 0's bits. */
    for (int rep = 0; rep < 3 && !st; rep++) {
        st = mj_gpu_poison(g, dout, 0xff, (size_t)T * H * 2, NULL);
        if (!st && rep == 0) st = mj_gpu_poison(g, dws, 0xff, ws, NULL);
        if (!st && rep == 1) {
            a.router_logits = (void *)dl_other;
            st = bench_layer_forward(g, L, &a, dws, ws, NULL);
            a.router_logits = (void *)dl;
        }
        if (!st) st = bench_layer_forward(g, L, &a, dws, ws, NULL);
        if (!st) st = mj_gpu_sync(g, NULL);
        if (!st) st = mj_gpu_download_values(g, dout, (size_t)T * H, dt, rep ? out2 : out);
        if (!st && rep) same = same && memcmp(out, out2, (size_t)T * H * sizeof *out) == 0;
    }
    if (st) {
        fprintf(log, "reference %-44s T=%-4lld RUN FAILED: %s\n", act, T, moejit_last_error());
        goto done;
    }
    mj_ref_layer R;
    memset(&R, 0, sizeof R);
    R.num_tokens = T, R.hidden = H, R.inter = I, R.num_experts = E, R.topk = K;
    R.expert_offset = a.expert_offset, R.num_local_experts = a.num_local_experts;
    R.act = &L->spec->act, R.routing = L->spec->routing, R.w1_layout = L->spec->w1_layout, R.dtype = dt;
    if (ref_wrong_layout >= 0) R.w1_layout = (mj_w1_layout)ref_wrong_layout;
    R.x = x, R.router_logits = lg, R.w1 = w1, R.w2 = w2, R.b1 = b1, R.b2 = ref_drop_b2 ? NULL : b2;
    for (int i = 0; i < n_over && !ref_drop_overrides; i++) R.act_param[i] = over[i];
    if (dsv3) {
        R.n_group = L->spec->n_group, R.topk_group = L->spec->topk_group;
        R.routed_scaling = L->spec->routed_scaling, R.routing_bias = bias;
    }
    /* the tensor-core backends store a and each expert's y in the dtype */
    if (mj_ref_forward(&R, 4, ideal, replay, mj_ref_replay_flags(L->spec)) != MOEJIT_OK) {
        fprintf(log, "reference %-44s T=%-4lld REFERENCE FAILED: %s\n", act, T, moejit_last_error());
        goto done;
    }
    double e_ideal = 0, e_replay = 0, m = 0;
    long long bad = 0;
    for (long long i = 0; i < T * H; i++) {
        if (!isfinite(out[i])) bad++;
        e_ideal = fmax(e_ideal, fabs(out[i] - ideal[i]));
        e_replay = fmax(e_replay, fabs(out[i] - replay[i]));
        m = fmax(m, fabs(replay[i]));
    }
    path_label(L->spec, &a, g->sms, L->knobs.decode, path, sizeof path);
    /* m > 0 keeps a degenerate all-zero reference from passing anything; on an EP rank every
     * token may legitimately route only to other ranks' experts (T = 1: 3 times in 14), and
     * then the bars below demand exact zeros */
    ok = bad == 0 && same && (m > 0 || ep_local > 0) && e_ideal <= 0.05 * m && e_replay <= 0.01 * m;
    /* what the forward ran, as the launch plan decided it on this device and decode mode */
    const int mode = L->knobs.decode;
    mj_gemm_plan plan = {0};
    if (want_splits != 0) mj_gemm_plan_make(L->spec, &a, g->sms, mode, &plan);
    if (want_splits == -1 && !plan.t1_fused) {
        fprintf(log, "reference %-4s %-44s T=%-4lld path=%-7s GEMM2 and finalize are not one kernel  FAIL\n", dtype,
                act, T, path);
        ok = 0;
    }
    /* -2: the persistent layer, in the block shape the decode mode names (if it names one) */
    if (want_splits == -2 &&
        (!plan.persistent_splits || (mode == MJ_DECODE_PERSISTENT_SHALLOW) != plan.persistent_shallow)) {
        fprintf(log, "reference %-4s %-44s T=%-4lld path=%-7s not the persistent decode layer  FAIL\n", dtype,
                act, T, path);
        ok = 0;
    }
    if (want_splits > 0 && plan.chain_splits != want_splits) {
        fprintf(log, "reference %-4s %-44s T=%-4lld path=%-7s the GEMM2 has %d K splits, want %d  FAIL\n", dtype,
                act, T, path, plan.chain_splits, want_splits);
        ok = 0;
    }
    if (ep_local > 0) snprintf(path + strlen(path), sizeof path - strlen(path), ",ep");
    fprintf(log, "reference %-4s %-44s T=%-4lld path=%-10s err/max: ideal %.2e replay %.2e  "
                 "non-finite %lld  rerun %s  %s\n",
            dtype, act, T, path, m > 0 ? e_ideal / m : e_ideal, m > 0 ? e_replay / m : e_replay, bad,
            same ? "identical" : "DIFFERS", ok ? "ok" : "FAIL");
done:
    mj_gpu_free(g, dx), mj_gpu_free(g, dl), mj_gpu_free(g, dl_other), mj_gpu_free(g, dw1), mj_gpu_free(g, dw2);
    mj_gpu_free(g, dout), mj_gpu_free(g, dws), mj_gpu_free(g, dbias), mj_gpu_free(g, db1), mj_gpu_free(g, db2);
    free(x), free(lg), free(w1), free(w2), free(out), free(out2), free(ideal), free(replay), free(bias);
    free(b1), free(b2);
    for (int i = 0; i < MJ_ACT_MAX_PARAMS; i++) mj_gpu_free(g, dover[i]), free(over[i]);
    ref_runs_done++;
    return ok;
}

/* The spec text of a reference layer (hidden ref_H, inter I) with `extra` fields appended. */
static void ref_spec_text(char *text, size_t n, const char *backend, const char *dtype, const char *act, int I,
                          int k, const char *extra)
{
    snprintf(text, n,
             "backend=%s,quant=%s,act=%s,routing=%s,hidden=%d,inter=%d,experts=%d,topk=%d,"
             "arch=native%s%s",
             backend, dtype, act, ref_routing, ref_H, I, ref_E, k, ref_fields, extra);
}

/* Builds the layer of text and checks it at each T of ts (inter I; want_splits as for
 * reference_run); returns the number of failed runs (all of them when it does not build). */
static int reference_layer(const mj_gpu *g, moejit_context *ctx, const char *text, const char *act,
                           const char *dtype, const long long *ts, int n_ts, int I, int k, int want_splits,
                           int ep_local, FILE *log)
{
    if (!g) { /* --list-specs: list the layer instead (a case reuses its layer at once) */
        static char last[560];
        if (strcmp(last, text) != 0) printf("%s\n", text);
        snprintf(last, sizeof last, "%s", text);
        return 0;
    }
    bench_layer L;
    int failed = 0;
    if (bench_layer_build(ctx, text, &L) != MOEJIT_OK) {
        fprintf(log, "reference %-44s BUILD FAILED (%s): %s\n", act, text, moejit_last_error());
        failed = n_ts;
    } else {
        for (int i = 0; i < n_ts; i++) {
            failed += !reference_run(g, &L, act, dtype, ts[i], I, k, want_splits, ep_local, log);
            if (ts[i] > MJ_MMA_PERSISTENT_MAX_TOKENS) continue;
            /* and the persistent decode layer, which layers this small take only when told, in
             * both of its block shapes (2 x 9 stages per SM, and the shallow 3 x 6) */
            const int mode = L.knobs.decode;
            L.knobs.decode = MJ_DECODE_PERSISTENT_DEEP;
            failed += !reference_run(g, &L, act, dtype, ts[i], I, k, -2, ep_local, log);
            L.knobs.decode = MJ_DECODE_PERSISTENT_SHALLOW;
            failed += !reference_run(g, &L, act, dtype, ts[i], I, k, -2, ep_local, log);
            L.knobs.decode = mode;
        }
    }
    bench_layer_free(&L);
    return failed;
}

/* Checks one activation and dtype on a small layer at T = 1 (small path, GEMM1 routing for
 * itself; every T <= MJ_MMA_PERSISTENT_MAX_TOKENS also on the persistent decode layer,
 * forced), T = 1 and 3 on an expert-parallel rank (4 of the 8 experts local), T = 5 (small
 * path, fused routing kernel), T = 24 (small path, route kernel and the scattering offsets
 * kernel), T = 37 (small path), T = 300 (large path) under
 * tile=auto and, for wgmma, T = 640 with tile=tall (160 rows per expert; auto would not take
 * tall for so small an expert) and T = 300, 640, 1024, 1100 and 1600 with tile=pair (75 rows
 * per expert: one row tile each, so every cluster pairs two experts' tiles; 160: two each,
 * every cluster one expert's; 256-275: two or three, so the pair order mixes experts' own
 * pairs with pairs of two experts' odd tiles, and an odd tile alone when their number is odd;
 * 400: above MJ_WGMMA_PAIR_ORDER_MAX_ROWS, the tiles in expert order; H = 264 makes the last
 * column tile of GEMM2 one whose second half lies wholly past H); with `split`, also T = 1 and 2
 * on a layer of I = ref_split_I, whose decode GEMM2 is split in two along K (the persistent
 * layer's in four), and T = 4100 under
 * tile=auto, whose finalize is the wide one (MJ_TC_FINALIZE_WIDE: 4100 narrow blocks), its one
 * column chunk 264 of 1024 columns wide. Returns the number of failed runs. */
static int reference_runs(const char *backend, int split)
{
    /* each T <= MJ_MMA_PERSISTENT_MAX_TOKENS three times: as the launcher picks, and the
     * persistent decode layer's two block shapes (auto 1 and 5, expert-parallel 1 and 3; split 1
     * and 2, and the 3 of k = 8, 6) */
    _Static_assert(MJ_MMA_PERSISTENT_MAX_TOKENS >= 5 && MJ_MMA_PERSISTENT_MAX_TOKENS < 24, "the count below");
    _Static_assert(MJ_MMA_FUSED_ROUTE_MAX_TOKENS >= 5 && MJ_MMA_FUSED_ROUTE_MAX_TOKENS < 24,
                   "T = 5 takes the fused routing kernel, T = 24 and 37 the routing kernels");
    return (strcmp(backend, "wgmma") == 0 ? 21 : 15) + (split ? 16 : 0);
}

static int reference_case(const mj_gpu *g, moejit_context *ctx, const char *backend, const char *act,
                          const char *dtype, int split, FILE *log)
{
    char text[560];
    /* the last auto T (4100: the wide finalize) with `split` only */
    static const long long auto_ts[] = {1, 5, 24, 37, 300, 4100}, ep_ts[] = {1, 3}, tall_ts[] = {640},
                           pair_ts[] = {300, 640, 1024, 1100, 1600}, split_ts[] = {1, 2}, one[] = {1};
    ref_spec_text(text, sizeof text, backend, dtype, act, ref_I, ref_K, "");
    int failed = reference_layer(g, ctx, text, act, dtype, auto_ts, split ? 6 : 5, ref_I, ref_K, 0, 0, log);
    failed += reference_layer(g, ctx, text, act, dtype, ep_ts, 2, ref_I, ref_K, 0, 4, log);
    if (strcmp(backend, "wgmma") == 0) { /* tile=auto takes tall only for large experts: force it */
        ref_spec_text(text, sizeof text, backend, dtype, act, ref_I, ref_K, ",tile=tall");
        failed += reference_layer(g, ctx, text, act, dtype, tall_ts, 1, ref_I, ref_K, 0, 0, log);
        ref_spec_text(text, sizeof text, backend, dtype, act, ref_I, ref_K, ",tile=pair");
        failed += reference_layer(g, ctx, text, act, dtype, pair_ts, 5, ref_I, ref_K, 0, 0, log);
    }
    if (split) {
        ref_spec_text(text, sizeof text, backend, dtype, act, ref_split_I, ref_K, "");
        failed += reference_layer(g, ctx, text, act, dtype, split_ts, 2, ref_split_I, ref_K, 2, 0, log);
        /* k = 8 of the 8 experts at T = 1: GEMM2 and finalize in one kernel; on an
         * expert-parallel rank the two kernels again; k = 6: the shallow one kernel */
        ref_spec_text(text, sizeof text, backend, dtype, act, ref_I, ref_t1_K, "");
        failed += reference_layer(g, ctx, text, act, dtype, one, 1, ref_I, ref_t1_K, -1, 0, log);
        failed += reference_layer(g, ctx, text, act, dtype, one, 1, ref_I, ref_t1_K, 0, 4, log);
        ref_spec_text(text, sizeof text, backend, dtype, act, ref_I, ref_t1_shallow_K, "");
        failed += reference_layer(g, ctx, text, act, dtype, one, 1, ref_I, ref_t1_shallow_K, -1, 0, log);
    }
    fflush(log);
    return failed;
}

/* Sets the routing fields of the next reference layers: method, its parameters for k slots of
 * ref_E experts (deepseek_v3: 4 groups of 2, as many kept as k needs, at least 2 so that one
 * group is masked below k = 5), and the logits. */
static void set_ref_routing(const char *method, int k, int bf16_logits)
{
    if (!strcmp(method, "deepseek_v3"))
        snprintf(ref_routing, sizeof ref_routing, "deepseek_v3,n_group=4,topk_group=%d,routed_scaling=2.5%s",
                 k <= 4 ? 2 : (k + 1) / 2, bf16_logits ? ",logits=bf16" : "");
    else
        snprintf(ref_routing, sizeof ref_routing, "%s%s", method, bf16_logits ? ",logits=bf16" : "");
}

/* A routing method other than the default renormalize on a small layer, from fp32 logits
 * (swiglu, bf16) and from bf16 logits (relu2, fp16): T = 1 (GEMM1 routing for itself), 2 and 5
 * (the fused routing kernel; each also on the persistent decode layer, deep and shallow), 37
 * (route kernel), 300 (large path), T = 1 and 3 on an expert-parallel rank, and, but for
 * llama4 (top-1), batch 1 with k = 8 and 6 (GEMM2 and finalize in one kernel). deepseek_v3
 * runs with a non-null selection bias (reference_run). Returns the number of failed runs. */
static int reference_routing_case(const mj_gpu *g, moejit_context *ctx, const char *backend, const char *method,
                                  FILE *log)
{
    static const long long ts[] = {1, 2, 5, 37, 300}, ep_ts[] = {1, 3}, one[] = {1};
    static const struct { const char *act, *dtype; int bf16_logits; } v[] = {{"swiglu", "bf16", 0},
                                                                              {"relu2", "fp16", 1}};
    const int llama4 = !strcmp(method, "llama4"), k = llama4 ? 1 : ref_K;
    char text[560];
    int failed = 0;
    for (int i = 0; i < 2; i++) {
        set_ref_routing(method, k, v[i].bf16_logits);
        ref_spec_text(text, sizeof text, backend, v[i].dtype, v[i].act, ref_I, k, "");
        failed += reference_layer(g, ctx, text, v[i].act, v[i].dtype, ts, 5, ref_I, k, 0, 0, log);
        failed += reference_layer(g, ctx, text, v[i].act, v[i].dtype, ep_ts, 2, ref_I, k, 0, 4, log);
        if (llama4) continue;
        const int t1_k[2] = {ref_t1_K, ref_t1_shallow_K};
        for (int j = 0; j < 2; j++) {
            set_ref_routing(method, t1_k[j], v[i].bf16_logits);
            ref_spec_text(text, sizeof text, backend, v[i].dtype, v[i].act, ref_I, t1_k[j], "");
            failed += reference_layer(g, ctx, text, v[i].act, v[i].dtype, one, 1, ref_I, t1_k[j], -1, 0, log);
        }
    }
    set_ref_routing("renormalize", ref_K, 0);
    fflush(log);
    return failed;
}

/* --extras: the W1 layouts, biases and per-expert overrides, each on every path of
 * reference_case (decode, persistent, split, batch-1 one-kernel, expert-parallel, large, tall,
 * pair) under a gated activation with and without parameters and an ungated one; then one
 * negative control per family (the reference told up_gate for an interleaved W1, without b2,
 * without the overrides), each of which must fail. Returns the number of failed runs (a control
 * that passes counts as one). */
static int reference_extras(const mj_gpu *g, moejit_context *ctx, const char *backend, FILE *log, int *runs)
{
    static const struct { const char *act, *dtype, *fields; int overrides; } c[] = {
        {"swiglu(alpha=1.702,beta=1,limit=7)", "bf16", ",w1_layout=interleaved,bias=both,act_overrides=per_expert", 1},
        {"geglu", "fp16", ",w1_layout=gate_up,bias=b1", 0},
        {"relu2", "bf16", ",w1_layout=interleaved,bias=b2", 0},
        {"situ(gate_scale=4,linear_scale=25,clamp_limit=6)", "fp16", ",act_overrides=per_expert", 1},
        {"swiglu", "bf16", ",w1_layout=gate_up,bias=both,act_overrides=per_expert", 1},
        {"swiglu_step", "fp16", ",w1_layout=interleaved,bias=b1,act_overrides=per_expert", 0},
    };
    int failed = 0;
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        snprintf(ref_fields, sizeof ref_fields, "%s", c[i].fields);
        ref_overrides = c[i].overrides;
        const int before = ref_runs_done;
        failed += reference_case(g, ctx, backend, c[i].act, c[i].dtype, 1, log);
        *runs += g ? ref_runs_done - before : 0;
    }
    /* the negative controls, on the first case's layer at T = 37 (small path) and 300 (large) */
    static const long long ts[] = {37, 300};
    char text[560];
    snprintf(ref_fields, sizeof ref_fields, "%s", c[0].fields);
    ref_overrides = 1;
    ref_spec_text(text, sizeof text, backend, c[0].dtype, c[0].act, ref_I, ref_K, "");
    for (int control = 0; control < 3; control++) {
        ref_wrong_layout = control == 0 ? MJ_W1_UP_GATE : -1;
        ref_drop_b2 = control == 1, ref_drop_overrides = control == 2;
        static const char *const what[] = {"W1 read as up_gate", "b2 left out", "overrides left out"};
        const int bad = reference_layer(g, ctx, text, c[0].act, c[0].dtype, ts, 2, ref_I, ref_K, 0, 0, log);
        if (g) {
            fprintf(log, "negative control (%s): %d of 2 runs failed, as they must: %s\n", what[control], bad,
                    bad == 2 ? "ok" : "FAIL");
            failed += bad != 2;
            *runs += 1;
        }
    }
    ref_wrong_layout = -1, ref_drop_b2 = ref_drop_overrides = 0, ref_overrides = 0;
    ref_fields[0] = '\0';
    fflush(log);
    return failed;
}

/* Runs every float64 case of o's tensor-core backends (g NULL: prints their layers' specs):
 * renormalize's on every activation, then each other --routing method's. */
static int reference_checks(const mj_gpu *g, moejit_context *ctx, const options *o, int *failed)
{
    static const char *const acts[] = {
        "gelu", "relu", "silu", "swiglu", "geglu", "relu2", "swiglu_step", "geglu_tanh", "identity",
        "situ", "swiglu(alpha=1.702,beta=1,limit=7)", "situ(gate_scale=4,linear_scale=25,clamp_limit=6)"};
    int n = 0, bf16 = 0;
    for (int q = 0; q < o->n_quants; q++) {
        bf16 |= !o->quant[q]->fp8 && !o->quant[q]->w4;
        if (!o->quant[q]->fp8) continue;
        /* fp8's float64 cases on wgmma (mma has no fp8 layer), each --routing method */
        for (int b = 0; b < o->n_backends; b++)
            for (int r = 0; r < o->n_routings && !strcmp(o->backend[b], "wgmma"); r++) {
                char routing[160];
                set_ref_routing(o->routing[r], ref_K, 0);
                snprintf(routing, sizeof routing, "%s", ref_routing);
                *failed += bench_quant_reference(g, ctx, o->backend[b], o->quant[q], routing, stdout, &n);
            }
        set_ref_routing("renormalize", ref_K, 0);
    }
    /* the 4-bit formats of --quant (bench_layer_w4.c), then the 16-bit cases */
    const char *w4_names[8];
    int n_w4 = 0;
    for (int q = 0; q < o->n_quants; q++)
        if (o->quant[q]->w4 && n_w4 < 8) w4_names[n_w4++] = o->quant[q]->name;
    for (int b = 0; b < o->n_backends && n_w4; b++)
        if (strcmp(o->backend[b], "simt") != 0)
            n += bench_w4_reference_checks(g, ctx, o->backend[b], w4_names, n_w4, o->routing, o->n_routings, stdout,
                                           failed);
    for (int b = 0; b < o->n_backends && bf16; b++) {
        const char *be = o->backend[b];
        if (!strcmp(be, "simt")) continue;
        if (o->extras) {
            *failed += reference_extras(g, ctx, be, stdout, &n);
            continue;
        }
        for (int r = 0; r < o->n_routings; r++) {
            if (!strcmp(o->routing[r], "renormalize")) continue;
            const int before = ref_runs_done;
            *failed += reference_routing_case(g, ctx, be, o->routing[r], stdout);
            n += ref_runs_done - before;
        }
        int renormalize = 0;
        for (int r = 0; r < o->n_routings; r++) renormalize |= !strcmp(o->routing[r], "renormalize");
        if (!renormalize) continue;
        /* the split GEMM2 for one gated and one ungated activation per dtype */
        for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++) {
            const int split = !strcmp(acts[i], "swiglu") || !strcmp(acts[i], "relu2");
            *failed += reference_case(g, ctx, be, acts[i], "bf16", split, stdout);
            n += reference_runs(be, split);
        }
        *failed += reference_case(g, ctx, be, "swiglu", "fp16", 1, stdout);
        *failed += reference_case(g, ctx, be, "relu2", "fp16", 1, stdout);
        n += 2 * reference_runs(be, 1);
    }
    return n;
}

/* ---- one shape ------------------------------------------------------------------------------ */

/* "1455 MHz 690 W, power cap" (mean SM clock and board power over the timed replays, and what
 * limited the clock), or "-" without NVML. */
static const char *clock_text(const gpu_clocks *c, char *buf, int size)
{
    if (c->samples == 0) return snprintf(buf, (size_t)size, "-"), buf;
    char why[48];
    gpu_clocks_reason_text(c->reasons, why, sizeof why);
    snprintf(buf, (size_t)size, "%.0f MHz %.0f W%s%s", c->sm_mhz, c->power_w, *why ? ", " : "", why);
    return buf;
}

typedef struct row {
    const model_shape *shape;
    long long batch;
    char backend[32], path[24], check[48], note[64];
    double us, spread;
    bench_floor m;
    gpu_clocks clocks; /* the GPU over the timed replays (no samples: no NVML) */
} row;

typedef struct variant {
    char label[32]; /* "mma", "mma/small", "simt", "wgmma fp8_block" */
    char text[512];
    bench_layer layer;
    int built;
} variant;

static int write_cubin(const options *o, const model_shape *s, const variant *v)
{
    if (!o->cubin_dir) return 0;
    char path[512], label[32];
    memcpy(label, v->label, sizeof label);
    label[sizeof label - 1] = '\0';
    for (char *c = label; *c; c++)
        if (*c == '/') *c = '-';
    const moejit_kernel *k = v->layer.direct ? NULL : v->layer.kernel;
    const int modules = k ? k->n_modules : 0;
    /* a tensor-core layer's cubins are its modules': one file each, <shape>-<label>.<module>.cubin */
    for (int m = modules ? 0 : -1; m < modules; m++) {
        const mj_program *p = m < 0 ? bench_layer_program(&v->layer) : &k->modules[m].program;
        if (m >= 0 && !p->cubin) continue;
        if (m < 0) snprintf(path, sizeof path, "%s/%s-%s.cubin", o->cubin_dir, s->name, label);
        else snprintf(path, sizeof path, "%s/%s-%s.%s.cubin", o->cubin_dir, s->name, label, mj_layer_module_name(m));
        FILE *f = fopen(path, "wb");
        const int wrote = f && fwrite(p->cubin, 1, p->cubin_len, f) == p->cubin_len;
        if (!(f && fclose(f) == 0 && wrote)) {
            cli_error("bench layer: cannot write %s", path);
            return -1;
        }
    }
    return 0;
}

static void print_resources(const variant *v)
{
    printf("  %s: compile %.2f s\n", v->label, v->layer.compile_seconds);
    for (int i = 0;; i++) {
        const mj_kernel_info *k = bench_layer_kernel(&v->layer, i);
        if (!k) break;
        if (!strstr(k->name, "gemm")) continue;
        printf("    %-24s regs %3d  smem(static) %6d  stack %d  spills %d/%d\n", k->name, k->registers,
               k->shared_bytes, k->stack_bytes, k->spill_store_bytes, k->spill_load_bytes);
    }
}

static void free_bufs(const mj_gpu *g, shape_bufs *b)
{
    mj_gpu_free(g, b->w1), mj_gpu_free(g, b->w2), mj_gpu_free(g, b->x), mj_gpu_free(g, b->logits);
    mj_gpu_free(g, b->out), mj_gpu_free(g, b->out2), mj_gpu_free(g, b->ws);
    mj_gpu_free(g, b->b1), mj_gpu_free(g, b->b2);
    bench_quant_free(g, &b->scales);
    bench_w4_weights_free(g, &b->w4);
    memset(b, 0, sizeof *b);
}

/* The routing fields of the timed layers (--layer-routing): deepseek_v3 with DeepSeek-V3's
 * grouping (8 groups, 4 kept, scaling 2.5), which every shape's E and k allow. */
static const char *layer_routing_fields(const options *o)
{
    return !strcmp(o->layer_routing, "deepseek_v3") ? "deepseek_v3,n_group=8,topk_group=4,routed_scaling=2.5"
                                                    : o->layer_routing;
}

/* Whether the format of simt_text (a simt spec without its arch) can hold the shape at all:
 * its shape rules (H and I multiples of the scale groups) are arch- and backend-independent,
 * and simt, which takes every format on every arch, shows them by emitting the layer for
 * sm_80. Where they refuse it, why gets the rule and the shape is skipped, not failed; a spec
 * that does not parse is left to fail where the layer is built. */
static int shape_holds_format(const char *simt_text, char *why, size_t cap)
{
    char text[600];
    snprintf(text, sizeof text, "%.500s,arch=sm_80", simt_text);
    moejit_spec *spec = NULL;
    if (moejit_spec_parse(text, &spec) != MOEJIT_OK) return 1;
    mj_source src;
    memset(&src, 0, sizeof src);
    const moejit_status st = mj_emit(spec, &src);
    if (st != MOEJIT_OK) snprintf(why, cap, "%s", moejit_last_error());
    mj_source_free(&src);
    moejit_spec_destroy(spec);
    return st == MOEJIT_OK;
}

/* The layers of shape s: every backend x tile (tiles apply to mma and wgmma; tall and pair to
 * wgmma only), then simt for --check when not asked for: at most 3 x 5 + 1 in v[16]. Returns
 * how many (none where the format's shape rules refuse the shape: skip then says why, else it
 * is empty); *n_user: those asked for (timed). */
static int shape_variants(const options *o, const model_shape *s, const bench_quant *q, variant *v, int *n_user,
                          char *skip, size_t skip_cap)
{
    int nv = 0;
    memset(v, 0, 16 * sizeof *v);
    *n_user = 0;
    skip[0] = '\0';
    /* a 4-bit shape runs in its own format, once: as --quant's first entry that is not fp8 */
    if (s->quant) {
        const bench_quant *own = NULL;
        for (int i = 0; i < o->n_quants && !own; i++)
            if (!o->quant[i]->fp8) own = o->quant[i];
        if (q != own) return 0;
    }
    char qspec[80];
    snprintf(qspec, sizeof qspec, "%s%s", s->quant ? "quant=" : "", s->quant ? s->quant : q->spec);
    /* fp8 and 4-bit: the label says so (bf16's stay as they were) */
    const int named = q->fp8 || q->w4;
    /* a 4-bit shape's label names its own format (its spec's quant up to the first comma) */
    char own_name[8];
    snprintf(own_name, sizeof own_name, "%.*s", s->quant ? (int)strcspn(s->quant, ",") : 0, s->quant ? s->quant : "");
    const char *qlabel = s->quant ? own_name : named ? q->name : "", *qsep = named || s->quant ? " " : "";
    char simt_text[480];
    snprintf(simt_text, sizeof simt_text, "backend=simt,%s,act=%s,routing=%s,hidden=%d,inter=%d,experts=%d,topk=%d%s",
             qspec, s->act, layer_routing_fields(o), s->hidden, s->inter, s->experts, s->topk,
             s->layer ? s->layer : "");
    if (!shape_holds_format(simt_text, skip, skip_cap)) return 0;
    for (int b = 0; b < o->n_backends; b++) {
        if (q->fp8 && !strcmp(o->backend[b], "mma")) continue; /* mma has no fp8 layer */
        int is_mma = !strcmp(o->backend[b], "mma") || !strcmp(o->backend[b], "wgmma");
        for (int t = 0; t < (is_mma ? o->n_tiles : 1); t++) {
            const int tall = !strcmp(o->tile[t], "tall"), pair = !strcmp(o->tile[t], "pair");
            if (is_mma && (tall || pair) && strcmp(o->backend[b], "wgmma") != 0)
                continue; /* tall and pair: wgmma's */
            if (q->fp8 && is_mma && !strcmp(o->tile[t], "small")) continue; /* fp8: no small path */
            variant *x = &v[nv++];
            if (is_mma && strcmp(o->tile[t], "auto") != 0)
                snprintf(x->label, sizeof x->label, "%s/%s%s%s", o->backend[b], o->tile[t], qsep, qlabel);
            else
                snprintf(x->label, sizeof x->label, "%s%s%s", o->backend[b], qsep, qlabel);
            snprintf(x->text, sizeof x->text,
                     "backend=%s,%s,act=%s,routing=%s,hidden=%d,inter=%d,experts=%d,"
                     "topk=%d,arch=native%s%s%s",
                     o->backend[b], qspec, s->act, layer_routing_fields(o), s->hidden, s->inter, s->experts, s->topk,
                     is_mma ? ",tile=" : "", is_mma ? o->tile[t] : "", s->layer ? s->layer : "");
        }
    }
    *n_user = nv;
    int simt_ref = -1;
    for (int i = 0; i < nv; i++)
        if (!strncmp(v[i].label, "simt", 4)) simt_ref = i;
    if (o->check && simt_ref < 0) {
        snprintf(v[nv].label, sizeof v[nv].label, "simt%s%s", qsep, qlabel);
        snprintf(v[nv].text, sizeof v[nv].text, "%.480s,arch=native", simt_text);
        nv++;
    }
    return nv;
}

/* The shape's weights (1-byte e4m3 codes for fp8, with their scales) and input sets (x as e4m3
 * codes for static fp8 x), filled on the device. */
static moejit_status fill_shape(const mj_gpu *g, const bench_fill *fill, const model_shape *s, size_t nw1, size_t nw2,
                                size_t rows1, shape_bufs *b, CUstream stream)
{
    const bench_quant *q = b->quant;
    const uint64_t seed = 0x5eed0000ull + (uint64_t)(s - shapes) * 16;
    moejit_status st = MOEJIT_OK;
    const char *w4 = shape_w4_quant(s, q);
    if (w4) {
        st = bench_w4_weights_make(g, fill, w4, s->hidden, s->inter, s->experts, (int)rows1, seed, &b->w4, stream);
    } else if (q->fp8) {
        st = bench_fill_e4m3(g, fill, b->w1, nw1, seed + 1, stream);
        if (st == MOEJIT_OK) st = bench_fill_e4m3(g, fill, b->w2, nw2, seed + 2, stream);
        if (st == MOEJIT_OK)
            st = bench_quant_alloc(g, fill, q, s->experts, (int64_t)rows1, s->hidden, s->inter, seed, stream, &b->scales);
    } else {
        st = bench_fill_run(g, fill, b->w1, nw1, MJ_DTYPE_BF16, seed + 1, 1.0f / sqrtf((float)s->hidden), stream);
        if (st == MOEJIT_OK)
            st = bench_fill_run(g, fill, b->w2, nw2, MJ_DTYPE_BF16, seed + 2, 1.0f / sqrtf((float)s->inter), stream);
    }
    /* Each input set from its own seed, token-major, so that a batch of B reads the same B
     * tokens of set i whatever the largest batch of the command (which sizes the sets): a row
     * does not depend on the other batches it was run with. */
    for (int set = 0; set < b->sets && st == MOEJIT_OK; set++) {
        const uint64_t set_seed = seed + ((uint64_t)(set + 1) << 40);
        const CUdeviceptr x = b->x + (size_t)set * b->x_set * b->x_elem;
        st = q->static_x ? bench_fill_e4m3(g, fill, x, b->x_set, set_seed + 3, stream)
                         : bench_fill_run(g, fill, x, b->x_set, MJ_DTYPE_BF16, set_seed + 3, 1.0f, stream);
        if (st == MOEJIT_OK)
            st = bench_fill_run(g, fill, b->logits + (size_t)set * b->logits_set * 4, b->logits_set, MJ_DTYPE_FP32,
                                set_seed + 4, 2.0f, stream);
    }
    /* biases about a tenth of the GEMMs' outputs */
    if (st == MOEJIT_OK && b->b1)
        st = bench_fill_run(g, fill, b->b1, (size_t)s->experts * rows1, MJ_DTYPE_BF16, seed + 5, 0.1f, stream);
    if (st == MOEJIT_OK && b->b2)
        st = bench_fill_run(g, fill, b->b2, (size_t)s->experts * (size_t)s->hidden, MJ_DTYPE_BF16, seed + 6, 0.1f,
                            stream);
    if (st == MOEJIT_OK) st = mj_gpu_sync(g, stream);
    return st;
}

static moejit_status run_shape(const mj_gpu *g, moejit_context *ctx, const bench_fill *fill,
                               const options *o, const model_shape *s, const bench_quant *q, row *rows, int *n_rows,
                               int *failed, CUstream stream, gpu_telemetry *tel)
{
    variant v[16];
    int n_user = 0;
    char skip[512];
    /* the first n_user are timed; an extra simt only checks */
    const int nv = shape_variants(o, s, q, v, &n_user, skip, sizeof skip);
    if (skip[0]) printf("== %s: skipped in %s: %s\n", s->name, s->quant ? s->quant : q->name, skip);
    if (nv == 0) return MOEJIT_OK; /* fp8 asked of mma alone, or the format cannot hold the shape */
    int simt_ref = -1;
    for (int i = 0; i < nv; i++)
        if (!strncmp(v[i].label, "simt", 4)) simt_ref = i;
    printf("== %s: H %d, I %d, E %d, k %d, %s, %s, %s routing\n", s->name, s->hidden, s->inter,
           s->experts, s->topk, s->act, s->quant ? s->quant : q->name, o->layer_routing);
    moejit_status st = MOEJIT_OK;
    for (int i = 0; i < nv && st == MOEJIT_OK; i++) {
        st = bench_layer_build(ctx, v[i].text, &v[i].layer);
        if (st != MOEJIT_OK) {
            cli_error("bench layer: %s %s: %s", s->name, v[i].label, moejit_last_error());
            break;
        }
        v[i].built = 1;
        print_resources(&v[i]);
        if (write_cubin(o, s, &v[i])) st = MOEJIT_ERR_IO;
    }

    const int gated = v[0].built ? moejit_activation_is_gated(&v[0].layer.spec->act) : 1;
    /* the biases the shape's layer fields ask for (every variant has them) */
    const mj_bias bias = v[0].built ? v[0].layer.spec->bias : MJ_BIAS_NONE;
    const int has_b1 = bias == MJ_BIAS_B1 || bias == MJ_BIAS_BOTH, has_b2 = bias == MJ_BIAS_B2 || bias == MJ_BIAS_BOTH;
    const size_t rows1 = (size_t)(gated ? 2 : 1) * (size_t)s->inter;
    long long bmax = 0;
    for (int i = 0; i < o->n_batches; i++) bmax = o->batch[i] > bmax ? o->batch[i] : bmax;
    shape_bufs b;
    memset(&b, 0, sizeof b);
    b.quant = q;
    b.x_elem = q->static_x ? 1 : 2;
    const size_t w_elem = q->fp8 ? 1 : 2;
    b.sets = o->rotate > 0 ? o->rotate : (bmax >= 1024 ? 4 : 8);
    b.x_set = (size_t)bmax * (size_t)s->hidden;
    b.logits_set = (size_t)bmax * (size_t)s->experts;
    const size_t nw1 = (size_t)s->experts * rows1 * (size_t)s->hidden;
    const size_t nw2 = (size_t)s->experts * (size_t)s->hidden * (size_t)s->inter;
    /* workspace: the largest any variant needs at the largest batch */
    for (int i = 0; i < nv && st == MOEJIT_OK; i++) {
        moejit_moe_args a;
        args_of(s, bmax, &b, 0, &a);
        a.x = a.router_logits = a.w1 = a.w2 = a.out = (void *)(uintptr_t)256; /* shape-only query */
        if (q->fp8) a.w1_scale = a.w2_scale = (const void *)(uintptr_t)256;
        if (q->static_x) a.x_scale = (const float *)(uintptr_t)256;
        if (has_b1) a.b1 = (const void *)(uintptr_t)256;
        if (has_b2) a.b2 = (const void *)(uintptr_t)256;
        size_t need = 0;
        st = bench_layer_workspace(&v[i].layer, &a, &need);
        if (need > b.ws_bytes) b.ws_bytes = need;
    }
    const int w4 = shape_w4_quant(s, q) != NULL;
    if (st == MOEJIT_OK && !w4) st = mj_gpu_alloc(g, nw1 * w_elem, &b.w1);
    if (st == MOEJIT_OK && !w4) st = mj_gpu_alloc(g, nw2 * w_elem, &b.w2);
    if (st == MOEJIT_OK) st = mj_gpu_alloc(g, b.x_set * (size_t)b.sets * b.x_elem, &b.x);
    if (st == MOEJIT_OK) st = mj_gpu_alloc(g, b.logits_set * (size_t)b.sets * 4, &b.logits);
    if (st == MOEJIT_OK) st = mj_gpu_alloc(g, b.x_set * 2, &b.out);
    if (st == MOEJIT_OK) st = mj_gpu_alloc(g, b.x_set * 2, &b.out2);
    if (st == MOEJIT_OK) st = mj_gpu_alloc(g, b.ws_bytes, &b.ws);
    if (st == MOEJIT_OK && has_b1) st = mj_gpu_alloc(g, (size_t)s->experts * rows1 * 2, &b.b1);
    if (st == MOEJIT_OK && has_b2) st = mj_gpu_alloc(g, (size_t)s->experts * (size_t)s->hidden * 2, &b.b2);
    if (st == MOEJIT_OK) st = fill_shape(g, fill, s, nw1, nw2, rows1, &b, stream);

    float *h_ref = NULL, *h_got = NULL, *h_again = NULL;
    if (o->check && st == MOEJIT_OK) {
        h_ref = malloc(b.x_set * sizeof *h_ref);
        h_got = malloc(b.x_set * sizeof *h_got);
        h_again = malloc(b.x_set * sizeof *h_again);
        if (!h_ref || !h_got || !h_again) st = MOEJIT_ERR_OUT_OF_MEMORY;
    }
    for (int bi = 0; bi < o->n_batches && st == MOEJIT_OK; bi++) {
        const long long B = o->batch[bi];
        const size_t n_out = (size_t)B * (size_t)s->hidden;
        double e_read = 0.0;
        if (o->time) st = experts_read(g, s, B, &b, &e_read);
        int ref_ok = 0;
        if (o->check) {
            st = run_once(g, &v[simt_ref].layer, s, B, &b, b.out, h_ref, stream);
            if (st != MOEJIT_OK) { /* no reference: the comparisons below fail, timing goes on */
                printf("check %-16s B=%-6lld simt reference failed: %s\n", s->name, B, moejit_last_error());
                st = MOEJIT_OK;
            } else {
                cmp_result self = compare(h_ref, h_ref, n_out);
                ref_ok = self.nonfinite == 0 && self.max_ref > 0;
            }
        }
        for (int i = 0; i < nv && st == MOEJIT_OK; i++) {
            const int timed = i < n_user;
            if (!timed || (i == simt_ref && !o->time)) continue;
            row *r = &rows[(*n_rows)];
            memset(r, 0, sizeof *r);
            r->shape = s, r->batch = B;
            snprintf(r->backend, sizeof r->backend, "%s", v[i].label);
            snprintf(r->path, sizeof r->path, "-");
            moejit_moe_args a;
            args_of(s, B, &b, b.out, &a);
            path_label(v[i].layer.spec, &a, g->sms, v[i].layer.knobs.decode, r->path, sizeof r->path);
            snprintf(r->check, sizeof r->check, "-");
            if (o->check && i != simt_ref) {
                st = run_once(g, &v[i].layer, s, B, &b, b.out, h_got, stream);
                if (st == MOEJIT_OK) st = run_once(g, &v[i].layer, s, B, &b, b.out2, h_again, stream);
                if (st != MOEJIT_OK) break;
                cmp_result c = compare(h_got, h_ref, n_out);
                int same = memcmp(h_got, h_again, n_out * sizeof *h_got) == 0;
                double rel = c.max_ref > 0 ? c.max_err / c.max_ref : c.max_err;
                int ok = ref_ok && c.nonfinite == 0 && same && rel <= 0.02;
                if (!ok) (*failed)++;
                snprintf(r->check, sizeof r->check, "%s %.1e/%.1e%s", ok ? "ok" : "FAIL", rel, c.rel_l2,
                         same ? "" : " rerun-differs");
                printf("check %-16s B=%-6lld %-10s vs simt: max err/max %.2e, rel L2 %.2e, non-finite %lld, "
                       "rerun %s: %s\n",
                       s->name, B, v[i].label, rel, c.rel_l2, c.nonfinite, same ? "identical" : "DIFFERS",
                       ok ? "ok" : "FAIL");
                fflush(stdout);
            }
            if (!o->time || !timed) continue;
            enqueue_ctx ec = {g, &v[i].layer, a, &b, B, s->hidden, s->experts};
            const char *note = "";
            st = bench_time_graph(g, stream, enqueue_forward, &ec, b.sets, o->reps, &r->us, &r->spread, &note, tel,
                                  &r->clocks);
            if (st != MOEJIT_OK) {
                cli_error("bench layer: %s B=%lld %s: %s", s->name, B, v[i].label, moejit_last_error());
                break;
            }
            snprintf(r->note, sizeof r->note, "%s", note);
            r->m = floor_of(s, q, gated, B, e_read, o);
            if (w4) r->m = bench_w4_floor(r->m, shape_w4_quant(s, q), o->bw, o->peak); /* the 4-bit bytes */
            char clock[64];
            printf("time  %-16s B=%-6lld %-10s path %-5s %10.1f us  %6.2f TB/s  %7.1f TFLOP/s  floor %8.1f us "
                   "(%5.1f%%)  experts %.2f (uniform %.2f)  spread %.0f%%  SM %s\n",
                   s->name, B, v[i].label, r->path, r->us, r->m.weight_bytes / r->us * 1e-6,
                   r->m.flops / r->us * 1e-6, r->m.floor_us, 100.0 * r->m.floor_us / r->us, r->m.e_read,
                   r->m.e_uniform, 100.0 * r->spread, clock_text(&r->clocks, clock, sizeof clock));
            fflush(stdout);
            (*n_rows)++;
        }
    }
    free(h_ref), free(h_got), free(h_again);
    free_bufs(g, &b);
    for (int i = 0; i < nv; i++)
        if (v[i].built || v[i].layer.spec) bench_layer_free(&v[i].layer);
    return st;
}

/* ---- output ------------------------------------------------------------------------------ */

static void print_table(FILE *f, const row *rows, int n)
{
    fprintf(f, "| shape | B | backend | path | µs | experts read (uniform) | TB/s (weights) | TFLOP/s | floor µs | "
               "of floor | SM clock | check |\n");
    fprintf(f, "|---|---:|---|---|---:|---:|---:|---:|---:|---:|---|---|\n");
    for (int i = 0; i < n; i++) {
        const row *r = &rows[i];
        char clock[64];
        fprintf(f, "| %s | %lld | %s | %s | %.1f | %.2f (%.2f) | %.2f | %.1f | %.1f | %.1f%% | %s | %s |\n",
                r->shape->name, r->batch, r->backend, r->path, r->us, r->m.e_read, r->m.e_uniform,
                r->m.weight_bytes / r->us * 1e-6, r->m.flops / r->us * 1e-6, r->m.floor_us,
                100.0 * r->m.floor_us / r->us, clock_text(&r->clocks, clock, sizeof clock), r->check);
    }
}

static int write_json(const options *o, const row *rows, int n, const mj_gpu *g)
{
    FILE *f = fopen(o->json, "w");
    if (!f) {
        cli_error("bench layer: --json: cannot write %s", o->json);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        const row *r = &rows[i];
        fprintf(f,
                "{\"source\":\"moejit\",\"device\":\"%s\",\"shape\":\"%s\",\"batch\":%lld,\"backend\":\"%s\","
                "\"path\":\"%s\",\"us\":%.3f,\"spread\":%.4f,\"e_act\":%.3f,\"e_read\":%.3f,\"weight_bytes\":%.0f,\"flops\":%.0f,"
                "\"floor_us\":%.3f,\"tbps\":%.4f,\"tflops\":%.3f,\"frac_floor\":%.4f,\"check\":\"%s\","
                "\"capture\":\"%s\",\"clock_samples\":%d,\"sm_mhz\":%.0f,\"sm_mhz_min\":%d,\"sm_mhz_max\":%d,"
                "\"power_w\":%.1f,\"clock_reasons\":%llu}\n",
                g->name, r->shape->name, r->batch, r->backend, r->path, r->us, r->spread, r->m.e_uniform, r->m.e_read,
                r->m.weight_bytes, r->m.flops, r->m.floor_us, r->m.weight_bytes / r->us * 1e-6,
                r->m.flops / r->us * 1e-6, r->m.floor_us / r->us, r->check, *r->note ? "relaxed" : "global",
                r->clocks.samples, r->clocks.sm_mhz, r->clocks.sm_mhz_min, r->clocks.sm_mhz_max, r->clocks.power_w,
                r->clocks.reasons);
    }
    return fclose(f) == 0 ? 0 : -1;
}

static int append_markdown(const options *o, const row *rows, int n, const mj_gpu *g)
{
    FILE *f = fopen(o->append, "a");
    if (!f) {
        cli_error("bench layer: --append: cannot open %s", o->append);
        return -1;
    }
    char date[32];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d", gmtime(&now));
    fprintf(f, "\n### moejit bench layer, %s, commit %s, %s\n\n", date, o->commit ? o->commit : "(not given)",
            g->name);
    fprintf(f, "Method: whole layer (route → finalize) by CUDA-graph replay, median of the replays, %s "
               "input sets rotated; %s routing on seeded uniform fp32 logits; floor = "
               "max(W / %.2f TB/s, F / %.0f TFLOP/s), W on the experts the timed input sets route to (their "
               "mean over the sets; E_act = E·(1 − (1 − k/E)^B) under uniform routing in brackets).\n\n",
            o->rotate > 0 ? "N" : "4-8", layer_routing_fields(o), o->bw, o->peak);
    print_table(f, rows, n);
    return fclose(f) == 0 ? 0 : -1;
}

/* ---- the command --------------------------------------------------------------------------- */

int cmd_bench_layer(int argc, char **argv)
{
    static const struct option long_options[] = {
        {"shapes", required_argument, NULL, 's'}, {"batches", required_argument, NULL, 'b'},
        {"backend", required_argument, NULL, 'B'}, {"tile", required_argument, NULL, 't'},
        {"check", no_argument, NULL, 'c'},         {"no-time", no_argument, NULL, 'n'},
        {"json", required_argument, NULL, 'j'},    {"append", required_argument, NULL, 'a'},
        {"commit", required_argument, NULL, 'C'},  {"cubin-dir", required_argument, NULL, 'd'},
        {"rotate", required_argument, NULL, 'r'},  {"reps", required_argument, NULL, 'R'},
        {"bw", required_argument, NULL, 'w'},      {"peak", required_argument, NULL, 'p'},
        {"no-reference", no_argument, NULL, 'N'},  {"help", no_argument, NULL, 'h'},
        {"list-specs", no_argument, NULL, 'L'},
        {"routing", required_argument, NULL, 'o'}, {"quant", required_argument, NULL, 'q'},
        {"extras", no_argument, NULL, 'X'},        {"layer-routing", required_argument, NULL, 'T'},
        {NULL, 0, NULL, 0}};
    static const char *const backends[] = {"simt", "mma", "wgmma"};
    static const char *const tiles[] = {"auto", "large", "small", "tall", "pair"};
    options o;
    memset(&o, 0, sizeof o);
    o.time = 1, o.reference = 1, o.bw = 4.48, o.peak = 790.0, o.layer_routing = "renormalize";
    parse_shapes(DEFAULT_SHAPES, &o);
    const long long default_batches[] = {1, 8, 64, 512, 4096};
    for (int i = 0; i < 5; i++) o.batch[o.n_batches++] = default_batches[i];
    o.backend[o.n_backends++] = "mma";
    o.tile[o.n_tiles++] = "auto";
    o.quant[o.n_quants++] = bench_quant_find("bf16");
    static const char *const routings[] = {"renormalize",    "softmax_topk", "sigmoid_topk",
                                           "sigmoid_renorm", "deepseek_v3",  "llama4"};
    o.routing[o.n_routings++] = "renormalize";
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+:h", long_options, NULL)) != -1) {
        switch (c) {
        case 's':
            if (parse_shapes(optarg, &o)) return MJ_EXIT_USAGE;
            break;
        case 'b': {
            char items[32][32];
            int n = split(optarg, items, 32);
            o.n_batches = 0;
            for (int i = 0; i < n; i++) {
                long long v = cli_parse_count("--batches", items[i], 1 << 20);
                if (v < 1) return MJ_EXIT_USAGE;
                o.batch[o.n_batches++] = v;
            }
            if (n <= 0) {
                cli_error("bench layer: --batches: expected a comma-separated list of token counts");
                return MJ_EXIT_USAGE;
            }
            break;
        }
        case 'B':
            if (parse_word_list("--backend", optarg, o.backend, 3, &o.n_backends, backends, 3, "simt, mma, wgmma"))
                return MJ_EXIT_USAGE;
            break;
        case 't':
            if (parse_word_list("--tile", optarg, o.tile, 5, &o.n_tiles, tiles, 5, "auto, large, small, tall, pair"))
                return MJ_EXIT_USAGE;
            break;
        case 'q':
            if (parse_quants(optarg, &o)) return MJ_EXIT_USAGE;
            break;
        case 'c': o.check = 1; break;
        case 'X': o.extras = 1; break;
        case 'T': {
            const char *one[1];
            int n = 0;
            if (parse_word_list("--layer-routing", optarg, one, 1, &n, routings, 6,
                                "renormalize, softmax_topk, sigmoid_topk, sigmoid_renorm, deepseek_v3, llama4"))
                return MJ_EXIT_USAGE;
            o.layer_routing = one[0];
            break;
        }
        case 'N': o.reference = 0; break;
        case 'L': o.list_specs = 1; break;
        case 'o':
            if (!strcmp(optarg, "all")) {
                for (int i = 0; i < 6; i++) o.routing[i] = routings[i];
                o.n_routings = 6;
            } else if (parse_word_list("--routing", optarg, o.routing, 6, &o.n_routings, routings, 6,
                                       "renormalize, softmax_topk, sigmoid_topk, sigmoid_renorm, deepseek_v3, "
                                       "llama4, all"))
                return MJ_EXIT_USAGE;
            break;
        case 'n': o.time = 0; break;
        case 'j': o.json = optarg; break;
        case 'a': o.append = optarg; break;
        case 'C': o.commit = optarg; break;
        case 'd': o.cubin_dir = optarg; break;
        case 'r':
            if ((o.rotate = (int)cli_parse_count("--rotate", optarg, 64)) < 1) return MJ_EXIT_USAGE;
            break;
        case 'R':
            if ((o.reps = (int)cli_parse_count("--reps", optarg, 64)) < 1) return MJ_EXIT_USAGE;
            break;
        case 'w':
        case 'p': {
            char *end = NULL;
            double v = strtod(optarg, &end);
            if (!end || *end || !(v > 0) || !isfinite(v)) {
                cli_error("bench layer: %s: expected a positive number, got '%s'", c == 'w' ? "--bw" : "--peak",
                          optarg);
                return MJ_EXIT_USAGE;
            }
            if (c == 'w') o.bw = v;
            else o.peak = v;
            break;
        }
        case 'h': fputs(usage, stdout); return MJ_EXIT_OK;
        case ':': cli_error("bench layer: option '%s' needs a value", argv[optind - 1]); return MJ_EXIT_USAGE;
        default: cli_error("bench layer: unknown option '%s' (see --help)", argv[optind - 1]); return MJ_EXIT_USAGE;
        }
    }
    if (optind != argc) {
        cli_error("bench layer: unexpected argument '%s'", argv[optind]);
        return MJ_EXIT_USAGE;
    }
    if (!o.reference && !o.check) {
        cli_error("bench layer: --no-reference: applies to --check only (add --check)");
        return MJ_EXIT_USAGE;
    }

    if (o.list_specs) {
        int unused = 0;
        if (o.check && o.reference) reference_checks(NULL, NULL, &o, &unused);
        for (int q = 0; q < o.n_quants; q++)
            for (int i = 0; i < o.n_shapes; i++) {
                variant v[16];
                char skip[512];
                const int nv = shape_variants(&o, &shapes[o.shape[i]], o.quant[q], v, &unused, skip, sizeof skip);
                if (skip[0]) fprintf(stderr, "bench layer: %s skipped in %s: %s\n", shapes[o.shape[i]].name,
                                     o.quant[q]->name, skip);
                for (int j = 0; j < nv; j++) printf("%s\n", v[j].text);
            }
        return fflush(stdout) == 0 ? MJ_EXIT_OK : MJ_EXIT_FAIL;
    }

    mj_gpu g;
    moejit_status st = mj_gpu_open(0, &g);
    if (st != MOEJIT_OK) return cli_fail(st, "bench layer: needs a CUDA device");
    printf("device: %s (sm_%d%d)\n", g.name, g.cc_major, g.cc_minor);
    gpu_telemetry tel;
    gpu_telemetry_open(&g, &tel);
    if (!tel.lib) printf("bench layer: no NVML (libnvidia-ml.so.1): the SM clock column says -\n");
    moejit_context *ctx = NULL;
    bench_fill fill;
    memset(&fill, 0, sizeof fill);
    CUstream stream = NULL;
    int rc = MJ_EXIT_OK, failed = 0, n_rows = 0;
    row *rows = calloc((size_t)o.n_shapes * (size_t)o.n_batches * 16 * (size_t)o.n_quants, sizeof *rows);
    if (!rows) return cli_fail(MOEJIT_ERR_OUT_OF_MEMORY, "bench layer");
    if ((st = moejit_context_create(NULL, &ctx)) != MOEJIT_OK || (st = bench_fill_init(&fill)) != MOEJIT_OK) {
        rc = cli_fail(st, "bench layer: setup");
        goto done;
    }
    CUresult r = g.d->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING);
    if (r != CUDA_SUCCESS) {
        rc = cli_fail(mj_cuda_fail(g.d, r, "cuStreamCreate"), "bench layer");
        goto done;
    }
    if (o.check && o.reference) {
        int n = reference_checks(&g, ctx, &o, &failed);
        printf("reference checks: %d run, %d failed\n", n, failed);
    }
    for (int q = 0; q < o.n_quants; q++)
        for (int i = 0; i < o.n_shapes; i++) {
            st = run_shape(&g, ctx, &fill, &o, &shapes[o.shape[i]], o.quant[q], rows, &n_rows, &failed, stream, &tel);
            if (st != MOEJIT_OK) {
                rc = cli_fail(st, "bench layer");
                failed++;
            }
        }
    if (o.time && n_rows) {
        printf("\n");
        print_table(stdout, rows, n_rows);
        if (o.json && write_json(&o, rows, n_rows, &g)) rc = MJ_EXIT_FAIL;
        if (o.append && append_markdown(&o, rows, n_rows, &g)) rc = MJ_EXIT_FAIL;
    }
    printf("bench layer: %d rows timed; checks: %d failed\n", n_rows, failed);
    if (failed && rc == MJ_EXIT_OK) rc = MJ_EXIT_FAIL;
done:
    if (stream) g.d->cuStreamDestroy(stream);
    bench_fill_free(&fill);
    moejit_context_destroy(ctx);
    gpu_telemetry_close(&tel);
    free(rows);
    return rc;
}
