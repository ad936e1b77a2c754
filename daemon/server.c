/* The ldctd process: configuration, ingest, DICOM server and the libuv loop.
 * See server.h. Signal handlers are libuv's: the loop does the work. */
#include "daemon/server.h"

#include "common/clock.h"
#include "common/err.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "daemon/http.h"
#include "daemon/lockfile.h"
#include "daemon/stall.h"
#include "daemon/tls.h"
#include "config/config.h"
#include "db/db.h"
#include "db/queue.h"
#include "gpu/fdk_tune.h"
#include "pipeline/ingest.h"
#include "pipeline/schedule.h"
#include "pipeline/sender.h"
#include "pipeline/worker.h"
#include "scp/scp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <uv.h>

#define STABLE_CHECK_MS 1000
#define EXPIRE_CHECK_MS 5000
#define QUARANTINE_CHECK_MS 60000

/* One look at the quarantine, on a libuv pool thread: a folder of many
 * thousands of refused instances must not hold up the event loop (and
 * with it the systemd watchdog). Filled and read on the loop thread only
 * while no look runs. */
typedef struct quarantine_scan {
    uv_work_t req;
    struct server *owner;
    int busy;
    char state_dir[CFG_PATH_MAX];
    int days, removed;
    int64_t now_ms;
    ingest_quarantine_totals totals;
} quarantine_scan;

typedef struct server {
    uv_loop_t loop;
    uv_signal_t sig_term, sig_int, sig_hup;
    uv_timer_t stable_timer, watchdog_timer, expire_timer;
    const char *config_path;
    pthread_mutex_t cfg_lock; /* guards cfg: read by association threads */
    ldct_config *cfg;
    ingest *ingest;
    db *db; /* the loop thread's own connection */
    scp_server *scp;
    scp_server *scp_tls; /* the TLS port, when tls_port is set */
    worker_pool *workers;
    sender_pool *senders;
    http_server *http;
    int64_t started_ms;
    int nworkers;
    unsigned ticks;
    fail_run stable_fails, expire_fails, purge_fails; /* timer checks failing in a row */
    int64_t clock_offset;    /* wall minus monotonic clock (ldct_clock_step) */
    scp_tls_dates tls_dates; /* of the TLS files last loaded (read by the HTTP thread) */
    int64_t tls_warn_ms;     /* when to look at them again (daily) */
    int64_t quarantine_ms;   /* the next look at the quarantine */
    quarantine_scan qscan;
    int64_t quarantine_instances, quarantine_bytes; /* what it held then (-1: not yet) */
    int64_t clock_pending;                          /* steps not yet applied to the database */
    stall_tracker stall; /* the running jobs' progress as the loop saw it */
    int64_t stalled_job; /* the job found stalled (job_stall_seconds), 0: none */
    int lock_fd;         /* ldctd.lock: "PID receiving" while receiving, emptied once stopped */
    int unclean_start;   /* the last run did not empty it: killed, crashed, power lost */
    int suspects_marked; /* its receiving series are marked (db_series_interrupt_receiving) */
    int exit_code;
} server;

/* ---- handlers called on association threads ---- */

/* A calling AE title bound in tls_caller_names calls over TLS with a
 * certificate for its name; others are not concerned. */
static int tls_caller_ok(const cfg_ae_names *names, const scp_assoc_info *a)
{
    const char *name = config_ae_bound_name(names, a->calling_ae);
    return !name || scp_assoc_tls_peer_is(a, name);
}

static scp_assoc_verdict check_association(void *ctx, const scp_assoc_info *a)
{
    server *s = ctx;
    scp_assoc_verdict v = SCP_ASSOC_ACCEPT;
    pthread_mutex_lock(&s->cfg_lock);
    const cfg_node *n = &s->cfg->node;
    if (n->check_called_ae && strcmp(a->called_ae, n->ae_title) != 0)
        v = SCP_ASSOC_REJECT_CALLED_AE;
    else if (!config_ae_allowed(&n->allowed_calling_aes, a->calling_ae))
        v = SCP_ASSOC_REJECT_CALLING_AE;
    else if (!config_host_allowed(&n->allowed_hosts, a->peer_host))
        v = SCP_ASSOC_REJECT_HOST;
    else if (!tls_caller_ok(&n->tls_caller_names, a))
        v = SCP_ASSOC_REJECT_CERTIFICATE;
    pthread_mutex_unlock(&s->cfg_lock);
    return v;
}

/* A node on its defaults takes series from anyone who reaches its port. */
static void warn_open_node(const cfg_node *n)
{
    const int tls_only_with_certificates = n->port == 0 && n->tls_require_client_certificate;
    if (n->allowed_hosts.n == 0 && n->allowed_calling_aes.n == 0 && !tls_only_with_certificates)
        log_warn("any host and any calling AE title may send to this node (allowed_hosts and"
                 " allowed_calling_aes are empty); list the scanners there before it goes on a"
                 " clinical network");
}

/* allowed_hosts, checked as soon as a connection is accepted. */
static int allow_host(void *ctx, const char *host)
{
    server *s = ctx;
    pthread_mutex_lock(&s->cfg_lock);
    const int ok = config_host_allowed(&s->cfg->node.allowed_hosts, host);
    pthread_mutex_unlock(&s->cfg_lock);
    return ok;
}

static unsigned store_begin(void *ctx, const scp_assoc_info *a, char *tmp, size_t tmp_len,
                            char *comment, size_t comment_len)
{
    (void)a;
    return ingest_store_begin(((server *)ctx)->ingest, tmp, tmp_len, comment, comment_len);
}

static uint64_t store_min_free_mb(void *ctx)
{
    return ingest_min_free_mb(((server *)ctx)->ingest);
}

static unsigned store_end(void *ctx, const scp_assoc_info *a, const scp_instance *inst,
                          char *comment, size_t comment_len)
{
    return ingest_store_end(((server *)ctx)->ingest, a, inst, comment, comment_len);
}

/* interrupted_seconds for this handle's series and, recorded in the
 * database, for `ldct series` (which has no other way to know the running
 * value: its --config may be another file, or none). A failed record only
 * leaves the listing on its fallback, so it is logged and not fatal. */
