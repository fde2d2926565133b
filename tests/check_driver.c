/*
 * This file contains the tests of the driver loader (runtime/driver.c): a missing library,
 * the toolkit's stub library, a driver without a device, a driver lacking an entry point and
 * a working (fake) driver, each remembered and reported the same way on every later call.
 *
 * The driver loads once per process, so every test body runs in its own child process
 * (mj_test_in_child), also when Check does not fork (CK_FORK=no under the sanitizers).
 */
#include <check.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/driver.h"
#include "lib/check_main.h"
#include "lib/fake_cuda.h"
#include "core/status.h"

#define MISSING_LIB "/nonexistent/libcuda.so.1"

static void build_fake(void) { mj_test_fake_libcuda(); }

#define RUN_IN_CHILD(body)                                    \
    do {                                                      \
        const char *failure_ = mj_test_in_child(body);        \
        ck_assert_msg(failure_ == NULL, "%s", failure_);      \
    } while (0)

/* Points the loader at the fake driver, in the given mode. */
static const char *use_fake(const char *mode, const char *cc)
{
    const char *lib = mj_test_fake_libcuda();
    MJ_EXPECT(lib != NULL, "the fake libcuda could not be built");
    setenv("MOEJIT_LIBCUDA", lib, 1);
    if (mode) setenv("FAKE_CUDA", mode, 1); else unsetenv("FAKE_CUDA");
    if (cc) setenv("FAKE_CUDA_CC", cc, 1); else unsetenv("FAKE_CUDA_CC");
    return NULL;
}

/* ---- no driver ---------------------------------------------------------------------------- */

static const char *body_missing_library(void)
{
    setenv("MOEJIT_LIBCUDA", MISSING_LIB, 1);
    const mj_driver *d = (const mj_driver *)1;
    moejit_status st = mj_driver_get(&d);
    MJ_EXPECT(st == MOEJIT_ERR_NO_DRIVER, "status %s", moejit_status_name(st));
    MJ_EXPECT(d == NULL, "out not cleared");
    char first[MJ_ERROR_MAX];
    snprintf(first, sizeof first, "%s", moejit_last_error());
    MJ_EXPECT(strncmp(first, "no CUDA driver: ", 16) == 0, "message \"%s\"", first);
    MJ_EXPECT(strstr(first, MISSING_LIB) != NULL, "message does not name the path: \"%s\"", first);

    mj_clear_error();
    st = mj_driver_get(&d);
    MJ_EXPECT(st == MOEJIT_ERR_NO_DRIVER, "second call: status %s", moejit_status_name(st));
    MJ_EXPECT(strcmp(moejit_last_error(), first) == 0, "second call: message \"%s\"",
              moejit_last_error());
    return NULL;
}

START_TEST(missing_library_is_no_driver_on_every_call) { RUN_IN_CHILD(body_missing_library); }
END_TEST

static const char *body_device_queries_without_driver(void)
{
    setenv("MOEJIT_LIBCUDA", MISSING_LIB, 1);
    int major = -1, minor = -1;
    moejit_status st = mj_driver_device_cc(0, &major, &minor);
    MJ_EXPECT(st == MOEJIT_ERR_NO_DRIVER, "device_cc: %s", moejit_status_name(st));
    MJ_EXPECT(strstr(moejit_last_error(), "no CUDA driver") != NULL, "%s", moejit_last_error());
    MJ_EXPECT(major == -1 && minor == -1, "outputs written on failure");
    st = mj_driver_ensure_context(0, &major, &minor);
    MJ_EXPECT(st == MOEJIT_ERR_NO_DRIVER, "ensure_context: %s", moejit_status_name(st));
    MJ_EXPECT(strstr(moejit_last_error(), "no CUDA driver") != NULL, "%s", moejit_last_error());
    int version = -1;
    st = moejit_driver_version(&version);
    MJ_EXPECT(st == MOEJIT_ERR_NO_DRIVER, "driver_version: %s", moejit_status_name(st));
    return NULL;
}

