/* xoshiro256** with splitmix64 seeding, and the uniform, normal and Poisson
 * transforms of gpu/rng.h. Pure C; any thread (one generator per thread). */
#include "gpu/rng.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

void gpu_rng_init(gpu_rng *r, uint64_t seed, uint64_t stream, uint64_t a, uint64_t b)
{
    /* Each key part passes through splitmix64 before it is mixed in, so keys
     * that differ in one bit start far apart. */
    uint64_t x = seed;
    uint64_t h = splitmix64(&x);
    x = h ^ stream;
    h = splitmix64(&x);
    x = h ^ a;
    h = splitmix64(&x);
    x = h ^ b;
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
}

uint64_t gpu_rng_next(gpu_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double gpu_rng_uniform(gpu_rng *r)
{
    return ((double)(gpu_rng_next(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

double gpu_rng_normal(gpu_rng *r)
{
    double u = gpu_rng_uniform(r), v = gpu_rng_uniform(r);
    return sqrt(-2.0 * log(u)) * cos(2.0 * 3.14159265358979323846 * v);
}

static double poisson_small(gpu_rng *r, double lambda)
{
    double limit = exp(-lambda), prod = gpu_rng_uniform(r);
    double k = 0;
    while (prod > limit) {
        prod *= gpu_rng_uniform(r);
        k += 1;
    }
    return k;
}

/* W. Hoermann, "The transformed rejection method for generating Poisson
 * random variables", Insurance: Mathematics and Economics 12 (1993). */
static double poisson_ptrs(gpu_rng *r, double lambda)
{
    double slam = sqrt(lambda), loglam = log(lambda);
    double b = 0.931 + 2.53 * slam, a = -0.059 + 0.02483 * b;
    double invalpha = 1.1239 + 1.1328 / (b - 3.4), vr = 0.9277 - 3.6224 / (b - 2);
    for (;;) {
        double u = gpu_rng_uniform(r) - 0.5, v = gpu_rng_uniform(r);
        double us = 0.5 - fabs(u);
        double k = floor((2 * a / us + b) * u + lambda + 0.43);
        if (us >= 0.07 && v <= vr)
            return k;
        if (k < 0 || (us < 0.013 && v > us))
            continue;
        int sign;
        if (log(v) + log(invalpha) - log(a / (us * us) + b) <=
            -lambda + k * loglam - lgamma_r(k + 1, &sign))
            return k;
    }
}

double gpu_rng_poisson(gpu_rng *r, double lambda)
{
    if (!(lambda > 0))
        return 0;
    return lambda < 10 ? poisson_small(r, lambda) : poisson_ptrs(r, lambda);
}
