/* Image-quality metrics against the simulator's truth and the phantom.ini
 * sidecar (definitions in pipeline/quality.h). Pure C11 + OpenMP; any
 * thread. Sums are in double; the SSIM statistics are filtered in float
 * buffers of the volume's size (five of them).
 */
#include "pipeline/quality.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ini.h>

#include "common/err.h"

static size_t vox(const gpu_volume *v)
{
    return (size_t)v->nx * v->ny * v->nz;
}

static double pos(const gpu_volume *v, const quality_grid *g, int axis, int i)
{
    return g->origin[axis] + i * v->spacing[axis];
}

int quality_body_mask(const gpu_volume *v, const quality_grid *g, const gpu_phantom_layout *l,
                      unsigned char *mask)
{
    if (!(l->body_a > 0 && l->body_b > 0))
        return LDCT_EINPUT;
    for (int y = 0; y < v->ny; y++) {
        double dy = (pos(v, g, 1, y) - l->body_y) / l->body_b;
        for (int x = 0; x < v->nx; x++) {
            double dx = (pos(v, g, 0, x) - l->body_x) / l->body_a;
            mask[(size_t)y * v->nx + x] = dx * dx + dy * dy <= 1.0;
        }
    }
    size_t plane = (size_t)v->nx * v->ny;
    for (int z = 1; z < v->nz; z++)
        memcpy(mask + z * plane, mask, plane);
    return 0;
}

double quality_range(const gpu_volume *ref, const unsigned char *mask)
{
    float lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < vox(ref); i++) {
        if (!mask[i])
            continue;
        lo = ref->data[i] < lo ? ref->data[i] : lo;
        hi = ref->data[i] > hi ? ref->data[i] : hi;
    }
    return hi > lo ? (double)hi - lo : 0.0;
}

double quality_psnr(const gpu_volume *test, const gpu_volume *ref, const unsigned char *mask,
                    double range)
{
    double sum = 0;
    long n = 0;
#pragma omp parallel for reduction(+ : sum, n) schedule(static)
    for (size_t i = 0; i < vox(ref); i++) {
        if (mask[i]) {
            double d = (double)test->data[i] - ref->data[i];
            sum += d * d;
            n++;
        }
    }
    if (n == 0)
        return NAN;
    return sum > 0 ? 10.0 * log10(range * range / (sum / n)) : INFINITY;
}

enum { SSIM_RADIUS = 5 };

static int mirror(int i, int n)
{
    if (n == 1)
        return 0;
    while (i < 0 || i >= n)
        i = i < 0 ? -i : 2 * (n - 1) - i;
    return i;
}

/* Separable Gaussian filter (sigma 1.5, radius 5) of a along one axis into b. */
static void blur_axis(const gpu_volume *shape, const float *a, float *b, int axis, const float *w)
{
    const int n[3] = {shape->nx, shape->ny, shape->nz};
    const size_t stride[3] = {1, (size_t)n[0], (size_t)n[0] * n[1]};
#pragma omp parallel for schedule(static)
    for (long row = 0; row < (long)n[1] * n[2]; row++) {
        int y = (int)(row % n[1]), z = (int)(row / n[1]);
        for (int x = 0; x < n[0]; x++) {
            const int c[3] = {x, y, z};
            size_t base = x + y * stride[1] + z * stride[2] - c[axis] * stride[axis];
            double s = 0;
            for (int k = -SSIM_RADIUS; k <= SSIM_RADIUS; k++)
                s += w[k + SSIM_RADIUS] * a[base + mirror(c[axis] + k, n[axis]) * stride[axis]];
            b[x + y * stride[1] + z * stride[2]] = (float)s;
        }
    }
}

static void blur3(const gpu_volume *shape, float *a, float *tmp, const float *w)
{
    blur_axis(shape, a, tmp, 0, w);
    blur_axis(shape, tmp, a, 1, w);
    if (shape->nz > 1) {
        blur_axis(shape, a, tmp, 2, w);
        memcpy(a, tmp, vox(shape) * sizeof *a);
    }
}

