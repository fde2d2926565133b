/*
 * This file contains the tests of the one settings table (core/settings.c): every knob set
 * through the environment and, where it has one, through its moejit_options field, with the
 * origin reported; bad values refused naming the variable and the allowed values; a context
 * resolving its own settings (not process globals) and handing decode and PDL to its kernels;
 * `moejit config` listing every knob with its origin, --cache-dir as "command line"; and the
 * CLI's inspect and warm refusing a bad MOEJIT_COMPILE_TIMEOUT as the library does.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/settings.h"
#include "lib/check_main.h"
#include "lib/cli_run.h"
#include "runtime/context.h"

/* What the suite's environment gives (the Makefile's compile worker and test cache), kept
 * before the first clean_env so that tests that compile can put it back (CK_FORK=no shares
 * one process between tests). */
static char g_worker[4096], g_cache[4096];
static int g_saved;

static void clean_env(void)
{
    if (!g_saved) {
        const char *w = getenv("MOEJIT_COMPILE_WORKER"), *c = getenv("MOEJIT_CACHE_DIR");
        snprintf(g_worker, sizeof g_worker, "%s", w ? w : "");
        snprintf(g_cache, sizeof g_cache, "%s", c ? c : "");
        g_saved = 1;
    }
    for (int i = 0; i < MJ_SETTING_COUNT; i++) unsetenv(mj_settings_table[i].env);
    unsetenv("XDG_CACHE_HOME");
    unsetenv("XDG_RUNTIME_DIR");
    setenv("HOME", "/home/tester", 1);
}

static void restore_env(void)
{
    clean_env();
    if (g_worker[0]) setenv("MOEJIT_COMPILE_WORKER", g_worker, 1);
    if (g_cache[0]) setenv("MOEJIT_CACHE_DIR", g_cache, 1);
    setenv("MOEJIT_LIBCUDA", "/nonexistent/libcuda.so.1", 1); /* results must not depend on the machine */
}

static void assert_error(const char *a, const char *b)
{
    const char *m = moejit_last_error();
    ck_assert_msg(strstr(m, a) && strstr(m, b), "message: %s (wanted %s ... %s)", m, a, b);
}

static char *formatted(const mj_settings *s, mj_setting_id id)
{
    static char text[MJ_SETTINGS_PATH_MAX + 64];
    mj_buf b = MJ_BUF_INIT;
    mj_settings_format(s, id, &b);
    snprintf(text, sizeof text, "%s", b.data ? b.data : "");
    mj_buf_free(&b);
    return text;
}

START_TEST(the_table_documents_every_knob_once)
{
    for (int i = 0; i < MJ_SETTING_COUNT; i++) {
        const mj_setting_info *s = &mj_settings_table[i];
        ck_assert_msg(s->key && s->env && s->type && s->default_text && s->allowed && s->why && s->scope, "row %d", i);
        ck_assert_msg(strncmp(s->env, "MOEJIT_", 7) == 0, "%s", s->env);
        ck_assert_msg(strlen(s->why) > 20, "%s: say why", s->key);
        ck_assert_msg(!strcmp(s->scope, "context") || !strcmp(s->scope, "cache") || !strcmp(s->scope, "process"),
                      "%s: scope %s", s->key, s->scope);
        for (int j = 0; j < i; j++) {
            ck_assert_str_ne(s->key, mj_settings_table[j].key);
            ck_assert_str_ne(s->env, mj_settings_table[j].env);
        }
    }
    /* the knobs read elsewhere before this table: every one is a row */
    static const char *const knobs[] = {"MOEJIT_DECODE",         "MOEJIT_PDL",           "MOEJIT_COMPILE_TIMEOUT",
                                        "MOEJIT_LIBCUDA",        "MOEJIT_TUNE_FILE",     "MOEJIT_COMPILE_WORKER",
                                        "MOEJIT_CACHE_DIR",      "MOEJIT_CACHE_MODE",    "MOEJIT_CACHE_MAX_BYTES",
                                        "MOEJIT_CACHE_MAX_AGE",  "MOEJIT_LOCK_DIR",      "MOEJIT_LOCK_TIMEOUT",
                                        "MOEJIT_CACHE_SHARED",   "MOEJIT_ALLOW_UNVALIDATED",
                                        "MOEJIT_REMOTE",         "MOEJIT_REMOTE_PASSWORD_FILE",
                                        "MOEJIT_REMOTE_TLS",     "MOEJIT_REMOTE_PREFIX",
                                        "MOEJIT_REMOTE_CONNECT_TIMEOUT", "MOEJIT_REMOTE_TIMEOUT",
                                        "MOEJIT_REMOTE_MODE",    "MOEJIT_REMOTE_KEY_FILE",
                                        "MOEJIT_REMOTE_TRUST"};
    ck_assert_int_eq(sizeof knobs / sizeof *knobs, MJ_SETTING_COUNT);
    for (size_t k = 0; k < sizeof knobs / sizeof *knobs; k++) {
        int found = 0;
        for (int i = 0; i < MJ_SETTING_COUNT; i++) found |= !strcmp(mj_settings_table[i].env, knobs[k]);
        ck_assert_msg(found, "%s is not in the table", knobs[k]);
    }
    ck_assert_str_eq(mj_settings_table[MJ_SETTING_LIBCUDA].scope, "process");
}
END_TEST

