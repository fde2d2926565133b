/*
 * This file contains the tests of the trust checks beyond the top cache directory (run as
 * root, they make another user's files with chown): a shard directory owned by another user
 * or writable by others is not read from, the lock directory is refused when it is a symbolic
 * link, a lock file owned by another user is refused, and the MOEJIT_CACHE_SHARED hint appears
 * only where it would help.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/cache.h"
#include "cache/dirs.h"
#include "cache/fault.h"
#include "cache/lock.h"
#include "cache/store.h"
#include "lib/cache_test_util.h"
#include "lib/check_main.h"

#define NOBODY 65534

static mj_test_cache T;

static void setup(void)
{
    mj_test_cache_init(&T);
    mj_cache_fault_clear_all();
    mj_cache_fault_reset_warnings();
}

static void teardown(void) { mj_test_cache_cleanup(&T); }

static const char *SPEC = "backend=simt,quant=bf16,act=relu2,arch=sm_90a";

/* Publishes an entry for keytext and returns its key and its two shard directories. */
static mj_key publish(mj_cache *c, const char *keytext, char *d1, char *d2, size_t cap)
{
    mj_key k = mj_test_key(keytext);
    mj_test_build b = {.spec = SPEC};
    mj_program p;
    int hit;
    ck_assert_int_eq(mj_cache_get_or_build(c, &k, "preimage\n", SPEC, mj_test_build_fn, &b, &p, &hit), MOEJIT_OK);
    mj_program_free(&p);
    snprintf(d1, cap, "%s/%.2s", T.dir, k.hex);
    snprintf(d2, cap, "%s/%.2s/%.2s", T.dir, k.hex, k.hex + 2);
    return k;
}

static int found(mj_cache *c, const mj_key *k)
{
    mj_program p;
    int f = 0;
    ck_assert_int_eq(mj_cache_lookup(c, k->hex, SPEC, &p, &f), MOEJIT_OK);
    if (f) mj_program_free(&p);
    return f;
}

static int listed_count(mj_cache *c)
{
    mj_cache_verify_result r;
    T.cfg.mode = MJ_CACHE_READ_ONLY; /* count without quarantining */
    mj_cache *ro = NULL;
    ck_assert_int_eq(mj_cache_open_config(&T.cfg, &ro), MOEJIT_OK);
    ck_assert_int_eq(mj_cache_verify(ro, &r), MOEJIT_OK);
    mj_cache_close(ro);
    T.cfg.mode = MJ_CACHE_READ_WRITE;
    (void)c;
    return (int)r.checked;
}

START_TEST(a_shard_directory_of_another_user_or_writable_by_others_is_not_read)
{
    if (geteuid() != 0) return; /* chown needs root */
    mj_cache *c = mj_test_cache_open(&T);
    char d1[600], d2[600];
    mj_key k = publish(c, "shard", d1, d2, sizeof d1);
    ck_assert_int_eq(found(c, &k), 1);
    ck_assert_int_eq(listed_count(c), 1);

    /* The second-level shard owned by another user: the entry in it is not served or listed. */
    ck_assert_int_eq(chown(d2, NOBODY, NOBODY), 0);
    mj_test_stderr_begin();
    int f = found(c, &k);
    int n = listed_count(c);
    const char *err = mj_test_stderr_end();
    ck_assert_int_eq(f, 0);
    ck_assert_int_eq(n, 0);
    ck_assert_msg(strstr(err, d2) && strstr(err, "owned by uid 65534") && !strstr(err, "MOEJIT_CACHE_SHARED"),
                  "%s", err);
    ck_assert_int_eq(chown(d2, 0, 0), 0);

    /* The first-level shard writable by others. */
    ck_assert_int_eq(chmod(d1, 0777), 0);
    mj_cache_fault_reset_warnings();
    mj_test_stderr_begin();
    f = found(c, &k);
    n = listed_count(c);
    err = mj_test_stderr_end();
    ck_assert_int_eq(f, 0);
    ck_assert_int_eq(n, 0);
    ck_assert_msg(strstr(err, "writable by other users"), "%s", err);
    mj_cache_close(c);
}
END_TEST

