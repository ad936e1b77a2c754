/* Unit tests for pipeline/worker's handling of a GPU that does not work:
 * its worker marks it down, leaves the jobs to a worker whose device
 * works, runs them on the CPU itself when there is no such worker, and
 * the pool counts it (ldct_gpus_down). GPU 99 exists on no machine, so
 * these run anywhere; the check of a broken CUDA context is tested on a
 * GPU in check_gpu_device, and on a GPU (skipped without one) a context
 * that breaks between jobs is found down by the check after the next job.
 * Each test starts a real pool on a real
 * database with a real (tiny) series, processed by the CPU reference. */
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "db/queue.h"
#include "gpu/device.h"
#include "pipeline/worker.h"
#include "scp/scp.h"
#include "tests/unit/testutil.h"

#include <check.h>
#include <sqlite3.h>
#include <stdint.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#if LDCT_WITH_CUDA
int gpu_test_break_context(int index); /* tests/unit/gpu_fault.cu */
#endif

#define STUDY "1.2.826.0.1.3680043.9.7.12"
#define UID_ROOT "1.2.826.0.1.3680043.9.7.99"
#define SLICES 3

static char dir[64], db_path[96], outbox[96], results[96];
static int down_wait_s; /* the settings' gpu_down_wait_seconds */

static void setup(void)
{
    log_level = LOG_LVL_ERR - 1;
    down_wait_s = 300;
    tu_tmpdir(dir, sizeof dir);
    snprintf(db_path, sizeof db_path, "%s/ldct.db", dir);
    snprintf(outbox, sizeof outbox, "%s/outbox", dir);
    snprintf(results, sizeof results, "%s/results", dir);
    ck_assert_int_eq(mkdir(outbox, 0700), 0);
    ck_assert_int_eq(mkdir(results, 0700), 0);
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}

#define SIDE_MAX 160

/* Slice k of series `series` (side x side, 1 mm) written to dir and
 * recorded as received in d. */
static void put_slice(db *d, const char *series, int side, int k)
{
    static int16_t px[SIDE_MAX * SIDE_MAX];
    for (int i = 0; i < side * side; i++)
        px[i] = (int16_t)(1000 + (i * 37 + k * 11) % 50);
    char sop[96], path[160], old[8];
    snprintf(sop, sizeof sop, "%s.%d", series, k + 1);
    snprintf(path, sizeof path, "%s/%s.dcm", dir, sop);
    scp_ct_params p = {.patient_name = "TEST^WORKER",
                       .patient_id = "P12",
                       .study_uid = STUDY,
                       .series_uid = series,
                       .sop_uid = sop,
                       .frame_of_reference_uid = STUDY ".2",
                       .series_description = "CHEST",
                       .series_number = 3,
                       .instance_number = k + 1,
                       .rows = side,
                       .cols = side,
                       .pixel_spacing = {0.7, 0.7},
                       .slice_thickness = 1,
                       .position = {0, 0, k},
                       .orientation = {1, 0, 0, 0, 1, 0},
                       .rescale_slope = 1,
                       .rescale_intercept = -1024,
                       .kvp = 120,
                       .pixels = px};
    ck_assert_int_eq(scp_ct_write(&p, path), 0);
    db_instance_rec r = {.study_uid = STUDY,
                         .series_uid = series,
                         .sop_instance_uid = sop,
                         .sop_class_uid = "1.2.840.10008.5.1.4.1.1.2",
                         .transfer_syntax_uid = "1.2.840.10008.1.2.1",
                         .modality = "CT",
                         .path = path,
                         .size = 1000,
                         .received_ms = 1000,
                         .stable_seconds = 1};
    ck_assert_int_eq(db_instance_put(d, &r, old, sizeof old), 0);
}

/* Stable series number s (side x side x slices) with a pending nlm3d job
 * whose result goes to the results folder. */
