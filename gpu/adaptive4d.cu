/* CUDA version of adaptive4d: not written yet; answers LDCT_EUNSUPPORTED so
 * that the dispatcher and the daemon refuse GPU runs with a readable reason
 * (the CPU reference runs instead only when asked for). */
#include "gpu/adaptive4d.h"

extern "C" {
#include "common/err.h"
#include "common/log.h"
}

int gpu_adaptive4d_cuda(const gpu_adaptive4d_params *p, const gpu_volume *in, gpu_volume *out,
                        const gpu_device *dev)
{
    (void)p;
    (void)in;
    (void)out;
    (void)dev;
    log_err("adaptive4d: the CUDA version is not implemented yet");
    return LDCT_EUNSUPPORTED;
}
