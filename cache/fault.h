/*
 * fault.h — numbered fault points in the cache's system calls, so that tests can make a
 * write fail with ENOSPC, a rename with EROFS, or the writer die between write and publish
 * (SQLite's sqlite3FaultSim and aSyscall[] model).
 *
 * Every system call whose failure the cache must survive goes through mj_cache_sys_*() in
 * fault.c, which asks mj_cache_fault(id) first. Nothing is armed in normal use, and a disarmed
 * point costs one relaxed atomic load. The state is per process (forked test children arm
 * their own copy) and atomic, so it needs no lock.
 */
#ifndef MJ_CACHE_FAULT_H
#define MJ_CACHE_FAULT_H

#include <stddef.h>
#include <sys/types.h>

/* Fault point ids; explicit numbers because tests name them. */
typedef enum mj_cache_fault_id {
    MJ_FAULT_OPEN_TEMP = 1,     /* creating the temp file of a publish */
    MJ_FAULT_WRITE = 2,         /* write() of an entry or stats file */
    MJ_FAULT_FSYNC = 3,         /* fsync() of the temp file */
    MJ_FAULT_RENAME = 4,        /* rename() that publishes */
    MJ_FAULT_FSYNC_DIR = 5,     /* fsync() of the shard directory */
    MJ_FAULT_MKDIR = 6,         /* mkdir() of a cache or shard directory */
    MJ_FAULT_BEFORE_RENAME = 7, /* a point (no syscall) between fsync and rename: for kill */
    MJ_FAULT_READ = 8,          /* read() of an entry */
    MJ_FAULT_LOCK = 9,          /* open() of a lock file */
    MJ_FAULT_COUNT = 10
} mj_cache_fault_id;

/* The action MJ_FAULT_KILL (instead of an errno) makes the process raise SIGKILL at the
 * point: a writer that dies with its temp file written but not renamed. */
#define MJ_FAULT_KILL (-1)

/* Arms point id: after `skip` passes, the next `count` hits fail with errno `err` (or die
 * for MJ_FAULT_KILL); count < 0 means every later hit. err 0 disarms. */
void mj_cache_fault_set(mj_cache_fault_id id, int err, int skip, int count);
void mj_cache_fault_clear_all(void);
/* The errno to inject at point id now, or 0. */
int mj_cache_fault(mj_cache_fault_id id);
/* Warnings on stderr, at most one per class per process: a serving process that cannot write
 * its cache should say so once, not once per kernel. */
typedef enum mj_cache_warn_class {
    MJ_WARN_WRITE = 0,      /* an entry or its directory could not be written */
    MJ_WARN_QUARANTINE = 1, /* an entry failed its checks and was moved aside */
    MJ_WARN_UNSAFE = 2,     /* a directory or entry with unsafe ownership or permissions */
    MJ_WARN_LOCK = 3,       /* the lock directory is unusable or a lock timed out */
    MJ_WARN_REMOTE = 4,     /* the remote tier failed or timed out, and is skipped for a while */
    MJ_WARN_REMOTE_REFUSED = 5, /* an entry fetched from the remote failed its checks */
    MJ_WARN_COUNT = 6
} mj_cache_warn_class;

void mj_cache_warn(mj_cache_warn_class cls, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Lets every class warn again (tests that assert a warning). */
void mj_cache_fault_reset_warnings(void);

/* The system calls behind the fault points: same contract as the libc call. */
int mj_cache_sys_open(mj_cache_fault_id id, const char *path, int flags, mode_t mode);
ssize_t mj_cache_sys_write_all(int fd, const void *data, size_t n); /* -1 on short write */
ssize_t mj_cache_sys_read_all(int fd, void *data, size_t n);        /* bytes read (< n at EOF) */
int mj_cache_sys_fsync(mj_cache_fault_id id, int fd);
int mj_cache_sys_rename(const char *from, const char *to);
int mj_cache_sys_mkdir(const char *path, mode_t mode);

#endif
