/* Projection series assembly (DICOM-CT-PD -> FDK geometry + line
 * integrals); see assemble_proj.h for the frame and what is refused. */
#include "pipeline/assemble_proj.h"

#include "common/err.h"
#include "common/log.h"
#include "scp/scp.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const double k_pi = 3.14159265358979323846;

/* One view: its header and where it goes. */
typedef struct view {
    scp_ctpd_info info;
    const char *path;
    double b; /* engine source angle, unwrapped in acquisition order */
} view;

static int fail(char *err, size_t len, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
    return rc;
}

int asm_proj_is_projection(const char *path)
{
    scp_ctpd_info info;
    char err[256];
    /* Projection data with bad geometry is still projection data: fdk then
     * says what is wrong (as an image series it failed on its FoR UIDs). */
    int rc = scp_ctpd_read(path, &info, NULL, 0, err, sizeof err);
    return rc == 0 || rc == LDCT_EINPUT;
}

void asm_proj_close(asm_proj *p)
{
    if (!p)
        return;
    gpu_fdk_geometry_close(&p->geo);
    gpu_volume_close(&p->proj);
    memset(p, 0, sizeof *p);
}

/* Reading's progress: a header (read up to the values), a view's values
 * and its share of the rebinning of a cylindrical detector, as measured
 * on 2304 views of 736x64 (mkctpd --mayo, cached, 2 cores): headers about
 * 100 ms, values 480 ms, rebinning 315 ms. */
#define HEADER_UNITS 1L
#define VIEW_UNITS 5L
#define REBIN_UNITS 3L

static int read_headers(const char *const *paths, int n, view *v, gpu_progress_count *count,
                        char *err, size_t len)
{
    int first = 0;
#pragma omp parallel for schedule(dynamic, 4) if (n > 8)
    for (int i = 0; i < n; i++) {
        char e[256] = "";
        v[i].path = paths[i];
        int rc = scp_ctpd_read(paths[i], &v[i].info, NULL, 0, e, sizeof e);
        if (rc == LDCT_ENOTFOUND) {
            snprintf(e, sizeof e, "%s is not DICOM-CT-PD projection data (no (7029,1010))",
                     paths[i]);
            rc = LDCT_EINPUT;
        }
        gpu_progress_add(count, HEADER_UNITS);
        if (rc) {
#pragma omp critical(asm_proj_err)
            if (!first) {
                first = rc;
                snprintf(err, len, "%s", e);
            }
        }
    }
    return first;
}

static int differs(double a, double b)
{
    return fabs(a - b) > 1e-4 * (fabs(a) + fabs(b)) + 1e-6;
}

/* The series attributes two views must share: the same series, study,
 * patient and modality (a series UID shared by two patients or by two
 * modalities is a collision or a wrong merge, never one scan; Modality is
 * a series attribute, as in assemble.c). NULL when they agree. */
static const char *identity_differs(const scp_ctpd_info *a, const scp_ctpd_info *b)
{
    if (strcmp(a->series_uid, b->series_uid) != 0)
        return "series instance UID";
    if (strcmp(a->study_uid, b->study_uid) != 0)
        return "study instance UID";
    if (strcmp(a->patient_id, b->patient_id) != 0)
        return "Patient ID";
    if (strcmp(a->modality, b->modality) != 0)
        return "modality";
    return NULL;
}

/* The detector and orbit two views must share; NULL when they agree. */
static const char *geometry_differs(const scp_ctpd_info *a, const scp_ctpd_info *b)
{
    if (a->det_rows != b->det_rows || a->det_cols != b->det_cols)
        return "detector size";
    if (differs(a->elem_transverse_mm, b->elem_transverse_mm) ||
        differs(a->elem_axial_mm, b->elem_axial_mm))
        return "detector element spacing";
    if (differs(a->radial_mm, b->radial_mm) || differs(a->src_det_mm, b->src_det_mm))
        return "source distances";
    if (differs(a->central_col, b->central_col) || differs(a->central_row, b->central_row))
        return "detector central element";
    if (strcmp(a->det_shape, b->det_shape) != 0)
        return "detector shape";
    if (strcmp(a->ffs_mode, b->ffs_mode) != 0)
        return "flying focal spot mode";
    if (a->views_per_rotation != b->views_per_rotation)
        return "views per rotation";
    return NULL;
}

/* Every view must describe the same series and scan as view 0 (the message
 * names the attribute, never its value: a Patient ID is not logged). */
