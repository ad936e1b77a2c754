/* Unit tests of the CUDA FDK (gpu/fdk.cu) against the CPU reference: the
 * backprojector on random geometries and data for several (I, K, Bx, By)
 * configurations, slabs forced by a tiny memory budget, the cuFFT filter
 * against the plain convolution, the full pipeline, and the analytic
 * Shepp-Logan reconstruction. Outputs are poisoned with NaN first. Without
 * a GPU every test prints "SKIP: no GPU" and passes. Links only libgpu and
 * libcommon (and needs no FFTW: the references used here are FFT-free).
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "gpu/device.h"
#include "gpu/cuda_util.h"
#include "gpu/fdk.h"
#include "gpu/fdk_tune.h"
#define GT_SEED 0xD1B54A32D192ED03ull
#include "tests/unit/gputest.h"

static const double k_pi = 3.14159265358979323846;
/* Tilt (radians, about the x axis) applied to the next random scenes' orbits:
 * a tilted orbit gives w a z term and exercises the backprojector's general
 * path (circular orbits about z take the path with w constant along z). */
static double scene_tilt;

/* P <- P * [R 0; 0 1] with R the rotation by t about x. */
static void tilt_matrices(gpu_fdk_geometry *g, double t)
{
    const double c = cos(t), s = sin(t);
    for (int i = 0; i < g->nproj; i++)
        for (int r = 0; r < 3; r++) {
            double *m = g->matrices + 12 * (size_t)i + 4 * r;
            const double y = m[1], z = m[2];
            m[1] = y * c + z * s;
            m[2] = -y * s + z * c;
        }
}

typedef struct scene {
    gpu_fdk_geometry g;
    gpu_fdk_volume vol;
    gpu_volume proj;
} scene;

/* Random circular geometry (full or short scan, detector offsets), random
 * volume (odd sizes, anisotropic voxels, shifted origin), random data. */
static void random_scene(scene *s)
{
    int nproj = irand(37, 101), nu = irand(41, 97), nv = irand(31, 77);
    double dso = 150 + 250 * urand(), dsd = dso * (1.5 + urand());
    double du = 0.5 + urand(), dv = 0.5 + urand();
    double range = urand() < 0.5 ? 2 * k_pi : gpu_fdk_short_scan_range(nu, du, dso, dsd);
    ck_assert_int_eq(gpu_fdk_geometry_circular(&s->g, nproj, nu, nv, du, dv, dso, dsd,
                                               2 * k_pi * urand(), range, 6 * urand() - 3,
                                               6 * urand() - 3),
                     0);
    if (scene_tilt != 0)
        tilt_matrices(&s->g, scene_tilt);
    /* Field of view at the isocentre, filled by the volume. */
    double fov = nu * du * dso / dsd;
    int n[3] = {irand(23, 61), irand(23, 61), irand(17, 45)};
    gpu_fdk_volume_centered(&s->vol, n[0], n[1], n[2], fov / n[0] * (0.8 + 0.4 * urand()),
                            fov / n[1] * (0.8 + 0.4 * urand()), nv * dv * dso / dsd / n[2]);
    s->vol.origin[0] += 2 * urand() - 1;
    ck_assert_int_eq(gpu_volume_init(&s->proj, nu, nv, nproj, 1), 0);
    for (size_t i = 0; i < gpu_volume_count(&s->proj); i++)
        s->proj.data[i] = (float)(2 * urand() - 0.5);
}

static void scene_close(scene *s)
{
    gpu_volume_close(&s->proj);
    gpu_fdk_geometry_close(&s->g);
}

static double compare(const gpu_volume *a, const gpu_volume *ref, double *maxabs, int *nans)
{
    double num = 0, den = 0, m = 0;
    *nans = 0;
    for (size_t i = 0; i < gpu_volume_count(a); i++) {
        if (isnan(a->data[i]))
            (*nans)++;
        double d = (double)a->data[i] - ref->data[i];
        num += d * d;
        den += (double)ref->data[i] * ref->data[i];
        m = fabs(d) > m ? fabs(d) : m;
    }
    *maxabs = m;
    return sqrt(num / den);
}