int quality_ssim(const gpu_volume *test, const gpu_volume *ref, const unsigned char *mask,
                 double range, double *ssim)
{
    size_t n = vox(ref);
    float *buf = malloc(6 * n * sizeof *buf);
    if (!buf)
        return -ENOMEM;
    float *mx = buf, *my = buf + n, *xx = buf + 2 * n, *yy = buf + 3 * n, *xy = buf + 4 * n,
          *tmp = buf + 5 * n;
    for (size_t i = 0; i < n; i++) {
        double a = test->data[i], b = ref->data[i];
        mx[i] = (float)a;
        my[i] = (float)b;
        xx[i] = (float)(a * a);
        yy[i] = (float)(b * b);
        xy[i] = (float)(a * b);
    }
    float w[2 * SSIM_RADIUS + 1];
    double ws = 0;
    for (int k = -SSIM_RADIUS; k <= SSIM_RADIUS; k++)
        ws += w[k + SSIM_RADIUS] = (float)exp(-k * k / (2 * 1.5 * 1.5));
    for (int k = 0; k < 2 * SSIM_RADIUS + 1; k++)
        w[k] = (float)(w[k] / ws);
    float *stats[5] = {mx, my, xx, yy, xy};
    for (int s = 0; s < 5; s++)
        blur3(ref, stats[s], tmp, w);
    double c1 = 0.01 * range * 0.01 * range, c2 = 0.03 * range * 0.03 * range, sum = 0;
    long cnt = 0;
    for (size_t i = 0; i < n; i++) {
        if (!mask[i])
            continue;
        double ux = mx[i], uy = my[i];
        double vx = xx[i] - ux * ux, vy = yy[i] - uy * uy, cxy = xy[i] - ux * uy;
        sum += (2 * ux * uy + c1) * (2 * cxy + c2) / ((ux * ux + uy * uy + c1) * (vx + vy + c2));
        cnt++;
    }
    free(buf);
    if (cnt == 0)
        return LDCT_EINPUT;
    *ssim = sum / cnt;
    return 0;
}

int quality_ring_stats(const gpu_volume *v, const quality_grid *g, double x, double y, double r_in,
                       double r_out, double *mean, double *sd, long *n)
{
    double s = 0, s2 = 0;
    long c = 0;
    for (int k = 0; k < v->nz; k++) {
        for (int j = 0; j < v->ny; j++) {
            double dy = pos(v, g, 1, j) - y;
            for (int i = 0; i < v->nx; i++) {
                double dx = pos(v, g, 0, i) - x, r = sqrt(dx * dx + dy * dy);
                if (r < r_in || r >= r_out)
                    continue;
                double a = v->data[((size_t)k * v->ny + j) * v->nx + i];
                s += a;
                s2 += a * a;
                c++;
            }
        }
    }
    if (c == 0)
        return LDCT_EINPUT;
    *mean = s / c;
    *sd = c > 1 ? sqrt(fmax(0.0, (s2 - s * s / c) / (c - 1))) : 0.0;
    if (n)
        *n = c;
    return 0;
}

/* The radial bins of an edge's profile: nbin bins of `bin` mm from lo,
 * the plateaus the first and last `half` of them. */
typedef struct edge_bins {
    double lo, bin;
    int nbin, half;
} edge_bins;

/* LDCT_EINPUT when the edge's neighbourhood has no width or spans fewer
 * than 8 bins. */
static int edge_bins_of(const gpu_volume *v, const gpu_phantom_edge *e, edge_bins *b)
{
    double w = fmin(0.8 * e->radius, e->uniform_to - e->radius);
    b->bin = 0.1 * fmin(v->spacing[0], v->spacing[1]);
    b->lo = e->radius - w;
    if (!(w > 0) || !(2 * w / b->bin < 1e8))
        return LDCT_EINPUT;
    b->nbin = (int)ceil(2 * w / b->bin);
    b->half = b->nbin / 4;
    return b->nbin < 8 ? LDCT_EINPUT : 0;
}

