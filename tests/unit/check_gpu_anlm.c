/* Unit tests of the CUDA adaptive NLM (gpu/anlm.cu) against the CPU
 * reference (gpu/anlm_ref.c): fresh random inputs of odd sizes, outputs
 * poisoned with NaN first, Gaussian and Rician models, with and without the
 * sub-band mixing; a tiny memory budget forces slabs, whose result must
 * agree with the one-slab run to float rounding (1e-5 of the value range). The CUDA tests print
 * "SKIP: no GPU" and pass without a GPU; the dispatcher test runs everywhere.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "gpu/anlm.h"
#include "gpu/device.h"
#include "gpu/volume.h"
#define GT_SEED 0x853C49E6748FEA9Bull
#include "tests/unit/gputest.h"

/* Structure around `offset` (ramp, blob, step) plus noise whose sigma rises
 * from sigma to 3 sigma along x; Rician: magnitude of (signal + n1, n2). */
static void fill(gpu_volume *v, double offset, double sigma, int rician)
{
    for (int z = 0; z < v->nz; z++)
        for (int y = 0; y < v->ny; y++)
            for (int x = 0; x < v->nx; x++) {
                double cx = x - v->nx / 2.0, cy = y - v->ny / 2.0, cz = z - v->nz / 2.0;
                double s = offset + 1.5 * x - y + 0.5 * z;
                if (cx * cx + cy * cy + cz * cz < v->nx * v->nx / 9.0)
                    s += 120.0;
                if (x > v->nx * 2 / 3)
                    s -= 70.0;
                double sg = sigma * (1.0 + 2.0 * x / v->nx), n1 = sg * grand();
                size_t i = ((size_t)z * v->ny + y) * v->nx + x;
                if (rician) {
                    double n2 = sg * grand();
                    v->data[i] = (float)sqrt((s + n1) * (s + n1) + n2 * n2);
                } else {
                    v->data[i] = (float)(s + n1);
                }
            }
}

typedef struct diff {
    double rel_l2, max_abs;
    size_t nans, far; /* voxels off by more than 1e-3 of the value range */
} diff;

static diff compare(const gpu_volume *a, const gpu_volume *ref)
{
    diff d = {0};
    double num = 0, den = 0, lo = ref->data[0], hi = ref->data[0];
    size_t n = gpu_volume_count(a);
    for (size_t i = 0; i < n; i++) {
        lo = fmin(lo, ref->data[i]), hi = fmax(hi, ref->data[i]);
    }
    for (size_t i = 0; i < n; i++) {
        if (isnan(a->data[i]))
            d.nans++;
        double e = (double)a->data[i] - ref->data[i];
        num += e * e;
        den += (double)ref->data[i] * ref->data[i];
        d.max_abs = fmax(d.max_abs, fabs(e));
        d.far += fabs(e) > 1e-3 * (hi - lo);
    }
    d.rel_l2 = sqrt(num / den);
    return d;
}

static void check_cuda_vs_ref(int nx, int ny, int nz, int S, int P, int mix, int rician)
{
    gpu_volume in, ref, out;
    ck_assert_int_eq(gpu_volume_init(&in, nx, ny, nz, 1), 0);
    ck_assert_int_eq(gpu_volume_init(&ref, nx, ny, nz, 1), 0);
    ck_assert_int_eq(gpu_volume_init(&out, nx, ny, nz, 1), 0);
    rng_state += (uint64_t)nx * 7919u + (uint64_t)S * 104729u; /* fresh input per case */
    fill(&in, rician ? 60.0 : -300.0, 15.0, rician);
    gpu_anlm_params p;
    gpu_anlm_params_default(&p);
    p.search_radius = S, p.patch_radius = P, p.mix = mix;
    p.noise = rician ? GPU_ANLM_RICIAN : GPU_ANLM_GAUSSIAN;
    gpu_device cpu, gpu;
    gpu_device_parse("cpu", &cpu);
    ck_assert_int_eq(gpu_device_parse("gpu:0", &gpu), 0);
    ck_assert_int_eq(gpu_anlm_ref(&p, &in, &ref, &cpu), 0);
    poison(&out);
    gpu_anlm_stats st = {0};
    p.stats = &st;
    ck_assert_int_eq(gpu_anlm_cuda(&p, &in, &out, &gpu), 0);
    diff d = compare(&out, &ref);
    printf("cuda anlm %dx%dx%d S=%d P=%d%s %s: slabs %d, rel L2 %.3g, max abs %.3g, %zu far\n", nx,
           ny, nz, S, P, mix ? "+2 mixed" : "", rician ? "rician" : "gaussian", st.slabs, d.rel_l2,
           d.max_abs, d.far);
    fflush(stdout);
    /* Tolerance: rel L2 <= 1e-5 overall, and at most 0.1% of the voxels
     * further than 1e-3 of the value range from the reference. The GPU sums
     * patch distances and weights in float, the reference in double (both
     * see bit-equal local means and variances, so the preselection agrees);
     * a weight whose distance lies within rounding of the 3 h^2 cut can be
     * kept on one side and dropped on the other, which moves that voxel by
     * up to a few percent of its weight share: rare, hence the count. */
    ck_assert_int_eq(d.nans, 0);
    ck_assert_msg(d.rel_l2 <= 1e-5, "rel L2 %.3g", d.rel_l2);
    ck_assert_msg(d.far * 1000 <= gpu_volume_count(&in), "%zu voxels far off", d.far);
    gpu_volume_close(&in);
    gpu_volume_close(&ref);
    gpu_volume_close(&out);
}

