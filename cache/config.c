/*
 * This file contains the cache's settings table and its resolver: moejit_options, then the
 * environment, then the default, with a clear error for every bad value.
 */
#include "cache/config.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/status.h"

const mj_cache_setting_info mj_cache_settings[MJ_SET_COUNT] = {
    [MJ_SET_DIR] = {"cache_dir", "MOEJIT_CACHE_DIR", "path",
                    "$XDG_CACHE_HOME/moejit, else ~/.cache/moejit", "a directory path",
                    "where compiled kernels are kept between processes"},
    [MJ_SET_MODE] = {"cache_mode", "MOEJIT_CACHE_MODE", "mode", "read-write",
                     "read-write, read-only, offline, off",
                     "read-only never writes (a miss compiles in memory); offline makes a miss an "
                     "error, for servers that must not compile"},
    [MJ_SET_MAX_BYTES] = {"cache_max_bytes", "MOEJIT_CACHE_MAX_BYTES", "size", "4G",
                          "a positive byte count with optional K, M, G or T (powers of 1024)",
                          "the disk cache is trimmed, least recently used first, above this size"},
    [MJ_SET_MAX_AGE] = {"cache_max_age", "MOEJIT_CACHE_MAX_AGE", "seconds", "0 (no limit)",
                        "seconds >= 0 with optional s, m, h or d",
                        "entries unused for longer are removed by gc (kernels of old versions)"},
    [MJ_SET_LOCK_DIR] = {"lock_dir", "MOEJIT_LOCK_DIR", "path",
                         "$XDG_RUNTIME_DIR/moejit-locks, else /tmp/moejit-locks-<uid>",
                         "a directory path on a local file system",
                         "per-key compile locks live on the node even when the cache is shared, "
                         "because locks on network file systems hang or are not honoured"},
    [MJ_SET_LOCK_TIMEOUT] = {"lock_timeout", "MOEJIT_LOCK_TIMEOUT", "seconds", "120",
                             "a finite number of seconds >= 0",
                             "after waiting this long for another process's compile, compile "
                             "anyway (a stuck holder must not stall a server)"},
    [MJ_SET_SHARED] = {"cache_shared", "MOEJIT_CACHE_SHARED", "bool", "0", "0 or 1",
                       "1 accepts a group-owned, group-writable cache shared by several users; "
                       "by default anything another user can write is refused"},
};

const char *mj_cache_origin_name(mj_cache_origin o)
{
    switch (o) {
    case MJ_ORIGIN_ENV: return "environment";
    case MJ_ORIGIN_OPTION: return "option";
    default: return "default";
    }
}

static const char *const mode_names[] = {"read-write", "read-only", "offline", "off"};

const char *mj_cache_mode_name(mj_cache_mode mode)
{
    return (unsigned)mode < 4 ? mode_names[mode] : "unknown";
}

moejit_status mj_cache_parse_mode(const char *setting, const char *text, mj_cache_mode *out)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(text, mode_names[i]) == 0) {
            *out = (mj_cache_mode)i;
            return MOEJIT_OK;
        }
    return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "%s: unknown cache mode \"%s\"; allowed: %s", setting,
                   text, mj_cache_settings[MJ_SET_MODE].allowed);
}

/* A decimal integer followed by one optional suffix from `suffixes` (case-insensitive), each
 * with its multiplier; -1 on any other text or on overflow. */
static int64_t parse_scaled(const char *text, const char *suffixes, const int64_t *mult)
{
    if (!*text || *text < '0' || *text > '9') return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno) return -1;
    int64_t m = 1;
    if (*end) {
        const char *s = strchr(suffixes, (char)toupper((unsigned char)*end));
        if (!s || end[1]) return -1;
        m = mult[s - suffixes];
    }
    if (v > (unsigned long long)(INT64_MAX / m)) return -1;
    return (int64_t)v * m;
}

moejit_status mj_cache_parse_size(const char *setting, const char *text, int64_t *out)
{
    static const int64_t mult[] = {1LL << 10, 1LL << 20, 1LL << 30, 1LL << 40};
    int64_t v = parse_scaled(text, "KMGT", mult);
    if (v <= 0)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "%s: bad size \"%s\"; allowed: %s, e.g. 4G", setting,
                       text, mj_cache_settings[MJ_SET_MAX_BYTES].allowed);
    *out = v;
    return MOEJIT_OK;
}

