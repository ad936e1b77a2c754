/* Unit tests of the quality metrics (pipeline/quality.c) on inputs with
 * known answers: PSNR of added Gaussian noise, SSIM of a volume with itself
 * and its fall with noise, the 10-90% rise of a Gaussian-blurred edge
 * (2.563 sigma), CNR, noise and bias of a lesion and ROIs built by hand,
 * the noise spread of ROIs with different noise, a grid too coarse for the
 * phantom's regions (which region, and the size that fits),
 * the sidecar's round trip and its refusal of unknown keys, and the PNG
 * figure's header. Small volumes; a second or two.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "gpu/rng.h"
#include "pipeline/figure.h"
#include "pipeline/quality.h"
#include "pipeline/quality4d.h"
#include "testutil.h"

enum { NX = 120, NY = 100, NZ = 6 };

/* A layout whose body covers the 1 mm grid centred on 0 (origin -59.5). */
static void layout_init(gpu_phantom_layout *l)
{
    memset(l, 0, sizeof *l);
    snprintf(l->name, sizeof l->name, "test");
    l->body_a = 55;
    l->body_b = 45;
}

static const quality_grid GRID = {{-(NX - 1) / 2.0, -(NY - 1) / 2.0, -(NZ - 1) / 2.0}};

static void vol_init(gpu_volume *v)
{
    ck_assert_int_eq(gpu_volume_init(v, NX, NY, NZ, 1), 0);
    v->spacing[0] = v->spacing[1] = v->spacing[2] = 1.0;
}

/* A smooth structured reference: a ramp, a bright disk and a dark one. */
static void structured(gpu_volume *v)
{
    for (int z = 0; z < NZ; z++)
        for (int y = 0; y < NY; y++)
            for (int x = 0; x < NX; x++) {
                double px = GRID.origin[0] + x, py = GRID.origin[1] + y;
                double f = 40 + 0.5 * px;
                f += hypot(px - 15, py) < 12 ? 300 : 0;
                f -= hypot(px + 20, py - 10) < 8 ? 500 : 0;
                v->data[((size_t)z * NY + y) * NX + x] = (float)f;
            }
}

static void add_noise(const gpu_volume *in, gpu_volume *out, double sd, double offset, int seed)
{
    gpu_rng r;
    gpu_rng_init(&r, (uint64_t)seed, 0, 0, 0);
    for (size_t i = 0; i < gpu_volume_count(in); i++)
        out->data[i] = (float)(in->data[i] + offset + sd * gpu_rng_normal(&r));
}

START_TEST(psnr_of_known_gaussian_noise)
{
    gpu_volume ref, test;
    vol_init(&ref);
    vol_init(&test);
    structured(&ref);
    gpu_phantom_layout l;
    layout_init(&l);
    unsigned char *mask = malloc(gpu_volume_count(&ref));
    ck_assert_int_eq(quality_body_mask(&ref, &GRID, &l, mask), 0);
    double range = quality_range(&ref, mask);
    ck_assert_double_gt(range, 800); /* -500 disk to +300 disk over the ramp */
    const double sds[3] = {5, 20, 50};
    for (int k = 0; k < 3; k++) {
        add_noise(&ref, &test, sds[k], 0, k + 1);
        /* About 48000 masked voxels: the MSE is known to 0.6%, i.e. 0.03 dB. */
        double expect = 20 * log10(range / sds[k]);
        double got = quality_psnr(&test, &ref, mask, range);
        ck_assert_msg(fabs(got - expect) < 0.05, "sd %g: psnr %g, expected %g", sds[k], got,
                      expect);
    }
    free(mask);
    gpu_volume_close(&ref);
    gpu_volume_close(&test);
}
END_TEST

START_TEST(ssim_is_one_for_identity_and_falls_with_noise)
{
    gpu_volume ref, test;
    vol_init(&ref);
    vol_init(&test);
    structured(&ref);
    gpu_phantom_layout l;
    layout_init(&l);
    unsigned char *mask = malloc(gpu_volume_count(&ref));
    ck_assert_int_eq(quality_body_mask(&ref, &GRID, &l, mask), 0);
    double range = quality_range(&ref, mask), s, prev;
    ck_assert_int_eq(quality_ssim(&ref, &ref, mask, range, &s), 0);
    ck_assert_double_eq_tol(s, 1.0, 1e-6);
    prev = s;
    const double sds[4] = {5, 15, 40, 100};
    for (int k = 0; k < 4; k++) {
        add_noise(&ref, &test, sds[k], 0, k + 10);
        ck_assert_int_eq(quality_ssim(&test, &ref, mask, range, &s), 0);
        ck_assert_msg(s < prev - 1e-3 && s > 0, "sd %g: ssim %g after %g", sds[k], s, prev);
        prev = s;
    }
    free(mask);
    gpu_volume_close(&ref);
    gpu_volume_close(&test);
}
END_TEST

