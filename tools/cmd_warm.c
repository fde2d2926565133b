/*
 * This file contains `moejit warm`: ahead-of-time compiles into the disk cache, from specs,
 * presets and manifests, for one or several archs. The plan (plan.c) expands and deduplicates
 * them and finds what the cache holds already; the rest goes to the library's moejit_warm on a
 * compile-only context (it never loads a kernel nor opens the CUDA driver), `--jobs` compiles
 * at a time, each in its own worker process. What is already cached is skipped, what no backend
 * supports yet is listed and skipped, and a failed compile keeps its inputs and log in
 * <cache>/failed/<key>/ (the library writes it) without stopping the others.
 */
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen/layer_modules.h"
#include "tools/cli.h"
#include "tools/json_out.h"
#include "tools/plan.h"
#include "tools/presets.h"
#include "tools/progress_bar.h"

#define MAX_ARCHS 16
#define MAX_JOBS 256 /* moejit_warm's limit */

static const char warm_usage[] =
    "usage: moejit warm [SPEC...] [--preset NAME[,NAME...]] [--manifest FILE] [options]\n"
    "\n"
    "Compiles kernels into the disk cache ahead of time (a container build, a build farm\n"
    "without GPUs, or the node itself before the server starts). The specs from the\n"
    "arguments, presets and manifests are crossed with the archs, deduplicated, and whatever\n"
    "the cache already holds is skipped. Specs no backend supports yet are listed and\n"
    "skipped. A failed compile keeps its spec, source, options and log in\n"
    "<cache>/failed/<key>/ and does not stop the others. Nothing is loaded on a GPU and the\n"
    "CUDA driver is never opened, so a machine without one warms the same cache.\n"
    "\n"
    "Options:\n"
    "  --preset NAMES     built-in model presets, comma-separated:\n"
    "                     mixtral-8x7b, qwen3-30b-a3b, qwen3-235b-a22b, deepseek-v3, kimi-k2,\n"
    "                     gpt-oss-120b, nemotron-3-nano\n"
    "  --manifest FILE    a JSON manifest (format below); may be repeated\n"
    "  --backend B[,C...] compile each spec for these backends (simt, mma, wgmma, auto)\n"
    "                     instead of its own (presets: auto)\n"
    "  --arch A[,B...]    compile for these archs (sm_80, sm_86, sm_89, sm_90a, sm_100a,\n"
    "                     sm_120a); replaces a SPEC's or preset's arch, adds to a manifest's\n"
    "                     (default: the spec's own arch; presets: native, which needs a GPU)\n"
    "  -j, --jobs N       compiles at a time, each in its own worker process (default: the\n"
    "                     number of online CPUs, at most 256)\n"
    "  --dry-run          list what would be compiled and what is present; compile nothing\n"
    "  --timeout SECONDS  per-compile timeout (default: $MOEJIT_COMPILE_TIMEOUT or 300)\n"
    "  --cache-dir DIR    the cache to warm (default: $MOEJIT_CACHE_DIR, then\n"
    "                     $XDG_CACHE_HOME/moejit, then ~/.cache/moejit)\n"
    "  --json             one JSON object (counts and every spec's outcome) on stdout\n"
    "\n"
    "Manifest:\n"
    "  {\"kernels\": [\n"
    "     {\"spec\": \"quant=bf16,act=swiglu,routing=renormalize\",\n"
    "      \"archs\": [\"sm_90a\", \"sm_80\"],\n"
    "      \"shapes\": [{\"hidden\": 2048, \"inter\": 768, \"experts\": 128, \"topk\": 8}]}]}\n"
    "  \"spec\" is the text form or a JSON spec object; \"archs\" and \"shapes\" are optional;\n"
    "  each entry expands to spec x archs x shapes.\n"
    "\n"
    "Output: one line per spec (present, unsupported, compiled, failed) and a summary; on a\n"
    "terminal also a progress bar with ETA on stderr.\n"
    "Exit status: 0 when everything requested is cached, 1 when a compile failed or a SPEC\n"
    "argument or manifest entry is unsupported (unsupported preset variants are only listed),\n"
    "2 bad usage (unknown option, bad spec, bad value).\n"
    "\n"
    "Examples:\n"
    "  moejit warm --preset qwen3-30b-a3b --arch sm_90a\n"
    "  moejit warm --preset qwen3-30b-a3b,deepseek-v3 --arch sm_90a,sm_80 --jobs 8\n"
    "  moejit warm --manifest kernels.json --dry-run\n"
    "  moejit warm 'quant=fp16,act=relu2,arch=sm_80' --cache-dir /srv/moejit-cache\n";

