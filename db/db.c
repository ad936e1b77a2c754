/* SQLite access for the queue; see db.h for the threading contract. */
#include "db/db.h"

#include "common/clock.h"
#include "common/err.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "db/internal.h"
#include "db/schema.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
    ST_SERIES_UPSERT,
    ST_INSTANCE_OLD,
    ST_INSTANCE_UPSERT,
    ST_SERIES_COUNT,
    ST_STABLE,
    ST_SERIES_LIST,
    ST_TOTALS,
    ST_INSTANCE_PATH,
    ST_SERIES_INTERRUPTED,
    ST_SERIES_INTERRUPT_ALL,
    ST_SERIES_HOLD,
    ST_SERIES_HOLD_AE,
    ST_SERIES_RELEASE,
    ST_SERIES_STATE,
    ST_INSTANCE_STORED,
    ST_COUNT
};
_Static_assert(ST_COUNT <= DB__ST_MAX, "raise DB__ST_MAX");

static const char *const SQL[ST_COUNT] = {
    [ST_SERIES_UPSERT] =
        "INSERT INTO series (study_uid, series_uid, modality, description, calling_ae,"
        " called_ae, first_received_ms, last_received_ms, stable_seconds)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7, ?8)"
        " ON CONFLICT (series_uid) DO UPDATE SET state = 'receiving', stable_ms = NULL,"
        " interrupted_ms = CASE WHEN ?9 >= interrupted_ms THEN 0 ELSE interrupted_ms END,"
        " last_received_ms = max(last_received_ms, excluded.last_received_ms),"
        " stable_seconds = excluded.stable_seconds"
        " RETURNING id",
    [ST_INSTANCE_OLD] = "SELECT path, series_id FROM instances WHERE sop_instance_uid = ?1",
    [ST_INSTANCE_UPSERT] =
        "INSERT INTO instances (series_id, sop_instance_uid, sop_class_uid,"
        " transfer_syntax_uid, path, size, received_ms, calling_ae)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
        " ON CONFLICT (sop_instance_uid) DO UPDATE SET series_id = excluded.series_id,"
        " sop_class_uid = excluded.sop_class_uid,"
        " transfer_syntax_uid = excluded.transfer_syntax_uid, path = excluded.path,"
        " size = excluded.size, received_ms = excluded.received_ms,"
        " calling_ae = excluded.calling_ae",
    [ST_SERIES_COUNT] = "UPDATE series SET instance_count ="
                        " (SELECT count(*) FROM instances WHERE series_id = series.id)"
                        " WHERE id = ?1 OR id = ?2",
    [ST_STABLE] = "UPDATE series SET state = 'stable', stable_ms = ?1"
                  " WHERE state = 'receiving'"
                  " AND max(last_received_ms, ?2) + 1000 * CASE WHEN interrupted_ms > 0"
                  "  THEN max(stable_seconds, ?3) ELSE stable_seconds END <= ?1"
                  " RETURNING series_uid, instance_count",
    [ST_SERIES_LIST] =
        "SELECT id, study_uid, series_uid, modality, state, calling_ae,"
        " instance_count, first_received_ms, last_received_ms,"
        " coalesce(stable_ms, 0),"
        " (SELECT count(*) FROM sends WHERE series_id = series.id),"
        " (SELECT count(*) FROM sends WHERE series_id = series.id AND state = 'done'),"
        " (SELECT count(*) FROM sends WHERE series_id = series.id AND state = 'dead'),"
        " (SELECT count(*) FROM sends WHERE series_id = series.id AND state = 'sending'),"
        " state = 'receiving' AND interrupted_ms > 0 AND ?2 > stable_seconds"
        " FROM series ORDER BY last_received_ms DESC LIMIT ?1",
    /* The per-state counts follow db_totals.by_state (DB_SERIES_STATES). */
    [ST_TOTALS] = "SELECT (SELECT count(*) FROM series),"
                  " (SELECT count(*) FROM instances),"
                  " (SELECT coalesce(sum(size), 0) FROM instances),"
                  " (SELECT coalesce(max(last_received_ms), 0) FROM series),"
                  " s.receiving, s.stable, s.queued, s.done, s.failed, s.unmatched,"
                  " s.discarded, s.removed FROM (SELECT"
                  " coalesce(sum(state = 'receiving'), 0) AS receiving,"
                  " coalesce(sum(state = 'stable'), 0) AS stable,"
                  " coalesce(sum(state = 'queued'), 0) AS queued,"
                  " coalesce(sum(state = 'done'), 0) AS done,"
                  " coalesce(sum(state = 'failed'), 0) AS failed,"
                  " coalesce(sum(state = 'unmatched'), 0) AS unmatched,"
                  " coalesce(sum(state = 'discarded'), 0) AS discarded,"
                  " coalesce(sum(state = 'removed'), 0) AS removed FROM series) AS s",
    [ST_INSTANCE_PATH] = "SELECT path FROM instances WHERE sop_instance_uid = ?1",
    [ST_SERIES_INTERRUPTED] = "UPDATE series SET interrupted_ms = ?2"
                              " WHERE series_uid = ?1 AND state = 'receiving'",
    [ST_SERIES_INTERRUPT_ALL] = "UPDATE series SET interrupted_ms = ?1 WHERE state = 'receiving'",
    [ST_SERIES_HOLD] = "UPDATE series SET interrupted_ms = ?2"
                       " WHERE series_uid = ?1 AND state = 'receiving' AND interrupted_ms < ?3",
    [ST_SERIES_HOLD_AE] = "UPDATE series SET interrupted_ms = ?2"
                          " WHERE calling_ae = ?1 AND state = 'receiving' AND interrupted_ms < ?3",
    [ST_SERIES_RELEASE] = "UPDATE series SET interrupted_ms = 0 WHERE state = 'receiving'"
                          " AND interrupted_ms > 0 AND (?1 IS NULL OR series_uid = ?1)",
    [ST_SERIES_STATE] = "SELECT state, interrupted_ms > 0 FROM series WHERE series_uid = ?1",
    [ST_INSTANCE_STORED] = "SELECT i.path, i.received_ms, s.state FROM instances AS i"
                           " JOIN series AS s ON s.id = i.series_id"
                           " WHERE i.sop_instance_uid = ?1 AND s.series_uid = ?2",
};

