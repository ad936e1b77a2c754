/* Unit tests for db/queue: job creation and claiming order, derived UIDs
 * fixed once per job, finishing with sends, failures and retries, crash
 * recovery, send claiming (one in flight per destination) and backoff,
 * retention of unmatched series and of delivered ones, the progress of
 * running jobs, status_read taking one snapshot. */
#include "common/err.h"
#include "daemon/status.h"
#include "db/internal.h"
#include "db/queue.h"
#include "pipeline/sender.h"
#include "tests/unit/testutil.h"

#include <check.h>
#include <math.h>
#include <sqlite3.h>
#include <string.h>

static db *open_fresh(char *path, size_t len)
{
    char dir[64];
    tu_tmpdir(dir, sizeof dir);
    snprintf(path, len, "%s/ldct.db", dir);
    db *d = NULL;
    ck_assert_int_eq(db_open(path, 0, &d), 0);
    return d;
}

/* Instance number k of series uid, received at t. */
static void put_instance(db *d, const char *uid, int k, int64_t t)
{
    char sop[64], path[128], old[8];
    snprintf(sop, sizeof sop, "%s.%d", uid, k);
    snprintf(path, sizeof path, "/spool/%s/%d.dcm", uid, k);
    db_instance_rec r = {.study_uid = "1.2",
                         .series_uid = uid,
                         .sop_instance_uid = sop,
                         .sop_class_uid = "1.2.840.10008.5.1.4.1.1.2",
                         .transfer_syntax_uid = "1.2.840.10008.1.2.1",
                         .modality = "CT",
                         .path = path,
                         .size = 10,
                         .received_ms = t,
                         .stable_seconds = 1};
    ck_assert_int_eq(db_instance_put(d, &r, old, sizeof old), 0);
}

/* Puts a series of n instances and marks it stable; returns its id. */
static int64_t stable_series(db *d, const char *uid, int n)
{
    for (int i = 0; i < n; i++)
        put_instance(d, uid, i + 1, 1000);
    ck_assert_int_ge(db_series_mark_stable(d, 10000, NULL, NULL), 1);
    db_series_info si;
    ck_assert_int_eq(db_series_get(d, uid, &si), 0);
    ck_assert_str_eq(si.state, "stable");
    return si.id;
}

static int64_t job(db *d, int64_t series, int priority, const char *dests, int action_both)
{
    db_job_spec s = {.series_id = series,
                     .rule = "r",
                     .action = action_both ? "both" : "process",
                     .algorithm = "nlm3d",
                     .params = "search_radius=5",
                     .description_suffix = " [DN]",
                     .priority = priority,
                     .derived_series_uid = "9.9.1",
                     .destinations = dests,
                     .send_original = action_both,
                     .process = 1};
    int64_t id = 0;
    ck_assert_int_eq(db_job_create(d, &s, 2000, &id), 0);
    return id;
}

START_TEST(claims_by_priority_then_age)
{
    char p[128];
    db *d = open_fresh(p, sizeof p);
    int64_t a = job(d, stable_series(d, "1.1", 1), 0, "", 0);
    int64_t b = job(d, stable_series(d, "1.2", 1), 5, "", 0);
    int64_t c = job(d, stable_series(d, "1.3", 1), 0, "", 0);
    db_job j;
    ck_assert_int_eq(db_job_claim(d, "w", 3000, &j), 0);
    ck_assert_int_eq(j.id, b);
    ck_assert_str_eq(j.series_uid, "1.2");
    ck_assert_int_eq(j.attempts, 1);
    ck_assert_int_eq(db_job_claim(d, "w", 3000, &j), 0);
    ck_assert_int_eq(j.id, a);
    ck_assert_int_eq(db_job_claim(d, "w", 3000, &j), 0);
    ck_assert_int_eq(j.id, c);
    ck_assert_int_eq(db_job_claim(d, "w", 3000, &j), LDCT_ENOTFOUND);
    db_close(d);
}
END_TEST

START_TEST(job_needs_a_stable_series_and_queues_it)
{
    char p[128];
    db *d = open_fresh(p, sizeof p);
    int64_t s = stable_series(d, "1.1", 2);
    job(d, s, 0, "", 0);
    db_series_info si;
    ck_assert_int_eq(db_series_get(d, "1.1", &si), 0);
    ck_assert_str_eq(si.state, "queued");
    db_job_spec again = {.series_id = s,
                         .rule = "r",
                         .action = "process",
                         .algorithm = "nlm3d",
                         .params = "",
                         .destinations = "",
                         .process = 1};
    int64_t id;
    ck_assert_int_eq(db_job_create(d, &again, 2000, &id), LDCT_ENOTFOUND);
    db_close(d);
}
END_TEST

START_TEST(derived_uids_are_made_once_per_job)
{
    char p[128];
    db *d = open_fresh(p, sizeof p);
    job(d, stable_series(d, "1.1", 2), 0, "", 0);
    db_job j;
    ck_assert_int_eq(db_job_claim(d, "w", 3000, &j), 0);
    const char *src[2] = {"1.1.1", "1.1.2"};
    char uids[2][DB_UID_LEN] = {"7.1", "7.2"};
    ck_assert_int_eq(db_job_derived_uids(d, j.id, 2, src, uids, NULL, "5.5.5", NULL), 0);
    char again[2][DB_UID_LEN] = {"8.1", "8.2"};
    ck_assert_int_eq(db_job_derived_uids(d, j.id, 2, src, again, NULL, "5.5.5", NULL), 0);
    ck_assert_str_eq(again[0], "7.1");
    ck_assert_str_eq(again[1], "7.2");
    db_close(d);
}
END_TEST

typedef struct {
    int jobs, sends;
    char state[8][16], what[8][16], dest[8][16];
} seen;

static void on_job(void *ctx, const db_job_row *j)
{
    (void)j;
    ((seen *)ctx)->jobs++;
}

static void on_send(void *ctx, const db_send_row *s)
{
    seen *v = ctx;
    snprintf(v->state[v->sends], 16, "%s", s->state);
    snprintf(v->what[v->sends], 16, "%s", s->what);
    snprintf(v->dest[v->sends], 16, "%s", s->destination);
    v->sends++;
}

START_TEST(done_creates_one_send_per_destination_and_both_sends_the_original)
{
    char p[128];
    db *d = open_fresh(p, sizeof p);
    job(d, stable_series(d, "1.1", 1), 0, "pacs,archive", 1);
    seen v = {0};
    ck_assert_int_eq(db_jobs_list(d, 0, on_job, on_send, &v), 0);
    ck_assert_int_eq(v.sends, 2); /* originals, at once */
    ck_assert_str_eq(v.what[0], "original");
    db_job j;
    ck_assert_int_eq(db_job_claim(d, "w", 3000, &j), 0);
    const char *src[1] = {"1.1.1"}, *paths[1] = {"/outbox/1/7.1.dcm"};
    char uids[1][DB_UID_LEN] = {"7.1"};
    ck_assert_int_eq(db_job_derived_uids(d, j.id, 1, src, uids, NULL, "5.5.5", NULL), 0);
    ck_assert_int_eq(db_job_done(d, j.id, 4000, 1, src, paths, NULL), 0);
    memset(&v, 0, sizeof v);
    ck_assert_int_eq(db_jobs_list(d, 0, on_job, on_send, &v), 0);
    ck_assert_int_eq(v.sends, 4);
    ck_assert_str_eq(v.what[2], "derived");
    ck_assert_str_eq(v.dest[2], "pacs");
    ck_assert_str_eq(v.dest[3], "archive");
    db_send s;
    ck_assert_int_eq(db_send_claim(d, 5000, &s), 0);
    ck_assert_str_eq(s.what, "original");
    db_strings files;
    ck_assert_int_eq(db_send_paths(d, &s, &files), 0);
    ck_assert_int_eq(files.n, 1);
    ck_assert_str_eq(files.v[0], "/spool/1.1/1.dcm");
    db_strings_free(&files);
    db_close(d);
}
END_TEST

static void delivery_of(void *ctx, const db_series_row *r)
{
    db_series_delivery(r, ctx, 32);
}

/* ldct series: a send that waits is queued, one in flight is sending. */
START_TEST(series_delivery_tells_a_waiting_send_from_one_in_flight)
{
    char p[128], delivery[32];
    db *d = open_fresh(p, sizeof p);
    job(d, stable_series(d, "1.1", 1), 0, "pacs", 1); /* its original, at once */
    ck_assert_int_eq(db_series_list(d, 0, delivery_of, delivery), 0);
    ck_assert_str_eq(delivery, "queued 0/1");
    db_send s;
    ck_assert_int_eq(db_send_claim(d, 5000, &s), 0);
    ck_assert_int_eq(db_series_list(d, 0, delivery_of, delivery), 0);
    ck_assert_str_eq(delivery, "sending 0/1");
    ck_assert_int_eq(db_send_done(d, s.id, 6000), 0);
    ck_assert_int_eq(db_series_list(d, 0, delivery_of, delivery), 0);
    ck_assert_str_eq(delivery, "delivered");
    db_close(d);
}
END_TEST

START_TEST(one_send_in_flight_per_destination)
{
    char p[128];
    db *d = open_fresh(p, sizeof p);
    job(d, stable_series(d, "1.1", 1), 0, "pacs", 1);
    job(d, stable_series(d, "1.2", 1), 0, "pacs,other", 1);
    db_send a, b, c;
    ck_assert_int_eq(db_send_claim(d, 5000, &a), 0);
    ck_assert_str_eq(a.destination, "pacs");
    ck_assert_int_eq(db_send_claim(d, 5000, &b), 0);
    ck_assert_str_eq(b.destination, "other"); /* not the second pacs send */
    ck_assert_int_eq(db_send_claim(d, 5000, &c), LDCT_ENOTFOUND);
    ck_assert_int_eq(db_send_done(d, a.id, 6000), 0);
    ck_assert_int_eq(db_send_claim(d, 6000, &c), 0);
    ck_assert_str_eq(c.destination, "pacs");
    db_close(d);
}
END_TEST

/* Three destinations that failed before hold at most two of the (three)
 * sender threads' claims; a destination trying for the first time still
 * gets one. */
