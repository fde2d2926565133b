/*
 * This file contains the tests of the cache's fault handling: corrupt entries (flipped byte,
 * truncation, foreign file, stored spec mismatch) are quarantined, counted and rebuilt; write
 * failures (ENOSPC, EROFS, EACCES — injected, and a real RLIMIT_FSIZE) still return the
 * kernel with one warning and leave nothing partial; unsafe directories and entries (another
 * owner, world- or group-writable) are refused with a message.
 */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cache/cache.h"
#include "cache/fault.h"
#include "lib/cache_test_util.h"
#include "lib/check_main.h"
#include "cache/store.h"
#include "core/key.h"

static mj_test_cache T;
static const char *SPEC = "backend=simt,quant=bf16,act=silu,arch=sm_90a";

static void setup(void)
{
    mj_test_cache_init(&T);
    mj_cache_fault_clear_all();
    mj_cache_fault_reset_warnings();
}

static void teardown(void)
{
    mj_cache_fault_clear_all();
    mj_test_cache_cleanup(&T);
}

static moejit_status get_spec(mj_cache *c, const char *keytext, const char *spec, mj_test_build *b,
                              mj_program *p, int *hit)
{
    mj_key k = mj_test_key(keytext);
    return mj_cache_get_or_build(c, &k, "pre", spec, mj_test_build_fn, b, p, hit);
}

static void entry_path(const char *keytext, char *out, size_t cap)
{
    mj_key k = mj_test_key(keytext);
    mj_cache_entry_path(&T.cfg, k.hex, out, cap);
}

static int count_files(const char *dir)
{
    char cmd[700];
    snprintf(cmd, sizeof cmd, "exit $(find '%s' -type f ! -name stats 2>/dev/null | wc -l)", dir);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* Writes an entry, damages it with `damage`, asks again: expects a quarantine, a rebuild,
 * the counter and the warning naming `reason`. */
static void check_quarantine(void (*damage)(const char *path), const char *reason)
{
    mj_cache *c = mj_test_cache_open(&T);
    mj_test_build b = {.spec = SPEC, .seed = 5};
    mj_program p;
    int hit;
    ck_assert_int_eq(get_spec(c, "q", SPEC, &b, &p, &hit), MOEJIT_OK);
    mj_program_free(&p);
    char path[600];
    entry_path("q", path, sizeof path);
    damage(path);
    mj_test_stderr_begin();
    moejit_status st = get_spec(c, "q", SPEC, &b, &p, &hit);
    const char *err = mj_test_stderr_end();
    ck_assert_int_eq(st, MOEJIT_OK);
    ck_assert_int_eq(hit, 0);
    ck_assert_int_eq(b.calls, 2);
    ck_assert_uint_eq(p.cubin_len, 4096);
    mj_program_free(&p);
    ck_assert_msg(strstr(err, reason) && strstr(err, "quarantine"), "stderr: %s", err);
    char qdir[400];
    snprintf(qdir, sizeof qdir, "%s/quarantine", T.dir);
    ck_assert_int_eq(count_files(qdir), 1);
    mj_cache_stats s;
    mj_cache_stats_get(c, &s);
    ck_assert_int_eq(s.v[MJ_STAT_QUARANTINED], 1);
    ck_assert_int_eq(s.v[MJ_STAT_FILES], 1);
    /* The rebuilt entry is good: the next call hits. */
    ck_assert_int_eq(get_spec(c, "q", SPEC, &b, &p, &hit), MOEJIT_OK);
    ck_assert_int_eq(hit, 1);
    mj_program_free(&p);
    mj_cache_close(c);
}

static void flip_byte(const char *path)
{
    unsigned char x;
    FILE *f = fopen(path, "r+b");
    fseek(f, 300, SEEK_SET);
    x = (unsigned char)fgetc(f);
    fseek(f, 300, SEEK_SET);
    fputc(x ^ 0x10, f);
    fclose(f);
}
static void truncate_half(const char *path)
{
    struct stat st;
    stat(path, &st);
    mj_test_truncate(path, st.st_size / 2);
}
static void foreign(const char *path) { mj_test_poke(path, 0, "\x7f" "ELF", 4); }

START_TEST(a_flipped_byte_is_quarantined_counted_and_rebuilt) { check_quarantine(flip_byte, "bad checksum"); }
END_TEST
START_TEST(a_truncated_entry_is_quarantined_counted_and_rebuilt) { check_quarantine(truncate_half, "truncated"); }
END_TEST
START_TEST(a_foreign_file_is_quarantined_counted_and_rebuilt) { check_quarantine(foreign, "foreign"); }
END_TEST

/* The XXH3 trailer itself damaged (its last byte). */
static void flip_trailer(const char *path)
{
    struct stat st;
    stat(path, &st);
    FILE *f = fopen(path, "r+b");
    fseek(f, st.st_size - 1, SEEK_SET);
    const int x = fgetc(f);
    fseek(f, st.st_size - 1, SEEK_SET);
    fputc(x ^ 0x01, f);
    fclose(f);
}
START_TEST(a_damaged_trailer_is_quarantined_counted_and_rebuilt) { check_quarantine(flip_trailer, "bad checksum"); }
END_TEST

/* Rewrites the version-2 entry at path as version 1 wrote it (version 1, a SHA-256 trailer) into out. */
static void write_as_version_1(const char *path, const char *out)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    static unsigned char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    ck_assert_uint_gt(n, 20);
    ck_assert_uint_lt(n, sizeof buf - 32);
    n -= 8; /* the XXH3 trailer */
    buf[8] = 1;
    char hex[65];
    ck_assert_int_eq(mj_sha256_hex(buf, n, hex), MOEJIT_OK);
    for (int i = 0; i < 32; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        buf[n++] = (unsigned char)v;
    }
    f = fopen(out, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(buf, 1, n, f), n);
    fclose(f);
}

