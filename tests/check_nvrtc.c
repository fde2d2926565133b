/*
 * This file contains the tests of codegen/nvrtc_compile.c and the compile worker: real NVRTC
 * compiles of a small hand-written two-kernel program (no GPU needed), the error message of
 * a failed compile (error text and the offending line, from the source or a header), the
 * worker's failure modes through its test hooks (MOEJIT_WORKER_FAULT=crash|hang|garbage),
 * finding the worker, no zombies or leaked fds, and NVRTC's identity against readelf.
 */
#include <check.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/check_main.h"
#include "codegen/nvrtc_compile.h"
#include "core/status.h"

static const char UTIL_H[] =
    "// mj/test_util.cuh: a header handed to NVRTC by name\n"
    "__device__ __forceinline__ float mj_twice(float v) { return v + v; }\n";

static const char BAD_H[] =
    "// mj/test_bad.cuh: line 1\n"
    "__device__ float mj_twice(float v) {\n"
    "    return v + header_mystery_value; // the header's bad line\n"
    "}\n";

/* Line 6 is the one the syntax-error variant breaks. */
static const char GOOD_SRC[] =
    "// moejit test program\n"
    "#include \"mj/test_util.cuh\"\n"
    "extern \"C\" __global__ void mj_test_scale(float *x, float s, int n)\n"
    "{\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x; // line five\n"
    "    if (i < n) x[i] = mj_twice(x[i]) * s;\n"
    "}\n"
    "extern \"C\" __global__ void mj_test_smem(float *x, int n)\n"
    "{\n"
    "    __shared__ float tile[128];\n"
    "    tile[threadIdx.x] = x[threadIdx.x];\n"
    "    __syncthreads();\n"
    "    if ((int)threadIdx.x < n) x[threadIdx.x] = tile[127 - threadIdx.x];\n"
    "}\n";

static const char BAD_SRC[] =
    "// moejit test program\n"
    "#include \"mj/test_util.cuh\"\n"
    "extern \"C\" __global__ void mj_test_scale(float *x, float s, int n)\n"
    "{\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x; // line five\n"
    "    if (i < n) x[i] = mj_twice(x[i]) * s x[i] += 1.0f; // missing semicolon\n"
    "}\n";

static mj_source make_source(const char *text)
{
    mj_source s;
    memset(&s, 0, sizeof s);
    s.text = (char *)text; /* never freed: the tests own static text */
    s.len = strlen(text);
    s.name = "moejit_layer.cu";
    s.n_kernels = 2;
    s.kernel_names[0] = "mj_test_scale";
    s.kernel_names[1] = "mj_test_smem";
    return s;
}

static mj_header header(const char *name, const char *data)
{
    mj_header h = {name, data, strlen(data)};
    return h;
}

static moejit_status compile(const char *text, const char *hdr_data, const char *arch,
                             double timeout_s, mj_program *out)
{
    mj_source src = make_source(text);
    mj_header h = header("mj/test_util.cuh", hdr_data);
    mj_compile_request req = {&src, arch, &h, 1, timeout_s};
    return mj_nvrtc_compile(&req, out);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.';
    if (d) closedir(d);
    return n;
}

static void assert_no_children(void)
{
    errno = 0;
    ck_assert_int_eq(waitpid(-1, NULL, WNOHANG), -1);
    ck_assert_int_eq(errno, ECHILD);
}

/* Sets or restores MOEJIT_COMPILE_WORKER (make test sets it; by hand it may be unset). */
static char *saved_worker;
static void save_worker_env(void)
{
    const char *w = getenv("MOEJIT_COMPILE_WORKER");
    saved_worker = w ? strdup(w) : NULL;
}
static void restore_worker_env(void)
{
    if (saved_worker) setenv("MOEJIT_COMPILE_WORKER", saved_worker, 1);
    else unsetenv("MOEJIT_COMPILE_WORKER");
    free(saved_worker);
    saved_worker = NULL;
}

