/* Low-dose CT simulator: the body and Shepp-Logan phantoms in HU, scanner
 * geometry, Poisson and electronic noise, reconstruction and truth (see
 * gpu/phantom.h). Pure C11 + OpenMP; any thread.
 *
 * Invariant: in the body phantom every structure lies strictly inside its
 * parent, so the additive densities (own mu minus the parent's) sum to the
 * intended HU everywhere; the layout's lesion backgrounds, ROIs and the
 * edge's outer plateau are checked by the unit test against the truth.
 */
#include "gpu/phantom.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "gpu/rng.h"

enum { ROD = 1000 };       /* z semi-axis of the body's structures (mm) */
#define DET_OVERSAMPLE 2.0 /* detector pixels per voxel at the isocentre (columns) */
/* Rays averaged per detector element (columns x rows): the element's
 * aperture, which band-limits the projections as a real detector does and
 * keeps sharp edges from aliasing into streaks. */
enum { APERTURE_U = 3, APERTURE_V = 1 };

static const double HU_FAT = -100, HU_SOFT = 40, HU_LIVER = 60, HU_BONE = 700, HU_AIR = -1000;

double gpu_phantom_mu(double hu)
{
    return GPU_PHANTOM_MU_WATER * (1.0 + hu / 1000.0);
}

double gpu_phantom_hu(double mu)
{
    return (mu / GPU_PHANTOM_MU_WATER - 1.0) * 1000.0;
}

int gpu_phantom_kind_parse(const char *name)
{
    if (!strcmp(name, "body"))
        return GPU_PHANTOM_BODY;
    if (!strcmp(name, "shepp-logan"))
        return GPU_PHANTOM_SHEPP_LOGAN;
    return LDCT_EINPUT;
}

/* Adds an axial rod of elliptic cross-section whose value is hu inside a
 * parent of parent_hu. */
static void add_rod(gpu_phantom *ph, double x, double y, double a, double b, double hu,
                    double parent_hu)
{
    gpu_fdk_ellipsoid *e = &ph->e[ph->n++];
    *e = (gpu_fdk_ellipsoid){.centre = {x, y, 0},
                             .axes = {a, b, ROD},
                             .phi = 0,
                             .density = gpu_phantom_mu(hu) - gpu_phantom_mu(parent_hu)};
}

static void add_roi(gpu_phantom_layout *l, const char *name, double x, double y, double r,
                    double hu)
{
    gpu_phantom_roi *o = &l->roi[l->nroi++];
    snprintf(o->name, sizeof o->name, "%s", name);
    o->x = x;
    o->y = y;
    o->radius = r;
    o->hu = hu;
}

/* Liver lesions: columns of contrast +20, +10, +5 HU, rows of diameter 10,
 * 6 and 3 mm, 18 mm apart; background annuli r + 2 .. r + 8 mm stay in the
 * liver and clear of the neighbours (see the layout check in the test). */
static void add_lesions(gpu_phantom *ph)
{
    static const double contrast[3] = {20, 10, 5}, radius[3] = {5, 3, 1.5};
    static const double col_x[3] = {-56, -38, -20}, row_y[3] = {-28, -10, 8};
    for (int r = 0; r < 3; r++) {
        for (int c = 0; c < 3; c++) {
            double hu = HU_LIVER + contrast[c];
            add_rod(ph, col_x[c], row_y[r], radius[r], radius[r], hu, HU_LIVER);
            gpu_phantom_lesion *l = &ph->layout.lesion[ph->layout.nlesion++];
            *l = (gpu_phantom_lesion){.x = col_x[c],
                                      .y = row_y[r],
                                      .radius = radius[r],
                                      .hu = hu,
                                      .background_hu = HU_LIVER,
                                      .bg_inner = radius[r] + 2,
                                      .bg_outer = radius[r] + 6};
        }
    }
}

static void build_body(gpu_phantom *ph)
{
    gpu_phantom_layout *l = &ph->layout;
    snprintf(l->name, sizeof l->name, "body");
    add_rod(ph, 0, 0, 100, 75, HU_FAT, HU_AIR);
    add_rod(ph, 0, 0, 92, 67, HU_SOFT, HU_FAT);
    add_rod(ph, -38, -10, 50, 36, HU_LIVER, HU_SOFT);
    add_rod(ph, 12, 40, 14, 14, HU_BONE, HU_SOFT);
    add_rod(ph, 50, -20, 10, 7, HU_AIR, HU_SOFT);
    add_lesions(ph);
    l->body_x = 0;
    l->body_y = 0;
    l->body_a = 100;
    l->body_b = 75;
    add_roi(l, "liver", 2, -10, 6, HU_LIVER);
    add_roi(l, "soft1", 50, 18, 8, HU_SOFT);
    add_roi(l, "soft2", 20, -45, 8, HU_SOFT);
    /* Two more soft-tissue ROIs for the spread of noise between regions:
     * soft3 right of centre on the long axis (the most attenuated rays:
     * high noise), soft4 posterior near the rim (short rays: low noise);
     * soft2 is the anterior low-noise one, liver and soft1 high. */
    add_roi(l, "soft3", 30, 5, 8, HU_SOFT);
    add_roi(l, "soft4", -20, 50, 6, HU_SOFT);
    l->has_edge = 1;
    l->edge = (gpu_phantom_edge){.x = 12,
                                 .y = 40,
                                 .radius = 14,
                                 .inside_hu = HU_BONE,
                                 .outside_hu = HU_SOFT,
                                 .uniform_to = 24};
}

