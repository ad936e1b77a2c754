/* FDK geometry and everything the CPU and CUDA versions share without an
 * FFT library: projection matrices of a circular orbit, cosine and Parker
 * weights, the ramp kernel and windows, validation, the dispatcher, the
 * plain-convolution filter used as the tests' reference, and the stubs of
 * builds without CUDA. See fdk.h for the definitions. Any thread.
 */
#include "gpu/fdk.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/log.h"

static const double k_pi = 3.14159265358979323846;

static const char *const k_filter_names[GPU_FDK_NFILTERS] = {"ram-lak", "shepp-logan", "cosine",
                                                             "hamming", "hann"};

void gpu_fdk_params_default(gpu_fdk_params *p)
{
    memset(p, 0, sizeof *p);
    p->filter = GPU_FDK_RAMLAK;
}

int gpu_fdk_filter_parse(const char *name)
{
    for (int i = 0; name && i < GPU_FDK_NFILTERS; i++)
        if (strcmp(name, k_filter_names[i]) == 0)
            return i;
    return LDCT_EINPUT;
}

const char *gpu_fdk_filter_name(int filter)
{
    return filter >= 0 && filter < GPU_FDK_NFILTERS ? k_filter_names[filter] : "?";
}

/* Rows of the matrix of a source at angle b (see gpu_fdk_geometry_circular). */
static void circular_matrix(const gpu_fdk_geometry *g, double b, double *m)
{
    double cb = cos(b), sb = sin(b);
    double A = g->dsd / (g->dso * g->du), B = g->dsd / (g->dso * g->dv);
    double r2[4] = {-cb / g->dso, -sb / g->dso, 0.0, 1.0};
    double r0[4] = {-A * sb, A * cb, 0.0, 0.0};
    double r1[4] = {0.0, 0.0, B, 0.0};
    for (int c = 0; c < 4; c++) {
        m[c] = r0[c] + g->cu * r2[c];
        m[4 + c] = r1[c] + g->cv * r2[c];
        m[8 + c] = r2[c];
    }
}

int gpu_fdk_geometry_circular(gpu_fdk_geometry *g, int nproj, int nu, int nv, double du, double dv,
                              double dso, double dsd, double start, double range, double offset_u,
                              double offset_v)
{
    memset(g, 0, sizeof *g);
    if (nproj < 2 || nu < 1 || nv < 1 || !(du > 0) || !(dv > 0) || !(dso > 0) || !(dsd > dso) ||
        !(range > 0))
        return LDCT_EINPUT;
    g->nproj = nproj, g->nu = nu, g->nv = nv;
    g->du = du, g->dv = dv, g->dso = dso, g->dsd = dsd;
    g->cu = (nu - 1) / 2.0 + offset_u;
    g->cv = (nv - 1) / 2.0 + offset_v;
    int full = range >= 2.0 * k_pi - 1e-9;
    g->scan_range = range;
    g->angle_step = full ? range / nproj : range / (nproj - 1);
    g->matrices = malloc(sizeof(double) * 12 * (size_t)nproj);
    g->angles = malloc(sizeof(double) * (size_t)nproj);
    if (!g->matrices || !g->angles) {
        gpu_fdk_geometry_close(g);
        return -ENOMEM;
    }
    for (int i = 0; i < nproj; i++) {
        g->angles[i] = start + i * g->angle_step;
        circular_matrix(g, g->angles[i], g->matrices + 12 * (size_t)i);
    }
    return 0;
}

void gpu_fdk_geometry_close(gpu_fdk_geometry *g)
{
    if (!g)
        return;
    free(g->matrices);
    free(g->angles);
    g->matrices = NULL;
    g->angles = NULL;
}

double gpu_fdk_fan_half_angle(const gpu_fdk_geometry *g)
{
    double left = g->cu + 0.5, right = g->nu - 0.5 - g->cu;
    return atan((left > right ? left : right) * g->du / g->dsd);
}

double gpu_fdk_short_scan_range(int nu, double du, double dso, double dsd)
{
    (void)dso;
    return k_pi + 2.0 * atan(nu * du / 2.0 / dsd);
}

void gpu_fdk_volume_centered(gpu_fdk_volume *v, int nx, int ny, int nz, double vx, double vy,
                             double vz)
{
    v->nx = nx, v->ny = ny, v->nz = nz;
    v->voxel[0] = vx, v->voxel[1] = vy, v->voxel[2] = vz;
    v->origin[0] = -vx * (nx - 1) / 2.0;
    v->origin[1] = -vy * (ny - 1) / 2.0;
    v->origin[2] = -vz * (nz - 1) / 2.0;
}

/* In this geometry the conjugate of the ray (beta, gamma) is (beta + pi -
 * 2 gamma, -gamma) (a positive column offset turns the ray against the
 * rotation), so Parker's formulas appear with gamma negated. */
