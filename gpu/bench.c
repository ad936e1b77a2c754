/* Benchmarks of the compute engine; see bench.h. Main thread only. */
#include "gpu/bench.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/err.h"
#include "gpu/device.h"
#include "gpu/fdk.h"
#include "gpu/nlm.h"
#include "gpu/rabbitct.h"
#include "gpu/volume.h"
#if LDCT_WITH_CUDA
#include "gpu/cuda_util.h"
#endif

enum { MAX_LIST = 16 };

typedef struct opts {
    const char *algo;
    int sizes[MAX_LIST][3], nsizes;
    int srad[MAX_LIST], nsrad;
    int prad[MAX_LIST], nprad;
    const char *devs[MAX_LIST];
    int ndevs;
    char devbuf[256];
    int repeat, warmup, gaussian, json, threads;
    double h, strength, cutoff;
} opts;

static void usage(FILE *f)
{
    fprintf(f, "usage: bench nlm2d|nlm3d [--size XxYxZ[,..]] [--search-radius S[,..]]\n"
               "       [--patch-radius P[,..]] [--device cpu|gpu[:N][,..]] [--repeat N]\n"
               "       [--warmup N] [--h H] [--strength F] [--patch-weighting uniform|gaussian]\n"
               "       [--gaussian (= --patch-weighting gaussian)] [--distance-cutoff C]\n"
               "       [--threads N] [--json]\n"
               "  --distance-cutoff C: weight 0 above C h^2 (0..80, 0 = off; default 4)\n");
}

double gpu__bench_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double gpu__bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int gpu__bench_int(const char *s, int *v, int lo, int hi)
{
    char *end = NULL;
    long x = s ? strtol(s, &end, 10) : 0;
    if (!s || end == s || *end || x < lo || x > hi)
        return -1;
    *v = (int)x;
    return 0;
}

int gpu__bench_int_list(const char *s, int *v, int *n, int max, int lo, int hi)
{
    *n = 0;
    while (*s) {
        char *end = NULL;
        long x = strtol(s, &end, 10);
        if (end == s || x < lo || x > hi || *n >= max)
            return -1;
        v[(*n)++] = (int)x;
        if (*end == ',')
            end++;
        else if (*end)
            return -1;
        s = end;
    }
    return *n > 0 ? 0 : -1;
}

/* ndim sizes "AxB.." at *s (with short_ok fewer, the rest 1); advances *s. */
static int parse_dims(const char **s, int *d, int ndim, int short_ok)
{
    for (int a = 0; a < ndim; a++) {
        char *end = NULL;
        long x = strtol(*s, &end, 10);
        if (end == *s || x < 1 || x > 100000)
            return -1;
        d[a] = (int)x;
        *s = end;
        if (a == ndim - 1)
            break;
        if (**s == 'x' || **s == 'X') {
            (*s)++;
        } else if (short_ok) {
            for (int b = a + 1; b < ndim; b++)
                d[b] = 1;
            break;
        } else {
            return -1;
        }
    }
    return 0;
}

int gpu__bench_sizes(const char *s, int (*d)[3], int *n, int max, int short_ok)
{
    *n = 0;
    while (*s) {
        if (*n >= max || parse_dims(&s, d[*n], 3, short_ok))
            return -1;
        (*n)++;
        if (*s == ',')
            s++;
        else if (*s)
            return -1;
    }
    return *n > 0 ? 0 : -1;
}

int gpu__bench_dims(const char *s, int *d, int ndim, int short_ok)
{
    return ndim >= 1 && ndim <= 4 && parse_dims(&s, d, ndim, short_ok) == 0 && !*s ? 0 : -1;
}

static int parse_devs(const char *s, opts *o)
{
    snprintf(o->devbuf, sizeof o->devbuf, "%s", s);
    o->ndevs = 0;
    for (char *save = NULL, *t = strtok_r(o->devbuf, ",", &save); t;
         t = strtok_r(NULL, ",", &save)) {
        if (o->ndevs >= MAX_LIST)
            return -1;
        o->devs[o->ndevs++] = t;
    }
    return o->ndevs > 0 ? 0 : -1;
}

/* Structure (ramp, blob, step, fine stripes) plus Gaussian noise sigma 20,
 * generated per plane with its own generator (deterministic, parallel). */
