/*
 * This file contains the cache's lookup path: opening the cache directory, get-or-build with
 * single flight (a per-key lock, a second look after taking it, build, atomic publish), the
 * plain lookup and put used by the CLI, and the automatic trim after a publish.
 */
#include "cache/cache.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cache/dirs.h"
#include "cache/fault.h"
#include "cache/lock.h"
#include "cache/publish.h"
#include "cache/remote.h"
#include "core/status.h"
#include "cache/store.h"

/* After a publish pushes the total over the limit, gc trims to this fraction of it, so that
 * the next few publishes do not each pay for a full scan. */
#define GC_TARGET_FRACTION 0.9

struct mj_cache {
    mj_cache_config cfg;
    int usable;             /* 0: no disk (off, or the directory could not be created) */
    char unusable_why[512]; /* why a read-write cache fell back to memory */
    atomic_int lock_state;  /* 0: lock dir not checked yet, 1: usable, -1: unusable */
    /* Hits are counted here and written with the next miss or at close: a counter file
     * update (lock, read, write, rename) would double the cost of a disk hit. */
    pthread_mutex_t mu;
    int64_t pending_hits[MJ_CACHE_SHARDS];
    int any_pending;
    mj_remote *remote;      /* the fleet-wide tier behind the disk (remote.h), or NULL */
};

static int degradable(int e)
{
    return e == EACCES || e == EPERM || e == EROFS || e == ENOSPC || e == EDQUOT;
}

moejit_status mj_cache_open_config(const mj_cache_config *cfg, mj_cache **out)
{
    *out = NULL;
    mj_cache *c = calloc(1, sizeof *c);
    if (!c) return mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "cache: out of memory");
    c->cfg = *cfg;
    c->usable = cfg->mode != MJ_CACHE_OFF;
    pthread_mutex_init(&c->mu, NULL);
    if (c->usable) {
        int err = 0;
        moejit_status st = cfg->mode == MJ_CACHE_READ_WRITE
                               ? mj_cache_ensure_dir(cfg->dir, "cache_dir", cfg->shared, &err)
                               : mj_cache_check_dir(cfg->dir, "cache_dir", cfg->shared, &err);
        if (st != MOEJIT_OK) {
            if (cfg->mode == MJ_CACHE_READ_WRITE && degradable(err)) {
                /* A serving process on a read-only image must still get its kernels. */
                mj_cache_warn(MJ_WARN_WRITE, "%s; kernels are compiled in memory and not cached",
                              moejit_last_error());
                snprintf(c->unusable_why, sizeof c->unusable_why, "%s", moejit_last_error());
                c->usable = 0;
            } else if (cfg->mode != MJ_CACHE_READ_WRITE && err == ENOENT) {
                /* Read-only or offline with no directory: every lookup is a miss. */
            } else {
                pthread_mutex_destroy(&c->mu);
                free(c);
                return st; /* unsafe ownership or permissions, or not a directory */
            }
        }
    }
    *out = c;
    return MOEJIT_OK;
}

/* Attaches the remote tier its configuration asks for (none when it is off). */
static moejit_status open_remote(mj_cache *c, const mj_remote_config *rc)
{
    mj_remote *r = NULL;
    moejit_status st = mj_remote_open(rc, &r, NULL, 0);
    if (st != MOEJIT_OK) {
        mj_cache_close(c);
        return st;
    }
    mj_cache_set_remote(c, r);
    return MOEJIT_OK;
}

moejit_status mj_cache_open(const moejit_options *opts, mj_cache **out)
{
    mj_sha256_prewarm();
    mj_cache_config cfg;
    mj_remote_config rc;
    *out = NULL;
    moejit_status st = mj_cache_config_resolve(opts, &cfg);
    if (st == MOEJIT_OK) st = mj_remote_config_resolve(opts, NULL, &rc);
    if (st == MOEJIT_OK) st = mj_cache_open_config(&cfg, out);
    if (st == MOEJIT_OK && (st = open_remote(*out, &rc)) != MOEJIT_OK) *out = NULL;
    return st;
}

moejit_status mj_cache_open_settings(const mj_settings *s, mj_cache **out)
{
    mj_sha256_prewarm();
    mj_cache_config cfg;
    mj_remote_config rc;
    mj_cache_config_from_settings(s, &cfg);
    mj_remote_config_from_settings(s, &rc);
    moejit_status st = mj_cache_open_config(&cfg, out);
    if (st == MOEJIT_OK && (st = open_remote(*out, &rc)) != MOEJIT_OK) *out = NULL;
    return st;
}

