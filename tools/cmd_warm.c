/*
 * This file contains `moejit warm`: ahead-of-time compiles into the disk cache, from specs,
 * presets and manifests, for one or several archs, with forked workers (warm_pool.c).
 * What is already cached is skipped, what no backend supports yet is listed and skipped,
 * and every failure is kept in <cache>/failed/<key>/ without stopping the others.
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
#include "tools/warm_pool.h"

#define MAX_ARCHS 16
#define MAX_JOBS 256

static const char warm_usage[] =
    "usage: moejit warm [SPEC...] [--preset NAME[,NAME...]] [--manifest FILE] [options]\n"
    "\n"
    "Compiles kernels into the disk cache ahead of time (a container build, a build farm\n"
    "without GPUs, or the node itself before the server starts). The specs from the\n"
    "arguments, presets and manifests are crossed with the archs, deduplicated, and whatever\n"
    "the cache already holds is skipped. Specs no backend supports yet are listed and\n"
    "skipped. A failed compile keeps its spec, source, options and log in\n"
    "<cache>/failed/<key>/ and does not stop the others.\n"
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
    "  -j, --jobs N       worker processes (default: the number of online CPUs)\n"
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

typedef struct warm_state {
    cli_plan *plan;
    int *job_item;          /* job index -> plan item (a tensor-core layer: a job per module) */
    int *pending;           /* per plan item: its jobs not finished yet */
    int *job_count;         /* per plan item: its jobs */
    int *raced;             /* per plan item: its jobs that found their entry published meanwhile */
    int n_jobs, done, to_compile; /* jobs, jobs finished, plan items with jobs */
    int compiled, present, failed, unsupported, unsupported_explicit;
    double *seconds;        /* per plan item */
    char **errors;          /* per plan item */
    char **failed_dirs;     /* per plan item */
    int *outcome;           /* per plan item: 0 none, 1 compiled, 2 present (raced), 3 failed */
    int json, tty;
    double t_start;
    int bar_shown;
} warm_state;

static void key12(const char *key, char out[13])
{
    snprintf(out, 13, "%.12s", key[0] ? key : "-");
}

static void clear_bar(warm_state *s)
{
    if (s->bar_shown) {
        fputs("\r\033[K", stderr);
        s->bar_shown = 0;
    }
}

static void draw_bar(warm_state *s)
{
    if (!s->tty || s->n_jobs == 0) return;
    double el = cli_now() - s->t_start;
    int width = 30, filled = s->n_jobs ? s->done * width / s->n_jobs : width;
    char bar[64];
    for (int i = 0; i < width; i++) bar[i] = i < filled ? '#' : '.';
    bar[width] = '\0';
    char eta[32] = "--:--";
    if (s->done > 0 && s->done < s->n_jobs) {
        double left = el / s->done * (s->n_jobs - s->done);
        snprintf(eta, sizeof eta, "%d:%02d", (int)left / 60, (int)left % 60);
    } else if (s->done == s->n_jobs) {
        snprintf(eta, sizeof eta, "0:00");
    }
    fprintf(stderr, "\r\033[K[%s] %d/%d  %d:%02d elapsed  ETA %s", bar, s->done, s->n_jobs, (int)el / 60,
            (int)el % 60, eta);
    fflush(stderr);
    s->bar_shown = 1;
}

