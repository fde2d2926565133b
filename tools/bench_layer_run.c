/*
 * This file contains the device side of `moejit bench layer` (bench_layer_run.h): one handle
 * over a layer built through the registry or directly, the NVRTC-compiled fill kernels that
 * make random inputs on the device (gigabytes of weights never cross PCIe), and the
 * CUDA-graph replay timer.
 */
#include "tools/bench_layer_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/context.h"
#include "codegen/emit_backends.h"
#include "runtime/launch.h"
#include "runtime/launch_backends.h"
#include "codegen/nvrtc_compile.h"
#include "core/status.h"

/* ---- layers -------------------------------------------------------------------------------- */

moejit_status bench_layer_build(moejit_context *ctx, const char *text, bench_layer *L)
{
    memset(L, 0, sizeof *L);
    const mj_settings *s = mj_context_settings(ctx);
    L->knobs = (mj_launch_knobs){s->decode, s->pdl};
    moejit_status st = moejit_spec_parse(text, &L->spec);
    if (st != MOEJIT_OK) return st;
    if (moejit_check_support(L->spec) == MOEJIT_OK) {
        st = moejit_kernel_get(ctx, L->spec, &L->kernel);
        /* a tensor-core layer's every module: its forwards are captured in graphs, which never compile */
        const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        if (st == MOEJIT_OK && L->kernel->n_modules)
            st = mj_kernel_modules_build(L->kernel, mj_kernel_modules_all(L->kernel), cpus > 1 ? (int)cpus : 1, NULL);
        if (st == MOEJIT_OK) L->compile_seconds = moejit_kernel_compile_seconds(L->kernel);
        return st;
    }
    if (L->spec->backend != MJ_BACKEND_MMA && L->spec->backend != MJ_BACKEND_WGMMA)
        return moejit_check_support(L->spec); /* the reason */
    /* mma or wgmma before it is registered in the capability matrix: emit, compile, load by hand */
    L->direct = 1;
    mj_source src;
    st = mj_emit(L->spec, &src);
    if (st != MOEJIT_OK) return st;
    mj_compile_request req = {&src, mj_arch_target(L->spec->arch), mj_embedded_headers,
                              mj_embedded_headers_len, 600};
    st = mj_nvrtc_compile(&req, &L->program);
    mj_source_free(&src);
    if (st != MOEJIT_OK) return st;
    L->compile_seconds = L->program.compile_seconds;
    return mj_module_load(&L->program, &L->module);
}

moejit_status bench_layer_workspace(const bench_layer *L, const moejit_moe_args *a, size_t *bytes)
{
    if (L->direct) return mj_launch_workspace_size(L->spec, a, bytes);
    return moejit_workspace_size(L->kernel, a, bytes);
}

moejit_status bench_layer_forward(const mj_gpu *g, const bench_layer *L, const moejit_moe_args *a,
                                  CUdeviceptr ws, size_t ws_bytes, CUstream stream)
{
    if (L->direct)
        return mj_launch_forward(g->d, L->spec, &L->module, a, (void *)ws, ws_bytes, stream, &L->knobs);
    return mj_kernel_forward(L->kernel, a, (void *)ws, ws_bytes, stream, &L->knobs);
}

const mj_program *bench_layer_program(const bench_layer *L)
{
    return L->direct ? &L->program : &L->kernel->program;
}

const mj_kernel_info *bench_layer_kernel(const bench_layer *L, int i)
{
    const mj_program *p = bench_layer_program(L);
    return i >= 0 && i < p->n_kernels ? &p->kernels[i] : NULL;
}

void bench_layer_free(bench_layer *L)
{
    if (L->direct) {
        mj_module_unload(&L->module);
        mj_program_free(&L->program);
    }
    moejit_spec_destroy(L->spec); /* the kernel belongs to its context */
    memset(L, 0, sizeof *L);
}

/* ---- fills ----------------------------------------------------------------------------------- */