/* The bin of voxel (i, j) of the axial plane, or -1 outside the bins. */
static int edge_bin(const gpu_volume *v, const quality_grid *g, const gpu_phantom_edge *e,
                    const edge_bins *b, int i, int j)
{
    double dx = pos(v, g, 0, i) - e->x, dy = pos(v, g, 1, j) - e->y;
    double k = floor((sqrt(dx * dx + dy * dy) - b->lo) / b->bin);
    return k >= 0 && k < b->nbin ? (int)k : -1;
}

/* Radial edge-spread function: bin sums and counts. */
static void edge_esf(const gpu_volume *v, const quality_grid *g, const gpu_phantom_edge *e,
                     const edge_bins *b, double *sum, long *cnt)
{
    for (int k = 0; k < v->nz; k++) {
        for (int j = 0; j < v->ny; j++) {
            for (int i = 0; i < v->nx; i++) {
                int bin = edge_bin(v, g, e, b, i, j);
                if (bin < 0)
                    continue;
                sum[bin] += v->data[((size_t)k * v->ny + j) * v->nx + i];
                cnt[bin]++;
            }
        }
    }
}

static double plateau(const double *sum, const long *cnt, int from, int to)
{
    double s = 0;
    long c = 0;
    for (int b = from; b < to; b++) {
        s += sum[b];
        c += cnt[b];
    }
    return c ? s / c : NAN;
}

/* First crossing of `level` by the normalised ESF e[] walking from bin
 * `from` in direction dir (+1 outward, -1 inward); NAN if none. */
static double crossing(const double *e, const long *cnt, int from, int to, int dir, double level,
                       double lo, double bin)
{
    int prev = -1;
    for (int b = from; b != to; b += dir) {
        if (!cnt[b])
            continue;
        int beyond = dir > 0 ? e[b] <= level : e[b] >= level;
        if (beyond && prev >= 0) {
            double t = (level - e[prev]) / (e[b] - e[prev]);
            return lo + (prev + 0.5 + t * (b - prev)) * bin;
        }
        prev = b;
    }
    return NAN;
}

int quality_edge_rise(const gpu_volume *v, const quality_grid *g, const gpu_phantom_edge *e,
                      double *rise_mm)
{
    edge_bins b;
    if (edge_bins_of(v, e, &b))
        return LDCT_EINPUT;
    const int nbin = b.nbin, half = b.half;
    double *sum = calloc((size_t)nbin, sizeof *sum), *en = calloc((size_t)nbin, sizeof *en);
    long *cnt = calloc((size_t)nbin, sizeof *cnt);
    int rc = LDCT_EINPUT;
    if (!sum || !en || !cnt) {
        rc = -ENOMEM;
        goto done;
    }
    edge_esf(v, g, e, &b, sum, cnt);
    double in = plateau(sum, cnt, 0, half), out = plateau(sum, cnt, nbin - half, nbin);
    if (!isfinite(in) || !isfinite(out) || in == out)
        goto done;
    for (int k = 0; k < nbin; k++)
        en[k] = cnt[k] ? (sum[k] / cnt[k] - out) / (in - out) : 0;
    double r90 = crossing(en, cnt, half, nbin, 1, 0.9, b.lo, b.bin);
    double r10 = crossing(en, cnt, nbin - half - 1, -1, -1, 0.1, b.lo, b.bin);
    if (isfinite(r90) && isfinite(r10)) {
        *rise_mm = r10 - r90;
        rc = 0;
    }
done:
    free(sum);
    free(en);
    free(cnt);
    return rc;
}

static int measure_rois(const gpu_volume *test, const gpu_volume *diff, const quality_grid *g,
                        const gpu_phantom_layout *l, quality_result *r)
{
    double var = 0, bias = 0, sd_min = INFINITY, sd_max = 0;
    r->nroi = l->nroi;
    r->max_abs_bias = 0;
    for (int i = 0; i < l->nroi; i++) {
        const gpu_phantom_roi *o = &l->roi[i];
        quality_roi_result *q = &r->roi[i];
        double sd_test;
        int rc = quality_ring_stats(test, g, o->x, o->y, 0, o->radius, &q->mean, &sd_test, &q->n);
        if (!rc)
            rc = quality_ring_stats(diff, g, o->x, o->y, 0, o->radius, &q->bias, &q->sd, NULL);
        if (rc)
            return rc;
        var += q->sd * q->sd;
        sd_min = fmin(sd_min, q->sd);
        sd_max = fmax(sd_max, q->sd);
        bias += q->bias;
        r->max_abs_bias = fmax(r->max_abs_bias, fabs(q->bias));
    }
    r->noise_sd = l->nroi ? sqrt(var / l->nroi) : NAN;
    r->bias_hu = l->nroi ? bias / l->nroi : NAN;
    r->noise_spread = l->nroi >= 2 && sd_min > 0 ? sd_max / sd_min : NAN;
    return 0;
}

