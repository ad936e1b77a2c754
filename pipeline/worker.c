/* Job worker threads; see worker.h. */
#include "pipeline/worker.h"

#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "db/queue.h"
#include "pipeline/job_progress.h"
#include "pipeline/process.h"
#include "scp/scp.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#define IDLE_POLL_MS 1000   /* jobs queued by another process (ldct retry) */
#define RETRY_PAUSE_MS 5000 /* after a passing failure */
#define SPACE_WAIT_MS 15000 /* between checks while a result has no room */
#define SPACE_LOG_MS 600000 /* how often a worker repeats the waiting warning */
#define GPU_CHECK_S 60      /* between checks of a GPU that does not work, when unset */

typedef struct worker {
    struct worker_pool *pool;
    pthread_t thread;
    int started;
    gpu_device dev;
    char name[32];
    db *db;
    int64_t space_logged_ms; /* when this worker last warned of a job waiting for space */
    fail_run claim_fails;    /* claims failing in a row (a full database disk) */
    int gpu_failed;          /* the last job's GPU call failed (the CPU did it) */
    int gpu_down;            /* the GPU failed its check (written under pool->lock) */
    int64_t gpu_checked_ms;  /* monotonic: when the GPU was last checked */
    int64_t job_since_ms;    /* monotonic: when the running job was claimed; 0 idle (pool->lock) */
    int covering;            /* down, and running jobs because the working workers are all busy */
    int64_t job_id;          /* the job running now */
    job_progress progress;   /* its progress */
} worker;

struct worker_pool {
    worker_pool_opts o; /* o.outbox_dir points at outbox below */
    char outbox[1024];
    pthread_mutex_t lock;
    pthread_cond_t wake, idle;
    int stop, busy, nworkers;
    int open; /* set once every worker started: none claims a job before */
    worker w[WORKER_MAX];
};

int worker_devices_parse(const char *spec, gpu_device *dev, int max, char *err, size_t err_len)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", spec);
    int n = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
        if (strcmp(t, "auto") == 0) {
            int g = gpu_device_count();
            for (int i = 0; i < g && n < max; i++)
                dev[n++] = (gpu_device){.kind = GPU_DEVICE_CUDA, .index = i};
            if (g == 0 && n < max)
                dev[n++] = (gpu_device){.kind = GPU_DEVICE_CPU};
            continue;
        }
        if (n == max)
            return snprintf(err, err_len, "more than %d devices", max), LDCT_EINPUT;
        int rc = gpu_device_parse(t, &dev[n]);
        if (rc)
            return snprintf(err, err_len, "device '%s': %s", t, ldct_strerror(rc)), rc;
        n++;
    }
    if (n == 0)
        return snprintf(err, err_len, "no device in '%s'", spec), LDCT_EINPUT;
    return n;
}

/* Waits for a notification, the poll interval or stop; returns stop. */
static int wait_for_work(worker_pool *p, int ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&p->lock);
    if (!p->stop)
        pthread_cond_timedwait(&p->wake, &p->lock, &ts);
    int stop = p->stop;
    pthread_mutex_unlock(&p->lock);
    return stop;
}

static void set_busy(worker_pool *p, int delta)
{
    pthread_mutex_lock(&p->lock);
    p->busy += delta;
    pthread_cond_broadcast(&p->idle);
    pthread_mutex_unlock(&p->lock);
}

typedef struct uid_ctx {
    db *db;
    int64_t job_id;
    const char *uid_root;
    const char *results_dir; /* non-NULL: output goes to results_dir/<series UID> */
    char *out_dir;
    size_t out_len;
} uid_ctx;

/* The derived UIDs of a job are made once and stored (process_uids_fn); an
 * output folder named after the derived series follows its UID. */
static int store_uids(void *ctx, int n, const char *const *source_sops,
                      char (*uids)[DERIVE_UID_LEN], char *series_uid, int64_t *dated_ms)
{
    const uid_ctx *u = ctx;
    char fresh[DERIVE_UID_LEN]; /* replaces a borrowed series UID that no longer applies */
    int rc = scp_uid_new(u->uid_root, fresh, sizeof fresh);
    if (!rc)
        rc = db_job_derived_uids(u->db, u->job_id, n, source_sops, uids, series_uid, fresh,
                                 dated_ms);
    if (!rc && u->results_dir)
        snprintf(u->out_dir, u->out_len, "%s/%s", u->results_dir, series_uid);
    return rc;
}

