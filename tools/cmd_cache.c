/*
 * This file contains `moejit cache`: listing, counting, checking, trimming and emptying the
 * disk cache, packing selected entries into one checksummed file and unpacking it on
 * another machine (verified whole before anything is added), and the settings table.
 * Every subcommand has --json.
 */
#include <fnmatch.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tools/cache_remote.h"
#include "tools/cli.h"
#include "tools/json_out.h"
#include "tools/plan.h"
#include "core/spec.h"

#define MAX_ARCHS 16

static const char cache_usage[] =
    "usage: moejit cache <subcommand> [options]\n"
    "\n"
    "Subcommands:\n"
    "  ls [SELECT]              every entry: key, arch, size, last use, spec\n"
    "  stats [--reset]          hits, misses, compiles, compile time, quarantined, size\n"
    "  verify                   re-check every entry's checksum and key; bad ones are\n"
    "                           quarantined (exit 1 when any was bad)\n"
    "  gc [--max-size SIZE] [--max-age AGE]\n"
    "                           trim to SIZE (default: the configured limit), least recently\n"
    "                           used first, and drop entries unused for longer than AGE\n"
    "  clear                    remove every entry\n"
    "  export FILE [SELECT] [--key KEYFILE]\n"
    "                           write the selected entries to one checksummed pack, signed\n"
    "                           (HMAC-SHA256) under KEYFILE when given\n"
    "  import FILE [--key KEYFILE] [--trust-unsigned]\n"
    "                           verify a pack whole (checksum, signature under KEYFILE, every\n"
    "                           record's key, preimage and spec), then add its entries; a bad\n"
    "                           pack is refused and nothing is added. Unsigned packs, or signed\n"
    "                           ones with no key to check, only with --trust-unsigned\n"
    "  push [SELECT]            push the selected entries to the remote cache (MOEJIT_REMOTE),\n"
    "                           signed under MOEJIT_REMOTE_KEY_FILE, to seed it\n"
    "  pull [SELECT]            fetch the selected entries the disk cache lacks from the remote,\n"
    "                           each verified as a lookup verifies it (exit 1 when any is refused)\n"
    "  config                   the settings, their values and where each came from\n"
    "\n"
    "SELECT (ls, export, push, pull; each option may be repeated, values comma-separated; an\n"
    "entry must match every kind of filter given):\n"
    "  --arch A[,B]         entries compiled for these archs\n"
    "  --preset NAME[,...]  entries of these presets' specs (any arch; see moejit warm --help)\n"
    "  --spec PATTERN       canonical spec contains PATTERN, or matches it as a glob when it\n"
    "                       has * ? or [ (e.g. '*quant=bf16*act=relu2*')\n"
    "\n"
    "Options:\n"
    "  --json             one JSON document on stdout\n"
    "  --cache-dir DIR    the cache (default: $MOEJIT_CACHE_DIR, then $XDG_CACHE_HOME/moejit,\n"
    "                     then ~/.cache/moejit)\n"
    "  --key KEYFILE      the pack key (default: $MOEJIT_PACK_KEY_FILE): 16 to 1024 bytes,\n"
    "                     a file only you can read (head -c 32 /dev/urandom > F; chmod 600 F)\n"
    "  SIZE: 4G, 512M, 100000 (bytes; K, M, G, T are powers of 1024).  AGE: 30d, 12h, 90m, 45s.\n"
    "\n"
    "Examples:\n"
    "  moejit cache ls --arch sm_90a\n"
    "  moejit cache stats --json\n"
    "  moejit cache gc --max-size 2G --max-age 30d\n"
    "  moejit cache export --preset qwen3-30b-a3b --arch sm_90a qwen3-h200.mjkpack\n"
    "  moejit cache import qwen3-h200.mjkpack --cache-dir /srv/moejit-cache\n"
    "\n"
    "Exit status: 0 success, 1 the operation failed (a bad entry found by verify, a corrupt\n"
    "pack, nothing selected for export), 2 bad usage.\n";

enum {
    OPT_JSON = 1 << 0, OPT_SELECT = 1 << 1, OPT_RESET = 1 << 2, OPT_GC = 1 << 3, OPT_KEY = 1 << 4,
    OPT_TRUST = 1 << 5
};

