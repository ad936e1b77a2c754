/* CPU reference of non-local means (2D and 3D); it defines the result that
 * the CUDA versions must match (see nlm.h for the formula). C11 + OpenMP.
 *
 * Per-offset formulation: for each offset d of half the search window, one
 * sweep over the planes of a task computes, row by row, the squared
 * differences (U(o) - U(o+d))^2, their patch sum (x: direct 2P+1 taps; y
 * and z: running sums over rings of 2P+1 rows / row-planes, or weighted taps
 * for the Gaussian kernel), the weights and the accumulation, so the
 * intermediate rows stay in L1. Because D(o,d) = D(o+d,-d), one weight
 * serves both voxels of a pair: o gets w*U(o+d) and o+d gets w*U(o). Origins
 * therefore cover the union of the task and the task shifted by -d.
 *
 * A task is a chunk of z planes (3D) or one slice (2D), times a band of rows
 * sized so its input and accumulators stay in L2 across the offsets; each
 * OpenMP thread owns a task's accumulators, so no two threads write the
 * same voxel. Each task works on its own mirrored copy of the input with a
 * halo of S+P, so inner loops have no border tests. Running sums make the
 * result depend (at float rounding) on the task boundaries.
 */
#include "gpu/nlm.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/log.h"

int gpu__mirror(int i, int n)
{
    if (n <= 1)
        return 0;
    int period = 2 * (n - 1);
    i %= period;
    if (i < 0)
        i += period;
    return i < n ? i : period - i;
}

void gpu__nlm_patch_weights(int patch_radius, int gaussian, float *g)
{
    int n = 2 * patch_radius + 1;
    double a = patch_radius > 0 ? patch_radius / 2.0 : 0.5;
    double sum = 0, w[2 * GPU_NLM_MAX_PATCH + 1];
    for (int k = 0; k < n; k++) {
        double r = k - patch_radius;
        w[k] = gaussian ? exp(-r * r / (2.0 * a * a)) : 1.0;
        sum += w[k];
    }
    for (int k = 0; k < n; k++)
        g[k] = (float)(w[k] / sum);
}

float gpu_nlm_effective_cutoff(const gpu_nlm_params *p)
{
    double c = p->cutoff;
    if (c > 0 && p->h_auto && p->strength < GPU_NLM_CUTOFF_FULL_STRENGTH) {
        double r = GPU_NLM_CUTOFF_FULL_STRENGTH / p->strength;
        c *= r * r;
    }
    return (float)(c < GPU_NLM_MAX_CUTOFF ? c : GPU_NLM_MAX_CUTOFF);
}

float gpu__nlm_cut_exponent(const gpu_nlm_params *p)
{
    float c = gpu_nlm_effective_cutoff(p);
    return c > 0 ? (float)(c * 1.4426950408889634) : INFINITY;
}

void gpu_nlm_params_default(gpu_nlm_params *p)
{
    memset(p, 0, sizeof *p);
    p->search_radius = 5;
    p->patch_radius = 2;
    p->h = 0;
    p->h_auto = 1;
    p->strength = 1.0f;
    p->cutoff = GPU_NLM_DEFAULT_CUTOFF;
}

int gpu__nlm_check(const gpu_nlm_params *p, const gpu_volume *in, const gpu_volume *out, int dim)
{
    if (!p || !in || !out || !in->data || !out->data)
        return LDCT_EINPUT;
    if (p->search_radius < 1 || p->search_radius > GPU_NLM_MAX_SEARCH || p->patch_radius < 0 ||
        p->patch_radius > GPU_NLM_MAX_PATCH)
        return LDCT_EINPUT;
    if (p->h_auto ? !(p->strength > 0) : !(p->h > 0))
        return LDCT_EINPUT;
    if (!(p->cutoff >= 0 && p->cutoff <= GPU_NLM_MAX_CUTOFF))
        return LDCT_EINPUT;
    if (in->nx < 1 || in->ny < 1 || in->nz < 1 || in->nt < 1 || !gpu_volume_same_shape(in, out))
        return LDCT_EINPUT;
    if (in->data == out->data)
        return LDCT_EINPUT;
    (void)dim;
    return 0;
}

/* ---- noise estimate ---------------------------------------------------- */

static void swapf(float *a, float *b)
{
    float t = *a;
    *a = *b;
    *b = t;
}