static void fill_input(gpu_volume *v)
{
    int nx = v->nx, ny = v->ny, nz = v->nz;
#pragma omp parallel for schedule(static)
    for (int z = 0; z < nz; z++) {
        uint64_t st = 0x9E3779B97F4A7C15ull ^ ((uint64_t)z * 0xBF58476D1CE4E5B9ull + 1);
        for (int y = 0; y < ny; y++)
            for (int x = 0; x < nx; x++) {
                double cx = x - nx / 2.0, cy = y - ny / 2.0, cz = z - nz / 2.0;
                double s = 40.0 + 0.1 * x - 0.05 * y + 0.02 * z;
                if (cx * cx + cy * cy + cz * cz < (double)nx * nx / 9.0)
                    s += 300.0;
                if (x > nx * 2 / 3)
                    s -= 500.0;
                if ((y / 4) % 5 == 0 && x < nx / 4)
                    s += 80.0;
                double g = 0;
                for (int k = 0; k < 4; k++) { /* Irwin-Hall approximation of a Gaussian */
                    st ^= st << 13;
                    st ^= st >> 7;
                    st ^= st << 17;
                    g += (double)(st >> 11) / 9007199254740992.0;
                }
                v->data[((size_t)z * ny + y) * nx + x] = (float)(s + 20.0 * (g - 2.0) * sqrt(3.0));
            }
    }
}

static int run_one(const opts *o, int dim, const int *size, int S, int P, const char *devspec)
{
    gpu_device dev;
    int rc = gpu_device_parse(devspec, &dev);
    if (rc) {
        fprintf(stderr, "bench: device '%s': %s\n", devspec, ldct_strerror(rc));
        return rc == LDCT_EINPUT ? 2 : 1;
    }
    dev.threads = o->threads;
    gpu_volume in, out;
    if ((rc = gpu_volume_init(&in, size[0], size[1], size[2], 1)) != 0 ||
        (rc = gpu_volume_init(&out, size[0], size[1], size[2], 1)) != 0) {
        fprintf(stderr, "bench: cannot allocate %dx%dx%d: %s\n", size[0], size[1], size[2],
                ldct_strerror(rc));
        gpu_volume_close(&in);
        return 1;
    }
    fill_input(&in);
    gpu_nlm_params p;
    gpu_nlm_params_default(&p);
    p.search_radius = S;
    p.patch_radius = P;
    p.gaussian = o->gaussian;
    p.cutoff = (float)o->cutoff;
    p.strength = (float)o->strength;
    if (o->h > 0) {
        p.h_auto = 0;
        p.h = (float)o->h;
    }
    /* Resolve h once, so the timings measure the filter, not the estimate. */
    if ((rc = gpu_nlm_fix_h(&p, &in)) != 0) {
        fprintf(stderr, "bench: noise estimate: %s\n", ldct_strerror(rc));
        goto done;
    }
    const float h = p.h;
    gpu_nlm_stats st;
    p.stats = &st;
    int n = o->repeat;
    double *wall = calloc((size_t)n, sizeof *wall), *kern = calloc((size_t)n, sizeof *kern);
    int slabs = 0, chunks = 0, kcfg = 0;
    rc = wall && kern ? 0 : 1;
    for (int i = -o->warmup; i < n && rc == 0; i++) {
        memset(&st, 0, sizeof st);
        double t0 = gpu__bench_now_s();
        rc = dim == 3 ? gpu_nlm3d(&p, &in, &out, &dev) : gpu_nlm2d(&p, &in, &out, &dev);
        double t1 = gpu__bench_now_s();
        if (rc) {
            fprintf(stderr, "bench: %s on %s failed: %s\n", o->algo, devspec, ldct_strerror(rc));
            break;
        }
        if (i >= 0) {
            wall[i] = t1 - t0;
            kern[i] = st.kernel_ms * 1e-3;
            slabs = st.slabs;
            chunks = st.chunks;
            kcfg = st.kernel_cfg;
        }
    }
    if (rc == 0) {
        double wmin = wall[0];
        for (int i = 1; i < n; i++)
            wmin = wall[i] < wmin ? wall[i] : wmin;
        double wmed = gpu__bench_median(wall, n), kmed = gpu__bench_median(kern, n);
        double win = 2.0 * S + 1, offs = dim == 3 ? win * win * win : win * win;
        double vo = (double)gpu_volume_count(&in) * offs;
        char dname[32], gname[128] = "";
        gpu_device_name(&dev, dname, sizeof dname);
        /* The CPU reference's vector build (avx512, avx2, plain). */
        const char *isa = dev.kind == GPU_DEVICE_CUDA ? "" : gpu__nlm_ref_isa();
#if LDCT_WITH_CUDA
        if (dev.kind == GPU_DEVICE_CUDA)
            gpu__cuda_device_name(dev.index, gname, sizeof gname);
#endif
        /* A sample voxel keeps the optimiser honest and eyeballs the output. */
        double sample = out.data[gpu_volume_count(&out) / 2];
        if (o->json) {
            printf("{\"algo\":\"%s\",\"size\":\"%dx%dx%d\",\"device\":\"%s\",\"gpu_name\":\"%s\","
                   "\"cpu_isa\":\"%s\",\"search_radius\":%d,\"patch_radius\":%d,\"gaussian\":%d,"
                   "\"cutoff\":%g,"
                   "\"h\":%.4g,"
                   "\"repeat\":%d,\"seconds_median\":%.6f,\"seconds_min\":%.6f,"
                   "\"kernel_seconds_median\":%.6f,\"voxel_offsets_per_s\":%.4e,"
                   "\"kernel_voxel_offsets_per_s\":%.4e,\"slabs\":%d,\"chunks\":%d,"
                   "\"kernel_cfg\":%d,\"sample\":%.4f}\n",
                   o->algo, size[0], size[1], size[2], dname, gname, isa, S, P, o->gaussian,
                   (double)p.cutoff, (double)h, n, wmed, wmin, kmed, vo / wmed,
                   kmed > 0 ? vo / kmed : 0.0, slabs, chunks, kcfg, sample);
        } else {
            printf("%s %dx%dx%d S=%d P=%d %s%s%s: median %.4f s (min %.4f, kernels %.4f s), "
                   "%.3g voxel-offsets/s\n",
                   o->algo, size[0], size[1], size[2], S, P, dname, *isa ? " " : "", isa, wmed,
                   wmin, kmed, vo / wmed);
        }
        fflush(stdout);
    } else {
        rc = 1;
    }
    free(wall);
    free(kern);
done:
    gpu_volume_close(&in);
    gpu_volume_close(&out);
    return rc ? 1 : 0;
}