static const struct subcommand {
    const char *name;
    int options;  /* OPT_* it accepts (--json and --cache-dir: all) */
    int n_args;   /* positional arguments */
} subcommands[] = {
    {"ls", OPT_SELECT, 0},  {"stats", OPT_RESET, 0}, {"verify", 0, 0},     {"gc", OPT_GC, 0},
    {"clear", 0, 0},        {"export", OPT_SELECT | OPT_KEY, 1}, {"import", OPT_KEY | OPT_TRUST, 1},  {"config", 0, 0},
    {"push", OPT_SELECT, 0},  {"pull", OPT_SELECT, 0},
};

typedef struct cache_args {
    const struct subcommand *sub;
    int json, reset;
    const char *archs[MAX_ARCHS];
    int n_archs;
    cli_strv specs;         /* --spec patterns */
    cli_plan presets;       /* --preset specs, expanded over every arch */
    int have_presets;
    int64_t max_size, max_age;
    const char *file;
    const char *key_file;   /* --key */
    int trust_unsigned;     /* --trust-unsigned */
} cache_args;

/* Loads the pack key from --key, else MOEJIT_PACK_KEY_FILE; *have = 0 when neither is set. */
static int load_pack_key(const cache_args *a, const char *cmd, mj_sign_key *key, int *have)
{
    const char *env = getenv("MOEJIT_PACK_KEY_FILE");
    const char *path = a->key_file ? a->key_file : env && *env ? env : NULL;
    *have = 0;
    if (!path) return MJ_EXIT_OK;
    moejit_status st = mj_sign_key_load(a->key_file ? "--key" : "MOEJIT_PACK_KEY_FILE", path, key);
    if (st != MOEJIT_OK) return cli_fail(st, cmd);
    *have = 1;
    return MJ_EXIT_OK;
}

/* ---- selection ------------------------------------------------------------------------------ */

static int selected(const cache_args *a, const mj_cache_entry_info *info)
{
    if (a->n_archs) {
        int ok = 0;
        for (int i = 0; i < a->n_archs; i++) ok |= info->arch && strcmp(info->arch, a->archs[i]) == 0;
        if (!ok) return 0;
    }
    if (a->specs.n) {
        int ok = 0;
        for (int i = 0; i < a->specs.n && !ok; i++) {
            const char *p = a->specs.v[i];
            ok = strpbrk(p, "*?[") ? fnmatch(p, info->canonical_spec, 0) == 0 : strstr(info->canonical_spec, p) != NULL;
        }
        if (!ok) return 0;
    }
    if (a->have_presets) {
        int ok = 0;
        for (int i = 0; i < a->presets.n && !ok; i++) ok = strcmp(a->presets.items[i].canonical, info->canonical_spec) == 0;
        if (!ok) return 0;
    }
    return 1;
}

static int select_fn(void *ctx, const mj_cache_entry_info *info) { return selected(ctx, info); }

/* ---- ls -------------------------------------------------------------------------------------- */

typedef struct ls_ctx {
    const cache_args *a;
    int n;
    int64_t bytes;
    cJSON *entries;   /* with --json: the listed entries */
} ls_ctx;

static void time_text(int64_t unix_s, char *out, size_t cap)
{
    time_t t = (time_t)unix_s;
    struct tm tm;
    if (!localtime_r(&t, &tm) || !strftime(out, cap, "%Y-%m-%d %H:%M", &tm)) snprintf(out, cap, "?");
}

static void size_text(int64_t bytes, char *out, size_t cap)
{
    if (bytes >= (1LL << 30)) snprintf(out, cap, "%.1f GiB", (double)bytes / (1 << 30));
    else if (bytes >= (1LL << 20)) snprintf(out, cap, "%.1f MiB", (double)bytes / (1 << 20));
    else if (bytes >= 1024) snprintf(out, cap, "%.1f KiB", (double)bytes / 1024);
    else snprintf(out, cap, "%lld B", (long long)bytes);
}

