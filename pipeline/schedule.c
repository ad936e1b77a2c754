/* Decisions for stable series and retention; see schedule.h. */
#include "pipeline/schedule.h"

#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "db/queue.h"
#include "pipeline/assemble.h"
#include "pipeline/assemble_proj.h"
#include "pipeline/process.h"
#include "pipeline/rules.h"
#include "scp/scp.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *const ACTION_NAMES[] = {[RULE_PROCESS] = "process",
                                           [RULE_BOTH] = "both",
                                           [RULE_ROUTE] = "route",
                                           [RULE_DISCARD] = "discard"};

int schedule_quiet_seconds(const ldct_config *cfg)
{
    int q = cfg->node.stable_seconds;
    for (int i = 0; i < cfg->nrule; i++)
        if (cfg->rule[i].stable_seconds > 0 && cfg->rule[i].stable_seconds < q)
            q = cfg->rule[i].stable_seconds;
    return q;
}

/* Reads the attributes rules match on from the series' first instance. */
static int read_attributes(db *d, const db_series_info *si, scp_slice_info *info, int *projection)
{
    db_strings paths = {0, NULL};
    int rc = db_series_paths(d, si->id, &paths);
    if (rc)
        return rc;
    char err[256] = "";
    rc = paths.n ? scp_slice_read_info(paths.v[0], info, err, sizeof err) : LDCT_ENOTFOUND;
    *projection = !rc && asm_proj_is_projection(paths.v[0]); /* DICOM-CT-PD: auto is fdk */
    if (rc)
        log_warn("series %s: cannot read its first instance: %s", si->series_uid,
                 err[0] ? err : ldct_strerror(rc));
    db_strings_free(&paths);
    return rc;
}

static const cfg_rule *match(const ldct_config *cfg, const db_series_info *si,
                             const scp_slice_info *in, int readable, const char *not_processable)
{
    rule_series rs = {
        .modality = si->modality,
        .calling_ae = si->calling_ae,
        .called_ae = si->called_ae,
        .series_description = readable ? in->series_description : "",
        .protocol_name = readable ? in->protocol_name : "",
        .body_part_examined = readable ? in->body_part_examined : "",
        .manufacturer = readable ? in->manufacturer : "",
        .image_type = readable ? in->image_type : "",
        .not_processable = not_processable,
        .slice_thickness = readable && in->slice_thickness > 0 ? in->slice_thickness : NAN,
        .kvp = readable ? in->kvp : NAN,
        .ctdivol = readable ? in->ctdivol : NAN,
        .exposure = readable ? in->exposure_mas : NAN,
    };
    return rules_match(cfg, &rs);
}

/* What the log says a job runs: auto with what a 3D series of this
 * thickness gets (a 4D series gets adaptive4d when it is assembled). */
static const char *auto_name(const char *algo, double thickness)
{
    if (strcmp(algo, "auto") != 0)
        return algo;
    cfg_rule any = {.algorithm = ALGO_AUTO};
    return rules_algorithm(&any, thickness) == ALGO_NLM2D ? "auto (nlm2d unless 4D)"
                                                          : "auto (nlm3d unless 4D)";
}

