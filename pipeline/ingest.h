/* ingest: turns a received C-STORE dataset into a durable spool file and a
 * committed database row, and decides the DIMSE status the sender gets.
 *
 * Durability (DESIGN.md): success is answered only after the file is in its
 * temp name, fsync'd, renamed to spool/<study>/<series>/<sop>.dcm, the
 * directory fsync'd, and the row committed (WAL, synchronous=FULL). An
 * instance refused for its content (missing or invalid UIDs, a mismatch
 * with its request, a dataset that does not parse) is kept as received in
 * <state_dir>/quarantine/<ms>-<n>.dcm with a .reason file beside it, for the
 * administrator to inspect and delete; one that failed to be stored leaves
 * nothing in the spool and no row. A resend of the same SOP
 * Instance UID replaces the file atomically and keeps one row.
 *
 * Thread-safety: ingest_store_begin/_end are called concurrently from
 * association threads; database commits are serialised by an internal
 * mutex, file writes and fsyncs run in parallel. ingest_policy_set may be
 * called from any thread (SIGHUP reload).
 */
#ifndef LDCT_PIPELINE_INGEST_H
#define LDCT_PIPELINE_INGEST_H

#include "scp/scp.h"

#include <stddef.h>

typedef struct ingest ingest;

typedef struct ingest_policy {
    int min_free_mb;    /* refuse with 0xA700 below this free space */
    int stable_seconds; /* recorded on the series for the stability timer */
} ingest_policy;

/* Opens the spool under state_dir (creating spool/, spool/.tmp/ and the
 * database ldct.db), removes temp files left by a crash (they were never
 * acknowledged). Free with ingest_free. */
int ingest_new(const char *state_dir, const ingest_policy *policy, ingest **out);
void ingest_free(ingest *in);

void ingest_policy_set(ingest *in, const ingest_policy *policy);

/* Below this many free inodes on the spool's file system (or below
 * min_free_mb of space) a C-STORE is refused with 0xA700. */
enum { INGEST_MIN_FREE_INODES = 64 };

/* store_begin / store_end handlers (see scp.h for the contract). */
unsigned ingest_store_begin(ingest *in, char *tmp_path, size_t tmp_len, char *comment,
                            size_t comment_len);
/* The free space (MiB) a reception must leave on the spool while it
 * writes (store_min_free_mb): min_free_mb as set, 0 = no check (a write
 * that fails still fails the reception). */
uint64_t ingest_min_free_mb(ingest *in);
unsigned ingest_store_end(ingest *in, const scp_assoc_info *assoc, const scp_instance *inst,
                          char *comment, size_t comment_len);

/* assoc_interrupted handler: marks the series (db_series_interrupted) so
 * they wait wait_s of quiet for the resend, and says so (and why) in the
 * log. */
void ingest_assoc_interrupted(ingest *in, const scp_assoc_info *assoc,
                              const char *const *series_uids, int n, scp_cut why, int wait_s);

/* 1 if `uid` is a syntactically valid DICOM UID (1..64 of digits and dots,
 * no empty component). Ingest relies on this before using UIDs in paths. */
int ingest_uid_valid(const char *uid);

/* Path of the database under a state directory. */
void ingest_db_path(const char *state_dir, char *out, size_t len);

/* What the quarantine holds: refused instances (.dcm) and all its bytes. */
typedef struct ingest_quarantine_totals {
    int64_t instances, bytes;
} ingest_quarantine_totals;

/* Deletes the files in state_dir/quarantine last modified over `days` days
 * before now_ms (days 0: none) and counts what is left into *t. Returns how
 * many refused instances were deleted, or a negative error (the folder
 * cannot be read; a missing one holds nothing). */
int ingest_quarantine_expire(const char *state_dir, int days, int64_t now_ms,
                             ingest_quarantine_totals *t);

#endif
