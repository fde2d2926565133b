/*
 * This file contains the warm plan (plan.h): expanding arguments, presets and manifests into
 * specs, deduplicating them by canonical text, checking support, and finding out which ones
 * the cache already holds.
 */
#include "tools/plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "codegen/build_inputs.h"
#include "codegen/layer_modules.h"
#include "core/file.h"
#include "core/spec.h"
#include "tools/cli.h"
#include "tools/presets.h"
#include "core/strbuf.h"

#define MAX_ARCHS 16

static int find(const cli_plan *p, const char *canonical)
{
    for (int i = 0; i < p->n; i++)
        if (strcmp(p->items[i].canonical, canonical) == 0) return i;
    return -1;
}

static int oom(const char *cmd)
{
    cli_error("%s: out of memory", cmd);
    return MJ_EXIT_FAIL;
}

/* Adds one parsed spec (taking it), or merges it into the item with the same canonical text. */
static int add_parsed(cli_plan *p, const char *cmd, moejit_spec *spec, const char *origin, int explicit_request)
{
    int at = find(p, moejit_spec_canonical(spec));
    if (at >= 0) {
        p->items[at].explicit_request |= explicit_request;
        moejit_spec_destroy(spec);
        return MJ_EXIT_OK;
    }
    if (p->n == p->cap) {
        int cap = p->cap ? p->cap * 2 : 32;
        cli_plan_item *items = realloc(p->items, (size_t)cap * sizeof *items);
        if (!items) {
            moejit_spec_destroy(spec);
            return oom(cmd);
        }
        p->items = items;
        p->cap = cap;
    }
    cli_plan_item *it = &p->items[p->n];
    memset(it, 0, sizeof *it);
    it->spec = spec;
    it->canonical = moejit_spec_canonical(spec);
    it->origin = strdup(origin);
    it->explicit_request = explicit_request;
    if (moejit_check_support(spec) != MOEJIT_OK) {
        it->state = CLI_PLAN_UNSUPPORTED;
        it->unsupported_reason = strdup(moejit_last_error());
    } else {
        it->state = CLI_PLAN_MISSING;
    }
    p->n++;
    if (!it->origin || (it->state == CLI_PLAN_UNSUPPORTED && !it->unsupported_reason)) return oom(cmd);
    return MJ_EXIT_OK;
}

int cli_plan_set_backends(cli_plan *p, const char *cmd, const char *list)
{
    static const char *const allowed[] = {"simt", "mma", "wgmma", "auto"};
    p->n_backends = 0;
    for (const char *a = list;;) {
        size_t len = strcspn(a, ",");
        int found = -1;
        for (int i = 0; i < 4; i++)
            if (strlen(allowed[i]) == len && strncmp(allowed[i], a, len) == 0) found = i;
        if (found < 0) {
            cli_error("%s: --backend: unknown backend '%.*s'; allowed: simt, mma, wgmma, auto", cmd, (int)len, a);
            return MJ_EXIT_USAGE;
        }
        int dup = 0;
        for (int i = 0; i < p->n_backends; i++) dup |= p->backends[i] == allowed[found];
        if (!dup) p->backends[p->n_backends++] = allowed[found];
        if (!a[len]) break;
        a += len + 1;
    }
    return MJ_EXIT_OK;
}

/* Parses text with the overrides; a bad spec is a usage error that names where it came from. */
static int add_one(cli_plan *p, const char *cmd, const char *text, const char *origin, int explicit_request,
                   const char *const *names, const char *const *values, int n)
{
    char *t = n ? cli_spec_with(text, names, values, n) : strdup(text);
    if (!t) {
        cli_error("%s: %s: the spec is not a valid JSON object", cmd, origin);
        return MJ_EXIT_USAGE;
    }
    moejit_spec *spec = NULL;
    moejit_status st = cli_spec_parse(t, &spec);
    free(t);
    if (st != MOEJIT_OK) {
        const char *hint = strstr(moejit_last_error(), "native") ? " (or give --arch)" : "";
        cli_error("%s: %s: %s%s", cmd, origin, moejit_last_error(), hint);
        return MJ_EXIT_USAGE;
    }
    return add_parsed(p, cmd, spec, origin, explicit_request);
}

