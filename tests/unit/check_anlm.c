/* Unit tests of the adaptive NLM CPU reference (gpu/anlm_ref.c): against a
 * naive direct implementation of the definition in gpu/anlm.h (every patch
 * compared explicitly, in double) on small odd-size volumes, the
 * preselection logic, the adaptive noise estimate on noise that changes
 * across the volume, the Rician bias correction, the Haar sub-band mixing,
 * negative CT numbers, and the SNR gain on Poisson counts spanning three
 * decades (seed 004's test case). Single-threaded test process.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "gpu/anlm.h"
#include "gpu/nlm.h"
#include "gpu/volume.h"
#define GT_SEED 0x2545F4914F6CDD1Dull
#include "tests/unit/gputest.h"

/* ---- helpers ------------------------------------------------------------ */

/* Poisson variate (Knuth for small means, normal approximation above 500). */
static double poisson(double lambda)
{
    if (lambda > 500)
        return fmax(0.0, floor(lambda + sqrt(lambda) * grand() + 0.5));
    double l = exp(-lambda), p = 1.0;
    int k = 0;
    do {
        k++;
        p *= urand();
    } while (p > l);
    return k - 1;
}

static size_t at(const gpu_volume *v, int x, int y, int z)
{
    return ((size_t)z * v->ny + y) * v->nx + x;
}

static gpu_volume vol(int nx, int ny, int nz)
{
    gpu_volume v;
    ck_assert_int_eq(gpu_volume_init(&v, nx, ny, nz, 1), 0);
    return v;
}

/* Smooth structure (ramp, blob, step) plus noise; offset shifts all values. */
static void fill_structured(gpu_volume *v, double offset, double sigma)
{
    for (int z = 0; z < v->nz; z++)
        for (int y = 0; y < v->ny; y++)
            for (int x = 0; x < v->nx; x++) {
                double cx = x - v->nx / 2.0, cy = y - v->ny / 2.0, cz = z - v->nz / 2.0;
                double s = offset + 2.0 * x - 1.5 * y + z;
                if (cx * cx + cy * cy + cz * cz < v->nx * v->nx / 9.0)
                    s += 80.0;
                if (x > v->nx * 2 / 3)
                    s -= 50.0;
                v->data[at(v, x, y, z)] = (float)(s + sigma * grand());
            }
}

