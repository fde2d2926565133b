/*
 * This file contains the tests of the library's layering: its folders form one chain,
 *
 *   include/, templates/common/  the public header and the host-device contract
 *   core/                        the vocabulary: status, strings, activation, spec, key, ...
 *   codegen/ | cache/ | reference/  each on core only, never on each other
 *   runtime/                     the context, driver, loader and launchers
 *   tools/                       the CLI
 *
 * and each file includes only from its own folder and the folders below it, naming the folder
 * ("core/spec.h"), so the include graph shows the chain. The same rule is checked on the
 * objects: no object calls a function defined in a higher layer, and no two objects call each
 * other through any chain of calls (a file-level cycle).
 */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/check_main.h"

typedef struct layer {
    const char *dir;
    int rank;
} layer;

/* Folders of one rank may not include each other: codegen, cache and reference are siblings. */
static const layer layers[] = {
    {"include", 0}, {"templates", 0}, {"core", 1}, {"codegen", 2}, {"cache", 2},
    {"reference", 2}, {"runtime", 3}, {"tools", 4},
};
#define N_LAYERS (sizeof layers / sizeof layers[0])

static const layer *layer_of(const char *path)
{
    for (size_t i = 0; i < N_LAYERS; i++) {
        size_t n = strlen(layers[i].dir);
        if (strncmp(path, layers[i].dir, n) == 0 && path[n] == '/') return &layers[i];
    }
    return NULL;
}

/* Whether a file in layer `from` may include or call into layer `to`. */
static int allowed(const layer *from, const layer *to)
{
    return from == to || to->rank < from->rank;
}

static const char *source_dir(void)
{
    const char *d = getenv("MOEJIT_SOURCE_DIR");
    return d && *d ? d : ".";
}

/* ---- includes ------------------------------------------------------------------------------ */

typedef struct report {
    char text[16384];
    size_t len;
    int count;
} report;

static void note(report *r, const char *fmt, const char *a, const char *b)
{
    r->count++;
    if (r->len + 512 < sizeof r->text) r->len += (size_t)snprintf(r->text + r->len, 512, fmt, a, b);
}

/* Checks every quoted include of one C file (rel is its path from the source root). */
static void check_file_includes(const char *rel, report *r)
{
    const layer *own = layer_of(rel);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", source_dir(), rel);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot read %s", path);
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        const char *p = line;
        while (*p == ' ' || *p == '\t') p++;
        if (*p != '#') continue;
        p++;
        while (*p == ' ' || *p == '\t') p++;
        if (strncmp(p, "include", 7) != 0) continue;
        p = strchr(p, '"');
        if (!p) continue; /* <system> includes */
        char name[512];
        const char *e = strchr(p + 1, '"');
        if (!e || (size_t)(e - p - 1) >= sizeof name) continue;
        memcpy(name, p + 1, (size_t)(e - p - 1));
        name[e - p - 1] = '\0';
        if (strcmp(name, "moejit.h") == 0) continue; /* the public header, include/ */
        const layer *to = layer_of(name);
        if (!to)
            note(r, "%s: includes \"%s\", which names no layer folder\n", rel, name);
        else if (!allowed(own, to))
            note(r, "%s: includes \"%s\" from a layer above or beside its own\n", rel, name);
    }
    fclose(f);
}

static void walk_sources(const char *rel_dir, report *r)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", source_dir(), rel_dir);
    DIR *d = opendir(path);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char rel[2048];
        snprintf(rel, sizeof rel, "%s/%s", rel_dir, de->d_name);
        char full[4096];
        snprintf(full, sizeof full, "%s/%s", source_dir(), rel);
        struct stat st;
        if (stat(full, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) {
            walk_sources(rel, r);
            continue;
        }
        size_t n = strlen(rel);
        if (n > 2 && rel[n - 2] == '.' && (rel[n - 1] == 'c' || rel[n - 1] == 'h')) check_file_includes(rel, r);
    }
    closedir(d);
}

