/* dcmstat: statistics of the HU values of DICOM images in a region of
 * interest, for tests that compare an original series with a derived one
 * (e.g. "noise SD in a uniform region at least halved, mean within 2 HU").
 *
 *   dcmstat [--roi X0,Y0,W,H] [--slices A:B] [--per-slice] [--json] FILE|DIR...
 *
 * Every FILE, and every regular file directly inside each DIR, must be a
 * DICOM image (read through scp_slice_read_info / scp_slice_read_hu, so any
 * transfer syntax the project decodes, with the rescale applied). The images
 * are put in slice order: by position along the slice normal when every file
 * has a position and an orientation, else by InstanceNumber; ties by path.
 * A multi-frame file contributes its frames in order, one slice each.
 *
 *   --roi X0,Y0,W,H  pixel rectangle: columns X0..X0+W-1, rows Y0..Y0+H-1
 *                    (0-based); it must lie inside every selected image.
 *                    Default: the whole image.
 *   --slices A:B     only slices A..B-1 of that order (0-based, half-open as
 *                    in Python; A or B may be left out; "A" alone is A:A+1).
 *   --per-slice      also one line per slice (before the pooled line).
 *   --json           one JSON object instead: count, mean, std, min, max and,
 *                    with --per-slice, "slices": [{slice, file, frame, ...}].
 *
 * Prints "count=N mean=M std=S min=A max=B" pooled over every selected pixel
 * (std is the sample standard deviation, n-1). Mean and std are printed with
 * 4 decimals, so identical pixel data gives identical lines. Exits 0; 1 when a
 * file cannot be read or decoded, the ROI does not fit an image or nothing
 * is selected; 2 on a usage error. Single-threaded.
 *
 * Uniform regions of tests/tools/mkseries' phantom (on every slice, whatever
 * the slice count; checked with --noise 0: SD 0), as X0,Y0,W,H for square
 * images of N pixels. The right lung (-820 HU) spans x in [-0.5, -0.2],
 * y in [-0.22, 0.12]; the heart (50 HU) x in [-0.06, 0.16], y in
 * [-0.04, 0.14], in the phantom's coordinates (pixel c is at x =
 * (2c + 1) / N - 1, the same for rows and y):
 *
 *     N     lung (-820 HU)    heart (50 HU)
 *     64    16,25,10,11       30,31,7,5
 *     128   32,50,19,22       60,61,14,12
 *     256   64,100,38,43      120,123,28,23
 *     512   128,200,77,87     241,246,56,46
 *
 * mkseries adds no noise unless given --noise SD; with --noise 20 the 64x64
 * lung ROI over 8 slices (seed 1) measures mean -820.37, SD 20.40.
 */
#include "common/err.h"
#include "common/json.h"
#include "scp/scp.h"

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct opts {
    int has_roi, roi[4]; /* x0, y0, w, h */
    long first, last;    /* slices [first, last) */
    int per_slice, json;
} opts;

/* One input file and what its header says. */
typedef struct image {
    char *path;
    int rows, cols, frames, instance_number, has_geometry;
    double along_normal; /* position projected on the slice normal */
} image;

typedef struct images {
    image *v;
    size_t n, cap;
} images;

/* Running statistics (Welford; merged with Chan's formula). */
typedef struct stats {
    double n, mean, m2, min, max;
} stats;

static void stats_add(stats *s, double x)
{
    if (s->n == 0)
        s->min = s->max = x;
    s->n += 1;
    double d = x - s->mean;
    s->mean += d / s->n;
    s->m2 += d * (x - s->mean);
    s->min = x < s->min ? x : s->min;
    s->max = x > s->max ? x : s->max;
}

static void stats_merge(stats *into, const stats *s)
{
    if (s->n == 0)
        return;
    if (into->n == 0) {
        *into = *s;
        return;
    }
    double n = into->n + s->n, d = s->mean - into->mean;
    into->m2 += s->m2 + d * d * into->n * s->n / n;
    into->mean += d * s->n / n;
    into->n = n;
    into->min = s->min < into->min ? s->min : into->min;
    into->max = s->max > into->max ? s->max : into->max;
}

static double stats_std(const stats *s)
{
    return s->n > 1 ? sqrt(s->m2 / (s->n - 1)) : 0.0;
}

static void stats_print(const stats *s, int json)
{
    if (json)
        printf("\"count\":%.0f,\"mean\":%.4f,\"std\":%.4f,\"min\":%g,\"max\":%g", s->n, s->mean,
               stats_std(s), s->min, s->max);
    else
        printf("count=%.0f mean=%.4f std=%.4f min=%g max=%g", s->n, s->mean, stats_std(s), s->min,
               s->max);
}

static void usage(void)
{
    fprintf(stderr, "usage: dcmstat [--roi X0,Y0,W,H] [--slices A:B] [--per-slice] [--json] "
                    "FILE|DIR...\n");
}

