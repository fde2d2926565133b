/*
 * This file contains the tests of contexts and the kernel registry (runtime/context.c,
 * runtime/kernel.c): options are validated, nothing unsupported is compiled, a spec compiles
 * once per context also under concurrent first calls, a failed build reaches every waiter
 * and can be retried, and without a driver a kernel is compiled but not loaded.
 *
 * Compiles are real (NVRTC in the worker the Makefile names in $MOEJIT_COMPILE_WORKER). The
 * driver is forced missing (MOEJIT_LIBCUDA) so results do not depend on the machine, except
 * in the tests that load a fake driver in a child process.
 */
#include <check.h>
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/context.h"
#include "lib/check_main.h"
#include "lib/fake_cuda.h"
#include "core/status.h"

#define MISSING_LIB "/nonexistent/libcuda.so.1"
#define SPEC_BF16 "backend=simt,quant=bf16,act=swiglu(alpha=1.702,beta=1,limit=7),arch=sm_90a"
#define SPEC_FP16 "backend=simt,quant=fp16,act=gelu,arch=sm_80"
#define SPEC_RELU "backend=simt,quant=bf16,act=relu,arch=sm_90a"
#define SPEC_UNSUPPORTED "backend=wgmma,quant=bf16,act=silu,arch=sm_80"

static char g_cache_dir[64];

/* Runs in Check's parent: every test sees no driver and a private cache directory. */
static void setup_env(void)
{
    setenv("MOEJIT_LIBCUDA", MISSING_LIB, 1);
    if (!g_cache_dir[0]) {
        snprintf(g_cache_dir, sizeof g_cache_dir, "/tmp/moejit-check-context-XXXXXX");
        if (mkdtemp(g_cache_dir)) setenv("MOEJIT_CACHE_DIR", g_cache_dir, 1);
    }
    unsetenv("MOEJIT_COMPILE_TIMEOUT");
    mj_test_fake_libcuda();
}

static void teardown_env(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_cache_dir);
    if (g_cache_dir[0] && system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_cache_dir);
}

/* A context that never uses the disk cache, so compile counts are this process's own. */
static moejit_context *new_context(void)
{
    moejit_options opts = {.struct_size = sizeof(moejit_options), .cache_mode = "off"};
    moejit_context *ctx = NULL;
    moejit_status st = moejit_context_create(&opts, &ctx);
    ck_assert_msg(st == MOEJIT_OK, "%s", moejit_last_error());
    return ctx;
}

static moejit_spec *parse(const char *text)
{
    moejit_spec *spec = NULL;
    moejit_status st = moejit_spec_parse(text, &spec);
    ck_assert_msg(st == MOEJIT_OK, "%s: %s", text, moejit_last_error());
    return spec;
}

static int is_lower_hex(const char *s, size_t n)
{
    if (strlen(s) != n) return 0;
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char)s[i]) && !(s[i] >= 'a' && s[i] <= 'f')) return 0;
    return 1;
}

/* ---- contexts ---------------------------------------------------------------------------- */

START_TEST(context_with_null_options_has_defaults_and_no_kernels)
{
    moejit_context *ctx = NULL;
    ck_assert_int_eq(moejit_context_create(NULL, &ctx), MOEJIT_OK);
    ck_assert_ptr_nonnull(ctx);
    ck_assert_double_eq(ctx->compile_timeout_s, 300.0);
    ck_assert_int_eq(ctx->opts.device, 0);
    ck_assert_int_eq(mj_context_compile_count(ctx), 0);
    ck_assert_uint_eq(mj_context_entry_count(ctx), 0);
    moejit_context_destroy(ctx);
    moejit_context_destroy(NULL);
}
END_TEST

START_TEST(context_copies_option_strings)
{
    char mode[16] = "off";
    moejit_options opts = {.struct_size = sizeof(moejit_options), .cache_mode = mode,
                           .compile_timeout_s = 12.5};
    moejit_context *ctx = NULL;
    ck_assert_int_eq(moejit_context_create(&opts, &ctx), MOEJIT_OK);
    strcpy(mode, "garbage");
    ck_assert_str_eq(ctx->opts.cache_mode, "off");
    ck_assert_double_eq(ctx->compile_timeout_s, 12.5);
    moejit_context_destroy(ctx);
}
END_TEST

