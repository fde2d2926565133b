/*
 * This file contains the Redis backend of the remote cache tier (remote.h) through hiredis:
 * URL parsing, a lazily (re)connected blocking context with connect and I/O timeouts, AUTH from
 * a password file, GETRANGE/SET/SET NX PX/compare-and-delete/SCAN, and SIGPIPE blocked in the
 * calling thread around every request so that a peer that went away cannot kill the host.
 */
#include "cache/remote.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#ifdef MJ_HAVE_HIREDIS_SSL
#include <hiredis/hiredis_ssl.h>
#endif

#include "core/file.h"
#include "core/status.h"

/* Largest password file read: Redis passwords are short. */
#define PASSWORD_MAX 4096

/* Deletes the lock only while it holds the caller's token: an expired lock another node took
 * since is not ours to delete. */
static const char unlock_script[] =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

typedef struct redis_backend {
    mj_remote_backend base;
    char host[256];
    int port;
    char unix_path[MJ_SETTINGS_PATH_MAX];
    int db;
    int tls;
    struct timeval connect_tv, io_tv;
    char *user;     /* NULL: AUTH with the password alone */
    char *password; /* NULL: no AUTH */
    redisContext *ctx;
    pid_t ctx_pid;  /* a context inherited through fork is dropped, never shared */
#ifdef MJ_HAVE_HIREDIS_SSL
    redisSSLContext *ssl;
#endif
} redis_backend;

/* ---- configuration ------------------------------------------------------------------------- */

static moejit_status parse_url(redis_backend *r, const char *url)
{
    static const char *const allowed = "allowed: redis://host[:port][/db], rediss://host[:port][/db] or "
                                       "unix:///path[?db=N]";
    r->port = 6379;
    if (!strncmp(url, "unix://", 7)) {
        const char *path = url + 7;
        const char *q = strchr(path, '?');
        size_t len = q ? (size_t)(q - path) : strlen(path);
        if (path[0] != '/' || len >= sizeof r->unix_path)
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "MOEJIT_REMOTE: \"%s\" does not name an absolute socket "
                           "path; %s", url, allowed);
        memcpy(r->unix_path, path, len);
        r->unix_path[len] = '\0';
        if (q) {
            char *end;
            long db = strncmp(q, "?db=", 4) ? -1 : strtol(q + 4, &end, 10);
            if (db < 0 || db > 1000000 || !q[4] || *end)
                return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "MOEJIT_REMOTE: bad query in \"%s\"; %s", url, allowed);
            r->db = (int)db;
        }
        return MOEJIT_OK;
    }
    const char *p = url;
    if (!strncmp(p, "rediss://", 9)) {
        r->tls = 1;
        p += 9;
    } else if (!strncmp(p, "redis://", 8)) {
        p += 8;
    } else {
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "MOEJIT_REMOTE: unknown scheme in \"%s\"; %s", url, allowed);
    }
    const char *slash = strchr(p, '/');
    size_t auth_len = slash ? (size_t)(slash - p) : strlen(p);
    if (memchr(p, '@', auth_len))
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "MOEJIT_REMOTE: \"%s\" carries credentials, which every "
                       "process can read from the environment; allowed: the URL without them and the password "
                       "in MOEJIT_REMOTE_PASSWORD_FILE", url);
    const char *host = p, *host_end, *after;
    if (*p == '[') {
        host = p + 1;
        host_end = strchr(host, ']');
        if (!host_end) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "MOEJIT_REMOTE: unclosed [ in \"%s\"; %s", url, allowed);
        after = host_end + 1;
    } else {
        host_end = p + strcspn(p, ":/");
        after = host_end;
    }
    size_t hlen = (size_t)(host_end - host);
    if (hlen == 0 || hlen >= sizeof r->host)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "MOEJIT_REMOTE: no host in \"%s\"; %s", url, allowed);
    memcpy(r->host, host, hlen);
    r->host[hlen] = '\0';
    if (*after == ':') {
        char *end;
        long port = strtol(after + 1, &end, 10);
        if (end == after + 1 || port < 1 || port > 65535 || (*end && *end != '/'))
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "MOEJIT_REMOTE: bad port in \"%s\"; %s", url, allowed);
        r->port = (int)port;
        after = end;
    }
    if (*after == '/' && after[1]) {
        char *end;
        long db = strtol(after + 1, &end, 10);
        if (db < 0 || db > 1000000 || *end)
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "MOEJIT_REMOTE: bad database number in \"%s\"; %s", url,
                           allowed);
        r->db = (int)db;
    } else if (*after && strcmp(after, "/") != 0) {
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "MOEJIT_REMOTE: unexpected \"%s\" in \"%s\"; %s", after, url,
                       allowed);
    }
    return MOEJIT_OK;
}

