/* nlm3d v3: the z sweep of nlm3d_v2_kernel (gpu/nlm.cu) reordered so that
 * the shared-memory exchange and the y pass run only for output planes.
 *
 * Per offset group (NDX consecutive dx of one (dy, dz)) a block sweeps its
 * LZ output planes plus 2P halo planes. Phase A: each thread owns one row
 * segment of RS columns (rows -P .. TY+P-1 of the tile), loads the U(o) and
 * the U(o+d) rows once for all NDX offsets, forms x box sums as running sums
 * in registers (two chains per segment), keeps 2P values per column in a
 * register ring (the z box, see zring) and, once the ring is full, writes
 * the z box sums XZ of the plane to shared memory (double buffered, one
 * barrier per output plane, none for the 2P ring-filling steps). Phase B:
 * each thread owns one column and RYB consecutive rows (NSPLIT threads
 * share a column's offsets), sums 2P+1 XZ rows with running sums (the y
 * box), takes w = 2^(-D kh3) and accumulates w and w U(o+d) in registers
 * for its LZ planes. v6 (below) runs v3's group body on a copy of the
 * block's whole neighbourhood in shared memory; v8 (below) runs v6's sweep
 * on taller tiles with plane classes in phase B (the default for S = 5).
 * Variants superseded by these (v4: v3 with the rows staged in shared
 * memory; other tilings and sweeps of v3 and v6) were removed after commit
 * f6d49fc; docs/NOTES-gpu.md has their measurements.
 *
 * Uniform patch weights only: the (2P+1)^3 normalisation is folded into
 * kh3, so D here is the plain sum of squared differences. The centre offset
 * is computed like any other (its differences are exactly 0, so its weight
 * is exactly 1, or 2^-koff in the UFLOW variants, which scale every
 * weight so), and slots past S are skipped with block-uniform branches
 * or, in MASK variants, computed and given weight 0 (see v3_group).
 * Running sums in x and y start at fixed tile positions and the z box adds
 * its planes in an order fixed relative to the output plane, so a voxel's
 * arithmetic does not depend on where a slab starts (slabbed and
 * single-slab runs agree bit for bit; the lean variants' running z sums
 * need slabs to start at multiples of LZ, which nlm.cu arranges).
 *
 * Measured (512^3, S=5, P=2, kernel time; docs/NOTES-gpu.md): v8 0.166 s
 * (H100 and H200), v6 0.182 s (H200), v3 (MASK, and no branch around phase
 * A: no branch in the sweep) 0.382 s (H100 and H200), v2 0.70 s. v3 is held back by 64-bit
 * addressing and L1 latency of its global loads (ncu: issue slots 47% busy); v6, with neither,
 * keeps them 70% busy with 2 warps per scheduler (registers and shared memory allow one block of 8
 * warps per SM), FMA pipe 49%, shared-memory pipe 69%.
 *
 * Callers: gpu/nlm.cu's host wrapper, on its stream.
 */
#include <stddef.h>

#include <type_traits>

#include "gpu/nlm.h"
#include "gpu/nlm_cuda_v3.cuh"

