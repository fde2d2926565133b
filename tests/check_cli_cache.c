/*
 * This file checks `moejit cache` through the built CLI: ls, stats, verify, gc, clear and
 * config with --json; export -> clear -> import gives back the same entries; export selects
 * by arch, spec pattern and preset; a pack with one flipped byte, or cut short, is refused
 * whole and adds nothing; verify finds a flipped byte in an entry.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/check_main.h"
#include "lib/cli_run.h"

#define SPEC_A "quant=fp16,act=relu2,arch=sm_80"
#define SPEC_B "quant=bf16,act=relu2,arch=sm_86"

MJ_TEST_CLI_SUITE

/* A pack key (mode 0600) in the test's root; its path in out. */
static void key_file(char *out, size_t cap)
{
    snprintf(out, cap, "%s/pack.key", t.root);
    mj_test_write_file(out, "0123456789abcdef0123456789abcdef");
    ck_assert_int_eq(chmod(out, 0600), 0);
}

static void warm(void)
{
    RUN("warm", SPEC_A, SPEC_B, "--jobs", "2");
    ASSERT_RC(0);
}

/* The keys `cache ls --json` lists, sorted, joined by ','. */
static void keys(char *out, size_t cap)
{
    RUN("cache", "ls", "--json");
    ASSERT_RC(0);
    cJSON *j = mj_test_json(r.out);
    out[0] = '\0';
    char list[8][65];
    int n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(j, "entries"))
    {
        if (n < 8) snprintf(list[n++], 65, "%s", cJSON_GetStringValue(cJSON_GetObjectItem(e, "key")));
    }
    ck_assert_int_eq(n, (int)mj_test_json_num(j, "count"));
    cJSON_Delete(j);
    qsort(list, (size_t)n, sizeof list[0], (int (*)(const void *, const void *))strcmp);
    for (int i = 0; i < n; i++) {
        strncat(out, list[i], cap - strlen(out) - 1);
        strncat(out, ",", cap - strlen(out) - 1);
    }
}

static double json_num_of_run(const char *key)
{
    cJSON *j = mj_test_json(r.out);
    double v = mj_test_json_num(j, key);
    cJSON_Delete(j);
    return v;
}

static void flip_byte(const char *path, long offset)
{
    FILE *f = fopen(path, "r+b");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fseek(f, offset, SEEK_SET), 0);
    int c = fgetc(f);
    ck_assert_int_ne(c, EOF);
    ck_assert_int_eq(fseek(f, offset, SEEK_SET), 0);
    fputc(c ^ 0x40, f);
    ck_assert_int_eq(fclose(f), 0);
}

static long file_size(const char *path)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

START_TEST(ls_stats_verify_gc_clear_and_config_speak_json)
{
    warm();
    char k[200];
    keys(k, sizeof k);
    ck_assert_int_eq((int)strlen(k), 2 * 65);

    RUN("cache", "ls");
    ASSERT_RC(0);
    ck_assert_msg(strstr(r.out, "2 entries") && strstr(r.out, "act=relu2"), "%s", r.out);

    RUN("cache", "stats", "--json");
    ASSERT_RC(0);
    ck_assert_int_eq((int)json_num_of_run("compiles"), 2);
    ck_assert_int_eq((int)json_num_of_run("files"), 2);
    ck_assert_int_gt((int)json_num_of_run("bytes"), 0);
    RUN("cache", "stats", "--reset", "--json");
    ASSERT_RC(0);
    ck_assert_int_eq((int)json_num_of_run("compiles"), 0);
    ck_assert_int_eq((int)json_num_of_run("files"), 2);

    RUN("cache", "verify", "--json");
    ASSERT_RC(0);
    ck_assert_int_eq((int)json_num_of_run("ok"), 2);
    ck_assert_int_eq((int)json_num_of_run("bad"), 0);

    RUN("cache", "gc", "--json");
    ASSERT_RC(0);
    ck_assert_int_eq((int)json_num_of_run("removed"), 0);
    ck_assert_int_eq((int)json_num_of_run("kept"), 2);
    RUN("cache", "gc", "--max-size", "1K", "--json");
    ASSERT_RC(0);
    ck_assert_int_eq((int)json_num_of_run("removed"), 2);
    warm();

    RUN("cache", "clear", "--json");
    ASSERT_RC(0);
    ck_assert_int_eq((int)json_num_of_run("removed"), 2);
    keys(k, sizeof k);
    ck_assert_str_eq(k, "");

    RUN("cache", "config", "--json");
    ASSERT_RC(0);
    cJSON *j = mj_test_json(r.out);
    const cJSON *first = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "settings"), 0);
    ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(first, "key")), "cache_dir");
    ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(first, "value")), t.cache);
    ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(first, "origin")), "environment");
    cJSON_Delete(j);
}
END_TEST

