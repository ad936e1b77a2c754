/* Unit tests of gpu/nlm: the CPU reference against a naive direct NLM
 * (every patch compared explicitly, in double), the noise estimator on
 * synthetic Gaussian noise, and the CUDA versions against the reference
 * (fresh random inputs of odd sizes, poisoned outputs, tiny memory budget
 * forcing slabs). CUDA tests print "SKIP: no GPU" and pass without a GPU.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "gpu/device.h"
#include "gpu/nlm.h"
#include "gpu/volume.h"
#if LDCT_WITH_CUDA
#include "gpu/cuda_util.h"
#endif
#define GT_SEED 0x9E3779B97F4A7C15ull
#include "tests/unit/gputest.h"

/* ---- helpers ------------------------------------------------------------ */

/* Structure (a ramp, a bright sphere-ish blob, a step) plus noise sigma. */
static void fill_phantom(gpu_volume *v, double sigma)
{
    for (int t = 0; t < v->nt; t++)
        for (int z = 0; z < v->nz; z++)
            for (int y = 0; y < v->ny; y++)
                for (int x = 0; x < v->nx; x++) {
                    double cx = x - v->nx / 2.0, cy = y - v->ny / 2.0, cz = z - v->nz / 2.0;
                    double s = 40.0 + 0.5 * x - 0.3 * y + 0.2 * z;
                    if (cx * cx + cy * cy + cz * cz < (v->nx * v->nx) / 9.0)
                        s += 100.0;
                    if (x > v->nx * 2 / 3)
                        s -= 60.0;
                    size_t i = (((size_t)t * v->nz + z) * v->ny + y) * v->nx + x;
                    v->data[i] = (float)(s + sigma * grand());
                }
}

/* Search and patch radii S and P with the fixed h of the phantom tests. */
static gpu_nlm_params fixed_h_params(int S, int P)
{
    gpu_nlm_params p;
    gpu_nlm_params_default(&p);
    p.search_radius = S;
    p.patch_radius = P;
    p.h_auto = 0;
    p.h = 14.0f;
    return p;
}

static double rel_l2(const gpu_volume *a, const double *ref, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = a->data[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    return sqrt(num / den);
}

static double rel_l2_vol(const gpu_volume *a, const gpu_volume *b, double *maxabs, int *nans)
{
    double num = 0, den = 0, m = 0;
    int bad = 0;
    size_t n = gpu_volume_count(a);
    for (size_t i = 0; i < n; i++) {
        if (isnan(a->data[i]) || isnan(b->data[i]))
            bad++;
        double d = (double)a->data[i] - b->data[i];
        num += d * d;
        den += (double)b->data[i] * b->data[i];
        if (fabs(d) > m)
            m = fabs(d);
    }
    if (maxabs)
        *maxabs = m;
    if (nans)
        *nans = bad;
    return sqrt(num / den);
}

/* Asserts that a and b agree bit for bit, without NaN (what: the case). */
static void assert_identical(const gpu_volume *a, const gpu_volume *b, const char *what)
{
    double maxabs = 0;
    int nans = 0;
    rel_l2_vol(a, b, &maxabs, &nans);
    ck_assert_msg(nans == 0, "%s: %d NaN", what, nans);
    ck_assert_msg(maxabs == 0.0, "%s: max abs diff %.3g", what, maxabs);
}

/* Naive NLM straight from the definition in nlm.h, in double. */
static void naive_nlm(const gpu_nlm_params *p, float h, const gpu_volume *in, double *out, int dim)
{
    int S = p->search_radius, P = p->patch_radius;
    int Sz = dim == 3 ? S : 0, Pz = dim == 3 ? P : 0;
    float g[3][2 * GPU_NLM_MAX_PATCH + 1];
    gpu__nlm_patch_weights(P, p->gaussian, g[0]);
    gpu__nlm_patch_weights(P, p->gaussian, g[1]);
    gpu__nlm_patch_weights(Pz, p->gaussian, g[2]);
    int nx = in->nx, ny = in->ny, nz = in->nz;
    for (int t = 0; t < in->nt; t++)
        for (int z = 0; z < nz; z++) {
            /* 2D: each slice is its own image. */
            const float *base =
                in->data + (size_t)t * nx * ny * nz + (dim == 2 ? (size_t)z * nx * ny : 0);
            int znz = dim == 3 ? nz : 1, zz = dim == 3 ? z : 0;
#define U(X, Y, Z)                                                                                 \
    (double)base[((size_t)gpu__mirror((Z), znz) * ny + gpu__mirror((Y), ny)) * nx +                \
                 gpu__mirror((X), nx)]
            for (int y = 0; y < ny; y++)
                for (int x = 0; x < nx; x++) {
                    double sw = 0, sv = 0;
                    for (int dz = -Sz; dz <= Sz; dz++)
                        for (int dy = -S; dy <= S; dy++)
                            for (int dx = -S; dx <= S; dx++) {
                                double D = 0;
                                for (int kz = -Pz; kz <= Pz; kz++)
                                    for (int ky = -P; ky <= P; ky++)
                                        for (int kx = -P; kx <= P; kx++) {
                                            double a = U(x + kx, y + ky, zz + kz);
                                            double b = U(x + dx + kx, y + dy + ky, zz + dz + kz);
                                            D += (double)g[0][kx + P] * g[1][ky + P] *
                                                 g[2][kz + Pz] * (a - b) * (a - b);
                                        }
                                double e = D / ((double)h * h);
                                double w = p->cutoff > 0 && e > p->cutoff ? 0.0 : exp(-e);
                                sw += w;
                                sv += w * U(x + dx, y + dy, zz + dz);
                            }
                    out[(((size_t)t * nz + z) * ny + y) * nx + x] = sv / sw;
                }
#undef U
        }
}

static void check_ref_vs_naive_cut(int dim, int nx, int ny, int nz, int nt, int S, int P,
                                   int gaussian, float cutoff)
{
    gpu_volume in, out;
    ck_assert_int_eq(gpu_volume_init(&in, nx, ny, nz, nt), 0);
    ck_assert_int_eq(gpu_volume_init(&out, nx, ny, nz, nt), 0);
    fill_phantom(&in, 10.0);
    poison(&out);
    gpu_nlm_params p = fixed_h_params(S, P);
    p.gaussian = gaussian;
    p.cutoff = cutoff;
    gpu_device cpu;
    ck_assert_int_eq(gpu_device_parse("cpu", &cpu), 0);
    int rc = dim == 3 ? gpu_nlm3d_ref(&p, &in, &out, &cpu) : gpu_nlm2d_ref(&p, &in, &out, &cpu);
    ck_assert_int_eq(rc, 0);
    size_t n = gpu_volume_count(&in);
    double *ref = malloc(n * sizeof *ref);
    ck_assert_ptr_nonnull(ref);
    naive_nlm(&p, p.h, &in, ref, dim);
    double e = rel_l2(&out, ref, n);
    printf("ref nlm%dd %dx%dx%dx%d S=%d P=%d g=%d c=%g: rel L2 vs naive %.3g\n", dim, nx, ny, nz,
           nt, S, P, gaussian, (double)cutoff, e);
    /* Tolerance 1e-5: float32 sums and a polynomial exp against double. */
    ck_assert_msg(e <= 1e-5, "dim %d %dx%dx%dx%d S=%d P=%d g=%d: rel L2 %.3g", dim, nx, ny, nz, nt,
                  S, P, gaussian, e);
    free(ref);
    gpu_volume_close(&in);
    gpu_volume_close(&out);
}

/* Without the cutoff (c = 0: every weight kept). */
static void check_ref_vs_naive(int dim, int nx, int ny, int nz, int nt, int S, int P, int gaussian)
{
    check_ref_vs_naive_cut(dim, nx, ny, nz, nt, S, P, gaussian, 0.0f);
}

/* ---- CPU reference ------------------------------------------------------- */

START_TEST(ref2d_matches_naive_for_several_radii_and_odd_sizes)
{
    check_ref_vs_naive(2, 17, 13, 3, 1, 1, 0, 0);
    check_ref_vs_naive(2, 19, 15, 2, 1, 3, 1, 0);
    check_ref_vs_naive(2, 23, 21, 2, 1, 5, 2, 1);
    check_ref_vs_naive(2, 9, 7, 1, 2, 4, 3, 0); /* window larger than the image: repeated mirror */
}
END_TEST

START_TEST(ref3d_matches_naive_for_several_radii_and_odd_sizes)
{
    check_ref_vs_naive(3, 11, 9, 7, 1, 1, 1, 0);
    check_ref_vs_naive(3, 13, 11, 9, 1, 2, 1, 1);
    check_ref_vs_naive(3, 9, 7, 11, 1, 2, 2, 0);
    check_ref_vs_naive(3, 5, 6, 3, 2, 3, 1, 0); /* tiny: repeated mirror, two frames */
}
END_TEST

/* The distance cutoff: the reference against the naive definition with c
 * = 4 (the default) and c = 1.5 (h = 14 on noise of sigma 10 puts similar
 * patches near D / h^2 = 1, so many pairs are cut), and the cut changes the
 * result. */
START_TEST(ref_cutoff_matches_naive_and_changes_the_result)
{
    check_ref_vs_naive_cut(2, 19, 15, 2, 1, 3, 1, 0, 1.5f);
    check_ref_vs_naive_cut(2, 23, 21, 2, 1, 5, 2, 1, 4.0f);
    check_ref_vs_naive_cut(3, 13, 11, 9, 1, 2, 1, 1, 1.5f);
    check_ref_vs_naive_cut(3, 9, 7, 11, 1, 2, 2, 0, 4.0f);
    check_ref_vs_naive_cut(3, 11, 9, 7, 1, 1, 1, 0, 1.5f);
    gpu_volume in, a, b;
    ck_assert_int_eq(gpu_volume_init(&in, 17, 15, 11, 1), 0);
    ck_assert_int_eq(gpu_volume_init(&a, 17, 15, 11, 1), 0);
    ck_assert_int_eq(gpu_volume_init(&b, 17, 15, 11, 1), 0);
    fill_phantom(&in, 10.0);
    gpu_nlm_params p = fixed_h_params(2, 1);
    p.cutoff = 0;
    ck_assert_int_eq(gpu_nlm3d_ref(&p, &in, &a, NULL), 0);
    p.cutoff = 1.5f;
    ck_assert_int_eq(gpu_nlm3d_ref(&p, &in, &b, NULL), 0);
    double e = rel_l2_vol(&b, &a, NULL, NULL);
    printf("ref nlm3d cutoff 1.5 vs none: rel L2 %.3g\n", e);
    ck_assert_msg(e > 1e-3, "the cutoff changed nothing (rel L2 %.3g)", e);
    gpu_volume_close(&in);
    gpu_volume_close(&a);
    gpu_volume_close(&b);
}
END_TEST

/* The widest instruction set this CPU has for the reference: 2 AVX-512
 * (F, VL, BW, DQ with FMA), 1 AVX2 with FMA, 0 neither. */
static int cpu_isa_level(void)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("fma"))
        return 2;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return 1;