static int ls_one(void *vctx, const mj_cache_entry_info *info)
{
    ls_ctx *x = vctx;
    if (!selected(x->a, info)) return 0;
    if (x->a->json) {
        cJSON *e = cli_json_add(x->entries, NULL, cJSON_CreateObject());
        cli_json_add(e, "key", cli_json_str(info->key));
        cli_json_add(e, "arch", cli_json_str(info->arch ? info->arch : ""));
        cli_json_add(e, "size", cli_json_int(info->size));
        cli_json_add(e, "last_use", cli_json_int(info->last_use));
        cli_json_add(e, "created", cli_json_int(info->created));
        cli_json_add(e, "compile_seconds", cli_json_fixed(info->compile_seconds, 3));
        cli_json_add(e, "kernels", cli_json_int(info->n_kernels));
        cli_json_add(e, "spec", cli_json_str(info->canonical_spec));
    } else {
        char when[32], size[32];
        time_text(info->last_use, when, sizeof when);
        size_text(info->size, size, sizeof size);
        printf("%s  %-7s  %9s  %s  %s\n", info->key, info->arch ? info->arch : "?", size, when, info->canonical_spec);
    }
    x->n++;
    x->bytes += info->size;
    return 0;
}

static int do_ls(mj_cache *c, const cache_args *a)
{
    ls_ctx x = {a, 0, 0, NULL};
    const char *dir = mj_cache_get_config(c)->dir;
    cJSON *doc = NULL;
    if (a->json) {
        doc = cJSON_CreateObject();
        cli_json_add(doc, "cache_dir", cli_json_str(dir));
        x.entries = cli_json_add(doc, "entries", cJSON_CreateArray());
    } else {
        printf("%-64s  %-7s  %9s  %-16s  %s\n", "key", "arch", "size", "last use", "spec");
    }
    moejit_status st = mj_cache_list(c, ls_one, &x);
    int rc = MJ_EXIT_OK;
    if (a->json) {
        cli_json_add(doc, "count", cli_json_int(x.n));
        cli_json_add(doc, "bytes", cli_json_int(x.bytes));
        rc = cli_json_print(doc);
    } else {
        char size[32];
        size_text(x.bytes, size, sizeof size);
        printf("%d entr%s, %s, in %s\n", x.n, x.n == 1 ? "y" : "ies", size, dir);
    }
    return st == MOEJIT_OK ? rc : cli_fail(st, "cache ls");
}

/* ---- stats, verify, gc, clear ----------------------------------------------------------------- */

static int do_stats(mj_cache *c, const cache_args *a)
{
    mj_cache_stats s;
    moejit_status st = a->reset ? mj_cache_stats_reset(c) : MOEJIT_OK;
    if (st == MOEJIT_OK) st = mj_cache_stats_get(c, &s);
    if (st != MOEJIT_OK) return cli_fail(st, "cache stats");
    const mj_cache_config *cfg = mj_cache_get_config(c);
    if (a->json) {
        cJSON *doc = cJSON_CreateObject();
        cli_json_add(doc, "cache_dir", cli_json_str(cfg->dir));
        cli_json_add(doc, "max_bytes", cli_json_int(cfg->max_bytes));
        for (int i = 0; i < MJ_STAT_COUNT; i++)
            cli_json_add(doc, mj_cache_stat_fields[i].name, cli_json_int(s.v[mj_cache_stat_fields[i].id]));
        return cli_json_print(doc);
    }
    char lim[32], used[32];
    size_text(cfg->max_bytes, lim, sizeof lim);
    size_text(s.v[MJ_STAT_BYTES], used, sizeof used);
    printf("%-28s %s\n", "Cache directory", cfg->dir);
    printf("%-28s %s of %s\n", "Size", used, lim);
    for (int i = 0; i < MJ_STAT_COUNT; i++) {
        const mj_cache_stat_field *f = &mj_cache_stat_fields[i];
        if (f->id == MJ_STAT_BYTES) continue;
        if (f->id == MJ_STAT_COMPILE_US)
            printf("%-28s %.3f s\n", "Compile time", (double)s.v[f->id] / 1e6);
        else
            printf("%-28s %lld\n", f->label, (long long)s.v[f->id]);
    }
    if (a->reset) printf("(counters reset)\n");
    return MJ_EXIT_OK;
}

