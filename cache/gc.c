/*
 * This file contains the cache maintenance that walks every entry: list, verify, gc (by age,
 * then least recently used first down to a size limit), clear, remove, and the stats calls.
 * Every full walk also recounts the per-shard size counters, which is how drift from crashed
 * or remote writers is corrected.
 */
#include "cache/gc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache/dirs.h"
#include "cache/fault.h"
#include "cache/publish.h"
#include "core/status.h"
#include "cache/store.h"

/* One file found by the walk. */
typedef struct walk_item {
    char path[MJ_CACHE_PATH_MAX + 128];
    char key[65];        /* "" for a file that is not a current-format entry */
    int shard;
    struct stat st;
} walk_item;

/* Return non-zero to stop. */
typedef int (*walk_fn)(void *ctx, const walk_item *it);

static int is_hex2(const char *s)
{
    return strlen(s) == 2 && strspn(s, "0123456789abcdef") == 2;
}

/* 1 when a shard directory passes the trust check; one that does not is skipped, with a
 * warning (another user could have put anything in it). */
static int trusted(const mj_cache_config *cfg, const char *dir)
{
    int err = 0;
    if (mj_cache_check_own_dir(dir, "cache shard", cfg->shared, &err) == MOEJIT_OK) return 1;
    if (err != ENOENT) mj_cache_warn(MJ_WARN_UNSAFE, "%s; skipped", moejit_last_error());
    mj_clear_error();
    return 0;
}

/* Visits every file in <dir>/<xx>/<yy>/ (entries of every format version and temp files);
 * per shard, cleans stale temps when clean_temps is set. */
static int walk(const mj_cache_config *cfg, walk_fn fn, void *ctx, int clean_temps, int64_t *temps)
{
    char d1[MJ_CACHE_PATH_MAX + 8], d2[MJ_CACHE_PATH_MAX + 16];
    for (int sh = 0; sh < MJ_CACHE_SHARDS; sh++) {
        snprintf(d1, sizeof d1, "%s/%02x", cfg->dir, sh);
        if (!trusted(cfg, d1)) continue;
        DIR *a = opendir(d1);
        if (!a) continue;
        struct dirent *da;
        while ((da = readdir(a))) {
            if (!is_hex2(da->d_name)) continue;
            snprintf(d2, sizeof d2, "%s/%s", d1, da->d_name);
            if (!trusted(cfg, d2)) continue;
            if (clean_temps) {
                int n = mj_cache_clean_temps(d2, MJ_STALE_TEMP_SECONDS);
                if (temps) *temps += n;
            }
            DIR *b = opendir(d2);
            if (!b) continue;
            struct dirent *db;
            while ((db = readdir(b))) {
                const char *name = db->d_name;
                size_t n = strlen(name);
                if (name[0] == '.' || n < 4 || strcmp(name + n - 4, ".mjk") != 0) continue;
                walk_item it = {.shard = sh};
                snprintf(it.path, sizeof it.path, "%s/%s", d2, name);
                if (lstat(it.path, &it.st) != 0 || !S_ISREG(it.st.st_mode)) continue;
                if (n == 64 + strlen(MJ_ENTRY_SUFFIX) && strcmp(name + 64, MJ_ENTRY_SUFFIX) == 0) {
                    memcpy(it.key, name, 64);
                    if (!mj_cache_key_valid(it.key)) it.key[0] = '\0';
                }
                if (fn(ctx, &it)) {
                    closedir(b);
                    closedir(a);
                    return 1;
                }
            }
            closedir(b);
        }
        closedir(a);
    }
    return 0;
}

static moejit_status require_writable(const mj_cache_config *cfg, const char *what)
{
    if (cfg->mode == MJ_CACHE_READ_ONLY)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "cache_mode: %s needs to modify the cache but it is read-only; allowed: "
                       "read-write or offline", what);
    return MOEJIT_OK;
}

/* ---- list and read -------------------------------------------------------------------- */

typedef struct list_ctx {
    const mj_cache_config *cfg;
    mj_cache_list_fn fn;
    void *user;
    moejit_status rc;
} list_ctx;

