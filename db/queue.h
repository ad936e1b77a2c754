/* db/queue.h: what a stable series turns into: its decision (unmatched,
 * discarded, deferred), jobs (claimed by workers, with the derived UIDs fixed
 * once per job), derived instances, and sends (one row per destination and
 * per what is sent, retried with backoff until done or dead).
 *
 * State machine (every transition is one transaction):
 *   series  receiving -> stable -> queued -> done | failed      (process, both)
 *                                  stable -> done               (route)
 *                                  stable -> unmatched | discarded -> removed
 *   job     pending -> running -> done | failed; running -> pending (crash, retry)
 *   send    pending -> sending -> done | pending (backoff) | dead; sending -> pending (crash)
 * Threading as db.h: one handle per thread.
 */
#ifndef LDCT_DB_QUEUE_H
#define LDCT_DB_QUEUE_H

#include "db/db.h"

#include <stdint.h>

#define DB_UID_LEN 65
#define DB_DEST_LIST_LEN 600 /* comma-separated destination names */

/* A list of strings owned by the list; free with db_strings_free. */
typedef struct db_strings {
    int n;
    char **v;
} db_strings;
void db_strings_free(db_strings *s);

/* ---- series --------------------------------------------------------------- */

typedef struct db_series_info {
    int64_t id;
    char study_uid[DB_UID_LEN], series_uid[DB_UID_LEN], modality[17];
    char calling_ae[17], called_ae[17], state[16];
    int instances, stable_seconds;
    int64_t last_received_ms, stable_ms;
} db_series_info;

/* Looks a series up by UID; LDCT_ENOTFOUND if absent. */
int db_series_get(db *d, const char *series_uid, db_series_info *out);

/* Spool paths of the series' instances (ordered by path); free with db_strings_free. */
int db_series_paths(db *d, int64_t series_id, db_strings *paths);

/* UIDs of the series in state stable (not yet decided), oldest first. */
int db_series_stable_uids(db *d, db_strings *uids);

/* A stable series whose rule asks for a longer quiet time goes back to
 * receiving with that stable_seconds (no-op unless the series is stable). */
int db_series_defer(db *d, int64_t series_id, int stable_seconds);

/* stable -> "unmatched" or "discarded" (no-op from any other state). */
int db_series_set_state(db *d, int64_t series_id, const char *state);

/* Series to remove: unmatched and discarded series that became stable at or
 * before before_ms, and done series whose every job is done and every send
 * delivered, the last at or before before_ms (series with a failed job or
 * a dead send stay for inspection and `ldct retry`). cb for each, at most
 * 100 per call (after the query; strings valid during the call). */
typedef void (*db_expired_cb)(void *ctx, int64_t series_id, const char *series_uid,
                              const char *state);
int db_series_expired(db *d, int64_t before_ms, db_expired_cb cb, void *ctx);

/* Marks an unmatched, discarded or delivered series (see above) removed and
 * deletes its instance rows, in one transaction; the paths of the deleted
 * rows, and of its derived instances in the outbox (jobs with
 * destinations; their rows keep the UIDs, path emptied), go into *paths
 * (free with db_strings_free) for the caller to unlink after the commit.
 * LDCT_ENOTFOUND when the series no longer qualifies (a resend reopened it,
 * a send was requeued): nothing is removed. */
int db_series_remove(db *d, int64_t series_id, db_strings *paths);

/* ---- jobs ----------------------------------------------------------------- */

typedef struct db_job_spec {
    int64_t series_id;
    const char *rule, *action, *algorithm, *params;
    const char *description_suffix;
    int priority;
    const char *derived_series_uid; /* NULL when nothing is processed (route) */
    const char *destinations;       /* comma-separated names; "" = results folder */
    int send_original;              /* both, route: the original goes out now */
    int process;                    /* 0 (route): the job is done at once */
} db_job_spec;

/* Creates the job of a stable series (and, with send_original, its original
 * sends), moving the series to queued (process) or done (route), in one
 * transaction. LDCT_ENOTFOUND unless the series is stable. */
int db_job_create(db *d, const db_job_spec *spec, int64_t now_ms, int64_t *job_id);

