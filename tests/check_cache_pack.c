/*
 * This file contains the tests of pack import's checks (cache/pack.c) on crafted packs: a
 * record whose key is not the SHA-256 of its preimage, whose spec is not its preimage's, a
 * swapped cubin with every checksum recomputed, a duplicated key, a bad signature, a pack
 * signed under another key, an unsigned pack without --trust-unsigned; each is refused whole
 * with a message naming the record or the signature, and a good signed pack imports. Also the
 * key file's permission check and verify's key and spec checks.
 */
#include <check.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/cache.h"
#include "cache/fault.h"
#include "cache/store.h"
#include "core/sign.h"
#include "lib/cache_test_util.h"
#include "lib/check_main.h"

static mj_test_cache T;
static char pack_path[400];

static void setup(void)
{
    mj_test_cache_init(&T);
    mj_cache_fault_clear_all();
    mj_cache_fault_reset_warnings();
    snprintf(pack_path, sizeof pack_path, "%s/crafted.mjkpack", T.root);
}

static void teardown(void) { mj_test_cache_cleanup(&T); }

#define SPEC_A "backend=simt,quant=bf16,act=relu2,arch=sm_90a"
#define SPEC_G "backend=simt,quant=bf16,act=gelu,arch=sm_90a"

/* One record: an entry (its key, stored spec and preimage) with a cubin from seed. */
typedef struct rec {
    char key[65];          /* the record's key (normally the entry's) */
    mj_entry e;
    char pre[512];
    unsigned char cubin[256];
} rec;

static void make_rec(rec *r, const char *spec_in_preimage, const char *stored_spec, const char *source,
                     unsigned seed)
{
    memset(r, 0, sizeof *r);
    snprintf(r->pre, sizeof r->pre, "moejit-key 1\ngenerator_version 1\nspec %zu:%s\nsource %s\nnvrtc_version 13.0\n",
             strlen(spec_in_preimage), spec_in_preimage, source);
    ck_assert_int_eq(mj_sha256_hex(r->pre, strlen(r->pre), r->e.key), MOEJIT_OK);
    memcpy(r->key, r->e.key, 65);
    r->e.canonical_spec = (char *)stored_spec;
    r->e.preimage = r->pre;
    r->e.arch = (char *)"sm_90a";
    r->e.nvrtc_major = 13;
    r->e.n_kernels = 1;
    snprintf(r->e.kernels[0].name, MJ_KERNEL_NAME_MAX, "mj_gemm1");
    for (size_t i = 0; i < sizeof r->cubin; i++) r->cubin[i] = (unsigned char)(seed * 31 + i);
    r->e.cubin = r->cubin;
    r->e.cubin_len = sizeof r->cubin;
    r->e.log = (char *)"";
}

static void put_u32(mj_buf *b, uint32_t v)
{
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    mj_buf_append(b, x, 4);
}

/* Writes a pack of the records, signed under key when not NULL (mac_flip: corrupt the MAC
 * and then recompute the checksum, as a forger would). */
static void write_pack(rec *const *recs, int n, const mj_sign_key *key, int mac_flip)
{
    mj_buf b = MJ_BUF_INIT, enc = MJ_BUF_INIT;
    mj_buf_append(&b, "MJKPACK1", 8);
    put_u32(&b, key ? 2 : 1);
    put_u32(&b, (uint32_t)n);
    for (int i = 0; i < n; i++) {
        ck_assert_int_eq(mj_entry_encode(&recs[i]->e, &enc), MOEJIT_OK);
        put_u32(&b, 64);
        mj_buf_append(&b, recs[i]->key, 64);
        put_u32(&b, (uint32_t)enc.len);
        mj_buf_append(&b, enc.data, enc.len);
    }
    if (key) {
        unsigned char mac[32];
        mj_buf_append(&b, key->id, MJ_SIGN_ID_BYTES);
        ck_assert_int_eq(mj_sign_mac(key, b.data, b.len, mac), MOEJIT_OK);
        if (mac_flip) mac[5] ^= 1;
        mj_buf_append(&b, mac, 32);
    }
    unsigned char md[32];
    unsigned len = 0;
    ck_assert(EVP_Digest(b.data, b.len, md, &len, EVP_sha256(), NULL) == 1);
    mj_buf_append(&b, md, 32);
    ck_assert(mj_buf_ok(&b));
    FILE *f = fopen(pack_path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fwrite(b.data, 1, b.len, f), b.len);
    ck_assert_int_eq(fclose(f), 0);
    mj_buf_free(&b);
    mj_buf_free(&enc);
}

