/*
 * This file contains `moejit inspect`: what moejit makes of a spec or a cache key —
 * canonical spec, key and preimage, support verdict, whether it is cached, per-kernel
 * resources — and the views of one kernel: generated source, PTX, SASS, compile log and
 * preimage. `--why` (inspect_why.c) explains a miss.
 *
 * A SPEC that is not cached is compiled (and published) so that its resources can be shown,
 * unless --no-compile; a KEY is read from the cache only.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "codegen/layer_modules.h"
#include "runtime/spec_resolve.h"
#include "tools/cache_remote.h"
#include "tools/cli.h"
#include "tools/compile_cached.h"
#include "tools/inspect.h"
#include "tools/json_out.h"
#include "tools/plan.h"

static const char inspect_usage[] =
    "usage: moejit inspect SPEC|KEY [--source|--ptx|--sass|--log|--preimage] [options]\n"
    "       moejit inspect --why SPEC [--json]\n"
    "\n"
    "Shows the canonical spec, its cache key and key preimage, whether its backend supports\n"
    "it, whether the cache held it, and each kernel's registers, shared memory, stack and\n"
    "spills, and which backend backend=auto chose and why. A SPEC missing from the cache is\n"
    "compiled and published first (not with --no-compile); a KEY (its 64 hex digits, or a\n"
    "unique prefix of at least 6, as `moejit warm` and `moejit cache ls` print) is read from\n"
    "the cache.\n"
    "\n"
    "Views (one at a time):\n"
    "  --source      the generated CUDA source (no compile)\n"
    "  --ptx         PTX for the spec's arch (NVRTC, compute_XX)\n"
    "  --sass        SASS of the cubin, through cuobjdump or nvdisasm (from $CUDA_HOME/bin,\n"
    "                PATH or the nvidia-cuda-cuobjdump wheel); exit 1 when neither is found\n"
    "  --log         NVRTC's compile log (with ptxas' resource report)\n"
    "  --preimage    the key's preimage: every input the key hashes, one per line\n"
    "  --why SPEC    why SPEC misses the cache: its preimage diffed against the nearest\n"
    "                entries (the same spec first, else the most lines in common)\n"
    "  --bundle DIR  write the generated source, every header it includes (under their\n"
    "                include names) and compile.sh (nvcc with moejit's options) into DIR,\n"
    "                so the layer can be compiled and changed by hand (no compile)\n"
    "\n"
    "Options:\n"
    "  --json            the view as one JSON object\n"
    "  --no-compile      do not compile a SPEC that is not cached\n"
    "  --module NAME     one module of a tensor-core layer (route, finalize, small, fused,\n"
    "                    routed, t1, t1_shallow, persistent, persistent_shallow, large; wgmma\n"
    "                    also tall, pair, short): what a forward of that path compiles and\n"
    "                    loads; without it, the whole layer as one source, and the report\n"
    "                    lists every module's key and whether the cache holds it\n"
    "  --cache-dir DIR   the cache to read (default: $MOEJIT_CACHE_DIR etc.)\n"
    "\n"
    "Examples:\n"
    "  moejit inspect 'backend=simt,quant=bf16,act=swiglu(alpha=1.702,beta=1,limit=7),arch=sm_90a'\n"
    "  moejit inspect 'quant=fp16,act=relu2,arch=sm_80' --source\n"
    "  moejit inspect 3f2a9c0b17d4 --sass       (a key or key prefix from `moejit cache ls`)\n"
    "  moejit inspect 'quant=bf16,arch=sm_90a,backend=wgmma' --bundle /tmp/layer\n"
    "  moejit inspect --why 'quant=bf16,act=swiglu(alpha=1.702),arch=sm_90a'\n";

enum view { VIEW_REPORT = 0, VIEW_SOURCE, VIEW_PTX, VIEW_SASS, VIEW_LOG, VIEW_PREIMAGE };
static const char *const view_names[] = {"report", "source", "ptx", "sass", "log", "preimage"};

/* What one inspect knows about its subject. */
typedef struct subject {
    int by_key;
    moejit_spec *spec;          /* NULL when a KEY's stored spec no longer parses */
    char *canonical;            /* owned */
    char key[65];
    int supported;
    char *reason;               /* unsupported: why */
    int have_inputs;
    mj_build_inputs in;         /* for a supported spec: source, options, preimage */
    int cached_before;          /* an entry existed before this command */
    int compiled_now;
    int published;    /* the compiled entry is on disk (not a read-only or unwritable cache) */
    int have_entry;
    mj_entry entry;             /* kernels, cubin, log, preimage, times */
    char *compile_error;
    char *auto_why;             /* backend=auto: what it chose and why; else NULL */
    int module;                 /* --module: one module of a tensor-core layer, else MJ_LAYER_WHOLE */
    char *modules;              /* a tensor-core SPEC's whole layer: each module's key and presence */
} subject;

