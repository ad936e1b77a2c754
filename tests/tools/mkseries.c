/* mkseries: writes a synthetic CT series (a body-like phantom in HU plus
 * Gaussian noise) as DIR/IMG0001.dcm ... for tests and benchmarks.
 *
 *   mkseries --out DIR --rows R --cols C --slices N [--thickness MM]
 *            [--spacing MM] [--pixel-spacing MM] [--noise SD] [--seed S]
 *            [--series-description TEXT] [--study-uid UID] [--series-uid UID]
 *            [--patient-id ID] [--series-number N] [--uid-root ROOT]
 *            [--ts implicit|explicit|big|deflate|jpegll|jpegls|rle]
 *            [--times T [--time-key trigger|acquisition]]
 *
 * With --times T the series is 4D: every slice position is written at T
 * time points (files IMG0001.. time point after time point, TriggerTime
 * t * 50 ms, or AcquisitionTime that also advances 0.1 s per slice with
 * --time-key acquisition); the heart and the vessel beat (scale
 * 1 + 0.25 sin(2 pi t / T)).
 *
 * Invariants: the output depends only on the options (the noise is drawn
 * from a generator seeded by --seed; UIDs and dates are the only fresh
 * values). Geometry: axial slices, orientation 1\0\0\0\1\0, centred in x and
 * y, ImagePositionPatient z stepping by --spacing (default: the thickness).
 * Pixels are HU stored as signed 16-bit with slope 1 and intercept 0. The
 * patient is obviously synthetic. Prints a one-line summary on stderr;
 * exits non-zero with a message on any error. Single-threaded.
 */
#include "common/err.h"
#include "common/fsutil.h"
#include "scp/scp.h"

#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct opts {
    const char *out, *description, *study_uid, *series_uid, *patient_id, *uid_root, *ts;
    int rows, cols, slices, series_number, times;
    const char *time_key;
    double thickness, spacing, pixel_spacing, noise;
    uint64_t seed;
} opts;

/* One region of the phantom: an ellipse (centre and semi-axes as fractions
 * of the half field of view) filled with a value in HU. Later regions paint
 * over earlier ones. */
typedef struct region {
    double cx, cy, ax, ay, hu;
} region;

static const region k_regions[] = {
    {0.0, 0.0, 0.80, 0.60, 40},       /* soft tissue (water-ish) */
    {0.0, 0.0, 0.76, 0.56, -100},     /* subcutaneous fat layer inside */
    {0.0, 0.0, 0.72, 0.52, 45},       /* body interior */
    {-0.35, -0.05, 0.25, 0.33, -820}, /* right lung */
    {0.35, -0.05, 0.25, 0.33, -820},  /* left lung */
    {0.05, 0.05, 0.16, 0.14, 50},     /* heart */
    {0.12, -0.12, 0.05, 0.05, 200},   /* contrast-filled vessel */
    {0.0, 0.40, 0.09, 0.08, 700},     /* vertebral body (bone) */
    {0.0, 0.40, 0.05, 0.04, 250},     /* spongy bone inside */
    {0.30, 0.05, 0.03, 0.03, 1200},   /* dense bone insert */
};

static const struct {
    const char *name, *uid;
} k_ts[] = {
    {"implicit", "1.2.840.10008.1.2"},    {"explicit", "1.2.840.10008.1.2.1"},
    {"big", "1.2.840.10008.1.2.2"},       {"deflate", "1.2.840.10008.1.2.1.99"},
    {"jpegll", "1.2.840.10008.1.2.4.70"}, {"jpegls", "1.2.840.10008.1.2.4.80"},
    {"rle", "1.2.840.10008.1.2.5"},
};

/* splitmix64: small, fast, deterministic. */
static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double rng_unit(uint64_t *s)
{
    return ((double)(rng_next(s) >> 11) + 0.5) / 9007199254740992.0;
}