/* A claimed job: everything a worker needs to run it. */
typedef struct db_job {
    int64_t id, series_id;
    char series_uid[DB_UID_LEN], study_uid[DB_UID_LEN];
    char rule[65], action[16], algorithm[16], params[1024], derived_series_uid[DB_UID_LEN];
    char destinations[DB_DEST_LIST_LEN], description_suffix[65];
    int priority, attempts; /* attempts counts this one */
    int waited;             /* it was waiting for disk space (db_job_defer) */
    int retried;            /* ldct retry queued it again (db_job_retry) */
} db_job;

/* How the note of a job waiting for disk space starts (db_job_defer). */
#define DB_JOB_WAIT_SPACE "waiting for disk space"
/* The note of a failed job that ldct retry queued again, until it ends. */
#define DB_JOB_RETRIED "queued again by ldct retry"

/* Claims the pending job with the highest priority, then the oldest, for
 * `worker` (pending -> running, attempts + 1) in one transaction; a job
 * deferred until later (db_job_defer) is skipped until then.
 * LDCT_ENOTFOUND when there is none. */
int db_job_claim(db *d, const char *worker, int64_t now_ms, db_job *out);

/* Derived SOP Instance UIDs of a job, made once: for each of the n source
 * SOP Instance UIDs, uids[i] holds a fresh candidate on input and, on
 * output, the UID stored for that source (the candidate the first time,
 * the stored one when the job is redone on the same sources). A job whose
 * result is an earlier job's result (same series, algorithm, parameters,
 * description suffix and exactly the same sources; not fdk) takes that
 * job's UIDs and derived series UID, so a series sent twice is not stored
 * twice; any other job has fresh UIDs (a redone job whose sources changed
 * forgets its stored ones, and a borrowed series UID is replaced by
 * fresh_series), since an instance's content never changes under its UID
 * (DICOM). series_uid (DB_UID_LEN, may be NULL) receives the job's derived
 * series UID; *dated_ms (may be NULL; keeps its value for a job never
 * started) the time that dates the series: the start of the job whose UIDs
 * are used, so a reused series is the same to the second. One transaction. */
int db_job_derived_uids(db *d, int64_t job_id, int n, const char *const *source_sops,
                        char (*uids)[DB_UID_LEN], char *series_uid, const char *fresh_series,
                        int64_t *dated_ms);

/* The note a superseded job keeps in last_error (state done). */
#define DB_JOB_SUPERSEDED "not sent: instances arrived while it ran; a later job processed them all"

/* *shared = 1 when the job's derived series UID is another job's too (it
 * took an earlier job's UIDs for the same result). */
int db_job_series_shared(db *d, int64_t job_id, int *shared);

/* Finishes a job: records the derived files' paths, job done; then, unless
 * instances reached the series while it ran (*superseded = 1: its next job
 * processes them all and delivers that result), one derived send per
 * destination and the series done. superseded may be NULL. One
 * transaction. */
int db_job_done(db *d, int64_t job_id, int64_t now_ms, int n, const char *const *source_sops,
                const char *const *paths, int *superseded);

/* Records a failure. retry != 0: back to pending (the worker gives up the
 * claim); else failed, and the series failed. */
int db_job_failed(db *d, int64_t job_id, int64_t now_ms, const char *error, int retry);

/* Gives a running job back without counting its attempt (it could not
 * start: no room for its result yet), not to be claimed before
 * not_before_ms; note (starting DB_JOB_WAIT_SPACE) says why, and ldct
 * jobs shows it. A job that instances overtook meanwhile (see
 * db_job_done) ends as superseded instead (*superseded = 1; may be NULL):
 * the series' next job processes them all. One transaction. */
int db_job_defer(db *d, int64_t job_id, int64_t now_ms, int64_t not_before_ms, const char *note,
                 int *superseded);

/* The progress of a running job, written by its worker while it runs: stage
 * ("reading", "filtering", "reconstructing", "writing"; at most 15 chars,
 * longer is cut), fraction of that stage done (0..1, more counts as 1; < 0
 * or NaN unknown), remaining_ms (estimate of the stage's remaining
 * time; < 0 unknown), as of now_ms. One row per job, replaced. Not needed
 * for correctness: the caller may ignore a failure (0 or a db error). */
