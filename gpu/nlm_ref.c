/* CPU reference of non-local means (2D and 3D); it defines the result that
 * the CUDA versions must match (see nlm.h for the formula). C11 + OpenMP.
 *
 * Per-offset formulation: for each offset d of half the search window, the
 * squared differences (U(o) - U(o+d))^2 of a whole plane are summed over the
 * patch separably (x: direct 2P+1 taps, vectorised; y: running sum down the
 * rows; z: a ring of 2P+1 plane sums), giving D(o,d) for every origin o of
 * the plane. Because D(o,d) = D(o+d,-d), one weight serves both voxels of a
 * pair: o gets w*U(o+d) and o+d gets w*U(o). Origins therefore cover the
 * union of the chunk and the chunk shifted by -d.
 *
 * The volume is cut into chunks of z planes (3D) or slices (2D); each
 * OpenMP thread owns a chunk's accumulators, so no two threads write the
 * same voxel. Each chunk works on its own mirrored copy of the input with a
 * halo of S+P, so inner loops have no border tests.
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

void gpu_nlm_params_default(gpu_nlm_params *p)
{
    memset(p, 0, sizeof *p);
    p->search_radius = 5;
    p->patch_radius = 2;
    p->h = 0;
    p->h_auto = 1;
    p->strength = 1.0f;
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

int gpu_noise_sigma(const gpu_volume *in, double *sigma)
{
    if (!in || !in->data || in->nx < 3 || in->ny < 3 || !sigma)
        return LDCT_EINPUT;
    int nx = in->nx, ny = in->ny;
    size_t slices = (size_t)in->nz * (size_t)in->nt;
    size_t per = (size_t)(nx - 2) * (size_t)(ny - 2);
    size_t total = per * slices;
    /* Sample at most ~4M responses on a regular stride: enough for a median. */
    size_t stride = total > 4000000 ? total / 4000000 + 1 : 1;
    size_t n = (total + stride - 1) / stride;
    float *r = malloc(n * sizeof *r);
    if (!r)
        return -ENOMEM;
    size_t m = 0;
    for (size_t idx = 0; idx < total && m < n; idx += stride) {
        size_t s = idx / per, rem = idx % per;
        int y = 1 + (int)(rem / (size_t)(nx - 2)), x = 1 + (int)(rem % (size_t)(nx - 2));
        const float *a = in->data + s * (size_t)nx * (size_t)ny + (size_t)y * (size_t)nx + x;
        /* Immerkaer's mask [1 -2 1; -2 4 -2; 1 -2 1]: a difference of two
         * Laplacians that cancels smooth (up to quadratic) structure. */
        float v = a[-nx - 1] - 2 * a[-nx] + a[-nx + 1] - 2 * a[-1] + 4 * a[0] - 2 * a[1] +
                  a[nx - 1] - 2 * a[nx] + a[nx + 1];
        r[m++] = fabsf(v);
    }
    float med = select_kth(r, m, m / 2);
    free(r);
    /* The mask's coefficients have squared norm 36, so L ~ N(0, 36 sigma^2)
     * for white noise; median|L| = 0.6745 * 6 sigma. */
    *sigma = 1.482602218505602 * med / 6.0;
    return 0;
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
    double v = p->strength * sqrt(2.0) * sigma;
    if (!(v > 1e-6)) {
        log_debug("nlm: estimated noise %.3g is ~0; using h = 1e-3", sigma);
        v = 1e-3;
    }
    *h = (float)v;
    return 0;
}

/* ---- the per-offset core ------------------------------------------------ */

typedef struct core {
    int nx, ny, nz; /* frame (2D: one slice, nz = 1) */
    int s[3], p[3], r[3];
    float g[3][2 * GPU_NLM_MAX_PATCH + 1];
    int box;       /* 1: unweighted patch (running sums allowed) */
    float k;       /* log2(e) / h^2 (times the box normalisation when box) */
    size_t ws_len; /* floats of workspace per thread */
} core;

/* exp2(-t * k) for t >= 0 over an array, vectorisable (Cephes exp2f
 * polynomial, relative error ~2e-7; results below 2^-126 flush to about
 * 1e-38). The power of two is built in an int array and reinterpreted in a
 * separate pass, which GCC vectorises where a per-element union does not.
 * ebits must hold n ints. */
