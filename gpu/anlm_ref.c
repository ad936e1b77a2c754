/* CPU reference of adaptive non-local means; it defines the result that the
 * CUDA version must match (formulas in anlm.h). C11 + OpenMP.
 *
 * Per-offset formulation: for each offset d the squared differences
 * e(y) = (F(y) - F(y+d))^2 of a field F (the residual R for the noise sweep,
 * the input U for the weight sweep) are box-summed over the patch with
 * three separable passes, so a patch distance costs O(1) per voxel and
 * offset instead of |P|. The fields live on a mirrored copy with a halo of
 * S + r_P, so the inner loops have no border tests; sums are in double.
 * OpenMP threads take chunks of CHUNK planes and run all offsets of both
 * sweeps of a chunk alone (no barrier per offset); one thread owns each
 * output voxel, so no two threads write the same value, and the result does
 * not depend on the thread count.
 *
 * Memory: about 10 volumes of floats and doubles (mirrored fields,
 * accumulators) plus per-thread chunk buffers; meant for tests, the CPU
 * fallback and moderate sizes.
 * Any thread may call these functions.
 */
#include "gpu/anlm.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "gpu/nlm.h" /* gpu__mirror */

void gpu_anlm_params_default(gpu_anlm_params *p)
{
    memset(p, 0, sizeof *p);
    p->search_radius = 3;
    p->patch_radius = 1;
    p->patch_radius2 = 2;
    p->mix = 1;
    p->block_radius = 1;
    p->strength = 1.0f;
    p->mean_ratio = 0.95f;
    p->var_ratio = 0.5f;
    p->noise = GPU_ANLM_GAUSSIAN;
}

int gpu_anlm_check(const gpu_anlm_params *p, const gpu_volume *in, const gpu_volume *out)
{
    if (!p || !in || !out || !in->data || !out->data || in->data == out->data)
        return LDCT_EINPUT;
    if (p->search_radius < 1 || p->search_radius > GPU_ANLM_MAX_SEARCH)
        return LDCT_EINPUT;
    if (p->patch_radius < 0 || p->patch_radius > GPU_ANLM_MAX_PATCH)
        return LDCT_EINPUT;
    if (p->mix && (p->patch_radius2 < 0 || p->patch_radius2 > GPU_ANLM_MAX_PATCH))
        return LDCT_EINPUT;
    if (p->block_radius < 1 || p->block_radius > GPU_ANLM_MAX_BLOCK)
        return LDCT_EINPUT;
    if (!(p->strength > 0) || !(p->mean_ratio > 0 && p->mean_ratio <= 1) ||
        !(p->var_ratio > 0 && p->var_ratio <= 1))
        return LDCT_EINPUT;
    if (p->noise != GPU_ANLM_GAUSSIAN && p->noise != GPU_ANLM_RICIAN)
        return LDCT_EINPUT;
    if (in->nx < 1 || in->ny < 1 || in->nz < 1 || in->nt != 1 || !gpu_volume_same_shape(in, out))
        return LDCT_EINPUT;
    return 0;
}

void gpu__anlm_range_of(const gpu_volume *in, gpu__anlm_range *r)
{
    const long n = (long)gpu_volume_count(in);
    float mn = in->data[0], mx = in->data[0];
#pragma omp parallel for reduction(min : mn) reduction(max : mx) schedule(static)
    for (long i = 1; i < n; i++) {
        mn = in->data[i] < mn ? in->data[i] : mn;
        mx = in->data[i] > mx ? in->data[i] : mx;
    }
    gpu__anlm_range_from(mn, mx, r);
}

void gpu__anlm_range_from(float mn, float mx, gpu__anlm_range *r)
{
    double range = (double)mx - mn;
    double widen = range > 0 ? 1e-3 * range : fmax(1.0, 1e-3 * fabs((double)mx));
    r->lo = (float)(mn - widen);
    r->hi = (float)(mx + widen);
    double span = range > 0 ? range : widen;
    r->var_eps = (float)(1e-9 * span * span);
    r->s2_floor = (float)(1e-10 * span * span + 1e-30);
}

/* ---- shared state --------------------------------------------------------- */

typedef struct grid {
    int nx, ny, nz; /* the volume */
    int h;          /* halo of the mirrored fields */
    int px, py, pz; /* padded sizes */
} grid;

static size_t gidx(const grid *g, int x, int y, int z)
{
    return ((size_t)(z + g->h) * g->py + (size_t)(y + g->h)) * g->px + (size_t)(x + g->h);
}

