/*
 * This file contains `moejit bench jit`: the JIT's three costs for one spec (the demo's
 * default layer, arch sm_90a unless --arch), measured the way a serving process meets them:
 *
 *  cold compile   a fresh process with an empty cache directory: moejit_kernel_get from
 *                 call to return (emit, key, lock, NVRTC in its worker, publish, load); for a
 *                 tensor-core layer, then the modules the first forward (--tokens) takes, as
 *                 that forward builds them, so the figure is the time until it can run; and
 *                 once more every module of the layer (its whole compile, wall and CPU);
 *  disk load      a fresh process with the cache filled: moejit_kernel_get from call to
 *                 return, after the driver and primary context were made (they cost ~100 ms
 *                 once per process whatever moejit does, so they are excluded);
 *  in-process hit the same call again in a process that has the kernel, in batches.
 *
 * Fresh processes are this binary re-executed with the hidden `bench jit --child`. Each figure
 * is the median of several runs. --append adds a row to docs/PERFORMANCE.md's JIT table.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tools/bench_layer.h"
#include "tools/bench_remote.h"
#include "tools/cli.h"
#include "tools/gpu_harness.h"
#include "tools/json_out.h"
#include "codegen/layer_modules.h"
#include "core/settings.h"
#include "core/spec.h"
#include "runtime/context.h"
#include "runtime/path_modules.h"

extern char **environ;

#define MAX_RUNS 101
#define HIT_BATCH 1000
#define ROW_MARKER "<!-- bench-jit:end -->"

static const char bench_usage[] =
    "usage: moejit bench jit [--arch A] [--spec SPEC] [--backend LIST] [--cold N] [--loads N] [--hits N]\n"
    "                        [--append] [--doc FILE] [--commit STR] [--device STR] [--json]\n"
    "\n"
    "Measures the JIT's costs for one spec (default: the demo's layer, Qwen3-30B-A3B bf16\n"
    "SwiGLU, for sm_90a):\n"
    "  cold compile    moejit_kernel_get in a fresh process with an empty cache directory (wall\n"
    "                  time, and the CPU seconds of that process and its compile workers); a\n"
    "                  tensor-core layer's includes the modules its first forward takes (of\n"
    "                  --tokens tokens), and its whole layer (every module) is measured too\n"
    "  disk load       the same in a fresh process with the entries on disk, excluding\n"
    "                  driver and context creation (with a GPU it includes the module load)\n"
    "  in-process hit  moejit_kernel_get of a kernel the context holds (ns per call)\n"
    "Each figure is the median over the runs. Temporary cache directories are removed after.\n"
    "\n"
    "Options:\n"
    "  --arch A         the spec's arch (default sm_90a)\n"
    "  --spec SPEC      another spec (its arch is replaced by --arch when given)\n"
    "  --backend LIST   measure the spec on each of these backends (simt, mma, wgmma, auto)\n"
    "  --cold N         cold compiles, each in a new empty cache (default 3)\n"
    "  --loads N        fresh-process disk loads (default 9)\n"
    "  --hits N         in-process hits (default 100000, in batches of 1000)\n"
    "  --tokens N       the first forward's batch (tensor-core layers; default 1)\n"
    "  --append         add a row to the JIT table of --doc (default docs/PERFORMANCE.md)\n"
    "  --commit STR     the commit the row is for (e.g. `git rev-parse --short HEAD`)\n"
    "  --device STR     the machine the row is for (default: the GPU's name, or \"no GPU\")\n"
    "  --json           the results as one JSON object\n"
    "\n"
    "Examples:\n"
    "  moejit bench jit\n"
    "  moejit bench jit --append --commit $(git rev-parse --short HEAD) --device 'H200, 16 cores'\n";

typedef struct bench_opts {
    const char *arch, *spec, *doc, *commit, *device;
    const char *backend;  /* replaces the spec's backend; NULL: the spec's own */
    int cold, loads, hits, append, json;
    int keep_arch;      /* --spec without --arch: the spec's own arch */
    int tokens;         /* the first forward's batch (tensor-core layers) */
} bench_opts;