static int is_key(const char *s)
{
    if (strlen(s) != 64) return 0;
    for (const char *p = s; *p; p++)
        if (!isxdigit((unsigned char)*p)) return 0;
    return 1;
}

/* 6..63 hex digits: a key prefix (no spec is all hex: a spec field has an '='). */
static int is_key_prefix(const char *s)
{
    size_t n = strlen(s);
    if (n < 6 || n >= 64) return 0;
    for (const char *p = s; *p; p++)
        if (!isxdigit((unsigned char)*p)) return 0;
    return 1;
}

typedef struct prefix_match {
    char prefix[65];
    size_t n;
    int count;
    char first[65];
    mj_buf list; /* the first few matches, for the ambiguity message */
} prefix_match;

static int match_prefix(void *ctx, const mj_cache_entry_info *info)
{
    prefix_match *m = ctx;
    if (strncmp(info->key, m->prefix, m->n) != 0) return 0;
    if (m->count++ == 0) memcpy(m->first, info->key, 65);
    if (m->count <= 4) mj_buf_printf(&m->list, "%s%s (%s)", m->count > 1 ? ", " : "", info->key, info->canonical_spec);
    return 0;
}

/* Resolves a key prefix to the one key in the cache that starts with it. */
static int resolve_prefix(mj_cache *cache, const char *arg, char key[65])
{
    prefix_match m;
    memset(&m, 0, sizeof m);
    m.n = strlen(arg);
    for (size_t i = 0; i < m.n; i++) m.prefix[i] = (char)tolower((unsigned char)arg[i]);
    moejit_status st = mj_cache_list(cache, match_prefix, &m);
    int rc = MJ_EXIT_OK;
    if (st != MOEJIT_OK) {
        rc = cli_fail(st, "inspect");
    } else if (m.count == 0) {
        cli_error("inspect: no cache entry's key starts with %s in %s (`moejit cache ls` lists the keys)", m.prefix,
                  mj_cache_get_config(cache)->dir);
        rc = MJ_EXIT_FAIL;
    } else if (m.count > 1) {
        cli_error("inspect: key prefix %s is ambiguous: %d entries start with it: %s%s; give more digits", m.prefix,
                  m.count, m.list.data ? m.list.data : "", m.count > 4 ? ", ..." : "");
        rc = MJ_EXIT_USAGE;
    } else {
        memcpy(key, m.first, 65);
    }
    mj_buf_free(&m.list);
    return rc;
}

static void subject_free(subject *s)
{
    moejit_spec_destroy(s->spec);
    free(s->canonical);
    free(s->reason);
    if (s->have_inputs) mj_build_inputs_free(&s->in);
    if (s->have_entry) mj_entry_free(&s->entry);
    free(s->compile_error);
    free(s->auto_why);
    free(s->modules);
}

static void check_support(subject *s)
{
    if (!s->spec) return;
    if (moejit_check_support(s->spec) == MOEJIT_OK) s->supported = 1;
    else s->reason = strdup(moejit_last_error());
}

/* Fills s from a KEY: the entry, and the spec it was built for. */
static int load_key(subject *s, mj_cache *cache, const char *arg)
{
    s->by_key = 1;
    for (int i = 0; i < 64; i++) s->key[i] = (char)tolower((unsigned char)arg[i]);
    moejit_status st = mj_cache_read(cache, s->key, &s->entry);
    if (st != MOEJIT_OK) {
        cli_error("inspect: no valid cache entry with key %s in %s (`moejit cache ls` lists the keys)", s->key,
                  mj_cache_get_config(cache)->dir);
        return MJ_EXIT_FAIL;
    }
    s->have_entry = 1;
    s->cached_before = 1;
    s->canonical = strdup(s->entry.canonical_spec);
    if (moejit_spec_parse(s->entry.canonical_spec, &s->spec) != MOEJIT_OK) {
        s->reason = strdup(moejit_last_error()); /* written by another moejit version */
        return MJ_EXIT_OK;
    }
    check_support(s);
    if (s->supported && mj_build_inputs_make(s->spec, &s->in) == MOEJIT_OK) s->have_inputs = 1;
    return MJ_EXIT_OK;
}

