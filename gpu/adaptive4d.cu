/* CUDA version of adaptive4d: the five steps of adaptive4d.h on the GPU,
 * computing what adaptive4d_ref.c defines (float accumulation instead of
 * double in the separable smoothing; tolerance in check_gpu_adaptive4d.c).
 *
 * Nonseparable filters, two back ends. Spatial: direct convolution, taps in
 * constant memory (up to 11^4), input rows of a block staged in shared
 * memory (k_conv_spatial). FFT (cuFFT): cuFFT has no 4D transform, so a 4D R2C is a 3D R2C over
 * (z,y,x) batched over t followed by a strided 1D C2C along t (and the reverse for C2R); all plans
 * share one work area. Real-to-complex transforms give the saving of the paper's "two real filters
 * in one complex FFT" through Hermitian symmetry. Every filter costs one R2C (the zero-padded
 * kernel, placed on the device) and two C2R (h*(c s) and h*c for the border correction). With
 * backend auto the first slab of each stage times both and the faster serves the stage
 * (filt_begin).
 *
 * Memory plan: the tensor grid (downsampled input and the 10 tensor, later
 * control tensor, components) stays on the device for the whole call
 * (11 floats per tensor-grid voxel: 12.9 GB for 512x512x445x20 with f = 2).
 * Full-resolution work runs in slabs along z with a halo of the filter
 * radius: a slab's region [z0 - h, z1 + h) is filtered as if it were the
 * volume, which is exact for the output planes [z0, z1) (no tap reaches past
 * the halo, and the region is cut only where the volume ends). The slab
 * height is the largest that fits the memory budget (about 44 bytes per
 * padded voxel). Slabs along t are not needed up to 100 time points of
 * 512x512 on an H200 and are not implemented.
 *
 * Callers: any host thread; work is queued on dev->stream and waited for.
 */
#include <cufft.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu/adaptive4d.h"
#include "gpu/cuda_check.cuh"

namespace
{

constexpr int NT = GPU_A4D_NTENSOR, NM = GPU_A4D_NMONO, NH = GPU_A4D_NHP;
constexpr int BLOCK = 256;

constexpr int MAX_CONST_TAPS = 11 * 11 * 11 * 11; /* spatial back end: K <= 11 */
constexpr int TILE_X = 32, TILE_Y = 8;

__constant__ float c_w[MAX_CONST_TAPS];
__constant__ float c_dirs[NH][4];
__constant__ float c_dual[NH][NH];

struct taps_t {
    float w[GPU_A4D_MAX_SIZE];
    int r;
};

struct dims {
    int x, y, z, t;
    __host__ __device__ size_t n() const
    {
        return (size_t)x * y * z * t;
    }
};

struct ptrs14 {
    float *p[NM];
};

/* Step 3's scaling of the tensor: T_ij *= dinv_i dinv_j with dinv =
 * (1/f, 1/f, 1/f, t_scale) (adaptive4d.h). */
struct ctl_params {
    float gamma, dinv_xyz, dinv_t;
};

int cufft_err(cufftResult r, const char *call, int line)
{
    log_err("adaptive4d.cu:%d: %s failed: cuFFT error %d", line, call, (int)r);
    (void)cudaGetLastError(); /* what it left must not fail the next launch check */
    return r == CUFFT_ALLOC_FAILED ? LDCT_ENOMEM_GPU : LDCT_ECUDA;
}

#define CUFFT_CHECK(call)                                                                          \
    do {                                                                                           \
        cufftResult r_ = (call);                                                                   \
        if (r_ != CUFFT_SUCCESS)                                                                   \
            return cufft_err(r_, #call, __LINE__);                                                 \
    } while (0)

unsigned blocks(size_t n)
{
    return (unsigned)((n + BLOCK - 1) / BLOCK);
}

__device__ void coords(size_t i, const dims &d, int c[4])
{
    c[0] = (int)(i % d.x);
    i /= d.x;
    c[1] = (int)(i % d.y);
    i /= d.y;
    c[2] = (int)(i % d.z);
    c[3] = (int)(i / d.z);
}

/* ---- kernels ---------------------------------------------------------------- */

/* Normalized 1D convolution along `axis` (as smooth_line in the reference). */
__global__ void k_smooth(const float *__restrict__ in, float *__restrict__ out, dims d, int axis,
                         taps_t tp)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= d.n())
        return;
    int c[4];
    coords(i, d, c);
    const int len = axis == 0 ? d.x : axis == 1 ? d.y : axis == 2 ? d.z : d.t;
    const long long stride = axis == 0   ? 1
                             : axis == 1 ? (long long)d.x
                             : axis == 2 ? (long long)d.x * d.y
                                         : (long long)d.x * d.y * d.z;
    float acc = 0.0f, norm = 0.0f;
    for (int j = -tp.r; j <= tp.r; j++) {
        int q = c[axis] + j;
        if (q < 0 || q >= len)
            continue;
        float w = tp.w[j + tp.r];
        acc += w * in[i + j * stride];
        norm += w;
    }
    out[i] = acc / norm;
}

/* dst (dims dd) = src (dims sd) at (f x, f y, f z + zoff, t). */
__global__ void k_decimate(const float *__restrict__ src, dims sd, float *__restrict__ dst, dims dd,
                           int f, int zoff)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= dd.n())
        return;
    int c[4];
    coords(i, dd, c);
    size_t s = (((size_t)c[3] * sd.z + (size_t)c[2] * f + zoff) * sd.y + (size_t)c[1] * f) * sd.x +
               (size_t)c[0] * f;
    dst[i] = src[s];
}

/* Copies planes [z0, z0 + dst.z) of a full array into a region array, or
 * back (to_full != 0) for planes [lo, hi) of the region. */
__global__ void k_planes(float *__restrict__ full, dims fd, float *__restrict__ reg, dims rd,
                         int z0, int lo, int hi, int to_full)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= rd.n())
        return;
    int c[4];
    coords(i, rd, c);
    size_t f = (((size_t)c[3] * fd.z + z0 + c[2]) * fd.y + c[1]) * fd.x + c[0];
    if (!to_full)
        reg[i] = full[f];
    else if (c[2] >= lo && c[2] < hi)
        full[f] = reg[i];
}

/* Zero-padded copy of a region array (or of its certainty, src NULL). */
__global__ void k_pad(const float *__restrict__ src, dims d, float *__restrict__ dst, dims P)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= d.n())
        return;
    int c[4];
    coords(i, d, c);
    dst[(((size_t)c[3] * P.z + c[2]) * P.y + c[1]) * P.x + c[0]] = src ? src[i] : 1.0f;
}

/* Kernel taps at wrapped positions of a zeroed padded buffer. */
__global__ void k_place(const float *__restrict__ w, int K, float *__restrict__ dst, dims P)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    const size_t n = (size_t)K * K * K * K;
    if (i >= n)
        return;
    const int r = K / 2;
    int c[4];
    dims kd = {K, K, K, K};
    coords(i, kd, c);
    const int Pd[4] = {P.x, P.y, P.z, P.t};
    for (int a = 0; a < 4; a++)
        c[a] = ((c[a] - r) % Pd[a] + Pd[a]) % Pd[a];
    atomicAdd(&dst[(((size_t)c[3] * P.z + c[2]) * P.y + c[1]) * P.x + c[0]], w[i]);
}

__global__ void k_cmul(const cufftComplex *__restrict__ a, const cufftComplex *__restrict__ b,
                       cufftComplex *__restrict__ out, size_t n)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    cufftComplex x = a[i], y = b[i];
    out[i] = make_cuFloatComplex(x.x * y.x - x.y * y.y, x.x * y.y + x.y * y.x);
}

/* out = scale r (mean NULL) or out -= scale r mean, over the region. */
__global__ void k_extract(const float *__restrict__ r, dims P, float *__restrict__ out, dims d,
                          float scale, const float *__restrict__ mean)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= d.n())
        return;
    int c[4];
    coords(i, d, c);
    float v = scale * r[(((size_t)c[3] * P.z + c[2]) * P.y + c[1]) * P.x + c[0]];
    out[i] = mean ? out[i] - v * mean[i] : v;
}

/* Direct 4D convolution with the border correction (spatial back end):
 * out(x) = sum_j w(j) s(x-j) - mean(x) sum_j w(j) over the taps whose source
 * is inside, for region planes [zlo, zhi). Taps in constant memory (all
 * threads of a warp read the same tap: one broadcast); for every (jt, jz)
 * the block's (TILE_Y + 2r) x (TILE_X + 2r) input rows are staged in shared
 * memory and the jy, jx loops read them from there. */
