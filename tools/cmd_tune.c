/*
 * This file contains `moejit tune`: on the GPU, for each model shape, batch and mma-family
 * backend, the whole layer is timed on every GEMM path (tile=large and tile=small, and for
 * wgmma tile=tall and tile=pair; by the CUDA-graph replay of `moejit bench layer`: bench_layer_run.h), the
 * fastest is chosen, and the choices are written as a tuning table (runtime/tune_table.h)
 * that the launch-time heuristic reads from $MOEJIT_TUNE_FILE.
 *
 * Each batch B becomes the bucket max_tokens = B: a forward with T tokens takes the choice of
 * the smallest tuned batch >= T, and T above the largest falls back to the built-in rule.
 * Entries of an existing --out file for other shapes (or backends) are kept; those of the
 * tuned ones are replaced. The file is written beside itself and renamed, so a reader never
 * sees half of it.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/bench_layer.h"
#include "tools/bench_layer_run.h"
#include "tools/cli.h"
#include "templates/common/mma_params.h"
#include "runtime/gemm_plan.h"
#include "runtime/launch_backends.h"
#include "core/spec.h"
#include "runtime/tune_table.h"

#define MAX_SHAPES 16
#define MAX_BATCHES 32
#define DEFAULT_BATCHES "1,8,64,256,512,1024,4096"

static const char usage[] =
    "usage: moejit tune [--shapes LIST] [--batches LIST] [--backend LIST] [--out FILE] [--reps N]\n"
    "\n"
    "On the GPU, times the whole MoE layer of each model shape and batch on every GEMM path of\n"
    "the tensor-core backends (tile=large and tile=small; wgmma also tall and pair; CUDA-graph replay\n"
    "as in `moejit bench layer`), prints the timings with the fastest path and the built-in\n"
    "heuristic's choice, and writes the fastest paths as a tuning table. Point MOEJIT_TUNE_FILE\n"
    "at the table and layers with tile=auto take its choice for T up to each tuned batch (T\n"
    "above the largest: the built-in heuristic).\n"
    "\n"
    "  --shapes LIST    model shapes as in `moejit bench layer` (default qwen3-30b-a3b), or all\n"
    "  --batches LIST   tokens per forward, one bucket each (default " DEFAULT_BATCHES ")\n"
    "  --backend LIST   mma, wgmma (default mma,wgmma; wgmma needs sm_90a)\n"
    "  --out FILE       write the table there, keeping the entries of FILE for other shapes\n"
    "                   (without --out nothing is written)\n"
    "  --reps N         graph replays per timing (default: as many as fit in ~0.25 s, 5..30)\n"
    "\n"
    "Examples:\n"
    "  moejit tune --shapes qwen3-30b-a3b,deepseek-v3 --out ~/.config/moejit/tune.json\n"
    "  MOEJIT_TUNE_FILE=~/.config/moejit/tune.json python serve.py\n"
    "  moejit tune --shapes all --backend wgmma --batches 16,32,64,128 --out tune.json\n";

typedef struct options {
    const bench_model_shape *shape[MAX_SHAPES];
    int n_shapes;
    long long batch[MAX_BATCHES];
    int n_batches;
    mj_backend backend[2];
    int n_backends;
    const char *out;
    int reps;
} options;

/* ---- options ------------------------------------------------------------------------------------ */

/* Calls item(o, word) for each comma-separated word of value; -1 when one is empty or bad. */
static int each_item(const char *value, options *o, int (*item)(options *, const char *))
{
    if (!*value || *value == ',' || value[strlen(value) - 1] == ',' || strstr(value, ",,")) return -1;
    char *copy = strdup(value), *save = NULL;
    int rc = copy ? 0 : -1;
    for (char *w = rc ? NULL : strtok_r(copy, ",", &save); w && !rc; w = strtok_r(NULL, ",", &save))
        rc = item(o, w);
    free(copy);
    return rc;
}

static int add_shape(options *o, const char *w)
{
    for (int i = 0; bench_layer_shape(i); i++) {
        const bench_model_shape *s = bench_layer_shape(i);
        if (!strcmp(w, "all") || !strcmp(w, s->name)) {
            if (o->n_shapes >= MAX_SHAPES) return -1;
            o->shape[o->n_shapes++] = s;
            if (strcmp(w, "all")) return 0;
        }
    }
    return strcmp(w, "all") ? -1 : 0;
}

