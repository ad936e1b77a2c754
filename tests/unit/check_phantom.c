/* Unit tests of the low-dose CT simulator (gpu/phantom.c, gpu/rng.c): the
 * generator is deterministic per key and draws Poisson counts with the
 * right mean and variance, noise is reproducible with a seed and
 * independent of the thread count, the voxelised truth holds the HU values
 * and lesion contrasts the layout promises (and the layout's backgrounds
 * are uniform), line integrals match chord lengths computed by hand, and
 * reconstructed quarter-dose noise is about twice the full-dose noise;
 * the patient scale leaves line integrals unbiased and raises their
 * variance to exp(scale p) / I0, so long rays gain far more noise; the
 * 4D heart's largest motion scale (ldct phantom --motion) is accepted and
 * no more. Small sizes: the file runs in a few seconds.
 */
#include <check.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "gpu/phantom.h"
#include "gpu/phantom4d.h"
#include "gpu/rng.h"
#include "pipeline/quality.h"

START_TEST(rng_is_deterministic_per_key)
{
    gpu_rng a, b, c;
    gpu_rng_init(&a, 7, 1, 2, 3);
    gpu_rng_init(&b, 7, 1, 2, 3);
    gpu_rng_init(&c, 7, 1, 2, 4);
    int same_c = 0;
    for (int i = 0; i < 1000; i++) {
        uint64_t x = gpu_rng_next(&a), y = gpu_rng_next(&b), z = gpu_rng_next(&c);
        ck_assert_uint_eq(x, y);
        same_c += x == z;
    }
    ck_assert_int_eq(same_c, 0);
}
END_TEST

/* Mean and variance of a Poisson(lambda) are lambda; 2e5 draws give a
 * standard error of sqrt(lambda / 2e5) on the mean and about
 * lambda * sqrt(2 / 2e5) on the variance: bounds of 5 standard errors. */
static void check_poisson(double lambda)
{
    gpu_rng r;
    gpu_rng_init(&r, 11, 0, 0, (uint64_t)lambda);
    const int n = 200000;
    double s = 0, s2 = 0;
    for (int i = 0; i < n; i++) {
        double k = gpu_rng_poisson(&r, lambda);
        ck_assert(k >= 0 && k == floor(k));
        s += k;
        s2 += k * k;
    }
    double mean = s / n, var = s2 / n - mean * mean;
    ck_assert_msg(fabs(mean - lambda) < 5 * sqrt(lambda / n), "lambda %g: mean %g", lambda, mean);
    ck_assert_msg(fabs(var - lambda) < 5 * lambda * sqrt(2.0 / n) + 5 * sqrt(lambda / n),
                  "lambda %g: variance %g", lambda, var);
}

START_TEST(poisson_has_the_mean_and_variance_of_lambda)
{
    check_poisson(0.7);
    check_poisson(6);  /* multiplication method */
    check_poisson(40); /* transformed rejection */
    check_poisson(2.5e4);
}
END_TEST

START_TEST(noise_is_reproducible_with_a_seed_and_any_thread_count)
{
    gpu_volume clean, a, b, c;
    ck_assert_int_eq(gpu_volume_init(&clean, 37, 5, 9, 1), 0);
    ck_assert_int_eq(gpu_volume_init(&a, 37, 5, 9, 1), 0);
    ck_assert_int_eq(gpu_volume_init(&b, 37, 5, 9, 1), 0);
    ck_assert_int_eq(gpu_volume_init(&c, 37, 5, 9, 1), 0);
    for (size_t i = 0; i < gpu_volume_count(&clean); i++)
        clean.data[i] = (float)(0.5 + 3.0 * (double)i / gpu_volume_count(&clean));
    omp_set_num_threads(1);
    ck_assert_int_eq(gpu_phantom_noise(&clean, 1e4, 2.0, 42, 1, &a), 0);
    omp_set_num_threads(2);
    ck_assert_int_eq(gpu_phantom_noise(&clean, 1e4, 2.0, 42, 1, &b), 0);
    ck_assert_int_eq(gpu_phantom_noise(&clean, 1e4, 2.0, 43, 1, &c), 0);
    size_t n = gpu_volume_count(&clean), differ = 0;
    ck_assert_int_eq(memcmp(a.data, b.data, n * sizeof *a.data), 0);
    for (size_t i = 0; i < n; i++)
        differ += a.data[i] != c.data[i];
    ck_assert_uint_gt(differ, n * 9 / 10);
    /* -log(N / I0) is unbiased to first order: the mean over the volume
     * stays within 1% of the clean mean. */
    double sc = 0, sa = 0;
    for (size_t i = 0; i < n; i++) {
        sc += clean.data[i];
        sa += a.data[i];
    }
    ck_assert_double_le(fabs(sa - sc) / sc, 0.01);
    gpu_volume_close(&clean);
    gpu_volume_close(&a);
    gpu_volume_close(&b);
    gpu_volume_close(&c);
}
END_TEST

