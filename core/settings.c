/*
 * This file contains the table of every moejit setting and its resolver: the command line,
 * then moejit_options, then the environment, then the default, with an error naming the
 * setting and the allowed values for every bad value.
 */
#include "core/settings.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/status.h"

const mj_setting_info mj_settings_table[MJ_SETTING_COUNT] = {
    [MJ_SETTING_CACHE_DIR] = {"cache_dir", "MOEJIT_CACHE_DIR", "path",
                              "$XDG_CACHE_HOME/moejit, else ~/.cache/moejit", "a directory path",
                              "where compiled kernels are kept between processes", "cache_dir", "cache"},
    [MJ_SETTING_CACHE_MODE] = {"cache_mode", "MOEJIT_CACHE_MODE", "mode", "read-write",
                               "read-write, read-only, offline, off",
                               "read-only never writes (a miss compiles in memory); offline makes a miss an "
                               "error, for servers that must not compile",
                               "cache_mode", "cache"},
    [MJ_SETTING_CACHE_MAX_BYTES] = {"cache_max_bytes", "MOEJIT_CACHE_MAX_BYTES", "size", "4G",
                                    "a positive byte count with optional K, M, G or T (powers of 1024)",
                                    "the disk cache is trimmed, least recently used first, above this size",
                                    "cache_max_bytes", "cache"},
    [MJ_SETTING_CACHE_MAX_AGE] = {"cache_max_age", "MOEJIT_CACHE_MAX_AGE", "seconds", "0 (no limit)",
                                  "seconds >= 0 with optional s, m, h or d",
                                  "entries unused for longer are removed by gc (kernels of old versions)", NULL,
                                  "cache"},
    [MJ_SETTING_LOCK_DIR] = {"lock_dir", "MOEJIT_LOCK_DIR", "path",
                             "$XDG_RUNTIME_DIR/moejit-locks, else /tmp/moejit-locks-<uid>",
                             "a directory path on a local file system",
                             "per-key compile locks live on the node even when the cache is shared, "
                             "because locks on network file systems hang or are not honoured",
                             NULL, "cache"},
    [MJ_SETTING_LOCK_TIMEOUT] = {"lock_timeout", "MOEJIT_LOCK_TIMEOUT", "seconds", "120",
                                 "a finite number of seconds >= 0",
                                 "after waiting this long for another process's compile, compile "
                                 "anyway (a stuck holder must not stall a server)",
                                 NULL, "cache"},
    [MJ_SETTING_CACHE_SHARED] = {"cache_shared", "MOEJIT_CACHE_SHARED", "bool", "0", "0 or 1",
                                 "1 accepts a group-owned, group-writable cache shared by several users; "
                                 "by default anything another user can write is refused",
                                 NULL, "cache"},
    [MJ_SETTING_COMPILE_TIMEOUT] = {"compile_timeout", "MOEJIT_COMPILE_TIMEOUT", "seconds", "300",
                                    "a number of seconds > 0",
                                    "a compile that hangs (NVRTC in its worker process) fails after this "
                                    "long instead of stalling the caller",
                                    "compile_timeout_s", "context"},
    [MJ_SETTING_COMPILE_WORKER] = {"compile_worker", "MOEJIT_COMPILE_WORKER", "path",
                                   "../libexec/moejit-compile-worker beside the library", "an executable file",
                                   "NVRTC runs in this separate process so that a crash or hang in it cannot "
                                   "take the caller down; set it where the library was moved without it",
                                   "compile_worker", "context"},
    [MJ_SETTING_DECODE] = {"decode", "MOEJIT_DECODE", "enum", "auto",
                           "auto, persistent, persistent_deep, persistent_shallow, chain",
                           "which decode layer the mma and wgmma backends run at a few tokens: the rule (4-bit "
                           "layers: the chain), or forced for benchmarks and A/B checks",
                           NULL, "context"},
    [MJ_SETTING_PDL] = {"pdl", "MOEJIT_PDL", "enum", "1", "1 (every kernel), inner (all but a forward's first), 0 (none)",
                        "programmatic dependent launch hides launch latency on sm_90+; 0 is an escape hatch for "
                        "a driver or tool that mishandles it",
                        NULL, "context"},
    [MJ_SETTING_ALLOW_UNVALIDATED] = {"allow_unvalidated", "MOEJIT_ALLOW_UNVALIDATED", "bool", "0", "0 or 1",
                                      "run kernel tuples built but not yet validated on hardware",
                                      "allow_unvalidated", "context"},
    [MJ_SETTING_TUNE_FILE] = {"tune_file", "MOEJIT_TUNE_FILE", "path", "none", "a file written by `moejit tune`",
                              "recorded GEMM-path choices for tile=auto of layers with bf16 or fp16 weights; one "
                              "table per process, loaded on the first forward that consults it",
                              NULL, "process"},
    [MJ_SETTING_LIBCUDA] = {"libcuda", "MOEJIT_LIBCUDA", "path", MJ_SETTINGS_DEFAULT_LIBCUDA,
                            "a CUDA driver library path or name for dlopen",
                            "a process has one CUDA driver: it is loaded once, on first use, for every "
                            "context (tests point it at a fake driver)",
                            NULL, "process"},
    [MJ_SETTING_REMOTE] = {"remote", "MOEJIT_REMOTE", "url", "(empty: no remote tier)",
                           "redis://host[:port][/db], rediss://host[:port][/db] (TLS) or unix:///path[?db=N]",
                           "a fleet-wide kernel cache behind the disk cache: a local miss asks it before "
                           "compiling, and compiles are pushed to it (docs/REMOTE_CACHE.md)",
                           NULL, "cache"},
    [MJ_SETTING_REMOTE_PASSWORD_FILE] = {"remote_password_file", "MOEJIT_REMOTE_PASSWORD_FILE", "path", "none",
                                         "a file only you can read (chmod 600) holding the password, or "
                                         "user:password for an ACL user",
                                         "the password is read from a file because the environment and the "
                                         "command line are visible to other processes",
                                         NULL, "cache"},
    [MJ_SETTING_REMOTE_TLS] = {"remote_tls", "MOEJIT_REMOTE_TLS", "bool", "0", "0 or 1",
                               "TLS to the remote (hiredis_ssl); a build without it refuses 1 rather than "
                               "sending kernels and the password in clear",
                               NULL, "cache"},
    [MJ_SETTING_REMOTE_PREFIX] = {"remote_prefix", "MOEJIT_REMOTE_PREFIX", "text", MJ_SETTINGS_DEFAULT_REMOTE_PREFIX,
                                  "1 to 200 printable characters without spaces",
                                  "every key moejit writes on the remote starts with it, so that one server "
                                  "can hold several fleets or share with other users",
                                  NULL, "cache"},
    [MJ_SETTING_REMOTE_CONNECT_TIMEOUT] = {"remote_connect_timeout", "MOEJIT_REMOTE_CONNECT_TIMEOUT", "seconds",
                                           "1", "a number of seconds > 0",
                                           "a remote that does not answer the connect costs at most this "
                                           "long, then is skipped for a back-off period",
                                           NULL, "cache"},
    [MJ_SETTING_REMOTE_TIMEOUT] = {"remote_timeout", "MOEJIT_REMOTE_TIMEOUT", "seconds", "2",
                                   "a number of seconds > 0",
                                   "a stalled remote (stopped, overloaded) fails a request after this long "
                                   "without progress instead of stalling the caller",
                                   NULL, "cache"},
    [MJ_SETTING_REMOTE_MODE] = {"remote_mode", "MOEJIT_REMOTE_MODE", "mode", "read-write", "read-write, read-only",
                                "read-only nodes fetch from the remote but never push, lock or write it",
                                NULL, "cache"},
    [MJ_SETTING_REMOTE_KEY_FILE] = {"remote_key_file", "MOEJIT_REMOTE_KEY_FILE", "path", "none",
                                    "a key file of 16 to 1024 bytes only you can read (chmod 600)",
                                    "the fleet key: pushed entries are signed (HMAC-SHA256) under it and "
                                    "fetched ones verified; without it the remote tier is off",
                                    NULL, "cache"},
    [MJ_SETTING_REMOTE_TRUST] = {"remote_trust", "MOEJIT_REMOTE_TRUST", "enum", "signed", "signed, unsigned",
                                 "unsigned accepts entries nobody signed (a private remote you trust); a bad "
                                 "signature is refused either way",
                                 NULL, "cache"},
};

