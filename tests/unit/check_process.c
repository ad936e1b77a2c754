/* Unit tests for pipeline/process and pipeline/derive: the CPU fallback of
 * a failing GPU, the identity and derived metadata of every written
 * instance, rounding and clamping to the stored range, UIDs reused when a
 * job is redone, noise actually reduced, the automatic choice of 2D or 3D
 * with its default radii, the stored parameter string, multi-frame sources
 * and the refusal of an inconsistent series. Fixtures are written with
 * scp_ct_write, dcmodify and dump2dcm into a fresh directory; volumes are
 * tiny because the CPU reference does the filtering. */
#include "common/err.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "config/config.h"
#include "gpu/adaptive4d.h"
#include "gpu/device.h"
#include "pipeline/assemble.h"
#include "pipeline/derive.h"
#include "pipeline/process.h"
#include "scp/scp.h"
#include "tests/unit/progress_log.h"
#include "tests/unit/testutil.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAXF 16
#define STUDY "1.2.826.0.1.3680043.9.7.9"
#define SERIES "1.2.826.0.1.3680043.9.7.9.1"
#define FOR_UID "1.2.826.0.1.3680043.9.7.9.2"
#define UID_ROOT "1.2.826.0.1.3680043.9.7.99"
#define FIXED_SERIES UID_ROOT ".500"
#define SUFFIX " [DN]"
#define OFFSET 1000

static char dir[64], in_dir[96], out_dir[96];
static char paths[MAXF][160];
static const char *pv[MAXF];
static int nfiles;