static void line(warm_state *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line(warm_state *s, const char *fmt, ...)
{
    if (s->json) return;
    clear_bar(s);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fflush(stdout);
}

static void on_tick(void *ctx) { draw_bar(ctx); }

static void on_result(void *ctx, const warm_result *r)
{
    warm_state *s = ctx;
    int i = s->job_item[r->job];
    cli_plan_item *it = &s->plan->items[i];
    char k[13];
    key12(it->key, k);
    s->done++;
    s->seconds[i] += r->seconds; /* a tensor-core layer: its modules' times added up */
    s->raced[i] += r->status == MOEJIT_OK && r->present;
    if (r->status != MOEJIT_OK && !s->errors[i]) { /* its first failing module speaks for it */
        s->errors[i] = strdup(r->message);
        s->failed_dirs[i] = strdup(r->failed_dir);
    }
    if (--s->pending[i] > 0) {
        draw_bar(s);
        return;
    }
    if (s->errors[i]) {
        s->failed++;
        s->outcome[i] = 3;
        /* The first line of the error: the whole log is in the failed folder. */
        const char *msg = s->errors[i], *dir = s->failed_dirs[i] ? s->failed_dirs[i] : "";
        const char *nl = strchr(msg, '\n');
        int len = nl ? (int)(nl - msg) : (int)strlen(msg);
        line(s, "failed       %s  %s: %.*s%s%s%s\n", k, it->canonical, len, msg,
             *dir ? " (source, options and log in " : "", dir, *dir ? ")" : "");
    } else if (s->raced[i] == s->job_count[i]) {
        s->present++;
        s->outcome[i] = 2;
        line(s, "present      %s  %s  (compiled by another process meanwhile)\n", k, it->canonical);
    } else {
        s->compiled++;
        s->outcome[i] = 1;
        line(s, "compiled     %s  %s  (%.2f s)\n", k, it->canonical, s->seconds[i]);
    }
    draw_bar(s);
}

static const char *state_name(const warm_state *s, int i, int dry_run)
{
    const cli_plan_item *it = &s->plan->items[i];
    if (it->state == CLI_PLAN_UNSUPPORTED) return "unsupported";
    if (it->state == CLI_PLAN_PRESENT) return "present";
    if (dry_run) return "would-compile";
    switch (s->outcome[i]) {
    case 1: return "compiled";
    case 2: return "present";
    case 3: return "failed";
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
        cJSON *o = cli_json_add(items, NULL, cJSON_CreateObject());
        cli_json_add(o, "spec", cli_json_str(it->canonical));
        cli_json_add(o, "origin", cli_json_str(it->origin));
        cli_json_add(o, "state", cli_json_str(state_name(s, i, dry_run)));
        if (it->key[0]) cli_json_add(o, "key", cli_json_str(it->key));
        if (s->outcome[i]) cli_json_add(o, "seconds", cli_json_fixed(s->seconds[i], 3));
        if (it->unsupported_reason) cli_json_add(o, "reason", cli_json_str(it->unsupported_reason));
        if (s->errors[i]) cli_json_add(o, "error", cli_json_str(s->errors[i]));
        if (s->failed_dirs[i] && *s->failed_dirs[i]) cli_json_add(o, "failed_dir", cli_json_str(s->failed_dirs[i]));
    }
    return cli_json_print(doc);
}

/* The jobs of plan item i, which the cache lacks: its one entry, or each missing module of a
 * tensor-core layer (those present already are not compiled again). */
static int add_item_jobs(warm_state *s, warm_job *wj, int i, mj_cache *cache)
{
    cli_plan_item *it = &s->plan->items[i];
    const int n = mj_layer_module_count(it->spec);
    for (int m = n ? 0 : MJ_LAYER_WHOLE; m < (n ? n : MJ_LAYER_WHOLE + 1); m++) {
        if (n && cli_plan_module_present(cache, it, m)) continue;
        warm_job *j = &wj[s->n_jobs];
        j->spec = it->spec;
        j->module = m;
        moejit_status st = n ? cli_plan_module_key(it, m, j->key) : MOEJIT_OK;
        if (!n) memcpy(j->key, it->key, sizeof j->key);
        if (st != MOEJIT_OK) return cli_fail(st, "warm");
        s->job_item[s->n_jobs++] = i;
        s->job_count[i]++;
    }
    s->pending[i] = s->job_count[i];
    s->to_compile++;
    return MJ_EXIT_OK;
}

static int warm_run(cli_plan *plan, int jobs, int dry_run, int json, double timeout_s)
{
    mj_cache *cache = NULL;
    int rc = cli_open_cache(&cache);
    if (rc != MJ_EXIT_OK) return rc;
    const mj_cache_config *cfg = mj_cache_get_config(cache);
    if (!dry_run && cfg->mode != MJ_CACHE_READ_WRITE) {
        cli_error("warm: cache_mode is %s (MOEJIT_CACHE_MODE); warm writes the cache; allowed: read-write",
                  mj_cache_mode_name(cfg->mode));
        mj_cache_close(cache);
        return MJ_EXIT_USAGE;
    }
    double t0 = cli_now();
    rc = cli_plan_resolve(plan, "warm", cache);
    if (rc != MJ_EXIT_OK) {
        mj_cache_close(cache);
        return rc;
    }

    warm_state s = {0};
    s.plan = plan;
    s.json = json;
    s.tty = !dry_run && cli_is_tty(stderr);
    const size_t max_jobs = (size_t)plan->n * MJ_LAYER_MODULES_MAX + 1; /* a job per module at most */
    s.job_item = calloc(max_jobs, sizeof *s.job_item);
    s.pending = calloc((size_t)plan->n + 1, sizeof *s.pending);
    s.job_count = calloc((size_t)plan->n + 1, sizeof *s.job_count);
    s.raced = calloc((size_t)plan->n + 1, sizeof *s.raced);
    s.seconds = calloc((size_t)plan->n + 1, sizeof *s.seconds);
    s.errors = calloc((size_t)plan->n + 1, sizeof *s.errors);
    s.failed_dirs = calloc((size_t)plan->n + 1, sizeof *s.failed_dirs);
    s.outcome = calloc((size_t)plan->n + 1, sizeof *s.outcome);
    warm_job *wj = calloc(max_jobs, sizeof *wj);
    if (!s.job_item || !s.pending || !s.job_count || !s.raced || !s.seconds || !s.errors || !s.failed_dirs ||
        !s.outcome || !wj) {
        cli_error("warm: out of memory");
        rc = MJ_EXIT_FAIL;
        goto done;
    }
    for (int i = 0; i < plan->n; i++) {
        cli_plan_item *it = &plan->items[i];
        char k[13];
        key12(it->key, k);
        if (it->state == CLI_PLAN_UNSUPPORTED) {
            s.unsupported++;
            s.unsupported_explicit += it->explicit_request;
        } else if (it->state == CLI_PLAN_PRESENT) {
            s.present++;
        } else if ((rc = add_item_jobs(&s, wj, i, cache)) != MJ_EXIT_OK) {
            goto done;
        }
    }
    mj_cache_close(cache); /* the workers open their own, after the fork */
    cache = NULL;
    if (jobs > s.n_jobs) jobs = s.n_jobs > 0 ? s.n_jobs : 1;
    char how[48];
    if (dry_run) snprintf(how, sizeof how, "dry run");
    else snprintf(how, sizeof how, "%d worker%s", jobs, jobs == 1 ? "" : "s");
    line(&s, "warm: %d spec%s: %d to compile, %d already present, %d unsupported (skipped); %s\n", plan->n,
         plan->n == 1 ? "" : "s", s.to_compile, s.present, s.unsupported, how);
    for (int i = 0; i < plan->n; i++) {
        cli_plan_item *it = &plan->items[i];
        char k[13];
        key12(it->key, k);
        if (it->state == CLI_PLAN_UNSUPPORTED)
            line(&s, "unsupported  %-12s  %s  (%s: %s)\n", "-", it->canonical, it->origin, it->unsupported_reason);
        else if (it->state == CLI_PLAN_PRESENT)
            line(&s, "present      %s  %s\n", k, it->canonical);
        else if (dry_run)
            line(&s, "compile      %s  %s\n", k, it->canonical);
    }

    s.t_start = cli_now();
    if (!dry_run && s.n_jobs > 0) {
        draw_bar(&s);
        moejit_status st = warm_pool_run(wj, s.n_jobs, jobs, timeout_s, on_result, s.tty ? on_tick : NULL, &s);
        clear_bar(&s);
        if (st != MOEJIT_OK) {
            rc = cli_fail(st, "warm");
            goto done;
        }
    }
    double total = cli_now() - t0;
    if (json) {
        if ((rc = print_json(&s, dry_run, total, dry_run ? 0 : jobs)) != MJ_EXIT_OK) goto done;
    } else if (dry_run) {
        printf("warm --dry-run: %d to compile, %d already present, %d unsupported (skipped), %d total\n", s.to_compile,
               s.present, s.unsupported, plan->n);
    } else {
        printf("warm: %d compiled, %d already present, %d unsupported (skipped), %d failed, %d total in %.2f s "
               "(%.2f kernels/s, %d job%s)\n",
               s.compiled, s.present, s.unsupported, s.failed, plan->n, total, total > 0 ? s.compiled / total : 0.0,
               jobs, jobs == 1 ? "" : "s");
    }
    rc = (s.failed || s.unsupported_explicit) ? MJ_EXIT_FAIL : MJ_EXIT_OK;
done:
    for (int i = 0; i < plan->n; i++) {
        if (s.errors) free(s.errors[i]);
        if (s.failed_dirs) free(s.failed_dirs[i]);
    }
    mj_cache_close(cache);
    free(s.job_item), free(s.pending), free(s.job_count), free(s.raced), free(s.seconds), free(s.errors), free(s.failed_dirs), free(s.outcome), free(wj);
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
