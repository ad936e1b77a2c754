/* stall: finds the running job that has gone longest without reporting
 * progress; see stall.h. */
#include "daemon/stall.h"

#include "common/clock.h"
#include "db/queue.h"

#include <stdio.h>
#include <string.h>

typedef struct stalest_ctx {
    int64_t now_ms;
    int found;
    stall_job *out;
} stalest_ctx;

static void copy_text(char *dst, size_t size, const char *src)
{
    snprintf(dst, size, "%s", src ? src : "");
}

static void consider(void *ctx, const db_job_row *j)
{
    stalest_ctx *c = ctx;
    const int64_t since = j->progress_updated_ms > 0 ? j->progress_updated_ms : j->started_ms;
    const int64_t silent = since > 0 && c->now_ms > since ? c->now_ms - since : 0;
    if (c->found && silent <= c->out->silent_ms)
        return;
    c->found = 1;
    stall_job *o = c->out;
    o->id = j->id;
    o->silent_ms = silent;
    o->attempts = j->attempts;
    copy_text(o->algorithm, sizeof o->algorithm,
              j->ran_algorithm && j->ran_algorithm[0] ? j->ran_algorithm : j->algorithm);
    copy_text(o->worker, sizeof o->worker, j->worker);
    copy_text(o->stage, sizeof o->stage, j->progress_stage);
    o->fraction = j->progress_fraction;
}

int stall_stalest(db *d, int64_t now_ms, stall_job *out)
{
    stalest_ctx c = {now_ms, 0, out};
    memset(out, 0, sizeof *out);
    int rc = db_jobs_running(d, 0, consider, &c);
    return rc ? rc : c.found;
}

void stall_text(const stall_job *j, char *out, size_t len)
{
    char silent[48], stage[48] = "";
    ldct_duration_format(j->silent_ms, silent, sizeof silent);
    if (j->stage[0] && j->fraction >= 0)
        snprintf(stage, sizeof stage, ", %s %.0f%%", j->stage, j->fraction * 100.0);
    else if (j->stage[0])
        snprintf(stage, sizeof stage, ", %s", j->stage);
    snprintf(out, len, "job %lld (%s on %s%s) has reported no progress for %s", (long long)j->id,
             j->algorithm, j->worker[0] ? j->worker : "?", stage, silent);
}
