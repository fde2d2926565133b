/*
 * This file contains the tests of the entry codec (cache/entry.c): a round trip keeps every
 * field, version 2's bytes are pinned, version 1's (SHA-256 trailer) still decode, and each kind of
 * damage is named by its own fault.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/entry.h"
#include "core/key.h"
#include "lib/check_main.h"

#include <xxhash.h>

/* SHA-256 of the sample entry encoded by format version 2. */
#define GOLDEN "528504ca6ad6b70a123b88a09a19c39438396bb0326913a3c00e32238f38e0ca"
/* ... and by format version 1, as the encoder wrote it before version 2. */
#define GOLDEN_V1 "7b865db0dea5e5c8edf15cf5a12595c2746a2cf2b8ba6b19d4fa938a1b512444"

static void sample(mj_entry *e)
{
    memset(e, 0, sizeof *e);
    memset(e->key, 'a', 64);
    e->canonical_spec = strdup("backend=simt,act=silu");
    e->preimage = strdup("moejit-key 1\nnvrtc_version 13.0\n");
    e->arch = strdup("sm_90a");
    e->nvrtc_major = 13;
    e->compile_seconds = 1.25;
    e->created_unix = 1700000000;
    e->n_kernels = 1;
    strcpy(e->kernels[0].name, "mj_gemm1");
    e->kernels[0].registers = 96;
    e->kernels[0].shared_bytes = 49152;
    e->kernels[0].stack_bytes = 8;
    e->kernels[0].spill_store_bytes = 12;
    e->kernels[0].spill_load_bytes = 16;
    e->cubin_len = 300;
    e->cubin = malloc(300);
    for (int i = 0; i < 300; i++) e->cubin[i] = (uint8_t)(i * 7);
    e->log = strdup("ptxas info : Used 96 registers");
}

static mj_entry_fault decode(const mj_buf *b, mj_entry *out)
{
    mj_entry_fault f;
    ck_assert_int_eq(mj_entry_decode(b->data, b->len, out, &f), MOEJIT_OK);
    return f;
}

START_TEST(a_round_trip_keeps_every_field)
{
    mj_entry e, d;
    sample(&e);
    mj_buf b = MJ_BUF_INIT;
    ck_assert_int_eq(mj_entry_encode(&e, &b), MOEJIT_OK);
    ck_assert_int_eq(decode(&b, &d), MJ_ENTRY_OK);
    ck_assert_str_eq(d.key, e.key);
    ck_assert_str_eq(d.canonical_spec, e.canonical_spec);
    ck_assert_str_eq(d.preimage, e.preimage);
    ck_assert_str_eq(d.arch, "sm_90a");
    ck_assert_int_eq(d.nvrtc_major, 13);
    ck_assert(d.compile_seconds == 1.25);
    ck_assert_int_eq(d.created_unix, 1700000000);
    ck_assert_int_eq(d.n_kernels, 1);
    ck_assert_str_eq(d.kernels[0].name, "mj_gemm1");
    ck_assert_int_eq(d.kernels[0].registers, 96);
    ck_assert_int_eq(d.kernels[0].shared_bytes, 49152);
    ck_assert_int_eq(d.kernels[0].stack_bytes, 8);
    ck_assert_int_eq(d.kernels[0].spill_store_bytes, 12);
    ck_assert_int_eq(d.kernels[0].spill_load_bytes, 16);
    ck_assert_uint_eq(d.cubin_len, 300);
    ck_assert_mem_eq(d.cubin, e.cubin, 300);
    ck_assert_str_eq(d.log, e.log);
    /* Encoding is deterministic: the decoded entry encodes to the same bytes. */
    mj_buf b2 = MJ_BUF_INIT;
    ck_assert_int_eq(mj_entry_encode(&d, &b2), MOEJIT_OK);
    ck_assert_uint_eq(b2.len, b.len);
    ck_assert_mem_eq(b2.data, b.data, b.len);
    mj_entry_free(&e), mj_entry_free(&d), mj_buf_free(&b), mj_buf_free(&b2);
}
END_TEST

