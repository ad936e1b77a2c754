/* Filter design of adaptive4d (see adaptive4d.h for the specification):
 * the frequency responses are sampled on an M^4 grid (M = 2K + 2 for
 * K^4 kernels), brought to the spatial domain by a separable inverse DFT
 * evaluated only at the K^4 taps (window method, rectangular window), made
 * exactly odd or even, and the even zero-DC filters get their sum removed
 * (as a smooth bump, see remove_dc) so that flat data gives exactly zero. The realized
 * response (forward DFT of the taps on the same grid) is compared with the
 * specification; the worst relative L2 error is kept in the bank.
 * Pure functions of the parameters; the last design is cached (see
 * cache_get). Any thread.
 */
#include <complex.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "gpu/adaptive4d.h"

typedef double complex cplx;

int gpu__a4d_tidx(int i, int j)
{
    static const int idx[4][4] = {{0, 1, 2, 3}, {1, 4, 5, 6}, {2, 5, 7, 8}, {3, 6, 8, 9}};
    return idx[i][j];
}

int gpu__a4d_gauss_taps(float sigma, float *taps)
{
    int r = (int)ceil(3.0 * sigma);
    if (r > GPU_A4D_MAX_SIZE / 2)
        r = GPU_A4D_MAX_SIZE / 2;
    if (r < 1)
        r = 1;
    double sum = 0;
    for (int j = -r; j <= r; j++)
        sum += exp(-(double)j * j / (2.0 * sigma * sigma));
    for (int j = -r; j <= r; j++)
        taps[j + r] = (float)(exp(-(double)j * j / (2.0 * sigma * sigma)) / sum);
    return r;
}

/* dst = transform of src along `axis`: dst[..b..] = sum_a E[b*A+a] src[..a..],
 * where src has dims d (d[axis] = A) and dst the same dims with B there. */
static void axis_transform(const cplx *src, cplx *dst, const int d[4], int axis, int B,
                           const cplx *E)
{
    long inner = 1, outer = 1;
    for (int i = 0; i < axis; i++)
        inner *= d[i];
    for (int i = axis + 1; i < 4; i++)
        outer *= d[i];
    const int A = d[axis];
#pragma omp parallel for collapse(2) schedule(static)
    for (long o = 0; o < outer; o++)
        for (int b = 0; b < B; b++)
            for (long in = 0; in < inner; in++) {
                cplx acc = 0;
                for (int a = 0; a < A; a++)
                    acc += E[b * A + a] * src[(o * A + a) * inner + in];
                dst[(o * B + b) * inner + in] = acc;
            }
}

/* Separable 4D transform from n_src^4 to n_dst^4 with the matrix E
 * (n_dst x n_src), using two scratch buffers of n_src^4 elements. */
static void transform4(const cplx *src, cplx *dst, int n_src, int n_dst, const cplx *E, cplx *s1,
                       cplx *s2)
{
    int d[4] = {n_src, n_src, n_src, n_src};
    const cplx *cur = src;
    cplx *bufs[2] = {s1, s2};
    for (int axis = 0; axis < 4; axis++) {
        cplx *next = axis == 3 ? dst : bufs[axis & 1];
        axis_transform(cur, next, d, axis, n_dst, E);
        d[axis] = n_dst;
        cur = next;
    }
}

/* One filter specification: frequency response at u (4 components). */
typedef struct spec {
    int kind; /* 0 odd monomial, 1 even monomial, 2 highpass */
    int n, m; /* axes (kind 0: n; kind 1: n, m) */
    const double *dir;
    double rho0, bw;
    const float *lp, *lp_t;
    int lp_r, lp_t_r;
    double t_scale; /* highpass: u_t counts t_scale times in the direction term */
} spec;

static double lognormal(double rho, double rho0, double bw)
{
    if (rho <= 0)
        return 0;
    double l = log(rho / rho0);
    return exp(-4.0 * l * l / (bw * bw * log(2.0)));
}

