/*
 * This file contains `moejit inspect --why SPEC`: why a spec misses the cache. It computes
 * the spec's key preimage (without compiling) and compares it with the preimages stored in
 * the entries: entries of the same canonical spec first (the spec was compiled, but some
 * other input changed: a header, an option, NVRTC), else the entries with the most preimage
 * lines in common. The nearest one is shown as a line diff, so the one field that changed
 * (an activation bit, a header's hash, the NVRTC build) is what the reader sees.
 */
#include "tools/inspect.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli.h"
#include "tools/json_out.h"

#define NEAREST_SHOWN 3

typedef struct lines {
    char **v;
    int n;
    char *store;
} lines;

static int split_lines(const char *text, lines *out)
{
    memset(out, 0, sizeof *out);
    out->store = strdup(text ? text : "");
    if (!out->store) return 0;
    int cap = 1;
    for (const char *p = out->store; *p; p++) cap += *p == '\n';
    out->v = calloc((size_t)cap, sizeof *out->v);
    if (!out->v) return 0;
    for (char *p = out->store; *p;) {
        char *nl = strchr(p, '\n');
        if (nl) *nl = '\0';
        out->v[out->n++] = p;
        if (!nl) break;
        p = nl + 1;
    }
    return 1;
}

static void free_lines(lines *l)
{
    free(l->v);
    free(l->store);
}

/* Longest common subsequence table of two line lists ((n+1) x (m+1)), or NULL. */
static int *lcs_table(const lines *a, const lines *b)
{
    int n = a->n, m = b->n;
    int *t = calloc((size_t)(n + 1) * (size_t)(m + 1), sizeof *t);
    if (!t) return NULL;
    for (int i = n - 1; i >= 0; i--)
        for (int j = m - 1; j >= 0; j--)
            t[i * (m + 1) + j] = strcmp(a->v[i], b->v[j]) == 0
                                     ? t[(i + 1) * (m + 1) + j + 1] + 1
                                     : (t[(i + 1) * (m + 1) + j] > t[i * (m + 1) + j + 1] ? t[(i + 1) * (m + 1) + j]
                                                                                        : t[i * (m + 1) + j + 1]);
    return t;
}

typedef void (*diff_fn)(void *ctx, char op, const char *line);

/* Walks the diff from entry lines a to request lines b, reporting only changed lines. */
static void walk_diff(const lines *a, const lines *b, const int *t, diff_fn fn, void *ctx)
{
    int i = 0, j = 0, m = b->n;
    while (i < a->n || j < b->n) {
        if (i < a->n && j < b->n && strcmp(a->v[i], b->v[j]) == 0) {
            i++, j++;
        } else if (i < a->n && (j == b->n || t[(i + 1) * (m + 1) + j] >= t[i * (m + 1) + j + 1])) {
            fn(ctx, '-', a->v[i++]); /* a hunk's removals first, then its additions */
        } else {
            fn(ctx, '+', b->v[j++]);
        }
    }
}

/* Splits a canonical spec at its top-level commas (act=swiglu(alpha=..,beta=..) keeps its
 * own) into at most max "key=value" fields, pointing into buf. */
static int spec_fields(const char *spec, char *buf, size_t cap, char **fields, int max)
{
    snprintf(buf, cap, "%s", spec);
    int n = 0, depth = 0;
    char *start = buf;
    for (char *p = buf;; p++) {
        if (*p == '(') depth++;
        else if (*p == ')' && depth > 0) depth--;
        if ((*p == ',' && depth == 0) || !*p) {
            int end = !*p;
            *p = '\0';
            if (n < max) fields[n++] = start;
            if (end) break;
            start = p + 1;
        }
    }
    return n;
}

typedef void (*field_fn)(void *ctx, const char *name, const char *entry, const char *request);

/* Reports each spec field whose value differs between the entry's spec and the request's. */
static void diff_fields(const char *entry_spec, const char *request_spec, field_fn fn, void *ctx)
{
    enum { MAX_FIELDS = 48 };
    char ba[2048], bb[2048];
    char *fa[MAX_FIELDS], *fb[MAX_FIELDS];
    int na = spec_fields(entry_spec, ba, sizeof ba, fa, MAX_FIELDS);
    int nb = spec_fields(request_spec, bb, sizeof bb, fb, MAX_FIELDS);
    for (int j = 0; j < nb; j++) {
        const char *eq = strchr(fb[j], '=');
        size_t klen = eq ? (size_t)(eq - fb[j]) : strlen(fb[j]);
        const char *other = NULL;
        for (int i = 0; i < na && !other; i++)
            if (strncmp(fa[i], fb[j], klen) == 0 && (fa[i][klen] == '=' || !fa[i][klen])) other = fa[i];
        const char *vb = eq ? eq + 1 : "", *va = other ? (other[klen] == '=' ? other + klen + 1 : "") : "(absent)";
        if (strcmp(va, vb) != 0) {
            char name[64];
            snprintf(name, sizeof name, "%.*s", (int)klen, fb[j]);
            fn(ctx, name, va, vb);
        }
    }
}