static double rel_l2(const gpu_volume *a, const double *ref)
{
    double num = 0, den = 0;
    size_t n = gpu_volume_count(a);
    for (size_t i = 0; i < n; i++) {
        double d = a->data[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    return sqrt(num / den);
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* ---- naive implementation of the definition in anlm.h -------------------- */

typedef struct naive_fields {
    int nx, ny, nz;
    double *u, *m, *v, *r;
} naive_fields;

static double nf(const naive_fields *f, const double *a, int x, int y, int z)
{
    return a[((size_t)gpu__mirror(z, f->nz) * f->ny + gpu__mirror(y, f->ny)) * f->nx +
             gpu__mirror(x, f->nx)];
}

static void naive_fields_init(naive_fields *f, const gpu_volume *in, int rb)
{
    f->nx = in->nx, f->ny = in->ny, f->nz = in->nz;
    size_t n = gpu_volume_count(in);
    f->u = malloc(n * sizeof(double)), f->m = malloc(n * sizeof(double));
    f->v = malloc(n * sizeof(double)), f->r = malloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++)
        f->u[i] = in->data[i];
    double nb = pow(2 * rb + 1, 3);
    for (int z = 0; z < f->nz; z++)
        for (int y = 0; y < f->ny; y++)
            for (int x = 0; x < f->nx; x++) {
                double s = 0, ss = 0;
                for (int c = -rb; c <= rb; c++)
                    for (int b = -rb; b <= rb; b++)
                        for (int a = -rb; a <= rb; a++)
                            s += nf(f, f->u, x + a, y + b, z + c);
                double m = s / nb;
                for (int c = -rb; c <= rb; c++)
                    for (int b = -rb; b <= rb; b++)
                        for (int a = -rb; a <= rb; a++) {
                            double e = nf(f, f->u, x + a, y + b, z + c) - m;
                            ss += e * e;
                        }
                size_t i = at(in, x, y, z);
                f->m[i] = (float)m; /* the reference stores them as float */
                f->v[i] = (float)(ss / (nb - 1));
                f->r[i] = (float)(f->u[i] - f->m[i]);
            }
}

static void naive_fields_free(naive_fields *f)
{
    free(f->u), free(f->m), free(f->v), free(f->r);
}

static double naive_dist(const naive_fields *f, const double *a, int x, int y, int z, int dx,
                         int dy, int dz, int P)
{
    double s = 0;
    for (int c = -P; c <= P; c++)
        for (int b = -P; b <= P; b++)
            for (int k = -P; k <= P; k++) {
                double e =
                    nf(f, a, x + k, y + b, z + c) - nf(f, a, x + dx + k, y + dy + b, z + dz + c);
                s += e * e;
            }
    return s / pow(2 * P + 1, 3);
}

/* V of the definition: d != 0 and, per axis of n voxels, |d| <= S and
 * below the mirror's period 2 (n - 1), i.e. |d| <= 2 n - 3 (none for n = 1). */
static int naive_axis_ok(int S, int n, int d)
{
    return abs(d) <= S && (d == 0 || abs(d) <= 2 * n - 3);
}

static int naive_offset_used(int S, const naive_fields *f, int dx, int dy, int dz)
{
    return (dx || dy || dz) && naive_axis_ok(S, f->nx, dx) && naive_axis_ok(S, f->ny, dy) &&
           naive_axis_ok(S, f->nz, dz);
}

/* s2 of every voxel (-1 where no offset is kept). */
static void naive_s2(const gpu_anlm_params *p, const naive_fields *f, const gpu__anlm_range *rg,
                     int P, double *s2)
{
    int S = p->search_radius;
    for (int z = 0; z < f->nz; z++)
        for (int y = 0; y < f->ny; y++)
            for (int x = 0; x < f->nx; x++) {
                double best = -1;
                for (int dz = -S; dz <= S; dz++)
                    for (int dy = -S; dy <= S; dy++)
                        for (int dx = -S; dx <= S; dx++) {
                            if (!naive_offset_used(S, f, dx, dy, dz))
                                continue;
                            if (!gpu__anlm_keep(rg, p->mean_ratio, p->var_ratio,
                                                (float)nf(f, f->m, x, y, z),
                                                (float)nf(f, f->v, x, y, z),
                                                (float)nf(f, f->m, x + dx, y + dy, z + dz),
                                                (float)nf(f, f->v, x + dx, y + dy, z + dz)))
                                continue;
                            double d = naive_dist(f, f->r, x, y, z, dx, dy, dz, P);
                            if (best < 0 || d < best)
                                best = d;
                        }
                s2[((size_t)z * f->ny + y) * f->nx + x] = best;
            }
}

/* The Rician smoothing: the mean of the values at or below CLIP times the
 * plain mean of the box. */
static double naive_clipped_mean(const double *box, int k)
{
    double s = 0, t = 0;
    int n = 0;
    for (int i = 0; i < k; i++)
        s += box[i];
    for (int i = 0; i < k; i++)
        if (box[i] <= GPU_ANLM_RICIAN_CLIP * s / k)
            t += box[i], n++;
    return t / n;
}

static void naive_pass(const gpu_anlm_params *p, const naive_fields *f, const gpu__anlm_range *rg,
                       int P, double *out)
{
    int S = p->search_radius, nx = f->nx, ny = f->ny, nz = f->nz, rician = p->noise;
    size_t n = (size_t)nx * ny * nz;
    double *s2 = malloc(n * sizeof(double));
    naive_s2(p, f, rg, P, s2);
    for (int z = 0; z < nz; z++)
        for (int y = 0; y < ny; y++)
            for (int x = 0; x < nx; x++) {
                size_t i = ((size_t)z * ny + y) * nx + x;
                double h2 = (double)p->strength * p->strength * fmax(s2[i], rg->s2_floor);
                double sw = 0, sg = 0, wmax = 0;
                for (int dz = -S; dz <= S; dz++)
                    for (int dy = -S; dy <= S; dy++)
                        for (int dx = -S; dx <= S; dx++) {
                            if (!naive_offset_used(S, f, dx, dy, dz) ||
                                !gpu__anlm_keep(rg, p->mean_ratio, p->var_ratio, (float)f->m[i],
                                                (float)f->v[i],
                                                (float)nf(f, f->m, x + dx, y + dy, z + dz),
                                                (float)nf(f, f->v, x + dx, y + dy, z + dz)))
                                continue;
                            double d = naive_dist(f, f->u, x, y, z, dx, dy, dz, P);
                            if (d > 3 * h2)
                                continue;
                            double w = exp(-d / h2), uj = nf(f, f->u, x + dx, y + dy, z + dz);
                            sw += w;
                            sg += w * (rician ? uj * uj : uj);
                            wmax = fmax(wmax, w);
                        }
                double w0 = wmax > 0 ? wmax : 1.0, u = f->u[i];
                out[i] = (w0 * (rician ? u * u : u) + sg) / (w0 + sw);
            }
    if (rician) {
        int q = GPU_ANLM_RICIAN_REG;
        float xi[GPU_ANLM_XI_N];
        gpu__anlm_xi_table(xi);
        for (int z = 0; z < nz; z++)
            for (int y = 0; y < ny; y++)
                for (int x = 0; x < nx; x++) {
                    double box[125];
                    int k = 0;
                    for (int c = -q; c <= q; c++)
                        for (int b = -q; b <= q; b++)
                            for (int a = -q; a <= q; a++) {
                                double v = nf(f, s2, x + a, y + b, z + c);
                                if (v >= 0)
                                    box[k++] = (float)v;
                            }
                    size_t i = ((size_t)z * ny + y) * nx + x;
                    double sr2 = k ? naive_clipped_mean(box, k) : 0;
                    double sg2 = sr2 > 0 ? (float)sr2 / gpu__anlm_xi_lookup(
                                                            xi, (float)(fabs(f->m[i]) / sqrt(sr2)))
                                         : 0;
                    double e = out[i] - 2 * (float)sg2;
                    out[i] = e > 0 ? sqrt(e) : 0;
                }
    }
    free(s2);
}

/* Haar mixing written out per band, in double. */
/* The block's range of a and b (the mixed value is clamped to it). */
static double naive_block_clamp(const double *a, const double *b, int nx, int ny, int x, int y,
                                int z, const int *l, float v)
{
    float lo = INFINITY, hi = -INFINITY;
    for (int j = 0; j < 8; j++) {
        int jx = j & 1, jy = j >> 1 & 1, jz = j >> 2;
        if (jx >= l[0] || jy >= l[1] || jz >= l[2])
            continue;
        size_t q = ((size_t)(z + jz) * ny + y + jy) * nx + x + jx;
        lo = fminf(lo, fminf((float)a[q], (float)b[q]));
        hi = fmaxf(hi, fmaxf((float)a[q], (float)b[q]));
    }
    return v < lo ? lo : v > hi ? hi : v;
}

static void naive_mix(const double *a, const double *b, int nx, int ny, int nz, double *out)
{
    const double r = 0.70710678118654752;
    for (int z = 0; z < nz; z += 2)
        for (int y = 0; y < ny; y += 2)
            for (int x = 0; x < nx; x += 2) {
                int l[3] = {x + 1 < nx ? 2 : 1, y + 1 < ny ? 2 : 1, z + 1 < nz ? 2 : 1};
                for (int k = 0; k < 8; k++) {
                    int kx = k & 1, ky = k >> 1 & 1, kz = k >> 2;
                    if (kx >= l[0] || ky >= l[1] || kz >= l[2])
                        continue;
                    size_t i = ((size_t)(z + kz) * ny + y + ky) * nx + x + kx;
                    double v = a[i];
                    for (int band = 0; band < 8; band++) {
                        int hb[3] = {band & 1, band >> 1 & 1, band >> 2};
                        if (hb[0] + hb[1] + hb[2] < 2 || (hb[0] && l[0] == 1) ||
                            (hb[1] && l[1] == 1) || (hb[2] && l[2] == 1))
                            continue;
                        double c = 0;
                        for (int j = 0; j < 8; j++) {
                            int jx = j & 1, jy = j >> 1 & 1, jz = j >> 2;
                            if (jx >= l[0] || jy >= l[1] || jz >= l[2])
                                continue;
                            size_t q = ((size_t)(z + jz) * ny + y + jy) * nx + x + jx;
                            double s = 1;
                            int jj[3] = {jx, jy, jz};
                            for (int ax = 0; ax < 3; ax++)
                                s *= l[ax] == 1 ? 1.0 : (hb[ax] && jj[ax]) ? -r : r;
                            c += (b[q] - a[q]) * s;
                        }
                        double s = 1;
                        int kk[3] = {kx, ky, kz};
                        for (int ax = 0; ax < 3; ax++)
                            s *= l[ax] == 1 ? 1.0 : (hb[ax] && kk[ax]) ? -r : r;
                        v += c * s;
                    }
                    out[i] = naive_block_clamp(a, b, nx, ny, x, y, z, l, (float)v);
                }
            }
}

static void naive_anlm(const gpu_anlm_params *p, const gpu_volume *in, double *out)
{
    naive_fields f;
    naive_fields_init(&f, in, p->block_radius);
    gpu__anlm_range rg;
    gpu__anlm_range_of(in, &rg);
    size_t n = gpu_volume_count(in);
    if (!p->mix) {
        naive_pass(p, &f, &rg, p->patch_radius, out);
    } else {
        double *a = malloc(n * sizeof(double)), *b = malloc(n * sizeof(double));
        naive_pass(p, &f, &rg, p->patch_radius, a);
        naive_pass(p, &f, &rg, p->patch_radius2, b);
        naive_mix(a, b, in->nx, in->ny, in->nz, out);
        free(a), free(b);
    }
    naive_fields_free(&f);
}

static void check_ref_vs_naive(int nx, int ny, int nz, gpu_anlm_params p, double offset,
                               double sigma)
{
    gpu_volume in = vol(nx, ny, nz), out = vol(nx, ny, nz);
    fill_structured(&in, offset, sigma);
    double *ref = malloc(gpu_volume_count(&in) * sizeof(double));
    naive_anlm(&p, &in, ref);
    ck_assert_int_eq(gpu_anlm_ref(&p, &in, &out, NULL), 0);
    double e = rel_l2(&out, ref);
    /* The reference sums patch distances with box sums in double over float
     * fields; the naive sums each patch directly. Tolerance: rel L2 1e-5. */
    ck_assert_msg(e <= 1e-5, "%dx%dx%d S=%d P=%d/%d mix=%d noise=%d: rel L2 %.3g", nx, ny, nz,
                  p.search_radius, p.patch_radius, p.patch_radius2, p.mix, p.noise, e);
    free(ref);
    gpu_volume_close(&in);
    gpu_volume_close(&out);
}

/* ---- tests --------------------------------------------------------------- */

START_TEST(ref_matches_naive_on_odd_sizes)
{
    gpu_anlm_params p;
    gpu_anlm_params_default(&p);
    p.search_radius = 2, p.mix = 0, p.patch_radius = 1;
    check_ref_vs_naive(9, 7, 11, p, 100.0, 10.0);
    p.patch_radius = 0, p.block_radius = 2;
    check_ref_vs_naive(7, 9, 5, p, -300.0, 20.0);
    gpu_anlm_params_default(&p); /* S = 3, radii 1 and 2 with mixing */
    check_ref_vs_naive(11, 9, 7, p, 40.0, 15.0);
    p.noise = GPU_ANLM_RICIAN;
    check_ref_vs_naive(9, 7, 7, p, 200.0, 30.0);
}
END_TEST

START_TEST(preselection_requires_mean_and_variance)
{
    gpu__anlm_range r = {.lo = -1000.0f, .hi = 3000.0f, .var_eps = 0.0f, .s2_floor = 1e-6f};
    float mu = 0.95f, nu = 0.5f;
    /* Close means, close variances: kept. */
    ck_assert(gpu__anlm_keep(&r, mu, nu, 40.0f, 100.0f, 45.0f, 120.0f));
    /* Close means but variance ratio 1/4: dropped. The published precedence
     * `t1 || t1i && t2` keeps this pair, because t1 alone suffices. */
    ck_assert(!gpu__anlm_keep(&r, mu, nu, 40.0f, 100.0f, 45.0f, 400.0f));
    ck_assert(!gpu__anlm_keep(&r, mu, nu, 40.0f, 400.0f, 45.0f, 100.0f));
    /* Both mean ratios off (m - lo: 1040 / 1300 = 0.8; hi - m: 2700 / 2960 =
     * 0.91): dropped whatever the variance. */
    ck_assert(!gpu__anlm_keep(&r, mu, nu, 40.0f, 100.0f, 300.0f, 100.0f));
    /* Mean close only through the inverted ratio: m - lo 10 vs 20 (0.5) off,
     * hi - m 3990 vs 3980 on: kept when the variance is close, else not. */
    ck_assert(gpu__anlm_keep(&r, mu, nu, -990.0f, 50.0f, -980.0f, 60.0f));
    ck_assert(!gpu__anlm_keep(&r, mu, nu, -990.0f, 50.0f, -980.0f, 500.0f));
    /* Variance ratio exactly at the bound is outside (strict). */
    ck_assert(!gpu__anlm_keep(&r, mu, nu, 40.0f, 100.0f, 40.0f, 200.0f));
    ck_assert(gpu__anlm_keep(&r, mu, nu, 40.0f, 100.0f, 40.0f, 199.0f));
}
END_TEST

/* Two halves with noise sigma 10 (x < nx/2) and 40: the median estimate
 * per half, away from the seam, within 15% of the truth. Patch radius 1
 * (the pass whose estimate drives the result's low band). */
START_TEST(adaptive_sigma_tracks_noise_that_changes_across_the_volume)
{
    int nx = 40, ny = 20, nz = 20;
    gpu_volume in = vol(nx, ny, nz), sg = vol(nx, ny, nz);
    for (int z = 0; z < nz; z++)
        for (int y = 0; y < ny; y++)
            for (int x = 0; x < nx; x++)
                in.data[at(&in, x, y, z)] =
                    (float)(-50.0 + 0.5 * y + (x < nx / 2 ? 10.0 : 40.0) * grand());
    gpu_anlm_params p;
    gpu_anlm_params_default(&p);
    ck_assert_int_eq(gpu_anlm_sigma_ref(&p, &in, &sg, NULL), 0);
    for (int half = 0; half < 2; half++) {
        int x0 = half ? nx / 2 + 5 : 2, x1 = half ? nx - 2 : nx / 2 - 5;
        size_t cnt = 0;
        float *v = malloc((size_t)nx * ny * nz * sizeof(float));
        for (int z = 0; z < nz; z++)
            for (int y = 0; y < ny; y++)
                for (int x = x0; x < x1; x++)
                    v[cnt++] = sg.data[at(&sg, x, y, z)];
        qsort(v, cnt, sizeof(float), cmp_float);
        double med = v[cnt / 2], truth = half ? 40.0 : 10.0;
        printf("anlm sigma estimate: true %.0f, median %.2f (%+.1f%%)\n", truth, med,
               100.0 * (med / truth - 1));
        ck_assert_msg(fabs(med / truth - 1) <= 0.15, "half %d: median %.2f vs %.0f", half, med,
                      truth);
        free(v);
    }
    gpu_volume_close(&in);
    gpu_volume_close(&sg);
}
END_TEST

/* Constant signal A = 1.5 sigma under Rician noise: the magnitude mean is
 * biased up by ~0.4 sigma; the Rician model removes most of that bias, the
 * Gaussian model keeps it. */
START_TEST(rician_correction_removes_the_bias_on_a_constant_volume)
{
    int n = 24;
    double A = 15.0, sigma = 10.0;
    gpu_volume in = vol(n, n, n), og = vol(n, n, n), orc = vol(n, n, n);
    for (size_t i = 0; i < gpu_volume_count(&in); i++) {
        double re = A + sigma * grand(), im = sigma * grand();
        in.data[i] = (float)sqrt(re * re + im * im);
    }
    gpu_anlm_params p;
    gpu_anlm_params_default(&p);
    ck_assert_int_eq(gpu_anlm_ref(&p, &in, &og, NULL), 0);
    p.noise = GPU_ANLM_RICIAN;
    ck_assert_int_eq(gpu_anlm_ref(&p, &in, &orc, NULL), 0);
    double mi = 0, mg = 0, mr = 0;
    size_t cnt = gpu_volume_count(&in);
    for (size_t i = 0; i < cnt; i++)
        mi += in.data[i], mg += og.data[i], mr += orc.data[i];
    mi /= cnt, mg /= cnt, mr /= cnt;
    printf("anlm Rician A=%.0f sigma=%.0f: input mean %.2f, gaussian model %.2f, rician %.2f\n", A,
           sigma, mi, mg, mr);
    ck_assert_msg(mg - A > 2.0, "the test needs a visible bias: %.2f", mg - A);
    ck_assert_msg(fabs(mr - A) < 0.25 * (mg - A), "rician mean %.2f vs A %.0f (gaussian %.2f)", mr,
                  A, mg);
    gpu_volume_close(&in);
    gpu_volume_close(&og);
    gpu_volume_close(&orc);
}
END_TEST

/* A small dark vessel (265, radius ~3 voxels) in a bright MR background
 * (16400), Rician noise of sigma 5: a voxel at the vessel's edge whose
 * kept offsets all missed had s2 of ~4e6 against ~30 around it, and the
 * plain box mean of s2 then subtracted more than E: the vessel came out at
 * a mean of 82 with 35 voxels at 0. With the outliers left out of the
 * smoothing it keeps its value. */
START_TEST(rician_keeps_a_small_dark_vessel_in_a_bright_background)
{
    const int n = 32, nz = 5;
    gpu_volume in = vol(n, n, nz), out = vol(n, n, nz);
    for (int z = 0; z < nz; z++)
        for (int y = 0; y < n; y++)
            for (int x = 0; x < n; x++) {
                int inside = (x - 16) * (x - 16) + (y - 16) * (y - 16) < 10;
                double re = (inside ? 265.0 : 16400.0) + 5.0 * grand(), im = 5.0 * grand();
                in.data[at(&in, x, y, z)] = (float)sqrt(re * re + im * im);
            }
    gpu_anlm_params p;
    gpu_anlm_params_default(&p);
    p.noise = GPU_ANLM_RICIAN;
    ck_assert_int_eq(gpu_anlm_ref(&p, &in, &out, NULL), 0);
    double sum = 0, lowest = INFINITY;
    int cnt = 0;
    for (int z = 0; z < nz; z++)
        for (int y = 0; y < n; y++)
            for (int x = 0; x < n; x++)
                if ((x - 16) * (x - 16) + (y - 16) * (y - 16) < 10) {
                    float v = out.data[at(&out, x, y, z)];
                    sum += v, cnt++;
                    lowest = fmin(lowest, v);
                }
    printf("anlm Rician vessel 265 in 16400: mean %.1f, lowest %.1f (%d voxels)\n", sum / cnt,
           lowest, cnt);
    ck_assert_msg(fabs(sum / cnt - 265.0) < 5.0, "vessel mean %.1f", sum / cnt);
    ck_assert_msg(lowest > 230.0, "a vessel voxel came out at %.1f", lowest);
    gpu_volume_close(&in);
    gpu_volume_close(&out);
}
END_TEST

/* The clipping limit against its definition: one outlier of any size, or
 * a quarter of the box, stays out of the mean; pure noise is averaged
 * whole. */
START_TEST(clip_limit_leaves_out_outliers_up_to_a_quarter_of_the_box)
{
    float box[125];
    for (int i = 0; i < 125; i++)
        box[i] = 30.0f + (float)(i % 7);
    double s = 0;
    for (int i = 0; i < 125; i++)
        s += box[i];
    ck_assert(fabs(gpu__anlm_clip_limit(s, 125) - 4.0 * s / 125) < 1e-9);
    for (int i = 0; i < 125; i++) /* noise: nothing above 4 means */
        ck_assert(box[i] <= gpu__anlm_clip_limit(s, 125));
    for (int n_out = 1; n_out <= 31; n_out++) { /* n_out values of 4e6 */
        double t = 0;
        for (int i = 0; i < 125; i++)
            t += i < n_out ? 4e6 : box[i];
        ck_assert_msg(4e6 > gpu__anlm_clip_limit(t, 125), "%d outliers kept", n_out);
    }
}
END_TEST

START_TEST(rician_xi_limits)
{
    ck_assert(fabs(gpu_anlm_rician_xi(0.0) - (2.0 - 3.14159265358979 / 2.0)) < 1e-6);
    double prev = gpu_anlm_rician_xi(0.0);
    for (double t = 0.5; t < 40; t += 0.5) {
        double x = gpu_anlm_rician_xi(t);
        ck_assert_msg(x >= prev - 1e-9 && x <= 1.0 + 1e-9, "xi(%.1f) = %.6f", t, x);
        prev = x;
    }
    ck_assert(fabs(gpu_anlm_rician_xi(30.0) - 1.0) < 1e-3);
    /* The fixed point inverts the moment ratio: for theta = 3, Rician mean
     * / sd from the closed forms gives r; theta(r) returns 3. */
    double t = 3.0, xi3 = gpu_anlm_rician_xi(t);
    double mean2 = 2.0 + t * t; /* E[M^2] / sigma^2 */
    double r = sqrt(mean2 - xi3) / sqrt(xi3);
    ck_assert_msg(fabs(gpu_anlm_rician_theta(r) - 3.0) < 1e-4, "theta(%.4f) = %.6f", r,
                  gpu_anlm_rician_theta(r));
    ck_assert(gpu_anlm_rician_theta(1.5) == 0.0);
}
END_TEST

START_TEST(mixing_reconstructs_when_both_inputs_are_equal)
{
    gpu_volume a = vol(9, 8, 7), o = vol(9, 8, 7), b = vol(9, 8, 7);
    fill_structured(&a, -500.0, 50.0);
    memcpy(b.data, a.data, gpu_volume_count(&a) * sizeof(float));
    ck_assert_int_eq(gpu_anlm_mix_ref(&a, &b, &o), 0);
    for (size_t i = 0; i < gpu_volume_count(&a); i++)
        ck_assert_msg(fabsf(o.data[i] - a.data[i]) <= 1e-4f, "voxel %zu: %g vs %g", i, o.data[i],
                      a.data[i]);
    gpu_volume_close(&a);
    gpu_volume_close(&b);
    gpu_volume_close(&o);
}
END_TEST

/* b = a + constant: the constant lives in LLL, which comes from a. b = a +
 * checkerboard (-1)^(x+y+z): HHH, which comes from b. b = a + (-1)^x
 * stripes: HLL, a single-axis band, from a. Odd sizes against the naive. */
START_TEST(mixing_takes_each_band_from_the_documented_input)
{
    int nx = 8, ny = 6, nz = 4;
    gpu_volume a = vol(nx, ny, nz), b = vol(nx, ny, nz), o = vol(nx, ny, nz);
    fill_structured(&a, 0.0, 20.0);
    for (int pat = 0; pat < 3; pat++) {
        for (int z = 0; z < nz; z++)
            for (int y = 0; y < ny; y++)
                for (int x = 0; x < nx; x++) {
                    size_t i = at(&a, x, y, z);
                    double add = pat == 0   ? 7.0
                                 : pat == 1 ? ((x + y + z) % 2 ? -5.0 : 5.0)
                                            : (x % 2 ? -5.0 : 5.0);
                    b.data[i] = (float)(a.data[i] + add);
                }
        ck_assert_int_eq(gpu_anlm_mix_ref(&a, &b, &o), 0);
        const gpu_volume *want = pat == 1 ? &b : &a;
        for (size_t i = 0; i < gpu_volume_count(&a); i++)
            ck_assert_msg(fabsf(o.data[i] - want->data[i]) <= 1e-4f, "pattern %d voxel %zu", pat,
                          i);
    }
    gpu_volume_close(&a);
    gpu_volume_close(&b);
    gpu_volume_close(&o);
    /* Odd sizes (blocks of length 1 on the last planes) against the naive. */
    gpu_volume a2 = vol(7, 5, 3), b2 = vol(7, 5, 3), o2 = vol(7, 5, 3);
    fill_structured(&a2, 10.0, 30.0);
    fill_structured(&b2, 10.0, 30.0);
    size_t n = gpu_volume_count(&a2);
    double *da = malloc(n * sizeof(double)), *db = malloc(n * sizeof(double)),
           *dn = malloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++)
        da[i] = a2.data[i], db[i] = b2.data[i];
    naive_mix(da, db, 7, 5, 3, dn);
    ck_assert_int_eq(gpu_anlm_mix_ref(&a2, &b2, &o2), 0);
    ck_assert(rel_l2(&o2, dn) <= 1e-6);
    free(da), free(db), free(dn);
    gpu_volume_close(&a2);
    gpu_volume_close(&b2);
    gpu_volume_close(&o2);
}
END_TEST

/* An edge the two results place differently (a step of 16000 in A, the
 * same step one voxel later in B, as at a sharp boundary the two patch
 * sizes treat differently): the mixed bands rang up to 12000 beyond both
 * results. Every voxel now stays within its block's range of A and B, and
 * a smooth pair is mixed unchanged by the clamp. */
START_TEST(mixing_does_not_ring_beyond_either_result_at_an_edge)
{
    gpu_volume a = vol(8, 8, 8), b = vol(8, 8, 8), o = vol(8, 8, 8);
    for (int z = 0; z < 8; z++)
        for (int y = 0; y < 8; y++)
            for (int x = 0; x < 8; x++) {
                size_t i = ((size_t)z * 8 + y) * 8 + x;
                a.data[i] = x + y + z < 12 ? 16400.0f : 265.0f;
                b.data[i] = x + y + z < 13 ? 16400.0f : 265.0f;
            }
    ck_assert_int_eq(gpu_anlm_mix_ref(&a, &b, &o), 0);
    for (size_t i = 0; i < gpu_volume_count(&a); i++)
        ck_assert_msg(o.data[i] >= 265.0f && o.data[i] <= 16400.0f, "voxel %zu: %.1f", i,
                      o.data[i]);
    fill_structured(&a, 10.0, 30.0);
    for (size_t i = 0; i < gpu_volume_count(&a); i++)
        b.data[i] = a.data[i] + 0.5f * sinf((float)i);
    ck_assert_int_eq(gpu_anlm_mix_ref(&a, &b, &o), 0);
    for (size_t i = 0; i < gpu_volume_count(&a); i++)
        ck_assert(fabsf(o.data[i] - a.data[i]) <= 1.0f);
    gpu_volume_close(&a);
    gpu_volume_close(&b);
    gpu_volume_close(&o);
}
END_TEST

/* 1 to 3 slices, or images 1 to 3 pixels across, at S = 5: the mirror's
 * period is at most the search radius there, and offsets of a whole period
 * compared every patch with itself (s2 = 0: the input came back unchanged).
 * Each shape matches the naive definition and is filtered. */
START_TEST(few_slices_or_thin_images_are_filtered)
{
    static const int shapes[][3] = {{16, 15, 1}, {16, 15, 2}, {16, 15, 3},
                                    {3, 17, 4},  {14, 2, 3},  {16, 15, 8}};
    gpu_anlm_params p;
    gpu_anlm_params_default(&p);
    p.search_radius = 5;
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        int nx = shapes[k][0], ny = shapes[k][1], nz = shapes[k][2];
        check_ref_vs_naive(nx, ny, nz, p, 100.0, 20.0);
        gpu_volume in = vol(nx, ny, nz), out = vol(nx, ny, nz);
        for (size_t i = 0; i < gpu_volume_count(&in); i++)
            in.data[i] = (float)(40.0 + 20.0 * grand());
        ck_assert_int_eq(gpu_anlm_ref(&p, &in, &out, NULL), 0);
        double ri = 0, ro = 0;
        for (size_t i = 0; i < gpu_volume_count(&in); i++)
            ri += (in.data[i] - 40.0) * (in.data[i] - 40.0),
                ro += (out.data[i] - 40.0) * (out.data[i] - 40.0);
        printf("anlm %dx%dx%d: noise power ratio %.3f\n", nx, ny, nz, ro / ri);
        ck_assert_msg(ro < 0.75 * ri, "%dx%dx%d: noise power %.1f -> %.1f", nx, ny, nz, ri, ro);
        gpu_volume_close(&in);
        gpu_volume_close(&out);
    }
}
END_TEST