START_TEST(compiles_two_kernels_to_a_cubin_for_sm_80_and_sm_90a)
{
    const char *archs[] = {"sm_80", "sm_90a"};
    for (int a = 0; a < 2; a++) {
        mj_program p;
        ck_assert_msg(compile(GOOD_SRC, UTIL_H, archs[a], 0, &p) == MOEJIT_OK, "%s: %s", archs[a],
                      moejit_last_error());
        ck_assert_uint_gt(p.cubin_len, 64);
        ck_assert_mem_eq(p.cubin, "\x7f" "ELF", 4);
        ck_assert_str_eq(p.arch, archs[a]);
        ck_assert_ptr_nonnull(strstr(p.log, "ptxas info"));
        ck_assert_int_eq(p.n_kernels, 2);
        ck_assert_str_eq(p.kernels[0].name, "mj_test_scale");
        ck_assert_str_eq(p.kernels[1].name, "mj_test_smem");
        ck_assert_int_gt(p.kernels[0].registers, 0);
        ck_assert_int_gt(p.kernels[1].registers, 0);
        ck_assert_int_eq(p.kernels[0].shared_bytes, 0);
        ck_assert_int_eq(p.kernels[1].shared_bytes, 128 * 4);
        ck_assert_int_eq(p.kernels[0].spill_store_bytes, 0);
        ck_assert_double_gt(p.compile_seconds, 0.0);
        mj_program_free(&p);
    }
}
END_TEST

START_TEST(options_are_fixed_name_the_arch_and_add_no_include_path)
{
    const char *a[16], *b[16];
    int na = 0, nb = 0;
    mj_buf ba = MJ_BUF_INIT, bb = MJ_BUF_INIT;
    mj_nvrtc_options("sm_90a", &ba, a, 16, &na);
    mj_nvrtc_options("sm_90a", &bb, b, 16, &nb);
    ck_assert_int_ge(na, 3);
    ck_assert_int_eq(na, nb);
    ck_assert_ptr_null(a[na]);
    int has_arch = 0;
    for (int i = 0; i < na; i++) {
        ck_assert_str_eq(a[i], b[i]);
        has_arch |= strcmp(a[i], "--gpu-architecture=sm_90a") == 0;
        ck_assert_msg(strncmp(a[i], "-I", 2) != 0 && strncmp(a[i], "--include-path", 14) != 0,
                      "unexpected include option %s", a[i]);
    }
    ck_assert(has_arch);
    ck_assert_ptr_nonnull(strstr(a[0], "sm_90a"));

    /* Another arch changes only the arch option; a short array is NULL-terminated. */
    const char *c[16], *d[2];
    int nc = 0, nd = 0;
    mj_nvrtc_options("sm_80", &ba, c, 16, &nc);
    ck_assert_int_eq(nc, na);
    ck_assert_str_eq(c[0], "--gpu-architecture=sm_80");
    for (int i = 1; i < nc; i++) ck_assert_str_eq(c[i], a[i]);
    mj_nvrtc_options("sm_80", &bb, d, 2, &nd);
    ck_assert_int_eq(nd, 1);
    ck_assert_ptr_null(d[1]);
    mj_buf_free(&ba);
    mj_buf_free(&bb);
}
END_TEST

START_TEST(syntax_error_reports_the_error_and_the_offending_source_line)
{
    mj_program p;
    ck_assert_int_eq(compile(BAD_SRC, UTIL_H, "sm_90a", 0, &p), MOEJIT_ERR_COMPILE);
    const char *msg = moejit_last_error();
    ck_assert_msg(strstr(msg, "moejit_layer.cu(6): error"), "no error line in: %s", msg);
    ck_assert_msg(strstr(msg, "expected a \";\""), "no error text in: %s", msg);
    /* The quoted line and the context before it (which NVRTC's log does not show). */
    ck_assert_msg(strstr(msg, ">     6 |     if (i < n) x[i] = mj_twice(x[i]) * s x[i] += 1.0f; // missing semicolon"),
                  "no offending line in: %s", msg);
    ck_assert_msg(strstr(msg, "      5 |     int i = blockIdx.x"), "no context in: %s", msg);
    ck_assert_ptr_nonnull(p.log);
    ck_assert_ptr_nonnull(strstr(p.log, "expected a \";\""));
    ck_assert_ptr_null(p.cubin);
    mj_program_free(&p);
}
END_TEST

