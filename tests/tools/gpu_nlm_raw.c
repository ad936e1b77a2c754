/* Runs the NLM CPU reference (or a device) on a raw float32 volume, for
 * side-by-side comparisons with other implementations
 * (tests/bench/skimage_vs_ref.py):
 *   gpu_nlm_raw nlm2d|nlm3d IN.raw OUT.raw NX NY NZ S P H REPEAT [DEVICE]
 * Prints one JSON line with the median wall time over REPEAT runs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/err.h"
#include "gpu/nlm.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc < 11) {
        fprintf(stderr, "usage: gpu_nlm_raw nlm2d|nlm3d IN OUT NX NY NZ S P H REPEAT [DEVICE]\n");
        return 2;
    }
    int dim = strcmp(argv[1], "nlm3d") == 0 ? 3 : 2;
    int nx = atoi(argv[4]), ny = atoi(argv[5]), nz = atoi(argv[6]);
    int repeat = atoi(argv[10]);
    gpu_device dev;
    if (gpu_device_parse(argc > 11 ? argv[11] : "cpu", &dev) != 0 || repeat < 1 || repeat > 100)
        return 2;
    gpu_volume in, out;
    if (gpu_volume_init(&in, nx, ny, nz, 1) || gpu_volume_init(&out, nx, ny, nz, 1))
        return 1;
    FILE *f = fopen(argv[2], "rb");
    if (!f || fread(in.data, sizeof(float), gpu_volume_count(&in), f) != gpu_volume_count(&in)) {
        fprintf(stderr, "gpu_nlm_raw: cannot read %s\n", argv[2]);
        return 1;
    }
    fclose(f);
    gpu_nlm_params p;
    gpu_nlm_params_default(&p);
    p.search_radius = atoi(argv[7]);
    p.patch_radius = atoi(argv[8]);
    p.h_auto = 0;
    p.h = (float)atof(argv[9]);
    double t[100] = {0};
    for (int i = 0; i < repeat; i++) {
        double t0 = now_s();
        int rc = dim == 3 ? gpu_nlm3d(&p, &in, &out, &dev) : gpu_nlm2d(&p, &in, &out, &dev);
        t[i] = now_s() - t0;
        if (rc) {
            fprintf(stderr, "gpu_nlm_raw: %s\n", ldct_strerror(rc));
            return 1;
        }
    }
    qsort(t, (size_t)repeat, sizeof t[0], cmp);
    f = fopen(argv[3], "wb");
    if (!f || fwrite(out.data, sizeof(float), gpu_volume_count(&out), f) != gpu_volume_count(&out))
        return 1;
    fclose(f);
    printf("{\"algo\":\"%s\",\"seconds_median\":%.6f,\"seconds_min\":%.6f}\n", argv[1],
           t[repeat / 2], t[0]);
    gpu_volume_close(&in);
    gpu_volume_close(&out);
    return 0;
}