/* The sweep kernels of gpu/anlm.cu (LDCT_ANLM_CFG 1 = column of 8 voxels,
 * 2 = column of 4, 0 = tile). */
static const char *const CFGS[] = {"1", "2", "0"};
enum { NCFGS = sizeof CFGS / sizeof CFGS[0] };

START_TEST(cuda_matches_ref_on_random_odd_sizes)
{
    if (!have_gpu())
        return;
    for (int c = 0; c < NCFGS; c++) {
        setenv("LDCT_ANLM_CFG", CFGS[c], 1);
        printf("sweep kernel configuration %s\n", CFGS[c]);
        check_cuda_vs_ref(45, 37, 29, 3, 1, 1, 0); /* the default: radii 1 and 2 mixed */
        check_cuda_vs_ref(39, 33, 27, 2, 1, 0, 0);
        check_cuda_vs_ref(37, 41, 23, 1, 0, 0, 0);
        check_cuda_vs_ref(33, 29, 21, 3, 3, 0, 0);
        check_cuda_vs_ref(41, 35, 25, 3, 1, 1, 1); /* Rician */
        check_cuda_vs_ref(11, 9, 7, 5, 2, 0, 0);   /* search window larger than the volume */
        check_cuda_vs_ref(64, 1, 3, 2, 1, 1, 0);   /* degenerate axes */
        check_cuda_vs_ref(40, 33, 2, 5, 1, 1, 0);  /* 2 slices, S = 5: radius 1 along z */
        check_cuda_vs_ref(3, 35, 3, 5, 2, 0, 0);   /* 3 wide and 3 deep: radius 3 there */
        check_cuda_vs_ref(29, 23, 19, 5, 3, 0, 1); /* largest radii, Rician */
    }
    unsetenv("LDCT_ANLM_CFG");
}
END_TEST

static double range_of(const gpu_volume *v)
{
    float lo = v->data[0], hi = v->data[0];
    for (size_t i = 1; i < gpu_volume_count(v); i++) {
        lo = v->data[i] < lo ? v->data[i] : lo;
        hi = v->data[i] > hi ? v->data[i] : hi;
    }
    return (double)hi - lo;
}

