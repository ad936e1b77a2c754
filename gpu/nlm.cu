/* CUDA non-local means, 2D and 3D; computes what nlm_ref.c defines (see
 * nlm.h) within float32 rounding. Host wrappers own memory budgeting and
 * slabbing; kernels work on a mirrored, padded copy of each slab so they
 * carry no border logic.
 *
 * nlm2d (seed 000): one block per 32x32 output tile of a slice. The tile
 * plus a halo of S+P is staged in shared memory once. For each offset d of
 * half the search window the block computes row-wise patch differences
 * XS (2P+1 squared differences along x, each row difference computed once,
 * kept in shared memory), then patch distances by summing 2P+1 rows, then
 * weights W over the tile and the tile shifted by -d; every output gathers
 * W(o,d) U(o+d) + W(o-d,d) U(o-d): symmetric weights, half the window.
 *
 * nlm3d (seed 000 section 5, seed 003): one block per 32 x TY column tile
 * and a chunk of LZ planes. For each offset the block slides along z: per
 * plane, row differences go through shared memory, plane sums (2P+1 rows)
 * land in a per-thread ring of 2P+1 registers, and the ring's sum is the 3D
 * patch distance. Accumulators for the chunk stay in registers (the z loop
 * is unrolled). nlm3d_v2_kernel double-buffers the row differences (one
 * barrier per plane step) and handles NDX = 4 consecutive dx offsets per
 * sweep, loading the shared U rows once; it serves Gaussian patch weights
 * and P > 2. Uniform weights with P <= 2 run the kernels of
 * gpu/nlm_cuda_v3.cu: v8 for S = 5 (the default, cfg 40), v6 for S < 5
 * (cfg 37: v3's sweep, z box before the exchange and no branches, the
 * distance cutoff in exp2's underflow, on a copy of the block's whole
 * neighbourhood in shared memory), v3 for S > 5 (cfg 27); v8 is 4.2x
 * faster than v2 (see cfg3_pick below). All visit the full
 * window: symmetric pairs (each pair's weight computed once, applied at o
 * and o+d) are not ruled out, only not implemented yet; in this z sweep
 * they need a ring of weight planes and a halo of |d| around the tile (plan
 * in docs/NOTES-gpu.md).
 *
 * Callers: any host thread; work is queued on dev->stream and waited for.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gpu/cuda_check.cuh"
#include "gpu/cuda_stage.cuh"
#include "gpu/nlm.h"
#include "gpu/nlm_cuda_v3.cuh"

namespace
{

__constant__ float c_g[3][2 * GPU_NLM_MAX_PATCH + 1]; /* patch weights per axis */

/* w = 2^-y, y = D log2(e) / h^2, or 0 above the distance cutoff ycut
 * (nlm.h; +inf: none). A NaN y compares false and gives 0. */
__device__ __forceinline__ float nlm_weight(float y, float ycut)
{
    const float w = exp2f(-y); /* computed unconditionally: a select, not a branch */
    return y <= ycut ? w : 0.0f;
}

__device__ __forceinline__ int mirror_d(int i, int n)
{
    if (n <= 1)
        return 0;
    int period = 2 * (n - 1);
    i %= period;
    if (i < 0)
        i += period;
    return i < n ? i : period - i;
}

/* Padded slab: pad[(zz * PY + yy) * PXp + xx] = scale * in(mirror(xx-R),
 * mirror(yy-R), z) with z = mirror(zbase + zz) taken from the raw planes
 * [lo, lo+nraw); scale is 1 except for kernels that take a prescaled input. */
__global__ void pad_kernel(const float *__restrict__ raw, float *__restrict__ pad, int nx, int ny,
                           int nz, int R, int PXp, int PY, int PZ, int zbase, int lo, int nraw,
                           int zhalo, float scale)
{
    int xx = blockIdx.x * blockDim.x + threadIdx.x;
    int yy = blockIdx.y * blockDim.y + threadIdx.y;
    int zz = blockIdx.z;
    if (xx >= PXp || yy >= PY || zz >= PZ)
        return;
    int gz = zhalo ? mirror_d(zbase + zz, nz) : zbase + zz;
    int lz = gz - lo;
    lz = lz < 0 ? 0 : lz >= nraw ? nraw - 1 : lz; /* planes no output reads */
    int gy = mirror_d(yy - R, ny), gx = mirror_d(xx - R, nx);
    pad[((size_t)zz * PY + yy) * PXp + xx] = scale * raw[((size_t)lz * ny + gy) * nx + gx];
}

/* ---- nlm2d ---------------------------------------------------------------- */

constexpr int T2X = 32, T2Y = 32, B2X = 32, B2Y = 8, RS2 = 4;

