/* Unit tests for daemon/status's writers: the Prometheus gauge of the
 * stalest running job's progress, and the JSON's ldctd state. */
#include "daemon/status.h"
#include "tests/unit/testutil.h"

#include <stdlib.h>

/* What writer(s) prints, into out. */
static void written(void (*writer)(FILE *, const status_snapshot *), const status_snapshot *s,
                    char *out, size_t len)
{
    FILE *f = fmemopen(out, len, "w");
    ck_assert_ptr_nonnull(f);
    writer(f, s);
    fclose(f);
}

static status_snapshot *snapshot(void)
{
    status_snapshot *s = calloc(1, sizeof *s);
    ck_assert_ptr_nonnull(s);
    s->now_ms = 1000000;
    s->uptime_s = -1; /* the database part only, as ldct status reads it */
    s->quarantine_instances = -1;
    return s;
}

START_TEST(the_progress_age_is_the_stalest_running_jobs)
{
    status_snapshot *s = snapshot();
    static char out[16384];
    written(status_write_prometheus, s, out, sizeof out);
    ck_assert_ptr_nonnull(strstr(out, "\nldct_job_progress_age_seconds 0.0\n"));
    s->nrunning = 3;
    s->running[0] = (status_job){.id = 1, .started_ms = 900000, .updated_ms = 995000};
    s->running[1] = (status_job){.id = 2, .started_ms = 950000, .updated_ms = 988000};
    s->running[2] = (status_job){.id = 3, .started_ms = 990000}; /* no progress yet */
    written(status_write_prometheus, s, out, sizeof out);
    ck_assert_ptr_nonnull(strstr(out, "\nldct_job_progress_age_seconds 12.0\n"));
    s->running[2].started_ms = 970000; /* never reported, for 30 s */
    written(status_write_prometheus, s, out, sizeof out);
    ck_assert_ptr_nonnull(strstr(out, "\nldct_job_progress_age_seconds 30.0\n"));
    ck_assert_ptr_nonnull(strstr(out, "# TYPE ldct_job_progress_age_seconds gauge\n"));
    free(s);
}
END_TEST

START_TEST(the_json_says_whether_ldctd_runs)
{
    status_snapshot *s = snapshot();
    static char out[16384];
    s->daemon = LDCTD_KILLED;
    written(status_write_json, s, out, sizeof out);
    ck_assert_ptr_nonnull(strstr(out, "\"ldctd\":{\"state\":\"killed\",\"pid\":null}"));
    s->daemon = LDCTD_RUNNING;
    s->daemon_pid = 4242;
    written(status_write_json, s, out, sizeof out);
    ck_assert_ptr_nonnull(strstr(out, "\"ldctd\":{\"state\":\"running\",\"pid\":4242}"));
    free(s);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("status");
    TCase *tc = tcase_create("status");
    tcase_add_test(tc, the_progress_age_is_the_stalest_running_jobs);
    tcase_add_test(tc, the_json_says_whether_ldctd_runs);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
