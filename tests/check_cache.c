/*
 * This file contains the tests of the cache's lookup path and maintenance API (cache/cache.c,
 * cache/gc.c, cache/pack.c): miss then hit, the layout on disk, modes, counters, list, read,
 * remove, clear, verify and export/import. Each test has its own temp cache and lock dir.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache/cache.h"
#include "cache/fault.h"
#include "lib/cache_test_util.h"
#include "lib/check_main.h"
#include "cache/store.h"

static mj_test_cache T;

static void setup(void)
{
    mj_test_cache_init(&T);
    mj_cache_fault_clear_all();
    mj_cache_fault_reset_warnings();
}

static void teardown(void) { mj_test_cache_cleanup(&T); }

static const char *SPEC = "backend=simt,quant=bf16,act=swiglu(alpha=0x1.b3b646p+0),arch=sm_90a";

static void get(mj_cache *c, const char *keytext, mj_test_build *b, mj_program *p, int *hit)
{
    mj_key k = mj_test_key(keytext);
    moejit_status st = mj_cache_get_or_build(c, &k, "preimage\nnvrtc_version 13.0\n", b->spec ? b->spec : SPEC,
                                             mj_test_build_fn, b, p, hit);
    ck_assert_msg(st == MOEJIT_OK, "get_or_build: %s", moejit_last_error());
}

/* A preimage in core/key.c's grammar for keytext, and its key: what import and verify check. */
static mj_key consistent_key(const char *keytext, char *pre, size_t cap)
{
    snprintf(pre, cap, "moejit-key 1\ngenerator_version 1\nspec %zu:%s\nsource %s\nnvrtc_version 13.0\n",
             strlen(SPEC), SPEC, keytext);
    mj_key k;
    ck_assert_int_eq(mj_sha256_hex(pre, strlen(pre), k.hex), MOEJIT_OK);
    return k;
}

/* get() with a consistent key and preimage (entries that pass import's and verify's checks). */
static void get_consistent(mj_cache *c, const char *keytext, mj_test_build *b, mj_program *p, int *hit)
{
    char pre[512];
    mj_key k = consistent_key(keytext, pre, sizeof pre);
    moejit_status st = mj_cache_get_or_build(c, &k, pre, SPEC, mj_test_build_fn, b, p, hit);
    ck_assert_msg(st == MOEJIT_OK, "get_or_build: %s", moejit_last_error());
}

static const mj_pack_opts TRUST_UNSIGNED = {NULL, 1};

START_TEST(a_miss_builds_and_publishes_then_a_hit_returns_the_same_program)
{
    mj_cache *c = mj_test_cache_open(&T);
    mj_test_build b = {.spec = SPEC, .seed = 7};
    mj_program p1, p2;
    int hit;
    get(c, "k1", &b, &p1, &hit);
    ck_assert_int_eq(hit, 0);
    ck_assert_int_eq(b.calls, 1);
    get(c, "k1", &b, &p2, &hit);
    ck_assert_int_eq(hit, 1);
    ck_assert_int_eq(b.calls, 1);
    ck_assert_uint_eq(p1.cubin_len, p2.cubin_len);
    ck_assert_mem_eq(p1.cubin, p2.cubin, p1.cubin_len);
    ck_assert_str_eq(p2.canonical_spec, SPEC);
    ck_assert_str_eq(p2.arch, "sm_90a");
    ck_assert_int_eq(p2.n_kernels, 2);
    ck_assert_str_eq(p2.kernels[0].name, "mj_gemm1");
    ck_assert_int_eq(p2.kernels[0].registers, 40);
    ck_assert_int_eq(p2.kernels[0].shared_bytes, 1024);
    ck_assert_int_eq(p2.kernels[0].spill_store_bytes, 4);
    ck_assert(p2.compile_seconds == 0); /* from the cache: no compile */
    ck_assert_ptr_nonnull(strstr(p2.log, "Used 40 registers"));
    mj_program_free(&p1);
    mj_program_free(&p2);
    mj_cache_close(c);
}
END_TEST

START_TEST(entries_live_in_two_hex_levels_with_private_modes)
{
    mj_cache *c = mj_test_cache_open(&T);
    mj_test_build b = {.spec = SPEC};
    mj_program p;
    int hit;
    get(c, "layout", &b, &p, &hit);
    mj_program_free(&p);
    mj_key k = mj_test_key("layout");
    char path[600];
    snprintf(path, sizeof path, "%s/%.2s/%.2s/%s.v2.mjk", T.dir, k.hex, k.hex + 2, k.hex);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0600);
    ck_assert_int_eq(stat(T.dir, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0700);
    /* Nothing but the entry in its shard: no temp file left behind. */
    char shard[600], cmd[700];
    snprintf(shard, sizeof shard, "%s/%.2s/%.2s", T.dir, k.hex, k.hex + 2);
    snprintf(cmd, sizeof cmd, "test $(ls -A '%s' | wc -l) = 1", shard);
    ck_assert_int_eq(system(cmd), 0);
    mj_cache_close(c);
}
END_TEST