/* A distance cutoff: all of `s` a number in 0..GPU_NLM_MAX_CUTOFF (NaN
 * and garbage refused, unlike atof's silent 0); 0 on success. */
static int parse_cutoff(const char *s, double *out)
{
    char *end;
    double c = strtod(s, &end);
    if (end == s || *end != '\0' || !(c >= 0 && c <= GPU_NLM_MAX_CUTOFF))
        return 1;
    *out = c;
    return 0;
}

static int is_value_opt(const char *a)
{
    static const char *const names[] = {
        "--size",     "--search-radius",   "--patch-radius",   "--device",
        "--repeat",   "--warmup",          "--threads",        "--h",
        "--strength", "--patch-weighting", "--distance-cutoff"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(a, names[i]) == 0)
            return 1;
    return 0;
}

/* ---- fdk ------------------------------------------------------------------ */

typedef struct fdk_opts {
    int n[3], nproj, nu, nv, repeat, warmup, json, threads, filter;
    int cfg[4]; /* I, K, Bx, By; 0 = defaults */
    const char *dev;
} fdk_opts;

static void fdk_usage(FILE *f)
{
    fprintf(f, "usage: bench fdk [--size NxNxN --projections P --detector UxV | --rabbitct-size]\n"
               "       [--filter ram-lak|shepp-logan|cosine|hamming|hann] [--config I,K,BX,BY]\n"
               "       [--device cpu|gpu[:N]] [--repeat N] [--warmup N] [--threads N] [--json]\n");
}

