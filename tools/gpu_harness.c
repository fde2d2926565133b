/*
 * gpu_harness.c — checked device-memory helpers for the GPU tests (see gpu_harness.h).
 *
 * This file contains nothing but driver calls and their error checks: every CUresult is
 * turned into a status naming the call, since "exit code 0 proves nothing" on a GPU.
 */
#include "tools/gpu_harness.h"

#include <stdlib.h>
#include <string.h>

#include "core/halfconv.h"
#include "core/status.h"

moejit_status mj_gpu_open(int ordinal, mj_gpu *g)
{
    memset(g, 0, sizeof *g);
    moejit_status st = mj_driver_get(&g->d);
    if (st)
        return st;
    st = mj_driver_ensure_context(ordinal, &g->cc_major, &g->cc_minor);
    if (st)
        return st;
    g->ordinal = ordinal;
    CUdevice dev;
    CUresult r = g->d->cuDeviceGet(&dev, ordinal);
    if (r != CUDA_SUCCESS)
        return mj_cuda_fail(g->d, r, "cuDeviceGet");
    r = g->d->cuDeviceGetName(g->name, (int)sizeof g->name, dev);
    if (r != CUDA_SUCCESS)
        return mj_cuda_fail(g->d, r, "cuDeviceGetName");
    r = g->d->cuDeviceGetAttribute(&g->sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
    if (r != CUDA_SUCCESS)
        return mj_cuda_fail(g->d, r, "cuDeviceGetAttribute(multiprocessor count)");
    return MOEJIT_OK;
}

moejit_status mj_gpu_alloc(const mj_gpu *g, size_t bytes, CUdeviceptr *out)
{
    *out = 0;
    CUresult r = g->d->cuMemAlloc(out, bytes ? bytes : 1);
    if (r != CUDA_SUCCESS)
        return mj_cuda_fail(g->d, r, "cuMemAlloc");
    return MOEJIT_OK;
}

void mj_gpu_free(const mj_gpu *g, CUdeviceptr p)
{
    if (p)
        g->d->cuMemFree(p);
}

moejit_status mj_gpu_upload(const mj_gpu *g, CUdeviceptr dst, const void *src, size_t bytes)
{
    if (!bytes)
        return MOEJIT_OK;
    CUresult r = g->d->cuMemcpyHtoD(dst, src, bytes);
    return r == CUDA_SUCCESS ? MOEJIT_OK : mj_cuda_fail(g->d, r, "cuMemcpyHtoD");
}

moejit_status mj_gpu_download(const mj_gpu *g, void *dst, CUdeviceptr src, size_t bytes)
{
    if (!bytes)
        return MOEJIT_OK;
    CUresult r = g->d->cuMemcpyDtoH(dst, src, bytes);
    return r == CUDA_SUCCESS ? MOEJIT_OK : mj_cuda_fail(g->d, r, "cuMemcpyDtoH");
}

moejit_status mj_gpu_poison(const mj_gpu *g, CUdeviceptr p, unsigned char byte, size_t bytes,
                            CUstream stream)
{
    if (!bytes)
        return MOEJIT_OK;
    CUresult r = g->d->cuMemsetD8Async(p, byte, bytes, stream);
    return r == CUDA_SUCCESS ? MOEJIT_OK : mj_cuda_fail(g->d, r, "cuMemsetD8Async (poison)");
}

moejit_status mj_gpu_upload_values(const mj_gpu *g, const float *src, size_t n, mj_dtype dt,
                                   CUdeviceptr *out)
{
    size_t bytes = n * mj_half_dtype_size(dt);
    void *tmp = malloc(bytes ? bytes : 1);
    if (!tmp)
        return mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "gpu harness: out of host memory (%zu bytes)", bytes);
    mj_half_pack(src, n, dt, tmp);
    moejit_status st = mj_gpu_alloc(g, bytes, out);
    if (!st)
        st = mj_gpu_upload(g, *out, tmp, bytes);
    if (st) {
        mj_gpu_free(g, *out);
        *out = 0;
    }
    free(tmp);
    return st;
}

moejit_status mj_gpu_download_values(const mj_gpu *g, CUdeviceptr src, size_t n, mj_dtype dt,
                                     float *dst)
{
    size_t bytes = n * mj_half_dtype_size(dt);
    void *tmp = malloc(bytes ? bytes : 1);
    if (!tmp)
        return mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "gpu harness: out of host memory (%zu bytes)", bytes);
    moejit_status st = mj_gpu_download(g, tmp, src, bytes);
    if (!st)
        mj_half_unpack(tmp, n, dt, dst);
    free(tmp);
    return st;
}

moejit_status mj_gpu_sync(const mj_gpu *g, CUstream stream)
{
    CUresult r = g->d->cuStreamSynchronize(stream);
    return r == CUDA_SUCCESS ? MOEJIT_OK : mj_cuda_fail(g->d, r, "cuStreamSynchronize");
}
