/*
 * This file contains the remote cache tier's logic over any backend (remote.h): its
 * configuration, the signed value format, fetch with every check before anything is used,
 * push, fleet-wide single flight (lock, or poll with back-off for another node's entry), and
 * the back-off that skips a failed remote for a while instead of for the process's life.
 */
#include "cache/remote.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "cache/fault.h"
#include "cache/store.h"
#include "core/status.h"

#include <openssl/evp.h>

#define MAC_LABEL "moejit-remote-entry-2"
#define FLAG_SIGNED 1u
/* Polling for another node's entry starts fast (a compile that was nearly done) and slows down
 * to this interval, so that waiting nodes do not hammer the remote. */
#define POLL_FIRST_S 0.005
#define POLL_MAX_S 0.25

struct mj_remote {
    mj_remote_config cfg;
    mj_remote_backend *b;
    mj_sign_key key;
    int have_key;
    pthread_mutex_t mu;
    double down_until; /* CLOCK_MONOTONIC seconds until which the remote is skipped */
    double backoff;    /* the next back-off period */
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_s(double s)
{
    if (s <= 0) return;
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {}
}

/* ---- configuration ------------------------------------------------------------------------- */

void mj_remote_config_from_settings(const mj_settings *s, mj_remote_config *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->url, sizeof c->url, "%s", s->remote);
    snprintf(c->password_file, sizeof c->password_file, "%s", s->remote_password_file);
    c->tls = s->remote_tls;
    snprintf(c->prefix, sizeof c->prefix, "%s", s->remote_prefix[0] ? s->remote_prefix : MJ_SETTINGS_DEFAULT_REMOTE_PREFIX);
    c->connect_timeout_s = s->remote_connect_timeout_s > 0 ? s->remote_connect_timeout_s
                                                           : MJ_SETTINGS_DEFAULT_REMOTE_CONNECT_TIMEOUT_S;
    c->timeout_s = s->remote_timeout_s > 0 ? s->remote_timeout_s : MJ_SETTINGS_DEFAULT_REMOTE_TIMEOUT_S;
    c->mode = s->remote_mode;
    snprintf(c->key_file, sizeof c->key_file, "%s", s->remote_key_file);
    c->trust = s->remote_trust;
    c->backoff_s = MJ_REMOTE_DEFAULT_BACKOFF_S;
    c->backoff_max_s = MJ_REMOTE_DEFAULT_BACKOFF_MAX_S;
    c->lock_ttl_ms = MJ_REMOTE_DEFAULT_LOCK_TTL_MS;
    c->wait_s = s->lock_timeout_s;
}

moejit_status mj_remote_config_resolve(const moejit_options *opts, const char *const *cli, mj_remote_config *out)
{
    mj_settings *s = calloc(1, sizeof *s);
    if (!s) return mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "remote config: out of memory");
    moejit_status st = mj_settings_resolve_one(MJ_SETTING_LOCK_TIMEOUT, opts, cli, s);
    for (int i = MJ_SETTING_REMOTE; i <= MJ_SETTING_REMOTE_TRUST && st == MOEJIT_OK; i++)
        st = mj_settings_resolve_one((mj_setting_id)i, opts, cli, s);
    if (st == MOEJIT_OK) mj_remote_config_from_settings(s, out);
    free(s);
    return st;
}

/* ---- open, close ---------------------------------------------------------------------------- */

static const char no_key_why[] =
    "off: MOEJIT_REMOTE is set but MOEJIT_REMOTE_KEY_FILE is not, and with MOEJIT_REMOTE_TRUST=signed "
    "only entries signed under the fleet key are accepted; set MOEJIT_REMOTE_KEY_FILE (or "
    "MOEJIT_REMOTE_TRUST=unsigned for a remote only you can write)";

