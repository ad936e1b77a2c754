/* Durable ingest of received instances; see ingest.h. */
#include "pipeline/ingest.h"

#include "common/clock.h"
#include "common/err.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "db/db.h"
#include "pipeline/tmppool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>

struct ingest {
    char spool[1024];
    char tmpdir[1100];
    char quarantine[1100]; /* refused instances, kept for inspection */
    pthread_mutex_t lock;  /* guards db and policy */
    db *db;
    ingest_policy policy;
    atomic_uint_fast64_t seq;
    tmppool *pool; /* temp files made ahead (NULL: each store makes its own) */
};

/* Empty files ready for a whole series' burst (up to 1024 instances; only
 * inodes), refilled between bursts (tmppool.h). With them, 500 instances
 * of 512x512 went in 0.87-0.96 s instead of 1.19-1.38 s here
 * (docs/PERFORMANCE.md, ingest, sixteenth session). */
enum { POOL_FILES = 1024 };

void ingest_db_path(const char *state_dir, char *out, size_t len)
{
    snprintf(out, len, "%s/ldct.db", state_dir);
}

int ingest_uid_valid(const char *uid)
{
    return scp_uid_valid(uid);
}

static void remove_stale_temps(const char *tmpdir)
{
    DIR *dir = opendir(tmpdir);
    if (!dir)
        return;
    int n = 0; /* files with data: the empty ones were made ahead (tmppool) */
    for (struct dirent *e; (e = readdir(dir));) {
        if (e->d_name[0] == '.')
            continue;
        char p[2048];
        struct stat st;
        snprintf(p, sizeof p, "%s/%s", tmpdir, e->d_name);
        const int had_data = stat(p, &st) == 0 && st.st_size > 0;
        n += unlink(p) == 0 && had_data;
    }
    closedir(dir);
    if (n)
        log_notice("removed %d unacknowledged partial file(s) from %s", n, tmpdir);
}

int ingest_new(const char *state_dir, const ingest_policy *policy, ingest **out)
{
    *out = NULL;
    ingest *in = calloc(1, sizeof *in);
    if (!in)
        return -12; /* -ENOMEM */
    snprintf(in->spool, sizeof in->spool, "%s/spool", state_dir);
    snprintf(in->tmpdir, sizeof in->tmpdir, "%s/.tmp", in->spool);
    snprintf(in->quarantine, sizeof in->quarantine, "%s/quarantine", state_dir);
    in->policy = *policy;
    pthread_mutex_init(&in->lock, NULL);
    char dbpath[1100];
    ingest_db_path(state_dir, dbpath, sizeof dbpath);
    int rc = fs_mkdirs(in->tmpdir);
    if (rc) {
        log_err("cannot create %s: %s", in->tmpdir, ldct_strerror(rc));
        goto fail;
    }
    remove_stale_temps(in->tmpdir);
    char prefix[32];
    snprintf(prefix, sizeof prefix, "%d", (int)getpid());
    int prc = tmppool_new(in->tmpdir, prefix, POOL_FILES, &in->pool);
    if (prc) /* not fatal: each store then creates its own file */
        log_warn("cannot start making temp files ahead: %s", ldct_strerror(prc));
    if ((rc = fs_mkdirs(in->quarantine))) {
        log_err("cannot create %s: %s", in->quarantine, ldct_strerror(rc));
        goto fail;
    }
    if ((rc = db_open(dbpath, 0, &in->db)))
        goto fail;
    *out = in;
    return 0;
fail:
    ingest_free(in);
    return rc;
}

void ingest_free(ingest *in)
{
    if (!in)
        return;
    tmppool_free(in->pool);
    db_close(in->db);
    pthread_mutex_destroy(&in->lock);
    free(in);
}

void ingest_policy_set(ingest *in, const ingest_policy *policy)
{
    pthread_mutex_lock(&in->lock);
    in->policy = *policy;
    pthread_mutex_unlock(&in->lock);
}