template <int P>
__global__ void __launch_bounds__(B2X *B2Y)
    nlm2d_kernel(const float *__restrict__ pad, float *__restrict__ out, int nx, int ny, int PXp,
                 int PY, int S, float kh, float ycut)
{
    extern __shared__ float smem[];
    const int R = S + P;
    const int UW = T2X + 2 * R + RS2, UH = T2Y + 2 * R;
    const int XW = T2X + S, XH = T2Y + S + 2 * P;
    float *Us = smem;         /* UH x UW */
    float *XS = Us + UH * UW; /* XH x XW */
    float *Ws = XS + XH * XW; /* (T2Y + S) x XW */
    const int tid = threadIdx.y * B2X + threadIdx.x, NT = B2X * B2Y;
    const int x0 = blockIdx.x * T2X, y0 = blockIdx.y * T2Y;
    const float *plane = pad + (size_t)blockIdx.z * PY * PXp;

    /* Stage the tile plus halo (padded coordinates start at x0, y0). */
    for (int i = tid; i < UH * UW; i += NT) {
        int r = i / UW, c = i % UW;
        int gy = min(y0 + r, PY - 1), gx = min(x0 + c, PXp - 1);
        Us[i] = plane[(size_t)gy * PXp + gx];
    }
    __syncthreads();
#define US(y, x) Us[((y) + R) * UW + (x) + R]

    float aw[T2Y / B2Y], av[T2Y / B2Y];
#pragma unroll
    for (int j = 0; j < T2Y / B2Y; j++) {
        aw[j] = 1.0f;
        av[j] = US(threadIdx.y + j * B2Y, threadIdx.x);
    }

    for (int dy = 0; dy <= S; dy++) {
        for (int dx = -S; dx <= S; dx++) {
            if (dy == 0 && dx <= 0)
                continue;
            const int rx0 = dx > 0 ? -dx : 0, ry0 = -dy;
            const int RW = T2X + (dx > 0 ? dx : -dx), RH = T2Y + dy;
            /* (a) row differences XS[r][c] for origin rows ry0-P+r, cols rx0+c. */
            const int nseg = (RW + RS2 - 1) / RS2;
            for (int it = tid; it < (RH + 2 * P) * nseg; it += NT) {
                int r = it / nseg, c0 = (it % nseg) * RS2;
                int y = ry0 - P + r, x = rx0 + c0 - P;
                float d2[RS2 + 2 * P];
#pragma unroll
                for (int k = 0; k < RS2 + 2 * P; k++) {
                    float t = US(y, x + k) - US(y + dy, x + k + dx);
                    d2[k] = t * t;
                }
#pragma unroll
                for (int m = 0; m < RS2; m++) {
                    float s = 0.0f;
#pragma unroll
                    for (int k = 0; k <= 2 * P; k++)
                        s = fmaf(c_g[0][k], d2[m + k], s);
                    if (c0 + m < RW)
                        XS[r * XW + c0 + m] = s;
                }
            }
            __syncthreads();
            /* (b) weights W[r][c] = exp(-D/h^2), D = sum of 2P+1 row differences. */
            const int rseg = (RH + RS2 - 1) / RS2;
            for (int it = tid; it < rseg * RW; it += NT) {
                int c = it % RW, r0 = (it / RW) * RS2;
                float xv[RS2 + 2 * P];
#pragma unroll
                for (int k = 0; k < RS2 + 2 * P; k++)
                    xv[k] = (r0 + k < RH + 2 * P) ? XS[(r0 + k) * XW + c] : 0.0f;
#pragma unroll
                for (int m = 0; m < RS2; m++) {
                    float s = 0.0f;
#pragma unroll
                    for (int k = 0; k <= 2 * P; k++)
                        s = fmaf(c_g[1][k], xv[m + k], s);
                    if (r0 + m < RH)
                        Ws[(r0 + m) * XW + c] = nlm_weight(s * kh, ycut);
                }
            }
            __syncthreads();
            /* (c) gather: o gets W(o) U(o+d) and W(o-d) U(o-d). */
#pragma unroll
            for (int j = 0; j < T2Y / B2Y; j++) {
                int y = threadIdx.y + j * B2Y, x = threadIdx.x;
                float w1 = Ws[(y - ry0) * XW + (x - rx0)];
                float w2 = Ws[(y - dy - ry0) * XW + (x - dx - rx0)];
                aw[j] += w1 + w2;
                av[j] = fmaf(w1, US(y + dy, x + dx), fmaf(w2, US(y - dy, x - dx), av[j]));
            }
            /* The next (a) writes XS only; W is rewritten after its barrier. */
        }
    }
#undef US
    float *o = out + (size_t)blockIdx.z * ny * nx;
#pragma unroll
    for (int j = 0; j < T2Y / B2Y; j++) {
        int y = y0 + threadIdx.y + j * B2Y, x = x0 + threadIdx.x;
        if (x < nx && y < ny)
            o[(size_t)y * nx + x] = av[j] / aw[j];
    }
}

/* ---- nlm3d ---------------------------------------------------------------- */

constexpr int T3X = 32, B3Y = 8, RS3 = RS2, XSPARE = 8; /* spare padded columns for dx groups */

/* nlm3d_v2_kernel: the z sweep of the first version (one barrier before
 * and one after each plane's row differences, one dx per sweep; removed)
 * with (1) XS double
 * buffered, so one barrier per plane step instead of two, (2) NDX consecutive
 * dx offsets per sweep: phase (a) loads each U(o) row and the overlapping
 * U(o+d) rows once for all of them, and the barrier count drops NDX times,
 * (3) RS outputs per phase-(a) item, so XH * (32 / RS) items fit one round
 * of the block. Offsets of the last dx group past S, and d = 0, get weight 0
 * (their reads stay inside the padded plane: PXp has RS3 spare columns). */