START_TEST(counters_record_hits_misses_compiles_and_size)
{
    mj_cache *c = mj_test_cache_open(&T);
    mj_test_build b = {.spec = SPEC, .size = 1000};
    mj_program p;
    int hit;
    get(c, "a", &b, &p, &hit), mj_program_free(&p);
    get(c, "a", &b, &p, &hit), mj_program_free(&p);
    get(c, "a", &b, &p, &hit), mj_program_free(&p);
    get(c, "b", &b, &p, &hit), mj_program_free(&p);
    mj_cache_stats s;
    ck_assert_int_eq(mj_cache_stats_get(c, &s), MOEJIT_OK);
    ck_assert_int_eq(s.v[MJ_STAT_HITS], 2);
    ck_assert_int_eq(s.v[MJ_STAT_MISSES], 2);
    ck_assert_int_eq(s.v[MJ_STAT_COMPILES], 2);
    ck_assert_int_gt(s.v[MJ_STAT_COMPILE_US], 0);
    ck_assert_int_eq(s.v[MJ_STAT_FILES], 2);
    ck_assert_int_gt(s.v[MJ_STAT_BYTES], 2000);
    ck_assert_int_eq(mj_cache_stats_reset(c), MOEJIT_OK);
    ck_assert_int_eq(mj_cache_stats_get(c, &s), MOEJIT_OK);
    ck_assert_int_eq(s.v[MJ_STAT_HITS], 0);
    ck_assert_int_eq(s.v[MJ_STAT_FILES], 2); /* size counters survive a reset */
    mj_cache_close(c);
}
END_TEST

START_TEST(stats_labels_table_lists_every_id_in_order)
{
    for (int i = 0; i < MJ_STAT_COUNT; i++) {
        ck_assert_int_eq(mj_cache_stat_fields[i].id, i);
        ck_assert_ptr_nonnull(mj_cache_stat_fields[i].name);
    }
    /* Persisted numbers: changing them breaks every existing stats file. */
    ck_assert_int_eq(MJ_STAT_HITS, 0);
    ck_assert_int_eq(MJ_STAT_QUARANTINED, 4);
    ck_assert_int_eq(MJ_STAT_BYTES, 8);
}
END_TEST

START_TEST(a_failed_build_is_returned_and_nothing_is_published)
{
    mj_cache *c = mj_test_cache_open(&T);
    mj_test_build b = {.spec = SPEC, .fail = 1};
    mj_key k = mj_test_key("bad");
    mj_program p;
    int hit;
    ck_assert_int_eq(mj_cache_get_or_build(c, &k, "pre", SPEC, mj_test_build_fn, &b, &p, &hit),
                     MOEJIT_ERR_COMPILE);
    /* the build's own message reaches the caller (the counters' update after it clears nothing) */
    ck_assert_msg(strstr(moejit_last_error(), "failing as asked"), "message: '%s'", moejit_last_error());
    int found;
    ck_assert_int_eq(mj_cache_lookup(c, k.hex, SPEC, &p, &found), MOEJIT_OK);
    ck_assert_int_eq(found, 0);
    mj_cache_stats s;
    mj_cache_stats_get(c, &s);
    ck_assert_int_eq(s.v[MJ_STAT_COMPILE_FAILURES], 1);
    mj_cache_close(c);
}
END_TEST

START_TEST(offline_mode_miss_names_the_spec_and_key)
{
    T.cfg.mode = MJ_CACHE_OFFLINE;
    mj_cache *c = mj_test_cache_open(&T);
    mj_test_build b = {.spec = SPEC};
    mj_key k = mj_test_key("offline");
    mj_program p;
    int hit;
    ck_assert_int_eq(mj_cache_get_or_build(c, &k, "pre", SPEC, mj_test_build_fn, &b, &p, &hit),
                     MOEJIT_ERR_CACHE_MISS);
    char want[512];
    snprintf(want, sizeof want, "offline cache: no entry for spec %s (key %s)", SPEC, k.hex);
    ck_assert_str_eq(moejit_last_error(), want);
    ck_assert_int_eq(b.calls, 0);
    mj_cache_close(c);
}
END_TEST

