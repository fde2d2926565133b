/*
 * This file checks, through the built CLI, that what lies at a path the cache or the CLI reads
 * cannot hang or fool it: a FIFO in place of an entry (inspect), of a shard's stats file
 * (cache stats) or of a pack (cache import) gives a clear error or is skipped at once; each
 * test is bounded by Check's timeout, so a hang fails it.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/check_main.h"
#include "lib/cli_run.h"

static mj_test_cli t;
static mj_test_cli_result r;

/* Also without Check's fork (the sanitizer runs), a hang must end the run, not stall it. */
static void setup(void)
{
    mj_test_cli_init(&t);
    alarm(60);
}
static void teardown(void)
{
    alarm(0);
    mj_test_cli_result_free(&r);
    mj_test_cli_cleanup(&t);
}

#define KEY "abcd0123456789abcdef0123456789abcdef0123456789abcdef0123456789ab"

/* <cache>/ab/cd/ made 0700, as the cache makes them. */
static void make_shard(char *d2, size_t cap)
{
    char d1[320];
    ck_assert_int_eq(mkdir(t.cache, 0700), 0);
    snprintf(d1, sizeof d1, "%s/ab", t.cache);
    ck_assert_int_eq(mkdir(d1, 0700), 0);
    ck_assert_int_lt(snprintf(d2, cap, "%s/cd", d1), (int)cap);
    ck_assert_int_eq(mkdir(d2, 0700), 0);
}

START_TEST(a_fifo_in_place_of_an_entry_does_not_hang_inspect)
{
    char d2[400], path[600];
    make_shard(d2, sizeof d2);
    snprintf(path, sizeof path, "%s/" KEY ".v2.mjk", d2);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    RUN("inspect", KEY);
    ASSERT_RC(1);
    ck_assert_msg(strstr(r.err, "no valid cache entry") && strstr(r.err, KEY), "%s", r.err);
    RUN("cache", "ls", "--json");
    ASSERT_RC(0);
    RUN("cache", "verify", "--json");
    ck_assert_int_le(r.rc, 1);
}
END_TEST

START_TEST(a_fifo_in_place_of_the_stats_file_does_not_hang_cache_stats)
{
    char d2[400], path[600];
    make_shard(d2, sizeof d2);
    snprintf(path, sizeof path, "%s/ab/stats", t.cache);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    RUN("cache", "stats");
    ASSERT_RC(0);
    ck_assert_msg(strstr(r.err, path) && strstr(r.err, "FIFO"), "%s", r.err);
    RUN("cache", "stats", "--reset", "--json");
    ASSERT_RC(0);
}
END_TEST

START_TEST(a_fifo_as_the_pack_does_not_hang_cache_import)
{
    char path[600];
    snprintf(path, sizeof path, "%s/pack.mjkpack", t.root);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    RUN("cache", "import", path, "--trust-unsigned");
    ASSERT_RC(1);
    ck_assert_msg(strstr(r.err, path) && strstr(r.err, "is a FIFO, not a regular file"), "%s", r.err);
}
END_TEST

static Suite *cli_special_files_suite(void)
{
    Suite *s = suite_create("cli_special_files");
    TCase *tc = tcase_create("special");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 20);
    tcase_add_test(tc, a_fifo_in_place_of_an_entry_does_not_hang_inspect);
    tcase_add_test(tc, a_fifo_in_place_of_the_stats_file_does_not_hang_cache_stats);
    tcase_add_test(tc, a_fifo_as_the_pack_does_not_hang_cache_import);
    suite_add_tcase(s, tc);
    return s;
}

MJ_CHECK_MAIN(cli_special_files_suite)