template <int P, int RY, int LZ, int RS, int NDX, int MINB>
__global__ void __launch_bounds__(T3X *B3Y, MINB)
    nlm3d_v2_kernel(const float *__restrict__ pad, float *__restrict__ out, int nx, int ny, int nzs,
                    int PXp, int PY, int S, float kh, float ycut)
{
    static_assert((LZ + 2 * P) % 2 == 0, "buffer parity must alternate across offsets");
    static_assert(NDX >= 1 && NDX <= RS3 + 1 + XSPARE, "dx group reads past the padded plane");
    constexpr int TY = B3Y * RY;
    constexpr int XH = TY + 2 * P;
    constexpr int NSEG = T3X / RS;
    constexpr int K = 2 * P + 1;
    __shared__ float XS[2][NDX][XH][T3X + 1];
    const int R = S + P;
    const int tid = threadIdx.y * T3X + threadIdx.x, NT = T3X * B3Y;
    const int x0 = blockIdx.x * T3X, y0 = blockIdx.y * TY, z0 = blockIdx.z * LZ;
    const size_t pp = (size_t)PY * PXp;
    const float *base = pad + (size_t)R * pp + (size_t)R * PXp + R;
    const int tx = threadIdx.x, ty0 = threadIdx.y * RY;

    float aw[RY][LZ], av[RY][LZ];
#pragma unroll
    for (int j = 0; j < RY; j++)
#pragma unroll
        for (int z = 0; z < LZ; z++) {
            aw[j][z] = 1.0f;
            av[j][z] = base[(size_t)(z0 + z) * pp + (size_t)(y0 + ty0 + j) * PXp + x0 + tx];
        }

    for (int dz = -S; dz <= S; dz++)
        for (int dy = -S; dy <= S; dy++)
            for (int dx0 = -S; dx0 <= S; dx0 += NDX) {
                const ptrdiff_t doff = (ptrdiff_t)dz * pp + (ptrdiff_t)dy * PXp + dx0;
                float wm[NDX]; /* 1 for real offsets, 0 for d = 0 and dx > S */
#pragma unroll
                for (int q = 0; q < NDX; q++)
                    wm[q] = (dx0 + q <= S && !(dz == 0 && dy == 0 && dx0 + q == 0)) ? 1.0f : 0.0f;
                float ring[NDX][RY][K];
#pragma unroll
                for (int s = 0; s < LZ + 2 * P; s++) {
                    const int buf = s & 1;
                    const int q0 = z0 - P + s;
                    const float *pa = base + (ptrdiff_t)q0 * pp;
                    for (int it = tid; it < XH * NSEG; it += NT) {
                        int r = it / NSEG, c0 = (it % NSEG) * RS;
                        const float *a = pa + (ptrdiff_t)(y0 - P + r) * PXp + x0 + c0 - P;
                        const float *b = a + doff;
                        float ua[RS + 2 * P], ub[RS + 2 * P + NDX - 1];
#pragma unroll
                        for (int k = 0; k < RS + 2 * P; k++)
                            ua[k] = __ldg(a + k);
#pragma unroll
                        for (int k = 0; k < RS + 2 * P + NDX - 1; k++)
                            ub[k] = __ldg(b + k);
#pragma unroll
                        for (int q = 0; q < NDX; q++) {
                            float d2[RS + 2 * P];
#pragma unroll
                            for (int k = 0; k < RS + 2 * P; k++) {
                                float t = ua[k] - ub[k + q];
                                d2[k] = t * t;
                            }
#pragma unroll
                            for (int m = 0; m < RS; m++) {
                                float v = 0.0f;
#pragma unroll
                                for (int k = 0; k < K; k++)
                                    v = fmaf(c_g[0][k], d2[m + k], v);
                                XS[buf][q][r][c0 + m] = v;
                            }
                        }
                    }
                    __syncthreads();
#pragma unroll
                    for (int q = 0; q < NDX; q++) {
                        float xv[RY + 2 * P];
#pragma unroll
                        for (int k = 0; k < RY + 2 * P; k++)
                            xv[k] = XS[buf][q][ty0 + k][tx];
#pragma unroll
                        for (int j = 0; j < RY; j++) {
                            float v = 0.0f;
#pragma unroll
                            for (int k = 0; k < K; k++)
                                v = fmaf(c_g[1][k], xv[j + k], v);
                            ring[q][j][s % K] = v;
                        }
                        if (s >= 2 * P) {
                            const int z = s - 2 * P;
#pragma unroll
                            for (int j = 0; j < RY; j++) {
                                float D = 0.0f;
#pragma unroll
                                for (int k = 0; k < K; k++)
                                    D = fmaf(c_g[2][k], ring[q][j][(s - 2 * P + k) % K], D);
                                float w = wm[q] * nlm_weight(D * kh, ycut);
                                float u =
                                    __ldg(base + (ptrdiff_t)(z0 + z) * pp +
                                          (ptrdiff_t)(y0 + ty0 + j) * PXp + x0 + tx + doff + q);
                                aw[j][z] += w;
                                av[j][z] = fmaf(w, u, av[j][z]);
                            }
                        }
                    }
                }
            }
#pragma unroll
    for (int j = 0; j < RY; j++)
#pragma unroll
        for (int z = 0; z < LZ; z++) {
            int x = x0 + tx, y = y0 + ty0 + j, zz = z0 + z;
            if (x < nx && y < ny && zz < nzs)
                out[((size_t)zz * ny + y) * nx + x] = av[j][z] / aw[j][z];
        }
}

/* nlm3d kernels, named by their LDCT_NLM3D_CFG numbers in the measurement
 * history (docs/PERFORMANCE.md, docs/NOTES-gpu.md; 512^3 S=5 P=2 kernel
 * times):
 * 40: v8 of gpu/nlm_cuda_v3.cu, the default: v6's lean sweep on 12-plane
 *     tiles with four plane classes of 14 rows; S = 5, P <= 2, uniform
 *     weights (H200 0.1657 s; H100 0.1655 s);
 * 37: v6 lean (the neighbourhood copied to shared memory, prescaled input,
 *     the cutoff in exp2's underflow, tree boxes), for S < 5 (H200 0.1820 s);
 * 27: v3 with slots past S masked, for S > 5 (H200 0.382 s);
 *  7: nlm3d_v2_kernel RY 4, LZ 8, RS 8, NDX 4, for Gaussian weights or
 *     P > 2 (H200 0.697 s).
 * A call the chosen kernel does not suit falls back along 37, 27, 7. The
 * other numbers (0-6, 8-26, 28-36, 38, 39) were variants superseded by
 * these, removed after commit f6d49fc; figures taken with them are
 * reproduced at that commit. LDCT_NLM3D_CFG selects one of the four (any
 * other value: the default). */
