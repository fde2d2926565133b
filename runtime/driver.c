/*
 * This file contains the CUDA driver loader: libcuda.so.1 opened with dlopen once per
 * process, every entry point of mj_driver resolved through cuGetProcAddress, then cuInit(0).
 *
 * moejit never links libcuda, so a machine without a GPU can parse, generate, compile and
 * cache; only what needs the device fails, with MOEJIT_ERR_NO_DRIVER / _NO_DEVICE. The
 * outcome of the one load (table or failure) is written inside pthread_once and read-only
 * afterwards, so every later call sees the same status and message without a lock.
 * moejit_driver_version lives here too: it needs nothing but the driver.
 */
#include "runtime/driver.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/settings.h"
#include "core/status.h"

/* The CUDA version whose signatures mj_driver's fields have. Asking for this version makes
 * cuGetProcAddress hand back e.g. cuMemAlloc_v2 for "cuMemAlloc" and the pre-13.0
 * cuCtxGetDevice(CUdevice *), whatever newer versions the installed driver also has. */
enum { k_cuda_api_version = 12000 };


typedef CUresult (*get_proc_v2_fn)(const char *, void **, int, cuuint64_t,
                                   CUdriverProcAddressQueryResult *);
typedef CUresult (*get_proc_v1_fn)(const char *, void **, int, cuuint64_t);

/* One row per mj_driver field: the name cuGetProcAddress knows it by, and where it goes.
 * NOTE: cuda.h #defines many names to versioned ones (cuMemAlloc -> cuMemAlloc_v2), and
 * offsetof below sees the expanded field name, exactly as driver.h's struct does. The strings
 * are base names, which cuGetProcAddress resolves to the version for k_cuda_api_version. */
typedef struct entry_point {
    const char *name;
    size_t offset;
} entry_point;

#define ENTRY(name, field) {name, offsetof(mj_driver, field)}

