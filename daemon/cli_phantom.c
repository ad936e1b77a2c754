/* ldct phantom: the low-dose CT simulator on the command line (issue 6).
 * Builds the phantom, scans it (analytic line integrals, Poisson noise at
 * full and at reduced dose), reconstructs both with FDK and writes one
 * synthetic study of three CT series (DIR/truth, DIR/full, DIR/low), the
 * low-dose projections as DICOM-CT-PD (DIR/projections) and the layout
 * sidecar DIR/phantom.ini that `ldct quality` reads.
 *
 * The truth is by default the FDK reconstruction of the noise-free line
 * integrals: it has the scanner's resolution and no noise, so comparing a
 * denoised series with it measures what denoising can change (noise) and
 * not the blur of the imaging chain, which no denoiser undoes; --truth
 * object writes the phantom itself (voxelised) instead.
 *
 * Tags: KVP 120; Exposure (mAs) and CTDIvol scale with the dose from the
 * full-dose reference (--mas, default 200 mAs; CTDIvol 0.06 mGy per mAs,
 * a 120 kVp body scan); patient "PHANTOM^SYNTHETIC" with ID LDCT-SIM-<seed>.
 * Single-threaded driver; the work uses OpenMP (or the GPU through gpu_fdk).
 */
#include "common/err.h"
#include "common/fsutil.h"
#include "config/config.h"
#include "daemon/cli.h"
#include "gpu/phantom.h"
#include "gpu/phantom4d.h"
#include "pipeline/quality.h"
#include "pipeline/quality4d.h"
#include "scp/scp.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MGY_PER_MAS 0.06
/* --fov (mm): the field must stay inside the 595 mm source circle; the
 * body phantom (200 x 150 mm) needs 220 (gpu_phantom_build). */
#define FOV_MIN 10.0
#define FOV_MAX 590.0
#define FOV_BODY 220.0

typedef struct phantom_opts {
    const char *out, *device, *uid_root;
    int kind, object_truth;
    int times;     /* time points: > 1 writes the 4D phantom (gpu/phantom4d.h) */
    double motion; /* scales the heart's beat and shift (4D) */
    double mas;
    gpu_phantom_scan scan;
} phantom_opts;

/* What is shared by every instance of the study. */
typedef struct study_ids {
    char study[65], frame[65], patient_id[32], description[64];
} study_ids;

static void phantom_usage(FILE *f)
{
    fprintf(f, "usage: ldct phantom --out DIR [options]\n"
               "  --phantom P         body | shepp-logan (default body)\n"
               "  --size N            image size N x N, 8 to 2048 (default 256)\n"
               "  --slices Z          slices, 1 to 1024 (default 16)\n"
               "  --thickness MM      slice thickness and distance, 0.1 to 50 (default 1.5)\n"
               "  --fov MM            reconstruction field of view, 220 to 590 for the body,\n"
               "                      10 to 590 for shepp-logan (default 220)\n"
               "  --views N           projections per rotation, 2 to 65536 (default 0 = 4 * size)\n"
               "  --dose F            dose fraction of the low-dose scan, more than 0, at most 1\n"
               "                      (default 0.25)\n"
               "  --i0 N              full-dose photons per mm^2 (isocentre) and view at\n"
               "                      1000 views per rotation, more than 0, at most 1e12\n"
               "                      (default 4e5)\n"
               "  --electronic-noise S  electronic noise, photons sd, 0 to 1e6 (default 0)\n"
               "  --patient-scale F   photon statistics of a patient F times the phantom's\n"
               "                      size, 1 to 10 (default 1; 1.75 = an adult abdomen): noise\n"
               "                      rises towards the centre and behind bone, the image is the\n"
               "                      same\n"
               "  --mas X             full-dose tube current-time product, more than 0, at most\n"
               "                      1e4 (default 200)\n"
               "  --filter F          ram-lak | shepp-logan | cosine | hamming | hann\n"
               "  --seed S            noise seed, 0 to 2^64 - 1 (default 1)\n"
               "  --device D          cpu | gpu | gpu:N | auto (default auto)\n"
               "  --uid-root ROOT     root of the UIDs (default: DCMTK's, as ldctd)\n"
               "  --truth T           recon: FDK of the noise-free projections (default;\n"
               "                      the scanner's resolution, no noise) | object: the\n"
               "                      phantom itself, 3^3 sub-samples per voxel\n"
               "  --times T           time points, 1 to 256 (default 1): T > 1 adds a beating,\n"
               "                      moving heart (body phantom) and writes 4D series\n"
               "  --motion M          scales the heart's beat (3 mm) and shift (1 mm), 0 to 1.75\n"
               "Writes DIR/truth, DIR/full, DIR/low (CT), DIR/projections (DICOM-CT-PD,\n"
               "low dose) and DIR/phantom.ini (layout for ldct quality). With --times:\n"
               "DIR/truth and DIR/low as 4D series (TriggerTime), each time point scanned\n"
               "with its own noise; no full-dose or projection series.\n");
}