static void make_key(const char *name, unsigned char fill, mj_sign_key *out)
{
    char path[400];
    snprintf(path, sizeof path, "%s/%s", T.root, name);
    unsigned char bytes[32];
    memset(bytes, fill, sizeof bytes);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, bytes, sizeof bytes), (ssize_t)sizeof bytes);
    close(fd);
    ck_assert_msg(mj_sign_key_load("--key", path, out) == MOEJIT_OK, "%s", moejit_last_error());
}

static int count_entries(mj_cache *c)
{
    mj_cache_verify_result r;
    ck_assert_int_eq(mj_cache_verify(c, &r), MOEJIT_OK);
    return (int)r.ok;
}

/* Imports the crafted pack with key (trust: --trust-unsigned), expecting refusal with every
 * needle in the message and nothing added. */
static void expect_refused(mj_cache *c, const mj_sign_key *key, int trust, const char *needle1, const char *needle2)
{
    int before = count_entries(c);
    mj_pack_opts o = {key, trust};
    int64_t added = -1, present = -1;
    ck_assert_int_eq(mj_cache_import(c, pack_path, &o, &added, &present), MOEJIT_ERR_INVALID_ARGUMENT);
    const char *msg = moejit_last_error();
    ck_assert_msg(strstr(msg, needle1) && (!needle2 || strstr(msg, needle2)), "message: %s", msg);
    ck_assert_msg(strstr(msg, "refused whole"), "message: %s", msg);
    ck_assert_int_eq(added, 0);
    ck_assert_int_eq(count_entries(c), before);
}

START_TEST(a_good_signed_pack_imports)
{
    mj_cache *c = mj_test_cache_open(&T);
    mj_sign_key key;
    make_key("pack.key", 0x5a, &key);
    static rec a, g;
    make_rec(&a, SPEC_A, SPEC_A, "a", 1);
    make_rec(&g, SPEC_G, SPEC_G, "g", 2);
    rec *recs[] = {&a, &g};
    write_pack(recs, 2, &key, 0);
    mj_pack_opts o = {&key, 0};
    int64_t added = 0, present = 0;
    ck_assert_msg(mj_cache_import(c, pack_path, &o, &added, &present) == MOEJIT_OK, "%s", moejit_last_error());
    ck_assert_int_eq(added, 2);
    mj_program p;
    int found = 0;
    ck_assert_int_eq(mj_cache_lookup(c, a.key, SPEC_A, &p, &found), MOEJIT_OK);
    ck_assert_int_eq(found, 1);
    ck_assert_mem_eq(p.cubin, a.cubin, sizeof a.cubin);
    mj_program_free(&p);
    ck_assert_int_eq(count_entries(c), 2);
    mj_cache_close(c);
}
END_TEST

START_TEST(a_key_that_is_not_the_hash_of_its_preimage_is_refused)
{
    mj_cache *c = mj_test_cache_open(&T);
    mj_sign_key key;
    make_key("pack.key", 0x5a, &key);
    static rec a, bad;
    make_rec(&a, SPEC_A, SPEC_A, "a", 1);
    make_rec(&bad, SPEC_G, SPEC_G, "g", 2);
    mj_key other = mj_test_key("unrelated");
    memcpy(bad.key, other.hex, 65);
    memcpy(bad.e.key, other.hex, 65);
    rec *recs[] = {&a, &bad};
    write_pack(recs, 2, &key, 0);
    expect_refused(c, &key, 0, "record 1", "not the SHA-256 of its preimage");
    mj_cache_close(c);
}
END_TEST