static int create_job(db *d, const ldct_config *cfg, const db_series_info *si, const cfg_rule *r,
                      double thickness, int projection, const char *not_processable)
{
    char uid[65] = "", params[1024], dests[600] = "";
    int process = (r->action == RULE_PROCESS || r->action == RULE_BOTH) && !not_processable;
    if (r->action == RULE_BOTH && not_processable)
        log_notice("series %s: %s, so rule '%s' only sends the original", si->series_uid,
                   not_processable, r->name);
    int rc = process ? scp_uid_new(cfg->node.uid_root, uid, sizeof uid) : 0;
    if (rc)
        return rc;
    process_params_format(r, params, sizeof params);
    for (int k = 0; k < r->ndest; k++)
        snprintf(dests + strlen(dests), sizeof dests - strlen(dests), "%s%s", k ? "," : "",
                 r->destinations[k]);
    /* auto stays auto in the job: processing resolves it once the series is
     * assembled (4D series get adaptive4d, see process.c), except for
     * projection data, which only fdk can use. */
    const char *algo = !process                                  ? "none"
                       : projection && r->algorithm == ALGO_AUTO ? "fdk"
                       : r->algorithm == ALGO_AUTO               ? "auto"
                                                   : process_algorithm_name(r->algorithm);
    db_job_spec spec = {.series_id = si->id,
                        .rule = r->name,
                        .action =
                            process || r->action != RULE_BOTH ? ACTION_NAMES[r->action] : "route",
                        .algorithm = algo,
                        .params = params,
                        .description_suffix = r->series_description_suffix,
                        .priority = r->priority,
                        .derived_series_uid = process ? uid : NULL,
                        .destinations = dests,
                        .send_original = r->action == RULE_BOTH || r->action == RULE_ROUTE,
                        .process = process};
    int64_t job_id = 0;
    rc = db_job_create(d, &spec, ldct_now_ms(), &job_id);
    if (!rc)
        log_notice("series %s (%d instance(s)) matches rule '%s': job %lld, %s%s%s, to %s",
                   si->series_uid, si->instances, r->name, (long long)job_id, spec.action,
                   process ? " with " : "", process ? auto_name(algo, thickness) : "",
                   dests[0] ? dests : "results");
    return rc;
}

/* A rule's quiet time longer than what the series waited: wait the rest. */
static int wants_longer(const ldct_config *cfg, const cfg_rule *r, const db_series_info *si)
{
    int want = r && r->stable_seconds > 0 ? r->stable_seconds : cfg->node.stable_seconds;
    return want > si->stable_seconds ? want : 0;
}

int schedule_series(db *d, const ldct_config *cfg, const char *series_uid)
{
    db_series_info si;
    int rc = db_series_get(d, series_uid, &si);
    if (rc)
        return rc;
    if (si.instances == 0) { /* its instances were re-sent under other series */
        log_notice("series %s has no instances left (re-sent under another series); nothing "
                   "to process",
                   series_uid);
        return (rc = db_series_set_state(d, si.id, "unmatched")) ? rc : SCHED_UNMATCHED;
    }
    scp_slice_info info;
    int projection = 0;
    int readable = read_attributes(d, &si, &info, &projection) == 0;
    char why[160];
    const char *not_processable = readable ? asm_not_processable(&info, why, sizeof why) : NULL;
    const cfg_rule *r = match(cfg, &si, &info, readable, not_processable);
    double thickness = readable && info.slice_thickness > 0 ? info.slice_thickness : NAN;
    if (readable)
        scp_slice_info_free(&info);
    int longer = wants_longer(cfg, r, &si);
    if (longer) {
        log_info("series %s: waiting %d s of quiet time (rule '%s')", series_uid, longer,
                 r ? r->name : "(none)");
        return (rc = db_series_defer(d, si.id, longer)) ? rc : SCHED_DEFERRED;
    }
    if (!r) {
        log_notice(
            "series %s (%s, %d instance(s)) matches no rule%s%s%s%s; kept for %d h", series_uid,
            si.modality, si.instances, not_processable ? " that applies to it (" : "",
            not_processable ? not_processable : "", not_processable ? ": not processed)" : "",
            readable ? ""
                     : " (its first instance could not be read, so only modality and"
                       " AE titles were matched)",
            cfg->node.retention_hours);
        return (rc = db_series_set_state(d, si.id, "unmatched")) ? rc : SCHED_UNMATCHED;
    }
    if (r->action == RULE_DISCARD) {
        log_notice("series %s discarded by rule '%s'; removed after %d h", series_uid, r->name,
                   cfg->node.retention_hours);
        return (rc = db_series_set_state(d, si.id, "discarded")) ? rc : SCHED_DISCARDED;
    }
    rc = create_job(d, cfg, &si, r, thickness, projection, not_processable);
    if (rc)
        log_err("series %s: cannot create its job: %s", series_uid, ldct_strerror(rc));
    return rc ? rc : SCHED_JOB;
}