/* The truth on a 0.5 mm grid: every ROI holds its HU, every lesion its
 * contrast over the liver, the backgrounds and the edge's plateaus are
 * uniform (the layout does not overlap other structures). */
START_TEST(truth_holds_the_layout_values)
{
    gpu_phantom ph;
    ck_assert_int_eq(gpu_phantom_build(GPU_PHANTOM_BODY, 220, &ph), 0);
    const gpu_phantom_layout *l = &ph.layout;
    ck_assert_int_eq(l->nlesion, 9);
    gpu_fdk_volume v;
    gpu_fdk_volume_centered(&v, 440, 440, 1, 0.5, 0.5, 1.0);
    gpu_volume t;
    ck_assert_int_eq(gpu_volume_init(&t, 440, 440, 1, 1), 0);
    ck_assert_int_eq(gpu_phantom_truth(&ph, &v, &t), 0);
    quality_grid g = {{v.origin[0], v.origin[1], v.origin[2]}};
    double m, sd;
    for (int i = 0; i < l->nroi; i++) {
        ck_assert_int_eq(quality_ring_stats(&t, &g, l->roi[i].x, l->roi[i].y, 0, l->roi[i].radius,
                                            &m, &sd, NULL),
                         0);
        ck_assert_msg(fabs(m - l->roi[i].hu) < 0.01 && sd < 0.01, "roi %s: %g +- %g",
                      l->roi[i].name, m, sd);
    }
    static const double contrast[9] = {20, 10, 5, 20, 10, 5, 20, 10, 5};
    for (int i = 0; i < l->nlesion; i++) {
        const gpu_phantom_lesion *e = &l->lesion[i];
        ck_assert_double_eq_tol(e->hu - e->background_hu, contrast[i], 1e-9);
        ck_assert_double_eq_tol(e->background_hu, 60, 1e-9);
        ck_assert(e->radius >= 1.5 && e->radius <= 5);
        ck_assert_int_eq(quality_ring_stats(&t, &g, e->x, e->y, 0, 0.7 * e->radius, &m, &sd, NULL),
                         0);
        ck_assert_msg(fabs(m - e->hu) < 0.01, "lesion %d: %g, expected %g", i + 1, m, e->hu);
        ck_assert_int_eq(
            quality_ring_stats(&t, &g, e->x, e->y, e->bg_inner, e->bg_outer, &m, &sd, NULL), 0);
        ck_assert_msg(fabs(m - 60) < 0.01 && sd < 0.01, "lesion %d background: %g +- %g", i + 1, m,
                      sd);
    }
    const gpu_phantom_edge *e = &l->edge;
    ck_assert_int_eq(quality_ring_stats(&t, &g, e->x, e->y, 0, e->radius - 1, &m, &sd, NULL), 0);
    ck_assert(fabs(m - 700) < 0.01 && sd < 0.01);
    ck_assert_int_eq(
        quality_ring_stats(&t, &g, e->x, e->y, e->radius + 1, e->uniform_to, &m, &sd, NULL), 0);
    ck_assert_msg(fabs(m - 40) < 0.01 && sd < 0.01, "edge outside: %g +- %g", m, sd);
    /* Fat layer, gas pocket and the air around the body. */
    ck_assert_int_eq(quality_ring_stats(&t, &g, 0, -71, 0, 2, &m, &sd, NULL), 0);
    ck_assert_double_eq_tol(m, -100, 0.01);
    ck_assert_int_eq(quality_ring_stats(&t, &g, 50, -20, 0, 4, &m, &sd, NULL), 0);
    ck_assert_double_eq_tol(m, -1000, 0.01);
    ck_assert_int_eq(quality_ring_stats(&t, &g, 0, 0, 106, 108, &m, &sd, NULL), 0);
    ck_assert_double_eq_tol(m, -1000, 0.01);
    gpu_volume_close(&t);
}
END_TEST

