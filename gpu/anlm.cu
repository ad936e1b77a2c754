/* CUDA version of adaptive non-local means (definition in anlm.h; the CPU
 * reference anlm_ref.c defines the result). Seed 004's optimisations:
 * preprocessing on the GPU (O3), 3D thread blocks (O2) over tiles kept in
 * shared memory (O1), and both patch radii plus the sub-band mixing on the
 * GPU with no host round trip (O4): per slab, one upload, one download.
 *
 * Per slab (even thickness, so Haar blocks never straddle a cut) on a
 * mirrored padded grid with halo H = r_B + q + S + max r_P (q = the Rician
 * smoothing radius, 0 for Gaussian noise):
 *   pad_kernel    raw planes -> U (reflect-101 in x, y and z)
 *   stats_kernel  U -> local mean M, variance V, residual R (double sums in
 *                 the reference's order and without contraction, so M and
 *                 V, and hence every preselection decision, are bit-equal
 *                 to the CPU's)
 *   sweep_kernel<P, SIGMA>  s2 = min over kept offsets of DR (on the slab
 *                 plus a ring of q for the Rician smoothing)
 *   sweep_kernel<P, WEIGHTS> weighted means E of the pass (eq. 1, 2)
 *   rician_kernel (Rician only) E -> sqrt(max(E - 2 sg2, 0))
 *   mix_kernel    Haar sub-band mixing of the two passes, in place
 * Sweep kernels (LDCT_ANLM_CFG picks; measurements decide the default):
 * the column kernel (1, and 2, the default, with 4 voxels per thread; see
 * sweep_col_kernel) gives a 32x8 block a 32x8x8 tile, each thread a column
 * of 8 voxels, and forms
 * per offset the z box sums in registers and the y and x box sums in
 * shared memory (two barriers per offset); the tile kernel (0) gives each
 * 32x4x4 block a tile of the field and of M and V, forms the squared
 * differences once per offset and box-sums them in x, y and z in shared
 * memory (three barriers). Both keep the field (R or U) tile with a halo of
 * S + r_P in shared memory, so a patch distance costs O(1) per voxel and
 * offset instead of |P|; each thread updates its voxels' minimum or weight
 * sums in registers.
 *
 * Tolerance against the reference: patch distances and weights are float
 * here, double there; a weight cut at D = 3 h^2 can flip on rounding.
 * tests/unit/check_gpu_anlm.c documents the bound. Every voxel's arithmetic
 * is the same in slabbed and one-slab runs up to float rounding: on an H200
 * the two differ by at most 6.1e-5 (values of about 20 to 80, check_gpu_anlm);
 * the CPU emulation of the kernels (tests/tools/anlm_cuda_emu.cc) is
 * bit-identical, so the difference comes from the GPU's code generation.
 *
 * Callers: any thread, through gpu_anlm_cuda (calls on one GPU serialise on
 * its stream).
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/cuda_check.cuh"
#include "gpu/cuda_stage.cuh"

#include "gpu/anlm.h"
#include "gpu/anlm_kernels.cuh"

namespace
{
using namespace anlm_k;

/* Sweep kernel configuration: 1 = column kernel with 8 voxels per thread,
 * 2 = column kernel with 4 (default: 512^3 mixed on an H200, 1.01 s of
 * kernels against 1.47 s for 1 and 1.65 s for 0), 0 = tile kernel;
 * LDCT_ANLM_CFG overrides (for benchmarks and tests). */
int sweep_cfg(void)
{
    const char *e = getenv("LDCT_ANLM_CFG");
    return e && (*e == '0' || *e == '1') ? *e - '0' : 2;
}