/* Lung-like CT numbers (all negative): filtered like anything else. */
START_TEST(negative_hu_volume_is_filtered_not_passed_through)
{
    int n = 21;
    gpu_volume in = vol(n, n, n), out = vol(n, n, n);
    for (size_t i = 0; i < gpu_volume_count(&in); i++)
        in.data[i] = (float)(-800.0 + 20.0 * grand());
    gpu_anlm_params p;
    gpu_anlm_params_default(&p);
    ck_assert_int_eq(gpu_anlm_ref(&p, &in, &out, NULL), 0);
    double mi = 0, mo = 0, vi = 0, vo = 0;
    size_t cnt = gpu_volume_count(&in), changed = 0;
    for (size_t i = 0; i < cnt; i++) {
        mi += in.data[i], mo += out.data[i];
        changed += fabsf(out.data[i] - in.data[i]) > 1e-3f;
    }
    mi /= cnt, mo /= cnt;
    for (size_t i = 0; i < cnt; i++)
        vi += (in.data[i] - mi) * (in.data[i] - mi), vo += (out.data[i] - mo) * (out.data[i] - mo);
    double si = sqrt(vi / cnt), so = sqrt(vo / cnt);
    printf("anlm at -800 HU: noise %.2f -> %.2f, mean %.2f -> %.2f, %zu/%zu voxels changed\n", si,
           so, mi, mo, changed, cnt);
    ck_assert(so < 0.5 * si);
    ck_assert(fabs(mo - mi) < 1.0);
    ck_assert(changed > cnt * 9 / 10);
    gpu_volume_close(&in);
    gpu_volume_close(&out);
}
END_TEST