static size_t vidx(const grid *g, int x, int y, int z)
{
    return ((size_t)z * g->ny + y) * g->nx + x;
}

/* Mirrored copy of an in-volume field (padded layout of g). */
static void pad_field(const grid *g, const float *src, float *dst)
{
#pragma omp parallel for schedule(static)
    for (int z = -g->h; z < g->nz + g->h; z++)
        for (int y = -g->h; y < g->ny + g->h; y++)
            for (int x = -g->h; x < g->nx + g->h; x++)
                dst[gidx(g, x, y, z)] = src[vidx(g, gpu__mirror(x, g->nx), gpu__mirror(y, g->ny),
                                                 gpu__mirror(z, g->nz))];
}

/* Local mean and variance over the box of radius rb (reflect-101). */
static void local_stats(const gpu_volume *in, int rb, float *mean, float *var)
{
    const grid g = {in->nx, in->ny, in->nz, 0, in->nx, in->ny, in->nz};
    const double nb = (double)(2 * rb + 1) * (2 * rb + 1) * (2 * rb + 1);
#pragma omp parallel for schedule(static)
    for (int z = 0; z < g.nz; z++)
        for (int y = 0; y < g.ny; y++)
            for (int x = 0; x < g.nx; x++) {
                double s = 0, ss = 0;
                for (int c = -rb; c <= rb; c++)
                    for (int b = -rb; b <= rb; b++)
                        for (int a = -rb; a <= rb; a++) {
                            double u =
                                in->data[vidx(&g, gpu__mirror(x + a, g.nx),
                                              gpu__mirror(y + b, g.ny), gpu__mirror(z + c, g.nz))];
                            s += u;
                            ss += u * u;
                        }
                double m = s / nb;
                double v = (ss - s * m) / (nb - 1.0);
                mean[vidx(&g, x, y, z)] = (float)m;
                var[vidx(&g, x, y, z)] = (float)(v > 0 ? v : 0);
            }
}

/* Per-thread scratch of a chunk of planes: box-sum buffers and distances. */
typedef struct scratch {
    double *t1, *t2, *dist, *erow;
    unsigned char *keep; /* one row of preselection results */
} scratch;

enum { CHUNK = 8 }; /* planes per task: the patch halo 2 r_P is paid per chunk */

/* D(x,d) of field f (padded) for the voxels of planes [z0, z1): box sums of
 * radius r over (f(y) - f(y+d))^2 (x, then y, then z, each in ascending
 * order), divided by the box size, into w->dist (chunk layout). Each
 * squared difference is formed once per row; the loops over x vectorise. */
static void patch_dist(const grid *g, const float *f, int dx, int dy, int dz, int r, int z0, int z1,
                       const scratch *w)
{
    const int ey = g->ny + 2 * r, ez = z1 - z0 + 2 * r, nx = g->nx, ny = g->ny, ex = nx + 2 * r;
    const long sd = ((long)dz * g->py + dy) * g->px + dx;
    const double inv = 1.0 / ((double)(2 * r + 1) * (2 * r + 1) * (2 * r + 1));
    double *restrict e = w->erow;
    for (int z = 0; z < ez; z++)
        for (int y = 0; y < ey; y++) {
            const float *ra = f + gidx(g, -r, y - r, z0 + z - r), *rb = ra + sd;
#pragma omp simd
            for (int i = 0; i < ex; i++) {
                double t = (double)ra[i] - rb[i];
                e[i] = t * t;
            }
            double *restrict o = w->t1 + ((size_t)z * ey + y) * nx;
#pragma omp simd
            for (int x = 0; x < nx; x++)
                o[x] = e[x];
            for (int k = 1; k <= 2 * r; k++)
#pragma omp simd
                for (int x = 0; x < nx; x++)
                    o[x] += e[x + k];
        }
    for (int z = 0; z < ez; z++)
        for (int y = 0; y < ny; y++) {
            double *restrict o = w->t2 + ((size_t)z * ny + y) * nx;
            const double *in = w->t1 + ((size_t)z * ey + y) * nx;
#pragma omp simd
            for (int x = 0; x < nx; x++)
                o[x] = in[x];
            for (int b = 1; b <= 2 * r; b++)
#pragma omp simd
                for (int x = 0; x < nx; x++)
                    o[x] += in[(size_t)b * nx + x];
        }
    for (int z = 0; z < z1 - z0; z++)
        for (int y = 0; y < ny; y++) {
            double *restrict o = w->dist + ((size_t)z * ny + y) * nx;
            const double *in = w->t2 + ((size_t)z * ny + y) * nx;
#pragma omp simd
            for (int x = 0; x < nx; x++)
                o[x] = in[x];
            for (int c = 1; c <= 2 * r; c++)
#pragma omp simd
                for (int x = 0; x < nx; x++)
                    o[x] += in[(size_t)c * ny * nx + x];
#pragma omp simd
            for (int x = 0; x < nx; x++)
                o[x] *= inv;
        }
}