START_TEST(context_rejects_bad_options_naming_them)
{
    moejit_context *ctx = (moejit_context *)1;
    ck_assert_int_eq(moejit_context_create(NULL, NULL), MOEJIT_ERR_INVALID_ARGUMENT);

    moejit_options opts = {.struct_size = sizeof(moejit_options), .device = -1};
    ck_assert_int_eq(moejit_context_create(&opts, &ctx), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(ctx);
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "options.device"));

    opts = (moejit_options){.struct_size = sizeof(moejit_options), .compile_timeout_s = -1};
    ck_assert_int_eq(moejit_context_create(&opts, &ctx), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "options.compile_timeout_s"));
}
END_TEST

START_TEST(compile_timeout_comes_from_the_environment_and_is_validated)
{
    moejit_context *ctx = NULL;
    const char *bad[] = {"abc", "0", "-3", "5s", "inf", "nan"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("MOEJIT_COMPILE_TIMEOUT", bad[i], 1);
        ck_assert_int_eq(moejit_context_create(NULL, &ctx), MOEJIT_ERR_INVALID_ARGUMENT);
        ck_assert_ptr_nonnull(strstr(moejit_last_error(), "MOEJIT_COMPILE_TIMEOUT"));
    }
    setenv("MOEJIT_COMPILE_TIMEOUT", "2.5", 1);
    ck_assert_int_eq(moejit_context_create(NULL, &ctx), MOEJIT_OK);
    ck_assert_double_eq(ctx->compile_timeout_s, 2.5);
    moejit_context_destroy(ctx);
    /* The options win over the environment. */
    moejit_options opts = {.struct_size = sizeof(moejit_options), .compile_timeout_s = 7};
    ck_assert_int_eq(moejit_context_create(&opts, &ctx), MOEJIT_OK);
    ck_assert_double_eq(ctx->compile_timeout_s, 7.0);
    moejit_context_destroy(ctx);
    unsetenv("MOEJIT_COMPILE_TIMEOUT");
}
END_TEST

/* ---- kernel_get ------------------------------------------------------------------------- */

START_TEST(unsupported_spec_fails_before_any_compile)
{
    moejit_context *ctx = new_context();
    moejit_spec *spec = parse(SPEC_UNSUPPORTED);
    moejit_kernel *k = (moejit_kernel *)1;
    ck_assert_int_eq(moejit_kernel_get(ctx, spec, &k), MOEJIT_ERR_UNSUPPORTED);
    ck_assert_ptr_null(k);
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "backend"));
    ck_assert_int_eq(mj_context_compile_count(ctx), 0);
    ck_assert_uint_eq(mj_context_entry_count(ctx), 0);
    moejit_spec_destroy(spec);
    moejit_context_destroy(ctx);
}
END_TEST

START_TEST(first_get_compiles_an_unloaded_kernel_without_driver)
{
    moejit_context *ctx = new_context();
    moejit_spec *spec = parse(SPEC_BF16);
    moejit_kernel *k = NULL;
    /* A successful get leaves the thread's last error as it was. */
    ck_assert_int_eq(moejit_kernel_get(NULL, spec, &k), MOEJIT_ERR_INVALID_ARGUMENT);
    char before[MJ_ERROR_MAX];
    snprintf(before, sizeof before, "%s", moejit_last_error());
    moejit_status st = moejit_kernel_get(ctx, spec, &k);
    ck_assert_msg(st == MOEJIT_OK, "%s", moejit_last_error());
    ck_assert_str_eq(moejit_last_error(), before);
    ck_assert_ptr_nonnull(k);
    ck_assert_int_eq(mj_context_compile_count(ctx), 1);
    ck_assert_int_eq(moejit_kernel_is_loaded(k), 0);
    ck_assert_msg(is_lower_hex(moejit_kernel_key(k), 64), "key %s", moejit_kernel_key(k));
    ck_assert_double_gt(moejit_kernel_compile_seconds(k), 0.0);

    /* The kernel keeps its own copy of the spec. */
    ck_assert_ptr_ne(moejit_kernel_spec(k), spec);
    ck_assert_int_eq(moejit_spec_equal(moejit_kernel_spec(k), spec), 1);
    ck_assert_str_eq(moejit_spec_canonical(moejit_kernel_spec(k)), moejit_spec_canonical(spec));

    int n = moejit_kernel_count(k);
    ck_assert_int_gt(n, 0);
    for (int i = 0; i < n; i++) {
        moejit_kernel_resources r;
        ck_assert_int_eq(moejit_kernel_resources_get(k, i, &r), MOEJIT_OK);
        ck_assert_ptr_nonnull(r.name);
        ck_assert_int_gt((int)strlen(r.name), 0);
        ck_assert_msg(r.registers > 0, "kernel %s: %d registers", r.name, r.registers);
        ck_assert_int_ge(r.shared_bytes, 0);
    }
    moejit_kernel_resources r;
    ck_assert_int_eq(moejit_kernel_resources_get(k, n, &r), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "index"));
    ck_assert_int_eq(moejit_kernel_resources_get(k, -1, &r), MOEJIT_ERR_INVALID_ARGUMENT);

    moejit_spec_destroy(spec); /* the kernel must not depend on the caller's spec */
    ck_assert_ptr_nonnull(moejit_spec_canonical(moejit_kernel_spec(k)));
    moejit_context_destroy(ctx);
}
END_TEST

