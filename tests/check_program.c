/*
 * This file contains the tests of core/program.c: reading kernel resources from ptxas'
 * verbose report (logs captured from NVRTC 13.0 with --ptxas-options=--verbose) and
 * freeing a program.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "lib/check_main.h"
#include "core/program.h"

/* sm_90a: no cmem, and k_add has no static shared memory so its "Used" line has no smem. */
static const char LOG_SM90A[] =
    "ptxas info    : 0 bytes gmem\n"
    "ptxas info    : Compiling entry function 'k_smem' for 'sm_90a'\n"
    "ptxas info    : Function properties for k_smem\n"
    "ptxas         .     256 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
    "ptxas info    : Used 32 registers, used 1 barriers, 256 bytes cumulative stack size, 1024 bytes smem\n"
    "ptxas info    : Compile time = 26.640 ms\n"
    "ptxas info    : Compiling entry function 'k_add' for 'sm_90a'\n"
    "ptxas info    : Function properties for k_add\n"
    "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
    "ptxas info    : Used 10 registers, used 0 barriers\n"
    "ptxas info    : Compile time = 1.963 ms\n";

/* sm_80 with --maxrregcount=24: cmem on the "Used" lines, spills, and a non-inlined device
 * function whose properties block comes last and has no "Used" line. */
static const char LOG_SM80_SPILLS[] =
    "ptxas info    : Overriding maximum register limit 256 for 'k_dyn' with  24 of maxrregcount option\n"
    "ptxas info    : Overriding maximum register limit 256 for 'k_spill' with  24 of maxrregcount option\n"
    "ptxas info    : 0 bytes gmem\n"
    "ptxas info    : Compiling entry function 'k_dyn' for 'sm_80'\n"
    "ptxas info    : Function properties for k_dyn\n"
    "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
    "ptxas info    : Used 10 registers, used 1 barriers, 360 bytes cmem[0]\n"
    "ptxas info    : Compile time = 3.563 ms\n"
    "ptxas info    : Compiling entry function 'k_spill' for 'sm_80'\n"
    "ptxas info    : Function properties for k_spill\n"
    "ptxas         .     672 bytes stack frame, 288 bytes spill stores, 396 bytes spill loads\n"
    "ptxas info    : Used 24 registers, used 0 barriers, 672 bytes cumulative stack size, 364 bytes cmem[0]\n"
    "ptxas info    : Compile time = 51.489 ms\n"
    "ptxas info    : Function properties for _Z6helperPfi\n"
    "ptxas         .     0 bytes stack frame, 276 bytes spill stores, 312 bytes spill loads";

static mj_program program_with(const char *log, const char *const *names, int n)
{
    mj_program p;
    memset(&p, 0, sizeof p);
    p.log = log ? strdup(log) : NULL;
    p.n_kernels = n;
    for (int i = 0; i < n; i++) strcpy(p.kernels[i].name, names[i]);
    return p;
}

static void assert_unknown(const mj_kernel_info *k)
{
    ck_assert_int_eq(k->registers, -1);
    ck_assert_int_eq(k->shared_bytes, -1);
    ck_assert_int_eq(k->stack_bytes, -1);
    ck_assert_int_eq(k->spill_store_bytes, -1);
    ck_assert_int_eq(k->spill_load_bytes, -1);
}

START_TEST(each_kernel_gets_its_own_block_of_the_report)
{
    const char *names[] = {"k_add", "k_smem"}; /* not in the log's order */
    mj_program p = program_with(LOG_SM90A, names, 2);
    mj_program_parse_resources(&p);
    ck_assert_int_eq(p.kernels[0].registers, 10);
    ck_assert_int_eq(p.kernels[0].shared_bytes, 0);
    ck_assert_int_eq(p.kernels[0].stack_bytes, 0);
    ck_assert_int_eq(p.kernels[1].registers, 32);
    ck_assert_int_eq(p.kernels[1].shared_bytes, 1024);
    ck_assert_int_eq(p.kernels[1].stack_bytes, 256);
    ck_assert_int_eq(p.kernels[1].spill_store_bytes, 0);
    ck_assert_int_eq(p.kernels[1].spill_load_bytes, 0);
    mj_program_free(&p);
}
END_TEST