/* What moejit_warm reported for one plan item it compiled. */
typedef enum warm_outcome_state { NOT_RUN = 0, COMPILED, RACED, FAILED } warm_outcome_state;
typedef struct warm_outcome {
    warm_outcome_state state;
    double seconds;
    char *error;      /* owned, FAILED */
    char *failed_dir; /* owned, FAILED: "" when the library kept none */
} warm_outcome;

typedef struct warm_state {
    cli_plan *plan;
    warm_outcome *outcome;      /* per plan item */
    const moejit_spec **specs;  /* the items to compile, in plan order: moejit_warm's list */
    int *spec_item;             /* index into specs -> plan item */
    int to_compile, steps;      /* specs to compile; their kernels and modules (what can run at once) */
    int compiled, present, failed, unsupported, unsupported_explicit;
    int json;
    cli_progress_bar *bar;      /* NULL unless compiling with stderr on a terminal */
} warm_state;

static void key12(const char *key, char out[13])
{
    snprintf(out, 13, "%.12s", key[0] ? key : "-");
}

static void line(const warm_state *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line(const warm_state *s, const char *fmt, ...)
{
    if (s->json) return;
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fflush(stdout);
}

static void print_failure(const warm_state *s, const cli_plan_item *it, const moejit_warm_result *r)
{
    char k[13];
    key12(it->key, k);
    /* The first line of the error: the whole log is in the failed folder. */
    const char *msg = r->message, *dir = r->failed_dir;
    const char *nl = strchr(msg, '\n');
    const int len = nl ? (int)(nl - msg) : (int)strlen(msg);
    line(s, "failed       %s  %s: %.*s%s%s%s\n", k, it->canonical, len, msg,
         *dir ? " (source, options and log in " : "", dir, *dir ? ")" : "");
}

/* moejit_warm's progress callback: called once per spec, one call at a time. */
static void on_progress(void *user, const moejit_warm_result *r)
{
    warm_state *s = user;
    const int i = s->spec_item[r->index];
    const cli_plan_item *it = &s->plan->items[i];
    warm_outcome *o = &s->outcome[i];
    char k[13];
    key12(it->key, k);
    o->seconds = r->seconds;
    cli_progress_bar_hold(s->bar);
    if (r->status != MOEJIT_OK) {
        s->failed++;
        o->state = FAILED;
        o->error = strdup(r->message);
        o->failed_dir = strdup(r->failed_dir);
        print_failure(s, it, r);
    } else if (!r->compiled) { /* found in the cache after planning */
        s->present++;
        o->state = RACED;
        line(s, "present      %s  %s  (compiled by another process meanwhile)\n", k, it->canonical);
    } else {
        s->compiled++;
        o->state = COMPILED;
        line(s, "compiled     %s  %s  (%.2f s)\n", k, it->canonical, r->seconds);
    }
    cli_progress_bar_release(s->bar, (int)r->done);
}

static const char *state_name(const warm_state *s, int i, int dry_run)
{
    const cli_plan_item *it = &s->plan->items[i];
    if (it->state == CLI_PLAN_UNSUPPORTED) return "unsupported";
    if (it->state == CLI_PLAN_PRESENT) return "present";
    if (dry_run) return "would-compile";
    switch (s->outcome[i].state) {
    case COMPILED: return "compiled";
    case RACED: return "present";
    case FAILED: return "failed";
    default: return "not-run";
    }
}

static int print_json(const warm_state *s, int dry_run, double total, int jobs)
{
    const cli_plan *p = s->plan;
    cJSON *doc = cJSON_CreateObject();
    cli_json_add(doc, "dry_run", cJSON_CreateBool(dry_run));
    cli_json_add(doc, "total", cli_json_int(p->n));
    cli_json_add(doc, "compiled", cli_json_int(s->compiled));
    cli_json_add(doc, "present", cli_json_int(s->present));
    cli_json_add(doc, "unsupported", cli_json_int(s->unsupported));
    cli_json_add(doc, "failed", cli_json_int(s->failed));
    cli_json_add(doc, "to_compile", cli_json_int(dry_run ? s->to_compile : 0));
    cli_json_add(doc, "seconds", cli_json_fixed(total, 3));
    cli_json_add(doc, "kernels_per_second", cli_json_fixed(total > 0 ? s->compiled / total : 0.0, 3));
    cli_json_add(doc, "jobs", cli_json_int(jobs));
    cJSON *items = cli_json_add(doc, "items", cJSON_CreateArray());
    for (int i = 0; i < p->n; i++) {
        const cli_plan_item *it = &p->items[i];
        const warm_outcome *o = &s->outcome[i];
        cJSON *j = cli_json_add(items, NULL, cJSON_CreateObject());
        cli_json_add(j, "spec", cli_json_str(it->canonical));
        cli_json_add(j, "origin", cli_json_str(it->origin));
        cli_json_add(j, "state", cli_json_str(state_name(s, i, dry_run)));
        if (it->key[0]) cli_json_add(j, "key", cli_json_str(it->key));
        if (o->state != NOT_RUN) cli_json_add(j, "seconds", cli_json_fixed(o->seconds, 3));
        if (it->unsupported_reason) cli_json_add(j, "reason", cli_json_str(it->unsupported_reason));
        if (o->error) cli_json_add(j, "error", cli_json_str(o->error));
        if (o->failed_dir && *o->failed_dir) cli_json_add(j, "failed_dir", cli_json_str(o->failed_dir));
    }
    return cli_json_print(doc);
}

/* Counts the plan's verdicts and lists the items the cache lacks as moejit_warm's specs. */
static void collect(warm_state *s)
{
    for (int i = 0; i < s->plan->n; i++) {
        const cli_plan_item *it = &s->plan->items[i];
        if (it->state == CLI_PLAN_UNSUPPORTED) {
            s->unsupported++;
            s->unsupported_explicit += it->explicit_request;
        } else if (it->state == CLI_PLAN_PRESENT) {
            s->present++;
        } else {
            const int modules = mj_layer_module_count(it->spec);
            s->steps += modules > 0 ? modules : 1; /* moejit_warm runs a tensor-core layer's modules at once */
            s->spec_item[s->to_compile] = i;
            s->specs[s->to_compile++] = it->spec;
        }
    }
}

static void print_plan(const warm_state *s, int dry_run, int jobs)
{
    const cli_plan *plan = s->plan;
    char how[48];
    if (dry_run) snprintf(how, sizeof how, "dry run");
    else snprintf(how, sizeof how, "%d job%s", jobs, jobs == 1 ? "" : "s");
    line(s, "warm: %d spec%s: %d to compile, %d already present, %d unsupported (skipped); %s\n", plan->n,
         plan->n == 1 ? "" : "s", s->to_compile, s->present, s->unsupported, how);
    for (int i = 0; i < plan->n; i++) {
        const cli_plan_item *it = &plan->items[i];
        char k[13];
        key12(it->key, k);
        if (it->state == CLI_PLAN_UNSUPPORTED)
            line(s, "unsupported  %-12s  %s  (%s: %s)\n", "-", it->canonical, it->origin, it->unsupported_reason);
        else if (it->state == CLI_PLAN_PRESENT)
            line(s, "present      %s  %s\n", k, it->canonical);
        else if (dry_run)
            line(s, "compile      %s  %s\n", k, it->canonical);
    }
}

/* The library context warm compiles with: compile-only (no device, no driver), every supported
 * tuple (validated on hardware or not: warming runs nothing), and the resolved timeout. */
static int open_context(double timeout_s, moejit_context **ctx)
{
    moejit_options opts = MOEJIT_OPTIONS_INIT;
    opts.compile_only = 1;
    opts.allow_unvalidated = 1;
    opts.compile_timeout_s = timeout_s;
    moejit_status st = moejit_context_create(&opts, ctx);
    return st == MOEJIT_OK ? MJ_EXIT_OK : cli_fail(st, "warm");
}

/* Compiles s's specs through moejit_warm, with the progress bar on a terminal. */
static int compile_specs(warm_state *s, moejit_context *ctx, int jobs)
{
    if (cli_is_tty(stderr)) s->bar = cli_progress_bar_start(s->to_compile);
    size_t failed = 0;
    moejit_status st = moejit_warm(ctx, s->specs, (size_t)s->to_compile, jobs, on_progress, s, &failed);
    cli_progress_bar_stop(s->bar);
    s->bar = NULL;
    /* a spec's failure is in its outcome; a failure of the call itself reported none */
    return st != MOEJIT_OK && failed == 0 ? cli_fail(st, "warm") : MJ_EXIT_OK;
}

static void print_summary(const warm_state *s, int dry_run, double total, int jobs)
{
    const int n = s->plan->n;
    if (dry_run)
        printf("warm --dry-run: %d to compile, %d already present, %d unsupported (skipped), %d total\n",
               s->to_compile, s->present, s->unsupported, n);
    else
        printf("warm: %d compiled, %d already present, %d unsupported (skipped), %d failed, %d total in %.2f s "
               "(%.2f kernels/s, %d job%s)\n",
               s->compiled, s->present, s->unsupported, s->failed, n, total, total > 0 ? s->compiled / total : 0.0,
               jobs, jobs == 1 ? "" : "s");
}

/* The plan's items with their verdicts from the cache (which warm must be able to write). */
static int resolve_plan(cli_plan *plan, int dry_run)
{
    mj_cache *cache = NULL;
    int rc = cli_open_cache(&cache);
    if (rc != MJ_EXIT_OK) return rc;
    const mj_cache_config *cfg = mj_cache_get_config(cache);
    if (!dry_run && cfg->mode != MJ_CACHE_READ_WRITE) {
        cli_error("warm: cache_mode is %s (MOEJIT_CACHE_MODE); warm writes the cache; allowed: read-write",
                  mj_cache_mode_name(cfg->mode));
        rc = MJ_EXIT_USAGE;
    }
    if (rc == MJ_EXIT_OK) rc = cli_plan_resolve(plan, "warm", cache);
    mj_cache_close(cache);
    return rc;
}

static void free_state(warm_state *s)
{
    for (int i = 0; s->outcome && i < s->plan->n; i++) {
        free(s->outcome[i].error);
        free(s->outcome[i].failed_dir);
    }
    free(s->outcome);
    free(s->specs);
    free(s->spec_item);
}

static int warm_run(cli_plan *plan, int jobs, int dry_run, int json, double timeout_s)
{
    const double t0 = cli_now();
    int rc = resolve_plan(plan, dry_run);
    if (rc != MJ_EXIT_OK) return rc;
    warm_state s = {.plan = plan, .json = json};
    s.outcome = calloc((size_t)plan->n + 1, sizeof *s.outcome);
    s.specs = calloc((size_t)plan->n + 1, sizeof *s.specs);
    s.spec_item = calloc((size_t)plan->n + 1, sizeof *s.spec_item);
    if (!s.outcome || !s.specs || !s.spec_item) {
        free_state(&s);
        cli_error("warm: out of memory");
        return MJ_EXIT_FAIL;
    }
    collect(&s);
    if (jobs > s.steps) jobs = s.steps > 0 ? s.steps : 1;
    moejit_context *ctx = NULL;
    if (!dry_run && s.to_compile > 0) rc = open_context(timeout_s, &ctx);
    if (rc == MJ_EXIT_OK) {
        print_plan(&s, dry_run, jobs);
        if (ctx) rc = compile_specs(&s, ctx, jobs);
    }
    moejit_context_destroy(ctx);
    const double total = cli_now() - t0;
    if (rc == MJ_EXIT_OK && json) rc = print_json(&s, dry_run, total, dry_run ? 0 : jobs);
    else if (rc == MJ_EXIT_OK) print_summary(&s, dry_run, total, jobs);
    if (rc == MJ_EXIT_OK) rc = (s.failed || s.unsupported_explicit) ? MJ_EXIT_FAIL : MJ_EXIT_OK;
    free_state(&s);
    return rc;
}

int cmd_warm(int argc, char **argv)
{
    static const struct option long_options[] = {
        {"preset", required_argument, NULL, 'p'},  {"manifest", required_argument, NULL, 'm'},
        {"arch", required_argument, NULL, 'a'},    {"jobs", required_argument, NULL, 'j'},
        {"dry-run", no_argument, NULL, 'n'},       {"timeout", required_argument, NULL, 't'},
        {"cache-dir", required_argument, NULL, 'C'}, {"json", no_argument, NULL, 'J'},
        {"help", no_argument, NULL, 'h'},          {"backend", required_argument, NULL, 'b'},
        {NULL, 0, NULL, 0}};
    cli_strv presets = {0}, manifests = {0};
    cli_plan plan = {0};
    const char *archs[MAX_ARCHS];
    int n_archs = 0, dry_run = 0, json = 0, c, rc = MJ_EXIT_OK;
    long jobs = sysconf(_SC_NPROCESSORS_ONLN);
    double timeout_s = 0;
    if (jobs < 1) jobs = 1;
    if (jobs > MAX_JOBS) jobs = MAX_JOBS;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":hj:", long_options, NULL)) != -1) {
        switch (c) {
        case 'p': cli_strv_push(&presets, optarg); break;
        case 'm': cli_strv_push(&manifests, optarg); break;
        case 'a':
            if ((n_archs = cli_parse_archs("warm: --arch", optarg, archs, MAX_ARCHS)) < 0) rc = MJ_EXIT_USAGE;
            break;
        case 'j': {
            long long v = cli_parse_count("warm: --jobs", optarg, MAX_JOBS);
            if (v < 1) {
                if (v == 0) cli_error("warm: --jobs: expected an integer in 1..%d, got '%s'", MAX_JOBS, optarg);
                rc = MJ_EXIT_USAGE;
            }
            jobs = (long)v;
            break;
        }
        case 'n': dry_run = 1; break;
        case 'b': rc = cli_plan_set_backends(&plan, "warm", optarg); break;
        case 't': {
            char *end = NULL;
            timeout_s = strtod(optarg, &end);
            if (!end || *end || end == optarg || !isfinite(timeout_s) || timeout_s <= 0) {
                cli_error("warm: --timeout: expected a positive number of seconds, got '%s'", optarg);
                rc = MJ_EXIT_USAGE;
            }
            cli_set_setting(MJ_SETTING_COMPILE_TIMEOUT, optarg);
            break;
        }
        case 'C': cli_set_cache_dir(optarg); break;
        case 'J': json = 1; break;
        case 'h':
            fputs(warm_usage, stdout);
            cli_strv_free(&presets), cli_strv_free(&manifests);
            return MJ_EXIT_OK;
        default:
            rc = cli_bad_option("warm", c, argv);
        }
        if (rc != MJ_EXIT_OK) break;
    }
    if (rc == MJ_EXIT_OK && optind >= argc && presets.n == 0 && manifests.n == 0) {
        cli_error("warm: nothing to warm: give SPEC arguments, --preset or --manifest (see moejit warm --help)");
        rc = MJ_EXIT_USAGE;
    }
    if (rc == MJ_EXIT_OK) { /* --timeout, else $MOEJIT_COMPILE_TIMEOUT, else the default: the one table */
        mj_settings *set = malloc(sizeof *set);
        rc = set ? cli_resolve_settings("warm", set) : cli_fail(MOEJIT_ERR_OUT_OF_MEMORY, "warm");
        if (rc == MJ_EXIT_OK) timeout_s = set->compile_timeout_s;
        free(set);
    }
    for (int i = optind; rc == MJ_EXIT_OK && i < argc; i++) {
        char origin[32];
        snprintf(origin, sizeof origin, "argument %d", i - optind + 1);
        rc = cli_plan_add_spec(&plan, "warm", argv[i], origin, 1, archs, n_archs);
    }
    for (int i = 0; rc == MJ_EXIT_OK && i < presets.n; i++)
        rc = cli_plan_add_presets(&plan, "warm", presets.v[i], archs, n_archs);
    for (int i = 0; rc == MJ_EXIT_OK && i < manifests.n; i++)
        rc = cli_plan_add_manifest(&plan, "warm", manifests.v[i], archs, n_archs);
    if (rc == MJ_EXIT_OK) rc = warm_run(&plan, (int)jobs, dry_run, json, timeout_s);
    cli_plan_free(&plan);
    cli_strv_free(&presets);
    cli_strv_free(&manifests);
    return rc;
}