/* A cache written by version 1: its files are not looked up, so the kernel is rebuilt into a
 * version-2 file beside them (gc ages them out); no quarantine, no warning. The same bytes
 * under the version-2 name (a pack's or remote entry's) still decode and hit. */
START_TEST(a_version_1_file_is_a_miss_and_the_entry_is_rewritten_as_version_2)
{
    mj_cache *c = mj_test_cache_open(&T);
    mj_test_build b = {.spec = SPEC, .seed = 5};
    mj_program p;
    int hit;
    ck_assert_int_eq(get_spec(c, "v1", SPEC, &b, &p, &hit), MOEJIT_OK);
    mj_program_free(&p);
    char path[600], old[640];
    entry_path("v1", path, sizeof path);
    ck_assert_ptr_nonnull(strstr(path, ".v2.mjk"));
    snprintf(old, sizeof old, "%.*s.v1.mjk", (int)(strlen(path) - strlen(".v2.mjk")), path);
    write_as_version_1(path, old);
    ck_assert_int_eq(unlink(path), 0);
    mj_test_stderr_begin();
    ck_assert_int_eq(get_spec(c, "v1", SPEC, &b, &p, &hit), MOEJIT_OK);
    const char *err = mj_test_stderr_end();
    ck_assert_int_eq(hit, 0);
    ck_assert_int_eq(b.calls, 2);
    ck_assert_msg(!strstr(err, "quarantine"), "stderr: %s", err);
    mj_program_free(&p);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(stat(old, &st), 0);
    /* version 1's bytes at the current name: decoded by their SHA-256, a hit */
    write_as_version_1(path, path);
    ck_assert_int_eq(get_spec(c, "v1", SPEC, &b, &p, &hit), MOEJIT_OK);
    ck_assert_int_eq(hit, 1);
    ck_assert_int_eq(b.calls, 2);
    ck_assert_uint_eq(p.cubin_len, 4096);
    mj_program_free(&p);
    mj_cache_close(c);
}
END_TEST