moejit_status mj_remote_open_backend(const mj_remote_config *cfg, mj_remote_backend *b, mj_remote **out, char *why,
                                     size_t why_cap)
{
    *out = NULL;
    if (why && why_cap) why[0] = '\0';
    mj_remote *r = calloc(1, sizeof *r);
    if (!r) {
        b->ops->close(b);
        return mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "remote: out of memory");
    }
    r->cfg = *cfg;
    r->b = b;
    if (r->cfg.backoff_s <= 0) r->cfg.backoff_s = MJ_REMOTE_DEFAULT_BACKOFF_S;
    if (r->cfg.backoff_max_s < r->cfg.backoff_s) r->cfg.backoff_max_s = r->cfg.backoff_s;
    if (r->cfg.lock_ttl_ms <= 0) r->cfg.lock_ttl_ms = MJ_REMOTE_DEFAULT_LOCK_TTL_MS;
    if (!r->cfg.prefix[0]) snprintf(r->cfg.prefix, sizeof r->cfg.prefix, "%s", MJ_SETTINGS_DEFAULT_REMOTE_PREFIX);
    r->backoff = r->cfg.backoff_s;
    if (cfg->key_file[0]) {
        moejit_status st = mj_sign_key_load("MOEJIT_REMOTE_KEY_FILE", cfg->key_file, &r->key);
        if (st != MOEJIT_OK) {
            b->ops->close(b);
            free(r);
            return st;
        }
        r->have_key = 1;
    }
    pthread_mutex_init(&r->mu, NULL);
    *out = r;
    return MOEJIT_OK;
}

moejit_status mj_remote_open(const mj_remote_config *cfg, mj_remote **out, char *why, size_t why_cap)
{
    *out = NULL;
    if (why && why_cap) why[0] = '\0';
    if (!cfg->url[0]) {
        if (why && why_cap) snprintf(why, why_cap, "off: MOEJIT_REMOTE is not set");
        return MOEJIT_OK;
    }
    if (!cfg->key_file[0] && cfg->trust == MJ_REMOTE_TRUST_SIGNED) {
        if (why && why_cap) snprintf(why, why_cap, "%s", no_key_why);
        return MOEJIT_OK;
    }
    mj_remote_backend *b = NULL;
    moejit_status st = mj_remote_redis_open(cfg, &b);
    if (st != MOEJIT_OK) return st;
    return mj_remote_open_backend(cfg, b, out, why, why_cap);
}

