/*
 * This file contains warm's worker pool (warm_pool.h): forking the workers, the job and
 * result pipes, one compile per job through the cache's single-flight path, and the
 * failed/ folder that keeps what a failed compile was given and said.
 */
#include "tools/warm_pool.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "codegen/build_inputs.h"
#include "cache/cache.h"
#include "tools/cli.h"
#include "cache/dirs.h"
#include "codegen/nvrtc_compile.h"
#include "core/status.h"

/* Longest error message sent back per job: the first lines of a compile error are the
 * useful ones, and the whole log is in failed/<key>/log.txt. */
#define MSG_MAX 4096
#define TICK_MS 200

/* One result on a worker's result pipe, followed by msg_len + dir_len bytes. */
typedef struct wire_result {
    int32_t job, status, present, pad;
    double seconds;
    uint32_t msg_len, dir_len;
} wire_result;

static int read_full(int fd, void *p, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (char *)p + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return 0;
        got += (size_t)r;
    }
    return 1;
}

static int write_full(int fd, const void *p, size_t n)
{
    size_t put = 0;
    while (put < n) {
        ssize_t w = write(fd, (const char *)p + put, n - put);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return 0;
        put += (size_t)w;
    }
    return 1;
}

/* ---- the worker side -------------------------------------------------------------------- */

typedef struct build_ctx {
    const mj_build_inputs *in;
    const char *canonical;
    double timeout_s;
    char *log;            /* NVRTC's log of a failed compile (owned) */
} build_ctx;

static moejit_status build(void *arg, mj_program *out)
{
    build_ctx *b = arg;
    mj_compile_request req = {
        .source = &b->in->source,
        .arch = b->in->arch,
        .headers = mj_embedded_headers,
        .n_headers = mj_embedded_headers_len,
        .timeout_s = b->timeout_s,
    };
    moejit_status st = mj_nvrtc_compile(&req, out);
    if (st == MOEJIT_OK && !out->canonical_spec && !(out->canonical_spec = strdup(b->canonical)))
        st = mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "warm: out of memory");
    if (st != MOEJIT_OK && out->log && !b->log) b->log = strdup(out->log);
    return st;
}

moejit_status cli_compile_cached(mj_cache *cache, const mj_build_inputs *in, const char *canonical,
                                 double timeout_s, mj_program *out, int *hit, char **failed_log)
{
    build_ctx b = {in, canonical, timeout_s, NULL};
    moejit_status st = mj_cache_get_or_build(cache, &in->key, in->preimage.data ? in->preimage.data : "", canonical,
                                             build, &b, out, hit);
    if (st == MOEJIT_OK || !failed_log) free(b.log);
    else *failed_log = b.log;
    return st;
}

