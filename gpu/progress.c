/* Progress reports of the CPU references; see progress.h. */
#include "gpu/progress.h"

#include <omp.h>
#include <stddef.h>

void gpu__progress_begin(gpu__progress_count *c, const gpu_progress *p, double base, double span,
                         long total)
{
    c->p = p && p->report ? p : NULL;
    c->base = base;
    c->span = span;
    c->total = total > 0 ? total : 1;
    c->done = 0;
}

void gpu__progress_add(gpu__progress_count *c, long n)
{
    if (!c || !c->p)
        return;
    long done = __atomic_add_fetch(&c->done, n, __ATOMIC_RELAXED);
    if (omp_in_parallel() && omp_get_thread_num() != 0)
        return; /* only the calling thread reports */
    double f = (double)done / (double)c->total;
    c->p->report(c->p->ctx, c->base + c->span * (f < 1.0 ? f : 1.0));
}

void gpu__progress_end(const gpu__progress_count *c)
{
    if (c->p)
        c->p->report(c->p->ctx, c->base + c->span);
}

void gpu__progress_at(const gpu_progress *p, double fraction)
{
    if (p && p->report)
        p->report(p->ctx, fraction < 0 ? 0 : fraction > 1 ? 1 : fraction);
}