void mj_remote_close(mj_remote *r)
{
    if (!r) return;
    r->b->ops->close(r->b);
    if (r->have_key) mj_sign_key_wipe(&r->key);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

const mj_remote_config *mj_remote_get_config(const mj_remote *r) { return &r->cfg; }

int mj_remote_writable(const mj_remote *r) { return r && r->cfg.mode == MJ_REMOTE_MODE_READ_WRITE; }

void mj_remote_describe(const mj_remote_config *cfg, mj_buf *out)
{
    char why[512];
    mj_remote *r = NULL;
    moejit_status st = mj_remote_open(cfg, &r, why, sizeof why);
    if (st != MOEJIT_OK) {
        mj_buf_printf(out, "refused: %s", moejit_last_error());
        mj_clear_error();
        return;
    }
    if (!r) {
        mj_buf_puts(out, why);
        return;
    }
    mj_buf_printf(out, "on: %s (%s, prefix %s, ", cfg->url, mj_settings_remote_mode_name(cfg->mode), cfg->prefix);
    if (r->have_key)
        mj_buf_printf(out, "pushes signed and accepts %s entries under key id %s)",
                      cfg->trust == MJ_REMOTE_TRUST_SIGNED ? "only signed" : "signed or unsigned", r->key.id_hex);
    else
        mj_buf_puts(out, "no fleet key: pushes unsigned and accepts unsigned entries, MOEJIT_REMOTE_TRUST=unsigned)");
    mj_remote_close(r);
}

/* ---- failures and back-off ------------------------------------------------------------------ */

/* Under r->mu: 1 when the remote may be asked now; else counts a skip. */
static int available(mj_remote *r, mj_cache_stats *delta)
{
    if (r->down_until > 0 && now_s() < r->down_until) {
        if (delta) delta->v[MJ_STAT_REMOTE_SKIPPED]++;
        return 0;
    }
    return 1;
}

/* Under r->mu: books the outcome of one backend call. */
static void note(mj_remote *r, mj_remote_rc rc, const char *what, mj_cache_stats *delta)
{
    if (rc == MJ_REMOTE_OK) {
        r->down_until = 0;
        r->backoff = r->cfg.backoff_s;
        return;
    }
    if (delta) delta->v[rc == MJ_REMOTE_TIMEOUT ? MJ_STAT_REMOTE_TIMEOUTS : MJ_STAT_REMOTE_ERRORS]++;
    if (rc == MJ_REMOTE_REFUSED) {
        /* The server is up and said no (full, no permission): nothing to back off from. */
        mj_cache_warn(MJ_WARN_REMOTE, "remote cache %s: %s %s; kernels are served from the local cache or "
                      "compiled", r->cfg.url, what, r->b->error);
        return;
    }
    double period = r->backoff;
    r->down_until = now_s() + period;
    r->backoff = r->backoff * 2 < r->cfg.backoff_max_s ? r->backoff * 2 : r->cfg.backoff_max_s;
    mj_cache_warn(MJ_WARN_REMOTE, "remote cache %s: %s %s; kernels are served from the local cache or compiled, "
                  "and the remote is skipped for %gs (longer after each failure)", r->cfg.url, what, r->b->error,
                  period);
}

/* ---- names and values ----------------------------------------------------------------------- */

static void entry_name(const mj_remote *r, const char *key, char *out, size_t cap)
{
    snprintf(out, cap, "%sentry:v%u:%s", r->cfg.prefix, MJ_ENTRY_VERSION, key);
}

static void lock_name(const mj_remote *r, const char *key, char *out, size_t cap)
{
    snprintf(out, cap, "%slock:%s", r->cfg.prefix, key);
}

static void put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The bytes the MAC covers: a label, the key and the SHA-256 of the whole entry. The entry's own
 * checksum (XXH3 since format 2) detects corruption only, so it cannot stand for the bytes. 0 when
 * libcrypto fails. */
static size_t mac_input(const char *key_hex, const uint8_t *entry, size_t n, uint8_t *out)
{
    size_t o = 0;
    memcpy(out, MAC_LABEL, sizeof MAC_LABEL);
    o += sizeof MAC_LABEL;
    memcpy(out + o, key_hex, 64);
    o += 64;
    unsigned int len = 0;
    if (EVP_Digest(entry, n, out + o, &len, EVP_sha256(), NULL) != 1 || len != 32) return 0;
    return o + 32;
}

moejit_status mj_remote_encode_value(const mj_sign_key *key, const char *key_hex, const uint8_t *entry, size_t n,
                                     mj_buf *out)
{
    if (n < 32 || strlen(key_hex) != 64)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "remote: not an entry (%zu bytes) or key", n);
    uint8_t trailer[MJ_REMOTE_TRAILER_BYTES];
    memset(trailer, 0, sizeof trailer);
    memcpy(trailer, MJ_REMOTE_SIG_MAGIC, 8);
    put_u32(trailer + 8, key ? FLAG_SIGNED : 0);
    if (key) {
        uint8_t msg[sizeof MAC_LABEL + 64 + 32];
        size_t m = mac_input(key_hex, entry, n, msg);
        if (!m) return mj_fail(MOEJIT_ERR_INTERNAL, "remote: libcrypto SHA-256 failed");
        memcpy(trailer + 12, key->id, MJ_SIGN_ID_BYTES);
        moejit_status st = mj_sign_mac(key, msg, m, trailer + 12 + MJ_SIGN_ID_BYTES);
        if (st != MOEJIT_OK) return st;
    }
    mj_buf_reset(out);
    mj_buf_append(out, entry, n);
    mj_buf_append(out, trailer, sizeof trailer);
    return mj_buf_ok(out) ? MOEJIT_OK : mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "remote: out of memory");
}

/* Checks a fetched value; MJ_STAT_COUNT when it is good (then *e is filled), else the counter
 * of the reason it was refused (*reason names it). */
