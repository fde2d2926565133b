/*
 * This file contains the tests of the cache key (core/key.c): the key depends on every input
 * that changes the binary — one header byte, one option, one activation bit — and on nothing
 * else, and the preimage is the documented tagged text.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "lib/cache_test_util.h"
#include "lib/check_main.h"
#include "core/key.h"
#include "core/status.h"

/* A fixed set of inputs that each test perturbs in exactly one place. */
typedef struct fixture {
    char spec[256];
    char source[64];
    char hdr_a[32], hdr_b[32];
    mj_header headers[2];
    const char *options[3];
    mj_key_inputs in;
} fixture;

static void spec_with_alpha(char *out, size_t cap, float alpha)
{
    mj_buf b = MJ_BUF_INIT;
    mj_buf_puts(&b, "backend=simt,quant=bf16,act=swiglu(alpha=");
    mj_buf_hexfloat(&b, alpha);
    mj_buf_puts(&b, ",beta=0x1p+0,limit=0x1.cp+2),arch=sm_90a");
    snprintf(out, cap, "%s", b.data);
    mj_buf_free(&b);
}

static void fixture_init(fixture *f)
{
    memset(f, 0, sizeof *f);
    spec_with_alpha(f->spec, sizeof f->spec, 1.702f);
    strcpy(f->source, "#include \"mj/a.cuh\"\nextern \"C\" __global__ void k() {}\n");
    strcpy(f->hdr_a, "struct A { int x; };\n");
    strcpy(f->hdr_b, "struct B { int y; };\n");
    f->headers[0] = (mj_header){"mj/a.cuh", f->hdr_a, strlen(f->hdr_a)};
    f->headers[1] = (mj_header){"mj/b.cuh", f->hdr_b, strlen(f->hdr_b)};
    f->options[0] = "--gpu-architecture=sm_90a";
    f->options[1] = "-std=c++17";
    f->options[2] = "--no-cache";
    f->in = (mj_key_inputs){
        .generator_version = 1, .canonical_spec = f->spec, .source = f->source,
        .source_len = strlen(f->source), .headers = f->headers, .n_headers = 2,
        .options = f->options, .n_options = 3, .arch = "sm_90a", .nvrtc_major = 13,
        .nvrtc_minor = 0, .nvrtc_build_id = "0123456789abcdef0123456789abcdef01234567"};
}

static mj_key key_of(const fixture *f)
{
    mj_key k;
    ck_assert_int_eq(mj_key_compute(&f->in, &k, NULL), MOEJIT_OK);
    ck_assert_uint_eq(strlen(k.hex), 64);
    return k;
}

