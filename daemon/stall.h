/* stall: the running job that has reported no progress for longest, and
 * whether that makes it stalled (job_stall_seconds): a job or GPU that
 * hangs. ldctd's loop asks once every few seconds; while a job is stalled
 * it stops answering systemd's watchdog, so that systemd restarts it (the
 * one way to free a wedged GPU; nothing queued is lost, and the job's
 * attempts bound how often that can happen to one series).
 */
#ifndef LDCT_DAEMON_STALL_H
#define LDCT_DAEMON_STALL_H

#include <stdint.h>

#include "db/db.h"

typedef struct stall_job {
    int64_t id;
    int64_t silent_ms; /* since its last progress report, else its start */
    int attempts;
    char algorithm[16], worker[32], stage[16];
    double fraction; /* of the stage, < 0 unknown */
} stall_job;

/* The running job of d silent for longest at now_ms into *out: 1 when one
 * runs, 0 when none does, < 0 on a database error. */
int stall_stalest(db *d, int64_t now_ms, stall_job *out);

/* "job 12 (nlm3d on worker-0/gpu:0, reading 0%) has reported no progress
 * for 31 min 5 s" */
void stall_text(const stall_job *j, char *out, size_t len);

#endif
