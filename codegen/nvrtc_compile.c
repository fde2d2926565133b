/*
 * This file contains the caller's side of an NVRTC compile: the fixed option list, finding
 * and spawning moejit-compile-worker (codegen/compile_worker.c), the request/response
 * exchange under a deadline, turning every way the worker can fail into an error for that
 * one spec, quoting the offending source lines of a failed compile, and NVRTC's identity
 * (version and build id) for the cache key.
 *
 * Why a process and why posix_spawn: NVRTC can crash or hang on some inputs (NVRTC 13.0
 * segfaulted inside nvrtcCompileProgram on a wgmma kernel whose descriptors were constant
 * zero), and the caller is typically a multi-threaded serving process holding a CUDA
 * context, where a bare fork() is unsafe (only the forking thread survives, holding
 * whatever locks the others held). posix_spawn execs at once, so nothing of the caller's
 * state is used in the child.
 */
#include "codegen/nvrtc_compile.h"
#include "codegen/include_closure.h"
#include "codegen/nvrtc_wire.h"
#include "core/settings.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <nvrtc.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/status.h"
#include "core/strbuf.h"

extern char **environ;

#define DEFAULT_TIMEOUT_S 300.0
#define WORKER_NAME "moejit-compile-worker"
/* Worker stderr kept for the error message (an ASan or glibc crash report starts with the
 * useful part; the rest is drained and dropped so the worker never blocks on it). */
#define STDERR_KEEP 2048
/* Offending lines quoted in a compile error: the first few errors are the useful ones. */
#define MAX_EXCERPTS 6
#define EXCERPT_LINE_MAX 160

/* ---- options ------------------------------------------------------------------------- */

void mj_nvrtc_options(const char *arch, mj_buf *buf, const char *opts[], int max_opts,
                      int *n_opts)
{
    /* No -I for the toolkit's include directory: the templates bring their own bf16/fp16
     * conversions (inline PTX), so a compile needs no toolkit header at run time. That
     * keeps compiles fast (cuda_fp16.h/cuda_bf16.h parsing dominates a small compile), lets
     * the library run where only libnvrtc is installed, and keeps the toolkit's header
     * bytes out of the cache key.
     * --no-cache: moejit keeps its own cache, keyed on everything; NVRTC's (>= 12.9, under
     * $HOME/.nv) would only cost time and write into a serving process's home.
     * --ptxas-options=--verbose puts ptxas' resource report into the log (registers, smem,
     * spills: mj_program_parse_resources). -lineinfo lets profilers map SASS to source. */
    static const char *const fixed[] = {"-std=c++17", "--ptxas-options=--verbose", "-lineinfo",
                                        "--no-cache"};
    int n = 0;
    *n_opts = 0;
    if (max_opts < 1) return;
    size_t off = buf->len;
    mj_buf_printf(buf, "--gpu-architecture=%s", arch ? arch : "");
    mj_buf_append(buf, "", 1); /* keep the NUL, so later appends cannot run into it */
    if (!mj_buf_ok(buf)) {
        opts[0] = NULL;
        return;
    }
    if (n < max_opts - 1) opts[n++] = buf->data + off;
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0] && n < max_opts - 1; i++)
        opts[n++] = fixed[i];
    opts[n] = NULL;
    *n_opts = n;
}

/* ---- finding the worker ---------------------------------------------------------------- */

/* NULL when path is an executable file, else why not. */
static const char *not_executable(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) return strerror(errno);
    if (!S_ISREG(st.st_mode)) return "not a regular file";
    if (access(path, X_OK) != 0) return strerror(errno);
    return NULL;
}

/* The worker's installed path, compiled in by the build (make install's LIBEXECDIR). */
#ifndef MJ_WORKER_INSTALL_DIR
#define MJ_WORKER_INSTALL_DIR "/usr/local/libexec"
#endif

/* Appends to places the worker paths relative to `file` (symlinks resolved first): its
 * directory's ../libexec (a build tree or an installed prefix, wherever it was moved) and its
 * own directory (a Python wheel keeps the worker beside the shared library). */