/* Box-Muller; one value per call keeps the sequence simple to reason about. */
static double rng_gauss(uint64_t *s)
{
    double u = rng_unit(s), v = rng_unit(s);
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

static double phantom_hu(double x, double y, double zf, double beat)
{
    double hu = -1000;
    /* Organs change a little along z so slices differ. */
    double k = 1.0 + 0.15 * sin(3.0 * zf);
    for (size_t i = 0; i < sizeof k_regions / sizeof k_regions[0]; i++) {
        const region *r = &k_regions[i];
        double s = i < 3 ? 1.0 : (i == 5 || i == 6 ? k * beat : k);
        double dx = (x - r->cx) / (r->ax * s), dy = (y - r->cy) / (r->ay * s);
        if (dx * dx + dy * dy <= 1.0)
            hu = r->hu;
    }
    return hu;
}

static void make_slice(const opts *o, int z, int t, uint64_t *rng, int16_t *px)
{
    double zf = o->slices > 1 ? (double)z / (o->slices - 1) : 0.5;
    double beat = 1.0 + 0.25 * sin(6.283185307179586 * t / (o->times > 0 ? o->times : 1));
    for (int r = 0; r < o->rows; r++) {
        for (int c = 0; c < o->cols; c++) {
            double x = (2.0 * c + 1) / o->cols - 1.0, y = (2.0 * r + 1) / o->rows - 1.0;
            double v = phantom_hu(x, y, zf, beat);
            if (o->noise > 0)
                v += o->noise * rng_gauss(rng);
            v = v < -1024 ? -1024 : (v > 3071 ? 3071 : v);
            px[(size_t)r * o->cols + c] = (int16_t)lrint(v);
        }
    }
}

static void usage(void)
{
    fprintf(stderr, "usage: mkseries --out DIR --rows R --cols C --slices N [--thickness MM]\n"
                    "  [--spacing MM] [--pixel-spacing MM] [--noise SD] [--seed S]\n"
                    "  [--series-description TEXT] [--study-uid UID] [--series-uid UID]\n"
                    "  [--patient-id ID] [--series-number N] [--uid-root ROOT]\n"
                    "  [--ts implicit|explicit|big|deflate|jpegll|jpegls|rle]\n"
                    "  [--times T [--time-key trigger|acquisition]]\n");
}

static int parse_num(const char *name, const char *s, double lo, double hi, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !(v >= lo && v <= hi)) {
        fprintf(stderr, "mkseries: --%s: expected a number in [%g, %g], got '%s'\n", name, lo, hi,
                s);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_int(const char *name, const char *s, int lo, int hi, int *out)
{
    double v;
    if (parse_num(name, s, lo, hi, &v) < 0 || v != floor(v)) {
        fprintf(stderr, "mkseries: --%s: expected an integer\n", name);
        return -1;
    }
    *out = (int)v;
    return 0;
}

static const char *ts_uid(const char *name)
{
    for (size_t i = 0; i < sizeof k_ts / sizeof k_ts[0]; i++)
        if (!strcmp(k_ts[i].name, name))
            return k_ts[i].uid;
    return NULL;
}

static int parse_opt(opts *o, int c, const char *arg, const char *name)
{
    double v;
    switch (c) {
    case 'o':
        o->out = arg;
        return 0;
    case 'r':
        return parse_int(name, arg, 1, 4096, &o->rows);
    case 'c':
        return parse_int(name, arg, 1, 4096, &o->cols);
    case 'n':
        return parse_int(name, arg, 1, 100000, &o->slices);
    case 't':
        return parse_num(name, arg, 0.01, 100, &o->thickness);
    case 's':
        return parse_num(name, arg, 0.01, 100, &o->spacing);
    case 'p':
        return parse_num(name, arg, 0.01, 10, &o->pixel_spacing);
    case 'N':
        return parse_num(name, arg, 0, 2000, &o->noise);
    case 'S':
        if (parse_num(name, arg, 0, 1e18, &v) < 0)
            return -1;
        o->seed = (uint64_t)v;
        return 0;
    case 'd':
        o->description = arg;
        return 0;
    case 'U':
        o->study_uid = arg;
        return 0;
    case 'u':
        o->series_uid = arg;
        return 0;
    case 'i':
        o->patient_id = arg;
        return 0;
    case 'k':
        return parse_int(name, arg, 0, 99999, &o->series_number);
    case 'R':
        o->uid_root = arg;
        return 0;
    case 'T':
        o->ts = arg;
        return 0;
    case 'm':
        return parse_int(name, arg, 1, 1000, &o->times);
    case 'K':
        o->time_key = arg;
        return 0;
    default:
        return -1;
    }
}

static int parse_args(int argc, char **argv, opts *o)
{
    static const struct option lo[] = {
        {"out", 1, 0, 'o'},           {"rows", 1, 0, 'r'},
        {"cols", 1, 0, 'c'},          {"slices", 1, 0, 'n'},
        {"thickness", 1, 0, 't'},     {"spacing", 1, 0, 's'},
        {"pixel-spacing", 1, 0, 'p'}, {"noise", 1, 0, 'N'},
        {"seed", 1, 0, 'S'},          {"series-description", 1, 0, 'd'},
        {"study-uid", 1, 0, 'U'},     {"series-uid", 1, 0, 'u'},
        {"patient-id", 1, 0, 'i'},    {"series-number", 1, 0, 'k'},
        {"uid-root", 1, 0, 'R'},      {"ts", 1, 0, 'T'},
        {"times", 1, 0, 'm'},         {"time-key", 1, 0, 'K'},
        {"help", 0, 0, 'h'},          {0, 0, 0, 0},
    };
    int c, idx = 0;
    while ((c = getopt_long(argc, argv, "", lo, &idx)) != -1) {
        if (c == 'h' || c == '?' || parse_opt(o, c, optarg, lo[idx].name) < 0)
            return -1;
    }
    if (optind != argc || !o->out || !o->rows || !o->cols || !o->slices) {
        fprintf(stderr, "mkseries: --out, --rows, --cols and --slices are required\n");
        return -1;
    }
    if (!ts_uid(o->ts)) {
        fprintf(stderr, "mkseries: unknown --ts '%s'\n", o->ts);
        return -1;
    }
    if (strcmp(o->time_key, "trigger") != 0 && strcmp(o->time_key, "acquisition") != 0) {
        fprintf(stderr, "mkseries: unknown --time-key '%s'\n", o->time_key);
        return -1;
    }
    if (o->spacing <= 0)
        o->spacing = o->thickness;
    if (o->pixel_spacing <= 0)
        o->pixel_spacing = 350.0 / (o->cols > o->rows ? o->cols : o->rows);
    return 0;
}

static int new_uid(const opts *o, const char *given, char *buf, size_t len)
{
    if (given) {
        snprintf(buf, len, "%s", given);
        return 0;
    }
    int err = scp_uid_new(o->uid_root, buf, len);
    if (err < 0)
        fprintf(stderr, "mkseries: cannot make a UID under root '%s': %s\n", o->uid_root,
                ldct_strerror(err));
    return err;
}

static void init_params(const opts *o, scp_ct_params *p)
{
    memset(p, 0, sizeof *p);
    p->patient_name = "SYNTHETIC^PHANTOM";
    p->patient_id = o->patient_id;
    p->study_description = "SYNTHETIC PHANTOM";
    p->series_description = o->description;
    p->series_number = o->series_number;
    p->rows = o->rows;
    p->cols = o->cols;
    p->pixel_spacing[0] = p->pixel_spacing[1] = o->pixel_spacing;
    p->slice_thickness = o->thickness;
    p->orientation[0] = p->orientation[4] = 1.0;
    p->rescale_slope = 1.0;
    p->rescale_intercept = 0.0;
    p->kvp = 120;
    p->transfer_syntax_uid = ts_uid(o->ts);
}

static int write_series(const opts *o)
{
    char study[65], series[65], frame[65], sop[65], path[4096];
    if (new_uid(o, o->study_uid, study, sizeof study) < 0 ||
        new_uid(o, o->series_uid, series, sizeof series) < 0 ||
        new_uid(o, NULL, frame, sizeof frame) < 0)
        return -1;
    int16_t *px = malloc((size_t)o->rows * o->cols * sizeof *px);
    if (!px) {
        fprintf(stderr, "mkseries: out of memory\n");
        return -1;
    }
    scp_ct_params p;
    init_params(o, &p);
    p.study_uid = study;
    p.series_uid = series;
    p.frame_of_reference_uid = frame;
    p.pixels = px;
    uint64_t rng = o->seed;
    int err = 0;
    const int times = o->times > 0 ? o->times : 1;
    for (int i = 0; i < o->slices * times && err == 0; i++) {
        int z = i % o->slices, t = i / o->slices;
        char trig[32], acq[32];
        make_slice(o, z, t, &rng, px);
        p.instance_number = i + 1;
        p.position[0] = -0.5 * (o->cols - 1) * o->pixel_spacing;
        p.position[1] = -0.5 * (o->rows - 1) * o->pixel_spacing;
        p.position[2] = z * o->spacing;
        snprintf(trig, sizeof trig, "%d", t * 50);
        double sec = 36000.0 + t * 5.0 + z * 0.1;
        snprintf(acq, sizeof acq, "%02d%02d%09.6f", (int)(sec / 3600), (int)(sec / 60) % 60,
                 fmod(sec, 60.0));
        p.trigger_time = o->times > 0 && strcmp(o->time_key, "trigger") == 0 ? trig : NULL;
        p.acquisition_time = o->times > 0 && strcmp(o->time_key, "acquisition") == 0 ? acq : NULL;
        snprintf(path, sizeof path, "%s/IMG%04d.dcm", o->out, i + 1);
        err = new_uid(o, NULL, sop, sizeof sop);
        p.sop_uid = sop;
        if (err == 0 && (err = scp_ct_write(&p, path)) < 0)
            fprintf(stderr, "mkseries: %s: %s\n", path, ldct_strerror(err));
    }
    free(px);
    if (err == 0)
        fprintf(stderr, "mkseries: %d slices x %d time points %dx%d (%s) in %s, series %s\n",
                o->slices, o->times > 0 ? o->times : 1, o->rows, o->cols, o->ts, o->out, series);
    return err < 0 ? -1 : 0;
}

int main(int argc, char **argv)
{
    opts o = {.patient_id = "SYN0001",
              .uid_root = "1.2.276.0.7230010.3.1.4",
              .ts = "explicit",
              .series_number = 1,
              .time_key = "trigger",
              .thickness = 2.5,
              .seed = 1};
    if (parse_args(argc, argv, &o) < 0) {
        usage();
        return 2;
    }
    int err = scp_global_init();
    if (err < 0) {
        fprintf(stderr, "mkseries: DICOM setup failed: %s\n", ldct_strerror(err));
        return 1;
    }
    err = fs_mkdirs(o.out);
    if (err < 0) {
        fprintf(stderr, "mkseries: cannot create %s: %s\n", o.out, ldct_strerror(err));
        scp_global_cleanup();
        return 1;
    }
    int rc = write_series(&o) < 0 ? 1 : 0;
    scp_global_cleanup();
    return rc;
}