START_TEST(a_spec_that_is_not_its_preimages_is_refused_and_the_good_entry_stays)
{
    mj_cache *c = mj_test_cache_open(&T);
    mj_sign_key key;
    make_key("pack.key", 0x5a, &key);
    static rec a, evil;
    make_rec(&a, SPEC_A, SPEC_A, "a", 1);
    rec *one[] = {&a};
    write_pack(one, 1, &key, 0);
    mj_pack_opts o = {&key, 0};
    ck_assert_int_eq(mj_cache_import(c, pack_path, &o, NULL, NULL), MOEJIT_OK);
    /* Under A's key and preimage, but storing the gelu spec. */
    make_rec(&evil, SPEC_A, SPEC_G, "a", 9);
    rec *recs[] = {&evil};
    write_pack(recs, 1, &key, 0);
    expect_refused(c, &key, 0, "record 0", "differs from its preimage's spec");
    mj_program p;
    int found = 0;
    ck_assert_int_eq(mj_cache_lookup(c, a.key, SPEC_A, &p, &found), MOEJIT_OK);
    ck_assert_int_eq(found, 1); /* the good A entry was neither replaced nor quarantined */
    ck_assert_mem_eq(p.cubin, a.cubin, sizeof a.cubin);
    mj_program_free(&p);
    mj_cache_close(c);
}
END_TEST

START_TEST(a_swapped_cubin_with_valid_checksums_is_refused_by_the_signature)
{
    mj_cache *c = mj_test_cache_open(&T);
    mj_sign_key key, forger;
    make_key("pack.key", 0x5a, &key);
    make_key("forger.key", 0x33, &forger);
    static rec a;
    make_rec(&a, SPEC_A, SPEC_A, "a", 1);
    rec *recs[] = {&a};
    /* A's key, preimage and spec, another kernel's cubin; entry and pack checksums recomputed,
     * and the signature either kept from the genuine pack or made under the forger's key. */
    memset(a.cubin, 0xcc, sizeof a.cubin);
    write_pack(recs, 1, &key, 1);
    expect_refused(c, &key, 0, "bad signature", NULL);
    expect_refused(c, &key, 1, "bad signature", NULL); /* --trust-unsigned does not excuse it */
    write_pack(recs, 1, &forger, 0);
    expect_refused(c, &key, 0, "signed under another key", forger.id_hex);
    write_pack(recs, 1, NULL, 0);
    expect_refused(c, &key, 0, "is not signed", "--trust-unsigned");
    mj_cache_close(c);
}
END_TEST

START_TEST(a_duplicated_key_is_refused)
{
    mj_cache *c = mj_test_cache_open(&T);
    mj_sign_key key;
    make_key("pack.key", 0x5a, &key);
    static rec a, g, a2;
    make_rec(&a, SPEC_A, SPEC_A, "a", 1);
    make_rec(&g, SPEC_G, SPEC_G, "g", 2);
    make_rec(&a2, SPEC_A, SPEC_A, "a", 3);
    rec *recs[] = {&a, &g, &a2};
    write_pack(recs, 3, &key, 0);
    expect_refused(c, &key, 0, "record 2", "duplicates record 0");
    mj_cache_close(c);
}
END_TEST

START_TEST(unsigned_packs_need_trust_and_signed_ones_a_key)
{
    mj_cache *c = mj_test_cache_open(&T);
    mj_sign_key key;
    make_key("pack.key", 0x5a, &key);
    static rec a;
    make_rec(&a, SPEC_A, SPEC_A, "a", 1);
    rec *recs[] = {&a};
    write_pack(recs, 1, NULL, 0);
    expect_refused(c, NULL, 0, "is not signed", "--trust-unsigned");
    expect_refused(c, &key, 0, "is not signed", NULL);
    mj_pack_opts trust = {NULL, 1};
    int64_t added = 0;
    ck_assert_int_eq(mj_cache_import(c, pack_path, &trust, &added, NULL), MOEJIT_OK);
    ck_assert_int_eq(added, 1);
    ck_assert_int_eq(mj_cache_clear(c, NULL), MOEJIT_OK);
    write_pack(recs, 1, &key, 0);
    expect_refused(c, NULL, 0, "signed but no key", "MOEJIT_PACK_KEY_FILE");
    /* A good pack made by export, signed and then imported under the same key. */
    ck_assert_int_eq(mj_cache_import(c, pack_path, &trust, NULL, NULL), MOEJIT_OK);
    char out[400];
    snprintf(out, sizeof out, "%s/exported.mjkpack", T.root);
    mj_pack_opts sign = {&key, 0};
    int64_t n = 0;
    ck_assert_int_eq(mj_cache_export(c, out, NULL, NULL, &sign, &n), MOEJIT_OK);
    ck_assert_int_eq(n, 1);
    ck_assert_int_eq(mj_cache_clear(c, NULL), MOEJIT_OK);
    ck_assert_msg(mj_cache_import(c, out, &sign, &added, NULL) == MOEJIT_OK, "%s", moejit_last_error());
    ck_assert_int_eq(added, 1);
    mj_cache_close(c);
}
END_TEST