__global__ void __launch_bounds__(TILE_X *TILE_Y)
    k_conv_spatial(const float *__restrict__ in, dims d, int K, const float *__restrict__ mean,
                   float *__restrict__ out, int zlo, int nzr)
{
    __shared__ float tile[TILE_Y + 10][TILE_X + 10];
    const int r = K / 2, tx = threadIdx.x, ty = threadIdx.y;
    const int x = blockIdx.x * TILE_X + tx, y = blockIdx.y * TILE_Y + ty;
    const int z = zlo + (int)(blockIdx.z % (unsigned)nzr), t = (int)(blockIdx.z / (unsigned)nzr);
    float acc = 0.0f, hc = 0.0f;
    const int W = TILE_X + 2 * r, H = TILE_Y + 2 * r;
    for (int jt = -r; jt <= r; jt++) {
        const int st = t - jt;
        if (st < 0 || st >= d.t)
            continue;
        for (int jz = -r; jz <= r; jz++) {
            const int sz = z - jz;
            if (sz < 0 || sz >= d.z)
                continue;
            const float *plane = in + ((size_t)st * d.z + sz) * d.y * d.x;
            __syncthreads();
            for (int i = ty * TILE_X + tx; i < W * H; i += TILE_X * TILE_Y) {
                const int lx = i % W, ly = i / W;
                const int sx = blockIdx.x * TILE_X - r + lx, sy = blockIdx.y * TILE_Y - r + ly;
                tile[ly][lx] = sx >= 0 && sx < d.x && sy >= 0 && sy < d.y
                                   ? plane[(size_t)sy * d.x + sx]
                                   : 0.0f;
            }
            __syncthreads();
            const float *w = c_w + ((size_t)(jt + r) * K + jz + r) * K * K;
            for (int jy = -r; jy <= r; jy++) {
                const bool yin = (unsigned)(y - jy) < (unsigned)d.y;
                for (int jx = -r; jx <= r; jx++) {
                    const float wj = w[(jy + r) * K + jx + r];
                    acc += wj * tile[ty + r - jy][tx + r - jx];
                    hc += yin && (unsigned)(x - jx) < (unsigned)d.x ? wj : 0.0f;
                }
            }
        }
    }
    if (x >= d.x || y >= d.y || t >= d.t)
        return;
    const size_t i = (((size_t)t * d.z + z) * d.y + y) * d.x + x;
    out[i] = mean ? acc - hc * mean[i] : acc;
}

__device__ int tidx(int i, int j)
{
    const int lo = i < j ? i : j, hi = i < j ? j : i;
    return lo * 4 - lo * (lo + 1) / 2 + hi;
}

/* T = q1 q1^T + gamma Q2 Q2 in full-resolution coordinates, written over
 * q[0..9] (each thread reads its voxel's 14 responses first). */
__global__ void k_tensor(ptrs14 q, size_t n, ctl_params cp)
{
    size_t v = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (v >= n)
        return;
    float q1[4], Q2[4][4];
    for (int i = 0; i < 4; i++) {
        q1[i] = q.p[i][v];
        for (int j = 0; j < 4; j++)
            Q2[i][j] = q.p[4 + tidx(i, j)][v];
    }
    const float dinv[4] = {cp.dinv_xyz, cp.dinv_xyz, cp.dinv_xyz, cp.dinv_t};
    for (int i = 0; i < 4; i++)
        for (int j = i; j < 4; j++) {
            float even = 0.0f;
            for (int k = 0; k < 4; k++)
                even += Q2[i][k] * Q2[k][j];
            q.p[tidx(i, j)][v] = (q1[i] * q1[j] + cp.gamma * even) * dinv[i] * dinv[j];
        }
}

/* N(T) at voxel v: the norm in voxel coordinates (adaptive4d.h, step 4). */
__device__ double frob_at(const ptrs14 &T, size_t v, double t_scale)
{
    double t[NT];
    for (int c = 0; c < NT; c++)
        t[c] = T.p[c][v];
    return gpu__a4d_norm_voxel(t, t_scale);
}

/* Largest Frobenius norm; non-negative floats order like their bit patterns. */
__global__ void k_frob_max(ptrs14 T, size_t n, double ts, unsigned *out)
{
    __shared__ float sm[BLOCK];
    size_t v = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    sm[threadIdx.x] = v < n ? (float)frob_at(T, v, ts) : 0.0f;
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s)
            sm[threadIdx.x] = fmaxf(sm[threadIdx.x], sm[threadIdx.x + s]);
        __syncthreads();
    }
    if (threadIdx.x == 0)
        atomicMax(out, __float_as_uint(sm[0]));
}

/* Frobenius norms of every stride-th voxel (GPU_A4D_NORM_NOISE samples the
 * same voxels as the reference). */
__global__ void k_frob_sample(ptrs14 T, size_t m, size_t stride, double ts, float *out)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < m)
        out[i] = (float)frob_at(T, i * stride, ts);
}

/* Phase 1 of t-slabs: norms of the samples i0 .. i0 + m - 1 (whole-grid
 * voxel i * stride, at local index i * stride - goff). */
__global__ void k_frob_sample_at(ptrs14 T, size_t m, size_t i0, size_t stride, size_t goff,
                                 double ts, float *out)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < m)
        out[i] = (float)frob_at(T, (i0 + i) * stride - goff, ts);
}

/* Eigenvalues (unsorted) and eigenvectors, by the reference's rotations. */
__device__ void eig4(double a[16], double l[4], double v[16])
{
    gpu__a4d_jacobi4(a, v);
    for (int k = 0; k < 4; k++)
        l[k] = a[5 * k];
}

/* Control tensor in place (step 4 before smoothing). */
__global__ void k_control(ptrs14 T, size_t n, const unsigned *tmax_bits, gpu__a4d_map cp)
{
    size_t v = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (v >= n)
        return;
    const double tmax = __uint_as_float(*tmax_bits);
    double a[16], l[4], e[16], w[4] = {0, 0, 0, 0};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            a[4 * i + j] = T.p[tidx(i, j)][v];
    const double x = tmax > 0 ? frob_at(T, v, cp.t_scale) / tmax : 0;
    eig4(a, l, e);
    if (tmax > 0)
        gpu__a4d_weights(&cp, x, tmax, l, e, w);
    for (int i = 0; i < 4; i++)
        for (int j = i; j < 4; j++) {
            double c = 0;
            for (int k = 0; k < 4; k++)
                c += w[k] * e[4 * i + k] * e[4 * j + k];
            T.p[tidx(i, j)][v] = (float)c;
        }
}

/* out += c_k hp over the region planes [lo, hi); C is the whole control
 * tensor on the tensor grid (dims ld), the region starts at plane zr0. */
__global__ void k_accumulate(float *__restrict__ out, const float *__restrict__ hp, dims d, int lo,
                             int hi, int zr0, ptrs14 C, dims ld, int f, int k)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= d.n())
        return;
    int c[4];
    coords(i, d, c);
    if (c[2] < lo || c[2] >= hi)
        return;
    const int pos[3] = {c[0], c[1], c[2] + zr0}, ldim[3] = {ld.x, ld.y, ld.z};
    int i0[3], i1[3];
    float fr[3];
    for (int a = 0; a < 3; a++) {
        float u = (float)pos[a] / f;
        i0[a] = pos[a] / f;
        fr[a] = u - i0[a];
        i1[a] = i0[a] + 1 < ldim[a] ? i0[a] + 1 : i0[a];
    }
    float ct[NT];
    for (int m = 0; m < NT; m++)
        ct[m] = 0.0f;
    for (int corner = 0; corner < 8; corner++) {
        float w = 1.0f;
        int idx[3];
        for (int a = 0; a < 3; a++) {
            int h = (corner >> a) & 1;
            idx[a] = h ? i1[a] : i0[a];
            w *= h ? fr[a] : 1.0f - fr[a];
        }
        if (w == 0.0f)
            continue;
        size_t v = (((size_t)c[3] * ld.z + idx[2]) * ld.y + idx[1]) * ld.x + idx[0];
        for (int m = 0; m < NT; m++)
            ct[m] += w * C.p[m][v];
    }
    float ck = 0.0f;
    for (int l = 0; l < NH; l++) {
        float proj = 0.0f;
        for (int a = 0; a < 4; a++)
            for (int b = 0; b < 4; b++)
                proj += c_dirs[l][a] * ct[tidx(a, b)] * c_dirs[l][b];
        ck += c_dual[k][l] * proj;
    }
    out[i] += ck * hp[i];
}

