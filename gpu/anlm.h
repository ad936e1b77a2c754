/* Adaptive non-local means (seed 004, Yuan et al. JBO 2018, after Manjon et
 * al. JMRI 2010 and Coupe et al. 2008): NLM whose filtering strength follows
 * a local noise estimate, with patch preselection, Gaussian or Rician noise
 * and one-level 3D Haar sub-band mixing of two patch radii. Parameters, the
 * CPU reference that defines the result, the CUDA version and the dispatcher.
 *
 * Definition (every version computes this). U is the input extended by
 * reflect-101 mirroring (gpu__mirror) on all sides; every derived field
 * below is computed on that extension, so it is itself the mirror extension
 * of its in-volume values. B = box of radius r_B, N_B = (2 r_B + 1)^3,
 * P = patch of radius r_P, |P| = (2 r_P + 1)^3, V = offsets d in
 * [-Sx,Sx] x [-Sy,Sy] x [-Sz,Sz] without 0, where an axis of n voxels has
 * the radius S_n = min(S, 2 n - 3), 0 for n = 1 (gpu__anlm_axis_radius):
 * the mirror repeats with period 2 (n - 1), and an offset of a whole
 * period would compare every patch with itself (distance 0, so s2 = 0 and
 * nothing filtered).
 *   m(x)  = sum_B U(x+b) / N_B                       local mean
 *   v(x)  = sum_B (U(x+b) - m(x))^2 / (N_B - 1)      local variance
 *   R(x)  = U(x) - m(x)                              residual (eq. 3)
 *   keep(x,d): preselection, see below
 *   DR(x,d) = sum_P (R(x+p) - R(x+d+p))^2 / |P|
 *   s2(x) = min over kept d of DR(x,d)               adaptive sigma^2 (eq. 3)
 *   h2(x) = strength^2 * max(s2(x), floor)
 *   D(x,d)  = sum_P (U(x+p) - U(x+d+p))^2 / |P|
 *   w(x,d)  = exp(-D / h2) for kept d with D <= 3 h2, else 0   (eq. 2)
 *   w0(x)   = max_d w(x,d), or 1 when that is 0 (weight of the centre)
 *   E(x)    = (w0 g(U(x)) + sum_d w g(U(x+d))) / (w0 + sum_d w)   (eq. 1)
 * with g(u) = u (Gaussian) or u^2 (Rician). Gaussian: out = E. Rician:
 * out = sqrt(max(E - 2 sg2(x), 0)), the second-moment bias correction, where
 * sg2 is the Gaussian noise variance under the Rician one: the s2 map
 * averaged over a box of radius GPU_ANLM_RICIAN_REG (it is noisy per voxel),
 * leaving out values above GPU_ANLM_RICIAN_CLIP times the box's plain mean
 * (gpu__anlm_clip_limit) = sr2, divided by Koay and Basser's correction factor xi(theta), theta
 * the signal SNR solved from the measured r = |m| / sqrt(sr2) by their
 * fixed point (gpu_anlm_rician_theta; Manjon's code takes theta = r, which
 * leaves part of the bias at low SNR). xi(theta(r)) is read from a table of
 * GPU_ANLM_XI_N points over r in [0, GPU_ANLM_XI_RMAX] with linear
 * interpolation (1 beyond), the same table on CPU and GPU.
 *
 * Preselection (Manjon 2010, Coupe 2008): d is kept when the local means
 * are close in ratio AND the local variances are close in ratio:
 *   ( in(m(x)-lo, m(x+d)-lo, mu) || in(hi-m(x), hi-m(x+d), mu) )
 *   && in(v(x)+eps, v(x+d)+eps, nu),    in(a,b,r) := r < a/b < 1/r,
 * mu = mean_ratio (0.95), nu = var_ratio (0.5). The published C code of
 * Manjon and Coupe (MABONLM3D.c / naonlm3d) and the GPU code of the seed
 * (mcxfilter, ganlm) write `(t1 ok) || (t1i ok) && t2 ok`: since && binds
 * tighter than ||, the variance test there applies only to the inverted mean
 * test, and any patch with a close mean is kept whatever its variance. The
 * parentheses above are the intended logic. Ratios of CT numbers need a
 * zero: MR magnitudes have one, Hounsfield units do not (Manjon's code, the
 * seed's GPU code and its mixing skip voxels <= 0 as background, which would
 * leave all of air and fat unfiltered). Here lo and hi are the volume
 * minimum and maximum widened by 1e-3 of the range, so the test is the same
 * for any shift of the values and nothing is treated as background.
 *
 * Mixing (mix on, Coupe et al. 2008 "3D wavelet sub-bands mixing"): two
 * results, A with patch radius r_P = patch_radius (1, fewer matches,
 * under-smoothed, sharp) and B with patch_radius2 (2, over-smoothed: larger
 * patches are more robust to noise). One level of the orthonormal 3D Haar
 * transform on 2x2x2 blocks (a lone last plane of an odd size is a block of
 * length 1 in that axis, with no high band): out takes the LLL band and the
 * three bands with a single high-pass axis (LLH, LHL, HLL: edges across one
 * axis, i.e. the anatomy's contours) from A, and the four bands with two or
 * three high-pass axes (LHH, HLH, HHL, HHH) from B: white noise spreads its
 * energy evenly over the eight bands while anatomy lives in the low and
 * single-axis bands, so those bands hold mostly noise and come from the
 * smoother result. This is the split of Coupe and Manjon's published
 * mixingsubband (sub-bands 3, 5, 6, 7 replaced). Haar rather than the
 * 10-tap Farras filters of that code: a Haar level touches only its own
 * 2x2x2 block, so it needs no zero padding to a power of two (no border
 * artefacts), works on odd sizes, mixes blocks independently (one GPU
 * thread per block, slab cuts at even z need no halo) and reconstructs
 * exactly: with A == B the output is A. Each mixed voxel is then clamped
 * to the range of A and B over its 2x2x2 block: where the two results place
 * a sharp edge differently, the recombined bands otherwise ring beyond both
 * (a step from 16400 to 265 came out at -3769), and viewers show that
 * as a dark or bright seam.
 *
 * All functions take (params, in, out, dev): `out` must be allocated by the
 * caller with the shape of `in` (nt = 1) and must not share its buffer; it
 * is overwritten. `dev` may be NULL (= cpu for _ref, gpu:0 for _cuda, auto
 * for the dispatcher). Return 0 or a negative code from common/err.h:
 * LDCT_EINPUT (bad parameters or shapes), -ENOMEM, LDCT_ENOGPU,
 * LDCT_ENOMEM_GPU, LDCT_ECUDA, LDCT_EUNSUPPORTED (CUDA in a build without
 * CUDA). Any thread may call them; calls on one GPU serialise on its stream.
 */