START_TEST(error_in_a_header_quotes_the_header_line)
{
    mj_program p;
    ck_assert_int_eq(compile(GOOD_SRC, BAD_H, "sm_80", 0, &p), MOEJIT_ERR_COMPILE);
    const char *msg = moejit_last_error();
    ck_assert_msg(strstr(msg, "mj/test_util.cuh(3): error"), "no header error in: %s", msg);
    ck_assert_msg(strstr(msg, "header_mystery_value"), "no error text in: %s", msg);
    ck_assert_msg(strstr(msg, ">     3 |     return v + header_mystery_value; // the header's bad line"),
                  "no header line in: %s", msg);
    ck_assert_msg(strstr(msg, "      2 | __device__ float mj_twice"), "no context in: %s", msg);
    mj_program_free(&p);
}
END_TEST

START_TEST(an_arch_nvrtc_rejects_is_a_compile_error_with_the_log)
{
    mj_program p;
    ck_assert_int_eq(compile(GOOD_SRC, UTIL_H, "sm_999", 0, &p), MOEJIT_ERR_COMPILE);
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "compile moejit_layer.cu for sm_999"));
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "NVRTC_ERROR_INVALID_OPTION"));
    ck_assert_ptr_nonnull(p.log);
    mj_program_free(&p);
}
END_TEST

START_TEST(invalid_requests_name_the_field)
{
    mj_program p;
    mj_source src = make_source(GOOD_SRC);
    mj_compile_request req = {&src, NULL, NULL, 0, 0};
    ck_assert_int_eq(mj_nvrtc_compile(&req, &p), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "arch"));
    req.arch = "sm_90a";
    src.kernel_names[1] = "a_kernel_name_that_is_far_too_long_to_fit_in_mj_kernel_info_name_x";
    ck_assert_int_eq(mj_nvrtc_compile(&req, &p), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "kernel_names[1]"));
    ck_assert_int_eq(mj_nvrtc_compile(NULL, &p), MOEJIT_ERR_INVALID_ARGUMENT);
    mj_program_free(&p);
}
END_TEST

START_TEST(worker_crash_is_an_error_and_the_caller_keeps_running)
{
    int fds = open_fds();
    mj_program p;
    setenv("MOEJIT_WORKER_FAULT", "crash", 1);
    moejit_status st = compile(GOOD_SRC, UTIL_H, "sm_90a", 0, &p);
    unsetenv("MOEJIT_WORKER_FAULT");
    ck_assert_int_eq(st, MOEJIT_ERR_COMPILE);
    ck_assert_msg(strstr(moejit_last_error(), "crashed with signal 11 (SIGSEGV) compiling "
                                              "moejit_layer.cu for sm_90a"),
                  "%s", moejit_last_error());
    ck_assert_ptr_null(p.cubin);
    mj_program_free(&p);
    assert_no_children();
    ck_assert_int_eq(open_fds(), fds);
    /* The same process compiles normally afterwards. */
    ck_assert_int_eq(compile(GOOD_SRC, UTIL_H, "sm_90a", 0, &p), MOEJIT_OK);
    ck_assert_int_gt(p.kernels[0].registers, 0);
    mj_program_free(&p);
}
END_TEST

START_TEST(hung_worker_times_out_and_is_reaped)
{
    int fds = open_fds();
    mj_program p;
    setenv("MOEJIT_WORKER_FAULT", "hang", 1);
    double t0 = now_s();
    moejit_status st = compile(GOOD_SRC, UTIL_H, "sm_90a", 1.0, &p);
    double elapsed = now_s() - t0;
    unsetenv("MOEJIT_WORKER_FAULT");
    ck_assert_int_eq(st, MOEJIT_ERR_COMPILE);
    ck_assert_msg(strstr(moejit_last_error(), "compile moejit_layer.cu for sm_90a: timed out after 1 s"),
                  "%s", moejit_last_error());
    ck_assert_double_ge(elapsed, 0.9);
    ck_assert_double_lt(elapsed, 5.0);
    assert_no_children();
    ck_assert_int_eq(open_fds(), fds);
    mj_program_free(&p);
}
END_TEST

