/* CPU reference of adaptive4d (C11 + OpenMP): the five steps of adaptive4d.h
 * on whole volumes in memory (about 14 full-resolution copies plus the FFT
 * buffers of one filter per thread; it is the definition, not the fast
 * path). Any thread.
 */
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"
#include "gpu/adaptive4d.h"
#include "gpu/fftw_dl.h"

enum { NT = GPU_A4D_NTENSOR, NM = GPU_A4D_NMONO, NH = GPU_A4D_NHP };

typedef struct grid4 {
    int d[4];
    size_t n;
} grid4;

static grid4 grid_of(int nx, int ny, int nz, int nt)
{
    grid4 g = {{nx, ny, nz, nt}, (size_t)nx * ny * nz * nt};
    return g;
}

static void free_arrays(float **a, int n)
{
    for (int i = 0; i < n; i++) {
        free(a[i]);
        a[i] = NULL;
    }
}

static int alloc_arrays(float **a, int n, size_t len)
{
    for (int i = 0; i < n; i++)
        a[i] = NULL;
    for (int i = 0; i < n; i++)
        if (!(a[i] = malloc(sizeof(float) * (len ? len : 1)))) {
            free_arrays(a, n);
            return -ENOMEM;
        }
    return 0;
}

static int resolve_backend(const gpu_adaptive4d_params *p)
{
    if (p->backend != GPU_A4D_AUTO)
        return p->backend;
    return gpu__fftw() ? GPU_A4D_FFT : GPU_A4D_SPATIAL;
}

static int threads_of(const gpu_device *dev)
{
    return dev && dev->threads > 0 ? dev->threads : omp_get_max_threads();
}

/* ---- step 1: tensor grid --------------------------------------------------- */

static int downsample(const float *in, const grid4 *g, int f, float *low, const grid4 *lg,
                      int threads)
{
    if (f == 1) {
        memcpy(low, in, sizeof(float) * g->n);
        return 0;
    }
    static const float binom[5] = {1 / 16.f, 4 / 16.f, 6 / 16.f, 4 / 16.f, 1 / 16.f};
    float *tmp = malloc(sizeof(float) * g->n);
    if (!tmp)
        return -ENOMEM;
    int rc = gpu__a4d_smooth(in, tmp, g->d, binom, 2, 0x7, threads);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long row = 0; row < (long)lg->d[1] * lg->d[2] * lg->d[3]; row++) {
        int y = (int)(row % lg->d[1]), z = (int)(row / lg->d[1] % lg->d[2]),
            t = (int)(row / lg->d[1] / lg->d[2]);
        const float *src =
            tmp + (((size_t)t * g->d[2] + (size_t)z * f) * g->d[1] + y * f) * g->d[0];
        for (int x = 0; x < lg->d[0]; x++)
            low[(size_t)row * lg->d[0] + x] = src[x * f];
    }
    free(tmp);
    return rc;
}

/* ---- step 3: structure tensor from the monomial responses ---------------- */

static void tensor_from_mono(const gpu_adaptive4d_params *p, float **q, float **T, size_t n,
                             int threads)
{
    const double f = p->downsample, dinv[4] = {1 / f, 1 / f, 1 / f, p->t_scale};
#pragma omp parallel for num_threads(threads) schedule(static)
    for (size_t v = 0; v < n; v++) {
        double q1[4], Q2[4][4];
        for (int i = 0; i < 4; i++) {
            q1[i] = q[i][v];
            for (int j = 0; j < 4; j++)
                Q2[i][j] = q[4 + gpu__a4d_tidx(i, j)][v];
        }
        for (int i = 0; i < 4; i++)
            for (int j = i; j < 4; j++) {
                double even = 0;
                for (int k = 0; k < 4; k++)
                    even += Q2[i][k] * Q2[k][j];
                double t = q1[i] * q1[j] + p->gamma * even;
                T[gpu__a4d_tidx(i, j)][v] = (float)(t * dinv[i] * dinv[j]);
            }
    }
}

