/*
 * This file contains `inspect --ptx` and `inspect --sass`.
 *
 * PTX: NVRTC runs in this process (the CLI is not a serving process, so a compiler crash
 * costs only this command), for the virtual arch compute_XX of the spec's target, with the
 * same source, headers and options as the cached compile otherwise.
 * SASS: the cubin goes to a private temp file and the toolkit's cuobjdump (or nvdisasm)
 * prints it. The tools are looked for in $CUDA_HOME/bin, on PATH, in /usr/local/cuda/bin and
 * in the Python wheels nvidia-cuda-cuobjdump / nvidia-cuda-nvdisasm; a toolkit without them
 * (such as the build machine's) gets a message that says so.
 */
#include "tools/inspect.h"

#include <nvrtc.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "codegen/nvrtc_compile.h"
#include "core/status.h"

extern char **environ;

moejit_status inspect_ptx(const mj_build_inputs *in, mj_buf *ptx)
{
    const char *opts[MJ_MAX_OPTIONS + 1];
    char arch_opt[64];
    int n = 0;
    snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=compute_%s",
             strncmp(in->arch, "sm_", 3) == 0 ? in->arch + 3 : in->arch);
    for (int i = 0; i < in->n_options; i++) {
        if (strncmp(in->options[i], "--gpu-architecture=", 19) == 0) opts[n++] = arch_opt;
        else if (strncmp(in->options[i], "--ptxas-options", 15) != 0) opts[n++] = in->options[i]; /* no ptxas */
    }
    const char **names = calloc(mj_embedded_headers_len + 1, sizeof *names);
    const char **data = calloc(mj_embedded_headers_len + 1, sizeof *data);
    if (!names || !data) {
        free(names), free(data);
        return mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "inspect --ptx: out of memory");
    }
    for (size_t i = 0; i < mj_embedded_headers_len; i++) {
        names[i] = mj_embedded_headers[i].name;
        data[i] = mj_embedded_headers[i].data;
    }
    nvrtcProgram prog = NULL;
    moejit_status st = MOEJIT_OK;
    nvrtcResult r = nvrtcCreateProgram(&prog, in->source.text, in->source.name ? in->source.name : "moejit_layer.cu",
                                       (int)mj_embedded_headers_len, data, names);
    if (r == NVRTC_SUCCESS) {
        r = nvrtcCompileProgram(prog, n, opts);
        if (r != NVRTC_SUCCESS) {
            size_t len = 0;
            char *log = NULL;
            if (nvrtcGetProgramLogSize(prog, &len) == NVRTC_SUCCESS && (log = calloc(len + 1, 1)))
                nvrtcGetProgramLog(prog, log);
            st = mj_fail(MOEJIT_ERR_COMPILE, "inspect --ptx: NVRTC failed for %s (%s): %s", arch_opt,
                         nvrtcGetErrorString(r), log ? log : "");
            free(log);
        } else {
            size_t len = 0;
            r = nvrtcGetPTXSize(prog, &len);
            char *text = r == NVRTC_SUCCESS ? calloc(len + 1, 1) : NULL;
            if (text && nvrtcGetPTX(prog, text) == NVRTC_SUCCESS) mj_buf_puts(ptx, text);
            else st = mj_fail(MOEJIT_ERR_COMPILE, "inspect --ptx: no PTX from NVRTC (%s)", nvrtcGetErrorString(r));
            free(text);
        }
    } else {
        st = mj_fail(MOEJIT_ERR_COMPILE, "inspect --ptx: nvrtcCreateProgram: %s", nvrtcGetErrorString(r));
    }
    if (prog) nvrtcDestroyProgram(&prog);
    free(names), free(data);
    if (st == MOEJIT_OK && !mj_buf_ok(ptx)) st = mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "inspect --ptx: out of memory");
    return st;
}

/* ---- SASS ---------------------------------------------------------------------------------- */

static int executable(const char *path) { return access(path, X_OK) == 0; }

/* First existing match of a glob pattern, into out. */
static int glob_first(const char *pattern, char *out, size_t cap)
{
    glob_t g;
    int found = 0;
    if (glob(pattern, 0, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc && !found; i++)
            if (executable(g.gl_pathv[i])) {
                snprintf(out, cap, "%s", g.gl_pathv[i]);
                found = 1;
            }
        globfree(&g);
    }
    return found;
}

static int on_path(const char *name, char *out, size_t cap)
{
    const char *path = getenv("PATH");
    if (!path) return 0;
    char *copy = strdup(path), *save = NULL;
    int found = 0;
    for (char *d = copy ? strtok_r(copy, ":", &save) : NULL; d && !found; d = strtok_r(NULL, ":", &save)) {
        snprintf(out, cap, "%s/%s", *d ? d : ".", name);
        found = executable(out);
    }
    free(copy);
    return found;
}

/* Where `tool` is: its variable (MOEJIT_NVDISASM, MOEJIT_CUOBJDUMP), $CUDA_HOME/bin, PATH,
 * /usr/local/cuda/bin, then the pip wheels (nvidia/<package>/bin/ for CUDA 12,
 * nvidia/cu13/bin/ for CUDA 13). */
