/* Unit tests for pipeline/assemble: sorting along the normal (shuffled,
 * negative and tilted normals), HU with per-slice rescale, spacing, single
 * slices, every refusal with a message naming the slice (mixed sizes,
 * orientation, frame of reference, duplicates, gaps, uneven spacing, missing
 * position, non-images, colour, truncated files), Enhanced CT mixed with
 * classic slices, compressed input giving the same HU, and 4D series
 * (time points by TriggerTime or AcquisitionTime, incomplete ones refused). Fixtures are
 * written with scp_ct_write, dump2dcm and dcmodify into a fresh directory. */
#include "common/err.h"
#include "common/log.h"
#include "pipeline/assemble.h"
#include "scp/scp.h"
#include "tests/unit/testutil.h"

#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#define ROWS 6
#define COLS 8
#define MAXF 16
#define STUDY "1.2.826.0.1.3680043.9.7.8"
#define SERIES "1.2.826.0.1.3680043.9.7.8.1"
#define FOR_UID "1.2.826.0.1.3680043.9.7.8.2"
#define JPEG_LL "1.2.840.10008.1.2.4.70"
#define JPEG_LS "1.2.840.10008.1.2.4.80"
#define RLE "1.2.840.10008.1.2.5"

static char dir[64];
static char paths[MAXF][128];
static const char *pv[MAXF];
static int nfiles;

static void setup(void)
{
    log_level = LOG_LVL_ERR;
    tu_tmpdir(dir, sizeof dir);
    nfiles = 0;
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* Stored value of pixel i of the slice with instance number inst: each
 * slice is recognisable in the volume. */
static int16_t stored(int inst, int i)
{
    return (int16_t)(inst * 100 + i);
}

/* An axial slice at z (mm): rows 0.7 mm apart, columns 0.8 mm apart. */
static scp_ct_params slice(int inst, double z)
{
    scp_ct_params p = {.patient_name = "TEST^ASSEMBLE",
                       .patient_id = "P1",
                       .study_uid = STUDY,
                       .series_uid = SERIES,
                       .frame_of_reference_uid = FOR_UID,
                       .series_number = 2,
                       .instance_number = inst,
                       .rows = ROWS,
                       .cols = COLS,
                       .pixel_spacing = {0.7, 0.8},
                       .slice_thickness = 1.25,
                       .position = {-10, -20, z},
                       .orientation = {1, 0, 0, 0, 1, 0},
                       .rescale_slope = 1,
                       .rescale_intercept = -1024,
                       .kvp = 120};
    return p;
}

/* Writes the slice as the next input file (in subdirectory sub when not
 * NULL) and returns its path. */
static const char *write_in(scp_ct_params p, const char *sub)
{
    static int16_t px[ROWS * COLS * 4];
    char sop[80], d[128];
    for (int i = 0; i < p.rows * p.cols; i++)
        px[i] = stored(p.instance_number, i);
    p.pixels = px;
    snprintf(sop, sizeof sop, SERIES ".%d", nfiles + 1);
    p.sop_uid = sop;
    snprintf(d, sizeof d, "%s/%s", dir, sub ? sub : ".");
    mkdir(d, 0700);
    snprintf(paths[nfiles], sizeof paths[0], "%s/f%02d.dcm", d, nfiles + 1);
    ck_assert_int_eq(scp_ct_write(&p, paths[nfiles]), 0);
    pv[nfiles] = paths[nfiles];
    return paths[nfiles++];
}

static const char *write_slice(scp_ct_params p)
{
    return write_in(p, NULL);
}

/* n axial slices 1.25 mm apart: file k has instance number 11 + k and lies
 * at position index pos[k]. */
static void write_axial(int n, const int *pos)
{
    for (int k = 0; k < n; k++)
        write_slice(slice(11 + k, pos[k] * 1.25));
}

/* Edits written file i in place with dcmodify's ARGS (no backup). */
static void dcmodify(int i, const char *args)
{
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "dcmodify -q -nb %s '%s'", args, paths[i]);
    ck_assert_int_eq(system(cmd), 0);
}

static int load(asm_series *s, char *err, size_t len)
{
    memset(s, 0xA5, sizeof *s); /* the loader must overwrite everything */
    return asm_series_load(pv, nfiles, s, err, len);
}

static void assert_zeroed(const asm_series *s)
{
    static const asm_series zero;
    ck_assert_int_eq(memcmp(s, &zero, sizeof zero), 0);
}

/* Loads expecting failure rc with a message containing every needle. */
static void expect_failure(int rc, const char *n1, const char *n2)
{
    asm_series s;
    char err[512] = "";
    int got = load(&s, err, sizeof err);
    ck_assert_msg(got == rc, "rc %d (%s), expected %d", got, err, rc);
    ck_assert_msg(strstr(err, n1) != NULL, "message '%s' lacks '%s'", err, n1);
    ck_assert_msg(!n2 || strstr(err, n2) != NULL, "message '%s' lacks '%s'", err, n2);
    assert_zeroed(&s);
}

static void load_ok(asm_series *s)
{
    char err[512] = "";
    int rc = load(s, err, sizeof err);
    ck_assert_msg(rc == 0, "load: %d %s", rc, err);
}

static const float *plane(const asm_series *s, int z)
{
    return s->vol.data + (size_t)z * s->vol.nx * s->vol.ny;
}

/* Plane z holds the slice with instance number inst (slope 1, -1024). */
static void assert_plane_is(const asm_series *s, int z, int inst)
{
    for (int i = 0; i < ROWS * COLS; i++)
        ck_assert_float_eq(plane(s, z)[i], stored(inst, i) - 1024.0f);
}

/* ---- sorting and geometry ----------------------------------------------- */