static void queue_job(db *d, int s, int side, int slices, const char *params)
{
    {
        char series[64], derived[64];
        snprintf(series, sizeof series, STUDY ".1.%d", s + 1);
        snprintf(derived, sizeof derived, UID_ROOT ".1.%d", s + 1);
        for (int k = 0; k < slices; k++)
            put_slice(d, series, side, k);
        ck_assert_int_ge(db_series_mark_stable(d, 10000, NULL, NULL), 1);
        db_series_info si;
        ck_assert_int_eq(db_series_get(d, series, &si), 0);
        db_job_spec spec = {.series_id = si.id,
                            .rule = "r",
                            .action = "process",
                            .algorithm = "nlm3d",
                            .params = params,
                            .description_suffix = " [DN]",
                            .derived_series_uid = derived,
                            .destinations = "",
                            .process = 1};
        int64_t id = 0;
        ck_assert_int_eq(db_job_create(d, &spec, 2000, &id), 0);
    }
}

/* n small series (16 x 16 x SLICES), each with a pending job. */
static void queue_jobs(int n)
{
    db *d = NULL;
    ck_assert_int_eq(db_open(db_path, 0, &d), 0);
    for (int s = 0; s < n; s++)
        queue_job(d, s, 16, SLICES, "");
    db_close(d);
}

static void settings(void *ctx, worker_settings *out)
{
    (void)ctx;
    memset(out, 0, sizeof *out);
    snprintf(out->uid_root, sizeof out->uid_root, "%s", UID_ROOT);
    snprintf(out->results_dir, sizeof out->results_dir, "%s", results);
    out->job_max_attempts = 3;
    out->gpu_down_wait_seconds = down_wait_s;
}

typedef struct tally {
    int done, failed, other; /* other: not done (failed ones included) */
    char workers[8][32];     /* of the jobs done, newest first */
    char worker_of[9][32];   /* by job id (1-8) */
} tally;

static void count_job(void *ctx, const db_job_row *j)
{
    tally *t = ctx;
    if (j->id >= 1 && j->id <= 8)
        snprintf(t->worker_of[j->id], sizeof t->worker_of[0], "%s", j->worker);
    if (strcmp(j->state, "done") == 0 && t->done < 8)
        snprintf(t->workers[t->done++], sizeof t->workers[0], "%s", j->worker);
    else if (strcmp(j->state, "done") != 0)
        t->other++;
    t->failed += strcmp(j->state, "failed") == 0;
}

/* Waits until n jobs are done or failed (at most 60 s); their tally in t. */
static void wait_jobs(db *d, int n, tally *t)
{
    for (int64_t end = ldct_mono_ms() + 60000; ldct_mono_ms() < end;) {
        memset(t, 0, sizeof *t);
        ck_assert_int_eq(db_jobs_list(d, 0, count_job, NULL, t), 0);
        if (t->done + t->failed == n)
            break;
        nanosleep(&(struct timespec){0, 20000000}, NULL);
    }
}

static worker_pool *start_pool(const gpu_device *devs, int ndev)
{
    worker_pool_opts o = {
        .db_path = db_path, .outbox_dir = outbox, .ndev = ndev, .settings = settings};
    for (int i = 0; i < ndev; i++)
        o.dev[i] = devs[i];
    worker_pool *p = NULL;
    ck_assert_int_eq(worker_pool_start(&o, &p), 0);
    return p;
}

/* Asserts that the pool counts `want` GPUs down, waiting up to 10 s for
 * the checks: a GPU's first check runs when its worker starts, and other
 * workers may finish tiny jobs before that (CUDA's start takes a second or
 * two on a GPU machine), or after a job, once the job is recorded. */
static void assert_down(worker_pool *p, int want)
{
    for (int64_t end = ldct_mono_ms() + 10000; ldct_mono_ms() < end;)
        if (worker_pool_gpus_down(p) == want)
            break;
        else
            nanosleep(&(struct timespec){0, 20000000}, NULL);
    ck_assert_int_eq(worker_pool_gpus_down(p), want);
}

