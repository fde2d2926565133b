/*
 * This file contains the non-blocking, regular-file-only open and whole-file read that every
 * reader of the cache and the CLI uses (see file.h for why).
 */
#include "core/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/status.h"

const char *mj_file_kind(mode_t mode)
{
    if (S_ISREG(mode)) return "regular file";
    if (S_ISDIR(mode)) return "directory";
    if (S_ISFIFO(mode)) return "FIFO";
    if (S_ISSOCK(mode)) return "socket";
    if (S_ISCHR(mode)) return "character device";
    if (S_ISBLK(mode)) return "block device";
    if (S_ISLNK(mode)) return "symbolic link";
    return "special file";
}

int mj_file_open_regular(const char *path, unsigned flags, struct stat *st_out)
{
    struct stat st;
    int oflags = O_RDONLY | O_NONBLOCK | O_CLOEXEC | ((flags & MJ_FILE_NOFOLLOW) ? O_NOFOLLOW : 0);
    int fd;
    do fd = open(path, oflags);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) return -1;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    if (st_out) *st_out = st;
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        errno = EINVAL;
        return -1;
    }
    return fd;
}

moejit_status mj_file_read(const char *what, const char *path, unsigned flags, size_t max,
                           uint8_t **data, size_t *n, struct stat *st_out)
{
    *data = NULL;
    *n = 0;
    struct stat st;
    memset(&st, 0, sizeof st);
    int fd = mj_file_open_regular(path, flags, &st);
    if (st_out) *st_out = st;
    if (fd < 0) {
        int e = errno;
        if (e == EINVAL)
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "%s: %s is a %s, not a regular file; allowed: a "
                           "regular file", what, path, mj_file_kind(st.st_mode));
        if (e == ELOOP && (flags & MJ_FILE_NOFOLLOW))
            return mj_fail(MOEJIT_ERR_IO, "%s: %s is a symbolic link, which is refused here; allowed: a "
                           "regular file", what, path);
        errno = e;
        return mj_fail(MOEJIT_ERR_IO, "%s: cannot open %s: %s", what, path, strerror(e));
    }
    if ((uint64_t)st.st_size > (uint64_t)max) {
        close(fd);
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "%s: %s has %lld bytes; allowed: at most %zu", what, path,
                       (long long)st.st_size, max);
    }
    size_t want = (size_t)st.st_size;
    uint8_t *buf = malloc(want + 1);
    if (!buf) {
        close(fd);
        return mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "%s: out of memory reading %s", what, path);
    }
    size_t done = 0;
    while (done < want) {
        ssize_t r = read(fd, buf + done, want - done);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            free(buf);
            close(fd);
            errno = e;
            return mj_fail(MOEJIT_ERR_IO, "%s: cannot read %s: %s", what, path, strerror(e));
        }
        if (r == 0) break; /* shrank while we read: what we have is all there is */
        done += (size_t)r;
    }
    close(fd);
    buf[done] = 0;
    *data = buf;
    *n = done;
    return MOEJIT_OK;
}
