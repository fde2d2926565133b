/*
 * This file contains the tests of the module loader (runtime/loader.c) against the fake
 * driver (tests/lib/fake_libcuda): kernels are found by their stored names, a missing one is
 * an error naming it that leaves nothing loaded, and bad programs fail before the driver.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/check_main.h"
#include "lib/fake_cuda.h"
#include "runtime/loader.h"
#include "core/status.h"

#define RUN_IN_CHILD(body)                                    \
    do {                                                      \
        const char *failure_ = mj_test_in_child(body);        \
        ck_assert_msg(failure_ == NULL, "%s", failure_);      \
    } while (0)

static void build_fake(void) { mj_test_fake_libcuda(); }

/* A minimal ELF64 image: the 64-byte header, then NUL-separated kernel names; the section
 * header offset marks the end, which is how the fake sizes an image. */
static uint8_t *fake_cubin(const char *const *names, int n, size_t *len)
{
    size_t size = 64;
    for (int i = 0; i < n; i++) size += strlen(names[i]) + 1;
    uint8_t *p = calloc(1, size);
    memcpy(p, "\177ELF", 4);
    p[4] = 2;
    uint64_t shoff = size;
    memcpy(p + 0x28, &shoff, 8);
    size_t at = 64;
    for (int i = 0; i < n; i++) {
        memcpy(p + at, names[i], strlen(names[i]) + 1);
        at += strlen(names[i]) + 1;
    }
    *len = size;
    return p;
}

/* A program whose cubin holds `present` and whose kernel table asks for `wanted`. */
static void make_program(mj_program *p, const char *const *present, int n_present,
                         const char *const *wanted, int n_wanted)
{
    memset(p, 0, sizeof *p);
    p->cubin = fake_cubin(present, n_present, &p->cubin_len);
    p->arch = strdup("sm_90a");
    p->n_kernels = n_wanted;
    for (int i = 0; i < n_wanted; i++) snprintf(p->kernels[i].name, MJ_KERNEL_NAME_MAX, "%s", wanted[i]);
}

static const char *use_fake(void)
{
    const char *lib = mj_test_fake_libcuda();
    MJ_EXPECT(lib != NULL, "the fake libcuda could not be built");
    setenv("MOEJIT_LIBCUDA", lib, 1);
    unsetenv("FAKE_CUDA");
    return NULL;
}

static const char *const k_names[] = {"mj_route", "mj_gemm1", "mj_gemm2"};

static const char *body_loads_every_kernel(void)
{
    const char *f = use_fake();
    if (f) return f;
    mj_program p;
    make_program(&p, k_names, 3, k_names, 3);
    mj_module m;
    moejit_status st = mj_module_load(&p, &m);
    MJ_EXPECT(st == MOEJIT_OK, "%s: %s", moejit_status_name(st), moejit_last_error());
    MJ_EXPECT(m.library != NULL && m.n_kernels == 3, "n_kernels %d", m.n_kernels);
    /* The fake's CUkernel is the address of the name inside the image. */
    for (int i = 0; i < 3; i++)
        MJ_EXPECT(m.kernels[i] && strcmp((const char *)m.kernels[i], k_names[i]) == 0, "kernel %d", i);
    MJ_EXPECT(mj_test_fake_counter("fake_libraries_loaded") == 1, "libraries loaded");
    mj_module_unload(&m);
    MJ_EXPECT(mj_test_fake_counter("fake_libraries_loaded") == 0, "not unloaded");
    MJ_EXPECT(m.library == NULL && m.n_kernels == 0, "module not cleared");
    mj_module_unload(&m); /* a cleared module unloads nothing */
    mj_module_unload(NULL);
    MJ_EXPECT(mj_test_fake_counter("fake_unload_calls") == 1, "unload calls %d",
              mj_test_fake_counter("fake_unload_calls"));
    mj_program_free(&p);
    return NULL;
}

START_TEST(load_finds_every_kernel_by_name_and_unload_releases_it)
{
    RUN_IN_CHILD(body_loads_every_kernel);
}
END_TEST