START_TEST(defaults_have_the_default_origin)
{
    clean_env();
    mj_settings s;
    ck_assert_int_eq(mj_settings_resolve(NULL, NULL, &s), MOEJIT_OK);
    for (int i = 0; i < MJ_SETTING_COUNT; i++) ck_assert_int_eq(s.origin[i], MJ_ORIGIN_DEFAULT);
    ck_assert_str_eq(s.cache_dir, "/home/tester/.cache/moejit");
    ck_assert(s.compile_timeout_s == 300);
    ck_assert_int_eq(s.decode, MJ_DECODE_AUTO);
    ck_assert_int_eq(s.pdl, MJ_PDL_ALL);
    ck_assert_int_eq(s.allow_unvalidated, 0);
    ck_assert_str_eq(s.compile_worker, "");
    ck_assert_str_eq(s.tune_file, "");
    ck_assert_str_eq(s.libcuda, "libcuda.so.1");
    ck_assert_str_eq(mj_setting_origin_name(MJ_ORIGIN_DEFAULT), "default");
}
END_TEST

/* Every knob through its variable: the value as `moejit config` prints it, and its origin. */
START_TEST(every_knob_is_read_from_its_variable)
{
    static const struct {
        mj_setting_id id;
        const char *text, *shown;
    } cases[] = {
        {MJ_SETTING_CACHE_DIR, "/env/cache", "/env/cache"},
        {MJ_SETTING_CACHE_MODE, "offline", "offline"},
        {MJ_SETTING_CACHE_MAX_BYTES, "2M", "2097152"},
        {MJ_SETTING_CACHE_MAX_AGE, "2h", "7200"},
        {MJ_SETTING_LOCK_DIR, "/env/locks", "/env/locks"},
        {MJ_SETTING_LOCK_TIMEOUT, "2.5", "2.5"},
        {MJ_SETTING_CACHE_SHARED, "1", "1"},
        {MJ_SETTING_COMPILE_TIMEOUT, "42.5", "42.5"},
        {MJ_SETTING_COMPILE_WORKER, "/opt/moejit-compile-worker", "/opt/moejit-compile-worker"},
        {MJ_SETTING_DECODE, "persistent_shallow", "persistent_shallow"},
        {MJ_SETTING_PDL, "inner", "inner"},
        {MJ_SETTING_ALLOW_UNVALIDATED, "1", "1"},
        {MJ_SETTING_TUNE_FILE, "/tmp/tune.json", "/tmp/tune.json"},
        {MJ_SETTING_LIBCUDA, "/opt/libcuda.so.1", "/opt/libcuda.so.1"},
        {MJ_SETTING_REMOTE, "redis://cache.example:6380/2", "redis://cache.example:6380/2"},
        {MJ_SETTING_REMOTE_PASSWORD_FILE, "/etc/moejit/redis.pw", "/etc/moejit/redis.pw"},
        {MJ_SETTING_REMOTE_TLS, "1", "1"},
        {MJ_SETTING_REMOTE_PREFIX, "fleet-a:", "fleet-a:"},
        {MJ_SETTING_REMOTE_CONNECT_TIMEOUT, "0.25", "0.25"},
        {MJ_SETTING_REMOTE_TIMEOUT, "1.5", "1.5"},
        {MJ_SETTING_REMOTE_MODE, "read-only", "read-only"},
        {MJ_SETTING_REMOTE_KEY_FILE, "/etc/moejit/fleet.key", "/etc/moejit/fleet.key"},
        {MJ_SETTING_REMOTE_TRUST, "unsigned", "unsigned"},
    };
    ck_assert_int_eq(sizeof cases / sizeof *cases, MJ_SETTING_COUNT);
    clean_env();
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        setenv(mj_settings_table[cases[i].id].env, cases[i].text, 1);
    mj_settings s;
    ck_assert_msg(mj_settings_resolve(NULL, NULL, &s) == MOEJIT_OK, "%s", moejit_last_error());
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ck_assert_msg(s.origin[cases[i].id] == MJ_ORIGIN_ENV, "%s", mj_settings_table[cases[i].id].key);
        ck_assert_str_eq(formatted(&s, cases[i].id), cases[i].shown);
    }
    ck_assert_int_eq(s.decode, MJ_DECODE_PERSISTENT_SHALLOW);
    ck_assert_int_eq(s.pdl, MJ_PDL_INNER);
    ck_assert_str_eq(mj_setting_origin_name(s.origin[MJ_SETTING_PDL]), "environment");
    /* an empty variable counts as unset */
    setenv("MOEJIT_DECODE", "", 1);
    ck_assert_int_eq(mj_settings_resolve(NULL, NULL, &s), MOEJIT_OK);
    ck_assert_int_eq(s.origin[MJ_SETTING_DECODE], MJ_ORIGIN_DEFAULT);
    clean_env();
}
END_TEST