/* A disk of radius 30 mm blurred by a Gaussian of sigma: the radial profile
 * is (to order sigma / R) the blurred step 0.5 erfc((r - R) / (sqrt2 sigma)),
 * whose 10-90% distance is 2 * 1.2816 sigma = 2.563 sigma. */
static double blurred_disk_rise(double sigma, double spacing)
{
    int n = (int)(90 / spacing);
    gpu_volume v;
    ck_assert_int_eq(gpu_volume_init(&v, n, n, 2, 1), 0);
    v.spacing[0] = v.spacing[1] = spacing;
    v.spacing[2] = 1;
    quality_grid g = {{-(n - 1) * spacing / 2, -(n - 1) * spacing / 2, 0}};
    for (int z = 0; z < 2; z++)
        for (int y = 0; y < n; y++)
            for (int x = 0; x < n; x++) {
                double r = hypot(g.origin[0] + x * spacing - 3, g.origin[1] + y * spacing + 2);
                v.data[((size_t)z * n + y) * n + x] =
                    (float)(40 + 660 * 0.5 * erfc((r - 30) / (sqrt(2.0) * sigma)));
            }
    gpu_phantom_edge e = {
        .x = 3, .y = -2, .radius = 30, .inside_hu = 700, .outside_hu = 40, .uniform_to = 42};
    double rise = NAN;
    ck_assert_int_eq(quality_edge_rise(&v, &g, &e, &rise), 0);
    gpu_volume_close(&v);
    return rise;
}

START_TEST(edge_rise_of_blurred_step_is_2_563_sigma)
{
    const double sigmas[3] = {0.6, 1.0, 1.8};
    for (int k = 0; k < 3; k++) {
        double rise = blurred_disk_rise(sigmas[k], 0.5);
        ck_assert_msg(fabs(rise - 2.563 * sigmas[k]) < 0.02 * 2.563 * sigmas[k],
                      "sigma %g: rise %g, expected %g", sigmas[k], rise, 2.563 * sigmas[k]);
    }
    /* Coarser pixels (1 mm): sampling adds no bias beyond 3%. */
    double rise = blurred_disk_rise(1.5, 1.0);
    ck_assert_msg(fabs(rise - 2.563 * 1.5) < 0.03 * 2.563 * 1.5, "rise %g", rise);
}
END_TEST

/* A +20 HU lesion of radius 8 mm in a 60 HU background with noise sd 5 and
 * an offset of +3 HU everywhere: contrast 20, noise 5, CNR 4, bias 3. */