static void beside(const char *file, char **places, int *n, int cap)
{
    char *real = realpath(file, NULL);
    if (!real) return;
    char *slash = strrchr(real, '/');
    if (slash) *slash = '\0'; /* real: the file's folder */
    mj_buf b = MJ_BUF_INIT;
    /* its parent's libexec, spelled without ".." so that the error names the real place */
    char *up = strrchr(real, '/');
    mj_buf_printf(&b, "%.*s/libexec/" WORKER_NAME, up ? (int)(up - real) : 0, real);
    if (*n < cap) places[(*n)++] = mj_buf_take(&b);
    mj_buf_printf(&b, "%s/" WORKER_NAME, real);
    if (*n < cap) places[(*n)++] = mj_buf_take(&b);
    mj_buf_free(&b);
    free(real);
}

/* $MOEJIT_COMPILE_WORKER when set (no fallback: a wrong explicit setting is an error, not
 * something to paper over); else, first found: beside the object holding this code (the
 * shared library, or the executable it is linked into), beside /proc/self/exe (glibc names the
 * main program by argv[0], which may be relative to another directory), then the install
 * location compiled in. The error names every place tried. */
static moejit_status find_worker(const char *given, char **out)
{
    /* The caller's resolved setting, else $MOEJIT_COMPILE_WORKER through the settings table */
    mj_settings *set = calloc(1, sizeof *set);
    if (!set) return mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "compile worker: out of memory");
    moejit_status from_env = MOEJIT_OK;
    if (given && *given) snprintf(set->compile_worker, sizeof set->compile_worker, "%s", given);
    else from_env = mj_settings_resolve_one(MJ_SETTING_COMPILE_WORKER, NULL, NULL, set);
    if (from_env == MOEJIT_OK && set->compile_worker[0]) {
        const char *env = set->compile_worker;
        const char *why = not_executable(env);
        if (!why && (*out = strdup(env))) {
            free(set);
            return MOEJIT_OK;
        }
        from_env = mj_fail(MOEJIT_ERR_IO,
                           "compile worker: compile_worker (MOEJIT_COMPILE_WORKER or moejit_options) %s is not an executable file "
                           "(%s); set it to the path of " WORKER_NAME " or unset it to use the "
                           "one beside the library or installed in " MJ_WORKER_INSTALL_DIR,
                           env, why ? why : "out of memory");
    }
    free(set);
    if (from_env != MOEJIT_OK) return from_env;
    enum { CAP = 5 };
    char *places[CAP] = {0};
    int n = 0;
    Dl_info info;
    union { moejit_status (*fn)(const mj_compile_request *, mj_program *); void *p; } self;
    self.fn = mj_nvrtc_compile;
    if (dladdr(self.p, &info) && info.dli_fname) beside(info.dli_fname, places, &n, CAP);
    beside("/proc/self/exe", places, &n, CAP);
    places[n++] = strdup(MJ_WORKER_INSTALL_DIR "/" WORKER_NAME);
    moejit_status st = MOEJIT_OK;
    *out = NULL;
    for (int i = 0; i < n && !*out; i++)
        if (places[i] && !not_executable(places[i])) {
            *out = places[i];
            places[i] = NULL;
        }
    if (!*out) {
        mj_buf tried = MJ_BUF_INIT;
        for (int i = 0; i < n; i++) {
            int dup = 0;
            for (int j = 0; j < i && places[i]; j++) dup |= places[j] && strcmp(places[i], places[j]) == 0;
            if (places[i] && !dup) mj_buf_printf(&tried, "%s%s", tried.len ? ", " : "", places[i]);
        }
        st = mj_fail(MOEJIT_ERR_IO,
                     "compile worker: no executable " WORKER_NAME "; tried %s; set "
                     "MOEJIT_COMPILE_WORKER to its path",
                     tried.data ? tried.data : "(nothing)");
        mj_buf_free(&tried);
    }
    for (int i = 0; i < n; i++) free(places[i]);
    return st;
}

/* ---- the request ------------------------------------------------------------------------ */