/* Reads the password file: owned by the user (or root), no access for group or others. */
static moejit_status load_password(redis_backend *r, const char *path)
{
    uint8_t *data = NULL;
    size_t n = 0;
    struct stat st;
    moejit_status rc = mj_file_read("MOEJIT_REMOTE_PASSWORD_FILE", path, 0, PASSWORD_MAX, &data, &n, &st);
    if (rc != MOEJIT_OK) return rc;
    uid_t me = geteuid();
    if (st.st_uid != me && st.st_uid != 0)
        rc = mj_fail(MOEJIT_ERR_IO, "MOEJIT_REMOTE_PASSWORD_FILE: %s is owned by uid %u, not by you (uid %u) or "
                     "root; allowed: a file you own", path, (unsigned)st.st_uid, (unsigned)me);
    else if (st.st_mode & 077)
        rc = mj_fail(MOEJIT_ERR_IO, "MOEJIT_REMOTE_PASSWORD_FILE: %s is readable or writable by group or others "
                     "(mode %04o); whoever reads it can write kernels to the fleet's cache; allowed: chmod 600 %s",
                     path, (unsigned)(st.st_mode & 07777), path);
    while (rc == MOEJIT_OK && n && (data[n - 1] == '\n' || data[n - 1] == '\r')) data[--n] = '\0';
    if (rc == MOEJIT_OK && (n == 0 || memchr(data, '\0', n) || memchr(data, '\n', n)))
        rc = mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "MOEJIT_REMOTE_PASSWORD_FILE: %s must hold one line: the "
                     "password, or user:password for an ACL user", path);
    if (rc == MOEJIT_OK) {
        char *colon = strchr((char *)data, ':');
        if (colon) {
            *colon = '\0';
            r->user = strdup((char *)data);
            r->password = strdup(colon + 1);
        } else {
            r->password = strdup((char *)data);
        }
        if (!r->password || (colon && !r->user)) rc = mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "remote: out of memory");
    }
    memset(data, 0, n);
    free(data);
    return rc;
}

static struct timeval tv_of(double s)
{
    struct timeval tv;
    tv.tv_sec = (time_t)s;
    tv.tv_usec = (suseconds_t)((s - (double)tv.tv_sec) * 1e6);
    if (tv.tv_sec == 0 && tv.tv_usec == 0) tv.tv_usec = 1000;
    return tv;
}

/* ---- requests -------------------------------------------------------------------------------- */

/* SIGPIPE is blocked in this thread around a request, and one it raised is consumed before the
 * mask is restored: the process's disposition is never changed. */
typedef struct pipe_guard {
    sigset_t old;
    int was_pending;
} pipe_guard;

static void guard_begin(pipe_guard *g)
{
    sigset_t pipe_set, pending;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &g->old);
    g->was_pending = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE);
}

static void guard_end(pipe_guard *g)
{
    int e = errno;
    sigset_t pipe_set, pending;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    if (!g->was_pending && sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE)) {
        struct timespec zero = {0, 0};
        while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR) {}
    }
    pthread_sigmask(SIG_SETMASK, &g->old, NULL);
    errno = e;
}

static void drop(redis_backend *r)
{
    if (r->ctx) redisFree(r->ctx);
    r->ctx = NULL;
}

/* The failure of the context after a request returned no reply: a timeout or a lost link. */
static mj_remote_rc context_failure(redis_backend *r, int saved_errno, const char *what)
{
    int timeout = 0;
#ifdef REDIS_ERR_TIMEOUT
    timeout = r->ctx && r->ctx->err == REDIS_ERR_TIMEOUT;
#endif
    if (r->ctx && r->ctx->err == REDIS_ERR_IO &&
        (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK || saved_errno == ETIMEDOUT))
        timeout = 1;
    snprintf(r->base.error, sizeof r->base.error, "%s: %s", what,
             timeout ? "timed out" : r->ctx && r->ctx->errstr[0] ? r->ctx->errstr : "connection lost");
    drop(r);
    return timeout ? MJ_REMOTE_TIMEOUT : MJ_REMOTE_DOWN;
}

