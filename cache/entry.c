/*
 * This file contains the entry codec: a compiled program and its metadata to and from the
 * self-checking byte format documented in entry.h.
 */
#include "cache/entry.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/key.h"
#include "core/status.h"

#include <openssl/evp.h>
#include <xxhash.h>

#define SHA256_BYTES 32 /* version 1's trailer */
#define XXH3_BYTES 8    /* version 2's trailer */
#define MAGIC_BYTES 8

const char *mj_entry_fault_name(mj_entry_fault f)
{
    switch (f) {
    case MJ_ENTRY_OK: return "ok";
    case MJ_ENTRY_TRUNCATED: return "truncated";
    case MJ_ENTRY_FOREIGN: return "foreign file (bad magic)";
    case MJ_ENTRY_BAD_VERSION: return "unknown format version";
    case MJ_ENTRY_BAD_CHECKSUM: return "bad checksum";
    case MJ_ENTRY_MALFORMED: return "malformed";
    case MJ_ENTRY_KEY_MISMATCH: return "stored key differs from its file name";
    case MJ_ENTRY_SPEC_MISMATCH: return "stored spec differs from the requested spec";
    case MJ_ENTRY_UNSAFE: return "unsafe owner or permissions";
    case MJ_ENTRY_PREIMAGE_KEY: return "stored key is not the SHA-256 of its preimage";
    case MJ_ENTRY_PREIMAGE_SPEC: return "stored spec differs from its preimage's spec";
    case MJ_ENTRY_NOT_REGULAR: return "not a regular file";
    }
    return "unknown";
}

/* ---- writing ------------------------------------------------------------------------ */

static void put_u32(mj_buf *b, uint32_t v)
{
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    mj_buf_append(b, x, 4);
}

static void put_u64(mj_buf *b, uint64_t v)
{
    put_u32(b, (uint32_t)v);
    put_u32(b, (uint32_t)(v >> 32));
}

static void put_str(mj_buf *b, const void *s, size_t n)
{
    put_u32(b, (uint32_t)n);
    mj_buf_append(b, s, n);
}

static size_t len_or0(const char *s) { return s ? strlen(s) : 0; }

static int sha256_raw(const void *data, size_t n, unsigned char md[SHA256_BYTES])
{
    unsigned int len = 0;
    return EVP_Digest(n ? data : "", n, md, &len, EVP_sha256(), NULL) == 1 && len == SHA256_BYTES;
}

/* Version 2's trailer: XXH3-64 of the bytes, little-endian. It detects corruption at memory
 * speed (SHA-256 over a 2.5 MB cubin was most of a disk load); integrity against an attacker
 * is not the entry's job (the remote tier and packs carry an HMAC). */
static void xxh3_trailer(const void *data, size_t n, unsigned char out[XXH3_BYTES])
{
    const XXH64_hash_t h = XXH3_64bits(data, n);
    for (int i = 0; i < XXH3_BYTES; i++) out[i] = (unsigned char)(h >> (8 * i));
}

/* The trailer of a version-v entry over data[0..n) into md (its length); 0 on a libcrypto failure. */
static size_t trailer_of(uint32_t version, const void *data, size_t n, unsigned char md[SHA256_BYTES])
{
    if (version != 1) {
        xxh3_trailer(data, n, md);
        return XXH3_BYTES;
    }
    return sha256_raw(data, n, md) ? SHA256_BYTES : 0;
}

