/*
 * This file contains the include closure of a translation unit: a textual scan of include
 * lines (over-approximating, see include_closure.h), the embedded headers' include graph
 * scanned once per process, and the walk from a source through that graph.
 */
#include "codegen/include_closure.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/emit.h"
#include "core/status.h"

/* ---- the scan of one text ---------------------------------------------------------------- */

static int is_ident(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* Skips blanks and block comments within a line (a directive cannot leave its line). */
static size_t skip_blank(const char *t, size_t n, size_t i)
{
    for (;;) {
        if (i < n && (t[i] == ' ' || t[i] == '\t' || t[i] == '\v' || t[i] == '\f' || t[i] == '\r')) {
            i++;
        } else if (i + 1 < n && t[i] == '/' && t[i + 1] == '*') {
            const char *end = memmem(t + i + 2, n - i - 2, "*/", 2);
            i = end ? (size_t)(end - t) + 2 : n;
        } else {
            return i;
        }
    }
}

static size_t word_len(const char *t, size_t n, size_t i)
{
    size_t k = i;
    while (k < n && is_ident(t[k])) k++;
    return k - i;
}

static int word_is(const char *w, size_t len, const char *s)
{
    return strlen(s) == len && memcmp(w, s, len) == 0;
}

/* Marks every header the include name may resolve to: the name itself, or any header whose
 * name ends in "/<name>" (a lookup relative to the including file's or any other folder).
 * A name the scan cannot place (absolute, empty, with a "." or ".." segment) marks *all. */
static void mark_name(const char *name, size_t len, const mj_header *h, size_t nh,
                      unsigned char *row, int *all)
{
    while (len >= 2 && name[0] == '.' && name[1] == '/') {
        name += 2;
        len -= 2;
    }
    if (len == 0 || name[0] == '/') {
        *all = 1;
        return;
    }
    for (size_t s = 0; s <= len;) {
        size_t e = s;
        while (e < len && name[e] != '/') e++;
        size_t seg = e - s;
        if (seg == 0 || (seg == 1 && name[s] == '.') || (seg == 2 && name[s] == '.' && name[s + 1] == '.')) {
            *all = 1;
            return;
        }
        s = e + 1;
    }
    for (size_t j = 0; j < nh; j++) {
        size_t hl = strlen(h[j].name);
        if (hl == len ? memcmp(h[j].name, name, len) == 0
                      : hl > len && h[j].name[hl - len - 1] == '/' && memcmp(h[j].name + hl - len, name, len) == 0)
            row[j] = 1;
    }
}

/* Marks the headers named by the include target at t[k] ("x" or <x>); anything else (a macro)
 * marks *all. */
static void mark_target(const char *t, size_t n, size_t k, const mj_header *h, size_t nh,
                        unsigned char *row, int *all)
{
    char close = k < n && t[k] == '"' ? '"' : k < n && t[k] == '<' ? '>' : '\0';
    size_t e = k + 1;
    while (close && e < n && t[e] != close && t[e] != '\n') e++;
    if (!close || e >= n || t[e] != close) {
        *all = 1;
        return;
    }
    mark_name(t + k + 1, e - k - 1, h, nh, row, all);
}

/* Marks in row the headers that text's include lines and __has_include tests name. */
static void scan_spliced(const char *t, size_t n, const mj_header *h, size_t nh,
                         unsigned char *row, int *all)
{
    for (size_t i = 0; i < n && !*all; i++) {
        if (t[i] == '#' || (t[i] == '%' && i + 1 < n && t[i + 1] == ':')) {
            size_t k = skip_blank(t, n, i + (t[i] == '#' ? 1 : 2));
            size_t w = word_len(t, n, k);
            if (word_is(t + k, w, "include") || word_is(t + k, w, "include_next") ||
                word_is(t + k, w, "import"))
                mark_target(t, n, skip_blank(t, n, k + w), h, nh, row, all);
        } else if (t[i] == '_' && (i == 0 || !is_ident(t[i - 1]))) {
            size_t w = word_len(t, n, i);
            if (!word_is(t + i, w, "__has_include") && !word_is(t + i, w, "__has_include_next")) continue;
            size_t k = skip_blank(t, n, i + w);
            if (k < n && t[k] == '(') mark_target(t, n, skip_blank(t, n, k + 1), h, nh, row, all);
            i += w - 1;
        }
    }
}

/* scan_spliced on text with its line splices (backslash-newline) removed first, as the
 * preprocessor does before it sees directives. */
static moejit_status scan(const char *t, size_t n, const mj_header *h, size_t nh,
                          unsigned char *row, int *all)
{
    const char *bs = n ? memchr(t, '\\', n) : NULL;
    if (!bs) {
        scan_spliced(t, n, h, nh, row, all);
        return MOEJIT_OK;
    }
    char *copy = malloc(n);
    if (!copy) return mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "include closure: out of memory");
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (t[i] == '\\' && i + 1 < n && t[i + 1] == '\n') { i += 1; continue; }
        if (t[i] == '\\' && i + 2 < n && t[i + 1] == '\r' && t[i + 2] == '\n') { i += 2; continue; }
        copy[m++] = t[i];
    }
    scan_spliced(copy, m, h, nh, row, all);
    free(copy);
    return MOEJIT_OK;
}