static void out_dir_of(const worker *w, const db_job *j, const worker_settings *st, char *out,
                       size_t len)
{
    if (j->destinations[0])
        snprintf(out, len, "%s/%lld", w->pool->o.outbox_dir, (long long)j->id);
    else
        snprintf(out, len, "%s/%s", st->results_dir, j->derived_series_uid);
}

static void log_done(const worker *w, const db_job *j, const process_result *r)
{
    char h[96];
    process_params_text(r, h, sizeof h);
    log_notice("job %lld done: series %s -> %s, %d file(s) %dx%dx%d, %s on %s%s%s;"
               " load %.2f s, filter %.2f s, write %.2f s",
               (long long)j->id, j->series_uid, r->series_uid, r->n, r->nx, r->ny, r->nz,
               r->algorithm, r->device, r->gpu_fallback ? " (GPU failed)" : "", h, r->load_s,
               r->filter_s, r->write_s);
    (void)w;
}

/* After a failed database write of a job's outcome: logs, waits a second
 * and says whether to try again (not when the pool stops: the job is then
 * pending again at the next start). A job left 'running' would otherwise
 * stay so until a restart. */
static int db_wait_retry(worker *w, const db_job *j, int rc, int tries)
{
    if (rc != LDCT_EBUSY_DB && rc != LDCT_EDB) {
        log_err("job %lld: cannot record the outcome: %s", (long long)j->id, ldct_strerror(rc));
        return 0;
    }
    if (tries == 1 || tries % 60 == 0)
        log_err("job %lld: cannot record the outcome: %s (retrying)", (long long)j->id,
                ldct_strerror(rc));
    pthread_mutex_lock(&w->pool->lock);
    int stop = w->pool->stop;
    pthread_mutex_unlock(&w->pool->lock);
    if (stop)
        return 0;
    struct timespec ts = {1, 0};
    nanosleep(&ts, NULL);
    return 1;
}

/* A job whose result has no room yet goes back to pending without using an
 * attempt, so a full disk never fails it, and is not claimed again for
 * SPACE_WAIT_MS, so the jobs behind it run meanwhile. Logged when the wait
 * starts and then at most every SPACE_LOG_MS per worker. Returns 0: the
 * worker goes on with the next job. */
static int defer_for_space(worker *w, const db_job *j, const char *why)
{
    char note[600];
    snprintf(note, sizeof note, "%s: %s", DB_JOB_WAIT_SPACE, why);
    int64_t now = ldct_now_ms();
    if (!j->waited || now - w->space_logged_ms >= SPACE_LOG_MS) {
        log_warn("job %lld: series %s: %s; it starts when there is room (checked every %d s)",
                 (long long)j->id, j->series_uid, note, SPACE_WAIT_MS / 1000);
        w->space_logged_ms = now;
    }
    int late = 0;
    for (int tries = 1;; tries++) {
        int dbrc = db_job_defer(w->db, j->id, now, now + SPACE_WAIT_MS, note, &late);
        if (dbrc == 0 || !db_wait_retry(w, j, dbrc, tries))
            break;
    }
    if (late)
        log_notice("job %lld: instances of series %s arrived meanwhile; the series' next job"
                   " processes them all",
                   (long long)j->id, j->series_uid);
    return 0;
}

/* Records the outcome of a failed run. Returns 1 when the worker should pause. */
static int record_failure(worker *w, const db_job *j, int rc, const char *err,
                          const worker_settings *st)
{
    int permanent = process_error_permanent(rc);
    int retry = !permanent && j->attempts < st->job_max_attempts;
    if (permanent)
        log_err("job %lld failed: series %s: %s", (long long)j->id, j->series_uid, err);
    else
        log_warn("job %lld attempt %d of %d failed: series %s: %s%s", (long long)j->id, j->attempts,
                 st->job_max_attempts, j->series_uid, err, retry ? " (will retry)" : "");
    for (int tries = 1;; tries++) {
        int dbrc = db_job_failed(w->db, j->id, ldct_now_ms(), err, retry);
        if (dbrc == 0 || !db_wait_retry(w, j, dbrc, tries))
            break;
    }
    return retry;
}