static int list_one(void *vctx, const walk_item *it)
{
    list_ctx *lc = vctx;
    if (!it->key[0]) return 0;
    mj_entry e;
    mj_entry_fault fault;
    int found;
    moejit_status rc = mj_cache_read_entry_file(lc->cfg, it->path, it->key, NULL, &e, &found, &fault, NULL);
    if (rc == MOEJIT_ERR_OUT_OF_MEMORY) {
        lc->rc = rc;
        return 1;
    }
    if (rc != MOEJIT_OK || !found || fault != MJ_ENTRY_OK) return 0;
    mj_cache_entry_info info = {.canonical_spec = e.canonical_spec, .arch = e.arch,
                                .n_kernels = e.n_kernels, .size = (int64_t)it->st.st_size,
                                .last_use = (int64_t)it->st.st_mtime, .created = e.created_unix,
                                .compile_seconds = e.compile_seconds, .entry = &e};
    memcpy(info.key, it->key, 65);
    int stop = lc->fn(lc->user, &info);
    mj_entry_free(&e);
    return stop;
}

moejit_status mj_dir_list(const mj_cache_config *cfg, mj_cache_list_fn fn, void *ctx)
{
    list_ctx lc = {cfg, fn, ctx, MOEJIT_OK};
    walk(lc.cfg, list_one, &lc, 0, NULL);
    return lc.rc;
}

moejit_status mj_dir_read(const mj_cache_config *cfg, const char *key_hex, mj_entry *out)
{
    memset(out, 0, sizeof *out);
    if (!mj_cache_key_valid(key_hex))
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "cache key: \"%.70s\" is not 64 lowercase hex digits",
                       key_hex ? key_hex : "(null)");
    char path[MJ_CACHE_PATH_MAX + 128];
    mj_cache_entry_path(cfg, key_hex, path, sizeof path);
    int found;
    mj_entry_fault fault;
    moejit_status rc = mj_cache_read_entry_file(cfg, path, key_hex, NULL, out, &found, &fault, NULL);
    if (rc != MOEJIT_OK) return rc;
    if (!found) return mj_fail(MOEJIT_ERR_CACHE_MISS, "cache: no entry for key %s in %s", key_hex, cfg->dir);
    if (fault != MJ_ENTRY_OK)
        return mj_fail(MOEJIT_ERR_CACHE_MISS, "cache: entry for key %s is invalid (%s); run `moejit cache "
                       "verify` to quarantine it", key_hex, mj_entry_fault_name(fault));
    return MOEJIT_OK;
}

/* ---- verify --------------------------------------------------------------------------- */

typedef struct verify_ctx {
    const mj_cache_config *cfg;
    mj_cache_verify_result *r;
    int64_t bytes[MJ_CACHE_SHARDS], files[MJ_CACHE_SHARDS];
    mj_cache_stats delta[MJ_CACHE_SHARDS];
} verify_ctx;

static int verify_one(void *vctx, const walk_item *it)
{
    verify_ctx *vc = vctx;
    if (!it->key[0]) { /* an entry of another format version: counted, not judged */
        vc->bytes[it->shard] += it->st.st_size;
        vc->files[it->shard]++;
        return 0;
    }
    vc->r->checked++;
    mj_entry e;
    mj_entry_fault fault;
    int found;
    moejit_status rc = mj_cache_read_entry_file(vc->cfg, it->path, it->key, NULL, &e, &found, &fault, NULL);
    if (rc != MOEJIT_OK || !found) return 0;
    if (fault == MJ_ENTRY_OK) {
        /* A valid checksum only proves the bytes are as written; the key must also be what
         * its preimage hashes to, and the spec the one the preimage names. */
        fault = mj_cache_entry_consistent(&e);
        mj_entry_free(&e);
    }
    if (fault == MJ_ENTRY_OK) {
        vc->r->ok++;
        vc->bytes[it->shard] += it->st.st_size;
        vc->files[it->shard]++;
        return 0;
    }
    vc->r->bad++;
    if (vc->cfg->mode != MJ_CACHE_READ_ONLY)
        mj_cache_quarantine(vc->cfg, it->path, it->key, 0, fault, &vc->delta[it->shard]);
    return 0;
}

