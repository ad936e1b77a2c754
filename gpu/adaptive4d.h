/* True 4D adaptive filtering (seed 002: Eklund, Andersson, Knutsson, "True
 * 4D image denoising on the GPU", 2011; Knutsson's adaptive filtering):
 * parameters, the filter bank, the CPU reference that defines the result,
 * the CUDA version and the dispatcher. Design notes and measured filter
 * errors: docs/NOTES-adaptive4d.md.
 *
 * Definition (what every version computes), for a volume s(x), x = (x,y,z,t)
 * in voxel units, certainty c = 1 inside the volume and 0 outside:
 *  1. Tensor grid: with downsample f = 2, s is smoothed along x, y, z by the
 *     binomial [1 4 6 4 1]/16 (normalized convolution) and every f-th voxel
 *     along x, y, z is kept (t is never downsampled); f = 1 keeps s.
 *  2. Fourteen monomial filters on the tensor grid, specified in the
 *     frequency domain with u in [-pi,pi)^4, rho = |u|, lognormal
 *     R(rho) = exp(-4 ln^2(rho/rho0) / (B^2 ln 2)):
 *        F_n(u) = R(rho) u_n / rho            n = x,y,z,t   (odd, 4)
 *        F_nm(u) = R(rho) u_n u_m / rho^2     n <= m        (even, 10)
 *     sampled, brought to spatial kernels of mono_size^4 (gpu__a4d_bank_make).
 *     Responses q_n, q_nm.
 *  3. Local structure tensor T = q1 q1^T + gamma Q2 Q2 (q1 the 4-vector of
 *     odd responses, Q2 the symmetric 4x4 matrix of even ones; gamma = 1
 *     makes it phase invariant), brought to full-resolution coordinates
 *     with t measured in units of t_scale voxels, T <- D^-1 T D^-1 with
 *     D = diag(f,f,f,1/a), a = t_scale (a frequency u becomes (u_s, a u_t)),
 *     then each of its 10 components is smoothed by a Gaussian of
 *     tensor_sigma (normalized convolution).
 *  4. Control tensor: x = N(T) / ref, N the Frobenius norm of T in voxel
 *     coordinates (gpu__a4d_norm_voxel: D' T D' with D' = diag(1,1,1,1/a)),
 *     ref the median of N over the volume (m_norm NOISE, default; a fixed
 *     sample of voxels; with nt >= 4 capped at GPU_A4D_NOISE_MARGIN times
 *     the same median over the static surrogate, gpu__a4d_surrogate) or
 *     its maximum (MAX, the paper's; never capped),
 *        M(x) = x^beta / (x^(alpha+beta) + sigma^beta)       (m_* params)
 *     with eigen-decomposition T = sum_k l_k e_k e_k^T, l_1 >= .. >= l_4,
 *        mu(r) = (r(1-a))^b / ((r(1-a))^b + (a(1-r))^b)      (mu_* params)
 *        m_k = M(x) mu(l_k / l_1),
 *        P(x) = x^beta / (x^beta + (m_pass sigma)^beta)      (all-pass share)
 *        g_k = 1 - e_kt^2 (1 - l_k^beta / (l_k^beta + (pass_t ref)^beta))
 *        C = sum_k (m_k + (1 - m_k) P(x) g_k) e_k e_k^T      (gpu__a4d_weights)
 *     (g_k = 1 when pass_t = 0. With the gate, a direction with a t
 *     component keeps its all-pass share only if its eigenvalue is far
 *     above the noise: moving edges keep it, the noise along t at static
 *     edges is smoothed),
 *     then each component of C is smoothed by a Gaussian of control_sigma
 *     (normalized convolution) and interpolated (linear in x, y, z) back to
 *     full resolution.
 *  5. Reconstruction: a separable Gaussian lowpass L of lp_sigma (normalized
 *     convolution) and ten highpass filters along directions n_k
 *        H_k(u) = (1 - G(u)) (w . n_k)^2 / |w|^2,  w = (u_x, u_y, u_z, a u_t)
 *     (G the frequency response of the discrete lowpass, recon_size^4
 *     kernels), combined as
 *        out = L s + sum_k c_k (H_k s),  c_k = sum_l Ginv_kl n_l^T C n_l
 *     with Ginv the inverse Gram matrix of the n_k n_k^T (dual basis), so
 *     the adaptive filter is L + (1 - G) w^T C w / |w|^2: all-pass where
 *     C = I, lowpass where C = 0.
 *  6. Static parts (static_sigma_t > 0): on the tensor grid of step 1 (s'),
 *     the temporal residual r = s' - L6 s' (L6 the normalized Gaussian of
 *     static_sigma_t along t) gives the energy e = r^2 smoothed by L6 along
 *     t (a curve that crosses its own lowpass still counts everywhere in
 *     the window) and by a Gaussian of control_sigma (normalized
 *     convolution, x, y, z, t), eref its median
 *     (same sample voxels as step 4's; with nt >= 4 capped like step 4's
 *     median, by the surrogate's eref), the weight
 *        S = 1 / (1 + (e / (static_t eref))^m_beta)  (gpu__a4d_static_weight)
 *     smoothed by control_sigma and interpolated like C, and
 *        out <- out + S (L6 out - out)
 *     at full resolution: where the lowpass along t would change nothing
 *     but noise (static structures, also at the first and last time points
 *     and next to strong edges, where the fan of step 5 passes noise), the
 *     output is averaged along t; moving structures keep step 5's output.
 * Borders (normalized convolution, no voxel lost): every zero-DC filter h
 * (steps 2 and 5) answers h*(c s) - (h*c) m(x), m the normalized-convolution
 * local mean (Gaussian sigma 1 on the tensor grid, L s at full resolution):
 * samples outside the volume count as the local mean, so a constant volume
 * gives zero responses and comes out unchanged.
 *
 * All entry points take (params, in, out, dev) like gpu/nlm.h: `out` must be
 * initialised by the caller with the shape of `in` and not share its
 * buffer. Return 0 or a negative code from common/err.h: LDCT_EINPUT (bad
 * parameters or shapes), -ENOMEM, LDCT_EUNSUPPORTED (FFT back end without
 * libfftw3f; CUDA version in a build without CUDA), LDCT_ENOGPU,
 * LDCT_ENOMEM_GPU, LDCT_ECUDA. Any thread may call them.
 */
