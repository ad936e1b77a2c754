/* Jobs, derived instances and sends in SQLite; see queue.h for the state
 * machine and db.h for the threading contract. Every multi-row change runs
 * in one BEGIN IMMEDIATE transaction. */
#include "db/queue.h"

#include "common/err.h"
#include "common/log.h"
#include "db/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Statement cache slots (db__stmt). */
enum {
    Q_SERIES_GET,
    Q_SERIES_PATHS,
    Q_SERIES_STABLE,
    Q_SERIES_DEFER,
    Q_SERIES_STATE,
    Q_SERIES_EXPIRED,
    Q_SERIES_DEL_INSTANCES,
    Q_SERIES_REMOVED,
    Q_SERIES_DERIVED_PATHS,
    Q_SERIES_DEL_DERIVED,
    Q_JOB_INSERT,
    Q_SEND_INSERT,
    Q_SERIES_AFTER_CREATE,
    Q_JOB_CLAIM,
    Q_DERIVED_INSERT,
    Q_DERIVED_GET,
    Q_DERIVED_PATH,
    Q_JOB_DONE,
    Q_SERIES_DONE,
    Q_SERIES_AFTER_FAIL,
    Q_PENDING_OF_SERIES,
    Q_SERIES_REQUEUE,
    Q_JOB_SAME_RUN,
    Q_DERIVED_COUNT,
    Q_DERIVED_FORGET,
    Q_JOB_SERIES_SHARED,
    Q_JOB_SET_SERIES,
    Q_JOB_STARTED,
    Q_DERIVED_HAS,
    Q_JOB_HAS_DERIVED,
    Q_JOB_ADOPT_SERIES,
    Q_JOB_SERIES_UID,
    Q_JOB_SUPERSEDED,
    Q_SERIES_OF_JOB,
    Q_JOB_FAILED,
    Q_JOB_DEFER,
    Q_JOB_EXISTS,
    Q_JOB_RETRY,
    Q_SENDS_RETRY,
    Q_SENDS_REDIRECT,
    Q_SENDS_REDIRECTABLE,
    Q_RECOVER_FAIL,
    Q_RECOVER_JOBS,
    Q_RECOVER_SENDS,
    Q_JOBS_LIST,
    Q_JOB_SENDS,
    Q_TOTALS,
    Q_DEST_TOTALS,
    Q_SEND_CLAIM,
    Q_SEND_PATHS_DERIVED,
    Q_SEND_DONE,
    Q_SEND_FAILED,
    Q_SEND_INTERRUPTED,
    Q_PURGE_DUE,
    Q_PURGE_DERIVED,
    Q_PURGE_SENDS,
    Q_PURGE_JOBS,
    Q_PURGE_INSTANCES,
    Q_PURGE_SERIES,
    Q_CLOCK_SERIES,
    Q_CLOCK_JOBS,
    Q_CLOCK_SENDS,
    Q_CLAMP_SERIES,
    Q_CLAMP_JOBS,
    Q_CLAMP_SENDS,
    Q_PROGRESS_PUT,
    Q_PROGRESS_CLEAR,
    Q_PROGRESS_HAS,
    Q_JOBS_LIST_V8,
    Q_JOBS_RUNNING,
    Q_JOBS_RUNNING_V8,
    Q_CUT_JOBS,
    Q_CUT_SENDS,
    Q_RAN_PUT,
    Q_RAN_HAS,
    Q_RAN_GET,
    Q_DEAD_DESTINATIONS,
    Q_COUNT
};
_Static_assert(Q_COUNT <= DB__QST_MAX, "raise DB__QST_MAX");

static void copy(char *dst, size_t len, const char *src)
{
    snprintf(dst, len, "%s", src ? src : "");
}

#define COPY_COL(dst, s, i) copy((dst), sizeof(dst), db__col_text((s), (i)))

void db_strings_free(db_strings *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
    s->v = NULL;
    s->n = 0;
}

static int strings_push(db_strings *s, const char *v, int *cap)
{
    if (s->n == *cap) {
        int ncap = *cap ? *cap * 2 : 64;
        char **nv = realloc(s->v, (size_t)ncap * sizeof *nv);
        if (!nv)
            return -ENOMEM;
        s->v = nv;
        *cap = ncap;
    }
    if (!(s->v[s->n] = strdup(v)))
        return -ENOMEM;
    s->n++;
    return 0;
}

/* Collects column 0 of every row of a bound statement. */
static int collect_strings(db *d, sqlite3_stmt *s, db_strings *out, const char *what)
{
    int cap = 0, rc = 0, step;
    *out = (db_strings){0, NULL};
    while ((step = sqlite3_step(s)) == SQLITE_ROW && !rc)
        rc = strings_push(out, db__col_text(s, 0), &cap);
    sqlite3_reset(s);
    if (!rc && step != SQLITE_DONE)
        rc = db__fail(d, what);
    if (rc)
        db_strings_free(out);
    return rc;
}

/* Runs a bound statement that returns no rows. */
static int run(db *d, sqlite3_stmt *s, const char *what)
{
    if (!s)
        return LDCT_EDB;
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    return rc == SQLITE_DONE ? 0 : db__fail(d, what);
}

static int begin(db *d)
{
    return db__exec(d, "BEGIN IMMEDIATE");
}

/* Commits when rc == 0, else rolls back; returns rc or the commit's error. */
static int end(db *d, int rc)
{
    if (!rc && !(rc = db__exec(d, "COMMIT")))
        return 0;
    db__rollback(d);
    return rc;
}

/* ---- series --------------------------------------------------------------- */

int db_series_get(db *d, const char *series_uid, db_series_info *out)
{
    sqlite3_stmt *s = db__stmt(d, Q_SERIES_GET,
                               "SELECT id, study_uid, series_uid, modality, calling_ae, called_ae,"
                               " state, instance_count, stable_seconds, last_received_ms,"
                               " coalesce(stable_ms, 0) FROM series WHERE series_uid = ?1");
    if (!s)
        return LDCT_EDB;
    db__bind_text(s, 1, series_uid);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        out->id = sqlite3_column_int64(s, 0);
        COPY_COL(out->study_uid, s, 1);
        COPY_COL(out->series_uid, s, 2);
        COPY_COL(out->modality, s, 3);
        COPY_COL(out->calling_ae, s, 4);
        COPY_COL(out->called_ae, s, 5);
        COPY_COL(out->state, s, 6);
        out->instances = sqlite3_column_int(s, 7);
        out->stable_seconds = sqlite3_column_int(s, 8);
        out->last_received_ms = sqlite3_column_int64(s, 9);
        out->stable_ms = sqlite3_column_int64(s, 10);
    }
    sqlite3_reset(s);
    return rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? LDCT_ENOTFOUND : db__fail(d, "series get");
}

int db_series_paths(db *d, int64_t series_id, db_strings *paths)
{
    sqlite3_stmt *s = db__stmt(d, Q_SERIES_PATHS,
                               "SELECT path FROM instances WHERE series_id = ?1 ORDER BY path");
    if (!s)
        return LDCT_EDB;
    sqlite3_bind_int64(s, 1, series_id);
    return collect_strings(d, s, paths, "series paths");
}

int db_job_retry_destinations(db *d, int64_t job_id, db_strings *names)
{
    /* A failed job's list is "a,b" (sends_for_list): split it in SQL. */
    sqlite3_stmt *s = db__stmt(d, Q_DEAD_DESTINATIONS,
                               "WITH RECURSIVE split(name, rest) AS ("
                               " SELECT '', destinations || ',' FROM jobs"
                               "  WHERE id = ?1 AND state = 'failed'"
                               " UNION ALL SELECT substr(rest, 1, instr(rest, ',') - 1),"
                               "  substr(rest, instr(rest, ',') + 1) FROM split WHERE rest != '')"
                               " SELECT name FROM split WHERE name != ''"
                               " UNION SELECT destination FROM sends WHERE job_id = ?1"
                               " AND state = 'dead' ORDER BY 1");
    if (!s)
        return LDCT_EDB;
    sqlite3_bind_int64(s, 1, job_id);
    return collect_strings(d, s, names, "retry destinations");
}

int db_series_stable_uids(db *d, db_strings *uids)
{
    sqlite3_stmt *s = db__stmt(d, Q_SERIES_STABLE,
                               "SELECT series_uid FROM series WHERE state = 'stable'"
                               " ORDER BY stable_ms, id");
    if (!s)
        return LDCT_EDB;
    return collect_strings(d, s, uids, "stable series");
}

