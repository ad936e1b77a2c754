/* ldct quality: image quality of a series against the simulator's truth
 * (issue 6). Loads both series with the assembly pipeline, reads the
 * phantom layout from the phantom.ini sidecar (--phantom FILE, else next to
 * --ref, else in its parent folder, where `ldct phantom` writes it), and
 * prints the metrics of pipeline/quality.h as text or one JSON object.
 * --png draws truth | input | test | test - truth of the slice nearest the
 * middle in W400 L40 (difference W200 L0); the input is --input DIR, else
 * the `low` series next to --ref when there is one.
 *
 * 4D series (several time points, issue 8): the metrics of
 * pipeline/quality4d.h with the moving edge of the sidecar's [time N]
 * sections; the figure shows the middle time point.
 *
 * Geometry: voxel (0,0,0) lies at the ImagePositionPatient of the first
 * slice; the series must be axial (the phantom's are). Single-threaded
 * driver; metrics use OpenMP.
 */
#include "common/err.h"
#include "common/json.h"
#include "daemon/cli.h"
#include "pipeline/assemble.h"
#include "pipeline/figure.h"
#include "pipeline/quality.h"
#include "pipeline/quality4d.h"
#include "scp/scp.h"

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct quality_opts {
    const char *test, *ref, *input, *png, *layout;
    const char *test_raw, *save_raw; /* float32 volumes, x fastest (other tools) */
    int json;
} quality_opts;

typedef struct loaded {
    asm_series s;
    quality_grid g;
} loaded;

static void quality_usage(FILE *f)
{
    fprintf(f, "usage: ldct quality --test DIR --ref DIR [--json] [--png FILE]\n"
               "  --phantom FILE   layout sidecar (default: phantom.ini next to --ref\n"
               "                   or in its parent folder)\n"
               "  --input DIR      series shown as the input in the figure\n"
               "                   (default: 'low' next to --ref, when present)\n"
               "  --test-raw FILE  the test volume as raw float32 HU (x fastest, then y, z)\n"
               "                   on the reference's grid, instead of --test DIR\n"
               "  --save-raw FILE  also write the test volume so (for other tools)\n");
}

static int parse_quality(int argc, char **argv, quality_opts *o)
{
    static const struct option longopts[] = {{"test", 1, 0, 't'},     {"ref", 1, 0, 'r'},
                                             {"input", 1, 0, 'i'},    {"png", 1, 0, 'p'},
                                             {"test-raw", 1, 0, 'T'}, {"save-raw", 1, 0, 'S'},
                                             {"phantom", 1, 0, 'l'},  {"json", 0, 0, 'j'},
                                             {"help", 0, 0, '?'},     {0, 0, 0, 0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 't':
            o->test = optarg;
            break;
        case 'r':
            o->ref = optarg;
            break;
        case 'i':
            o->input = optarg;
            break;
        case 'p':
            o->png = optarg;
            break;
        case 'T':
            o->test_raw = optarg;
            break;
        case 'S':
            o->save_raw = optarg;
            break;
        case 'l':
            o->layout = optarg;
            break;
        case 'j':
            o->json = 1;
            break;
        default:
            return -1;
        }
    }
    if (!(o->test || o->test_raw) || !o->ref || optind != argc)
        return fprintf(stderr, "ldct quality: --test (or --test-raw) and --ref are required\n"), -1;
    if (!o->test)
        o->test = o->test_raw;
    return 0;
}

/* Paths of the DICOM image files directly in dir (sorted); *n of them. */
static char **list_dicom(const char *dir, int *n)
{
    struct dirent **names;
    int k = scandir(dir, &names, NULL, alphasort);
    if (k < 0)
        return NULL;
    char **paths = calloc((size_t)k + 1, sizeof *paths);
    *n = 0;
    scp_dcmtk_log_quiet(1); /* files that are not DICOM are left out, as said above */
    for (int i = 0; i < k; i++) {
        char path[2048], err[128];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
        scp_slice_info info;
        struct stat st;
        if (paths && names[i]->d_name[0] != '.' && !stat(path, &st) && S_ISREG(st.st_mode) &&
            !scp_slice_read_info(path, &info, err, sizeof err)) {
            scp_slice_info_free(&info);
            paths[(*n)++] = strdup(path);
        }
        free(names[i]);
    }
    scp_dcmtk_log_quiet(0);
    free(names);
    return paths;
}