/* Shepp-Logan: densities become HU = 1000 (d / 0.2 - 1), i.e. mu = d *
 * mu_water / 0.2 (so d = 0 outside is air). */
static void build_shepp_logan(gpu_phantom *ph, double fov)
{
    double scale = 0.45 * fov;
    gpu_fdk_phantom_shepp_logan(ph->e, scale);
    ph->n = GPU_FDK_SHEPP_LOGAN_N;
    for (int i = 0; i < ph->n; i++)
        ph->e[i].density *= GPU_PHANTOM_MU_WATER / 0.2;
    gpu_phantom_layout *l = &ph->layout;
    snprintf(l->name, sizeof l->name, "shepp-logan");
    l->body_a = 0.69 * scale;
    l->body_b = 0.92 * scale;
    /* Brain (0.2 = 0 HU) away from the features, left and right of centre
     * at y = -0.35 and +0.6 of the scale. */
    add_roi(l, "brain1", 0.0, -0.45 * scale, 0.06 * scale, 0);
    add_roi(l, "brain2", 0.35 * scale, 0.55 * scale, 0.06 * scale, 0);
}

int gpu_phantom_build(int kind, double fov, gpu_phantom *ph)
{
    memset(ph, 0, sizeof *ph);
    ph->kind = kind;
    if (kind == GPU_PHANTOM_BODY && fov >= 220) {
        build_body(ph);
        return 0;
    }
    if (kind == GPU_PHANTOM_SHEPP_LOGAN && fov > 0) {
        build_shepp_logan(ph, fov);
        return 0;
    }
    return LDCT_EINPUT;
}

void gpu_phantom_scan_default(gpu_phantom_scan *s)
{
    *s = (gpu_phantom_scan){.size = 256,
                            .slices = 16,
                            .fov = 220,
                            .thickness = 1.5,
                            .views = 0,
                            .dso = 595,
                            .dsd = 1085.6,
                            .i0 = 4e5,
                            .dose = 0.25,
                            .electronic_sd = 0,
                            .seed = 1,
                            .filter = GPU_FDK_SHEPP_LOGAN,
                            .patient_scale = 1};
}

static int scan_valid(const gpu_phantom_scan *s)
{
    return s->size >= 8 && s->size <= 4096 && s->slices >= 1 && s->slices <= 4096 && s->fov > 0 &&
           s->thickness > 0 && s->views >= 0 && s->dso > s->fov && s->dsd > s->dso && s->i0 > 0 &&
           s->dose > 0 && s->dose <= 1 && s->electronic_sd >= 0 && s->filter >= 0 &&
           s->filter < GPU_FDK_NFILTERS && (s->patient_scale == 0 || s->patient_scale >= 1);
}

int gpu_phantom_geometry(const gpu_phantom_scan *s, gpu_fdk_geometry *g, gpu_fdk_volume *v)
{
    if (!scan_valid(s))
        return LDCT_EINPUT;
    double pix = s->fov / s->size, mag = s->dsd / s->dso;
    int views = s->views ? s->views : 4 * s->size;
    int nu = (int)ceil(s->fov * 1.1 / (pix / DET_OVERSAMPLE)) | 1;
    /* The nearest voxel to the source (fov / 2 from the isocentre) is
     * magnified most: rows must cover the slab's height there. */
    double zhalf = 0.5 * s->slices * s->thickness;
    double zcover = zhalf * s->dso / (s->dso - 0.75 * s->fov);
    int nv = 2 * (int)ceil(zcover / s->thickness) + 3;
    gpu_fdk_volume_centered(v, s->size, s->size, s->slices, pix, pix, s->thickness);
    return gpu_fdk_geometry_circular(g, views, nu, nv, pix * mag / DET_OVERSAMPLE,
                                     s->thickness * mag, s->dso, s->dsd, 0.0,
                                     2 * 3.14159265358979323846, 0, 0);
}

/* Moves every detector position of g by (du, dv) pixels: u' = u + du means
 * P0' = P0 + du P2 (u = P0.X / P2.X), likewise for v. */