static void use_interrupted_seconds(db *d, int seconds)
{
    db_series_interrupted_wait(d, seconds);
    if (db_node_setting_put(d, DB_SETTING_INTERRUPTED_SECONDS, seconds, ldct_now_ms()))
        log_warn("interrupted_seconds = %d could not be recorded in the database; `ldct series`"
                 " may mark held series by another value",
                 seconds);
}

/* The quiet an interrupted series waits at least (db_series_interrupted). */
static int quiet_after_interruption(const cfg_node *n)
{
    return n->interrupted_seconds > n->stable_seconds ? n->interrupted_seconds : n->stable_seconds;
}

static void assoc_interrupted(void *ctx, const scp_assoc_info *a, const char *const *series_uids,
                              int n, scp_cut why)
{
    server *s = ctx;
    pthread_mutex_lock(&s->cfg_lock);
    const int wait_s = quiet_after_interruption(&s->cfg->node);
    pthread_mutex_unlock(&s->cfg_lock);
    ingest_assoc_interrupted(s->ingest, a, series_uids, n, why, wait_s);
}

/* ---- loop callbacks ---- */

static void on_series_stable(void *ctx, const char *series_uid, int instances)
{
    server *s = ctx;
    log_info("series %s is stable with %d instance(s)", series_uid, instances);
    int rc = schedule_series(s->db, s->cfg, series_uid);
    if (rc == SCHED_JOB) {
        worker_pool_notify(s->workers);
        sender_pool_notify(s->senders);
    }
}

#define CLOCK_STEP_TOLERANCE_MS 2000 /* a timer tick is late by far less */

/* A step of the wall clock moves the waits measured on it (db_clock_stepped). */
static void follow_clock_steps(server *s)
{
    const int64_t now = ldct_now_ms();
    const int64_t step =
        ldct_clock_step(&s->clock_offset, now, ldct_mono_ms(), CLOCK_STEP_TOLERANCE_MS);
    s->clock_pending += step;
    if (!s->clock_pending)
        return;
    int rc = db_clock_stepped(s->db, s->clock_pending, now);
    if (rc && step) /* kept in clock_pending: tried again at the next tick */
        log_warn("the system clock stepped by %+.1f s; the waits could not follow it yet: %s",
                 step / 1000.0, ldct_strerror(rc));
    if (rc)
        return;
    log_warn("the system clock stepped by %+.1f s; the quiet of receiving series, deferred jobs"
             " and send retries keep their lengths",
             s->clock_pending / 1000.0);
    s->clock_pending = 0;
}

/* systemd's watchdog interval for this ldctd (the unit's WatchdogSec) in
 * microseconds; 0 when none watches it (or one too short to answer). */
static uint64_t watchdog_usec(void)
{
    uint64_t usec = 0;
    return sd_watchdog_enabled(0, &usec) > 0 && usec >= 2000 ? usec : 0;
}

/* A job stalled for job_stall_seconds: one error naming it; then, under
 * systemd's watchdog, no more pings, so that systemd restarts ldctd (the
 * job runs again, or fails once its attempts are used). A job that reports
 * again, or ends, lifts it. */
static void check_stall(server *s)
{
    const int limit_s = s->cfg->node.job_stall_seconds;
    if (limit_s <= 0) { /* off (a reload may turn it on: it starts afresh) */
        s->stall.n = 0;
        s->stalled_job = 0;
        return;
    }
    int64_t silent = 0;
    int rc = 0;
    const stall_job *j = stall_check(&s->stall, s->db, ldct_mono_ms(), &silent, &rc);
    if (rc)
        return; /* the database is busy or failing: other checks say so */
    const int stalled = j && silent >= (int64_t)limit_s * 1000;
    if (stalled && s->stalled_job != j->id) {
        char what[200];
        stall_text(j, silent, what, sizeof what);
        log_err("%s (job_stall_seconds = %d): the job or its GPU hangs; %s", what, limit_s,
                watchdog_usec() ? "ldctd stops answering systemd's watchdog so that systemd"
                                  " restarts it; the job then runs again (each run is an attempt)"
                                : "restart ldctd (nothing queued is lost by it); without"
                                  " systemd's watchdog it does not restart by itself");
    } else if (!stalled && s->stalled_job)
        log_notice("job %lld reports progress again or ended: no job is stalled",
                   (long long)s->stalled_job);
    s->stalled_job = stalled ? j->id : 0;
}

static void on_stable_timer(uv_timer_t *t)
{
    server *s = t->data;
    follow_clock_steps(s);
    check_stall(s);
    int rc = db_series_mark_stable(s->db, ldct_now_ms(), on_series_stable, s);
    int failed = 0;
    if (rc < 0 && fail_run_first(&s->stable_fails))
        log_warn("stability check failed: %s (retrying every second)", ldct_strerror(rc));
    if (rc >= 0 && (failed = fail_run_end(&s->stable_fails)) > 0)
        log_notice("stability check works again after %d failed tries", failed);
    /* Series left stable by a failed decision (or beyond the callback batch)
     * are decided again, every 10 s. */
    if (++s->ticks % 10 == 0 && schedule_pending(s->db, s->cfg) > 0) {
        worker_pool_notify(s->workers);
        sender_pool_notify(s->senders);
    }
}

/* Rows of removed series whose last instance is history_days old go
 * (db_series_purge, a batch per retention tick). */
static void purge_history(server *s, int64_t now_ms)
{
    const int days = s->cfg->node.history_days;
    int n = 0, rc = days > 0 ? db_series_purge(s->db, now_ms - (int64_t)days * 86400000, &n) : 0;
    if (n > 0)
        log_info("history: deleted the rows of %d removed series last received over %d day(s)"
                 " ago",
                 n, days);
    if (rc < 0 && fail_run_first(&s->purge_fails))
        log_warn("history purge failed: %s (retrying every 5 s)", ldct_strerror(rc));
    if (rc >= 0 && (n = fail_run_end(&s->purge_fails)) > 0)
        log_notice("history purge works again after %d failed tries", n);
}

