/* gpu_a4d_quality: compares adaptive4d with nlm3d applied volume by volume
 * on a synthetic 4D phantom with known truth, and prints PSNR, RMSE, the
 * RMSE within 1.5 voxels of the moving edges and the RMSE at least 4
 * voxels away from them (flat parts).
 *
 *   gpu_a4d_quality [--noise SD] [--motion A] [--device cpu|gpu] [--strength S]
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

int main(int argc, char **argv)
{
    double noise = 40.0, strength = 1.0;
    const char *device = "cpu";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--noise"))
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
    gpu_adaptive4d_params ap;
    gpu_adaptive4d_params_default(&ap);
    ap.strength = (float)strength;
    int rc = gpu_adaptive4d(&ap, &in, &out, &dev);
    if (rc)
        return fprintf(stderr, "adaptive4d: %s\n", ldct_strerror(rc)), 1;
    report("adaptive4d", &out);
    gpu_nlm_params np;
    gpu_nlm_params_default(&np);
    np.strength = (float)strength;
    if ((rc = gpu_nlm3d(&np, &in, &out, &dev)) != 0)
        return fprintf(stderr, "nlm3d: %s\n", ldct_strerror(rc)), 1;
    report("nlm3d", &out);
    gpu_volume_close(&in);
    gpu_volume_close(&out);
    return 0;
}
