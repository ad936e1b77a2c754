/* FFTW3 loaded at run time; see fftw_dl.h for why and for the threading
 * rules. The library handle is kept for the life of the process. */
#include "gpu/fftw_dl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#include "common/log.h"

static gpu_fftw_api s_fftw;
static int s_fftw_ok;
static pthread_once_t s_fftw_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t s_plan_lock = PTHREAD_MUTEX_INITIALIZER;

/* POSIX guarantees that a data pointer from dlsym converts to a function
 * pointer; the memcpy keeps -Wpedantic-style warnings quiet. */
#define LOAD(field, name)                                                                          \
    do {                                                                                           \
        void *f_ = dlsym(lib, name);                                                               \
        if (!f_)                                                                                   \
            ok = 0;                                                                                \
        memcpy(&s_fftw.field, &f_, sizeof f_);                                                     \
    } while (0)

static void fftw_load(void)
{
    void *lib = dlopen("libfftw3f.so.3", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        log_warn("gpu: cannot load libfftw3f.so.3 (%s); CPU FFT filtering is unavailable",
                 dlerror());
        return;
    }
    int ok = 1;
    LOAD(plan_r2c_1d, "fftwf_plan_dft_r2c_1d");
    LOAD(plan_c2r_1d, "fftwf_plan_dft_c2r_1d");
    LOAD(plan_r2c, "fftwf_plan_dft_r2c");
    LOAD(plan_c2r, "fftwf_plan_dft_c2r");
    LOAD(exec_r2c, "fftwf_execute_dft_r2c");
    LOAD(exec_c2r, "fftwf_execute_dft_c2r");
    LOAD(destroy, "fftwf_destroy_plan");
    LOAD(alloc, "fftwf_malloc");
    LOAD(release, "fftwf_free");
    s_fftw_ok = ok;
    if (!ok)
        log_warn("gpu: libfftw3f.so.3 lacks a needed function; CPU FFT filtering is unavailable");
}

const gpu_fftw_api *gpu__fftw(void)
{
    pthread_once(&s_fftw_once, fftw_load);
    return s_fftw_ok ? &s_fftw : NULL;
}

void gpu__fftw_plan_lock(void)
{
    pthread_mutex_lock(&s_plan_lock);
}

void gpu__fftw_plan_unlock(void)
{
    pthread_mutex_unlock(&s_plan_lock);
}