/* ---- step 6 ---------------------------------------------------------------------- */

/* b = (a - b)^2: the temporal residual energy from s' (a) and L6 s' (b). */
__global__ void k_sqdiff(const float *__restrict__ a, float *__restrict__ b, size_t n)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) {
        const float d = a[i] - b[i];
        b[i] = d * d;
    }
}

/* out[i] = v[(i0 + i) * stride - goff]: samples of a tensor-grid array. */
__global__ void k_sample_at(const float *__restrict__ v, size_t m, size_t i0, size_t stride,
                            size_t goff, float *__restrict__ out)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < m)
        out[i] = v[(i0 + i) * stride - goff];
}

/* e -> S in place (gpu__a4d_static_weight). */
__global__ void k_static_map(float *e, size_t n, double eref, double static_t, double beta)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n)
        e[i] = (float)gpu__a4d_static_weight(e[i], eref, static_t, beta);
}

/* out += S (lt - out) over the region planes [lo, hi); S on the whole
 * tensor grid (dims ld), interpolated as in k_accumulate. */
__global__ void k_static_blend(float *__restrict__ out, const float *__restrict__ lt, dims d,
                               int lo, int hi, int zr0, const float *__restrict__ S, dims ld, int f)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= d.n())
        return;
    int c[4];
    coords(i, d, c);
    if (c[2] < lo || c[2] >= hi)
        return;
    const int pos[3] = {c[0], c[1], c[2] + zr0}, ldim[3] = {ld.x, ld.y, ld.z};
    int i0[3], i1[3];
    float fr[3], w8 = 0.0f;
    for (int a = 0; a < 3; a++) {
        float u = (float)pos[a] / f;
        i0[a] = pos[a] / f;
        fr[a] = u - i0[a];
        i1[a] = i0[a] + 1 < ldim[a] ? i0[a] + 1 : i0[a];
    }
    for (int corner = 0; corner < 8; corner++) {
        float w = 1.0f;
        int idx[3];
        for (int a = 0; a < 3; a++) {
            int h = (corner >> a) & 1;
            idx[a] = h ? i1[a] : i0[a];
            w *= h ? fr[a] : 1.0f - fr[a];
        }
        if (w != 0.0f)
            w8 += w * S[(((size_t)c[3] * ld.z + idx[2]) * ld.y + idx[1]) * ld.x + idx[0]];
    }
    out[i] += w8 * (lt[i] - out[i]);
}

/* ---- 4D FFT with cuFFT ------------------------------------------------------- */

int smooth_size(int n)
{
    for (;; n++) {
        int m = n;
        for (int p = 2; p <= 7; p++)
            while (m % p == 0)
                m /= p;
        if (m == 1)
            return n;
    }
}

struct fft4 {
    cufftHandle p3f = 0, p3i = 0, pt = 0;
    int made = 0;
    dims P{};
    size_t nreal = 0, ncplx = 0, work = 0;
    void *area = nullptr;
};

void fft_close(fft4 &f)
{
    if (f.made & 1)
        cufftDestroy(f.p3f);
    if (f.made & 2)
        cufftDestroy(f.p3i);
    if (f.made & 4)
        cufftDestroy(f.pt);
    cudaFree(f.area);
    f = fft4{};
}

int plan3(cufftHandle *h, const dims &P, cufftType type, cudaStream_t st, size_t *ws)
{
    long long n[3] = {P.z, P.y, P.x};
    CUFFT_CHECK(cufftCreate(h));
    CUFFT_CHECK(cufftSetAutoAllocation(*h, 0));
    CUFFT_CHECK(cufftMakePlanMany64(*h, 3, n, nullptr, 1, 0, nullptr, 1, 0, type, P.t, ws));
    CUFFT_CHECK(cufftSetStream(*h, st));
    return 0;
}

int plan_t(cufftHandle *h, const dims &P, cudaStream_t st, size_t *ws)
{
    long long n[1] = {P.t}, S = (long long)P.z * P.y * (P.x / 2 + 1);
    CUFFT_CHECK(cufftCreate(h));
    CUFFT_CHECK(cufftSetAutoAllocation(*h, 0));
    CUFFT_CHECK(cufftMakePlanMany64(*h, 1, n, n, S, 1, n, S, 1, CUFFT_C2C, S, ws));
    CUFFT_CHECK(cufftSetStream(*h, st));
    return 0;
}

/* Work-area bytes the plans of P need (estimated without making them). */
size_t fft_work_estimate(const dims &P)
{
    return (size_t)P.z * P.y * (P.x / 2 + 1) * P.t * sizeof(cufftComplex);
}

int fft_open(fft4 &f, const dims &P, cudaStream_t st)
{
    f.P = P;
    f.nreal = P.n();
    f.ncplx = (size_t)P.z * P.y * (P.x / 2 + 1) * P.t;
    size_t w[3] = {0, 0, 0};
    int rc = plan3(&f.p3f, P, CUFFT_R2C, st, &w[0]);
    f.made |= rc ? 0 : 1;
    if (!rc && !(rc = plan3(&f.p3i, P, CUFFT_C2R, st, &w[1])))
        f.made |= 2;
    if (!rc && P.t > 1 && !(rc = plan_t(&f.pt, P, st, &w[2])))
        f.made |= 4;
    f.work = w[0] > w[1] ? w[0] : w[1];
    f.work = f.work > w[2] ? f.work : w[2];
    if (!rc && f.work) {
        CUDA_CHECK(cudaMalloc(&f.area, f.work));
        CUFFT_CHECK(cufftSetWorkArea(f.p3f, f.area));
        CUFFT_CHECK(cufftSetWorkArea(f.p3i, f.area));
        if (f.made & 4)
            CUFFT_CHECK(cufftSetWorkArea(f.pt, f.area));
    }
    return rc;
}

int fft_fwd(fft4 &f, float *r, cufftComplex *c)
{
    CUFFT_CHECK(cufftExecR2C(f.p3f, r, c));
    if (f.made & 4)
        CUFFT_CHECK(cufftExecC2C(f.pt, c, c, CUFFT_FORWARD));
    return 0;
}

int fft_inv(fft4 &f, cufftComplex *c, float *r)
{
    if (f.made & 4)
        CUFFT_CHECK(cufftExecC2C(f.pt, c, c, CUFFT_INVERSE));
    CUFFT_CHECK(cufftExecC2R(f.p3i, c, r));
    return 0;
}

/* ---- the filtering primitive on one region ------------------------------------ */

struct filt {
    fft4 f;
    dims d{};
    const float *in = nullptr; /* the region (spatial back end) */
    int spatial = 0;
    cufftComplex *S = nullptr, *Cs = nullptr, *K = nullptr, *W = nullptr;
    float *R = nullptr;
    cudaStream_t st = nullptr;
};

dims padded(const dims &d, int r)
{
    return dims{smooth_size(d.x + r), smooth_size(d.y + r), smooth_size(d.z + r),
                smooth_size(d.t + r)};
}

/* Device bytes of one region's filtering (FFT buffers and work area). */
size_t filt_bytes(const dims &d, int r)
{
    dims P = padded(d, r);
    size_t nc = (size_t)P.z * P.y * (P.x / 2 + 1) * P.t;
    return 4 * nc * sizeof(cufftComplex) + P.n() * sizeof(float) + fft_work_estimate(P);
}

void filt_close(filt &F)
{
    fft_close(F.f);
    cudaFree(F.S);
    cudaFree(F.Cs);
    cudaFree(F.K);
    cudaFree(F.W);
    cudaFree(F.R);
    F = filt{};
}

int pad_fwd(filt &F, const float *src, cufftComplex *dst)
{
    CUDA_CHECK(cudaMemsetAsync(F.R, 0, F.f.nreal * sizeof(float), F.st));
    k_pad<<<blocks(F.d.n()), BLOCK, 0, F.st>>>(src, F.d, F.R, F.f.P);
    CUDA_CHECK(cudaGetLastError());
    return fft_fwd(F.f, F.R, dst);
}