const char *mj_setting_origin_name(mj_setting_origin o)
{
    switch (o) {
    case MJ_ORIGIN_ENV: return "environment";
    case MJ_ORIGIN_OPTION: return "option";
    case MJ_ORIGIN_COMMAND_LINE: return "command line";
    default: return "default";
    }
}

/* ---- parsers ---------------------------------------------------------------------------------- */

static const char *const cache_mode_names[] = {"read-write", "read-only", "offline", "off"};
static const char *const decode_names[] = {"auto", "persistent", "chain", "persistent_deep", "persistent_shallow"};

const char *mj_settings_cache_mode_name(int mode)
{
    return (unsigned)mode < 4 ? cache_mode_names[mode] : "unknown";
}

const char *mj_settings_decode_name(int decode)
{
    return (unsigned)decode < 5 ? decode_names[decode] : "unknown";
}

const char *mj_settings_pdl_name(int pdl)
{
    return pdl == MJ_PDL_OFF ? "0" : pdl == MJ_PDL_INNER ? "inner" : pdl == MJ_PDL_ALL ? "1" : "unknown";
}

const char *mj_settings_remote_mode_name(int mode)
{
    return mode == MJ_REMOTE_MODE_READ_WRITE ? "read-write" : mode == MJ_REMOTE_MODE_READ_ONLY ? "read-only" : "unknown";
}