START_TEST(second_get_returns_the_same_kernel_without_compiling)
{
    moejit_context *ctx = new_context();
    moejit_spec *spec = parse(SPEC_BF16);
    moejit_kernel *k1 = NULL, *k2 = NULL, *k3 = NULL;
    ck_assert_int_eq(moejit_kernel_get(ctx, spec, &k1), MOEJIT_OK);
    ck_assert_int_eq(moejit_kernel_get(ctx, spec, &k2), MOEJIT_OK);
    ck_assert_ptr_eq(k1, k2);
    /* An equal spec from another parse (here in the human form's other spelling) is a hit. */
    moejit_spec *again = parse("arch=sm_90a,act=swiglu(limit=7,alpha=1.702,beta=1),quant=bf16,backend=simt");
    ck_assert_int_eq(moejit_kernel_get(ctx, again, &k3), MOEJIT_OK);
    ck_assert_ptr_eq(k1, k3);
    ck_assert_int_eq(mj_context_compile_count(ctx), 1);
    ck_assert_uint_eq(mj_context_entry_count(ctx), 1);
    moejit_spec_destroy(again);
    moejit_spec_destroy(spec);
    moejit_context_destroy(ctx);
}
END_TEST

START_TEST(second_context_takes_the_kernel_from_the_disk_cache)
{
    char dir[128];
    snprintf(dir, sizeof dir, "%s/disk", g_cache_dir);
    moejit_options opts = {.struct_size = sizeof(moejit_options), .cache_dir = dir,
                           .cache_mode = "read-write"};
    moejit_spec *spec = parse(SPEC_BF16);
    moejit_context *first = NULL, *second = NULL;
    moejit_kernel *k1 = NULL, *k2 = NULL;
    ck_assert_int_eq(moejit_context_create(&opts, &first), MOEJIT_OK);
    ck_assert_msg(moejit_kernel_get(first, spec, &k1) == MOEJIT_OK, "%s", moejit_last_error());
    ck_assert_int_eq(mj_context_compile_count(first), 1);
    ck_assert_int_eq(moejit_context_create(&opts, &second), MOEJIT_OK);
    ck_assert_msg(moejit_kernel_get(second, spec, &k2) == MOEJIT_OK, "%s", moejit_last_error());
    ck_assert_int_eq(mj_context_compile_count(second), 0);
    ck_assert_int_eq(mj_context_build_count(second), 1);
    ck_assert_ptr_ne(k1, k2); /* registries are per context */
    ck_assert_str_eq(moejit_kernel_key(k1), moejit_kernel_key(k2));
    ck_assert_int_eq(moejit_kernel_count(k1), moejit_kernel_count(k2));
    ck_assert_double_eq(moejit_kernel_compile_seconds(k2), 0.0);
    moejit_context_destroy(first);
    moejit_context_destroy(second);
    moejit_spec_destroy(spec);
}
END_TEST

/* ---- concurrency -------------------------------------------------------------------------- */

enum { k_threads = 8 };

typedef struct racer {
    moejit_context *ctx;
    const moejit_spec *spec;
    pthread_barrier_t *start;
    moejit_kernel *kernel;
    moejit_status status;
    char message[MJ_ERROR_MAX];
} racer;

