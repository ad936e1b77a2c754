/* Volume allocation helpers; see volume.h. Any thread. */
#include "gpu/volume.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"

int gpu_volume_init(gpu_volume *v, int nx, int ny, int nz, int nt)
{
    memset(v, 0, sizeof *v);
    if (nx <= 0 || ny <= 0 || nz <= 0 || nt <= 0)
        return LDCT_EINPUT;
    size_t n = (size_t)nx * (size_t)ny;
    if (n / (size_t)ny != (size_t)nx || n > SIZE_MAX / sizeof(float) / (size_t)nz / (size_t)nt)
        return LDCT_EINPUT;
    n *= (size_t)nz * (size_t)nt;
    size_t bytes = (n * sizeof(float) + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, bytes);
    if (!p)
        return -ENOMEM;
    v->data = p;
    v->nx = nx;
    v->ny = ny;
    v->nz = nz;
    v->nt = nt;
    v->spacing[0] = v->spacing[1] = v->spacing[2] = 1.0;
    return 0;
}

void gpu_volume_close(gpu_volume *v)
{
    if (!v)
        return;
    free(v->data);
    v->data = NULL;
}

size_t gpu_volume_count(const gpu_volume *v)
{
    return (size_t)v->nx * (size_t)v->ny * (size_t)v->nz * (size_t)(v->nt > 0 ? v->nt : 1);
}

int gpu_volume_same_shape(const gpu_volume *a, const gpu_volume *b)
{
    return a->nx == b->nx && a->ny == b->ny && a->nz == b->nz && a->nt == b->nt;
}
