/* anlm_cuda_emu: runs the CUDA kernels of adaptive NLM (gpu/anlm_kernels.cuh)
 * on the CPU, one OS thread per CUDA thread and a pthread barrier for
 * __syncthreads, with the host pipeline of gpu/anlm.cu (pad, stats, sweeps,
 * Rician, mixing, slabs) written out again here, and compares the result
 * with the CPU reference under check_gpu_anlm's tolerance. It checks the
 * kernels' index arithmetic and barriers on a machine without a GPU; it
 * cannot check launch limits, timing or the device's float rounding.
 *
 *   make build/tools/anlm_cuda_emu && build/tools/anlm_cuda_emu
 *   build/tools/anlm_cuda_emu NX NY NZ S P MIX RICIAN CFG SLAB   (one case)
 *
 * Exit 0 when every case passes. Main thread only (it spawns the block's
 * threads itself); small volumes only (hundreds of threads per block).
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <thread>
#include <vector>

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
static thread_local dim3 threadIdx(0, 0, 0);
static dim3 blockIdx(0, 0, 0), blockDim, gridDim;
static pthread_barrier_t g_bar;

/* CUDA spellings mapped to host C++ for the kernels' header. */
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __constant__
#define __restrict__
#define __shared__
#define __syncthreads() pthread_barrier_wait(&g_bar)
static inline float __ldg(const float *p)
{
    return *p;
}
/* The GPU's fast exponential; the C library's here (glibc declares a
 * symbol __expf of its own, so a macro, not a function). */
#define __expf(x) expf(x)
static inline double __dadd_rn(double a, double b)
{
    return a + b;
}
static inline double __dmul_rn(double a, double b)
{
    return a * b;
}
static inline double __ddiv_rn(double a, double b)
{
    return a / b;
}
static inline double __dsub_rn(double a, double b)
{
    return a - b;
}
static inline float __fsub_rn(float a, float b)
{
    return a - b;
}
using std::max;
using std::min;

enum { SMEM_FLOATS = 60000 }; /* 240 KB: above any block's dynamic shared memory */
namespace anlm_k
{
float sm[SMEM_FLOATS]; /* the running block's shared memory */
}
#include "gpu/anlm_kernels.cuh"

using namespace anlm_k;

/* One block at a time, its threads concurrent (the kernels synchronise). */
template <class F> static void launch_sync(dim3 grid, dim3 block, size_t smem_floats, F f)
{
    if (smem_floats > SMEM_FLOATS)
        abort();
    gridDim = grid, blockDim = block;
    const int nt = (int)(block.x * block.y * block.z);
    for (unsigned bz = 0; bz < grid.z; bz++)
        for (unsigned by = 0; by < grid.y; by++)
            for (unsigned bx = 0; bx < grid.x; bx++) {
                blockIdx = dim3(bx, by, bz);
                std::fill(sm, sm + SMEM_FLOATS, NAN); /* stale data must not help */
                pthread_barrier_init(&g_bar, NULL, (unsigned)nt);
                std::vector<std::thread> ts;
                for (int t = 0; t < nt; t++)
                    ts.emplace_back([=] {
                        threadIdx =
                            dim3(t % block.x, t / block.x % block.y, t / (block.x * block.y));
                        f();
                    });
                for (auto &t : ts)
                    t.join();
                pthread_barrier_destroy(&g_bar);
            }
}

/* Kernels without barriers: every thread in turn. */
template <class F> static void launch_seq(dim3 grid, dim3 block, F f)
{
    gridDim = grid, blockDim = block;
    for (unsigned bz = 0; bz < grid.z; bz++)
        for (unsigned by = 0; by < grid.y; by++)
            for (unsigned bx = 0; bx < grid.x; bx++) {
                blockIdx = dim3(bx, by, bz);
                for (unsigned tz = 0; tz < block.z; tz++)
                    for (unsigned ty = 0; ty < block.y; ty++)
                        for (unsigned tx = 0; tx < block.x; tx++) {
                            threadIdx = dim3(tx, ty, tz);
                            f();
                        }
            }
}

template <int P, bool SIGMA> static void sweep(int cfg, sweep_args a)
{
    const int cz = cfg == 2 ? 4 : 8;
    if (cfg == 0)
        launch_sync(dim3((a.rnx + TX - 1) / TX, (a.rny + TY - 1) / TY, (a.rnz + TZ - 1) / TZ),
                    dim3(TX, TY, TZ), smem_layout(a.S, P).total,
                    [=] { sweep_kernel<P, SIGMA>(a); });
    else if (cfg == 1)
        launch_sync(dim3((a.rnx + CX - 1) / CX, (a.rny + CY - 1) / CY, (a.rnz + cz - 1) / cz),
                    dim3(CX, CY), col_layout(a.S, P, cz).total,
                    [=] { sweep_col_kernel<P, SIGMA, 8>(a); });
    else
        launch_sync(dim3((a.rnx + CX - 1) / CX, (a.rny + CY - 1) / CY, (a.rnz + cz - 1) / cz),
                    dim3(CX, CY), col_layout(a.S, P, cz).total,
                    [=] { sweep_col_kernel<P, SIGMA, 4>(a); });
}