START_TEST(sha256_matches_the_standard_test_vector)
{
    char hex[65];
    ck_assert_int_eq(mj_sha256_hex("abc", 3, hex), MOEJIT_OK);
    ck_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    ck_assert_int_eq(mj_sha256_hex(NULL, 0, hex), MOEJIT_OK);
    ck_assert_str_eq(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}
END_TEST

START_TEST(same_inputs_give_the_same_key)
{
    fixture f1, f2;
    fixture_init(&f1);
    fixture_init(&f2);
    mj_key a = key_of(&f1), b = key_of(&f2);
    ck_assert_str_eq(a.hex, b.hex);
    /* Copies of the inputs at other addresses: no pointer value enters the key. */
    char spec_copy[256];
    strcpy(spec_copy, f1.spec);
    f2.in.canonical_spec = spec_copy;
    ck_assert_str_eq(key_of(&f2).hex, a.hex);
}
END_TEST

START_TEST(precomputed_header_digests_give_the_same_key)
{
    fixture f;
    fixture_init(&f);
    mj_key hashed = key_of(&f);
    char digests[2][65];
    ck_assert_int_eq(mj_sha256_hex(f.hdr_a, strlen(f.hdr_a), digests[0]), MOEJIT_OK);
    ck_assert_int_eq(mj_sha256_hex(f.hdr_b, strlen(f.hdr_b), digests[1]), MOEJIT_OK);
    f.in.header_sha256 = (const char (*)[65])digests;
    ck_assert_str_eq(key_of(&f).hex, hashed.hex);
    /* The digest is what enters the key: a different one changes it. */
    digests[1][0] = digests[1][0] == '0' ? '1' : '0';
    ck_assert_str_ne(key_of(&f).hex, hashed.hex);
}
END_TEST

START_TEST(one_header_byte_changes_the_key)
{
    fixture f;
    fixture_init(&f);
    mj_key base = key_of(&f);
    f.hdr_b[7] ^= 1;
    ck_assert_str_ne(key_of(&f).hex, base.hex);
}
END_TEST

START_TEST(header_name_and_order_change_the_key)
{
    fixture f;
    fixture_init(&f);
    mj_key base = key_of(&f);
    f.headers[0].name = "mj/c.cuh";
    mj_key renamed = key_of(&f);
    ck_assert_str_ne(renamed.hex, base.hex);
    fixture_init(&f);
    mj_header t = f.headers[0];
    f.headers[0] = f.headers[1];
    f.headers[1] = t;
    ck_assert_str_ne(key_of(&f).hex, base.hex);
}
END_TEST

START_TEST(one_option_changes_the_key)
{
    fixture f;
    fixture_init(&f);
    mj_key base = key_of(&f);
    f.options[1] = "-std=c++20";
    ck_assert_str_ne(key_of(&f).hex, base.hex);
    fixture_init(&f);
    f.in.n_options = 2; /* one option dropped */
    ck_assert_str_ne(key_of(&f).hex, base.hex);
}
END_TEST

START_TEST(one_activation_bit_changes_the_key)
{
    fixture f;
    fixture_init(&f);
    mj_key base = key_of(&f);
    float alpha = 1.702f;
    uint32_t bits;
    memcpy(&bits, &alpha, sizeof bits);
    bits ^= 1; /* the lowest mantissa bit */
    memcpy(&alpha, &bits, sizeof bits);
    spec_with_alpha(f.spec, sizeof f.spec, alpha);
    ck_assert_str_ne(key_of(&f).hex, base.hex);
}
END_TEST

START_TEST(every_other_input_changes_the_key)
{
    fixture f;
    fixture_init(&f);
    mj_key base = key_of(&f);
    fixture_init(&f); f.in.generator_version = 2;        ck_assert_str_ne(key_of(&f).hex, base.hex);
    fixture_init(&f); f.source[3] ^= 1;                   ck_assert_str_ne(key_of(&f).hex, base.hex);
    fixture_init(&f); f.in.arch = "sm_100a";             ck_assert_str_ne(key_of(&f).hex, base.hex);
    fixture_init(&f); f.in.nvrtc_minor = 1;              ck_assert_str_ne(key_of(&f).hex, base.hex);
    fixture_init(&f); f.in.nvrtc_build_id = "unknown";   ck_assert_str_ne(key_of(&f).hex, base.hex);
}
END_TEST

START_TEST(length_prefixes_keep_shifted_field_boundaries_apart)
{
    /* "a b" + "c" and "a" + "b c" as two options must not hash alike. */
    fixture f;
    fixture_init(&f);
    f.options[0] = "-Da b";
    f.options[1] = "c";
    f.in.n_options = 2;
    mj_key k1 = key_of(&f);
    f.options[0] = "-Da";
    f.options[1] = "b c";
    ck_assert_str_ne(key_of(&f).hex, k1.hex);
}
END_TEST

START_TEST(preimage_is_the_tagged_text_and_hashes_to_the_key)
{
    fixture f;
    fixture_init(&f);
    mj_buf pre = MJ_BUF_INIT;
    mj_key k;
    ck_assert_int_eq(mj_key_compute(&f.in, &k, &pre), MOEJIT_OK);
    char hex[65];
    ck_assert_int_eq(mj_sha256_hex(pre.data, pre.len, hex), MOEJIT_OK);
    ck_assert_str_eq(hex, k.hex);
    ck_assert_ptr_nonnull(strstr(pre.data, "generator_version 1\n"));
    ck_assert_ptr_nonnull(strstr(pre.data, "\nspec "));
    ck_assert_ptr_nonnull(strstr(pre.data, "\nheader 8:mj/a.cuh "));
    ck_assert_ptr_nonnull(strstr(pre.data, "\noption 10:-std=c++17\n"));
    ck_assert_ptr_nonnull(strstr(pre.data, "\narch 6:sm_90a\n"));
    ck_assert_ptr_nonnull(strstr(pre.data, "\nnvrtc_version 13.0\n"));
    /* Header order in the preimage is the given order. */
    ck_assert(strstr(pre.data, "mj/a.cuh") < strstr(pre.data, "mj/b.cuh"));
    mj_buf_free(&pre);
}
END_TEST

START_TEST(missing_inputs_are_rejected_by_name)
{
    fixture f;
    fixture_init(&f);
    mj_key k;
    f.in.canonical_spec = NULL;
    ck_assert_int_eq(mj_key_compute(&f.in, &k, NULL), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "key.canonical_spec"));
    fixture_init(&f);
    f.in.arch = "";
    ck_assert_int_eq(mj_key_compute(&f.in, &k, NULL), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "key.arch"));
    fixture_init(&f);
    f.options[2] = NULL;
    ck_assert_int_eq(mj_key_compute(&f.in, &k, NULL), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "key.options[2]"));
}
END_TEST