namespace
{

__device__ __forceinline__ float ex2_ftz(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

/* Block geometry: NG row groups x NSPLIT offset halves of warps; phase A
 * rows XH = TY + 2P fill at most the NT / NSEG items of the block. */
template <int P, int NG_, int NSPLIT_, int RS> struct geom3 {
    static constexpr int NG = NG_, NSPLIT = NSPLIT_;
    static constexpr int NW = NG * NSPLIT, NT = 32 * NW, TX = 32, NSEG = TX / RS;
    static constexpr int XHMAX = NT / NSEG;
    static constexpr int RYB = (XHMAX - 2 * P) / NG;
    static constexpr int TY = NG * RYB, XH = TY + 2 * P;
};

/* xbox with one running sum per segment: 2P + 1 + 2 (RS - 1) FMAs for RS
 * sums instead of two chains' 2 (2P + 1) + 2 (RS - 2). v6 has the
 * independent chains across its NDX slots. */
template <int RS, int P>
__device__ __forceinline__ void xbox1(const float *ua, const float *ub, float *xs)
{
    float e[RS + 2 * P];
#pragma unroll
    for (int k = 0; k < RS + 2 * P; k++)
        e[k] = ua[k] - ub[k];
    float a = e[0] * e[0];
#pragma unroll
    for (int k = 1; k <= 2 * P; k++)
        a = fmaf(e[k], e[k], a);
    xs[0] = a;
#pragma unroll
    for (int m = 1; m < RS; m++) {
        a = fmaf(e[m + 2 * P], e[m + 2 * P], a);
        a = fmaf(-e[m - 1], e[m - 1], a);
        xs[m] = a;
    }
}

/* xbox for RS 4, P 2 as a tree of shared partial sums (TREE v6 variants):
 * 10 FMAs instead of xbox1's 11, and a dependency depth of 5 instead of 11. */
__device__ __forceinline__ void xbox_tree42(const float *ua, const float *ub, float *xs)
{
    float e[8];
#pragma unroll
    for (int k = 0; k < 8; k++)
        e[k] = ua[k] - ub[k];
    const float q34 = fmaf(e[4], e[4], e[3] * e[3]);
    const float q1234 = fmaf(e[1], e[1], fmaf(e[2], e[2], q34));
    const float q3456 = fmaf(e[6], e[6], fmaf(e[5], e[5], q34));
    xs[0] = fmaf(e[0], e[0], q1234);
    xs[1] = fmaf(e[5], e[5], q1234);
    xs[2] = fmaf(e[2], e[2], q3456);
    xs[3] = fmaf(e[7], e[7], q3456);
}

/* Phase A arithmetic shared by the v3, v6 and v8 kernels. xbox: RS x box sums
 * (plain sums of squared differences over 2P+1 columns) from the U(o) and
 * U(o+d) row segments, as two independent running sums (halves of the
 * segment) so a warp has more than one dependency chain in flight. */
template <int RS, int P, bool ONE = false, bool TREE = false>
__device__ __forceinline__ void xbox(const float *ua, const float *ub, float *xs)
{
    if constexpr (TREE && RS == 4 && P == 2) {
        xbox_tree42(ua, ub, xs);
        return;
    }
    if (ONE) {
        xbox1<RS, P>(ua, ub, xs);
        return;
    }
    constexpr int H = RS / 2;
    float e[RS + 2 * P];
#pragma unroll
    for (int k = 0; k < RS + 2 * P; k++)
        e[k] = ua[k] - ub[k];
    float a = e[0] * e[0], b = e[H] * e[H];
#pragma unroll
    for (int k = 1; k <= 2 * P; k++) {
        a = fmaf(e[k], e[k], a);
        b = fmaf(e[H + k], e[H + k], b);
    }
    xs[0] = a;
    xs[H] = b;
#pragma unroll
    for (int m = 1; m < H; m++) {
        a = fmaf(e[m + 2 * P], e[m + 2 * P], a);
        b = fmaf(e[H + m + 2 * P], e[H + m + 2 * P], b);
        a = fmaf(-e[m - 1], e[m - 1], a);
        b = fmaf(-e[H + m - 1], e[H + m - 1], b);
        xs[m] = a;
        xs[H + m] = b;
    }
}

/* z box of step s (plane order fixed, so independent of where the chunk
 * starts): with v_t the x box sum of step t and pairs p_t = v_t + v_{t-1},
 * XZ(s) = (p_{s-2P+1} + ... + p_{s-3} + p_{s-1}) + v_s. State per column:
 * zl = v_{s-1} and a ring zp of the last 2P-1 pairs (2P values, one fewer
 * than a ring of 2P+1 sums, and P+1 additions per value instead of 2P).
 * Returns XZ(s) when s >= 2P. */
template <int P> struct zring {
    static constexpr int NP = P > 0 ? 2 * P - 1 : 1;
    float zl, zp[NP];
    __device__ __forceinline__ float step(float v, int s)
    {
        if (P == 0)
            return v;
        float r = 0.0f;
        if (s >= 2 * P) {
            r = zp[(s - 2 * P + 1) % NP];
#pragma unroll
            for (int i = P - 1; i >= 1; i--)
                r += zp[(s - 2 * i + 1) % NP];
            r += v;
        }
        if (s >= 1)
            zp[s % NP] = v + zl; /* overwrites p_{s-2P+1}, read above */
        zl = v;
        return r;
    }
};

/* z box as one running sum per column (LEAN v6 variants): acc holds the
 * sum of the last 2P x box sums and zv the values themselves, so XZ(s) =
 * acc + v_s and the next acc = XZ(s) - v_{s-2P}: 2 additions per value
 * instead of zring's 3, one register more. The sum depends on the step the
 * block started at, so slabs start at multiples of LZ (nlm.cu) to keep
 * slabbed and single-slab runs identical. The centre offset's values are
 * all 0, so its sums stay exactly 0. */
template <int P> struct zrun {
    static constexpr int NV = P > 0 ? 2 * P : 1;
    float acc, zv[NV];
    __device__ __forceinline__ float step(float v, int s)
    {
        if (P == 0)
            return v;
        float r = 0.0f;
        if (s == 0) {
            acc = v;
        } else if (s < 2 * P) {
            acc += v;
        } else {
            r = acc + v;
            acc = r - zv[s % NV]; /* v_{s-2P} */
        }
        zv[s % NV] = v;
        return r;
    }
};

/* Phase B: RYB y box sums over 2P+1 rows of xv, one running sum (the
 * thread's NDX / NSPLIT slots are the independent chains); with K, k is
 * added to every sum. */
template <int RYB, int P, bool K = false>
__device__ __forceinline__ void ybox1(const float *xv, float *ys, float k = 0.0f)
{
    float a = K ? xv[0] + k : xv[0];
#pragma unroll
    for (int k = 1; k <= 2 * P; k++)
        a += xv[k];
    ys[0] = a;
#pragma unroll
    for (int i = 1; i < RYB; i++) {
        a = (a + xv[i + 2 * P]) - xv[i - 1];
        ys[i] = a;
    }
}

/* ybox1 with k added to every sum (UFLOW v6 variants: k = 126 - the
 * cutoff exponent). TREE, for RYB 7 and P 2: sums 0-3 from shared partial
 * sums, 4-6 running on from 3, 16 additions instead of 17. */
template <int RYB, int P, bool TREE>
__device__ __forceinline__ void ybox1k(const float *xv, float k, float *ys)
{
    if constexpr (TREE && RYB == 7 && P == 2) {
        const float t34 = (xv[3] + k) + xv[4];
        const float t1234 = (t34 + xv[2]) + xv[1], t3456 = (t34 + xv[5]) + xv[6];
        ys[0] = t1234 + xv[0];
        ys[1] = t1234 + xv[5];
        ys[2] = t3456 + xv[2];
        ys[3] = t3456 + xv[7];
        float a = ys[3];
#pragma unroll
        for (int i = 4; i < 7; i++) {
            a = (a + xv[i + 4]) - xv[i - 1];
            ys[i] = a;
        }
        return;
    }
    ybox1<RYB, P, true>(xv, ys, k);
}

/* Phase B: RYB y box sums over 2P+1 rows of xv, two running sums. */
template <int RYB, int P> __device__ __forceinline__ void ybox(const float *xv, float *ys)
{
    constexpr int H = (RYB + 1) / 2;
    float a = xv[0], b = xv[H];
#pragma unroll
    for (int k = 1; k <= 2 * P; k++) {
        a += xv[k];
        if (H < RYB)
            b += xv[H + k];
    }
    ys[0] = a;
    if (H < RYB)
        ys[H] = b;
#pragma unroll
    for (int i = 1; i < H; i++) {
        a = (a + xv[i + 2 * P]) - xv[i - 1];
        ys[i] = a;
        if (H + i < RYB) {
            b = (b + xv[H + i + 2 * P]) - xv[H + i - 1];
            ys[H + i] = b;
        }
    }
}

/* Where a group reads U. src_global: the padded slab in global memory
 * through the read-only cache, run-time strides (v3). src_shared: the
 * block's neighbourhood copied to shared memory, compile-time strides, so
 * the rows of a step are immediate offsets from one 32-bit address (v6).
 * arow: phase A's row segment, brow: phase B's first row, both at plane
 * 0 and offset 0. TUNED v6 variants also take their input prescaled by
 * sqrt(kh3) (sums of squared differences are then exp2's argument, no
 * multiply per weight) and use one x-box chain per slot. LEAN levels: 1
 * z box and y box as single running sums, 2 also the cutoff in exp2's
 * underflow (accumulate_uf), 3 also the tree x and y boxes. */
struct src_global {
    static constexpr bool one_chain = false, prescaled = false, lean = false, uflow = false,
                          tree = false;
    const float *arow, *brow;
    ptrdiff_t pp;
    int PXp;
    __device__ __forceinline__ float ld(const float *p) const
    {
        return __ldg(p);
    }
    __device__ __forceinline__ ptrdiff_t plane() const
    {
        return pp;
    }
    __device__ __forceinline__ ptrdiff_t row() const
    {
        return PXp;
    }
};

template <int PL, int XS, bool TUNED, int LEAN = 0> struct src_shared {
    static constexpr bool one_chain = TUNED, prescaled = TUNED, lean = LEAN >= 1, uflow = LEAN >= 2,
                          tree = LEAN >= 3;
    const float *arow, *brow;
    __device__ __forceinline__ float ld(const float *p) const
    {
        return *p;
    }
    __device__ __forceinline__ static constexpr ptrdiff_t plane()
    {
        return PL;
    }
    __device__ __forceinline__ static constexpr ptrdiff_t row()
    {
        return XS;
    }
};

/* Phase B's loads for one offset slot: U(o+d) of the RYB rows (u: the
 * first) and the RYB + 2P z box sums of the column the y box needs. */
template <int RYB, int P, typename Src>
__device__ __forceinline__ void phase_b_loads(const float *col, int XW, const float *u,
                                              const Src &m, float (&uv)[RYB],
                                              float (&xv)[RYB + 2 * P])
{
#pragma unroll
    for (int i = 0; i < RYB; i++)
        uv[i] = m.ld(u + (ptrdiff_t)i * m.row());
#pragma unroll
    for (int k = 0; k < RYB + 2 * P; k++)
        xv[k] = col[k * XW];
}

/* Phase B for one offset slot: weights of the RYB rows of this thread's
 * column and their accumulation (u: U(o+d) of the first row). The distance
 * cutoff (nlm.h) selects the weight, or with PRED predicates the
 * accumulation (the weight is computed unconditionally): same sums. */
template <int RYB, int P, int LZ, bool PRED = false, typename Src = src_global, bool PRESC = false>
__device__ __forceinline__ void accumulate(const float *col, int XW, const float *u, const Src &m,
                                           float kh3, float ycut, int z, float (&aw)[RYB][LZ],
                                           float (&av)[RYB][LZ])
{
    float uv[RYB], xv[RYB + 2 * P], ys[RYB];
    phase_b_loads<RYB, P>(col, XW, u, m, uv, xv);
    if (Src::lean)
        ybox1<RYB, P>(xv, ys);
    else
        ybox<RYB, P>(xv, ys);
#pragma unroll
    for (int i = 0; i < RYB; i++) {
        const float y = PRESC ? ys[i] : ys[i] * kh3;
        if (PRED) {
            const float w = ex2_ftz(-y);
            if (y <= ycut) {
                aw[i][z] += w;
                av[i][z] = fmaf(w, uv[i], av[i][z]);
            }
        } else {
            const float w = y <= ycut ? ex2_ftz(-y) : 0.0f;
            aw[i][z] += w;
            av[i][z] = fmaf(w, uv[i], av[i][z]);
        }
    }
}

/* Phase B of the UFLOW variants. Every y box sum carries koff = 126 -
 * ycut, so exp2's argument is -(D' + koff) and w = 2^-koff 2^-D' is a
 * normal float exactly while D' <= ycut: above the cutoff ex2.approx.ftz
 * flushes it to 0. No compare or select per weight; the common factor
 * 2^-koff cancels in av / aw. koff = 0 without a cutoff (then, as in
 * accumulate, weights below 2^-126 are 0). Masked slots get koff 1e4. */
template <int RYB, int P, int LZ, typename Src>
__device__ __forceinline__ void accumulate_uf(const float *col, int XW, const float *u,
                                              const Src &m, float koff, int z, float (&aw)[RYB][LZ],
                                              float (&av)[RYB][LZ])
{
    float uv[RYB], xv[RYB + 2 * P], ys[RYB];
    phase_b_loads<RYB, P>(col, XW, u, m, uv, xv);
    ybox1k<RYB, P, Src::tree>(xv, koff, ys);
#pragma unroll
    for (int i = 0; i < RYB; i++) {
        const float w = ex2_ftz(-ys[i]);
        aw[i][z] += w;
        av[i][z] = fmaf(w, uv[i], av[i][z]);
    }
}

/* koff of accumulate_uf for a cutoff exponent ycut (INFINITY: no cutoff).
 * GPU_NLM_MAX_CUTOFF (80) keeps ycut under 116, so koff > 10 and the
 * largest weight 2^-koff stays far from overflow in av and aw. */
__device__ __forceinline__ float uflow_koff(float ycut)
{
    static_assert(GPU_NLM_MAX_CUTOFF * 1.4426950408889634 < 120.0, "koff must stay positive");
    return isinf(ycut) ? 0.0f : 126.0f - ycut;
}

/* Phase A for one offset slot: x box sums of the thread's RS columns from
 * its U(o) and U(o+d) row segments, the z ring step, and from step 2P on
 * the z box sums XZ stored to dst (16-byte stores). */
template <int RS, int P, bool ONE = false, typename ZR = zring<P>, bool TREE = false>
__device__ __forceinline__ void phase_a_slot(const float *ua, const float *ub, ZR (&zr)[RS], int s,
                                             float *dst)
{
    float xs[RS], v[RS];
    xbox<RS, P, ONE, TREE>(ua, ub, xs);
#pragma unroll
    for (int m = 0; m < RS; m++)
        v[m] = zr[m].step(xs[m], s);
    if (s >= 2 * P) {
#pragma unroll
        for (int m = 0; m < RS; m += 4)
            *reinterpret_cast<float4 *>(dst + m) = make_float4(v[m], v[m + 1], v[m + 2], v[m + 3]);
    }
}

/* Per-thread roles of a v3 block and the parameters every offset group
 * shares (phase A: row ar, segment aseg; phase B: row group bg, half bh). */
struct v3ctx {
    int ar, aseg, bg, bh, lane;
    bool aact;
    float kh3, ycut;
};

/* One offset group: NDX consecutive dx of one (dy, dz) swept over the
 * block's LZ + 2P planes. Slots j >= nval lie past S: without MASK they are
 * skipped (block-uniform branches per slot); with MASK every slot is
 * computed (its reads land in the padded spare columns) and phase B gives
 * the invalid ones a cutoff below any distance, so they add nothing: no
 * branch in the sweep, at the price of the invalid slots' arithmetic. */
/* This thread's phase A and phase B roles in a block of geometry G. */
template <typename G> __device__ __forceinline__ void v3_roles(v3ctx &c)
{
    const int tid = threadIdx.x, warp = tid >> 5;
    c.lane = tid & 31;
    c.ar = tid / G::NSEG;
    c.aseg = tid % G::NSEG;
    c.aact = c.ar < G::XH;
    c.bg = warp % G::NG;
    c.bh = G::NSPLIT == 1 ? 0 : warp / G::NG;
}

/* Phase A of plane step s (plane z0 - P + s): the U(o) and U(o+d) row
 * segments, then the x box and z box of each of the NS slots (without MASK
 * only j < nval), stored from step 2P on into xz[j] at the thread's row and
 * segment. Shared by v3_group and v8_group. */
template <int P, int RS, int NS, bool MASK, typename ZR, typename Src, typename XZP>
__device__ __forceinline__ void phase_a_step(const v3ctx &c, const Src &m, ptrdiff_t doff, int s,
                                             int nval, ZR (&zr)[NS][RS], XZP xz)
{
    constexpr int NUA = RS + 2 * P;
    const float *a = m.arow + (ptrdiff_t)(s - P) * m.plane();
    const float *b = a + doff;
    float ua[NUA], ub[NUA + NS - 1];
#pragma unroll
    for (int k = 0; k < NUA; k++)
        ua[k] = m.ld(a + k);
#pragma unroll
    for (int k = 0; k < NUA + NS - 1; k++)
        ub[k] = m.ld(b + k);
#pragma unroll
    for (int j = 0; j < NS; j++) {
        if (!MASK && j >= nval)
            continue;
        phase_a_slot<RS, P, Src::one_chain, ZR, Src::tree>(ua, ub + j, zr[j], s,
                                                           &xz[j][c.ar][c.aseg * RS]);
    }
}

template <int P, int LZ, int RS, int NDX, int NG, int NSPLIT, bool MASK, bool AFULL, int NDXA = NDX,
          typename XZT, int RYB, typename Src>
__device__ __forceinline__ void v3_group(const v3ctx &c, const Src &m, ptrdiff_t doff, int nval,
                                         XZT &XZ, float (&aw)[RYB][LZ], float (&av)[RYB][LZ])
{
    constexpr int NDXB = NDX / NSPLIT;
    constexpr int XW = sizeof(XZ[0][0][0]) / sizeof(float); /* the kernel's XZ row stride */
    float ycutj[NDXB];
#pragma unroll
    for (int jj = 0; jj < NDXB; jj++)
        ycutj[jj] = c.bh * NDXB + jj < nval ? c.ycut : Src::uflow ? 1e4f : -1.0f;
    using ZR = std::conditional_t<Src::lean, zrun<P>, zring<P>>;
    ZR zr[NDXA][RS];
#pragma unroll
    for (int s = 0; s < LZ + 2 * P; s++) {
        /* Phase A: x box sums of plane z0 - P + s, z box sums (AFULL: every
         * thread owns a segment, no branch). */
        if (AFULL || c.aact)
            phase_a_step<P, RS, NDXA, MASK>(c, m, doff, s, nval, zr, XZ[(s - 2 * P) & 1]);
        if (s < 2 * P)
            continue; /* ring still filling: nothing shared yet */
        /* Phase B: y box sums, weights, accumulation for plane z. */
        const int z = s - 2 * P, buf = z & 1;
        __syncthreads();
#pragma unroll
        for (int jj = 0; jj < NDXB; jj++) {
            const int j = c.bh * NDXB + jj;
            if (!MASK && j >= nval)
                continue;
            if constexpr (Src::uflow) {
                accumulate_uf<RYB, P, LZ, Src>(&XZ[buf][j][c.bg * RYB][c.lane], XW,
                                               m.brow + (ptrdiff_t)z * m.plane() + doff + j, m,
                                               ycutj[jj], z, aw, av);
                continue;
            }
            accumulate<RYB, P, LZ, MASK, Src, Src::prescaled>(
                &XZ[buf][j][c.bg * RYB][c.lane], XW, m.brow + (ptrdiff_t)z * m.plane() + doff + j,
                m, c.kh3, MASK ? ycutj[jj] : c.ycut, z, aw, av);
        }
        /* The next phase A writes the other buffer; this one is rewritten
         * only after the next barrier. */
    }
}

/* Clears a thread's accumulators (weights aw, weighted values av). */
template <int RYB, int LZ>
__device__ __forceinline__ void zero_acc(float (&aw)[RYB][LZ], float (&av)[RYB][LZ])
{
#pragma unroll
    for (int i = 0; i < RYB; i++)
#pragma unroll
        for (int z = 0; z < LZ; z++) {
            aw[i][z] = 0.0f;
            av[i][z] = 0.0f;
        }
}

/* Writes out = av / aw for the block's voxels; with NSPLIT 2 the two halves'
 * partial sums are added through shared memory (red: 2 TY x 32 floats). */
template <int NG, int NSPLIT, int LZ, int RYB, int TY>
__device__ __forceinline__ void
v3_store(float *out, float *red, int nx, int ny, int nzs, int x0, int y0, int z0, int bg, int bh,
         int lane, float (&aw)[RYB][LZ], float (&av)[RYB][LZ], float oscale = 1.0f)
{
    const int x = x0 + lane;
    if (NSPLIT == 1) {
#pragma unroll
        for (int i = 0; i < RYB; i++)
#pragma unroll
            for (int z = 0; z < LZ; z++) {
                const int y = y0 + bg * RYB + i, zz = z0 + z;
                if (x < nx && y < ny && zz < nzs)
                    out[((size_t)zz * ny + y) * nx + x] = oscale * (av[i][z] / aw[i][z]);
            }
        return;
    }
    __syncthreads();
#pragma unroll
    for (int z = 0; z < LZ; z++) {
        if (bh != 0)
#pragma unroll
            for (int i = 0; i < RYB; i++) {
                red[(bg * RYB + i) * 32 + lane] = aw[i][z];
                red[(TY + bg * RYB + i) * 32 + lane] = av[i][z];
            }
        __syncthreads();
        if (bh == 0)
#pragma unroll
            for (int i = 0; i < RYB; i++) {
                const int y = y0 + bg * RYB + i, zz = z0 + z;
                const float sw = aw[i][z] + red[(bg * RYB + i) * 32 + lane];
                const float sv = av[i][z] + red[(TY + bg * RYB + i) * 32 + lane];
                if (x < nx && y < ny && zz < nzs)
                    out[((size_t)zz * ny + y) * nx + x] = oscale * (sv / sw);
            }
        __syncthreads();
    }
}

template <int P, int LZ, int RS, int NDX, int NG, int NSPLIT, int MINB, bool MASK>
__global__ void __launch_bounds__(32 * NG * NSPLIT, MINB)
    nlm3d_v3_kernel(const float *__restrict__ pad, float *__restrict__ out, int nx, int ny, int nzs,
                    int PXp, int PY, int S, float kh3, float ycut)
{
    using G = geom3<P, NG, NSPLIT, RS>;
    constexpr int TX = G::TX, TY = G::TY, XH = G::XH, RYB = G::RYB, NSEG = G::NSEG;
    constexpr int XW = TX + 4; /* row stride: conflict-free float4 stores for RS 8 */
    static_assert(NDX % NSPLIT == 0 && NSPLIT <= 2, "offset split");
    static_assert(LZ % 2 == 0, "buffer parity must alternate across offset groups");
    static_assert(RS % 4 == 0 && TX % RS == 0, "float4 stores");
    static_assert(RYB >= 1, "tile too small for this patch radius");
    static_assert(2 * TY * 32 <= 2 * NDX * XH * XW, "reduction buffer");
    __shared__ __align__(16) float XZ[2][NDX][XH][XW];

    const int R = S + P;
    v3ctx c;
    src_global m;
    m.pp = (ptrdiff_t)PY * PXp;
    m.PXp = PXp;
    c.kh3 = kh3;
    c.ycut = ycut;
    const int x0 = blockIdx.x * TX, y0 = blockIdx.y * TY, z0 = blockIdx.z * LZ;
    /* Padded coordinates of voxel (x, y, z) are (x + R, y + R, z + R). */
    const float *orig = pad + (ptrdiff_t)(z0 + R) * m.pp + (ptrdiff_t)(y0 + R) * PXp + (x0 + R);
    v3_roles<G>(c);
    m.arow = orig + (ptrdiff_t)(c.ar - P) * PXp + (c.aseg * RS - P);
    m.brow = orig + (ptrdiff_t)(c.bg * RYB) * PXp + c.lane;

    float aw[RYB][LZ], av[RYB][LZ];
    zero_acc(aw, av);

    for (int dz = -S; dz <= S; dz++)
        for (int dy = -S; dy <= S; dy++)
            for (int dx0 = -S; dx0 <= S; dx0 += NDX) {
                const ptrdiff_t doff = (ptrdiff_t)dz * m.pp + (ptrdiff_t)dy * PXp + dx0;
                const int nval = S - dx0 + 1; /* slots j < nval are offsets of the window */
                v3_group<P, LZ, RS, NDX, NG, NSPLIT, MASK, XH * NSEG == G::NT>(c, m, doff, nval, XZ,
                                                                               aw, av);
            }

    v3_store<NG, NSPLIT, LZ, RYB, TY>(out, &XZ[0][0][0][0], nx, ny, nzs, x0, y0, z0, c.bg, c.bh,
                                      c.lane, aw, av);
}

/* cp.async of one float and its group waits (the v6 and v8 copies). */
__device__ __forceinline__ void cp4(float *dst, const float *src)
{
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(d), "l"(src) : "memory");
}

__device__ __forceinline__ void cp_commit()
{
    asm volatile("cp.async.commit_group;" ::: "memory");
}

__device__ __forceinline__ void cp_wait_all()
{
    asm volatile("cp.async.wait_group 0;" ::: "memory");
}

/* ---- v6: v3 on a copy of the block's neighbourhood in shared memory -----
 *
 * v3 reads U through L1 with run-time strides, so every step forms 64-bit
 * addresses for its rows and phase B one per row (the integer share of
 * v3's SASS). v6 first copies everything the block reads for the
 * whole window (tile + R = S + P on each side, plus the NDX - 1 spare
 * columns of masked slots) to shared memory with cp.async, then runs v3's
 * group body on it with compile-time strides: each row of a step is an
 * immediate offset from one address. The copy has room for S <= SMAX;
 * larger windows run v3 (nlm.cu). Row stride XS is odd, so phase
 * A's four rows per warp fall on different banks. */
constexpr int k_v6_smax = 5; /* largest search radius of the v6 copy */

template <int P, int TY, int LZ, int NDX> struct nb6 {
    static constexpr int RM = k_v6_smax + P, TX = 32;
    static constexpr int XS = 2 * RM + TX + NDX - 1; /* columns x0 - RM .. */
    static constexpr int NYS = TY + 2 * RM, NZS = LZ + 2 * RM, PL = NYS * XS;
    static constexpr int FLOATS = NZS * PL;
    /* Shared-memory index of voxel (x0, y0, z0) of the tile. */
    static constexpr int ORIG = RM * PL + RM * XS + RM;
};

/* Dynamic shared memory of a v6 block: two XZ buffers and the copy. */
template <int P, int LZ, int RS, int NDX, int NG, int NSPLIT> constexpr int v6_smem_bytes()
{
    using G = geom3<P, NG, NSPLIT, RS>;
    return (int)sizeof(float) * (2 * NDX * G::XH * 36 + nb6<P, G::TY, LZ, NDX>::FLOATS);
}

/* Copies the neighbourhood of the tile whose voxel (x0, y0, z0) is at
 * `orig` in the padded slab: planes and rows -R .. LZ / TY + R - 1, columns
 * -R .. TX + R + NDX - 2 (the reads of every slot, masked ones included). */
template <typename N, int LZ, int TY, int NDX, int NT>
__device__ __forceinline__ void nb6_load(float *SU, const float *orig, ptrdiff_t pp, int PXp, int R)
{
    const int nrow = TY + 2 * R, nrows = nrow * (LZ + 2 * R), ncol = N::TX + 2 * R + NDX - 1;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    for (int r = warp; r < nrows; r += NT / 32) {
        const int k = r / nrow - R, j = r % nrow - R;
        const float *src = orig + (ptrdiff_t)k * pp + (ptrdiff_t)j * PXp - R;
        float *dst = SU + N::ORIG + k * N::PL + j * N::XS - R;
        for (int c = lane; c < ncol; c += 32)
            cp4(dst + c, src + c);
    }
    cp_commit();
    cp_wait_all();
    __syncthreads();
}

template <int P, int LZ, int RS, int NDX, int NG, int NSPLIT, bool TUNED, bool LAST3 = false,
          int LEAN = 0>
__global__ void __launch_bounds__(32 * NG * NSPLIT, 1)
    nlm3d_v6_kernel(const float *__restrict__ pad, float *__restrict__ out, int nx, int ny, int nzs,
                    int PXp, int PY, int S, float kh3, float ycut)
{
    using G = geom3<P, NG, NSPLIT, RS>;
    constexpr int TY = G::TY, XH = G::XH, RYB = G::RYB, XW = 36; /* XZ row stride */
    using N = nb6<P, TY, LZ, NDX>;
    static_assert(NDX % NSPLIT == 0 && NSPLIT <= 2, "offset split");
    static_assert(LZ % 2 == 0, "buffer parity must alternate across offset groups");
    static_assert(RS % 4 == 0 && G::TX % RS == 0 && G::TX == N::TX, "float4 stores");
    static_assert(2 * TY * 32 <= 2 * NDX * XH * XW, "reduction buffer");
    extern __shared__ __align__(16) float sm6[];
    float(*XZ)[NDX][XH][XW] = reinterpret_cast<float(*)[NDX][XH][XW]>(sm6);
    float *SU = sm6 + 2 * NDX * XH * XW;

    const int R = S + P;
    const ptrdiff_t pp = (ptrdiff_t)PY * PXp;
    const int x0 = blockIdx.x * G::TX, y0 = blockIdx.y * TY, z0 = blockIdx.z * LZ;
    /* XZ starts at 0: a 3-slot group (LAST3) leaves slot 3 unwritten, and
     * phase B's masked reads of it must see a distance >= 0. */
    for (int i = threadIdx.x; i < 2 * NDX * XH * XW; i += G::NT)
        sm6[i] = 0.0f;
    nb6_load<N, LZ, TY, NDX, G::NT>(
        SU, pad + (ptrdiff_t)(z0 + R) * pp + (ptrdiff_t)(y0 + R) * PXp + (x0 + R), pp, PXp, R);

    v3ctx c;
    c.kh3 = kh3;
    c.ycut = LEAN >= 2 ? uflow_koff(ycut) : ycut; /* UFLOW: the koff of accumulate_uf */
    v3_roles<G>(c);
    src_shared<N::PL, N::XS, TUNED, LEAN> m;
    m.arow = SU + N::ORIG + (c.ar - P) * N::XS + (c.aseg * RS - P);
    m.brow = SU + N::ORIG + (c.bg * RYB) * N::XS + c.lane;

    float aw[RYB][LZ], av[RYB][LZ];
    zero_acc(aw, av);

    for (int dz = -S; dz <= S; dz++)
        for (int dy = -S; dy <= S; dy++)
            for (int dx0 = -S; dx0 <= S; dx0 += NDX) {
                const int doff = dz * N::PL + dy * N::XS + dx0, nval = S - dx0 + 1;
                constexpr bool AF = XH * G::NSEG == G::NT;
                if (LAST3 && nval == NDX - 1) /* phase A of the valid slots only */
                    v3_group<P, LZ, RS, NDX, NG, NSPLIT, true, AF, NDX - 1>(c, m, doff, nval, XZ,
                                                                            aw, av);
                else
                    v3_group<P, LZ, RS, NDX, NG, NSPLIT, true, AF>(c, m, doff, nval, XZ, aw, av);
            }

    /* TUNED: the input was multiplied by sqrtf(kh3) (gpu__nlm3d_v3_prescale). */
    v3_store<NG, NSPLIT, LZ, RYB, TY>(out, sm6, nx, ny, nzs, x0, y0, z0, c.bg, c.bh, c.lane, aw, av,
                                      TUNED ? 1.0f / sqrtf(kh3) : 1.0f);
}

/* v8: v6's lean sweep (cfg 37) on a tile of 16 planes (cfg 38; now 12).
 * Two changes pay for the depth. Plane classes: phase B's two warp halves
 * take every other plane (bh = plane parity) with all slots of the group,
 * instead of half the slots of every plane, so each voxel's sums live in
 * one thread and the 112 accumulator registers hold 16 planes (v6: 8 planes
 * twice). Phase A computes two planes, then phase B both, between two
 * barriers. And the copy of the neighbourhood is made twice, for dz <= 0
 * and for dz > 0 (LZ + 2P + S planes instead of LZ + 2R), which leaves
 * room for it. The z halo of phase A falls from 12/8 to 20/16 planes, and
 * the last dx group of 3 slots runs 3 slots in phase B too (v6 masks a
 * fourth). S must be k_v6_smax: the dx groups are then 4, 4 and 3 slots and
 * every read stays in the copy. */
/* NBUF 2 (cfg 39, LZ 12): two XZ buffers of a plane pair, so phase A of
 * the next pair writes one while phase B reads the other, one barrier per
 * pair; the copy of 12 + 2P + S planes leaves room for the second buffer.
 * NCL 4 (cfg 40, LZ 12, NBUF 1; the one instantiated, see k_v3): four
 * plane classes of 14 rows, phase B after each batch of four planes. */
template <int P, int LZ, int NBUF, int NCL = 2> struct nb8 {
    using G = geom3<P, 8 / NCL, NCL, 4>; /* warps: 8 / NCL row groups x NCL plane classes */
    static constexpr int RM = k_v6_smax + P, TX = 32, TY = G::TY, XH = G::XH, XW = 32;
    static constexpr int XS = 2 * RM + TX + 1; /* odd: phase A's rows on different banks */
    static constexpr int NYS = TY + 2 * RM, NZS = LZ + 2 * P + k_v6_smax, PL = NYS * XS;
    static constexpr int FLOATS = NZS * PL;
    static constexpr int XZF = NBUF * NCL * 4 * XH * XW; /* z box sums: NCL planes, four slots */
    static constexpr int SMEM = (int)sizeof(float) * (XZF + FLOATS);
};

/* Copies planes klo .. klo + nk - 1 of the tile's neighbourhood (rows and
 * columns -R .. T + R - 1) to the copy, whose plane 0 is then plane klo. */
template <typename N, int NT>
__device__ __forceinline__ void nb8_load(float *SU, const float *orig, ptrdiff_t pp, int PXp, int R,
                                         int klo, int nk)
{
    const int nrow = N::TY + 2 * R, nrows = nrow * nk, ncol = N::TX + 2 * R;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    for (int r = warp; r < nrows; r += NT / 32) {
        const int k = r / nrow + klo, j = r % nrow - R;
        const float *src = orig + (ptrdiff_t)k * pp + (ptrdiff_t)j * PXp - R;
        float *dst = SU + (k - klo) * N::PL + (j + N::RM) * N::XS + N::RM - R;
        for (int c = lane; c < ncol; c += 32)
            cp4(dst + c, src + c);
    }
    cp_commit();
    cp_wait_all();
    __syncthreads();
}

/* One offset group of NB slots on a v8 tile: phase A plane by plane, phase
 * B (thread: RYB rows of its column, plane parity bh, every slot) after
 * each pair of planes. */
template <int P, int NB, bool AFULL, int NBUF, int NCL, typename XZT, int RYB, int LH, typename Src>
__device__ __forceinline__ void v8_group(const v3ctx &c, const Src &m, ptrdiff_t doff, XZT &XZ,
                                         float (&aw)[RYB][LH], float (&av)[RYB][LH])
{
    constexpr int RS = 4, XW = sizeof(XZ[0][0][0]) / sizeof(float);
    static_assert(Src::prescaled && Src::lean && Src::uflow, "v8 runs cfg 37's lean sweep");
    static_assert(LH % NBUF == 0, "pair buffers must alternate across groups");
    zrun<P> zr[NB][RS];
#pragma unroll
    for (int s = 0; s < NCL * LH + 2 * P; s++) {
        const int zs = s < 2 * P ? 0 : s - 2 * P; /* the plane stored (none before 2P) */
        if (AFULL || c.aact)
            phase_a_step<P, RS, NB, true>(c, m, doff, s, NB, zr,
                                          XZ[(zs / NCL % NBUF) * NCL + zs % NCL]);
        if (s < 2 * P || (s - 2 * P) % NCL != NCL - 1)
            continue; /* phase B once all NCL planes of a batch are in XZ */
        const int kp = (s - 2 * P) / NCL;
        __syncthreads();
#pragma unroll
        for (int j = 0; j < NB; j++)
            accumulate_uf<RYB, P, LH, Src>(&XZ[(kp % NBUF) * NCL + c.bh][j][c.bg * RYB][c.lane], XW,
                                           m.brow + (ptrdiff_t)(NCL * kp) * m.plane() + doff + j, m,
                                           c.ycut, kp, aw, av);
        if (NBUF == 1)
            __syncthreads(); /* the next pair's phase A rewrites XZ */
    }
}

template <int P, int LZ, int NBUF, int NCL>
__global__ void __launch_bounds__(256, 1)
    nlm3d_v8_kernel(const float *__restrict__ pad, float *__restrict__ out, int nx, int ny, int nzs,
                    int PXp, int PY, int S, float kh3, float ycut)
{
    using N = nb8<P, LZ, NBUF, NCL>;
    using G = typename N::G;
    constexpr int LH = LZ / NCL, RYB = G::RYB;
    static_assert(LH * NCL == LZ, "whole plane batches");
    constexpr bool AF = G::XH * G::NSEG == G::NT;
    extern __shared__ __align__(16) float sm8[];
    float(*XZ)[4][G::XH][N::XW] = reinterpret_cast<float(*)[4][G::XH][N::XW]>(sm8);
    float *SU = sm8 + N::XZF;

    const int R = S + P;
    const ptrdiff_t pp = (ptrdiff_t)PY * PXp;
    const int x0 = blockIdx.x * G::TX, y0 = blockIdx.y * G::TY, z0 = blockIdx.z * LZ;
    const float *orig = pad + (ptrdiff_t)(z0 + R) * pp + (ptrdiff_t)(y0 + R) * PXp + (x0 + R);
    v3ctx c;
    c.kh3 = kh3;
    c.ycut = uflow_koff(ycut);
    v3_roles<G>(c);
    float aw[RYB][LH], av[RYB][LH];
    zero_acc(aw, av);

    for (int h = 0; h < 2; h++) { /* dz <= 0, then dz > 0 */
        const int klo = h ? -P : -P - S;
        if (NBUF > 1 && h)
            __syncthreads(); /* the last phase B read the copy after the last barrier */
        nb8_load<N, G::NT>(SU, orig, pp, PXp, R, klo, LZ + 2 * P + S);
        const float *o = SU - klo * N::PL + N::RM * N::XS + N::RM; /* voxel (x0, y0, z0) */
        src_shared<N::PL, N::XS, true, 3> m;
        m.arow = o + (c.ar - P) * N::XS + (c.aseg * 4 - P);
        m.brow = o + c.bh * N::PL + (c.bg * RYB) * N::XS + c.lane;
        for (int dz = h ? 1 : -S; dz <= (h ? S : 0); dz++)
            for (int dy = -S; dy <= S; dy++)
                for (int dx0 = -S; dx0 <= S; dx0 += 4) {
                    const int doff = dz * N::PL + dy * N::XS + dx0;
                    if (S - dx0 + 1 >= 4)
                        v8_group<P, 4, AF, NBUF, NCL>(c, m, doff, XZ, aw, av);
                    else
                        v8_group<P, 3, AF, NBUF, NCL>(c, m, doff, XZ, aw, av);
                }
        /* NBUF 1: the last group's final barrier ends the reads of this copy. */
    }

    const int x = x0 + c.lane;
    const float oscale = 1.0f / sqrtf(kh3); /* the input was prescaled by sqrtf(kh3) */
#pragma unroll
    for (int i = 0; i < RYB; i++)
#pragma unroll
        for (int k = 0; k < LH; k++) {
            const int y = y0 + c.bg * RYB + i, zz = z0 + NCL * k + c.bh;
            if (x < nx && y < ny && zz < nzs)
                out[((size_t)zz * ny + y) * nx + x] = oscale * (av[i][k] / aw[i][k]);
        }
}

/* Geometry of each variant (GPU__NLM3D_V3, _V6, _V8): LZ planes per block,
 * RS columns per phase-A segment, NG row groups x NSPLIT offset shares of
 * warps. Their former numbers (LDCT_NLM3D_CFG 27, 37 and 40; variants 12,
 * 22 and 25 of the table this replaced) name them in docs/NOTES-gpu.md. */
struct v3cfg {
    int lz, rs, ng, nsplit;
};
const v3cfg k_v3[GPU__NLM3D_V3_N] = {
    {6, 4, 4, 2},  /* v3: slots past S masked (no slot branches), any S */
    {8, 4, 4, 2},  /* v6: v3 on the neighbourhood copy, prescaled, lean z, tree boxes; S <= 5 */
    {12, 4, 2, 4}, /* v8: v6 on 12 planes, 4 plane classes of 14 rows; S = 5 */
};

template <int P, int LZ, int RS, int NDX, int NG, int NSPLIT, int MINB, bool MASK = false>
cudaError_t launch_v(const float *pad, float *out, int nx, int ny, int nzs, int PXp, int PY, int S,
                     float kh3, float ycut, cudaStream_t st)
{
    using G = geom3<P, NG, NSPLIT, RS>;
    dim3 block(G::NT),
        grid((nx + G::TX - 1) / G::TX, (ny + G::TY - 1) / G::TY, (nzs + LZ - 1) / LZ);
    nlm3d_v3_kernel<P, LZ, RS, NDX, NG, NSPLIT, MINB, MASK>
        <<<grid, block, 0, st>>>(pad, out, nx, ny, nzs, PXp, PY, S, kh3, ycut);
    return cudaGetLastError();
}

template <int P, int LZ, int RS, int NDX, int NG, int NSPLIT, bool TUNED, bool LAST3 = false,
          int LEAN = 0>
cudaError_t launch_v6(const float *pad, float *out, int nx, int ny, int nzs, int PXp, int PY, int S,
                      float kh3, float ycut, cudaStream_t st)
{
    using G = geom3<P, NG, NSPLIT, RS>;
    constexpr int smem = v6_smem_bytes<P, LZ, RS, NDX, NG, NSPLIT>();
    auto kern = nlm3d_v6_kernel<P, LZ, RS, NDX, NG, NSPLIT, TUNED, LAST3, LEAN>;
    cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != cudaSuccess)
        return e;
    dim3 block(G::NT),
        grid((nx + G::TX - 1) / G::TX, (ny + G::TY - 1) / G::TY, (nzs + LZ - 1) / LZ);
    kern<<<grid, block, smem, st>>>(pad, out, nx, ny, nzs, PXp, PY, S, kh3, ycut);
    return cudaGetLastError();
}

