/* Series assembly: the files of one series -> one HU volume; see assemble.h.
 *
 * The load runs in stages, each of which either passes or writes the one
 * sentence that explains the refusal: read every header (in parallel), check
 * each file on its own (an image, greyscale, usable rescale, positioned),
 * check that the files agree with one another (against the value most files
 * share, so the odd file is the one named), check that the volume fits in
 * a quarter of the host's memory, sort the frames along the
 * normal, check the steps between them, then read the pixels (in parallel)
 * straight into their z planes.
 *
 * Invariants: no pixel is read before every header check passed; on failure
 * *out is zeroed and nothing stays allocated. When several files fail to
 * read, the first one in input order is reported, so the message does not
 * depend on thread timing. Any thread; no global state (the OpenMP team is
 * per call, failures are collected under a per-call mutex).
 */
#include "pipeline/assemble.h"

#include "common/err.h"
#include "common/log.h"
#include "scp/scp.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define NAME_LEN 160
#define MSG_LEN 512

/* One frame of the series: its file, its frame index in that file and its
 * position along the normal (mm). */
typedef struct frame_pos {
    double d;
    int file, frame;
} frame_pos;

/* Working state of one load. */
typedef struct loader {
    const char *const *paths;
    int n, nframes;
    scp_slice_info *info; /* n headers, input order */
    char *numbered;       /* n flags: 1 when the instance number names the file unambiguously */
    frame_pos *fp;        /* nframes, sorted along the normal; for a 4D series
                           * t-major: fp[t * nz + z] */
    double normal[3], step;
    int nz, nt, tkey;         /* positions, time points, SCP_TIME_* key (-1: 3D) */
    int slices;               /* asm_series_load_slices: a stack for a slice-by-slice filter */
    int by_number;            /* slices sorted by instance number (no usable places) */
    int geometry;             /* refused for the slices' place in space (asm_series_load_checked) */
    gpu_progress_count count; /* each file's header, then its pixels (4 times as long) */
    char *err;
    size_t err_len;
} loader;

/* Reading's progress: a header (read up to the pixels) against a file's
 * pixels, as measured on a 300-slice 512x512 series: 20 against 106 ms
 * cached, 68 against 198 ms from disk. */
#define HEADER_UNITS 1L
#define PIXEL_UNITS 4L

/* The failure with the lowest file index among parallel reads. */
typedef struct first_fail {
    pthread_mutex_t lock;
    atomic_int idx; /* n while nothing failed */
    int rc;
    char msg[MSG_LEN];
} first_fail;

