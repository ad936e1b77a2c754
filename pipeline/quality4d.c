/* quality4d: metrics of 4D series and the [time N] sidecar sections (see
 * pipeline/quality4d.h). Any thread.
 *
 * Invariant: a time point is the contiguous block of nx * ny * nz voxels
 * at offset t * nx * ny * nz (gpu/volume.h's x, y, z, t order), so a view
 * of it, or of all of them as nz * nt slices, needs no copy.
 */
#include "pipeline/quality4d.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include <ini.h>

/* Time point t of v as a 3D volume (shares v's data). */
static gpu_volume time_point(const gpu_volume *v, int t)
{
    gpu_volume s = *v;
    s.nt = 1;
    s.data = v->data + (size_t)t * v->nx * v->ny * v->nz;
    return s;
}

/* All time points of v as one 3D volume of nz * nt slices. */
static gpu_volume stacked(const gpu_volume *v)
{
    gpu_volume s = *v;
    s.nz = v->nz * v->nt;
    s.nt = 1;
    return s;
}

static int ssim_per_time(const gpu_volume *test, const gpu_volume *ref, const quality_grid *g,
                         const gpu_phantom_layout *l, double range, double *mean)
{
    gpu_volume r0 = time_point(ref, 0);
    unsigned char *mask = malloc(gpu_volume_count(&r0));
    int rc = mask ? quality_body_mask(&r0, g, l, mask) : -ENOMEM;
    double sum = 0;
    for (int t = 0; !rc && t < ref->nt; t++) {
        gpu_volume a = time_point(test, t), b = time_point(ref, t);
        double s;
        rc = quality_ssim(&a, &b, mask, range, &s);
        sum += s;
    }
    free(mask);
    *mean = rc ? NAN : sum / ref->nt;
    return rc;
}

static int moving_edges(const gpu_volume *test, const quality_grid *g, const quality4d_motion *m,
                        quality4d_result *r)
{
    double sum = 0;
    r->edge_moving_worst_mm = 0;
    for (int t = 0; t < m->ntimes; t++) {
        gpu_volume a = time_point(test, t);
        int rc = quality_edge_rise(&a, g, &m->edge[t], &r->edge_moving[t]);
        if (rc) {
            snprintf(r->pooled.why, sizeof r->pooled.why,
                     "time point %d of the test series shows no 10-90%% rise across the moving "
                     "edge",
                     t + 1);
            return rc;
        }
        sum += r->edge_moving[t];
        r->edge_moving_worst_mm = fmax(r->edge_moving_worst_mm, r->edge_moving[t]);
    }
    r->edge_moving_mm = m->ntimes ? sum / m->ntimes : NAN;
    if (!m->ntimes)
        r->edge_moving_worst_mm = NAN;
    return 0;
}

int quality4d_measure(const gpu_volume *test, const gpu_volume *ref, const quality_grid *g,
                      const gpu_phantom_layout *l, const quality4d_motion *m, quality4d_result *r)
{
    memset(r, 0, sizeof *r);
    if (!gpu_volume_same_shape(test, ref) || ref->nt < 1) {
        snprintf(r->pooled.why, sizeof r->pooled.why,
                 "the test and reference volumes differ in shape");
        return LDCT_EINPUT;
    }
    if (m->ntimes && m->ntimes != ref->nt) {
        snprintf(r->pooled.why, sizeof r->pooled.why,
                 "the series has %d time points, the sidecar %d ([time N] sections)", ref->nt,
                 m->ntimes);
        return LDCT_EINPUT;
    }
    r->ntimes = ref->nt;
    gpu_volume ts = stacked(test), rs = stacked(ref);
    int rc = quality_measure(&ts, &rs, g, l, &r->pooled);
    if (!rc && ref->nt > 1)
        rc = ssim_per_time(test, ref, g, l, r->pooled.psnr_range, &r->pooled.ssim);
    if (!rc)
        rc = moving_edges(test, g, m, r);
    return rc;
}

/* ---- sidecar ------------------------------------------------------------ */

int quality4d_motion_append(const quality4d_motion *m, const char *path)
{
    FILE *f = fopen(path, "a");
    if (!f)
        return -errno;
    fprintf(f, "\n; The moving edge (the heart's rim) at each time point (ldct quality, 4D).\n");
    for (int t = 0; t < m->ntimes; t++) {
        const gpu_phantom_edge *e = &m->edge[t];
        fprintf(f,
                "\n[time %d]\nx = %.6g\ny = %.6g\nradius = %.6g\ninside_hu = %.6g\n"
                "outside_hu = %.6g\nuniform_to = %.6g\n",
                t + 1, e->x, e->y, e->radius, e->inside_hu, e->outside_hu, e->uniform_to);
    }
    int bad = ferror(f);
    if (fclose(f) || bad)
        return -EIO;
    return 0;
}

typedef struct motion_parse {
    quality4d_motion *m;
    char *err;
    size_t err_len;
    int failed;
} motion_parse;

static double *edge_field(gpu_phantom_edge *e, const char *name)
{
    static const char *const keys[] = {"x", "y", "radius", "inside_hu", "outside_hu", "uniform_to"};
    double *fields[] = {&e->x, &e->y, &e->radius, &e->inside_hu, &e->outside_hu, &e->uniform_to};
    for (int k = 0; k < 6; k++)
        if (!strcmp(name, keys[k]))
            return fields[k];
    return NULL;
}

static int on_motion_entry(void *user, const char *section, const char *name, const char *value)
{
    motion_parse *p = user;
    if (p->failed || strncmp(section, "time ", 5))
        return 1;
    char *end;
    long t = strtol(section + 5, &end, 10);
    double v = 0;
    double *f = NULL;
    if (!*end && t >= 1 && t <= QUALITY4D_MAX_TIMES) {
        f = edge_field(&p->m->edge[t - 1], name);
        v = f ? strtod(value, &end) : 0;
    }
    if (!f || end == value || *end || !isfinite(v)) { /* as quality.c's layout */
        snprintf(p->err, p->err_len, "[%s] %s = %s: unknown time, key or not a finite number",
                 section, name, value);
        return p->failed = 1, 0;
    }
    *f = v;
    if (t > p->m->ntimes)
        p->m->ntimes = (int)t;
    return 1;
}

int quality4d_motion_read(const char *path, quality4d_motion *m, char *err, size_t err_len)
{
    memset(m, 0, sizeof *m);
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, err_len, "%s: %s", path, strerror(errno));
        return -errno;
    }
    motion_parse p = {m, err, err_len, 0};
    int line = ini_parse_file(f, on_motion_entry, &p);
    fclose(f);
    if (p.failed || line) {
        if (!p.failed)
            snprintf(err, err_len, "%s:%d: syntax error", path, line);
        return LDCT_EINPUT;
    }
    for (int t = 0; t < m->ntimes; t++)
        if (!(m->edge[t].radius > 0 && m->edge[t].uniform_to > m->edge[t].radius)) {
            snprintf(err, err_len, "%s: [time %d] missing or without a radius", path, t + 1);
            return LDCT_EINPUT;
        }
    return 0;
}