/* Sends one command; *reply is NULL unless MJ_REMOTE_OK. An error reply is MJ_REMOTE_REFUSED. */
static mj_remote_rc command(redis_backend *r, const char *what, int argc, const char **argv, const size_t *lens,
                            redisReply **reply)
{
    *reply = NULL;
    pipe_guard g;
    guard_begin(&g);
    errno = 0;
    redisReply *rep = redisCommandArgv(r->ctx, argc, argv, lens);
    int e = errno;
    guard_end(&g);
    if (!rep) return context_failure(r, e, what);
    if (rep->type == REDIS_REPLY_ERROR) {
        snprintf(r->base.error, sizeof r->base.error, "%s: the server answered: %.200s", what,
                 rep->str ? rep->str : "error");
        freeReplyObject(rep);
        return MJ_REMOTE_REFUSED;
    }
    *reply = rep;
    return MJ_REMOTE_OK;
}

static mj_remote_rc expect_status(redis_backend *r, const char *what, int argc, const char **argv)
{
    redisReply *rep;
    mj_remote_rc rc = command(r, what, argc, argv, NULL, &rep);
    if (rc != MJ_REMOTE_OK) return rc;
    int ok = rep->type == REDIS_REPLY_STATUS;
    freeReplyObject(rep);
    if (ok) return MJ_REMOTE_OK;
    snprintf(r->base.error, sizeof r->base.error, "%s: unexpected reply", what);
    drop(r);
    return MJ_REMOTE_DOWN;
}

static mj_remote_rc connect_now(redis_backend *r)
{
    if (r->ctx && r->ctx_pid == getpid()) return MJ_REMOTE_OK;
    drop(r); /* inherited through fork: the parent's connection is not ours to use */
    errno = 0;
    r->ctx = r->unix_path[0] ? redisConnectUnixWithTimeout(r->unix_path, r->connect_tv)
                             : redisConnectWithTimeout(r->host, r->port, r->connect_tv);
    int e = errno;
    if (!r->ctx) {
        snprintf(r->base.error, sizeof r->base.error, "connect: out of memory");
        return MJ_REMOTE_DOWN;
    }
    if (r->ctx->err) {
        int timeout = e == ETIMEDOUT || e == EINPROGRESS || strstr(r->ctx->errstr, "timed out") != NULL;
        if (r->unix_path[0])
            snprintf(r->base.error, sizeof r->base.error, "connect to %.120s: %.100s", r->unix_path, r->ctx->errstr);
        else
            snprintf(r->base.error, sizeof r->base.error, "connect to %.120s:%d: %.100s", r->host, r->port, r->ctx->errstr);
        drop(r);
        return timeout ? MJ_REMOTE_TIMEOUT : MJ_REMOTE_DOWN;
    }
    r->ctx_pid = getpid();
    if (redisSetTimeout(r->ctx, r->io_tv) != REDIS_OK) {
        snprintf(r->base.error, sizeof r->base.error, "cannot set the socket timeout: %.100s", r->ctx->errstr);
        drop(r);
        return MJ_REMOTE_DOWN;
    }
#ifdef MJ_HAVE_HIREDIS_SSL
    if (r->tls && redisInitiateSSLWithContext(r->ctx, r->ssl) != REDIS_OK) {
        snprintf(r->base.error, sizeof r->base.error, "TLS handshake: %.100s", r->ctx->errstr);
        drop(r);
        return MJ_REMOTE_DOWN;
    }
#endif
    mj_remote_rc rc = MJ_REMOTE_OK;
    if (r->password) {
        const char *argv[3] = {"AUTH", r->user ? r->user : r->password, r->password};
        rc = expect_status(r, "AUTH", r->user ? 3 : 2, argv);
    }
    if (rc == MJ_REMOTE_OK && r->db) {
        char db[16];
        snprintf(db, sizeof db, "%d", r->db);
        const char *argv[2] = {"SELECT", db};
        rc = expect_status(r, "SELECT", 2, argv);
    }
    if (rc != MJ_REMOTE_OK) drop(r);
    /* A refused AUTH or SELECT is a remote we cannot use: backed off like one that is down. */
    return rc == MJ_REMOTE_REFUSED ? MJ_REMOTE_DOWN : rc;
}

/* ---- the backend's operations ----------------------------------------------------------------- */