static void free_list(char **paths, int n)
{
    for (int i = 0; paths && i < n; i++)
        free(paths[i]);
    free(paths);
}

/* The position of the frame at z = 0 (a classic single-frame slice); the
 * series must be axial with rows along +x and columns along +y, as the
 * phantom's layout is given in those axes. */
static int first_position(const asm_series *s, double origin[3], char *err, size_t len)
{
    static const double axial[6] = {1, 0, 0, 0, 1, 0};
    for (int i = 0; i < s->nsrc; i++) {
        if (s->src[i].frames != 1 || s->src[i].z[0] != 0)
            continue;
        scp_slice_info info;
        if (scp_slice_read_info(s->src[i].path, &info, err, len))
            return LDCT_EINPUT;
        memcpy(origin, info.position, 3 * sizeof *origin);
        int ok = info.has_position && info.has_orientation;
        for (int k = 0; ok && k < 6; k++)
            ok = fabs(info.orientation[k] - axial[k]) < 1e-4;
        scp_slice_info_free(&info);
        if (!ok)
            snprintf(err, len, "the series is not axial (1\\0\\0\\0\\1\\0) with positions");
        return ok ? 0 : LDCT_EINPUT;
    }
    snprintf(err, len, "no single-frame slice at the first position");
    return LDCT_EINPUT;
}

static int load(const char *dir, loaded *l)
{
    int n = 0, rc;
    char **paths = list_dicom(dir, &n), err[512] = "";
    if (!paths || n == 0) {
        fprintf(stderr, "ldct quality: no DICOM image in %s\n", dir);
        free_list(paths, n);
        return -1;
    }
    rc = asm_series_load((const char *const *)paths, n, &l->s, err, sizeof err);
    free_list(paths, n);
    if (!rc)
        rc = first_position(&l->s, l->g.origin, err, sizeof err);
    if (rc)
        fprintf(stderr, "ldct quality: %s: %s\n", dir, err[0] ? err : ldct_strerror(rc));
    return rc ? -1 : 0;
}

/* dirname() of a copy. */
static void parent_of(const char *dir, char *out, size_t len)
{
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", dir);
    snprintf(out, len, "%s", dirname(tmp));
}

/* 0 when an output file can be written at path (an existing file that is
 * writable, or a writable folder to create it in), else -1 after saying
 * why: checked before the work, so that a typo in --png does not cost the
 * whole measurement. Creates nothing. */
static int check_writable(const char *option, const char *path)
{
    char dir[1024];
    struct stat st;
    const char *where = path;
    int e = 0;
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode))
            e = EISDIR;
        else if (access(path, W_OK))
            e = errno;
    } else if (errno != ENOENT) {
        e = errno;
    } else {
        parent_of(path, dir, sizeof dir);
        if (access(dir, W_OK | X_OK)) {
            e = errno;
            where = dir;
        }
    }
    if (e)
        fprintf(stderr, "ldct quality: cannot write %s %s: %s: %s\n", option, path, where,
                strerror(e));
    return e ? -1 : 0;
}

static int find_layout(const quality_opts *o, gpu_phantom_layout *l, quality4d_motion *m)
{
    char path[1100], parent[1024], err[512];
    if (o->layout) {
        snprintf(path, sizeof path, "%s", o->layout);
    } else {
        snprintf(path, sizeof path, "%s/phantom.ini", o->ref);
        if (access(path, R_OK)) {
            parent_of(o->ref, parent, sizeof parent);
            snprintf(path, sizeof path, "%s/phantom.ini", parent);
        }
    }
    if (quality_layout_read(path, l, err, sizeof err) ||
        quality4d_motion_read(path, m, err, sizeof err)) {
        fprintf(stderr, "ldct quality: %s (use --phantom FILE)\n", err);
        return -1;
    }
    return 0;
}

/* A JSON number, or null when not finite (PSNR of identical series, CNR
 * without noise). */
