/*
 * This file contains a fake libcuda.so.1 for the CPU tests of the driver loader, the module
 * loader and the registry: tests/lib/fake_cuda.c compiles it into a shared library at test
 * time, and tests point MOEJIT_LIBCUDA at it. It is not part of any test binary.
 *
 * It needs no cuda.h: CUresult and the enums are ints, handles are pointers, CUdevice an int.
 * Behaviour comes from $FAKE_CUDA (read once, at cuGetProcAddress time):
 *   ""/unset          one device, compute capability $FAKE_CUDA_CC (default "90"), all is well
 *   "nodevice"        cuInit returns CUDA_ERROR_NO_DEVICE
 *   "initfail"        cuInit returns CUDA_ERROR_UNKNOWN
 *   "missing:NAME"    cuGetProcAddress does not know NAME
 * and $FAKE_CUDA_CAPTURING=1 (read at every call) makes every stream report an active capture.
 * Launches, their attribute and memset calls succeed and are counted (a forward's launch
 * sequence runs to the end); the device has 132 SMs.
 * cuLibraryLoadData accepts an ELF image (size from its section header table) and
 * cuLibraryGetKernel finds a kernel when its name occurs in that image, which is true of real
 * cubins (the symbol table) and of the tests' synthetic ones. Counters for tests are exported.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

enum {
    SUCCESS = 0, INVALID_VALUE = 1, NOT_INITIALIZED = 3, INVALID_DEVICE = 101,
    NO_DEVICE = 100, INVALID_IMAGE = 200, NOT_FOUND = 500, NOT_SUPPORTED = 801, UNKNOWN = 999
};

EXPORT int fake_libraries_loaded;   /* live cuLibraryLoadData results */
EXPORT int fake_unload_calls;
EXPORT int fake_retain_calls;
EXPORT int fake_init_calls;
EXPORT int fake_launches;           /* cuLaunchKernel and cuLaunchKernelEx calls */
EXPORT int fake_capture_queries;    /* cuStreamIsCapturing calls */

static int g_initialized;
static void *g_current;             /* the "current context" (one thread is enough here) */
static int g_primary = 1;           /* the primary context's identity */

typedef struct fake_library {
    const unsigned char *image;
    size_t size;
} fake_library;

static const char *mode(void)
{
    const char *m = getenv("FAKE_CUDA");
    return m ? m : "";
}

static int cuInit(unsigned flags)
{
    (void)flags;
    fake_init_calls++;
    if (strcmp(mode(), "nodevice") == 0) return NO_DEVICE;
    if (strcmp(mode(), "initfail") == 0) return UNKNOWN;
    g_initialized = 1;
    return SUCCESS;
}

static int cuDriverGetVersion(int *v) { *v = 12040; return SUCCESS; }

static int cuGetErrorName(int r, const char **s)
{
    switch (r) {
    case SUCCESS: *s = "CUDA_SUCCESS"; return SUCCESS;
    case INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; return SUCCESS;
    case INVALID_DEVICE: *s = "CUDA_ERROR_INVALID_DEVICE"; return SUCCESS;
    case INVALID_IMAGE: *s = "CUDA_ERROR_INVALID_IMAGE"; return SUCCESS;
    case NOT_FOUND: *s = "CUDA_ERROR_NOT_FOUND"; return SUCCESS;
    case UNKNOWN: *s = "CUDA_ERROR_UNKNOWN"; return SUCCESS;
    default: *s = NULL; return INVALID_VALUE;
    }
}

static int cuGetErrorString(int r, const char **s)
{
    int st = cuGetErrorName(r, s);
    if (st == SUCCESS) *s = "fake description";
    return st;
}

static int cuDeviceGetCount(int *n) { *n = g_initialized ? 1 : 0; return g_initialized ? SUCCESS : NOT_INITIALIZED; }

static int cuDeviceGet(int *dev, int ordinal)
{
    if (ordinal != 0) return INVALID_DEVICE;
    *dev = 0;
    return SUCCESS;
}

static int cuDeviceGetAttribute(int *v, int attr, int dev)
{
    const char *cc = getenv("FAKE_CUDA_CC");
    int n = cc ? atoi(cc) : 90;
    if (dev != 0) return INVALID_DEVICE;
    if (attr == 75) { *v = n / 10; return SUCCESS; } /* COMPUTE_CAPABILITY_MAJOR */
    if (attr == 76) { *v = n % 10; return SUCCESS; } /* COMPUTE_CAPABILITY_MINOR */
    if (attr == 16) { *v = 132; return SUCCESS; }    /* MULTIPROCESSOR_COUNT */
    return INVALID_VALUE;
}

static int cuDevicePrimaryCtxRetain(void **ctx, int dev)
{
    if (dev != 0) return INVALID_DEVICE;
    fake_retain_calls++;
    *ctx = &g_primary;
    return SUCCESS;
}

static int cuCtxSetCurrent(void *ctx) { g_current = ctx; return SUCCESS; }
static int cuCtxGetCurrent(void **ctx) { *ctx = g_current; return SUCCESS; }
static int cuCtxGetDevice(int *dev) { *dev = 0; return g_current ? SUCCESS : INVALID_VALUE; }

