/*
 * gc.h — maintenance that walks every entry of a cache directory: list, read, verify, gc,
 * clear, remove, and the summed counters.
 *
 * These work on a directory's configuration, not on an open cache handle, so that the
 * handle (cache.h) can call gc after a publish without the two depending on each other.
 */
#ifndef MJ_CACHE_GC_H
#define MJ_CACHE_GC_H

#include <stdint.h>

#include "cache/config.h"
#include "cache/entry.h"
#include "cache/stats.h"
#include "moejit.h"

typedef struct mj_cache_entry_info {
    char key[65];
    const char *canonical_spec;   /* valid during the callback */
    const char *arch;
    int n_kernels;
    int64_t size;                 /* bytes of the file */
    int64_t last_use;             /* unix seconds (the file's mtime) */
    int64_t created;              /* unix seconds (stored in the entry) */
    double compile_seconds;       /* the original compile */
    const mj_entry *entry;        /* the whole entry (preimage, kernels, log, cubin) */
} mj_cache_entry_info;

/* Return non-zero to stop the walk. */
typedef int (*mj_cache_list_fn)(void *ctx, const mj_cache_entry_info *info);

typedef struct mj_cache_verify_result {
    int64_t checked, ok, bad; /* bad ones were quarantined (reported only in read-only mode) */
} mj_cache_verify_result;
typedef struct mj_cache_gc_result {
    int64_t removed, removed_bytes, kept, kept_bytes, temps_removed;
} mj_cache_gc_result;
moejit_status mj_dir_list(const mj_cache_config *cfg, mj_cache_list_fn fn, void *ctx);
moejit_status mj_dir_read(const mj_cache_config *cfg, const char *key_hex, mj_entry *out);
moejit_status mj_dir_remove(const mj_cache_config *cfg, const char *key_hex);
moejit_status mj_dir_clear(const mj_cache_config *cfg, int64_t *removed);
moejit_status mj_dir_verify(const mj_cache_config *cfg, mj_cache_verify_result *out);
moejit_status mj_dir_gc(const mj_cache_config *cfg, int64_t limit_bytes, int64_t max_age_s,
                        mj_cache_gc_result *out);
moejit_status mj_dir_stats_get(const mj_cache_config *cfg, mj_cache_stats *out);
moejit_status mj_dir_stats_reset(const mj_cache_config *cfg);

#endif