START_TEST(device_queries_fail_cleanly_without_driver)
{
    RUN_IN_CHILD(body_device_queries_without_driver);
}
END_TEST

/* The default name: whatever this machine has, the answer is consistent with dlopen's. */
static const char *body_default_library(void)
{
    unsetenv("MOEJIT_LIBCUDA");
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    const mj_driver *d;
    moejit_status st = mj_driver_get(&d);
    if (!h) {
        MJ_EXPECT(st == MOEJIT_ERR_NO_DRIVER, "status %s", moejit_status_name(st));
        MJ_EXPECT(strstr(moejit_last_error(), "no CUDA driver: libcuda.so.1") != NULL, "%s",
                  moejit_last_error());
    } else {
        MJ_EXPECT(st == MOEJIT_OK || st == MOEJIT_ERR_NO_DEVICE || st == MOEJIT_ERR_NO_DRIVER,
                  "status %s: %s", moejit_status_name(st), moejit_last_error());
    }
    return NULL;
}

START_TEST(default_library_name_is_libcuda_so_1) { RUN_IN_CHILD(body_default_library); }
END_TEST

static const char *body_stub_library(void)
{
    const char *home = getenv("CUDA_HOME");
    char path[4096];
    snprintf(path, sizeof path, "%s/lib64/stubs/libcuda.so", home && *home ? home : "/usr/local/cuda");
    MJ_EXPECT(access(path, R_OK) == 0, "the toolkit's stub %s is missing", path);
    setenv("MOEJIT_LIBCUDA", path, 1);
    const mj_driver *d;
    moejit_status st = mj_driver_get(&d);
    MJ_EXPECT(st == MOEJIT_ERR_NO_DRIVER, "status %s: %s", moejit_status_name(st), moejit_last_error());
    MJ_EXPECT(strstr(moejit_last_error(), "no CUDA driver") != NULL, "%s", moejit_last_error());
    MJ_EXPECT(strstr(moejit_last_error(), "stub") != NULL, "%s", moejit_last_error());
    int major, minor;
    st = mj_driver_ensure_context(0, &major, &minor);
    MJ_EXPECT(st == MOEJIT_ERR_NO_DRIVER, "ensure_context: %s", moejit_status_name(st));
    return NULL;
}

START_TEST(toolkit_stub_library_is_no_driver_not_a_crash) { RUN_IN_CHILD(body_stub_library); }
END_TEST

START_TEST(cuda_fail_without_table_reports_the_number)
{
    ck_assert_int_eq(mj_cuda_fail(NULL, (CUresult)700, "cuLaunchKernel"), MOEJIT_ERR_CUDA);
    ck_assert_str_eq(moejit_last_error(), "cuLaunchKernel: CUresult 700");
}
END_TEST

START_TEST(driver_version_rejects_null)
{
    ck_assert_int_eq(moejit_driver_version(NULL), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "version"));
}
END_TEST

/* ---- fake drivers -------------------------------------------------------------------------- */

static const char *body_no_device(void)
{
    const char *f = use_fake("nodevice", NULL);
    if (f) return f;
    const mj_driver *d;
    moejit_status st = mj_driver_get(&d);
    MJ_EXPECT(st == MOEJIT_ERR_NO_DEVICE, "status %s: %s", moejit_status_name(st), moejit_last_error());
    MJ_EXPECT(strstr(moejit_last_error(), "CUDA_ERROR_NO_DEVICE") != NULL, "%s", moejit_last_error());
    st = mj_driver_get(&d);
    MJ_EXPECT(st == MOEJIT_ERR_NO_DEVICE, "second call: %s", moejit_status_name(st));
    MJ_EXPECT(mj_test_fake_counter("fake_init_calls") == 1, "cuInit called %d times",
              mj_test_fake_counter("fake_init_calls"));
    return NULL;
}