int filt_open(filt &F, const float *in, const dims &d, int r, cudaStream_t st, int spatial)
{
    F.d = d;
    F.st = st;
    F.in = in;
    F.spatial = spatial;
    if (spatial)
        return 0;
    int rc = fft_open(F.f, padded(d, r), st);
    if (rc)
        return rc;
    const size_t cb = F.f.ncplx * sizeof(cufftComplex);
    CUDA_CHECK(cudaMalloc(&F.S, cb));
    CUDA_CHECK(cudaMalloc(&F.Cs, cb));
    CUDA_CHECK(cudaMalloc(&F.K, cb));
    CUDA_CHECK(cudaMalloc(&F.W, cb));
    CUDA_CHECK(cudaMalloc(&F.R, F.f.nreal * sizeof(float)));
    if ((rc = pad_fwd(F, in, F.S)) != 0)
        return rc;
    return pad_fwd(F, nullptr, F.Cs);
}

/* The spatial back end for region planes [zlo, zlo + nzr). */
int spatial_apply(filt &F, const float *w, int K, const float *mean, float *out, int zlo, int nzr)
{
    if (K > 11)
        return LDCT_EUNSUPPORTED;
    CUDA_CHECK(cudaMemcpyToSymbolAsync(c_w, w, sizeof(float) * K * K * K * K, 0,
                                       cudaMemcpyDeviceToDevice, F.st));
    dim3 grid((F.d.x + TILE_X - 1) / TILE_X, (F.d.y + TILE_Y - 1) / TILE_Y, (unsigned)nzr * F.d.t);
    k_conv_spatial<<<grid, dim3(TILE_X, TILE_Y), 0, F.st>>>(F.in, F.d, K, mean, out, zlo, nzr);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

/* out = h*(c s) - (h*c) mean over the region (kernel w of size K on the device). */
int filt_apply(filt &F, const float *w, int K, const float *mean, float *out)
{
    if (F.spatial)
        return spatial_apply(F, w, K, mean, out, 0, F.d.z);
    CUDA_CHECK(cudaMemsetAsync(F.R, 0, F.f.nreal * sizeof(float), F.st));
    k_place<<<blocks((size_t)K * K * K * K), BLOCK, 0, F.st>>>(w, K, F.R, F.f.P);
    CUDA_CHECK(cudaGetLastError());
    int rc = fft_fwd(F.f, F.R, F.K);
    if (rc)
        return rc;
    const float scale = 1.0f / (float)F.f.nreal;
    const cufftComplex *spec[2] = {F.S, F.Cs};
    for (int pass = 0; pass < (mean ? 2 : 1); pass++) {
        k_cmul<<<blocks(F.f.ncplx), BLOCK, 0, F.st>>>(F.K, spec[pass], F.W, F.f.ncplx);
        CUDA_CHECK(cudaGetLastError());
        if ((rc = fft_inv(F.f, F.W, F.R)) != 0)
            return rc;
        k_extract<<<blocks(F.d.n()), BLOCK, 0, F.st>>>(F.R, F.f.P, out, F.d, scale,
                                                       pass ? mean : nullptr);
        CUDA_CHECK(cudaGetLastError());
    }
    return 0;
}

/* ---- call state ------------------------------------------------------------------ */

struct run_state {
    const gpu_adaptive4d_params *p;
    const gpu_a4d_bank *b;
    const gpu_volume *in;
    gpu_volume *out;
    cudaStream_t st;
    size_t budget;
    dims full{}, low{};
    float *d_low = nullptr, *d_T[NT] = {nullptr};
    float *d_mono = nullptr, *d_hp = nullptr;
    unsigned *d_max = nullptr;
    int slabs = 0, fft_slabs = 0;
    /* Slabs along t (see gpu__a4d_t_halo): 0 the whole filter with its own
     * reference; 1 the first pass (norm samples or maximum at the region's
     * output time points, whole-grid voxels [g0, g1), the region's grid
     * starting at voxel goff of a whole grid of n_all voxels); 2 the whole
     * filter with the reference `ref`. */
    int phase = 0;
    float ref = 0;
    size_t g0 = 0, g1 = 0, goff = 0, n_all = 0;
    float *samples = nullptr; /* phase 1, median: the whole grid's samples */
    float *d_S = nullptr;     /* step 6: residual energy e, then the weight S */
    float eref = 0;           /* phase 2: step 6's reference */
    float ref_cap = 0;        /* noise caps of both references (gpu__a4d_capped), 0: none */
    float eref_cap = 0;
    float *esamples = nullptr; /* phase 1: the whole grid's e samples */
    double max = 0;            /* phase 1, maximum: the region's contribution */
    int spatial[2] = {-1, -1}; /* per stage (0 tensor, 1 reconstruction): -1 undecided */
};

float elapsed_ms(cudaEvent_t a, cudaEvent_t b)
{
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, a, b);
    return ms;
}

/* Opens F on a region with the stage's back end. With backend auto, the
 * stage's first slab measures both: the FFT set-up and first filter, and
 * the spatial filter on one middle plane (scaled to the region and to nk filters),
 * and keeps the faster for the stage. When it measured, the response of
 * kernel w0 is already in out0 (*done0 = 1). */
int filt_begin(run_state &s, int stage, filt &F, const float *in, const dims &rd, const float *w0,
               int K, int nk, const float *mean, float *out0, int *done0)
{
    *done0 = 0;
    if (s.spatial[stage] < 0 && (s.p->backend != GPU_A4D_AUTO || K > 11))
        s.spatial[stage] = s.p->backend == GPU_A4D_SPATIAL;
    if (s.spatial[stage] >= 0)
        return filt_open(F, in, rd, K / 2, s.st, s.spatial[stage]);
    cudaEvent_t ev[4];
    for (int i = 0; i < 4; i++)
        CUDA_CHECK(cudaEventCreate(&ev[i]));
    int rc = 0;
    CUDA_CHECK_GOTO(cudaEventRecord(ev[0], s.st), rc, out);
    if ((rc = filt_open(F, in, rd, K / 2, s.st, 0)) != 0)
        goto out;
    CUDA_CHECK_GOTO(cudaEventRecord(ev[1], s.st), rc, out);
    /* Spatial probe on a middle plane (a border plane has fewer taps); the
     * FFT result below overwrites it. */
    if ((rc = spatial_apply(F, w0, K, mean, out0, rd.z / 2, 1)) != 0)
        goto out;
    CUDA_CHECK_GOTO(cudaEventRecord(ev[2], s.st), rc, out);
    if ((rc = filt_apply(F, w0, K, mean, out0)) != 0)
        goto out;
    CUDA_CHECK_GOTO(cudaEventRecord(ev[3], s.st), rc, out);
    CUDA_CHECK_GOTO(cudaEventSynchronize(ev[3]), rc, out);
    {
        const double fft = elapsed_ms(ev[0], ev[1]) + (double)nk * elapsed_ms(ev[2], ev[3]);
        const double spatial = (double)nk * rd.z * elapsed_ms(ev[1], ev[2]);
        s.spatial[stage] = spatial < fft;
        log_info("adaptive4d: stage %d, %d^4 filters: FFT %.1f ms, spatial %.1f ms (estimates); "
                 "using %s",
                 stage, K, fft, spatial, s.spatial[stage] ? "spatial" : "FFT");
    }
    if (s.spatial[stage]) {
        filt_close(F);
        rc = filt_open(F, in, rd, K / 2, s.st, 1);
    } else {
        *done0 = 1;
    }
out:
    for (int i = 0; i < 4; i++)
        cudaEventDestroy(ev[i]);
    return rc;
}

taps_t taps_of(float sigma)
{
    taps_t t{};
    t.r = gpu__a4d_gauss_taps(sigma, t.w);
    return t;
}

/* Separable normalized smoothing of a region array over `axes` (tmp: same size). */
int smooth(cudaStream_t st, float *v, float *tmp, const dims &d, const taps_t &tp, int axes)
{
    for (int a = 0; a < 4; a++) {
        if (!((axes >> a) & 1))
            continue;
        k_smooth<<<blocks(d.n()), BLOCK, 0, st>>>(v, tmp, d, a, tp);
        CUDA_CHECK(cudaGetLastError());
        CUDA_CHECK(cudaMemcpyAsync(v, tmp, d.n() * sizeof(float), cudaMemcpyDeviceToDevice, st));
    }
    return 0;
}

/* Host planes [z0, z0 + d.z) of every time point to a device region array,
 * or back for region planes [lo, hi). */