START_TEST(export_clear_import_gives_back_the_same_entries)
{
    warm();
    char before[200], after[200], pack[600], key[600];
    keys(before, sizeof before);
    key_file(key, sizeof key);
    snprintf(pack, sizeof pack, "%s/all.mjkpack", t.root);
    RUN("cache", "export", pack, "--key", key, "--json");
    ASSERT_RC(0);
    ck_assert_int_eq((int)json_num_of_run("exported"), 2);
    RUN("cache", "clear");
    ASSERT_RC(0);
    RUN("cache", "import", pack, "--key", key, "--json");
    ASSERT_RC(0);
    ck_assert_int_eq((int)json_num_of_run("added"), 2);
    keys(after, sizeof after);
    ck_assert_str_eq(after, before);

    /* The imported entries are whole: inspect reads one by key, and importing again adds none. */
    char first[65];
    snprintf(first, sizeof first, "%.64s", after);
    RUN("inspect", first, "--json");
    ASSERT_RC(0);
    cJSON *j = mj_test_json(r.out);
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(j, "cached")));
    ck_assert_int_gt(cJSON_GetArraySize(cJSON_GetObjectItem(j, "kernels")), 0);
    cJSON_Delete(j);
    RUN("cache", "import", pack, "--key", key, "--json");
    ASSERT_RC(0);
    ck_assert_int_eq((int)json_num_of_run("added"), 0);
    ck_assert_int_eq((int)json_num_of_run("present"), 2);
    /* And a warm of the same specs compiles nothing. */
    RUN("warm", SPEC_A, SPEC_B, "--json");
    ASSERT_RC(0);
    ck_assert_int_eq((int)json_num_of_run("compiled"), 0);
}
END_TEST

START_TEST(export_selects_by_arch_spec_pattern_and_preset)
{
    warm();
    char pack[600];
    snprintf(pack, sizeof pack, "%s/sel.mjkpack", t.root);
    RUN("cache", "export", pack, "--arch", "sm_86", "--json");
    ASSERT_RC(0);
    ck_assert_int_eq((int)json_num_of_run("exported"), 1);
    RUN("cache", "ls", "--spec", "*quant=fp16*act=relu2*", "--json");
    ASSERT_RC(0);
    ck_assert_int_eq((int)json_num_of_run("count"), 1);
    RUN("cache", "ls", "--spec", "quant=bf16", "--arch", "sm_80", "--json");
    ASSERT_RC(0);
    ck_assert_int_eq((int)json_num_of_run("count"), 0);
    /* Nothing of a preset is cached: nothing to export, exit 1 and no file. */
    char none[600];
    snprintf(none, sizeof none, "%s/none.mjkpack", t.root);
    RUN("cache", "export", none, "--preset", "mixtral-8x7b");
    ASSERT_RC(1);
    ck_assert(!mj_test_exists(none));
}
END_TEST

START_TEST(a_corrupt_pack_is_refused_whole)
{
    warm();
    char pack[600];
    snprintf(pack, sizeof pack, "%s/all.mjkpack", t.root);
    RUN("cache", "export", pack);
    ASSERT_RC(0);
    RUN("cache", "clear");
    ASSERT_RC(0);

    /* One flipped byte in the second half (inside the second entry). */
    flip_byte(pack, file_size(pack) * 3 / 4);
    RUN("cache", "import", pack, "--trust-unsigned");
    ASSERT_RC(1);
    ck_assert_msg(mj_test_count_lines(r.err) == 1 && strstr(r.err, "nothing was added"), "%s", r.err);
    char k[200];
    keys(k, sizeof k);
    ck_assert_str_eq(k, "");

    /* Cut short. */
    flip_byte(pack, file_size(pack) * 3 / 4); /* back to the original byte */
    ck_assert_int_eq(truncate(pack, file_size(pack) - 100), 0);
    RUN("cache", "import", pack, "--trust-unsigned");
    ASSERT_RC(1);
    keys(k, sizeof k);
    ck_assert_str_eq(k, "");
}
END_TEST