int db_job_progress_put(db *d, int64_t job_id, const char *stage, double fraction,
                        int64_t remaining_ms, int64_t now_ms);

/* Removes a job's progress (job_id < 0: every job's, at daemon start;
 * db_recover does that too). 0 or a db error, which the caller may ignore. */
int db_job_progress_clear(db *d, int64_t job_id);

/* `ldct retry`: a failed job goes back to pending (attempts 0) and its dead
 * sends to pending (attempts 0, due now). With `to` (a destination renamed
 * or replaced in the configuration) dead sends move there first: those to
 * `from` only when it is set, one of each kind (derived, original), and
 * none of a kind that `to` has a send of already, so no PACS gets a series
 * twice and each dead send to another PACS keeps the record of where it
 * did not arrive; the rest are retried to their own destination.
 * LDCT_ENOTFOUND if there is no such job. One transaction. */
typedef struct db_retry {
    const char *to, *from;    /* NULL: no move / from any destination */
    int changed, moved, kept; /* out: rows requeued; sends moved; not moved */
} db_retry;
int db_job_retry_with(db *d, int64_t job_id, db_retry *r);
/* The same without `from`; *changed = rows requeued. */
int db_job_retry(db *d, int64_t job_id, const char *to, int *changed);
/* Where a retry of job_id without --to sends: its dead sends'
 * destinations and, when the job failed, those it names (the sends its
 * next run makes); each once, sorted. */
int db_job_retry_destinations(db *d, int64_t job_id, db_strings *names);

/* At start-up: running jobs and sending sends go back to pending; a job
 * that was running `max_attempts` times already fails instead (it keeps
 * stopping the daemon); every job's progress goes (no job runs yet).
 * Counts into *jobs and *sends (may be NULL). One transaction. */
int db_recover(db *d, int max_attempts, int64_t now_ms, int *jobs, int *sends);

/* Deletes the rows of series removed by retention (state 'removed') whose
 * last instance arrived before before_ms, with their instances, jobs,
 * sends and derived UIDs, so the database does not grow for ever: at most
 * 200 series per call (call it again while *n is 200). A series sent
 * again after that is a new series (new derived UIDs). *n = series
 * deleted. One transaction, none when nothing is due. */
int db_series_purge(db *d, int64_t before_ms, int *n);

/* The wall clock stepped by delta_ms while the daemon ran (NTP, a restored
 * VM), noticed at now_ms (on the new clock) within about a second: the
 * waits measured on it move with it, so that the quiet of a receiving
 * series, a deferred job's wait and a send's retry delay keep their length
 * (a step back would stall them, a step forward end them early). A series
 * that received an instance since the step (its time within 1.5 s of now)
 * is on the new clock already and stays; a job or send that failed in that
 * second moves too (its wait is off by the step). Past events (received,
 * finished) keep their times. One transaction. */
int db_clock_stepped(db *d, int64_t delta_ms, int64_t now_ms);

/* At start-up, for a step back while the daemon was stopped: a receiving
 * series last heard of in the future counts as heard of now, a job
 * deferred more than an hour ahead (deferrals are 15 s) and a send due
 * more than 8 days ahead (retry delays are at most 7) go now. One transaction. */
int db_clock_clamp(db *d, int64_t now_ms);

/* A stop that cuts work off (ldctd ends with job or send threads still
 * running): the running jobs and sends go back to pending, the run not
 * counted as an attempt, so that job_max_attempts and a send's retries
 * count failures and crashes, not restarts, and the next start has
 * nothing to recover. Their counts into *jobs and *sends. One
 * transaction. */
int db_stop_cut_off(db *d, int64_t now_ms, int *jobs, int *sends);

/* Records what the job's run resolved its algorithm to (at most 15
 * characters kept), for db_jobs_list. */
int db_job_ran_put(db *d, int64_t job_id, const char *algorithm);

/* ---- listing (ldct jobs) -------------------------------------------------- */