/* splitmix64 of (seed, i): independent of the grid, so a fill is the same on every device. */
static const char fill_source[] =
    "__device__ __forceinline__ float mj_u(unsigned long long seed, unsigned long long i)\n"
    "{\n"
    "    unsigned long long z = seed + (i + 1ull) * 0x9e3779b97f4a7c15ull;\n"
    "    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;\n"
    "    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;\n"
    "    z ^= z >> 31;\n"
    "    return (float)(z >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f;\n"
    "}\n"
    "extern \"C\" __global__ void mj_bench_fill16(unsigned short *dst, unsigned long long n,\n"
    "                                            unsigned long long seed, float scale, int fp16)\n"
    "{\n"
    "    const unsigned long long step = (unsigned long long)gridDim.x * blockDim.x;\n"
    "    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;\n"
    "         i += step) {\n"
    "        const float v = mj_u(seed, i) * scale;\n"
    "        unsigned short h;\n"
    "        if (fp16) {\n"
    "            asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(v));\n"
    "        } else {\n"
    "            unsigned int b = __float_as_uint(v);\n"
    "            b += 0x7fffu + ((b >> 16) & 1u);\n"
    "            h = (unsigned short)(b >> 16);\n"
    "        }\n"
    "        dst[i] = h;\n"
    "    }\n"
    "}\n"
    "extern \"C\" __global__ void mj_bench_fill32(float *dst, unsigned long long n,\n"
    "                                            unsigned long long seed, float scale)\n"
    "{\n"
    "    const unsigned long long step = (unsigned long long)gridDim.x * blockDim.x;\n"
    "    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;\n"
    "         i += step)\n"
    "        dst[i] = mj_u(seed, i) * scale;\n"
    "}\n"
    /* e4m3fn of 448 · u (round to nearest even), the full range of the format without NaN */
    "extern \"C\" __global__ void mj_bench_fill8(unsigned char *dst, unsigned long long n,\n"
    "                                           unsigned long long seed)\n"
    "{\n"
    "    const unsigned long long step = (unsigned long long)gridDim.x * blockDim.x;\n"
    "    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;\n"
    "         i += step) {\n"
    "        const float v = mj_u(seed, i) * 448.0f, a = fabsf(v);\n"
    "        const unsigned s = v < 0.0f ? 0x80u : 0u;\n"
    "        unsigned code;\n"
    "        if (a < 0.015625f) {\n"
    "            code = (unsigned)__float2int_rn(a * 512.0f);\n"
    "        } else {\n"
    "            int e;\n"
    "            const float f = frexpf(a, &e);\n"
    "            int m = __float2int_rn((f * 2.0f - 1.0f) * 8.0f), E = e + 6;\n"
    "            if (m == 8) m = 0, E++;\n"
    "            code = E > 15 || (E == 15 && m > 6) ? 0x7eu : (unsigned)(E << 3 | m);\n"
    "        }\n"
    "        dst[i] = (unsigned char)(s | code);\n"
    "    }\n"
    "}\n"
    /* scale · (1.5 + 0.5 u): positive scales in [scale, 2 scale) */
    "extern \"C\" __global__ void mj_bench_fill_scales(float *dst, unsigned long long n,\n"
    "                                                 unsigned long long seed, float scale)\n"
    "{\n"
    "    const unsigned long long step = (unsigned long long)gridDim.x * blockDim.x;\n"
    "    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;\n"
    "         i += step)\n"
    "        dst[i] = (1.5f + 0.5f * mj_u(seed, i)) * scale;\n"
    "}\n";