static int do_verify(mj_cache *c, const cache_args *a)
{
    mj_cache_verify_result r;
    moejit_status st = mj_cache_verify(c, &r);
    if (st != MOEJIT_OK) return cli_fail(st, "cache verify");
    if (a->json) {
        cJSON *doc = cJSON_CreateObject();
        cli_json_add(doc, "checked", cli_json_int(r.checked));
        cli_json_add(doc, "ok", cli_json_int(r.ok));
        cli_json_add(doc, "bad", cli_json_int(r.bad));
        int rc = cli_json_print(doc);
        if (rc != MJ_EXIT_OK) return rc;
    } else
        printf("verify: %lld checked, %lld ok, %lld bad%s\n", (long long)r.checked, (long long)r.ok, (long long)r.bad,
               r.bad ? " (moved to quarantine/)" : "");
    return r.bad ? MJ_EXIT_FAIL : MJ_EXIT_OK;
}

static int do_gc(mj_cache *c, const cache_args *a)
{
    mj_cache_gc_result r;
    moejit_status st = mj_cache_gc(c, a->max_size, a->max_age, &r);
    if (st != MOEJIT_OK) return cli_fail(st, "cache gc");
    if (a->json) {
        cJSON *doc = cJSON_CreateObject();
        cli_json_add(doc, "removed", cli_json_int(r.removed));
        cli_json_add(doc, "removed_bytes", cli_json_int(r.removed_bytes));
        cli_json_add(doc, "kept", cli_json_int(r.kept));
        cli_json_add(doc, "kept_bytes", cli_json_int(r.kept_bytes));
        cli_json_add(doc, "temps_removed", cli_json_int(r.temps_removed));
        return cli_json_print(doc);
    } else {
        char rb[32], kb[32];
        size_text(r.removed_bytes, rb, sizeof rb);
        size_text(r.kept_bytes, kb, sizeof kb);
        printf("gc: removed %lld entr%s (%s), kept %lld (%s), %lld stale temp file%s\n", (long long)r.removed,
               r.removed == 1 ? "y" : "ies", rb, (long long)r.kept, kb, (long long)r.temps_removed,
               r.temps_removed == 1 ? "" : "s");
    }
    return MJ_EXIT_OK;
}

static int do_clear(mj_cache *c, const cache_args *a)
{
    int64_t removed = 0;
    moejit_status st = mj_cache_clear(c, &removed);
    if (st != MOEJIT_OK) return cli_fail(st, "cache clear");
    if (a->json) {
        cJSON *doc = cJSON_CreateObject();
        cli_json_add(doc, "removed", cli_json_int(removed));
        return cli_json_print(doc);
    }
    printf("clear: removed %lld entr%s\n", (long long)removed, removed == 1 ? "y" : "ies");
    return MJ_EXIT_OK;
}

/* ---- export, import -------------------------------------------------------------------------- */

static int count_one(void *ctx, const mj_cache_entry_info *info)
{
    void **x = ctx;
    if (selected(x[0], info)) ++*(int64_t *)x[1];
    return 0;
}

static int do_export(mj_cache *c, const cache_args *a)
{
    int64_t matching = 0, exported = 0;
    void *x[2] = {(void *)a, &matching};
    moejit_status st = mj_cache_list(c, count_one, x);
    if (st != MOEJIT_OK) return cli_fail(st, "cache export");
    if (matching == 0) {
        cli_error("cache export: no entry matches the selection; nothing written");
        return MJ_EXIT_FAIL;
    }
    static mj_sign_key key;
    int have_key = 0;
    int rc = load_pack_key(a, "cache export", &key, &have_key);
    if (rc != MJ_EXIT_OK) return rc;
    mj_pack_opts po = {have_key ? &key : NULL, 0};
    st = mj_cache_export(c, a->file, select_fn, (void *)a, &po, &exported);
    mj_sign_key_wipe(&key);
    if (st != MOEJIT_OK) return cli_fail(st, "cache export");
    if (!have_key)
        fprintf(stderr, "moejit: note: %s is not signed (no --key or MOEJIT_PACK_KEY_FILE); importing it "
                "needs --trust-unsigned\n", a->file);
    if (a->json) {
        cJSON *doc = cJSON_CreateObject();
        cli_json_add(doc, "file", cli_json_str(a->file));
        cli_json_add(doc, "exported", cli_json_int(exported));
        return cli_json_print(doc);
    } else {
        printf("export: %lld entr%s written to %s\n", (long long)exported, exported == 1 ? "y" : "ies", a->file);
    }
    return MJ_EXIT_OK;
}