static const entry_point k_entry_points[] = {
    ENTRY("cuInit", cuInit),
    ENTRY("cuDriverGetVersion", cuDriverGetVersion),
    ENTRY("cuGetErrorName", cuGetErrorName),
    ENTRY("cuGetErrorString", cuGetErrorString),
    ENTRY("cuDeviceGetCount", cuDeviceGetCount),
    ENTRY("cuDeviceGet", cuDeviceGet),
    ENTRY("cuDeviceGetName", cuDeviceGetName),
    ENTRY("cuDeviceGetAttribute", cuDeviceGetAttribute),
    ENTRY("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain),
    ENTRY("cuDevicePrimaryCtxRelease", cuDevicePrimaryCtxRelease),
    ENTRY("cuCtxSetCurrent", cuCtxSetCurrent),
    ENTRY("cuCtxGetCurrent", cuCtxGetCurrent),
    ENTRY("cuCtxGetDevice", cuCtxGetDevice),
    ENTRY("cuCtxSynchronize", cuCtxSynchronize),
    ENTRY("cuLibraryLoadData", cuLibraryLoadData),
    ENTRY("cuLibraryUnload", cuLibraryUnload),
    ENTRY("cuLibraryGetKernel", cuLibraryGetKernel),
    ENTRY("cuKernelGetFunction", cuKernelGetFunction),
    ENTRY("cuKernelSetAttribute", cuKernelSetAttribute),
    ENTRY("cuKernelGetAttribute", cuKernelGetAttribute),
    ENTRY("cuLaunchKernel", cuLaunchKernel),
    ENTRY("cuLaunchKernelEx", cuLaunchKernelEx),
    ENTRY("cuMemAlloc", cuMemAlloc),
    ENTRY("cuMemFree", cuMemFree),
    ENTRY("cuMemcpyHtoD", cuMemcpyHtoD),
    ENTRY("cuMemcpyDtoH", cuMemcpyDtoH),
    ENTRY("cuMemsetD8", cuMemsetD8),
    ENTRY("cuMemsetD32Async", cuMemsetD32Async),
    ENTRY("cuMemsetD8Async", cuMemsetD8Async),
    ENTRY("cuStreamCreate", cuStreamCreate),
    ENTRY("cuStreamDestroy", cuStreamDestroy),
    ENTRY("cuStreamSynchronize", cuStreamSynchronize),
    ENTRY("cuStreamBeginCapture", cuStreamBeginCapture),
    ENTRY("cuStreamEndCapture", cuStreamEndCapture),
    ENTRY("cuStreamIsCapturing", cuStreamIsCapturing),
    /* The table's (exec, graph, flags) signature is cuGraphInstantiateWithFlags'; the base
     * name cuGraphInstantiate meant the 5-argument form before CUDA 12. */
    ENTRY("cuGraphInstantiateWithFlags", cuGraphInstantiate),
    ENTRY("cuGraphLaunch", cuGraphLaunch),
    ENTRY("cuGraphExecDestroy", cuGraphExecDestroy),
    ENTRY("cuGraphDestroy", cuGraphDestroy),
    ENTRY("cuEventCreate", cuEventCreate),
    ENTRY("cuEventDestroy", cuEventDestroy),
    ENTRY("cuEventRecord", cuEventRecord),
    ENTRY("cuEventSynchronize", cuEventSynchronize),
    ENTRY("cuEventElapsedTime", cuEventElapsedTime),
    ENTRY("cuOccupancyMaxActiveClusters", cuOccupancyMaxActiveClusters),
    ENTRY("cuTensorMapEncodeTiled", cuTensorMapEncodeTiled),
};

_Static_assert(sizeof k_entry_points / sizeof k_entry_points[0] ==
                   sizeof(mj_driver) / sizeof(CUresult (*)(void)),
               "every mj_driver field needs a row in k_entry_points");

/* Written only inside pthread_once (which orders them before every reader). */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static mj_driver g_driver;
static moejit_status g_status;
static char g_message[MJ_ERROR_MAX];

/* Records the load's failure; mj_driver_get re-raises it on every call. */
static void remember(moejit_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void remember(moejit_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_message, sizeof g_message, fmt, ap);
    va_end(ap);
    g_status = status;
}

/* The driver library is process-wide (one libcuda per process): its setting is read through
 * the settings table once, here, under pthread_once. */
static void load_driver(void)
{
    static mj_settings s; /* written only inside pthread_once */
    if (mj_settings_resolve_one(MJ_SETTING_LIBCUDA, NULL, NULL, &s) != MOEJIT_OK) {
        remember(MOEJIT_ERR_NO_DRIVER, "no CUDA driver: %s", moejit_last_error());
        return;
    }
    const char *path = s.libcuda;

    dlerror();
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        if (why)
            remember(MOEJIT_ERR_NO_DRIVER, "no CUDA driver: %s", why);
        else
            remember(MOEJIT_ERR_NO_DRIVER, "no CUDA driver: %s cannot be loaded", path);
        return;
    }

    /* cuGetProcAddress_v2 (CUDA 12.0+) reports why a symbol is missing; drivers before it
     * export only the 4-argument cuGetProcAddress. */
    get_proc_v2_fn get_v2 = (get_proc_v2_fn)dlsym(lib, "cuGetProcAddress_v2");
    get_proc_v1_fn get_v1 = get_v2 ? NULL : (get_proc_v1_fn)dlsym(lib, "cuGetProcAddress");
    if (!get_v2 && !get_v1) {
        remember(MOEJIT_ERR_NO_DRIVER,
                 "no CUDA driver: %s has no cuGetProcAddress (a CUDA 12.0 or newer driver "
                 "is required)", path);
        return; /* NOTE: lib stays open; a failed probe is not worth a dlclose race */
    }

    mj_driver table;
    memset(&table, 0, sizeof table);
    for (size_t i = 0; i < sizeof k_entry_points / sizeof k_entry_points[0]; i++) {
        const entry_point *e = &k_entry_points[i];
        void *fn = NULL;
        CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SUCCESS;
        CUresult r = get_v2 ? get_v2(e->name, &fn, k_cuda_api_version,
                                     CU_GET_PROC_ADDRESS_DEFAULT, &found)
                            : get_v1(e->name, &fn, k_cuda_api_version,
                                     CU_GET_PROC_ADDRESS_DEFAULT);
        if (r == CUDA_ERROR_STUB_LIBRARY) {
            /* The toolkit's lib64/stubs/libcuda.so links builds but is no driver. */
            remember(MOEJIT_ERR_NO_DRIVER,
                     "no CUDA driver: %s is the CUDA toolkit's stub library "
                     "(CUDA_ERROR_STUB_LIBRARY = %d), not a driver; install the NVIDIA driver or "
                     "remove the stubs directory from the library path", path, (int)r);
            return;
        }
        if (r != CUDA_SUCCESS || !fn || found != CU_GET_PROC_ADDRESS_SUCCESS) {
            remember(MOEJIT_ERR_NO_DRIVER,
                     "no CUDA driver: %s lacks %s (CUresult %d; a CUDA 12.0 or newer driver is "
                     "required)", path, e->name, r != CUDA_SUCCESS ? (int)r : (int)found);
            return;
        }
        memcpy((char *)&table + e->offset, &fn, sizeof fn);
    }

    CUresult r = table.cuInit(0);
    if (r == CUDA_ERROR_NO_DEVICE) {
        remember(MOEJIT_ERR_NO_DEVICE, "no CUDA device: cuInit found no usable device "
                 "(CUDA_ERROR_NO_DEVICE = %d)", (int)r);
        return;
    }
    if (r != CUDA_SUCCESS) {
        const char *name = NULL, *text = NULL;
        if (table.cuGetErrorName(r, &name) != CUDA_SUCCESS) name = NULL;
        if (table.cuGetErrorString(r, &text) != CUDA_SUCCESS) text = NULL;
        remember(MOEJIT_ERR_CUDA, "cuInit: %s (%s, CUresult %d)", name ? name : "CUDA error",
                 text ? text : "no description", (int)r);
        return;
    }
    g_driver = table;
    g_status = MOEJIT_OK;
}