/* --module NAME of s's layer into s->module; MJ_EXIT_OK or the usage error. */
static int pick_module(subject *s, const char *name)
{
    s->module = MJ_LAYER_WHOLE;
    if (!name) return MJ_EXIT_OK;
    const int n = mj_layer_module_count(s->spec);
    s->module = mj_layer_module_find(s->spec, name);
    if (s->module >= 0) return MJ_EXIT_OK;
    mj_buf names = MJ_BUF_INIT;
    for (int m = 0; m < n; m++) mj_buf_printf(&names, "%s%s", m ? ", " : "", mj_layer_module_name(m));
    if (n) cli_error("inspect: --module: the %s layer has no module '%s'; allowed: %s",
                     mj_backend_names[s->spec->backend], name, names.data);
    else cli_error("inspect: --module: a %s layer is one module; drop --module", mj_backend_names[s->spec->backend]);
    mj_buf_free(&names);
    return MJ_EXIT_USAGE;
}

/* For a tensor-core layer's whole source: one line per module, its key and whether the cache holds it. */
static void list_modules(subject *s, mj_cache *cache)
{
    const int n = mj_layer_module_count(s->spec);
    if (!n || s->module != MJ_LAYER_WHOLE) return;
    cli_plan_item it = {.spec = s->spec, .canonical = s->canonical};
    mj_buf b = MJ_BUF_INIT;
    for (int m = 0; m < n; m++) {
        char key[65] = "?";
        (void)cli_plan_module_key(&it, m, key);
        mj_buf_printf(&b, "  %-20s %s  %s\n", mj_layer_module_name(m), key,
                      !cache ? "" : cli_plan_module_present(cache, &it, m) ? "cached" : "not cached");
    }
    s->modules = mj_buf_take(&b);
}

/* Fills s from a SPEC; compiles when asked to and it is not cached. */
static int load_spec(subject *s, mj_cache *cache, const char *arg, const char *module, int compile, double timeout_s)
{
    moejit_status st = cli_spec_parse(arg, &s->spec);
    if (st != MOEJIT_OK) {
        cli_error("inspect: %s", moejit_last_error());
        return MJ_EXIT_USAGE;
    }
    int rc = pick_module(s, module);
    if (rc != MJ_EXIT_OK) return rc;
    s->canonical = strdup(moejit_spec_canonical(s->spec));
    if (s->spec->backend_auto) {
        mj_buf why = MJ_BUF_INIT;
        (void)mj_backend_auto_explain(s->spec, &why);
        s->auto_why = mj_buf_take(&why);
    }
    check_support(s);
    if (!s->supported) return MJ_EXIT_OK;
    st = mj_build_inputs_make_module(s->spec, s->module, mj_embedded_headers, mj_embedded_headers_len, &s->in);
    if (st != MOEJIT_OK) return cli_fail(st, "inspect");
    s->have_inputs = 1;
    memcpy(s->key, s->in.key.hex, sizeof s->key);
    list_modules(s, cache);
    if (!cache) return MJ_EXIT_OK;
    mj_program prog;
    int found = 0;
    st = mj_cache_lookup(cache, s->key, s->canonical, &prog, &found);
    mj_program_free(&prog);
    s->cached_before = st == MOEJIT_OK && found;
    if (!s->cached_before && compile) {
        int hit = 0;
        st = cli_compile_cached(cache, &s->in, s->canonical, timeout_s, &prog, &hit);
        if (st != MOEJIT_OK) {
            s->compile_error = strdup(moejit_last_error());
            return MJ_EXIT_OK;
        }
        s->compiled_now = !hit;
        /* Read-only or unwritable caches keep nothing: show the program itself. */
        if (mj_cache_read(cache, s->key, &s->entry) == MOEJIT_OK) s->have_entry = s->published = 1;
        else if (mj_entry_from_program(&prog, s->key, s->in.preimage.data, &s->entry) == MOEJIT_OK) s->have_entry = 1;
        mj_program_free(&prog);
    } else if (s->cached_before && mj_cache_read(cache, s->key, &s->entry) == MOEJIT_OK) {
        s->have_entry = 1;
    }
    return MJ_EXIT_OK;
}

