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

#ifdef __cplusplus
}
#endif

#endif