START_TEST(failing_destinations_leave_a_sender_for_the_others)
{
    char p[128];
    db *d = open_fresh(p, sizeof p);
    db_send_retry_slots(d, 2);
    job(d, stable_series(d, "1.1", 1), 0, "a,b,c", 1); /* originals to a, b, c */
    db_send s[3], x;
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(db_send_claim(d, 5000, &s[i]), 0);
        ck_assert_int_eq(db_send_failed(d, s[i].id, 5000, 6000, "timeout"), 0);
    }
    ck_assert_int_eq(db_send_claim(d, 6000, &s[0]), 0);
    ck_assert_int_eq(db_send_claim(d, 6000, &s[1]), 0);
    ck_assert_int_eq(db_send_claim(d, 6000, &x), LDCT_ENOTFOUND); /* the third retry waits */
    job(d, stable_series(d, "1.2", 1), 0, "healthy", 1);
    ck_assert_int_eq(db_send_claim(d, 6000, &x), 0);
    ck_assert_str_eq(x.destination, "healthy");
    ck_assert_int_eq(db_send_failed(d, s[0].id, 6000, 7000, "timeout"), 0);
    ck_assert_int_eq(db_send_claim(d, 6000, &x), 0); /* a slot is free again */
    ck_assert_int_eq(x.attempts, 2);
    db_close(d);
}
END_TEST

/* The open sends by destination: queued, retrying after a failure,
 * sending, dead; done sends and destinations with none open are left out. */
START_TEST(destination_totals_count_open_sends_by_state)
{
    char p[128];
    db *d = open_fresh(p, sizeof p);
    job(d, stable_series(d, "1.1", 1), 0, "a,b,c", 1);
    job(d, stable_series(d, "1.2", 1), 0, "a,b", 1);
    db_send s;
    ck_assert_int_eq(db_send_claim(d, 5000, &s), 0); /* a of 1.1: fails, retried later */
    ck_assert_str_eq(s.destination, "a");
    ck_assert_int_eq(db_send_failed(d, s.id, 5000, 60000, "refused"), 0);
    ck_assert_int_eq(db_send_claim(d, 5000, &s), 0); /* b of 1.1: dead */
    ck_assert_str_eq(s.destination, "b");
    ck_assert_int_eq(db_send_failed(d, s.id, 5000, -1, "refused for good"), 0);
    ck_assert_int_eq(db_send_claim(d, 5000, &s), 0); /* c of 1.1: done */
    ck_assert_str_eq(s.destination, "c");
    ck_assert_int_eq(db_send_done(d, s.id, 6000), 0);
    ck_assert_int_eq(db_send_claim(d, 6000, &s), 0); /* a or b of 1.2: sending */
    db_destination_totals t[4];
    int n = -1;
    ck_assert_int_eq(db_destination_totals_get(d, t, 4, &n), 0);
    ck_assert_int_eq(n, 2); /* c has nothing open */
    ck_assert_str_eq(t[0].destination, "a");
    ck_assert_str_eq(t[1].destination, "b");
    const int a_sending = strcmp(s.destination, "a") == 0;
    ck_assert_int_eq(t[0].retrying, 1);
    ck_assert_int_eq(t[0].sending, a_sending);
    ck_assert_int_eq(t[0].queued, !a_sending);
    ck_assert_int_eq(t[0].dead, 0);
    ck_assert_int_eq(t[1].dead, 1);
    ck_assert_int_eq(t[1].sending, !a_sending);
    ck_assert_int_eq(t[1].queued, a_sending);
    ck_assert_int_eq(t[1].retrying, 0);
    ck_assert_int_eq(db_destination_totals_get(d, t, 1, &n), 0); /* at most max */
    ck_assert_int_eq(n, 1);
    db_close(d);
}
END_TEST

START_TEST(failed_send_waits_for_its_backoff_then_dies)
{
    char p[128];
    db *d = open_fresh(p, sizeof p);
    job(d, stable_series(d, "1.1", 1), 0, "pacs", 1);
    db_send s;
    ck_assert_int_eq(db_send_claim(d, 5000, &s), 0);
    ck_assert_int_eq(s.retried, 0); /* a first attempt */
    ck_assert_int_eq(db_send_failed(d, s.id, 5000, 15000, "refused"), 0);
    ck_assert_int_eq(db_send_claim(d, 14999, &s), LDCT_ENOTFOUND);
    ck_assert_int_eq(db_send_claim(d, 15000, &s), 0);
    ck_assert_int_eq(s.attempts, 2);
    ck_assert_int_eq(s.retried, 0);
    ck_assert_int_eq(db_send_failed(d, s.id, 15000, -1, "refused"), 0);
    ck_assert_int_eq(db_send_claim(d, 99999999, &s), LDCT_ENOTFOUND);
    seen v = {0};
    ck_assert_int_eq(db_jobs_list(d, 0, on_job, on_send, &v), 0);
    ck_assert_str_eq(v.state[0], "dead");
    int changed = 0;
    ck_assert_int_eq(db_job_retry(d, 1, NULL, &changed), 0);
    ck_assert_int_eq(changed, 1);
    ck_assert_int_eq(db_send_claim(d, 20000, &s), 0);
    ck_assert_int_eq(s.attempts, 1);
    ck_assert_int_eq(s.retried, 1); /* the sender's log line says so */
    ck_assert_int_eq(db_send_failed(d, s.id, 20000, 21000, "refused"), 0);
    ck_assert_int_eq(db_send_claim(d, 21000, &s), 0);
    ck_assert_int_eq(s.retried, 0);
    ck_assert_int_eq(db_job_retry(d, 42, NULL, &changed), LDCT_ENOTFOUND);
    db_close(d);
}
END_TEST

/* A destination renamed in the configuration: the job's dead send goes to
 * the name given to retry; with nothing dead, a second retry moves
 * nothing. */
START_TEST(retry_can_send_dead_sends_to_another_destination)
{
    char p[128];
    db *d = open_fresh(p, sizeof p);
    job(d, stable_series(d, "1.1", 1), 0, "pacs", 1);
    db_send s;
    ck_assert_int_eq(db_send_claim(d, 5000, &s), 0);
    ck_assert_int_eq(db_send_failed(d, s.id, 5000, -1, "destination 'pacs' is not configured"), 0);
    int changed = 0;
    ck_assert_int_eq(db_job_retry(d, 1, "pacs2", &changed), 0);
    ck_assert_int_eq(changed, 1);
    ck_assert_int_eq(db_send_claim(d, 6000, &s), 0);
    ck_assert_str_eq(s.destination, "pacs2");
    ck_assert_int_eq(db_job_retry(d, 1, "pacs3", &changed), 0);
    ck_assert_int_eq(changed, 0); /* nothing dead: nothing moved */
    db_close(d);
}
END_TEST

/* Claims every due send, marks those to `done_to` done and the others
 * dead; their destinations, in claim order, into out (comma list). */
static void claim_all(db *d, const char *done_to, char *out, size_t len)
{
    db_send s;
    out[0] = '\0';
    while (db_send_claim(d, 9000, &s) == 0) {
        snprintf(out + strlen(out), len - strlen(out), "%s%s", out[0] ? "," : "", s.destination);
        if (done_to && strcmp(s.destination, done_to) == 0)
            ck_assert_int_eq(db_send_done(d, s.id, 9000), 0);
        else
            ck_assert_int_eq(db_send_failed(d, s.id, 9000, -1, "refused"), 0);
    }
}

/* retry --to must not send a series to a PACS twice: with pacs done and
 * pacs2, pacs3 dead, --to pacs moved both there (three deliveries, and
 * the record that pacs2 and pacs3 never got it was gone). Now nothing
 * moves to a destination that has a send of that kind, at most one dead
 * send of a kind moves, --from picks which, and the rest are retried to
 * their own destinations. */
START_TEST(retry_to_a_destination_moves_no_send_it_has_already)
{
    char p[128], got[256];
    db *d = open_fresh(p, sizeof p);
    job(d, stable_series(d, "1.1", 1), 0, "pacs,pacs2,pacs3", 1); /* three original sends */
    claim_all(d, "pacs", got, sizeof got);
    ck_assert_str_eq(got, "pacs,pacs2,pacs3");
    db_retry r = {.to = "pacs"};
    ck_assert_int_eq(db_job_retry_with(d, 1, &r), 0);
    ck_assert_int_eq(r.moved, 0);
    ck_assert_int_eq(r.kept, 2);
    ck_assert_int_eq(r.changed, 2);
    claim_all(d, NULL, got, sizeof got);
    ck_assert_str_eq(got, "pacs2,pacs3"); /* each to its own again */
    r = (db_retry){.to = "pacs4", .from = "pacs3"};
    ck_assert_int_eq(db_job_retry_with(d, 1, &r), 0);
    ck_assert_int_eq(r.moved, 1);
    ck_assert_int_eq(r.kept, 0);
    ck_assert_int_eq(r.changed, 2);
    claim_all(d, NULL, got, sizeof got);
    ck_assert_str_eq(got, "pacs2,pacs4");
    r = (db_retry){.to = "pacs5"}; /* pacs2 and pacs4 dead: one moves */
    ck_assert_int_eq(db_job_retry_with(d, 1, &r), 0);
    ck_assert_int_eq(r.moved, 1);
    ck_assert_int_eq(r.kept, 1);
    claim_all(d, "pacs5", got, sizeof got);
    ck_assert(strstr(got, "pacs5") != NULL);
    db_close(d);
}
END_TEST

START_TEST(interrupted_send_is_pending_again_without_an_attempt)
{
    char p[128];
    db *d = open_fresh(p, sizeof p);
    job(d, stable_series(d, "1.1", 1), 0, "pacs", 1);
    db_send s;
    ck_assert_int_eq(db_send_claim(d, 5000, &s), 0);
    ck_assert_int_eq(s.attempts, 1);
    ck_assert_int_eq(db_send_interrupted(d, s.id), 0);
    ck_assert_int_eq(db_send_claim(d, 5000, &s), 0); /* due at once */
    ck_assert_int_eq(s.attempts, 1);
    ck_assert_int_eq(db_send_done(d, s.id, 6000), 0);
    ck_assert_int_eq(db_send_interrupted(d, s.id), 0); /* no-op once done */
    seen v = {0};
    ck_assert_int_eq(db_jobs_list(d, 0, on_job, on_send, &v), 0);
    ck_assert_str_eq(v.state[0], "done");
    db_close(d);
}
END_TEST

