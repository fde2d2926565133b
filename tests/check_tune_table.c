/*
 * This file checks the tuning table (runtime/tune_table.c): parsing and its field-naming
 * errors, the match rules and bucket choice, the write/parse round trip, and the process
 * table from $MOEJIT_TUNE_FILE (a malformed file is reported once and ignored). The env tests
 * run in forked children (the file is read once per process).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/check_main.h"
#include "templates/common/mma_params.h"
#include "core/status.h"
#include "runtime/tune_table.h"

#define ENTRY(be, h, mt, path)                                                                            \
    "{\"backend\":\"" be "\",\"arch\":\"sm_90a\",\"hidden\":" #h ",\"inter\":768,\"experts\":128,\"topk\":8," \
    "\"gated\":true,\"dtype\":\"bf16\",\"max_tokens\":" #mt ",\"path\":\"" path "\"}"
#define TABLE(...) "{\"version\":1,\"entries\":[" __VA_ARGS__ "]}"

static const mj_tune_key qwen_wgmma = {MJ_BACKEND_WGMMA, MJ_ARCH_SM90A, 2048, 768, 128, 8, 1, MJ_DTYPE_BF16};

static mj_tune_table parse_ok(const char *text)
{
    mj_tune_table t;
    moejit_status st = mj_tune_table_parse(text, &t);
    ck_assert_msg(st == MOEJIT_OK, "%s: %s", text, moejit_last_error());
    return t;
}

START_TEST(a_valid_table_parses_every_field)
{
    mj_tune_table t = parse_ok(TABLE(ENTRY("wgmma", 2048, 512, "small") "," ENTRY("mma", 4096, 64, "large") ","
                                     ENTRY("wgmma", 2048, 4096, "tall") "," ENTRY("wgmma", 2048, 16384, "pair")));
    ck_assert_int_eq(t.n, 4);
    ck_assert_int_eq(t.entries[2].path, MJ_MMA_PATH_TALL);
    ck_assert_int_eq(t.entries[3].path, MJ_MMA_PATH_PAIR);
    ck_assert(mj_tune_key_equal(&t.entries[0].key, &qwen_wgmma));
    ck_assert_int_eq(t.entries[0].max_tokens, 512);
    ck_assert_int_eq(t.entries[0].path, MJ_MMA_PATH_SMALL);
    ck_assert_int_eq(t.entries[1].key.backend, MJ_BACKEND_MMA);
    ck_assert_int_eq(t.entries[1].key.hidden, 4096);
    ck_assert_int_eq(t.entries[1].path, MJ_MMA_PATH_LARGE);
    mj_tune_table_free(&t);
    t = parse_ok(TABLE());
    ck_assert_int_eq(t.n, 0);
    mj_tune_table_free(&t);
}
END_TEST

/* The table shipped for the H200 (bench/tune-h200.json, written by `moejit tune`; its timings
 * are in docs/PERFORMANCE.md) loads, covers the five model shapes of both backends, and
 * records what was measured there: Nemotron's wgmma layer on the pair path from 256 tokens,
 * Mixtral's from 512, Qwen3-30B-A3B's decode on the small path. */
START_TEST(the_shipped_h200_table_loads_and_holds_its_measured_choices)
{
    const char *dir = getenv("MOEJIT_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/bench/tune-h200.json", dir ? dir : ".");
    mj_tune_table t;
    ck_assert_msg(mj_tune_table_load(path, &t) == MOEJIT_OK, "%s: %s", path, moejit_last_error());
    ck_assert_int_eq(t.n, 60); /* 5 shapes x 6 batch buckets x 2 backends */
    const mj_tune_key nemotron = {MJ_BACKEND_WGMMA, MJ_ARCH_SM90A, 2688, 1856, 128, 6, 0, MJ_DTYPE_BF16};
    const mj_tune_key mixtral = {MJ_BACKEND_WGMMA, MJ_ARCH_SM90A, 4096, 14336, 8, 2, 1, MJ_DTYPE_BF16};
    mj_tune_key qwen = qwen_wgmma;
    ck_assert_int_eq(mj_tune_table_lookup(&t, &nemotron, 256), MJ_MMA_PATH_PAIR);
    ck_assert_int_eq(mj_tune_table_lookup(&t, &nemotron, 64), MJ_MMA_PATH_SMALL);
    ck_assert_int_eq(mj_tune_table_lookup(&t, &mixtral, 512), MJ_MMA_PATH_PAIR);
    ck_assert_int_eq(mj_tune_table_lookup(&t, &mixtral, 256), MJ_MMA_PATH_LARGE);
    ck_assert_int_eq(mj_tune_table_lookup(&t, &qwen, 8), MJ_MMA_PATH_SMALL);
    ck_assert_int_eq(mj_tune_table_lookup(&t, &qwen, 4096), MJ_MMA_PATH_AUTO); /* above 2048: the heuristic */
    qwen.backend = MJ_BACKEND_MMA;
    ck_assert_int_eq(mj_tune_table_lookup(&t, &qwen, 256), MJ_MMA_PATH_SMALL);
    mj_tune_table_free(&t);
}
END_TEST