/* A numeric option: its bounds (inclusive; lo_open: lo itself is out),
 * whether it takes whole numbers only, and what 0 means when 0 is allowed
 * outside the bounds. Every refused value is reported as
 * "ldct phantom: --size 1: out of range (8 to 2048)". */
typedef struct num_opt {
    int code;
    const char *name;
    double lo, hi;
    int integer, lo_open;
    const char *zero; /* "0 = ..." when 0 is allowed too, else NULL */
    const char *unit; /* after the range: " mm", or "" */
} num_opt;

/* The bounds are those gpu_phantom_geometry and the writers handle: a
 * size of at least 8 pixels, a field inside the 595 mm source circle (the
 * body needs 220 mm, checked in check_phantom_kind), a positive dose of at
 * most the full one, the heart within the soft tissue (--motion, filled in
 * from gpu_phantom_heart_max_motion); the upper bounds of the others keep
 * the arithmetic finite and lie far beyond any scanner's. */
static const num_opt NUM_OPTS[] = {
    {'z', "--size", 8, 2048, 1, 0, NULL, ""},
    {'Z', "--slices", 1, 1024, 1, 0, NULL, ""},
    {'t', "--thickness", 0.1, 50, 0, 0, NULL, " mm"},
    {'f', "--fov", FOV_MIN, FOV_MAX, 0, 0, NULL, " mm"},
    {'v', "--views", 2, 65536, 1, 0, "0 = 4 x --size", ""},
    {'D', "--dose", 0, 1, 0, 1, NULL, ""},
    {'i', "--i0", 0, 1e12, 0, 1, NULL, " photons/mm^2"},
    {'e', "--electronic-noise", 0, 1e6, 0, 0, NULL, " photons"},
    {'P', "--patient-scale", 1, 10, 0, 0, NULL, ""},
    {'m', "--mas", 0, 1e4, 0, 1, NULL, " mAs"},
    {'n', "--times", 1, QUALITY4D_MAX_TIMES, 1, 0, NULL, ""},
    {'M', "--motion", 0, -1, 0, 0, NULL, ""},
};

static const num_opt *num_opt_of(int code)
{
    for (size_t i = 0; i < sizeof NUM_OPTS / sizeof NUM_OPTS[0]; i++)
        if (NUM_OPTS[i].code == code)
            return &NUM_OPTS[i];
    return NULL;
}

/* The upper bound of n (--motion's comes from the phantom). */
static double num_hi(const num_opt *n)
{
    return n->code == 'M' ? gpu_phantom_heart_max_motion() : n->hi;
}

/* "8 to 2048", "0.1 to 50 mm", "more than 0, at most 1", "0 = 4 x --size,
 * or 2 to 65536". */
static void range_text(const num_opt *n, char *out, size_t len)
{
    char lo[32];
    snprintf(lo, sizeof lo, n->lo_open ? "more than %g, at most" : "%g to", n->lo);
    snprintf(out, len, "%s%s%s %g%s", n->zero ? n->zero : "", n->zero ? ", or " : "", lo, num_hi(n),
             n->unit);
}

/* Checks arg against n; -1 after one line naming the option, the value
 * and the allowed range. */
