/* Device handle parsing, GPU count and memory budget; see device.h.
 * Any thread. */
#include "gpu/device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/log.h"
#if LDCT_WITH_CUDA
#include "gpu/cuda_util.h"
#endif

int gpu_device_count(void)
{
#if LDCT_WITH_CUDA
    return gpu__cuda_device_count();
#else
    return 0;
#endif
}

int gpu_device_parse(const char *spec, gpu_device *dev)
{
    memset(dev, 0, sizeof *dev);
    dev->kind = GPU_DEVICE_CPU;
    if (!spec || strcmp(spec, "cpu") == 0)
        return 0;
    if (strcmp(spec, "auto") == 0) {
        if (gpu_device_count() > 0)
            dev->kind = GPU_DEVICE_CUDA;
        return 0;
    }
    int index = 0;
    if (strcmp(spec, "gpu") == 0) {
        index = 0;
    } else if (strncmp(spec, "gpu:", 4) == 0) {
        char *end = NULL;
        long v = strtol(spec + 4, &end, 10);
        if (end == spec + 4 || *end != '\0' || v < 0 || v > 1024)
            return LDCT_EINPUT;
        index = (int)v;
    } else {
        return LDCT_EINPUT;
    }
    if (index >= gpu_device_count())
        return LDCT_ENOGPU;
    dev->kind = GPU_DEVICE_CUDA;
    dev->index = index;
    return 0;
}

const char *gpu_device_name(const gpu_device *dev, char *buf, size_t len)
{
    if (dev && dev->kind == GPU_DEVICE_CUDA)
        snprintf(buf, len, "gpu:%d", dev->index);
    else
        snprintf(buf, len, "cpu");
    return buf;
}

static size_t parse_bytes(const char *s)
{
    char *end = NULL;
    double v = strtod(s, &end);
    if (end == s || v <= 0)
        return 0;
    switch (*end) {
    case 'k':
    case 'K':
        v *= 1024.0;
        break;
    case 'm':
    case 'M':
        v *= 1024.0 * 1024.0;
        break;
    case 'g':
    case 'G':
        v *= 1024.0 * 1024.0 * 1024.0;
        break;
    default:
        break;
    }
    return (size_t)v;
}

int gpu_device_warm(const gpu_device *dev)
{
#if LDCT_WITH_CUDA
    if (dev && dev->kind == GPU_DEVICE_CUDA)
        return gpu__cuda_warm(dev->index);
#else
    if (dev && dev->kind == GPU_DEVICE_CUDA)
        return LDCT_ENOGPU;
#endif
    return 0;
}

int gpu_device_check(const gpu_device *dev, char *why, size_t why_len)
{
    if (why_len)
        why[0] = '\0';
#if LDCT_WITH_CUDA
    if (dev && dev->kind == GPU_DEVICE_CUDA)
        return gpu__cuda_check(dev->index, why, why_len);
#else
    if (dev && dev->kind == GPU_DEVICE_CUDA)
        return snprintf(why, why_len, "built without CUDA"), LDCT_ENOGPU;
#endif
    return 0;
}

void gpu_load_kernels_eagerly(void)
{
    setenv("CUDA_MODULE_LOADING", "EAGER", 0);
}

size_t gpu_device_budget(const gpu_device *dev)
{
    if (!dev || dev->kind != GPU_DEVICE_CUDA)
        return 0;
    if (dev->mem_budget)
        return dev->mem_budget;
    const char *env = getenv("LDCT_GPU_MEM_BUDGET");
    if (env && *env) {
        size_t b = parse_bytes(env);
        if (b)
            return b;
        log_warn("ignoring LDCT_GPU_MEM_BUDGET=%s (not a byte count)", env);
    }
#if LDCT_WITH_CUDA
    size_t free_b = 0, total_b = 0;
    if (gpu__cuda_mem_info(dev->index, &free_b, &total_b) != 0)
        return 0;
    return free_b / 10 * 8;
#else
    return 0;
#endif
}
