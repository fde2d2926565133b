/*
 * publish.h — writing a file so that readers see either nothing or all of it (ccache's
 * AtomicFile): a unique temp file in the target's directory, write, fsync, rename over the
 * target, fsync of the directory. Nothing is visible before the rename (the commit), and a
 * failure at any step removes the temp file.
 *
 * A writer that dies between write and rename leaves its temp file behind; temp names start
 * with ".tmp." so that readers never mistake them for entries, and mj_cache_clean_temps
 * removes those older than MJ_STALE_TEMP_SECONDS.
 */
#ifndef MJ_CACHE_PUBLISH_H
#define MJ_CACHE_PUBLISH_H

#include <stddef.h>

#include "moejit.h"

#define MJ_TEMP_PREFIX ".tmp."
/* A temp file this old belongs to a writer that crashed: a live writer takes milliseconds
 * between creating and renaming it, so ten minutes leaves room for a stalled disk. */
#define MJ_STALE_TEMP_SECONDS 600

typedef struct mj_publish_opts {
    int file_mode;   /* 0600 or 0660 */
    int durable;     /* 1: fsync file and directory (entries); 0: skip (stats counters) */
} mj_publish_opts;

/* Publishes data as dir/name. On failure returns MOEJIT_ERR_IO ("cannot write <path>: No
 * space left on device"), sets *err (optional) to the errno, and leaves no file behind. */
moejit_status mj_cache_publish(const char *dir, const char *name, const void *data, size_t n,
                               const mj_publish_opts *opts, int *err);

/* Removes temp files in dir older than max_age_s seconds; returns how many. */
int mj_cache_clean_temps(const char *dir, int max_age_s);

#endif
