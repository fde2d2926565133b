/*
 * This file contains the tests of the per-key lock (cache/lock.c) inside one process: two
 * threads exclude each other (flock is per open file description), a try with timeout 0
 * fails at once when held, different names never conflict, and a released lock leaves no
 * file behind. Cross-process behaviour is in check_cache_single_flight.c.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/cache_test_util.h"
#include "lib/check_main.h"
#include "cache/lock.h"

static mj_test_cache T;
static atomic_int g_inside, g_max_inside;

static void setup(void)
{
    mj_test_cache_init(&T);
    ck_assert_int_eq(mkdir(T.lock_dir, 0700), 0);
}

static void teardown(void) { mj_test_cache_cleanup(&T); }

static void *worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < 50; i++) {
        mj_cache_lock l;
        int held = 0;
        if (mj_cache_lock_acquire(T.lock_dir, "same", 10, &l, &held) != MOEJIT_OK || !held) return (void *)1;
        int now = atomic_fetch_add(&g_inside, 1) + 1;
        int prev = atomic_load(&g_max_inside);
        while (now > prev && !atomic_compare_exchange_weak(&g_max_inside, &prev, now)) {}
        usleep(100);
        atomic_fetch_sub(&g_inside, 1);
        mj_cache_lock_release(&l);
    }
    return NULL;
}

START_TEST(threads_of_one_process_exclude_each_other)
{
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, worker, NULL);
    for (int i = 0; i < 4; i++) {
        void *rc;
        pthread_join(t[i], &rc);
        ck_assert_ptr_null(rc);
    }
    ck_assert_int_eq(atomic_load(&g_max_inside), 1);
}
END_TEST

START_TEST(a_held_lock_times_out_and_other_names_are_free)
{
    mj_cache_lock a, b, c;
    int held;
    ck_assert_int_eq(mj_cache_lock_acquire(T.lock_dir, "k1", 0, &a, &held), MOEJIT_OK);
    ck_assert_int_eq(held, 1);
    ck_assert_int_eq(mj_cache_lock_acquire(T.lock_dir, "k1", 0.05, &b, &held), MOEJIT_OK);
    ck_assert_int_eq(held, 0);
    ck_assert_int_eq(mj_cache_lock_acquire(T.lock_dir, "k2", 0, &c, &held), MOEJIT_OK);
    ck_assert_int_eq(held, 1);
    mj_cache_lock_release(&c);
    mj_cache_lock_release(&a);
    char path[400];
    snprintf(path, sizeof path, "%s/k1.lock", T.lock_dir);
    ck_assert_int_ne(access(path, F_OK), 0); /* removed by its holder */
    ck_assert_int_eq(mj_cache_lock_acquire(T.lock_dir, "k1", 0, &b, &held), MOEJIT_OK);
    ck_assert_int_eq(held, 1);
    mj_cache_lock_release(&b);
}
END_TEST

START_TEST(a_missing_lock_dir_is_an_error_naming_lock_dir)
{
    mj_cache_lock l;
    int held;
    ck_assert_int_eq(mj_cache_lock_acquire("/nonexistent/moejit", "k", 0, &l, &held), MOEJIT_ERR_IO);
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "lock_dir: "));
}
END_TEST

static Suite *cache_lock_suite(void)
{
    Suite *s = suite_create("cache_lock");
    TCase *tc = tcase_create("lock");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, threads_of_one_process_exclude_each_other);
    tcase_add_test(tc, a_held_lock_times_out_and_other_names_are_free);
    tcase_add_test(tc, a_missing_lock_dir_is_an_error_naming_lock_dir);
    suite_add_tcase(s, tc);
    return s;
}

MJ_CHECK_MAIN(cache_lock_suite)
