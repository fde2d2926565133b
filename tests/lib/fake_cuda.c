/*
 * This file contains the test helpers of fake_cuda.h: building the fake libcuda and running
 * a test body in a fresh process.
 */
#include "fake_cuda.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char g_lib[PATH_MAX];
static char g_dir[64]; /* "/tmp/moejit-fakecuda-XXXXXX" */
static pid_t g_owner;

/* Only the process that built the fake removes it (forked children exit too). */
static void remove_fake(void)
{
    if (getpid() != g_owner) return;
    unlink(g_lib);
    rmdir(g_dir);
}

/* The fake's source, found from the build directory the Makefile names or the cwd. */
static int find_source(char *out, size_t cap)
{
    const char *build = getenv("MOEJIT_TEST_BUILD");
    if (build && *build) {
        snprintf(out, cap, "%s/../tests/lib/fake_libcuda/libcuda.c", build);
        if (access(out, R_OK) == 0) return 1;
    }
    snprintf(out, cap, "tests/lib/fake_libcuda/libcuda.c");
    return access(out, R_OK) == 0;
}

const char *mj_test_fake_libcuda(void)
{
    if (g_lib[0]) return g_lib;
    char src[PATH_MAX], cmd[3 * PATH_MAX];
    if (!find_source(src, sizeof src)) {
        fprintf(stderr, "fake libcuda: tests/lib/fake_libcuda/libcuda.c not found "
                        "(run from the repository root or set MOEJIT_TEST_BUILD)\n");
        return NULL;
    }
    snprintf(g_dir, sizeof g_dir, "/tmp/moejit-fakecuda-XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("fake libcuda: mkdtemp");
        return NULL;
    }
    char lib[PATH_MAX];
    snprintf(lib, sizeof lib, "%s/libcuda.so.1", g_dir);
    const char *cc = getenv("CC");
    snprintf(cmd, sizeof cmd, "%s -std=c11 -shared -fPIC -O1 -fvisibility=hidden -o '%s' '%s'",
             cc && *cc ? cc : "cc", lib, src);
    if (system(cmd) != 0) {
        fprintf(stderr, "fake libcuda: build failed: %s\n", cmd);
        rmdir(g_dir);
        return NULL;
    }
    snprintf(g_lib, sizeof g_lib, "%s", lib);
    g_owner = getpid();
    atexit(remove_fake);
    return g_lib;
}

int mj_test_fake_counter(const char *name)
{
    if (!g_lib[0]) return -1;
    void *h = dlopen(g_lib, RTLD_NOW | RTLD_NOLOAD);
    if (!h) return -1;
    int *v = dlsym(h, name);
    int result = v ? *v : -1;
    dlclose(h);
    return result;
}

static char g_failure[4096];

const char *mj_test_failf(const char *file, int line, const char *cond, const char *fmt, ...)
{
    int n = snprintf(g_failure, sizeof g_failure, "%s:%d: %s: ", file, line, cond);
    if (n < 0 || (size_t)n >= sizeof g_failure) return g_failure;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_failure + n, sizeof g_failure - (size_t)n, fmt, ap);
    va_end(ap);
    return g_failure;
}

const char *mj_test_in_child(const char *(*body)(void))
{
    int fds[2];
    if (pipe(fds) != 0) return "in_child: pipe failed";
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return "in_child: fork failed";
    if (pid == 0) {
        close(fds[0]);
        const char *failure = body();
        if (failure) {
            size_t len = strlen(failure);
            if (write(fds[1], failure, len) != (ssize_t)len) _exit(3);
        }
        /* _exit: the child must not run the parent's atexit handlers or Check's teardown. */
        _exit(failure ? 1 : 0);
    }
    close(fds[1]);
    size_t len = 0;
    ssize_t got;
    while (len + 1 < sizeof g_failure &&
           (got = read(fds[0], g_failure + len, sizeof g_failure - 1 - len)) > 0)
        len += (size_t)got;
    g_failure[len] = '\0';
    close(fds[0]);
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) return "in_child: waitpid failed";
    if (WIFSIGNALED(status)) {
        snprintf(g_failure, sizeof g_failure, "child killed by signal %d", WTERMSIG(status));
        return g_failure;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return NULL;
    if (!len) snprintf(g_failure, sizeof g_failure, "child exited with %d", WEXITSTATUS(status));
    return g_failure;
}
