/* Unit tests for gpu/progress: the CPU references (nlm2d, nlm3d, anlm,
 * adaptive4d, whole and in time slabs) report their progress on the
 * calling thread, in fractions that never go down and end at 1, often
 * enough to show on a long job (adaptive4d's noise caps in proportion to
 * their time points), and without changing their result. */
#include "gpu/adaptive4d.h"
#include "gpu/anlm.h"
#include "gpu/nlm.h"
#include "gpu/progress.h"
#include "tests/unit/testutil.h"

#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MAX_REPORTS 100000

typedef struct reports {
    pthread_t caller;
    int n, other_thread, went_down, out_of_range;
    double last, max_step; /* the largest rise between two reports (from 0) */
    double want;           /* a fraction that must be reported (< 0: none) */
    int saw_want;
} reports;

static void record(void *ctx, double f)
{
    reports *r = ctx;
    if (!pthread_equal(pthread_self(), r->caller))
        r->other_thread++;
    if (r->n > 0 && f < r->last)
        r->went_down++;
    if (f - r->last > r->max_step)
        r->max_step = f - r->last;
    if (!(f >= 0.0 && f <= 1.0))
        r->out_of_range++;
    if (fabs(f - r->want) < 1e-9)
        r->saw_want++;
    r->last = f;
    r->n++;
}

static gpu_progress watch(reports *r)
{
    memset(r, 0, sizeof *r);
    r->caller = pthread_self();
    r->want = -1.0;
    return (gpu_progress){record, r};
}

/* Reports seen: on the caller, monotone, in [0, 1], the last 1, at least
 * min_reports of them, and none rising by more than max_step (a long job
 * that goes quiet for most of its run looks stuck). The step bound holds
 * for one thread: with two, the caller reports only its own units, and
 * the other may do many while the caller waits for a core (a loaded
 * machine: it failed at 0.257 during a parallel build), so two-thread runs
 * check the rest with max_step 1 and min_reports 1 (TWO_THREADS). */
static void check_reports(const reports *r, int min_reports, double max_step, const char *what)
{
    ck_assert_msg(r->max_step <= max_step, "%s: a step of %.3f (at most %.3f)", what, r->max_step,
                  max_step);
    ck_assert_msg(r->other_thread == 0, "%s: %d reports on another thread", what, r->other_thread);
    ck_assert_msg(r->went_down == 0, "%s: went down %d times", what, r->went_down);
    ck_assert_msg(r->out_of_range == 0, "%s: %d outside [0, 1]", what, r->out_of_range);
    ck_assert_msg(r->n >= min_reports, "%s: %d reports, expected at least %d", what, r->n,
                  min_reports);
    ck_assert_msg(r->last == 1.0, "%s: last report %g", what, r->last);
}

static void random_volume(gpu_volume *v, int nx, int ny, int nz, int nt, unsigned seed)
{
    ck_assert_int_eq(gpu_volume_init(v, nx, ny, nz, nt), 0);
    srand(seed);
    for (size_t i = 0; i < gpu_volume_count(v); i++)
        v->data[i] = (float)(rand() % 1000) / 10.0f + (float)(i % 97);
}

static void assert_same(const gpu_volume *a, const gpu_volume *b)
{
    ck_assert(memcmp(a->data, b->data, gpu_volume_count(a) * sizeof(float)) == 0);
}

static const gpu_device cpu1 = {.kind = GPU_DEVICE_CPU, .threads = 1};
static const gpu_device cpu2 = {.kind = GPU_DEVICE_CPU, .threads = 2};
#define TWO_THREADS 1, 1.0

static void nlm_case(int dim, int nx, int ny, int nz)
{
    gpu_volume in, a, b;
    random_volume(&in, nx, ny, nz, 1, 3);
    ck_assert_int_eq(gpu_volume_init(&a, nx, ny, nz, 1), 0);
    ck_assert_int_eq(gpu_volume_init(&b, nx, ny, nz, 1), 0);
    gpu_nlm_params p;
    gpu_nlm_params_default(&p);
    p.h_auto = 0;
    p.h = 20.0f;
    int (*run)(const gpu_nlm_params *, const gpu_volume *, gpu_volume *, const gpu_device *) =
        dim == 3 ? gpu_nlm3d_ref : gpu_nlm2d_ref;
    ck_assert_int_eq(run(&p, &in, &a, &cpu2), 0);
    reports r;
    gpu_progress g = watch(&r);
    p.progress = &g;
    ck_assert_int_eq(run(&p, &in, &b, &cpu1), 0);
    check_reports(&r, 20, 0.2, dim == 3 ? "nlm3d" : "nlm2d");
    g = watch(&r);
    ck_assert_int_eq(run(&p, &in, &b, &cpu2), 0);
    check_reports(&r, TWO_THREADS, dim == 3 ? "nlm3d, two threads" : "nlm2d, two threads");
    assert_same(&a, &b);
    gpu_volume_close(&in);
    gpu_volume_close(&a);
    gpu_volume_close(&b);
}

