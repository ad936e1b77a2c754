/* stall: which running job has gone longest without reporting progress,
 * and whether that makes it stalled (job_stall_seconds): a job or GPU that
 * hangs. ldctd's loop feeds it the running jobs once a second; while a job
 * is stalled ldctd stops answering systemd's watchdog, so that systemd
 * restarts it (the one way to free a wedged GPU; nothing queued is lost,
 * and the job's attempts bound how often that can happen to one series).
 *
 * Silence is measured on the monotonic clock from the moment the loop saw
 * a job's progress row last change (or saw the job first): a step of the
 * wall clock, which the rows' times follow, cannot make a job look
 * stalled or hide one, and a row cleared as the job ends counts as a
 * change, not as silence since the job's start.
 */
#ifndef LDCT_DAEMON_STALL_H
#define LDCT_DAEMON_STALL_H

#include <stddef.h>
#include <stdint.h>

#include "db/queue.h"

#define STALL_MAX_JOBS 64 /* running jobs followed (one per worker) */

/* A running job as the loop last saw it. */
typedef struct stall_job {
    int64_t id;
    int64_t updated_ms; /* its progress row's time, 0 none */
    double fraction;    /* of the stage, < 0 unknown */
    char algorithm[16], worker[32], stage[16];
    int64_t changed_mono; /* when the loop saw its progress change */
    int seen;             /* in the current round */
} stall_job;

typedef struct stall_tracker {
    int n;
    stall_job job[STALL_MAX_JOBS];
} stall_tracker;

/* One round: stall_round_begin, stall_observe for each running job,
 * stall_round_end (forgets the jobs not observed: they ended). */
void stall_round_begin(stall_tracker *t);
void stall_observe(stall_tracker *t, const db_job_row *j, int64_t now_mono_ms);
void stall_round_end(stall_tracker *t);

/* The job of the last round silent longest: NULL when none runs;
 * *silent_ms its silence at now_mono_ms. */
const stall_job *stall_stalest(const stall_tracker *t, int64_t now_mono_ms, int64_t *silent_ms);

/* One round over the running jobs of d, then stall_stalest; NULL also on
 * a database error (*rc < 0; the round is then dropped, the jobs kept). */
const stall_job *stall_check(stall_tracker *t, db *d, int64_t now_mono_ms, int64_t *silent_ms,
                             int *rc);

/* "job 12 (nlm3d on worker-0/gpu:0, reading 0%) has reported no progress
 * for 31 min 5 s" */
void stall_text(const stall_job *j, int64_t silent_ms, char *out, size_t len);

#endif
