/*
 * This file checks that no function of the library and templates (core/, codegen/, cache/,
 * reference/, runtime/, templates/) is longer than 120 lines unless a comment just above it
 * says why, starting "Long:" ("// Long: one pass over the pipeline's stages; ..."): a reader
 * should be able to hold any function in view.
 *
 * Functions are found by their braces after comments, strings and character literals are
 * blanked: a body is a '{' that follows a parameter list ')' outside any other body (so
 * namespace and struct braces are not bodies, and lambdas count towards their function).
 */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/check_main.h"

#define MAX_LINES 120

static const char *source_dir(void)
{
    const char *d = getenv("MOEJIT_SOURCE_DIR");
    return d && *d ? d : ".";
}

static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    fclose(f);
    if (s) s[n] = '\0', *len = (size_t)n;
    return s;
}

/* Blanks comments, strings and character literals, keeping every newline. */
static void blank(char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '/' && s[i + 1] == '/') {
            while (i < n && s[i] != '\n') s[i++] = ' ';
        } else if (s[i] == '/' && s[i + 1] == '*') {
            s[i] = s[i + 1] = ' ';
            for (i += 2; i + 1 < n && !(s[i] == '*' && s[i + 1] == '/'); i++)
                if (s[i] != '\n') s[i] = ' ';
            if (i + 1 < n) s[i] = s[i + 1] = ' ', i++;
        } else if (s[i] == '"' || s[i] == '\'') {
            char q = s[i];
            for (i++; i < n && s[i] != q && s[i] != '\n'; i++) {
                if (s[i] == '\\' && i + 1 < n) s[i++] = ' ';
                s[i] = ' ';
            }
        }
    }
}

/* Whether the text before position i (skipping blanks and qualifiers) ends a parameter list. */
static int after_parameters(const char *s, size_t i)
{
    while (i > 0) {
        char c = s[i - 1];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            i--;
            continue;
        }
        if (c == ')') return 1;
        /* const, noexcept, override, a trailing return type's last word */
        size_t j = i;
        while (j > 0 && (s[j - 1] == '_' || (s[j - 1] >= 'a' && s[j - 1] <= 'z'))) j--;
        if (j == i) return 0;
        if ((i - j == 5 && !strncmp(s + j, "const", 5)) || (i - j == 8 && !strncmp(s + j, "noexcept", 8)) ||
            (i - j == 8 && !strncmp(s + j, "override", 8))) {
            i = j;
            continue;
        }
        return 0;
    }
    return 0;
}

/* The word before the '(' matching the ')' that ends before position i: if, for, while and
 * switch open blocks, not functions. */
static int is_control(const char *s, size_t i)
{
    while (i > 0 && s[i - 1] != ')') i--;
    if (!i) return 0;
    int depth = 0;
    size_t j = i - 1;
    for (;; j--) {
        if (s[j] == ')') depth++;
        if (s[j] == '(' && --depth == 0) break;
        if (!j) return 0;
    }
    while (j > 0 && (s[j - 1] == ' ' || s[j - 1] == '\n')) j--;
    size_t e = j;
    while (j > 0 && (s[j - 1] == '_' || (s[j - 1] >= 'a' && s[j - 1] <= 'z') || (s[j - 1] >= 'A' && s[j - 1] <= 'Z') ||
                     (s[j - 1] >= '0' && s[j - 1] <= '9')))
        j--;
    static const char *const words[] = {"if", "for", "while", "switch", "catch", "sizeof", "return"};
    for (size_t w = 0; w < sizeof words / sizeof words[0]; w++)
        if (strlen(words[w]) == e - j && !strncmp(s + j, words[w], e - j)) return 1;
    return 0;
}

/* Whether one of the 8 lines above line `at` of the original text holds "Long:". */
static int has_reason(const char *orig, int at)
{
    int line = 1;
    const char *p = orig, *from = NULL;
    for (; *p && line < at; p++)
        if (*p == '\n' && ++line == at - 8) from = p + 1;
    if (!from) from = orig;
    size_t n = (size_t)(p - from);
    for (size_t i = 0; i + 5 <= n; i++)
        if (!strncmp(from + i, "Long:", 5)) return 1;
    return 0;
}

typedef struct report {
    char text[8192];
    size_t len;
    int count;
} report;