#endif
    return 0;
}

/* Every instruction set the reference is compiled for (AVX-512, AVX2,
 * plain), capped with LDCT_NLM_REF_ISA: the one the CPU has under the cap
 * runs; each matches the naive definition; AVX-512 and AVX2 give the same
 * bits, plain (unfused products) differs at rounding only. */
START_TEST(ref_instruction_sets_match_naive_and_each_other)
{
    const char *names[] = {"plain", "avx2", "avx512"};
    const int have = cpu_isa_level();
    const char *isa[] = {"avx512", "avx2", "plain"};
    gpu_volume in, out[3];
    ck_assert_int_eq(gpu_volume_init(&in, 23, 19, 9, 1), 0);
    fill_phantom(&in, 10.0);
    gpu_nlm_params p = fixed_h_params(3, 2);
    for (int dim = 2; dim <= 3; dim++) {
        for (int i = 0; i < 3; i++) {
            ck_assert_int_eq(setenv("LDCT_NLM_REF_ISA", isa[i], 1), 0);
            const char *ran = gpu__nlm_ref_isa();
            const int want = 2 - i < have ? 2 - i : have; /* the cap, or what the CPU has */
            ck_assert_str_eq(ran, names[want]);
            ck_assert_int_eq(gpu_volume_init(&out[i], 23, 19, 9, 1), 0);
            poison(&out[i]);
            ck_assert_int_eq(dim == 3 ? gpu_nlm3d_ref(&p, &in, &out[i], NULL)
                                      : gpu_nlm2d_ref(&p, &in, &out[i], NULL),
                             0);
            double e = i ? rel_l2_vol(&out[i], &out[0], NULL, NULL) : 0.0;
            printf("ref nlm%dd with %s (asked %s): rel L2 vs %s %.3g\n", dim, ran, isa[i], isa[0],
                   e);
            if (want > 0 && have > 0)
                ck_assert_msg(e == 0.0, "%s vs %s: rel L2 %.3g", ran, isa[0], e);
            ck_assert_msg(e <= 1e-6, "%s vs %s: rel L2 %.3g", ran, isa[0], e);
        }
        ck_assert_int_eq(setenv("LDCT_NLM_REF_ISA", "AVX2", 1), 0); /* unknown: no ceiling */
        ck_assert_str_eq(gpu__nlm_ref_isa(), names[have]);
        unsetenv("LDCT_NLM_REF_ISA");
        size_t n = gpu_volume_count(&in);
        double *ref = malloc(n * sizeof *ref);
        ck_assert_ptr_nonnull(ref);
        naive_nlm(&p, p.h, &in, ref, dim);
        for (int i = 0; i < 3; i++) {
            double e = rel_l2(&out[i], ref, n);
            ck_assert_msg(e <= 1e-5, "%s vs naive: rel L2 %.3g", isa[i], e);
            gpu_volume_close(&out[i]);
        }
        free(ref);
    }
    gpu_volume_close(&in);
}
END_TEST