START_TEST(every_include_names_its_layer_and_points_down)
{
    report *r = calloc(1, sizeof *r);
    static const char *const dirs[] = {"core", "codegen", "cache", "reference", "runtime", "tools",
                                       "templates/common"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) walk_sources(dirs[i], r);
    ck_assert_msg(r->count == 0, "%d include(s) break the layering:\n%s", r->count, r->text);
    free(r);
}
END_TEST

/* The checker itself: a file beside its layer, above it and below it. */
START_TEST(the_rule_refuses_siblings_and_upward_includes)
{
    const layer *core = layer_of("core/spec.h"), *codegen = layer_of("codegen/emit.h");
    const layer *cache = layer_of("cache/cache.h"), *runtime = layer_of("runtime/context.h");
    ck_assert_ptr_nonnull(core);
    ck_assert(allowed(codegen, core));
    ck_assert(allowed(runtime, cache));
    ck_assert(!allowed(codegen, cache));
    ck_assert(!allowed(cache, codegen));
    ck_assert(!allowed(core, runtime));
    ck_assert_ptr_null(layer_of("spec.h"));
    ck_assert_ptr_null(layer_of("tests/lib/fake_cuda.h"));
}
END_TEST

/* ---- objects ------------------------------------------------------------------------------- */

#define MAX_OBJS 256
#define MAX_SYMS 8192

typedef struct obj {
    char rel[256]; /* "cache/gc.c" */
    const layer *layer;
    int n_undef;
    char **undef;
} obj;

typedef struct sym {
    char *name;
    int obj;
} sym;

static int sym_cmp(const void *a, const void *b)
{
    return strcmp(((const sym *)a)->name, ((const sym *)b)->name);
}

/* Reads one object's defined (into syms) and undefined symbols with nm. */
static void read_object(const char *obj_root, obj *o, int index, sym *syms, int *n_syms)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "nm '%s/%.*so' 2>/dev/null", obj_root, (int)strlen(o->rel) - 1, o->rel);
    FILE *p = popen(cmd, "r");
    ck_assert_msg(p != NULL, "cannot run nm");
    char line[1024];
    int cap = 0;
    while (fgets(line, sizeof line, p)) {
        char a[512], b[512], c[512];
        int n = sscanf(line, "%511s %511s %511s", a, b, c);
        if (n == 2 && strcmp(a, "U") == 0) {
            if (o->n_undef == cap) {
                cap = cap ? cap * 2 : 64;
                o->undef = realloc(o->undef, (size_t)cap * sizeof *o->undef);
            }
            o->undef[o->n_undef++] = strdup(b);
        } else if (n == 3 && strchr("TDBR", b[0]) && *n_syms < MAX_SYMS) {
            syms[*n_syms].name = strdup(c);
            syms[(*n_syms)++].obj = index;
        }
    }
    pclose(p);
}

static int collect_objects(const char *obj_root, obj *objs)
{
    static const char *const dirs[] = {"core", "codegen", "cache", "reference", "runtime", "tools"};
    int n = 0;
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        char src[4096];
        snprintf(src, sizeof src, "%s/%s", source_dir(), dirs[i]);
        DIR *d = opendir(src);
        if (!d) continue;
        struct dirent *de;
        while ((de = readdir(d)) && n < MAX_OBJS) {
            size_t len = strlen(de->d_name);
            if (len < 3 || strcmp(de->d_name + len - 2, ".c") != 0) continue;
            /* Programs with their own main(): not part of the call graph of the library. */
            if (strcmp(de->d_name, "compile_worker.c") == 0 || strcmp(de->d_name, "moejit.c") == 0) continue;
            snprintf(objs[n].rel, sizeof objs[n].rel, "%s/%s", dirs[i], de->d_name);
            char o[8192];
            snprintf(o, sizeof o, "%s/%.*so", obj_root, (int)strlen(objs[n].rel) - 1, objs[n].rel);
            struct stat st;
            ck_assert_msg(stat(o, &st) == 0, "no object %s: build the library first", o);
            objs[n].layer = layer_of(objs[n].rel);
            n++;
        }
        closedir(d);
    }
    return n;
}

/* Tarjan's strongly connected components over the call graph; any component of two or more
 * objects is a file-level cycle. */
