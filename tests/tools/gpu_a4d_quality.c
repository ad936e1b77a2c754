/* gpu_a4d_quality: compares adaptive4d with nlm3d applied volume by volume
 * on a synthetic 4D phantom with known truth, and prints PSNR, RMSE, the
 * RMSE within 1.5 voxels of the moving edges and the RMSE at least 4
 * voxels away from them (flat parts).
 *
 *   gpu_a4d_quality [--noise SD] [--motion A] [--device cpu|gpu] [--strength S]
 *                   [--set NAME=VALUE ...]
 *   gpu_a4d_quality --raw-in FILE --dims NXxNYxNZxNT --raw-out FILE
 *                   [--algo adaptive4d|nlm3d] [--set NAME=VALUE ...] [--device D]
 *
 * The second form filters a raw float32 volume (x fastest, then y, z, t;
 * `ldct quality --save-raw` writes one) and writes the result, for
 * parameter studies with `ldct quality --test-raw` (tests/bench/quality4d.sh).
 * --set changes one adaptive4d parameter (the field names of
 * gpu_adaptive4d_params: downsample, m_sigma, lp_sigma, ...) or, with
 * --algo nlm3d, strength, search_radius, patch_radius.
 *
 * Phantom (40x36x16x12 voxels): background 40 + 0.3 y, an ellipsoid of +300
 * (radius 9 in x and y, 4.5 in z) whose radius beats by 25% x A over the 12
 * time points, and a +100 step at x > 4 + 1.2 A t; Gaussian noise SD
 * (default 40, seeded: deterministic). A = 1 moves edges by up to 1.2
 * voxels per time point (faster than the 4D filters can follow without
 * aliasing along t); A = 0.33 is slow motion. Single-threaded driver.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "gpu/adaptive4d.h"
#include "gpu/nlm.h"

enum { X = 40, Y = 36, Z = 16, T = 12 };

static double g_motion = 1.0;

static double radius(int t)
{
    return 9.0 * (1.0 + 0.25 * g_motion * sin(6.283185307179586 * t / T));
}

static double sphere_dist(int x, int y, int z, int t)
{
    double dx = x - 20.0, dy = y - 18.0, dz = (z - 8.0) * 2.0;
    return fabs(sqrt(dx * dx + dy * dy + dz * dz) - radius(t));
}

static double step_at(int t)
{
    return 4.0 + 1.2 * g_motion * t;
}

static double truth(int x, int y, int z, int t)
{
    double dx = x - 20.0, dy = y - 18.0, dz = (z - 8.0) * 2.0, r = radius(t);
    double s = 40.0 + 0.3 * y;
    if (dx * dx + dy * dy + dz * dz < r * r)
        s += 300.0;
    return x > step_at(t) ? s + 100.0 : s;
}

static uint64_t rng = 88172645463325252ull;

static double gauss(void)
{
    double u[2];
    for (int k = 0; k < 2; k++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        u[k] = ((rng >> 11) + 0.5) / 9007199254740992.0;
    }
    return sqrt(-2.0 * log(u[0])) * cos(6.283185307179586 * u[1]);
}

static void report(const char *name, const gpu_volume *v)
{
    double se = 0, ee = 0, fe = 0;
    long ne = 0, nf = 0;
    for (int t = 0; t < T; t++)
        for (int z = 0; z < Z; z++)
            for (int y = 0; y < Y; y++)
                for (int x = 0; x < X; x++) {
                    double e = v->data[(((size_t)t * Z + z) * Y + y) * X + x] - truth(x, y, z, t);
                    double d = fmin(sphere_dist(x, y, z, t), fabs(x - (step_at(t) + 0.5)));
                    se += e * e;
                    if (d <= 1.5)
                        ee += e * e, ne++;
                    else if (d >= 4.0)
                        fe += e * e, nf++;
                }
    const double n = (double)X * Y * Z * T;
    printf("%-12s PSNR %6.2f dB (peak 400)  RMSE %6.2f  edge RMSE %6.2f  flat RMSE %6.2f\n", name,
           10.0 * log10(400.0 * 400.0 / (se / n)), sqrt(se / n), sqrt(ee / ne), sqrt(fe / nf));
}

/* --set NAME=VALUE on the adaptive4d or nlm parameters; 0 or -1. */
static int set_param(const char *kv, gpu_adaptive4d_params *a, gpu_nlm_params *n)
{
    const char *eq = strchr(kv, '=');
    if (!eq)
        return -1;
    double v = atof(eq + 1);
    size_t len = (size_t)(eq - kv);
#define IS(name) (len == strlen(name) && !strncmp(kv, name, len))
#define SETF(name, field)                                                                          \
    if (IS(name))                                                                                  \
        return (field) = (float)v, 0;
#define SETI(name, field)                                                                          \
    if (IS(name))                                                                                  \
        return (field) = (int)v, 0;
    SETI("downsample", a->downsample)
    SETI("mono_size", a->mono_size)
    SETI("recon_size", a->recon_size)
    SETF("mono_center", a->mono_center)
    SETF("mono_bandwidth", a->mono_bandwidth)
    SETF("gamma", a->gamma)
    SETF("tensor_sigma", a->tensor_sigma)
    SETF("control_sigma", a->control_sigma)
    SETF("lp_sigma", a->lp_sigma)
    SETF("lp_sigma_t", a->lp_sigma_t)
    SETF("m_alpha", a->m_alpha)
    SETF("m_beta", a->m_beta)
    SETF("m_sigma", a->m_sigma)
    SETI("m_norm", a->m_norm)
    SETF("m_pass", a->m_pass)
    SETF("t_scale", a->t_scale)
    SETF("pass_t", a->pass_t)
    SETF("mu_alpha", a->mu_alpha)
    SETF("mu_beta", a->mu_beta)
    SETF("strength", a->strength)
    SETF("static_sigma_t", a->static_sigma_t)
    SETF("static_t", a->static_t)
    SETF("nlm_strength", n->strength)
    SETI("search_radius", n->search_radius)
    SETI("patch_radius", n->patch_radius)
#undef IS
#undef SETF
#undef SETI
    return -1;
}