static moejit_status check_request(const mj_compile_request *req)
{
    if (!req || !req->source || !req->source->text || !req->source->name)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "compile request: source, source.text and source.name must be set");
    const mj_source *s = req->source;
    if (strlen(s->text) != s->len || s->len > MJ_WIRE_MAX_STR)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "source.len: %zu, must equal the text's length %zu (at most %u)", s->len,
                       strlen(s->text), MJ_WIRE_MAX_STR);
    if (!req->arch || strncmp(req->arch, "sm_", 3) != 0 || strlen(req->arch) > 16)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "compile request.arch: '%s'; allowed: an NVRTC real arch such as sm_80 "
                       "or sm_90a", req->arch ? req->arch : "(null)");
    if (s->n_kernels < 0 || s->n_kernels > MJ_MAX_KERNELS)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "source.n_kernels: %d; allowed: 0..%d",
                       s->n_kernels, MJ_MAX_KERNELS);
    for (int i = 0; i < s->n_kernels; i++)
        if (!s->kernel_names[i] || !*s->kernel_names[i] ||
            strlen(s->kernel_names[i]) >= MJ_KERNEL_NAME_MAX)
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                           "source.kernel_names[%d]: must be 1..%d characters", i,
                           MJ_KERNEL_NAME_MAX - 1);
    if (req->n_headers > MJ_WIRE_MAX_COUNT || (req->n_headers && !req->headers))
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "compile request.headers: NULL with n_headers %zu (at most %u)",
                       req->n_headers, MJ_WIRE_MAX_COUNT);
    for (size_t i = 0; i < req->n_headers; i++)
        if (!req->headers[i].name || !req->headers[i].data ||
            req->headers[i].size > MJ_WIRE_MAX_STR)
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                           "compile request.headers[%zu]: name and data must be set", i);
    return MOEJIT_OK;
}

/* The request on the wire. Only the headers in the source's include closure go to NVRTC, the
 * ones the cache key hashes: a header the closure missed fails the compile instead of
 * entering the binary unkeyed. */
static moejit_status encode_request(const mj_compile_request *req, mj_buf *b)
{
    unsigned char *reached = malloc(req->n_headers ? req->n_headers : 1);
    if (!reached) return mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "compile request: out of memory");
    moejit_status st = mj_include_closure(req->source->text, req->source->len, req->headers,
                                          req->n_headers, reached);
    if (st != MOEJIT_OK) {
        free(reached);
        return st;
    }
    uint32_t n_reached = 0;
    for (size_t i = 0; i < req->n_headers; i++) n_reached += reached[i];
    const char *opts[16];
    int n_opts = 0;
    mj_buf optbuf = MJ_BUF_INIT;
    mj_nvrtc_options(req->arch, &optbuf, opts, 16, &n_opts);
    mj_buf_append(b, MJ_WIRE_REQUEST_MAGIC, 4);
    mj_wire_put_u32(b, MJ_WIRE_VERSION);
    mj_wire_put_str(b, req->source->name, strlen(req->source->name));
    mj_wire_put_str(b, req->source->text, req->source->len);
    mj_wire_put_u32(b, (uint32_t)n_opts);
    for (int i = 0; i < n_opts; i++) mj_wire_put_str(b, opts[i], strlen(opts[i]));
    mj_wire_put_u32(b, n_reached);
    for (size_t i = 0; i < req->n_headers; i++) {
        if (!reached[i]) continue;
        mj_wire_put_str(b, req->headers[i].name, strlen(req->headers[i].name));
        mj_wire_put_str(b, req->headers[i].data, req->headers[i].size);
    }
    mj_wire_put_u32(b, (uint32_t)req->source->n_kernels);
    for (int i = 0; i < req->source->n_kernels; i++)
        mj_wire_put_str(b, req->source->kernel_names[i], strlen(req->source->kernel_names[i]));
    int ok = mj_buf_ok(&optbuf) && n_opts > 0 && mj_buf_ok(b);
    mj_buf_free(&optbuf);
    free(reached);
    return ok ? MOEJIT_OK : mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "compile request: out of memory");
}