/* Seed 004's case: Poisson counts of a fluence that decays from a source
 * over three decades (1e4 near the source down to ~10 at the far side). SNR
 * per decade = 20 log10(mean count / rms error) before and after; the
 * median gain over the decades must reach 5 dB. */
START_TEST(poisson_counts_over_three_decades_gain_5_db)
{
    int n = 36;
    gpu_volume truth = vol(n, n, n), in = vol(n, n, n), out = vol(n, n, n);
    double k = log(1000.0) / (n * sqrt(2.0));
    for (int z = 0; z < n; z++)
        for (int y = 0; y < n; y++)
            for (int x = 0; x < n; x++) {
                double r = sqrt((x - n / 2.0) * (x - n / 2.0) + (y - n / 2.0) * (y - n / 2.0) +
                                (double)z * z);
                double lam = 1e4 * exp(-k * r);
                truth.data[at(&in, x, y, z)] = (float)lam;
                in.data[at(&in, x, y, z)] = (float)poisson(lam);
            }
    gpu_anlm_params p;
    gpu_anlm_params_default(&p);
    ck_assert_int_eq(gpu_anlm_ref(&p, &in, &out, NULL), 0);
    double gains[3];
    for (int dec = 0; dec < 3; dec++) {
        double lo = 1e4 / pow(10, dec + 1), hi = 1e4 / pow(10, dec), ei = 0, eo = 0, m = 0;
        size_t c = 0;
        for (size_t i = 0; i < gpu_volume_count(&in); i++)
            if (truth.data[i] > lo && truth.data[i] <= hi) {
                double t = truth.data[i];
                ei += (in.data[i] - t) * (in.data[i] - t);
                eo += (out.data[i] - t) * (out.data[i] - t);
                m += t, c++;
            }
        ck_assert(c > 100);
        m /= c;
        double snr_in = 20 * log10(m / sqrt(ei / c)), snr_out = 20 * log10(m / sqrt(eo / c));
        gains[dec] = snr_out - snr_in;
        printf("anlm Poisson counts (%.0f, %.0f]: SNR %.1f dB -> %.1f dB (gain %.1f dB, %zu "
               "voxels)\n",
               lo, hi, snr_in, snr_out, gains[dec], c);
    }
    double med = gains[0] + gains[1] + gains[2] - fmax(gains[0], fmax(gains[1], gains[2])) -
                 fmin(gains[0], fmin(gains[1], gains[2]));
    printf("anlm Poisson: median SNR gain %.1f dB\n", med);
    ck_assert_msg(med >= 5.0, "median gain %.1f dB", med);
    gpu_volume_close(&truth);
    gpu_volume_close(&in);
    gpu_volume_close(&out);
}
END_TEST

