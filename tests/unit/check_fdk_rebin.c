/* Unit tests of cylindrical-detector support (gpu/fdk_rebin.c): the
 * virtual flat detector covers the fan, the rebinning reproduces a function
 * of (fan angle, height) that bilinear interpolation represents exactly, and
 * the analytic 3D Shepp-Logan projected along the cylinder's rays
 * reconstructs (rebinning + flat FDK) as well as the same phantom projected
 * on a flat detector. Small sizes: a few seconds on two cores.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/err.h"
#include "gpu/fdk.h"

static const double k_pi = 3.14159265358979323846;

enum { N = 64, NU = 96, NV = 96 };
static const double k_dso = 200, k_dsd = 400, k_pitch = 1.5;

static gpu_fdk_cylinder test_cylinder(void)
{
    gpu_fdk_cylinder c = {.nu = NU,
                          .nv = NV,
                          .dgamma = k_pitch / k_dsd,
                          .dv = k_pitch,
                          .cu = (NU - 1) / 2.0 + 0.25, /* quarter offset, as clinical scanners */
                          .cv = (NV - 1) / 2.0,
                          .dsd = k_dsd};
    return c;
}

START_TEST(flat_detector_covers_the_fan_of_the_cylinder)
{
    gpu_fdk_cylinder c = test_cylinder();
    gpu_fdk_flat f;
    gpu_fdk_cylinder_flat(&c, &f);
    ck_assert_double_eq_tol(f.du, k_pitch, 1e-12);
    ck_assert_int_eq(f.nv, NV);
    /* The outermost flat pixels stay within the outermost columns' rays, and
     * one more pixel would not. */
    double gl = atan(-f.cu * f.du / k_dsd), gr = atan((f.nu - 1 - f.cu) * f.du / k_dsd);
    ck_assert(gl >= -c.cu * c.dgamma - 1e-9);
    ck_assert(gr <= (NU - 1 - c.cu) * c.dgamma + 1e-9);
    ck_assert(atan((-f.cu - 1) * f.du / k_dsd) < -c.cu * c.dgamma);
    ck_assert(atan((f.nu - f.cu) * f.du / k_dsd) > (NU - 1 - c.cu) * c.dgamma);
    ck_assert_int_ge(f.nu, NU); /* tan(gamma) > gamma: the flat one is no narrower */
}
END_TEST

/* p(gamma, z) = 3 gamma + 0.02 z + 1 is linear in the element indices, so
 * bilinear interpolation reproduces it exactly: every flat pixel must hold
 * p at its ray's (gamma, z). A mirrored or mis-centred rebinning fails (a
 * sign error in gamma is off by up to 6 gamma_max here). */
START_TEST(rebinning_reproduces_a_linear_function_of_fan_angle_and_height)
{
    gpu_fdk_cylinder c = test_cylinder();
    gpu_fdk_flat f;
    gpu_fdk_cylinder_flat(&c, &f);
    gpu_volume in, out;
    ck_assert_int_eq(gpu_volume_init(&in, NU, NV, 2, 1), 0);
    ck_assert_int_eq(gpu_volume_init(&out, f.nu, f.nv, 2, 1), 0);
    for (int i = 0; i < 2; i++)
        for (int b = 0; b < NV; b++)
            for (int a = 0; a < NU; a++)
                in.data[((size_t)i * NV + b) * NU + a] =
                    (float)(3 * (a - c.cu) * c.dgamma + 0.02 * (b - c.cv) * c.dv + 1 + i);
    ck_assert_int_eq(gpu_fdk_rebin_cylinder(&c, &f, &in, &out), 0);
    double worst = 0;
    for (int i = 0; i < 2; i++)
        for (int b = 0; b < f.nv; b++)
            for (int a = 0; a < f.nu; a++) {
                double u = (a - f.cu) * f.du, v = (b - f.cv) * f.dv;
                double z = v * k_dsd / sqrt(k_dsd * k_dsd + u * u);
                double want = 3 * atan(u / k_dsd) + 0.02 * z + 1 + i;
                double d = fabs(out.data[((size_t)i * f.nv + b) * f.nu + a] - want);
                worst = d > worst ? d : worst;
            }
    ck_assert_msg(worst < 1e-5, "worst %.3g", worst);
    gpu_volume bad;
    ck_assert_int_eq(gpu_volume_init(&bad, f.nu + 1, f.nv, 2, 1), 0);
    ck_assert_int_eq(gpu_fdk_rebin_cylinder(&c, &f, &in, &bad), LDCT_EINPUT);
    gpu_volume_close(&bad);
    gpu_volume_close(&in);
    gpu_volume_close(&out);
}
END_TEST

/* Phantom constant over the voxel's 5^3 neighbourhood (see check_fdk.c). */
static int interior(const gpu_volume *ph, int x, int y, int z)
{
    float c = ph->data[((size_t)z * ph->ny + y) * ph->nx + x];
    for (int dz = -2; dz <= 2; dz++)
        for (int dy = -2; dy <= 2; dy++)
            for (int dx = -2; dx <= 2; dx++) {
                int X = x + dx, Y = y + dy, Z = z + dz;
                if (X < 0 || Y < 0 || Z < 0 || X >= N || Y >= N || Z >= N)
                    return 0;
                if (ph->data[((size_t)Z * N + Y) * N + X] != c)
                    return 0;
            }
    return 1;
}

