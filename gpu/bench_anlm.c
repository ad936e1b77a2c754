/* `bench anlm`: times adaptive non-local means (gpu/anlm.h) on a synthetic
 * volume (structure plus noise whose sigma doubles from one side to the
 * other, so the adaptive estimate has work to do) and prints one line per
 * configuration, a JSON object with --json:
 *
 *   bench anlm [--size XxYxZ[,..]] [--search-radius S[,..]] [--patch-radius P]
 *        [--device cpu|gpu[:N][,..]] [--repeat N] [--warmup N] [--strength F]
 *        [--rician] [--threads N] [--json]
 *
 * --patch-radius 0 (default) = radii 1 and 2 with sub-band mixing, P > 0 =
 * one pass of radius P. voxel_offsets_per_s counts voxels x (2S+1)^3 per
 * second, per output voxel as for nlm3d (a mixed run makes two passes, and
 * two sweeps each: noise estimate, then weights). Main thread only.
 */
#include "gpu/bench.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/err.h"
#include "gpu/anlm.h"
#include "gpu/device.h"
#include "gpu/volume.h"
#if LDCT_WITH_CUDA
#include "gpu/cuda_util.h"
#endif

enum { MAXL = 16 };

typedef struct aopts {
    int sizes[MAXL][3], nsizes;
    int srad[MAXL], nsrad;
    int patch;
    char devbuf[256];
    const char *devs[MAXL];
    int ndevs, repeat, warmup, threads, json, rician;
    double strength;
} aopts;

static void usage(FILE *f)
{
    fprintf(f, "usage: bench anlm [--size XxYxZ[,..]] [--search-radius S[,..]] [--patch-radius P]\n"
               "       [--device cpu|gpu[:N][,..]] [--repeat N] [--warmup N] [--strength F]\n"
               "       [--rician] [--threads N] [--json]\n");
}

/* Ramp, bright blob, dark step, stripes; noise sigma 15 at x = 0 rising to
 * 30 at the far side (generated per plane, deterministic, parallel). */
static void fill(gpu_volume *v)
{
    int nx = v->nx, ny = v->ny, nz = v->nz;
#pragma omp parallel for schedule(static)
    for (int z = 0; z < nz; z++) {
        uint64_t st = 0xD1B54A32D192ED03ull ^ ((uint64_t)z * 0x9E3779B97F4A7C15ull + 7);
        for (int y = 0; y < ny; y++)
            for (int x = 0; x < nx; x++) {
                double cx = x - nx / 2.0, cy = y - ny / 2.0, cz = z - nz / 2.0;
                double s = -100.0 + 0.1 * x - 0.05 * y + 0.02 * z;
                if (cx * cx + cy * cy + cz * cz < (double)nx * nx / 9.0)
                    s += 300.0;
                if (x > nx * 2 / 3)
                    s -= 700.0;
                if ((y / 4) % 5 == 0 && x < nx / 4)
                    s += 80.0;
                double g = 0;
                for (int k = 0; k < 4; k++) {
                    st ^= st << 13;
                    st ^= st >> 7;
                    st ^= st << 17;
                    g += (double)(st >> 11) / 9007199254740992.0;
                }
                double sigma = 15.0 * (1.0 + (double)x / nx);
                v->data[((size_t)z * ny + y) * nx + x] = (float)(s + sigma * (g - 2.0) * sqrt(3.0));
            }
    }
}

static void print_line(const aopts *o, const gpu_anlm_params *p, const int *size,
                       const gpu_device *dev, double *wall, double *kern, int slabs, double sample)
{
    int n = o->repeat;
    double wmin = wall[0];
    for (int i = 1; i < n; i++)
        wmin = wall[i] < wmin ? wall[i] : wmin;
    double wmed = gpu__bench_median(wall, n), kmed = gpu__bench_median(kern, n);
    double win = 2.0 * p->search_radius + 1,
           vo = (double)size[0] * size[1] * size[2] * win * win * win;
    char dname[32], gname[128] = "";
    gpu_device_name(dev, dname, sizeof dname);
#if LDCT_WITH_CUDA
    if (dev->kind == GPU_DEVICE_CUDA)
        gpu__cuda_device_name(dev->index, gname, sizeof gname);
#endif
    if (o->json)
        printf("{\"algo\":\"anlm\",\"size\":\"%dx%dx%d\",\"device\":\"%s\",\"gpu_name\":\"%s\","
               "\"search_radius\":%d,\"patch_radius\":%d,\"patch_radius2\":%d,\"mix\":%d,"
               "\"passes\":%d,\"noise\":\"%s\",\"strength\":%.3g,\"repeat\":%d,"
               "\"seconds_median\":%.6f,\"seconds_min\":%.6f,\"kernel_seconds_median\":%.6f,"
               "\"voxel_offsets_per_s\":%.4e,\"kernel_voxel_offsets_per_s\":%.4e,\"slabs\":%d,"
               "\"sample\":%.4f}\n",
               size[0], size[1], size[2], dname, gname, p->search_radius, p->patch_radius,
               p->mix ? p->patch_radius2 : -1, p->mix, p->mix ? 2 : 1,
               p->noise == GPU_ANLM_RICIAN ? "rician" : "gaussian", (double)p->strength, n, wmed,
               wmin, kmed, vo / wmed, kmed > 0 ? vo / kmed : 0.0, slabs, sample);
    else
        printf("anlm %dx%dx%d S=%d P=%s %s: median %.4f s (min %.4f, kernels %.4f s), %.3g "
               "voxel-offsets/s\n",
               size[0], size[1], size[2], p->search_radius, p->mix ? "1+2 mixed" : "single", dname,
               wmed, wmin, kmed, vo / wmed);
    fflush(stdout);
}