static ingest_policy policy_get(ingest *in)
{
    pthread_mutex_lock(&in->lock);
    ingest_policy p = in->policy;
    pthread_mutex_unlock(&in->lock);
    return p;
}

uint64_t ingest_min_free_mb(ingest *in)
{
    const int mb = policy_get(in).min_free_mb;
    return mb > 0 ? (uint64_t)mb : 0;
}

unsigned ingest_store_begin(ingest *in, char *tmp_path, size_t tmp_len, char *comment,
                            size_t comment_len)
{
    /* Under 1 MiB nothing is accepted, even with min_free_mb = 0: when the
     * write of a dataset's last PDV fails, DCMTK's file receive waits for
     * more PDVs until dimse_timeout and the association is aborted. */
    ingest_policy p = policy_get(in);
    int floor_mb = p.min_free_mb > 1 ? p.min_free_mb : 1;
    uint64_t free_mb = 0, inodes = 0;
    int rc = fs_free_mb_inodes(in->spool, &free_mb, &inodes);
    if (rc || free_mb < (uint64_t)floor_mb) {
        snprintf(comment, comment_len, "out of disk space: %llu MiB free, minimum %d MiB",
                 (unsigned long long)free_mb, floor_mb);
        log_warn("refusing C-STORE: %s", comment);
        return SCP_STATUS_OUT_OF_RESOURCES;
    }
    /* A store may need three: its file (when the pool has none) and the
     * study's and series' directories; the rest is margin for the
     * database's files. Refused clearly here rather than failing later. */
    if (inodes < INGEST_MIN_FREE_INODES) {
        snprintf(comment, comment_len, "out of inodes: %llu free, minimum %d",
                 (unsigned long long)inodes, INGEST_MIN_FREE_INODES);
        log_warn("refusing C-STORE: %s", comment);
        return SCP_STATUS_OUT_OF_RESOURCES;
    }
    if (tmppool_take(in->pool, tmp_path, tmp_len))
        return SCP_STATUS_SUCCESS;
    unsigned long long n = (unsigned long long)atomic_fetch_add(&in->seq, 1);
    snprintf(tmp_path, tmp_len, "%s/%d-%llu.part", in->tmpdir, (int)getpid(), n);
    return SCP_STATUS_SUCCESS;
}

/* Checks the dataset against its request; the DIMSE status and why. */
static unsigned check_instance(const scp_instance *inst, char *comment, size_t len)
{
    static const struct {
        const char *tag, *name;
        size_t off;
    } required[] = {
        {"(0008,0016)", "SOP Class UID", offsetof(scp_instance, sop_class_uid)},
        {"(0008,0018)", "SOP Instance UID", offsetof(scp_instance, sop_instance_uid)},
        {"(0020,000D)", "Study Instance UID", offsetof(scp_instance, study_uid)},
        {"(0020,000E)", "Series Instance UID", offsetof(scp_instance, series_uid)},
    };
    if (!inst->parsed) {
        snprintf(comment, len, "the dataset cannot be parsed (truncated or not DICOM)");
        return SCP_STATUS_CANNOT_UNDERSTAND;
    }
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
        const char *v = *(const char *const *)((const char *)inst + required[i].off);
        if (!v[0] || !ingest_uid_valid(v)) {
            snprintf(comment, len, "%s %s %s", v[0] ? "invalid" : "missing", required[i].tag,
                     required[i].name);
            return SCP_STATUS_CANNOT_UNDERSTAND;
        }
    }
    if (strcmp(inst->sop_class_uid, inst->req_sop_class_uid) != 0) {
        snprintf(comment, len, "SOP Class UID in the dataset does not match the request");
        return SCP_STATUS_DATASET_MISMATCH;
    }
    if (strcmp(inst->sop_instance_uid, inst->req_sop_instance_uid) != 0) {
        snprintf(comment, len, "SOP Instance UID in the dataset does not match the request");
        return SCP_STATUS_DATASET_MISMATCH;
    }
    return SCP_STATUS_SUCCESS;
}