static const char *preimage_of(const subject *s)
{
    if (s->have_entry && s->entry.preimage) return s->entry.preimage;
    if (s->have_inputs) return s->in.preimage.data;
    return NULL;
}

/* ---- the report ------------------------------------------------------------------------------ */

static void time_text(int64_t unix_s, char *out, size_t cap)
{
    time_t t = (time_t)unix_s;
    struct tm tm;
    if (!gmtime_r(&t, &tm) || !strftime(out, cap, "%Y-%m-%d %H:%M:%S UTC", &tm)) snprintf(out, cap, "?");
}

static void report_text(const subject *s, int with_preimage)
{
    printf("spec:      %s\n", s->canonical);
    if (s->auto_why) printf("backend:   %s (backend=auto: %s)\n", mj_backend_names[s->spec->backend], s->auto_why);
    if (s->module != MJ_LAYER_WHOLE) printf("module:    %s\n", mj_layer_module_name(s->module));
    if (s->key[0]) printf("key:       %s\n", s->key);
    printf("support:   %s%s\n", s->supported ? "supported" : "unsupported: ", s->supported ? "" : s->reason);
    if (!s->supported && !s->by_key) return;
    char when[64];
    if (s->cached_before) {
        time_text(s->entry.created_unix, when, sizeof when);
        printf("cached:    yes (compiled %s in %.3f s)\n", s->have_entry ? when : "?",
               s->have_entry ? s->entry.compile_seconds : 0.0);
    } else if (s->compile_error) {
        printf("cached:    no\ncompile:   failed: %s\n", s->compile_error);
    } else if (s->compiled_now) {
        printf("cached:    no; compiled now in %.3f s%s\n", s->have_entry ? s->entry.compile_seconds : 0.0,
               s->published ? " and published" : "; not published (the cache is read-only or could not be written)");
    } else if (s->have_entry) {
        printf("cached:    no; another process published it meanwhile\n");
    } else {
        printf("cached:    no (--no-compile)\n");
    }
    if (s->modules) printf("modules:   each compiled and cached on its own, as forwards need them\n%s", s->modules);
    mj_buf remote = MJ_BUF_INIT;
    if (cli_remote_state_if_set(&remote)) printf("remote:    %s\n", remote.data ? remote.data : "");
    mj_buf_free(&remote);
    if (s->have_entry) {
        printf("arch:      %s (NVRTC %d.%d), cubin %zu bytes\n", s->entry.arch, s->entry.nvrtc_major,
               s->entry.nvrtc_minor, s->entry.cubin_len);
        printf("kernels:\n  %-22s %5s %10s %7s %12s\n", "name", "regs", "smem(B)", "stack", "spills(S/L)");
        for (int i = 0; i < s->entry.n_kernels; i++) {
            const mj_kernel_info *k = &s->entry.kernels[i];
            printf("  %-22s %5d %10d %7d %6d/%-5d\n", k->name, k->registers, k->shared_bytes, k->stack_bytes,
                   k->spill_store_bytes, k->spill_load_bytes);
        }
    }
    const char *pre = preimage_of(s);
    if (with_preimage && pre) {
        printf("preimage:\n");
        for (const char *p = pre; *p;) {
            const char *nl = strchr(p, '\n');
            int len = nl ? (int)(nl - p) : (int)strlen(p);
            printf("  %.*s\n", len, p);
            if (!nl) break;
            p = nl + 1;
        }
    }
}

static cJSON *json_head(const subject *s, const char *view)
{
    cJSON *doc = cJSON_CreateObject();
    cli_json_add(doc, "view", cli_json_str(view));
    cli_json_add(doc, "spec", cli_json_str(s->canonical));
    if (s->module != MJ_LAYER_WHOLE) cli_json_add(doc, "module", cli_json_str(mj_layer_module_name(s->module)));
    if (s->key[0]) cli_json_add(doc, "key", cli_json_str(s->key));
    return doc;
}