START_TEST(option_fields_win_over_the_environment_and_the_command_line_over_both)
{
    clean_env();
    setenv("MOEJIT_CACHE_DIR", "/env/cache", 1);
    setenv("MOEJIT_CACHE_MODE", "offline", 1);
    setenv("MOEJIT_CACHE_MAX_BYTES", "2M", 1);
    setenv("MOEJIT_COMPILE_TIMEOUT", "42", 1);
    setenv("MOEJIT_COMPILE_WORKER", "/env/worker", 1);
    moejit_options o = {.struct_size = sizeof(moejit_options), .cache_dir = "/opt/cache",
                        .cache_mode = "read-only", .cache_max_bytes = 1000, .compile_timeout_s = 7,
                        .allow_unvalidated = -1, .compile_worker = "/opt/libexec/worker"};
    setenv("MOEJIT_ALLOW_UNVALIDATED", "1", 1);
    mj_settings s;
    ck_assert_int_eq(mj_settings_resolve(&o, NULL, &s), MOEJIT_OK);
    ck_assert_str_eq(s.cache_dir, "/opt/cache");
    ck_assert_int_eq(s.cache_mode, MJ_CACHE_MODE_READ_ONLY);
    ck_assert_int_eq(s.cache_max_bytes, 1000);
    ck_assert(s.compile_timeout_s == 7);
    ck_assert_int_eq(s.allow_unvalidated, 0); /* -1: never, whatever the environment says */
    ck_assert_str_eq(s.compile_worker, "/opt/libexec/worker");
    static const mj_setting_id with_fields[] = {MJ_SETTING_CACHE_DIR, MJ_SETTING_CACHE_MODE,
                                                MJ_SETTING_CACHE_MAX_BYTES, MJ_SETTING_COMPILE_TIMEOUT,
                                                MJ_SETTING_ALLOW_UNVALIDATED, MJ_SETTING_COMPILE_WORKER};
    for (size_t i = 0; i < sizeof with_fields / sizeof *with_fields; i++) {
        ck_assert_int_eq(s.origin[with_fields[i]], MJ_ORIGIN_OPTION);
        ck_assert_ptr_nonnull(mj_settings_table[with_fields[i]].option);
    }
    /* a field left at its "unset" value falls through to the environment */
    moejit_options none = {0};
    ck_assert_int_eq(mj_settings_resolve(&none, NULL, &s), MOEJIT_OK);
    ck_assert(s.compile_timeout_s == 42);
    ck_assert_int_eq(s.origin[MJ_SETTING_COMPILE_TIMEOUT], MJ_ORIGIN_ENV);
    ck_assert_int_eq(s.allow_unvalidated, 1);
    o.allow_unvalidated = 1;
    unsetenv("MOEJIT_ALLOW_UNVALIDATED");
    ck_assert_int_eq(mj_settings_resolve(&o, NULL, &s), MOEJIT_OK);
    ck_assert_int_eq(s.allow_unvalidated, 1);
    ck_assert_int_eq(s.origin[MJ_SETTING_ALLOW_UNVALIDATED], MJ_ORIGIN_OPTION);
    /* the command line over the option over the environment */
    mj_settings_cli cli = {0};
    cli[MJ_SETTING_CACHE_DIR] = "/cli/cache";
    cli[MJ_SETTING_COMPILE_TIMEOUT] = "9";
    ck_assert_int_eq(mj_settings_resolve(&o, cli, &s), MOEJIT_OK);
    ck_assert_str_eq(s.cache_dir, "/cli/cache");
    ck_assert(s.compile_timeout_s == 9);
    ck_assert_str_eq(mj_setting_origin_name(s.origin[MJ_SETTING_CACHE_DIR]), "command line");
    ck_assert_int_eq(s.origin[MJ_SETTING_CACHE_MODE], MJ_ORIGIN_OPTION);
    clean_env();
}
END_TEST