START_TEST(sorts_shuffled_slices_by_position_along_the_normal)
{
    static const int pos[] = {3, 0, 4, 1, 2};
    write_axial(5, pos);
    asm_series s;
    load_ok(&s);
    ck_assert_int_eq(s.vol.nx, COLS);
    ck_assert_int_eq(s.vol.ny, ROWS);
    ck_assert_int_eq(s.vol.nz, 5);
    ck_assert_int_eq(s.vol.nt, 1);
    ck_assert_int_eq(s.nsrc, 5);
    for (int k = 0; k < 5; k++) {
        ck_assert_str_eq(s.src[k].path, paths[k]);
        ck_assert_int_eq(s.src[k].instance_number, 11 + k);
        ck_assert_int_eq(s.src[k].frames, 1);
        ck_assert_int_eq(s.src[k].z[0], pos[k]);
        assert_plane_is(&s, pos[k], 11 + k);
    }
    ck_assert_double_eq_tol(s.normal[2], 1.0, 1e-12);
    ck_assert_str_eq(s.series_uid, SERIES);
    ck_assert_str_eq(s.study_uid, STUDY);
    ck_assert_str_eq(s.frame_of_reference_uid, FOR_UID);
    ck_assert_str_eq(s.modality, "CT");
    ck_assert_str_eq(s.src[0].sop_class_uid, "1.2.840.10008.5.1.4.1.1.2");
    ck_assert_str_eq(s.src[0].sop_instance_uid, SERIES ".1");
    asm_series_close(&s);
    assert_zeroed(&s);
}
END_TEST

START_TEST(spacing_is_columns_rows_then_slice_distance)
{
    static const int pos[] = {0, 2, 1};
    write_axial(3, pos);
    asm_series s;
    load_ok(&s);
    ck_assert_double_eq_tol(s.vol.spacing[0], 0.8, 1e-9);
    ck_assert_double_eq_tol(s.vol.spacing[1], 0.7, 1e-9);
    ck_assert_double_eq_tol(s.vol.spacing[2], 1.25, 1e-9);
    ck_assert_double_eq_tol(s.slice_thickness, 1.25, 1e-9);
    asm_series_close(&s);
}
END_TEST

START_TEST(sorts_along_a_negative_normal)
{
    /* Columns run towards -y: normal = x cross -y = -z, so the volume
     * starts at the highest z. */
    for (int k = 0; k < 4; k++) {
        scp_ct_params p = slice(11 + k, (k * 3 % 4) * 2.0);
        p.orientation[4] = -1;
        write_slice(p);
    }
    asm_series s;
    load_ok(&s);
    ck_assert_double_eq_tol(s.normal[2], -1.0, 1e-12);
    ck_assert_double_eq_tol(s.vol.spacing[2], 2.0, 1e-9);
    for (int k = 0; k < 4; k++) {
        int z = 3 - k * 3 % 4;
        ck_assert_int_eq(s.src[k].z[0], z);
        assert_plane_is(&s, z, 11 + k);
    }
    asm_series_close(&s);
}
END_TEST

START_TEST(sorts_along_a_tilted_normal)
{
    /* Gantry tilt of 20 degrees: the table moves 2 mm along z per slice,
     * the planes are 2 cos(20) mm apart along the normal (0, -sin, cos). */
    const double t = 20 * M_PI / 180, c = cos(t), sn = sin(t);
    static const int pos[] = {2, 4, 0, 3, 1};
    for (int k = 0; k < 5; k++) {
        scp_ct_params p = slice(11 + k, pos[k] * 2.0);
        p.orientation[4] = c;
        p.orientation[5] = sn;
        write_slice(p);
    }
    asm_series s;
    load_ok(&s);
    ck_assert_double_eq_tol(s.normal[0], 0, 1e-5);
    ck_assert_double_eq_tol(s.normal[1], -sn, 1e-5);
    ck_assert_double_eq_tol(s.normal[2], c, 1e-5);
    ck_assert_double_eq_tol(s.vol.spacing[2], 2 * c, 1e-5);
    for (int k = 0; k < 5; k++)
        ck_assert_int_eq(s.src[k].z[0], pos[k]);
    asm_series_close(&s);
}
END_TEST

START_TEST(hu_applies_each_slices_own_rescale)
{
    static const double slope[] = {0.5, 2, 1}, icpt[] = {-1024, -1000, -3.5};
    for (int k = 0; k < 3; k++) {
        scp_ct_params p = slice(11 + k, k * 1.25);
        p.rescale_slope = slope[k];
        p.rescale_intercept = icpt[k];
        write_slice(p);
    }
    asm_series s;
    load_ok(&s);
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < ROWS * COLS; i++)
            ck_assert_float_eq(plane(&s, k)[i], (float)(stored(11 + k, i) * slope[k] + icpt[k]));
    asm_series_close(&s);
}
END_TEST

START_TEST(single_slice_is_a_one_slice_volume_spaced_by_its_thickness)
{
    scp_ct_params p = slice(7, 12.5);
    p.slice_thickness = 3;
    write_slice(p);
    asm_series s;
    load_ok(&s);
    ck_assert_int_eq(s.vol.nz, 1);
    ck_assert_int_eq(s.src[0].z[0], 0);
    ck_assert_double_eq_tol(s.vol.spacing[2], 3.0, 1e-9);
    ck_assert_double_eq_tol(s.slice_thickness, 3.0, 1e-9);
    assert_plane_is(&s, 0, 7);
    asm_series_close(&s);
}
END_TEST

START_TEST(single_slice_without_thickness_is_spaced_1mm)
{
    scp_ct_params p = slice(7, 12.5);
    p.slice_thickness = 0; /* written as 0, which means no usable thickness */
    write_slice(p);
    asm_series s;
    load_ok(&s);
    ck_assert_double_eq(s.vol.spacing[2], 1.0);
    ck_assert(isnan(s.slice_thickness));
    asm_series_close(&s);
}
END_TEST