int db_series_defer(db *d, int64_t series_id, int stable_seconds)
{
    sqlite3_stmt *s = db__stmt(d, Q_SERIES_DEFER,
                               "UPDATE series SET state = 'receiving', stable_ms = NULL,"
                               " stable_seconds = ?2 WHERE id = ?1 AND state = 'stable'");
    if (!s)
        return LDCT_EDB;
    sqlite3_bind_int64(s, 1, series_id);
    sqlite3_bind_int(s, 2, stable_seconds);
    return run(d, s, "series defer");
}

int db_series_set_state(db *d, int64_t series_id, const char *state)
{
    sqlite3_stmt *s = db__stmt(d, Q_SERIES_STATE,
                               "UPDATE series SET state = ?2 WHERE id = ?1 AND state = 'stable'");
    if (!s)
        return LDCT_EDB;
    sqlite3_bind_int64(s, 1, series_id);
    db__bind_text(s, 2, state);
    return run(d, s, "series state");
}

/* A done series (alias s) whose every job is done and every send delivered,
 * the last of them finished at or before ?1. */
#define DELIVERED_BEFORE_1                                                                         \
    "NOT EXISTS (SELECT 1 FROM jobs j WHERE j.series_id = s.id AND j.state != 'done')"             \
    " AND NOT EXISTS (SELECT 1 FROM sends x WHERE x.series_id = s.id AND x.state != 'done')"       \
    " AND COALESCE((SELECT max(finished_ms) FROM sends x WHERE x.series_id = s.id),"               \
    " (SELECT max(finished_ms) FROM jobs j WHERE j.series_id = s.id), s.stable_ms) <= ?1"

int db_series_expired(db *d, int64_t before_ms, db_expired_cb cb, void *ctx)
{
    sqlite3_stmt *s = db__stmt(d, Q_SERIES_EXPIRED,
                               "SELECT id, series_uid, state FROM series s WHERE"
                               " (state IN ('unmatched','discarded') AND stable_ms <= ?1)"
                               " OR (state = 'done' AND " DELIVERED_BEFORE_1 ") LIMIT 100");
    if (!s)
        return LDCT_EDB;
    sqlite3_bind_int64(s, 1, before_ms);
    /* Copy first: the callback removes rows, which must not happen while
     * this statement is still stepping over them. */
    typedef struct {
        int64_t id;
        char uid[DB_UID_LEN], state[16];
    } row;
    row rows[100];
    int n = 0, rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW && n < 100) {
        rows[n].id = sqlite3_column_int64(s, 0);
        COPY_COL(rows[n].uid, s, 1);
        COPY_COL(rows[n].state, s, 2);
        n++;
    }
    sqlite3_reset(s);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW)
        return db__fail(d, "series expired");
    for (int i = 0; i < n; i++)
        cb(ctx, rows[i].id, rows[i].uid, rows[i].state);
    return n;
}

/* Marks an unmatched / discarded / delivered series removed; LDCT_ENOTFOUND
 * if it is in another state now (reopened by a resend since the expiry
 * query, or a send requeued). */
static int series_mark_removed(db *d, int64_t series_id)
{
    sqlite3_stmt *s = db__stmt(d, Q_SERIES_REMOVED,
                               "UPDATE series AS s SET state = 'removed' WHERE id = ?2"
                               " AND (state IN ('unmatched', 'discarded') OR (state = 'done'"
                               " AND " DELIVERED_BEFORE_1 "))");
    if (s) {
        sqlite3_bind_int64(s, 1, INT64_MAX); /* delivered, whenever */
        sqlite3_bind_int64(s, 2, series_id);
    }
    int rc = run(d, s, "series removed");
    return rc ? rc : sqlite3_changes(d->h) == 1 ? 0 : LDCT_ENOTFOUND;
}

/* The outbox files of the series' delivered derived instances (jobs with
 * destinations; files in the results folder are the output and stay): their
 * paths go into *paths and are cleared in the rows, which keep the derived
 * UIDs for a later job of the same series. */
static int derived_paths_release(db *d, int64_t series_id, db_strings *paths)
{
#define DELIVERED_DERIVED                                                                          \
    " FROM derived_instances WHERE path != '' AND job_id IN (SELECT id FROM jobs WHERE"            \
    " series_id = ?1 AND destinations != '')"
    /* Two statements: RETURNING would give the paths after the update. */
    sqlite3_stmt *s = db__stmt(d, Q_SERIES_DERIVED_PATHS, "SELECT path" DELIVERED_DERIVED);
    if (!s)
        return LDCT_EDB;
    sqlite3_bind_int64(s, 1, series_id);
    db_strings more;
    int rc = collect_strings(d, s, &more, "derived paths"), cap = paths->n;
    for (int i = 0; !rc && i < more.n; i++)
        rc = strings_push(paths, more.v[i], &cap); /* cap = n: the first push reallocates */
    db_strings_free(&more);
    sqlite3_stmt *u = rc ? NULL
                         : db__stmt(d, Q_SERIES_DEL_DERIVED,
                                    "UPDATE derived_instances SET path = '' WHERE rowid IN"
                                    " (SELECT rowid" DELIVERED_DERIVED ")");
    if (u)
        sqlite3_bind_int64(u, 1, series_id);
    return rc ? rc : run(d, u, "release derived paths");
#undef DELIVERED_DERIVED
}

int db_series_remove(db *d, int64_t series_id, db_strings *paths)
{
    *paths = (db_strings){0, NULL};
    int rc = begin(d);
    if (!rc)
        rc = series_mark_removed(d, series_id);
    sqlite3_stmt *s = NULL;
    if (!rc && (s = db__stmt(d, Q_SERIES_DEL_INSTANCES,
                             "DELETE FROM instances WHERE series_id = ?1 RETURNING path"))) {
        sqlite3_bind_int64(s, 1, series_id);
        rc = collect_strings(d, s, paths, "remove instances");
    } else if (!rc) {
        rc = LDCT_EDB;
    }
    if (!rc)
        rc = derived_paths_release(d, series_id, paths);
    if (!rc)
        rc = db__exec(d, "UPDATE series SET instance_count = 0 WHERE state = 'removed'");
    rc = end(d, rc);
    if (rc)
        db_strings_free(paths);
    return rc;
}

/* ---- jobs ----------------------------------------------------------------- */

static int send_insert(db *d, int64_t job_id, int64_t series_id, const char *what, const char *dest,
                       int64_t now_ms)
{
    sqlite3_stmt *s = db__stmt(d, Q_SEND_INSERT,
                               "INSERT INTO sends (job_id, series_id, what, destination,"
                               " created_ms) VALUES (?1, ?2, ?3, ?4, ?5)");
    if (!s)
        return LDCT_EDB;
    sqlite3_bind_int64(s, 1, job_id);
    sqlite3_bind_int64(s, 2, series_id);
    db__bind_text(s, 3, what);
    db__bind_text(s, 4, dest);
    sqlite3_bind_int64(s, 5, now_ms);
    return run(d, s, "send insert");
}

/* One send row per name of a comma-separated destination list. */
static int sends_for_list(db *d, int64_t job_id, int64_t series_id, const char *what,
                          const char *list, int64_t now_ms)
{
    char buf[DB_DEST_LIST_LEN];
    copy(buf, sizeof buf, list);
    char *save = NULL;
    int rc = 0;
    for (char *t = strtok_r(buf, ",", &save); t && !rc; t = strtok_r(NULL, ",", &save))
        if (*t)
            rc = send_insert(d, job_id, series_id, what, t, now_ms);
    return rc;
}

static int job_insert(db *d, const db_job_spec *j, int64_t now_ms, int64_t *job_id)
{
    sqlite3_stmt *s =
        db__stmt(d, Q_JOB_INSERT,
                 "INSERT INTO jobs (series_id, rule, action, algorithm, params, priority, state,"
                 " derived_series_uid, destinations, description_suffix, created_ms, finished_ms)"
                 " SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12"
                 " WHERE EXISTS (SELECT 1 FROM series WHERE id = ?1 AND state = 'stable')"
                 " RETURNING id");
    if (!s)
        return LDCT_EDB;
    sqlite3_bind_int64(s, 1, j->series_id);
    db__bind_text(s, 2, j->rule);
    db__bind_text(s, 3, j->action);
    db__bind_text(s, 4, j->algorithm);
    db__bind_text(s, 5, j->params);
    sqlite3_bind_int(s, 6, j->priority);
    db__bind_text(s, 7, j->process ? "pending" : "done");
    if (j->derived_series_uid)
        db__bind_text(s, 8, j->derived_series_uid);
    db__bind_text(s, 9, j->destinations);
    db__bind_text(s, 10, j->description_suffix);
    sqlite3_bind_int64(s, 11, now_ms);
    if (!j->process)
        sqlite3_bind_int64(s, 12, now_ms);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW)
        *job_id = sqlite3_column_int64(s, 0);
    sqlite3_reset(s);
    return rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? LDCT_ENOTFOUND : db__fail(d, "job insert");
}