/* With h from the noise, below strength 0.8 the cutoff grows as (0.8 /
 * s)^2, so it stays the same multiple of the expected distance of similar
 * patches (1 / s^2 in units of h^2); at 0.8 and above it is as given. */
START_TEST(effective_cutoff_keeps_a_margin_at_low_strength)
{
    gpu_nlm_params p;
    gpu_nlm_params_default(&p);
    ck_assert_float_eq_tol(gpu_nlm_effective_cutoff(&p), 4.0f, 1e-6f);
    p.strength = 0.8f;
    ck_assert_float_eq_tol(gpu_nlm_effective_cutoff(&p), 4.0f, 1e-6f);
    p.strength = 0.5f;
    ck_assert_float_eq_tol(gpu_nlm_effective_cutoff(&p), 10.24f, 1e-5f);
    p.cutoff = 0.5f; /* a small cutoff of the user's stays as given at strength 1 */
    p.strength = 1;
    ck_assert_float_eq_tol(gpu_nlm_effective_cutoff(&p), 0.5f, 1e-6f);
    p.cutoff = 4;
    p.strength = 0.1f;
    ck_assert_float_eq_tol(gpu_nlm_effective_cutoff(&p), (float)GPU_NLM_MAX_CUTOFF, 1e-5f);
    p.cutoff = 0; /* off stays off */
    ck_assert_float_eq(gpu_nlm_effective_cutoff(&p), 0.0f);
    p.cutoff = 4;
    p.h_auto = 0; /* an explicit h has no strength: the cutoff as given */
    p.h = 10;
    ck_assert_float_eq_tol(gpu_nlm_effective_cutoff(&p), 4.0f, 1e-6f);
    /* And the reference applies it: at strength 0.5 the result equals the
     * one with h and the cutoff made explicit by gpu_nlm_fix_h. */
    gpu_volume in, a, b;
    ck_assert_int_eq(gpu_volume_init(&in, 17, 15, 9, 1), 0);
    ck_assert_int_eq(gpu_volume_init(&a, 17, 15, 9, 1), 0);
    ck_assert_int_eq(gpu_volume_init(&b, 17, 15, 9, 1), 0);
    fill_phantom(&in, 10.0);
    gpu_nlm_params q;
    gpu_nlm_params_default(&q);
    q.search_radius = 2;
    q.patch_radius = 1;
    q.strength = 0.5f;
    ck_assert_int_eq(gpu_nlm3d_ref(&q, &in, &a, NULL), 0);
    gpu_nlm_params k = q; /* the same from a noise estimated beforehand */
    double sigma = 0;
    ck_assert_int_eq(gpu_noise_sigma(&in, &sigma), 0);
    ck_assert_int_eq(gpu_nlm_fix_h(&q, &in), 0); /* explicit h, cutoff 10.24 */
    ck_assert(!q.h_auto && q.h > 0);
    ck_assert_float_eq_tol(q.cutoff, 10.24f, 1e-5f);
    gpu_nlm_fix_h_sigma(&k, sigma);
    ck_assert(!k.h_auto);
    ck_assert_float_eq(k.h, q.h);
    ck_assert_float_eq(k.cutoff, q.cutoff);
    gpu_nlm_fix_h_sigma(&k, 2 * sigma); /* h explicit now: the noise no longer counts */
    ck_assert_float_eq(k.h, q.h);
    ck_assert_float_eq(k.cutoff, q.cutoff);
    ck_assert_int_eq(gpu_nlm3d_ref(&q, &in, &b, NULL), 0);
    ck_assert_float_eq(rel_l2_vol(&a, &b, NULL, NULL), 0.0);
    q.cutoff = 4; /* the plain cutoff at that h differs */
    ck_assert_int_eq(gpu_nlm3d_ref(&q, &in, &b, NULL), 0);
    ck_assert_double_gt(rel_l2_vol(&a, &b, NULL, NULL), 1e-4);
    gpu_volume_close(&in);
    gpu_volume_close(&a);
    gpu_volume_close(&b);
}
END_TEST

START_TEST(ref3d_same_result_with_any_thread_count)
{
    gpu_volume in, a, b;
    ck_assert_int_eq(gpu_volume_init(&in, 21, 19, 37, 1), 0);
    ck_assert_int_eq(gpu_volume_init(&a, 21, 19, 37, 1), 0);
    ck_assert_int_eq(gpu_volume_init(&b, 21, 19, 37, 1), 0);
    fill_phantom(&in, 10.0);
    gpu_nlm_params p;
    gpu_nlm_params_default(&p);
    p.search_radius = 2;
    p.patch_radius = 1;
    gpu_device d1, d3;
    gpu_device_parse("cpu", &d1);
    gpu_device_parse("cpu", &d3);
    d1.threads = 1;
    d3.threads = 5; /* different chunks of planes */
    ck_assert_int_eq(gpu_nlm3d_ref(&p, &in, &a, &d1), 0);
    ck_assert_int_eq(gpu_nlm3d_ref(&p, &in, &b, &d3), 0);
    double e = rel_l2_vol(&a, &b, NULL, NULL);
    ck_assert_msg(e <= 1e-6, "rel L2 %.3g", e); /* only summation order differs */
    gpu_volume_close(&in);
    gpu_volume_close(&a);
    gpu_volume_close(&b);
}
END_TEST

START_TEST(nlm_rejects_bad_parameters)
{
    gpu_volume in, out;
    ck_assert_int_eq(gpu_volume_init(&in, 8, 8, 4, 1), 0);
    ck_assert_int_eq(gpu_volume_init(&out, 8, 8, 3, 1), 0);
    fill_phantom(&in, 1.0);
    gpu_nlm_params p;
    gpu_nlm_params_default(&p);
    ck_assert_int_eq(gpu_nlm3d_ref(&p, &in, &out, NULL), LDCT_EINPUT); /* shape */
    ck_assert_int_eq(gpu_nlm3d_ref(&p, &in, &in, NULL), LDCT_EINPUT);  /* aliasing */
    gpu_volume_close(&out);
    ck_assert_int_eq(gpu_volume_init(&out, 8, 8, 4, 1), 0);
    p.search_radius = 16;
    ck_assert_int_eq(gpu_nlm2d_ref(&p, &in, &out, NULL), LDCT_EINPUT);
    p.search_radius = 3;
    p.patch_radius = 6;
    ck_assert_int_eq(gpu_nlm2d_ref(&p, &in, &out, NULL), LDCT_EINPUT);
    p.patch_radius = 1;
    p.h_auto = 0;
    p.h = 0;
    ck_assert_int_eq(gpu_nlm2d_ref(&p, &in, &out, NULL), LDCT_EINPUT);
    p.h = 10;
    const float cuts[] = {-1.0f, NAN, GPU_NLM_MAX_CUTOFF + 1.0f};
    for (int i = 0; i < 3; i++) {
        p.cutoff = cuts[i];
        ck_assert_int_eq(gpu_nlm2d_ref(&p, &in, &out, NULL), LDCT_EINPUT);
        ck_assert_int_eq(gpu_nlm3d(&p, &in, &out, NULL), LDCT_EINPUT);
    }
    gpu_volume_close(&in);
    gpu_volume_close(&out);
}
END_TEST

