/*
 * This file checks `moejit warm` through the built CLI: warming twice compiles nothing the
 * second time, --dry-run lists without compiling, a failing compile keeps its source,
 * options and log in failed/ and makes the exit status 1 without stopping the others (a
 * tensor-core layer's failing module too), --timeout bounds each compile, a preset with several
 * jobs, unsupported specs, manifests, and that warm never opens the CUDA driver.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/check_main.h"
#include "lib/cli_run.h"
#include "lib/fake_cuda.h"

#define SPEC_A "quant=fp16,act=relu2,arch=sm_80"
#define SPEC_B "quant=bf16,act=relu2,arch=sm_80"

MJ_TEST_CLI_SUITE

/* The summary counts of a `warm --json` run. */
typedef struct counts {
    int total, compiled, present, unsupported, failed, to_compile;
} counts;

static counts summary(void)
{
    cJSON *j = mj_test_json(r.out);
    counts c = {(int)mj_test_json_num(j, "total"),       (int)mj_test_json_num(j, "compiled"),
                (int)mj_test_json_num(j, "present"),     (int)mj_test_json_num(j, "unsupported"),
                (int)mj_test_json_num(j, "failed"),      (int)mj_test_json_num(j, "to_compile")};
    cJSON_Delete(j);
    return c;
}

static int cache_entries(void)
{
    mj_test_cli_result l = {0};
    mj_test_cli_run(&t, NULL, &l, "cache", "ls", "--json", (const char *)NULL);
    ck_assert_int_eq(l.rc, 0);
    cJSON *j = mj_test_json(l.out);
    int n = (int)mj_test_json_num(j, "count");
    cJSON_Delete(j);
    mj_test_cli_result_free(&l);
    return n;
}

START_TEST(warming_twice_compiles_nothing_the_second_time)
{
    RUN("warm", SPEC_A, SPEC_B, "--jobs", "2", "--json");
    ASSERT_RC(0);
    counts c = summary();
    ck_assert_int_eq(c.total, 2);
    ck_assert_int_eq(c.compiled, 2);
    ck_assert_int_eq(c.present, 0);
    ck_assert_int_eq(cache_entries(), 2);

    RUN("warm", SPEC_A, SPEC_B, "--jobs", "2", "--json");
    ASSERT_RC(0);
    c = summary();
    ck_assert_int_eq(c.compiled, 0);
    ck_assert_int_eq(c.present, 2);

    /* The plain-text summary says the same. */
    RUN("warm", SPEC_A, SPEC_B);
    ASSERT_RC(0);
    ck_assert_msg(strstr(r.out, "warm: 0 compiled, 2 already present, 0 unsupported (skipped), 0 failed"), "%s", r.out);
}
END_TEST

START_TEST(dry_run_lists_what_would_be_compiled_and_compiles_nothing)
{
    RUN("warm", SPEC_A, "--json");
    ASSERT_RC(0);
    /* The same spec twice (another spelling) is one kernel. */
    RUN("warm", SPEC_A, SPEC_B, "act=relu2,quant=fp16,arch=sm_80", "--dry-run");
    ASSERT_RC(0);
    ck_assert_msg(strstr(r.out, "present ") && strstr(r.out, "compile ") && strstr(r.out, "quant=bf16"), "%s", r.out);
    ck_assert_msg(strstr(r.out, "1 to compile, 1 already present"), "%s", r.out);
    RUN("warm", SPEC_A, SPEC_B, "--dry-run", "--json");
    ASSERT_RC(0);
    counts c = summary();
    ck_assert_int_eq(c.to_compile, 1);
    ck_assert_int_eq(c.present, 1);
    ck_assert_int_eq(c.compiled, 0);
    ck_assert_int_eq(cache_entries(), 1);
}
END_TEST