START_TEST(backoff_grows_to_its_cap_then_gives_up)
{
    cfg_destination dest = {.retry_initial_seconds = 10,
                            .retry_multiplier = 2,
                            .retry_max_seconds = 60,
                            .retry_max_attempts = 5};
    ck_assert_int_eq(sender_backoff_ms(&dest, 1), 10000);
    ck_assert_int_eq(sender_backoff_ms(&dest, 2), 20000);
    ck_assert_int_eq(sender_backoff_ms(&dest, 3), 40000);
    ck_assert_int_eq(sender_backoff_ms(&dest, 4), 60000);
    ck_assert_int_eq(sender_backoff_ms(&dest, 5), -1);
}
END_TEST

START_TEST(recover_requeues_running_work_and_fails_repeated_crashers)
{
    char p[128];
    db *d = open_fresh(p, sizeof p);
    job(d, stable_series(d, "1.1", 1), 0, "pacs", 1);
    job(d, stable_series(d, "1.2", 1), 0, "", 0);
    db_job j;
    db_send s;
    ck_assert_int_eq(db_job_claim(d, "w", 3000, &j), 0);
    ck_assert_int_eq(db_send_claim(d, 3000, &s), 0);
    int jobs = -1, sends = -1;
    ck_assert_int_eq(db_recover(d, 3, 4000, &jobs, &sends), 0);
    ck_assert_int_eq(jobs, 1);
    ck_assert_int_eq(sends, 1);
    /* The same job claimed twice more and "crashing" each time. */
    for (int k = 0; k < 2; k++) {
        ck_assert_int_eq(db_job_claim(d, "w", 5000, &j), 0);
        ck_assert_int_eq(db_recover(d, 3, 6000, &jobs, NULL), 0);
    }
    ck_assert_int_eq(jobs, 0); /* third crash: failed, not requeued */
    db_queue_totals t;
    ck_assert_int_eq(db_queue_totals_get(d, &t), 0);
    ck_assert_int_eq(t.jobs_failed, 1);
    ck_assert_int_eq(t.jobs_pending, 1);
    db_close(d);
}
END_TEST

START_TEST(failure_with_retry_goes_back_to_pending)
{
    char p[128];
    db *d = open_fresh(p, sizeof p);
    job(d, stable_series(d, "1.1", 1), 0, "", 0);
    db_job j;
    ck_assert_int_eq(db_job_claim(d, "w", 3000, &j), 0);
    ck_assert_int_eq(db_job_failed(d, j.id, 3500, "disk full", 1), 0);
    ck_assert_int_eq(db_job_claim(d, "w", 4000, &j), 0);
    ck_assert_int_eq(j.attempts, 2);
    ck_assert_int_eq(j.retried, 0);
    ck_assert_int_eq(db_job_failed(d, j.id, 4500, "slice 3 has 256 columns", 0), 0);
    ck_assert_int_eq(db_job_claim(d, "w", 5000, &j), LDCT_ENOTFOUND);
    db_series_info si;
    ck_assert_int_eq(db_series_get(d, "1.1", &si), 0);
    ck_assert_str_eq(si.state, "failed");
    /* ldct retry: claimed again as attempt 1, marked as retried (the
     * worker's log line says so), and the note goes when it ends. */
    int changed = 0;
    ck_assert_int_eq(db_job_retry(d, j.id, NULL, &changed), 0);
    ck_assert_int_eq(changed, 1);
    ck_assert_int_eq(db_job_claim(d, "w", 6000, &j), 0);
    ck_assert_int_eq(j.attempts, 1);
    ck_assert_int_eq(j.retried, 1);
    int jobs = 0, sends = 0; /* a crash while it ran: its next run is no new retry */
    ck_assert_int_eq(db_recover(d, 3, 6200, &jobs, &sends), 0);
    ck_assert_int_eq(jobs, 1);
    ck_assert_int_eq(db_job_claim(d, "w", 6300, &j), 0);
    ck_assert_int_eq(j.attempts, 2);
    ck_assert_int_eq(j.retried, 0);
    ck_assert_int_eq(db_job_failed(d, j.id, 6500, "disk full", 1), 0);
    ck_assert_int_eq(db_job_claim(d, "w", 7000, &j), 0);
    ck_assert_int_eq(j.attempts, 3);
    ck_assert_int_eq(j.retried, 0);
    db_close(d);
}
END_TEST

/* A job waiting for disk space goes back without using its attempt, the
 * job behind it is claimed meanwhile, and it comes back after its time,
 * marked as having waited. */
START_TEST(deferred_job_steps_aside_until_its_time)
{
    char p[128];
    db *d = open_fresh(p, sizeof p);
    int64_t a = job(d, stable_series(d, "1.1", 1), 0, "", 0);
    int64_t b = job(d, stable_series(d, "1.2", 1), 0, "", 0);
    db_job j;
    ck_assert_int_eq(db_job_claim(d, "w", 3000, &j), 0);
    ck_assert_int_eq(j.id, a);
    ck_assert_int_eq(j.waited, 0);
    int late = -1;
    ck_assert_int_eq(db_job_defer(d, a, 3000, 18000, DB_JOB_WAIT_SPACE ": needs 4 MB", &late), 0);
    ck_assert_int_eq(late, 0);
    ck_assert_int_eq(db_job_claim(d, "w", 3100, &j), 0);
    ck_assert_int_eq(j.id, b);
    ck_assert_int_eq(db_job_claim(d, "w", 17999, &j), LDCT_ENOTFOUND);
    ck_assert_int_eq(db_job_claim(d, "w", 18000, &j), 0);
    ck_assert_int_eq(j.id, a);
    ck_assert_int_eq(j.attempts, 1); /* the deferred claim did not count */
    ck_assert_int_eq(j.waited, 1);
    db_close(d);
}
END_TEST

/* Runs sql on the closed database at path with SQLite itself (an older
 * schema made by hand). */
static void rewrite_db(const char *path, const char *sql)
{
    sqlite3 *h;
    ck_assert_int_eq(sqlite3_open(path, &h), SQLITE_OK);
    ck_assert_int_eq(sqlite3_exec(h, sql, 0, 0, 0), SQLITE_OK);
    sqlite3_close(h);
}

/* Series 1.1's job, and its send failed at t to be tried again at t +
 * 10 s (into *s); returns the job. */
static int64_t job_with_a_failed_send(db *d, int64_t t, db_send *s)
{
    int64_t a = job(d, stable_series(d, "1.1", 1), 0, "pacs", 1);
    ck_assert_int_eq(db_send_claim(d, t, s), 0);
    ck_assert_int_eq(db_send_failed(d, s->id, t, t + 10000, "refused"), 0);
    return a;
}

/* The wall clock steps back an hour while a series is quiet, a send waits
 * for its retry and a job for room: every wait keeps its length. */
START_TEST(a_clock_step_moves_the_waits_with_it)
{
    char p[128];
    db *d = open_fresh(p, sizeof p);
    const int64_t H = 3600000, T = 100 * H;
    db_send s;
    int64_t a = job_with_a_failed_send(d, T, &s);
    db_job j;
    ck_assert_int_eq(db_job_claim(d, "w", T, &j), 0);
    ck_assert_int_eq(db_job_defer(d, a, T, T + 15000, DB_JOB_WAIT_SPACE ": x", NULL), 0);
    int64_t b = job(d, stable_series(d, "1.5", 1), 0, "pacs", 1);
    put_instance(d, "1.2", 1, T);       /* receiving, stable_seconds 1 */
    const int64_t B = T - H;            /* the same moment on the stepped clock */
    put_instance(d, "1.4", 1, B - 200); /* received after the step, before its tick */
    /* A send failing and a job deferred after the step, before its tick:
     * their waits are on the new clock already. */
    db_send s2;
    ck_assert_int_eq(db_send_claim(d, B - 300, &s2), 0);
    ck_assert_int_ne(s2.id, s.id);
    ck_assert_int_eq(db_send_failed(d, s2.id, B - 300, B + 19700, "refused"), 0);
    ck_assert_int_eq(db_job_claim(d, "w", B - 300, &j), 0);
    ck_assert_int_eq(j.id, b);
    ck_assert_int_eq(db_job_defer(d, b, B - 300, B + 24700, DB_JOB_WAIT_SPACE ": x", NULL), 0);
    ck_assert_int_eq(db_clock_stepped(d, -H, B), 0);
    ck_assert_int_eq(db_series_mark_stable(d, B + 799, NULL, NULL), 0);
    ck_assert_int_eq(db_series_mark_stable(d, B + 800, NULL, NULL), 1); /* 1.4, not moved */
    ck_assert_int_eq(db_series_mark_stable(d, B + 999, NULL, NULL), 0);
    ck_assert_int_eq(db_series_mark_stable(d, B + 1000, NULL, NULL), 1);
    ck_assert_int_eq(db_send_claim(d, B + 9999, &s), LDCT_ENOTFOUND);
    ck_assert_int_eq(db_send_claim(d, B + 10000, &s), 0);
    ck_assert_int_ne(s.id, s2.id);
    ck_assert_int_eq(db_send_done(d, s.id, B + 10000), 0); /* one send per destination */
    ck_assert_int_eq(db_send_claim(d, B + 19699, &s), LDCT_ENOTFOUND); /* s2 not moved */
    ck_assert_int_eq(db_send_claim(d, B + 19700, &s), 0);
    ck_assert_int_eq(s.id, s2.id);
    ck_assert_int_eq(db_job_claim(d, "w", B + 14999, &j), LDCT_ENOTFOUND);
    ck_assert_int_eq(db_job_claim(d, "w", B + 15000, &j), 0);
    ck_assert_int_eq(j.id, a);
    ck_assert_int_eq(db_job_claim(d, "w", B + 24699, &j), LDCT_ENOTFOUND); /* b not moved */
    ck_assert_int_eq(db_job_claim(d, "w", B + 24700, &j), 0);
    ck_assert_int_eq(j.id, b);
    /* Stopped over a step back: a series heard of in the future is quiet
     * from now at the start. */
    put_instance(d, "1.3", 1, T);
    ck_assert_int_eq(db_clock_clamp(d, B), 0);
    ck_assert_int_eq(db_series_mark_stable(d, B + 1000, NULL, NULL), 1);
    db_close(d);
}
END_TEST