/* 1D frequency response of the lowpass taps at u. */
static double lp_1d(const float *taps, int r, double u)
{
    double a = 0;
    for (int j = -r; j <= r; j++)
        a += taps[j + r] * cos(u * j);
    return a;
}

/* Specified response at u; g is the lowpass response there (highpass only). */
static double response(const spec *s, const double u[4], double g)
{
    double rho2 = u[0] * u[0] + u[1] * u[1] + u[2] * u[2] + u[3] * u[3];
    if (rho2 <= 0)
        return 0;
    double rho = sqrt(rho2);
    if (s->kind == 0)
        return lognormal(rho, s->rho0, s->bw) * u[s->n] / rho;
    if (s->kind == 1)
        return lognormal(rho, s->rho0, s->bw) * u[s->n] * u[s->m] / rho2;
    const double w[4] = {u[0], u[1], u[2], u[3] * s->t_scale};
    double p = 0;
    for (int d = 0; d < 4; d++)
        p += w[d] * s->dir[d];
    return (1.0 - g) * p * p / (rho2 + w[3] * w[3] - u[3] * u[3]);
}

typedef struct grid {
    int M, K, r;
    cplx *inv, *fwd;       /* K x M and M x K DFT matrices */
    cplx *H, *h, *s1, *s2; /* M^4, K^4, M^4, M^4 */
} grid;

static void grid_free(grid *g)
{
    free(g->inv);
    free(g->fwd);
    free(g->H);
    free(g->h);
    free(g->s1);
    free(g->s2);
}

static int grid_make(grid *g, int K)
{
    memset(g, 0, sizeof *g);
    g->K = K;
    g->r = K / 2;
    g->M = 2 * K + 2;
    const size_t M4 = (size_t)g->M * g->M * g->M * g->M;
    g->inv = malloc(sizeof(cplx) * (size_t)K * g->M);
    g->fwd = malloc(sizeof(cplx) * (size_t)K * g->M);
    g->H = malloc(sizeof(cplx) * M4);
    g->h = malloc(sizeof(cplx) * (size_t)K * K * K * K);
    g->s1 = malloc(sizeof(cplx) * M4);
    g->s2 = malloc(sizeof(cplx) * M4);
    if (!g->inv || !g->fwd || !g->H || !g->h || !g->s1 || !g->s2) {
        grid_free(g);
        return -ENOMEM;
    }
    for (int j = 0; j < K; j++)
        for (int m = 0; m < g->M; m++) {
            double u = 2.0 * M_PI * (m - g->M / 2) / g->M;
            g->inv[j * g->M + m] = cexp(I * u * (j - g->r)) / g->M;
            g->fwd[m * K + j] = cexp(-I * u * (j - g->r));
        }
    return 0;
}

static void sample_spec(const grid *g, const spec *s)
{
    const int M = g->M;
    double g1[2 * GPU_A4D_MAX_SIZE + 2], gt[2 * GPU_A4D_MAX_SIZE + 2];
    for (int m = 0; m < M; m++) {
        double u = 2.0 * M_PI * (m - M / 2) / M;
        g1[m] = s->kind == 2 ? lp_1d(s->lp, s->lp_r, u) : 0;
        gt[m] = s->kind == 2 ? lp_1d(s->lp_t, s->lp_t_r, u) : 0;
    }
#pragma omp parallel for schedule(static)
    for (long i = 0; i < (long)M * M * M * M; i++) {
        long k = i;
        double u[4], gl = 1;
        for (int d = 0; d < 4; d++) {
            u[d] = 2.0 * M_PI * ((int)(k % M) - M / 2) / M;
            gl *= d < 3 ? g1[k % M] : gt[k % M];
            k /= M;
        }
        g->H[i] = response(s, u, gl);
    }
}