START_TEST(a_failed_compile_keeps_its_inputs_and_exits_1)
{
    /* Every compile worker crashes: both jobs fail, neither stops the other. */
    static const char *const crash[] = {"MOEJIT_WORKER_FAULT=crash", NULL};
    mj_test_cli_run(&t, crash, &r, "warm", SPEC_A, SPEC_B, "--jobs", "2", "--json", (const char *)NULL);
    ASSERT_RC(1);
    counts c = summary();
    ck_assert_int_eq(c.failed, 2);
    ck_assert_int_eq(c.compiled, 0);
    cJSON *j = mj_test_json(r.out);
    const cJSON *item;
    int dirs = 0;
    cJSON_ArrayForEach(item, cJSON_GetObjectItem(j, "items"))
    {
        const char *dir = cJSON_GetStringValue(cJSON_GetObjectItem(item, "failed_dir"));
        ck_assert_ptr_nonnull(dir);
        static const char *const files[] = {"source.cu", "options.txt", "log.txt", "spec.txt"};
        for (int f = 0; f < 4; f++) {
            char path[1024];
            snprintf(path, sizeof path, "%s/%s", dir, files[f]);
            ck_assert_msg(mj_test_exists(path), "missing %s", path);
        }
        ck_assert_msg(strncmp(dir, t.cache, strlen(t.cache)) == 0 && strstr(dir, "/failed/"), "%s", dir);
        dirs++;
    }
    ck_assert_int_eq(dirs, 2);
    cJSON_Delete(j);
    ck_assert_int_eq(cache_entries(), 0);

    /* Plain output: one line per failure naming the folder, and the summary. */
    mj_test_cli_run(&t, crash, &r, "warm", SPEC_A, (const char *)NULL);
    ASSERT_RC(1);
    ck_assert_msg(strstr(r.out, "failed ") && strstr(r.out, "/failed/") && strstr(r.out, "1 failed"), "%s", r.out);

    /* Without the fault it compiles, and the stale failure folder goes. */
    char failed_dir[600];
    snprintf(failed_dir, sizeof failed_dir, "%s/failed", t.cache);
    RUN("warm", SPEC_A, "--json");
    ASSERT_RC(0);
    ck_assert_int_eq(summary().compiled, 1);
    j = mj_test_json(r.out);
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/%s", failed_dir,
             cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "items"), 0), "key")));
    cJSON_Delete(j);
    ck_assert_msg(!mj_test_exists(dir), "%s was kept after a successful compile", dir);
}
END_TEST

START_TEST(preset_warms_with_two_jobs_and_skips_unsupported_formats)
{
    RUN("warm", "--preset", "qwen3-30b-a3b", "--arch", "sm_80", "--jobs", "2", "--json");
    ASSERT_RC(0);
    counts c = summary();
    ck_assert_int_ge(c.compiled, 2);                  /* bf16 and fp16 today */
    ck_assert_int_eq(c.failed, 0);
    ck_assert_int_eq(c.compiled + c.unsupported, c.total);
    cJSON *j = mj_test_json(r.out);
    const cJSON *item;
    int fp8 = 0;
    cJSON_ArrayForEach(item, cJSON_GetObjectItem(j, "items"))
    {
        const char *spec = cJSON_GetStringValue(cJSON_GetObjectItem(item, "spec"));
        ck_assert_msg(strstr(spec, "hidden=2048,inter=768,experts=128,topk=8") && strstr(spec, "arch=sm_80"), "%s", spec);
        if (strstr(spec, "quant=fp8_block")) {
            fp8++;
            const char *state = cJSON_GetStringValue(cJSON_GetObjectItem(item, "state"));
            /* Listed, not failed: compiled once a backend supports it. */
            ck_assert_msg(!strcmp(state, "unsupported") || !strcmp(state, "compiled"), "%s", state);
        }
    }
    ck_assert_int_eq(fp8, 1);
    cJSON_Delete(j);

    RUN("warm", "--preset", "qwen3-30b-a3b", "--arch", "sm_80", "--jobs", "2", "--json");
    ASSERT_RC(0);
    counts again = summary();
    ck_assert_int_eq(again.compiled, 0);
    ck_assert_int_eq(again.present, c.compiled);
}
END_TEST

START_TEST(every_preset_expands_for_several_archs)
{
    static const char *const presets[] = {"mixtral-8x7b", "qwen3-30b-a3b", "qwen3-235b-a22b", "deepseek-v3",
                                          "kimi-k2",      "gpt-oss-120b",  "nemotron-3-nano"};
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        RUN("warm", "--preset", presets[i], "--arch", "sm_80,sm_90a", "--dry-run", "--json");
        ASSERT_RC(0);
        counts c = summary();
        ck_assert_msg(c.total >= 4 && c.total % 2 == 0, "%s: %d specs", presets[i], c.total);
        ck_assert_int_eq(c.compiled, 0);
    }
    RUN("warm", "--preset", "gpt-oss-120b", "--arch", "sm_90a", "--dry-run", "--json");
    ck_assert_msg(strstr(r.out, "act=swiglu(alpha=0x1.b3b646p+0,beta=0x1p+0,limit=0x1.cp+2)"), "%s", r.out);
    RUN("warm", "--preset", "nemotron-3-nano", "--arch", "sm_90a", "--dry-run", "--json");
    ck_assert_msg(strstr(r.out, "act=relu2") && strstr(r.out, "topk=6"), "%s", r.out);
}
END_TEST