void mj_cache_set_remote(mj_cache *c, mj_remote *r)
{
    mj_remote_close(c->remote);
    c->remote = r;
}

mj_remote *mj_cache_get_remote(const mj_cache *c) { return c->remote; }

void mj_cache_flush_stats(mj_cache *c)
{
    if (!c->usable || c->cfg.mode == MJ_CACHE_READ_ONLY) return;
    int64_t hits[MJ_CACHE_SHARDS];
    pthread_mutex_lock(&c->mu);
    int any = c->any_pending;
    memcpy(hits, c->pending_hits, sizeof hits);
    memset(c->pending_hits, 0, sizeof c->pending_hits);
    c->any_pending = 0;
    pthread_mutex_unlock(&c->mu);
    if (!any) return;
    for (int sh = 0; sh < MJ_CACHE_SHARDS; sh++) {
        if (!hits[sh]) continue;
        mj_cache_stats d = {{0}};
        d.v[MJ_STAT_HITS] = hits[sh];
        mj_cache_stats_add(&c->cfg, sh, &d);
    }
}

void mj_cache_close(mj_cache *cache)
{
    if (!cache) return;
    mj_cache_flush_stats(cache);
    mj_remote_close(cache->remote);
    pthread_mutex_destroy(&cache->mu);
    free(cache);
}

const mj_cache_config *mj_cache_get_config(const mj_cache *cache) { return &cache->cfg; }

/* Writes delta to the key's shard; a delta that is only a hit waits in memory. */
static void flush_stats(mj_cache *c, const char *key, const mj_cache_stats *delta)
{
    if (!c->usable || c->cfg.mode == MJ_CACHE_READ_ONLY) return;
    int only_hit = delta->v[MJ_STAT_HITS] > 0;
    for (int i = 0; i < MJ_STAT_COUNT && only_hit; i++)
        if (i != MJ_STAT_HITS && delta->v[i]) only_hit = 0;
    if (only_hit) {
        pthread_mutex_lock(&c->mu);
        c->pending_hits[mj_cache_key_shard(key)] += delta->v[MJ_STAT_HITS];
        c->any_pending = 1;
        pthread_mutex_unlock(&c->mu);
        return;
    }
    mj_cache_flush_stats(c);
    mj_cache_stats_add(&c->cfg, mj_cache_key_shard(key), delta);
}

/* Refreshes the last-use stamp that gc orders by, at most once a minute per entry. */
static void stamp(const mj_cache *c, const char *path, const struct stat *st)
{
    if (c->cfg.mode == MJ_CACHE_READ_ONLY) return;
    if (time(NULL) - st->st_mtime >= MJ_STAMP_GRANULARITY_SECONDS) utimensat(AT_FDCWD, path, NULL, 0);
}

/* One look at the disk: a valid entry fills *out; a bad one is quarantined (counted in
 * delta) unless read-only; *fault_seen reports what was wrong for the offline message. */
static moejit_status look(mj_cache *c, const char *key, const char *spec, mj_program *out, int *found,
                          mj_cache_stats *delta, mj_entry_fault *fault_seen)
{
    char path[MJ_CACHE_PATH_MAX + 128];
    mj_entry e;
    mj_entry_fault fault;
    struct stat st;
    int exists;
    *found = 0;
    if (!c->usable) return MOEJIT_OK;
    mj_cache_entry_path(&c->cfg, key, path, sizeof path);
    moejit_status rc = mj_cache_read_entry_file(&c->cfg, path, key, spec, &e, &exists, &fault, &st);
    if (rc != MOEJIT_OK || !exists) return rc;
    if (fault != MJ_ENTRY_OK) {
        if (fault_seen) *fault_seen = fault;
        if (c->cfg.mode != MJ_CACHE_READ_ONLY)
            mj_cache_quarantine(&c->cfg, path, key, (int64_t)st.st_size, fault, delta);
        else
            mj_cache_warn(MJ_WARN_QUARANTINE, "cache entry %s failed its check (%s); ignored (read-only cache)",
                          path, mj_entry_fault_name(fault));
        return MOEJIT_OK;
    }
    mj_entry_move_to_program(&e, out);
    stamp(c, path, &st);
    *found = 1;
    return MOEJIT_OK;
}