static const char *body_missing_kernel(void)
{
    const char *f = use_fake();
    if (f) return f;
    const char *const wanted[] = {"mj_route", "mj_finalize"};
    mj_program p;
    make_program(&p, k_names, 3, wanted, 2);
    mj_module m;
    moejit_status st = mj_module_load(&p, &m);
    MJ_EXPECT(st == MOEJIT_ERR_CUDA, "%s", moejit_status_name(st));
    MJ_EXPECT(strstr(moejit_last_error(), "\"mj_finalize\"") != NULL, "%s", moejit_last_error());
    MJ_EXPECT(strstr(moejit_last_error(), "CUDA_ERROR_NOT_FOUND") != NULL, "%s", moejit_last_error());
    MJ_EXPECT(mj_test_fake_counter("fake_libraries_loaded") == 0, "library left loaded");
    MJ_EXPECT(m.library == NULL && m.n_kernels == 0, "module not cleared");
    mj_program_free(&p);
    return NULL;
}

START_TEST(missing_kernel_is_an_error_naming_it_and_unloads) { RUN_IN_CHILD(body_missing_kernel); }
END_TEST

static const char *body_bad_image(void)
{
    const char *f = use_fake();
    if (f) return f;
    mj_program p;
    make_program(&p, k_names, 3, k_names, 3);
    p.cubin[1] = 'X'; /* not an ELF image any more */
    mj_module m;
    moejit_status st = mj_module_load(&p, &m);
    MJ_EXPECT(st == MOEJIT_ERR_CUDA, "%s", moejit_status_name(st));
    MJ_EXPECT(strstr(moejit_last_error(), "cuLibraryLoadData (sm_90a cubin") != NULL, "%s",
              moejit_last_error());
    MJ_EXPECT(strstr(moejit_last_error(), "CUDA_ERROR_INVALID_IMAGE") != NULL, "%s", moejit_last_error());
    mj_program_free(&p);
    return NULL;
}

START_TEST(rejected_image_is_a_cuda_error_naming_the_call) { RUN_IN_CHILD(body_bad_image); }
END_TEST

static const char *body_no_driver(void)
{
    setenv("MOEJIT_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
    mj_program p;
    make_program(&p, k_names, 3, k_names, 3);
    mj_module m;
    moejit_status st = mj_module_load(&p, &m);
    MJ_EXPECT(st == MOEJIT_ERR_NO_DRIVER, "%s", moejit_status_name(st));
    MJ_EXPECT(strstr(moejit_last_error(), "no CUDA driver") != NULL, "%s", moejit_last_error());
    MJ_EXPECT(m.library == NULL, "module not cleared");
    mj_program_free(&p);
    return NULL;
}

START_TEST(load_without_driver_is_no_driver) { RUN_IN_CHILD(body_no_driver); }
END_TEST

START_TEST(program_without_cubin_or_kernels_fails_before_the_driver)
{
    mj_program p;
    mj_module m;
    make_program(&p, k_names, 3, k_names, 3);
    uint8_t *cubin = p.cubin;
    p.cubin = NULL;
    ck_assert_int_eq(mj_module_load(&p, &m), MOEJIT_ERR_INTERNAL);
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "no cubin"));
    p.cubin = cubin;
    p.n_kernels = 0;
    ck_assert_int_eq(mj_module_load(&p, &m), MOEJIT_ERR_INTERNAL);
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "0 kernels"));
    p.n_kernels = MJ_MAX_KERNELS + 1;
    ck_assert_int_eq(mj_module_load(&p, &m), MOEJIT_ERR_INTERNAL);
    ck_assert_int_eq(mj_module_load(NULL, &m), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mj_module_load(&p, NULL), MOEJIT_ERR_INVALID_ARGUMENT);
    mj_program_free(&p);
}
END_TEST

static Suite *loader_suite(void)
{
    Suite *s = suite_create("loader");
    TCase *tc = tcase_create("loader");
    tcase_add_unchecked_fixture(tc, build_fake, NULL);
    tcase_add_test(tc, load_finds_every_kernel_by_name_and_unload_releases_it);
    tcase_add_test(tc, missing_kernel_is_an_error_naming_it_and_unloads);
    tcase_add_test(tc, rejected_image_is_a_cuda_error_naming_the_call);
    tcase_add_test(tc, load_without_driver_is_no_driver);
    tcase_add_test(tc, program_without_cubin_or_kernels_fails_before_the_driver);
    suite_add_tcase(s, tc);
    return s;
}

MJ_CHECK_MAIN(loader_suite)
