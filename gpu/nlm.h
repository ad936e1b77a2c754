/* Non-local means denoising, 2D (slice by slice, seed 000) and 3D (whole
 * volume, seeds 000 section 5 and 003): parameters, the CPU reference that
 * defines the result, the CUDA versions, the dispatchers and the noise
 * estimator used for h = auto.
 *
 * Definition (what every version computes). With U the input extended by
 * mirroring (reflect-101: ... c b | a b c ... ; repeated for tiny sizes),
 * search radius S and patch radius P (2D: offsets and patches in x,y only;
 * each slice and each frame t separately; 3D: in x,y,z), for every voxel x
 *     D(x,d) = sum_p g(p) (U(x+p) - U(x+d+p))^2      p in [-P,P]^dim
 *     w(x,d) = exp(-D(x,d) / h^2)                    d in [-S,S]^dim
 *              (0 where D(x,d) / h^2 > c, the distance cutoff, if c > 0)
 *     out(x) = sum_d w(x,d) U(x+d) / sum_d w(x,d)
 * where g is 1/(2P+1)^dim (plain mean) or, with `gaussian`, the normalised
 * product of 1D Gaussians exp(-k^2 / (2 a^2)), a = max(P,1)/2 (seed 000's
 * distance kernel). The centre offset d = 0 has weight 1. The cutoff c
 * (as scikit-image's DISTANCE_CUTOFF, there 5) drops candidates too unlike
 * to be the same tissue, whose many small weights (e^-c and below) add up
 * and blur lesions and edges; 0 keeps every weight. With h_auto,
 * h = strength * sqrt(2) * gpu_noise_sigma(in): two patches of the same
 * tissue differ by 2 sigma^2 on average, so similar patches get weight about
 * exp(-1/strength^2).
 *
 * All functions take (params, in, out, dev): `out` must be initialised by the
 * caller with the shape of `in` and must not share its buffer; it is
 * overwritten. `dev` may be NULL (= cpu for _ref, gpu:0 for _cuda, auto for
 * the dispatcher). Return 0 or a negative code from common/err.h:
 * LDCT_EINPUT (bad parameters or shapes), -ENOMEM, LDCT_ENOGPU,
 * LDCT_ENOMEM_GPU, LDCT_ECUDA, LDCT_EUNSUPPORTED (CUDA version in a build
 * without CUDA). Any thread may call them; calls on one GPU serialise on
 * its stream.
 */
#ifndef LDCT_GPU_NLM_H
#define LDCT_GPU_NLM_H

#include "gpu/device.h"
#include "gpu/progress.h"
#include "gpu/volume.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { GPU_NLM_MAX_SEARCH = 15, GPU_NLM_MAX_PATCH = 5, GPU_NLM_MAX_CUTOFF = 80 };
/* The default cutoff (docs/NOTES-nlmq.md: measured on the quality phantom). */
#define GPU_NLM_DEFAULT_CUTOFF 4.0f
/* With h_auto, below this strength the cutoff grows as 1 / strength^2
 * (gpu_nlm_effective_cutoff). */
#define GPU_NLM_CUTOFF_FULL_STRENGTH 0.8

/* Optional timings filled by the CUDA versions (CUDA events, milliseconds). */
typedef struct gpu_nlm_stats {
    double kernel_ms; /* padding + NLM kernels, summed over slabs (chunks: first pad to last end) */
    double total_ms;  /* whole call including transfers and allocation */
    int slabs;        /* number of slabs the volume was cut into */
    int chunks;       /* single slab: chunks whose copies overlap the kernels (1: none) */
    int kernel_cfg;   /* nlm3d: the kernel that ran, by its LDCT_NLM3D_CFG number (gpu/nlm.cu:
                         40 v8, 37 v6, 27 v3, 7 v2); 0 for nlm2d */
} gpu_nlm_stats;

typedef struct gpu_nlm_params {
    int search_radius;    /* S, 1..15 (search window (2S+1)^dim) */
    int patch_radius;     /* P, 0..5 (patch (2P+1)^dim) */
    float h;              /* filtering parameter (same unit as voxels), > 0 unless h_auto */
    int h_auto;           /* nonzero: h = strength * sqrt(2) * gpu_noise_sigma(in) */
    float strength;       /* scales the automatic h (> 0) */
    int gaussian;         /* nonzero: Gaussian weighting of patch positions */
    float cutoff;         /* c: weight 0 where D / h^2 > c; 0 = no cutoff; 0..GPU_NLM_MAX_CUTOFF */
    gpu_nlm_stats *stats; /* optional out: timings of CUDA runs; may be NULL */
    const gpu_progress *progress; /* optional: the CPU reference reports to it; may be NULL */
} gpu_nlm_params;