static int check_number(const num_opt *n, const char *arg, double *v)
{
    char *end, range[96];
    const char *why = NULL;
    *v = strtod(arg, &end);
    double hi = num_hi(n);
    if (end == arg || *end)
        why = "not a number";
    else if (n->zero && *v == 0)
        return 0;
    else if (!(n->lo_open ? *v > n->lo : *v >= n->lo) || !(*v <= hi))
        why = "out of range";
    else if (n->integer && *v != floor(*v))
        why = "not a whole number";
    if (!why)
        return 0;
    range_text(n, range, sizeof range);
    fprintf(stderr, "ldct phantom: %s %s: %s (%s)\n", n->name, arg, why, range);
    return -1;
}

/* Stores a checked numeric option. */
static void set_number(phantom_opts *o, int c, double v)
{
    gpu_phantom_scan *s = &o->scan;
    switch (c) {
    case 'z':
        s->size = (int)v;
        break;
    case 'Z':
        s->slices = (int)v;
        break;
    case 't':
        s->thickness = v;
        break;
    case 'f':
        s->fov = v;
        break;
    case 'v':
        s->views = (int)v;
        break;
    case 'D':
        s->dose = v;
        break;
    case 'i':
        s->i0 = v;
        break;
    case 'e':
        s->electronic_sd = v;
        break;
    case 'P':
        s->patient_scale = v;
        break;
    case 'm':
        o->mas = v;
        break;
    case 'n':
        o->times = (int)v;
        break;
    case 'M':
        o->motion = v;
        break;
    }
}

/* A numeric option: checked, then stored. */
static int number_opt(const num_opt *n, const char *arg, phantom_opts *o)
{
    double v;
    if (check_number(n, arg, &v))
        return -1;
    set_number(o, n->code, v);
    return 0;
}

/* The seed as a whole number of 0 to 2^64 - 1 (exact: no double). */
static int parse_seed(const char *arg, uint64_t *seed)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(arg, &end, 10);
    if (end == arg || *end || errno || strchr(arg, '-')) {
        fprintf(stderr, "ldct phantom: --seed %s: %s (0 to %llu)\n", arg,
                errno == ERANGE ? "out of range" : "not a whole number of decimal digits",
                (unsigned long long)UINT64_MAX);
        return -1;
    }
    *seed = v;
    return 0;
}

/* -1 after one line: the value of a word option is not one of choices. */
static int unknown_word(const char *name, const char *arg, const char *choices)
{
    fprintf(stderr, "ldct phantom: %s %s: unknown (%s)\n", name, arg, choices);
    return -1;
}

/* The options that take a word. */
static int word_opt(int c, const char *arg, phantom_opts *o)
{
    const char *why;
    switch (c) {
    case 'o':
        o->out = arg;
        return 0;
    case 'p':
        o->kind = gpu_phantom_kind_parse(arg);
        return o->kind < 0 ? unknown_word("--phantom", arg, "body or shepp-logan") : 0;
    case 'F':
        o->scan.filter = gpu_fdk_filter_parse(arg);
        return o->scan.filter < 0
                   ? unknown_word("--filter", arg, "ram-lak, shepp-logan, cosine, hamming or hann")
                   : 0;
    case 'd':
        o->device = arg;
        return 0;
    case 'u': /* checked now: a bad root fails only when the UIDs are made */
        if ((why = config_uid_root_check(arg)))
            return fprintf(stderr, "ldct phantom: --uid-root %s: %s\n", arg, why), -1;
        o->uid_root = arg;
        return 0;
    case 'T':
        o->object_truth = !strcmp(arg, "object");
        return !o->object_truth && strcmp(arg, "recon")
                   ? unknown_word("--truth", arg, "recon or object")
                   : 0;
    case 'S':
        return parse_seed(arg, &o->scan.seed);
    }
    return -2;
}

/* -1 after saying why (one line), -2 for an unknown option (getopt said
 * so; the usage follows). */
static int parse_opt(int c, const char *arg, phantom_opts *o)
{
    if (c == '?' || c == ':')
        return -2;
    const num_opt *n = num_opt_of(c);
    return n ? number_opt(n, arg, o) : word_opt(c, arg, o);
}

/* What depends on the phantom: the body needs a 220 mm field and is the
 * only one with a heart (--times). */
