/*
 * config.h — the cache's settings as one table (ccache's model): each setting has a key, an
 * environment variable, a type, a default and the reason it exists. The table is the source of
 * truth for the resolver and for `moejit cache config` style listings.
 *
 * Resolution order per setting: moejit_options field (where there is one), else the
 * environment variable (an empty variable counts as unset), else the default. A bad value is
 * an error naming the setting and the allowed values, never a silent default.
 */
#ifndef MJ_CACHE_CONFIG_H
#define MJ_CACHE_CONFIG_H

#include <stdint.h>

#include "moejit.h"
#include "core/strbuf.h"

typedef enum mj_cache_mode {
    MJ_CACHE_READ_WRITE = 0,
    MJ_CACHE_READ_ONLY,   /* never writes; a miss compiles in memory */
    MJ_CACHE_OFFLINE,     /* a miss is MOEJIT_ERR_CACHE_MISS naming the spec */
    MJ_CACHE_OFF          /* no disk at all */
} mj_cache_mode;

#define MJ_CACHE_PATH_MAX 4096

/* Row numbers of the table; the order is the listing order. */
typedef enum mj_cache_setting {
    MJ_SET_DIR = 0,
    MJ_SET_MODE,
    MJ_SET_MAX_BYTES,
    MJ_SET_MAX_AGE,
    MJ_SET_LOCK_DIR,
    MJ_SET_LOCK_TIMEOUT,
    MJ_SET_SHARED,
    MJ_SET_COUNT
} mj_cache_setting;

typedef struct mj_cache_setting_info {
    const char *key;          /* "cache_dir" */
    const char *env;          /* "MOEJIT_CACHE_DIR" */
    const char *type;         /* "path", "mode", "size", "seconds", "bool" */
    const char *default_text; /* the default as a user reads it */
    const char *allowed;      /* the allowed values, quoted in error messages */
    const char *why;          /* one sentence */
} mj_cache_setting_info;

extern const mj_cache_setting_info mj_cache_settings[MJ_SET_COUNT];

typedef enum mj_cache_origin {
    MJ_ORIGIN_DEFAULT = 0,
    MJ_ORIGIN_ENV,
    MJ_ORIGIN_OPTION /* moejit_options or an explicit API value */
} mj_cache_origin;

typedef struct mj_cache_config {
    char dir[MJ_CACHE_PATH_MAX];
    mj_cache_mode mode;
    int64_t max_bytes;         /* > 0 */
    int64_t max_age_s;         /* 0: no age limit */
    char lock_dir[MJ_CACHE_PATH_MAX];
    double lock_timeout_s;     /* >= 0: how long to wait for another process's compile */
    int shared;                /* 1: a group-owned, group-writable cache is accepted */
    mj_cache_origin origin[MJ_SET_COUNT];
} mj_cache_config;

#define MJ_CACHE_DEFAULT_MAX_BYTES (4LL << 30)
#define MJ_CACHE_DEFAULT_LOCK_TIMEOUT_S 120.0

/* Resolves every setting; opts may be NULL. */
moejit_status mj_cache_config_resolve(const moejit_options *opts, mj_cache_config *out);
/* Appends the resolved value of one setting as text (what a listing prints). */
void mj_cache_config_format(const mj_cache_config *cfg, mj_cache_setting s, mj_buf *out);
const char *mj_cache_origin_name(mj_cache_origin o);

/* Parsers shared with the CLI; `setting` names the setting in the error message. */
moejit_status mj_cache_parse_mode(const char *setting, const char *text, mj_cache_mode *out);
const char *mj_cache_mode_name(mj_cache_mode mode);
/* "4G", "512M", "100000": a positive byte count, K/M/G/T = powers of 1024. */
moejit_status mj_cache_parse_size(const char *setting, const char *text, int64_t *out);
/* "30d", "12h", "90m", "45s", "3600": seconds >= 0 (0 = no limit). */
moejit_status mj_cache_parse_age(const char *setting, const char *text, int64_t *out);

#endif