int schedule_pending(db *d, const ldct_config *cfg)
{
    db_strings uids = {0, NULL};
    int rc = db_series_stable_uids(d, &uids);
    for (int i = 0; !rc && i < uids.n; i++)
        (void)schedule_series(d, cfg, uids.v[i]);
    int n = uids.n;
    db_strings_free(&uids);
    return rc ? rc : n;
}

/* Removes dir, then its parents while they are empty and lie below one of
 * the state directory's own folders: spool/<study>/<series> takes the study
 * folder with it, spool/ and outbox/ themselves stay. rmdir fails
 * harmlessly on a folder that is not empty; the receiver recreates a
 * folder removed under it (place_file). */
static void remove_empty_dirs(char *dir, const char *root)
{
    const size_t rl = strlen(root);
    if (rmdir(dir) != 0)
        return;
    for (char *slash; (slash = strrchr(dir, '/')) != NULL;) {
        *slash = '\0'; /* dir is now its parent */
        if (strncmp(dir, root, rl) != 0 || dir[rl] != '/' || !strchr(dir + rl + 1, '/') ||
            rmdir(dir) != 0)
            return;
    }
}

/* Removes the files of a series (spool and outbox), then each directory
 * that held them when it is empty (remove_empty_dirs). */
static void remove_files(const db_strings *paths, const char *root)
{
    char dir[1024] = "";
    for (int i = 0; i < paths->n; i++) {
        if (unlink(paths->v[i]) != 0 && errno != ENOENT)
            log_warn("cannot remove %s: %s", paths->v[i], strerror(errno));
        const char *slash = strrchr(paths->v[i], '/');
        if (!slash)
            continue;
        if (dir[0] && (strncmp(dir, paths->v[i], strlen(dir)) != 0 ||
                       (size_t)(slash - paths->v[i]) != strlen(dir)))
            remove_empty_dirs(dir, root);
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - paths->v[i]), paths->v[i]);
    }
    if (dir[0])
        remove_empty_dirs(dir, root);
}

static const char *removal_reason(const char *state)
{
    if (strcmp(state, "discarded") == 0)
        return "discarded by its rule";
    if (strcmp(state, "done") == 0)
        return "processed and delivered";
    return "no rule matched";
}

typedef struct expire_ctx {
    db *d;
    const char *root; /* the state directory */
    int hours, removed;
} expire_ctx;

static void expire_one(void *ctx, int64_t id, const char *uid, const char *state)
{
    expire_ctx *e = ctx;
    db_strings paths = {0, NULL};
    /* Rows first, files after the commit: a resend racing with the removal
     * reopens the series and keeps everything (LDCT_ENOTFOUND). */
    int rc = db_series_remove(e->d, id, &paths);
    if (!rc)
        remove_files(&paths, e->root);
    if (rc == LDCT_ENOTFOUND) {
        log_info("series %s reopened by a resend; not removed", uid);
    } else if (rc) {
        log_warn("series %s: cannot remove it: %s", uid, ldct_strerror(rc));
    } else {
        log_notice("series %s removed after %d h (%s, %d file(s))", uid, e->hours,
                   removal_reason(state), paths.n);
        e->removed++;
    }
    db_strings_free(&paths);
}

int schedule_expire(db *d, const ldct_config *cfg, int64_t now_ms)
{
    expire_ctx e = {d, cfg->node.state_dir, cfg->node.retention_hours, 0};
    int rc =
        db_series_expired(d, now_ms - (int64_t)cfg->node.retention_hours * 3600000, expire_one, &e);
    return rc < 0 ? rc : e.removed;
}
