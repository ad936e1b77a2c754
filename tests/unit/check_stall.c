/* Unit tests for daemon/stall: silence measured on the monotonic clock
 * from the last change of a job's progress, a cleared row counting as a
 * change, and ended jobs forgotten. */
#include "daemon/stall.h"
#include "tests/unit/testutil.h"

/* A running job's row with progress written at updated_ms (0: none). */
static db_job_row row(int64_t id, int64_t updated_ms, double fraction)
{
    db_job_row j = {0};
    j.id = id;
    j.algorithm = "nlm3d";
    j.ran_algorithm = "";
    j.worker = "worker-0/gpu:0";
    j.progress_stage = updated_ms ? "filtering" : "";
    j.progress_fraction = updated_ms ? fraction : -1;
    j.progress_updated_ms = updated_ms;
    j.started_ms = 1000; /* long ago on the wall clock: must not count */
    return j;
}

/* One round at mono ms with the rows given. */
static const stall_job *round_of(stall_tracker *t, int64_t mono, const db_job_row *rows, int n,
                                 int64_t *silent)
{
    stall_round_begin(t);
    for (int i = 0; i < n; i++)
        stall_observe(t, &rows[i], mono);
    stall_round_end(t);
    return stall_stalest(t, mono, silent);
}

START_TEST(silence_counts_from_the_last_change_seen)
{
    stall_tracker t = {0};
    int64_t silent = -1;
    db_job_row r = row(7, 5000000, 0.25);
    ck_assert_ptr_nonnull(round_of(&t, 100, &r, 1, &silent));
    ck_assert_int_eq(silent, 0); /* first seen now, not at started_ms */
    const stall_job *j = round_of(&t, 4100, &r, 1, &silent);
    ck_assert_int_eq(j->id, 7);
    ck_assert_int_eq(silent, 4000);
    ck_assert_str_eq(j->stage, "filtering");
    r.progress_fraction = 0.5; /* a report: silence starts again */
    round_of(&t, 5000, &r, 1, &silent);
    ck_assert_int_eq(silent, 0);
    round_of(&t, 6500, &r, 1, &silent);
    ck_assert_int_eq(silent, 1500);
}
END_TEST

/* The worker clears the row before it marks the job done: that is a
 * change, not silence since the job started. */
START_TEST(a_cleared_row_is_a_change)
{
    stall_tracker t = {0};
    int64_t silent;
    db_job_row r = row(3, 5000000, 0.9);
    round_of(&t, 0, &r, 1, &silent);
    round_of(&t, 1000, &r, 1, &silent);
    db_job_row cleared = row(3, 0, 0);
    round_of(&t, 2000, &cleared, 1, &silent);
    ck_assert_int_eq(silent, 0);
}
END_TEST

START_TEST(the_stalest_of_several_and_ended_jobs_forgotten)
{
    stall_tracker t = {0};
    int64_t silent;
    db_job_row rows[2] = {row(1, 100, 0.1), row(2, 200, 0.1)};
    round_of(&t, 0, rows, 2, &silent);
    rows[1].progress_fraction = 0.2;
    const stall_job *j = round_of(&t, 3000, rows, 2, &silent);
    ck_assert_int_eq(j->id, 1);
    ck_assert_int_eq(silent, 3000);
    j = round_of(&t, 4000, &rows[1], 1, &silent); /* job 1 ended */
    ck_assert_int_eq(j->id, 2);
    ck_assert_int_eq(silent, 1000);
    ck_assert_int_eq(t.n, 1);
    ck_assert_ptr_null(round_of(&t, 5000, NULL, 0, &silent));
}
END_TEST

START_TEST(the_text_names_job_worker_and_stage)
{
    stall_tracker t = {0};
    int64_t silent;
    db_job_row r = row(12, 100, 0.45);
    round_of(&t, 0, &r, 1, &silent);
    const stall_job *j = round_of(&t, 31 * 60000 + 5000, &r, 1, &silent);
    char text[200];
    stall_text(j, silent, text, sizeof text);
    ck_assert_str_eq(text, "job 12 (nlm3d on worker-0/gpu:0, filtering 45%) has reported no"
                           " progress for 31 min 5 s");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("stall");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, silence_counts_from_the_last_change_seen);
    tcase_add_test(tc, a_cleared_row_is_a_change);
    tcase_add_test(tc, the_stalest_of_several_and_ended_jobs_forgotten);
    tcase_add_test(tc, the_text_names_job_worker_and_stage);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