/* add_one, once per --backend value when there are any (the backend another override). */
static int add_text(cli_plan *p, const char *cmd, const char *text, const char *origin, int explicit_request,
                    const char *const *names, const char *const *values, int n)
{
    if (!p->n_backends) return add_one(p, cmd, text, origin, explicit_request, names, values, n);
    const char *nn[16], *vv[16];
    if (n > 15) return MJ_EXIT_USAGE;
    for (int i = 0; i < n; i++) nn[i] = names[i], vv[i] = values[i];
    nn[n] = "backend";
    int rc = MJ_EXIT_OK;
    for (int b = 0; b < p->n_backends && rc == MJ_EXIT_OK; b++) {
        vv[n] = p->backends[b];
        rc = add_one(p, cmd, text, origin, explicit_request, nn, vv, n + 1);
    }
    return rc;
}

int cli_plan_add_spec(cli_plan *p, const char *cmd, const char *text, const char *origin, int explicit_request,
                      const char *const *archs, int n_archs)
{
    static const char *const arch_field[] = {"arch"};
    if (n_archs == 0) return add_text(p, cmd, text, origin, explicit_request, NULL, NULL, 0);
    for (int a = 0; a < n_archs; a++) {
        int rc = add_text(p, cmd, text, origin, explicit_request, arch_field, &archs[a], 1);
        if (rc != MJ_EXIT_OK) return rc;
    }
    return MJ_EXIT_OK;
}

int cli_plan_add_presets(cli_plan *p, const char *cmd, const char *names, const char *const *archs, int n_archs)
{
    static const char *const native[] = {"native"};
    char *copy = strdup(names), *save = NULL;
    if (!copy) return oom(cmd);
    int rc = MJ_EXIT_OK;
    for (char *name = strtok_r(copy, ",", &save); name && rc == MJ_EXIT_OK; name = strtok_r(NULL, ",", &save)) {
        const cli_preset *preset = cli_preset_find(name);
        if (!preset) {
            mj_buf b = MJ_BUF_INIT;
            cli_preset_names(&b);
            cli_error("%s: --preset: unknown preset '%s'; allowed: %s", cmd, name, b.data ? b.data : "");
            mj_buf_free(&b);
            rc = MJ_EXIT_USAGE;
            break;
        }
        char origin[96];
        snprintf(origin, sizeof origin, "preset %s", preset->name);
        for (int v = 0; rc == MJ_EXIT_OK; v++) {
            char *text = cli_preset_spec(preset, v);
            if (!text) break;
            rc = cli_plan_add_spec(p, cmd, text, origin, 0, n_archs ? archs : native, n_archs ? n_archs : 1);
            free(text);
        }
    }
    free(copy);
    return rc;
}

/* ---- manifests -------------------------------------------------------------------------- */

#define MANIFEST_MAX_BYTES (64u << 20)

/* Every key of o is one of allowed (a comma-separated list, matched whole) and appears once:
 * cJSON keeps duplicate keys, of which a lookup would silently read only the first. */
static int only_keys(const char *cmd, const char *where, const cJSON *o, const char *allowed)
{
    for (const cJSON *it = o->child; it; it = it->next) {
        size_t n = strlen(it->string);
        int known = 0;
        for (const char *a = allowed; *a && !known;) {
            size_t len = strcspn(a, ",");
            known = len == n && strncmp(a, it->string, n) == 0;
            a += len + (a[len] == ',');
        }
        if (!known) {
            cli_error("%s: %s: unknown key \"%s\"; allowed: %s", cmd, where, it->string, allowed);
            return MJ_EXIT_USAGE;
        }
        for (const cJSON *prev = o->child; prev != it; prev = prev->next)
            if (strcmp(prev->string, it->string) == 0) {
                cli_error("%s: %s: duplicate key \"%s\"", cmd, where, it->string);
                return MJ_EXIT_USAGE;
            }
    }
    return MJ_EXIT_OK;
}

/* The fields one shape object sets; values must be non-negative integers. */
static int shape_fields(const char *cmd, const char *where, const cJSON *shape, const char **names,
                        char values[][24], int *n)
{
    static const char *const keys[] = {"hidden", "inter", "experts", "topk"};
    if (!cJSON_IsObject(shape)) {
        cli_error("%s: %s: expected an object {\"hidden\":..,\"inter\":..,\"experts\":..,\"topk\":..}", cmd, where);
        return MJ_EXIT_USAGE;
    }
    int rc = only_keys(cmd, where, shape, "hidden,inter,experts,topk");
    if (rc != MJ_EXIT_OK) return rc;
    *n = 0;
    for (int k = 0; k < 4; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(shape, keys[k]);
        if (!v) continue;
        /* The range first: converting a double beyond long long's range is undefined. */
        if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble <= 1e9) ||
            v->valuedouble != (double)(long long)v->valuedouble) {
            cli_error("%s: %s.%s: expected a non-negative integer", cmd, where, keys[k]);
            return MJ_EXIT_USAGE;
        }
        names[*n] = keys[k];
        snprintf(values[*n], 24, "%lld", (long long)v->valuedouble);
        (*n)++;
    }
    return MJ_EXIT_OK;
}