static int add_batch(options *o, const char *w)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(w, &end, 10);
    if (errno || *end || v < 1 || v > (1 << 20) || o->n_batches >= MAX_BATCHES) return -1;
    o->batch[o->n_batches++] = v;
    return 0;
}

static int add_backend(options *o, const char *w)
{
    mj_backend b = !strcmp(w, "mma") ? MJ_BACKEND_MMA : !strcmp(w, "wgmma") ? MJ_BACKEND_WGMMA : MJ_BACKEND_COUNT;
    if (b == MJ_BACKEND_COUNT || o->n_backends >= 2) return -1;
    o->backend[o->n_backends++] = b;
    return 0;
}

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? -1 : x > y;
}

/* ---- one shape --------------------------------------------------------------------------------- */

typedef struct tune_ctx {
    const mj_gpu *g;
    const bench_layer *layer;
    moejit_moe_args args;
    CUdeviceptr x, logits, ws;
    size_t x_set, logits_set, ws_bytes;
    int sets;
} tune_ctx;

/* Forward i of a graph: input set i (rotated, so L2 holds no inputs between forwards). */
static moejit_status enqueue(void *vctx, int i, CUstream stream)
{
    tune_ctx *c = vctx;
    moejit_moe_args a = c->args;
    int set = i % c->sets;
    a.x = (void *)(c->x + (size_t)set * c->x_set * 2);
    a.router_logits = (void *)(c->logits + (size_t)set * c->logits_set * 4);
    return bench_layer_forward(c->g, c->layer, &a, c->ws, c->ws_bytes, stream);
}

/* Times both paths of every backend on s and appends the choices to table; returns the number
 * of failures (a backend that does not build or time is skipped, the others still run). */