/* Steps 1-3 into T[10] on the tensor grid lg. */
static int tensor_grid(const gpu_adaptive4d_params *p, const gpu_a4d_bank *b, const float *in,
                       const grid4 *g, const grid4 *lg, float **T, int threads)
{
    float *q[NM] = {NULL}, *low = malloc(sizeof(float) * lg->n),
          *mean = malloc(sizeof(float) * lg->n);
    int rc = low && mean ? alloc_arrays(q, NM, lg->n) : -ENOMEM;
    float taps[GPU_A4D_MAX_SIZE];
    if (!rc)
        rc = downsample(in, g, p->downsample, low, lg, threads);
    if (!rc) {
        int r = gpu__a4d_gauss_taps(1.0f, taps);
        rc = gpu__a4d_smooth(low, mean, lg->d, taps, r, 0xf, threads);
    }
    if (!rc)
        rc = gpu__a4d_filter_ref(b->mono, NM, b->mono_size, low, mean, lg->d, q, resolve_backend(p),
                                 threads);
    if (!rc)
        tensor_from_mono(p, q, T, lg->n, threads);
    if (!rc) {
        int r = gpu__a4d_gauss_taps(p->tensor_sigma, taps);
        for (int c = 0; c < NT && !rc; c++)
            rc = gpu__a4d_smooth(T[c], T[c], lg->d, taps, r, 0xf, threads);
    }
    free_arrays(q, NM);
    free(low);
    free(mean);
    return rc;
}

/* ---- step 4: control tensor ------------------------------------------------ */

void gpu__a4d_eig4(double a[16], double l[4], double v[16])
{
    gpu__a4d_jacobi4(a, v);
    int order[4] = {0, 1, 2, 3};
    for (int i = 0; i < 4; i++)
        for (int j = i + 1; j < 4; j++)
            if (a[5 * order[j]] > a[5 * order[i]]) {
                int t = order[i];
                order[i] = order[j];
                order[j] = t;
            }
    double vv[16];
    for (int k = 0; k < 4; k++) {
        l[k] = a[5 * order[k]];
        for (int i = 0; i < 4; i++)
            vv[4 * i + k] = v[4 * i + order[k]];
    }
    memcpy(v, vv, sizeof vv);
}

static gpu__a4d_map map_of(const gpu_adaptive4d_params *p)
{
    gpu__a4d_map m = {p->m_alpha,  p->m_beta,  p->m_sigma * p->strength,
                      p->mu_alpha, p->mu_beta, p->m_pass,
                      p->pass_t,   p->t_scale};
    return m;
}

/* N(T) at voxel v (adaptive4d.h, step 4). */
static double norm_at(const gpu_adaptive4d_params *p, float **T, size_t v)
{
    double t[GPU_A4D_NTENSOR];
    for (int c = 0; c < GPU_A4D_NTENSOR; c++)
        t[c] = T[c][v];
    return gpu__a4d_norm_voxel(t, p->t_scale);
}

