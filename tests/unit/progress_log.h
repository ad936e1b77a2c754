/* Test helper: records the progress reports of process_series (stage and
 * fraction) and checks one stage's run of reports. */
#ifndef LDCT_TESTS_PROGRESS_LOG_H
#define LDCT_TESTS_PROGRESS_LOG_H

#include <check.h>
#include <stdio.h>
#include <string.h>

#define PL_MAX_REPORTS 4096

typedef struct progress_log {
    int n;
    char stage[PL_MAX_REPORTS][16];
    double fraction[PL_MAX_REPORTS];
} progress_log;

/* A process_progress_fn; ctx is a progress_log. */
static inline void pl_record(void *ctx, const char *stage, double fraction)
{
    progress_log *l = ctx;
    if (l->n < PL_MAX_REPORTS) {
        snprintf(l->stage[l->n], sizeof l->stage[0], "%s", stage);
        l->fraction[l->n++] = fraction;
    }
}

/* The reports of `stage` from index `at` on, contiguous: from 0 to 1, never
 * down, at least min_between strictly in between. Returns the index after. */
static inline int pl_expect_stage(const progress_log *l, int at, const char *stage, int min_between)
{
    ck_assert_msg(at < l->n && strcmp(l->stage[at], stage) == 0, "no %s at report %d", stage, at);
    ck_assert_msg(l->fraction[at] == 0.0, "%s starts at %g", stage, l->fraction[at]);
    int between = 0, i = at + 1;
    for (; i < l->n && strcmp(l->stage[i], stage) == 0; i++) {
        ck_assert_msg(l->fraction[i] >= l->fraction[i - 1], "%s went down: %g after %g", stage,
                      l->fraction[i], l->fraction[i - 1]);
        between += l->fraction[i] > 0.0 && l->fraction[i] < 1.0;
    }
    ck_assert_msg(l->fraction[i - 1] == 1.0, "%s ends at %g", stage, l->fraction[i - 1]);
    ck_assert_msg(between >= min_between, "%s: %d reports between 0 and 1, expected %d", stage,
                  between, min_between);
    return i;
}

#endif
