/*
 * stats.h — the cache's counters, persisted per shard (ccache's model).
 *
 * Each first-level shard directory <cache>/<k0k1>/ holds a text file "stats":
 *
 *   moejit-stats 1
 *   <id> <value>          one line per counter, id = the mj_cache_stat number
 *
 * Updates take the shard's stats lock in the node-local lock directory and replace the file
 * with an atomic rename, so a reader never sees half a file. Counters are advisory: processes
 * on other nodes of a shared cache may lose an increment, never corrupt the file. The size
 * counters (bytes, files) are what gc compares against the limit between full scans; a full
 * scan (gc, verify) recounts them.
 */
#ifndef MJ_CACHE_STATS_H
#define MJ_CACHE_STATS_H

#include <stdint.h>

#include "cache/config.h"
#include "moejit.h"

/* Persisted ids: explicit numbers, never renumbered or reused; new counters are appended. */
typedef enum mj_cache_stat {
    MJ_STAT_HITS = 0,           /* entries served from disk */
    MJ_STAT_MISSES = 1,         /* lookups that found no valid entry */
    MJ_STAT_COMPILES = 2,       /* build calls (NVRTC compiles) made on a miss */
    MJ_STAT_COMPILE_US = 3,     /* total compile wall time, microseconds */
    MJ_STAT_QUARANTINED = 4,    /* entries moved to quarantine/ */
    MJ_STAT_WRITE_FAILURES = 5, /* entries that could not be written (ENOSPC, EROFS, ...) */
    MJ_STAT_LOCK_TIMEOUTS = 6,  /* compiles started after the lock wait timed out */
    MJ_STAT_EVICTED = 7,        /* entries removed by gc */
    MJ_STAT_BYTES = 8,          /* size counter: bytes of entries in the shard */
    MJ_STAT_FILES = 9,          /* size counter: entries in the shard */
    MJ_STAT_COMPILE_FAILURES = 10, /* build calls that failed */
    /* The remote tier (cache/remote.h): */
    MJ_STAT_REMOTE_HITS = 11,      /* entries fetched from the remote, verified and served */
    MJ_STAT_REMOTE_MISSES = 12,    /* remote lookups that found no entry */
    MJ_STAT_REMOTE_PUSHES = 13,    /* entries written to the remote */
    MJ_STAT_REMOTE_ERRORS = 14,    /* failed requests (connection lost, refused, error replies) */
    MJ_STAT_REMOTE_TIMEOUTS = 15,  /* requests that timed out */
    MJ_STAT_REMOTE_REFUSED_SIGNATURE = 16, /* fetched entries whose signature did not verify */
    MJ_STAT_REMOTE_REFUSED_OTHER_KEY = 17, /* fetched entries signed under another key */
    MJ_STAT_REMOTE_REFUSED_UNSIGNED = 18,  /* unsigned entries refused (remote_trust=signed) */
    MJ_STAT_REMOTE_REFUSED_CORRUPT = 19,   /* values that are no valid entry (checksum, format) */
    MJ_STAT_REMOTE_REFUSED_KEY = 20,       /* stored key not the requested key or SHA-256(preimage) */
    MJ_STAT_REMOTE_REFUSED_SPEC = 21,      /* stored spec not the requested or the preimage's spec */
    MJ_STAT_REMOTE_WAITS = 22,     /* entries received after waiting for another node's compile */
    MJ_STAT_REMOTE_SKIPPED = 23,   /* lookups that skipped the remote during its back-off */
    MJ_STAT_COUNT = 24
} mj_cache_stat;

typedef struct mj_cache_stat_field {
    mj_cache_stat id;
    const char *name;  /* JSON key: "hits" */
    const char *label; /* human: "Hits" */
    int is_size;       /* a size counter: kept by reset, recounted by gc */
} mj_cache_stat_field;

extern const mj_cache_stat_field mj_cache_stat_fields[MJ_STAT_COUNT];

typedef struct mj_cache_stats {
    int64_t v[MJ_STAT_COUNT];
} mj_cache_stats;

#define MJ_CACHE_SHARDS 256

/* Adds delta to shard's counters (shard = the key's first byte). Silent on failure:
 * counters must never fail a kernel load. */
void mj_cache_stats_add(const mj_cache_config *cfg, int shard, const mj_cache_stats *delta);
/* Reads one shard (missing file: zeros). */
void mj_cache_stats_read_shard(const mj_cache_config *cfg, int shard, mj_cache_stats *out);
/* Sums every shard. */
void mj_cache_stats_read_all(const mj_cache_config *cfg, mj_cache_stats *out);
/* Zeroes the counters (is_size == 0) of every shard, keeping the size counters. */
moejit_status mj_cache_stats_zero(const mj_cache_config *cfg);
/* Sets the size counters of a shard (after a full scan), keeping the other counters. */
void mj_cache_stats_set_size(const mj_cache_config *cfg, int shard, int64_t bytes, int64_t files);

#endif