#ifndef LDCT_GPU_ADAPTIVE4D_H
#define LDCT_GPU_ADAPTIVE4D_H

#include <math.h>

#include "gpu/device.h"
#include "gpu/progress.h"
#include "gpu/volume.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
    GPU_A4D_NMONO = 14,   /* monomial filters: 4 odd, then 10 even */
    GPU_A4D_NTENSOR = 10, /* components of a symmetric 4x4 tensor */
    GPU_A4D_NHP = 10,     /* highpass reconstruction filters */
    GPU_A4D_MAX_SIZE = 15 /* largest spatial kernel size */
};

/* What the tensor magnitude is measured against in the M-function. */
typedef enum gpu_a4d_norm {
    GPU_A4D_NORM_NOISE = 0, /* the median ||T||_F: the noise floor (default) */
    GPU_A4D_NORM_MAX = 1    /* the maximum ||T||_F (the paper's) */
} gpu_a4d_norm;

/* Filtering back end of the nonseparable filters. */
typedef enum gpu_a4d_backend {
    GPU_A4D_AUTO = 0,   /* reference: FFT when FFTW loads, else spatial; CUDA: the faster,
                         * measured on the first slab of each stage */
    GPU_A4D_FFT = 1,    /* FFT of the zero-padded volume (FFTW / cuFFT) */
    GPU_A4D_SPATIAL = 2 /* direct convolution */
} gpu_a4d_backend;

typedef struct gpu_a4d_stats {
    double total_ms; /* whole call */
    int slabs;       /* slabs the volume was cut into (CUDA) */
    int fft_slabs;   /* of which filtered with FFTs (CUDA) */
    int t_slabs;     /* slabs along t (1: all time points at once) */
} gpu_a4d_stats;

