/*
 * config.h — the cache's settings: its seven rows of the one settings table (core/settings.h,
 * which holds each setting's key, environment variable, type, default and reason, and the
 * resolver), gathered into the configuration the cache runs with.
 *
 * Resolution order per setting: moejit_options field (where there is one), else the
 * environment variable (an empty variable counts as unset), else the default. A bad value is
 * an error naming the setting and the allowed values, never a silent default.
 */
#ifndef MJ_CACHE_CONFIG_H
#define MJ_CACHE_CONFIG_H

#include <stdint.h>

#include "moejit.h"
#include "core/settings.h"
#include "core/strbuf.h"

typedef enum mj_cache_mode {
    MJ_CACHE_READ_WRITE = MJ_CACHE_MODE_READ_WRITE,
    MJ_CACHE_READ_ONLY = MJ_CACHE_MODE_READ_ONLY, /* never writes; a miss compiles in memory */
    MJ_CACHE_OFFLINE = MJ_CACHE_MODE_OFFLINE,     /* a miss is MOEJIT_ERR_CACHE_MISS naming the spec */
    MJ_CACHE_OFF = MJ_CACHE_MODE_OFF              /* no disk at all */
} mj_cache_mode;

#define MJ_CACHE_PATH_MAX MJ_SETTINGS_PATH_MAX

/* Row numbers of the cache's rows of the settings table (core/settings.h); the order is the
 * listing order. */
typedef enum mj_cache_setting {
    MJ_SET_DIR = MJ_SETTING_CACHE_DIR,
    MJ_SET_MODE = MJ_SETTING_CACHE_MODE,
    MJ_SET_MAX_BYTES = MJ_SETTING_CACHE_MAX_BYTES,
    MJ_SET_MAX_AGE = MJ_SETTING_CACHE_MAX_AGE,
    MJ_SET_LOCK_DIR = MJ_SETTING_LOCK_DIR,
    MJ_SET_LOCK_TIMEOUT = MJ_SETTING_LOCK_TIMEOUT,
    MJ_SET_SHARED = MJ_SETTING_CACHE_SHARED,
    MJ_SET_COUNT = MJ_SETTING_CACHE_COUNT
} mj_cache_setting;

typedef mj_setting_info mj_cache_setting_info;
typedef mj_setting_origin mj_cache_origin;
/* The cache's rows are the first MJ_SET_COUNT of the one table. */
#define mj_cache_settings mj_settings_table

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

#define MJ_CACHE_DEFAULT_MAX_BYTES MJ_SETTINGS_DEFAULT_MAX_BYTES
#define MJ_CACHE_DEFAULT_LOCK_TIMEOUT_S MJ_SETTINGS_DEFAULT_LOCK_TIMEOUT_S

/* Resolves the cache's settings alone (a bad value of another setting does not stop the
 * cache); opts and cli (core/settings.h) may be NULL. */
moejit_status mj_cache_config_resolve(const moejit_options *opts, mj_cache_config *out);
moejit_status mj_cache_config_resolve_cli(const moejit_options *opts, const char *const *cli, mj_cache_config *out);
/* The cache's part of settings resolved already (by a context). */
void mj_cache_config_from_settings(const mj_settings *s, mj_cache_config *out);
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
