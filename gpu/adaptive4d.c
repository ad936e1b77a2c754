/* Parameters and dispatcher of adaptive4d, and the CUDA stub of builds
 * without CUDA; see adaptive4d.h. Any thread. */
#include <errno.h>
#include <math.h>
#include <omp.h>

#include "common/err.h"
#include "common/log.h"
#include "gpu/adaptive4d.h"

void gpu_adaptive4d_params_default(gpu_adaptive4d_params *p)
{
    gpu_adaptive4d_params d = {
        .downsample = 2,
        .mono_size = 5,
        .recon_size = 11,
        .mono_center = (float)(M_PI / (2.0 * M_SQRT2)),
        .mono_bandwidth = 2.0f,
        .gamma = 1.0f,
        .tensor_sigma = 0.6f,
        .control_sigma = 0.6f,
        .lp_sigma = 0.6f,
        .lp_sigma_t = 2.0f,
        .m_alpha = 0.0f,
        .m_beta = 2.0f,
        .m_sigma = 3.0f,
        .mu_alpha = 0.4f,
        .mu_beta = 2.0f,
        .m_norm = GPU_A4D_NORM_NOISE,
        .m_pass = 2.0f,
        .t_scale = 3.0f,
        .pass_t = 0.0f,
        .static_sigma_t = 6.0f,
        .static_t = 4.0f,
        .strength = 1.0f,
        .backend = GPU_A4D_AUTO,
        .stats = NULL,
    };
    *p = d;
}

static int odd_size(int k)
{
    return k >= 3 && k <= GPU_A4D_MAX_SIZE && (k & 1);
}

int gpu_adaptive4d_params_check(const gpu_adaptive4d_params *p)
{
    if (!p || (p->downsample != 1 && p->downsample != 2) || !odd_size(p->mono_size) ||
        !odd_size(p->recon_size))
        return LDCT_EINPUT;
    if (!(p->mono_center > 0 && p->mono_center < M_PI) || !(p->mono_bandwidth > 0) ||
        !(p->gamma >= 0))
        return LDCT_EINPUT;
    if (!(p->tensor_sigma > 0) || !(p->control_sigma > 0) || !(p->lp_sigma > 0) ||
        !(p->lp_sigma_t > 0) || !(p->strength > 0))
        return LDCT_EINPUT;
    if (!(p->static_sigma_t >= 0) || !(p->static_t > 0 || p->static_sigma_t == 0))
        return LDCT_EINPUT;
    if (!(p->t_scale >= 0.25f && p->t_scale <= 16.0f) || !(p->pass_t >= 0))
        return LDCT_EINPUT;
    if (!(p->m_pass >= 0) || !(p->m_alpha >= 0) || !(p->m_beta > 0) || !(p->m_sigma > 0))
        return LDCT_EINPUT;
    if (!(p->mu_alpha > 0 && p->mu_alpha < 1) || !(p->mu_beta > 0))
        return LDCT_EINPUT;
    if (p->m_norm != GPU_A4D_NORM_NOISE && p->m_norm != GPU_A4D_NORM_MAX)
        return LDCT_EINPUT;
    if (p->backend != GPU_A4D_AUTO && p->backend != GPU_A4D_FFT && p->backend != GPU_A4D_SPATIAL)
        return LDCT_EINPUT;
    return 0;
}

int gpu__a4d_t_halo(const gpu_adaptive4d_params *p, const gpu_a4d_bank *b)
{
    float taps[GPU_A4D_MAX_SIZE];
    int mean_r = gpu__a4d_gauss_taps(1.0f, taps), mono_r = b->mono_size / 2;
    int tensor = (mono_r > mean_r ? mono_r : mean_r) + gpu__a4d_gauss_taps(p->tensor_sigma, taps) +
                 gpu__a4d_gauss_taps(p->control_sigma, taps);
    int recon = b->recon_size / 2 > b->lp_t_radius ? b->recon_size / 2 : b->lp_t_radius;
    int halo = tensor > recon ? tensor : recon;
    if (p->static_sigma_t > 0) { /* step 6: L6 of the output; S: L6 twice, two smoothings */
        int r6 = gpu__a4d_gauss_taps(p->static_sigma_t, taps),
            weight = 2 * r6 + 2 * gpu__a4d_gauss_taps(p->control_sigma, taps);
        halo = halo + r6 > weight ? halo + r6 : weight;
    }
    return halo;
}

