/* FFTW3 (single precision) loaded at run time with dlopen, shared by the CPU
 * references (fdk_ref.c, adaptive4d_ref.c).
 *
 * Why dlopen: the GPU tests and tools link only libgpu and libcommon so that
 * they run on the GPU machine, which may lack libfftw3f; where the library
 * is missing, gpu__fftw() returns NULL and the callers answer
 * LDCT_EUNSUPPORTED. FFTW's planner is not thread-safe: make and destroy
 * plans only between gpu__fftw_plan_lock() and gpu__fftw_plan_unlock();
 * execute them with the new-array functions on per-thread buffers (allocated
 * with `alloc`, so alignment matches the plan). Any thread.
 */
#ifndef LDCT_GPU_FFTW_DL_H
#define LDCT_GPU_FFTW_DL_H

#include <fftw3.h>
#include <stddef.h>

typedef struct gpu_fftw_api {
    fftwf_plan (*plan_r2c_1d)(int, float *, fftwf_complex *, unsigned);
    fftwf_plan (*plan_c2r_1d)(int, fftwf_complex *, float *, unsigned);
    fftwf_plan (*plan_r2c)(int, const int *, float *, fftwf_complex *, unsigned);
    fftwf_plan (*plan_c2r)(int, const int *, fftwf_complex *, float *, unsigned);
    void (*exec_r2c)(const fftwf_plan, float *, fftwf_complex *);
    void (*exec_c2r)(const fftwf_plan, fftwf_complex *, float *);
    void (*destroy)(fftwf_plan);
    void *(*alloc)(size_t);
    void (*release)(void *);
} gpu_fftw_api;

/* The loaded API (loaded once, on first call), or NULL when libfftw3f.so.3
 * or one of the functions above is missing (logged once). */
const gpu_fftw_api *gpu__fftw(void);

void gpu__fftw_plan_lock(void);
void gpu__fftw_plan_unlock(void);

#endif