static int find_one(const char *tool, const char *env, const char *wheel_dir, char *out, size_t cap)
{
    const char *given = getenv(env);
    if (given && *given) {
        snprintf(out, cap, "%s", given);
        if (executable(out)) return 1;
    }
    const char *cuda = getenv("CUDA_HOME");
    const char *venv = getenv("VIRTUAL_ENV");
    const char *home = getenv("HOME");
    if (cuda && *cuda) {
        snprintf(out, cap, "%s/bin/%s", cuda, tool);
        if (executable(out)) return 1;
    }
    if (on_path(tool, out, cap)) return 1;
    snprintf(out, cap, "/usr/local/cuda/bin/%s", tool);
    if (executable(out)) return 1;
    const struct { const char *base, *sites; } dirs[] = {
        {venv, "lib/python3*/site-packages"},         {home, ".local/lib/python3*/site-packages"},
        {"/usr/local", "lib/python3*/dist-packages"}, {"/usr/local", "lib/python3*/site-packages"},
        {"/usr", "lib/python3/dist-packages"},        {"/opt/conda", "lib/python3*/site-packages"}};
    for (size_t d = 0; d < sizeof dirs / sizeof dirs[0]; d++) {
        if (!dirs[d].base || !*dirs[d].base) continue;
        char pat[2048];
        snprintf(pat, sizeof pat, "%s/%s/nvidia/%s/bin/%s", dirs[d].base, dirs[d].sites, wheel_dir, tool);
        if (glob_first(pat, out, cap)) return 1;
        snprintf(pat, sizeof pat, "%s/%s/nvidia/cu1[0-9]/bin/%s", dirs[d].base, dirs[d].sites, tool);
        if (glob_first(pat, out, cap)) return 1;
    }
    return 0;
}

static int same_dir(const char *a, const char *b)
{
    const char *sa = strrchr(a, '/'), *sb = strrchr(b, '/');
    return sa && sb && sa - a == sb - b && strncmp(a, b, (size_t)(sa - a)) == 0;
}

/* The disassembler to use. cuobjdump needs nvdisasm beside it (the pip wheels ship them
 * apart), so cuobjdump is used only with its nvdisasm; otherwise nvdisasm on its own. */
static int find_tool(char *out, size_t cap, int *is_nvdisasm)
{
    char nv[4096], cu[4096];
    int have_nv = find_one("nvdisasm", "MOEJIT_NVDISASM", "cuda_nvdisasm", nv, sizeof nv);
    int have_cu = find_one("cuobjdump", "MOEJIT_CUOBJDUMP", "cuda_cuobjdump", cu, sizeof cu);
    if (have_cu && have_nv && same_dir(cu, nv)) {
        snprintf(out, cap, "%s", cu);
        *is_nvdisasm = 0;
        return 1;
    }
    if (have_nv) {
        snprintf(out, cap, "%s", nv);
        *is_nvdisasm = 1;
        return 1;
    }
    return 0;
}

/* Runs argv, collecting stdout and stderr into out; returns the exit status or -1. */
static int run_capture(char *const argv[], mj_buf *out)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (rc != 0) {
        close(fds[0]);
        errno = rc;
        return -1;
    }
    char chunk[8192];
    ssize_t n;
    while ((n = read(fds[0], chunk, sizeof chunk)) != 0) {
        if (n < 0) {
            if (errno == EINTR) continue;
            break;
        }
        mj_buf_append(out, chunk, (size_t)n);
    }
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

moejit_status inspect_sass(const void *cubin, size_t len, mj_buf *sass, const char **tool)
{
    static char path[4096];
    int nvdisasm = 0;
    if (!find_tool(path, sizeof path, &nvdisasm))
        return mj_fail(MOEJIT_ERR_IO,
                       "inspect --sass: no nvdisasm found (cuobjdump needs it too; looked at $MOEJIT_NVDISASM, "
                       "in $CUDA_HOME/bin, PATH, /usr/local/cuda/bin and the pip wheel nvidia-cuda-nvdisasm); "
                       "install one with `python3 -m pip install nvidia-cuda-nvdisasm` or the toolkit's "
                       "nvdisasm, or set MOEJIT_NVDISASM to its path; --ptx needs no disassembler");
    *tool = path;
    const char *tmp = getenv("TMPDIR");
    char file[4096];
    snprintf(file, sizeof file, "%s/moejit-sass-XXXXXX.cubin", tmp && *tmp ? tmp : "/tmp");
    int fd = mkstemps(file, 6);
    if (fd < 0) return mj_fail(MOEJIT_ERR_IO, "inspect --sass: cannot create a temp file in %s: %s", file, strerror(errno));
    size_t put = 0;
    while (put < len) {
        ssize_t w = write(fd, (const char *)cubin + put, len - put);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        put += (size_t)w;
    }
    close(fd);
    if (put != len) {
        unlink(file);
        return mj_fail(MOEJIT_ERR_IO, "inspect --sass: cannot write %s", file);
    }
    char *argv_c[] = {path, "--dump-sass", file, NULL};
    char *argv_n[] = {path, "-c", file, NULL};
    int rc = run_capture(nvdisasm ? argv_n : argv_c, sass);
    unlink(file);
    if (rc != 0)
        return mj_fail(MOEJIT_ERR_IO, "inspect --sass: %s failed (%s): %.*s", path,
                       rc < 0 ? strerror(errno) : "non-zero exit", (int)(sass->len > 400 ? 400 : sass->len),
                       sass->data ? sass->data : "");
    return MOEJIT_OK;
}