static int report_json(const subject *s)
{
    cJSON *doc = json_head(s, "report");
    if (s->auto_why) cli_json_add(doc, "backend_auto", cli_json_str(s->auto_why));
    cli_json_add(doc, "supported", cJSON_CreateBool(s->supported));
    if (s->reason) cli_json_add(doc, "unsupported_reason", cli_json_str(s->reason));
    cli_json_add(doc, "cached", cJSON_CreateBool(s->cached_before));
    cli_json_add(doc, "compiled_now", cJSON_CreateBool(s->compiled_now));
    mj_buf remote = MJ_BUF_INIT;
    if (cli_remote_state_if_set(&remote)) cli_json_add(doc, "remote", cli_json_str(remote.data ? remote.data : ""));
    mj_buf_free(&remote);
    if (s->compile_error) cli_json_add(doc, "error", cli_json_str(s->compile_error));
    if (s->have_entry) {
        char nvrtc[32];
        snprintf(nvrtc, sizeof nvrtc, "%d.%d", s->entry.nvrtc_major, s->entry.nvrtc_minor);
        cli_json_add(doc, "arch", cli_json_str(s->entry.arch));
        cli_json_add(doc, "nvrtc", cli_json_str(nvrtc));
        cli_json_add(doc, "compile_seconds", cli_json_fixed(s->entry.compile_seconds, 3));
        cli_json_add(doc, "created", cli_json_int(s->entry.created_unix));
        cli_json_add(doc, "cubin_bytes", cli_json_int((long long)s->entry.cubin_len));
        cJSON *list = cli_json_add(doc, "kernels", cJSON_CreateArray());
        for (int i = 0; i < s->entry.n_kernels; i++) {
            const mj_kernel_info *k = &s->entry.kernels[i];
            cJSON *o = cli_json_add(list, NULL, cJSON_CreateObject());
            cli_json_add(o, "name", cli_json_str(k->name));
            cli_json_add(o, "registers", cli_json_int(k->registers));
            cli_json_add(o, "shared_bytes", cli_json_int(k->shared_bytes));
            cli_json_add(o, "stack_bytes", cli_json_int(k->stack_bytes));
            cli_json_add(o, "spill_store_bytes", cli_json_int(k->spill_store_bytes));
            cli_json_add(o, "spill_load_bytes", cli_json_int(k->spill_load_bytes));
        }
    }
    const char *pre = preimage_of(s);
    if (pre) cli_json_add(doc, "preimage", cli_json_str(pre));
    return cli_json_print(doc);
}

/* A view's text: raw on stdout, or as {"view":..., "<view>": text} with --json. */
static int emit_text(const subject *s, int json, const char *view, const char *text, const char *extra_key,
                     const char *extra)
{
    if (!json) {
        fputs(text, stdout);
        if (*text && text[strlen(text) - 1] != '\n') fputc('\n', stdout);
        return MJ_EXIT_OK;
    }
    cJSON *doc = json_head(s, view);
    if (extra_key) cli_json_add(doc, extra_key, cli_json_str(extra));
    cli_json_add(doc, view, cli_json_str(text));
    return cli_json_print(doc);
}

static int need_supported(const subject *s, const char *view)
{
    if (s->supported && s->have_inputs) return 1;
    cli_error("inspect --%s: %s", view, s->reason ? s->reason : "the spec cannot be generated by this moejit");
    return 0;
}

static int need_entry(const subject *s, const char *view)
{
    if (s->have_entry) return 1;
    if (s->compile_error) cli_error("inspect --%s: the compile failed: %s", view, s->compile_error);
    else if (s->supported) cli_error("inspect --%s: not cached (compile it, or drop --no-compile)", view);
    else cli_error("inspect --%s: %s", view, s->reason ? s->reason : "unsupported");
    return 0;
}