/* ---- refusals ----------------------------------------------------------- */

START_TEST(mixed_columns_fail_naming_the_slice_and_both_sizes)
{
    for (int k = 0; k < 5; k++) {
        scp_ct_params p = slice(11 + k, k * 1.25);
        p.cols = k == 2 ? COLS - 2 : COLS;
        write_slice(p);
    }
    expect_failure(LDCT_EINPUT, "slice 13 has 6 columns, the others 8", NULL);
}
END_TEST

START_TEST(odd_first_slice_is_the_one_named)
{
    for (int k = 0; k < 4; k++) {
        scp_ct_params p = slice(11 + k, k * 1.25);
        p.rows = k == 0 ? ROWS + 2 : ROWS;
        write_slice(p);
    }
    expect_failure(LDCT_EINPUT, "slice 11 has 8 rows, the others 6", NULL);
}
END_TEST

START_TEST(different_orientation_fails)
{
    for (int k = 0; k < 4; k++) {
        scp_ct_params p = slice(11 + k, k * 1.25);
        if (k == 3)
            p.orientation[4] = 0.999, p.orientation[5] = 0.0447;
        write_slice(p);
    }
    expect_failure(LDCT_EINPUT, "slice 14 has image orientation 1\\0\\0\\0\\0.999\\0.0447",
                   "the others 1\\0\\0\\0\\1\\0");
}
END_TEST

START_TEST(orientation_within_tolerance_is_accepted)
{
    for (int k = 0; k < 3; k++) {
        scp_ct_params p = slice(11 + k, k * 1.25);
        p.orientation[4] = k == 1 ? 0.99995 : 1;
        p.pixel_spacing[0] = k == 2 ? 0.70035 : 0.7; /* relative 5e-4 */
        write_slice(p);
    }
    asm_series s;
    load_ok(&s);
    asm_series_close(&s);
}
END_TEST

START_TEST(different_pixel_spacing_fails)
{
    for (int k = 0; k < 3; k++) {
        scp_ct_params p = slice(11 + k, k * 1.25);
        p.pixel_spacing[1] = k == 1 ? 0.802 : 0.8; /* relative 2.5e-3 */
        write_slice(p);
    }
    expect_failure(LDCT_EINPUT, "slice 12 has pixel spacing 0.7\\0.802 mm", "the others 0.7\\0.8");
}
END_TEST

START_TEST(different_frame_of_reference_fails)
{
    for (int k = 0; k < 3; k++) {
        scp_ct_params p = slice(11 + k, k * 1.25);
        p.frame_of_reference_uid = k == 1 ? FOR_UID ".9" : FOR_UID;
        write_slice(p);
    }
    expect_failure(LDCT_EINPUT, "slice 12 has frame of reference UID " FOR_UID ".9",
                   "the others " FOR_UID);
}
END_TEST

START_TEST(slice_of_another_series_fails)
{
    for (int k = 0; k < 3; k++) {
        scp_ct_params p = slice(11 + k, k * 1.25);
        p.series_uid = k == 2 ? SERIES ".9" : SERIES;
        write_slice(p);
    }
    expect_failure(LDCT_EINPUT, "slice 13 has series UID " SERIES ".9", NULL);
}
END_TEST

/* A Series Instance UID belongs to one study: a series whose instances
 * name two studies (a PACS merge gone wrong) would give a derived series
 * split over two studies under one UID, which a PACS files wrongly or
 * refuses. Slice by slice (nlm2d) too. */
START_TEST(slice_of_another_study_fails)
{
    for (int k = 0; k < 3; k++) {
        scp_ct_params p = slice(11 + k, k * 1.25);
        p.study_uid = k == 2 ? STUDY ".9" : STUDY;
        write_slice(p);
    }
    expect_failure(LDCT_EINPUT, "slice 13 has study UID " STUDY ".9", "the others " STUDY);
    asm_series s;
    char err[512] = "";
    ck_assert_int_eq(asm_series_load_slices(pv, nfiles, &s, err, sizeof err), LDCT_EINPUT);
    ck_assert_msg(strstr(err, "study UID") != NULL, "%s", err);
}
END_TEST

/* Two patients under one series UID (a UID collision, a wrong merge) never
 * become one derived series, and the message names neither Patient ID. */
START_TEST(slice_of_another_patient_fails)
{
    for (int k = 0; k < 3; k++) {
        scp_ct_params p = slice(11 + k, k * 1.25);
        p.patient_id = k == 1 ? "OTHER-PID-77" : "P1";
        write_slice(p);
    }
    const char *want = "slice 12 has another Patient ID than the others (values not logged)";
    expect_failure(LDCT_EINPUT, want, NULL);
    asm_series s;
    char err[512] = "";
    ck_assert_int_eq(asm_series_load_slices(pv, nfiles, &s, err, sizeof err), LDCT_EINPUT);
    ck_assert_msg(strstr(err, want) != NULL, "%s", err);
    ck_assert_msg(!strstr(err, "OTHER-PID-77") && !strstr(err, "P1"), "%s", err);
}
END_TEST

START_TEST(slice_of_another_modality_fails)
{
    static const int pos[] = {0, 1, 2};
    write_axial(3, pos);
    dcmodify(2, "-m '(0008,0060)=MR'");
    expect_failure(LDCT_EINPUT, "slice 13 has modality MR, the others CT", NULL);
}
END_TEST

START_TEST(duplicate_position_fails)
{
    static const int pos[] = {0, 1, 2, 2, 3};
    write_axial(5, pos);
    expect_failure(LDCT_EINPUT,
                   "slices 13 and 14 are both at 2.50 mm (duplicate or second acquisition)", NULL);
}
END_TEST

