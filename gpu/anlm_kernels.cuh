/* Kernels and device-side types of adaptive non-local means, included by
 * gpu/anlm.cu (the host wrapper there owns memory, slabs and launches; see
 * its header comment for the pipeline and anlm.h for the definition).
 * Kept apart so the kernels stay simple and can be read on their own.
 * Device code only; callers: gpu/anlm.cu on its stream.
 */
#ifndef LDCT_GPU_ANLM_KERNELS_CUH
#define LDCT_GPU_ANLM_KERNELS_CUH

#include <stddef.h>

#include "gpu/anlm.h"

namespace anlm_k
{

/* Tile kernel (configuration 0): 32x4x4 threads, one voxel each. */
constexpr int TX = 32, TY = 4, TZ = 4, NT = TX * TY * TZ;

__constant__ float c_xi[GPU_ANLM_XI_N];

__device__ __forceinline__ int mirror(int i, int n)
{
    if (n <= 1)
        return 0;
    int period = 2 * (n - 1);
    i %= period;
    if (i < 0)
        i += period;
    return i < n ? i : period - i;
}

/* The padded grid of one slab: PX x PY x PZ, voxel (x, y, z) (slab-local,
 * z = 0 at the slab's first plane) at (x + H, y + H, z + H). */
struct grid {
    int nx, ny, nzs, H, PX, PY, PZ;
    __device__ __forceinline__ size_t at(int x, int y, int z) const
    {
        return ((size_t)(z + H) * PY + (size_t)(y + H)) * PX + (size_t)(x + H);
    }
};

/* raw holds global planes zlo.. of the volume (nx x ny each). */
__global__ void pad_kernel(const float *__restrict__ raw, float *__restrict__ u, grid g, int nz,
                           int zs, int zlo)
{
    int px = blockIdx.x * blockDim.x + threadIdx.x, py = blockIdx.y * blockDim.y + threadIdx.y;
    int pz = blockIdx.z;
    if (px >= g.PX || py >= g.PY)
        return;
    int x = mirror(px - g.H, g.nx), y = mirror(py - g.H, g.ny), z = mirror(zs + pz - g.H, nz);
    u[((size_t)pz * g.PY + py) * g.PX + px] = raw[((size_t)(z - zlo) * g.ny + y) * g.nx + x];
}

/* Local mean, variance and residual wherever the box fits in the grid. */
__global__ void stats_kernel(const float *__restrict__ u, float *__restrict__ m,
                             float *__restrict__ v, float *__restrict__ r, grid g, int rb)
{
    int px = blockIdx.x * blockDim.x + threadIdx.x, py = blockIdx.y * blockDim.y + threadIdx.y;
    int pz = blockIdx.z;
    if (px >= g.PX || py >= g.PY)
        return;
    size_t i = ((size_t)pz * g.PY + py) * g.PX + px;
    if (px < rb || py < rb || pz < rb || px >= g.PX - rb || py >= g.PY - rb || pz >= g.PZ - rb) {
        m[i] = v[i] = r[i] = 0.0f;
        return;
    }
    double s = 0.0, ss = 0.0;
    for (int c = -rb; c <= rb; c++)
        for (int b = -rb; b <= rb; b++)
            for (int a = -rb; a <= rb; a++) {
                double x = u[((size_t)(pz + c) * g.PY + py + b) * g.PX + px + a];
                s = __dadd_rn(s, x);
                ss = __dadd_rn(ss, __dmul_rn(x, x));
            }
    double nb = (double)(2 * rb + 1) * (2 * rb + 1) * (2 * rb + 1);
    double mean = __ddiv_rn(s, nb);
    double var = __ddiv_rn(__dsub_rn(ss, __dmul_rn(s, mean)), nb - 1.0);
    float mf = (float)mean;
    m[i] = mf;
    v[i] = (float)(var > 0 ? var : 0.0);
    r[i] = __fsub_rn(u[i], mf);
}

struct sweep_args {
    const float *f, *m, *v; /* padded: field (R or U), mean, variance */
    float *s2;              /* padded: SIGMA writes it, WEIGHTS reads it */
    float *e;               /* slab layout nx x ny x nzs: WEIGHTS writes the pass's E */
    grid g;
    int r0, rnx, rny, rnz; /* region: slab-local origin (r0, r0, r0) and size */
    int S, rician;
    int Sx, Sy, Sz; /* the search radius per axis (gpu__anlm_axis_radius); S sizes the tiles */
    gpu__anlm_range rg;
    float mu, nu, str2;
};

/* Shared-memory layout of a sweep block (floats). */
struct smem_layout {
    int FX, FY, FZ, MX, MY, MZ, EX, EY, EZ;
    size_t f, m, v, e, x, y, total;
    __host__ __device__ smem_layout(int S, int P)
    {
        FX = TX + 2 * (S + P), FY = TY + 2 * (S + P), FZ = TZ + 2 * (S + P);
        MX = TX + 2 * S, MY = TY + 2 * S, MZ = TZ + 2 * S;
        EX = TX + 2 * P, EY = TY + 2 * P, EZ = TZ + 2 * P;
        f = 0;
        m = f + (size_t)FX * FY * FZ;
        v = m + (size_t)MX * MY * MZ;
        e = v + (size_t)MX * MY * MZ;
        x = e + (size_t)EX * EY * EZ;
        y = x + (size_t)TX * EY * EZ;
        total = y + (size_t)TX * TY * EZ;
    }
};

/* Copies a box of the padded grid starting at padded coords (ox, oy, oz)
 * into shared memory (dims sx, sy, sz), clamping reads to the grid. */
__device__ __forceinline__ void load_tile(float *dst, const float *__restrict__ src, const grid &g,
                                          int ox, int oy, int oz, int sx, int sy, int sz, int tid)
{
    int n = sx * sy * sz;
    for (int i = tid; i < n; i += NT) {
        int x = i % sx, y = i / sx % sy, z = i / (sx * sy);
        int px = min(max(ox + x, 0), g.PX - 1), py = min(max(oy + y, 0), g.PY - 1),
            pz = min(max(oz + z, 0), g.PZ - 1);
        dst[i] = src[((size_t)pz * g.PY + py) * g.PX + px];
    }
}

template <int P, bool SIGMA> __global__ void __launch_bounds__(NT) sweep_kernel(sweep_args a)
{
    extern __shared__ float sm[];
    const int S = a.S;
    const smem_layout L(S, P);
    float *Ft = sm + L.f, *Mt = sm + L.m, *Vt = sm + L.v, *Eb = sm + L.e, *Xb = sm + L.x,
          *Yb = sm + L.y;
    const int tx = threadIdx.x, ty = threadIdx.y, tz = threadIdx.z;
    const int tid = tx + TX * (ty + TY * tz);
    /* Tile origin (slab-local) and its padded coordinates. */
    const int ox = a.r0 + blockIdx.x * TX, oy = a.r0 + blockIdx.y * TY, oz = a.r0 + blockIdx.z * TZ;
    const int H = a.g.H;
    load_tile(Ft, a.f, a.g, ox + H - S - P, oy + H - S - P, oz + H - S - P, L.FX, L.FY, L.FZ, tid);
    load_tile(Mt, a.m, a.g, ox + H - S, oy + H - S, oz + H - S, L.MX, L.MY, L.MZ, tid);
    load_tile(Vt, a.v, a.g, ox + H - S, oy + H - S, oz + H - S, L.MX, L.MY, L.MZ, tid);
    __syncthreads();

    const int x = ox + tx, y = oy + ty, z = oz + tz;
    const bool mine = x < a.r0 + a.rnx && y < a.r0 + a.rny && z < a.r0 + a.rnz;
    const int mc = ((tz + S) * L.MY + ty + S) * L.MX + tx + S;
    const float mi = Mt[mc], vi = Vt[mc];
    const float inv = 1.0f / (float)((2 * P + 1) * (2 * P + 1) * (2 * P + 1));
    float best = -1.0f, h2 = 1.0f, aw = 0.0f, ag = 0.0f, wmax = 0.0f;
    if (!SIGMA && mine) {
        float s2 = a.s2[a.g.at(x, y, z)];
        h2 = a.str2 * fmaxf(s2, a.rg.s2_floor);
    }
    const float ih2 = 1.0f / h2;
    const int ENn = L.EX * L.EY * L.EZ, XNn = TX * L.EY * L.EZ, YNn = TX * TY * L.EZ;
    for (int dz = -a.Sz; dz <= a.Sz; dz++)
        for (int dy = -a.Sy; dy <= a.Sy; dy++)
            for (int dx = -a.Sx; dx <= a.Sx; dx++) {
                if (!(dx | dy | dz))
                    continue;
                const int dof = (dz * L.FY + dy) * L.FX + dx;
                for (int i = tid; i < ENn; i += NT) {
                    int ex = i % L.EX, ey = i / L.EX % L.EY, ez = i / (L.EX * L.EY);
                    int fi = ((ez + S) * L.FY + ey + S) * L.FX + ex + S;
                    float t = Ft[fi] - Ft[fi + dof];
                    Eb[i] = t * t;
                }
                __syncthreads();
                for (int i = tid; i < XNn; i += NT) {
                    int xx = i % TX, yz = i / TX;
                    const float *e = Eb + yz * L.EX + xx;
                    float s = e[0];
#pragma unroll
                    for (int k = 1; k <= 2 * P; k++)
                        s += e[k];
                    Xb[i] = s;
                }
                __syncthreads();
                for (int i = tid; i < YNn; i += NT) {
                    int xx = i % TX, yy = i / TX % TY, zz = i / (TX * TY);
                    const float *q = Xb + (zz * L.EY + yy) * TX + xx;
                    float s = q[0];
#pragma unroll
                    for (int k = 1; k <= 2 * P; k++)
                        s += q[k * TX];
                    Yb[i] = s;
                }
                __syncthreads();
                const float *q = Yb + (tz * TY + ty) * TX + tx;
                float D = q[0];
#pragma unroll
                for (int k = 1; k <= 2 * P; k++)
                    D += q[k * TX * TY];
                D *= inv;
                const int mj = mc + (dz * L.MY + dy) * L.MX + dx;
                if (!gpu__anlm_keep(&a.rg, a.mu, a.nu, mi, vi, Mt[mj], Vt[mj]))
                    continue;
                if (SIGMA) {
                    best = (best < 0.0f || D < best) ? D : best;
                } else if (D <= 3.0f * h2) {
                    float w = __expf(-D * ih2);
                    float uj =
                        Ft[((tz + S + P + dz) * L.FY + ty + S + P + dy) * L.FX + tx + S + P + dx];
                    aw += w;
                    ag += w * (a.rician ? uj * uj : uj);
                    wmax = fmaxf(wmax, w);
                }
            }
    if (!mine)
        return;
    if (SIGMA) {
        a.s2[a.g.at(x, y, z)] = best;
        return;
    }
    float u = Ft[((tz + S + P) * L.FY + ty + S + P) * L.FX + tx + S + P];
    float w0 = wmax > 0.0f ? wmax : 1.0f;
    a.e[((size_t)z * a.g.ny + y) * a.g.nx + x] = (w0 * (a.rician ? u * u : u) + ag) / (w0 + aw);
}

/* ---- column kernel (configuration 1, the default) ------------------------
 * A 32x8 block owns a 32x8xCZ tile: thread (lane, warp) owns the column of
 * CZ voxels at (x, y) = (lane, warp); CZ = 8 (configuration 1: 1 block of
 * ~210 registers per thread per SM in the weight sweep) or 4 (configuration
 * 2: at most 128 registers, 2 blocks per SM, more z halo per voxel). Per offset: (1) every column
 * of the tile plus a halo of r_P in x and y forms its squared differences along z in registers and
 * their z box sums (read from the field tile, lane-consecutive, no bank conflict), into Zb; (2) y
 * box sums into Yb; (3) each thread sums its x box from Yb for its 8 voxels. Two barriers per
 * offset, and about half the shared-memory traffic of the tile kernel. The preselection reads M and
 * V of the neighbour from global memory (L1). */
constexpr int CX = 32, CY = 8, CNT = CX * CY;

struct col_layout {
    int FX, FY, FZ, EX, EY;
    size_t f, zb, yb, total;
    __host__ __device__ col_layout(int S, int P, int CZ)
    {
        FX = CX + 2 * (S + P), FY = CY + 2 * (S + P), FZ = CZ + 2 * (S + P);
        EX = CX + 2 * P, EY = CY + 2 * P;
        f = 0;
        zb = f + (size_t)FX * FY * FZ;
        yb = zb + (size_t)EX * EY * CZ;
        total = yb + (size_t)EX * CY * CZ;
    }
};

template <int P, bool SIGMA, int CZ>
__global__ void __launch_bounds__(CNT, CZ <= 4 ? 2 : 1) sweep_col_kernel(sweep_args a)
{
    extern __shared__ float sm[];
    const int S = a.S;
    const col_layout L(S, P, CZ);
    float *Ft = sm + L.f, *Zb = sm + L.zb, *Yb = sm + L.yb;
    const int tx = threadIdx.x, ty = threadIdx.y, tid = tx + CX * ty;
    const int ox = a.r0 + blockIdx.x * CX, oy = a.r0 + blockIdx.y * CY, oz = a.r0 + blockIdx.z * CZ;
    const int H = a.g.H;
    for (int i = tid; i < L.FX * L.FY * L.FZ; i += CNT) {
        int fx = i % L.FX, fy = i / L.FX % L.FY, fz = i / (L.FX * L.FY);
        int px = min(max(ox + H - S - P + fx, 0), a.g.PX - 1);
        int py = min(max(oy + H - S - P + fy, 0), a.g.PY - 1);
        int pz = min(max(oz + H - S - P + fz, 0), a.g.PZ - 1);
        Ft[i] = a.f[((size_t)pz * a.g.PY + py) * a.g.PX + px];
    }
    const int x = ox + tx, y = oy + ty;
    const bool colmine = x < a.r0 + a.rnx && y < a.r0 + a.rny;
    float mi[CZ], vi[CZ], st0[CZ], st1[CZ], st2[CZ];
    bool mine[CZ];
#pragma unroll
    for (int j = 0; j < CZ; j++) {
        mine[j] = colmine && oz + j < a.r0 + a.rnz;
        size_t gi = mine[j] ? a.g.at(x, y, oz + j) : 0;
        mi[j] = mine[j] ? a.m[gi] : 0.0f;
        vi[j] = mine[j] ? a.v[gi] : 0.0f;
        /* SIGMA: st0 = best; WEIGHTS: st0 = h2, st1 = sum w, st2 = sum w g, plus w max below. */
        st0[j] = -1.0f, st1[j] = 0.0f, st2[j] = 0.0f;
        if (!SIGMA && mine[j])
            st0[j] = a.str2 * fmaxf(a.s2[gi], a.rg.s2_floor);
    }
    float wm[SIGMA ? 1 : CZ], ih[SIGMA ? 1 : CZ]; /* w max, 1 / h^2 */
#pragma unroll
    for (int j = 0; j < (SIGMA ? 1 : CZ); j++) {
        wm[j] = 0.0f;
        ih[j] = SIGMA ? 0.0f : 1.0f / st0[j];
    }
    __syncthreads();
    const float inv = 1.0f / (float)((2 * P + 1) * (2 * P + 1) * (2 * P + 1));
    const size_t pstride = (size_t)a.g.PY * a.g.PX;
    for (int dz = -a.Sz; dz <= a.Sz; dz++)
        for (int dy = -a.Sy; dy <= a.Sy; dy++)
            for (int dx = -a.Sx; dx <= a.Sx; dx++) {
                if (!(dx | dy | dz))
                    continue;
                const int dof = (dz * L.FY + dy) * L.FX + dx;
                for (int c = tid; c < L.EX * L.EY; c += CNT) {
                    int cx = c % L.EX, cy = c / L.EX;
                    const float *f = Ft + ((size_t)S * L.FY + cy + S) * L.FX + cx + S;
                    float e[CZ + 2 * P];
#pragma unroll
                    for (int k = 0; k < CZ + 2 * P; k++) {
                        float t = f[k * L.FX * L.FY] - f[k * L.FX * L.FY + dof];
                        e[k] = t * t;
                    }
#pragma unroll
                    for (int j = 0; j < CZ; j++) {
                        float sum = e[j];
#pragma unroll
                        for (int k = 1; k <= 2 * P; k++)
                            sum += e[j + k];
                        Zb[(j * L.EY + cy) * L.EX + cx] = sum;
                    }
                }
                __syncthreads();
                for (int i = tid; i < L.EX * CY * CZ; i += CNT) {
                    int cx = i % L.EX, yy = i / L.EX % CY, j = i / (L.EX * CY);
                    const float *q = Zb + (j * L.EY + yy) * L.EX + cx;
                    float sum = q[0];
#pragma unroll
                    for (int k = 1; k <= 2 * P; k++)
                        sum += q[k * L.EX];
                    Yb[i] = sum;
                }
                __syncthreads();
                const size_t doff = (ptrdiff_t)dz * pstride + (ptrdiff_t)dy * a.g.PX + dx;
#pragma unroll
                for (int j = 0; j < CZ; j++) {
                    if (!mine[j])
                        continue;
                    const float *q = Yb + (j * CY + ty) * L.EX + tx;
                    float D = q[0];
#pragma unroll
                    for (int k = 1; k <= 2 * P; k++)
                        D += q[k];
                    D *= inv;
                    size_t gj = a.g.at(x, y, oz + j) + doff;
                    if (!gpu__anlm_keep(&a.rg, a.mu, a.nu, mi[j], vi[j], __ldg(a.m + gj),
                                        __ldg(a.v + gj)))
                        continue;
                    if (SIGMA) {
                        st0[j] = (st0[j] < 0.0f || D < st0[j]) ? D : st0[j];
                    } else if (D <= 3.0f * st0[j]) {
                        /* -D / h^2 in [-3, 0]: the fast exponential's
                         * relative error (~1e-6) is far inside the
                         * tolerance against the reference. */
                        float w = __expf(-D * ih[j]);
                        float uj = Ft[((j + S + P + dz) * L.FY + ty + S + P + dy) * L.FX + tx + S +
                                      P + dx];
                        st1[j] += w;
                        st2[j] += w * (a.rician ? uj * uj : uj);
                        wm[SIGMA ? 0 : j] = fmaxf(wm[SIGMA ? 0 : j], w);
                    }
                }
            }
#pragma unroll
    for (int j = 0; j < CZ; j++) {
        if (!mine[j])
            continue;
        if (SIGMA) {
            a.s2[a.g.at(x, y, oz + j)] = st0[j];
            continue;
        }
        float u = Ft[((j + S + P) * L.FY + ty + S + P) * L.FX + tx + S + P];
        float w0 = wm[SIGMA ? 0 : j] > 0.0f ? wm[SIGMA ? 0 : j] : 1.0f;
        a.e[((size_t)(oz + j) * a.g.ny + y) * a.g.nx + x] =
            (w0 * (a.rician ? u * u : u) + st2[j]) / (w0 + st1[j]);
    }
}

/* Rician: E -> sqrt(max(E - 2 sg2, 0)), sg2 from the s2 map smoothed over
 * the box q (voxels without an estimate skipped, outliers left out by a
 * second pass, see gpu__anlm_clip_limit) and the xi table. */
__global__ void rician_kernel(float *__restrict__ e, const float *__restrict__ s2,
                              const float *__restrict__ m, grid g)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = blockIdx.z;
    if (x >= g.nx || y >= g.ny)
        return;
    const int q = GPU_ANLM_RICIAN_REG;
    double s = 0.0, t = 0.0;
    int k = 0, n = 0;
    for (int c = -q; c <= q; c++)
        for (int b = -q; b <= q; b++)
            for (int a = -q; a <= q; a++) {
                float v = s2[g.at(x + a, y + b, z + c)];
                if (v >= 0.0f)
                    s += v, k++;
            }
    const double limit = k ? gpu__anlm_clip_limit(s, k) : 0.0;
    for (int c = -q; c <= q; c++)
        for (int b = -q; b <= q; b++)
            for (int a = -q; a <= q; a++) {
                float v = s2[g.at(x + a, y + b, z + c)];
                if (v >= 0.0f && v <= limit)
                    t += v, n++;
            }
    float sr2 = n ? (float)(t / n) : 0.0f, mm = fabsf(m[g.at(x, y, z)]);
    float sg2 = sr2 > 0.0f ? sr2 / gpu__anlm_xi_lookup(c_xi, mm / sqrtf(sr2)) : 0.0f;
    size_t i = ((size_t)z * g.ny + y) * g.nx + x;
    float d = e[i] - 2.0f * sg2;
    e[i] = d > 0.0f ? sqrtf(d) : 0.0f;
}

