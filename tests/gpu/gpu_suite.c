/*
 * This file contains the GPU suite's main(): the command line, the concurrent compiles (of a
 * tensor-core layer, the modules its entry's cases take), the loop that runs every entry's
 * cases as its kernel becomes ready, the negative controls and the summary. What runs is in
 * suite_matrix.c; how one case is made, run and checked is in suite_case.c.
 *
 * Parts (all by default):
 *   activations  every activation × {bf16, fp16} × {softmax_topk, renormalize, precomputed} on six
 *           shapes (T up to 1000, an EP shard, a CUDA-graph replay), and 5 controls;
 *   formats      every quantization family (bf16, fp16, fp8_tensor with each fp8_act, fp8_block,
 *           w4a16 with each group and zero_point, mxfp4) × {swiglu, swiglu(1.702,1,7), situ,
 *           relu2, geglu_tanh} × every routing method, with EP shards, biases, W1 layouts,
 *           bf16 logits, deepseek_v3 parameters and per-expert overrides rotating, and 7
 *           controls (nibble order, zero points, group masking, layout, b2, quantization
 *           grouping, zero output);
 *   fuzz    N (200) random configurations from the seed: random format, activation,
 *           routing, layout, bias, EP shard and shape (tensor cores: also the tile, and a sixth
 *           of them at 256..1279 tokens).
 * --backend mma|wgmma runs every part on that backend instead of simt: what it does not support
 * is dropped (fuzz draws are drawn again), the format entries add a case at 300..688 tokens,
 * and the replay also rounds each expert's y and, for 4-bit weights, the dequantized weights
 * to the dtype, as the tensor-core kernels do. wgmma needs an sm_90 device.
 * Every case: outputs poisoned, every element finite, guard bytes intact, error within the
 * contract's bar against the float64 reference and a tighter bar against its replay of the
 * kernel's roundings (suite_case.c says which and why; fp8: less what a value of the
 * intermediate rounded to the other side of a midpoint could move each output, and where a
 * scale's amax sits on one, against either side's replay: the line says "amax side"), a
 * bit-identical rerun with a different workspace poison; on failure the configuration is
 * printed as a --case line.
 *
 *   build/tests/gpu_suite [FILTER] [--only activations|formats|fuzz] [--fuzz N] [--dry-run]
 *   build/tests/gpu_suite --case 'SPEC' 'T=.. H=.. I=.. E=.. k=.. [ep=OFF+LOCAL] [ovr=1] [rbias=1]'
 *   MOEJIT_GPU_SEED=N   repeat a run's inputs and fuzz configurations (the seed is printed)
 *
 * FILTER is a substring of the spec text. --dry-run needs no device: an exact-kernel model
 * stands in (suite_case.c), which checks the suite itself, its bars and its device tensors.
 * Without a driver or device (and no --dry-run) it prints one "no CUDA device: ...; skipping
 * GPU suite" line and exits 0. Otherwise the last line is "N passed, N failed[, N skipped]".
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "codegen/layer_modules.h"
#include "core/status.h"
#include "runtime/context.h"
#include "runtime/path_modules.h"
#include "suite.h"

#define FUZZ_DEFAULT 200

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cpu_count(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 64 ? 64 : (int)n;
}

/* ---- concurrent compiles ------------------------------------------------------------------------ */

/* Kernels compile on a pool of threads (each compile is its own worker process), while the
 * main thread tests the ones already done, in order. */
typedef struct pool {
    entry *e;
    int n, next;
    moejit_context *ctx;
    int sms; /* the device's, for the plans of the entries' cases */
    pthread_mutex_t mu;
    pthread_cond_t cv;
} pool;

/* The modules of a tensor-core layer that e's cases take in decode mode decode (MJ_DECODE_*)
 * on a device of sms SMs, as their forwards plan them (runtime/path_modules.h). The pool
 * builds these and no others: all of a layer's modules cost several times the CPU of the
 * three or four one forward takes, and a forward builds a module it lacks itself, so a mask
 * short of one only moves that compile to the test loop. */
static unsigned entry_modules(const entry *e, int decode, int sms)
{
    unsigned need = 0;
    for (int c = 0; c < e->ncases; c++) {
        const moejit_moe_args a = shape_args(&e->cases[c].s);
        need |= mj_path_modules_needed(e->spec, &a, sms, decode);
    }
    return need;
}

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
        moejit_kernel *k = NULL;
        moejit_status st = MOEJIT_OK;
        double t0 = now_s();
        if (e->spec)
            st = moejit_kernel_get(p->ctx, e->spec, &k);
        /* a tensor-core layer's modules that the cases take, before the eager forward that
         * precedes any graph capture of the same shape */
        if (e->spec && st == MOEJIT_OK && mj_kernel_modules_all(k))
            st = mj_kernel_modules_build(k, entry_modules(e, mj_kernel_knobs(k).decode, p->sms), 2, NULL);
        double dt = now_s() - t0;
        pthread_mutex_lock(&p->mu);
        e->kernel = k;
        e->status = st;
        if (st)
            snprintf(e->error, sizeof e->error, "%s", moejit_last_error());
        e->compile_s = dt;
        e->done = 1;
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
}