/* Once a day: the warnings of watch_tls (below) while they apply. */
static void warn_tls_daily(server *s, int64_t now_ms)
{
    if (now_ms < s->tls_warn_ms)
        return;
    const scp_tls_dates d = s->tls_dates; /* written on this thread */
    node_tls_warn(&s->cfg->node, &d, now_ms / 1000);
    s->tls_warn_ms = now_ms + 86400 * 1000LL;
}

/* The pool thread's part of a look at the quarantine. */
static void scan_quarantine(uv_work_t *r)
{
    quarantine_scan *q = r->data;
    q->removed = ingest_quarantine_expire(q->state_dir, q->days, q->now_ms, &q->totals);
}

/* Back on the loop thread: what the look found goes to /status and the log. */
static void quarantine_scanned(uv_work_t *r, int status)
{
    quarantine_scan *q = r->data;
    server *s = q->owner;
    q->busy = 0;
    if (status == UV_ECANCELED)
        return;
    if (q->removed < 0) {
        log_warn("quarantine: cannot read %s/quarantine: %s", q->state_dir,
                 ldct_strerror(q->removed));
        return;
    }
    __atomic_store_n(&s->quarantine_instances, q->totals.instances, __ATOMIC_RELAXED);
    __atomic_store_n(&s->quarantine_bytes, q->totals.bytes, __ATOMIC_RELAXED);
    if (q->removed > 0)
        log_notice("quarantine: deleted %d refused instance(s) kept over %d day(s)", q->removed,
                   q->days);
}

/* Once a minute: refused instances kept over quarantine_days are deleted,
 * and what is left is counted for /status and /metrics (on a pool thread;
 * a look still running delays the next). */
static void expire_quarantine(server *s, int64_t now_ms)
{
    quarantine_scan *q = &s->qscan;
    if (now_ms < s->quarantine_ms || q->busy)
        return;
    s->quarantine_ms = now_ms + QUARANTINE_CHECK_MS;
    snprintf(q->state_dir, sizeof q->state_dir, "%s", s->cfg->node.state_dir);
    q->days = s->cfg->node.quarantine_days;
    q->now_ms = now_ms;
    q->req.data = q;
    q->owner = s;
    /* The first call starts libuv's pool threads: they inherit a mask
     * that blocks every signal, as every thread but this one must (see
     * main). */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = uv_queue_work(&s->loop, &q->req, scan_quarantine, quarantine_scanned);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc)
        log_warn("quarantine: cannot start a look at it: %s", uv_strerror(rc));
    else
        q->busy = 1;
}

static void on_expire_timer(uv_timer_t *t)
{
    server *s = t->data;
    int rc = schedule_expire(s->db, s->cfg, ldct_now_ms()), failed = 0;
    purge_history(s, ldct_now_ms());
    warn_tls_daily(s, ldct_now_ms());
    expire_quarantine(s, ldct_now_ms());
    if (rc < 0 && fail_run_first(&s->expire_fails))
        log_warn("retention check failed: %s (retrying every 5 s)", ldct_strerror(rc));
    if (rc >= 0 && (failed = fail_run_end(&s->expire_fails)) > 0)
        log_notice("retention check works again after %d failed tries", failed);
}

/* ---- callbacks of worker and sender threads ---- */

static void worker_settings_get(void *ctx, worker_settings *out)
{
    server *s = ctx;
    pthread_mutex_lock(&s->cfg_lock);
    snprintf(out->uid_root, sizeof out->uid_root, "%s", s->cfg->node.uid_root);
    config_results_dir(s->cfg, out->results_dir, sizeof out->results_dir);
    out->job_max_attempts = s->cfg->node.job_max_attempts;
    out->min_free_mb = s->cfg->node.min_free_mb;
    out->gpu_check_seconds = s->cfg->node.gpu_check_seconds;
    out->gpu_down_wait_seconds = s->cfg->node.gpu_down_wait_seconds;
    pthread_mutex_unlock(&s->cfg_lock);
}

static void job_finished(void *ctx)
{
    sender_pool_notify(((server *)ctx)->senders);
}

static int destination_get(void *ctx, const char *name, cfg_destination *out)
{
    server *s = ctx;
    pthread_mutex_lock(&s->cfg_lock);
    const cfg_destination *d = config_destination_find(s->cfg, name);
    if (d)
        *out = *d;
    pthread_mutex_unlock(&s->cfg_lock);
    return d ? 0 : LDCT_ENOTFOUND;
}

static void on_watchdog(uv_timer_t *t)
{
    server *s = t->data;
    if (!s->stalled_job)
        sd_notify(0, "WATCHDOG=1");
}

static ingest_policy policy_of(const ldct_config *cfg)
{
    return (ingest_policy){.min_free_mb = cfg->node.min_free_mb,
                           .stable_seconds = schedule_quiet_seconds(cfg)};
}

static void log_config_errors(const ldct_config *cfg)
{
    for (int i = 0; i < cfg->nerr && i < CFG_ERR_MAX; i++)
        log_err("%s", cfg->err[i]);
    if (cfg->nerr > CFG_ERR_MAX)
        log_err("... and %d more error(s)", cfg->nerr - CFG_ERR_MAX);
}

/* Settings that only a restart applies: the reloaded configuration keeps
 * the running values (so everything that reads it tells the truth), and
 * each option the file changes is named with both values. */
#define KEEP_RUNNING_INT(f)                                                                        \
    do {                                                                                           \
        if (next->f != run->f) {                                                                   \
            log_warn("reload: " #f " = %d takes effect after a restart (running with %d)",         \
                     next->f, run->f);                                                             \
            next->f = run->f;                                                                      \
        }                                                                                          \
    } while (0)
#define KEEP_RUNNING_STR(f)                                                                        \
    do {                                                                                           \
        if (strcmp(next->f, run->f) != 0) {                                                        \
            log_warn("reload: " #f " = %s takes effect after a restart (running with %s)",         \
                     next->f, run->f);                                                             \
            snprintf(next->f, sizeof next->f, "%s", run->f);                                       \
        }                                                                                          \
    } while (0)