START_TEST(version_2_bytes_are_pinned)
{
    mj_entry e;
    sample(&e);
    mj_buf b = MJ_BUF_INIT;
    ck_assert_int_eq(mj_entry_encode(&e, &b), MOEJIT_OK);
    ck_assert_mem_eq(b.data, "MJKENTRY\x02\x00\x00\x00\x40\x00\x00\x00", 16);
    ck_assert_mem_eq(b.data + 16, e.key, 64);
    /* The trailer is the XXH3-64 of everything before it, little-endian. */
    const XXH64_hash_t h = XXH3_64bits(b.data, b.len - 8);
    for (int i = 0; i < 8; i++) ck_assert_uint_eq((uint8_t)b.data[b.len - 8 + i], (uint8_t)(h >> (8 * i)));
    /* Golden digest of the whole sample entry: a change here is a format change, which must
     * bump MJ_ENTRY_VERSION. */
    char hex[65];
    ck_assert_int_eq(mj_sha256_hex(b.data, b.len, hex), MOEJIT_OK);
    ck_assert_uint_eq(b.len, 557); /* the sum of the grammar's fields for this sample */
    ck_assert_str_eq(hex, GOLDEN);
    mj_entry_free(&e), mj_buf_free(&b);
}
END_TEST

/* The sample as version 1 wrote it: version 2's fields, version 1, a SHA-256 trailer. */
static void as_version_1(mj_buf *b)
{
    b->len -= 8;
    b->data[8] = 1;
    char hex[65];
    ck_assert_int_eq(mj_sha256_hex(b->data, b->len, hex), MOEJIT_OK);
    for (int i = 0; i < 32; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        const char c = (char)v;
        mj_buf_append(b, &c, 1);
    }
}

START_TEST(version_1_entries_still_decode)
{
    mj_entry e, d;
    sample(&e);
    mj_buf b = MJ_BUF_INIT;
    ck_assert_int_eq(mj_entry_encode(&e, &b), MOEJIT_OK);
    as_version_1(&b);
    char hex[65];
    ck_assert_int_eq(mj_sha256_hex(b.data, b.len, hex), MOEJIT_OK);
    ck_assert_str_eq(hex, GOLDEN_V1); /* byte for byte what version 1's encoder wrote */
    ck_assert_int_eq(decode(&b, &d), MJ_ENTRY_OK);
    ck_assert_str_eq(d.canonical_spec, e.canonical_spec);
    ck_assert_uint_eq(d.cubin_len, 300);
    ck_assert_mem_eq(d.cubin, e.cubin, 300);
    mj_entry_free(&d);
    /* its damage is still found by its SHA-256 */
    b.data[200] ^= 1;
    ck_assert_int_eq(decode(&b, &d), MJ_ENTRY_BAD_CHECKSUM);
    b.data[200] ^= 1;
    for (size_t cut = 0; cut < b.len; cut += 29) {
        const size_t n = b.len;
        b.len = cut;
        ck_assert_int_eq(decode(&b, &d), MJ_ENTRY_TRUNCATED);
        b.len = n;
    }
    mj_entry_free(&e), mj_buf_free(&b);
}
END_TEST

/* The decode a disk load uses takes the file's buffer: the cubin is that buffer, moved to its
 * start; a damaged buffer is freed (ASan's leak check sees both). */
START_TEST(decoding_in_place_keeps_the_buffer_as_the_cubin)
{
    mj_entry e, d;
    sample(&e);
    mj_buf b = MJ_BUF_INIT;
    ck_assert_int_eq(mj_entry_encode(&e, &b), MOEJIT_OK);
    uint8_t *copy = malloc(b.len);
    memcpy(copy, b.data, b.len);
    mj_entry_fault f;
    ck_assert_int_eq(mj_entry_decode_owned(copy, b.len, &d, &f), MOEJIT_OK);
    ck_assert_int_eq(f, MJ_ENTRY_OK);
    ck_assert_ptr_eq(d.cubin, copy);
    ck_assert_uint_eq(d.cubin_len, 300);
    ck_assert_mem_eq(d.cubin, e.cubin, 300);
    ck_assert_str_eq(d.log, e.log);
    ck_assert_str_eq(d.canonical_spec, e.canonical_spec);
    mj_entry_free(&d);
    copy = malloc(b.len);
    memcpy(copy, b.data, b.len);
    copy[200] ^= 1;
    ck_assert_int_eq(mj_entry_decode_owned(copy, b.len, &d, &f), MOEJIT_OK);
    ck_assert_int_eq(f, MJ_ENTRY_BAD_CHECKSUM);
    ck_assert_ptr_null(d.cubin);
    mj_entry_free(&e), mj_buf_free(&b);
}
END_TEST