START_TEST(an_entry_whose_stored_spec_differs_is_quarantined_counted_and_rebuilt)
{
    mj_cache *c = mj_test_cache_open(&T);
    mj_test_build b = {.spec = SPEC};
    mj_program p;
    int hit;
    /* A valid entry for another spec under this key (what a key collision or a bug in the
     * key computation would leave): its checksum is fine, only the spec comparison sees it. */
    ck_assert_int_eq(get_spec(c, "s", "backend=simt,act=relu", &b, &p, &hit), MOEJIT_OK);
    mj_program_free(&p);
    mj_test_stderr_begin();
    moejit_status st = get_spec(c, "s", SPEC, &b, &p, &hit);
    const char *err = mj_test_stderr_end();
    ck_assert_int_eq(st, MOEJIT_OK);
    ck_assert_int_eq(hit, 0);
    ck_assert_int_eq(b.calls, 2);
    ck_assert_str_eq(p.canonical_spec, SPEC);
    mj_program_free(&p);
    ck_assert_ptr_nonnull(strstr(err, "stored spec differs"));
    mj_cache_stats s;
    mj_cache_stats_get(c, &s);
    ck_assert_int_eq(s.v[MJ_STAT_QUARANTINED], 1);
    ck_assert_int_eq(get_spec(c, "s", SPEC, &b, &p, &hit), MOEJIT_OK);
    ck_assert_int_eq(hit, 1);
    mj_program_free(&p);
    mj_cache_close(c);
}
END_TEST

/* Arms one injected write failure, asks for a missing key: expects the program, one warning
 * naming the errno, no entry and no temp file, and a write-failure count. */
static void check_write_failure(mj_cache_fault_id id, int err, const char *text)
{
    mj_cache *c = mj_test_cache_open(&T);
    mj_test_build b = {.spec = SPEC};
    mj_program p;
    int hit;
    mj_cache_fault_set(id, err, 0, 1);
    mj_test_stderr_begin();
    moejit_status st = get_spec(c, "w1", SPEC, &b, &p, &hit);
    mj_cache_fault_set(id, err, 0, 1);
    mj_program p2;
    moejit_status st2 = get_spec(c, "w2", SPEC, &b, &p2, &hit); /* a second failure */
    const char *out = mj_test_stderr_end();
    ck_assert_int_eq(st, MOEJIT_OK);
    ck_assert_int_eq(st2, MOEJIT_OK);
    ck_assert_uint_eq(p.cubin_len, 4096);
    ck_assert_int_eq(hit, 0);
    mj_program_free(&p);
    mj_program_free(&p2);
    ck_assert_msg(strstr(out, text) != NULL, "stderr: %s", out);
    ck_assert_msg(strstr(out, "not cached") != NULL, "stderr: %s", out);
    /* One warning per process, however many writes fail. */
    ck_assert_ptr_null(strstr(strstr(out, "warning") + 1, "warning"));
    char path[600];
    entry_path("w1", path, sizeof path);
    ck_assert_int_ne(access(path, F_OK), 0);
    char shard[600];
    snprintf(shard, sizeof shard, "%s", path);
    *strrchr(shard, '/') = '\0';
    ck_assert_int_eq(count_files(shard), 0); /* nothing partial, no temp file */
    mj_cache_stats s;
    mj_cache_stats_get(c, &s);
    ck_assert_int_eq(s.v[MJ_STAT_WRITE_FAILURES], 2);
    mj_cache_close(c);
}