#ifndef LDCT_GPU_ANLM_H
#define LDCT_GPU_ANLM_H

#include "gpu/device.h"
#include "gpu/progress.h"
#include "gpu/volume.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
    GPU_ANLM_MAX_SEARCH = 5,
    GPU_ANLM_MAX_PATCH = 3,
    GPU_ANLM_MAX_BLOCK = 2,
    GPU_ANLM_RICIAN_REG = 2,  /* box radius smoothing the s2 map for the Rician bias */
    GPU_ANLM_RICIAN_CLIP = 4, /* s2 values above CLIP x their box's mean left out */
    GPU_ANLM_XI_N = 512,      /* points of the xi(theta(r)) table */
    GPU_ANLM_XI_RMAX = 32     /* r covered by the table */
};

typedef enum gpu_anlm_noise { GPU_ANLM_GAUSSIAN = 0, GPU_ANLM_RICIAN = 1 } gpu_anlm_noise;

/* Optional timings filled by the CUDA version (CUDA events, milliseconds). */
typedef struct gpu_anlm_stats {
    double kernel_ms; /* all kernels, summed over slabs */
    double total_ms;  /* whole call including transfers and allocation */
    int slabs;        /* number of slabs the volume was cut into */
} gpu_anlm_stats;

typedef struct gpu_anlm_params {
    int search_radius;            /* S, 1..5 */
    int patch_radius;             /* r_P of the (first) pass, 0..3 */
    int patch_radius2;            /* r_P of the second pass when mix != 0, 0..3 */
    int mix;                      /* nonzero: sub-band mixing of the two passes */
    int block_radius;             /* r_B of the local mean / variance box, 1..2 */
    float strength;               /* h = strength * local sigma, > 0 */
    float mean_ratio;             /* preselection bound mu, 0 < mu <= 1 (1 = none kept) */
    float var_ratio;              /* preselection bound nu, 0 < nu <= 1 */
    gpu_anlm_noise noise;         /* GPU_ANLM_GAUSSIAN or GPU_ANLM_RICIAN */
    gpu_anlm_stats *stats;        /* optional out: timings of CUDA runs; may be NULL */
    const gpu_progress *progress; /* optional: the CPU reference reports to it; may be NULL */
} gpu_anlm_params;

/* Defaults of the seed: S = 3, patch radii 1 and 2 with mixing, r_B = 1,
 * strength 1, mu 0.95, nu 0.5, Gaussian noise. */
void gpu_anlm_params_default(gpu_anlm_params *p);

/* Validates params and shapes; 0 or LDCT_EINPUT. */
int gpu_anlm_check(const gpu_anlm_params *p, const gpu_volume *in, const gpu_volume *out);

/* The adaptive noise estimate alone: sigma(x) = sqrt(s2(x)) of the pass
 * with patch radius p->patch_radius (0 where no offset was kept), into
 * `sigma` (shape of `in`). CPU; for tests and diagnostics. */
int gpu_anlm_sigma_ref(const gpu_anlm_params *p, const gpu_volume *in, gpu_volume *sigma,
                       const gpu_device *dev);

/* One-level 3D Haar sub-band mixing of a (low and single-axis bands) and b
 * (bands with two or three high-pass axes) into out; all of one shape, out
 * distinct from a and b. CPU; 0 or LDCT_EINPUT. */
