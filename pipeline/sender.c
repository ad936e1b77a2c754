/* C-STORE sender threads with backoff; see sender.h. */
#include "pipeline/sender.h"

#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "db/queue.h"
#include "scp/scp.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define IDLE_POLL_MS 500
#define SENDER_MAX 64

typedef struct sender {
    struct sender_pool *pool;
    pthread_t thread;
    int started;
    db *db;
    fail_run claim_fails; /* claims failing in a row (a full database disk) */
} sender;

struct sender_pool {
    sender_pool_opts o;
    char calling_ae[17];
    scp_tls_ctx *tls; /* under lock (a reload replaces it); NULL: no TLS set up */
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int stop, n;
    int open;   /* set once every sender started: none claims a send before */
    int cancel; /* set (atomically) at stop: running associations end after their file */
    sender s[SENDER_MAX];
};

void sender_pool_set_tls(sender_pool *p, scp_tls_ctx *tls)
{
    if (!p) {
        scp_tls_ctx_free(tls);
        return;
    }
    pthread_mutex_lock(&p->lock);
    scp_tls_ctx *old = p->tls;
    p->tls = tls;
    pthread_mutex_unlock(&p->lock);
    scp_tls_ctx_free(old); /* sends under way hold handles of their own */
}

/* A handle on the pool's TLS setup for one send (NULL: none). */
static scp_tls_ctx *tls_for_send(sender_pool *p)
{
    pthread_mutex_lock(&p->lock);
    scp_tls_ctx *c = scp_tls_ctx_ref(p->tls);
    pthread_mutex_unlock(&p->lock);
    return c;
}

int64_t sender_backoff_ms(const cfg_destination *d, int attempts)
{
    if (attempts >= d->retry_max_attempts)
        return -1;
    double s = d->retry_initial_seconds * pow(d->retry_multiplier, attempts > 0 ? attempts - 1 : 0);
    if (s > d->retry_max_seconds)
        s = d->retry_max_seconds;
    return (int64_t)(s * 1000.0);
}

/* True when files failed and every failure is one no retry can change
 * (SCP_STATUS_NOT_SENDABLE: only the destination's configuration can). */
static int failed_for_good(const unsigned *st, int n)
{
    int bad = 0;
    for (int i = 0; i < n; i++) {
        if (st[i] == 0 || (st[i] & 0xF000) == 0xB000)
            continue;
        if (st[i] != SCP_STATUS_NOT_SENDABLE)
            return 0;
        bad++;
    }
    return bad > 0;
}

/* Summarises failed statuses: "3 of 200 file(s) refused (0xA700 ...)". */
static int statuses_ok(const unsigned *st, int n, char *err, size_t len)
{
    int bad = 0, first = -1;
    for (int i = 0; i < n; i++)
        if (st[i] != 0 && (st[i] & 0xF000) != 0xB000) {
            bad++;
            if (first < 0)
                first = i;
        }
    if (bad)
        snprintf(err, len, "%d of %d file(s) not stored (first status 0x%04X)", bad, n, st[first]);
    return bad == 0;
}

/* Sends the files of snd; *for_good is set when they failed in a way no
 * retry can change. */
static int deliver(sender *s, const db_send *snd, const cfg_destination *d, int *for_good,
                   char *err, size_t len)
{
    db_strings paths = {0, NULL};
    int rc = db_send_paths(s->db, snd, &paths);
    if (rc)
        return snprintf(err, len, "database: %s", ldct_strerror(rc)), rc;
    if (paths.n == 0) {
        db_strings_free(&paths);
        return snprintf(err, len, "nothing to send"), LDCT_ENOTFOUND;
    }
    unsigned *st = calloc((size_t)paths.n, sizeof *st);
    scp_tls_ctx *tls = d->tls ? tls_for_send(s->pool) : NULL;
    if (d->tls && !tls) {
        free(st);
        db_strings_free(&paths);
        return snprintf(err, len, "TLS is not set up (the node's tls_ keys)"), LDCT_EINVAL_CONFIG;
    }
    scp_send_options o = {.host = d->host,
                          .port = d->port,
                          .called_ae = d->ae_title,
                          .calling_ae = s->pool->calling_ae,
                          .connect_timeout_s = d->timeout,
                          .dimse_timeout_s = d->timeout,
                          .cancel = &s->pool->cancel,
                          .tls = tls,
                          .tls_peer_name = d->tls_peer_name};
    rc = st ? scp_send_files(&o, (const char *const *)paths.v, paths.n, st, err, len) : -ENOMEM;
    scp_tls_ctx_free(tls);
    char summary[128];
    if (rc == 0 && !statuses_ok(st, paths.n, summary, sizeof summary)) {
        /* scp_send_files' text names the first file and why (a refusal's
         * status, or a local file that cannot be read); else the summary. */
        if (!err[0])
            snprintf(err, len, "%s", summary);
        rc = LDCT_EPEER;
        *for_good = failed_for_good(st, paths.n);
    }
    free(st);
    db_strings_free(&paths);
    return rc;
}