/* Runs a pool on devs until every one of n jobs is done or failed; the
 * tally in t, and the pool must count want_down GPUs down. */
static void run_pool(const gpu_device *devs, int ndev, int n, int want_down, tally *t)
{
    worker_pool *p = start_pool(devs, ndev);
    db *d = NULL;
    ck_assert_int_eq(db_open(db_path, 0, &d), 0);
    wait_jobs(d, n, t);
    assert_down(p, want_down);
    db_close(d);
    ck_assert_int_eq(worker_pool_stop(p, 10), 0);
}

static const gpu_device absent_gpu = {.kind = GPU_DEVICE_CUDA, .index = 99};
static const gpu_device cpu = {.kind = GPU_DEVICE_CPU};

START_TEST(a_down_gpu_leaves_its_jobs_to_a_working_device)
{
    queue_jobs(3);
    const gpu_device devs[2] = {absent_gpu, cpu};
    tally t;
    run_pool(devs, 2, 3, 1, &t);
    ck_assert_int_eq(t.done, 3);
    for (int i = 0; i < t.done; i++)
        ck_assert_str_eq(t.workers[i], "worker-1/cpu");
}
END_TEST

START_TEST(a_down_gpu_alone_runs_its_jobs_on_the_cpu)
{
    queue_jobs(2);
    tally t;
    run_pool(&absent_gpu, 1, 2, 1, &t);
    ck_assert_int_eq(t.done, 2);
    for (int i = 0; i < t.done; i++)
        ck_assert_str_eq(t.workers[i], "worker-0/gpu:99");
    char cmd[200], out[64];
    snprintf(cmd, sizeof cmd, "ls %s/%s.1.1 %s/%s.1.2 | grep -c dcm", results, UID_ROOT, results,
             UID_ROOT);
    tu_command_output(cmd, out, sizeof out);
    ck_assert_int_eq(atoi(out), 2 * SLICES);
}
END_TEST

/* A long job (160 x 160 x 64, search radius 11, the filter on one thread
 * so that its length does not depend on the machine's cores: about 6 s),
 * then a small one: job 1 and job 2. */
static void queue_long_then_short(void)
{
    db *d = NULL;
    ck_assert_int_eq(db_open(db_path, 0, &d), 0);
    queue_job(d, 0, SIDE_MAX, 64, "search_radius=11");
    queue_job(d, 1, 16, SLICES, "");
    db_close(d);
}

/* The working worker has been on job 1 for longer than the wait (1 s):
 * the down GPU's worker runs job 2 on the CPU meanwhile. */
START_TEST(a_down_gpu_runs_jobs_while_the_working_device_is_on_a_long_one)
{
    down_wait_s = 1;
    queue_long_then_short();
    const gpu_device devs[2] = {absent_gpu, cpu};
    tally t;
    run_pool(devs, 2, 2, 1, &t);
    ck_assert_int_eq(t.done, 2);
    ck_assert_str_eq(t.worker_of[1], "worker-1/cpu");
    ck_assert_str_eq(t.worker_of[2], "worker-0/gpu:99");
}
END_TEST

/* The same jobs with the default wait (300 s): job 2 waits for the
 * working worker. */
START_TEST(a_down_gpu_leaves_jobs_to_a_working_device_busy_for_less_than_the_wait)
{
    queue_long_then_short();
    const gpu_device devs[2] = {absent_gpu, cpu};
    tally t;
    run_pool(devs, 2, 2, 1, &t);
    ck_assert_int_eq(t.done, 2);
    ck_assert_str_eq(t.worker_of[1], "worker-1/cpu");
    ck_assert_str_eq(t.worker_of[2], "worker-1/cpu");
}
END_TEST