/* The one integer `sql` (cached in `slot`, ?1 = id) returns into *out;
 * LDCT_ENOTFOUND without a row, `what` names a failure. */
static int id_query(db *d, int slot, const char *sql, int64_t id, int64_t *out, const char *what)
{
    sqlite3_stmt *s = db__stmt(d, slot, sql);
    if (!s)
        return LDCT_EDB;
    sqlite3_bind_int64(s, 1, id);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW)
        *out = sqlite3_column_int64(s, 0);
    sqlite3_reset(s);
    return rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? LDCT_ENOTFOUND : db__fail(d, what);
}

/* A job of the series still waiting to run (it will read every instance). */
static int pending_job(db *d, int64_t series_id, int64_t *job_id)
{
    return id_query(d, Q_PENDING_OF_SERIES,
                    "SELECT id FROM jobs WHERE series_id = ?1 AND state = 'pending'"
                    " ORDER BY id LIMIT 1",
                    series_id, job_id, "pending job");
}

int db_job_create(db *d, const db_job_spec *spec, int64_t now_ms, int64_t *job_id)
{
    int rc = begin(d);
    if (rc)
        return rc;
    /* More instances arrived before the job ran: the pending job covers them. */
    if (spec->process && pending_job(d, spec->series_id, job_id) == 0) {
        sqlite3_stmt *s =
            db__stmt(d, Q_SERIES_REQUEUE,
                     "UPDATE series SET state = 'queued' WHERE id = ?1 AND state = 'stable'");
        if (s)
            sqlite3_bind_int64(s, 1, spec->series_id);
        rc = run(d, s, "series queued");
        return end(d, rc ? rc : sqlite3_changes(d->h) == 1 ? 0 : LDCT_ENOTFOUND);
    }
    rc = job_insert(d, spec, now_ms, job_id);
    if (!rc && spec->send_original)
        rc = sends_for_list(d, *job_id, spec->series_id, "original", spec->destinations, now_ms);
    if (!rc) {
        sqlite3_stmt *s =
            db__stmt(d, Q_SERIES_AFTER_CREATE, "UPDATE series SET state = ?2 WHERE id = ?1");
        if (s) {
            sqlite3_bind_int64(s, 1, spec->series_id);
            db__bind_text(s, 2, spec->process ? "queued" : "done");
        }
        rc = run(d, s, "series queued");
    }
    return end(d, rc);
}

static void job_from_row(sqlite3_stmt *s, db_job *j)
{
    j->id = sqlite3_column_int64(s, 0);
    j->series_id = sqlite3_column_int64(s, 1);
    COPY_COL(j->rule, s, 2);
    COPY_COL(j->action, s, 3);
    COPY_COL(j->algorithm, s, 4);
    COPY_COL(j->params, s, 5);
    COPY_COL(j->derived_series_uid, s, 6);
    COPY_COL(j->destinations, s, 7);
    COPY_COL(j->description_suffix, s, 8);
    j->priority = sqlite3_column_int(s, 9);
    j->attempts = sqlite3_column_int(s, 10);
    j->waited = sqlite3_column_int(s, 11);
    j->retried = sqlite3_column_int(s, 12);
}

static int job_series_uids(db *d, db_job *j)
{
    sqlite3_stmt *s =
        db__stmt(d, Q_SERIES_OF_JOB, "SELECT series_uid, study_uid FROM series WHERE id = ?1");
    if (!s)
        return LDCT_EDB;
    sqlite3_bind_int64(s, 1, j->series_id);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        COPY_COL(j->series_uid, s, 0);
        COPY_COL(j->study_uid, s, 1);
    }
    sqlite3_reset(s);
    return rc == SQLITE_ROW ? 0 : db__fail(d, "series of job");
}

int db_job_claim(db *d, const char *worker, int64_t now_ms, db_job *out)
{
    int rc = begin(d);
    if (rc)
        return rc;
    sqlite3_stmt *s = db__stmt(
        d, Q_JOB_CLAIM,
        "UPDATE jobs SET state = 'running', attempts = attempts + 1, worker = ?1,"
        " started_ms = ?2, finished_ms = NULL,"
        " input_count = (SELECT instance_count FROM series WHERE id = jobs.series_id)"
        " WHERE id = (SELECT id FROM jobs WHERE"
        " state = 'pending' AND not_before_ms <= ?2 ORDER BY priority DESC, created_ms, id"
        " LIMIT 1) RETURNING id, series_id, rule, action, algorithm, params,"
        " coalesce(derived_series_uid, ''), destinations, description_suffix, priority, attempts,"
        " substr(last_error, 1, length(?3)) = ?3, last_error = ?4 AND attempts = 1");
    if (!s)
        return end(d, LDCT_EDB);
    db__bind_text(s, 1, worker);
    sqlite3_bind_int64(s, 2, now_ms);
    db__bind_text(s, 3, DB_JOB_WAIT_SPACE);
    db__bind_text(s, 4, DB_JOB_RETRIED);
    int step = sqlite3_step(s);
    if (step == SQLITE_ROW)
        job_from_row(s, out);
    sqlite3_reset(s);
    if (step == SQLITE_DONE)
        return end(d, LDCT_ENOTFOUND);
    if (step != SQLITE_ROW)
        return end(d, db__fail(d, "job claim"));
    return end(d, job_series_uids(d, out));
}

/* Nonzero when job's derived rows are exactly the n sources src. */
static int same_sources(db *d, int64_t job, int n, const char *const *src, int *same)
{
    sqlite3_stmt *cnt =
        db__stmt(d, Q_DERIVED_COUNT, "SELECT count(*) FROM derived_instances WHERE job_id = ?1");
    sqlite3_stmt *has = db__stmt(d, Q_DERIVED_HAS,
                                 "SELECT 1 FROM derived_instances WHERE job_id = ?1"
                                 " AND source_sop_uid = ?2");
    if (!cnt || !has)
        return LDCT_EDB;
    sqlite3_bind_int64(cnt, 1, job);
    int rc = sqlite3_step(cnt);
    *same = rc == SQLITE_ROW && sqlite3_column_int(cnt, 0) == n;
    sqlite3_reset(cnt);
    if (rc != SQLITE_ROW)
        return db__fail(d, "derived count");
    for (int i = 0; i < n && *same; i++) {
        sqlite3_bind_int64(has, 1, job);
        db__bind_text(has, 2, src[i]);
        *same = sqlite3_step(has) == SQLITE_ROW;
        sqlite3_reset(has);
    }
    return 0;
}

/* The latest other job of the same series that ran the same algorithm with
 * the same parameters and description suffix on exactly these n sources,
 * so its result is this job's result and its UIDs may be sent again; 0
 * when there is none. Never for fdk: its keys name output slices, not the
 * projections it read. */
static int same_run_earlier(db *d, int64_t job_id, int n, const char *const *src, int64_t *match)
{
    *match = 0;
    sqlite3_stmt *s =
        db__stmt(d, Q_JOB_SAME_RUN,
                 "SELECT e.id FROM jobs e JOIN jobs j ON j.id = ?1"
                 " WHERE e.series_id = j.series_id AND e.id <> j.id AND e.algorithm = j.algorithm"
                 " AND e.params = j.params AND e.description_suffix = j.description_suffix"
                 " AND j.algorithm <> 'fdk' ORDER BY e.id DESC");
    if (!s)
        return LDCT_EDB;
    sqlite3_bind_int64(s, 1, job_id);
    int64_t cand[64];
    int nc = 0, rc;
    while (nc < 64 && (rc = sqlite3_step(s)) == SQLITE_ROW)
        cand[nc++] = sqlite3_column_int64(s, 0);
    sqlite3_reset(s);
    if (nc < 64 && rc != SQLITE_DONE)
        return db__fail(d, "earlier job with the same run");
    for (int i = 0; i < nc && !*match; i++) {
        int same = 0;
        if ((rc = same_sources(d, cand[i], n, src, &same)))
            return rc;
        if (same)
            *match = cand[i];
    }
    return 0;
}

/* A redone job whose sources changed since its UIDs were fixed (instances
 * arrived between its attempts): its rows go, it decides again. */
static int forget_derived(db *d, int64_t job_id)
{
    sqlite3_stmt *s =
        db__stmt(d, Q_DERIVED_FORGET, "DELETE FROM derived_instances WHERE job_id = ?1");
    if (!s)
        return LDCT_EDB;
    sqlite3_bind_int64(s, 1, job_id);
    return run(d, s, "forget derived uids");
}

/* The job's derived series UID is another job's too (it took it from an
 * earlier run with the same result). */