static void check_slabs_agree(int rician)
{
    int nx = 83, ny = 61, nz = 47;
    gpu_volume in, a, b;
    ck_assert_int_eq(gpu_volume_init(&in, nx, ny, nz, 1), 0);
    ck_assert_int_eq(gpu_volume_init(&a, nx, ny, nz, 1), 0);
    ck_assert_int_eq(gpu_volume_init(&b, nx, ny, nz, 1), 0);
    fill(&in, rician ? 80.0 : 20.0, 12.0, rician);
    gpu_anlm_params p;
    gpu_anlm_params_default(&p);
    p.noise = rician ? GPU_ANLM_RICIAN : GPU_ANLM_GAUSSIAN;
    gpu_anlm_stats sa = {0}, sb = {0};
    gpu_device gpu;
    ck_assert_int_eq(gpu_device_parse("gpu:0", &gpu), 0);
    poison(&a);
    poison(&b);
    p.stats = &sa;
    ck_assert_int_eq(gpu_anlm_cuda(&p, &in, &a, &gpu), 0);
    gpu.mem_budget = 3500000; /* a few planes at a time */
    p.stats = &sb;
    ck_assert_int_eq(gpu_anlm_cuda(&p, &in, &b, &gpu), 0);
    printf("slabs anlm %s: %d slab(s) vs %d slabs\n", rician ? "rician" : "gaussian", sa.slabs,
           sb.slabs);
    ck_assert_int_eq(sa.slabs, 1);
    ck_assert_int_gt(sb.slabs, 2);
    diff d = compare(&b, &a);
    ck_assert_int_eq(d.nans, 0);
    /* The same work per voxel, but not always the same float rounding on
     * the GPU: an H200 showed 6.1e-5 at most (values 20-80). Bound: 1e-5 of
     * the value range per voxel, rel L2 1e-6. */
    ck_assert_msg(d.max_abs <= 1e-5 * range_of(&in), "max abs diff %.3g (range %.3g)", d.max_abs,
                  range_of(&in));
    ck_assert_msg(d.rel_l2 <= 1e-6, "rel L2 %.3g", d.rel_l2);
    gpu_volume_close(&in);
    gpu_volume_close(&a);
    gpu_volume_close(&b);
}

START_TEST(cuda_tiny_budget_slabs_agree_to_float_rounding)
{
    if (!have_gpu())
        return;
    for (int c = 0; c < NCFGS; c++) {
        setenv("LDCT_ANLM_CFG", CFGS[c], 1);
        check_slabs_agree(0);
        check_slabs_agree(1);
    }
    unsetenv("LDCT_ANLM_CFG");
}
END_TEST

START_TEST(cuda_budget_below_two_planes_is_refused)
{
    if (!have_gpu())
        return;
    gpu_volume in, out;
    ck_assert_int_eq(gpu_volume_init(&in, 64, 64, 8, 1), 0);
    ck_assert_int_eq(gpu_volume_init(&out, 64, 64, 8, 1), 0);
    fill(&in, 0.0, 10.0, 0);
    gpu_anlm_params p;
    gpu_anlm_params_default(&p);
    gpu_device gpu;
    ck_assert_int_eq(gpu_device_parse("gpu:0", &gpu), 0);
    gpu.mem_budget = 1000;
    ck_assert_int_eq(gpu_anlm_cuda(&p, &in, &out, &gpu), LDCT_ENOMEM_GPU);
    gpu_volume_close(&in);
    gpu_volume_close(&out);
}
END_TEST

/* The dispatcher on "cpu" is the reference; on a GPU it is the CUDA path. */
START_TEST(dispatcher_runs_the_reference_on_cpu)
{
    gpu_volume in, a, b;
    ck_assert_int_eq(gpu_volume_init(&in, 23, 19, 17, 1), 0);
    ck_assert_int_eq(gpu_volume_init(&a, 23, 19, 17, 1), 0);
    ck_assert_int_eq(gpu_volume_init(&b, 23, 19, 17, 1), 0);
    fill(&in, -100.0, 10.0, 0);
    gpu_anlm_params p;
    gpu_anlm_params_default(&p);
    gpu_device cpu;
    gpu_device_parse("cpu", &cpu);
    ck_assert_int_eq(gpu_anlm(&p, &in, &a, &cpu), 0);
    ck_assert_int_eq(gpu_anlm_ref(&p, &in, &b, &cpu), 0);
    ck_assert(memcmp(a.data, b.data, gpu_volume_count(&in) * sizeof(float)) == 0);
    gpu_volume_close(&in);
    gpu_volume_close(&a);
    gpu_volume_close(&b);
}
END_TEST

static Suite *anlm_suite(void)
{
    Suite *s = suite_create("gpu_anlm");
    TCase *tc = tcase_create("cpu");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, dispatcher_runs_the_reference_on_cpu);
    suite_add_tcase(s, tc);
    TCase *tg = tcase_create("cuda");
    tcase_set_timeout(tg, 300);
    tcase_add_test(tg, cuda_matches_ref_on_random_odd_sizes);
    tcase_add_test(tg, cuda_tiny_budget_slabs_agree_to_float_rounding);
    tcase_add_test(tg, cuda_budget_below_two_planes_is_refused);
    suite_add_tcase(s, tg);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(anlm_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