static int stopping(sender_pool *p)
{
    pthread_mutex_lock(&p->lock);
    int stop = p->stop;
    pthread_mutex_unlock(&p->lock);
    return stop;
}

/* Records the outcome; retried every second while the database refuses
 * (busy, disk full), because a send left 'sending' would hold its
 * destination until the next start. A failure is recorded as of
 * failed_ms, the time its next attempt `next` was counted from (the
 * clock-step handling compares the two). */
static void record(sender *s, const db_send *snd, int ok, int64_t failed_ms, int64_t next,
                   const char *err)
{
    for (int tries = 1;; tries++) {
        int rc = ok ? db_send_done(s->db, snd->id, ldct_now_ms())
                    : db_send_failed(s->db, snd->id, failed_ms, next < 0 ? -1 : next, err);
        if (rc == 0)
            return;
        if (rc != LDCT_EBUSY_DB && rc != LDCT_EDB) {
            log_err("send %lld: cannot record the outcome: %s", (long long)snd->id,
                    ldct_strerror(rc));
            return;
        }
        if (tries == 1 || tries % 60 == 0)
            log_err("send %lld: cannot record the outcome: %s (retrying)", (long long)snd->id,
                    ldct_strerror(rc));
        if (stopping(s->pool))
            return; /* 'sending' goes back to pending at the next start */
        struct timespec ts = {1, 0};
        nanosleep(&ts, NULL);
    }
}

static void finish(sender *s, const db_send *snd, const cfg_destination *d, int rc, const char *err)
{
    if (rc == LDCT_ECANCELED) { /* shutdown: not the destination's fault, not an attempt */
        log_notice("send %lld to %s interrupted by the shutdown (%s); it goes on at the next start",
                   (long long)snd->id, snd->destination, err);
        /* If this write fails, the row stays 'sending' and the next start
         * requeues it (db_recover), with the attempt counted. */
        (void)db_send_interrupted(s->db, snd->id);
        return;
    }
    if (rc == 0) {
        log_notice("send %lld done: %s series of job %lld to %s (attempt %d)", (long long)snd->id,
                   snd->what, (long long)snd->job_id, snd->destination, snd->attempts);
        record(s, snd, 1, 0, 0, err);
        return;
    }
    int64_t delay = d ? sender_backoff_ms(d, snd->attempts) : -1;
    char hint[64] = ""; /* what to do about it, unless err says so */
    if (delay < 0 && !strstr(err, "ldct retry"))
        snprintf(hint, sizeof hint, "; once it can be sent: ldct retry %lld",
                 (long long)snd->job_id);
    if (delay < 0)
        log_err("send %lld to %s is dead after %d attempt(s): %s%s", (long long)snd->id,
                snd->destination, snd->attempts, err, hint);
    else
        log_warn("send %lld to %s failed (attempt %d): %s; next try in %.0f s", (long long)snd->id,
                 snd->destination, snd->attempts, err, delay / 1000.0);
    const int64_t now = ldct_now_ms();
    record(s, snd, 0, now, delay < 0 ? -1 : now + delay, err);
}

/* A destination missing from the configuration makes the send dead at once
 * (ldct retry requeues it once the destination is back, or with --to to
 * another one), and so do files the destination refuses for good. */
static void send_one(sender *s, const db_send *snd)
{
    cfg_destination d;
    char err[512] = "";
    if (snd->retried)
        log_notice("send %lld: %s series of job %lld to %s, queued again by ldct retry",
                   (long long)snd->id, snd->what, (long long)snd->job_id, snd->destination);
    if (s->pool->o.destination(s->pool->o.ctx, snd->destination, &d) != 0) {
        snprintf(err, sizeof err,
                 "destination '%s' is not configured (once it is, or to another: ldct retry %lld"
                 " [--to DEST])",
                 snd->destination, (long long)snd->job_id);
        finish(s, snd, NULL, LDCT_ENOTFOUND, err);
        return;
    }
    int for_good = 0;
    int rc = deliver(s, snd, &d, &for_good, err, sizeof err);
    if (for_good) { /* dead at once: no retry could deliver it */
        size_t used = strlen(err);
        snprintf(err + used, sizeof err - used,
                 "; not retried: once [destination %s] accepts it (or to another: --to DEST),"
                 " ldct retry %lld",
                 snd->destination, (long long)snd->job_id);
    }
    finish(s, snd, for_good ? NULL : &d, rc, err[0] ? err : ldct_strerror(rc));
}

