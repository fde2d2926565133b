/*
 * This file contains the tuning table (tune_table.h): parsing and validating its JSON,
 * matching a forward against its entries, writing it back, and the process-wide table loaded
 * once from $MOEJIT_TUNE_FILE.
 */
#include "runtime/tune_table.h"

#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "templates/common/mma_params.h"
#include "runtime/gemm_plan.h"
#include "runtime/launch_common.h"
#include "core/settings.h"
#include "core/file.h"
#include "core/status.h"

/* A table file is a few kilobytes; anything far larger is not one. */
#define MAX_FILE_BYTES (16u << 20)

static const char *const path_names[] = {"auto", "large", "small", "tall", "pair"};

/* ---- parsing -------------------------------------------------------------------------------- */

static int name_index(const char *const *names, int n, const char *s)
{
    for (int i = 0; i < n; i++)
        if (names[i] && !strcmp(names[i], s)) return i;
    return -1;
}

static moejit_status get_string(const cJSON *o, int idx, const char *field, const char **out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, field);
    if (!v) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "entries[%d].%s: missing", idx, field);
    if (!cJSON_IsString(v))
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "entries[%d].%s: must be a string", idx, field);
    *out = v->valuestring;
    return MOEJIT_OK;
}

/* A whole number in [1, max]. */
static moejit_status get_count(const cJSON *o, int idx, const char *field, int64_t max, int64_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, field);
    if (!v) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "entries[%d].%s: missing", idx, field);
    double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    if (!(d >= 1 && d <= (double)max) || d != floor(d))
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "entries[%d].%s: must be a whole number in 1..%lld", idx,
                       field, (long long)max);
    *out = (int64_t)d;
    return MOEJIT_OK;
}

static moejit_status parse_entry(const cJSON *o, int idx, mj_tune_entry *e)
{
    static const char *const fields[] = {"backend", "arch", "hidden", "inter", "experts", "topk",
                                         "gated", "dtype", "max_tokens", "path"};
    if (!cJSON_IsObject(o)) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "entries[%d]: must be an object", idx);
    for (const cJSON *c = o->child; c; c = c->next)
        if (name_index(fields, (int)(sizeof fields / sizeof fields[0]), c->string) < 0)
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                           "entries[%d].%s: unknown field; allowed: backend, arch, hidden, inter, experts, "
                           "topk, gated, dtype, max_tokens, path",
                           idx, c->string);
    memset(e, 0, sizeof *e);
    const char *s;
    moejit_status st = get_string(o, idx, "backend", &s);
    if (st) return st;
    int i = name_index(mj_backend_names, MJ_BACKEND_COUNT, s);
    if (i != MJ_BACKEND_MMA && i != MJ_BACKEND_WGMMA)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "entries[%d].backend: \"%s\"; allowed: mma, wgmma", idx, s);
    e->key.backend = (mj_backend)i;
    if ((st = get_string(o, idx, "arch", &s))) return st;
    if ((i = name_index(mj_arch_names, MJ_ARCH_COUNT, s)) < 0)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "entries[%d].arch: \"%s\"; allowed: sm_80, sm_86, sm_89, sm_90a, sm_100a, sm_120a", idx, s);
    e->key.arch = (mj_arch)i;
    if ((st = get_count(o, idx, "hidden", INT32_MAX, &e->key.hidden))) return st;
    if ((st = get_count(o, idx, "inter", INT32_MAX, &e->key.inter))) return st;
    if ((st = get_count(o, idx, "experts", INT32_MAX, &e->key.experts))) return st;
    if ((st = get_count(o, idx, "topk", INT32_MAX, &e->key.topk))) return st;
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(o, "gated");
    if (!g) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "entries[%d].gated: missing", idx);
    if (!cJSON_IsBool(g)) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "entries[%d].gated: must be true or false", idx);
    e->key.gated = cJSON_IsTrue(g);
    if ((st = get_string(o, idx, "dtype", &s))) return st;
    if ((i = name_index(mj_dtype_names, MJ_DTYPE_COUNT, s)) != MJ_DTYPE_BF16 && i != MJ_DTYPE_FP16)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "entries[%d].dtype: \"%s\"; allowed: bf16, fp16", idx, s);
    e->key.dtype = (mj_dtype)i;
    if ((st = get_count(o, idx, "max_tokens", INT32_MAX, &e->max_tokens))) return st;
    if ((st = get_string(o, idx, "path", &s))) return st;
    const int wgmma_paths = mj_backend_has_tall_and_pair_paths(e->key.backend);
    i = name_index(path_names, 5, s);
    const int wgmma_path = i == MJ_MMA_PATH_TALL || i == MJ_MMA_PATH_PAIR;
    if (i != MJ_MMA_PATH_LARGE && i != MJ_MMA_PATH_SMALL && !(wgmma_paths && wgmma_path))
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "entries[%d].path: \"%s\"; allowed for %s: %s", idx, s,
                       mj_backend_names[e->key.backend], wgmma_paths ? "large, small, tall, pair" : "large, small");
    e->path = i;
    return MOEJIT_OK;
}