START_TEST(a_key_file_others_can_read_is_refused_by_name)
{
    char path[400];
    snprintf(path, sizeof path, "%s/loose.key", T.root);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "0123456789abcdef0123456789abcdef", 32), 32);
    close(fd);
    mj_sign_key key;
    ck_assert_int_eq(chmod(path, 0640), 0);
    ck_assert_int_eq(mj_sign_key_load("--key", path, &key), MOEJIT_ERR_IO);
    ck_assert_msg(strstr(moejit_last_error(), path) && strstr(moejit_last_error(), "chmod 600"), "%s",
                  moejit_last_error());
    ck_assert_int_eq(chmod(path, 0604), 0);
    ck_assert_int_eq(mj_sign_key_load("--key", path, &key), MOEJIT_ERR_IO);
    ck_assert_int_eq(chmod(path, 0600), 0);
    ck_assert_int_eq(mj_sign_key_load("--key", path, &key), MOEJIT_OK);
    /* Too short to be a key. */
    ck_assert_int_eq(truncate(path, 8), 0);
    ck_assert_int_eq(mj_sign_key_load("--key", path, &key), MOEJIT_ERR_INVALID_ARGUMENT);
}
END_TEST

START_TEST(verify_checks_the_key_against_the_preimage_and_the_spec)
{
    mj_cache *c = mj_test_cache_open(&T);
    static rec a, g, bad;
    make_rec(&a, SPEC_A, SPEC_A, "a", 1);
    make_rec(&g, SPEC_A, SPEC_G, "g", 2);   /* spec differs from its preimage's */
    make_rec(&bad, SPEC_A, SPEC_A, "b", 3);
    mj_key other = mj_test_key("unrelated"); /* key unrelated to its preimage */
    memcpy(bad.key, other.hex, 65);
    mj_program p;
    rec *all[] = {&a, &g, &bad};
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(mj_entry_to_program(&all[i]->e, &p), MOEJIT_OK);
        ck_assert_int_eq(mj_cache_put(c, all[i]->key, all[i]->pre, all[i]->e.canonical_spec, &p), MOEJIT_OK);
        mj_program_free(&p);
    }
    mj_cache_verify_result r;
    mj_test_stderr_begin();
    ck_assert_int_eq(mj_cache_verify(c, &r), MOEJIT_OK);
    mj_test_stderr_end();
    ck_assert_int_eq(r.checked, 3);
    ck_assert_int_eq(r.ok, 1);
    ck_assert_int_eq(r.bad, 2);
    mj_cache_close(c);
}
END_TEST

static Suite *cache_pack_suite(void)
{
    Suite *s = suite_create("cache_pack");
    TCase *tc = tcase_create("pack");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, a_good_signed_pack_imports);
    tcase_add_test(tc, a_key_that_is_not_the_hash_of_its_preimage_is_refused);
    tcase_add_test(tc, a_spec_that_is_not_its_preimages_is_refused_and_the_good_entry_stays);
    tcase_add_test(tc, a_swapped_cubin_with_valid_checksums_is_refused_by_the_signature);
    tcase_add_test(tc, a_duplicated_key_is_refused);
    tcase_add_test(tc, unsigned_packs_need_trust_and_signed_ones_a_key);
    tcase_add_test(tc, a_key_file_others_can_read_is_refused_by_name);
    tcase_add_test(tc, verify_checks_the_key_against_the_preimage_and_the_spec);
    suite_add_tcase(s, tc);
    return s;
}

MJ_CHECK_MAIN(cache_pack_suite)