START_TEST(spills_are_read_and_cmem_is_not_taken_for_smem)
{
    const char *names[] = {"k_spill", "k_dyn"};
    mj_program p = program_with(LOG_SM80_SPILLS, names, 2);
    mj_program_parse_resources(&p);
    ck_assert_int_eq(p.kernels[0].registers, 24);
    ck_assert_int_eq(p.kernels[0].shared_bytes, 0);
    ck_assert_int_eq(p.kernels[0].stack_bytes, 672);
    /* 288/396 are k_spill's own; 276/312 belong to the device function after it. */
    ck_assert_int_eq(p.kernels[0].spill_store_bytes, 288);
    ck_assert_int_eq(p.kernels[0].spill_load_bytes, 396);
    ck_assert_int_eq(p.kernels[1].registers, 10);
    ck_assert_int_eq(p.kernels[1].shared_bytes, 0);
    ck_assert_int_eq(p.kernels[1].spill_store_bytes, 0);
    mj_program_free(&p);
}
END_TEST

START_TEST(kernel_missing_from_the_log_stays_unknown)
{
    const char *names[] = {"k_smem", "mj_absent", "k_sme"};
    mj_program p = program_with(LOG_SM90A, names, 3);
    mj_program_parse_resources(&p);
    ck_assert_int_eq(p.kernels[0].registers, 32);
    assert_unknown(&p.kernels[1]);
    assert_unknown(&p.kernels[2]); /* a prefix of a real name is not that name */
    mj_program_free(&p);
}
END_TEST

START_TEST(without_a_log_every_resource_is_unknown)
{
    const char *names[] = {"k_smem"};
    mj_program p = program_with(NULL, names, 1);
    p.kernels[0].registers = 99; /* stale values are reset, not kept */
    mj_program_parse_resources(&p);
    assert_unknown(&p.kernels[0]);
    mj_program q = program_with("nvrtc: error: invalid value for --gpu-architecture\n", names, 1);
    mj_program_parse_resources(&q);
    assert_unknown(&q.kernels[0]);
    mj_program_free(&p);
    mj_program_free(&q);
}
END_TEST

START_TEST(free_releases_members_and_is_idempotent)
{
    const char *names[] = {"k_add"};
    mj_program p = program_with(LOG_SM90A, names, 1);
    p.canonical_spec = strdup("backend=simt");
    p.arch = strdup("sm_90a");
    p.cubin = malloc(16);
    p.cubin_len = 16;
    p.compile_seconds = 1.5;
    mj_program_free(&p);
    ck_assert_ptr_null(p.log);
    ck_assert_ptr_null(p.cubin);
    ck_assert_ptr_null(p.arch);
    ck_assert_ptr_null(p.canonical_spec);
    ck_assert_uint_eq(p.cubin_len, 0);
    ck_assert_int_eq(p.n_kernels, 0);
    mj_program_free(&p);
    mj_program_free(NULL);
}
END_TEST

static Suite *program_suite(void)
{
    Suite *s = suite_create("program");
    TCase *tc = tcase_create("resources");
    tcase_add_test(tc, each_kernel_gets_its_own_block_of_the_report);
    tcase_add_test(tc, spills_are_read_and_cmem_is_not_taken_for_smem);
    tcase_add_test(tc, kernel_missing_from_the_log_stays_unknown);
    tcase_add_test(tc, without_a_log_every_resource_is_unknown);
    tcase_add_test(tc, free_releases_members_and_is_idempotent);
    suite_add_tcase(s, tc);
    return s;
}

MJ_CHECK_MAIN(program_suite)