moejit_status mj_entry_encode(const mj_entry *e, mj_buf *out)
{
    if (e->cubin_len > MJ_ENTRY_MAX_BYTES)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "entry.cubin: %zu bytes; allowed: at most %u",
                       e->cubin_len, MJ_ENTRY_MAX_BYTES);
    if (e->n_kernels < 0 || e->n_kernels > MJ_MAX_KERNELS)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "entry.n_kernels: %d; allowed: 0..%d", e->n_kernels,
                       MJ_MAX_KERNELS);
    mj_buf_reset(out);
    mj_buf_append(out, MJ_ENTRY_MAGIC, MAGIC_BYTES);
    put_u32(out, MJ_ENTRY_VERSION);
    put_str(out, e->key, strlen(e->key));
    put_str(out, e->canonical_spec, len_or0(e->canonical_spec));
    put_str(out, e->preimage, len_or0(e->preimage));
    put_str(out, e->arch, len_or0(e->arch));
    put_u32(out, (uint32_t)e->nvrtc_major);
    put_u32(out, (uint32_t)e->nvrtc_minor);
    double us = e->compile_seconds > 0 ? e->compile_seconds * 1e6 : 0;
    put_u64(out, (uint64_t)llround(us));
    put_u64(out, (uint64_t)e->created_unix);
    put_u32(out, (uint32_t)e->n_kernels);
    for (int i = 0; i < e->n_kernels; i++) {
        const mj_kernel_info *k = &e->kernels[i];
        put_str(out, k->name, strnlen(k->name, MJ_KERNEL_NAME_MAX - 1));
        put_u32(out, (uint32_t)k->registers);
        put_u32(out, (uint32_t)k->shared_bytes);
        put_u32(out, (uint32_t)k->stack_bytes);
        put_u32(out, (uint32_t)k->spill_store_bytes);
        put_u32(out, (uint32_t)k->spill_load_bytes);
    }
    put_str(out, e->cubin, e->cubin_len);
    put_str(out, e->log, len_or0(e->log));
    if (!mj_buf_ok(out)) return mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "entry: out of memory encoding");
    unsigned char md[XXH3_BYTES];
    xxh3_trailer(out->data, out->len, md);
    mj_buf_append(out, md, XXH3_BYTES);
    return mj_buf_ok(out) ? MOEJIT_OK : mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "entry: out of memory encoding");
}

/* ---- reading ------------------------------------------------------------------------ */

typedef struct reader {
    const uint8_t *p, *end;
    int short_read; /* a field ran past the end */
} reader;

static uint32_t get_u32(reader *r)
{
    if (r->end - r->p < 4) {
        r->short_read = 1;
        r->p = r->end;
        return 0;
    }
    uint32_t v = (uint32_t)r->p[0] | (uint32_t)r->p[1] << 8 | (uint32_t)r->p[2] << 16 |
                 (uint32_t)r->p[3] << 24;
    r->p += 4;
    return v;
}

static uint64_t get_u64(reader *r)
{
    uint64_t lo = get_u32(r);
    return lo | (uint64_t)get_u32(r) << 32;
}

/* Points *s at the next str's bytes (not copied). */
static size_t get_str(reader *r, const uint8_t **s)
{
    uint32_t n = get_u32(r);
    if ((size_t)(r->end - r->p) < n) {
        r->short_read = 1;
        r->p = r->end;
        *s = NULL;
        return 0;
    }
    *s = r->p;
    r->p += n;
    return n;
}

static char *dup_text(const uint8_t *s, size_t n)
{
    char *t = malloc(n + 1);
    if (!t) return NULL;
    if (n) memcpy(t, s, n);
    t[n] = '\0';
    return t;
}

void mj_entry_free(mj_entry *e)
{
    if (!e) return;
    free(e->canonical_spec);
    free(e->preimage);
    free(e->arch);
    free(e->cubin);
    free(e->log);
    memset(e, 0, sizeof *e);
}

/* mj_entry_decode; with owned (data itself, malloc'ed), the cubin is moved to its start and
 * the entry takes it: no second copy (and no second set of page faults) of a cubin of MBs. */
