/* Dispatcher for adaptive non-local means and the CUDA stub of builds
 * without CUDA; see anlm.h. Any thread. */
#include "gpu/anlm.h"

#include "common/err.h"
#include "common/log.h"

int gpu_anlm(const gpu_anlm_params *p, const gpu_volume *in, gpu_volume *out, const gpu_device *dev)
{
    gpu_device d;
    if (dev && dev->kind == GPU_DEVICE_CUDA && !LDCT_WITH_CUDA)
        return LDCT_ENOGPU; /* a GPU was asked for: never run elsewhere silently */
    if (dev)
        d = *dev;
    else if (gpu_device_parse("auto", &d) != 0)
        d = (gpu_device){.kind = GPU_DEVICE_CPU};
    if (d.kind == GPU_DEVICE_CUDA && LDCT_WITH_CUDA)
        return gpu_anlm_cuda(p, in, out, &d);
    return gpu_anlm_ref(p, in, out, &d);
}

#if !LDCT_WITH_CUDA
int gpu_anlm_cuda(const gpu_anlm_params *p, const gpu_volume *in, gpu_volume *out,
                  const gpu_device *dev)
{
    (void)p, (void)in, (void)out, (void)dev;
    log_err("anlm: this build has no CUDA");
    return LDCT_EUNSUPPORTED;
}
#endif