static int add_manifest_entry(cli_plan *p, const char *cmd, const char *where, const cJSON *e,
                              const char *const *cli_archs, int n_cli_archs)
{
    if (!cJSON_IsObject(e)) {
        cli_error("%s: %s: expected an object with \"spec\"", cmd, where);
        return MJ_EXIT_USAGE;
    }
    int rc = only_keys(cmd, where, e, "spec,archs,shapes");
    if (rc != MJ_EXIT_OK) return rc;
    const cJSON *spec = cJSON_GetObjectItemCaseSensitive(e, "spec");
    char *text = NULL;
    if (cJSON_IsString(spec)) text = strdup(spec->valuestring);
    else if (cJSON_IsObject(spec)) text = cJSON_PrintUnformatted(spec);
    else {
        cli_error("%s: %s.spec: missing, or not a string or an object", cmd, where);
        return MJ_EXIT_USAGE;
    }
    if (!text) return oom(cmd);

    const char *archs[MAX_ARCHS];
    int n_archs = 0;
    for (int a = 0; a < n_cli_archs && n_archs < MAX_ARCHS; a++) archs[n_archs++] = cli_archs[a];
    const cJSON *ja = cJSON_GetObjectItemCaseSensitive(e, "archs");
    if (ja && !cJSON_IsArray(ja)) {
        cli_error("%s: %s.archs: expected an array of arch names", cmd, where);
        free(text);
        return MJ_EXIT_USAGE;
    }
    const cJSON *a;
    cJSON_ArrayForEach(a, ja)
    {
        char opt[4400];
        snprintf(opt, sizeof opt, "%s: %s.archs", cmd, where);
        const char *one[1];
        if (!cJSON_IsString(a) || cli_parse_archs(opt, a->valuestring, one, 1) != 1) {
            if (!cJSON_IsString(a)) cli_error("%s: expected a string", opt);
            free(text);
            return MJ_EXIT_USAGE;
        }
        int dup = 0;
        for (int i = 0; i < n_archs; i++) dup |= archs[i] == one[0];
        if (!dup && n_archs < MAX_ARCHS) archs[n_archs++] = one[0];
    }

    const cJSON *shapes = cJSON_GetObjectItemCaseSensitive(e, "shapes");
    if (shapes && (!cJSON_IsArray(shapes) || cJSON_GetArraySize(shapes) == 0)) {
        cli_error("%s: %s.shapes: expected a non-empty array of shape objects", cmd, where);
        free(text);
        return MJ_EXIT_USAGE;
    }
    int n_shapes = shapes ? cJSON_GetArraySize(shapes) : 1;
    for (int s = 0; s < n_shapes && rc == MJ_EXIT_OK; s++) {
        const char *names[5];
        char values[5][24];
        const char *vals[5];
        int n = 0;
        if (shapes) {
            char sw[4400];
            snprintf(sw, sizeof sw, "%s.shapes[%d]", where, s);
            rc = shape_fields(cmd, sw, cJSON_GetArrayItem(shapes, s), names, values, &n);
            if (rc != MJ_EXIT_OK) break;
        }
        for (int i = 0; i < n; i++) vals[i] = values[i];
        for (int ai = 0; ai < (n_archs ? n_archs : 1) && rc == MJ_EXIT_OK; ai++) {
            int m = n;
            if (n_archs) {
                names[m] = "arch";
                vals[m++] = archs[ai];
            }
            rc = add_text(p, cmd, text, where, 1, names, vals, m);
        }
    }
    free(text);
    return rc;
}