static void control_voxel(const gpu_adaptive4d_params *p, const gpu__a4d_map *map, float **T,
                          size_t v, double ref)
{
    double a[16], l[4], e[16], w[4] = {0, 0, 0, 0};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            a[4 * i + j] = T[gpu__a4d_tidx(i, j)][v];
    const double x = ref > 0 ? norm_at(p, T, v) / ref : 0;
    gpu__a4d_eig4(a, l, e);
    if (ref > 0)
        gpu__a4d_weights(map, x, ref, l, e, w);
    for (int i = 0; i < 4; i++)
        for (int j = i; j < 4; j++) {
            double c = 0;
            for (int k = 0; k < 4; k++)
                c += w[k] * e[4 * i + k] * e[4 * j + k];
            T[gpu__a4d_tidx(i, j)][v] = (float)c;
        }
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

size_t gpu__a4d_norm_stride(size_t n)
{
    return n > GPU_A4D_NORM_SAMPLES ? (n + GPU_A4D_NORM_SAMPLES - 1) / GPU_A4D_NORM_SAMPLES : 1;
}

float gpu__a4d_norm_median(float *samples, size_t m)
{
    if (!m)
        return 0;
    qsort(samples, m, sizeof *samples, cmp_float);
    return samples[m / 2];
}

/* The reference of x = ||T|| / reference (p->m_norm); 0 when T is zero or
 * memory runs out. */
static double norm_reference(const gpu_adaptive4d_params *p, float **T, size_t n, int threads)
{
    double tmax = 0;
    if (p->m_norm == GPU_A4D_NORM_MAX) {
#pragma omp parallel for num_threads(threads) reduction(max : tmax) schedule(static)
        for (size_t v = 0; v < n; v++) {
            double f = norm_at(p, T, v);
            if (f > tmax)
                tmax = f;
        }
        return tmax;
    }
    size_t stride = gpu__a4d_norm_stride(n), m = (n + stride - 1) / stride;
    float *s = malloc(sizeof *s * (m ? m : 1));
    if (!s)
        return 0;
    for (size_t i = 0; i < m; i++)
        s[i] = (float)norm_at(p, T, i * stride);
    double med = gpu__a4d_norm_median(s, m);
    free(s);
    return med;
}

void gpu__a4d_control(const gpu_adaptive4d_params *p, float **T, size_t n, double ref_cap,
                      int threads)
{
    threads = threads > 0 ? threads : omp_get_max_threads();
    gpu__a4d_control_with(p, T, n,
                          gpu__a4d_capped("tensor norm", norm_reference(p, T, n, threads), ref_cap),
                          threads);
}

void gpu__a4d_control_with(const gpu_adaptive4d_params *p, float **T, size_t n, double tmax,
                           int threads)
{
    threads = threads > 0 ? threads : omp_get_max_threads();
    const gpu__a4d_map map = map_of(p);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (size_t v = 0; v < n; v++)
        control_voxel(p, &map, T, v, tmax);
}

/* ---- step 6: static parts ------------------------------------------------------ */

/* Step 6's residual energy e on the tensor grid (adaptive4d.h). */
static int static_energy(const gpu_adaptive4d_params *p, const float *in, const grid4 *g,
                         const grid4 *lg, float *e, int threads)
{
    float *low = malloc(sizeof(float) * lg->n), *lt = malloc(sizeof(float) * lg->n);
    float taps[GPU_A4D_MAX_SIZE];
    int rc = low && lt ? downsample(in, g, p->downsample, low, lg, threads) : -ENOMEM;
    if (!rc)
        rc = gpu__a4d_smooth(low, lt, lg->d, taps, gpu__a4d_gauss_taps(p->static_sigma_t, taps),
                             0x8, threads);
    if (!rc) {
#pragma omp parallel for num_threads(threads) schedule(static)
        for (size_t v = 0; v < lg->n; v++)
            e[v] = (low[v] - lt[v]) * (low[v] - lt[v]);
        rc = gpu__a4d_smooth(e, e, lg->d, taps, gpu__a4d_gauss_taps(p->static_sigma_t, taps), 0x8,
                             threads);
    }
    if (!rc)
        rc = gpu__a4d_smooth(e, e, lg->d, taps, gpu__a4d_gauss_taps(p->control_sigma, taps), 0xf,
                             threads);
    free(low);
    free(lt);
    return rc;
}

/* The median of e over the sample voxels of step 4; 0 without memory. */
static double energy_reference(const float *e, size_t n)
{
    size_t stride = gpu__a4d_norm_stride(n), m = (n + stride - 1) / stride;
    float *s = malloc(sizeof *s * (m ? m : 1));
    if (!s)
        return 0;
    for (size_t i = 0; i < m; i++)
        s[i] = e[i * stride];
    double med = gpu__a4d_norm_median(s, m);
    free(s);
    return med;
}

/* e -> the smoothed weight S, in place. */
static int static_weights(const gpu_adaptive4d_params *p, float *e, const grid4 *lg, double eref,
                          int threads)
{
    float taps[GPU_A4D_MAX_SIZE];
#pragma omp parallel for num_threads(threads) schedule(static)
    for (size_t v = 0; v < lg->n; v++)
        e[v] = (float)gpu__a4d_static_weight(e[v], eref, p->static_t, p->m_beta);
    return gpu__a4d_smooth(e, e, lg->d, taps, gpu__a4d_gauss_taps(p->control_sigma, taps), 0xf,
                           threads);
}

/* Linear interpolation (x, y, z) of a tensor-grid array at a full-res voxel. */
static double interp_at(const float *A, const grid4 *lg, int f, int x, int y, int z, int t)
{
    double fr[3], acc = 0;
    int i0[3], i1[3], pos[3] = {x, y, z};
    for (int a = 0; a < 3; a++) {
        double u = (double)pos[a] / f;
        i0[a] = (int)u;
        fr[a] = u - i0[a];
        i1[a] = i0[a] + 1 < lg->d[a] ? i0[a] + 1 : i0[a];
    }
    for (int corner = 0; corner < 8; corner++) {
        double w = 1;
        int idx[3];
        for (int a = 0; a < 3; a++) {
            int hi = (corner >> a) & 1;
            idx[a] = hi ? i1[a] : i0[a];
            w *= hi ? fr[a] : 1 - fr[a];
        }
        if (w != 0)
            acc += w * A[(((size_t)t * lg->d[2] + idx[2]) * lg->d[1] + idx[1]) * lg->d[0] + idx[0]];
    }
    return acc;
}

/* out += S (L6 out - out). */
static int static_blend(const gpu_adaptive4d_params *p, const float *S, const grid4 *lg,
                        const grid4 *g, float *out, int threads)
{
    float taps[GPU_A4D_MAX_SIZE], *lt = malloc(sizeof(float) * g->n);
    if (!lt)
        return -ENOMEM;
    int rc = gpu__a4d_smooth(out, lt, g->d, taps, gpu__a4d_gauss_taps(p->static_sigma_t, taps), 0x8,
                             threads);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long row = 0; row < (long)g->d[1] * g->d[2] * g->d[3]; row++) {
        int y = (int)(row % g->d[1]), z = (int)(row / g->d[1] % g->d[2]),
            t = (int)(row / g->d[1] / g->d[2]);
        for (int x = 0; x < g->d[0]; x++) {
            size_t v = (size_t)row * g->d[0] + x;
            out[v] += (float)(interp_at(S, lg, p->downsample, x, y, z, t) * (lt[v] - out[v]));
        }
    }
    free(lt);
    return rc;
}