/* A listener that a restart will turn off goes on until then with the
 * files it has, so the file's empty tls_ keys do not refuse the reload. */
static void keep_tls_listener(const cfg_node *run, cfg_node *next)
{
    if (run->tls_port <= 0 || next->tls_port > 0)
        return;
    snprintf(next->tls_certificate, sizeof next->tls_certificate, "%s", run->tls_certificate);
    snprintf(next->tls_private_key, sizeof next->tls_private_key, "%s", run->tls_private_key);
    snprintf(next->tls_ca_certificates, sizeof next->tls_ca_certificates, "%s",
             run->tls_ca_certificates);
    snprintf(next->tls_crl, sizeof next->tls_crl, "%s", run->tls_crl);
    next->tls_require_client_certificate = run->tls_require_client_certificate;
    next->tls_profile = run->tls_profile;
    next->tls_caller_names = run->tls_caller_names;
    log_warn("reload: the TLS listener keeps its tls_ keys until the restart that turns it off");
}

/* A reload that adds tls_port (applied at the restart) leaves bound AE
 * titles unbound until then: bound, they could call neither over TLS (no
 * listener yet) nor without. */
static void keep_callers_unbound(const cfg_node *run, cfg_node *next)
{
    if (run->tls_port > 0 || next->tls_port <= 0 || next->tls_caller_names.n == 0)
        return;
    next->tls_caller_names = run->tls_caller_names;
    log_warn("reload: tls_caller_names takes effect with tls_port, after the restart");
}

/* As KEEP_RUNNING_INT, naming the value in force when the running one is
 * the default 0. */
static void keep_associations_per_host(const cfg_node *run, cfg_node *next)
{
    if (next->max_associations_per_host == run->max_associations_per_host)
        return;
    char in_force[32] = "";
    if (run->max_associations_per_host == 0)
        snprintf(in_force, sizeof in_force, ", i.e. %d", config_associations_per_host(run));
    log_warn("reload: max_associations_per_host = %d takes effect after a restart (running with "
             "%d%s)",
             next->max_associations_per_host, run->max_associations_per_host, in_force);
    next->max_associations_per_host = run->max_associations_per_host;
}

static void keep_restart_only(const cfg_node *run, cfg_node *next)
{
    keep_tls_listener(run, next);
    keep_callers_unbound(run, next);
    KEEP_RUNNING_INT(port);
    KEEP_RUNNING_STR(ae_title);
    KEEP_RUNNING_STR(state_dir);
    KEEP_RUNNING_INT(max_associations);
    keep_associations_per_host(run, next);
    KEEP_RUNNING_INT(max_pdu);
    KEEP_RUNNING_INT(acse_timeout);
    KEEP_RUNNING_INT(dimse_timeout);
    KEEP_RUNNING_STR(devices);
    KEEP_RUNNING_INT(sender_threads);
    KEEP_RUNNING_INT(http_port);
    KEEP_RUNNING_STR(http_bind);
    KEEP_RUNNING_INT(tls_port);
}
#undef KEEP_RUNNING_INT
#undef KEEP_RUNNING_STR

/* Notes when the TLS files of n run out, warns now when that is near, and
 * again daily from the expire timer. */
static void watch_tls(server *s, const cfg_node *n)
{
    scp_tls_dates d = {0};
    char why[600];
    if (node_tls_dates(n, &d, why, sizeof why))
        log_warn("TLS: %s: cannot tell when it runs out", why);
    node_tls_warn_crl_gaps(n);
    node_tls_warn_key_mode(n);
    __atomic_store_n(&s->tls_dates.certificate_not_after, d.certificate_not_after,
                     __ATOMIC_RELAXED);
    __atomic_store_n(&s->tls_dates.crl_next_update, d.crl_next_update, __ATOMIC_RELAXED);
    __atomic_store_n(&s->tls_dates.ca_not_after, d.ca_not_after, __ATOMIC_RELAXED);
    memcpy(s->tls_dates.ca_name, d.ca_name, sizeof d.ca_name); /* read on this thread only */
    s->tls_warn_ms = ldct_now_ms();                            /* the expire timer's next tick */
}

/* The TLS files, read again whether or not their paths changed (a renewed
 * certificate or revocation list keeps its path): the listener's for the
 * connections it accepts from now on, the senders' from their next send.
 * Nothing changes when a file does not load; 0 or -1 (logged). */
static int reload_tls(server *s, const ldct_config *cfg)
{
    char why[600];
    scp_tls_ctx *senders_tls = NULL;
    if (node_tls_sender(cfg, &senders_tls, why, sizeof why)) {
        log_err("reload: %s", why);
        return -1;
    }
    const scp_tls tls = node_tls(&cfg->node); /* the listener's, loaded just below */
    if (s->scp_tls && scp_server_reload_tls(s->scp_tls, &tls, why, sizeof why)) {
        log_err("reload: tls_port: %s", why);
        scp_tls_ctx_free(senders_tls);
        return -1;
    }
    sender_pool_set_tls(s->senders, senders_tls);
    watch_tls(s, &cfg->node);
    if (s->scp_tls)
        log_notice("reload: TLS files read again; new connections on tls_port %d use them",
                   cfg->node.tls_port);
    return 0;
}

static void reload(server *s)
{
    if (!s->config_path) {
        log_notice("SIGHUP: running on embedded defaults, nothing to reload");
        return;
    }
    ldct_config *cfg = NULL;
    int rc = config_load(s->config_path, &cfg);
    if (rc) {
        if (cfg)
            log_config_errors(cfg);
        else
            log_err("reload: cannot read %s: %s", s->config_path, ldct_strerror(rc));
        log_err("reload failed; keeping the running configuration");
        config_free(cfg);
        return;
    }
    keep_restart_only(&s->cfg->node, &cfg->node);
    char changes[8192]; /* cut with a mark when a reload changes more */
    config_changes(s->cfg, cfg, changes, sizeof changes);
    if (reload_tls(s, cfg)) {
        log_err("reload failed; keeping the running configuration");
        config_free(cfg);
        return;
    }
    pthread_mutex_lock(&s->cfg_lock);
    ldct_config *old = s->cfg;
    s->cfg = cfg;
    pthread_mutex_unlock(&s->cfg_lock);
    ingest_policy p = policy_of(cfg);
    ingest_policy_set(s->ingest, &p);
    use_interrupted_seconds(s->db, cfg->node.interrupted_seconds);
    log_level_set(cfg->node.log_level);
    config_free(old);
    log_notice("configuration reloaded from %s: %s", s->config_path,
               changes[0] ? changes : "nothing changed");
}

