/* db: the durable queue in SQLite: schema and migrations, every SQL
 * statement (prepared once per connection), and the state transitions of a
 * series over its whole life (receiving -> stable -> job -> sends).
 *
 * Invariants: WAL journal with synchronous=FULL, so a committed row survives
 * power loss; schema version in PRAGMA user_version, migrations applied in
 * order inside one transaction each. A `db` handle is one connection and is
 * used by one thread at a time (the caller serialises); several handles on
 * one file may be used from different threads or processes.
 */
#ifndef LDCT_DB_H
#define LDCT_DB_H

#include <stddef.h>
#include <stdint.h>

typedef struct db db;

/* Series states. */
#define DB_SERIES_RECEIVING "receiving"
#define DB_SERIES_STABLE "stable"

/* Highest schema version this program knows. */
int db_schema_version(void);

/* Opens (creating and migrating when writable) the database at `path`.
 * readonly != 0 opens without creating or migrating, and also takes a
 * schema down to DB_READ_MIN_VERSION (an older ldctd's, not migrated yet).
 * Free with db_close. Returns LDCT_ESCHEMA if the file was written by a
 * newer program. */
int db_open(const char *path, int readonly, db **out);

/* Closes the handle; NULL is a no-op. */
void db_close(db *d);

/* The schema version of the open file. */
int db_user_version(db *d, int *version);

/* A read transaction: every read between db_read_begin and db_read_end
 * sees the same state of the file, whatever other connections write
 * meanwhile (a status snapshot's totals and running jobs agree). */
int db_read_begin(db *d);
void db_read_end(db *d);

/* One received instance, as ingest records it. */
typedef struct db_instance_rec {
    const char *study_uid, *series_uid, *sop_instance_uid, *sop_class_uid;
    const char *transfer_syntax_uid, *modality;
    const char *calling_ae, *called_ae;
    const char *path;
    uint64_t size;
    int64_t received_ms;      /* Unix time in milliseconds */
    int stable_seconds;       /* quiet time that makes this series stable */
    int64_t assoc_started_ms; /* its association's start: one begun after the series
                               * was interrupted clears that (db_series_interrupted) */
} db_instance_rec;

/* Records an instance in one transaction: creates or reopens its series
 * (state back to receiving, last_received refreshed), inserts the instance
 * or, for a resend of the same SOP Instance UID, updates its row. If the
 * resend moved the file, the old path is written into old_path (else ""),
 * so the caller can remove the stale file after the commit. */
int db_instance_put(db *d, const db_instance_rec *rec, char *old_path, size_t old_len);

/* Series that became stable: receiving and quiet for their stable_seconds
 * at `now_ms`. Marks them stable in one transaction and calls `cb` for each
 * (after the commit). Returns the number marked, or an error. */
typedef void (*db_series_cb)(void *ctx, const char *series_uid, int instances);
int db_series_mark_stable(db *d, int64_t now_ms, db_series_cb cb, void *ctx);

/* Quiet counts from ms at the earliest: the daemon passes its start, so a
 * series whose association a stop or crash cut off waits stable_seconds
 * for the sender's resend instead of being processed at once as complete. */
void db_series_quiet_from(db *d, int64_t ms);

/* A series whose association ended by an abort or an error (the sender's
 * stop, a network failure, our own stop after its grace) at now_ms is
 * probably cut short: it waits at least `seconds` of quiet
 * (db_series_interrupted_wait; 0 = its stable_seconds) for the sender's
 * resend before it is complete. An instance from an association begun
 * after now_ms (the resend) clears the mark; one from an association that
 * was already running (a sender using several) does not. No-op unless
 * receiving; *marked (may be NULL) = 1 if it was. */
int db_series_interrupted(db *d, const char *series_uid, int64_t now_ms, int *marked);

/* The same mark for an association that had instances refused for lack of
 * resources (the sender may resend them): series `series_uid`, or with
 * series_uid NULL every receiving series from `calling_ae` (the refused
 * instance's own series is not known). Only series not marked since
 * since_ms (the association's start), so repeated refusals mark each
 * series once; *held = series marked now. */