/* ---- step 5: reconstruction ------------------------------------------------ */

/* Linear interpolation of the 10 control components at full-res voxel
 * (x,y,z,t) and the 10 filter weights c_k. */
static void weights_at(const gpu_a4d_bank *b, float **C, const grid4 *lg, int f, int x, int y,
                       int z, int t, double *c)
{
    double fr[3];
    int i0[3], i1[3], pos[3] = {x, y, z};
    for (int a = 0; a < 3; a++) {
        double u = (double)pos[a] / f;
        i0[a] = (int)u;
        fr[a] = u - i0[a];
        i1[a] = i0[a] + 1 < lg->d[a] ? i0[a] + 1 : i0[a];
    }
    double ct[NT] = {0};
    for (int corner = 0; corner < 8; corner++) {
        double w = 1;
        int idx[3];
        for (int a = 0; a < 3; a++) {
            int hi = (corner >> a) & 1;
            idx[a] = hi ? i1[a] : i0[a];
            w *= hi ? fr[a] : 1 - fr[a];
        }
        if (w == 0)
            continue;
        size_t v = (((size_t)t * lg->d[2] + idx[2]) * lg->d[1] + idx[1]) * lg->d[0] + idx[0];
        for (int k = 0; k < NT; k++)
            ct[k] += w * C[k][v];
    }
    double proj[NH];
    for (int l = 0; l < NH; l++) {
        const double *n = b->dirs[l];
        proj[l] = 0;
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++)
                proj[l] += n[i] * ct[gpu__a4d_tidx(i, j)] * n[j];
    }
    for (int k = 0; k < NH; k++) {
        c[k] = 0;
        for (int l = 0; l < NH; l++)
            c[k] += b->dual[k][l] * proj[l];
    }
}

typedef struct region_job {
    int r0, r1, t0, t1;
    double ref, eref;         /* step 6's eref (when ref >= 0) */
    double ref_cap, eref_cap; /* their noise caps when ref < 0 (0: none) */
    float *samples;           /* first pass: the whole grid's samples, filled at [t0, t1) */
    float *esamples;          /* first pass with step 6: the residual-energy samples */
    double *max;              /* first pass with GPU_A4D_NORM_MAX */
    double base, span;        /* the region's share of the call's progress */
} region_job;