/* The central ray of view 0 runs along x through the isocentre: its line
 * integral is the sum of chord lengths times the density steps, by hand. */
START_TEST(central_ray_integral_matches_chords)
{
    gpu_phantom ph;
    ck_assert_int_eq(gpu_phantom_build(GPU_PHANTOM_BODY, 220, &ph), 0);
    gpu_phantom_scan s;
    gpu_phantom_scan_default(&s);
    s.size = 64;
    s.slices = 1;
    s.views = 4;
    gpu_fdk_geometry g = {0};
    gpu_fdk_volume v;
    ck_assert_int_eq(gpu_phantom_geometry(&s, &g, &v), 0);
    ck_assert(g.nu % 2 == 1 && g.nv % 2 == 1);
    gpu_volume p;
    ck_assert_int_eq(gpu_volume_init(&p, g.nu, g.nv, g.nproj, 1), 0);
    ck_assert_int_eq(gpu_phantom_project(&ph, &g, &p), 0);
#define MU gpu_phantom_mu
    double liver_half = 50 * sqrt(1 - (10.0 / 36) * (10.0 / 36));
    /* Fat, soft tissue and liver; the lesion rows (y = -28, -10, 8) and the
     * bone and gas pocket lie off the axis. */
    double expect = 200 * MU(-100) + 184 * (MU(40) - MU(-100)) + 2 * liver_half * (MU(60) - MU(40));
#undef MU
    double got = p.data[(size_t)(g.nv / 2) * g.nu + g.nu / 2];
    /* The aperture's side rays pass 1/3 of a detector pixel (0.29 mm at the
     * isocentre) off the axis: chord changes of order 1e-5 relative. */
    /* The aperture's side rays run 1/3 of a detector pixel (0.57 mm here)
     * off the axis, shortening the chords by about 2e-5 relative; one
     * lesion on the ray would add 1e-3. */
    ck_assert_msg(fabs(got - expect) < 1e-4 * expect, "central ray %.6f, expected %.6f", got,
                  expect);
    gpu_volume_close(&p);
    gpu_fdk_geometry_close(&g);
}
END_TEST

/* sd of (reconstruction - noise-free reconstruction) within 60 mm of the
 * isocentre (structure cancels in the difference, so all of it counts). */
static double recon_noise(const gpu_phantom_scan *s, const gpu_fdk_geometry *g,
                          const gpu_fdk_volume *v, const gpu_volume *clean, const gpu_volume *ref,
                          double i0, int stream)
{
    gpu_volume noisy, img;
    ck_assert_int_eq(gpu_volume_init(&noisy, clean->nx, clean->ny, clean->nz, 1), 0);
    ck_assert_int_eq(gpu_volume_init(&img, v->nx, v->ny, v->nz, 1), 0);
    ck_assert_int_eq(gpu_phantom_noise(clean, i0, 0, s->seed, (uint64_t)stream, &noisy), 0);
    ck_assert_int_eq(gpu_phantom_reconstruct(s, g, &noisy, v, &img, NULL), 0);
    for (size_t i = 0; i < gpu_volume_count(&img); i++)
        img.data[i] -= ref->data[i];
    quality_grid qg = {{v->origin[0], v->origin[1], v->origin[2]}};
    double m, sd;
    ck_assert_int_eq(quality_ring_stats(&img, &qg, 0, 0, 0, 60, &m, &sd, NULL), 0);
    gpu_volume_close(&noisy);
    gpu_volume_close(&img);
    return sd;
}

/* Quantum noise variance goes as 1 / dose: quarter dose doubles the sd.
 * With about 8000 voxels per scan (correlated over a few voxels) the ratio
 * is known to a few percent: bounds 1.85 .. 2.15. */