/* Everything one pass needs: padded U, R, mean, variance; per-voxel state. */
typedef struct pass_ctx {
    grid g;
    gpu__anlm_range range;
    float mu, nu;
    int pmax, threads;
    float *u, *res, *mean, *var; /* padded (halo g.h) */
    float *vmean;                /* in-volume local mean (Rician theta) */
    double s2_floor;
    float *s2;                      /* adaptive sigma^2 (< 0: no offset kept) */
    double *acc_w, *acc_wg, *w_max; /* accumulators */
    double base, span;              /* this pass's share of the progress */
} pass_ctx;

static void ctx_free(pass_ctx *c)
{
    free(c->u), free(c->res), free(c->mean), free(c->var), free(c->vmean);
    free(c->s2), free(c->acc_w), free(c->acc_wg), free(c->w_max);
    memset(c, 0, sizeof *c);
}

/* Allocates and fills the padded fields for radii up to s + pmax. */
static int ctx_init(pass_ctx *c, const gpu_anlm_params *p, const gpu_volume *in, int pmax,
                    int threads)
{
    memset(c, 0, sizeof *c);
    grid *g = &c->g;
    g->nx = in->nx, g->ny = in->ny, g->nz = in->nz;
    g->h = p->search_radius + pmax;
    g->px = g->nx + 2 * g->h, g->py = g->ny + 2 * g->h, g->pz = g->nz + 2 * g->h;
    c->pmax = pmax, c->threads = threads;
    size_t n = gpu_volume_count(in), np = (size_t)g->px * g->py * g->pz;
    c->u = malloc(np * sizeof(float)), c->res = malloc(np * sizeof(float));
    c->mean = malloc(np * sizeof(float)), c->var = malloc(np * sizeof(float));
    c->vmean = malloc(n * sizeof(float)), c->s2 = malloc(n * sizeof(float));
    c->acc_w = malloc(n * sizeof(double)), c->acc_wg = malloc(n * sizeof(double));
    c->w_max = malloc(n * sizeof(double));
    float *vvar = malloc(n * sizeof(float)), *vres = malloc(n * sizeof(float));
    if (!c->u || !c->res || !c->mean || !c->var || !c->vmean || !c->s2 || !c->acc_w || !c->acc_wg ||
        !c->w_max || !vvar || !vres) {
        free(vvar), free(vres);
        ctx_free(c);
        return -ENOMEM;
    }
    gpu__anlm_range_of(in, &c->range);
    c->mu = p->mean_ratio, c->nu = p->var_ratio;
    c->s2_floor = c->range.s2_floor;
    local_stats(in, p->block_radius, c->vmean, vvar);
    for (size_t i = 0; i < n; i++)
        vres[i] = in->data[i] - c->vmean[i];
    pad_field(g, in->data, c->u);
    pad_field(g, vres, c->res);
    pad_field(g, c->vmean, c->mean);
    pad_field(g, vvar, c->var);
    free(vvar), free(vres);
    return 0;
}

typedef enum sweep { SWEEP_SIGMA, SWEEP_WEIGHTS } sweep;

/* keep[x] for one row of voxels and offset sd: gpu__anlm_keep written out
 * without branches so the loop vectorises (same comparisons, same result). */
static void keep_row(const pass_ctx *c, size_t pi, long sd, int nx, unsigned char *keep)
{
    const float lo = c->range.lo, hi = c->range.hi, eps = c->range.var_eps, mu = c->mu, nu = c->nu;
    const float *m = c->mean + pi, *v = c->var + pi;
#pragma omp simd
    for (int x = 0; x < nx; x++) {
        float a = m[x] - lo, b = m[x + sd] - lo, ai = hi - m[x], bi = hi - m[x + sd];
        float va = v[x] + eps, vb = v[x + sd] + eps;
        int mean_ok = ((a > mu * b) & (mu * a < b)) | ((ai > mu * bi) & (mu * ai < bi));
        keep[x] = (unsigned char)(mean_ok & (va > nu * vb) & (nu * va < vb));
    }
}