static int parse_fdk_opt(fdk_opts *o, const char *a, const char *v)
{
    if (!v)
        return -1;
    int uv[2];
    if (strcmp(a, "--size") == 0)
        return gpu__bench_dims(v, o->n, 3, 0);
    if (strcmp(a, "--projections") == 0)
        return gpu__bench_int(v, &o->nproj, 2, 100000);
    if (strcmp(a, "--detector") == 0)
        return gpu__bench_dims(v, uv, 2, 0) ? -1 : (o->nu = uv[0], o->nv = uv[1], 0);
    if (strcmp(a, "--filter") == 0)
        return (o->filter = gpu_fdk_filter_parse(v)) >= 0 ? 0 : -1;
    if (strcmp(a, "--config") == 0)
        return sscanf(v, "%d,%d,%d,%d", &o->cfg[0], &o->cfg[1], &o->cfg[2], &o->cfg[3]) == 4 ? 0
                                                                                             : -1;
    if (strcmp(a, "--device") == 0)
        return (o->dev = v) != NULL ? 0 : -1;
    if (strcmp(a, "--repeat") == 0)
        return gpu__bench_int(v, &o->repeat, 1, 1000);
    if (strcmp(a, "--warmup") == 0)
        return gpu__bench_int(v, &o->warmup, 0, 100);
    if (strcmp(a, "--threads") == 0)
        return gpu__bench_int(v, &o->threads, 0, 1024);
    return -2;
}

static int parse_fdk(int argc, char **argv, fdk_opts *o)
{
    memset(o, 0, sizeof *o);
    o->n[0] = o->n[1] = o->n[2] = 128;
    o->nproj = 124, o->nu = 312, o->nv = 240;
    o->repeat = 5, o->warmup = 1, o->dev = "auto";
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--json") == 0) {
            o->json = 1;
            continue;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fdk_usage(stdout);
            return -1; /* fdk_main: exit 0 */
        }
        if (strcmp(a, "--rabbitct-size") == 0) {
            o->n[0] = o->n[1] = o->n[2] = 512;
            o->nproj = GPU_RABBITCT_NPROJ, o->nu = GPU_RABBITCT_NU, o->nv = GPU_RABBITCT_NV;
            continue;
        }
        int r = parse_fdk_opt(o, a, v);
        if (r) {
            fprintf(stderr, "bench: %s '%s'\n", r == -2 ? "unknown option" : "bad value for", a);
            fdk_usage(stderr);
            return 2;
        }
        i++;
    }
    return 0;
}

/* Median of n timings of one mode: full FDK (bp = 0) or backprojection only. */
static int fdk_time(const fdk_opts *o, int bp, const gpu_fdk_geometry *g, const gpu_volume *proj,
                    const gpu_fdk_volume *vol, gpu_volume *out, const gpu_device *dev, double *wall,
                    double *kern, double *filt, gpu_fdk_stats *last)
{
    gpu_fdk_params p;
    gpu_fdk_params_default(&p);
    p.filter = o->filter;
    p.bp_i = o->cfg[0], p.bp_k = o->cfg[1], p.bp_bx = o->cfg[2], p.bp_by = o->cfg[3];
    gpu_fdk_stats st;
    p.stats = &st;
    double w[1000] = {0}, k[1000] = {0}, f[1000] = {0};
    int cuda = dev->kind == GPU_DEVICE_CUDA;
    for (int i = -o->warmup; i < o->repeat; i++) {
        memset(&st, 0, sizeof st);
        double t0 = gpu__bench_now_s();
        int rc = bp ? (cuda ? gpu_fdk_backproject_cuda(&p, g, proj, vol, out, dev)
                            : gpu_fdk_backproject_ref(&p, g, proj, vol, out, dev))
                    : gpu_fdk(&p, g, proj, vol, out, dev);
        double t1 = gpu__bench_now_s();
        if (rc) {
            fprintf(stderr, "bench: fdk%s failed: %s\n", bp ? " backprojection" : "",
                    ldct_strerror(rc));
            return 1;
        }
        if (i >= 0) {
            w[i] = t1 - t0;
            k[i] = cuda ? st.backproject_ms * 1e-3 : w[i];
            f[i] = st.filter_ms * 1e-3;
        }
        *last = st;
    }
    *wall = gpu__bench_median(w, o->repeat), *kern = gpu__bench_median(k, o->repeat),
    *filt = gpu__bench_median(f, o->repeat);
    return 0;
}

/* "config" is what ran: the options' or, left at 0, the tuner's cache or the
 * built-in defaults (as reported by the CUDA run; 0,0,0,0 on the CPU). */
