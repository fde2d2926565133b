/*
 * This file checks the moejit CLI as a user meets it (the built binary, run in a child
 * process with a private cache): --help and --version, the one-line usage errors with exit
 * status 2, `matrix --format json`, and `inspect` of a SPEC and of a KEY with its views
 * (report, --source, --ptx, --log, --preimage, --sass, --why), text and --json, and
 * `bench jit` (its JSON and the row it appends), `bench layer --list-specs`, and `tune`'s
 * usage and no-device errors.
 * `warm` is in check_cli_warm.c, `cache` in check_cli_cache.c.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/check_main.h"
#include "lib/cli_run.h"

/* Small specs: each compile costs ~0.6 s. */
#define SPEC_A "quant=fp16,act=relu2,arch=sm_80"
#define SPEC_SWIGLU "quant=bf16,act=swiglu(alpha=1),arch=sm_80"
#define SPEC_SWIGLU_NEXT "quant=bf16,act=swiglu(alpha=1.0000001),arch=sm_80"

MJ_TEST_CLI_SUITE

/* ---- help, version, usage errors ------------------------------------------------------------ */

static const char *const commands[][2] = {
    {"demo", NULL}, {"warm", NULL}, {"inspect", NULL}, {"cache", NULL}, {"matrix", NULL}, {"bench", "jit"},
};
#define N_COMMANDS (int)(sizeof commands / sizeof commands[0])

START_TEST(every_command_help_exits_0_and_shows_examples)
{
    const char *const *c = commands[_i];
    if (c[1]) RUN(c[0], c[1], "--help");
    else RUN(c[0], "--help");
    ASSERT_RC(0);
    ck_assert_msg(strstr(r.out, "usage: moejit") && strstr(r.out, "Examples:"), "%s --help:\n%s", c[0], r.out);
    ck_assert_str_eq(r.err, "");
}
END_TEST

START_TEST(top_level_help_lists_every_command)
{
    RUN("--help");
    ASSERT_RC(0);
    for (int i = 0; i < N_COMMANDS; i++) ck_assert_msg(strstr(r.out, commands[i][0]), "no %s in:\n%s", commands[i][0], r.out);
    RUN("no-such-command");
    ASSERT_RC(2);
    ck_assert_int_eq(mj_test_count_lines(r.err), 1);
}
END_TEST

START_TEST(unknown_option_exits_2_with_one_line)
{
    const char *const *c = commands[_i];
    if (c[1]) RUN(c[0], c[1], "--no-such-option");
    else if (!strcmp(c[0], "cache")) RUN(c[0], "ls", "--no-such-option");
    else RUN(c[0], "--no-such-option");
    ASSERT_RC(2);
    ck_assert_str_eq(r.out, "");
    ck_assert_msg(mj_test_count_lines(r.err) == 1 && strstr(r.err, "--no-such-option"), "stderr:\n%s", r.err);
}
END_TEST