#if LDCT_WITH_CUDA /* the helpers of the GPU-fault test below */
/* Points stderr (the log) at a fresh file; returns the old descriptor. */
static int capture_stderr(const char *path)
{
    fflush(stderr);
    int saved = dup(2), fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(saved, 0);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(dup2(fd, 2), 2);
    close(fd);
    return saved;
}

static void restore_stderr(int saved)
{
    fflush(stderr);
    ck_assert_int_eq(dup2(saved, 2), 2);
    close(saved);
}

/* 1 when the file holds `text`. */
static int file_has(const char *path, const char *text)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "grep -qF '%s' '%s'", text, path);
    return system(cmd) == 0;
}
#endif

/* On a GPU (SKIP without one): job 1 runs on it; then its CUDA context
 * breaks (a kernel writes to an invalid address, as a faulty kernel or a
 * hardware fault does). Job 2's GPU call fails, the CPU does the job, and
 * the check after it finds the GPU down; job 3 runs on the CPU in the same
 * worker, which has no other to leave it to. */
START_TEST(a_gpu_that_breaks_between_jobs_is_found_down_after_the_next)
{
    if (gpu_device_count() <= 0) {
        puts("SKIP: no GPU (a_gpu_that_breaks_between_jobs_is_found_down_after_the_next)");
        return;
    }
#if LDCT_WITH_CUDA
    const gpu_device gpu0 = {.kind = GPU_DEVICE_CUDA, .index = 0};
    log_level = LOG_LVL_ERR; /* CUDA's failures are logged as errors */
    worker_pool *p = start_pool(&gpu0, 1);
    db *d = NULL;
    ck_assert_int_eq(db_open(db_path, 0, &d), 0);
    tally t;
    char errs[128];
    snprintf(errs, sizeof errs, "%s/errors.txt", dir);
    for (int k = 0; k < 3; k++) {
        if (k == 1)
            ck_assert_int_eq(gpu_test_break_context(0), 700); /* cudaErrorIllegalAddress */
        int saved = capture_stderr(errs);
        queue_job(d, k, 16, SLICES, "");
        worker_pool_notify(p);
        wait_jobs(d, k + 1, &t);
        ck_assert_int_eq(t.done, k + 1);
        ck_assert_str_eq(t.worker_of[k + 1], "worker-0/gpu:0");
        assert_down(p, k > 0);
        restore_stderr(saved);
        /* job 2 tried the GPU and met the broken context; job 3, on a down
         * GPU, went to the CPU without trying it */
        ck_assert_msg(file_has(errs, "illegal memory access") == (k == 1),
                      "job %d: CUDA's error %slogged", k + 1, k == 1 ? "not " : "");
    }
    db_close(d);
    ck_assert_int_eq(worker_pool_stop(p, 10), 0);
#endif
}
END_TEST

START_TEST(when_every_gpu_is_down_the_jobs_still_run)
{
    queue_jobs(3);
    const gpu_device devs[2] = {absent_gpu, {.kind = GPU_DEVICE_CUDA, .index = 98}};
    tally t;
    run_pool(devs, 2, 3, 2, &t);
    ck_assert_int_eq(t.done, 3);
    ck_assert_int_eq(t.other, 0);
}
END_TEST

START_TEST(working_devices_are_not_counted_down)
{
    queue_jobs(1);
    const gpu_device devs[2] = {cpu, cpu};
    tally t;
    run_pool(devs, 2, 1, 0, &t);
    ck_assert_int_eq(t.done, 1);
}
END_TEST

/* Records every progress row the workers write (a trigger on the test's
 * database: REPLACE fires the insert trigger). */
static void record_progress_writes(void)
{
    sqlite3 *h = NULL;
    ck_assert_int_eq(sqlite3_open(db_path, &h), SQLITE_OK);
    ck_assert_int_eq(sqlite3_exec(h,
                                  "CREATE TABLE seen(job_id INTEGER, stage TEXT, fraction REAL);"
                                  "CREATE TRIGGER seen_progress AFTER INSERT ON job_progress"
                                  " BEGIN INSERT INTO seen VALUES (new.job_id, new.stage,"
                                  " new.fraction); END;",
                                  0, 0, 0),
                     SQLITE_OK);
    sqlite3_close(h);
}