typedef struct sample {
    double get_s;       /* moejit_kernel_get, seconds */
    double cpu_s;       /* user + system seconds of the process and the workers it waited for */
    double compile_s;   /* the kernel's own compile time (0 from the disk cache) */
    int loaded;         /* 1: loaded on a device */
} sample;

/* ---- the child: one moejit_kernel_get in a fresh process ------------------------------------- */

/* The modules a first forward of `tokens` tokens takes (the layer's shape where the spec pins it,
 * else Qwen3-30B-A3B's), as moejit_moe_forward builds them; tokens < 0: every module. */
static moejit_status first_forward_modules(moejit_kernel *k, int tokens, int sms)
{
    if (!k->n_modules) return MOEJIT_OK;
    const moejit_spec *s = k->spec;
    moejit_moe_args a = MOEJIT_MOE_ARGS_INIT;
    a.num_tokens = tokens, a.hidden = s->hidden ? s->hidden : 2048, a.inter = s->inter ? s->inter : 768;
    a.num_experts = s->experts ? s->experts : 128, a.topk = s->topk ? s->topk : 8;
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    const unsigned need = tokens < 0 ? mj_kernel_modules_all(k) : mj_path_modules_needed(s, &a, sms, MJ_DECODE_AUTO);
    return mj_kernel_modules_build(k, need, tokens < 0 ? (int)(cpus > 1 ? cpus : 1) : MJ_LAYER_MODULES_MAX, NULL);
}

static int child(const char *spec_text, int tokens)
{
    moejit_spec *spec = NULL;
    if (cli_spec_parse(spec_text, &spec) != MOEJIT_OK) return cli_fail(MOEJIT_ERR_INVALID_ARGUMENT, "bench child");
    mj_gpu g;
    /* driver + primary context, when there is a GPU: not timed */
    const int sms = mj_gpu_open(0, &g) == MOEJIT_OK ? g.sms : MJ_GEMM_PLAN_SMS_UNKNOWN;
    moejit_context *ctx = NULL;
    moejit_status st = moejit_context_create(NULL, &ctx);
    if (st != MOEJIT_OK) return cli_fail(st, "bench child");
    moejit_kernel *k = NULL;
    double t0 = cli_now();
    st = moejit_kernel_get(ctx, spec, &k);
    if (st == MOEJIT_OK) st = first_forward_modules(k, tokens, sms);
    double t1 = cli_now();
    if (st != MOEJIT_OK) return cli_fail(st, "bench child");
    printf("get_s %.9f compile_s %.6f loaded %d\n", t1 - t0, moejit_kernel_compile_seconds(k), moejit_kernel_is_loaded(k));
    moejit_context_destroy(ctx);
    moejit_spec_destroy(spec);
    return MJ_EXIT_OK;
}

/* Runs `moejit bench jit --child --spec S --tokens T` (T < 0: every module) with
 * MOEJIT_CACHE_DIR=dir; fills *out. */
static int run_child(const char *spec, int tokens, const char *dir, sample *out)
{
    char tok[32];
    snprintf(tok, sizeof tok, "%d", tokens);
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return 0;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    char *argv[] = {"moejit", "bench", "jit", "--child", "--spec", (char *)spec, "--tokens", tok, NULL};
    setenv("MOEJIT_CACHE_DIR", dir, 1);
    pid_t pid;
    int rc = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    char buf[256] = "";
    size_t got = 0;
    ssize_t n;
    while (rc == 0 && got < sizeof buf - 1 && (n = read(fds[0], buf + got, sizeof buf - 1 - got)) != 0) {
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) break;
        got += (size_t)n;
    }
    buf[got] = '\0';
    close(fds[0]);
    int status = 0;
    struct rusage before, after;
    getrusage(RUSAGE_CHILDREN, &before);
    if (rc == 0)
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    getrusage(RUSAGE_CHILDREN, &after);
    /* the child's own CPU and its compile worker's (which it waited for): what the compile cost */
    out->cpu_s = (double)(after.ru_utime.tv_sec - before.ru_utime.tv_sec + after.ru_stime.tv_sec -
                          before.ru_stime.tv_sec) +
                 (double)(after.ru_utime.tv_usec - before.ru_utime.tv_usec + after.ru_stime.tv_usec -
                          before.ru_stime.tv_usec) * 1e-6;
    if (rc != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 0;
    return sscanf(buf, "get_s %lf compile_s %lf loaded %d", &out->get_s, &out->compile_s, &out->loaded) == 3;
}

