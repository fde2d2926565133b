/*
 * This file contains the on-disk layout of entries, the checked read of one entry file, and
 * quarantine (see store.h).
 */
#include "cache/store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache/dirs.h"
#include "cache/fault.h"
#include "core/file.h"
#include "core/key.h"
#include "core/status.h"

int mj_cache_key_valid(const char *key)
{
    if (!key) return 0;
    for (int i = 0; i < 64; i++)
        if (!((key[i] >= '0' && key[i] <= '9') || (key[i] >= 'a' && key[i] <= 'f'))) return 0;
    return key[64] == '\0';
}

static int hexval(char c) { return c <= '9' ? c - '0' : c - 'a' + 10; }

int mj_cache_key_shard(const char *key) { return hexval(key[0]) * 16 + hexval(key[1]); }

void mj_cache_shard_dir(const mj_cache_config *cfg, const char *key, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%.2s/%.2s", cfg->dir, key, key + 2);
}

void mj_cache_entry_path(const mj_cache_config *cfg, const char *key, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%.2s/%.2s/%s" MJ_ENTRY_SUFFIX, cfg->dir, key, key + 2, key);
}

moejit_status mj_cache_read_entry_file(const mj_cache_config *cfg, const char *path, const char *key,
                                       const char *expected_spec, mj_entry *e, int *found,
                                       mj_entry_fault *fault, struct stat *st_out)
{
    memset(e, 0, sizeof *e);
    *found = 0;
    *fault = MJ_ENTRY_OK;
    /* Both shard directories must pass the trust check (dirs.h), not only the file. */
    if (mj_cache_key_valid(key)) {
        char d1[MJ_CACHE_PATH_MAX + 8], d2[MJ_CACHE_PATH_MAX + 16];
        snprintf(d1, sizeof d1, "%s/%.2s", cfg->dir, key);
        mj_cache_shard_dir(cfg, key, d2, sizeof d2);
        int err = 0;
        if (mj_cache_check_own_dir(d1, "cache shard", cfg->shared, &err) != MOEJIT_OK ||
            mj_cache_check_own_dir(d2, "cache shard", cfg->shared, &err) != MOEJIT_OK) {
            if (err == ENOENT || err == ENOTDIR) {
                mj_clear_error();
                return MOEJIT_OK;
            }
            mj_cache_warn(MJ_WARN_UNSAFE, "%s; its entries are not read", moejit_last_error());
            mj_clear_error();
            *found = 1;
            *fault = MJ_ENTRY_UNSAFE;
            return MOEJIT_OK;
        }
    }
    /* An entry is a regular file we wrote: a link could point anywhere, and a FIFO would
     * block a plain open or read forever. */
    struct stat st;
    memset(&st, 0, sizeof st);
    int fd = mj_file_open_regular(path, MJ_FILE_NOFOLLOW, &st);
    if (fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR) return MOEJIT_OK;
        *found = 1;
        if (errno == ELOOP) {
            *fault = MJ_ENTRY_UNSAFE;
            return MOEJIT_OK;
        }
        if (errno == EINVAL) {
            if (st_out) *st_out = st;
            *fault = MJ_ENTRY_NOT_REGULAR;
            return MOEJIT_OK;
        }
        return mj_fail(MOEJIT_ERR_IO, "cache: cannot open %s: %s", path, strerror(errno));
    }
    *found = 1;
    moejit_status rc = MOEJIT_OK;
    if (st_out) *st_out = st;
    if (mj_cache_check_trust(&st, "cache entry", path, cfg->shared) != MOEJIT_OK) {
        *fault = MJ_ENTRY_UNSAFE;
        mj_cache_warn(MJ_WARN_UNSAFE, "%s", moejit_last_error());
        goto out;
    }
    if ((uint64_t)st.st_size > MJ_ENTRY_MAX_BYTES) {
        *fault = MJ_ENTRY_FOREIGN;
        goto out;
    }
    size_t n = (size_t)st.st_size;
    uint8_t *data = malloc(n ? n : 1);
    if (!data) {
        rc = mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "cache: out of memory reading %s", path);
        goto out;
    }
    ssize_t got = mj_cache_sys_read_all(fd, data, n);
    if (got < 0) {
        rc = mj_fail(MOEJIT_ERR_IO, "cache: cannot read %s: %s", path, strerror(errno));
        free(data);
        goto out;
    }
    rc = mj_entry_decode_owned(data, (size_t)got, e, fault); /* the entry keeps data as its cubin */
    if (rc != MOEJIT_OK || *fault != MJ_ENTRY_OK) goto out;
    if (strcmp(e->key, key) != 0) *fault = MJ_ENTRY_KEY_MISMATCH;
    else if (expected_spec && strcmp(e->canonical_spec, expected_spec) != 0) *fault = MJ_ENTRY_SPEC_MISMATCH;
    if (*fault != MJ_ENTRY_OK) mj_entry_free(e);