static int tune_shape(const mj_gpu *g, moejit_context *ctx, const bench_fill *fill, const options *o,
                      const bench_model_shape *s, CUstream stream, mj_tune_table *table)
{
    /* the paths in MJ_MMA_PATH order from LARGE; tall and pair only where the backend has them */
    static const char *const tiles[4] = {"large", "small", "tall", "pair"};
    bench_layer L[2][4]; /* [backend][path - 1] */
    int n_tiles[2] = {0, 0};
    int built[2] = {0, 0}, failures = 0;
    memset(L, 0, sizeof L);
    printf("== %s: H %d, I %d, E %d, k %d, %s, bf16\n", s->name, s->hidden, s->inter, s->experts, s->topk, s->act);
    for (int b = 0; b < o->n_backends; b++) {
        moejit_status st = MOEJIT_OK;
        n_tiles[b] = mj_backend_has_tall_and_pair_paths(o->backend[b]) ? 4 : 2;
        for (int t = 0; t < n_tiles[b] && st == MOEJIT_OK; t++) {
            char text[512];
            snprintf(text, sizeof text,
                     "backend=%s,quant=bf16,act=%s,routing=renormalize,hidden=%d,inter=%d,experts=%d,topk=%d,"
                     "arch=native,tile=%s",
                     mj_backend_names[o->backend[b]], s->act, s->hidden, s->inter, s->experts, s->topk, tiles[t]);
            st = bench_layer_build(ctx, text, &L[b][t]);
        }
        if (st != MOEJIT_OK) {
            cli_error("tune: %s %s: %s; skipped", s->name, mj_backend_names[o->backend[b]], moejit_last_error());
            for (int t = 0; t < n_tiles[b]; t++) bench_layer_free(&L[b][t]);
            failures++;
        } else built[b] = 1;
    }

    const bench_layer *any = built[0] ? &L[0][0] : built[1] ? &L[1][0] : NULL;
    if (!any) return failures;
    const long long bmax = o->batch[o->n_batches - 1];
    tune_ctx c;
    memset(&c, 0, sizeof c);
    c.g = g;
    c.sets = bmax >= 1024 ? 4 : 8;
    c.x_set = (size_t)bmax * (size_t)s->hidden, c.logits_set = (size_t)bmax * (size_t)s->experts;
    moejit_moe_args_init(&c.args);
    c.args.hidden = s->hidden, c.args.inter = s->inter, c.args.num_experts = s->experts, c.args.topk = s->topk;
    const int gated = moejit_activation_is_gated(&any->spec->act);
    const size_t nw1 = (size_t)s->experts * (size_t)(gated ? 2 : 1) * (size_t)s->inter * (size_t)s->hidden;
    const size_t nw2 = (size_t)s->experts * (size_t)s->hidden * (size_t)s->inter;
    CUdeviceptr w1 = 0, w2 = 0, out = 0;
    moejit_status st = MOEJIT_OK;
    for (int b = 0; b < o->n_backends && st == MOEJIT_OK; b++)
        for (int t = 0; t < n_tiles[b] && built[b] && st == MOEJIT_OK; t++) {
            moejit_moe_args a = c.args;
            a.num_tokens = bmax;
            a.x = a.router_logits = a.w1 = a.w2 = a.out = (void *)(uintptr_t)256; /* shape-only query */
            size_t need = 0;
            st = bench_layer_workspace(&L[b][t], &a, &need);
            if (need > c.ws_bytes) c.ws_bytes = need;
        }
    if (st == MOEJIT_OK) st = mj_gpu_alloc(g, nw1 * 2, &w1);
    if (st == MOEJIT_OK) st = mj_gpu_alloc(g, nw2 * 2, &w2);
    if (st == MOEJIT_OK) st = mj_gpu_alloc(g, c.x_set * (size_t)c.sets * 2, &c.x);
    if (st == MOEJIT_OK) st = mj_gpu_alloc(g, c.logits_set * (size_t)c.sets * 4, &c.logits);
    if (st == MOEJIT_OK) st = mj_gpu_alloc(g, c.x_set * 2, &out);
    if (st == MOEJIT_OK) st = mj_gpu_alloc(g, c.ws_bytes, &c.ws);
    if (st == MOEJIT_OK) st = bench_fill_run(g, fill, w1, nw1, MJ_DTYPE_BF16, 0x7e11, 1.0f / sqrtf((float)s->hidden), stream);
    if (st == MOEJIT_OK) st = bench_fill_run(g, fill, w2, nw2, MJ_DTYPE_BF16, 0x7e12, 1.0f / sqrtf((float)s->inter), stream);
    if (st == MOEJIT_OK) st = bench_fill_run(g, fill, c.x, c.x_set * (size_t)c.sets, MJ_DTYPE_BF16, 0x7e13, 1.0f, stream);
    if (st == MOEJIT_OK)
        st = bench_fill_run(g, fill, c.logits, c.logits_set * (size_t)c.sets, MJ_DTYPE_FP32, 0x7e14, 2.0f, stream);
    if (st == MOEJIT_OK) st = mj_gpu_sync(g, stream);
    c.args.w1 = (void *)w1, c.args.w2 = (void *)w2, c.args.out = (void *)out;
    if (st != MOEJIT_OK) {
        cli_error("tune: %s: %s", s->name, moejit_last_error());
        failures++;
    }

    for (int b = 0; b < o->n_backends && st == MOEJIT_OK; b++) {
        if (!built[b]) continue;
        const moejit_spec *spec = L[b][0].spec;
        const mj_tune_key key = {o->backend[b], spec->arch, s->hidden, s->inter, s->experts, s->topk, gated,
                                 MJ_DTYPE_BF16};
        for (int bi = 0; bi < o->n_batches && st == MOEJIT_OK; bi++) {
            double us[4] = {0, 0, 0, 0}, spread = 0;
            c.args.num_tokens = o->batch[bi];
            for (int t = 0; t < n_tiles[b] && st == MOEJIT_OK; t++) {
                const char *note = "";
                c.layer = &L[b][t];
                st = bench_time_graph(g, stream, enqueue, &c, c.sets, o->reps, &us[t], &spread, &note, NULL, NULL);
            }
            if (st != MOEJIT_OK) {
                cli_error("tune: %s B=%lld %s: %s", s->name, o->batch[bi], mj_backend_names[o->backend[b]],
                          moejit_last_error());
                failures++;
                st = MOEJIT_OK; /* the next backend may still run */
                break;
            }
            int best = 0;
            for (int t = 1; t < n_tiles[b]; t++)
                if (us[t] < us[best]) best = t;
            const mj_tune_entry e = {key, o->batch[bi], MJ_MMA_PATH_LARGE + best};
            /* what tile=auto takes without a table */
            moejit_moe_args qa = c.args;
            qa.num_tokens = o->batch[bi];
            mj_gemm_plan plan;
            mj_gemm_plan_make(spec, &qa, MJ_GEMM_PLAN_SMS_UNKNOWN, MJ_DECODE_AUTO, &plan);
            const char *heur = mj_mma_path_name(plan.rule_path);
            char tall_us[32] = "-", pair_us[32] = "-";
            if (n_tiles[b] == 4) {
                snprintf(tall_us, sizeof tall_us, "%.1f", us[2]);
                snprintf(pair_us, sizeof pair_us, "%.1f", us[3]);
            }
            printf("| %s | %lld | %s | %.1f | %.1f | %s | %s | %s | %s |\n", s->name, o->batch[bi],
                   mj_backend_names[o->backend[b]], us[0], us[1], tall_us, pair_us, mj_mma_path_name(e.path), heur);
            fflush(stdout);
            if (mj_tune_table_add(table, &e) != MOEJIT_OK) st = MOEJIT_ERR_OUT_OF_MEMORY;
        }
    }
    mj_gpu_free(g, w1), mj_gpu_free(g, w2), mj_gpu_free(g, c.x), mj_gpu_free(g, c.logits);
    mj_gpu_free(g, out), mj_gpu_free(g, c.ws);
    for (int b = 0; b < o->n_backends; b++)
        for (int t = 0; t < n_tiles[b] && built[b]; t++) bench_layer_free(&L[b][t]);
    return failures + (st != MOEJIT_OK);
}

