/* Unit tests for the DICOM-CT-PD projection reader and writer (scp/ctpd.cc):
 * geometry and line integrals round-trip, the Mayo (transposed) orientation,
 * implicit VR files whose private elements have no VR, ordinary CT images
 * recognised as not projection data, and a missing element named. */
#include "common/err.h"
#include "scp/scp.h"
#include "tests/unit/testutil.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ROWS = 4, COLS = 24 };

static scp_ctpd_info geometry(void)
{
    scp_ctpd_info g = {.det_rows = ROWS,
                       .det_cols = COLS,
                       .elem_transverse_mm = 1.2858,
                       .elem_axial_mm = 1.0947,
                       .angle_rad = 2.5,
                       .axial_mm = -12.5,
                       .radial_mm = 595,
                       .src_det_mm = 1085.6,
                       .central_col = 12.625,
                       .central_row = 2.5,
                       .views_per_rotation = 2304};
    snprintf(g.det_shape, sizeof g.det_shape, "CYLINDRICAL");
    snprintf(g.ffs_mode, sizeof g.ffs_mode, "FFSNONE");
    return g;
}

static void write_view(const char *path, float *values)
{
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < COLS; c++)
            values[r * COLS + c] = 0.1f * (float)c + 2.0f * (float)r;
    scp_ctpd_params p = {.patient_id = "PD1",
                         .sop_uid = "1.2.826.0.1.3680043.9.7.20.1",
                         .series_uid = "1.2.826.0.1.3680043.9.7.20",
                         .instance_number = 7,
                         .geo = geometry(),
                         .values = values,
                         .rescale_slope = 0.001,
                         .rescale_intercept = -1};
    char err[256] = "";
    ck_assert_msg(scp_ctpd_write(&p, path, err, sizeof err) == 0, "%s", err);
}