int upload_planes(cudaStream_t st, const gpu_volume *v, int z0, float *dst, const dims &d)
{
    const size_t plane = (size_t)v->nx * v->ny;
    for (int t = 0; t < d.t; t++)
        CUDA_CHECK(cudaMemcpyAsync(
            dst + (size_t)t * d.z * plane, v->data + ((size_t)t * v->nz + z0) * plane,
            (size_t)d.z * plane * sizeof(float), cudaMemcpyHostToDevice, st));
    return 0;
}

int download_planes(cudaStream_t st, const float *src, const dims &d, int lo, int hi, int z0,
                    gpu_volume *v)
{
    const size_t plane = (size_t)v->nx * v->ny;
    for (int t = 0; t < d.t; t++)
        CUDA_CHECK(cudaMemcpyAsync(
            v->data + ((size_t)t * v->nz + z0 + lo) * plane, src + ((size_t)t * d.z + lo) * plane,
            (size_t)(hi - lo) * plane * sizeof(float), cudaMemcpyDeviceToHost, st));
    return 0;
}

/* Output planes per slab so that `per_plane(region planes)` bytes fit. */
template <typename F> int slab_height(int nz, int halo, size_t avail, F bytes_for)
{
    int h = nz;
    while (h > 1 && bytes_for(h + 2 * halo < nz ? h + 2 * halo : nz) > avail)
        h = (h + 1) / 2;
    return h;
}

/* ---- step 1: the downsampled volume ------------------------------------------------ */

int make_low(run_state &s)
{
    const int f = s.p->downsample;
    CUDA_CHECK(cudaMalloc(&s.d_low, s.low.n() * sizeof(float)));
    const size_t plane = (size_t)s.full.x * s.full.y * s.full.t * sizeof(float);
    const size_t avail = s.budget > 2 * plane ? s.budget / 2 : 2 * plane;
    int h = slab_height(s.low.z, 2, avail / f, [&](int planes) { return 2 * plane * planes; });
    float *reg = nullptr, *tmp = nullptr;
    int rc = 0;
    static const taps_t binom = {{1 / 16.f, 4 / 16.f, 6 / 16.f, 4 / 16.f, 1 / 16.f}, 2};
    for (int z0 = 0; z0 < s.low.z && !rc; z0 += h) {
        int z1 = z0 + h < s.low.z ? z0 + h : s.low.z;
        int r0 = f * z0 - (f > 1 ? 2 : 0), r1 = f * (z1 - 1) + 1 + (f > 1 ? 2 : 0);
        r0 = r0 < 0 ? 0 : r0;
        r1 = r1 > s.full.z ? s.full.z : r1;
        dims rd = {s.full.x, s.full.y, r1 - r0, s.full.t};
        if (!reg) {
            size_t cap = (size_t)s.full.x * s.full.y * s.full.t *
                         (size_t)(f * h + 5 < s.full.z ? f * h + 5 : s.full.z);
            CUDA_CHECK_GOTO(cudaMalloc(&reg, cap * sizeof(float)), rc, done);
            CUDA_CHECK_GOTO(cudaMalloc(&tmp, cap * sizeof(float)), rc, done);
        }
        if ((rc = upload_planes(s.st, s.in, r0, reg, rd)) != 0)
            break;
        if (f > 1 && (rc = smooth(s.st, reg, tmp, rd, binom, 0x7)) != 0)
            break;
        dims ld = {s.low.x, s.low.y, z1 - z0, s.low.t};
        k_decimate<<<blocks(ld.n()), BLOCK, 0, s.st>>>(reg, rd, tmp, ld, f, f * z0 - r0);
        CUDA_CHECK_GOTO(cudaGetLastError(), rc, done);
        k_planes<<<blocks(ld.n()), BLOCK, 0, s.st>>>(s.d_low, s.low, tmp, ld, z0, 0, ld.z, 1);
        CUDA_CHECK_GOTO(cudaGetLastError(), rc, done);
    }
done:
    CUDA_CHECK(cudaStreamSynchronize(s.st));
    cudaFree(reg);
    cudaFree(tmp);
    return rc;
}

/* ---- steps 2-3: structure tensor, slab by slab ------------------------------------ */

int tensor_slab(run_state &s, int z0, int z1, int halo, float *const *q, float *mean, float *tmp)
{
    const int r0 = z0 - halo < 0 ? 0 : z0 - halo, r1 = z1 + halo > s.low.z ? s.low.z : z1 + halo;
    dims rd = {s.low.x, s.low.y, r1 - r0, s.low.t};
    float *reg = q[NM]; /* the region's input */
    k_planes<<<blocks(rd.n()), BLOCK, 0, s.st>>>(s.d_low, s.low, reg, rd, r0, 0, 0, 0);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemcpyAsync(mean, reg, rd.n() * sizeof(float), cudaMemcpyDeviceToDevice, s.st));
    int rc = smooth(s.st, mean, tmp, rd, taps_of(1.0f), 0xf);
    filt F;
    const int K = s.b->mono_size;
    const size_t kn = (size_t)K * K * K * K;
    int done0 = 0;
    if (!rc)
        rc = filt_begin(s, 0, F, reg, rd, s.d_mono, K, NM, mean, q[0], &done0);
    for (int k = done0; k < NM && !rc; k++)
        rc = filt_apply(F, s.d_mono + k * kn, K, mean, q[k]);
    filt_close(F);
    if (rc)
        return rc;
    ptrs14 qp;
    for (int k = 0; k < NM; k++)
        qp.p[k] = q[k];
    ctl_params cp = {s.p->gamma, 1.0f / s.p->downsample, s.p->t_scale};
    k_tensor<<<blocks(rd.n()), BLOCK, 0, s.st>>>(qp, rd.n(), cp);
    CUDA_CHECK(cudaGetLastError());
    const taps_t tt = taps_of(s.p->tensor_sigma);
    for (int c = 0; c < NT && !rc; c++) {
        rc = smooth(s.st, q[c], tmp, rd, tt, 0xf);
        k_planes<<<blocks(rd.n()), BLOCK, 0, s.st>>>(s.d_T[c], s.low, q[c], rd, r0, z0 - r0,
                                                     z1 - r0, 1);
        CUDA_CHECK(cudaGetLastError());
    }
    return rc;
}

int make_tensor(run_state &s)
{
    for (int c = 0; c < NT; c++)
        CUDA_CHECK(cudaMalloc(&s.d_T[c], s.low.n() * sizeof(float)));
    const int K = s.b->mono_size, halo = (K / 2 > 3 ? K / 2 : 3) + taps_of(s.p->tensor_sigma).r;
    const size_t plane = (size_t)s.low.x * s.low.y * s.low.t;
    const size_t used = (NT + 1 + (s.d_S != nullptr)) * s.low.n() * sizeof(float);
    const size_t avail = s.budget > used ? s.budget - used : 0;
    auto bytes = [&](int planes) {
        dims rd = {s.low.x, s.low.y, planes, s.low.t};
        return (NM + 3) * plane * planes * sizeof(float) + filt_bytes(rd, K / 2);
    };
    const int h = slab_height(s.low.z, halo, avail, bytes);
    const int hr = h + 2 * halo < s.low.z ? h + 2 * halo : s.low.z;
    if (bytes(hr) > avail)
        return LDCT_ENOMEM_GPU;
    float *q[NM + 1] = {nullptr}, *mean = nullptr, *tmp = nullptr;
    int rc = 0;
    for (int k = 0; k <= NM; k++)
        CUDA_CHECK_GOTO(cudaMalloc(&q[k], plane * hr * sizeof(float)), rc, done);
    CUDA_CHECK_GOTO(cudaMalloc(&mean, plane * hr * sizeof(float)), rc, done);
    CUDA_CHECK_GOTO(cudaMalloc(&tmp, plane * hr * sizeof(float)), rc, done);
    for (int z0 = 0; z0 < s.low.z && !rc; z0 += h)
        rc = tensor_slab(s, z0, z0 + h < s.low.z ? z0 + h : s.low.z, halo, q, mean, tmp);
done:
    cudaStreamSynchronize(s.st);
    for (int k = 0; k <= NM; k++)
        cudaFree(q[k]);
    cudaFree(mean);
    cudaFree(tmp);
    return rc;
}

/* ---- step 4: control tensor ---------------------------------------------------------- */

/* The reference of the M-function into s.d_max (float bits): the maximum
 * ||T||, or the median of the sampled norms (sorted on the host, as the
 * reference does: at most GPU_A4D_NORM_SAMPLES floats). */
