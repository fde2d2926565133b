/*
 * This file contains export and import of a pack: one checksummed file holding selected
 * entries, for shipping a warmed cache to machines that must not compile (format in cache.h).
 *
 * Import checks everything before it adds anything: the pack's own checksum, then each
 * entry's checksum, key and file-name key. A pack with one bad byte is refused whole, so a
 * half-imported cache never hides a broken transfer.
 */
#include "cache/cache.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/dirs.h"
#include "cache/fault.h"
#include "cache/publish.h"
#include "core/status.h"
#include "cache/store.h"

#define PACK_MAGIC "MJKPACK1"
#define PACK_VERSION 1u
/* A pack bigger than this is not one we wrote for a single cache (the default limit is 4G). */
#define PACK_MAX_BYTES (16LL << 30)

static void put_u32(mj_buf *b, uint32_t v)
{
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    mj_buf_append(b, x, 4);
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int sha256(const void *d, size_t n, unsigned char md[32])
{
    unsigned len = 0;
    return EVP_Digest(n ? d : "", n, md, &len, EVP_sha256(), NULL) == 1 && len == 32;
}

typedef struct export_ctx {
    mj_buf body;
    uint32_t count;
    mj_cache_select_fn select;
    void *user;
} export_ctx;

static int export_one(void *vctx, const mj_cache_entry_info *info)
{
    export_ctx *x = vctx;
    if (x->select && !x->select(x->user, info)) return 0;
    mj_buf enc = MJ_BUF_INIT;
    /* Re-encoded from the verified entry: the same bytes the file holds (the codec is
     * deterministic), without reading the file a second time. */
    if (mj_entry_encode(info->entry, &enc) != MOEJIT_OK) {
        x->body.failed = 1;
        mj_buf_free(&enc);
        return 1;
    }
    put_u32(&x->body, 64);
    mj_buf_append(&x->body, info->key, 64);
    put_u32(&x->body, (uint32_t)enc.len);
    mj_buf_append(&x->body, enc.data, enc.len);
    mj_buf_free(&enc);
    x->count++;
    return 0;
}

moejit_status mj_cache_export(mj_cache *c, const char *path, mj_cache_select_fn select, void *ctx,
                              int64_t *exported)
{
    export_ctx x = {MJ_BUF_INIT, 0, select, ctx};
    moejit_status rc = mj_cache_list(c, export_one, &x);
    if (rc == MOEJIT_OK && !mj_buf_ok(&x.body))
        rc = mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "cache export: out of memory");
    mj_buf pack = MJ_BUF_INIT;
    if (rc == MOEJIT_OK) {
        mj_buf_append(&pack, PACK_MAGIC, 8);
        put_u32(&pack, PACK_VERSION);
        put_u32(&pack, x.count);
        mj_buf_append(&pack, x.body.data, x.body.len);
        unsigned char md[32];
        if (!mj_buf_ok(&pack) || !sha256(pack.data, pack.len, md))
            rc = mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "cache export: out of memory");
        else
            mj_buf_append(&pack, md, 32);
    }
    if (rc == MOEJIT_OK) {
        /* Published like an entry, so a reader of the pack never sees half of it. */
        char dir[MJ_CACHE_PATH_MAX];
        snprintf(dir, sizeof dir, "%s", path);
        char *slash = strrchr(dir, '/');
        const char *name = path;
        if (slash) {
            *slash = '\0';
            name = slash + 1;
            if (slash == dir) snprintf(dir, sizeof dir, "/");
        } else {
            snprintf(dir, sizeof dir, ".");
        }
        mj_publish_opts po = {0644, 1};
        rc = mj_cache_publish(dir, name, pack.data, pack.len, &po, NULL);
    }
    if (exported) *exported = rc == MOEJIT_OK ? x.count : 0;
    mj_buf_free(&x.body);
    mj_buf_free(&pack);
    return rc;
}

