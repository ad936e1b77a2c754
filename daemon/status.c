/* Snapshot of the node's state and its JSON / Prometheus forms; see status.h. */
#include "daemon/status.h"

#include "common/clock.h"
#include "common/json.h"
#include "daemon/version.h"
#include "pipeline/job_progress.h"

#include <string.h>

/* Longer than this without an update, the worker may be stuck: said plainly. */
#define PROGRESS_STALE_MS 60000

#define COPY(dst, src) snprintf((dst), sizeof(dst), "%s", (src))

static void add_running(void *ctx, const db_job_row *j)
{
    status_snapshot *s = ctx;
    if (s->nrunning >= STATUS_MAX_RUNNING)
        return;
    status_job *r = &s->running[s->nrunning++];
    r->id = j->id;
    r->started_ms = j->started_ms;
    r->attempts = j->attempts;
    COPY(r->rule, j->rule);
    COPY(r->algorithm, j->algorithm);
    COPY(r->worker, j->worker);
    COPY(r->stage, j->progress_stage);
    r->fraction = j->progress_fraction;
    r->remaining_ms = j->progress_remaining_ms;
    r->updated_ms = j->progress_updated_ms;
}

int status_read(db *d, int with_running, status_snapshot *s)
{
    s->now_ms = ldct_now_ms();
    s->uptime_s = -1;
    s->daemon = LDCTD_UNKNOWN;
    s->daemon_pid = 0;
    s->quarantine_instances = s->quarantine_bytes = -1;
    s->associations_active = -1;
    s->workers = -1;
    s->gpus_down = -1;
    s->nrunning = 0;
    int rc = db_read_begin(d);
    if (rc)
        return rc;
    if (!(rc = db_totals_get(d, &s->t)) && !(rc = db_queue_totals_get(d, &s->q)))
        rc = db_destination_totals_get(d, s->dest, STATUS_MAX_DESTINATIONS, &s->ndest);
    if (!rc && with_running)
        rc = db_jobs_running(d, STATUS_MAX_RUNNING, add_running, s);
    db_read_end(d);
    return rc;
}

void status_write_progress_json(FILE *f, const char *stage, double fraction, int64_t remaining_ms,
                                int64_t updated_ms)
{
    if (updated_ms <= 0) {
        fputs(",\"progress\":null", f);
        return;
    }
    fputs(",\"progress\":{\"stage\":", f);
    json_write_string(f, stage);
    if (fraction >= 0)
        fprintf(f, ",\"fraction\":%.6g", fraction);
    else
        fputs(",\"fraction\":null", f);
    if (remaining_ms >= 0)
        fprintf(f, ",\"stage_remaining_ms\":%lld", (long long)remaining_ms);
    else
        fputs(",\"stage_remaining_ms\":null", f);
    fprintf(f, ",\"updated_ms\":%lld}", (long long)updated_ms);
}

char *status_progress_text(const char *stage, double fraction, int64_t remaining_ms,
                           int64_t updated_ms, int64_t now_ms, char *buf, size_t len)
{
    buf[0] = '\0';
    if (updated_ms <= 0)
        return buf;
    int64_t age = now_ms > updated_ms ? now_ms - updated_ms : 0;
    char pct[8] = "", left[64] = "", t[48];
    if (fraction >= 0)
        snprintf(pct, sizeof pct, " %d%%", job_progress_percent(fraction));
    if (remaining_ms > age) {
        ldct_duration_format(remaining_ms - age, t, sizeof t);
        snprintf(left, sizeof left, ", about %s left", t);
    } else if (remaining_ms >= 0) {
        snprintf(left, sizeof left, ", nearly done"); /* by the estimate */
    }
    ldct_duration_format(age, t, sizeof t);
    snprintf(buf, len, "%s%s%s (%s %s%s)", stage, pct, left,
             age > PROGRESS_STALE_MS ? "no update for" : "updated", t,
             age > PROGRESS_STALE_MS ? "" : " ago");
    return buf;
}

/* Unix seconds, or null for 0 (not set). */
static void json_time_or_null(FILE *f, int64_t t)
{
    if (t > 0)
        fprintf(f, "%lld", (long long)t);
    else
        fputs("null", f);
}