/* k-th smallest of v[0..n-1] (Hoare's quickselect; reorders v). */
static float select_kth(float *v, size_t n, size_t k)
{
    size_t lo = 0, hi = n - 1;
    while (lo < hi) {
        float pivot = v[lo + (hi - lo) / 2];
        size_t i = lo, j = hi;
        while (i <= j) {
            while (v[i] < pivot)
                i++;
            while (v[j] > pivot)
                j--;
            if (i <= j) {
                swapf(&v[i], &v[j]);
                i++;
                if (j == 0)
                    break;
                j--;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            break;
    }
    return v[k];
}

/* The 3x3 neighbourhood around a holds one value: padding outside the
 * reconstruction circle, or air clipped to one number; no noise to see. */
static int flat3x3(const float *a, int nx)
{
    const float c = a[0];
    return a[-nx - 1] == c && a[-nx] == c && a[-nx + 1] == c && a[-1] == c && a[1] == c &&
           a[nx - 1] == c && a[nx] == c && a[nx + 1] == c;
}

/* The values that fill whole neighbourhoods (at most 4 kept). */
typedef struct flat_values {
    float v[4];
    int n;
    size_t flat, samples; /* flat neighbourhoods among the samples */
} flat_values;

static int is_flat_value(const flat_values *f, float x)
{
    for (int i = 0; i < f->n; i++)
        if (f->v[i] == x)
            return 1;
    return 0;
}

/* Some pixel of the neighbourhood is a flat value: a response there
 * measures the step to the padding, not noise. */
static int touches_flat(const float *a, int nx, const flat_values *f)
{
    for (int dy = -1; dy <= 1; dy++)
        for (int dx = -1; dx <= 1; dx++)
            if (is_flat_value(f, a[dy * nx + dx]))
                return 1;
    return 0;
}

/* The centre of sample idx: slices one after the other, borders skipped. */
static const float *sample_at(const gpu_volume *in, size_t idx)
{
    const int nx = in->nx, ny = in->ny;
    const size_t per = (size_t)(nx - 2) * (size_t)(ny - 2), s = idx / per, rem = idx % per;
    const int y = 1 + (int)(rem / (size_t)(nx - 2)), x = 1 + (int)(rem % (size_t)(nx - 2));
    return in->data + s * (size_t)nx * (size_t)ny + (size_t)y * (size_t)nx + x;
}

/* Samples j0 .. j1 - 1 (sample j at index j * stride): their count, the
 * flat ones and the first 4 flat values in sample order. */
static void find_flat_values(const gpu_volume *in, size_t stride, size_t j0, size_t j1,
                             flat_values *f)
{
    for (size_t j = j0; j < j1; j++) {
        const float *a = sample_at(in, j * stride);
        f->samples++;
        if (!flat3x3(a, in->nx))
            continue;
        f->flat++;
        if (f->n < 4 && !is_flat_value(f, a[0]))
            f->v[f->n++] = a[0];
    }
}

/* |responses| of samples j0 .. j1 - 1 into r, leaving out those touching a
 * flat value; returns how many. */
static size_t noise_responses(const gpu_volume *in, size_t stride, size_t j0, size_t j1,
                              const flat_values *f, float *r)
{
    const int nx = in->nx;
    size_t m = 0;
    for (size_t j = j0; j < j1; j++) {
        const float *a = sample_at(in, j * stride);
        /* Padding and its border hold no noise: left out, so it neither
         * lowers (flat) nor raises (the step at its edge) the median. */
        if (f->n && touches_flat(a, nx, f))
            continue;
        /* Immerkaer's mask [1 -2 1; -2 4 -2; 1 -2 1]: a difference of two
         * Laplacians that cancels smooth (up to quadratic) structure. */
        float v = a[-nx - 1] - 2 * a[-nx] + a[-nx + 1] - 2 * a[-1] + 4 * a[0] - 2 * a[1] +
                  a[nx - 1] - 2 * a[nx] + a[nx + 1];
        r[m++] = fabsf(v);
    }
    return m;
}

/* The samples in NOISE_PARTS parts, each pass over them in parallel; the
 * parts are merged in sample order, so the result is the one of a single
 * pass (the same flat values, the same responses in the same order). */
enum { NOISE_PARTS = 64 };

static void flat_values_all(const gpu_volume *in, size_t stride, size_t ns, flat_values *f)
{
    flat_values part[NOISE_PARTS];
    memset(part, 0, sizeof part);
#pragma omp parallel for schedule(static)
    for (int p = 0; p < NOISE_PARTS; p++)
        find_flat_values(in, stride, ns * p / NOISE_PARTS, ns * (p + 1) / NOISE_PARTS, &part[p]);
    memset(f, 0, sizeof *f);
    for (int p = 0; p < NOISE_PARTS; p++) {
        f->samples += part[p].samples;
        f->flat += part[p].flat;
        for (int i = 0; i < part[p].n; i++)
            if (f->n < 4 && !is_flat_value(f, part[p].v[i]))
                f->v[f->n++] = part[p].v[i];
    }
}

/* Every kept response, in sample order, into r (room for ns); returns how
 * many. */
static size_t noise_responses_all(const gpu_volume *in, size_t stride, size_t ns,
                                  const flat_values *f, float *r)
{
    size_t m[NOISE_PARTS];
#pragma omp parallel for schedule(static)
    for (int p = 0; p < NOISE_PARTS; p++) {
        const size_t j0 = ns * p / NOISE_PARTS;
        m[p] = noise_responses(in, stride, j0, ns * (p + 1) / NOISE_PARTS, f, r + j0);
    }
    size_t n = 0;
    for (int p = 0; p < NOISE_PARTS; p++) {
        memmove(r + n, r + ns * p / NOISE_PARTS, m[p] * sizeof *r);
        n += m[p];
    }
    return n;
}

int gpu_noise_sigma(const gpu_volume *in, double *sigma)
{
    if (!in || !in->data || in->nx < 3 || in->ny < 3 || !sigma)
        return LDCT_EINPUT;
    const size_t total =
        (size_t)(in->nx - 2) * (size_t)(in->ny - 2) * (size_t)in->nz * (size_t)in->nt;
    /* Sample at most ~4M responses on a regular stride: enough for a median. */
    const size_t stride = total > 4000000 ? total / 4000000 + 1 : 1;
    const size_t ns = (total + stride - 1) / stride; /* samples */
    flat_values f;
    flat_values_all(in, stride, ns, &f);
    *sigma = 0.0;
    /* Mostly one value (a noise-free or synthetic image): nothing to remove. */
    if (f.flat * 10 > f.samples * 6)
        return 0;
    float *r = malloc(ns * sizeof *r);
    if (!r)
        return -ENOMEM;
    size_t m = noise_responses_all(in, stride, ns, &f, r);
    float med = m ? select_kth(r, m, m / 2) : 0.0f;
    free(r);
    /* The mask's coefficients have squared norm 36, so L ~ N(0, 36 sigma^2)
     * for white noise; median|L| = 0.6745 * 6 sigma. */
    *sigma = 1.482602218505602 * med / 6.0;
    return 0;
}

/* h = strength * sqrt(2) * sigma, or 1e-3 (with a warning) where that is
 * about 0. */
static float h_of_noise(const gpu_nlm_params *p, double sigma)
{
    double v = p->strength * sqrt(2.0) * sigma;
    if (!(v > 1e-6)) {
        log_warn("nlm: estimated noise %.3g: nothing to remove (a noise-free, synthetic or "
                 "already filtered series?); the result equals the input (h = 1e-3)",
                 sigma);
        v = 1e-3;
    }
    return (float)v;
}

int gpu_nlm_resolve_h(const gpu_nlm_params *p, const gpu_volume *in, float *h)
{
    if (!p->h_auto) {
        *h = p->h;
        return 0;
    }
    double sigma = 0;
    int rc = gpu_noise_sigma(in, &sigma);
    if (rc)
        return rc;
    *h = h_of_noise(p, sigma);
    return 0;
}

void gpu_nlm_fix_h_sigma(gpu_nlm_params *p, double sigma)
{
    const float h = p->h_auto ? h_of_noise(p, sigma) : p->h;
    p->cutoff = gpu_nlm_effective_cutoff(p); /* while h_auto and strength still apply */
    p->h = h;
    p->h_auto = 0;
}

int gpu_nlm_fix_h(gpu_nlm_params *p, const gpu_volume *in)
{
    double sigma = 0;
    if (p->h_auto) {
        int rc = gpu_noise_sigma(in, &sigma);
        if (rc)
            return rc;
    }
    gpu_nlm_fix_h_sigma(p, sigma);
    return 0;
}

/* ---- the per-offset core ------------------------------------------------ */

typedef struct core {
    int nx, ny, nz; /* frame (2D: one slice, nz = 1) */
    int s[3], p[3], r[3];
    float g[3][2 * GPU_NLM_MAX_PATCH + 1];
    int box; /* 1: unweighted patch (running sums in y and z) */
    /* sqrt(k), k = log2(e) / h^2 (times the box normalisation (2P+1)^dim when
     * box): the task's copy of the input is scaled by it, so the patch sums
     * come out as the exponent -log2(w) without a multiply per pair; the
     * accumulated values are unscaled at the end. */
    float uscale;
    /* Bits of the cutoff exponent (gpu__nlm_cut_exponent): weights whose
     * exponent's bits exceed it are 0; INT32_MAX: no cutoff. */
    int32_t cutb;
    gpu_progress_count *done; /* offset groups done, over every task */
} core;

/* a * b + c, fused where the caller is compiled with FMA (fma is a
 * constant after inlining; -std=c11 does not contract on its own). */
static inline __attribute__((always_inline)) float mla(float a, float b, float c, const int fma)
{
    return fma ? __builtin_fmaf(a, b, c) : a * b + c;
}

/* exp2(-y) for y >= 0 (polynomial, relative error 2.3e-7;
 * y is clamped to 126, so tiny weights are about 1e-38, never 0), or 0 where
 * y's bits exceed cutb (the distance cutoff; bits of y >= 0 order like y). Written
 * so that loops calling it vectorise with only integer selects (float
 * selects and float-to-int conversions block GCC's if-conversion under
 * -ftrapping-math): the clamp is an integer min on the bits (order-
 * preserving for y >= 0); adding 1.5 * 2^23 rounds -y to the nearest
 * integer n, whose bits then sit in the low bits of the sum and give 2^n;
 * memcpy reinterprets, which GCC vectorises where a union does not. */
static inline __attribute__((always_inline)) float exp2_neg(float y, int32_t cutb, const int fma)
{
    const float magic = 12582912.0f; /* 1.5 * 2^23 */
    /* |y| first: running sums can leave y slightly below 0 (weight ~1),
     * and inf - inf in them gives a NaN with the sign bit set; as positive
     * bits both inf and NaN clamp to 126. */
    int32_t yb;
    memcpy(&yb, &y, sizeof yb);
    yb &= 0x7fffffff;
    const uint32_t keep = yb <= cutb ? 0xffffffffu : 0u;
    yb = yb < 0x42fc0000 ? yb : 0x42fc0000; /* 126.0f */
    memcpy(&y, &yb, sizeof y);
    float r = magic - y;       /* magic + n, n = round(-y) in [-126, 0] */
    float f = (magic - r) - y; /* -y - n in [-0.5, 0.5] */
    /* Degree-5 fit of 2^f on [-0.5, 0.5] (weighted least squares iterated
     * towards minimax relative error): 2.3e-7 in float arithmetic. */
    float p = 1.327647245e-3f;
    p = mla(p, f, 9.675541893e-3f, fma);
    p = mla(p, f, 5.550713092e-2f, fma);
    p = mla(p, f, 2.402212024e-1f, fma);
    p = mla(p, f, 6.931469440e-1f, fma);
    p = mla(p, f, 1.000000119f, fma);
    /* The low 9 bits of r's bits are n mod 512 (the magic's are 0), so
     * adding them << 23 to p's bits adds n to its exponent (p in [0.7, 1.5]
     * has exponent 126 or 127, so it stays >= 0; at exponent 0, only for y
     * in (125.5, 126), the result is ~1e-38 as an inexact subnormal). */
    uint32_t rb, pb;
    memcpy(&rb, &r, sizeof rb);
    memcpy(&pb, &p, sizeof pb);
    pb = (pb + (rb << 23)) & keep;
    memcpy(&p, &pb, sizeof p);
    return p;
}

/* x box of 2P+1 taps with P a compile-time constant after inlining, so the
 * tap loop unrolls and the x loop vectorises. */
static inline __attribute__((always_inline)) void
xbox_taps(float *restrict xr, const float *restrict d, int n, int taps)
{
#pragma omp simd
    for (int x = 0; x < n; x++) {
        float s = d[x];
#pragma GCC unroll 11
        for (int k = 1; k < taps; k++)
            s += d[x + k];
        xr[x] = s;
    }
}

static inline __attribute__((always_inline)) void xbox(float *restrict xr, const float *restrict d,
                                                       int n, int p)
{
    switch (p) {
    case 0:
        xbox_taps(xr, d, n, 1);
        break;
    case 1:
        xbox_taps(xr, d, n, 3);
        break;
    case 2:
        xbox_taps(xr, d, n, 5);
        break;
    case 3:
        xbox_taps(xr, d, n, 7);
        break;
    case 4:
        xbox_taps(xr, d, n, 9);
        break;
    default:
        xbox_taps(xr, d, n, 11);
        break;
    }
}

/* 2D box rows past the y warm-up: x box, y running sum and weights in one
 * loop (saves storing and reloading the x-box row). Needs P >= 1 in y, so
 * that the row leaving the y window (xold) is not the one being written. */
static inline __attribute__((always_inline)) void
xbox_exp_taps(float *restrict xr, float *restrict ys, const float *restrict xold, float *restrict w,
              const float *restrict d, int n, int taps, int32_t cutb, const int fma)
{
#pragma omp simd
    for (int x = 0; x < n; x++) {
        float s = d[x];
#pragma GCC unroll 11
        for (int k = 1; k < taps; k++)
            s += d[x + k];
        xr[x] = s;
        float t = ys[x] + s;
        ys[x] = t - xold[x];
        w[x] = exp2_neg(t, cutb, fma);
    }
}

static inline __attribute__((always_inline)) void xbox_exp(float *xr, float *ys, const float *xold,
                                                           float *w, const float *d, int n, int p,
                                                           int32_t cutb, const int fma)
{
    switch (p) {
    case 0:
        xbox_exp_taps(xr, ys, xold, w, d, n, 1, cutb, fma);
        break;
    case 1:
        xbox_exp_taps(xr, ys, xold, w, d, n, 3, cutb, fma);
        break;
    case 2:
        xbox_exp_taps(xr, ys, xold, w, d, n, 5, cutb, fma);
        break;
    case 3:
        xbox_exp_taps(xr, ys, xold, w, d, n, 7, cutb, fma);
        break;
    case 4:
        xbox_exp_taps(xr, ys, xold, w, d, n, 9, cutb, fma);
        break;
    default:
        xbox_exp_taps(xr, ys, xold, w, d, n, 11, cutb, fma);
        break;
    }
}

/* Squared differences of m members sharing a row (see the caller): member
 * g's row d + g * stride is (a[x - g] - b[x])^2 when a_moves, else
 * (a[x] - b[x + g])^2, for x < n (rows shorter than n get harmless extra
 * values). m is a compile-time constant after inlining. */
static inline __attribute__((always_inline)) void diff_rows_m(float *restrict d, size_t stride,
                                                              const float *a, const float *b,
                                                              int a_moves, int n, const int m)
{
    if (a_moves) {
#pragma omp simd
        for (int x = 0; x < n; x++) {
            float bx = b[x];
#pragma GCC unroll 4
            for (int g = 0; g < m; g++) {
                float t = a[x - g] - bx;
                d[g * stride + x] = t * t;
            }
        }
    } else {
#pragma omp simd
        for (int x = 0; x < n; x++) {
            float ax = a[x];
#pragma GCC unroll 4
            for (int g = 0; g < m; g++) {
                float t = ax - b[x + g];
                d[g * stride + x] = t * t;
            }
        }
    }
}

static inline __attribute__((always_inline)) void
diff_rows(float *d, size_t stride, const float *a, const float *b, int a_moves, int n, int m)
{
    switch (m) {
    case 2:
        diff_rows_m(d, stride, a, b, a_moves, n, 2);
        break;
    case 3:
        diff_rows_m(d, stride, a, b, a_moves, n, 3);
        break;
    default:
        diff_rows_m(d, stride, a, b, a_moves, n, 4);
        break;
    }
}

/* Float offsets of the per-task workspace; rows are padded to 16 floats so
 * every buffer starts on a 64-byte boundary. */
typedef struct layout {
    size_t u, accw, accv, zring, zsum, yring, ysum, drow, trow, wrow, wring, total;
    /* Per group member (NG of each): lengths of the rings and of a row. */
    size_t zring_len, zsum_len, yring_len, wring_len, rows;
} layout;

/* Offsets per group (consecutive dx sharing one accumulator update); 2, 3
 * and 4 measured within noise of each other (4 slightly ahead in 3D). */
enum { NG = 4 };

static size_t pad16(size_t n)
{
    return (n + 15) & ~(size_t)15;
}

static void layout_of(const core *c, int L, int B, layout *o)
{
    size_t PX = (size_t)c->nx + 2 * c->r[0], PY = (size_t)B + 2 * c->r[1];
    size_t PZ = (size_t)L + 2 * c->r[2];
    size_t bx = pad16((size_t)c->nx + c->s[0] + 2 * c->p[0]), by = (size_t)B + c->s[1];
    size_t oplane = (size_t)c->nx * B, nring = 2 * (size_t)c->p[2] + 1;
    o->rows = bx;
    o->zring_len = nring > 1 ? nring * by * bx : 0;
    o->zsum_len = nring > 1 ? by * bx : 0;
    o->yring_len = (2 * (size_t)c->p[1] + 1) * bx;
    o->wring_len = ((size_t)c->s[1] + 1) * bx;
    size_t at = 0;
    o->u = at, at += pad16(PX * PY * PZ);
    o->accw = at, at += pad16(oplane * L);
    o->accv = at, at += pad16(oplane * L);
    o->zring = at, at += NG * o->zring_len;
    o->zsum = at, at += NG * o->zsum_len;
    o->yring = at, at += NG * o->yring_len;
    o->ysum = at, at += NG * bx;
    o->drow = at, at += NG * bx;
    o->trow = at, at += bx;
    o->wrow = at, at += NG * bx;
    o->wring = at, at += NG * o->wring_len;
    o->total = at;
}

/* aw[x] += sum_g w[g][x], av[x] += sum_g w[g][x] * u[g][x] for m terms,
 * m a compile-time constant after inlining (the term loop unrolls, the x
 * loop vectorises): one read and write of the accumulators for all the
 * offsets of a group. */
static inline __attribute__((always_inline)) void
accumulate_m(float *restrict aw, float *restrict av, const float *const *w, const float *const *u,
             int nx, const int m, const int fma)
{
#pragma omp simd
    for (int x = 0; x < nx; x++) {
        float sw = 0.0f, sv = av[x];
#pragma GCC unroll 8
        for (int g = 0; g < m; g++) {
            sw += w[g][x];
            sv = mla(w[g][x], u[g][x], sv, fma);
        }
        aw[x] += sw;
        av[x] = sv;
    }
}

static inline __attribute__((always_inline)) void accumulate(float *aw, float *av,
                                                             const float *const *w,
                                                             const float *const *u, int nx, int m,
                                                             const int fma)
{
    switch (m) {
#define ACC_CASE(k)                                                                                \
    case k:                                                                                        \
        accumulate_m(aw, av, w, u, nx, k, fma);                                                    \
        break;
        ACC_CASE(1)
        ACC_CASE(2)
        ACC_CASE(3)
        ACC_CASE(4)
        ACC_CASE(5)
        ACC_CASE(6)
        ACC_CASE(7)
    default:
        accumulate_m(aw, av, w, u, nx, 8, fma);
        break;
#undef ACC_CASE
    }
}

/* One task of the core: output planes [z0, z1) and rows [y0, y0 + B) of one
 * frame, its workspace (layout_of) and the sizes every step uses. */
typedef struct task {
    const core *c;
    const layout *lo;
    int z0, z1, y0, L, B, PX;
    size_t pplane, oplane;
    size_t bxs, bplane; /* ring row stride, ring plane size */
    int nring, nyr;     /* z ring and y ring lengths (2P + 1) */
    float *U, *accw, *accv, *zring, *zsum, *yring, *ysum, *drow, *trow, *wrow, *wring;
} task;

/* One group: up to NG consecutive dx with the same (dy, dz); member g has
 * offset dxg[g], its rows of weights start at origin x ox0[g] and are bx[g]
 * long. Rows oy0 .. oy0 + by - 1 of origins are swept. */
typedef struct group {
    int dz, dy, dx, ng, oy0, by;
    int dxg[NG], ox0[NG], bx[NG];
} group;

/* One plane q of a group's sweep: qi planes swept before it; it completes
 * origin plane zo once done; own / sym: zo (own pairs) or zo + dz
 * (symmetric ones) is an output plane of the task. */
typedef struct sweep_plane {
    int qi, zo, done, own, sym;
    const float *ua, *ub; /* planes q and q + dz of the task's copy */
} sweep_plane;

static void task_init(task *t, const core *c, float *ws, const layout *lo, int z0, int z1, int y0,
                      int y1)
{
    t->c = c;
    t->lo = lo;
    t->z0 = z0;
    t->z1 = z1;
    t->y0 = y0;
    t->L = z1 - z0;
    t->B = y1 - y0;
    t->PX = c->nx + 2 * c->r[0];
    t->pplane = (size_t)t->PX * (t->B + 2 * c->r[1]);
    t->oplane = (size_t)c->nx * t->B;
    t->bxs = pad16((size_t)c->nx + c->s[0] + 2 * c->p[0]);
    t->bplane = t->bxs * (size_t)(t->B + c->s[1]);
    t->nring = 2 * c->p[2] + 1;
    t->nyr = 2 * c->p[1] + 1;
    t->U = ws + lo->u;
    t->accw = ws + lo->accw;
    t->accv = ws + lo->accv;
    t->zring = ws + lo->zring;
    t->zsum = ws + lo->zsum;
    t->yring = ws + lo->yring;
    t->ysum = ws + lo->ysum;
    t->drow = ws + lo->drow;
    t->trow = ws + lo->trow;
    t->wrow = ws + lo->wrow;
    t->wring = ws + lo->wring;
}

/* Mirrored, scaled copy of the task's box with its halo; the centre
 * offset's weight 1 in the accumulators. */
static void task_start(const task *t, const float *src)
{
    const core *c = t->c;
    const int nx = c->nx, rx = c->r[0], ry = c->r[1], rz = c->r[2];
    for (int zz = 0; zz < t->L + 2 * rz; zz++) {
        int gz = gpu__mirror(t->z0 - rz + zz, c->nz);
        for (int yy = 0; yy < t->B + 2 * ry; yy++) {
            int gy = gpu__mirror(t->y0 - ry + yy, c->ny);
            const float *srow = src + (size_t)gz * nx * c->ny + (size_t)gy * nx;
            float *urow = t->U + zz * t->pplane + (size_t)yy * t->PX;
            for (int xx = 0; xx < t->PX; xx++)
                urow[xx] = srow[gpu__mirror(xx - rx, nx)] * c->uscale;
        }
    }
    for (int z = 0; z < t->L; z++)
        for (int y = 0; y < t->B; y++) {
            const float *urow = t->U + (size_t)(z + rz) * t->pplane + (size_t)(y + ry) * t->PX + rx;
            float *aw = t->accw + (size_t)z * t->oplane + (size_t)y * nx;
            float *av = t->accv + (size_t)z * t->oplane + (size_t)y * nx;
            for (int x = 0; x < nx; x++) {
                aw[x] = 1.0f;
                av[x] = urow[x];
            }
        }
}

/* The output: accumulated values over weights, unscaled. */
static inline __attribute__((always_inline)) void task_finish(const task *t, float *dst)
{
    const core *c = t->c;
    const int nx = c->nx;
    for (int z = 0; z < t->L; z++)
        for (int y = 0; y < t->B; y++) {
            float *o = dst + (size_t)(t->z0 + z) * nx * c->ny + (size_t)(t->y0 + y) * nx;
            const float *aw = t->accw + (size_t)z * t->oplane + (size_t)y * nx;
            const float *av = t->accv + (size_t)z * t->oplane + (size_t)y * nx;
#pragma omp simd
            for (int x = 0; x < nx; x++)
                o[x] = av[x] / (aw[x] * c->uscale);
        }
}

static void group_init(const task *t, group *gr, int dz, int dy, int dx)
{
    const int sx = t->c->s[0];
    gr->dz = dz;
    gr->dy = dy;
    gr->dx = dx;
    gr->ng = sx - dx + 1 < NG ? sx - dx + 1 : NG;
    gr->oy0 = dy > 0 ? -dy : 0;
    gr->by = t->B + abs(dy);
    for (int g = 0; g < gr->ng; g++) {
        gr->dxg[g] = dx + g;
        gr->ox0[g] = gr->dxg[g] > 0 ? -gr->dxg[g] : 0;
        gr->bx[g] = t->c->nx + abs(gr->dxg[g]);
    }
}

static inline __attribute__((always_inline)) void plane_init(const task *t, const group *gr, int q,
                                                             sweep_plane *pl)
{
    const int pz = t->c->p[2], rz = t->c->r[2], oz0 = t->z0 - gr->dz;
    pl->qi = q - (oz0 - pz);
    pl->zo = q - pz;
    pl->done = pl->qi >= 2 * pz;
    pl->own = pl->done && pl->zo >= t->z0 && pl->zo < t->z1;
    pl->sym = pl->done && pl->zo + gr->dz >= t->z0 && pl->zo + gr->dz < t->z1;
    pl->ua = t->U + (size_t)(q - t->z0 + rz) * t->pplane;
    pl->ub = t->U + (size_t)(q + gr->dz - t->z0 + rz) * t->pplane;
}

/* Squared differences of row y for every member into drow. Members on one
 * side of dx = 0 share a row of the difference: U(o) for dx <= 0 (then
 * U(o + d) moves right by g), U(o + d) for dx > 0 (then U(o) moves left by
 * g); one loop for all of them. */
static inline __attribute__((always_inline)) void group_diffs(const task *t, const group *gr,
                                                              const sweep_plane *pl, int y)
{
    const core *c = t->c;
    const int px = c->p[0], rx = c->r[0], ry = c->r[1], dx = gr->dx, ng = gr->ng;
    const size_t rows = t->lo->rows;
    if (ng > 1 && (dx > 0 || dx + ng - 1 <= 0)) {
        const int g1 = dx > 0; /* member with the widest row */
        const float *a = pl->ua + (size_t)(y + ry) * t->PX + (gr->ox0[0] - px + rx);
        const float *b = pl->ub + (size_t)(y + gr->dy + ry) * t->PX + (gr->ox0[0] - px + rx + dx);
        diff_rows(t->drow, rows, a, b, dx > 0, gr->bx[g1 ? ng - 1 : 0] + 2 * px, ng);
        return;
    }
    for (int g = 0; g < ng; g++) {
        const int n = gr->bx[g] + 2 * px;
        const float *a = pl->ua + (size_t)(y + ry) * t->PX + (gr->ox0[g] - px + rx);
        const float *b =
            pl->ub + (size_t)(y + gr->dy + ry) * t->PX + (gr->ox0[g] - px + rx + gr->dxg[g]);
        float *gd = t->drow + g * rows;
#pragma omp simd
        for (int x = 0; x < n; x++) {
            float v = a[x] - b[x];
            gd[x] = v * v;
        }
    }
}

/* Where member g's weights of origin row yo go: for dz = 0 (then dy >= 0)
 * a ring of dy + 1 rows, so that row oy can take its own weights and those
 * of origin row oy - dy in one pass; else one row. */
static inline __attribute__((always_inline)) float *weights_row(const task *t, const group *gr,
                                                                int g, int yo)
{
    return gr->dz == 0 ? t->wring + g * t->lo->wring_len + (size_t)(yo % (gr->dy + 1)) * t->bxs
                       : t->wrow + g * t->lo->rows;
}

/* Box patch, row yo of origins of member g: the y running sum (gys holds
 * rows yo .. yo + 2P - 1 of x box sums; xr is row yo + 2P, xold row yo,
 * which leaves), then in 3D the z running sum over the ring of 2P + 1
 * planes (slot of plane qi; the one it overwrites leaves the z window),
 * then the weights once the z window is full. */
static inline __attribute__((always_inline)) void box_weights(const task *t, const group *gr,
                                                              const sweep_plane *pl, int g, int yo,
                                                              const float *xr, const int fma)
{
    const int gbx = gr->bx[g], nring = t->nring, qi = pl->qi;
    const int32_t cutb = t->c->cutb;
    float *gys = t->ysum + g * t->lo->rows;
    const float *xold = t->yring + g * t->lo->yring_len + (size_t)(yo % t->nyr) * t->bxs;
    float *restrict wout = weights_row(t, gr, g, yo);
    float *zr =
        t->zring + g * t->lo->zring_len + (size_t)(qi % nring) * t->bplane + (size_t)yo * t->bxs;
    float *zs = t->zsum + g * t->lo->zsum_len + (size_t)yo * t->bxs;
    if (nring == 1) {
#pragma omp simd
        for (int x = 0; x < gbx; x++) {
            float v = gys[x] + xr[x];
            gys[x] = v - xold[x];
            wout[x] = exp2_neg(v, cutb, fma);
        }
    } else if (qi == 0) {
#pragma omp simd
        for (int x = 0; x < gbx; x++) {
            float v = gys[x] + xr[x];
            gys[x] = v - xold[x];
            zr[x] = v;
            zs[x] = v;
        }
    } else if (qi < nring - 1) {
#pragma omp simd
        for (int x = 0; x < gbx; x++) {
            float v = gys[x] + xr[x];
            gys[x] = v - xold[x];
            zr[x] = v;
            zs[x] += v;
        }
    } else if (qi == nring - 1) {
#pragma omp simd
        for (int x = 0; x < gbx; x++) {
            float v = gys[x] + xr[x];
            gys[x] = v - xold[x];
            zr[x] = v;
            float s = zs[x] + v;
            zs[x] = s;
            wout[x] = exp2_neg(s, cutb, fma);
        }
    } else {
#pragma omp simd
        for (int x = 0; x < gbx; x++) {
            float v = gys[x] + xr[x];
            gys[x] = v - xold[x];
            float s = zs[x] + v - zr[x];
            zr[x] = v;
            zs[x] = s;
            wout[x] = exp2_neg(s, cutb, fma);
        }
    }
}

/* Gaussian-weighted patch, row yo of origins of member g: weighted taps
 * over the y ring, in 3D over the z ring of 2P + 1 planes (origin plane zo
 * = q - P is complete once 2P + 1 planes are in), then the weights. */
static inline __attribute__((always_inline)) void
gauss_weights(const task *t, const group *gr, const sweep_plane *pl, int g, int yo, const int fma)
{
    const core *c = t->c;
    const int gbx = gr->bx[g], nring = t->nring, qi = pl->qi, pz = c->p[2];
    const float *gyring = t->yring + g * t->lo->yring_len;
    float *trow = t->trow;
    const float *x0 = gyring + (size_t)(yo % t->nyr) * t->bxs;
    float g0 = c->g[1][0];
#pragma omp simd
    for (int x = 0; x < gbx; x++)
        trow[x] = g0 * x0[x];
    for (int k = 1; k <= 2 * c->p[1]; k++) {
        const float *xk = gyring + (size_t)((yo + k) % t->nyr) * t->bxs;
        float gk = c->g[1][k];
#pragma omp simd
        for (int x = 0; x < gbx; x++)
            trow[x] += gk * xk[x];
    }
    if (nring > 1) {
        const float *zg = t->zring + g * t->lo->zring_len;
        float *zr = t->zring + g * t->lo->zring_len + (size_t)(qi % nring) * t->bplane +
                    (size_t)yo * t->bxs;
#pragma omp simd
        for (int x = 0; x < gbx; x++)
            zr[x] = trow[x];
        if (!pl->done)
            return;
        const float *z0r = zg + (size_t)((qi - 2 * pz) % nring) * t->bplane + (size_t)yo * t->bxs;
        float g0z = c->g[2][0];
#pragma omp simd
        for (int x = 0; x < gbx; x++)
            trow[x] = g0z * z0r[x];
        for (int k = 1; k < nring; k++) {
            const float *zk =
                zg + (size_t)((qi - 2 * pz + k) % nring) * t->bplane + (size_t)yo * t->bxs;
            float gk = c->g[2][k];
#pragma omp simd
            for (int x = 0; x < gbx; x++)
                trow[x] += gk * zk[x];
        }
    }
    float *restrict wout = weights_row(t, gr, g, yo);
#pragma omp simd
    for (int x = 0; x < gbx; x++)
        wout[x] = exp2_neg(trow[x], c->cutb, fma);
}

/* Member g on difference row yr of plane pl: x box into its y ring, then
 * (past the y warm-up) the weights of origin row yr - 2P. */
static inline __attribute__((always_inline)) void
member_row(const task *t, const group *gr, const sweep_plane *pl, int g, int yr, const int fma)
{
    const core *c = t->c;
    const int px = c->p[0], py = c->p[1], gbx = gr->bx[g];
    float *gys = t->ysum + g * t->lo->rows;
    float *gyring = t->yring + g * t->lo->yring_len;
    const float *gd = t->drow + g * t->lo->rows;
    float *xr = gyring + (size_t)(yr % t->nyr) * t->bxs;
    if (c->box && t->nring == 1 && py > 0 && yr >= 2 * py) {
        /* 2D past the warm-up: fused, see xbox_exp. */
        const int yo = yr - 2 * py;
        xbox_exp(xr, gys, gyring + (size_t)(yo % t->nyr) * t->bxs, weights_row(t, gr, g, yo), gd,
                 gbx, px, c->cutb, fma);
        return;
    }
    if (c->box) {
        xbox(xr, gd, gbx, px);
    } else {
#pragma omp simd
        for (int x = 0; x < gbx; x++)
            xr[x] = c->g[0][0] * gd[x];
        for (int k = 1; k <= 2 * px; k++) {
            const float *dk = gd + k;
            float gk = c->g[0][k];
#pragma omp simd
            for (int x = 0; x < gbx; x++)
                xr[x] += gk * dk[x];
        }
    }
    if (yr < 2 * py) {
        if (c->box) {
#pragma omp simd
            for (int x = 0; x < gbx; x++)
                gys[x] += xr[x];
        }
        return;
    }
    if (c->box)
        box_weights(t, gr, pl, g, yr - 2 * py, xr, fma);
    else
        gauss_weights(t, gr, pl, g, yr - 2 * py, fma);
}

/* dz = 0, origin row oy: own pairs o = (x, oy) with weight w(o) and U(o +
 * d), symmetric ones o = (x - dx, oy - dy) with w(o) and U(o), for every
 * member (dx + g: U(o + d) g columns right, U(o) g columns left). */
static inline __attribute__((always_inline)) void accumulate_in_plane(const task *t,
                                                                      const group *gr,
                                                                      const sweep_plane *pl, int yo,
                                                                      int oy, const int fma)
{
    const int nx = t->c->nx, rx = t->c->r[0], ry = t->c->r[1], dy = gr->dy, dx = gr->dx;
    const float *wp[2 * NG], *up[2 * NG];
    const size_t zi = (size_t)(pl->zo - t->z0);
    const float *uz = t->U + (size_t)(pl->zo - t->z0 + t->c->r[2]) * t->pplane;
    const float *ud = uz + (size_t)(oy + dy + ry) * t->PX + rx + dx;
    const float *uo = uz + (size_t)(oy - dy + ry) * t->PX + rx - dx;
    const size_t sa = (size_t)(yo % (dy + 1)) * t->bxs;
    const size_t sb = (size_t)((yo - dy) % (dy + 1)) * t->bxs;
    for (int g = 0; g < gr->ng; g++) {
        const float *wg = t->wring + g * t->lo->wring_len;
        wp[2 * g] = wg + sb - gr->ox0[g] - gr->dxg[g];
        up[2 * g] = uo - g;
        wp[2 * g + 1] = wg + sa - gr->ox0[g];
        up[2 * g + 1] = ud + g;
    }
    accumulate(t->accw + zi * t->oplane + (size_t)oy * nx,
               t->accv + zi * t->oplane + (size_t)oy * nx, wp, up, nx, 2 * gr->ng, fma);
}

/* dz > 0, origin row oy of plane zo: own pairs (o in the task: w(o) U(o +
 * d)) and symmetric ones (o + d in the task gets w(o) U(o)). */
static inline __attribute__((always_inline)) void
accumulate_across_planes(const task *t, const group *gr, const sweep_plane *pl, int oy, int own_row,
                         int sym_row, const int fma)
{
    const int nx = t->c->nx, rx = t->c->r[0], ry = t->c->r[1], rz = t->c->r[2];
    const float *wp[2 * NG] = {0}, *up[2 * NG] = {0}; /* accumulate's cases go to 2 NG */
    if (own_row) {
        size_t zi = (size_t)(pl->zo - t->z0);
        const float *ud = t->U + (size_t)(pl->zo + gr->dz - t->z0 + rz) * t->pplane +
                          (size_t)(oy + gr->dy + ry) * t->PX + rx + gr->dx;
        for (int g = 0; g < gr->ng; g++) {
            wp[g] = t->wrow + g * t->lo->rows - gr->ox0[g]; /* origin x */
            up[g] = ud + g;
        }
        accumulate(t->accw + zi * t->oplane + (size_t)oy * nx,
                   t->accv + zi * t->oplane + (size_t)oy * nx, wp, up, nx, gr->ng, fma);
    }
    if (sym_row) {
        size_t zi = (size_t)(pl->zo + gr->dz - t->z0);
        const float *uo = t->U + (size_t)(pl->zo - t->z0 + rz) * t->pplane +
                          (size_t)(oy + ry) * t->PX + rx - gr->dx;
        for (int g = 0; g < gr->ng; g++) {
            wp[g] = t->wrow + g * t->lo->rows - gr->ox0[g] - gr->dxg[g]; /* origin x - dx - g */
            up[g] = uo - g;
        }
        accumulate(t->accw + zi * t->oplane + (size_t)(oy + gr->dy) * nx,
                   t->accv + zi * t->oplane + (size_t)(oy + gr->dy) * nx, wp, up, nx, gr->ng, fma);
    }
}

/* One plane of a group's sweep, row by row: differences, every member's
 * boxes and weights, then both sides' accumulation of the origin row the
 * row completes. */
static inline __attribute__((always_inline)) void group_plane(const task *t, const group *gr,
                                                              const sweep_plane *pl, const int fma)
{
    const int py = t->c->p[1], B = t->B, dy = gr->dy;
    for (int g = 0; g < gr->ng; g++)
        for (int x = 0; x < gr->bx[g]; x++)
            t->ysum[g * t->lo->rows + x] = 0;
    for (int yr = 0; yr < gr->by + 2 * py; yr++) {
        group_diffs(t, gr, pl, gr->oy0 - py + yr);
        for (int g = 0; g < gr->ng; g++)
            member_row(t, gr, pl, g, yr, fma);
        if (yr < 2 * py || !pl->done)
            continue;
        const int yo = yr - 2 * py, oy = gr->oy0 + yo;
        const int own_row = pl->own && oy >= 0 && oy < B;
        const int sym_row = pl->sym && oy + dy >= 0 && oy + dy < B;
        if (gr->dz == 0) {
            if (own_row)
                accumulate_in_plane(t, gr, pl, yo, oy, fma);
        } else {
            accumulate_across_planes(t, gr, pl, oy, own_row, sym_row, fma);
        }
    }
}

/* Runs the core on output planes [z0, z1) and rows [y0, y1) of one frame.
 * ws: workspace of layout_of(c, L, B) floats, L >= z1 - z0, B >= y1 - y0.
 * For each offset one sweep over the planes computes, row by row and without
 * leaving L1: the squared differences, their x box (direct taps), the y sum
 * (running sum or weighted taps over a ring of 2P+1 rows), the z sum
 * (running sum or weighted taps over a ring of 2P+1 row-planes, 3D only),
 * then the weights and both sides' accumulation. Offsets in the positive
 * half, in groups of up to NG consecutive dx with the same (dy, dz): each
 * member has its own rings, and the accumulators are updated once per
 * group, which halves their traffic (they live in L2, the rings in L1). Per
 * offset only the task's input and accumulators are touched, which bands
 * keep in L2. */
static inline __attribute__((always_inline)) void chunk_body(const core *c, const float *src,
                                                             float *dst, int z0, int z1, int y0,
                                                             int y1, float *ws, const layout *lo,
                                                             const int fma)
{
    task t;
    task_init(&t, c, ws, lo, z0, z1, y0, y1);
    task_start(&t, src);
    const int sx = c->s[0], sy = c->s[1], sz = c->s[2], pz = c->p[2];
    for (int dz = 0; dz <= sz; dz++)
        for (int dy = dz == 0 ? 0 : -sy; dy <= sy; dy++)
            for (int dx = dz == 0 && dy == 0 ? 1 : -sx; dx <= sx; dx += NG) {
                group gr;
                group_init(&t, &gr, dz, dy, dx);
                for (int q = z0 - dz - pz; q < z1 + pz; q++) {
                    sweep_plane pl;
                    plane_init(&t, &gr, q, &pl);
                    group_plane(&t, &gr, &pl, fma);
                }
                gpu_progress_add(c->done, 1);
            }
    task_finish(&t, dst);
}

/* The core compiled three times: for AVX-512 (F, VL, BW, DQ) with FMA and
 * 512-bit vectors, for AVX2 with FMA, and for plain x86-64 (or whatever the
 * target is); the widest the CPU has is picked at run time. AVX-512 and
 * AVX2 give the same result (the same operations per element, fused the
 * same way); on this project's development machine (Xeon, 2 cores) AVX-512
 * took 2D 512^2x4 S=10 P=3 from ~0.28 to ~0.21 s and 3D 96x96x48 S=5 P=2
 * from ~0.45 to ~0.40 s on one thread (docs/PERFORMANCE.md). */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("avx2,fma"))) static void chunk_run_avx2(const core *c, const float *src,
                                                               float *dst, int z0, int z1, int y0,
                                                               int y1, float *ws, const layout *lo)
{
    chunk_body(c, src, dst, z0, z1, y0, y1, ws, lo, 1);
}

