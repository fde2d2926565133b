/*
 * This file contains the tests of cache gc (cache/gc.c): the cache is kept under its limit,
 * least recently used entries go first, an entry used recently survives, age removes unused
 * entries, a publish over the limit trims automatically, and the shard size counters follow.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/cache.h"
#include "cache/fault.h"
#include "lib/cache_test_util.h"
#include "lib/check_main.h"
#include "cache/store.h"

static mj_test_cache T;
static const char *SPEC = "backend=simt,act=gelu";

static void setup(void)
{
    mj_test_cache_init(&T);
    mj_cache_fault_clear_all();
}

static void teardown(void) { mj_test_cache_cleanup(&T); }

static void add(mj_cache *c, const char *name, long age_s)
{
    mj_test_build b = {.spec = SPEC, .size = 10000};
    mj_key k = mj_test_key(name);
    mj_program p;
    int hit;
    ck_assert_int_eq(mj_cache_get_or_build(c, &k, "pre", SPEC, mj_test_build_fn, &b, &p, &hit), MOEJIT_OK);
    mj_program_free(&p);
    char path[600];
    mj_cache_entry_path(&T.cfg, k.hex, path, sizeof path);
    mj_test_age(path, age_s);
}

static int present(const char *name)
{
    mj_key k = mj_test_key(name);
    char path[600];
    mj_cache_entry_path(&T.cfg, k.hex, path, sizeof path);
    return access(path, F_OK) == 0;
}

static int64_t entry_size(mj_cache *c)
{
    (void)c;
    mj_key k = mj_test_key("e0");
    char path[600];
    mj_cache_entry_path(&T.cfg, k.hex, path, sizeof path);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    return (int64_t)st.st_size;
}

START_TEST(gc_keeps_the_cache_under_its_limit_removing_least_recently_used_first)
{
    mj_cache *c = mj_test_cache_open(&T);
    /* e0 is the oldest, e4 the newest. */
    add(c, "e0", 5000), add(c, "e1", 4000), add(c, "e2", 3000), add(c, "e3", 2000), add(c, "e4", 1000);
    int64_t one = entry_size(c);
    mj_cache_gc_result r;
    ck_assert_int_eq(mj_cache_gc(c, 3 * one, 0, &r), MOEJIT_OK);
    ck_assert_int_eq(r.removed, 2);
    ck_assert_int_eq(r.kept, 3);
    ck_assert_int_le(r.kept_bytes, 3 * one);
    ck_assert(!present("e0") && !present("e1"));
    ck_assert(present("e2") && present("e3") && present("e4"));
    mj_cache_stats s;
    mj_cache_stats_get(c, &s);
    ck_assert_int_eq(s.v[MJ_STAT_FILES], 3);
    ck_assert_int_eq(s.v[MJ_STAT_BYTES], 3 * one);
    ck_assert_int_eq(s.v[MJ_STAT_EVICTED], 2);
    mj_cache_close(c);
}
END_TEST

START_TEST(a_hit_makes_an_old_entry_recently_used)
{
    mj_cache *c = mj_test_cache_open(&T);
    add(c, "e0", 5000), add(c, "e1", 4000), add(c, "e2", 3000);
    int64_t one = entry_size(c);
    /* Use e0: its last-use stamp moves to now, so e1 is now the least recently used. */
    mj_test_build b = {.spec = SPEC, .size = 10000};
    mj_key k = mj_test_key("e0");
    mj_program p;
    int hit;
    ck_assert_int_eq(mj_cache_get_or_build(c, &k, "pre", SPEC, mj_test_build_fn, &b, &p, &hit), MOEJIT_OK);
    ck_assert_int_eq(hit, 1);
    mj_program_free(&p);
    mj_cache_gc_result r;
    ck_assert_int_eq(mj_cache_gc(c, 2 * one, 0, &r), MOEJIT_OK);
    ck_assert(present("e0") && !present("e1") && present("e2"));
    mj_cache_close(c);
}
END_TEST

START_TEST(gc_by_age_removes_only_entries_unused_for_longer)
{
    mj_cache *c = mj_test_cache_open(&T);
    add(c, "old", 40 * 86400), add(c, "new", 60);
    mj_cache_gc_result r;
    ck_assert_int_eq(mj_cache_gc(c, 0, 30 * 86400, &r), MOEJIT_OK);
    ck_assert_int_eq(r.removed, 1);
    ck_assert(!present("old") && present("new"));
    mj_cache_close(c);
}
END_TEST