moejit_status bench_fill_init(bench_fill *f)
{
    memset(f, 0, sizeof *f);
    mj_source src;
    memset(&src, 0, sizeof src);
    src.text = (char *)fill_source;
    src.len = sizeof fill_source - 1;
    src.name = "moejit_bench_fill.cu";
    src.n_kernels = 4;
    src.kernel_names[0] = "mj_bench_fill16";
    src.kernel_names[1] = "mj_bench_fill32";
    src.kernel_names[2] = "mj_bench_fill8";
    src.kernel_names[3] = "mj_bench_fill_scales";
    int major = 0, minor = 0;
    moejit_status st = mj_driver_device_cc(0, &major, &minor);
    if (st != MOEJIT_OK) return st;
    mj_arch arch;
    st = mj_arch_from_cc(major, minor, &arch);
    if (st != MOEJIT_OK) return st;
    mj_compile_request req = {&src, mj_arch_target(arch), NULL, 0, 300};
    st = mj_nvrtc_compile(&req, &f->program);
    if (st == MOEJIT_OK) st = mj_module_load(&f->program, &f->module);
    return st;
}

moejit_status bench_fill_run(const mj_gpu *g, const bench_fill *f, CUdeviceptr dst, size_t n,
                             mj_dtype dt, uint64_t seed, float scale, CUstream stream)
{
    if (n == 0) return MOEJIT_OK;
    unsigned long long count = n, s = seed;
    int fp16 = dt == MJ_DTYPE_FP16;
    size_t blocks = (n + 255) / 256;
    if (blocks > 132 * 32) blocks = 132 * 32;
    void *p16[] = {&dst, &count, &s, &scale, &fp16};
    void *p32[] = {&dst, &count, &s, &scale};
    int k = dt == MJ_DTYPE_FP32;
    CUresult r = g->d->cuLaunchKernel((CUfunction)f->module.kernels[k], (unsigned)blocks, 1, 1, 256, 1, 1, 0,
                                      stream, k ? p32 : p16, NULL);
    return r == CUDA_SUCCESS ? MOEJIT_OK : mj_cuda_fail(g->d, r, "cuLaunchKernel(fill)");
}

moejit_status bench_fill_e4m3(const mj_gpu *g, const bench_fill *f, CUdeviceptr dst, size_t n, uint64_t seed,
                             CUstream stream)
{
    if (n == 0) return MOEJIT_OK;
    unsigned long long count = n, s = seed;
    size_t blocks = (n + 255) / 256;
    if (blocks > 132 * 32) blocks = 132 * 32;
    void *p[] = {&dst, &count, &s};
    CUresult r = g->d->cuLaunchKernel((CUfunction)f->module.kernels[2], (unsigned)blocks, 1, 1, 256, 1, 1, 0, stream,
                                      p, NULL);
    return r == CUDA_SUCCESS ? MOEJIT_OK : mj_cuda_fail(g->d, r, "cuLaunchKernel(fill e4m3)");
}

moejit_status bench_fill_scales(const mj_gpu *g, const bench_fill *f, CUdeviceptr dst, size_t n, uint64_t seed,
                                float scale, CUstream stream)
{
    if (n == 0) return MOEJIT_OK;
    unsigned long long count = n, s = seed;
    size_t blocks = (n + 255) / 256;
    if (blocks > 132 * 32) blocks = 132 * 32;
    void *p[] = {&dst, &count, &s, &scale};
    CUresult r = g->d->cuLaunchKernel((CUfunction)f->module.kernels[3], (unsigned)blocks, 1, 1, 256, 1, 1, 0, stream,
                                      p, NULL);
    return r == CUDA_SUCCESS ? MOEJIT_OK : mj_cuda_fail(g->d, r, "cuLaunchKernel(fill scales)");
}

void bench_fill_free(bench_fill *f)
{
    mj_module_unload(&f->module);
    mj_program_free(&f->program);
}

/* ---- graph timing ------------------------------------------------------------------------------ */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static moejit_status capture(const mj_gpu *g, CUstream stream, bench_enqueue_fn fn, void *ctx, int forwards,
                             CUstreamCaptureMode mode, CUgraphExec *exec)
{
    const mj_driver *d = g->d;
    CUgraph graph = NULL;
    CUresult r = d->cuStreamBeginCapture(stream, mode);
    if (r != CUDA_SUCCESS) return mj_cuda_fail(d, r, "cuStreamBeginCapture");
    moejit_status st = MOEJIT_OK;
    for (int i = 0; i < forwards && st == MOEJIT_OK; i++) st = fn(ctx, i, stream);
    r = d->cuStreamEndCapture(stream, &graph);
    if (st != MOEJIT_OK) {
        if (graph) d->cuGraphDestroy(graph);
        return st;
    }
    if (r != CUDA_SUCCESS) return mj_cuda_fail(d, r, "cuStreamEndCapture");
    r = d->cuGraphInstantiate(exec, graph, 0);
    d->cuGraphDestroy(graph);
    return r == CUDA_SUCCESS ? MOEJIT_OK : mj_cuda_fail(d, r, "cuGraphInstantiate");
}