static void text_field(void *ctx, const char *name, const char *entry, const char *request)
{
    (void)ctx;
    printf("  %-10s %s  ->  %s\n", name, entry, request);
}

/* ctx: the JSON array the field is added to. */
static void json_field(void *ctx, const char *name, const char *entry, const char *request)
{
    cJSON *o = cli_json_add(ctx, NULL, cJSON_CreateObject());
    cli_json_add(o, "field", cli_json_str(name));
    cli_json_add(o, "entry", cli_json_str(entry));
    cli_json_add(o, "request", cli_json_str(request));
}

static void count_field(void *ctx, const char *name, const char *entry, const char *request)
{
    (void)name, (void)entry, (void)request;
    ++*(int *)ctx;
}

typedef struct candidate {
    char key[65];
    char *spec;
    char *preimage;
    int same_spec;
    int common;
    int lines;
    int fields;   /* spec fields that differ from the request's */
} candidate;

typedef struct collect {
    const char *canonical;
    const lines *want;
    candidate *c;
    int n, cap, failed;
} collect;

static int collect_one(void *vctx, const mj_cache_entry_info *info)
{
    collect *x = vctx;
    if (x->n == x->cap) {
        int cap = x->cap ? x->cap * 2 : 32;
        candidate *c = realloc(x->c, (size_t)cap * sizeof *c);
        if (!c) {
            x->failed = 1;
            return 1;
        }
        x->c = c;
        x->cap = cap;
    }
    candidate *c = &x->c[x->n];
    memset(c, 0, sizeof *c);
    memcpy(c->key, info->key, sizeof c->key);
    c->spec = strdup(info->canonical_spec ? info->canonical_spec : "");
    c->preimage = strdup(info->entry && info->entry->preimage ? info->entry->preimage : "");
    if (!c->spec || !c->preimage) {
        free(c->spec), free(c->preimage);
        x->failed = 1;
        return 1;
    }
    c->same_spec = strcmp(c->spec, x->canonical) == 0;
    diff_fields(c->spec, x->canonical, count_field, &c->fields);
    lines have;
    if (split_lines(c->preimage, &have)) {
        int *t = lcs_table(&have, x->want);
        c->common = t ? t[0] : 0;
        c->lines = have.n;
        free(t);
    }
    free_lines(&have);
    x->n++;
    return 0;
}

static int nearer(const void *pa, const void *pb)
{
    const candidate *a = pa, *b = pb;
    if (a->same_spec != b->same_spec) return b->same_spec - a->same_spec;
    if (a->common != b->common) return b->common - a->common;
    if (a->fields != b->fields) return a->fields - b->fields;
    return strcmp(a->key, b->key);
}

static void text_line(void *ctx, char op, const char *line)
{
    (void)ctx;
    printf("  %c %s\n", op, line);
}

/* ctx: the JSON array the line is added to. */
static void json_line(void *ctx, char op, const char *line)
{
    char op_text[2] = {op, '\0'};
    cJSON *o = cli_json_add(ctx, NULL, cJSON_CreateObject());
    cli_json_add(o, "op", cli_json_str(op_text));
    cli_json_add(o, "line", cli_json_str(line));
}