START_TEST(enospc_while_writing_returns_the_kernel_with_one_warning)
{
    check_write_failure(MJ_FAULT_WRITE, ENOSPC, "No space left on device");
}
END_TEST
START_TEST(erofs_at_rename_returns_the_kernel_with_one_warning)
{
    check_write_failure(MJ_FAULT_RENAME, EROFS, "Read-only file system");
}
END_TEST
START_TEST(eacces_creating_the_temp_file_returns_the_kernel_with_one_warning)
{
    check_write_failure(MJ_FAULT_OPEN_TEMP, EACCES, "Permission denied");
}
END_TEST
START_TEST(eio_at_fsync_returns_the_kernel_with_one_warning)
{
    check_write_failure(MJ_FAULT_FSYNC, EIO, "Input/output error");
}
END_TEST

START_TEST(a_real_file_size_limit_returns_the_kernel_with_one_warning)
{
    /* A real full disk as the kernel reports it: RLIMIT_FSIZE makes write() fail with EFBIG
     * (SIGXFSZ ignored), in a child so the limit does not outlive the test. */
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        mj_cache *c = mj_test_cache_open(&T);
        struct rlimit rl = {1000, 1000};
        setrlimit(RLIMIT_FSIZE, &rl);
        mj_test_build b = {.spec = SPEC, .size = 100000};
        mj_program p;
        int hit;
        mj_test_stderr_begin();
        moejit_status st = get_spec(c, "fsize", SPEC, &b, &p, &hit);
        const char *out = mj_test_stderr_end();
        int ok = st == MOEJIT_OK && p.cubin_len == 100000 && strstr(out, "File too large") &&
                 strstr(out, "not cached");
        char path[600];
        entry_path("fsize", path, sizeof path);
        ok = ok && access(path, F_OK) != 0;
        *strrchr(path, '/') = '\0';
        ok = ok && count_files(path) == 0;
        _exit(ok ? 0 : 1);
    }
    int status;
    waitpid(pid, &status, 0);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}
END_TEST

START_TEST(a_cache_dir_that_cannot_be_created_degrades_to_memory_with_one_warning)
{
    mj_cache_fault_set(MJ_FAULT_MKDIR, EROFS, 0, -1);
    mj_test_stderr_begin();
    mj_cache *c = NULL;
    moejit_status st = mj_cache_open_config(&T.cfg, &c);
    mj_test_build b = {.spec = SPEC};
    mj_program p;
    int hit;
    moejit_status st2 = get_spec(c, "rofs", SPEC, &b, &p, &hit);
    const char *out = mj_test_stderr_end();
    ck_assert_int_eq(st, MOEJIT_OK);
    ck_assert_int_eq(st2, MOEJIT_OK);
    ck_assert_uint_eq(p.cubin_len, 4096);
    mj_program_free(&p);
    ck_assert_ptr_nonnull(strstr(out, "Read-only file system"));
    ck_assert_ptr_nonnull(strstr(out, "compiled in memory"));
    mj_cache_close(c);
}
END_TEST

START_TEST(a_cache_dir_owned_by_another_user_is_refused)
{
    ck_assert_int_eq(mkdir(T.dir, 0700), 0);
    if (chown(T.dir, 12345, 12345) != 0) {
        /* Not root: cannot make another user's directory here; the check is still covered by
         * the world-writable test. */
        return;
    }
    mj_cache *c = NULL;
    ck_assert_int_eq(mj_cache_open_config(&T.cfg, &c), MOEJIT_ERR_IO);
    ck_assert_ptr_null(c);
    const char *msg = moejit_last_error();
    ck_assert_msg(strstr(msg, "cache_dir: ") && strstr(msg, T.dir) && strstr(msg, "owned by uid 12345") &&
                      !strstr(msg, "MOEJIT_CACHE_SHARED=1"),
                  "message: %s", msg); /* not our group: the shared option would not help */
    /* In our group and not writable by others: the shared option is the fix, and says so. */
    ck_assert_int_eq(chown(T.dir, 12345, getegid()), 0);
    ck_assert_int_eq(mj_cache_open_config(&T.cfg, &c), MOEJIT_ERR_IO);
    ck_assert_msg(strstr(moejit_last_error(), "MOEJIT_CACHE_SHARED=1"), "message: %s", moejit_last_error());
}
END_TEST