START_TEST(cnr_noise_and_bias_of_a_known_lesion)
{
    gpu_volume ref, test;
    vol_init(&ref);
    vol_init(&test);
    for (int z = 0; z < NZ; z++)
        for (int y = 0; y < NY; y++)
            for (int x = 0; x < NX; x++) {
                double r = hypot(GRID.origin[0] + x + 20, GRID.origin[1] + y - 5);
                ref.data[((size_t)z * NY + y) * NX + x] = r < 8 ? 80.0f : 60.0f;
            }
    add_noise(&ref, &test, 5, 3, 99);
    gpu_phantom_layout l;
    layout_init(&l);
    l.nlesion = 1;
    l.lesion[0] = (gpu_phantom_lesion){.x = -20,
                                       .y = 5,
                                       .radius = 8,
                                       .hu = 80,
                                       .background_hu = 60,
                                       .bg_inner = 10,
                                       .bg_outer = 16};
    l.nroi = 1;
    l.roi[0] = (gpu_phantom_roi){.name = "bg", .x = 20, .y = 0, .radius = 10, .hu = 60};
    quality_result r;
    ck_assert_int_eq(quality_measure(&test, &ref, &GRID, &l, &r), 0);
    ck_assert_int_eq(r.nlesion, 1);
    /* Inner disk about 6 * 100 voxels, annulus 6 * 490: contrast known to
     * about 0.25 HU, the sd to 1.3%. */
    ck_assert_msg(fabs(r.lesion[0].contrast - 20) < 1.0, "contrast %g", r.lesion[0].contrast);
    ck_assert_msg(fabs(r.lesion[0].cnr - 4) < 0.25, "cnr %g", r.lesion[0].cnr);
    ck_assert_msg(fabs(r.noise_sd - 5) < 0.2, "noise %g", r.noise_sd);
    ck_assert_msg(fabs(r.bias_hu - 3) < 0.3, "bias %g", r.bias_hu);
    ck_assert(isnan(r.edge_rise_mm));
    /* Denoising that halves the noise and keeps the contrast doubles CNR. */
    add_noise(&ref, &test, 2.5, 0, 98);
    quality_result r2;
    ck_assert_int_eq(quality_measure(&test, &ref, &GRID, &l, &r2), 0);
    ck_assert_msg(r2.lesion[0].cnr > 1.8 * r.lesion[0].cnr, "cnr %g vs %g", r2.lesion[0].cnr,
                  r.lesion[0].cnr);
    ck_assert_double_gt(r2.psnr, r.psnr + 5);
    gpu_volume_close(&ref);
    gpu_volume_close(&test);
}
END_TEST

/* Three ROIs: the left one noisier by a factor 2.5; the spread is the max
 * over the min ROI sd; one ROI has none. */
START_TEST(noise_spread_is_max_over_min_roi_sd)
{
    gpu_volume ref, test;
    vol_init(&ref);
    vol_init(&test);
    for (size_t i = 0; i < gpu_volume_count(&ref); i++)
        ref.data[i] = 40;
    add_noise(&ref, &test, 4, 0, 7);
    gpu_rng r;
    gpu_rng_init(&r, 8, 0, 0, 0);
    for (int z = 0; z < NZ; z++)
        for (int y = 0; y < NY; y++)
            for (int x = 0; x < NX; x++)
                if (GRID.origin[0] + x < -10) /* left: sd sqrt(4^2 + 9.17^2) = 10 */
                    test.data[((size_t)z * NY + y) * NX + x] += (float)(9.165 * gpu_rng_normal(&r));
    gpu_phantom_layout l;
    layout_init(&l);
    l.nroi = 3;
    l.roi[0] = (gpu_phantom_roi){.name = "noisy", .x = -30, .y = 0, .radius = 10, .hu = 40};
    l.roi[1] = (gpu_phantom_roi){.name = "quiet1", .x = 20, .y = -15, .radius = 10, .hu = 40};
    l.roi[2] = (gpu_phantom_roi){.name = "quiet2", .x = 20, .y = 15, .radius = 10, .hu = 40};
    quality_result q;
    ck_assert_int_eq(quality_measure(&test, &ref, &GRID, &l, &q), 0);
    ck_assert_msg(fabs(q.noise_spread - 2.5) < 0.15, "spread %g (sd %g %g %g)", q.noise_spread,
                  q.roi[0].sd, q.roi[1].sd, q.roi[2].sd);
    ck_assert_double_eq_tol(q.noise_spread, q.roi[0].sd / fmin(q.roi[1].sd, q.roi[2].sd), 1e-12);
    l.nroi = 1;
    ck_assert_int_eq(quality_measure(&test, &ref, &GRID, &l, &q), 0);
    ck_assert(isnan(q.noise_spread));
    gpu_volume_close(&ref);
    gpu_volume_close(&test);
}
END_TEST

/* The body phantom's layout on a centred n x n grid over its 220 mm field
 * (one slice, 40 HU everywhere). */
static void body_grid(int n, gpu_volume *v, quality_grid *g)
{
    ck_assert_int_eq(gpu_volume_init(v, n, n, 1, 1), 0);
    v->spacing[0] = v->spacing[1] = v->spacing[2] = 220.0 / n;
    for (size_t i = 0; i < gpu_volume_count(v); i++)
        v->data[i] = 40;
    *g = (quality_grid){{-(n - 1) / 2.0 * 220.0 / n, -(n - 1) / 2.0 * 220.0 / n, 0}};
}

