/*
 * This file contains `moejit demo`, the main job of `make run`: on the embedded default
 * (the Qwen3-30B-A3B expert shape, bf16, SwiGLU) it generates, compiles and loads the layer
 * and reports what a user needs to trust it — canonical spec, key, compile time, kernels
 * and their resources — and, with a GPU, runs T tokens against the float64 CPU reference
 * (reference/reference.c, the same oracle the GPU suite uses) and times the layer.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli.h"
#include "tools/gpu_harness.h"
#include "core/halfconv.h"
#include "reference/reference.h"
#include "runtime/context.h"
#include "core/spec.h"

/* Qwen3-30B-A3B: H 2048, I 768, 128 experts, top-8, SwiGLU, bf16 (docs/PERFORMANCE.md); shared
 * with `moejit bench jit` (cli.c). */
#define default_spec cli_default_spec
/* Arch used when there is no device to ask: the H200 this project targets. */
static const char fallback_arch[] = "sm_90a";

static const char demo_usage[] =
    "usage: moejit demo [--spec SPEC] [--tokens N] [--iters N]\n"
    "\n"
    "Compiles the default layer (" "Qwen3-30B-A3B shape, bf16, SwiGLU, renormalize routing)\n"
    "and prints its canonical spec, key, compile time and kernels. With a CUDA device it also\n"
    "runs N tokens (default 64), prints the error against the float64 CPU reference and the\n"
    "layer's time. The spec must pin hidden, inter, experts and topk.\n"
    "\n"
    "Examples:\n"
    "  moejit demo\n"
    "  moejit demo --tokens 1\n"
    "  moejit demo --spec 'quant=fp16,act=relu2,hidden=2688,inter=1856,experts=128,topk=6'\n";