static void json_daemon_part(FILE *f, const status_snapshot *s)
{
    if (s->uptime_s < 0)
        return;
    fprintf(f,
            ",\"version\":\"%s\",\"uptime_s\":%lld,\"associations_active\":%d,\"workers\":%d,"
            "\"gpus_down\":%d",
            LDCT_VERSION, (long long)s->uptime_s, s->associations_active, s->workers, s->gpus_down);
    fprintf(f, ",\"connections\":{\"accepted\":%lld,\"rejected\":%lld,\"failed\":%lld}",
            (long long)s->conn_accepted, (long long)s->conn_rejected, (long long)s->conn_failed);
    fprintf(f, ",\"refused\":{\"resources\":%lld,\"error\":%lld}", (long long)s->refused_resources,
            (long long)s->refused_error);
    fprintf(f, ",\"free_bytes\":%lld,\"min_free_bytes\":%lld", (long long)s->free_bytes,
            (long long)s->min_free_bytes);
    if (s->quarantine_instances >= 0)
        fprintf(f, ",\"quarantine\":{\"instances\":%lld,\"bytes\":%lld}",
                (long long)s->quarantine_instances, (long long)s->quarantine_bytes);
    fputs(",\"tls\":{\"certificate_not_after\":", f);
    json_time_or_null(f, s->tls_not_after);
    fputs(",\"crl_next_update\":", f);
    json_time_or_null(f, s->tls_crl_next_update);
    fputs(",\"ca_not_after\":", f);
    json_time_or_null(f, s->tls_ca_not_after);
    fputc('}', f);
}

/* ,"running":[{...}]: the running jobs with their progress. */
static void json_running(FILE *f, const status_snapshot *s)
{
    fputs(",\"running\":[", f);
    for (int i = 0; i < s->nrunning; i++) {
        const status_job *j = &s->running[i];
        fprintf(f, "%s{\"id\":%lld,\"rule\":", i ? "," : "", (long long)j->id);
        json_write_string(f, j->rule);
        fputs(",\"algorithm\":", f);
        json_write_string(f, j->algorithm);
        fputs(",\"worker\":", f);
        json_write_string(f, j->worker);
        fprintf(f, ",\"attempts\":%d,\"started_ms\":%lld", j->attempts, (long long)j->started_ms);
        status_write_progress_json(f, j->stage, j->fraction, j->remaining_ms, j->updated_ms);
        fputc('}', f);
    }
    fputc(']', f);
}

/* ,"destinations":[{"destination":..,"queued":..,..}]: the open sends by
 * destination. */
static void json_destinations(FILE *f, const status_snapshot *s)
{
    fputs(",\"destinations\":[", f);
    for (int i = 0; i < s->ndest; i++) {
        const db_destination_totals *t = &s->dest[i];
        fputs(i ? ",{\"destination\":" : "{\"destination\":", f);
        json_write_string(f, t->destination);
        fprintf(f, ",\"queued\":%lld,\"retrying\":%lld,\"sending\":%lld,\"dead\":%lld}",
                (long long)t->queued, (long long)t->retrying, (long long)t->sending,
                (long long)t->dead);
    }
    fputc(']', f);
}

void status_write_json(FILE *f, const status_snapshot *s)
{
    const db_totals *t = &s->t;
    const db_queue_totals *q = &s->q;
    fprintf(f,
            "{\"series\":%lld,\"instances\":%lld,\"receiving\":%lld,\"stable\":%lld,"
            "\"bytes\":%lld,\"last_received_ms\":%lld,\"jobs\":{\"pending\":%lld,"
            "\"running\":%lld,\"done\":%lld,\"failed\":%lld},\"sends\":{\"pending\":%lld,"
            "\"sending\":%lld,\"done\":%lld,\"dead\":%lld}",
            (long long)t->series, (long long)t->instances, (long long)t->receiving,
            (long long)t->stable, (long long)t->bytes, (long long)t->last_received_ms,
            (long long)q->jobs_pending, (long long)q->jobs_running, (long long)q->jobs_done,
            (long long)q->jobs_failed, (long long)q->sends_pending, (long long)q->sends_sending,
            (long long)q->sends_done, (long long)q->sends_dead);
    fputs(",\"series_states\":{", f);
    for (int i = 0; i < DB_SERIES_NSTATES; i++)
        fprintf(f, "%s\"%s\":%lld", i ? "," : "", db_series_states[i], (long long)t->by_state[i]);
    fputc('}', f);
    json_destinations(f, s);
    fprintf(f, ",\"ldctd\":{\"state\":\"%s\",\"pid\":", ldctd_state_name(s->daemon));
    if (s->daemon_pid > 0)
        fprintf(f, "%ld}", s->daemon_pid);
    else
        fputs("null}", f);
    json_running(f, s);
    json_daemon_part(f, s);
    fputs("}\n", f);
}