static int fail(loader *l, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(loader *l, int rc, const char *fmt, ...)
{
    if (l->err && l->err_len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(l->err, l->err_len, fmt, ap);
        va_end(ap);
    }
    return rc;
}

/* ---- naming slices in messages ------------------------------------------ */

/* The last k components of path ("a/b/IMG1.dcm", k 2: "b/IMG1.dcm"); the
 * whole path when it has no more. */
static const char *path_tail(const char *path, int k)
{
    for (const char *s = path + strlen(path); s > path; s--)
        if (s[-1] == '/' && --k == 0)
            return s;
    return path;
}

/* The shortest tail of file i's path that no other file of the series
 * ends with: the base name, unless copies in two folders share it
 * ("copyA/IMG0001.dcm" and "copyB/IMG0001.dcm"). */
static const char *short_name(const loader *l, int i)
{
    for (int k = 1;; k++) {
        const char *tail = path_tail(l->paths[i], k);
        int shared = 0;
        for (int j = 0; j < l->n && !shared; j++)
            shared = j != i && !strcmp(path_tail(l->paths[j], k), tail);
        if (!shared || tail == l->paths[i])
            return tail;
    }
}

/* "slice 37" (or "instance 5" for a multi-frame file) when the instance
 * number names the file unambiguously, else "file IMG0037.dcm" (with as
 * many folders as it takes to tell it from the series' other files). */
static const char *file_name(const loader *l, int i, char *buf, size_t len)
{
    if (!l->numbered[i])
        snprintf(buf, len, "file %s", short_name(l, i));
    else
        snprintf(buf, len, "%s %d", l->info[i].frames > 1 ? "instance" : "slice",
                 l->info[i].instance_number);
    return buf;
}

static void frame_name(const loader *l, const frame_pos *f, char *buf, size_t len)
{
    char fn[NAME_LEN];
    file_name(l, f->file, fn, sizeof fn);
    if (l->info[f->file].frames > 1)
        snprintf(buf, len, "frame %d of %s", f->frame + 1, fn);
    else
        snprintf(buf, len, "%s", fn);
}

/* "slices 12 and 13" when both are numbered single-frame slices, else
 * "<a> and <b>". */
static void pair_name(const loader *l, const frame_pos *a, const frame_pos *b, char *buf,
                      size_t len)
{
    const scp_slice_info *ia = &l->info[a->file], *ib = &l->info[b->file];
    if (l->numbered[a->file] && l->numbered[b->file] && ia->frames == 1 && ib->frames == 1) {
        snprintf(buf, len, "slices %d and %d", ia->instance_number, ib->instance_number);
        return;
    }
    char na[NAME_LEN], nb[NAME_LEN];
    frame_name(l, a, na, sizeof na);
    frame_name(l, b, nb, sizeof nb);
    snprintf(buf, len, "%s and %s", na, nb);
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Marks the files whose instance number is present and unique. */
static int mark_numbered(loader *l)
{
    int *nums = malloc((size_t)l->n * sizeof *nums);
    if (!nums)
        return fail(l, -ENOMEM, "out of memory");
    for (int i = 0; i < l->n; i++)
        nums[i] = l->info[i].instance_number;
    qsort(nums, (size_t)l->n, sizeof *nums, cmp_int);
    for (int i = 0; i < l->n; i++) {
        int v = l->info[i].instance_number;
        const int *hit = bsearch(&v, nums, (size_t)l->n, sizeof *nums, cmp_int);
        /* hit is never NULL; unique when neither neighbour has the value. */
        long k = hit - nums;
        while (k > 0 && nums[k - 1] == v)
            k--;
        l->numbered[i] = v != 0 && (k + 1 >= l->n || nums[k + 1] != v);
    }
    free(nums);
    return 0;
}

/* ---- parallel reads ----------------------------------------------------- */

static void fail_record(first_fail *f, int i, int rc, const char *msg)
{
    pthread_mutex_lock(&f->lock);
    if (i < atomic_load(&f->idx)) {
        f->rc = rc;
        snprintf(f->msg, sizeof f->msg, "%s", msg);
        atomic_store(&f->idx, i);
    }
    pthread_mutex_unlock(&f->lock);
}

static int read_headers(loader *l)
{
    first_fail ff = {.lock = PTHREAD_MUTEX_INITIALIZER, .idx = l->n};
    const int n = l->n;
#pragma omp parallel for schedule(dynamic, 1) if (n > 1)
    for (int i = 0; i < n; i++) {
        /* Files after a failure cannot change which one is reported. */
        if (i > atomic_load(&ff.idx))
            continue;
        char e[MSG_LEN] = "";
        int rc = scp_slice_read_info(l->paths[i], &l->info[i], e, sizeof e);
        if (rc < 0)
            fail_record(&ff, i, rc, e[0] ? e : ldct_strerror(rc));
        gpu_progress_add(&l->count, HEADER_UNITS);
    }
    pthread_mutex_destroy(&ff.lock);
    if (atomic_load(&ff.idx) < n)
        return fail(l, ff.rc, "%s", ff.msg);
    long long total = 0;
    for (int i = 0; i < n; i++)
        total += l->info[i].frames;
    if (total > INT_MAX)
        return fail(l, LDCT_EINPUT, "the series has too many frames (%lld)", total);
    l->nframes = (int)total;
    return mark_numbered(l);
}

/* Reads the pixels of file i into the z planes of its frames. */
static int read_file_pixels(const loader *l, const asm_series *s, int i, char *e, size_t len)
{
    const scp_slice_info *in = &l->info[i];
    size_t plane = (size_t)s->vol.nx * (size_t)s->vol.ny;
    const int *z = s->src[i].z;
    if (in->frames == 1)
        return scp_slice_read_hu(l->paths[i], s->vol.data + (size_t)z[0] * plane, plane, e, len);
    /* The reader writes frames in file order; scatter them afterwards. */
    float *tmp = malloc(plane * (size_t)in->frames * sizeof *tmp);
    if (!tmp) {
        snprintf(e, len, "out of memory");
        return -ENOMEM;
    }
    int rc = scp_slice_read_hu(l->paths[i], tmp, plane * (size_t)in->frames, e, len);
    for (int f = 0; rc == 0 && f < in->frames; f++)
        memcpy(s->vol.data + (size_t)z[f] * plane, tmp + (size_t)f * plane, plane * sizeof *tmp);
    free(tmp);
    return rc;
}

static int read_pixels(loader *l, asm_series *s)
{
    first_fail ff = {.lock = PTHREAD_MUTEX_INITIALIZER, .idx = l->n};
    const int n = l->n;
#pragma omp parallel for schedule(dynamic, 1) if (n > 1)
    for (int i = 0; i < n; i++) {
        if (i > atomic_load(&ff.idx))
            continue;
        char e[MSG_LEN] = "", name[NAME_LEN], msg[MSG_LEN + NAME_LEN];
        int rc = read_file_pixels(l, s, i, e, sizeof e);
        if (rc < 0) {
            file_name(l, i, name, sizeof name);
            snprintf(msg, sizeof msg, "%s: %s", name, e[0] ? e : ldct_strerror(rc));
            fail_record(&ff, i, rc, msg);
        }
        gpu_progress_add(&l->count, PIXEL_UNITS);
    }
    pthread_mutex_destroy(&ff.lock);
    if (atomic_load(&ff.idx) < n)
        return fail(l, ff.rc, "%s", ff.msg);
    return 0;
}

/* ---- each file on its own ----------------------------------------------- */

static int is_greyscale(const scp_slice_info *s)
{
    return s->samples_per_pixel == 1 &&
           (!strcmp(s->photometric, "MONOCHROME1") || !strcmp(s->photometric, "MONOCHROME2"));
}

/* 1 when the backslash-separated values of `types` include `value`. */
static int has_value(const char *types, const char *value)
{
    size_t n = strlen(value);
    for (const char *p = types; *p;) {
        const char *end = strchr(p, '\\');
        size_t k = end ? (size_t)(end - p) : strlen(p);
        while (k && p[k - 1] == ' ')
            k--;
        if (k == n && strncasecmp(p, value, n) == 0)
            return 1;
        if (!end)
            break;
        p = end + 1;
    }
    return 0;
}

const char *asm_not_processable(const scp_slice_info *s, char *buf, size_t len)
{
    if (s->rows <= 0 || s->cols <= 0)
        snprintf(buf, len, "not an image (SOP class %s)", s->sop_class_uid);
    else if (!is_greyscale(s))
        snprintf(buf, len, "colour images (photometric interpretation '%s')", s->photometric);
    else if (has_value(s->image_type, "LOCALIZER"))
        snprintf(buf, len, "a localizer (image type %s)", s->image_type);
    else
        return NULL;
    return buf;
}

static int all_finite(const double *v, int n)
{
    for (int i = 0; i < n; i++)
        if (!isfinite(v[i]))
            return 0;
    return 1;
}

/* Position and orientation, needed to sort anything but a single frame.
 * The file is named only when it fails (naming searches the other files). */
static int check_placed(loader *l, int i)
{
    const scp_slice_info *s = &l->info[i];
    char name[NAME_LEN], frames[80];
    const char *why = NULL;
    if (!s->has_orientation || !all_finite(s->orientation, 6))
        why = "has no usable image orientation, needed to sort a series of more than one slice";
    else if (s->frames > 1 && !s->frame_positions) {
        snprintf(frames, sizeof frames, "has %d frames but no position for each frame", s->frames);
        why = frames;
    } else if (!s->has_position || !all_finite(s->position, 3) ||
               (s->frame_positions && !all_finite(s->frame_positions, 3 * s->frames)))
        why = "has no usable image position, needed to sort a series of more than one slice";
    if (!why)
        return 0;
    return fail(l, LDCT_EINPUT, "%s %s", file_name(l, i, name, sizeof name), why);
}

static int check_file(loader *l, int i)
{
    const scp_slice_info *s = &l->info[i];
    char name[NAME_LEN];
    if (s->rows <= 0 || s->cols <= 0)
        return fail(l, LDCT_EINPUT, "instance %s is not an image (SOP class %s)",
                    s->sop_instance_uid, s->sop_class_uid);
    if (!is_greyscale(s))
        return fail(l, LDCT_EUNSUPPORTED,
                    "%s is a colour image (photometric interpretation '%s', %d samples per "
                    "pixel); only greyscale images can be processed",
                    file_name(l, i, name, sizeof name), s->photometric, s->samples_per_pixel);
    if (!isfinite(s->rescale_slope) || s->rescale_slope == 0 || !isfinite(s->rescale_intercept))
        return fail(l, LDCT_EINPUT, "%s has an unusable rescale (slope %g, intercept %g)",
                    file_name(l, i, name, sizeof name), s->rescale_slope, s->rescale_intercept);
    if (s->has_spacing && !(s->pixel_spacing[0] > 0 && s->pixel_spacing[1] > 0 &&
                            isfinite(s->pixel_spacing[0]) && isfinite(s->pixel_spacing[1])))
        return fail(l, LDCT_EINPUT, "%s has an unusable pixel spacing (%g\\%g mm)",
                    file_name(l, i, name, sizeof name), s->pixel_spacing[0], s->pixel_spacing[1]);
    if (l->nframes < 2 || l->slices)
        return 0;
    int rc = check_placed(l, i);
    l->geometry |= rc != 0;
    return rc;
}

/* ---- the files against one another --------------------------------------- */

/* One attribute the files must share: the message reads
 * "<name> has <before><value><after>, the others <value>", or without
 * show (patient data, which the log must not hold) "<name> has another
 * <before>than the others". */
typedef struct field_check {
    const char *before, *after;
    int (*same)(const scp_slice_info *a, const scp_slice_info *b);
    void (*show)(const scp_slice_info *s, char *buf, size_t len);
} field_check;

static int close_rel(double a, double b, double rel)
{
    return fabs(a - b) <= rel * fmax(fabs(a), fabs(b));
}

static int same_series(const scp_slice_info *a, const scp_slice_info *b)
{
    return !strcmp(a->series_uid, b->series_uid);
}

static void show_series(const scp_slice_info *s, char *buf, size_t len)
{
    snprintf(buf, len, "%s", s->series_uid[0] ? s->series_uid : "(none)");
}

/* A Series Instance UID belongs to one study (PS3.3 C.7.3.1): instances
 * of one series in two studies cannot make one derived series. */
static int same_study(const scp_slice_info *a, const scp_slice_info *b)
{
    return !strcmp(a->study_uid, b->study_uid);
}

static void show_study(const scp_slice_info *s, char *buf, size_t len)
{
    snprintf(buf, len, "%s", s->study_uid[0] ? s->study_uid : "(none)");
}

/* Instances of two patients under one series UID (a UID collision or a
 * wrong merge) must never become one derived series. */
static int same_patient(const scp_slice_info *a, const scp_slice_info *b)
{
    return !strcmp(a->patient_id, b->patient_id);
}

/* Modality is a series attribute: a CT and an MR image under one series
 * UID are not one volume. */
static int same_modality(const scp_slice_info *a, const scp_slice_info *b)
{
    return !strcmp(a->modality, b->modality);
}

static void show_modality(const scp_slice_info *s, char *buf, size_t len)
{
    snprintf(buf, len, "%s", s->modality[0] ? s->modality : "(none)");
}

static int same_rows(const scp_slice_info *a, const scp_slice_info *b)
{
    return a->rows == b->rows;
}

static void show_rows(const scp_slice_info *s, char *buf, size_t len)
{
    snprintf(buf, len, "%d", s->rows);
}

static int same_cols(const scp_slice_info *a, const scp_slice_info *b)
{
    return a->cols == b->cols;
}

static void show_cols(const scp_slice_info *s, char *buf, size_t len)
{
    snprintf(buf, len, "%d", s->cols);
}

static int same_spacing(const scp_slice_info *a, const scp_slice_info *b)
{
    if (!a->has_spacing || !b->has_spacing)
        return a->has_spacing == b->has_spacing;
    return close_rel(a->pixel_spacing[0], b->pixel_spacing[0], 1e-3) &&
           close_rel(a->pixel_spacing[1], b->pixel_spacing[1], 1e-3);
}

static void show_spacing(const scp_slice_info *s, char *buf, size_t len)
{
    if (!s->has_spacing)
        snprintf(buf, len, "(none)");
    else
        snprintf(buf, len, "%g\\%g mm", s->pixel_spacing[0], s->pixel_spacing[1]);
}

static int same_orientation(const scp_slice_info *a, const scp_slice_info *b)
{
    if (!a->has_orientation || !b->has_orientation)
        return a->has_orientation == b->has_orientation;
    for (int k = 0; k < 6; k++)
        if (!(fabs(a->orientation[k] - b->orientation[k]) <= 1e-4))
            return 0;
    return 1;
}

static void show_orientation(const scp_slice_info *s, char *buf, size_t len)
{
    const double *o = s->orientation;
    if (!s->has_orientation)
        snprintf(buf, len, "(none)");
    else
        snprintf(buf, len, "%g\\%g\\%g\\%g\\%g\\%g", o[0], o[1], o[2], o[3], o[4], o[5]);
}

static int same_for(const scp_slice_info *a, const scp_slice_info *b)
{
    return !strcmp(a->frame_of_reference_uid, b->frame_of_reference_uid);
}

static void show_for(const scp_slice_info *s, char *buf, size_t len)
{
    snprintf(buf, len, "%s", s->frame_of_reference_uid[0] ? s->frame_of_reference_uid : "(none)");
}

static int same_alloc(const scp_slice_info *a, const scp_slice_info *b)
{
    return a->bits_allocated == b->bits_allocated;
}

static void show_alloc(const scp_slice_info *s, char *buf, size_t len)
{
    snprintf(buf, len, "%d", s->bits_allocated);
}

static int same_stored(const scp_slice_info *a, const scp_slice_info *b)
{
    return a->bits_stored == b->bits_stored;
}

static void show_stored(const scp_slice_info *s, char *buf, size_t len)
{
    snprintf(buf, len, "%d", s->bits_stored);
}

static int same_sign(const scp_slice_info *a, const scp_slice_info *b)
{
    return !a->pixel_representation == !b->pixel_representation;
}

static void show_sign(const scp_slice_info *s, char *buf, size_t len)
{
    snprintf(buf, len, "%s", s->pixel_representation ? "signed" : "unsigned");
}

static int same_photometric(const scp_slice_info *a, const scp_slice_info *b)
{
    return !strcmp(a->photometric, b->photometric);
}

static void show_photometric(const scp_slice_info *s, char *buf, size_t len)
{
    snprintf(buf, len, "%s", s->photometric);
}

static const field_check k_fields[] = {
    {"series UID ", "", same_series, show_series},
    {"study UID ", "", same_study, show_study},
    {"Patient ID ", "", same_patient, NULL},
    {"modality ", "", same_modality, show_modality},
    {"", " rows", same_rows, show_rows},
    {"", " columns", same_cols, show_cols},
    {"pixel spacing ", "", same_spacing, show_spacing},
    {"image orientation ", "", same_orientation, show_orientation},
    {"frame of reference UID ", "", same_for, show_for},
    {"", " bits allocated", same_alloc, show_alloc},
    {"", " bits stored", same_stored, show_stored},
    {"", " pixels", same_sign, show_sign},
    {"photometric interpretation ", "", same_photometric, show_photometric},
};

/* The value most files share when there is a majority (Boyer-Moore vote);
 * else some file's value, which still names a file that differs. */
static int majority(const loader *l, const field_check *c)
{
    int cand = 0, votes = 0;
    for (int i = 0; i < l->n; i++) {
        if (votes == 0) {
            cand = i;
            votes = 1;
        } else {
            votes += c->same(&l->info[i], &l->info[cand]) ? 1 : -1;
        }
    }
    return cand;
}

static int check_field(loader *l, const field_check *c)
{
    int ref = majority(l, c);
    for (int i = 0; i < l->n; i++) {
        if (c->same(&l->info[i], &l->info[ref]))
            continue;
        char name[NAME_LEN], mine[128], theirs[128];
        file_name(l, i, name, sizeof name);
        if (!c->show)
            return fail(l, LDCT_EINPUT, "%s has another %sthan the others (values not logged)",
                        name, c->before);
        c->show(&l->info[i], mine, sizeof mine);
        c->show(&l->info[ref], theirs, sizeof theirs);
        return fail(l, LDCT_EINPUT, "%s has %s%s%s, the others %s", name, c->before, mine, c->after,
                    theirs);
    }
    return 0;
}

/* What a stack of slices filtered one by one need not share: their place
 * in space (each derived slice keeps its source's). */
static int slices_may_differ(const field_check *c)
{
    return c->same == same_spacing || c->same == same_orientation || c->same == same_for;
}

static int check_files(loader *l)
{
    int rc = 0;
    for (int i = 0; rc == 0 && i < l->n; i++)
        rc = check_file(l, i);
    for (size_t k = 0; rc == 0 && k < sizeof k_fields / sizeof k_fields[0]; k++)
        if (!l->slices || !slices_may_differ(&k_fields[k])) {
            rc = check_field(l, &k_fields[k]);
            l->geometry = rc != 0 && slices_may_differ(&k_fields[k]);
        }
    return rc;
}

/* The largest volume a job may load: a quarter of physical memory, since
 * the input volume, the filter's output and its working copies must fit
 * together. SIZE_MAX when the size of memory is unknown. */
static double max_volume_bytes(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (double)pages * (double)page / 4.0 : (double)SIZE_MAX;
}

/* Refuses, before anything is allocated for it, a volume this host cannot
 * hold (headers may declare up to 65535 x 65535 pixels per frame). */
static int check_volume_size(loader *l)
{
    const scp_slice_info *s = &l->info[0];
    double bytes = (double)s->cols * s->rows * l->nframes * sizeof(float), max = max_volume_bytes();
    if (bytes <= max)
        return 0;
    return fail(l, LDCT_EINPUT,
                "the series is too large to process: %dx%d pixels x %d frames need %.1f GiB, "
                "the limit on this host is %.1f GiB (a quarter of its memory)",
                s->cols, s->rows, l->nframes, bytes / 1073741824.0, max / 1073741824.0);
}

/* ---- sorting along the normal and checking the steps -------------------- */

/* The row x column cross product of s's orientation into n; its length
 * (about 0 when the two directions are parallel). */
static double orientation_normal(const scp_slice_info *s, double n[3])
{
    const double *r = s->orientation, *c = s->orientation + 3;
    n[0] = r[1] * c[2] - r[2] * c[1];
    n[1] = r[2] * c[0] - r[0] * c[2];
    n[2] = r[0] * c[1] - r[1] * c[0];
    return sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
}

static int set_normal(loader *l)
{
    const scp_slice_info *s = &l->info[0];
    if (!s->has_orientation) { /* only a single frame gets here without one */
        l->normal[0] = l->normal[1] = 0;
        l->normal[2] = 1;
        return 0;
    }
    double n[3], len = orientation_normal(s, n);
    if (!(len > 1e-6)) {
        char name[NAME_LEN];
        file_name(l, 0, name, sizeof name);
        return fail(l, LDCT_EINPUT,
                    "%s has an image orientation whose row and column directions are parallel",
                    name);
    }
    for (int k = 0; k < 3; k++)
        l->normal[k] = n[k] / len;
    return 0;
}

static int cmp_frame(const void *a, const void *b)
{
    const frame_pos *x = a, *y = b;
    if (x->d != y->d)
        return x->d < y->d ? -1 : 1;
    if (x->file != y->file)
        return x->file < y->file ? -1 : 1;
    return (x->frame > y->frame) - (x->frame < y->frame);
}

/* 1 when every frame has a usable position and its file an orientation. */
static int all_placed(const loader *l)
{
    for (int i = 0; i < l->n; i++) {
        const scp_slice_info *s = &l->info[i];
        if (!s->has_orientation || !all_finite(s->orientation, 6) || !s->has_position ||
            !all_finite(s->position, 3) || (s->frames > 1 && !s->frame_positions) ||
            (s->frame_positions && !all_finite(s->frame_positions, 3 * s->frames)))
            return 0;
    }
    return 1;
}

/* 1 when file 0's row and column directions span a plane. */
static int normal_defined(const loader *l)
{
    double n[3];
    return orientation_normal(&l->info[0], n) > 1e-6;
}

/* A stack without usable positions: by instance number, then file and
 * frame (d counts frames; the spacing is then the thickness). */
static int sort_by_number(loader *l)
{
    l->by_number = 1;
    l->normal[0] = l->normal[1] = 0;
    l->normal[2] = 1;
    int k = 0;
    for (int i = 0; i < l->n; i++)
        for (int f = 0; f < l->info[i].frames; f++)
            l->fp[k++] = (frame_pos){.d = l->info[i].instance_number, .file = i, .frame = f};
    qsort(l->fp, (size_t)l->nframes, sizeof *l->fp, cmp_frame);
    for (k = 0; k < l->nframes; k++)
        l->fp[k].d = k;
    return 0;
}

static int sort_frames(loader *l)
{
    l->fp = malloc((size_t)l->nframes * sizeof *l->fp);
    if (!l->fp)
        return fail(l, -ENOMEM, "out of memory");
    if (l->slices && l->nframes > 1 && (!all_placed(l) || !normal_defined(l)))
        return sort_by_number(l);
    int rc = set_normal(l);
    if (rc < 0) {
        l->geometry = 1;
        return rc;
    }
    int k = 0;
    for (int i = 0; i < l->n; i++) {
        const scp_slice_info *s = &l->info[i];
        for (int f = 0; f < s->frames; f++) {
            const double *p = s->frame_positions ? s->frame_positions + 3 * f : s->position;
            double d = p[0] * l->normal[0] + p[1] * l->normal[1] + p[2] * l->normal[2];
            l->fp[k++] = (frame_pos){.d = d, .file = i, .frame = f};
        }
    }
    qsort(l->fp, (size_t)l->nframes, sizeof *l->fp, cmp_frame);
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The lower median of the steps between sorted frames (robust to one gap in
 * a short series). */
static int median_step(loader *l, double *out)
{
    int m = l->nframes - 1;
    double *st = malloc((size_t)m * sizeof *st);
    if (!st)
        return fail(l, -ENOMEM, "out of memory");
    for (int k = 0; k < m; k++)
        st[k] = l->fp[k + 1].d - l->fp[k].d;
    qsort(st, (size_t)m, sizeof *st, cmp_double);
    *out = st[(m - 1) / 2];
    free(st);
    return 0;
}

static double step_at(const loader *l, int k)
{
    return l->fp[k + 1].d - l->fp[k].d;
}

/* Kinds of bad step, in the order they are looked for. */
enum { STEP_DUPLICATE, STEP_GAP, STEP_UNEVEN };

static int step_is(const loader *l, int kind, double step)
{
    double med = l->step;
    if (kind == STEP_DUPLICATE)
        return step <= fmax(0.01 * med, 1e-4);
    if (kind == STEP_GAP)
        return step > 1.5 * med;
    return fabs(step - med) > 0.1 * med;
}

static int step_fail(loader *l, int kind, int k)
{
    char pair[2 * NAME_LEN + 16];
    pair_name(l, &l->fp[k], &l->fp[k + 1], pair, sizeof pair);
    double step = step_at(l, k), med = l->step;
    if (kind == STEP_DUPLICATE)
        return fail(l, LDCT_EINPUT, "%s are both at %.2f mm (duplicate or second acquisition)",
                    pair, l->fp[k].d + 0.0); /* + 0.0: never "-0.00" */
    if (kind == STEP_GAP)
        return fail(l, LDCT_EINPUT,
                    "gap of %.2f mm between %s, the others are %.2f mm apart (missing slice?)",
                    step, pair, med);
    return fail(l, LDCT_EINPUT,
                "%s are %.2f mm apart, the others %.2f mm (slice spacing varies by more than "
                "10%%)",
                pair, step, med);
}

static int check_steps(loader *l)
{
    double t = l->info[0].slice_thickness;
    if (l->nframes < 2) {
        l->step = isfinite(t) && t > 0 ? t : 1.0;
        return 0;
    }
    int rc = median_step(l, &l->step);
    if (l->slices) { /* any steps: the spacing is only reported */
        if (rc == 0 && (l->by_number || !(l->step > 0)))
            l->step = isfinite(t) && t > 0 ? t : 1.0;
        return rc;
    }
    for (int kind = STEP_DUPLICATE; rc == 0 && kind <= STEP_UNEVEN; kind++)
        for (int k = 0; k + 1 < l->nframes; k++)
            if (step_is(l, kind, step_at(l, k))) {
                l->geometry = 1;
                return step_fail(l, kind, k);
            }
    return rc;
}

/* ---- 4D: repeated positions at several time points ------------------------ */

/* Positions closer than this (mm) are the same slice position. */
#define SAME_POSITION_MM 0.01

static double frame_key(const loader *l, const frame_pos *f, int key)
{
    const scp_slice_info *s = &l->info[f->file];
    if (key == SCP_TIME_INDEX && s->frame_temporal_index)
        return s->frame_temporal_index[f->frame];
    return s->temporal[key];
}

/* Number of positions (groups of frames at the same position) and how many
 * of them repeat; first[g] is the index of group g's first frame. */
static int count_groups(const loader *l, int *first, int *repeated)
{
    int ng = 0;
    *repeated = 0;
    for (int k = 0; k < l->nframes; k++) {
        if (k == 0 || l->fp[k].d - l->fp[first[ng - 1]].d > SAME_POSITION_MM)
            first[ng++] = k;
        else if (k == first[ng - 1] + 1)
            (*repeated)++;
    }
    first[ng] = l->nframes;
    return ng;
}

/* 1 when every frame has the key and no two frames of a position share it. */
static int key_separates(const loader *l, const int *first, int ng, int key)
{
    for (int g = 0; g < ng; g++)
        for (int a = first[g]; a < first[g + 1]; a++) {
            double ka = frame_key(l, &l->fp[a], key);
            if (!isfinite(ka))
                return 0;
            for (int b = first[g]; b < a; b++)
                if (frame_key(l, &l->fp[b], key) == ka)
                    return 0;
        }
    return 1;
}

static int cmp_time(const void *a, const void *b, void *ctx)
{
    const loader *l = ctx;
    double x = frame_key(l, a, l->tkey), y = frame_key(l, b, l->tkey);
    return (x > y) - (x < y);
}

static const char *key_name(int key)
{
    static const char *const names[] = {"TemporalPositionIndex", "TriggerTime",
                                        "NominalPercentageOfCardiacPhase", "AcquisitionTime"};
    return names[key];
}

/* Reorders fp t-major (time rank within each position). */
static int arrange_time_points(loader *l, const int *first, int ng, int nt)
{
    frame_pos *out = malloc((size_t)l->nframes * sizeof *out);
    if (!out)
        return fail(l, -ENOMEM, "out of memory");
    for (int g = 0; g < ng; g++)
        qsort_r(l->fp + first[g], (size_t)nt, sizeof *l->fp, cmp_time, l);
    for (int g = 0; g < ng; g++)
        for (int t = 0; t < nt; t++)
            out[(size_t)t * ng + g] = l->fp[first[g] + t];
    free(l->fp);
    l->fp = out;
    l->nz = ng;
    l->nt = nt;
    return 0;
}

/* A series whose positions mostly repeat is 4D when a temporal attribute
 * tells the repeats apart; each position must then have the same number of
 * time points. Otherwise the series stays 3D and the step checks report the
 * duplicates. */
static int group_time_points(loader *l)
{
    l->nz = l->nframes;
    l->nt = 1;
    l->tkey = -1;
    if (l->slices)
        return 0;
    int *first = malloc(((size_t)l->nframes + 1) * sizeof *first), repeated = 0;
    if (!first)
        return fail(l, -ENOMEM, "out of memory");
    int ng = count_groups(l, first, &repeated), rc = 0;
    for (int key = 0; key < SCP_TIME_KEYS && 2 * repeated > ng && l->tkey < 0; key++)
        if (key_separates(l, first, ng, key))
            l->tkey = key;
    for (int g = 1; l->tkey >= 0 && g < ng && !rc; g++) {
        int n0 = first[1] - first[0], ng_ = first[g + 1] - first[g];
        if (ng_ != n0)
            rc = fail(l, LDCT_EINPUT,
                      "4D series (time points by %s): the slice position at %.2f mm has %d time "
                      "points, the one at %.2f mm has %d; every position needs the same time "
                      "points",
                      key_name(l->tkey), l->fp[first[0]].d + 0.0, n0, l->fp[first[g]].d + 0.0, ng_);
    }
    l->geometry |= rc != 0;
    if (!rc && l->tkey >= 0)
        rc = arrange_time_points(l, first, ng, first[1] - first[0]);
    free(first);
    return rc;
}

/* Step checks on the positions of the first time point. */
static int check_positions(loader *l)
{
    const int all = l->nframes;
    l->nframes = l->nz;
    int rc = check_steps(l);
    l->nframes = all;
    return rc;
}

/* ---- the result ---------------------------------------------------------- */

static int fill_sources(loader *l, asm_series *s)
{
    s->src = calloc((size_t)l->n, sizeof *s->src);
    if (!s->src)
        return fail(l, -ENOMEM, "out of memory");
    s->nsrc = l->n;
    for (int i = 0; i < l->n; i++) {
        const scp_slice_info *in = &l->info[i];
        asm_source *d = &s->src[i];
        snprintf(d->path, sizeof d->path, "%s", l->paths[i]);
        memcpy(d->sop_instance_uid, in->sop_instance_uid, sizeof d->sop_instance_uid);
        memcpy(d->sop_class_uid, in->sop_class_uid, sizeof d->sop_class_uid);
        d->instance_number = in->instance_number;
        d->frames = in->frames;
        d->z = calloc((size_t)in->frames, sizeof *d->z);
        if (!d->z)
            return fail(l, -ENOMEM, "out of memory");
    }
    for (int k = 0; k < l->nframes; k++)
        s->src[l->fp[k].file].z[l->fp[k].frame] = k;
    return 0;
}

static void fill_meta(const loader *l, asm_series *s)
{
    const scp_slice_info *in = &l->info[0];
    memcpy(s->study_uid, in->study_uid, sizeof s->study_uid);
    memcpy(s->series_uid, in->series_uid, sizeof s->series_uid);
    memcpy(s->modality, in->modality, sizeof s->modality);
    memcpy(s->frame_of_reference_uid, in->frame_of_reference_uid, sizeof s->frame_of_reference_uid);
    double t = l->info[l->fp[0].file].slice_thickness;
    s->slice_thickness = isfinite(t) && t > 0 ? t : NAN;
    memcpy(s->normal, l->normal, sizeof s->normal);
    /* DICOM Pixel Spacing is row spacing (y) then column spacing (x). */
    s->vol.spacing[0] = in->has_spacing ? in->pixel_spacing[1] : 1.0;
    s->vol.spacing[1] = in->has_spacing ? in->pixel_spacing[0] : 1.0;
    s->vol.spacing[2] = l->step;
}

static int build_series(loader *l, asm_series *s)
{
    int rc = fill_sources(l, s);
    if (rc < 0)
        return rc;
    rc = gpu_volume_init(&s->vol, l->info[0].cols, l->info[0].rows, l->nz, l->nt);
    if (rc < 0)
        return fail(l, rc, "cannot allocate a %dx%dx%dx%d volume: %s", l->info[0].cols,
                    l->info[0].rows, l->nz, l->nt, ldct_strerror(rc));
    s->temporal_key = l->tkey;
    fill_meta(l, s);
    return 0;
}

static int loader_run(loader *l, asm_series *s)
{
    int rc;
    if ((rc = read_headers(l)) < 0 || (rc = check_files(l)) < 0 ||
        (rc = check_volume_size(l)) < 0 || (rc = sort_frames(l)) < 0 ||
        (rc = group_time_points(l)) < 0 || (rc = check_positions(l)) < 0 ||
        (rc = build_series(l, s)) < 0)
        return rc;
    return read_pixels(l, s);
}

static void loader_free(loader *l)
{
    for (int i = 0; l->info && i < l->n; i++)
        scp_slice_info_free(&l->info[i]);
    free(l->info);
    free(l->numbered);
    free(l->fp);
}

static int load(const char *const *paths, int n, const asm_load_opts *o, asm_series *out, char *err,
                size_t err_len)
{
    if (err && err_len)
        err[0] = '\0';
    if (!out)
        return -EINVAL;
    memset(out, 0, sizeof *out);
    loader l = {.paths = paths, .n = n, .slices = o->slices, .err = err, .err_len = err_len};
    gpu_progress_begin(&l.count, o->progress, 0.0, 1.0,
                       (HEADER_UNITS + PIXEL_UNITS) * (long)(n > 0 ? n : 1));
    gpu_progress_at(o->progress, 0.0); /* a second load (auto) starts again */
    if (n <= 0)
        return fail(&l, LDCT_EINPUT, "the series has no files");
    if (!paths)
        return fail(&l, -EINVAL, "no file list");
    l.info = calloc((size_t)n, sizeof *l.info);
    l.numbered = calloc((size_t)n, 1);
    int rc = l.info && l.numbered ? loader_run(&l, out) : fail(&l, -ENOMEM, "out of memory");
    if (o->geometry)
        *o->geometry = rc == LDCT_EINPUT && l.geometry;
    loader_free(&l);
    if (rc < 0) {
        asm_series_close(out);
        log_debug("series assembly failed: %s", err ? err : ldct_strerror(rc));
        return rc;
    }
    log_debug("series %s: %d positions x %d time points from %d files, %dx%d, %.3g x %.3g x "
              "%.3g mm",
              out->series_uid, out->vol.nz, out->vol.nt, n, out->vol.nx, out->vol.ny,
              out->vol.spacing[0], out->vol.spacing[1], out->vol.spacing[2]);
    gpu_progress_end(&l.count);
    return 0;
}

int asm_series_load_with(const char *const *paths, int n, const asm_load_opts *o, asm_series *out,
                         char *err, size_t err_len)
{
    return load(paths, n, o ? o : &(asm_load_opts){0}, out, err, err_len);
}

int asm_series_load(const char *const *paths, int n, asm_series *out, char *err, size_t err_len)
{
    return load(paths, n, &(asm_load_opts){0}, out, err, err_len);
}

int asm_series_load_checked(const char *const *paths, int n, asm_series *out, int *geometry,
                            char *err, size_t err_len)
{
    return load(paths, n, &(asm_load_opts){.geometry = geometry}, out, err, err_len);
}

int asm_series_load_slices(const char *const *paths, int n, asm_series *out, char *err,
                           size_t err_len)
{
    return load(paths, n, &(asm_load_opts){.slices = 1}, out, err, err_len);
}

void asm_series_close(asm_series *s)
{
    if (!s)
        return;
    gpu_volume_close(&s->vol);
    for (int i = 0; s->src && i < s->nsrc; i++)
        free(s->src[i].z);
    free(s->src);
    memset(s, 0, sizeof *s);
}
