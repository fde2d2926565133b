/*
 * This file contains export and import of a pack: one checksummed, optionally signed file
 * holding selected entries, for shipping a warmed cache to machines that must not compile
 * (format and the checks made on import in cache.h).
 *
 * Import checks everything before it adds anything. A pack with one bad byte or one bad
 * record is refused whole, so a half-imported cache never hides a broken transfer, and a
 * record never replaces a good entry with another kernel.
 */
#include "cache/cache.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/fault.h"
#include "cache/publish.h"
#include "core/file.h"
#include "core/status.h"
#include "cache/store.h"

#define PACK_MAGIC "MJKPACK1"
#define PACK_UNSIGNED 1u
#define PACK_SIGNED 2u
#define PACK_HEADER 16
#define PACK_SUM 32
#define PACK_SIG (MJ_SIGN_ID_BYTES + MJ_SIGN_MAC_BYTES)
/* A pack bigger than this is not one we wrote for a single cache (the default limit is 4G). */
#define PACK_MAX_BYTES ((size_t)16 << 30)

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
                              const mj_pack_opts *opts, int64_t *exported)
{
    const mj_sign_key *key = opts ? opts->key : NULL;
    export_ctx x = {MJ_BUF_INIT, 0, select, ctx};
    moejit_status rc = mj_cache_list(c, export_one, &x);
    if (rc == MOEJIT_OK && !mj_buf_ok(&x.body))
        rc = mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "cache export: out of memory");
    mj_buf pack = MJ_BUF_INIT;
    if (rc == MOEJIT_OK) {
        mj_buf_append(&pack, PACK_MAGIC, 8);
        put_u32(&pack, key ? PACK_SIGNED : PACK_UNSIGNED);
        put_u32(&pack, x.count);
        mj_buf_append(&pack, x.body.data, x.body.len);
        if (key) {
            unsigned char mac[MJ_SIGN_MAC_BYTES];
            mj_buf_append(&pack, key->id, MJ_SIGN_ID_BYTES);
            if (!mj_buf_ok(&pack)) rc = mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "cache export: out of memory");
            else if ((rc = mj_sign_mac(key, pack.data, pack.len, mac)) == MOEJIT_OK)
                mj_buf_append(&pack, mac, sizeof mac);
        }
        unsigned char md[32];
        if (rc != MOEJIT_OK) {
        } else if (!mj_buf_ok(&pack) || !sha256(pack.data, pack.len, md))
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

typedef struct seen_key {
    char key[65];
    uint32_t record;
} seen_key;

static int by_key(const void *a, const void *b)
{
    const seen_key *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : (x->record > y->record) - (x->record < y->record);
}

/* One pass over the pack's records; with c NULL it only checks, else it adds. */
static moejit_status walk_pack(mj_cache *c, const uint8_t *d, const uint8_t *end, const char *path,
                               int64_t *added, int64_t *present)
{
    const uint8_t *p = d + PACK_HEADER;
    uint32_t count = get_u32(d + 12);
    /* Every record takes at least 72 bytes: a count beyond that is a lie, not an allocation. */
    if ((size_t)count > (size_t)(end - p) / 72)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "cache import: %s: claims %u records in %zu bytes; "
                       "the pack was refused whole", path, count, (size_t)(end - p));
    seen_key *seen = NULL;
    if (!c && count && !(seen = malloc(count * sizeof *seen)))
        return mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "cache import: out of memory");
    moejit_status rc = MOEJIT_OK;
    for (uint32_t i = 0; i < count && rc == MOEJIT_OK; i++) {
        if (end - p < 72 || get_u32(p) != 64) {
            rc = mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "cache import: %s: record %u is malformed; the "
                         "pack was refused whole", path, i);
            break;
        }
        char key[65];
        memcpy(key, p + 4, 64);
        key[64] = '\0';
        uint32_t len = get_u32(p + 68);
        p += 72;
        if ((size_t)(end - p) < len || !mj_cache_key_valid(key)) {
            rc = mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "cache import: %s: record %u is malformed (bad key "
                         "or length); the pack was refused whole", path, i);
            break;
        }
        mj_entry e;
        mj_entry_fault fault;
        rc = mj_entry_decode(p, len, &e, &fault);
        if (rc != MOEJIT_OK) break;
        if (fault == MJ_ENTRY_OK && strcmp(e.key, key) != 0) fault = MJ_ENTRY_KEY_MISMATCH;
        if (fault == MJ_ENTRY_OK) fault = mj_cache_entry_consistent(&e);
        if (fault != MJ_ENTRY_OK) {
            mj_entry_free(&e);
            rc = mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "cache import: %s: record %u (key %s): %s; the pack "
                         "was refused whole", path, i, key, mj_entry_fault_name(fault));
            break;
        }
        if (!c) {
            memcpy(seen[i].key, key, sizeof key);
            seen[i].record = i;
        } else {
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
        p += len;
    }
    if (rc == MOEJIT_OK && p != end)
        rc = mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "cache import: %s: trailing bytes after %u records; "
                     "the pack was refused whole", path, count);
    if (rc == MOEJIT_OK && seen && count > 1) {
        /* Two records of one key would make which one wins depend on their order. */
        qsort(seen, count, sizeof *seen, by_key);
        for (uint32_t i = 1; i < count && rc == MOEJIT_OK; i++)
            if (strcmp(seen[i].key, seen[i - 1].key) == 0)
                rc = mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "cache import: %s: record %u (key %s) duplicates "
                             "record %u; the pack was refused whole", path, seen[i].record, seen[i].key,
                             seen[i - 1].record);
    }
    free(seen);
    return rc;
}