int gpu_anlm_mix_ref(const gpu_volume *a, const gpu_volume *b, gpu_volume *out);

/* Koay-Basser correction factor xi(theta) of the Rician variance: the
 * variance of Rician samples of SNR theta is xi(theta) sigma_g^2. */
double gpu_anlm_rician_xi(double theta);

/* Koay-Basser fixed point: the SNR theta of the underlying signal from the
 * measured ratio r = mean / sd of Rician samples, theta <- sqrt(xi(theta)
 * (1 + r^2) - 2); 0 at or below the Rayleigh ratio sqrt(pi / (4 - pi)). */
double gpu_anlm_rician_theta(double r);

int gpu_anlm_ref(const gpu_anlm_params *p, const gpu_volume *in, gpu_volume *out,
                 const gpu_device *dev);
int gpu_anlm_cuda(const gpu_anlm_params *p, const gpu_volume *in, gpu_volume *out,
                  const gpu_device *dev);
/* Dispatcher: CUDA when dev (or auto) is a GPU, else the CPU reference; a
 * GPU named explicitly in a build without CUDA gives LDCT_ENOGPU. */
int gpu_anlm(const gpu_anlm_params *p, const gpu_volume *in, gpu_volume *out,
             const gpu_device *dev);

/* Internal, shared by anlm_ref.c and anlm.cu: the preselection bounds lo,
 * hi and the variance epsilon of `in` (see the definition above). */
typedef struct gpu__anlm_range {
    float lo, hi, var_eps, s2_floor;
} gpu__anlm_range;
void gpu__anlm_range_of(const gpu_volume *in, gpu__anlm_range *r);
/* The same from the volume's minimum and maximum (found elsewhere). */
void gpu__anlm_range_from(float mn, float mx, gpu__anlm_range *r);

#ifdef __CUDACC__
#define GPU__ANLM_HD __host__ __device__ __forceinline__
#else
#define GPU__ANLM_HD static inline
#endif

/* r < a/b < 1/r for a, b > 0, without a division. */
GPU__ANLM_HD int gpu__anlm_ratio_in(float a, float b, float r)
{
    return a > r * b && r * a < b;
}

/* Fills t[GPU_ANLM_XI_N] with xi(theta(r)), r = k * RMAX / (N - 1). */
void gpu__anlm_xi_table(float *t);

/* xi(theta(r)) from the table (linear interpolation; 1 beyond RMAX). */
GPU__ANLM_HD float gpu__anlm_xi_lookup(const float *t, float r)
{
    float f = r * (float)(GPU_ANLM_XI_N - 1) / (float)GPU_ANLM_XI_RMAX;
    if (!(f < (float)(GPU_ANLM_XI_N - 1)))
        return 1.0f;
    int k = (int)f;
    float a = f - (float)k;
    return t[k] + a * (t[k + 1] - t[k]);
}

/* The Rician smoothing's outlier limit: GPU_ANLM_RICIAN_CLIP times the
 * plain mean (sum / k) of the box's k values. s2 is a minimum over the
 * offsets that passed the preselection, and where the few that passed all
 * missed (a voxel at the rim of a small structure) it is orders of
 * magnitude above its neighbours: in the plain box mean, one such voxel
 * made 2 sg2 exceed E and zeroed a whole 265-valued vessel in a
 * 16400-valued background at sigma 5. The smoothing now averages only the
 * values at or below this limit (a second pass over the box, sums in
 * double in box order, on the CPU and the GPU alike). In a box of k >= 5
 * estimates one outlier far above the rest is left out, and so are up to
 * k / 4 - 1 of them (with fewer than 5 estimates, at the volume's corners
 * when most voxels have none, an outlier can stay in); pure noise has
 * nothing above 4 means, so the mean is unchanged there. */
GPU__ANLM_HD double gpu__anlm_clip_limit(double sum, int k)
{
    return (double)GPU_ANLM_RICIAN_CLIP * sum / (double)k;
}

/* The search radius along an axis of n voxels (V in the definition). */
GPU__ANLM_HD int gpu__anlm_axis_radius(int S, int n)
{
    if (n <= 1)
        return 0;
    return S < 2 * n - 3 ? S : 2 * n - 3;
}

/* The preselection of the definition above, with the intended precedence:
 * (mean ratio ok || inverted mean ratio ok) && variance ratio ok. One
 * definition for the reference and the CUDA kernels. */
GPU__ANLM_HD int gpu__anlm_keep(const gpu__anlm_range *r, float mu, float nu, float mi, float vi,
                                float mj, float vj)
{
    int mean_ok = gpu__anlm_ratio_in(mi - r->lo, mj - r->lo, mu) ||
                  gpu__anlm_ratio_in(r->hi - mi, r->hi - mj, mu);
    return mean_ok && gpu__anlm_ratio_in(vi + r->var_eps, vj + r->var_eps, nu);
}

#ifdef __cplusplus
}
#endif

#endif
