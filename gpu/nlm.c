/* Dispatchers for non-local means and the CUDA stubs of builds without
 * CUDA; see nlm.h. Any thread. */
#include "gpu/nlm.h"

#include "common/err.h"
#include "common/log.h"

#include <string.h>

int gpu_nlm_weighting_parse(const char *name)
{
    if (strcmp(name, "uniform") == 0)
        return 0;
    return strcmp(name, "gaussian") == 0 ? 1 : -1;
}

const char *gpu_nlm_weighting_name(int gaussian)
{
    return gaussian ? "gaussian" : "uniform";
}

static int use_cuda(const gpu_device *dev, gpu_device *resolved)
{
    if (dev) {
        *resolved = *dev;
    } else if (gpu_device_parse("auto", resolved) != 0) {
        return 0;
    }
    return resolved->kind == GPU_DEVICE_CUDA && LDCT_WITH_CUDA;
}

int gpu_nlm2d(const gpu_nlm_params *p, const gpu_volume *in, gpu_volume *out, const gpu_device *dev)
{
    gpu_device d;
    if (dev && dev->kind == GPU_DEVICE_CUDA && !LDCT_WITH_CUDA)
        return LDCT_ENOGPU; /* a GPU was asked for: never run elsewhere silently */
    if (use_cuda(dev, &d))
        return gpu_nlm2d_cuda(p, in, out, &d);
    return gpu_nlm2d_ref(p, in, out, &d);
}

int gpu_nlm3d(const gpu_nlm_params *p, const gpu_volume *in, gpu_volume *out, const gpu_device *dev)
{
    gpu_device d;
    if (dev && dev->kind == GPU_DEVICE_CUDA && !LDCT_WITH_CUDA)
        return LDCT_ENOGPU; /* a GPU was asked for: never run elsewhere silently */
    if (use_cuda(dev, &d))
        return gpu_nlm3d_cuda(p, in, out, &d);
    return gpu_nlm3d_ref(p, in, out, &d);
}

#if !LDCT_WITH_CUDA
int gpu_nlm2d_cuda(const gpu_nlm_params *p, const gpu_volume *in, gpu_volume *out,
                   const gpu_device *dev)
{
    (void)p, (void)in, (void)out, (void)dev;
    log_err("nlm2d: this build has no CUDA");
    return LDCT_EUNSUPPORTED;
}

int gpu_nlm3d_cuda(const gpu_nlm_params *p, const gpu_volume *in, gpu_volume *out,
                   const gpu_device *dev)
{
    (void)p, (void)in, (void)out, (void)dev;
    log_err("nlm3d: this build has no CUDA");
    return LDCT_EUNSUPPORTED;
}
#endif