/* Where an instance lives in the spool, and the file there now (a
 * resend's earlier copy), looked up once per C-STORE. */
typedef struct spool_place {
    char dir[1024], final[2048];
    int existed;
    struct stat st; /* when existed */
} spool_place;

static void spool_locate(const ingest *in, const scp_instance *inst, spool_place *p)
{
    snprintf(p->dir, sizeof p->dir, "%s/%s/%s", in->spool, inst->study_uid, inst->series_uid);
    snprintf(p->final, sizeof p->final, "%s/%s.dcm", p->dir, inst->sop_instance_uid);
    p->existed = stat(p->final, &p->st) == 0;
}

/* An instance sent again, byte for byte, while its series waits for its
 * job or the job runs (series stable or queued): the job has it already.
 * Recording it would reopen the series, and a second job would do the
 * same work for the same result. 1 when that is so (nothing to store):
 * the instance's row names this series and the spool file, and the file
 * was put there no later than the row was written. A file without a row
 * (a kill between the rename and the commit: never acknowledged) or one
 * replaced after its row (a store whose commit failed) is no proof that
 * the job has these bytes, and takes the usual way. */
static int unchanged_resend(ingest *in, const scp_instance *inst, const spool_place *p)
{
    if (!p->existed)
        return 0;
    db_stored row;
    pthread_mutex_lock(&in->lock);
    int rc = db_instance_stored(in->db, inst->sop_instance_uid, inst->series_uid, &row);
    pthread_mutex_unlock(&in->lock);
    const int64_t placed_ms =
        (int64_t)p->st.st_ctim.tv_sec * 1000 + p->st.st_ctim.tv_nsec / 1000000;
    return rc == 0 && strcmp(row.path, p->final) == 0 && placed_ms <= row.received_ms &&
           (strcmp(row.series_state, "stable") == 0 || strcmp(row.series_state, "queued") == 0) &&
           fs_same_content(inst->file_path, p->final);
}

/* fsync, rename into the spool, fsync the directory. The series directory
 * usually exists already, so it is created only when the rename says so;
 * retention may remove an empty study folder between the mkdir and the
 * rename, hence the retries. */
static int place_file(const scp_instance *inst, const spool_place *p)
{
    int rc = fs_fsync_path(inst->file_path);
    if (rc)
        return rc;
    rc = fs_rename_durable(inst->file_path, p->final);
    for (int tries = 0; rc == -ENOENT && tries < 3; tries++)
        if ((rc = fs_mkdirs(p->dir)) == 0)
            rc = fs_rename_durable(inst->file_path, p->final);
    return rc;
}

static int record(ingest *in, const scp_assoc_info *a, const scp_instance *inst, const char *path)
{
    ingest_policy p = policy_get(in);
    db_instance_rec rec = {
        .study_uid = inst->study_uid,
        .series_uid = inst->series_uid,
        .sop_instance_uid = inst->sop_instance_uid,
        .sop_class_uid = inst->sop_class_uid,
        .transfer_syntax_uid = inst->transfer_syntax_uid,
        .modality = inst->modality,
        .calling_ae = a->calling_ae,
        .called_ae = a->called_ae,
        .path = path,
        .size = inst->file_size,
        .received_ms = ldct_now_ms(),
        .stable_seconds = p.stable_seconds,
        .assoc_started_ms = a->started_ms,
    };
    char old[1024];
    pthread_mutex_lock(&in->lock);
    int rc = db_instance_put(in->db, &rec, old, sizeof old);
    pthread_mutex_unlock(&in->lock);
    if (rc == 0 && old[0] && unlink(old) == 0)
        log_info("instance %s moved series; removed the old file", inst->sop_instance_uid);
    return rc;
}

