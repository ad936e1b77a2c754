/* CUDA FDK: weighting and ramp filtering with batched cuFFT, and the
 * backprojector of seed 001, computing what fdk_ref.c defines (see fdk.h)
 * within the hardware interpolation's 8-bit fractions.
 *
 * Backprojector (the patent's strategies 1-5): one launch backprojects I
 * projections, so each voxel is read and written once per I projections;
 * blocks of Bx x By threads along x and y keep volume accesses coalesced,
 * each thread updates K voxels along z; the I projection matrices sit in
 * constant memory, folded on the host with the voxel size, the origin and
 * the texture's half-pixel offset so the kernel works on integer indices;
 * projections are read from a layered 2D texture with hardware bilinear
 * interpolation and a zero border (the reference's zero outside the
 * detector); per projection and thread, u, v and w are computed once at the
 * first of the K voxels and advanced by one addition each, and the one
 * reciprocal 1/w serves u, v and the weight 1/w^2.
 *
 * Pipeline (the patent's optimisations 1-3): two streams and two buffers of
 * I projections. The upload stream copies the next I projections while the
 * compute stream filters the current ones (weights, R2C, response, C2R),
 * copies them into a layered array and backprojects them; for the last
 * batch of each slab the volume is backprojected in two halves of z, and
 * the first half's download overlaps the second half's compute.
 *
 * Slabs: when the volume does not fit the memory budget next to the
 * projection buffers, it is reconstructed in slabs of z planes, each
 * passing over all projections (projections are uploaded and filtered again
 * per slab). Callers: any host thread; work is queued on the device's own
 * streams and waited for.
 */
#include <cufft.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/cuda_check.cuh"
#include "gpu/cuda_stage.cuh"
#include "gpu/cuda_util.h"
#include "gpu/fdk.h"
#include "gpu/fdk_tune.h"

