/* Genetic-algorithm tuner of the FDK backprojector and the cache of tuned
 * configurations; see fdk_tune.h. */
#include "gpu/fdk_tune.h"

#include "common/err.h"
#include "common/fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

enum { GENES = 14, MEMO_MAX = 1 << GENES };

void gpu_fdk_ga_opts_default(gpu_fdk_ga_opts *o)
{
    memset(o, 0, sizeof *o);
    o->population = 16;
    o->generations = 12;
    o->patience = 4;
    o->pc = 0.8;
    o->pm = 0.05;
    o->max_threads = 1024;
    o->max_i = 64;
}

/* ---- genome coding ------------------------------------------------------ */

static int ilog2(int v)
{
    int l = 0;
    while (v > 1) {
        v >>= 1;
        l++;
    }
    return l;
}

/* Each field is Gray-coded, so neighbouring values differ in one gene and
 * mutation moves in small steps (plain binary has cliffs like 31 -> 32). */
static unsigned gray(unsigned v)
{
    return v ^ (v >> 1);
}

static unsigned ungray(unsigned g)
{
    for (unsigned s = 1; s < 16; s <<= 1)
        g ^= g >> s;
    return g;
}

static gpu_fdk_cfg decode(unsigned g)
{
    gpu_fdk_cfg c = {(int)ungray(g & 63) + 1, 1 << ungray((g >> 6) & 3), 4 << ungray((g >> 8) & 7),
                     1 << ungray((g >> 11) & 7)};
    return c;
}

static unsigned encode(const gpu_fdk_cfg *c)
{
    return gray((unsigned)(c->i - 1)) | gray((unsigned)ilog2(c->k)) << 6 |
           gray((unsigned)ilog2(c->bx / 4)) << 8 | gray((unsigned)ilog2(c->by)) << 11;
}

void gpu_fdk_cfg_repair(gpu_fdk_cfg *c, int max_threads, int max_i)
{
    if (max_i < 1)
        max_i = 1;
    if (c->i > max_i)
        c->i = max_i;
    if (c->i < 1)
        c->i = 1;
    /* Out-of-range values (a damaged cache line) first, so the products
     * below stay small. */
    c->bx = c->bx < 1 ? 1 : c->bx > 1024 ? 1024 : c->bx;
    c->by = c->by < 1 ? 1 : c->by > 1024 ? 1024 : c->by;
    while (c->bx * c->by > max_threads) {
        if (c->by > 1)
            c->by /= 2;
        else
            c->bx /= 2;
    }
    /* Bx and By are powers of two: the product is a multiple of 32 iff >= 32. */
    while (c->bx * c->by < 32) {
        if (c->bx < 512)
            c->bx *= 2;
        else
            c->by *= 2;
    }
}

/* ---- the search ---------------------------------------------------------- */

typedef struct ga {
    const gpu_fdk_ga_opts *o;
    gpu_fdk_eval_fn eval;
    void *ctx;
    double *memo; /* ms per genome; 0 = not measured, < 0 = cannot run */
    uint64_t rng;
    int evaluations, last_error;
} ga;

static double urand(ga *s)
{
    s->rng ^= s->rng << 13;
    s->rng ^= s->rng >> 7;
    s->rng ^= s->rng << 17;
    return (double)(s->rng >> 11) / 9007199254740992.0;
}

static unsigned repaired(const ga *s, unsigned g)
{
    gpu_fdk_cfg c = decode(g);
    gpu_fdk_cfg_repair(&c, s->o->max_threads, s->o->max_i < 64 ? s->o->max_i : 64);
    return encode(&c);
}

/* Fitness 1 / ms (0 for a configuration that cannot run). */
static double fitness(ga *s, unsigned g)
{
    if (s->memo[g] == 0) {
        gpu_fdk_cfg c = decode(g);
        double ms = 0;
        int rc = s->eval(s->ctx, &c, &ms);
        s->evaluations++;
        if (rc || !(ms > 0)) {
            s->last_error = rc ? rc : LDCT_EINPUT;
            ms = -1;
        }
        s->memo[g] = ms;
    }
    return s->memo[g] > 0 ? 1.0 / s->memo[g] : 0;
}

static int roulette(ga *s, const double *fit, int n, double total)
{
    if (!(total > 0))
        return (int)(urand(s) * n) % n;
    double r = urand(s) * total, acc = 0;
    for (int i = 0; i < n; i++) {
        acc += fit[i];
        if (r < acc)
            return i;
    }
    return n - 1;
}

static unsigned mutate(ga *s, unsigned g)
{
    for (int b = 0; b < GENES; b++)
        if (urand(s) < s->o->pm)
            g ^= 1u << b;
    return g;
}