moejit_status mj_tune_table_add(mj_tune_table *t, const mj_tune_entry *e)
{
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 16;
        mj_tune_entry *p = realloc(t->entries, (size_t)cap * sizeof *p);
        if (!p) return mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "tune table: out of memory");
        t->entries = p, t->cap = cap;
    }
    t->entries[t->n++] = *e;
    return MOEJIT_OK;
}

void mj_tune_table_free(mj_tune_table *t)
{
    free(t->entries);
    memset(t, 0, sizeof *t);
}

moejit_status mj_tune_table_parse(const char *text, mj_tune_table *out)
{
    memset(out, 0, sizeof *out);
    cJSON *root = cJSON_Parse(text ? text : "");
    if (!root) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "tune table: not valid JSON");
    moejit_status st = MOEJIT_OK;
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(root, "version");
    const cJSON *entries = cJSON_GetObjectItemCaseSensitive(root, "entries");
    if (!cJSON_IsObject(root))
        st = mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "tune table: must be an object with version and entries");
    else if (!ver || !cJSON_IsNumber(ver) || ver->valuedouble != MJ_TUNE_VERSION)
        st = mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "version: %s; allowed: %d", ver ? "unsupported" : "missing",
                     MJ_TUNE_VERSION);
    else if (!cJSON_IsArray(entries))
        st = mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "entries: %s", entries ? "must be an array" : "missing");
    for (const cJSON *c = root->child; c && st == MOEJIT_OK; c = c->next)
        if (strcmp(c->string ? c->string : "", "version") && strcmp(c->string ? c->string : "", "entries"))
            st = mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "%s: unknown field; allowed: version, entries", c->string);
    int idx = 0;
    for (const cJSON *c = st == MOEJIT_OK ? entries->child : NULL; c && st == MOEJIT_OK; c = c->next, idx++) {
        mj_tune_entry e;
        st = parse_entry(c, idx, &e);
        if (st == MOEJIT_OK) st = mj_tune_table_add(out, &e);
    }
    cJSON_Delete(root);
    if (st != MOEJIT_OK) mj_tune_table_free(out);
    return st;
}

moejit_status mj_tune_table_load(const char *path, mj_tune_table *out)
{
    memset(out, 0, sizeof *out);
    uint8_t *buf;
    size_t n;
    /* Non-blocking and regular files only: a FIFO or device at the path must not hang us. */
    moejit_status st = mj_file_read("tune table", path, 0, MAX_FILE_BYTES, &buf, &n, NULL);
    if (st != MOEJIT_OK) return st;
    st = mj_tune_table_parse((const char *)buf, out);
    if (st != MOEJIT_OK) mj_fail_prefix(st, "%s", path);
    free(buf);
    return st;
}

/* ---- matching and writing ---------------------------------------------------------------------- */

int mj_tune_key_equal(const mj_tune_key *a, const mj_tune_key *b)
{
    return a->backend == b->backend && a->arch == b->arch && a->hidden == b->hidden && a->inter == b->inter &&
           a->experts == b->experts && a->topk == b->topk && !a->gated == !b->gated && a->dtype == b->dtype;
}

