/*
 * This file contains the cache's failed/<key>/ folders (compile_failures.h): writing what a
 * failed compile was given and said, finding the folder again, and removing it once the key
 * compiles.
 */
#include "runtime/compile_failures.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/dirs.h"
#include "cache/store.h"
#include "core/status.h"
#include "core/strbuf.h"

#define FAILED_DIR "failed"

static const char *const k_files[] = {"spec.txt", "source.cu", "options.txt", "log.txt"};

/* The cache's directory when this process may write it, else NULL. */
static const char *writable_root(mj_cache *cache)
{
    if (!cache) return NULL;
    const mj_cache_config *cfg = mj_cache_get_config(cache);
    return cfg->mode == MJ_CACHE_READ_WRITE && cfg->dir[0] ? cfg->dir : NULL;
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return 0;
        p += w;
        n -= (size_t)w;
    }
    return 1;
}

/* Writes a then b (may be NULL) into dir/name, replacing what was there. */
static int write_text(const char *dir, const char *name, const char *a, const char *b)
{
    char path[MJ_CACHE_PATH_MAX + 128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return 0;
    int ok = write_all(fd, a, strlen(a)) && (!b || write_all(fd, b, strlen(b)));
    return close(fd) == 0 && ok;
}

static int write_files(const char *dir, const mj_build_inputs *in, const char *canonical, const char *log,
                       const char *message)
{
    mj_buf opts = MJ_BUF_INIT, text = MJ_BUF_INIT;
    for (int i = 0; i < in->n_options; i++) mj_buf_printf(&opts, "%s\n", in->options[i]);
    mj_buf_printf(&text, "%s%s--- error ---\n%s\n", log ? log : "", log && *log ? "\n" : "", message);
    int ok = write_text(dir, k_files[0], canonical, "\n") && write_text(dir, k_files[1], in->source.text, NULL) &&
             write_text(dir, k_files[2], opts.data ? opts.data : "", NULL) &&
             write_text(dir, k_files[3], text.data ? text.data : message, NULL);
    mj_buf_free(&opts);
    mj_buf_free(&text);
    return ok;
}

static void remove_folder(const char *root, const char *key)
{
    char dir[MJ_CACHE_PATH_MAX + 96], path[MJ_CACHE_PATH_MAX + 128];
    snprintf(dir, sizeof dir, "%s/" FAILED_DIR "/%s", root, key);
    if (access(dir, F_OK) != 0) return;
    for (size_t i = 0; i < sizeof k_files / sizeof k_files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, k_files[i]);
        unlink(path);
    }
    rmdir(dir);
}

void mj_compile_failure_keep(mj_cache *cache, const mj_build_inputs *in, const char *canonical, const char *log,
                             const char *message)
{
    const char *root = writable_root(cache);
    if (!root || !mj_cache_key_valid(in->key.hex)) return;
    char saved[MJ_ERROR_MAX]; /* creating the folders may fail; the compile's message stays */
    snprintf(saved, sizeof saved, "%s", moejit_last_error());
    char top[MJ_CACHE_PATH_MAX + 16], dir[MJ_CACHE_PATH_MAX + 96];
    snprintf(top, sizeof top, "%s/" FAILED_DIR, root);
    snprintf(dir, sizeof dir, "%s/%s", top, in->key.hex);
    const int shared = mj_cache_get_config(cache)->shared;
    int ok = mj_cache_ensure_dir(top, "failed dir", shared, NULL) == MOEJIT_OK &&
             mj_cache_ensure_dir(dir, "failed dir", shared, NULL) == MOEJIT_OK &&
             write_files(dir, in, canonical, log, message);
    if (!ok) remove_folder(root, in->key.hex); /* a folder there is always this failure's, whole */
    if (*saved)
        mj_fail(MOEJIT_OK, "%s", saved);
    else
        mj_clear_error();
}

void mj_compile_failure_forget(mj_cache *cache, const char *key)
{
    const char *root = writable_root(cache);
    if (root && mj_cache_key_valid(key)) remove_folder(root, key);
}

int mj_compile_failure_dir(mj_cache *cache, const char *key, char *out, size_t cap)
{
    const char *root = writable_root(cache);
    struct stat st;
    snprintf(out, cap, "%s/" FAILED_DIR "/%s", root ? root : "", key);
    return root && stat(out, &st) == 0 && S_ISDIR(st.st_mode);
}