/* With the real spec parser and code generator: spelling a spec differently changes nothing,
 * one bit of an activation parameter changes the key. */
START_TEST(real_specs_key_by_meaning_and_by_every_activation_bit)
{
    mj_test_real_job a, b, c;
    ck_assert_int_eq(mj_test_real_job_init(&a, "backend=simt,act=swiglu(alpha=1.702,beta=1,limit=7),arch=sm_90a"),
                     MOEJIT_OK);
    ck_assert_int_eq(mj_test_real_job_init(&b, "arch=sm_90a,act=swiglu(limit=7,alpha=0x1.b3b646p+0,beta=1),backend=simt"),
                     MOEJIT_OK);
    ck_assert_int_eq(mj_test_real_job_init(&c, "backend=simt,act=swiglu(alpha=0x1.b3b648p+0,beta=1,limit=7),arch=sm_90a"),
                     MOEJIT_OK);
    ck_assert_str_eq(a.key.hex, b.key.hex);
    ck_assert_str_eq(a.preimage.data, b.preimage.data);
    ck_assert_str_ne(a.key.hex, c.key.hex);
    mj_test_real_job_free(&a);
    mj_test_real_job_free(&b);
    mj_test_real_job_free(&c);
}
END_TEST

static Suite *key_suite(void)
{
    Suite *s = suite_create("key");
    TCase *tc = tcase_create("key");
    tcase_add_test(tc, sha256_matches_the_standard_test_vector);
    tcase_add_test(tc, same_inputs_give_the_same_key);
    tcase_add_test(tc, precomputed_header_digests_give_the_same_key);
    tcase_add_test(tc, one_header_byte_changes_the_key);
    tcase_add_test(tc, header_name_and_order_change_the_key);
    tcase_add_test(tc, one_option_changes_the_key);
    tcase_add_test(tc, one_activation_bit_changes_the_key);
    tcase_add_test(tc, every_other_input_changes_the_key);
    tcase_add_test(tc, length_prefixes_keep_shifted_field_boundaries_apart);
    tcase_add_test(tc, preimage_is_the_tagged_text_and_hashes_to_the_key);
    tcase_add_test(tc, missing_inputs_are_rejected_by_name);
    tcase_add_test(tc, real_specs_key_by_meaning_and_by_every_activation_bit);
    suite_add_tcase(s, tc);
    return s;
}

MJ_CHECK_MAIN(key_suite)