template <bool SIGMA> static void sweep_p(int cfg, int P, const sweep_args &a)
{
    if (P == 0)
        sweep<0, SIGMA>(cfg, a);
    else if (P == 1)
        sweep<1, SIGMA>(cfg, a);
    else if (P == 2)
        sweep<2, SIGMA>(cfg, a);
    else
        sweep<3, SIGMA>(cfg, a);
}

struct fields {
    std::vector<float> u, m, v, r, s2;
};

static void run_pass(int cfg, const gpu_anlm_params *p, fields &f, const grid &g, int P, int q,
                     const gpu__anlm_range &rg, float *e)
{
    sweep_args a = {};
    a.m = f.m.data(), a.v = f.v.data(), a.s2 = f.s2.data(), a.e = e, a.g = g;
    a.S = p->search_radius, a.rician = p->noise == GPU_ANLM_RICIAN, a.rg = rg;
    a.mu = p->mean_ratio, a.nu = p->var_ratio, a.str2 = p->strength * p->strength;
    a.f = f.r.data(), a.r0 = -q, a.rnx = g.nx + 2 * q, a.rny = g.ny + 2 * q, a.rnz = g.nzs + 2 * q;
    sweep_p<true>(cfg, P, a);
    a.f = f.u.data(), a.r0 = 0, a.rnx = g.nx, a.rny = g.ny, a.rnz = g.nzs;
    sweep_p<false>(cfg, P, a);
    if (a.rician) {
        const float *s2 = f.s2.data(), *m = f.m.data();
        launch_seq(dim3((g.nx + 31) / 32, (g.ny + 7) / 8, g.nzs), dim3(32, 8),
                   [=] { rician_kernel(e, s2, m, g); });
    }
}

static int mirror_host(int z, int n)
{
    if (n <= 1)
        return 0;
    int per = 2 * (n - 1), m = ((z % per) + per) % per;
    return m < n ? m : per - m;
}

/* gpu/anlm.cu's run_slab for every slab of `slab` planes (even). */
static void emulate(int cfg, const gpu_anlm_params *p, const gpu_volume *in, gpu_volume *out,
                    int slab)
{
    gpu__anlm_range rg;
    gpu__anlm_range_of(in, &rg);
    gpu__anlm_xi_table(c_xi);
    const int q = p->noise == GPU_ANLM_RICIAN ? GPU_ANLM_RICIAN_REG : 0;
    const int pmax =
        p->mix && p->patch_radius2 > p->patch_radius ? p->patch_radius2 : p->patch_radius;
    const int H = p->block_radius + q + p->search_radius + pmax;
    const int nx = in->nx, ny = in->ny, nz = in->nz;
    for (int zs = 0; zs < nz; zs += slab) {
        const int ze = std::min(nz, zs + slab), nzs = ze - zs;
        const grid g = {nx, ny, nzs, H, nx + 2 * H, ny + 2 * H, nzs + 2 * H};
        int zlo = nz;
        for (int z = zs - H; z < ze + H; z++)
            zlo = std::min(zlo, mirror_host(z, nz));
        const size_t np = (size_t)g.PX * g.PY * g.PZ;
        fields f;
        f.u.assign(np, NAN), f.m.assign(np, NAN), f.v.assign(np, NAN), f.r.assign(np, NAN);
        f.s2.assign(np, NAN);
        std::vector<float> ea((size_t)nx * ny * nzs, NAN), eb = ea;
        const float *raw = in->data + (size_t)zlo * nx * ny;
        float *u = f.u.data(), *m = f.m.data(), *v = f.v.data(), *r = f.r.data();
        const dim3 grd((g.PX + 31) / 32, (g.PY + 7) / 8, g.PZ), blk(32, 8);
        const int rb = p->block_radius;
        launch_seq(grd, blk, [=] { pad_kernel(raw, u, g, nz, zs, zlo); });
        launch_seq(grd, blk, [=] { stats_kernel(u, m, v, r, g, rb); });
        run_pass(cfg, p, f, g, p->patch_radius, q, rg, ea.data());
        if (p->mix) {
            run_pass(cfg, p, f, g, p->patch_radius2, q, rg, eb.data());
            float *pa = ea.data();
            const float *pb = eb.data();
            launch_seq(dim3((nx + 31) / 32, (ny + 15) / 16, (nzs + 1) / 2), dim3(16, 8),
                       [=] { mix_kernel(pa, pb, nx, ny, nzs); });
        }
        memcpy(out->data + (size_t)zs * nx * ny, ea.data(), ea.size() * sizeof(float));
    }
}