int db_schema_version(void)
{
    return DB_NMIGRATIONS;
}

/* Logs a database failure, each distinct one at most once a minute with
 * the count it stood for: a full disk fails every timer tick of every
 * thread, and the journal needs the first line and a heartbeat, not a
 * flood. Any thread. */
static void log_db_failure(const char *what, const char *msg)
{
    char line[256];
    snprintf(line, sizeof line, "database: %s: %s", what, msg);
    log_limited(LOG_LVL_ERR, line);
}

int db__fail(db *d, const char *what)
{
    log_db_failure(what, sqlite3_errmsg(d->h));
    int code = sqlite3_errcode(d->h);
    return code == SQLITE_BUSY || code == SQLITE_LOCKED ? LDCT_EBUSY_DB : LDCT_EDB;
}

int db__exec(db *d, const char *sql)
{
    char *msg = NULL;
    if (sqlite3_exec(d->h, sql, NULL, NULL, &msg) == SQLITE_OK)
        return 0;
    log_db_failure(sql, msg ? msg : "error");
    sqlite3_free(msg);
    return LDCT_EDB;
}

void db__rollback(db *d)
{
    if (!sqlite3_get_autocommit(d->h))
        (void)db__exec(d, "ROLLBACK");
}

int db_read_begin(db *d)
{
    return db__exec(d, "BEGIN DEFERRED");
}

void db_read_end(db *d)
{
    if (!sqlite3_get_autocommit(d->h) && db__exec(d, "COMMIT"))
        db__rollback(d);
}

int db_user_version(db *d, int *version)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(d->h, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK)
        return db__fail(d, "user_version");
    /* A file that is no database, or a damaged one, fails here, at the
     * first read: SQLite's reason ("file is not a database", "database
     * disk image is malformed") is logged, not only "database error". */
    int rc = sqlite3_step(st) == SQLITE_ROW ? 0 : db__fail(d, "schema version");
    *version = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return rc;
}

/* Schema 5 as some development builds wrote it, before its migration took
 * its final form (series.interrupted instead of interrupted_ms, no
 * sends_series index): brought to the released schema, so such a node
 * starts instead of failing at its first statement. */
