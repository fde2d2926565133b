/*
 * This file checks that the README's generated parts are exactly what the code says: the
 * support matrix (the backends' declarations, `moejit matrix --format markdown`), the settings
 * table (`moejit config --markdown`) and every command's synopsis (the usage lines of
 * `moejit CMD --help`); `make readme` regenerates the README's copies.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/check_main.h"
#include "core/matrix.h"

static char *read_readme(void)
{
    const char *dir = getenv("MOEJIT_SOURCE_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/README.md", dir ? dir : ".");
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    mj_buf b = MJ_BUF_INIT;
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) mj_buf_append(&b, chunk, n);
    fclose(f);
    return mj_buf_take(&b);
}

START_TEST(readme_matrix_equals_the_backends_declarations)
{
    char *readme = read_readme();
    ck_assert_msg(readme != NULL, "README.md not found (set MOEJIT_SOURCE_DIR)");
    const char *begin_tag = "<!-- matrix:begin -->\n", *end_tag = "<!-- matrix:end -->";
    char *begin = strstr(readme, begin_tag), *end = strstr(readme, end_tag);
    ck_assert_msg(begin && end && end > begin, "README.md lacks the matrix markers");
    begin += strlen(begin_tag);
    mj_buf want = MJ_BUF_INIT;
    ck_assert_int_eq(mj_matrix_format("markdown", &want), MOEJIT_OK);
    size_t have_len = (size_t)(end - begin);
    ck_assert_msg(have_len == want.len && memcmp(begin, want.data, want.len) == 0,
                  "README.md's support matrix drifted from the backends' declarations; "
                  "run `make readme-matrix`.\nREADME has:\n%.*s\nbackends declare:\n%s",
                  (int)have_len, begin, want.data);
    mj_buf_free(&want);
    free(readme);
}
END_TEST

START_TEST(readme_matrix_check_catches_a_drifted_copy)
{
    /* The comparison above must be able to fail: a table missing one activation differs. */
    mj_buf want = MJ_BUF_INIT;
    ck_assert_int_eq(mj_matrix_format("markdown", &want), MOEJIT_OK);
    char *relu2 = strstr(want.data, "relu2");
    ck_assert_ptr_nonnull(relu2);
    relu2[0] = 'X';
    mj_buf again = MJ_BUF_INIT;
    ck_assert_int_eq(mj_matrix_format("markdown", &again), MOEJIT_OK);
    ck_assert(again.len != want.len || memcmp(again.data, want.data, want.len) != 0);
    mj_buf_free(&want);
    mj_buf_free(&again);
}
END_TEST

/* The text between "<!-- NAME:begin -->\n" and "<!-- NAME:end -->" (malloc'd). */
static char *readme_block(const char *readme, const char *name)
{
    char begin_tag[64], end_tag[64];
    snprintf(begin_tag, sizeof begin_tag, "<!-- %s:begin -->\n", name);
    snprintf(end_tag, sizeof end_tag, "<!-- %s:end -->", name);
    const char *begin = strstr(readme, begin_tag), *end = strstr(readme, end_tag);
    ck_assert_msg(begin && end && end > begin, "README.md lacks the %s markers", name);
    begin += strlen(begin_tag);
    return strndup(begin, (size_t)(end - begin));
}

/* stdout of the shell command (the CLI path substituted for %s). */
static void run_cli(mj_buf *out, const char *fmt, const char *arg)
{
    const char *cli = getenv("MOEJIT_CLI");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, fmt, cli && *cli ? cli : "build/bin/moejit", arg);
    FILE *p = popen(cmd, "r");
    ck_assert_msg(p != NULL, "cannot run %s", cmd);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, p)) > 0) mj_buf_append(out, chunk, n);
    ck_assert_msg(pclose(p) == 0, "%s failed", cmd);
}

START_TEST(readme_settings_table_equals_the_settings_table)
{
    char *readme = read_readme();
    ck_assert_ptr_nonnull(readme);
    char *have = readme_block(readme, "settings");
    mj_buf want = MJ_BUF_INIT;
    run_cli(&want, "'%s' config --markdown", "");
    ck_assert_int_gt(want.len, 200);
    ck_assert_msg(strcmp(have, want.data) == 0,
                  "README.md's settings table drifted from core/settings.c; run `make readme`.\nREADME has:\n%s\n"
                  "the table is:\n%s",
                  have, want.data);
    mj_buf_free(&want);
    free(have);
    free(readme);
}
END_TEST

/* The commands whose synopsis the README shows, in its order. */
static const char *const commands[] = {"demo", "warm", "inspect", "cache", "matrix", "bench jit", "bench layer",
                                       "tune", "config"};

START_TEST(readme_synopsis_equals_every_commands_usage)
{
    char *readme = read_readme();
    ck_assert_ptr_nonnull(readme);
    char *have = readme_block(readme, "usage");
    mj_buf want = MJ_BUF_INIT;
    mj_buf_puts(&want, "```\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        run_cli(&want, "'%s' %s --help | sed -n '1,/^$/p' | sed '/^$/d; s/^usage: //; s/^       //'", commands[i]);
    mj_buf_puts(&want, "```\n");
    ck_assert_msg(strcmp(have, want.data) == 0,
                  "README.md's command synopsis drifted from the commands' --help; run `make readme`.\n"
                  "README has:\n%s\nthe commands say:\n%s",
                  have, want.data);
    mj_buf_free(&want);
    free(have);
    free(readme);
}
END_TEST

static Suite *readme_suite(void)
{
    Suite *s = suite_create("readme");
    TCase *tc = tcase_create("matrix");
    tcase_add_test(tc, readme_matrix_equals_the_backends_declarations);
    tcase_add_test(tc, readme_matrix_check_catches_a_drifted_copy);
    tcase_add_test(tc, readme_settings_table_equals_the_settings_table);
    tcase_add_test(tc, readme_synopsis_equals_every_commands_usage);
    suite_add_tcase(s, tc);
    return s;
}

MJ_CHECK_MAIN(readme_suite)
