/* Deterministic pseudo-random numbers for the simulator: xoshiro256**
 * (Blackman and Vigna) seeded through splitmix64, with uniform, normal and
 * Poisson draws. A generator is keyed by (seed, stream, a, b) so that every
 * detector row of every view gets its own independent sequence: results do
 * not depend on the number of threads or the order they run in.
 *
 * Invariants: the same key always yields the same sequence on every
 * platform (integer arithmetic; the transforms use libm's log, sqrt, cos,
 * lgamma_r). Plain data; one generator per thread (not thread-safe per
 * object), any number of generators in parallel.
 */
#ifndef LDCT_GPU_RNG_H
#define LDCT_GPU_RNG_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gpu_rng {
    uint64_t s[4];
} gpu_rng;

/* Seeds r from the key (seed, stream, a, b). */
void gpu_rng_init(gpu_rng *r, uint64_t seed, uint64_t stream, uint64_t a, uint64_t b);

/* Next 64 random bits. */
uint64_t gpu_rng_next(gpu_rng *r);

/* Uniform in (0, 1): never exactly 0 or 1 (53-bit resolution). */
double gpu_rng_uniform(gpu_rng *r);

/* Standard normal (Box-Muller; one value per call). */
double gpu_rng_normal(gpu_rng *r);

/* Poisson with mean lambda >= 0: multiplication method below 10,
 * Hoermann's transformed rejection (PTRS, as in NumPy) above. */
double gpu_rng_poisson(gpu_rng *r, double lambda);

#ifdef __cplusplus
}
#endif

#endif
