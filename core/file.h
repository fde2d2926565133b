/*
 * file.h — opening a file for reading so that what is at the path cannot hang or fool the
 * reader: every file the cache, the pack import, the key loader and the CLI read goes through
 * here.
 *
 * The open never blocks (O_NONBLOCK: a FIFO planted where a file was expected opens at once
 * and is then refused, instead of waiting forever for a writer), and fstat on the open file
 * (not a stat of the path before it, which a swap could race) decides that it is a regular
 * file. Paths the cache owns are opened with O_NOFOLLOW as well.
 */
#ifndef MJ_FILE_H
#define MJ_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "moejit.h"

#define MJ_FILE_NOFOLLOW 1u /* refuse a symbolic link (ELOOP): the path is the cache's own */

/* Opens path read-only (O_NONBLOCK, O_CLOEXEC, O_NOFOLLOW under MJ_FILE_NOFOLLOW) and checks
 * that it is a regular file. Returns the descriptor, or -1 with errno set: ELOOP for a link
 * under MJ_FILE_NOFOLLOW, EINVAL when it is not a regular file (*st then tells what it is).
 * *st (optional) receives the fstat of what was opened. */
int mj_file_open_regular(const char *path, unsigned flags, struct stat *st);

/* "directory", "FIFO", "socket", "character device", "block device", "symbolic link",
 * "regular file" or "special file". */
const char *mj_file_kind(mode_t mode);

/* Reads the whole regular file at path (at most max bytes) into a malloc'd buffer with a NUL
 * after its n bytes. Errors name `what` and the path: MOEJIT_ERR_IO for a missing or
 * unreadable file (errno kept), MOEJIT_ERR_INVALID_ARGUMENT for one that is not a regular file
 * or is larger than max. *st (optional) receives its fstat. */
moejit_status mj_file_read(const char *what, const char *path, unsigned flags, size_t max,
                           uint8_t **data, size_t *n, struct stat *st);

#endif