START_TEST(duplicate_instance_numbers_are_named_by_file)
{
    write_slice(slice(11, 0));
    write_slice(slice(12, 1.25));
    write_slice(slice(12, 1.25));
    expect_failure(LDCT_EINPUT, "file f02.dcm and file f03.dcm are both at 1.25 mm", NULL);
}
END_TEST

START_TEST(missing_slice_fails_as_a_gap)
{
    static const int pos[] = {4, 0, 1, 5, 2, 6};
    write_axial(6, pos);
    expect_failure(LDCT_EINPUT,
                   "gap of 2.50 mm between slices 15 and 11, the others are 1.25 mm apart "
                   "(missing slice?)",
                   NULL);
}
END_TEST

START_TEST(uneven_spacing_fails)
{
    static const double z[] = {0, 1.25, 2.5, 3.9, 5.15, 6.4};
    for (int k = 0; k < 6; k++)
        write_slice(slice(11 + k, z[k]));
    expect_failure(LDCT_EINPUT, "slices 13 and 14 are 1.40 mm apart, the others 1.25 mm",
                   "more than 10%");
}
END_TEST

START_TEST(missing_position_fails)
{
    static const int pos[] = {0, 1, 2};
    write_axial(3, pos);
    dcmodify(1, "-ea '(0020,0032)'");
    expect_failure(LDCT_EINPUT, "slice 12 has no usable image position", NULL);
}
END_TEST

/* A stack for a slice-by-slice filter (nlm2d) takes what no volume can be:
 * a gap, uneven and repeated positions, a missing position (then every
 * slice goes by instance number), and keeps each slice's pixels. */
static void load_slices_ok(asm_series *s)
{
    char err[512] = "";
    memset(s, 0xA5, sizeof *s);
    int rc = asm_series_load_slices(pv, nfiles, s, err, sizeof err);
    ck_assert_msg(rc == 0, "load slices: %d %s", rc, err);
}

START_TEST(a_stack_of_slices_takes_what_a_volume_refuses)
{
    static const double z[] = {0, 1.25, 3.75, 5.15, 5.15};
    for (int k = 0; k < 5; k++)
        write_slice(slice(11 + k, z[4 - k])); /* files in reverse order of position */
    asm_series s;
    load_slices_ok(&s);
    ck_assert_int_eq(s.vol.nz, 5);
    ck_assert_int_eq(s.vol.nt, 1);
    assert_plane_is(&s, 0, 15); /* position 0 is the last file */
    assert_plane_is(&s, 2, 13);
    asm_series_close(&s);
    dcmodify(1, "-ea '(0020,0032)'");
    load_slices_ok(&s); /* one slice without a position: by instance number */
    for (int k = 0; k < 5; k++)
        assert_plane_is(&s, k, 11 + k);
    asm_series_close(&s);
    expect_failure(LDCT_EINPUT, "slice 12 has no usable image position", NULL); /* a volume */
}
END_TEST

/* What `auto` may retry slice by slice: a refusal for the places only. */
START_TEST(a_refusal_says_whether_it_was_about_the_places)
{
    static const int pos[] = {0, 1, 3};
    write_axial(3, pos); /* a gap */
    asm_series s;
    char err[512] = "";
    int geometry = -1;
    ck_assert_int_eq(asm_series_load_checked(pv, nfiles, &s, &geometry, err, sizeof err),
                     LDCT_EINPUT);
    ck_assert_int_eq(geometry, 1);
    scp_ct_params p = slice(14, 5 * 1.25);
    p.cols = COLS - 2;
    write_slice(p); /* and now a size no stack takes either */
    ck_assert_int_eq(asm_series_load_checked(pv, nfiles, &s, &geometry, err, sizeof err),
                     LDCT_EINPUT);
    ck_assert_int_eq(geometry, 0);
}
END_TEST

START_TEST(a_stack_of_slices_still_needs_one_image_size)
{
    write_slice(slice(11, 0));
    scp_ct_params p = slice(12, 1.25);
    p.cols = COLS - 2;
    write_slice(p);
    asm_series s;
    char err[512] = "";
    ck_assert_int_eq(asm_series_load_slices(pv, nfiles, &s, err, sizeof err), LDCT_EINPUT);
    ck_assert_msg(strstr(err, "columns") != NULL, "%s", err);
}
END_TEST

/* Writes a dump2dcm dump as the next input file. */
static void write_dump(const char *text)
{
    char dump[128], cmd[512];
    tu_write(dir, "x.dump", text, dump, sizeof dump);
    snprintf(paths[nfiles], sizeof paths[0], "%s/f%02d.dcm", dir, nfiles + 1);
    snprintf(cmd, sizeof cmd, "dump2dcm -q +E %s %s", dump, paths[nfiles]);
    ck_assert_int_eq(system(cmd), 0);
    pv[nfiles] = paths[nfiles];
    nfiles++;
}

START_TEST(non_image_instance_fails_naming_its_sop_class)
{
    write_slice(slice(11, 0));
    write_dump("(0002,0010) UI =LittleEndianExplicit\n"
               "(0008,0016) UI [1.2.840.10008.5.1.4.1.1.88.11]\n"
               "(0008,0018) UI [1.2.826.0.1.3680043.9.7.8.77]\n(0008,0060) CS [SR]\n"
               "(0020,000d) UI [" STUDY "]\n(0020,000e) UI [" SERIES "]\n");
    write_slice(slice(13, 1.25));
    expect_failure(LDCT_EINPUT,
                   "instance 1.2.826.0.1.3680043.9.7.8.77 is not an image (SOP class "
                   "1.2.840.10008.5.1.4.1.1.88.11)",
                   NULL);
}
END_TEST

