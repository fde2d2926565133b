/*
 * cache.h — the on-disk kernel cache as the registry sees it: look a key up, or build it
 * once (per machine) under a per-key lock and publish the result atomically; and, for the CLI
 * (`moejit cache ls|stats|verify|gc|clear|export|import`), the maintenance calls.
 *
 * Settings: config.h. Entry format: entry.h. On-disk layout: store.h. Counters: stats.h.
 * Every call is thread-safe; one mj_cache may be shared by all threads of a process.
 */
#ifndef MJ_CACHE_H
#define MJ_CACHE_H

#include <stdint.h>

#include "cache/config.h"
#include "cache/entry.h"
#include "cache/gc.h"
#include "core/key.h"
#include "core/sign.h"
#include "moejit.h"
#include "core/program.h"
#include "cache/stats.h"

typedef struct mj_cache mj_cache;

/* Resolves the configuration (opts, then environment, then defaults; a bad value is an
 * error naming the setting) and opens the cache directory. opts may be NULL.
 * In read-write mode the directory is created 0700. A directory owned by another user or
 * writable by others (group too, unless shared) is refused with MOEJIT_ERR_IO. A directory
 * that cannot be created (read-only or full file system, no permission) is not an error: the
 * cache then compiles in memory and says so once on stderr. */
moejit_status mj_cache_open(const moejit_options *opts, mj_cache **out);
/* The same with an explicit configuration (tests, the CLI's --cache-dir etc.). */
moejit_status mj_cache_open_config(const mj_cache_config *cfg, mj_cache **out);
/* The same with settings resolved already (a context's). */
moejit_status mj_cache_open_settings(const mj_settings *s, mj_cache **out);
void mj_cache_close(mj_cache *cache);
const mj_cache_config *mj_cache_get_config(const mj_cache *cache);

/* The remote tier behind the disk (cache/remote.h): mj_cache_open and mj_cache_open_settings
 * attach the one the settings configure (a bad remote configuration fails the open); set_remote
 * replaces it (NULL: none) and takes r over, closing it with the cache. */
struct mj_remote;
void mj_cache_set_remote(mj_cache *cache, struct mj_remote *r);
struct mj_remote *mj_cache_get_remote(const mj_cache *cache);

/* Builds a program on a miss (emit + NVRTC); called at most once per call. */
typedef moejit_status (*mj_build_fn)(void *build_ctx, mj_program *out);

/* On a hit, fills *out from the entry (after checking its checksum and that its stored
 * spec equals canonical_spec) and sets *hit = 1. On a miss, takes the key's lock, looks
 * again, else calls build, publishes the entry (in read-write mode) and returns the
 * program with *hit = 0. A corrupt entry is quarantined and rebuilt; a failure to write
 * (ENOSPC, EACCES, EROFS) still returns the built program, with one warning on stderr.
 * Offline mode: a miss is MOEJIT_ERR_CACHE_MISS, "offline cache: no entry for spec <canonical>
 * (key <hex>)". Read-only mode: a miss builds in memory and writes nothing. */
moejit_status mj_cache_get_or_build(mj_cache *cache, const mj_key *key, const char *preimage,
                                    const char *canonical_spec, mj_build_fn build,
                                    void *build_ctx, mj_program *out, int *hit);

/* Looks a key up without building. *found = 1 and *out filled for a valid entry; a bad entry
 * is quarantined (not in read-only mode) and reported as not found. canonical_spec NULL: the
 * stored spec is not compared (lookup by key alone, for `inspect KEY`). Counts nothing. */
moejit_status mj_cache_lookup(mj_cache *cache, const char *key_hex, const char *canonical_spec,
                              mj_program *out, int *found);
/* Publishes p as the entry for key (warm workers, import). MOEJIT_ERR_IO on a write failure;
 * MOEJIT_ERR_INVALID_ARGUMENT in read-only or off mode. */
moejit_status mj_cache_put(mj_cache *cache, const char *key_hex, const char *preimage,
                           const char *canonical_spec, const mj_program *p);