double gpu_fdk_parker(double beta, double gamma, double delta)
{
    double g = gamma > delta ? delta : gamma < -delta ? -delta : gamma;
    if (beta < 0 || beta > k_pi + 2.0 * delta)
        return 0.0;
    if (beta < 2.0 * (delta + g)) {
        double s = sin(k_pi / 4.0 * beta / (delta + g));
        return s * s;
    }
    if (beta <= k_pi + 2.0 * g)
        return 1.0;
    if (delta - g <= 0)
        return 0.0;
    double s = sin(k_pi / 4.0 * (k_pi + 2.0 * delta - beta) / (delta - g));
    return s * s;
}

int gpu_fdk_weights(const gpu_fdk_geometry *g, float *colw, float *cosw)
{
    if (!(g->dso > 0) || !(g->dsd > 0))
        return LDCT_EINPUT;
    int shortscan = g->scan_range < 2.0 * k_pi - g->angle_step / 2.0;
    if (shortscan && !g->angles)
        return LDCT_EINPUT;
    double tau = g->du * g->dso / g->dsd, delta = (g->scan_range - k_pi) / 2.0;
    for (int i = 0; i < g->nproj; i++)
        for (int a = 0; a < g->nu; a++) {
            double gam = atan((a - g->cu) * g->du / g->dsd);
            double red = shortscan ? gpu_fdk_parker(g->angles[i] - g->angles[0], gam, delta) : 0.5;
            colw[(size_t)i * g->nu + a] = (float)(red * g->angle_step / tau);
        }
    for (int b = 0; b < g->nv; b++)
        for (int a = 0; a < g->nu; a++) {
            double um = (a - g->cu) * g->du, vm = (b - g->cv) * g->dv;
            cosw[(size_t)b * g->nu + a] =
                (float)(g->dsd / sqrt(g->dsd * g->dsd + um * um + vm * vm));
        }
    return 0;
}

int gpu_fdk_pad_length(int nu)
{
    int best = 0;
    for (long p2 = 2; p2 < 8L * nu + 8; p2 *= 2)
        for (long p3 = p2; p3 < 8L * nu + 8; p3 *= 3)
            for (long p5 = p3; p5 < 8L * nu + 8; p5 *= 5)
                if (p5 >= 2L * nu && (best == 0 || p5 < best))
                    best = (int)p5;
    return best;
}

void gpu_fdk_ramp_kernel(int npad, float *h)
{
    for (int n = 0; n < npad; n++) {
        int m = n <= npad / 2 ? n : npad - n;
        h[n] = m == 0 ? 0.25f : m % 2 ? (float)(-1.0 / (k_pi * k_pi * (double)m * m)) : 0.0f;
    }
}

double gpu_fdk_window(int filter, int k, int npad)
{
    double x = (double)k / npad;
    switch (filter) {
    case GPU_FDK_SHEPP_LOGAN:
        return x == 0 ? 1.0 : sin(k_pi * x) / (k_pi * x);
    case GPU_FDK_COSINE:
        return cos(k_pi * x);
    case GPU_FDK_HAMMING:
        return 0.54 + 0.46 * cos(2.0 * k_pi * x);
    case GPU_FDK_HANN:
        return 0.5 + 0.5 * cos(2.0 * k_pi * x);
    default:
        return 1.0;
    }
}

static int check_config(const gpu_fdk_params *p)
{
    if (p->filter < 0 || p->filter >= GPU_FDK_NFILTERS)
        return LDCT_EINPUT;
    if (p->bp_i < 0 || p->bp_i > 2048 || p->bp_bx < 0 || p->bp_by < 0)
        return LDCT_EINPUT;
    if (p->bp_k && p->bp_k != 1 && p->bp_k != 2 && p->bp_k != 4 && p->bp_k != 8)
        return LDCT_EINPUT;
    int t = p->bp_bx * p->bp_by;
    if ((p->bp_bx || p->bp_by) && (t <= 0 || t > 1024 || t % 32))
        return LDCT_EINPUT;
    return 0;
}

int gpu_fdk_check(const gpu_fdk_params *p, const gpu_fdk_geometry *g, const gpu_volume *proj,
                  const gpu_fdk_volume *vol, const gpu_volume *out, int need_circular)
{
    if (!p || !g || !proj || !proj->data || !g->matrices || check_config(p))
        return LDCT_EINPUT;
    if (g->nproj < 1 || proj->nx != g->nu || proj->ny != g->nv || proj->nz != g->nproj ||
        proj->nt != 1)
        return LDCT_EINPUT;
    if (need_circular && (!(g->dso > 0) || !(g->dsd > 0) || !(g->du > 0) || !(g->angle_step > 0)))
        return LDCT_EINPUT;
    if (vol && (!out || !out->data || out->nx != vol->nx || out->ny != vol->ny ||
                out->nz != vol->nz || out->nt != 1 || out->data == proj->data))
        return LDCT_EINPUT;
    return 0;
}

/* Windowed kernel in space, in double: inverse DFT of the window times the
 * DFT of the ramp kernel (both real and even), O(npad^2). */