/* One offset of one sweep over planes [z0, z1): updates s2 (noise) or the
 * accumulators of those voxels. */
static void sweep_offset(pass_ctx *c, sweep which, int r, int dx, int dy, int dz, int z0, int z1,
                         const scratch *w, double str2, int rician)
{
    const grid *g = &c->g;
    patch_dist(g, which == SWEEP_SIGMA ? c->res : c->u, dx, dy, dz, r, z0, z1, w);
    const long sd = ((long)dz * g->py + dy) * g->px + dx;
    unsigned char *keep = w->keep;
    for (int z = z0; z < z1; z++)
        for (int y = 0; y < g->ny; y++) {
            const size_t pi = gidx(g, 0, y, z), vi = vidx(g, 0, y, z);
            const double *d = w->dist + (vi - vidx(g, 0, 0, z0));
            keep_row(c, pi, sd, g->nx, keep);
            if (which == SWEEP_SIGMA) {
                float *s2 = c->s2 + vi; /* +inf until an offset is kept */
#pragma omp simd
                for (int x = 0; x < g->nx; x++)
                    s2[x] = keep[x] && d[x] < s2[x] ? (float)d[x] : s2[x];
                continue;
            }
            for (int x = 0; x < g->nx; x++) {
                if (!keep[x])
                    continue;
                double h2 = str2 * fmax(c->s2[vi + x], c->s2_floor);
                if (d[x] > 3.0 * h2)
                    continue;
                double wt = exp(-d[x] / h2), uj = c->u[pi + x + sd];
                c->acc_w[vi + x] += wt;
                c->acc_wg[vi + x] += wt * (rician ? uj * uj : uj);
                c->w_max[vi + x] = wt > c->w_max[vi + x] ? wt : c->w_max[vi + x];
            }
        }
}

/* Both sweeps (or only the noise sweep) of one pass with patch radius r for
 * planes [z0, z1); s2 left negative where no offset was kept. */
static void chunk_sweeps(pass_ctx *c, const gpu_anlm_params *p, int r, int weights, int z0, int z1,
                         const scratch *w, gpu_progress_count *done)
{
    const grid *g = &c->g;
    const int S = p->search_radius, Sx = gpu__anlm_axis_radius(S, g->nx),
              Sy = gpu__anlm_axis_radius(S, g->ny), Sz = gpu__anlm_axis_radius(S, g->nz);
    const double str2 = (double)p->strength * p->strength;
    const size_t i0 = vidx(g, 0, 0, z0), i1 = vidx(g, 0, 0, z1);
    for (size_t i = i0; i < i1; i++) {
        c->s2[i] = INFINITY;
        c->acc_w[i] = c->acc_wg[i] = c->w_max[i] = 0;
    }
    for (int pass = 0; pass < (weights ? 2 : 1); pass++) {
        for (int dz = -Sz; dz <= Sz; dz++) {
            for (int dy = -Sy; dy <= Sy; dy++)
                for (int dx = -Sx; dx <= Sx; dx++)
                    if (dx || dy || dz)
                        sweep_offset(c, pass ? SWEEP_WEIGHTS : SWEEP_SIGMA, r, dx, dy, dz, z0, z1,
                                     w, str2, p->noise == GPU_ANLM_RICIAN);
            gpu_progress_add(done, 1); /* a plane of offsets (dz) */
        }
        if (pass == 0)
            for (size_t i = i0; i < i1; i++)
                c->s2[i] = isinf(c->s2[i]) ? -1.0f : c->s2[i];
    }
}

/* The sweeps of one pass, chunks of CHUNK planes spread over the threads;
 * each thread owns its chunk's voxels (no barrier inside a chunk). */