/* Where a region's steps end in its share of the progress: the tensor grid
 * (with step 6's energy; a first pass computes only that), then control,
 * smoothing and the lowpass, then the highpass bank (reported per kernel),
 * then the combination (per row) and step 6's blend. Measured on 2 cores
 * (128x128x32 x 10, FFTW, one region of 3.9 s): 9%, 21%, 45%, 24%. */
#define A4D_SHARE_TENSOR 0.1
#define A4D_SHARE_BANK0 0.3
#define A4D_SHARE_BANK1 0.75
#define A4D_SHARE_COMBINED 0.99

static int reconstruct(const gpu_adaptive4d_params *p, const gpu_a4d_bank *b, const float *in,
                       const grid4 *g, float **C, const grid4 *lg, float *out, int threads,
                       const region_job *j)
{
    float *hp[NH];
    int rc = alloc_arrays(hp, NH, g->n);
    if (!rc)
        rc = gpu__a4d_smooth(in, out, g->d, b->lp, b->lp_radius, 0x7, threads);
    if (!rc)
        rc = gpu__a4d_smooth(out, out, g->d, b->lp_t, b->lp_t_radius, 0x8, threads);
    gpu_progress_count bank;
    gpu_progress_begin(&bank, p->progress, j->base + j->span * A4D_SHARE_BANK0,
                       j->span * (A4D_SHARE_BANK1 - A4D_SHARE_BANK0), NH);
    gpu_progress_add(&bank, 0);
    if (!rc)
        rc = gpu__a4d_filter_ref_counted(b->hp, NH, b->recon_size, in, out, g->d, hp,
                                         resolve_backend(p), threads, &bank);
    const long rows = (long)g->d[1] * g->d[2] * g->d[3];
    gpu_progress_count comb;
    gpu_progress_begin(&comb, p->progress, j->base + j->span * A4D_SHARE_BANK1,
                       j->span * (A4D_SHARE_COMBINED - A4D_SHARE_BANK1), rows);
    if (!rc) {
        gpu_progress_add(&comb, 0);
#pragma omp parallel for num_threads(threads) schedule(static)
        for (long row = 0; row < rows; row++) {
            int y = (int)(row % g->d[1]), z = (int)(row / g->d[1] % g->d[2]),
                t = (int)(row / g->d[1] / g->d[2]);
            for (int x = 0; x < g->d[0]; x++) {
                double c[NH], acc = 0;
                size_t v = (size_t)row * g->d[0] + x;
                weights_at(b, C, lg, p->downsample, x, y, z, t, c);
                for (int k = 0; k < NH; k++)
                    acc += c[k] * hp[k][v];
                out[v] += (float)acc;
            }
            gpu_progress_add(&comb, 1);
        }
        gpu_progress_end(&comb);
    }
    free_arrays(hp, NH);
    return rc;
}

/* ---- entry points ------------------------------------------------------------ */

static int check_call(const gpu_adaptive4d_params *p, const gpu_volume *in, const gpu_volume *out)
{
    int rc = gpu_adaptive4d_params_check(p);
    if (rc)
        return rc;
    if (!in || !in->data || in->nx < 1 || in->ny < 1 || in->nz < 1 || in->nt < 1)
        return LDCT_EINPUT;
    if (out && (!out->data || !gpu_volume_same_shape(in, out) || out->data == in->data))
        return LDCT_EINPUT;
    if (p->backend == GPU_A4D_FFT && !gpu__fftw())
        return LDCT_EUNSUPPORTED;
    return 0;
}

static grid4 tensor_grid_of(const gpu_adaptive4d_params *p, const gpu_volume *in)
{
    const int f = p->downsample;
    return grid_of((in->nx + f - 1) / f, (in->ny + f - 1) / f, (in->nz + f - 1) / f, in->nt);
}