/* An 8 x 8 body phantom (27.5 mm pixels) was "invalid input": the
 * measurement names the region it cannot measure, and the size search
 * finds the grids that fit (24 x 24 the first; 27 x 27 misses a lesion's
 * background ring, every size from 28 x 28 fits). */
START_TEST(a_grid_too_coarse_names_the_region_and_the_size_that_fits)
{
    gpu_phantom ph;
    ck_assert_int_eq(gpu_phantom_build(GPU_PHANTOM_BODY, 220, &ph), 0);
    gpu_volume v;
    quality_grid g;
    quality_result r;
    body_grid(8, &v, &g);
    ck_assert_int_eq(quality_measure(&v, &v, &g, &ph.layout, &r), LDCT_EINPUT);
    ck_assert_str_eq(r.why, "ROI liver (radius 6 mm) holds no voxel centre");
    int first, n = quality_min_size(&v, &g, &ph.layout, NULL, 0, &first);
    gpu_volume_close(&v);
    ck_assert_int_eq(first, 24);
    ck_assert_int_eq(n, 28);
    for (int k = 9; k < 2 * n + 40; k++) {
        body_grid(k, &v, &g);
        int rc = quality_layout_fits(&v, &g, &ph.layout, NULL, 0, NULL, 0);
        ck_assert_msg(k < first ? rc == LDCT_EINPUT : k >= n ? rc == 0 : 1, "size %d: %d", k, rc);
        gpu_volume_close(&v);
    }
    /* A grid that fits, but a test series without the edge: said so. */
    body_grid(n, &v, &g);
    ck_assert_int_eq(quality_measure(&v, &v, &g, &ph.layout, &r), LDCT_EINPUT);
    ck_assert_msg(strstr(r.why, "shows no 10-90% rise across the edge"), "%s", r.why);
    gpu_volume_close(&v);
}
END_TEST

START_TEST(layout_sidecar_round_trips)
{
    gpu_phantom ph;
    ck_assert_int_eq(gpu_phantom_build(GPU_PHANTOM_BODY, 220, &ph), 0);
    char dir[64], path[128], err[256] = "";
    tu_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/phantom.ini", dir);
    ck_assert_int_eq(quality_layout_write(&ph.layout, path), 0);
    gpu_phantom_layout l;
    ck_assert_msg(quality_layout_read(path, &l, err, sizeof err) == 0, "%s", err);
    ck_assert_str_eq(l.name, "body");
    ck_assert_int_eq(l.nlesion, ph.layout.nlesion);
    ck_assert_int_eq(l.nroi, ph.layout.nroi);
    ck_assert_int_eq(l.has_edge, 1);
    ck_assert_int_eq(memcmp(l.lesion, ph.layout.lesion, sizeof l.lesion), 0);
    ck_assert_double_eq(l.edge.uniform_to, ph.layout.edge.uniform_to);
    for (int i = 0; i < l.nroi; i++) {
        ck_assert_str_eq(l.roi[i].name, ph.layout.roi[i].name);
        ck_assert_double_eq(l.roi[i].radius, ph.layout.roi[i].radius);
    }
    char bad[128];
    tu_write(dir, "bad.ini", "[phantom]\nbody_a = 10\nbody_b = 5\n[edge]\nwidth = 3\n", bad,
             sizeof bad);
    ck_assert_int_eq(quality_layout_read(bad, &l, err, sizeof err), LDCT_EINPUT);
    ck_assert_ptr_nonnull(strstr(err, "width"));
    tu_write(dir, "nobody.ini", "[phantom]\nname = x\n", bad, sizeof bad);
    ck_assert_int_eq(quality_layout_read(bad, &l, err, sizeof err), LDCT_EINPUT);
    /* A value that is not finite was taken, and came out as
     * "nominal_hu":inf in --json, which is not JSON. */
    tu_write(dir, "inf.ini", "[phantom]\nbody_a = 10\nbody_b = 5\n[lesion 1]\nhu = 1e400\n", bad,
             sizeof bad);
    ck_assert_int_eq(quality_layout_read(bad, &l, err, sizeof err), LDCT_EINPUT);
    ck_assert_ptr_nonnull(strstr(err, "[lesion 1] hu = 1e400: unknown key or not a finite number"));
    tu_write(dir, "nan.ini", "[phantom]\nbody_a = nan\nbody_b = 5\n", bad, sizeof bad);
    ck_assert_int_eq(quality_layout_read(bad, &l, err, sizeof err), LDCT_EINPUT);
    ck_assert_ptr_nonnull(strstr(err, "body_a = nan"));
    /* A lesion of radius -5 was measured over a disk of the voxel size
     * and reported as "-10 mm"; one of 1e308 as "inf mm"; a background
     * ring inside out likewise. */
    tu_write(dir, "neg.ini",
             "[phantom]\nbody_a = 10\nbody_b = 5\n[lesion 1]\nradius = -5\nbg_inner = 7\n"
             "bg_outer = 11\n",
             bad, sizeof bad);
    ck_assert_int_eq(quality_layout_read(bad, &l, err, sizeof err), LDCT_EINPUT);
    ck_assert_ptr_nonnull(strstr(err, "lesion 1: radius = -5, bg_inner = 7, bg_outer = 11: need"));
    tu_write(dir, "ring.ini",
             "[phantom]\nbody_a = 10\nbody_b = 5\n[lesion 1]\nradius = 5\nbg_inner = 11\n"
             "bg_outer = 7\n",
             bad, sizeof bad);
    ck_assert_int_eq(quality_layout_read(bad, &l, err, sizeof err), LDCT_EINPUT);
    ck_assert_ptr_nonnull(strstr(err, "need 0 < radius <= bg_inner < bg_outer < 1e6 mm"));
    tu_write(dir, "huge.ini",
             "[phantom]\nbody_a = 10\nbody_b = 5\n[lesion 1]\nradius = 1e308\nbg_inner = 7\n"
             "bg_outer = 11\n",
             bad, sizeof bad);
    ck_assert_int_eq(quality_layout_read(bad, &l, err, sizeof err), LDCT_EINPUT);
    /* The 4D sidecar's moving edges are read the same way. */
    tu_write(dir, "t.ini", "[time 1]\nx = inf\ny = 0\nradius = 5\nuniform_to = 9\n", bad,
             sizeof bad);
    quality4d_motion m;
    ck_assert_int_eq(quality4d_motion_read(bad, &m, err, sizeof err), LDCT_EINPUT);
    ck_assert_ptr_nonnull(strstr(err, "[time 1] x = inf"));
}
END_TEST