/* Marks the context failed after a read or write of our own: a timeout or a lost link. */
static mj_remote_rc io_failure(redis_backend *r, ssize_t got, int e, const char *what)
{
    int timeout = got < 0 && (e == EAGAIN || e == EWOULDBLOCK || e == ETIMEDOUT);
    snprintf(r->base.error, sizeof r->base.error, "%s: %s", what,
             timeout ? "timed out" : got == 0 ? "connection closed by the server" : strerror(e));
    drop(r);
    return timeout ? MJ_REMOTE_TIMEOUT : MJ_REMOTE_DOWN;
}

/* Reads what the socket has (retrying EINTR); the socket's receive timeout bounds each wait. */
static ssize_t read_some(int fd, void *buf, size_t cap, int *e)
{
    ssize_t k;
    do {
        k = read(fd, buf, cap);
    } while (k < 0 && errno == EINTR);
    *e = errno;
    return k;
}

/* GETRANGE with its bulk reply read straight into its final buffer in large reads: hiredis 0.14
 * reads 16 KiB at a time into a growing buffer and then copies the string, which for a cubin of
 * megabytes costs more than the transfer. Any reply that is not a bulk string goes to hiredis's
 * reader. *reply is set when hiredis parsed the reply instead. */
static mj_remote_rc get_direct(redis_backend *r, const char **argv, size_t max, uint8_t **data, size_t *n,
                               redisReply **reply)
{
    *reply = NULL;
    pipe_guard g;
    guard_begin(&g);
    mj_remote_rc rc = MJ_REMOTE_OK;
    int done = 0, e = 0;
    if (redisAppendCommandArgv(r->ctx, 4, argv, NULL) != REDIS_OK) rc = context_failure(r, errno, "GETRANGE");
    while (rc == MJ_REMOTE_OK && !done) {
        errno = 0;
        if (redisBufferWrite(r->ctx, &done) != REDIS_OK) rc = context_failure(r, errno, "GETRANGE");
    }
    guard_end(&g);
    if (rc != MJ_REMOTE_OK) return rc;
    char head[65536];
    size_t have = 0, hdr = 0;
    /* The header "$<len>\r\n" (or another reply's first line) arrives first. */
    while (!hdr) {
        char *crlf = have ? memchr(head, '\n', have) : NULL;
        if (crlf) {
            hdr = (size_t)(crlf - head) + 1;
            break;
        }
        if (have == sizeof head) break;
        ssize_t k = read_some(r->ctx->fd, head + have, sizeof head - have, &e);
        if (k <= 0) return io_failure(r, k, e, "GETRANGE");
        have += (size_t)k;
    }
    if (!hdr || head[0] != '$') {
        /* An error, a nil, or something else: hiredis's reader makes the reply from it. */
        if (redisReaderFeed(r->ctx->reader, head, have) != REDIS_OK) return context_failure(r, 0, "GETRANGE");
        pipe_guard g2;
        guard_begin(&g2);
        void *rep = NULL;
        errno = 0;
        int ok = redisGetReply(r->ctx, &rep) == REDIS_OK;
        e = errno;
        guard_end(&g2);
        if (!ok || !rep) return context_failure(r, e, "GETRANGE");
        *reply = rep;
        return MJ_REMOTE_OK;
    }
    char *end;
    long long len = strtoll(head + 1, &end, 10);
    if (end == head + 1 || *end != '\r' || len < -1 || (unsigned long long)len > max) {
        snprintf(r->base.error, sizeof r->base.error, "GETRANGE: bad bulk header");
        drop(r);
        return MJ_REMOTE_DOWN;
    }
    if (len <= 0) return MJ_REMOTE_OK; /* nil or empty: absent */
    size_t want = (size_t)len + 2, got = have - hdr;
    uint8_t *buf = malloc(want);
    if (!buf) {
        snprintf(r->base.error, sizeof r->base.error, "GETRANGE: out of memory");
        drop(r);
        return MJ_REMOTE_DOWN;
    }
    if (got > want) got = want; /* nothing else is in flight: more would be a broken server */
    memcpy(buf, head + hdr, got);
    while (got < want) {
        ssize_t k = read_some(r->ctx->fd, buf + got, want - got, &e);
        if (k <= 0) {
            free(buf);
            return io_failure(r, k, e, "GETRANGE");
        }
        got += (size_t)k;
    }
    if (buf[len] != '\r' || buf[len + 1] != '\n') {
        free(buf);
        snprintf(r->base.error, sizeof r->base.error, "GETRANGE: bulk reply without its terminator");
        drop(r);
        return MJ_REMOTE_DOWN;
    }
    *data = buf;
    *n = (size_t)len;
    return MJ_REMOTE_OK;
}