static int parse_long(const char *s, const char **end, long *out)
{
    char *e;
    errno = 0;
    long v = strtol(s, &e, 10);
    if (e == s || errno || v < 0 || v > INT_MAX)
        return -1;
    *out = v;
    *end = e;
    return 0;
}

static int parse_roi(const char *s, opts *o)
{
    const char *p = s;
    for (int i = 0; i < 4; i++) {
        long v;
        if (parse_long(p, &p, &v) < 0 || *p != (i < 3 ? ',' : '\0') || (i >= 2 && v == 0)) {
            fprintf(stderr, "dcmstat: --roi: expected X0,Y0,W,H (W, H > 0), got '%s'\n", s);
            return -1;
        }
        o->roi[i] = (int)v;
        p++;
    }
    o->has_roi = 1;
    return 0;
}

static int parse_slices(const char *s, opts *o)
{
    const char *p = s;
    o->first = 0;
    o->last = LONG_MAX;
    if (*p != ':' && parse_long(p, &p, &o->first) < 0)
        goto bad;
    if (*p == '\0') {
        o->last = o->first + 1;
        return 0;
    }
    if (*p++ != ':')
        goto bad;
    if (*p != '\0' && (parse_long(p, &p, &o->last) < 0 || *p != '\0'))
        goto bad;
    if (o->last <= o->first)
        goto bad;
    return 0;
bad:
    fprintf(stderr, "dcmstat: --slices: expected A:B with 0 <= A < B, got '%s'\n", s);
    return -1;
}

