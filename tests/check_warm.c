/*
 * This file contains the tests of the library's warming call (runtime/warm.c): every spec is
 * attempted, the progress callback sees each outcome once and one at a time, a failure is
 * counted and reported without stopping the others, and a warmed spec is then a registry hit;
 * a failed compile's folder is named in its result, and a compile-only context never opens
 * the driver.
 *
 * Compiles are real (NVRTC in the worker the Makefile names); the driver is forced missing, so
 * kernels are compiled but not loaded, and the disk cache is off, so counts are this process's
 * (the failed-folder test gives its context a private read-write cache).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/cache_test_util.h"
#include "lib/check_main.h"
#include "lib/fake_cuda.h"
#include "moejit.h"
#include "runtime/context.h"

#define SPEC_A "backend=simt,quant=bf16,act=silu,arch=sm_90a"
#define SPEC_B "backend=simt,quant=fp16,act=relu2,arch=sm_80"
#define SPEC_UNSUPPORTED "backend=wgmma,quant=bf16,act=silu,arch=sm_80"

static void setup_env(void)
{
    setenv("MOEJIT_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
    setenv("MOEJIT_CACHE_MODE", "off", 1);
}

static moejit_spec *parse(const char *text)
{
    moejit_spec *spec = NULL;
    ck_assert_msg(moejit_spec_parse(text, &spec) == MOEJIT_OK, "%s: %s", text, moejit_last_error());
    return spec;
}

typedef struct seen {
    int calls, in_callback, overlapped;
    int seen[8];
    size_t last_done;
    moejit_status status[8];
    int compiled[8];
    char message[8][256];
    char failed_dir[8][512];
} seen;

static void record(void *user, const moejit_warm_result *r)
{
    seen *s = user;
    if (s->in_callback++) s->overlapped = 1;
    s->calls++;
    ck_assert_uint_lt(r->index, 8);
    s->seen[r->index]++;
    s->status[r->index] = r->status;
    s->compiled[r->index] = r->compiled;
    strncpy(s->message[r->index], r->message, sizeof s->message[0] - 1);
    ck_assert_ptr_nonnull(r->failed_dir);
    strncpy(s->failed_dir[r->index], r->failed_dir, sizeof s->failed_dir[0] - 1);
    ck_assert_uint_eq(r->done, s->last_done + 1);
    s->last_done = r->done;
    s->in_callback--;
}

START_TEST(every_spec_is_warmed_once_and_a_failure_does_not_stop_the_others)
{
    moejit_context *ctx = NULL;
    ck_assert_int_eq(moejit_context_create(NULL, &ctx), MOEJIT_OK);
    moejit_spec *specs[3] = {parse(SPEC_A), parse(SPEC_UNSUPPORTED), parse(SPEC_B)};
    seen s;
    memset(&s, 0, sizeof s);
    size_t failed = 99;
    moejit_status st = moejit_warm(ctx, (const moejit_spec *const *)specs, 3, 2, record, &s, &failed);
    ck_assert_int_eq(st, MOEJIT_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(moejit_last_error(), "1 of 3 specs failed"), "%s", moejit_last_error());
    ck_assert_uint_eq(failed, 1);
    ck_assert_int_eq(s.calls, 3);
    ck_assert_int_eq(s.overlapped, 0);
    for (int i = 0; i < 3; i++) ck_assert_int_eq(s.seen[i], 1);
    ck_assert_int_eq(s.status[0], MOEJIT_OK);
    ck_assert_int_eq(s.compiled[0], 1);
    ck_assert_int_eq(s.status[2], MOEJIT_OK);
    ck_assert_int_eq(s.status[1], MOEJIT_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(s.message[1], "wgmma"), "%s", s.message[1]);
    ck_assert_int_eq(mj_context_compile_count(ctx), 2);

    /* Warmed specs are registry hits: a second warm compiles nothing. */
    memset(&s, 0, sizeof s);
    ck_assert_int_eq(moejit_warm(ctx, (const moejit_spec *const *)specs, 1, 4, record, &s, NULL), MOEJIT_OK);
    ck_assert_int_eq(s.compiled[0], 0);
    ck_assert_int_eq(mj_context_compile_count(ctx), 2);
    moejit_kernel *k = NULL;
    ck_assert_int_eq(moejit_kernel_get(ctx, specs[2], &k), MOEJIT_OK);
    ck_assert_int_eq(mj_context_compile_count(ctx), 2);
    for (int i = 0; i < 3; i++) moejit_spec_destroy(specs[i]);
    moejit_context_destroy(ctx);
}
END_TEST