START_TEST(cuinit_without_device_is_no_device) { RUN_IN_CHILD(body_no_device); }
END_TEST

static const char *body_init_fails(void)
{
    const char *f = use_fake("initfail", NULL);
    if (f) return f;
    moejit_status st = mj_driver_get(NULL);
    MJ_EXPECT(st == MOEJIT_ERR_CUDA, "status %s", moejit_status_name(st));
    MJ_EXPECT(strstr(moejit_last_error(), "cuInit: CUDA_ERROR_UNKNOWN") != NULL, "%s",
              moejit_last_error());
    return NULL;
}

START_TEST(other_cuinit_failure_is_cuda_error_with_its_name) { RUN_IN_CHILD(body_init_fails); }
END_TEST

static const char *body_missing_symbol(void)
{
    const char *f = use_fake("missing:cuLibraryLoadData", NULL);
    if (f) return f;
    moejit_status st = mj_driver_get(NULL);
    MJ_EXPECT(st == MOEJIT_ERR_NO_DRIVER, "status %s", moejit_status_name(st));
    MJ_EXPECT(strstr(moejit_last_error(), "no CUDA driver") != NULL, "%s", moejit_last_error());
    MJ_EXPECT(strstr(moejit_last_error(), "cuLibraryLoadData") != NULL, "%s", moejit_last_error());
    MJ_EXPECT(mj_test_fake_counter("fake_init_calls") == 0, "cuInit called with a partial table");
    return NULL;
}

START_TEST(missing_entry_point_is_no_driver_naming_it) { RUN_IN_CHILD(body_missing_symbol); }
END_TEST

static const char *body_working_driver(void)
{
    const char *f = use_fake(NULL, "86");
    if (f) return f;
    const mj_driver *d = NULL;
    moejit_status st = mj_driver_get(&d);
    MJ_EXPECT(st == MOEJIT_OK, "status %s: %s", moejit_status_name(st), moejit_last_error());
    MJ_EXPECT(d && d->cuInit && d->cuLibraryLoadData && d->cuGraphInstantiate && d->cuEventElapsedTime,
              "table incomplete");
    MJ_EXPECT(mj_test_fake_counter("fake_versioned_requests") == 0,
              "asked cuGetProcAddress for a versioned name");
    const mj_driver *again = NULL;
    MJ_EXPECT(mj_driver_get(&again) == MOEJIT_OK && again == d, "second call gave another table");
    MJ_EXPECT(mj_test_fake_counter("fake_init_calls") == 1, "cuInit called %d times",
              mj_test_fake_counter("fake_init_calls"));
    int version = 0;
    MJ_EXPECT(moejit_driver_version(&version) == MOEJIT_OK && version == 12040, "version %d", version);

    int major = 0, minor = 0;
    st = mj_driver_device_cc(0, &major, &minor);
    MJ_EXPECT(st == MOEJIT_OK && major == 8 && minor == 6, "cc %d.%d (%s)", major, minor,
              moejit_last_error());
    st = mj_driver_device_cc(1, &major, &minor);
    MJ_EXPECT(st == MOEJIT_ERR_INVALID_ARGUMENT, "ordinal 1: %s", moejit_status_name(st));
    MJ_EXPECT(strstr(moejit_last_error(), "allowed: 0..0 (1 device)") != NULL, "%s",
              moejit_last_error());

    st = mj_cuda_fail(d, (CUresult)500, "cuLibraryGetKernel");
    MJ_EXPECT(st == MOEJIT_ERR_CUDA, "cuda_fail status");
    MJ_EXPECT(strcmp(moejit_last_error(), "cuLibraryGetKernel: CUDA_ERROR_NOT_FOUND (fake description)") == 0,
              "%s", moejit_last_error());
    return NULL;
}

START_TEST(working_driver_resolves_every_entry_once) { RUN_IN_CHILD(body_working_driver); }
END_TEST