/* Removes the sum of the taps as a smooth bump (a Gaussian of sigma 1,
 * normalized over the box): the truncated tails of the even responses
 * (u_n^2 / rho^2 decays only like |j|^-4) leave a DC error, and taking it out
 * at the centre tap alone would shift the whole response by a constant;
 * the bump confines the correction to low frequencies. */
static void remove_dc(const grid *g, float *w)
{
    const int K = g->K, r = g->r;
    const long n = (long)K * K * K * K;
    double sum = 0, bsum = 0;
    for (long i = 0; i < n; i++)
        sum += w[i];
    for (int pass = 0; pass < 2; pass++)
        for (long i = 0; i < n; i++) {
            long k = i;
            double d2 = 0;
            for (int a = 0; a < 4; a++, k /= K)
                d2 += (double)(k % K - r) * (k % K - r);
            double bump = exp(-0.5 * d2);
            if (pass == 0)
                bsum += bump;
            else
                w[i] -= (float)(sum * bump / bsum);
        }
}

/* Takes the odd (imaginary) or even (real) part of g->h into w, exactly
 * antisymmetric or symmetric, with zero sum for the even ones. */
static void extract_taps(const grid *g, int odd, float *w)
{
    const long n = (long)g->K * g->K * g->K * g->K;
    for (long i = 0; i < n; i++) {
        double a = odd ? cimag(g->h[i]) : creal(g->h[i]);
        double b = odd ? cimag(g->h[n - 1 - i]) : creal(g->h[n - 1 - i]);
        w[i] = (float)(odd ? 0.5 * (a - b) : 0.5 * (a + b));
    }
    if (!odd)
        remove_dc(g, w);
}

/* Relative L2 error of the realized response of taps w against g->H. */
static double design_error(const grid *g, int odd, const float *w)
{
    const long n = (long)g->K * g->K * g->K * g->K, M4 = (long)g->M * g->M * g->M * g->M;
    for (long i = 0; i < n; i++)
        g->h[i] = odd ? I * w[i] : w[i];
    /* Intermediates hold at most M^3 K < M^4 / 2 elements (K < M / 2), so
     * the two halves of s2 serve as scratch. */
    transform4(g->h, g->s1, g->K, g->M, g->fwd, g->s2, g->s2 + M4 / 2);
    double num = 0, den = 0;
    for (long i = 0; i < M4; i++) {
        num += cabs(g->s1[i] - g->H[i]) * cabs(g->s1[i] - g->H[i]);
        den += cabs(g->H[i]) * cabs(g->H[i]);
    }
    return den > 0 ? sqrt(num / den) : 0;
}

/* Designs one kernel into w; returns its design error. */
static double design(grid *g, const spec *s, float *w)
{
    const int odd = s->kind == 0;
    sample_spec(g, s);
    transform4(g->H, g->h, g->M, g->K, g->inv, g->s1, g->s2);
    extract_taps(g, odd, w);
    return design_error(g, odd, w);
}

/* Directions of the highpass filters: the 4 axes and the 6 diagonals
 * (e_i + e_j)/sqrt 2; their outer products span the symmetric 4x4 matrices,
 * so the dual basis exists (the set need not be even: the combination is
 * exact by construction). */
static void make_dirs(gpu_a4d_bank *b)
{
    int k = 0;
    memset(b->dirs, 0, sizeof b->dirs);
    for (int i = 0; i < 4; i++)
        b->dirs[k++][i] = 1.0;
    for (int i = 0; i < 4; i++)
        for (int j = i + 1; j < 4; j++, k++)
            b->dirs[k][i] = b->dirs[k][j] = sqrt(0.5);
}