START_TEST(a_symlinked_lock_directory_is_refused)
{
    char real[600];
    snprintf(real, sizeof real, "%s/elsewhere", T.root);
    ck_assert_int_eq(mkdir(real, 0700), 0);
    ck_assert_int_eq(symlink(real, T.lock_dir), 0);
    ck_assert_int_eq(mj_cache_check_own_dir(T.lock_dir, "lock_dir", 0, NULL), MOEJIT_ERR_IO);
    ck_assert_msg(strstr(moejit_last_error(), "symbolic link"), "%s", moejit_last_error());
    /* The cache compiles without cross-process locks and says why; nothing lands in the target. */
    mj_cache *c = mj_test_cache_open(&T);
    char d1[600], d2[600];
    mj_test_stderr_begin();
    publish(c, "lock", d1, d2, sizeof d1);
    const char *err = mj_test_stderr_end();
    ck_assert_msg(strstr(err, "symbolic link") && strstr(err, "without cross-process locks"), "%s", err);
    mj_cache_close(c);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "test -z \"$(ls -A '%s')\"", real);
    ck_assert_msg(system(cmd) == 0, "lock files were created through the link in %s", real);
}
END_TEST

START_TEST(a_lock_file_owned_by_another_user_is_refused)
{
    if (geteuid() != 0) return;
    ck_assert_int_eq(mkdir(T.lock_dir, 0700), 0);
    char path[700];
    snprintf(path, sizeof path, "%s/k.lock", T.lock_dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    ck_assert_int_eq(chown(path, NOBODY, NOBODY), 0);
    mj_cache_lock l;
    int held = 1;
    ck_assert_int_eq(mj_cache_lock_acquire(T.lock_dir, "k", 0, &l, &held), MOEJIT_ERR_IO);
    ck_assert_int_eq(held, 0);
    ck_assert_msg(strstr(moejit_last_error(), path) && strstr(moejit_last_error(), "owned by uid 65534"), "%s",
                  moejit_last_error());
    /* A FIFO in its place is refused at once, not waited on. */
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    ck_assert_int_eq(mj_cache_lock_acquire(T.lock_dir, "k", 0, &l, &held), MOEJIT_ERR_IO);
    ck_assert_msg(strstr(moejit_last_error(), "FIFO"), "%s", moejit_last_error());
}
END_TEST

START_TEST(the_shared_hint_appears_only_where_it_would_help)
{
    ck_assert_int_eq(mkdir(T.dir, 0700), 0);
    ck_assert_int_eq(chmod(T.dir, 0770), 0); /* group-writable, our group: shared would help */
    mj_cache *c = NULL;
    ck_assert_int_eq(mj_cache_open_config(&T.cfg, &c), MOEJIT_ERR_IO);
    ck_assert_msg(strstr(moejit_last_error(), "MOEJIT_CACHE_SHARED=1"), "%s", moejit_last_error());
    ck_assert_int_eq(chmod(T.dir, 0777), 0); /* others may write: shared would not help */
    ck_assert_int_eq(mj_cache_open_config(&T.cfg, &c), MOEJIT_ERR_IO);
    ck_assert_msg(!strstr(moejit_last_error(), "MOEJIT_CACHE_SHARED"), "%s", moejit_last_error());
    if (geteuid() != 0) return;
    ck_assert_int_eq(chmod(T.dir, 0770), 0);
    ck_assert_int_eq(chown(T.dir, NOBODY, NOBODY), 0); /* another user and group */
    ck_assert_int_eq(mj_cache_open_config(&T.cfg, &c), MOEJIT_ERR_IO);
    ck_assert_msg(!strstr(moejit_last_error(), "MOEJIT_CACHE_SHARED"), "%s", moejit_last_error());
}
END_TEST

static Suite *cache_trust_suite(void)
{
    Suite *s = suite_create("cache_trust");
    TCase *tc = tcase_create("trust");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, a_shard_directory_of_another_user_or_writable_by_others_is_not_read);
    tcase_add_test(tc, a_symlinked_lock_directory_is_refused);
    tcase_add_test(tc, a_lock_file_owned_by_another_user_is_refused);
    tcase_add_test(tc, the_shared_hint_appears_only_where_it_would_help);
    suite_add_tcase(s, tc);
    return s;
}

MJ_CHECK_MAIN(cache_trust_suite)