static int check_consistent(const view *v, int n, char *err, size_t len)
{
    const scp_ctpd_info *a = &v[0].info;
    for (int i = 1; i < n; i++) {
        const scp_ctpd_info *b = &v[i].info;
        const char *what = identity_differs(a, b);
        if (!what)
            what = geometry_differs(a, b);
        if (what)
            return fail(err, len, LDCT_EINPUT,
                        "projection views disagree on the %s (instance %d, %s, vs instance %d)",
                        what, b->instance_number, v[i].path, a->instance_number);
    }
    return 0;
}

/* Detector shape, flying focal spot, source shifts and the axial motion. */
static int check_supported(const view *v, int n, int *cylindrical, char *err, size_t len)
{
    const scp_ctpd_info *a = &v[0].info;
    if (strcmp(a->det_shape, "SPHERICAL") == 0)
        return fail(err, len, LDCT_EUNSUPPORTED,
                    "spherical detectors are not supported (only FLAT and CYLINDRICAL)");
    if (strcmp(a->det_shape, "CYLINDRICAL") != 0 && strcmp(a->det_shape, "FLAT") != 0)
        return fail(err, len, LDCT_EINPUT, "unknown detector shape \"%s\" in (7029,100B)",
                    a->det_shape);
    *cylindrical = strcmp(a->det_shape, "CYLINDRICAL") == 0;
    if (a->ffs_mode[0] && strcmp(a->ffs_mode, "FFSNONE") != 0)
        return fail(err, len, LDCT_EUNSUPPORTED,
                    "flying focal spot mode %s is not supported (only FFSNONE)", a->ffs_mode);
    double zmin = INFINITY, zmax = -INFINITY;
    for (int i = 0; i < n; i++) {
        const scp_ctpd_info *b = &v[i].info;
        if (fabs(b->shift_axial_mm) > 1e-6 || fabs(b->shift_radial_mm) > 1e-6 ||
            fabs(b->shift_angular_rad) > 1e-9)
            return fail(err, len, LDCT_EUNSUPPORTED,
                        "source shifts (7033,100B-100D) are not supported (instance %d shifts "
                        "the focal spot by %.3g mm, %.3g mm, %.3g rad)",
                        b->instance_number, b->shift_axial_mm, b->shift_radial_mm,
                        b->shift_angular_rad);
        zmin = b->axial_mm < zmin ? b->axial_mm : zmin;
        zmax = b->axial_mm > zmax ? b->axial_mm : zmax;
    }
    if (zmax - zmin > ASM_PROJ_AXIAL_TOL_MM)
        return fail(err, len, LDCT_EUNSUPPORTED,
                    "helical scan: the focal spot moves %.1f mm along the axis over the series;"
                    " only axial (circular) scans are reconstructed",
                    zmax - zmin);
    return 0;
}

static int by_instance(const void *x, const void *y)
{
    const view *a = x, *b = y;
    return (a->info.instance_number > b->info.instance_number) -
           (a->info.instance_number < b->info.instance_number);
}

static int by_angle(const void *x, const void *y)
{
    const view *a = x, *b = y;
    return (a->b > b->b) - (a->b < b->b);
}

/* Puts the views in acquisition order (instance numbers when unique, else
 * angle), unwraps their angles and turns them ascending. */
static void order_views(view *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, by_instance);
    int unique = 1;
    for (int i = 1; i < n; i++)
        unique &= v[i].info.instance_number != v[i - 1].info.instance_number;
    for (int i = 0; i < n; i++)
        v[i].b = v[i].info.angle_rad - k_pi / 2;
    if (!unique) {
        for (int i = 0; i < n; i++)
            v[i].b = fmod(fmod(v[i].b, 2 * k_pi) + 2 * k_pi, 2 * k_pi);
        qsort(v, (size_t)n, sizeof *v, by_angle);
        return;
    }
    for (int i = 1; i < n; i++) { /* unwrap */
        double d = v[i].b - v[i - 1].b;
        v[i].b -= 2 * k_pi * floor((d + k_pi) / (2 * k_pi));
    }
    if (n > 1 && v[n - 1].b < v[0].b) /* rotating towards negative angles */
        for (int i = 0; i < n / 2; i++) {
            view t = v[i];
            v[i] = v[n - 1 - i];
            v[n - 1 - i] = t;
        }
}

