/* Unit tests for pipeline/job_progress: when a running job's progress is
 * published (a new stage at once, else at most every two seconds; the log
 * once a minute), the estimate of the time left, and its text. */
#include "common/clock.h"
#include "pipeline/job_progress.h"
#include "tests/unit/testutil.h"

#include <check.h>
#include <string.h>

START_TEST(a_new_stage_is_published_at_once_fractions_every_two_seconds)
{
    job_progress p;
    job_progress_start(&p, 1000, JOB_PROGRESS_LOG_MS);
    ck_assert_int_eq(job_progress_update(&p, "reading", -1, 1010), JOB_PROGRESS_PUBLISH);
    ck_assert_int_eq(job_progress_update(&p, "filtering", 0.0, 1200), JOB_PROGRESS_PUBLISH);
    ck_assert_int_eq(job_progress_update(&p, "filtering", 0.1, 1700), 0);
    ck_assert_int_eq(job_progress_update(&p, "filtering", 0.2, 1199 + JOB_PROGRESS_PUBLISH_MS), 0);
    ck_assert_int_eq(job_progress_update(&p, "filtering", 0.3, 1200 + JOB_PROGRESS_PUBLISH_MS),
                     JOB_PROGRESS_PUBLISH);
    ck_assert_str_eq(p.stage, "filtering");
    ck_assert(p.fraction == 0.3);
}
END_TEST

START_TEST(a_long_job_is_logged_once_a_minute)
{
    job_progress p;
    job_progress_start(&p, 0, JOB_PROGRESS_LOG_MS);
    int logs = 0;
    for (int64_t t = 500; t <= 200000; t += 500)
        logs +=
            (job_progress_update(&p, "filtering", (double)t / 400000, t) & JOB_PROGRESS_LOG) != 0;
    ck_assert_int_eq(logs, 200000 / JOB_PROGRESS_LOG_MS);
}
END_TEST

START_TEST(the_time_left_follows_the_rate_so_far)
{
    job_progress p;
    job_progress_start(&p, 0, JOB_PROGRESS_LOG_MS);
    job_progress_update(&p, "filtering", 0.0, 1000);
    job_progress_update(&p, "filtering", 0.1, 2000);
    ck_assert_int_eq(job_progress_remaining_ms(&p, 2000), -1); /* too early to tell */
    job_progress_update(&p, "filtering", 0.4, 5000);           /* 0.1 per second */
    ck_assert_int_eq(job_progress_remaining_ms(&p, 5000), 6000);
    ck_assert_int_eq(job_progress_remaining_ms(&p, 7000), 4000); /* no report meanwhile */
    ck_assert_int_eq(job_progress_remaining_ms(&p, 60000), 0);
}
END_TEST

START_TEST(a_stage_run_again_starts_its_estimate_again)
{
    job_progress p;
    job_progress_start(&p, 0, JOB_PROGRESS_LOG_MS);
    job_progress_update(&p, "filtering", 0.0, 0);
    job_progress_update(&p, "filtering", 0.5, 10000);
    ck_assert_int_eq(job_progress_remaining_ms(&p, 10000), 10000);
    /* The GPU failed; the CPU starts the stage from 0. */
    ck_assert(job_progress_update(&p, "filtering", 0.0, 11000) & JOB_PROGRESS_PUBLISH);
    ck_assert(p.fraction == 0.0);
    ck_assert_int_eq(job_progress_remaining_ms(&p, 11000), -1);
    job_progress_update(&p, "filtering", 0.1, 15000);
    ck_assert_int_eq(job_progress_remaining_ms(&p, 15000), 36000);
}
END_TEST

START_TEST(an_uncounted_stage_has_no_estimate)
{
    job_progress p;
    job_progress_start(&p, 0, JOB_PROGRESS_LOG_MS);
    job_progress_update(&p, "filtering", 0.5, 5000);
    job_progress_update(&p, "writing", -1, 9000);
    ck_assert(p.fraction < 0);
    ck_assert_int_eq(job_progress_remaining_ms(&p, 20000), -1);
    char text[128];
    job_progress_text(&p, 75000, text, sizeof text);
    ck_assert_str_eq(text, "writing, 1 min 15 s so far");
}
END_TEST

START_TEST(the_text_names_stage_percent_time_and_estimate)
{
    job_progress p;
    job_progress_start(&p, 0, JOB_PROGRESS_LOG_MS);
    job_progress_update(&p, "filtering", 0.0, 1000);
    job_progress_update(&p, "filtering", 0.45, 46000);
    char text[128];
    job_progress_text(&p, 46000, text, sizeof text);
    ck_assert_str_eq(text, "filtering 45%, 46 s so far, about 55 s left");
    job_progress_text(&p, 101500, text, sizeof text);
    ck_assert_str_eq(text, "filtering 45%, 1 min 42 s so far, nearly done");
    ldct_duration_format(3600 * 1000 + 5 * 60 * 1000 + 20000, text, sizeof text);
    ck_assert_str_eq(text, "1 h 5 min");
    ldct_duration_format(150 * 1000, text, sizeof text);
    ck_assert_str_eq(text, "2 min 30 s");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("job_progress");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, a_new_stage_is_published_at_once_fractions_every_two_seconds);
    tcase_add_test(tc, a_long_job_is_logged_once_a_minute);
    tcase_add_test(tc, the_time_left_follows_the_rate_so_far);
    tcase_add_test(tc, a_stage_run_again_starts_its_estimate_again);
    tcase_add_test(tc, an_uncounted_stage_has_no_estimate);
    tcase_add_test(tc, the_text_names_stage_percent_time_and_estimate);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
