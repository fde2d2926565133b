/*
 * This file contains the key file loader (type, owner and mode checks) and HMAC-SHA256
 * signing and checking with OpenSSL's libcrypto (see sign.h).
 */
#include "core/sign.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/file.h"
#include "core/status.h"

/* Domain separation: the id is never the first bytes of a MAC or of a plain digest. */
#define ID_LABEL "moejit-sign-key-id-1"

moejit_status mj_sign_key_load(const char *setting, const char *path, mj_sign_key *out)
{
    memset(out, 0, sizeof *out);
    if (!path || !*path)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "%s: empty path; allowed: a key file (chmod 600)",
                       setting);
    snprintf(out->path, sizeof out->path, "%s", path);
    uint8_t *data = NULL;
    size_t n = 0;
    struct stat st;
    moejit_status rc = mj_file_read(setting, path, 0, MJ_SIGN_KEY_MAX, &data, &n, &st);
    if (rc != MOEJIT_OK) return rc;
    uid_t me = geteuid();
    if (st.st_uid != me && st.st_uid != 0)
        rc = mj_fail(MOEJIT_ERR_IO, "%s: key file %s is owned by uid %u, not by you (uid %u) or root; a "
                     "key another user controls can sign anything; allowed: a key file you own",
                     setting, path, (unsigned)st.st_uid, (unsigned)me);
    else if (st.st_mode & 077)
        rc = mj_fail(MOEJIT_ERR_IO, "%s: key file %s is readable or writable by group or others (mode "
                     "%04o); whoever reads the key can sign packs; allowed: chmod 600 %s", setting, path,
                     (unsigned)(st.st_mode & 07777), path);
    else if (n < MJ_SIGN_KEY_MIN)
        rc = mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "%s: key file %s holds %zu bytes; allowed: %d to %d "
                     "(e.g. head -c 32 /dev/urandom > FILE)", setting, path, n, MJ_SIGN_KEY_MIN,
                     MJ_SIGN_KEY_MAX);
    if (rc == MOEJIT_OK) {
        memcpy(out->bytes, data, n);
        out->len = n;
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned md_len = 0;
        EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1 ||
            EVP_DigestUpdate(ctx, ID_LABEL, sizeof ID_LABEL) != 1 || EVP_DigestUpdate(ctx, data, n) != 1 ||
            EVP_DigestFinal_ex(ctx, md, &md_len) != 1 || md_len < MJ_SIGN_ID_BYTES)
            rc = mj_fail(MOEJIT_ERR_INTERNAL, "%s: libcrypto SHA-256 failed", setting);
        EVP_MD_CTX_free(ctx);
        memcpy(out->id, md, MJ_SIGN_ID_BYTES);
        for (int i = 0; i < MJ_SIGN_ID_BYTES; i++) snprintf(out->id_hex + 2 * i, 3, "%02x", out->id[i]);
    }
    OPENSSL_cleanse(data, n);
    free(data);
    if (rc != MOEJIT_OK) mj_sign_key_wipe(out);
    return rc;
}

void mj_sign_key_wipe(mj_sign_key *key)
{
    OPENSSL_cleanse(key->bytes, sizeof key->bytes);
    key->len = 0;
}

moejit_status mj_sign_mac(const mj_sign_key *key, const void *data, size_t n,
                          unsigned char mac[MJ_SIGN_MAC_BYTES])
{
    unsigned len = 0;
    if (!key || key->len < MJ_SIGN_KEY_MIN)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "sign: no key loaded");
    if (!HMAC(EVP_sha256(), key->bytes, (int)key->len, n ? data : (const void *)"", n, mac, &len) ||
        len != MJ_SIGN_MAC_BYTES)
        return mj_fail(MOEJIT_ERR_INTERNAL, "sign: libcrypto HMAC-SHA256 failed");
    return MOEJIT_OK;
}

int mj_sign_check(const mj_sign_key *key, const void *data, size_t n,
                  const unsigned char mac[MJ_SIGN_MAC_BYTES])
{
    unsigned char want[MJ_SIGN_MAC_BYTES];
    if (mj_sign_mac(key, data, n, want) != MOEJIT_OK) return 0;
    int same = CRYPTO_memcmp(want, mac, MJ_SIGN_MAC_BYTES) == 0;
    OPENSSL_cleanse(want, sizeof want);
    return same;
}
