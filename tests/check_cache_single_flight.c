/*
 * This file contains the tests of single flight across processes (cache/lock.c through
 * mj_cache_get_or_build): 16 processes asking for one missing key compile it once and get
 * byte-identical cubins (with real NVRTC compiles), a writer killed before its rename leaves
 * no entry, a dead lock holder releases its lock, a lock timeout compiles anyway, and
 * unrelated keys never wait on each other.
 *
 * The test process is single-threaded when it forks; children report through files and
 * their exit status.
 */
#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cache/cache.h"
#include "cache/fault.h"
#include "lib/cache_test_util.h"
#include "lib/check_main.h"
#include "cache/lock.h"
#include "cache/store.h"

#define N_PROCS 16

static mj_test_cache T;
static char COUNT[400];
static const char *SPEC = "backend=simt,act=silu";
static const char *REAL_SPEC = "backend=simt,quant=bf16,act=swiglu(alpha=1.702,beta=1,limit=7),arch=sm_90a";

static void setup(void)
{
    mj_test_cache_init(&T);
    snprintf(COUNT, sizeof COUNT, "%s/builds", T.root);
    mj_cache_fault_clear_all();
    mj_cache_fault_reset_warnings();
}

static void teardown(void) { mj_test_cache_cleanup(&T); }

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n) _exit(3);
    fclose(f);
}

static int files_equal(const char *a, const char *b)
{
    char cmd[900];
    snprintf(cmd, sizeof cmd, "cmp -s '%s' '%s'", a, b);
    return system(cmd) == 0;
}

/* Forks N children that block on a pipe, releases them at once, each runs fn(i); returns
 * the number of children that exited 0. */