/* ---- noise estimate ------------------------------------------------------ */

START_TEST(noise_sigma_within_5_percent_on_gaussian_noise)
{
    const double sigmas[] = {3.0, 15.0, 40.0};
    for (int i = 0; i < 3; i++) {
        gpu_volume v;
        ck_assert_int_eq(gpu_volume_init(&v, 129, 127, 9, 1), 0);
        fill_phantom(&v, sigmas[i]);
        double s = 0;
        ck_assert_int_eq(gpu_noise_sigma(&v, &s), 0);
        ck_assert_msg(fabs(s / sigmas[i] - 1.0) <= 0.05, "sigma %.2f estimated %.3f", sigmas[i], s);
        gpu_volume_close(&v);
    }
}
END_TEST

/* Padding outside the reconstruction circle (one value, as scanners write
 * -2000 or -3024 there) carries no noise and must not lower the estimate;
 * an image that is mostly one value still estimates 0. */
static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* gpu_noise_sigma's definition in one plain pass (the library splits the
 * samples into parts run in parallel): the samples on the regular stride,
 * the first 4 values that fill a whole 3x3 neighbourhood, the median
 * |Immerkaer response| of the samples that touch none of them. */
static double noise_sigma_one_pass(const gpu_volume *v)
{
    const int nx = v->nx, ny = v->ny;
    const size_t per = (size_t)(nx - 2) * (ny - 2), total = per * v->nz * v->nt;
    const size_t stride = total > 4000000 ? total / 4000000 + 1 : 1;
    float flat[4], *r = malloc(total * sizeof *r);
    int nflat = 0;
    size_t nsamp = 0, nfl = 0, m = 0;
    ck_assert_ptr_nonnull(r);
    for (int pass = 0; pass < 2; pass++)
        for (size_t idx = 0; idx < total; idx += stride) {
            size_t s = idx / per, rem = idx % per;
            const float *a = v->data + s * nx * ny + (1 + rem / (nx - 2)) * nx + 1 + rem % (nx - 2);
            int same = 1, touch = 0;
            for (int dy = -1; dy <= 1; dy++)
                for (int dx = -1; dx <= 1; dx++) {
                    float x = a[dy * nx + dx];
                    same &= x == a[0];
                    for (int i = 0; i < nflat; i++)
                        touch |= x == flat[i];
                }
            if (pass == 0) {
                nsamp++;
                int known = 0;
                for (int i = 0; i < nflat; i++)
                    known |= flat[i] == a[0];
                nfl += same;
                if (same && !known && nflat < 4)
                    flat[nflat++] = a[0];
            } else if (!touch) {
                r[m++] = fabsf(a[-nx - 1] - 2 * a[-nx] + a[-nx + 1] - 2 * a[-1] + 4 * a[0] -
                               2 * a[1] + a[nx - 1] - 2 * a[nx] + a[nx + 1]);
            }
            if (pass == 0 && idx + stride >= total && nfl * 10 > nsamp * 6) {
                free(r);
                return 0.0;
            }
        }
    qsort(r, m, sizeof *r, cmp_float);
    double sigma = m ? 1.482602218505602 * r[m / 2] / 6.0 : 0.0;
    free(r);
    return sigma;
}

START_TEST(noise_sigma_ignores_padding_outside_the_field_of_view)
{
    gpu_volume v;
    ck_assert_int_eq(gpu_volume_init(&v, 129, 127, 9, 1), 0);
    fill_phantom(&v, 20.0);
    size_t padded = 0;
    for (int z = 0; z < 9; z++)
        for (int y = 0; y < 127; y++)
            for (int x = 0; x < 129; x++) {
                double dx = x - 64, dy = y - 63;
                if (dx * dx + dy * dy > 58.0 * 58.0) {
                    v.data[((size_t)z * 127 + y) * 129 + x] = -2000.0f;
                    padded++;
                }
            }
    ck_assert(padded * 10 > (size_t)129 * 127 * 9 * 2); /* over 20% padding */
    double s = 0;
    ck_assert_int_eq(gpu_noise_sigma(&v, &s), 0);
    ck_assert_msg(fabs(s / 20.0 - 1.0) <= 0.05, "estimated %.3f with padding", s);
    ck_assert_double_eq(s, noise_sigma_one_pass(&v)); /* the parts add up to one pass */
    for (size_t i = 0; i < (size_t)129 * 127 * 9; i++)
        v.data[i] = i % 129 < 40 ? 5.0f : 50.0f; /* noise-free: flat with an edge */
    ck_assert_int_eq(gpu_noise_sigma(&v, &s), 0);
    ck_assert_msg(s == 0.0, "a noise-free image estimated %.3f", s);
    gpu_volume_close(&v);
}
END_TEST

START_TEST(h_auto_scales_with_strength)
{
    gpu_volume v;
    ck_assert_int_eq(gpu_volume_init(&v, 64, 64, 4, 1), 0);
    fill_phantom(&v, 20.0);
    gpu_nlm_params p;
    gpu_nlm_params_default(&p);
    float h1 = 0, h2 = 0;
    ck_assert_int_eq(gpu_nlm_resolve_h(&p, &v, &h1), 0);
    p.strength = 2.0f;
    ck_assert_int_eq(gpu_nlm_resolve_h(&p, &v, &h2), 0);
    ck_assert(fabs(h1 / (sqrt(2.0) * 20.0) - 1.0) < 0.08);
    ck_assert(fabs(h2 / h1 - 2.0) < 1e-5);
    gpu_volume_close(&v);
}
END_TEST

START_TEST(kernels_load_eagerly_unless_the_environment_says_otherwise)
{
    unsetenv("CUDA_MODULE_LOADING");
    gpu_load_kernels_eagerly();
    ck_assert_str_eq(getenv("CUDA_MODULE_LOADING"), "EAGER");
    setenv("CUDA_MODULE_LOADING", "LAZY", 1);
    gpu_load_kernels_eagerly();
    ck_assert_str_eq(getenv("CUDA_MODULE_LOADING"), "LAZY");
}
END_TEST