int norm_reference(run_state &s, const ptrs14 &T)
{
    const size_t n = s.low.n();
    if (s.p->m_norm == GPU_A4D_NORM_MAX) {
        CUDA_CHECK(cudaMemsetAsync(s.d_max, 0, sizeof(unsigned), s.st));
        k_frob_max<<<blocks(n), BLOCK, 0, s.st>>>(T, n, s.p->t_scale, s.d_max);
        CUDA_CHECK(cudaGetLastError());
        return 0;
    }
    const size_t stride = gpu__a4d_norm_stride(n), m = (n + stride - 1) / stride;
    float *d_s = nullptr, *h_s = (float *)malloc(m * sizeof(float));
    if (!h_s)
        return -ENOMEM;
    int rc = 0;
    if (cudaMalloc(&d_s, m * sizeof(float)) != cudaSuccess) {
        (void)cudaGetLastError(); /* refused: the next call's check must not see it */
        free(h_s);
        return LDCT_ENOMEM_GPU;
    }
    k_frob_sample<<<blocks(m), BLOCK, 0, s.st>>>(T, m, stride, s.p->t_scale, d_s);
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(h_s, d_s, m * sizeof(float), cudaMemcpyDeviceToHost, s.st);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(s.st);
    if (e == cudaSuccess) {
        float med = (float)gpu__a4d_capped("tensor norm", gpu__a4d_norm_median(h_s, m), s.ref_cap);
        e = cudaMemcpy(s.d_max, &med, sizeof med, cudaMemcpyHostToDevice);
    }
    if (e != cudaSuccess) {
        log_err("adaptive4d: norm reference: %s", cudaGetErrorString(e));
        (void)cudaGetLastError();
        rc = LDCT_ECUDA;
    }
    cudaFree(d_s);
    free(h_s);
    return rc;
}

/* Phase 1 of t-slabs: this region's samples (or maximum) of ||T|| at its
 * output time points. */
int collect_norms(run_state &s, const ptrs14 &T)
{
    if (s.p->m_norm == GPU_A4D_NORM_MAX) {
        ptrs14 sub = T;
        for (int c = 0; c < NT; c++)
            sub.p[c] = T.p[c] + (s.g0 - s.goff);
        CUDA_CHECK(cudaMemsetAsync(s.d_max, 0, sizeof(unsigned), s.st));
        k_frob_max<<<blocks(s.g1 - s.g0), BLOCK, 0, s.st>>>(sub, s.g1 - s.g0, s.p->t_scale,
                                                            s.d_max);
        CUDA_CHECK(cudaGetLastError());
        float m = 0;
        CUDA_CHECK(cudaMemcpyAsync(&m, s.d_max, sizeof m, cudaMemcpyDeviceToHost, s.st));
        CUDA_CHECK(cudaStreamSynchronize(s.st));
        s.max = m;
        return 0;
    }
    size_t i0, i1;
    gpu__a4d_norm_range(s.n_all, s.g0, s.g1, &i0, &i1);
    if (i1 <= i0)
        return 0;
    float *d_s = nullptr;
    CUDA_CHECK(cudaMalloc(&d_s, (i1 - i0) * sizeof(float)));
    k_frob_sample_at<<<blocks(i1 - i0), BLOCK, 0, s.st>>>(
        T, i1 - i0, i0, gpu__a4d_norm_stride(s.n_all), s.goff, s.p->t_scale, d_s);
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(s.samples + i0, d_s, (i1 - i0) * sizeof(float), cudaMemcpyDeviceToHost,
                            s.st);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(s.st);
    cudaFree(d_s);
    if (e != cudaSuccess) {
        log_err("adaptive4d: t-slab norms: %s", cudaGetErrorString(e));
        (void)cudaGetLastError();
        return LDCT_ECUDA;
    }
    return 0;
}

/* ---- step 6 on the tensor grid ------------------------------------------------------- */

/* e (adaptive4d.h, step 6) into s.d_S, from the resident s.d_low. */
int make_static_energy(run_state &s)
{
    const size_t n = s.low.n();
    float *tmp = nullptr;
    CUDA_CHECK(cudaMalloc(&s.d_S, n * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&tmp, n * sizeof(float)));
    const taps_t t6 = taps_of(s.p->static_sigma_t);
    int rc = 0;
    CUDA_CHECK_GOTO(
        cudaMemcpyAsync(s.d_S, s.d_low, n * sizeof(float), cudaMemcpyDeviceToDevice, s.st), rc,
        done);
    if ((rc = smooth(s.st, s.d_S, tmp, s.low, t6, 0x8)) != 0)
        goto done;
    k_sqdiff<<<blocks(n), BLOCK, 0, s.st>>>(s.d_low, s.d_S, n);
    CUDA_CHECK_GOTO(cudaGetLastError(), rc, done);
    if ((rc = smooth(s.st, s.d_S, tmp, s.low, t6, 0x8)) == 0)
        rc = smooth(s.st, s.d_S, tmp, s.low, taps_of(s.p->control_sigma), 0xf);
done:
    cudaStreamSynchronize(s.st);
    cudaFree(tmp);
    return rc;
}

/* Samples i0 .. i1 - 1 of s.d_S (whole-grid voxel i * stride, local index
 * i * stride - goff) to the host array h + i0. */
int sample_energy(run_state &s, size_t i0, size_t i1, size_t stride, size_t goff, float *h)
{
    if (i1 <= i0)
        return 0;
    float *d_s = nullptr;
    CUDA_CHECK(cudaMalloc(&d_s, (i1 - i0) * sizeof(float)));
    k_sample_at<<<blocks(i1 - i0), BLOCK, 0, s.st>>>(s.d_S, i1 - i0, i0, stride, goff, d_s);
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(h + i0, d_s, (i1 - i0) * sizeof(float), cudaMemcpyDeviceToHost, s.st);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(s.st);
    cudaFree(d_s);
    if (e != cudaSuccess) {
        log_err("adaptive4d: step 6 samples: %s", cudaGetErrorString(e));
        (void)cudaGetLastError();
        return LDCT_ECUDA;
    }
    return 0;
}

/* Phase 1 of t-slabs: this region's e samples at its output time points. */
int collect_energy(run_state &s)
{
    size_t i0, i1;
    gpu__a4d_norm_range(s.n_all, s.g0, s.g1, &i0, &i1);
    return sample_energy(s, i0, i1, gpu__a4d_norm_stride(s.n_all), s.goff, s.esamples);
}

/* e -> S: the reference (the median of e's samples, or phase 2's), the
 * mapping and the smoothing (tmp: a tensor-grid array). */
int static_weights(run_state &s, float *tmp)
{
    double eref = s.eref;
    if (s.phase != 2) {
        const size_t n = s.low.n(), stride = gpu__a4d_norm_stride(n), m = (n + stride - 1) / stride;
        float *h = (float *)malloc(m * sizeof(float));
        if (!h)
            return -ENOMEM;
        int rc = sample_energy(s, 0, m, stride, 0, h);
        eref = rc ? 0 : gpu__a4d_capped("step 6 energy", gpu__a4d_norm_median(h, m), s.eref_cap);
        free(h);
        if (rc)
            return rc;
    }
    const size_t n = s.low.n();
    k_static_map<<<blocks(n), BLOCK, 0, s.st>>>(s.d_S, n, eref, s.p->static_t, s.p->m_beta);
    CUDA_CHECK(cudaGetLastError());
    return smooth(s.st, s.d_S, tmp, s.low, taps_of(s.p->control_sigma), 0xf);
}