/* Whether name ends in suffix. */
static int ends_with(const char *name, const char *suffix)
{
    size_t n = strlen(name), k = strlen(suffix);
    return n >= k && strcmp(name + n - k, suffix) == 0;
}

/* One quarantine entry: deleted when older than cutoff_s (Unix s; 0:
 * never), else counted. 1 when a refused instance was deleted. */
static int quarantine_entry(int dirfd, const char *name, int64_t cutoff_s,
                            ingest_quarantine_totals *t)
{
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
        return 0;
    const int instance = ends_with(name, ".dcm");
    if (cutoff_s && (int64_t)st.st_mtime < cutoff_s && unlinkat(dirfd, name, 0) == 0)
        return instance;
    t->instances += instance;
    t->bytes += (int64_t)st.st_size;
    return 0;
}

int ingest_quarantine_expire(const char *state_dir, int days, int64_t now_ms,
                             ingest_quarantine_totals *t)
{
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/quarantine", state_dir);
    *t = (ingest_quarantine_totals){0, 0};
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? 0 : -errno;
    const int64_t cutoff_s = days > 0 ? now_ms / 1000 - (int64_t)days * 86400 : 0;
    int removed = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (e->d_name[0] != '.')
            removed += quarantine_entry(dirfd(d), e->d_name, cutoff_s, t);
    closedir(d);
    return removed;
}

/* Moves a refused instance's file to the quarantine folder, as received,
 * with NAME.reason beside it (the status comment, calling AE and peer: no
 * patient data). The file is removed when it cannot be kept. */
static void quarantine(ingest *in, const scp_assoc_info *a, const scp_instance *inst,
                       const char *comment)
{
    const char *base = strrchr(inst->file_path, '/');
    char name[1400], reason[1500];
    snprintf(name, sizeof name, "%s/%lld-%s", in->quarantine, (long long)ldct_now_ms(),
             base ? base + 1 : inst->file_path);
    char *dot = strrchr(name, '.');
    if (dot && !strcmp(dot, ".part"))
        *dot = '\0';
    snprintf(reason, sizeof reason, "%s.reason", name);
    strncat(name, ".dcm", sizeof name - strlen(name) - 1);
    if (rename(inst->file_path, name) != 0) {
        log_warn("cannot keep the refused instance in %s: %s", in->quarantine, strerror(errno));
        unlink(inst->file_path);
        return;
    }
    FILE *f = fopen(reason, "w");
    if (f) {
        fprintf(f, "%s\ncalling AE %s, peer %s, SOP Instance UID in the request %s\n", comment,
                a->calling_ae, a->peer_host, inst->req_sop_instance_uid);
        fclose(f);
    }
    log_notice("refused instance kept for inspection as %s", name);
}

/* A dataset whose write failed, or that does not parse after reception
 * onto a spool with under 1 MiB left, was cut short by our disk, not sent
 * broken: the sender hears "out of resources" (and may retry), and the
 * file is not kept as its fault. */
static int cut_by_a_full_disk(ingest *in, const scp_instance *inst, char *comment, size_t len)
{
    uint64_t free_mb = 1;
    if (!inst->write_failed &&
        (inst->parsed || fs_free_mb(in->spool, &free_mb) != 0 || free_mb >= 1))
        return 0;
    snprintf(comment, len, "out of disk space while receiving (spool full or down to min_free_mb)");
    return 1;
}

/* Marks one series (uid) or, with uid NULL, the calling AE's receiving
 * series, as the cut `why` asks; *marked = series marked now. */
static int hold_series(ingest *in, const scp_assoc_info *assoc, const char *uid, scp_cut why,
                       int *marked)
{
    pthread_mutex_lock(&in->lock);
    int rc = why == SCP_CUT_REFUSED ? db_series_hold(in->db, uid, assoc->calling_ae, ldct_now_ms(),
                                                     assoc->started_ms, marked)
                                    : db_series_interrupted(in->db, uid, ldct_now_ms(), marked);
    pthread_mutex_unlock(&in->lock);
    return rc;
}

