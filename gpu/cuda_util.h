/* Internal C-callable helpers implemented in cuda_util.cu; only referenced
 * from C code under `#if LDCT_WITH_CUDA`. Any thread. */
#ifndef LDCT_GPU_CUDA_UTIL_H
#define LDCT_GPU_CUDA_UTIL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Number of CUDA devices, 0 when none or no driver (never fails). */
int gpu__cuda_device_count(void);

/* Free and total memory of device `index`; returns 0 or LDCT_ECUDA. */
int gpu__cuda_mem_info(int index, size_t *free_bytes, size_t *total_bytes);

/* Name of device `index` into buf; returns 0 or LDCT_ECUDA. */
int gpu__cuda_device_name(int index, char *buf, size_t len);

/* Page-locks (registers with CUDA) the host memory [p, p + bytes), so
 * copies from and to it skip the pinned staging; unregister before
 * freeing it. Return 0 or LDCT_ECUDA. */
int gpu__cuda_host_register(void *p, size_t bytes);
int gpu__cuda_host_unregister(void *p);

/* Creates device `index`'s context and its pinned staging buffers (what a
 * first call would otherwise pay). Returns 0 or LDCT_ECUDA. */
int gpu__cuda_warm(int index);

/* gpu_device_check for device `index` (see device.h). */
int gpu__cuda_check(int index, char *why, size_t why_len);

#ifdef __cplusplus
}
#endif

#endif