/* --dry-run: how many of their layers' modules the entries' cases take on an H200 (132 SMs),
 * which is what the pool would build there; a tensor-core entry with tokens that takes none
 * (its plans would not run) is a failure, tallied in t. */
static void dry_modules(const entry *es, int n, tally *t)
{
    int took = 0, all = 0;
    for (int i = 0; i < n; i++) {
        const entry *e = &es[i];
        if (!e->spec || !mj_layer_module_count(e->spec))
            continue;
        all += mj_layer_module_count(e->spec);
        const unsigned need = entry_modules(e, MJ_DECODE_AUTO, 132);
        for (unsigned m = need; m; m &= m - 1)
            took++;
        int tokens = 0;
        for (int c = 0; c < e->ncases; c++)
            tokens |= e->cases[c].s.T > 0;
        if (tokens && !need) {
            printf("FAIL  %s: its cases' plans take no module of the layer\n", e->label);
            t->failed++;
        }
    }
    if (all)
        printf("modules: the cases take %d of their layers' %d (the compile pool builds those)\n", took, all);
}

static void wait_compiled(pool *p, int i)
{
    pthread_mutex_lock(&p->mu);
    while (!p->e[i].done)
        pthread_cond_wait(&p->cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

/* ---- command line ----------------------------------------------------------------------------------- */

typedef struct options {
    const char *filter;
    int only;       /* -1: every part */
    int fuzz;
    int dry;
    const char *case_spec, *case_shape;
    const char *backend;
} options;

static void usage(FILE *f, const char *argv0)
{
    fprintf(f,
            "usage: %s [FILTER] [--only activations|formats|fuzz] [--fuzz N] [--backend B] [--dry-run]\n"
            "       %s [--dry-run] --case 'SPEC' 'T=.. H=.. I=.. E=.. k=.. [ep=OFF+LOCAL] [ovr=1] [rbias=1]'\n"
            "  FILTER           run only the specs whose text contains it\n"
            "  --only PART      run one part: activations, formats or fuzz\n"
            "  --fuzz N         number of fuzz configurations (default %d)\n"
            "  --backend B      simt (default), mma or wgmma: the backend of every spec\n"
            "  --dry-run        no device: check the suite against an exact-kernel model\n"
            "  --case SPEC SHAPE  rerun one configuration (as a failure prints it)\n"
            "  MOEJIT_GPU_SEED=N  repeat a run's inputs and fuzz configurations\n",
            argv0, argv0, FUZZ_DEFAULT);
}

static int parse_args(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->filter = "";
    o->only = -1;
    o->fuzz = FUZZ_DEFAULT;
    o->backend = "simt";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--only") && i + 1 < argc) {
            const char *p = argv[++i];
            o->only = -2;
            for (int k = 0; k < PART_COUNT; k++)
                if (!strcmp(p, part_names[k]))
                    o->only = k;
            if (o->only == -2) {
                fprintf(stderr, "--only: unknown part '%s'; allowed: activations, formats, fuzz\n", p);
                return -1;
            }
        } else if (!strcmp(a, "--fuzz") && i + 1 < argc) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end || v < 0 || v > 100000) {
                fprintf(stderr, "--fuzz: must be a count 0..100000, got '%s'\n", argv[i]);
                return -1;
            }
            o->fuzz = (int)v;
        } else if (!strcmp(a, "--backend") && i + 1 < argc) {
            o->backend = argv[++i];
            if (strcmp(o->backend, "simt") && strcmp(o->backend, "mma") && strcmp(o->backend, "wgmma")) {
                fprintf(stderr, "--backend: must be simt, mma or wgmma, got '%s'\n", o->backend);
                return -1;
            }
        } else if (!strcmp(a, "--dry-run")) {
            o->dry = 1;
        } else if (!strcmp(a, "--case") && i + 2 < argc) {
            o->case_spec = argv[++i];
            o->case_shape = argv[++i];
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout, argv[0]);
            exit(0);
        } else if (a[0] == '-' && a[1] == '-') {
            fprintf(stderr, "unknown option '%s'\n", a);
            usage(stderr, argv[0]);
            return -1;
        } else {
            o->filter = a;
        }
    }
    return 0;
}