static void shift_detector(gpu_fdk_geometry *g, double du, double dv)
{
    for (int i = 0; i < g->nproj; i++) {
        double *m = g->matrices + 12 * (size_t)i;
        for (int k = 0; k < 4; k++) {
            m[k] += du * m[8 + k];
            m[4 + k] += dv * m[8 + k];
        }
    }
}

double gpu_phantom_i0_element(const gpu_phantom_scan *s, const gpu_fdk_geometry *g)
{
    double iso = g->dso / g->dsd;
    return s->i0 * (g->du * iso) * (g->dv * iso) * 1000.0 / g->nproj;
}

int gpu_phantom_project(const gpu_phantom *ph, const gpu_fdk_geometry *g, gpu_volume *proj)
{
    gpu_fdk_geometry sub = *g;
    gpu_volume tmp = {0};
    size_t nm = 12 * (size_t)g->nproj, n = gpu_volume_count(proj);
    sub.matrices = malloc(nm * sizeof *sub.matrices);
    int rc = sub.matrices ? gpu_volume_init(&tmp, proj->nx, proj->ny, proj->nz, 1) : -ENOMEM;
    memset(proj->data, 0, rc ? 0 : n * sizeof *proj->data);
    for (int s = 0; !rc && s < APERTURE_U * APERTURE_V; s++) {
        memcpy(sub.matrices, g->matrices, nm * sizeof *sub.matrices);
        /* A ray through the sub-pixel centre at (du, dv) from the pixel centre
         * is the pixel-centre ray of a detector moved by (-du, -dv). */
        shift_detector(&sub, 0.5 - (s % APERTURE_U + 0.5) / APERTURE_U,
                       0.5 - (s / APERTURE_U + 0.5) / APERTURE_V);
        rc = gpu_fdk_phantom_project(ph->e, ph->n, &sub, &tmp);
        for (size_t i = 0; !rc && i < n; i++)
            proj->data[i] += tmp.data[i] / (APERTURE_U * APERTURE_V);
    }
    free(sub.matrices);
    gpu_volume_close(&tmp);
    return rc;
}

int gpu_phantom_noise(const gpu_volume *clean, double i0_eff, double electronic_sd, uint64_t seed,
                      uint64_t stream, gpu_volume *noisy)
{
    return gpu_phantom_noise_scaled(clean, i0_eff, 1.0, electronic_sd, seed, stream, noisy);
}

int gpu_phantom_noise_scaled(const gpu_volume *clean, double i0_eff, double scale,
                             double electronic_sd, uint64_t seed, uint64_t stream,
                             gpu_volume *noisy)
{
    if (!(i0_eff > 0) || !(scale >= 1) || electronic_sd < 0 || !gpu_volume_same_shape(clean, noisy))
        return LDCT_EINPUT;
    long rows = (long)clean->ny * clean->nz * clean->nt;
#pragma omp parallel for schedule(static)
    for (long r = 0; r < rows; r++) {
        gpu_rng rng;
        gpu_rng_init(&rng, seed, stream, (uint64_t)(r / clean->ny), (uint64_t)(r % clean->ny));
        const float *in = clean->data + (size_t)r * clean->nx;
        float *out = noisy->data + (size_t)r * clean->nx;
        for (int a = 0; a < clean->nx; a++) {
            double p = in[a];
            double n = gpu_rng_poisson(&rng, i0_eff * exp(-scale * p));
            if (electronic_sd > 0)
                n += electronic_sd * gpu_rng_normal(&rng);
            out[a] = (float)(-log((n > 1 ? n : 1) / i0_eff) - (scale - 1) * p);
        }
    }
    return 0;
}

int gpu_phantom_reconstruct(const gpu_phantom_scan *s, const gpu_fdk_geometry *g,
                            const gpu_volume *proj, const gpu_fdk_volume *v, gpu_volume *out,
                            const gpu_device *dev)
{
    gpu_fdk_params p;
    gpu_fdk_params_default(&p);
    p.filter = s->filter;
    int rc = gpu_fdk(&p, g, proj, v, out, dev);
    if (rc)
        return rc;
    size_t n = gpu_volume_count(out);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++)
        out->data[i] = (float)gpu_phantom_hu(out->data[i]);
    for (int k = 0; k < 3; k++)
        out->spacing[k] = v->voxel[k];
    return 0;
}

int gpu_phantom_truth(const gpu_phantom *ph, const gpu_fdk_volume *v, gpu_volume *out)
{
    int rc = gpu_fdk_phantom_voxelize(ph->e, ph->n, v, 3, out);
    if (rc)
        return rc;
    size_t n = gpu_volume_count(out);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++)
        out->data[i] = (float)gpu_phantom_hu(out->data[i]);
    for (int k = 0; k < 3; k++)
        out->spacing[k] = v->voxel[k];
    return 0;
}
