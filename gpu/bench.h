/* The `bench` subcommand of `ldct` (and of tests/tools/gpu_bench): times
 * compute-engine algorithms on synthetic inputs (structure plus noise, never
 * zeros) and prints one JSON line per configuration on stdout.
 *
 *   bench nlm2d|nlm3d [--size XxYxZ[,..]] [--search-radius S[,..]]
 *         [--patch-radius P[,..]] [--device cpu|gpu[:N][,..]] [--repeat N]
 *         [--warmup N] [--h H] [--strength F] [--gaussian] [--threads N] [--json]
 *
 *   bench anlm ... (gpu/bench_anlm.c; bench anlm --help)
 *   bench adaptive4d [--size XxYxZxT] [--device ..] [--backend auto|fft|spatial] ..
 *
 * Comma-separated lists run every combination. Main thread only.
 */
#ifndef LDCT_GPU_BENCH_H
#define LDCT_GPU_BENCH_H

#ifdef __cplusplus
extern "C" {
#endif

/* argv[0] is "bench", argv[1] the algorithm. Returns a process exit code:
 * 0 success, 1 a run failed, 2 a usage error (message on stderr). */
int gpu_bench_main(int argc, char **argv);

/* `bench anlm`, same arguments and exit codes (gpu/bench_anlm.c). */
int gpu__bench_anlm_main(int argc, char **argv);
/* `bench adaptive4d` (gpu/bench_adaptive4d.c); same arguments and result. */
int gpu__bench_adaptive4d_main(int argc, char **argv);

/* Shared by the bench and tune front ends (defined in gpu/bench.c). */
/* Monotonic wall clock, seconds. */
double gpu__bench_now_s(void);
/* Median of v[0..n) (n > 0); sorts v, so v[0] is the minimum afterwards. */
double gpu__bench_median(double *v, int n);
/* One integer in [lo, hi] into *v (untouched otherwise): 0, or -1 for
 * anything else ("12x", "", out of range; atoi would take those). */
int gpu__bench_int(const char *s, int *v, int lo, int hi);
/* "A[,B..]": at most max integers in [lo, hi] into v, their count into *n;
 * 0, or -1 for anything else. */
int gpu__bench_int_list(const char *s, int *v, int *n, int max, int lo, int hi);
/* "XxYxZ[,..]": at most max sizes (each 1..100000) into d, their count into
 * *n; with short_ok, "X" and "XxY" mean Y = Z = 1. 0, or -1. */
int gpu__bench_sizes(const char *s, int (*d)[3], int *n, int max, int short_ok);
/* Exactly ndim (at most 4) sizes "AxB[xC..]" (each 1..100000) into d; with
 * short_ok fewer, the rest 1. 0, or -1 for anything else (no wrap: strtol,
 * not sscanf's %d). */
int gpu__bench_dims(const char *s, int *d, int ndim, int short_ok);

#ifdef __cplusplus
}
#endif

#endif