const char *mj_settings_remote_trust_name(int trust)
{
    return trust == MJ_REMOTE_TRUST_SIGNED ? "signed" : trust == MJ_REMOTE_TRUST_UNSIGNED ? "unsigned" : "unknown";
}

moejit_status mj_settings_parse_cache_mode(const char *setting, const char *text, int *out)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(text, cache_mode_names[i]) == 0) {
            *out = i;
            return MOEJIT_OK;
        }
    return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "%s: unknown cache mode \"%s\"; allowed: %s", setting, text,
                   mj_settings_table[MJ_SETTING_CACHE_MODE].allowed);
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

moejit_status mj_settings_parse_size(const char *setting, const char *text, int64_t *out)
{
    static const int64_t mult[] = {1LL << 10, 1LL << 20, 1LL << 30, 1LL << 40};
    int64_t v = parse_scaled(text, "KMGT", mult);
    if (v <= 0)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "%s: bad size \"%s\"; allowed: %s, e.g. 4G", setting, text,
                       mj_settings_table[MJ_SETTING_CACHE_MAX_BYTES].allowed);
    *out = v;
    return MOEJIT_OK;
}

moejit_status mj_settings_parse_age(const char *setting, const char *text, int64_t *out)
{
    static const int64_t mult[] = {1, 60, 3600, 86400};
    int64_t v = parse_scaled(text, "SMHD", mult);
    if (v < 0)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "%s: bad age \"%s\"; allowed: %s, e.g. 30d", setting, text,
                       mj_settings_table[MJ_SETTING_CACHE_MAX_AGE].allowed);
    *out = v;
    return MOEJIT_OK;
}

/* A finite number and nothing else (no leading blank, no unit); the caller checks its bound. */
static int parse_number(const char *text, double *out)
{
    if (!*text || isspace((unsigned char)*text)) return 0;
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end || !isfinite(v)) return 0;
    *out = v;
    return 1;
}

static moejit_status parse_lock_timeout(const char *setting, const char *text, double *out)
{
    double v;
    if (!parse_number(text, &v) || v < 0)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "%s: bad timeout \"%s\"; allowed: %s", setting, text,
                       mj_settings_table[MJ_SETTING_LOCK_TIMEOUT].allowed);
    *out = v;
    return MOEJIT_OK;
}