static int do_import(mj_cache *c, const cache_args *a)
{
    int64_t added = 0, present = 0;
    static mj_sign_key key;
    int have_key = 0;
    int rc = load_pack_key(a, "cache import", &key, &have_key);
    if (rc != MJ_EXIT_OK) return rc;
    mj_pack_opts po = {have_key ? &key : NULL, a->trust_unsigned};
    moejit_status st = mj_cache_import(c, a->file, &po, &added, &present);
    mj_sign_key_wipe(&key);
    if (st != MOEJIT_OK) {
        /* A corrupt, truncated or unreadable pack: the operation failed (exit 1). */
        const char *msg = moejit_last_error();
        cli_error("%s%s%s", strncmp(msg, "cache import", 12) ? "cache import: " : "", msg,
                  strstr(msg, "nothing was added") ? "" : "; nothing was added");
        return MJ_EXIT_FAIL;
    }
    if (a->json) {
        cJSON *doc = cJSON_CreateObject();
        cli_json_add(doc, "file", cli_json_str(a->file));
        cli_json_add(doc, "added", cli_json_int(added));
        cli_json_add(doc, "present", cli_json_int(present));
        return cli_json_print(doc);
    } else {
        printf("import: %lld entr%s added, %lld already present, from %s\n", (long long)added,
               added == 1 ? "y" : "ies", (long long)present, a->file);
    }
    return MJ_EXIT_OK;
}

/* ---- config ---------------------------------------------------------------------------------- */

static int do_config(const cache_args *a)
{
    mj_cache_config cfg;
    moejit_status st = mj_cache_config_resolve_cli(NULL, cli_settings(), &cfg);
    if (st != MOEJIT_OK) return cli_fail(st, "cache config");
    cJSON *doc = a->json ? cJSON_CreateObject() : NULL;
    cJSON *list = a->json ? cli_json_add(doc, "settings", cJSON_CreateArray()) : NULL;
    for (int i = 0; i < MJ_SET_COUNT; i++) {
        const mj_cache_setting_info *s = &mj_cache_settings[i];
        mj_buf v = MJ_BUF_INIT;
        mj_cache_config_format(&cfg, (mj_cache_setting)i, &v);
        const char *value = v.data ? v.data : "";
        const char *origin = mj_cache_origin_name(cfg.origin[i]);
        if (a->json) {
            cJSON *o = cli_json_add(list, NULL, cJSON_CreateObject());
            cli_json_add(o, "key", cli_json_str(s->key));
            cli_json_add(o, "env", cli_json_str(s->env));
            cli_json_add(o, "value", cli_json_str(value));
            cli_json_add(o, "origin", cli_json_str(origin));
            cli_json_add(o, "type", cli_json_str(s->type));
            cli_json_add(o, "default", cli_json_str(s->default_text));
            cli_json_add(o, "allowed", cli_json_str(s->allowed));
            cli_json_add(o, "why", cli_json_str(s->why));
        } else {
            printf("%-16s = %-40s (%s, %s)\n    %s\n", s->key, value, origin, s->env, s->why);
        }
        mj_buf_free(&v);
    }
    return a->json ? cli_json_print(doc) : MJ_EXIT_OK;
}

/* ---- options --------------------------------------------------------------------------------- */

