/*
 * remote.h — the remote kernel cache tier: one store shared by a fleet, behind each node's
 * disk cache (docs/REMOTE_CACHE.md has the whole design).
 *
 * Lookup order: the disk cache, then the remote; a remote entry is verified (signature under
 * the fleet key, the entry's own checksum, key = SHA-256 of the stored preimage, stored spec =
 * requested spec), then written to the disk cache (backfill) and served. A compile is
 * published locally, then pushed. Before compiling a key that neither tier has, a node takes
 * a short-lived per-key lock on the remote; the other nodes poll for the entry with back-off
 * for a bounded time, then compile themselves.
 *
 * Failure is never fatal: a remote that is down, slow, full or answering garbage costs at most
 * one timeout, then is skipped for a back-off period (30 s, doubling, reset by a success),
 * with one warning per process on stderr. The kernel comes from the disk or a local compile.
 *
 * The store is an interface (mj_remote_ops: get, put, lock, unlock, list, close), so that an
 * engine other than Redis is one more file; Redis (hiredis) is remote_redis.c.
 *
 * Every call is thread-safe: the tier serialises its backend calls under one mutex.
 */
#ifndef MJ_CACHE_REMOTE_H
#define MJ_CACHE_REMOTE_H

#include <stddef.h>
#include <stdint.h>

#include "cache/entry.h"
#include "cache/stats.h"
#include "core/settings.h"
#include "core/sign.h"
#include "moejit.h"

/* ---- the backend interface ------------------------------------------------------------------ */

typedef enum mj_remote_rc {
    MJ_REMOTE_OK = 0,
    MJ_REMOTE_DOWN = 1,    /* no connection, connection lost, or a reply that is not the protocol */
    MJ_REMOTE_TIMEOUT = 2, /* no progress within the timeout */
    MJ_REMOTE_REFUSED = 3  /* the server answered with an error (out of memory, no permission) */
} mj_remote_rc;

typedef struct mj_remote_backend mj_remote_backend;

/* Called once per stored name by list; returning nonzero stops the walk. */
typedef int (*mj_remote_list_fn)(void *ctx, const char *name);

/* A backend: names are the full names on the store (the tier adds the prefix). Each call may
 * (re)connect first; after a failure the backend drops its connection, and the next call
 * reconnects. The tier holds its mutex around every call. */
typedef struct mj_remote_ops {
    const char *name; /* "redis" */
    /* *found = 1 and *data (malloc'ed, caller frees) holding at most max bytes when the name
     * exists; a value longer than max is returned cut to max bytes (it then fails its checks). */
    mj_remote_rc (*get)(mj_remote_backend *b, const char *name, size_t max, uint8_t **data, size_t *n,
                        int *found);
    /* Stores data under name, replacing any value. */
    mj_remote_rc (*put)(mj_remote_backend *b, const char *name, const void *data, size_t n);
    /* Creates name holding token if it does not exist, expiring after ttl_ms; *acquired = 1 when
     * this call created it. A store without atomic create-if-absent sets *acquired = 1. */
    mj_remote_rc (*lock)(mj_remote_backend *b, const char *name, const char *token, int ttl_ms, int *acquired);
    /* Deletes name only if it still holds token (a lock that expired and was taken by another
     * node is left alone). */
    mj_remote_rc (*unlock)(mj_remote_backend *b, const char *name, const char *token);
    /* Calls fn for every name starting with prefix; NULL when the store cannot list. */
    mj_remote_rc (*list)(mj_remote_backend *b, const char *prefix, mj_remote_list_fn fn, void *ctx);
    void (*close)(mj_remote_backend *b);
} mj_remote_ops;

struct mj_remote_backend {
    const mj_remote_ops *ops;
    char error[256]; /* what the last failing call met, for the tier's warning */
};

/* ---- configuration -------------------------------------------------------------------------- */

typedef struct mj_remote_config {
    char url[MJ_SETTINGS_PATH_MAX];           /* "": the tier is off */
    char password_file[MJ_SETTINGS_PATH_MAX]; /* "": no AUTH */
    int tls;
    char prefix[MJ_SETTINGS_REMOTE_PREFIX_MAX + 1];
    double connect_timeout_s, timeout_s;
    int mode;                                 /* MJ_REMOTE_MODE_* */
    char key_file[MJ_SETTINGS_PATH_MAX];      /* "": no fleet key */
    int trust;                                /* MJ_REMOTE_TRUST_* */
    /* Not settings (the API and tests set them): */
    double backoff_s;     /* first back-off after a failure; doubles per failure up to backoff_max_s */
    double backoff_max_s;
    int lock_ttl_ms;      /* a dead holder's lock expires after this */
    double wait_s;        /* longest wait for another node's compile (the cache's lock_timeout) */
} mj_remote_config;

#define MJ_REMOTE_DEFAULT_BACKOFF_S 30.0
#define MJ_REMOTE_DEFAULT_BACKOFF_MAX_S 600.0
#define MJ_REMOTE_DEFAULT_LOCK_TTL_MS 60000

