/* The genetic-algorithm tuner of the FDK backprojector (seed 001, the
 * patent's tuner) and the cache of tuned configurations.
 *
 * An individual is a configuration (I projections per launch, K voxels per
 * thread, block Bx x By) coded as 14 binary genes: I - 1 in 6 bits (1..64),
 * log2 K in 2 (1..8), log2(Bx / 4) in 3 (4..512), log2 By in 3 (1..128).
 * Invalid individuals (Bx * By above the thread limit or not a multiple of
 * 32, I above the projections) are repaired, not discarded: By is halved
 * (then Bx) while the block is too large, Bx doubled while it is below 32
 * threads, I clamped. Selection is roulette-wheel on fitness 1 / time,
 * one-point crossover with probability pc, bitwise mutation with
 * probability pm, and the best individual survives (elitism). The search
 * stops after `generations` generations or `patience` generations without
 * improvement. Each configuration is measured once (a memo answers
 * repeats); the fitness is the inverse of the measured backprojection time,
 * and the roulette draws with weight (fitness / best fitness)^8. Genes are
 * Gray-coded per field.
 *
 * The cache is a text file, one line per (GPU model, problem size):
 *     <gpu name> TAB <nproj>x<nu>x<nv> TAB <nx>x<ny>x<nz> TAB I,K,Bx,By TAB ms
 * written atomically (temp file, fsync, rename) under an flock on
 * <cache>.lock, so tuners on several GPUs may store at once; lines no tuner
 * could have written (sizes <= 0, blocks over 1024 threads) are ignored. The
 * CUDA backprojector consults the cache set by gpu_fdk_tune_cache_set()
 * when a caller leaves
 * the configuration at 0: the exact size's entry, else the same GPU's entry
 * of the nearest size (projections x voxels), else the built-in defaults.
 *
 * Thread-safety: gpu_fdk_ga_run and the cache functions may run on any
 * thread; the cache file is read on every lookup (it is small and rarely
 * changes; a tuned daemon picks up a new entry without a restart).
 */
#ifndef LDCT_GPU_FDK_TUNE_H
#define LDCT_GPU_FDK_TUNE_H

#include <stddef.h>
#include <stdint.h>

#include "gpu/fdk.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gpu_fdk_cfg {
    int i, k, bx, by;
} gpu_fdk_cfg;

/* Measures one configuration: writes the time in ms into *ms and returns 0,
 * or returns a negative code (the configuration cannot run: fitness 0). */
typedef int (*gpu_fdk_eval_fn)(void *ctx, const gpu_fdk_cfg *c, double *ms);

typedef struct gpu_fdk_ga_opts {
    int population;  /* individuals per generation (default 16) */
    int generations; /* at most (default 12) */
    int patience;    /* stop after this many generations without a better best (default 4) */
    double pc, pm;   /* crossover and per-gene mutation probabilities (0.8, 0.05) */
    uint64_t seed;   /* 0: a fixed default */
    int max_threads; /* threads per block (default 1024) */
    int max_i;       /* largest I (the projections; default 64) */
    /* Called after each generation (may be NULL). */
    void (*progress)(void *ctx, int generation, const gpu_fdk_cfg *best, double best_ms,
                     int evaluations);
    void *progress_ctx;
} gpu_fdk_ga_opts;

typedef struct gpu_fdk_ga_result {
    gpu_fdk_cfg best;
    double best_ms;
    int evaluations; /* distinct configurations measured */
    int generations; /* generations run */
} gpu_fdk_ga_result;

/* Fills the defaults above. */
void gpu_fdk_ga_opts_default(gpu_fdk_ga_opts *o);

/* Repairs c in place to satisfy the constraints above. */
void gpu_fdk_cfg_repair(gpu_fdk_cfg *c, int max_threads, int max_i);

/* Runs the genetic algorithm with eval as the fitness. Returns 0, -ENOMEM,
 * LDCT_EINPUT (bad options) or the error of eval when no configuration at
 * all could run. */
int gpu_fdk_ga_run(const gpu_fdk_ga_opts *o, gpu_fdk_eval_fn eval, void *ctx, gpu_fdk_ga_result *r);

/* Sets the cache file the CUDA backprojector consults (NULL: none). Copies
 * the path. Call before starting workers. */
void gpu_fdk_tune_cache_set(const char *path);

/* Stores the configuration for (gpu, size); replaces an older entry of the
 * same key. Returns 0 or -errno. */
int gpu_fdk_tune_cache_store(const char *path, const char *gpu, int nproj, int nu, int nv, int nx,
                             int ny, int nz, const gpu_fdk_cfg *c, double ms);

/* Looks the configuration up in path (NULL: the file set above). Returns 0
 * (exact size), 1 (same GPU, nearest size) or LDCT_ENOTFOUND. */
int gpu_fdk_tune_cache_lookup(const char *path, const char *gpu, int nproj, int nu, int nv, int nx,
                              int ny, int nz, gpu_fdk_cfg *c);

/* `tune fdk` of `ldct` and tools/gpu_bench: argv[0] "tune", argv[1] "fdk";
 * default_cache is used without --cache (may be NULL). Returns an exit code. */
int gpu_fdk_tune_main(int argc, char **argv, const char *default_cache);

#ifdef __cplusplus
}
#endif

#endif