static mj_remote_rc redis_get(mj_remote_backend *b, const char *name, size_t max, uint8_t **data, size_t *n,
                              int *found)
{
    redis_backend *r = (redis_backend *)b;
    *data = NULL;
    *n = 0;
    *found = 0;
    mj_remote_rc rc = connect_now(r);
    if (rc != MJ_REMOTE_OK) return rc;
    /* GETRANGE bounds what the server sends; a missing key reads as the empty string. */
    char end[32];
    snprintf(end, sizeof end, "%zu", max ? max - 1 : 0);
    const char *argv[4] = {"GETRANGE", name, "0", end};
    redisReply *rep = NULL;
    if (!r->tls) {
        if ((rc = get_direct(r, argv, max, data, n, &rep)) != MJ_REMOTE_OK) return rc;
        if (!rep) {
            *found = *n > 0;
            return MJ_REMOTE_OK;
        }
        if (rep->type == REDIS_REPLY_ERROR) {
            snprintf(r->base.error, sizeof r->base.error, "GETRANGE: the server answered: %.200s",
                     rep->str ? rep->str : "error");
            freeReplyObject(rep);
            return MJ_REMOTE_REFUSED;
        }
    } else if ((rc = command(r, "GETRANGE", 4, argv, NULL, &rep)) != MJ_REMOTE_OK) {
        return rc;
    }
    if (rep->type != REDIS_REPLY_STRING) {
        freeReplyObject(rep);
        snprintf(r->base.error, sizeof r->base.error, "GETRANGE: reply is not a string");
        drop(r);
        return MJ_REMOTE_DOWN;
    }
    if (rep->len > 0) {
        /* The reply's buffer is taken over rather than copied: a cubin is megabytes. */
        *data = (uint8_t *)rep->str;
        *n = rep->len;
        rep->str = NULL;
        *found = 1;
    }
    freeReplyObject(rep);
    return MJ_REMOTE_OK;
}

static mj_remote_rc redis_put(mj_remote_backend *b, const char *name, const void *data, size_t n)
{
    redis_backend *r = (redis_backend *)b;
    mj_remote_rc rc = connect_now(r);
    if (rc != MJ_REMOTE_OK) return rc;
    const char *argv[3] = {"SET", name, data};
    size_t lens[3] = {3, strlen(name), n};
    redisReply *rep;
    if ((rc = command(r, "SET", 3, argv, lens, &rep)) != MJ_REMOTE_OK) return rc;
    freeReplyObject(rep);
    return MJ_REMOTE_OK;
}

static mj_remote_rc redis_lock(mj_remote_backend *b, const char *name, const char *token, int ttl_ms, int *acquired)
{
    redis_backend *r = (redis_backend *)b;
    *acquired = 0;
    mj_remote_rc rc = connect_now(r);
    if (rc != MJ_REMOTE_OK) return rc;
    char ttl[16];
    snprintf(ttl, sizeof ttl, "%d", ttl_ms > 0 ? ttl_ms : 1);
    const char *argv[6] = {"SET", name, token, "NX", "PX", ttl};
    redisReply *rep;
    if ((rc = command(r, "SET NX", 6, argv, NULL, &rep)) != MJ_REMOTE_OK) return rc;
    *acquired = rep->type == REDIS_REPLY_STATUS;
    freeReplyObject(rep);
    return MJ_REMOTE_OK;
}

static mj_remote_rc redis_unlock(mj_remote_backend *b, const char *name, const char *token)
{
    redis_backend *r = (redis_backend *)b;
    mj_remote_rc rc = connect_now(r);
    if (rc != MJ_REMOTE_OK) return rc;
    const char *argv[5] = {"EVAL", unlock_script, "1", name, token};
    redisReply *rep;
    if ((rc = command(r, "EVAL unlock", 5, argv, NULL, &rep)) != MJ_REMOTE_OK) return rc;
    freeReplyObject(rep);
    return MJ_REMOTE_OK;
}

/* The prefix as a SCAN pattern: glob characters in it match themselves. */
static void glob_escape(const char *prefix, char *out, size_t cap)
{
    size_t o = 0;
    for (const char *p = prefix; *p && o + 3 < cap; p++) {
        if (strchr("*?[]\\", *p)) out[o++] = '\\';
        out[o++] = *p;
    }
    out[o++] = '*';
    out[o] = '\0';
}

