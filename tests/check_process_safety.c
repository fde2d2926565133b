/*
 * This file contains the tests that the library neither dies from its own writes nor leaves
 * processes behind: a publish past RLIMIT_FSIZE fails with EFBIG (no SIGXFSZ death, no temp
 * file), a compile worker dies with a parent that is killed while it compiles, and a timed-out
 * worker's own children are killed with it (its process group).
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cache/cache.h"
#include "cache/publish.h"
#include "cache/store.h"
#include "codegen/nvrtc_compile.h"
#include "core/status.h"
#include "lib/cache_test_util.h"
#include "lib/check_main.h"

static mj_test_cache T;

static void setup(void) { mj_test_cache_init(&T); }
static void teardown(void)
{
    unsetenv("MOEJIT_WORKER_FAULT");
    mj_test_cache_cleanup(&T);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int count_temps(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += strncmp(e->d_name, MJ_TEMP_PREFIX, strlen(MJ_TEMP_PREFIX)) == 0;
    if (d) closedir(d);
    return n;
}

START_TEST(a_publish_past_the_file_size_limit_fails_and_the_process_lives)
{
    ck_assert_int_eq(mkdir(T.dir, 0700), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        /* stderr a regular file already past the limit, as under a CI log: the cache's warning
         * must not kill the process either */
        char log[600];
        snprintf(log, sizeof log, "%s/stderr.log", T.root);
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        static char pad[4096];
        if (fd < 0 || write(fd, pad, sizeof pad) != (ssize_t)sizeof pad || dup2(fd, 2) < 0) _exit(9);
        struct rlimit lim = {1024, 1024};
        if (setrlimit(RLIMIT_FSIZE, &lim) != 0) _exit(10);
        static char big[8192];
        memset(big, 'x', sizeof big);
        int err = 0;
        mj_publish_opts po = {0600, 1};
        if (mj_cache_publish(T.dir, "big", big, sizeof big, &po, &err) != MOEJIT_ERR_IO) _exit(11);
        if (err != EFBIG || !strstr(moejit_last_error(), "File too large")) _exit(12);
        if (count_temps(T.dir) != 0) _exit(13);
        /* The cache's own path: the build is served from memory, the write failure counted. */
        mj_cache *c = NULL;
        if (mj_cache_open_config(&T.cfg, &c) != MOEJIT_OK) _exit(14);
        mj_test_build b = {.spec = "backend=simt", .size = 8192};
        mj_key k = mj_test_key("fsize");
        mj_program p;
        int hit = 1;
        if (mj_cache_get_or_build(c, &k, "preimage\n", "backend=simt", mj_test_build_fn, &b, &p, &hit) != MOEJIT_OK)
            _exit(15);
        if (hit || p.cubin_len != 8192) _exit(16);
        mj_program_free(&p);
        mj_cache_close(c);
        char shard[600];
        mj_cache_shard_dir(&T.cfg, k.hex, shard, sizeof shard);
        if (count_temps(shard) != 0) _exit(17);
        /* Writes that fit still work in the same process. */
        if (mj_cache_publish(T.dir, "small", big, 100, &po, &err) != MOEJIT_OK) _exit(18);
        _exit(0);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child: %s %d",
                  WIFSIGNALED(status) ? "killed by signal" : "exit", WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
}
END_TEST

static const char SRC[] = "extern \"C\" __global__ void mj_test_k(float *x) { x[0] = 1.0f; }\n";

static moejit_status compile_once(double timeout_s)
{
    mj_source s;
    memset(&s, 0, sizeof s);
    s.text = (char *)SRC;
    s.len = strlen(SRC);
    s.name = "moejit_layer.cu";
    s.n_kernels = 1;
    s.kernel_names[0] = "mj_test_k";
    mj_compile_request req = {&s, "sm_90a", NULL, 0, timeout_s};
    mj_program p;
    moejit_status st = mj_nvrtc_compile(&req, &p);
    mj_program_free(&p);
    return st;
}

