/* schedule: what a stable series becomes. Reads the first instance's header
 * for the attributes rules match on, picks the rule (rules.h), and then
 * defers the series (its rule wants a longer quiet time), creates its job
 * (with the derived Series Instance UID fixed now), or marks it unmatched or
 * discarded. Also removes unmatched and discarded series after
 * retention_hours.
 *
 * Threading: the daemon's loop thread, with its own db handle and a config
 * that stays valid during the call.
 */
#ifndef LDCT_PIPELINE_SCHEDULE_H
#define LDCT_PIPELINE_SCHEDULE_H

#include "config/config.h"
#include "db/db.h"

#include <stdint.h>

typedef enum {
    SCHED_JOB,       /* a job was created (process, both, route) */
    SCHED_DEFERRED,  /* waiting for the rule's longer stable_seconds */
    SCHED_UNMATCHED, /* no rule: kept for retention_hours */
    SCHED_DISCARDED, /* its rule says discard */
} schedule_outcome;

/* Decides for one series that has just become stable. Returns a
 * schedule_outcome (>= 0) or an error (logged; the series stays stable and
 * is decided again by schedule_pending). */
int schedule_series(db *d, const ldct_config *cfg, const char *series_uid);

/* Decides for every series still stable (e.g. after a restart or an error). */
int schedule_pending(db *d, const ldct_config *cfg);

/* The quiet time ingest records on a new series: the shortest of the
 * node's and every rule's stable_seconds (a rule asking for longer defers
 * the series when it becomes stable). */
int schedule_quiet_seconds(const ldct_config *cfg);

/* Removes unmatched and discarded series older than retention_hours, and
 * processed series retention_hours after their last delivery (rows first,
 * then the spool files and the delivered outbox files; the results folder
 * is output and stays), with a log line each. Returns the number removed. */
int schedule_expire(db *d, const ldct_config *cfg, int64_t now_ms);

#endif