/* Equal steps; how many views make the scan; full rotation or short scan. */
static int scan_extent(const view *v, int n, double half_fan, int *nuse, double *range, char *err,
                       size_t len)
{
    if (n < 2)
        return fail(err, len, LDCT_EINPUT, "a projection series needs at least 2 views");
    double step = (v[n - 1].b - v[0].b) / (n - 1);
    int vpr = v[0].info.views_per_rotation;
    if (vpr > 0 && fabs(step - 2 * k_pi / vpr) > 0.05 * step)
        return fail(err, len, LDCT_EINPUT,
                    "views are %.4g degrees apart but (7033,1013) says %d views per rotation",
                    step * 180 / k_pi, vpr);
    if (!(step > 0))
        return fail(err, len, LDCT_EUNSUPPORTED, "all views have the same angle");
    for (int i = 0; i < n; i++)
        if (fabs(v[i].b - v[0].b - i * step) > 0.05 * step)
            return fail(err, len, LDCT_EUNSUPPORTED,
                        "views are not equally spaced in angle (instance %d is %.3g degrees off)",
                        v[i].info.instance_number, (v[i].b - v[0].b - i * step) * 180 / k_pi);
    int full = (int)floor(2 * k_pi / step + 0.5);
    if (n >= full && fabs(full * step - 2 * k_pi) < 0.5 * step) {
        *nuse = full; /* one rotation; overscan views are dropped */
        *range = 2 * k_pi;
        return 0;
    }
    *nuse = n;
    *range = (n - 1) * step;
    double need = k_pi + 2 * half_fan;
    if (*range < need - step)
        return fail(err, len, LDCT_EUNSUPPORTED,
                    "the views cover %.1f degrees; a short scan needs %.1f (180 plus the fan)",
                    *range * 180 / k_pi, need * 180 / k_pi);
    return 0;
}

/* The detector in the engine's orientation (columns reversed, see the header). */
static void detector(const scp_ctpd_info *a, int cylindrical, gpu_fdk_cylinder *c, gpu_fdk_flat *f)
{
    c->nu = a->det_cols;
    c->nv = a->det_rows;
    c->dsd = a->src_det_mm;
    c->dgamma = a->elem_transverse_mm / a->src_det_mm;
    c->dv = a->elem_axial_mm;
    c->cu = a->det_cols - a->central_col;
    c->cv = a->central_row - 1;
    if (cylindrical) {
        gpu_fdk_cylinder_flat(c, f);
        return;
    }
    *f = (gpu_fdk_flat){.nu = c->nu,
                        .nv = c->nv,
                        .du = a->elem_transverse_mm,
                        .dv = a->elem_axial_mm,
                        .cu = c->cu,
                        .cv = c->cv};
}

/* Reads view i's line integrals into plane i of raw (engine orientation). */
static int read_views(const view *v, int n, gpu_volume *raw, gpu_progress_count *count, char *err,
                      size_t len)
{
    const int nu = raw->nx, nv = raw->ny;
    int first = 0;
#pragma omp parallel for schedule(dynamic, 1) if (n > 4)
    for (int i = 0; i < n; i++) {
        char e[256] = "";
        scp_ctpd_info info;
        float *buf = malloc(sizeof(float) * (size_t)nu * nv);
        int rc = buf ? scp_ctpd_read(v[i].path, &info, buf, (size_t)nu * nv, e, sizeof e) : -ENOMEM;
        for (int b = 0; !rc && b < nv; b++) {
            float *dst = raw->data + ((size_t)i * nv + b) * nu;
            for (int a = 0; a < nu; a++)
                dst[a] = buf[(size_t)b * nu + (nu - 1 - a)];
        }
        free(buf);
        gpu_progress_add(count, VIEW_UNITS);
        if (rc) {
#pragma omp critical(asm_proj_err)
            if (!first) {
                first = rc;
                snprintf(err, len, "%s", e[0] ? e : ldct_strerror(rc));
            }
        }
    }
    return first;
}