moejit_status bench_time_graph(const mj_gpu *g, CUstream stream, bench_enqueue_fn fn, void *ctx,
                               int forwards, int reps, double *median_us, double *spread,
                               const char **mode_note, gpu_telemetry *tel, gpu_clocks *clocks)
{
    const mj_driver *d = g->d;
    CUgraphExec exec = NULL;
    CUevent e0 = NULL, e1 = NULL;
    *mode_note = "";
    moejit_status st = capture(g, stream, fn, ctx, forwards, CU_STREAM_CAPTURE_MODE_GLOBAL, &exec);
    if (st != MOEJIT_OK) {
        *mode_note = "global-mode capture failed; relaxed mode used";
        fprintf(stderr, "bench: %s: %s\n", *mode_note, moejit_last_error());
        st = capture(g, stream, fn, ctx, forwards, CU_STREAM_CAPTURE_MODE_RELAXED, &exec);
        if (st != MOEJIT_OK) return st;
    }
    double times[64];
    CUresult r = d->cuEventCreate(&e0, CU_EVENT_DEFAULT);
    if (r == CUDA_SUCCESS) r = d->cuEventCreate(&e1, CU_EVENT_DEFAULT);
    /* two warm-up replays, then one timed replay to size the run */
    for (int i = 0; i < 2 && r == CUDA_SUCCESS; i++) r = d->cuGraphLaunch(exec, stream);
    if (r == CUDA_SUCCESS) r = d->cuEventRecord(e0, stream);
    if (r == CUDA_SUCCESS) r = d->cuGraphLaunch(exec, stream);
    if (r == CUDA_SUCCESS) r = d->cuEventRecord(e1, stream);
    if (r == CUDA_SUCCESS) r = d->cuEventSynchronize(e1);
    float ms = 0;
    if (r == CUDA_SUCCESS) r = d->cuEventElapsedTime(&ms, e0, e1);
    if (r == CUDA_SUCCESS && reps <= 0) {
        reps = ms > 0 ? (int)(250.0 / ms) : 30;
        reps = reps < 5 ? 5 : reps > 30 ? 30 : reps;
    }
    if (reps > 64) reps = 64;
    if (tel) gpu_telemetry_start(tel);
    for (int i = 0; i < reps && r == CUDA_SUCCESS; i++) {
        r = d->cuEventRecord(e0, stream);
        if (r == CUDA_SUCCESS) r = d->cuGraphLaunch(exec, stream);
        if (r == CUDA_SUCCESS) r = d->cuEventRecord(e1, stream);
        if (r == CUDA_SUCCESS) r = d->cuEventSynchronize(e1);
        if (r == CUDA_SUCCESS) r = d->cuEventElapsedTime(&ms, e0, e1);
        times[i] = 1000.0 * ms / forwards;
    }
    if (tel) gpu_telemetry_stop(tel, clocks);
    if (r != CUDA_SUCCESS) st = mj_cuda_fail(d, r, "graph replay");
    if (st == MOEJIT_OK) {
        qsort(times, (size_t)reps, sizeof times[0], cmp_double);
        *median_us = times[reps / 2];
        *spread = times[reps / 2] > 0 ? (times[reps - 1] - times[0]) / times[reps / 2] : 0;
    }
    if (e0) d->cuEventDestroy(e0);
    if (e1) d->cuEventDestroy(e1);
    if (exec) d->cuGraphExecDestroy(exec);
    return st;
}
