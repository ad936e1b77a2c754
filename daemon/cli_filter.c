/* ldct filter: the daemon's processing, offline, on a folder of DICOM files:
 * files are grouped by series, each series is assembled, denoised and
 * written as a derived series (fresh UIDs) into the output folder.
 * Single-threaded driver; the work itself uses OpenMP or the GPU. */
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "config/config.h"
#include "daemon/cli.h"
#include "gpu/fdk.h"
#include "pipeline/ingest.h"
#include "pipeline/job_progress.h"
#include "pipeline/process.h"
#include "scp/scp.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct filter_opts {
    const char *in, *out, *device, *suffix, *uid_root;
    int algorithm, number_offset;
    int progress_s; /* --progress: seconds between progress lines; 0 = none */
    gpu_nlm_params nlm;
    process_fdk fdk;
    cfg_rule rule; /* numeric options, checked with a [rule]'s bounds */
    int help;      /* --help: usage on stdout, exit 0 */
} filter_opts;

typedef struct input_file {
    char *path;
    char series_uid[65], sop_uid[65];
} input_file;

typedef struct input_list {
    int n, cap;
    input_file *v;
} input_list;

static void filter_usage(FILE *f)
{
    fprintf(f,
            "usage: ldct filter [--algo auto|nlm2d|nlm3d|anlm|adaptive4d|fdk] --in DIR --out DIR\n"
            "       [options]\n"
            "  --algo A            the algorithm (default auto, as a rule's algorithm = auto)\n"
            "  --search-radius N   search window radius (default nlm2d 10, nlm3d 5, anlm 5)\n"
            "  --patch-radius N    patch radius (default nlm2d 3, nlm3d 2; anlm: radii 1\n"
            "                      and 2 with sub-band mixing, N > 0 = one pass)\n"
            "  --patch-weighting W uniform|gaussian: weights of patch positions, nlm2d and\n"
            "                      nlm3d (default uniform; docs/QUALITY.md compares them)\n"
            "  --distance-cutoff C weight 0 for patch distances above C h^2, nlm2d and nlm3d\n"
            "                      (0..80, default 4; 0 = off; scikit-image uses 5)\n"
            "  --h H               filter strength in HU (default 0: from the noise)\n"
            "  --strength X        scales the automatic h, or adaptive4d's noise threshold\n"
            "                      (default 1.0; anlm: h = sqrt 2 x X x local noise)\n"
            "  --device D          cpu | gpu | gpu:N | auto (default auto)\n"
            "  --suffix S          appended to SeriesDescription (default \" [DN]\")\n"
            "  --series-number-offset N  added to SeriesNumber (default 1000)\n"
            "  --uid-root ROOT     root of the new UIDs (default uid_root's,\n"
            "                      1.2.276.0.7230010.3.1.4)\n"
            "  --progress SECONDS  a series that takes longer says how far it is on stderr\n"
            "                      this often (0..3600, default 10; 0 = never)\n"
            "fdk (projection data; auto picks it for DICOM-CT-PD series):\n"
            "  --matrix N          image columns and rows (default 512)\n"
            "  --fov MM            field of view (default: what the fan covers)\n"
            "  --slice-thickness MM  (default: the detector row pitch at the isocentre)\n"
            "  --slices N          (default: those every projection sees across the field)\n"
            "  --kernel K          ram-lak|shepp-logan|cosine|hamming|hann (default shepp-logan)\n"
            "  --mu-water X        water's attenuation per mm for HU (default 0.0193)\n"
            "Every DICOM image file under --in is read (other files are skipped, and\n"
            "of copies of one instance, by SOP Instance UID, the first path is read);\n"
            "each series becomes one derived series in --out (<SOPInstanceUID>.dcm).\n"
            "Numbers have the bounds of the same [rule] keys (ldctd.conf.example).\n");
}

/* Files under --in that were left out, and why the first one was. */
typedef struct skip_log {
    int n;
    char first[2400]; /* "PATH: reason" */
} skip_log;

static int list_push(input_list *l, const char *path, const scp_slice_info *info)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 256;
        input_file *v = realloc(l->v, (size_t)cap * sizeof *v);
        if (!v)
            return -1;
        l->v = v;
        l->cap = cap;
    }
    input_file *f = &l->v[l->n];
    f->path = strdup(path);
    snprintf(f->series_uid, sizeof f->series_uid, "%s", info->series_uid);
    snprintf(f->sop_uid, sizeof f->sop_uid, "%s", info->sop_instance_uid);
    return l->v[l->n++].path ? 0 : -1;
}