static int show(subject *s, enum view v, int json, int with_preimage)
{
    const char *name = view_names[v];
    switch (v) {
    case VIEW_REPORT:
        if (json) {
            int rc = report_json(s);
            if (rc != MJ_EXIT_OK) return rc;
        } else {
            report_text(s, with_preimage);
        }
        if (!s->supported && !s->by_key) return MJ_EXIT_USAGE;
        return s->compile_error ? MJ_EXIT_FAIL : MJ_EXIT_OK;
    case VIEW_SOURCE:
        if (!need_supported(s, name)) return s->by_key ? MJ_EXIT_FAIL : MJ_EXIT_USAGE;
        if (s->by_key && strcmp(s->in.key.hex, s->key) != 0)
            fprintf(stderr, "moejit: note: this moejit generates key %s for the entry's spec; the entry was "
                            "built from other inputs (see --why)\n", s->in.key.hex);
        return emit_text(s, json, name, s->in.source.text, NULL, NULL);
    case VIEW_PREIMAGE: {
        const char *pre = preimage_of(s);
        if (!pre) return need_supported(s, name) ? MJ_EXIT_FAIL : MJ_EXIT_USAGE;
        return emit_text(s, json, name, pre, NULL, NULL);
    }
    case VIEW_LOG:
        if (!need_entry(s, name)) return MJ_EXIT_FAIL;
        return emit_text(s, json, name, s->entry.log ? s->entry.log : "", NULL, NULL);
    case VIEW_PTX: {
        if (!need_supported(s, name)) return s->by_key ? MJ_EXIT_FAIL : MJ_EXIT_USAGE;
        mj_buf ptx = MJ_BUF_INIT;
        moejit_status st = inspect_ptx(&s->in, &ptx);
        int rc = st == MOEJIT_OK ? emit_text(s, json, name, ptx.data ? ptx.data : "", NULL, NULL)
                                 : cli_fail(st, "inspect");
        mj_buf_free(&ptx);
        return rc == MJ_EXIT_USAGE ? MJ_EXIT_FAIL : rc;
    }
    case VIEW_SASS: {
        if (!need_entry(s, name)) return MJ_EXIT_FAIL;
        mj_buf sass = MJ_BUF_INIT;
        const char *tool = "";
        moejit_status st = inspect_sass(s->entry.cubin, s->entry.cubin_len, &sass, &tool);
        int rc = MJ_EXIT_FAIL;
        if (st == MOEJIT_OK) rc = emit_text(s, json, name, sass.data ? sass.data : "", "tool", tool);
        else cli_error("%s", moejit_last_error());
        mj_buf_free(&sass);
        return rc;
    }
    }
    return MJ_EXIT_FAIL;
}

/* Writes path (creating its folders under dir) with len bytes of data. */
static int write_under(const char *dir, const char *name, const char *data, size_t len, int mode)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) return -1;
    for (char *p = path + strlen(dir) + 1; (p = strchr(p, '/')); p++) {
        *p = '\0';
        int ok = mkdir(path, 0755) == 0 || errno == EEXIST;
        *p = '/';
        if (!ok) return -1;
    }
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int ok = fwrite(data, 1, len, f) == len;
    ok = fclose(f) == 0 && ok;
    return ok && chmod(path, (mode_t)mode) == 0 ? 0 : -1;
}

/* --bundle DIR: the translation unit, the headers of its include closure and how to compile it. */
static int write_bundle(const subject *s, const char *dir)
{
    if (!need_supported(s, "bundle")) return MJ_EXIT_USAGE;
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        cli_error("inspect --bundle: cannot create %s: %s", dir, strerror(errno));
        return MJ_EXIT_FAIL;
    }
    const mj_build_inputs *in = &s->in;
    int bad = write_under(dir, in->source.name, in->source.text, in->source.len, 0644);
    for (size_t i = 0; i < in->n_headers && !bad; i++)
        bad = write_under(dir, in->headers[i].name, in->headers[i].data, in->headers[i].size, 0644);
    mj_buf sh = MJ_BUF_INIT, opts = MJ_BUF_INIT;
    mj_buf_printf(&sh, "#!/bin/sh\n# %s\n# key %s\n# The options moejit hands NVRTC (options.txt), through nvcc; "
                       "--no-cache is NVRTC's own and is left out.\ncd \"$(dirname \"$0\")\" || exit 1\nexec nvcc -cubin -I.",
                  s->canonical, s->key);
    for (int i = 0; i < in->n_options; i++) {
        mj_buf_printf(&opts, "%s\n", in->options[i]);
        if (strcmp(in->options[i], "--no-cache") != 0) mj_buf_printf(&sh, " '%s'", in->options[i]);
    }
    mj_buf_printf(&sh, " -o %.*s.cubin %s \"$@\"\n", (int)(strlen(in->source.name) - 3), in->source.name,
                  in->source.name);
    if (!bad) bad = write_under(dir, "compile.sh", sh.data, sh.len, 0755);
    if (!bad) bad = write_under(dir, "options.txt", opts.data ? opts.data : "", opts.len, 0644);
    mj_buf_free(&sh);
    mj_buf_free(&opts);
    if (bad) {
        cli_error("inspect --bundle: cannot write into %s: %s", dir, strerror(errno));
        return MJ_EXIT_FAIL;
    }
    printf("%s: %s, %zu headers, compile.sh, options.txt\n", dir, in->source.name, in->n_headers);
    return MJ_EXIT_OK;
}

