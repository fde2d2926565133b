/*
 * cache_remote.h — `moejit cache push` and `moejit cache pull`: seeding a remote cache tier
 * (cache/remote.h) from the disk cache, and mirroring it into the disk cache, over the entries a
 * selection (cache export's --arch, --preset, --spec) picks; and the remote tier's state line that
 * `moejit config` and `moejit inspect` print.
 */
#ifndef MJ_TOOLS_CACHE_REMOTE_H
#define MJ_TOOLS_CACHE_REMOTE_H

#include "cache/cache.h"
#include "core/strbuf.h"

/* Pushes the selected entries of the disk cache to the configured remote (select NULL: all). */
int cli_cache_push(mj_cache *c, mj_cache_select_fn select, void *ctx, int json);
/* Fetches, verifies and adds the selected entries of the remote that the disk cache lacks. */
int cli_cache_pull(mj_cache *c, mj_cache_select_fn select, void *ctx, int json);
/* One line: whether the remote tier is on, off (and why), or refused (and why). */
void cli_remote_state(mj_buf *out);
/* The same, into out, only when MOEJIT_REMOTE is set (returns 1 then): inspect's line. */
int cli_remote_state_if_set(mj_buf *out);

#endif