/* ---- the embedded headers' graph, once per process ----------------------------------------- */

typedef struct graph {
    unsigned char *adj;   /* adj[i * n + j]: header i may include header j */
    unsigned char *all;   /* all[i]: header i has an include the scan cannot resolve */
} graph;

static graph g_embedded;
static moejit_status g_embedded_status = MOEJIT_OK;

static void scan_embedded_once(void)
{
    size_t n = mj_embedded_headers_len;
    g_embedded.adj = calloc(n ? n * n : 1, 1);
    g_embedded.all = calloc(n ? n : 1, 1);
    if (!g_embedded.adj || !g_embedded.all) {
        g_embedded_status = MOEJIT_ERR_OUT_OF_MEMORY;
        return;
    }
    for (size_t i = 0; i < n && g_embedded_status == MOEJIT_OK; i++) {
        int all = 0;
        g_embedded_status = scan(mj_embedded_headers[i].data, mj_embedded_headers[i].size,
                                 mj_embedded_headers, n, g_embedded.adj + i * n, &all);
        g_embedded.all[i] = (unsigned char)all;
    }
}

static moejit_status embedded_graph(const graph **out)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, scan_embedded_once);
    if (g_embedded_status != MOEJIT_OK)
        return mj_fail(g_embedded_status, "include closure: could not scan the embedded headers");
    *out = &g_embedded;
    return MOEJIT_OK;
}

moejit_status mj_include_closure_prewarm(void)
{
    const graph *g;
    return embedded_graph(&g);
}

/* ---- the walk ---------------------------------------------------------------------------- */

moejit_status mj_include_closure(const char *source, size_t source_len, const mj_header *headers,
                                 size_t n_headers, unsigned char *reached)
{
    if ((!source && source_len) || (!headers && n_headers) || (!reached && n_headers))
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "include closure: source, headers or reached is NULL");
    for (size_t i = 0; i < n_headers; i++)
        if (!headers[i].name || (!headers[i].data && headers[i].size))
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "include closure: headers[%zu]: name or data is NULL", i);
    if (n_headers) memset(reached, 0, n_headers);
    const graph *g = NULL;
    moejit_status st = MOEJIT_OK;
    if (headers == mj_embedded_headers && n_headers == mj_embedded_headers_len &&
        (st = embedded_graph(&g)) != MOEJIT_OK)
        return st;

    unsigned char *row = calloc(n_headers ? n_headers : 1, 1);
    size_t *stack = malloc((n_headers ? n_headers : 1) * sizeof *stack);
    if (!row || !stack) {
        free(row);
        free(stack);
        return mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "include closure: out of memory");
    }
    int all = 0;
    size_t top = 0;
    st = scan(source, source_len, headers, n_headers, row, &all);
    for (;;) {
        for (size_t j = 0; j < n_headers && st == MOEJIT_OK; j++)
            if (row[j] && !reached[j]) {
                reached[j] = 1;
                stack[top++] = j;
            }
        if (st != MOEJIT_OK || all || top == 0) break;
        size_t i = stack[--top];
        if (g) {
            memcpy(row, g->adj + i * n_headers, n_headers);
            all = g->all[i];
        } else {
            memset(row, 0, n_headers);
            st = scan(headers[i].data, headers[i].size, headers, n_headers, row, &all);
        }
    }
    if (st == MOEJIT_OK && all && n_headers) memset(reached, 1, n_headers);
    free(row);
    free(stack);
    return st;
}
