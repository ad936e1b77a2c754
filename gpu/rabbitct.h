/* RabbitCT data (Rohkohl et al., Med. Phys. 36(9), 2009): a reader and writer
 * of its dataset file, and a synthetic data set in RabbitCT's geometry (496
 * projections of 1248x960 over a short scan, volumes L^3 at 256/L mm) made
 * from the analytic phantom, so benchmarks run at RabbitCT size without the
 * original data.
 *
 * File format (as read by the RabbitCT runner, rabbitctrunner.cpp and
 * rabbitctrunner.h of the RabbitCT sources, and RTK's rtkrabbitct module):
 * a header of uint32 img_sz[2] (width = columns, height = rows), uint32
 * glb_numImg and float glb_HUScale[2], in later versions preceded by uint32
 * rct_version; then for each projection 12 doubles (the 3x4 matrix stored
 * column by column, A[i * 3 + j] = row j, column i) followed by width *
 * height floats, row by row; all little-endian. The matrix maps world mm to
 * pixels as in fdk.h; voxel i of an L^3 volume lies at O_L + i * R_L with
 * R_L = 256 / L mm and O_L = -R_L (L - 1) / 2. RabbitCT's projections are
 * already weighted and filtered: only backprojection applies to them.
 *
 * Ownership: gpu_rabbitct_read() allocates the geometry's matrices and the
 * projections; gpu_rabbitct_close() frees them. Any thread.
 */
#ifndef LDCT_GPU_RABBITCT_H
#define LDCT_GPU_RABBITCT_H

#include "gpu/fdk.h"
#include "gpu/volume.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { GPU_RABBITCT_NPROJ = 496, GPU_RABBITCT_NU = 1248, GPU_RABBITCT_NV = 960 };

typedef struct gpu_rabbitct {
    gpu_fdk_geometry geom; /* matrices only (dso = 0) */
    gpu_volume proj;       /* nu x nv x nproj */
    float hu_scale[2];
    int has_version; /* 1 when the header began with rct_version */
    unsigned version;
} gpu_rabbitct;

/* Reads a dataset file (either header layout, told apart by the file size).
 * Returns 0, -errno, LDCT_EINPUT (not a RabbitCT file) or -ENOMEM. */
int gpu_rabbitct_read(const char *path, gpu_rabbitct *d);

/* Writes geometry matrices and projections in the layout without a version. */
int gpu_rabbitct_write(const char *path, const gpu_fdk_geometry *g, const gpu_volume *proj);

void gpu_rabbitct_close(gpu_rabbitct *d);

/* The synthetic geometry: circular short scan over pi plus the fan angle,
 * flat detector of nu x nv pixels of 0.32 mm, dso 785 mm, dsd 1200 mm
 * (values chosen to resemble the C-arm of RabbitCT, whose 256 mm field of
 * view they cover; they are not its calibration). nproj, nu, nv of 0 mean
 * RabbitCT's 496, 1248, 960; smaller ones keep the field of view. */
int gpu_rabbitct_geometry(gpu_fdk_geometry *g, int nproj, int nu, int nv);

/* RabbitCT's volume of L^3 voxels (L = 128, 256, 512 or 1024 in RabbitCT;
 * any L >= 1 here). */
void gpu_rabbitct_volume(gpu_fdk_volume *v, int L);

/* Line integrals of the 3D Shepp-Logan phantom (scaled to +-110 mm) for g
 * into proj (nu x nv x nproj). */
int gpu_rabbitct_synthesize(const gpu_fdk_geometry *g, gpu_volume *proj);

#ifdef __cplusplus
}
#endif

#endif