/* ---- the worker process ------------------------------------------------------------------ */

typedef struct worker {
    pid_t pid;
    int sock;             /* parent's end of the socketpair: request out, response in */
    int err;              /* read end of the worker's stderr pipe */
    mj_buf response;
    mj_buf stderr_text;   /* the first STDERR_KEEP bytes */
    int timed_out;
    int status;           /* waitpid status, valid when reaped */
    int reaped;
} worker;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void close_fd(int *fd)
{
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

/* Moves fd to a number >= 3. A daemon may run with stdin/stdout/stderr closed, and then
 * a new fd could be 0..2 and be overwritten by the dup2s that set up the worker's stdio. */
static int lift(int *fd)
{
    if (*fd >= 3) return 0;
    int n = fcntl(*fd, F_DUPFD_CLOEXEC, 3);
    if (n < 0) return -1;
    close(*fd);
    *fd = n;
    return 0;
}

static moejit_status spawn_worker(const char *path, worker *w)
{
    int sv[2] = {-1, -1}, ep[2] = {-1, -1};
    /* CLOEXEC so that a concurrent spawn on another thread never inherits these fds. */
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0 || pipe2(ep, O_CLOEXEC) != 0 ||
        lift(&sv[0]) || lift(&sv[1]) || lift(&ep[0]) || lift(&ep[1])) {
        int e = errno;
        for (int i = 0; i < 2; i++) {
            close_fd(&sv[i]);
            close_fd(&ep[i]);
        }
        return mj_fail(MOEJIT_ERR_IO, "compile worker: socketpair/pipe failed: %s", strerror(e));
    }
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&at);
    posix_spawn_file_actions_adddup2(&fa, sv[1], 0);
    posix_spawn_file_actions_adddup2(&fa, sv[1], 1);
    posix_spawn_file_actions_adddup2(&fa, ep[1], 2);
    posix_spawn_file_actions_addclosefrom_np(&fa, 3);
    /* The worker starts with default signal handling and nothing blocked, whatever the
     * calling thread had (a blocked SIGSEGV would otherwise turn a crash into a hang). */
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    sigdelset(&all, SIGKILL);
    sigdelset(&all, SIGSTOP);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &all);
    /* Its own process group (pgid = its pid), so that a timeout or cancel kills whatever it
     * started too; it learns our pid to die with us (PR_SET_PDEATHSIG, in the worker). */
    posix_spawnattr_setpgroup(&at, 0);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
    char parent[32];
    snprintf(parent, sizeof parent, "--parent=%ld", (long)getpid());
    char *argv[] = {(char *)path, parent, NULL};
    int rc = posix_spawn(&w->pid, path, &fa, &at, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    close_fd(&sv[1]);
    close_fd(&ep[1]);
    if (rc != 0) {
        close_fd(&sv[0]);
        close_fd(&ep[0]);
        return mj_fail(MOEJIT_ERR_IO, "compile worker %s: posix_spawn failed: %s", path,
                       strerror(rc));
    }
    w->sock = sv[0];
    w->err = ep[0];
    /* Only the parent's ends are non-blocking (the worker reads and writes blocking). */
    fcntl(w->sock, F_SETFL, fcntl(w->sock, F_GETFL) | O_NONBLOCK);
    fcntl(w->err, F_SETFL, fcntl(w->err, F_GETFL) | O_NONBLOCK);
    return MOEJIT_OK;
}

/* Drains fd into b (keeping at most `keep` bytes); closes it at EOF or on an error. */
static void drain(int *fd, mj_buf *b, size_t keep)
{
    char chunk[65536];
    for (;;) {
        ssize_t r = read(*fd, chunk, sizeof chunk);
        if (r > 0) {
            size_t room = b->len < keep ? keep - b->len : 0;
            mj_buf_append(b, chunk, (size_t)r < room ? (size_t)r : room);
            continue;
        }
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        close_fd(fd); /* EOF, or ECONNRESET from a dead worker */
        return;
    }
}

/* Sends the request and reads the response and stderr until both reach EOF or the
 * deadline passes. The worker dying early shows as EOF here and in waitpid. */