START_TEST(the_smallest_bucket_holding_t_wins_and_above_every_bucket_is_auto)
{
    /* listed out of order on purpose: the bucket, not the position, decides */
    mj_tune_table t = parse_ok(TABLE(ENTRY("wgmma", 2048, 4096, "large") "," ENTRY("wgmma", 2048, 64, "small") ","
                                         ENTRY("wgmma", 2048, 512, "large")));
    ck_assert_int_eq(mj_tune_table_lookup(&t, &qwen_wgmma, 1), MJ_MMA_PATH_SMALL);
    ck_assert_int_eq(mj_tune_table_lookup(&t, &qwen_wgmma, 64), MJ_MMA_PATH_SMALL);
    ck_assert_int_eq(mj_tune_table_lookup(&t, &qwen_wgmma, 65), MJ_MMA_PATH_LARGE);
    ck_assert_int_eq(mj_tune_table_lookup(&t, &qwen_wgmma, 4096), MJ_MMA_PATH_LARGE);
    ck_assert_int_eq(mj_tune_table_lookup(&t, &qwen_wgmma, 4097), MJ_MMA_PATH_AUTO);
    ck_assert_int_eq(mj_tune_table_lookup(NULL, &qwen_wgmma, 1), MJ_MMA_PATH_AUTO);
    mj_tune_table_free(&t);
    /* two entries with the same bucket: the first in the file wins */
    t = parse_ok(TABLE(ENTRY("wgmma", 2048, 64, "large") "," ENTRY("wgmma", 2048, 64, "small")));
    ck_assert_int_eq(mj_tune_table_lookup(&t, &qwen_wgmma, 8), MJ_MMA_PATH_LARGE);
    mj_tune_table_free(&t);
}
END_TEST

START_TEST(every_key_field_must_match)
{
    mj_tune_table t = parse_ok(TABLE(ENTRY("wgmma", 2048, 512, "large")));
    ck_assert_int_eq(mj_tune_table_lookup(&t, &qwen_wgmma, 8), MJ_MMA_PATH_LARGE);
    for (int f = 0; f < 8; f++) {
        mj_tune_key k = qwen_wgmma;
        switch (f) {
        case 0: k.backend = MJ_BACKEND_MMA; break;
        case 1: k.arch = MJ_ARCH_SM100A; break;
        case 2: k.hidden = 4096; break;
        case 3: k.inter = 1536; break;
        case 4: k.experts = 16; break;
        case 5: k.topk = 6; break;
        case 6: k.gated = 0; break;
        default: k.dtype = MJ_DTYPE_FP16; break;
        }
        ck_assert_msg(mj_tune_table_lookup(&t, &k, 8) == MJ_MMA_PATH_AUTO, "key field %d changed, still matched", f);
    }
    mj_tune_table_free(&t);
}
END_TEST