void ingest_assoc_interrupted(ingest *in, const scp_assoc_info *assoc,
                              const char *const *series_uids, int n, scp_cut why, int wait_s)
{
    const char *what = why == SCP_CUT_REFUSED
                           ? "had instances refused for lack of resources (0xA700)"
                           : "ended by an abort or an error";
    for (int i = 0; i <= n; i++) {
        if (i == n && why != SCP_CUT_REFUSED)
            break; /* the calling AE's other series: only after refusals */
        const char *uid = i < n ? series_uids[i] : NULL;
        int marked = 0, rc = hold_series(in, assoc, uid, why, &marked);
        if (rc) { /* at every refusal while the disk is full: limited */
            char line[512];
            snprintf(line, sizeof line,
                     "series %s: its association from %s %s, and the mark that holds it for a"
                     " resend was not stored: %s",
                     uid ? uid : "(all receiving)", assoc->calling_ae, what, ldct_strerror(rc));
            log_limited(LOG_LVL_WARNING, line);
        } else if (marked && uid)
            log_notice("series %s: its association from %s (%s) %s; it waits for the sender's"
                       " resend (at least %d s of quiet) before it counts as complete",
                       uid, assoc->calling_ae, assoc->peer_host, what, wait_s);
        else if (marked)
            log_notice("%d receiving series from %s (%s) held as well: an association from it"
                       " %s, and the refused instances' series is not known; each waits for the"
                       " sender's resend (at least %d s of quiet)",
                       marked, assoc->calling_ae, assoc->peer_host, what, wait_s);
        else if (uid && why == SCP_CUT_ABORTED) /* e.g. a sender that aborts after idling */
            log_info("series %s: its association from %s %s, but it is no longer receiving"
                     " (already stable or processed), so it is not held for a resend",
                     uid, assoc->calling_ae, what);
    }
}

unsigned ingest_store_end(ingest *in, const scp_assoc_info *assoc, const scp_instance *inst,
                          char *comment, size_t comment_len)
{
    if (cut_by_a_full_disk(in, inst, comment, comment_len)) {
        log_err("instance from %s (%s) not stored: %s", assoc->calling_ae, assoc->peer_host,
                comment);
        unlink(inst->file_path);
        return SCP_STATUS_OUT_OF_RESOURCES;
    }
    unsigned status = check_instance(inst, comment, comment_len);
    if (status != SCP_STATUS_SUCCESS) {
        log_warn("refused instance from %s (%s): %s", assoc->calling_ae, assoc->peer_host, comment);
        quarantine(in, assoc, inst, comment);
        return status;
    }
    spool_place p = {.existed = 0};
    spool_locate(in, inst, &p);
    if (unchanged_resend(in, inst, &p)) {
        unlink(inst->file_path);
        log_debug("instance %s of series %s sent again unchanged; its job has it already",
                  inst->sop_instance_uid, inst->series_uid);
        return SCP_STATUS_SUCCESS;
    }
    int placed = 0;
    int rc = place_file(inst, &p);
    if (rc == 0) {
        placed = 1;
        rc = record(in, assoc, inst, p.final);
    }
    if (rc) {
        /* The temp file goes, and a placed file that no row names (a full
         * database disk): nothing would ever remove it. A file that was
         * there before holds an instance acknowledged earlier (a resend)
         * and stays. */
        unlink(inst->file_path);
        if (placed && !p.existed)
            unlink(p.final);
        snprintf(comment, comment_len, "could not store the instance: %s", ldct_strerror(rc));
        log_err("instance %s: %s", inst->sop_instance_uid, comment);
        return SCP_STATUS_OUT_OF_RESOURCES;
    }
    log_debug("stored %s in series %s", inst->sop_instance_uid, inst->series_uid);
    return SCP_STATUS_SUCCESS;
}