__device__ __forceinline__ float haar(int hb, int k, int len)
{
    if (len == 1)
        return hb ? 0.0f : 1.0f;
    return (hb && k) ? -0.70710678118654752f : 0.70710678118654752f;
}

/* One thread per 2x2x2 block: a += the bands of (b - a) with two or three
 * high-pass axes (see anlm.h). In place on a. */
__global__ void mix_kernel(float *__restrict__ a, const float *__restrict__ b, int nx, int ny,
                           int nzs)
{
    int x0 = 2 * (blockIdx.x * blockDim.x + threadIdx.x),
        y0 = 2 * (blockIdx.y * blockDim.y + threadIdx.y);
    int z0 = 2 * blockIdx.z;
    if (x0 >= nx || y0 >= ny || z0 >= nzs)
        return;
    const int lx = x0 + 1 < nx ? 2 : 1, ly = y0 + 1 < ny ? 2 : 1, lz = z0 + 1 < nzs ? 2 : 1;
    float d[8], add[8], lo = INFINITY, hi = -INFINITY;
    size_t id[8];
#pragma unroll
    for (int k = 0; k < 8; k++) {
        int kx = k & 1, ky = k >> 1 & 1, kz = k >> 2;
        bool in = kx < lx && ky < ly && kz < lz;
        id[k] = in ? ((size_t)(z0 + kz) * ny + y0 + ky) * nx + x0 + kx : 0;
        d[k] = in ? b[id[k]] - a[id[k]] : 0.0f;
        add[k] = 0.0f;
        if (in) {
            lo = fminf(lo, fminf(a[id[k]], b[id[k]]));
            hi = fmaxf(hi, fmaxf(a[id[k]], b[id[k]]));
        }
    }
#pragma unroll
    for (int band = 3; band < 8; band++) {
        int hx = band & 1, hy = band >> 1 & 1, hz = band >> 2;
        if (hx + hy + hz < 2)
            continue;
        float c = 0.0f;
#pragma unroll
        for (int k = 0; k < 8; k++)
            c += d[k] * haar(hx, k & 1, lx) * haar(hy, k >> 1 & 1, ly) * haar(hz, k >> 2, lz);
#pragma unroll
        for (int k = 0; k < 8; k++)
            add[k] += c * haar(hx, k & 1, lx) * haar(hy, k >> 1 & 1, ly) * haar(hz, k >> 2, lz);
    }
#pragma unroll
    for (int k = 0; k < 8; k++) {
        int kx = k & 1, ky = k >> 1 & 1, kz = k >> 2;
        if (kx < lx && ky < ly && kz < lz)
            a[id[k]] = fminf(fmaxf(a[id[k]] + add[k], lo), hi);
    }
}

} // namespace anlm_k

#endif
