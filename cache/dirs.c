/*
 * This file contains the creation of cache directories and the trust check applied to every
 * directory and entry before its contents are believed (see dirs.h for the policy).
 */
#include "cache/dirs.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cache/config.h"
#include "cache/fault.h"
#include "core/status.h"

/* 1 when gid is the effective group or one of the supplementary groups. */
static int in_group(gid_t gid)
{
    if (gid == getegid()) return 1;
    gid_t groups[256];
    int n = getgroups(256, groups);
    for (int i = 0; i < n; i++)
        if (groups[i] == gid) return 1;
    return 0;
}

moejit_status mj_cache_check_trust(const struct stat *st, const char *setting, const char *path,
                                   int shared)
{
    /* The shared option helps only where it would make this path acceptable: a group we are
     * in, and no write permission for others. */
    int shared_helps = !shared && in_group(st->st_gid) && !(st->st_mode & S_IWOTH);
    const char *fix_shared = shared_helps ? ", or MOEJIT_CACHE_SHARED=1 for a group-shared cache" : "";
    uid_t me = geteuid();
    if (st->st_uid != me && !(shared && in_group(st->st_gid)))
        return mj_fail(MOEJIT_ERR_IO,
                       "%s: %s is owned by uid %u, not by you (uid %u); the cache holds code that "
                       "runs on the GPU, so files another user controls are refused; allowed: a "
                       "path you own%s", setting, path, (unsigned)st->st_uid, (unsigned)me,
                       shared ? " or one owned by a group you are in" : fix_shared);
    if (st->st_mode & S_IWOTH)
        return mj_fail(MOEJIT_ERR_IO,
                       "%s: %s is writable by other users (mode %04o); the cache holds code that "
                       "runs on the GPU; allowed: no write permission for others (chmod o-w)",
                       setting, path, (unsigned)(st->st_mode & 07777));
    if ((st->st_mode & S_IWGRP) && !shared)
        return mj_fail(MOEJIT_ERR_IO,
                       "%s: %s is writable by its group (mode %04o); the cache holds code that runs "
                       "on the GPU; allowed: chmod g-w%s", setting, path,
                       (unsigned)(st->st_mode & 07777), fix_shared);
    return MOEJIT_OK;
}

static moejit_status check_dir(const char *path, const char *setting, int shared, int *err, int follow)
{
    struct stat st;
    if (err) *err = 0;
    if ((follow ? stat(path, &st) : lstat(path, &st)) != 0) {
        if (err) *err = errno;
        return mj_fail(MOEJIT_ERR_IO, "%s: cannot open %s: %s", setting, path, strerror(errno));
    }
    if (S_ISLNK(st.st_mode))
        return mj_fail(MOEJIT_ERR_IO, "%s: %s is a symbolic link; another user may have planted it, so it is "
                       "refused; allowed: a real directory you own", setting, path);
    if (!S_ISDIR(st.st_mode))
        return mj_fail(MOEJIT_ERR_IO, "%s: %s is not a directory; allowed: a directory path", setting,
                       path);
    return mj_cache_check_trust(&st, setting, path, shared);
}

moejit_status mj_cache_check_dir(const char *path, const char *setting, int shared, int *err)
{
    return check_dir(path, setting, shared, err, 1);
}

moejit_status mj_cache_check_own_dir(const char *path, const char *setting, int shared, int *err)
{
    return check_dir(path, setting, shared, err, 0);
}

/* mkdir with the shared mode really applied: umask would otherwise drop group write. */
static int make_one(const char *path, int shared)
{
    if (mj_cache_sys_mkdir(path, shared ? MJ_DIR_MODE_SHARED : MJ_DIR_MODE_PRIVATE) != 0) return -1;
    if (shared && chmod(path, MJ_DIR_MODE_SHARED) != 0) return -1;
    return 0;
}

static moejit_status ensure_dir(const char *path, const char *setting, int shared, int *err, int follow)
{
    if (err) *err = 0;
    struct stat st;
    if (lstat(path, &st) == 0) return check_dir(path, setting, shared, err, follow);
    char p[MJ_CACHE_PATH_MAX];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof p)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "%s: empty or too long path; allowed: a directory path",
                       setting);
    memcpy(p, path, n + 1);
    /* Parents first; an existing parent is left alone (it may legitimately be shared, like
     * /tmp), only the directories we create get our mode. */
    for (char *s = p + 1; *s; s++) {
        if (*s != '/') continue;
        *s = '\0';
        if (stat(p, &st) != 0 && make_one(p, shared) != 0 && errno != EEXIST) {
            int e = errno;
            if (err) *err = e;
            return mj_fail(MOEJIT_ERR_IO, "%s: cannot create %s: %s", setting, p, strerror(e));
        }
        *s = '/';
    }
    if (make_one(p, shared) != 0 && errno != EEXIST) {
        int e = errno;
        if (err) *err = e;
        return mj_fail(MOEJIT_ERR_IO, "%s: cannot create %s: %s", setting, p, strerror(e));
    }
    return check_dir(path, setting, shared, err, follow);
}

moejit_status mj_cache_ensure_dir(const char *path, const char *setting, int shared, int *err)
{
    return ensure_dir(path, setting, shared, err, 1);
}

moejit_status mj_cache_ensure_own_dir(const char *path, const char *setting, int shared, int *err)
{
    return ensure_dir(path, setting, shared, err, 0);
}