static moejit_status exchange(worker *w, const mj_buf *request, double deadline)
{
    size_t sent = 0;
    const size_t max_response = 2 * (size_t)MJ_WIRE_MAX_STR + 64;
    while (w->sock >= 0 || w->err >= 0) {
        double left = deadline - now_s();
        if (left <= 0) {
            w->timed_out = 1;
            return MOEJIT_OK;
        }
        struct pollfd fds[2];
        int n = 0, isock = -1, ierr = -1;
        if (w->sock >= 0) {
            isock = n;
            fds[n++] = (struct pollfd){w->sock, (short)(POLLIN | (sent < request->len ? POLLOUT : 0)), 0};
        }
        if (w->err >= 0) {
            ierr = n;
            fds[n++] = (struct pollfd){w->err, POLLIN, 0};
        }
        double ms = left * 1000.0 + 1.0;
        int r = poll(fds, (nfds_t)n, ms > INT_MAX ? INT_MAX : (int)ms);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return mj_fail(MOEJIT_ERR_IO, "compile worker: poll failed: %s", strerror(errno));
        if (isock >= 0 && (fds[isock].revents & POLLOUT) && sent < request->len) {
            /* MSG_NOSIGNAL: a worker that died must not kill the caller with SIGPIPE. */
            ssize_t s = send(w->sock, request->data + sent, request->len - sent,
                             MSG_NOSIGNAL | MSG_DONTWAIT);
            if (s > 0) sent += (size_t)s;
            else if (s < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                sent = request->len; /* the worker is gone; waitpid says how */
            if (sent == request->len) shutdown(w->sock, SHUT_WR);
        }
        if (isock >= 0 && (fds[isock].revents & (POLLIN | POLLHUP | POLLERR))) {
            drain(&w->sock, &w->response, max_response + 1);
            if (w->response.len > max_response) {
                close_fd(&w->sock);
                return mj_fail(MOEJIT_ERR_COMPILE, "compile worker: response longer than %zu bytes",
                               max_response);
            }
        }
        if (ierr >= 0 && (fds[ierr].revents & (POLLIN | POLLHUP | POLLERR)))
            drain(&w->err, &w->stderr_text, STDERR_KEEP);
    }
    return MOEJIT_OK;
}

/* Reaps the worker, killing it at the deadline (or at once when `kill_now`). Always
 * leaves no child behind. */
static void reap(worker *w, double deadline, int kill_now)
{
    /* The whole group: the worker and anything it started. */
    if (kill_now) kill(-w->pid, SIGKILL);
    for (;;) {
        /* WNOWAIT: the exited worker stays a zombie, holding its pid and so its group id, while
         * the group's leftovers are killed; only then is it reaped. */
        siginfo_t si;
        memset(&si, 0, sizeof si);
        int r = waitid(P_PID, (id_t)w->pid, &si, WEXITED | WNOWAIT | (kill_now ? 0 : WNOHANG));
        if (r == 0 && si.si_pid == w->pid) {
            kill(-w->pid, SIGKILL);
            while (waitpid(w->pid, &w->status, 0) < 0 && errno == EINTR) {}
            break;
        }
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) { /* ECHILD: the caller ignores SIGCHLD, so the kernel reaped it */
            w->status = 0;
            break;
        }
        if (kill_now) continue;
        if (now_s() >= deadline) {
            w->timed_out = 1;
            kill(-w->pid, SIGKILL);
            kill_now = 1;
            continue;
        }
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    w->reaped = 1;
}

/* ---- the response ---------------------------------------------------------------------- */

typedef struct response {
    int32_t result;
    const char *log;
    uint32_t log_len;
    const uint8_t *cubin;
    uint32_t cubin_len;
} response;

static int get_u32(const unsigned char **p, const unsigned char *end, uint32_t *v)
{
    if (end - *p < 4) return -1;
    const unsigned char *c = *p;
    *v = (uint32_t)c[0] | (uint32_t)c[1] << 8 | (uint32_t)c[2] << 16 | (uint32_t)c[3] << 24;
    *p += 4;
    return 0;
}

static int get_str(const unsigned char **p, const unsigned char *end, const void **s, uint32_t *n)
{
    if (get_u32(p, end, n) || (size_t)(end - *p) < *n) return -1;
    *s = *p;
    *p += *n;
    return 0;
}

/* Returns NULL or what is wrong with the response. */
static const char *decode_response(const mj_buf *b, response *r)
{
    const unsigned char *p = (const unsigned char *)b->data, *end = p + b->len;
    uint32_t version, result;
    const void *log, *cubin;
    if (b->len == 0) return "no response (the worker closed its output without answering)";
    if (b->len < 8 || memcmp(p, MJ_WIRE_RESPONSE_MAGIC, 4) != 0) return "bad magic";
    p += 4;
    if (get_u32(&p, end, &version) || version != MJ_WIRE_VERSION) return "unknown protocol version";
    if (get_u32(&p, end, &result) || get_str(&p, end, &log, &r->log_len) ||
        get_str(&p, end, &cubin, &r->cubin_len))
        return "truncated";
    if (p != end) return "trailing bytes";
    r->result = (int32_t)result;
    r->log = log;
    r->cubin = cubin;
    if (r->result == NVRTC_SUCCESS && r->cubin_len == 0) return "success without a cubin";
    return NULL;
}

/* ---- compile errors with the offending lines ------------------------------------------------ */

/* The text of the file NVRTC calls `name` (the program or a header), or NULL. */
static const char *file_text(const mj_compile_request *req, const char *name, size_t len)
{
    if (strlen(req->source->name) == len && memcmp(req->source->name, name, len) == 0)
        return req->source->text;
    for (size_t i = 0; i < req->n_headers; i++)
        if (strlen(req->headers[i].name) == len && memcmp(req->headers[i].name, name, len) == 0)
            return req->headers[i].data;
    return NULL;
}

/* Appends lines line-2 .. line+1 of text, the referenced one marked with '>'. */
static void append_excerpt(mj_buf *b, const char *text, long line)
{
    long no = 1;
    for (const char *s = text; *s && no <= line + 1; no++) {
        const char *e = strchr(s, '\n');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        if (no >= line - 2)
            mj_buf_printf(b, "  %c %5ld | %.*s%s\n", no == line ? '>' : ' ', no,
                          (int)(n > EXCERPT_LINE_MAX ? EXCERPT_LINE_MAX : n), s,
                          n > EXCERPT_LINE_MAX ? " ..." : "");
        if (!e) break;
        s = e + 1;
    }
}

/* For each "<file>(<line>): ...error..." line of the log, the error and the lines around
 * it, from the program source or the header of that name (NVRTC's own log shows one line
 * with a caret; the context usually says more, e.g. which specialisation constant). */
static void append_offending_lines(mj_buf *b, const mj_compile_request *req, const char *log)
{
    int shown = 0;
    for (const char *l = log; *l && shown < MAX_EXCERPTS;) {
        const char *e = strchr(l, '\n');
        size_t n = e ? (size_t)(e - l) : strlen(l);
        const char *close = memmem(l, n, "): ", 3);
        const char *open = close;
        while (open && open > l && open[-1] >= '0' && open[-1] <= '9') open--;
        if (close && open > l + 1 && open < close && open[-1] == '(' &&
            memmem(close, n - (size_t)(close - l), "error", 5)) {
            const char *text = file_text(req, l, (size_t)(open - 1 - l));
            long line = strtol(open, NULL, 10);
            if (text && line > 0) {
                mj_buf_printf(b, "%.*s\n", (int)n, l);
                append_excerpt(b, text, line);
                shown++;
            }
        }
        l = e ? e + 1 : l + n;
    }
}

static moejit_status compile_error(const mj_compile_request *req, const response *r)
{
    mj_buf b = MJ_BUF_INIT;
    mj_buf_printf(&b, "compile %s for %s: %s (NVRTC result %d)\n", req->source->name, req->arch,
                  nvrtcGetErrorString((nvrtcResult)r->result), (int)r->result);
    char *log = strndup(r->log, r->log_len);
    if (log) {
        /* The quoted lines come first: the message is cut at MJ_ERROR_MAX, and the full log
         * is in mj_program.log anyway. */
        append_offending_lines(&b, req, log);
        mj_buf_printf(&b, "NVRTC log:\n%s", log);
    }
    free(log);
    moejit_status st = mj_fail(MOEJIT_ERR_COMPILE, "%s", b.data ? b.data : "compile failed");
    mj_buf_free(&b);
    return st;
}

/* The error for a worker that did not answer properly, with what it wrote on stderr. */
static moejit_status worker_error(const mj_compile_request *req, const worker *w,
                                  double timeout, const char *malformed)
{
    const char *name = req->source->name, *arch = req->arch;
    const char *err = w->stderr_text.len ? w->stderr_text.data : "";
    const char *sep = w->stderr_text.len ? "; worker stderr:\n" : "";
    if (w->timed_out)
        return mj_fail(MOEJIT_ERR_COMPILE, "compile %s for %s: timed out after %g s (worker killed)%s%s",
                       name, arch, timeout, sep, err);
    if (WIFSIGNALED(w->status)) {
        int sig = WTERMSIG(w->status);
        const char *abbrev = sigabbrev_np(sig);
        return mj_fail(MOEJIT_ERR_COMPILE,
                       "NVRTC worker crashed with signal %d (SIG%s) compiling %s for %s%s%s", sig,
                       abbrev ? abbrev : "?", name, arch, sep, err);
    }
    if (WIFEXITED(w->status) && WEXITSTATUS(w->status) != 0)
        return mj_fail(MOEJIT_ERR_COMPILE,
                       "NVRTC worker exited with status %d compiling %s for %s%s%s",
                       WEXITSTATUS(w->status), name, arch, sep, err);
    return mj_fail(MOEJIT_ERR_COMPILE,
                   "compile %s for %s: malformed response from the NVRTC worker: %s%s%s", name,
                   arch, malformed, sep, err);
}

/* ---- compile ---------------------------------------------------------------------------- */

static moejit_status fill_program(const mj_compile_request *req, const response *r,
                                  mj_program *out)
{
    out->arch = strdup(req->arch);
    out->cubin = malloc(r->cubin_len);
    if (!out->arch || !out->cubin || !out->log)
        return mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "compile %s: out of memory", req->source->name);
    memcpy(out->cubin, r->cubin, r->cubin_len);
    out->cubin_len = r->cubin_len;
    out->n_kernels = req->source->n_kernels;
    for (int i = 0; i < out->n_kernels; i++)
        snprintf(out->kernels[i].name, sizeof out->kernels[i].name, "%s",
                 req->source->kernel_names[i]);
    mj_program_parse_resources(out);
    return MOEJIT_OK;
}