typedef struct gpu_adaptive4d_params {
    int downsample;                 /* f: 1 or 2 (tensor grid along x, y, z) */
    int mono_size;                  /* spatial size of the monomial kernels, odd 3..15 */
    int recon_size;                 /* spatial size of the highpass kernels, odd 3..15 */
    float mono_center;              /* rho0 of the lognormal, rad/sample of the tensor grid */
    float mono_bandwidth;           /* B, octaves */
    float gamma;                    /* weight of the even part of T */
    float tensor_sigma;             /* Gaussian smoothing of T, tensor-grid voxels */
    float control_sigma;            /* Gaussian smoothing of C, tensor-grid voxels */
    float lp_sigma;                 /* reconstruction lowpass along x, y, z, voxels */
    float lp_sigma_t;               /* reconstruction lowpass along t, time points */
    float m_alpha, m_beta, m_sigma; /* M-function: overshoot, steepness, noise threshold */
    float mu_alpha, mu_beta;        /* mu-function: isotropy threshold, steepness */
    int m_norm;                     /* gpu_a4d_norm: reference of x in the M-function */
    float m_pass;                   /* all-pass threshold in units of m_sigma; 0 = none */
    float t_scale;                  /* a: one time point counts a voxels in directions */
    float pass_t;                   /* gate of the all-pass share along t: eigenvalue
                                     * threshold in units of the reference; 0 = no gate */
    float static_sigma_t;           /* step 6: temporal lowpass of the output where nothing
                                     * changes along t but noise, time points; 0 = off */
    float static_t;                 /* its threshold in units of the median residual energy */
    float strength;                 /* scales m_sigma (higher = smoother); default 1 */
    gpu_a4d_backend backend;
    size_t mem_budget;    /* bytes the call may use for its buffers; 0 = automatic (CPU: half
                           * the physical memory; CUDA: the device's budget). Beyond it the
                           * time points run in slabs along t (gpu__a4d_t_halo) */
    gpu_a4d_stats *stats; /* optional out; may be NULL */
    const gpu_progress *progress; /* optional: the CPU reference reports to it; may be NULL */
} gpu_adaptive4d_params;

/* Defaults (docs/NOTES-adaptive4d.md says where each comes from and what
 * was measured): f = 2, mono 5^4, recon 11^4, rho0 = pi/(2 sqrt 2), B = 2,
 * gamma = 1, tensor_sigma = 0.6, control_sigma = 0.6, lp_sigma = 0.6,
 * lp_sigma_t = 2; M: noise-floor reference, alpha 0, beta 2, sigma 3;
 * all-pass m_pass 2; t_scale 3, pass_t 0 (no gate); mu: alpha 0.4, beta 2;
 * step 6: static_sigma_t 6, static_t 4; strength 1; backend auto. */
void gpu_adaptive4d_params_default(gpu_adaptive4d_params *p);

/* Validates parameters (not shapes); 0 or LDCT_EINPUT. */
int gpu_adaptive4d_params_check(const gpu_adaptive4d_params *p);

int gpu_adaptive4d_ref(const gpu_adaptive4d_params *p, const gpu_volume *in, gpu_volume *out,
                       const gpu_device *dev);
int gpu_adaptive4d_cuda(const gpu_adaptive4d_params *p, const gpu_volume *in, gpu_volume *out,
                        const gpu_device *dev);
/* Dispatcher: CUDA when dev (or auto) is a GPU, else the CPU reference. */
int gpu_adaptive4d(const gpu_adaptive4d_params *p, const gpu_volume *in, gpu_volume *out,
                   const gpu_device *dev);

/* Steps 1-3 alone: the smoothed structure tensor on the tensor grid, in
 * full-resolution coordinates. T[10] must be initialised by the caller with
 * nx' = ceil(nx/f), ny', nz', nt; components in the order xx xy xz xt yy yz
 * yt zz zt tt. Returns 0 or an error as above. */
int gpu_adaptive4d_tensor_ref(const gpu_adaptive4d_params *p, const gpu_volume *in,
                              gpu_volume T[GPU_A4D_NTENSOR], const gpu_device *dev);

/* ---- internal, shared by adaptive4d_*.c, adaptive4d.cu and the tests ---- */

/* The filters of one parameter set. Kernels are size^4 floats, x fastest,
 * tap (jx,jy,jz,jt) in [-r,r]^4 at ((jt+r)*K + jz+r)*K... (K = size,
 * r = size/2); the filter answers out(x) = sum_j w(j) s(x - j). */