/* The context hands its compile_worker to the compile: the option names the worker a compile
 * runs, over the environment, and a wrong one is an error naming the setting. */
START_TEST(a_contexts_compile_worker_option_names_the_worker_it_runs)
{
    restore_env();
    const char *real = getenv("MOEJIT_COMPILE_WORKER");
    ck_assert_msg(real && *real, "make test sets MOEJIT_COMPILE_WORKER");
    char worker[4096];
    snprintf(worker, sizeof worker, "%s", real);
    setenv("MOEJIT_CACHE_MODE", "off", 1);
    setenv("MOEJIT_COMPILE_WORKER", "/nonexistent/env-worker", 1);
    moejit_spec *spec = NULL;
    ck_assert_int_eq(moejit_spec_parse("backend=simt,quant=bf16,act=relu,arch=sm_80", &spec), MOEJIT_OK);
    moejit_options o = MOEJIT_OPTIONS_INIT;
    o.compile_worker = "/nonexistent/option-worker";
    moejit_context *ctx = NULL;
    moejit_kernel *k = NULL;
    ck_assert_int_eq(moejit_context_create(&o, &ctx), MOEJIT_OK);
    ck_assert_int_eq(moejit_kernel_get(ctx, spec, &k), MOEJIT_ERR_IO);
    ck_assert_msg(strstr(moejit_last_error(), "compile_worker") &&
                      strstr(moejit_last_error(), "/nonexistent/option-worker"),
                  "%s", moejit_last_error());
    moejit_context_destroy(ctx);
    o.compile_worker = worker;
    ck_assert_int_eq(moejit_context_create(&o, &ctx), MOEJIT_OK);
    ck_assert_msg(moejit_kernel_get(ctx, spec, &k) == MOEJIT_OK, "%s", moejit_last_error());
    moejit_context_destroy(ctx);
    moejit_spec_destroy(spec);
    restore_env();
}
END_TEST