START_TEST(file_that_is_not_dicom_fails_cleanly)
{
    write_slice(slice(11, 0));
    tu_write(dir, "notes.txt", "this is not DICOM\n", paths[nfiles], sizeof paths[0]);
    pv[nfiles++] = paths[1];
    expect_failure(LDCT_EINPUT, "notes.txt", "not readable DICOM");
    snprintf(paths[1], sizeof paths[1], "%s/gone.dcm", dir);
    expect_failure(-ENOENT, "gone.dcm", NULL);
}
END_TEST

START_TEST(truncated_pixel_data_fails_naming_the_slice)
{
    static const int pos[] = {0, 1, 2};
    write_axial(3, pos);
    struct stat st;
    ck_assert_int_eq(stat(paths[2], &st), 0);
    ck_assert_int_eq(truncate(paths[2], st.st_size - 20), 0);
    asm_series s;
    char err[512] = "";
    ck_assert_int_lt(load(&s, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "f03.dcm") || strstr(err, "slice 13"), "message: %s", err);
    assert_zeroed(&s);
}
END_TEST

START_TEST(colour_image_is_unsupported)
{
    write_dump("(0002,0010) UI =LittleEndianExplicit\n"
               "(0008,0016) UI [1.2.840.10008.5.1.4.1.1.7]\n"
               "(0008,0018) UI [1.2.826.0.1.3680043.9.7.8.78]\n(0008,0060) CS [OT]\n"
               "(0020,000d) UI [" STUDY "]\n(0020,000e) UI [" SERIES "]\n"
               "(0020,0013) IS [4]\n"
               "(0028,0002) US 3\n(0028,0004) CS [RGB]\n(0028,0006) US 0\n"
               "(0028,0010) US 2\n(0028,0011) US 2\n(0028,0100) US 8\n(0028,0101) US 8\n"
               "(0028,0102) US 7\n(0028,0103) US 0\n"
               "(7fe0,0010) OB 00\\01\\02\\03\\04\\05\\06\\07\\08\\09\\0a\\0b\n");
    expect_failure(LDCT_EUNSUPPORTED, "slice 4 is a colour image", "RGB");
}
END_TEST

/* What rules that process skip: not an image, colour, a localizer (as
 * one value of Image Type, any case, trailing space of a padded value). */
START_TEST(not_processable_names_non_images_colour_and_localizers)
{
    scp_slice_info s = {.rows = 512, .cols = 512, .samples_per_pixel = 1};
    char why[160];
    strcpy(s.photometric, "MONOCHROME2");
    strcpy(s.image_type, "ORIGINAL\\PRIMARY\\AXIAL");
    ck_assert_ptr_null(asm_not_processable(&s, why, sizeof why));
    strcpy(s.image_type, "ORIGINAL\\PRIMARY\\NOT_A_LOCALIZER");
    ck_assert_ptr_null(asm_not_processable(&s, why, sizeof why));
    strcpy(s.image_type, "ORIGINAL\\PRIMARY\\localizer ");
    ck_assert_str_eq(asm_not_processable(&s, why, sizeof why),
                     "a localizer (image type ORIGINAL\\PRIMARY\\localizer )");
    strcpy(s.image_type, "DERIVED\\SECONDARY\\OTHER");
    strcpy(s.photometric, "RGB");
    s.samples_per_pixel = 3;
    ck_assert_str_eq(asm_not_processable(&s, why, sizeof why),
                     "colour images (photometric interpretation 'RGB')");
    s.rows = 0;
    strcpy(s.sop_class_uid, "1.2.840.10008.5.1.4.1.1.88.67");
    ck_assert_str_eq(asm_not_processable(&s, why, sizeof why),
                     "not an image (SOP class 1.2.840.10008.5.1.4.1.1.88.67)");
}
END_TEST

START_TEST(no_files_is_einput_and_close_accepts_zeroed_structs)
{
    asm_series s;
    char err[128] = "";
    memset(&s, 0x5A, sizeof s);
    ck_assert_int_eq(asm_series_load(pv, 0, &s, err, sizeof err), LDCT_EINPUT);
    ck_assert(err[0]);
    assert_zeroed(&s);
    asm_series_close(&s);
    asm_series_close(&s);
    asm_series_close(NULL);
    ck_assert_int_eq(asm_series_load(pv, 1, NULL, err, sizeof err), -EINVAL);
}
END_TEST

/* ---- Enhanced CT --------------------------------------------------------- */

#define EF 3

static int16_t enh_stored(int f, int i)
{
    return (int16_t)(f * 1000 + i * 3 - 50);
}

static void seq_open(FILE *f, const char *tag)
{
    fprintf(f, "(%s) SQ (Sequence)\n(fffe,e000) na (Item)\n", tag);
}

static void seq_close(FILE *f)
{
    fputs("(fffe,e00d) na (ItemDelimitationItem)\n(fffe,e0dd) na (SequenceDelimitationItem)\n", f);
}

static void enh_header(FILE *f, int frames)
{
    fprintf(f, "(0028,0008) IS [%d]\n", frames);
    fputs("(0002,0010) UI =LittleEndianExplicit\n"
          "(0008,0008) CS [ORIGINAL\\PRIMARY\\VOLUME\\NONE]\n"
          "(0008,0016) UI =EnhancedCTImageStorage\n"
          "(0008,0018) UI [1.2.826.0.1.3680043.9.7.8.50]\n(0008,0060) CS [CT]\n"
          "(0010,0020) LO [P1]\n(0020,000d) UI [" STUDY "]\n(0020,000e) UI [" SERIES "]\n"
          "(0020,0013) IS [50]\n(0020,0052) UI [" FOR_UID "]\n"
          "(0028,0002) US 1\n(0028,0004) CS [MONOCHROME2]\n"
          "(0028,0010) US 6\n(0028,0011) US 8\n(0028,0100) US 16\n(0028,0101) US 16\n"
          "(0028,0102) US 15\n(0028,0103) US 1\n",
          f);
    seq_open(f, "5200,9229");
    seq_open(f, "0028,9110");
    fputs("(0028,0030) DS [0.7\\0.8]\n(0018,0050) DS [1.25]\n", f);
    seq_close(f);
    seq_open(f, "0020,9116");
    fputs("(0020,0037) DS [1\\0\\0\\0\\1\\0]\n", f);
    seq_close(f);
    seq_open(f, "0028,9145");
    fputs("(0028,1052) DS [-1024]\n(0028,1053) DS [1]\n(0028,1054) LO [HU]\n", f);
    seq_close(f);
    seq_close(f);
}

