/* Unit tests of pipeline/assemble_proj.c: DICOM-CT-PD series written in the
 * Mayo conventions (tests/unit/ctpd_gen.h, scp_ctpd_write) are assembled and
 * reconstructed with FDK; an off-centre insert must land at its patient
 * position, not mirrored in X, Y or Z, for flat and cylindrical detectors,
 * both rotation directions, full and short scans. Series the node cannot
 * reconstruct are refused with the right code and a readable reason.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "gpu/fdk.h"
#include "pipeline/assemble_proj.h"
#include "scp/scp.h"
#include "tests/unit/ctpd_gen.h"
#include "tests/unit/testutil.h"

static const double k_pi = 3.14159265358979323846;

/* Water cylinder (mu 0.02 / mm) with an insert (+0.01) left-anterior-head
 * of the isocentre; the orbit plane is at patient Z = -axial = -100. */
static const double k_axial = 100, k_mu = 0.02;
static const double k_ins[3] = {20, -12, -100 + 5};
static gpu_fdk_ellipsoid phantom[2] = {
    {.centre = {0, 0, -100}, .axes = {38, 38, 200}, .density = 0.02},
    {.centre = {20, -12, -95}, .axes = {6, 6, 3}, .density = 0.01},
};

static ctpd_gen base_gen(const char *shape, int views, double dphi)
{
    ctpd_gen g = {.shape = shape,
                  .cols = 96,
                  .rows = 24,
                  .views = views,
                  .du = 2.0,
                  .dv = 2.0,
                  .dso = 300,
                  .dsd = 600,
                  .central_col = 48.75, /* quarter offset */
                  .central_row = 12.5,
                  .phi0 = 0.7,
                  .dphi = dphi,
                  .axial_mm = k_axial,
                  .study_uid = "1.2.826.0.1.3680043.10.543.7.1",
                  .series_uid = "1.2.826.0.1.3680043.10.543.7.2",
                  .e = phantom,
                  .ne = 2};
    return g;
}

/* Writes g into a fresh folder and assembles it. */
static int load(const ctpd_gen *g, asm_proj *p, char *err, size_t len)
{
    char dir[64];
    tu_tmpdir(dir, sizeof dir);
    char(*paths)[1024] = calloc((size_t)g->views, 1024);
    const char **pp = calloc((size_t)g->views, sizeof *pp);
    ck_assert_int_eq(ctpd_gen_write(g, dir, paths), 0);
    for (int i = 0; i < g->views; i++)
        pp[i] = paths[i];
    int rc = asm_proj_load(pp, g->views, p, err, len);
    for (int i = 0; i < g->views; i++)
        remove(paths[i]);
    remove(dir);
    free(paths);
    free(pp);
    return rc;
}

enum { NX = 64, NZ = 9 };
static const double k_vx = 1.25, k_vz = 2.0;

/* Mean of the reconstruction over a 3x3 patch at patient (X, Y, Z). */
static double at(const gpu_volume *rec, const asm_proj *p, double X, double Y, double Z)
{
    double o = -k_vx * (NX - 1) / 2.0, oz = -k_vz * (NZ - 1) / 2.0;
    int x = (int)lround((X - o) / k_vx), y = (int)lround((Y - o) / k_vx);
    int z = (int)lround((Z - p->z0 - oz) / k_vz);
    ck_assert(x >= 1 && y >= 1 && x < NX - 1 && y < NX - 1 && z >= 0 && z < NZ);
    double s = 0;
    for (int dy = -1; dy <= 1; dy++)
        for (int dx = -1; dx <= 1; dx++)
            s += rec->data[((size_t)z * NX + y + dy) * NX + x + dx];
    return s / 9;
}

/* The insert reads about 0.03 at its place and its mirror images read
 * water (0.02): the bound 0.004 is 40% of the insert's contrast, far above
 * the few-percent error of FDK at 1.25 mm voxels (measured below 0.001). */