moejit_status mj_dir_verify(const mj_cache_config *cfg, mj_cache_verify_result *out)
{
    memset(out, 0, sizeof *out);
    verify_ctx *vc = calloc(1, sizeof *vc);
    if (!vc) return mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "cache verify: out of memory");
    vc->cfg = cfg;
    vc->r = out;
    walk(vc->cfg, verify_one, vc, 0, NULL);
    if (vc->cfg->mode != MJ_CACHE_READ_ONLY) {
        char d1[MJ_CACHE_PATH_MAX + 8];
        for (int sh = 0; sh < MJ_CACHE_SHARDS; sh++) {
            snprintf(d1, sizeof d1, "%s/%02x", vc->cfg->dir, sh);
            if (access(d1, F_OK) != 0) continue;
            vc->delta[sh].v[MJ_STAT_BYTES] = vc->delta[sh].v[MJ_STAT_FILES] = 0;
            mj_cache_stats_add(vc->cfg, sh, &vc->delta[sh]);
            mj_cache_stats_set_size(vc->cfg, sh, vc->bytes[sh], vc->files[sh]);
        }
    }
    free(vc);
    return MOEJIT_OK;
}

/* ---- gc ------------------------------------------------------------------------------- */

typedef struct gc_item {
    char path[MJ_CACHE_PATH_MAX + 128];
    int shard;
    int64_t size;
    struct timespec mtime;
} gc_item;

typedef struct gc_ctx {
    gc_item *items;
    size_t n, cap;
    int failed;
} gc_ctx;

static int gc_collect(void *vctx, const walk_item *it)
{
    gc_ctx *g = vctx;
    if (g->n == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 256;
        gc_item *p = realloc(g->items, cap * sizeof *p);
        if (!p) {
            g->failed = 1;
            return 1;
        }
        g->items = p;
        g->cap = cap;
    }
    gc_item *d = &g->items[g->n++];
    memcpy(d->path, it->path, sizeof d->path);
    d->shard = it->shard;
    d->size = (int64_t)it->st.st_size;
    d->mtime = it->st.st_mtim;
    return 0;
}

/* Oldest last use first; ties broken by path so that the order is deterministic. */
static int by_last_use(const void *a, const void *b)
{
    const gc_item *x = a, *y = b;
    if (x->mtime.tv_sec != y->mtime.tv_sec) return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
    if (x->mtime.tv_nsec != y->mtime.tv_nsec) return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
    return strcmp(x->path, y->path);
}

static void clean_quarantine(const mj_cache_config *cfg)
{
    char q[MJ_CACHE_PATH_MAX + 16];
    snprintf(q, sizeof q, "%s/" MJ_QUARANTINE_DIR, cfg->dir);
    DIR *d = opendir(q);
    if (!d) return;
    time_t now = time(NULL);
    struct dirent *de;
    while ((de = readdir(d))) {
        struct stat st;
        if (de->d_name[0] == '.' || fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        if (S_ISREG(st.st_mode) && now - st.st_mtime > MJ_QUARANTINE_KEEP_SECONDS)
            unlinkat(dirfd(d), de->d_name, 0);
    }
    closedir(d);
}

moejit_status mj_dir_gc(const mj_cache_config *cfg, int64_t limit, int64_t max_age_s, mj_cache_gc_result *out)
{
    memset(out, 0, sizeof *out);
    moejit_status rc = require_writable(cfg, "gc");
    if (rc != MOEJIT_OK) return rc;
    if (limit <= 0) limit = cfg->max_bytes;
    gc_ctx g = {0};
    walk(cfg, gc_collect, &g, 1, &out->temps_removed);
    if (g.failed) {
        free(g.items);
        return mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "cache gc: out of memory listing entries");
    }
    if (g.n) qsort(g.items, g.n, sizeof *g.items, by_last_use);
    int64_t total = 0;
    for (size_t i = 0; i < g.n; i++) total += g.items[i].size;
    time_t now = time(NULL);
    int64_t bytes[MJ_CACHE_SHARDS] = {0}, files[MJ_CACHE_SHARDS] = {0}, evicted[MJ_CACHE_SHARDS] = {0};
    int touched[MJ_CACHE_SHARDS] = {0};
    int64_t failed = 0;
    char first_failure[MJ_CACHE_PATH_MAX + 200] = "";
    for (size_t i = 0; i < g.n; i++) {
        gc_item *it = &g.items[i];
        touched[it->shard] = 1;
        int too_old = max_age_s > 0 && now - it->mtime.tv_sec > max_age_s;
        if (too_old || total > limit) {
            if (unlink(it->path) == 0) {
                total -= it->size;
                out->removed++;
                out->removed_bytes += it->size;
                evicted[it->shard]++;
                continue;
            }
            if (errno != ENOENT && !failed++)
                snprintf(first_failure, sizeof first_failure, "%s: %s", it->path, strerror(errno));
        }
        out->kept++;
        out->kept_bytes += it->size;
        bytes[it->shard] += it->size;
        files[it->shard]++;
    }
    free(g.items);
    clean_quarantine(cfg);
    char d1[MJ_CACHE_PATH_MAX + 8];
    for (int sh = 0; sh < MJ_CACHE_SHARDS; sh++) {
        if (!touched[sh]) {
            snprintf(d1, sizeof d1, "%s/%02x", cfg->dir, sh);
            if (access(d1, F_OK) != 0) continue;
        }
        mj_cache_stats d = {{0}};
        d.v[MJ_STAT_EVICTED] = evicted[sh];
        mj_cache_stats_add(cfg, sh, &d);
        mj_cache_stats_set_size(cfg, sh, bytes[sh], files[sh]);
    }
    if (failed)
        return mj_fail(MOEJIT_ERR_IO, "cache gc: could not remove %lld of the entries to drop (first: %s); "
                       "removed %lld", (long long)failed, first_failure, (long long)out->removed);
    return MOEJIT_OK;
}