/* Gauss-Jordan inverse of the 10x10 Gram matrix (n_k . n_l)^2. */
static int make_dual(gpu_a4d_bank *b)
{
    enum { N = GPU_A4D_NHP };
    double a[N][2 * N];
    for (int k = 0; k < N; k++)
        for (int l = 0; l < N; l++) {
            double d = 0;
            for (int i = 0; i < 4; i++)
                d += b->dirs[k][i] * b->dirs[l][i];
            a[k][l] = d * d;
            a[k][N + l] = k == l;
        }
    for (int c = 0; c < N; c++) {
        int piv = c;
        for (int r = c + 1; r < N; r++)
            if (fabs(a[r][c]) > fabs(a[piv][c]))
                piv = r;
        if (fabs(a[piv][c]) < 1e-12)
            return LDCT_EINPUT;
        for (int j = 0; j < 2 * N; j++) {
            double t = a[c][j];
            a[c][j] = a[piv][j];
            a[piv][j] = t;
        }
        double inv = 1.0 / a[c][c];
        for (int j = 0; j < 2 * N; j++)
            a[c][j] *= inv;
        for (int r = 0; r < N; r++)
            if (r != c) {
                double f = a[r][c];
                for (int j = 0; j < 2 * N; j++)
                    a[r][j] -= f * a[c][j];
            }
    }
    for (int k = 0; k < N; k++)
        for (int l = 0; l < N; l++)
            b->dual[k][l] = a[k][N + l];
    return 0;
}

static int design_mono(const gpu_adaptive4d_params *p, gpu_a4d_bank *b)
{
    grid g;
    const int K = p->mono_size;
    const long n = (long)K * K * K * K;
    int rc = grid_make(&g, K);
    for (int f = 0; !rc && f < GPU_A4D_NMONO; f++) {
        spec s = {f < 4 ? 0 : 1, 0, 0, NULL, p->mono_center, p->mono_bandwidth, NULL,
                  NULL,          0, 0, 1};
        if (f < 4)
            s.n = f;
        else
            for (int i = 0; i < 4; i++)
                for (int j = i; j < 4; j++)
                    if (4 + gpu__a4d_tidx(i, j) == f)
                        s.n = i, s.m = j;
        double e = design(&g, &s, b->mono + f * n);
        if (e > b->mono_err)
            b->mono_err = e;
    }
    if (!rc)
        grid_free(&g);
    return rc;
}

static int design_hp(const gpu_adaptive4d_params *p, gpu_a4d_bank *b)
{
    grid g;
    const int K = b->recon_size;
    const long n = (long)K * K * K * K;
    int rc = grid_make(&g, K);
    for (int k = 0; !rc && k < GPU_A4D_NHP; k++) {
        spec s = {2,         0, 0, b->dirs[k], 0, 0, b->lp, b->lp_t, b->lp_radius, b->lp_t_radius,
                  p->t_scale};
        double e = design(&g, &s, b->hp + k * n);
        if (e > b->hp_err)
            b->hp_err = e;
    }
    if (!rc)
        grid_free(&g);
    return rc;
}

/* ---- cache of the last design --------------------------------------------- */

/* The design depends on these parameters only, and a daemon filters series
 * after series with the same ones: the last bank is kept (copied in and
 * out under a mutex) so that only the first call pays the design. */
typedef struct design_key {
    int mono_size, recon_size, parts;
    float mono_center, mono_bandwidth, lp_sigma, lp_sigma_t, t_scale;
} design_key;

static pthread_mutex_t s_cache_lock = PTHREAD_MUTEX_INITIALIZER;
static design_key s_cache_key;
static gpu_a4d_bank s_cache;
static int s_cache_valid;

static design_key key_of(const gpu_adaptive4d_params *p, int parts)
{
    design_key k;
    memset(&k, 0, sizeof k); /* padding too: keys are compared with memcmp */
    k.mono_size = p->mono_size;
    k.recon_size = p->recon_size;
    k.parts = parts;
    k.mono_center = p->mono_center;
    k.mono_bandwidth = p->mono_bandwidth;
    k.lp_sigma = p->lp_sigma;
    k.lp_sigma_t = p->lp_sigma_t;
    k.t_scale = p->t_scale;
    return k;
}

static size_t taps(int size)
{
    return (size_t)size * size * size * size;
}

