/* FDK cone-beam reconstruction (seed 001): geometry, weights, ramp filters,
 * the CPU reference that defines the result, the CUDA version (the patent's
 * backprojector and upload pipeline), the dispatcher, and the analytic
 * ellipsoid phantom used to test them.
 *
 * Geometry. Every projection i has a 3x4 projection matrix P_i (row-major,
 * RabbitCT convention): for a world point X (mm, homogeneous),
 *     w = P_i[2] . X,  u = (P_i[0] . X) / w,  v = (P_i[1] . X) / w
 * where (u, v) is the detector position in pixels (column u, row v; pixel
 * (a, b) has its centre at u = a, v = b). gpu_fdk_geometry_circular() builds
 * the matrices of a circular orbit about the z axis with a flat detector,
 * scaled so that w = t / dso, t being the distance of X from the source
 * along the central ray; 1 / w^2 is then FDK's distance weight.
 *
 * Backprojection (what every version computes, gpu_fdk_backproject_*):
 *     out(X) = sum_i bilinear(q_i, u_i(X), v_i(X)) / w_i(X)^2
 * for each voxel centre X = origin + (x, y, z) * voxel, where bilinear()
 * reads the four neighbouring pixels and counts pixels outside the detector
 * as 0; projections with w <= 0 are skipped.
 *
 * Filtering (gpu_fdk_filter_*): q_i(a, b) = scale_i * R[ c(a, b) r_i(a) p_i ]
 * with c the cosine weight dsd / sqrt(dsd^2 + u_mm^2 + v_mm^2), r_i the
 * redundancy weight (1/2 for a full 2 pi scan; Parker's weights for a short
 * scan, conjugate rays summing to 1), scale_i the angular step over the
 * isocentre pixel size tau = du * dso / dsd, and R the convolution of each
 * row with the band-limited ramp kernel (h[0] = 1/4, h[n odd] = -1/(n pi)^2,
 * h[n even] = 0; Kak and Slaney, eq. 3.61), zero-padded to a length
 * >= 2 nu, times the window in frequency. gpu_fdk_*() = filter, then
 * backproject: for line integrals of attenuation p the result is the
 * attenuation in 1/mm.
 *
 * Ownership: gpu_fdk_geometry_circular() and the RabbitCT reader allocate
 * the geometry's arrays; gpu_fdk_geometry_close() frees them. Projections
 * are a gpu_volume with nx = nu, ny = nv, nz = nproj. `out` must be
 * initialised by the caller with the volume's shape; it is overwritten.
 * Functions return 0 or a negative code from common/err.h: LDCT_EINPUT
 * (bad parameters or shapes), -ENOMEM, LDCT_ENOGPU, LDCT_ENOMEM_GPU,
 * LDCT_ECUDA, LDCT_EUNSUPPORTED (CUDA version in a build without CUDA, or
 * the CPU filter where libfftw3f cannot be loaded). Any thread may call
 * them; calls on one GPU serialise on its streams.
 */
#ifndef LDCT_GPU_FDK_H
#define LDCT_GPU_FDK_H

#include "gpu/device.h"
#include "gpu/volume.h"

