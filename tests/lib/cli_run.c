/*
 * This file contains the CLI tests' helpers (see cli_run.h): spawning the built moejit with
 * a private cache, collecting its output through pipes, and reading its JSON.
 */
#include "cli_run.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/strbuf.h"

extern char **environ;

/* Not Check's asserts: tests/lib is also linked into the GPU suite, which has no libcheck. */
#define REQUIRE(cond, ...)                                                          \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "%s:%d: test helper: %s failed: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                           \
            fputc('\n', stderr);                                                    \
            abort();                                                                \
        }                                                                           \
    } while (0)

#define MAX_ARGS 256
#define MAX_ENV 1024

void mj_test_cli_init(mj_test_cli *t)
{
    memset(t, 0, sizeof *t);
    const char *tmp = getenv("TMPDIR");
    snprintf(t->root, sizeof t->root, "%s/mjcli-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    REQUIRE(mkdtemp(t->root) != NULL, "%s", strerror(errno));
    snprintf(t->cache, sizeof t->cache, "%s/cache", t->root);
    snprintf(t->locks, sizeof t->locks, "%s/locks", t->root);
}

void mj_test_cli_cleanup(mj_test_cli *t)
{
    if (!t->root[0]) return;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", t->root);
    if (system(cmd) != 0) { /* best effort */ }
}

void mj_test_cli_result_free(mj_test_cli_result *r)
{
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

static const char *cli_path(void)
{
    const char *p = getenv("MOEJIT_CLI");
    return p && *p ? p : "./build/bin/moejit";
}

/* 1 when entry names the variable `name` ("NAME=..."). */
static int env_is(const char *entry, const char *name)
{
    size_t n = strlen(name);
    return strncmp(entry, name, n) == 0 && entry[n] == '=';
}

void mj_test_cli_run(const mj_test_cli *t, const char *const *env, mj_test_cli_result *r, ...)
{
    const char *args[MAX_ARGS];
    int n = 0;
    va_list ap;
    va_start(ap, r);
    const char *a;
    while ((a = va_arg(ap, const char *)) && n < MAX_ARGS - 2) args[n++] = a;
    va_end(ap);
    args[n] = NULL;
    mj_test_cli_runv(t, env, r, args);
}

void mj_test_cli_runv(const mj_test_cli *t, const char *const *env, mj_test_cli_result *r, const char *const *args)
{
    mj_test_cli_result_free(r);
    const char *argv[MAX_ARGS];
    int argc = 0;
    argv[argc++] = cli_path();
    for (; args[argc - 1] && argc < MAX_ARGS - 1; argc++) argv[argc] = args[argc - 1];
    REQUIRE(args[argc - 1] == NULL, "more than %d arguments", MAX_ARGS - 2);
    argv[argc] = NULL;

    /* The caller's environment, minus what this run sets. */
    static char cache_var[400], lock_var[400];
    snprintf(cache_var, sizeof cache_var, "MOEJIT_CACHE_DIR=%s", t->cache);
    snprintf(lock_var, sizeof lock_var, "MOEJIT_LOCK_DIR=%s", t->locks);
    const char *envp[MAX_ENV];
    int n = 0;
    for (char **e = environ; *e && n < MAX_ENV - 40; e++) {
        if (env_is(*e, "MOEJIT_CACHE_DIR") || env_is(*e, "MOEJIT_LOCK_DIR") || env_is(*e, "MOEJIT_CACHE_MODE")) continue;
        int overridden = 0;
        for (const char *const *x = env; x && *x && !overridden; x++) {
            const char *eq = strchr(*x, '=');
            overridden = eq && strncmp(*e, *x, (size_t)(eq - *x + 1)) == 0;
        }
        if (!overridden) envp[n++] = *e;
    }
    envp[n++] = cache_var;
    envp[n++] = lock_var;
    for (const char *const *x = env; x && *x && n < MAX_ENV - 1; x++)
        if (strchr(*x, '=')[1] != '\0') envp[n++] = *x; /* "NAME=" unsets NAME */
    envp[n] = NULL;

    int out[2], err[2];
    REQUIRE(pipe2(out, O_CLOEXEC) == 0 && pipe2(err, O_CLOEXEC) == 0, "%s", strerror(errno));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_adddup2(&fa, err[1], 2);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, (char *const *)argv, (char *const *)envp);
    posix_spawn_file_actions_destroy(&fa);
    close(out[1]);
    close(err[1]);
    REQUIRE(rc == 0, "cannot start %s: %s (set MOEJIT_CLI)", argv[0], strerror(rc));

    /* Both pipes at once, so a chatty stderr cannot block the child while we read stdout. */
    mj_buf bo = MJ_BUF_INIT, be = MJ_BUF_INIT;
    struct pollfd p[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
    int open_fds = 2;
    while (open_fds > 0) {
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        for (int i = 0; i < 2; i++) {
            if (p[i].fd < 0 || !p[i].revents) continue;
            char chunk[65536];
            ssize_t k = read(p[i].fd, chunk, sizeof chunk);
            if (k > 0) mj_buf_append(i ? &be : &bo, chunk, (size_t)k);
            else if (k == 0 || errno != EINTR) {
                close(p[i].fd);
                p[i].fd = -1;
                open_fds--;
            }
        }
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    r->rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    mj_buf_puts(&bo, "");
    mj_buf_puts(&be, "");
    r->out = mj_buf_take(&bo);
    r->err = mj_buf_take(&be);
    REQUIRE(r->out && r->err, "out of memory");
}

int mj_test_count_lines(const char *s)
{
    int n = 0;
    for (const char *p = s; *p; p++)
        if (*p == '\n' || !p[1]) n++;
    return n;
}

cJSON *mj_test_json(const char *s)
{
    cJSON *j = cJSON_Parse(s);
    REQUIRE(j != NULL, "not JSON:\n%s", s);
    return j;
}

double mj_test_json_num(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    REQUIRE(cJSON_IsNumber(v), "no number \"%s\"", key);
    return v->valuedouble;
}

void mj_test_write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    REQUIRE(f != NULL, "%s: %s", path, strerror(errno));
    REQUIRE(fputs(text, f) >= 0 && fclose(f) == 0, "%s", path);
}

int mj_test_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}