int gpu_adaptive4d_tensor_ref(const gpu_adaptive4d_params *p, const gpu_volume *in,
                              gpu_volume T[GPU_A4D_NTENSOR], const gpu_device *dev)
{
    int rc = check_call(p, in, NULL);
    if (rc)
        return rc;
    grid4 g = grid_of(in->nx, in->ny, in->nz, in->nt), lg = tensor_grid_of(p, in);
    float *t[NT];
    for (int c = 0; c < NT; c++) {
        if (!T[c].data || T[c].nx != lg.d[0] || T[c].ny != lg.d[1] || T[c].nz != lg.d[2] ||
            T[c].nt != lg.d[3])
            return LDCT_EINPUT;
        t[c] = T[c].data;
    }
    gpu_a4d_bank b;
    if ((rc = gpu__a4d_bank_make(p, GPU_A4D_BANK_MONO, &b)) != 0)
        return rc;
    rc = tensor_grid(p, &b, in->data, &g, &lg, t, threads_of(dev));
    gpu__a4d_bank_free(&b);
    return rc;
}

/* What one region (time points [r0, r1) of the volume, filtered as if it
 * were the volume) does: the whole filter with the reference `ref` (< 0:
 * its own, the one-slab case), or only the first slab pass: the norm
 * samples (or the maximum) at its output time points [t0, t1). */

static void region_progress(const gpu_adaptive4d_params *p, const region_job *j, double part)
{
    gpu_progress_at(p->progress, j->base + j->span * part);
}

static gpu_volume time_view(const gpu_volume *v, int t0, int t1)
{
    gpu_volume s = *v;
    s.data = v->data + (size_t)t0 * v->nx * v->ny * v->nz;
    s.nt = t1 - t0;
    return s;
}

/* First pass of a region: samples or maximum of ||T|| at [t0, t1). */
static void collect_norms(const gpu_adaptive4d_params *p, float **C, const float *e,
                          const grid4 *lg, const gpu_volume *in, const region_job *j)
{
    size_t plane = (size_t)lg->d[0] * lg->d[1] * lg->d[2], n = plane * in->nt;
    size_t g0 = plane * j->t0, g1 = plane * j->t1, off = plane * j->r0, i0, i1;
    gpu__a4d_norm_range(n, g0, g1, &i0, &i1);
    for (size_t i = i0; e && i < i1; i++)
        j->esamples[i] = e[i * gpu__a4d_norm_stride(n) - off];
    if (p->m_norm == GPU_A4D_NORM_MAX) {
        for (size_t g = g0; g < g1; g++)
            *j->max = fmax(*j->max, norm_at(p, C, g - off));
        return;
    }
    gpu__a4d_norm_range(n, g0, g1, &i0, &i1);
    size_t stride = gpu__a4d_norm_stride(n);
    for (size_t i = i0; i < i1; i++)
        j->samples[i] = (float)norm_at(p, C, i * stride - off);
}

static int run_region(const gpu_adaptive4d_params *p, const gpu_a4d_bank *b, const gpu_volume *in,
                      float *out, const region_job *j, int threads)
{
    gpu_volume rin = time_view(in, j->r0, j->r1);
    grid4 g = grid_of(rin.nx, rin.ny, rin.nz, rin.nt), lg = tensor_grid_of(p, &rin);
    const int nc = p->static_sigma_t > 0 ? NT + 1 : NT; /* C, and step 6's e then S */
    float *C[NT + 1] = {NULL};
    int rc = alloc_arrays(C, nc, lg.n);
    float *S = nc > NT ? C[NT] : NULL;
    if (rc)
        return rc;
    rc = tensor_grid(p, b, rin.data, &g, &lg, C, threads);
    if (!rc && S)
        rc = static_energy(p, rin.data, &g, &lg, S, threads);
    if (!rc && (j->samples || j->max)) {
        collect_norms(p, C, S, &lg, in, j);
        free_arrays(C, nc);
        region_progress(p, j, 1.0);
        return 0;
    }
    if (!rc)
        region_progress(p, j, A4D_SHARE_TENSOR);
    if (!rc) {
        float taps[GPU_A4D_MAX_SIZE];
        int r = gpu__a4d_gauss_taps(p->control_sigma, taps);
        if (j->ref < 0)
            gpu__a4d_control(p, C, lg.n, j->ref_cap, threads);
        else
            gpu__a4d_control_with(p, C, lg.n, j->ref, threads);
        for (int c = 0; c < NT && !rc; c++)
            rc = gpu__a4d_smooth(C[c], C[c], lg.d, taps, r, 0xf, threads);
        if (!rc && S)
            rc = static_weights(p, S, &lg,
                                j->ref < 0 ? gpu__a4d_capped("step 6 energy",
                                                             energy_reference(S, lg.n), j->eref_cap)
                                           : j->eref,
                                threads);
    }
    if (!rc)
        rc = reconstruct(p, b, rin.data, &g, C, &lg, out, threads, j);
    if (!rc && S)
        rc = static_blend(p, S, &lg, &g, out, threads);
    free_arrays(C, nc);
    if (!rc)
        region_progress(p, j, 1.0);
    return rc;
}

