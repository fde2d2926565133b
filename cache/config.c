/*
 * This file contains the cache's configuration: its seven settings resolved through the one
 * settings table (core/settings.c) and copied into the struct the cache runs with.
 */
#include "cache/config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"

const char *mj_cache_origin_name(mj_cache_origin o) { return mj_setting_origin_name(o); }

const char *mj_cache_mode_name(mj_cache_mode mode) { return mj_settings_cache_mode_name((int)mode); }

moejit_status mj_cache_parse_mode(const char *setting, const char *text, mj_cache_mode *out)
{
    int mode = 0;
    moejit_status st = mj_settings_parse_cache_mode(setting, text, &mode);
    if (st == MOEJIT_OK) *out = (mj_cache_mode)mode;
    return st;
}

moejit_status mj_cache_parse_size(const char *setting, const char *text, int64_t *out)
{
    return mj_settings_parse_size(setting, text, out);
}

moejit_status mj_cache_parse_age(const char *setting, const char *text, int64_t *out)
{
    return mj_settings_parse_age(setting, text, out);
}

void mj_cache_config_from_settings(const mj_settings *s, mj_cache_config *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->dir, sizeof c->dir, "%s", s->cache_dir);
    c->mode = (mj_cache_mode)s->cache_mode;
    c->max_bytes = s->cache_max_bytes;
    c->max_age_s = s->cache_max_age_s;
    snprintf(c->lock_dir, sizeof c->lock_dir, "%s", s->lock_dir);
    c->lock_timeout_s = s->lock_timeout_s;
    c->shared = s->cache_shared;
    for (int i = 0; i < MJ_SET_COUNT; i++) c->origin[i] = s->origin[i];
}

moejit_status mj_cache_config_resolve_cli(const moejit_options *opts, const char *const *cli, mj_cache_config *c)
{
    mj_settings *s = calloc(1, sizeof *s);
    if (!s) return mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "cache config: out of memory");
    moejit_status st = MOEJIT_OK;
    for (int i = 0; i < MJ_SET_COUNT && st == MOEJIT_OK; i++)
        st = mj_settings_resolve_one((mj_setting_id)i, opts, cli, s);
    if (st == MOEJIT_OK) mj_cache_config_from_settings(s, c);
    free(s);
    return st;
}

moejit_status mj_cache_config_resolve(const moejit_options *opts, mj_cache_config *c)
{
    return mj_cache_config_resolve_cli(opts, NULL, c);
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