static void exp2_neg(float *restrict w, const float *restrict t, int n, float k,
                     int32_t *restrict ebits)
{
#pragma omp simd
    for (int i = 0; i < n; i++) {
        /* min(y, 126) without a branch: y - relu(y - 126), exact below 126. */
        float y = t[i] * k, z = y - 126.0f;
        float x = -(y - 0.5f * (z + fabsf(z)));
        int e = (int)(x - 0.5f); /* x <= 0: rounds to nearest, f in [-0.5, 0.5] */
        float f = x - (float)e;
        float p = 1.535336188319500e-4f;
        p = p * f + 1.339887440266574e-3f;
        p = p * f + 9.618437357674640e-3f;
        p = p * f + 5.550332471162809e-2f;
        p = p * f + 2.402264791363012e-1f;
        p = p * f + 6.931472028550421e-1f;
        p = p * f + 1.0f;
        w[i] = p;
        ebits[i] = (e + 127) << 23;
    }
    const float *scale = (const float *)(const void *)ebits;
#pragma omp simd
    for (int i = 0; i < n; i++)
        w[i] *= scale[i];
}

/* Runs the core on output planes [z0, z1) of one frame. ws: workspace. */
/* Cloned for AVX2+FMA (picked at load time by the CPU) and plain x86-64. */
__attribute__((target_clones("avx2", "default"))) static void
chunk_run(const core *c, const float *src, float *dst, int z0, int z1, float *ws)
{
    const int nx = c->nx, ny = c->ny, nz = c->nz;
    const int sx = c->s[0], sy = c->s[1], sz = c->s[2];
    const int px = c->p[0], py = c->p[1], pz = c->p[2];
    const int rx = c->r[0], ry = c->r[1], rz = c->r[2];
    const int L = z1 - z0;
    const int PX = nx + 2 * rx, PY = ny + 2 * ry, PZ = L + 2 * rz;
    const size_t pplane = (size_t)PX * PY, oplane = (size_t)nx * ny;
    const int bxmax = nx + sx, bymax = ny + sy;
    const size_t bplane = (size_t)bxmax * bymax;
    const int nring = 2 * pz + 1;

    float *U = ws;                                       /* padded input, PX*PY*PZ */
    float *accw = U + pplane * PZ;                       /* nx*ny*L */
    float *accv = accw + oplane * L;                     /* nx*ny*L */
    float *ring = accv + oplane * L;                     /* nring planes of bplane */
    float *xs = ring + bplane * nring;                   /* (bymax + 2py) * bxmax */
    float *drow = xs + (size_t)(bymax + 2 * py) * bxmax; /* bxmax + 2px */
    float *trow = drow + bxmax + 2 * px;                 /* bxmax */
    float *wrow = trow + bxmax;                          /* bxmax */
    float *ysum = wrow + bxmax;                          /* bxmax */
    int32_t *ebits = (int32_t *)(void *)(ysum + bxmax);  /* bxmax */

    /* Mirrored copy of the chunk with its halo. */
    for (int zz = 0; zz < PZ; zz++) {
        int gz = gpu__mirror(z0 - rz + zz, nz);
        for (int yy = 0; yy < PY; yy++) {
            int gy = gpu__mirror(yy - ry, ny);
            const float *srow = src + (size_t)gz * oplane + (size_t)gy * nx;
            float *urow = U + zz * pplane + (size_t)yy * PX;
            for (int xx = 0; xx < PX; xx++)
                urow[xx] = srow[gpu__mirror(xx - rx, nx)];
        }
    }
    /* Centre offset: weight 1. */
    for (int z = 0; z < L; z++)
        for (int y = 0; y < ny; y++) {
            const float *urow = U + (size_t)(z + rz) * pplane + (size_t)(y + ry) * PX + rx;
            float *aw = accw + (size_t)z * oplane + (size_t)y * nx;
            float *av = accv + (size_t)z * oplane + (size_t)y * nx;
            for (int x = 0; x < nx; x++) {
                aw[x] = 1.0f;
                av[x] = urow[x];
            }
        }

    const float *gx = c->g[0], *gy = c->g[1], *gz = c->g[2];
    for (int dz = 0; dz <= sz; dz++)
        for (int dy = -sy; dy <= sy; dy++)
            for (int dx = -sx; dx <= sx; dx++) {
                if (!(dz > 0 || (dz == 0 && dy > 0) || (dz == 0 && dy == 0 && dx > 0)))
                    continue;
                const int ox0 = dx > 0 ? -dx : 0, oy0 = dy > 0 ? -dy : 0;
                const int bx = nx + abs(dx), by = ny + abs(dy);
                const int oz0 = z0 - dz, oz1 = z1; /* origin planes */
                for (int q = oz0 - pz; q < oz1 + pz; q++) {
                    /* Plane sum of plane q into its ring slot. */
                    float *ps = ring + (size_t)((q - (oz0 - pz)) % nring) * bplane;
                    const float *ua = U + (size_t)(q - z0 + rz) * pplane;
                    const float *ub = U + (size_t)(q + dz - z0 + rz) * pplane;
                    for (int yr = 0; yr < by + 2 * py; yr++) {
                        int y = oy0 - py + yr;
                        const float *a = ua + (size_t)(y + ry) * PX + (ox0 - px + rx);
                        const float *b = ub + (size_t)(y + dy + ry) * PX + (ox0 - px + rx + dx);
                        int n = bx + 2 * px;
#pragma omp simd
                        for (int x = 0; x < n; x++) {
                            float t = a[x] - b[x];
                            drow[x] = t * t;
                        }
                        float *xo = xs + (size_t)yr * bxmax;
                        if (c->box) {
#pragma omp simd
                            for (int x = 0; x < bx; x++)
                                xo[x] = drow[x];
                            for (int k = 1; k <= 2 * px; k++) {
                                const float *dk = drow + k;
#pragma omp simd
                                for (int x = 0; x < bx; x++)
                                    xo[x] += dk[x];
                            }
                        } else {
#pragma omp simd
                            for (int x = 0; x < bx; x++)
                                xo[x] = gx[0] * drow[x];
                            for (int k = 1; k <= 2 * px; k++) {
                                const float *dk = drow + k;
                                float gk = gx[k];
#pragma omp simd
                                for (int x = 0; x < bx; x++)
                                    xo[x] += gk * dk[x];
                            }
                        }
                    }
                    if (c->box) {
                        /* Running sum down the rows. */
                        for (int x = 0; x < bx; x++)
                            ysum[x] = 0;
                        for (int k = 0; k < 2 * py; k++) {
                            const float *xi = xs + (size_t)k * bxmax;
#pragma omp simd
                            for (int x = 0; x < bx; x++)
                                ysum[x] += xi[x];
                        }
                        for (int y = 0; y < by; y++) {
                            const float *xin = xs + (size_t)(y + 2 * py) * bxmax;
                            const float *xout = xs + (size_t)y * bxmax;
                            float *po = ps + (size_t)y * bxmax;
#pragma omp simd
                            for (int x = 0; x < bx; x++) {
                                float s = ysum[x] + xin[x];
                                po[x] = s;
                                ysum[x] = s - xout[x];
                            }
                        }
                    } else {
                        for (int y = 0; y < by; y++) {
                            float *po = ps + (size_t)y * bxmax;
                            for (int x = 0; x < bx; x++)
                                po[x] = 0;
                            for (int k = 0; k <= 2 * py; k++) {
                                const float *xi = xs + (size_t)(y + k) * bxmax;
                                float gk = gy[k];
#pragma omp simd
                                for (int x = 0; x < bx; x++)
                                    po[x] += gk * xi[x];
                            }
                        }
                    }
                    if (q < oz0 + pz)
                        continue;
                    /* Origin plane zo = q - pz is complete: weights and pairs. */
                    const int zo = q - pz;
                    const int own = zo >= z0 && zo < z1, sym = zo + dz >= z0 && zo + dz < z1;
                    for (int y = 0; y < by; y++) {
                        const int oy = oy0 + y;
                        int n = bx;
                        if (nring == 1) {
                            const float *s0 = ring + (size_t)y * bxmax;
                            for (int x = 0; x < n; x++)
                                trow[x] = s0[x];
                        } else {
                            for (int x = 0; x < n; x++)
                                trow[x] = 0;
                            for (int k = 0; k < nring; k++) {
                                const float *sk =
                                    ring + (size_t)((zo - pz + k - (oz0 - pz)) % nring) * bplane +
                                    (size_t)y * bxmax;
                                float gk = gz[k];
#pragma omp simd
                                for (int x = 0; x < n; x++)
                                    trow[x] += gk * sk[x];
                            }
                        }
                        exp2_neg(wrow, trow, n, c->k, ebits);
                        /* Own: o = (ox0 + x, oy, zo) in the chunk. */
                        if (own && oy >= 0 && oy < ny) {
                            size_t zi = (size_t)(zo - z0);
                            float *aw = accw + zi * oplane + (size_t)oy * nx;
                            float *av = accv + zi * oplane + (size_t)oy * nx;
                            const float *ud = U + (size_t)(zo + dz - z0 + rz) * pplane +
                                              (size_t)(oy + dy + ry) * PX + rx + dx;
                            const float *wr = wrow - ox0; /* wr[x] is origin x */
#pragma omp simd
                            for (int x = 0; x < nx; x++) {
                                aw[x] += wr[x];
                                av[x] += wr[x] * ud[x];
                            }
                        }
                        /* Symmetric: o + d in the chunk gets w * U(o). */
                        if (sym && oy + dy >= 0 && oy + dy < ny) {
                            size_t zi = (size_t)(zo + dz - z0);
                            float *aw = accw + zi * oplane + (size_t)(oy + dy) * nx;
                            float *av = accv + zi * oplane + (size_t)(oy + dy) * nx;
                            const float *uo = U + (size_t)(zo - z0 + rz) * pplane +
                                              (size_t)(oy + ry) * PX + rx - dx;
                            const float *wr = wrow - ox0 - dx; /* wr[x]: origin x - dx */
#pragma omp simd
                            for (int x = 0; x < nx; x++) {
                                aw[x] += wr[x];
                                av[x] += wr[x] * uo[x];
                            }
                        }
                    }
                }
            }
    for (int z = 0; z < L; z++) {
        float *o = dst + (size_t)(z0 + z) * oplane;
        const float *aw = accw + (size_t)z * oplane, *av = accv + (size_t)z * oplane;
#pragma omp simd
        for (size_t i = 0; i < oplane; i++)
            o[i] = av[i] / aw[i];
    }
}