START_TEST(bad_values_exit_2_with_one_line_naming_the_option)
{
    static const char *const cases[][6] = {
        {"warm", "--jobs", "many", SPEC_A, NULL, "--jobs"},
        {"warm", "--jobs", "0", SPEC_A, NULL, "--jobs"},
        {"warm", "--arch", "sm_99", SPEC_A, NULL, "sm_99"},
        {"warm", "--preset", "no-such-model", NULL, NULL, "no-such-model"},
        {"warm", "--timeout", "-1", SPEC_A, NULL, "--timeout"},
        {"cache", "gc", "--max-size", "3Q", NULL, "3Q"},
        {"cache", "gc", "--max-age", "forever", NULL, "forever"},
        {"cache", "ls", "--max-size", "1G", NULL, "--max-size"},
        {"cache", "frobnicate", NULL, NULL, NULL, "frobnicate"},
        {"matrix", "--format", "yaml", NULL, NULL, "yaml"},
        {"bench", "jit", "--cold", "0", NULL, "--cold"},
        {"bench", "layer", "--no-reference", NULL, NULL, "--check"},
        {"inspect", "--ptx", "--sass", SPEC_A, NULL, "one of"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *const *c = cases[i];
        mj_test_cli_run(&t, NULL, &r, c[0], c[1], c[2], c[3], c[4], (const char *)NULL);
        ck_assert_msg(r.rc == 2 && mj_test_count_lines(r.err) == 1 && strstr(r.err, c[5]),
                      "case %zu (%s %s %s): exit %d, stderr:\n%s", i, c[0], c[1], c[2] ? c[2] : "", r.rc, r.err);
    }
}
END_TEST

START_TEST(bad_spec_exits_2_naming_the_field)
{
    static const char *const cases[][3] = {
        {"warm", "quant=bf17,arch=sm_80", "quant"},
        {"warm", "quant=bf16,colour=blue,arch=sm_80", "colour"},
        {"inspect", "quant=bf16,act=swiglu(alpha=nan),arch=sm_80", "alpha"},
        {"inspect", "quant=bf16,arch=sm_80,hidden=-8", "hidden"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mj_test_cli_run(&t, NULL, &r, cases[i][0], cases[i][1], (const char *)NULL);
        ck_assert_msg(r.rc == 2 && mj_test_count_lines(r.err) == 1 && strstr(r.err, cases[i][2]),
                      "%s '%s': exit %d, stderr:\n%s", cases[i][0], cases[i][1], r.rc, r.err);
    }
}
END_TEST

START_TEST(version_prints_moejit_and_nvrtc)
{
    RUN("--version");
    ASSERT_RC(0);
    ck_assert_msg(strstr(r.out, "moejit 0.") && strstr(r.out, "NVRTC 1"), "%s", r.out);
    ck_assert_msg(strstr(r.out, "CUDA driver"), "the driver line (a version or why not) is missing:\n%s", r.out);
}
END_TEST

START_TEST(matrix_json_parses_and_names_the_simt_backend)
{
    RUN("matrix", "--format", "json");
    ASSERT_RC(0);
    cJSON *j = mj_test_json(r.out);
    ck_assert_msg(strstr(r.out, "\"simt\""), "%s", r.out);
    cJSON_Delete(j);
    RUN("matrix", "--json");
    ASSERT_RC(0);
    cJSON_Delete(mj_test_json(r.out));
}
END_TEST

/* ---- inspect -------------------------------------------------------------------------------- */

static int is_hex64(const char *s)
{
    if (!s || strlen(s) != 64) return 0;
    return strspn(s, "0123456789abcdef") == 64;
}

START_TEST(inspect_spec_compiles_once_then_reports_it_cached)
{
    RUN("inspect", SPEC_A, "--json");
    ASSERT_RC(0);
    cJSON *j = mj_test_json(r.out);
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(j, "supported")));
    ck_assert(cJSON_IsFalse(cJSON_GetObjectItem(j, "cached")));
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(j, "compiled_now")));
    ck_assert(is_hex64(cJSON_GetStringValue(cJSON_GetObjectItem(j, "key"))));
    const cJSON *kernels = cJSON_GetObjectItem(j, "kernels");
    ck_assert_int_gt(cJSON_GetArraySize(kernels), 0);
    ck_assert_int_gt((int)mj_test_json_num(cJSON_GetArrayItem(kernels, 0), "registers"), 0);
    ck_assert(strstr(cJSON_GetStringValue(cJSON_GetObjectItem(j, "preimage")), "option --gpu-architecture=sm_80") ||
              strstr(cJSON_GetStringValue(cJSON_GetObjectItem(j, "preimage")), "sm_80"));
    cJSON_Delete(j);

    RUN("inspect", SPEC_A);
    ASSERT_RC(0);
    ck_assert_msg(strstr(r.out, "cached:    yes") && strstr(r.out, "kernels:") && strstr(r.out, "preimage:") &&
                      strstr(r.out, "spills"),
                  "%s", r.out);
}
END_TEST