static void fdk_print(const fdk_opts *o, const gpu_device *dev, const double *t,
                      const gpu_fdk_stats *last, const gpu_volume *out)
{
    const int *c = last->config, slabs = last->slabs;
    char dname[32], gname[128] = "";
    gpu_device_name(dev, dname, sizeof dname);
#if LDCT_WITH_CUDA
    if (dev->kind == GPU_DEVICE_CUDA)
        gpu__cuda_device_name(dev->index, gname, sizeof gname);
#endif
    double ups = (double)o->n[0] * o->n[1] * o->n[2] * o->nproj;
    double sample = out->data[gpu_volume_count(out) / 2];
    if (o->json)
        printf("{\"algo\":\"fdk\",\"size\":\"%dx%dx%d\",\"projections\":%d,\"detector\":\"%dx%d\","
               "\"device\":\"%s\",\"gpu_name\":\"%s\",\"filter\":\"%s\",\"config\":\"%d,%d,%d,%d\","
               "\"repeat\":%d,\"seconds_median\":%.6f,\"backproject_seconds_median\":%.6f,"
               "\"backproject_kernel_seconds_median\":%.6f,\"filter_kernel_seconds_median\":%.6f,"
               "\"gups\":%.2f,\"fdk_gups\":%.2f,\"slabs\":%d,\"sample\":%.6g}\n",
               o->n[0], o->n[1], o->n[2], o->nproj, o->nu, o->nv, dname, gname,
               gpu_fdk_filter_name(o->filter), c[0], c[1], c[2], c[3], o->repeat, t[0], t[1], t[2],
               t[3], ups / t[2] * 1e-9, ups / t[0] * 1e-9, slabs, sample);
    else
        printf("fdk %dx%dx%d from %d x %dx%d on %s: FDK %.4f s, backprojection %.4f s (kernels "
               "%.4f s, %.1f GUPS)\n",
               o->n[0], o->n[1], o->n[2], o->nproj, o->nu, o->nv, dname, t[0], t[1], t[2],
               ups / t[2] * 1e-9);
    fflush(stdout);
}

/* Synthetic data in RabbitCT geometry (the analytic phantom), then timings
 * of the full FDK and of the backprojection alone. */
static int fdk_main(int argc, char **argv)
{
    fdk_opts o;
    int rc = parse_fdk(argc, argv, &o);
    gpu_device dev;
    if (rc)
        return rc < 0 ? 0 : rc; /* -1: --help */
    if ((rc = gpu_device_parse(o.dev, &dev)) != 0) {
        fprintf(stderr, "bench: device '%s': %s\n", o.dev, ldct_strerror(rc));
        return rc == LDCT_EINPUT ? 2 : 1;
    }
    dev.threads = o.threads;
    gpu_fdk_geometry g;
    gpu_fdk_volume vol;
    gpu_volume proj = {0}, out = {0};
    double t[4] = {0}, bpw = 0, bpf = 0, fk = 0;
    gpu_fdk_stats last = {0};
    gpu_fdk_volume_centered(&vol, o.n[0], o.n[1], o.n[2], 256.0 / o.n[0], 256.0 / o.n[1],
                            256.0 / o.n[2]);
    rc = gpu_rabbitct_geometry(&g, o.nproj, o.nu, o.nv);
    if (!rc)
        rc = gpu_volume_init(&proj, o.nu, o.nv, o.nproj, 1);
    if (!rc)
        rc = gpu_volume_init(&out, o.n[0], o.n[1], o.n[2], 1);
    if (!rc)
        rc = gpu_rabbitct_synthesize(&g, &proj);
    if (!rc)
        rc = fdk_time(&o, 1, &g, &proj, &vol, &out, &dev, &t[1], &t[2], &bpf, &last);
    if (!rc)
        rc = fdk_time(&o, 0, &g, &proj, &vol, &out, &dev, &t[0], &bpw, &fk, &last);
    if (!rc) {
        t[3] = fk;
        fdk_print(&o, &dev, t, &last, &out);
    } else if (rc < 0) {
        fprintf(stderr, "bench: fdk setup: %s\n", ldct_strerror(rc));
    }
    gpu_volume_close(&proj);
    gpu_volume_close(&out);
    gpu_fdk_geometry_close(&g);
    return rc ? 1 : 0;
}

