/*
 * This file checks, through the built CLI, that messages say what happened: a spec compiled
 * by inspect on a cache that keeps nothing is not called published, and newlines and escape
 * sequences in arguments come back escaped on one line.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "lib/check_main.h"
#include "lib/cli_run.h"

MJ_TEST_CLI_SUITE

START_TEST(inspect_does_not_say_published_when_nothing_was_written)
{
    const char *ro[] = {"MOEJIT_CACHE_MODE=read-only", NULL};
    mj_test_cli_run(&t, ro, &r, "inspect", "quant=fp16,act=relu2,arch=sm_80", (const char *)NULL);
    ASSERT_RC(0);
    ck_assert_msg(strstr(r.out, "compiled now") && !strstr(r.out, "and published") && strstr(r.out, "not published"),
                  "%s", r.out);
    mj_test_cli_run(&t, NULL, &r, "inspect", "quant=fp16,act=relu2,arch=sm_80", (const char *)NULL);
    ASSERT_RC(0);
    ck_assert_msg(strstr(r.out, "and published"), "%s", r.out);
}
END_TEST

static int has_control(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if ((*p < 0x20 && *p != '\n') || *p == 0x7f) return 1;
    return 0;
}

START_TEST(newlines_and_escape_sequences_in_arguments_are_escaped)
{
    const char *evil = "x\nmoejit: all good\x1b[2J\x1b]0;owned\x07";
    mj_test_cli_run(&t, NULL, &r, "cache", "import", evil, "--trust-unsigned", (const char *)NULL);
    ASSERT_RC(1);
    ck_assert_msg(mj_test_count_lines(r.err) == 1 && !has_control(r.err) && strstr(r.err, "x\\nmoejit: all good\\x1b[2J"),
                  "%s", r.err);
    mj_test_cli_run(&t, NULL, &r, "inspect", "quant=fp16\n\x1b[31m,act=relu2", (const char *)NULL);
    ck_assert_int_ne(r.rc, 0);
    ck_assert_msg(mj_test_count_lines(r.err) == 1 && !has_control(r.err), "%s", r.err);
    mj_test_cli_run(&t, NULL, &r, "cache", "bogus\x1b[1m\nsub", (const char *)NULL);
    ASSERT_RC(2);
    ck_assert_msg(mj_test_count_lines(r.err) == 1 && !has_control(r.err), "%s", r.err);
}
END_TEST

static Suite *cli_messages_suite(void)
{
    Suite *s = suite_create("cli_messages");
    TCase *tc = tcase_create("messages");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, inspect_does_not_say_published_when_nothing_was_written);
    tcase_add_test(tc, newlines_and_escape_sequences_in_arguments_are_escaped);
    suite_add_tcase(s, tc);
    return s;
}

MJ_CHECK_MAIN(cli_messages_suite)
