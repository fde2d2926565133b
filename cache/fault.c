/*
 * This file contains the cache's fault points and the system-call wrappers behind them, and
 * the once-per-process warnings. See fault.h for why they exist.
 */
#include "cache/fault.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/status.h"

typedef struct fault_point {
    atomic_int err;   /* errno to inject, MJ_FAULT_KILL, or 0 (disarmed) */
    atomic_int skip;  /* passes left before it fires */
    atomic_int count; /* firings left; < 0: unlimited */
} fault_point;

static fault_point g_points[MJ_FAULT_COUNT];
static atomic_int g_any_armed;
static atomic_int g_warned[MJ_WARN_COUNT];

void mj_cache_fault_set(mj_cache_fault_id id, int err, int skip, int count)
{
    if ((int)id <= 0 || id >= MJ_FAULT_COUNT) return;
    atomic_store(&g_points[id].skip, skip);
    atomic_store(&g_points[id].count, count);
    atomic_store(&g_points[id].err, err);
    if (err) atomic_store(&g_any_armed, 1);
}

void mj_cache_fault_clear_all(void)
{
    for (int i = 0; i < MJ_FAULT_COUNT; i++) atomic_store(&g_points[i].err, 0);
    atomic_store(&g_any_armed, 0);
}

int mj_cache_fault(mj_cache_fault_id id)
{
    if (!atomic_load_explicit(&g_any_armed, memory_order_relaxed)) return 0;
    if ((int)id <= 0 || id >= MJ_FAULT_COUNT) return 0;
    fault_point *p = &g_points[id];
    int err = atomic_load(&p->err);
    if (!err) return 0;
    if (atomic_fetch_sub(&p->skip, 1) > 0) return 0;
    int left = atomic_load(&p->count);
    if (left == 0) return 0;
    if (left > 0) atomic_fetch_sub(&p->count, 1);
    if (err == MJ_FAULT_KILL) raise(SIGKILL);
    return err;
}

void mj_cache_warn(mj_cache_warn_class cls, const char *fmt, ...)
{
    if ((unsigned)cls >= MJ_WARN_COUNT || atomic_exchange(&g_warned[cls], 1)) return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char safe[1024];
    mj_escape_text(safe, sizeof safe, msg); /* paths and specs in it are input */
    /* One write so that lines of concurrent processes do not interleave; through the writer
     * that blocks SIGXFSZ, since stderr may be a file already past RLIMIT_FSIZE. */
    char line[1100];
    int n = snprintf(line, sizeof line, "moejit: warning: %s\n", safe);
    if (n > (int)sizeof line - 1) n = (int)sizeof line - 1;
    if (n > 0 && mj_cache_sys_write_all(STDERR_FILENO, line, (size_t)n) < 0) { /* nothing better to do */ }
}

void mj_cache_fault_reset_warnings(void)
{
    for (int i = 0; i < MJ_WARN_COUNT; i++) atomic_store(&g_warned[i], 0);
}

int mj_cache_sys_open(mj_cache_fault_id id, const char *path, int flags, mode_t mode)
{
    int e = mj_cache_fault(id);
    if (e) {
        errno = e;
        return -1;
    }
    int fd;
    do fd = open(path, flags | O_CLOEXEC, mode);
    while (fd < 0 && errno == EINTR);
    return fd;
}

static ssize_t write_all(int fd, const char *p, size_t n)
{
    size_t done = 0;
    while (done < n) {
        int e = mj_cache_fault(MJ_FAULT_WRITE);
        if (e) {
            errno = e;
            return -1;
        }
        ssize_t w = write(fd, p + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return -1;
        if (w == 0) {
            errno = ENOSPC; /* a regular file that accepts nothing is full */
            return -1;
        }
        done += (size_t)w;
    }
    return (ssize_t)done;
}

ssize_t mj_cache_sys_write_all(int fd, const void *data, size_t n)
{
    /* A write past RLIMIT_FSIZE raises SIGXFSZ, whose default action kills the process: the
     * library must fail the publish (EFBIG) instead. The signal is blocked in this thread
     * around the write, and one it raised is consumed before the mask is restored. */
    sigset_t xfsz, old, pending;
    sigemptyset(&xfsz);
    sigaddset(&xfsz, SIGXFSZ);
    pthread_sigmask(SIG_BLOCK, &xfsz, &old);
    int was_pending = sigpending(&pending) == 0 && sigismember(&pending, SIGXFSZ);
    ssize_t r = write_all(fd, data, n);
    int e = errno;
    if (!was_pending && sigpending(&pending) == 0 && sigismember(&pending, SIGXFSZ)) {
        struct timespec zero = {0, 0};
        while (sigtimedwait(&xfsz, NULL, &zero) < 0 && errno == EINTR) {}
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = e;
    return r;
}

ssize_t mj_cache_sys_read_all(int fd, void *data, size_t n)
{
    char *p = data;
    size_t done = 0;
    while (done < n) {
        int e = mj_cache_fault(MJ_FAULT_READ);
        if (e) {
            errno = e;
            return -1;
        }
        ssize_t r = read(fd, p + done, n - done);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -1;
        if (r == 0) break;
        done += (size_t)r;
    }
    return (ssize_t)done;
}

int mj_cache_sys_fsync(mj_cache_fault_id id, int fd)
{
    int e = mj_cache_fault(id);
    if (e) {
        errno = e;
        return -1;
    }
    return fsync(fd);
}

int mj_cache_sys_rename(const char *from, const char *to)
{
    int e = mj_cache_fault(MJ_FAULT_RENAME);
    if (e) {
        errno = e;
        return -1;
    }
    return rename(from, to);
}

int mj_cache_sys_mkdir(const char *path, mode_t mode)
{
    int e = mj_cache_fault(MJ_FAULT_MKDIR);
    if (e) {
        errno = e;
        return -1;
    }
    return mkdir(path, mode);
}