/* Raw mode: filter FILE of dims with algo into the output file. */
static int run_raw(const char *in_path, const char *dims, const char *out_path, const char *algo,
                   const gpu_adaptive4d_params *ap, const gpu_nlm_params *np, const gpu_device *dev)
{
    int d[4];
    if (sscanf(dims, "%dx%dx%dx%d", &d[0], &d[1], &d[2], &d[3]) != 4)
        return fprintf(stderr, "gpu_a4d_quality: --dims NXxNYxNZxNT\n"), 2;
    gpu_volume in = {0}, out = {0};
    FILE *f = fopen(in_path, "rb");
    int rc = !f || gpu_volume_init(&in, d[0], d[1], d[2], d[3]) ||
             gpu_volume_init(&out, d[0], d[1], d[2], d[3]);
    size_t n = gpu_volume_count(&in);
    if (!rc && fread(in.data, sizeof(float), n, f) != n)
        rc = 1;
    if (f)
        fclose(f);
    if (rc)
        return fprintf(stderr, "gpu_a4d_quality: cannot read %zu floats from %s\n", n, in_path), 1;
    gpu_a4d_stats st = {0};
    gpu_adaptive4d_params a = *ap;
    a.stats = &st;
    rc =
        !strcmp(algo, "nlm3d") ? gpu_nlm3d(np, &in, &out, dev) : gpu_adaptive4d(&a, &in, &out, dev);
    if (rc)
        return fprintf(stderr, "gpu_a4d_quality: %s: %s\n", algo, ldct_strerror(rc)), 1;
    f = fopen(out_path, "wb");
    if (!f || fwrite(out.data, sizeof(float), n, f) != n || fclose(f))
        return fprintf(stderr, "gpu_a4d_quality: cannot write %s\n", out_path), 1;
    fprintf(stderr, "%s: %.1f s\n", algo, st.total_ms / 1e3);
    gpu_volume_close(&in);
    gpu_volume_close(&out);
    return 0;
}

int main(int argc, char **argv)
{
    double noise = 40.0, strength = 1.0;
    const char *device = "cpu", *raw_in = NULL, *raw_out = NULL, *dims = NULL, *algo = "adaptive4d";
    gpu_adaptive4d_params ap;
    gpu_adaptive4d_params_default(&ap);
    gpu_nlm_params np;
    gpu_nlm_params_default(&np);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--set")) {
            if (set_param(argv[i + 1], &ap, &np))
                return fprintf(stderr, "gpu_a4d_quality: unknown --set %s\n", argv[i + 1]), 2;
        } else if (!strcmp(argv[i], "--raw-in"))
            raw_in = argv[i + 1];
        else if (!strcmp(argv[i], "--raw-out"))
            raw_out = argv[i + 1];
        else if (!strcmp(argv[i], "--dims"))
            dims = argv[i + 1];
        else if (!strcmp(argv[i], "--algo"))
            algo = argv[i + 1];
        else if (!strcmp(argv[i], "--noise"))
            noise = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--motion"))
            g_motion = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--device"))
            device = argv[i + 1];
        else if (!strcmp(argv[i], "--strength"))
            strength = atof(argv[i + 1]);
        else
            return fprintf(stderr, "usage: gpu_a4d_quality [--noise SD] [--motion A] "
                                   "[--device cpu|gpu] [--strength S]\n"),
                   2;
    }
    gpu_device dev;
    gpu_volume in, out;
    if (raw_in || raw_out || dims) {
        if (!raw_in || !raw_out || !dims || gpu_device_parse(device, &dev))
            return fprintf(stderr, "gpu_a4d_quality: --raw-in, --raw-out, --dims, device\n"), 2;
        return run_raw(raw_in, dims, raw_out, algo, &ap, &np, &dev);
    }
    if (gpu_device_parse(device, &dev) || gpu_volume_init(&in, X, Y, Z, T) ||
        gpu_volume_init(&out, X, Y, Z, T))
        return fprintf(stderr, "gpu_a4d_quality: bad device or out of memory\n"), 1;
    for (int t = 0; t < T; t++)
        for (int z = 0; z < Z; z++)
            for (int y = 0; y < Y; y++)
                for (int x = 0; x < X; x++)
                    in.data[(((size_t)t * Z + z) * Y + y) * X + x] =
                        (float)(truth(x, y, z, t) + noise * gauss());
    printf("phantom 40x36x16x12, noise %.1f, motion %.2f, device %s\n", noise, g_motion, device);
    report("input", &in);
    ap.strength = (float)strength;
    int rc = gpu_adaptive4d(&ap, &in, &out, &dev);
    if (rc)
        return fprintf(stderr, "adaptive4d: %s\n", ldct_strerror(rc)), 1;
    report("adaptive4d", &out);
    np.strength = (float)strength;
    if ((rc = gpu_nlm3d(&np, &in, &out, &dev)) != 0)
        return fprintf(stderr, "nlm3d: %s\n", ldct_strerror(rc)), 1;
    report("nlm3d", &out);
    gpu_volume_close(&in);
    gpu_volume_close(&out);
    return 0;
}