static moejit_status parse_compile_timeout(const char *setting, const char *text, double *out)
{
    double v;
    if (!parse_number(text, &v) || v <= 0)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "%s: must be a number of seconds > 0, got '%s'", setting, text);
    *out = v;
    return MOEJIT_OK;
}

static moejit_status parse_cache_shared(const char *setting, const char *text, int *out)
{
    if (strcmp(text, "0") == 0 || strcmp(text, "1") == 0) {
        *out = text[0] == '1';
        return MOEJIT_OK;
    }
    return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "%s: bad value \"%s\"; allowed: %s", setting, text,
                   mj_settings_table[MJ_SETTING_CACHE_SHARED].allowed);
}

static moejit_status parse_bool(const char *setting, const char *text, int *out)
{
    if (strcmp(text, "0") == 0 || strcmp(text, "1") == 0) {
        *out = text[0] == '1';
        return MOEJIT_OK;
    }
    return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "%s: must be 0 or 1, got '%s'", setting, text);
}

static moejit_status parse_decode(const char *setting, const char *text, int *out)
{
    for (int i = 0; i < 5; i++)
        if (strcmp(text, decode_names[i]) == 0) {
            *out = i;
            return MOEJIT_OK;
        }
    return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                   "%s: must be auto (the default), persistent, persistent_deep, persistent_shallow or chain, "
                   "got '%s'",
                   setting, text);
}

static moejit_status parse_pdl(const char *setting, const char *text, int *out)
{
    if (strcmp(text, "1") == 0) *out = MJ_PDL_ALL;
    else if (strcmp(text, "inner") == 0) *out = MJ_PDL_INNER;
    else if (strcmp(text, "0") == 0) *out = MJ_PDL_OFF;
    else
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "%s: must be 1 (the default: every kernel), inner (all but a forward's first kernel) or 0 "
                       "(none), got '%s'",
                       setting, text);
    return MOEJIT_OK;
}

/* The remote's URL: its scheme is checked here, the rest when the tier opens (cache/remote.c). */
static moejit_status parse_remote(const char *setting, const char *text, char *out)
{
    if (strncmp(text, "redis://", 8) && strncmp(text, "rediss://", 9) && strncmp(text, "unix://", 7))
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "%s: bad remote \"%s\"; allowed: %s", setting, text,
                       mj_settings_table[MJ_SETTING_REMOTE].allowed);
    if (strlen(text) >= MJ_SETTINGS_PATH_MAX)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "%s: longer than %d bytes", setting, MJ_SETTINGS_PATH_MAX - 1);
    snprintf(out, MJ_SETTINGS_PATH_MAX, "%s", text);
    return MOEJIT_OK;
}

static moejit_status parse_remote_prefix(const char *setting, const char *text, char *out)
{
    size_t n = strlen(text);
    int ok = n >= 1 && n <= MJ_SETTINGS_REMOTE_PREFIX_MAX;
    for (size_t i = 0; i < n && ok; i++) ok = text[i] > ' ' && text[i] < 0x7f;
    if (!ok)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "%s: bad prefix \"%s\"; allowed: %s", setting, text,
                       mj_settings_table[MJ_SETTING_REMOTE_PREFIX].allowed);
    snprintf(out, MJ_SETTINGS_REMOTE_PREFIX_MAX + 1, "%s", text);
    return MOEJIT_OK;
}

static moejit_status parse_remote_timeout(const char *setting, const char *text, double *out)
{
    double v;
    if (!parse_number(text, &v) || v <= 0 || v > 86400)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "%s: bad timeout \"%s\"; allowed: a number of seconds > 0 "
                       "(at most 86400)", setting, text);
    *out = v;
    return MOEJIT_OK;
}

static moejit_status parse_remote_mode(const char *setting, const char *text, int *out)
{
    if (!strcmp(text, "read-write")) *out = MJ_REMOTE_MODE_READ_WRITE;
    else if (!strcmp(text, "read-only")) *out = MJ_REMOTE_MODE_READ_ONLY;
    else
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "%s: unknown remote mode \"%s\"; allowed: %s", setting, text,
                       mj_settings_table[MJ_SETTING_REMOTE_MODE].allowed);
    return MOEJIT_OK;
}