static void check_insert_in_place(const ctpd_gen *g)
{
    asm_proj p;
    char err[512] = "";
    ck_assert_msg(load(g, &p, err, sizeof err) == 0, "%s", err);
    ck_assert_double_eq_tol(p.z0, -k_axial, 1e-3);
    gpu_fdk_volume vol;
    gpu_fdk_volume_centered(&vol, NX, NX, NZ, k_vx, k_vx, k_vz);
    gpu_volume rec;
    ck_assert_int_eq(gpu_volume_init(&rec, NX, NX, NZ, 1), 0);
    gpu_fdk_params fp;
    gpu_fdk_params_default(&fp);
    fp.filter = GPU_FDK_SHEPP_LOGAN;
    ck_assert_int_eq(gpu_fdk(&fp, &p.geo, &p.proj, &vol, &rec, NULL), 0);
    const double X = k_ins[0], Y = k_ins[1], Z = k_ins[2], z0 = p.z0;
    double in = at(&rec, &p, X, Y, Z), water = at(&rec, &p, 0, 10, z0);
    double mx = at(&rec, &p, -X, Y, Z), my = at(&rec, &p, X, -Y, Z);
    double mz = at(&rec, &p, X, Y, z0 - (Z - z0)), mxy = at(&rec, &p, -X, -Y, Z);
    printf("%s %s scan, %d views (step %+.2f deg): insert %.4f, water %.4f, mirrors x %.4f "
           "y %.4f z %.4f xy %.4f\n",
           g->shape, p.short_scan ? "short" : "full", p.nviews, g->dphi * 180 / k_pi, in, water, mx,
           my, mz, mxy);
    ck_assert_msg(fabs(water - k_mu) < 0.004, "water %.4f", water);
    ck_assert_msg(fabs(in - 0.03) < 0.004, "insert %.4f", in);
    ck_assert_msg(fabs(mx - k_mu) < 0.004 && fabs(my - k_mu) < 0.004 && fabs(mz - k_mu) < 0.004 &&
                      fabs(mxy - k_mu) < 0.004,
                  "a mirror image holds the insert");
    gpu_volume_close(&rec);
    asm_proj_close(&p);
}

START_TEST(flat_full_scan_puts_the_insert_at_its_patient_position)
{
    ctpd_gen g = base_gen("FLAT", 180, 2 * k_pi / 180);
    check_insert_in_place(&g);
}
END_TEST

START_TEST(cylindrical_full_scan_rotating_backwards_puts_the_insert_in_place)
{
    ctpd_gen g = base_gen("CYLINDRICAL", 180, -2 * k_pi / 180);
    check_insert_in_place(&g);
}
END_TEST