/* xorshift64*: reproducible inputs on every machine. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static float uniform(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (float)((rng_state * 0x2545f4914f6cdd1dull) >> 40) / (float)(1 << 24) * 2.0f - 1.0f;
}

static float *random_values(size_t n, float scale, mj_dtype dt)
{
    float *v = malloc(n * sizeof *v);
    if (!v) return NULL;
    for (size_t i = 0; i < n; i++) v[i] = mj_half_snap(uniform() * scale, dt);
    return v;
}

/* Runs the layer on the device; returns an exit code. */
static int run_on_device(const mj_gpu *g, moejit_kernel *k, const moejit_spec *spec, int64_t T,
                         int iters)
{
    const mj_driver *d = g->d;
    const int64_t H = spec->hidden, I = spec->inter, E = spec->experts, K = spec->topk;
    const int64_t rows = moejit_activation_is_gated(&spec->act) ? 2 * I : I;
    const mj_dtype dt = spec->dtype;
    int rc = MJ_EXIT_FAIL;
    float *x = random_values((size_t)(T * H), 1.0f, dt);
    float *logits = random_values((size_t)(T * E), 2.0f, MJ_DTYPE_FP32);
    float *w1 = random_values((size_t)(E * rows * H), 1.0f / sqrtf((float)H), dt);
    float *w2 = random_values((size_t)(E * H * I), 1.0f / sqrtf((float)I), dt);
    double *ref = malloc((size_t)(T * H) * sizeof *ref);
    float *out = malloc((size_t)(T * H) * sizeof *out);
    CUdeviceptr dx = 0, dl = 0, dw1 = 0, dw2 = 0, dout = 0, dws = 0;
    CUevent e0 = NULL, e1 = NULL;
    moejit_moe_args a = MOEJIT_MOE_ARGS_INIT;
    size_t ws = 0;
    if (!x || !logits || !w1 || !w2 || !ref || !out) {
        cli_error("demo: out of host memory");
        goto done;
    }
    if (mj_gpu_upload_values(g, x, (size_t)(T * H), dt, &dx) ||
        mj_gpu_upload_values(g, logits, (size_t)(T * E), MJ_DTYPE_FP32, &dl) ||
        mj_gpu_upload_values(g, w1, (size_t)(E * rows * H), dt, &dw1) ||
        mj_gpu_upload_values(g, w2, (size_t)(E * H * I), dt, &dw2) ||
        mj_gpu_alloc(g, (size_t)(T * H) * mj_half_dtype_size(dt), &dout)) {
        rc = cli_fail(MOEJIT_ERR_CUDA, "demo");
        goto done;
    }
    a.num_tokens = T, a.hidden = H, a.inter = I, a.num_experts = E, a.topk = K;
    a.x = (void *)dx, a.router_logits = (void *)dl, a.w1 = (void *)dw1, a.w2 = (void *)dw2;
    a.out = (void *)dout;
    moejit_status st = moejit_workspace_size(k, &a, &ws);
    if (st == MOEJIT_OK && mj_gpu_alloc(g, ws, &dws) != MOEJIT_OK) st = MOEJIT_ERR_CUDA;
    if (st == MOEJIT_OK) st = mj_gpu_poison(g, dout, 0xff, (size_t)(T * H) * mj_half_dtype_size(dt), NULL);
    if (st == MOEJIT_OK) st = moejit_moe_forward(k, &a, (void *)dws, ws, NULL);
    if (st == MOEJIT_OK) st = mj_gpu_sync(g, NULL);
    if (st == MOEJIT_OK) st = mj_gpu_download_values(g, dout, (size_t)(T * H), dt, out);
    if (st != MOEJIT_OK) {
        rc = cli_fail(st, "demo: forward");
        goto done;
    }

    mj_ref_layer L = {0};
    L.num_tokens = T, L.hidden = H, L.inter = I, L.num_experts = E, L.topk = K;
    L.act = &spec->act, L.routing = spec->routing, L.w1_layout = spec->w1_layout, L.dtype = dt;
    L.x = x, L.router_logits = logits, L.w1 = w1, L.w2 = w2;
    st = mj_ref_forward(&L, 8, ref, NULL, 0);
    if (st != MOEJIT_OK) {
        rc = cli_fail(st, "demo: reference");
        goto done;
    }
    double max_err = 0, max_ref = 0;
    int64_t nonfinite = 0;
    for (int64_t i = 0; i < T * H; i++) {
        if (!isfinite(out[i])) nonfinite++;
        max_err = fmax(max_err, fabs((double)out[i] - ref[i]));
        max_ref = fmax(max_ref, fabs(ref[i]));
    }
    double rel = max_ref > 0 ? max_err / max_ref : max_err;
    printf("run:      T=%lld tokens, max |out-ref| = %.3g (%.2e of max|ref|), %lld non-finite\n",
           (long long)T, max_err, rel, (long long)nonfinite);

    /* Time: warm up, then the mean of `iters` back-to-back launches between two events. */
    if (d->cuEventCreate(&e0, CU_EVENT_DEFAULT) || d->cuEventCreate(&e1, CU_EVENT_DEFAULT)) goto done;
    for (int i = 0; i < 3; i++) moejit_moe_forward(k, &a, (void *)dws, ws, NULL);
    d->cuEventRecord(e0, NULL);
    for (int i = 0; i < iters; i++) moejit_moe_forward(k, &a, (void *)dws, ws, NULL);
    d->cuEventRecord(e1, NULL);
    d->cuEventSynchronize(e1);
    float ms = 0;
    d->cuEventElapsedTime(&ms, e0, e1);
    double us = 1000.0 * ms / iters;
    double touched = E * (1.0 - pow(1.0 - (double)K / (double)E, (double)T));
    double bytes = touched * (double)(rows + I) * (double)H * (double)mj_half_dtype_size(dt);
    printf("time:     %.1f us per layer (mean of %d launches), %.2f TB/s effective on weight bytes\n",
           us, iters, bytes / (us * 1e-6) / 1e12);
    rc = (nonfinite == 0 && rel <= 0.05) ? MJ_EXIT_OK : MJ_EXIT_FAIL;
    if (rc != MJ_EXIT_OK) cli_error("demo: the layer's output does not match the CPU reference");
done:
    if (e0) d->cuEventDestroy(e0);
    if (e1) d->cuEventDestroy(e1);
    mj_gpu_free(g, dx), mj_gpu_free(g, dl), mj_gpu_free(g, dw1), mj_gpu_free(g, dw2);
    mj_gpu_free(g, dout), mj_gpu_free(g, dws);
    free(x), free(logits), free(w1), free(w2), free(ref), free(out);
    return rc;
}

/* Each kernel's resources (-1: a module of a path not built yet). */
static void print_kernels(const moejit_kernel *k)
{
    printf("kernels:  %-20s %5s %9s %6s %s\n", "name", "regs", "smem(B)", "stack", "spills(B)");
    for (int i = 0; i < moejit_kernel_count(k); i++) {
        moejit_kernel_resources r;
        if (moejit_kernel_resources_get(k, i, &r) == MOEJIT_OK)
            printf("          %-20s %5d %9d %6d %d/%d\n", r.name, r.registers, r.shared_bytes,
                   r.stack_bytes, r.spill_store_bytes, r.spill_load_bytes);
    }
}