static moejit_status decode(const void *data, size_t n, mj_entry *out, mj_entry_fault *fault, uint8_t *owned)
{
    memset(out, 0, sizeof *out);
    const uint8_t *d = data;
    *fault = MJ_ENTRY_OK;
    /* Magic and version are judged before the checksum, so that a foreign file is named as
     * such and a newer format is told apart from corruption. */
    if (n < MAGIC_BYTES) {
        *fault = n && memcmp(d, MJ_ENTRY_MAGIC, n) ? MJ_ENTRY_FOREIGN : MJ_ENTRY_TRUNCATED;
        return MOEJIT_OK;
    }
    if (memcmp(d, MJ_ENTRY_MAGIC, MAGIC_BYTES) != 0) {
        *fault = MJ_ENTRY_FOREIGN;
        return MOEJIT_OK;
    }
    reader r = {d + MAGIC_BYTES, d + n, 0};
    uint32_t version = get_u32(&r);
    if (r.short_read || n < MAGIC_BYTES + 4 + XXH3_BYTES) {
        *fault = MJ_ENTRY_TRUNCATED;
        return MOEJIT_OK;
    }
    /* version 1 (SHA-256 trailer) is still read: packs and older caches hold it */
    if (version != MJ_ENTRY_VERSION && version != 1) {
        *fault = MJ_ENTRY_BAD_VERSION;
        return MOEJIT_OK;
    }
    const size_t trailer = version == 1 ? SHA256_BYTES : XXH3_BYTES;
    if (n < MAGIC_BYTES + 4 + trailer) {
        *fault = MJ_ENTRY_TRUNCATED;
        return MOEJIT_OK;
    }
    unsigned char md[SHA256_BYTES];
    if (trailer_of(version, d, n - trailer, md) != trailer)
        return mj_fail(MOEJIT_ERR_INTERNAL, "entry: libcrypto SHA-256 failed");
    r.end = d + n - trailer;

    const uint8_t *key, *spec, *pre, *arch, *cubin, *log;
    size_t key_n = get_str(&r, &key), spec_n = get_str(&r, &spec), pre_n = get_str(&r, &pre);
    size_t arch_n = get_str(&r, &arch);
    out->nvrtc_major = (int)get_u32(&r);
    out->nvrtc_minor = (int)get_u32(&r);
    out->compile_seconds = (double)get_u64(&r) / 1e6;
    out->created_unix = (int64_t)get_u64(&r);
    uint32_t nk = get_u32(&r);
    if (nk > MJ_MAX_KERNELS) nk = 0, r.short_read = 2;
    for (uint32_t i = 0; i < nk && !r.short_read; i++) {
        mj_kernel_info *k = &out->kernels[i];
        const uint8_t *name;
        size_t nn = get_str(&r, &name);
        if (nn >= MJ_KERNEL_NAME_MAX || (nn && memchr(name, 0, nn))) r.short_read = 2;
        else if (nn) memcpy(k->name, name, nn);
        k->registers = (int32_t)get_u32(&r);
        k->shared_bytes = (int32_t)get_u32(&r);
        k->stack_bytes = (int32_t)get_u32(&r);
        k->spill_store_bytes = (int32_t)get_u32(&r);
        k->spill_load_bytes = (int32_t)get_u32(&r);
    }
    out->n_kernels = (int)nk;
    size_t cubin_n = get_str(&r, &cubin), log_n = get_str(&r, &log);

    /* The trailer decides validity; the parse only names the cause: a file shorter than its
     * own fields say is most likely truncated, anything else is corrupt. */
    if (memcmp(md, d + n - trailer, trailer) != 0) {
        *fault = r.short_read == 1 ? MJ_ENTRY_TRUNCATED : MJ_ENTRY_BAD_CHECKSUM;
        memset(out, 0, sizeof *out);
        return MOEJIT_OK;
    }
    /* Text fields are compared as C strings, so one with a NUL inside ("A\0junk" equal to "A")
     * is malformed, as are kernel names. */
    int nul_in_text = (spec_n && memchr(spec, 0, spec_n)) || (pre_n && memchr(pre, 0, pre_n)) ||
                      (arch_n && memchr(arch, 0, arch_n)) || (key_n && memchr(key, 0, key_n));
    if (r.short_read || r.p != r.end || key_n != 64 || nul_in_text) {
        *fault = MJ_ENTRY_MALFORMED;
        memset(out, 0, sizeof *out);
        return MOEJIT_OK;
    }
    memcpy(out->key, key, 64);
    out->key[64] = '\0';
    out->canonical_spec = dup_text(spec, spec_n);
    out->preimage = dup_text(pre, pre_n);
    out->arch = dup_text(arch, arch_n);
    out->log = dup_text(log, log_n);
    if (owned) { /* the other fields are copied out: the cubin may overwrite them */
        memmove(owned, cubin, cubin_n);
        out->cubin = owned;
    } else {
        out->cubin = malloc(cubin_n ? cubin_n : 1);
        if (out->cubin && cubin_n) memcpy(out->cubin, cubin, cubin_n);
    }
    out->cubin_len = cubin_n;
    if (!out->canonical_spec || !out->preimage || !out->arch || !out->log || !out->cubin) {
        if (owned) out->cubin = NULL; /* mj_entry_decode_owned frees it */
        mj_entry_free(out);
        return mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "entry: out of memory decoding");
    }
    return MOEJIT_OK;
}

