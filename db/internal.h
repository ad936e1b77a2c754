/* db internals shared by the files of the db module (db.c: instances and
 * series; queue.c: jobs and sends). Not for other modules. */
#ifndef LDCT_DB_INTERNAL_H
#define LDCT_DB_INTERNAL_H

#include "db/db.h"

#include <sqlite3.h>

#define DB__ST_MAX 16  /* statements prepared at open (db.c) */
#define DB__QST_MAX 80 /* statements prepared on first use (queue.c) */

/* How long a statement waits for another connection's write lock. */
#define DB__BUSY_MS 10000

struct db {
    sqlite3 *h;
    sqlite3_stmt *st[DB__ST_MAX];
    sqlite3_stmt *qst[DB__QST_MAX];
    int64_t quiet_from_ms;  /* db_series_quiet_from */
    int interrupted_wait_s; /* db_series_interrupted_wait */
    int retry_slots;        /* db_send_retry_slots; 0 = no limit */
};

/* Logs the connection's last error with `what`; returns LDCT_EBUSY_DB or LDCT_EDB. */
int db__fail(db *d, const char *what);

/* Runs SQL without results; returns 0 or LDCT_EDB (logged). */
int db__exec(db *d, const char *sql);

/* Rolls back the open transaction, if any (SQLite has already rolled back
 * after some errors, a full disk among them). */
void db__rollback(db *d);

/* The statement in cache slot `slot` (prepared from `sql` on first use),
 * reset and unbound; NULL on a prepare error (logged). */
sqlite3_stmt *db__stmt(db *d, int slot, const char *sql);

/* Binds a string (NULL as ""), copied. */
void db__bind_text(sqlite3_stmt *s, int i, const char *v);

/* Column text, "" for NULL. */
const char *db__col_text(sqlite3_stmt *s, int i);

#endif
