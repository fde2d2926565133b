/*
 * This file contains the cache tests' helpers (see cache_test_util.h).
 */
#include "cache_test_util.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/key.h"
#include "core/status.h"
#include "codegen/build_inputs.h"
#include "codegen/nvrtc_compile.h"
#include "core/spec.h"

/* Not Check's asserts: tests/lib is also linked into the GPU suite, which has no libcheck. A
 * failed helper aborts, which Check reports as an error of the running test. */
#define REQUIRE(cond)                                                                 \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "%s:%d: test helper: %s failed\n", __FILE__, __LINE__, #cond); \
            abort();                                                                  \
        }                                                                             \
    } while (0)

void mj_test_cache_init(mj_test_cache *t)
{
    memset(t, 0, sizeof *t);
    const char *tmp = getenv("TMPDIR");
    snprintf(t->root, sizeof t->root, "%s/mjcache-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    REQUIRE(mkdtemp(t->root) != NULL);
    snprintf(t->dir, sizeof t->dir, "%s/cache", t->root);
    snprintf(t->lock_dir, sizeof t->lock_dir, "%s/locks", t->root);
    REQUIRE(mj_cache_config_resolve(NULL, &t->cfg) == MOEJIT_OK);
    snprintf(t->cfg.dir, sizeof t->cfg.dir, "%s", t->dir);
    snprintf(t->cfg.lock_dir, sizeof t->cfg.lock_dir, "%s", t->lock_dir);
    t->cfg.mode = MJ_CACHE_READ_WRITE;
    t->cfg.shared = 0;
    t->cfg.max_bytes = MJ_CACHE_DEFAULT_MAX_BYTES;
    t->cfg.max_age_s = 0;
    t->cfg.lock_timeout_s = 60;
}

void mj_test_cache_cleanup(mj_test_cache *t)
{
    if (!t->root[0]) return;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", t->root);
    if (system(cmd) != 0) { /* best effort */ }
}

mj_cache *mj_test_cache_open(mj_test_cache *t)
{
    mj_cache *c = NULL;
    moejit_status st = mj_cache_open_config(&t->cfg, &c);
    if (st != MOEJIT_OK) fprintf(stderr, "mj_cache_open_config: %s\n", moejit_last_error());
    REQUIRE(st == MOEJIT_OK);
    return c;
}

moejit_status mj_test_build_fn(void *ctx, mj_program *out)
{
    mj_test_build *b = ctx;
    b->calls++;
    if (b->count_file) {
        int fd = open(b->count_file, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd >= 0) {
            if (write(fd, "x", 1) != 1) { /* counted as not called */ }
            close(fd);
        }
    }
    if (b->sleep_s > 0) {
        struct timespec ts = {(time_t)b->sleep_s, (long)((b->sleep_s - (time_t)b->sleep_s) * 1e9)};
        nanosleep(&ts, NULL);
    }
    if (b->fail) return mj_fail(MOEJIT_ERR_COMPILE, "test build of %s: failing as asked", b->spec);
    memset(out, 0, sizeof *out);
    size_t n = b->size ? b->size : 4096;
    out->cubin = malloc(n);
    unsigned x = b->seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        out->cubin[i] = (uint8_t)(x >> 16);
    }
    out->cubin_len = n;
    out->canonical_spec = strdup(b->spec ? b->spec : "backend=simt");
    out->arch = strdup("sm_90a");
    out->log = strdup("ptxas info : Used 40 registers\n");
    out->n_kernels = 2;
    snprintf(out->kernels[0].name, MJ_KERNEL_NAME_MAX, "mj_gemm1");
    out->kernels[0].registers = 40;
    out->kernels[0].shared_bytes = 1024;
    out->kernels[0].spill_store_bytes = 4;
    snprintf(out->kernels[1].name, MJ_KERNEL_NAME_MAX, "mj_gemm2");
    out->kernels[1].registers = 32;
    out->compile_seconds = 0.25;
    return MOEJIT_OK;
}

long mj_test_count_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : 0;
}

mj_key mj_test_key(const char *text)
{
    mj_key k;
    REQUIRE(mj_sha256_hex(text, strlen(text), k.hex) == MOEJIT_OK);
    return k;
}

static int g_saved_stderr = -1;
static char g_stderr_path[64];

void mj_test_stderr_begin(void)
{
    fflush(stderr);
    snprintf(g_stderr_path, sizeof g_stderr_path, "/tmp/mjstderr-XXXXXX");
    int fd = mkstemp(g_stderr_path);
    REQUIRE(fd >= 0);
    g_saved_stderr = dup(STDERR_FILENO);
    dup2(fd, STDERR_FILENO);
    close(fd);
}

const char *mj_test_stderr_end(void)
{
    static char text[8192];
    fflush(stderr);
    dup2(g_saved_stderr, STDERR_FILENO);
    close(g_saved_stderr);
    text[0] = '\0';
    FILE *f = fopen(g_stderr_path, "r");
    if (f) {
        size_t n = fread(text, 1, sizeof text - 1, f);
        text[n] = '\0';
        fclose(f);
    }
    unlink(g_stderr_path);
    return text;
}

void mj_test_poke(const char *path, long offset, const void *bytes, size_t n)
{
    int fd = open(path, O_WRONLY);
    REQUIRE(fd >= 0);
    REQUIRE(pwrite(fd, bytes, n, offset) == (ssize_t)n);
    close(fd);
}

void mj_test_truncate(const char *path, long size) { REQUIRE(truncate(path, size) == 0); }

void mj_test_age(const char *path, long age_s)
{
    struct timespec ts[2];
    clock_gettime(CLOCK_REALTIME, &ts[0]);
    ts[0].tv_sec -= age_s;
    ts[1] = ts[0];
    REQUIRE(utimensat(AT_FDCWD, path, ts, 0) == 0);
}

moejit_status mj_test_real_job_init(mj_test_real_job *j, const char *spec_text)
{
    memset(j, 0, sizeof *j);
    mj_build_inputs in;
    moejit_status st = moejit_spec_parse(spec_text, &j->spec);
    if (st == MOEJIT_OK) st = mj_build_inputs_make(j->spec, &in);
    if (st != MOEJIT_OK) return st;
    /* The source, key and preimage move into the job; the rest is freed. */
    j->src = in.source;
    j->key = in.key;
    j->preimage = in.preimage;
    memset(&in.source, 0, sizeof in.source);
    in.preimage = (mj_buf)MJ_BUF_INIT;
    mj_build_inputs_free(&in);
    return MOEJIT_OK;
}

moejit_status mj_test_real_build_fn(void *ctx, mj_program *out)
{
    mj_test_real_job *j = ctx;
    j->calls++;
    if (j->count_file) {
        int fd = open(j->count_file, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd >= 0) {
            if (write(fd, "x", 1) != 1) { /* counted as not called */ }
            close(fd);
        }
    }
    mj_compile_request req = {.source = &j->src,
                              .arch = mj_arch_target(j->spec->arch),
                              .headers = mj_embedded_headers,
                              .n_headers = mj_embedded_headers_len,
                              .timeout_s = 300};
    moejit_status st = mj_nvrtc_compile(&req, out);
    if (st == MOEJIT_OK && !out->canonical_spec) out->canonical_spec = strdup(j->spec->canonical);
    return st;
}

void mj_test_real_job_free(mj_test_real_job *j)
{
    moejit_spec_destroy(j->spec);
    mj_source_free(&j->src);
    mj_buf_free(&j->preimage);
    memset(j, 0, sizeof *j);
}