/* Per-voxel bound of the texture unit's error. Its bilinear weights have 8
 * fractional bits, so each of the two fractions is off by at most 1/256;
 * the interpolated value then moves by at most (1/256) * 2 * max|p| per
 * fraction (pixels outside the detector count as 0, so this holds at the
 * border too), 4 max|p| / 256 = max|p| / 64 in all. Summed over the
 * projections whose footprint (-1, nu) x (-1, nv) holds the voxel, with the
 * weight 1/w^2: bound(X) = sum_i M_i / (64 w_i(X)^2). Plus 1e-5 of the
 * largest value for float rounding (the reference sums in double). */
static void error_bound(const gpu_fdk_geometry *g, const gpu_volume *proj, const gpu_fdk_volume *v,
                        const gpu_volume *ref, gpu_volume *bound)
{
    const size_t pix = (size_t)g->nu * g->nv;
    double *M = malloc(sizeof(double) * (size_t)g->nproj), big = 0;
    ck_assert_ptr_nonnull(M);
    for (int i = 0; i < g->nproj; i++) {
        M[i] = 0;
        for (size_t k = 0; k < pix; k++)
            M[i] = fmax(M[i], fabs(proj->data[pix * i + k]));
    }
    for (size_t i = 0; i < gpu_volume_count(ref); i++)
        big = fmax(big, fabs(ref->data[i]));
    for (int z = 0; z < v->nz; z++)
        for (int y = 0; y < v->ny; y++)
            for (int x = 0; x < v->nx; x++) {
                double X[3] = {v->origin[0] + x * v->voxel[0], v->origin[1] + y * v->voxel[1],
                               v->origin[2] + z * v->voxel[2]};
                double b = 1e-5 * big;
                for (int i = 0; i < g->nproj; i++) {
                    const double *m = g->matrices + 12 * (size_t)i;
                    double r[3];
                    for (int k = 0; k < 3; k++)
                        r[k] = m[4 * k] * X[0] + m[4 * k + 1] * X[1] + m[4 * k + 2] * X[2] +
                               m[4 * k + 3];
                    double u = r[0] / r[2], vv = r[1] / r[2];
                    if (r[2] > 0 && u > -1 && u < g->nu && vv > -1 && vv < g->nv)
                        b += M[i] / (64.0 * r[2] * r[2]);
                }
                bound->data[((size_t)z * v->ny + y) * v->nx + x] = (float)b;
            }
    free(M);
}

/* Number of voxels beyond the bound, and the worst error / bound. */
static int beyond_bound(const gpu_volume *out, const gpu_volume *ref, const gpu_volume *bound,
                        double *worst)
{
    int over = 0;
    *worst = 0;
    for (size_t i = 0; i < gpu_volume_count(out); i++) {
        double d = fabs((double)out->data[i] - ref->data[i]);
        *worst = fmax(*worst, d / bound->data[i]);
        over += !(d <= bound->data[i]);
    }
    return over;
}

static void check_bp(int I, int K, int bx, int by, size_t budget)
{
    scene s;
    random_scene(&s);
    gpu_volume ref, out, bound;
    const gpu_fdk_volume *v = &s.vol;
    ck_assert_int_eq(gpu_volume_init(&ref, v->nx, v->ny, v->nz, 1), 0);
    ck_assert_int_eq(gpu_volume_init(&out, v->nx, v->ny, v->nz, 1), 0);
    ck_assert_int_eq(gpu_volume_init(&bound, v->nx, v->ny, v->nz, 1), 0);
    gpu_fdk_params p;
    gpu_fdk_params_default(&p);
    ck_assert_int_eq(gpu_fdk_backproject_ref(&p, &s.g, &s.proj, v, &ref, NULL), 0);
    error_bound(&s.g, &s.proj, v, &ref, &bound);
    p.bp_i = I, p.bp_k = K, p.bp_bx = bx, p.bp_by = by;
    gpu_fdk_stats st = {0};
    p.stats = &st;
    gpu_device gpu;
    ck_assert_int_eq(gpu_device_parse("gpu:0", &gpu), 0);
    if (budget) /* the host's fixed allowance (see plan_slab in fdk.cu) plus 4 planes */
        budget = (size_t)(8u << 20) +
                 (size_t)18 * s.g.nu * s.g.nv * (I > s.g.nproj ? s.g.nproj : I) +
                 (size_t)16 * v->nx * v->ny;
    gpu.mem_budget = budget;
    poison(&out);
    ck_assert_int_eq(gpu_fdk_backproject_cuda(&p, &s.g, &s.proj, v, &out, &gpu), 0);
    double maxabs = 0, worst = 0;
    int nans = 0;
    double e = compare(&out, &ref, &maxabs, &nans);
    int over = beyond_bound(&out, &ref, &bound, &worst);
    printf("bp %d proj %dx%d -> %dx%dx%d I=%d K=%d %dx%d slabs=%d: rel L2 %.3g, max abs %.3g, "
           "max error/bound %.3f\n",
           s.g.nproj, s.g.nu, s.g.nv, v->nx, v->ny, v->nz, I, K, bx, by, st.slabs, e, maxabs,
           worst);
    fflush(stdout);
    ck_assert_int_eq(nans, 0);
    ck_assert_msg(over == 0, "%d voxels beyond the interpolation bound (worst %.3f)", over, worst);
    /* Random data: the fraction errors are unbiased and average over
     * projections; 2e-3 is about twice the worst case seen. */
    ck_assert_msg(e < 2e-3, "rel L2 %.3g", e);
    if (budget)
        ck_assert_int_gt(st.slabs, 1);
    gpu_volume_close(&ref);
    gpu_volume_close(&out);
    gpu_volume_close(&bound);
    scene_close(&s);
}

