/*
 * This file contains moejit-compile-worker, the process that runs one NVRTC compile for
 * mj_nvrtc_compile (codegen/nvrtc_compile.c): it reads one request from stdin, compiles it, writes
 * one response to stdout and exits. The wire format is the grammar in codegen/nvrtc_wire.h.
 *
 * NVRTC runs here and not in the caller because it can crash or hang on some inputs; the
 * caller sees that as this process dying or being killed, never as its own death.
 *
 * Exit status: 0 when a response was written (whatever NVRTC said), 2 for a malformed
 * request, 3 when the response could not be written, 4 when memory ran out.
 *
 * Test hooks, read from the environment (for tests/check_nvrtc.c; nothing else sets them):
 *   MOEJIT_WORKER_FAULT=crash    raise SIGSEGV after reading the request
 *   MOEJIT_WORKER_FAULT=hang     sleep forever after reading the request
 *   MOEJIT_WORKER_FAULT=hang-child  start a child that sleeps forever, then hang (a worker's
 *                                own children must die with it)
 *   MOEJIT_WORKER_FAULT=garbage  write a malformed response and exit 0
 */
#include <errno.h>
#include <nvrtc.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "codegen/nvrtc_compile.h"
#include "codegen/nvrtc_wire.h"
#include "core/strbuf.h"

typedef struct blob {
    char *data; /* NUL-terminated copy */
    uint32_t len;
} blob;

typedef struct request {
    blob name, source;
    uint32_t n_options, n_headers, n_kernels;
    blob *options;
    blob *header_names, *header_data;
    blob *kernels; /* carried for completeness; extern "C" names need no lookup here */
} request;