int make_control(run_state &s)
{
    ptrs14 T{};
    for (int c = 0; c < NT; c++)
        T.p[c] = s.d_T[c];
    CUDA_CHECK(cudaMalloc(&s.d_max, sizeof(unsigned)));
    if (s.phase == 1) {
        int rc1 = collect_norms(s, T);
        return rc1 || !s.d_S ? rc1 : collect_energy(s);
    }
    int rc = 0;
    if (s.phase == 2)
        CUDA_CHECK(cudaMemcpy(s.d_max, &s.ref, sizeof s.ref, cudaMemcpyHostToDevice));
    else
        rc = norm_reference(s, T);
    if (rc)
        return rc;
    const gpu_adaptive4d_params *p = s.p;
    const gpu__a4d_map cp = {p->m_alpha,  p->m_beta,  p->m_sigma * p->strength,
                             p->mu_alpha, p->mu_beta, p->m_pass,
                             p->pass_t,   p->t_scale};
    k_control<<<blocks(s.low.n()), BLOCK, 0, s.st>>>(T, s.low.n(), s.d_max, cp);
    CUDA_CHECK(cudaGetLastError());
    float *tmp = nullptr;
    CUDA_CHECK(cudaMalloc(&tmp, s.low.n() * sizeof(float)));
    const taps_t ct = taps_of(p->control_sigma);
    for (int c = 0; c < NT && !rc; c++)
        rc = smooth(s.st, s.d_T[c], tmp, s.low, ct, 0xf);
    if (!rc && s.d_S)
        rc = static_weights(s, tmp);
    cudaStreamSynchronize(s.st);
    cudaFree(tmp);
    return rc;
}

/* ---- step 5: reconstruction, slab by slab ----------------------------------------------- */

struct recon_bufs {
    float *in, *lp, *hp, *out, *tmp;
};

int recon_slab(run_state &s, int z0, int z1, int halo, const recon_bufs &B)
{
    const int r0 = z0 - halo < 0 ? 0 : z0 - halo, r1 = z1 + halo > s.full.z ? s.full.z : z1 + halo;
    dims rd = {s.full.x, s.full.y, r1 - r0, s.full.t};
    int rc = upload_planes(s.st, s.in, r0, B.in, rd);
    if (rc)
        return rc;
    CUDA_CHECK(cudaMemcpyAsync(B.lp, B.in, rd.n() * sizeof(float), cudaMemcpyDeviceToDevice, s.st));
    taps_t lp{}, lpt{};
    lp.r = s.b->lp_radius;
    memcpy(lp.w, s.b->lp, sizeof lp.w);
    lpt.r = s.b->lp_t_radius;
    memcpy(lpt.w, s.b->lp_t, sizeof lpt.w);
    if ((rc = smooth(s.st, B.lp, B.tmp, rd, lp, 0x7)) != 0 ||
        (rc = smooth(s.st, B.lp, B.tmp, rd, lpt, 0x8)) != 0)
        return rc;
    CUDA_CHECK(
        cudaMemcpyAsync(B.out, B.lp, rd.n() * sizeof(float), cudaMemcpyDeviceToDevice, s.st));
    filt F;
    const int K = s.b->recon_size;
    const size_t kn = (size_t)K * K * K * K;
    int done0 = 0;
    rc = filt_begin(s, 1, F, B.in, rd, s.d_hp, K, NH, B.lp, B.hp, &done0);
    s.fft_slabs += !F.spatial;
    ptrs14 C{};
    for (int c = 0; c < NT; c++)
        C.p[c] = s.d_T[c];
    for (int k = 0; k < NH && !rc; k++) {
        if (k > 0 || !done0)
            rc = filt_apply(F, s.d_hp + k * kn, K, B.lp, B.hp);
        if (rc)
            break;
        k_accumulate<<<blocks(rd.n()), BLOCK, 0, s.st>>>(B.out, B.hp, rd, z0 - r0, z1 - r0, r0, C,
                                                         s.low, s.p->downsample, k);
        CUDA_CHECK_GOTO(cudaGetLastError(), rc, done);
    }
    if (!rc && s.d_S) { /* step 6; B.lp is free now */
        CUDA_CHECK_GOTO(
            cudaMemcpyAsync(B.lp, B.out, rd.n() * sizeof(float), cudaMemcpyDeviceToDevice, s.st),
            rc, done);
        if ((rc = smooth(s.st, B.lp, B.tmp, rd, taps_of(s.p->static_sigma_t), 0x8)) != 0)
            goto done;
        k_static_blend<<<blocks(rd.n()), BLOCK, 0, s.st>>>(B.out, B.lp, rd, z0 - r0, z1 - r0, r0,
                                                           s.d_S, s.low, s.p->downsample);
        CUDA_CHECK_GOTO(cudaGetLastError(), rc, done);
    }
    if (!rc)
        rc = download_planes(s.st, B.out, rd, z0 - r0, z1 - r0, r0, s.out);
done:
    cudaStreamSynchronize(s.st);
    filt_close(F);
    return rc;
}

int reconstruct(run_state &s)
{
    const int K = s.b->recon_size, halo = K / 2 > s.b->lp_radius ? K / 2 : s.b->lp_radius;
    const size_t plane = (size_t)s.full.x * s.full.y * s.full.t;
    const size_t used = (NT + 1 + (s.d_S != nullptr)) * s.low.n() * sizeof(float);
    const size_t avail = s.budget > used ? s.budget - used : 0;
    auto bytes = [&](int planes) {
        dims rd = {s.full.x, s.full.y, planes, s.full.t};
        return 5 * plane * planes * sizeof(float) + filt_bytes(rd, K / 2);
    };
    const int h = slab_height(s.full.z, halo, avail, bytes);
    const int hr = h + 2 * halo < s.full.z ? h + 2 * halo : s.full.z;
    if (bytes(hr) > avail)
        return LDCT_ENOMEM_GPU;
    recon_bufs B = {nullptr, nullptr, nullptr, nullptr, nullptr};
    float **all[5] = {&B.in, &B.lp, &B.hp, &B.out, &B.tmp};
    int rc = 0;
    for (int i = 0; i < 5; i++)
        CUDA_CHECK_GOTO(cudaMalloc(all[i], plane * hr * sizeof(float)), rc, done);
    for (int z0 = 0; z0 < s.full.z && !rc; z0 += h, s.slabs++)
        rc = recon_slab(s, z0, z0 + h < s.full.z ? z0 + h : s.full.z, halo, B);
done:
    for (int i = 0; i < 5; i++)
        cudaFree(*all[i]);
    return rc;
}

/* ---- the call ------------------------------------------------------------------------- */

int upload_bank(run_state &s)
{
    const gpu_a4d_bank *b = s.b;
    const size_t km = (size_t)b->mono_size * b->mono_size * b->mono_size * b->mono_size;
    const size_t kr = (size_t)b->recon_size * b->recon_size * b->recon_size * b->recon_size;
    CUDA_CHECK(cudaMalloc(&s.d_mono, km * NM * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&s.d_hp, kr * NH * sizeof(float)));
    CUDA_CHECK(
        cudaMemcpyAsync(s.d_mono, b->mono, km * NM * sizeof(float), cudaMemcpyHostToDevice, s.st));
    CUDA_CHECK(
        cudaMemcpyAsync(s.d_hp, b->hp, kr * NH * sizeof(float), cudaMemcpyHostToDevice, s.st));
    float dirs[NH][4], dual[NH][NH];
    for (int k = 0; k < NH; k++) {
        for (int a = 0; a < 4; a++)
            dirs[k][a] = (float)b->dirs[k][a];
        for (int l = 0; l < NH; l++)
            dual[k][l] = (float)b->dual[k][l];
    }
    CUDA_CHECK(cudaMemcpyToSymbolAsync(c_dirs, dirs, sizeof dirs, 0, cudaMemcpyHostToDevice, s.st));
    CUDA_CHECK(cudaMemcpyToSymbolAsync(c_dual, dual, sizeof dual, 0, cudaMemcpyHostToDevice, s.st));
    CUDA_CHECK(cudaStreamSynchronize(s.st));
    return 0;
}

void state_free(run_state &s)
{
    cudaFree(s.d_low);
    for (int c = 0; c < NT; c++)
        cudaFree(s.d_T[c]);
    cudaFree(s.d_mono);
    cudaFree(s.d_hp);
    cudaFree(s.d_max);
    cudaFree(s.d_S);
}

int run(run_state &s)
{
    int rc = upload_bank(s);
    if (!rc)
        rc = make_low(s);
    if (!rc && s.p->static_sigma_t > 0)
        rc = make_static_energy(s);
    if (!rc)
        rc = make_tensor(s);
    cudaFree(s.d_low);
    s.d_low = nullptr;
    if (!rc)
        rc = make_control(s);
    if (!rc && s.phase != 1)
        rc = reconstruct(s);
    return rc;
}

gpu_volume time_view(const gpu_volume *v, float *data, int t0, int t1)
{
    gpu_volume r = *v;
    r.data = data + (size_t)t0 * v->nx * v->ny * v->nz;
    r.nt = t1 - t0;
    return r;
}

/* One region [r0, r1) of time points as a call of its own (base's
 * settings), output to rout when not phase 1. */