int cli_plan_add_manifest(cli_plan *p, const char *cmd, const char *path, const char *const *archs, int n_archs)
{
    size_t len = 0;
    uint8_t *bytes = NULL;
    /* non-blocking and regular files only: a FIFO named as the manifest is an error, not a hang */
    if (mj_file_read("--manifest", path, 0, MANIFEST_MAX_BYTES, &bytes, &len, NULL) != MOEJIT_OK) {
        cli_error("%s: %s", cmd, moejit_last_error());
        return MJ_EXIT_USAGE;
    }
    char *data = (char *)bytes;
    /* Read exactly or refuse: a NUL byte or a \u0000 escape would cut the text cJSON sees. */
    long nul = strlen(data) != len ? (long)strlen(data) : mj_json_nul_escape(data);
    if (nul >= 0) {
        cli_error("%s: manifest %s: a NUL character (a byte or \\u0000) at byte %ld; no field allows one", cmd,
                  path, nul);
        free(data);
        return MJ_EXIT_USAGE;
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(data, &end, 1);
    if (!root) {
        cli_error("%s: manifest %s: invalid JSON near byte %ld", cmd, path, end ? (long)(end - data) : 0L);
        free(data);
        return MJ_EXIT_USAGE;
    }
    int rc = MJ_EXIT_OK;
    const cJSON *kernels = cJSON_GetObjectItemCaseSensitive(root, "kernels");
    char where[4200];
    snprintf(where, sizeof where, "manifest %s", path);
    if (!cJSON_IsObject(root) || !cJSON_IsArray(kernels)) {
        cli_error("%s: %s: expected {\"kernels\": [...]}", cmd, where);
        rc = MJ_EXIT_USAGE;
    } else {
        rc = only_keys(cmd, where, root, "kernels");
    }
    for (int i = 0; rc == MJ_EXIT_OK && i < cJSON_GetArraySize(kernels); i++) {
        snprintf(where, sizeof where, "manifest %s kernels[%d]", path, i);
        rc = add_manifest_entry(p, cmd, where, cJSON_GetArrayItem(kernels, i), archs, n_archs);
    }
    cJSON_Delete(root);
    free(data);
    return rc;
}

/* ---- keys and presence ------------------------------------------------------------------ */

moejit_status cli_plan_module_key(const cli_plan_item *it, int module, char key[65])
{
    mj_build_inputs in;
    moejit_status st = mj_build_inputs_make_module(it->spec, module, mj_embedded_headers, mj_embedded_headers_len, &in);
    if (st != MOEJIT_OK) return st;
    memcpy(key, in.key.hex, 65);
    mj_build_inputs_free(&in);
    return MOEJIT_OK;
}

int cli_plan_module_present(mj_cache *cache, const cli_plan_item *it, int module)
{
    char key[65];
    const char *k = it->key;
    if (module != MJ_LAYER_WHOLE) {
        if (cli_plan_module_key(it, module, key) != MOEJIT_OK) return 0;
        k = key;
    }
    mj_program prog;
    int found = 0;
    moejit_status st = mj_cache_lookup(cache, k, it->canonical, &prog, &found);
    mj_program_free(&prog);
    return st == MOEJIT_OK && found;
}

int cli_plan_resolve(cli_plan *p, const char *cmd, mj_cache *cache)
{
    for (int i = 0; i < p->n; i++) {
        cli_plan_item *it = &p->items[i];
        if (it->state == CLI_PLAN_UNSUPPORTED) continue;
        mj_build_inputs in;
        moejit_status st = mj_build_inputs_make(it->spec, &in);
        if (st != MOEJIT_OK) {
            cli_error("%s: %s: %s", cmd, it->canonical, moejit_last_error());
            return MJ_EXIT_FAIL;
        }
        memcpy(it->key, in.key.hex, sizeof it->key);
        mj_build_inputs_free(&in);
        it->state = CLI_PLAN_MISSING;
        if (!cache) continue;
        /* a tensor-core layer is present when every one of its modules is */
        const int n = mj_layer_module_count(it->spec);
        int present = n ? 1 : cli_plan_module_present(cache, it, MJ_LAYER_WHOLE);
        for (int m = 0; present && m < n; m++) present = cli_plan_module_present(cache, it, m);
        if (present) it->state = CLI_PLAN_PRESENT;
    }
    return MJ_EXIT_OK;
}

void cli_plan_free(cli_plan *p)
{
    for (int i = 0; i < p->n; i++) {
        moejit_spec_destroy(p->items[i].spec);
        free(p->items[i].origin);
        free(p->items[i].unsupported_reason);
    }
    free(p->items);
    memset(p, 0, sizeof *p);
}