/* Writes the entry bytes for key (durable: fsync'ed; a backfill from the remote is not, since a
 * torn entry fails its checksum and is fetched again); *delta receives the change of the size
 * counters (an entry that replaces another counts only the difference). */
static moejit_status publish_bytes(mj_cache *c, const char *key, const void *data, size_t len, int durable,
                                   mj_cache_stats *delta, int *err)
{
    char first[MJ_CACHE_PATH_MAX + 8], shard[MJ_CACHE_PATH_MAX + 16];
    *err = 0;
    snprintf(first, sizeof first, "%s/%.2s", c->cfg.dir, key);
    mj_cache_shard_dir(&c->cfg, key, shard, sizeof shard);
    moejit_status rc = mj_cache_ensure_own_dir(first, "cache shard", c->cfg.shared, err);
    if (rc == MOEJIT_OK) rc = mj_cache_ensure_own_dir(shard, "cache shard", c->cfg.shared, err);
    if (rc == MOEJIT_OK) {
        char name[96];
        snprintf(name, sizeof name, "%s" MJ_ENTRY_SUFFIX, key);
        mj_publish_opts po = {c->cfg.shared ? MJ_FILE_MODE_SHARED : MJ_FILE_MODE_PRIVATE, durable};
        char path[MJ_CACHE_PATH_MAX + 128];
        struct stat old;
        mj_cache_entry_path(&c->cfg, key, path, sizeof path);
        int replaced = stat(path, &old) == 0;
        rc = mj_cache_publish(shard, name, data, len, &po, err);
        if (rc == MOEJIT_OK) {
            delta->v[MJ_STAT_BYTES] += (int64_t)len - (replaced ? (int64_t)old.st_size : 0);
            delta->v[MJ_STAT_FILES] += !replaced;
        }
        /* Crashed writers' temp files are cleaned where they were left. */
        mj_cache_clean_temps(shard, MJ_STALE_TEMP_SECONDS);
    }
    return rc;
}

/* Encodes p as the entry for key into *enc (kept for a push to the remote) and writes it. */
static moejit_status publish_entry(mj_cache *c, const char *key, const char *preimage, const char *spec,
                                   const mj_program *p, mj_cache_stats *delta, int *err, mj_buf *enc)
{
    mj_entry e;
    *err = 0;
    mj_program copy = *p;
    copy.canonical_spec = (char *)spec; /* the request is what every load compares against */
    moejit_status rc = mj_entry_from_program(&copy, key, preimage, &e);
    if (rc != MOEJIT_OK) return rc;
    rc = mj_entry_encode(&e, enc);
    mj_entry_free(&e);
    return rc == MOEJIT_OK ? publish_bytes(c, key, enc->data, enc->len, 1, delta, err) : rc;
}

/* After a publish: trim the cache when the shard counters say it is over its limit. */
static int lock_dir_ready(mj_cache *c);

static void maybe_gc(mj_cache *c)
{
    mj_cache_stats total;
    mj_cache_stats_read_all(&c->cfg, &total);
    if (total.v[MJ_STAT_BYTES] <= c->cfg.max_bytes) return;
    mj_cache_lock lock;
    int held = 0;
    /* One trimmer at a time; the others carry on (someone is already trimming). */
    if (!lock_dir_ready(c) || mj_cache_lock_acquire(c->cfg.lock_dir, "gc", 0, &lock, &held) != MOEJIT_OK || !held)
        return;
    mj_cache_gc_result r;
    (void)mj_dir_gc(&c->cfg, (int64_t)((double)c->cfg.max_bytes * GC_TARGET_FRACTION), c->cfg.max_age_s, &r);
    mj_cache_lock_release(&lock);
}