int cmd_inspect(int argc, char **argv)
{
    static const struct option long_options[] = {
        {"source", no_argument, NULL, 's'},    {"ptx", no_argument, NULL, 'P'},
        {"sass", no_argument, NULL, 'S'},      {"log", no_argument, NULL, 'L'},
        {"preimage", no_argument, NULL, 'I'},  {"why", required_argument, NULL, 'w'},
        {"json", no_argument, NULL, 'j'},      {"no-compile", no_argument, NULL, 'n'},
        {"cache-dir", required_argument, NULL, 'C'}, {"help", no_argument, NULL, 'h'},
        {"bundle", required_argument, NULL, 'B'}, {"module", required_argument, NULL, 'M'},
        {NULL, 0, NULL, 0}};
    int json = 0, compile = 1, c, n_views = 0;
    enum view v = VIEW_REPORT;
    const char *why = NULL, *bundle = NULL, *module = NULL;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", long_options, NULL)) != -1) {
        switch (c) {
        case 's': v = VIEW_SOURCE, n_views++; break;
        case 'P': v = VIEW_PTX, n_views++; break;
        case 'S': v = VIEW_SASS, n_views++; break;
        case 'L': v = VIEW_LOG, n_views++; break;
        case 'I': v = VIEW_PREIMAGE, n_views++; break;
        case 'w': why = optarg; break;
        case 'B': bundle = optarg; break;
        case 'M': module = optarg; break;
        case 'j': json = 1; break;
        case 'n': compile = 0; break;
        case 'C': cli_set_cache_dir(optarg); break;
        case 'h': fputs(inspect_usage, stdout); return MJ_EXIT_OK;
        default: return cli_bad_option("inspect", c, argv);
        }
    }
    if (bundle && (n_views || why || json)) {
        cli_error("inspect: --bundle DIR takes no view, --why or --json");
        return MJ_EXIT_USAGE;
    }
    if (n_views > 1) {
        cli_error("inspect: give one of --source, --ptx, --sass, --log, --preimage");
        return MJ_EXIT_USAGE;
    }
    if (why) {
        if (optind != argc || n_views) {
            cli_error("inspect: --why SPEC takes no other SPEC, KEY or view (see moejit inspect --help)");
            return MJ_EXIT_USAGE;
        }
        return inspect_why(why, json);
    }
    if (optind != argc - 1) {
        cli_error("inspect: expected one SPEC or KEY argument (see moejit inspect --help)");
        return MJ_EXIT_USAGE;
    }
    const char *arg = argv[optind];
    /* the compile timeout and worker come from the one settings table, as a context's do */
    mj_settings *set = malloc(sizeof *set);
    if (!set) return cli_fail(MOEJIT_ERR_OUT_OF_MEMORY, "inspect");
    int rc = cli_resolve_settings("inspect", set);
    const double timeout_s = set->compile_timeout_s;
    free(set);
    if (rc != MJ_EXIT_OK) return rc;
    subject s;
    memset(&s, 0, sizeof s);
    s.module = MJ_LAYER_WHOLE;
    mj_cache *cache = NULL;
    const int by_key = is_key(arg) || is_key_prefix(arg);
    if (!by_key && (v == VIEW_SOURCE || bundle)) {
        rc = load_spec(&s, NULL, arg, module, 0, timeout_s); /* the source needs no cache */
    } else {
        rc = cli_open_cache(&cache);
        char key[65];
        if (rc == MJ_EXIT_OK && is_key_prefix(arg)) rc = resolve_prefix(cache, arg, key), arg = key;
        if (rc == MJ_EXIT_OK)
            rc = by_key ? load_key(&s, cache, arg)
                        : load_spec(&s, cache, arg, module, compile && v != VIEW_PTX && v != VIEW_PREIMAGE, timeout_s);
    }
    if (rc == MJ_EXIT_OK) rc = bundle ? write_bundle(&s, bundle) : show(&s, v, json, 1);
    subject_free(&s);
    mj_cache_close(cache);
    return rc;
}