static moejit_status parse_remote_trust(const char *setting, const char *text, int *out)
{
    if (!strcmp(text, "signed")) *out = MJ_REMOTE_TRUST_SIGNED;
    else if (!strcmp(text, "unsigned")) *out = MJ_REMOTE_TRUST_UNSIGNED;
    else
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "%s: unknown trust \"%s\"; allowed: %s", setting, text,
                       mj_settings_table[MJ_SETTING_REMOTE_TRUST].allowed);
    return MOEJIT_OK;
}

static moejit_status set_path(char *dst, const char *setting, const char *a, const char *b)
{
    int n = snprintf(dst, MJ_SETTINGS_PATH_MAX, "%s%s", a, b);
    if (n < 0 || n >= MJ_SETTINGS_PATH_MAX)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "%s: path longer than %d bytes; allowed: %s", setting,
                       MJ_SETTINGS_PATH_MAX - 1, "a shorter path");
    return MOEJIT_OK;
}

/* ---- defaults --------------------------------------------------------------------------------- */

static moejit_status default_cache_dir(char *dst)
{
    /* The XDG spec says a relative $XDG_CACHE_HOME is invalid and must be ignored. */
    const char *xdg = getenv("XDG_CACHE_HOME");
    if (xdg && xdg[0] == '/') return set_path(dst, "XDG_CACHE_HOME", xdg, "/moejit");
    const char *home = getenv("HOME");
    if (!home || home[0] != '/') {
        struct passwd pw, *res = NULL;
        char buf[4096];
        if (getpwuid_r(geteuid(), &pw, buf, sizeof buf, &res) == 0 && res && res->pw_dir[0] == '/')
            return set_path(dst, "HOME", res->pw_dir, "/.cache/moejit");
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "cache_dir: no HOME, XDG_CACHE_HOME or MOEJIT_CACHE_DIR to place the cache in; "
                       "allowed: set MOEJIT_CACHE_DIR to a directory path");
    }
    return set_path(dst, "HOME", home, "/.cache/moejit");
}

static moejit_status default_lock_dir(char *dst)
{
    const char *run = getenv("XDG_RUNTIME_DIR");
    if (run && run[0] == '/') return set_path(dst, "XDG_RUNTIME_DIR", run, "/moejit-locks");
    char tail[64];
    snprintf(tail, sizeof tail, "/moejit-locks-%u", (unsigned)geteuid());
    return set_path(dst, "lock_dir", "/tmp", tail);
}