static int run_one(const aopts *o, const int *size, int S, const char *devspec)
{
    gpu_device dev;
    int rc = gpu_device_parse(devspec, &dev);
    if (rc) {
        fprintf(stderr, "bench: device '%s': %s\n", devspec, ldct_strerror(rc));
        return rc == LDCT_EINPUT ? 2 : 1;
    }
    dev.threads = o->threads;
    gpu_volume in = {0}, out = {0};
    if ((rc = gpu_volume_init(&in, size[0], size[1], size[2], 1)) != 0 ||
        (rc = gpu_volume_init(&out, size[0], size[1], size[2], 1)) != 0) {
        fprintf(stderr, "bench: cannot allocate %dx%dx%d: %s\n", size[0], size[1], size[2],
                ldct_strerror(rc));
        gpu_volume_close(&in);
        return 1;
    }
    fill(&in);
    gpu_anlm_params p;
    gpu_anlm_params_default(&p);
    p.search_radius = S;
    if (o->patch > 0)
        p.mix = 0, p.patch_radius = o->patch;
    p.strength = (float)o->strength;
    p.noise = o->rician ? GPU_ANLM_RICIAN : GPU_ANLM_GAUSSIAN;
    gpu_anlm_stats st;
    p.stats = &st;
    double *wall = calloc((size_t)o->repeat, sizeof *wall),
           *kern = calloc((size_t)o->repeat, sizeof *kern);
    int slabs = 0;
    rc = wall && kern ? 0 : -1;
    for (int i = -o->warmup; i < o->repeat && rc == 0; i++) {
        memset(&st, 0, sizeof st);
        double t0 = gpu__bench_now_s();
        rc = gpu_anlm(&p, &in, &out, &dev);
        double t1 = gpu__bench_now_s();
        if (rc)
            fprintf(stderr, "bench: anlm on %s failed: %s\n", devspec, ldct_strerror(rc));
        else if (i >= 0)
            wall[i] = t1 - t0, kern[i] = st.kernel_ms * 1e-3, slabs = st.slabs;
    }
    if (rc == 0)
        print_line(o, &p, size, &dev, wall, kern, slabs, out.data[gpu_volume_count(&out) / 2]);
    free(wall);
    free(kern);
    gpu_volume_close(&in);
    gpu_volume_close(&out);
    return rc ? 1 : 0;
}

static int parse_opt(aopts *o, const char *a, const char *v)
{
    if (!v)
        return -1;
    if (strcmp(a, "--size") == 0)
        return gpu__bench_sizes(v, o->sizes, &o->nsizes, MAXL, 0);
    if (strcmp(a, "--search-radius") == 0)
        return gpu__bench_int_list(v, o->srad, &o->nsrad, MAXL, 1, GPU_ANLM_MAX_SEARCH);
    if (strcmp(a, "--patch-radius") == 0)
        return gpu__bench_int(v, &o->patch, 0, GPU_ANLM_MAX_PATCH);
    if (strcmp(a, "--device") == 0) {
        snprintf(o->devbuf, sizeof o->devbuf, "%s", v);
        o->ndevs = 0;
        for (char *sv = NULL, *t = strtok_r(o->devbuf, ",", &sv); t && o->ndevs < MAXL;
             t = strtok_r(NULL, ",", &sv))
            o->devs[o->ndevs++] = t;
        return o->ndevs ? 0 : -1;
    }
    if (strcmp(a, "--repeat") == 0)
        return gpu__bench_int(v, &o->repeat, 1, 1000);
    if (strcmp(a, "--warmup") == 0)
        return gpu__bench_int(v, &o->warmup, 0, 100);
    if (strcmp(a, "--threads") == 0)
        return gpu__bench_int(v, &o->threads, 0, 1024);
    if (strcmp(a, "--strength") == 0)
        return !((o->strength = atof(v)) > 0) ? -1 : 0;
    return -2;
}

int gpu__bench_anlm_main(int argc, char **argv)
{
    aopts o;
    memset(&o, 0, sizeof o);
    o.sizes[0][0] = 128, o.sizes[0][1] = 128, o.sizes[0][2] = 64, o.nsizes = 1;
    o.srad[0] = 3, o.nsrad = 1;
    o.devs[0] = "auto", o.ndevs = 1;
    o.repeat = 5, o.warmup = 1, o.strength = 1.0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--json") == 0 || strcmp(a, "--rician") == 0) {
            *(a[2] == 'j' ? &o.json : &o.rician) = 1;
            continue;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
            return usage(stdout), 0;
        int rc = parse_opt(&o, a, i + 1 < argc ? argv[i + 1] : NULL);
        if (rc) {
            fprintf(stderr,
                    rc == -2 ? "bench: unknown option '%s'\n"
                             : "bench: bad or missing value for %s\n",
                    a);
            usage(stderr);
            return 2;
        }
        i++;
    }
    int status = 0;
    for (int a = 0; a < o.nsizes; a++)
        for (int b = 0; b < o.nsrad; b++)
            for (int d = 0; d < o.ndevs; d++) {
                int r = run_one(&o, o.sizes[a], o.srad[b], o.devs[d]);
                if (r == 2)
                    return 2;
                status |= r;
            }
    return status;
}