static int repair_schema_5(db *d)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(d->h,
                           "SELECT count(*) FROM pragma_table_info('series')"
                           " WHERE name = 'interrupted_ms'",
                           -1, &st, NULL) != SQLITE_OK)
        return db__fail(d, "schema check");
    int has = sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0) > 0;
    sqlite3_finalize(st);
    int rc = 0;
    if (!has) {
        rc = db__exec(d, "ALTER TABLE series ADD COLUMN interrupted_ms INTEGER NOT NULL DEFAULT 0");
        if (!rc)
            log_notice("database: added series.interrupted_ms (a development build's schema 5)");
    }
    return rc ? rc : db__exec(d, "CREATE INDEX IF NOT EXISTS sends_series ON sends(series_id)");
}

static int migrate(db *d)
{
    int v;
    int rc = db_user_version(d, &v);
    if (rc)
        return rc;
    if (v > DB_NMIGRATIONS) {
        log_err("database schema version %d is newer than this program's (%d)", v, DB_NMIGRATIONS);
        return LDCT_ESCHEMA;
    }
    /* No program writes one below 0; a damaged header does, and the loop
     * below would run DB_MIGRATIONS[-1], memory before the table. */
    if (v < 0) {
        log_err("database schema version %d is not valid (a damaged file?)", v);
        return LDCT_EDB;
    }
    const int from = v;
    for (; v < DB_NMIGRATIONS; v++) {
        char bump[64];
        snprintf(bump, sizeof bump, "PRAGMA user_version = %d", v + 1);
        if ((rc = db__exec(d, "BEGIN IMMEDIATE")) || (rc = db__exec(d, DB_MIGRATIONS[v])) ||
            (rc = db__exec(d, bump)) || (rc = db__exec(d, "COMMIT"))) {
            db__rollback(d);
            return rc;
        }
        if (from > 0) /* a new database is built by the same steps: one line */
            log_info("database migrated to schema version %d", v + 1);
    }
    if (from == 0 && v > 0)
        log_info("database created (schema version %d)", v);
    else if (from < v)
        log_notice("database upgraded from schema version %d to %d", from, v);
    return repair_schema_5(d);
}

static int prepare_all(db *d)
{
    for (int i = 0; i < ST_COUNT; i++)
        if (sqlite3_prepare_v3(d->h, SQL[i], -1, SQLITE_PREPARE_PERSISTENT, &d->st[i], NULL) !=
            SQLITE_OK)
            return db__fail(d, "prepare");
    return 0;
}

/* SQLite reports a full disk at open as "disk I/O error" (its WAL index
 * cannot be created); say what the administrator has to do instead. */
static void explain_open_failure(const char *path)
{
    char dir[4096];
    uint64_t avail = 0, total = 0;
    if (fs_dirname(path, dir, sizeof dir) == 0 && fs_space_bytes(dir, &avail, &total) == 0 &&
        avail < 1024 * 1024)
        log_err("the disk holding %s is full (%llu KiB free): the database cannot open its"
                " journal; free space there and start again",
                dir, (unsigned long long)(avail / 1024));
}

/* "file:/a%20b/ldct.db?immutable=1": path as an SQLite URI that reads the
 * file without locks or -shm; 0, or -1 when it does not fit. */
static int immutable_uri(const char *path, char *out, size_t len)
{
    static const char hex[] = "0123456789ABCDEF", suffix[] = "?immutable=1";
    if (5 + 3 * strlen(path) + sizeof suffix > len)
        return -1;
    size_t n = 5;
    memcpy(out, "file:", n);
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        const int plain = (*p >= '0' && *p <= '9') || ((*p | 32) >= 'a' && (*p | 32) <= 'z') ||
                          strchr("/-._~", *p);
        if (plain) {
            out[n++] = (char)*p;
        } else {
            out[n++] = '%';
            out[n++] = hex[*p >> 4];
            out[n++] = hex[*p & 15];
        }
    }
    memcpy(out + n, suffix, sizeof suffix);
    return 0;
}

/* A read-only open of a WAL database needs its -shm file, which SQLite
 * creates at the first read. A user who may read the state but not write
 * its folder (ldctd's group) cannot create it while ldctd is stopped (a
 * stop removes both -shm and -wal): the first read then fails as
 * "attempt to write a readonly database". Without a -wal file the
 * database file alone holds every committed transaction, so it is then
 * read as immutable, without locks (the daemon is not running). */
