/* Low-dose CT simulator (issue 6): analytic phantoms in HU, their scanner
 * geometry, noisy projections and their FDK reconstruction.
 *
 * Phantoms are sets of ellipsoids (gpu/fdk.h, densities additive, in
 * attenuation 1/mm) so that line integrals are exact chord lengths
 * (gpu_fdk_phantom_project) and the truth is the same set sampled on voxels.
 * HU and attenuation: mu = GPU_PHANTOM_MU_WATER * (1 + HU / 1000), mu_water
 * = 0.0192 /mm (water at about 70 keV, the effective energy of a 120 kVp
 * beam), air = -1000 HU = 0.
 *
 * - GPU_PHANTOM_BODY: a small (paediatric-abdomen sized) body, 200 x 150 mm:
 *   an 8 mm fat layer (-100 HU) around soft tissue (40 HU), a liver-like
 *   organ (60 HU) holding a 3 x 3 grid of round low-contrast lesions (+20,
 *   +10, +5 HU over the liver; diameters 10, 6 and 3 mm), a vertebra-like
 *   bone rod (700 HU, radius 14 mm: the high-contrast edge) and a gas pocket
 *   (-1000 HU). Every structure is a rod along z (semi-axis 1000 mm), as in
 *   a Catphan module: each slice shows the same cross-section, so statistics
 *   pool over slices. `layout` says where everything is (for `quality`).
 * - GPU_PHANTOM_SHEPP_LOGAN: the 3D Shepp-Logan (gpu_fdk_phantom_shepp_logan,
 *   Toft's contrasts) scaled to +-fov*0.45 mm, density d mapped to
 *   HU = 1000 (d / 0.2 - 1) (brain 0.2 = water, skull 1.0 = 4000 HU, the
 *   0.1 features = +-500 HU). Its layout names the outer ellipse as body
 *   mask and two uniform ROIs; no lesions, no edge.
 *
 * Noise: the clean line integral p of a ray becomes
 *     N = Poisson(I0 * dose * exp(-p)) + Normal(0, electronic_sd),
 *     p' = -log(max(N, 1) / (I0 * dose)),
 * each detector row of each view drawing from its own generator keyed by
 * (seed, stream, view, row) (gpu/rng.h), so results are identical for any
 * thread count.
 *
 * Ownership: structs are caller-owned plain data; volumes are caller-
 * initialised with the shapes documented per function. Any thread; the
 * heavy functions use OpenMP (and the GPU through gpu_fdk).
 * Functions return 0 or a negative code from common/err.h.
 */
#ifndef LDCT_GPU_PHANTOM_H
#define LDCT_GPU_PHANTOM_H

#include <stdint.h>

#include "gpu/device.h"
#include "gpu/fdk.h"
#include "gpu/volume.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GPU_PHANTOM_MU_WATER 0.0192 /* 1/mm */

enum gpu_phantom_kind { GPU_PHANTOM_BODY = 0, GPU_PHANTOM_SHEPP_LOGAN };
enum { GPU_PHANTOM_MAX_ELLIPSOIDS = 24, GPU_PHANTOM_MAX_LESIONS = 9, GPU_PHANTOM_MAX_ROIS = 8 };

/* A round region in the axial plane, uniform along z (centre and radii in
 * patient mm, x to the image's right, y down). */
typedef struct gpu_phantom_lesion {
    double x, y, radius;
    double hu, background_hu;  /* inside, and the organ around it */
    double bg_inner, bg_outer; /* background annulus radii (mm), uniform */
} gpu_phantom_lesion;

typedef struct gpu_phantom_roi {
    char name[16];
    double x, y, radius, hu; /* uniform disk of the given HU */
} gpu_phantom_roi;

typedef struct gpu_phantom_edge {
    double x, y, radius; /* a disk whose rim is the edge */
    double inside_hu, outside_hu;
    double uniform_to; /* outside_hu holds out to this radius (mm) */
} gpu_phantom_edge;

/* What the quality harness needs to know about a phantom. */
typedef struct gpu_phantom_layout {
    char name[32];
    double body_x, body_y, body_a, body_b; /* body mask: ellipse (mm) */
    int nlesion, nroi, has_edge;
    gpu_phantom_lesion lesion[GPU_PHANTOM_MAX_LESIONS];
    gpu_phantom_roi roi[GPU_PHANTOM_MAX_ROIS];
    gpu_phantom_edge edge;
} gpu_phantom_layout;

typedef struct gpu_phantom {
    int kind;
    int n;
    gpu_fdk_ellipsoid e[GPU_PHANTOM_MAX_ELLIPSOIDS];
    gpu_phantom_layout layout;
} gpu_phantom;

double gpu_phantom_mu(double hu);
double gpu_phantom_hu(double mu);

/* "body" / "shepp-logan" -> kind, or LDCT_EINPUT. */
int gpu_phantom_kind_parse(const char *name);