static int lock_dir_ready(mj_cache *c)
{
    int s = atomic_load(&c->lock_state);
    if (s) return s > 0;
    int err = 0;
    if (mj_cache_ensure_own_dir(c->cfg.lock_dir, "lock_dir", c->cfg.shared, &err) == MOEJIT_OK) s = 1;
    else {
        mj_cache_warn(MJ_WARN_LOCK, "%s; compiling without cross-process locks", moejit_last_error());
        s = -1;
    }
    atomic_store(&c->lock_state, s);
    return s > 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Serves a verified remote entry, backfilling the disk cache first where it may be written. */
static void serve_remote(mj_cache *c, const char *k, mj_entry *e, uint8_t *raw, size_t raw_len, mj_program *out,
                         mj_cache_stats *delta)
{
    int err = 0;
    if (c->usable && c->cfg.mode != MJ_CACHE_READ_ONLY &&
        publish_bytes(c, k, raw, raw_len, 0, delta, &err) != MOEJIT_OK) {
        delta->v[MJ_STAT_WRITE_FAILURES]++;
        mj_cache_warn(MJ_WARN_WRITE, "%s; the kernel is used from memory and not cached", moejit_last_error());
        mj_clear_error();
    }
    free(raw);
    mj_entry_move_to_program(e, out);
    mj_entry_free(e);
}

/* Looks the key up on the remote tier; 1 when served from it. */
static int remote_lookup(mj_cache *c, const char *k, const char *spec, mj_program *out, mj_cache_stats *delta)
{
    mj_entry e;
    uint8_t *raw = NULL;
    size_t raw_len = 0;
    if (!c->remote || !mj_remote_fetch(c->remote, k, spec, &e, &raw, &raw_len, delta)) return 0;
    serve_remote(c, k, &e, raw, raw_len, out, delta);
    return 1;
}

/* Fleet-wide single flight; 1 when another node's entry arrived and was served. */
static int remote_flight(mj_cache *c, const char *k, const char *spec, mj_remote_flight *f, mj_program *out,
                         mj_cache_stats *delta)
{
    mj_entry e;
    uint8_t *raw = NULL;
    size_t raw_len = 0;
    memset(f, 0, sizeof *f);
    if (!c->remote || !mj_remote_flight_begin(c->remote, k, spec, f, &e, &raw, &raw_len, delta)) return 0;
    serve_remote(c, k, &e, raw, raw_len, out, delta);
    return 1;
}

/* Builds with the remote tier on a cache that does not write the disk (read-only, unusable):
 * single flight, then the entry is encoded and pushed. */
static moejit_status build_remote(mj_cache *c, const char *k, const char *preimage, const char *spec,
                                  mj_build_fn build, void *build_ctx, mj_program *out, int *hit)
{
    mj_cache_stats delta = {{0}};
    mj_remote_flight f;
    if (remote_flight(c, k, spec, &f, out, &delta)) {
        *hit = 1;
        return MOEJIT_OK;
    }
    moejit_status rc = build(build_ctx, out);
    mj_buf enc = MJ_BUF_INIT;
    mj_entry e;
    if (rc == MOEJIT_OK && mj_remote_writable(c->remote)) {
        mj_program copy = *out;
        copy.canonical_spec = (char *)spec;
        if (mj_entry_from_program(&copy, k, preimage, &e) == MOEJIT_OK) {
            if (mj_entry_encode(&e, &enc) != MOEJIT_OK) mj_buf_reset(&enc);
            mj_entry_free(&e);
        }
        mj_clear_error();
    }
    mj_remote_flight_end(c->remote, &f, rc == MOEJIT_OK && enc.len ? (const uint8_t *)enc.data : NULL, enc.len, &delta);
    mj_buf_free(&enc);
    return rc;
}

moejit_status mj_cache_get_or_build(mj_cache *c, const mj_key *key, const char *preimage,
                                    const char *spec, mj_build_fn build, void *build_ctx,
                                    mj_program *out, int *hit)
{
    *hit = 0;
    memset(out, 0, sizeof *out);
    if (!mj_cache_key_valid(key->hex))
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "cache key: \"%.70s\" is not 64 lowercase hex digits",
                       key->hex);
    if (!spec) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "cache: canonical spec is NULL");
    if (c->cfg.mode == MJ_CACHE_OFF) return build(build_ctx, out);

    const char *k = key->hex;
    mj_cache_stats delta = {{0}};
    mj_entry_fault fault = MJ_ENTRY_OK;
    int found = 0;
    moejit_status rc = look(c, k, spec, out, &found, &delta, &fault);
    if (rc == MOEJIT_OK && found) {
        delta.v[MJ_STAT_HITS]++;
        flush_stats(c, k, &delta);
        *hit = 1;
        return MOEJIT_OK;
    }
    /* A read error (EIO) is a miss: the cache must never cost the caller its kernel. */
    if (remote_lookup(c, k, spec, out, &delta)) {
        delta.v[MJ_STAT_MISSES]++;
        flush_stats(c, k, &delta);
        *hit = 1;
        return MOEJIT_OK;
    }
    if (c->cfg.mode == MJ_CACHE_OFFLINE) {
        delta.v[MJ_STAT_MISSES]++;
        flush_stats(c, k, &delta);
        if (fault != MJ_ENTRY_OK)
            return mj_fail(MOEJIT_ERR_CACHE_MISS,
                           "offline cache: no entry for spec %s (key %s); the stored entry was %s "
                           "and has been quarantined", spec, k, mj_entry_fault_name(fault));
        return mj_fail(MOEJIT_ERR_CACHE_MISS, "offline cache: no entry for spec %s (key %s)", spec, k);
    }
    if (c->cfg.mode == MJ_CACHE_READ_ONLY || !c->usable)
        return c->remote ? build_remote(c, k, preimage, spec, build, build_ctx, out, hit) : build(build_ctx, out);

    /* Single flight: one compile per key per node; others wait, then find the entry. */
    mj_cache_lock lock = {.fd = -1};
    int held = 0;
    if (lock_dir_ready(c)) {
        if (mj_cache_lock_acquire(c->cfg.lock_dir, k, c->cfg.lock_timeout_s, &lock, &held) != MOEJIT_OK)
            mj_cache_warn(MJ_WARN_LOCK, "%s; compiling without the lock", moejit_last_error());
        else if (!held) {
            delta.v[MJ_STAT_LOCK_TIMEOUTS]++;
            mj_cache_warn(MJ_WARN_LOCK, "waited %gs for another process compiling key %s; compiling "
                          "anyway (lock_timeout, MOEJIT_LOCK_TIMEOUT)", c->cfg.lock_timeout_s, k);
        }
        if (held) {
            rc = look(c, k, spec, out, &found, &delta, NULL);
            if (rc == MOEJIT_OK && found) {
                mj_cache_lock_release(&lock);
                delta.v[MJ_STAT_HITS]++;
                flush_stats(c, k, &delta);
                *hit = 1;
                return MOEJIT_OK;
            }
        }
    }

    delta.v[MJ_STAT_MISSES]++;
    /* Fleet-wide single flight: one compile per key across the nodes sharing the remote. */
    mj_remote_flight flight = {0};
    if (remote_flight(c, k, spec, &flight, out, &delta)) {
        mj_cache_lock_release(&lock);
        flush_stats(c, k, &delta);
        *hit = 1;
        return MOEJIT_OK;
    }
    delta.v[MJ_STAT_COMPILES]++;
    double t0 = now_s();
    rc = build(build_ctx, out);
    delta.v[MJ_STAT_COMPILE_US] += (int64_t)((now_s() - t0) * 1e6);
    if (rc != MOEJIT_OK) {
        char why[MJ_ERROR_MAX]; /* the compile's message: the counters' update below clears the thread's */
        snprintf(why, sizeof why, "%s", moejit_last_error());
        if (c->remote) mj_remote_flight_end(c->remote, &flight, NULL, 0, &delta);
        mj_cache_lock_release(&lock);
        delta.v[MJ_STAT_COMPILE_FAILURES]++;
        flush_stats(c, k, &delta);
        return mj_fail(rc, "%s", why);
    }
    int err = 0, published = 0;
    mj_buf enc = MJ_BUF_INIT;
    if (publish_entry(c, k, preimage, spec, out, &delta, &err, &enc) == MOEJIT_OK) {
        published = 1;
    } else {
        delta.v[MJ_STAT_WRITE_FAILURES]++;
        mj_cache_warn(MJ_WARN_WRITE, "%s; the kernel is used from memory and not cached",
                      moejit_last_error());
        mj_clear_error(); /* the call succeeds: no stale message for the caller */
    }
    /* Published locally first, then pushed, then the fleet's lock released. */
    if (c->remote)
        mj_remote_flight_end(c->remote, &flight, mj_buf_ok(&enc) && enc.len ? (const uint8_t *)enc.data : NULL,
                             enc.len, &delta);
    mj_buf_free(&enc);
    mj_cache_lock_release(&lock);
    flush_stats(c, k, &delta);
    if (published) maybe_gc(c);
    return MOEJIT_OK;
}