static void reopen_without_shm(db *d, const char *path)
{
    char wal[4200], uri[13000];
    snprintf(wal, sizeof wal, "%s-wal", path);
    if (sqlite3_exec(d->h, "PRAGMA user_version", NULL, NULL, NULL) == SQLITE_OK ||
        (sqlite3_errcode(d->h) != SQLITE_READONLY && sqlite3_errcode(d->h) != SQLITE_CANTOPEN) ||
        access(wal, F_OK) == 0 || immutable_uri(path, uri, sizeof uri) != 0)
        return;
    sqlite3 *h = NULL;
    if (sqlite3_open_v2(uri, &h, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX,
                        NULL) != SQLITE_OK) {
        sqlite3_close(h);
        return;
    }
    sqlite3_close(d->h);
    d->h = h;
}

int db_open(const char *path, int readonly, db **out)
{
    *out = NULL;
    db *d = calloc(1, sizeof *d);
    if (!d)
        return LDCT_EDB;
    int flags = readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    int rc = LDCT_EDB;
    if (sqlite3_open_v2(path, &d->h, flags | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
        log_err("database %s: %s", path, d->h ? sqlite3_errmsg(d->h) : "cannot open");
        rc = readonly ? LDCT_ENOTFOUND : LDCT_EDB;
        goto fail;
    }
    if (readonly)
        reopen_without_shm(d, path);
    sqlite3_busy_timeout(d->h, DB__BUSY_MS);
    if (!readonly && (rc = db__exec(d, "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;"
                                       "PRAGMA foreign_keys = ON;")))
        goto fail;
    if (!readonly && (rc = migrate(d)))
        goto fail;
    int v = 0;
    if (readonly && (rc = db_user_version(d, &v)) == 0 &&
        (v < DB_READ_MIN_VERSION || v > DB_NMIGRATIONS)) {
        log_err("database %s has schema version %d, this program reads %d to %d", path, v,
                DB_READ_MIN_VERSION, DB_NMIGRATIONS);
        rc = v > DB_NMIGRATIONS ? LDCT_ESCHEMA : LDCT_EDB;
        goto fail;
    }
    if (rc || (rc = prepare_all(d)))
        goto fail;
    *out = d;
    return 0;
fail:
    if (!readonly && rc == LDCT_EDB)
        explain_open_failure(path);
    db_close(d);
    return rc;
}

void db_close(db *d)
{
    if (!d)
        return;
    for (int i = 0; i < ST_COUNT; i++)
        sqlite3_finalize(d->st[i]);
    for (int i = 0; i < DB__QST_MAX; i++)
        sqlite3_finalize(d->qst[i]);
    sqlite3_close(d->h);
    free(d);
}

static sqlite3_stmt *stmt(db *d, int which)
{
    sqlite3_stmt *s = d->st[which];
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    return s;
}

sqlite3_stmt *db__stmt(db *d, int slot, const char *sql)
{
    sqlite3_stmt **s = &d->qst[slot];
    if (!*s && sqlite3_prepare_v3(d->h, sql, -1, SQLITE_PREPARE_PERSISTENT, s, NULL) != SQLITE_OK) {
        (void)db__fail(d, "prepare");
        *s = NULL;
        return NULL;
    }
    sqlite3_reset(*s);
    sqlite3_clear_bindings(*s);
    return *s;
}

void db__bind_text(sqlite3_stmt *s, int i, const char *v)
{
    sqlite3_bind_text(s, i, v ? v : "", -1, SQLITE_TRANSIENT);
}

const char *db__col_text(sqlite3_stmt *s, int i)
{
    const unsigned char *t = sqlite3_column_text(s, i);
    return t ? (const char *)t : "";
}

static int series_upsert(db *d, const db_instance_rec *r, int64_t *id)
{
    sqlite3_stmt *s = stmt(d, ST_SERIES_UPSERT);
    db__bind_text(s, 1, r->study_uid);
    db__bind_text(s, 2, r->series_uid);
    db__bind_text(s, 3, r->modality);
    db__bind_text(s, 4, ""); /* description: free text, not kept (rules read the file) */
    db__bind_text(s, 5, r->calling_ae);
    db__bind_text(s, 6, r->called_ae);
    sqlite3_bind_int64(s, 7, r->received_ms);
    sqlite3_bind_int(s, 8, r->stable_seconds);
    sqlite3_bind_int64(s, 9, r->assoc_started_ms);
    if (sqlite3_step(s) != SQLITE_ROW)
        return db__fail(d, "series upsert");
    *id = sqlite3_column_int64(s, 0);
    return sqlite3_step(s) == SQLITE_DONE ? 0 : db__fail(d, "series upsert");
}

/* Path and series id of an existing instance row, if any. */
static int instance_old(db *d, const char *sop, char *old_path, size_t old_len, int64_t *series)
{
    sqlite3_stmt *s = stmt(d, ST_INSTANCE_OLD);
    db__bind_text(s, 1, sop);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_DONE)
        return 0;
    if (rc != SQLITE_ROW)
        return db__fail(d, "instance lookup");
    snprintf(old_path, old_len, "%s", db__col_text(s, 0));
    *series = sqlite3_column_int64(s, 1);
    /* Reset now: a statement left on its row keeps this connection's read
     * snapshot open past COMMIT, and once another connection writes, every
     * later BEGIN IMMEDIATE here fails with "database is locked". */
    sqlite3_reset(s);
    return 0;
}

