/* ldct jobs and ldct retry: what the workers and senders did, how far a running
 * job is, and putting failed work back in the queue. Single-threaded (the ldct
 * process). */
#include "common/clock.h"
#include "common/err.h"
#include "common/json.h"
#include "config/config.h"
#include "daemon/cli.h"
#include "daemon/status.h"
#include "db/queue.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct list_ctx {
    int json, jobs, sends_open; /* JSON: jobs printed, inside a sends array */
    int killed;                 /* no ldctd runs and the last one was killed */
    int stopped;                /* no ldctd runs (killed or stopped) */
    int64_t now;
} list_ctx;

static void json_field(const char *name, const char *v, int comma)
{
    printf("%s\"%s\":", comma ? "," : "", name);
    json_write_string(stdout, v);
}

static void close_job_json(list_ctx *c)
{
    if (c->jobs)
        printf("]}");
}

/* A job's last_error holds a note instead of an error while it is
 * superseded, waits for disk space, or was queued again by ldct retry. */
static int job_has_note(const db_job_row *j)
{
    int waiting = strncmp(j->last_error, DB_JOB_WAIT_SPACE, strlen(DB_JOB_WAIT_SPACE)) == 0;
    return j->superseded || waiting || strcmp(j->last_error, DB_JOB_RETRIED) == 0;
}

/* Shown as running, but no ldctd runs it: the last one was killed. */
static int job_cut_off(const list_ctx *c, const db_job_row *j)
{
    return c->killed && strcmp(j->state, "running") == 0;
}

static void job_json(list_ctx *c, const db_job_row *j)
{
    const int note = j->last_error[0] && job_has_note(j);
    close_job_json(c);
    printf("%s{\"id\":%lld", c->jobs ? ",\n" : "", (long long)j->id);
    json_field("series_uid", j->series_uid, 1);
    json_field("rule", j->rule, 1);
    json_field("action", j->action, 1);
    json_field("algorithm", j->algorithm, 1);
    json_field("ran_algorithm", j->ran_algorithm, 1);
    json_field("state", j->state, 1);
    json_field("worker", j->worker, 1);
    json_field("derived_series_uid", j->derived_series_uid, 1);
    json_field("last_error", note ? "" : j->last_error, 1);
    json_field("note", note ? j->last_error : "", 1);
    printf(",\"instances\":%d,\"attempts\":%d,\"priority\":%d,\"created_ms\":%lld,"
           "\"started_ms\":%lld,\"finished_ms\":%lld,\"superseded\":%s,\"cut_off\":%s",
           j->instances, j->attempts, j->priority, (long long)j->created_ms,
           (long long)j->started_ms, (long long)j->finished_ms, j->superseded ? "true" : "false",
           job_cut_off(c, j) ? "true" : "false");
    status_write_progress_json(stdout, j->progress_stage, j->progress_fraction,
                               j->progress_remaining_ms, j->progress_updated_ms);
    printf(",\"sends\":[");
    c->sends_open = 0;
}

/* Shown as sending, but no ldctd sends it: the last one was killed. */
static int send_cut_off(const list_ctx *c, const db_send_row *s)
{
    return c->killed && strcmp(s->state, "sending") == 0;
}

static void send_json(list_ctx *c, const db_send_row *s)
{
    printf("%s{\"id\":%lld", c->sends_open ? "," : "", (long long)s->id);
    json_field("what", s->what, 1);
    json_field("destination", s->destination, 1);
    json_field("state", s->state, 1);
    json_field("last_error", s->last_error, 1);
    printf(",\"attempts\":%d,\"next_attempt_ms\":%lld,\"created_ms\":%lld,\"finished_ms\":%lld,"
           "\"cut_off\":%s}",
           s->attempts, (long long)s->next_attempt_ms, (long long)s->created_ms,
           (long long)s->finished_ms, send_cut_off(c, s) ? "true" : "false");
    c->sends_open = 1;
}