static mj_cache_stat verify(const mj_remote *r, const char *key, const char *spec, const uint8_t *d, size_t n,
                            mj_entry *e, const char **reason)
{
    *reason = "not a moejit remote entry";
    if (n < MJ_REMOTE_TRAILER_BYTES + 32) return MJ_STAT_REMOTE_REFUSED_CORRUPT;
    const uint8_t *t = d + n - MJ_REMOTE_TRAILER_BYTES;
    size_t len = n - MJ_REMOTE_TRAILER_BYTES;
    uint32_t flags = get_u32(t + 8);
    if (memcmp(t, MJ_REMOTE_SIG_MAGIC, 8) != 0 || flags > FLAG_SIGNED) return MJ_STAT_REMOTE_REFUSED_CORRUPT;
    if (flags == FLAG_SIGNED && r->have_key) {
        if (memcmp(t + 12, r->key.id, MJ_SIGN_ID_BYTES) != 0) {
            *reason = "signed under another key";
            return MJ_STAT_REMOTE_REFUSED_OTHER_KEY;
        }
        uint8_t msg[sizeof MAC_LABEL + 64 + 32];
        size_t m = mac_input(key, d, len, msg);
        if (!m || !mj_sign_check(&r->key, msg, m, t + 12 + MJ_SIGN_ID_BYTES)) {
            *reason = "bad signature";
            return MJ_STAT_REMOTE_REFUSED_SIGNATURE;
        }
    } else if (flags != FLAG_SIGNED && r->cfg.trust == MJ_REMOTE_TRUST_SIGNED) {
        *reason = "not signed (MOEJIT_REMOTE_TRUST=signed)";
        return MJ_STAT_REMOTE_REFUSED_UNSIGNED;
    }
    mj_entry_fault fault = MJ_ENTRY_OK;
    if (mj_entry_decode(d, len, e, &fault) != MOEJIT_OK) {
        mj_clear_error();
        *reason = "out of memory";
        return MJ_STAT_REMOTE_REFUSED_CORRUPT;
    }
    if (fault != MJ_ENTRY_OK) {
        *reason = mj_entry_fault_name(fault);
        return MJ_STAT_REMOTE_REFUSED_CORRUPT;
    }
    if (strcmp(e->key, key) != 0) fault = MJ_ENTRY_KEY_MISMATCH;
    if (fault == MJ_ENTRY_OK) fault = mj_cache_entry_consistent(e);
    if (fault == MJ_ENTRY_OK && spec && strcmp(e->canonical_spec, spec) != 0) fault = MJ_ENTRY_SPEC_MISMATCH;
    if (fault == MJ_ENTRY_OK) return MJ_STAT_COUNT;
    mj_entry_free(e);
    memset(e, 0, sizeof *e);
    *reason = mj_entry_fault_name(fault);
    return fault == MJ_ENTRY_KEY_MISMATCH || fault == MJ_ENTRY_PREIMAGE_KEY ? MJ_STAT_REMOTE_REFUSED_KEY
                                                                            : MJ_STAT_REMOTE_REFUSED_SPEC;
}

/* One GET and its checks. While polling (single flight) misses and refusals are not counted
 * again: the lookup before the flight counted them. */
static int fetch(mj_remote *r, const char *key, const char *spec, mj_entry *e, uint8_t **raw, size_t *raw_len,
                 mj_cache_stats *delta, int polling)
{
    *raw = NULL;
    *raw_len = 0;
    memset(e, 0, sizeof *e);
    if (!mj_cache_key_valid(key)) return 0;
    char name[MJ_SETTINGS_REMOTE_PREFIX_MAX + 96];
    entry_name(r, key, name, sizeof name);
    uint8_t *data = NULL;
    size_t n = 0;
    int found = 0;
    pthread_mutex_lock(&r->mu);
    if (!available(r, delta)) {
        pthread_mutex_unlock(&r->mu);
        return 0;
    }
    mj_remote_rc rc = r->b->ops->get(r->b, name, (size_t)MJ_ENTRY_MAX_BYTES + MJ_REMOTE_TRAILER_BYTES, &data, &n, &found);
    note(r, rc, "fetch:", delta);
    pthread_mutex_unlock(&r->mu);
    if (rc != MJ_REMOTE_OK) return 0;
    if (!found) {
        if (!polling) delta->v[MJ_STAT_REMOTE_MISSES]++;
        return 0;
    }
    const char *reason = NULL;
    mj_cache_stat refusal = verify(r, key, spec, data, n, e, &reason);
    if (refusal != MJ_STAT_COUNT) {
        free(data);
        if (!polling) {
            delta->v[refusal]++;
            mj_cache_warn(MJ_WARN_REMOTE_REFUSED, "remote cache %s: the entry for key %s was refused (%s); it is "
                          "neither used nor stored", r->cfg.url, key, reason);
        }
        return 0;
    }
    *raw = data;
    *raw_len = n - MJ_REMOTE_TRAILER_BYTES;
    delta->v[MJ_STAT_REMOTE_HITS]++;
    return 1;
}

