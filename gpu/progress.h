/* Progress of a long engine call: an optional callback that the CPU
 * references report to while they run (a CPU fallback of a large series
 * takes minutes). The CUDA versions run in seconds and report nothing.
 *
 * report(ctx, fraction) runs on the thread that made the engine call (the
 * OpenMP workers only count), with fractions from 0 to 1 that never go
 * down; the last report of a call that succeeds is 1. It must return
 * quickly and must not call the engine.
 */
#ifndef LDCT_GPU_PROGRESS_H
#define LDCT_GPU_PROGRESS_H

#include <pthread.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gpu_progress {
    void (*report)(void *ctx, double fraction);
    void *ctx;
} gpu_progress;

/* Work counted by any thread of an OpenMP team, reported by the thread that
 * called gpu_progress_begin (the engine's caller; the pipeline's file loops
 * use it too). The call's share [base, base + span) of the whole is covered
 * by `total` units. */
typedef struct gpu_progress_count {
    const gpu_progress *p; /* NULL: counting is off */
    pthread_t caller;      /* the thread that reports */
    double base, span;
    long total;
    long done; /* atomic */
} gpu_progress_count;

void gpu_progress_begin(gpu_progress_count *c, const gpu_progress *p, double base, double span,
                        long total);
/* Adds n units done (any thread); reports at most 0.999 of the share, so
 * that only gpu_progress_end reports its end. */
void gpu_progress_add(gpu_progress_count *c, long n);
/* Reports the end of the share, base + span (calling thread, after the
 * parallel region: thread 0 may have finished before the others). */
void gpu_progress_end(const gpu_progress_count *c);
/* Reports a fraction of the whole directly (calling thread only). */
void gpu_progress_at(const gpu_progress *p, double fraction);

#ifdef __cplusplus
}
#endif

#endif
