/* Unit tests of the CUDA adaptive4d against the CPU reference: fresh
 * structured-noisy inputs of odd 4D sizes, outputs poisoned with NaN first,
 * both tensor-grid factors, a memory budget small enough to force slabs
 * along z, flat data, and the spatial back end (direct convolution, kernels
 * in constant memory; refused beyond 11^4). Without a GPU every test prints
 * "SKIP: no GPU" and passes.
 *
 * Tolerance: relative L2 <= 1e-3 and max |diff| <= 0.5% of the input range.
 * Both versions filter in single precision with different FFT libraries and
 * the CUDA smoothing accumulates in float where the reference uses double;
 * the control tensor goes through a global maximum and eigenvectors, which
 * amplify rounding a little where eigenvalues are close.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/err.h"
#include "gpu/adaptive4d.h"
#include "gpu/device.h"
#include "gpu/volume.h"
#define GT_SEED 0xD1B54A32D192ED03ull
#include "tests/unit/gputest.h"

/* A beating blob, a step moving with t, a ramp and uniform noise. */
static void fill(gpu_volume *v)
{
    for (int t = 0; t < v->nt; t++)
        for (int z = 0; z < v->nz; z++)
            for (int y = 0; y < v->ny; y++)
                for (int x = 0; x < v->nx; x++) {
                    double dx = x - v->nx / 2.0, dy = y - v->ny / 2.0, dz = z - v->nz / 2.0;
                    double r = v->nz / 3.0 * (1.0 + 0.2 * sin(t));
                    double s = 100.0 + 0.7 * x - 0.4 * y;
                    if (dx * dx + dy * dy + dz * dz < r * r)
                        s += 200.0;
                    if (x > v->nx / 4 + t)
                        s += 80.0;
                    s += 60.0 * (urand() - 0.5);
                    v->data[(((size_t)t * v->nz + z) * v->ny + y) * v->nx + x] = (float)s;
                }
}

static void compare(const gpu_volume *a, const gpu_volume *ref, const gpu_volume *in)
{
    double num = 0, den = 0, maxd = 0, lo = INFINITY, hi = -INFINITY;
    int nans = 0;
    for (size_t i = 0; i < gpu_volume_count(ref); i++) {
        if (isnan(a->data[i]))
            nans++;
        double d = (double)a->data[i] - ref->data[i];
        num += d * d;
        den += (double)ref->data[i] * ref->data[i];
        maxd = fmax(maxd, fabs(d));
        lo = fmin(lo, in->data[i]);
        hi = fmax(hi, in->data[i]);
    }
    double rel = sqrt(num / den);
    printf("adaptive4d cuda vs ref %dx%dx%dx%d: rel L2 %.2e, max |diff| %.3g (range %.0f)\n", a->nx,
           a->ny, a->nz, a->nt, rel, maxd, hi - lo);
    ck_assert_int_eq(nans, 0);
    ck_assert_msg(rel <= 1e-3, "rel L2 %g", rel);
    ck_assert_msg(maxd <= 0.005 * (hi - lo), "max diff %g", maxd);
}

static void check_case_t(int nx, int ny, int nz, int nt, int downsample, size_t budget,
                         int expect_slabs, size_t mem_budget)
{
    gpu_volume in, ref, out;
    ck_assert_int_eq(gpu_volume_init(&in, nx, ny, nz, nt), 0);
    ck_assert_int_eq(gpu_volume_init(&ref, nx, ny, nz, nt), 0);
    ck_assert_int_eq(gpu_volume_init(&out, nx, ny, nz, nt), 0);
    fill(&in);
    for (size_t i = 0; i < gpu_volume_count(&out); i++)
        out.data[i] = NAN;
    gpu_adaptive4d_params p;
    gpu_adaptive4d_params_default(&p);
    p.downsample = downsample;
    ck_assert_int_eq(gpu_adaptive4d_ref(&p, &in, &ref, NULL), 0);
    gpu_device gpu = {GPU_DEVICE_CUDA, 0, budget, NULL, 0};
    gpu_a4d_stats st = {0};
    p.stats = &st;
    p.mem_budget = mem_budget;
    int rc = gpu_adaptive4d_cuda(&p, &in, &out, &gpu);
    ck_assert_msg(rc == 0, "cuda: %s", ldct_strerror(rc));
    printf("adaptive4d cuda: %d slab(s), %d along t, %.1f ms\n", st.slabs, st.t_slabs, st.total_ms);
    /* A tiny GPU budget may cut along t as well as z (the tensor grid does
     * not fit next to a reconstruction slab); without budgets, one slab. */
    if (mem_budget)
        ck_assert_int_gt(st.t_slabs, 1);
    else if (!budget)
        ck_assert_int_eq(st.t_slabs, 1);
    ck_assert(expect_slabs ? st.slabs > 1 : st.slabs >= 1);
    compare(&out, &ref, &in);
    gpu_volume_close(&in);
    gpu_volume_close(&ref);
    gpu_volume_close(&out);
}