static void num(const char *key, double v, const char *fmt)
{
    if (key)
        printf("\"%s\":", key);
    if (isfinite(v))
        printf(fmt, v);
    else
        printf("null");
}

/* A number and the comma after it. */
static void num_c(const char *key, double v, const char *fmt)
{
    num(key, v, fmt);
    printf(",");
}

static void print_json(const quality_opts *o, const gpu_phantom_layout *l, const asm_series *s,
                       const quality_result *r, const quality4d_result *q4)
{
    printf("{\"phantom\":");
    json_write_string(stdout, l->name);
    printf(",\"size\":[%d,%d,%d],", s->vol.nx, s->vol.ny, s->vol.nz);
    if (q4) {
        printf("\"times\":%d,", q4->ntimes);
        num_c("edge_moving_mm", q4->edge_moving_mm, "%.4f");
        num_c("edge_moving_worst_mm", q4->edge_moving_worst_mm, "%.4f");
    }
    num_c("psnr", r->psnr, "%.4f");
    num_c("psnr_range_hu", r->psnr_range, "%.1f");
    num_c("ssim", r->ssim, "%.5f");
    num_c("noise_sd", r->noise_sd, "%.3f");
    num_c("bias_hu", r->bias_hu, "%.3f");
    num_c("max_abs_bias_hu", r->max_abs_bias, "%.3f");
    num_c("noise_spread", r->noise_spread, "%.4f");
    num("edge_rise_mm", r->edge_rise_mm, "%.4f");
    printf(",\"cnr\":[");
    for (int i = 0; i < r->nlesion; i++) {
        printf("%s", i ? "," : "");
        num(NULL, r->lesion[i].cnr, "%.4f");
    }
    printf("],\"lesions\":[");
    for (int i = 0; i < r->nlesion; i++) {
        printf("%s{\"x\":%.1f,\"y\":%.1f,\"diameter_mm\":%.1f,\"nominal_hu\":%.1f,"
               "\"contrast_hu\":%.3f,\"background_sd\":%.3f,",
               i ? "," : "", l->lesion[i].x, l->lesion[i].y, 2 * l->lesion[i].radius,
               l->lesion[i].hu - l->lesion[i].background_hu, r->lesion[i].contrast,
               r->lesion[i].bg_sd);
        num("cnr", r->lesion[i].cnr, "%.4f");
        printf("}");
    }
    printf("],\"rois\":[");
    for (int i = 0; i < r->nroi; i++) {
        printf("%s{\"name\":", i ? "," : "");
        json_write_string(stdout, l->roi[i].name);
        printf(",\"mean\":%.3f,\"sd\":%.3f,\"bias\":%.3f,\"voxels\":%ld}", r->roi[i].mean,
               r->roi[i].sd, r->roi[i].bias, r->roi[i].n);
    }
    printf("],\"test\":");
    json_write_string(stdout, o->test);
    printf(",\"ref\":");
    json_write_string(stdout, o->ref);
    printf("}\n");
}

static void print_text(const gpu_phantom_layout *l, const quality_result *r,
                       const quality4d_result *q4)
{
    if (q4)
        printf("%d time points; moving edge rise (10-90%%) %.3f mm (worst %.3f)\n", q4->ntimes,
               q4->edge_moving_mm, q4->edge_moving_worst_mm);
    printf("psnr %.2f dB (range %.0f HU), ssim %.4f\n", r->psnr, r->psnr_range, r->ssim);
    printf("noise sd %.2f HU, bias %.2f HU (worst %.2f)\n", r->noise_sd, r->bias_hu,
           r->max_abs_bias);
    printf("noise spread (max / min ROI sd) %.3f\n", r->noise_spread);
    if (l->has_edge)
        printf("edge rise (10-90%%) %.3f mm\n", r->edge_rise_mm);
    for (int i = 0; i < r->nlesion; i++)
        printf("lesion %d: %.0f mm, +%.0f HU: contrast %.2f HU, cnr %.3f\n", i + 1,
               2 * l->lesion[i].radius, l->lesion[i].hu - l->lesion[i].background_hu,
               r->lesion[i].contrast, r->lesion[i].cnr);
}