static moejit_status set_default(mj_setting_id id, mj_settings *s)
{
    switch (id) {
    case MJ_SETTING_CACHE_DIR: return default_cache_dir(s->cache_dir);
    case MJ_SETTING_CACHE_MODE: s->cache_mode = MJ_CACHE_MODE_READ_WRITE; break;
    case MJ_SETTING_CACHE_MAX_BYTES: s->cache_max_bytes = MJ_SETTINGS_DEFAULT_MAX_BYTES; break;
    case MJ_SETTING_CACHE_MAX_AGE: s->cache_max_age_s = 0; break;
    case MJ_SETTING_LOCK_DIR: return default_lock_dir(s->lock_dir);
    case MJ_SETTING_LOCK_TIMEOUT: s->lock_timeout_s = MJ_SETTINGS_DEFAULT_LOCK_TIMEOUT_S; break;
    case MJ_SETTING_CACHE_SHARED: s->cache_shared = 0; break;
    case MJ_SETTING_COMPILE_TIMEOUT: s->compile_timeout_s = MJ_SETTINGS_DEFAULT_COMPILE_TIMEOUT_S; break;
    case MJ_SETTING_COMPILE_WORKER: s->compile_worker[0] = '\0'; break;
    case MJ_SETTING_DECODE: s->decode = MJ_DECODE_AUTO; break;
    case MJ_SETTING_PDL: s->pdl = MJ_PDL_ALL; break;
    case MJ_SETTING_ALLOW_UNVALIDATED: s->allow_unvalidated = 0; break;
    case MJ_SETTING_TUNE_FILE: s->tune_file[0] = '\0'; break;
    case MJ_SETTING_LIBCUDA: snprintf(s->libcuda, sizeof s->libcuda, "%s", MJ_SETTINGS_DEFAULT_LIBCUDA); break;
    case MJ_SETTING_REMOTE: s->remote[0] = '\0'; break;
    case MJ_SETTING_REMOTE_PASSWORD_FILE: s->remote_password_file[0] = '\0'; break;
    case MJ_SETTING_REMOTE_TLS: s->remote_tls = 0; break;
    case MJ_SETTING_REMOTE_PREFIX:
        snprintf(s->remote_prefix, sizeof s->remote_prefix, "%s", MJ_SETTINGS_DEFAULT_REMOTE_PREFIX);
        break;
    case MJ_SETTING_REMOTE_CONNECT_TIMEOUT: s->remote_connect_timeout_s = MJ_SETTINGS_DEFAULT_REMOTE_CONNECT_TIMEOUT_S; break;
    case MJ_SETTING_REMOTE_TIMEOUT: s->remote_timeout_s = MJ_SETTINGS_DEFAULT_REMOTE_TIMEOUT_S; break;
    case MJ_SETTING_REMOTE_MODE: s->remote_mode = MJ_REMOTE_MODE_READ_WRITE; break;
    case MJ_SETTING_REMOTE_KEY_FILE: s->remote_key_file[0] = '\0'; break;
    case MJ_SETTING_REMOTE_TRUST: s->remote_trust = MJ_REMOTE_TRUST_SIGNED; break;
    default: break;
    }
    return MOEJIT_OK;
}

/* Parses text (from the command line or the environment) into setting id's field. */
static moejit_status set_text(mj_setting_id id, const char *label, const char *text, mj_settings *s)
{
    switch (id) {
    case MJ_SETTING_CACHE_DIR: return set_path(s->cache_dir, label, text, "");
    case MJ_SETTING_CACHE_MODE: return mj_settings_parse_cache_mode(label, text, &s->cache_mode);
    case MJ_SETTING_CACHE_MAX_BYTES: return mj_settings_parse_size(label, text, &s->cache_max_bytes);
    case MJ_SETTING_CACHE_MAX_AGE: return mj_settings_parse_age(label, text, &s->cache_max_age_s);
    case MJ_SETTING_LOCK_DIR: return set_path(s->lock_dir, label, text, "");
    case MJ_SETTING_LOCK_TIMEOUT: return parse_lock_timeout(label, text, &s->lock_timeout_s);
    case MJ_SETTING_CACHE_SHARED: return parse_cache_shared(label, text, &s->cache_shared);
    case MJ_SETTING_COMPILE_TIMEOUT: return parse_compile_timeout(label, text, &s->compile_timeout_s);
    case MJ_SETTING_COMPILE_WORKER: return set_path(s->compile_worker, label, text, "");
    case MJ_SETTING_DECODE: return parse_decode(label, text, &s->decode);
    case MJ_SETTING_PDL: return parse_pdl(label, text, &s->pdl);
    case MJ_SETTING_ALLOW_UNVALIDATED: return parse_bool(label, text, &s->allow_unvalidated);
    case MJ_SETTING_TUNE_FILE: return set_path(s->tune_file, label, text, "");
    case MJ_SETTING_LIBCUDA: return set_path(s->libcuda, label, text, "");
    case MJ_SETTING_REMOTE: return parse_remote(label, text, s->remote);
    case MJ_SETTING_REMOTE_PASSWORD_FILE: return set_path(s->remote_password_file, label, text, "");
    case MJ_SETTING_REMOTE_TLS: return parse_bool(label, text, &s->remote_tls);
    case MJ_SETTING_REMOTE_PREFIX: return parse_remote_prefix(label, text, s->remote_prefix);
    case MJ_SETTING_REMOTE_CONNECT_TIMEOUT: return parse_remote_timeout(label, text, &s->remote_connect_timeout_s);
    case MJ_SETTING_REMOTE_TIMEOUT: return parse_remote_timeout(label, text, &s->remote_timeout_s);
    case MJ_SETTING_REMOTE_MODE: return parse_remote_mode(label, text, &s->remote_mode);
    case MJ_SETTING_REMOTE_KEY_FILE: return set_path(s->remote_key_file, label, text, "");
    case MJ_SETTING_REMOTE_TRUST: return parse_remote_trust(label, text, &s->remote_trust);
    default: return mj_fail(MOEJIT_ERR_INTERNAL, "settings: no setting %d", (int)id);
    }
}