static void check_view(const char *path, const float *expect)
{
    scp_ctpd_info in;
    float got[ROWS * COLS];
    char err[256] = "";
    ck_assert_msg(scp_ctpd_read(path, &in, got, ROWS * COLS, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(in.det_rows, ROWS);
    ck_assert_int_eq(in.det_cols, COLS);
    ck_assert_int_eq(in.transposed, 1);
    ck_assert_int_eq(in.instance_number, 7);
    ck_assert_str_eq(in.series_uid, "1.2.826.0.1.3680043.9.7.20");
    ck_assert_double_eq_tol(in.angle_rad, 2.5, 1e-6);
    ck_assert_double_eq_tol(in.axial_mm, -12.5, 1e-5);
    ck_assert_double_eq_tol(in.radial_mm, 595, 1e-3);
    ck_assert_double_eq_tol(in.src_det_mm, 1085.6, 1e-3);
    ck_assert_double_eq_tol(in.elem_transverse_mm, 1.2858, 1e-6);
    ck_assert_double_eq_tol(in.central_col, 12.625, 1e-6);
    ck_assert_double_eq_tol(in.central_row, 2.5, 1e-6);
    ck_assert_str_eq(in.det_shape, "CYLINDRICAL");
    ck_assert_str_eq(in.ffs_mode, "FFSNONE");
    ck_assert_int_eq(in.views_per_rotation, 2304);
    for (int i = 0; i < ROWS * COLS; i++)
        ck_assert_msg(fabsf(got[i] - expect[i]) <= 0.0005f + 1e-6f, "value %d: %g, expected %g", i,
                      got[i], expect[i]);
}

START_TEST(geometry_and_line_integrals_round_trip)
{
    char dir[64], path[128];
    tu_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/v.dcm", dir);
    float values[ROWS * COLS];
    write_view(path, values);
    check_view(path, values);
}
END_TEST

START_TEST(implicit_vr_private_elements_are_read_from_their_bytes)
{
    char dir[64], path[128], impl[128], cmd[512];
    tu_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/v.dcm", dir);
    snprintf(impl, sizeof impl, "%s/i.dcm", dir);
    float values[ROWS * COLS];
    write_view(path, values);
    snprintf(cmd, sizeof cmd, "dcmconv -q +ti '%s' '%s'", path, impl);
    ck_assert_int_eq(system(cmd), 0);
    check_view(impl, values);
}
END_TEST

START_TEST(ordinary_ct_image_is_not_projection_data)
{
    char dir[64], path[128], err[256] = "";
    tu_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/ct.dcm", dir);
    int16_t px[4] = {0};
    scp_ct_params p = {.rows = 2,
                       .cols = 2,
                       .pixel_spacing = {1, 1},
                       .slice_thickness = 1,
                       .orientation = {1, 0, 0, 0, 1, 0},
                       .rescale_slope = 1,
                       .pixels = px};
    ck_assert_int_eq(scp_ct_write(&p, path), 0);
    scp_ctpd_info in;
    ck_assert_int_eq(scp_ctpd_read(path, &in, NULL, 0, err, sizeof err), LDCT_ENOTFOUND);
}
END_TEST

START_TEST(missing_geometry_is_named)
{
    char dir[64], path[128], cmd[512], err[256] = "";
    tu_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/v.dcm", dir);
    float values[ROWS * COLS];
    write_view(path, values);
    snprintf(cmd, sizeof cmd, "dcmodify -q -nb -e '(7031,1031)' '%s'", path);
    ck_assert_int_eq(system(cmd), 0);
    scp_ctpd_info in;
    ck_assert_int_eq(scp_ctpd_read(path, &in, NULL, 0, err, sizeof err), LDCT_EINPUT);
    ck_assert_msg(strstr(err, "(7031,1031) ConstantRadialDistance") != NULL, "%s", err);
}
END_TEST

/* A DetectorCentralElement that is NaN crashed the rebinning ((int)NaN as
 * an index), one far off the detector gave an all-air volume, and a NaN
 * angle would go into the geometry: each is refused with a reason. */
START_TEST(central_element_and_positions_must_be_numbers_on_the_detector)
{
    static const struct {
        const char *tag, *value, *needle;
    } cases[] = {
        {"(7031,1033)", "nan\\2.5", "DetectorCentralElement nan"},
        {"(7031,1033)", "12.625\\inf", "is not on the detector"},
        {"(7031,1033)", "5000\\2.5", "is not on the detector of 24 columns x 4 rows"},
        {"(7031,1033)", "12.625\\-3", "is not on the detector"},
        {"(7031,1001)", "nan", "not a number"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char dir[64], path[128], cmd[512], err[256] = "";
        tu_tmpdir(dir, sizeof dir);
        snprintf(path, sizeof path, "%s/v.dcm", dir);
        float values[ROWS * COLS];
        write_view(path, values);
        snprintf(cmd, sizeof cmd, "dcmodify -q -nb -m '%s=%s' '%s'", cases[k].tag, cases[k].value,
                 path);
        ck_assert_int_eq(system(cmd), 0);
        scp_ctpd_info in;
        ck_assert_msg(scp_ctpd_read(path, &in, NULL, 0, err, sizeof err) == LDCT_EINPUT,
                      "%s=%s accepted", cases[k].tag, cases[k].value);
        ck_assert_msg(strstr(err, cases[k].needle) != NULL, "%s=%s: %s", cases[k].tag,
                      cases[k].value, err);
    }
}
END_TEST

START_TEST(wrong_buffer_size_is_refused)
{
    char dir[64], path[128], err[256] = "";
    tu_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/v.dcm", dir);
    float values[ROWS * COLS];
    write_view(path, values);
    scp_ctpd_info in;
    ck_assert_int_eq(scp_ctpd_read(path, &in, values, ROWS * COLS - 1, err, sizeof err),
                     LDCT_EINPUT);
}
END_TEST

int main(void)
{
    scp_global_init();
    Suite *s = suite_create("ctpd");
    TCase *tc = tcase_create("ctpd");
    tcase_add_test(tc, geometry_and_line_integrals_round_trip);
    tcase_add_test(tc, implicit_vr_private_elements_are_read_from_their_bytes);
    tcase_add_test(tc, ordinary_ct_image_is_not_projection_data);
    tcase_add_test(tc, missing_geometry_is_named);
    tcase_add_test(tc, wrong_buffer_size_is_refused);
    tcase_add_test(tc, central_element_and_positions_must_be_numbers_on_the_detector);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