/* The `low` series next to the reference, when it exists. */
static const char *default_input(const quality_opts *o, char *buf, size_t len)
{
    if (o->input)
        return o->input;
    char parent[1024];
    parent_of(o->ref, parent, sizeof parent);
    snprintf(buf, len, "%s/low", parent);
    struct stat st;
    return !stat(buf, &st) && S_ISDIR(st.st_mode) ? buf : NULL;
}

static int write_png(const quality_opts *o, const loaded *test, const loaded *ref,
                     const quality_result *r)
{
    char buf[1100], cap[3][64];
    const char *in_dir = default_input(o, buf, sizeof buf);
    loaded in = {0};
    if (in_dir && load(in_dir, &in))
        return -1;
    const gpu_volume *tv = &test->s.vol, *rv = &ref->s.vol;
    int rc = LDCT_EINPUT;
    if (in_dir && !gpu_volume_same_shape(&in.s.vol, rv)) {
        fprintf(stderr, "ldct quality: %s has another shape\n", in_dir);
        goto done;
    }
    size_t plane = (size_t)rv->nx * rv->ny,
           off = plane * ((size_t)rv->nz * (size_t)(rv->nt / 2) + (size_t)(rv->nz / 2));
    float *diff = malloc(plane * sizeof *diff);
    if (!diff)
        goto done;
    for (size_t i = 0; i < plane; i++)
        diff[i] = tv->data[off + i] - rv->data[off + i];
    snprintf(cap[0], sizeof cap[0], "W400 L40 SLICE %d", rv->nz / 2 + 1);
    snprintf(cap[1], sizeof cap[1], "PSNR %.1f SD %.1f", r->psnr, r->noise_sd);
    snprintf(cap[2], sizeof cap[2], "W200 L0");
    figure_panel p[4] = {{rv->data + off, 40, 400, "TRUTH", cap[0]},
                         {in_dir ? in.s.vol.data + off : NULL, 40, 400, "LOW DOSE", "W400 L40"},
                         {tv->data + off, 40, 400, "DENOISED", cap[1]},
                         {diff, 0, 200, "DENOISED - TRUTH", cap[2]}};
    if (!in_dir)
        memmove(&p[1], &p[2], 2 * sizeof p[0]);
    rc = figure_png_write(o->png, p, in_dir ? 4 : 3, rv->nx, rv->ny);
    if (rc)
        fprintf(stderr, "ldct quality: %s: %s\n", o->png, ldct_strerror(rc));
    free(diff);
done:
    asm_series_close(&in.s);
    return rc ? -1 : 0;
}

/* The test volume from a raw float32 file on the reference's grid. */
static int load_raw(const char *path, const loaded *ref, loaded *test)
{
    const gpu_volume *rv = &ref->s.vol;
    FILE *f = fopen(path, "rb");
    int rc = f ? gpu_volume_init(&test->s.vol, rv->nx, rv->ny, rv->nz, rv->nt) : -1;
    size_t n = gpu_volume_count(rv);
    if (!rc && (fread(test->s.vol.data, sizeof(float), n, f) != n || fgetc(f) != EOF))
        rc = -1;
    if (f)
        fclose(f);
    if (rc) {
        fprintf(stderr, "ldct quality: %s: not %zu float32 values (%dx%dx%dx%d)\n", path, n, rv->nx,
                rv->ny, rv->nz, rv->nt);
        return -1;
    }
    memcpy(test->s.vol.spacing, rv->spacing, sizeof rv->spacing);
    test->g = ref->g;
    return 0;
}

static int save_raw(const char *path, const gpu_volume *v)
{
    FILE *f = fopen(path, "wb");
    size_t n = gpu_volume_count(v);
    int ok = f && fwrite(v->data, sizeof(float), n, f) == n;
    if (f && fclose(f))
        ok = 0;
    if (!ok)
        fprintf(stderr, "ldct quality: cannot write %s\n", path);
    return ok ? 0 : -1;
}

static int same_grid(const loaded *a, const loaded *b)
{
    for (int k = 0; k < 3; k++)
        if (fabs(a->s.vol.spacing[k] - b->s.vol.spacing[k]) > 1e-3 * b->s.vol.spacing[k] ||
            fabs(a->g.origin[k] - b->g.origin[k]) > 1e-2)
            return 0;
    return gpu_volume_same_shape(&a->s.vol, &b->s.vol);
}