int mj_remote_fetch(mj_remote *r, const char *key_hex, const char *spec, mj_entry *e, uint8_t **raw,
                    size_t *raw_len, mj_cache_stats *delta)
{
    return fetch(r, key_hex, spec, e, raw, raw_len, delta, 0);
}

moejit_status mj_remote_push(mj_remote *r, const char *key_hex, const uint8_t *entry, size_t n,
                             mj_cache_stats *delta)
{
    if (!mj_remote_writable(r))
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "remote_mode: the remote %s is read-only "
                       "(MOEJIT_REMOTE_MODE=read-only), so nothing is pushed; allowed: read-write", r->cfg.url);
    if (!mj_cache_key_valid(key_hex))
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "remote: \"%.70s\" is not a key", key_hex);
    mj_buf value = MJ_BUF_INIT;
    moejit_status st = mj_remote_encode_value(r->have_key ? &r->key : NULL, key_hex, entry, n, &value);
    if (st != MOEJIT_OK) {
        mj_buf_free(&value);
        return st;
    }
    char name[MJ_SETTINGS_REMOTE_PREFIX_MAX + 96];
    entry_name(r, key_hex, name, sizeof name);
    pthread_mutex_lock(&r->mu);
    mj_remote_rc rc = MJ_REMOTE_DOWN;
    int up = available(r, delta);
    if (up) {
        rc = r->b->ops->put(r->b, name, value.data, value.len);
        note(r, rc, "push:", delta);
    }
    char error[sizeof r->b->error];
    snprintf(error, sizeof error, "%s", up ? r->b->error : "skipped during the back-off after a failure");
    pthread_mutex_unlock(&r->mu);
    mj_buf_free(&value);
    if (rc != MJ_REMOTE_OK) return mj_fail(MOEJIT_ERR_IO, "remote %s: push of key %s failed: %s", r->cfg.url, key_hex, error);
    delta->v[MJ_STAT_REMOTE_PUSHES]++;
    return MOEJIT_OK;
}

typedef struct list_ctx {
    size_t skip;
    int (*fn)(void *ctx, const char *key_hex);
    void *ctx;
} list_ctx;

static int list_one(void *vctx, const char *name)
{
    list_ctx *x = vctx;
    const char *key = name + x->skip;
    return strlen(name) == x->skip + 64 && mj_cache_key_valid(key) ? x->fn(x->ctx, key) : 0;
}

moejit_status mj_remote_list_keys(mj_remote *r, int (*fn)(void *ctx, const char *key_hex), void *ctx)
{
    if (!r->b->ops->list)
        return mj_fail(MOEJIT_ERR_IO, "remote %s: the %s backend cannot list its entries", r->cfg.url, r->b->ops->name);
    char prefix[MJ_SETTINGS_REMOTE_PREFIX_MAX + 32];
    snprintf(prefix, sizeof prefix, "%sentry:v%u:", r->cfg.prefix, MJ_ENTRY_VERSION);
    list_ctx x = {strlen(prefix), fn, ctx};
    pthread_mutex_lock(&r->mu);
    mj_remote_rc rc = r->b->ops->list(r->b, prefix, list_one, &x);
    note(r, rc, "list:", NULL);
    char error[sizeof r->b->error];
    snprintf(error, sizeof error, "%s", r->b->error);
    pthread_mutex_unlock(&r->mu);
    return rc == MJ_REMOTE_OK ? MOEJIT_OK : mj_fail(MOEJIT_ERR_IO, "remote %s: listing failed: %s", r->cfg.url, error);
}

/* ---- fleet-wide single flight ---------------------------------------------------------------- */