static void setup(void)
{
    log_level = LOG_LVL_ERR;
    tu_tmpdir(dir, sizeof dir);
    snprintf(in_dir, sizeof in_dir, "%s/in", dir);
    snprintf(out_dir, sizeof out_dir, "%s/out", dir);
    ck_assert_int_eq(mkdir(in_dir, 0700), 0);
    nfiles = 0;
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* ---- fixtures ------------------------------------------------------------ */

/* Deterministic standard normal deviates (xorshift64 and Box-Muller), so a
 * failure reproduces. */
static uint64_t rng_state = 88172645463325252ull;

static double uniform01(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return ((double)(rng_state >> 11) + 0.5) / 9007199254740992.0;
}

static double gauss(void)
{
    return sqrt(-2 * log(uniform01())) * cos(2 * M_PI * uniform01());
}

/* One axial slice of the test series: instance 11 + k at z = k * step. */
static scp_ct_params slice(int k, int cols, int rows, double thickness, double step)
{
    scp_ct_params p = {.patient_name = "TEST^PROCESS",
                       .patient_id = "P2",
                       .study_uid = STUDY,
                       .series_uid = SERIES,
                       .frame_of_reference_uid = FOR_UID,
                       .series_description = "CHEST",
                       .series_number = 3,
                       .instance_number = 11 + k,
                       .rows = rows,
                       .cols = cols,
                       .pixel_spacing = {0.7, 0.8},
                       .slice_thickness = thickness,
                       .position = {-10, -20, 30 + k * step},
                       .orientation = {1, 0, 0, 0, 1, 0},
                       .rescale_slope = 1,
                       .rescale_intercept = -1024,
                       .kvp = 120};
    return p;
}

/* Writes p as the next input file with pixels hu + N(0, sd) (HU, rescale
 * slope 1 and intercept -1024 assumed). */
static void write_slice(scp_ct_params p, double hu, double sd)
{
    static int16_t px[64 * 64];
    char sop[80];
    ck_assert_int_le(p.rows * p.cols, 64 * 64);
    for (int i = 0; i < p.rows * p.cols; i++)
        px[i] = (int16_t)lrint(hu + sd * gauss() + 1024);
    p.pixels = px;
    snprintf(sop, sizeof sop, SERIES ".%d", nfiles + 1);
    p.sop_uid = sop;
    snprintf(paths[nfiles], sizeof paths[0], "%s/f%02d.dcm", in_dir, nfiles + 1);
    ck_assert_int_eq(scp_ct_write(&p, paths[nfiles]), 0);
    pv[nfiles] = paths[nfiles];
    nfiles++;
}

/* nz slices of cols x rows, thickness and spacing `thickness` (mm). */
static void write_series(int cols, int rows, int nz, double thickness, double hu, double sd)
{
    for (int k = 0; k < nz; k++)
        write_slice(slice(k, cols, rows, thickness, thickness), hu, sd);
}

/* nlm3d defaults (radii 0: the algorithm's), h from the noise, CPU. */
static process_opts opts(void)
{
    process_opts o = {.algorithm = ALGO_AUTO,
                      .uid_root = UID_ROOT,
                      .description_suffix = SUFFIX,
                      .series_number_offset = OFFSET,
                      .out_dir = out_dir};
    gpu_nlm_params_default(&o.nlm);
    o.nlm.search_radius = o.nlm.patch_radius = 0;
    return o;
}

static void process_ok(const process_opts *o, process_result *r)
{
    char err[512] = "";
    int rc = process_series(pv, nfiles, o, r, err, sizeof err);
    ck_assert_msg(rc == 0, "process_series: %d %s", rc, err);
    ck_assert_int_eq(r->n, nfiles);
}

/* Entries of d (temp files included); -1 when d does not exist. */
static int count_files(const char *d)
{
    DIR *h = opendir(d);
    if (!h)
        return -1;
    int n = 0;
    const struct dirent *e;
    while ((e = readdir(h)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            n++;
    closedir(h);
    return n;
}

static void read_info(const char *path, scp_slice_info *info)
{
    char err[256] = "";
    int rc = scp_slice_read_info(path, info, err, sizeof err);
    ck_assert_msg(rc == 0, "read_info %s: %d %s", path, rc, err);
}

/* HU of every pixel of path (count values). */
static float *read_hu(const char *path, size_t count)
{
    float *v = malloc(count * sizeof *v);
    char err[256] = "";
    ck_assert_ptr_nonnull(v);
    int rc = scp_slice_read_hu(path, v, count, err, sizeof err);
    ck_assert_msg(rc == 0, "read_hu %s: %d %s", path, rc, err);
    return v;
}

/* What `dcmdump -q +L +p +P tag path` prints (whole values, each hit with
 * its sequence path), for attributes scp_slice_info does not carry. */
static void dump_tag(const char *path, const char *tag, char *out, size_t len)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "dcmdump -q +L +p +P %s %s", tag, path);
    tu_command_output(cmd, out, len);
}

/* ---- GPU fallback -------------------------------------------------------- */

/* GPU 99 exists on no machine: the CUDA path fails (no device, or a memory
 * budget of 0) and the CPU reference must do the work, and say so. */
START_TEST(gpu_failure_falls_back_to_cpu)
{
    write_series(16, 16, 3, 1, 0, 20);
    const gpu_device absent = {.kind = GPU_DEVICE_CUDA, .index = 99};
    process_opts o = opts();
    o.dev = &absent;
    process_result r;
    process_ok(&o, &r);
    ck_assert_int_eq(r.gpu_fallback, 1);
    ck_assert_str_eq(r.device, "cpu");
    ck_assert_str_eq(r.algorithm, "nlm3d");
    ck_assert_int_eq(count_files(out_dir), 3);
    for (int i = 0; i < r.n; i++)
        ck_assert_int_eq(access(r.paths[i], R_OK), 0);
    process_result_free(&r);
}
END_TEST

/* ---- identity and derived metadata -------------------------------------- */

START_TEST(derived_instances_carry_new_uids_and_derived_metadata)
{
    write_series(32, 32, 6, 1, 40, 20);
    process_opts o = opts();
    o.algorithm = ALGO_NLM3D;
    process_result r;
    process_ok(&o, &r);
    ck_assert_str_eq(r.algorithm, "nlm3d");
    ck_assert_str_eq(r.device, "cpu");
    ck_assert_int_eq(r.gpu_fallback, 0);
    ck_assert_int_eq(strncmp(r.series_uid, UID_ROOT ".", strlen(UID_ROOT ".")), 0);
    ck_assert_str_ne(r.series_uid, SERIES);
    ck_assert_int_eq(count_files(out_dir), nfiles);
    for (int i = 0; i < r.n; i++) {
        scp_slice_info src, out;
        read_info(paths[i], &src);
        read_info(r.paths[i], &out);
        ck_assert_str_eq(r.source_sops[i], src.sop_instance_uid);
        /* Identity: a new instance of a new series in the same study. */
        ck_assert_str_eq(out.sop_instance_uid, r.derived_sops[i]);
        ck_assert_str_ne(out.sop_instance_uid, src.sop_instance_uid);
        ck_assert_int_eq(strncmp(out.sop_instance_uid, UID_ROOT ".", strlen(UID_ROOT ".")), 0);
        for (int j = 0; j < i; j++)
            ck_assert_str_ne(r.derived_sops[j], r.derived_sops[i]);
        ck_assert_str_eq(out.series_uid, r.series_uid);
        ck_assert_str_eq(out.study_uid, STUDY);
        ck_assert_str_eq(out.frame_of_reference_uid, FOR_UID);
        ck_assert_str_eq(out.sop_class_uid, src.sop_class_uid);
        ck_assert_str_eq(out.series_description, "CHEST" SUFFIX);
        ck_assert_int_eq(out.series_number, 3 + OFFSET);
        /* Geometry: the derived image lies exactly where its source does. */
        ck_assert_int_eq(out.rows, src.rows);
        ck_assert_int_eq(out.cols, src.cols);
        ck_assert_int_eq(out.has_position && out.has_orientation && out.has_spacing, 1);
        for (int a = 0; a < 3; a++)
            ck_assert_double_eq(out.position[a], src.position[a]);
        for (int a = 0; a < 6; a++)
            ck_assert_double_eq(out.orientation[a], src.orientation[a]);
        ck_assert_double_eq(out.pixel_spacing[0], src.pixel_spacing[0]);
        ck_assert_double_eq(out.pixel_spacing[1], src.pixel_spacing[1]);
        ck_assert_double_eq(out.slice_thickness, src.slice_thickness);
        ck_assert_double_eq(out.rescale_slope, src.rescale_slope);
        ck_assert_double_eq(out.rescale_intercept, src.rescale_intercept);
        scp_slice_info_free(&src);
        scp_slice_info_free(&out);

        char d[2048];
        dump_tag(r.paths[i], "0008,0008", d, sizeof d);
        ck_assert_msg(strstr(d, "(0008,0008) CS [DERIVED\\SECONDARY\\") != NULL, "ImageType: %s",
                      d);
        dump_tag(r.paths[i], "0008,2111", d, sizeof d);
        ck_assert_msg(strstr(d, "nlm3d") && strstr(d, "search radius 5") &&
                          strstr(d, "patch radius 2"),
                      "DerivationDescription: %s", d);
        /* The figures add up: h = sqrt(2) x noise x strength. */
        float h = 0, noise = 0, strength = 0;
        const char *hs = strstr(d, ", h ");
        ck_assert_msg(
            hs && sscanf(hs, ", h %f (1.41 x noise %f x strength %f)", &h, &noise, &strength) == 3,
            "DerivationDescription: %s", d);
        ck_assert_msg(fabsf(h - 1.41421f * noise * strength) <= 0.1f, "h %g, noise %g x %g", h,
                      noise, strength);
        char want[128];
        snprintf(want, sizeof want, "(0008,2112).(0008,1155) UI [%s]", r.source_sops[i]);
        dump_tag(r.paths[i], "0008,1155", d, sizeof d);
        ck_assert_msg(strstr(d, want) != NULL, "SourceImageSequence lacks %s: %s", want, d);
        /* Series Date/Time: one value for the whole series (series level),
         * the one process_series reported. */
        char want_time[64];
        time_t dated = (time_t)(r.dated_ms / 1000);
        struct tm tm;
        localtime_r(&dated, &tm);
        strftime(want_time, sizeof want_time, "(0008,0031) TM [%H%M%S]", &tm);
        dump_tag(r.paths[i], "0008,0031", d, sizeof d);
        ck_assert_msg(strstr(d, want_time) != NULL, "SeriesTime %s, want %s", d, want_time);
    }
    process_result_free(&r);
}
END_TEST

/* ---- stored values ------------------------------------------------------- */

#define CR 6
#define CC 8

/* HU after a round trip through stored value v = round((hu - b) / m)
 * clamped to [lo, hi]. */
static float stored_hu(double hu, double m, double b, long lo, long hi)
{
    double s = nearbyint((hu - b) / m);
    s = s < lo ? lo : s > hi ? hi : s;
    return (float)(s * m + b);
}

START_TEST(values_are_rounded_and_clamped_to_the_stored_range)
{
    /* Two 12-bit signed slices (stored -2048..2047): the second with its
     * own rescale, so the clamp is on stored values, not on HU. */
    static const double slope[2] = {1, 2}, icpt[2] = {-1024, -1000};
    for (int k = 0; k < 2; k++) {
        scp_ct_params p = slice(k, CC, CR, 1, 1);
        p.rescale_slope = slope[k];
        p.rescale_intercept = icpt[k];
        write_slice(p, 0, 0);
        char cmd[512];
        snprintf(cmd, sizeof cmd, "dcmodify -q -nb -m '(0028,0101)=12' -m '(0028,0102)=11' %s",
                 paths[k]);
        ck_assert_int_eq(system(cmd), 0);
    }
    asm_series s;
    char err[512] = "";
    ck_assert_msg(asm_series_load(pv, nfiles, &s, err, sizeof err) == 0, "load: %s", err);
    gpu_volume v = {0};
    ck_assert_int_eq(gpu_volume_init(&v, CC, CR, 2, 1), 0);
    static const float special[] = {1e6f, -1e6f, 12.6f, -12.6f, 1023.4f, -3071.6f};
    const int nspecial = (int)(sizeof special / sizeof special[0]);
    for (size_t i = 0; i < gpu_volume_count(&v); i++)
        v.data[i] = special[i % (size_t)nspecial];
    char uids[2][DERIVE_UID_LEN] = {UID_ROOT ".1", UID_ROOT ".2"}, out[2][DERIVE_PATH_LEN];
    derive_params dp = {.series_uid = FIXED_SERIES,
                        .description_suffix = SUFFIX,
                        .series_number_offset = OFFSET,
                        .derivation = "test",
                        .out_dir = out_dir};
    int rc = derive_series_write(&s, &v, &dp, uids, out, err, sizeof err);
    ck_assert_msg(rc == 0, "derive: %d %s", rc, err);
    for (int k = 0; k < 2; k++) {
        ck_assert_int_eq(s.src[k].frames, 1);
        const int z = s.src[k].z[0];
        float *hu = read_hu(out[k], CR * CC);
        for (int i = 0; i < CR * CC; i++) {
            double want = special[((size_t)z * CR * CC + (size_t)i) % (size_t)nspecial];
            ck_assert_msg(hu[i] == stored_hu(want, slope[k], icpt[k], -2048, 2047),
                          "slice %d pixel %d: %g for %g", k, i, hu[i], want);
        }
        free(hu);
    }
    /* The same expectations written out, so a wrong helper cannot hide a
     * wrong writer: 12.6 rounds to 13, 1e6 stops at 2047 - 1024. */
    ck_assert_float_eq(stored_hu(1e6, 1, -1024, -2048, 2047), 1023);
    ck_assert_float_eq(stored_hu(-1e6, 1, -1024, -2048, 2047), -3072);
    ck_assert_float_eq(stored_hu(12.6, 1, -1024, -2048, 2047), 13);
    ck_assert_float_eq(stored_hu(-12.6, 1, -1024, -2048, 2047), -13);
    ck_assert_float_eq(stored_hu(1e6, 2, -1000, -2048, 2047), 3094);
    ck_assert_float_eq(stored_hu(-1e6, 2, -1000, -2048, 2047), -5096);
    gpu_volume_close(&v);
    asm_series_close(&s);
}
END_TEST

/* ---- a full disk --------------------------------------------------------- */

/* Writes past 8 KiB fail (RLIMIT_FSIZE, as a full disk does for the last
 * part of a file): no derived file may be published cut short, and the
 * failed series leaves nothing in its output folder. The test runs in its
 * own process (Check's fork mode); the limit is lifted at the end. */
START_TEST(a_file_cut_short_fails_the_series_and_leaves_nothing)
{
    write_series(64, 64, 3, 1, 0, 20); /* ~9.9 KB per derived file */
    process_opts o = opts();
    struct rlimit old, lim;
    ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
    /* Only the soft limit: a lowered hard limit could not be raised back,
     * and the tests after this one (CK_FORK=no) would write into it. */
    lim.rlim_cur = 8192;
    lim.rlim_max = old.rlim_max;
    signal(SIGXFSZ, SIG_IGN);
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    process_result r;
    char err[512] = "";
    int rc = process_series(pv, nfiles, &o, &r, err, sizeof err);
    setrlimit(RLIMIT_FSIZE, &old);
    ck_assert_msg(rc != 0, "a series with files cut short was written");
    ck_assert_msg(strstr(err, "written incomplete") || strstr(err, "cannot write"), "%s", err);
    ck_assert_int_le(count_files(out_dir), 0); /* no file, no temporary */
}
END_TEST

/* A result with no room is not started: no UIDs made, nothing written, a
 * message that says what it waits for (the worker then waits, no attempt
 * used). The room asked for includes min_free_mb. */
static int uid_calls;
static int counting_uids(void *ctx, int n, const char *const *source_sops,
                         char (*uids)[DERIVE_UID_LEN], char *series_uid, int64_t *dated_ms)
{
    (void)ctx, (void)n, (void)source_sops, (void)uids, (void)series_uid, (void)dated_ms;
    uid_calls++;
    return 0;
}

START_TEST(a_result_without_room_is_not_started)
{
    write_series(64, 64, 3, 1, 0, 20);
    uint64_t free_mb = 0;
    ck_assert_int_eq(fs_free_mb(dir, &free_mb), 0);
    process_opts o = opts();
    o.uids = counting_uids;
    o.min_free_mb = (int)(2 * free_mb + 2); /* results keep half: 1 MB more than there is */
    uid_calls = 0;
    process_result r;
    char err[512] = "";
    int rc = process_series(pv, nfiles, &o, &r, err, sizeof err);
    ck_assert_int_eq(rc, LDCT_ENOSPACE);
    ck_assert_msg(strstr(err, "the result needs about") && strstr(err, dir), "%s", err);
    ck_assert_int_eq(uid_calls, 0);
    ck_assert_int_le(count_files(out_dir), 0);
    o.min_free_mb = 0; /* the same series with room: processed */
    process_ok(&o, &r);
    process_result_free(&r);
}
END_TEST

/* The room asked for is the result's size plus half of min_free_mb; a
 * result larger than the whole disk is a permanent error, not a wait. */
START_TEST(room_is_the_result_plus_half_the_reserve)
{
    process_opts o = opts();
    o.out_dir = out_dir; /* not made yet: its parent's disk counts */
    uint64_t free_mb = 0, avail = 0, total = 0;
    ck_assert_int_eq(fs_free_mb(dir, &free_mb), 0);
    ck_assert_int_eq(fs_space_bytes(dir, &avail, &total), 0);
    char err[512] = "";
    const uint64_t mb = 1u << 20, m = 64; /* margin: other programs write too */
    ck_assert_uint_gt(free_mb, 2 * m);
    ck_assert_int_eq(process_check_room(&o, mb, 1, err, sizeof err), 0);
    ck_assert_int_eq(process_check_room(&o, (free_mb + m) * mb, 1, err, sizeof err), LDCT_ENOSPACE);
    ck_assert_msg(strstr(err, "the result needs about") && strstr(err, dir), "%s", err);
    o.min_free_mb = (int)(2 * (free_mb - m)); /* results keep half: m MB under what is free */
    ck_assert_int_eq(process_check_room(&o, mb, 1, err, sizeof err), 0);
    ck_assert_int_eq(process_check_room(&o, 2 * m * mb, 1, err, sizeof err), LDCT_ENOSPACE);
    o.min_free_mb = 1; /* half of 1 MB is 0.5 MB, not 0 */
    ck_assert_int_eq(process_check_room(&o, (free_mb + m) * mb, 1, err, sizeof err), LDCT_ENOSPACE);
    ck_assert_msg(strstr(err, "results leave 0.5 MB"), "%s", err);
    o.min_free_mb = 0;
    ck_assert_int_eq(process_check_room(&o, total + mb, 1, err, sizeof err), LDCT_EINPUT);
    ck_assert_msg(strstr(err, "in all"), "%s", err);
}
END_TEST

/* A result needs a free inode per file besides PROCESS_KEEP_INODES: more
 * files than that is a wait (LDCT_ENOSPACE), as for space. */
START_TEST(room_counts_the_result_files_in_inodes)
{
    process_opts o = opts();
    o.out_dir = out_dir;
    o.min_free_mb = 0;
    uint64_t inodes = 0;
    ck_assert_int_eq(fs_free_inodes(dir, &inodes), 0);
    if (inodes == UINT64_MAX)
        return; /* a file system without an inode count: nothing to run out of */
    char err[512] = "";
    ck_assert_uint_gt(inodes, 4096);
    ck_assert_int_eq(process_check_room(&o, 1, 100, err, sizeof err), 0);
    ck_assert_int_eq(process_check_room(&o, 1, inodes, err, sizeof err), LDCT_ENOSPACE);
    ck_assert_msg(strstr(err, "free inodes (results leave 128)") && strstr(err, dir), "%s", err);
}
END_TEST

/* ---- redone jobs --------------------------------------------------------- */

/* The database of the test: one stored derived UID per source SOP, looked up
 * by the source's UID (not its position in the call). */
typedef struct uid_table {
    int n, calls;
    char source[MAXF][DERIVE_UID_LEN], derived[MAXF][DERIVE_UID_LEN];
    char series[DERIVE_UID_LEN]; /* non-empty: the derived series UID to use */
} uid_table;

static int stored_uids(void *ctx, int n, const char *const *source_sops,
                       char (*uids)[DERIVE_UID_LEN], char *series_uid, int64_t *dated_ms)
{
    (void)dated_ms;
    uid_table *t = ctx;
    t->calls++;
    if (t->series[0])
        snprintf(series_uid, DERIVE_UID_LEN, "%s", t->series);
    for (int i = 0; i < n; i++) {
        int j = 0;
        while (j < t->n && strcmp(t->source[j], source_sops[i]) != 0)
            j++;
        if (j == t->n)
            return LDCT_EINPUT;
        snprintf(uids[i], DERIVE_UID_LEN, "%s", t->derived[j]);
    }
    return 0;
}

START_TEST(redone_job_reuses_the_stored_uids)
{
    write_series(16, 16, 3, 1, 0, 20);
    uid_table t = {.n = nfiles};
    for (int j = 0; j < nfiles; j++) {
        /* Stored in reverse order, so position and identity differ. */
        snprintf(t.source[j], DERIVE_UID_LEN, SERIES ".%d", nfiles - j);
        snprintf(t.derived[j], DERIVE_UID_LEN, UID_ROOT ".7.%d", nfiles - j);
    }
    process_opts o = opts();
    o.series_uid = FIXED_SERIES;
    o.uids = stored_uids;
    o.uids_ctx = &t;
    process_result r1, r2;
    process_ok(&o, &r1);
    ck_assert_int_eq(t.calls, 1);
    ck_assert_int_eq(count_files(out_dir), nfiles);
    /* A crash left a damaged file behind: the redone job must replace it. */
    FILE *f = fopen(r1.paths[0], "w");
    ck_assert_ptr_nonnull(f);
    fputs("torn write", f);
    fclose(f);
    process_ok(&o, &r2);
    ck_assert_int_eq(t.calls, 2);
    ck_assert_int_eq(count_files(out_dir), nfiles);
    ck_assert_str_eq(r1.series_uid, FIXED_SERIES);
    ck_assert_str_eq(r2.series_uid, FIXED_SERIES);
    for (int i = 0; i < nfiles; i++) {
        char want_sop[DERIVE_UID_LEN], want_path[DERIVE_PATH_LEN];
        snprintf(want_sop, sizeof want_sop, UID_ROOT ".7.%d", i + 1); /* file i is SERIES.i+1 */
        snprintf(want_path, sizeof want_path, "%s/%s.dcm", out_dir, want_sop);
        ck_assert_str_eq(r1.derived_sops[i], want_sop);
        ck_assert_str_eq(r2.derived_sops[i], want_sop);
        ck_assert_str_eq(r1.paths[i], want_path);
        ck_assert_str_eq(r2.paths[i], want_path);
        scp_slice_info info;
        read_info(r2.paths[i], &info);
        ck_assert_str_eq(info.sop_instance_uid, want_sop);
        ck_assert_str_eq(info.series_uid, FIXED_SERIES);
        scp_slice_info_free(&info);
    }
    /* The store gives the job an earlier job's series UID (same result). */
    snprintf(t.series, sizeof t.series, UID_ROOT ".8.1");
    process_result r3;
    process_ok(&o, &r3);
    ck_assert_str_eq(r3.series_uid, UID_ROOT ".8.1");
    scp_slice_info info;
    read_info(r3.paths[0], &info);
    ck_assert_str_eq(info.series_uid, UID_ROOT ".8.1");
    scp_slice_info_free(&info);
    process_result_free(&r1);
    process_result_free(&r2);
    process_result_free(&r3);
}
END_TEST

/* ---- the filter ---------------------------------------------------------- */

/* Mean and standard deviation of the HU of the centre (the border of `b`
 * pixels and the first and last slice left out) of the n nx x ny files. */
static void centre_stats(const char *const *files, int n, int nx, int ny, int b, double *mean,
                         double *sd)
{
    double s = 0, s2 = 0;
    long cnt = 0;
    for (int k = 1; k < n - 1; k++) {
        float *hu = read_hu(files[k], (size_t)nx * ny);
        for (int y = b; y < ny - b; y++)
            for (int x = b; x < nx - b; x++) {
                double v = hu[y * nx + x];
                s += v;
                s2 += v * v;
                cnt++;
            }
        free(hu);
    }
    *mean = s / cnt;
    *sd = sqrt(s2 / cnt - *mean * *mean);
}

START_TEST(denoising_reduces_noise_in_a_uniform_region)
{
    write_series(32, 32, 6, 1, 0, 20);
    process_opts o = opts();
    process_result r;
    process_ok(&o, &r);
    ck_assert_str_eq(r.algorithm, "nlm3d");
    ck_assert_msg(r.noise_sigma > 15 && r.noise_sigma < 25, "noise estimate %g", r.noise_sigma);
    const char *outs[MAXF];
    for (int i = 0; i < r.n; i++)
        outs[i] = r.paths[i];
    double in_mean, in_sd, out_mean, out_sd;
    centre_stats(pv, nfiles, 32, 32, 6, &in_mean, &in_sd);
    centre_stats(outs, r.n, 32, 32, 6, &out_mean, &out_sd);
    ck_assert_msg(in_sd > 17 && in_sd < 23, "input sd %g", in_sd);
    ck_assert_msg(out_sd <= in_sd / 2, "sd %g -> %g", in_sd, out_sd);
    ck_assert_msg(fabs(out_mean) < 2, "mean %g -> %g", in_mean, out_mean);
    process_result_free(&r);
}
END_TEST

START_TEST(reading_filtering_and_writing_report_their_progress)
{
    write_series(32, 32, 12, 1, 0, 20);
    omp_set_num_threads(1); /* the caller reports, so it must read and write some files */
    process_opts o = opts();
    progress_log *l = calloc(1, sizeof *l);
    ck_assert_ptr_nonnull(l);
    o.progress = pl_record;
    o.progress_ctx = l;
    process_result r;
    process_ok(&o, &r);
    /* 12 files: 24 steps of reading (headers, then pixels) and 12 of
     * writing. */
    int i = pl_expect_stage(l, 0, "reading", 1);
    i = pl_expect_stage(l, i, "filtering", 1);
    i = pl_expect_stage(l, i, "writing", 1);
    ck_assert_int_eq(i, l->n);
    process_result_free(&r);
    free(l);
}
END_TEST

/* DerivationDescription of the first derived file. */
static void derivation_of(const process_result *r, char *d, size_t len)
{
    dump_tag(r->paths[0], "0008,2111", d, len);
}

START_TEST(auto_picks_nlm2d_for_thick_slices)
{
    char d[2048];
    write_series(16, 16, 3, 5, 0, 20);
    process_opts o = opts();
    process_result r;
    process_ok(&o, &r);
    ck_assert_str_eq(r.algorithm, "nlm2d");
    derivation_of(&r, d, sizeof d);
    ck_assert_msg(strstr(d, "nlm2d") && strstr(d, "search radius 10, patch radius 3"),
                  "DerivationDescription: %s", d);
    process_result_free(&r);

    /* The same series with 1 mm slices, into a fresh input directory. */
    snprintf(in_dir, sizeof in_dir, "%s/thin", dir);
    snprintf(out_dir, sizeof out_dir, "%s/out-thin", dir);
    ck_assert_int_eq(mkdir(in_dir, 0700), 0);
    nfiles = 0;
    write_series(16, 16, 3, 1, 0, 20);
    o = opts();
    process_ok(&o, &r);
    ck_assert_str_eq(r.algorithm, "nlm3d");
    derivation_of(&r, d, sizeof d);
    ck_assert_msg(strstr(d, "nlm3d") && strstr(d, "search radius 5, patch radius 2"),
                  "DerivationDescription: %s", d);
    process_result_free(&r);
}
END_TEST

/* Gaussian patch weights change the result (same series, same h) and are
 * named in the DerivationDescription; uniform keeps the old text. */
START_TEST(gaussian_patch_weighting_reaches_the_filter)
{
    char d[2048];
    write_series(24, 24, 4, 1, 0, 20);
    process_opts o = opts();
    o.nlm.h_auto = 0;
    o.nlm.h = 40;
    process_result ru, rg;
    process_ok(&o, &ru);
    derivation_of(&ru, d, sizeof d);
    ck_assert_msg(!strstr(d, "Gaussian"), "DerivationDescription: %s", d);
    snprintf(out_dir, sizeof out_dir, "%s/out-gaussian", dir);
    o.nlm.gaussian = 1;
    process_ok(&o, &rg);
    derivation_of(&rg, d, sizeof d);
    ck_assert_msg(
        strstr(d, "patch radius 2 (Gaussian patch weights), distance cutoff 4 h^2, h 40.0"),
        "DerivationDescription: %s", d);
    double diff = 0;
    for (int i = 0; i < ru.n; i++) {
        float *u = read_hu(ru.paths[i], 24 * 24), *g = read_hu(rg.paths[i], 24 * 24);
        for (int k = 0; k < 24 * 24; k++)
            diff += fabs(u[k] - g[k]);
        free(u);
        free(g);
    }
    /* The same weighting twice gives 0; the two differ by about 0.4 HU on
     * average on this flat noise (rounded to integers on storage). */
    ck_assert_msg(diff / (ru.n * 24.0 * 24) > 0.1, "mean |uniform - gaussian| %g HU",
                  diff / (ru.n * 24.0 * 24));
    process_result_free(&ru);
    process_result_free(&rg);
}
END_TEST

/* Mean |a - b| over the derived slices of two results (HU). */
static double mean_abs_diff(const process_result *a, const process_result *b, int nxy)
{
    double diff = 0;
    for (int i = 0; i < a->n; i++) {
        float *u = read_hu(a->paths[i], (size_t)nxy), *g = read_hu(b->paths[i], (size_t)nxy);
        for (int k = 0; k < nxy; k++)
            diff += fabs(u[k] - g[k]);
        free(u);
        free(g);
    }
    return diff / ((double)a->n * nxy);
}

/* A rule's distance_cutoff goes through the job's stored parameters into
 * gpu_nlm_params.cutoff: on flat noise at h 30 (D / h^2 about 0.9 between
 * patches of the same tissue) a cutoff of 1 drops roughly the least similar fifth,
 * so the pixels change; the DerivationDescription names the cutoff, the
 * default too. */
START_TEST(distance_cutoff_from_the_job_reaches_the_filter)
{
    static const double cut[3] = {0, 1, GPU_NLM_DEFAULT_CUTOFF};
    static const char *const said[3] = {"patch radius 2, no distance cutoff, h 30.0",
                                        "patch radius 2, distance cutoff 1 h^2, h 30.0",
                                        "patch radius 2, distance cutoff 4 h^2, h 30.0"};
    write_series(24, 24, 4, 1, 0, 20);
    cfg_rule rule;
    config_rule_init(&rule);
    rule.algorithm = ALGO_NLM3D;
    rule.h = 30;
    process_result r[3];
    for (int i = 0; i < 3; i++) {
        char params[1024], d[2048];
        rule.distance_cutoff = cut[i];
        process_params_format(&rule, params, sizeof params);
        process_opts o = opts();
        ck_assert_int_eq(process_params_parse(params, &o), 0);
        ck_assert_float_eq(o.nlm.cutoff, (float)cut[i]);
        snprintf(out_dir, sizeof out_dir, "%s/out-cut%d", dir, i);
        process_ok(&o, &r[i]);
        derivation_of(&r[i], d, sizeof d);
        ck_assert_msg(strstr(d, said[i]), "cutoff %g: DerivationDescription: %s", cut[i], d);
    }
    double d01 = mean_abs_diff(&r[0], &r[1], 24 * 24);
    printf("mean |no cutoff - cutoff 1| %.2f HU\n", d01);
    /* The same cutoff twice gives exactly 0 (the CPU reference is
     * deterministic); cutoffs 0 and 1 differ by about 0.5 HU here. */
    ck_assert_msg(d01 > 0.1, "mean |no cutoff - cutoff 1| %g HU", d01);
    for (int i = 0; i < 3; i++)
        process_result_free(&r[i]);
}
END_TEST

/* ---- stored parameters --------------------------------------------------- */

START_TEST(process_params_roundtrip)
{
    cfg_rule rule;
    config_rule_init(&rule);
    rule.search_radius = 7;
    rule.patch_radius = 0;
    rule.h = 0;
    rule.strength = 1.5;
    rule.series_number_offset = 2000;
    char s[1024];
    process_params_format(&rule, s, sizeof s);
    process_opts o;
    memset(&o, 0x5A, sizeof o); /* parse must not depend on what was there */
    ck_assert_msg(process_params_parse(s, &o) == 0, "parse '%s'", s);
    ck_assert_int_eq(o.nlm.search_radius, 7);
    ck_assert_int_eq(o.nlm.patch_radius, 0);
    ck_assert_int_eq(o.nlm.h_auto, 1);
    ck_assert_float_eq(o.nlm.strength, 1.5f);
    ck_assert_int_eq(o.series_number_offset, 2000);

    rule.h = 30;
    process_params_format(&rule, s, sizeof s);
    ck_assert_int_eq(process_params_parse(s, &o), 0);
    ck_assert_int_eq(o.nlm.h_auto, 0);
    ck_assert_float_eq(o.nlm.h, 30.0f);

    ck_assert_int_eq(o.nlm.gaussian, 0);

    /* The rule's patch weighting reaches gpu_nlm_params; rows stored before
     * the key existed parse as uniform. */
    rule.patch_weighting = 1;
    process_params_format(&rule, s, sizeof s);
    ck_assert_int_eq(process_params_parse(s, &o), 0);
    ck_assert_int_eq(o.nlm.gaussian, 1);
    ck_assert_int_eq(process_params_parse("search_radius=5 h=0 strength=1", &o), 0);
    ck_assert_int_eq(o.nlm.gaussian, 0);
    ck_assert_int_eq(process_params_parse("patch_weighting=2", &o), LDCT_EINPUT);

    /* distance_cutoff: the rule's value comes back (0 = off is a value);
     * rows stored before the key existed get the default cutoff, which is
     * part of the NLM definition since; out of bounds is refused. */
    ck_assert_float_eq(o.nlm.cutoff, GPU_NLM_DEFAULT_CUTOFF);
    rule.distance_cutoff = 0;
    process_params_format(&rule, s, sizeof s);
    ck_assert_int_eq(process_params_parse(s, &o), 0);
    ck_assert_float_eq(o.nlm.cutoff, 0.0f);
    rule.distance_cutoff = 6.5;
    process_params_format(&rule, s, sizeof s);
    ck_assert_int_eq(process_params_parse(s, &o), 0);
    ck_assert_float_eq(o.nlm.cutoff, 6.5f);
    ck_assert_int_eq(process_params_parse("search_radius=5 h=0 strength=1", &o), 0);
    ck_assert_float_eq(o.nlm.cutoff, GPU_NLM_DEFAULT_CUTOFF);
    ck_assert_int_eq(process_params_parse("distance_cutoff=-1", &o), LDCT_EINPUT);
    ck_assert_int_eq(process_params_parse("distance_cutoff=81", &o), LDCT_EINPUT);
    ck_assert_int_eq(process_params_parse("distance_cutoff=nan", &o), LDCT_EINPUT);
    /* The rule's bounds and default are the engine's. */
    cfg_rule fresh;
    config_rule_init(&fresh);
    ck_assert_double_eq(fresh.distance_cutoff, GPU_NLM_DEFAULT_CUTOFF);
    ck_assert_ptr_null(config_rule_option_set(&fresh, "distance_cutoff", "80"));
    ck_assert_double_eq(fresh.distance_cutoff, GPU_NLM_MAX_CUTOFF);
    ck_assert_ptr_nonnull(config_rule_option_set(&fresh, "distance_cutoff", "80.01"));

    ck_assert_int_eq(process_params_parse("search_radius=5 colour=3", &o), LDCT_EINPUT);
    ck_assert_int_eq(process_params_parse("search_radius=x", &o), LDCT_EINPUT);
    ck_assert_int_eq(process_params_parse("a4d_colour=1", &o), LDCT_EINPUT);
}
END_TEST

/* adaptive4d's mapping parameters: only those a rule sets are stored, and
 * they come back as set; the others stay the engine's. */
START_TEST(process_params_roundtrip_adaptive4d)
{
    cfg_rule rule;
    config_rule_init(&rule); /* what a [rule] without adaptive4d keys holds */
    char s[1024];
    process_opts o;
    process_params_format(&rule, s, sizeof s);
    ck_assert_msg(strstr(s, "a4d_") == NULL, "nothing set, nothing stored: '%s'", s);
    ck_assert_int_eq(process_params_parse(s, &o), 0);
    ck_assert_uint_eq(o.a4d.set, 0);

    rule.a4d_downsample = 1;
    rule.a4d_m_sigma = 4.5;
    rule.a4d_pass_t = 0;
    rule.a4d_static_sigma_t = 0; /* step 6 off: 0 is a value, not "unset" */
    rule.a4d_m_reference = 2;    /* max: the engine's GPU_A4D_NORM_MAX */
    process_params_format(&rule, s, sizeof s);
    memset(&o, 0x5A, sizeof o);
    ck_assert_msg(process_params_parse(s, &o) == 0, "parse '%s'", s);
    ck_assert_uint_eq(o.a4d.set, (1u << A4D_DOWNSAMPLE) | (1u << A4D_M_SIGMA) | (1u << A4D_PASS_T) |
                                     (1u << A4D_STATIC_SIGMA_T) | (1u << A4D_M_REFERENCE));
    ck_assert_double_eq(o.a4d.v[A4D_DOWNSAMPLE], 1);
    ck_assert_double_eq_tol(o.a4d.v[A4D_M_SIGMA], 4.5, 1e-12);
    ck_assert_double_eq(o.a4d.v[A4D_PASS_T], 0);
    ck_assert_double_eq(o.a4d.v[A4D_STATIC_SIGMA_T], 0);
    ck_assert_double_eq(o.a4d.v[A4D_M_REFERENCE], GPU_A4D_NORM_MAX);
}
END_TEST

/* ---- multi-frame sources ------------------------------------------------- */

#define EF 3

static void seq_open(FILE *f, const char *tag)
{
    fprintf(f, "(%s) SQ (Sequence)\n(fffe,e000) na (Item)\n", tag);
}

static void seq_close(FILE *f)
{
    fputs("(fffe,e00d) na (ItemDelimitationItem)\n(fffe,e0dd) na (SequenceDelimitationItem)\n", f);
}

/* A 3-frame Enhanced CT (CR x CC) whose frames lie at z = 2.5, 1.25 and
 * 3.75 (file order), frame 3 with its own rescale (slope 2, intercept
 * -1000), as in check_assemble.c. */
static void write_enhanced(void)
{
    static const double z[EF] = {2.5, 1.25, 3.75};
    char raw[160], dump[160], cmd[512];
    snprintf(raw, sizeof raw, "%s/px.raw", dir);
    snprintf(dump, sizeof dump, "%s/enh.dump", dir);
    FILE *f = fopen(raw, "wb");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < EF * CR * CC; i++) {
        int16_t v = (int16_t)(1024 + i);
        fwrite(&v, 2, 1, f); /* little-endian host */
    }
    fclose(f);
    f = fopen(dump, "w");
    ck_assert_ptr_nonnull(f);
    fputs("(0002,0010) UI =LittleEndianExplicit\n"
          "(0008,0008) CS [ORIGINAL\\PRIMARY\\VOLUME\\NONE]\n"
          "(0008,0016) UI =EnhancedCTImageStorage\n"
          "(0008,0018) UI [" SERIES ".50]\n(0008,0060) CS [CT]\n"
          "(0008,103e) LO [CHEST]\n(0020,0011) IS [3]\n"
          "(0020,000d) UI [" STUDY "]\n(0020,000e) UI [" SERIES "]\n"
          "(0020,0013) IS [50]\n(0020,0052) UI [" FOR_UID "]\n"
          "(0028,0002) US 1\n(0028,0004) CS [MONOCHROME2]\n(0028,0008) IS [3]\n"
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
    snprintf(paths[nfiles], sizeof paths[0], "%s/enh.dcm", in_dir);
    snprintf(cmd, sizeof cmd, "dump2dcm -q +E %s %s", dump, paths[nfiles]);
    ck_assert_int_eq(system(cmd), 0);
    pv[nfiles] = paths[nfiles];
    nfiles++;
}

START_TEST(multi_frame_source_gives_a_multi_frame_result)
{
    write_enhanced();
    asm_series s;
    char err[512] = "";
    ck_assert_msg(asm_series_load(pv, nfiles, &s, err, sizeof err) == 0, "load: %s", err);
    ck_assert_int_eq(s.nsrc, 1);
    ck_assert_int_eq(s.src[0].frames, EF);
    /* Plane z holds 100 z + 10 HU everywhere: each frame's value names the
     * plane it came from. */
    gpu_volume v = {0};
    ck_assert_int_eq(gpu_volume_init(&v, CC, CR, EF, 1), 0);
    for (int z = 0; z < EF; z++)
        for (int i = 0; i < CR * CC; i++)
            v.data[(size_t)z * CR * CC + (size_t)i] = 100.0f * (float)z + 10.0f;
    char uids[1][DERIVE_UID_LEN] = {UID_ROOT ".3"}, out[1][DERIVE_PATH_LEN];
    derive_params dp = {.series_uid = FIXED_SERIES,
                        .description_suffix = SUFFIX,
                        .series_number_offset = OFFSET,
                        .derivation = "test",
                        .out_dir = out_dir};
    int rc = derive_series_write(&s, &v, &dp, uids, out, err, sizeof err);
    ck_assert_msg(rc == 0, "derive: %d %s", rc, err);
    ck_assert_int_eq(count_files(out_dir), 1);
    scp_slice_info info;
    read_info(out[0], &info);
    ck_assert_int_eq(info.frames, EF);
    ck_assert_str_eq(info.sop_instance_uid, UID_ROOT ".3");
    ck_assert_ptr_nonnull(info.frame_positions);
    static const double fz[EF] = {2.5, 1.25, 3.75};
    for (int fr = 0; fr < EF; fr++)
        ck_assert_double_eq(info.frame_positions[fr * 3 + 2], fz[fr]);
    scp_slice_info_free(&info);
    float *hu = read_hu(out[0], (size_t)EF * CR * CC);
    static const int want_z[EF] = {1, 0, 2}; /* by position: 1.25, 2.5, 3.75 */
    for (int fr = 0; fr < EF; fr++) {
        ck_assert_int_eq(s.src[0].z[fr], want_z[fr]);
        for (int i = 0; i < CR * CC; i++)
            ck_assert_msg(hu[fr * CR * CC + i] == 100.0f * (float)want_z[fr] + 10.0f,
                          "frame %d pixel %d: %g", fr, i, hu[fr * CR * CC + i]);
    }
    free(hu);
    gpu_volume_close(&v);
    asm_series_close(&s);
}
END_TEST

/* ---- refusals ------------------------------------------------------------ */

START_TEST(inconsistent_series_is_a_permanent_error)
{
    for (int k = 0; k < 4; k++)
        write_slice(slice(k, k == 2 ? 14 : 16, 16, 1, 1), 0, 20);
    process_opts o = opts();
    process_result r;
    char err[512] = "";
    memset(&r, 0x5A, sizeof r);
    int rc = process_series(pv, nfiles, &o, &r, err, sizeof err);
    ck_assert_int_eq(rc, LDCT_EINPUT);
    ck_assert_int_eq(process_error_permanent(rc), 1);
    ck_assert_msg(strstr(err, "slice 13") != NULL, "message: %s", err);
    ck_assert_int_le(count_files(out_dir), 0);
    ck_assert_int_eq(r.n, 0);
    ck_assert_ptr_null(r.paths);
    process_result_free(&r);
    /* Passing trouble stays retryable. */
    ck_assert_int_eq(process_error_permanent(-ENOMEM), 0);
    ck_assert_int_eq(process_error_permanent(-EIO), 0);
    ck_assert_int_eq(process_error_permanent(LDCT_ENOGPU), 0);
}
END_TEST

int main(void)
{
    if (scp_global_init() != 0)
        return 1;
    Suite *s = suite_create("process");
    TCase *tc = tcase_create("process");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, gpu_failure_falls_back_to_cpu);
    tcase_add_test(tc, derived_instances_carry_new_uids_and_derived_metadata);
    tcase_add_test(tc, values_are_rounded_and_clamped_to_the_stored_range);
    tcase_add_test(tc, redone_job_reuses_the_stored_uids);
    tcase_add_test(tc, a_file_cut_short_fails_the_series_and_leaves_nothing);
    tcase_add_test(tc, a_result_without_room_is_not_started);
    tcase_add_test(tc, room_counts_the_result_files_in_inodes);
    tcase_add_test(tc, room_is_the_result_plus_half_the_reserve);
    tcase_add_test(tc, denoising_reduces_noise_in_a_uniform_region);
    tcase_add_test(tc, reading_filtering_and_writing_report_their_progress);
    tcase_add_test(tc, auto_picks_nlm2d_for_thick_slices);
    tcase_add_test(tc, process_params_roundtrip);
    tcase_add_test(tc, process_params_roundtrip_adaptive4d);
    tcase_add_test(tc, gaussian_patch_weighting_reaches_the_filter);
    tcase_add_test(tc, distance_cutoff_from_the_job_reaches_the_filter);
    tcase_add_test(tc, multi_frame_source_gives_a_multi_frame_result);
    tcase_add_test(tc, inconsistent_series_is_a_permanent_error);
    suite_add_tcase(s, tc);
    int rc = tu_run_suite(s);
    scp_global_cleanup(); /* leak-clean under CK_FORK=no */
    return rc;
}
