/* Device handle of the compute engine: where an algorithm runs ("cpu" or
 * "gpu:N"), how much GPU memory it may use and on which CUDA stream.
 * Usable from C and CUDA sources; contains no CUDA type.
 *
 * Builds without CUDA (LDCT_WITH_CUDA=0) compile and report no GPU. Any
 * thread may call these functions.
 */
#ifndef LDCT_GPU_DEVICE_H
#define LDCT_GPU_DEVICE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { GPU_DEVICE_CPU = 0, GPU_DEVICE_CUDA = 1 };

typedef struct gpu_device {
    int kind;          /* GPU_DEVICE_CPU or GPU_DEVICE_CUDA */
    int index;         /* CUDA ordinal when kind == GPU_DEVICE_CUDA */
    size_t mem_budget; /* bytes of GPU memory an algorithm may use; 0 = 80% of free memory */
    void *stream;      /* cudaStream_t to run on; NULL = the default stream */
    int threads;       /* OpenMP threads for CPU code; 0 = OpenMP's default */
} gpu_device;

/* Number of usable CUDA GPUs; 0 without a GPU, without a driver or in a build
 * without CUDA. Never fails. */
int gpu_device_count(void);

/* Fills *dev from "cpu", "gpu" (= gpu:0), "gpu:N" or "auto" (gpu:0 when a
 * GPU is present, else cpu); other fields get their defaults. Returns 0,
 * LDCT_EINPUT for an unknown spelling, LDCT_ENOGPU when a GPU is named but
 * absent (or N is out of range). */
int gpu_device_parse(const char *spec, gpu_device *dev);

/* Writes "cpu" or "gpu:N" into buf (at least 16 bytes); returns buf. */
const char *gpu_device_name(const gpu_device *dev, char *buf, size_t len);

/* GPU memory budget in bytes for dev: dev->mem_budget when nonzero, else
 * 80% of the free memory of the GPU (0 for a CPU device or on error). The
 * environment variable LDCT_GPU_MEM_BUDGET (bytes, optional K/M/G suffix)
 * overrides the automatic value, for tests. */
size_t gpu_device_budget(const gpu_device *dev);

/* Makes dev ready for its first call (CUDA context, pinned staging), so
 * the first series after a start does not wait for it. Returns 0 (also for
 * a CPU device), LDCT_ECUDA, or LDCT_ENOGPU in a build without CUDA. */
int gpu_device_warm(const gpu_device *dev);

/* After a failed GPU call: checks that dev still works (an allocation, a
 * copy there, a kernel, a copy back, a synchronisation), quietly; why gets the CUDA
 * error when there is one. A refused call (too little memory, a bad
 * argument) leaves the GPU working. A sticky error (an illegal address, a
 * hardware fault) breaks the process's CUDA context on that GPU for good:
 * CUDA cannot recover it within the process (cudaDeviceReset does not
 * either; tested on an H100, docs/NOTES-gpu.md), only a new process can.
 * Returns 0 when dev works (always for a CPU device), LDCT_ENOGPU when it
 * is not there, LDCT_ENOMEM_GPU when another process holds its memory or
 * the GPU itself (exclusive mode), LDCT_ECUDA when it fails. */
int gpu_device_check(const gpu_device *dev, char *why, size_t why_len);

/* Asks the CUDA runtime to load every kernel when a context is created
 * instead of at each kernel's first launch (CUDA_MODULE_LOADING=EAGER), so
 * a daemon pays it once at start and not on its first series. A value the
 * environment already has is kept. Call before any thread starts and
 * before any CUDA call. */
void gpu_load_kernels_eagerly(void);

#ifdef __cplusplus
}
#endif

#endif