START_TEST(device_parse_and_count)
{
    gpu_device d;
    int n = gpu_device_count();
    ck_assert_int_ge(n, 0);
    ck_assert_int_eq(gpu_device_parse("cpu", &d), 0);
    ck_assert_int_eq(d.kind, GPU_DEVICE_CPU);
    ck_assert_int_eq(gpu_device_parse("auto", &d), 0);
    ck_assert_int_eq(d.kind, n > 0 ? GPU_DEVICE_CUDA : GPU_DEVICE_CPU);
    ck_assert_int_eq(gpu_device_parse("gpu:x", &d), LDCT_EINPUT);
    ck_assert_int_eq(gpu_device_parse("tpu", &d), LDCT_EINPUT);
    ck_assert_int_eq(gpu_device_parse("gpu:999", &d), LDCT_ENOGPU);
    ck_assert_int_eq(gpu_device_parse("gpu", &d), n > 0 ? 0 : LDCT_ENOGPU);
    /* Warming up: nothing to do on the CPU; on a GPU its context and
     * staging, after which a call still works. */
    ck_assert_int_eq(gpu_device_parse("cpu", &d), 0);
    ck_assert_int_eq(gpu_device_warm(&d), 0);
    if (n > 0) {
        ck_assert_int_eq(gpu_device_parse("gpu:0", &d), 0);
        ck_assert_int_eq(gpu_device_warm(&d), 0);
        ck_assert_int_eq(gpu_device_warm(&d), 0); /* again: the slot is kept */
        gpu_volume in, out;
        ck_assert_int_eq(gpu_volume_init(&in, 33, 31, 5, 1), 0);
        ck_assert_int_eq(gpu_volume_init(&out, 33, 31, 5, 1), 0);
        fill_phantom(&in, 10.0);
        poison(&out);
        gpu_nlm_params p;
        gpu_nlm_params_default(&p);
        p.search_radius = 2;
        p.patch_radius = 1;
        ck_assert_int_eq(gpu_nlm3d_cuda(&p, &in, &out, &d), 0);
        gpu_volume_close(&in);
        gpu_volume_close(&out);
    }
}
END_TEST

/* ---- CUDA ---------------------------------------------------------------- */

static void check_cuda_vs_ref_cut(int dim, int nx, int ny, int nz, int S, int P, int gaussian,
                                  size_t budget, float cutoff)
{
    gpu_volume in, ref, out;
    ck_assert_int_eq(gpu_volume_init(&in, nx, ny, nz, 1), 0);
    ck_assert_int_eq(gpu_volume_init(&ref, nx, ny, nz, 1), 0);
    ck_assert_int_eq(gpu_volume_init(&out, nx, ny, nz, 1), 0);
    rng_state += (uint64_t)nx * 7919u + (uint64_t)S * 104729u; /* fresh input per case */
    fill_phantom(&in, 12.0);
    gpu_nlm_params p;
    gpu_nlm_params_default(&p);
    p.search_radius = S;
    p.patch_radius = P;
    p.gaussian = gaussian;
    p.cutoff = cutoff;
    gpu_device cpu, gpu;
    gpu_device_parse("cpu", &cpu);
    ck_assert_int_eq(gpu_device_parse("gpu:0", &gpu), 0);
    gpu.mem_budget = budget;
    int rc = dim == 3 ? gpu_nlm3d_ref(&p, &in, &ref, &cpu) : gpu_nlm2d_ref(&p, &in, &ref, &cpu);
    ck_assert_int_eq(rc, 0);
    poison(&out);
    gpu_nlm_stats st = {0};
    p.stats = &st;
    rc = dim == 3 ? gpu_nlm3d_cuda(&p, &in, &out, &gpu) : gpu_nlm2d_cuda(&p, &in, &out, &gpu);
    ck_assert_int_eq(rc, 0);
    double maxabs = 0;
    int nans = 0;
    double e = rel_l2_vol(&out, &ref, &maxabs, &nans);
    printf("cuda nlm%dd %dx%dx%d S=%d P=%d g=%d c=%g budget=%zu slabs=%d: rel L2 %.3g max abs "
           "%.3g\n",
           dim, nx, ny, nz, S, P, gaussian, (double)cutoff, budget, st.slabs, e, maxabs);
    fflush(stdout);
    /* Tolerance 1e-4 (issue 3): float32 on both sides, different summation
     * order and the device's exp2 approximation. */
    ck_assert_int_eq(nans, 0);
    ck_assert_msg(e <= 1e-4, "rel L2 %.3g", e);
    gpu_volume_close(&in);
    gpu_volume_close(&ref);
    gpu_volume_close(&out);
}

/* With the default cutoff. */
static void check_cuda_vs_ref(int dim, int nx, int ny, int nz, int S, int P, int gaussian,
                              size_t budget)
{
    check_cuda_vs_ref_cut(dim, nx, ny, nz, S, P, gaussian, budget, GPU_NLM_DEFAULT_CUTOFF);
}

START_TEST(cuda2d_matches_ref_on_random_odd_sizes)
{
    if (!have_gpu())
        return;
    check_cuda_vs_ref(2, 67, 45, 3, 1, 0, 0, 0);
    check_cuda_vs_ref(2, 101, 77, 5, 3, 1, 0, 0);
    check_cuda_vs_ref(2, 131, 97, 4, 10, 3, 0, 0);
    check_cuda_vs_ref(2, 75, 83, 3, 7, 2, 1, 0);
    check_cuda_vs_ref(2, 61, 59, 2, 15, 5, 0, 0);
    check_cuda_vs_ref(2, 13, 11, 3, 10, 4, 0, 0); /* window larger than the image */
}
END_TEST

START_TEST(cuda3d_matches_ref_on_random_odd_sizes)
{
    if (!have_gpu())
        return;
    check_cuda_vs_ref(3, 45, 37, 29, 1, 1, 0, 0);
    check_cuda_vs_ref(3, 71, 53, 41, 5, 2, 0, 0);
    check_cuda_vs_ref(3, 39, 33, 27, 3, 0, 0, 0);
    check_cuda_vs_ref(3, 37, 41, 23, 2, 3, 1, 0);
    check_cuda_vs_ref(3, 11, 9, 7, 4, 2, 0, 0); /* window larger than the volume */
}
END_TEST