int run_region(const run_state &base, int r0, int r1, int t0, int t1, gpu_volume *rout,
               run_state &r)
{
    gpu_volume rin = time_view(base.in, base.in->data, r0, r1);
    r = run_state{};
    r.p = base.p;
    r.b = base.b;
    r.in = &rin;
    r.out = rout;
    r.st = base.st;
    r.budget = base.budget;
    r.full = dims{base.full.x, base.full.y, base.full.z, r1 - r0};
    r.low = dims{base.low.x, base.low.y, base.low.z, r1 - r0};
    const size_t plane = (size_t)base.low.x * base.low.y * base.low.z;
    r.phase = base.phase;
    r.ref = base.ref;
    r.g0 = plane * t0;
    r.g1 = plane * t1;
    r.goff = plane * r0;
    r.n_all = base.low.n();
    r.samples = base.samples;
    r.esamples = base.esamples;
    r.eref = base.eref;
    int rc = run(r);
    state_free(r);
    return rc;
}

/* The first pass over slabs of h time points along t: the M-function's
 * reference and step 6's, each capped (s.ref_cap, s.eref_cap), into s.ref
 * and s.eref. */
int collect_references(run_state &s, int h, int halo)
{
    const int nt = s.full.t;
    const size_t m =
        (s.low.n() + gpu__a4d_norm_stride(s.low.n()) - 1) / gpu__a4d_norm_stride(s.low.n());
    const int use_max = s.p->m_norm == GPU_A4D_NORM_MAX;
    s.samples = use_max ? nullptr : (float *)malloc(m * sizeof(float));
    s.esamples = s.p->static_sigma_t > 0 ? (float *)malloc(m * sizeof(float)) : nullptr;
    int rc = (!use_max && !s.samples) || (s.p->static_sigma_t > 0 && !s.esamples) ? -ENOMEM : 0;
    double max = 0;
    s.phase = 1;
    for (int t0 = 0; t0 < nt && !rc; t0 += h) {
        int t1 = t0 + h < nt ? t0 + h : nt, r0 = t0 - halo < 0 ? 0 : t0 - halo;
        int r1 = t1 + halo > nt ? nt : t1 + halo;
        run_state r;
        rc = run_region(s, r0, r1, t0, t1, nullptr, r);
        max = r.max > max ? r.max : max;
        s.slabs += r.slabs;
        s.fft_slabs += r.fft_slabs;
    }
    s.ref =
        use_max ? (float)max
        : rc    ? 0
             : (float)gpu__a4d_capped("tensor norm", gpu__a4d_norm_median(s.samples, m), s.ref_cap);
    s.eref = s.esamples && !rc
                 ? (float)gpu__a4d_capped("step 6 energy", gpu__a4d_norm_median(s.esamples, m),
                                          s.eref_cap)
                 : 0;
    free(s.samples);
    free(s.esamples);
    s.samples = nullptr;
    s.esamples = nullptr;
    return rc;
}

/* Slabs of h time points along t: the first pass collects the references
 * over all slabs, the second filters each region and keeps its own time
 * points (gpu__a4d_t_halo). */
int run_t_slabs(run_state &s, int h, int halo)
{
    const int nt = s.full.t;
    int rc = collect_references(s, h, halo);
    const size_t tp = (size_t)s.full.x * s.full.y * s.full.z;
    float *buf = rc ? nullptr : (float *)malloc(tp * (size_t)(h + 2 * halo) * sizeof(float));
    if (!rc && !buf)
        rc = -ENOMEM;
    s.phase = 2;
    for (int t0 = 0; t0 < nt && !rc; t0 += h) {
        int t1 = t0 + h < nt ? t0 + h : nt, r0 = t0 - halo < 0 ? 0 : t0 - halo;
        int r1 = t1 + halo > nt ? nt : t1 + halo;
        gpu_volume rout = time_view(s.out, buf, r0 - r0, r1 - r0);
        run_state r;
        rc = run_region(s, r0, r1, t0, t1, &rout, r);
        s.slabs += r.slabs;
        s.fft_slabs += r.fft_slabs;
        if (!rc)
            memcpy(s.out->data + tp * t0, buf + tp * (size_t)(t0 - r0),
                   tp * (size_t)(t1 - t0) * sizeof(float));
    }
    free(buf);
    return rc;
}

/* s.ref_cap and s.eref_cap: the references of the pair-difference surrogate
 * (gpu__a4d_surrogate with `threads` host threads; its own first pass,
 * per_tp bytes per time point) times the margin, where the call takes a
 * cap. */
int noise_caps(run_state &s, int halo, size_t per_tp, int threads)
{
    if (!gpu__a4d_caps_needed(s.p, s.in))
        return 0;
    gpu_volume sv;
    int rc = gpu__a4d_surrogate(s.in, &sv, threads);
    if (rc)
        return rc;
    run_state r{};
    r.p = s.p;
    r.b = s.b;
    r.in = &sv;
    r.st = s.st;
    r.budget = s.budget;
    r.full = dims{s.full.x, s.full.y, s.full.z, sv.nt};
    r.low = dims{s.low.x, s.low.y, s.low.z, sv.nt};
    rc = collect_references(r, gpu__a4d_t_slab(sv.nt, halo, s.budget, per_tp), halo);
    gpu_volume_close(&sv);
    if (!rc && s.p->m_norm == GPU_A4D_NORM_NOISE)
        s.ref_cap = (float)(GPU_A4D_NOISE_MARGIN * r.ref);
    if (!rc && s.p->static_sigma_t > 0)
        s.eref_cap = (float)(GPU_A4D_NOISE_MARGIN * r.eref);
    return rc;
}

} // namespace

int gpu_adaptive4d_cuda(const gpu_adaptive4d_params *p, const gpu_volume *in, gpu_volume *out,
                        const gpu_device *dev)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = gpu_adaptive4d_params_check(p);
    if (rc || !in || !in->data || !out || !out->data || !gpu_volume_same_shape(in, out) ||
        out->data == in->data || in->nx < 1 || in->ny < 1 || in->nz < 1 || in->nt < 1)
        return rc ? rc : LDCT_EINPUT;
    if (p->backend == GPU_A4D_SPATIAL && (p->mono_size > 11 || p->recon_size > 11)) {
        log_err("adaptive4d: the GPU spatial back end takes kernels up to 11^4");
        return LDCT_EUNSUPPORTED;
    }
    gpu_device d = {GPU_DEVICE_CUDA, 0, 0, nullptr, 0};
    if (dev)
        d = *dev;
    if (d.kind != GPU_DEVICE_CUDA || d.index >= gpu_device_count())
        return LDCT_ENOGPU;
    CUDA_CHECK(cudaSetDevice(d.index));
    gpu_a4d_bank b;
    if ((rc = gpu__a4d_bank_make(p, GPU_A4D_BANK_ALL, &b)) != 0)
        return rc;
    const int f = p->downsample;
    run_state s{};
    s.p = p;
    s.b = &b;
    s.in = in;
    s.out = out;
    s.st = (cudaStream_t)d.stream;
    s.budget = gpu_device_budget(&d);
    s.full = dims{in->nx, in->ny, in->nz, in->nt};
    s.low = dims{(in->nx + f - 1) / f, (in->ny + f - 1) / f, (in->nz + f - 1) / f, in->nt};
    if (p->mem_budget)
        s.budget = p->mem_budget;
    /* Resident per time point: the tensor grid (input, then 10 components,
     * and step 6's weight: 48 bytes a voxel) and room for a reconstruction z slab of 16 planes
     * (about 44 bytes a padded voxel). */
    const size_t per_tp =
        48 * (size_t)s.low.x * s.low.y * s.low.z + 44 * (size_t)(in->nx + 16) * (in->ny + 16) * 16;
    const int halo = gpu__a4d_t_halo(p, &b), h = gpu__a4d_t_slab(in->nt, halo, s.budget, per_tp);
    rc = noise_caps(s, halo, per_tp, d.threads);
    if (!rc)
        rc = h >= in->nt ? run(s) : run_t_slabs(s, h, halo);
    state_free(s);
    gpu__a4d_bank_free(&b);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (p->stats) {
        p->stats->total_ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
        p->stats->slabs = s.slabs;
        p->stats->fft_slabs = s.fft_slabs;
        p->stats->t_slabs = (in->nt + h - 1) / h;
    }
    return rc;
}