constexpr int k_cfg3_fallback = 7, k_cfg3_wide = 27, k_cfg3_lean = 37, k_cfg3_default = 40;
constexpr int k_v2_ry = 4, k_v2_lz = 8; /* nlm3d_v2_kernel's rows per thread, planes per block */

int cfg3_pick(void)
{
    const char *e = getenv("LDCT_NLM3D_CFG");
    const int i = e ? atoi(e) : k_cfg3_default;
    return i == k_cfg3_fallback || i == k_cfg3_wide || i == k_cfg3_lean ? i : k_cfg3_default;
}

/* The gpu/nlm_cuda_v3.cu variant behind cfg; -1 for nlm3d_v2_kernel. */
int cfg3_variant(int cfg)
{
    switch (cfg) {
    case k_cfg3_default:
        return GPU__NLM3D_V8;
    case k_cfg3_lean:
        return GPU__NLM3D_V6;
    case k_cfg3_wide:
        return GPU__NLM3D_V3;
    default:
        return -1;
    }
}

template <int P>
cudaError_t launch3_p(const float *pad, float *out, int nx, int ny, int nzs, int PXp, int PY, int S,
                      float kh, float ycut, cudaStream_t st)
{
    dim3 block(T3X, B3Y), grid((nx + T3X - 1) / T3X, (ny + B3Y * k_v2_ry - 1) / (B3Y * k_v2_ry),
                               (nzs + k_v2_lz - 1) / k_v2_lz);
    nlm3d_v2_kernel<P, k_v2_ry, k_v2_lz, 8, 4, 1>
        <<<grid, block, 0, st>>>(pad, out, nx, ny, nzs, PXp, PY, S, kh, ycut);
    return cudaGetLastError();
}

/* nlm3d_v2_kernel for patch radius P. */
cudaError_t launch3(int P, const float *pad, float *out, int nx, int ny, int nzs, int PXp, int PY,
                    int S, float kh, float ycut, cudaStream_t st)
{
    switch (P) {
    case 0:
        return launch3_p<0>(pad, out, nx, ny, nzs, PXp, PY, S, kh, ycut, st);
    case 1:
        return launch3_p<1>(pad, out, nx, ny, nzs, PXp, PY, S, kh, ycut, st);
    case 2:
        return launch3_p<2>(pad, out, nx, ny, nzs, PXp, PY, S, kh, ycut, st);
    case 3:
        return launch3_p<3>(pad, out, nx, ny, nzs, PXp, PY, S, kh, ycut, st);
    case 4:
        return launch3_p<4>(pad, out, nx, ny, nzs, PXp, PY, S, kh, ycut, st);
    default:
        return launch3_p<5>(pad, out, nx, ny, nzs, PXp, PY, S, kh, ycut, st);
    }
}

size_t smem2(int S, int P)
{
    int R = S + P;
    return sizeof(float) * ((size_t)(T2Y + 2 * R) * (T2X + 2 * R + RS2) +
                            (size_t)(T2Y + S + 2 * P) * (T2X + S) + (size_t)(T2Y + S) * (T2X + S));
}

template <int P>
cudaError_t launch2_p(const float *pad, float *out, int nx, int ny, int nzs, int PXp, int PY, int S,
                      float kh, float ycut, cudaStream_t st)
{
    size_t sm = smem2(S, P);
    cudaError_t e =
        cudaFuncSetAttribute(nlm2d_kernel<P>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm);
    if (e != cudaSuccess)
        return e;
    dim3 block(B2X, B2Y), grid((nx + T2X - 1) / T2X, (ny + T2Y - 1) / T2Y, nzs);
    nlm2d_kernel<P><<<grid, block, sm, st>>>(pad, out, nx, ny, PXp, PY, S, kh, ycut);
    return cudaGetLastError();
}

cudaError_t launch2(int P, const float *pad, float *out, int nx, int ny, int nzs, int PXp, int PY,
                    int S, float kh, float ycut, cudaStream_t st)
{
    switch (P) {
    case 0:
        return launch2_p<0>(pad, out, nx, ny, nzs, PXp, PY, S, kh, ycut, st);
    case 1:
        return launch2_p<1>(pad, out, nx, ny, nzs, PXp, PY, S, kh, ycut, st);
    case 2:
        return launch2_p<2>(pad, out, nx, ny, nzs, PXp, PY, S, kh, ycut, st);
    case 3:
        return launch2_p<3>(pad, out, nx, ny, nzs, PXp, PY, S, kh, ycut, st);
    case 4:
        return launch2_p<4>(pad, out, nx, ny, nzs, PXp, PY, S, kh, ycut, st);
    default:
        return launch2_p<5>(pad, out, nx, ny, nzs, PXp, PY, S, kh, ycut, st);
    }
}

/* Device buffers of one call; freed by release(). */
struct bufs {
    float *raw, *pad, *out;
    cudaEvent_t e0, e1, k0, k1;
};

void release(bufs *b)
{
    cudaFree(b->raw);
    cudaFree(b->pad);
    cudaFree(b->out);
    if (b->e0)
        cudaEventDestroy(b->e0);
    if (b->e1)
        cudaEventDestroy(b->e1);
    if (b->k0)
        cudaEventDestroy(b->k0);
    if (b->k1)
        cudaEventDestroy(b->k1);
}

