/*
 * This file checks that the CLI's JSON is valid whatever bytes it carries: the UTF-8
 * sanitizer (mj_buf_put_utf8) replaces each ill-formed sequence by U+FFFD and keeps every
 * well-formed one, and `moejit cache ls|stats --json`, `inspect --why --json` and
 * `config --json` on a cache directory whose name holds bytes that are not UTF-8 print a
 * document cJSON parses and that is valid UTF-8.
 */
#include <check.h>
#include <errno.h>
#include <iconv.h>
#include <stdio.h>
#include <string.h>

#include "lib/check_main.h"
#include "lib/cli_run.h"
#include "core/strbuf.h"

#define FFFD "\xef\xbf\xbd"

/* 1 when s is valid UTF-8, by iconv (glibc), independent of the sanitizer under test. */
static int valid_utf8(const char *s)
{
    iconv_t cd = iconv_open("UTF-8", "UTF-8");
    ck_assert(cd != (iconv_t)-1);
    char out[4096];
    char *in = (char *)s;
    size_t in_left = strlen(s);
    int ok = 1;
    while (in_left && ok) {
        char *o = out;
        size_t o_left = sizeof out;
        if (iconv(cd, &in, &in_left, &o, &o_left) == (size_t)-1 && errno != E2BIG) ok = 0;
    }
    iconv_close(cd);
    return ok;
}

static void check_sanitized(const char *in, const char *want)
{
    mj_buf b = MJ_BUF_INIT;
    mj_buf_put_utf8(&b, in, strlen(in));
    ck_assert(mj_buf_ok(&b));
    ck_assert_msg(strcmp(b.data, want) == 0, "sanitizing gave the wrong text");
    ck_assert(valid_utf8(b.data));
    mj_buf_free(&b);
}

START_TEST(well_formed_utf8_is_kept_byte_for_byte)
{
    check_sanitized("", "");
    check_sanitized("plain /tmp/cache-dir", "plain /tmp/cache-dir");
    check_sanitized("\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
    check_sanitized("\xed\x9f\xbf \xee\x80\x80 \xf4\x8f\xbf\xbf", "\xed\x9f\xbf \xee\x80\x80 \xf4\x8f\xbf\xbf");
}
END_TEST

START_TEST(each_ill_formed_subpart_becomes_one_replacement)
{
    check_sanitized("a\xff" "b", "a" FFFD "b");
    check_sanitized("\xfe\xff", FFFD FFFD);
    check_sanitized("\x80", FFFD);                            /* a lone continuation byte */
    check_sanitized("\xc0\xaf", FFFD FFFD);                   /* an overlong '/' */
    check_sanitized("\xe0\x80\xaf", FFFD FFFD FFFD);          /* an overlong 3-byte form */
    check_sanitized("\xed\xa0\x80", FFFD FFFD FFFD);          /* a surrogate */
    check_sanitized("\xf4\x90\x80\x80", FFFD FFFD FFFD FFFD); /* above U+10FFFF */
    check_sanitized("\xe2\x82" "A", FFFD "A");                /* a cut 3-byte sequence: one */
    check_sanitized("\xf0\x9f\x98", FFFD);                    /* cut at the end */
    check_sanitized("x\xf0\x9f\x98\xc3\xa9", "x" FFFD "\xc3\xa9");
}
END_TEST

/* ---- the CLI ------------------------------------------------------------------------------ */

static mj_test_cli t;
static mj_test_cli_result r;
static char bad_dir[400];

static void setup(void)
{
    mj_test_cli_init(&t);
    snprintf(bad_dir, sizeof bad_dir, "%s/cache-\xff\xfe-\xc3(-\xe2\x82", t.root);
}

static void teardown(void)
{
    mj_test_cli_result_free(&r);
    mj_test_cli_cleanup(&t);
}

/* Parses the run's stdout, checks it is valid UTF-8 and that key names the sanitized dir. */
static void check_output(const char *key)
{
    ck_assert_msg(valid_utf8(r.out), "not UTF-8: %s", r.out);
    cJSON *j = mj_test_json(r.out);
    const char *dir = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, key));
    ck_assert_ptr_nonnull(dir);
    ck_assert(valid_utf8(dir));
    ck_assert_ptr_nonnull(strstr(dir, "/cache-" FFFD FFFD "-" FFFD "(-" FFFD));
    cJSON_Delete(j);
}

START_TEST(cache_listings_of_a_non_utf8_directory_are_valid_json)
{
    RUN("cache", "ls", "--json", "--cache-dir", bad_dir);
    ASSERT_RC(0);
    check_output("cache_dir");
    RUN("cache", "stats", "--json", "--cache-dir", bad_dir);
    ASSERT_RC(0);
    check_output("cache_dir");
    ck_assert(mj_test_exists(bad_dir)); /* the directory itself keeps its bytes */
}
END_TEST

START_TEST(inspect_why_of_a_non_utf8_directory_is_valid_json)
{
    RUN("inspect", "--why", "backend=simt,arch=sm_90a", "--json", "--cache-dir", bad_dir);
    ASSERT_RC(0);
    check_output("cache_dir");
    cJSON *j = mj_test_json(r.out);
    ck_assert(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(j, "cached")));
    ck_assert(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(j, "nearest")));
    ck_assert_ptr_nonnull(strstr(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "preimage")), "\nheader "));
    cJSON_Delete(j);
}
END_TEST

START_TEST(config_of_a_non_utf8_directory_is_valid_json)
{
    RUN("config", "--json", "--cache-dir", bad_dir);
    ASSERT_RC(0);
    ck_assert_msg(valid_utf8(r.out), "not UTF-8: %s", r.out);
    cJSON *j = mj_test_json(r.out);
    int found = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(j, "settings"))
    {
        const char *v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "value"));
        found |= v && strstr(v, "/cache-" FFFD FFFD "-" FFFD "(-" FFFD) != NULL;
    }
    ck_assert_msg(found, "no setting holds the directory: %s", r.out);
    cJSON_Delete(j);
}
END_TEST

static Suite *cli_json_suite(void)
{
    Suite *s = suite_create("cli_json");
    TCase *unit = tcase_create("utf8");
    tcase_add_test(unit, well_formed_utf8_is_kept_byte_for_byte);
    tcase_add_test(unit, each_ill_formed_subpart_becomes_one_replacement);
    suite_add_tcase(s, unit);
    TCase *cli = tcase_create("cli");
    tcase_add_checked_fixture(cli, setup, teardown);
    tcase_add_test(cli, cache_listings_of_a_non_utf8_directory_are_valid_json);
    tcase_add_test(cli, inspect_why_of_a_non_utf8_directory_is_valid_json);
    tcase_add_test(cli, config_of_a_non_utf8_directory_is_valid_json);
    suite_add_tcase(s, cli);
    return s;
}

MJ_CHECK_MAIN(cli_json_suite)