/* Writes a 3-frame Enhanced CT whose frames lie at z = 2.5, 1.25 and 3.75
 * (file order), frame 3 with its own rescale (slope 2, intercept -1000). */
static void write_enhanced(void)
{
    static const double z[EF] = {2.5, 1.25, 3.75};
    char raw[128], dump[128], cmd[512];
    snprintf(raw, sizeof raw, "%s/px.raw", dir);
    snprintf(dump, sizeof dump, "%s/enh.dump", dir);
    FILE *f = fopen(raw, "wb");
    for (int fr = 0; fr < EF; fr++)
        for (int i = 0; i < ROWS * COLS; i++) {
            int16_t v = enh_stored(fr, i);
            fwrite(&v, 2, 1, f); /* little-endian host */
        }
    fclose(f);
    f = fopen(dump, "w");
    enh_header(f, EF);
    fputs("(5200,9230) SQ (Sequence)\n", f);
    for (int fr = 0; fr < EF; fr++) {
        fputs("(fffe,e000) na (Item)\n", f);
        seq_open(f, "0020,9113");
        fprintf(f, "(0020,0032) DS [-10\\-20\\%g]\n", z[fr]);
        seq_close(f);
        if (fr == 2) {
            seq_open(f, "0028,9145");
            fputs("(0028,1052) DS [-1000]\n(0028,1053) DS [2]\n", f);
            seq_close(f);
        }
        fputs("(fffe,e00d) na (ItemDelimitationItem)\n", f);
    }
    fputs("(fffe,e0dd) na (SequenceDelimitationItem)\n", f);
    fprintf(f, "(7fe0,0010) OW =%s\n", raw);
    fclose(f);
    snprintf(paths[nfiles], sizeof paths[0], "%s/f%02d.dcm", dir, nfiles + 1);
    snprintf(cmd, sizeof cmd, "dump2dcm -q +E %s %s", dump, paths[nfiles]);
    ck_assert_int_eq(system(cmd), 0);
    pv[nfiles] = paths[nfiles];
    nfiles++;
}

START_TEST(enhanced_ct_frames_sort_together_with_classic_slices)
{
    write_slice(slice(60, 5.0));
    write_enhanced();
    write_slice(slice(61, 0.0));
    asm_series s;
    load_ok(&s);
    ck_assert_int_eq(s.vol.nz, 5);
    ck_assert_int_eq(s.nsrc, 3);
    ck_assert_int_eq(s.src[1].frames, EF);
    ck_assert_int_eq(s.src[0].z[0], 4);
    ck_assert_int_eq(s.src[2].z[0], 0);
    static const int ez[EF] = {2, 1, 3};
    static const double slope[EF] = {1, 1, 2}, icpt[EF] = {-1024, -1024, -1000};
    for (int fr = 0; fr < EF; fr++) {
        ck_assert_int_eq(s.src[1].z[fr], ez[fr]);
        for (int i = 0; i < ROWS * COLS; i++)
            ck_assert_float_eq(plane(&s, ez[fr])[i],
                               (float)(enh_stored(fr, i) * slope[fr] + icpt[fr]));
    }
    assert_plane_is(&s, 0, 61);
    assert_plane_is(&s, 4, 60);
    ck_assert_double_eq_tol(s.vol.spacing[2], 1.25, 1e-9);
    asm_series_close(&s);
}
END_TEST

START_TEST(enhanced_ct_frame_names_appear_in_messages)
{
    write_enhanced();
    write_slice(slice(61, 3.75)); /* same position as frame 3 */
    write_slice(slice(62, 0.0));
    expect_failure(LDCT_EINPUT, "frame 3 of instance 50 and slice 61 are both at 3.75 mm", NULL);
}
END_TEST

/* ---- compressed input ---------------------------------------------------- */

static const char *COMPRESSED[] = {JPEG_LS, RLE, JPEG_LL};

START_TEST(compressed_input_loads_identical_hu)
{
    static const int pos[] = {2, 0, 3, 1};
    for (int pass = 0; pass < 2; pass++)
        for (int k = 0; k < 4; k++) {
            scp_ct_params p = slice(11 + k, pos[k] * 1.25);
            p.rescale_slope = 0.5 + k; /* per slice, so the rescale per file is exercised */
            p.transfer_syntax_uid = pass ? COMPRESSED[_i] : NULL;
            write_in(p, pass ? "c" : "u");
        }
    asm_series u, c;
    char err[512] = "";
    ck_assert_msg(asm_series_load(pv, 4, &u, err, sizeof err) == 0, "plain: %s", err);
    ck_assert_msg(asm_series_load(pv + 4, 4, &c, err, sizeof err) == 0, "compressed: %s", err);
    ck_assert(gpu_volume_same_shape(&u.vol, &c.vol));
    ck_assert_int_eq(memcmp(u.vol.data, c.vol.data, gpu_volume_count(&u.vol) * sizeof(float)), 0);
    for (int k = 0; k < 4; k++)
        ck_assert_int_eq(c.src[k].z[0], pos[k]);
    ck_assert_float_eq(plane(&c, 0)[5], stored(12, 5) * 1.5f - 1024);
    asm_series_close(&u);
    asm_series_close(&c);
}
END_TEST

/* ---- 4D: repeated positions at several time points ----------------------- */