/* Geometry and kernel choice of one call. */
struct plan {
    int dim, S, P, R, cfg, v3, tx, ty, lz;
    int nx, ny, nz, PXp, PY, zh, slab, nslabs, PZmax, rawmax;
    size_t oplane, pplane;
    float kh, kh3;
    float ycut; /* weights with exponent D kh above it are 0 (+inf: no cutoff) */
};

/* Kernel configuration, tile and padded layout for params p and volume in. */
void plan_layout(const gpu_nlm_params *p, const gpu_volume *in, int dim, plan *pl)
{
    pl->dim = dim;
    pl->S = p->search_radius;
    pl->P = p->patch_radius;
    pl->R = pl->S + pl->P;
    pl->nx = in->nx;
    pl->ny = in->ny;
    pl->nz = in->nz;
    pl->cfg = 0;
    pl->v3 = -1;
    if (dim == 3) { /* the chosen kernel if it suits the call, else the next that does */
        const int chain[] = {cfg3_pick(), k_cfg3_lean, k_cfg3_wide, k_cfg3_fallback};
        for (int c : chain) {
            const int v = cfg3_variant(c);
            if (v < 0 || gpu__nlm3d_v3_supported(v, pl->P, pl->S, p->gaussian)) {
                pl->cfg = c;
                pl->v3 = v;
                break;
            }
        }
    }
    pl->tx = T2X;
    pl->ty = T2Y;
    pl->lz = 1;
    if (dim == 3 && pl->v3 >= 0) {
        gpu__nlm3d_v3_tile(pl->v3, pl->P, &pl->tx, &pl->ty, &pl->lz);
    } else if (dim == 3) {
        pl->tx = T3X;
        pl->ty = B3Y * k_v2_ry;
        pl->lz = k_v2_lz;
    }
    /* Padded plane: every tile's reads stay inside it (tiles round up). */
    pl->PXp =
        ((pl->nx + pl->tx - 1) / pl->tx * pl->tx + 2 * pl->R + RS2 + (dim == 3 ? XSPARE : 0) + 31) /
        32 * 32;
    pl->PY = (pl->ny + pl->ty - 1) / pl->ty * pl->ty + 2 * pl->R;
    pl->zh = dim == 3 ? pl->R : 0;
    pl->oplane = (size_t)pl->nx * pl->ny;
    pl->pplane = (size_t)pl->PXp * pl->PY;
}

/* Slab height for the memory budget; LDCT_ENOMEM_GPU below one plane. */
int plan_slabs(const gpu_device *d, plan *pl)
{
    const size_t budget = gpu_device_budget(d);
    const size_t per = sizeof(float) * (2 * pl->oplane + pl->pplane);
    const size_t fixed = sizeof(float) * ((size_t)2 * pl->zh * (pl->oplane + pl->pplane) +
                                          (size_t)pl->lz * pl->pplane);
    if (budget <= fixed + per) {
        log_err("nlm%dd: GPU memory budget %zu bytes is below one plane (%zu)", pl->dim, budget,
                fixed + per);
        return LDCT_ENOMEM_GPU;
    }
    int slab = (int)((budget - fixed) / per);
    if (slab > pl->nz)
        slab = pl->nz;
    /* v3 kernels: slabs start at multiples of the tile depth where the
     * budget allows, so every block sweeps the same planes as in a single
     * slab (the running z sums of the lean variants depend on it). */
    const int a = pl->v3 >= 0 && slab >= pl->lz && slab < pl->nz ? pl->lz : 1;
    slab = slab / a * a;
    pl->nslabs = (pl->nz + slab - 1) / slab;
    pl->slab = ((pl->nz + pl->nslabs - 1) / pl->nslabs + a - 1) / a * a; /* even slabs */
    pl->PZmax = pl->slab + 2 * pl->zh + pl->lz;
    pl->rawmax = pl->slab + 2 * pl->zh;
    return 0;
}

/* host -> device through the pinned stage when there is one. */
int copy_in(gpu_stage::lease *stg, float *dst, const float *src, size_t n, cudaStream_t st)
{
    if (stg)
        return gpu_stage::h2d(stg, dst, src, n, st);
    CUDA_CHECK(cudaMemcpyAsync(dst, src, sizeof(float) * n, cudaMemcpyHostToDevice, st));
    return 0;
}

/* device -> host (returns once dst holds the data). */
int copy_out(gpu_stage::lease *stg, float *dst, const float *src, size_t n, cudaStream_t st)
{
    if (stg)
        return gpu_stage::d2h(stg, dst, src, n, st);
    CUDA_CHECK(cudaMemcpyAsync(dst, src, sizeof(float) * n, cudaMemcpyDeviceToHost, st));
    CUDA_CHECK(cudaStreamSynchronize(st));
    return 0;
}

/* Pads PZ planes into pad from the raw planes [lo, lo + nraw); padded
 * plane 0 is volume plane zbase (mirrored at the volume's ends in 3D). */
