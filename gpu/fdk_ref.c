/* CPU reference of FDK (C11 + OpenMP): weighting and ramp filtering with
 * FFTW3 in single precision, and the backprojector that defines the result
 * the CUDA version must match (see fdk.h for the formulas).
 *
 * FFTW is loaded at run time through gpu/fftw_dl.h (see there why). Where
 * the library is missing, the CPU filter returns LDCT_EUNSUPPORTED; the
 * backprojector needs nothing. Plans are made and destroyed under the shared
 * planner lock, and executed with the new-array functions on per-thread
 * buffers. Any thread.
 */
#include "gpu/fdk.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/log.h"
#include "gpu/fftw_dl.h"

/* ---- FFTW (gpu/fftw_dl.h) ------------------------------------------------ */

static const gpu_fftw_api *s_fftw_api;
#define s_fftw (*s_fftw_api)

/* ---- filtering ----------------------------------------------------------- */

typedef struct plans {
    fftwf_plan fwd, inv;
    int npad;
} plans;

static int plans_make(plans *pl, int npad)
{
    float *r = s_fftw.alloc(sizeof(float) * (size_t)npad);
    fftwf_complex *c = s_fftw.alloc(sizeof(fftwf_complex) * (size_t)(npad / 2 + 1));
    int rc = r && c ? 0 : -ENOMEM;
    pl->npad = npad;
    pl->fwd = pl->inv = NULL;
    if (!rc) {
        gpu__fftw_plan_lock();
        pl->fwd = s_fftw.plan_r2c_1d(npad, r, c, FFTW_ESTIMATE);
        pl->inv = s_fftw.plan_c2r_1d(npad, c, r, FFTW_ESTIMATE);
        gpu__fftw_plan_unlock();
        rc = pl->fwd && pl->inv ? 0 : LDCT_EUNSUPPORTED;
    }
    s_fftw.release(r);
    s_fftw.release(c);
    return rc;
}

static void plans_free(plans *pl)
{
    gpu__fftw_plan_lock();
    if (pl->fwd)
        s_fftw.destroy(pl->fwd);
    if (pl->inv)
        s_fftw.destroy(pl->inv);
    gpu__fftw_plan_unlock();
}

/* Frequency response: FFT of the ramp kernel (real, since the kernel is
 * even) times the window, with FFTW's 1/npad folded in. */
static int kernel_response(const plans *pl, int filter, float *H)
{
    const int npad = pl->npad;
    float *h = s_fftw.alloc(sizeof(float) * (size_t)npad);
    fftwf_complex *c = s_fftw.alloc(sizeof(fftwf_complex) * (size_t)(npad / 2 + 1));
    if (!h || !c) {
        s_fftw.release(h);
        s_fftw.release(c);
        return -ENOMEM;
    }
    gpu_fdk_ramp_kernel(npad, h);
    s_fftw.exec_r2c(pl->fwd, h, c);
    for (int k = 0; k <= npad / 2; k++)
        H[k] = (float)(c[k][0] * gpu_fdk_window(filter, k, npad) / npad);
    s_fftw.release(h);
    s_fftw.release(c);
    return 0;
}

typedef struct filter_job {
    const gpu_fdk_geometry *g;
    const gpu_volume *proj;
    gpu_volume *out;
    const float *colw, *cosw, *H;
    const plans *pl;
} filter_job;

static void filter_row(const filter_job *j, long r, float *buf, fftwf_complex *spec)
{
    const int nu = j->g->nu, nv = j->g->nv, npad = j->pl->npad;
    const int i = (int)(r / nv), b = (int)(r % nv);
    const float *in = j->proj->data + (size_t)r * nu;
    const float *cw = j->cosw + (size_t)b * nu, *pw = j->colw + (size_t)i * nu;
    for (int a = 0; a < nu; a++)
        buf[a] = in[a] * cw[a] * pw[a];
    memset(buf + nu, 0, sizeof(float) * (size_t)(npad - nu));
    s_fftw.exec_r2c(j->pl->fwd, buf, spec);
    for (int k = 0; k <= npad / 2; k++) {
        spec[k][0] *= j->H[k];
        spec[k][1] *= j->H[k];
    }
    s_fftw.exec_c2r(j->pl->inv, spec, buf);
    memcpy(j->out->data + (size_t)r * nu, buf, sizeof(float) * (size_t)nu);
}

static int filter_rows(const filter_job *j, int threads)
{
    const long nrows = (long)j->g->nproj * j->g->nv;
    const int npad = j->pl->npad;
    int failed = 0;
#pragma omp parallel num_threads(threads > 0 ? threads : omp_get_max_threads())
    {
        float *buf = s_fftw.alloc(sizeof(float) * (size_t)npad);
        fftwf_complex *spec = s_fftw.alloc(sizeof(fftwf_complex) * (size_t)(npad / 2 + 1));
        if (!buf || !spec) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(static)
        for (long r = 0; r < nrows; r++)
            if (buf && spec)
                filter_row(j, r, buf, spec);
        s_fftw.release(buf);
        s_fftw.release(spec);
    }
    return failed ? -ENOMEM : 0;
}