static void new_token(char out[33])
{
    unsigned char b[16];
    if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) {
        /* No entropy source: a token unique to this process and moment is enough for a lock. */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        unsigned long long v[2] = {(unsigned long long)ts.tv_nsec ^ ((unsigned long long)getpid() << 32),
                                   (unsigned long long)ts.tv_sec};
        memcpy(b, v, sizeof b);
    }
    for (int i = 0; i < 16; i++) snprintf(out + 2 * i, 3, "%02x", b[i]);
}

int mj_remote_flight_begin(mj_remote *r, const char *key_hex, const char *spec, mj_remote_flight *f, mj_entry *e,
                           uint8_t **raw, size_t *raw_len, mj_cache_stats *delta)
{
    memset(f, 0, sizeof *f);
    memset(e, 0, sizeof *e);
    *raw = NULL;
    *raw_len = 0;
    if (!mj_remote_writable(r) || !mj_cache_key_valid(key_hex)) return 0; /* read-only nodes never lock */
    snprintf(f->key, sizeof f->key, "%s", key_hex);
    new_token(f->token);
    char name[MJ_SETTINGS_REMOTE_PREFIX_MAX + 96];
    lock_name(r, key_hex, name, sizeof name);
    double deadline = now_s() + (r->cfg.wait_s > 0 ? r->cfg.wait_s : 0);
    double pause = POLL_FIRST_S;
    int waited = 0;
    /* Each round takes a request or two and a pause of at least POLL_FIRST_S: the count bound is
     * a backstop to the deadline. */
    for (long round = 0; round < 1000000; round++) {
        int acquired = 0;
        pthread_mutex_lock(&r->mu);
        if (!available(r, delta)) {
            pthread_mutex_unlock(&r->mu);
            return 0;
        }
        mj_remote_rc rc = r->b->ops->lock(r->b, name, f->token, r->cfg.lock_ttl_ms, &acquired);
        note(r, rc, "lock:", delta);
        pthread_mutex_unlock(&r->mu);
        if (rc != MJ_REMOTE_OK) return 0;
        if (acquired) {
            f->held = 1;
            /* The entry may have been pushed between the caller's lookup and this lock. */
            if (fetch(r, key_hex, spec, e, raw, raw_len, delta, 1)) {
                mj_remote_flight_end(r, f, NULL, 0, delta);
                if (waited) delta->v[MJ_STAT_REMOTE_WAITS]++;
                return 1;
            }
            return 0;
        }
        double now = now_s();
        if (now >= deadline) {
            mj_cache_warn(MJ_WARN_LOCK, "waited %gs for another node compiling key %s; compiling anyway "
                          "(lock_timeout, MOEJIT_LOCK_TIMEOUT)", r->cfg.wait_s, key_hex);
            delta->v[MJ_STAT_LOCK_TIMEOUTS]++;
            return 0;
        }
        waited = 1;
        sleep_s(pause < deadline - now ? pause : deadline - now);
        pause = pause * 2 < POLL_MAX_S ? pause * 2 : POLL_MAX_S;
        if (fetch(r, key_hex, spec, e, raw, raw_len, delta, 1)) {
            delta->v[MJ_STAT_REMOTE_WAITS]++;
            return 1;
        }
    }
    return 0;
}

void mj_remote_flight_end(mj_remote *r, mj_remote_flight *f, const uint8_t *entry, size_t n, mj_cache_stats *delta)
{
    if (entry && n && mj_remote_writable(r) && f->key[0]) {
        if (mj_remote_push(r, f->key, entry, n, delta) != MOEJIT_OK) mj_clear_error(); /* counted and warned */
    }
    if (!f->held) return;
    char name[MJ_SETTINGS_REMOTE_PREFIX_MAX + 96];
    lock_name(r, f->key, name, sizeof name);
    pthread_mutex_lock(&r->mu);
    /* A remote that is down lets the lock expire by itself. */
    if (available(r, NULL)) {
        mj_remote_rc rc = r->b->ops->unlock(r->b, name, f->token);
        note(r, rc, "unlock:", delta);
    }
    pthread_mutex_unlock(&r->mu);
    f->held = 0;
}