START_TEST(bad_arguments_are_refused_naming_them)
{
    moejit_context *ctx = NULL;
    ck_assert_int_eq(moejit_context_create(NULL, &ctx), MOEJIT_OK);
    moejit_spec *a = parse(SPEC_A);
    const moejit_spec *one[1] = {a}, *holes[2] = {a, NULL};
    ck_assert_int_eq(moejit_warm(NULL, one, 1, 1, NULL, NULL, NULL), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(moejit_warm(ctx, holes, 2, 1, NULL, NULL, NULL), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(moejit_last_error(), "specs[1] is NULL"), "%s", moejit_last_error());
    ck_assert_int_eq(moejit_warm(ctx, one, 1, 0, NULL, NULL, NULL), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(moejit_last_error(), "jobs must be in 1..256, got 0"), "%s", moejit_last_error());
    /* Nothing to warm is not an error. */
    ck_assert_int_eq(moejit_warm(ctx, NULL, 0, 1, NULL, NULL, NULL), MOEJIT_OK);
    ck_assert_int_eq(mj_context_compile_count(ctx), 0);
    moejit_spec_destroy(a);
    moejit_context_destroy(ctx);
}
END_TEST

START_TEST(a_failed_compile_keeps_its_inputs_and_its_result_names_them)
{
    mj_test_cache c;
    mj_test_cache_init(&c);
    moejit_options opts = MOEJIT_OPTIONS_INIT;
    opts.cache_dir = c.dir;
    opts.cache_mode = "read-write";
    moejit_context *ctx = NULL;
    ck_assert_int_eq(moejit_context_create(&opts, &ctx), MOEJIT_OK);
    moejit_spec *spec = parse(SPEC_B);
    const moejit_spec *one[1] = {spec};
    seen s;
    memset(&s, 0, sizeof s);
    setenv("MOEJIT_WORKER_FAULT", "crash", 1);
    ck_assert_int_eq(moejit_warm(ctx, one, 1, 1, record, &s, NULL), MOEJIT_ERR_COMPILE);
    unsetenv("MOEJIT_WORKER_FAULT");
    const char *dir = s.failed_dir[0];
    ck_assert_msg(strncmp(dir, c.dir, strlen(c.dir)) == 0 && strstr(dir, "/failed/"), "%s", dir);
    static const char *const files[] = {"spec.txt", "source.cu", "options.txt", "log.txt"};
    char path[1024];
    for (int f = 0; f < 4; f++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[f]);
        ck_assert_msg(access(path, F_OK) == 0, "missing %s", path);
    }

    /* Compiled at last, the key's failure folder is stale and goes; the result names none. */
    snprintf(path, sizeof path, "%s", dir);
    memset(&s, 0, sizeof s);
    ck_assert_int_eq(moejit_warm(ctx, one, 1, 1, record, &s, NULL), MOEJIT_OK);
    ck_assert_int_eq(s.compiled[0], 1);
    ck_assert_str_eq(s.failed_dir[0], "");
    ck_assert_msg(access(path, F_OK) != 0, "%s was kept after a successful compile", path);
    moejit_spec_destroy(spec);
    moejit_context_destroy(ctx);
    mj_test_cache_cleanup(&c);
}
END_TEST

/* In its own process: the driver is loaded once per process. */
static const char *compile_only_body(void)
{
    const char *lib = mj_test_fake_libcuda();
    MJ_EXPECT(lib != NULL, "the fake libcuda could not be built");
    setenv("MOEJIT_LIBCUDA", lib, 1);
    setenv("FAKE_CUDA", "initfail", 1); /* a context that opened this driver would fail */
    moejit_options opts = MOEJIT_OPTIONS_INIT;
    opts.compile_only = 1;
    moejit_context *ctx = NULL;
    MJ_EXPECT(moejit_context_create(&opts, &ctx) == MOEJIT_OK, "%s", moejit_last_error());
    moejit_spec *spec = parse(SPEC_B);
    const moejit_spec *one[1] = {spec};
    MJ_EXPECT(moejit_warm(ctx, one, 1, 1, NULL, NULL, NULL) == MOEJIT_OK, "%s", moejit_last_error());
    moejit_kernel *k = NULL;
    MJ_EXPECT(moejit_kernel_get(ctx, spec, &k) == MOEJIT_OK, "%s", moejit_last_error());
    MJ_EXPECT(!moejit_kernel_is_loaded(k), "a compile-only context loaded a kernel");
    MJ_EXPECT(mj_test_fake_counter("fake_init_calls") == -1, "the driver was opened");
    moejit_moe_args args = MOEJIT_MOE_ARGS_INIT;
    moejit_status st = moejit_moe_forward(k, &args, NULL, 0, NULL);
    MJ_EXPECT(st == MOEJIT_ERR_INVALID_ARGUMENT && strstr(moejit_last_error(), "compile_only"), "%s: %s",
              moejit_status_name(st), moejit_last_error());
    moejit_spec_destroy(spec);
    moejit_context_destroy(ctx);
    return NULL;
}

START_TEST(a_compile_only_context_never_opens_the_driver)
{
    const char *failure = mj_test_in_child(compile_only_body);
    ck_assert_msg(failure == NULL, "%s", failure);
    moejit_options opts = MOEJIT_OPTIONS_INIT;
    opts.compile_only = 2;
    moejit_context *ctx = NULL;
    ck_assert_int_eq(moejit_context_create(&opts, &ctx), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(moejit_last_error(), "options.compile_only: must be 0 or 1; got 2"), "%s",
                  moejit_last_error());
}
END_TEST

static Suite *warm_suite(void)
{
    Suite *s = suite_create("warm");
    TCase *tc = tcase_create("warm");
    tcase_add_unchecked_fixture(tc, setup_env, NULL);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, bad_arguments_are_refused_naming_them);
    tcase_add_test(tc, every_spec_is_warmed_once_and_a_failure_does_not_stop_the_others);
    tcase_add_test(tc, a_failed_compile_keeps_its_inputs_and_its_result_names_them);
    tcase_add_test(tc, a_compile_only_context_never_opens_the_driver);
    suite_add_tcase(s, tc);
    return s;
}

MJ_CHECK_MAIN(warm_suite)
