/* quality: image-quality metrics of a test volume against a reference (the
 * simulator's truth), on the layout of the phantom they show (issue 6),
 * and the phantom.ini sidecar that carries that layout next to the series.
 *
 * Definitions (all in HU; voxel (i, j, k) lies at origin + (i, j, k) *
 * spacing mm, axial orientation):
 * - body mask: voxels whose centre lies inside the layout's body ellipse
 *   (every slice).
 * - psnr = 10 log10(R^2 / MSE) over the mask, R = the dynamic range of the
 *   reference inside the mask (max - min; 1700 HU for the body phantom's
 *   truth, gas -1000 to bone 700), reported as psnr_range.
 * - ssim: 3D SSIM (Wang et al. 2004) with a separable Gaussian window,
 *   sigma 1.5 voxels, truncated at radius 5 (3.5 sigma), reflect-101
 *   borders, C1 = (0.01 R)^2, C2 = (0.03 R)^2, the same R, averaged over the
 *   mask.
 * - ROI i (uniform disk, all slices): mean of the test; sd and bias = sd
 *   and mean of test - reference (against the noise-free reconstruction
 *   this removes its deterministic artefacts, so sd is noise only; against
 *   a flat truth it is the usual ROI sd); noise_sd = sqrt(mean of the ROI
 *   variances), bias_hu = mean of the ROI biases, max_abs_bias the worst.
 * - noise_spread = max_i sd_i / min_i sd_i over the ROIs: the spread of the
 *   residual noise between regions (1 = the same everywhere). A filter with
 *   one h for the whole volume smooths the quiet regions relatively more
 *   than the noisy ones and raises it; one whose strength follows the
 *   local noise keeps it near the input's. NAN with fewer than two ROIs or
 *   a ROI without noise.
 * - lesion i: inner disk radius max(0.7 r, 0.75 pixel) (always holds a
 *   voxel centre), background annulus [bg_inner, bg_outer];
 *   contrast = mean(inner) - mean(annulus) of the test, cnr = contrast /
 *   noise, noise = sd of test - reference over the annulus (the noise of
 *   the background, without the reference's own deterministic texture).
 * - edge_rise_mm: the edge disk's radial edge-spread function (voxels binned
 *   by distance from the centre in bins of 0.1 pixel), normalised between
 *   the inner plateau [R - W, R - W/2] and the outer one [R + W/2, R + W],
 *   W = min(0.8 R, uniform_to - R); the distance between the 90% and 10%
 *   crossings (linear interpolation). A Gaussian-blurred step gives
 *   2.563 sigma.
 *
 * Thread-safety: any thread; OpenMP inside. Returns 0 or a negative code
 * from common/err.h (LDCT_EINPUT: shapes differ, a region holds no voxel,
 * a bad sidecar; quality_measure says which in quality_result.why).
 */
#ifndef LDCT_PIPELINE_QUALITY_H
#define LDCT_PIPELINE_QUALITY_H

#include <stddef.h>

#include "gpu/phantom.h"
#include "gpu/volume.h"

typedef struct quality_roi_result {
    double mean, sd, bias;
    long n;
} quality_roi_result;

typedef struct quality_lesion_result {
    double contrast, cnr, bg_sd;
} quality_lesion_result;

typedef struct quality_result {
    double psnr, psnr_range, ssim;
    double noise_sd, bias_hu, max_abs_bias;
    double noise_spread; /* max / min ROI sd; NAN when undefined */
    double edge_rise_mm; /* NAN when the layout has no edge */
    long mask_voxels;
    int nroi, nlesion;
    quality_roi_result roi[GPU_PHANTOM_MAX_ROIS];
    quality_lesion_result lesion[GPU_PHANTOM_MAX_LESIONS];
    char why[192]; /* after LDCT_EINPUT: what could not be measured, for people */
} quality_result;

/* Where the volume lies: voxel (0,0,0) centre in patient mm. */
typedef struct quality_grid {
    double origin[3];
} quality_grid;

/* All metrics of test against ref (same shape and spacing). On
 * LDCT_EINPUT r->why says what could not be measured: the shapes, a region
 * of the layout that the grid cannot measure (quality_layout_fits, checked
 * first) or an edge the test series does not show. */
int quality_measure(const gpu_volume *test, const gpu_volume *ref, const quality_grid *g,
                    const gpu_phantom_layout *l, quality_result *r);

/* The largest grid quality_min_size tries. */
#define QUALITY_MAX_SIZE 4096

/* 0 when v's grid (nx, ny, spacing and g; not its data) holds every voxel
 * the measurements of layout l need: a voxel centre in the body, in each
 * ROI, in each lesion's inner disk and background ring, and around the
 * edge (and around each of the nextra edges `extra`, the 4D moving rims)
 * enough radial bins for a 10-90% rise. Otherwise LDCT_EINPUT, with the
 * first region that fails written into why (may be NULL), e.g. "ROI liver
 * (radius 6 mm) holds no voxel centre"; -ENOMEM. These are conditions the
 * measurements cannot do without, so a grid refused here fails them. */
int quality_layout_fits(const gpu_volume *v, const quality_grid *g, const gpu_phantom_layout *l,
                        const gpu_phantom_edge *extra, int nextra, char *why, size_t len);

/* The size from which on every grid fits the layout (quality_layout_fits):
 * grids of nx pixels above v's (ny scaled with it) over the same field of
 * view and centre; 0 when none up to QUALITY_MAX_SIZE does. Sizes just
 * above the threshold can miss a region where a smaller one does not (a
 * ring may fall between voxel centres), so *first gets the smallest size
 * that fits and the result is one more than the largest that does not,
 * checked up to twice *first plus 32 (beyond, pixels are less than half
 * as wide and every region holds several voxel centres). */
int quality_min_size(const gpu_volume *v, const quality_grid *g, const gpu_phantom_layout *l,
                     const gpu_phantom_edge *extra, int nextra, int *first);

/* Building blocks, exposed for the tests. mask: nx*ny*nz bytes (1 = in). */
int quality_body_mask(const gpu_volume *v, const quality_grid *g, const gpu_phantom_layout *l,
                      unsigned char *mask);
double quality_range(const gpu_volume *ref, const unsigned char *mask);
double quality_psnr(const gpu_volume *test, const gpu_volume *ref, const unsigned char *mask,
                    double range);
int quality_ssim(const gpu_volume *test, const gpu_volume *ref, const unsigned char *mask,
                 double range, double *ssim);
/* Mean and sd of the voxels whose centre lies at r_in <= distance < r_out
 * from (x, y) (mm, axial plane, all slices); LDCT_EINPUT when none. */
int quality_ring_stats(const gpu_volume *v, const quality_grid *g, double x, double y, double r_in,
                       double r_out, double *mean, double *sd, long *n);
int quality_edge_rise(const gpu_volume *v, const quality_grid *g, const gpu_phantom_edge *e,
                      double *rise_mm);

/* The sidecar: an INI file ([phantom] name, body; [roi NAME]; [lesion N];
 * [edge]) with every length in mm. _write returns 0 or -errno; _read 0,
 * -errno or LDCT_EINPUT with a message in err. */
int quality_layout_write(const gpu_phantom_layout *l, const char *path);
int quality_layout_read(const char *path, gpu_phantom_layout *l, char *err, size_t err_len);

#endif