static int windowed_kernel(int filter, int npad, double *hw)
{
    float *h = malloc(sizeof(float) * (size_t)npad);
    double *H = malloc(sizeof(double) * (size_t)(npad / 2 + 1));
    if (!h || !H) {
        free(h);
        free(H);
        return -ENOMEM;
    }
    gpu_fdk_ramp_kernel(npad, h);
    for (int k = 0; k <= npad / 2; k++) {
        double s = 0;
        for (int n = 0; n < npad; n++)
            s += h[n] * cos(2.0 * k_pi * (double)k * n / npad);
        H[k] = s * gpu_fdk_window(filter, k, npad);
    }
    for (int n = 0; n < npad; n++) {
        double s = H[0] + H[npad / 2] * cos(k_pi * n);
        for (int k = 1; k < npad / 2; k++)
            s += 2.0 * H[k] * cos(2.0 * k_pi * (double)k * n / npad);
        hw[n] = s / npad;
    }
    free(h);
    free(H);
    return 0;
}

static void convolve_rows(const gpu_fdk_geometry *g, const gpu_volume *proj, gpu_volume *filtered,
                          const float *colw, const float *cosw, const double *hw, int npad)
{
    const int nu = g->nu, nv = g->nv;
#pragma omp parallel for schedule(static)
    for (long r = 0; r < (long)g->nproj * nv; r++) {
        int i = (int)(r / nv), b = (int)(r % nv);
        const float *in = proj->data + (size_t)r * nu;
        float *o = filtered->data + (size_t)r * nu;
        for (int k = 0; k < nu; k++) {
            double s = 0;
            for (int a = 0; a < nu; a++) {
                int lag = k - a < 0 ? k - a + npad : k - a;
                s += (double)in[a] * cosw[(size_t)b * nu + a] * colw[(size_t)i * nu + a] * hw[lag];
            }
            o[k] = (float)s;
        }
    }
}

int gpu_fdk_filter_direct(const gpu_fdk_params *p, const gpu_fdk_geometry *g,
                          const gpu_volume *proj, gpu_volume *filtered)
{
    int rc = gpu_fdk_check(p, g, proj, NULL, NULL, 1);
    if (rc || !filtered || !gpu_volume_same_shape(proj, filtered))
        return rc ? rc : LDCT_EINPUT;
    const int npad = gpu_fdk_pad_length(g->nu);
    float *colw = malloc(sizeof(float) * (size_t)g->nproj * g->nu);
    float *cosw = malloc(sizeof(float) * (size_t)g->nv * g->nu);
    double *hw = malloc(sizeof(double) * (size_t)npad);
    rc = colw && cosw && hw ? 0 : -ENOMEM;
    if (!rc)
        rc = gpu_fdk_weights(g, colw, cosw);
    if (!rc)
        rc = windowed_kernel(p->filter, npad, hw);
    if (!rc)
        convolve_rows(g, proj, filtered, colw, cosw, hw, npad);
    free(colw);
    free(cosw);
    free(hw);
    return rc;
}

int gpu_fdk(const gpu_fdk_params *p, const gpu_fdk_geometry *g, const gpu_volume *proj,
            const gpu_fdk_volume *vol, gpu_volume *out, const gpu_device *dev)
{
    gpu_device d;
    if (dev && dev->kind == GPU_DEVICE_CUDA && !LDCT_WITH_CUDA)
        return LDCT_ENOGPU; /* a GPU was asked for: never run elsewhere silently */
    if (dev)
        d = *dev;
    else if (gpu_device_parse("auto", &d) != 0)
        d.kind = GPU_DEVICE_CPU;
    if (d.kind == GPU_DEVICE_CUDA && LDCT_WITH_CUDA)
        return gpu_fdk_cuda(p, g, proj, vol, out, &d);
    return gpu_fdk_ref(p, g, proj, vol, out, &d);
}

#if !LDCT_WITH_CUDA
int gpu_fdk_cuda(const gpu_fdk_params *p, const gpu_fdk_geometry *g, const gpu_volume *proj,
                 const gpu_fdk_volume *vol, gpu_volume *out, const gpu_device *dev)
{
    (void)p, (void)g, (void)proj, (void)vol, (void)out, (void)dev;
    log_err("fdk: this build has no CUDA");
    return LDCT_EUNSUPPORTED;
}

int gpu_fdk_backproject_cuda(const gpu_fdk_params *p, const gpu_fdk_geometry *g,
                             const gpu_volume *proj, const gpu_fdk_volume *vol, gpu_volume *out,
                             const gpu_device *dev)
{
    (void)p, (void)g, (void)proj, (void)vol, (void)out, (void)dev;
    log_err("fdk: this build has no CUDA");
    return LDCT_EUNSUPPORTED;
}

int gpu_fdk_filter_cuda(const gpu_fdk_params *p, const gpu_fdk_geometry *g, const gpu_volume *proj,
                        gpu_volume *filtered, const gpu_device *dev)
{
    (void)p, (void)g, (void)proj, (void)filtered, (void)dev;
    log_err("fdk: this build has no CUDA");
    return LDCT_EUNSUPPORTED;
}
#endif