START_TEST(cuda_backprojection_matches_ref_on_random_geometry_and_configs)
{
    if (!have_gpu())
        return;
    check_bp(0, 0, 0, 0, 0);
    check_bp(1, 1, 32, 1, 0);
    check_bp(7, 2, 16, 8, 0);
    check_bp(16, 8, 64, 4, 0);
    check_bp(64, 4, 32, 32, 0);
    check_bp(200, 1, 128, 2, 0);
}
END_TEST

START_TEST(cuda_backprojection_matches_ref_on_tilted_orbits)
{
    if (!have_gpu())
        return;
    scene_tilt = 0.2;
    check_bp(0, 0, 0, 0, 0);
    check_bp(5, 1, 32, 4, 0);
    check_bp(16, 8, 64, 4, 0);
    scene_tilt = 0;
}
END_TEST

/* A configuration left at 0 comes from the tuner's cache for this GPU model
 * and size (what the daemon relies on after `ldct tune fdk`). */
START_TEST(cuda_backprojection_uses_the_cached_tuned_configuration)
{
    if (!have_gpu())
        return;
    scene s;
    random_scene(&s);
    char dir[] = "/tmp/ldct-tune-XXXXXX", path[64], name[128];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/fdk-tune.cache", dir);
#if LDCT_WITH_CUDA /* a build without CUDA has no GPU and returned above */
    ck_assert_int_eq(gpu__cuda_device_name(0, name, sizeof name), 0);
#else
    snprintf(name, sizeof name, "none");
#endif
    const gpu_fdk_cfg tuned = {5, 2, 16, 4};
    ck_assert_int_eq(gpu_fdk_tune_cache_store(path, name, s.g.nproj, s.g.nu, s.g.nv, s.vol.nx,
                                              s.vol.ny, s.vol.nz, &tuned, 1.0),
                     0);
    gpu_fdk_tune_cache_set(path);
    gpu_volume out;
    ck_assert_int_eq(gpu_volume_init(&out, s.vol.nx, s.vol.ny, s.vol.nz, 1), 0);
    gpu_fdk_params p;
    gpu_fdk_params_default(&p);
    gpu_fdk_stats st = {0};
    p.stats = &st;
    ck_assert_int_eq(gpu_fdk_backproject_cuda(&p, &s.g, &s.proj, &s.vol, &out, NULL), 0);
    printf("cached configuration: used %d,%d,%d,%d\n", st.config[0], st.config[1], st.config[2],
           st.config[3]);
    ck_assert(st.config[0] == 5 && st.config[1] == 2 && st.config[2] == 16 && st.config[3] == 4);
    /* Explicit parameters win over the cache. */
    p.bp_i = 8, p.bp_k = 4, p.bp_bx = 32, p.bp_by = 8;
    ck_assert_int_eq(gpu_fdk_backproject_cuda(&p, &s.g, &s.proj, &s.vol, &out, NULL), 0);
    ck_assert_int_eq(st.config[0], 8);
    gpu_fdk_tune_cache_set(NULL);
    unlink(path);
    rmdir(dir);
    gpu_volume_close(&out);
    scene_close(&s);
}
END_TEST