int inspect_why(const char *spec_text, int json)
{
    moejit_spec *spec = NULL;
    moejit_status st = cli_spec_parse(spec_text, &spec);
    if (st != MOEJIT_OK) {
        cli_error("inspect --why: %s", moejit_last_error());
        return MJ_EXIT_USAGE;
    }
    if ((st = moejit_check_support(spec)) != MOEJIT_OK) {
        int rc = cli_fail(st, "inspect --why");
        moejit_spec_destroy(spec);
        return rc;
    }
    mj_build_inputs in;
    if ((st = mj_build_inputs_make(spec, &in)) != MOEJIT_OK) {
        int rc = cli_fail(st, "inspect --why");
        moejit_spec_destroy(spec);
        return rc;
    }
    const char *canonical = moejit_spec_canonical(spec);
    mj_cache *cache = NULL;
    int rc = cli_open_cache(&cache);
    lines want = {0};
    collect x = {canonical, &want, NULL, 0, 0, 0};
    if (rc != MJ_EXIT_OK) goto done;
    if (!split_lines(in.preimage.data, &want)) {
        cli_error("inspect --why: out of memory");
        rc = MJ_EXIT_FAIL;
        goto done;
    }
    mj_program prog;
    int found = 0;
    if (mj_cache_lookup(cache, in.key.hex, canonical, &prog, &found) == MOEJIT_OK && found) {
        mj_program_free(&prog);
        if (json) {
            cJSON *doc = cJSON_CreateObject();
            cli_json_add(doc, "spec", cli_json_str(canonical));
            cli_json_add(doc, "key", cli_json_str(in.key.hex));
            cli_json_add(doc, "cached", cJSON_CreateBool(1));
            cli_json_add(doc, "nearest", cJSON_CreateArray());
            rc = cli_json_print(doc);
        } else {
            printf("spec:     %s\nkey:      %s\ncached:   yes: a hit, nothing to explain\n", canonical, in.key.hex);
        }
        goto done;
    }
    st = mj_cache_list(cache, collect_one, &x);
    if (st != MOEJIT_OK || x.failed) {
        rc = st != MOEJIT_OK ? cli_fail(st, "inspect --why") : (cli_error("inspect --why: out of memory"), MJ_EXIT_FAIL);
        goto done;
    }
    qsort(x.c, (size_t)x.n, sizeof *x.c, nearer);
    const char *dir = mj_cache_get_config(cache)->dir;
    cJSON *doc = NULL, *nearest = NULL;
    if (json) {
        doc = cJSON_CreateObject();
        cli_json_add(doc, "spec", cli_json_str(canonical));
        cli_json_add(doc, "key", cli_json_str(in.key.hex));
        cli_json_add(doc, "cached", cJSON_CreateBool(0));
        cli_json_add(doc, "cache_dir", cli_json_str(dir));
        cli_json_add(doc, "preimage", cli_json_str(in.preimage.data));
        cli_json_add(doc, "entries", cli_json_int(x.n));
        nearest = cli_json_add(doc, "nearest", cJSON_CreateArray());
    } else {
        printf("spec:     %s\nkey:      %s\ncached:   no (a miss in %s)\n", canonical, in.key.hex, dir);
        if (x.n == 0) printf("nearest:  none: the cache holds no entries (a cold cache)\n");
    }
    for (int i = 0; i < x.n && i < NEAREST_SHOWN; i++) {
        candidate *c = &x.c[i];
        lines have;
        int *t = NULL;
        if (!split_lines(c->preimage, &have) || !(t = lcs_table(&have, &want))) {
            free(t);
            free_lines(&have);
            continue;
        }
        if (json) {
            cJSON *o = cli_json_add(nearest, NULL, cJSON_CreateObject());
            cli_json_add(o, "key", cli_json_str(c->key));
            cli_json_add(o, "spec", cli_json_str(c->spec));
            cli_json_add(o, "same_spec", cJSON_CreateBool(c->same_spec));
            cli_json_add(o, "common_lines", cli_json_int(c->common));
            cli_json_add(o, "lines", cli_json_int(c->lines));
            walk_diff(&have, &want, t, json_line, cli_json_add(o, "diff", cJSON_CreateArray()));
            diff_fields(c->spec, canonical, json_field, cli_json_add(o, "spec_fields", cJSON_CreateArray()));
        } else if (i == 0) {
            printf("nearest:  %s (%s; %d of %d preimage lines in common)\n          spec %s\n", c->key,
                   c->same_spec ? "the same spec, built from other inputs" : "another spec", c->common, want.n,
                   c->spec);
            if (!c->same_spec) {
                printf("spec fields that differ (entry -> this spec):\n");
                diff_fields(c->spec, canonical, text_field, NULL);
            }
            printf("preimage diff (- the cached entry's, + this spec's):\n");
            walk_diff(&have, &want, t, text_line, NULL);
        } else {
            if (i == 1) printf("next nearest:\n");
            printf("  %s  %d of %d lines in common  %s\n", c->key, c->common, want.n, c->spec);
        }
        free(t);
        free_lines(&have);
    }
    if (json) rc = cli_json_print(doc);
done:
    for (int i = 0; i < x.n; i++) free(x.c[i].spec), free(x.c[i].preimage);
    free(x.c);
    free_lines(&want);
    mj_cache_close(cache);
    mj_build_inputs_free(&in);
    moejit_spec_destroy(spec);
    return rc;
}
