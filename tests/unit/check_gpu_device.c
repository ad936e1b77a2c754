/* Unit tests of a GPU after a failed call, on a GPU (they print "SKIP: no
 * GPU" and pass without one): a refused call leaves no error behind for the
 * next one (nlm3d on the GPU still matches the CPU reference: fresh random
 * input of odd size, output poisoned before each run) and gpu_device_check
 * finds the GPU working; a broken CUDA context (a kernel that wrote to an
 * invalid address) fails every later call, and gpu_device_check says so
 * with CUDA's reason. The worker's side (a GPU that is down) is in
 * check_worker. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "gpu/device.h"
#include "gpu/nlm.h"
#include "gpu/volume.h"
#if LDCT_WITH_CUDA
#include "gpu/cuda_util.h"
int gpu_test_break_context(int index); /* tests/unit/gpu_fault.cu */
#endif
#define GT_SEED 0xD1B54A32D192ED03ull
#include "tests/unit/gputest.h"

static const gpu_device gpu0 = {.kind = GPU_DEVICE_CUDA, .index = 0};
static const gpu_device cpu = {.kind = GPU_DEVICE_CPU};

/* nlm3d S 2, P 1, h 14 on a fresh 37x29x11 random volume: returns the
 * GPU call's code and, when it succeeded, asserts it matches the CPU
 * (relative L2 <= 1e-4, no NaN). */
static int nlm3d_on_gpu_matches_cpu(void)
{
    gpu_volume in, ref, out;
    ck_assert_int_eq(gpu_volume_init(&in, 37, 29, 11, 1), 0);
    ck_assert_int_eq(gpu_volume_init(&ref, 37, 29, 11, 1), 0);
    ck_assert_int_eq(gpu_volume_init(&out, 37, 29, 11, 1), 0);
    for (size_t i = 0; i < gpu_volume_count(&in); i++)
        in.data[i] = (float)(100 + 20 * grand());
    gpu_nlm_params p;
    gpu_nlm_params_default(&p);
    p.search_radius = 2;
    p.patch_radius = 1;
    p.h_auto = 0;
    p.h = 14.0f;
    ck_assert_int_eq(gpu_nlm3d(&p, &in, &ref, &cpu), 0);
    poison(&out);
    int rc = gpu_nlm3d(&p, &in, &out, &gpu0);
    if (rc == 0) {
        double num = 0, den = 0;
        int nans = 0;
        for (size_t i = 0; i < gpu_volume_count(&in); i++) {
            nans += isnan(out.data[i]);
            double d = (double)out.data[i] - ref.data[i];
            num += d * d;
            den += (double)ref.data[i] * ref.data[i];
        }
        ck_assert_int_eq(nans, 0);
        ck_assert_double_le(sqrt(num / den), 1e-4);
    }
    gpu_volume_close(&in);
    gpu_volume_close(&ref);
    gpu_volume_close(&out);
    return rc;
}

/* gpu_device_check on gpu0: its code, and why when it fails. */
static int check_gpu0(char *why, size_t len)
{
    snprintf(why, len, "not cleared");
    int rc = gpu_device_check(&gpu0, why, len);
    if (rc == 0)
        ck_assert_str_eq(why, "");
    return rc;
}

START_TEST(a_working_gpu_checks_good)
{
    if (!have_gpu())
        return;
    char why[128];
    ck_assert_int_eq(check_gpu0(why, sizeof why), 0);
    ck_assert_int_eq(nlm3d_on_gpu_matches_cpu(), 0);
    ck_assert_int_eq(check_gpu0(why, sizeof why), 0);
}
END_TEST

START_TEST(a_refused_call_does_not_fail_the_next_one)
{
    if (!have_gpu())
        return;
#if LDCT_WITH_CUDA
    /* cudaHostRegister of a null range: refused, the context stays good. */
    ck_assert_int_eq(nlm3d_on_gpu_matches_cpu(), 0);
    ck_assert_int_eq(gpu__cuda_host_register(NULL, 16), LDCT_ECUDA);
    ck_assert_int_eq(nlm3d_on_gpu_matches_cpu(), 0);
    char why[128];
    ck_assert_int_eq(check_gpu0(why, sizeof why), 0);
#endif
}
END_TEST

START_TEST(a_broken_context_fails_its_check)
{
    if (!have_gpu())
        return;
#if LDCT_WITH_CUDA
    ck_assert_int_eq(nlm3d_on_gpu_matches_cpu(), 0);
    ck_assert_int_eq(gpu_test_break_context(0), 700); /* cudaErrorIllegalAddress */
    ck_assert_int_ne(nlm3d_on_gpu_matches_cpu(), 0);  /* sticky: every call fails */
    char why[256];
    ck_assert_int_eq(check_gpu0(why, sizeof why), LDCT_ECUDA);
    ck_assert_msg(strstr(why, "illegal memory access") != NULL, "why: %s", why);
    ck_assert_int_eq(check_gpu0(why, sizeof why), LDCT_ECUDA); /* and it stays so */
#endif
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gpu_device");
    TCase *tc = tcase_create("recover");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, a_working_gpu_checks_good);
    tcase_add_test(tc, a_refused_call_does_not_fail_the_next_one);
    tcase_add_test(tc, a_broken_context_fails_its_check);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
