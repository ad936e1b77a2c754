/* worker: the threads that run jobs, one per device (GPU, or the CPU when
 * there is none). Each claims the next pending job from SQLite (priority,
 * then age), processes its series (process.h) with the derived UIDs stored
 * once per job, and finishes it in one transaction that also queues its
 * sends; results of a rule without destinations go to the results folder.
 *
 * Failures: a series that cannot be processed (inconsistent, not an image)
 * fails at once with its reason; passing trouble (disk full, database busy)
 * is retried up to job_max_attempts; a GPU failure falls back to the CPU
 * inside process_series, and the worker then checks its GPU. A GPU that
 * fails the check is down: its worker leaves the jobs to the workers
 * whose device works (or, when there is none, or each has been on one job
 * for over gpu_down_wait_seconds, runs them on the CPU) and checks it
 * again every gpu_check_seconds. Crash safety comes from the database: a job left
 * running is put back to pending at the next start (db_recover).
 *
 * Threading: worker_pool_* are called from one thread (the daemon's loop),
 * except worker_pool_busy and worker_pool_gpus_down (any thread); the
 * settings callback is called from worker threads.
 */
#ifndef LDCT_PIPELINE_WORKER_H
#define LDCT_PIPELINE_WORKER_H

#include "gpu/device.h"

#include <stddef.h>

#define WORKER_MAX 16

/* What a worker reads from the current configuration at the start of each job. */
typedef struct worker_settings {
    char uid_root[65];
    char results_dir[1024];
    int job_max_attempts;
    int min_free_mb;       /* a job waits until its result leaves this much free */
    int gpu_check_seconds; /* a down GPU is checked again this often (<= 0: 60) */
    /* A worker whose GPU is down leaves the jobs to the workers whose device
     * works while one of them is idle or has been on its job for less than
     * this; after that it runs the next job on the CPU (a long or hung job
     * does not hold the queue). */
    int gpu_down_wait_seconds;
} worker_settings;

typedef struct worker_pool_opts {
    const char *db_path;    /* both strings are copied or used only during start */
    const char *outbox_dir; /* derived files of jobs with destinations: outbox/<job id>/ */
    int ndev;
    gpu_device dev[WORKER_MAX]; /* one worker thread each */
    void (*settings)(void *ctx, worker_settings *out);
    void (*job_done)(void *ctx); /* a job finished: sends may be waiting (any thread) */
    void *ctx;
} worker_pool_opts;

typedef struct worker_pool worker_pool;

/* Parses a devices setting ("auto", "cpu", "gpu", "gpu:N", comma lists)
 * into devices. "auto" is one worker per GPU present, or one CPU worker.
 * Returns the count, or LDCT_EINPUT / LDCT_ENOGPU with a message in err. */
int worker_devices_parse(const char *spec, gpu_device *dev, int max, char *err, size_t err_len);

/* Starts the threads (each opens its own database connection). */
int worker_pool_start(const worker_pool_opts *o, worker_pool **out);

/* Wakes idle workers: a job was queued. */
void worker_pool_notify(worker_pool *p);

/* Stopping: workers claim no new job from now on; running jobs go on
 * (worker_pool_stop waits for them). Any thread. */
void worker_pool_drain(worker_pool *p);

/* Number of jobs running now. */
int worker_pool_busy(worker_pool *p);

/* Number of workers whose GPU does not work now;
 * their jobs go to the other workers. Any thread. */
int worker_pool_gpus_down(worker_pool *p);

/* Stops claiming, waits up to grace_s seconds for running jobs, then joins
 * and frees, and returns 0. A job still running after the grace time is
 * left to the database (pending again at the next start): its thread is
 * abandoned, the pool is not freed, and the number of such jobs is
 * returned; the caller must then end the process with _exit() without
 * freeing anything those threads use. NULL is a no-op. */
int worker_pool_stop(worker_pool *p, int grace_s);

#endif