/* 512-bit vectors: GCC takes the preference in the target attribute,
 * clang (which ignores the whole attribute if it sees that option) as
 * min_vector_width. */
#if defined(__clang__)
#define AVX512_CORE target("avx512f,avx512vl,avx512bw,avx512dq,fma"), min_vector_width(512)
#else
#define AVX512_CORE target("avx512f,avx512vl,avx512bw,avx512dq,fma,prefer-vector-width=512")
#endif
__attribute__((AVX512_CORE)) static void chunk_run_avx512(const core *c, const float *src,
                                                          float *dst, int z0, int z1, int y0,
                                                          int y1, float *ws, const layout *lo)
{
    chunk_body(c, src, dst, z0, z1, y0, y1, ws, lo, 1);
}
#endif

static void chunk_run_plain(const core *c, const float *src, float *dst, int z0, int z1, int y0,
                            int y1, float *ws, const layout *lo)
{
    chunk_body(c, src, dst, z0, z1, y0, y1, ws, lo, 0);
}

typedef void (*chunk_fn)(const core *, const float *, float *, int, int, int, int, float *,
                         const layout *);

/* The ceiling LDCT_NLM_REF_ISA sets (avx512, avx2 or plain, for tests and
 * tuning): 2, 1, 0; unset or unknown (said once): no ceiling. */
