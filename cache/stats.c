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
#include "cache/fault.h"
#include "cache/publish.h"
#include "core/file.h"
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
    {MJ_STAT_REMOTE_HITS, "remote_hits", "Remote hits", 0},
    {MJ_STAT_REMOTE_MISSES, "remote_misses", "Remote misses", 0},
    {MJ_STAT_REMOTE_PUSHES, "remote_pushes", "Remote pushes", 0},
    {MJ_STAT_REMOTE_ERRORS, "remote_errors", "Remote errors", 0},
    {MJ_STAT_REMOTE_TIMEOUTS, "remote_timeouts", "Remote timeouts", 0},
    {MJ_STAT_REMOTE_REFUSED_SIGNATURE, "remote_refused_signature", "Remote refused (signature)", 0},
    {MJ_STAT_REMOTE_REFUSED_OTHER_KEY, "remote_refused_other_key", "Remote refused (other key)", 0},
    {MJ_STAT_REMOTE_REFUSED_UNSIGNED, "remote_refused_unsigned", "Remote refused (unsigned)", 0},
    {MJ_STAT_REMOTE_REFUSED_CORRUPT, "remote_refused_corrupt", "Remote refused (corrupt)", 0},
    {MJ_STAT_REMOTE_REFUSED_KEY, "remote_refused_key", "Remote refused (key)", 0},
    {MJ_STAT_REMOTE_REFUSED_SPEC, "remote_refused_spec", "Remote refused (spec)", 0},
    {MJ_STAT_REMOTE_WAITS, "remote_waits", "Remote waits for a compile", 0},
    {MJ_STAT_REMOTE_SKIPPED, "remote_skipped", "Remote skipped (back-off)", 0},
};

/* A stats lock held while counters change, so that the file is never half written (no
 * wait long enough to matter: holders keep it for one small read and write). */
#define STATS_LOCK_TIMEOUT_S 5.0

static void shard_dir(const mj_cache_config *cfg, int shard, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%02x", cfg->dir, shard & 0xff);
}

/* Largest stats file read: ours are a few hundred bytes. */
#define STATS_MAX_BYTES 4096

static void read_file(const char *path, mj_cache_stats *out)
{
    memset(out, 0, sizeof *out);
    struct stat st;
    memset(&st, 0, sizeof st);
    /* Non-blocking, regular files only, no links: a FIFO here must not hang `cache stats`. */
    int fd = mj_file_open_regular(path, MJ_FILE_NOFOLLOW, &st);
    if (fd < 0) {
        if (errno == EINVAL || errno == ELOOP)
            mj_cache_warn(MJ_WARN_UNSAFE, "cache stats: %s is a %s, not a regular file; its counters are skipped",
                          path, errno == ELOOP ? "symbolic link" : mj_file_kind(st.st_mode));
        return;
    }
    char data[STATS_MAX_BYTES + 1];
    ssize_t got = mj_cache_sys_read_all(fd, data, STATS_MAX_BYTES);
    close(fd);
    if (got < 0) return;
    data[got] = '\0';
    const char *p = data;
    if (strncmp(p, "moejit-stats 1\n", 15) == 0) {
        p += 15;
        unsigned id;
        long long v;
        int used;
        /* Unknown ids come from a newer moejit: skipped, never misread. */
        while (sscanf(p, "%u %lld\n%n", &id, &v, &used) == 2) {
            if (id < MJ_STAT_COUNT) out->v[id] = v;
            p += used;
        }
    }
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
    /* No usable lock dir (missing, a link, not ours): update anyway; a lost increment beats a
     * lost kernel. */
    if (mj_cache_check_own_dir(cfg->lock_dir, "lock_dir", cfg->shared, NULL) != MOEJIT_OK ||
        mj_cache_lock_acquire(cfg->lock_dir, name, STATS_LOCK_TIMEOUT_S, &lock, &held) != MOEJIT_OK)
        held = 0;
    mj_clear_error();
    /* Counters of a shard that has no entry yet (a failed compile) need its directory. */
    if (create ? mj_cache_ensure_own_dir(dir, "cache shard", cfg->shared, NULL) == MOEJIT_OK
               : mj_cache_check_own_dir(dir, "cache shard", cfg->shared, NULL) == MOEJIT_OK) {
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
    char dir[MJ_CACHE_PATH_MAX + 8], path[MJ_CACHE_PATH_MAX + 16];
    shard_dir(cfg, shard, dir, sizeof dir);
    snprintf(path, sizeof path, "%s/stats", dir);
    int err = 0;
    /* A shard directory another user controls is not read from (dirs.h). */
    if (mj_cache_check_own_dir(dir, "cache shard", cfg->shared, &err) != MOEJIT_OK) {
        if (err != ENOENT) mj_cache_warn(MJ_WARN_UNSAFE, "%s; its counters are skipped", moejit_last_error());
        mj_clear_error();
        memset(out, 0, sizeof *out);
        return;
    }
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