START_TEST(quarter_dose_noise_is_twice_full_dose)
{
    gpu_phantom ph;
    ck_assert_int_eq(gpu_phantom_build(GPU_PHANTOM_BODY, 220, &ph), 0);
    gpu_phantom_scan s;
    gpu_phantom_scan_default(&s);
    s.size = 96;
    s.slices = 4;
    s.thickness = 3;
    gpu_fdk_geometry g = {0};
    gpu_fdk_volume v;
    ck_assert_int_eq(gpu_phantom_geometry(&s, &g, &v), 0);
    gpu_volume clean, ref;
    ck_assert_int_eq(gpu_volume_init(&clean, g.nu, g.nv, g.nproj, 1), 0);
    ck_assert_int_eq(gpu_volume_init(&ref, v.nx, v.ny, v.nz, 1), 0);
    ck_assert_int_eq(gpu_phantom_project(&ph, &g, &clean), 0);
    int rc = gpu_phantom_reconstruct(&s, &g, &clean, &v, &ref, NULL);
    if (rc == LDCT_EUNSUPPORTED) {
        printf("SKIP: libfftw3f cannot be loaded\n");
    } else {
        ck_assert_int_eq(rc, 0);
        double i0 = gpu_phantom_i0_element(&s, &g);
        double full = recon_noise(&s, &g, &v, &clean, &ref, i0, 0);
        double low = recon_noise(&s, &g, &v, &clean, &ref, i0 * 0.25, 1);
        printf("noise: full dose %.2f HU, quarter dose %.2f HU, ratio %.3f\n", full, low,
               low / full);
        ck_assert_msg(low / full > 1.85 && low / full < 2.15, "ratio %g", low / full);
    }
    gpu_volume_close(&clean);
    gpu_volume_close(&ref);
    gpu_fdk_geometry_close(&g);
}
END_TEST

/* Mean and variance of noisy - clean over n rays of line integral p. */
static void ray_stats(double p, double scale, double i0, int n, double *mean, double *var)
{
    gpu_volume clean, noisy;
    ck_assert_int_eq(gpu_volume_init(&clean, n, 1, 1, 1), 0);
    ck_assert_int_eq(gpu_volume_init(&noisy, n, 1, 1, 1), 0);
    for (int i = 0; i < n; i++)
        clean.data[i] = (float)p;
    ck_assert_int_eq(gpu_phantom_noise_scaled(&clean, i0, scale, 0, 5, 1, &noisy), 0);
    double s = 0, s2 = 0;
    for (int i = 0; i < n; i++) {
        double d = noisy.data[i] - clean.data[i];
        s += d;
        s2 += d * d;
    }
    *mean = s / n;
    *var = s2 / n - *mean * *mean;
    gpu_volume_close(&clean);
    gpu_volume_close(&noisy);
}

/* A patient 1.75 times the size: the counts see exp(-1.75 p), the extra
 * 0.75 p is calibrated out (no bias), the variance is exp(1.75 p) / I0 to
 * first order. A ray of p = 4 (the phantom's long axis) gains exp(3) = 20
 * times the variance, one of p = 0.5 (the rim) 1.45 times. */
START_TEST(patient_scale_raises_the_noise_of_long_rays)
{
    const double i0 = 1e6, scale = 1.75;
    const int n = 40000;
    for (double p = 0.5; p < 5; p += 3.5) {
        double m1, v1, ms, vs;
        ray_stats(p, 1, i0, n, &m1, &v1);
        ray_stats(p, scale, i0, n, &ms, &vs);
        double expect = exp(scale * p) / i0;
        ck_assert_msg(fabs(vs / expect - 1) < 0.05, "p %g: variance %g, expected %g", p, vs,
                      expect);
        ck_assert_msg(fabs(vs / v1 / exp((scale - 1) * p) - 1) < 0.06, "p %g: ratio %g", p,
                      vs / v1);
        ck_assert_msg(fabs(ms) < 5 * sqrt(vs / n) + vs, "p %g: bias %g", p, ms);
    }
    /* scale 1 is gpu_phantom_noise, bit for bit. */
    gpu_volume clean, a, b;
    ck_assert_int_eq(gpu_volume_init(&clean, 33, 3, 2, 1), 0);
    ck_assert_int_eq(gpu_volume_init(&a, 33, 3, 2, 1), 0);
    ck_assert_int_eq(gpu_volume_init(&b, 33, 3, 2, 1), 0);
    for (size_t i = 0; i < gpu_volume_count(&clean); i++)
        clean.data[i] = (float)(0.1 * (double)i);
    ck_assert_int_eq(gpu_phantom_noise(&clean, 1e4, 1.0, 9, 2, &a), 0);
    ck_assert_int_eq(gpu_phantom_noise_scaled(&clean, 1e4, 1.0, 1.0, 9, 2, &b), 0);
    ck_assert_int_eq(memcmp(a.data, b.data, gpu_volume_count(&a) * sizeof *a.data), 0);
    ck_assert_int_eq(gpu_phantom_noise_scaled(&clean, 1e4, 0.5, 0, 9, 2, &b), LDCT_EINPUT);
    gpu_volume_close(&clean);
    gpu_volume_close(&a);
    gpu_volume_close(&b);
}
END_TEST