START_TEST(an_unsupported_spec_argument_makes_warm_fail)
{
    /* wgmma is a Hopper instruction: a wgmma layer for sm_80 stays unsupported. */
    RUN("warm", "backend=wgmma,quant=bf16,act=swiglu,arch=sm_80", SPEC_A, "--json");
    ASSERT_RC(1);
    counts c = summary();
    ck_assert_int_eq(c.unsupported, 1);
    ck_assert_int_eq(c.compiled, 1); /* the others are still compiled */
}
END_TEST

START_TEST(manifest_expands_specs_archs_and_shapes)
{
    char path[600];
    snprintf(path, sizeof path, "%s/manifest.json", t.root);
    mj_test_write_file(path, "{\"kernels\":[\n"
                             " {\"spec\":\"quant=bf16,act=silu\",\"archs\":[\"sm_80\",\"sm_90a\"],\n"
                             "  \"shapes\":[{\"hidden\":1024,\"inter\":512,\"experts\":8,\"topk\":2},{\"hidden\":2048}]},\n"
                             " {\"spec\":{\"quant\":\"fp16\",\"act\":\"relu2\",\"arch\":\"sm_86\"}}]}\n");
    RUN("warm", "--manifest", path, "--dry-run", "--json");
    ASSERT_RC(0);
    counts c = summary();
    ck_assert_int_eq(c.total, 5);
    ck_assert_int_eq(c.to_compile, 5);
    ck_assert_msg(strstr(r.out, "hidden=1024,inter=512,experts=8,topk=2") && strstr(r.out, "arch=sm_86"), "%s", r.out);

    /* --arch adds to an entry's "archs" and replaces the arch of an entry without them. */
    RUN("warm", "--manifest", path, "--arch", "sm_89", "--dry-run", "--json");
    ASSERT_RC(0);
    ck_assert_int_eq(summary().total, 3 * 2 + 1);

    /* A misspelt key is an error that names it, not something silently ignored. */
    mj_test_write_file(path, "{\"kernels\":[{\"spec\":\"quant=bf16,arch=sm_80\",\"arch\":[\"sm_90a\"]}]}");
    RUN("warm", "--manifest", path, "--dry-run");
    ASSERT_RC(2);
    ck_assert_msg(mj_test_count_lines(r.err) == 1 && strstr(r.err, "\"arch\""), "%s", r.err);
    mj_test_write_file(path, "{\"kernels\":[{\"spec\":\"quant=bf16,arch=sm_80\"}");
    RUN("warm", "--manifest", path, "--dry-run");
    ASSERT_RC(2);
    ck_assert_int_eq(mj_test_count_lines(r.err), 1);

    /* Keys match whole, once; numbers are range-checked before any conversion; no NUL. */
    static const char *const refused[][2] = {
        {"{\"kernels\":[{\"spe\":\"quant=bf16,arch=sm_80\"}]}", "unknown key \"spe\""},
        {"{\"kernels\":[{\"spec\":\"quant=bf16,arch=sm_80\",\"spec\":\"quant=fp16,arch=sm_80\"}]}",
         "duplicate key \"spec\""},
        {"{\"kernels\":[{\"spec\":\"quant=bf16,arch=sm_80\",\"shapes\":[{\"hidden\":1e300}]}]}",
         "hidden: expected a non-negative integer"},
        {"{\"kernels\":[{\"spec\":\"quant=bf16,arch=sm_80\\u0000,quant=fp16\"}]}", "a NUL character"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        mj_test_write_file(path, refused[i][0]);
        RUN("warm", "--manifest", path, "--dry-run");
        ASSERT_RC(2);
        ck_assert_msg(strstr(r.err, refused[i][1]) && mj_test_count_lines(r.err) == 1, "%s: %s", refused[i][0], r.err);
    }
    /* a FIFO named as the manifest is refused at once, not waited on */
    char fifo[600];
    snprintf(fifo, sizeof fifo, "%s/manifest.fifo", t.root);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    RUN("warm", "--manifest", fifo, "--dry-run");
    ASSERT_RC(2);
    ck_assert_msg(strstr(r.err, "FIFO") || strstr(r.err, "not a regular file"), "%s", r.err);
}
END_TEST

START_TEST(presets_warm_what_auto_runs_and_backend_overrides_it)
{
    RUN("warm", "--preset", "qwen3-30b-a3b", "--arch", "sm_90a", "--dry-run", "--json");
    ASSERT_RC(0);
    int total = summary().total;
    /* every format of the preset has a validated wgmma layer on sm_90a */
    ck_assert_msg(strstr(r.out, "backend=wgmma,quant=bf16") && strstr(r.out, "backend=wgmma,quant=fp8_block") &&
                      !strstr(r.out, "backend=simt"),
                  "%s", r.out);
    RUN("warm", "--preset", "qwen3-30b-a3b", "--arch", "sm_90a", "--backend", "simt,mma,simt", "--dry-run", "--json");
    ASSERT_RC(0);
    counts c = summary();
    /* each variant once per distinct backend; mma supports only some of them */
    ck_assert_int_eq(c.total, 2 * total);
    ck_assert_msg(!strstr(r.out, "backend=wgmma") && strstr(r.out, "backend=mma,quant=bf16"), "%s", r.out);
    ck_assert_int_gt(c.unsupported, 0);
    RUN("warm", SPEC_A, "--backend", "simt,tpu", "--dry-run");
    ASSERT_RC(2);
    ck_assert_msg(strstr(r.err, "--backend: unknown backend 'tpu'; allowed: simt, mma, wgmma, auto"), "%s", r.err);
}
END_TEST

START_TEST(warm_refuses_a_read_only_cache)
{
    static const char *const ro[] = {"MOEJIT_CACHE_MODE=read-only", NULL};
    mj_test_cli_run(&t, ro, &r, "warm", SPEC_A, (const char *)NULL);
    ASSERT_RC(2);
    ck_assert_msg(strstr(r.err, "read-only") && mj_test_count_lines(r.err) == 1, "%s", r.err);
}
END_TEST

START_TEST(a_failed_tensor_core_layer_keeps_its_failing_modules_inputs)
{
    static const char *const crash[] = {"MOEJIT_WORKER_FAULT=crash", NULL};
    mj_test_cli_run(&t, crash, &r, "warm", "backend=mma,quant=bf16,act=silu,arch=sm_80", "--jobs", "2", "--json",
                    (const char *)NULL);
    ASSERT_RC(1);
    ck_assert_int_eq(summary().failed, 1);
    cJSON *j = mj_test_json(r.out);
    const cJSON *item = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "items"), 0);
    const char *dir = cJSON_GetStringValue(cJSON_GetObjectItem(item, "failed_dir"));
    ck_assert_ptr_nonnull(dir);
    char path[1024];
    snprintf(path, sizeof path, "%s/source.cu", dir);
    ck_assert_msg(mj_test_exists(path), "missing %s", path);
    snprintf(path, sizeof path, "%s/log.txt", dir);
    ck_assert_msg(mj_test_exists(path), "missing %s", path);
    cJSON_Delete(j);
}
END_TEST