moejit_status mj_driver_get(const mj_driver **out)
{
    pthread_once(&g_once, load_driver);
    if (g_status != MOEJIT_OK) {
        if (out) *out = NULL;
        return mj_fail(g_status, "%s", g_message);
    }
    if (out) *out = &g_driver;
    return MOEJIT_OK;
}

moejit_status mj_cuda_fail(const mj_driver *d, CUresult r, const char *what)
{
    const char *name = NULL, *text = NULL;
    if (d && d->cuGetErrorName && d->cuGetErrorName(r, &name) != CUDA_SUCCESS) name = NULL;
    if (d && d->cuGetErrorString && d->cuGetErrorString(r, &text) != CUDA_SUCCESS) text = NULL;
    if (name)
        return mj_fail(MOEJIT_ERR_CUDA, "%s: %s (%s)", what, name, text ? text : "no description");
    return mj_fail(MOEJIT_ERR_CUDA, "%s: CUresult %d", what, (int)r);
}

/* Resolves ordinal to a CUdevice, naming the valid range when it is out of it. */
static moejit_status device_of(const mj_driver *d, int ordinal, CUdevice *dev)
{
    int count = 0;
    CUresult r = d->cuDeviceGetCount(&count);
    if (r != CUDA_SUCCESS) return mj_cuda_fail(d, r, "cuDeviceGetCount");
    if (ordinal < 0 || ordinal >= count) {
        if (count == 0)
            return mj_fail(MOEJIT_ERR_NO_DEVICE, "device: no CUDA device present (asked for %d)",
                           ordinal);
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "device: ordinal %d out of range; allowed: 0..%d (%d device%s)", ordinal,
                       count - 1, count, count == 1 ? "" : "s");
    }
    r = d->cuDeviceGet(dev, ordinal);
    if (r != CUDA_SUCCESS) return mj_cuda_fail(d, r, "cuDeviceGet");
    return MOEJIT_OK;
}

static moejit_status cc_of(const mj_driver *d, CUdevice dev, int *major, int *minor)
{
    int ma = 0, mi = 0;
    CUresult r = d->cuDeviceGetAttribute(&ma, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
    if (r == CUDA_SUCCESS)
        r = d->cuDeviceGetAttribute(&mi, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
    if (r != CUDA_SUCCESS) return mj_cuda_fail(d, r, "cuDeviceGetAttribute(compute capability)");
    if (major) *major = ma;
    if (minor) *minor = mi;
    return MOEJIT_OK;
}

moejit_status mj_driver_device_cc(int ordinal, int *cc_major, int *cc_minor)
{
    const mj_driver *d;
    CUdevice dev;
    moejit_status st = mj_driver_get(&d);
    if (st != MOEJIT_OK) return st;
    if ((st = device_of(d, ordinal, &dev)) != MOEJIT_OK) return st;
    return cc_of(d, dev, cc_major, cc_minor);
}

moejit_status mj_driver_ensure_context(int ordinal, int *cc_major, int *cc_minor)
{
    const mj_driver *d;
    CUcontext ctx = NULL;
    CUdevice dev;
    moejit_status st = mj_driver_get(&d);
    if (st != MOEJIT_OK) return st;

    CUresult r = d->cuCtxGetCurrent(&ctx);
    if (r != CUDA_SUCCESS) return mj_cuda_fail(d, r, "cuCtxGetCurrent");
    if (ctx) {
        /* The caller's context wins: it is where moejit_moe_forward will run. */
        r = d->cuCtxGetDevice(&dev);
        if (r != CUDA_SUCCESS) return mj_cuda_fail(d, r, "cuCtxGetDevice");
        return cc_of(d, dev, cc_major, cc_minor);
    }
    if ((st = device_of(d, ordinal, &dev)) != MOEJIT_OK) return st;
    /* NOTE: the retained primary context is never released, as with the runtime API: a
     * release would destroy it under kernels the caller still uses. */
    r = d->cuDevicePrimaryCtxRetain(&ctx, dev);
    if (r != CUDA_SUCCESS) return mj_cuda_fail(d, r, "cuDevicePrimaryCtxRetain");
    r = d->cuCtxSetCurrent(ctx);
    if (r != CUDA_SUCCESS) return mj_cuda_fail(d, r, "cuCtxSetCurrent");
    return cc_of(d, dev, cc_major, cc_minor);
}

moejit_status moejit_driver_version(int *version)
{
    if (!version) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "driver_version: version must not be NULL");
    const mj_driver *d;
    moejit_status st = mj_driver_get(&d);
    if (st != MOEJIT_OK) return st;
    CUresult r = d->cuDriverGetVersion(version);
    if (r != CUDA_SUCCESS) return mj_cuda_fail(d, r, "cuDriverGetVersion");
    return MOEJIT_OK;
}