static void *race(void *arg)
{
    racer *r = arg;
    pthread_barrier_wait(r->start);
    r->status = moejit_kernel_get(r->ctx, r->spec, &r->kernel);
    snprintf(r->message, sizeof r->message, "%s", r->status ? moejit_last_error() : "");
    return NULL;
}

static void run_race(moejit_context *ctx, const moejit_spec *spec, racer racers[k_threads])
{
    pthread_t threads[k_threads];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, k_threads);
    for (int i = 0; i < k_threads; i++) {
        racers[i] = (racer){.ctx = ctx, .spec = spec, .start = &start};
        ck_assert_int_eq(pthread_create(&threads[i], NULL, race, &racers[i]), 0);
    }
    for (int i = 0; i < k_threads; i++) pthread_join(threads[i], NULL);
    pthread_barrier_destroy(&start);
}

START_TEST(concurrent_first_gets_compile_once_and_share_the_kernel)
{
    moejit_context *ctx = new_context();
    moejit_spec *spec = parse(SPEC_FP16);
    racer racers[k_threads];
    run_race(ctx, spec, racers);
    for (int i = 0; i < k_threads; i++) {
        ck_assert_msg(racers[i].status == MOEJIT_OK, "thread %d: %s", i, racers[i].message);
        ck_assert_ptr_eq(racers[i].kernel, racers[0].kernel);
    }
    ck_assert_int_eq(mj_context_compile_count(ctx), 1);
    ck_assert_uint_eq(mj_context_entry_count(ctx), 1);
    moejit_spec_destroy(spec);
    moejit_context_destroy(ctx);
}
END_TEST

START_TEST(failed_build_reaches_every_waiter_and_can_be_retried)
{
    /* The worker hangs, so the first caller's compile times out after 1 s while the other
     * seven wait on it: one compile, eight identical errors. */
    moejit_options opts = {.struct_size = sizeof(moejit_options), .cache_mode = "off", .compile_timeout_s = 1};
    moejit_context *ctx = NULL;
    ck_assert_int_eq(moejit_context_create(&opts, &ctx), MOEJIT_OK);
    moejit_spec *spec = parse(SPEC_RELU);
    setenv("MOEJIT_WORKER_FAULT", "hang", 1);
    racer racers[k_threads];
    run_race(ctx, spec, racers);
    unsetenv("MOEJIT_WORKER_FAULT");
    for (int i = 0; i < k_threads; i++) {
        ck_assert_msg(racers[i].status == MOEJIT_ERR_COMPILE, "thread %d: %s %s", i,
                      moejit_status_name(racers[i].status), racers[i].message);
        ck_assert_ptr_null(racers[i].kernel);
        ck_assert_str_eq(racers[i].message, racers[0].message);
    }
    ck_assert_int_eq(mj_context_compile_count(ctx), 1);
    ck_assert_uint_eq(mj_context_entry_count(ctx), 0);

    /* The failure was not cached: a later call compiles again, and succeeds (given the time
     * a real compile takes). */
    ctx->compile_timeout_s = 300;
    moejit_kernel *k = NULL;
    moejit_status st = moejit_kernel_get(ctx, spec, &k);
    ck_assert_msg(st == MOEJIT_OK, "%s", moejit_last_error());
    ck_assert_int_eq(mj_context_compile_count(ctx), 2);
    ck_assert_uint_eq(mj_context_entry_count(ctx), 1);
    moejit_spec_destroy(spec);
    moejit_context_destroy(ctx);
}
END_TEST

/* ---- running without a GPU ----------------------------------------------------------------- */

static moejit_moe_args qwen3_args(int64_t tokens)
{
    return (moejit_moe_args){.struct_size = sizeof(moejit_moe_args), .num_tokens = tokens, .hidden = 2048,
                             .inter = 768, .num_experts = 128, .topk = 8};
}