/* Slice at position index z, time point t (instance 100 + 10 t + z), with
 * TriggerTime t * 40 ms or AcquisitionTime 10:00:00 + 5 t + 0.1 z s. */
static void write_4d(int z, int t, int by_acquisition)
{
    char trig[16], acq[32];
    scp_ct_params p = slice(100 + 10 * t + z, z * 1.25);
    snprintf(trig, sizeof trig, "%d", t * 40);
    snprintf(acq, sizeof acq, "1000%02d.%06d", 5 * t, z * 100000);
    p.trigger_time = by_acquisition ? NULL : trig;
    p.acquisition_time = by_acquisition ? acq : NULL;
    write_slice(p);
}

static void assert_4d(const asm_series *s, int nz, int nt, int key)
{
    ck_assert_int_eq(s->vol.nz, nz);
    ck_assert_int_eq(s->vol.nt, nt);
    ck_assert_int_eq(s->temporal_key, key);
    ck_assert_double_eq_tol(s->vol.spacing[2], 1.25, 1e-9);
    for (int k = 0; k < s->nsrc; k++) {
        int inst = s->src[k].instance_number, t = (inst - 100) / 10, z = (inst - 100) % 10;
        ck_assert_int_eq(s->src[k].z[0], t * nz + z);
        assert_plane_is(s, t * nz + z, inst);
    }
}

START_TEST(four_d_series_is_ordered_by_trigger_time)
{
    /* Files in a scrambled order: time points and positions interleaved. */
    static const int order[][2] = {{2, 1}, {0, 0}, {1, 2}, {2, 0}, {0, 2}, {1, 0},
                                   {1, 1}, {0, 1}, {2, 2}, {3, 0}, {3, 2}, {3, 1}};
    for (int k = 0; k < 12; k++)
        write_4d(order[k][0], order[k][1], 0);
    asm_series s;
    load_ok(&s);
    assert_4d(&s, 4, 3, SCP_TIME_TRIGGER);
    asm_series_close(&s);
}
END_TEST

/* Slice z of time point t keyed by TemporalPositionIndex t + 1 (with a
 * TriggerTime that disagrees, to show the index wins) or by the nominal
 * cardiac phase 10 t %. */
static void write_4d_keyed(int z, int t, int by_phase)
{
    char idx[16], phase[16], trig[16];
    scp_ct_params p = slice(100 + 10 * t + z, z * 1.25);
    snprintf(idx, sizeof idx, "%d", t + 1);
    snprintf(phase, sizeof phase, "%d", 10 * t);
    snprintf(trig, sizeof trig, "%d", 900 - 40 * t);
    p.temporal_index = by_phase ? NULL : idx;
    p.trigger_time = by_phase ? NULL : trig;
    p.cardiac_phase = by_phase ? phase : NULL;
    write_slice(p);
}

START_TEST(four_d_temporal_position_index_comes_first)
{
    for (int t = 0; t < 3; t++)
        for (int z = 2; z >= 0; z--)
            write_4d_keyed(z, t, 0);
    asm_series s;
    load_ok(&s);
    assert_4d(&s, 3, 3, SCP_TIME_INDEX);
    asm_series_close(&s);
}
END_TEST

START_TEST(four_d_series_by_cardiac_phase)
{
    for (int t = 3; t >= 0; t--)
        for (int z = 0; z < 2; z++)
            write_4d_keyed(z, t, 1);
    asm_series s;
    load_ok(&s);
    assert_4d(&s, 2, 4, SCP_TIME_PHASE);
    asm_series_close(&s);
}
END_TEST

START_TEST(four_d_acquisition_times_may_differ_per_slice)
{
    for (int t = 2; t >= 0; t--)
        for (int z = 0; z < 3; z++)
            write_4d(z, t, 1);
    asm_series s;
    load_ok(&s);
    assert_4d(&s, 3, 3, SCP_TIME_ACQUISITION);
    asm_series_close(&s);
}
END_TEST

START_TEST(four_d_missing_time_point_is_refused)
{
    for (int t = 0; t < 3; t++)
        for (int z = 0; z < 3; z++)
            if (!(t == 2 && z == 1))
                write_4d(z, t, 0);
    expect_failure(LDCT_EINPUT, "4D series (time points by TriggerTime)",
                   "the one at 1.25 mm has 2; every position needs the same time points");
}
END_TEST

START_TEST(four_d_gap_between_positions_is_refused)
{
    for (int t = 0; t < 2; t++)
        for (int z = 0; z < 5; z++)
            if (z != 3)
                write_4d(z, t, 0);
    expect_failure(LDCT_EINPUT, "gap of 2.50 mm", "missing slice?");
}
END_TEST

/* A 6-frame Enhanced CT: 3 positions x 2 temporal positions (per-frame
 * Frame Content TemporalPositionIndex), frames in a scrambled order. */
static const int enh4_z[6] = {1, 0, 2, 2, 1, 0}, enh4_t[6] = {1, 1, 1, 2, 2, 2};