static void check_slabs_identical(int dim, int S, int P)
{
    int nx = 83, ny = 61, nz = 47;
    gpu_volume in, a, b;
    ck_assert_int_eq(gpu_volume_init(&in, nx, ny, nz, 1), 0);
    ck_assert_int_eq(gpu_volume_init(&a, nx, ny, nz, 1), 0);
    ck_assert_int_eq(gpu_volume_init(&b, nx, ny, nz, 1), 0);
    fill_phantom(&in, 12.0);
    gpu_nlm_params p;
    gpu_nlm_params_default(&p);
    p.search_radius = S;
    p.patch_radius = P;
    gpu_nlm_stats sa = {0}, sb = {0};
    gpu_device gpu;
    ck_assert_int_eq(gpu_device_parse("gpu:0", &gpu), 0);
    poison(&a);
    poison(&b);
    p.stats = &sa;
    int rc = dim == 3 ? gpu_nlm3d_cuda(&p, &in, &a, &gpu) : gpu_nlm2d_cuda(&p, &in, &a, &gpu);
    ck_assert_int_eq(rc, 0);
    /* A few planes at a time (nlm3d: one tile depth, 8 planes, or more). */
    gpu.mem_budget = dim == 3 ? 2000000 : 1500000;
    p.stats = &sb;
    rc = dim == 3 ? gpu_nlm3d_cuda(&p, &in, &b, &gpu) : gpu_nlm2d_cuda(&p, &in, &b, &gpu);
    ck_assert_int_eq(rc, 0);
    printf("slabs nlm%dd: %d slab(s) vs %d slabs\n", dim, sa.slabs, sb.slabs);
    ck_assert_int_eq(sa.slabs, 1);
    ck_assert_int_gt(sb.slabs, 1);
    assert_identical(&a, &b, dim == 3 ? "nlm3d slabs" : "nlm2d slabs"); /* same work per voxel */
    gpu_volume_close(&in);
    gpu_volume_close(&a);
    gpu_volume_close(&b);
}

START_TEST(cuda_tiny_budget_slabs_give_identical_result)
{
    if (!have_gpu())
        return;
    check_slabs_identical(3, 3, 1);
    check_slabs_identical(2, 5, 2);
}
END_TEST

/* nlm3d kernels of gpu/nlm.cu, by their LDCT_NLM3D_CFG numbers: 7
 * nlm3d_v2_kernel, 27 v3, 37 v6, 40 v8 (the default) of gpu/nlm_cuda_v3.cu
 * (which fall back to cfg 7 for Gaussian weights or P > 2, v6 to cfg 27 for
 * S > 5, and v8 to cfg 37 for S != 5). Keep in step with cfg3_pick there. */
static const int nlm3d_cfgs[] = {7, 27, 37, 40};
enum { NLM3D_NCFG = sizeof nlm3d_cfgs / sizeof nlm3d_cfgs[0], NLM3D_FIRST_V3 = 1 };

/* Runs nlm3d on the GPU with LDCT_NLM3D_CFG = cfg (poisoned output). */
static void cuda3d_cfg(int cfg, const gpu_nlm_params *p, const gpu_volume *in, gpu_volume *out,
                       size_t budget, gpu_nlm_stats *st)
{
    char buf[16];
    snprintf(buf, sizeof buf, "%d", cfg);
    ck_assert_int_eq(setenv("LDCT_NLM3D_CFG", buf, 1), 0);
    gpu_device gpu;
    ck_assert_int_eq(gpu_device_parse("gpu:0", &gpu), 0);
    gpu.mem_budget = budget;
    gpu_nlm_params q = *p;
    q.stats = st;
    poison(out);
    int rc = gpu_nlm3d_cuda(&q, in, out, &gpu);
    unsetenv("LDCT_NLM3D_CFG");
    ck_assert_msg(rc == 0, "cfg %d: rc %d", cfg, rc);
}

/* One fresh random input and its reference, then every configuration. */
static void check_cfgs_vs_ref_cut(int nx, int ny, int nz, int S, int P, int gaussian, size_t budget,
                                  float cutoff)
{
    gpu_volume in, ref, out;
    ck_assert_int_eq(gpu_volume_init(&in, nx, ny, nz, 1), 0);
    ck_assert_int_eq(gpu_volume_init(&ref, nx, ny, nz, 1), 0);
    ck_assert_int_eq(gpu_volume_init(&out, nx, ny, nz, 1), 0);
    rng_state += (uint64_t)nx * 104729u + (uint64_t)P * 7919u + 17u;
    fill_phantom(&in, 12.0);
    gpu_nlm_params p;
    gpu_nlm_params_default(&p);
    p.search_radius = S;
    p.patch_radius = P;
    p.gaussian = gaussian;
    p.cutoff = cutoff;
    gpu_device cpu;
    gpu_device_parse("cpu", &cpu);
    ck_assert_int_eq(gpu_nlm3d_ref(&p, &in, &ref, &cpu), 0);
    double worst = 0;
    for (int i = 0; i < NLM3D_NCFG; i++) {
        const int cfg = nlm3d_cfgs[i];
        gpu_nlm_stats st = {0};
        cuda3d_cfg(cfg, &p, &in, &out, budget, &st);
        double maxabs = 0;
        int nans = 0;
        double e = rel_l2_vol(&out, &ref, &maxabs, &nans);
        worst = e > worst ? e : worst;
        /* Tolerance 1e-4, as in check_cuda_vs_ref; no voxel left unwritten. */
        ck_assert_msg(nans == 0, "cfg %d: %d NaN", cfg, nans);
        ck_assert_msg(e <= 1e-4, "cfg %d %dx%dx%d S=%d P=%d g=%d: rel L2 %.3g", cfg, nx, ny, nz, S,
                      P, gaussian, e);
        if (budget)
            ck_assert_int_gt(st.slabs, 1);
    }
    printf("cuda nlm3d %dx%dx%d S=%d P=%d g=%d c=%g budget=%zu, cfg 7, 27, 37, 40: worst rel L2"
           " %.3g\n",
           nx, ny, nz, S, P, gaussian, (double)cutoff, budget, worst);
    fflush(stdout);
    gpu_volume_close(&in);
    gpu_volume_close(&ref);
    gpu_volume_close(&out);
}

static void check_cfgs_vs_ref(int nx, int ny, int nz, int S, int P, int gaussian, size_t budget)
{
    check_cfgs_vs_ref_cut(nx, ny, nz, S, P, gaussian, budget, GPU_NLM_DEFAULT_CUTOFF);
}

/* Every kernel without the cutoff and with one that cuts many pairs (c =
 * 1.5: similar patches of this input sit near D / h^2 = 1). */
START_TEST(cuda_cutoff_off_and_strong_match_ref)
{
    if (!have_gpu())
        return;
    const float cuts[] = {0.0f, 1.5f};
    for (int i = 0; i < 2; i++) {
        check_cuda_vs_ref_cut(2, 101, 77, 5, 3, 1, 0, 0, cuts[i]);
        check_cuda_vs_ref_cut(2, 75, 83, 3, 7, 2, 1, 0, cuts[i]);
        check_cfgs_vs_ref_cut(71, 61, 19, 5, 2, 0, 0, cuts[i]);
        check_cfgs_vs_ref_cut(35, 29, 23, 2, 1, 1, 0, cuts[i]);
    }
}
END_TEST

/* The kernel a call runs: the chosen one (LDCT_NLM3D_CFG, else 40) where
 * it suits the call, else the next along 37, 27 and 7 that does; a number
 * that names no kernel chooses the default. */
