/* Cylindrical detectors for FDK: rebinning of projections taken on a
 * cylindrical detector (columns equally spaced in fan angle on a cylinder
 * about the source, the shape of most clinical CT scanners and of the Mayo
 * DICOM-CT-PD data) onto a virtual flat detector through the isocentre's
 * conjugate plane at the same source distance, so that the flat-detector
 * engine reconstructs them; and closed-form ellipsoid projections along the
 * cylinder's rays for testing.
 *
 * Interpolation: every virtual flat pixel (u, v) (mm on the plane at dsd
 * from the source) lies on exactly one ray of the source; that ray meets the
 * cylinder at fan angle gamma = atan(u / dsd) and height z = v dsd /
 * sqrt(dsd^2 + u^2) (the flat plane is farther than the cylinder by
 * 1 / cos gamma). The line integral along that ray is read from the four
 * neighbouring cylindrical elements by bilinear interpolation in (gamma, z);
 * coordinates beyond the outermost element centres take the edge value
 * (rows: the truncated cone edge extends smoothly rather than dropping to
 * 0). No weight is applied: both detectors measure the same line integral.
 * The flat pixel pitch equals the cylinder's at the central ray (dsd *
 * dgamma), so the centre keeps its sampling and the edges are sampled a
 * little finer than the cylinder there.
 *
 * Invariants: the flat detector covers the fan of the outermost column
 * centres; the central ray hits a whole flat pixel (f->cu integral) and the
 * flat rows are the cylinder's. C11 + OpenMP; any thread.
 */
#include "gpu/fdk.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "common/err.h"

void gpu_fdk_cylinder_flat(const gpu_fdk_cylinder *c, gpu_fdk_flat *f)
{
    double du = c->dsd * c->dgamma;
    double umin = c->dsd * tan(-c->cu * c->dgamma);
    double umax = c->dsd * tan((c->nu - 1 - c->cu) * c->dgamma);
    int left = (int)floor(-umin / du + 1e-9), right = (int)floor(umax / du + 1e-9);
    f->nu = left + right + 1;
    f->du = du;
    f->cu = left;
    f->nv = c->nv;
    f->dv = c->dv;
    f->cv = c->cv;
}

/* NaN goes to lo: (int)NaN indexed outside the projection (a crash). */
static double clampd(double x, double lo, double hi)
{
    return !(x >= lo) ? lo : x > hi ? hi : x;
}

/* Bilinear read of one cylindrical projection at continuous (col, row). */
static float bilinear(const float *p, int nu, int nv, double col, double row)
{
    col = clampd(col, 0, nu - 1);
    row = clampd(row, 0, nv - 1);
    int a = (int)col, b = (int)row;
    int a1 = a + 1 < nu ? a + 1 : a, b1 = b + 1 < nv ? b + 1 : b;
    double fa = col - a, fb = row - b;
    double top = p[(size_t)b * nu + a] * (1 - fa) + p[(size_t)b * nu + a1] * fa;
    double bot = p[(size_t)b1 * nu + a] * (1 - fa) + p[(size_t)b1 * nu + a1] * fa;
    return (float)(top * (1 - fb) + bot * fb);
}

/* Where each flat pixel reads the cylinder, the same for every view: column
 * col[a] (fan angle) and row row[b * nu + a] (height). */
static void sample_points(const gpu_fdk_cylinder *c, const gpu_fdk_flat *f, double *col,
                          double *row)
{
    for (int a = 0; a < f->nu; a++) {
        double u = (a - f->cu) * f->du;
        col[a] = atan(u / c->dsd) / c->dgamma + c->cu;
        for (int b = 0; b < f->nv; b++) {
            double v = (b - f->cv) * f->dv;
            row[(size_t)b * f->nu + a] = v * c->dsd / sqrt(c->dsd * c->dsd + u * u) / c->dv + c->cv;
        }
    }
}

int gpu_fdk_rebin_cylinder(const gpu_fdk_cylinder *c, const gpu_fdk_flat *f, const gpu_volume *in,
                           gpu_volume *out)
{
    if (c->nu < 1 || c->nv < 1 || !(c->dgamma > 0) || !(c->dv > 0) || !(c->dsd > 0) ||
        in->nx != c->nu || in->ny != c->nv || out->nx != f->nu || out->ny != f->nv ||
        out->nz != in->nz || !(f->du > 0) || !(f->dv > 0))
        return LDCT_EINPUT;
    double *col = malloc(sizeof *col * (size_t)f->nu),
           *row = malloc(sizeof *row * (size_t)f->nu * (size_t)f->nv);
    if (!col || !row) {
        free(col);
        free(row);
        return -ENOMEM;
    }
    sample_points(c, f, col, row);
    const long rows = (long)in->nz * f->nv;
#pragma omp parallel for schedule(static)
    for (long r = 0; r < rows; r++) {
        int i = (int)(r / f->nv), b = (int)(r % f->nv);
        const float *p = in->data + (size_t)i * c->nu * c->nv;
        float *o = out->data + (size_t)r * f->nu;
        const double *rb = row + (size_t)b * f->nu;
        for (int a = 0; a < f->nu; a++)
            o[a] = bilinear(p, c->nu, c->nv, col[a], rb[a]);
    }
    free(col);
    free(row);
    return 0;
}

int gpu_fdk_phantom_project_cylinder(const gpu_fdk_ellipsoid *e, int n, const gpu_fdk_cylinder *c,
                                     double dso, const double *angles, gpu_volume *proj)
{
    if (proj->nx != c->nu || proj->ny != c->nv || !(dso > 0) || !(c->dsd > dso))
        return LDCT_EINPUT;
#pragma omp parallel for schedule(dynamic, 1)
    for (long r = 0; r < (long)proj->nz * c->nv; r++) {
        int i = (int)(r / c->nv), b = (int)(r % c->nv);
        double cb = cos(angles[i]), sb = sin(angles[i]);
        const double src[3] = {dso * cb, dso * sb, 0};
        double z = (b - c->cv) * c->dv;
        for (int a = 0; a < c->nu; a++) {
            double g = (a - c->cu) * c->dgamma, cg = cos(g), sg = sin(g);
            /* towards the detector: cos g along -source, sin g along the columns */
            const double dir[3] = {c->dsd * (-cg * cb - sg * sb), c->dsd * (-cg * sb + sg * cb), z};
            proj->data[(size_t)r * c->nu + a] = (float)gpu_fdk_phantom_ray(e, n, src, dir);
        }
    }
    return 0;
}