namespace
{

__constant__ float4 c_m[3 * GPU_FDK_CONST_PROJ]; /* rows 0..2 of each launch's matrices */

constexpr int k_def_i = 32, k_def_k = 4, k_def_bx = 32, k_def_by = 8;

/* WCONST: every matrix of the launch has no z term in its third row (a
 * circular orbit about z), so w is the same for the K voxels of a thread and
 * one reciprocal serves all of them; otherwise w is advanced per voxel. */
template <int K, bool WCONST>
__global__ void __launch_bounds__(1024)
    bp_kernel(cudaTextureObject_t tex, float *__restrict__ vol, int nx, int ny, int zg0, int zlo,
              int zhi, int np, int accumulate)
{
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    const int z = zlo + blockIdx.z * K;
    if (x >= nx || y >= ny)
        return;
    float acc[K];
#pragma unroll
    for (int k = 0; k < K; k++)
        acc[k] = 0.0f;
    const float fx = (float)x, fy = (float)y, fz = (float)(zg0 + z);
    for (int i = 0; i < np; i++) {
        const float4 r0 = c_m[3 * i], r1 = c_m[3 * i + 1], r2 = c_m[3 * i + 2];
        const float u0 = fmaf(r0.x, fx, fmaf(r0.y, fy, fmaf(r0.z, fz, r0.w)));
        const float v0 = fmaf(r1.x, fx, fmaf(r1.y, fy, fmaf(r1.z, fz, r1.w)));
        const float w0 = fmaf(r2.x, fx, fmaf(r2.y, fy, fmaf(r2.z, fz, r2.w)));
        if (WCONST) {
            if (w0 <= 0.0f)
                continue; /* uniform across the K voxels */
            const float rw = 1.0f / w0, ww = rw * rw;
            const float u = u0 * rw, du = r0.z * rw, v = v0 * rw, dv = r1.z * rw;
#pragma unroll
            for (int k = 0; k < K; k++)
                acc[k] =
                    fmaf(tex2DLayered<float>(tex, fmaf((float)k, du, u), fmaf((float)k, dv, v), i),
                         ww, acc[k]);
        } else {
#pragma unroll
            for (int k = 0; k < K; k++) {
                const float w = fmaf((float)k, r2.z, w0);
                const float rw = 1.0f / w;
                const float u = fmaf((float)k, r0.z, u0) * rw, v = fmaf((float)k, r1.z, v0) * rw;
                const float val = tex2DLayered<float>(tex, u, v, i);
                acc[k] += w > 0.0f ? val * rw * rw : 0.0f;
            }
        }
    }
#pragma unroll
    for (int k = 0; k < K; k++) {
        if (z + k < zhi) {
            const size_t idx = ((size_t)(z + k) * ny + y) * nx + x;
            vol[idx] = accumulate ? vol[idx] + acc[k] : acc[k];
        }
    }
}

/* pad[r][a] = weighted projection row r (a < nu), 0 up to npad. */
__global__ void weight_pad_kernel(const float *__restrict__ raw, float *__restrict__ pad,
                                  const float *__restrict__ colw, const float *__restrict__ cosw,
                                  int nu, int nv, int npad, int p0, int rows)
{
    const int a = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
    if (a >= npad || r >= rows)
        return;
    const int i = r / nv, b = r % nv;
    float v = 0.0f;
    if (a < nu)
        v = raw[(size_t)r * nu + a] * cosw[(size_t)b * nu + a] * colw[(size_t)(p0 + i) * nu + a];
    pad[(size_t)r * npad + a] = v;
}

__global__ void response_kernel(cufftComplex *__restrict__ spec, const float *__restrict__ H,
                                int nf, int rows)
{
    const int k = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
    if (k >= nf || r >= rows)
        return;
    cufftComplex c = spec[(size_t)r * nf + k];
    const float h = H[k];
    c.x *= h;
    c.y *= h;
    spec[(size_t)r * nf + k] = c;
}

#define CUFFT_CHECK_GOTO(call, rc, label)                                                          \
    do {                                                                                           \
        cufftResult cufft_r_ = (call);                                                             \
        if (cufft_r_ != CUFFT_SUCCESS) {                                                           \
            log_err("%s:%d: %s failed: cufft error %d", __FILE__, __LINE__, #call, (int)cufft_r_); \
            (void)cudaGetLastError();                                                              \
            (rc) = cufft_r_ == CUFFT_ALLOC_FAILED ? LDCT_ENOMEM_GPU : LDCT_ECUDA;                  \
            goto label;                                                                            \
        }                                                                                          \
    } while (0)

struct cfg {
    int I, K, bx, by;
    bool wconst; /* see bp_kernel */
};

/* A configuration left at 0 comes from the tuner's cache (fdk_tune.h) for
 * this GPU model and size, else from the built-in defaults. */
void cached_cfg(int dev, const gpu_fdk_geometry *g, const gpu_fdk_volume *v, cfg *c)
{
    char name[128];
    gpu_fdk_cfg t;
    if (gpu__cuda_device_name(dev, name, sizeof name) != 0 ||
        gpu_fdk_tune_cache_lookup(NULL, name, g->nproj, g->nu, g->nv, v->nx, v->ny, v->nz, &t) < 0)
        return;
    const bool pow2 = t.bx > 0 && t.by > 0 && !(t.bx & (t.bx - 1)) && !(t.by & (t.by - 1));
    if (!pow2 || t.i < 1 || (t.k != 1 && t.k != 2 && t.k != 4 && t.k != 8)) {
        log_warn("fdk: ignoring the malformed tuned configuration %d,%d,%d,%d", t.i, t.k, t.bx,
                 t.by);
        return;
    }
    gpu_fdk_cfg_repair(&t, 1024, GPU_FDK_CONST_PROJ);
    c->I = t.i, c->K = t.k, c->bx = t.bx, c->by = t.by;
}

cfg pick_cfg(const gpu_fdk_params *p)
{
    cfg c = {p->bp_i ? p->bp_i : k_def_i, p->bp_k ? p->bp_k : k_def_k,
             p->bp_bx ? p->bp_bx : k_def_bx, p->bp_by ? p->bp_by : k_def_by, false};
    if (c.I > GPU_FDK_CONST_PROJ)
        c.I = GPU_FDK_CONST_PROJ;
    if (!p->bp_bx || !p->bp_by) {
        c.bx = k_def_bx;
        c.by = k_def_by;
    }
    return c;
}

/* Device buffers and handles of one run; zeroed, then released by release(). */
struct res {
    cudaStream_t up, comp;
    float *raw[2], *pad, *vol, *colw, *cosw, *H;
    cufftComplex *spec;
    cudaArray_t arr[2];
    cudaTextureObject_t tex[2];
    cudaEvent_t ev_up[2], ev_free[2], ev_half, t0, t1;
    cudaEvent_t ev_end;  /* the slab's last kernel (staged download) */
    gpu_stage::lease st; /* pinned host staging (st.buf[0] NULL: none) */
    cudaEvent_t *tev;    /* 4 per step: filter start/end, backprojection start/end */
    int ntev;
    cufftHandle fwd, inv;
    int have_fwd, have_inv;
};

void release(res *r)
{
    if (r->comp)
        cudaStreamSynchronize(r->comp);
    if (r->up)
        cudaStreamSynchronize(r->up);
    for (int b = 0; b < 2; b++) {
        if (r->tex[b])
            cudaDestroyTextureObject(r->tex[b]);
        if (r->arr[b])
            cudaFreeArray(r->arr[b]);
        cudaFree(r->raw[b]);
        if (r->ev_up[b])
            cudaEventDestroy(r->ev_up[b]);
        if (r->ev_free[b])
            cudaEventDestroy(r->ev_free[b]);
    }
    cudaFree(r->pad);
    cudaFree(r->vol);
    cudaFree(r->colw);
    cudaFree(r->cosw);
    cudaFree(r->H);
    cudaFree(r->spec);
    gpu_stage::release(&r->st);
    cudaEvent_t evs[] = {r->ev_half, r->ev_end, r->t0, r->t1};
    for (cudaEvent_t e : evs)
        if (e)
            cudaEventDestroy(e);
    for (int i = 0; i < r->ntev; i++)
        if (r->tev[i])
            cudaEventDestroy(r->tev[i]);
    free(r->tev);
    if (r->have_fwd)
        cufftDestroy(r->fwd);
    if (r->have_inv)
        cufftDestroy(r->inv);
    if (r->up)
        cudaStreamDestroy(r->up);
    if (r->comp)
        cudaStreamDestroy(r->comp);
}

int make_events(res *r, int steps)
{
    r->tev = (cudaEvent_t *)calloc(4 * (size_t)steps, sizeof(cudaEvent_t));
    if (!r->tev)
        return -ENOMEM;
    r->ntev = 4 * steps;
    for (int i = 0; i < r->ntev; i++)
        CUDA_CHECK(cudaEventCreate(&r->tev[i]));
    for (int b = 0; b < 2; b++) {
        CUDA_CHECK(cudaEventCreateWithFlags(&r->ev_up[b], cudaEventDisableTiming));
        CUDA_CHECK(cudaEventCreateWithFlags(&r->ev_free[b], cudaEventDisableTiming));
    }
    CUDA_CHECK(cudaEventCreateWithFlags(&r->ev_half, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&r->ev_end, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreate(&r->t0));
    CUDA_CHECK(cudaEventCreate(&r->t1));
    CUDA_CHECK(cudaStreamCreateWithFlags(&r->up, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&r->comp, cudaStreamNonBlocking));
    return 0;
}

int make_arrays(res *r, int nu, int nv, int I)
{
    cudaChannelFormatDesc fd = cudaCreateChannelDesc<float>();
    for (int b = 0; b < 2; b++) {
        CUDA_CHECK(
            cudaMalloc3DArray(&r->arr[b], &fd, make_cudaExtent(nu, nv, I), cudaArrayLayered));
        cudaResourceDesc rd;
        memset(&rd, 0, sizeof rd);
        rd.resType = cudaResourceTypeArray;
        rd.res.array.array = r->arr[b];
        cudaTextureDesc td;
        memset(&td, 0, sizeof td);
        td.addressMode[0] = td.addressMode[1] = td.addressMode[2] = cudaAddressModeBorder;
        td.filterMode = cudaFilterModeLinear;
        td.readMode = cudaReadModeElementType;
        td.normalizedCoords = 0;
        CUDA_CHECK(cudaCreateTextureObject(&r->tex[b], &rd, &td, NULL));
        CUDA_CHECK(cudaMalloc(&r->raw[b], sizeof(float) * (size_t)nu * nv * I));
    }
    return 0;
}

/* Frequency response (cuFFT of the ramp kernel, window and 1/npad applied on
 * the host in double) and the weights, uploaded once. */
int make_filter(res *r, const gpu_fdk_params *p, const gpu_fdk_geometry *g, int npad, int I)
{
    const int nf = npad / 2 + 1, rows = I * g->nv;
    int rc = 0;
    float *h = (float *)malloc(sizeof(float) * npad);
    float *colw = (float *)malloc(sizeof(float) * (size_t)g->nproj * g->nu);
    float *cosw = (float *)malloc(sizeof(float) * (size_t)g->nv * g->nu);
    cufftComplex *hc = (cufftComplex *)malloc(sizeof(cufftComplex) * nf);
    float *H = (float *)malloc(sizeof(float) * nf);
    cufftHandle one = 0;
    int have_one = 0;
    if (!h || !colw || !cosw || !hc || !H) {
        rc = -ENOMEM;
        goto done;
    }
    if ((rc = gpu_fdk_weights(g, colw, cosw)) != 0)
        goto done;
    gpu_fdk_ramp_kernel(npad, h);
    CUDA_CHECK_GOTO(cudaMalloc(&r->pad, sizeof(float) * (size_t)rows * npad), rc, done);
    CUDA_CHECK_GOTO(cudaMalloc(&r->spec, sizeof(cufftComplex) * (size_t)rows * nf), rc, done);
    CUDA_CHECK_GOTO(cudaMalloc(&r->colw, sizeof(float) * (size_t)g->nproj * g->nu), rc, done);
    CUDA_CHECK_GOTO(cudaMalloc(&r->cosw, sizeof(float) * (size_t)g->nv * g->nu), rc, done);
    CUDA_CHECK_GOTO(cudaMalloc(&r->H, sizeof(float) * nf), rc, done);
    CUDA_CHECK_GOTO(
        cudaMemcpy(r->colw, colw, sizeof(float) * (size_t)g->nproj * g->nu, cudaMemcpyHostToDevice),
        rc, done);
    CUDA_CHECK_GOTO(
        cudaMemcpy(r->cosw, cosw, sizeof(float) * (size_t)g->nv * g->nu, cudaMemcpyHostToDevice),
        rc, done);
    CUDA_CHECK_GOTO(cudaMemcpy(r->pad, h, sizeof(float) * npad, cudaMemcpyHostToDevice), rc, done);
    CUFFT_CHECK_GOTO(cufftPlan1d(&one, npad, CUFFT_R2C, 1), rc, done);
    have_one = 1;
    CUFFT_CHECK_GOTO(cufftExecR2C(one, r->pad, r->spec), rc, done);
    CUDA_CHECK_GOTO(cudaMemcpy(hc, r->spec, sizeof(cufftComplex) * nf, cudaMemcpyDeviceToHost), rc,
                    done);
    for (int k = 0; k < nf; k++)
        H[k] = (float)(hc[k].x * gpu_fdk_window(p->filter, k, npad) / npad);
    CUDA_CHECK_GOTO(cudaMemcpy(r->H, H, sizeof(float) * nf, cudaMemcpyHostToDevice), rc, done);
    {
        int n[1] = {npad};
        CUFFT_CHECK_GOTO(cufftPlanMany(&r->fwd, 1, n, NULL, 1, npad, NULL, 1, nf, CUFFT_R2C, rows),
                         rc, done);
        r->have_fwd = 1;
        CUFFT_CHECK_GOTO(cufftPlanMany(&r->inv, 1, n, NULL, 1, nf, NULL, 1, npad, CUFFT_C2R, rows),
                         rc, done);
        r->have_inv = 1;
        CUFFT_CHECK_GOTO(cufftSetStream(r->fwd, r->comp), rc, done);
        CUFFT_CHECK_GOTO(cufftSetStream(r->inv, r->comp), rc, done);
    }
done:
    if (have_one)
        cufftDestroy(one);
    free(h);
    free(colw);
    free(cosw);
    free(hc);
    free(H);
    return rc;
}

/* Weights, FFT filtering of n projections (from p0) in r->raw[b]; the result
 * is in r->pad, rows of npad. */
int filter_batch(res *r, const gpu_fdk_geometry *g, int npad, int b, int p0, int n)
{
    const int nf = npad / 2 + 1, rows = n * g->nv;
    dim3 blk(256), grd((npad + 255) / 256, rows);
    weight_pad_kernel<<<grd, blk, 0, r->comp>>>(r->raw[b], r->pad, r->colw, r->cosw, g->nu, g->nv,
                                                npad, p0, rows);
    CUDA_CHECK(cudaGetLastError());
    if (cufftExecR2C(r->fwd, r->pad, r->spec) != CUFFT_SUCCESS) {
        log_err("fdk: cufftExecR2C failed");
        return LDCT_ECUDA;
    }
    dim3 grd2((nf + 255) / 256, rows);
    response_kernel<<<grd2, blk, 0, r->comp>>>(r->spec, r->H, nf, rows);
    CUDA_CHECK(cudaGetLastError());
    if (cufftExecC2R(r->inv, r->spec, r->pad) != CUFFT_SUCCESS) {
        log_err("fdk: cufftExecC2R failed");
        return LDCT_ECUDA;
    }
    return 0;
}

/* Copies n projections (rows of `pitch` floats, nu used) into array b. */
int to_array(res *r, const float *src, size_t pitch, int nu, int nv, int b, int n)
{
    cudaMemcpy3DParms m;
    memset(&m, 0, sizeof m);
    m.srcPtr = make_cudaPitchedPtr((void *)src, pitch * sizeof(float), nu, nv);
    m.dstArray = r->arr[b];
    m.extent = make_cudaExtent(nu, nv, n);
    m.kind = cudaMemcpyDeviceToDevice;
    CUDA_CHECK(cudaMemcpy3DAsync(&m, r->comp));
    return 0;
}

/* Matrices folded for the kernel: index coordinates and texel centres. */
void fold_matrices(const gpu_fdk_geometry *g, const gpu_fdk_volume *v, float4 *fm)
{
    for (int i = 0; i < g->nproj; i++) {
        const double *m = g->matrices + 12 * (size_t)i;
        double f[3][4];
        for (int r = 0; r < 3; r++) {
            for (int c = 0; c < 3; c++)
                f[r][c] = m[4 * r + c] * v->voxel[c];
            f[r][3] = m[4 * r] * v->origin[0] + m[4 * r + 1] * v->origin[1] +
                      m[4 * r + 2] * v->origin[2] + m[4 * r + 3];
        }
        for (int r = 0; r < 2; r++)
            for (int c = 0; c < 4; c++)
                f[r][c] += 0.5 * f[2][c];
        for (int r = 0; r < 3; r++)
            fm[3 * (size_t)i + r] =
                make_float4((float)f[r][0], (float)f[r][1], (float)f[r][2], (float)f[r][3]);
    }
}

template <int K, bool WCONST>
int launch_k(const res *r, const cfg &c, int b, float *vol, int nx, int ny, int zg0, int zlo,
             int zhi, int np, int acc)
{
    dim3 blk(c.bx, c.by),
        grd((nx + c.bx - 1) / c.bx, (ny + c.by - 1) / c.by, (zhi - zlo + K - 1) / K);
    bp_kernel<K, WCONST><<<grd, blk, 0, r->comp>>>(r->tex[b], vol, nx, ny, zg0, zlo, zhi, np, acc);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

template <bool WCONST>
int launch_w(const res *r, const cfg &c, int b, float *vol, int nx, int ny, int zg0, int zlo,
             int zhi, int np, int acc)
{
    switch (c.K) {
    case 1:
        return launch_k<1, WCONST>(r, c, b, vol, nx, ny, zg0, zlo, zhi, np, acc);
    case 2:
        return launch_k<2, WCONST>(r, c, b, vol, nx, ny, zg0, zlo, zhi, np, acc);
    case 8:
        return launch_k<8, WCONST>(r, c, b, vol, nx, ny, zg0, zlo, zhi, np, acc);
    default:
        return launch_k<4, WCONST>(r, c, b, vol, nx, ny, zg0, zlo, zhi, np, acc);
    }
}

int launch_bp(const res *r, const cfg &c, int b, float *vol, int nx, int ny, int zg0, int zlo,
              int zhi, int np, int acc)
{
    if (zhi <= zlo)
        return 0;
    return c.wconst ? launch_w<true>(r, c, b, vol, nx, ny, zg0, zlo, zhi, np, acc)
                    : launch_w<false>(r, c, b, vol, nx, ny, zg0, zlo, zhi, np, acc);
}

/* 1 when no folded matrix has a z term in its third row (w independent of z). */
int w_independent_of_z(const float4 *fm, int nproj)
{
    for (int i = 0; i < nproj; i++)
        if (fm[3 * (size_t)i + 2].z != 0.0f)
            return 0;
    return 1;
}

struct job {
    const gpu_fdk_geometry *g;
    const gpu_volume *proj;
    const gpu_fdk_volume *v;
    gpu_volume *out;
    const float4 *fm;
    cfg c;
    int filter, npad;
    double filter_ms, bp_ms;
    bool stage_in, stage_out; /* pageable projections / volume go through r->st */
};

int upload(res *r, const job &j, int s)
{
    const int b = s % 2, p0 = s * j.c.I;
    const int n = j.g->nproj - p0 < j.c.I ? j.g->nproj - p0 : j.c.I;
    const size_t pix = (size_t)j.g->nu * j.g->nv;
    const float *src = j.proj->data + pix * p0;
    if (j.stage_in) { /* the host copy overlaps the kernels queued before */
        CUDA_CHECK(cudaEventSynchronize(r->st.ev[b]));
        gpu_stage::par_copy(r->st.buf[b], src, pix * n);
        src = r->st.buf[b];
    }
    CUDA_CHECK(cudaStreamWaitEvent(r->up, r->ev_free[b], 0));
    CUDA_CHECK(
        cudaMemcpyAsync(r->raw[b], src, sizeof(float) * pix * n, cudaMemcpyHostToDevice, r->up));
    CUDA_CHECK(cudaEventRecord(r->ev_up[b], r->up));
    if (j.stage_in)
        CUDA_CHECK(cudaEventRecord(r->st.ev[b], r->up));
    return 0;
}

/* Downloads slab [zs, zs + nzs) through the pinned buffers, chunk after
 * chunk: the DMA of chunk c overlaps the host copy of chunk c - 1, and the
 * chunks of the first half (below `half`) start as soon as ev_half, during
 * the second half's kernels. */
int download_staged(res *r, const job &j, int zs, int nzs, int half)
{
    const size_t plane = (size_t)j.v->nx * j.v->ny;
    const int per = (int)(r->st.elems / plane);
    float *prev_dst = NULL;
    size_t prev_n = 0;
    int c = 0;
    for (int z = 0; z < nzs; c++) {
        const int end = z < half ? half : nzs, n = end - z < per ? end - z : per;
        const int b = c % 2;
        CUDA_CHECK(cudaStreamWaitEvent(r->up, z < half ? r->ev_half : r->ev_end, 0));
        CUDA_CHECK(cudaMemcpyAsync(r->st.buf[b], r->vol + plane * z, sizeof(float) * plane * n,
                                   cudaMemcpyDeviceToHost, r->up));
        CUDA_CHECK(cudaEventRecord(r->st.ev[b], r->up));
        if (prev_dst) {
            CUDA_CHECK(cudaEventSynchronize(r->st.ev[1 - b]));
            gpu_stage::par_copy(prev_dst, r->st.buf[1 - b], prev_n);
        }
        prev_dst = j.out->data + plane * (zs + z);
        prev_n = plane * n;
        z += n;
    }
    if (prev_dst) {
        CUDA_CHECK(cudaEventSynchronize(r->st.ev[(c - 1) % 2]));
        gpu_stage::par_copy(prev_dst, r->st.buf[(c - 1) % 2], prev_n);
    }
    return 0;
}

int elapsed(cudaEvent_t a, cudaEvent_t b, double *sum)
{
    float ms = 0;
    CUDA_CHECK(cudaEventSynchronize(b));
    CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    *sum += ms;
    return 0;
}

/* Step s of a slab [zs, zs + nzs): filter (or copy) batch s into its array
 * and backproject it; the last step splits the slab and downloads it. */
int step(res *r, job &j, int s, int steps, int zs, int nzs)
{
    const int b = s % 2, p0 = s * j.c.I;
    const int n = j.g->nproj - p0 < j.c.I ? j.g->nproj - p0 : j.c.I;
    const int nx = j.v->nx, ny = j.v->ny, nu = j.g->nu, nv = j.g->nv;
    cudaEvent_t *ev = r->tev + 4 * s;
    int rc;
    CUDA_CHECK(cudaStreamWaitEvent(r->comp, r->ev_up[b], 0));
    if (j.filter) {
        CUDA_CHECK(cudaEventRecord(ev[0], r->comp));
        if ((rc = filter_batch(r, j.g, j.npad, b, p0, n)) != 0)
            return rc;
        CUDA_CHECK(cudaEventRecord(r->ev_free[b], r->comp));
        if ((rc = to_array(r, r->pad, j.npad, nu, nv, b, n)) != 0)
            return rc;
        CUDA_CHECK(cudaEventRecord(ev[1], r->comp));
    } else {
        if ((rc = to_array(r, r->raw[b], nu, nu, nv, b, n)) != 0)
            return rc;
        CUDA_CHECK(cudaEventRecord(r->ev_free[b], r->comp));
    }
    CUDA_CHECK(cudaMemcpyToSymbolAsync(c_m, j.fm + 3 * (size_t)p0, sizeof(float4) * 3 * n, 0,
                                       cudaMemcpyHostToDevice, r->comp));
    CUDA_CHECK(cudaEventRecord(ev[2], r->comp));
    const int last = s == steps - 1, half = last ? nzs / 2 : nzs;
    if ((rc = launch_bp(r, j.c, b, r->vol, nx, ny, zs, 0, half, n, s > 0)) != 0)
        return rc;
    if (last && j.stage_out) {
        CUDA_CHECK(cudaEventRecord(r->ev_half, r->comp));
        if ((rc = launch_bp(r, j.c, b, r->vol, nx, ny, zs, half, nzs, n, s > 0)) != 0)
            return rc;
        CUDA_CHECK(cudaEventRecord(ev[3], r->comp));
        CUDA_CHECK(cudaEventRecord(r->ev_end, r->comp));
    } else if (last) {
        const size_t plane = (size_t)nx * ny;
        float *dst = j.out->data + plane * zs;
        CUDA_CHECK(cudaEventRecord(r->ev_half, r->comp));
        CUDA_CHECK(cudaStreamWaitEvent(r->up, r->ev_half, 0));
        CUDA_CHECK(cudaMemcpyAsync(dst, r->vol, sizeof(float) * plane * half,
                                   cudaMemcpyDeviceToHost, r->up));
        if ((rc = launch_bp(r, j.c, b, r->vol, nx, ny, zs, half, nzs, n, s > 0)) != 0)
            return rc;
        CUDA_CHECK(cudaEventRecord(ev[3], r->comp));
        CUDA_CHECK(cudaMemcpyAsync(dst + plane * half, r->vol + plane * half,
                                   sizeof(float) * plane * (nzs - half), cudaMemcpyDeviceToHost,
                                   r->comp));
    } else {
        CUDA_CHECK(cudaEventRecord(ev[3], r->comp));
    }
    return 0;
}

/* Kernel times of a slab's steps, read once the slab is done (reading them
 * per step would stall the host and with it the next upload). */
int add_times(res *r, job &j, int steps)
{
    int rc;
    for (int s = 0; s < steps; s++) {
        cudaEvent_t *ev = r->tev + 4 * s;
        if (j.filter && (rc = elapsed(ev[0], ev[1], &j.filter_ms)) != 0)
            return rc;
        if ((rc = elapsed(ev[2], ev[3], &j.bp_ms)) != 0)
            return rc;
    }
    return 0;
}

/* Number of z planes per slab that fit the budget next to the fixed buffers. */
int plan_slab(const gpu_device &d, const job &j, int *slab)
{
    const size_t pix = (size_t)j.g->nu * j.g->nv, rows = (size_t)j.c.I * j.g->nv;
    size_t fixed = sizeof(float) * 4 * pix * j.c.I; /* two raw buffers, two arrays */
    if (j.filter)
        fixed += rows * j.npad * (sizeof(float) + sizeof(cufftComplex)) + sizeof(float) * pix * 2 +
                 sizeof(float) * (size_t)j.g->nproj * j.g->nu;
    fixed += fixed / 8 + (8u << 20); /* cuFFT work area, alignment */
    const size_t plane = sizeof(float) * (size_t)j.v->nx * j.v->ny;
    const size_t budget = gpu_device_budget(&d);
    if (budget <= fixed + plane) {
        log_err("fdk: GPU memory budget %zu bytes is below the buffers' %zu", budget,
                fixed + plane);
        return LDCT_ENOMEM_GPU;
    }
    size_t s = (budget - fixed) / plane;
    *slab = s > (size_t)j.v->nz ? j.v->nz : (int)s;
    const int nslabs = (j.v->nz + *slab - 1) / *slab;
    *slab = (j.v->nz + nslabs - 1) / nslabs;
    return 0;
}

int run_slabs(res *r, job &j, int slab)
{
    const int steps = (j.g->nproj + j.c.I - 1) / j.c.I;
    int rc;
    for (int zs = 0; zs < j.v->nz; zs += slab) {
        const int nzs = zs + slab > j.v->nz ? j.v->nz - zs : slab;
        if ((rc = upload(r, j, 0)) != 0)
            return rc;
        for (int s = 0; s < steps; s++) {
            if ((rc = step(r, j, s, steps, zs, nzs)) != 0)
                return rc;
            if (s + 1 < steps && (rc = upload(r, j, s + 1)) != 0)
                return rc;
        }
        if (j.stage_out && (rc = download_staged(r, j, zs, nzs, nzs / 2)) != 0)
            return rc;
        CUDA_CHECK(cudaStreamSynchronize(r->up));
        CUDA_CHECK(cudaStreamSynchronize(r->comp));
        if ((rc = add_times(r, j, steps)) != 0)
            return rc;
    }
    return 0;
}

/* Pageable projections or volume go through pinned buffers (copied on the
 * host's cores, then DMA'd); without pinned memory the run goes on with
 * pageable copies, slower but correct. */
void plan_staging(res *r, job *j, int dev)
{
    j->stage_in = !gpu_stage::host_pinned(j->proj->data);
    j->stage_out = !gpu_stage::host_pinned(j->out->data);
    if (!j->stage_in && !j->stage_out)
        return;
    const size_t batch = (size_t)j->g->nu * j->g->nv * j->c.I;
    const size_t planes = (size_t)j->v->nx * j->v->ny * 8;
    if (gpu_stage::acquire(&r->st, dev, batch > planes ? batch : planes) != 0) {
        log_warn("fdk: no pinned host memory for staging; copying from pageable memory");
        j->stage_in = j->stage_out = false;
    }
}

int resolve_device(const gpu_device *dev, gpu_device *d)
{
    int rc = 0;
    if (dev)
        *d = *dev;
    else if ((rc = gpu_device_parse("gpu", d)) != 0)
        return rc;
    return d->kind == GPU_DEVICE_CUDA ? 0 : LDCT_ENOGPU;
}

int run(const gpu_fdk_params *p, const gpu_fdk_geometry *g, const gpu_volume *proj,
        const gpu_fdk_volume *v, gpu_volume *out, const gpu_device *dev, int filter)
{
    int rc = gpu_fdk_check(p, g, proj, v, out, filter);
    gpu_device d;
    if (rc || (rc = resolve_device(dev, &d)) != 0)
        return rc;
    job j = {g, proj, v,     out,  NULL, pick_cfg(p), filter, gpu_fdk_pad_length(g->nu),
             0, 0,    false, false};
    if (!p->bp_i && !p->bp_k && !p->bp_bx && !p->bp_by)
        cached_cfg(d.index, g, v, &j.c);
    if (j.c.I > g->nproj)
        j.c.I = g->nproj;
    int slab = 0;
    if ((rc = plan_slab(d, j, &slab)) != 0)
        return rc;
    CUDA_CHECK(cudaSetDevice(d.index));
    res r;
    memset(&r, 0, sizeof r);
    float4 *fm = (float4 *)malloc(sizeof(float4) * 3 * (size_t)g->nproj);
    double total = 0;
    if (!fm)
        return -ENOMEM;
    fold_matrices(g, v, fm);
    j.fm = fm;
    j.c.wconst = w_independent_of_z(fm, g->nproj) != 0;
    if ((rc = make_events(&r, (g->nproj + j.c.I - 1) / j.c.I)) != 0)
        goto done;
    CUDA_CHECK_GOTO(cudaEventRecord(r.t0, r.comp), rc, done);
    if ((rc = make_arrays(&r, g->nu, g->nv, j.c.I)) != 0)
        goto done;
    plan_staging(&r, &j, d.index);
    if (filter && (rc = make_filter(&r, p, g, j.npad, j.c.I)) != 0)
        goto done;
    CUDA_CHECK_GOTO(cudaMalloc(&r.vol, sizeof(float) * (size_t)v->nx * v->ny * slab), rc, done);
    if ((rc = run_slabs(&r, j, slab)) != 0)
        goto done;
    CUDA_CHECK_GOTO(cudaEventRecord(r.t1, r.comp), rc, done);
    if ((rc = elapsed(r.t0, r.t1, &total)) != 0)
        goto done;
    if (p->stats) {
        p->stats->filter_ms = j.filter_ms;
        p->stats->backproject_ms = j.bp_ms;
        p->stats->total_ms = total;
        p->stats->slabs = (v->nz + slab - 1) / slab;
        p->stats->config[0] = j.c.I, p->stats->config[1] = j.c.K;
        p->stats->config[2] = j.c.bx, p->stats->config[3] = j.c.by;
    }
    log_debug("fdk%s: %d projections %dx%d -> %dx%dx%d on gpu:%d, I=%d K=%d %dx%d, %d slab(s): "
              "filter %.2f ms, backprojection %.2f ms, total %.2f ms",
              filter ? "" : " backprojection", g->nproj, g->nu, g->nv, v->nx, v->ny, v->nz, d.index,
              j.c.I, j.c.K, j.c.bx, j.c.by, (v->nz + slab - 1) / slab, j.filter_ms, j.bp_ms, total);
done:
    release(&r);
    free(fm);
    return rc;
}

int filter_only(const gpu_fdk_params *p, const gpu_fdk_geometry *g, const gpu_volume *proj,
                gpu_volume *outp, const gpu_device *dev)
{
    int rc = gpu_fdk_check(p, g, proj, NULL, NULL, 1);
    gpu_device d;
    if (rc || (rc = resolve_device(dev, &d)) != 0)
        return rc;
    if (!outp || !outp->data || !gpu_volume_same_shape(proj, outp))
        return LDCT_EINPUT;
    const int I = g->nproj < k_def_i ? g->nproj : k_def_i, npad = gpu_fdk_pad_length(g->nu);
    const size_t pix = (size_t)g->nu * g->nv;
    CUDA_CHECK(cudaSetDevice(d.index));
    res r;
    memset(&r, 0, sizeof r);
    if ((rc = make_events(&r, 1)) != 0)
        goto done;
    CUDA_CHECK_GOTO(cudaMalloc(&r.raw[0], sizeof(float) * pix * I), rc, done);
    if ((rc = make_filter(&r, p, g, npad, I)) != 0)
        goto done;
    for (int p0 = 0; p0 < g->nproj; p0 += I) {
        const int n = g->nproj - p0 < I ? g->nproj - p0 : I;
        CUDA_CHECK_GOTO(cudaMemcpyAsync(r.raw[0], proj->data + pix * p0, sizeof(float) * pix * n,
                                        cudaMemcpyHostToDevice, r.comp),
                        rc, done);
        if ((rc = filter_batch(&r, g, npad, 0, p0, n)) != 0)
            goto done;
        CUDA_CHECK_GOTO(cudaMemcpy2DAsync(outp->data + pix * p0, sizeof(float) * g->nu, r.pad,
                                          sizeof(float) * npad, sizeof(float) * g->nu,
                                          (size_t)n * g->nv, cudaMemcpyDeviceToHost, r.comp),
                        rc, done);
    }
    CUDA_CHECK_GOTO(cudaStreamSynchronize(r.comp), rc, done);
done:
    release(&r);
    return rc;
}

} // namespace

extern "C" int gpu_fdk_cuda(const gpu_fdk_params *p, const gpu_fdk_geometry *g,
                            const gpu_volume *proj, const gpu_fdk_volume *vol, gpu_volume *out,
                            const gpu_device *dev)
{
    return run(p, g, proj, vol, out, dev, 1);
}

extern "C" int gpu_fdk_backproject_cuda(const gpu_fdk_params *p, const gpu_fdk_geometry *g,
                                        const gpu_volume *proj, const gpu_fdk_volume *vol,
                                        gpu_volume *out, const gpu_device *dev)
{
    return run(p, g, proj, vol, out, dev, 0);
}

extern "C" int gpu_fdk_filter_cuda(const gpu_fdk_params *p, const gpu_fdk_geometry *g,
                                   const gpu_volume *proj, gpu_volume *filtered,
                                   const gpu_device *dev)
{
    return filter_only(p, g, proj, filtered, dev);
}