START_TEST(forward_on_unloaded_kernel_is_no_driver_but_workspace_size_works)
{
    moejit_context *ctx = new_context();
    moejit_spec *spec = parse(SPEC_BF16);
    moejit_kernel *k = NULL;
    ck_assert_int_eq(moejit_kernel_get(ctx, spec, &k), MOEJIT_OK);

    moejit_moe_args args = qwen3_args(64);
    size_t bytes = 0;
    moejit_status st = moejit_workspace_size(k, &args, &bytes);
    ck_assert_msg(st == MOEJIT_OK, "%s", moejit_last_error());
    ck_assert_uint_gt(bytes, 0);
    size_t more = 0;
    args.num_tokens = 4096;
    ck_assert_int_eq(moejit_workspace_size(k, &args, &more), MOEJIT_OK);
    ck_assert_uint_gt(more, bytes);

    st = moejit_moe_forward(k, &args, NULL, 0, NULL);
    ck_assert_int_eq(st, MOEJIT_ERR_NO_DRIVER);
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "no CUDA driver"));
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), MISSING_LIB));
    /* The same answer every time. */
    ck_assert_int_eq(moejit_moe_forward(k, &args, NULL, 0, NULL), MOEJIT_ERR_NO_DRIVER);
    moejit_spec_destroy(spec);
    moejit_context_destroy(ctx);
}
END_TEST