/* Bytes per region time point: full-resolution buffers (10 highpass
 * outputs, the lowpass/output, one temporary, step 6's lowpass) and the
 * tensor grid (14 monomial responses, 10 tensor components, the low and
 * mean arrays, step 6's energy and its two temporaries). */
static size_t bytes_per_time_point(const gpu_adaptive4d_params *p, const gpu_volume *in)
{
    const size_t f = (size_t)p->downsample, full = (size_t)in->nx * in->ny * in->nz;
    const size_t low = ((in->nx + f - 1) / f) * ((in->ny + f - 1) / f) * ((in->nz + f - 1) / f);
    return sizeof(float) * (13 * full + 29 * low);
}

static size_t default_budget(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (size_t)pages * (size_t)size / 2 : 0;
}

/* First pass over the slabs: the M-function's reference of the whole
 * volume. */
static int slab_reference(const gpu_adaptive4d_params *p, const gpu_a4d_bank *b,
                          const gpu_volume *in, int h, int halo, double *ref, double *eref,
                          int threads, double base, double span)
{
    const int f = p->downsample;
    size_t n =
        (size_t)((in->nx + f - 1) / f) * ((in->ny + f - 1) / f) * ((in->nz + f - 1) / f) * in->nt;
    size_t stride = gpu__a4d_norm_stride(n), m = (n + stride - 1) / stride;
    double max = 0;
    float *samples = p->m_norm == GPU_A4D_NORM_MAX ? NULL : malloc(sizeof(float) * m);
    float *esamples = p->static_sigma_t > 0 ? malloc(sizeof(float) * m) : NULL;
    int rc = (p->m_norm != GPU_A4D_NORM_MAX && !samples) || (p->static_sigma_t > 0 && !esamples)
                 ? -ENOMEM
                 : 0;
    for (int t0 = 0; t0 < in->nt && !rc; t0 += h) {
        int t1 = t0 + h < in->nt ? t0 + h : in->nt;
        region_job j = {t0 - halo < 0 ? 0 : t0 - halo,
                        t1 + halo > in->nt ? in->nt : t1 + halo,
                        t0,
                        t1,
                        -1,
                        -1,
                        0,
                        0,
                        samples,
                        esamples,
                        samples ? NULL : &max,
                        base + span * t0 / in->nt,
                        span * (t1 - t0) / in->nt};
        rc = run_region(p, b, in, NULL, &j, threads);
    }
    *ref = samples ? gpu__a4d_norm_median(samples, m) : max;
    *eref = esamples ? gpu__a4d_norm_median(esamples, m) : 0;
    free(samples);
    free(esamples);
    return rc;
}

/* The references of the pair-difference surrogate times the margin
 * (adaptive4d.h: gpu__a4d_surrogate), or 0 where a call takes no cap. */
static int noise_caps(const gpu_adaptive4d_params *p, const gpu_a4d_bank *b, const gpu_volume *in,
                      int halo, size_t budget, double *ref_cap, double *eref_cap, int threads,
                      double span)
{
    *ref_cap = *eref_cap = 0;
    if (!gpu__a4d_caps_needed(p, in))
        return 0;
    gpu_volume sv;
    int rc = gpu__a4d_surrogate(in, &sv, threads);
    if (rc)
        return rc;
    /* The surrogate is one of the call's buffers: its pass gets what the
     * budget leaves beside it (0: no budget). */
    const size_t held = sizeof(float) * gpu_volume_count(&sv);
    const size_t left = !budget ? 0 : budget > held ? budget - held : 1;
    const int h = gpu__a4d_t_slab(sv.nt, halo, left, bytes_per_time_point(p, &sv));
    double ref, eref;
    rc = slab_reference(p, b, &sv, h, halo, &ref, &eref, threads, 0.0, span);
    gpu_volume_close(&sv);
    if (!rc && p->m_norm == GPU_A4D_NORM_NOISE)
        *ref_cap = GPU_A4D_NOISE_MARGIN * ref;
    if (!rc && p->static_sigma_t > 0)
        *eref_cap = GPU_A4D_NOISE_MARGIN * eref;
    return rc;
}

