/*
 * nvrtc_compile.h — compiling generated source to a cubin with NVRTC, in a worker process.
 *
 * NVRTC can crash or hang on some inputs (NVRTC 13.0 segfaulted on a wgmma kernel whose
 * descriptors were constant zero), and a bare fork() of a multi-threaded process that holds
 * a CUDA context is unsafe. So the compile runs in `moejit-compile-worker`, started with
 * posix_spawn; a crash, a non-zero exit or a timeout becomes MOEJIT_ERR_COMPILE for that
 * spec, never a dead or stuck caller.
 *
 * The worker is found at $MOEJIT_COMPILE_WORKER, else ../libexec/moejit-compile-worker
 * relative to the directory of the binary or shared library holding this code.
 */
#ifndef MJ_NVRTC_COMPILE_H
#define MJ_NVRTC_COMPILE_H

#include "codegen/emit.h"
#include "core/program.h"

typedef struct mj_compile_request {
    const mj_source *source;
    const char *arch;              /* "sm_90a" */
    const mj_header *headers;      /* headers NVRTC may include: only those in the source's
                                      include closure are handed to it */
    size_t n_headers;
    double timeout_s;              /* <= 0: 300 s */
    const char *worker;            /* the worker's path as the caller's settings give it; NULL
                                      or "": $MOEJIT_COMPILE_WORKER, else found (find_worker) */
} mj_compile_request;

/* The NVRTC options for arch, one per element, NULL-terminated, in a fixed order; the
 * strings are static or live in buf (which the caller frees). Part of the cache key. */
void mj_nvrtc_options(const char *arch, mj_buf *buf, const char *opts[], int max_opts,
                      int *n_opts);

/* Compiles in a worker process. On success fills out->cubin, log, kernels (names and
 * resources), compile_seconds, arch. On failure returns MOEJIT_ERR_COMPILE with a message
 * that holds the log and the offending source lines, and still fills out->log. */
moejit_status mj_nvrtc_compile(const mj_compile_request *req, mj_program *out);


/* NVRTC's version and the GNU build id of the loaded libnvrtc (40 hex chars + NUL, or
 * "unknown"), which tells apart two builds of one version. */
moejit_status mj_nvrtc_identity(int *major, int *minor, char build_id[41]);

#endif