START_TEST(offline_mode_serves_entries_written_before)
{
    mj_cache *c = mj_test_cache_open(&T);
    mj_test_build b = {.spec = SPEC};
    mj_program p;
    int hit;
    get(c, "warm", &b, &p, &hit), mj_program_free(&p);
    mj_cache_close(c);
    T.cfg.mode = MJ_CACHE_OFFLINE;
    c = mj_test_cache_open(&T);
    get(c, "warm", &b, &p, &hit), mj_program_free(&p);
    ck_assert_int_eq(hit, 1);
    ck_assert_int_eq(b.calls, 1);
    mj_cache_close(c);
}
END_TEST

START_TEST(read_only_mode_builds_in_memory_and_writes_nothing)
{
    T.cfg.mode = MJ_CACHE_READ_ONLY;
    mj_cache *c = mj_test_cache_open(&T); /* the directory does not exist: every lookup misses */
    mj_test_build b = {.spec = SPEC};
    mj_program p;
    int hit;
    get(c, "ro", &b, &p, &hit);
    ck_assert_int_eq(hit, 0);
    ck_assert_uint_eq(p.cubin_len, 4096);
    mj_program_free(&p);
    get(c, "ro", &b, &p, &hit), mj_program_free(&p);
    ck_assert_int_eq(b.calls, 2);
    ck_assert_int_ne(access(T.dir, F_OK), 0); /* not even the directory */
    ck_assert_int_ne(access(T.lock_dir, F_OK), 0);
    mj_cache_close(c);
}
END_TEST

START_TEST(read_only_mode_reads_existing_entries_without_touching_them)
{
    mj_cache *c = mj_test_cache_open(&T);
    mj_test_build b = {.spec = SPEC};
    mj_program p;
    int hit;
    get(c, "ro2", &b, &p, &hit), mj_program_free(&p);
    mj_cache_close(c);
    mj_key k = mj_test_key("ro2");
    char path[600];
    mj_cache_entry_path(&T.cfg, k.hex, path, sizeof path);
    mj_test_age(path, 3600);
    struct stat before, after;
    stat(path, &before);
    T.cfg.mode = MJ_CACHE_READ_ONLY;
    c = mj_test_cache_open(&T);
    get(c, "ro2", &b, &p, &hit), mj_program_free(&p);
    ck_assert_int_eq(hit, 1);
    stat(path, &after);
    ck_assert_int_eq(after.st_mtime, before.st_mtime); /* no last-use stamp written */
    mj_cache_close(c);
}
END_TEST

START_TEST(off_mode_always_builds_and_touches_no_disk)
{
    T.cfg.mode = MJ_CACHE_OFF;
    mj_cache *c = mj_test_cache_open(&T);
    mj_test_build b = {.spec = SPEC};
    mj_program p;
    int hit;
    get(c, "off", &b, &p, &hit), mj_program_free(&p);
    get(c, "off", &b, &p, &hit), mj_program_free(&p);
    ck_assert_int_eq(b.calls, 2);
    ck_assert_int_ne(access(T.dir, F_OK), 0);
    mj_cache_close(c);
}
END_TEST

START_TEST(a_hit_refreshes_an_old_last_use_stamp)
{
    mj_cache *c = mj_test_cache_open(&T);
    mj_test_build b = {.spec = SPEC};
    mj_program p;
    int hit;
    get(c, "stamp", &b, &p, &hit), mj_program_free(&p);
    mj_key k = mj_test_key("stamp");
    char path[600];
    mj_cache_entry_path(&T.cfg, k.hex, path, sizeof path);
    mj_test_age(path, 86400);
    get(c, "stamp", &b, &p, &hit), mj_program_free(&p);
    struct stat st;
    stat(path, &st);
    ck_assert_int_lt(time(NULL) - st.st_mtime, 60);
    mj_cache_close(c);
}
END_TEST

typedef struct listed {
    int n;
    char spec[256];
    int64_t size;
} listed;

static int collect(void *ctx, const mj_cache_entry_info *info)
{
    listed *l = ctx;
    l->n++;
    snprintf(l->spec, sizeof l->spec, "%s", info->canonical_spec);
    l->size = info->size;
    return 0;
}