START_TEST(nlm3d_reference_reports_on_the_caller_up_to_one)
{
    nlm_case(3, 37, 29, 70); /* two chunks of planes, bands for two threads */
}
END_TEST

START_TEST(nlm2d_reference_reports_on_the_caller_up_to_one)
{
    nlm_case(2, 41, 33, 7);
}
END_TEST

START_TEST(anlm_reference_reports_both_passes)
{
    gpu_volume in, a, b;
    random_volume(&in, 29, 23, 40, 1, 5);
    ck_assert_int_eq(gpu_volume_init(&a, 29, 23, 40, 1), 0);
    ck_assert_int_eq(gpu_volume_init(&b, 29, 23, 40, 1), 0);
    gpu_anlm_params p;
    gpu_anlm_params_default(&p); /* two passes (mix) */
    ck_assert(p.mix);
    ck_assert_int_eq(gpu_anlm_ref(&p, &in, &a, &cpu2), 0);
    reports r;
    gpu_progress g = watch(&r);
    p.progress = &g;
    ck_assert_int_eq(gpu_anlm_ref(&p, &in, &b, &cpu1), 0);
    check_reports(&r, 20, 0.1, "anlm"); /* per plane of offsets, chunk and pass */
    g = watch(&r);
    ck_assert_int_eq(gpu_anlm_ref(&p, &in, &b, &cpu2), 0);
    check_reports(&r, TWO_THREADS, "anlm, two threads");
    assert_same(&a, &b);
    gpu_volume_close(&in);
    gpu_volume_close(&a);
    gpu_volume_close(&b);
}
END_TEST

/* caps_end: where the noise caps' pass must end (its share, the tensor
 * grid's per time point of the surrogate, over the call's whole). */
static void a4d_case(size_t budget, int min_reports, double max_step, int slabs, double caps_end)
{
    gpu_volume in, a, b;
    random_volume(&in, 13, 11, 9, 12, 7);
    ck_assert_int_eq(gpu_volume_init(&a, 13, 11, 9, 12), 0);
    ck_assert_int_eq(gpu_volume_init(&b, 13, 11, 9, 12), 0);
    gpu_adaptive4d_params p;
    gpu_adaptive4d_params_default(&p);
    gpu_a4d_stats st;
    p.stats = &st;
    p.mem_budget = budget;
    ck_assert_int_eq(gpu_adaptive4d_ref(&p, &in, &a, &cpu2), 0);
    ck_assert_msg(slabs ? st.t_slabs > 1 : st.t_slabs == 1, "t_slabs %d", st.t_slabs);
    reports r;
    gpu_progress g = watch(&r);
    r.want = caps_end;
    p.progress = &g;
    ck_assert_int_eq(gpu_adaptive4d_ref(&p, &in, &b, &cpu1), 0);
    check_reports(&r, min_reports, max_step, slabs ? "adaptive4d in slabs" : "adaptive4d");
    ck_assert_msg(r.saw_want >= 1, "no report at the end of the caps' pass (%.6f)", caps_end);
    g = watch(&r);
    r.want = caps_end;
    ck_assert_int_eq(gpu_adaptive4d_ref(&p, &in, &b, &cpu2), 0);
    check_reports(&r, TWO_THREADS, "adaptive4d, two threads");
    ck_assert_msg(r.saw_want >= 1, "two threads: no report at the end of the caps' pass");
    assert_same(&a, &b);
    gpu_volume_close(&in);
    gpu_volume_close(&a);
    gpu_volume_close(&b);
}

START_TEST(adaptive4d_reference_reports_its_steps)
{
    /* Steps: the noise caps' pass, the tensor grid, control and lowpass
     * (0.2 of the region), each kernel of the bank, each row after it. */
    a4d_case(0, 20, 0.2, 0, 0.05 / 1.05); /* nt 12, K 6: 0.1 x 6 / 12 */
}
END_TEST

START_TEST(adaptive4d_reference_reports_every_time_slab)
{
    /* 400 kB: slabs of a few of the 12 time points; the first pass 0.1 */
    a4d_case(400000, 20, 0.2, 1, 0.05 / 1.15);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gpu_progress");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, nlm3d_reference_reports_on_the_caller_up_to_one);
    tcase_add_test(tc, nlm2d_reference_reports_on_the_caller_up_to_one);
    tcase_add_test(tc, anlm_reference_reports_both_passes);
    tcase_add_test(tc, adaptive4d_reference_reports_its_steps);
    tcase_add_test(tc, adaptive4d_reference_reports_every_time_slab);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