typedef struct gpu_a4d_bank {
    int mono_size, recon_size;
    float *mono;                  /* 14 kernels: odd x y z t, even xx xy xz xt yy yz yt zz zt tt */
    float *hp;                    /* 10 highpass kernels along dirs[k] */
    float lp[GPU_A4D_MAX_SIZE];   /* reconstruction lowpass along x, y, z, 1D taps, sum 1 */
    int lp_radius;                /* lp has 2*lp_radius+1 taps */
    float lp_t[GPU_A4D_MAX_SIZE]; /* the lowpass along t (lp_sigma_t) */
    int lp_t_radius;
    double dirs[GPU_A4D_NHP][4];           /* unit directions n_k */
    double dual[GPU_A4D_NHP][GPU_A4D_NHP]; /* Ginv */
    double mono_err, hp_err;               /* worst relative L2 design error of the kernels */
} gpu_a4d_bank;

/* Builds the bank for p (gpu_a4d_bank_free releases it); `parts` selects
 * the monomial kernels, the reconstruction filters or both (the kernels not
 * selected stay NULL; the design of the 11^4 highpass kernels takes most of
 * the time, about 1 s; the last design is cached, so repeated calls with
 * the same filter parameters only copy it). 0, LDCT_EINPUT, -ENOMEM. */
enum { GPU_A4D_BANK_MONO = 1, GPU_A4D_BANK_RECON = 2, GPU_A4D_BANK_ALL = 3 };
int gpu__a4d_bank_make(const gpu_adaptive4d_params *p, int parts, gpu_a4d_bank *b);
void gpu__a4d_bank_free(gpu_a4d_bank *b);

/* Index of tensor component (i,j), i,j in 0..3, in the order xx xy .. tt. */
int gpu__a4d_tidx(int i, int j);

/* Normalized 1D Gaussian taps exp(-j^2/(2 sigma^2)), j in [-r,r],
 * r = min(ceil(3 sigma), GPU_A4D_MAX_SIZE/2); returns r. */
int gpu__a4d_gauss_taps(float sigma, float *taps);

/* Separable normalized convolution along the axes in `axes` (bit d = axis
 * d, x = bit 0): per axis out(x) = sum_j w(j) s(x-j) / sum_j w(j) over the
 * taps that fall inside. `in` may equal `out`. dims = {nx,ny,nz,nt}. */
int gpu__a4d_smooth(const float *in, float *out, const int dims[4], const float *taps, int radius,
                    int axes, int threads);

/* Filters `in` (dims) with nk kernels of size^4 into outs[k]; with `mean`
 * non-NULL the border correction h*(c s) - (h*c) mean is applied (kernels
 * must then have zero sum). backend GPU_A4D_FFT or GPU_A4D_SPATIAL. */
int gpu__a4d_filter_ref(const float *kernels, int nk, int size, const float *in, const float *mean,
                        const int dims[4], float **outs, int backend, int threads);
/* The same, adding 1 to `done` (may be NULL) per kernel filtered. */
int gpu__a4d_filter_ref_counted(const float *kernels, int nk, int size, const float *in,
                                const float *mean, const int dims[4], float **outs, int backend,
                                int threads, gpu_progress_count *done);

/* GPU_A4D_NORM_NOISE: the median of ||T||_F over every stride-th voxel of
 * the tensor grid (v = 0, stride, 2 stride, ..., at most
 * GPU_A4D_NORM_SAMPLES of them), so the CPU and CUDA versions sample the
 * same voxels. _median sorts samples[m] and returns samples[m/2]. */
enum { GPU_A4D_NORM_SAMPLES = 1 << 18 };
size_t gpu__a4d_norm_stride(size_t n);
float gpu__a4d_norm_median(float *samples, size_t m);

/* Caps of both references (steps 4 and 6), so that a change along t over
 * most of the volume (enhancement of much of the image, a global shift)
 * cannot become the reference and flatten the time curves. The static
 * surrogate of K = min(nt / 2, GPU_A4D_SURROGATE_T) time points
 *     u(k) = mean_t s(t) + (s(2j) - s(2j+1)) / sqrt 2,   j = k (nt / 2) / K,
 * (pairs spread over the series; the cap on K bounds its cost and memory
 * for long series) has the volume's static structure and noise of its spatial spectrum and
 * variance (time points are independent acquisitions; the mean adds
 * 1/nt of it), but of a change along t only the step between neighbouring
 * time points. The medians of its tensor norm and step 6 energy (the
 * volume's sampling), times GPU_A4D_NOISE_MARGIN, cap the volume's. Where
 * nothing but noise changes along t the volume's medians lie at 0.98-1.25
 * (tensor) and 1.02-1.71 (energy) times the surrogate's (noise, nt 4..24;
 * the 4D body phantom 1.09 and 1.09, measured), so the caps change
 * nothing there. Only with nt >= 4 (a surrogate of two time points or
 * more); _needed says whether a call takes a cap. _surrogate: `out` gets
 * shape (nx, ny, nz, K) (the caller closes it), computed with
 * `threads` OpenMP threads (0: OpenMP's default); 0 or -ENOMEM. _capped: the median, or the
 * cap when it is positive and lower (logged, `what` the reference's
 * name). */