/* The name of the first of the file's UIDs that the daemon would refuse
 * at reception (ingest_uid_valid: digits and dots, at most 64), or NULL.
 * Such a value (bytes that are not printable, a second value after a
 * backslash) would end up in the derived series and in the messages. */
static const char *invalid_uid(const scp_slice_info *info)
{
    if (!ingest_uid_valid(info->sop_instance_uid))
        return "(0008,0018) SOP Instance UID";
    if (!ingest_uid_valid(info->study_uid))
        return "(0020,000D) Study Instance UID";
    if (!ingest_uid_valid(info->series_uid))
        return "(0020,000E) Series Instance UID";
    return NULL;
}

/* Counts a file left out; keeps the reason of the first (the reader's
 * message names the file or the instance; the path is added if missing). */
static void skip_note(skip_log *s, const char *path, const char *why)
{
    if (s->n++ > 0)
        return;
    if (!why[0])
        why = "not a regular file";
    if (strstr(why, path))
        snprintf(s->first, sizeof s->first, "%s", why);
    else
        snprintf(s->first, sizeof s->first, "%s: %s", path, why);
}

/* The folders scan has read, by device and inode. Links are followed
 * (a folder of links to a series is read), so a link to a folder above
 * it would make a loop: two links to "." gave 2^40 paths before ELOOP
 * stopped them, and ldct filter never ended. Each folder is read once. */
typedef struct dir_set {
    int n, cap;
    struct dir_id {
        dev_t dev;
        ino_t ino;
    } * v;
} dir_set;

/* 1 if the folder of d was read before, else records it; -1 on failure. */
static int dir_seen(dir_set *seen, DIR *d)
{
    struct stat st;
    if (fstat(dirfd(d), &st) != 0)
        return -1;
    for (int i = 0; i < seen->n; i++)
        if (seen->v[i].dev == st.st_dev && seen->v[i].ino == st.st_ino)
            return 1;
    if (seen->n == seen->cap) {
        int cap = seen->cap ? 2 * seen->cap : 16;
        struct dir_id *v = realloc(seen->v, (size_t)cap * sizeof *v);
        if (!v)
            return -1;
        seen->v = v;
        seen->cap = cap;
    }
    seen->v[seen->n++] = (struct dir_id){st.st_dev, st.st_ino};
    return 0;
}

/* Adds every readable DICOM file under dir (recursively). */
static int scan(const char *dir, input_list *l, skip_log *skipped, dir_set *seen)
{
    DIR *d = opendir(dir);
    if (!d)
        return fprintf(stderr, "ldct filter: cannot open %s\n", dir), -1;
    int rc = dir_seen(seen, d);
    if (rc) {
        closedir(d);
        return rc > 0 ? 0 : (fprintf(stderr, "ldct filter: cannot read %s\n", dir), -1);
    }
    struct dirent *e;
    while (!rc && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            rc = scan(path, l, skipped, seen);
            continue;
        }
        scp_slice_info info;
        char err[512] = "";
        if (!S_ISREG(st.st_mode) || scp_slice_read_info(path, &info, err, sizeof err) != 0) {
            skip_note(skipped, path, err);
            continue;
        }
        const char *bad = invalid_uid(&info);
        if (bad) {
            snprintf(err, sizeof err, "invalid %s (a UID is digits and dots, at most 64)", bad);
            skip_note(skipped, path, err);
            scp_slice_info_free(&info);
            continue;
        }
        rc = list_push(l, path, &info);
        scp_slice_info_free(&info);
    }
    closedir(d);
    return rc;
}

static int by_series(const void *a, const void *b)
{
    const input_file *x = a, *y = b;
    int c = strcmp(x->series_uid, y->series_uid);
    return c ? c : strcmp(x->path, y->path);
}

static int by_sop(const void *a, const void *b)
{
    const input_file *x = a, *y = b;
    int c = strcmp(x->sop_uid, y->sop_uid);
    return c ? c : strcmp(x->path, y->path);
}

/* Keeps one file per SOP Instance UID, as the daemon keeps one instance:
 * the same series copied twice under --in is one series, not every slice
 * twice. The copy with the first path (in byte order) stays; says once on
 * stderr how many were left out. */