static int instance_upsert(db *d, const db_instance_rec *r, int64_t series_id)
{
    sqlite3_stmt *s = stmt(d, ST_INSTANCE_UPSERT);
    sqlite3_bind_int64(s, 1, series_id);
    db__bind_text(s, 2, r->sop_instance_uid);
    db__bind_text(s, 3, r->sop_class_uid);
    db__bind_text(s, 4, r->transfer_syntax_uid);
    db__bind_text(s, 5, r->path);
    sqlite3_bind_int64(s, 6, (sqlite3_int64)r->size);
    sqlite3_bind_int64(s, 7, r->received_ms);
    db__bind_text(s, 8, r->calling_ae);
    return sqlite3_step(s) == SQLITE_DONE ? 0 : db__fail(d, "instance upsert");
}

static int series_recount(db *d, int64_t a, int64_t b)
{
    sqlite3_stmt *s = stmt(d, ST_SERIES_COUNT);
    sqlite3_bind_int64(s, 1, a);
    sqlite3_bind_int64(s, 2, b);
    return sqlite3_step(s) == SQLITE_DONE ? 0 : db__fail(d, "series count");
}

int db_instance_put(db *d, const db_instance_rec *rec, char *old_path, size_t old_len)
{
    char prev[1024] = "";
    int64_t series_id = 0, prev_series = 0;
    int rc = db__exec(d, "BEGIN IMMEDIATE");
    if (rc)
        return rc;
    /* A resend may move an instance to another series: both counts change. */
    if ((rc = instance_old(d, rec->sop_instance_uid, prev, sizeof prev, &prev_series)) ||
        (rc = series_upsert(d, rec, &series_id)) || (rc = instance_upsert(d, rec, series_id)) ||
        (rc = series_recount(d, series_id, prev_series)) || (rc = db__exec(d, "COMMIT"))) {
        db__rollback(d);
        return rc;
    }
    snprintf(old_path, old_len, "%s", strcmp(prev, rec->path) ? prev : "");
    return 0;
}

void db_series_quiet_from(db *d, int64_t ms)
{
    d->quiet_from_ms = ms;
}

void db_series_interrupted_wait(db *d, int seconds)
{
    d->interrupted_wait_s = seconds;
}

int db_node_setting_put(db *d, const char *name, int64_t value, int64_t now_ms)
{
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(d->h,
                           "INSERT INTO node_settings (name, value, set_ms) VALUES (?1, ?2, ?3)"
                           " ON CONFLICT (name) DO UPDATE SET value = excluded.value,"
                           " set_ms = excluded.set_ms",
                           -1, &s, NULL) != SQLITE_OK)
        return db__fail(d, "node setting");
    db__bind_text(s, 1, name);
    sqlite3_bind_int64(s, 2, value);
    sqlite3_bind_int64(s, 3, now_ms);
    int rc = sqlite3_step(s) == SQLITE_DONE ? 0 : db__fail(d, "node setting");
    sqlite3_finalize(s);
    return rc;
}