START_TEST(figure_is_a_png_of_the_panels)
{
    float a[40 * 30], b[40 * 30];
    for (int i = 0; i < 40 * 30; i++) {
        a[i] = (float)(i % 40) * 10 - 160;
        b[i] = -a[i];
    }
    figure_panel p[2] = {{a, 40, 400, "TRUTH", "W400 L40"}, {b, 0, 200, "diff 1.5%", NULL}};
    char dir[64], path[128];
    tu_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/f.png", dir);
    ck_assert_int_eq(figure_png_write(path, p, 2, 40, 30), 0);
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    unsigned char h[24];
    ck_assert_uint_eq(fread(h, 1, sizeof h, f), sizeof h);
    fclose(f);
    ck_assert_int_eq(memcmp(h, "\x89PNG\r\n\x1a\n", 8), 0);
    /* IHDR width and height: panels scaled 7x (40 -> 280) plus gaps. */
    unsigned w = (unsigned)h[16] << 24 | h[17] << 16 | h[18] << 8 | h[19];
    unsigned hh = (unsigned)h[20] << 24 | h[21] << 16 | h[22] << 8 | h[23];
    ck_assert_uint_eq(w, 2 * 280 + 3 * 4);
    ck_assert_uint_gt(hh, 30 * 7);
    ck_assert_int_eq(figure_png_write(path, p, 0, 40, 30), LDCT_EINPUT);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("quality");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, psnr_of_known_gaussian_noise);
    tcase_add_test(tc, ssim_is_one_for_identity_and_falls_with_noise);
    tcase_add_test(tc, edge_rise_of_blurred_step_is_2_563_sigma);
    tcase_add_test(tc, cnr_noise_and_bias_of_a_known_lesion);
    tcase_add_test(tc, noise_spread_is_max_over_min_roi_sd);
    tcase_add_test(tc, a_grid_too_coarse_names_the_region_and_the_size_that_fits);
    tcase_add_test(tc, layout_sidecar_round_trips);
    tcase_add_test(tc, figure_is_a_png_of_the_panels);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