#define GPU_A4D_NOISE_MARGIN 3.0
#define GPU_A4D_SURROGATE_T 8
int gpu__a4d_caps_needed(const gpu_adaptive4d_params *p, const gpu_volume *in);
int gpu__a4d_surrogate(const gpu_volume *in, gpu_volume *out, int threads);
int gpu__a4d_surrogate_nt(int nt); /* K */
double gpu__a4d_capped(const char *what, double median, double cap);

/* Slabs along t. A region of time points [r0, r1) filtered as if it were
 * the volume gives the one-slab result at its time points that lie at
 * least gpu__a4d_t_halo() from a region end that is not the volume's (the
 * dependency along t: monomial filters or their local mean, tensor and
 * control smoothing, reconstruction filters and the lowpass along t, and
 * step 6's L6 on the output and on the weight). Only the M-function's
 * reference and step 6's eref are global: a first pass over the slabs
 * collects them (the norm and residual-energy samples, or the maximum, at
 * each slab's own time points), the second filters with them. gpu__a4d_t_slab: output time points
 * per slab for `budget` bytes at `bytes_per_tp` bytes per region time point
 * (nt when everything fits or budget is 0; at least 1).
 * gpu__a4d_norm_range: the samples i (voxel i * stride of the whole tensor
 * grid of n voxels) whose voxel lies in [g0, g1). */
int gpu__a4d_t_halo(const gpu_adaptive4d_params *p, const gpu_a4d_bank *b);
int gpu__a4d_t_slab(int nt, int halo, size_t budget, size_t bytes_per_tp);
void gpu__a4d_norm_range(size_t n, size_t g0, size_t g1, size_t *i0, size_t *i1);

/* Control tensor from the smoothed structure tensor, in place (10 arrays of
 * n voxels): the M- and mu-mappings of step 4 (before smoothing of C), the
 * reference from T capped at ref_cap (0: no cap; gpu__a4d_capped). */
void gpu__a4d_control(const gpu_adaptive4d_params *p, float **T, size_t n, double ref_cap,
                      int threads);
/* The same with the M-function's reference given (from the slab pass). */
void gpu__a4d_control_with(const gpu_adaptive4d_params *p, float **T, size_t n, double ref,
                           int threads);

#ifdef __CUDACC__
#define GPU__A4D_HD __host__ __device__ __forceinline__
#else
#define GPU__A4D_HD static inline
#endif

/* Jacobi rotations of a symmetric 4x4 matrix a (row-major) until its
 * off-diagonal part vanishes: a ends diagonal (the eigenvalues, unsorted),
 * v holds the eigenvectors as columns. One definition for the reference
 * (gpu__a4d_eig4) and the CUDA kernels. */
GPU__A4D_HD void gpu__a4d_jacobi4(double a[16], double v[16])
{
    for (int i = 0; i < 16; i++)
        v[i] = i % 5 == 0;
    for (int sweep = 0; sweep < 30; sweep++) {
        double off = 0;
        for (int i = 0; i < 4; i++)
            for (int j = i + 1; j < 4; j++)
                off += a[4 * i + j] * a[4 * i + j];
        if (off < 1e-30)
            break;
        for (int pi = 0; pi < 4; pi++)
            for (int qi = pi + 1; qi < 4; qi++) {
                double apq = a[4 * pi + qi];
                if (fabs(apq) < 1e-300)
                    continue;
                double theta = (a[4 * qi + qi] - a[4 * pi + pi]) / (2 * apq);
                double t = (theta >= 0 ? 1 : -1) / (fabs(theta) + sqrt(theta * theta + 1));
                double c = 1 / sqrt(t * t + 1), s = t * c;
                for (int k = 0; k < 4; k++) { /* columns p, q */
                    double akp = a[4 * k + pi], akq = a[4 * k + qi];
                    a[4 * k + pi] = c * akp - s * akq;
                    a[4 * k + qi] = s * akp + c * akq;
                }
                for (int k = 0; k < 4; k++) { /* rows p, q */
                    double apk = a[4 * pi + k], aqk = a[4 * qi + k];
                    a[4 * pi + k] = c * apk - s * aqk;
                    a[4 * qi + k] = s * apk + c * aqk;
                }
                for (int k = 0; k < 4; k++) {
                    double vkp = v[4 * k + pi], vkq = v[4 * k + qi];
                    v[4 * k + pi] = c * vkp - s * vkq;
                    v[4 * k + qi] = s * vkp + c * vkq;
                }
            }
    }
}