/* The radius of a lesion's inner disk (quality.h). */
static double lesion_inner(const gpu_volume *v, const gpu_phantom_lesion *e)
{
    return fmax(0.7 * e->radius, 0.75 * fmax(v->spacing[0], v->spacing[1]));
}

static int measure_lesions(const gpu_volume *test, const gpu_volume *diff, const quality_grid *g,
                           const gpu_phantom_layout *l, quality_result *r)
{
    r->nlesion = l->nlesion;
    for (int i = 0; i < l->nlesion; i++) {
        const gpu_phantom_lesion *e = &l->lesion[i];
        double rin = lesion_inner(test, e), m_in, sd_in, m_bg, sd_bg, m_d;
        int rc = quality_ring_stats(test, g, e->x, e->y, 0, rin, &m_in, &sd_in, NULL);
        if (!rc)
            rc = quality_ring_stats(test, g, e->x, e->y, e->bg_inner, e->bg_outer, &m_bg, &sd_bg,
                                    NULL);
        if (!rc)
            rc = quality_ring_stats(diff, g, e->x, e->y, e->bg_inner, e->bg_outer, &m_d, &sd_bg,
                                    NULL);
        if (rc)
            return rc;
        r->lesion[i].contrast = m_in - m_bg;
        r->lesion[i].bg_sd = sd_bg;
        r->lesion[i].cnr = sd_bg > 0 ? (m_in - m_bg) / sd_bg : INFINITY;
    }
    return 0;
}

/* ---- what a grid can measure (geometry only) ---------------------------- */

/* Writes a reason into why (when not NULL); returns LDCT_EINPUT. */
static int say(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int say(char *why, size_t len, const char *fmt, ...)
{
    if (why && len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, len, fmt, ap);
        va_end(ap);
    }
    return LDCT_EINPUT;
}

/* The voxels [*a, *b] along axis (0: x, 1: y) within r mm of c. */
static void span(const gpu_volume *v, const quality_grid *g, int axis, double c, double r, int *a,
                 int *b)
{
    double n = axis ? v->ny : v->nx, s = v->spacing[axis], o = g->origin[axis];
    *a = (int)fmax(0, fmin(n - 1, floor((c - r - o) / s)));
    *b = (int)fmax(0, fmin(n - 1, ceil((c + r - o) / s)));
}

/* Voxel centres of one axial plane at r_in <= distance < r_out from (x, y),
 * counted as quality_ring_stats counts them in each slice. */
static long ring_voxels(const gpu_volume *v, const quality_grid *g, double x, double y, double r_in,
                        double r_out)
{
    int i0, i1, j0, j1;
    span(v, g, 0, x, r_out, &i0, &i1);
    span(v, g, 1, y, r_out, &j0, &j1);
    long c = 0;
    for (int j = j0; j <= j1; j++) {
        double dy = pos(v, g, 1, j) - y;
        for (int i = i0; i <= i1; i++) {
            double dx = pos(v, g, 0, i) - x, r = sqrt(dx * dx + dy * dy);
            c += r >= r_in && r < r_out;
        }
    }
    return c;
}