static int read_full(int fd, void *p, size_t n)
{
    char *c = p;
    while (n) {
        ssize_t r = read(fd, c, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1; /* EOF before the request ended counts as malformed */
        c += r;
        n -= (size_t)r;
    }
    return 0;
}

static int write_full(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

static int read_u32(int fd, uint32_t *v)
{
    unsigned char b[4];
    if (read_full(fd, b, 4)) return -1;
    *v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    return 0;
}

static int read_str(int fd, blob *s)
{
    if (read_u32(fd, &s->len) || s->len > MJ_WIRE_MAX_STR) return -1;
    s->data = malloc((size_t)s->len + 1);
    if (!s->data || read_full(fd, s->data, s->len)) return -1;
    s->data[s->len] = '\0';
    return 0;
}

/* Reads `*n` and then that many strs into a new array (calloc'd so a partial read frees). */
static int read_strs(int fd, uint32_t *n, blob **out)
{
    if (read_u32(fd, n) || *n > MJ_WIRE_MAX_COUNT) return -1;
    *out = calloc(*n ? *n : 1, sizeof **out);
    if (!*out) return -1;
    for (uint32_t i = 0; i < *n; i++)
        if (read_str(fd, &(*out)[i])) return -1;
    return 0;
}

static int read_request(int fd, request *rq)
{
    char magic[4];
    uint32_t version;
    if (read_full(fd, magic, 4) || memcmp(magic, MJ_WIRE_REQUEST_MAGIC, 4) != 0) return -1;
    if (read_u32(fd, &version) || version != MJ_WIRE_VERSION) return -1;
    if (read_str(fd, &rq->name) || read_str(fd, &rq->source)) return -1;
    if (read_strs(fd, &rq->n_options, &rq->options)) return -1;
    if (read_u32(fd, &rq->n_headers) || rq->n_headers > MJ_WIRE_MAX_COUNT) return -1;
    rq->header_names = calloc(rq->n_headers ? rq->n_headers : 1, sizeof(blob));
    rq->header_data = calloc(rq->n_headers ? rq->n_headers : 1, sizeof(blob));
    if (!rq->header_names || !rq->header_data) return -1;
    for (uint32_t i = 0; i < rq->n_headers; i++)
        if (read_str(fd, &rq->header_names[i]) || read_str(fd, &rq->header_data[i])) return -1;
    return read_strs(fd, &rq->n_kernels, &rq->kernels);
}

/* Runs NVRTC on the request and encodes the response into `out`. Every NVRTC failure is
 * an answer (its result code and log), not a worker failure. */
static void compile(const request *rq, mj_buf *out)
{
    const char **hdr_data = calloc(rq->n_headers + 1, sizeof *hdr_data);
    const char **hdr_names = calloc(rq->n_headers + 1, sizeof *hdr_names);
    const char **opts = calloc(rq->n_options + 1, sizeof *opts);
    char *log = NULL, *cubin = NULL;
    size_t log_len = 0, cubin_len = 0;
    nvrtcProgram prog = NULL;
    nvrtcResult res = NVRTC_ERROR_OUT_OF_MEMORY;
    if (!hdr_data || !hdr_names || !opts) goto answer;
    for (uint32_t i = 0; i < rq->n_headers; i++) {
        hdr_data[i] = rq->header_data[i].data;
        hdr_names[i] = rq->header_names[i].data;
    }
    for (uint32_t i = 0; i < rq->n_options; i++) opts[i] = rq->options[i].data;

    res = nvrtcCreateProgram(&prog, rq->source.data, rq->name.data, (int)rq->n_headers,
                             hdr_data, hdr_names);
    if (res != NVRTC_SUCCESS) goto answer;
    res = nvrtcCompileProgram(prog, (int)rq->n_options, opts);
    size_t n = 0;
    if (nvrtcGetProgramLogSize(prog, &n) == NVRTC_SUCCESS && n > 0 && (log = malloc(n))) {
        if (nvrtcGetProgramLog(prog, log) == NVRTC_SUCCESS) log_len = strnlen(log, n);
    }
    if (res != NVRTC_SUCCESS) goto answer;
    if ((res = nvrtcGetCUBINSize(prog, &cubin_len)) != NVRTC_SUCCESS) goto answer;
    if (!(cubin = malloc(cubin_len ? cubin_len : 1))) {
        res = NVRTC_ERROR_OUT_OF_MEMORY;
        cubin_len = 0;
        goto answer;
    }
    res = nvrtcGetCUBIN(prog, cubin);

answer:
    if (res != NVRTC_SUCCESS) cubin_len = 0;
    mj_buf_append(out, MJ_WIRE_RESPONSE_MAGIC, 4);
    mj_wire_put_u32(out, MJ_WIRE_VERSION);
    mj_wire_put_u32(out, (uint32_t)(int32_t)res);
    mj_wire_put_str(out, log ? log : "", log_len);
    mj_wire_put_str(out, cubin ? cubin : "", cubin_len);
    if (prog) nvrtcDestroyProgram(&prog);
    free(log);
    free(cubin);
    free(hdr_data);
    free(hdr_names);
    free(opts);
}

static void free_blobs(blob *b, uint32_t n)
{
    if (!b) return;
    for (uint32_t i = 0; i < n; i++) free(b[i].data);
    free(b);
}

static void free_request(request *rq)
{
    free(rq->name.data);
    free(rq->source.data);
    /* Arrays are calloc'd at their full count, so freeing every slot is safe after a
     * partial read. */
    free_blobs(rq->options, rq->options ? rq->n_options : 0);
    free_blobs(rq->header_names, rq->header_names ? rq->n_headers : 0);
    free_blobs(rq->header_data, rq->header_data ? rq->n_headers : 0);
    free_blobs(rq->kernels, rq->kernels ? rq->n_kernels : 0);
}

/* The test hooks (see the top of the file); returns only for "garbage" and unset. */
static const char *fault_hook(void)
{
    const char *f = getenv("MOEJIT_WORKER_FAULT");
    if (!f || !*f) return NULL;
    if (strcmp(f, "crash") == 0) {
        /* No core file: the test crashes on purpose and should not litter. */
        struct rlimit none = {0, 0};
        setrlimit(RLIMIT_CORE, &none);
        raise(SIGSEGV);
    }
    if (strcmp(f, "hang-child") == 0 && fork() == 0)
        for (;;) pause();
    if (strcmp(f, "hang") == 0 || strcmp(f, "hang-child") == 0)
        for (;;) pause();
    return f;
}

int main(int argc, char **argv)
{
    /* Die with the process that started us, however it dies; if it is already gone (we were
     * reparented before the request took effect), stop now. */
    if (argc > 1 && strncmp(argv[1], "--parent=", 9) == 0) {
        long parent = strtol(argv[1] + 9, NULL, 10);
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || (long)getppid() != parent) return 4;
    }
    /* The response goes to a private copy of stdout, and fd 1 becomes stderr, so that
     * anything NVRTC or a library prints cannot corrupt the protocol. */
    int out_fd = dup(1);
    if (out_fd < 0 || dup2(2, 1) < 0) {
        perror("moejit-compile-worker: dup");
        return 3;
    }
    request rq;
    memset(&rq, 0, sizeof rq);
    if (read_request(0, &rq)) {
        fprintf(stderr, "moejit-compile-worker: malformed or truncated request on stdin\n");
        free_request(&rq);
        return 2;
    }
    mj_buf resp = MJ_BUF_INIT;
    const char *fault = fault_hook();
    if (fault && strcmp(fault, "garbage") == 0) {
        /* Well-formed up to the log, whose length then runs past the end. */
        mj_buf_append(&resp, MJ_WIRE_RESPONSE_MAGIC, 4);
        mj_wire_put_u32(&resp, MJ_WIRE_VERSION);
        mj_wire_put_u32(&resp, 0);
        mj_wire_put_u32(&resp, 1u << 20);
        mj_buf_puts(&resp, "not a log");
    } else
        compile(&rq, &resp);
    free_request(&rq);
    if (!mj_buf_ok(&resp)) {
        fprintf(stderr, "moejit-compile-worker: out of memory building the response\n");
        mj_buf_free(&resp);
        return 4;
    }
    int rc = write_full(out_fd, resp.data, resp.len) ? 3 : 0;
    if (rc) perror("moejit-compile-worker: writing the response");
    mj_buf_free(&resp);
    close(out_fd);
    return rc;
}