static int build(const view *v, int nuse, double range, int cylindrical, gpu_progress_count *count,
                 asm_proj *o, char *err, size_t len)
{
    const scp_ctpd_info *a = &v[0].info;
    gpu_fdk_cylinder c;
    gpu_fdk_flat f;
    detector(a, cylindrical, &c, &f);
    int rc = gpu_fdk_geometry_circular(&o->geo, nuse, f.nu, f.nv, f.du, f.dv, a->radial_mm,
                                       a->src_det_mm, v[0].b, range, f.cu - (f.nu - 1) / 2.0,
                                       f.cv - (f.nv - 1) / 2.0);
    if (rc)
        return fail(err, len, rc, "projection geometry not usable: %s", ldct_strerror(rc));
    gpu_volume raw = {0};
    if ((rc = gpu_volume_init(&o->proj, f.nu, f.nv, nuse, 1)) ||
        (cylindrical && (rc = gpu_volume_init(&raw, c.nu, c.nv, nuse, 1))))
        return fail(err, len, rc, "out of memory for %d views", nuse);
    rc = read_views(v, nuse, cylindrical ? &raw : &o->proj, count, err, len);
    if (!rc && cylindrical)
        rc = gpu_fdk_rebin_cylinder(&c, &f, &raw, &o->proj);
    if (!rc)
        gpu_progress_add(count, REBIN_UNITS * nuse); /* none to do on a flat detector */
    gpu_volume_close(&raw);
    if (rc && !err[0])
        fail(err, len, rc, "cannot read the views: %s", ldct_strerror(rc));
    return rc;
}

static void describe(const view *v, int n, int nuse, int cylindrical, asm_proj *o)
{
    const scp_ctpd_info *a = &v[0].info;
    o->z0 = -a->axial_mm;
    o->cylindrical = cylindrical;
    o->short_scan = o->geo.scan_range < 2 * k_pi - o->geo.angle_step / 2;
    o->nviews = nuse;
    o->nsrc = n;
    snprintf(o->first_path, sizeof o->first_path, "%s", v[0].path);
    snprintf(o->study_uid, sizeof o->study_uid, "%s", a->study_uid);
    snprintf(o->series_uid, sizeof o->series_uid, "%s", a->series_uid);
    snprintf(o->first_sop, sizeof o->first_sop, "%s", a->sop_instance_uid);
    snprintf(o->last_sop, sizeof o->last_sop, "%s", v[nuse - 1].info.sop_instance_uid);
    o->fov_mm = 2 * a->radial_mm * sin(gpu_fdk_fan_half_angle(&o->geo));
    o->cone_mm = o->geo.nv * o->geo.dv * a->radial_mm / a->src_det_mm;
}

int asm_proj_load(const char *const *paths, int n, asm_proj *out, char *err, size_t err_len)
{
    return asm_proj_load_with(paths, n, NULL, out, err, err_len);
}

int asm_proj_load_with(const char *const *paths, int n, const gpu_progress *progress, asm_proj *out,
                       char *err, size_t err_len)
{
    if (!paths || !out || !err)
        return -EINVAL;
    memset(out, 0, sizeof *out);
    err[0] = '\0';
    if (n < 2)
        return fail(err, err_len, LDCT_EINPUT, "a projection series needs at least 2 views");
    view *v = calloc((size_t)n, sizeof *v);
    if (!v)
        return fail(err, err_len, -ENOMEM, "out of memory");
    int cylindrical = 0, nuse = 0;
    double range = 0;
    gpu_progress_count count; /* headers, views used, rebinning (views left out at once) */
    gpu_progress_begin(&count, progress, 0.0, 1.0, (HEADER_UNITS + VIEW_UNITS + REBIN_UNITS) * n);
    gpu_progress_at(progress, 0.0);
    int rc = read_headers(paths, n, v, &count, err, err_len);
    if (!rc)
        rc = check_consistent(v, n, err, err_len);
    if (!rc)
        rc = check_supported(v, n, &cylindrical, err, err_len);
    if (!rc) {
        order_views(v, n);
        gpu_fdk_cylinder c;
        gpu_fdk_flat f;
        detector(&v[0].info, cylindrical, &c, &f);
        gpu_fdk_geometry probe = {.nu = f.nu, .du = f.du, .cu = f.cu, .dsd = c.dsd};
        rc = scan_extent(v, n, gpu_fdk_fan_half_angle(&probe), &nuse, &range, err, err_len);
    }
    if (!rc)
        gpu_progress_add(&count, (VIEW_UNITS + REBIN_UNITS) * (n - nuse));
    if (!rc)
        rc = build(v, nuse, range, cylindrical, &count, out, err, err_len);
    if (!rc) {
        describe(v, n, nuse, cylindrical, out);
        log_debug("projection series %s: %d of %d views, %s detector %dx%d, %s scan %.1f deg",
                  out->series_uid, nuse, n, cylindrical ? "cylindrical" : "flat", out->geo.nu,
                  out->geo.nv, out->short_scan ? "short" : "full", range * 180 / k_pi);
        gpu_progress_end(&count);
    } else
        asm_proj_close(out);
    free(v);
    return rc;
}