/* Whether the body ellipse holds a voxel centre (quality_body_mask). */
static int body_fits(const gpu_volume *v, const quality_grid *g, const gpu_phantom_layout *l)
{
    if (!(l->body_a > 0 && l->body_b > 0))
        return 0;
    int i0, i1, j0, j1;
    span(v, g, 0, l->body_x, l->body_a, &i0, &i1);
    span(v, g, 1, l->body_y, l->body_b, &j0, &j1);
    for (int j = j0; j <= j1; j++) {
        double dy = (pos(v, g, 1, j) - l->body_y) / l->body_b;
        for (int i = i0; i <= i1; i++) {
            double dx = (pos(v, g, 0, i) - l->body_x) / l->body_a;
            if (dx * dx + dy * dy <= 1.0)
                return 1;
        }
    }
    return 0;
}

/* Bins of cnt[from, to) that hold a voxel. */
static int bins_held(const long *cnt, int from, int to)
{
    int n = 0;
    for (int k = from; k < to; k++)
        n += cnt[k] > 0;
    return n;
}

/* 0 when the edge's profile has what quality_edge_rise needs of the grid:
 * a voxel in each plateau and two voxel-holding bins on the path of each
 * crossing's search; else LDCT_EINPUT (or -ENOMEM). */
static int edge_fits(const gpu_volume *v, const quality_grid *g, const gpu_phantom_edge *e)
{
    edge_bins b;
    if (edge_bins_of(v, e, &b))
        return LDCT_EINPUT;
    long *cnt = calloc((size_t)b.nbin, sizeof *cnt);
    if (!cnt)
        return -ENOMEM;
    int i0, i1, j0, j1;
    double reach = b.lo + b.nbin * b.bin;
    span(v, g, 0, e->x, reach, &i0, &i1);
    span(v, g, 1, e->y, reach, &j0, &j1);
    for (int j = j0; j <= j1; j++)
        for (int i = i0; i <= i1; i++) {
            int k = edge_bin(v, g, e, &b, i, j);
            if (k >= 0)
                cnt[k]++;
        }
    int ok = bins_held(cnt, 0, b.half) && bins_held(cnt, b.nbin - b.half, b.nbin) &&
             bins_held(cnt, b.half, b.nbin) >= 2 && bins_held(cnt, 0, b.nbin - b.half) >= 2;
    free(cnt);
    return ok ? 0 : LDCT_EINPUT;
}

/* The ROIs and lesions of quality_layout_fits. */
static int regions_fit(const gpu_volume *v, const quality_grid *g, const gpu_phantom_layout *l,
                       char *why, size_t len)
{
    for (int i = 0; i < l->nroi; i++) {
        const gpu_phantom_roi *o = &l->roi[i];
        if (!ring_voxels(v, g, o->x, o->y, 0, o->radius))
            return say(why, len, "ROI %s (radius %g mm) holds no voxel centre", o->name, o->radius);
    }
    for (int i = 0; i < l->nlesion; i++) {
        const gpu_phantom_lesion *e = &l->lesion[i];
        if (!ring_voxels(v, g, e->x, e->y, 0, lesion_inner(v, e)))
            return say(why, len, "lesion %d (radius %g mm) holds no voxel centre", i + 1,
                       e->radius);
        if (!ring_voxels(v, g, e->x, e->y, e->bg_inner, e->bg_outer))
            return say(why, len,
                       "the background ring of lesion %d (%g to %g mm from its centre) holds no "
                       "voxel centre",
                       i + 1, e->bg_inner, e->bg_outer);
    }
    return 0;
}

int quality_layout_fits(const gpu_volume *v, const quality_grid *g, const gpu_phantom_layout *l,
                        const gpu_phantom_edge *extra, int nextra, char *why, size_t len)
{
    if (!body_fits(v, g, l))
        return say(why, len, "the body (an ellipse of %g x %g mm) holds no voxel centre",
                   2 * l->body_a, 2 * l->body_b);
    int rc = regions_fit(v, g, l, why, len);
    if (!rc && l->has_edge && (rc = edge_fits(v, g, &l->edge)) == LDCT_EINPUT)
        return say(why, len, "the edge (radius %g mm) spans too few voxels for its 10-90%% rise",
                   l->edge.radius);
    for (int t = 0; !rc && t < nextra; t++)
        if ((rc = edge_fits(v, g, &extra[t])) == LDCT_EINPUT)
            return say(why, len,
                       "the moving edge of time point %d spans too few voxels for its 10-90%% "
                       "rise",
                       t + 1);
    return rc;
}