START_TEST(a_world_writable_cache_dir_is_refused_even_when_shared)
{
    ck_assert_int_eq(mkdir(T.dir, 0700), 0);
    ck_assert_int_eq(chmod(T.dir, 0777), 0);
    mj_cache *c = NULL;
    ck_assert_int_eq(mj_cache_open_config(&T.cfg, &c), MOEJIT_ERR_IO);
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "is writable by other users (mode 0777)"));
    T.cfg.shared = 1;
    ck_assert_int_eq(mj_cache_open_config(&T.cfg, &c), MOEJIT_ERR_IO);
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "chmod o-w"));
}
END_TEST

START_TEST(a_group_writable_cache_dir_needs_the_shared_option)
{
    ck_assert_int_eq(mkdir(T.dir, 0700), 0);
    ck_assert_int_eq(chmod(T.dir, 02770), 0);
    mj_cache *c = NULL;
    ck_assert_int_eq(mj_cache_open_config(&T.cfg, &c), MOEJIT_ERR_IO);
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "writable by its group"));
    T.cfg.shared = 1;
    ck_assert_int_eq(mj_cache_open_config(&T.cfg, &c), MOEJIT_OK);
    mj_test_build b = {.spec = SPEC};
    mj_program p;
    int hit;
    ck_assert_int_eq(get_spec(c, "shared", SPEC, &b, &p, &hit), MOEJIT_OK);
    mj_program_free(&p);
    char path[600];
    entry_path("shared", path, sizeof path);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0660); /* group members can read and stamp it */
    ck_assert_int_eq(get_spec(c, "shared", SPEC, &b, &p, &hit), MOEJIT_OK);
    ck_assert_int_eq(hit, 1);
    mj_program_free(&p);
    mj_cache_close(c);
}
END_TEST

START_TEST(an_entry_writable_by_others_is_not_served)
{
    mj_cache *c = mj_test_cache_open(&T);
    mj_test_build b = {.spec = SPEC};
    mj_program p;
    int hit;
    ck_assert_int_eq(get_spec(c, "ww", SPEC, &b, &p, &hit), MOEJIT_OK);
    mj_program_free(&p);
    char path[600];
    entry_path("ww", path, sizeof path);
    ck_assert_int_eq(chmod(path, 0666), 0);
    mj_test_stderr_begin();
    ck_assert_int_eq(get_spec(c, "ww", SPEC, &b, &p, &hit), MOEJIT_OK);
    const char *out = mj_test_stderr_end();
    ck_assert_int_eq(hit, 0);
    ck_assert_int_eq(b.calls, 2);
    mj_program_free(&p);
    ck_assert_ptr_nonnull(strstr(out, "writable by other users"));
    mj_cache_close(c);
}
END_TEST

START_TEST(an_entry_owned_by_another_user_is_not_served)
{
    mj_cache *c = mj_test_cache_open(&T);
    mj_test_build b = {.spec = SPEC};
    mj_program p;
    int hit;
    ck_assert_int_eq(get_spec(c, "own", SPEC, &b, &p, &hit), MOEJIT_OK);
    mj_program_free(&p);
    char path[600];
    entry_path("own", path, sizeof path);
    if (chown(path, 12345, 12345) != 0) {
        mj_cache_close(c);
        return; /* not root */
    }
    mj_test_stderr_begin();
    ck_assert_int_eq(get_spec(c, "own", SPEC, &b, &p, &hit), MOEJIT_OK);
    const char *out = mj_test_stderr_end();
    ck_assert_int_eq(hit, 0);
    mj_program_free(&p);
    ck_assert_ptr_nonnull(strstr(out, "owned by uid 12345"));
    mj_cache_close(c);
}
END_TEST