static int run(const gpu_adaptive4d_params *p, const gpu_a4d_bank *b, const gpu_volume *in,
               gpu_volume *out, int threads)
{
    const int halo = gpu__a4d_t_halo(p, b);
    const size_t budget = p->mem_budget ? p->mem_budget : default_budget();
    const int h = gpu__a4d_t_slab(in->nt, halo, budget, bytes_per_time_point(p, in));
    if (p->stats)
        p->stats->t_slabs = (in->nt + h - 1) / h;
    /* Progress: the noise caps' pass over the surrogate and the first pass
     * over the slabs compute tensor grids only, whose cost goes with the
     * time points (2 cores, 96x96x24, FFTW plans made: the caps' pass
     * 0.025, 0.055, 0.084 s for K = 2, 5, 8; the tensor grid 0.05, 0.125,
     * 0.31 s for nt = 4, 10, 24). */
    const double caps = gpu__a4d_caps_needed(p, in)
                            ? A4D_SHARE_TENSOR * gpu__a4d_surrogate_nt(in->nt) / in->nt
                            : 0.0,
                 first = h < in->nt ? A4D_SHARE_TENSOR : 0.0, all = caps + first + 1.0;
    double ref_cap, eref_cap;
    int rc = noise_caps(p, b, in, halo, budget, &ref_cap, &eref_cap, threads, caps / all);
    if (rc)
        return rc;
    const double base = (caps + first) / all, span = 1.0 / all;
    if (h >= in->nt) {
        region_job whole = {0,        in->nt, 0,    in->nt, -1,   -1,  ref_cap,
                            eref_cap, NULL,   NULL, NULL,   base, span};
        return run_region(p, b, in, out->data, &whole, threads);
    }
    double ref, eref;
    rc = slab_reference(p, b, in, h, halo, &ref, &eref, threads, caps / all, first / all);
    if (!rc) { /* after a failure the samples are partly unset: nothing to cap or log */
        ref = gpu__a4d_capped("tensor norm", ref, ref_cap);
        eref = gpu__a4d_capped("step 6 energy", eref, eref_cap);
    }
    size_t tp = (size_t)in->nx * in->ny * in->nz;
    float *buf = rc ? NULL : malloc(sizeof(float) * tp * (size_t)(h + 2 * halo));
    if (!rc && !buf)
        rc = -ENOMEM;
    for (int t0 = 0; t0 < in->nt && !rc; t0 += h) {
        int t1 = t0 + h < in->nt ? t0 + h : in->nt;
        region_job j = {t0 - halo < 0 ? 0 : t0 - halo,
                        t1 + halo > in->nt ? in->nt : t1 + halo,
                        t0,
                        t1,
                        ref,
                        eref,
                        0,
                        0,
                        NULL,
                        NULL,
                        NULL,
                        base + span * t0 / in->nt,
                        span * (t1 - t0) / in->nt};
        rc = run_region(p, b, in, buf, &j, threads);
        if (!rc)
            memcpy(out->data + tp * t0, buf + tp * (size_t)(t0 - j.r0),
                   sizeof(float) * tp * (size_t)(t1 - t0));
    }
    free(buf);
    return rc;
}

int gpu_adaptive4d_ref(const gpu_adaptive4d_params *p, const gpu_volume *in, gpu_volume *out,
                       const gpu_device *dev)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = check_call(p, in, out);
    if (rc)
        return rc;
    gpu_a4d_bank b;
    if ((rc = gpu__a4d_bank_make(p, GPU_A4D_BANK_ALL, &b)) != 0)
        return rc;
    if (p->stats)
        memset(p->stats, 0, sizeof *p->stats);
    rc = run(p, &b, in, out, threads_of(dev));
    gpu__a4d_bank_free(&b);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (p->stats) {
        p->stats->total_ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
    }
    return rc;
}