/* The moejit_options field of setting id: MOEJIT_OK with *taken = 1 when it sets the value. */
static moejit_status set_option(mj_setting_id id, const moejit_options *o, mj_settings *s, int *taken)
{
    *taken = 0;
    switch (id) {
    case MJ_SETTING_CACHE_DIR:
        if (!o->cache_dir || !*o->cache_dir) return MOEJIT_OK;
        *taken = 1;
        return set_path(s->cache_dir, "options.cache_dir", o->cache_dir, "");
    case MJ_SETTING_CACHE_MODE:
        if (!o->cache_mode || !*o->cache_mode) return MOEJIT_OK;
        *taken = 1;
        return mj_settings_parse_cache_mode("options.cache_mode", o->cache_mode, &s->cache_mode);
    case MJ_SETTING_CACHE_MAX_BYTES:
        if (o->cache_max_bytes < 0)
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                           "options.cache_max_bytes: %lld is negative; allowed: > 0, or 0 for "
                           "$MOEJIT_CACHE_MAX_BYTES or the default (4G)",
                           (long long)o->cache_max_bytes);
        if (o->cache_max_bytes == 0) return MOEJIT_OK;
        *taken = 1;
        s->cache_max_bytes = o->cache_max_bytes;
        return MOEJIT_OK;
    case MJ_SETTING_COMPILE_TIMEOUT:
        if (o->compile_timeout_s == 0) return MOEJIT_OK;
        if (!isfinite(o->compile_timeout_s) || o->compile_timeout_s < 0)
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                           "options.compile_timeout_s: must be a number of seconds > 0, or 0 for "
                           "$MOEJIT_COMPILE_TIMEOUT / the default 300; got %g",
                           o->compile_timeout_s);
        *taken = 1;
        s->compile_timeout_s = o->compile_timeout_s;
        return MOEJIT_OK;
    case MJ_SETTING_COMPILE_WORKER:
        if (!o->compile_worker || !*o->compile_worker) return MOEJIT_OK;
        *taken = 1;
        return set_path(s->compile_worker, "options.compile_worker", o->compile_worker, "");
    case MJ_SETTING_ALLOW_UNVALIDATED:
        if (o->allow_unvalidated == 0) return MOEJIT_OK;
        if (o->allow_unvalidated != 1 && o->allow_unvalidated != -1)
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                           "options.allow_unvalidated: must be 1 (allow), -1 (never) or 0 (for "
                           "$MOEJIT_ALLOW_UNVALIDATED / the default, no); got %lld",
                           (long long)o->allow_unvalidated);
        *taken = 1;
        s->allow_unvalidated = o->allow_unvalidated == 1;
        return MOEJIT_OK;
    default: return MOEJIT_OK;
    }
}

moejit_status mj_settings_resolve_one(mj_setting_id id, const moejit_options *opts, const char *const *cli,
                                      mj_settings *s)
{
    if ((unsigned)id >= MJ_SETTING_COUNT) return mj_fail(MOEJIT_ERR_INTERNAL, "settings: no setting %d", (int)id);
    const mj_setting_info *info = &mj_settings_table[id];
    if (cli && cli[id]) {
        char label[96];
        snprintf(label, sizeof label, "%s (command line)", info->key);
        s->origin[id] = MJ_ORIGIN_COMMAND_LINE;
        return set_text(id, label, cli[id], s);
    }
    if (opts) {
        int taken = 0;
        moejit_status st = set_option(id, opts, s, &taken);
        if (st != MOEJIT_OK || taken) {
            s->origin[id] = MJ_ORIGIN_OPTION;
            return st;
        }
    }
    const char *v = getenv(info->env);
    if (v && *v) {
        s->origin[id] = MJ_ORIGIN_ENV;
        return set_text(id, info->env, v, s);
    }
    s->origin[id] = MJ_ORIGIN_DEFAULT;
    return set_default(id, s);
}

