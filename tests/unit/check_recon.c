/* Unit tests of the reconstruction output (scp/recon.cc, pipeline/recon.c
 * through process_series): a CT image written from a projection view keeps
 * the view's patient and study, takes the new UIDs, description suffix and
 * number offset, rounds and clamps its HU; a projection series processed
 * with `auto` is reconstructed (slices, geometry, HU of water and insert),
 * a redone job reuses its stored UIDs, and nlm2d refuses projection data;
 * the fdk rule keys survive the job's parameter string; a failing GPU
 * falls back to the CPU.
 */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/log.h"
#include "pipeline/process.h"
#include "scp/scp.h"
#include "tests/unit/ctpd_gen.h"
#include "tests/unit/progress_log.h"
#include "tests/unit/testutil.h"

#define UID_ROOT "1.2.826.0.1.3680043.10.543.9"
#define STUDY UID_ROOT ".1"
#define SERIES UID_ROOT ".2"

static gpu_fdk_ellipsoid phantom[2] = {
    {.centre = {0, 0, -50}, .axes = {50, 50, 300}, .density = 0.0193},
    {.centre = {25, -15, -50}, .axes = {10, 10, 60}, .density = 0.0193},
};

static char dir[64], paths[90][1024];
static const char *pv[90];

static int write_series(int views)
{
    tu_tmpdir(dir, sizeof dir);
    ctpd_gen g = {.shape = "CYLINDRICAL",
                  .cols = 120,
                  .rows = 8,
                  .views = views,
                  .du = 2.0,
                  .dv = 2.0,
                  .dso = 300,
                  .dsd = 600,
                  .central_col = 60.75,
                  .central_row = 4.5,
                  .phi0 = 1.0,
                  .dphi = 2 * 3.14159265358979323846 / views,
                  .axial_mm = 50,
                  .patient_name = "RECON^TEST",
                  .patient_id = "RT1",
                  .study_uid = STUDY,
                  .series_uid = SERIES,
                  .description = "PROJ",
                  .e = phantom,
                  .ne = 2};
    ck_assert_int_eq(ctpd_gen_write(&g, dir, paths), 0);
    for (int i = 0; i < views; i++)
        pv[i] = paths[i];
    return views;
}

static void remove_all(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}

START_TEST(recon_image_keeps_patient_and_study_and_rounds_hu)
{
    write_series(2);
    float v[6] = {-1000.4f, 0.6f, 40000.0f, -40000.0f, NAN, 12.5f};
    const char *src[1] = {"1.2.3.4"};
    scp_recon_params p = {.source_path = paths[0],
                          .series_uid = UID_ROOT ".10",
                          .sop_uid = UID_ROOT ".11",
                          .frame_of_reference_uid = UID_ROOT ".12",
                          .series_description_suffix = " [FDK]",
                          .series_number_offset = 1000,
                          .instance_number = 3,
                          .rows = 2,
                          .cols = 3,
                          .pixel_spacing = 0.7,
                          .slice_thickness = 1.5,
                          .position = {-10, -20, -48.5},
                          .derivation_description = "ldct-node fdk: test",
                          .source_sops = src,
                          .nsource = 1,
                          .values = v};
    char out[1200], err[256] = "";
    snprintf(out, sizeof out, "%s/recon.dcm", dir);
    ck_assert_msg(scp_recon_write(&p, out, err, sizeof err) == 0, "%s", err);
    scp_slice_info in;
    ck_assert_int_eq(scp_slice_read_info(out, &in, err, sizeof err), 0);
    ck_assert_str_eq(in.study_uid, STUDY);
    ck_assert_str_eq(in.series_uid, UID_ROOT ".10");
    ck_assert_str_eq(in.sop_instance_uid, UID_ROOT ".11");
    ck_assert_str_eq(in.frame_of_reference_uid, UID_ROOT ".12");
    ck_assert_str_eq(in.series_description, "PROJ [FDK]");
    ck_assert_int_eq(in.series_number, 1001); /* the view's 1 + 1000 */
    ck_assert_int_eq(in.instance_number, 3);
    ck_assert_int_eq(in.rows, 2);
    ck_assert_int_eq(in.cols, 3);
    ck_assert_double_eq_tol(in.position[2], -48.5, 1e-9);
    ck_assert_double_eq_tol(in.pixel_spacing[0], 0.7, 1e-9);
    ck_assert_double_eq_tol(in.slice_thickness, 1.5, 1e-9);
    scp_slice_info_free(&in);
    float hu[6];
    ck_assert_int_eq(scp_slice_read_hu(out, hu, 6, err, sizeof err), 0);
    const float want[6] = {-1000, 1, 32767, -32768, -1024, 12}; /* 12.5 rounds to even */
    for (int i = 0; i < 6; i++)
        ck_assert_msg(hu[i] == want[i], "value %d: %g, want %g", i, hu[i], want[i]);
    ck_assert_int_eq(scp_recon_write(&(scp_recon_params){0}, out, err, sizeof err), -EINVAL);
    remove_all();
}
END_TEST

