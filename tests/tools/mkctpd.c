/* mkctpd: writes the projections of a water phantom with an insert as a
 * DICOM-CT-PD series (DIR/view_0001.dcm ...) for tests and demos: closed-
 * form line integrals in the Mayo data's conventions (tests/unit/ctpd_gen.h).
 *
 *   mkctpd --out DIR [--views N] [--shape FLAT|CYLINDRICAL] [--cols C]
 *          [--rows R] [--short-scan] [--helical MM] [--mu-water X]
 *          [--series-description TEXT] [--study-uid UID] [--series-uid UID]
 *          [--patient-id ID] [--mayo]
 *
 * Geometry: focal spot 300 mm from the isocentre, detector 600 mm from it,
 * elements 2 mm (1 mm at the isocentre; along the arc for CYLINDRICAL),
 * default 160 columns x 16 rows, quarter-offset central column, axial
 * position 100 mm (orbit plane at patient Z = -100), 180 views over 360
 * degrees (--short-scan: 180 degrees plus the fan), --helical MM moves the
 * focal spot MM per view along the axis. --mayo: the Mayo data's scanner
 * instead (2304 views of 736 x 64 cylindrical elements of 1.2858 x 1.0947
 * mm, 595 / 1085.6 mm; benchmark size). Phantom (patient frame): a water
 * cylinder of radius 60 mm (mu_water, default 0.0193 / mm, i.e. 0 HU) with an
 * insert of radius 12 mm at X = +35, Y = -20 mm (patient left, anterior)
 * of 1.5 mu_water (+500 HU). Exits non-zero with a message on error.
 * Single-threaded.
 */
#include "common/fsutil.h"
#include "tests/unit/ctpd_gen.h"

#include <getopt.h>

static void usage(void)
{
    fprintf(stderr, "usage: mkctpd --out DIR [--views N] [--shape FLAT|CYLINDRICAL] [--cols C]"
                    " [--rows R] [--short-scan] [--helical MM] [--mu-water X]"
                    " [--series-description T] [--study-uid U] [--series-uid U]"
                    " [--patient-id ID] [--mayo]\n");
}

int main(int argc, char **argv)
{
    static const struct option lo[] = {{"out", 1, 0, 'o'},
                                       {"views", 1, 0, 'n'},
                                       {"shape", 1, 0, 's'},
                                       {"cols", 1, 0, 'c'},
                                       {"rows", 1, 0, 'r'},
                                       {"short-scan", 0, 0, 'S'},
                                       {"helical", 1, 0, 'h'},
                                       {"mu-water", 1, 0, 'm'},
                                       {"series-description", 1, 0, 'd'},
                                       {"study-uid", 1, 0, 'U'},
                                       {"series-uid", 1, 0, 'E'},
                                       {"patient-id", 1, 0, 'p'},
                                       {"mayo", 0, 0, 'M'},
                                       {0, 0, 0, 0}};
    const double pi = 3.14159265358979323846;
    const char *out = NULL;
    double mu = 0.0193;
    int short_scan = 0;
    char study[65], series[65];
    ctpd_gen g = {.shape = "CYLINDRICAL",
                  .cols = 160,
                  .rows = 16,
                  .views = 180,
                  .du = 2.0,
                  .dv = 2.0,
                  .dso = 300,
                  .dsd = 600,
                  .phi0 = 0.3,
                  .axial_mm = 100,
                  .description = "CTPD PHANTOM"};
    scp_global_init();
    if (scp_uid_new("1.2.826.0.1.3680043.10.543.8", study, sizeof study) ||
        scp_uid_new("1.2.826.0.1.3680043.10.543.8", series, sizeof series))
        return 1;
    g.study_uid = study;
    g.series_uid = series;
    int c;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case 'o':
            out = optarg;
            break;
        case 'n':
            g.views = atoi(optarg);
            break;
        case 's':
            g.shape = optarg;
            break;
        case 'c':
            g.cols = atoi(optarg);
            break;
        case 'r':
            g.rows = atoi(optarg);
            break;
        case 'S':
            short_scan = 1;
            break;
        case 'h':
            g.axial_step_mm = atof(optarg);
            break;
        case 'm':
            mu = atof(optarg);
            break;
        case 'd':
            g.description = optarg;
            break;
        case 'U':
            g.study_uid = optarg;
            break;
        case 'E':
            g.series_uid = optarg;
            break;
        case 'p':
            g.patient_id = optarg;
            break;
        case 'M':
            g.cols = 736, g.rows = 64, g.views = 2304, g.du = 1.2858, g.dv = 1.0947;
            g.dso = 595, g.dsd = 1085.6, g.shape = "CYLINDRICAL";
            break;
        default:
            usage();
            return 2;
        }
    }
    if (!out || g.views < 2 || g.cols < 2 || g.rows < 1 || !(mu > 0)) {
        usage();
        return 2;
    }
    g.central_col = g.cols / 2.0 + 0.75; /* quarter offset (1-based) */
    g.central_row = (g.rows + 1) / 2.0;
    double fan = 2 * (g.cols / 2.0 + 1) * g.du / g.dsd; /* the arc's: >= the flat one's */
    double range = short_scan ? pi + fan + 0.05 : 2 * pi;
    g.dphi = short_scan ? range / (g.views - 1) : range / g.views;
    g.views_per_rotation = (int)lround(2 * pi / g.dphi);
    const gpu_fdk_ellipsoid e[2] = {
        {.centre = {0, 0, -g.axial_mm}, .axes = {60, 60, 400}, .density = mu},
        {.centre = {35, -20, -g.axial_mm}, .axes = {12, 12, 60}, .density = 0.5 * mu},
    };
    g.e = e;
    g.ne = 2;
    if (fs_mkdirs(out))
        return fprintf(stderr, "mkctpd: cannot create %s\n", out), 1;
    char(*paths)[1024] = calloc((size_t)g.views, 1024);
    if (!paths || ctpd_gen_write(&g, out, paths))
        return fprintf(stderr, "mkctpd: writing failed\n"), 1;
    fprintf(stderr, "mkctpd: %d %s views of %dx%d into %s (series %s)\n", g.views, g.shape, g.cols,
            g.rows, out, g.series_uid);
    free(paths);
    scp_global_cleanup();
    return 0;
}
