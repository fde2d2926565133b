/*
 * gpu_harness.h — device memory for the GPU tests, through moejit's own driver table.
 *
 * This file contains thin, checked wrappers over mj_driver (runtime/driver.h): open a device
 * and make its primary context current, allocate, upload (converting floats to a storage
 * dtype on the way), download, poison and free. Going through the same dlopen'd table as the
 * library means a test binary links no libcuda and still starts (and skips) without a GPU.
 * Every function returns a moejit_status with the message in moejit_last_error().
 */
#ifndef MJ_TEST_GPU_HARNESS_H
#define MJ_TEST_GPU_HARNESS_H

#include <stddef.h>

#include "runtime/driver.h"
#include "core/spec.h"

typedef struct mj_gpu {
    const mj_driver *d;
    int ordinal;
    int cc_major, cc_minor;
    int sms; /* multiprocessors */
    char name[128];
} mj_gpu;

/* Loads the driver, makes device `ordinal`'s primary context current on this thread and
 * fills g. Without a driver or device: MOEJIT_ERR_NO_DRIVER / MOEJIT_ERR_NO_DEVICE. */
moejit_status mj_gpu_open(int ordinal, mj_gpu *g);

/* Allocates max(bytes, 1) bytes (cuMemAlloc rejects 0, and T = 0 still needs valid
 * pointers); *out is 256-byte aligned as cuMemAlloc guarantees. */
moejit_status mj_gpu_alloc(const mj_gpu *g, size_t bytes, CUdeviceptr *out);
/* Frees p; 0 is a no-op. */
void mj_gpu_free(const mj_gpu *g, CUdeviceptr p);

moejit_status mj_gpu_upload(const mj_gpu *g, CUdeviceptr dst, const void *src, size_t bytes);
moejit_status mj_gpu_download(const mj_gpu *g, void *dst, CUdeviceptr src, size_t bytes);

/* Fills bytes of p with `byte` on `stream` (0xFF makes every bf16/fp16/fp32 element NaN). */
moejit_status mj_gpu_poison(const mj_gpu *g, CUdeviceptr p, unsigned char byte, size_t bytes,
                            CUstream stream);

/* Allocates n elements of dt and uploads src converted to dt (RNE). */
moejit_status mj_gpu_upload_values(const mj_gpu *g, const float *src, size_t n, mj_dtype dt,
                                   CUdeviceptr *out);
/* Downloads n elements of dt into floats. */
moejit_status mj_gpu_download_values(const mj_gpu *g, CUdeviceptr src, size_t n, mj_dtype dt,
                                     float *dst);

moejit_status mj_gpu_sync(const mj_gpu *g, CUstream stream);

#endif