/* ---- the table file ----------------------------------------------------------------------------- */

/* The previous entries whose keys were not tuned now, then the new ones, into path (by rename). */
static int write_merged(const char *path, const mj_tune_table *old, const mj_tune_table *fresh)
{
    mj_tune_table merged;
    memset(&merged, 0, sizeof merged);
    moejit_status st = MOEJIT_OK;
    for (int i = 0; i < old->n && st == MOEJIT_OK; i++) {
        int replaced = 0;
        for (int j = 0; j < fresh->n && !replaced; j++)
            replaced = mj_tune_key_equal(&old->entries[i].key, &fresh->entries[j].key);
        if (!replaced) st = mj_tune_table_add(&merged, &old->entries[i]);
    }
    for (int j = 0; j < fresh->n && st == MOEJIT_OK; j++) st = mj_tune_table_add(&merged, &fresh->entries[j]);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = st == MOEJIT_OK ? fopen(tmp, "w") : NULL;
    int ok = f && mj_tune_table_write(f, &merged) == 0;
    if (f && fclose(f) != 0) ok = 0;
    if (ok && rename(tmp, path) != 0) ok = 0;
    if (!ok) {
        cli_error("tune: --out: cannot write %s: %s", path, strerror(errno));
        if (f) unlink(tmp);
    } else printf("tune: %d entries written to %s (%d of them new)\n", merged.n, path, fresh->n);
    mj_tune_table_free(&merged);
    return ok ? 0 : -1;
}

/* ---- the command ----------------------------------------------------------------------------------- */