moejit_status mj_cache_lookup(mj_cache *c, const char *key_hex, const char *spec, mj_program *out,
                              int *found)
{
    *found = 0;
    memset(out, 0, sizeof *out);
    if (!mj_cache_key_valid(key_hex))
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "cache key: \"%.70s\" is not 64 lowercase hex digits",
                       key_hex ? key_hex : "(null)");
    if (c->cfg.mode == MJ_CACHE_OFF) return MOEJIT_OK;
    mj_cache_stats delta = {{0}};
    moejit_status rc = look(c, key_hex, spec, out, found, &delta, NULL);
    delta.v[MJ_STAT_HITS] = 0;
    flush_stats(c, key_hex, &delta); /* quarantines only */
    return rc;
}

moejit_status mj_cache_put(mj_cache *c, const char *key_hex, const char *preimage, const char *spec,
                           const mj_program *p)
{
    if (!mj_cache_key_valid(key_hex))
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "cache key: \"%.70s\" is not 64 lowercase hex digits",
                       key_hex ? key_hex : "(null)");
    if (c->cfg.mode == MJ_CACHE_READ_ONLY || c->cfg.mode == MJ_CACHE_OFF || !c->usable)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "cache_mode: %s cache %s cannot be written; allowed: read-write or offline",
                       c->usable ? mj_cache_mode_name(c->cfg.mode) : "unusable", c->cfg.dir);
    int err = 0;
    mj_cache_stats delta = {{0}};
    mj_buf enc = MJ_BUF_INIT;
    moejit_status rc = publish_entry(c, key_hex, preimage, spec ? spec : p->canonical_spec, p, &delta, &err, &enc);
    mj_buf_free(&enc);
    if (rc != MOEJIT_OK) {
        /* The counter update may itself fail quietly; keep the caller's message intact. */
        char msg[MJ_ERROR_MAX];
        snprintf(msg, sizeof msg, "%s", moejit_last_error());
        delta.v[MJ_STAT_WRITE_FAILURES] = 1;
        flush_stats(c, key_hex, &delta);
        return mj_fail(rc, "%s", msg);
    }
    flush_stats(c, key_hex, &delta);
    if (rc == MOEJIT_OK) maybe_gc(c);
    return rc;
}