/* The next generation from pop/fit: the best kept, the rest bred. */
static void breed(ga *s, const unsigned *pop, const double *fit, int best, unsigned *next)
{
    const int n = s->o->population;
    double total = 0, w[1024];
    /* Roulette weights (fit / best fit)^8: times within a few tens of
     * percent would otherwise be drawn almost uniformly. */
    for (int i = 0; i < n; i++) {
        w[i] = fit[best] > 0 ? pow(fit[i] / fit[best], 8) : 0;
        total += w[i];
    }
    fit = w;
    next[0] = pop[best];
    for (int i = 1; i < n; i += 2) {
        unsigned a = pop[roulette(s, fit, n, total)], b = pop[roulette(s, fit, n, total)];
        if (urand(s) < s->o->pc) {
            const int cut = 1 + (int)(urand(s) * (GENES - 1));
            const unsigned lo = (1u << cut) - 1;
            const unsigned ca = (a & lo) | (b & ~lo), cb = (b & lo) | (a & ~lo);
            a = ca, b = cb;
        }
        next[i] = repaired(s, mutate(s, a) & (MEMO_MAX - 1));
        if (i + 1 < n)
            next[i + 1] = repaired(s, mutate(s, b) & (MEMO_MAX - 1));
    }
}

static int evaluate(ga *s, const unsigned *pop, double *fit)
{
    int best = 0;
    for (int i = 0; i < s->o->population; i++) {
        fit[i] = fitness(s, pop[i]);
        if (fit[i] > fit[best])
            best = i;
    }
    return best;
}

static int check_opts(const gpu_fdk_ga_opts *o)
{
    return o->population >= 2 && o->population <= 1024 && o->generations >= 1 && o->patience >= 1 &&
                   o->pc >= 0 && o->pc <= 1 && o->pm >= 0 && o->pm <= 1 && o->max_threads >= 32 &&
                   o->max_i >= 1
               ? 0
               : LDCT_EINPUT;
}

static void first_generation(ga *s, unsigned *pop)
{
    const gpu_fdk_cfg def = {32, 4, 32, 8}; /* the built-in default joins the race */
    pop[0] = repaired(s, encode(&def));
    for (int i = 1; i < s->o->population; i++)
        pop[i] = repaired(s, (unsigned)(urand(s) * MEMO_MAX) & (MEMO_MAX - 1));
}

static int search(ga *s, unsigned *pop, unsigned *next, double *fit, gpu_fdk_ga_result *r)
{
    double best_fit = 0;
    int stale = 0;
    first_generation(s, pop);
    for (int gen = 0; gen < s->o->generations && stale < s->o->patience; gen++) {
        const int best = evaluate(s, pop, fit);
        if (fit[best] > best_fit) {
            best_fit = fit[best];
            r->best = decode(pop[best]);
            r->best_ms = 1.0 / best_fit;
            stale = 0;
        } else {
            stale++;
        }
        r->generations = gen + 1;
        r->evaluations = s->evaluations;
        if (s->o->progress && best_fit > 0)
            s->o->progress(s->o->progress_ctx, gen + 1, &r->best, r->best_ms, s->evaluations);
        breed(s, pop, fit, best, next);
        memcpy(pop, next, sizeof *pop * (size_t)s->o->population);
    }
    return best_fit > 0 ? 0 : (s->last_error ? s->last_error : LDCT_EINPUT);
}

int gpu_fdk_ga_run(const gpu_fdk_ga_opts *o, gpu_fdk_eval_fn eval, void *ctx, gpu_fdk_ga_result *r)
{
    memset(r, 0, sizeof *r);
    if (!eval || check_opts(o))
        return LDCT_EINPUT;
    ga s = {
        o, eval, ctx, calloc(MEMO_MAX, sizeof(double)), o->seed ? o->seed : 0x9E3779B97F4A7C15ull,
        0, 0};
    unsigned *pop = malloc(sizeof *pop * (size_t)o->population);
    unsigned *next = malloc(sizeof *next * (size_t)o->population);
    double *fit = malloc(sizeof *fit * (size_t)o->population);
    int rc = -ENOMEM;
    if (s.memo && pop && next && fit)
        rc = search(&s, pop, next, fit, r);
    free(s.memo);
    free(pop);
    free(next);
    free(fit);
    return rc;
}

/* ---- cache --------------------------------------------------------------- */

static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static char cache_path[4096];

void gpu_fdk_tune_cache_set(const char *path)
{
    pthread_mutex_lock(&cache_mu);
    snprintf(cache_path, sizeof cache_path, "%s", path ? path : "");
    pthread_mutex_unlock(&cache_mu);
}

typedef struct entry {
    char gpu[256];
    int nproj, nu, nv, nx, ny, nz;
    gpu_fdk_cfg c;
    double ms;
} entry;