START_TEST(inspect_key_reads_the_entry_and_its_views)
{
    RUN("inspect", SPEC_A, "--json");
    ASSERT_RC(0);
    cJSON *j = mj_test_json(r.out);
    char key[65], spec[512];
    snprintf(key, sizeof key, "%s", cJSON_GetStringValue(cJSON_GetObjectItem(j, "key")));
    snprintf(spec, sizeof spec, "%s", cJSON_GetStringValue(cJSON_GetObjectItem(j, "spec")));
    cJSON_Delete(j);

    RUN("inspect", key, "--json");
    ASSERT_RC(0);
    j = mj_test_json(r.out);
    ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(j, "spec")), spec);
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(j, "cached")));
    cJSON_Delete(j);

    RUN("inspect", key, "--log");
    ASSERT_RC(0);
    ck_assert_msg(strstr(r.out, "registers"), "the log holds ptxas' report:\n%s", r.out);
    RUN("inspect", key, "--preimage", "--json");
    ASSERT_RC(0);
    j = mj_test_json(r.out);
    ck_assert(strstr(cJSON_GetStringValue(cJSON_GetObjectItem(j, "preimage")), spec));
    cJSON_Delete(j);
    RUN("inspect", key, "--source");
    ASSERT_RC(0);
    ck_assert_msg(strstr(r.out, spec) && strstr(r.out, "#include"), "%s", r.out);

    /* SASS needs cuobjdump/nvdisasm: either the listing or a clear message and exit 1. */
    RUN("inspect", key, "--sass");
    ck_assert_msg((r.rc == 0 && strstr(r.out, "mj_")) || (r.rc == 1 && strstr(r.err, "nvdisasm")),
                  "exit %d\nstdout:\n%.2000s\nstderr:\n%s", r.rc, r.out, r.err);

    /* A key nobody has: exit 1 and one line. */
    RUN("inspect", "0000000000000000000000000000000000000000000000000000000000000000");
    ASSERT_RC(1);
    ck_assert_int_eq(mj_test_count_lines(r.err), 1);
}
END_TEST

START_TEST(inspect_source_and_ptx_views)
{
    RUN("inspect", SPEC_A, "--source", "--json");
    ASSERT_RC(0);
    cJSON *j = mj_test_json(r.out);
    ck_assert(strstr(cJSON_GetStringValue(cJSON_GetObjectItem(j, "source")), "relu2"));
    cJSON_Delete(j);
    ck_assert_msg(!mj_test_exists(t.cache), "--source touched the cache");

    RUN("inspect", SPEC_A, "--ptx");
    ASSERT_RC(0);
    ck_assert_msg(strstr(r.out, ".target sm_80") && strstr(r.out, ".entry"), "%.2000s", r.out);
}
END_TEST

/* wgmma is a Hopper instruction: a wgmma layer for sm_80 stays unsupported. */
#define SPEC_UNSUPPORTED "backend=wgmma,quant=bf16,act=swiglu,arch=sm_80"

START_TEST(inspect_unsupported_spec_gives_the_verdict_and_exit_2)
{
    RUN("inspect", SPEC_UNSUPPORTED);
    ASSERT_RC(2);
    ck_assert_msg(strstr(r.out, "unsupported: ") && strstr(r.out, "backend"), "%s", r.out);
    RUN("inspect", SPEC_UNSUPPORTED, "--json");
    ASSERT_RC(2);
    cJSON *j = mj_test_json(r.out);
    ck_assert(cJSON_IsFalse(cJSON_GetObjectItem(j, "supported")));
    ck_assert(strstr(cJSON_GetStringValue(cJSON_GetObjectItem(j, "unsupported_reason")), "backend"));
    cJSON_Delete(j);
}
END_TEST