START_TEST(bad_values_are_refused_naming_the_variable_and_the_allowed_values)
{
    clean_env();
    mj_settings s;
    static const char *const timeouts[] = {"abc", "nan", "inf", "-1", "0", "5s", " 5", "1e999"};
    for (size_t i = 0; i < sizeof timeouts / sizeof *timeouts; i++) {
        setenv("MOEJIT_COMPILE_TIMEOUT", timeouts[i], 1);
        ck_assert_int_eq(mj_settings_resolve(NULL, NULL, &s), MOEJIT_ERR_INVALID_ARGUMENT);
        char want[64];
        snprintf(want, sizeof want, "got '%s'", timeouts[i]);
        assert_error("MOEJIT_COMPILE_TIMEOUT: must be a number of seconds > 0", want);
    }
    clean_env();
    static const struct {
        const char *env, *text, *allowed;
    } bad[] = {
        {"MOEJIT_DECODE", "fast", "persistent_shallow or chain"},
        {"MOEJIT_PDL", "yes", "inner"},
        {"MOEJIT_ALLOW_UNVALIDATED", "yes", "0 or 1"},
        {"MOEJIT_ALLOW_UNVALIDATED", "2", "0 or 1"},
        {"MOEJIT_CACHE_SHARED", "true", "0 or 1"},
        {"MOEJIT_CACHE_MODE", "fast", "read-write, read-only, offline, off"},
        {"MOEJIT_CACHE_MAX_BYTES", "-1", "K, M, G or T"},
        {"MOEJIT_CACHE_MAX_AGE", "3w", "s, m, h or d"},
        {"MOEJIT_LOCK_TIMEOUT", "nan", ">= 0"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        setenv(bad[i].env, bad[i].text, 1);
        ck_assert_int_eq(mj_settings_resolve(NULL, NULL, &s), MOEJIT_ERR_INVALID_ARGUMENT);
        assert_error(bad[i].env, bad[i].allowed);
        assert_error(bad[i].env, bad[i].text);
        unsetenv(bad[i].env);
    }
    moejit_options o = {.struct_size = sizeof(moejit_options), .compile_timeout_s = -1};
    ck_assert_int_eq(mj_settings_resolve(&o, NULL, &s), MOEJIT_ERR_INVALID_ARGUMENT);
    assert_error("options.compile_timeout_s", "> 0");
    o = (moejit_options){.struct_size = sizeof(moejit_options), .allow_unvalidated = 2};
    ck_assert_int_eq(mj_settings_resolve(&o, NULL, &s), MOEJIT_ERR_INVALID_ARGUMENT);
    assert_error("options.allow_unvalidated", "got 2");
    mj_settings_cli cli = {0};
    cli[MJ_SETTING_COMPILE_TIMEOUT] = "abc";
    ck_assert_int_eq(mj_settings_resolve(NULL, cli, &s), MOEJIT_ERR_INVALID_ARGUMENT);
    assert_error("compile_timeout (command line)", "got 'abc'");
}
END_TEST

/* ---- contexts ----------------------------------------------------------------------------------- */

START_TEST(a_context_resolves_its_own_settings_and_refuses_bad_ones)
{
    restore_env();
    moejit_options off = {.struct_size = sizeof(moejit_options), .cache_mode = "off"};
    moejit_context *a = NULL, *b = NULL;
    setenv("MOEJIT_DECODE", "chain", 1);
    setenv("MOEJIT_ALLOW_UNVALIDATED", "1", 1);
    ck_assert_int_eq(moejit_context_create(&off, &a), MOEJIT_OK);
    setenv("MOEJIT_DECODE", "persistent", 1);
    unsetenv("MOEJIT_ALLOW_UNVALIDATED");
    ck_assert_int_eq(moejit_context_create(&off, &b), MOEJIT_OK);
    /* each context keeps what it read: nothing is process-wide */
    ck_assert_int_eq(mj_context_settings(a)->decode, MJ_DECODE_CHAIN);
    ck_assert_int_eq(mj_context_settings(b)->decode, MJ_DECODE_PERSISTENT);
    ck_assert_int_eq(mj_context_allow_unvalidated(a), 1);
    ck_assert_int_eq(mj_context_allow_unvalidated(b), 0);
    ck_assert_int_eq(mj_context_settings(a)->origin[MJ_SETTING_ALLOW_UNVALIDATED], MJ_ORIGIN_ENV);
    ck_assert_int_eq(mj_context_settings(a)->origin[MJ_SETTING_CACHE_MODE], MJ_ORIGIN_OPTION);
    moejit_context_destroy(a);
    moejit_context_destroy(b);

    static const char *const bad[][2] = {{"MOEJIT_DECODE", "fast"}, {"MOEJIT_PDL", "yes"},
                                         {"MOEJIT_ALLOW_UNVALIDATED", "maybe"}, {"MOEJIT_COMPILE_TIMEOUT", "nan"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        restore_env();
        setenv(bad[i][0], bad[i][1], 1);
        moejit_context *c = (moejit_context *)1;
        ck_assert_int_eq(moejit_context_create(&off, &c), MOEJIT_ERR_INVALID_ARGUMENT);
        ck_assert_ptr_null(c);
        assert_error(bad[i][0], bad[i][1]);
    }
    restore_env();
}
END_TEST

START_TEST(kernels_carry_their_contexts_decode_mode_and_pdl)
{
    restore_env();
    setenv("MOEJIT_DECODE", "chain", 1);
    setenv("MOEJIT_PDL", "inner", 1);
    moejit_context *ctx = NULL;
    ck_assert_int_eq(moejit_context_create(NULL, &ctx), MOEJIT_OK);
    restore_env(); /* read once, at creation: later changes reach no kernel of ctx */
    moejit_spec *spec = NULL;
    ck_assert_int_eq(moejit_spec_parse("backend=simt,quant=bf16,act=relu,arch=sm_80", &spec), MOEJIT_OK);
    moejit_kernel *k = NULL;
    ck_assert_msg(moejit_kernel_get(ctx, spec, &k) == MOEJIT_OK, "%s", moejit_last_error());
    const mj_launch_knobs knobs = mj_kernel_knobs(k);
    ck_assert_int_eq(knobs.decode, MJ_DECODE_CHAIN);
    ck_assert_int_eq(knobs.pdl, MJ_PDL_INNER);
    moejit_spec_destroy(spec);
    moejit_context_destroy(ctx);
}
END_TEST

/* ---- the CLI ------------------------------------------------------------------------------------- */

static mj_test_cli t;
static mj_test_cli_result r;

static void cli_setup(void)
{
    restore_env();
    mj_test_cli_init(&t);
}

static void cli_teardown(void)
{
    mj_test_cli_result_free(&r);
    mj_test_cli_cleanup(&t);
}

static const cJSON *row_of(const cJSON *doc, const char *key)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(doc, "settings"))
    {
        if (!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(e, "key")), key)) return e;
    }
    ck_abort_msg("no setting %s", key);
    return NULL;
}