moejit_status mj_nvrtc_compile(const mj_compile_request *req, mj_program *out)
{
    double t0 = now_s();
    if (!out) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "compile: out must not be NULL");
    memset(out, 0, sizeof *out);
    moejit_status st = check_request(req);
    if (st != MOEJIT_OK) return st;
    double timeout = req->timeout_s > 0 ? req->timeout_s : DEFAULT_TIMEOUT_S;

    mj_buf request = MJ_BUF_INIT;
    char *path = NULL;
    worker w = {.pid = -1, .sock = -1, .err = -1, .response = MJ_BUF_INIT,
                .stderr_text = MJ_BUF_INIT};
    if ((st = encode_request(req, &request)) != MOEJIT_OK) goto done;
    if ((st = find_worker(req->worker, &path)) != MOEJIT_OK) goto done;
    if ((st = spawn_worker(path, &w)) != MOEJIT_OK) goto done;

    double deadline = t0 + timeout;
    st = exchange(&w, &request, deadline);
    reap(&w, deadline, w.timed_out || st != MOEJIT_OK);
    if (st != MOEJIT_OK) goto done;
    if (!mj_buf_ok(&w.response)) {
        st = mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "compile %s: out of memory reading the response",
                     req->source->name);
        goto done;
    }

    response r;
    const char *malformed = NULL;
    if (w.timed_out || !WIFEXITED(w.status) || WEXITSTATUS(w.status) != 0 ||
        (malformed = decode_response(&w.response, &r))) {
        st = worker_error(req, &w, timeout, malformed ? malformed : "");
        goto done;
    }
    /* From here the worker answered: the log is the caller's whatever NVRTC said. */
    if (!(out->log = strndup(r.log, r.log_len))) {
        st = mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "compile %s: out of memory", req->source->name);
        goto done;
    }
    if (r.result != NVRTC_SUCCESS) {
        st = compile_error(req, &r);
        goto done;
    }
    st = fill_program(req, &r, out);
    out->compile_seconds = now_s() - t0;