START_TEST(timeout_bounds_each_compile)
{
    static const char *const hang[] = {"MOEJIT_WORKER_FAULT=hang", NULL};
    mj_test_cli_run(&t, hang, &r, "warm", SPEC_A, "--timeout", "1", "--json", (const char *)NULL);
    ASSERT_RC(1);
    ck_assert_int_eq(summary().failed, 1);
    ck_assert_msg(strstr(r.out, "timed out after 1 s"), "%s", r.out);
}
END_TEST

START_TEST(warm_never_opens_the_cuda_driver)
{
    /* A driver whose cuInit fails: warm would fail its spec had it opened the driver. */
    const char *lib = mj_test_fake_libcuda();
    ck_assert_ptr_nonnull(lib);
    char libcuda[600];
    snprintf(libcuda, sizeof libcuda, "MOEJIT_LIBCUDA=%s", lib);
    const char *const env[] = {libcuda, "FAKE_CUDA=initfail", NULL};
    mj_test_cli_run(&t, env, &r, "warm", SPEC_A, "--json", (const char *)NULL);
    ASSERT_RC(0);
    ck_assert_int_eq(summary().compiled, 1);
}
END_TEST

static Suite *cli_warm_suite(void)
{
    Suite *s = suite_create("cli_warm");
    TCase *tc = tcase_create("warm");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, warming_twice_compiles_nothing_the_second_time);
    tcase_add_test(tc, dry_run_lists_what_would_be_compiled_and_compiles_nothing);
    tcase_add_test(tc, a_failed_compile_keeps_its_inputs_and_exits_1);
    tcase_add_test(tc, a_failed_tensor_core_layer_keeps_its_failing_modules_inputs);
    tcase_add_test(tc, timeout_bounds_each_compile);
    tcase_add_test(tc, warm_never_opens_the_cuda_driver);
    tcase_add_test(tc, preset_warms_with_two_jobs_and_skips_unsupported_formats);
    tcase_add_test(tc, every_preset_expands_for_several_archs);
    tcase_add_test(tc, presets_warm_what_auto_runs_and_backend_overrides_it);
    tcase_add_test(tc, an_unsupported_spec_argument_makes_warm_fail);
    tcase_add_test(tc, manifest_expands_specs_archs_and_shapes);
    tcase_add_test(tc, warm_refuses_a_read_only_cache);
    suite_add_tcase(s, tc);
    return s;
}

MJ_CHECK_MAIN(cli_warm_suite)