/* ---- statistics and the temp directories ---------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

static void rm_rf(const char *dir) { nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

static int make_temp_dir(char *out, size_t cap)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(out, cap, "%s/moejit-bench-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    return mkdtemp(out) != NULL;
}

/* A tensor-core layer's every module compiled in a fresh process with an empty cache (compiles
 * in parallel on every CPU, as moejit_warm would): *out, or 0 when the process failed. */
static int whole_layer(const char *spec_text, sample *out)
{
    char dir[4096];
    if (!make_temp_dir(dir, sizeof dir)) return 0;
    const int ok = run_child(spec_text, -1, dir, out) && out->compile_s > 0;
    rm_rf(dir);
    return ok;
}

/* ---- the row in docs/PERFORMANCE.md ------------------------------------------------------------ */

static int append_row(const bench_opts *o, const char *device, double cold_ms, double load_us, int loaded,
                      double hit_ns)
{
    FILE *f = fopen(o->doc, "rb");
    mj_buf doc = MJ_BUF_INIT;
    if (f) {
        char chunk[8192];
        size_t n;
        while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) mj_buf_append(&doc, chunk, n);
        fclose(f);
    }
    time_t now = time(NULL);
    struct tm tm;
    char date[32];
    gmtime_r(&now, &tm);
    strftime(date, sizeof date, "%Y-%m-%d", &tm);
    mj_buf row = MJ_BUF_INIT;
    mj_buf_printf(&row, "| %s | %s | %s | %s | %.0f | %.3f%s | %.0f |\n", date, o->commit ? o->commit : "-", device,
                  o->arch, cold_ms, load_us / 1000.0, loaded ? "" : " (not loaded: no GPU)", hit_ns);
    mj_buf out = MJ_BUF_INIT;
    char *at = doc.data ? strstr(doc.data, ROW_MARKER) : NULL;
    if (at) {
        mj_buf_append(&out, doc.data, (size_t)(at - doc.data));
        mj_buf_append(&out, row.data, row.len);
        mj_buf_puts(&out, at);
    } else {
        if (doc.len) mj_buf_append(&out, doc.data, doc.len);
        mj_buf_append(&out, row.data, row.len);
    }
    int ok = mj_buf_ok(&out);
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", o->doc);
    f = ok ? fopen(tmp, "wb") : NULL;
    ok = f && fwrite(out.data, 1, out.len, f) == out.len;
    if (f && fclose(f) != 0) ok = 0;
    if (ok && rename(tmp, o->doc) != 0) ok = 0;
    if (!ok) cli_error("bench jit: --append: cannot write %s: %s", o->doc, strerror(errno));
    else if (!o->json) printf("appended to %s: %s", o->doc, row.data);
    mj_buf_free(&doc), mj_buf_free(&row), mj_buf_free(&out);
    return ok ? MJ_EXIT_OK : MJ_EXIT_FAIL;
}

/* ---- the benchmark -------------------------------------------------------------------------- */