static unsigned long long rng = 0x853C49E6748FEA9Bull;
static double urand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}
static double grand(void)
{
    double a = urand();
    return sqrt(-2.0 * log(a < 1e-300 ? 1e-300 : a)) * cos(6.283185307179586 * urand());
}

/* check_gpu_anlm's input: structure, noise rising along x, Rician optional. */
static void fill(gpu_volume *v, int rician)
{
    for (int z = 0; z < v->nz; z++)
        for (int y = 0; y < v->ny; y++)
            for (int x = 0; x < v->nx; x++) {
                double cx = x - v->nx / 2.0, cy = y - v->ny / 2.0;
                double s = (rician ? 60.0 : -300.0) + 1.5 * x - y + 0.5 * z +
                           (cx * cx + cy * cy < v->nx * v->nx / 9.0 ? 120.0 : 0.0);
                double sg = 15.0 * (1.0 + 2.0 * x / v->nx), n1 = sg * grand();
                double n2 = rician ? sg * grand() : 0.0;
                v->data[((size_t)z * v->ny + y) * v->nx + x] =
                    (float)(rician ? sqrt((s + n1) * (s + n1) + n2 * n2) : s + n1);
            }
}

/* One case; 0 when within check_gpu_anlm's tolerance. */
static int run_case(const int *c)
{
    const int nx = c[0], ny = c[1], nz = c[2], cfg = c[7], slab = c[8];
    gpu_volume in, ref, out;
    if (gpu_volume_init(&in, nx, ny, nz, 1) || gpu_volume_init(&ref, nx, ny, nz, 1) ||
        gpu_volume_init(&out, nx, ny, nz, 1))
        return 1;
    fill(&in, c[6]);
    gpu_anlm_params p;
    gpu_anlm_params_default(&p);
    p.search_radius = c[3], p.patch_radius = c[4], p.mix = c[5];
    p.noise = c[6] ? GPU_ANLM_RICIAN : GPU_ANLM_GAUSSIAN;
    gpu_device cpu = {};
    cpu.kind = GPU_DEVICE_CPU;
    int rc = gpu_anlm_ref(&p, &in, &ref, &cpu);
    if (rc == 0)
        emulate(cfg, &p, &in, &out, slab);
    double num = 0, den = 0, mx = 0, lo = ref.data[0], hi = ref.data[0];
    size_t nans = 0, far = 0, n = gpu_volume_count(&in);
    for (size_t i = 0; i < n; i++)
        lo = std::min(lo, (double)ref.data[i]), hi = std::max(hi, (double)ref.data[i]);
    for (size_t i = 0; i < n; i++) {
        if (isnan(out.data[i])) {
            nans++;
            continue;
        }
        double d = (double)out.data[i] - ref.data[i];
        num += d * d, den += (double)ref.data[i] * ref.data[i], mx = std::max(mx, fabs(d));
        far += fabs(d) > 1e-3 * (hi - lo);
    }
    double e = sqrt(num / den);
    int bad = rc || nans || !(e <= 1e-5) || far * 1000 > n;
    printf("%s %dx%dx%d S=%d P=%d mix=%d rician=%d cfg=%d slab=%d: rel L2 %.3g max %.3g nans %zu "
           "far %zu\n",
           bad ? "FAIL" : "ok  ", nx, ny, nz, c[3], c[4], c[5], c[6], cfg, slab, e, mx, nans, far);
    fflush(stdout);
    gpu_volume_close(&in);
    gpu_volume_close(&ref);
    gpu_volume_close(&out);
    return bad;
}

int main(int argc, char **argv)
{
    /* nx ny nz S P mix rician cfg slab */
    static const int cases[][9] = {
        {13, 11, 9, 3, 1, 1, 0, 1, 100},  {13, 11, 9, 3, 1, 1, 1, 1, 100},
        {13, 11, 9, 3, 1, 1, 0, 1, 4},    {13, 11, 9, 3, 1, 1, 1, 1, 2},
        {9, 8, 7, 5, 3, 0, 1, 1, 100},    {40, 1, 3, 2, 1, 1, 0, 1, 100},
        {35, 10, 10, 1, 0, 0, 0, 1, 100}, {11, 9, 7, 2, 1, 0, 0, 0, 100},
        {9, 8, 6, 2, 1, 1, 1, 0, 2},      {13, 11, 9, 3, 1, 1, 0, 2, 100},
        {13, 11, 9, 3, 1, 1, 1, 2, 4},    {9, 8, 7, 5, 3, 0, 1, 2, 100},
    };
    if (argc == 10) {
        int c[9];
        for (int i = 0; i < 9; i++)
            c[i] = atoi(argv[i + 1]);
        return run_case(c);
    }
    if (argc != 1) {
        fprintf(stderr, "usage: anlm_cuda_emu [NX NY NZ S P MIX RICIAN CFG SLAB]\n");
        return 2;
    }
    int failed = 0;
    for (const auto &c : cases)
        failed += run_case(c);
    printf("%d case(s) failed\n", failed);
    return failed ? 1 : 0;
}