static const char *field(const cJSON *row, const char *name)
{
    const char *v = cJSON_GetStringValue(cJSON_GetObjectItem(row, name));
    ck_assert_msg(v != NULL, "no string %s", name);
    return v;
}

START_TEST(moejit_config_lists_every_knob_with_its_origin)
{
    char dir[400];
    snprintf(dir, sizeof dir, "%s/from-the-command-line", t.root);
    const char *const env[] = {"MOEJIT_DECODE=chain", "MOEJIT_COMPILE_TIMEOUT=12", NULL};
    mj_test_cli_run(&t, env, &r, "config", "--json", "--cache-dir", dir, (const char *)NULL);
    ASSERT_RC(0);
    cJSON *doc = mj_test_json(r.out);
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(doc, "settings")), MJ_SETTING_COUNT);
    for (int i = 0; i < MJ_SETTING_COUNT; i++) {
        const cJSON *row = cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "settings"), i);
        ck_assert_str_eq(field(row, "key"), mj_settings_table[i].key);
        ck_assert_str_eq(field(row, "env"), mj_settings_table[i].env);
        ck_assert_str_eq(field(row, "why"), mj_settings_table[i].why);
        field(row, "value"), field(row, "allowed"), field(row, "default"), field(row, "scope");
    }
    const cJSON *cache = row_of(doc, "cache_dir");
    ck_assert_str_eq(field(cache, "value"), dir);
    ck_assert_str_eq(field(cache, "origin"), "command line");
    ck_assert_str_eq(field(row_of(doc, "decode"), "value"), "chain");
    ck_assert_str_eq(field(row_of(doc, "decode"), "origin"), "environment");
    ck_assert_str_eq(field(row_of(doc, "compile_timeout"), "value"), "12");
    ck_assert_str_eq(field(row_of(doc, "lock_dir"), "origin"), "environment"); /* cli_run sets it */
    ck_assert_str_eq(field(row_of(doc, "cache_shared"), "origin"), "default");
    ck_assert_str_eq(field(row_of(doc, "allow_unvalidated"), "value"), "0");
    cJSON_Delete(doc);

    /* text: one line per knob, the same origins; `cache config` says command line too */
    mj_test_cli_run(&t, NULL, &r, "config", "--cache-dir", dir, (const char *)NULL);
    ASSERT_RC(0);
    for (int i = 0; i < MJ_SETTING_COUNT; i++) ck_assert_msg(strstr(r.out, mj_settings_table[i].env), "%s", r.out);
    ck_assert_msg(strstr(r.out, "(command line, MOEJIT_CACHE_DIR"), "%s", r.out);
    mj_test_cli_run(&t, NULL, &r, "cache", "config", "--json", "--cache-dir", dir, (const char *)NULL);
    ASSERT_RC(0);
    doc = mj_test_json(r.out);
    ck_assert_str_eq(field(row_of(doc, "cache_dir"), "origin"), "command line");
    cJSON_Delete(doc);
}
END_TEST