static int check_phantom_kind(const phantom_opts *o)
{
    if (o->kind == GPU_PHANTOM_BODY && o->scan.fov < FOV_BODY) {
        fprintf(stderr,
                "ldct phantom: --fov %g: out of range for the body phantom (%g to %g mm; "
                "shepp-logan: %g to %g mm)\n",
                o->scan.fov, FOV_BODY, FOV_MAX, FOV_MIN, FOV_MAX);
        return -1;
    }
    if (o->times > 1 && o->kind != GPU_PHANTOM_BODY) {
        fprintf(stderr,
                "ldct phantom: --times %d: only the body phantom moves (--times 1 with "
                "--phantom shepp-logan)\n",
                o->times);
        return -1;
    }
    return 0;
}

/* 0, -1 after one line saying why, -2 for a usage error that the usage
 * explains (an unknown option, no --out). */
static int parse_phantom(int argc, char **argv, phantom_opts *o)
{
    /* clang-format off */
    static const struct option longopts[] = {
        {"out", 1, 0, 'o'},       {"phantom", 1, 0, 'p'},
        {"size", 1, 0, 'z'},      {"slices", 1, 0, 'Z'},
        {"thickness", 1, 0, 't'}, {"fov", 1, 0, 'f'},
        {"views", 1, 0, 'v'},     {"dose", 1, 0, 'D'},
        {"i0", 1, 0, 'i'},        {"electronic-noise", 1, 0, 'e'},
        {"mas", 1, 0, 'm'},       {"seed", 1, 0, 'S'},
        {"filter", 1, 0, 'F'},    {"device", 1, 0, 'd'},
        {"uid-root", 1, 0, 'u'},  {"truth", 1, 0, 'T'},
        {"times", 1, 0, 'n'},     {"motion", 1, 0, 'M'},
        {"help", 0, 0, '?'},      {"patient-scale", 1, 0, 'P'},
        {0, 0, 0, 0}};
    /* clang-format on */
    int c, rc;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1)
        if ((rc = parse_opt(c, optarg, o)))
            return rc;
    if (optind != argc)
        return fprintf(stderr, "ldct phantom: unexpected argument '%s'\n", argv[optind]), -2;
    if (!o->out)
        return fprintf(stderr, "ldct phantom: --out is required\n"), -2;
    return check_phantom_kind(o);
}

/* mkdir -p: --out may name a folder whose parents do not exist yet. */
static int make_dir(const char *path)
{
    int rc = fs_mkdirs(path);
    if (rc) {
        fprintf(stderr, "ldct phantom: cannot create %s: %s\n", path, ldct_strerror(rc));
        return -1;
    }
    return 0;
}

static int new_uid(const phantom_opts *o, char *out)
{
    return scp_uid_new(o->uid_root ? o->uid_root : "1.2.276.0.7230010.3.1.4", out, 65);
}

/* Where a series goes: its folder, UID and, for 4D, the time point. */
typedef struct series_slot {
    const char *name;
    int number;
    double dose;       /* 0: the truth */
    char uid[65];      /* SeriesInstanceUID, shared by all time points */
    int t, times;      /* time point t of times (times = 1: a 3D series) */
    double trigger_ms; /* TriggerTime of the time point (4D) */
} series_slot;

/* Creates DIR/<name> and a new series UID (time point 0 of the slot). */
static int open_slot(const phantom_opts *o, series_slot *s)
{
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/%s", o->out, s->name);
    return make_dir(dir) || new_uid(o, s->uid) ? -1 : 0;
}

/* One time point of a CT series of the study: HU volume into
 * DIR/<name>/IMG####.dcm, numbered on from the earlier time points. */