START_TEST(list_read_remove_and_clear_see_the_entries)
{
    mj_cache *c = mj_test_cache_open(&T);
    mj_test_build b = {.spec = SPEC};
    mj_program p;
    int hit;
    get(c, "x1", &b, &p, &hit), mj_program_free(&p);
    get(c, "x2", &b, &p, &hit), mj_program_free(&p);
    get(c, "x3", &b, &p, &hit), mj_program_free(&p);
    listed l = {0};
    ck_assert_int_eq(mj_cache_list(c, collect, &l), MOEJIT_OK);
    ck_assert_int_eq(l.n, 3);
    ck_assert_str_eq(l.spec, SPEC);
    ck_assert_int_gt(l.size, 4096);

    mj_key k = mj_test_key("x2");
    mj_entry e;
    ck_assert_int_eq(mj_cache_read(c, k.hex, &e), MOEJIT_OK);
    ck_assert_str_eq(e.key, k.hex);
    ck_assert_str_eq(e.preimage, "preimage\nnvrtc_version 13.0\n");
    ck_assert_int_eq(e.nvrtc_major, 13);
    ck_assert(e.compile_seconds > 0.2 && e.compile_seconds < 0.3);
    mj_entry_free(&e);

    ck_assert_int_eq(mj_cache_remove(c, k.hex), MOEJIT_OK);
    ck_assert_int_eq(mj_cache_remove(c, k.hex), MOEJIT_ERR_CACHE_MISS);
    ck_assert_int_eq(mj_cache_read(c, k.hex, &e), MOEJIT_ERR_CACHE_MISS);
    int64_t removed = 0;
    ck_assert_int_eq(mj_cache_clear(c, &removed), MOEJIT_OK);
    ck_assert_int_eq(removed, 2);
    l.n = 0;
    mj_cache_list(c, collect, &l);
    ck_assert_int_eq(l.n, 0);
    mj_cache_stats s;
    mj_cache_stats_get(c, &s);
    ck_assert_int_eq(s.v[MJ_STAT_FILES], 0);
    ck_assert_int_eq(s.v[MJ_STAT_BYTES], 0);
    mj_cache_close(c);
}
END_TEST

START_TEST(put_then_lookup_by_key_alone)
{
    mj_cache *c = mj_test_cache_open(&T);
    mj_test_build b = {.spec = SPEC, .seed = 3};
    mj_program p, q;
    ck_assert_int_eq(mj_test_build_fn(&b, &p), MOEJIT_OK);
    mj_key k = mj_test_key("put");
    ck_assert_int_eq(mj_cache_put(c, k.hex, "pre", SPEC, &p), MOEJIT_OK);
    int found;
    ck_assert_int_eq(mj_cache_lookup(c, k.hex, NULL, &q, &found), MOEJIT_OK);
    ck_assert_int_eq(found, 1);
    ck_assert_mem_eq(p.cubin, q.cubin, p.cubin_len);
    mj_program_free(&q);
    /* A different spec asked under this key is not served. */
    mj_test_stderr_begin();
    ck_assert_int_eq(mj_cache_lookup(c, k.hex, "backend=other", &q, &found), MOEJIT_OK);
    const char *err = mj_test_stderr_end();
    ck_assert_int_eq(found, 0);
    ck_assert_ptr_nonnull(strstr(err, "stored spec differs from the requested spec"));
    mj_program_free(&p);
    mj_cache_close(c);
}
END_TEST

START_TEST(export_clear_import_restores_the_same_entries)
{
    mj_cache *c = mj_test_cache_open(&T);
    mj_test_build b = {.spec = SPEC};
    mj_program p;
    int hit;
    get_consistent(c, "e1", &b, &p, &hit), mj_program_free(&p);
    get_consistent(c, "e2", &b, &p, &hit), mj_program_free(&p);
    char pack[400];
    snprintf(pack, sizeof pack, "%s/cache.mjpack", T.root);
    int64_t n = 0, added = 0, present = 0;
    ck_assert_int_eq(mj_cache_export(c, pack, NULL, NULL, NULL, &n), MOEJIT_OK);
    ck_assert_int_eq(n, 2);
    ck_assert_int_eq(mj_cache_clear(c, NULL), MOEJIT_OK);
    ck_assert_int_eq(mj_cache_import(c, pack, &TRUST_UNSIGNED, &added, &present), MOEJIT_OK);
    ck_assert_int_eq(added, 2);
    ck_assert_int_eq(present, 0);
    get_consistent(c, "e1", &b, &p, &hit), mj_program_free(&p);
    ck_assert_int_eq(hit, 1);
    ck_assert_int_eq(b.calls, 2);
    ck_assert_int_eq(mj_cache_import(c, pack, &TRUST_UNSIGNED, &added, &present), MOEJIT_OK);
    ck_assert_int_eq(added, 0);
    ck_assert_int_eq(present, 2);
    mj_cache_close(c);
}
END_TEST