static void drop_repeated_instances(input_list *l)
{
    qsort(l->v, (size_t)l->n, sizeof *l->v, by_sop);
    int kept = 0, dropped = 0;
    char first[2400] = "";
    for (int i = 0; i < l->n; i++) {
        const input_file *prev = kept ? &l->v[kept - 1] : NULL;
        if (prev && l->v[i].sop_uid[0] && !strcmp(prev->sop_uid, l->v[i].sop_uid)) {
            if (dropped++ == 0)
                snprintf(first, sizeof first, "%s, the same instance as %s", l->v[i].path,
                         prev->path);
            free(l->v[i].path);
            continue;
        }
        l->v[kept++] = l->v[i];
    }
    l->n = kept;
    if (dropped)
        fprintf(stderr,
                "ldct filter: skipped %d file(s) that repeat a SOP Instance UID already read "
                "(first: %s)\n",
                dropped, first);
}

/* Reads what is under --in: the DICOM images, one per SOP instance, sorted
 * by series; says which files were left out and why. 0, or -1 after
 * saying why there is nothing to do. */
static int read_inputs(const char *dir, input_list *in)
{
    skip_log skipped = {0, ""};
    dir_set seen = {0, 0, NULL};
    int rc = scp_global_init();
    if (!rc) {
        scp_dcmtk_log_quiet(1); /* the summary below says what was skipped */
        rc = scan(dir, in, &skipped, &seen);
        scp_dcmtk_log_quiet(0);
    }
    free(seen.v);
    if (rc)
        return -1;
    if (in->n == 0) {
        if (skipped.n)
            fprintf(stderr, "ldct filter: no DICOM image in %s: %d file(s) skipped (first: %s)\n",
                    dir, skipped.n, skipped.first);
        else
            fprintf(stderr, "ldct filter: no DICOM image in %s: it has no files\n", dir);
        return -1;
    }
    if (skipped.n)
        fprintf(stderr,
                "ldct filter: skipped %d file(s) that are not readable DICOM images (first: %s)\n",
                skipped.n, skipped.first);
    drop_repeated_instances(in);
    qsort(in->v, (size_t)in->n, sizeof *in->v, by_series);
    return 0;
}

static void on_progress(void *ctx, const char *stage, double fraction)
{
    job_progress *p = ctx;
    int64_t now = ldct_mono_ms();
    if (job_progress_update(p, stage, fraction, now) & JOB_PROGRESS_LOG) {
        char text[160];
        job_progress_text(p, now, text, sizeof text);
        fprintf(stderr, "  %s\n", text);
    }
}

static int run_series(const filter_opts *fo, const gpu_device *dev, input_file *files, int n)
{
    const char **paths = malloc((size_t)n * sizeof *paths);
    if (!paths)
        return -1;
    for (int i = 0; i < n; i++)
        paths[i] = files[i].path;
    process_opts o = {.algorithm = fo->algorithm,
                      .nlm = fo->nlm,
                      .fdk = fo->fdk,
                      .dev = dev,
                      .uid_root = fo->uid_root,
                      .description_suffix = fo->suffix,
                      .series_number_offset = fo->number_offset,
                      .out_dir = fo->out};
    /* A series that takes long (the CPU on a large one) says how far it
     * is on stderr every --progress seconds. */
    job_progress progress;
    job_progress_start(&progress, ldct_mono_ms(), fo->progress_s * 1000LL);
    if (fo->progress_s > 0) {
        o.progress = on_progress;
        o.progress_ctx = &progress;
    }
    fprintf(stderr, "series %s: %d file(s)...\n", files[0].series_uid, n);
    process_result r;
    char err[512];
    int rc = process_series(paths, n, &o, &r, err, sizeof err);
    free(paths);
    if (rc) {
        fprintf(stderr, "series %s: %s\n", files[0].series_uid, err);
        return -1;
    }
    char times[32] = "";
    if (r.nt > 1)
        snprintf(times, sizeof times, " x %d time points", r.nt);
    char h[96];
    process_params_text(&r, h, sizeof h);
    printf("series %s -> %s: %d file(s) %dx%dx%d%s, %s on %s%s%s;"
           " load %.2f s, filter %.2f s, write %.2f s\n",
           files[0].series_uid, r.series_uid, r.n, r.nx, r.ny, r.nz, times, r.algorithm, r.device,
           r.gpu_fallback ? " (GPU failed)" : "", h, r.load_s, r.filter_s, r.write_s);
    process_result_free(&r);
    return 0;
}

/* The [rule] key behind each numeric option: the same checks and bounds as
 * the daemon's configuration, so the two cannot drift apart. */