/* process_series' progress: to the database for `ldct jobs` and, for a
 * long job, to the log. A write that fails is left for the next one. */
static void on_progress(void *ctx, const char *stage, double fraction)
{
    worker *w = ctx;
    int64_t now = ldct_mono_ms();
    int what = job_progress_update(&w->progress, stage, fraction, now);
    if (what & JOB_PROGRESS_PUBLISH)
        db_job_progress_put(w->db, w->job_id, w->progress.stage, w->progress.fraction,
                            job_progress_remaining_ms(&w->progress, now), ldct_now_ms());
    if (what & JOB_PROGRESS_LOG) {
        char text[160];
        job_progress_text(&w->progress, now, text, sizeof text);
        log_info("job %lld: %s", (long long)w->job_id, text);
    }
}

static int run_paths(worker *w, const db_job *j, const db_strings *paths, const worker_settings *st,
                     process_result *r, char *err, size_t len)
{
    char out_dir[1200];
    out_dir_of(w, j, st, out_dir, sizeof out_dir);
    uid_ctx uctx = {w->db,        j->id,
                    st->uid_root, j->destinations[0] ? NULL : st->results_dir,
                    out_dir,      sizeof out_dir};
    const gpu_device cpu = {.kind = GPU_DEVICE_CPU, .threads = w->dev.threads};
    process_opts o = {.algorithm = process_algorithm_parse(j->algorithm),
                      .dev = w->gpu_down ? &cpu : &w->dev,
                      .uid_root = st->uid_root,
                      .series_uid = j->derived_series_uid,
                      .description_suffix = j->description_suffix,
                      .out_dir = out_dir,
                      .min_free_mb = st->min_free_mb,
                      .uids = store_uids,
                      .uids_ctx = &uctx,
                      .progress = on_progress,
                      .progress_ctx = w};
    if (o.algorithm < 0 || process_params_parse(j->params, &o))
        return snprintf(err, len, "job has an unknown algorithm or parameters (%s: %s)",
                        j->algorithm, j->params),
               LDCT_EINPUT;
    return process_series((const char *const *)paths->v, paths->n, &o, r, err, len);
}

/* A result that misses instances that arrived while it ran is not sent;
 * in the results folder (no destinations) its files go too, unless they
 * are an earlier job's result under the same UIDs. */
static void drop_superseded(worker *w, const db_job *j, const process_result *r)
{
    log_notice("job %lld: instances of series %s arrived while it ran; this result is not "
               "sent, the series' next job processes them all",
               (long long)j->id, j->series_uid);
    int shared = 1;
    if (j->destinations[0] || db_job_series_shared(w->db, j->id, &shared) != 0 || shared)
        return;
    for (int i = 0; i < r->n; i++)
        unlink(r->paths[i]);
    if (r->n > 0) {
        char dir[DERIVE_PATH_LEN];
        snprintf(dir, sizeof dir, "%s", r->paths[0]);
        char *slash = strrchr(dir, '/');
        if (slash) {
            *slash = '\0';
            rmdir(dir); /* only when nothing else is in it */
        }
    }
}