static void metric(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void labelled(FILE *f, const char *name, const char *const *labels, const int64_t *v, int n)
{
    for (int i = 0; i < n; i++)
        fprintf(f, "%s{state=\"%s\"} %lld\n", name, labels[i], (long long)v[i]);
}

/* A label value as the exposition format escapes it (\\, \", \n). */
static void label_value(FILE *f, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\' || *v == '"')
            fputc('\\', f), fputc(*v, f);
        else if (*v == '\n')
            fputs("\\n", f);
        else
            fputc(*v, f);
    }
}

/* ldct_destination_sends{destination=..,state=..}: the open sends of each
 * destination that has any (alert on retrying > 0: its PACS is refusing or
 * unreachable). */
static void prometheus_destinations(FILE *f, const status_snapshot *s)
{
    static const char *const states[] = {"queued", "retrying", "sending", "dead"};
    metric(f, "ldct_destination_sends", "gauge",
           "Open sends of each destination that has any: queued (not tried yet), retrying"
           " (waiting after a failed attempt), sending, dead (ldct retry requeues them).");
    for (int i = 0; i < s->ndest; i++) {
        const db_destination_totals *t = &s->dest[i];
        const int64_t v[] = {t->queued, t->retrying, t->sending, t->dead};
        for (int k = 0; k < 4; k++) {
            fputs("ldct_destination_sends{destination=\"", f);
            label_value(f, t->destination);
            fprintf(f, "\",state=\"%s\"} %lld\n", states[k], (long long)v[k]);
        }
    }
}

/* The TLS dates that are set (an alert rule compares them with time()). */
static void prometheus_tls(FILE *f, const status_snapshot *s)
{
    if (s->tls_not_after > 0) {
        metric(f, "ldct_tls_certificate_expiry_timestamp_seconds", "gauge",
               "Unix time the node's TLS certificate (tls_certificate) expires.");
        fprintf(f, "ldct_tls_certificate_expiry_timestamp_seconds %lld\n",
                (long long)s->tls_not_after);
    }
    if (s->tls_ca_not_after > 0) {
        metric(f, "ldct_tls_ca_expiry_timestamp_seconds", "gauge",
               "Unix time the first CA certificate expires, of tls_ca_certificates and the"
               " chain in tls_certificate (past it, peers whose certificates chain to it, or"
               " the node's own, are refused).");
        fprintf(f, "ldct_tls_ca_expiry_timestamp_seconds %lld\n", (long long)s->tls_ca_not_after);
    }
    if (s->tls_crl_next_update > 0) {
        metric(f, "ldct_tls_crl_next_update_timestamp_seconds", "gauge",
               "Unix time of the earliest next update of the lists in tls_crl (past it,"
               " every TLS peer is refused).");
        fprintf(f, "ldct_tls_crl_next_update_timestamp_seconds %lld\n",
                (long long)s->tls_crl_next_update);
    }
}

/* Seconds since the running job that has gone longest without reporting
 * progress last did (its start if it never did); 0 when none runs. */
static double progress_age_s(const status_snapshot *s)
{
    int64_t oldest = 0;
    for (int i = 0; i < s->nrunning; i++) {
        const status_job *j = &s->running[i];
        int64_t age = s->now_ms - (j->updated_ms > 0 ? j->updated_ms : j->started_ms);
        if (age > oldest)
            oldest = age;
    }
    return (double)oldest / 1e3;
}

static void prometheus_progress(FILE *f, const status_snapshot *s)
{
    metric(f, "ldct_job_progress_age_seconds", "gauge",
           "Seconds since the running job that has gone longest without reporting progress"
           " last did (since its start if never); 0 when none runs. A job or GPU that hangs"
           " shows as a value that keeps growing.");
    fprintf(f, "ldct_job_progress_age_seconds %.1f\n", progress_age_s(s));
}