/* The parameters of step 4 as the mapping uses them (m_sigma already
 * multiplied by strength), for gpu__a4d_weights on either side. */
typedef struct gpu__a4d_map {
    double m_alpha, m_beta, m_sigma, mu_alpha, mu_beta, m_pass, pass_t, t_scale;
} gpu__a4d_map;

/* Step 6's weight S at a tensor-grid voxel from its temporal residual
 * energy e and the reference eref (their median): 1 where what the
 * temporal lowpass would change is at the noise level, 0 far above. */
GPU__A4D_HD double gpu__a4d_static_weight(double e, double eref, double static_t, double beta)
{
    if (!(eref > 0))
        return e > 0 ? 0.0 : 1.0;
    return 1 / (1 + pow(fmax(e, 0.0) / (static_t * eref), beta));
}

/* N(T): the Frobenius norm of the tensor (10 components, order of
 * gpu__a4d_tidx) in voxel coordinates: components with one t index divided
 * by t_scale, tt by t_scale^2 (undoes the t metric of step 3, so that the
 * M-function sees the same magnitudes whatever t_scale is). */
GPU__A4D_HD double gpu__a4d_norm_voxel(const double t[10], double t_scale)
{
    double s = 0;
    for (int c = 0; c < 10; c++) { /* t components: 3 xt, 6 yt, 8 zt, 9 tt */
        const int has_t = (c == 3) + (c == 6) + (c == 8) + 2 * (c == 9);
        const int diagonal = c == 0 || c == 4 || c == 7 || c == 9;
        double v = t[c];
        for (int k = 0; k < has_t; k++)
            v /= t_scale;
        s += (diagonal ? 1 : 2) * v * v;
    }
    return sqrt(s);
}

/* The weights w[4] of step 4 for eigenvalues l (any order; l1 their
 * largest) and eigenvectors e (columns of a row-major 4x4, e[12 + k] the t
 * component of the k-th), at x = N(T) / ref (ref > 0). */
GPU__A4D_HD void gpu__a4d_weights(const gpu__a4d_map *p, double x, double ref, const double l[4],
                                  const double e[16], double w[4])
{
    const double xb = pow(x, p->m_beta);
    const double m = xb / (pow(x, p->m_alpha + p->m_beta) + pow(p->m_sigma, p->m_beta));
    const double pass = p->m_pass > 0 ? xb / (xb + pow(p->m_pass * p->m_sigma, p->m_beta)) : 0;
    const double l1 = fmax(fmax(l[0], l[1]), fmax(l[2], l[3]));
    for (int k = 0; k < 4; k++) {
        w[k] = 0;
        if (!(l1 > 0))
            continue;
        const double r = fmin(1.0, fmax(0.0, l[k] / l1)), a = p->mu_alpha;
        const double num = pow(r * (1 - a), p->mu_beta), den = num + pow(a * (1 - r), p->mu_beta);
        const double mk = m * (den > 0 ? num / den : 1.0);
        double gate = 1;
        if (p->pass_t > 0) {
            const double lb = pow(fmax(l[k], 0.0) / ref, p->m_beta);
            gate = 1 - e[12 + k] * e[12 + k] * (1 - lb / (lb + pow(p->pass_t, p->m_beta)));
        }
        w[k] = mk + (1 - mk) * pass * gate;
    }
}

/* Eigen-decomposition of a symmetric 4x4 matrix a (row-major, destroyed):
 * eigenvalues l[4] descending, eigenvectors as columns of v (row-major). */
void gpu__a4d_eig4(double a[16], double l[4], double v[16]);

#ifdef __cplusplus
}
#endif

#endif