int gpu_fdk_filter_ref(const gpu_fdk_params *p, const gpu_fdk_geometry *g, const gpu_volume *proj,
                       gpu_volume *filtered, const gpu_device *dev)
{
    int rc = gpu_fdk_check(p, g, proj, NULL, NULL, 1);
    if (rc || !filtered || !filtered->data || !gpu_volume_same_shape(proj, filtered) ||
        filtered->data == proj->data)
        return rc ? rc : LDCT_EINPUT;
    if (!(s_fftw_api = gpu__fftw()))
        return LDCT_EUNSUPPORTED;
    const int npad = gpu_fdk_pad_length(g->nu);
    float *colw = malloc(sizeof(float) * (size_t)g->nproj * g->nu);
    float *cosw = malloc(sizeof(float) * (size_t)g->nv * g->nu);
    float *H = malloc(sizeof(float) * (size_t)(npad / 2 + 1));
    plans pl = {NULL, NULL, npad};
    rc = colw && cosw && H ? 0 : -ENOMEM;
    if (!rc)
        rc = gpu_fdk_weights(g, colw, cosw);
    if (!rc)
        rc = plans_make(&pl, npad);
    if (!rc)
        rc = kernel_response(&pl, p->filter, H);
    if (!rc) {
        filter_job j = {g, proj, filtered, colw, cosw, H, &pl};
        rc = filter_rows(&j, dev ? dev->threads : 0);
    }
    plans_free(&pl);
    free(colw);
    free(cosw);
    free(H);
    return rc;
}

/* ---- backprojection ------------------------------------------------------ */

/* Bilinear sample with pixels outside the detector read as 0. */
static inline double bilinear(const float *q, int nu, int nv, double u, double v)
{
    if (!(u > -1.0 && u < nu && v > -1.0 && v < nv))
        return 0.0;
    int a = (int)floor(u), b = (int)floor(v);
    double fu = u - a, fv = v - b;
    double p00 = 0, p10 = 0, p01 = 0, p11 = 0;
    if (b >= 0) {
        const float *row = q + (size_t)b * nu;
        p00 = a >= 0 ? row[a] : 0.0;
        p10 = a + 1 < nu ? row[a + 1] : 0.0;
    }
    if (b + 1 < nv) {
        const float *row = q + (size_t)(b + 1) * nu;
        p01 = a >= 0 ? row[a] : 0.0;
        p11 = a + 1 < nu ? row[a + 1] : 0.0;
    }
    return (1 - fv) * ((1 - fu) * p00 + fu * p10) + fv * ((1 - fu) * p01 + fu * p11);
}

/* Adds projection i to one x row of voxels (y, z fixed). */
static void backproject_row(const gpu_fdk_geometry *g, const float *q, const double *m,
                            const gpu_fdk_volume *vol, int y, int z, double *acc)
{
    const double X[3] = {vol->origin[0], vol->origin[1] + y * vol->voxel[1],
                         vol->origin[2] + z * vol->voxel[2]};
    double r[3], s[3];
    for (int k = 0; k < 3; k++) {
        r[k] = m[4 * k] * X[0] + m[4 * k + 1] * X[1] + m[4 * k + 2] * X[2] + m[4 * k + 3];
        s[k] = m[4 * k] * vol->voxel[0];
    }
    for (int x = 0; x < vol->nx; x++) {
        double w = r[2] + x * s[2];
        if (!(w > 0))
            continue;
        double rw = 1.0 / w;
        double val = bilinear(q, g->nu, g->nv, (r[0] + x * s[0]) * rw, (r[1] + x * s[1]) * rw);
        acc[x] += val * rw * rw;
    }
}

int gpu_fdk_backproject_ref(const gpu_fdk_params *p, const gpu_fdk_geometry *g,
                            const gpu_volume *proj, const gpu_fdk_volume *vol, gpu_volume *out,
                            const gpu_device *dev)
{
    int rc = gpu_fdk_check(p, g, proj, vol, out, 0);
    if (rc)
        return rc;
    const int nx = vol->nx,
              threads = dev && dev->threads > 0 ? dev->threads : omp_get_max_threads();
    int failed = 0;
#pragma omp parallel num_threads(threads)
    {
        double *acc = malloc(sizeof(double) * (size_t)nx);
        if (!acc) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(dynamic, 4)
        for (long row = 0; row < (long)vol->ny * vol->nz; row++) {
            if (!acc)
                continue;
            int y = (int)(row % vol->ny), z = (int)(row / vol->ny);
            memset(acc, 0, sizeof(double) * (size_t)nx);
            for (int i = 0; i < g->nproj; i++)
                backproject_row(g, proj->data + (size_t)i * g->nu * g->nv,
                                g->matrices + 12 * (size_t)i, vol, y, z, acc);
            float *o = out->data + (size_t)row * nx;
            for (int x = 0; x < nx; x++)
                o[x] = (float)acc[x];
        }
        free(acc);
    }
    return failed ? -ENOMEM : 0;
}

int gpu_fdk_ref(const gpu_fdk_params *p, const gpu_fdk_geometry *g, const gpu_volume *proj,
                const gpu_fdk_volume *vol, gpu_volume *out, const gpu_device *dev)
{
    int rc = gpu_fdk_check(p, g, proj, vol, out, 1);
    if (rc)
        return rc;
    gpu_volume filtered;
    rc = gpu_volume_init(&filtered, proj->nx, proj->ny, proj->nz, 1);
    if (rc)
        return rc;
    rc = gpu_fdk_filter_ref(p, g, proj, &filtered, dev);
    if (!rc)
        rc = gpu_fdk_backproject_ref(p, g, &filtered, vol, out, dev);
    gpu_volume_close(&filtered);
    return rc;
}