START_TEST(bad_settings_are_refused)
{
    gpu_phantom ph;
    ck_assert_int_eq(gpu_phantom_build(GPU_PHANTOM_BODY, 200, &ph), LDCT_EINPUT);
    ck_assert_int_eq(gpu_phantom_build(GPU_PHANTOM_SHEPP_LOGAN, 200, &ph), 0);
    ck_assert_int_eq(ph.n, GPU_FDK_SHEPP_LOGAN_N);
    ck_assert_int_eq(gpu_phantom_kind_parse("shepp-logan"), GPU_PHANTOM_SHEPP_LOGAN);
    ck_assert_int_eq(gpu_phantom_kind_parse("head"), LDCT_EINPUT);
    gpu_phantom_scan s;
    gpu_phantom_scan_default(&s);
    s.dose = 1.5;
    gpu_fdk_geometry g = {0};
    gpu_fdk_volume v;
    ck_assert_int_eq(gpu_phantom_geometry(&s, &g, &v), LDCT_EINPUT);
    gpu_phantom_scan_default(&s);
    s.patient_scale = 0.8; /* a patient smaller than the image is not defined */
    ck_assert_int_eq(gpu_phantom_geometry(&s, &g, &v), LDCT_EINPUT);
    /* Shepp-Logan in HU: brain (0.2) is water, skull (1.0) 4000 HU. */
    double skull[3] = {0, 0.9 * 0.45 * 200 - 1, 0}, brain[3] = {0, -0.45 * 0.45 * 200, 0};
    ck_assert_double_eq_tol(gpu_phantom_hu(gpu_fdk_phantom_density(ph.e, ph.n, skull)), 4000, 1e-6);
    ck_assert_double_eq_tol(gpu_phantom_hu(gpu_fdk_phantom_density(ph.e, ph.n, brain)), 0, 1e-6);
}
END_TEST

/* --motion's bound (ldct phantom): the largest scale the 4D phantom
 * takes, and a little more is refused. */
START_TEST(heart_max_motion_is_the_largest_accepted)
{
    gpu_phantom base, out;
    gpu_phantom_heart h;
    ck_assert_int_eq(gpu_phantom_build(GPU_PHANTOM_BODY, 220, &base), 0);
    double m = gpu_phantom_heart_max_motion();
    ck_assert_double_eq_tol(m, 1.75, 1e-12);
    gpu_phantom_heart_default(&h, m);
    for (int t = 0; t < 8; t++)
        ck_assert_int_eq(gpu_phantom_at_time(&base, &h, t, 8, &out), 0);
    gpu_phantom_heart_default(&h, m + 1e-6);
    ck_assert_int_eq(gpu_phantom_at_time(&base, &h, 0, 8, &out), LDCT_EINPUT);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("phantom");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, rng_is_deterministic_per_key);
    tcase_add_test(tc, poisson_has_the_mean_and_variance_of_lambda);
    tcase_add_test(tc, noise_is_reproducible_with_a_seed_and_any_thread_count);
    tcase_add_test(tc, truth_holds_the_layout_values);
    tcase_add_test(tc, central_ray_integral_matches_chords);
    tcase_add_test(tc, quarter_dose_noise_is_twice_full_dose);
    tcase_add_test(tc, patient_scale_raises_the_noise_of_long_rays);
    tcase_add_test(tc, bad_settings_are_refused);
    tcase_add_test(tc, heart_max_motion_is_the_largest_accepted);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