START_TEST(an_unusable_lock_dir_still_compiles_with_a_warning)
{
    ck_assert_int_eq(mkdir(T.lock_dir, 0777), 0);
    ck_assert_int_eq(chmod(T.lock_dir, 0777), 0);
    mj_cache *c = mj_test_cache_open(&T);
    mj_test_build b = {.spec = SPEC};
    mj_program p;
    int hit;
    mj_test_stderr_begin();
    moejit_status st = get_spec(c, "lk", SPEC, &b, &p, &hit);
    const char *out = mj_test_stderr_end();
    ck_assert_int_eq(st, MOEJIT_OK);
    mj_program_free(&p);
    ck_assert_ptr_nonnull(strstr(out, "lock_dir: "));
    ck_assert_ptr_nonnull(strstr(out, "without cross-process locks"));
    mj_cache_close(c);
}
END_TEST

START_TEST(offline_mode_with_a_corrupt_entry_names_the_fault)
{
    mj_cache *c = mj_test_cache_open(&T);
    mj_test_build b = {.spec = SPEC};
    mj_program p;
    int hit;
    ck_assert_int_eq(get_spec(c, "oc", SPEC, &b, &p, &hit), MOEJIT_OK);
    mj_program_free(&p);
    mj_cache_close(c);
    char path[600];
    entry_path("oc", path, sizeof path);
    flip_byte(path);
    T.cfg.mode = MJ_CACHE_OFFLINE;
    c = mj_test_cache_open(&T);
    mj_test_stderr_begin();
    moejit_status st = get_spec(c, "oc", SPEC, &b, &p, &hit);
    mj_test_stderr_end();
    ck_assert_int_eq(st, MOEJIT_ERR_CACHE_MISS);
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "offline cache: no entry for spec"));
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "bad checksum"));
    ck_assert_int_eq(b.calls, 1);
    mj_cache_close(c);
}
END_TEST

static Suite *cache_faults_suite(void)
{
    Suite *s = suite_create("cache_faults");
    TCase *tc = tcase_create("faults");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, a_flipped_byte_is_quarantined_counted_and_rebuilt);
    tcase_add_test(tc, a_truncated_entry_is_quarantined_counted_and_rebuilt);
    tcase_add_test(tc, a_foreign_file_is_quarantined_counted_and_rebuilt);
    tcase_add_test(tc, a_damaged_trailer_is_quarantined_counted_and_rebuilt);
    tcase_add_test(tc, a_version_1_file_is_a_miss_and_the_entry_is_rewritten_as_version_2);
    tcase_add_test(tc, an_entry_whose_stored_spec_differs_is_quarantined_counted_and_rebuilt);
    tcase_add_test(tc, enospc_while_writing_returns_the_kernel_with_one_warning);
    tcase_add_test(tc, erofs_at_rename_returns_the_kernel_with_one_warning);
    tcase_add_test(tc, eacces_creating_the_temp_file_returns_the_kernel_with_one_warning);
    tcase_add_test(tc, eio_at_fsync_returns_the_kernel_with_one_warning);
    tcase_add_test(tc, a_real_file_size_limit_returns_the_kernel_with_one_warning);
    tcase_add_test(tc, a_cache_dir_that_cannot_be_created_degrades_to_memory_with_one_warning);
    tcase_add_test(tc, a_cache_dir_owned_by_another_user_is_refused);
    tcase_add_test(tc, a_world_writable_cache_dir_is_refused_even_when_shared);
    tcase_add_test(tc, a_group_writable_cache_dir_needs_the_shared_option);
    tcase_add_test(tc, an_entry_writable_by_others_is_not_served);
    tcase_add_test(tc, an_entry_owned_by_another_user_is_not_served);
    tcase_add_test(tc, an_unusable_lock_dir_still_compiles_with_a_warning);
    tcase_add_test(tc, offline_mode_with_a_corrupt_entry_names_the_fault);
    suite_add_tcase(s, tc);
    return s;
}

MJ_CHECK_MAIN(cache_faults_suite)