/* dst = a deep copy of src (dst's kernel arrays allocated here). */
static int bank_copy(gpu_a4d_bank *dst, const gpu_a4d_bank *src)
{
    *dst = *src;
    dst->mono = src->mono ? malloc(sizeof(float) * taps(src->mono_size) * GPU_A4D_NMONO) : NULL;
    dst->hp = src->hp ? malloc(sizeof(float) * taps(src->recon_size) * GPU_A4D_NHP) : NULL;
    if ((src->mono && !dst->mono) || (src->hp && !dst->hp)) {
        gpu__a4d_bank_free(dst);
        return -ENOMEM;
    }
    if (src->mono)
        memcpy(dst->mono, src->mono, sizeof(float) * taps(src->mono_size) * GPU_A4D_NMONO);
    if (src->hp)
        memcpy(dst->hp, src->hp, sizeof(float) * taps(src->recon_size) * GPU_A4D_NHP);
    return 0;
}

static int cache_get(const design_key *k, gpu_a4d_bank *b)
{
    int rc = 1;
    pthread_mutex_lock(&s_cache_lock);
    if (s_cache_valid && memcmp(k, &s_cache_key, sizeof *k) == 0)
        rc = bank_copy(b, &s_cache);
    pthread_mutex_unlock(&s_cache_lock);
    return rc; /* 0 hit, 1 miss, -ENOMEM */
}

static void cache_put(const design_key *k, const gpu_a4d_bank *b)
{
    pthread_mutex_lock(&s_cache_lock);
    gpu__a4d_bank_free(&s_cache);
    s_cache_valid = bank_copy(&s_cache, b) == 0;
    s_cache_key = *k;
    pthread_mutex_unlock(&s_cache_lock);
}

static int bank_design(const gpu_adaptive4d_params *p, int parts, gpu_a4d_bank *b);

int gpu__a4d_bank_make(const gpu_adaptive4d_params *p, int parts, gpu_a4d_bank *b)
{
    memset(b, 0, sizeof *b);
    int rc = gpu_adaptive4d_params_check(p);
    if (rc)
        return rc;
    const design_key k = key_of(p, parts);
    if ((rc = cache_get(&k, b)) <= 0)
        return rc;
    if ((rc = bank_design(p, parts, b)) == 0)
        cache_put(&k, b);
    return rc;
}

static int bank_design(const gpu_adaptive4d_params *p, int parts, gpu_a4d_bank *b)
{
    int rc = 0;
    const size_t km = (size_t)p->mono_size * p->mono_size * p->mono_size * p->mono_size;
    const size_t kr = (size_t)p->recon_size * p->recon_size * p->recon_size * p->recon_size;
    b->mono_size = p->mono_size;
    b->recon_size = p->recon_size;
    b->mono = parts & GPU_A4D_BANK_MONO ? malloc(sizeof(float) * km * GPU_A4D_NMONO) : NULL;
    b->hp = parts & GPU_A4D_BANK_RECON ? malloc(sizeof(float) * kr * GPU_A4D_NHP) : NULL;
    if ((parts & GPU_A4D_BANK_MONO && !b->mono) || (parts & GPU_A4D_BANK_RECON && !b->hp)) {
        gpu__a4d_bank_free(b);
        return -ENOMEM;
    }
    b->lp_radius = gpu__a4d_gauss_taps(p->lp_sigma, b->lp);
    b->lp_t_radius = gpu__a4d_gauss_taps(p->lp_sigma_t, b->lp_t);
    make_dirs(b);
    rc = make_dual(b);
    if (!rc && (parts & GPU_A4D_BANK_MONO))
        rc = design_mono(p, b);
    if (!rc && (parts & GPU_A4D_BANK_RECON))
        rc = design_hp(p, b);
    if (rc)
        gpu__a4d_bank_free(b);
    return rc;
}

void gpu__a4d_bank_free(gpu_a4d_bank *b)
{
    free(b->mono);
    free(b->hp);
    b->mono = b->hp = NULL;
}