static void on_signal(uv_signal_t *h, int signum)
{
    server *s = h->data;
    if (signum == SIGHUP) {
        sd_notify(0, "RELOADING=1");
        reload(s);
        sd_notify(0, "READY=1");
        return;
    }
    log_notice("%s received: shutting down", signum == SIGTERM ? "SIGTERM" : "SIGINT");
    sd_notify(0, "STOPPING=1");
    uv_stop(&s->loop);
}

/* ---- setup and teardown ---- */

static int load_config(server *s)
{
    int rc = s->config_path ? config_load(s->config_path, &s->cfg) : config_new_defaults(&s->cfg);
    if (rc && s->cfg) {
        log_config_errors(s->cfg);
    } else if (rc) {
        log_err("cannot read %s: %s", s->config_path, ldct_strerror(rc));
    }
    if (!rc)
        log_level_set(s->cfg->node.log_level);
    return rc;
}

/* The TLS port: a second server with the same handlers, counted against
 * the same max_associations. */
static int start_dicom_tls(server *s, const scp_server_options *plain, const scp_handlers *h)
{
    const cfg_node *n = &s->cfg->node;
    scp_tls tls = node_tls(n);
    scp_server_options opt = *plain;
    opt.port = n->tls_port;
    opt.tls = &tls;
    scp_server *srv = NULL;
    int rc = scp_server_new(&opt, h, &srv);
    if (rc == 0)
        scp_server_share_limit(srv, s->scp);
    __atomic_store_n(&s->scp_tls, srv, __ATOMIC_RELEASE);
    if (rc == 0)
        rc = scp_server_start(srv);
    if (rc)
        log_err("cannot listen on tls_port %d: %s", n->tls_port, ldct_strerror(rc));
    return rc;
}

static int start_dicom(server *s)
{
    const cfg_node *n = &s->cfg->node;
    scp_server_options opt = {
        .ae_title = n->ae_title,
        .port = n->port,
        .max_associations = n->max_associations,
        .max_associations_per_host = config_associations_per_host(n),
        .acse_timeout_s = n->acse_timeout,
        .dimse_timeout_s = n->dimse_timeout,
        .max_pdu = (uint32_t)n->max_pdu,
    };
    scp_handlers h = {.ctx = s,
                      .check_association = check_association,
                      .allow_host = allow_host,
                      .store_begin = store_begin,
                      .store_min_free_mb = store_min_free_mb,
                      .store_end = store_end,
                      .assoc_interrupted = assoc_interrupted};
    scp_server *srv = NULL;
    int rc = scp_server_new(&opt, &h, &srv);
    /* The HTTP thread already serves /status: publish the receiver whole.
     * With port = 0 it is never started: it only holds max_associations
     * for the TLS server. */
    __atomic_store_n(&s->scp, srv, __ATOMIC_RELEASE);
    if (rc == 0 && n->port > 0)
        rc = scp_server_start(s->scp);
    if (rc)
        log_err("cannot listen on port %d: %s", n->port, ldct_strerror(rc));
    else if (n->port == 0)
        log_notice("port = 0: no plain DICOM listener, TLS only");
    if (rc == 0 && n->tls_port > 0)
        rc = start_dicom_tls(s, &opt, &h);
    return rc;
}

/* The daemon part of a status snapshot; runs on the HTTP thread. */
static void live_status(void *ctx, status_snapshot *st)
{
    server *s = ctx;
    st->daemon = LDCTD_RUNNING;
    st->daemon_pid = (long)getpid();
    st->uptime_s = (ldct_now_ms() - s->started_ms) / 1000;
    scp_server *srv = __atomic_load_n(&s->scp, __ATOMIC_ACQUIRE),
               *tls = __atomic_load_n(&s->scp_tls, __ATOMIC_ACQUIRE);
    st->associations_active =
        (srv ? scp_server_active(srv) : 0) + (tls ? scp_server_active(tls) : 0);
    scp_server_counts c = {0};
    scp_server_add_counts(srv, &c);
    scp_server_add_counts(tls, &c);
    st->conn_accepted = c.accepted;
    st->conn_rejected = c.rejected;
    st->conn_failed = c.failed;
    st->refused_resources = c.refused_resources;
    st->refused_error = c.refused_error;
    char dir[sizeof s->cfg->node.state_dir + 8];
    pthread_mutex_lock(&s->cfg_lock);
    snprintf(dir, sizeof dir, "%s/spool", s->cfg->node.state_dir); /* what ingest guards */
    st->min_free_bytes = (int64_t)s->cfg->node.min_free_mb * 1024 * 1024;
    pthread_mutex_unlock(&s->cfg_lock);
    uint64_t avail = 0, total = 0;
    st->free_bytes = fs_space_bytes(dir, &avail, &total) == 0 ? (int64_t)avail : -1;
    st->tls_not_after = __atomic_load_n(&s->tls_dates.certificate_not_after, __ATOMIC_RELAXED);
    st->tls_crl_next_update = __atomic_load_n(&s->tls_dates.crl_next_update, __ATOMIC_RELAXED);
    st->tls_ca_not_after = __atomic_load_n(&s->tls_dates.ca_not_after, __ATOMIC_RELAXED);
    st->quarantine_instances = __atomic_load_n(&s->quarantine_instances, __ATOMIC_RELAXED);
    st->quarantine_bytes = __atomic_load_n(&s->quarantine_bytes, __ATOMIC_RELAXED);
    st->workers = s->nworkers;
    st->gpus_down = s->workers ? worker_pool_gpus_down(s->workers) : 0;
}

