/*
 * This file contains the tests of the public structs' ABI (moejit.h): moejit_options and
 * moejit_moe_args with a struct_size outside the oldest layout .. this library's are refused
 * naming the struct and the field; an older, smaller size still works with the fields it lacks
 * at their defaults; the initializers set the size.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/check_main.h"
#include "runtime/context.h"

static void setup_env(void)
{
    setenv("MOEJIT_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
    unsetenv("MOEJIT_ALLOW_UNVALIDATED");
    unsetenv("MOEJIT_COMPILE_TIMEOUT");
}

static void assert_error(const char *a, const char *b)
{
    const char *m = moejit_last_error();
    ck_assert_msg(strstr(m, a) && strstr(m, b), "message: %s (wanted %s ... %s)", m, a, b);
}

START_TEST(the_initializers_set_the_size_and_nothing_else)
{
    moejit_options o = MOEJIT_OPTIONS_INIT, f;
    ck_assert_uint_eq(o.struct_size, sizeof(moejit_options));
    ck_assert_ptr_null(o.cache_dir);
    memset(&f, 0xab, sizeof f);
    moejit_options_init(&f);
    ck_assert_int_eq(memcmp(&o, &f, sizeof o), 0);
    moejit_moe_args a = MOEJIT_MOE_ARGS_INIT, b;
    ck_assert_uint_eq(a.struct_size, sizeof(moejit_moe_args));
    memset(&b, 0xab, sizeof b);
    moejit_moe_args_init(&b);
    ck_assert_int_eq(memcmp(&a, &b, sizeof a), 0);
    moejit_options_init(NULL), moejit_moe_args_init(NULL);
    /* the first layouts end where their last field does; the current ones only grow */
    ck_assert_uint_eq(MOEJIT_OPTIONS_SIZE_V1, offsetof(moejit_options, allow_unvalidated));
    ck_assert_uint_ge(sizeof(moejit_options), MOEJIT_OPTIONS_SIZE_V1);
    ck_assert_uint_le(MOEJIT_MOE_ARGS_SIZE_V1, sizeof(moejit_moe_args));
}
END_TEST

START_TEST(options_of_a_wrong_size_are_refused_naming_the_field)
{
    const size_t bad[] = {0, 1, sizeof(size_t), MOEJIT_OPTIONS_SIZE_V1 - 1, sizeof(moejit_options) + 8, (size_t)-1};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        /* room for what a larger size claims is not read: the check comes first */
        moejit_options o = MOEJIT_OPTIONS_INIT;
        o.cache_mode = "off";
        o.struct_size = bad[i];
        moejit_context *ctx = (moejit_context *)1;
        ck_assert_int_eq(moejit_context_create(&o, &ctx), MOEJIT_ERR_INVALID_ARGUMENT);
        ck_assert_ptr_null(ctx);
        char got[64];
        snprintf(got, sizeof got, "got %zu", bad[i]);
        assert_error("moejit_options.struct_size:", got);
    }
}
END_TEST

START_TEST(options_of_the_first_layout_still_work_with_the_later_fields_at_their_defaults)
{
    /* a caller built before allow_unvalidated existed: whatever lies past its struct is not read */
    moejit_options o = MOEJIT_OPTIONS_INIT;
    o.struct_size = MOEJIT_OPTIONS_SIZE_V1;
    o.cache_mode = "off";
    o.compile_timeout_s = 9;
    o.allow_unvalidated = 12345; /* refused if it were read */
    moejit_context *ctx = NULL;
    ck_assert_msg(moejit_context_create(&o, &ctx) == MOEJIT_OK, "%s", moejit_last_error());
    const mj_settings *s = mj_context_settings(ctx);
    ck_assert(s->compile_timeout_s == 9);
    ck_assert_int_eq(s->origin[MJ_SETTING_COMPILE_TIMEOUT], MJ_ORIGIN_OPTION);
    ck_assert_int_eq(mj_context_allow_unvalidated(ctx), 0);
    ck_assert_int_eq(s->origin[MJ_SETTING_ALLOW_UNVALIDATED], MJ_ORIGIN_DEFAULT);
    moejit_context_destroy(ctx);
    /* ... so the environment decides it, as for a zero field */
    setenv("MOEJIT_ALLOW_UNVALIDATED", "1", 1);
    ck_assert_int_eq(moejit_context_create(&o, &ctx), MOEJIT_OK);
    ck_assert_int_eq(mj_context_allow_unvalidated(ctx), 1);
    moejit_context_destroy(ctx);
    unsetenv("MOEJIT_ALLOW_UNVALIDATED");
    /* the current layout reads the field */
    o.struct_size = sizeof o;
    o.allow_unvalidated = 1;
    ck_assert_int_eq(moejit_context_create(&o, &ctx), MOEJIT_OK);
    ck_assert_int_eq(mj_context_allow_unvalidated(ctx), 1);
    moejit_context_destroy(ctx);
}
END_TEST