static int parse(int argc, char **argv, cache_args *a)
{
    static const struct option long_options[] = {
        {"json", no_argument, NULL, 'j'},          {"cache-dir", required_argument, NULL, 'C'},
        {"arch", required_argument, NULL, 'a'},    {"preset", required_argument, NULL, 'p'},
        {"spec", required_argument, NULL, 's'},    {"reset", no_argument, NULL, 'r'},
        {"max-size", required_argument, NULL, 'S'}, {"max-age", required_argument, NULL, 'A'},
        {"key", required_argument, NULL, 'K'},     {"trust-unsigned", no_argument, NULL, 'T'},
        {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0}};
    char cmd[32];
    snprintf(cmd, sizeof cmd, "cache %s", a->sub->name);
    int c, idx = -1;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", long_options, &idx)) != -1) {
        int need = c == 'a' || c == 'p' || c == 's' ? OPT_SELECT : c == 'r' ? OPT_RESET
                 : c == 'S' || c == 'A'              ? OPT_GC
                 : c == 'K'                          ? OPT_KEY
                 : c == 'T'                          ? OPT_TRUST
                                                     : 0;
        if (need && !(a->sub->options & need)) {
            cli_error("%s: option '--%s' does not apply (see moejit cache --help)", cmd,
                      idx >= 0 ? long_options[idx].name : "?");
            return MJ_EXIT_USAGE;
        }
        switch (c) {
        case 'j': a->json = 1; break;
        case 'C': cli_set_cache_dir(optarg); break;
        case 'a': {
            int n = cli_parse_archs("cache: --arch", optarg, a->archs + a->n_archs, MAX_ARCHS - a->n_archs);
            if (n < 0) return MJ_EXIT_USAGE;
            a->n_archs += n;
            break;
        }
        case 'p': {
            a->have_presets = 1;
            int rc = cli_plan_add_presets(&a->presets, cmd, optarg, (const char *const *)mj_arch_names, MJ_ARCH_COUNT);
            if (rc != MJ_EXIT_OK) return rc;
            break;
        }
        case 's':
            if (!cli_strv_push(&a->specs, optarg)) return MJ_EXIT_FAIL;
            break;
        case 'r': a->reset = 1; break;
        case 'K': a->key_file = optarg; break;
        case 'T': a->trust_unsigned = 1; break;
        case 'S':
            if (mj_cache_parse_size("--max-size", optarg, &a->max_size) != MOEJIT_OK)
                return cli_fail(MOEJIT_ERR_INVALID_ARGUMENT, cmd);
            break;
        case 'A':
            if (mj_cache_parse_age("--max-age", optarg, &a->max_age) != MOEJIT_OK)
                return cli_fail(MOEJIT_ERR_INVALID_ARGUMENT, cmd);
            break;
        case 'h': fputs(cache_usage, stdout); return -1;
        default: return cli_bad_option(cmd, c, argv);
        }
        idx = -1;
    }
    if (argc - optind != a->sub->n_args) {
        if (a->sub->n_args) cli_error("%s: expected one FILE argument (see moejit cache --help)", cmd);
        else cli_error("%s: unexpected argument '%s' (see moejit cache --help)", cmd, argv[optind]);
        return MJ_EXIT_USAGE;
    }
    if (a->sub->n_args) a->file = argv[optind];
    return MJ_EXIT_OK;
}

int cmd_cache(int argc, char **argv)
{
    if (argc < 2) {
        cli_error("cache: expected a subcommand: ls, stats, verify, gc, clear, export, import, push, pull, config "
                  "(see moejit cache --help)");
        return MJ_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        fputs(cache_usage, stdout);
        return MJ_EXIT_OK;
    }
    cache_args a;
    memset(&a, 0, sizeof a);
    for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
        if (!strcmp(argv[1], subcommands[i].name)) a.sub = &subcommands[i];
    if (!a.sub) {
        cli_error("cache: unknown subcommand '%s'; allowed: ls, stats, verify, gc, clear, export, import, push, pull, config",
                  argv[1]);
        return MJ_EXIT_USAGE;
    }
    int rc = parse(argc - 1, argv + 1, &a);
    mj_cache *c = NULL;
    if (rc == -1) rc = MJ_EXIT_OK; /* --help */
    else if (rc == MJ_EXIT_OK) {
        if (!strcmp(a.sub->name, "config")) rc = do_config(&a);
        else if ((rc = cli_open_cache(&c)) == MJ_EXIT_OK) {
            const char *n = a.sub->name;
            rc = !strcmp(n, "ls")       ? do_ls(c, &a)
               : !strcmp(n, "stats")    ? do_stats(c, &a)
               : !strcmp(n, "verify")   ? do_verify(c, &a)
               : !strcmp(n, "gc")       ? do_gc(c, &a)
               : !strcmp(n, "clear")    ? do_clear(c, &a)
               : !strcmp(n, "export")   ? do_export(c, &a)
               : !strcmp(n, "push")     ? cli_cache_push(c, select_fn, &a, a.json)
               : !strcmp(n, "pull")     ? cli_cache_pull(c, select_fn, &a, a.json)
                                        : do_import(c, &a);
        }
    }
    mj_cache_close(c);
    cli_strv_free(&a.specs);
    cli_plan_free(&a.presets);
    return rc;
}