static int write_text(const char *dir, const char *name, const char *a, const char *b)
{
    char path[MJ_CACHE_PATH_MAX + 200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return 0;
    int ok = write_full(fd, a, strlen(a)) && (!b || write_full(fd, b, strlen(b)));
    return close(fd) == 0 && ok;
}

static void failed_path(const mj_cache_config *cfg, const char *key, char *out, size_t cap)
{
    snprintf(out, cap, "%s/failed/%s", cfg->dir, key);
}

/* Keeps spec, source, options and log of a failed compile in <cache>/failed/<key>/. */
static int keep_failure(const mj_cache_config *cfg, const mj_build_inputs *in, const char *canonical,
                        const char *log, const char *message, char *dir, size_t cap)
{
    char top[MJ_CACHE_PATH_MAX + 16];
    snprintf(top, sizeof top, "%s/failed", cfg->dir);
    failed_path(cfg, in->key.hex, dir, cap);
    if (mj_cache_ensure_dir(top, "failed dir", cfg->shared, NULL) != MOEJIT_OK ||
        mj_cache_ensure_dir(dir, "failed dir", cfg->shared, NULL) != MOEJIT_OK)
        return 0;
    mj_buf opts = MJ_BUF_INIT;
    for (int i = 0; i < in->n_options; i++) mj_buf_printf(&opts, "%s\n", in->options[i]);
    mj_buf logb = MJ_BUF_INIT;
    mj_buf_printf(&logb, "%s%s--- error ---\n%s\n", log ? log : "", log && *log ? "\n" : "", message);
    int ok = write_text(dir, "spec.txt", canonical, "\n") && write_text(dir, "source.cu", in->source.text, NULL) &&
             write_text(dir, "options.txt", opts.data ? opts.data : "", NULL) &&
             write_text(dir, "log.txt", logb.data ? logb.data : message, NULL);
    mj_buf_free(&opts);
    mj_buf_free(&logb);
    return ok;
}

/* A compile that succeeds now makes an earlier failure's folder stale. */
static void forget_failure(const mj_cache_config *cfg, const char *key)
{
    static const char *const files[] = {"spec.txt", "source.cu", "options.txt", "log.txt"};
    char dir[MJ_CACHE_PATH_MAX + 96], path[MJ_CACHE_PATH_MAX + 128];
    failed_path(cfg, key, dir, sizeof dir);
    if (access(dir, F_OK) != 0) return;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
}

static void send_result(int fd, int job, moejit_status st, int present, double seconds, const char *msg,
                        const char *dir)
{
    wire_result r = {job, (int32_t)st, present, 0, seconds, 0, 0};
    size_t ml = strlen(msg), dl = strlen(dir);
    r.msg_len = (uint32_t)(ml > MSG_MAX ? MSG_MAX : ml);
    r.dir_len = (uint32_t)dl;
    if (!write_full(fd, &r, sizeof r) || !write_full(fd, msg, r.msg_len) || !write_full(fd, dir, dl)) _exit(3);
}

static void run_job(mj_cache *cache, moejit_status open_st, const char *open_msg, const warm_job *job, int idx,
                    double timeout_s, int res_fd)
{
    double t0 = cli_now();
    if (open_st != MOEJIT_OK) {
        send_result(res_fd, idx, open_st, 0, 0, open_msg, "");
        return;
    }
    mj_build_inputs in;
    moejit_status st =
        mj_build_inputs_make_module(job->spec, job->module, mj_embedded_headers, mj_embedded_headers_len, &in);
    if (st != MOEJIT_OK) {
        send_result(res_fd, idx, st, 0, cli_now() - t0, moejit_last_error(), "");
        return;
    }
    const char *canonical = moejit_spec_canonical(job->spec);
    char *log = NULL;
    mj_program prog;
    memset(&prog, 0, sizeof prog);
    int hit = 0;
    char dir[MJ_CACHE_PATH_MAX + 96] = "";
    if (strcmp(in.key.hex, job->key) != 0)
        st = mj_fail(MOEJIT_ERR_INTERNAL, "warm: the key of %s changed between planning (%s) and compiling (%s)",
                     canonical, job->key, in.key.hex);
    else
        st = cli_compile_cached(cache, &in, canonical, timeout_s, &prog, &hit, &log);
    const mj_cache_config *cfg = mj_cache_get_config(cache);
    char msg[MSG_MAX + 1] = "";
    if (st != MOEJIT_OK) {
        snprintf(msg, sizeof msg, "%s", moejit_last_error());
        if (!keep_failure(cfg, &in, canonical, log, msg, dir, sizeof dir)) dir[0] = '\0';
    } else {
        forget_failure(cfg, in.key.hex);
    }
    mj_program_free(&prog);
    free(log);
    mj_build_inputs_free(&in);
    send_result(res_fd, idx, st, hit, cli_now() - t0, msg, dir);
}

static void worker_main(const warm_job *jobs, int n_jobs, int job_fd, int res_fd, double timeout_s)
{
    mj_cache *cache = NULL;
    moejit_status open_st = mj_cache_open(NULL, &cache);
    char open_msg[MSG_MAX];
    snprintf(open_msg, sizeof open_msg, "%s", open_st == MOEJIT_OK ? "" : moejit_last_error());
    uint32_t idx;
    while (read_full(job_fd, &idx, sizeof idx)) {
        if (idx >= (uint32_t)n_jobs) _exit(4);
        run_job(cache, open_st, open_msg, &jobs[idx], (int)idx, timeout_s, res_fd);
    }
    mj_cache_close(cache);
    _exit(0);
}

/* ---- the parent side -------------------------------------------------------------------- */

typedef struct worker {
    pid_t pid;
    int job_fd;   /* write end: job indices */
    int res_fd;   /* read end: results */
    int job;      /* the job it is working on, or -1 */
    int alive;
} worker;

static void describe_exit(pid_t pid, char *out, size_t cap)
{
    int status = 0;
    pid_t r;
    while ((r = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {}
    if (r != pid) snprintf(out, cap, "exited (status unknown)");
    else if (WIFSIGNALED(status)) snprintf(out, cap, "was killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else snprintf(out, cap, "exited with status %d", WEXITSTATUS(status));
}

static int start_workers(worker *w, int n, const warm_job *jobs, int n_jobs, double timeout_s)
{
    int started = 0;
    for (int i = 0; i < n; i++) {
        int jp[2], rp[2];
        w[i].alive = 0;
        w[i].job = -1;
        if (pipe2(jp, O_CLOEXEC) != 0) break;
        if (pipe2(rp, O_CLOEXEC) != 0) {
            close(jp[0]);
            close(jp[1]);
            break;
        }
        fflush(NULL); /* nothing buffered may be written twice */
        pid_t pid = fork();
        if (pid < 0) {
            close(jp[0]), close(jp[1]), close(rp[0]), close(rp[1]);
            break;
        }
        if (pid == 0) {
            /* The other workers' pipe ends must close, or their EOF never comes. */
            for (int j = 0; j < i; j++) {
                if (w[j].alive) close(w[j].job_fd), close(w[j].res_fd);
            }
            close(jp[1]);
            close(rp[0]);
            signal(SIGPIPE, SIG_DFL);
            worker_main(jobs, n_jobs, jp[0], rp[1], timeout_s);
        }
        close(jp[0]);
        close(rp[1]);
        w[i] = (worker){pid, jp[1], rp[0], -1, 1};
        started++;
    }
    return started;
}

static int dispatch(worker *wk, int *next, int n_jobs)
{
    if (*next >= n_jobs) return 0;
    uint32_t idx = (uint32_t)*next;
    if (!write_full(wk->job_fd, &idx, sizeof idx)) return 0;
    wk->job = (*next)++;
    return 1;
}

static void fail_job(int job, const char *msg, warm_result_fn on_result, void *ctx)
{
    warm_result r = {job, MOEJIT_ERR_IO, 0, 0, msg, ""};
    on_result(ctx, &r);
}

moejit_status warm_pool_run(const warm_job *jobs, int n_jobs, int n_workers, double timeout_s,
                            warm_result_fn on_result, warm_tick_fn on_tick, void *ctx)
{
    if (n_jobs <= 0) return MOEJIT_OK;
    if (n_workers > n_jobs) n_workers = n_jobs;
    if (n_workers < 1) n_workers = 1;
    worker *w = calloc((size_t)n_workers, sizeof *w);
    struct pollfd *pfd = calloc((size_t)n_workers, sizeof *pfd);
    int *slot = calloc((size_t)n_workers, sizeof *slot);
    char *msg = malloc(MSG_MAX + MJ_CACHE_PATH_MAX + 2);
    if (!w || !pfd || !slot || !msg) {
        free(w), free(pfd), free(slot), free(msg);
        return mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "warm: out of memory");
    }
    struct sigaction ign = {.sa_handler = SIG_IGN}, old;
    sigemptyset(&ign.sa_mask);
    sigaction(SIGPIPE, &ign, &old); /* a dead worker's pipe is an error to handle, not a signal */

    int started = start_workers(w, n_workers, jobs, n_jobs, timeout_s);
    if (started == 0) {
        sigaction(SIGPIPE, &old, NULL);
        free(w), free(pfd), free(slot), free(msg);
        return mj_fail(MOEJIT_ERR_IO, "warm: cannot start a worker process: %s", strerror(errno));
    }
    int next = 0, done = 0;
    for (int i = 0; i < started; i++) dispatch(&w[i], &next, n_jobs);

    while (done < n_jobs) {
        int np = 0;
        for (int i = 0; i < started; i++)
            if (w[i].alive && w[i].job >= 0) {
                pfd[np] = (struct pollfd){w[i].res_fd, POLLIN, 0};
                slot[np++] = i;
            }
        if (np == 0) {
            /* Every worker died: what was never handed out fails. */
            for (; next < n_jobs; next++, done++)
                fail_job(next, "warm: no worker process left to compile this spec", on_result, ctx);
            break;
        }
        int r = poll(pfd, (nfds_t)np, on_tick ? TICK_MS : -1);
        if (r < 0 && errno != EINTR) break;
        if (on_tick) on_tick(ctx);
        if (r <= 0) continue;
        for (int p = 0; p < np; p++) {
            if (!pfd[p].revents) continue;
            worker *wk = &w[slot[p]];
            wire_result h;
            if (!read_full(wk->res_fd, &h, sizeof h) || h.msg_len > MSG_MAX || h.dir_len > MJ_CACHE_PATH_MAX ||
                !read_full(wk->res_fd, msg, h.msg_len + h.dir_len) || h.job != wk->job) {
                char how[160], text[256];
                describe_exit(wk->pid, how, sizeof how);
                snprintf(text, sizeof text, "warm: worker process %d %s while compiling this spec", (int)wk->pid, how);
                close(wk->job_fd);
                close(wk->res_fd);
                wk->alive = 0;
                fail_job(wk->job, text, on_result, ctx);
                wk->job = -1;
                done++;
                continue;
            }
            msg[h.msg_len + h.dir_len] = '\0';
            char dir[MJ_CACHE_PATH_MAX + 1];
            memcpy(dir, msg + h.msg_len, h.dir_len);
            dir[h.dir_len] = '\0';
            msg[h.msg_len] = '\0';
            warm_result res = {h.job, (moejit_status)h.status, h.present, h.seconds, msg, dir};
            wk->job = -1;
            done++;
            on_result(ctx, &res);
            dispatch(wk, &next, n_jobs);
        }
    }
    for (int i = 0; i < started; i++) {
        if (!w[i].alive) continue;
        close(w[i].job_fd); /* EOF: the worker exits */
        close(w[i].res_fd);
        char how[160];
        describe_exit(w[i].pid, how, sizeof how);
    }
    sigaction(SIGPIPE, &old, NULL);
    free(w), free(pfd), free(slot), free(msg);
    return MOEJIT_OK;
}