/* RMSE over interior voxels of the central slices (|z| <= 10 mm). */
static double central_rmse(const gpu_volume *rec, const gpu_volume *ph)
{
    double se = 0;
    int n = 0;
    for (int z = N / 2 - 10; z < N / 2 + 10; z++)
        for (int y = 0; y < N; y++)
            for (int x = 0; x < N; x++) {
                if (!interior(ph, x, y, z))
                    continue;
                size_t i = ((size_t)z * N + y) * N + x;
                double d = (double)rec->data[i] - ph->data[i];
                se += d * d;
                n++;
            }
    ck_assert_int_gt(n, 10000);
    return sqrt(se / n);
}

/* Reconstructs the projections `proj` (flat, geometry g) into rec. */
static void reconstruct(const gpu_fdk_geometry *g, const gpu_volume *proj, gpu_volume *rec)
{
    gpu_fdk_volume vol;
    gpu_fdk_volume_centered(&vol, N, N, N, 1.0, 1.0, 1.0);
    gpu_fdk_params p;
    gpu_fdk_params_default(&p);
    ck_assert_int_eq(gpu_fdk(&p, g, proj, &vol, rec, NULL), 0);
}

/* The same bound as the flat case in check_fdk.c (0.02, reasoning there),
 * and at most 15% above the flat detector's own RMSE: rebinning adds one
 * bilinear interpolation of smooth projections, a small blur, nothing else. */
START_TEST(cylindrical_projections_reconstruct_as_well_as_flat_ones)
{
    const int nproj = 360;
    gpu_fdk_ellipsoid e[GPU_FDK_SHEPP_LOGAN_N];
    gpu_fdk_phantom_shepp_logan(e, 30.0);
    gpu_fdk_volume vol;
    gpu_fdk_volume_centered(&vol, N, N, N, 1.0, 1.0, 1.0);
    gpu_volume ph, rec, cyl, flat;
    ck_assert_int_eq(gpu_volume_init(&ph, N, N, N, 1), 0);
    ck_assert_int_eq(gpu_volume_init(&rec, N, N, N, 1), 0);
    ck_assert_int_eq(gpu_fdk_phantom_voxelize(e, GPU_FDK_SHEPP_LOGAN_N, &vol, 1, &ph), 0);

    gpu_fdk_cylinder c = test_cylinder();
    gpu_fdk_flat f;
    gpu_fdk_cylinder_flat(&c, &f);
    gpu_fdk_geometry g;
    ck_assert_int_eq(gpu_fdk_geometry_circular(&g, nproj, f.nu, f.nv, f.du, f.dv, k_dso, k_dsd,
                                               0.25, 2 * k_pi, f.cu - (f.nu - 1) / 2.0,
                                               f.cv - (f.nv - 1) / 2.0),
                     0);
    ck_assert_int_eq(gpu_volume_init(&cyl, NU, NV, nproj, 1), 0);
    ck_assert_int_eq(gpu_volume_init(&flat, f.nu, f.nv, nproj, 1), 0);
    ck_assert_int_eq(
        gpu_fdk_phantom_project_cylinder(e, GPU_FDK_SHEPP_LOGAN_N, &c, k_dso, g.angles, &cyl), 0);
    ck_assert_int_eq(gpu_fdk_rebin_cylinder(&c, &f, &cyl, &flat), 0);
    reconstruct(&g, &flat, &rec);
    double rmse_cyl = central_rmse(&rec, &ph);

    /* Reference: the same phantom projected on the flat detector itself. */
    ck_assert_int_eq(gpu_fdk_phantom_project(e, GPU_FDK_SHEPP_LOGAN_N, &g, &flat), 0);
    reconstruct(&g, &flat, &rec);
    double rmse_flat = central_rmse(&rec, &ph);
    printf("fdk 64^3, 360 views: RMSE flat %.4f, cylindrical rebinned %.4f\n", rmse_flat, rmse_cyl);
    ck_assert_msg(rmse_cyl < 0.02, "cylindrical RMSE %.4f", rmse_cyl);
    ck_assert_msg(rmse_cyl < 1.15 * rmse_flat, "cylindrical %.4f vs flat %.4f", rmse_cyl,
                  rmse_flat);

    gpu_fdk_geometry_close(&g);
    gpu_volume_close(&ph);
    gpu_volume_close(&rec);
    gpu_volume_close(&cyl);
    gpu_volume_close(&flat);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fdk_rebin");
    TCase *tc = tcase_create("cylinder");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, flat_detector_covers_the_fan_of_the_cylinder);
    tcase_add_test(tc, rebinning_reproduces_a_linear_function_of_fan_angle_and_height);
    tcase_add_test(tc, cylindrical_projections_reconstruct_as_well_as_flat_ones);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