static int run_sweeps(pass_ctx *c, const gpu_anlm_params *p, int r, int weights)
{
    const grid *g = &c->g;
    const int nchunks = (g->nz + CHUNK - 1) / CHUNK;
    const size_t nt = (size_t)g->nx * (g->ny + 2 * c->pmax) * (CHUNK + 2 * c->pmax);
    int failed = 0;
    const int planes = 2 * gpu__anlm_axis_radius(p->search_radius, g->nz) + 1;
    gpu_progress_count done;
    gpu_progress_begin(&done, p->progress, c->base, c->span,
                       (long)nchunks * planes * (weights ? 2 : 1));
#pragma omp parallel num_threads(c->threads)
    {
        scratch w = {malloc(nt * sizeof(double)), malloc(nt * sizeof(double)),
                     malloc((size_t)g->nx * g->ny * CHUNK * sizeof(double)),
                     malloc((size_t)(g->nx + 2 * c->pmax) * sizeof(double)), malloc((size_t)g->nx)};
        int ok = w.t1 && w.t2 && w.dist && w.erow && w.keep;
        if (!ok) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(dynamic, 1)
        for (int k = 0; k < nchunks; k++) {
            int z0 = k * CHUNK, z1 = z0 + CHUNK < g->nz ? z0 + CHUNK : g->nz;
            if (ok)
                chunk_sweeps(c, p, r, weights, z0, z1, &w, &done);
        }
        free(w.t1), free(w.t2), free(w.dist), free(w.erow), free(w.keep);
    }
    if (!failed)
        gpu_progress_end(&done);
    return failed ? -ENOMEM : 0;
}

double gpu_anlm_rician_xi(double theta)
{
    /* xi = 2 + t^2 - pi/8 exp(-t^2/2) ((2 + t^2) I0(t^2/4) + t^2 I1(t^2/4))^2,
     * with the exponentially scaled Bessel functions (exp(-t^2/2) = exp(-2 z),
     * z = t^2/4), so large theta neither overflows nor cancels badly. */
    double t2 = theta * theta, z = t2 / 4.0;
    if (theta > 37.0)
        return 1.0; /* high SNR: Rician ~ Gaussian (xi -> 1 from below) */
    /* Power series of I0(z) and I1(z) (z <= 343 here, so the terms stay
     * below 1e150), scaled by exp(-z) afterwards. */
    double hz = z / 2.0, i0 = 0, i1 = 0, term0 = 1, term1 = hz;
    for (int k = 0; k < 400; k++) {
        if (k > 0) {
            term0 *= hz * hz / ((double)k * k);
            term1 *= hz * hz / ((double)k * (k + 1));
        }
        i0 += term0;
        i1 += term1;
        if (term0 < 1e-17 * i0 && term1 < 1e-17 * i1 && k > hz)
            break;
    }
    double e = exp(-z);
    double f = ((2.0 + t2) * i0 * e + t2 * i1 * e);
    double xi = 2.0 + t2 - 0.39269908169872414 * f * f;
    return xi > 1e-3 && xi <= 2.0 ? xi : (xi > 2.0 ? 2.0 : 1e-3);
}

double gpu_anlm_rician_theta(double r)
{
    const double rayleigh = 1.9130584248216162; /* sqrt(pi / (4 - pi)) */
    if (!(r > rayleigh))
        return 0.0;
    double t = r > 40.0 ? r : r - rayleigh; /* below the root: the iteration rises to it */
    for (int it = 0; it < 500; it++) {
        double g = gpu_anlm_rician_xi(t) * (1.0 + r * r) - 2.0;
        double next = g > 0 ? sqrt(g) : 0.0;
        if (fabs(next - t) < 1e-9 * (1.0 + t))
            return next;
        t = next;
    }
    return t;
}

void gpu__anlm_xi_table(float *t)
{
    for (int k = 0; k < GPU_ANLM_XI_N; k++) {
        double r = (double)k * GPU_ANLM_XI_RMAX / (GPU_ANLM_XI_N - 1);
        t[k] = (float)gpu_anlm_rician_xi(gpu_anlm_rician_theta(r));
    }
}

/* The mean of the box's k values at or below gpu__anlm_clip_limit. */
static float clipped_mean(const float *v, int k)
{
    double s = 0.0, t = 0.0;
    int n = 0;
    for (int i = 0; i < k; i++)
        s += v[i];
    const double limit = gpu__anlm_clip_limit(s, k);
    for (int i = 0; i < k; i++)
        if (v[i] <= limit)
            t += v[i], n++;
    return (float)(t / n);
}

/* Rician: the s2 map smoothed over a box of radius GPU_ANLM_RICIAN_REG
 * (mirror; voxels without an estimate skipped; outliers left out, see
 * gpu__anlm_clip_limit) and converted to the Gaussian variance under it. */