START_TEST(a_publish_over_the_limit_trims_the_cache_automatically)
{
    mj_cache *c = mj_test_cache_open(&T);
    add(c, "e0", 5000);
    int64_t one = entry_size(c);
    mj_cache_close(c);
    T.cfg.max_bytes = 3 * one + one / 2;
    c = mj_test_cache_open(&T);
    add(c, "e1", 4000), add(c, "e2", 3000);
    ck_assert(present("e0") && present("e1") && present("e2"));
    add(c, "e3", 0); /* 4 entries > 3.5: trimmed to 90% of the limit, oldest first */
    ck_assert(!present("e0"));
    ck_assert(present("e2") && present("e3"));
    mj_cache_stats s;
    mj_cache_stats_get(c, &s);
    ck_assert_int_le(s.v[MJ_STAT_BYTES], T.cfg.max_bytes);
    mj_cache_close(c);
}
END_TEST

START_TEST(gc_recounts_drifted_size_counters)
{
    mj_cache *c = mj_test_cache_open(&T);
    add(c, "e0", 10), add(c, "e1", 10);
    int64_t one = entry_size(c);
    /* An entry removed behind the cache's back (another node, a user's rm). */
    mj_key k = mj_test_key("e1");
    char path[600];
    mj_cache_entry_path(&T.cfg, k.hex, path, sizeof path);
    ck_assert_int_eq(unlink(path), 0);
    mj_cache_gc_result r;
    ck_assert_int_eq(mj_cache_gc(c, 0, 0, &r), MOEJIT_OK);
    mj_cache_stats s;
    mj_cache_stats_get(c, &s);
    ck_assert_int_eq(s.v[MJ_STAT_FILES], 1);
    ck_assert_int_eq(s.v[MJ_STAT_BYTES], one);
    mj_cache_close(c);
}
END_TEST

START_TEST(gc_removes_old_quarantined_files_and_keeps_recent_ones)
{
    mj_cache *c = mj_test_cache_open(&T);
    char q[400], f1[500], f2[500];
    snprintf(q, sizeof q, "%s/quarantine", T.dir);
    ck_assert_int_eq(mkdir(q, 0700), 0);
    snprintf(f1, sizeof f1, "%s/old", q);
    snprintf(f2, sizeof f2, "%s/recent", q);
    FILE *f = fopen(f1, "w");
    fclose(f);
    f = fopen(f2, "w");
    fclose(f);
    mj_test_age(f1, 8 * 86400);
    mj_cache_gc_result r;
    ck_assert_int_eq(mj_cache_gc(c, 0, 0, &r), MOEJIT_OK);
    ck_assert_int_ne(access(f1, F_OK), 0);
    ck_assert_int_eq(access(f2, F_OK), 0);
    mj_cache_close(c);
}
END_TEST

START_TEST(gc_is_refused_on_a_read_only_cache)
{
    mj_cache *c = mj_test_cache_open(&T);
    add(c, "e0", 10);
    mj_cache_close(c);
    T.cfg.mode = MJ_CACHE_READ_ONLY;
    c = mj_test_cache_open(&T);
    mj_cache_gc_result r;
    ck_assert_int_eq(mj_cache_gc(c, 1, 0, &r), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "read-only"));
    ck_assert(present("e0"));
    mj_cache_close(c);
}
END_TEST

static Suite *cache_gc_suite(void)
{
    Suite *s = suite_create("cache_gc");
    TCase *tc = tcase_create("gc");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, gc_keeps_the_cache_under_its_limit_removing_least_recently_used_first);
    tcase_add_test(tc, a_hit_makes_an_old_entry_recently_used);
    tcase_add_test(tc, gc_by_age_removes_only_entries_unused_for_longer);
    tcase_add_test(tc, a_publish_over_the_limit_trims_the_cache_automatically);
    tcase_add_test(tc, gc_recounts_drifted_size_counters);
    tcase_add_test(tc, gc_removes_old_quarantined_files_and_keeps_recent_ones);
    tcase_add_test(tc, gc_is_refused_on_a_read_only_cache);
    suite_add_tcase(s, tc);
    return s;
}

MJ_CHECK_MAIN(cache_gc_suite)
