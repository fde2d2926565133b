/*
 * store.h — where entries live on disk and how one is read, checked, quarantined or removed;
 * shared by the lookup path (cache.c) and the maintenance commands (gc.c, pack.c).
 *
 * Layout of a cache directory:
 *   <dir>/<k0k1>/<k2k3>/<key>.v2.mjk   entries (entry.h)
 *   <dir>/<k0k1>/stats                 per-shard counters (stats.h)
 *   <dir>/quarantine/                  entries that failed a check, kept for a post-mortem
 *   <dir>/failed/                      inputs and logs of failed compiles (runtime/compile_failures.h)
 */
#ifndef MJ_CACHE_STORE_H
#define MJ_CACHE_STORE_H

#include <stdint.h>
#include <sys/stat.h>

#include "cache/config.h"
#include "cache/entry.h"
#include "cache/stats.h"

#define MJ_QUARANTINE_DIR "quarantine"
/* Quarantined files are evidence for a bug report, not cache: gc drops them after a week. */
#define MJ_QUARANTINE_KEEP_SECONDS (7 * 86400)
/* A hit re-stamps the entry's mtime (its last use, which gc orders by) only when the stamp is
 * older than this: a stamp per hit would be a metadata write on every process start. */
#define MJ_STAMP_GRANULARITY_SECONDS 60

/* 1 when key is 64 lowercase hex digits. */
int mj_cache_key_valid(const char *key);
/* The key's first byte: the first-level shard and its stats file. */
int mj_cache_key_shard(const char *key);
/* <dir>/<k0k1>/<k2k3> and <dir>/<k0k1>/<k2k3>/<key>.v2.mjk */
void mj_cache_shard_dir(const mj_cache_config *cfg, const char *key, char *out, size_t cap);
void mj_cache_entry_path(const mj_cache_config *cfg, const char *key, char *out, size_t cap);

/* Reads and checks the entry file at path for key. *found = 0: no file. *found = 1 and
 * *fault == MJ_ENTRY_OK: *e is filled (caller frees). *fault != MJ_ENTRY_OK: the file is bad
 * (the caller quarantines it). expected_spec NULL skips the spec comparison. *st (optional)
 * receives the file's stat. Errors only for out-of-memory or a read failure. */
moejit_status mj_cache_read_entry_file(const mj_cache_config *cfg, const char *path, const char *key,
                                       const char *expected_spec, mj_entry *e, int *found,
                                       mj_entry_fault *fault, struct stat *st);

/* Checks that an entry is what its preimage says: key == SHA-256(preimage) and the preimage's
 * spec line (core/key.c's grammar: "spec <n>:<spec>" as its third line) is the stored spec.
 * Run on every record of a pack and by verify; MJ_ENTRY_OK or the fault. */
mj_entry_fault mj_cache_entry_consistent(const mj_entry *e);

/* Moves the bad file at path to <dir>/quarantine/, counts it, warns once; when the move is
 * impossible the file is removed (a later publish would replace it anyway). */
void mj_cache_quarantine(const mj_cache_config *cfg, const char *path, const char *key,
                         int64_t size, mj_entry_fault fault, mj_cache_stats *delta);

#endif