static int run_children(int n, void (*fn)(int i))
{
    int gate[2];
    ck_assert_int_eq(pipe(gate), 0);
    pid_t pids[N_PROCS];
    for (int i = 0; i < n; i++) {
        pids[i] = fork();
        ck_assert_int_ge(pids[i], 0);
        if (pids[i] == 0) {
            close(gate[1]);
            char c;
            if (read(gate[0], &c, 1) != 0) _exit(4); /* EOF when the parent closes its end */
            fn(i);
            _exit(0);
        }
    }
    close(gate[0]);
    close(gate[1]); /* every child wakes at the same moment */
    int ok = 0;
    for (int i = 0; i < n; i++) {
        int status;
        waitpid(pids[i], &status, 0);
        ok += WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    return ok;
}

static void fake_child(int i)
{
    mj_cache *c = mj_test_cache_open(&T);
    mj_test_build b = {.spec = SPEC, .seed = 11, .size = 20000, .count_file = COUNT, .sleep_s = 0.3};
    mj_key k = mj_test_key("one missing key");
    mj_program p;
    int hit;
    if (mj_cache_get_or_build(c, &k, "pre", SPEC, mj_test_build_fn, &b, &p, &hit) != MOEJIT_OK) _exit(1);
    char out[400];
    snprintf(out, sizeof out, "%s/cubin.%d", T.root, i);
    write_file(out, p.cubin, p.cubin_len);
    mj_program_free(&p);
    mj_cache_close(c);
}

START_TEST(sixteen_processes_asking_for_one_missing_key_build_it_once)
{
    ck_assert_int_eq(run_children(N_PROCS, fake_child), N_PROCS);
    ck_assert_int_eq(mj_test_count_file(COUNT), 1);
    char a[400], b[400];
    snprintf(a, sizeof a, "%s/cubin.0", T.root);
    for (int i = 1; i < N_PROCS; i++) {
        snprintf(b, sizeof b, "%s/cubin.%d", T.root, i);
        ck_assert_msg(files_equal(a, b), "cubin of process %d differs", i);
    }
    mj_cache *c = mj_test_cache_open(&T);
    mj_cache_stats s;
    mj_cache_stats_get(c, &s);
    ck_assert_int_eq(s.v[MJ_STAT_COMPILES], 1);
    ck_assert_int_eq(s.v[MJ_STAT_HITS] + s.v[MJ_STAT_MISSES], N_PROCS);
    mj_cache_close(c);
    /* Lock files are removed by their holders. */
    char cmd[500];
    snprintf(cmd, sizeof cmd, "test -z \"$(ls -A '%s' | grep -v '^stats-')\"", T.lock_dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

static mj_test_real_job REAL;

static void real_child(int i)
{
    mj_cache *c = mj_test_cache_open(&T);
    mj_program p;
    int hit;
    REAL.count_file = COUNT;
    moejit_status st = mj_cache_get_or_build(c, &REAL.key, REAL.preimage.data, REAL.spec->canonical,
                                             mj_test_real_build_fn, &REAL, &p, &hit);
    if (st != MOEJIT_OK) {
        fprintf(stderr, "child %d: %s\n", i, moejit_last_error());
        _exit(1);
    }
    char out[400];
    snprintf(out, sizeof out, "%s/cubin.%d", T.root, i);
    write_file(out, p.cubin, p.cubin_len);
    mj_program_free(&p);
    mj_cache_close(c);
}

START_TEST(sixteen_processes_compile_one_real_kernel_once_with_identical_cubins)
{
    moejit_status st = mj_test_real_job_init(&REAL, REAL_SPEC);
    ck_assert_msg(st == MOEJIT_OK, "%s", moejit_last_error());
    ck_assert_int_eq(run_children(N_PROCS, real_child), N_PROCS);
    ck_assert_int_eq(mj_test_count_file(COUNT), 1);
    char a[400], b[400];
    snprintf(a, sizeof a, "%s/cubin.0", T.root);
    struct stat sa;
    ck_assert_int_eq(stat(a, &sa), 0);
    ck_assert_int_gt(sa.st_size, 1000);
    for (int i = 1; i < N_PROCS; i++) {
        snprintf(b, sizeof b, "%s/cubin.%d", T.root, i);
        ck_assert_msg(files_equal(a, b), "cubin of process %d differs", i);
    }
    /* The entry holds the real kernel's metadata. */
    mj_cache *c = mj_test_cache_open(&T);
    mj_entry e;
    ck_assert_int_eq(mj_cache_read(c, REAL.key.hex, &e), MOEJIT_OK);
    ck_assert_str_eq(e.canonical_spec, REAL.spec->canonical);
    ck_assert_str_eq(e.arch, "sm_90a");
    ck_assert_int_ge(e.n_kernels, 1);
    ck_assert_int_gt(e.kernels[0].registers, 0);
    ck_assert(e.compile_seconds > 0);
    ck_assert_int_ge(e.nvrtc_major, 12);
    ck_assert_ptr_nonnull(strstr(e.preimage, "nvrtc_build_id"));
    mj_entry_free(&e);
    mj_cache_close(c);
    mj_test_real_job_free(&REAL);
}
END_TEST

START_TEST(a_writer_killed_before_publishing_leaves_no_entry_and_the_next_call_builds)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        mj_cache *c = mj_test_cache_open(&T);
        mj_cache_fault_set(MJ_FAULT_BEFORE_RENAME, MJ_FAULT_KILL, 0, 1);
        mj_test_build b = {.spec = SPEC, .count_file = COUNT};
        mj_key k = mj_test_key("killed");
        mj_program p;
        int hit;
        mj_cache_get_or_build(c, &k, "pre", SPEC, mj_test_build_fn, &b, &p, &hit);
        _exit(0); /* not reached: the fault point kills the writer */
    }
    int status;
    waitpid(pid, &status, 0);
    ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    ck_assert_int_eq(mj_test_count_file(COUNT), 1);

    mj_key k = mj_test_key("killed");
    char path[600], shard[600];
    mj_cache_entry_path(&T.cfg, k.hex, path, sizeof path);
    ck_assert_int_ne(access(path, F_OK), 0); /* nothing visible */
    mj_cache_shard_dir(&T.cfg, k.hex, shard, sizeof shard);
    char cmd[800];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | grep -q '^\\.tmp\\.'", shard);
    ck_assert_int_eq(system(cmd), 0); /* its complete temp file is there, unpublished */

    /* The dead writer's lock was released by the kernel: the next call does not wait. */
    T.cfg.lock_timeout_s = 30;
    mj_cache *c = mj_test_cache_open(&T);
    mj_test_build b = {.spec = SPEC, .count_file = COUNT};
    mj_program p;
    int hit;
    double t0 = now_s();
    ck_assert_int_eq(mj_cache_get_or_build(c, &k, "pre", SPEC, mj_test_build_fn, &b, &p, &hit), MOEJIT_OK);
    ck_assert(now_s() - t0 < 5);
    ck_assert_int_eq(hit, 0);
    ck_assert_int_eq(mj_test_count_file(COUNT), 2);
    mj_program_free(&p);
    ck_assert_int_eq(access(path, F_OK), 0);

    /* Once stale, the temp file is cleaned by gc. */
    snprintf(cmd, sizeof cmd, "for f in '%s'/.tmp.*; do touch -d '-1 hour' \"$f\"; done", shard);
    ck_assert_int_eq(system(cmd), 0);
    mj_cache_gc_result r;
    ck_assert_int_eq(mj_cache_gc(c, 0, 0, &r), MOEJIT_OK);
    ck_assert_int_eq(r.temps_removed, 1);
    snprintf(cmd, sizeof cmd, "ls -A '%s' | grep -q '^\\.tmp\\.'", shard);
    ck_assert_int_ne(system(cmd), 0);
    mj_cache_close(c);
}
END_TEST

START_TEST(a_lock_held_by_a_dead_process_is_released)
{
    ck_assert_int_eq(mkdir(T.lock_dir, 0700), 0);
    int ready[2];
    ck_assert_int_eq(pipe(ready), 0);
    pid_t pid = fork();
    if (pid == 0) {
        mj_cache_lock l;
        int held;
        if (mj_cache_lock_acquire(T.lock_dir, "k", 0, &l, &held) != MOEJIT_OK || !held) _exit(1);
        if (write(ready[1], "r", 1) != 1) _exit(1);
        pause(); /* holds it until killed */
        _exit(0);
    }
    char c;
    ck_assert_int_eq(read(ready[0], &c, 1), 1);
    mj_cache_lock l;
    int held = -1;
    ck_assert_int_eq(mj_cache_lock_acquire(T.lock_dir, "k", 0.1, &l, &held), MOEJIT_OK);
    ck_assert_int_eq(held, 0); /* really held by the child */
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    ck_assert_int_eq(mj_cache_lock_acquire(T.lock_dir, "k", 2, &l, &held), MOEJIT_OK);
    ck_assert_int_eq(held, 1);
    mj_cache_lock_release(&l);
}
END_TEST

START_TEST(after_the_lock_timeout_a_waiter_compiles_anyway_and_publishes)
{
    int ready[2];
    ck_assert_int_eq(pipe(ready), 0);
    ck_assert_int_eq(mkdir(T.lock_dir, 0700), 0);
    mj_key k = mj_test_key("slow");
    pid_t pid = fork();
    if (pid == 0) {
        mj_cache_lock l;
        int held;
        if (mj_cache_lock_acquire(T.lock_dir, k.hex, 0, &l, &held) != MOEJIT_OK || !held) _exit(1);
        if (write(ready[1], "r", 1) != 1) _exit(1);
        sleep(30); /* a stuck compile */
        _exit(0);
    }
    char ch;
    ck_assert_int_eq(read(ready[0], &ch, 1), 1);
    T.cfg.lock_timeout_s = 0.3;
    mj_cache *c = mj_test_cache_open(&T);
    mj_test_build b = {.spec = SPEC};
    mj_program p;
    int hit;
    mj_test_stderr_begin();
    double t0 = now_s();
    moejit_status st = mj_cache_get_or_build(c, &k, "pre", SPEC, mj_test_build_fn, &b, &p, &hit);
    double waited = now_s() - t0;
    const char *out = mj_test_stderr_end();
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    ck_assert_int_eq(st, MOEJIT_OK);
    ck_assert(waited >= 0.3 && waited < 5);
    ck_assert_int_eq(b.calls, 1);
    mj_program_free(&p);
    ck_assert_ptr_nonnull(strstr(out, "compiling anyway"));
    int found;
    ck_assert_int_eq(mj_cache_lookup(c, k.hex, SPEC, &p, &found), MOEJIT_OK);
    ck_assert_int_eq(found, 1);
    mj_program_free(&p);
    mj_cache_stats s;
    mj_cache_stats_get(c, &s);
    ck_assert_int_eq(s.v[MJ_STAT_LOCK_TIMEOUTS], 1);
    mj_cache_close(c);
}
END_TEST

START_TEST(unrelated_keys_never_wait_on_each_other)
{
    int ready[2];
    ck_assert_int_eq(pipe(ready), 0);
    pid_t pid = fork();
    if (pid == 0) {
        mj_cache *c = mj_test_cache_open(&T);
        mj_test_build b = {.spec = SPEC, .sleep_s = 3};
        mj_key k = mj_test_key("slow key A");
        mj_program p;
        int hit;
        if (write(ready[1], "r", 1) != 1) _exit(1);
        mj_cache_get_or_build(c, &k, "pre", SPEC, mj_test_build_fn, &b, &p, &hit);
        _exit(0);
    }
    char ch;
    ck_assert_int_eq(read(ready[0], &ch, 1), 1);
    usleep(200000); /* the child is inside its 3 s build, holding key A's lock */
    mj_cache *c = mj_test_cache_open(&T);
    mj_test_build b = {.spec = SPEC};
    mj_key k = mj_test_key("key B");
    mj_program p;
    int hit;
    double t0 = now_s();
    ck_assert_int_eq(mj_cache_get_or_build(c, &k, "pre", SPEC, mj_test_build_fn, &b, &p, &hit), MOEJIT_OK);
    ck_assert_msg(now_s() - t0 < 1.5, "key B waited %.2fs", now_s() - t0);
    mj_program_free(&p);
    waitpid(pid, NULL, 0);
    mj_cache_close(c);
}
END_TEST

static Suite *cache_single_flight_suite(void)
{
    Suite *s = suite_create("cache_single_flight");
    TCase *tc = tcase_create("single_flight");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, sixteen_processes_asking_for_one_missing_key_build_it_once);
    tcase_add_test(tc, sixteen_processes_compile_one_real_kernel_once_with_identical_cubins);
    tcase_add_test(tc, a_writer_killed_before_publishing_leaves_no_entry_and_the_next_call_builds);
    tcase_add_test(tc, a_lock_held_by_a_dead_process_is_released);
    tcase_add_test(tc, after_the_lock_timeout_a_waiter_compiles_anyway_and_publishes);
    tcase_add_test(tc, unrelated_keys_never_wait_on_each_other);
    suite_add_tcase(s, tc);
    return s;
}

MJ_CHECK_MAIN(cache_single_flight_suite)
