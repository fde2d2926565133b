/*
 * This file checks `moejit inspect` through the built CLI: a key prefix as `warm` prints it
 * finds its entry and an ambiguous or unknown one is an error naming it; backend=auto says
 * what it chose and why; --bundle writes a translation unit and exactly the headers its
 * compile reads, with the command that compiles them.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cache/cache.h"
#include "codegen/build_inputs.h"
#include "lib/check_main.h"
#include "lib/cli_run.h"
#include "moejit.h"

#define SPEC_A "backend=simt,quant=fp16,act=relu2,arch=sm_80"

MJ_TEST_CLI_SUITE

/* Publishes a small program under a chosen key into the CLI's cache. */
static void put_entry(const char *key, const char *spec)
{
    mj_cache_config cfg;
    ck_assert_int_eq(mj_cache_config_resolve(NULL, &cfg), MOEJIT_OK);
    snprintf(cfg.dir, sizeof cfg.dir, "%s", t.cache);
    snprintf(cfg.lock_dir, sizeof cfg.lock_dir, "%s", t.locks);
    mj_cache *c = NULL;
    ck_assert_int_eq(mj_cache_open_config(&cfg, &c), MOEJIT_OK);
    static uint8_t cubin[64];
    mj_program p;
    memset(&p, 0, sizeof p);
    p.canonical_spec = (char *)spec;
    p.arch = (char *)"sm_80";
    p.log = (char *)"";
    p.cubin = cubin;
    p.cubin_len = sizeof cubin;
    ck_assert_int_eq(mj_cache_put(c, key, "moejit-key 1\n", spec, &p), MOEJIT_OK);
    mj_cache_close(c);
}

START_TEST(a_key_prefix_finds_its_entry_and_an_ambiguous_one_is_refused)
{
    RUN("warm", SPEC_A);
    ASSERT_RC(0);
    /* warm prints the first 12 digits of the key; inspect takes them back. */
    char prefix[13] = "";
    const char *p = strstr(r.out, "compiled");
    ck_assert_msg(p && sscanf(p, "compiled %12s", prefix) == 1, "%s", r.out);
    RUN("inspect", prefix, "--json");
    ASSERT_RC(0);
    cJSON *j = mj_test_json(r.out);
    const char *key = cJSON_GetStringValue(cJSON_GetObjectItem(j, "key"));
    ck_assert_msg(key && strncmp(key, prefix, 12) == 0 && strlen(key) == 64, "%s", r.out);
    ck_assert_msg(strstr(cJSON_GetStringValue(cJSON_GetObjectItem(j, "spec")), "act=relu2"), "%s", r.out);
    cJSON_Delete(j);

    put_entry("abcdef0000000000000000000000000000000000000000000000000000000001", "backend=simt,act=gelu");
    put_entry("abcdef1100000000000000000000000000000000000000000000000000000002", "backend=simt,act=relu");
    RUN("inspect", "ABCDEF");
    ASSERT_RC(2);
    ck_assert_msg(strstr(r.err, "key prefix abcdef is ambiguous: 2 entries start with it") &&
                      mj_test_count_lines(r.err) == 1,
                  "%s", r.err);
    RUN("inspect", "abcdef11", "--preimage");
    ASSERT_RC(0);
    ck_assert_msg(strstr(r.out, "moejit-key 1"), "%s", r.out);
    RUN("inspect", "abcdee");
    ASSERT_RC(1);
    ck_assert_msg(strstr(r.err, "no cache entry's key starts with abcdee"), "%s", r.err);
    /* Five digits are not a key prefix: read as a spec, which it is not. */
    RUN("inspect", "abcde");
    ASSERT_RC(2);
}
END_TEST

START_TEST(auto_backend_says_what_it_chose_and_why)
{
    RUN("inspect", "backend=auto,quant=bf16,act=silu,arch=sm_80", "--no-compile");
    ASSERT_RC(0);
    ck_assert_msg(strstr(r.out, "spec:      backend=mma,") && strstr(r.out, "backend:   mma (backend=auto: not wgmma (") &&
                      strstr(r.out, "mma: the fastest backend that supports and has validated the spec on sm_80"),
                  "%s", r.out);
    RUN("inspect", "backend=auto,quant=fp8_block,act=silu,arch=sm_90a", "--no-compile");
    ASSERT_RC(0);
    ck_assert_msg(strstr(r.out, "spec:      backend=wgmma,"), "%s", r.out);
    /* fp8 with a bias: neither tensor-core backend takes it */
    RUN("inspect", "backend=auto,quant=fp8_block,act=silu,arch=sm_90a,bias=b2", "--no-compile", "--json");
    ASSERT_RC(0);
    cJSON *j = mj_test_json(r.out);
    const char *why = cJSON_GetStringValue(cJSON_GetObjectItem(j, "backend_auto"));
    ck_assert_msg(why && strstr(why, "not wgmma") && strstr(why, "not mma") && strstr(why, "simt: the fastest backend"), "%s",
                  r.out);
    cJSON_Delete(j);
    /* An explicit backend has no such line. */
    RUN("inspect", "backend=mma,quant=bf16,act=silu,arch=sm_80", "--no-compile");
    ASSERT_RC(0);
    ck_assert_ptr_null(strstr(r.out, "backend=auto"));
}
END_TEST