/* Builds a phantom. fov (mm) must hold it: >= 220 for the body (its
 * 200 x 150 mm outline plus margin), any > 0 for Shepp-Logan. Returns 0 or
 * LDCT_EINPUT. */
int gpu_phantom_build(int kind, double fov, gpu_phantom *ph);

/* Scan and reconstruction settings. */
typedef struct gpu_phantom_scan {
    int size, slices;     /* reconstructed nx = ny = size, nz = slices */
    double fov;           /* mm; pixel spacing = fov / size */
    double thickness;     /* slice distance and thickness, mm */
    int views;            /* projections over 360 degrees; 0 = 4 * size */
    double dso, dsd;      /* source-isocentre, source-detector (mm) */
    double i0;            /* full-dose photons per mm^2 at the isocentre and view, for
                           * 1000 views per rotation (see gpu_phantom_i0_element) */
    double dose;          /* fraction of full dose of the low-dose scan, (0, 1] */
    double electronic_sd; /* electronic noise (photons), 0 = none */
    uint64_t seed;
    int filter;           /* enum gpu_fdk_filter */
    double patient_scale; /* photon statistics of a patient this many times the
                           * phantom's size (gpu_phantom_noise_scaled); 0 or 1 =
                           * the phantom's own */
} gpu_phantom_scan;

/* Defaults: size 256, 16 slices, fov 220, thickness 1.5, views 0, dso 595,
 * dsd 1085.6 (a clinical scanner's), i0 4e5, dose 0.25, electronic_sd 0,
 * seed 1, Shepp-Logan filter, patient_scale 1. i0 4e5 /mm^2 matches the full-dose flux of
 * the Mayo/AAPM data (about 1.5e5 photons per 0.42 mm^2 element and view
 * at about 1150 views), so noise follows pixel size, slice thickness and
 * view count as on a scanner. */
void gpu_phantom_scan_default(gpu_phantom_scan *s);

/* Circular full-scan geometry and volume for the settings: flat detector
 * whose pixel at the isocentre equals the voxel, wide enough for the fov
 * plus 10% and tall enough for the slices under the cone. Allocates g (free
 * with gpu_fdk_geometry_close). Returns 0, LDCT_EINPUT or -ENOMEM. */
int gpu_phantom_geometry(const gpu_phantom_scan *s, gpu_fdk_geometry *g, gpu_fdk_volume *v);

/* Full-dose photons per detector element and view: i0 times the element's
 * area at the isocentre times 1000 / views (the same mAs spread over more
 * views gives fewer photons per view). */
double gpu_phantom_i0_element(const gpu_phantom_scan *s, const gpu_fdk_geometry *g);

/* Noise-free line integrals (proj: nu x nv x nproj). */
int gpu_phantom_project(const gpu_phantom *ph, const gpu_fdk_geometry *g, gpu_volume *proj);

/* Noisy copy of clean line integrals at incident count i0_eff (photons per
 * element and view: gpu_phantom_i0_element * dose)
 * with generator stream `stream` (use different streams for independent
 * scans). noisy has clean's shape and may be clean itself. */
int gpu_phantom_noise(const gpu_volume *clean, double i0_eff, double electronic_sd, uint64_t seed,
                      uint64_t stream, gpu_volume *noisy);

/* gpu_phantom_noise with the photon statistics of a patient `scale` (>= 1)
 * times the phantom's size: every chord, so every line integral, grows by
 * that factor, so the counts are drawn at i0_eff exp(-scale p) while the
 * image keeps the phantom's values: the known extra attenuation
 * (scale - 1) p is subtracted from -log(N / i0_eff), as a calibrated
 * bow-tie filter's is. The variance of p' is about exp(scale p) / i0_eff,
 * so the noise grows with the path through the body far more steeply than
 * at scale 1: it rises towards the centre, along the long axis and behind
 * bone, as across an adult's abdomen or shoulders (scale 1.75 turns the
 * 200 x 150 mm body into 350 x 262 mm). scale 1 is gpu_phantom_noise. */
int gpu_phantom_noise_scaled(const gpu_volume *clean, double i0_eff, double scale,
                             double electronic_sd, uint64_t seed, uint64_t stream,
                             gpu_volume *noisy);

/* FDK of line integrals into HU (out: the volume's shape). */
int gpu_phantom_reconstruct(const gpu_phantom_scan *s, const gpu_fdk_geometry *g,
                            const gpu_volume *proj, const gpu_fdk_volume *v, gpu_volume *out,
                            const gpu_device *dev);

/* Truth in HU: the phantom averaged over 3^3 sub-samples per voxel. */
int gpu_phantom_truth(const gpu_phantom *ph, const gpu_fdk_volume *v, gpu_volume *out);

#ifdef __cplusplus
}
#endif

#endif