/* The tier's part of settings resolved already (a context's), with the defaults above. */
void mj_remote_config_from_settings(const mj_settings *s, mj_remote_config *out);
/* Resolves the remote rows (and lock_timeout) alone; opts and cli may be NULL. */
moejit_status mj_remote_config_resolve(const moejit_options *opts, const char *const *cli, mj_remote_config *out);

/* ---- the tier ------------------------------------------------------------------------------ */

typedef struct mj_remote mj_remote;

/* Opens the tier on cfg's backend without connecting (the first request connects). *out is NULL
 * and the call succeeds when the tier is off: no url, or no key file while remote_trust is
 * signed (then why, when given, says so). A bad configuration (an unknown URL form, TLS without
 * hiredis_ssl, a password or key file others can read) is an error naming the setting. */
moejit_status mj_remote_open(const mj_remote_config *cfg, mj_remote **out, char *why, size_t why_cap);
/* The same on a given backend (taken over, closed by mj_remote_close, also on failure). */
moejit_status mj_remote_open_backend(const mj_remote_config *cfg, mj_remote_backend *b, mj_remote **out,
                                     char *why, size_t why_cap);
void mj_remote_close(mj_remote *r);
const mj_remote_config *mj_remote_get_config(const mj_remote *r);
/* 1 when entries may be pushed (remote_mode read-write). */
int mj_remote_writable(const mj_remote *r);
/* One line saying whether the tier is on and how: what `moejit config` and `inspect` print.
 * Never fails: a bad configuration is described with its error. */
void mj_remote_describe(const mj_remote_config *cfg, mj_buf *out);

/* Fetches key's entry: 1 when it was found and verified (spec NULL: the stored spec is checked
 * against the stored preimage only); then *e holds it (caller frees with mj_entry_free) and
 * *raw (malloc'ed, caller frees) its bytes as the disk cache stores them. 0 on a miss, a refusal
 * (counted per reason in delta, never stored), a failure (counted) or during back-off. */
int mj_remote_fetch(mj_remote *r, const char *key_hex, const char *spec, mj_entry *e, uint8_t **raw,
                    size_t *raw_len, mj_cache_stats *delta);
/* Signs (with the fleet key, when there is one) and pushes the entry bytes for key. MOEJIT_OK
 * when stored (counted); else an error naming why (read-only mode, back-off, the failure). */
moejit_status mj_remote_push(mj_remote *r, const char *key_hex, const uint8_t *entry, size_t n,
                             mj_cache_stats *delta);
/* Calls fn with the key of every entry on the remote. MOEJIT_ERR_IO when the remote cannot be
 * listed or fails. */
moejit_status mj_remote_list_keys(mj_remote *r, int (*fn)(void *ctx, const char *key_hex), void *ctx);

/* Fleet-wide single flight. begin: when the remote is writable, takes key's lock, or, while
 * another node holds it, polls for the entry with back-off up to wait_s (taking the lock when it
 * expires). Returns 1 when the entry arrived and was verified (filled as by mj_remote_fetch),
 * else 0: the caller compiles (holding the lock or not, f says) and calls end. */
typedef struct mj_remote_flight {
    int held;
    char key[65];
    char token[33];
} mj_remote_flight;
int mj_remote_flight_begin(mj_remote *r, const char *key_hex, const char *spec, mj_remote_flight *f, mj_entry *e,
                           uint8_t **raw, size_t *raw_len, mj_cache_stats *delta);
/* Pushes the compiled entry's bytes (entry NULL: nothing to push, e.g. the compile failed),
 * then releases the lock if held. */
void mj_remote_flight_end(mj_remote *r, mj_remote_flight *f, const uint8_t *entry, size_t n,
                          mj_cache_stats *delta);

/* ---- the value on the remote --------------------------------------------------------------- */

/* value   = entry trailer            entry: the disk cache's bytes (entry.h)
 * trailer = magic flags key_id mac   52 bytes
 * magic   = "MJKRSIG1"; flags = u32 little-endian, 1 signed, 0 unsigned (key_id, mac zero)
 * mac     = HMAC-SHA256(fleet key, "moejit-remote-entry-1\0" || key hex || entry checksum):
 *           the entry's checksum trailer is the SHA-256 of every other byte of it, so the MAC
 *           covers them all while costing no second pass over a cubin of megabytes. */
#define MJ_REMOTE_SIG_MAGIC "MJKRSIG1"
#define MJ_REMOTE_TRAILER_BYTES (8 + 4 + MJ_SIGN_ID_BYTES + MJ_SIGN_MAC_BYTES)

/* Builds the value for entry (signed when key is not NULL) into out. */
moejit_status mj_remote_encode_value(const mj_sign_key *key, const char *key_hex, const uint8_t *entry, size_t n,
                                     mj_buf *out);

/* ---- backends -------------------------------------------------------------------------------- */

/* Redis through hiredis (remote_redis.c): cfg->url is redis://host[:port][/db],
 * rediss://... (TLS) or unix:///path[?db=N]. */
moejit_status mj_remote_redis_open(const mj_remote_config *cfg, mj_remote_backend **out);

#endif