/* ---- maintenance: the directory walks of gc.c, after this handle's pending counters ------- */

/* Maintenance that modifies the cache fails, naming cache_mode, on a read-write cache that fell
 * back to memory: reporting "removed 0" there would say the cache was trimmed. */
static moejit_status require_disk(const mj_cache *c, const char *what)
{
    if (c->usable || c->cfg.mode != MJ_CACHE_READ_WRITE) return MOEJIT_OK;
    return mj_fail(MOEJIT_ERR_IO, "cache_mode: %s needs to modify the cache, but %s cannot be written (%s), "
                   "so it is in effect read-only; allowed: a writable cache_dir", what, c->cfg.dir,
                   c->unusable_why[0] ? c->unusable_why : "unusable");
}

moejit_status mj_cache_list(mj_cache *c, mj_cache_list_fn fn, void *ctx) { return mj_dir_list(&c->cfg, fn, ctx); }
moejit_status mj_cache_read(mj_cache *c, const char *key_hex, mj_entry *out) { return mj_dir_read(&c->cfg, key_hex, out); }
moejit_status mj_cache_remove(mj_cache *c, const char *key_hex)
{
    moejit_status rc = require_disk(c, "remove");
    return rc != MOEJIT_OK ? rc : mj_dir_remove(&c->cfg, key_hex);
}
moejit_status mj_cache_clear(mj_cache *c, int64_t *removed)
{
    if (removed) *removed = 0;
    moejit_status rc = require_disk(c, "clear");
    return rc != MOEJIT_OK ? rc : mj_dir_clear(&c->cfg, removed);
}
moejit_status mj_cache_verify(mj_cache *c, mj_cache_verify_result *out) { return mj_dir_verify(&c->cfg, out); }

moejit_status mj_cache_gc(mj_cache *c, int64_t limit, int64_t max_age_s, mj_cache_gc_result *out)
{
    memset(out, 0, sizeof *out);
    moejit_status rc = require_disk(c, "gc");
    return rc != MOEJIT_OK ? rc : mj_dir_gc(&c->cfg, limit, max_age_s, out);
}

moejit_status mj_cache_stats_get(mj_cache *c, mj_cache_stats *out)
{
    mj_cache_flush_stats(c);
    return mj_dir_stats_get(&c->cfg, out);
}

moejit_status mj_cache_stats_reset(mj_cache *c)
{
    mj_cache_flush_stats(c);
    moejit_status rc = require_disk(c, "stats reset");
    return rc != MOEJIT_OK ? rc : mj_dir_stats_reset(&c->cfg);
}