/* The status listener, when http_port is set. One that cannot listen stops
 * the start, as the DICOM port does: monitoring that silently reaches
 * whatever else holds the port would report the wrong node as healthy. */
static int start_http(server *s)
{
    const cfg_node *n = &s->cfg->node;
    if (n->http_port <= 0)
        return 0;
    char db_path[1100];
    ingest_db_path(n->state_dir, db_path, sizeof db_path);
    http_opts o = {.bind = n->http_bind,
                   .port = n->http_port,
                   .db_path = db_path,
                   .live = live_status,
                   .ctx = s};
    int rc = http_start(&o, &s->http);
    if (rc == LDCT_EINPUT) /* http_bind is checked with the configuration: not reached */
        log_err("cannot start the status listener: http_bind = %s is no numeric address",
                n->http_bind);
    else if (rc)
        log_err("cannot start the status listener (http_port = %d): %s; free the port, choose "
                "another, or set http_port = 0",
                n->http_port, ldct_strerror(rc));
    else
        log_info("status over HTTP on %s port %d (/status, /metrics, /healthz)", n->http_bind,
                 n->http_port);
    return rc;
}

void server_block_stop_signals(void)
{
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGHUP);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
}

static void start_loop_handles(server *s)
{
    uv_signal_t *sigs[] = {&s->sig_term, &s->sig_int, &s->sig_hup};
    int nums[] = {SIGTERM, SIGINT, SIGHUP}, failed = 0;
    for (int i = 0; i < 3; i++) {
        uv_signal_init(&s->loop, sigs[i]);
        sigs[i]->data = s;
        failed |= uv_signal_start(sigs[i], on_signal, nums[i]) != 0;
    }
    /* main blocked them until here; only this thread takes them now. If
     * the handlers could not be installed, SIGHUP stays blocked (never
     * fatal) and SIGTERM and SIGINT stop the node the default way. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    if (failed)
        log_err("cannot handle signals: SIGHUP will not reload, SIGTERM may not stop cleanly");
    else
        sigaddset(&stop, SIGHUP);
    pthread_sigmask(SIG_UNBLOCK, &stop, NULL);
    uv_timer_init(&s->loop, &s->stable_timer);
    s->stable_timer.data = s;
    uv_timer_start(&s->stable_timer, on_stable_timer, STABLE_CHECK_MS, STABLE_CHECK_MS);
    uv_timer_init(&s->loop, &s->expire_timer);
    s->expire_timer.data = s;
    uv_timer_start(&s->expire_timer, on_expire_timer, 0, EXPIRE_CHECK_MS);
    uv_timer_init(&s->loop, &s->watchdog_timer);
    s->watchdog_timer.data = s;
    const uint64_t usec = watchdog_usec();
    if (usec) {
        log_info("systemd watchdog every %llu ms", (unsigned long long)usec / 2000);
        uv_timer_start(&s->watchdog_timer, on_watchdog, usec / 2000, usec / 2000);
    }
}

static void close_handle(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

/* Seconds left of the shutdown budget that started at t0 (>= 0). */
static int grace_left(const server *s, int64_t t0)
{
    if (!s->cfg) /* the configuration never loaded: nothing runs */
        return 0;
    int64_t left = s->cfg->node.shutdown_grace_seconds - (ldct_now_ms() - t0) / 1000;
    return left > 0 ? (int)left : 0;
}

/* One shutdown_grace_seconds budget for associations, jobs and sends
 * together (at most 55 s, config), so systemd's TimeoutStopSec of 60 s is not
 * reached. Work cut off is not lost: jobs and sends go on at the next
 * start. */
/* At a stop: what is still queued goes on at the next start; say so. */
static void log_queue_left(server *s)
{
    db_queue_totals q;
    if (!s->db || db_queue_totals_get(s->db, &q) != 0)
        return;
    const long long jobs = q.jobs_pending + q.jobs_running,
                    sends = q.sends_pending + q.sends_sending;
    if (jobs || sends)
        log_notice("%lld job(s) and %lld send(s) still queued; they go on at the next start", jobs,
                   sends);
}

/* The receiver stopped cleanly: every association ended or was aborted and
 * marked (db_series_interrupted), so the next start need not suspect the
 * receiving series. */
static void mark_reception_stopped(server *s)
{
    if (s->lock_fd >= 0 && (ftruncate(s->lock_fd, 0) != 0 || fsync(s->lock_fd) != 0))
        log_warn("cannot empty the lock file: the next start holds receiving series longer");
}

/* Ends the process with a job or send thread still running (they use the
 * database, the config and the GPU: nothing is freed). What they ran is
 * pending again, the run uncounted: a restart is no failure of the job or
 * the destination. Nothing acknowledged is lost. */
static _Noreturn void exit_cut_off(server *s)
{
    int jobs = 0, sends = 0;
    if (s->db && db_stop_cut_off(s->db, ldct_now_ms(), &jobs, &sends) == 0)
        log_notice("ldctd stopped (%d job(s) and %d send(s) cut off; they run again at the next"
                   " start, this run not counted as one of their attempts)",
                   jobs, sends);
    else
        log_notice("ldctd stopped (work was cut off; it goes on at the next start)");
    _exit(s->exit_code);
}

static void shutdown_all(server *s)
{
    const int64_t t0 = ldct_now_ms();
    http_set_stopping(s->http);    /* answers "stopping" until the end */
    worker_pool_drain(s->workers); /* no job starts only to be cut off at the grace's end */
    if (s->scp) {
        int active = scp_server_active(s->scp) + (s->scp_tls ? scp_server_active(s->scp_tls) : 0);
        if (active)
            log_notice("waiting up to %d s for %d association(s)",
                       s->cfg->node.shutdown_grace_seconds, active);
        scp_server *const ports[] = {s->scp, s->scp_tls};
        scp_servers_stop(ports, 2, s->cfg->node.shutdown_grace_seconds);
        scp_server_free(s->scp_tls);
        scp_server_free(s->scp);
        mark_reception_stopped(s);
    } else if (!s->unclean_start || s->suspects_marked) {
        mark_reception_stopped(s); /* a failed start: nothing received, nothing to hand on */
    }
    if (s->workers && worker_pool_busy(s->workers))
        log_notice("waiting up to %d s for running jobs", grace_left(s, t0));
    if (worker_pool_stop(s->workers, s->workers ? grace_left(s, t0) : 0))
        exit_cut_off(s); /* a job longer than the grace */
    if (sender_pool_stop(s->senders, grace_left(s, t0)))
        exit_cut_off(s); /* a peer that does not answer within the grace */
    log_queue_left(s);
    http_stop(s->http);
    s->http = NULL;
    /* Closing the signal handles restores the default actions, under which
     * a late SIGHUP (logrotate) or a second SIGTERM would kill a stop that
     * has already handed everything on: blocked in this thread across the
     * close (the other threads block all three from the start), then
     * ignored. */
    server_block_stop_signals();
    uv_walk(&s->loop, close_handle, NULL);
    signal(SIGHUP, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    uv_run(&s->loop, UV_RUN_DEFAULT);
    uv_loop_close(&s->loop);
    ingest_free(s->ingest);
    db_close(s->db);
    config_free(s->cfg);
    pthread_mutex_destroy(&s->cfg_lock);
}

/* What the lock file says of the run before: "PID receiving" while it
 * received (it ended without stopping its receiver: killed or crashed,
 * mark_reception_stopped empties the file), empty after a clean stop. A
 * bare PID comes from an ldctd older than this mark, which never emptied
 * the file (or from one that refused this database): nothing is known of
 * how it stopped, so it counts as a clean stop, as it did for that
 * version. */
static int lock_says_unclean(int fd, const char *path)
{
    char text[64] = "";
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    text[n > 0 ? n : 0] = '\0';
    int receiving = lockfile_text_receiving(text);
    if (receiving >= 0)
        return receiving;
    log_notice("%s was left by an older ldctd, which did not record how it stopped; series that"
               " were receiving are treated as after a clean stop",
               path);
    return 0;
}

/* One daemon per state directory: a second one would requeue the first's
 * running jobs and sends and delete its partial receptions. The lock is
 * held (fd left open) for the life of the process. */
static int lock_state(server *s, const char *state_dir)
{
    char path[1100];
    int rc = fs_mkdirs(state_dir);
    if (rc)
        return rc;
    lockfile_path(state_dir, path, sizeof path);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0640);
    if (fd < 0)
        return -errno;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        char pid[32] = "";
        ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
        pid[n > 0 ? n : 0] = '\0';
        pid[strspn(pid, "0123456789")] = '\0';
        log_err("another ldctd (pid %s) uses %s; refusing to start", pid[0] ? pid : "?", state_dir);
        close(fd);
        return e == EWOULDBLOCK ? -EBUSY : -e;
    }
    s->unclean_start = lock_says_unclean(fd, path);
    s->lock_fd = fd;
    char pid[48];
    int len = snprintf(pid, sizeof pid, "%d" LOCKFILE_RECEIVING "\n", (int)getpid());
    /* Synced: after a power loss the next start must still find the pid. */
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len || fsync(fd) != 0)
        log_warn("cannot write the pid into %s", path);
    return 0;
}