/* Runs one claimed job to its end state; returns 1 to pause before the next. */
static int run_job(worker *w, const db_job *j)
{
    worker_settings st;
    w->pool->o.settings(w->pool->o.ctx, &st);
    if (j->retried)
        log_notice("job %lld: series %s, %s on %s (attempt %d; %s)", (long long)j->id,
                   j->series_uid, j->algorithm, w->name, j->attempts, DB_JOB_RETRIED);
    else
        LOG_AT(j->waited ? LOG_LVL_DEBUG : LOG_LVL_INFO,
               "job %lld: series %s, %s on %s (attempt %d)", (long long)j->id, j->series_uid,
               j->algorithm, w->name, j->attempts);
    char err[512] = "";
    db_strings paths = {0, NULL};
    process_result r;
    memset(&r, 0, sizeof r);
    w->job_id = j->id;
    job_progress_start(&w->progress, ldct_mono_ms(), JOB_PROGRESS_LOG_MS);
    int rc = db_series_paths(w->db, j->series_id, &paths);
    if (!rc && paths.n == 0)
        rc = LDCT_EINPUT, snprintf(err, sizeof err, "the series has no instances");
    if (!rc)
        rc = run_paths(w, j, &paths, &st, &r, err, sizeof err);
    db_strings_free(&paths);
    db_job_progress_clear(w->db, j->id); /* shown only while the job runs */
    if (r.algorithm[0] && db_job_ran_put(w->db, j->id, r.algorithm)) /* for ldct jobs only */
        log_warn("job %lld: cannot record that it ran %s", (long long)j->id, r.algorithm);
    w->gpu_failed = r.gpu_fallback;
    if (w->gpu_down)
        r.gpu_fallback = 1;                   /* its log line says the GPU failed */
    if (rc == LDCT_ENOSPACE || rc == -ENOSPC) /* no room, or another job took it first */
        return defer_for_space(w, j, err[0] ? err : ldct_strerror(rc));
    if (rc)
        return record_failure(w, j, rc, err[0] ? err : ldct_strerror(rc), &st);
    const char **src = malloc((size_t)r.n * sizeof *src), **dst = malloc((size_t)r.n * sizeof *dst);
    for (int i = 0; src && dst && i < r.n; i++) {
        src[i] = r.source_sops[i];
        dst[i] = r.paths[i];
    }
    int late = 0;
    rc = src && dst ? db_job_done(w->db, j->id, ldct_now_ms(), r.n, src, dst, &late) : -ENOMEM;
    for (int tries = 1; rc && rc != -ENOMEM && db_wait_retry(w, j, rc, tries); tries++)
        rc = db_job_done(w->db, j->id, ldct_now_ms(), r.n, src, dst, &late);
    free(src);
    free(dst);
    if (!rc)
        log_done(w, j, &r);
    if (!rc && late)
        drop_superseded(w, j, &r);
    process_result_free(&r);
    if (rc)
        return record_failure(w, j, rc, "cannot record the result in the database", &st);
    pthread_mutex_lock(&w->pool->lock);
    int stopping = w->pool->stop;
    pthread_mutex_unlock(&w->pool->lock);
    if (w->pool->o.job_done && !stopping)
        w->pool->o.job_done(w->pool->o.ctx);
    return 0;
}

static void set_gpu_down(worker *w, int down)
{
    pthread_mutex_lock(&w->pool->lock);
    w->gpu_down = down;
    pthread_mutex_unlock(&w->pool->lock);
}

static int gpu_check_every_s(const worker_settings *st)
{
    return st->gpu_check_seconds > 0 ? st->gpu_check_seconds : GPU_CHECK_S;
}

/* After a GPU failure, and every gpu_check_seconds while the GPU is down:
 * checks the GPU and logs each change. A down GPU's jobs go to the other
 * workers (or, when no other can take them, run on the CPU in this one).
 * A sticky CUDA error never clears within the process (device.h), so the
 * message asks for a restart. */
static void check_gpu(worker *w)
{
    char why[256];
    worker_settings st;
    w->pool->o.settings(w->pool->o.ctx, &st);
    int every_s = gpu_check_every_s(&st);
    int rc = gpu_device_check(&w->dev, why, sizeof why);
    w->gpu_checked_ms = ldct_mono_ms();
    if (rc == 0 && w->gpu_down)
        log_notice("%s: the GPU works again", w->name);
    else if (rc == LDCT_ENOMEM_GPU && !w->gpu_down)
        log_err("%s: the GPU is taken (%s: another process holds its memory or the GPU); its "
                "jobs go to the other workers, or run on the CPU here when none can take them. "
                "Checked again every %d s",
                w->name, why, every_s);
    else if (rc && !w->gpu_down)
        log_err("%s: the GPU does not work (%s); its jobs go to the other workers, or run on the "
                "CPU here when none can take them. Checked again every %d s; after an error that "
                "CUDA cannot clear within a process (an illegal address, a hardware fault) only "
                "a restart of ldctd makes it usable again",
                w->name, why[0] ? why : ldct_strerror(rc), every_s);
    set_gpu_down(w, rc != 0);
}