int cmd_demo(int argc, char **argv)
{
    static const struct option long_options[] = {{"spec", required_argument, NULL, 's'},
                                                 {"tokens", required_argument, NULL, 't'},
                                                 {"iters", required_argument, NULL, 'i'},
                                                 {"help", no_argument, NULL, 'h'},
                                                 {NULL, 0, NULL, 0}};
    const char *spec_text = default_spec;
    long long tokens = 64, iters = 20;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", long_options, NULL)) != -1) {
        switch (c) {
        case 's': spec_text = optarg; break;
        case 't':
            if ((tokens = cli_parse_count("--tokens", optarg, 1 << 20)) < 0) return MJ_EXIT_USAGE;
            break;
        case 'i':
            if ((iters = cli_parse_count("--iters", optarg, 100000)) < 1) return MJ_EXIT_USAGE;
            break;
        case 'h': fputs(demo_usage, stdout); return MJ_EXIT_OK;
        default:
            cli_error("demo: unknown option '%s' (see moejit demo --help)", argv[optind - 1]);
            return MJ_EXIT_USAGE;
        }
    }
    if (optind != argc) {
        cli_error("demo: unexpected argument '%s'", argv[optind]);
        return MJ_EXIT_USAGE;
    }

    /* A device decides the arch; without one, compile for the fallback and say so. */
    mj_gpu g = {0};
    moejit_status gst = mj_gpu_open(0, &g);
    char no_gpu[512] = "";
    if (gst != MOEJIT_OK) snprintf(no_gpu, sizeof no_gpu, "%s", moejit_last_error());
    char text[2048];
    int has_arch = strstr(spec_text, "arch=") != NULL;
    snprintf(text, sizeof text, "%s%s%s", spec_text, has_arch ? "" : ",arch=",
             has_arch ? "" : (gst == MOEJIT_OK ? "native" : fallback_arch));
    if (gst == MOEJIT_OK) printf("device:   %s (sm_%d%d)\n", g.name, g.cc_major, g.cc_minor);
    else printf("device:   no CUDA device (%s): compiling for %s, nothing will run\n", no_gpu,
                has_arch ? "the spec's arch" : fallback_arch);

    moejit_spec *spec = NULL;
    moejit_status st = moejit_spec_parse(text, &spec);
    if (st != MOEJIT_OK) return cli_fail(st, "demo: spec");
    if (!spec->hidden || !spec->inter || !spec->experts || !spec->topk) {
        cli_error("demo: the spec must pin hidden, inter, experts and topk");
        moejit_spec_destroy(spec);
        return MJ_EXIT_USAGE;
    }
    printf("spec:     %s\n", moejit_spec_canonical(spec));
    moejit_context *ctx = NULL;
    moejit_kernel *k = NULL;
    int rc = MJ_EXIT_OK;
    if ((st = moejit_context_create(NULL, &ctx)) != MOEJIT_OK ||
        (st = moejit_kernel_get(ctx, spec, &k)) != MOEJIT_OK) {
        rc = cli_fail(st, "demo");
        goto done;
    }
    printf("key:      %s\n", moejit_kernel_key(k));
    /* a tensor-core layer compiles per path: its first forward builds the modules it takes */
    const int per_path = k->n_modules > 0;
    if (per_path)
        printf("compile:  per path: the first forward of a batch size compiles (or loads) its modules\n");
    else if (moejit_kernel_compile_seconds(k) > 0)
        printf("compile:  %.3f s (NVRTC, in a worker process)\n", moejit_kernel_compile_seconds(k));
    else
        printf("compile:  none (loaded from the disk cache)\n");
    if (!per_path) print_kernels(k);
    if (gst != MOEJIT_OK || !moejit_kernel_is_loaded(k)) {
        printf("run:      skipped: no CUDA device\n");
        goto done;
    }
    rc = run_on_device(&g, k, spec, tokens, (int)iters);
    if (per_path) { /* what the forward built: its modules' kernels (the others show -1) */
        printf("compile:  %.3f s for the modules of this batch size\n", moejit_kernel_compile_seconds(k));
        print_kernels(k);
    }
done:
    moejit_context_destroy(ctx);
    moejit_spec_destroy(spec);
    return rc;
}