static int write_slot(const phantom_opts *o, const study_ids *ids, const gpu_volume *vol,
                      const gpu_fdk_volume *v, const series_slot *slot)
{
    const char *name = slot->name, *series = slot->uid;
    const double dose = slot->dose;
    const int number = slot->number;
    char dir[1100], desc[64], path[1200], trigger[32];
    snprintf(dir, sizeof dir, "%s/%s", o->out, name);
    snprintf(trigger, sizeof trigger, "%.3f", slot->trigger_ms);
    int16_t *px = malloc((size_t)vol->nx * vol->ny * sizeof *px);
    if (!px)
        return -1;
    if (dose > 0)
        snprintf(desc, sizeof desc, "PHANTOM %s DOSE %.0f%% %.0f mAs",
                 !strcmp(name, "low") ? "LOW" : "FULL", dose * 100, o->mas * dose);
    else
        snprintf(desc, sizeof desc, "PHANTOM TRUTH (NOISE-FREE)");
    scp_ct_params p = {.patient_name = "PHANTOM^SYNTHETIC",
                       .patient_id = ids->patient_id,
                       .study_uid = ids->study,
                       .series_uid = series,
                       .frame_of_reference_uid = ids->frame,
                       .study_description = ids->description,
                       .series_description = desc,
                       .series_number = number,
                       .rows = vol->ny,
                       .cols = vol->nx,
                       .pixel_spacing = {v->voxel[1], v->voxel[0]},
                       .slice_thickness = v->voxel[2],
                       .orientation = {1, 0, 0, 0, 1, 0},
                       .rescale_slope = 1,
                       .rescale_intercept = -1024,
                       .kvp = 120,
                       .exposure_mas = o->mas * dose,
                       .ctdivol = MGY_PER_MAS * o->mas * dose,
                       .convolution_kernel = dose > 0 ? gpu_fdk_filter_name(o->scan.filter) : NULL,
                       .trigger_time = slot->times > 1 ? trigger : NULL,
                       .pixels = px};
    int rc = 0;
    for (int z = 0; z < vol->nz && !rc; z++) {
        const float *s = vol->data + (size_t)z * vol->nx * vol->ny;
        for (size_t i = 0; i < (size_t)vol->nx * vol->ny; i++)
            px[i] = (int16_t)fmax(-32768, fmin(32767, lrintf(s[i]) + 1024));
        char sop[65];
        int index = slot->t * vol->nz + z + 1;
        p.instance_number = index;
        p.position[0] = v->origin[0];
        p.position[1] = v->origin[1];
        p.position[2] = v->origin[2] + z * v->voxel[2];
        p.sop_uid = sop;
        snprintf(path, sizeof path, "%s/IMG%04d.dcm", dir, index);
        rc = new_uid(o, sop) ? -1 : scp_ct_write(&p, path);
        if (rc)
            fprintf(stderr, "ldct phantom: %s: %s\n", path, ldct_strerror(rc));
    }
    free(px);
    return rc;
}

/* One 3D CT series of the study. */
static int write_series(const phantom_opts *o, const study_ids *ids, const gpu_volume *vol,
                        const gpu_fdk_volume *v, const char *name, int number, double dose)
{
    series_slot s = {.name = name, .number = number, .dose = dose, .t = 0, .times = 1};
    return open_slot(o, &s) ? -1 : write_slot(o, ids, vol, v, &s);
}

static int write_projections(const phantom_opts *o, const study_ids *ids, const gpu_fdk_geometry *g,
                             const gpu_volume *proj)
{
    char dir[1100], series[65], path[1200], err[256];
    snprintf(dir, sizeof dir, "%s/projections", o->out);
    if (make_dir(dir) || new_uid(o, series))
        return -1;
    scp_ctpd_params p = {.patient_name = "PHANTOM^SYNTHETIC",
                         .patient_id = ids->patient_id,
                         .study_uid = ids->study,
                         .series_uid = series,
                         /* the image series' frame: an FDK result registers with them */
                         .frame_of_reference_uid = ids->frame,
                         .series_description = "PHANTOM LOW DOSE PROJECTIONS",
                         .rescale_slope = 4e-4,
                         .rescale_intercept = 0};
    scp_ctpd_info *geo = &p.geo;
    geo->det_rows = g->nv;
    geo->det_cols = g->nu;
    geo->elem_transverse_mm = g->du;
    geo->elem_axial_mm = g->dv;
    snprintf(geo->det_shape, sizeof geo->det_shape, "FLAT");
    snprintf(geo->ffs_mode, sizeof geo->ffs_mode, "FFSNONE");
    geo->radial_mm = g->dso;
    geo->src_det_mm = g->dsd;
    geo->central_col = g->cu + 1;
    geo->central_row = g->cv + 1;
    geo->views_per_rotation = g->nproj;
    for (int i = 0; i < g->nproj; i++) {
        char sop[65];
        if (new_uid(o, sop))
            return -1;
        p.sop_uid = sop;
        p.instance_number = i + 1;
        geo->angle_rad = g->angles[i];
        p.values = proj->data + (size_t)i * g->nu * g->nv;
        snprintf(path, sizeof path, "%s/PROJ%05d.dcm", dir, i + 1);
        if (scp_ctpd_write(&p, path, err, sizeof err)) {
            fprintf(stderr, "ldct phantom: %s: %s\n", path, err);
            return -1;
        }
    }
    return 0;
}