/* "-" for a job not started; a time from a damaged row (negative) too,
 * rather than overflow the difference. */
static void seconds_text(int64_t from, int64_t to, char *out, size_t len)
{
    if (from > 0 && to >= from)
        snprintf(out, len, "%.1f s", (double)(to - from) / 1000.0);
    else
        snprintf(out, len, "-");
}

/* "    progress filtering 45%, about 2 min 30 s left (updated 3 s ago)". */
static void progress_text(const list_ctx *c, const db_job_row *j)
{
    char t[160];
    if (j->progress_updated_ms > 0)
        printf("    progress %s\n",
               status_progress_text(j->progress_stage, j->progress_fraction,
                                    j->progress_remaining_ms, j->progress_updated_ms, c->now, t,
                                    sizeof t));
}

/* "nlm3d (auto)" once a run resolved auto, else the job's algorithm. */
static const char *algorithm_text(const db_job_row *j, char *out, size_t len)
{
    if (j->ran_algorithm[0] && strcmp(j->ran_algorithm, j->algorithm) != 0)
        snprintf(out, len, "%s (%s)", j->ran_algorithm, j->algorithm);
    else
        snprintf(out, len, "%s", j->algorithm);
    return out;
}

static void job_text(list_ctx *c, const db_job_row *j)
{
    char created[32], run[32], algo[48];
    ldct_time_format(j->created_ms, created, sizeof created);
    /* A job cut off ran until its last report at most, not until now. */
    const int64_t cut = j->progress_updated_ms > 0 ? j->progress_updated_ms : j->started_ms;
    seconds_text(j->started_ms,
                 j->finished_ms      ? j->finished_ms
                 : job_cut_off(c, j) ? cut
                                     : c->now,
                 run, sizeof run);
    printf("job %lld  %-8s %-7s %-6s rule %s, %d instance(s), attempts %d, created %s, ran %s\n",
           (long long)j->id, j->state, j->action, algorithm_text(j, algo, sizeof algo), j->rule,
           j->instances, j->attempts, created, run);
    printf("    series  %s\n", j->series_uid);
    if (j->derived_series_uid[0]) /* fixed when the job is made; made real when it is done */
        printf("    derived %s%s\n", j->derived_series_uid,
               strcmp(j->state, "done") != 0 ? " (reserved for its result)" : "");
    progress_text(c, j);
    if (job_cut_off(c, j))
        printf("    cut off: ldctd was killed or crashed during this run; it runs again at the"
               " next start\n");
    if (j->last_error[0] && job_has_note(j))
        printf("    %s\n", j->last_error);
    else if (j->last_error[0])
        printf("    error   %s\n", j->last_error);
}

/* A pending send's ", next try in 12 s"; while no ldctd runs, ", next try
 * once ldctd runs" (and the backoff's end, if still ahead). "" otherwise. */
static void next_try_text(const list_ctx *c, const db_send_row *s, char *out, size_t len)
{
    char at[32];
    out[0] = '\0';
    if (s->state[0] && s->state[0] != 'p')
        return;
    if (c->stopped && s->next_attempt_ms > c->now) {
        ldct_time_format(s->next_attempt_ms, at, sizeof at);
        snprintf(out, len, ", next try once ldctd runs, not before %s", at);
    } else if (c->stopped)
        snprintf(out, len, ", next try once ldctd runs");
    else
        snprintf(out, len, ", next try in %.0f s",
                 s->next_attempt_ms > c->now ? (double)(s->next_attempt_ms - c->now) / 1000.0
                                             : 0.0);
}

static void send_text(list_ctx *c, const db_send_row *s)
{
    char next[64];
    /* A send in progress still holds the error of the attempt before it. */
    const char *sep = !s->last_error[0]                  ? ""
                      : strcmp(s->state, "sending") == 0 ? ", previous attempt: "
                                                         : ": ";
    next_try_text(c, s, next, sizeof next);
    printf("    send %lld %-8s %s to %s, attempts %d%s%s%s\n", (long long)s->id, s->what, s->state,
           s->destination, s->attempts, next, sep, s->last_error);
    if (send_cut_off(c, s))
        printf("      cut off: ldctd was killed or crashed during this send; it sends again at"
               " the next start\n");
}

