/*
 * dirs.h — creating the cache's directories and deciding whether a file or directory may be
 * trusted.
 *
 * The cache holds code that will run on the GPU, so anything another user could have written
 * is refused: by default a directory or entry must be owned by the effective user and not be
 * writable by group or others. With the shared option (MOEJIT_CACHE_SHARED=1) the owner may be
 * another member of a group we belong to and group write is allowed; write by others never is.
 */
#ifndef MJ_CACHE_DIRS_H
#define MJ_CACHE_DIRS_H

#include <sys/stat.h>

#include "moejit.h"

/* Mode of new directories: private, or group-shared with setgid so entries keep the group. */
#define MJ_DIR_MODE_PRIVATE 0700
#define MJ_DIR_MODE_SHARED 02770
#define MJ_FILE_MODE_PRIVATE 0600
#define MJ_FILE_MODE_SHARED 0660

/* MOEJIT_OK when st may be trusted; otherwise MOEJIT_ERR_IO with a message that names
 * `setting` (e.g. "cache_dir"), the path, the problem and the allowed fix. */
moejit_status mj_cache_check_trust(const struct stat *st, const char *setting, const char *path,
                                   int shared);

/* Creates path and its missing parents (new ones get the private or shared mode), then checks
 * that path is a directory that may be trusted. On a system error the status is
 * MOEJIT_ERR_IO and *err (optional) holds errno, so a caller can tell a read-only or full file
 * system (degrade with a warning) from an unsafe directory (*err == 0: refuse). */
moejit_status mj_cache_ensure_dir(const char *path, const char *setting, int shared, int *err);

/* Like mj_cache_ensure_dir without creating anything: ENOENT gives *err = ENOENT. */
moejit_status mj_cache_check_dir(const char *path, const char *setting, int shared, int *err);

/* The same for directories the cache itself names (shards, quarantine, the lock directory):
 * checked with lstat, so a symbolic link is refused rather than followed (the default lock
 * directory under /tmp could be planted by another user). */
moejit_status mj_cache_check_own_dir(const char *path, const char *setting, int shared, int *err);
moejit_status mj_cache_ensure_own_dir(const char *path, const char *setting, int shared, int *err);

#endif
