/*
 * This file contains the benchmark's GPU telemetry (gpu_telemetry.h): NVML opened with dlopen,
 * the device matched to the CUDA device by PCI address (CUDA_VISIBLE_DEVICES renumbers CUDA's
 * devices, not NVML's), and a thread that samples the SM clock, the board power and the
 * clock-limit reasons every 10 ms while a timing runs.
 */
#include "tools/gpu_telemetry.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* NVML's ABI, as far as it is used here (nvml.h is not part of the CUDA toolkit's headers
 * everywhere): return 0 is NVML_SUCCESS, clock type 1 is NVML_CLOCK_SM. */
enum { k_nvml_success = 0, k_nvml_clock_sm = 1 };
#define k_reason_sw_power_cap 0x4ull
#define k_reason_hw_slowdown 0x8ull
#define k_reason_sw_thermal 0x20ull
#define k_reason_hw_thermal 0x40ull
#define k_reason_hw_power_brake 0x80ull

void gpu_telemetry_open(const mj_gpu *g, gpu_telemetry *t)
{
    memset(t, 0, sizeof *t);
    atomic_init(&t->stop, 0);
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return;
    int (*init)(void) = (int (*)(void))dlsym(lib, "nvmlInit_v2");
    int (*shutdown)(void) = (int (*)(void))dlsym(lib, "nvmlShutdown");
    int (*by_bus)(const char *, void **) = (int (*)(const char *, void **))dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
    t->clock = (int (*)(void *, int, unsigned *))dlsym(lib, "nvmlDeviceGetClockInfo");
    t->power = (int (*)(void *, unsigned *))dlsym(lib, "nvmlDeviceGetPowerUsage");
    t->reasons = (int (*)(void *, unsigned long long *))dlsym(lib, "nvmlDeviceGetCurrentClocksThrottleReasons");
    CUdevice dev;
    int domain = 0, bus = 0, slot = 0;
    const mj_driver *d = g->d;
    if (!init || !shutdown || !by_bus || !t->clock || !t->power || !t->reasons || init() != k_nvml_success) {
        dlclose(lib);
        return;
    }
    if (d->cuDeviceGet(&dev, g->ordinal) != CUDA_SUCCESS ||
        d->cuDeviceGetAttribute(&domain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, dev) != CUDA_SUCCESS ||
        d->cuDeviceGetAttribute(&bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, dev) != CUDA_SUCCESS ||
        d->cuDeviceGetAttribute(&slot, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, dev) != CUDA_SUCCESS) {
        shutdown();
        dlclose(lib);
        return;
    }
    char bus_id[32];
    snprintf(bus_id, sizeof bus_id, "%08x:%02x:%02x.0", (unsigned)domain, (unsigned)bus, (unsigned)slot);
    if (by_bus(bus_id, &t->device) != k_nvml_success) {
        shutdown();
        dlclose(lib);
        return;
    }
    t->lib = lib;
}

static void *sampler(void *arg)
{
    gpu_telemetry *t = arg;
    const struct timespec tick = {0, 10 * 1000 * 1000};
    while (!atomic_load(&t->stop)) {
        unsigned mhz = 0, mw = 0;
        unsigned long long why = 0;
        if (t->clock(t->device, k_nvml_clock_sm, &mhz) == k_nvml_success &&
            t->power(t->device, &mw) == k_nvml_success && t->reasons(t->device, &why) == k_nvml_success) {
            gpu_clocks *a = &t->acc;
            if (a->samples == 0 || (int)mhz < a->sm_mhz_min) a->sm_mhz_min = (int)mhz;
            if (a->samples == 0 || (int)mhz > a->sm_mhz_max) a->sm_mhz_max = (int)mhz;
            a->sm_mhz += mhz;
            a->power_w += mw / 1000.0;
            a->reasons |= why;
            a->samples++;
        }
        nanosleep(&tick, NULL);
    }
    return NULL;
}

void gpu_telemetry_start(gpu_telemetry *t)
{
    memset(&t->acc, 0, sizeof t->acc);
    atomic_store(&t->stop, 0);
    t->running = t->lib && pthread_create(&t->thread, NULL, sampler, t) == 0;
}

void gpu_telemetry_stop(gpu_telemetry *t, gpu_clocks *out)
{
    if (t->running) {
        atomic_store(&t->stop, 1);
        pthread_join(t->thread, NULL);
        t->running = 0;
    }
    *out = t->acc;
    if (out->samples > 0) {
        out->sm_mhz /= out->samples;
        out->power_w /= out->samples;
    }
}

void gpu_telemetry_close(gpu_telemetry *t)
{
    if (t->running) {
        gpu_clocks unused;
        gpu_telemetry_stop(t, &unused);
    }
    if (t->lib) {
        int (*shutdown)(void) = (int (*)(void))dlsym(t->lib, "nvmlShutdown");
        if (shutdown) shutdown();
        dlclose(t->lib);
    }
    memset(t, 0, sizeof *t);
}

const char *gpu_clocks_reason_text(unsigned long long reasons, char *buf, int size)
{
    static const struct { unsigned long long bit; const char *name; } names[] = {
        {k_reason_sw_power_cap, "power cap"},
        {k_reason_hw_slowdown, "HW slowdown"},
        {k_reason_sw_thermal | k_reason_hw_thermal, "thermal"},
        {k_reason_hw_power_brake, "power brake"},
    };
    int at = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if ((reasons & names[i].bit) && at < size)
            at += snprintf(buf + at, (size_t)(size - at), "%s%s", at ? ", " : "", names[i].name);
    return buf;
}