/* quality_layout_fits on an n-pixel-wide grid over v's field of view and
 * centre (ny scaled with n). */
static int fits_at(const gpu_volume *v, const quality_grid *g, const gpu_phantom_layout *l,
                   const gpu_phantom_edge *extra, int nextra, int n)
{
    gpu_volume t = *v;
    quality_grid tg = *g;
    t.data = NULL;
    t.nx = n;
    t.ny = (int)fmax(1, lround((double)v->ny * n / v->nx));
    for (int a = 0; a < 2; a++) {
        int was = a ? v->ny : v->nx, now = a ? t.ny : t.nx;
        double mid = g->origin[a] + (was - 1) / 2.0 * v->spacing[a];
        t.spacing[a] = was * v->spacing[a] / now;
        tg.origin[a] = mid - (now - 1) / 2.0 * t.spacing[a];
    }
    return quality_layout_fits(&t, &tg, l, extra, nextra, NULL, 0);
}

int quality_min_size(const gpu_volume *v, const quality_grid *g, const gpu_phantom_layout *l,
                     const gpu_phantom_edge *extra, int nextra, int *first)
{
    int last_bad = v->nx;
    *first = 0;
    /* Every size up to 256, then steps of 1/64: the search stays short for
     * a layout that fits no grid. */
    for (int n = v->nx + 1; n <= QUALITY_MAX_SIZE; n += n < 256 ? 1 : n / 64) {
        if (*first && n > 2 * *first + 32)
            break;
        int rc = fits_at(v, g, l, extra, nextra, n);
        if (rc == LDCT_EINPUT)
            last_bad = n;
        else if (rc)
            return *first = 0;
        else if (!*first)
            *first = n;
    }
    return *first ? last_bad + 1 : 0;
}

int quality_measure(const gpu_volume *test, const gpu_volume *ref, const quality_grid *g,
                    const gpu_phantom_layout *l, quality_result *r)
{
    memset(r, 0, sizeof *r);
    if (!gpu_volume_same_shape(test, ref) || test->nt != 1)
        return say(r->why, sizeof r->why, "the test and reference volumes differ in shape");
    int rc = quality_layout_fits(ref, g, l, NULL, 0, r->why, sizeof r->why);
    if (rc)
        return rc;
    unsigned char *mask = malloc(vox(ref));
    if (!mask)
        return -ENOMEM;
    rc = quality_body_mask(ref, g, l, mask);
    if (!rc) {
        r->mask_voxels = 0;
        for (size_t i = 0; i < vox(ref); i++)
            r->mask_voxels += mask[i];
        r->psnr_range = quality_range(ref, mask);
        r->psnr = quality_psnr(test, ref, mask, r->psnr_range);
        rc = r->mask_voxels ? quality_ssim(test, ref, mask, r->psnr_range, &r->ssim) : LDCT_EINPUT;
    }
    free(mask);
    gpu_volume diff = *ref;
    diff.data = rc ? NULL : malloc(vox(ref) * sizeof *diff.data);
    if (!rc && !diff.data)
        rc = -ENOMEM;
    for (size_t i = 0; !rc && i < vox(ref); i++)
        diff.data[i] = test->data[i] - ref->data[i];
    if (!rc)
        rc = measure_rois(test, &diff, g, l, r);
    if (!rc)
        rc = measure_lesions(test, &diff, g, l, r);
    free(diff.data);
    r->edge_rise_mm = NAN;
    if (!rc && l->has_edge && (rc = quality_edge_rise(test, g, &l->edge, &r->edge_rise_mm)))
        say(r->why, sizeof r->why,
            "the test series shows no 10-90%% rise across the edge at (%g, %g) mm, radius %g mm",
            l->edge.x, l->edge.y, l->edge.radius);
    return rc;
}

/* ---- sidecar ------------------------------------------------------------ */

