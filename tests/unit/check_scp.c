/* Unit tests for scp/ beyond the server: the slice reader (header and HU,
 * exact for every lossless transfer syntax), the derived writer (identity,
 * references, rounding and clamping, geometry kept, dciodvfy) and the SCU
 * (against DCMTK's storescp, a closed port, and a rejecting server). */
#include "common/err.h"
#include "common/log.h"
#include "scp/scp.h"
#include "tests/unit/testutil.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ROWS 24
#define COLS 32
#define EXPLICIT "1.2.840.10008.1.2.1"
#define JPEG_LS "1.2.840.10008.1.2.4.80"
#define RLE "1.2.840.10008.1.2.5"

static const char *SYNTAXES[] = {EXPLICIT, "1.2.840.10008.1.2", "1.2.840.10008.1.2.4.70", JPEG_LS,
                                 RLE};

static char dir[64];
static int16_t pixels[ROWS * COLS];

static void setup(void)
{
    log_level = LOG_LVL_ERR;
    ck_assert_int_eq(scp_global_init(), 0);
    tu_tmpdir(dir, sizeof dir);
    for (int i = 0; i < ROWS * COLS; i++)
        pixels[i] = (int16_t)((i * 37) % 4000 - 1000);
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* Writes one synthetic slice (slope 0.5, intercept -1024) in syntax ts. */
static void write_ct(const char *path, const char *ts, const char *sop)
{
    scp_ct_params p = {.patient_name = "TEST^SCP",
                       .patient_id = "P1",
                       .study_uid = "1.2.826.0.1.3680043.9.7.1",
                       .series_uid = "1.2.826.0.1.3680043.9.7.1.1",
                       .sop_uid = sop,
                       .frame_of_reference_uid = "1.2.826.0.1.3680043.9.7.1.2",
                       .series_description = "LOW DOSE",
                       .series_number = 3,
                       .instance_number = 7,
                       .rows = ROWS,
                       .cols = COLS,
                       .pixel_spacing = {0.7, 0.8},
                       .slice_thickness = 1.25,
                       .position = {-100.5, -120.25, 33.5},
                       .orientation = {1, 0, 0, 0, 1, 0},
                       .rescale_slope = 0.5,
                       .rescale_intercept = -1024,
                       .kvp = 120,
                       .pixels = pixels,
                       .transfer_syntax_uid = ts};
    ck_assert_int_eq(scp_ct_write(&p, path), 0);
}

static void path_of(char *out, size_t len, const char *name)
{
    snprintf(out, len, "%s/%s", dir, name);
}

/* 1 when `needle` occurs in the dcmdump output of path. */
/* A line of path's dump containing needle (top_only: starting with it, at
 * the top level, not inside a sequence). */
static int dump_match(const char *path, const char *needle, int top_only)
{
    char cmd[512], line[1024];
    snprintf(cmd, sizeof cmd, "dcmdump -q %s", path);
    FILE *f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    int found = 0;
    while (fgets(line, sizeof line, f))
        found |=
            top_only ? strncmp(line, needle, strlen(needle)) == 0 : strstr(line, needle) != NULL;
    pclose(f);
    return found;
}

static int dump_has(const char *path, const char *needle)
{
    return dump_match(path, needle, 0);
}

static int top_level_has(const char *path, const char *needle)
{
    return dump_match(path, needle, 1);
}

/* "No data" ends an association as idle (its series complete) only after
 * the sender was silent for the whole dimse_timeout; earlier it is a
 * connection that ended early, which holds the series for the resend. */
START_TEST(no_data_counts_as_idle_only_after_the_whole_dimse_timeout)
{
    ck_assert(!scp_silence_was_idle(0, 60));
    ck_assert(!scp_silence_was_idle(1200, 60)); /* a sender killed a second ago */
    ck_assert(!scp_silence_was_idle(53999, 60));
    ck_assert(scp_silence_was_idle(54000, 60));
    ck_assert(scp_silence_was_idle(60010, 60));
    ck_assert(!scp_silence_was_idle(1500, 2));
    ck_assert(scp_silence_was_idle(2000, 2));
}
END_TEST

START_TEST(read_back_matches_written_pixels_in_every_syntax)
{
    char path[128], err[256] = "";
    path_of(path, sizeof path, "src.dcm");
    write_ct(path, SYNTAXES[_i], "1.2.826.0.1.3680043.9.7.1.1.1");
    scp_slice_info in;
    ck_assert_int_eq(scp_slice_read_info(path, &in, err, sizeof err), 0);
    ck_assert_str_eq(in.sop_instance_uid, "1.2.826.0.1.3680043.9.7.1.1.1");
    ck_assert_str_eq(in.sop_class_uid, "1.2.840.10008.5.1.4.1.1.2");
    ck_assert_str_eq(in.study_uid, "1.2.826.0.1.3680043.9.7.1");
    ck_assert_str_eq(in.frame_of_reference_uid, "1.2.826.0.1.3680043.9.7.1.2");
    ck_assert_str_eq(in.modality, "CT");
    ck_assert_str_eq(in.photometric, "MONOCHROME2");
    ck_assert_int_eq(in.rows, ROWS);
    ck_assert_int_eq(in.cols, COLS);
    ck_assert_int_eq(in.frames, 1);
    ck_assert_int_eq(in.bits_allocated, 16);
    ck_assert_int_eq(in.pixel_representation, 1);
    ck_assert_int_eq(in.instance_number, 7);
    ck_assert(in.has_position && in.has_orientation && in.has_spacing);
    ck_assert_double_eq_tol(in.position[1], -120.25, 1e-9);
    ck_assert_double_eq_tol(in.pixel_spacing[1], 0.8, 1e-9);
    ck_assert_double_eq_tol(in.slice_thickness, 1.25, 1e-9);
    ck_assert_double_eq(in.rescale_slope, 0.5);
    ck_assert_double_eq(in.rescale_intercept, -1024);
    ck_assert_ptr_null(in.frame_positions);
    scp_slice_info_free(&in);

    static float hu[ROWS * COLS];
    ck_assert_int_eq(scp_slice_read_hu(path, hu, ROWS * COLS, err, sizeof err), 0);
    for (int i = 0; i < ROWS * COLS; i++)
        ck_assert_float_eq(hu[i], pixels[i] * 0.5f - 1024.0f);
}
END_TEST

/* JPEG 2000 is received and routed but DCMTK has no decoder for it here:
 * the job's reason says so, instead of DCMTK's "Pixel representation
 * cannot be changed", which reads like a problem with the pixels. The
 * file is a JPEG-LS one relabelled (same UID length); nothing decodes it. */
START_TEST(a_syntax_without_decoder_is_named_as_such)
{
    char path[128], err[256] = "";
    path_of(path, sizeof path, "j2k.dcm");
    write_ct(path, "1.2.840.10008.1.2.4.80", "1.2.826.0.1.3680043.9.7.1.1.2");
    FILE *f = fopen(path, "r+b");
    ck_assert_ptr_nonnull(f);
    static char buf[1024];
    size_t n = fread(buf, 1, sizeof buf, f);
    char *at = memmem(buf, n, "1.2.840.10008.1.2.4.80", 22);
    ck_assert_ptr_nonnull(at);
    fseek(f, at - buf, SEEK_SET);
    fwrite("1.2.840.10008.1.2.4.90", 1, 22, f);
    fclose(f);
    static float hu[ROWS * COLS];
    ck_assert_int_eq(scp_slice_read_hu(path, hu, ROWS * COLS, err, sizeof err), LDCT_EUNSUPPORTED);
    ck_assert_msg(strstr(err, "JPEG 2000") && strstr(err, "no decoder"), "%s", err);
    ck_assert_msg(!strstr(err, "Pixel representation"), "%s", err);
}
END_TEST

/* A Deflated dataset whose stream is corrupt ends the nesting check with
 * an inflate error; the inflater's state (7 KiB) must still be freed, or
 * every such C-STORE (the check runs on each received instance) leaks it
 * (the network fuzz review found it under LeakSanitizer). Without ASan,
 * glibc's count of allocated bytes shows it: 2000 reads would hold 14 MiB. */
START_TEST(corrupt_deflated_dataset_frees_its_inflater)
{
    char path[128], err[256] = "";
    path_of(path, sizeof path, "deflated.dcm");
    write_ct(path, "1.2.840.10008.1.2.1.99", "1.2.826.0.1.3680043.9.7.1.1.3");
    static unsigned char buf[8192];
    FILE *f = fopen(path, "r+b");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(buf, 1, sizeof buf, f);
    uint32_t meta = (uint32_t)buf[140] | (uint32_t)buf[141] << 8 | (uint32_t)buf[142] << 16 |
                    (uint32_t)buf[143] << 24;
    size_t at = 144 + meta + 40; /* inside the deflate stream */
    ck_assert_uint_lt(at + 64, n);
    memset(buf + at, 0xFF, 64); /* an invalid block: inflate reports a data error */
    fseek(f, (long)at, SEEK_SET);
    fwrite(buf + at, 1, 64, f);
    fclose(f);
    scp_slice_info in;
    ck_assert_int_lt(scp_slice_read_info(path, &in, err, sizeof err), 0);
    struct mallinfo2 before = mallinfo2();
    for (int i = 0; i < 2000; i++)
        ck_assert_int_lt(scp_slice_read_info(path, &in, err, sizeof err), 0);
    struct mallinfo2 after = mallinfo2();
    ck_assert_msg(after.uordblks < before.uordblks + (1u << 20), "%zu bytes more in use",
                  after.uordblks - before.uordblks);
}
END_TEST

START_TEST(read_hu_refuses_a_wrong_count_and_non_dicom)
{
    char path[128], bad[128], err[256] = "";
    static float hu[ROWS * COLS];
    path_of(path, sizeof path, "src.dcm");
    write_ct(path, NULL, NULL);
    ck_assert_int_eq(scp_slice_read_hu(path, hu, ROWS * COLS - 1, err, sizeof err), LDCT_EINPUT);
    ck_assert_ptr_nonnull(strstr(err, "buffer"));
    tu_write(dir, "bad.dcm", "not dicom at all", bad, sizeof bad);
    scp_slice_info in;
    ck_assert_int_lt(scp_slice_read_info(bad, &in, err, sizeof err), 0);
    ck_assert(err[0]);
    path_of(bad, sizeof bad, "missing.dcm");
    ck_assert_int_eq(scp_slice_read_info(bad, &in, err, sizeof err), -ENOENT);
}
END_TEST

/* Writes a derived instance of src with values = HU + 10, plus a few
 * out-of-range and fractional values; returns the values used. */
static void write_derived(const char *src, const char *out, const char *ts, float *v)
{
    char err[256] = "";
    ck_assert_int_eq(scp_slice_read_hu(src, v, ROWS * COLS, err, sizeof err), 0);
    for (int i = 0; i < ROWS * COLS; i++)
        v[i] += 10.0f;
    v[0] = 1e9f;     /* clamps to 32767 */
    v[1] = -1e9f;    /* clamps to -32768 */
    v[2] = -1000.3f; /* (v + 1024) / 0.5 = 47.4 -> 47 */
    v[3] = -1000.2f; /* 47.6 -> 48 */
    scp_derived_params p = {.source_path = src,
                            .series_uid = "1.2.826.0.1.3680043.9.7.2",
                            .sop_uid = "1.2.826.0.1.3680043.9.7.2.1",
                            .series_description = "LOW DOSE [DN]",
                            .series_number = 1003,
                            .derivation_description = "nlm3d h=1.0 (ldct-node)",
                            .values = v,
                            .transfer_syntax_uid = ts};
    ck_assert_msg(scp_derived_write(&p, out, err, sizeof err) == 0, "derived: %s", err);
}

static float expected_hu(float v)
{
    double s = nearbyint((v + 1024.0) / 0.5);
    s = s < -32768 ? -32768 : s > 32767 ? 32767 : s;
    return (float)(s * 0.5 - 1024.0);
}

START_TEST(derived_instance_has_new_identity_and_rounded_clamped_values)
{
    char src[128], out[128], err[256] = "";
    static float v[ROWS * COLS], hu[ROWS * COLS];
    path_of(src, sizeof src, "src.dcm");
    path_of(out, sizeof out, "derived.dcm");
    write_ct(src, JPEG_LS, "1.2.826.0.1.3680043.9.7.1.1.1");
    write_derived(src, out, _i ? RLE : NULL, v);

    scp_slice_info in;
    ck_assert_int_eq(scp_slice_read_info(out, &in, err, sizeof err), 0);
    ck_assert_str_eq(in.series_uid, "1.2.826.0.1.3680043.9.7.2");
    ck_assert_str_eq(in.sop_instance_uid, "1.2.826.0.1.3680043.9.7.2.1");
    ck_assert_str_eq(in.study_uid, "1.2.826.0.1.3680043.9.7.1");
    ck_assert_str_eq(in.frame_of_reference_uid, "1.2.826.0.1.3680043.9.7.1.2");
    ck_assert_double_eq_tol(in.position[2], 33.5, 1e-9);
    ck_assert_double_eq_tol(in.pixel_spacing[0], 0.7, 1e-9);
    ck_assert_double_eq(in.rescale_slope, 0.5);
    ck_assert_double_eq(in.rescale_intercept, -1024);
    scp_slice_info_free(&in);

    ck_assert_int_eq(scp_slice_read_hu(out, hu, ROWS * COLS, err, sizeof err), 0);
    for (int i = 0; i < ROWS * COLS; i++)
        ck_assert_float_eq(hu[i], expected_hu(v[i]));
    ck_assert_float_eq(hu[0], 32767 * 0.5f - 1024);
    ck_assert_float_eq(hu[1], -32768 * 0.5f - 1024);
    ck_assert_float_eq(hu[2], 47 * 0.5f - 1024);
    ck_assert_float_eq(hu[3], 48 * 0.5f - 1024);

    ck_assert(dump_has(out, "[DERIVED\\SECONDARY\\AXIAL]"));
    ck_assert(dump_has(out, "(0002,0003) UI [1.2.826.0.1.3680043.9.7.2.1]"));
    ck_assert(dump_has(out, "(0008,1155) UI [1.2.826.0.1.3680043.9.7.1.1.1]"));
    ck_assert(top_level_has(out, "(0008,2111) ST [nlm3d h=1.0 (ldct-node)]"));
    ck_assert(top_level_has(out, "(0008,9215) SQ")); /* Derivation Code Sequence */
    ck_assert(dump_has(out, "(0008,0100) SH [113087]"));
    ck_assert(dump_has(out, "(0008,0100) SH [121322]"));
    ck_assert(dump_has(out, "(0008,103e) LO [LOW DOSE [DN]]"));
    ck_assert(dump_has(out, "(0020,0011) IS [1003]"));
    ck_assert(dump_has(out, "(0008,2111) ST [nlm3d h=1.0 (ldct-node)]"));
    ck_assert(dump_has(out, "(0010,0010) PN [TEST^SCP]"));
}
END_TEST

/* IS is a signed 32-bit value: the offset goes down where up would leave it. */
START_TEST(derived_series_number_stays_in_the_is_range)
{
    ck_assert_int_eq(scp_series_number_derive(3, 1000), 1003);
    ck_assert_int_eq(scp_series_number_derive(-5, 1000), 995);
    ck_assert_int_eq(scp_series_number_derive(2147482647, 1000), 2147483647);
    ck_assert_int_eq(scp_series_number_derive(2147482648, 1000), 2147481648);
    ck_assert_int_eq(scp_series_number_derive(2147483647, 1000), 2147482647);
    ck_assert_int_eq(scp_series_number_derive(2147483647, 100000), 2147383647);
    ck_assert_int_eq(scp_series_number_derive(-2147483648L, -1000), -2147482648L);
    ck_assert_int_eq(scp_series_number_derive(99999999999L, 1000), 2147482647); /* source clamped */
    ck_assert_int_eq(scp_series_number_derive(7, 0), 7);
}
END_TEST

/* Exposure (0018,1152) is an IS: a value in mAs beyond its range is left
 * out (1e300 used to go through an undefined double-to-long cast and came
 * out as LONG_MIN); an ordinary one is rounded. */
static void write_ct_with_exposure(const char *path, double mas)
{
    scp_ct_params p = {.series_uid = "1.2.826.0.1.3680043.9.7.2.1",
                       .sop_uid = "1.2.826.0.1.3680043.9.7.2.1.1",
                       .rows = ROWS,
                       .cols = COLS,
                       .pixel_spacing = {0.7, 0.8},
                       .slice_thickness = 1,
                       .orientation = {1, 0, 0, 0, 1, 0},
                       .rescale_slope = 1,
                       .kvp = 120,
                       .exposure_mas = mas,
                       .pixels = pixels};
    ck_assert_int_eq(scp_ct_write(&p, path), 0);
}

START_TEST(ct_exposure_outside_the_is_range_is_left_out)
{
    char path[128];
    path_of(path, sizeof path, "exposure.dcm");
    write_ct_with_exposure(path, 40.4);
    ck_assert(top_level_has(path, "(0018,1152) IS [40]"));
    const double absurd[] = {1e300, 3e9, NAN, -5};
    for (size_t i = 0; i < sizeof absurd / sizeof absurd[0]; i++) {
        write_ct_with_exposure(path, absurd[i]);
        ck_assert_msg(!top_level_has(path, "(0018,1152)"), "Exposure written for %g mAs",
                      absurd[i]);
    }
}
END_TEST

/* Pixel Padding Value marks pixels outside the scanned field; the filter
 * may move them, the derived image must not. _i = 0: one value (written
 * as US 63536, as dcmodify and some scanners write -2000 for signed
 * pixels); _i = 1: a range up to the Pixel Padding Range Limit. */
START_TEST(derived_instance_keeps_padding_pixels_exactly)
{
    char src[128], out[128], cmd[512], err[256] = "";
    static float v[ROWS * COLS], hu[ROWS * COLS];
    for (int i = 0; i < ROWS * COLS; i++)
        pixels[i] = i % 7 == 0 ? -2000 : i % 7 == 1 ? -1995 : pixels[i];
    path_of(src, sizeof src, "src.dcm");
    path_of(out, sizeof out, "derived.dcm");
    write_ct(src, EXPLICIT, "1.2.826.0.1.3680043.9.7.1.1.1");
    snprintf(cmd, sizeof cmd, "dcmodify -nb -q -i '(0028,0120)=-2000' %s%s", src,
             _i ? " && dcmodify -nb -q -i '(0028,0121)=-1990' " : "");
    if (_i)
        snprintf(cmd + strlen(cmd), sizeof cmd - strlen(cmd), "%s", src);
    ck_assert_int_eq(system(cmd), 0);
    write_derived(src, out, NULL, v);
    ck_assert_int_eq(scp_slice_read_hu(out, hu, ROWS * COLS, err, sizeof err), 0);
    size_t kept = 0;
    for (int i = 0; i < ROWS * COLS; i++) {
        int padding = pixels[i] == -2000 || (_i && pixels[i] == -1995);
        float want = padding ? pixels[i] * 0.5f - 1024 : expected_hu(v[i]);
        ck_assert_msg(hu[i] == want, "pixel %d (stored %d): %.1f, expected %.1f", i, pixels[i],
                      hu[i], want);
        kept += padding;
    }
    ck_assert_uint_ge(kept, (size_t)(ROWS * COLS / 7));
}
END_TEST

/* A Pixel Padding Value that BitsStored cannot hold matches no pixel: with
 * 12 bits stored, -3024 must not be masked onto 1072 (0xF430 & 0xFFF), a
 * real value that would then have passed unfiltered. */
START_TEST(padding_value_outside_the_stored_bits_matches_nothing)
{
    char src[128], out[128], cmd[512], err[256] = "";
    static float v[ROWS * COLS], hu[ROWS * COLS];
    for (int i = 0; i < ROWS * COLS; i++)
        pixels[i] = (int16_t)(i % 5 == 0 ? 1072 : (i * 37) % 3000 - 1000);
    path_of(src, sizeof src, "src.dcm");
    path_of(out, sizeof out, "derived.dcm");
    write_ct(src, EXPLICIT, "1.2.826.0.1.3680043.9.7.1.1.1");
    snprintf(cmd, sizeof cmd,
             "dcmodify -nb -q -m BitsStored=12 -m HighBit=11 -i '(0028,0120)=-3024' %s", src);
    ck_assert_int_eq(system(cmd), 0);
    write_derived(src, out, NULL, v);
    ck_assert_int_eq(scp_slice_read_hu(out, hu, ROWS * COLS, err, sizeof err), 0);
    for (int i = 0; i < ROWS * COLS; i++) {
        double s = nearbyint((v[i] + 1024.0) / 0.5);
        float want = (float)((s < -2048 ? -2048 : s > 2047 ? 2047 : s) * 0.5 - 1024.0);
        ck_assert_msg(hu[i] == want, "pixel %d (stored %d): %.1f, expected %.1f", i, pixels[i],
                      hu[i], want);
    }
}
END_TEST

/* Number of "Error" lines dciodvfy prints for path. */
static int dciodvfy_errors(const char *path)
{
    char cmd[512], line[1024];
    snprintf(cmd, sizeof cmd, "dciodvfy %s 2>&1", path);
    FILE *f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    int n = 0;
    while (fgets(line, sizeof line, f))
        n += strncmp(line, "Error", 5) == 0;
    pclose(f);
    return n;
}

START_TEST(derived_instance_adds_no_dciodvfy_error)
{
    if (system("command -v dciodvfy >/dev/null 2>&1") != 0)
        return; /* dicom3tools not installed: nothing to check */
    char src[128], out[128];
    static float v[ROWS * COLS];
    path_of(src, sizeof src, "src.dcm");
    path_of(out, sizeof out, "derived.dcm");
    write_ct(src, NULL, NULL);
    write_derived(src, out, NULL, v);
    ck_assert_int_le(dciodvfy_errors(out), dciodvfy_errors(src));
}
END_TEST

/* ---- Enhanced CT (multi-frame, functional groups) ----------------------- */

#define EF 3
#define ER 8
#define EC 6

static int16_t enh_stored(int f, int i)
{
    return (int16_t)((f * 100 + i) % 500 - 200);
}

static void seq_open(FILE *f, const char *tag)
{
    fprintf(f, "(%s) SQ (Sequence)\n(fffe,e000) na (Item)\n", tag);
}

static void seq_close(FILE *f)
{
    fputs("(fffe,e00d) na (ItemDelimitationItem)\n(fffe,e0dd) na (SequenceDelimitationItem)\n", f);
}

/* Writes a 3-frame Enhanced CT (12 bits stored, signed) with dump2dcm:
 * shared rescale -1024/1, frame 3 its own -1000/2; z = 5, 7.5, 10. */
static void write_enhanced(const char *path)
{
    char raw[128], dump[128], cmd[512];
    path_of(raw, sizeof raw, "px.raw");
    path_of(dump, sizeof dump, "enh.dump");
    FILE *f = fopen(raw, "wb");
    for (int fr = 0; fr < EF; fr++)
        for (int i = 0; i < ER * EC; i++) {
            int16_t v = enh_stored(fr, i);
            fwrite(&v, 2, 1, f); /* little-endian host */
        }
    fclose(f);
    f = fopen(dump, "w");
    fputs(
        "(0002,0010) UI =LittleEndianExplicit\n"
        "(0008,0008) CS [ORIGINAL\\PRIMARY\\VOLUME\\NONE]\n"
        "(0008,0016) UI =EnhancedCTImageStorage\n"
        "(0008,0018) UI [1.2.826.0.1.3680043.9.7.5.1]\n(0008,0060) CS [CT]\n"
        "(0020,000d) UI [1.2.826.0.1.3680043.9.7.5]\n(0020,000e) UI [1.2.826.0.1.3680043.9.7.5.2]\n"
        "(0028,0002) US 1\n(0028,0004) CS [MONOCHROME2]\n(0028,0008) IS [3]\n"
        "(0028,0010) US 8\n(0028,0011) US 6\n(0028,0100) US 16\n(0028,0101) US 12\n"
        "(0028,0102) US 11\n(0028,0103) US 1\n",
        f);
    seq_open(f, "5200,9229");
    seq_open(f, "0028,9110");
    fputs("(0028,0030) DS [0.5\\0.6]\n(0018,0050) DS [2]\n", f);
    seq_close(f);
    seq_open(f, "0020,9116");
    fputs("(0020,0037) DS [1\\0\\0\\0\\1\\0]\n", f);
    seq_close(f);
    seq_open(f, "0028,9145");
    fputs("(0028,1052) DS [-1024]\n(0028,1053) DS [1]\n(0028,1054) LO [HU]\n", f);
    seq_close(f);
    seq_open(f, "0018,9329");
    fputs("(0008,9007) CS [ORIGINAL\\PRIMARY\\VOLUME\\NONE]\n", f);
    seq_close(f);
    seq_close(f);
    fputs("(5200,9230) SQ (Sequence)\n", f);
    for (int fr = 0; fr < EF; fr++) {
        fputs("(fffe,e000) na (Item)\n", f);
        seq_open(f, "0020,9113");
        fprintf(f, "(0020,0032) DS [-10\\-20\\%g]\n", 5 + 2.5 * fr);
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
    snprintf(cmd, sizeof cmd, "dump2dcm -q +E %s %s", dump, path);
    ck_assert_int_eq(system(cmd), 0);
}

static double enh_slope(int fr)
{
    return fr == 2 ? 2 : 1;
}

static double enh_icpt(int fr)
{
    return fr == 2 ? -1000 : -1024;
}

START_TEST(enhanced_ct_geometry_and_per_frame_rescale)
{
    char src[128], out[128], err[256] = "";
    static float hu[EF * ER * EC], v[EF * ER * EC];
    path_of(src, sizeof src, "enh.dcm");
    path_of(out, sizeof out, "enh-derived.dcm");
    write_enhanced(src);
    scp_slice_info in;
    ck_assert_msg(scp_slice_read_info(src, &in, err, sizeof err) == 0, "info: %s", err);
    ck_assert_int_eq(in.frames, EF);
    ck_assert(in.has_position && in.has_orientation && in.has_spacing);
    ck_assert_ptr_nonnull(in.frame_positions);
    for (int fr = 0; fr < EF; fr++)
        ck_assert_double_eq_tol(in.frame_positions[3 * fr + 2], 5 + 2.5 * fr, 1e-9);
    ck_assert_double_eq_tol(in.pixel_spacing[1], 0.6, 1e-9);
    ck_assert_double_eq(in.rescale_intercept, -1024);
    scp_slice_info_free(&in);
    ck_assert_ptr_null(in.frame_positions);

    ck_assert_int_eq(scp_slice_read_hu(src, hu, EF * ER * EC, err, sizeof err), 0);
    for (int fr = 0; fr < EF; fr++)
        for (int i = 0; i < ER * EC; i++)
            ck_assert_float_eq(hu[fr * ER * EC + i],
                               (float)(enh_stored(fr, i) * enh_slope(fr) + enh_icpt(fr)));

    for (int i = 0; i < EF * ER * EC; i++)
        v[i] = hu[i] + 4;
    v[0] = v[2 * ER * EC] = 1e6f; /* clamp to 2047 (12 bits signed) */
    scp_derived_params p = {.source_path = src,
                            .series_uid = "1.2.826.0.1.3680043.9.7.6",
                            .sop_uid = "1.2.826.0.1.3680043.9.7.6.1",
                            .series_number = 2,
                            .derivation_description = "enhanced test",
                            .values = v};
    ck_assert_msg(scp_derived_write(&p, out, err, sizeof err) == 0, "derived: %s", err);
    ck_assert_int_eq(scp_slice_read_hu(out, hu, EF * ER * EC, err, sizeof err), 0);
    ck_assert_float_eq(hu[0], 2047 - 1024);
    ck_assert_float_eq(hu[2 * ER * EC], 2047 * 2 - 1000);
    ck_assert_float_eq(hu[5], (float)(enh_stored(0, 5) - 1024 + 4));
    ck_assert_float_eq(hu[2 * ER * EC + 5], (float)(enh_stored(2, 5) * 2 - 1000 + 4));
    ck_assert(dump_has(out, "(0008,0008) CS [DERIVED\\PRIMARY\\VOLUME\\NONE]"));
    ck_assert(dump_has(out, "(0008,9007) CS [DERIVED\\PRIMARY\\VOLUME\\NONE]"));
    /* Provenance in the Derivation Image functional group, not at the top
     * level, where the Enhanced CT IOD has no such attributes. */
    ck_assert(!top_level_has(out, "(0008,2111)"));
    ck_assert(!top_level_has(out, "(0008,2112)"));
    ck_assert(dump_has(out, "(0008,9124) SQ"));
    ck_assert(dump_has(out, "  (0008,2111) ST [enhanced test]"));
    ck_assert(dump_has(out, "(0008,0100) SH [113087]"));
    ck_assert(dump_has(out, "(0008,0100) SH [121322]"));
}
END_TEST

/* ---- SCU ---------------------------------------------------------------- */

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

static int port_open(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

static pid_t start_storescp(const char *outdir, int port)
{
    char ports[16];
    snprintf(ports, sizeof ports, "%d", port);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        execlp("storescp", "storescp", "-od", outdir, ports, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 100 && !port_open(port); i++)
        usleep(50000);
    return pid;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

START_TEST(send_files_to_storescp_succeeds_converting_compressed_files)
{
    char p0[128], p1[128], p2[128], rcv[128], err[256] = "";
    path_of(p0, sizeof p0, "a.dcm");
    path_of(p1, sizeof p1, "b.dcm");
    path_of(p2, sizeof p2, "c.dcm");
    path_of(rcv, sizeof rcv, "rcv");
    ck_assert_int_eq(mkdir(rcv, 0700), 0);
    write_ct(p0, NULL, "1.2.826.0.1.3680043.9.7.1.1.10");
    write_ct(p1, JPEG_LS, "1.2.826.0.1.3680043.9.7.1.1.11");
    write_ct(p2, RLE, "1.2.826.0.1.3680043.9.7.1.1.12");
    int port = free_port();
    pid_t pid = start_storescp(rcv, port);
    char gone[128];
    path_of(gone, sizeof gone, "gone.dcm"); /* a local file that is missing */
    const char *paths[] = {p0, p1, p2, gone};
    unsigned st[4];
    scp_send_options o = {.host = "127.0.0.1",
                          .port = port,
                          .called_ae = "STORESCP",
                          .calling_ae = "LDCTNODE",
                          .connect_timeout_s = 5,
                          .dimse_timeout_s = 10};
    int rc = scp_send_files(&o, paths, 4, st, err, sizeof err);
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    ck_assert_msg(rc == 0, "send: %d %s", rc, err);
    for (int i = 0; i < 3; i++)
        ck_assert_uint_eq(st[i], 0);
    ck_assert_uint_ne(st[3], 0);
    /* The reason names the local file, not a peer's status. */
    ck_assert_msg(strstr(err, "gone.dcm") && strstr(err, "not readable"), "%s", err);
    char got[256];
    snprintf(got, sizeof got, "%s/CT.1.2.826.0.1.3680043.9.7.1.1.11", rcv);
    ck_assert_int_eq(access(got, R_OK), 0);
    static float hu[ROWS * COLS];
    ck_assert_int_eq(scp_slice_read_hu(got, hu, ROWS * COLS, err, sizeof err), 0);
    ck_assert_float_eq(hu[5], pixels[5] * 0.5f - 1024.0f);
}
END_TEST

START_TEST(send_files_to_a_closed_port_is_enet_quickly)
{
    char p0[128], err[256] = "";
    path_of(p0, sizeof p0, "a.dcm");
    write_ct(p0, NULL, NULL);
    const char *paths[] = {p0};
    unsigned st[1] = {0};
    scp_send_options o = {.host = "127.0.0.1",
                          .port = free_port(),
                          .called_ae = "PACS",
                          .calling_ae = "LDCTNODE",
                          .connect_timeout_s = 2,
                          .dimse_timeout_s = 2};
    double t0 = now_s();
    ck_assert_int_eq(scp_send_files(&o, paths, 1, st, err, sizeof err), LDCT_ENET);
    ck_assert_double_lt(now_s() - t0, 3.0);
    ck_assert_uint_eq(st[0], 0xFFFF);
    ck_assert(err[0]);
}
END_TEST

START_TEST(send_files_to_a_silent_peer_ends_within_the_timeout)
{
    char p0[128], err[256] = "";
    path_of(p0, sizeof p0, "a.dcm");
    write_ct(p0, NULL, NULL);
    /* A socket that listens (the kernel completes the connect) but whose
     * owner never reads or answers. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(listen(fd, 4), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    const char *paths[] = {p0};
    unsigned st[1];
    scp_send_options o = {.host = "127.0.0.1",
                          .port = ntohs(a.sin_port),
                          .called_ae = "PACS",
                          .calling_ae = "LDCTNODE",
                          .connect_timeout_s = 2,
                          .dimse_timeout_s = 2};
    double t0 = now_s();
    int rc = scp_send_files(&o, paths, 1, st, err, sizeof err);
    double took = now_s() - t0;
    close(fd);
    ck_assert_int_eq(rc, LDCT_ENET);
    ck_assert_msg(took < 4.0, "took %.1f s", took);
    ck_assert_uint_eq(st[0], 0xFFFF);
}
END_TEST

static scp_assoc_verdict refuse(void *ctx, const scp_assoc_info *a)
{
    (void)ctx;
    (void)a;
    return SCP_ASSOC_REJECT_CALLING_AE;
}

static unsigned never_begin(void *ctx, const scp_assoc_info *a, char *p, size_t pl, char *c,
                            size_t cl)
{
    (void)ctx, (void)a, (void)p, (void)pl, (void)c, (void)cl;
    return SCP_STATUS_OUT_OF_RESOURCES;
}

static unsigned never_end(void *ctx, const scp_assoc_info *a, const scp_instance *i, char *c,
                          size_t cl)
{
    (void)ctx, (void)a, (void)i, (void)c, (void)cl;
    return SCP_STATUS_OUT_OF_RESOURCES;
}

START_TEST(send_files_rejected_is_epeer_with_the_reason)
{
    char p0[128], err[256] = "";
    path_of(p0, sizeof p0, "a.dcm");
    write_ct(p0, NULL, NULL);
    int port = free_port();
    scp_server_options so = {.ae_title = "PACS", .port = port, .max_associations = 2};
    scp_handlers h = {
        .check_association = refuse, .store_begin = never_begin, .store_end = never_end};
    scp_server *srv;
    ck_assert_int_eq(scp_server_new(&so, &h, &srv), 0);
    ck_assert_int_eq(scp_server_start(srv), 0);
    const char *paths[] = {p0};
    unsigned st[1];
    scp_send_options o = {.host = "127.0.0.1",
                          .port = port,
                          .called_ae = "PACS",
                          .calling_ae = "NOBODY",
                          .connect_timeout_s = 2,
                          .dimse_timeout_s = 5};
    int rc = scp_send_files(&o, paths, 1, st, err, sizeof err);
    scp_server_free(srv);
    ck_assert_int_eq(rc, LDCT_EPEER);
    ck_assert_msg(strstr(err, "Calling AE Title Not Recognized") != NULL, "message: %s", err);
    ck_assert_uint_eq(st[0], 0xFFFF);
}
END_TEST

scp_assoc_verdict tu_verdict_throwing_once(void *ctx, const scp_assoc_info *info);

/* echoscu against the server on port (called PACS): its output and, last,
 * "exit N". */
static void echo_output(int port, char *out, size_t len)
{
    char cmd[200];
    snprintf(cmd, sizeof cmd,
             "echoscu -to 5 -ta 5 -td 5 -aec PACS 127.0.0.1 %d 2>&1; echo \"exit $?\"", port);
    tu_command_output(cmd, out, len);
}

/* An exception in one association's thread (here its verdict handler; in
 * the node an allocation that fails) aborts that association and gives its
 * slot back: with max_associations = 1 the next caller is served, and the
 * server stops at once. */
START_TEST(an_exception_in_an_association_gives_its_slot_back)
{
    int port = free_port(), calls = 0;
    scp_server_options so = {.ae_title = "PACS", .port = port, .max_associations = 1};
    scp_handlers h = {.ctx = &calls,
                      .check_association = tu_verdict_throwing_once,
                      .store_begin = never_begin,
                      .store_end = never_end};
    scp_server *srv;
    ck_assert_int_eq(scp_server_new(&so, &h, &srv), 0);
    ck_assert_int_eq(scp_server_start(srv), 0);
    char out[1024], cmd[200];
    /* rawscu reads the answer PDU itself: echoscu reports an A-ABORT and a
     * plain close alike ("Peer aborted Association"). */
    snprintf(cmd, sizeof cmd,
             "python3 tests/tools/rawscu.py 127.0.0.1 %d associate --called PACS --wait 5 2>&1",
             port);
    tu_command_output(cmd, out, sizeof out);
    ck_assert_msg(strstr(out, "PDU type 0x07\nclosed after") != NULL, "first association: %s",
                  out); /* an A-ABORT, then the close; not the 5 s timeout */
    echo_output(port, out, sizeof out);
    ck_assert_msg(strstr(out, "exit 0") != NULL, "second echo: %s", out); /* the slot came back */
    double t0 = now_s();
    scp_server_free(srv);
    ck_assert_double_lt(now_s() - t0, 3.0);
    ck_assert_int_eq(calls, 2); /* read after the server's threads are joined */
}
END_TEST

/* The value of tag (as "gggg,eeee") in path, by dcmdump. */
static void tag_value(const char *path, const char *tag, char *out, size_t len)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "dcmdump -q +P %s %s | sed -E 's/.*\\[([^]]*)\\].*/\\1/'", tag, path);
    tu_command_output(cmd, out, len);
    out[strcspn(out, "\n")] = '\0';
}

START_TEST(derived_series_is_dated_now_and_keeps_the_acquisition)
{
    char src[128], out[128], cmd[400], v[64], today[16];
    static float vals[ROWS * COLS];
    path_of(src, sizeof src, "dated.dcm");
    path_of(out, sizeof out, "dated-derived.dcm");
    write_ct(src, NULL, "1.2.826.0.1.3680043.9.7.1.1.7");
    snprintf(cmd, sizeof cmd,
             "dcmodify -nb -i ContentDate=19990101 -i ContentTime=101010 -i SeriesDate=19990101"
             " -i SeriesTime=101010 -i AcquisitionDate=19990101 %s",
             src);
    ck_assert_int_eq(system(cmd), 0);
    write_derived(src, out, NULL, vals);
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(today, sizeof today, "%Y%m%d", &tm);
    tag_value(out, "0008,0023", v, sizeof v); /* ContentDate */
    ck_assert_str_eq(v, today);
    tag_value(out, "0008,0021", v, sizeof v); /* SeriesDate */
    ck_assert_str_eq(v, today);
    tag_value(out, "0008,0033", v, sizeof v); /* ContentTime */
    ck_assert_str_ne(v, "101010");
    tag_value(out, "0008,0022", v, sizeof v); /* AcquisitionDate */
    ck_assert_str_eq(v, "19990101");
}
END_TEST

/* Valid UTF-8 and the number of code points (-1 when invalid). */
static int utf8_chars(const char *s)
{
    int n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; n++) {
        int l = *p < 0x80 ? 1 : (*p & 0xE0) == 0xC0 ? 2 : (*p & 0xF0) == 0xE0 ? 3 : 4;
        for (int k = 1; k < l; k++)
            if ((p[k] & 0xC0) != 0x80)
                return -1;
        p += l;
    }
    return n;
}

START_TEST(series_description_keeps_the_suffix_and_whole_characters)
{
    char out[65], base[256] = "";
    scp_fit_description("CHEST", " [DN]", "", out, sizeof out);
    ck_assert_str_eq(out, "CHEST [DN]");
    /* 62 ASCII characters: the base is cut, never the suffix. */
    memset(base, 'A', 62);
    base[30] = ' ';
    scp_fit_description(base, " [DN]", "ISO_IR 100", out, sizeof out);
    ck_assert_uint_eq(strlen(out), 64);
    ck_assert_str_eq(out + 59, " [DN]");
    /* 62 characters, 8 of them two-byte UTF-8 (70 bytes). */
    char utf[256] = "";
    for (int i = 0; i < 54; i++)
        strcat(utf, "B");
    for (int i = 0; i < 8; i++)
        strcat(utf, "\xc3\xa4");
    scp_fit_description(utf, " [DN]", "ISO_IR 192", out, sizeof out);
    ck_assert_int_ge(utf8_chars(out), 0); /* valid: no character split */
    ck_assert_uint_le(strlen(out), 64);
    ck_assert_uint_ge(strlen(out), 63);
    ck_assert_str_eq(out + strlen(out) - 5, " [DN]");
    /* 63 'A' and an a-umlaut: 65 bytes, cut before it, not inside it. */
    memset(base, 'A', 63);
    strcpy(base + 63, "\xc3\xa4");
    scp_fit_description(base, NULL, "ISO_IR 192", out, sizeof out);
    ck_assert_int_eq(utf8_chars(out), 63);
    ck_assert_uint_eq(strlen(out), 63);
    /* 62 'A' and an a-umlaut fit (64 bytes). */
    base[62] = 0;
    strcat(base, "\xc3\xa4");
    scp_fit_description(base, NULL, "ISO_IR 192", out, sizeof out);
    ck_assert_uint_eq(strlen(out), 64);
    /* ISO 2022: never cut after a code switch. */
    memset(base, 'C', 70);
    base[70] = 0;
    memcpy(base + 10, "\x1b$B", 3);
    scp_fit_description(base, " [DN]", "\\ISO 2022 IR 87", out, sizeof out);
    ck_assert_str_eq(out, "CCCCCCCCCC [DN]");
    /* Before the first escape a value is in value 1's single-byte set
     * (Latin-1 here): the cut may fall after its non-ASCII letters. */
    memset(base, 'C', 70);
    base[70] = 0;
    base[3] = (char)0xd6;
    memcpy(base + 66, "\x1b-F", 3);
    scp_fit_description(base, " [DN]", "ISO 2022 IR 100\\ISO 2022 IR 126", out, sizeof out);
    ck_assert_uint_eq(strlen(out), 64);
    ck_assert_int_eq((unsigned char)out[3], 0xd6);
    ck_assert_str_eq(out + 59, " [DN]");
}
END_TEST

/* Rules are UTF-8 (the configuration file); a Latin-1 source's Series
 * Description must reach them as UTF-8, or a pattern with an umlaut never
 * matches it. */
START_TEST(rule_fields_are_read_as_utf8)
{
    char path[512], cmd[1024];
    path_of(path, sizeof path, "latin1.dcm");
    write_ct(path, NULL, "1.2.826.0.1.3680043.9.7.1.9");
    snprintf(cmd, sizeof cmd,
             "dcmodify -q -nb -m '(0008,0005)=ISO_IR 100' -m '(0008,103e)=THORAX D\xd6SIS' "
             "-i '(0018,1030)=PROTOKOLL \xdc' -i '(0008,0070)=M\xfcller' %s",
             path);
    ck_assert_int_eq(system(cmd), 0);
    scp_slice_info info;
    char err[256] = "";
    ck_assert_int_eq(scp_slice_read_info(path, &info, err, sizeof err), 0);
    ck_assert_str_eq(info.series_description, "THORAX D\xc3\x96SIS");
    ck_assert_str_eq(info.protocol_name, "PROTOKOLL \xc3\x9c");
    ck_assert_str_eq(info.manufacturer, "M\xc3\xbcller");
    scp_slice_info_free(&info);
}
END_TEST

/* Sets the Specific Character Set and Series Description of the file at
 * path and checks the description the rules get. */
static void description_read_as(const char *path, const char *charset, const char *value,
                                const char *expected)
{
    char cmd[1024], err[256] = "";
    snprintf(cmd, sizeof cmd, "dcmodify -q -nb -i '(0008,0005)=%s' -m '(0008,103e)=%s' %s", charset,
             value, path);
    ck_assert_int_eq(system(cmd), 0);
    scp_slice_info info;
    ck_assert_int_eq(scp_slice_read_info(path, &info, err, sizeof err), 0);
    ck_assert_str_eq(info.series_description, expected);
    scp_slice_info_free(&info);
}

/* DCMTK converts the Japanese ISO 2022 sets (IR 87, IR 159) only through
 * GNU libiconv. Where it cannot, reading a header must not log an error:
 * Japanese sites declare these sets on every instance, so that would be one
 * error line per instance read. Over ASCII the C library's ISO-2022-JP-2
 * converts them, so kanji patterns match; with IR 13 as value 1 the
 * values stay as received. */
START_TEST(japanese_rule_fields_are_converted_without_an_error_line)
{
    char path[512], cmd[1024], errpath[512];
    path_of(path, sizeof path, "jis.dcm");
    path_of(errpath, sizeof errpath, "stderr.txt");
    write_ct(path, NULL, "1.2.826.0.1.3680043.9.7.1.10");
    snprintf(cmd, sizeof cmd,
             "dcmodify -q -nb -i '(0008,0005)=ISO 2022 IR 6\\ISO 2022 IR 87' "
             "-m '(0008,103e)=CT \x1b$B;3\x1b(B' -i '(0008,0070)=ACME' %s",
             path);
    ck_assert_int_eq(system(cmd), 0);
    scp_slice_info info;
    char err[256] = "";
    fflush(stderr);
    int saved = dup(2), fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(fd, 0);
    dup2(fd, 2);
    close(fd);
    int rc = scp_slice_read_info(path, &info, err, sizeof err);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    ck_assert_int_eq(rc, 0);
    struct stat st;
    ck_assert_int_eq(stat(errpath, &st), 0);
    ck_assert_msg(st.st_size == 0, "reading the header wrote %lld bytes to stderr",
                  (long long)st.st_size);
    ck_assert_str_eq(info.series_description, "CT \xe5\xb1\xb1"); /* CT 山, in UTF-8 */
    ck_assert_str_eq(info.manufacturer, "ACME");
    scp_slice_info_free(&info);
    /* JIS X 0212 (IR 159) too. */
    description_read_as(path, "\\ISO 2022 IR 87\\ISO 2022 IR 159", "\x1b$(D0!\x1b(B",
                        "\xe4\xb8\x82"); /* 丂 */
    /* Half-width katakana (IR 13, 8-bit bytes) is not ISO-2022-JP-2: kept
     * as received. */
    description_read_as(path, "ISO 2022 IR 13\\ISO 2022 IR 87", "CT \xb6", "CT \xb6");
}
END_TEST

/* A rule's suffix is UTF-8 (the configuration file); the derived Series
 * Description must be in the source's Specific Character Set, which the
 * derived dataset keeps, and never mix two encodings. */
START_TEST(series_description_suffix_is_written_in_the_source_charset)
{
    char out[65];
    /* Latin-1 source: e-acute is the one byte 0xE9 there. */
    scp_fit_description("THORAX D\xd6SIS",
                        " [d\xc3\xa9"
                        "bruit\xc3\xa9]",
                        "ISO_IR 100", out, sizeof out);
    ck_assert_str_eq(out, "THORAX D\xd6SIS [d\xe9"
                          "bruit\xe9]");
    /* With code extensions, G1 starts as Latin-1 too. */
    scp_fit_description("A", " \xc3\xa9", "ISO 2022 IR 100\\ISO 2022 IR 126", out, sizeof out);
    ck_assert_str_eq(out, "A \xe9");
    /* Latin-2 (Czech): c-caron is 0xE8 there. */
    scp_fit_description("HRUDNIK", " [\xc4\x8d]", "ISO_IR 101", out, sizeof out);
    ck_assert_str_eq(out, "HRUDNIK [\xe8]");
    /* UTF-8 source: as written. */
    scp_fit_description("CHEST",
                        " [d\xc3\xa9"
                        "bruit\xc3\xa9]",
                        "ISO_IR 192", out, sizeof out);
    ck_assert_str_eq(out, "CHEST [d\xc3\xa9"
                          "bruit\xc3\xa9]");
    /* Default repertoire (no Specific Character Set): ASCII only, the
     * accent dropped, what has no base letter a '?'. */
    scp_fit_description("CHEST",
                        " [d\xc3\xa9"
                        "bruit\xc3\xa9]",
                        "", out, sizeof out);
    ck_assert_str_eq(out, "CHEST [debruite]");
    scp_fit_description("CHEST", " [\xe5\xb1\xb1]", "", out, sizeof out);
    ck_assert_str_eq(out, "CHEST [?]");
    /* Latin-1 lacks c-caron: its base letter. Invalid UTF-8: '?'. */
    scp_fit_description("CHEST", " \xc4\x8d\xff", "ISO_IR 100", out, sizeof out);
    ck_assert_str_eq(out, "CHEST c?");
    /* Japanese with code extensions starts in ASCII: no raw bytes. */
    scp_fit_description("CHEST", " \xc3\xa9", "\\ISO 2022 IR 87", out, sizeof out);
    ck_assert_str_eq(out, "CHEST e");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("scp");
    TCase *tc = tcase_create("scp");
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, read_back_matches_written_pixels_in_every_syntax, 0,
                        (int)(sizeof SYNTAXES / sizeof SYNTAXES[0]));
    tcase_add_test(tc, read_hu_refuses_a_wrong_count_and_non_dicom);
    tcase_add_test(tc, corrupt_deflated_dataset_frees_its_inflater);
    tcase_add_test(tc, a_syntax_without_decoder_is_named_as_such);
    tcase_add_test(tc, derived_series_number_stays_in_the_is_range);
    tcase_add_test(tc, ct_exposure_outside_the_is_range_is_left_out);
    tcase_add_loop_test(tc, derived_instance_has_new_identity_and_rounded_clamped_values, 0, 2);
    tcase_add_test(tc, derived_instance_adds_no_dciodvfy_error);
    tcase_add_loop_test(tc, derived_instance_keeps_padding_pixels_exactly, 0, 2);
    tcase_add_test(tc, padding_value_outside_the_stored_bits_matches_nothing);
    tcase_add_test(tc, enhanced_ct_geometry_and_per_frame_rescale);
    tcase_add_test(tc, send_files_to_storescp_succeeds_converting_compressed_files);
    tcase_add_test(tc, send_files_to_a_closed_port_is_enet_quickly);
    tcase_add_test(tc, send_files_to_a_silent_peer_ends_within_the_timeout);
    tcase_add_test(tc, send_files_rejected_is_epeer_with_the_reason);
    tcase_add_test(tc, an_exception_in_an_association_gives_its_slot_back);
    tcase_add_test(tc, series_description_keeps_the_suffix_and_whole_characters);
    tcase_add_test(tc, series_description_suffix_is_written_in_the_source_charset);
    tcase_add_test(tc, japanese_rule_fields_are_converted_without_an_error_line);
    tcase_add_test(tc, rule_fields_are_read_as_utf8);
    tcase_add_test(tc, derived_series_is_dated_now_and_keeps_the_acquisition);
    tcase_add_test(tc, no_data_counts_as_idle_only_after_the_whole_dimse_timeout);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    scp_global_cleanup(); /* leak-clean under CK_FORK=no */
    return failed ? 1 : 0;
}