int gpu__a4d_t_slab(int nt, int halo, size_t budget, size_t bytes_per_tp)
{
    if (!budget || bytes_per_tp * (size_t)nt <= budget)
        return nt;
    long h = (long)(budget / bytes_per_tp) - 2L * halo;
    return h < 1 ? 1 : h > nt ? nt : (int)h;
}

int gpu__a4d_caps_needed(const gpu_adaptive4d_params *p, const gpu_volume *in)
{
    return in->nt >= 4 && (p->m_norm == GPU_A4D_NORM_NOISE || p->static_sigma_t > 0);
}

int gpu__a4d_surrogate_nt(int nt)
{
    return nt / 2 < GPU_A4D_SURROGATE_T ? nt / 2 : GPU_A4D_SURROGATE_T;
}

int gpu__a4d_surrogate(const gpu_volume *in, gpu_volume *out, int threads)
{
    const int pairs = in->nt / 2, k = gpu__a4d_surrogate_nt(in->nt);
    if (gpu_volume_init(out, in->nx, in->ny, in->nz, k) != 0)
        return -ENOMEM;
    const size_t tp = (size_t)in->nx * in->ny * in->nz;
    const float *s = in->data;
    float *o = out->data;
    threads = threads > 0 ? threads : omp_get_max_threads();
#pragma omp parallel for num_threads(threads) schedule(static)
    for (size_t i = 0; i < tp; i++) {
        double mean = 0;
        for (int t = 0; t < in->nt; t++)
            mean += s[tp * (size_t)t + i];
        mean /= in->nt;
        for (int t = 0; t < k; t++) {
            const size_t a = tp * (size_t)(2 * (t * pairs / k)) + i;
            o[tp * (size_t)t + i] = (float)(mean + M_SQRT1_2 * ((double)s[a] - s[a + tp]));
        }
    }
    return 0;
}

double gpu__a4d_capped(const char *what, double median, double cap)
{
    if (!(cap > 0 && cap < median))
        return median;
    log_info("adaptive4d: %s reference %.4g capped at %.4g (%.0f times the noise surrogate's): "
             "much of the volume changes along t",
             what, median, cap, GPU_A4D_NOISE_MARGIN);
    return cap;
}

void gpu__a4d_norm_range(size_t n, size_t g0, size_t g1, size_t *i0, size_t *i1)
{
    size_t s = gpu__a4d_norm_stride(n);
    *i0 = (g0 + s - 1) / s;
    *i1 = (g1 + s - 1) / s;
}

int gpu_adaptive4d(const gpu_adaptive4d_params *p, const gpu_volume *in, gpu_volume *out,
                   const gpu_device *dev)
{
    gpu_device d = {GPU_DEVICE_CPU, 0, 0, NULL, 0};
    if (dev)
        d = *dev;
    else if (gpu_device_parse("auto", &d) != 0)
        d.kind = GPU_DEVICE_CPU;
    if (d.kind == GPU_DEVICE_CUDA && !LDCT_WITH_CUDA)
        return LDCT_ENOGPU;
    if (d.kind == GPU_DEVICE_CUDA)
        return gpu_adaptive4d_cuda(p, in, out, &d);
    return gpu_adaptive4d_ref(p, in, out, &d);
}

#if !LDCT_WITH_CUDA
int gpu_adaptive4d_cuda(const gpu_adaptive4d_params *p, const gpu_volume *in, gpu_volume *out,
                        const gpu_device *dev)
{
    (void)p;
    (void)in;
    (void)out;
    (void)dev;
    log_err("adaptive4d: this build has no CUDA");
    return LDCT_EUNSUPPORTED;
}
#endif
