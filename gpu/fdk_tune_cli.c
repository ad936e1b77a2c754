/* `tune fdk`: runs the genetic-algorithm tuner (fdk_tune.h) on synthetic
 * data in RabbitCT geometry at the requested size, measures the tuned and
 * the default configuration side by side, stores the winner in the cache
 * and prints a report (one JSON line with --json). Progress goes to stderr.
 * Main thread only.
 */
#include "gpu/fdk_tune.h"

#include "common/err.h"
#include "gpu/bench.h"
#include "gpu/cuda_util.h"
#include "gpu/device.h"
#include "gpu/rabbitct.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct tune_opts {
    int n[3], nproj, nu, nv, repeat, json;
    const char *dev, *cache;
    gpu_fdk_ga_opts ga;
} tune_opts;

typedef struct tune_ctx {
    const gpu_fdk_geometry *g;
    const gpu_volume *proj;
    const gpu_fdk_volume *vol;
    gpu_volume *out;
    const gpu_device *dev;
} tune_ctx;

static void usage(FILE *f)
{
    fprintf(f, "usage: tune fdk [--size NxNxN --projections P --detector UxV | --rabbitct-size]\n"
               "       [--device gpu[:N]] [--cache FILE] [--population N] [--generations N]\n"
               "       [--patience N] [--seed S] [--repeat N] [--json]\n");
}

static int parse_opt(tune_opts *o, const char *a, const char *v)
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
    if (strcmp(a, "--device") == 0)
        return (o->dev = v) != NULL ? 0 : -1;
    if (strcmp(a, "--cache") == 0)
        return (o->cache = v) != NULL ? 0 : -1;
    if (strcmp(a, "--population") == 0)
        return gpu__bench_int(v, &o->ga.population, 2, 100000);
    if (strcmp(a, "--generations") == 0)
        return gpu__bench_int(v, &o->ga.generations, 1, 100000);
    if (strcmp(a, "--patience") == 0)
        return gpu__bench_int(v, &o->ga.patience, 1, 100000);
    if (strcmp(a, "--seed") == 0)
        return (o->ga.seed = strtoull(v, NULL, 0)) != 0 ? 0 : -1;
    if (strcmp(a, "--repeat") == 0)
        return gpu__bench_int(v, &o->repeat, 1, 99);
    return -2;
}

static int parse(int argc, char **argv, tune_opts *o, const char *default_cache)
{
    memset(o, 0, sizeof *o);
    gpu_fdk_ga_opts_default(&o->ga);
    o->n[0] = o->n[1] = o->n[2] = 512;
    o->nproj = GPU_RABBITCT_NPROJ, o->nu = GPU_RABBITCT_NU, o->nv = GPU_RABBITCT_NV;
    o->repeat = 3, o->dev = "gpu", o->cache = default_cache;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--json") == 0 || strcmp(a, "--rabbitct-size") == 0) {
            o->json |= a[2] == 'j';
            continue;
        }
        int r = parse_opt(o, a, v);
        if (r) {
            fprintf(stderr, "tune: %s '%s'\n", r == -2 ? "unknown option" : "bad value for", a);
            usage(stderr);
            return 2;
        }
        i++;
    }
    o->ga.max_i = o->nproj < 64 ? o->nproj : 64;
    return 0;
}

static int eval_cfg(void *ctx, const gpu_fdk_cfg *c, double *ms)
{
    const tune_ctx *t = ctx;
    gpu_fdk_params p;
    gpu_fdk_stats st = {0};
    gpu_fdk_params_default(&p);
    p.bp_i = c->i, p.bp_k = c->k, p.bp_bx = c->bx, p.bp_by = c->by;
    p.stats = &st;
    int rc = gpu_fdk_backproject_cuda(&p, t->g, t->proj, t->vol, t->out, t->dev);
    *ms = st.backproject_ms;
    return rc;
}

/* Median of `repeat` measurements of c. */
static int measure(const tune_ctx *t, const gpu_fdk_cfg *c, int repeat, double *ms)
{
    double v[99] = {0};
    for (int i = 0; i < repeat; i++) {
        int rc = eval_cfg((void *)t, c, &v[i]);
        if (rc)
            return rc;
    }
    *ms = gpu__bench_median(v, repeat);
    return 0;
}

static void progress(void *ctx, int gen, const gpu_fdk_cfg *b, double ms, int evals)
{
    (void)ctx;
    fprintf(stderr, "tune: generation %d: best I=%d K=%d %dx%d %.2f ms (%d configurations)\n", gen,
            b->i, b->k, b->bx, b->by, ms, evals);
}