int db_node_setting_get(db *d, const char *name, int64_t *value)
{
    sqlite3_stmt *s;
    /* No table: a schema-7 database that an older ldctd still writes. */
    if (sqlite3_prepare_v2(d->h, "SELECT value FROM node_settings WHERE name = ?1", -1, &s, NULL) !=
        SQLITE_OK)
        return LDCT_ENOTFOUND;
    db__bind_text(s, 1, name);
    int step = sqlite3_step(s), rc = LDCT_ENOTFOUND;
    if (step == SQLITE_ROW) {
        *value = sqlite3_column_int64(s, 0);
        rc = 0;
    } else if (step != SQLITE_DONE) {
        rc = db__fail(d, "node setting");
    }
    sqlite3_finalize(s);
    return rc;
}

int db_series_interrupt_receiving(db *d, int64_t now_ms, int *n)
{
    *n = 0;
    sqlite3_stmt *s = stmt(d, ST_SERIES_INTERRUPT_ALL);
    sqlite3_bind_int64(s, 1, now_ms);
    int rc = sqlite3_step(s) == SQLITE_DONE ? 0 : db__fail(d, "series interrupted");
    sqlite3_reset(s);
    if (!rc)
        *n = sqlite3_changes(d->h);
    return rc;
}

int db_series_interrupted(db *d, const char *series_uid, int64_t now_ms, int *marked)
{
    sqlite3_stmt *s = stmt(d, ST_SERIES_INTERRUPTED);
    db__bind_text(s, 1, series_uid);
    sqlite3_bind_int64(s, 2, now_ms);
    int rc = sqlite3_step(s) == SQLITE_DONE ? 0 : db__fail(d, "series interrupted");
    sqlite3_reset(s);
    if (marked)
        *marked = rc ? 0 : sqlite3_changes(d->h);
    return rc;
}

int db_series_hold(db *d, const char *series_uid, const char *calling_ae, int64_t now_ms,
                   int64_t since_ms, int *held)
{
    sqlite3_stmt *s = stmt(d, series_uid ? ST_SERIES_HOLD : ST_SERIES_HOLD_AE);
    db__bind_text(s, 1, series_uid ? series_uid : calling_ae);
    sqlite3_bind_int64(s, 2, now_ms);
    sqlite3_bind_int64(s, 3, since_ms);
    int rc = sqlite3_step(s) == SQLITE_DONE ? 0 : db__fail(d, "series hold");
    sqlite3_reset(s);
    *held = rc ? 0 : sqlite3_changes(d->h);
    return rc;
}

int db_series_release(db *d, const char *series_uid, int *released)
{
    sqlite3_stmt *s = stmt(d, ST_SERIES_RELEASE);
    if (series_uid)
        db__bind_text(s, 1, series_uid);
    else
        sqlite3_bind_null(s, 1);
    int rc = sqlite3_step(s) == SQLITE_DONE ? 0 : db__fail(d, "series release");
    sqlite3_reset(s);
    *released = rc ? 0 : sqlite3_changes(d->h);
    return rc;
}

int db_series_state(db *d, const char *series_uid, char *state, size_t len, int *marked)
{
    sqlite3_stmt *s = stmt(d, ST_SERIES_STATE);
    db__bind_text(s, 1, series_uid);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        snprintf(state, len, "%s", db__col_text(s, 0));
        *marked = sqlite3_column_int(s, 1);
    }
    sqlite3_reset(s);
    return rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? LDCT_ENOTFOUND : db__fail(d, "series state");
}

int db_instance_stored(db *d, const char *sop_uid, const char *series_uid, db_stored *out)
{
    sqlite3_stmt *s = stmt(d, ST_INSTANCE_STORED);
    db__bind_text(s, 1, sop_uid);
    db__bind_text(s, 2, series_uid);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        snprintf(out->path, sizeof out->path, "%s", db__col_text(s, 0));
        out->received_ms = sqlite3_column_int64(s, 1);
        snprintf(out->series_state, sizeof out->series_state, "%s", db__col_text(s, 2));
    }
    sqlite3_reset(s);
    return rc == SQLITE_ROW    ? 0
           : rc == SQLITE_DONE ? LDCT_ENOTFOUND
                               : db__fail(d, "instance stored");
}