static int isa_cap(void)
{
    static int warned;
    const char *cap = getenv("LDCT_NLM_REF_ISA");
    if (!cap || !*cap || !strcmp(cap, "avx512"))
        return 2;
    if (!strcmp(cap, "avx2") || !strcmp(cap, "plain"))
        return cap[0] == 'a';
    if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
        log_warn("LDCT_NLM_REF_ISA=%s is not avx512, avx2 or plain; ignored", cap);
    return 2;
}

/* The widest instruction set the CPU has under that ceiling: 2 AVX-512, 1
 * AVX2, 0 plain. */
static int isa_level(void)
{
    const int limit = isa_cap();
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    if (limit >= 2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("fma"))
        return 2;
    if (limit >= 1 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return 1;
#else
    (void)limit;
#endif
    return 0;
}

const char *gpu__nlm_ref_isa(void)
{
    static const char *const name[] = {"plain", "avx2", "avx512"};
    return name[isa_level()];
}

static chunk_fn chunk_pick(void)
{
    switch (isa_level()) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    case 2:
        return chunk_run_avx512;
    case 1:
        return chunk_run_avx2;
#endif
    default:
        return chunk_run_plain;
    }
}

/* Rows per band. A band adds |dy| + 2P rows of difference work per offset
 * (and |dy| rows of weights), so bands are made as tall as memory allows.
 * 2D: the slice's band (input with halo and accumulators) should stay in
 * L2 (~1 MB per thread) while a sweep per offset runs over it; at 512 wide
 * unbanded slices were ~15% slower. 3D: cache residency mattered less than
 * halo work in measurements (one 96x96x48 task beat bands and chunks that
 * fit L2), so bands only bound the task's memory (~16 MB) and keep at least
 * 8 (S + 2P) rows. LDCT_NLM_REF_BAND overrides (tests, tuning). */