typedef struct scc_state {
    int n;
    const unsigned char *edge; /* n x n */
    int index[MAX_OBJS], low[MAX_OBJS], on[MAX_OBJS], stack[MAX_OBJS], sp, next;
    const obj *objs;
    report *r;
} scc_state;

static void strong(scc_state *s, int v)
{
    s->index[v] = s->low[v] = s->next++;
    s->stack[s->sp++] = v;
    s->on[v] = 1;
    for (int w = 0; w < s->n; w++) {
        if (!s->edge[v * s->n + w]) continue;
        if (s->index[w] < 0) {
            strong(s, w);
            if (s->low[w] < s->low[v]) s->low[v] = s->low[w];
        } else if (s->on[w] && s->index[w] < s->low[v]) {
            s->low[v] = s->index[w];
        }
    }
    if (s->low[v] != s->index[v]) return;
    int size = 0, first = s->sp;
    do {
        first--;
        size++;
    } while (s->stack[first] != v);
    if (size > 1) {
        char names[2048] = "";
        size_t len = 0;
        for (int i = first; i < s->sp && len + 300 < sizeof names; i++)
            len += (size_t)snprintf(names + len, sizeof names - len, " %s", s->objs[s->stack[i]].rel);
        note(s->r, "file-level cycle:%s%s\n", names, "");
    }
    for (int i = first; i < s->sp; i++) s->on[s->stack[i]] = 0;
    s->sp = first;
}

START_TEST(no_object_calls_upward_or_in_a_cycle)
{
    const char *build = getenv("MOEJIT_TEST_BUILD");
    ck_assert_msg(build && *build, "MOEJIT_TEST_BUILD is not set (make test sets it)");
    char obj_root[4096];
    snprintf(obj_root, sizeof obj_root, "%s/obj", build);
    obj *objs = calloc(MAX_OBJS, sizeof *objs);
    sym *syms = calloc(MAX_SYMS, sizeof *syms);
    int n_syms = 0;
    int n = collect_objects(obj_root, objs);
    ck_assert_int_gt(n, 20);
    for (int i = 0; i < n; i++) read_object(obj_root, &objs[i], i, syms, &n_syms);
    ck_assert_int_gt(n_syms, 100);
    qsort(syms, (size_t)n_syms, sizeof *syms, sym_cmp);
    unsigned char *edge = calloc((size_t)n * (size_t)n, 1);
    report *r = calloc(1, sizeof *r);
    for (int i = 0; i < n; i++)
        for (int u = 0; u < objs[i].n_undef; u++) {
            sym key = {objs[i].undef[u], 0};
            const sym *d = bsearch(&key, syms, (size_t)n_syms, sizeof *syms, sym_cmp);
            if (!d || d->obj == i) continue;
            edge[i * n + d->obj] = 1;
            if (!allowed(objs[i].layer, objs[d->obj].layer))
                note(r, "%s calls into a layer above or beside its own: %s\n", objs[i].rel, objs[d->obj].rel);
        }
    scc_state *s = calloc(1, sizeof *s);
    s->n = n;
    s->edge = edge;
    s->objs = objs;
    s->r = r;
    for (int i = 0; i < n; i++) s->index[i] = -1;
    for (int i = 0; i < n; i++)
        if (s->index[i] < 0) strong(s, i);
    ck_assert_msg(r->count == 0, "%d layering violation(s) in the objects:\n%s", r->count, r->text);
    for (int i = 0; i < n; i++) {
        for (int u = 0; u < objs[i].n_undef; u++) free(objs[i].undef[u]);
        free(objs[i].undef);
    }
    for (int i = 0; i < n_syms; i++) free(syms[i].name);
    free(s);
    free(r);
    free(edge);
    free(syms);
    free(objs);
}
END_TEST

static Suite *layers_suite(void)
{
    Suite *s = suite_create("layers");
    TCase *tc = tcase_create("layers");
    tcase_add_test(tc, the_rule_refuses_siblings_and_upward_includes);
    tcase_add_test(tc, every_include_names_its_layer_and_points_down);
    tcase_add_test(tc, no_object_calls_upward_or_in_a_cycle);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);
    return s;
}

MJ_CHECK_MAIN(layers_suite)
