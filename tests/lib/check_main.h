/*
 * check_main.h — the main() every Check suite file shares: run one suite, print Check's
 * summary line, exit non-zero on any failure.
 *
 * Usage, at the end of tests/check_<name>.c:   MJ_CHECK_MAIN(name_suite)
 */
#ifndef MJ_CHECK_MAIN_H
#define MJ_CHECK_MAIN_H

#include <check.h>
#include <stdlib.h>

/* 1 when MOEJIT_TEST_QUICK is set (sanitizer runs): suites that repeat NVRTC compiles over a
 * large matrix then test a fixed sample of it instead. */
static inline int mj_test_quick(void)
{
    const char *q = getenv("MOEJIT_TEST_QUICK");
    return q && *q && *q != '0';
}

#define MJ_CHECK_MAIN(suite_fn)                                  \
    int main(void)                                               \
    {                                                            \
        SRunner *sr = srunner_create(suite_fn());                \
        srunner_run_all(sr, CK_NORMAL);                          \
        int failed = srunner_ntests_failed(sr);                  \
        srunner_free(sr);                                        \
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;             \
    }

#endif
