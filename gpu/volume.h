/* Volume type of the compute engine: float32 voxels laid out x fastest, then
 * y, z and t (index = ((t * nz + z) * ny + y) * nx + x), with the voxel
 * spacing in millimetres. Plain data, usable from C and from CUDA sources.
 *
 * Ownership: gpu_volume_init() allocates `data` (64-byte aligned) and
 * gpu_volume_close() frees it; a caller may instead point `data` at its own
 * buffer and never call _close. Not thread-safe per object; distinct volumes
 * may be used from any thread.
 */
#ifndef LDCT_GPU_VOLUME_H
#define LDCT_GPU_VOLUME_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gpu_volume {
    float *data;
    int nx, ny, nz, nt; /* nt = 1 for a 3D volume */
    double spacing[3];  /* mm along x, y, z; 1.0 when unknown */
} gpu_volume;

/* Allocates an uninitialised nx*ny*nz*nt volume with spacing 1 mm.
 * Returns 0, LDCT_EINPUT for non-positive or overflowing sizes, -ENOMEM. */
int gpu_volume_init(gpu_volume *v, int nx, int ny, int nz, int nt);

/* Frees the data of a volume from gpu_volume_init(); safe on a zeroed or
 * already closed volume. */
void gpu_volume_close(gpu_volume *v);

/* Number of voxels (all frames). */
size_t gpu_volume_count(const gpu_volume *v);

/* 1 when a and b have the same nx, ny, nz and nt, else 0. */
int gpu_volume_same_shape(const gpu_volume *a, const gpu_volume *b);

#ifdef __cplusplus
}
#endif

#endif
