/* status: one snapshot of the node's state (queue totals from the
 * database, plus what only the running daemon knows), written as the JSON
 * of `ldct status --json` and GET /status, or as Prometheus text for GET
 * /metrics. No patient data: counts, sizes and times only.
 *
 * Thread-safety: status_read uses the connection it is given (one thread
 * per connection); the writers are pure.
 */
#ifndef LDCT_DAEMON_STATUS_H
#define LDCT_DAEMON_STATUS_H

#include <stdint.h>
#include <stdio.h>

#include "db/db.h"
#include "db/queue.h"

typedef struct status_snapshot {
    db_totals t;
    db_queue_totals q;
    /* Known only inside the daemon; -1 when not (ldct status). */
    int64_t uptime_s;
    int associations_active;
    int workers;
    int gpus_down; /* workers whose GPU does not work */
} status_snapshot;

/* Reads the database part; sets the daemon part to -1. Returns 0 or an error. */
int status_read(db *d, status_snapshot *s);

/* One JSON object and a newline. */
void status_write_json(FILE *f, const status_snapshot *s);

/* Prometheus text exposition format 0.0.4. */
void status_write_prometheus(FILE *f, const status_snapshot *s);

#endif