template <int P, int LZ, int NBUF, int NCL = 2>
cudaError_t launch_v8(const float *pad, float *out, int nx, int ny, int nzs, int PXp, int PY, int S,
                      float kh3, float ycut, cudaStream_t st)
{
    using N = nb8<P, LZ, NBUF, NCL>;
    auto kern = nlm3d_v8_kernel<P, LZ, NBUF, NCL>;
    cudaError_t e =
        cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, N::SMEM);
    if (e != cudaSuccess)
        return e;
    dim3 block(N::G::NT),
        grid((nx + N::TX - 1) / N::TX, (ny + N::TY - 1) / N::TY, (nzs + LZ - 1) / LZ);
    kern<<<grid, block, N::SMEM, st>>>(pad, out, nx, ny, nzs, PXp, PY, S, kh3, ycut);
    return cudaGetLastError();
}

/* The template arguments below spell k_v3's rows (and NDX 4, one block per
 * SM for v3; v6 tuned with the 3-slot last dx group and the lean sweep). */
template <int P>
cudaError_t launch_p(int v, const float *pad, float *out, int nx, int ny, int nzs, int PXp, int PY,
                     int S, float kh3, float ycut, cudaStream_t st)
{
    switch (v) {
    case GPU__NLM3D_V8:
        return launch_v8<P, 12, 1, 4>(pad, out, nx, ny, nzs, PXp, PY, S, kh3, ycut, st);
    case GPU__NLM3D_V6:
        return launch_v6<P, 8, 4, 4, 4, 2, true, true, 3>(pad, out, nx, ny, nzs, PXp, PY, S, kh3,
                                                          ycut, st);
    default:
        return launch_v<P, 6, 4, 4, 4, 2, 1, true>(pad, out, nx, ny, nzs, PXp, PY, S, kh3, ycut,
                                                   st);
    }
}

