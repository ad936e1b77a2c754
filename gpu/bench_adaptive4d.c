/* `bench adaptive4d`: times gpu_adaptive4d on a synthetic 4D volume (smooth
 * background, a sphere whose radius beats over t, a step that moves along x
 * with t, Gaussian noise sigma 20; deterministic) and prints one line per
 * device, JSON with --json:
 *
 *   bench adaptive4d [--size XxYxZxT] [--device cpu|gpu[:N][,..]]
 *         [--backend auto|fft|spatial] [--repeat N] [--warmup N]
 *         [--threads N] [--json]
 *
 * Throughput is voxels per second of the whole filter (all time points).
 * Main thread only.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/err.h"
#include "gpu/adaptive4d.h"
#include "gpu/bench.h"
#include "gpu/device.h"
#include "gpu/volume.h"

typedef struct a4d_opts {
    int size[4], repeat, warmup, threads, json, backend;
    char devbuf[256];
    size_t mem_budget_mb; /* 0: automatic */
} a4d_opts;

static void a4d_usage(FILE *f)
{
    fprintf(f, "usage: bench adaptive4d [--size XxYxZxT] [--device cpu|gpu[:N][,..]]\n"
               "       [--backend auto|fft|spatial] [--repeat N] [--warmup N] [--threads N] "
               "[--json]\n"
               "       [--mem-budget MB] (0: automatic; smaller forces slabs along t)\n");
}

static int parse_backend(const char *s)
{
    if (!strcmp(s, "auto"))
        return GPU_A4D_AUTO;
    if (!strcmp(s, "fft"))
        return GPU_A4D_FFT;
    if (!strcmp(s, "spatial"))
        return GPU_A4D_SPATIAL;
    return -1;
}

static void fill_4d(gpu_volume *v)
{
    const int nx = v->nx, ny = v->ny, nz = v->nz, nt = v->nt;
#pragma omp parallel for collapse(2) schedule(static)
    for (int t = 0; t < nt; t++)
        for (int z = 0; z < nz; z++) {
            uint64_t st =
                0x9E3779B97F4A7C15ull ^ (((uint64_t)t * 100003u + z) * 0xBF58476D1CE4E5B9ull);
            double r = 0.25 * nx * (1.0 + 0.2 * sin(6.283185307179586 * t / nt));
            for (int y = 0; y < ny; y++)
                for (int x = 0; x < nx; x++) {
                    double dx = x - nx / 2.0, dy = y - ny / 2.0, dz = (z - nz / 2.0) * nx / nz;
                    double s = 40.0 + 0.05 * x + 20.0 * sin(0.05 * y);
                    if (dx * dx + dy * dy + dz * dz < r * r)
                        s += 300.0;
                    if (x > nx / 8 + (double)t * nx / (8.0 * nt))
                        s += 100.0;
                    st ^= st << 13, st ^= st >> 7, st ^= st << 17;
                    double u1 = ((st >> 11) + 0.5) / 9007199254740992.0;
                    st ^= st << 13, st ^= st >> 7, st ^= st << 17;
                    double u2 = ((st >> 11) + 0.5) / 9007199254740992.0;
                    s += 20.0 * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
                    v->data[(((size_t)t * nz + z) * ny + y) * nx + x] = (float)s;
                }
        }
}