START_TEST(bundle_writes_the_source_and_exactly_the_headers_it_reads)
{
    char dir[400];
    snprintf(dir, sizeof dir, "%s/bundle", t.root);
    const char *spec = "backend=wgmma,quant=bf16,act=swiglu,arch=sm_90a";
    RUN("inspect", spec, "--bundle", dir);
    ASSERT_RC(0);
    moejit_spec *s = NULL;
    ck_assert_int_eq(moejit_spec_parse(spec, &s), MOEJIT_OK);
    mj_build_inputs in;
    ck_assert_int_eq(mj_build_inputs_make(s, &in), MOEJIT_OK);
    char path[800], want[64];
    snprintf(want, sizeof want, "%zu headers", in.n_headers);
    ck_assert_msg(strstr(r.out, want), "%s (want %s)", r.out, want);
    snprintf(path, sizeof path, "%s/%s", dir, in.source.name);
    ck_assert(mj_test_exists(path));
    for (size_t i = 0; i < in.n_headers; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, in.headers[i].name);
        struct stat st;
        ck_assert_msg(stat(path, &st) == 0 && (size_t)st.st_size == in.headers[i].size, "%s", path);
    }
    /* Not one embedded header more: the simt layer's own stages are not read by wgmma's. */
    snprintf(path, sizeof path, "%s/simt_layer.cuh", dir);
    ck_assert(!mj_test_exists(path));
    snprintf(path, sizeof path, "%s/compile.sh", dir);
    struct stat st;
    ck_assert(stat(path, &st) == 0 && (st.st_mode & 0100));
    mj_build_inputs_free(&in);
    moejit_spec_destroy(s);
    /* A bundle writes; it takes no view. */
    RUN("inspect", spec, "--bundle", dir, "--source");
    ASSERT_RC(2);
}
END_TEST

/* A tensor-core layer is compiled and cached per module: the report lists them; --module shows
 * one (its source has only its kernels); a module the layer lacks is refused, naming those it has. */
START_TEST(a_tensor_core_layer_lists_its_modules_and_shows_the_one_asked_for)
{
    RUN("inspect", "backend=mma,quant=bf16,act=silu,arch=sm_80", "--no-compile");
    ASSERT_RC(0);
    ck_assert_msg(strstr(r.out, "modules:") && strstr(r.out, "  large ") && strstr(r.out, "  t1_shallow ") &&
                      strstr(r.out, "not cached"),
                  "%s", r.out);
    RUN("inspect", "backend=mma,quant=bf16,act=silu,arch=sm_80", "--module", "fused", "--source");
    ASSERT_RC(0);
    ck_assert_msg(strstr(r.out, "#define MJ_TC_MODULES 0x0008") && strstr(r.out, "module fused of the layer"), "%s", r.out);
    RUN("inspect", "backend=mma,quant=bf16,act=silu,arch=sm_80", "--module", "pair", "--no-compile");
    ASSERT_RC(2);
    ck_assert_msg(strstr(r.err, "--module: the mma layer has no module 'pair'; allowed: route,"), "%s", r.err);
}
END_TEST

static Suite *cli_inspect_suite(void)
{
    Suite *s = suite_create("cli_inspect");
    TCase *tc = tcase_create("inspect");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, a_key_prefix_finds_its_entry_and_an_ambiguous_one_is_refused);
    tcase_add_test(tc, auto_backend_says_what_it_chose_and_why);
    tcase_add_test(tc, bundle_writes_the_source_and_exactly_the_headers_it_reads);
    tcase_add_test(tc, a_tensor_core_layer_lists_its_modules_and_shows_the_one_asked_for);
    suite_add_tcase(s, tc);
    return s;
}

MJ_CHECK_MAIN(cli_inspect_suite)
