/* RabbitCT dataset reader and writer, and the synthetic data set in its
 * geometry; see rabbitct.h for the format and its sources. Any thread. */
#include "gpu/rabbitct.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/log.h"

static int file_size(FILE *f, long long *size)
{
    if (fseeko(f, 0, SEEK_END) != 0)
        return -errno;
    *size = (long long)ftello(f);
    if (*size < 0 || fseeko(f, 0, SEEK_SET) != 0)
        return -errno;
    return 0;
}

/* Chooses the header layout whose sizes account for the whole file. */
static int read_header(FILE *f, long long size, gpu_rabbitct *d, long *hdr)
{
    uint32_t w[6];
    if (fread(w, sizeof(uint32_t), 6, f) != 6)
        return LDCT_EINPUT;
    for (int off = 0; off <= 1; off++) {
        long long nu = w[off], nv = w[off + 1], n = w[off + 2];
        long long h = 20 + 4 * off;
        if (nu < 1 || nv < 1 || n < 1 || nu > 65536 || nv > 65536 || n > 100000)
            continue;
        if (h + n * (96 + nu * nv * 4) != size)
            continue;
        d->has_version = off;
        d->version = off ? w[0] : 0;
        d->geom.nu = (int)nu, d->geom.nv = (int)nv, d->geom.nproj = (int)n;
        memcpy(d->hu_scale, &w[off + 3], sizeof d->hu_scale);
        *hdr = (long)h;
        return 0;
    }
    return LDCT_EINPUT;
}

static int read_body(FILE *f, gpu_rabbitct *d)
{
    const size_t npix = (size_t)d->geom.nu * d->geom.nv;
    for (int i = 0; i < d->geom.nproj; i++) {
        double a[12];
        if (fread(a, sizeof(double), 12, f) != 12)
            return LDCT_EINPUT;
        double *m = d->geom.matrices + 12 * (size_t)i;
        for (int r = 0; r < 3; r++)
            for (int c = 0; c < 4; c++)
                m[4 * r + c] = a[c * 3 + r];
        if (fread(d->proj.data + npix * i, sizeof(float), npix, f) != npix)
            return LDCT_EINPUT;
    }
    return 0;
}

int gpu_rabbitct_read(const char *path, gpu_rabbitct *d)
{
    memset(d, 0, sizeof *d);
    FILE *f = fopen(path, "rb");
    if (!f)
        return -errno;
    long long size = 0;
    long hdr = 0;
    int rc = file_size(f, &size);
    if (!rc)
        rc = read_header(f, size, d, &hdr);
    if (!rc && fseek(f, hdr, SEEK_SET) != 0)
        rc = -errno;
    if (!rc) {
        d->geom.matrices = malloc(sizeof(double) * 12 * (size_t)d->geom.nproj);
        rc = d->geom.matrices ? 0 : -ENOMEM;
    }
    if (!rc)
        rc = gpu_volume_init(&d->proj, d->geom.nu, d->geom.nv, d->geom.nproj, 1);
    if (!rc)
        rc = read_body(f, d);
    fclose(f);
    if (rc) {
        log_err("rabbitct: cannot read %s: %s", path, ldct_strerror(rc));
        gpu_rabbitct_close(d);
    }
    return rc;
}

int gpu_rabbitct_write(const char *path, const gpu_fdk_geometry *g, const gpu_volume *proj)
{
    if (!g->matrices || proj->nx != g->nu || proj->ny != g->nv || proj->nz != g->nproj)
        return LDCT_EINPUT;
    FILE *f = fopen(path, "wb");
    if (!f)
        return -errno;
    uint32_t hdr[3] = {(uint32_t)g->nu, (uint32_t)g->nv, (uint32_t)g->nproj};
    float hu[2] = {1.0f, 0.0f};
    int ok = fwrite(hdr, sizeof hdr, 1, f) == 1 && fwrite(hu, sizeof hu, 1, f) == 1;
    const size_t npix = (size_t)g->nu * g->nv;
    for (int i = 0; ok && i < g->nproj; i++) {
        double a[12];
        const double *m = g->matrices + 12 * (size_t)i;
        for (int r = 0; r < 3; r++)
            for (int c = 0; c < 4; c++)
                a[c * 3 + r] = m[4 * r + c];
        ok = fwrite(a, sizeof a, 1, f) == 1 &&
             fwrite(proj->data + npix * i, sizeof(float), npix, f) == npix;
    }
    int rc = ok ? 0 : -EIO;
    if (fclose(f) != 0 && !rc)
        rc = -errno;
    return rc;
}

void gpu_rabbitct_close(gpu_rabbitct *d)
{
    if (!d)
        return;
    gpu_fdk_geometry_close(&d->geom);
    gpu_volume_close(&d->proj);
}

int gpu_rabbitct_geometry(gpu_fdk_geometry *g, int nproj, int nu, int nv)
{
    nproj = nproj > 0 ? nproj : GPU_RABBITCT_NPROJ;
    nu = nu > 0 ? nu : GPU_RABBITCT_NU;
    nv = nv > 0 ? nv : GPU_RABBITCT_NV;
    const double du = 0.32 * GPU_RABBITCT_NU / nu, dv = 0.32 * GPU_RABBITCT_NV / nv;
    const double dso = 785.0, dsd = 1200.0;
    double range = gpu_fdk_short_scan_range(nu, du, dso, dsd);
    return gpu_fdk_geometry_circular(g, nproj, nu, nv, du, dv, dso, dsd, 0.0, range, 0.0, 0.0);
}

void gpu_rabbitct_volume(gpu_fdk_volume *v, int L)
{
    double r = 256.0 / L;
    gpu_fdk_volume_centered(v, L, L, L, r, r, r);
}

int gpu_rabbitct_synthesize(const gpu_fdk_geometry *g, gpu_volume *proj)
{
    gpu_fdk_ellipsoid e[GPU_FDK_SHEPP_LOGAN_N];
    gpu_fdk_phantom_shepp_logan(e, 110.0);
    /* Densities in 1/mm of soft tissue (about 0.02), so line integrals look
     * like real attenuation data. */
    for (int i = 0; i < GPU_FDK_SHEPP_LOGAN_N; i++)
        e[i].density *= 0.02;
    return gpu_fdk_phantom_project(e, GPU_FDK_SHEPP_LOGAN_N, g, proj);
}