void status_write_prometheus(FILE *f, const status_snapshot *s)
{
    static const char *const job_states[] = {"pending", "running", "done", "failed"};
    static const char *const send_states[] = {"pending", "sending", "done", "dead"};
    const int64_t jobs[] = {s->q.jobs_pending, s->q.jobs_running, s->q.jobs_done, s->q.jobs_failed};
    const int64_t sends[] = {s->q.sends_pending, s->q.sends_sending, s->q.sends_done,
                             s->q.sends_dead};
    metric(f, "ldct_series", "gauge", "Series known to the node (rows in the queue).");
    fprintf(f, "ldct_series %lld\n", (long long)s->t.series);
    metric(f, "ldct_series_receiving", "gauge", "Series still receiving instances.");
    fprintf(f, "ldct_series_receiving %lld\n", (long long)s->t.receiving);
    metric(f, "ldct_series_by_state", "gauge", "Series by state (they add up to ldct_series).");
    labelled(f, "ldct_series_by_state", db_series_states, s->t.by_state, DB_SERIES_NSTATES);
    metric(f, "ldct_instances", "gauge", "Instances held in the spool.");
    fprintf(f, "ldct_instances %lld\n", (long long)s->t.instances);
    metric(f, "ldct_spool_bytes", "gauge", "Bytes of the instances held in the spool.");
    fprintf(f, "ldct_spool_bytes %lld\n", (long long)s->t.bytes);
    metric(f, "ldct_last_received_timestamp_seconds", "gauge",
           "Unix time of the last instance received (0: none).");
    fprintf(f, "ldct_last_received_timestamp_seconds %.3f\n", (double)s->t.last_received_ms / 1e3);
    metric(f, "ldct_jobs", "gauge", "Jobs by state.");
    labelled(f, "ldct_jobs", job_states, jobs, 4);
    prometheus_progress(f, s);
    metric(f, "ldct_sends", "gauge", "Sends (series to one destination) by state.");
    labelled(f, "ldct_sends", send_states, sends, 4);
    prometheus_destinations(f, s);
    if (s->uptime_s < 0)
        return;
    metric(f, "ldct_uptime_seconds", "gauge", "Seconds since ldctd started.");
    fprintf(f, "ldct_uptime_seconds %lld\n", (long long)s->uptime_s);
    metric(f, "ldct_associations_active", "gauge", "DICOM associations running now.");
    fprintf(f, "ldct_associations_active %d\n", s->associations_active);
    metric(f, "ldct_connections_total", "counter",
           "DICOM connections since ldctd started: accepted (an association), rejected"
           " (A-ASSOCIATE-RJ), failed (no usable request: a TLS handshake refused, an"
           " unreadable request).");
    fprintf(f, "ldct_connections_total{outcome=\"accepted\"} %lld\n", (long long)s->conn_accepted);
    fprintf(f, "ldct_connections_total{outcome=\"rejected\"} %lld\n", (long long)s->conn_rejected);
    fprintf(f, "ldct_connections_total{outcome=\"failed\"} %lld\n", (long long)s->conn_failed);
    metric(f, "ldct_instances_refused_total", "counter",
           "C-STOREs answered with a failure status since ldctd started: resources (0xA7xx:"
           " below min_free_mb or the spool full; the sender may resend) and error (every"
           " other failure: invalid or unstorable data; the log names each).");
    fprintf(f, "ldct_instances_refused_total{reason=\"resources\"} %lld\n",
            (long long)s->refused_resources);
    fprintf(f, "ldct_instances_refused_total{reason=\"error\"} %lld\n",
            (long long)s->refused_error);
    if (s->free_bytes >= 0) {
        metric(f, "ldct_spool_free_bytes", "gauge",
               "Bytes free for ldctd on the spool's file system (state_dir/spool).");
        fprintf(f, "ldct_spool_free_bytes %lld\n", (long long)s->free_bytes);
    }
    metric(f, "ldct_spool_min_free_bytes", "gauge",
           "min_free_mb in bytes: with less free on the spool every C-STORE is refused (0xA700).");
    fprintf(f, "ldct_spool_min_free_bytes %lld\n", (long long)s->min_free_bytes);
    if (s->quarantine_instances >= 0) {
        metric(f, "ldct_quarantine_instances", "gauge",
               "Instances refused for their content and kept in state_dir/quarantine (deleted"
               " after quarantine_days); counted once a minute.");
        fprintf(f, "ldct_quarantine_instances %lld\n", (long long)s->quarantine_instances);
        metric(f, "ldct_quarantine_bytes", "gauge",
               "Bytes in state_dir/quarantine (the instances and their .reason files).");
        fprintf(f, "ldct_quarantine_bytes %lld\n", (long long)s->quarantine_bytes);
    }
    prometheus_tls(f, s);
    metric(f, "ldct_workers", "gauge", "Processing workers (one per device).");
    fprintf(f, "ldct_workers %d\n", s->workers);
    metric(f, "ldct_gpus_down", "gauge",
           "Workers whose GPU does not work (their jobs go to the others).");
    fprintf(f, "ldct_gpus_down %d\n", s->gpus_down);
    metric(f, "ldct_build_info", "gauge", "Always 1; the version in a label.");
    fprintf(f, "ldct_build_info{version=\"%s\"} 1\n", LDCT_VERSION);
}