START_TEST(bad_tables_are_refused_naming_the_field)
{
    static const char *const cases[][2] = {
        {"not json", "not valid JSON"},
        {"[1]", "must be an object"},
        {"{\"entries\":[]}", "version: missing"},
        {"{\"version\":2,\"entries\":[]}", "version: unsupported"},
        {"{\"version\":1}", "entries: missing"},
        {"{\"version\":1,\"entries\":{}}", "entries: must be an array"},
        {"{\"version\":1,\"entries\":[],\"extra\":1}", "extra: unknown field"},
        {TABLE("3"), "entries[0]: must be an object"},
        {TABLE(ENTRY("simt", 2048, 8, "small")), "entries[0].backend: \"simt\"; allowed: mma, wgmma"},
        {TABLE(ENTRY("mma", 2048, 8, "medium")), "entries[0].path: \"medium\"; allowed for mma: large, small"},
        {TABLE(ENTRY("mma", 2048, 8, "tall")), "entries[0].path: \"tall\"; allowed for mma: large, small"},
        {TABLE(ENTRY("mma", 2048, 8, "pair")), "entries[0].path: \"pair\"; allowed for mma: large, small"},
        {TABLE(ENTRY("wgmma", 2048, 8, "wide")),
         "entries[0].path: \"wide\"; allowed for wgmma: large, small, tall, pair"},
        {TABLE(ENTRY("mma", 2048, 0, "small")), "entries[0].max_tokens: must be a whole number"},
        {TABLE(ENTRY("mma", 2048, 8, "small") "," ENTRY("mma", 20.5, 8, "small")), "entries[1].hidden: must be"},
        {TABLE(ENTRY("mma", -4, 8, "small")), "entries[0].hidden"},
        {TABLE("{\"backend\":\"mma\"}"), "entries[0].arch: missing"},
        {TABLE("{\"backend\":\"mma\",\"arch\":\"sm_91\"}"), "entries[0].arch: \"sm_91\"; allowed:"},
        {TABLE("{\"backend\":\"mma\",\"arch\":\"sm_80\",\"hidden\":64,\"inter\":64,\"experts\":8,\"topk\":2,"
               "\"dtype\":\"bf16\",\"max_tokens\":8,\"path\":\"small\"}"),
         "entries[0].gated: missing"},
        {TABLE("{\"backend\":\"mma\",\"arch\":\"sm_80\",\"hidden\":64,\"inter\":64,\"experts\":8,\"topk\":2,"
               "\"gated\":1,\"dtype\":\"bf16\",\"max_tokens\":8,\"path\":\"small\"}"),
         "entries[0].gated: must be true or false"},
        {TABLE("{\"backend\":\"mma\",\"arch\":\"sm_80\",\"hidden\":64,\"inter\":64,\"experts\":8,\"topk\":2,"
               "\"gated\":true,\"dtype\":\"fp32\",\"max_tokens\":8,\"path\":\"small\"}"),
         "entries[0].dtype: \"fp32\"; allowed: bf16, fp16"},
        {TABLE("{\"backend\":\"mma\",\"arch\":\"sm_80\",\"hidden\":64,\"inter\":64,\"experts\":8,\"topk\":2,"
               "\"gated\":true,\"dtype\":\"bf16\",\"max_tokens\":8,\"path\":\"small\",\"tile\":\"x\"}"),
         "entries[0].tile: unknown field"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mj_tune_table t;
        moejit_status st = mj_tune_table_parse(cases[i][0], &t);
        ck_assert_msg(st == MOEJIT_ERR_INVALID_ARGUMENT && strstr(moejit_last_error(), cases[i][1]),
                      "case %zu: status %d, error \"%s\", want \"%s\"", i, (int)st, moejit_last_error(), cases[i][1]);
        ck_assert_int_eq(t.n, 0);
        ck_assert_ptr_null(t.entries);
    }
}
END_TEST

START_TEST(a_written_table_parses_back_to_the_same_entries)
{
    mj_tune_table t = parse_ok(TABLE(ENTRY("wgmma", 2048, 1, "small") "," ENTRY("mma", 7168, 4096, "large") ","
                                     ENTRY("wgmma", 7168, 16384, "tall")));
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_int_eq(mj_tune_table_write(f, &t), 0);
    fclose(f);
    mj_tune_table back = parse_ok(buf);
    ck_assert_int_eq(back.n, 3);
    for (int i = 0; i < 3; i++) {
        ck_assert(mj_tune_key_equal(&back.entries[i].key, &t.entries[i].key));
        ck_assert_int_eq(back.entries[i].max_tokens, t.entries[i].max_tokens);
        ck_assert_int_eq(back.entries[i].path, t.entries[i].path);
    }
    free(buf);
    mj_tune_table_free(&back);
    mj_tune_table_free(&t);
}
END_TEST

/* ---- the process table --------------------------------------------------------------------- */

static const moejit_moe_args qwen_args = {.num_tokens = 8, .hidden = 2048, .inter = 768, .num_experts = 128, .topk = 8};

static moejit_spec *wgmma_spec(void)
{
    moejit_spec *s = NULL;
    ck_assert_int_eq(moejit_spec_parse("backend=wgmma,quant=bf16,act=swiglu,arch=sm_90a", &s), MOEJIT_OK);
    return s;
}

/* Runs fn in a child with $MOEJIT_TUNE_FILE set to a file holding text (NULL: no variable),
 * stderr into err; returns the child's exit status. */
static int in_child_with_file(const char *text, const char *path_override, int (*fn)(void), char *err, size_t cap)
{
    char dir[] = "/tmp/mj-tune-XXXXXX", file[64], errfile[64];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(file, sizeof file, "%s/tune.json", dir);
    snprintf(errfile, sizeof errfile, "%s/stderr", dir);
    if (text) {
        FILE *f = fopen(file, "w");
        ck_assert_ptr_nonnull(f);
        fputs(text, f);
        fclose(f);
    }
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (!freopen(errfile, "w", stderr)) _exit(90);
        if (path_override) setenv(MJ_TUNE_FILE_ENV, path_override, 1);
        else if (text) setenv(MJ_TUNE_FILE_ENV, file, 1);
        else unsetenv(MJ_TUNE_FILE_ENV);
        int rc = fn();
        fflush(NULL); /* _exit flushes nothing */
        _exit(rc);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    FILE *f = fopen(errfile, "r");
    size_t n = f ? fread(err, 1, cap - 1, f) : 0;
    err[n] = '\0';
    if (f) fclose(f);
    unlink(errfile), unlink(file), rmdir(dir);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/* Exit status: the path chosen at T = 8, twice (the second call must not warn again). */
static int path_twice(void)
{
    moejit_spec *s = wgmma_spec();
    int a = mj_tune_path(s, &qwen_args), b = mj_tune_path(s, &qwen_args);
    moejit_spec_destroy(s);
    return a == b ? a : 99;
}

START_TEST(the_environment_file_is_applied)
{
    char err[1024];
    int rc = in_child_with_file(TABLE(ENTRY("wgmma", 2048, 64, "large")), NULL, path_twice, err, sizeof err);
    ck_assert_int_eq(rc, MJ_MMA_PATH_LARGE);
    ck_assert_str_eq(err, "");
    rc = in_child_with_file(NULL, NULL, path_twice, err, sizeof err);
    ck_assert_int_eq(rc, MJ_MMA_PATH_AUTO);
    ck_assert_str_eq(err, "");
    rc = in_child_with_file(NULL, "", path_twice, err, sizeof err); /* empty: no table, no warning */
    ck_assert_int_eq(rc, MJ_MMA_PATH_AUTO);
    ck_assert_str_eq(err, "");
}
END_TEST

START_TEST(a_malformed_file_warns_once_and_is_ignored)
{
    char err[1024];
    /* the first entry is good, the second is not: nothing of the file applies */
    int rc = in_child_with_file(TABLE(ENTRY("wgmma", 2048, 64, "large") "," ENTRY("wgmma", 2048, 8, "huge")), NULL,
                                path_twice, err, sizeof err);
    ck_assert_int_eq(rc, MJ_MMA_PATH_AUTO);
    ck_assert_msg(strstr(err, "moejit: warning: MOEJIT_TUNE_FILE=") && strstr(err, "tune.json") &&
                      strstr(err, "entries[1].path") && strstr(err, "built-in tile heuristic"),
                  "stderr: %s", err);
    ck_assert_msg(strchr(err, '\n') == err + strlen(err) - 1, "warned more than once: %s", err);
    /* a file that is not there is reported the same way */
    rc = in_child_with_file(NULL, "/nonexistent/tune.json", path_twice, err, sizeof err);
    ck_assert_int_eq(rc, MJ_MMA_PATH_AUTO);
    ck_assert_msg(strstr(err, "cannot open /nonexistent/tune.json"), "stderr: %s", err);
}
END_TEST

START_TEST(the_test_hook_replaces_the_process_table)
{
    moejit_spec *s = wgmma_spec();
    ck_assert_int_eq(mj_tune_table_install(TABLE(ENTRY("wgmma", 2048, 64, "small"))), MOEJIT_OK);
    ck_assert_int_eq(mj_tune_path(s, &qwen_args), MJ_MMA_PATH_SMALL);
    moejit_moe_args ep = qwen_args;
    ep.num_local_experts = 16; /* experts matches the local count: another shape */
    ck_assert_int_eq(mj_tune_path(s, &ep), MJ_MMA_PATH_AUTO);
    ck_assert_int_eq(mj_tune_table_install("{"), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mj_tune_path(s, &qwen_args), MJ_MMA_PATH_AUTO);
    ck_assert_int_eq(mj_tune_table_install(NULL), MOEJIT_OK);
    ck_assert_int_eq(mj_tune_path(s, &qwen_args), MJ_MMA_PATH_AUTO);
    moejit_spec_destroy(s);
}
END_TEST

static Suite *tune_table_suite(void)
{
    Suite *s = suite_create("tune_table");
    TCase *tc = tcase_create("tune_table");
    tcase_add_test(tc, a_valid_table_parses_every_field);
    tcase_add_test(tc, the_shipped_h200_table_loads_and_holds_its_measured_choices);
    tcase_add_test(tc, the_smallest_bucket_holding_t_wins_and_above_every_bucket_is_auto);
    tcase_add_test(tc, every_key_field_must_match);
    tcase_add_test(tc, bad_tables_are_refused_naming_the_field);
    tcase_add_test(tc, a_written_table_parses_back_to_the_same_entries);
    tcase_add_test(tc, the_environment_file_is_applied);
    tcase_add_test(tc, a_malformed_file_warns_once_and_is_ignored);
    tcase_add_test(tc, the_test_hook_replaces_the_process_table);
    suite_add_tcase(s, tc);
    return s;
}

MJ_CHECK_MAIN(tune_table_suite)
