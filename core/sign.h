/*
 * sign.h — HMAC-SHA256 authentication of bytes under a secret key read from a file: the one
 * scheme for everything moejit accepts from elsewhere (cache packs now, a remote cache tier
 * later), so that a cubin nobody with the key produced is never loaded onto the GPU.
 *
 * The key is the whole content of its file (16 to 1024 bytes; e.g. `head -c 32 /dev/urandom >
 * pack.key && chmod 600 pack.key`). The file must be a regular file owned by the effective
 * user (or root) and neither readable nor writable by group or others: a key others can read
 * lets them sign. Its id (8 bytes of a SHA-256 over it) travels with a signature, so that a
 * signature made under another key is reported as such, not as tampering.
 */
#ifndef MJ_SIGN_H
#define MJ_SIGN_H

#include <stddef.h>

#include "moejit.h"

#define MJ_SIGN_MAC_BYTES 32
#define MJ_SIGN_ID_BYTES 8
#define MJ_SIGN_KEY_MIN 16
#define MJ_SIGN_KEY_MAX 1024

typedef struct mj_sign_key {
    unsigned char bytes[MJ_SIGN_KEY_MAX];
    size_t len;
    unsigned char id[MJ_SIGN_ID_BYTES];
    char id_hex[2 * MJ_SIGN_ID_BYTES + 1];
    char path[512]; /* where it was read from, for messages */
} mj_sign_key;

/* Loads the key file at path, checking type, owner and mode. `setting` names where the path
 * came from in messages ("--key", "MOEJIT_PACK_KEY_FILE"). MOEJIT_ERR_IO or
 * MOEJIT_ERR_INVALID_ARGUMENT with a message naming the file and the fix. */
moejit_status mj_sign_key_load(const char *setting, const char *path, mj_sign_key *out);
/* Overwrites the key's bytes (call when done with it). */
void mj_sign_key_wipe(mj_sign_key *key);

/* mac = HMAC-SHA256(key, data[0..n)). */
moejit_status mj_sign_mac(const mj_sign_key *key, const void *data, size_t n,
                          unsigned char mac[MJ_SIGN_MAC_BYTES]);
/* 1 when mac is HMAC-SHA256(key, data) (compared in constant time), else 0. */
int mj_sign_check(const mj_sign_key *key, const void *data, size_t n,
                  const unsigned char mac[MJ_SIGN_MAC_BYTES]);

#endif