START_TEST(cuda3d_kernel_choice_falls_back_along_the_chain)
{
    if (!have_gpu())
        return;
    static const struct {
        int cfg, S, P, gaussian, ran;
    } cases[] = {
        {40, 5, 2, 0, 40}, {40, 3, 2, 0, 37}, {40, 6, 1, 0, 27}, {40, 5, 3, 0, 7},
        {40, 5, 2, 1, 7},  {37, 5, 2, 0, 37}, {37, 6, 2, 0, 27}, {27, 3, 1, 0, 27},
        {27, 2, 1, 1, 7},  {7, 5, 2, 0, 7},   {38, 5, 2, 0, 40}, {0, 3, 1, 0, 37},
    };
    gpu_volume in, out;
    ck_assert_int_eq(gpu_volume_init(&in, 23, 19, 15, 1), 0);
    ck_assert_int_eq(gpu_volume_init(&out, 23, 19, 15, 1), 0);
    fill_phantom(&in, 12.0);
    gpu_nlm_params p;
    gpu_nlm_params_default(&p);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        p.search_radius = cases[i].S;
        p.patch_radius = cases[i].P;
        p.gaussian = cases[i].gaussian;
        gpu_nlm_stats st = {0};
        cuda3d_cfg(cases[i].cfg, &p, &in, &out, 0, &st);
        ck_assert_msg(st.kernel_cfg == cases[i].ran, "cfg %d S=%d P=%d g=%d ran %d, not %d",
                      cases[i].cfg, cases[i].S, cases[i].P, cases[i].gaussian, st.kernel_cfg,
                      cases[i].ran);
    }
    /* Without LDCT_NLM3D_CFG: v8 for S = 5. */
    gpu_device gpu;
    ck_assert_int_eq(gpu_device_parse("gpu:0", &gpu), 0);
    gpu_nlm_stats st = {0};
    p.search_radius = 5;
    p.patch_radius = 2;
    p.gaussian = 0;
    p.stats = &st;
    ck_assert_int_eq(gpu_nlm3d_cuda(&p, &in, &out, &gpu), 0);
    ck_assert_int_eq(st.kernel_cfg, 40);
    gpu_volume_close(&in);
    gpu_volume_close(&out);
}
END_TEST

START_TEST(cuda3d_every_configuration_matches_ref)
{
    if (!have_gpu())
        return;
    check_cfgs_vs_ref(45, 37, 29, 3, 1, 0, 0);
    check_cfgs_vs_ref(71, 61, 19, 5, 2, 0, 0); /* rows and columns past one tile */
    check_cfgs_vs_ref(39, 31, 17, 2, 0, 0, 0);
    check_cfgs_vs_ref(37, 33, 15, 1, 2, 0, 0);       /* S = 1: one dx group of 3 valid slots */
    check_cfgs_vs_ref(35, 29, 23, 2, 1, 1, 0);       /* Gaussian: v3 falls back to v2 */
    check_cfgs_vs_ref(33, 35, 27, 3, 2, 0, 1000000); /* slabs (2 or more for every cfg) */
    check_cfgs_vs_ref(11, 9, 7, 4, 2, 0, 0);         /* window larger than the volume */
    check_cfgs_vs_ref(23, 19, 13, 6, 1, 0, 0);       /* S > 5: v6 falls back to cfg 27 */
    check_cfgs_vs_ref(41, 35, 37, 5, 1, 0, 0);       /* v8 (cfg 40) with P = 1: 30-row tiles */
    check_cfgs_vs_ref(45, 39, 21, 5, 0, 0, 0);       /* v8 with P = 0: 32-row tiles */
}
END_TEST

/* One call with LDCT_NLM_CHUNK_MB = mb (cfg: LDCT_NLM3D_CFG, < 0: default). */
static void cuda_chunked(int dim, int cfg, const char *mb, const gpu_nlm_params *p,
                         const gpu_volume *in, gpu_volume *out, gpu_nlm_stats *st)
{
    ck_assert_int_eq(setenv("LDCT_NLM_CHUNK_MB", mb, 1), 0);
    if (cfg >= 0) {
        cuda3d_cfg(cfg, p, in, out, 0, st);
    } else {
        gpu_device gpu;
        ck_assert_int_eq(gpu_device_parse("gpu:0", &gpu), 0);
        gpu_nlm_params q = *p;
        q.stats = st;
        poison(out);
        ck_assert_int_eq(
            dim == 3 ? gpu_nlm3d_cuda(&q, in, out, &gpu) : gpu_nlm2d_cuda(&q, in, out, &gpu), 0);
    }
    unsetenv("LDCT_NLM_CHUNK_MB");
}

/* Page-locks (pin = 1) or releases (pin = 0) a volume's data: pinned
 * volumes take the copy path without staging. */
static void pin_volume(gpu_volume *v, int pin)
{
#if LDCT_WITH_CUDA
    const size_t bytes = sizeof(float) * gpu_volume_count(v);
    ck_assert_int_eq(
        pin ? gpu__cuda_host_register(v->data, bytes) : gpu__cuda_host_unregister(v->data), 0);
#else
    (void)v;
    (void)pin;
#endif
}

/* A single-slab call in overlapping chunks (uploads, kernels on two
 * streams, downloads) gives the one-chunk result bit for bit, for every
 * time point of a 4D volume. The chunked call runs first, so its device
 * buffers cannot hold the right planes from an earlier call. pinned: host
 * volumes page-locked (copies without the stage). */
static void check_chunks_identical(int dim, int cfg, int S, int P, int nt, int pinned)
{
    const int nx = 83, ny = 61, nz = 47;
    gpu_volume in, a, b;
    ck_assert_int_eq(gpu_volume_init(&in, nx, ny, nz, nt), 0);
    ck_assert_int_eq(gpu_volume_init(&a, nx, ny, nz, nt), 0);
    ck_assert_int_eq(gpu_volume_init(&b, nx, ny, nz, nt), 0);
    fill_phantom(&in, 12.0);
    if (pinned) {
        pin_volume(&in, 1);
        pin_volume(&b, 1);
    }
    gpu_nlm_params p;
    gpu_nlm_params_default(&p);
    p.search_radius = S;
    p.patch_radius = P;
    gpu_nlm_stats sa = {0}, sb = {0};
    cuda_chunked(dim, cfg, "0.1", &p, &in, &b, &sb); /* 0.95 MB per time point: 5-9 chunks */
    cuda_chunked(dim, cfg, "0", &p, &in, &a, &sa);
    printf("chunks nlm%dd cfg %d nt %d pinned %d: %d vs %d chunks\n", dim, cfg, nt, pinned,
           sa.chunks, sb.chunks);
    if (pinned) {
        pin_volume(&in, 0);
        pin_volume(&b, 0);
    }
    ck_assert_int_eq(sa.slabs, nt);
    ck_assert_int_eq(sb.slabs, nt);
    ck_assert_int_eq(sa.chunks, 1);
    ck_assert_int_gt(sb.chunks, 2);
    char what[64];
    snprintf(what, sizeof what, "nlm%dd cfg %d nt %d pinned %d chunks", dim, cfg, nt, pinned);
    assert_identical(&a, &b, what);
    gpu_volume_close(&in);
    gpu_volume_close(&a);
    gpu_volume_close(&b);
}