/* Scans the clean projections at count i0_eff and reconstructs into out. */
static int scan_and_reconstruct(const phantom_opts *o, const gpu_fdk_geometry *g,
                                const gpu_volume *clean, gpu_volume *noisy, double i0_eff,
                                int stream, const gpu_fdk_volume *v, gpu_volume *out,
                                const gpu_device *dev)
{
    double scale = o->scan.patient_scale > 1 ? o->scan.patient_scale : 1;
    int rc = gpu_phantom_noise_scaled(clean, i0_eff, scale, o->scan.electronic_sd, o->scan.seed,
                                      (uint64_t)stream, noisy);
    if (!rc)
        rc = gpu_phantom_reconstruct(&o->scan, g, noisy, v, out, dev);
    if (rc)
        fprintf(stderr, "ldct phantom: reconstruction failed: %s\n", ldct_strerror(rc));
    return rc;
}

/* The study's identifiers and the output folder. */
static int study_open(const phantom_opts *o, const gpu_phantom *ph, study_ids *ids)
{
    snprintf(ids->patient_id, sizeof ids->patient_id, "LDCT-SIM-%llu",
             (unsigned long long)o->scan.seed);
    snprintf(ids->description, sizeof ids->description, "LDCT SIMULATOR %s%s SEED %llu",
             ph->layout.name, o->times > 1 ? " 4D" : "", (unsigned long long)o->scan.seed);
    return make_dir(o->out) || new_uid(o, ids->study) || new_uid(o, ids->frame) ? -1 : 0;
}

/* The heart's rim at time point t as the edge `ldct quality` measures. */
static gpu_phantom_edge heart_edge(const gpu_phantom_heart *h, int t, int times)
{
    gpu_phantom_heart_state st = gpu_phantom_heart_at(h, t, times);
    return (gpu_phantom_edge){.x = st.x,
                              .y = st.y,
                              .radius = st.radius,
                              .inside_hu = h->hu,
                              .outside_hu = 40,
                              .uniform_to = gpu_phantom_heart_uniform_to(h, st)};
}

/* -1 after saying which step failed and why. */
static int step_failed(const char *what, int rc)
{
    fprintf(stderr, "ldct phantom: %s: %s\n", what, ldct_strerror(rc));
    return -1;
}

/* The phantom and the scan geometry; fails only for settings that the
 * option checks let through. */
static int build_scan(const phantom_opts *o, gpu_phantom *ph, gpu_fdk_geometry *g,
                      gpu_fdk_volume *v)
{
    int rc = gpu_phantom_build(o->kind, o->scan.fov, ph);
    if (!rc)
        rc = gpu_phantom_geometry(&o->scan, g, v);
    return rc ? step_failed("no scan can be made with these settings", rc) : 0;
}

/* Two projection buffers (nu x nv x nproj) and the image volume; says how
 * much memory did not fit. */
static int alloc_volumes(const gpu_fdk_geometry *g, const gpu_fdk_volume *v, gpu_volume vols[3])
{
    int rc = gpu_volume_init(&vols[0], g->nu, g->nv, g->nproj, 1);
    if (!rc)
        rc = gpu_volume_init(&vols[1], g->nu, g->nv, g->nproj, 1);
    if (!rc)
        rc = gpu_volume_init(&vols[2], v->nx, v->ny, v->nz, 1);
    if (!rc)
        return 0;
    double n = 2.0 * g->nu * g->nv * g->nproj + (double)v->nx * v->ny * v->nz;
    fprintf(stderr,
            "ldct phantom: cannot allocate %.0f MiB for the projections and the volume: %s\n",
            n * sizeof(float) / 1048576, ldct_strerror(rc));
    return -1;
}

