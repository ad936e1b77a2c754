/* The one checking macro for CUDA runtime calls in gpu/ (.cu files): it logs the
 * call, file, line and CUDA's error string, and makes the enclosing function
 * return an error code (LDCT_ENOMEM_GPU for allocation failures, else
 * LDCT_ECUDA). It never exits and never resets the device; it clears the
 * runtime's last error, so a failure that leaves the context usable (a
 * refused allocation, a bad argument) does not fail the next launch check. CUDA_CHECK_GOTO
 * does the same but jumps to a cleanup label after storing the code. Check
 * every launch with CUDA_CHECK(cudaGetLastError()). */
#ifndef LDCT_GPU_CUDA_CHECK_CUH
#define LDCT_GPU_CUDA_CHECK_CUH

#include <cuda_runtime.h>

/* common/ headers are plain C without extern "C" guards. */
extern "C" {
#include "common/err.h"
#include "common/log.h"
}

static inline int gpu__cuda_err(cudaError_t e, const char *call, const char *file, int line)
{
    log_err("%s:%d: %s failed: %s (%s)", file, line, call, cudaGetErrorString(e),
            cudaGetErrorName(e));
    (void)cudaGetLastError();
    return e == cudaErrorMemoryAllocation ? LDCT_ENOMEM_GPU : LDCT_ECUDA;
}

#define CUDA_CHECK(call)                                                                           \
    do {                                                                                           \
        cudaError_t cuda_check_e_ = (call);                                                        \
        if (cuda_check_e_ != cudaSuccess)                                                          \
            return gpu__cuda_err(cuda_check_e_, #call, __FILE__, __LINE__);                        \
    } while (0)

#define CUDA_CHECK_GOTO(call, rc, label)                                                           \
    do {                                                                                           \
        cudaError_t cuda_check_e_ = (call);                                                        \
        if (cuda_check_e_ != cudaSuccess) {                                                        \
            (rc) = gpu__cuda_err(cuda_check_e_, #call, __FILE__, __LINE__);                        \
            goto label;                                                                            \
        }                                                                                          \
    } while (0)

#endif
