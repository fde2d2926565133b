/*
 * lock.h — per-name exclusive locks in the node-local lock directory (single flight).
 *
 * One lock file per key, so unrelated keys never wait on each other. flock() locks belong to
 * the open file description, so two threads of one process exclude each other as two
 * processes do, and the kernel drops the lock when its holder dies, however it dies.
 *
 * The holder unlinks the file before releasing, so the directory does not fill with one file
 * per key ever compiled. A waiter that then wins the lock on the unlinked inode notices that
 * the path no longer names its inode and tries again, so two processes never both believe
 * they hold the lock.
 */
#ifndef MJ_CACHE_LOCK_H
#define MJ_CACHE_LOCK_H

#include "cache/config.h"
#include "moejit.h"

typedef struct mj_cache_lock {
    int fd; /* -1 when not held */
    char path[MJ_CACHE_PATH_MAX];
} mj_cache_lock;

/* Takes dir/<name>.lock, waiting at most timeout_s seconds (0: a single try). *acquired is 1
 * on success, 0 on timeout (still MOEJIT_OK: the caller proceeds without the lock).
 * MOEJIT_ERR_IO when the lock file cannot be opened at all. */
moejit_status mj_cache_lock_acquire(const char *dir, const char *name, double timeout_s,
                                    mj_cache_lock *out, int *acquired);
/* Unlinks and releases; a lock that was not acquired is ignored. */
void mj_cache_lock_release(mj_cache_lock *lock);

#endif