int cmd_tune(int argc, char **argv)
{
    static const struct option long_options[] = {
        {"shapes", required_argument, NULL, 's'}, {"batches", required_argument, NULL, 'b'},
        {"backend", required_argument, NULL, 'B'}, {"out", required_argument, NULL, 'o'},
        {"reps", required_argument, NULL, 'R'},    {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    options o;
    memset(&o, 0, sizeof o);
    each_item("qwen3-30b-a3b", &o, add_shape);
    each_item(DEFAULT_BATCHES, &o, add_batch);
    each_item("mma,wgmma", &o, add_backend);
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+:h", long_options, NULL)) != -1) {
        switch (c) {
        case 's':
            o.n_shapes = 0;
            if (each_item(optarg, &o, add_shape) || !o.n_shapes) {
                cli_error("tune: --shapes: bad list '%s'; allowed: the shapes of `moejit bench layer --help`, all",
                          optarg);
                return MJ_EXIT_USAGE;
            }
            break;
        case 'b':
            o.n_batches = 0;
            if (each_item(optarg, &o, add_batch) || !o.n_batches) {
                cli_error("tune: --batches: bad list '%s'; allowed: up to %d token counts in 1..%d", optarg,
                          MAX_BATCHES, 1 << 20);
                return MJ_EXIT_USAGE;
            }
            break;
        case 'B':
            o.n_backends = 0;
            if (each_item(optarg, &o, add_backend) || !o.n_backends) {
                cli_error("tune: --backend: bad list '%s'; allowed: mma, wgmma", optarg);
                return MJ_EXIT_USAGE;
            }
            break;
        case 'o': o.out = optarg; break;
        case 'R':
            if ((o.reps = (int)cli_parse_count("--reps", optarg, 64)) < 1) {
                if (o.reps == 0) cli_error("tune: --reps: expected an integer in 1..64, got '%s'", optarg);
                return MJ_EXIT_USAGE;
            }
            break;
        case 'h': fputs(usage, stdout); return MJ_EXIT_OK;
        case ':': cli_error("tune: option '%s' needs a value", argv[optind - 1]); return MJ_EXIT_USAGE;
        default: cli_error("tune: unknown option '%s' (see --help)", argv[optind - 1]); return MJ_EXIT_USAGE;
        }
    }
    if (optind != argc) {
        cli_error("tune: unexpected argument '%s'", argv[optind]);
        return MJ_EXIT_USAGE;
    }
    /* ascending, without repeats: each batch is the upper end of one bucket */
    qsort(o.batch, (size_t)o.n_batches, sizeof o.batch[0], cmp_ll);
    int nb = 0;
    for (int i = 0; i < o.n_batches; i++)
        if (!nb || o.batch[i] != o.batch[nb - 1]) o.batch[nb++] = o.batch[i];
    o.n_batches = nb;

    /* an existing table that does not parse is not overwritten: its entries would be lost */
    mj_tune_table old, fresh;
    memset(&old, 0, sizeof old), memset(&fresh, 0, sizeof fresh);
    if (o.out && access(o.out, F_OK) == 0 && mj_tune_table_load(o.out, &old) != MOEJIT_OK)
        return cli_fail(MOEJIT_ERR_IO, "tune: --out: the existing table is not valid");

    mj_gpu g;
    if (mj_gpu_open(0, &g) != MOEJIT_OK) {
        cli_error("tune: no CUDA device: %s", moejit_last_error());
        mj_tune_table_free(&old);
        return MJ_EXIT_FAIL;
    }
    printf("device: %s (sm_%d%d)\n", g.name, g.cc_major, g.cc_minor);
    moejit_context *ctx = NULL;
    bench_fill fill;
    memset(&fill, 0, sizeof fill);
    CUstream stream = NULL;
    int rc = MJ_EXIT_OK, failures = 0;
    moejit_status st = moejit_context_create(NULL, &ctx);
    if (st == MOEJIT_OK) st = bench_fill_init(&fill);
    if (st != MOEJIT_OK) {
        rc = cli_fail(st, "tune: setup");
        goto done;
    }
    CUresult r = g.d->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING);
    if (r != CUDA_SUCCESS) {
        rc = cli_fail(mj_cuda_fail(g.d, r, "cuStreamCreate"), "tune");
        goto done;
    }
    printf("| shape | B | backend | large µs | small µs | tall µs | pair µs | fastest | heuristic |\n"
           "|---|---:|---|---:|---:|---:|---:|---|---|\n");
    for (int i = 0; i < o.n_shapes; i++) failures += tune_shape(&g, ctx, &fill, &o, o.shape[i], stream, &fresh);
    if (o.out && fresh.n && write_merged(o.out, &old, &fresh)) rc = MJ_EXIT_FAIL;
    printf("tune: %d choices measured; %d failures\n", fresh.n, failures);
    if (failures && rc == MJ_EXIT_OK) rc = MJ_EXIT_FAIL;
done:
    if (stream) g.d->cuStreamDestroy(stream);
    bench_fill_free(&fill);
    moejit_context_destroy(ctx);
    mj_tune_table_free(&old);
    mj_tune_table_free(&fresh);
    return rc;
}
