/*
 * fake_cuda.h — test helpers for code that loads the CUDA driver: a fake libcuda built at
 * test time (tests/lib/fake_libcuda/libcuda.c), and a way to run a test body in a fresh
 * process.
 *
 * The driver is loaded once per process (pthread_once), so a test that needs a different
 * driver than the process already loaded must run in a new process; Check forks each test by
 * default but not under CK_FORK=no (the sanitizer runs), so such tests fork themselves.
 */
#ifndef MJ_TEST_FAKE_CUDA_H
#define MJ_TEST_FAKE_CUDA_H

/* Builds the fake driver once per process with $CC (default cc) and returns its path;
 * NULL (with the compiler's complaint on stderr) when it cannot be built. */
const char *mj_test_fake_libcuda(void);

/* Reads an exported int counter of the loaded fake (fake_unload_calls, ...); -1 if the fake
 * is not loaded in this process. */
int mj_test_fake_counter(const char *name);

/* Runs body in a forked child and returns NULL when it returned NULL and exited cleanly,
 * else its failure text (or how it died). The text lives until the next call. */
const char *mj_test_in_child(const char *(*body)(void));

/* For bodies: returns a failure text naming the line and the condition when cond is false. */
const char *mj_test_failf(const char *file, int line, const char *cond, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define MJ_EXPECT(cond, ...)                                                        \
    do {                                                                            \
        if (!(cond)) return mj_test_failf(__FILE__, __LINE__, #cond, __VA_ARGS__);  \
    } while (0)

#endif