int quality_layout_write(const gpu_phantom_layout *l, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -errno;
    fprintf(f,
            "; Layout of the ldct phantom shown by the series next to this file (ldct quality).\n"
            "; Lengths in mm, patient coordinates (x to the image's right, y down), HU.\n"
            "[phantom]\nname = %s\nbody_x = %.6g\nbody_y = %.6g\nbody_a = %.6g\nbody_b = %.6g\n",
            l->name, l->body_x, l->body_y, l->body_a, l->body_b);
    for (int i = 0; i < l->nroi; i++) {
        const gpu_phantom_roi *o = &l->roi[i];
        fprintf(f, "\n[roi %s]\nx = %.6g\ny = %.6g\nradius = %.6g\nhu = %.6g\n", o->name, o->x,
                o->y, o->radius, o->hu);
    }
    for (int i = 0; i < l->nlesion; i++) {
        const gpu_phantom_lesion *e = &l->lesion[i];
        fprintf(f,
                "\n[lesion %d]\nx = %.6g\ny = %.6g\nradius = %.6g\nhu = %.6g\n"
                "background_hu = %.6g\nbg_inner = %.6g\nbg_outer = %.6g\n",
                i + 1, e->x, e->y, e->radius, e->hu, e->background_hu, e->bg_inner, e->bg_outer);
    }
    if (l->has_edge)
        fprintf(f,
                "\n[edge]\nx = %.6g\ny = %.6g\nradius = %.6g\ninside_hu = %.6g\n"
                "outside_hu = %.6g\nuniform_to = %.6g\n",
                l->edge.x, l->edge.y, l->edge.radius, l->edge.inside_hu, l->edge.outside_hu,
                l->edge.uniform_to);
    int bad = ferror(f);
    if (fclose(f) || bad)
        return -EIO;
    return 0;
}

typedef struct layout_parse {
    gpu_phantom_layout *l;
    char *err;
    size_t err_len;
    int failed;
    char last[64]; /* the section of the previous entry */
} layout_parse;

/* The double field of a section's struct named `name`, or NULL. */
static double *layout_field(gpu_phantom_layout *l, const char *section, const char *name)
{
#define F(key, field)                                                                              \
    if (!strcmp(name, key))                                                                        \
    return &(field)
    if (!strcmp(section, "phantom")) {
        F("body_x", l->body_x);
        F("body_y", l->body_y);
        F("body_a", l->body_a);
        F("body_b", l->body_b);
    } else if (!strncmp(section, "roi ", 4) && l->nroi > 0) {
        gpu_phantom_roi *o = &l->roi[l->nroi - 1];
        F("x", o->x);
        F("y", o->y);
        F("radius", o->radius);
        F("hu", o->hu);
    } else if (!strncmp(section, "lesion ", 7) && l->nlesion > 0) {
        gpu_phantom_lesion *e = &l->lesion[l->nlesion - 1];
        F("x", e->x);
        F("y", e->y);
        F("radius", e->radius);
        F("hu", e->hu);
        F("background_hu", e->background_hu);
        F("bg_inner", e->bg_inner);
        F("bg_outer", e->bg_outer);
    } else if (!strcmp(section, "edge")) {
        F("x", l->edge.x);
        F("y", l->edge.y);
        F("radius", l->edge.radius);
        F("inside_hu", l->edge.inside_hu);
        F("outside_hu", l->edge.outside_hu);
        F("uniform_to", l->edge.uniform_to);
    }
#undef F
    return NULL;
}

/* Sections are opened on their first key (a new section name starts a new
 * ROI or lesion; sections are never split in files this module writes). */
static int open_section(gpu_phantom_layout *l, const char *section, char *last, size_t len)
{
    if (!strcmp(section, last))
        return 0;
    snprintf(last, len, "%s", section);
    if (!strncmp(section, "roi ", 4)) {
        if (l->nroi == GPU_PHANTOM_MAX_ROIS)
            return -1;
        snprintf(l->roi[l->nroi++].name, sizeof l->roi[0].name, "%s", section + 4);
    } else if (!strncmp(section, "lesion ", 7)) {
        if (l->nlesion == GPU_PHANTOM_MAX_LESIONS)
            return -1;
        l->nlesion++;
    } else if (!strcmp(section, "edge")) {
        l->has_edge = 1;
    }
    return 0;
}