/* One integer from the test's database. */
static int sql_int(const char *sql)
{
    sqlite3 *h = NULL;
    sqlite3_stmt *s = NULL;
    ck_assert_int_eq(sqlite3_open(db_path, &h), SQLITE_OK);
    ck_assert_int_eq(sqlite3_prepare_v2(h, sql, -1, &s, NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(s), SQLITE_ROW);
    int v = sqlite3_column_int(s, 0);
    sqlite3_finalize(s);
    sqlite3_close(h);
    return v;
}

/* A job that succeeds and one that fails while reading (a file that is no
 * DICOM) both had progress written while they ran (reading and writing
 * counted: a fraction from their start, not "unknown"), and neither leaves
 * a row behind. */
START_TEST(finished_and_failed_jobs_leave_no_progress_behind)
{
    queue_jobs(2);
    char path[160];
    snprintf(path, sizeof path, "%s/%s.1.2.2.dcm", dir, STUDY);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("not a DICOM file\n", f);
    fclose(f);
    record_progress_writes();
    tally t;
    run_pool(&cpu, 1, 2, 0, &t);
    ck_assert_int_eq(t.done, 1);
    ck_assert_int_eq(t.failed, 1);
    ck_assert_int_eq(sql_int("SELECT count(DISTINCT stage) FROM seen WHERE job_id = 1 AND stage IN"
                             " ('reading', 'filtering', 'writing')"),
                     3);
    ck_assert_int_eq(
        sql_int("SELECT count(DISTINCT stage) FROM seen WHERE job_id = 2 AND stage = 'reading'"),
        1);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM seen WHERE stage IN ('reading', 'writing')"
                             " AND NOT fraction >= 0"),
                     0);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM job_progress"), 0);
}
END_TEST

START_TEST(a_cpu_device_always_checks_good)
{
    char why[64] = "x";
    ck_assert_int_eq(gpu_device_check(&cpu, why, sizeof why), 0);
    ck_assert_str_eq(why, "");
    ck_assert_int_ne(gpu_device_check(&absent_gpu, why, sizeof why), 0);
    ck_assert_str_ne(why, "");
}
END_TEST

int main(int argc, char **argv)
{
    /* The long-job cases need a filter whose length does not depend on the
     * machine's cores: one OpenMP thread in every worker. libgomp reads the
     * variable when it loads, hence the new image. */
    const char *threads = getenv("OMP_NUM_THREADS");
    if (argc > 0 && (!threads || strcmp(threads, "1") != 0)) {
        setenv("OMP_NUM_THREADS", "1", 1);
        execv("/proc/self/exe", argv);
        perror("check_worker: execv (the long-job cases run on every core)");
    }
    Suite *s = suite_create("worker");
    TCase *tc = tcase_create("gpu_down");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, a_down_gpu_leaves_its_jobs_to_a_working_device);
    tcase_add_test(tc, a_down_gpu_alone_runs_its_jobs_on_the_cpu);
    tcase_add_test(tc, when_every_gpu_is_down_the_jobs_still_run);
    tcase_add_test(tc, a_down_gpu_runs_jobs_while_the_working_device_is_on_a_long_one);
    tcase_add_test(tc, a_gpu_that_breaks_between_jobs_is_found_down_after_the_next);
    tcase_add_test(tc, a_down_gpu_leaves_jobs_to_a_working_device_busy_for_less_than_the_wait);
    tcase_add_test(tc, working_devices_are_not_counted_down);
    tcase_add_test(tc, a_cpu_device_always_checks_good);
    tcase_add_test(tc, finished_and_failed_jobs_leave_no_progress_behind);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