static int series_uid_shared(db *d, int64_t job_id, int *shared)
{
    int64_t v = 0;
    int rc = id_query(d, Q_JOB_SERIES_SHARED,
                      "SELECT EXISTS (SELECT 1 FROM jobs o JOIN jobs j ON j.id = ?1"
                      " WHERE o.id <> j.id AND o.derived_series_uid = j.derived_series_uid)",
                      job_id, &v, "shared series uid");
    *shared = v != 0;
    return rc;
}

int db_job_series_shared(db *d, int64_t job_id, int *shared)
{
    return series_uid_shared(d, job_id, shared);
}

/* Sets the job's derived series UID (a fresh one, when a borrowed one no
 * longer applies). */
static int set_series_uid(db *d, int64_t job_id, const char *uid)
{
    sqlite3_stmt *s =
        db__stmt(d, Q_JOB_SET_SERIES, "UPDATE jobs SET derived_series_uid = ?2 WHERE id = ?1");
    if (!s)
        return LDCT_EDB;
    sqlite3_bind_int64(s, 1, job_id);
    db__bind_text(s, 2, uid);
    return run(d, s, "set derived series uid");
}

/* Nonzero when the job has fixed its derived UIDs already (a redone job). */
static int has_derived(db *d, int64_t job_id, int *has)
{
    int64_t v = 0;
    int rc = id_query(d, Q_JOB_HAS_DERIVED,
                      "SELECT EXISTS (SELECT 1 FROM derived_instances WHERE job_id = ?1)", job_id,
                      &v, "derived uids of job");
    *has = v != 0;
    return rc;
}

/* The job takes the derived series UID of `from` (a run with the same result). */
static int adopt_series_uid(db *d, int64_t job_id, int64_t from)
{
    sqlite3_stmt *s =
        db__stmt(d, Q_JOB_ADOPT_SERIES,
                 "UPDATE jobs SET derived_series_uid ="
                 " (SELECT derived_series_uid FROM jobs WHERE id = ?2) WHERE id = ?1");
    if (!s)
        return LDCT_EDB;
    sqlite3_bind_int64(s, 1, job_id);
    sqlite3_bind_int64(s, 2, from);
    return run(d, s, "adopt derived series uid");
}

/* The derived UID job `from` gave source `src` (uid unchanged if none). */
static int derived_of(db *d, int64_t from, const char *src, char *uid)
{
    sqlite3_stmt *s = db__stmt(d, Q_DERIVED_GET,
                               "SELECT derived_sop_uid FROM derived_instances WHERE job_id = ?1"
                               " AND source_sop_uid = ?2");
    if (!s)
        return LDCT_EDB;
    sqlite3_bind_int64(s, 1, from);
    db__bind_text(s, 2, src);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW)
        copy(uid, DB_UID_LEN, db__col_text(s, 0));
    sqlite3_reset(s);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : db__fail(d, "derived uid get");
}

/* Stores uid for src unless the job has one already; uid becomes the stored one. */
static int derived_uid_one(db *d, int64_t job_id, const char *src, char *uid)
{
    sqlite3_stmt *s = db__stmt(d, Q_DERIVED_INSERT,
                               "INSERT INTO derived_instances (job_id, source_sop_uid,"
                               " derived_sop_uid) VALUES (?1, ?2, ?3)"
                               " ON CONFLICT (job_id, source_sop_uid) DO NOTHING");
    if (!s)
        return LDCT_EDB;
    sqlite3_bind_int64(s, 1, job_id);
    db__bind_text(s, 2, src);
    db__bind_text(s, 3, uid);
    int rc = run(d, s, "derived uid insert");
    return rc ? rc : derived_of(d, job_id, src, uid);
}

/* The job's derived series UID into out (DB_UID_LEN). */
static int job_series_uid(db *d, int64_t job_id, char *out)
{
    sqlite3_stmt *s = db__stmt(d, Q_JOB_SERIES_UID,
                               "SELECT coalesce(derived_series_uid, '') FROM jobs WHERE id = ?1");
    if (!s)
        return LDCT_EDB;
    sqlite3_bind_int64(s, 1, job_id);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW)
        copy(out, DB_UID_LEN, db__col_text(s, 0));
    sqlite3_reset(s);
    return rc == SQLITE_ROW ? 0 : db__fail(d, "job series uid");
}

/* The time that dates the derived series of `job` (its first start). */
static int job_started(db *d, int64_t job, int64_t *ms)
{
    int64_t v = 0;
    int rc = id_query(d, Q_JOB_STARTED, "SELECT coalesce(started_ms, 0) FROM jobs WHERE id = ?1",
                      job, &v, "job start");
    if (!rc && v > 0)
        *ms = v;
    return rc;
}

/* Decides whose UIDs the job uses: its own stored ones (a redone job with
 * the same sources), an earlier job's with the same result (*same), or
 * fresh ones (a borrowed series UID replaced by fresh_series). */
static int decide_uids(db *d, int64_t job_id, int n, const char *const *src,
                       const char *fresh_series, int64_t *same)
{
    int redone = 0, unchanged = 0, shared = 0;
    int rc = has_derived(d, job_id, &redone);
    if (!rc && redone)
        rc = same_sources(d, job_id, n, src, &unchanged);
    if (rc || (redone && unchanged))
        return rc;
    if (redone && (rc = forget_derived(d, job_id)))
        return rc;
    if ((rc = same_run_earlier(d, job_id, n, src, same)))
        return rc;
    if (*same)
        return adopt_series_uid(d, job_id, *same);
    rc = series_uid_shared(d, job_id, &shared);
    if (!rc && shared && fresh_series && fresh_series[0])
        rc = set_series_uid(d, job_id, fresh_series);
    return rc;
}

int db_job_derived_uids(db *d, int64_t job_id, int n, const char *const *source_sops,
                        char (*uids)[DB_UID_LEN], char *series_uid, const char *fresh_series,
                        int64_t *dated_ms)
{
    int64_t same = 0;
    int rc = begin(d);
    if (!rc)
        rc = decide_uids(d, job_id, n, source_sops, fresh_series, &same);
    for (int i = 0; i < n && !rc; i++) {
        if (same)
            rc = derived_of(d, same, source_sops[i], uids[i]);
        if (!rc)
            rc = derived_uid_one(d, job_id, source_sops[i], uids[i]);
    }
    if (!rc && series_uid)
        rc = job_series_uid(d, job_id, series_uid);
    if (!rc && dated_ms)
        rc = job_started(d, same ? same : job_id, dated_ms);
    return end(d, rc);
}

static int derived_path_set(db *d, int64_t job_id, const char *src, const char *path)
{
    sqlite3_stmt *s = db__stmt(d, Q_DERIVED_PATH,
                               "UPDATE derived_instances SET path = ?3 WHERE job_id = ?1"
                               " AND source_sop_uid = ?2");
    if (!s)
        return LDCT_EDB;
    sqlite3_bind_int64(s, 1, job_id);
    db__bind_text(s, 2, src);
    db__bind_text(s, 3, path);
    int rc = run(d, s, "derived path");
    return rc ? rc : sqlite3_changes(d->h) == 1 ? 0 : LDCT_ENOTFOUND;
}

/* Marks the job done and, unless it was superseded, its series done;
 * returns its destinations and series. */
static int job_mark_done(db *d, int64_t job_id, int64_t now_ms, int superseded, char *dests,
                         int64_t *series_id)
{
    sqlite3_stmt *s = db__stmt(d, Q_JOB_DONE,
                               "UPDATE jobs SET state = 'done', finished_ms = ?2, last_error = ?3"
                               " WHERE id = ?1 AND state = 'running'"
                               " RETURNING destinations, series_id");
    if (!s)
        return LDCT_EDB;
    sqlite3_bind_int64(s, 1, job_id);
    sqlite3_bind_int64(s, 2, now_ms);
    db__bind_text(s, 3, superseded ? DB_JOB_SUPERSEDED : "");
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        copy(dests, DB_DEST_LIST_LEN, db__col_text(s, 0));
        *series_id = sqlite3_column_int64(s, 1);
    }
    sqlite3_reset(s);
    if (rc != SQLITE_ROW)
        return rc == SQLITE_DONE ? LDCT_ENOTFOUND : db__fail(d, "job done");
    if (superseded) /* the series waits for (or runs) its next job */
        return 0;
    s = db__stmt(d, Q_SERIES_DONE,
                 "UPDATE series SET state = 'done' WHERE id = ?1 AND state = 'queued'");
    if (!s)
        return LDCT_EDB;
    sqlite3_bind_int64(s, 1, *series_id);
    return run(d, s, "series done");
}