moejit_status mj_entry_decode(const void *data, size_t n, mj_entry *out, mj_entry_fault *fault)
{
    return decode(data, n, out, fault, NULL);
}

moejit_status mj_entry_decode_owned(uint8_t *data, size_t n, mj_entry *out, mj_entry_fault *fault)
{
    moejit_status st = decode(data, n, out, fault, data);
    if (st != MOEJIT_OK || *fault != MJ_ENTRY_OK) free(data); /* else out->cubin is data */
    return st;
}

/* ---- program conversion ------------------------------------------------------------- */

/* "nvrtc_version M.m" from a key preimage; 0.0 when absent. */
static void nvrtc_from_preimage(const char *pre, int *major, int *minor)
{
    *major = *minor = 0;
    const char *s = pre ? strstr(pre, "\nnvrtc_version ") : NULL;
    if (s && sscanf(s + 15, "%d.%d", major, minor) != 2) *major = *minor = 0;
}

moejit_status mj_entry_from_program(const mj_program *p, const char *key_hex, const char *preimage,
                                    mj_entry *out)
{
    memset(out, 0, sizeof *out);
    if (!key_hex || strlen(key_hex) != 64)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "entry.key: must be 64 hex digits");
    if (p->n_kernels < 0 || p->n_kernels > MJ_MAX_KERNELS)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "program.n_kernels: %d; allowed: 0..%d",
                       p->n_kernels, MJ_MAX_KERNELS);
    memcpy(out->key, key_hex, 65);
    out->canonical_spec = dup_text((const uint8_t *)p->canonical_spec, len_or0(p->canonical_spec));
    out->preimage = dup_text((const uint8_t *)preimage, len_or0(preimage));
    out->arch = dup_text((const uint8_t *)p->arch, len_or0(p->arch));
    out->log = dup_text((const uint8_t *)p->log, len_or0(p->log));
    out->cubin = malloc(p->cubin_len ? p->cubin_len : 1);
    if (out->cubin && p->cubin_len) memcpy(out->cubin, p->cubin, p->cubin_len);
    out->cubin_len = p->cubin_len;
    nvrtc_from_preimage(preimage, &out->nvrtc_major, &out->nvrtc_minor);
    out->compile_seconds = p->compile_seconds;
    out->created_unix = (int64_t)time(NULL);
    out->n_kernels = p->n_kernels;
    memcpy(out->kernels, p->kernels, sizeof out->kernels);
    if (!out->canonical_spec || !out->preimage || !out->arch || !out->log || !out->cubin) {
        mj_entry_free(out);
        return mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "entry: out of memory");
    }
    return MOEJIT_OK;
}

moejit_status mj_entry_to_program(const mj_entry *e, mj_program *out)
{
    memset(out, 0, sizeof *out);
    out->canonical_spec = dup_text((const uint8_t *)e->canonical_spec, len_or0(e->canonical_spec));
    out->arch = dup_text((const uint8_t *)e->arch, len_or0(e->arch));
    out->log = dup_text((const uint8_t *)e->log, len_or0(e->log));
    out->cubin = malloc(e->cubin_len ? e->cubin_len : 1);
    if (out->cubin && e->cubin_len) memcpy(out->cubin, e->cubin, e->cubin_len);
    out->cubin_len = e->cubin_len;
    out->n_kernels = e->n_kernels;
    memcpy(out->kernels, e->kernels, sizeof out->kernels);
    out->compile_seconds = 0;
    if (!out->canonical_spec || !out->arch || !out->log || !out->cubin) {
        mj_program_free(out);
        return mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "entry: out of memory");
    }
    return MOEJIT_OK;
}

void mj_entry_move_to_program(mj_entry *e, mj_program *out)
{
    memset(out, 0, sizeof *out);
    out->canonical_spec = e->canonical_spec;
    out->arch = e->arch;
    out->log = e->log;
    out->cubin = e->cubin;
    out->cubin_len = e->cubin_len;
    out->n_kernels = e->n_kernels;
    memcpy(out->kernels, e->kernels, sizeof out->kernels);
    out->compile_seconds = 0;
    e->canonical_spec = e->arch = e->log = NULL;
    e->cubin = NULL;
    mj_entry_free(e);
}