static void set_job_since(worker *w, int64_t mono_ms)
{
    pthread_mutex_lock(&w->pool->lock);
    w->job_since_ms = mono_ms;
    pthread_mutex_unlock(&w->pool->lock);
}

/* Of the other workers whose device works: how many there are, and how
 * many of them are idle or on a job for less than wait_ms. A worker
 * pausing after a failed job (RETRY_PAUSE_MS) counts as idle, and one that
 * turns idle right after this count may find its job taken by a down
 * worker: either costs one job run on the CPU, never a lost one. */
static void count_working(worker *w, int64_t wait_ms, int *working, int *ready)
{
    int64_t now = ldct_mono_ms();
    *working = *ready = 0;
    pthread_mutex_lock(&w->pool->lock);
    for (int i = 0; i < w->pool->nworkers; i++) {
        const worker *o = &w->pool->w[i];
        if (o == w || o->gpu_down)
            continue;
        ++*working;
        *ready += o->job_since_ms == 0 || now - o->job_since_ms < wait_ms;
    }
    pthread_mutex_unlock(&w->pool->lock);
}

/* A worker whose GPU is down leaves the jobs to the other workers whose
 * device works, unless each of them has been on one job for longer than
 * gpu_down_wait_seconds (a long or hung job): then it runs the next job on
 * the CPU itself, as it does when no other device works. */
static int standing_by(worker *w)
{
    w->covering = w->covering && w->gpu_down;
    if (!w->gpu_down)
        return 0;
    worker_settings st;
    w->pool->o.settings(w->pool->o.ctx, &st);
    if (ldct_mono_ms() - w->gpu_checked_ms >= gpu_check_every_s(&st) * 1000LL)
        check_gpu(w); /* the interval in effect now: a reload applies at once */
    if (!w->gpu_down)
        return w->covering = 0;
    int working, ready;
    count_working(w, st.gpu_down_wait_seconds * 1000LL, &working, &ready);
    int cover = working > 0 && ready == 0;
    if (cover && !w->covering)
        log_notice("%s: every worker whose device works has been on one job for over %d s; "
                   "jobs run on the CPU here meanwhile",
                   w->name, st.gpu_down_wait_seconds);
    w->covering = cover;
    return ready > 0;
}

/* A GPU worker creates its context and staging before the first job
 * (about 0.3 s on an H200 that the first series would wait for). */
static void warm_device(worker *w)
{
    if (w->dev.kind != GPU_DEVICE_CUDA)
        return;
    int64_t t0 = ldct_now_ms();
    int rc = gpu_device_warm(&w->dev);
    if (!rc) {
        log_info("%s: GPU ready in %.2f s", w->name, (ldct_now_ms() - t0) / 1000.0);
        return;
    }
    log_warn("%s: cannot prepare the GPU: %s", w->name, ldct_strerror(rc));
    check_gpu(w);
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    worker_pool *p = w->pool;
    warm_device(w);
    /* A start that fails at a later worker stops the pool at once: nothing
     * may be claimed (and outlive the pool) before every worker runs. */
    pthread_mutex_lock(&p->lock);
    while (!p->open && !p->stop)
        pthread_cond_wait(&p->wake, &p->lock);
    pthread_mutex_unlock(&p->lock);
    for (;;) {
        pthread_mutex_lock(&p->lock);
        int stop = p->stop;
        if (!stop)
            p->busy++;
        pthread_mutex_unlock(&p->lock);
        if (stop)
            break;
        if (standing_by(w)) {
            set_busy(p, -1);
            if (wait_for_work(p, IDLE_POLL_MS))
                break;
            continue;
        }
        db_job j;
        int rc = db_job_claim(w->db, w->name, ldct_now_ms(), &j);
        if (rc == 0)
            set_job_since(w, ldct_mono_ms());
        int pause = rc == 0 ? run_job(w, &j) : 0;
        if (rc == 0 && w->gpu_failed)
            check_gpu(w); /* still busy: a stop waits for a check that hangs, up to its grace */
        if (rc == 0)
            set_job_since(w, 0);
        set_busy(p, -1);
        int failed = 0;
        if (rc && rc != LDCT_ENOTFOUND && fail_run_first(&w->claim_fails))
            log_warn("%s: cannot claim a job: %s (retrying every second)", w->name,
                     ldct_strerror(rc));
        if ((rc == 0 || rc == LDCT_ENOTFOUND) && (failed = fail_run_end(&w->claim_fails)) > 0)
            log_notice("%s: claiming jobs works again after %d failed tries", w->name, failed);
        if (rc == 0 && !pause)
            continue;
        if (wait_for_work(p, pause ? RETRY_PAUSE_MS : IDLE_POLL_MS))
            break;
    }
    return NULL;
}