/* Nonzero when instances reached the job's series after the job was
 * claimed: the series is no longer queued for it (receiving or stable
 * again), or a newer job of the series exists. */
static int job_superseded(db *d, int64_t job_id, int *out)
{
    int64_t v = 0;
    int rc =
        id_query(d, Q_JOB_SUPERSEDED,
                 "SELECT (SELECT state FROM series WHERE id = j.series_id) <> 'queued'"
                 " OR EXISTS (SELECT 1 FROM jobs n WHERE n.series_id = j.series_id AND n.id > j.id)"
                 " FROM jobs j WHERE j.id = ?1",
                 job_id, &v, "superseded");
    *out = v != 0;
    return rc;
}

int db_job_done(db *d, int64_t job_id, int64_t now_ms, int n, const char *const *source_sops,
                const char *const *paths, int *superseded)
{
    char dests[DB_DEST_LIST_LEN] = "";
    int64_t series_id = 0;
    int late = 0;
    int rc = begin(d);
    for (int i = 0; i < n && !rc; i++)
        rc = derived_path_set(d, job_id, source_sops[i], paths[i]);
    if (!rc)
        rc = job_superseded(d, job_id, &late);
    if (!rc)
        rc = job_mark_done(d, job_id, now_ms, late, dests, &series_id);
    /* A result that misses instances is not delivered: the series' next job
     * processes all of them and delivers that. */
    if (!rc && !late)
        rc = sends_for_list(d, job_id, series_id, "derived", dests, now_ms);
    if (superseded)
        *superseded = late;
    return end(d, rc);
}

int db_job_failed(db *d, int64_t job_id, int64_t now_ms, const char *error, int retry)
{
    sqlite3_stmt *s = db__stmt(d, Q_JOB_FAILED,
                               "UPDATE jobs SET state = ?2, last_error = ?3, finished_ms = ?4"
                               " WHERE id = ?1 RETURNING series_id");
    if (!s)
        return LDCT_EDB;
    int rc = begin(d);
    if (rc)
        return rc;
    sqlite3_bind_int64(s, 1, job_id);
    db__bind_text(s, 2, retry ? "pending" : "failed");
    db__bind_text(s, 3, error);
    if (!retry)
        sqlite3_bind_int64(s, 4, now_ms);
    int step = sqlite3_step(s);
    int64_t series_id = step == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
    sqlite3_reset(s);
    if (step != SQLITE_ROW)
        return end(d, step == SQLITE_DONE ? LDCT_ENOTFOUND : db__fail(d, "job failed"));
    /* Only from queued: a series reopened by a late instance stays receiving
     * and gets its own decision (and job) when it is stable again. */
    sqlite3_stmt *u = db__stmt(d, Q_SERIES_AFTER_FAIL,
                               "UPDATE series SET state = ?2 WHERE id = ?1 AND state = 'queued'");
    if (u) {
        sqlite3_bind_int64(u, 1, series_id);
        db__bind_text(u, 2, retry ? "queued" : "failed");
    }
    return end(d, run(d, u, "series failed"));
}

static int job_step_aside(db *d, int64_t job_id, int64_t now_ms, int64_t not_before_ms,
                          const char *note)
{
    sqlite3_stmt *s =
        db__stmt(d, Q_JOB_DEFER,
                 "UPDATE jobs SET state = 'pending', attempts = max(attempts - 1, 0),"
                 " last_error = ?2, not_before_ms = ?3, wait_set_ms = ?4,"
                 " started_ms = NULL, worker = '' WHERE id = ?1 AND state = 'running'");
    if (!s)
        return LDCT_EDB;
    sqlite3_bind_int64(s, 1, job_id);
    db__bind_text(s, 2, note);
    sqlite3_bind_int64(s, 3, not_before_ms);
    sqlite3_bind_int64(s, 4, now_ms);
    return run(d, s, "job defer");
}

int db_job_defer(db *d, int64_t job_id, int64_t now_ms, int64_t not_before_ms, const char *note,
                 int *superseded)
{
    char dests[DB_DEST_LIST_LEN] = "";
    int64_t series_id = 0;
    int late = 0;
    int rc = begin(d);
    if (!rc)
        rc = job_superseded(d, job_id, &late);
    if (!rc) /* overtaken by new instances: the series' next job does it all */
        rc = late ? job_mark_done(d, job_id, now_ms, 1, dests, &series_id)
                  : job_step_aside(d, job_id, now_ms, not_before_ms, note);
    if (superseded)
        *superseded = late;
    return end(d, rc);
}

static int job_exists(db *d, int64_t job_id)
{
    sqlite3_stmt *s = db__stmt(d, Q_JOB_EXISTS, "SELECT 1 FROM jobs WHERE id = ?1");
    if (!s)
        return LDCT_EDB;
    sqlite3_bind_int64(s, 1, job_id);
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    return rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? LDCT_ENOTFOUND : db__fail(d, "job lookup");
}

/* Runs a statement bound with one job id and adds its changes to *changed. */
static int run_counted(db *d, sqlite3_stmt *s, int64_t job_id, int *changed, const char *what)
{
    if (s)
        sqlite3_bind_int64(s, 1, job_id);
    int rc = run(d, s, what);
    if (!rc)
        *changed += sqlite3_changes(d->h);
    return rc;
}

/* The job's dead sends that retry --to may move: not to `to` already and,
 * with `from`, to `from`. */
#define REDIRECTABLE                                                                               \
    " FROM sends s WHERE s.job_id = ?1 AND s.state = 'dead' AND s.destination <> ?2"               \
    " AND (?3 IS NULL OR s.destination = ?3)"

/* Moves dead sends to `to`: one per kind (derived, original), and none of a
 * kind that `to` has a send of already (done, queued or dead: it has the
 * series, or will). Counts into r->moved and r->kept (left where they were). */
static int redirect_dead(db *d, int64_t job_id, db_retry *r)
{
    sqlite3_stmt *c = db__stmt(d, Q_SENDS_REDIRECTABLE, "SELECT count(*)" REDIRECTABLE);
    sqlite3_stmt *u = db__stmt(
        d, Q_SENDS_REDIRECT,
        "UPDATE sends SET destination = ?2 WHERE id IN (SELECT min(s.id)" REDIRECTABLE
        " AND NOT EXISTS (SELECT 1 FROM sends o WHERE o.job_id = s.job_id AND o.what = s.what"
        " AND o.destination = ?2) GROUP BY s.what)");
    if (!c || !u)
        return LDCT_EDB;
    sqlite3_stmt *both[] = {c, u};
    for (int i = 0; i < 2; i++) {
        sqlite3_bind_int64(both[i], 1, job_id);
        sqlite3_bind_text(both[i], 2, r->to, -1, SQLITE_TRANSIENT);
        if (r->from)
            sqlite3_bind_text(both[i], 3, r->from, -1, SQLITE_TRANSIENT);
        else
            sqlite3_bind_null(both[i], 3);
    }
    int step = sqlite3_step(c), candidates = step == SQLITE_ROW ? sqlite3_column_int(c, 0) : 0;
    sqlite3_reset(c);
    if (step != SQLITE_ROW)
        return db__fail(d, "sends redirect");
    int rc = run(d, u, "sends redirect");
    if (!rc) {
        r->moved = sqlite3_changes(d->h);
        r->kept = candidates - r->moved;
    }
    return rc;
}

int db_job_retry(db *d, int64_t job_id, const char *to, int *changed)
{
    db_retry r = {.to = to};
    int rc = db_job_retry_with(d, job_id, &r);
    *changed = r.changed;
    return rc;
}

int db_job_retry_with(db *d, int64_t job_id, db_retry *r)
{
    r->changed = r->moved = r->kept = 0;
    int *changed = &r->changed;
    int rc = begin(d);
    if (!rc)
        rc = job_exists(d, job_id);
    if (!rc && r->to)
        rc = redirect_dead(d, job_id, r);
    if (!rc)
        rc = run_counted(d,
                         db__stmt(d, Q_JOB_RETRY,
                                  "UPDATE jobs SET state = 'pending', attempts = 0,"
                                  " last_error = '" DB_JOB_RETRIED "', finished_ms = NULL"
                                  " WHERE id = ?1 AND state = 'failed'"),
                         job_id, changed, "job retry");
    if (!rc)
        rc = run_counted(d,
                         db__stmt(d, Q_SENDS_RETRY,
                                  "UPDATE sends SET state = 'pending', attempts = 0,"
                                  " next_attempt_ms = 0, finished_ms = NULL"
                                  " WHERE job_id = ?1 AND state = 'dead'"),
                         job_id, changed, "sends retry");
    if (!rc && *changed)
        rc = db__exec(d, "UPDATE series SET state = 'queued' WHERE state = 'failed' AND id IN"
                         " (SELECT series_id FROM jobs WHERE state = 'pending')");
    return end(d, rc);
}