static const struct {
    int code;
    const char *opt, *key;
} RULE_KEYS[] = {
    {'S', "--search-radius", "search_radius"},
    {'P', "--patch-radius", "patch_radius"},
    {'C', "--distance-cutoff", "distance_cutoff"},
    {'H', "--h", "h"},
    {'s', "--strength", "strength"},
    {'n', "--series-number-offset", "series_number_offset"},
    {'M', "--matrix", "matrix"},
    {'F', "--fov", "fov_mm"},
    {'T', "--slice-thickness", "slice_thickness_mm"},
    {'Z', "--slices", "slices"},
    {'K', "--kernel", "kernel"},
    {'W', "--mu-water", "mu_water"},
};

/* 0 when `c` is not a rule-backed option or its value is valid, else -1
 * after saying why; *found tells whether `c` was one. */
static int set_rule_option(filter_opts *o, int c, const char *v, int *found)
{
    *found = 0;
    for (size_t i = 0; i < sizeof RULE_KEYS / sizeof RULE_KEYS[0]; i++) {
        if (RULE_KEYS[i].code != c)
            continue;
        *found = 1;
        const char *why = config_rule_option_set(&o->rule, RULE_KEYS[i].key, v);
        if (why)
            return fprintf(stderr, "ldct filter: %s %s: %s\n", RULE_KEYS[i].opt, v, why), -1;
    }
    return 0;
}

/* Copies the checked values where processing reads them, as the daemon
 * does for a rule (h 0: from the noise). */
static void apply_rule_options(filter_opts *o)
{
    const cfg_rule *r = &o->rule;
    o->nlm.search_radius = r->search_radius;
    o->nlm.patch_radius = r->patch_radius;
    o->nlm.h_auto = !(r->h > 0);
    if (r->h > 0)
        o->nlm.h = (float)r->h;
    o->nlm.strength = (float)r->strength;
    o->nlm.cutoff = (float)r->distance_cutoff;
    o->number_offset = r->series_number_offset;
    o->fdk = (process_fdk){.matrix = r->fdk_matrix,
                           .fov_mm = r->fdk_fov_mm,
                           .slice_mm = r->fdk_slice_mm,
                           .slices = r->fdk_slices,
                           .kernel = r->fdk_kernel,
                           .mu_water = r->fdk_mu_water};
}

/* -1 after naming the required options that are missing. */
static int say_missing(const filter_opts *o)
{
    if (!o->in && !o->out)
        fprintf(stderr, "ldct filter: --in and --out are required\n");
    else
        fprintf(stderr, "ldct filter: %s is required\n", o->in ? "--out" : "--in");
    return -1;
}

/* 0 and *out for a whole number of seconds in 0..3600, else -1. */
static int parse_seconds(const char *v, int *out)
{
    if (!isdigit((unsigned char)v[0])) /* strtol would take " 5" and "+5" */
        return -1;
    char *end;
    errno = 0;
    long s = strtol(v, &end, 10);
    if (errno || end == v || *end || s < 0 || s > 3600)
        return -1;
    *out = (int)s;
    return 0;
}

static int parse_filter(int argc, char **argv, filter_opts *o)
{
    static const struct option longopts[] = {{"algo", 1, 0, 'a'},
                                             {"in", 1, 0, 'i'},
                                             {"out", 1, 0, 'o'},
                                             {"search-radius", 1, 0, 'S'},
                                             {"patch-radius", 1, 0, 'P'},
                                             {"patch-weighting", 1, 0, 'G'},
                                             {"distance-cutoff", 1, 0, 'C'},
                                             {"h", 1, 0, 'H'},
                                             {"strength", 1, 0, 's'},
                                             {"device", 1, 0, 'd'},
                                             {"suffix", 1, 0, 'x'},
                                             {"series-number-offset", 1, 0, 'n'},
                                             {"uid-root", 1, 0, 'u'},
                                             {"matrix", 1, 0, 'M'},
                                             {"fov", 1, 0, 'F'},
                                             {"slice-thickness", 1, 0, 'T'},
                                             {"slices", 1, 0, 'Z'},
                                             {"kernel", 1, 0, 'K'},
                                             {"mu-water", 1, 0, 'W'},
                                             {"progress", 1, 0, 'R'},
                                             {"help", 0, 0, 'h'},
                                             {0, 0, 0, 0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'a':
            if ((o->algorithm = process_algorithm_parse(optarg)) < 0)
                return fprintf(stderr, "ldct filter: unknown algorithm '%s'\n", optarg), -1;
            break;
        case 'i':
            o->in = optarg;
            break;
        case 'o':
            o->out = optarg;
            break;
        case 'G':
            if ((o->nlm.gaussian = gpu_nlm_weighting_parse(optarg)) < 0)
                return fprintf(stderr, "ldct filter: unknown patch weighting '%s'\n", optarg), -1;
            break;
        case 'd':
            o->device = optarg;
            break;
        case 'x': {
            const char *why = config_suffix_check(optarg);
            if (why)
                return fprintf(stderr, "ldct filter: --suffix %s: %s\n", optarg, why), -1;
            o->suffix = optarg;
            break;
        }
        case 'u': { /* checked now: a bad root fails only when the UIDs are made */
            const char *why = config_uid_root_check(optarg);
            if (why)
                return fprintf(stderr, "ldct filter: --uid-root %s: %s\n", optarg, why), -1;
            o->uid_root = optarg;
            break;
        }
        case 'R':
            if (parse_seconds(optarg, &o->progress_s))
                return fprintf(stderr,
                               "ldct filter: --progress %s: a whole number of seconds, 0..3600\n",
                               optarg),
                       -1;
            break;
        case 'h':
            o->help = 1;
            return 0;
        default: {
            int found;
            if (set_rule_option(o, c, optarg, &found) || !found)
                return -1;
        }
        }
    }
    if (optind != argc)
        return fprintf(stderr, "ldct filter: unexpected argument '%s'\n", argv[optind]), -1;
    if (!o->in || !o->out) /* --algo has a default (auto) */
        return say_missing(o);
    apply_rule_options(o);
    return 0;
}

