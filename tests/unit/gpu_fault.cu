/* Test-only (check_gpu_device): breaks the CUDA context of a GPU the way a
 * faulty kernel or a hardware fault does, with a kernel that writes to an
 * address no allocation holds. The error is sticky: every later CUDA call
 * of the process on that GPU fails until the device is reset. */
#include <cuda_runtime.h>
#include <stdint.h>

__global__ void write_nowhere(float *p)
{
    p[threadIdx.x] = 1.0f;
}

/* Returns the CUDA error the synchronisation after the launch reports
 * (cudaErrorIllegalAddress, 700, expected), or -1 when the GPU cannot be
 * selected. */
extern "C" int gpu_test_break_context(int index)
{
    if (cudaSetDevice(index) != cudaSuccess)
        return -1;
    write_nowhere<<<1, 32>>>((float *)(uintptr_t)0x10);
    return (int)cudaDeviceSynchronize();
}
