/* Progress reports of the CPU references; see progress.h. gpu_progress_add
 * may be called by any thread; the others by the engine's caller only. */
#include "gpu/progress.h"

#include <stddef.h>

#define PROGRESS_ADD_MAX 0.999

void gpu_progress_begin(gpu_progress_count *c, const gpu_progress *p, double base, double span,
                        long total)
{
    c->p = p && p->report ? p : NULL;
    c->caller = pthread_self();
    c->base = base;
    c->span = span;
    c->total = total > 0 ? total : 1;
    c->done = 0;
}

void gpu_progress_add(gpu_progress_count *c, long n)
{
    if (!c || !c->p)
        return;
    long done = __atomic_add_fetch(&c->done, n, __ATOMIC_RELAXED);
    if (!pthread_equal(pthread_self(), c->caller))
        return; /* only the engine's caller reports */
    /* The end of the share is gpu_progress_end's to report: work counted
     * whole may still fail or have a last step (a sync) after it. */
    double f = (double)done / (double)c->total;
    c->p->report(c->p->ctx, c->base + c->span * (f < PROGRESS_ADD_MAX ? f : PROGRESS_ADD_MAX));
}

void gpu_progress_end(const gpu_progress_count *c)
{
    if (c->p)
        c->p->report(c->p->ctx, c->base + c->span);
}

void gpu_progress_at(const gpu_progress *p, double fraction)
{
    if (p && p->report)
        p->report(p->ctx, fraction < 0 ? 0 : fraction > 1 ? 1 : fraction);
}