static void check_case(int nx, int ny, int nz, int nt, int downsample, size_t budget,
                       int expect_slabs)
{
    check_case_t(nx, ny, nz, nt, downsample, budget, expect_slabs, 0);
}

START_TEST(cuda_matches_ref_on_odd_sizes)
{
    if (!have_gpu())
        return;
    check_case(41, 37, 29, 9, 2, 0, 0);
    check_case(23, 19, 17, 7, 1, 0, 0);
    check_case(33, 31, 21, 1, 2, 0, 0); /* one time point */
}
END_TEST

START_TEST(cuda_tiny_budget_slabs_match_ref)
{
    if (!have_gpu())
        return;
    check_case(41, 37, 29, 9, 2, 20000000, 1);
}
END_TEST

/* Slabs along t (issue 8: 100 time points in slabs): a budget of 9 output
 * time points plus the default halo on both sides (gpu__a4d_t_halo: 18
 * with step 6; gpu_adaptive4d_cuda's estimate: 48 bytes per tensor-grid
 * voxel and a 16-plane reconstruction slab per time point) forces t-slabs
 * (and z-slabs inside them) on 61 time points; the result matches the
 * one-slab CPU reference with the tolerance above. */
START_TEST(cuda_t_slabs_match_ref)
{
    if (!have_gpu())
        return;
    const int nx = 21, ny = 19, nz = 9, nt = 61, f = 2;
    gpu_adaptive4d_params p;
    gpu_adaptive4d_params_default(&p);
    gpu_a4d_bank b;
    ck_assert_int_eq(gpu__a4d_bank_make(&p, GPU_A4D_BANK_ALL, &b), 0);
    const int halo = gpu__a4d_t_halo(&p, &b);
    gpu__a4d_bank_free(&b);
    size_t per_tp = 48 * (size_t)((nx + 1) / f) * ((ny + 1) / f) * ((nz + 1) / f) +
                    44 * (size_t)(nx + 16) * (ny + 16) * 16;
    check_case_t(nx, ny, nz, nt, f, 0, 0, per_tp * (size_t)(9 + 2 * halo));
}
END_TEST

/* The reference caps (adaptive4d.h, gpu__a4d_surrogate) on the GPU: a
 * 48x48 square of a 64x64 image gains 300 per time point (most of the image
 * changes along t, so both caps apply). One call, then 10 t-slabs (the
 * surrogate's first pass, 5 time points, fits in one slab of that budget;
 * a smaller budget leaves the main pass no room: LDCT_ENOMEM_GPU): each
 * matches the CPU reference, and the square's mean at the centre keeps
 * its curve within 15 (rms). */
START_TEST(cuda_enhancement_caps_match_ref)
{
    if (!have_gpu())
        return;
    enum { EX = 64, EY = 64, EZ = 8, ET = 10 };
    gpu_volume in, ref, out;
    ck_assert_int_eq(gpu_volume_init(&in, EX, EY, EZ, ET), 0);
    ck_assert_int_eq(gpu_volume_init(&ref, EX, EY, EZ, ET), 0);
    ck_assert_int_eq(gpu_volume_init(&out, EX, EY, EZ, ET), 0);
    for (int t = 0; t < ET; t++)
        for (int z = 0; z < EZ; z++)
            for (int y = 0; y < EY; y++)
                for (int x = 0; x < EX; x++) {
                    int inside = x >= 8 && x < 56 && y >= 8 && y < 56;
                    in.data[(((size_t)t * EZ + z) * EY + y) * EX + x] =
                        (float)(-400.0 + (inside ? 300.0 * t : 0.0) + 40.0 * (urand() - 0.5));
                }
    gpu_adaptive4d_params p;
    gpu_adaptive4d_params_default(&p);
    ck_assert_int_eq(gpu_adaptive4d_ref(&p, &in, &ref, NULL), 0);
    /* Less than the whole (cuda_t_slabs_match_ref's estimate): with step
     * 6's halo of 18 time points, slabs of one output time point */
    const size_t per_tp =
        48 * (size_t)(EX / 2) * (EY / 2) * (EZ / 2) + 44 * (size_t)(EX + 16) * (EY + 16) * 16;
    gpu_device gpu = {GPU_DEVICE_CUDA, 0, 0, NULL, 0};
    for (int slabs = 0; slabs < 2; slabs++) {
        gpu_a4d_stats st = {0};
        p.stats = &st;
        p.mem_budget = slabs ? per_tp * (ET - 1) : 0;
        for (size_t i = 0; i < gpu_volume_count(&out); i++)
            out.data[i] = NAN;
        int rc = gpu_adaptive4d_cuda(&p, &in, &out, &gpu);
        ck_assert_msg(rc == 0, "cuda: %s", ldct_strerror(rc));
        printf("adaptive4d cuda, enhancement: %d slab(s) along t\n", st.t_slabs);
        ck_assert_int_eq(st.t_slabs > 1, slabs);
        compare(&out, &ref, &in);
        double se = 0;
        for (int t = 0; t < ET; t++) {
            double m = 0;
            for (int z = 0; z < EZ; z++)
                for (int y = 28; y < 36; y++)
                    for (int x = 28; x < 36; x++)
                        m += out.data[(((size_t)t * EZ + z) * EY + y) * EX + x];
            se += pow(m / (EZ * 64) - (-400.0 + 300.0 * t), 2);
        }
        ck_assert_msg(sqrt(se / ET) < 15.0, "curve rms error %.1f", sqrt(se / ET));
    }
    gpu_volume_close(&in);
    gpu_volume_close(&ref);
    gpu_volume_close(&out);
}
END_TEST

