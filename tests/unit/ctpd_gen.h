/* Synthetic DICOM-CT-PD series for tests and tests/tools/mkctpd: closed-form
 * line integrals of ellipsoids given in the patient frame (LPS, mm), written
 * with scp_ctpd_write in the Mayo data's conventions, stated here on their
 * own (independently of pipeline/assemble_proj.c, which must undo them):
 * focal spot at (dso sin phi, -dso cos phi, -axial) (phi = 0 at 12 o'clock,
 * growing towards patient +X), detector column index growing along
 * (-cos phi, -sin phi, 0), row index along +Z, DetectorCentralElement the
 * 1-based (column, row) on the ray through the isocentre; a FLAT detector is
 * a plane at dsd from the focal spot, a CYLINDRICAL one a cylinder of radius
 * dsd about it with columns du / dsd radians apart. Header-only (static
 * functions); single-threaded per call.
 */
#ifndef LDCT_TESTS_CTPD_GEN_H
#define LDCT_TESTS_CTPD_GEN_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/fdk.h"
#include "scp/scp.h"

typedef struct ctpd_gen {
    const char *shape; /* "FLAT", "CYLINDRICAL", ... written as is */
    const char *ffs;   /* NULL: FFSNONE */
    int cols, rows, views;
    double du, dv; /* element pitch at the detector (along the arc for CYLINDRICAL) */
    double dso, dsd;
    double central_col, central_row; /* 1-based */
    double phi0, dphi;               /* angle of view 0 and step (radians, signed) */
    double axial_mm, axial_step_mm;  /* focal centre axial position of view 0, step per view */
    double shift_radial_mm;          /* source shift written into every view */
    int views_per_rotation;          /* 0: round(2 pi / |dphi|) */
    const char *patient_name, *patient_id, *study_uid, *series_uid, *description;
    const gpu_fdk_ellipsoid *e; /* patient frame */
    int ne;
} ctpd_gen;

/* Line integrals of view i, values[row * cols + col]. */
static void ctpd_gen_view(const ctpd_gen *g, int i, float *values)
{
    double phi = g->phi0 + i * g->dphi, axial = g->axial_mm + i * g->axial_step_mm;
    const double s[3] = {sin(phi), -cos(phi), 0}, ec[3] = {-cos(phi), -sin(phi), 0};
    const double src[3] = {g->dso * s[0], g->dso * s[1], -axial};
    int cyl = strcmp(g->shape, "CYLINDRICAL") == 0;
    for (int r = 0; r < g->rows; r++)
        for (int c = 0; c < g->cols; c++) {
            double t = (c - (g->central_col - 1)) * g->du, z = (r - (g->central_row - 1)) * g->dv;
            double along = g->dsd, across = t; /* flat */
            if (cyl) {
                along = g->dsd * cos(t / g->dsd);
                across = g->dsd * sin(t / g->dsd);
            }
            const double dir[3] = {-along * s[0] + across * ec[0], -along * s[1] + across * ec[1],
                                   z};
            values[(size_t)r * g->cols + c] = (float)gpu_fdk_phantom_ray(g->e, g->ne, src, dir);
        }
}

/* Writes the series into dir as view_NNNN.dcm; the paths go to paths[i]
 * (g->views entries of 1024 chars). Returns 0 or the first error. */
static int ctpd_gen_write(const ctpd_gen *g, const char *dir, char (*paths)[1024])
{
    float *values = malloc(sizeof(float) * (size_t)g->cols * g->rows);
    if (!values)
        return -1;
    int rc = 0;
    for (int i = 0; i < g->views && !rc; i++) {
        char sop[65], err[256] = "";
        rc = scp_uid_new("1.2.826.0.1.3680043.10.543.7", sop, sizeof sop);
        ctpd_gen_view(g, i, values);
        scp_ctpd_params p = {.patient_name = g->patient_name ? g->patient_name : "PHANTOM^CTPD",
                             .patient_id = g->patient_id ? g->patient_id : "CTPD1",
                             .study_uid = g->study_uid,
                             .series_uid = g->series_uid,
                             .sop_uid = sop,
                             .series_description = g->description ? g->description : "CTPD",
                             .instance_number = i + 1,
                             .values = values,
                             .rescale_slope = 2e-4,
                             .rescale_intercept = 0};
        scp_ctpd_info *o = &p.geo;
        o->det_rows = g->rows;
        o->det_cols = g->cols;
        o->elem_transverse_mm = g->du;
        o->elem_axial_mm = g->dv;
        snprintf(o->det_shape, sizeof o->det_shape, "%s", g->shape);
        o->angle_rad = fmod(g->phi0 + i * g->dphi, 2 * 3.14159265358979323846);
        if (o->angle_rad < 0)
            o->angle_rad += 2 * 3.14159265358979323846;
        o->axial_mm = g->axial_mm + i * g->axial_step_mm;
        o->radial_mm = g->dso;
        o->src_det_mm = g->dsd;
        o->central_col = g->central_col;
        o->central_row = g->central_row;
        o->shift_radial_mm = g->shift_radial_mm;
        snprintf(o->ffs_mode, sizeof o->ffs_mode, "%s", g->ffs ? g->ffs : "FFSNONE");
        o->views_per_rotation = g->views_per_rotation
                                    ? g->views_per_rotation
                                    : (int)floor(2 * 3.14159265358979323846 / fabs(g->dphi) + 0.5);
        snprintf(paths[i], 1024, "%s/view_%04d.dcm", dir, i + 1);
        if (!rc)
            rc = scp_ctpd_write(&p, paths[i], err, sizeof err);
        if (rc)
            fprintf(stderr, "ctpd_gen: %s\n", err);
    }
    free(values);
    return rc;
}

#endif