START_TEST(moe_args_of_a_wrong_size_are_refused_and_the_first_layout_works)
{
    moejit_options o = MOEJIT_OPTIONS_INIT;
    moejit_context *ctx = NULL;
    ck_assert_int_eq(moejit_context_create(&o, &ctx), MOEJIT_OK);
    moejit_spec *spec = NULL;
    ck_assert_int_eq(moejit_spec_parse("backend=simt,quant=bf16,act=relu,arch=sm_80", &spec), MOEJIT_OK);
    moejit_kernel *k = NULL;
    ck_assert_msg(moejit_kernel_get(ctx, spec, &k) == MOEJIT_OK, "%s", moejit_last_error());

    moejit_moe_args a = MOEJIT_MOE_ARGS_INIT;
    a.num_tokens = 16, a.hidden = 2048, a.inter = 768, a.num_experts = 128, a.topk = 8;
    size_t want = 0, got = 0;
    ck_assert_msg(moejit_workspace_size(k, &a, &want) == MOEJIT_OK, "%s", moejit_last_error());
    ck_assert_uint_gt(want, 0);
    /* the oldest layout accepted (today the current one: args have one layout so far) */
    a.struct_size = MOEJIT_MOE_ARGS_SIZE_V1;
    ck_assert_int_eq(moejit_workspace_size(k, &a, &got), MOEJIT_OK);
    ck_assert_uint_eq(got, want);
    const size_t bad[] = {0, MOEJIT_MOE_ARGS_SIZE_V1 - 8, sizeof(moejit_moe_args) + 8};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        a.struct_size = bad[i];
        char text[64];
        snprintf(text, sizeof text, "got %zu", bad[i]);
        ck_assert_int_eq(moejit_workspace_size(k, &a, &got), MOEJIT_ERR_INVALID_ARGUMENT);
        assert_error("moejit_moe_args.struct_size:", text);
        /* forward checks the size before anything else: not the missing driver */
        ck_assert_int_eq(moejit_moe_forward(k, &a, NULL, 0, NULL), MOEJIT_ERR_INVALID_ARGUMENT);
        assert_error("moejit_moe_args.struct_size:", text);
    }
    a.struct_size = sizeof a;
    ck_assert_int_eq(moejit_moe_forward(k, &a, NULL, 0, NULL), MOEJIT_ERR_NO_DRIVER);
    moejit_spec_destroy(spec);
    moejit_context_destroy(ctx);
}
END_TEST

static Suite *abi_suite(void)
{
    Suite *s = suite_create("abi");
    TCase *tc = tcase_create("structs");
    tcase_add_checked_fixture(tc, setup_env, NULL);
    tcase_add_test(tc, the_initializers_set_the_size_and_nothing_else);
    tcase_add_test(tc, options_of_a_wrong_size_are_refused_naming_the_field);
    tcase_add_test(tc, options_of_the_first_layout_still_work_with_the_later_fields_at_their_defaults);
    tcase_add_test(tc, moe_args_of_a_wrong_size_are_refused_and_the_first_layout_works);
    suite_add_tcase(s, tc);
    return s;
}

MJ_CHECK_MAIN(abi_suite)