START_TEST(cuda_backprojection_in_slabs_under_a_tiny_budget)
{
    if (!have_gpu())
        return;
    check_bp(8, 4, 32, 8, 1); /* budget: a few planes beyond the fixed buffers */
}
END_TEST

START_TEST(cuda_filter_matches_direct_convolution_for_every_window)
{
    if (!have_gpu())
        return;
    scene s;
    random_scene(&s);
    gpu_volume a, b;
    ck_assert_int_eq(gpu_volume_init(&a, s.g.nu, s.g.nv, s.g.nproj, 1), 0);
    ck_assert_int_eq(gpu_volume_init(&b, s.g.nu, s.g.nv, s.g.nproj, 1), 0);
    gpu_fdk_params p;
    gpu_fdk_params_default(&p);
    for (int f = 0; f < GPU_FDK_NFILTERS; f++) {
        p.filter = f;
        poison(&a);
        ck_assert_int_eq(gpu_fdk_filter_cuda(&p, &s.g, &s.proj, &a, NULL), 0);
        ck_assert_int_eq(gpu_fdk_filter_direct(&p, &s.g, &s.proj, &b), 0);
        double m;
        int nans;
        double e = compare(&a, &b, &m, &nans);
        printf("cuda filter %s (%d x %d rows of %d): rel L2 %.3g\n", gpu_fdk_filter_name(f),
               s.g.nproj, s.g.nv, s.g.nu, e);
        ck_assert_int_eq(nans, 0);
        /* 1e-5: single-precision cuFFT against double sums. */
        ck_assert_msg(e < 1e-5, "rel L2 %.3g", e);
    }
    gpu_volume_close(&a);
    gpu_volume_close(&b);
    scene_close(&s);
}
END_TEST

/* The whole pipeline (weights, cuFFT, arrays, backprojection, split
 * download) against the direct filter followed by the reference
 * backprojector, under the same per-voxel interpolation bound computed from
 * the filtered projections (filtered data have both signs and largely
 * cancel, so a relative L2 bound would say little; cuFFT's own error, 1e-7
 * relative, is far below the bound). */
START_TEST(cuda_fdk_matches_direct_filter_and_ref_backprojection)
{
    if (!have_gpu())
        return;
    for (int t = 0; t < 3; t++) {
        scene s;
        random_scene(&s);
        const gpu_fdk_volume *v = &s.vol;
        gpu_volume filt, ref, out, bound;
        ck_assert_int_eq(gpu_volume_init(&bound, v->nx, v->ny, v->nz, 1), 0);
        ck_assert_int_eq(gpu_volume_init(&filt, s.g.nu, s.g.nv, s.g.nproj, 1), 0);
        ck_assert_int_eq(gpu_volume_init(&ref, v->nx, v->ny, v->nz, 1), 0);
        ck_assert_int_eq(gpu_volume_init(&out, v->nx, v->ny, v->nz, 1), 0);
        gpu_fdk_params p;
        gpu_fdk_params_default(&p);
        p.filter = t % GPU_FDK_NFILTERS;
        p.bp_i = t == 1 ? 5 : 0;
        ck_assert_int_eq(gpu_fdk_filter_direct(&p, &s.g, &s.proj, &filt), 0);
        ck_assert_int_eq(gpu_fdk_backproject_ref(&p, &s.g, &filt, v, &ref, NULL), 0);
        poison(&out);
        ck_assert_int_eq(gpu_fdk_cuda(&p, &s.g, &s.proj, v, &out, NULL), 0);
        error_bound(&s.g, &filt, v, &ref, &bound);
        double m, worst;
        int nans;
        double e = compare(&out, &ref, &m, &nans);
        int over = beyond_bound(&out, &ref, &bound, &worst);
        printf("cuda fdk %d proj -> %dx%dx%d %s: rel L2 %.3g, max error/bound %.3f\n", s.g.nproj,
               v->nx, v->ny, v->nz, gpu_fdk_filter_name(p.filter), e, worst);
        ck_assert_int_eq(nans, 0);
        ck_assert_msg(over == 0, "%d voxels beyond the bound (worst %.3f)", over, worst);
        gpu_volume_close(&bound);
        gpu_volume_close(&filt);
        gpu_volume_close(&ref);
        gpu_volume_close(&out);
        scene_close(&s);
    }
}
END_TEST