/* The truth of phantom ph into img: the noise-free scan's reconstruction
 * from clean projections, or the phantom itself (--truth object). */
static int make_truth(const phantom_opts *o, const gpu_phantom *ph, const gpu_fdk_geometry *g,
                      const gpu_volume *clean, const gpu_fdk_volume *v, gpu_volume *img,
                      const gpu_device *dev)
{
    int rc = o->object_truth ? gpu_phantom_truth(ph, v, img)
                             : gpu_phantom_reconstruct(&o->scan, g, clean, v, img, dev);
    return rc ? step_failed("the truth", rc) : 0;
}

/* Time point t of the 4D phantom: the heart moved, projections of its own,
 * the truth and the low-dose scan (noise stream 1 + 2t: independent per
 * time point) reconstructed and written. */
static int scan_time_point(const phantom_opts *o, const study_ids *ids, const gpu_phantom *ph,
                           const gpu_fdk_geometry *g, const gpu_fdk_volume *v, gpu_volume *vols,
                           series_slot *slots, const gpu_device *dev)
{
    gpu_volume *clean = &vols[0], *noisy = &vols[1], *img = &vols[2];
    int rc = gpu_phantom_project(ph, g, clean);
    if (rc)
        return step_failed("projections", rc);
    if (make_truth(o, ph, g, clean, v, img, dev))
        return -1;
    if (write_slot(o, ids, img, v, &slots[0]))
        return -1;
    double i0 = gpu_phantom_i0_element(&o->scan, g) * o->scan.dose;
    if (scan_and_reconstruct(o, g, clean, noisy, i0, 1 + 2 * slots[1].t, v, img, dev))
        return -1;
    return write_slot(o, ids, img, v, &slots[1]);
}

static int simulate4d(const phantom_opts *o, const gpu_device *dev)
{
    gpu_phantom base, ph;
    gpu_phantom_heart heart;
    gpu_fdk_geometry g = {0};
    gpu_fdk_volume v;
    gpu_volume vols[3] = {{0}};
    study_ids ids = {.study = ""};
    series_slot slots[2] = {{.name = "truth", .number = 1, .dose = 0, .times = o->times},
                            {.name = "low", .number = 3, .dose = o->scan.dose, .times = o->times}};
    quality4d_motion *m = calloc(1, sizeof *m);
    int rc = -1;
    gpu_phantom_heart_default(&heart, o->motion);
    if (!m || build_scan(o, &base, &g, &v))
        goto done;
    int err = gpu_phantom_at_time(&base, &heart, 0, o->times, &ph);
    if (err) {
        step_failed("the heart does not fit the body", err);
        goto done;
    }
    if (study_open(o, &ph, &ids) || open_slot(o, &slots[0]) || open_slot(o, &slots[1]) ||
        alloc_volumes(&g, &v, vols))
        goto done;
    fprintf(stderr, "phantom %s 4D: %d time points, heart rim moves up to %.2f mm per time point\n",
            ph.layout.name, o->times, gpu_phantom_heart_max_step(&heart, o->times));
    for (int t = 0; t < o->times; t++) {
        slots[0].t = slots[1].t = t;
        slots[0].trigger_ms = slots[1].trigger_ms = heart.period_ms * t / o->times;
        m->edge[t] = heart_edge(&heart, t, o->times);
        if (gpu_phantom_at_time(&base, &heart, t, o->times, &ph) ||
            scan_time_point(o, &ids, &ph, &g, &v, vols, slots, dev))
            goto done;
    }
    m->ntimes = o->times;
    char ini[1100];
    snprintf(ini, sizeof ini, "%s/phantom.ini", o->out);
    if (quality_layout_write(&ph.layout, ini) || quality4d_motion_append(m, ini))
        goto done;
    printf("phantom %s 4D -> %s: truth, low %dx%dx%d x %d time points, pixels %.3g mm, slices"
           " %.3g mm apart; dose %.3g\n",
           ph.layout.name, o->out, v.nx, v.ny, v.nz, o->times, v.voxel[0], v.voxel[2],
           o->scan.dose);
    rc = 0;
done:
    for (int i = 0; i < 3; i++)
        gpu_volume_close(&vols[i]);
    gpu_fdk_geometry_close(&g);
    free(m);
    return rc;
}