static moejit_status read_whole(const char *path, uint8_t **data, size_t *n)
{
    *data = NULL;
    *n = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return mj_fail(MOEJIT_ERR_IO, "cache import: cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > PACK_MAX_BYTES) {
        close(fd);
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "cache import: %s is not a regular file below 16 GiB",
                       path);
    }
    *data = malloc(st.st_size ? (size_t)st.st_size : 1);
    if (!*data) {
        close(fd);
        return mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "cache import: out of memory");
    }
    ssize_t got = mj_cache_sys_read_all(fd, *data, (size_t)st.st_size);
    close(fd);
    if (got != (ssize_t)st.st_size) {
        free(*data);
        *data = NULL;
        return mj_fail(MOEJIT_ERR_IO, "cache import: cannot read %s", path);
    }
    *n = (size_t)st.st_size;
    return MOEJIT_OK;
}

/* One pass over the pack's records; with c NULL it only checks, else it adds. */
static moejit_status walk_pack(mj_cache *c, const uint8_t *d, size_t n, const char *path,
                               int64_t *added, int64_t *present)
{
    const uint8_t *p = d + 16, *end = d + n - 32;
    uint32_t count = get_u32(d + 12);
    for (uint32_t i = 0; i < count; i++) {
        if (end - p < 4 || get_u32(p) != 64 || end - p < 4 + 64 + 4)
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "cache import: %s: record %u is malformed; the "
                           "pack was refused whole", path, i);
        char key[65];
        memcpy(key, p + 4, 64);
        key[64] = '\0';
        uint32_t len = get_u32(p + 68);
        p += 72;
        if ((size_t)(end - p) < len || !mj_cache_key_valid(key))
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "cache import: %s: record %u is malformed; the "
                           "pack was refused whole", path, i);
        mj_entry e;
        mj_entry_fault fault;
        moejit_status rc = mj_entry_decode(p, len, &e, &fault);
        if (rc != MOEJIT_OK) return rc;
        if (fault == MJ_ENTRY_OK && strcmp(e.key, key) != 0) fault = MJ_ENTRY_KEY_MISMATCH;
        if (fault != MJ_ENTRY_OK) {
            mj_entry_free(&e);
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "cache import: %s: entry %s is %s; the pack was "
                           "refused whole", path, key, mj_entry_fault_name(fault));
        }
        if (c) {
            mj_program prog;
            int found = 0;
            rc = mj_cache_lookup(c, key, e.canonical_spec, &prog, &found);
            if (rc == MOEJIT_OK && found) {
                mj_program_free(&prog);
                (*present)++;
            } else {
                rc = mj_entry_to_program(&e, &prog);
                if (rc == MOEJIT_OK) {
                    prog.compile_seconds = e.compile_seconds; /* keep the original compile time */
                    rc = mj_cache_put(c, key, e.preimage, e.canonical_spec, &prog);
                    mj_program_free(&prog);
                }
                if (rc == MOEJIT_OK) (*added)++;
            }
        }
        mj_entry_free(&e);
        if (rc != MOEJIT_OK) return rc;
        p += len;
    }
    if (p != end)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "cache import: %s: trailing bytes after %u records; "
                       "the pack was refused whole", path, count);
    return MOEJIT_OK;
}

moejit_status mj_cache_import(mj_cache *c, const char *path, int64_t *added, int64_t *present)
{
    int64_t a = 0, p = 0;
    if (added) *added = 0;
    if (present) *present = 0;
    uint8_t *d;
    size_t n;
    moejit_status rc = read_whole(path, &d, &n);
    if (rc != MOEJIT_OK) return rc;
    unsigned char md[32];
    if (n < 16 + 32 || memcmp(d, PACK_MAGIC, 8) != 0)
        rc = mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "cache import: %s is not a moejit pack (bad magic or "
                     "too short); allowed: a file written by `moejit cache export`", path);
    else if (get_u32(d + 8) != PACK_VERSION)
        rc = mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "cache import: %s has pack version %u; allowed: %u", path,
                     get_u32(d + 8), PACK_VERSION);
    else if (!sha256(d, n - 32, md) || memcmp(md, d + n - 32, 32) != 0)
        rc = mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "cache import: %s: checksum mismatch (corrupt or "
                     "truncated); the pack was refused whole", path);
    if (rc == MOEJIT_OK) rc = walk_pack(NULL, d, n, path, &a, &p);
    if (rc == MOEJIT_OK) rc = walk_pack(c, d, n, path, &a, &p);
    free(d);
    if (added) *added = a;
    if (present) *present = p;
    return rc;
}