/* Binds ?1 = max_attempts and ?2 = now_ms where the statement has them
 * (binding an absent parameter is a harmless SQLITE_RANGE). */
static int recover_step(db *d, int slot, const char *sql, int max_attempts, int64_t now_ms,
                        int *count)
{
    sqlite3_stmt *s = db__stmt(d, slot, sql);
    if (s) {
        sqlite3_bind_int(s, 1, max_attempts);
        sqlite3_bind_int64(s, 2, now_ms);
    }
    int rc = run(d, s, "recover");
    if (!rc && count)
        *count = sqlite3_changes(d->h);
    return rc;
}

int db_recover(db *d, int max_attempts, int64_t now_ms, int *jobs, int *sends)
{
    int failed = 0, rc = begin(d);
    if (!rc)
        rc = recover_step(d, Q_RECOVER_FAIL,
                          "UPDATE jobs SET state = 'failed', finished_ms = ?2, last_error ="
                          " 'the daemon stopped while running this job ' || attempts ||"
                          " ' times; not retried automatically (ldct retry)'"
                          " WHERE state = 'running' AND attempts >= ?1",
                          max_attempts, now_ms, &failed);
    if (!rc && failed)
        rc = db__exec(d, "UPDATE series SET state = 'failed' WHERE state = 'queued' AND id IN"
                         " (SELECT series_id FROM jobs WHERE state = 'failed')");
    if (!rc)
        rc = recover_step(d, Q_RECOVER_JOBS,
                          "UPDATE jobs SET state = 'pending' WHERE state = 'running'", max_attempts,
                          now_ms, jobs);
    if (!rc) /* no job runs yet: what was written belongs to the last run */
        rc = db_job_progress_clear(d, -1);
    if (!rc)
        rc = recover_step(d, Q_RECOVER_SENDS,
                          "UPDATE sends SET state = 'pending', next_attempt_ms = ?2,"
                          " wait_set_ms = ?2 WHERE state = 'sending'",
                          max_attempts, now_ms, sends);
    if (!rc && failed)
        log_warn("%d job(s) failed: the daemon stopped while running them %d times", failed,
                 max_attempts);
    return end(d, rc);
}

int db_stop_cut_off(db *d, int64_t now_ms, int *jobs, int *sends)
{
    *jobs = *sends = 0;
    int rc = begin(d);
    if (!rc)
        rc = recover_step(d, Q_CUT_JOBS,
                          "UPDATE jobs SET state = 'pending', attempts = max(attempts - 1, 0),"
                          " started_ms = NULL, worker = '' WHERE state = 'running'",
                          0, now_ms, jobs);
    if (!rc)
        rc = recover_step(d, Q_CUT_SENDS,
                          "UPDATE sends SET state = 'pending', attempts = max(attempts - 1, 0),"
                          " next_attempt_ms = ?2, wait_set_ms = ?2 WHERE state = 'sending'",
                          0, now_ms, sends);
    return end(d, rc);
}

/* ---- progress ------------------------------------------------------------- */

int db_job_progress_put(db *d, int64_t job_id, const char *stage, double fraction,
                        int64_t remaining_ms, int64_t now_ms)
{
    sqlite3_stmt *s = db__stmt(d, Q_PROGRESS_PUT,
                               "INSERT OR REPLACE INTO job_progress (job_id, stage, fraction,"
                               " remaining_ms, updated_ms) VALUES (?1, ?2, ?3, ?4, ?5)");
    if (!s)
        return LDCT_EDB;
    if (!stage)
        stage = "";
    /* NaN would be stored as NULL and refused (NOT NULL): unknown too. */
    if (!(fraction >= 0))
        fraction = -1;
    else if (fraction > 1)
        fraction = 1;
    sqlite3_bind_int64(s, 1, job_id);
    sqlite3_bind_text(s, 2, stage, (int)strnlen(stage, 15), SQLITE_TRANSIENT);
    sqlite3_bind_double(s, 3, fraction);
    sqlite3_bind_int64(s, 4, remaining_ms < 0 ? -1 : remaining_ms);
    sqlite3_bind_int64(s, 5, now_ms);
    /* Written from inside the computation: rather than wait for another
     * connection's write lock, skip this one (the next comes 2 s later). */
    sqlite3_busy_timeout(d->h, 20);
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    sqlite3_busy_timeout(d->h, DB__BUSY_MS);
    if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED)
        return LDCT_EDB;
    return rc == SQLITE_DONE ? 0 : db__fail(d, "job progress");
}

int db_job_progress_clear(db *d, int64_t job_id)
{
    sqlite3_stmt *s =
        db__stmt(d, Q_PROGRESS_CLEAR, "DELETE FROM job_progress WHERE ?1 < 0 OR job_id = ?1");
    if (s)
        sqlite3_bind_int64(s, 1, job_id);
    return run(d, s, "job progress");
}

int db_job_ran_put(db *d, int64_t job_id, const char *algorithm)
{
    sqlite3_stmt *s = db__stmt(d, Q_RAN_PUT, "UPDATE jobs SET ran_algorithm = ?2 WHERE id = ?1");
    if (!s)
        return LDCT_EDB;
    sqlite3_bind_int64(s, 1, job_id);
    sqlite3_bind_text(s, 2, algorithm ? algorithm : "", algorithm ? (int)strnlen(algorithm, 15) : 0,
                      SQLITE_TRANSIENT);
    return run(d, s, "job ran algorithm");
}

/* ---- history ---------------------------------------------------------------- */

/* At most this many series per call, so one call stays short on the event
 * loop even when a long history becomes due at once (an upgrade). */
#define PURGE_BATCH "200"
#define PURGED_SERIES                                                                              \
    "(SELECT id FROM series WHERE state = 'removed' AND last_received_ms < ?1"                     \
    " ORDER BY id LIMIT " PURGE_BATCH ")"

int db_series_purge(db *d, int64_t before_ms, int *n)
{
    *n = 0;
    sqlite3_stmt *due = db__stmt(d, Q_PURGE_DUE,
                                 "SELECT EXISTS (SELECT 1 FROM series WHERE state = 'removed'"
                                 " AND last_received_ms < ?1)");
    if (!due)
        return LDCT_EDB;
    sqlite3_bind_int64(due, 1, before_ms);
    int step = sqlite3_step(due), any = step == SQLITE_ROW && sqlite3_column_int(due, 0);
    sqlite3_reset(due);
    if (step != SQLITE_ROW)
        return db__fail(d, "purge");
    if (!any) /* the usual case: no write transaction (no flush) every tick */
        return 0;
    static const char *const sql[] = {
        "DELETE FROM derived_instances WHERE job_id IN"
        " (SELECT id FROM jobs WHERE series_id IN " PURGED_SERIES ")",
        "DELETE FROM sends WHERE series_id IN " PURGED_SERIES
        " OR job_id IN (SELECT id FROM jobs WHERE series_id IN " PURGED_SERIES ")",
        "DELETE FROM jobs WHERE series_id IN " PURGED_SERIES,
        "DELETE FROM instances WHERE series_id IN " PURGED_SERIES,
        "DELETE FROM series WHERE id IN " PURGED_SERIES,
    };
    int rc = begin(d);
    for (int i = 0; i < 5 && !rc; i++) {
        sqlite3_stmt *s = db__stmt(d, Q_PURGE_DERIVED + i, sql[i]);
        if (s)
            sqlite3_bind_int64(s, 1, before_ms);
        rc = run(d, s, "purge");
    }
    if (!rc)
        *n = sqlite3_changes(d->h);
    return end(d, rc);
}

/* ---- clock steps ------------------------------------------------------------ */

/* Runs a statement in slot with ?1 = a. */
static int run_with(db *d, int slot, const char *sql, int64_t a)
{
    sqlite3_stmt *s = db__stmt(d, slot, sql);
    if (s)
        sqlite3_bind_int64(s, 1, a);
    return run(d, s, "clock step");
}

/* Runs sql with ?1 the step and ?2 the time it was noticed. */
static int run_step(db *d, int slot, const char *sql, int64_t delta_ms, int64_t now_ms)
{
    sqlite3_stmt *s = db__stmt(d, slot, sql);
    if (s) {
        sqlite3_bind_int64(s, 1, delta_ms);
        sqlite3_bind_int64(s, 2, now_ms);
    }
    return run(d, s, "clock step");
}

/* Times written in the last 1.5 s before now (or up to 0.5 s after it)
 * were read from the stepped clock already: the step is noticed up to a
 * second after it happens. */