static int simulate(const phantom_opts *o, const gpu_device *dev)
{
    gpu_phantom ph;
    gpu_fdk_geometry g = {0};
    gpu_fdk_volume v;
    gpu_volume vols[3] = {{0}}, *clean = &vols[0], *noisy = &vols[1], *img = &vols[2];
    study_ids ids = {.study = ""};
    int rc = -1;
    if (build_scan(o, &ph, &g, &v) || study_open(o, &ph, &ids) || alloc_volumes(&g, &v, vols))
        goto done;
    fprintf(stderr,
            "phantom %s: %d views of %dx%d (%.3g photons per element at full dose), "
            "volume %dx%dx%d\n",
            ph.layout.name, g.nproj, g.nu, g.nv, gpu_phantom_i0_element(&o->scan, &g), v.nx, v.ny,
            v.nz);
    int err = gpu_phantom_project(&ph, &g, clean);
    if (err) {
        step_failed("projections", err);
        goto done;
    }
    if (make_truth(o, &ph, &g, clean, &v, img, dev))
        goto done;
    if (write_series(o, &ids, img, &v, "truth", 1, 0))
        goto done;
    fprintf(stderr, "truth written; full dose...\n");
    double i0 = gpu_phantom_i0_element(&o->scan, &g);
    if (scan_and_reconstruct(o, &g, clean, noisy, i0, 0, &v, img, dev) ||
        write_series(o, &ids, img, &v, "full", 2, 1.0))
        goto done;
    fprintf(stderr, "full dose written; low dose (%.3g)...\n", o->scan.dose);
    if (scan_and_reconstruct(o, &g, clean, noisy, i0 * o->scan.dose, 1, &v, img, dev) ||
        write_series(o, &ids, img, &v, "low", 3, o->scan.dose))
        goto done;
    fprintf(stderr, "low dose written; projections...\n");
    char ini[1100];
    snprintf(ini, sizeof ini, "%s/phantom.ini", o->out);
    if (write_projections(o, &ids, &g, noisy) || quality_layout_write(&ph.layout, ini))
        goto done;
    printf("phantom %s -> %s: truth, full, low %dx%dx%d, pixels %.3g mm, slices %.3g mm apart;"
           " %d projections; dose %.3g\n",
           ph.layout.name, o->out, v.nx, v.ny, v.nz, v.voxel[0], v.voxel[2], g.nproj, o->scan.dose);
    rc = 0;
done:
    for (int i = 0; i < 3; i++)
        gpu_volume_close(&vols[i]);
    gpu_fdk_geometry_close(&g);
    return rc;
}

/* An --out folder that already holds something (an earlier phantom's
 * series, with other UIDs and slice counts) would leave a mix that ldct
 * quality and a viewer take as one series: refused, nothing deleted. */
static int out_in_use(const char *out)
{
    DIR *d = opendir(out);
    if (!d)
        return 0; /* missing: created; otherwise make_dir says why */
    int used = 0;
    for (struct dirent *e; !used && (e = readdir(d)) != NULL;)
        used = strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    if (used)
        fprintf(stderr,
                "ldct phantom: --out %s is not empty (its files would mix with the new"
                " series): name a new or empty folder\n",
                out);
    return used;
}

int cli_phantom(int argc, char **argv)
{
    phantom_opts o = {
        .device = "auto", .kind = GPU_PHANTOM_BODY, .mas = 200, .times = 1, .motion = 1};
    gpu_phantom_scan_default(&o.scan);
    if (cli_wants_help(argc, argv))
        return phantom_usage(stdout), 0;
    int rc = parse_phantom(argc, argv, &o);
    if (rc) {
        if (rc == -2)
            phantom_usage(stderr);
        return 2;
    }
    if (out_in_use(o.out))
        return 1;
    gpu_device dev;
    if (gpu_device_parse(o.device, &dev)) {
        fprintf(stderr, "ldct phantom: device '%s' is not available\n", o.device);
        return 1;
    }
    if (scp_global_init())
        return 1;
    return (o.times > 1 ? simulate4d(&o, &dev) : simulate(&o, &dev)) ? 1 : 0;
}
