/*
 * This file contains `moejit bench remote`: what the remote cache tier costs, against the remote
 * the settings configure (MOEJIT_REMOTE and its key): a remote hit into an empty disk cache in a
 * fresh process (a forked child: new cache directory, new connection) for a synthetic entry of
 * --size bytes, and what a remote that is down adds to a disk hit once its first failure has put
 * it into back-off (the same disk hits timed with and without that remote attached).
 */
#include "tools/bench_remote.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cache/remote.h"
#include "core/key.h"
#include "core/status.h"
#include "tools/cli.h"
#include "tools/json_out.h"

static const char bench_remote_usage[] =
    "usage: moejit bench remote [--size BYTES] [--runs N] [--hits N] [--json]\n"
    "\n"
    "Measures the remote cache tier configured by MOEJIT_REMOTE (with MOEJIT_REMOTE_KEY_FILE\n"
    "or MOEJIT_REMOTE_TRUST=unsigned): a remote hit into an empty disk cache in a fresh\n"
    "process, for one synthetic entry of BYTES (default 2.5M) pushed first; then the cost a\n"
    "remote that is down (127.0.0.1:1) adds to a disk hit after its first failure. Caches are\n"
    "made in a temporary directory and removed.\n"
    "\n"
    "Options:\n"
    "  --size BYTES   the cubin's size (K, M, G suffixes; default 2.5M = 2621440)\n"
    "  --runs N       fresh processes timed (default 20)\n"
    "  --hits N       disk hits timed per variant (default 300)\n"
    "  --json         one JSON document on stdout\n";

typedef struct fake_build {
    size_t size;
    const char *spec;
} fake_build;

static moejit_status fake_build_fn(void *ctx, mj_program *out)
{
    fake_build *b = ctx;
    memset(out, 0, sizeof *out);
    out->cubin = malloc(b->size);
    if (!out->cubin) return mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "bench remote: out of memory");
    unsigned x = 12345u;
    for (size_t i = 0; i < b->size; i++) {
        x = x * 1103515245u + 12345u;
        out->cubin[i] = (uint8_t)(x >> 16);
    }
    out->cubin_len = b->size;
    out->canonical_spec = strdup(b->spec);
    out->arch = strdup("sm_90a");
    out->log = strdup("");
    out->n_kernels = 1;
    snprintf(out->kernels[0].name, MJ_KERNEL_NAME_MAX, "mj_bench");
    return MOEJIT_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double pct(double *v, int n, double p)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    int i = (int)(p * (n - 1) + 0.5);
    return v[i < n ? i : n - 1];
}

static mj_cache *open_cache(const char *dir, const char *lock_dir, const mj_remote_config *rc)
{
    mj_cache_config cfg;
    mj_cache *c = NULL;
    if (mj_cache_config_resolve(NULL, &cfg) != MOEJIT_OK) return NULL;
    snprintf(cfg.dir, sizeof cfg.dir, "%s", dir);
    snprintf(cfg.lock_dir, sizeof cfg.lock_dir, "%s", lock_dir);
    cfg.mode = MJ_CACHE_READ_WRITE;
    if (mj_cache_open_config(&cfg, &c) != MOEJIT_OK) return NULL;
    if (rc) {
        mj_remote *r = NULL;
        if (mj_remote_open(rc, &r, NULL, 0) != MOEJIT_OK || !r) {
            mj_cache_close(c);
            return NULL;
        }
        mj_cache_set_remote(c, r);
    }
    return c;
}

/* One fresh process: an empty cache, a new connection, one lookup that must be a remote hit.
 * Returns the seconds it took, or < 0. */
static double fresh_hit(const char *root, int run, const mj_remote_config *rc, const mj_key *key,
                        const char *preimage, fake_build *b)
{
    int fds[2];
    if (pipe(fds) != 0) return -1;
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        close(fds[0]);
        char dir[600], locks[600];
        snprintf(dir, sizeof dir, "%s/run%d", root, run);
        snprintf(locks, sizeof locks, "%s/locks%d", root, run);
        double t0 = cli_now();
        mj_cache *c = open_cache(dir, locks, rc);
        mj_program p;
        int hit = 0;
        double t = -1;
        if (c && mj_cache_get_or_build(c, key, preimage, b->spec, fake_build_fn, b, &p, &hit) == MOEJIT_OK) {
            t = hit ? cli_now() - t0 : -2;
            mj_program_free(&p);
        }
        if (write(fds[1], &t, sizeof t) != (ssize_t)sizeof t) _exit(1);
        _exit(0); /* the cache's close (counters, connection) is not part of the hit */
    }
    close(fds[1]);
    double t = -1;
    if (read(fds[0], &t, sizeof t) != (ssize_t)sizeof t) t = -1;
    close(fds[0]);
    waitpid(pid, NULL, 0);
    return t;
}