done:
    if (w.pid > 0 && !w.reaped) reap(&w, 0, 1);
    close_fd(&w.sock);
    close_fd(&w.err);
    mj_buf_free(&w.response);
    mj_buf_free(&w.stderr_text);
    mj_buf_free(&request);
    free(path);
    if (st != MOEJIT_OK) {
        /* On failure only the log survives (for the caller to show or store). */
        char *log = out->log;
        out->log = NULL;
        mj_program_free(out);
        out->log = log;
    }
    return st;
}

/* ---- identity ------------------------------------------------------------------------------ */

/* dl_iterate_phdr callback: the NT_GNU_BUILD_ID note of the loaded libnvrtc, as hex. */
static int find_build_id(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    char *hex = data;
    const char *base = strrchr(info->dlpi_name, '/');
    base = base ? base + 1 : info->dlpi_name;
    /* "libnvrtc.so.13", not "libnvrtc-builtins.so.13.0" (NVRTC loads that one itself). */
    if (strncmp(base, "libnvrtc.", 9) != 0) return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE) continue;
        size_t align = ph->p_align == 8 ? 8 : 4;
        const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;
        while ((size_t)(end - p) >= sizeof(ElfW(Nhdr))) {
            const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
            const char *name = p + sizeof *nh;
            const unsigned char *desc =
                (const unsigned char *)name + ((nh->n_namesz + align - 1) & ~(align - 1));
            const char *next = (const char *)desc + ((nh->n_descsz + align - 1) & ~(align - 1));
            if (next > end || next <= p) break;
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && memcmp(name, "GNU", 4) == 0 &&
                nh->n_descsz > 0 && nh->n_descsz <= 20) {
                for (size_t k = 0; k < nh->n_descsz; k++) sprintf(hex + 2 * k, "%02x", desc[k]);
                return 1;
            }
            p = next;
        }
    }
    return 1; /* libnvrtc without a build id: "unknown" */
}