template <int P, bool SIGMA, int CZ> cudaError_t launch_col(const sweep_args &a, cudaStream_t st)
{
    size_t bytes = col_layout(a.S, P, CZ).total * sizeof(float);
    cudaError_t e = cudaFuncSetAttribute(sweep_col_kernel<P, SIGMA, CZ>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
    if (e != cudaSuccess)
        return e;
    dim3 blk(CX, CY), grd((a.rnx + CX - 1) / CX, (a.rny + CY - 1) / CY, (a.rnz + CZ - 1) / CZ);
    sweep_col_kernel<P, SIGMA, CZ><<<grd, blk, bytes, st>>>(a);
    return cudaGetLastError();
}

template <int P, bool SIGMA>
cudaError_t launch_sweep_p(int cfg, const sweep_args &a, cudaStream_t st)
{
    if (cfg == 1)
        return launch_col<P, SIGMA, 8>(a, st);
    if (cfg == 2)
        return launch_col<P, SIGMA, 4>(a, st);
    size_t bytes = smem_layout(a.S, P).total * sizeof(float);
    cudaError_t e = cudaFuncSetAttribute(sweep_kernel<P, SIGMA>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
    if (e != cudaSuccess)
        return e;
    dim3 blk(TX, TY, TZ), grd((a.rnx + TX - 1) / TX, (a.rny + TY - 1) / TY, (a.rnz + TZ - 1) / TZ);
    sweep_kernel<P, SIGMA><<<grd, blk, bytes, st>>>(a);
    return cudaGetLastError();
}

template <bool SIGMA> cudaError_t launch_sweep(int P, const sweep_args &a, cudaStream_t st)
{
    int cfg = sweep_cfg();
    switch (P) {
    case 0:
        return launch_sweep_p<0, SIGMA>(cfg, a, st);
    case 1:
        return launch_sweep_p<1, SIGMA>(cfg, a, st);
    case 2:
        return launch_sweep_p<2, SIGMA>(cfg, a, st);
    default:
        return launch_sweep_p<3, SIGMA>(cfg, a, st);
    }
}

struct bufs {
    float *raw, *u, *m, *v, *r, *s2, *ea, *eb;
    cudaEvent_t e0, e1, k0, k1;
};

void bufs_free(bufs *b)
{
    float *p[] = {b->raw, b->u, b->m, b->v, b->r, b->s2, b->ea, b->eb};
    for (float *x : p)
        if (x)
            cudaFree(x);
    cudaEvent_t ev[] = {b->e0, b->e1, b->k0, b->k1};
    for (cudaEvent_t x : ev)
        if (x)
            cudaEventDestroy(x);
}

/* Slab geometry under the memory budget: even thickness (Haar blocks never
 * straddle a cut), at least 2 planes. */
struct plan {
    int H, q, pmax, slab, nslabs, PX, PY;
    size_t per_plane, fixed;
};

int plan_of(const gpu_anlm_params *p, const gpu_volume *in, size_t budget, plan *o)
{
    o->q = p->noise == GPU_ANLM_RICIAN ? GPU_ANLM_RICIAN_REG : 0;
    o->pmax = p->mix && p->patch_radius2 > p->patch_radius ? p->patch_radius2 : p->patch_radius;
    o->H = p->block_radius + o->q + p->search_radius + o->pmax;
    o->PX = in->nx + 2 * o->H, o->PY = in->ny + 2 * o->H;
    const size_t pp = (size_t)o->PX * o->PY, nxy = (size_t)in->nx * in->ny;
    /* u, m, v, r, s2 padded; raw planes; ea, eb. */
    o->per_plane = sizeof(float) * (5 * pp + 3 * nxy);
    o->fixed = sizeof(float) * 2 * (size_t)o->H * (5 * pp + nxy);
    if (budget <= o->fixed + 2 * o->per_plane)
        return LDCT_ENOMEM_GPU;
    size_t fit = (budget - o->fixed) / o->per_plane;
    int slab = fit >= (size_t)in->nz ? in->nz : (int)fit;
    if (slab < in->nz)
        slab &= ~1;
    o->nslabs = (in->nz + slab - 1) / slab;
    if (o->nslabs > 1) { /* even out the slabs, keeping them even */
        slab = (in->nz + o->nslabs - 1) / o->nslabs;
        slab += slab & 1;
    }
    o->slab = slab;
    o->nslabs = (in->nz + slab - 1) / slab;
    return 0;
}

/* One pass (patch radius P) on the slab's fields into e; nz = the volume's
 * planes (the search radius along z follows the volume, not the slab). */
cudaError_t run_pass(const gpu_anlm_params *p, const bufs &b, const grid &g, int nz, int P, int q,
                     const gpu__anlm_range &rg, float *e, cudaStream_t st)
{
    sweep_args a;
    memset(&a, 0, sizeof a);
    a.m = b.m, a.v = b.v, a.s2 = b.s2, a.e = e, a.g = g, a.S = p->search_radius;
    a.Sx = gpu__anlm_axis_radius(a.S, g.nx), a.Sy = gpu__anlm_axis_radius(a.S, g.ny);
    a.Sz = gpu__anlm_axis_radius(a.S, nz);
    a.rician = p->noise == GPU_ANLM_RICIAN, a.rg = rg, a.mu = p->mean_ratio, a.nu = p->var_ratio;
    a.str2 = p->strength * p->strength;
    /* Noise sweep on the slab plus the ring q the Rician smoothing reads. */
    a.f = b.r, a.r0 = -q, a.rnx = g.nx + 2 * q, a.rny = g.ny + 2 * q, a.rnz = g.nzs + 2 * q;
    cudaError_t err = launch_sweep<true>(P, a, st);
    if (err != cudaSuccess)
        return err;
    a.f = b.u, a.r0 = 0, a.rnx = g.nx, a.rny = g.ny, a.rnz = g.nzs;
    if ((err = launch_sweep<false>(P, a, st)) != cudaSuccess)
        return err;
    if (a.rician) {
        dim3 blk(32, 8), grd((g.nx + 31) / 32, (g.ny + 7) / 8, g.nzs);
        rician_kernel<<<grd, blk, 0, st>>>(e, b.s2, b.m, g);
        err = cudaGetLastError();
    }
    return err;
}

/* Uploads the planes slab [zs, ze) needs, builds the fields, runs the
 * passes and the mixing; the result is left in b.ea. */
int run_slab(const gpu_anlm_params *p, const gpu_volume *in, const plan &pl, int zs, int ze,
             gpu__anlm_range &rg, bool find_range, bufs &b, gpu_stage::lease *stg, cudaStream_t st)
{
    const int nx = in->nx, ny = in->ny, nz = in->nz, nzs = ze - zs;
    grid g = {nx, ny, nzs, pl.H, pl.PX, pl.PY, nzs + 2 * pl.H};
    int zlo = nz, zhi = -1;
    for (int z = zs - pl.H; z < ze + pl.H; z++) {
        int m = z;
        if (nz > 1) {
            int period = 2 * (nz - 1);
            m = ((z % period) + period) % period;
            m = m < nz ? m : period - m;
        } else {
            m = 0;
        }
        zlo = m < zlo ? m : zlo;
        zhi = m > zhi ? m : zhi;
    }
    const size_t nxy = (size_t)nx * ny;
    const float *src = in->data + (size_t)zlo * nxy;
    const size_t n = nxy * (zhi - zlo + 1);
    if (stg) {
        float mn = 0, mx = 0; /* one slab: the upload reads the whole volume */
        int rc = gpu_stage::h2d(stg, b.raw, src, n, st, find_range ? &mn : NULL,
                                find_range ? &mx : NULL);
        if (rc)
            return rc;
        if (find_range)
            gpu__anlm_range_from(mn, mx, &rg);
    } else {
        CUDA_CHECK(cudaMemcpyAsync(b.raw, src, sizeof(float) * n, cudaMemcpyHostToDevice, st));
    }
    CUDA_CHECK(cudaEventRecord(b.k0, st));
    dim3 blk(32, 8), grd((g.PX + 31) / 32, (g.PY + 7) / 8, g.PZ);
    pad_kernel<<<grd, blk, 0, st>>>(b.raw, b.u, g, nz, zs, zlo);
    CUDA_CHECK(cudaGetLastError());
    stats_kernel<<<grd, blk, 0, st>>>(b.u, b.m, b.v, b.r, g, p->block_radius);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(run_pass(p, b, g, nz, p->patch_radius, pl.q, rg, b.ea, st));
    if (p->mix) {
        CUDA_CHECK(run_pass(p, b, g, nz, p->patch_radius2, pl.q, rg, b.eb, st));
        dim3 mb(16, 8), mg((nx + 31) / 32, (ny + 15) / 16, (nzs + 1) / 2);
        mix_kernel<<<mg, mb, 0, st>>>(b.ea, b.eb, nx, ny, nzs);
        CUDA_CHECK(cudaGetLastError());
    }
    CUDA_CHECK(cudaEventRecord(b.k1, st));
    return 0;
}

int alloc_bufs(const plan &pl, const gpu_volume *in, bufs &b)
{
    const size_t pp = (size_t)pl.PX * pl.PY, nxy = (size_t)in->nx * in->ny;
    const size_t PZ = (size_t)pl.slab + 2 * pl.H, rawz = PZ < (size_t)in->nz ? PZ : in->nz;
    CUDA_CHECK(cudaMalloc(&b.raw, sizeof(float) * nxy * rawz));
    float **fields[] = {&b.u, &b.m, &b.v, &b.r, &b.s2};
    for (float **f : fields)
        CUDA_CHECK(cudaMalloc(f, sizeof(float) * pp * PZ));
    CUDA_CHECK(cudaMalloc(&b.ea, sizeof(float) * nxy * pl.slab));
    CUDA_CHECK(cudaMalloc(&b.eb, sizeof(float) * nxy * pl.slab));
    CUDA_CHECK(cudaEventCreate(&b.e0));
    CUDA_CHECK(cudaEventCreate(&b.e1));
    CUDA_CHECK(cudaEventCreate(&b.k0));
    CUDA_CHECK(cudaEventCreate(&b.k1));
    return 0;
}

int run_all(const gpu_anlm_params *p, const gpu_volume *in, gpu_volume *out, const plan &pl,
            bufs &b, gpu_stage::lease *stg, cudaStream_t st)
{
    /* The volume's range: found while the one slab is uploaded through the
     * pinned buffers, else read here first (the same numbers either way). */
    gpu__anlm_range rg;
    const bool find_range = stg && pl.nslabs == 1;
    if (!find_range)
        gpu__anlm_range_of(in, &rg);
    float xi[GPU_ANLM_XI_N];
    gpu__anlm_xi_table(xi);
    int rc = alloc_bufs(pl, in, b);
    if (rc)
        return rc;
    CUDA_CHECK(cudaEventRecord(b.e0, st));
    CUDA_CHECK(cudaMemcpyToSymbolAsync(c_xi, xi, sizeof xi, 0, cudaMemcpyHostToDevice, st));
    const size_t nxy = (size_t)in->nx * in->ny;
    double ksum = 0;
    for (int zs = 0; zs < in->nz; zs += pl.slab) {
        const int ze = zs + pl.slab > in->nz ? in->nz : zs + pl.slab;
        if ((rc = run_slab(p, in, pl, zs, ze, rg, find_range, b, stg, st)) != 0)
            return rc;
        float *dst = out->data + (size_t)zs * nxy;
        if (stg && (rc = gpu_stage::d2h(stg, dst, b.ea, nxy * (ze - zs), st)) != 0)
            return rc;
        if (!stg)
            CUDA_CHECK(cudaMemcpyAsync(dst, b.ea, sizeof(float) * nxy * (ze - zs),
                                       cudaMemcpyDeviceToHost, st));
        float kms = 0;
        CUDA_CHECK(cudaEventSynchronize(b.k1));
        CUDA_CHECK(cudaEventElapsedTime(&kms, b.k0, b.k1));
        ksum += kms;
    }
    CUDA_CHECK(cudaEventRecord(b.e1, st));
    CUDA_CHECK(cudaEventSynchronize(b.e1));
    float tms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&tms, b.e0, b.e1));
    if (p->stats) {
        p->stats->kernel_ms = ksum;
        p->stats->total_ms = tms;
        p->stats->slabs = pl.nslabs;
    }
    log_debug("anlm %dx%dx%d S=%d: %d slab(s) of %d, kernels %.3f ms, total %.3f ms", in->nx,
              in->ny, in->nz, p->search_radius, pl.nslabs, pl.slab, ksum, (double)tms);
    return 0;
}

} // namespace