int db_series_mark_stable(db *d, int64_t now_ms, db_series_cb cb, void *ctx)
{
    typedef struct {
        char uid[65];
        int n;
    } hit;
    hit found[256] = {{"", 0}};
    int n = 0, rc = db__exec(d, "BEGIN IMMEDIATE");
    if (rc)
        return rc;
    sqlite3_stmt *s = stmt(d, ST_STABLE);
    sqlite3_bind_int64(s, 1, now_ms);
    sqlite3_bind_int64(s, 2, d->quiet_from_ms);
    sqlite3_bind_int(s, 3, d->interrupted_wait_s);
    int step;
    while ((step = sqlite3_step(s)) == SQLITE_ROW) {
        if (n < (int)(sizeof found / sizeof found[0])) {
            snprintf(found[n].uid, sizeof found[n].uid, "%s", db__col_text(s, 0));
            found[n].n = sqlite3_column_int(s, 1);
        }
        n++;
    }
    sqlite3_reset(s);
    if (step != SQLITE_DONE || (rc = db__exec(d, "COMMIT"))) {
        rc = rc ? rc : db__fail(d, "mark stable");
        db__rollback(d);
        return rc;
    }
    for (int i = 0; cb && i < n && i < (int)(sizeof found / sizeof found[0]); i++)
        cb(ctx, found[i].uid, found[i].n);
    return n;
}

int db_series_list(db *d, int limit, void (*cb)(void *ctx, const db_series_row *row), void *ctx)
{
    sqlite3_stmt *s = stmt(d, ST_SERIES_LIST);
    sqlite3_bind_int(s, 1, limit > 0 ? limit : -1);
    sqlite3_bind_int(s, 2, d->interrupted_wait_s);
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        db_series_row row = {
            .id = sqlite3_column_int64(s, 0),
            .study_uid = db__col_text(s, 1),
            .series_uid = db__col_text(s, 2),
            .modality = db__col_text(s, 3),
            .state = db__col_text(s, 4),
            .calling_ae = db__col_text(s, 5),
            .instances = sqlite3_column_int(s, 6),
            .first_received_ms = sqlite3_column_int64(s, 7),
            .last_received_ms = sqlite3_column_int64(s, 8),
            .stable_ms = sqlite3_column_int64(s, 9),
            .sends = sqlite3_column_int(s, 10),
            .sends_done = sqlite3_column_int(s, 11),
            .sends_dead = sqlite3_column_int(s, 12),
            .sends_sending = sqlite3_column_int(s, 13),
            .held = sqlite3_column_int(s, 14),
        };
        cb(ctx, &row);
    }
    sqlite3_reset(s);
    return rc == SQLITE_DONE ? 0 : db__fail(d, "series list");
}

void db_series_delivery(const db_series_row *r, char *out, size_t len)
{
    if (r->sends == 0)
        snprintf(out, len, "-");
    else if (r->sends_dead > 0)
        snprintf(out, len, "%d dead", r->sends_dead);
    else if (r->sends_done == r->sends)
        snprintf(out, len, "delivered");
    else if (r->sends_sending > 0)
        snprintf(out, len, "sending %d/%d", r->sends_done, r->sends);
    else
        snprintf(out, len, "queued %d/%d", r->sends_done, r->sends);
}

const char *const db_series_states[DB_SERIES_NSTATES] = {
    "receiving", "stable", "queued", "done", "failed", "unmatched", "discarded", "removed"};

int db_totals_get(db *d, db_totals *t)
{
    sqlite3_stmt *s = stmt(d, ST_TOTALS);
    if (sqlite3_step(s) != SQLITE_ROW)
        return db__fail(d, "totals");
    t->series = sqlite3_column_int64(s, 0);
    t->instances = sqlite3_column_int64(s, 1);
    t->bytes = sqlite3_column_int64(s, 2);
    t->last_received_ms = sqlite3_column_int64(s, 3);
    for (int i = 0; i < DB_SERIES_NSTATES; i++)
        t->by_state[i] = sqlite3_column_int64(s, 4 + i);
    t->receiving = t->by_state[0];
    t->stable = t->by_state[1];
    sqlite3_reset(s);
    return 0;
}

int db_instance_path(db *d, const char *sop_uid, char *path, size_t len)
{
    sqlite3_stmt *s = stmt(d, ST_INSTANCE_PATH);
    db__bind_text(s, 1, sop_uid);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW)
        snprintf(path, len, "%s", db__col_text(s, 0));
    sqlite3_reset(s);
    return rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? LDCT_ENOTFOUND : db__fail(d, "instance path");
}