/* ---- maintenance (CLI): gc.h's walks over this handle's directory ------------------------ */

/* Calls fn for every valid entry (bad ones are skipped, not touched; `verify` handles them). */
moejit_status mj_cache_list(mj_cache *cache, mj_cache_list_fn fn, void *ctx);
/* The full entry for key (no spec check). MOEJIT_ERR_CACHE_MISS when absent or invalid. */
moejit_status mj_cache_read(mj_cache *cache, const char *key_hex, mj_entry *out);
/* Removes one entry. MOEJIT_ERR_CACHE_MISS when there is none. */
moejit_status mj_cache_remove(mj_cache *cache, const char *key_hex);
/* Removes every entry and temp file (keeps the counters other than size). */
moejit_status mj_cache_clear(mj_cache *cache, int64_t *removed);

/* Re-checks every entry's checksum and key; quarantines bad ones; recounts shard sizes. */
moejit_status mj_cache_verify(mj_cache *cache, mj_cache_verify_result *out);

/* Removes entries unused for more than max_age_s (0: no age limit), then least recently used
 * ones until the total is <= limit_bytes (<= 0: the configured limit); also stale temp files
 * and old quarantined files. Recounts the shard size counters. */
moejit_status mj_cache_gc(mj_cache *cache, int64_t limit_bytes, int64_t max_age_s,
                          mj_cache_gc_result *out);

/* Writes the counters this handle holds in memory (hits are batched so that a disk hit does
 * no counter I/O) to the shard files; done by every miss, by close and by mj_cache_stats_get. */
void mj_cache_flush_stats(mj_cache *cache);
/* Sums the persisted counters of every shard (after flushing this handle's). */
moejit_status mj_cache_stats_get(mj_cache *cache, mj_cache_stats *out);
/* Zeroes the counters (not the size counters). */
moejit_status mj_cache_stats_reset(mj_cache *cache);

/* Pack (all integers little-endian; str = u32 length + bytes):
 *
 *   pack     = magic version count record* trailer
 *   magic    = "MJKPACK1"; version = u32 1 (unsigned) or 2 (signed); count = u32
 *   record   = str key (64 hex digits), str entry (the entry file's bytes, entry.h)
 *   trailer  = [v2: key_id (8 bytes, core/sign.h) mac (32 bytes: HMAC-SHA256 under the pack key
 *              of every byte before the mac)] checksum (32 bytes: SHA-256 of every byte before)
 *
 * Import checks everything before it adds anything, and refuses the whole pack for one bad
 * record, naming it: the checksum, the signature, then for each record its entry's own
 * checksum, that the entry's key is the record's key and the SHA-256 of its stored preimage,
 * that the preimage's spec is the stored spec, and that no key appears twice. Without a
 * signature these checks catch corruption and inconsistency, not a forged cubin under a
 * genuine key and preimage: only packs signed under a key you hold are accepted unless
 * trust_unsigned is set. */
typedef struct mj_pack_opts {
    const mj_sign_key *key; /* export: sign with it (NULL: unsigned); import: verify under it */
    int trust_unsigned;     /* import: accept an unsigned pack, or a signed one with no key */
} mj_pack_opts;
typedef int (*mj_cache_select_fn)(void *ctx, const mj_cache_entry_info *info); /* 1: include */
/* Writes the selected entries (select NULL: all) to path atomically; opts may be NULL. */
moejit_status mj_cache_export(mj_cache *cache, const char *path, mj_cache_select_fn select,
                              void *ctx, const mj_pack_opts *opts, int64_t *exported);
/* Checks the whole pack (see above) before adding any entry; entries already present are
 * skipped. opts NULL: no key and no trust, which refuses every pack. */
moejit_status mj_cache_import(mj_cache *cache, const char *path, const mj_pack_opts *opts,
                              int64_t *added, int64_t *present);
/* The same on a pack already in memory; name is used in messages. */
moejit_status mj_cache_import_bytes(mj_cache *cache, const char *name, const uint8_t *data, size_t n,
                                    const mj_pack_opts *opts, int64_t *added, int64_t *present);

#endif
