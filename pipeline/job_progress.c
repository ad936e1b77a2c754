/* A running job's progress, its estimate and when to publish it; see
 * job_progress.h. */
#include "pipeline/job_progress.h"

#include "common/clock.h"

#include <stdio.h>
#include <string.h>

void job_progress_start(job_progress *p, int64_t now_ms, int64_t log_every_ms)
{
    memset(p, 0, sizeof *p);
    p->log_every_ms = log_every_ms;
    p->start_ms = now_ms;
    p->fraction = -1.0;
    p->published_ms = p->logged_ms = now_ms;
}

static void new_stage(job_progress *p, const char *stage, int64_t now_ms)
{
    snprintf(p->stage, sizeof p->stage, "%s", stage);
    p->stage_ms = now_ms;
    p->counted = 0;
    p->fraction = -1.0;
}

int job_progress_update(job_progress *p, const char *stage, double fraction, int64_t now_ms)
{
    int what = 0;
    if (strncmp(p->stage, stage, sizeof p->stage - 1) != 0 ||
        (fraction >= 0 && p->fraction >= 0 && fraction < p->fraction)) {
        new_stage(p, stage, now_ms); /* a new stage, or a stage run again (CPU fallback) */
        what |= JOB_PROGRESS_PUBLISH;
    }
    if (fraction >= 0) {
        if (!p->counted) {
            p->counted = 1;
            p->first = fraction;
            p->first_ms = now_ms;
        }
        p->fraction = fraction > 1.0 ? 1.0 : fraction;
        p->last_ms = now_ms;
    }
    if (now_ms - p->published_ms >= JOB_PROGRESS_PUBLISH_MS)
        what |= JOB_PROGRESS_PUBLISH;
    if (now_ms - p->logged_ms >= p->log_every_ms) {
        what |= JOB_PROGRESS_LOG;
        p->logged_ms = now_ms;
    }
    if (what & JOB_PROGRESS_PUBLISH)
        p->published_ms = now_ms;
    return what;
}

int64_t job_progress_remaining_ms(const job_progress *p, int64_t now_ms)
{
    if (p->fraction < 0 || !p->counted || p->fraction <= p->first ||
        p->last_ms - p->first_ms < JOB_PROGRESS_ETA_MIN_MS)
        return -1;
    double rate = (p->fraction - p->first) / (double)(p->last_ms - p->first_ms);
    double left = (1.0 - p->fraction) / rate - (double)(now_ms - p->last_ms);
    return left > 0 ? (int64_t)(left + 0.5) : 0;
}

int job_progress_percent(double fraction)
{
    int pct = (int)(fraction * 100.0 + 0.5);
    return pct == 100 && fraction < 1.0 ? 99 : pct;
}

void job_progress_text(const job_progress *p, int64_t now_ms, char *out, size_t len)
{
    char pct[16] = "", so_far[32], left[32], tail[48] = "";
    if (p->fraction >= 0)
        snprintf(pct, sizeof pct, " %d%%", job_progress_percent(p->fraction));
    ldct_duration_format(now_ms - p->start_ms, so_far, sizeof so_far);
    int64_t rem = job_progress_remaining_ms(p, now_ms);
    if (rem >= 1000) {
        ldct_duration_format(rem, left, sizeof left);
        snprintf(tail, sizeof tail, ", about %s left", left);
    } else if (rem >= 0) {
        snprintf(tail, sizeof tail, ", nearly done"); /* by the estimate */
    }
    snprintf(out, len, "%s%s, %s so far%s", p->stage[0] ? p->stage : "starting", pct, so_far, tail);
}
