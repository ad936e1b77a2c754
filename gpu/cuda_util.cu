/* CUDA device queries behind device.c (which is plain C and includes no
 * CUDA header). Any thread. */
#include "gpu/cuda_util.h"

#include <stdio.h>

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

extern "C" int gpu__cuda_device_name(int index, char *buf, size_t len)
{
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
    snprintf(buf, len, "%s", prop.name);
    return 0;
}
