/*
 * gpu_telemetry.h — the SM clock, board power and clock-limit reasons of the benchmark's GPU
 * while a timing runs, read through NVML (libnvidia-ml.so.1, opened with dlopen like the
 * driver, so the tools build and run without it).
 *
 * Why the benchmark records them: on an H200 a long tensor-core replay is held at ~1.4-1.5 GHz
 * by the 700 W board limit (docs/PERFORMANCE.md, "How the layer is measured"), so a layer's time depends on
 * the clock the board allowed, which differs between machines, calls and preceding work. A row
 * that carries its clock says which of two runs was faster hardware and which faster code.
 *
 * A sampler thread polls every 10 ms between start and stop. What it reads lags: NVML's power
 * on Hopper is an average over about the last second, and a timing shorter than ~0.1 s gets
 * few clock samples, so a short row reports mostly the state the rows before it left the board
 * in (which is also why its time can differ from the same row run alone). Without NVML (or without the device in it) every call
 * succeeds and the summary has no samples; the tools print "-".
 */
#ifndef MJ_CLI_GPU_TELEMETRY_H
#define MJ_CLI_GPU_TELEMETRY_H

#include <pthread.h>
#include <stdatomic.h>

#include "tools/gpu_harness.h"

/* What a timing saw. samples == 0: no NVML. */
typedef struct gpu_clocks {
    int samples;
    double sm_mhz;                /* mean SM clock over the samples */
    int sm_mhz_min, sm_mhz_max;
    double power_w;               /* mean board power */
    unsigned long long reasons;   /* OR of NVML's clock-limit reasons over the samples */
} gpu_clocks;

typedef struct gpu_telemetry {
    void *lib;    /* libnvidia-ml.so.1, or NULL */
    void *device; /* nvmlDevice_t of the benchmark's GPU */
    int (*clock)(void *, int, unsigned *);
    int (*power)(void *, unsigned *);
    int (*reasons)(void *, unsigned long long *);
    pthread_t thread;
    int running;
    atomic_int stop;
    gpu_clocks acc; /* the sampler's sums (sm_mhz, power_w hold sums until stop) */
} gpu_telemetry;

/* Opens NVML and finds g's device by its PCI address; never fails (t->lib NULL: no data). */
void gpu_telemetry_open(const mj_gpu *g, gpu_telemetry *t);
/* Starts sampling (no-op without NVML). */
void gpu_telemetry_start(gpu_telemetry *t);
/* Stops sampling and returns what it saw. */
void gpu_telemetry_stop(gpu_telemetry *t, gpu_clocks *out);
void gpu_telemetry_close(gpu_telemetry *t);

/* "power cap", "thermal", "power cap, thermal", ... or "" for no limiting reason among those
 * that lower the clock under load (power cap, HW slowdown, thermal, power brake). */
const char *gpu_clocks_reason_text(unsigned long long reasons, char *buf, int size);

#endif