/* The pid of a child of `parent` (from /proc), waiting up to timeout_s; -1 when none. */
static pid_t child_of(pid_t parent, double timeout_s)
{
    double end = now_s() + timeout_s;
    do {
        DIR *d = opendir("/proc");
        for (struct dirent *e; d && (e = readdir(d));) {
            char path[300], buf[512];
            snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
            FILE *f = fopen(path, "r");
            if (!f) continue;
            size_t n = fread(buf, 1, sizeof buf - 1, f);
            fclose(f);
            buf[n] = '\0';
            char *rp = strrchr(buf, ')');
            char state;
            long ppid;
            if (rp && sscanf(rp + 1, " %c %ld", &state, &ppid) == 2 && ppid == parent && state != 'Z') {
                pid_t pid = (pid_t)atol(e->d_name);
                closedir(d);
                return pid;
            }
        }
        if (d) closedir(d);
        struct timespec ms = {0, 20000000};
        nanosleep(&ms, NULL);
    } while (now_s() < end);
    return -1;
}

/* Waits up to timeout_s for pid (our child, or an orphan reparented to us) to end. */
static int reaped_within(pid_t pid, double timeout_s, int *status)
{
    double end = now_s() + timeout_s;
    do {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid) return 1;
        struct timespec ms = {0, 20000000};
        nanosleep(&ms, NULL);
    } while (now_s() < end);
    return 0;
}

START_TEST(a_worker_dies_with_its_killed_parent)
{
    /* Orphans come to us rather than to init, so their end can be observed and reaped. */
    ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    setenv("MOEJIT_WORKER_FAULT", "hang", 1);
    pid_t parent = fork();
    ck_assert_int_ge(parent, 0);
    if (parent == 0) {
        compile_once(600);
        _exit(0);
    }
    pid_t worker = child_of(parent, 20);
    ck_assert_msg(worker > 0, "no worker appeared under pid %d", (int)parent);
    struct timespec settle = {0, 300000000}; /* let it reach the hang, past its start-up checks */
    nanosleep(&settle, NULL);
    ck_assert_int_eq(kill(parent, SIGKILL), 0);
    int status;
    ck_assert_int_eq(waitpid(parent, &status, 0), parent);
    ck_assert_msg(reaped_within(worker, 10, &status), "worker %d outlived its killed parent", (int)worker);
    ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "worker status %#x", status);
    prctl(PR_SET_CHILD_SUBREAPER, 0);
}
END_TEST

START_TEST(a_timed_out_workers_own_children_are_killed)
{
    ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    setenv("MOEJIT_WORKER_FAULT", "hang-child", 1);
    double t0 = now_s();
    ck_assert_int_eq(compile_once(1.0), MOEJIT_ERR_COMPILE);
    ck_assert_msg(strstr(moejit_last_error(), "timed out"), "%s", moejit_last_error());
    ck_assert_double_lt(now_s() - t0, 30);
    /* The worker's child, orphaned to us, must be dead (killed with the group) and nothing of
     * ours may still run. */
    int status;
    double end = now_s() + 10;
    pid_t r;
    while ((r = waitpid(-1, &status, WNOHANG)) >= 0 && now_s() < end) {
        if (r == 0) {
            if (child_of(getpid(), 0) < 0) {
                struct timespec ms = {0, 20000000};
                nanosleep(&ms, NULL);
                continue;
            }
            struct timespec ms = {0, 50000000};
            nanosleep(&ms, NULL);
            continue;
        }
        ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "pid %d ended with status %d", (int)r, status);
    }
    ck_assert_msg(child_of(getpid(), 0) < 0, "a process the worker started is still running");
    prctl(PR_SET_CHILD_SUBREAPER, 0);
}
END_TEST

static Suite *process_safety_suite(void)
{
    Suite *s = suite_create("process_safety");
    TCase *tc = tcase_create("processes");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, a_publish_past_the_file_size_limit_fails_and_the_process_lives);
    tcase_add_test(tc, a_worker_dies_with_its_killed_parent);
    tcase_add_test(tc, a_timed_out_workers_own_children_are_killed);
    suite_add_tcase(s, tc);
    return s;
}

MJ_CHECK_MAIN(process_safety_suite)