int pad_planes(const plan &pl, const float *raw, float *pad, int PZ, int zbase, int lo, int nraw,
               cudaStream_t st)
{
    dim3 pb(32, 8), pg((pl.PXp + 31) / 32, (pl.PY + 7) / 8, PZ);
    pad_kernel<<<pg, pb, 0, st>>>(
        raw, pad, pl.nx, pl.ny, pl.nz, pl.R, pl.PXp, pl.PY, PZ, zbase, lo, nraw, pl.dim == 3,
        pl.dim == 3 && pl.v3 >= 0 ? gpu__nlm3d_v3_prescale(pl.v3, pl.kh3) : 1.0f);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

/* The call's kernel on nzs output planes; pad's plane 0 is zh planes
 * before the first output plane. */
int launch_filter(const plan &pl, const float *pad, float *out, int nzs, cudaStream_t st)
{
    if (pl.dim == 3 && pl.v3 >= 0)
        CUDA_CHECK(gpu__nlm3d_v3_launch(pl.v3, pl.P, pad, out, pl.nx, pl.ny, nzs, pl.PXp, pl.PY,
                                        pl.S, pl.kh3, pl.ycut, st));
    else if (pl.dim == 3)
        CUDA_CHECK(
            launch3(pl.P, pad, out, pl.nx, pl.ny, nzs, pl.PXp, pl.PY, pl.S, pl.kh, pl.ycut, st));
    else
        CUDA_CHECK(
            launch2(pl.P, pad, out, pl.nx, pl.ny, nzs, pl.PXp, pl.PY, pl.S, pl.kh, pl.ycut, st));
    return 0;
}

/* Pads and filters output planes [zs, ze) of one time point (src, dst: its
 * volume); adds the pad + kernel time to *kernel_ms. */
int run_slab(const plan &pl, const bufs &b, const float *src, float *dst, int zs, int ze,
             gpu_stage::lease *stg, cudaStream_t st, double *kernel_ms)
{
    const int nzs = ze - zs, dim = pl.dim, zh = pl.zh;
    const int lo = zs - zh < 0 ? 0 : zs - zh, hi = ze + zh > pl.nz ? pl.nz : ze + zh;
    const int PZ = nzs + 2 * zh + (dim == 3 ? pl.lz : 0);
    int rc = copy_in(stg, b.raw, src + (size_t)lo * pl.oplane, pl.oplane * (hi - lo), st);
    if (rc)
        return rc;
    CUDA_CHECK(cudaEventRecord(b.k0, st));
    if ((rc = pad_planes(pl, b.raw, b.pad, PZ, zs - zh, lo, hi - lo, st)) != 0 ||
        (rc = launch_filter(pl, b.pad, b.out, nzs, st)) != 0)
        return rc;
    CUDA_CHECK(cudaEventRecord(b.k1, st));
    if ((rc = copy_out(stg, dst + (size_t)zs * pl.oplane, b.out, pl.oplane * nzs, st)) != 0)
        return rc;
    float kms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&kms, b.k0, b.k1));
    *kernel_ms += kms;
    return 0;
}

/* ---- single-slab calls in overlapping chunks ------------------------------
 * When the whole volume fits the budget, a time point runs in up to
 * k_max_chunks chunks of planes (starts at multiples of the tile depth, so
 * the result is bit for bit the one-launch result): chunk c's raw planes are
 * uploaded on stream cin while chunk c - 1 computes, chunk c - 1's output is
 * downloaded on cout while chunk c computes, and consecutive chunks' pads
 * and kernels alternate between two streams so a chunk's blocks fill the
 * SMs that the previous chunk's last wave leaves idle. The call then costs
 * about the first chunk's upload + the kernels + the last chunk's download
 * instead of all three in a row. LDCT_NLM_CHUNK_MB sets the chunk size
 * (default 32 MB of input; 0: one chunk). */
constexpr int k_max_chunks = 16;

struct pipe {
    cudaStream_t cin, cout, cs[2];
    cudaEvent_t up[k_max_chunks], padded[k_max_chunks], done[k_max_chunks], kend, start;
    int nch, zb[k_max_chunks + 1]; /* chunk c: output planes [zb[c], zb[c + 1]) */
};

/* Chunk boundaries for a single-slab plan: starts at multiples of the tile
 * depth a; with three or more chunks the first and the last are about an
 * eighth of the others (one tile depth at least), since their upload and
 * download are the part of the copies that nothing overlaps. */
void plan_chunks(const plan &pl, pipe *q)
{
    const char *e = getenv("LDCT_NLM_CHUNK_MB");
    const double mb = e ? atof(e) : 32.0;
    const double vol = sizeof(float) * (double)pl.oplane * pl.nz / 1048576.0;
    const double want = mb > 0 ? vol / mb : 1.0;
    const int n = want < 1.0 ? 1 : want > k_max_chunks - 2 ? k_max_chunks - 2 : (int)want;
    const int a = pl.dim == 3 ? pl.lz : 1, nz = pl.nz;
    const int chunk = ((nz + n - 1) / n + a - 1) / a * a;
    const int edge = ((chunk + 7) / 8 + a - 1) / a * a;
    const int last = (nz - edge) / a * a; /* start of a short last chunk */
    int c = 0;
    q->zb[c++] = 0;
    if (n >= 3 && last > edge) {
        q->zb[c++] = edge;
        for (int z = edge + chunk; z < last; z += chunk)
            q->zb[c++] = z;
        q->zb[c++] = last;
    } else {
        for (int z = chunk; z < nz; z += chunk)
            q->zb[c++] = z;
    }
    q->zb[c] = nz;
    q->nch = c;
}

/* Waits for everything queued on the pipe's streams, then frees them. */
void pipe_release(pipe *q, cudaStream_t st)
{
    const cudaStream_t s[3] = {q->cin, q->cout, q->cs[1]};
    for (int i = 0; i < 3; i++)
        if (s[i]) {
            cudaStreamSynchronize(s[i]);
            cudaStreamDestroy(s[i]);
        }
    cudaStreamSynchronize(st);
    cudaEvent_t *ev[3] = {q->up, q->padded, q->done};
    for (int k = 0; k < 3; k++)
        for (int c = 0; c < k_max_chunks; c++)
            if (ev[k][c])
                cudaEventDestroy(ev[k][c]);
    if (q->kend)
        cudaEventDestroy(q->kend);
    if (q->start)
        cudaEventDestroy(q->start);
    memset(q, 0, sizeof *q);
}

