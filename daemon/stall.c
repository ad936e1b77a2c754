/* stall: follows the running jobs' progress on the monotonic clock and
 * finds the one silent longest; see stall.h. */
#include "daemon/stall.h"

#include "common/clock.h"

#include <stdio.h>
#include <string.h>

void stall_round_begin(stall_tracker *t)
{
    for (int i = 0; i < t->n; i++)
        t->job[i].seen = 0;
}

static stall_job *find(stall_tracker *t, int64_t id)
{
    for (int i = 0; i < t->n; i++)
        if (t->job[i].id == id)
            return &t->job[i];
    return NULL;
}

static void copy_text(char *dst, size_t size, const char *src)
{
    snprintf(dst, size, "%s", src ? src : "");
}

void stall_observe(stall_tracker *t, const db_job_row *j, int64_t now_mono_ms)
{
    stall_job *s = find(t, j->id);
    if (!s && t->n == STALL_MAX_JOBS)
        return; /* more running jobs than workers can have: not followed */
    if (!s) {
        s = &t->job[t->n++];
        memset(s, 0, sizeof *s);
        s->id = j->id;
        s->updated_ms = -1; /* differs from any row: the first sight is a change */
    }
    if (s->updated_ms != j->progress_updated_ms || s->fraction != j->progress_fraction) {
        s->updated_ms = j->progress_updated_ms;
        s->fraction = j->progress_fraction;
        s->changed_mono = now_mono_ms;
    }
    copy_text(s->algorithm, sizeof s->algorithm,
              j->ran_algorithm && j->ran_algorithm[0] ? j->ran_algorithm : j->algorithm);
    copy_text(s->worker, sizeof s->worker, j->worker);
    copy_text(s->stage, sizeof s->stage, j->progress_stage);
    s->seen = 1;
}

void stall_round_end(stall_tracker *t)
{
    int kept = 0;
    for (int i = 0; i < t->n; i++)
        if (t->job[i].seen)
            t->job[kept++] = t->job[i];
    t->n = kept;
}

const stall_job *stall_stalest(const stall_tracker *t, int64_t now_mono_ms, int64_t *silent_ms)
{
    const stall_job *best = NULL;
    *silent_ms = 0;
    for (int i = 0; i < t->n; i++) {
        const int64_t silent = now_mono_ms - t->job[i].changed_mono;
        if (!best || silent > *silent_ms) {
            best = &t->job[i];
            *silent_ms = silent > 0 ? silent : 0;
        }
    }
    return best;
}

typedef struct observe_ctx {
    stall_tracker *t;
    int64_t now_mono_ms;
} observe_ctx;

static void observe_row(void *ctx, const db_job_row *j)
{
    observe_ctx *c = ctx;
    stall_observe(c->t, j, c->now_mono_ms);
}

const stall_job *stall_check(stall_tracker *t, db *d, int64_t now_mono_ms, int64_t *silent_ms,
                             int *rc)
{
    observe_ctx c = {t, now_mono_ms};
    stall_round_begin(t);
    *rc = db_jobs_running(d, 0, observe_row, &c);
    if (*rc) { /* a partial round: keep every job as it was */
        for (int i = 0; i < t->n; i++)
            t->job[i].seen = 1;
        *silent_ms = 0;
        return NULL;
    }
    stall_round_end(t);
    return stall_stalest(t, now_mono_ms, silent_ms);
}

void stall_text(const stall_job *j, int64_t silent_ms, char *out, size_t len)
{
    char silent[48], stage[48] = "";
    ldct_duration_format(silent_ms, silent, sizeof silent);
    if (j->stage[0] && j->fraction >= 0)
        snprintf(stage, sizeof stage, ", %s %.0f%%", j->stage, j->fraction * 100.0);
    else if (j->stage[0])
        snprintf(stage, sizeof stage, ", %s", j->stage);
    snprintf(out, len, "job %lld (%s on %s%s) has reported no progress for %s", (long long)j->id,
             j->algorithm[0] ? j->algorithm : "?", j->worker[0] ? j->worker : "?", stage, silent);
}