static void on_job(void *ctx, const db_job_row *j)
{
    list_ctx *c = ctx;
    if (c->json)
        job_json(c, j);
    else
        job_text(c, j);
    c->jobs++;
}

static void on_send(void *ctx, const db_send_row *s)
{
    list_ctx *c = ctx;
    if (c->json)
        send_json(c, s);
    else
        send_text(c, s);
}

int cli_jobs(cli_opts *o)
{
    db *d;
    if (cli_open_db(o, 1, &d))
        return 1;
    list_ctx c = {.json = o->json, .now = ldct_now_ms()};
    long pid;
    const ldctd_state daemon = cli_daemon_state(o, &pid);
    c.killed = daemon == LDCTD_KILLED;
    c.stopped = daemon == LDCTD_KILLED || daemon == LDCTD_STOPPED;
    if (c.json)
        printf("[");
    int rc = db_jobs_list(d, o->limit, on_job, on_send, &c);
    if (c.json) {
        close_job_json(&c);
        printf("]\n");
    } else if (c.jobs == 0 && rc == 0) { /* not when the jobs could not be read */
        printf("no jobs\n");
    }
    db_close(d);
    return rc ? 1 : 0;
}

/* --to must name a destination of the daemon's configuration: 0, the
 * exit status 2 when it was called wrong (no --config, no such
 * destination) or 1 when the configuration cannot be used. */
static int retry_destination_check(const cli_opts *o)
{
    if (!o->config) {
        fprintf(stderr,
                "ldct retry: --to needs --config FILE, the configuration that has"
                " [destination %s]\n",
                o->to);
        return 2;
    }
    ldct_config *cfg;
    if (cli_config(o, &cfg))
        return 1;
    int found = config_destination_find(cfg, o->to) != NULL;
    if (!found)
        fprintf(stderr, "ldct retry: --to %s: %s has no [destination %s]\n", o->to, o->config,
                o->to);
    config_free(cfg);
    return found ? 0 : 2;
}

/* Without --to, each dead send goes back to its own destination, and a
 * failed job sends to those it names once it ran: with --config, one the
 * file no longer has would only die again at once, so
 * the retry is refused (exit status 2) and the message names --to. 0 when
 * every one is there, or without --config (the daemon's file is unknown). */
static int retry_own_destinations_check(const cli_opts *o, db *d, long long id)
{
    if (o->to || !o->config)
        return 0;
    ldct_config *cfg;
    if (cli_config(o, &cfg))
        return 1;
    db_strings names = {0, NULL};
    int rc = db_job_retry_destinations(d, id, &names), missing = 0;
    for (int i = 0; !rc && i < names.n; i++) {
        if (config_destination_find(cfg, names.v[i]))
            continue;
        fprintf(stderr,
                "ldct retry: job %lld would send to '%s' and fail again: %s has no"
                " [destination %s] (renamed or removed?); ldct retry %lld --to DEST [--from %s]"
                " sends there instead\n",
                id, names.v[i], o->config, names.v[i], id, names.v[i]);
        missing = 1;
    }
    db_strings_free(&names);
    config_free(cfg);
    if (rc)
        fprintf(stderr, "ldct: retry failed: %s\n", ldct_strerror(rc));
    return rc ? 1 : missing ? 2 : 0;
}

/* "job 13: 2 item(s) queued again, 1 send moved to pacs4; 1 dead send kept
 * its destination (...)". */