/* A database made by an older version under a lax umask may be readable by
 * every local user: other users lose access to it and its WAL files. */
static void make_database_private(const char *db_path)
{
    static const char *const suffixes[] = {"", "-wal", "-shm"};
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        char path[1200];
        struct stat st;
        snprintf(path, sizeof path, "%s%s", db_path, suffixes[i]);
        if (stat(path, &st) != 0 || !(st.st_mode & S_IRWXO))
            continue;
        if (chmod(path, st.st_mode & 0770) == 0)
            log_notice("%s was open to other users (mode %04o); now %04o", path,
                       (unsigned)(st.st_mode & 07777), (unsigned)(st.st_mode & 0770));
        else
            log_warn("%s is open to other users (mode %04o) and cannot be changed: %s", path,
                     (unsigned)(st.st_mode & 07777), strerror(errno));
    }
}

/* 0 when a TCP listener could bind the numeric address addr, port port
 * now, else -errno (EADDRINUSE: another program listens there; EACCES: a
 * port under 1024 without the right). The socket is closed at once. */
static int port_probe(const char *addr, int port)
{
    struct sockaddr_in v4 = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    struct sockaddr_in6 v6 = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port)};
    const int is_v4 = inet_pton(AF_INET, addr, &v4.sin_addr) == 1;
    if (!is_v4 && inet_pton(AF_INET6, addr, &v6.sin6_addr) != 1)
        return -EINVAL;
    int fd = socket(is_v4 ? AF_INET : AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    const int one = 1; /* as the listeners: a port in TIME_WAIT is free */
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    int rc = is_v4 ? bind(fd, (const struct sockaddr *)&v4, sizeof v4)
                   : bind(fd, (const struct sockaddr *)&v6, sizeof v6);
    rc = rc == 0 && listen(fd, 1) == 0 ? 0 : -errno;
    close(fd);
    return rc;
}

/* The ports ldctd listens on, tried before the state is touched: a start
 * that cannot listen then creates no state directory, recovers nothing and
 * starts no job only to stop it. A port taken after the probe still stops
 * the start when its listener binds. */
static int probe_ports(const server *s)
{
    const cfg_node *n = &s->cfg->node;
    const struct {
        const char *option, *addr;
        int port;
    } ports[] = {{"port", "0.0.0.0", n->port},
                 {"tls_port", "0.0.0.0", n->tls_port},
                 {"http_port", n->http_bind, n->http_port}};
    for (size_t i = 0; i < sizeof ports / sizeof ports[0]; i++) {
        int rc = ports[i].port > 0 ? port_probe(ports[i].addr, ports[i].port) : 0;
        if (!rc)
            continue;
        long pid;
        if (lockfile_daemon_state(n->state_dir, &pid) == LDCTD_RUNNING)
            log_err("another ldctd (pid %ld) uses %s; refusing to start", pid, n->state_dir);
        else
            log_err("cannot listen on %s %d: %s; free the port or choose another%s",
                    ports[i].option, ports[i].port, ldct_strerror(rc),
                    i == 2 ? ", or set http_port = 0" : "");
        return rc;
    }
    return 0;
}

