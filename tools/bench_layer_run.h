/*
 * bench_layer_run.h — the device side of `moejit bench layer`: a compiled layer of any
 * backend behind one handle, device-side fills of random inputs, and CUDA-graph timing.
 *
 * A layer is built through the public API (moejit_kernel_get) when the backend passes
 * moejit_check_support; a backend that is written but not yet registered in the capability
 * matrix (mma, before its integration) is built directly (emit, NVRTC worker, loader) and run
 * through its own launcher, so the benchmark measures it either way.
 */
#ifndef MJ_CLI_BENCH_LAYER_RUN_H
#define MJ_CLI_BENCH_LAYER_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/driver.h"
#include "runtime/launch.h"
#include "tools/gpu_harness.h"
#include "tools/gpu_telemetry.h"
#include "runtime/loader.h"
#include "core/program.h"
#include "core/spec.h"

typedef struct bench_layer {
    moejit_spec *spec;
    moejit_kernel *kernel; /* public path; NULL on the direct path */
    int direct;            /* 1: built and launched without the registry */
    mj_program program;    /* direct path */
    mj_module module;      /* direct path */
    double compile_seconds;
    mj_launch_knobs knobs; /* decode mode and PDL its forwards run with (the context's) */
} bench_layer;

/* Builds the layer of spec text (which pins the shape); ctx serves the public path and gives
 * the launch settings (L->knobs, which a caller may change between forwards). */
moejit_status bench_layer_build(moejit_context *ctx, const char *text, bench_layer *L);
moejit_status bench_layer_workspace(const bench_layer *L, const moejit_moe_args *a, size_t *bytes);
moejit_status bench_layer_forward(const mj_gpu *g, const bench_layer *L, const moejit_moe_args *a,
                                  CUdeviceptr ws, size_t ws_bytes, CUstream stream);
/* Kernel i's resources and the cubin (for --cubin-dir); NULL past the last kernel. */
const mj_kernel_info *bench_layer_kernel(const bench_layer *L, int i);
const mj_program *bench_layer_program(const bench_layer *L);
void bench_layer_free(bench_layer *L);

/* Device-side random fills (an NVRTC-compiled hash kernel): element i of dst gets
 * scale · u(seed, i), u uniform in [-1, 1), never all zeros. 16-bit dtypes are rounded to
 * nearest even; fp32 is stored as is. */
typedef struct bench_fill {
    mj_program program;
    mj_module module;
} bench_fill;

moejit_status bench_fill_init(bench_fill *f);
moejit_status bench_fill_run(const mj_gpu *g, const bench_fill *f, CUdeviceptr dst, size_t n,
                             mj_dtype dt, uint64_t seed, float scale, CUstream stream);
/* fp8 inputs: n e4m3fn bytes, each the code of 448 · u(seed, i) (round to nearest even; never
 * NaN); n fp32 scales scale · (1.5 + 0.5 · u), in [scale, 2 · scale). */
moejit_status bench_fill_e4m3(const mj_gpu *g, const bench_fill *f, CUdeviceptr dst, size_t n, uint64_t seed,
                             CUstream stream);
moejit_status bench_fill_scales(const mj_gpu *g, const bench_fill *f, CUdeviceptr dst, size_t n, uint64_t seed,
                                float scale, CUstream stream);
void bench_fill_free(bench_fill *f);

/* Captures `forwards` forward calls (input set i of each is the caller's business: the
 * callback enqueues forward i) into one graph, replays it, and returns the median time of
 * ONE forward in microseconds over `reps` replays (reps <= 0: as many as fit in ~0.25 s,
 * 5..30). Capture uses the global mode (the strictest, as a framework's graph capture);
 * *mode_note says if it had to fall back to relaxed mode. With tel, *clocks receives what it
 * sampled over the timed replays (gpu_telemetry.h); tel NULL: clocks untouched. */
typedef moejit_status (*bench_enqueue_fn)(void *ctx, int i, CUstream stream);
moejit_status bench_time_graph(const mj_gpu *g, CUstream stream, bench_enqueue_fn fn, void *ctx,
                               int forwards, int reps, double *median_us, double *spread,
                               const char **mode_note, gpu_telemetry *tel, gpu_clocks *clocks);

#endif