moejit_status mj_settings_resolve(const moejit_options *opts, const char *const *cli, mj_settings *out)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; i < MJ_SETTING_COUNT; i++) {
        moejit_status st = mj_settings_resolve_one((mj_setting_id)i, opts, cli, out);
        if (st != MOEJIT_OK) return st;
    }
    return MOEJIT_OK;
}

void mj_settings_format(const mj_settings *s, mj_setting_id id, mj_buf *out)
{
    switch (id) {
    case MJ_SETTING_CACHE_DIR: mj_buf_puts(out, s->cache_dir); break;
    case MJ_SETTING_CACHE_MODE: mj_buf_puts(out, mj_settings_cache_mode_name(s->cache_mode)); break;
    case MJ_SETTING_CACHE_MAX_BYTES: mj_buf_printf(out, "%lld", (long long)s->cache_max_bytes); break;
    case MJ_SETTING_CACHE_MAX_AGE: mj_buf_printf(out, "%lld", (long long)s->cache_max_age_s); break;
    case MJ_SETTING_LOCK_DIR: mj_buf_puts(out, s->lock_dir); break;
    case MJ_SETTING_LOCK_TIMEOUT: mj_buf_printf(out, "%g", s->lock_timeout_s); break;
    case MJ_SETTING_CACHE_SHARED: mj_buf_puts(out, s->cache_shared ? "1" : "0"); break;
    case MJ_SETTING_COMPILE_TIMEOUT: mj_buf_printf(out, "%g", s->compile_timeout_s); break;
    case MJ_SETTING_COMPILE_WORKER: mj_buf_puts(out, s->compile_worker[0] ? s->compile_worker : "(beside the library)"); break;
    case MJ_SETTING_DECODE: mj_buf_puts(out, mj_settings_decode_name(s->decode)); break;
    case MJ_SETTING_PDL: mj_buf_puts(out, mj_settings_pdl_name(s->pdl)); break;
    case MJ_SETTING_ALLOW_UNVALIDATED: mj_buf_puts(out, s->allow_unvalidated ? "1" : "0"); break;
    case MJ_SETTING_TUNE_FILE: mj_buf_puts(out, s->tune_file[0] ? s->tune_file : "(none)"); break;
    case MJ_SETTING_LIBCUDA: mj_buf_puts(out, s->libcuda); break;
    case MJ_SETTING_REMOTE: mj_buf_puts(out, s->remote[0] ? s->remote : "(none)"); break;
    case MJ_SETTING_REMOTE_PASSWORD_FILE:
        mj_buf_puts(out, s->remote_password_file[0] ? s->remote_password_file : "(none)");
        break;
    case MJ_SETTING_REMOTE_TLS: mj_buf_puts(out, s->remote_tls ? "1" : "0"); break;
    case MJ_SETTING_REMOTE_PREFIX: mj_buf_puts(out, s->remote_prefix); break;
    case MJ_SETTING_REMOTE_CONNECT_TIMEOUT: mj_buf_printf(out, "%g", s->remote_connect_timeout_s); break;
    case MJ_SETTING_REMOTE_TIMEOUT: mj_buf_printf(out, "%g", s->remote_timeout_s); break;
    case MJ_SETTING_REMOTE_MODE: mj_buf_puts(out, mj_settings_remote_mode_name(s->remote_mode)); break;
    case MJ_SETTING_REMOTE_KEY_FILE: mj_buf_puts(out, s->remote_key_file[0] ? s->remote_key_file : "(none)"); break;
    case MJ_SETTING_REMOTE_TRUST: mj_buf_puts(out, mj_settings_remote_trust_name(s->remote_trust)); break;
    default: break;
    }
}
