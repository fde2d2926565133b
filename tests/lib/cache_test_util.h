/*
 * cache_test_util.h — helpers for the cache tests: a private temp cache and lock directory per
 * test, a fake build function that counts its calls (also across processes, through a file),
 * and capture of stderr to assert the cache's warnings.
 */
#ifndef MJ_CACHE_TEST_UTIL_H
#define MJ_CACHE_TEST_UTIL_H

#include <stddef.h>

#include "cache/cache.h"

typedef struct mj_test_cache {
    char root[256];      /* mkdtemp directory holding both */
    char dir[300];       /* root/cache (not created: the cache creates it) */
    char lock_dir[300];  /* root/locks */
    mj_cache_config cfg; /* defaults, with dir and lock_dir pointed at the above */
} mj_test_cache;

/* Creates a fresh root under $TMPDIR or /tmp; aborts on error. */
void mj_test_cache_init(mj_test_cache *t);
/* Removes the whole root (rm -rf). */
void mj_test_cache_cleanup(mj_test_cache *t);
/* Opens a cache on t->cfg; aborts on failure. */
mj_cache *mj_test_cache_open(mj_test_cache *t);

/* What the fake build makes: a cubin of `size` bytes derived from `seed`. */
typedef struct mj_test_build {
    const char *spec;       /* canonical spec put into the program */
    unsigned seed;
    size_t size;            /* cubin bytes; 0: 4096 */
    int calls;              /* in-process count */
    const char *count_file; /* when set, each call appends one byte (cross-process count) */
    double sleep_s;         /* to widen race windows */
    int fail;               /* 1: return MOEJIT_ERR_COMPILE */
} mj_test_build;

moejit_status mj_test_build_fn(void *ctx, mj_program *out);
/* Bytes in count_file (0 if absent). */
long mj_test_count_file(const char *path);
/* A key from any text (SHA-256 of it). */
mj_key mj_test_key(const char *text);

/* Redirects stderr into a temp file until mj_test_stderr_end, which returns what was written
 * (static buffer, NUL-terminated). */
void mj_test_stderr_begin(void);
const char *mj_test_stderr_end(void);

/* Writes `n` bytes at `offset` of a file / truncates it; aborts on failure. */
void mj_test_poke(const char *path, long offset, const void *bytes, size_t n);
void mj_test_truncate(const char *path, long size);
/* Sets a file's mtime (last use) to now - age_s. */
void mj_test_age(const char *path, long age_s);

/* ---- real compiles (emit + NVRTC worker), for the tests that need real cubins ---------- */

#include "codegen/emit.h"

typedef struct mj_test_real_job {
    moejit_spec *spec;
    mj_source src;
    mj_key key;
    mj_buf preimage;
    const char *count_file; /* when set, each build appends one byte */
    int calls;
} mj_test_real_job;

/* Parses spec_text, emits its source and computes its key as the registry does. */
moejit_status mj_test_real_job_init(mj_test_real_job *j, const char *spec_text);
moejit_status mj_test_real_build_fn(void *ctx, mj_program *out);
void mj_test_real_job_free(mj_test_real_job *j);

#endif