/* Defaults: S = 5, P = 2, h_auto with strength 1, no Gaussian weighting,
 * cutoff GPU_NLM_DEFAULT_CUTOFF. */
void gpu_nlm_params_default(gpu_nlm_params *p);

/* Patch weighting by name, for command lines: "uniform" -> 0, "gaussian"
 * -> 1 (the value of gpu_nlm_params.gaussian); -1 for anything else. */
int gpu_nlm_weighting_parse(const char *name);

/* "uniform" or "gaussian" for gpu_nlm_params.gaussian. */
const char *gpu_nlm_weighting_name(int gaussian);

/* Robust noise standard deviation of a volume: Immerkaer's Laplacian-
 * difference mask applied in each slice (x,y), sigma = 1.4826 * median|L| / 6
 * (median instead of mean, so edges bias it little). Values that fill whole
 * 3x3 neighbourhoods (padding outside the reconstruction circle, clipped
 * air) and every neighbourhood touching them are left out; an image that is
 * mostly such neighbourhoods (noise-free) gives 0. Returns 0 and *sigma,
 * or LDCT_EINPUT for slices smaller than 3x3. */
int gpu_noise_sigma(const gpu_volume *in, double *sigma);

/* The cutoff in units of h^2 that a call applies: p->cutoff c, except with
 * h_auto at a strength s below s0 = GPU_NLM_CUTOFF_FULL_STRENGTH, where it
 * is c (s0 / s)^2 (at most GPU_NLM_MAX_CUTOFF): the cut then stays at the
 * same multiple of the noise as at s0. Two patches of the same tissue are
 * 2 sigma^2 apart on average, 1 / s^2 in units of h^2 = 2 s^2 sigma^2, so a
 * fixed 4 h^2 would come down to them at low strengths and drop similar
 * patches too (nlm3d at s = 0.5: 40.6 dB instead of 46.6 dB without a
 * cutoff, docs/NOTES-nlmq.md). At s >= s0, and with an explicit h, the
 * cutoff is c as given; 0 stays 0. */
float gpu_nlm_effective_cutoff(const gpu_nlm_params *p);

/* The h actually used for `in` (resolves h_auto); returns 0 or an error. */
int gpu_nlm_resolve_h(const gpu_nlm_params *p, const gpu_volume *in, float *h);

/* Turns h_auto into the explicit parameters that give the same result on
 * `in`: p->h = the resolved h, p->cutoff = gpu_nlm_effective_cutoff(p),
 * h_auto = 0. For callers that estimate the noise once and run many times
 * or report h. Returns 0 or an error of gpu_nlm_resolve_h (p unchanged). */
int gpu_nlm_fix_h(gpu_nlm_params *p, const gpu_volume *in);
/* The same with the noise already estimated: sigma = gpu_noise_sigma of
 * the input (callers that report it estimate it once). */
void gpu_nlm_fix_h_sigma(gpu_nlm_params *p, double sigma);

int gpu_nlm2d_ref(const gpu_nlm_params *p, const gpu_volume *in, gpu_volume *out,
                  const gpu_device *dev);
int gpu_nlm2d_cuda(const gpu_nlm_params *p, const gpu_volume *in, gpu_volume *out,
                   const gpu_device *dev);
/* Dispatcher: CUDA when dev (or auto) is a GPU, else the CPU reference. */
int gpu_nlm2d(const gpu_nlm_params *p, const gpu_volume *in, gpu_volume *out,
              const gpu_device *dev);

int gpu_nlm3d_ref(const gpu_nlm_params *p, const gpu_volume *in, gpu_volume *out,
                  const gpu_device *dev);
int gpu_nlm3d_cuda(const gpu_nlm_params *p, const gpu_volume *in, gpu_volume *out,
                   const gpu_device *dev);
int gpu_nlm3d(const gpu_nlm_params *p, const gpu_volume *in, gpu_volume *out,
              const gpu_device *dev);

/* Internal, shared by nlm_ref.c, nlm.c and nlm.cu. */
/* The cutoff in the kernels' unit, -log2(w) = D * log2(e) / h^2: weights
 * with a larger exponent are 0. No cutoff: +inf. */
float gpu__nlm_cut_exponent(const gpu_nlm_params *p);
int gpu__mirror(int i, int n);
/* Validates params and shapes for dim 2 or 3. */
int gpu__nlm_check(const gpu_nlm_params *p, const gpu_volume *in, const gpu_volume *out, int dim);
/* 1D patch weights g[0..2P] (normalised per axis so the product sums to 1). */
void gpu__nlm_patch_weights(int patch_radius, int gaussian, float *g);
/* The instruction set the CPU reference runs with now: "avx512", "avx2" or
 * "plain" (the widest the CPU has, capped by LDCT_NLM_REF_ISA). */
const char *gpu__nlm_ref_isa(void);

#ifdef __cplusplus
}
#endif

#endif
