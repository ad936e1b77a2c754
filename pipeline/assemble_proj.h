/* assemble_proj: turns the files of one DICOM-CT-PD projection series (one
 * view per instance, geometry in the private groups 7029/7031/7033, see
 * scp_ctpd_read) into an FDK geometry and the views' line integrals, or
 * refuses the series with one sentence a PACS administrator understands.
 *
 * Frame (the Mayo data's conventions, after ODL's reader of that data,
 * odl/contrib/datasets/ct/mayo.py, composed with the axis flips of its
 * load_reconstruction): the reconstruction frame is the patient frame
 * (LPS: x to the patient's left, y posterior), z measured from the orbit
 * plane at patient Z = z0. DetectorFocalCenterAngularPosition phi = 0 puts
 * the focal spot at 12 o'clock (patient -Y, anterior for a supine patient),
 * phi growing towards patient +X: focal spot at dso (sin phi, -cos phi)
 * (the engine's source angle b = phi - pi/2). Detector column indices grow
 * along (-cos phi, -sin phi, 0) (towards the patient's right when phi = 0),
 * row indices along +Z; DetectorCentralElement (1-based column, row) names
 * the element on the ray through the isocentre. The orbit plane is at
 * patient Z = -DetectorFocalCenterAxialPosition (ODL: z_ODL = axial
 * position, Z = -z_ODL). The isocentre is patient X = Y = 0.
 *
 * Accepted: FLAT and CYLINDRICAL detectors (cylindrical ones are rebinned
 * onto a virtual flat detector, gpu/fdk_rebin.c), axial (circular) scans
 * whose views are equally spaced in angle, flying focal spot FFSNONE (or
 * absent) with zero source shifts, a full rotation (extra views beyond one
 * rotation are dropped) or a short scan of at least 180 degrees plus the
 * fan angle (Parker weights). Refused: SPHERICAL detectors, helical scans
 * (the focal centre moving more than ASM_PROJ_AXIAL_TOL_MM along the axis),
 * other flying focal spot modes or nonzero source shifts, views that are
 * not equally spaced, too short a scan (all LDCT_EUNSUPPORTED); views that
 * disagree on the detector (size, spacings, distances, central element,
 * shape), on the series, study, Patient ID or modality, or that are not
 * projection data (LDCT_EINPUT).
 *
 * Thread-safety: any thread; reads the files with an OpenMP team.
 */
#ifndef LDCT_PIPELINE_ASSEMBLE_PROJ_H
#define LDCT_PIPELINE_ASSEMBLE_PROJ_H

#include "gpu/fdk.h"
#include "gpu/progress.h"

#include <stddef.h>

#define ASM_PROJ_AXIAL_TOL_MM 0.1

typedef struct asm_proj {
    gpu_fdk_geometry geo;  /* flat detector (virtual for a cylindrical one), owned */
    gpu_volume proj;       /* geo.nu x geo.nv x geo.nproj line integrals, owned */
    double z0;             /* patient Z of the orbit plane, mm */
    int cylindrical;       /* 1: rebinned from a cylindrical detector */
    int short_scan;        /* 1: less than a rotation (Parker weights) */
    int nviews;            /* views used (geo.nproj) */
    int nsrc;              /* instances in the series */
    char first_path[1024]; /* the first view used: the patient/study attributes come from it */
    char study_uid[65], series_uid[65];
    char first_sop[65], last_sop[65]; /* SOP Instance UIDs of the first and last view used */
    double fov_mm;                    /* diameter the fan covers at the isocentre */
    double cone_mm;                   /* axial extent the detector covers at the isocentre */
} asm_proj;

/* 1 when the file is DICOM-CT-PD projection data ((7029,1010) present),
 * even with geometry the reader refuses, 0 when it is not (or cannot be
 * read). */
int asm_proj_is_projection(const char *path);

/* Loads the n files. Returns 0 and fills *out (freed with asm_proj_close),
 * or LDCT_EINPUT / LDCT_EUNSUPPORTED (see above), -ENOENT, -ENOMEM or
 * LDCT_EDICOM with one sentence in err, *out zeroed. */
int asm_proj_load(const char *const *paths, int n, asm_proj *out, char *err, size_t err_len);

/* asm_proj_load that reports to progress (optional) as each file's header,
 * then each view's values, are read, and after the rebinning of a
 * cylindrical detector (on the calling thread; 1 at success). */
int asm_proj_load_with(const char *const *paths, int n, const gpu_progress *progress, asm_proj *out,
                       char *err, size_t err_len);

/* Frees what asm_proj_load allocated; NULL and a zeroed struct are fine. */
void asm_proj_close(asm_proj *p);

#endif
