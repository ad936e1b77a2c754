/* Pinned host staging shared by the CUDA algorithms; see cuda_stage.cuh. */
#include <errno.h>
#include <mutex>
#include <string.h>

#include "gpu/cuda_check.cuh"
#include "gpu/cuda_stage.cuh"

namespace gpu_stage
{

struct slot {
    std::mutex mu;
    float *buf; /* 2 * elems floats */
    size_t elems;
};

namespace
{
constexpr int k_slots = 16;
slot g_slots[k_slots];

/* Page-locked memory for 2 * elems floats, or NULL. */
float *pinned(size_t elems)
{
    float *p = NULL;
    if (cudaHostAlloc(&p, sizeof(float) * 2 * elems, cudaHostAllocDefault) != cudaSuccess) {
        (void)cudaGetLastError();
        return NULL;
    }
    return p;
}

/* The GPU's slot with buffers of at least elems, locked; NULL when busy or
 * no pinned memory (then unlocked). */
slot *take_slot(int dev, size_t elems)
{
    slot *s = dev >= 0 && dev < k_slots ? &g_slots[dev] : NULL;
    if (!s || !s->mu.try_lock())
        return NULL;
    if (s->elems < elems) {
        if (s->buf)
            cudaFreeHost(s->buf);
        s->buf = pinned(elems);
        s->elems = s->buf ? elems : 0;
    }
    if (!s->buf) {
        s->mu.unlock();
        return NULL;
    }
    return s;
}
} // namespace

bool host_pinned(const void *p)
{
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        (void)cudaGetLastError(); /* pageable memory may report an error on old drivers */
        return false;
    }
    return a.type == cudaMemoryTypeHost;
}

void par_copy(float *dst, const float *src, size_t n)
{
    const size_t piece = (size_t)1 << 20; /* floats */
    const long pieces = (long)((n + piece - 1) / piece);
#pragma omp parallel for schedule(static) if (pieces > 1)
    for (long i = 0; i < pieces; i++) {
        const size_t o = (size_t)i * piece, len = n - o < piece ? n - o : piece;
        memcpy(dst + o, src + o, sizeof(float) * len);
    }
}

int acquire(lease *l, int dev, size_t elems)
{
    memset(l, 0, sizeof *l);
    for (int b = 0; b < 2; b++)
        CUDA_CHECK(cudaEventCreateWithFlags(&l->ev[b], cudaEventDisableTiming));
    if ((l->s = take_slot(dev, elems)) != NULL) {
        l->buf[0] = l->s->buf;
    } else if ((l->buf[0] = pinned(elems)) != NULL) {
        l->priv = true;
    } else {
        release(l);
        return LDCT_ENOMEM_GPU;
    }
    l->buf[1] = l->buf[0] + elems;
    l->elems = elems;
    return 0;
}

void release(lease *l)
{
    if (l->s)
        l->s->mu.unlock();
    else if (l->priv && l->buf[0])
        cudaFreeHost(l->buf[0]);
    for (int b = 0; b < 2; b++)
        if (l->ev[b])
            cudaEventDestroy(l->ev[b]);
    memset(l, 0, sizeof *l);
}

/* par_copy that also folds the copied values into *mn and *mx. */
static void par_copy_minmax(float *dst, const float *src, size_t n, float *mn, float *mx)
{
    float lo = *mn, hi = *mx;
    const long len = (long)n;
#pragma omp parallel for schedule(static) reduction(min : lo) reduction(max : hi)
    for (long i = 0; i < len; i++) {
        const float v = src[i];
        dst[i] = v;
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    *mn = lo, *mx = hi;
}

int h2d(lease *l, float *dst, const float *src, size_t n, cudaStream_t st, float *mn, float *mx)
{
    if (mn && mx && n)
        *mn = *mx = src[0];
    for (size_t o = 0, c = 0; o < n; o += l->elems, c++) {
        const int b = (int)(c % 2);
        const size_t len = n - o < l->elems ? n - o : l->elems;
        CUDA_CHECK(cudaEventSynchronize(l->ev[b])); /* its previous DMA is done */
        if (mn && mx)
            par_copy_minmax(l->buf[b], src + o, len, mn, mx);
        else
            par_copy(l->buf[b], src + o, len);
        CUDA_CHECK(
            cudaMemcpyAsync(dst + o, l->buf[b], sizeof(float) * len, cudaMemcpyHostToDevice, st));
        CUDA_CHECK(cudaEventRecord(l->ev[b], st));
    }
    return 0;
}

int d2h(lease *l, float *dst, const float *src, size_t n, cudaStream_t st)
{
    float *prev = NULL;
    size_t prev_n = 0, c = 0;
    for (size_t o = 0; o < n; o += l->elems, c++) {
        const int b = (int)(c % 2);
        const size_t len = n - o < l->elems ? n - o : l->elems;
        /* an h2d on another stream may still be reading buf[b] */
        CUDA_CHECK(cudaStreamWaitEvent(st, l->ev[b], 0));
        CUDA_CHECK(
            cudaMemcpyAsync(l->buf[b], src + o, sizeof(float) * len, cudaMemcpyDeviceToHost, st));
        CUDA_CHECK(cudaEventRecord(l->ev[b], st));
        if (prev) { /* the DMA of this chunk overlaps the host copy of the last */
            CUDA_CHECK(cudaEventSynchronize(l->ev[1 - b]));
            par_copy(prev, l->buf[1 - b], prev_n);
        }
        prev = dst + o;
        prev_n = len;
    }
    if (prev) {
        const int b = (int)((c - 1) % 2);
        CUDA_CHECK(cudaEventSynchronize(l->ev[b]));
        par_copy(prev, l->buf[b], prev_n);
    }
    return 0;
}

} // namespace gpu_stage