static int bench(bench_opts *o)
{
    static const char *const fields[] = {"arch", "backend"};
    const char *values[] = {o->arch, o->backend};
    char *spec_text = o->keep_arch ? (o->backend ? cli_spec_with(o->spec, fields + 1, values + 1, 1) : strdup(o->spec))
                                   : cli_spec_with(o->spec, fields, values, o->backend ? 2 : 1);
    moejit_spec *spec = NULL;
    if (!spec_text || cli_spec_parse(spec_text, &spec) != MOEJIT_OK) {
        cli_error("bench jit: %s", spec_text ? moejit_last_error() : "--spec is not a valid JSON object");
        free(spec_text);
        return MJ_EXIT_USAGE;
    }
    o->arch = mj_arch_target(spec->arch);
    moejit_status st = moejit_check_support(spec);
    if (st != MOEJIT_OK) {
        free(spec_text);
        moejit_spec_destroy(spec);
        return cli_fail(st, "bench jit");
    }
    mj_gpu g;
    char device[160];
    if (o->device) snprintf(device, sizeof device, "%s", o->device);
    else if (mj_gpu_open(0, &g) == MOEJIT_OK) snprintf(device, sizeof device, "%s", g.name);
    else snprintf(device, sizeof device, "no GPU");

    double cold[MAX_RUNS], cold_cpu[MAX_RUNS], load[MAX_RUNS], hit_ns = 0;
    int loaded = 0, rc = MJ_EXIT_OK;
    sample whole = {0}; /* a tensor-core layer's every module */
    char dir[4096] = "", old_env[4096] = "";
    const char *env = getenv("MOEJIT_CACHE_DIR");
    if (env) snprintf(old_env, sizeof old_env, "%s", env);
    for (int r = 0; r < o->cold && rc == MJ_EXIT_OK; r++) {
        if (dir[0]) rm_rf(dir);
        sample s;
        if (!make_temp_dir(dir, sizeof dir)) {
            cli_error("bench jit: cannot create a temp directory: %s", strerror(errno));
            rc = MJ_EXIT_FAIL;
        } else if (!run_child(spec_text, o->tokens, dir, &s) || s.compile_s <= 0) {
            cli_error("bench jit: the cold-compile process failed (run `moejit inspect` on the spec)");
            rc = MJ_EXIT_FAIL;
        } else {
            cold[r] = s.get_s;
            cold_cpu[r] = s.cpu_s;
        }
    }
    if (rc == MJ_EXIT_OK && mj_layer_module_count(spec) && !whole_layer(spec_text, &whole)) {
        cli_error("bench jit: the whole-layer compile process failed (run `moejit warm` on the spec)");
        rc = MJ_EXIT_FAIL;
    }
    for (int r = 0; r < o->loads && rc == MJ_EXIT_OK; r++) {
        sample s;
        if (!run_child(spec_text, o->tokens, dir, &s) || s.compile_s != 0) {
            cli_error("bench jit: the disk-load process failed or compiled (%s)", dir);
            rc = MJ_EXIT_FAIL;
        } else {
            load[r] = s.get_s;
            loaded = s.loaded;
        }
    }
    if (rc == MJ_EXIT_OK) {
        moejit_options opts = MOEJIT_OPTIONS_INIT;
        opts.cache_dir = dir;
        moejit_context *ctx = NULL;
        moejit_kernel *k = NULL;
        int batches = (o->hits + HIT_BATCH - 1) / HIT_BATCH;
        double *per = calloc((size_t)(batches ? batches : 1), sizeof *per);
        st = per ? moejit_context_create(&opts, &ctx) : MOEJIT_ERR_OUT_OF_MEMORY;
        if (st == MOEJIT_OK) st = moejit_kernel_get(ctx, spec, &k);
        for (int b = 0; st == MOEJIT_OK && b < batches; b++) {
            double t0 = cli_now();
            for (int i = 0; i < HIT_BATCH; i++) st |= moejit_kernel_get(ctx, spec, &k);
            per[b] = (cli_now() - t0) / HIT_BATCH * 1e9;
        }
        if (st != MOEJIT_OK) rc = cli_fail(st, "bench jit");
        else if (batches) hit_ns = median(per, batches);
        free(per);
        moejit_context_destroy(ctx);
    }
    if (dir[0]) rm_rf(dir);
    if (old_env[0]) setenv("MOEJIT_CACHE_DIR", old_env, 1);
    else unsetenv("MOEJIT_CACHE_DIR");

    if (rc == MJ_EXIT_OK) {
        double cold_ms = o->cold ? median(cold, o->cold) * 1e3 : 0, load_us = o->loads ? median(load, o->loads) * 1e6 : 0;
        double cold_cpu_s = o->cold ? median(cold_cpu, o->cold) : 0;
        if (o->json) {
            cJSON *doc = cJSON_CreateObject();
            cli_json_add(doc, "spec", cli_json_str(moejit_spec_canonical(spec)));
            cli_json_add(doc, "arch", cli_json_str(o->arch));
            cli_json_add(doc, "device", cli_json_str(device));
            cJSON *c = cli_json_add(doc, "cold_compile_ms", cJSON_CreateObject());
            cli_json_add(c, "median", cli_json_fixed(cold_ms, 3));
            cli_json_add(c, "cpu_seconds", cli_json_fixed(cold_cpu_s, 3));
            cli_json_add(c, "runs", cli_json_int(o->cold));
            if (whole.get_s > 0) {
                cli_json_add(c, "tokens", cli_json_int(o->tokens));
                cli_json_add(c, "whole_layer_ms", cli_json_fixed(whole.get_s * 1e3, 3));
                cli_json_add(c, "whole_layer_cpu_seconds", cli_json_fixed(whole.cpu_s, 3));
            }
            cJSON *cs = cli_json_add(c, "samples", cJSON_CreateArray());
            for (int i = 0; i < o->cold; i++) cli_json_add(cs, NULL, cli_json_fixed(cold[i] * 1e3, 3));
            cJSON *l = cli_json_add(doc, "disk_load_us", cJSON_CreateObject());
            cli_json_add(l, "median", cli_json_fixed(load_us, 3));
            cli_json_add(l, "runs", cli_json_int(o->loads));
            cli_json_add(l, "loaded", cJSON_CreateBool(loaded));
            cJSON *ls = cli_json_add(l, "samples", cJSON_CreateArray());
            for (int i = 0; i < o->loads; i++) cli_json_add(ls, NULL, cli_json_fixed(load[i] * 1e6, 3));
            cJSON *h = cli_json_add(doc, "hit_ns", cJSON_CreateObject());
            cli_json_add(h, "median", cli_json_fixed(hit_ns, 1));
            cli_json_add(h, "calls", cli_json_int(o->hits));
            cli_json_add(h, "batch", cli_json_int(HIT_BATCH));
            rc = cli_json_print(doc);
        } else {
            printf("bench jit: %s\n  device: %s\n", moejit_spec_canonical(spec), device);
            printf("  cold compile (fresh process, empty cache):     median %8.1f ms   (%d runs, %.1f..%.1f), "
                   "%.2f CPU s\n",
                   cold_ms, o->cold, o->cold ? cold[0] * 1e3 : 0, o->cold ? cold[o->cold - 1] * 1e3 : 0, cold_cpu_s);
            if (whole.get_s > 0)
                printf("    (the modules of a first forward of %d token%s; every module of the layer: %.1f ms, "
                       "%.2f CPU s)\n",
                       o->tokens, o->tokens == 1 ? "" : "s", whole.get_s * 1e3, whole.cpu_s);
            printf("  disk-cache load (fresh process, no ctx init):  median %8.1f us   (%d runs, %.1f..%.1f)%s\n",
                   load_us, o->loads, o->loads ? load[0] * 1e6 : 0, o->loads ? load[o->loads - 1] * 1e6 : 0,
                   loaded ? ", module loaded" : ", not loaded: no GPU");
            printf("  in-process hit:                                 median %8.1f ns   (%d calls)\n", hit_ns,
                   o->hits);
        }
        if (o->append && rc == MJ_EXIT_OK) rc = append_row(o, device, cold_ms, load_us, loaded, hit_ns);
    }
    free(spec_text);
    moejit_spec_destroy(spec);
    return rc;
}