int db_series_hold(db *d, const char *series_uid, const char *calling_ae, int64_t now_ms,
                   int64_t since_ms, int *held);
void db_series_interrupted_wait(db *d, int seconds);

/* Ends the hold of a receiving series (either mark above, `ldct
 * release`): it becomes stable once quiet for its stable_seconds, as any
 * other. series_uid NULL: every held series. *released: series released.
 * 0 or a db error. */
int db_series_release(db *d, const char *series_uid, int *released);

/* The row of instance sop_uid in series series_uid: where its file is,
 * when it was recorded and its series' state. */
typedef struct db_stored {
    char path[1024];
    int64_t received_ms;
    char series_state[16];
} db_stored;

/* 0, LDCT_ENOTFOUND (no such instance in that series) or a db error. */
int db_instance_stored(db *d, const char *sop_uid, const char *series_uid, db_stored *out);

/* A series' state ("receiving", ...) into state and whether it carries a
 * hold mark: 0, LDCT_ENOTFOUND or a db error. */
int db_series_state(db *d, const char *series_uid, char *state, size_t len, int *marked);

/* A setting of the running ldctd that readers of the database need to
 * show it as the daemon sees it (DB_SETTING_INTERRUPTED_SECONDS: what
 * makes `ldct series` mark a series held). The daemon records each at its
 * start and at every reload; `ldct` reads it instead of the configuration
 * it was given, which may not be the daemon's. _put: 0 or a db error.
 * _get: 0, LDCT_ENOTFOUND when none was recorded (a database of an older
 * ldctd) or a db error. */
#define DB_SETTING_INTERRUPTED_SECONDS "interrupted_seconds"
int db_node_setting_put(db *d, const char *name, int64_t value, int64_t now_ms);
int db_node_setting_get(db *d, const char *name, int64_t *value);

/* At a start after a run that was killed: every receiving series may have
 * been cut off, so each is marked as interrupted. *n = series marked. */
int db_series_interrupt_receiving(db *d, int64_t now_ms, int *n);

/* One row of the series list. Strings valid only during the callback. */
typedef struct db_series_row {
    int64_t id;
    const char *study_uid, *series_uid, *modality, *state, *calling_ae;
    int instances;
    int64_t first_received_ms, last_received_ms, stable_ms; /* stable_ms 0 if never */
    int sends, sends_done, sends_dead;                      /* its sends (originals and derived) */
    int sends_sending;                                      /* of them, in flight now */
    int held; /* receiving, held for the sender's resend (db_series_interrupted) with
               * a longer wait than its stable_seconds (db_series_interrupted_wait) */
} db_series_row;

/* What became of a series' sends, for people: "-" (none), "delivered",
 * "N dead", "sending D/N" (D done, one in flight) or "queued D/N" (the
 * rest waiting for their turn or their next try). Written into out. */
void db_series_delivery(const db_series_row *r, char *out, size_t len);

/* Calls cb for each series, newest activity first; the first `limit`
 * only (0 = all). */
int db_series_list(db *d, int limit, void (*cb)(void *ctx, const db_series_row *row), void *ctx);

/* Every series state, in the order of db_totals.by_state (the schema's
 * CHECK list): receiving, stable, queued, done, failed, unmatched,
 * discarded, removed. */
#define DB_SERIES_NSTATES 8
extern const char *const db_series_states[DB_SERIES_NSTATES];

/* Totals for `ldct status`. by_state[i] counts the series in state
 * db_series_states[i]; they add up to `series`. receiving and stable repeat
 * by_state[0] and by_state[1]. */
typedef struct db_totals {
    int64_t series, instances, receiving, stable, bytes;
    int64_t last_received_ms; /* 0 if none */
    int64_t by_state[DB_SERIES_NSTATES];
} db_totals;
int db_totals_get(db *d, db_totals *t);

/* Looks up an instance by SOP Instance UID: path into `path`; LDCT_ENOTFOUND if absent. */
int db_instance_path(db *d, const char *sop_uid, char *path, size_t len);

#endif
