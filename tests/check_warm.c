/*
 * This file contains the tests of the library's warming call (runtime/warm.c): every spec is
 * attempted, the progress callback sees each outcome once and one at a time, a failure is
 * counted and reported without stopping the others, and a warmed spec is then a registry hit.
 *
 * Compiles are real (NVRTC in the worker the Makefile names); the driver is forced missing, so
 * kernels are compiled but not loaded, and the disk cache is off, so counts are this process's.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "lib/check_main.h"
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

static Suite *warm_suite(void)
{
    Suite *s = suite_create("warm");
    TCase *tc = tcase_create("warm");
    tcase_add_unchecked_fixture(tc, setup_env, NULL);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, bad_arguments_are_refused_naming_them);
    tcase_add_test(tc, every_spec_is_warmed_once_and_a_failure_does_not_stop_the_others);
    suite_add_tcase(s, tc);
    return s;
}

MJ_CHECK_MAIN(warm_suite)
