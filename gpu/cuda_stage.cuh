/* Pinned host staging for copies between pageable host memory and the GPU,
 * shared by the CUDA algorithms (FDK, adaptive NLM).
 *
 * A copy from pageable memory runs at the speed of the driver's own
 * staging (about 10 GB/s); copying on all host cores into page-locked
 * buffers and DMA-ing from there runs several times faster, and the host
 * copy of one chunk overlaps the DMA of the previous one. Page-locking
 * costs tens of ms per hundred MB, so the buffers are kept per GPU for the
 * life of the process (a worker runs on its GPU again and again): a lease
 * takes its GPU's slot with try_lock; a concurrent run on the same GPU gets
 * buffers of its own, freed at release.
 *
 * Callers: any host thread; a lease belongs to one thread. Its h2d and d2h
 * may run on different streams (d2h waits for the buffers' last DMA).
 */
#ifndef LDCT_GPU_CUDA_STAGE_CUH
#define LDCT_GPU_CUDA_STAGE_CUH

#include <cuda_runtime.h>
#include <stddef.h>

namespace gpu_stage
{

struct slot;

/* Two pinned buffers of `elems` floats and an event per buffer (its last
 * DMA); zero-initialise, then acquire. */
struct lease {
    float *buf[2];
    size_t elems;
    cudaEvent_t ev[2];
    slot *s;   /* the GPU's cached slot, or NULL */
    bool priv; /* buffers allocated for this lease */
};

/* Floats per buffer that NLM and adaptive NLM lease (2 x 32 MB). */
constexpr size_t k_default_elems = (size_t)8 << 20;

/* 1 when p is page-locked host memory (DMA-able as it is). */
bool host_pinned(const void *p);

/* memcpy on the host's cores (OpenMP). */
void par_copy(float *dst, const float *src, size_t n);

/* Two buffers of at least elems floats for GPU dev. Returns 0 or
 * LDCT_ENOMEM_GPU (no pinned memory: the caller copies from pageable
 * memory instead) or LDCT_ECUDA. */
int acquire(lease *l, int dev, size_t elems);

/* Gives the buffers back (the stream using them must be idle). Safe on a
 * zeroed lease. */
void release(lease *l);

/* host -> device through the buffers, chunk after chunk on stream st:
 * returns once the last chunk's DMA is queued (the host may reuse src).
 * With mn and mx not NULL it also finds the minimum and maximum of src
 * while copying (the data is in cache then; n > 0). */
int h2d(lease *l, float *dst, const float *src, size_t n, cudaStream_t st, float *mn = NULL,
        float *mx = NULL);

/* device -> host through the buffers on stream st (after what is queued
 * there): returns once dst holds the data. */
int d2h(lease *l, float *dst, const float *src, size_t n, cudaStream_t st);

} // namespace gpu_stage

#endif