static int run_device(const a4d_opts *o, const char *spec, const gpu_volume *in, gpu_volume *out)
{
    gpu_device dev;
    int rc = gpu_device_parse(spec, &dev);
    if (rc) {
        fprintf(stderr, "bench: device '%s': %s\n", spec, ldct_strerror(rc));
        return 1;
    }
    dev.threads = o->threads;
    gpu_adaptive4d_params p;
    gpu_adaptive4d_params_default(&p);
    p.backend = o->backend;
    p.mem_budget = o->mem_budget_mb << 20;
    gpu_a4d_stats st = {0};
    p.stats = &st;
    double *t = calloc((size_t)o->repeat, sizeof *t);
    if (!t)
        return 1;
    for (int i = 0; i < o->warmup + o->repeat && !rc; i++) {
        double t0 = gpu__bench_now_s();
        rc = gpu_adaptive4d(&p, in, out, &dev);
        if (i >= o->warmup)
            t[i - o->warmup] = gpu__bench_now_s() - t0;
    }
    if (rc) {
        fprintf(stderr, "bench: adaptive4d on %s failed: %s\n", spec, ldct_strerror(rc));
        free(t);
        return 1;
    }
    double med = gpu__bench_median(t, o->repeat);
    char name[16];
    gpu_device_name(&dev, name, sizeof name);
    static const char *const backends[] = {"auto", "fft", "spatial"};
    size_t n = gpu_volume_count(in);
    if (o->json)
        printf("{\"algo\":\"adaptive4d\",\"size\":\"%dx%dx%dx%d\",\"device\":\"%s\","
               "\"backend\":\"%s\",\"repeat\":%d,\"seconds_median\":%.4f,\"seconds_min\":%.4f,"
               "\"mvoxels_per_s\":%.4g,\"slabs\":%d,\"fft_slabs\":%d,\"t_slabs\":%d,"
               "\"mem_budget_mb\":%zu,\"sample\":%.6g}\n",
               o->size[0], o->size[1], o->size[2], o->size[3], name, backends[o->backend],
               o->repeat, med, t[0], n / med / 1e6, st.slabs, st.fft_slabs, st.t_slabs,
               o->mem_budget_mb, out->data[n / 2]);
    else
        printf("adaptive4d %dx%dx%dx%d on %s (%s): median %.3f s, min %.3f s, %.2f Mvoxel/s, %d "
               "slab(s)\n",
               o->size[0], o->size[1], o->size[2], o->size[3], name, backends[o->backend], med,
               t[0], n / med / 1e6, st.slabs);
    free(t);
    return 0;
}

static int parse_a4d(int argc, char **argv, a4d_opts *o)
{
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (!strcmp(a, "--json")) {
            o->json = 1;
            continue;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h"))
            return a4d_usage(stdout), 1; /* exit 0 */
        if (!v)
            bad = 1;
        else if (!strcmp(a, "--size"))
            bad = gpu__bench_dims(v, o->size, 4, 1);
        else if (!strcmp(a, "--device"))
            snprintf(o->devbuf, sizeof o->devbuf, "%s", v);
        else if (!strcmp(a, "--backend"))
            bad = (o->backend = parse_backend(v)) < 0;
        else if (!strcmp(a, "--repeat"))
            bad = gpu__bench_int(v, &o->repeat, 1, 1000);
        else if (!strcmp(a, "--warmup"))
            bad = gpu__bench_int(v, &o->warmup, 0, 100);
        else if (!strcmp(a, "--mem-budget"))
            o->mem_budget_mb = (size_t)atol(v), bad = atol(v) < 0;
        else if (!strcmp(a, "--threads"))
            bad = gpu__bench_int(v, &o->threads, 0, 1024);
        else
            bad = 1;
        if (bad) {
            fprintf(stderr, "bench: bad option or value '%s'\n", a);
            a4d_usage(stderr);
            return -1;
        }
        i++;
    }
    return 0;
}

int gpu__bench_adaptive4d_main(int argc, char **argv)
{
    a4d_opts o = {{64, 64, 32, 10}, 3, 1, 0, 0, GPU_A4D_AUTO, "auto", 0};
    int parsed = parse_a4d(argc, argv, &o);
    if (parsed)
        return parsed < 0 ? 2 : 0; /* 1: --help */
    gpu_volume in, out;
    int rc = gpu_volume_init(&in, o.size[0], o.size[1], o.size[2], o.size[3]);
    if (!rc && (rc = gpu_volume_init(&out, o.size[0], o.size[1], o.size[2], o.size[3])) != 0)
        gpu_volume_close(&in);
    if (rc) {
        fprintf(stderr, "bench: cannot allocate the volumes: %s\n", ldct_strerror(rc));
        return 1;
    }
    fill_4d(&in);
    int status = 0;
    char *save = NULL;
    for (char *d = strtok_r(o.devbuf, ",", &save); d; d = strtok_r(NULL, ",", &save))
        status |= run_device(&o, d, &in, &out);
    gpu_volume_close(&in);
    gpu_volume_close(&out);
    return status;
}