moejit_status mj_cache_parse_age(const char *setting, const char *text, int64_t *out)
{
    static const int64_t mult[] = {1, 60, 3600, 86400};
    int64_t v = parse_scaled(text, "SMHD", mult);
    if (v < 0)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "%s: bad age \"%s\"; allowed: %s, e.g. 30d", setting,
                       text, mj_cache_settings[MJ_SET_MAX_AGE].allowed);
    *out = v;
    return MOEJIT_OK;
}

static moejit_status parse_seconds(const char *setting, const char *text, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end || !isfinite(v) || v < 0)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "%s: bad timeout \"%s\"; allowed: %s", setting, text,
                       mj_cache_settings[MJ_SET_LOCK_TIMEOUT].allowed);
    *out = v;
    return MOEJIT_OK;
}

static moejit_status parse_bool(const char *setting, const char *text, int *out)
{
    if (strcmp(text, "0") == 0 || strcmp(text, "1") == 0) {
        *out = text[0] == '1';
        return MOEJIT_OK;
    }
    return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "%s: bad value \"%s\"; allowed: %s", setting, text,
                   mj_cache_settings[MJ_SET_SHARED].allowed);
}

/* The environment variable of setting s, or NULL when unset or empty. */
static const char *env_of(mj_cache_setting s)
{
    const char *v = getenv(mj_cache_settings[s].env);
    return v && *v ? v : NULL;
}

static moejit_status set_path(char *dst, const char *setting, const char *a, const char *b)
{
    int n = snprintf(dst, MJ_CACHE_PATH_MAX, "%s%s", a, b);
    if (n < 0 || n >= MJ_CACHE_PATH_MAX)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "%s: path longer than %d bytes; allowed: %s", setting,
                       MJ_CACHE_PATH_MAX - 1, "a shorter path");
    return MOEJIT_OK;
}

static moejit_status resolve_dir(const moejit_options *opts, mj_cache_config *c)
{
    const char *v;
    if (opts && opts->cache_dir && *opts->cache_dir) {
        c->origin[MJ_SET_DIR] = MJ_ORIGIN_OPTION;
        return set_path(c->dir, "options.cache_dir", opts->cache_dir, "");
    }
    if ((v = env_of(MJ_SET_DIR))) {
        c->origin[MJ_SET_DIR] = MJ_ORIGIN_ENV;
        return set_path(c->dir, "MOEJIT_CACHE_DIR", v, "");
    }
    /* The XDG spec says a relative $XDG_CACHE_HOME is invalid and must be ignored. */
    const char *xdg = getenv("XDG_CACHE_HOME");
    if (xdg && xdg[0] == '/') return set_path(c->dir, "XDG_CACHE_HOME", xdg, "/moejit");
    const char *home = getenv("HOME");
    if (!home || home[0] != '/') {
        struct passwd pw, *res = NULL;
        char buf[4096];
        if (getpwuid_r(geteuid(), &pw, buf, sizeof buf, &res) == 0 && res && res->pw_dir[0] == '/')
            return set_path(c->dir, "HOME", res->pw_dir, "/.cache/moejit");
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "cache_dir: no HOME, XDG_CACHE_HOME or MOEJIT_CACHE_DIR to place the cache in; "
                       "allowed: set MOEJIT_CACHE_DIR to a directory path");
    }
    return set_path(c->dir, "HOME", home, "/.cache/moejit");
}

static moejit_status resolve_lock_dir(mj_cache_config *c)
{
    const char *v;
    if ((v = env_of(MJ_SET_LOCK_DIR))) {
        c->origin[MJ_SET_LOCK_DIR] = MJ_ORIGIN_ENV;
        return set_path(c->lock_dir, "MOEJIT_LOCK_DIR", v, "");
    }
    const char *run = getenv("XDG_RUNTIME_DIR");
    if (run && run[0] == '/') return set_path(c->lock_dir, "XDG_RUNTIME_DIR", run, "/moejit-locks");
    char tail[64];
    snprintf(tail, sizeof tail, "/moejit-locks-%u", (unsigned)geteuid());
    return set_path(c->lock_dir, "lock_dir", "/tmp", tail);
}