static int wait_for_work(sender_pool *p, int ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (long)ms * 1000000L;
    ts.tv_sec += ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    pthread_mutex_lock(&p->lock);
    if (!p->stop)
        pthread_cond_timedwait(&p->wake, &p->lock, &ts);
    int stop = p->stop;
    pthread_mutex_unlock(&p->lock);
    return stop;
}

static void *sender_main(void *arg)
{
    sender *s = arg;
    sender_pool *p = s->pool;
    pthread_mutex_lock(&p->lock); /* see worker_main: a failed start claims nothing */
    while (!p->open && !p->stop)
        pthread_cond_wait(&p->wake, &p->lock);
    pthread_mutex_unlock(&p->lock);
    for (;;) {
        pthread_mutex_lock(&p->lock);
        int stop = p->stop;
        pthread_mutex_unlock(&p->lock);
        if (stop)
            break;
        db_send snd;
        int rc = db_send_claim(s->db, ldct_now_ms(), &snd);
        int failed = 0;
        if ((rc == 0 || rc == LDCT_ENOTFOUND) && (failed = fail_run_end(&s->claim_fails)) > 0)
            log_notice("sender: claiming sends works again after %d failed tries", failed);
        if (rc == 0) {
            send_one(s, &snd);
            continue;
        }
        if (rc != LDCT_ENOTFOUND && fail_run_first(&s->claim_fails))
            log_warn("sender: cannot claim a send: %s (retrying every second)", ldct_strerror(rc));
        if (wait_for_work(p, IDLE_POLL_MS))
            break;
    }
    return NULL;
}

int sender_pool_start(const sender_pool_opts *o, sender_pool **out)
{
    *out = NULL;
    sender_pool *p = calloc(1, sizeof *p);
    if (!p) {
        scp_tls_ctx_free(o->tls);
        return -ENOMEM;
    }
    p->o = *o;
    p->o.db_path = NULL; /* used only while starting */
    p->o.calling_ae = p->calling_ae;
    snprintf(p->calling_ae, sizeof p->calling_ae, "%s", o->calling_ae);
    p->tls = o->tls;
    p->o.tls = NULL; /* owned as p->tls */
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    int rc = 0;
    for (int i = 0; i < o->threads && i < SENDER_MAX && !rc; i++, p->n++) {
        sender *s = &p->s[i];
        s->pool = p;
        if ((rc = db_open(o->db_path, 0, &s->db)) == 0) {
            /* one thread stays free for destinations that are not failing */
            db_send_retry_slots(s->db, o->threads > 1 ? o->threads - 1 : 0);
            rc = -pthread_create(&s->thread, NULL, sender_main, s);
            s->started = rc == 0;
        }
    }
    if (rc) {
        (void)sender_pool_stop(p, 10); /* nothing claimed yet: they stop at once */
        return rc;
    }
    pthread_mutex_lock(&p->lock);
    p->open = 1;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    *out = p;
    return 0;
}

void sender_pool_notify(sender_pool *p)
{
    pthread_mutex_lock(&p->lock);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
}

/* Joins the senders until the deadline; returns how many still run. */
static int join_until(sender_pool *p, const struct timespec *deadline)
{
    int left = 0;
    for (int i = 0; i < p->n; i++) {
        if (p->s[i].started && pthread_timedjoin_np(p->s[i].thread, NULL, deadline) != 0) {
            left++;
            continue;
        }
        p->s[i].started = 0;
        db_close(p->s[i].db);
        p->s[i].db = NULL;
    }
    return left;
}

/* Joins the senders for up to seconds from now; returns how many still run. */
static int join_for(sender_pool *p, int seconds)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += seconds;
    return join_until(p, &deadline);
}

int sender_pool_stop(sender_pool *p, int grace_s)
{
    if (!p)
        return 0;
    pthread_mutex_lock(&p->lock);
    p->stop = 1; /* no new send; the running ones go on */
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    int left = join_for(p, grace_s);
    if (left) { /* the grace is over: end after the file in flight */
        __atomic_store_n(&p->cancel, 1, __ATOMIC_RELAXED);
        left = join_for(p, SENDER_CANCEL_S);
    }
    if (left) {
        log_notice("%d send(s) still running (a peer not answering); they go on at the next "
                   "start",
                   left);
        return left;
    }
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->lock);
    scp_tls_ctx_free(p->tls);
    free(p);
    return 0;
}