/* Times `hits` disk hits of key on c; fills v (seconds each). */
static int time_hits(mj_cache *c, const mj_key *key, const char *preimage, fake_build *b, int hits, double *v)
{
    for (int i = 0; i < hits; i++) {
        mj_program p;
        int hit = 0;
        double t0 = cli_now();
        if (mj_cache_get_or_build(c, key, preimage, b->spec, fake_build_fn, b, &p, &hit) != MOEJIT_OK || !hit) return 0;
        v[i] = cli_now() - t0;
        mj_program_free(&p);
    }
    return 1;
}

int cmd_bench_remote(int argc, char **argv)
{
    static const struct option long_options[] = {{"size", required_argument, NULL, 's'},
                                                 {"runs", required_argument, NULL, 'r'},
                                                 {"hits", required_argument, NULL, 'H'},
                                                 {"json", no_argument, NULL, 'j'},
                                                 {"help", no_argument, NULL, 'h'},
                                                 {NULL, 0, NULL, 0}};
    int64_t size = 2621440;
    int runs = 20, hits = 300, json = 0, c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", long_options, NULL)) != -1) {
        long long v;
        switch (c) {
        case 's':
            if (mj_settings_parse_size("--size", optarg, &size) != MOEJIT_OK || size > (256LL << 20))
                return cli_fail(MOEJIT_ERR_INVALID_ARGUMENT, "bench remote");
            break;
        case 'r':
            if ((v = cli_parse_count("--runs", optarg, 10000)) < 1) return MJ_EXIT_USAGE;
            runs = (int)v;
            break;
        case 'H':
            if ((v = cli_parse_count("--hits", optarg, 1000000)) < 1) return MJ_EXIT_USAGE;
            hits = (int)v;
            break;
        case 'j': json = 1; break;
        case 'h': fputs(bench_remote_usage, stdout); return MJ_EXIT_OK;
        default: return cli_bad_option("bench remote", c, argv);
        }
    }
    mj_remote_config rc;
    moejit_status st = mj_remote_config_resolve(NULL, cli_settings(), &rc);
    if (st != MOEJIT_OK) return cli_fail(st, "bench remote");
    char why[512];
    mj_remote *probe = NULL;
    if ((st = mj_remote_open(&rc, &probe, why, sizeof why)) != MOEJIT_OK) return cli_fail(st, "bench remote");
    if (!probe) {
        cli_error("bench remote: the remote tier is %s", why);
        return MJ_EXIT_FAIL;
    }
    mj_remote_close(probe);

    char root[512];
    const char *tmp = getenv("TMPDIR");
    snprintf(root, sizeof root, "%s/moejit-bench-remote-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(root)) {
        cli_error("bench remote: cannot create a temporary directory in %s", tmp && *tmp ? tmp : "/tmp");
        return MJ_EXIT_FAIL;
    }
    /* A synthetic entry under a key of its own, pushed by a first node. */
    char spec[96], preimage[256], dir[600], locks[600];
    snprintf(spec, sizeof spec, "backend=simt,bench=remote,pid=%ld", (long)getpid());
    snprintf(preimage, sizeof preimage, "moejit-key 1\ngenerator_version 1\nspec %zu:%s\nsource bench\n",
             strlen(spec), spec);
    mj_key key;
    mj_sha256_hex(preimage, strlen(preimage), key.hex);
    fake_build b = {(size_t)size, spec};
    snprintf(dir, sizeof dir, "%s/seed", root);
    snprintf(locks, sizeof locks, "%s/seed-locks", root);
    int rcode = MJ_EXIT_FAIL;
    double *fresh = calloc((size_t)runs, sizeof *fresh);
    double *with = calloc((size_t)hits, sizeof *with), *without = calloc((size_t)hits, sizeof *without);
    mj_cache *seed = open_cache(dir, locks, &rc);
    mj_program p;
    int hit = 0, ok = fresh && with && without && seed &&
                      mj_cache_get_or_build(seed, &key, preimage, spec, fake_build_fn, &b, &p, &hit) == MOEJIT_OK;
    if (ok) mj_program_free(&p);
    mj_cache_stats s;
    if (ok) ok = mj_cache_stats_get(seed, &s) == MOEJIT_OK && s.v[MJ_STAT_REMOTE_PUSHES] == 1;
    mj_cache_close(seed);
    if (!ok) {
        cli_error("bench remote: could not push the synthetic entry to %s (see the warnings above)", rc.url);
        goto out;
    }
    for (int i = 0; i < runs && ok; i++) {
        fresh[i] = fresh_hit(root, i, &rc, &key, preimage, &b);
        ok = fresh[i] >= 0;
    }
    if (!ok) {
        cli_error("bench remote: a fresh process did not get a remote hit from %s", rc.url);
        goto out;
    }
    /* A remote that is down: its first failure (a miss of another key) starts the back-off. */
    mj_remote_config down = rc;
    snprintf(down.url, sizeof down.url, "redis://127.0.0.1:1");
    mj_cache *plain = open_cache(dir, locks, NULL), *backed_off = open_cache(dir, locks, &down);
    mj_key other;
    mj_sha256_hex("another key", 11, other.hex);
    fake_build small = {4096, spec};
    ok = plain && backed_off &&
         mj_cache_get_or_build(backed_off, &other, preimage, spec, fake_build_fn, &small, &p, &hit) == MOEJIT_OK;
    if (ok) mj_program_free(&p);
    /* Interleaved halves, so that drift of the machine does not favour one variant. */
    ok = ok && time_hits(plain, &key, preimage, &b, hits / 2, without) && time_hits(backed_off, &key, preimage, &b, hits / 2, with) &&
         time_hits(plain, &key, preimage, &b, hits - hits / 2, without + hits / 2) &&
         time_hits(backed_off, &key, preimage, &b, hits - hits / 2, with + hits / 2);
    mj_cache_close(plain);
    mj_cache_close(backed_off);
    if (!ok) {
        cli_error("bench remote: disk hits failed");
        goto out;
    }
    double f_med = pct(fresh, runs, 0.5), f_p90 = pct(fresh, runs, 0.9), f_min = pct(fresh, runs, 0.0);
    double w_med = pct(with, hits, 0.5), wo_med = pct(without, hits, 0.5);
    if (json) {
        cJSON *doc = cJSON_CreateObject();
        cli_json_add(doc, "remote", cli_json_str(rc.url));
        cli_json_add(doc, "cubin_bytes", cli_json_int(size));
        cli_json_add(doc, "runs", cli_json_int(runs));
        cli_json_add(doc, "fresh_remote_hit_ms_median", cli_json_fixed(f_med * 1e3, 3));
        cli_json_add(doc, "fresh_remote_hit_ms_p90", cli_json_fixed(f_p90 * 1e3, 3));
        cli_json_add(doc, "fresh_remote_hit_ms_min", cli_json_fixed(f_min * 1e3, 3));
        cli_json_add(doc, "hits", cli_json_int(hits));
        cli_json_add(doc, "disk_hit_us_median_no_remote", cli_json_fixed(wo_med * 1e6, 1));
        cli_json_add(doc, "disk_hit_us_median_remote_down", cli_json_fixed(w_med * 1e6, 1));
        cli_json_add(doc, "remote_down_adds_us", cli_json_fixed((w_med - wo_med) * 1e6, 1));
        rcode = cli_json_print(doc);
    } else {
        printf("remote %s, entry of %lld bytes\n", rc.url, (long long)size);
        printf("remote hit into an empty disk cache, fresh process (%d runs): median %.3f ms, p90 %.3f ms, "
               "min %.3f ms\n", runs, f_med * 1e3, f_p90 * 1e3, f_min * 1e3);
        printf("disk hit (%d each): median %.1f us without a remote, %.1f us with a remote that is down "
               "(in back-off): %+.1f us\n", hits, wo_med * 1e6, w_med * 1e6, (w_med - wo_med) * 1e6);
        rcode = MJ_EXIT_OK;
    }
out:
    free(fresh);
    free(with);
    free(without);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0) { /* best effort */ }
    return rcode;
}
