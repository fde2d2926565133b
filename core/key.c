/*
 * This file contains the cache key: SHA-256 over a tagged, length-delimited text preimage of
 * everything that changes the compiled binary, and the SHA-256 helper the cache uses for
 * header digests and entry checksums.
 *
 * SHA-256 comes from OpenSSL's libcrypto (EVP_Digest with EVP_sha256), never a hand-written
 * hash: the key must be collision-resistant (two different programs with one key would load
 * the wrong cubin onto the GPU), and this is audited code, where a well-kept, widely reviewed
 * implementation is worth more than avoiding a dependency.
 *
 * Preimage grammar (one field per line, in this fixed order; <n> is the decimal byte length of
 * the value that follows the colon, so a value may hold any byte, even a newline, and no two
 * different inputs produce one preimage):
 *
 *   moejit-key 1
 *   generator_version <decimal>
 *   spec <n>:<canonical spec>
 *   source <sha256 hex> <n>
 *   header <n>:<name> <sha256 hex> <n>       (one per header, in the given order: the
 *                                            headers the compile reads, codegen/include_closure.h)
 *   option <n>:<option>                     (one per option, in the given order)
 *   arch <n>:<arch>
 *   nvrtc_version <major>.<minor>
 *   nvrtc_build_id <n>:<build id>
 *
 * Header and source bytes enter through their digests and lengths, which keeps the stored
 * preimage small enough to keep beside every entry and to diff for `moejit inspect --why`.
 */
#include "core/key.h"

#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/status.h"

/* Bumped when the preimage grammar above changes, so old keys can never collide with new. */
#define PREIMAGE_VERSION 1

static void prewarm_once(void)
{
    char hex[65];
    (void)mj_sha256_hex("", 0, hex);
}

void mj_sha256_prewarm(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, prewarm_once);
}

moejit_status mj_sha256_hex(const void *data, size_t n, char hex[65])
{
    static const char digits[] = "0123456789abcdef";
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int md_len = 0;
    if (!data && n) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "sha256: data is NULL with length %zu", n);
    if (EVP_Digest(n ? data : "", n, md, &md_len, EVP_sha256(), NULL) != 1 || md_len != 32)
        return mj_fail(MOEJIT_ERR_INTERNAL, "sha256: libcrypto EVP_Digest(EVP_sha256) failed");
    for (unsigned i = 0; i < 32; i++) {
        hex[2 * i] = digits[md[i] >> 4];
        hex[2 * i + 1] = digits[md[i] & 15];
    }
    hex[64] = '\0';
    return MOEJIT_OK;
}

/* "tag <n>:<value>\n" — the length prefix is what makes the field unambiguous. */
static void put_field(mj_buf *b, const char *tag, const char *value, size_t n)
{
    mj_buf_printf(b, "%s %zu:", tag, n);
    mj_buf_append(b, value, n);
    mj_buf_puts(b, "\n");
}

static moejit_status check_inputs(const mj_key_inputs *in)
{
    if (!in) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "key: inputs are NULL");
    if (!in->canonical_spec)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "key.canonical_spec: is NULL; allowed: a canonical spec string");
    if (!in->source && in->source_len)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "key.source: is NULL with length %zu", in->source_len);
    if (!in->headers && in->n_headers)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "key.headers: is NULL with count %zu", in->n_headers);
    for (size_t i = 0; i < in->n_headers; i++)
        if (!in->headers[i].name || (!in->headers[i].data && in->headers[i].size))
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "key.headers[%zu]: name or data is NULL", i);
    if (in->n_options < 0 || (!in->options && in->n_options))
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "key.options: NULL or negative count %d", in->n_options);
    for (int i = 0; i < in->n_options; i++)
        if (!in->options[i])
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "key.options[%d]: is NULL", i);
    if (!in->arch || !*in->arch)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "key.arch: is empty; allowed: an NVRTC target such as sm_90a");
    return MOEJIT_OK;
}

moejit_status mj_key_compute(const mj_key_inputs *in, mj_key *out, mj_buf *preimage)
{
    moejit_status st = check_inputs(in);
    if (st != MOEJIT_OK) return st;
    if (!out) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "key: output is NULL");

    mj_buf b = MJ_BUF_INIT;
    char hex[65];
    mj_buf_printf(&b, "moejit-key %d\n", PREIMAGE_VERSION);
    mj_buf_printf(&b, "generator_version %d\n", in->generator_version);
    put_field(&b, "spec", in->canonical_spec, strlen(in->canonical_spec));
    if ((st = mj_sha256_hex(in->source, in->source_len, hex)) != MOEJIT_OK) goto done;
    mj_buf_printf(&b, "source %s %zu\n", hex, in->source_len);
    for (size_t i = 0; i < in->n_headers; i++) {
        const mj_header *h = &in->headers[i];
        if (in->header_sha256) memcpy(hex, in->header_sha256[i], sizeof hex);
        else if ((st = mj_sha256_hex(h->data, h->size, hex)) != MOEJIT_OK) goto done;
        mj_buf_printf(&b, "header %zu:%s %s %zu\n", strlen(h->name), h->name, hex, h->size);
    }
    for (int i = 0; i < in->n_options; i++) put_field(&b, "option", in->options[i], strlen(in->options[i]));
    put_field(&b, "arch", in->arch, strlen(in->arch));
    mj_buf_printf(&b, "nvrtc_version %d.%d\n", in->nvrtc_major, in->nvrtc_minor);
    const char *bid = in->nvrtc_build_id ? in->nvrtc_build_id : "unknown";
    put_field(&b, "nvrtc_build_id", bid, strlen(bid));

    if (!mj_buf_ok(&b)) {
        st = mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "key: out of memory building the preimage");
        goto done;
    }
    if ((st = mj_sha256_hex(b.data, b.len, out->hex)) != MOEJIT_OK) goto done;
    if (preimage) {
        mj_buf_reset(preimage);
        mj_buf_append(preimage, b.data, b.len);
        if (!mj_buf_ok(preimage)) st = mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "key: out of memory copying the preimage");
    }
done:
    mj_buf_free(&b);
    return st;
}