/* Stored UIDs of a fake job: the first call keeps the candidates, later
 * calls return them for the same keys. */
typedef struct store {
    int n;
    char key[32][DERIVE_UID_LEN], uid[32][DERIVE_UID_LEN];
} store;

static int stored_uids(void *ctx, int n, const char *const *keys, char (*uids)[DERIVE_UID_LEN],
                       char *series_uid, int64_t *dated_ms)
{
    (void)dated_ms;
    (void)series_uid; /* kept: the job's own */
    store *s = ctx;
    for (int i = 0; i < n; i++) {
        int j = 0;
        while (j < s->n && strcmp(s->key[j], keys[i]) != 0)
            j++;
        if (j == s->n) {
            ck_assert_int_lt(s->n, 32);
            snprintf(s->key[j], DERIVE_UID_LEN, "%s", keys[i]);
            snprintf(s->uid[j], DERIVE_UID_LEN, "%s", uids[i]);
            s->n++;
        }
        snprintf(uids[i], DERIVE_UID_LEN, "%s", s->uid[j]);
    }
    return 0;
}

START_TEST(auto_reconstructs_projection_data_and_a_redo_reuses_uids)
{
    int n = write_series(90);
    char out_dir[128], err[512] = "";
    snprintf(out_dir, sizeof out_dir, "%s/out", dir);
    store st = {0};
    process_opts o = {.algorithm = ALGO_AUTO,
                      .fdk = {.matrix = 64, .fov_mm = 128, .kernel = GPU_FDK_SHEPP_LOGAN},
                      .uid_root = UID_ROOT,
                      .series_uid = UID_ROOT ".20",
                      .description_suffix = " [R]",
                      .series_number_offset = 5,
                      .out_dir = out_dir,
                      .uids = stored_uids,
                      .uids_ctx = &st};
    process_result r;
    ck_assert_msg(process_series(pv, n, &o, &r, err, sizeof err) == 0, "%s", err);
    ck_assert_str_eq(r.algorithm, "fdk");
    /* 8 rows of 1 mm at the isocentre; at the edge of the 128 mm field on
     * the source's side the cone is 8 (300 - 64) / 300 = 6.3 mm high: the 7
     * slices whose centres every projection sees. */
    ck_assert_int_eq(r.n, 7);
    ck_assert_int_eq(r.nx, 64);
    ck_assert_int_eq(st.n, 8); /* 7 slices and the frame of reference */
    ck_assert_str_eq(r.source_sops[0], "fdk-slice-1");
    char first[DERIVE_UID_LEN];
    snprintf(first, sizeof first, "%s", r.derived_sops[0]);
    /* Slice 4 (Z = -50, the middle one): water 0 HU at the centre, the insert (+1000 HU)
     * at X = 25, Y = -15: pixel (x, y) at -63 + 2 (x, y). */
    float img[64 * 64];
    ck_assert_int_eq(scp_slice_read_hu(r.paths[3], img, 64 * 64, err, sizeof err), 0);
    scp_slice_info in;
    ck_assert_int_eq(scp_slice_read_info(r.paths[3], &in, err, sizeof err), 0);
    ck_assert_double_eq_tol(in.position[0], -63, 1e-6);
    ck_assert_double_eq_tol(in.position[2], -50.0, 1e-6);
    ck_assert_str_eq(in.series_uid, UID_ROOT ".20");
    scp_slice_info_free(&in);
    double water = img[32 * 64 + 32], insert = img[24 * 64 + 44], mirror = img[24 * 64 + 19];
    printf("auto on projection data: water %.0f HU, insert %.0f HU, mirror %.0f HU\n", water,
           insert, mirror);
    ck_assert(fabs(water) < 30 && fabs(insert - 1000) < 60 && fabs(mirror) < 30);
    /* The end slices are right at the edge of the water too (X = -45 mm,
     * pixel 9; the cone's rows at the isocentre alone gave an 8th slice
     * there that missed rays from half the orbit). */
    for (int k = 0; k < r.n; k += r.n - 1) {
        ck_assert_int_eq(scp_slice_read_hu(r.paths[k], img, 64 * 64, err, sizeof err), 0);
        double edge = img[32 * 64 + 9];
        ck_assert_msg(fabs(edge) < 40, "slice %d: water at the edge %.0f HU", k + 1, edge);
    }
    process_result_free(&r);
    /* Redone: the same UIDs. */
    ck_assert_msg(process_series(pv, n, &o, &r, err, sizeof err) == 0, "%s", err);
    ck_assert_str_eq(r.derived_sops[0], first);
    ck_assert_int_eq(st.n, 8);
    process_result_free(&r);
    /* nlm2d refuses projection data. */
    o.algorithm = ALGO_NLM2D;
    ck_assert_int_eq(process_series(pv, n, &o, &r, err, sizeof err), LDCT_EINPUT);
    ck_assert(strstr(err, "can only be reconstructed"));
    remove_all();
}
END_TEST