static int start_one(worker_pool *p, int i, const char *db_path)
{
    worker *w = &p->w[i];
    w->pool = p;
    w->dev = p->o.dev[i];
    char dn[16];
    snprintf(w->name, sizeof w->name, "worker-%d/%s", i, gpu_device_name(&w->dev, dn, sizeof dn));
    int rc = db_open(db_path, 0, &w->db);
    if (rc)
        return rc;
    rc = -pthread_create(&w->thread, NULL, worker_main, w);
    w->started = rc == 0;
    return rc;
}

int worker_pool_start(const worker_pool_opts *o, worker_pool **out)
{
    *out = NULL;
    worker_pool *p = calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    p->o = *o;
    snprintf(p->outbox, sizeof p->outbox, "%s", o->outbox_dir);
    p->o.outbox_dir = p->outbox;
    p->o.db_path = NULL; /* used only while starting */
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->idle, NULL);
    int rc = 0;
    for (int i = 0; i < o->ndev && i < WORKER_MAX && !rc; i++, p->nworkers++)
        rc = start_one(p, i, o->db_path);
    if (rc) {
        worker_pool_stop(p, 0); /* no job claimed yet: every thread ends and is joined */
        return rc;
    }
    pthread_mutex_lock(&p->lock);
    p->open = 1;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    for (int i = 0; i < p->nworkers; i++)
        log_info("%s started", p->w[i].name);
    *out = p;
    return 0;
}

void worker_pool_notify(worker_pool *p)
{
    pthread_mutex_lock(&p->lock);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
}

int worker_pool_busy(worker_pool *p)
{
    pthread_mutex_lock(&p->lock);
    int b = p->busy;
    pthread_mutex_unlock(&p->lock);
    return b;
}

int worker_pool_gpus_down(worker_pool *p)
{
    int n = 0;
    pthread_mutex_lock(&p->lock);
    for (int i = 0; i < p->nworkers; i++)
        n += p->w[i].gpu_down;
    pthread_mutex_unlock(&p->lock);
    return n;
}

void worker_pool_drain(worker_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->stop = 1;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
}

/* Waits until no job runs or the deadline passes; returns the jobs still running. */
static int wait_idle(worker_pool *p, int grace_s)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += grace_s;
    pthread_mutex_lock(&p->lock);
    p->stop = 1;
    pthread_cond_broadcast(&p->wake);
    while (p->busy > 0 && pthread_cond_timedwait(&p->idle, &p->lock, &ts) != ETIMEDOUT) {
    }
    int busy = p->busy;
    pthread_mutex_unlock(&p->lock);
    return busy;
}

int worker_pool_stop(worker_pool *p, int grace_s)
{
    if (!p)
        return 0;
    int busy = wait_idle(p, grace_s);
    if (busy > 0) {
        log_notice("%d job(s) still running; they run again at the next start", busy);
        return busy;
    }
    for (int i = 0; i < p->nworkers; i++) {
        if (p->w[i].started)
            pthread_join(p->w[i].thread, NULL);
        db_close(p->w[i].db);
    }
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->idle);
    pthread_mutex_destroy(&p->lock);
    free(p);
    return 0;
}