static const char *body_ensure_context(void)
{
    const char *f = use_fake(NULL, "90");
    if (f) return f;
    int major = 0, minor = 0;
    moejit_status st = mj_driver_ensure_context(3, &major, &minor);
    MJ_EXPECT(st == MOEJIT_ERR_INVALID_ARGUMENT, "ordinal 3: %s", moejit_status_name(st));
    MJ_EXPECT(strstr(moejit_last_error(), "ordinal 3") != NULL, "%s", moejit_last_error());
    MJ_EXPECT(mj_test_fake_counter("fake_retain_calls") == 0, "retained for a bad ordinal");

    st = mj_driver_ensure_context(0, &major, &minor);
    MJ_EXPECT(st == MOEJIT_OK && major == 9 && minor == 0, "cc %d.%d (%s)", major, minor,
              moejit_last_error());
    MJ_EXPECT(mj_test_fake_counter("fake_retain_calls") == 1, "retained %d times",
              mj_test_fake_counter("fake_retain_calls"));
    /* A context is current now: it is used as it is, nothing more is retained. */
    st = mj_driver_ensure_context(0, &major, &minor);
    MJ_EXPECT(st == MOEJIT_OK && major == 9, "second call: %s", moejit_last_error());
    MJ_EXPECT(mj_test_fake_counter("fake_retain_calls") == 1, "retained again");
    return NULL;
}

START_TEST(ensure_context_retains_the_primary_context_only_when_none_is_current)
{
    RUN_IN_CHILD(body_ensure_context);
}
END_TEST

static void *get_driver(void *arg)
{
    const mj_driver **out = arg;
    if (mj_driver_get(out) != MOEJIT_OK) *out = NULL;
    return NULL;
}

static const char *body_concurrent_first_calls(void)
{
    const char *f = use_fake(NULL, NULL);
    if (f) return f;
    enum { n = 8 };
    pthread_t threads[n];
    const mj_driver *got[n];
    for (int i = 0; i < n; i++) pthread_create(&threads[i], NULL, get_driver, &got[i]);
    for (int i = 0; i < n; i++) pthread_join(threads[i], NULL);
    for (int i = 0; i < n; i++) MJ_EXPECT(got[i] != NULL && got[i] == got[0], "thread %d", i);
    MJ_EXPECT(mj_test_fake_counter("fake_init_calls") == 1, "cuInit called %d times",
              mj_test_fake_counter("fake_init_calls"));
    return NULL;
}

START_TEST(concurrent_first_calls_load_the_driver_once) { RUN_IN_CHILD(body_concurrent_first_calls); }
END_TEST

static Suite *driver_suite(void)
{
    Suite *s = suite_create("driver");
    TCase *none = tcase_create("no driver");
    tcase_add_test(none, missing_library_is_no_driver_on_every_call);
    tcase_add_test(none, device_queries_fail_cleanly_without_driver);
    tcase_add_test(none, default_library_name_is_libcuda_so_1);
    tcase_add_test(none, toolkit_stub_library_is_no_driver_not_a_crash);
    tcase_add_test(none, cuda_fail_without_table_reports_the_number);
    tcase_add_test(none, driver_version_rejects_null);
    suite_add_tcase(s, none);

    TCase *fake = tcase_create("fake driver");
    tcase_add_unchecked_fixture(fake, build_fake, NULL);
    tcase_add_test(fake, cuinit_without_device_is_no_device);
    tcase_add_test(fake, other_cuinit_failure_is_cuda_error_with_its_name);
    tcase_add_test(fake, missing_entry_point_is_no_driver_naming_it);
    tcase_add_test(fake, working_driver_resolves_every_entry_once);
    tcase_add_test(fake, ensure_context_retains_the_primary_context_only_when_none_is_current);
    tcase_add_test(fake, concurrent_first_calls_load_the_driver_once);
    suite_add_tcase(s, fake);
    return s;
}

MJ_CHECK_MAIN(driver_suite)