/* The checksum, then the signature policy; *end receives where the records stop. */
static moejit_status check_envelope(const uint8_t *d, size_t n, const char *path, const mj_pack_opts *o,
                                    const uint8_t **end)
{
    static const char *const how =
        "allowed: a pack written by `moejit cache export --key FILE`, imported with the same key "
        "(--key FILE or MOEJIT_PACK_KEY_FILE), or --trust-unsigned for a pack from a source you trust";
    if (n < PACK_HEADER + PACK_SUM || memcmp(d, PACK_MAGIC, 8) != 0)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "cache import: %s is not a moejit pack (bad magic or "
                       "too short); allowed: a file written by `moejit cache export`", path);
    uint32_t version = get_u32(d + 8);
    if (version != PACK_UNSIGNED && version != PACK_SIGNED)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "cache import: %s has pack version %u; allowed: %u "
                       "(unsigned) or %u (signed)", path, version, PACK_UNSIGNED, PACK_SIGNED);
    size_t trailer = PACK_SUM + (version == PACK_SIGNED ? PACK_SIG : 0);
    unsigned char md[32];
    if (n < PACK_HEADER + trailer || !sha256(d, n - PACK_SUM, md) || memcmp(md, d + n - PACK_SUM, 32) != 0)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "cache import: %s: checksum mismatch (corrupt or "
                       "truncated); the pack was refused whole", path);
    *end = d + n - trailer;
    const mj_sign_key *key = o ? o->key : NULL;
    int trust = o && o->trust_unsigned;
    if (version == PACK_UNSIGNED) {
        if (!trust)
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "cache import: %s is not signed, so nothing shows "
                           "who wrote its kernels; the pack was refused whole; %s", path, how);
        return MOEJIT_OK;
    }
    const uint8_t *id = *end, *mac = *end + MJ_SIGN_ID_BYTES;
    if (!key) {
        if (!trust)
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "cache import: %s is signed but no key was given to "
                           "check it; the pack was refused whole; %s", path, how);
        return MOEJIT_OK;
    }
    if (memcmp(id, key->id, MJ_SIGN_ID_BYTES) != 0) {
        char hex[2 * MJ_SIGN_ID_BYTES + 1];
        for (int i = 0; i < MJ_SIGN_ID_BYTES; i++) snprintf(hex + 2 * i, 3, "%02x", id[i]);
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "cache import: %s is signed under another key (key id "
                       "%s; %s has id %s); the pack was refused whole; %s", path, hex, key->path,
                       key->id_hex, how);
    }
    /* A bad signature is refused even with --trust-unsigned: it is evidence of tampering. */
    if (!mj_sign_check(key, d, (size_t)(mac - d), mac))
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "cache import: %s: bad signature (modified after it "
                       "was signed with %s); the pack was refused whole", path, key->path);
    return MOEJIT_OK;
}

moejit_status mj_cache_import_bytes(mj_cache *c, const char *path, const uint8_t *d, size_t n,
                                    const mj_pack_opts *opts, int64_t *added, int64_t *present)
{
    int64_t a = 0, p = 0;
    if (added) *added = 0;
    if (present) *present = 0;
    const uint8_t *end = NULL;
    moejit_status rc = check_envelope(d, n, path, opts, &end);
    if (rc == MOEJIT_OK) rc = walk_pack(NULL, d, end, path, &a, &p);
    if (rc == MOEJIT_OK) rc = walk_pack(c, d, end, path, &a, &p);
    if (added) *added = a;
    if (present) *present = p;
    return rc;
}

moejit_status mj_cache_import(mj_cache *c, const char *path, const mj_pack_opts *opts, int64_t *added,
                              int64_t *present)
{
    if (added) *added = 0;
    if (present) *present = 0;
    uint8_t *d;
    size_t n;
    moejit_status rc = mj_file_read("cache import", path, 0, PACK_MAX_BYTES, &d, &n, NULL);
    if (rc != MOEJIT_OK) return rc;
    rc = mj_cache_import_bytes(c, path, d, n, opts, added, present);
    free(d);
    return rc;
}
