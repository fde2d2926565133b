/*
 * This file contains `moejit cache push` and `moejit cache pull` (see cache_remote.h): entries
 * are pushed signed under the fleet key exactly as a compile pushes them, and pulled with every
 * check a lookup makes (a refused entry is counted, reported and skipped, never stored).
 */
#include "tools/cache_remote.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/remote.h"
#include "core/status.h"
#include "tools/cli.h"
#include "tools/json_out.h"

/* The remote of the cache, or an error saying why there is none (exit 1). */
static mj_remote *require_remote(mj_cache *c, const char *cmd)
{
    mj_remote *r = mj_cache_get_remote(c);
    if (r) return r;
    mj_remote_config rc;
    mj_buf why = MJ_BUF_INIT;
    if (mj_remote_config_resolve(NULL, cli_settings(), &rc) == MOEJIT_OK) mj_remote_describe(&rc, &why);
    else mj_buf_puts(&why, moejit_last_error());
    cli_error("%s: no remote cache tier: %s", cmd, why.data ? why.data : "");
    mj_buf_free(&why);
    return NULL;
}

static void add_counts(mj_cache_stats *total, const mj_cache_stats *d)
{
    for (int i = 0; i < MJ_STAT_COUNT; i++) total->v[i] += d->v[i];
}

/* Persists the remote counters of a push or pull with the cache's others (`cache stats`). */
static void keep_counts(mj_cache *c, const mj_cache_stats *counts)
{
    const mj_cache_config *cfg = mj_cache_get_config(c);
    if (cfg->mode == MJ_CACHE_READ_WRITE || cfg->mode == MJ_CACHE_OFFLINE) mj_cache_stats_add(cfg, 0, counts);
}

/* ---- push ------------------------------------------------------------------------------------ */

typedef struct push_ctx {
    mj_remote *r;
    mj_cache_select_fn select;
    void *user;
    int64_t pushed, failed;
    mj_cache_stats counts;
    char first_error[512];
} push_ctx;

static int push_one(void *vctx, const mj_cache_entry_info *info)
{
    push_ctx *x = vctx;
    if (x->select && !x->select(x->user, info)) return 0;
    mj_buf enc = MJ_BUF_INIT;
    /* The same bytes the disk holds: the codec is deterministic. */
    moejit_status st = mj_entry_encode(info->entry, &enc);
    mj_cache_stats d = {{0}};
    if (st == MOEJIT_OK) st = mj_remote_push(x->r, info->key, (const uint8_t *)enc.data, enc.len, &d);
    mj_buf_free(&enc);
    add_counts(&x->counts, &d);
    if (st == MOEJIT_OK) {
        x->pushed++;
        return 0;
    }
    if (!x->failed++) snprintf(x->first_error, sizeof x->first_error, "%s", moejit_last_error());
    /* A remote in back-off skips every later entry at once: stop instead of listing them all. */
    return d.v[MJ_STAT_REMOTE_SKIPPED] > 0 || d.v[MJ_STAT_REMOTE_ERRORS] + d.v[MJ_STAT_REMOTE_TIMEOUTS] > 0;
}

int cli_cache_push(mj_cache *c, mj_cache_select_fn select, void *ctx, int json)
{
    mj_remote *r = require_remote(c, "cache push");
    if (!r) return MJ_EXIT_FAIL;
    if (!mj_remote_writable(r)) {
        cli_error("cache push: the remote %s is read-only (MOEJIT_REMOTE_MODE=read-only); nothing was pushed; "
                  "allowed: MOEJIT_REMOTE_MODE=read-write", mj_remote_get_config(r)->url);
        return MJ_EXIT_FAIL;
    }
    push_ctx x = {r, select, ctx, 0, 0, {{0}}, ""};
    moejit_status st = mj_cache_list(c, push_one, &x);
    keep_counts(c, &x.counts);
    if (st != MOEJIT_OK) return cli_fail(st, "cache push");
    if (json) {
        cJSON *doc = cJSON_CreateObject();
        cli_json_add(doc, "remote", cli_json_str(mj_remote_get_config(r)->url));
        cli_json_add(doc, "pushed", cli_json_int(x.pushed));
        cli_json_add(doc, "failed", cli_json_int(x.failed));
        if (x.failed) cli_json_add(doc, "error", cli_json_str(x.first_error));
        int rc = cli_json_print(doc);
        if (rc != MJ_EXIT_OK) return rc;
    } else {
        printf("push: %lld entr%s pushed to %s\n", (long long)x.pushed, x.pushed == 1 ? "y" : "ies",
               mj_remote_get_config(r)->url);
    }
    if (x.failed) {
        cli_error("cache push: %s", x.first_error);
        return MJ_EXIT_FAIL;
    }
    if (x.pushed == 0 && !json) fprintf(stderr, "moejit: note: no entry matched the selection\n");
    return MJ_EXIT_OK;
}

/* ---- pull ------------------------------------------------------------------------------------- */

