/*
 * This file contains the atomic publish of a file (temp, write, fsync, rename, fsync of the
 * directory) and the cleanup of temp files left by crashed writers.
 */
#include "cache/publish.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache/config.h"
#include "cache/fault.h"
#include "core/status.h"

/* Distinguishes temp files of threads of one process; pid and time separate processes. */
static atomic_uint g_temp_counter;

static moejit_status io_fail(int e, int *err, const char *what, const char *path)
{
    if (err) *err = e;
    return mj_fail(MOEJIT_ERR_IO, "cache: cannot %s %s: %s", what, path, strerror(e));
}

moejit_status mj_cache_publish(const char *dir, const char *name, const void *data, size_t n,
                               const mj_publish_opts *opts, int *err)
{
    char tmp[MJ_CACHE_PATH_MAX], dst[MJ_CACHE_PATH_MAX];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (err) *err = 0;
    int a = snprintf(dst, sizeof dst, "%s/%s", dir, name);
    int b = snprintf(tmp, sizeof tmp, "%s/" MJ_TEMP_PREFIX "%s.%ld.%lx.%u", dir, name, (long)getpid(),
                     (unsigned long)ts.tv_nsec, atomic_fetch_add(&g_temp_counter, 1));
    if (a < 0 || b < 0 || (size_t)a >= sizeof dst || (size_t)b >= sizeof tmp)
        return io_fail(ENAMETOOLONG, err, "write", dir);

    /* O_EXCL: the name is unique, and we never write through a link someone planted. */
    int fd = mj_cache_sys_open(MJ_FAULT_OPEN_TEMP, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW,
                               (mode_t)opts->file_mode);
    if (fd < 0) return io_fail(errno, err, "write", dst);
    int e = 0;
    if (mj_cache_sys_write_all(fd, data, n) < 0) e = errno;
    else if (opts->durable && mj_cache_sys_fsync(MJ_FAULT_FSYNC, fd) != 0) e = errno;
    /* umask may have cut group bits of a shared cache's entries. */
    else if (opts->file_mode != 0600 && fchmod(fd, (mode_t)opts->file_mode) != 0) e = errno;
    if (close(fd) != 0 && !e) e = errno;
    if (!e) e = mj_cache_fault(MJ_FAULT_BEFORE_RENAME); /* the test hook: a kill lands here */
    if (!e && mj_cache_sys_rename(tmp, dst) != 0) e = errno;
    if (e) {
        unlink(tmp);
        return io_fail(e, err, "write", dst);
    }
    if (opts->durable) {
        /* Without this the rename itself may be lost on power failure. */
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            if (mj_cache_sys_fsync(MJ_FAULT_FSYNC_DIR, dfd) != 0) e = errno;
            close(dfd);
        }
        /* The entry is visible and complete; an fsync failure of the directory only weakens
         * durability, so it is reported but the file stays. */
        if (e) return io_fail(e, err, "sync directory", dir);
    }
    return MOEJIT_OK;
}

int mj_cache_clean_temps(const char *dir, int max_age_s)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    int removed = 0;
    time_t now = time(NULL);
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strncmp(de->d_name, MJ_TEMP_PREFIX, strlen(MJ_TEMP_PREFIX)) != 0) continue;
        struct stat st;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        if (now - st.st_mtime < max_age_s) continue;
        if (unlinkat(dirfd(d), de->d_name, 0) == 0) removed++;
    }
    closedir(d);
    return removed;
}