#define STEPPED_ALREADY(col) "(" col " < ?2 - 1500 OR " col " > ?2 + 500)"
/* A pending row's wait column moved by the step unless set after it. */
#define SHIFT_WAIT(table, col)                                                                     \
    "UPDATE " table " SET " col " = " col " + ?1 WHERE state = 'pending' AND " col " > 0"          \
    " AND " STEPPED_ALREADY("wait_set_ms")

int db_clock_stepped(db *d, int64_t delta_ms, int64_t now_ms)
{
    int rc = begin(d);
    if (!rc)
        rc = run_step(d, Q_CLOCK_SERIES,
                      "UPDATE series SET last_received_ms = last_received_ms + ?1"
                      " WHERE state = 'receiving' AND " STEPPED_ALREADY("last_received_ms"),
                      delta_ms, now_ms);
    if (!rc)
        rc = run_step(d, Q_CLOCK_JOBS, SHIFT_WAIT("jobs", "not_before_ms"), delta_ms, now_ms);
    if (!rc)
        rc = run_step(d, Q_CLOCK_SENDS, SHIFT_WAIT("sends", "next_attempt_ms"), delta_ms, now_ms);
    if (!rc)
        d->quiet_from_ms += delta_ms;
    return end(d, rc);
}

int db_clock_clamp(db *d, int64_t now_ms)
{
    int rc = begin(d);
    if (!rc)
        rc = run_with(d, Q_CLAMP_SERIES,
                      "UPDATE series SET last_received_ms = ?1"
                      " WHERE state = 'receiving' AND last_received_ms > ?1",
                      now_ms);
    if (!rc)
        rc =
            run_with(d, Q_CLAMP_JOBS,
                     "UPDATE jobs SET not_before_ms = ?1, wait_set_ms = ?1"
                     " WHERE state = 'pending' AND not_before_ms > ?1 + 3600000", /* defers: 15 s */
                     now_ms);
    if (!rc) /* retry delays are at most retry_max_seconds, 7 days */
        rc = run_with(d, Q_CLAMP_SENDS,
                      "UPDATE sends SET next_attempt_ms = ?1, wait_set_ms = ?1"
                      " WHERE state = 'pending' AND next_attempt_ms > ?1 + 8 * 86400000",
                      now_ms);
    return end(d, rc);
}

/* ---- listing ---------------------------------------------------------------- */

static void list_sends(db *d, int64_t job_id, void (*cb)(void *, const db_send_row *), void *ctx)
{
    sqlite3_stmt *s = db__stmt(d, Q_JOB_SENDS,
                               "SELECT id, job_id, what, destination, state, last_error,"
                               " attempts, next_attempt_ms, created_ms, coalesce(finished_ms, 0)"
                               " FROM sends WHERE job_id = ?1 ORDER BY id");
    if (!s)
        return;
    sqlite3_bind_int64(s, 1, job_id);
    while (sqlite3_step(s) == SQLITE_ROW) {
        db_send_row r = {
            .id = sqlite3_column_int64(s, 0),
            .job_id = sqlite3_column_int64(s, 1),
            .what = db__col_text(s, 2),
            .destination = db__col_text(s, 3),
            .state = db__col_text(s, 4),
            .last_error = db__col_text(s, 5),
            .attempts = sqlite3_column_int(s, 6),
            .next_attempt_ms = sqlite3_column_int64(s, 7),
            .created_ms = sqlite3_column_int64(s, 8),
            .finished_ms = sqlite3_column_int64(s, 9),
        };
        cb(ctx, &r);
    }
    sqlite3_reset(s);
}

/* The columns of a job row up to superseded; its progress follows. */
#define JOBS_LIST_COLUMNS                                                                          \
    "SELECT j.id, s.series_uid, j.rule, j.action, j.algorithm, j.state, j.worker,"                 \
    " coalesce(j.derived_series_uid, ''), j.last_error,"                                           \
    " CASE WHEN j.algorithm <> 'fdk' AND EXISTS (SELECT 1 FROM derived_instances"                  \
    "  WHERE job_id = j.id) THEN (SELECT count(*) FROM derived_instances"                          \
    "  WHERE job_id = j.id)"                                                                       \
    "  WHEN j.state IN ('done', 'failed') AND j.input_count IS NOT NULL"                           \
    "  THEN j.input_count ELSE s.instance_count END, j.attempts,"                                  \
    " j.priority, j.created_ms, coalesce(j.started_ms, 0), coalesce(j.finished_ms, 0),"            \
    " j.state = 'done' AND j.last_error = '" DB_JOB_SUPERSEDED "',"
#define JOBS_LIST_FROM " FROM jobs j JOIN series s ON s.id = j.series_id"
#define JOBS_LIST_ORDER " ORDER BY j.id DESC LIMIT ?1"
/* Progress only of a running job, and only as written in this attempt: a
 * row from an earlier one (a crash, a retry) is older than its start. */
#define JOBS_PROGRESS                                                                              \
    " coalesce(p.stage, ''), coalesce(p.fraction, -1),"                                            \
    " coalesce(p.remaining_ms, -1), coalesce(p.updated_ms, 0)" JOBS_LIST_FROM                      \
    " LEFT JOIN job_progress p ON p.job_id = j.id"                                                 \
    " AND j.state = 'running' AND p.updated_ms >= j.started_ms"
#define JOBS_RUNNING " WHERE j.state = 'running' ORDER BY j.started_ms, j.id LIMIT ?1"

/* 1 or 0 from a "SELECT EXISTS (...)" about the schema (a reader may open
 * an older one than this program's), or a db error. */
static int schema_has(db *d, int slot, const char *sql)
{
    sqlite3_stmt *s = db__stmt(d, slot, sql);
    if (!s)
        return LDCT_EDB;
    int step = sqlite3_step(s), has = step == SQLITE_ROW && sqlite3_column_int(s, 0);
    sqlite3_reset(s);
    return step == SQLITE_ROW ? has : db__fail(d, "jobs list");
}

/* The table job_progress (schema 9). */
static int has_progress(db *d)
{
    return schema_has(d, Q_PROGRESS_HAS,
                      "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table'"
                      " AND name = 'job_progress')");
}

/* The listing's statement: every job newest first, or the running ones
 * longest running first; with progress when the database has it. */
static sqlite3_stmt *jobs_list_stmt(db *d, int running)
{
    int has = has_progress(d);
    if (has < 0)
        return NULL;
    if (running)
        return has ? db__stmt(d, Q_JOBS_RUNNING, JOBS_LIST_COLUMNS JOBS_PROGRESS JOBS_RUNNING)
                   : db__stmt(d, Q_JOBS_RUNNING_V8,
                              JOBS_LIST_COLUMNS " '', -1, -1, 0" JOBS_LIST_FROM JOBS_RUNNING);
    return has ? db__stmt(d, Q_JOBS_LIST, JOBS_LIST_COLUMNS JOBS_PROGRESS JOBS_LIST_ORDER)
               : db__stmt(d, Q_JOBS_LIST_V8,
                          JOBS_LIST_COLUMNS " '', -1, -1, 0" JOBS_LIST_FROM JOBS_LIST_ORDER);
}

/* The column jobs.ran_algorithm (schema 10). */
static int has_ran(db *d)
{
    return schema_has(d, Q_RAN_HAS,
                      "SELECT EXISTS (SELECT 1 FROM pragma_table_info('jobs')"
                      " WHERE name = 'ran_algorithm')");
}

/* The job's ran_algorithm into out (16 bytes; "" when none). */
static int ran_of(db *d, int64_t job_id, char *out)
{
    out[0] = '\0';
    sqlite3_stmt *s = db__stmt(d, Q_RAN_GET, "SELECT ran_algorithm FROM jobs WHERE id = ?1");
    if (!s)
        return LDCT_EDB;
    sqlite3_bind_int64(s, 1, job_id);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW)
        copy(out, 16, db__col_text(s, 0));
    sqlite3_reset(s);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : db__fail(d, "jobs list");
}