static int open_state(server *s)
{
    int lrc = lock_state(s, s->cfg->node.state_dir);
    if (lrc)
        return lrc;
    ingest_policy p = policy_of(s->cfg);
    int rc = ingest_new(s->cfg->node.state_dir, &p, &s->ingest);
    if (rc)
        return rc;
    char path[1100];
    snprintf(path, sizeof path, "%s/fdk-tune.cache", s->cfg->node.state_dir);
    gpu_fdk_tune_cache_set(path); /* written by `ldct tune fdk` */
    ingest_db_path(s->cfg->node.state_dir, path, sizeof path);
    make_database_private(path);
    if ((rc = db_open(path, 0, &s->db)))
        return rc;
    db_series_quiet_from(s->db, s->started_ms); /* a series cut off by the stop waits */
    use_interrupted_seconds(s->db, s->cfg->node.interrupted_seconds);
    int jobs = 0, sends = 0;
    rc = db_recover(s->db, s->cfg->node.job_max_attempts, ldct_now_ms(), &jobs, &sends);
    if (!rc && (jobs || sends))
        log_notice("recovered after an unclean stop: %d job(s) and %d send(s) queued again", jobs,
                   sends);
    if (!rc) /* a step back while stopped left times in the future */
        rc = db_clock_clamp(s->db, ldct_now_ms());
    int held = 0;
    if (!rc && s->unclean_start &&
        (rc = db_series_interrupt_receiving(s->db, ldct_now_ms(), &held)) == 0)
        s->suspects_marked = 1;
    if (held)
        log_notice("%d series were receiving when the last run ended without stopping (killed or"
                   " crashed); each waits for its sender's resend (interrupted_seconds) before it"
                   " counts as complete",
                   held);
    return rc;
}

static int start_pipeline(server *s)
{
    char state[1100], db_path[1100], outbox[1100], err[256];
    const cfg_node *n = &s->cfg->node;
    snprintf(state, sizeof state, "%s", n->state_dir);
    ingest_db_path(state, db_path, sizeof db_path);
    snprintf(outbox, sizeof outbox, "%s/outbox", state);
    worker_pool_opts w = {.db_path = db_path,
                          .outbox_dir = outbox,
                          .settings = worker_settings_get,
                          .job_done = job_finished,
                          .ctx = s};
    int rc = worker_devices_parse(n->devices, w.dev, WORKER_MAX, err, sizeof err);
    if (rc < 0) {
        log_err("devices = %s: %s", n->devices, err);
        return rc;
    }
    w.ndev = rc;
    s->nworkers = rc;
    char why[600];
    scp_tls_ctx *senders_tls = NULL;
    if ((rc = node_tls_check(s->cfg, why, sizeof why)) ||
        (rc = node_tls_sender(s->cfg, &senders_tls, why, sizeof why))) {
        log_err("%s", why); /* found now rather than at the first send */
        return rc;
    }
    watch_tls(s, n);
    sender_pool_opts so = {.db_path = db_path,
                           .threads = n->sender_threads,
                           .calling_ae = n->ae_title,
                           .tls = senders_tls,
                           .destination = destination_get,
                           .ctx = s};
    if ((rc = sender_pool_start(&so, &s->senders)) || (rc = worker_pool_start(&w, &s->workers))) {
        log_err("cannot start the workers: %s", ldct_strerror(rc));
        return rc;
    }
    rc = schedule_pending(s->db, s->cfg);
    return rc < 0 ? rc : 0;
}

/* " (/abs/path)" for a relative state_dir, which follows the working
 * directory (under systemd /var/lib/ldct): where ldct must look too. */
static void state_dir_absolute(const char *dir, char *out, size_t len)
{
    char abs[PATH_MAX];
    out[0] = '\0';
    if (dir[0] != '/' && realpath(dir, abs))
        snprintf(out, len, " (%s)", abs);
}

int server_run(const char *config_path)
{
    server s = {.quarantine_instances = -1,
                .quarantine_bytes = -1,
                .config_path = config_path,
                .exit_code = 0,
                .started_ms = ldct_now_ms(),
                .clock_offset = INT64_MIN,
                .lock_fd = -1};
    pthread_mutex_init(&s.cfg_lock, NULL);
    uv_loop_init(&s.loop);
    int rc = load_config(&s);
    if (!rc && (rc = scp_global_init()))
        log_err("DICOM initialisation failed: %s", ldct_strerror(rc));
    if (!rc)
        rc = probe_ports(&s);
    if (!rc && (rc = open_state(&s)))
        log_err("cannot open the state in %s: %s", s.cfg->node.state_dir, ldct_strerror(rc));
    if (!rc)
        rc = start_pipeline(&s);
    if (!rc)
        rc = start_http(&s);
    if (!rc)
        rc = start_dicom(&s);
    if (rc) {
        s.exit_code = 1; /* also if shutdown_all has to _exit for a recovered job */
        log_err("ldctd not started (the reason is above)");
        shutdown_all(&s);
        return 1;
    }
    start_loop_handles(&s);
    const cfg_node *n = &s.cfg->node;
    warn_open_node(n);
    char ports[64] = "", where[PATH_MAX + 4] = "";
    if (n->port == 0)
        snprintf(ports, sizeof ports, "TLS port %d only", n->tls_port);
    else if (n->tls_port > 0)
        snprintf(ports, sizeof ports, "port %d (TLS on %d)", n->port, n->tls_port);
    else
        snprintf(ports, sizeof ports, "port %d", n->port);
    state_dir_absolute(n->state_dir, where, sizeof where);
    log_notice("ldctd ready: AE %s on %s, state in %s%s%s%s", n->ae_title, ports, n->state_dir,
               where, config_path ? ", config " : ", embedded defaults",
               config_path ? config_path : "");
    sd_notifyf(0, "READY=1\nSTATUS=listening as %s on %s", n->ae_title, ports);
    uv_run(&s.loop, UV_RUN_DEFAULT);
    shutdown_all(&s);
    log_notice("ldctd stopped");
    return s.exit_code;
}
