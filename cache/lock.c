/*
 * This file contains the per-key lock files (flock) with a timeout, and their removal on
 * release (see lock.h for why that is safe).
 */
#include "cache/lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache/fault.h"
#include "core/file.h"
#include "core/status.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

/* 1 when fd is still the file at path (not unlinked or replaced by a releasing holder). */
static int still_linked(int fd, const char *path)
{
    struct stat a, b;
    return fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

moejit_status mj_cache_lock_acquire(const char *dir, const char *name, double timeout_s,
                                    mj_cache_lock *out, int *acquired)
{
    out->fd = -1;
    *acquired = 0;
    int n = snprintf(out->path, sizeof out->path, "%s/%s.lock", dir, name);
    if (n < 0 || (size_t)n >= sizeof out->path)
        return mj_fail(MOEJIT_ERR_IO, "lock_dir: path of lock %s too long", name);
    double deadline = now_s() + timeout_s;
    /* Polling with a growing pause: flock has no timed wait, and a blocking flock interrupted
     * by a timer signal would disturb the caller's signal handling. */
    double pause = 0.001;
    for (;;) {
        int fd = mj_cache_sys_open(MJ_FAULT_LOCK, out->path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK, 0600);
        if (fd < 0)
            return mj_fail(MOEJIT_ERR_IO, "lock_dir: cannot open lock %s: %s", out->path, strerror(errno));
        /* A lock file another user made (or a FIFO) would let them hold our lock forever. */
        struct stat st;
        if (fstat(fd, &st) != 0) {
            int e = errno;
            close(fd);
            return mj_fail(MOEJIT_ERR_IO, "lock_dir: cannot stat lock %s: %s", out->path, strerror(e));
        }
        if (!S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
            close(fd);
            if (!S_ISREG(st.st_mode))
                return mj_fail(MOEJIT_ERR_IO, "lock_dir: lock %s is a %s, not a regular file; allowed: remove it",
                               out->path, mj_file_kind(st.st_mode));
            return mj_fail(MOEJIT_ERR_IO, "lock_dir: lock %s is owned by uid %u, not by you (uid %u); another "
                           "user could hold it forever; allowed: a lock directory only you can write "
                           "(MOEJIT_LOCK_DIR)", out->path, (unsigned)st.st_uid, (unsigned)geteuid());
        }
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
            if (still_linked(fd, out->path)) {
                out->fd = fd;
                *acquired = 1;
                return MOEJIT_OK;
            }
            close(fd); /* won a lock on a file its holder just removed: try the new one */
            continue;
        }
        int e = errno;
        close(fd);
        if (e != EWOULDBLOCK && e != EINTR)
            return mj_fail(MOEJIT_ERR_IO, "lock_dir: cannot lock %s: %s", out->path, strerror(e));
        double left = deadline - now_s();
        if (left <= 0) return MOEJIT_OK; /* timed out: *acquired stays 0 */
        sleep_s(pause < left ? pause : left);
        if (pause < 0.05) pause *= 2;
    }
}

void mj_cache_lock_release(mj_cache_lock *lock)
{
    if (lock->fd < 0) return;
    /* Unlink while still holding it: a waiter that wins the old inode then sees it is gone. */
    unlink(lock->path);
    close(lock->fd);
    lock->fd = -1;
}