static void rician_sg2(const pass_ctx *c, float *sg2)
{
    const grid *g = &c->g;
    const int q = GPU_ANLM_RICIAN_REG;
    float xi[GPU_ANLM_XI_N];
    gpu__anlm_xi_table(xi);
#pragma omp parallel for schedule(static)
    for (int z = 0; z < g->nz; z++)
        for (int y = 0; y < g->ny; y++)
            for (int x = 0; x < g->nx; x++) {
                float box[(2 * GPU_ANLM_RICIAN_REG + 1) * (2 * GPU_ANLM_RICIAN_REG + 1) *
                          (2 * GPU_ANLM_RICIAN_REG + 1)];
                int k = 0;
                for (int cz = -q; cz <= q; cz++)
                    for (int b = -q; b <= q; b++)
                        for (int a = -q; a <= q; a++) {
                            float v =
                                c->s2[vidx(g, gpu__mirror(x + a, g->nx), gpu__mirror(y + b, g->ny),
                                           gpu__mirror(z + cz, g->nz))];
                            if (v >= 0)
                                box[k++] = v;
                        }
                float sr2 = k ? clipped_mean(box, k) : 0.0f, m = fabsf(c->vmean[vidx(g, x, y, z)]);
                sg2[vidx(g, x, y, z)] =
                    sr2 > 0 ? sr2 / gpu__anlm_xi_lookup(xi, m / sqrtf(sr2)) : 0.0f;
            }
}

/* The pass result (eq. 1 and the Rician correction) into out. */
static int finish_pass(pass_ctx *c, int rician, float *out)
{
    const grid *g = &c->g;
    size_t n = (size_t)g->nx * g->ny * g->nz;
    float *sg2 = NULL;
    if (rician) {
        sg2 = malloc(n * sizeof *sg2);
        if (!sg2)
            return -ENOMEM;
        rician_sg2(c, sg2);
    }
#pragma omp parallel for schedule(static)
    for (int z = 0; z < g->nz; z++)
        for (int y = 0; y < g->ny; y++)
            for (int x = 0; x < g->nx; x++) {
                size_t vi = vidx(g, x, y, z);
                double u = c->u[gidx(g, x, y, z)], w0 = c->w_max[vi] > 0 ? c->w_max[vi] : 1.0;
                double e = (w0 * (rician ? u * u : u) + c->acc_wg[vi]) / (w0 + c->acc_w[vi]);
                if (rician) {
                    double a = e - 2.0 * sg2[vi];
                    e = a > 0 ? sqrt(a) : 0.0;
                }
                out[vi] = (float)e;
            }
    free(sg2);
    return 0;
}

static int threads_of(const gpu_device *dev)
{
    return dev && dev->threads > 0 ? dev->threads : omp_get_max_threads();
}

int gpu_anlm_sigma_ref(const gpu_anlm_params *p, const gpu_volume *in, gpu_volume *sigma,
                       const gpu_device *dev)
{
    int rc = gpu_anlm_check(p, in, sigma);
    if (rc)
        return rc;
    int saved = omp_get_max_threads();
    omp_set_num_threads(threads_of(dev));
    pass_ctx c;
    rc = ctx_init(&c, p, in, p->patch_radius, threads_of(dev));
    c.span = 1.0;
    if (rc == 0 && (rc = run_sweeps(&c, p, p->patch_radius, 0)) == 0) {
        size_t n = gpu_volume_count(in);
        for (size_t i = 0; i < n; i++)
            sigma->data[i] = c.s2[i] > 0 ? sqrtf(c.s2[i]) : 0.0f;
    }
    ctx_free(&c);
    omp_set_num_threads(saved);
    return rc;
}

/* ---- sub-band mixing ------------------------------------------------------ */

/* Haar basis value of band bit hb at position k (0/1) of an axis of length
 * len (1 or 2): length 2: L = (1,1)/sqrt2, H = (1,-1)/sqrt2; length 1: L = 1
 * and no H (returns 0). */
static double haar(int hb, int k, int len)
{
    if (len == 1)
        return hb ? 0.0 : 1.0;
    return (hb && k) ? -0.70710678118654752 : 0.70710678118654752;
}

/* One 2x2x2 block (lengths lx, ly, lz): out = a + sum over the bands with
 * two or more high axes of <b - a, band> band, clamped to the block's range
 * of a and b. */
