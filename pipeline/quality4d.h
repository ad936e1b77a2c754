/* quality4d: image quality of a time-resolved (4D) series against the
 * simulator's 4D truth (issue 8), and the per-time-point part of the
 * phantom.ini sidecar that describes the moving structure.
 *
 * Definitions (quality.h has the 3D ones; the static structures are the
 * same at every time point, so their statistics pool over time points):
 * - psnr, psnr_range, noise_sd, bias, lesion CNR, edge_rise_mm (the static
 *   bone rim): quality_measure() of the series seen as one volume of
 *   nz * nt slices (the layout is uniform along z, so this pools every
 *   slice of every time point; PSNR is over the body mask of all time
 *   points with the range of the whole reference).
 * - ssim: the mean over time points of the 3D SSIM of each time point (the
 *   window never crosses from one time point to the next).
 * - moving edge: at each time point the 10-90% rise of the radial edge
 *   profile of that time point's [time N] edge disk (the heart's rim), as
 *   quality_edge_rise(); edge_moving_mm is the mean over time points,
 *   edge_moving_worst_mm the largest.
 *
 * Sidecar: `[time N]` sections (N = 1..T) with the keys of [edge] (x, y,
 * radius, inside_hu, outside_hu, uniform_to), appended after the 3D
 * layout; quality_layout_read() skips them.
 *
 * Thread-safety: any thread; OpenMP inside. Returns 0 or a negative code
 * from common/err.h (LDCT_EINPUT: shapes, a time count that differs from
 * the sidecar's, a region without voxels, a bad sidecar; quality4d_measure
 * says which in pooled.why).
 */
#ifndef LDCT_PIPELINE_QUALITY4D_H
#define LDCT_PIPELINE_QUALITY4D_H

#include <stddef.h>

#include "pipeline/quality.h"

enum { QUALITY4D_MAX_TIMES = 256 };

/* The moving edge at every time point. */
typedef struct quality4d_motion {
    int ntimes;
    gpu_phantom_edge edge[QUALITY4D_MAX_TIMES];
} quality4d_motion;

typedef struct quality4d_result {
    quality_result pooled; /* .ssim is the mean of the time points' SSIM */
    int ntimes;
    double edge_moving_mm, edge_moving_worst_mm;
    double edge_moving[QUALITY4D_MAX_TIMES]; /* per time point */
} quality4d_result;

/* All metrics of the 4D test against the 4D ref (same shape, nt >= 1, nt
 * equal to m->ntimes). */
int quality4d_measure(const gpu_volume *test, const gpu_volume *ref, const quality_grid *g,
                      const gpu_phantom_layout *l, const quality4d_motion *m, quality4d_result *r);

/* Appends the [time N] sections of m to the sidecar at path (written by
 * quality_layout_write first). 0 or -errno. */
int quality4d_motion_append(const quality4d_motion *m, const char *path);

/* Reads the [time N] sections; m->ntimes = 0 when there are none (a 3D
 * sidecar). 0, -errno or LDCT_EINPUT with a message in err. */
int quality4d_motion_read(const char *path, quality4d_motion *m, char *err, size_t err_len);

#endif