START_TEST(every_damage_is_named_by_its_fault)
{
    mj_entry e, d;
    sample(&e);
    mj_buf b = MJ_BUF_INIT;
    ck_assert_int_eq(mj_entry_encode(&e, &b), MOEJIT_OK);
    size_t n = b.len;

    b.data[200] ^= 1;
    ck_assert_int_eq(decode(&b, &d), MJ_ENTRY_BAD_CHECKSUM);
    b.data[200] ^= 1;
    b.data[n - 1] ^= 0x80; /* the trailer itself */
    ck_assert_int_eq(decode(&b, &d), MJ_ENTRY_BAD_CHECKSUM);
    b.data[n - 1] ^= 0x80;

    for (size_t cut = 0; cut < n; cut += 37) {
        b.len = cut;
        ck_assert_int_eq(decode(&b, &d), MJ_ENTRY_TRUNCATED);
    }
    b.len = n;

    b.data[0] = 'X';
    ck_assert_int_eq(decode(&b, &d), MJ_ENTRY_FOREIGN);
    b.data[0] = 'M';
    b.data[8] = 3;
    ck_assert_int_eq(decode(&b, &d), MJ_ENTRY_BAD_VERSION);
    b.data[8] = 1; /* version 2's bytes read as version 1: its SHA-256 does not match */
    ck_assert_int_ne(decode(&b, &d), MJ_ENTRY_OK);
    b.data[8] = 2;
    ck_assert_int_eq(decode(&b, &d), MJ_ENTRY_OK);
    mj_entry_free(&d);
    ck_assert_str_eq(mj_entry_fault_name(MJ_ENTRY_BAD_CHECKSUM), "bad checksum");
    mj_entry_free(&e), mj_buf_free(&b);
}
END_TEST

/* Rewrites the trailer after an edit, so that only the edit itself can be refused. */
static void reseal(mj_buf *b)
{
    const XXH64_hash_t h = XXH3_64bits(b->data, b->len - 8);
    for (int i = 0; i < 8; i++) b->data[b->len - 8 + i] = (char)(uint8_t)(h >> (8 * i));
}

/* A stored spec is compared as a C string: "A\0junk" must not read as "A". */
START_TEST(a_nul_inside_a_text_field_is_malformed)
{
    mj_entry e, d;
    sample(&e);
    mj_buf b = MJ_BUF_INIT;
    ck_assert_int_eq(mj_entry_encode(&e, &b), MOEJIT_OK);
    /* header (12) + key (4 + 64), then the spec's length and its bytes */
    ck_assert_mem_eq(b.data + 84, "backend=simt", 12);
    b.data[84 + 12] = '\0';
    reseal(&b);
    ck_assert_int_eq(decode(&b, &d), MJ_ENTRY_MALFORMED);
    mj_entry_free(&e), mj_buf_free(&b);
}
END_TEST

START_TEST(program_conversion_copies_and_reads_nvrtc_from_the_preimage)
{
    mj_program p;
    memset(&p, 0, sizeof p);
    p.canonical_spec = strdup("backend=simt");
    p.arch = strdup("sm_80");
    p.log = strdup("log");
    p.cubin = malloc(4);
    memcpy(p.cubin, "\x7f" "ELF", 4);
    p.cubin_len = 4;
    p.n_kernels = 1;
    strcpy(p.kernels[0].name, "k");
    p.compile_seconds = 0.5;
    char key[65];
    memset(key, 'b', 64);
    key[64] = '\0';
    mj_entry e;
    ck_assert_int_eq(mj_entry_from_program(&p, key, "x\nnvrtc_version 12.9\n", &e), MOEJIT_OK);
    ck_assert_int_eq(e.nvrtc_major, 12);
    ck_assert_int_eq(e.nvrtc_minor, 9);
    ck_assert(e.created_unix > 1700000000);
    mj_program q;
    ck_assert_int_eq(mj_entry_to_program(&e, &q), MOEJIT_OK);
    ck_assert_mem_eq(q.cubin, p.cubin, 4);
    ck_assert_str_eq(q.arch, "sm_80");
    ck_assert(q.compile_seconds == 0);
    mj_program_free(&p), mj_program_free(&q), mj_entry_free(&e);
}
END_TEST

static Suite *cache_entry_suite(void)
{
    Suite *s = suite_create("cache_entry");
    TCase *tc = tcase_create("entry");
    tcase_add_test(tc, a_round_trip_keeps_every_field);
    tcase_add_test(tc, version_2_bytes_are_pinned);
    tcase_add_test(tc, version_1_entries_still_decode);
    tcase_add_test(tc, decoding_in_place_keeps_the_buffer_as_the_cubin);
    tcase_add_test(tc, every_damage_is_named_by_its_fault);
    tcase_add_test(tc, a_nul_inside_a_text_field_is_malformed);
    tcase_add_test(tc, program_conversion_copies_and_reads_nvrtc_from_the_preimage);
    suite_add_tcase(s, tc);
    return s;
}

MJ_CHECK_MAIN(cache_entry_suite)