/* NVRTC's identity cannot change within a process (the library is loaded once), so it is
 * read once: walking every loaded object's notes on each key would cost a disk-cache load
 * tens of microseconds. */
static struct {
    pthread_once_t once;
    nvrtcResult result;
    int major, minor;
    char build_id[41];
} g_identity = {PTHREAD_ONCE_INIT, NVRTC_SUCCESS, 0, 0, ""};

static void read_identity(void)
{
    g_identity.result = nvrtcVersion(&g_identity.major, &g_identity.minor);
    char hex[41] = "";
    dl_iterate_phdr(find_build_id, hex);
    snprintf(g_identity.build_id, sizeof g_identity.build_id, "%s", hex[0] ? hex : "unknown");
}

moejit_status mj_nvrtc_identity(int *major, int *minor, char build_id[41])
{
    if (!major || !minor || !build_id)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "nvrtc identity: outputs must not be NULL");
    pthread_once(&g_identity.once, read_identity);
    if (g_identity.result != NVRTC_SUCCESS)
        return mj_fail(MOEJIT_ERR_COMPILE, "nvrtcVersion failed: %s",
                       nvrtcGetErrorString(g_identity.result));
    *major = g_identity.major;
    *minor = g_identity.minor;
    memcpy(build_id, g_identity.build_id, 41);
    return MOEJIT_OK;
}
