/*
 * This file contains the tests of the atomic publish (cache/publish.c): a file appears whole
 * or not at all, a failure at any step leaves neither the file nor a temp file, and stale
 * temp files of crashed writers are cleaned while fresh ones are left to their writers.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cache/fault.h"
#include "lib/cache_test_util.h"
#include "lib/check_main.h"
#include "cache/publish.h"

static mj_test_cache T;

static void setup(void)
{
    mj_test_cache_init(&T);
    mj_cache_fault_clear_all();
    ck_assert_int_eq(mkdir(T.dir, 0700), 0);
}

static void teardown(void)
{
    mj_cache_fault_clear_all();
    mj_test_cache_cleanup(&T);
}

static int n_files(void)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "exit $(ls -A '%s' | wc -l)", T.dir);
    int rc = system(cmd);
    return WEXITSTATUS(rc);
}

START_TEST(a_publish_writes_the_whole_file_with_the_given_mode)
{
    mj_publish_opts po = {0600, 1};
    ck_assert_int_eq(mj_cache_publish(T.dir, "f", "hello", 5, &po, NULL), MOEJIT_OK);
    char path[400];
    snprintf(path, sizeof path, "%s/f", T.dir);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(st.st_size, 5);
    ck_assert_int_eq(st.st_mode & 0777, 0600);
    ck_assert_int_eq(n_files(), 1);
    /* A second publish replaces the file whole. */
    ck_assert_int_eq(mj_cache_publish(T.dir, "f", "hi", 2, &po, NULL), MOEJIT_OK);
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(st.st_size, 2);
}
END_TEST

/* Each fault point before the commit: the publish fails with the errno in the message and
 * leaves nothing (the loop variable walks the points). */
static const struct {
    mj_cache_fault_id id;
    int err;
    const char *text;
} k_points[] = {
    {MJ_FAULT_OPEN_TEMP, EACCES, "Permission denied"},
    {MJ_FAULT_WRITE, ENOSPC, "No space left on device"},
    {MJ_FAULT_FSYNC, EIO, "Input/output error"},
    {MJ_FAULT_BEFORE_RENAME, EIO, "Input/output error"},
    {MJ_FAULT_RENAME, EROFS, "Read-only file system"},
};

START_TEST(a_failure_before_the_rename_leaves_nothing)
{
    mj_cache_fault_set(k_points[_i].id, k_points[_i].err, 0, 1);
    mj_publish_opts po = {0600, 1};
    int err = 0;
    ck_assert_int_eq(mj_cache_publish(T.dir, "f", "hello", 5, &po, &err), MOEJIT_ERR_IO);
    ck_assert_int_eq(err, k_points[_i].err);
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), k_points[_i].text));
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "/f"));
    ck_assert_int_eq(n_files(), 0);
}
END_TEST

START_TEST(a_failed_directory_sync_keeps_the_complete_file)
{
    mj_cache_fault_set(MJ_FAULT_FSYNC_DIR, EIO, 0, 1);
    mj_publish_opts po = {0600, 1};
    ck_assert_int_eq(mj_cache_publish(T.dir, "f", "hello", 5, &po, NULL), MOEJIT_ERR_IO);
    ck_assert_int_eq(n_files(), 1);
}
END_TEST

START_TEST(stale_temp_files_are_cleaned_and_fresh_ones_kept)
{
    char stale[400], fresh[400], entry[400];
    snprintf(stale, sizeof stale, "%s/" MJ_TEMP_PREFIX "a.1", T.dir);
    snprintf(fresh, sizeof fresh, "%s/" MJ_TEMP_PREFIX "b.2", T.dir);
    snprintf(entry, sizeof entry, "%s/old-entry", T.dir);
    const char *files[] = {stale, fresh, entry};
    for (int i = 0; i < 3; i++) {
        FILE *f = fopen(files[i], "w");
        fclose(f);
    }
    mj_test_age(stale, MJ_STALE_TEMP_SECONDS + 60);
    mj_test_age(entry, 10 * MJ_STALE_TEMP_SECONDS);
    mj_test_age(fresh, 5); /* a live writer's */
    ck_assert_int_eq(mj_cache_clean_temps(T.dir, MJ_STALE_TEMP_SECONDS), 1);
    ck_assert_int_ne(access(stale, F_OK), 0);
    ck_assert_int_eq(access(fresh, F_OK), 0);
    ck_assert_int_eq(access(entry, F_OK), 0);
}
END_TEST

static Suite *cache_publish_suite(void)
{
    Suite *s = suite_create("cache_publish");
    TCase *tc = tcase_create("publish");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, a_publish_writes_the_whole_file_with_the_given_mode);
    tcase_add_loop_test(tc, a_failure_before_the_rename_leaves_nothing, 0,
                        (int)(sizeof k_points / sizeof k_points[0]));
    tcase_add_test(tc, a_failed_directory_sync_keeps_the_complete_file);
    tcase_add_test(tc, stale_temp_files_are_cleaned_and_fresh_ones_kept);
    suite_add_tcase(s, tc);
    return s;
}

MJ_CHECK_MAIN(cache_publish_suite)