static void mix_block(const gpu_volume *a, const gpu_volume *b, gpu_volume *o, int x0, int y0,
                      int z0)
{
    const int lx = x0 + 1 < a->nx ? 2 : 1, ly = y0 + 1 < a->ny ? 2 : 1, lz = z0 + 1 < a->nz ? 2 : 1;
    double d[8] = {0}, add[8] = {0};
    size_t id[8];
    float lo = INFINITY, hi = -INFINITY;
    for (int k = 0; k < 8; k++) {
        int kx = k & 1, ky = k >> 1 & 1, kz = k >> 2;
        if (kx >= lx || ky >= ly || kz >= lz)
            continue;
        id[k] = ((size_t)(z0 + kz) * a->ny + (size_t)(y0 + ky)) * a->nx + (size_t)(x0 + kx);
        d[k] = (double)b->data[id[k]] - a->data[id[k]];
        lo = fminf(lo, fminf(a->data[id[k]], b->data[id[k]]));
        hi = fmaxf(hi, fmaxf(a->data[id[k]], b->data[id[k]]));
    }
    for (int band = 0; band < 8; band++) {
        int hx = band & 1, hy = band >> 1 & 1, hz = band >> 2;
        if (hx + hy + hz < 2)
            continue; /* LLL and single-axis bands stay from a */
        double coef = 0;
        for (int k = 0; k < 8; k++)
            coef += d[k] * haar(hx, k & 1, lx) * haar(hy, k >> 1 & 1, ly) * haar(hz, k >> 2, lz);
        for (int k = 0; k < 8; k++)
            add[k] += coef * haar(hx, k & 1, lx) * haar(hy, k >> 1 & 1, ly) * haar(hz, k >> 2, lz);
    }
    for (int k = 0; k < 8; k++) {
        int kx = k & 1, ky = k >> 1 & 1, kz = k >> 2;
        if (kx < lx && ky < ly && kz < lz)
            o->data[id[k]] = fminf(fmaxf((float)(a->data[id[k]] + add[k]), lo), hi);
    }
}

int gpu_anlm_mix_ref(const gpu_volume *a, const gpu_volume *b, gpu_volume *out)
{
    if (!a || !b || !out || !a->data || !b->data || !out->data || !gpu_volume_same_shape(a, b) ||
        !gpu_volume_same_shape(a, out) || a->nt != 1 || out->data == a->data ||
        out->data == b->data)
        return LDCT_EINPUT;
#pragma omp parallel for schedule(static)
    for (int z = 0; z < a->nz; z += 2)
        for (int y = 0; y < a->ny; y += 2)
            for (int x = 0; x < a->nx; x += 2)
                mix_block(a, b, out, x, y, z);
    return 0;
}

/* ---- the filter ----------------------------------------------------------- */

static int run_pass(pass_ctx *c, const gpu_anlm_params *p, int r, float *out)
{
    int rc = run_sweeps(c, p, r, 1);
    return rc ? rc : finish_pass(c, p->noise == GPU_ANLM_RICIAN, out);
}

int gpu_anlm_ref(const gpu_anlm_params *p, const gpu_volume *in, gpu_volume *out,
                 const gpu_device *dev)
{
    int rc = gpu_anlm_check(p, in, out);
    if (rc)
        return rc;
    int saved = omp_get_max_threads();
    omp_set_num_threads(threads_of(dev));
    int pmax = p->mix && p->patch_radius2 > p->patch_radius ? p->patch_radius2 : p->patch_radius;
    pass_ctx c;
    gpu_volume a = {0}, b = {0};
    rc = ctx_init(&c, p, in, pmax, threads_of(dev));
    if (rc)
        goto done;
    c.span = p->mix ? 0.5 : 1.0; /* the two passes cost about the same */
    if (!p->mix) {
        rc = run_pass(&c, p, p->patch_radius, out->data);
        goto done;
    }
    if ((rc = gpu_volume_init(&a, in->nx, in->ny, in->nz, 1)) != 0 ||
        (rc = gpu_volume_init(&b, in->nx, in->ny, in->nz, 1)) != 0)
        goto done;
    if ((rc = run_pass(&c, p, p->patch_radius, a.data)) != 0)
        goto done;
    c.base = 0.5;
    if ((rc = run_pass(&c, p, p->patch_radius2, b.data)) != 0)
        goto done;
    rc = gpu_anlm_mix_ref(&a, &b, out);
done:
    gpu_volume_close(&a);
    gpu_volume_close(&b);
    ctx_free(&c);
    omp_set_num_threads(saved);
    return rc;
}