/* GPU 99 exists on no machine: FDK on it fails and the CPU does the work. */
START_TEST(gpu_failure_falls_back_to_the_cpu)
{
    int n = write_series(36);
    char out_dir[128], err[512] = "";
    snprintf(out_dir, sizeof out_dir, "%s/out", dir);
    const gpu_device absent = {.kind = GPU_DEVICE_CUDA, .index = 99};
    process_opts o = {.algorithm = ALGO_FDK,
                      .fdk = {.matrix = 32, .slices = 2, .kernel = GPU_FDK_RAMLAK},
                      .dev = &absent,
                      .uid_root = UID_ROOT,
                      .out_dir = out_dir};
    process_result r;
    progress_log *l = calloc(1, sizeof *l);
    ck_assert_ptr_nonnull(l);
    omp_set_num_threads(1); /* the caller reports, so it must read some views */
    o.progress = pl_record;
    o.progress_ctx = l;
    ck_assert_msg(process_series(pv, n, &o, &r, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(r.gpu_fallback, 1);
    ck_assert_str_eq(r.device, "cpu");
    ck_assert_int_eq(r.n, 2);
    process_result_free(&r);
    /* 36 views read (72 steps, headers then values); the failed GPU run
     * reports nothing, the CPU's from 0; 2 slices written. */
    int i = pl_expect_stage(l, 0, "reading", 1);
    ck_assert_msg(i < l->n && l->fraction[i] < 0, "the GPU's run is not counted");
    i = pl_expect_stage(l, i + 1, "reconstructing", 0);
    i = pl_expect_stage(l, i, "writing", 0);
    ck_assert_int_eq(i, l->n);
    free(l);
    remove_all();
}
END_TEST

/* A slice thickness so thin that the cone needs more than 4096 slices fails
 * the job with a reason instead of allocating them. */
START_TEST(too_many_slices_are_refused_with_a_reason)
{
    int n = write_series(36);
    char out_dir[128], err[512] = "";
    snprintf(out_dir, sizeof out_dir, "%s/out", dir);
    process_opts o = {.algorithm = ALGO_FDK,
                      .fdk = {.matrix = 32, .slice_mm = 0.001, .kernel = GPU_FDK_RAMLAK},
                      .uid_root = UID_ROOT,
                      .out_dir = out_dir};
    process_result r;
    ck_assert_int_eq(process_series(pv, n, &o, &r, err, sizeof err), LDCT_EINPUT);
    ck_assert_msg(strstr(err, "more than 4096 slices"), "%s", err);
    ck_assert(process_error_permanent(LDCT_EINPUT));
    remove_all();
}
END_TEST

/* A job stores the rule's fdk keys in its parameter string and the worker
 * reads them back; an old string without them gets the defaults. */
START_TEST(fdk_parameters_survive_the_job_row)
{
    cfg_rule r;
    config_rule_init(&r);
    r.strength = 1;
    r.series_number_offset = 7;
    r.fdk_matrix = 384;
    r.fdk_fov_mm = 420.5;
    r.fdk_slice_mm = 2.5;
    r.fdk_slices = 33;
    r.fdk_kernel = GPU_FDK_HAMMING;
    r.fdk_mu_water = 0.021;
    char params[1024];
    process_params_format(&r, params, sizeof params);
    process_opts o = {0};
    ck_assert_int_eq(process_params_parse(params, &o), 0);
    ck_assert_int_eq(o.fdk.matrix, 384);
    ck_assert_double_eq_tol(o.fdk.fov_mm, 420.5, 1e-9);
    ck_assert_double_eq_tol(o.fdk.slice_mm, 2.5, 1e-9);
    ck_assert_int_eq(o.fdk.slices, 33);
    ck_assert_int_eq(o.fdk.kernel, GPU_FDK_HAMMING);
    ck_assert_double_eq_tol(o.fdk.mu_water, 0.021, 1e-12);
    ck_assert_int_eq(o.series_number_offset, 7);
    ck_assert_int_lt((int)strlen(params), 256); /* schedule.c's buffer */
    ck_assert_int_eq(process_params_parse("search_radius=0 h=0 strength=1", &o), 0);
    ck_assert_int_eq(o.fdk.kernel, GPU_FDK_SHEPP_LOGAN);
    ck_assert_int_eq(o.fdk.matrix, 0); /* 0: recon's default, 512 */
    ck_assert_int_eq(process_params_parse("kernel=9", &o), LDCT_EINPUT);
}
END_TEST

int main(void)
{
    log_level = LOG_LVL_ERR;
    scp_global_init();
    Suite *s = suite_create("recon");
    TCase *tc = tcase_create("recon");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, recon_image_keeps_patient_and_study_and_rounds_hu);
    tcase_add_test(tc, auto_reconstructs_projection_data_and_a_redo_reuses_uids);
    tcase_add_test(tc, fdk_parameters_survive_the_job_row);
    tcase_add_test(tc, gpu_failure_falls_back_to_the_cpu);
    tcase_add_test(tc, too_many_slices_are_refused_with_a_reason);
    suite_add_tcase(s, tc);
    int rc = tu_run_suite(s);
    scp_global_cleanup();
    return rc;
}