static int jobs_rows(db *d, int running, int limit, void (*cb_job)(void *ctx, const db_job_row *j),
                     void (*cb_send)(void *ctx, const db_send_row *s), void *ctx)
{
    const int ran = has_ran(d);
    sqlite3_stmt *s = ran < 0 ? NULL : jobs_list_stmt(d, running);
    if (!s)
        return LDCT_EDB;
    char ran_algorithm[16] = "";
    sqlite3_bind_int(s, 1, limit > 0 ? limit : -1);
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        db_job_row j = {
            .id = sqlite3_column_int64(s, 0),
            .series_uid = db__col_text(s, 1),
            .rule = db__col_text(s, 2),
            .action = db__col_text(s, 3),
            .algorithm = db__col_text(s, 4),
            .state = db__col_text(s, 5),
            .worker = db__col_text(s, 6),
            .derived_series_uid = db__col_text(s, 7),
            .last_error = db__col_text(s, 8),
            .instances = sqlite3_column_int(s, 9),
            .attempts = sqlite3_column_int(s, 10),
            .priority = sqlite3_column_int(s, 11),
            .created_ms = sqlite3_column_int64(s, 12),
            .started_ms = sqlite3_column_int64(s, 13),
            .finished_ms = sqlite3_column_int64(s, 14),
            .superseded = sqlite3_column_int(s, 15),
            .progress_stage = db__col_text(s, 16),
            .progress_fraction = sqlite3_column_double(s, 17),
            .progress_remaining_ms = sqlite3_column_int64(s, 18),
            .progress_updated_ms = sqlite3_column_int64(s, 19),
            .ran_algorithm = ran_algorithm,
        };
        if (ran && ran_of(d, j.id, ran_algorithm)) {
            rc = SQLITE_ERROR;
            break;
        }
        if (cb_job)
            cb_job(ctx, &j);
        if (cb_send)
            list_sends(d, j.id, cb_send, ctx);
    }
    sqlite3_reset(s);
    return rc == SQLITE_DONE ? 0 : db__fail(d, "jobs list");
}

int db_jobs_list(db *d, int limit, void (*cb_job)(void *ctx, const db_job_row *j),
                 void (*cb_send)(void *ctx, const db_send_row *s), void *ctx)
{
    return jobs_rows(d, 0, limit, cb_job, cb_send, ctx);
}

int db_jobs_running(db *d, int limit, void (*cb_job)(void *ctx, const db_job_row *j), void *ctx)
{
    return jobs_rows(d, 1, limit, cb_job, NULL, ctx);
}

int db_queue_totals_get(db *d, db_queue_totals *t)
{
    sqlite3_stmt *s = db__stmt(d, Q_TOTALS,
                               "SELECT (SELECT count(*) FROM jobs WHERE state = 'pending'),"
                               " (SELECT count(*) FROM jobs WHERE state = 'running'),"
                               " (SELECT count(*) FROM jobs WHERE state = 'done'),"
                               " (SELECT count(*) FROM jobs WHERE state = 'failed'),"
                               " (SELECT count(*) FROM sends WHERE state = 'pending'),"
                               " (SELECT count(*) FROM sends WHERE state = 'sending'),"
                               " (SELECT count(*) FROM sends WHERE state = 'done'),"
                               " (SELECT count(*) FROM sends WHERE state = 'dead')");
    if (!s || sqlite3_step(s) != SQLITE_ROW)
        return s ? db__fail(d, "queue totals") : LDCT_EDB;
    int64_t *f[] = {&t->jobs_pending,  &t->jobs_running,  &t->jobs_done,  &t->jobs_failed,
                    &t->sends_pending, &t->sends_sending, &t->sends_done, &t->sends_dead};
    for (int i = 0; i < 8; i++)
        *f[i] = sqlite3_column_int64(s, i);
    sqlite3_reset(s);
    return 0;
}

int db_destination_totals_get(db *d, db_destination_totals *out, int max, int *n)
{
    *n = 0;
    sqlite3_stmt *s = db__stmt(
        d, Q_DEST_TOTALS,
        "SELECT destination, sum(state = 'pending' AND attempts = 0),"
        " sum(state = 'pending' AND attempts > 0), sum(state = 'sending'), sum(state = 'dead')"
        " FROM sends WHERE state <> 'done' GROUP BY destination ORDER BY destination LIMIT ?1");
    if (!s)
        return LDCT_EDB;
    sqlite3_bind_int(s, 1, max);
    int step;
    while ((step = sqlite3_step(s)) == SQLITE_ROW) {
        db_destination_totals *t = &out[(*n)++];
        COPY_COL(t->destination, s, 0);
        t->queued = sqlite3_column_int64(s, 1);
        t->retrying = sqlite3_column_int64(s, 2);
        t->sending = sqlite3_column_int64(s, 3);
        t->dead = sqlite3_column_int64(s, 4);
    }
    sqlite3_reset(s);
    return step == SQLITE_DONE ? 0 : db__fail(d, "destination totals");
}

/* ---- sends ------------------------------------------------------------------ */

void db_send_retry_slots(db *d, int n)
{
    d->retry_slots = n;
}

int db_send_claim(db *d, int64_t now_ms, db_send *out)
{
    int rc = begin(d);
    if (rc)
        return rc;
    sqlite3_stmt *s =
        db__stmt(d, Q_SEND_CLAIM,
                 "UPDATE sends SET state = 'sending', attempts = attempts + 1 WHERE id ="
                 " (SELECT id FROM sends WHERE state = 'pending' AND next_attempt_ms <= ?1"
                 "  AND destination NOT IN (SELECT destination FROM sends WHERE state = 'sending')"
                 "  AND (attempts = 0 OR ?2 <= 0 OR (SELECT count(*) FROM sends"
                 "   WHERE state = 'sending' AND attempts > 1) < ?2)"
                 "  ORDER BY next_attempt_ms, id LIMIT 1)"
                 " RETURNING id, coalesce(job_id, 0), series_id, what, destination, attempts,"
                 " attempts = 1 AND last_error <> ''");
    if (!s)
        return end(d, LDCT_EDB);
    sqlite3_bind_int64(s, 1, now_ms);
    sqlite3_bind_int(s, 2, d->retry_slots);
    int step = sqlite3_step(s);
    if (step == SQLITE_ROW) {
        out->id = sqlite3_column_int64(s, 0);
        out->job_id = sqlite3_column_int64(s, 1);
        out->series_id = sqlite3_column_int64(s, 2);
        COPY_COL(out->what, s, 3);
        COPY_COL(out->destination, s, 4);
        out->attempts = sqlite3_column_int(s, 5);
        /* A send's first attempt carries no error, unless ldct retry (or a
         * shutdown during the attempt after it) reset a dead send's count. */
        out->retried = sqlite3_column_int(s, 6);
    }
    sqlite3_reset(s);
    if (step == SQLITE_DONE)
        return end(d, LDCT_ENOTFOUND);
    return end(d, step == SQLITE_ROW ? 0 : db__fail(d, "send claim"));
}

int db_send_paths(db *d, const db_send *snd, db_strings *paths)
{
    if (strcmp(snd->what, "derived") != 0)
        return db_series_paths(d, snd->series_id, paths);
    sqlite3_stmt *s = db__stmt(d, Q_SEND_PATHS_DERIVED,
                               "SELECT path FROM derived_instances WHERE job_id = ?1 AND path <> ''"
                               " ORDER BY path");
    if (!s)
        return LDCT_EDB;
    sqlite3_bind_int64(s, 1, snd->job_id);
    return collect_strings(d, s, paths, "send paths");
}

int db_send_done(db *d, int64_t send_id, int64_t now_ms)
{
    sqlite3_stmt *s = db__stmt(d, Q_SEND_DONE,
                               "UPDATE sends SET state = 'done', finished_ms = ?2, last_error = ''"
                               " WHERE id = ?1");
    if (!s)
        return LDCT_EDB;
    sqlite3_bind_int64(s, 1, send_id);
    sqlite3_bind_int64(s, 2, now_ms);
    return run(d, s, "send done");
}

int db_send_interrupted(db *d, int64_t send_id)
{
    sqlite3_stmt *s = db__stmt(d, Q_SEND_INTERRUPTED,
                               "UPDATE sends SET state = 'pending', attempts = max(attempts - 1, 0)"
                               " WHERE id = ?1 AND state = 'sending'");
    if (!s)
        return LDCT_EDB;
    sqlite3_bind_int64(s, 1, send_id);
    return run(d, s, "send interrupted");
}

int db_send_failed(db *d, int64_t send_id, int64_t now_ms, int64_t next_attempt_ms,
                   const char *error)
{
    sqlite3_stmt *s =
        db__stmt(d, Q_SEND_FAILED,
                 "UPDATE sends SET state = ?2, next_attempt_ms = ?3,"
                 " last_error = ?4, finished_ms = ?5, wait_set_ms = ?6 WHERE id = ?1");
    if (!s)
        return LDCT_EDB;
    int dead = next_attempt_ms < 0;
    sqlite3_bind_int64(s, 1, send_id);
    db__bind_text(s, 2, dead ? "dead" : "pending");
    sqlite3_bind_int64(s, 3, dead ? 0 : next_attempt_ms);
    db__bind_text(s, 4, error);
    if (dead)
        sqlite3_bind_int64(s, 5, now_ms);
    sqlite3_bind_int64(s, 6, now_ms);
    return run(d, s, "send failed");
}
