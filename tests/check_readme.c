/*
 * This file checks that the README's support matrix is exactly what the backends declare
 * (`moejit matrix --format markdown`); `make readme-matrix` regenerates the README's copy.
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

static Suite *readme_suite(void)
{
    Suite *s = suite_create("readme");
    TCase *tc = tcase_create("matrix");
    tcase_add_test(tc, readme_matrix_equals_the_backends_declarations);
    tcase_add_test(tc, readme_matrix_check_catches_a_drifted_copy);
    suite_add_tcase(s, tc);
    return s;
}

MJ_CHECK_MAIN(readme_suite)
