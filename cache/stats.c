/*
 * This file contains the persisted per-shard counters: the labels table, and read, add,
 * zero and recount, each read-modify-write under the shard's lock (see stats.h).
 */
#include "cache/stats.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/dirs.h"
#include "cache/lock.h"
#include "cache/publish.h"
#include "core/status.h"

const mj_cache_stat_field mj_cache_stat_fields[MJ_STAT_COUNT] = {
    {MJ_STAT_HITS, "hits", "Hits", 0},
    {MJ_STAT_MISSES, "misses", "Misses", 0},
    {MJ_STAT_COMPILES, "compiles", "Compiles", 0},
    {MJ_STAT_COMPILE_US, "compile_us", "Compile time (us)", 0},
    {MJ_STAT_QUARANTINED, "quarantined", "Quarantined entries", 0},
    {MJ_STAT_WRITE_FAILURES, "write_failures", "Write failures", 0},
    {MJ_STAT_LOCK_TIMEOUTS, "lock_timeouts", "Lock wait timeouts", 0},
    {MJ_STAT_EVICTED, "evicted", "Evicted by gc", 0},
    {MJ_STAT_BYTES, "bytes", "Cache size (bytes)", 1},
    {MJ_STAT_FILES, "files", "Entries", 1},
    {MJ_STAT_COMPILE_FAILURES, "compile_failures", "Failed compiles", 0},
};

/* A stats lock held while counters change, so that the file is never half written (no
 * wait long enough to matter: holders keep it for one small read and write). */
#define STATS_LOCK_TIMEOUT_S 5.0

static void shard_dir(const mj_cache_config *cfg, int shard, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%02x", cfg->dir, shard & 0xff);
}

static void read_file(const char *path, mj_cache_stats *out)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "re");
    if (!f) return;
    char line[128];
    if (!fgets(line, sizeof line, f) || strncmp(line, "moejit-stats 1", 14) != 0) {
        fclose(f);
        return;
    }
    unsigned id;
    long long v;
    /* Unknown ids come from a newer moejit: skipped, never misread. */
    while (fscanf(f, "%u %lld", &id, &v) == 2)
        if (id < MJ_STAT_COUNT) out->v[id] = v;
    fclose(f);
}

static void write_file(const mj_cache_config *cfg, const char *dir, const mj_cache_stats *s)
{
    char text[64 * MJ_STAT_COUNT + 32];
    int n = snprintf(text, sizeof text, "moejit-stats 1\n");
    for (int i = 0; i < MJ_STAT_COUNT; i++)
        n += snprintf(text + n, sizeof text - (size_t)n, "%d %lld\n", i, (long long)s->v[i]);
    mj_publish_opts po = {cfg->shared ? MJ_FILE_MODE_SHARED : MJ_FILE_MODE_PRIVATE, 0};
    (void)mj_cache_publish(dir, "stats", text, (size_t)n, &po, NULL);
}

typedef void (*update_fn)(mj_cache_stats *s, const void *arg);

/* Read-modify-write of one shard's file under its lock. */
static void update(const mj_cache_config *cfg, int shard, update_fn fn, const void *arg, int create)
{
    char dir[MJ_CACHE_PATH_MAX + 8], path[MJ_CACHE_PATH_MAX + 16], name[32];
    shard_dir(cfg, shard, dir, sizeof dir);
    snprintf(path, sizeof path, "%s/stats", dir);
    snprintf(name, sizeof name, "stats-%02x", shard & 0xff);
    mj_cache_lock lock;
    int held = 0;
    if (mj_cache_lock_acquire(cfg->lock_dir, name, STATS_LOCK_TIMEOUT_S, &lock, &held) != MOEJIT_OK)
        held = 0; /* no lock dir: update anyway; a lost increment beats a lost kernel */
    /* Counters of a shard that has no entry yet (a failed compile) need its directory. */
    if (create ? mj_cache_ensure_dir(dir, "cache shard", cfg->shared, NULL) == MOEJIT_OK
               : access(dir, F_OK) == 0) {
        mj_cache_stats s;
        read_file(path, &s);
        fn(&s, arg);
        write_file(cfg, dir, &s);
    }
    if (held) mj_cache_lock_release(&lock);
}

static void add_fn(mj_cache_stats *s, const void *arg)
{
    const mj_cache_stats *d = arg;
    for (int i = 0; i < MJ_STAT_COUNT; i++) {
        s->v[i] += d->v[i];
        if (mj_cache_stat_fields[i].is_size && s->v[i] < 0) s->v[i] = 0; /* drift, not debt */
    }
}

void mj_cache_stats_add(const mj_cache_config *cfg, int shard, const mj_cache_stats *delta)
{
    int any = 0;
    for (int i = 0; i < MJ_STAT_COUNT; i++) any |= delta->v[i] != 0;
    if (any) update(cfg, shard, add_fn, delta, 1);
}

void mj_cache_stats_read_shard(const mj_cache_config *cfg, int shard, mj_cache_stats *out)
{
    char path[MJ_CACHE_PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/%02x/stats", cfg->dir, shard & 0xff);
    read_file(path, out);
}

void mj_cache_stats_read_all(const mj_cache_config *cfg, mj_cache_stats *out)
{
    memset(out, 0, sizeof *out);
    for (int sh = 0; sh < MJ_CACHE_SHARDS; sh++) {
        mj_cache_stats s;
        mj_cache_stats_read_shard(cfg, sh, &s);
        for (int i = 0; i < MJ_STAT_COUNT; i++) out->v[i] += s.v[i];
    }
}

static void zero_fn(mj_cache_stats *s, const void *arg)
{
    (void)arg;
    for (int i = 0; i < MJ_STAT_COUNT; i++)
        if (!mj_cache_stat_fields[i].is_size) s->v[i] = 0;
}

moejit_status mj_cache_stats_zero(const mj_cache_config *cfg)
{
    for (int sh = 0; sh < MJ_CACHE_SHARDS; sh++) update(cfg, sh, zero_fn, NULL, 0);
    return MOEJIT_OK;
}

static void size_fn(mj_cache_stats *s, const void *arg)
{
    const int64_t *v = arg;
    s->v[MJ_STAT_BYTES] = v[0];
    s->v[MJ_STAT_FILES] = v[1];
}

void mj_cache_stats_set_size(const mj_cache_config *cfg, int shard, int64_t bytes, int64_t files)
{
    int64_t v[2] = {bytes, files};
    update(cfg, shard, size_fn, v, 0);
}