/* path with its longest existing leading part resolved (realpath) and
 * the rest, which does not exist yet, appended as given. 0, or -1. */
static int resolve_path(const char *path, char *out)
{
    char head[PATH_MAX], real[PATH_MAX];
    if (snprintf(head, sizeof head, "%s", path) >= (int)sizeof head)
        return -1;
    size_t cut = strlen(head); /* path[0..cut) is head; 0: the current folder */
    while (!realpath(cut ? head : ".", real)) {
        if (cut == 0)
            return -1;
        char *slash = strrchr(head, '/');
        if (slash == head)
            return -1;
        cut = slash ? (size_t)(slash - head) : 0;
        head[cut] = '\0';
    }
    const char *rest = cut ? path + cut + (path[cut] == '/') : path;
    int n = snprintf(out, PATH_MAX, "%s%s%s", real, *rest && strcmp(real, "/") ? "/" : "", rest);
    return n < PATH_MAX ? 0 : -1;
}

/* --out must lie outside --in: results written there would be read as
 * input by the next run (files under --in are read at any depth). */
static int out_inside_in(const filter_opts *o)
{
    char in[PATH_MAX], out[PATH_MAX];
    if (resolve_path(o->in, in) || resolve_path(o->out, out))
        return 0; /* a missing --in is reported by read_inputs */
    size_t n = strlen(in);
    if (strncmp(out, in, n) || (out[n] && out[n] != '/' && strcmp(in, "/")))
        return 0;
    fprintf(stderr,
            "ldct filter: --out %s lies in --in %s: the next run would read the results as"
            " input; choose a folder outside it\n",
            o->out, o->in);
    return 1;
}

int cli_filter(int argc, char **argv)
{
    ldct_config *defaults = NULL;
    if (config_new_defaults(&defaults))
        return 1;
    filter_opts fo = {.device = "auto",
                      .suffix = defaults->rule[0].series_description_suffix,
                      .uid_root = defaults->node.uid_root,
                      .algorithm = ALGO_AUTO,
                      .progress_s = 10,
                      .rule = defaults->rule[0]};
    gpu_nlm_params_default(&fo.nlm);
    int rc = 1;
    input_list in = {0, 0, NULL};
    gpu_device dev;
    int failed = 0;
    if (parse_filter(argc, argv, &fo) || fo.help) {
        filter_usage(fo.help ? stdout : stderr);
        rc = fo.help ? 0 : 2;
        goto done;
    }
    if (out_inside_in(&fo)) {
        rc = 2;
        goto done;
    }
    if (gpu_device_parse(fo.device, &dev)) {
        fprintf(stderr, "ldct filter: device '%s' is not available\n", fo.device);
        goto done;
    }
    if (read_inputs(fo.in, &in))
        goto done;
    for (int i = 0, j; i < in.n; i = j) {
        for (j = i + 1; j < in.n && !strcmp(in.v[j].series_uid, in.v[i].series_uid); j++) {
        }
        failed += run_series(&fo, &dev, in.v + i, j - i) != 0;
    }
    rc = failed ? 1 : 0;
done:
    for (int i = 0; i < in.n; i++)
        free(in.v[i].path);
    free(in.v);
    config_free(defaults);
    return rc;
}