/* Chunks are owned by one thread each: 1 and 3 threads agree bit for bit. */
START_TEST(same_result_with_any_thread_count)
{
    gpu_volume in = vol(19, 17, 21), o1 = vol(19, 17, 21), o3 = vol(19, 17, 21);
    fill_structured(&in, -200.0, 25.0);
    gpu_anlm_params p;
    gpu_anlm_params_default(&p);
    gpu_device d1 = {.kind = GPU_DEVICE_CPU, .threads = 1}, d3 = d1;
    d3.threads = 3;
    ck_assert_int_eq(gpu_anlm_ref(&p, &in, &o1, &d1), 0);
    ck_assert_int_eq(gpu_anlm_ref(&p, &in, &o3, &d3), 0);
    ck_assert(memcmp(o1.data, o3.data, gpu_volume_count(&in) * sizeof(float)) == 0);
    gpu_volume_close(&in);
    gpu_volume_close(&o1);
    gpu_volume_close(&o3);
}
END_TEST

START_TEST(rejects_bad_parameters)
{
    gpu_volume in = vol(5, 5, 5), out = vol(5, 5, 5);
    fill_structured(&in, 0, 1);
    gpu_anlm_params p;
    gpu_anlm_params_default(&p);
    p.search_radius = 0;
    ck_assert_int_eq(gpu_anlm_ref(&p, &in, &out, NULL), LDCT_EINPUT);
    gpu_anlm_params_default(&p);
    p.mean_ratio = 1.5f;
    ck_assert_int_eq(gpu_anlm_ref(&p, &in, &out, NULL), LDCT_EINPUT);
    gpu_anlm_params_default(&p);
    p.block_radius = 0;
    ck_assert_int_eq(gpu_anlm_ref(&p, &in, &out, NULL), LDCT_EINPUT);
    gpu_anlm_params_default(&p);
    ck_assert_int_eq(gpu_anlm_ref(&p, &in, &in, NULL), LDCT_EINPUT);
    gpu_volume_close(&in);
    gpu_volume_close(&out);
}
END_TEST