#ifdef __cplusplus
extern "C" {
#endif

enum gpu_fdk_filter {
    GPU_FDK_RAMLAK = 0,  /* window 1 */
    GPU_FDK_SHEPP_LOGAN, /* sinc(x) = sin(pi x) / (pi x) */
    GPU_FDK_COSINE,      /* cos(pi x) */
    GPU_FDK_HAMMING,     /* 0.54 + 0.46 cos(2 pi x) */
    GPU_FDK_HANN,        /* 0.5 + 0.5 cos(2 pi x); x = frequency / sampling rate, 0..1/2 */
    GPU_FDK_NFILTERS
};

/* Largest number of projections one CUDA run keeps matrices for in constant
 * memory at once (larger sets are processed in groups). */
enum { GPU_FDK_CONST_PROJ = 1024 };

typedef struct gpu_fdk_geometry {
    int nproj, nu, nv; /* projections, detector columns and rows */
    double *matrices;  /* nproj * 12, row-major 3x4 per projection (owned) */
    /* Circular-orbit description, needed for filtering (dso > 0); matrices-
     * only data (RabbitCT files) can only be backprojected. */
    double dso, dsd;   /* source-isocentre and source-detector distances, mm */
    double du, dv;     /* detector pixel size, mm */
    double cu, cv;     /* pixel hit by the central ray (column, row) */
    double *angles;    /* nproj source angles, radians (owned; may be NULL) */
    double angle_step; /* |angle between projections|, radians */
    double scan_range; /* covered angle; < 2 pi - angle_step / 2 means short scan */
} gpu_fdk_geometry;

/* The reconstructed volume: nx*ny*nz voxels of size voxel[] mm; origin is the
 * centre of voxel (0,0,0) in world mm. */
typedef struct gpu_fdk_volume {
    int nx, ny, nz;
    double voxel[3];
    double origin[3];
} gpu_fdk_volume;

/* Optional timings of CUDA runs (CUDA events, milliseconds). */
typedef struct gpu_fdk_stats {
    double filter_ms;      /* weighting + FFT filtering kernels, summed */
    double backproject_ms; /* backprojection kernels, first start to last end */
    double total_ms;       /* the whole call, allocation and transfers included */
    int slabs;             /* z slabs the volume was cut into */
    int config[4];         /* the backprojector configuration used: I, K, Bx, By */
} gpu_fdk_stats;

typedef struct gpu_fdk_params {
    int filter; /* enum gpu_fdk_filter */
    /* Backprojector configuration (seed 001): I projections per launch, K
     * voxels per thread along z, blocks of bx * by threads. 0 = defaults;
     * K must be 1, 2, 4 or 8, bx * by a multiple of 32 and <= 1024. */
    int bp_i, bp_k, bp_bx, bp_by;
    gpu_fdk_stats *stats; /* optional out; may be NULL */
} gpu_fdk_params;

/* Ram-Lak filter, default backprojector configuration. */
void gpu_fdk_params_default(gpu_fdk_params *p);

/* Parses "ram-lak", "shepp-logan", "cosine", "hamming", "hann"; returns the
 * enum value or LDCT_EINPUT. */
int gpu_fdk_filter_parse(const char *name);
const char *gpu_fdk_filter_name(int filter);

/* Circular orbit, flat detector: source at dso (cos b, sin b, 0), detector
 * centre at -(dsd - dso) (cos b, sin b, 0), columns along (-sin b, cos b, 0),
 * rows along +z; offset_u/offset_v (pixels) move the central ray's pixel
 * from the detector centre. A full scan (range >= 2 pi) uses angles
 * start + i * range / nproj; a short scan start + i * range / (nproj - 1),
 * and needs range >= pi + 2 * (half fan angle) for complete Parker weights.
 * Allocates g->matrices and g->angles; returns 0, LDCT_EINPUT, -ENOMEM. */
int gpu_fdk_geometry_circular(gpu_fdk_geometry *g, int nproj, int nu, int nv, double du, double dv,
                              double dso, double dsd, double start, double range, double offset_u,
                              double offset_v);

/* Frees the arrays of a geometry; safe on a zeroed or closed one. */
void gpu_fdk_geometry_close(gpu_fdk_geometry *g);

/* Half fan angle (radians) covered by the detector columns. */
double gpu_fdk_fan_half_angle(const gpu_fdk_geometry *g);

/* Short scan over exactly pi + 2 * half fan angle (Parker's minimum). */
double gpu_fdk_short_scan_range(int nu, double du, double dso, double dsd);

/* Volume centred on the isocentre (origin = -voxel * (n - 1) / 2). */
void gpu_fdk_volume_centered(gpu_fdk_volume *v, int nx, int ny, int nz, double vx, double vy,
                             double vz);

/* Parker weight of the ray at fan angle gamma (radians; gamma = atan of the
 * column's isocentre coordinate over dso) of a short scan at beta (radians
 * from the scan start) with half fan angle delta = (range - pi) / 2. Rays
 * with |gamma| > delta use the nearest valid gamma. */
double gpu_fdk_parker(double beta, double gamma, double delta);

/* Per-column and per-pixel weights used by every filter implementation:
 * colw[i * nu + a] = redundancy * angle_step / tau for projection i and
 * column a; cosw[b * nu + a] the cosine weight. Returns 0 or LDCT_EINPUT
 * (no circular description). */
int gpu_fdk_weights(const gpu_fdk_geometry *g, float *colw, float *cosw);

/* Zero-padded row length used for filtering: the smallest 2^a 3^b 5^c >= 2 nu. */
int gpu_fdk_pad_length(int nu);

/* Band-limited ramp kernel of length npad in circular order (h[n] =
 * h[npad - n]), unscaled (h[0] = 1/4). */
void gpu_fdk_ramp_kernel(int npad, float *h);

/* Window of `filter` at frequency bin k of npad (0 <= k <= npad / 2). */
double gpu_fdk_window(int filter, int k, int npad);

/* Validation shared by all versions (shapes, config); returns 0 or LDCT_EINPUT. */
int gpu_fdk_check(const gpu_fdk_params *p, const gpu_fdk_geometry *g, const gpu_volume *proj,
                  const gpu_fdk_volume *vol, const gpu_volume *out, int need_circular);

/* Weighting and ramp filtering of all projections into `filtered` (same shape
 * as proj, caller-initialised, may not alias). _ref uses FFTW3 (loaded at run
 * time, see fdk_ref.c), _cuda batched cuFFT, _direct a plain O(nu^2)
 * convolution per row in double (the test reference; no FFT library). */
int gpu_fdk_filter_ref(const gpu_fdk_params *p, const gpu_fdk_geometry *g, const gpu_volume *proj,
                       gpu_volume *filtered, const gpu_device *dev);
int gpu_fdk_filter_cuda(const gpu_fdk_params *p, const gpu_fdk_geometry *g, const gpu_volume *proj,
                        gpu_volume *filtered, const gpu_device *dev);
int gpu_fdk_filter_direct(const gpu_fdk_params *p, const gpu_fdk_geometry *g,
                          const gpu_volume *proj, gpu_volume *filtered);

/* Backprojection only (see the definition above); proj holds already
 * filtered projections, or RabbitCT's. */
int gpu_fdk_backproject_ref(const gpu_fdk_params *p, const gpu_fdk_geometry *g,
                            const gpu_volume *proj, const gpu_fdk_volume *vol, gpu_volume *out,
                            const gpu_device *dev);
int gpu_fdk_backproject_cuda(const gpu_fdk_params *p, const gpu_fdk_geometry *g,
                             const gpu_volume *proj, const gpu_fdk_volume *vol, gpu_volume *out,
                             const gpu_device *dev);

/* Full FDK: filter, then backproject. */
int gpu_fdk_ref(const gpu_fdk_params *p, const gpu_fdk_geometry *g, const gpu_volume *proj,
                const gpu_fdk_volume *vol, gpu_volume *out, const gpu_device *dev);
int gpu_fdk_cuda(const gpu_fdk_params *p, const gpu_fdk_geometry *g, const gpu_volume *proj,
                 const gpu_fdk_volume *vol, gpu_volume *out, const gpu_device *dev);
/* Dispatcher: CUDA when dev (or auto) is a GPU, else the CPU reference. */
int gpu_fdk(const gpu_fdk_params *p, const gpu_fdk_geometry *g, const gpu_volume *proj,
            const gpu_fdk_volume *vol, gpu_volume *out, const gpu_device *dev);

/* ---- analytic phantom (fdk_phantom.c) ---------------------------------- */

typedef struct gpu_fdk_ellipsoid {
    double centre[3]; /* mm */
    double axes[3];   /* semi-axes, mm */
    double phi;       /* rotation about z, radians */
    double density;   /* added inside (1/mm) */
} gpu_fdk_ellipsoid;

enum { GPU_FDK_SHEPP_LOGAN_N = 10 };

/* 3D Shepp-Logan (Kak and Slaney's ellipsoids, the modified contrasts of
 * Toft) scaled so the unit cube maps to +-scale mm; writes
 * GPU_FDK_SHEPP_LOGAN_N ellipsoids into e. */
void gpu_fdk_phantom_shepp_logan(gpu_fdk_ellipsoid *e, double scale);

/* Line integrals through the ellipsoids along the ray from the source to
 * each pixel centre, for any projection matrices (the source is the null
 * space of P, the ray direction P[:, 0:3]^-1 (u, v, 1)). proj must have
 * shape nu x nv x nproj. Returns 0 or LDCT_EINPUT (singular matrix). */
int gpu_fdk_phantom_project(const gpu_fdk_ellipsoid *e, int n, const gpu_fdk_geometry *g,
                            gpu_volume *proj);

/* Density at a point, and the phantom sampled on the volume's voxels with
 * ss^3 sub-samples per voxel (ss >= 1). */
double gpu_fdk_phantom_density(const gpu_fdk_ellipsoid *e, int n, const double x[3]);
int gpu_fdk_phantom_voxelize(const gpu_fdk_ellipsoid *e, int n, const gpu_fdk_volume *vol, int ss,
                             gpu_volume *out);

/* Line integral along the whole line src + t dir (t real): the sum of
 * density times chord length over the ellipsoids. */
double gpu_fdk_phantom_ray(const gpu_fdk_ellipsoid *e, int n, const double src[3],
                           const double dir[3]);

/* ---- cylindrical detectors (fdk_rebin.c) ------------------------------- */

/* A cylindrical detector on a circular orbit: a cylinder of radius dsd about
 * the source (axis along z through the source), column a at fan angle
 * gamma = (a - cu) * dgamma (positive towards the flat detector's +u, i.e.
 * (-sin b, cos b, 0) for the source angle b), row b at height (b - cv) * dv
 * on the cylinder. cu, cv are 0-based and may be fractional. */
typedef struct gpu_fdk_cylinder {
    int nu, nv;
    double dgamma; /* radians between columns (element pitch along the arc / dsd) */
    double dv;     /* row pitch on the cylinder, mm */
    double cu, cv; /* element (column, row) hit by the central ray, 0-based */
    double dsd;    /* source to detector (the cylinder's radius), mm */
} gpu_fdk_cylinder;

/* The virtual flat detector the cylinder's projections are rebinned onto
 * (at dsd from the source, as gpu_fdk_geometry_circular's). */
typedef struct gpu_fdk_flat {
    int nu, nv;
    double du, dv, cu, cv;
} gpu_fdk_flat;

/* The flat detector covering the cylinder's fan: pixel pitch dsd * dgamma
 * along u, the cylinder's rows along v. */
void gpu_fdk_cylinder_flat(const gpu_fdk_cylinder *c, gpu_fdk_flat *f);

/* Rebins cylindrical projections (in: c->nu x c->nv x nproj) onto the flat
 * detector f (out: f->nu x f->nv x nproj, caller-initialised) by bilinear
 * interpolation in (fan angle, height); see fdk_rebin.c. OpenMP. Returns 0,
 * LDCT_EINPUT (shapes) or -ENOMEM. */
int gpu_fdk_rebin_cylinder(const gpu_fdk_cylinder *c, const gpu_fdk_flat *f, const gpu_volume *in,
                           gpu_volume *out);

/* Closed-form ellipsoid projections on a cylindrical detector: source at
 * dso (cos b, sin b, 0) for b = angles[i], i < proj->nz; proj has shape
 * c->nu x c->nv x nproj. Returns 0 or LDCT_EINPUT. */
int gpu_fdk_phantom_project_cylinder(const gpu_fdk_ellipsoid *e, int n, const gpu_fdk_cylinder *c,
                                     double dso, const double *angles, gpu_volume *proj);

#ifdef __cplusplus
}
#endif

#endif