extern "C" int gpu_anlm_cuda(const gpu_anlm_params *p, const gpu_volume *in, gpu_volume *out,
                             const gpu_device *dev)
{
    int rc = gpu_anlm_check(p, in, out);
    if (rc)
        return rc;
    gpu_device d;
    if (dev)
        d = *dev;
    else if ((rc = gpu_device_parse("gpu", &d)) != 0)
        return rc;
    if (d.kind != GPU_DEVICE_CUDA)
        return LDCT_ENOGPU;
    CUDA_CHECK(cudaSetDevice(d.index));
    plan pl;
    if ((rc = plan_of(p, in, gpu_device_budget(&d), &pl)) != 0) {
        log_err("anlm: GPU memory budget %zu bytes is below two planes", gpu_device_budget(&d));
        return rc;
    }
    cudaStream_t st = (cudaStream_t)d.stream;
    bufs b;
    memset(&b, 0, sizeof b);
    /* Pageable volumes go through pinned buffers (cuda_stage.cuh): 32 MB
     * chunks, the host copy of one overlapping the DMA of the other. */
    gpu_stage::lease stage;
    const bool staged = (!gpu_stage::host_pinned(in->data) || !gpu_stage::host_pinned(out->data)) &&
                        gpu_stage::acquire(&stage, d.index, gpu_stage::k_default_elems) == 0;
    rc = run_all(p, in, out, pl, b, staged ? &stage : NULL, st);
    cudaStreamSynchronize(st); /* queued copies end before buffers are freed */
    if (staged)
        gpu_stage::release(&stage);
    bufs_free(&b);
    return rc;
}