static void write_enhanced_4d(void)
{
    char raw[128], dump[128], cmd[512];
    snprintf(raw, sizeof raw, "%s/px4.raw", dir);
    snprintf(dump, sizeof dump, "%s/enh4.dump", dir);
    FILE *f = fopen(raw, "wb");
    for (int fr = 0; fr < 6; fr++)
        for (int i = 0; i < ROWS * COLS; i++) {
            int16_t v = enh_stored(fr, i);
            fwrite(&v, 2, 1, f);
        }
    fclose(f);
    f = fopen(dump, "w");
    enh_header(f, 6);
    fputs("(5200,9230) SQ (Sequence)\n", f);
    for (int fr = 0; fr < 6; fr++) {
        fputs("(fffe,e000) na (Item)\n", f);
        seq_open(f, "0020,9113");
        fprintf(f, "(0020,0032) DS [-10\\-20\\%g]\n", enh4_z[fr] * 1.25);
        seq_close(f);
        seq_open(f, "0020,9111");
        fprintf(f, "(0020,9128) UL %d\n", enh4_t[fr]);
        seq_close(f);
        fputs("(fffe,e00d) na (ItemDelimitationItem)\n", f);
    }
    fputs("(fffe,e0dd) na (SequenceDelimitationItem)\n", f);
    fprintf(f, "(7fe0,0010) OW =%s\n", raw);
    fclose(f);
    snprintf(paths[nfiles], sizeof paths[0], "%s/f%02d.dcm", dir, nfiles + 1);
    snprintf(cmd, sizeof cmd, "dump2dcm -q +E %s %s", dump, paths[nfiles]);
    ck_assert_int_eq(system(cmd), 0);
    pv[nfiles] = paths[nfiles];
    nfiles++;
}

START_TEST(four_d_enhanced_ct_by_frame_temporal_position)
{
    write_enhanced_4d();
    asm_series s;
    load_ok(&s);
    ck_assert_int_eq(s.vol.nz, 3);
    ck_assert_int_eq(s.vol.nt, 2);
    ck_assert_int_eq(s.temporal_key, SCP_TIME_INDEX);
    ck_assert_int_eq(s.src[0].frames, 6);
    for (int fr = 0; fr < 6; fr++) {
        int plane_idx = (enh4_t[fr] - 1) * 3 + enh4_z[fr];
        ck_assert_int_eq(s.src[0].z[fr], plane_idx);
        for (int i = 0; i < ROWS * COLS; i++)
            ck_assert_float_eq(plane(&s, plane_idx)[i], enh_stored(fr, i) - 1024.0f);
    }
    asm_series_close(&s);
}
END_TEST

START_TEST(three_d_series_has_no_temporal_key)
{
    static const int pos[] = {0, 1, 2};
    write_axial(3, pos);
    asm_series s;
    load_ok(&s);
    ck_assert_int_eq(s.vol.nt, 1);
    ck_assert_int_eq(s.temporal_key, -1);
    asm_series_close(&s);
}
END_TEST

int main(void)
{
    if (scp_global_init() != 0)
        return 1;
    Suite *s = suite_create("assemble");
    TCase *tc = tcase_create("assemble");
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, sorts_shuffled_slices_by_position_along_the_normal);
    tcase_add_test(tc, spacing_is_columns_rows_then_slice_distance);
    tcase_add_test(tc, sorts_along_a_negative_normal);
    tcase_add_test(tc, sorts_along_a_tilted_normal);
    tcase_add_test(tc, hu_applies_each_slices_own_rescale);
    tcase_add_test(tc, single_slice_is_a_one_slice_volume_spaced_by_its_thickness);
    tcase_add_test(tc, single_slice_without_thickness_is_spaced_1mm);
    tcase_add_test(tc, mixed_columns_fail_naming_the_slice_and_both_sizes);
    tcase_add_test(tc, odd_first_slice_is_the_one_named);
    tcase_add_test(tc, different_orientation_fails);
    tcase_add_test(tc, orientation_within_tolerance_is_accepted);
    tcase_add_test(tc, different_pixel_spacing_fails);
    tcase_add_test(tc, different_frame_of_reference_fails);
    tcase_add_test(tc, slice_of_another_series_fails);
    tcase_add_test(tc, slice_of_another_study_fails);
    tcase_add_test(tc, slice_of_another_patient_fails);
    tcase_add_test(tc, slice_of_another_modality_fails);
    tcase_add_test(tc, duplicate_position_fails);
    tcase_add_test(tc, duplicate_instance_numbers_are_named_by_file);
    tcase_add_test(tc, missing_slice_fails_as_a_gap);
    tcase_add_test(tc, uneven_spacing_fails);
    tcase_add_test(tc, missing_position_fails);
    tcase_add_test(tc, non_image_instance_fails_naming_its_sop_class);
    tcase_add_test(tc, file_that_is_not_dicom_fails_cleanly);
    tcase_add_test(tc, truncated_pixel_data_fails_naming_the_slice);
    tcase_add_test(tc, colour_image_is_unsupported);
    tcase_add_test(tc, a_stack_of_slices_takes_what_a_volume_refuses);
    tcase_add_test(tc, a_stack_of_slices_still_needs_one_image_size);
    tcase_add_test(tc, a_refusal_says_whether_it_was_about_the_places);
    tcase_add_test(tc, not_processable_names_non_images_colour_and_localizers);
    tcase_add_test(tc, no_files_is_einput_and_close_accepts_zeroed_structs);
    tcase_add_test(tc, enhanced_ct_frames_sort_together_with_classic_slices);
    tcase_add_test(tc, enhanced_ct_frame_names_appear_in_messages);
    tcase_add_test(tc, four_d_series_is_ordered_by_trigger_time);
    tcase_add_test(tc, four_d_acquisition_times_may_differ_per_slice);
    tcase_add_test(tc, four_d_temporal_position_index_comes_first);
    tcase_add_test(tc, four_d_series_by_cardiac_phase);
    tcase_add_test(tc, four_d_missing_time_point_is_refused);
    tcase_add_test(tc, four_d_gap_between_positions_is_refused);
    tcase_add_test(tc, three_d_series_has_no_temporal_key);
    tcase_add_test(tc, four_d_enhanced_ct_by_frame_temporal_position);
    tcase_add_loop_test(tc, compressed_input_loads_identical_hu, 0,
                        (int)(sizeof COMPRESSED / sizeof COMPRESSED[0]));
    suite_add_tcase(s, tc);
    int rc = tu_run_suite(s);
    scp_global_cleanup(); /* leak-clean under CK_FORK=no */
    return rc;
}