START_TEST(moejit_config_shows_a_bad_value_with_its_error)
{
    const char *const env[] = {"MOEJIT_PDL=sometimes", NULL};
    mj_test_cli_run(&t, env, &r, "config", "--json", (const char *)NULL);
    ASSERT_RC(2);
    cJSON *doc = mj_test_json(r.out);
    const cJSON *pdl = row_of(doc, "pdl");
    ck_assert_str_eq(field(pdl, "value"), "sometimes");
    ck_assert_msg(strstr(field(pdl, "error"), "MOEJIT_PDL"), "%s", field(pdl, "error"));
    ck_assert_ptr_null(cJSON_GetObjectItem(row_of(doc, "decode"), "error"));
    cJSON_Delete(doc);
    ck_assert_msg(strstr(r.err, "MOEJIT_PDL: must be 1"), "%s", r.err);
}
END_TEST

START_TEST(inspect_and_warm_refuse_a_bad_compile_timeout)
{
    static const char *const bad[] = {"abc", "nan", "-1", "0", "inf"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char var[64], want[96];
        snprintf(var, sizeof var, "MOEJIT_COMPILE_TIMEOUT=%s", bad[i]);
        snprintf(want, sizeof want, "MOEJIT_COMPILE_TIMEOUT: must be a number of seconds > 0, got '%s'", bad[i]);
        const char *const env[] = {var, NULL};
        mj_test_cli_run(&t, env, &r, "inspect", "quant=bf16,act=relu2,arch=sm_80", (const char *)NULL);
        ASSERT_RC(2);
        ck_assert_msg(strstr(r.err, want), "%s", r.err);
        mj_test_cli_run(&t, env, &r, "warm", "quant=bf16,act=relu2,arch=sm_80", (const char *)NULL);
        ASSERT_RC(2);
        ck_assert_msg(strstr(r.err, want), "%s", r.err);
    }
    /* warm's --timeout is the command line's value: it wins over the variable */
    const char *const env[] = {"MOEJIT_COMPILE_TIMEOUT=abc", NULL};
    mj_test_cli_run(&t, env, &r, "warm", "--dry-run", "--timeout", "30", "quant=bf16,act=relu2,arch=sm_80",
                    (const char *)NULL);
    ASSERT_RC(0);
}
END_TEST

static Suite *settings_suite(void)
{
    Suite *s = suite_create("settings");
    TCase *tc = tcase_create("table");
    tcase_add_test(tc, the_table_documents_every_knob_once);
    tcase_add_test(tc, defaults_have_the_default_origin);
    tcase_add_test(tc, every_knob_is_read_from_its_variable);
    tcase_add_test(tc, option_fields_win_over_the_environment_and_the_command_line_over_both);
    tcase_add_test(tc, bad_values_are_refused_naming_the_variable_and_the_allowed_values);
    suite_add_tcase(s, tc);
    TCase *ctx = tcase_create("context");
    tcase_add_test(ctx, a_context_resolves_its_own_settings_and_refuses_bad_ones);
    tcase_add_test(ctx, kernels_carry_their_contexts_decode_mode_and_pdl);
    tcase_add_test(ctx, a_contexts_compile_worker_option_names_the_worker_it_runs);
    suite_add_tcase(s, ctx);
    TCase *cli = tcase_create("cli");
    tcase_add_checked_fixture(cli, cli_setup, cli_teardown);
    tcase_add_test(cli, moejit_config_lists_every_knob_with_its_origin);
    tcase_add_test(cli, moejit_config_shows_a_bad_value_with_its_error);
    tcase_add_test(cli, inspect_and_warm_refuse_a_bad_compile_timeout);
    suite_add_tcase(s, cli);
    return s;
}

MJ_CHECK_MAIN(settings_suite)