START_TEST(import_takes_only_packs_signed_by_the_key_unless_trust_unsigned)
{
    RUN("warm", SPEC_A, "--json");
    ASSERT_RC(0);
    char pack[600], key[600], other[600];
    key_file(key, sizeof key);
    snprintf(pack, sizeof pack, "%s/unsigned.mjkpack", t.root);
    RUN("cache", "export", pack);
    ASSERT_RC(0);
    ck_assert_msg(strstr(r.err, "not signed") && strstr(r.err, "--trust-unsigned"), "%s", r.err);
    RUN("cache", "clear");
    ASSERT_RC(0);
    RUN("cache", "import", pack);
    ASSERT_RC(1);
    ck_assert_msg(strstr(r.err, "is not signed") && strstr(r.err, "--trust-unsigned"), "%s", r.err);
    RUN("cache", "import", pack, "--trust-unsigned", "--json");
    ASSERT_RC(0);
    ck_assert_int_eq((int)json_num_of_run("added"), 1);

    /* Signed through the environment; refused under another key, taken under the same one. */
    snprintf(pack, sizeof pack, "%s/signed.mjkpack", t.root);
    char env_key[700];
    snprintf(env_key, sizeof env_key, "MOEJIT_PACK_KEY_FILE=%s", key);
    const char *env[] = {env_key, NULL};
    mj_test_cli_run(&t, env, &r, "cache", "export", pack, (const char *)NULL);
    ASSERT_RC(0);
    RUN("cache", "clear");
    ASSERT_RC(0);
    snprintf(other, sizeof other, "%s/other.key", t.root);
    mj_test_write_file(other, "fedcba9876543210fedcba9876543210");
    ck_assert_int_eq(chmod(other, 0600), 0);
    RUN("cache", "import", pack, "--key", other);
    ASSERT_RC(1);
    ck_assert_msg(strstr(r.err, "signed under another key"), "%s", r.err);
    RUN("cache", "import", pack);
    ASSERT_RC(1);
    ck_assert_msg(strstr(r.err, "signed but no key"), "%s", r.err);
    mj_test_cli_run(&t, env, &r, "cache", "import", pack, "--json", (const char *)NULL);
    ASSERT_RC(0);
    ck_assert_int_eq((int)json_num_of_run("added"), 1);

    /* A key file others can read is refused, naming it. */
    ck_assert_int_eq(chmod(key, 0644), 0);
    RUN("cache", "import", pack, "--key", key);
    ASSERT_RC(1);
    ck_assert_msg(strstr(r.err, key) && strstr(r.err, "chmod 600"), "%s", r.err);
}
END_TEST

START_TEST(verify_quarantines_an_entry_with_a_flipped_byte)
{
    RUN("warm", SPEC_A, "--json");
    ASSERT_RC(0);
    cJSON *j = mj_test_json(r.out);
    char key[65], path[900];
    snprintf(key, sizeof key, "%s",
             cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "items"), 0), "key")));
    cJSON_Delete(j);
    snprintf(path, sizeof path, "%s/%.2s/%.2s/%s.v2.mjk", t.cache, key, key + 2, key);
    flip_byte(path, file_size(path) / 2);
    RUN("cache", "verify", "--json");
    ASSERT_RC(1);
    ck_assert_int_eq((int)json_num_of_run("bad"), 1);
    RUN("cache", "verify", "--json");
    ASSERT_RC(0);
    ck_assert_int_eq((int)json_num_of_run("checked"), 0);
}
END_TEST

static Suite *cli_cache_suite(void)
{
    Suite *s = suite_create("cli_cache");
    TCase *tc = tcase_create("cache");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, ls_stats_verify_gc_clear_and_config_speak_json);
    tcase_add_test(tc, export_clear_import_gives_back_the_same_entries);
    tcase_add_test(tc, export_selects_by_arch_spec_pattern_and_preset);
    tcase_add_test(tc, a_corrupt_pack_is_refused_whole);
    tcase_add_test(tc, verify_quarantines_an_entry_with_a_flipped_byte);
    tcase_add_test(tc, import_takes_only_packs_signed_by_the_key_unless_trust_unsigned);
    suite_add_tcase(s, tc);
    return s;
}

MJ_CHECK_MAIN(cli_cache_suite)
