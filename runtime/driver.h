/*
 * driver.h — the CUDA driver API, loaded at run time with dlopen("libcuda.so.1").
 *
 * moejit never links libcuda, so everything up to launching (parsing, code generation,
 * compiling, caching) works on a machine without a GPU or driver; only calls that need the
 * device fail, with MOEJIT_ERR_NO_DRIVER. Entry points are resolved once through
 * cuGetProcAddress, which returns the right versioned symbol (cuMemAlloc_v2 ...). The table
 * is also the seam where tests can substitute functions (SQLite's aSyscall[] model).
 */
#ifndef MJ_DRIVER_H
#define MJ_DRIVER_H

#include <cuda.h>

#include "moejit.h"

typedef struct mj_driver {
    CUresult (*cuInit)(unsigned int);
    CUresult (*cuDriverGetVersion)(int *);
    CUresult (*cuGetErrorName)(CUresult, const char **);
    CUresult (*cuGetErrorString)(CUresult, const char **);
    CUresult (*cuDeviceGetCount)(int *);
    CUresult (*cuDeviceGet)(CUdevice *, int);
    CUresult (*cuDeviceGetName)(char *, int, CUdevice);
    CUresult (*cuDeviceGetAttribute)(int *, CUdevice_attribute, CUdevice);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
    CUresult (*cuCtxSetCurrent)(CUcontext);
    CUresult (*cuCtxGetCurrent)(CUcontext *);
    CUresult (*cuCtxGetDevice)(CUdevice *);
    CUresult (*cuCtxSynchronize)(void);
    CUresult (*cuLibraryLoadData)(CUlibrary *, const void *, CUjit_option *, void **, unsigned int,
                                  CUlibraryOption *, void **, unsigned int);
    CUresult (*cuLibraryUnload)(CUlibrary);
    CUresult (*cuLibraryGetKernel)(CUkernel *, CUlibrary, const char *);
    CUresult (*cuKernelGetFunction)(CUfunction *, CUkernel);
    CUresult (*cuKernelSetAttribute)(CUfunction_attribute, int, CUkernel, CUdevice);
    CUresult (*cuKernelGetAttribute)(int *, CUfunction_attribute, CUkernel, CUdevice);
    CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                               unsigned, unsigned, CUstream, void **, void **);
    /* backends mma and wgmma on sm_90+: launches with programmatic dependent launch */
    CUresult (*cuLaunchKernelEx)(const CUlaunchConfig *, CUfunction, void **, void **);
    CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
    CUresult (*cuMemFree)(CUdeviceptr);
    CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
    CUresult (*cuMemcpyDtoH)(void *, CUdeviceptr, size_t);
    CUresult (*cuMemsetD8)(CUdeviceptr, unsigned char, size_t);
    CUresult (*cuMemsetD32Async)(CUdeviceptr, unsigned int, size_t, CUstream);
    CUresult (*cuMemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
    CUresult (*cuStreamCreate)(CUstream *, unsigned int);
    CUresult (*cuStreamDestroy)(CUstream);
    CUresult (*cuStreamSynchronize)(CUstream);
    CUresult (*cuStreamBeginCapture)(CUstream, CUstreamCaptureMode);
    CUresult (*cuStreamEndCapture)(CUstream, CUgraph *);
    /* a forward on a capturing stream never compiles or loads a module (runtime/path_modules.h) */
    CUresult (*cuStreamIsCapturing)(CUstream, CUstreamCaptureStatus *);
    CUresult (*cuGraphInstantiate)(CUgraphExec *, CUgraph, unsigned long long);
    CUresult (*cuGraphLaunch)(CUgraphExec, CUstream);
    CUresult (*cuGraphExecDestroy)(CUgraphExec);
    CUresult (*cuGraphDestroy)(CUgraph);
    CUresult (*cuEventCreate)(CUevent *, unsigned int);
    CUresult (*cuEventDestroy)(CUevent);
    CUresult (*cuEventRecord)(CUevent, CUstream);
    CUresult (*cuEventSynchronize)(CUevent);
    CUresult (*cuEventElapsedTime)(float *, CUevent, CUevent);
    /* backend wgmma, pair path: how many clusters of two of its GEMMs are resident at once */
    CUresult (*cuOccupancyMaxActiveClusters)(int *, CUfunction, const CUlaunchConfig *);
    /* backend wgmma: the TMA descriptors of W1 and W2, encoded on the host per forward */
    CUresult (*cuTensorMapEncodeTiled)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,
                                       const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,
                                       const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                                       CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
} mj_driver;

/* Loads libcuda.so.1 and cuInit(0)s it once per process (thread-safe). Without a driver:
 * MOEJIT_ERR_NO_DRIVER ("no CUDA driver: libcuda.so.1: cannot open shared object file").
 * A driver with no device: MOEJIT_ERR_NO_DEVICE. */
moejit_status mj_driver_get(const mj_driver **out);

/* Turns a failed CUresult into MOEJIT_ERR_CUDA with "what: CUDA_ERROR_X (description)". */
moejit_status mj_cuda_fail(const mj_driver *d, CUresult r, const char *what);

/* Compute capability of device `ordinal` (for arch=native); needs no context. */
moejit_status mj_driver_device_cc(int ordinal, int *cc_major, int *cc_minor);

/* Makes device `ordinal`'s primary context current on this thread if none is current
 * (the runtime API's behaviour), and returns its compute capability. */
moejit_status mj_driver_ensure_context(int ordinal, int *cc_major, int *cc_minor);

#endif