/* The size of an ELF64 image: its section header table ends it. */
static size_t elf_size(const unsigned char *p)
{
    uint64_t shoff;
    uint16_t shentsize, shnum;
    memcpy(&shoff, p + 0x28, 8);
    memcpy(&shentsize, p + 0x3A, 2);
    memcpy(&shnum, p + 0x3C, 2);
    return (size_t)(shoff + (uint64_t)shentsize * shnum);
}

static int cuLibraryLoadData(void **lib, const void *code, void *o, void *ov, unsigned n,
                             void *lo, void *lov, unsigned ln)
{
    (void)o, (void)ov, (void)n, (void)lo, (void)lov, (void)ln;
    const unsigned char *p = code;
    if (!g_initialized) return NOT_INITIALIZED;
    if (!p || memcmp(p, "\177ELF", 4) != 0 || p[4] != 2) return INVALID_IMAGE;
    fake_library *l = malloc(sizeof *l);
    if (!l) return UNKNOWN;
    l->image = p;
    l->size = elf_size(p);
    fake_libraries_loaded++;
    *lib = l;
    return SUCCESS;
}

static int cuLibraryUnload(void *lib)
{
    fake_unload_calls++;
    fake_libraries_loaded--;
    free(lib);
    return SUCCESS;
}

static int cuLibraryGetKernel(void **kernel, void *lib, const char *name)
{
    fake_library *l = lib;
    size_t n = strlen(name);
    for (size_t i = 0; i + n <= l->size; i++)
        if (memcmp(l->image + i, name, n) == 0 && (i + n == l->size || l->image[i + n] == 0)) {
            *kernel = (void *)(l->image + i);
            return SUCCESS;
        }
    return NOT_FOUND;
}

static int cuStreamIsCapturing(void *stream, int *status)
{
    (void)stream;
    const char *c = getenv("FAKE_CUDA_CAPTURING");
    fake_capture_queries++;
    *status = c && strcmp(c, "1") == 0 ? 1 : 0; /* CU_STREAM_CAPTURE_STATUS_ACTIVE : _NONE */
    return SUCCESS;
}

/* A launch's arguments are not looked at: counting it is what the tests need. */
static int count_launch(void)
{
    fake_launches++;
    return g_initialized ? SUCCESS : NOT_INITIALIZED;
}

static int succeed(void) { return SUCCESS; }

/* cuKernelGetFunction: the kernel handle is the function handle. */
static int cuKernelGetFunction(void **fn, void *kernel)
{
    *fn = kernel;
    return SUCCESS;
}

/* Everything the tests never call answers "not supported". */
static int unsupported(void) { return NOT_SUPPORTED; }

typedef struct symbol {
    const char *name;
    void *fn;
} symbol;

static const symbol k_symbols[] = {
    {"cuInit", (void *)cuInit},
    {"cuDriverGetVersion", (void *)cuDriverGetVersion},
    {"cuGetErrorName", (void *)cuGetErrorName},
    {"cuGetErrorString", (void *)cuGetErrorString},
    {"cuDeviceGetCount", (void *)cuDeviceGetCount},
    {"cuDeviceGet", (void *)cuDeviceGet},
    {"cuDeviceGetAttribute", (void *)cuDeviceGetAttribute},
    {"cuDevicePrimaryCtxRetain", (void *)cuDevicePrimaryCtxRetain},
    {"cuCtxSetCurrent", (void *)cuCtxSetCurrent},
    {"cuCtxGetCurrent", (void *)cuCtxGetCurrent},
    {"cuCtxGetDevice", (void *)cuCtxGetDevice},
    {"cuLibraryLoadData", (void *)cuLibraryLoadData},
    {"cuLibraryUnload", (void *)cuLibraryUnload},
    {"cuLibraryGetKernel", (void *)cuLibraryGetKernel},
    {"cuStreamIsCapturing", (void *)cuStreamIsCapturing},
    {"cuLaunchKernel", (void *)count_launch},
    {"cuLaunchKernelEx", (void *)count_launch},
    {"cuKernelSetAttribute", (void *)succeed},
    {"cuKernelGetFunction", (void *)cuKernelGetFunction},
    {"cuMemsetD32Async", (void *)succeed},
};

/* Names the loader must ask for by their base name: a versioned name here is a loader bug. */
EXPORT int fake_versioned_requests;

EXPORT int cuGetProcAddress_v2(const char *name, void **fn, int version, unsigned long long flags,
                               int *status)
{
    (void)flags;
    const char *m = mode();
    *fn = NULL;
    if (version < 12000) return INVALID_VALUE;
    if (strstr(name, "_v2") || strstr(name, "_ptsz") || strstr(name, "_ptds"))
        fake_versioned_requests++;
    if (strncmp(m, "missing:", 8) == 0 && strcmp(m + 8, name) == 0) {
        if (status) *status = 1; /* CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND */
        return NOT_FOUND;
    }
    for (size_t i = 0; i < sizeof k_symbols / sizeof k_symbols[0]; i++)
        if (strcmp(k_symbols[i].name, name) == 0) *fn = k_symbols[i].fn;
    if (!*fn) *fn = (void *)unsupported;
    if (status) *status = 0;
    return SUCCESS;
}