static void report(const tune_opts *o, const char *gpu, const gpu_fdk_cfg *def, double def_ms,
                   const gpu_fdk_cfg *best, double best_ms, const gpu_fdk_ga_result *r, double secs,
                   int stored)
{
    if (o->json)
        printf("{\"algo\":\"fdk\",\"mode\":\"tune\",\"gpu_name\":\"%s\",\"size\":\"%dx%dx%d\","
               "\"projections\":%d,\"detector\":\"%dx%d\",\"default_config\":\"%d,%d,%d,%d\","
               "\"default_backproject_ms\":%.3f,\"tuned_config\":\"%d,%d,%d,%d\","
               "\"tuned_backproject_ms\":%.3f,\"speedup\":%.4f,\"evaluations\":%d,"
               "\"generations\":%d,\"tuning_seconds\":%.1f,\"cache\":\"%s\"}\n",
               gpu, o->n[0], o->n[1], o->n[2], o->nproj, o->nu, o->nv, def->i, def->k, def->bx,
               def->by, def_ms, best->i, best->k, best->bx, best->by, best_ms, def_ms / best_ms,
               r->evaluations, r->generations, secs, stored ? o->cache : "");
    else
        printf("fdk on %s, %dx%dx%d from %d x %dx%d: default %d,%d,%d,%d %.2f ms, tuned "
               "%d,%d,%d,%d %.2f ms (%.3fx); %d configurations in %d generations, %.1f s%s%s\n",
               gpu, o->n[0], o->n[1], o->n[2], o->nproj, o->nu, o->nv, def->i, def->k, def->bx,
               def->by, def_ms, best->i, best->k, best->bx, best->by, best_ms, def_ms / best_ms,
               r->evaluations, r->generations, secs, stored ? "; cached in " : "",
               stored ? o->cache : "");
    fflush(stdout);
}

/* Tunes, then measures default and tuned side by side and caches the faster. */
static int tune(const tune_opts *o, const tune_ctx *t, const char *gpu)
{
    const gpu_fdk_cfg def = {32, 4, 32, 8};
    gpu_fdk_cfg def_r = def;
    gpu_fdk_cfg_repair(&def_r, o->ga.max_threads, o->ga.max_i);
    gpu_fdk_ga_opts ga = o->ga;
    gpu_fdk_ga_result r;
    ga.progress = progress;
    double warm, def_ms, best_ms, t0 = gpu__bench_now_s();
    int rc = eval_cfg((void *)t, &def_r, &warm); /* warm-up: context, allocations */
    if (!rc)
        rc = gpu_fdk_ga_run(&ga, eval_cfg, (void *)t, &r);
    const double secs = gpu__bench_now_s() - t0;
    if (!rc)
        rc = measure(t, &def_r, o->repeat, &def_ms);
    if (!rc)
        rc = measure(t, &r.best, o->repeat, &best_ms);
    if (rc) {
        fprintf(stderr, "tune: fdk failed: %s\n", ldct_strerror(rc));
        return 1;
    }
    const gpu_fdk_cfg *win = best_ms < def_ms ? &r.best : &def_r;
    int stored = 0;
    if (o->cache && o->cache[0]) {
        rc = gpu_fdk_tune_cache_store(o->cache, gpu, o->nproj, o->nu, o->nv, o->n[0], o->n[1],
                                      o->n[2], win, best_ms < def_ms ? best_ms : def_ms);
        if (rc)
            fprintf(stderr, "tune: cannot write %s: %s\n", o->cache, ldct_strerror(rc));
        stored = rc == 0;
    }
    /* What is reported as tuned is what was stored: the GA's best, or the
     * default when it measured faster side by side. */
    report(o, gpu, &def_r, def_ms, win, win == &r.best ? best_ms : def_ms, &r, secs, stored);
    return rc ? 1 : 0;
}

static int with_data(const tune_opts *o, const gpu_device *dev, const char *gpu)
{
    gpu_fdk_geometry g;
    gpu_fdk_volume vol;
    gpu_volume proj = {0}, out = {0};
    gpu_fdk_volume_centered(&vol, o->n[0], o->n[1], o->n[2], 256.0 / o->n[0], 256.0 / o->n[1],
                            256.0 / o->n[2]);
    fprintf(stderr, "tune: synthesizing %d projections of %dx%d\n", o->nproj, o->nu, o->nv);
    int rc = gpu_rabbitct_geometry(&g, o->nproj, o->nu, o->nv);
    if (!rc)
        rc = gpu_volume_init(&proj, o->nu, o->nv, o->nproj, 1);
    if (!rc)
        rc = gpu_volume_init(&out, o->n[0], o->n[1], o->n[2], 1);
    if (!rc)
        rc = gpu_rabbitct_synthesize(&g, &proj);
    if (rc)
        fprintf(stderr, "tune: setup: %s\n", ldct_strerror(rc));
    else {
        tune_ctx t = {&g, &proj, &vol, &out, dev};
        rc = tune(o, &t, gpu);
    }
    gpu_volume_close(&proj);
    gpu_volume_close(&out);
    gpu_fdk_geometry_close(&g);
    return rc ? 1 : 0;
}

int gpu_fdk_tune_main(int argc, char **argv, const char *default_cache)
{
    tune_opts o;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
            return usage(stdout), 0;
    if (argc < 2 || strcmp(argv[1], "fdk") != 0) {
        usage(stderr);
        return 2;
    }
    int rc = parse(argc, argv, &o, default_cache);
    gpu_device dev;
    if (rc)
        return rc;
    if ((rc = gpu_device_parse(o.dev, &dev)) != 0 || dev.kind != GPU_DEVICE_CUDA) {
        fprintf(stderr, "tune: device '%s': %s\n", o.dev,
                rc ? ldct_strerror(rc) : "the tuner needs a GPU");
        return rc == LDCT_EINPUT ? 2 : 1;
    }
    char gpu[128] = "unknown";
#if LDCT_WITH_CUDA
    gpu__cuda_device_name(dev.index, gpu, sizeof gpu);
#endif
    return with_data(&o, &dev, gpu);
}