/* "; the body phantom needs at least 28 x 28 pixels over this 220 x 220 mm
 * field (some sizes from 24 x 24 fit too)", or nothing when no size up to
 * QUALITY_MAX_SIZE fits. */
static void print_min_size(const loaded *ref, const gpu_phantom_layout *l,
                           const gpu_phantom_edge *extra, int nextra)
{
    const gpu_volume *v = &ref->s.vol;
    int first, n = quality_min_size(v, &ref->g, l, extra, nextra, &first);
    if (!n)
        return;
    fprintf(stderr,
            "; the %s phantom needs at least %d x %ld pixels over this %.0f x %.0f mm field",
            l->name, n, lround((double)v->ny * n / v->nx), v->nx * v->spacing[0],
            v->ny * v->spacing[1]);
    if (first < n)
        fprintf(stderr, " (some sizes from %d x %ld fit too)", first,
                lround((double)v->ny * first / v->nx));
}

/* Says why the measurement failed: a grid too coarse for the regions of
 * the phantom, with the size that would do, else what could not be
 * measured. m: the moving edges (4D), or NULL. */
static void explain_failure(const loaded *ref, const gpu_phantom_layout *l,
                            const quality4d_motion *m, int err, const char *why)
{
    const gpu_volume *v = &ref->s.vol;
    const gpu_phantom_edge *extra = m ? m->edge : NULL;
    const int nextra = m ? m->ntimes : 0;
    char fit[192];
    if (quality_layout_fits(v, &ref->g, l, extra, nextra, fit, sizeof fit) != LDCT_EINPUT) {
        fprintf(stderr, "ldct quality: cannot measure: %s\n", why[0] ? why : ldct_strerror(err));
        return;
    }
    fprintf(stderr,
            "ldct quality: the volume is too small for the measurement: %s at %d x %d pixels", fit,
            v->nx, v->ny);
    print_min_size(ref, l, extra, nextra);
    fprintf(stderr, "\n");
}

int cli_quality(int argc, char **argv)
{
    quality_opts o = {0};
    if (cli_wants_help(argc, argv))
        return quality_usage(stdout), 0;
    if (parse_quality(argc, argv, &o)) {
        quality_usage(stderr);
        return 2;
    }
    gpu_phantom_layout lay;
    loaded test = {0}, ref = {0};
    quality_result r;
    quality4d_motion *motion = calloc(1, sizeof *motion);
    quality4d_result *q4 = calloc(1, sizeof *q4);
    int rc = 1;
    if ((o.png && check_writable("--png", o.png)) ||
        (o.save_raw && check_writable("--save-raw", o.save_raw)))
        goto done;
    if (!motion || !q4 || scp_global_init() || find_layout(&o, &lay, motion) || load(o.ref, &ref))
        goto done;
    if (o.test_raw ? load_raw(o.test_raw, &ref, &test) : load(o.test, &test))
        goto done;
    if (o.save_raw && save_raw(o.save_raw, &test.s.vol))
        goto done;
    if (!same_grid(&test, &ref)) {
        fprintf(stderr, "ldct quality: %s and %s differ in shape, spacing or position\n", o.test,
                o.ref);
        goto done;
    }
    const int is4d = ref.s.vol.nt > 1;
    int err = is4d ? quality4d_measure(&test.s.vol, &ref.s.vol, &test.g, &lay, motion, q4)
                   : quality_measure(&test.s.vol, &ref.s.vol, &test.g, &lay, &r);
    if (err) {
        explain_failure(&ref, &lay, is4d ? motion : NULL, err, is4d ? q4->pooled.why : r.why);
        goto done;
    }
    if (is4d)
        r = q4->pooled;
    if (o.json)
        print_json(&o, &lay, &test.s, &r, is4d ? q4 : NULL);
    else
        print_text(&lay, &r, is4d ? q4 : NULL);
    rc = o.png && write_png(&o, &test, &ref, &r) ? 1 : 0;
done:
    asm_series_close(&test.s);
    asm_series_close(&ref.s);
    free(motion);
    free(q4);
    return rc;
}