/* The analytic test of check_fdk.c on the GPU: same bound (0.02) and reason. */
START_TEST(cuda_fdk_reconstructs_shepp_logan_in_central_slices)
{
    if (!have_gpu())
        return;
    const int N = 64, nu = 96, nv = 96, nproj = 360;
    gpu_fdk_geometry g;
    ck_assert_int_eq(
        gpu_fdk_geometry_circular(&g, nproj, nu, nv, 1.5, 1.5, 200, 400, 0.25, 2 * k_pi, 0, 0), 0);
    gpu_fdk_ellipsoid e[GPU_FDK_SHEPP_LOGAN_N];
    gpu_fdk_phantom_shepp_logan(e, 30.0);
    gpu_fdk_volume vol;
    gpu_fdk_volume_centered(&vol, N, N, N, 1.0, 1.0, 1.0);
    gpu_volume proj, rec, ph;
    ck_assert_int_eq(gpu_volume_init(&proj, nu, nv, nproj, 1), 0);
    ck_assert_int_eq(gpu_volume_init(&rec, N, N, N, 1), 0);
    ck_assert_int_eq(gpu_volume_init(&ph, N, N, N, 1), 0);
    ck_assert_int_eq(gpu_fdk_phantom_project(e, GPU_FDK_SHEPP_LOGAN_N, &g, &proj), 0);
    ck_assert_int_eq(gpu_fdk_phantom_voxelize(e, GPU_FDK_SHEPP_LOGAN_N, &vol, 1, &ph), 0);
    gpu_fdk_params p;
    gpu_fdk_params_default(&p);
    poison(&rec);
    ck_assert_int_eq(gpu_fdk_cuda(&p, &g, &proj, &vol, &rec, NULL), 0);
    double se = 0;
    int n = 0;
    for (int z = N / 2 - 10; z < N / 2 + 10; z++)
        for (int y = 2; y < N - 2; y++)
            for (int x = 2; x < N - 2; x++) {
                size_t i = ((size_t)z * N + y) * N + x;
                int flat = 1;
                for (int d = -2; d <= 2 && flat; d++)
                    for (int c = -2; c <= 2 && flat; c++)
                        for (int b = -2; b <= 2 && flat; b++)
                            flat = ph.data[i + ((long)d * N + c) * N + b] == ph.data[i];
                if (!flat)
                    continue;
                double dd = (double)rec.data[i] - ph.data[i];
                se += dd * dd;
                n++;
            }
    double rmse = sqrt(se / n);
    printf("cuda fdk Shepp-Logan 64^3, 360 views: RMSE %.4f over %d interior voxels\n", rmse, n);
    ck_assert_int_gt(n, 10000);
    ck_assert_msg(rmse < 0.02, "RMSE %.4f", rmse);
    gpu_volume_close(&proj);
    gpu_volume_close(&rec);
    gpu_volume_close(&ph);
    gpu_fdk_geometry_close(&g);
}
END_TEST

static Suite *fdk_suite(void)
{
    Suite *s = suite_create("gpu_fdk");
    TCase *tg = tcase_create("cuda");
    tcase_set_timeout(tg, 300);
    tcase_add_test(tg, cuda_backprojection_matches_ref_on_random_geometry_and_configs);
    tcase_add_test(tg, cuda_backprojection_matches_ref_on_tilted_orbits);
    tcase_add_test(tg, cuda_backprojection_uses_the_cached_tuned_configuration);
    tcase_add_test(tg, cuda_backprojection_in_slabs_under_a_tiny_budget);
    tcase_add_test(tg, cuda_filter_matches_direct_convolution_for_every_window);
    tcase_add_test(tg, cuda_fdk_matches_direct_filter_and_ref_backprojection);
    tcase_add_test(tg, cuda_fdk_reconstructs_shepp_logan_in_central_slices);
    suite_add_tcase(s, tg);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(fdk_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