START_TEST(cuda_constant_volume_unchanged)
{
    if (!have_gpu())
        return;
    gpu_volume in, out;
    ck_assert_int_eq(gpu_volume_init(&in, 19, 17, 15, 7), 0);
    ck_assert_int_eq(gpu_volume_init(&out, 19, 17, 15, 7), 0);
    for (size_t i = 0; i < gpu_volume_count(&in); i++) {
        in.data[i] = -321.0f;
        out.data[i] = NAN;
    }
    gpu_adaptive4d_params p;
    gpu_adaptive4d_params_default(&p);
    gpu_device gpu = {GPU_DEVICE_CUDA, 0, 0, NULL, 0};
    ck_assert_int_eq(gpu_adaptive4d_cuda(&p, &in, &out, &gpu), 0);
    for (size_t i = 0; i < gpu_volume_count(&in); i++)
        ck_assert_msg(fabs(out.data[i] + 321.0) < 1e-2, "voxel %zu: %g", i, out.data[i]);
    gpu_volume_close(&in);
    gpu_volume_close(&out);
}
END_TEST

START_TEST(cuda_spatial_backend_matches_ref)
{
    if (!have_gpu())
        return;
    gpu_volume in, ref, out;
    ck_assert_int_eq(gpu_volume_init(&in, 23, 19, 17, 7), 0);
    ck_assert_int_eq(gpu_volume_init(&ref, 23, 19, 17, 7), 0);
    ck_assert_int_eq(gpu_volume_init(&out, 23, 19, 17, 7), 0);
    fill(&in);
    for (size_t i = 0; i < gpu_volume_count(&out); i++)
        out.data[i] = NAN;
    gpu_adaptive4d_params p;
    gpu_adaptive4d_params_default(&p);
    ck_assert_int_eq(gpu_adaptive4d_ref(&p, &in, &ref, NULL), 0);
    gpu_a4d_stats st = {0};
    p.stats = &st;
    p.backend = GPU_A4D_SPATIAL;
    gpu_device gpu = {GPU_DEVICE_CUDA, 0, 0, NULL, 0};
    ck_assert_int_eq(gpu_adaptive4d_cuda(&p, &in, &out, &gpu), 0);
    ck_assert_int_eq(st.fft_slabs, 0);
    compare(&out, &ref, &in);
    p.recon_size = 13; /* beyond constant memory */
    ck_assert_int_eq(gpu_adaptive4d_cuda(&p, &in, &out, &gpu), LDCT_EUNSUPPORTED);
    gpu_volume_close(&in);
    gpu_volume_close(&ref);
    gpu_volume_close(&out);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gpu_adaptive4d");
    TCase *tc = tcase_create("cuda");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, cuda_matches_ref_on_odd_sizes);
    tcase_add_test(tc, cuda_tiny_budget_slabs_match_ref);
    tcase_add_test(tc, cuda_t_slabs_match_ref);
    tcase_add_test(tc, cuda_enhancement_caps_match_ref);
    tcase_add_test(tc, cuda_constant_volume_unchanged);
    tcase_add_test(tc, cuda_spatial_backend_matches_ref);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