/* --case with --dry-run: the printed spec names arch=native, which needs a device. */
static void dry_arch(char *text, size_t cap)
{
    char *p = strstr(text, "arch=native");
    if (!p)
        return;
    char rest[384];
    snprintf(rest, sizeof rest, "%s", p + strlen("arch=native"));
    snprintf(p, cap - (size_t)(p - text), "arch=sm_90a%s", rest);
}

/* ---- main --------------------------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    options o;
    if (parse_args(argc, argv, &o))
        return 2;
    suite S;
    memset(&S, 0, sizeof S);
    S.dry = o.dry;
    S.arch = o.dry ? "sm_90a" : "native";
    S.backend = o.backend;
    S.argv0 = argv[0];
    S.threads = cpu_count();
    if (!S.dry) {
        moejit_status gst = mj_gpu_open(0, &S.g);
        if (gst == MOEJIT_ERR_NO_DRIVER || gst == MOEJIT_ERR_NO_DEVICE) {
            printf("no CUDA device: %s; skipping GPU suite\n", moejit_last_error());
            return 0;
        }
        if (gst) { /* a device is there but unusable: that is a failure, not a skip */
            printf("FAIL  device 0: %s\n0 passed, 1 failed\n", moejit_last_error());
            return 1;
        }
        /* wgmma is sm_90a's: named, so that the fuzz can check its specs' support unparsed */
        if (!strcmp(S.backend, "wgmma")) {
            if (S.g.cc_major != 9 || S.g.cc_minor != 0) {
                printf("no sm_90 device (%s is sm_%d%d); skipping the wgmma GPU suite\n", S.g.name, S.g.cc_major,
                       S.g.cc_minor);
                return 0;
            }
            S.arch = "sm_90a";
        }
    }
    const char *env = getenv("MOEJIT_GPU_SEED");
    S.seed = env && *env ? strtoull(env, NULL, 0) : ((uint64_t)time(NULL) * 1000003u) ^ (uint64_t)getpid();

    int cap = 80 + 300 + o.fuzz + 1;
    entry *es = calloc((size_t)cap, sizeof *es);
    if (!es) {
        printf("FAIL  out of host memory\n0 passed, 1 failed\n");
        return 1;
    }
    int n = 0;
    tally t = {0};
    if (o.case_spec) {
        entry *e = &es[n++];
        e->part = PART_FUZZ;
        snprintf(e->text, sizeof e->text, "%s", o.case_spec);
        if (S.dry)
            dry_arch(e->text, sizeof e->text);
        snprintf(e->label, sizeof e->label, "case %.240s", e->text);
        if (gcase_parse(o.case_shape, &e->cases[0])) {
            printf("FAIL  --case: cannot read the shape '%s' (want 'T=.. H=.. I=.. E=.. k=.. [ep=OFF+LOCAL] "
                   "[ovr=1] [rbias=1] [graph=1]')\n0 passed, 1 failed\n", o.case_shape);
            return 1;
        }
        e->ncases = 1;
    } else {
        if (o.only < 0 || o.only == PART_ACTIVATIONS)
            n = build_activation_cases(es, n, cap, &S, o.filter);
        if (o.only < 0 || o.only == PART_FORMATS)
            n = build_format_cases(es, n, cap, &S, o.filter);
        if (o.only < 0 || o.only == PART_FUZZ)
            n = build_fuzz(es, n, cap, &S, o.filter, o.fuzz);
    }
    for (int i = 0; i < n; i++) {
        entry *e = &es[i];
        if (moejit_spec_parse(e->text, &e->spec)) {
            snprintf(e->error, sizeof e->error, "spec: %s", moejit_last_error());
            e->spec = NULL;
            continue;
        }
        for (int c = 0; c < e->ncases; c++)
            fit_routing(e->spec, &e->cases[c].s);
    }
    /* a tensor-core backend: the entries it does not support (fp8 or 4-bit with a layout or
     * bias, fp8 on mma) are not its cases; a fuzz draw it does not support is a failure */
    int dropped = 0, kept = 0;
    for (int i = 0; i < n; i++) {
        entry *e = &es[i];
        if (e->spec && e->part != PART_FUZZ && !o.case_spec && moejit_check_support(e->spec) != MOEJIT_OK) {
            moejit_spec_destroy(e->spec);
            dropped++;
            continue;
        }
        es[kept++] = *e;
    }
    n = kept;
    if (dropped)
        printf("%d specs of the activation and format matrices not supported by backend %s: not run\n", dropped,
               S.backend);
    printf("gpu suite%s: %s, %d specs, seed %llu (MOEJIT_GPU_SEED=%llu repeats it)\n", S.dry ? " (dry run)" : "",
           S.dry ? "no device, exact-kernel model" : S.g.name, n, (unsigned long long)S.seed,
           (unsigned long long)S.seed);

    moejit_context *ctx = NULL;
    pool p = {.e = es, .n = n};
    pthread_t tid[64];
    int started = 0;
    pthread_mutex_init(&p.mu, NULL);
    pthread_cond_init(&p.cv, NULL);
    if (!S.dry) {
        if (moejit_context_create(NULL, &ctx)) {
            printf("FAIL  moejit_context_create: %s\n0 passed, 1 failed\n", moejit_last_error());
            return 1;
        }
        CUresult cr = S.g.d->cuStreamCreate(&S.stream, CU_STREAM_NON_BLOCKING);
        if (cr != CUDA_SUCCESS) {
            mj_cuda_fail(S.g.d, cr, "cuStreamCreate");
            printf("FAIL  %s\n0 passed, 1 failed\n", moejit_last_error());
            return 1;
        }
        p.ctx = ctx;
        p.sms = S.g.sms;
        int nthreads = S.threads < n ? S.threads : n;
        for (int i = 0; i < nthreads; i++)
            if (pthread_create(&tid[i], NULL, compile_thread, &p) == 0)
                started++;
        if (!started && n) /* compile here, one by one */
            compile_thread(&p);
    } else {
        for (int i = 0; i < n; i++)
            es[i].done = 1;
        dry_modules(es, n, &t);
    }

    double t0 = now_s(), tpart[PART_COUNT] = {0};
    for (int i = 0; i < n; i++) {
        entry *e = &es[i];
        double ts = now_s();
        wait_compiled(&p, i);
        if (!e->spec) {
            printf("FAIL  %s: %s\n", e->label, e->error);
            t.failed++;
            continue;
        }
        if (!S.dry && e->status) {
            printf("FAIL  %s: compile: %s\n", e->label, e->error);
            e->kernel = NULL;
            t.failed++;
            continue;
        }
        if (!S.dry && !moejit_kernel_is_loaded(e->kernel)) {
            printf("FAIL  %s: compiled but not loaded on the device\n", e->label);
            e->kernel = NULL;
            t.failed++;
            continue;
        }
        result r = {0};
        int failed_case = -1;
        for (int c = 0; c < e->ncases && failed_case < 0; c++)
            if (run_case(&S, e, &e->cases[c], &r))
                failed_case = c;
        if (failed_case < 0) {
            char p90[32] = "";
            if (r.err_p90 > 0)
                snprintf(p90, sizeof p90, "  p90 %.2e", r.err_p90);
            /* "amax side": judged against a side of an ambiguous fp8 amax (suite_case.c: verdict) */
            printf("PASS  %-70s err %.2e  replay %.2e%s%s  (compile %.1f s)\n", e->label, r.err, r.err_replay, p90,
                   r.amax_side ? " (amax side)" : "", e->compile_s);
            t.passed++;
        } else {
            char shape_text[192];
            gcase_format(&e->cases[failed_case], shape_text, sizeof shape_text);
            printf("FAIL  %-70s %s\n", e->label, r.why);
            printf("      rerun: MOEJIT_GPU_SEED=%llu %s%s --case '%s' '%s%s'\n", (unsigned long long)S.seed,
                   argv[0], S.dry ? " --dry-run" : "", e->text, shape_text,
                   e->cases[failed_case].graph ? " graph=1" : "");
            t.failed++;
        }
        tpart[e->part] += now_s() - ts;
    }
    for (int i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    if (!o.case_spec && (o.only < 0 || o.only == PART_ACTIVATIONS))
        controls_activations(&S, es, n, &t);
    if (!o.case_spec && (o.only < 0 || o.only == PART_FORMATS))
        controls_formats(&S, es, n, &t);

    if (t.failed)
        printf("rerun the same inputs: MOEJIT_GPU_SEED=%llu %s%s%s%s '%s'\n", (unsigned long long)S.seed, argv[0],
               S.dry ? " --dry-run" : "", o.only >= 0 ? " --only " : "", o.only >= 0 ? part_names[o.only] : "",
               o.filter);
    printf("time: %.1f s (activations %.1f s, formats %.1f s, fuzz %.1f s)\n", now_s() - t0, tpart[PART_ACTIVATIONS],
           tpart[PART_FORMATS], tpart[PART_FUZZ]);
    if (S.stream)
        S.g.d->cuStreamDestroy(S.stream);
    moejit_context_destroy(ctx);
    for (int i = 0; i < n; i++)
        moejit_spec_destroy(es[i].spec);
    free(es);
    if (t.skipped)
        printf("%d passed, %d failed, %d skipped\n", t.passed, t.failed, t.skipped);
    else
        printf("%d passed, %d failed\n", t.passed, t.failed);
    return t.failed ? 1 : 0;
}