START_TEST(garbage_response_is_an_error)
{
    mj_program p;
    setenv("MOEJIT_WORKER_FAULT", "garbage", 1);
    moejit_status st = compile(GOOD_SRC, UTIL_H, "sm_90a", 0, &p);
    unsetenv("MOEJIT_WORKER_FAULT");
    ck_assert_int_eq(st, MOEJIT_ERR_COMPILE);
    ck_assert_msg(strstr(moejit_last_error(), "malformed response"), "%s", moejit_last_error());
    ck_assert_ptr_null(p.cubin);
    assert_no_children();
    mj_program_free(&p);
}
END_TEST

START_TEST(missing_worker_is_an_io_error_naming_the_path)
{
    save_worker_env();
    setenv("MOEJIT_COMPILE_WORKER", "/nonexistent/moejit/libexec/moejit-compile-worker", 1);
    mj_program p;
    moejit_status st = compile(GOOD_SRC, UTIL_H, "sm_90a", 0, &p);
    restore_worker_env();
    ck_assert_int_eq(st, MOEJIT_ERR_IO);
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "/nonexistent/moejit/libexec/moejit-compile-worker"));
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "MOEJIT_COMPILE_WORKER"));
    mj_program_free(&p);
}
END_TEST

START_TEST(worker_exiting_non_zero_reports_its_status_and_stderr)
{
    /* A stand-in worker that reads nothing (so the request send may hit a closed socket),
     * complains on stderr and exits 3. */
    char path[] = "/tmp/mj_fake_worker_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    const char script[] = "#!/bin/sh\necho 'fake worker: something broke' >&2\nexit 3\n";
    ck_assert_int_eq(write(fd, script, sizeof script - 1), (ssize_t)(sizeof script - 1));
    fchmod(fd, 0700);
    close(fd);
    save_worker_env();
    setenv("MOEJIT_COMPILE_WORKER", path, 1);
    mj_program p;
    moejit_status st = compile(GOOD_SRC, UTIL_H, "sm_90a", 0, &p);
    restore_worker_env();
    unlink(path);
    ck_assert_int_eq(st, MOEJIT_ERR_COMPILE);
    ck_assert_msg(strstr(moejit_last_error(), "exited with status 3 compiling moejit_layer.cu for sm_90a"),
                  "%s", moejit_last_error());
    ck_assert_msg(strstr(moejit_last_error(), "fake worker: something broke"), "%s", moejit_last_error());
    assert_no_children();
    mj_program_free(&p);
}
END_TEST

START_TEST(worker_is_looked_up_beside_the_binary_without_the_env_var)
{
    /* build/tests/check_nvrtc finds build/libexec/; the sanitizer build (build/asan/tests)
     * has no build/asan/libexec, and then the error must name the path it tried. */
    char *exe = realpath("/proc/self/exe", NULL);
    ck_assert_ptr_nonnull(exe);
    *strrchr(exe, '/') = '\0';
    *strrchr(exe, '/') = '\0';
    char expect[4096];
    snprintf(expect, sizeof expect, "%s/libexec/moejit-compile-worker", exe);
    free(exe);
    int present = access(expect, X_OK) == 0;

    save_worker_env();
    unsetenv("MOEJIT_COMPILE_WORKER");
    mj_program p;
    moejit_status st = compile(GOOD_SRC, UTIL_H, "sm_80", 0, &p);
    restore_worker_env();
    if (present) {
        ck_assert_msg(st == MOEJIT_OK, "%s", moejit_last_error());
        ck_assert_int_gt(p.kernels[0].registers, 0);
    } else {
        ck_assert_int_eq(st, MOEJIT_ERR_IO);
        ck_assert_msg(strstr(moejit_last_error(), expect), "%s", moejit_last_error());
        ck_assert_ptr_nonnull(strstr(moejit_last_error(), "MOEJIT_COMPILE_WORKER"));
    }
    mj_program_free(&p);
}
END_TEST

