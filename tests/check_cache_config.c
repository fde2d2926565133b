/*
 * This file contains the tests of the cache settings (cache/config.c): defaults and their
 * order (options, environment, XDG, HOME), size and age suffixes, and a clear error naming
 * the setting and the allowed values for every bad value.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/config.h"
#include "lib/check_main.h"

static void clear_env(void)
{
    for (int i = 0; i < MJ_SET_COUNT; i++) unsetenv(mj_cache_settings[i].env);
    unsetenv("XDG_CACHE_HOME");
    unsetenv("XDG_RUNTIME_DIR");
    setenv("HOME", "/home/tester", 1);
}

static void assert_error(const char *needle1, const char *needle2)
{
    const char *m = moejit_last_error();
    ck_assert_msg(strstr(m, needle1) && strstr(m, needle2), "message: %s", m);
}

START_TEST(defaults_follow_home_and_the_table)
{
    clear_env();
    mj_cache_config c;
    ck_assert_int_eq(mj_cache_config_resolve(NULL, &c), MOEJIT_OK);
    ck_assert_str_eq(c.dir, "/home/tester/.cache/moejit");
    ck_assert_int_eq(c.mode, MJ_CACHE_READ_WRITE);
    ck_assert_int_eq(c.max_bytes, 4LL << 30);
    ck_assert_int_eq(c.max_age_s, 0);
    ck_assert(c.lock_timeout_s == 120);
    ck_assert_int_eq(c.shared, 0);
    char want[64];
    snprintf(want, sizeof want, "/tmp/moejit-locks-%u", (unsigned)geteuid());
    ck_assert_str_eq(c.lock_dir, want);
    for (int i = 0; i < MJ_SET_COUNT; i++) ck_assert_int_eq(c.origin[i], MJ_ORIGIN_DEFAULT);
}
END_TEST

START_TEST(xdg_dirs_are_used_when_absolute)
{
    clear_env();
    setenv("XDG_CACHE_HOME", "/xdg/cache", 1);
    setenv("XDG_RUNTIME_DIR", "/run/user/7", 1);
    mj_cache_config c;
    ck_assert_int_eq(mj_cache_config_resolve(NULL, &c), MOEJIT_OK);
    ck_assert_str_eq(c.dir, "/xdg/cache/moejit");
    ck_assert_str_eq(c.lock_dir, "/run/user/7/moejit-locks");
    setenv("XDG_CACHE_HOME", "relative/cache", 1); /* invalid per the XDG spec: ignored */
    ck_assert_int_eq(mj_cache_config_resolve(NULL, &c), MOEJIT_OK);
    ck_assert_str_eq(c.dir, "/home/tester/.cache/moejit");
}
END_TEST

START_TEST(environment_overrides_defaults_and_options_override_environment)
{
    clear_env();
    setenv("MOEJIT_CACHE_DIR", "/env/cache", 1);
    setenv("MOEJIT_CACHE_MODE", "offline", 1);
    setenv("MOEJIT_CACHE_MAX_BYTES", "512M", 1);
    setenv("MOEJIT_CACHE_MAX_AGE", "30d", 1);
    setenv("MOEJIT_LOCK_DIR", "/env/locks", 1);
    setenv("MOEJIT_LOCK_TIMEOUT", "2.5", 1);
    setenv("MOEJIT_CACHE_SHARED", "1", 1);
    mj_cache_config c;
    ck_assert_int_eq(mj_cache_config_resolve(NULL, &c), MOEJIT_OK);
    ck_assert_str_eq(c.dir, "/env/cache");
    ck_assert_int_eq(c.mode, MJ_CACHE_OFFLINE);
    ck_assert_int_eq(c.max_bytes, 512LL << 20);
    ck_assert_int_eq(c.max_age_s, 30 * 86400);
    ck_assert_str_eq(c.lock_dir, "/env/locks");
    ck_assert(c.lock_timeout_s == 2.5);
    ck_assert_int_eq(c.shared, 1);
    ck_assert_int_eq(c.origin[MJ_SET_DIR], MJ_ORIGIN_ENV);
    moejit_options o = {.cache_dir = "/opt/cache", .cache_mode = "read-only", .cache_max_bytes = 1000};
    ck_assert_int_eq(mj_cache_config_resolve(&o, &c), MOEJIT_OK);
    ck_assert_str_eq(c.dir, "/opt/cache");
    ck_assert_int_eq(c.mode, MJ_CACHE_READ_ONLY);
    ck_assert_int_eq(c.max_bytes, 1000);
    ck_assert_int_eq(c.origin[MJ_SET_MODE], MJ_ORIGIN_OPTION);
    /* An empty variable counts as unset. */
    setenv("MOEJIT_CACHE_MODE", "", 1);
    ck_assert_int_eq(mj_cache_config_resolve(NULL, &c), MOEJIT_OK);
    ck_assert_int_eq(c.mode, MJ_CACHE_READ_WRITE);
    clear_env();
}
END_TEST

