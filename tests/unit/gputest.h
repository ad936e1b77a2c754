/* Helpers shared by the compute-engine unit tests (gpu/): a seeded xorshift
 * generator, so every run draws the same "random" inputs (define GT_SEED to
 * the file's seed before including), uniform, integer and Gaussian draws,
 * NaN poisoning of outputs before a run, and the GPU check that makes GPU
 * tests print "SKIP: no GPU" and pass on machines without one.
 * Single-threaded test code only (the state is a file-level static). */
#ifndef LDCT_TESTS_GPUTEST_H
#define LDCT_TESTS_GPUTEST_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "gpu/device.h"
#include "gpu/volume.h"

#ifndef GT_SEED
#error "define GT_SEED (the file's generator seed) before including gputest.h"
#endif

static uint64_t rng_state = GT_SEED;

/* Uniform in [0, 1). */
static inline double urand(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

/* Uniform integer in [lo, hi]. */
static inline int irand(int lo, int hi)
{
    return lo + (int)(urand() * (hi - lo + 1));
}

/* Standard normal (Box-Muller). */
static inline double grand(void)
{
    double u1 = urand(), u2 = urand();
    if (u1 < 1e-300)
        u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* Fills an output with NaN, so a voxel a run forgets to write shows. */
static inline void poison(gpu_volume *v)
{
    for (size_t i = 0; i < gpu_volume_count(v); i++)
        v->data[i] = NAN;
}

static inline int have_gpu(void)
{
    if (gpu_device_count() > 0)
        return 1;
    printf("SKIP: no GPU\n");
    fflush(stdout);
    return 0;
}

#endif