int pipe_setup(pipe *q, cudaStream_t st)
{
    CUDA_CHECK(cudaStreamCreateWithFlags(&q->cin, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&q->cout, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&q->cs[1], cudaStreamNonBlocking));
    q->cs[0] = st;
    /* uploads start after what the caller queued on st (and setup()) */
    CUDA_CHECK(cudaEventCreateWithFlags(&q->start, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventRecord(q->start, st));
    CUDA_CHECK(cudaStreamWaitEvent(q->cin, q->start, 0));
    for (int c = 0; c < q->nch; c++) {
        CUDA_CHECK(cudaEventCreateWithFlags(&q->up[c], cudaEventDisableTiming));
        CUDA_CHECK(cudaEventCreateWithFlags(&q->padded[c], cudaEventDisableTiming));
        CUDA_CHECK(cudaEventCreate(&q->done[c]));
    }
    CUDA_CHECK(cudaEventCreate(&q->kend));
    return 0;
}

/* Uploads what chunk c needs beyond *up_hi, pads its planes and queues its
 * kernel (after chunk c - 1's pad, whose planes it reads). */
int pipe_chunk(const plan &pl, const bufs &b, const pipe &q, const float *src, int c, int *up_hi,
               int *pad_hi, gpu_stage::lease *stg)
{
    const int zs = q.zb[c], ze = q.zb[c + 1];
    const bool last = ze == pl.nz;
    const int need = last || ze + pl.zh > pl.nz ? pl.nz : ze + pl.zh;
    if (need > *up_hi) {
        int rc = copy_in(stg, b.raw + (size_t)*up_hi * pl.oplane, src + (size_t)*up_hi * pl.oplane,
                         pl.oplane * (need - *up_hi), q.cin);
        if (rc)
            return rc;
        *up_hi = need;
    }
    CUDA_CHECK(cudaEventRecord(q.up[c], q.cin));
    const cudaStream_t s = q.cs[c % 2];
    CUDA_CHECK(cudaStreamWaitEvent(s, q.up[c], 0));
    if (c == 0)
        CUDA_CHECK(cudaEventRecord(b.k0, s));
    else
        CUDA_CHECK(cudaStreamWaitEvent(s, q.padded[c - 1], 0));
    /* padded plane p is volume plane p - zh; the last chunk pads the spare
     * planes the last tile row reads */
    const int phi = last ? pl.nz + 2 * pl.zh + (pl.dim == 3 ? pl.lz : 0) : ze + 2 * pl.zh;
    int rc = pad_planes(pl, b.raw, b.pad + (size_t)*pad_hi * pl.pplane, phi - *pad_hi,
                        *pad_hi - pl.zh, 0, pl.nz, s);
    if (rc)
        return rc;
    *pad_hi = phi;
    CUDA_CHECK(cudaEventRecord(q.padded[c], s));
    if ((rc = launch_filter(pl, b.pad + (size_t)zs * pl.pplane, b.out + (size_t)zs * pl.oplane,
                            ze - zs, s)) != 0)
        return rc;
    CUDA_CHECK(cudaEventRecord(q.done[c], s));
    return 0;
}

/* Downloads chunk c's output once its kernel is done. */
int pipe_download(const plan &pl, const bufs &b, const pipe &q, float *dst, int c,
                  gpu_stage::lease *stg)
{
    const int zs = q.zb[c], ze = q.zb[c + 1];
    CUDA_CHECK(cudaStreamWaitEvent(q.cout, q.done[c], 0));
    return copy_out(stg, dst + (size_t)zs * pl.oplane, b.out + (size_t)zs * pl.oplane,
                    pl.oplane * (ze - zs), q.cout);
}

/* One time point of a single-slab call in chunks; adds the time from the
 * first pad to the last kernel's end to *kernel_ms. */
int run_chunks(const plan &pl, const bufs &b, const pipe &q, const float *src, float *dst,
               gpu_stage::lease *stg, double *kernel_ms)
{
    int up_hi = 0, pad_hi = 0, rc = 0;
    for (int c = 0; c < q.nch && rc == 0; c++) {
        rc = pipe_chunk(pl, b, q, src, c, &up_hi, &pad_hi, stg);
        if (rc == 0 && c > 0)
            rc = pipe_download(pl, b, q, dst, c - 1, stg);
    }
    if (rc == 0)
        rc = pipe_download(pl, b, q, dst, q.nch - 1, stg);
    if (rc)
        return rc;
    for (int c = 0; c < q.nch; c++)
        CUDA_CHECK(cudaStreamWaitEvent(q.cs[0], q.done[c], 0));
    CUDA_CHECK(cudaEventRecord(q.kend, q.cs[0]));
    CUDA_CHECK(cudaEventSynchronize(q.kend));
    float kms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&kms, b.k0, q.kend));
    *kernel_ms += kms;
    return 0;
}

