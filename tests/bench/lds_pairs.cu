/* Microbenchmark for the eighteenth session's question: does sm_90 serve
 * an LDS.64 / LDS.128 in fewer shared-memory wavefronts when lanes 2t and
 * 2t+1 read the same address? Run under ncu and compare
 * l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld per executed shared
 * load instruction across the variants (also timed with CUDA events).
 * Build: nvcc -O3 -arch=sm_90 -o lds_pairs tests/bench/lds_pairs.cu */
#include <cstdio>
#include <cuda_runtime.h>

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));            \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

constexpr int kWords = 8192; /* 32 KB of floats */
constexpr int kIters = 4096;

/* MODE 0: float2, every lane its own 8 bytes (2 wavefronts expected);
 * 1: float2, lanes 2t and 2t+1 the same address; 2: float4, own 16 bytes
 * (4 expected); 3: float4, pairs share; 4: float, own word (1). */
template <int MODE> __global__ void lds_kernel(float *out)
{
    __shared__ __align__(16) float s[kWords];
    for (int i = threadIdx.x; i < kWords; i += blockDim.x)
        s[i] = (float)(i % 97);
    __syncthreads();
    const int lane = threadIdx.x & 31;
    const int slot = MODE == 1 || MODE == 3 ? lane >> 1 : lane;
    const int width = MODE <= 1 ? 2 : MODE <= 3 ? 4 : 1;
    float acc = 0.f;
#pragma unroll 8
    for (int it = 0; it < kIters; it++) {
        const int base = ((it * 131) & 63) * 128; /* words, 16-byte aligned */
        const int w = base + slot * width;
        if (width == 2) {
            float2 v = *reinterpret_cast<const float2 *>(&s[w]);
            acc += v.x * v.y;
        } else if (width == 4) {
            float4 v = *reinterpret_cast<const float4 *>(&s[w]);
            acc += v.x * v.y + v.z * v.w;
        } else {
            acc += s[w];
        }
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

template <int MODE> int time_mode(float *out, int blocks)
{
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    lds_kernel<MODE><<<blocks, 256>>>(out); /* warm-up */
    CHECK(cudaGetLastError());
    float best = 1e30f;
    for (int r = 0; r < 5; r++) {
        CHECK(cudaEventRecord(a));
        lds_kernel<MODE><<<blocks, 256>>>(out);
        CHECK(cudaGetLastError());
        CHECK(cudaEventRecord(b));
        CHECK(cudaEventSynchronize(b));
        float ms;
        CHECK(cudaEventElapsedTime(&ms, a, b));
        best = ms < best ? ms : best;
    }
    double loads = (double)blocks * 8 * kIters; /* warp instructions */
    printf("mode %d: %.3f ms, %.3f ns per warp load per SM\n", MODE, best,
           best * 1e6 / (loads / 132.0));
    return 0;
}

int main()
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        printf("SKIP: no GPU\n");
        return 0;
    }
    const int blocks = 132 * 8;
    float *out;
    CHECK(cudaMalloc(&out, (size_t)blocks * 256 * sizeof(float)));
    int rc = time_mode<0>(out, blocks) | time_mode<1>(out, blocks) | time_mode<2>(out, blocks) |
             time_mode<3>(out, blocks) | time_mode<4>(out, blocks);
    CHECK(cudaFree(out));
    return rc;
}