/* A database of schema 5 (before wait_set_ms) is upgraded, and the waits
 * it held are moved by a clock step like any set before the step. */
START_TEST(waits_from_a_schema_5_database_move_with_a_step)
{
    char p[128];
    db *d = open_fresh(p, sizeof p);
    const int64_t H = 3600000, T = 100 * H;
    db_send s;
    job_with_a_failed_send(d, T, &s);
    db_close(d);
    rewrite_db(p, "ALTER TABLE jobs DROP COLUMN wait_set_ms;" /* back to schema 5 */
                  "ALTER TABLE jobs DROP COLUMN input_count;"
                  "DROP TABLE node_settings;"
                  "DROP TABLE job_progress;"
                  "ALTER TABLE jobs DROP COLUMN ran_algorithm;"
                  "ALTER TABLE sends DROP COLUMN wait_set_ms;"
                  "PRAGMA user_version = 5");
    ck_assert_int_eq(db_open(p, 0, &d), 0);
    int v = 0;
    ck_assert_int_eq(db_user_version(d, &v), 0);
    ck_assert_int_eq(v, db_schema_version());
    const int64_t B = T - H;
    ck_assert_int_eq(db_clock_stepped(d, -H, B), 0);
    ck_assert_int_eq(db_send_claim(d, B + 9999, &s), LDCT_ENOTFOUND);
    ck_assert_int_eq(db_send_claim(d, B + 10000, &s), 0);
    db_close(d);
}
END_TEST

/* Schema 5 as a development build wrote it (series.interrupted, no
 * sends_series index) is repaired on open: the node starts and works. */
