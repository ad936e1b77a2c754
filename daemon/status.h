/* status: one snapshot of the node's state (queue totals from the
 * database, plus what only the running daemon knows), written as the JSON
 * of `ldct status --json` and GET /status, or as Prometheus text for GET
 * /metrics. No patient data and no UIDs: counts, sizes, times, and the
 * running jobs by job id (ldct jobs names their series).
 *
 * Thread-safety: status_read uses the connection it is given (one thread
 * per connection); the writers are pure.
 */
#ifndef LDCT_DAEMON_STATUS_H
#define LDCT_DAEMON_STATUS_H

#include <stdint.h>
#include <stdio.h>

#include "db/db.h"
#include "daemon/lockfile.h"
#include "db/queue.h"

/* Longest-running jobs listed in a snapshot (the rest are only counted:
 * one job runs per worker, and the daemon has one worker per device). */
#define STATUS_MAX_RUNNING 16

/* Destinations with open sends listed in a snapshot (by name). */
#define STATUS_MAX_DESTINATIONS 64

/* A running job and its progress, as its worker last wrote it. */
typedef struct status_job {
    int64_t id, started_ms;
    int attempts;
    char rule[65], algorithm[16], worker[32]; /* no UID: see above */
    char stage[16];                           /* "" when no progress was written yet */
    double fraction;                          /* of the stage, 0..1; < 0 unknown */
    int64_t remaining_ms;                     /* of the stage, as of updated_ms; < 0 unknown */
    int64_t updated_ms;                       /* 0 when none */
} status_job;

typedef struct status_snapshot {
    int64_t now_ms; /* when it was read */
    db_totals t;
    db_queue_totals q;
    int nrunning; /* entries of running (at most STATUS_MAX_RUNNING) */
    status_job running[STATUS_MAX_RUNNING];
    int ndest; /* entries of dest */
    db_destination_totals dest[STATUS_MAX_DESTINATIONS];
    /* Whether an ldctd runs on this database, and its pid (0: none):
     * LDCTD_RUNNING inside the daemon, from ldctd.lock in ldct status. */
    ldctd_state daemon;
    long daemon_pid;
    /* Known only inside the daemon; -1 when not (ldct status). */
    int64_t uptime_s;
    int associations_active;
    int workers;
    int gpus_down; /* workers whose GPU does not work */
    /* DICOM connections since ldctd started (both ports), by outcome:
     * an association accepted, rejected (A-ASSOCIATE-RJ), or failed (no
     * usable request: a TLS handshake refused, an unreadable request). */
    int64_t conn_accepted, conn_rejected, conn_failed;
    /* C-STOREs answered with a failure status since ldctd started: out of
     * resources (0xA7xx: below min_free_mb, the spool full; the sender may
     * resend) and every other failure (invalid or unstorable data). */
    int64_t refused_resources, refused_error;
    /* Bytes free for ldctd on the spool's file system (state_dir/spool; -1:
     * unknown) and the floor below which C-STOREs are refused (min_free_mb). */
    int64_t free_bytes, min_free_bytes;
    /* Refused instances kept in state_dir/quarantine and its bytes, as of
     * the last look (once a minute; -1: not looked yet). */
    int64_t quarantine_instances, quarantine_bytes;
    /* When the node's TLS certificate and its revocation lists run out
     * (Unix seconds; 0: not set). */
    int64_t tls_not_after, tls_crl_next_update;
    int64_t tls_ca_not_after; /* the first CA certificate to expire (0: none) */
} status_snapshot;

/* Reads the database's totals and, when `with_running` (GET /status, GET
 * /metrics and ldct status, not /healthz), the running jobs, all in one read
 * transaction so that they agree; sets the daemon part to -1. Returns 0 or
 * an error. */
int status_read(db *d, int with_running, status_snapshot *s);

/* One JSON object and a newline. */
void status_write_json(FILE *f, const status_snapshot *s);

/* Prometheus text exposition format 0.0.4. */
void status_write_prometheus(FILE *f, const status_snapshot *s);

/* ,"progress":null or ,"progress":{"stage":..,"fraction":..,
 * "stage_remaining_ms":..,"updated_ms":..} with what is unknown as null
 * (ldct jobs --json, /status). */
void status_write_progress_json(FILE *f, const char *stage, double fraction, int64_t remaining_ms,
                                int64_t updated_ms);

/* "filtering 45%, about 2 min 30 s left (updated 3 s ago)" as of now_ms:
 * the estimate counts down from its update, what is unknown is left out,
 * and an update older than a minute reads "(no update for ...)". Empty
 * when no progress was written. Returns buf. */
char *status_progress_text(const char *stage, double fraction, int64_t remaining_ms,
                           int64_t updated_ms, int64_t now_ms, char *buf, size_t len);

#endif