/* Overscan views beyond one rotation are dropped. */
START_TEST(full_scan_with_overscan_uses_one_rotation)
{
    ctpd_gen g = base_gen("CYLINDRICAL", 200, 2 * k_pi / 180);
    asm_proj p;
    char err[512] = "";
    ck_assert_msg(load(&g, &p, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(p.nviews, 180);
    ck_assert_int_eq(p.nsrc, 200);
    ck_assert_int_eq(p.short_scan, 0);
    ck_assert(p.cylindrical);
    ck_assert_double_eq_tol(p.geo.scan_range, 2 * k_pi, 1e-9);
    asm_proj_close(&p);
}
END_TEST

/* Short scan (Parker weights), both rotation directions: the weights'
 * ramps must sit at the right ends of the scan or the insert smears. */
START_TEST(short_scans_in_either_direction_put_the_insert_in_place)
{
    double fan = 2 * atan(48 * 2.0 / 600), range = k_pi + fan + 0.05;
    int views = 140;
    ctpd_gen g = base_gen("FLAT", views, range / (views - 1));
    check_insert_in_place(&g);
    g = base_gen("CYLINDRICAL", views, -range / (views - 1));
    g.views_per_rotation = (int)lround(2 * k_pi / (range / (views - 1)));
    check_insert_in_place(&g);
}
END_TEST

/* Expects load() to fail with rc and a reason containing `word`. */
static void expect_refusal(const ctpd_gen *g, int rc, const char *word)
{
    asm_proj p;
    char err[512] = "";
    ck_assert_int_eq(load(g, &p, err, sizeof err), rc);
    printf("refused: %s\n", err);
    ck_assert_msg(strstr(err, word), "reason \"%s\" lacks \"%s\"", err, word);
    ck_assert_ptr_null(p.proj.data);
}

START_TEST(helical_series_is_refused)
{
    ctpd_gen g = base_gen("CYLINDRICAL", 24, 2 * k_pi / 24);
    g.axial_step_mm = 0.5;
    expect_refusal(&g, LDCT_EUNSUPPORTED, "helical");
}
END_TEST

START_TEST(flying_focal_spot_spherical_and_source_shifts_are_refused)
{
    ctpd_gen g = base_gen("CYLINDRICAL", 24, 2 * k_pi / 24);
    g.ffs = "FFSZ";
    expect_refusal(&g, LDCT_EUNSUPPORTED, "FFSZ");
    g = base_gen("SPHERICAL", 24, 2 * k_pi / 24);
    expect_refusal(&g, LDCT_EUNSUPPORTED, "spherical");
    g = base_gen("FLAT", 24, 2 * k_pi / 24);
    g.shift_radial_mm = 1.5;
    expect_refusal(&g, LDCT_EUNSUPPORTED, "shift");
}
END_TEST

START_TEST(too_short_a_scan_is_refused)
{
    ctpd_gen g = base_gen("FLAT", 40, (k_pi * 0.75) / 39);
    g.views_per_rotation = (int)lround(2 * k_pi / g.dphi);
    expect_refusal(&g, LDCT_EUNSUPPORTED, "short scan needs");
}
END_TEST

/* Writes a consistent series of 6 flat-detector views to a fresh folder
 * (paths) and points pp at them. */
static void write_six_views(char (*paths)[1024], const char **pp)
{
    char dir[64];
    tu_tmpdir(dir, sizeof dir);
    ctpd_gen g = base_gen("FLAT", 6, 2 * k_pi / 6);
    ck_assert_int_eq(ctpd_gen_write(&g, dir, paths), 0);
    for (int i = 0; i < 6; i++)
        pp[i] = paths[i];
}

/* Views of two patients or two studies under one series UID are never
 * reconstructed into one volume; the message names neither Patient ID. */
START_TEST(views_of_two_patients_or_studies_are_refused)
{
    char cmd[1200], err[512], paths[6][1024];
    const char *pp[6];
    write_six_views(paths, pp);
    asm_proj p;
    ck_assert_int_eq(asm_proj_load(pp, 6, &p, err, sizeof err), 0);
    asm_proj_close(&p);
    snprintf(cmd, sizeof cmd, "dcmodify -q -nb -i '(0010,0020)=OTHER-PID-5' '%s'", paths[3]);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(asm_proj_load(pp, 6, &p, err, sizeof err), LDCT_EINPUT);
    ck_assert_msg(strstr(err, "disagree on the Patient ID") && !strstr(err, "OTHER-PID"), "%s",
                  err);
    snprintf(cmd, sizeof cmd, "dcmodify -q -nb -e '(0010,0020)' -m '(0020,000d)=1.2.3.4.5' '%s'",
             paths[3]);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(asm_proj_load(pp, 6, &p, err, sizeof err), LDCT_EINPUT);
    ck_assert_msg(strstr(err, "disagree on the study instance UID"), "%s", err);
}
END_TEST

/* Modality is a series attribute: a view of another modality under the
 * series UID is refused as the image assembler refuses such a slice
 * (check_assemble slice_of_another_modality_fails). */
START_TEST(view_of_another_modality_is_refused)
{
    char cmd[1200], err[512], paths[6][1024];
    const char *pp[6];
    write_six_views(paths, pp);
    snprintf(cmd, sizeof cmd, "dcmodify -q -nb -m '(0008,0060)=MR' '%s'", paths[3]);
    ck_assert_int_eq(system(cmd), 0);
    asm_proj p;
    ck_assert_int_eq(asm_proj_load(pp, 6, &p, err, sizeof err), LDCT_EINPUT);
    ck_assert_msg(strstr(err, "projection views disagree on the modality (instance "), "%s", err);
    ck_assert_msg(strstr(err, paths[3]), "%s", err);
}
END_TEST

START_TEST(views_disagreeing_on_the_detector_are_refused)
{
    char dir[64];
    tu_tmpdir(dir, sizeof dir);
    ctpd_gen g = base_gen("FLAT", 6, 2 * k_pi / 6);
    char paths[8][1024];
    ck_assert_int_eq(ctpd_gen_write(&g, dir, paths), 0);
    /* A seventh view from a detector with another column count. */
    ctpd_gen h = g;
    h.cols = 90;
    h.views = 1;
    char dir2[64];
    tu_tmpdir(dir2, sizeof dir2);
    ck_assert_int_eq(ctpd_gen_write(&h, dir2, paths + 6), 0);
    const char *pp[7];
    for (int i = 0; i < 7; i++)
        pp[i] = paths[i];
    asm_proj p;
    char err[512];
    ck_assert_int_eq(asm_proj_load(pp, 7, &p, err, sizeof err), LDCT_EINPUT);
    printf("refused: %s\n", err);
    ck_assert(strstr(err, "detector size"));
    /* An ordinary CT image among the views. */
    scp_ct_params ct = {.study_uid = g.study_uid,
                        .series_uid = g.series_uid,
                        .sop_uid = "1.2.826.0.1.3680043.10.543.7.9",
                        .rows = 4,
                        .cols = 4,
                        .pixel_spacing = {1, 1},
                        .orientation = {1, 0, 0, 0, 1, 0},
                        .rescale_slope = 1};
    int16_t px[16] = {0};
    ct.pixels = px;
    snprintf(paths[6], sizeof paths[6], "%s/ct.dcm", dir2);
    ck_assert_int_eq(scp_ct_write(&ct, paths[6]), 0);
    ck_assert_int_eq(asm_proj_is_projection(paths[6]), 0);
    ck_assert_int_eq(asm_proj_is_projection(paths[0]), 1);
    ck_assert_int_eq(asm_proj_load(pp, 7, &p, err, sizeof err), LDCT_EINPUT);
    printf("refused: %s\n", err);
    ck_assert(strstr(err, "not DICOM-CT-PD"));
    /* Views whose geometry the reader refuses are still projection data:
     * auto sends them to fdk, which names the element (as an image series
     * they failed on their frames of reference). A NaN there crashed the
     * rebinning. */
    char cmd[600];
    snprintf(cmd, sizeof cmd, "dcmodify -q -nb -m '(7031,1033)=nan\\2.5' '%s'", paths[0]);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(asm_proj_is_projection(paths[0]), 1);
    snprintf(paths[6], sizeof paths[6], "%s", paths[0]);
    ck_assert_int_eq(asm_proj_load(pp, 7, &p, err, sizeof err), LDCT_EINPUT);
    printf("refused: %s\n", err);
    ck_assert(strstr(err, "DetectorCentralElement nan"));
}
END_TEST

int main(void)
{
    scp_global_init();
    Suite *s = suite_create("assemble_proj");
    TCase *tc = tcase_create("ctpd");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, flat_full_scan_puts_the_insert_at_its_patient_position);
    tcase_add_test(tc, cylindrical_full_scan_rotating_backwards_puts_the_insert_in_place);
    tcase_add_test(tc, full_scan_with_overscan_uses_one_rotation);
    tcase_add_test(tc, short_scans_in_either_direction_put_the_insert_in_place);
    tcase_add_test(tc, helical_series_is_refused);
    tcase_add_test(tc, flying_focal_spot_spherical_and_source_shifts_are_refused);
    tcase_add_test(tc, too_short_a_scan_is_refused);
    tcase_add_test(tc, views_disagreeing_on_the_detector_are_refused);
    tcase_add_test(tc, views_of_two_patients_or_studies_are_refused);
    tcase_add_test(tc, view_of_another_modality_is_refused);
    suite_add_tcase(s, tc);
    int rc = tu_run_suite(s);
    scp_global_cleanup();
    return rc;
}