static Suite *anlm_suite(void)
{
    Suite *s = suite_create("anlm");
    TCase *tc = tcase_create("ref");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, ref_matches_naive_on_odd_sizes);
    tcase_add_test(tc, preselection_requires_mean_and_variance);
    tcase_add_test(tc, adaptive_sigma_tracks_noise_that_changes_across_the_volume);
    tcase_add_test(tc, rician_correction_removes_the_bias_on_a_constant_volume);
    tcase_add_test(tc, rician_xi_limits);
    tcase_add_test(tc, rician_keeps_a_small_dark_vessel_in_a_bright_background);
    tcase_add_test(tc, clip_limit_leaves_out_outliers_up_to_a_quarter_of_the_box);
    tcase_add_test(tc, mixing_reconstructs_when_both_inputs_are_equal);
    tcase_add_test(tc, mixing_takes_each_band_from_the_documented_input);
    tcase_add_test(tc, negative_hu_volume_is_filtered_not_passed_through);
    tcase_add_test(tc, few_slices_or_thin_images_are_filtered);
    tcase_add_test(tc, mixing_does_not_ring_beyond_either_result_at_an_edge);
    tcase_add_test(tc, poisson_counts_over_three_decades_gain_5_db);
    tcase_add_test(tc, same_result_with_any_thread_count);
    tcase_add_test(tc, rejects_bad_parameters);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(anlm_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