START_TEST(inspect_why_shows_the_preimage_line_that_changed)
{
    RUN("warm", SPEC_SWIGLU, "--jobs", "1");
    ASSERT_RC(0);
    RUN("inspect", "--why", SPEC_SWIGLU);
    ASSERT_RC(0);
    ck_assert_msg(strstr(r.out, "a hit"), "%s", r.out);

    /* One bit of alpha: the spec line differs (and the source that embeds it), nothing else. */
    RUN("inspect", "--why", SPEC_SWIGLU_NEXT);
    ASSERT_RC(0);
    ck_assert_msg(strstr(r.out, "- spec ") && strstr(r.out, "+ spec ") && strstr(r.out, "alpha=0x1p+0") &&
                      strstr(r.out, "alpha=0x1.000002p+0"),
                  "%s", r.out);
    ck_assert_msg(!strstr(r.out, "- header") && !strstr(r.out, "- option"), "%s", r.out);

    RUN("inspect", "--why", SPEC_SWIGLU_NEXT, "--json");
    ASSERT_RC(0);
    cJSON *j = mj_test_json(r.out);
    ck_assert(cJSON_IsFalse(cJSON_GetObjectItem(j, "cached")));
    const cJSON *near = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "nearest"), 0);
    ck_assert_ptr_nonnull(near);
    const cJSON *field = cJSON_GetArrayItem(cJSON_GetObjectItem(near, "spec_fields"), 0);
    ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(field, "field")), "act");
    int minus_spec = 0, plus_spec = 0;
    const cJSON *d;
    cJSON_ArrayForEach(d, cJSON_GetObjectItem(near, "diff"))
    {
        const char *op = cJSON_GetStringValue(cJSON_GetObjectItem(d, "op"));
        const char *line = cJSON_GetStringValue(cJSON_GetObjectItem(d, "line"));
        if (!strncmp(line, "spec ", 5)) ++*(*op == '-' ? &minus_spec : &plus_spec);
    }
    ck_assert_int_eq(minus_spec, 1);
    ck_assert_int_eq(plus_spec, 1);
    cJSON_Delete(j);
}
END_TEST

/* ---- bench jit ------------------------------------------------------------------------------ */

START_TEST(bench_jit_measures_three_costs_and_appends_a_row)
{
    char doc[600];
    snprintf(doc, sizeof doc, "%s/PERFORMANCE.md", t.root);
    mj_test_write_file(doc, "| date | commit |\n|---|---|\n<!-- bench-jit:end -->\n\n## next section\n");
    RUN("bench", "jit", "--spec", SPEC_A, "--cold", "1", "--loads", "2", "--hits", "2000", "--json", "--append",
        "--doc", doc, "--commit", "abc1234", "--device", "test-box");
    ASSERT_RC(0);
    cJSON *j = mj_test_json(r.out);
    ck_assert_double_gt(mj_test_json_num(cJSON_GetObjectItem(j, "cold_compile_ms"), "median"), 1.0);
    ck_assert_double_gt(mj_test_json_num(cJSON_GetObjectItem(j, "disk_load_us"), "median"), 0.0);
    ck_assert_double_gt(mj_test_json_num(cJSON_GetObjectItem(j, "hit_ns"), "median"), 0.0);
    ck_assert_int_eq((int)mj_test_json_num(cJSON_GetObjectItem(j, "disk_load_us"), "runs"), 2);
    cJSON_Delete(j);
    /* The row lands before the marker, the rest of the document is kept. */
    FILE *f = fopen(doc, "rb");
    ck_assert_ptr_nonnull(f);
    char text[4096] = "";
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    char *row = strstr(text, "| abc1234 | test-box | sm_80 |");
    char *marker = strstr(text, "<!-- bench-jit:end -->");
    ck_assert_msg(row && marker && row < marker && strstr(text, "## next section"), "%s", text);
    /* The temporary caches are gone: the user's cache was never touched. */
    ck_assert(!mj_test_exists(t.cache));
}
END_TEST

/* ---- tune ------------------------------------------------------------------------------------- */

START_TEST(tune_help_exits_0_with_examples_and_is_listed)
{
    RUN("tune", "--help");
    ASSERT_RC(0);
    ck_assert_msg(strstr(r.out, "usage: moejit tune") && strstr(r.out, "Examples:") && strstr(r.out, "MOEJIT_TUNE_FILE"),
                  "%s", r.out);
    ck_assert_str_eq(r.err, "");
    RUN("--help");
    ASSERT_RC(0);
    ck_assert_msg(strstr(r.out, "  tune ") && strstr(r.out, "MOEJIT_TUNE_FILE"), "%s", r.out);
}
END_TEST

