/*
 * This file contains the tests that messages say what happened: control characters from the
 * input are escaped in every message (mj_fail, the cache's warnings), a quarantine that could
 * not move the file says it removed it, a directory in place of an entry is named as such,
 * and maintenance on a read-write cache that fell back to memory fails naming cache_mode.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/cache.h"
#include "cache/fault.h"
#include "cache/store.h"
#include "core/status.h"
#include "lib/cache_test_util.h"
#include "lib/check_main.h"

static mj_test_cache T;

static void setup(void)
{
    mj_test_cache_init(&T);
    mj_cache_fault_clear_all();
    mj_cache_fault_reset_warnings();
}

static void teardown(void)
{
    mj_cache_fault_clear_all();
    mj_test_cache_cleanup(&T);
}

static const char *SPEC = "backend=simt,quant=bf16,act=relu2,arch=sm_90a";

static int has_control(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f || (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)) return 1;
    return 0;
}

START_TEST(control_characters_from_input_are_escaped_in_messages)
{
    const char *evil = "a\nmoejit: forged line\r\x1b[2J\tb\xc2\x9b" "31m\x7f" "c \xc3\xa9";
    mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "spec: bad value '%s'", evil);
    const char *m = moejit_last_error();
    ck_assert_msg(!has_control(m), "%s", m);
    ck_assert_str_eq(m, "spec: bad value 'a\\nmoejit: forged line\\r\\x1b[2J\\tb\\xc2\\x9b31m\\x7fc \xc3\xa9'");
    mj_fail_prefix(MOEJIT_ERR_INVALID_ARGUMENT, "file %s", "x\x1b]0;title\x07");
    ck_assert_msg(!has_control(moejit_last_error()), "%s", moejit_last_error());
    /* Truncation never splits an escape into a raw byte. */
    char small[8];
    ck_assert_uint_eq(mj_escape_text(small, sizeof small, "ab\x1b\x1b"), 6);
    ck_assert_str_eq(small, "ab\\x1b");
    /* The cache's warnings too (a path with a newline in it). */
    char dir[400];
    snprintf(dir, sizeof dir, "%s/odd\nname\x1b[31m", T.root);
    ck_assert_int_eq(mkdir(dir, 0777), 0);
    ck_assert_int_eq(chmod(dir, 0777), 0);
    snprintf(T.cfg.dir, sizeof T.cfg.dir, "%s", dir);
    mj_cache *c = NULL;
    ck_assert_int_eq(mj_cache_open_config(&T.cfg, &c), MOEJIT_ERR_IO);
    ck_assert_msg(!has_control(moejit_last_error()) && strstr(moejit_last_error(), "odd\\nname\\x1b[31m"), "%s",
                  moejit_last_error());
}
END_TEST

/* Publishes one entry and corrupts it; returns its path. */
static void bad_entry(mj_cache *c, mj_key *k, char *path, size_t cap)
{
    *k = mj_test_key("q");
    mj_test_build b = {.spec = SPEC};
    mj_program p;
    int hit;
    ck_assert_int_eq(mj_cache_get_or_build(c, k, "preimage\n", SPEC, mj_test_build_fn, &b, &p, &hit), MOEJIT_OK);
    mj_program_free(&p);
    mj_cache_entry_path(&T.cfg, k->hex, path, cap);
    mj_test_poke(path, 100, "\xff", 1);
}