static int parse_entry(const char *line, entry *e)
{
    const char *tab = strchr(line, '\t');
    if (!tab || (size_t)(tab - line) >= sizeof e->gpu)
        return -1;
    memcpy(e->gpu, line, (size_t)(tab - line));
    e->gpu[tab - line] = '\0';
    if (sscanf(tab + 1, "%dx%dx%d\t%dx%dx%d\t%d,%d,%d,%d\t%lf", &e->nproj, &e->nu, &e->nv, &e->nx,
               &e->ny, &e->nz, &e->c.i, &e->c.k, &e->c.bx, &e->c.by, &e->ms) != 11)
        return -1;
    /* A line no tuner wrote (damaged or edited) is ignored, not repaired. */
    const int sizes_ok =
        e->nproj > 0 && e->nu > 0 && e->nv > 0 && e->nx > 0 && e->ny > 0 && e->nz > 0;
    const int cfg_ok = e->c.i >= 1 && e->c.i <= 1024 && e->c.bx >= 1 && e->c.bx <= 1024 &&
                       e->c.by >= 1 && e->c.by <= 1024 && e->c.bx * e->c.by <= 1024;
    return sizes_ok && cfg_ok ? 0 : -1;
}

static double size_distance(const entry *e, int nproj, int nu, int nv, int nx, int ny, int nz)
{
    const double a = log((double)e->nproj * e->nu * e->nv) - log((double)nproj * nu * nv);
    const double b = log((double)e->nx * e->ny * e->nz) - log((double)nx * ny * nz);
    return fabs(a) + fabs(b);
}

int gpu_fdk_tune_cache_lookup(const char *path, const char *gpu, int nproj, int nu, int nv, int nx,
                              int ny, int nz, gpu_fdk_cfg *c)
{
    char own[4096];
    if (!path) {
        pthread_mutex_lock(&cache_mu);
        snprintf(own, sizeof own, "%s", cache_path);
        pthread_mutex_unlock(&cache_mu);
        path = own;
    }
    FILE *f = path[0] ? fopen(path, "r") : NULL;
    if (!f)
        return LDCT_ENOTFOUND;
    char line[512];
    double best = INFINITY;
    int rc = LDCT_ENOTFOUND;
    entry e;
    while (fgets(line, sizeof line, f)) {
        if (parse_entry(line, &e) || strcmp(e.gpu, gpu) != 0)
            continue;
        const double d = size_distance(&e, nproj, nu, nv, nx, ny, nz);
        if (d < best) {
            best = d;
            *c = e.c;
            rc = d == 0 ? 0 : 1;
        }
    }
    fclose(f);
    return rc;
}

static int write_all(int fd, const char *buf, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, buf, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        buf += w;
        n -= (size_t)w;
    }
    return 0;
}

/* The file's lines except the one of key `keep_out`, then the new line. */
static char *cache_text(const char *path, const char *key, const char *newline)
{
    size_t cap = strlen(newline) + 1, len = 0;
    char *text = malloc(cap), line[512];
    if (!text)
        return NULL;
    text[0] = '\0';
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, key, strlen(key)) == 0)
            continue;
        size_t n = strlen(line);
        char *t = realloc(text, cap + n);
        if (!t) {
            free(text);
            fclose(f);
            return NULL;
        }
        text = t;
        cap += n;
        memcpy(text + len, line, n + 1);
        len += n;
    }
    if (f)
        fclose(f);
    memcpy(text + len, newline, strlen(newline) + 1);
    return text;
}

/* Writes text to a fresh temp file beside path and renames it over path. */
static int replace_file(const char *path, const char *text)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.XXXXXX", path);
    int fd = mkstemp(tmp), rc = 0;
    if (fd < 0)
        return -errno;
    rc = fchmod(fd, 0644) != 0 ? -errno : 0;
    if (!rc)
        rc = write_all(fd, text, strlen(text));
    if (!rc && fsync(fd) != 0)
        rc = -errno;
    if (close(fd) != 0 && !rc)
        rc = -errno;
    if (!rc)
        rc = fs_rename_durable(tmp, path);
    if (rc)
        unlink(tmp);
    return rc;
}

int gpu_fdk_tune_cache_store(const char *path, const char *gpu, int nproj, int nu, int nv, int nx,
                             int ny, int nz, const gpu_fdk_cfg *c, double ms)
{
    char key[512], newline[640], lock[4200];
    snprintf(key, sizeof key, "%s\t%dx%dx%d\t%dx%dx%d\t", gpu, nproj, nu, nv, nx, ny, nz);
    snprintf(newline, sizeof newline, "%s%d,%d,%d,%d\t%.3f\n", key, c->i, c->k, c->bx, c->by, ms);
    /* Tuners on several GPUs of one node may store at once: the read,
     * write and rename happen under an exclusive lock. */
    snprintf(lock, sizeof lock, "%s.lock", path);
    int lfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lfd < 0)
        return -errno;
    int rc = flock(lfd, LOCK_EX) != 0 ? -errno : 0;
    char *text = rc ? NULL : cache_text(path, key, newline);
    if (!rc && !text)
        rc = -ENOMEM;
    if (!rc)
        rc = replace_file(path, text);
    free(text);
    close(lfd); /* releases the lock */
    return rc;
}