int mj_tune_table_lookup(const mj_tune_table *t, const mj_tune_key *key, int64_t tokens)
{
    const mj_tune_entry *best = NULL;
    for (int i = 0; t && i < t->n; i++) {
        const mj_tune_entry *e = &t->entries[i];
        if (tokens > e->max_tokens || !mj_tune_key_equal(&e->key, key)) continue;
        if (!best || e->max_tokens < best->max_tokens) best = e; /* strict: the first wins a tie */
    }
    return best ? best->path : MJ_MMA_PATH_AUTO;
}

int mj_tune_table_write(FILE *f, const mj_tune_table *t)
{
    fprintf(f, "{\"version\": %d, \"entries\": [\n", MJ_TUNE_VERSION);
    for (int i = 0; i < t->n; i++) {
        const mj_tune_entry *e = &t->entries[i];
        fprintf(f,
                "  {\"backend\": \"%s\", \"arch\": \"%s\", \"hidden\": %lld, \"inter\": %lld, \"experts\": %lld, "
                "\"topk\": %lld, \"gated\": %s, \"dtype\": \"%s\", \"max_tokens\": %lld, \"path\": \"%s\"}%s\n",
                mj_backend_names[e->key.backend], mj_arch_names[e->key.arch], (long long)e->key.hidden,
                (long long)e->key.inter, (long long)e->key.experts, (long long)e->key.topk,
                e->key.gated ? "true" : "false", mj_dtype_names[e->key.dtype], (long long)e->max_tokens,
                path_names[e->path], i + 1 < t->n ? "," : "");
    }
    fprintf(f, "]}\n");
    return ferror(f) ? -1 : 0;
}

/* ---- the process table ------------------------------------------------------------------------- */

/* Loaded inside pthread_once, replaced only by the test hook; every access holds g_lock. */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static mj_tune_table g_table;

/* The table is process-wide (launches without a context consult it too): its setting is read
 * through the settings table once, here, under pthread_once. */
static void load_from_env(void)
{
    static mj_settings s; /* written only inside pthread_once */
    if (mj_settings_resolve_one(MJ_SETTING_TUNE_FILE, NULL, NULL, &s) != MOEJIT_OK) {
        mj_clear_error();
        return;
    }
    const char *path = s.tune_file;
    if (!*path) return;
    mj_tune_table t;
    if (mj_tune_table_load(path, &t) != MOEJIT_OK) {
        fprintf(stderr, "moejit: warning: %s=%s ignored: %s; using the built-in tile heuristic\n", MJ_TUNE_FILE_ENV,
                path, moejit_last_error());
        mj_clear_error(); /* a forward that succeeds must not leave this as its last error */
        return;
    }
    pthread_mutex_lock(&g_lock);
    g_table = t;
    pthread_mutex_unlock(&g_lock);
}

int mj_tune_path(const moejit_spec *spec, const moejit_moe_args *args)
{
    pthread_once(&g_once, load_from_env);
    if (spec->quant != MJ_QUANT_BF16 && spec->quant != MJ_QUANT_FP16) return MJ_MMA_PATH_AUTO; /* tune_table.h */
    mj_tune_key k = {spec->backend, spec->arch, args->hidden, args->inter, mj_launch_local_experts(args),
                     args->topk, moejit_activation_is_gated(&spec->act), spec->dtype};
    pthread_mutex_lock(&g_lock);
    int path = g_table.n ? mj_tune_table_lookup(&g_table, &k, args->num_tokens) : MJ_MMA_PATH_AUTO;
    pthread_mutex_unlock(&g_lock);
    return path;
}

moejit_status mj_tune_table_install(const char *text)
{
    pthread_once(&g_once, load_from_env);
    mj_tune_table t;
    memset(&t, 0, sizeof t);
    moejit_status st = text ? mj_tune_table_parse(text, &t) : MOEJIT_OK;
    pthread_mutex_lock(&g_lock);
    mj_tune_table old = g_table;
    g_table = t;
    pthread_mutex_unlock(&g_lock);
    mj_tune_table_free(&old);
    return st;
}