/* Shared memory the v6 variant needs for patch radius P. */
int v6_smem_needed(int P)
{
    return P == 0   ? v6_smem_bytes<0, 8, 4, 4, 4, 2>()
           : P == 1 ? v6_smem_bytes<1, 8, 4, 4, 4, 2>()
                    : v6_smem_bytes<2, 8, 4, 4, 4, 2>();
}

/* Nonzero when the current device gives a block `bytes` of shared memory. */
int smem_fits(int bytes)
{
    int dev = 0, optin = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess)
        return (void)cudaGetLastError(), 0;
    return bytes <= optin;
}

} // namespace

int gpu__nlm3d_v3_supported(int v, int P, int S, int gaussian)
{
    if (v < 0 || v >= GPU__NLM3D_V3_N || P < 0 || P > 2 || gaussian)
        return 0;
    /* v8: exactly the window its dx groups and copy are laid out for. */
    if (v == GPU__NLM3D_V8)
        return S == k_v6_smax && smem_fits(P == 0   ? nb8<0, 12, 1, 4>::SMEM
                                           : P == 1 ? nb8<1, 12, 1, 4>::SMEM
                                                    : nb8<2, 12, 1, 4>::SMEM);
    /* v6: the window must fit the copy and the copy the device. */
    if (v == GPU__NLM3D_V6)
        return S <= k_v6_smax && smem_fits(v6_smem_needed(P));
    return 1;
}

float gpu__nlm3d_v3_prescale(int v, float kh3)
{
    return v == GPU__NLM3D_V3 ? 1.0f : sqrtf(kh3);
}

void gpu__nlm3d_v3_tile(int v, int P, int *tx, int *ty, int *lz)
{
    const v3cfg &c = k_v3[v];
    const int nt = 32 * c.ng * c.nsplit;
    const int xhmax = nt / (32 / c.rs);
    *tx = 32;
    *ty = c.ng * ((xhmax - 2 * P) / c.ng); /* geom3<>::TY */
    *lz = c.lz;
}

cudaError_t gpu__nlm3d_v3_launch(int v, int P, const float *pad, float *out, int nx, int ny,
                                 int nzs, int PXp, int PY, int S, float kh3, float ycut,
                                 cudaStream_t st)
{
    switch (P) {
    case 0:
        return launch_p<0>(v, pad, out, nx, ny, nzs, PXp, PY, S, kh3, ycut, st);
    case 1:
        return launch_p<1>(v, pad, out, nx, ny, nzs, PXp, PY, S, kh3, ycut, st);
    default:
        return launch_p<2>(v, pad, out, nx, ny, nzs, PXp, PY, S, kh3, ycut, st);
    }
}