static int on_layout_entry(void *user, const char *section, const char *name, const char *value)
{
    layout_parse *p = user;
    if (p->failed)
        return 0;
    if (!strncmp(section, "time ", 5))
        return 1; /* a 4D sidecar's moving edge: pipeline/quality4d.c */
    if (open_section(p->l, section, p->last, sizeof p->last)) {
        snprintf(p->err, p->err_len, "too many [%s] sections", section);
        return p->failed = 1, 0;
    }
    if (!strcmp(section, "phantom") && !strcmp(name, "name")) {
        snprintf(p->l->name, sizeof p->l->name, "%s", value);
        return 1;
    }
    double *f = layout_field(p->l, section, name);
    char *end;
    double v = f ? strtod(value, &end) : 0;
    /* Not finite (nan, inf, 1e400) is no length or HU: it came out as
     * "nominal_hu":inf, which is not JSON, or as NaN metrics. */
    if (!f || end == value || *end || !isfinite(v)) {
        snprintf(p->err, p->err_len, "[%s] %s = %s: unknown key or not a finite number", section,
                 name, value);
        return p->failed = 1, 0;
    }
    *f = v;
    return 1;
}

/* A length of the layout that can be measured: above 0 and below a
 * kilometre (a radius of 1e308 came out as a diameter of "inf mm", and
 * so as JSON that is not JSON). */
static int length_ok(double mm)
{
    return mm > 0 && mm < 1e6;
}

/* Every disk needs a radius that length_ok takes, a lesion's background
 * ring lies outside the lesion, and the edge inside uniform_to: a lesion
 * of radius -5 was measured over a disk of the voxel size and reported
 * as "-10 mm". */
static int layout_radii_check(const char *path, const gpu_phantom_layout *l, char *err,
                              size_t err_len)
{
    for (int i = 0; i < l->nroi; i++)
        if (!length_ok(l->roi[i].radius))
            return snprintf(err, err_len, "%s: [roi %s] radius = %g: need 0 < radius < 1e6 mm",
                            path, l->roi[i].name, l->roi[i].radius),
                   LDCT_EINPUT;
    for (int i = 0; i < l->nlesion; i++) {
        const gpu_phantom_lesion *e = &l->lesion[i];
        if (!length_ok(e->radius) || !length_ok(e->bg_outer) ||
            !(e->radius <= e->bg_inner && e->bg_inner < e->bg_outer))
            return snprintf(err, err_len,
                            "%s: lesion %d: radius = %g, bg_inner = %g, bg_outer = %g: need 0 < "
                            "radius <= bg_inner < bg_outer < 1e6 mm",
                            path, i + 1, e->radius, e->bg_inner, e->bg_outer),
                   LDCT_EINPUT;
    }
    if (l->has_edge && !(length_ok(l->edge.radius) && length_ok(l->edge.uniform_to) &&
                         l->edge.uniform_to > l->edge.radius))
        return snprintf(err, err_len,
                        "%s: [edge] radius = %g, uniform_to = %g: need 0 < radius < uniform_to < "
                        "1e6 mm",
                        path, l->edge.radius, l->edge.uniform_to),
               LDCT_EINPUT;
    return 0;
}

int quality_layout_read(const char *path, gpu_phantom_layout *l, char *err, size_t err_len)
{
    memset(l, 0, sizeof *l);
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, err_len, "%s: %s", path, strerror(errno));
        return -errno;
    }
    layout_parse p = {l, err, err_len, 0, ""};
    int line = ini_parse_file(f, on_layout_entry, &p);
    fclose(f);
    if (p.failed || line) {
        if (!p.failed)
            snprintf(err, err_len, "%s:%d: syntax error", path, line);
        return LDCT_EINPUT;
    }
    if (!(l->body_a > 0 && l->body_b > 0)) {
        snprintf(err, err_len, "%s: no body ellipse in [phantom]", path);
        return LDCT_EINPUT;
    }
    return layout_radii_check(path, l, err, err_len);
}
