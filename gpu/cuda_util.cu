/* CUDA device queries behind device.c (which is plain C and includes no
 * CUDA header). Any thread. */
#include "gpu/cuda_util.h"

#include <stdio.h>
#include <string.h>

#include "gpu/cuda_check.cuh"
#include "gpu/cuda_stage.cuh"

extern "C" int gpu__cuda_device_count(void)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* clear the sticky-free error; no GPU is not a failure */
        log_debug("no CUDA device: %s", cudaGetErrorString(e));
        return 0;
    }
    return n;
}

extern "C" int gpu__cuda_mem_info(int index, size_t *free_bytes, size_t *total_bytes)
{
    CUDA_CHECK(cudaSetDevice(index));
    CUDA_CHECK(cudaMemGetInfo(free_bytes, total_bytes));
    return 0;
}

extern "C" int gpu__cuda_host_register(void *p, size_t bytes)
{
    CUDA_CHECK(cudaHostRegister(p, bytes, cudaHostRegisterDefault));
    return 0;
}

extern "C" int gpu__cuda_host_unregister(void *p)
{
    CUDA_CHECK(cudaHostUnregister(p));
    return 0;
}

extern "C" int gpu__cuda_warm(int index)
{
    CUDA_CHECK(cudaSetDevice(index));
    CUDA_CHECK(cudaFree(0)); /* the context */
    gpu_stage::lease l = {};
    if (gpu_stage::acquire(&l, index, gpu_stage::k_default_elems) == 0)
        gpu_stage::release(&l); /* the buffers stay in the GPU's slot */
    return 0;
}

/* The probe's kernel: doubles the value. */
__global__ void probe_kernel(float *v)
{
    *v *= 2.0f;
}

/* A round trip through device memory with a kernel launch between: the
 * first error, quietly (the caller reports it); the last error is
 * cleared. */
static cudaError_t probe(int index)
{
    float *d = NULL;
    const float in = 1.5f;
    float out = 0;
    cudaError_t e = cudaSetDevice(index);
    if (e == cudaSuccess)
        e = cudaMalloc(&d, sizeof in);
    if (e == cudaSuccess)
        e = cudaMemcpy(d, &in, sizeof in, cudaMemcpyHostToDevice);
    if (e == cudaSuccess) {
        probe_kernel<<<1, 1>>>(d);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess)
        e = cudaMemcpy(&out, d, sizeof out, cudaMemcpyDeviceToHost);
    if (e == cudaSuccess)
        e = cudaDeviceSynchronize();
    if (d)
        (void)cudaFree(d);
    (void)cudaGetLastError();
    return e == cudaSuccess && out != 2 * in ? cudaErrorUnknown : e;
}

extern "C" int gpu__cuda_check(int index, char *why, size_t why_len)
{
    cudaError_t e = probe(index);
    if (e == cudaSuccess)
        return 0;
    snprintf(why, why_len, "%s", cudaGetErrorString(e));
    if (e == cudaErrorNoDevice || e == cudaErrorInvalidDevice || e == cudaErrorInsufficientDriver)
        return LDCT_ENOGPU;
    if (e == cudaErrorMemoryAllocation || e == cudaErrorDevicesUnavailable)
        return LDCT_ENOMEM_GPU; /* taken by another process: may pass later */
    return LDCT_ECUDA;
}

extern "C" int gpu__cuda_device_name(int index, char *buf, size_t len)
{
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
    snprintf(buf, len, "%s", prop.name);
    return 0;
}