START_TEST(bad_values_name_the_setting_and_the_allowed_values)
{
    clear_env();
    mj_cache_config c;
    setenv("MOEJIT_CACHE_MODE", "readwrite", 1);
    ck_assert_int_eq(mj_cache_config_resolve(NULL, &c), MOEJIT_ERR_INVALID_ARGUMENT);
    assert_error("MOEJIT_CACHE_MODE: unknown cache mode \"readwrite\"", "read-write, read-only, offline, off");
    clear_env();
    static const char *bad_sizes[] = {"", "0", "-5", "4X", "4GB", "G", "99999999999T", " 4G"};
    for (size_t i = 1; i < sizeof bad_sizes / sizeof *bad_sizes; i++) {
        setenv("MOEJIT_CACHE_MAX_BYTES", bad_sizes[i], 1);
        ck_assert_int_eq(mj_cache_config_resolve(NULL, &c), MOEJIT_ERR_INVALID_ARGUMENT);
        assert_error("MOEJIT_CACHE_MAX_BYTES: bad size", "K, M, G or T");
    }
    clear_env();
    setenv("MOEJIT_LOCK_TIMEOUT", "forever", 1);
    ck_assert_int_eq(mj_cache_config_resolve(NULL, &c), MOEJIT_ERR_INVALID_ARGUMENT);
    assert_error("MOEJIT_LOCK_TIMEOUT", ">= 0");
    clear_env();
    setenv("MOEJIT_CACHE_SHARED", "yes", 1);
    ck_assert_int_eq(mj_cache_config_resolve(NULL, &c), MOEJIT_ERR_INVALID_ARGUMENT);
    assert_error("MOEJIT_CACHE_SHARED", "0 or 1");
    clear_env();
    setenv("MOEJIT_CACHE_MAX_AGE", "3w", 1);
    ck_assert_int_eq(mj_cache_config_resolve(NULL, &c), MOEJIT_ERR_INVALID_ARGUMENT);
    assert_error("MOEJIT_CACHE_MAX_AGE", "s, m, h or d");
    clear_env();
    moejit_options o = {.cache_mode = "fast"};
    ck_assert_int_eq(mj_cache_config_resolve(&o, &c), MOEJIT_ERR_INVALID_ARGUMENT);
    assert_error("options.cache_mode", "read-only");
    moejit_options o2 = {.cache_max_bytes = -1};
    ck_assert_int_eq(mj_cache_config_resolve(&o2, &c), MOEJIT_ERR_INVALID_ARGUMENT);
    assert_error("options.cache_max_bytes", "> 0");
}
END_TEST

START_TEST(sizes_and_ages_accept_their_suffixes)
{
    int64_t v;
    ck_assert_int_eq(mj_cache_parse_size("s", "100", &v), MOEJIT_OK); ck_assert_int_eq(v, 100);
    ck_assert_int_eq(mj_cache_parse_size("s", "2k", &v), MOEJIT_OK); ck_assert_int_eq(v, 2048);
    ck_assert_int_eq(mj_cache_parse_size("s", "3G", &v), MOEJIT_OK); ck_assert_int_eq(v, 3LL << 30);
    ck_assert_int_eq(mj_cache_parse_size("s", "1T", &v), MOEJIT_OK); ck_assert_int_eq(v, 1LL << 40);
    ck_assert_int_eq(mj_cache_parse_age("a", "0", &v), MOEJIT_OK); ck_assert_int_eq(v, 0);
    ck_assert_int_eq(mj_cache_parse_age("a", "90m", &v), MOEJIT_OK); ck_assert_int_eq(v, 5400);
    ck_assert_int_eq(mj_cache_parse_age("a", "12h", &v), MOEJIT_OK); ck_assert_int_eq(v, 43200);
}
END_TEST

START_TEST(the_table_documents_every_setting)
{
    for (int i = 0; i < MJ_SET_COUNT; i++) {
        const mj_cache_setting_info *s = &mj_cache_settings[i];
        ck_assert_ptr_nonnull(s->key);
        ck_assert_msg(strncmp(s->env, "MOEJIT_", 7) == 0, "%s", s->env);
        ck_assert(s->type && s->default_text && s->allowed && s->why && strlen(s->why) > 20);
    }
    clear_env();
    mj_cache_config c;
    ck_assert_int_eq(mj_cache_config_resolve(NULL, &c), MOEJIT_OK);
    mj_buf b = MJ_BUF_INIT;
    mj_cache_config_format(&c, MJ_SET_MODE, &b);
    ck_assert_str_eq(b.data, "read-write");
    mj_buf_reset(&b);
    mj_cache_config_format(&c, MJ_SET_MAX_BYTES, &b);
    ck_assert_str_eq(b.data, "4294967296");
    mj_buf_free(&b);
}
END_TEST

static Suite *cache_config_suite(void)
{
    Suite *s = suite_create("cache_config");
    TCase *tc = tcase_create("config");
    tcase_add_test(tc, defaults_follow_home_and_the_table);
    tcase_add_test(tc, xdg_dirs_are_used_when_absolute);
    tcase_add_test(tc, environment_overrides_defaults_and_options_override_environment);
    tcase_add_test(tc, bad_values_name_the_setting_and_the_allowed_values);
    tcase_add_test(tc, sizes_and_ages_accept_their_suffixes);
    tcase_add_test(tc, the_table_documents_every_setting);
    suite_add_tcase(s, tc);
    return s;
}

MJ_CHECK_MAIN(cache_config_suite)