START_TEST(cuda_overlapped_chunks_give_identical_result)
{
    if (!have_gpu())
        return;
    check_chunks_identical(3, -1, 5, 2, 1, 0); /* the default (v8) kernel */
    check_chunks_identical(3, -1, 5, 2, 1, 1); /* pinned host memory: no stage */
    check_chunks_identical(3, -1, 3, 1, 2, 0); /* two time points */
    check_chunks_identical(3, 7, 2, 1, 1, 0);  /* the v2 kernel (Gaussian-capable path) */
    check_chunks_identical(3, 27, 6, 1, 1, 0); /* v3 for S > 5 */
    check_chunks_identical(2, -1, 5, 2, 2, 0);
}
END_TEST

/* Slabbed and single-slab runs agree bit for bit for every v3 variant. */
START_TEST(cuda3d_v3_slabs_give_identical_result)
{
    if (!have_gpu())
        return;
    const int nx = 83, ny = 61, nz = 47;
    gpu_volume in, a, b;
    ck_assert_int_eq(gpu_volume_init(&in, nx, ny, nz, 1), 0);
    ck_assert_int_eq(gpu_volume_init(&a, nx, ny, nz, 1), 0);
    ck_assert_int_eq(gpu_volume_init(&b, nx, ny, nz, 1), 0);
    fill_phantom(&in, 12.0);
    gpu_nlm_params p;
    gpu_nlm_params_default(&p);
    p.search_radius = 4;
    p.patch_radius = 2;
    for (int i = NLM3D_FIRST_V3; i < NLM3D_NCFG; i++) {
        const int cfg = nlm3d_cfgs[i];
        gpu_nlm_stats sa = {0}, sb = {0};
        cuda3d_cfg(cfg, &p, &in, &a, 0, &sa);
        cuda3d_cfg(cfg, &p, &in, &b, 2500000, &sb); /* above one plane for 56-row tiles */
        ck_assert_int_eq(sa.slabs, 1);
        ck_assert_int_gt(sb.slabs, 1);
        char what[32];
        snprintf(what, sizeof what, "cfg %d slabs", cfg);
        assert_identical(&a, &b, what);
    }
    /* v8 (cfg 40) runs S = 5 only, its slabs start at multiples of its
     * 12 planes: 4.8 MB holds 33 planes here, so 2 slabs. */
    p.search_radius = 5;
    {
        const int cfg = 40;
        gpu_nlm_stats sa = {0}, sb = {0};
        cuda3d_cfg(cfg, &p, &in, &a, 0, &sa);
        cuda3d_cfg(cfg, &p, &in, &b, 4800000, &sb);
        ck_assert_int_eq(sa.slabs, 1);
        ck_assert_int_eq(sb.slabs, 2);
        char what[32];
        snprintf(what, sizeof what, "cfg %d slabs", cfg);
        assert_identical(&a, &b, what);
    }
    gpu_volume_close(&in);
    gpu_volume_close(&a);
    gpu_volume_close(&b);
}
END_TEST

START_TEST(dispatcher_runs_on_cpu_and_auto)
{
    gpu_volume in, a, b;
    ck_assert_int_eq(gpu_volume_init(&in, 33, 29, 9, 1), 0);
    ck_assert_int_eq(gpu_volume_init(&a, 33, 29, 9, 1), 0);
    ck_assert_int_eq(gpu_volume_init(&b, 33, 29, 9, 1), 0);
    fill_phantom(&in, 12.0);
    gpu_nlm_params p;
    gpu_nlm_params_default(&p);
    p.search_radius = 3;
    p.patch_radius = 1;
    gpu_device cpu;
    gpu_device_parse("cpu", &cpu);
    ck_assert_int_eq(gpu_nlm3d(&p, &in, &a, &cpu), 0);
    ck_assert_int_eq(gpu_nlm3d(&p, &in, &b, NULL), 0); /* auto */
    ck_assert(rel_l2_vol(&a, &b, NULL, NULL) <= 1e-4);
    ck_assert_int_eq(gpu_nlm2d(&p, &in, &a, &cpu), 0);
    ck_assert_int_eq(gpu_nlm2d(&p, &in, &b, NULL), 0);
    ck_assert(rel_l2_vol(&a, &b, NULL, NULL) <= 1e-4);
    gpu_volume_close(&in);
    gpu_volume_close(&a);
    gpu_volume_close(&b);
}
END_TEST

static Suite *nlm_suite(void)
{
    Suite *s = suite_create("gpu_nlm");
    TCase *tc = tcase_create("ref");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, ref2d_matches_naive_for_several_radii_and_odd_sizes);
    tcase_add_test(tc, ref3d_matches_naive_for_several_radii_and_odd_sizes);
    tcase_add_test(tc, ref_cutoff_matches_naive_and_changes_the_result);
    tcase_add_test(tc, ref_instruction_sets_match_naive_and_each_other);
    tcase_add_test(tc, effective_cutoff_keeps_a_margin_at_low_strength);
    tcase_add_test(tc, ref3d_same_result_with_any_thread_count);
    tcase_add_test(tc, nlm_rejects_bad_parameters);
    tcase_add_test(tc, noise_sigma_within_5_percent_on_gaussian_noise);
    tcase_add_test(tc, noise_sigma_ignores_padding_outside_the_field_of_view);
    tcase_add_test(tc, h_auto_scales_with_strength);
    tcase_add_test(tc, device_parse_and_count);
    tcase_add_test(tc, kernels_load_eagerly_unless_the_environment_says_otherwise);
    tcase_add_test(tc, dispatcher_runs_on_cpu_and_auto);
    suite_add_tcase(s, tc);
    TCase *tg = tcase_create("cuda");
    tcase_set_timeout(tg, 300);
    tcase_add_test(tg, cuda2d_matches_ref_on_random_odd_sizes);
    tcase_add_test(tg, cuda3d_matches_ref_on_random_odd_sizes);
    tcase_add_test(tg, cuda_tiny_budget_slabs_give_identical_result);
    tcase_add_test(tg, cuda3d_kernel_choice_falls_back_along_the_chain);
    tcase_add_test(tg, cuda3d_every_configuration_matches_ref);
    tcase_add_test(tg, cuda_cutoff_off_and_strong_match_ref);
    tcase_add_test(tg, cuda3d_v3_slabs_give_identical_result);
    tcase_add_test(tg, cuda_overlapped_chunks_give_identical_result);
    suite_add_tcase(s, tg);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(nlm_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
