/*
 * cli_run.h — running the built `moejit` CLI from a test: a private cache and lock directory
 * per test, the command's stdout, stderr and exit code captured, and small helpers to parse
 * its --json output.
 *
 * The binary is $MOEJIT_CLI (set by `make test`), else ./build/bin/moejit.
 */
#ifndef MJ_TEST_CLI_RUN_H
#define MJ_TEST_CLI_RUN_H

#include <cJSON.h>

typedef struct mj_test_cli {
    char root[256];   /* mkdtemp directory holding cache/ and locks/ */
    char cache[300];  /* MOEJIT_CACHE_DIR of every run */
    char locks[300];  /* MOEJIT_LOCK_DIR of every run */
} mj_test_cli;

typedef struct mj_test_cli_result {
    int rc;           /* exit status; 128 + signal when killed */
    char *out;        /* stdout, NUL-terminated */
    char *err;        /* stderr, NUL-terminated */
} mj_test_cli_result;

/* Creates the per-test directories (the cache dir itself is left for moejit to create). */
void mj_test_cli_init(mj_test_cli *t);
/* Removes the whole root. */
void mj_test_cli_cleanup(mj_test_cli *t);

/* Runs moejit with the NULL-terminated argument list; env: extra "NAME=value" strings
 * (NULL-terminated array, or NULL). The result's buffers are freed by the next run on the
 * same result or by mj_test_cli_result_free. Aborts when the process cannot be started. */
void mj_test_cli_run(const mj_test_cli *t, const char *const *env, mj_test_cli_result *r, ...)
    __attribute__((sentinel));
/* The same with the arguments in a NULL-terminated array. */
void mj_test_cli_runv(const mj_test_cli *t, const char *const *env, mj_test_cli_result *r, const char *const *args);
void mj_test_cli_result_free(mj_test_cli_result *r);

/* Number of lines in s (a trailing newline does not start one). */
int mj_test_count_lines(const char *s);
/* Parses s as JSON; aborts with s quoted when it is not valid. Free with cJSON_Delete. */
cJSON *mj_test_json(const char *s);
/* The number at a key of an object (aborts when missing). */
double mj_test_json_num(const cJSON *o, const char *key);
/* Writes text to path; aborts on failure. */
void mj_test_write_file(const char *path, const char *text);
/* 1 when path exists. */
int mj_test_exists(const char *path);

/* What every CLI suite declares: its CLI (t) and last result (r), a checked fixture
 * (setup/teardown: a private cache per test), RUN(args...) and ASSERT_RC(exit status). */
#define MJ_TEST_CLI_SUITE                                                                          \
    static mj_test_cli t;                                                                          \
    static mj_test_cli_result r;                                                                   \
    static void setup(void) { mj_test_cli_init(&t); }                                             \
    static void teardown(void)                                                                     \
    {                                                                                              \
        mj_test_cli_result_free(&r);                                                               \
        mj_test_cli_cleanup(&t);                                                                   \
    }
#define RUN(...) mj_test_cli_run(&t, NULL, &r, __VA_ARGS__, (const char *)NULL)
#define ASSERT_RC(want)                                                                            \
    ck_assert_msg(r.rc == (want), "exit %d, wanted %d\nstdout:\n%s\nstderr:\n%s", r.rc, (want), r.out, r.err)

#endif