START_TEST(null_arguments_are_invalid_argument)
{
    moejit_context *ctx = new_context();
    moejit_spec *spec = parse(SPEC_BF16);
    moejit_kernel *k = (moejit_kernel *)1;
    ck_assert_int_eq(moejit_kernel_get(NULL, spec, &k), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(k);
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "context"));
    ck_assert_int_eq(moejit_kernel_get(ctx, NULL, &k), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "spec"));
    ck_assert_int_eq(moejit_kernel_get(ctx, spec, NULL), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mj_context_compile_count(ctx), 0);

    moejit_moe_args args = qwen3_args(1);
    size_t bytes;
    moejit_kernel_resources r;
    ck_assert_int_eq(moejit_workspace_size(NULL, &args, &bytes), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(moejit_moe_forward(NULL, &args, NULL, 0, NULL), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(moejit_kernel_resources_get(NULL, 0, &r), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(moejit_nvrtc_version(NULL, NULL), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(moejit_kernel_spec(NULL));
    ck_assert_str_eq(moejit_kernel_key(NULL), "");
    ck_assert_int_eq(moejit_kernel_count(NULL), 0);
    ck_assert_int_eq(moejit_kernel_is_loaded(NULL), 0);

    ck_assert_int_eq(moejit_kernel_get(ctx, spec, &k), MOEJIT_OK);
    ck_assert_int_eq(moejit_workspace_size(k, NULL, &bytes), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(moejit_workspace_size(k, &args, NULL), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(moejit_moe_forward(k, NULL, NULL, 0, NULL), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(moejit_kernel_resources_get(k, 0, NULL), MOEJIT_ERR_INVALID_ARGUMENT);
    moejit_spec_destroy(spec);
    moejit_context_destroy(ctx);
}
END_TEST

START_TEST(nvrtc_version_is_reported)
{
    int major = 0, minor = -1;
    ck_assert_int_eq(moejit_nvrtc_version(&major, &minor), MOEJIT_OK);
    ck_assert_int_ge(major, 11);
    ck_assert_int_ge(minor, 0);
}
END_TEST

/* ---- with a (fake) driver -------------------------------------------------------------------- */

#define RUN_IN_CHILD(body)                                    \
    do {                                                      \
        const char *failure_ = mj_test_in_child(body);        \
        ck_assert_msg(failure_ == NULL, "%s", failure_);      \
    } while (0)

static const char *get_with_fake_driver(const char *cc, moejit_context **ctx, moejit_kernel **k)
{
    const char *lib = mj_test_fake_libcuda();
    MJ_EXPECT(lib != NULL, "the fake libcuda could not be built");
    setenv("MOEJIT_LIBCUDA", lib, 1);
    unsetenv("FAKE_CUDA");
    setenv("FAKE_CUDA_CC", cc, 1);
    moejit_options opts = {.struct_size = sizeof(moejit_options), .cache_mode = "off"};
    MJ_EXPECT(moejit_context_create(&opts, ctx) == MOEJIT_OK, "%s", moejit_last_error());
    moejit_spec *spec = NULL;
    MJ_EXPECT(moejit_spec_parse(SPEC_BF16, &spec) == MOEJIT_OK, "%s", moejit_last_error());
    moejit_status st = moejit_kernel_get(*ctx, spec, k);
    moejit_spec_destroy(spec);
    MJ_EXPECT(st == MOEJIT_OK, "%s: %s", moejit_status_name(st), moejit_last_error());
    return NULL;
}

static const char *body_loads_on_matching_device(void)
{
    moejit_context *ctx = NULL;
    moejit_kernel *k = NULL;
    const char *f = get_with_fake_driver("90", &ctx, &k);
    if (f) return f;
    MJ_EXPECT(moejit_kernel_is_loaded(k) == 1, "not loaded");
    MJ_EXPECT(k->module.n_kernels == moejit_kernel_count(k), "module has %d kernels",
              k->module.n_kernels);
    MJ_EXPECT(mj_test_fake_counter("fake_libraries_loaded") == 1, "libraries loaded %d",
              mj_test_fake_counter("fake_libraries_loaded"));
    MJ_EXPECT(mj_test_fake_counter("fake_retain_calls") == 1, "primary context not made current");
    moejit_context_destroy(ctx);
    MJ_EXPECT(mj_test_fake_counter("fake_libraries_loaded") == 0, "destroy left the library loaded");
    return NULL;
}

START_TEST(kernel_loads_every_kernel_by_name_with_a_driver)
{
    RUN_IN_CHILD(body_loads_on_matching_device);
}
END_TEST

static const char *body_other_arch(void)
{
    moejit_context *ctx = NULL;
    moejit_kernel *k = NULL;
    const char *f = get_with_fake_driver("80", &ctx, &k);
    if (f) return f;
    MJ_EXPECT(moejit_kernel_is_loaded(k) == 0, "an sm_90a kernel was loaded on an 8.0 device");
    MJ_EXPECT(mj_test_fake_counter("fake_libraries_loaded") == 0, "library loaded");
    moejit_moe_args args = qwen3_args(1);
    moejit_status st = moejit_moe_forward(k, &args, NULL, 0, NULL);
    MJ_EXPECT(st == MOEJIT_ERR_NO_DEVICE, "forward: %s", moejit_status_name(st));
    MJ_EXPECT(strstr(moejit_last_error(), "spec.arch: sm_90a") != NULL, "%s", moejit_last_error());
    MJ_EXPECT(strstr(moejit_last_error(), "8.0") != NULL, "%s", moejit_last_error());
    moejit_context_destroy(ctx);
    return NULL;
}

START_TEST(kernel_for_another_arch_stays_unloaded_and_forward_says_why)
{
    RUN_IN_CHILD(body_other_arch);
}
END_TEST

static Suite *context_suite(void)
{
    Suite *s = suite_create("context");
    /* NOTE: first, so that under CK_FORK=no their children fork from a process that has not
     * loaded the driver yet (a process loads it once, and the others force it missing). */
    TCase *fake = tcase_create("fake driver");
    tcase_add_unchecked_fixture(fake, setup_env, NULL);
    tcase_set_timeout(fake, 600);
    tcase_add_test(fake, kernel_loads_every_kernel_by_name_with_a_driver);
    tcase_add_test(fake, kernel_for_another_arch_stays_unloaded_and_forward_says_why);
    suite_add_tcase(s, fake);

    TCase *tc = tcase_create("context");
    tcase_add_unchecked_fixture(tc, setup_env, teardown_env);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, context_with_null_options_has_defaults_and_no_kernels);
    tcase_add_test(tc, context_copies_option_strings);
    tcase_add_test(tc, context_rejects_bad_options_naming_them);
    tcase_add_test(tc, compile_timeout_comes_from_the_environment_and_is_validated);
    tcase_add_test(tc, unsupported_spec_fails_before_any_compile);
    tcase_add_test(tc, first_get_compiles_an_unloaded_kernel_without_driver);
    tcase_add_test(tc, second_get_returns_the_same_kernel_without_compiling);
    tcase_add_test(tc, second_context_takes_the_kernel_from_the_disk_cache);
    tcase_add_test(tc, concurrent_first_gets_compile_once_and_share_the_kernel);
    tcase_add_test(tc, failed_build_reaches_every_waiter_and_can_be_retried);
    tcase_add_test(tc, forward_on_unloaded_kernel_is_no_driver_but_workspace_size_works);
    tcase_add_test(tc, null_arguments_are_invalid_argument);
    tcase_add_test(tc, nvrtc_version_is_reported);
    suite_add_tcase(s, tc);
    return s;
}

MJ_CHECK_MAIN(context_suite)