out:
    close(fd);
    return rc;
}

/* The spec of a preimage: its third line, "spec <n>:<n bytes>\n" (core/key.c). */
static int preimage_spec(const char *pre, const char **spec, size_t *n)
{
    for (int line = 0; line < 2; line++) {
        pre = strchr(pre, '\n');
        if (!pre) return 0;
        pre++;
    }
    if (strncmp(pre, "spec ", 5) != 0) return 0;
    pre += 5;
    size_t len = 0;
    if (*pre < '0' || *pre > '9') return 0;
    for (; *pre >= '0' && *pre <= '9'; pre++) {
        if (len > (SIZE_MAX - 9) / 10) return 0;
        len = len * 10 + (size_t)(*pre - '0');
    }
    if (*pre != ':' || strnlen(pre + 1, len + 1) < len + 1 || pre[1 + len] != '\n') return 0;
    *spec = pre + 1;
    *n = len;
    return 1;
}

mj_entry_fault mj_cache_entry_consistent(const mj_entry *e)
{
    char hex[65];
    const char *pre = e->preimage ? e->preimage : "";
    if (mj_sha256_hex(pre, strlen(pre), hex) != MOEJIT_OK || strcmp(hex, e->key) != 0)
        return MJ_ENTRY_PREIMAGE_KEY;
    const char *spec;
    size_t n;
    const char *stored = e->canonical_spec ? e->canonical_spec : "";
    if (!preimage_spec(pre, &spec, &n) || n != strlen(stored) || memcmp(spec, stored, n) != 0)
        return MJ_ENTRY_PREIMAGE_SPEC;
    return MJ_ENTRY_OK;
}

void mj_cache_quarantine(const mj_cache_config *cfg, const char *path, const char *key,
                         int64_t size, mj_entry_fault fault, mj_cache_stats *delta)
{
    char qdir[MJ_CACHE_PATH_MAX + 16], dst[MJ_CACHE_PATH_MAX + 160];
    snprintf(qdir, sizeof qdir, "%s/" MJ_QUARANTINE_DIR, cfg->dir);
    snprintf(dst, sizeof dst, "%s/%s.%lld.%ld.fault%d", qdir, key, (long long)time(NULL), (long)getpid(),
             (int)fault);
    char why[MJ_ERROR_MAX] = "";
    int moved = 0;
    if (mj_cache_ensure_own_dir(qdir, "cache quarantine", cfg->shared, NULL) != MOEJIT_OK)
        snprintf(why, sizeof why, "%s", moejit_last_error());
    else if (rename(path, dst) == 0)
        moved = 1;
    else
        snprintf(why, sizeof why, "cannot move it to quarantine/: %s", strerror(errno));
    mj_clear_error();
    /* Each outcome is reported as what happened: moved, removed, or left in place. */
    if (!moved) {
        struct stat st;
        int gone = lstat(path, &st) == 0 && (S_ISDIR(st.st_mode) ? rmdir(path) : unlink(path)) == 0;
        if (!gone && errno == ENOENT) return; /* another process got there first */
        if (!gone) {
            mj_cache_warn(MJ_WARN_QUARANTINE, "cache entry %s failed its check (%s); it could not be moved "
                          "(%s) or removed (%s) and is ignored", path, mj_entry_fault_name(fault), why,
                          strerror(errno));
            return;
        }
    }
    delta->v[MJ_STAT_QUARANTINED]++;
    delta->v[MJ_STAT_BYTES] -= size;
    delta->v[MJ_STAT_FILES]--;
    if (moved)
        mj_cache_warn(MJ_WARN_QUARANTINE, "cache entry %s failed its check (%s); moved to %s", path,
                      mj_entry_fault_name(fault), dst);
    else
        mj_cache_warn(MJ_WARN_QUARANTINE, "cache entry %s failed its check (%s); removed, since the "
                      "quarantine is unavailable (%s)", path, mj_entry_fault_name(fault), why);
}