typedef struct key_list {
    char (*keys)[65];
    size_t n, cap;
} key_list;

static int collect(void *vctx, const char *key)
{
    key_list *l = vctx;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 256;
        void *p = realloc(l->keys, cap * sizeof *l->keys);
        if (!p) return 1;
        l->keys = p;
        l->cap = cap;
    }
    memcpy(l->keys[l->n++], key, 65);
    return 0;
}

int cli_cache_pull(mj_cache *c, mj_cache_select_fn select, void *ctx, int json)
{
    mj_remote *r = require_remote(c, "cache pull");
    if (!r) return MJ_EXIT_FAIL;
    key_list l = {NULL, 0, 0};
    moejit_status st = mj_remote_list_keys(r, collect, &l);
    if (st != MOEJIT_OK) {
        free(l.keys);
        return cli_fail(st, "cache pull");
    }
    int64_t added = 0, present = 0, refused = 0, skipped = 0, failed = 0;
    mj_cache_stats counts = {{0}};
    char first_error[512] = "";
    for (size_t i = 0; i < l.n; i++) {
        mj_program p;
        int found = 0;
        /* Already on disk (valid): nothing to fetch. */
        if (mj_cache_lookup(c, l.keys[i], NULL, &p, &found) == MOEJIT_OK && found) {
            mj_program_free(&p);
            present++;
            continue;
        }
        mj_entry e;
        uint8_t *raw = NULL;
        size_t raw_len = 0;
        mj_cache_stats d = {{0}};
        if (!mj_remote_fetch(r, l.keys[i], NULL, &e, &raw, &raw_len, &d)) {
            add_counts(&counts, &d);
            int bad = 0;
            for (int s = MJ_STAT_REMOTE_REFUSED_SIGNATURE; s <= MJ_STAT_REMOTE_REFUSED_SPEC; s++) bad |= d.v[s] > 0;
            refused += bad;
            if (d.v[MJ_STAT_REMOTE_ERRORS] + d.v[MJ_STAT_REMOTE_TIMEOUTS] + d.v[MJ_STAT_REMOTE_SKIPPED]) {
                failed++;
                snprintf(first_error, sizeof first_error, "the remote failed during the pull (see the warning)");
                break;
            }
            continue;
        }
        add_counts(&counts, &d);
        free(raw);
        mj_cache_entry_info info = {.canonical_spec = e.canonical_spec, .arch = e.arch, .n_kernels = e.n_kernels,
                                    .size = (int64_t)raw_len, .created = e.created_unix,
                                    .compile_seconds = e.compile_seconds, .entry = &e};
        memcpy(info.key, l.keys[i], 65);
        if (select && !select(ctx, &info)) {
            skipped++;
        } else if ((st = mj_entry_to_program(&e, &p)) == MOEJIT_OK) {
            p.compile_seconds = e.compile_seconds;
            st = mj_cache_put(c, e.key, e.preimage, e.canonical_spec, &p);
            mj_program_free(&p);
            if (st == MOEJIT_OK) added++;
        }
        if (st != MOEJIT_OK) {
            if (!failed++) snprintf(first_error, sizeof first_error, "%s", moejit_last_error());
            st = MOEJIT_OK;
        }
        mj_entry_free(&e);
    }
    free(l.keys);
    keep_counts(c, &counts);
    const char *url = mj_remote_get_config(r)->url;
    if (json) {
        cJSON *doc = cJSON_CreateObject();
        cli_json_add(doc, "remote", cli_json_str(url));
        cli_json_add(doc, "added", cli_json_int(added));
        cli_json_add(doc, "present", cli_json_int(present));
        cli_json_add(doc, "not_selected", cli_json_int(skipped));
        cli_json_add(doc, "refused", cli_json_int(refused));
        cli_json_add(doc, "failed", cli_json_int(failed));
        int rc = cli_json_print(doc);
        if (rc != MJ_EXIT_OK) return rc;
    } else {
        printf("pull: %lld entr%s added, %lld already present, %lld not selected, %lld refused, from %s\n",
               (long long)added, added == 1 ? "y" : "ies", (long long)present, (long long)skipped,
               (long long)refused, url);
    }
    if (failed) {
        cli_error("cache pull: %s", first_error);
        return MJ_EXIT_FAIL;
    }
    return refused ? MJ_EXIT_FAIL : MJ_EXIT_OK;
}

void cli_remote_state(mj_buf *out)
{
    mj_remote_config rc;
    if (mj_remote_config_resolve(NULL, cli_settings(), &rc) != MOEJIT_OK) {
        mj_buf_printf(out, "refused: %s", moejit_last_error());
        return;
    }
    mj_remote_describe(&rc, out);
}

int cli_remote_state_if_set(mj_buf *out)
{
    mj_remote_config rc;
    if (mj_remote_config_resolve(NULL, cli_settings(), &rc) == MOEJIT_OK && !rc.url[0]) return 0;
    mj_clear_error();
    cli_remote_state(out);
    return 1;
}