/* `ldct bench`, `ldct bench --help`: the algorithms, then nlm's options. */
static int overview(FILE *f, int rc)
{
    fprintf(f, "usage: ldct bench nlm2d|nlm3d|anlm|adaptive4d|fdk [OPTIONS] [--json]\n"
               "  one line (JSON with --json) per configuration; options per algorithm:\n"
               "  ldct bench ALGO --help\n");
    usage(f);
    return rc;
}

int gpu_bench_main(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")))
        return overview(stdout, 0);
    if (argc >= 2 && strcmp(argv[1], "fdk") == 0)
        return fdk_main(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "anlm") == 0)
        return gpu__bench_anlm_main(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "adaptive4d") == 0)
        return gpu__bench_adaptive4d_main(argc, argv);
    if (argc < 2 || (strcmp(argv[1], "nlm2d") != 0 && strcmp(argv[1], "nlm3d") != 0)) {
        fprintf(stderr, "bench: unknown or missing algorithm%s%s\n", argc >= 2 ? ": " : "",
                argc >= 2 ? argv[1] : "");
        return overview(stderr, 2);
    }
    opts o;
    memset(&o, 0, sizeof o);
    o.algo = argv[1];
    o.sizes[0][0] = 256, o.sizes[0][1] = 256, o.sizes[0][2] = 64, o.nsizes = 1;
    o.srad[0] = 5, o.nsrad = 1;
    o.prad[0] = 2, o.nprad = 1;
    o.devs[0] = "auto", o.ndevs = 1;
    o.repeat = 5;
    o.warmup = 1;
    o.strength = 1.0;
    o.cutoff = GPU_NLM_DEFAULT_CUTOFF;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0, takes = 1;
        if (strcmp(a, "--json") == 0) {
            o.json = 1, takes = 0;
        } else if (strcmp(a, "--gaussian") == 0) {
            o.gaussian = 1, takes = 0;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (!is_value_opt(a)) {
            fprintf(stderr, "bench: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        } else if (!v) {
            bad = 1;
        } else if (strcmp(a, "--size") == 0) {
            bad = gpu__bench_sizes(v, o.sizes, &o.nsizes, MAX_LIST, 1);
        } else if (strcmp(a, "--search-radius") == 0) {
            bad = gpu__bench_int_list(v, o.srad, &o.nsrad, MAX_LIST, 1, GPU_NLM_MAX_SEARCH);
        } else if (strcmp(a, "--patch-radius") == 0) {
            bad = gpu__bench_int_list(v, o.prad, &o.nprad, MAX_LIST, 0, GPU_NLM_MAX_PATCH);
        } else if (strcmp(a, "--device") == 0) {
            bad = parse_devs(v, &o);
        } else if (strcmp(a, "--repeat") == 0) {
            bad = gpu__bench_int(v, &o.repeat, 1, 1000);
        } else if (strcmp(a, "--warmup") == 0) {
            bad = gpu__bench_int(v, &o.warmup, 0, 100);
        } else if (strcmp(a, "--threads") == 0) {
            bad = gpu__bench_int(v, &o.threads, 0, 1024);
        } else if (strcmp(a, "--h") == 0) {
            o.h = atof(v), bad = !(o.h > 0);
        } else if (strcmp(a, "--strength") == 0) {
            o.strength = atof(v), bad = !(o.strength > 0);
        } else if (strcmp(a, "--patch-weighting") == 0) {
            o.gaussian = gpu_nlm_weighting_parse(v), bad = o.gaussian < 0;
        } else if (strcmp(a, "--distance-cutoff") == 0) {
            bad = parse_cutoff(v, &o.cutoff);
        } else {
            fprintf(stderr, "bench: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
        if (bad) {
            fprintf(stderr, "bench: bad or missing value for %s\n", a);
            usage(stderr);
            return 2;
        }
        i += takes;
    }
    int dim = strcmp(o.algo, "nlm3d") == 0 ? 3 : 2;
    int status = 0;
    for (int a = 0; a < o.nsizes; a++)
        for (int b = 0; b < o.nsrad; b++)
            for (int c = 0; c < o.nprad; c++)
                for (int d = 0; d < o.ndevs; d++) {
                    int r = run_one(&o, dim, o.sizes[a], o.srad[b], o.prad[c], o.devs[d]);
                    if (r == 2)
                        return 2;
                    if (r)
                        status = 1;
                }
    return status;
}