START_TEST(a_development_schema_5_is_repaired)
{
    char p[128];
    db *d = open_fresh(p, sizeof p);
    put_instance(d, "1.1", 1, 1000);
    db_close(d);
    rewrite_db(p, "DROP INDEX sends_series;"
                  "ALTER TABLE series DROP COLUMN interrupted_ms;"
                  "ALTER TABLE series ADD COLUMN interrupted INTEGER NOT NULL DEFAULT 0;"
                  "ALTER TABLE jobs DROP COLUMN wait_set_ms;"
                  "ALTER TABLE jobs DROP COLUMN input_count;"
                  "ALTER TABLE sends DROP COLUMN wait_set_ms;"
                  "DROP TABLE node_settings;"
                  "DROP TABLE job_progress;"
                  "ALTER TABLE jobs DROP COLUMN ran_algorithm;"
                  "PRAGMA user_version = 5");
    sqlite3 *h;
    ck_assert_int_eq(db_open(p, 0, &d), 0);
    ck_assert_int_eq(db_series_mark_stable(d, 1000 + 1000, NULL, NULL), 1); /* stable_seconds 1 */
    db_close(d);
    ck_assert_int_eq(sqlite3_open(p, &h), SQLITE_OK);
    sqlite3_stmt *st;
    ck_assert_int_eq(sqlite3_prepare_v2(h,
                                        "SELECT count(*) FROM sqlite_master WHERE type = 'index'"
                                        " AND name = 'sends_series'",
                                        -1, &st, NULL),
                     SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
    ck_assert_int_eq(sqlite3_column_int(st, 0), 1);
    sqlite3_finalize(st);
    sqlite3_close(h);
}
END_TEST

typedef struct {
    int n;
    int64_t id;
} expired;

static void on_expired(void *ctx, int64_t id, const char *uid, const char *state)
{
    (void)uid;
    ck_assert_str_eq(state, "unmatched");
    ((expired *)ctx)->n++;
    ((expired *)ctx)->id = id;
}

START_TEST(unmatched_series_expire_and_are_removed)
{
    char p[128];
    db *d = open_fresh(p, sizeof p);
    int64_t s = stable_series(d, "1.1", 3);
    ck_assert_int_eq(db_series_set_state(d, s, "unmatched"), 0);
    expired e = {0};
    ck_assert_int_eq(db_series_expired(d, 9999, on_expired, &e), 0); /* stable at 10000 */
    ck_assert_int_eq(db_series_expired(d, 10000, on_expired, &e), 1);
    ck_assert_int_eq(e.id, s);
    db_strings removed;
    ck_assert_int_eq(db_series_remove(d, s, &removed), 0);
    ck_assert_int_eq(removed.n, 3);
    db_strings_free(&removed);
    ck_assert_int_eq(db_series_remove(d, s, &removed), LDCT_ENOTFOUND); /* once */
    db_series_info si;
    ck_assert_int_eq(db_series_get(d, "1.1", &si), 0);
    ck_assert_str_eq(si.state, "removed");
    ck_assert_int_eq(si.instances, 0);
    db_strings paths;
    ck_assert_int_eq(db_series_paths(d, s, &paths), 0);
    ck_assert_int_eq(paths.n, 0);
    db_close(d);
}
END_TEST

typedef struct delivered {
    int n;
    char state[16];
} delivered;

static void on_delivered(void *ctx, int64_t id, const char *uid, const char *state)
{
    (void)id, (void)uid;
    delivered *v = ctx;
    v->n++;
    snprintf(v->state, sizeof v->state, "%s", state);
}

static int count_expired(db *d, int64_t before)
{
    delivered v = {0};
    ck_assert_int_ge(db_series_expired(d, before, on_delivered, &v), 0);
    return v.n;
}

/* Job of series 1.1 (2 instances) done at 4000 with outbox files. */
static int64_t processed_series(db *d, const char *dests)
{
    int64_t s = stable_series(d, "1.1", 2);
    job(d, s, 0, dests, 0);
    db_job j;
    ck_assert_int_eq(db_job_claim(d, "w", 3000, &j), 0);
    const char *src[2] = {"1.1.1", "1.1.2"}, *paths[2] = {"/outbox/1/7.1.dcm", "/outbox/1/7.2.dcm"};
    char uids[2][DB_UID_LEN] = {"7.1", "7.2"};
    ck_assert_int_eq(db_job_derived_uids(d, j.id, 2, src, uids, NULL, "5.5.5", NULL), 0);
    ck_assert_int_eq(db_job_done(d, j.id, 4000, 2, src, paths, NULL), 0);
    return s;
}

static int has_path(const db_strings *v, const char *path)
{
    for (int i = 0; i < v->n; i++)
        if (strcmp(v->v[i], path) == 0)
            return 1;
    return 0;
}

/* The rows of a removed series go once its last instance is older than the
 * history; series not removed stay, whatever their age. */
START_TEST(removed_series_are_purged_after_their_history)
{
    char p[128];
    db *d = open_fresh(p, sizeof p);
    int64_t s = processed_series(d, "pacs"); /* instances at 1000 */
    db_send snd;
    ck_assert_int_eq(db_send_claim(d, 5000, &snd), 0);
    ck_assert_int_eq(db_send_done(d, snd.id, 7000), 0);
    put_instance(d, "1.2", 1, 500); /* older, but receiving */
    db_strings removed;
    ck_assert_int_eq(db_series_remove(d, s, &removed), 0);
    db_strings_free(&removed);
    int n = -1;
    ck_assert_int_eq(db_series_purge(d, 1000, &n), 0);
    ck_assert_int_eq(n, 0);
    seen v = {0};
    ck_assert_int_eq(db_jobs_list(d, 0, on_job, on_send, &v), 0);
    ck_assert_int_eq(v.jobs, 1);
    ck_assert_int_eq(db_series_purge(d, 1001, &n), 0);
    ck_assert_int_eq(n, 1);
    db_series_info si;
    ck_assert_int_eq(db_series_get(d, "1.1", &si), LDCT_ENOTFOUND);
    ck_assert_int_eq(db_series_get(d, "1.2", &si), 0);
    v = (seen){0};
    ck_assert_int_eq(db_jobs_list(d, 0, on_job, on_send, &v), 0);
    ck_assert_int_eq(v.jobs + v.sends, 0);
    db_close(d);
}
END_TEST

/* A long history due at once (an upgrade) goes 200 series per call. */
START_TEST(a_long_history_is_purged_in_batches)
{
    char p[128];
    db *d = open_fresh(p, sizeof p);
    sqlite3 *h;
    ck_assert_int_eq(sqlite3_open(p, &h), SQLITE_OK);
    ck_assert_int_eq(sqlite3_exec(h,
                                  "WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k"
                                  " WHERE i < 250) INSERT INTO series (study_uid, series_uid,"
                                  " state, first_received_ms, last_received_ms, stable_seconds)"
                                  " SELECT '1', 'u' || i, 'removed', 1000, 1000, 30 FROM k",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(h);
    int n = -1;
    ck_assert_int_eq(db_series_purge(d, 2000, &n), 0);
    ck_assert_int_eq(n, 200);
    ck_assert_int_eq(db_series_purge(d, 2000, &n), 0);
    ck_assert_int_eq(n, 50);
    ck_assert_int_eq(db_series_purge(d, 2000, &n), 0);
    ck_assert_int_eq(n, 0);
    db_close(d);
}
END_TEST

START_TEST(delivered_series_expire_with_their_outbox_files_but_not_before)
{
    char p[128];
    db *d = open_fresh(p, sizeof p);
    int64_t s = processed_series(d, "pacs");
    ck_assert_int_eq(count_expired(d, INT64_MAX / 2), 0); /* send pending */
    db_send snd;
    ck_assert_int_eq(db_send_claim(d, 5000, &snd), 0);
    ck_assert_int_eq(db_send_failed(d, snd.id, 5000, -1, "refused"), 0);
    ck_assert_int_eq(count_expired(d, INT64_MAX / 2), 0); /* dead: kept for ldct retry */
    int changed = 0;
    ck_assert_int_eq(db_job_retry(d, 1, NULL, &changed), 0);
    ck_assert_int_eq(db_send_claim(d, 6000, &snd), 0);
    ck_assert_int_eq(db_send_done(d, snd.id, 7000), 0);
    ck_assert_int_eq(count_expired(d, 6999), 0); /* delivered at 7000 */
    delivered v = {0};
    ck_assert_int_eq(db_series_expired(d, 7000, on_delivered, &v), 1);
    ck_assert_str_eq(v.state, "done");
    db_strings removed;
    ck_assert_int_eq(db_series_remove(d, s, &removed), 0);
    ck_assert_int_eq(removed.n, 4);
    ck_assert(has_path(&removed, "/spool/1.1/1.dcm"));
    ck_assert(has_path(&removed, "/outbox/1/7.2.dcm"));
    db_strings_free(&removed);
    ck_assert_int_eq(db_series_remove(d, s, &removed), LDCT_ENOTFOUND);
    /* Sent again later, the same instances under the same rule: the same
     * result, so the same derived UIDs. */
    put_instance(d, "1.1", 1, 9000);
    put_instance(d, "1.1", 2, 9000);
    ck_assert_int_ge(db_series_mark_stable(d, 20000, NULL, NULL), 1);
    job(d, s, 0, "pacs", 0);
    db_job j;
    ck_assert_int_eq(db_job_claim(d, "w", 21000, &j), 0);
    const char *src[2] = {"1.1.2", "1.1.1"}; /* any order */
    char uids[2][DB_UID_LEN] = {"8.2", "8.1"};
    ck_assert_int_eq(db_job_derived_uids(d, j.id, 2, src, uids, NULL, "5.5.5", NULL), 0);
    ck_assert_str_eq(uids[0], "7.2");
    ck_assert_str_eq(uids[1], "7.1");
    db_close(d);
}
END_TEST

START_TEST(results_folder_output_stays_when_its_series_expires)
{
    char p[128];
    db *d = open_fresh(p, sizeof p);
    int64_t s = processed_series(d, ""); /* no destination: results folder */
    ck_assert_int_eq(count_expired(d, 3999), 0);
    ck_assert_int_eq(count_expired(d, 4000), 1);
    db_strings removed;
    ck_assert_int_eq(db_series_remove(d, s, &removed), 0);
    ck_assert_int_eq(removed.n, 2); /* the two spool files only */
    ck_assert(!has_path(&removed, "/outbox/1/7.1.dcm"));
    db_strings_free(&removed);
    db_close(d);
}
END_TEST

START_TEST(defer_sends_a_stable_series_back_to_receiving)
{
    char p[128];
    db *d = open_fresh(p, sizeof p);
    int64_t s = stable_series(d, "1.1", 1);
    ck_assert_int_eq(db_series_defer(d, s, 60), 0);
    db_series_info si;
    ck_assert_int_eq(db_series_get(d, "1.1", &si), 0);
    ck_assert_str_eq(si.state, "receiving");
    ck_assert_int_eq(si.stable_seconds, 60);
    ck_assert_int_eq(db_series_mark_stable(d, 60999, NULL, NULL), 0); /* last at 1000 */
    ck_assert_int_eq(db_series_mark_stable(d, 61000, NULL, NULL), 1);
    db_close(d);
}
END_TEST

typedef struct {
    int n, instances[8], superseded[8];
} job_rows;

static void on_job_row(void *ctx, const db_job_row *j)
{
    job_rows *r = ctx;
    if (r->n < 8) {
        r->instances[r->n] = j->instances;
        r->superseded[r->n] = j->superseded;
        r->n++;
    }
}

/* A job that instances overtook while it was checked for room does not go
 * back to wait: it ends as superseded, and the series' next job does all. */
START_TEST(deferred_job_overtaken_by_instances_ends_superseded)
{
    char p[128];
    db *d = open_fresh(p, sizeof p);
    int64_t a = job(d, stable_series(d, "1.1", 1), 0, "", 0);
    db_job j;
    ck_assert_int_eq(db_job_claim(d, "w", 3000, &j), 0);
    put_instance(d, "1.1", 2, 3100); /* the series is receiving again */
    int late = -1;
    ck_assert_int_eq(db_job_defer(d, a, 3200, 18000, DB_JOB_WAIT_SPACE ": needs 4 MB", &late), 0);
    ck_assert_int_eq(late, 1);
    ck_assert_int_eq(db_job_claim(d, "w", 20000, &j), LDCT_ENOTFOUND);
    job_rows r = {0};
    ck_assert_int_eq(db_jobs_list(d, 10, on_job_row, NULL, &r), 0);
    ck_assert_int_eq(r.n, 1);
    ck_assert_int_eq(r.superseded[0], 1); /* done, superseded */
    db_close(d);
}
END_TEST

/* A failed job has no derived instances; its count is the instances it
 * ran on, not the series' count after a late instance (it showed 2) or
 * after a resend of the same ones (counting by receipt time showed 0). */
START_TEST(failed_job_counts_the_instances_it_ran_on)
{
    char p[128];
    db *d = open_fresh(p, sizeof p);
    job(d, stable_series(d, "1.1", 1), 0, "", 0);
    db_job j;
    ck_assert_int_eq(db_job_claim(d, "w", 3000, &j), 0);
    ck_assert_int_eq(db_job_failed(d, j.id, 3500, "gap between slices", 0), 0);
    put_instance(d, "1.1", 1, 4000); /* the same slice resent */
    put_instance(d, "1.1", 2, 5000); /* the missing slice, later */
    job_rows r = {0};
    ck_assert_int_eq(db_jobs_list(d, 10, on_job_row, NULL, &r), 0);
    ck_assert_int_eq(r.n, 1);
    ck_assert_int_eq(r.instances[0], 1);
    db_close(d);
}
END_TEST

/* Where a retry would send: a failed job's own list (split), nothing for a
 * job that did not fail and has no dead sends. */
START_TEST(retry_destinations_of_a_failed_job)
{
    char p[128];
    db *d = open_fresh(p, sizeof p);
    int64_t a = job(d, stable_series(d, "1.1", 1), 0, "pacs,archive", 0);
    int64_t b = job(d, stable_series(d, "1.2", 1), 0, "pacs", 0);
    db_job j;
    ck_assert_int_eq(db_job_claim(d, "w", 3000, &j), 0);
    ck_assert_int_eq(j.id, a);
    ck_assert_int_eq(db_job_failed(d, a, 3500, "gap between slices", 0), 0);
    db_strings names = {0, NULL};
    ck_assert_int_eq(db_job_retry_destinations(d, a, &names), 0);
    ck_assert_int_eq(names.n, 2);
    ck_assert_str_eq(names.v[0], "archive");
    ck_assert_str_eq(names.v[1], "pacs");
    db_strings_free(&names);
    ck_assert_int_eq(db_job_retry_destinations(d, b, &names), 0);
    ck_assert_int_eq(names.n, 0);
    db_strings_free(&names);
    db_close(d);
}
END_TEST

START_TEST(late_instance_during_a_job_is_processed_again_under_new_uids)
{
    char p[128];
    db *d = open_fresh(p, sizeof p);
    int64_t s = stable_series(d, "1.1", 1);
    job(d, s, 0, "pacs", 0);
    db_job j;
    ck_assert_int_eq(db_job_claim(d, "w", 3000, &j), 0);
    const char *src[2] = {"1.1.1", "1.1.2"}, *paths[2] = {"/o/a.dcm", "/o/b.dcm"};
    char uids[2][DB_UID_LEN] = {"7.1", "7.2"};
    ck_assert_int_eq(db_job_derived_uids(d, j.id, 1, src, uids, NULL, "5.5.5", NULL), 0);
    put_instance(d, "1.1", 2, 20000); /* while job 1 runs */
    int late = 0;
    ck_assert_int_eq(db_job_done(d, j.id, 21000, 1, src, paths, &late), 0);
    ck_assert_int_eq(late, 1);
    seen v = {0};
    ck_assert_int_eq(db_jobs_list(d, 0, on_job, on_send, &v), 0);
    ck_assert_int_eq(v.sends, 0); /* the result that misses instance 2 is not sent */
    job_rows jr = {0};
    ck_assert_int_eq(db_jobs_list(d, 0, on_job_row, NULL, &jr), 0);
    ck_assert_int_eq(jr.n, 1);
    ck_assert_int_eq(jr.instances[0], 1); /* what it processed, not the series' 2 */
    ck_assert_int_eq(jr.superseded[0], 1);
    db_series_info si;
    ck_assert_int_eq(db_series_get(d, "1.1", &si), 0);
    ck_assert_str_eq(si.state, "receiving"); /* not "done": the late one is not lost */
    ck_assert_int_eq(db_series_mark_stable(d, 30000, NULL, NULL), 1);
    /* The same rule as job 1 (job()): only the instances differ. */
    db_job_spec again = {.series_id = s,
                         .rule = "r",
                         .action = "process",
                         .algorithm = "nlm3d",
                         .params = "search_radius=5",
                         .description_suffix = " [DN]",
                         .derived_series_uid = "9.9.2",
                         .destinations = "pacs",
                         .process = 1};
    int64_t id2;
    ck_assert_int_eq(db_job_create(d, &again, 31000, &id2), 0);
    ck_assert_int_ne(id2, j.id);
    db_job j2;
    ck_assert_int_eq(db_job_claim(d, "w", 32000, &j2), 0);
    ck_assert_str_eq(j2.derived_series_uid, "9.9.2");
    /* Two sources instead of one: every slice's neighbourhood and so its
     * pixels may differ, and an instance never changes under its UID. */
    char again_uids[2][DB_UID_LEN] = {"8.1", "8.2"}, series[DB_UID_LEN] = "";
    ck_assert_int_eq(db_job_derived_uids(d, j2.id, 2, src, again_uids, series, "5.5.5", NULL), 0);
    ck_assert_str_eq(again_uids[0], "8.1");
    ck_assert_str_eq(again_uids[1], "8.2");
    ck_assert_str_eq(series, "9.9.2");
    const char *paths2[2] = {"/o/c.dcm", "/o/d.dcm"};
    ck_assert_int_eq(db_job_done(d, j2.id, 33000, 2, src, paths2, &late), 0);
    ck_assert_int_eq(late, 0);
    memset(&v, 0, sizeof v);
    ck_assert_int_eq(db_jobs_list(d, 0, on_job, on_send, &v), 0);
    ck_assert_int_eq(v.sends, 1); /* the complete result is */
    ck_assert_int_eq(db_series_get(d, "1.1", &si), 0);
    ck_assert_str_eq(si.state, "done");
    db_close(d);
}
END_TEST

/* Finishes job `id` of the series with derived UIDs uids for src[0..n). */
static void finish_job(db *d, int64_t id, int n, const char *const *src, char (*uids)[DB_UID_LEN],
                       char *series)
{
    db_job j;
    ck_assert_int_eq(db_job_claim(d, "w", 3000, &j), 0);
    ck_assert_int_eq(j.id, id);
    const char *paths[2] = {"/o/a.dcm", "/o/b.dcm"};
    ck_assert_int_eq(db_job_derived_uids(d, id, n, src, uids, series, "5.5.5", NULL), 0);
    ck_assert_int_eq(db_job_done(d, id, 4000, n, src, paths, NULL), 0);
}

/* The series is sent again and a job of `algorithm` with `params` runs. */
static int64_t rerun_as(db *d, int64_t s, const char *algorithm, const char *params,
                        const char *suffix, const char *series_uid, int64_t t)
{
    put_instance(d, "1.1", 1, t);
    put_instance(d, "1.1", 2, t);
    ck_assert_int_ge(db_series_mark_stable(d, t + 10000, NULL, NULL), 1);
    db_job_spec spec = {.series_id = s,
                        .rule = "r",
                        .action = "process",
                        .algorithm = algorithm,
                        .params = params,
                        .description_suffix = suffix,
                        .derived_series_uid = series_uid,
                        .destinations = "pacs",
                        .process = 1};
    int64_t id = 0;
    ck_assert_int_eq(db_job_create(d, &spec, t + 11000, &id), 0);
    return id;
}

static int64_t rerun(db *d, int64_t s, const char *algorithm, const char *params,
                     const char *series_uid, int64_t t)
{
    return rerun_as(d, s, algorithm, params, " [DN]", series_uid, t);
}

/* Series 1.1 (instances 1.1.1, 1.1.2) processed by job 1 under job()'s
 * rule (nlm3d, search_radius=5, " [DN]"): derived UIDs 7.1 and 7.2, series
 * UID 9.9.1 into series. Returns the series id. */
static int64_t first_result(db *d, const char *const *src, char *series)
{
    int64_t s = stable_series(d, "1.1", 2);
    char u1[2][DB_UID_LEN] = {"7.1", "7.2"};
    finish_job(d, job(d, s, 0, "pacs", 0), 2, src, u1, series);
    return s;
}

START_TEST(a_rerun_reuses_uids_only_for_the_same_result)
{
    char p[128];
    db *d = open_fresh(p, sizeof p);
    const char *src[2] = {"1.1.1", "1.1.2"};
    char series[DB_UID_LEN];
    int64_t s = first_result(d, src, series); /* nlm3d, search_radius=5 */
    ck_assert_str_eq(series, "9.9.1");
    /* Another strength: other pixels, so other UIDs and another series. */
    char u2[2][DB_UID_LEN] = {"8.1", "8.2"};
    finish_job(d, rerun(d, s, "nlm3d", "search_radius=5 strength=3", "9.9.2", 20000), 2, src, u2,
               series);
    ck_assert_str_eq(u2[0], "8.1");
    ck_assert_str_eq(u2[1], "8.2");
    ck_assert_str_eq(series, "9.9.2");
    /* Back to the first rule: the first result again, under its UIDs. */
    char u3[2][DB_UID_LEN] = {"9.1", "9.2"};
    finish_job(d, rerun(d, s, "nlm3d", "search_radius=5", "9.9.3", 40000), 2, src, u3, series);
    ck_assert_str_eq(u3[0], "7.1");
    ck_assert_str_eq(u3[1], "7.2");
    ck_assert_str_eq(series, "9.9.1");
    /* fdk keys name output slices, not inputs: never reused across jobs. */
    const char *keys[2] = {"fdk-slice-1", "fdk-frame-of-reference"};
    char f1[2][DB_UID_LEN] = {"5.1", "5.2"}, f2[2][DB_UID_LEN] = {"6.1", "6.2"};
    finish_job(d, rerun(d, s, "fdk", "", "9.9.4", 60000), 2, keys, f1, series);
    finish_job(d, rerun(d, s, "fdk", "", "9.9.5", 80000), 2, keys, f2, series);
    ck_assert_str_eq(f2[0], "6.1");
    ck_assert_str_eq(series, "9.9.5");
    db_close(d);
}
END_TEST

/* A job that took an earlier job's UIDs (same result), then failed, and
 * runs again on more instances (a late one absorbed while it was pending)
 * must not keep them: its result now differs. */
START_TEST(a_retried_job_on_other_sources_drops_borrowed_uids)
{
    char p[128];
    db *d = open_fresh(p, sizeof p);
    const char *src[3] = {"1.1.1", "1.1.2", "1.1.3"};
    char series[DB_UID_LEN];
    int64_t s = first_result(d, src, series);
    int64_t b = rerun(d, s, "nlm3d", "search_radius=5", "9.9.2", 20000);
    db_job j;
    ck_assert_int_eq(db_job_claim(d, "w", 31000, &j), 0);
    char u2[2][DB_UID_LEN] = {"8.1", "8.2"};
    int64_t dated = 1;
    ck_assert_int_eq(db_job_derived_uids(d, b, 2, src, u2, series, "5.5.5", &dated), 0);
    ck_assert_str_eq(u2[0], "7.1"); /* borrowed: the same result */
    ck_assert_str_eq(series, "9.9.1");
    ck_assert_int_eq(dated, 3000); /* dated as job 1 (claimed at 3000) */
    ck_assert_int_eq(db_job_failed(d, b, 32000, "disk full", 1), 0);
    put_instance(d, "1.1", 3, 33000); /* absorbed by the pending job */
    ck_assert_int_eq(db_job_claim(d, "w", 34000, &j), 0);
    ck_assert_int_eq(j.id, b);
    char u3[3][DB_UID_LEN] = {"9.1", "9.2", "9.3"};
    ck_assert_int_eq(db_job_derived_uids(d, b, 3, src, u3, series, "5.5.5", &dated), 0);
    ck_assert_str_eq(u3[0], "9.1");
    ck_assert_str_eq(u3[2], "9.3");
    ck_assert_str_eq(series, "5.5.5"); /* the borrowed series UID is replaced */
    ck_assert_int_eq(dated, 34000);
    db_close(d);
}
END_TEST

/* Another description suffix: other content (SeriesDescription), other UIDs. */
START_TEST(another_suffix_is_another_result)
{
    char p[128];
    db *d = open_fresh(p, sizeof p);
    const char *src[2] = {"1.1.1", "1.1.2"};
    char series[DB_UID_LEN];
    int64_t s = first_result(d, src, series);
    int64_t id = rerun_as(d, s, "nlm3d", "search_radius=5", " [NLM]", "9.9.2", 20000);
    char u2[2][DB_UID_LEN] = {"8.1", "8.2"};
    finish_job(d, id, 2, src, u2, series);
    ck_assert_str_eq(u2[0], "8.1");
    ck_assert_str_eq(series, "9.9.2");
    db_close(d);
}
END_TEST

START_TEST(series_stable_again_before_its_job_ran_keeps_one_job)
{
    char p[128];
    db *d = open_fresh(p, sizeof p);
    int64_t s = stable_series(d, "1.1", 1);
    int64_t first = job(d, s, 0, "", 0);
    put_instance(d, "1.1", 2, 20000);
    ck_assert_int_eq(db_series_mark_stable(d, 30000, NULL, NULL), 1);
    db_job_spec again = {.series_id = s,
                         .rule = "r",
                         .action = "process",
                         .algorithm = "nlm3d",
                         .params = "",
                         .derived_series_uid = "9.9.2",
                         .destinations = "",
                         .process = 1};
    int64_t id2 = 0;
    ck_assert_int_eq(db_job_create(d, &again, 31000, &id2), 0);
    ck_assert_int_eq(id2, first);
    db_queue_totals t;
    ck_assert_int_eq(db_queue_totals_get(d, &t), 0);
    ck_assert_int_eq(t.jobs_pending, 1);
    db_close(d);
}
END_TEST

START_TEST(resend_before_removal_keeps_the_series)
{
    char p[128];
    db *d = open_fresh(p, sizeof p);
    int64_t s = stable_series(d, "1.1", 2);
    ck_assert_int_eq(db_series_set_state(d, s, "unmatched"), 0);
    put_instance(d, "1.1", 1, 50000); /* a resend reopens it */
    db_strings removed;
    ck_assert_int_eq(db_series_remove(d, s, &removed), LDCT_ENOTFOUND);
    ck_assert_int_eq(removed.n, 0);
    db_series_info si;
    ck_assert_int_eq(db_series_get(d, "1.1", &si), 0);
    ck_assert_str_eq(si.state, "receiving");
    ck_assert_int_eq(si.instances, 2);
    db_close(d);
}
END_TEST

/* ldct status breaks the series down by state: every state is counted and
 * the counts add up to the total. */
START_TEST(totals_count_every_series_state)
{
    char p[128];
    db *d = open_fresh(p, sizeof p);
    ck_assert_int_eq(db_series_set_state(d, stable_series(d, "1.1", 1), "unmatched"), 0);
    ck_assert_int_eq(db_series_set_state(d, stable_series(d, "1.2", 1), "discarded"), 0);
    job(d, stable_series(d, "1.3", 1), 0, "", 0);
    stable_series(d, "1.4", 2);
    put_instance(d, "1.5", 1, 20000);
    db_totals t;
    ck_assert_int_eq(db_totals_get(d, &t), 0);
    ck_assert_int_eq(t.series, 5);
    const int64_t want[DB_SERIES_NSTATES] = {1, 1, 1, 0, 0, 1, 1, 0};
    int64_t sum = 0;
    for (int i = 0; i < DB_SERIES_NSTATES; i++) {
        ck_assert_msg(t.by_state[i] == want[i], "%s: %lld", db_series_states[i],
                      (long long)t.by_state[i]);
        sum += t.by_state[i];
    }
    ck_assert_int_eq(sum, t.series);
    ck_assert_int_eq(t.receiving, 1);
    ck_assert_int_eq(t.stable, 1);
    ck_assert_int_eq(t.instances, 6);
    db_close(d);
}
END_TEST

/* ---- progress of running jobs ----------------------------------------------- */

typedef struct {
    int n;
    int64_t id[8];
    char state[8][16], stage[8][32], ran[8][16];
    double fraction[8];
    int64_t remaining[8], updated[8];
} progress_rows;

static void on_progress_row(void *ctx, const db_job_row *j)
{
    progress_rows *r = ctx;
    if (r->n < 8) {
        r->id[r->n] = j->id;
        snprintf(r->state[r->n], sizeof r->state[0], "%s", j->state);
        snprintf(r->stage[r->n], sizeof r->stage[0], "%s", j->progress_stage);
        snprintf(r->ran[r->n], sizeof r->ran[0], "%s", j->ran_algorithm);
        r->fraction[r->n] = j->progress_fraction;
        r->remaining[r->n] = j->progress_remaining_ms;
        r->updated[r->n] = j->progress_updated_ms;
        r->n++;
    }
}

/* The listing, newest job first (at most 8). */
static progress_rows progress_list(db *d)
{
    progress_rows r = {0};
    ck_assert_int_eq(db_jobs_list(d, 0, on_progress_row, NULL, &r), 0);
    return r;
}

/* Row k shows no progress. */
static void assert_no_progress(const progress_rows *r, int k)
{
    ck_assert_str_eq(r->stage[k], "");
    ck_assert(r->fraction[k] < 0);
    ck_assert_int_lt(r->remaining[k], 0);
    ck_assert_int_eq(r->updated[k], 0);
}

START_TEST(a_running_jobs_progress_is_listed_and_replaced)
{
    char p[128];
    db *d = open_fresh(p, sizeof p);
    int64_t a = job(d, stable_series(d, "1.1", 1), 0, "", 0);
    db_job j;
    ck_assert_int_eq(db_job_claim(d, "w", 3000, &j), 0);
    progress_rows r = progress_list(d);
    ck_assert_int_eq(r.n, 1);
    assert_no_progress(&r, 0); /* running, nothing written yet */
    ck_assert_int_eq(db_job_progress_put(d, a, "filtering", 0.45, 150000, 4000), 0);
    r = progress_list(d);
    ck_assert_str_eq(r.stage[0], "filtering");
    ck_assert_double_eq_tol(r.fraction[0], 0.45, 1e-9);
    ck_assert_int_eq(r.remaining[0], 150000);
    ck_assert_int_eq(r.updated[0], 4000);
    /* Replaced, not added: unknowns stay unknown. */
    ck_assert_int_eq(db_job_progress_put(d, a, "writing", -1, -1, 5000), 0);
    r = progress_list(d);
    ck_assert_int_eq(r.n, 1);
    ck_assert_str_eq(r.stage[0], "writing");
    ck_assert(r.fraction[0] < 0);
    ck_assert_int_lt(r.remaining[0], 0);
    ck_assert_int_eq(r.updated[0], 5000);
    /* A long stage is cut to 15 characters, NaN is unknown, more than all is all. */
    ck_assert_int_eq(db_job_progress_put(d, a, "reconstructing-slab-7", NAN, 10, 5500), 0);
    r = progress_list(d);
    ck_assert_str_eq(r.stage[0], "reconstructing-");
    ck_assert(r.fraction[0] < 0);
    ck_assert_int_eq(db_job_progress_put(d, a, "filtering", 1.5, 0, 6000), 0);
    r = progress_list(d);
    ck_assert_double_eq(r.fraction[0], 1.0);
    ck_assert_int_eq(r.remaining[0], 0);
    db_close(d);
}
END_TEST

/* Only a running job shows progress, and only what was written since this
 * attempt started: an earlier attempt's row (a retry) is stale. */
START_TEST(progress_shows_only_while_running_and_only_from_this_attempt)
{
    char p[128];
    db *d = open_fresh(p, sizeof p);
    int64_t a = job(d, stable_series(d, "1.1", 1), 0, "", 0);
    db_job j;
    ck_assert_int_eq(db_job_claim(d, "w", 3000, &j), 0);
    ck_assert_int_eq(db_job_progress_put(d, a, "reading", 0.1, -1, 2999), 0);
    progress_rows r = progress_list(d);
    assert_no_progress(&r, 0); /* older than the start */
    ck_assert_int_eq(db_job_progress_put(d, a, "reading", 0.1, -1, 3000), 0);
    r = progress_list(d);
    ck_assert_str_eq(r.stage[0], "reading"); /* as old as the start counts */
    ck_assert_int_eq(db_job_failed(d, a, 3500, "GPU lost", 1), 0);
    r = progress_list(d);
    ck_assert_str_eq(r.state[0], "pending");
    assert_no_progress(&r, 0);
    ck_assert_int_eq(db_job_claim(d, "w", 6000, &j), 0);
    ck_assert_int_eq(j.id, a);
    r = progress_list(d);
    ck_assert_str_eq(r.state[0], "running");
    assert_no_progress(&r, 0); /* the row of the first attempt */
    ck_assert_int_eq(db_job_progress_put(d, a, "filtering", 0.5, 20000, 6500), 0);
    r = progress_list(d);
    ck_assert_str_eq(r.stage[0], "filtering");
    const char *src[1] = {"1.1.1"}, *paths[1] = {"/outbox/1/7.1.dcm"};
    char uids[1][DB_UID_LEN] = {"7.1"};
    ck_assert_int_eq(db_job_derived_uids(d, a, 1, src, uids, NULL, "5.5.5", NULL), 0);
    ck_assert_int_eq(db_job_done(d, a, 7000, 1, src, paths, NULL), 0);
    r = progress_list(d);
    ck_assert_str_eq(r.state[0], "done");
    assert_no_progress(&r, 0);
    db_close(d);
}
END_TEST

/* db_jobs_running (status): only running jobs, longest running first, with
 * their progress, at most `limit`. */
START_TEST(running_jobs_are_listed_longest_running_first)
{
    char p[128];
    db *d = open_fresh(p, sizeof p);
    int64_t a = job(d, stable_series(d, "1.1", 1), 0, "", 0);
    int64_t b = job(d, stable_series(d, "1.2", 1), 0, "", 0);
    job(d, stable_series(d, "1.3", 1), 0, "", 0); /* stays pending */
    db_job j;
    ck_assert_int_eq(db_job_claim(d, "w0", 3000, &j), 0);
    ck_assert_int_eq(j.id, a);
    ck_assert_int_eq(db_job_claim(d, "w1", 3500, &j), 0);
    ck_assert_int_eq(j.id, b);
    ck_assert_int_eq(db_job_progress_put(d, b, "filtering", 0.25, 4000, 3600), 0);
    progress_rows r = {0};
    ck_assert_int_eq(db_jobs_running(d, 0, on_progress_row, &r), 0);
    ck_assert_int_eq(r.n, 2);
    ck_assert_int_eq(r.id[0], a);
    assert_no_progress(&r, 0);
    ck_assert_int_eq(r.id[1], b);
    ck_assert_str_eq(r.stage[1], "filtering");
    ck_assert_double_eq_tol(r.fraction[1], 0.25, 1e-9);
    ck_assert_int_eq(r.remaining[1], 4000);
    r = (progress_rows){0};
    ck_assert_int_eq(db_jobs_running(d, 1, on_progress_row, &r), 0);
    ck_assert_int_eq(r.n, 1);
    ck_assert_int_eq(r.id[0], a);
    ck_assert_int_eq(db_job_failed(d, a, 4000, "bad input", 0), 0);
    r = (progress_rows){0};
    ck_assert_int_eq(db_jobs_running(d, 0, on_progress_row, &r), 0);
    ck_assert_int_eq(r.n, 1);
    ck_assert_int_eq(r.id[0], b);
    db_close(d);
}
END_TEST

/* A read transaction (a status snapshot) sees one state of the file: a
 * claim by another connection between its totals and its running list
 * shows in neither, and shows in both after it ends. */
START_TEST(a_read_transaction_sees_one_state_of_the_queue)
{
    char p[128];
    db *d = open_fresh(p, sizeof p);
    job(d, stable_series(d, "1.1", 1), 0, "", 0);
    job(d, stable_series(d, "1.2", 1), 0, "", 0);
    db_job j;
    ck_assert_int_eq(db_job_claim(d, "w0", 3000, &j), 0);
    db *r;
    ck_assert_int_eq(db_open(p, 1, &r), 0);
    ck_assert_int_eq(db_read_begin(r), 0);
    db_queue_totals q;
    ck_assert_int_eq(db_queue_totals_get(r, &q), 0);
    ck_assert_int_eq(q.jobs_running, 1);
    ck_assert_int_eq(db_job_claim(d, "w1", 3500, &j), 0);
    progress_rows rows = {0};
    ck_assert_int_eq(db_jobs_running(r, 0, on_progress_row, &rows), 0);
    ck_assert_int_eq(rows.n, 1);
    db_read_end(r);
    rows = (progress_rows){0};
    ck_assert_int_eq(db_jobs_running(r, 0, on_progress_row, &rows), 0);
    ck_assert_int_eq(rows.n, 2);
    ck_assert_int_eq(db_queue_totals_get(r, &q), 0);
    ck_assert_int_eq(q.jobs_running, 2);
    db_close(r);
    db_close(d);
}
END_TEST

/* A worker's claim committed by another connection at the moment
 * status_read starts its list of running jobs (a SQLite trace hook on the
 * reader's connection): rc of the claim, and whether it ran. */
typedef struct claim_midway {
    db *writer;
    int ran, rc;
} claim_midway;

static int claim_before_the_list(unsigned type, void *ctx, void *stmt, void *sql)
{
    claim_midway *c = ctx;
    (void)type;
    (void)stmt;
    if (!c->ran && strstr((const char *)sql, "j.state = 'running'")) {
        db_job j;
        c->ran = 1;
        c->rc = db_job_claim(c->writer, "w1", 3500, &j);
    }
    return 0;
}

/* status_read takes its totals and its running jobs from one snapshot: a
 * job that starts between the two reads is in neither, and the next read
 * has it in both. */
START_TEST(status_read_agrees_with_itself_when_a_job_starts_midway)
{
    char p[128];
    db *d = open_fresh(p, sizeof p);
    job(d, stable_series(d, "1.1", 1), 0, "", 0);
    job(d, stable_series(d, "1.2", 1), 0, "", 0);
    db_job j;
    ck_assert_int_eq(db_job_claim(d, "w0", 3000, &j), 0);
    db *r;
    ck_assert_int_eq(db_open(p, 1, &r), 0);
    claim_midway c = {.writer = d};
    sqlite3_trace_v2(r->h, SQLITE_TRACE_STMT, claim_before_the_list, &c);
    status_snapshot s;
    ck_assert_int_eq(status_read(r, 1, &s), 0);
    ck_assert_int_eq(c.ran, 1);
    ck_assert_int_eq(c.rc, 0);
    ck_assert_int_eq(s.q.jobs_running, 1);
    ck_assert_int_eq(s.nrunning, 1);
    sqlite3_trace_v2(r->h, 0, NULL, NULL);
    ck_assert_int_eq(status_read(r, 1, &s), 0);
    ck_assert_int_eq(s.q.jobs_running, 2);
    ck_assert_int_eq(s.nrunning, 2);
    db_close(r);
    db_close(d);
}
END_TEST

/* clear(id) removes one job's progress, clear(-1) every job's, and so does
 * db_recover at the start: a job claimed again, even on a clock set back,
 * shows nothing from the last run. */
START_TEST(progress_is_cleared_per_job_for_all_and_at_recovery)
{
    char p[128];
    db *d = open_fresh(p, sizeof p);
    int64_t a = job(d, stable_series(d, "1.1", 1), 0, "", 0);
    int64_t b = job(d, stable_series(d, "1.2", 1), 0, "", 0);
    db_job j;
    ck_assert_int_eq(db_job_claim(d, "w", 3000, &j), 0);
    ck_assert_int_eq(db_job_claim(d, "w", 3000, &j), 0);
    ck_assert_int_eq(db_job_progress_put(d, a, "filtering", 0.2, 9000, 4000), 0);
    ck_assert_int_eq(db_job_progress_put(d, b, "reading", 0.7, 1000, 4000), 0);
    ck_assert_int_eq(db_job_progress_clear(d, a), 0);
    progress_rows r = progress_list(d); /* b, a */
    ck_assert_int_eq(r.id[1], a);
    assert_no_progress(&r, 1);
    ck_assert_str_eq(r.stage[0], "reading");
    ck_assert_int_eq(db_job_progress_put(d, a, "filtering", 0.3, 8000, 4500), 0);
    ck_assert_int_eq(db_job_progress_clear(d, -1), 0);
    r = progress_list(d);
    assert_no_progress(&r, 0);
    assert_no_progress(&r, 1);
    ck_assert_int_eq(db_job_progress_clear(d, -1), 0); /* nothing to clear is no error */
    ck_assert_int_eq(db_job_progress_put(d, a, "filtering", 0.3, 8000, 5000), 0);
    int jobs = 0;
    ck_assert_int_eq(db_recover(d, 3, 6000, &jobs, NULL), 0);
    ck_assert_int_eq(jobs, 2);
    ck_assert_int_eq(db_job_claim(d, "w", 4000, &j), 0); /* the clock went back */
    r = progress_list(d);
    for (int k = 0; k < r.n; k++)
        assert_no_progress(&r, k);
    db_close(d);
}
END_TEST

/* `ldct` next to an ldctd of schema 8 (no job_progress): the jobs are
 * listed without progress; that ldctd, upgraded, writes it again. */
START_TEST(a_schema_8_database_lists_jobs_without_progress)
{
    char p[128];
    db *d = open_fresh(p, sizeof p);
    int64_t a = job(d, stable_series(d, "1.1", 1), 0, "", 0);
    db_job j;
    ck_assert_int_eq(db_job_claim(d, "w", 3000, &j), 0);
    ck_assert_int_eq(db_job_progress_put(d, a, "filtering", 0.5, 1000, 4000), 0);
    db_close(d);
    rewrite_db(p, "DROP TABLE job_progress; ALTER TABLE jobs DROP COLUMN ran_algorithm;"
                  " PRAGMA user_version = 8");
    ck_assert_int_eq(db_open(p, 1, &d), 0);
    progress_rows r = progress_list(d);
    ck_assert_int_eq(r.n, 1);
    ck_assert_int_eq(r.id[0], a);
    ck_assert_str_eq(r.state[0], "running");
    assert_no_progress(&r, 0);
    db_close(d);
    ck_assert_int_eq(db_open(p, 0, &d), 0);
    ck_assert_int_eq(db_job_progress_put(d, a, "writing", 0.9, 100, 5000), 0);
    r = progress_list(d);
    ck_assert_str_eq(r.stage[0], "writing");
    db_close(d);
}
END_TEST

/* What a run resolved auto to is listed per job (empty before a run got
 * that far), and a schema-9 database (no column) lists "" rather than
 * failing. */
START_TEST(the_algorithm_a_run_resolved_is_listed_per_job)
{
    char p[128];
    db *d = open_fresh(p, sizeof p);
    int64_t a = job(d, stable_series(d, "1.1", 1), 0, "", 0);
    int64_t b = job(d, stable_series(d, "1.2", 1), 0, "", 0);
    ck_assert_int_eq(db_job_ran_put(d, a, "adaptive4d"), 0);
    progress_rows r = progress_list(d);
    ck_assert_int_eq(r.n, 2);
    ck_assert_int_eq(r.id[0], b);
    ck_assert_str_eq(r.ran[0], "");
    ck_assert_str_eq(r.ran[1], "adaptive4d");
    ck_assert_int_eq(db_job_ran_put(d, a, "nlm3d"), 0); /* a later run replaces it */
    r = progress_list(d);
    ck_assert_str_eq(r.ran[1], "nlm3d");
    db_close(d);
    rewrite_db(p, "ALTER TABLE jobs DROP COLUMN ran_algorithm; PRAGMA user_version = 9");
    ck_assert_int_eq(db_open(p, 1, &d), 0);
    r = progress_list(d);
    ck_assert_int_eq(r.n, 2);
    ck_assert_str_eq(r.ran[1], "");
    db_close(d);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("queue");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, claims_by_priority_then_age);
    tcase_add_test(tc, job_needs_a_stable_series_and_queues_it);
    tcase_add_test(tc, derived_uids_are_made_once_per_job);
    tcase_add_test(tc, done_creates_one_send_per_destination_and_both_sends_the_original);
    tcase_add_test(tc, series_delivery_tells_a_waiting_send_from_one_in_flight);
    tcase_add_test(tc, one_send_in_flight_per_destination);
    tcase_add_test(tc, failing_destinations_leave_a_sender_for_the_others);
    tcase_add_test(tc, destination_totals_count_open_sends_by_state);
    tcase_add_test(tc, failed_send_waits_for_its_backoff_then_dies);
    tcase_add_test(tc, interrupted_send_is_pending_again_without_an_attempt);
    tcase_add_test(tc, backoff_grows_to_its_cap_then_gives_up);
    tcase_add_test(tc, recover_requeues_running_work_and_fails_repeated_crashers);
    tcase_add_test(tc, failure_with_retry_goes_back_to_pending);
    tcase_add_test(tc, deferred_job_steps_aside_until_its_time);
    tcase_add_test(tc, deferred_job_overtaken_by_instances_ends_superseded);
    tcase_add_test(tc, unmatched_series_expire_and_are_removed);
    tcase_add_test(tc, delivered_series_expire_with_their_outbox_files_but_not_before);
    tcase_add_test(tc, results_folder_output_stays_when_its_series_expires);
    tcase_add_test(tc, defer_sends_a_stable_series_back_to_receiving);
    tcase_add_test(tc, late_instance_during_a_job_is_processed_again_under_new_uids);
    tcase_add_test(tc, failed_job_counts_the_instances_it_ran_on);
    tcase_add_test(tc, retry_destinations_of_a_failed_job);
    tcase_add_test(tc, retry_can_send_dead_sends_to_another_destination);
    tcase_add_test(tc, a_rerun_reuses_uids_only_for_the_same_result);
    tcase_add_test(tc, a_retried_job_on_other_sources_drops_borrowed_uids);
    tcase_add_test(tc, another_suffix_is_another_result);
    tcase_add_test(tc, series_stable_again_before_its_job_ran_keeps_one_job);
    tcase_add_test(tc, resend_before_removal_keeps_the_series);
    tcase_add_test(tc, totals_count_every_series_state);
    tcase_add_test(tc, a_clock_step_moves_the_waits_with_it);
    tcase_add_test(tc, waits_from_a_schema_5_database_move_with_a_step);
    tcase_add_test(tc, a_development_schema_5_is_repaired);
    tcase_add_test(tc, removed_series_are_purged_after_their_history);
    tcase_add_test(tc, a_long_history_is_purged_in_batches);
    tcase_add_test(tc, a_running_jobs_progress_is_listed_and_replaced);
    tcase_add_test(tc, progress_shows_only_while_running_and_only_from_this_attempt);
    tcase_add_test(tc, progress_is_cleared_per_job_for_all_and_at_recovery);
    tcase_add_test(tc, running_jobs_are_listed_longest_running_first);
    tcase_add_test(tc, a_read_transaction_sees_one_state_of_the_queue);
    tcase_add_test(tc, status_read_agrees_with_itself_when_a_job_starts_midway);
    tcase_add_test(tc, a_schema_8_database_lists_jobs_without_progress);
    tcase_add_test(tc, the_algorithm_a_run_resolved_is_listed_per_job);
    tcase_add_test(tc, retry_to_a_destination_moves_no_send_it_has_already);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