static void retry_text(long long id, const db_retry *r)
{
    printf("job %lld: %d item(s) queued again", id, r->changed);
    if (r->to)
        printf(", %d send(s) moved to %s", r->moved, r->to);
    if (r->kept)
        printf("; %d dead send(s) retried to their own destination instead (%s has this job's"
               " series or is sent it already; --from DEST picks the one to move)",
               r->kept, r->to);
    printf("\n");
}

int cli_retry(cli_opts *o)
{
    char *end = NULL;
    errno = 0;
    long long id = o->argc == 1 ? strtoll(o->argv[0], &end, 10) : 0;
    if (o->argc != 1 || *end || errno || id <= 0 || (o->from && !o->to)) {
        fprintf(stderr, "usage: ldct retry JOB [--to DEST [--from OLD]] [--json] (a job number"
                        " from ldct jobs; --from only with --to)\n");
        return 2;
    }
    int bad = o->to ? retry_destination_check(o) : 0;
    if (bad)
        return bad;
    db *d;
    if (cli_open_db(o, 0, &d))
        return 1;
    if ((bad = retry_own_destinations_check(o, d, id))) {
        db_close(d);
        return bad;
    }
    db_retry r = {.to = o->to, .from = o->from};
    int rc = db_job_retry_with(d, id, &r);
    db_close(d);
    if (rc == LDCT_ENOTFOUND) {
        fprintf(stderr, "ldct: no job %lld\n", id);
        return 1;
    }
    if (rc) {
        fprintf(stderr, "ldct: retry failed: %s\n", ldct_strerror(rc));
        return 1;
    }
    if (o->json)
        printf("{\"job\":%lld,\"queued_again\":%d,\"moved\":%d,\"kept\":%d}\n", id, r.changed,
               r.moved, r.kept);
    else if (r.changed == 0)
        printf("job %lld has nothing failed or dead to retry\n", id);
    else
        retry_text(id, &r);
    return 0;
}

/* Why series_uid was not released: 0 when it is receiving without a hold
 * (nothing to do), 1 after saying it is not there or not receiving. */
static int release_refused(db *d, const char *series_uid)
{
    char state[16];
    int marked = 0, rc = db_series_state(d, series_uid, state, sizeof state, &marked);
    if (rc == LDCT_ENOTFOUND)
        fprintf(stderr, "ldct release: no series %s (ldct series lists them)\n", series_uid);
    else if (rc)
        fprintf(stderr, "ldct release: %s: %s\n", series_uid, ldct_strerror(rc));
    else if (strcmp(state, "receiving") != 0)
        fprintf(stderr, "ldct release: series %s is %s, not receiving: nothing to release\n",
                series_uid, state);
    else
        fprintf(stderr,
                "ldct release: series %s is not held: it becomes stable once quiet for"
                " its stable_seconds\n",
                series_uid);
    return rc || strcmp(state, "receiving") != 0;
}

/* Releases the series named, or with --all every held one; *released. */
static int release_series(const cli_opts *o, db *d, int *released)
{
    *released = 0;
    if (o->all)
        return db_series_release(d, NULL, released) ? 1 : 0;
    int failed = 0;
    for (int i = 0; i < o->argc; i++) {
        int n = 0;
        if (db_series_release(d, o->argv[i], &n))
            failed = 1;
        else if (n == 0)
            failed |= release_refused(d, o->argv[i]);
        *released += n;
    }
    return failed;
}

int cli_release(cli_opts *o)
{
    if ((o->argc == 0) == !o->all) {
        fprintf(stderr, "usage: ldct release SERIES_UID... | --all [--json] (the series UIDs"
                        " from ldct series)\n");
        return 2;
    }
    db *d;
    if (cli_open_db(o, 0, &d))
        return 1;
    int released, failed = release_series(o, d, &released);
    db_close(d);
    if (o->json)
        printf("{\"released\":%d}\n", released);
    else if (released)
        printf("released %d held series; each is processed once quiet for its stable_seconds\n",
               released);
    else if (o->all)
        printf("no series is held\n");
    return failed;
}