static int parse_args(int argc, char **argv, opts *o)
{
    static const struct option lo[] = {
        {"roi", 1, 0, 'r'},  {"slices", 1, 0, 's'}, {"per-slice", 0, 0, 'p'},
        {"json", 0, 0, 'j'}, {"help", 0, 0, 'h'},   {0, 0, 0, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        if (c == 'r' && parse_roi(optarg, o) == 0)
            continue;
        if (c == 's' && parse_slices(optarg, o) == 0)
            continue;
        if (c == 'p' || c == 'j') {
            *(c == 'p' ? &o->per_slice : &o->json) = 1;
            continue;
        }
        return -1;
    }
    if (optind == argc) {
        fprintf(stderr, "dcmstat: no file or directory given\n");
        return -1;
    }
    return 0;
}

static int images_push(images *im, const char *path)
{
    if (im->n == im->cap) {
        size_t cap = im->cap ? 2 * im->cap : 64;
        image *v = realloc(im->v, cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        im->v = v;
        im->cap = cap;
    }
    memset(&im->v[im->n], 0, sizeof im->v[im->n]);
    if (!(im->v[im->n].path = strdup(path)))
        return -ENOMEM;
    im->n++;
    return 0;
}

static void images_free(images *im)
{
    for (size_t i = 0; i < im->n; i++)
        free(im->v[i].path);
    free(im->v);
}

/* Adds FILE, or every regular file directly in DIR. */
static int collect(images *im, const char *arg)
{
    struct stat st;
    if (stat(arg, &st) < 0) {
        fprintf(stderr, "dcmstat: %s: %s\n", arg, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        if (!S_ISREG(st.st_mode)) {
            fprintf(stderr, "dcmstat: %s: not a regular file or directory\n", arg);
            return -1;
        }
        return images_push(im, arg) < 0 ? -1 : 0;
    }
    DIR *d = opendir(arg);
    if (!d) {
        fprintf(stderr, "dcmstat: %s: %s\n", arg, strerror(errno));
        return -1;
    }
    struct dirent *e;
    char path[PATH_MAX];
    int err = 0;
    while (err == 0 && (e = readdir(d))) {
        snprintf(path, sizeof path, "%s/%s", arg, e->d_name);
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
            err = images_push(im, path);
    }
    closedir(d);
    if (err < 0)
        fprintf(stderr, "dcmstat: out of memory\n");
    return err < 0 ? -1 : 0;
}

static int read_header(image *img)
{
    scp_slice_info info;
    char err[256] = "";
    int rc = scp_slice_read_info(img->path, &info, err, sizeof err);
    if (rc < 0) {
        fprintf(stderr, "dcmstat: %s: %s%s%s\n", img->path, ldct_strerror(rc), *err ? ": " : "",
                err);
        return -1;
    }
    img->rows = info.rows;
    img->cols = info.cols;
    img->frames = info.frames > 0 ? info.frames : 1;
    img->instance_number = info.instance_number;
    img->has_geometry = info.has_position && info.has_orientation;
    if (img->has_geometry) {
        const double *r = info.orientation, *c = info.orientation + 3;
        double nx = r[1] * c[2] - r[2] * c[1], ny = r[2] * c[0] - r[0] * c[2],
               nz = r[0] * c[1] - r[1] * c[0];
        img->along_normal = nx * info.position[0] + ny * info.position[1] + nz * info.position[2];
    }
    scp_slice_info_free(&info);
    return 0;
}

static int g_by_geometry; /* qsort has no context argument in C11 */

static int image_cmp(const void *a, const void *b)
{
    const image *x = a, *y = b;
    if (g_by_geometry && x->along_normal != y->along_normal)
        return x->along_normal < y->along_normal ? -1 : 1;
    if (x->instance_number != y->instance_number)
        return x->instance_number < y->instance_number ? -1 : 1;
    return strcmp(x->path, y->path);
}

static void print_slice(const opts *o, long slice, const image *img, int frame, const stats *s,
                        int *first_json)
{
    if (o->json) {
        printf("%s{\"slice\":%ld,\"file\":", *first_json ? "" : ",", slice);
        json_write_string(stdout, img->path);
        printf(",\"frame\":%d,", frame);
        stats_print(s, 1);
        printf("}");
        *first_json = 0;
        return;
    }
    printf("slice=%ld file=%s", slice, img->path);
    if (img->frames > 1)
        printf(" frame=%d", frame);
    printf(" ");
    stats_print(s, 0);
    printf("\n");
}

/* Accumulates the ROI of every selected frame of img into total; slice is
 * the global index of its first frame. */
static int measure(const opts *o, const image *img, long slice, stats *total, int *first_json)
{
    int x0 = 0, y0 = 0, w = img->cols, h = img->rows;
    if (o->has_roi) {
        x0 = o->roi[0], y0 = o->roi[1], w = o->roi[2], h = o->roi[3];
        if ((long)x0 + w > img->cols || (long)y0 + h > img->rows) {
            fprintf(stderr, "dcmstat: %s: ROI %d,%d,%d,%d does not fit a %dx%d image\n", img->path,
                    x0, y0, w, h, img->cols, img->rows);
            return -1;
        }
    }
    size_t plane = (size_t)img->rows * img->cols, count = plane * img->frames;
    float *px = malloc(count * sizeof *px);
    if (!px) {
        fprintf(stderr, "dcmstat: %s: out of memory\n", img->path);
        return -1;
    }
    char err[256] = "";
    int rc = scp_slice_read_hu(img->path, px, count, err, sizeof err);
    if (rc < 0) {
        fprintf(stderr, "dcmstat: %s: %s%s%s\n", img->path, ldct_strerror(rc), *err ? ": " : "",
                err);
        free(px);
        return -1;
    }
    for (int f = 0; f < img->frames; f++, slice++) {
        if (slice < o->first || slice >= o->last)
            continue;
        stats s = {0};
        for (int r = y0; r < y0 + h; r++)
            for (int c = x0; c < x0 + w; c++)
                stats_add(&s, px[f * plane + (size_t)r * img->cols + c]);
        stats_merge(total, &s);
        if (o->per_slice)
            print_slice(o, slice, img, f, &s, first_json);
    }
    free(px);
    return 0;
}

static int run(const opts *o, images *im)
{
    int bad = 0;
    g_by_geometry = 1;
    for (size_t i = 0; i < im->n; i++) {
        bad |= read_header(&im->v[i]) < 0;
        g_by_geometry &= im->v[i].has_geometry;
    }
    if (bad)
        return -1;
    qsort(im->v, im->n, sizeof *im->v, image_cmp);

    stats total = {0};
    long slice = 0;
    int first_json = 1;
    if (o->json && o->per_slice)
        printf("{\"slices\":[");
    for (size_t i = 0; i < im->n; i++) {
        const image *img = &im->v[i];
        if (slice + img->frames > o->first && slice < o->last &&
            measure(o, img, slice, &total, &first_json) < 0)
            return -1;
        slice += img->frames;
    }
    if (total.n == 0) {
        fprintf(stderr, "dcmstat: no slice selected (%ld slices in all)\n", slice);
        return -1;
    }
    if (o->json) {
        printf("%s", o->per_slice ? "]," : "{");
        stats_print(&total, 1);
        printf("}\n");
    } else {
        stats_print(&total, 0);
        printf("\n");
    }
    return 0;
}

int main(int argc, char **argv)
{
    opts o = {.first = 0, .last = LONG_MAX};
    if (parse_args(argc, argv, &o) < 0) {
        usage();
        return 2;
    }
    int err = scp_global_init();
    if (err < 0) {
        fprintf(stderr, "dcmstat: DICOM setup failed: %s\n", ldct_strerror(err));
        return 1;
    }
    images im = {0};
    int rc = 0;
    for (int i = optind; i < argc && rc == 0; i++)
        rc = collect(&im, argv[i]);
    if (rc == 0 && im.n == 0) {
        fprintf(stderr, "dcmstat: no file found\n");
        rc = -1;
    }
    if (rc == 0)
        rc = run(&o, &im);
    images_free(&im);
    scp_global_cleanup();
    return rc < 0 ? 1 : 0;
}