/* Appends "path:line: N lines" for every body over the limit without a reason. */
static void check_file(const char *rel, report *r, int *functions)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", source_dir(), rel);
    size_t n = 0;
    char *orig = read_all(path, &n);
    ck_assert_msg(orig != NULL, "cannot read %s", path);
    char *s = malloc(n + 1);
    memcpy(s, orig, n + 1);
    blank(s, n);
    int depth = 0, body_depth = -1, line = 1, start = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\n') line++;
        if (s[i] == '{') {
            if (body_depth < 0 && after_parameters(s, i) && !is_control(s, i)) body_depth = depth, start = line;
            depth++;
        } else if (s[i] == '}') {
            depth--;
            if (depth == body_depth) {
                body_depth = -1;
                (*functions)++;
                int lines = line - start + 1;
                if (lines > MAX_LINES && !has_reason(orig, start)) {
                    r->count++;
                    if (r->len + 300 < sizeof r->text)
                        r->len += (size_t)snprintf(r->text + r->len, 300, "%s:%d: a function of %d lines\n", rel,
                                                   start, lines);
                }
            }
        }
    }
    free(s);
    free(orig);
}

static void walk(const char *rel_dir, report *r, int *functions)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", source_dir(), rel_dir);
    DIR *d = opendir(path);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char rel[2048], full[8192];
        snprintf(rel, sizeof rel, "%s/%s", rel_dir, de->d_name);
        snprintf(full, sizeof full, "%s/%s", source_dir(), rel);
        struct stat st;
        if (stat(full, &st) != 0) continue;
        size_t len = strlen(rel);
        if (S_ISDIR(st.st_mode)) walk(rel, r, functions);
        else if ((len > 2 && !strcmp(rel + len - 2, ".c")) || (len > 2 && !strcmp(rel + len - 2, ".h")) ||
                 (len > 4 && !strcmp(rel + len - 4, ".cuh")))
            check_file(rel, r, functions);
    }
    closedir(d);
}

START_TEST(no_function_is_longer_than_120_lines_without_a_reason)
{
    report *r = calloc(1, sizeof *r);
    int functions = 0;
    static const char *const dirs[] = {"core", "codegen", "cache", "reference", "runtime", "templates"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) walk(dirs[i], r, &functions);
    ck_assert_int_gt(functions, 300); /* the scanner finds the library's functions at all */
    ck_assert_msg(r->count == 0, "%d function(s) over %d lines with no \"Long:\" comment above:\n%s", r->count,
                  MAX_LINES, r->text);
    free(r);
}
END_TEST

/* The scanner itself: a long function is caught, control blocks and structs are not bodies,
 * and a reason excuses it. */
START_TEST(the_scanner_counts_bodies_not_blocks)
{
    char *text = malloc(20000);
    size_t n = 0;
    n += (size_t)sprintf(text + n, "struct s { int a; };\nstatic int f(int x)\n{\n");
    for (int i = 0; i < 130; i++) n += (size_t)sprintf(text + n, "    if (x) { x++; } /* } */ x += '}';\n");
    n += (size_t)sprintf(text + n, "    return x;\n}\n");
    char *copy = strdup(text);
    blank(copy, n);
    int depth = 0, bodies = 0, longest = 0, start = 0, line = 1, body = -1;
    for (size_t i = 0; i < n; i++) {
        if (copy[i] == '\n') line++;
        if (copy[i] == '{') {
            if (body < 0 && after_parameters(copy, i) && !is_control(copy, i)) body = depth, start = line;
            depth++;
        } else if (copy[i] == '}' && --depth == body) {
            body = -1;
            bodies++;
            if (line - start + 1 > longest) longest = line - start + 1;
        }
    }
    ck_assert_int_eq(bodies, 1);
    ck_assert_int_eq(longest, 133);
    ck_assert(!has_reason(text, 2));
    const char *excused = "a\nb\n// Long: a reason.\nint g(void)\n{\n";
    ck_assert(has_reason(excused, 4));
    free(copy);
    free(text);
}
END_TEST

static Suite *function_length_suite(void)
{
    Suite *s = suite_create("function_length");
    TCase *tc = tcase_create("function_length");
    tcase_add_test(tc, the_scanner_counts_bodies_not_blocks);
    tcase_add_test(tc, no_function_is_longer_than_120_lines_without_a_reason);
    suite_add_tcase(s, tc);
    return s;
}

MJ_CHECK_MAIN(function_length_suite)
