/* nlm3d v3, v6 and v8 kernels (gpu/nlm_cuda_v3.cu), called by the host
 * wrapper in gpu/nlm.cu. Internal to gpu/; plain uniform patch weights only
 * (the Gaussian weighting and P > 2 stay on nlm3d_v2_kernel).
 *
 * The padded slab layout is the one nlm.cu builds: pad[(zz * PY + yy) * PXp
 * + xx] holds voxel (xx - R, yy - R, zz - R) with R = S + P, every tile's
 * reads inside it (tiles of tx x ty columns round up, PXp has spare columns
 * for dx groups past S, PZ = slab + 2R + lz).
 */
#ifndef LDCT_GPU_NLM_CUDA_V3_CUH
#define LDCT_GPU_NLM_CUDA_V3_CUH

#include <cuda_runtime.h>

/* The variants: v3 (any S), v6 (S <= 5), v8 (S = 5 only; the fastest). */
enum { GPU__NLM3D_V3, GPU__NLM3D_V6, GPU__NLM3D_V8, GPU__NLM3D_V3_N };

/* Nonzero when variant v handles patch radius P and search radius S
 * without Gaussian weights. */
int gpu__nlm3d_v3_supported(int v, int P, int S, int gaussian);

/* Factor variant v expects the padded input to be multiplied by (v6 and
 * v8: sqrtf(kh3), so patch sums are exp2's argument; the kernel divides its
 * output by it again), 1 for v3. */
float gpu__nlm3d_v3_prescale(int v, float kh3);

/* Output tile of variant v for patch radius P: tx x ty columns, lz planes. */
void gpu__nlm3d_v3_tile(int v, int P, int *tx, int *ty, int *lz);

/* Launches variant v on `st`; kh3 = log2(e) / (h^2 (2P+1)^3). Returns the
 * launch error (cudaGetLastError). */
cudaError_t gpu__nlm3d_v3_launch(int v, int P, const float *pad, float *out, int nx, int ny,
                                 int nzs, int PXp, int PY, int S, float kh3, float ycut,
                                 cudaStream_t st);

#endif