START_TEST(tune_bad_options_exit_2_with_one_line)
{
    static const char *const cases[][3] = {
        {"--no-such-option", NULL, "--no-such-option"}, {"--shapes", "no-such-model", "no-such-model"},
        {"--batches", "1,,8", "--batches"},             {"--batches", "0", "--batches"},
        {"--backend", "simt", "--backend"},             {"--reps", "0", "--reps"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        RUN("tune", cases[i][0], cases[i][1]);
        ck_assert_msg(r.rc == 2 && mj_test_count_lines(r.err) == 1 && strstr(r.err, cases[i][2]) && !*r.out,
                      "case %zu: exit %d, stdout:\n%s\nstderr:\n%s", i, r.rc, r.out, r.err);
    }
}
END_TEST

START_TEST(tune_without_a_device_exits_1_and_writes_nothing)
{
    /* CUDA_VISIBLE_DEVICES= hides every GPU, so this holds on a GPU host too */
    static const char *const env[] = {"CUDA_VISIBLE_DEVICES=", NULL};
    char out[600];
    snprintf(out, sizeof out, "%s/tune.json", t.root);
    mj_test_cli_run(&t, env, &r, "tune", "--shapes", "qwen3-30b-a3b", "--batches", "1,64", "--out", out,
                    (const char *)NULL);
    ASSERT_RC(1);
    ck_assert_msg(strstr(r.err, "no CUDA device") && mj_test_count_lines(r.err) == 1, "stderr:\n%s", r.err);
    ck_assert(!mj_test_exists(out));
    /* an --out that is not a valid table is refused before any GPU work, and left as it was */
    mj_test_write_file(out, "{\"version\":1,\"entries\":[{\"backend\":\"mma\"}]}");
    mj_test_cli_run(&t, env, &r, "tune", "--out", out, (const char *)NULL);
    ASSERT_RC(1);
    ck_assert_msg(strstr(r.err, "entries[0].arch: missing") && strstr(r.err, out), "stderr:\n%s", r.err);
}
END_TEST

/* ---- bench layer --list-specs ----------------------------------------------------------------- */

/* The list a device run warms before the bench: without a device, each layer once (the float64
 * cases' and the model shapes' with simt for --check), and every line a spec that `warm` plans
 * (so the keys it compiles are the ones the bench loads). */
START_TEST(bench_layer_list_specs_lists_warmable_layers_without_a_device)
{
    static const char *const env[] = {"CUDA_VISIBLE_DEVICES=", NULL};
    /* without --check: just the shapes' layers asked for */
    mj_test_cli_run(&t, env, &r, "bench", "layer", "--backend", "wgmma", "--tile", "auto,pair", "--shapes",
                    "nemotron", "--list-specs", (const char *)NULL);
    ASSERT_RC(0);
    ck_assert_msg(mj_test_count_lines(r.out) == 2 && strstr(r.out, "tile=auto\n") && strstr(r.out, "tile=pair\n") &&
                      strstr(r.out, "hidden=2688,inter=1856,experts=128,topk=6"),
                  "%s", r.out);
    /* --layer-routing: the timed layers route as asked (deepseek_v3 with DeepSeek-V3's grouping) */
    mj_test_cli_run(&t, env, &r, "bench", "layer", "--backend", "wgmma", "--shapes", "deepseek-v3", "--layer-routing",
                    "deepseek_v3", "--list-specs", (const char *)NULL);
    ASSERT_RC(0);
    ck_assert_msg(mj_test_count_lines(r.out) == 1 &&
                      strstr(r.out, "routing=deepseek_v3,n_group=8,topk_group=4,routed_scaling=2.5,hidden=7168"),
                  "%s", r.out);
    mj_test_cli_run(&t, env, &r, "bench", "layer", "--layer-routing", "fastest", "--list-specs", (const char *)NULL);
    ASSERT_RC(2);
    ck_assert_msg(strstr(r.err, "--layer-routing") && strstr(r.err, "deepseek_v3"), "%s", r.err);
    mj_test_cli_run(&t, env, &r, "bench", "layer", "--check", "--backend", "mma,wgmma", "--list-specs",
                    (const char *)NULL);
    ASSERT_RC(0);
    char *list = strdup(r.out);
    ck_assert_ptr_nonnull(list);
    int n = 0, wgmma = 0, tall = 0, pair = 0, fp16 = 0, simt = 0;
    const char *lines[128];
    for (char *save = NULL, *l = strtok_r(list, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        ck_assert_msg(strncmp(l, "backend=mma,", 12) == 0 || strncmp(l, "backend=wgmma,", 14) == 0 ||
                          strncmp(l, "backend=simt,", 13) == 0,
                      "line: %s", l);
        ck_assert_msg(strstr(l, ",arch=native"), "line: %s", l);
        for (int i = 0; i < n; i++) ck_assert_msg(strcmp(lines[i], l) != 0, "listed twice: %s", l);
        ck_assert_int_lt(n, 128);
        lines[n++] = l;
        wgmma += strncmp(l, "backend=wgmma,", 14) == 0;
        tall += strstr(l, ",tile=tall") != NULL;
        pair += strstr(l, ",tile=pair") != NULL;
        fp16 += strstr(l, "quant=fp16") != NULL;
        simt += strncmp(l, "backend=simt,", 13) == 0;
    }
    /* every activation on each backend, wgmma's tall and pair layers, the fp16 cases; simt for
     * each of the five default shapes */
    ck_assert_msg(n >= 40 && wgmma > n / 2 && tall >= 12 && tall == pair && fp16 >= 4 && simt == 5,
                  "%d layers, %d wgmma, %d tall, %d pair, %d fp16, %d simt:\n%s", n, wgmma, tall, pair, fp16, simt,
                  r.out);
    /* warm plans every one (arch given: no device here) and finds nothing to refuse */
    const char *argv[140];
    int a = 0;
    argv[a++] = "warm", argv[a++] = "--dry-run", argv[a++] = "--arch", argv[a++] = "sm_90a";
    for (int i = 0; i < n; i++) argv[a++] = lines[i];
    argv[a] = NULL;
    char *out = strdup(r.out);
    mj_test_cli_result_free(&r);
    mj_test_cli_runv(&t, env, &r, argv);
    ASSERT_RC(0);
    char want[80];
    snprintf(want, sizeof want, "%d to compile, 0 already present, 0 unsupported", n);
    ck_assert_msg(strstr(r.out, want), "wanted '%s':\n%s\nlist:\n%s", want, r.out, out);
    free(out);
    free(list);
}
END_TEST

/* --quant: the fp8 formats' layers on wgmma only (mma has no fp8 layer), their float64 cases,
 * and with --check the simt layer of the same format; warm plans them all. */
START_TEST(bench_layer_list_specs_lists_the_fp8_layers_asked_for)
{
    static const char *const env[] = {"CUDA_VISIBLE_DEVICES=", NULL};
    mj_test_cli_run(&t, env, &r, "bench", "layer", "--check", "--backend", "mma,wgmma", "--quant", "fp8_block,fp8_static",
                    "--shapes", "deepseek-v3,kimi-k2", "--list-specs", (const char *)NULL);
    ASSERT_RC(0);
    char *list = strdup(r.out);
    ck_assert_ptr_nonnull(list);
    int n = 0, block = 0, stat = 0, simt = 0, kimi = 0;
    const char *argv[80];
    argv[n++] = "warm", argv[n++] = "--dry-run", argv[n++] = "--arch", argv[n++] = "sm_90a";
    for (char *save = NULL, *l = strtok_r(list, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        ck_assert_msg(strncmp(l, "backend=wgmma,", 14) == 0 || strncmp(l, "backend=simt,", 13) == 0, "line: %s", l);
        block += strstr(l, "quant=fp8_block") != NULL;
        stat += strstr(l, "quant=fp8_tensor,fp8_act=static") != NULL;
        simt += strncmp(l, "backend=simt,", 13) == 0;
        kimi += strstr(l, "hidden=7168,inter=2048,experts=384,topk=8") != NULL;
        ck_assert_int_lt(n, 79);
        argv[n++] = l;
    }
    argv[n] = NULL;
    /* float64 cases: 2 activations x 3 tiles per format; shapes: 2 x (wgmma + simt) per format */
    ck_assert_msg(block == 10 && stat == 10 && simt == 4 && kimi == 4, "%d fp8_block, %d static, %d simt, %d kimi:\n%s",
                  block, stat, simt, kimi, r.out);
    mj_test_cli_result_free(&r);
    mj_test_cli_runv(&t, env, &r, argv);
    ASSERT_RC(0);
    char want[80];
    snprintf(want, sizeof want, "%d to compile, 0 already present, 0 unsupported", n - 4);
    ck_assert_msg(strstr(r.out, want), "wanted '%s':\n%s", want, r.out);
    free(list);
}
END_TEST

/* The 4-bit float64 cases and model shapes (--quant): every group with and without zero points
 * and mxfp4, bf16 and fp16, on both tensor-core backends (wgmma also each format's tall and pair tiles),
 * mxfp4's row-scaled identity layer (inter 288) on each, then the 4-bit shapes with simt; each
 * once, and each a layer `warm` plans. */
START_TEST(bench_layer_lists_the_4bit_layers)
{
    static const char *const env[] = {"CUDA_VISIBLE_DEVICES=", NULL};
    mj_test_cli_run(&t, env, &r, "bench", "layer", "--check", "--quant", "w4a16,mxfp4", "--backend", "mma,wgmma",
                    "--no-time", "--shapes", "gpt-oss-120b-mxfp4,qwen3-30b-a3b-w4a16", "--list-specs",
                    (const char *)NULL);
    ASSERT_RC(0);
    char *list = strdup(r.out);
    ck_assert_ptr_nonnull(list);
    const char *lines[64];
    int n = 0, zp = 0, fp16 = 0, mx = 0, g32 = 0, g64 = 0, g128 = 0, simt = 0, tall = 0, pair = 0;
    for (char *save = NULL, *l = strtok_r(list, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        ck_assert_msg(strstr(l, "quant=w4a16,group=") || strstr(l, "quant=mxfp4,"), "line: %s", l);
        for (int i = 0; i < n; i++) ck_assert_msg(strcmp(lines[i], l) != 0, "listed twice: %s", l);
        ck_assert_int_lt(n, 64);
        lines[n++] = l;
        zp += strstr(l, "zero_point=1") != NULL, fp16 += strstr(l, "dtype=fp16") != NULL;
        mx += strstr(l, "quant=mxfp4") != NULL, simt += strncmp(l, "backend=simt,", 13) == 0;
        g32 += strstr(l, "group=32") != NULL, g64 += strstr(l, "group=64") != NULL, g128 += strstr(l, "group=128") != NULL;
        tall += strstr(l, "backend=wgmma,") && strstr(l, ",tile=tall");
        pair += strstr(l, "backend=wgmma,") && strstr(l, ",tile=pair");
    }
    /* (the counts only: the whole list overflows Check's message) */
    ck_assert_msg(n == 46 && zp == 14 && fp16 == 4 && mx == 15 && g32 == 8 && g64 == 10 && g128 == 13 && simt == 2 &&
                      tall == 7 && pair == 7,
                  "%d layers, %d zero points, %d fp16, %d mxfp4, groups %d/%d/%d, %d simt, %d tall, %d pair", n, zp,
                  fp16, mx, g32, g64, g128, simt, tall, pair);
    ck_assert_ptr_nonnull(strstr(r.out, "backend=mma,quant=mxfp4,act=swiglu(alpha=1.702,beta=1,limit=7),routing=renormalize,"
                                        "hidden=2880,inter=2880,experts=128,topk=4"));
    ck_assert_ptr_nonnull(strstr(r.out, "backend=wgmma,quant=mxfp4,dtype=bf16,act=swiglu(alpha=1.702,beta=1,limit=7),"
                                        "routing=renormalize,hidden=160,inter=288,"));
    const char *argv[80];
    int a = 0;
    argv[a++] = "warm", argv[a++] = "--dry-run", argv[a++] = "--arch", argv[a++] = "sm_90a";
    for (int i = 0; i < n; i++) argv[a++] = lines[i];
    argv[a] = NULL;
    char *out = strdup(r.out);
    mj_test_cli_result_free(&r);
    mj_test_cli_runv(&t, env, &r, argv);
    ASSERT_RC(0);
    char want[80];
    snprintf(want, sizeof want, "%d to compile, 0 already present, 0 unsupported", n);
    ck_assert_msg(strstr(r.out, want), "wanted '%s':\n%s\nlist:\n%s", want, r.out, out);
    free(out);
    free(list);
}
END_TEST

/* A model shape its format cannot hold (Nemotron's I = 1856 is no multiple of w4a16's 128-k
 * groups) is skipped with the rule named, not listed (warm would refuse it) and not failed;
 * the same shape in mxfp4 (groups of 32) and the other shapes are listed. */
START_TEST(bench_layer_skips_a_shape_its_format_cannot_hold)
{
    static const char *const env[] = {"CUDA_VISIBLE_DEVICES=", NULL};
    mj_test_cli_run(&t, env, &r, "bench", "layer", "--quant", "w4a16,mxfp4", "--backend", "wgmma", "--shapes",
                    "nemotron,qwen3-30b-a3b", "--list-specs", (const char *)NULL);
    ASSERT_RC(0);
    ck_assert_msg(strstr(r.err, "nemotron skipped in w4a16: inter: quant=w4a16 needs a multiple of 128"), "%s", r.err);
    ck_assert_msg(!strstr(r.err, "qwen3-30b-a3b skipped") && !strstr(r.err, "skipped in mxfp4"), "%s", r.err);
    ck_assert_msg(mj_test_count_lines(r.out) == 3 && !strstr(r.out, "quant=w4a16,group=128,act=relu2") &&
                      strstr(r.out, "quant=mxfp4,act=relu2,routing=renormalize,hidden=2688,inter=1856") &&
                      strstr(r.out, "quant=w4a16,group=128,act=swiglu,routing=renormalize,hidden=2048,inter=768") &&
                      strstr(r.out, "quant=mxfp4,act=swiglu,routing=renormalize,hidden=2048,inter=768"),
                  "%s", r.out);
}
END_TEST

static Suite *cli_suite(void)
{
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("usage");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, every_command_help_exits_0_and_shows_examples, 0, N_COMMANDS);
    tcase_add_test(tc, top_level_help_lists_every_command);
    tcase_add_loop_test(tc, unknown_option_exits_2_with_one_line, 0, N_COMMANDS);
    tcase_add_test(tc, bad_values_exit_2_with_one_line_naming_the_option);
    tcase_add_test(tc, bad_spec_exits_2_naming_the_field);
    tcase_add_test(tc, version_prints_moejit_and_nvrtc);
    tcase_add_test(tc, matrix_json_parses_and_names_the_simt_backend);
    suite_add_tcase(s, tc);

    tc = tcase_create("inspect");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, inspect_spec_compiles_once_then_reports_it_cached);
    tcase_add_test(tc, inspect_key_reads_the_entry_and_its_views);
    tcase_add_test(tc, inspect_source_and_ptx_views);
    tcase_add_test(tc, inspect_unsupported_spec_gives_the_verdict_and_exit_2);
    tcase_add_test(tc, inspect_why_shows_the_preimage_line_that_changed);
    tcase_add_test(tc, bench_jit_measures_three_costs_and_appends_a_row);
    suite_add_tcase(s, tc);

    tc = tcase_create("tune");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, tune_help_exits_0_with_examples_and_is_listed);
    tcase_add_test(tc, tune_bad_options_exit_2_with_one_line);
    tcase_add_test(tc, tune_without_a_device_exits_1_and_writes_nothing);
    tcase_add_test(tc, bench_layer_list_specs_lists_warmable_layers_without_a_device);
    tcase_add_test(tc, bench_layer_list_specs_lists_the_fp8_layers_asked_for);
    tcase_add_test(tc, bench_layer_lists_the_4bit_layers);
    tcase_add_test(tc, bench_layer_skips_a_shape_its_format_cannot_hold);
    suite_add_tcase(s, tc);
    return s;
}

MJ_CHECK_MAIN(cli_suite)