static int band_rows(const core *c, int L, int dim)
{
    const char *env = getenv("LDCT_NLM_REF_BAND");
    if (env && atoi(env) > 0)
        return atoi(env) < c->ny ? atoi(env) : c->ny;
    size_t px = (size_t)c->nx + 2 * c->r[0], pz = (size_t)L + 2 * c->r[2];
    size_t row = px * pz * 4 + (size_t)c->nx * L * 8, halo = px * pz * 4 * 2 * c->r[1];
    const size_t budget = dim == 2 ? (size_t)1 << 20 : (size_t)16 << 20;
    long b = budget > halo ? (long)((budget - halo) / row) : 1;
    long minb = (dim == 2 ? 4L : 8L) * (c->s[1] + 2 * c->p[1]);
    if (b < minb)
        b = minb;
    if (b >= c->ny)
        return c->ny;
    /* Equal bands. */
    long nb = (c->ny + b - 1) / b;
    return (int)((c->ny + nb - 1) / nb);
}

/* The offset groups chunk_body runs per task (its loops, counted). */
static long groups_per_task(const core *c)
{
    long n = 0;
    const int sx = c->s[0], sy = c->s[1], sz = c->s[2];
    for (int dz = 0; dz <= sz; dz++)
        for (int dy = dz == 0 ? 0 : -sy; dy <= sy; dy++)
            for (int dx = dz == 0 && dy == 0 ? 1 : -sx; dx <= sx; dx += NG)
                n++;
    return n;
}