typedef struct db_job_row {
    int64_t id;
    const char *series_uid, *rule, *action, *algorithm, *state, *worker, *derived_series_uid,
        *last_error;
    int instances; /* those the job processed once it has run (else the series') */
    int attempts, priority;
    int64_t created_ms, started_ms, finished_ms; /* 0 when not yet */
    int superseded; /* done, but instances arrived while it ran: not sent */
    /* Its progress (db_job_progress_put), only while running and only as
     * written since this attempt started; none on a schema before 9. */
    const char *progress_stage;    /* "" when none */
    double progress_fraction;      /* of the stage, 0..1; < 0 unknown or none */
    int64_t progress_remaining_ms; /* of the stage; < 0 unknown or none */
    int64_t progress_updated_ms;   /* 0 when none */
    /* What its last run resolved the algorithm to (auto: nlm2d, nlm3d,
     * adaptive4d; db_job_ran_put); "" when no run got that far or on a
     * schema before 10. */
    const char *ran_algorithm;
} db_job_row;

typedef struct db_send_row {
    int64_t id, job_id;
    const char *what, *destination, *state, *last_error;
    int attempts;
    int64_t next_attempt_ms, created_ms, finished_ms;
} db_send_row;

/* Jobs newest first (at most `limit`, 0 = all); for each, cb_job then
 * cb_send for each of its sends. Either callback may be NULL. */
int db_jobs_list(db *d, int limit, void (*cb_job)(void *ctx, const db_job_row *j),
                 void (*cb_send)(void *ctx, const db_send_row *s), void *ctx);

/* The running jobs, longest running first (at most `limit`, 0 = all), with
 * their progress: for status. */
int db_jobs_running(db *d, int limit, void (*cb_job)(void *ctx, const db_job_row *j), void *ctx);

/* Counts of jobs and sends by state, for `ldct status` and metrics. */
typedef struct db_queue_totals {
    int64_t jobs_pending, jobs_running, jobs_done, jobs_failed;
    int64_t sends_pending, sends_sending, sends_done, sends_dead;
} db_queue_totals;
int db_queue_totals_get(db *d, db_queue_totals *t);

/* The open sends (not done) of one destination, for alerts on a PACS that
 * is down: queued (not tried yet, or queued again by ldct retry), retrying
 * (pending after a failed attempt), sending, dead. */
typedef struct db_destination_totals {
    char destination[65];
    int64_t queued, retrying, sending, dead;
} db_destination_totals;

/* The destinations with open sends, by name (at most max); *n their number. */
int db_destination_totals_get(db *d, db_destination_totals *out, int max, int *n);

/* ---- sends ---------------------------------------------------------------- */

typedef struct db_send {
    int64_t id, job_id, series_id;
    char what[16], destination[65];
    int attempts; /* counts this one */
    int retried;  /* a dead send that ldct retry queued again: its first attempt since */
} db_send;

/* Claims a due pending send (pending, next_attempt_ms <= now) whose
 * destination has no send in flight, so a slow or failing destination
 * holds at most one sender; pending -> sending, attempts + 1.
 * LDCT_ENOTFOUND when none is due. */
int db_send_claim(db *d, int64_t now_ms, db_send *out);

/* At most n retries (sends that failed before) in flight at once, counted
 * over all connections, so destinations that hang or fail cannot hold every
 * sender thread while a healthy one waits (the sender pool passes its
 * threads - 1). 0 = no limit (the default). */
void db_send_retry_slots(db *d, int n);

/* The files a send delivers: the derived instances of its job, or the
 * original instances of its series. Free with db_strings_free. */
int db_send_paths(db *d, const db_send *s, db_strings *paths);

int db_send_done(db *d, int64_t send_id, int64_t now_ms);

/* A send stopped by the shutdown, not by its destination: back to pending,
 * due at once, and the claim's attempt taken back (no-op unless sending). */
int db_send_interrupted(db *d, int64_t send_id);

/* A failed attempt: back to pending, due at next_attempt_ms; or, when
 * next_attempt_ms < 0, dead. */
int db_send_failed(db *d, int64_t send_id, int64_t now_ms, int64_t next_attempt_ms,
                   const char *error);

#endif
