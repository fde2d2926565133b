/*
 * This file checks that the README's generated parts are exactly what the code says: the
 * support matrix (the backends' declarations, `moejit matrix --format markdown`), the settings
 * table (`moejit config --markdown`) and every command's synopsis (the usage lines of
 * `moejit CMD --help`); `make readme` regenerates the README's copies.
 */
#include <check.h>
#include <ctype.h>
#include <dirent.h>
#include <strings.h>
#include <sys/stat.h>
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

/* The words a diary leaves, assembled so that this file does not contain them. */
static int diary_word_at(const char *p, const char *start)
{
    static const char *const words[] = {"sess" "ion", "sub" "agent"};
    if (p > start && (isalnum((unsigned char)p[-1]) || p[-1] == '_')) return 0;
    for (size_t w = 0; w < sizeof words / sizeof words[0]; w++)
        if (!strncasecmp(p, words[w], strlen(words[w]))) return 1;
    /* the word for a work item followed by its number, with a space, a dash or a hash between */
    if (!strncasecmp(p, "iss" "ue", 5)) {
        const char *q = p + 5;
        if (*q == ' ' || *q == '-' || *q == '#') q++;
        if (*q == '#') q++;
        return isdigit((unsigned char)*q);
    }
    return 0;
}

/* Appends "path:line" of each diary word in the text of one file. */
static void scan_words(const char *rel, mj_buf *found)
{
    const char *dir = getenv("MOEJIT_SOURCE_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir ? dir : ".", rel);
    FILE *f = fopen(path, "rb");
    if (!f) return;
    char line[8192];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        n++;
        for (const char *p = line; *p; p++)
            if (diary_word_at(p, line)) {
                mj_buf_printf(found, "%s:%d: %.80s", rel, n, line);
                break;
            }
    }
    fclose(f);
}

static void scan_tree(const char *rel_dir, mj_buf *found)
{
    const char *dir = getenv("MOEJIT_SOURCE_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir ? dir : ".", rel_dir);
    DIR *d = opendir(path);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.' || !strcmp(de->d_name, "corpus") || !strcmp(de->d_name, "validation") ||
            !strcmp(de->d_name, "__pycache__"))
            continue;
        char rel[2048], full[8192];
        snprintf(rel, sizeof rel, "%s/%s", rel_dir, de->d_name);
        snprintf(full, sizeof full, "%s/%s", dir ? dir : ".", rel);
        struct stat st;
        if (stat(full, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) scan_tree(rel, found);
        else scan_words(rel, found);
    }
    closedir(d);
}

/* The tree speaks of the code: no README, document (the validation logs aside, which are
 * records), source or script speaks of how the work was organised or who did what. */
START_TEST(the_tree_speaks_of_the_code_only)
{
    mj_buf found = MJ_BUF_INIT;
    static const char *const files[] = {"README.md", "Makefile", "LICENSE", ".ci/run"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) scan_words(files[i], &found);
    static const char *const dirs[] = {"docs", "include", "core", "codegen", "cache", "reference", "runtime",
                                       "tools", "templates", "tests", "bench", "examples", "python/moejit",
                                       "python/tests", "fuzz"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) scan_tree(dirs[i], &found);
    ck_assert_msg(found.len == 0, "words of a diary in the tree:\n%s", found.data);
    mj_buf_free(&found);
    /* the scanner itself */
    ck_assert(diary_word_at("Iss" "ue 26", "Iss" "ue 26"));
    ck_assert(diary_word_at("sess" "ions", "sess" "ions"));
    ck_assert(!diary_word_at("iss" "ued", "iss" "ued"));
    const char *w = "the tissue";
    ck_assert(!diary_word_at(w + 5, w));
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
    tcase_add_test(tc, the_tree_speaks_of_the_code_only);
    suite_add_tcase(s, tc);
    return s;
}

MJ_CHECK_MAIN(readme_suite)