static int run_ref(const gpu_nlm_params *p, const gpu_volume *in, gpu_volume *out,
                   const gpu_device *dev, int dim)
{
    int rc = gpu__nlm_check(p, in, out, dim);
    if (rc)
        return rc;
    float h;
    rc = gpu_nlm_resolve_h(p, in, &h);
    if (rc)
        return rc;
    core c;
    memset(&c, 0, sizeof c);
    c.nx = in->nx;
    c.ny = in->ny;
    c.nz = dim == 3 ? in->nz : 1;
    for (int a = 0; a < 3; a++) {
        int on = a < dim;
        c.s[a] = on ? p->search_radius : 0;
        c.p[a] = on ? p->patch_radius : 0;
        c.r[a] = c.s[a] + c.p[a];
        gpu__nlm_patch_weights(c.p[a], p->gaussian, c.g[a]);
    }
    c.box = !p->gaussian;
    /* The box path sums unweighted differences (running sums in y and z);
     * fold the mean's normalisation (2P+1)^dim into k. */
    double norm = 1.0;
    if (c.box)
        for (int a = 0; a < dim; a++)
            norm *= 2 * p->patch_radius + 1;
    /* Clamped so the scaled input stays finite and normal for absurd h
     * (weights are then ~0 or ~1 either way; exp2_neg clamps inf and NaN). */
    double us = sqrt(1.4426950408889634 / ((double)h * h * norm));
    c.uscale = (float)(us > 1e18 ? 1e18 : us < 1e-18 ? 1e-18 : us);
    float cut = gpu__nlm_cut_exponent(p);
    c.cutb = INT32_MAX;
    if (isfinite(cut))
        memcpy(&c.cutb, &cut, sizeof c.cutb);

    int threads = dev && dev->threads > 0 ? dev->threads : omp_get_max_threads();
    /* Tasks: (frame, chunk of planes, band of rows) for 3D, (frame, slice,
     * band) for 2D. */
    int nz = in->nz, frames = in->nt, L, nchunks;
    if (dim == 3) {
        /* Tall chunks: each chunk adds dz + 2P planes of work per offset. */
        nchunks = (nz + 63) / 64;
        const char *env = getenv("LDCT_NLM_REF_PLANES");
        if (env && atoi(env) > 0)
            nchunks = (nz + atoi(env) - 1) / atoi(env);
        L = (nz + nchunks - 1) / nchunks;
        nchunks = (nz + L - 1) / L;
    } else {
        L = 1;
        nchunks = nz;
    }
    int B = band_rows(&c, L, dim), nbands = (c.ny + B - 1) / B;
    /* Enough tasks for the threads: more bands (cheaper than more chunks,
     * whose halo is in z where the planes are fewer). */
    if (nchunks * frames * nbands < threads && !getenv("LDCT_NLM_REF_BAND")) {
        nbands = (threads + nchunks * frames - 1) / (nchunks * frames);
        B = (c.ny + nbands - 1) / nbands;
        nbands = (c.ny + B - 1) / B;
    }
    layout lo;
    layout_of(&c, L, B, &lo);
    int ntasks = nbands * nchunks * frames;
    size_t frame_len = (size_t)in->nx * in->ny * in->nz;
    int failed = 0;
    chunk_fn chunk_run = chunk_pick();
    gpu_progress_count done;
    gpu_progress_begin(&done, p->progress, 0.0, 1.0, (long)ntasks * groups_per_task(&c));
    c.done = &done;
#pragma omp parallel num_threads(threads)
    {
        float *ws = aligned_alloc(64, lo.total * sizeof(float));
        if (!ws) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(dynamic, 1)
        for (int t = 0; t < ntasks; t++) {
            if (!ws)
                continue;
            int f = t / (nchunks * nbands), ch = t / nbands % nchunks, bd = t % nbands;
            int y0 = bd * B, y1 = y0 + B > c.ny ? c.ny : y0 + B;
            const float *src = in->data + (size_t)f * frame_len;
            float *dst = out->data + (size_t)f * frame_len;
            if (dim == 3) {
                int z0 = ch * L, z1 = z0 + L > nz ? nz : z0 + L;
                chunk_run(&c, src, dst, z0, z1, y0, y1, ws, &lo);
            } else {
                size_t off = (size_t)ch * in->nx * in->ny;
                chunk_run(&c, src + off, dst + off, 0, 1, y0, y1, ws, &lo);
            }
        }
        free(ws);
    }
    if (!failed)
        gpu_progress_end(&done);
    return failed ? -ENOMEM : 0;
}

int gpu_nlm2d_ref(const gpu_nlm_params *p, const gpu_volume *in, gpu_volume *out,
                  const gpu_device *dev)
{
    return run_ref(p, in, out, dev, 2);
}

int gpu_nlm3d_ref(const gpu_nlm_params *p, const gpu_volume *in, gpu_volume *out,
                  const gpu_device *dev)
{
    return run_ref(p, in, out, dev, 3);
}