/* Events, patch weights and device buffers of a call. */
int setup(const gpu_nlm_params *p, const plan &pl, bufs *b, cudaStream_t st)
{
    float gw[3][2 * GPU_NLM_MAX_PATCH + 1];
    memset(gw, 0, sizeof gw);
    gpu__nlm_patch_weights(pl.P, p->gaussian, gw[0]);
    gpu__nlm_patch_weights(pl.P, p->gaussian, gw[1]);
    gpu__nlm_patch_weights(pl.dim == 3 ? pl.P : 0, p->gaussian, gw[2]);
    CUDA_CHECK(cudaEventCreate(&b->e0));
    CUDA_CHECK(cudaEventCreate(&b->e1));
    CUDA_CHECK(cudaEventCreate(&b->k0));
    CUDA_CHECK(cudaEventCreate(&b->k1));
    CUDA_CHECK(cudaEventRecord(b->e0, st));
    CUDA_CHECK(cudaMemcpyToSymbolAsync(c_g, gw, sizeof gw, 0, cudaMemcpyHostToDevice, st));
    CUDA_CHECK(cudaMalloc(&b->raw, sizeof(float) * pl.oplane * pl.rawmax));
    CUDA_CHECK(cudaMalloc(&b->pad, sizeof(float) * pl.pplane * pl.PZmax));
    CUDA_CHECK(cudaMalloc(&b->out, sizeof(float) * pl.oplane * pl.slab));
    return 0;
}

/* Every slab of every time point, then the call's statistics. */
int run_all(const gpu_nlm_params *p, const plan &pl, const gpu_volume *in, gpu_volume *out,
            const bufs &b, gpu_stage::lease *stg, cudaStream_t st, int dev_index)
{
    double ksum = 0;
    const size_t vol = pl.oplane * pl.nz;
    pipe q;
    memset(&q, 0, sizeof q);
    plan_chunks(pl, &q);
    const int nch = pl.nslabs == 1 ? q.nch : 1;
    if (nch > 1) {
        int rc = pipe_setup(&q, st);
        for (int t = 0; t < in->nt && rc == 0; t++)
            rc = run_chunks(pl, b, q, in->data + (size_t)t * vol, out->data + (size_t)t * vol, stg,
                            &ksum);
        pipe_release(&q, st);
        if (rc)
            return rc;
    } else {
        for (int t = 0; t < in->nt; t++)
            for (int zs = 0; zs < pl.nz; zs += pl.slab) {
                const int ze = zs + pl.slab > pl.nz ? pl.nz : zs + pl.slab;
                int rc = run_slab(pl, b, in->data + (size_t)t * vol, out->data + (size_t)t * vol,
                                  zs, ze, stg, st, &ksum);
                if (rc)
                    return rc;
            }
    }
    float tms = 0;
    CUDA_CHECK(cudaEventRecord(b.e1, st));
    CUDA_CHECK(cudaEventSynchronize(b.e1));
    CUDA_CHECK(cudaEventElapsedTime(&tms, b.e0, b.e1));
    if (p->stats) {
        p->stats->kernel_ms = ksum;
        p->stats->total_ms = tms;
        p->stats->slabs = pl.nslabs * in->nt;
        p->stats->chunks = nch;
        p->stats->kernel_cfg = pl.cfg;
    }
    log_debug("nlm%dd %dx%dx%dx%d S=%d P=%d on gpu:%d (cfg %d): %d slab(s), %d chunk(s)%s, "
              "kernels %.3f ms, total %.3f ms",
              pl.dim, pl.nx, pl.ny, pl.nz, in->nt, pl.S, pl.P, dev_index, pl.cfg, pl.nslabs, nch,
              stg ? " via pinned staging" : "", ksum, (double)tms);
    return 0;
}

int run_cuda(const gpu_nlm_params *p, const gpu_volume *in, gpu_volume *out, const gpu_device *dev,
             int dim)
{
    int rc = gpu__nlm_check(p, in, out, dim);
    if (rc)
        return rc;
    gpu_device d;
    if (dev)
        d = *dev;
    else if ((rc = gpu_device_parse("gpu", &d)) != 0)
        return rc;
    if (d.kind != GPU_DEVICE_CUDA)
        return LDCT_ENOGPU;
    float h;
    if ((rc = gpu_nlm_resolve_h(p, in, &h)) != 0)
        return rc;
    plan pl;
    plan_layout(p, in, dim, &pl);
    if ((rc = plan_slabs(&d, &pl)) != 0)
        return rc;
    pl.kh = (float)(1.4426950408889634 / ((double)h * h));
    const double np = 2.0 * pl.P + 1.0; /* v3 sums plain squares: fold g = 1/(2P+1)^3 */
    pl.kh3 = (float)(1.4426950408889634 / ((double)h * h * np * np * np));
    pl.ycut = gpu__nlm_cut_exponent(p);
    CUDA_CHECK(cudaSetDevice(d.index));
    cudaStream_t st = (cudaStream_t)d.stream;
    bufs b;
    memset(&b, 0, sizeof b);
    /* Pageable volumes go through pinned buffers (cuda_stage.cuh). */
    gpu_stage::lease stage;
    const bool staged = (!gpu_stage::host_pinned(in->data) || !gpu_stage::host_pinned(out->data)) &&
                        gpu_stage::acquire(&stage, d.index, gpu_stage::k_default_elems) == 0;
    rc = setup(p, pl, &b, st);
    if (rc == 0)
        rc = run_all(p, pl, in, out, b, staged ? &stage : NULL, st, d.index);
    cudaStreamSynchronize(st); /* queued copies end before buffers are freed */
    if (staged)
        gpu_stage::release(&stage);
    release(&b);
    return rc;
}

} // namespace

extern "C" int gpu_nlm2d_cuda(const gpu_nlm_params *p, const gpu_volume *in, gpu_volume *out,
                              const gpu_device *dev)
{
    return run_cuda(p, in, out, dev, 2);
}

extern "C" int gpu_nlm3d_cuda(const gpu_nlm_params *p, const gpu_volume *in, gpu_volume *out,
                              const gpu_device *dev)
{
    return run_cuda(p, in, out, dev, 3);
}