static int count_opt(const char *name, const char *value, int min, int max, int *out)
{
    long long v = cli_parse_count(name, value, max);
    if (v < min) {
        if (v >= 0) cli_error("%s: expected an integer in %d..%d, got '%s'", name, min, max, value);
        return 0;
    }
    *out = (int)v;
    return 1;
}

int cmd_bench(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "layer")) {
        return cmd_bench_layer(argc - 1, argv + 1);
    }
    if (argc >= 2 && !strcmp(argv[1], "remote")) return cmd_bench_remote(argc - 1, argv + 1);
    if (argc < 2 || (strcmp(argv[1], "jit") && strcmp(argv[1], "--help") && strcmp(argv[1], "-h"))) {
        if (argc < 2) cli_error("bench: expected what to measure: jit or layer (see moejit bench --help)");
        else cli_error("bench: unknown benchmark '%s'; allowed: jit, layer (see moejit bench --help)", argv[1]);
        return MJ_EXIT_USAGE;
    }
    if (strcmp(argv[1], "jit") != 0) {
        fputs(bench_usage, stdout);
        fputs("\nmoejit bench layer --help: the whole-layer benchmark on the device.\n", stdout);
        return MJ_EXIT_OK;
    }
    static const struct option long_options[] = {
        {"arch", required_argument, NULL, 'a'},   {"spec", required_argument, NULL, 's'},
        {"cold", required_argument, NULL, 'c'},   {"loads", required_argument, NULL, 'l'},
        {"hits", required_argument, NULL, 'H'},   {"append", no_argument, NULL, 'A'},
        {"doc", required_argument, NULL, 'd'},    {"commit", required_argument, NULL, 'm'},
        {"device", required_argument, NULL, 'D'}, {"json", no_argument, NULL, 'j'},
        {"child", no_argument, NULL, 'X'},        {"help", no_argument, NULL, 'h'},
        {"backend", required_argument, NULL, 'b'}, {"tokens", required_argument, NULL, 'T'},
        {NULL, 0, NULL, 0}};
    bench_opts o = {"sm_90a", cli_default_spec, "docs/PERFORMANCE.md", NULL, NULL, NULL, 3, 9, 100000, 0, 0, 0, 1};
    const char *backends = NULL;
    int c, is_child = 0, spec_given = 0, arch_given = 0;
    const char *archs[1];
    argc--, argv++;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", long_options, NULL)) != -1) {
        switch (c) {
        case 'a':
            if (cli_parse_archs("bench jit: --arch", optarg, archs, 1) != 1) return MJ_EXIT_USAGE;
            o.arch = archs[0];
            arch_given = 1;
            break;
        case 's': o.spec = optarg, spec_given = 1; break;
        case 'c': if (!count_opt("bench jit: --cold", optarg, 1, MAX_RUNS, &o.cold)) return MJ_EXIT_USAGE; break;
        case 'l': if (!count_opt("bench jit: --loads", optarg, 1, MAX_RUNS, &o.loads)) return MJ_EXIT_USAGE; break;
        case 'H': if (!count_opt("bench jit: --hits", optarg, 1, 100000000, &o.hits)) return MJ_EXIT_USAGE; break;
        case 'A': o.append = 1; break;
        case 'd': o.doc = optarg; break;
        case 'm': o.commit = optarg; break;
        case 'D': o.device = optarg; break;
        case 'j': o.json = 1; break;
        case 'X': is_child = 1; break;
        case 'b': backends = optarg; break;
        case 'T':
            if (!strcmp(optarg, "-1")) o.tokens = -1; /* the child's "every module" */
            else if (!count_opt("bench jit: --tokens", optarg, 1, 1 << 20, &o.tokens)) return MJ_EXIT_USAGE;
            break;
        case 'h': fputs(bench_usage, stdout); return MJ_EXIT_OK;
        default: return cli_bad_option("bench jit", c, argv);
        }
    }
    if (optind != argc) {
        cli_error("bench jit: unexpected argument '%s' (see moejit bench --help)", argv[optind]);
        return MJ_EXIT_USAGE;
    }
    if (is_child) return child(o.spec, o.tokens);
    o.keep_arch = spec_given && !arch_given;
    if (!backends) return bench(&o);
    /* each listed backend in turn, on the same spec otherwise */
    char *list = strdup(backends), *save = NULL;
    int rc = list ? MJ_EXIT_OK : MJ_EXIT_FAIL;
    for (char *b = list ? strtok_r(list, ",", &save) : NULL; b && rc == MJ_EXIT_OK; b = strtok_r(NULL, ",", &save)) {
        if (strcmp(b, "simt") && strcmp(b, "mma") && strcmp(b, "wgmma") && strcmp(b, "auto")) {
            cli_error("bench jit: --backend: unknown backend '%s'; allowed: simt, mma, wgmma, auto", b);
            rc = MJ_EXIT_USAGE;
            break;
        }
        o.backend = b;
        rc = bench(&o);
    }
    free(list);
    return rc;
}