START_TEST(a_corrupted_pack_is_refused_whole)
{
    mj_cache *c = mj_test_cache_open(&T);
    mj_test_build b = {.spec = SPEC};
    mj_program p;
    int hit;
    get_consistent(c, "c1", &b, &p, &hit), mj_program_free(&p);
    get_consistent(c, "c2", &b, &p, &hit), mj_program_free(&p);
    char pack[400];
    snprintf(pack, sizeof pack, "%s/bad.mjpack", T.root);
    ck_assert_int_eq(mj_cache_export(c, pack, NULL, NULL, NULL, NULL), MOEJIT_OK);
    ck_assert_int_eq(mj_cache_clear(c, NULL), MOEJIT_OK);
    struct stat st;
    stat(pack, &st);
    mj_test_poke(pack, (long)st.st_size - 100, "\xff", 1); /* inside the second entry */
    int64_t added = -1;
    ck_assert_int_eq(mj_cache_import(c, pack, &TRUST_UNSIGNED, &added, NULL), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "refused whole"));
    ck_assert_int_eq(added, 0);
    listed l = {0};
    mj_cache_list(c, collect, &l);
    ck_assert_int_eq(l.n, 0);
    mj_cache_close(c);
}
END_TEST

START_TEST(verify_quarantines_bad_entries_and_keeps_good_ones)
{
    mj_cache *c = mj_test_cache_open(&T);
    mj_test_build b = {.spec = SPEC};
    mj_program p;
    int hit;
    get_consistent(c, "v1", &b, &p, &hit), mj_program_free(&p);
    get_consistent(c, "v2", &b, &p, &hit), mj_program_free(&p);
    char pre[512];
    mj_key k = consistent_key("v2", pre, sizeof pre);
    char path[600];
    mj_cache_entry_path(&T.cfg, k.hex, path, sizeof path);
    mj_test_poke(path, 200, "\x01", 1);
    mj_test_stderr_begin();
    mj_cache_verify_result r;
    ck_assert_int_eq(mj_cache_verify(c, &r), MOEJIT_OK);
    mj_test_stderr_end();
    ck_assert_int_eq(r.checked, 2);
    ck_assert_int_eq(r.ok, 1);
    ck_assert_int_eq(r.bad, 1);
    ck_assert_int_ne(access(path, F_OK), 0);
    mj_cache_stats s;
    mj_cache_stats_get(c, &s);
    ck_assert_int_eq(s.v[MJ_STAT_QUARANTINED], 1);
    ck_assert_int_eq(s.v[MJ_STAT_FILES], 1);
    mj_cache_close(c);
}
END_TEST

START_TEST(bad_keys_are_rejected_by_name)
{
    mj_cache *c = mj_test_cache_open(&T);
    mj_program p;
    int found;
    ck_assert_int_eq(mj_cache_lookup(c, "ABC", NULL, &p, &found), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "cache key"));
    mj_cache_close(c);
}
END_TEST

static Suite *cache_suite(void)
{
    Suite *s = suite_create("cache");
    TCase *tc = tcase_create("cache");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, a_miss_builds_and_publishes_then_a_hit_returns_the_same_program);
    tcase_add_test(tc, entries_live_in_two_hex_levels_with_private_modes);
    tcase_add_test(tc, counters_record_hits_misses_compiles_and_size);
    tcase_add_test(tc, stats_labels_table_lists_every_id_in_order);
    tcase_add_test(tc, a_failed_build_is_returned_and_nothing_is_published);
    tcase_add_test(tc, offline_mode_miss_names_the_spec_and_key);
    tcase_add_test(tc, offline_mode_serves_entries_written_before);
    tcase_add_test(tc, read_only_mode_builds_in_memory_and_writes_nothing);
    tcase_add_test(tc, read_only_mode_reads_existing_entries_without_touching_them);
    tcase_add_test(tc, off_mode_always_builds_and_touches_no_disk);
    tcase_add_test(tc, a_hit_refreshes_an_old_last_use_stamp);
    tcase_add_test(tc, list_read_remove_and_clear_see_the_entries);
    tcase_add_test(tc, put_then_lookup_by_key_alone);
    tcase_add_test(tc, export_clear_import_restores_the_same_entries);
    tcase_add_test(tc, a_corrupted_pack_is_refused_whole);
    tcase_add_test(tc, verify_quarantines_bad_entries_and_keeps_good_ones);
    tcase_add_test(tc, bad_keys_are_rejected_by_name);
    suite_add_tcase(s, tc);
    return s;
}

MJ_CHECK_MAIN(cache_suite)