START_TEST(quarantine_says_moved_or_removed_as_it_happened)
{
    mj_cache *c = mj_test_cache_open(&T);
    mj_key k;
    char path[600], q[600];
    bad_entry(c, &k, path, sizeof path);
    mj_program p;
    int found;
    mj_test_stderr_begin();
    ck_assert_int_eq(mj_cache_lookup(c, k.hex, SPEC, &p, &found), MOEJIT_OK);
    const char *err = mj_test_stderr_end();
    snprintf(q, sizeof q, "moved to %s/quarantine/", T.dir);
    ck_assert_msg(strstr(err, q) && strstr(err, "bad checksum"), "%s", err);

    /* No quarantine possible (a file where its directory should be): removed, and said so. */
    char qdir[600];
    snprintf(qdir, sizeof qdir, "%s/quarantine", T.dir);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", qdir);
    ck_assert_int_eq(system(cmd), 0);
    FILE *f = fopen(qdir, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    bad_entry(c, &k, path, sizeof path);
    mj_cache_fault_reset_warnings();
    mj_test_stderr_begin();
    ck_assert_int_eq(mj_cache_lookup(c, k.hex, SPEC, &p, &found), MOEJIT_OK);
    err = mj_test_stderr_end();
    ck_assert_msg(strstr(err, "removed, since the quarantine is unavailable") && !strstr(err, "moved to"), "%s", err);
    ck_assert_int_ne(access(path, F_OK), 0);
    mj_cache_close(c);
}
END_TEST

START_TEST(a_directory_in_place_of_an_entry_is_named_as_such)
{
    mj_cache *c = mj_test_cache_open(&T);
    mj_key k;
    char path[600];
    bad_entry(c, &k, path, sizeof path);
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(mkdir(path, 0700), 0);
    mj_program p;
    int found = 1;
    mj_test_stderr_begin();
    ck_assert_int_eq(mj_cache_lookup(c, k.hex, SPEC, &p, &found), MOEJIT_OK);
    const char *err = mj_test_stderr_end();
    ck_assert_int_eq(found, 0);
    ck_assert_msg(strstr(err, "not a regular file") && !strstr(err, "foreign"), "%s", err);
    mj_entry e;
    ck_assert_int_eq(mkdir(path, 0700), 0);
    ck_assert_int_eq(mj_cache_read(c, k.hex, &e), MOEJIT_ERR_CACHE_MISS);
    ck_assert_msg(strstr(moejit_last_error(), "not a regular file"), "%s", moejit_last_error());
    mj_cache_close(c);
}
END_TEST

START_TEST(maintenance_on_a_cache_that_fell_back_to_memory_fails_naming_cache_mode)
{
    mj_cache_fault_set(MJ_FAULT_MKDIR, EROFS, 0, -1);
    mj_cache *c = NULL;
    mj_test_stderr_begin();
    ck_assert_int_eq(mj_cache_open_config(&T.cfg, &c), MOEJIT_OK);
    mj_test_stderr_end();
    mj_cache_gc_result r;
    ck_assert_int_eq(mj_cache_gc(c, 0, 0, &r), MOEJIT_ERR_IO);
    ck_assert_msg(strstr(moejit_last_error(), "cache_mode") && strstr(moejit_last_error(), "Read-only file system"),
                  "%s", moejit_last_error());
    ck_assert_int_eq(mj_cache_clear(c, NULL), MOEJIT_ERR_IO);
    ck_assert_int_eq(mj_cache_stats_reset(c), MOEJIT_ERR_IO);
    mj_cache_close(c);
    /* A read-only cache says the same in its own words. */
    mj_cache_fault_clear_all();
    ck_assert_int_eq(mkdir(T.dir, 0700), 0);
    T.cfg.mode = MJ_CACHE_READ_ONLY;
    c = mj_test_cache_open(&T);
    ck_assert_int_ne(mj_cache_gc(c, 0, 0, &r), MOEJIT_OK);
    ck_assert_msg(strstr(moejit_last_error(), "cache_mode"), "%s", moejit_last_error());
    mj_cache_close(c);
}
END_TEST

static Suite *messages_suite(void)
{
    Suite *s = suite_create("messages");
    TCase *tc = tcase_create("messages");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, control_characters_from_input_are_escaped_in_messages);
    tcase_add_test(tc, quarantine_says_moved_or_removed_as_it_happened);
    tcase_add_test(tc, a_directory_in_place_of_an_entry_is_named_as_such);
    tcase_add_test(tc, maintenance_on_a_cache_that_fell_back_to_memory_fails_naming_cache_mode);
    suite_add_tcase(s, tc);
    return s;
}

MJ_CHECK_MAIN(messages_suite)