static mj_remote_rc redis_list(mj_remote_backend *b, const char *prefix, mj_remote_list_fn fn, void *ctx)
{
    redis_backend *r = (redis_backend *)b;
    mj_remote_rc rc = connect_now(r);
    if (rc != MJ_REMOTE_OK) return rc;
    char pattern[2 * MJ_SETTINGS_REMOTE_PREFIX_MAX + 200];
    glob_escape(prefix, pattern, sizeof pattern);
    char cursor[32] = "0";
    /* SCAN ends when the cursor returns to 0; the bound only guards against a broken server. */
    for (long round = 0; round < 10000000; round++) {
        const char *argv[6] = {"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"};
        redisReply *rep;
        if ((rc = command(r, "SCAN", 6, argv, NULL, &rep)) != MJ_REMOTE_OK) return rc;
        if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 || rep->element[0]->type != REDIS_REPLY_STRING ||
            rep->element[1]->type != REDIS_REPLY_ARRAY || rep->element[0]->len >= sizeof cursor) {
            freeReplyObject(rep);
            snprintf(r->base.error, sizeof r->base.error, "SCAN: unexpected reply");
            drop(r);
            return MJ_REMOTE_DOWN;
        }
        snprintf(cursor, sizeof cursor, "%s", rep->element[0]->str);
        int stop = 0;
        for (size_t i = 0; i < rep->element[1]->elements && !stop; i++) {
            redisReply *k = rep->element[1]->element[i];
            if (k->type == REDIS_REPLY_STRING && strlen(k->str) == k->len) stop = fn(ctx, k->str);
        }
        freeReplyObject(rep);
        if (stop || !strcmp(cursor, "0")) return MJ_REMOTE_OK;
    }
    return MJ_REMOTE_OK;
}

static void redis_close(mj_remote_backend *b)
{
    redis_backend *r = (redis_backend *)b;
    if (!r) return;
    /* A context inherited through fork is freed without a word to the server (redisFree only
     * closes the descriptor). */
    drop(r);
#ifdef MJ_HAVE_HIREDIS_SSL
    if (r->ssl) redisFreeSSLContext(r->ssl);
#endif
    if (r->password) {
        memset(r->password, 0, strlen(r->password));
        free(r->password);
    }
    free(r->user);
    free(r);
}

static const mj_remote_ops redis_ops = {"redis", redis_get, redis_put, redis_lock, redis_unlock, redis_list,
                                        redis_close};

moejit_status mj_remote_redis_open(const mj_remote_config *cfg, mj_remote_backend **out)
{
    *out = NULL;
    redis_backend *r = calloc(1, sizeof *r);
    if (!r) return mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "remote: out of memory");
    r->base.ops = &redis_ops;
    r->connect_tv = tv_of(cfg->connect_timeout_s);
    r->io_tv = tv_of(cfg->timeout_s);
    moejit_status rc = parse_url(r, cfg->url);
    if (rc == MOEJIT_OK && cfg->tls) r->tls = 1;
    if (rc == MOEJIT_OK && r->tls && r->unix_path[0])
        rc = mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "MOEJIT_REMOTE_TLS: 1 with a unix socket (%s); allowed: 0 for a "
                     "unix socket, or a redis:// or rediss:// URL", cfg->url);
#ifdef MJ_HAVE_HIREDIS_SSL
    if (rc == MOEJIT_OK && r->tls) {
        redisSSLContextError err = REDIS_SSL_CTX_NONE;
        redisInitOpenSSL();
        r->ssl = redisCreateSSLContext(NULL, NULL, NULL, NULL, r->host, &err);
        if (!r->ssl)
            rc = mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "MOEJIT_REMOTE_TLS: cannot set up TLS: %s",
                         redisSSLContextGetError(err));
    }
#else
    if (rc == MOEJIT_OK && r->tls)
        rc = mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "MOEJIT_REMOTE_TLS: TLS to the remote (1 or rediss://) needs "
                     "hiredis_ssl, which this build lacks (Debian's libhiredis-dev 0.14 ships none); kernels and "
                     "the password are not sent in clear instead; allowed: 0 with a redis:// or unix:// URL on a "
                     "trusted network, or a build against hiredis >= 1.0 with hiredis_ssl");
#endif
    if (rc == MOEJIT_OK && cfg->password_file[0]) rc = load_password(r, cfg->password_file);
    if (rc != MOEJIT_OK) {
        redis_close(&r->base);
        return rc;
    }
    *out = &r->base;
    return MOEJIT_OK;
}