moejit_status mj_cache_config_resolve(const moejit_options *opts, mj_cache_config *c)
{
    memset(c, 0, sizeof *c);
    c->mode = MJ_CACHE_READ_WRITE;
    c->max_bytes = MJ_CACHE_DEFAULT_MAX_BYTES;
    c->lock_timeout_s = MJ_CACHE_DEFAULT_LOCK_TIMEOUT_S;
    moejit_status st;
    const char *v;

    if ((st = resolve_dir(opts, c)) != MOEJIT_OK) return st;
    if ((st = resolve_lock_dir(c)) != MOEJIT_OK) return st;

    if (opts && opts->cache_mode && *opts->cache_mode) {
        c->origin[MJ_SET_MODE] = MJ_ORIGIN_OPTION;
        if ((st = mj_cache_parse_mode("options.cache_mode", opts->cache_mode, &c->mode))) return st;
    } else if ((v = env_of(MJ_SET_MODE))) {
        c->origin[MJ_SET_MODE] = MJ_ORIGIN_ENV;
        if ((st = mj_cache_parse_mode("MOEJIT_CACHE_MODE", v, &c->mode))) return st;
    }

    if (opts && opts->cache_max_bytes < 0)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "options.cache_max_bytes: %lld is negative; allowed: > 0, or 0 for "
                       "$MOEJIT_CACHE_MAX_BYTES or the default (4G)", (long long)opts->cache_max_bytes);
    if (opts && opts->cache_max_bytes > 0) {
        c->origin[MJ_SET_MAX_BYTES] = MJ_ORIGIN_OPTION;
        c->max_bytes = opts->cache_max_bytes;
    } else if ((v = env_of(MJ_SET_MAX_BYTES))) {
        c->origin[MJ_SET_MAX_BYTES] = MJ_ORIGIN_ENV;
        if ((st = mj_cache_parse_size("MOEJIT_CACHE_MAX_BYTES", v, &c->max_bytes))) return st;
    }

    if ((v = env_of(MJ_SET_MAX_AGE))) {
        c->origin[MJ_SET_MAX_AGE] = MJ_ORIGIN_ENV;
        if ((st = mj_cache_parse_age("MOEJIT_CACHE_MAX_AGE", v, &c->max_age_s))) return st;
    }
    if ((v = env_of(MJ_SET_LOCK_TIMEOUT))) {
        c->origin[MJ_SET_LOCK_TIMEOUT] = MJ_ORIGIN_ENV;
        if ((st = parse_seconds("MOEJIT_LOCK_TIMEOUT", v, &c->lock_timeout_s))) return st;
    }
    if ((v = env_of(MJ_SET_SHARED))) {
        c->origin[MJ_SET_SHARED] = MJ_ORIGIN_ENV;
        if ((st = parse_bool("MOEJIT_CACHE_SHARED", v, &c->shared))) return st;
    }
    return MOEJIT_OK;
}

void mj_cache_config_format(const mj_cache_config *c, mj_cache_setting s, mj_buf *out)
{
    switch (s) {
    case MJ_SET_DIR: mj_buf_puts(out, c->dir); break;
    case MJ_SET_MODE: mj_buf_puts(out, mj_cache_mode_name(c->mode)); break;
    case MJ_SET_MAX_BYTES: mj_buf_printf(out, "%lld", (long long)c->max_bytes); break;
    case MJ_SET_MAX_AGE: mj_buf_printf(out, "%lld", (long long)c->max_age_s); break;
    case MJ_SET_LOCK_DIR: mj_buf_puts(out, c->lock_dir); break;
    case MJ_SET_LOCK_TIMEOUT: mj_buf_printf(out, "%g", c->lock_timeout_s); break;
    case MJ_SET_SHARED: mj_buf_puts(out, c->shared ? "1" : "0"); break;
    default: break;
    }
}