static void *compile_thread(void *arg)
{
    mj_program p;
    moejit_status st = compile(GOOD_SRC, UTIL_H, (const char *)arg, 0, &p);
    int ok = st == MOEJIT_OK && p.cubin_len > 0 && p.kernels[1].shared_bytes == 512;
    mj_program_free(&p);
    return ok ? arg : NULL;
}

START_TEST(concurrent_compiles_from_threads_all_succeed)
{
    const char *archs[] = {"sm_80", "sm_86", "sm_90a"};
    pthread_t t[3];
    for (int i = 0; i < 3; i++) pthread_create(&t[i], NULL, compile_thread, (void *)archs[i]);
    for (int i = 0; i < 3; i++) {
        void *r = NULL;
        pthread_join(t[i], &r);
        ck_assert_msg(r != NULL, "compile for %s failed", archs[i]);
    }
    assert_no_children();
}
END_TEST

static int find_nvrtc_path(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    const char *base = strrchr(info->dlpi_name, '/');
    if (!base || strncmp(base + 1, "libnvrtc.", 9) != 0) return 0;
    snprintf(data, 4096, "%s", info->dlpi_name);
    return 1;
}

START_TEST(identity_matches_readelf_build_id)
{
    int major = 0, minor = -1;
    char id[41];
    ck_assert_int_eq(mj_nvrtc_identity(&major, &minor, id), MOEJIT_OK);
    ck_assert_int_ge(major, 12);
    ck_assert_int_ge(minor, 0);
    ck_assert_uint_eq(strlen(id), 40);
    for (int i = 0; i < 40; i++) ck_assert_msg(isxdigit((unsigned char)id[i]) && !isupper((unsigned char)id[i]), "%s", id);

    char path[4096] = "", cmd[4200], line[512], expect[128] = "";
    dl_iterate_phdr(find_nvrtc_path, path);
    ck_assert_msg(path[0], "libnvrtc is not loaded");
    snprintf(cmd, sizeof cmd, "readelf -n '%s' 2>/dev/null", path);
    FILE *f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    while (fgets(line, sizeof line, f))
        if (sscanf(line, " Build ID: %127s", expect) == 1) break;
    pclose(f);
    ck_assert_msg(expect[0], "readelf shows no build id for %s", path);
    ck_assert_str_eq(id, expect);
}
END_TEST

static Suite *nvrtc_suite(void)
{
    Suite *s = suite_create("nvrtc");
    TCase *tc = tcase_create("compile");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, compiles_two_kernels_to_a_cubin_for_sm_80_and_sm_90a);
    tcase_add_test(tc, options_are_fixed_name_the_arch_and_add_no_include_path);
    tcase_add_test(tc, syntax_error_reports_the_error_and_the_offending_source_line);
    tcase_add_test(tc, error_in_a_header_quotes_the_header_line);
    tcase_add_test(tc, an_arch_nvrtc_rejects_is_a_compile_error_with_the_log);
    tcase_add_test(tc, invalid_requests_name_the_field);
    tcase_add_test(tc, concurrent_compiles_from_threads_all_succeed);
    suite_add_tcase(s, tc);

    TCase *worker = tcase_create("worker");
    tcase_set_timeout(worker, 120);
    tcase_add_test(worker, worker_crash_is_an_error_and_the_caller_keeps_running);
    tcase_add_test(worker, hung_worker_times_out_and_is_reaped);
    tcase_add_test(worker, garbage_response_is_an_error);
    tcase_add_test(worker, missing_worker_is_an_io_error_naming_the_path);
    tcase_add_test(worker, worker_exiting_non_zero_reports_its_status_and_stderr);
    tcase_add_test(worker, worker_is_looked_up_beside_the_binary_without_the_env_var);
    suite_add_tcase(s, worker);

    TCase *id = tcase_create("identity");
    tcase_add_test(id, identity_matches_readelf_build_id);
    suite_add_tcase(s, id);
    return s;
}

MJ_CHECK_MAIN(nvrtc_suite)
