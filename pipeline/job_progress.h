/* job_progress: a running job's progress as its worker tracks it. It takes
 * the stage and fraction that process_series reports (process.h), estimates
 * the time the stage has left, and says when to publish them: to the
 * database for `ldct jobs` (on a new stage, else at most once per
 * JOB_PROGRESS_PUBLISH_MS) and to the log (a job that runs longer than
 * JOB_PROGRESS_LOG_MS gets a line every JOB_PROGRESS_LOG_MS).
 *
 * Times are monotonic milliseconds given by the caller. Not thread-safe:
 * one tracker per worker thread.
 */
#ifndef LDCT_PIPELINE_JOB_PROGRESS_H
#define LDCT_PIPELINE_JOB_PROGRESS_H

#include <stddef.h>
#include <stdint.h>

#define JOB_PROGRESS_PUBLISH_MS 2000
#define JOB_PROGRESS_LOG_MS 60000

enum { JOB_PROGRESS_PUBLISH = 1, JOB_PROGRESS_LOG = 2 };

typedef struct job_progress {
    int64_t start_ms; /* the job's start */
    char stage[16];   /* "" before the first report */
    double fraction;  /* of the stage; < 0 not counted */
    int64_t stage_ms; /* when the stage began */
    double first;     /* the stage's first counted fraction ... */
    int64_t first_ms; /* ... and when it came */
    int counted;      /* the stage has had a counted fraction */
    int64_t last_ms;  /* when the last counted fraction came */
    int64_t published_ms, logged_ms;
    int64_t log_every_ms; /* JOB_PROGRESS_LOG_MS in the daemon */
} job_progress;

/* Starts tracking a job; its log line is due every log_every_ms. */
void job_progress_start(job_progress *p, int64_t now_ms, int64_t log_every_ms);

/* Records a report; returns JOB_PROGRESS_PUBLISH and/or JOB_PROGRESS_LOG
 * when the caller should publish it now (0: nothing to do). A stage name
 * longer than 15 characters is cut. */
int job_progress_update(job_progress *p, const char *stage, double fraction, int64_t now_ms);

/* Milliseconds the current stage has left at its rate so far, or -1 while
 * that is unknown (a stage that is not counted, or one that has not yet
 * moved for JOB_PROGRESS_ETA_MIN_MS). */
#define JOB_PROGRESS_ETA_MIN_MS 3000
int64_t job_progress_remaining_ms(const job_progress *p, int64_t now_ms);

/* A fraction (0 to 1) as a whole percentage, rounded; 100 only when done. */
int job_progress_percent(double fraction);

/* "filtering 45%, 1 min 10 s so far, about 1 min 25 s left" (", nearly
 * done" under a second; parts that are unknown left out). */
void job_progress_text(const job_progress *p, int64_t now_ms, char *out, size_t len);

#endif