/* ---- clear, remove, stats -------------------------------------------------------------- */

moejit_status mj_dir_clear(const mj_cache_config *cfg, int64_t *removed)
{
    moejit_status rc = require_writable(cfg, "clear");
    if (rc != MOEJIT_OK) return rc;
    gc_ctx g = {0};
    walk(cfg, gc_collect, &g, 1, NULL);
    int64_t n = 0;
    for (size_t i = 0; i < g.n; i++) n += unlink(g.items[i].path) == 0;
    free(g.items);
    if (g.failed) return mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "cache clear: out of memory listing entries");
    char d1[MJ_CACHE_PATH_MAX + 8];
    for (int sh = 0; sh < MJ_CACHE_SHARDS; sh++) {
        snprintf(d1, sizeof d1, "%s/%02x", cfg->dir, sh);
        if (access(d1, F_OK) == 0) mj_cache_stats_set_size(cfg, sh, 0, 0);
    }
    if (removed) *removed = n;
    return MOEJIT_OK;
}

moejit_status mj_dir_remove(const mj_cache_config *cfg, const char *key_hex)
{
    if (!mj_cache_key_valid(key_hex))
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "cache key: \"%.70s\" is not 64 lowercase hex digits",
                       key_hex ? key_hex : "(null)");
    moejit_status rc = require_writable(cfg, "remove");
    if (rc != MOEJIT_OK) return rc;
    char path[MJ_CACHE_PATH_MAX + 128];
    mj_cache_entry_path(cfg, key_hex, path, sizeof path);
    struct stat st;
    if (lstat(path, &st) != 0 || unlink(path) != 0) {
        if (errno == ENOENT) return mj_fail(MOEJIT_ERR_CACHE_MISS, "cache: no entry for key %s", key_hex);
        return mj_fail(MOEJIT_ERR_IO, "cache: cannot remove %s: %s", path, strerror(errno));
    }
    mj_cache_stats d = {{0}};
    d.v[MJ_STAT_BYTES] = -(int64_t)st.st_size;
    d.v[MJ_STAT_FILES] = -1;
    mj_cache_stats_add(cfg, mj_cache_key_shard(key_hex), &d);
    return MOEJIT_OK;
}

moejit_status mj_dir_stats_get(const mj_cache_config *cfg, mj_cache_stats *out)
{
    mj_cache_stats_read_all(cfg, out);
    return MOEJIT_OK;
}

moejit_status mj_dir_stats_reset(const mj_cache_config *cfg)
{
    moejit_status rc = require_writable(cfg, "stats reset");
    return rc != MOEJIT_OK ? rc : mj_cache_stats_zero(cfg);
}
