/* Analytic ellipsoid phantom for testing FDK: closed-form line integrals
 * (chord length times density) of rays through 3D ellipsoids for any
 * projection matrices, and the same phantom sampled on a voxel grid. The
 * two define each other's ground truth: a reconstruction of the projections
 * must approach the voxelised phantom. Any thread; C11 + OpenMP.
 */
#include "gpu/fdk.h"

#include <math.h>
#include <string.h>

#include "common/err.h"

void gpu_fdk_phantom_shepp_logan(gpu_fdk_ellipsoid *e, double scale)
{
    /* x0, y0, z0, a, b, c, phi (degrees), density: Kak and Slaney's 3D
     * ellipsoids with the modified (Toft) contrasts. */
    static const double t[GPU_FDK_SHEPP_LOGAN_N][8] = {
        {0, 0, 0, 0.69, 0.92, 0.90, 0, 1.0},
        {0, 0, 0, 0.6624, 0.874, 0.88, 0, -0.8},
        {-0.22, 0, -0.25, 0.41, 0.16, 0.21, 108, -0.2},
        {0.22, 0, -0.25, 0.31, 0.11, 0.22, 72, -0.2},
        {0, 0.35, -0.25, 0.21, 0.25, 0.5, 0, 0.1},
        {0, 0.1, -0.25, 0.046, 0.046, 0.046, 0, 0.1},
        {-0.08, -0.65, -0.25, 0.046, 0.023, 0.02, 0, 0.1},
        {0.06, -0.65, -0.25, 0.046, 0.023, 0.02, 90, 0.1},
        {0.06, -0.105, 0.625, 0.056, 0.04, 0.1, 90, 0.1},
        {0, 0.1, 0.625, 0.056, 0.056, 0.1, 0, -0.1},
    };
    for (int i = 0; i < GPU_FDK_SHEPP_LOGAN_N; i++) {
        for (int k = 0; k < 3; k++) {
            e[i].centre[k] = t[i][k] * scale;
            e[i].axes[k] = t[i][3 + k] * scale;
        }
        e[i].phi = t[i][6] * 3.14159265358979323846 / 180.0;
        e[i].density = t[i][7];
    }
}

/* Point (or direction, with translate = 0) in the ellipsoid's unit-sphere frame. */
static void to_unit(const gpu_fdk_ellipsoid *e, const double *x, int translate, double *o)
{
    double c = cos(e->phi), s = sin(e->phi);
    double d[3];
    for (int k = 0; k < 3; k++)
        d[k] = x[k] - (translate ? e->centre[k] : 0.0);
    o[0] = (c * d[0] + s * d[1]) / e->axes[0];
    o[1] = (-s * d[0] + c * d[1]) / e->axes[1];
    o[2] = d[2] / e->axes[2];
}

double gpu_fdk_phantom_density(const gpu_fdk_ellipsoid *e, int n, const double x[3])
{
    double f = 0;
    for (int i = 0; i < n; i++) {
        double o[3];
        to_unit(&e[i], x, 1, o);
        if (o[0] * o[0] + o[1] * o[1] + o[2] * o[2] <= 1.0)
            f += e[i].density;
    }
    return f;
}

double gpu_fdk_phantom_ray(const gpu_fdk_ellipsoid *e, int n, const double src[3],
                           const double dir[3])
{
    double len = sqrt(dir[0] * dir[0] + dir[1] * dir[1] + dir[2] * dir[2]), sum = 0;
    for (int i = 0; i < n; i++) {
        double o[3], d[3];
        to_unit(&e[i], src, 1, o);
        to_unit(&e[i], dir, 0, d);
        double A = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
        double B = o[0] * d[0] + o[1] * d[1] + o[2] * d[2];
        double C = o[0] * o[0] + o[1] * o[1] + o[2] * o[2] - 1.0;
        double disc = B * B - A * C; /* quarter of the usual discriminant */
        if (disc > 0)
            sum += e[i].density * 2.0 * sqrt(disc) / A * len;
    }
    return sum;
}

/* Inverse of the left 3x3 block of a row-major 3x4 matrix; 0 or -1 if singular. */
static int invert3(const double *m, double *inv)
{
    double a = m[0], b = m[1], c = m[2], d = m[4], e = m[5], f = m[6], g = m[8], h = m[9],
           k = m[10];
    double det = a * (e * k - f * h) - b * (d * k - f * g) + c * (d * h - e * g);
    if (fabs(det) < 1e-300)
        return -1;
    double r[9] = {e * k - f * h, c * h - b * k, b * f - c * e, f * g - d * k, a * k - c * g,
                   c * d - a * f, d * h - e * g, b * g - a * h, a * e - b * d};
    for (int i = 0; i < 9; i++)
        inv[i] = r[i] / det;
    return 0;
}

static void mat3_vec(const double *m, const double *v, double *o)
{
    for (int r = 0; r < 3; r++)
        o[r] = m[3 * r] * v[0] + m[3 * r + 1] * v[1] + m[3 * r + 2] * v[2];
}

int gpu_fdk_phantom_project(const gpu_fdk_ellipsoid *e, int n, const gpu_fdk_geometry *g,
                            gpu_volume *proj)
{
    if (!g->matrices || proj->nx != g->nu || proj->ny != g->nv || proj->nz != g->nproj)
        return LDCT_EINPUT;
    for (int i = 0; i < g->nproj; i++) {
        double inv[9];
        if (invert3(g->matrices + 12 * (size_t)i, inv))
            return LDCT_EINPUT;
    }
#pragma omp parallel for schedule(dynamic, 1)
    for (long r = 0; r < (long)g->nproj * g->nv; r++) {
        int i = (int)(r / g->nv), b = (int)(r % g->nv);
        const double *m = g->matrices + 12 * (size_t)i;
        double inv[9], src[3], p4[3] = {-m[3], -m[7], -m[11]};
        invert3(m, inv);
        mat3_vec(inv, p4, src);
        for (int a = 0; a < g->nu; a++) {
            double uv1[3] = {a, b, 1.0}, dir[3];
            mat3_vec(inv, uv1, dir);
            proj->data[(size_t)r * g->nu + a] = (float)gpu_fdk_phantom_ray(e, n, src, dir);
        }
    }
    return 0;
}

int gpu_fdk_phantom_voxelize(const gpu_fdk_ellipsoid *e, int n, const gpu_fdk_volume *vol, int ss,
                             gpu_volume *out)
{
    if (ss < 1 || out->nx != vol->nx || out->ny != vol->ny || out->nz != vol->nz)
        return LDCT_EINPUT;
#pragma omp parallel for schedule(dynamic, 1)
    for (long row = 0; row < (long)vol->ny * vol->nz; row++) {
        int y = (int)(row % vol->ny), z = (int)(row / vol->ny);
        for (int x = 0; x < vol->nx; x++) {
            const int idx[3] = {x, y, z};
            double f = 0;
            for (int s = 0; s < ss * ss * ss; s++) {
                const int sub[3] = {s % ss, (s / ss) % ss, s / (ss * ss)};
                double p[3];
                for (int k = 0; k < 3; k++)
                    p[k] = vol->origin[k] + (idx[k] + (sub[k] + 0.5) / ss - 0.5) * vol->voxel[k];
                f += gpu_fdk_phantom_density(e, n, p);
            }
            out->data[(size_t)row * vol->nx + x] = (float)(f / (ss * ss * ss));
        }
    }
    return 0;
}