static size_t chunk_ws_len(const core *c, int L)
{
    size_t PX = (size_t)c->nx + 2 * c->r[0], PY = (size_t)c->ny + 2 * c->r[1];
    size_t PZ = (size_t)L + 2 * c->r[2];
    size_t bx = (size_t)c->nx + c->s[0], by = (size_t)c->ny + c->s[1];
    size_t oplane = (size_t)c->nx * c->ny;
    return PX * PY * PZ + 2 * oplane * L + bx * by * (2 * c->p[2] + 1) + (by + 2 * c->p[1]) * bx +
           (bx + 2 * c->p[0]) + 4 * bx + 64;
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
    /* The box path sums unweighted differences in x and y (z's 1/(2P+1) is
     * already in g[2]); fold the mean's normalisation into k. */
    double norm = 1.0;
    if (c.box)
        for (int a = 0; a < dim && a < 2; a++)
            norm *= 2 * p->patch_radius + 1;
    c.k = (float)(1.4426950408889634 / ((double)h * h * norm));

    int threads = dev && dev->threads > 0 ? dev->threads : omp_get_max_threads();
    /* Tasks: (frame, chunk of planes) for 3D, (frame, slice) for 2D. */
    int nz = in->nz, frames = in->nt, L, nchunks;
    if (dim == 3) {
        L = (nz + threads - 1) / threads;
        L = L < 8 ? 8 : L > 32 ? 32 : L;
        if (L > nz)
            L = nz;
        nchunks = (nz + L - 1) / L;
    } else {
        L = 1;
        nchunks = nz;
    }
    size_t ws_len = chunk_ws_len(&c, L);
    int ntasks = nchunks * frames;
    size_t frame_len = (size_t)in->nx * in->ny * in->nz;
    int failed = 0;
#pragma omp parallel num_threads(threads)
    {
        float *ws = malloc(ws_len * sizeof(float));
        if (!ws) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(dynamic, 1)
        for (int t = 0; t < ntasks; t++) {
            if (!ws)
                continue;
            int f = t / nchunks, ch = t % nchunks;
            const float *src = in->data + (size_t)f * frame_len;
            float *dst = out->data + (size_t)f * frame_len;
            if (dim == 3) {
                int z0 = ch * L, z1 = z0 + L > nz ? nz : z0 + L;
                chunk_run(&c, src, dst, z0, z1, ws);
            } else {
                size_t off = (size_t)ch * in->nx * in->ny;
                chunk_run(&c, src + off, dst + off, 0, 1, ws);
            }
        }
        free(ws);
    }
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
