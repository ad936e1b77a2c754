/* Processing of one series (assemble, denoise, derive); see process.h. */
#include "pipeline/process.h"

#include "common/clock.h"
#include "common/err.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "gpu/anlm.h"
#include "pipeline/assemble_proj.h"
#include "pipeline/recon.h"
#include "gpu/adaptive4d.h"
#include "pipeline/rules.h"
#include "scp/scp.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

static const char *const ALGO_NAMES[] = {
    [ALGO_AUTO] = "auto", [ALGO_NLM2D] = "nlm2d",           [ALGO_NLM3D] = "nlm3d",
    [ALGO_ANLM] = "anlm", [ALGO_ADAPTIVE4D] = "adaptive4d", [ALGO_FDK] = "fdk"};

const char *process_algorithm_name(int algorithm)
{
    if (algorithm < 0 || algorithm >= (int)(sizeof ALGO_NAMES / sizeof ALGO_NAMES[0]))
        return "unknown";
    return ALGO_NAMES[algorithm];
}

int process_algorithm_parse(const char *name)
{
    for (int i = 0; i < (int)(sizeof ALGO_NAMES / sizeof ALGO_NAMES[0]); i++)
        if (strcasecmp(name, ALGO_NAMES[i]) == 0)
            return i;
    return -1;
}

/* adaptive4d's mapping parameters, in enum order: the name stored in the
 * job, the cfg_rule field and the gpu_adaptive4d_params field. Real ones:
 * double in the rule (-1 = not set), float in the engine. Integer ones
 * (int_bias >= 0 marks them): int in both, 0 in the rule = not set, the
 * engine's value is the rule's minus int_bias. */
#define A4D_F(name, field, bias)                                                                   \
    {                                                                                              \
        "a4d_" name, offsetof(cfg_rule, a4d_##field), offsetof(gpu_adaptive4d_params, field), bias \
    }
static const struct a4d_param {
    const char *key;
    size_t rule_off, param_off;
    int int_bias; /* -1: a real parameter */
} A4D_PARAMS[A4D_NPARAMS] = {{"a4d_downsample", offsetof(cfg_rule, a4d_downsample),
                              offsetof(gpu_adaptive4d_params, downsample), 0},
                             {"a4d_m_reference", offsetof(cfg_rule, a4d_m_reference),
                              offsetof(gpu_adaptive4d_params, m_norm), 1},
                             A4D_F("m_alpha", m_alpha, -1),
                             A4D_F("m_beta", m_beta, -1),
                             A4D_F("m_sigma", m_sigma, -1),
                             A4D_F("mu_alpha", mu_alpha, -1),
                             A4D_F("mu_beta", mu_beta, -1),
                             A4D_F("m_pass", m_pass, -1),
                             A4D_F("t_scale", t_scale, -1),
                             A4D_F("pass_t", pass_t, -1),
                             A4D_F("static_sigma_t", static_sigma_t, -1),
                             A4D_F("static_t", static_t, -1)};
#undef A4D_F

/* The rule's value of parameter i; negative when the rule leaves it. */
static double a4d_rule_value(const cfg_rule *r, int i)
{
    const struct a4d_param *a = &A4D_PARAMS[i];
    const char *f = (const char *)r + a->rule_off;
    if (a->int_bias >= 0) {
        int d;
        memcpy(&d, f, sizeof d);
        return d > 0 ? d - a->int_bias : -1;
    }
    double v;
    memcpy(&v, f, sizeof v);
    return v;
}

void process_params_format(const cfg_rule *r, char *out, size_t len)
{
    int n = snprintf(out, len,
                     "search_radius=%d patch_radius=%d h=%g strength=%g series_number_offset=%d"
                     " matrix=%d fov_mm=%g slice_thickness_mm=%g slices=%d kernel=%d mu_water=%g"
                     " patch_weighting=%d distance_cutoff=%g",
                     r->search_radius, r->patch_radius, r->h, r->strength, r->series_number_offset,
                     r->fdk_matrix, r->fdk_fov_mm, r->fdk_slice_mm, r->fdk_slices, r->fdk_kernel,
                     r->fdk_mu_water, r->patch_weighting, r->distance_cutoff);
    for (int i = 0; i < A4D_NPARAMS && n > 0 && (size_t)n < len; i++) {
        double v = a4d_rule_value(r, i);
        if (v >= 0)
            n += snprintf(out + n, len - (size_t)n, " %s=%g", A4D_PARAMS[i].key, v);
    }
}

/* Sets adaptive4d parameter `key`; LDCT_EINPUT when it is not one. */
static int a4d_params_set(process_a4d *a, const char *key, double v)
{
    for (int i = 0; i < A4D_NPARAMS; i++)
        if (strcmp(key, A4D_PARAMS[i].key) == 0) {
            a->v[i] = v;
            a->set |= 1u << i;
            return 0;
        }
    return LDCT_EINPUT;
}

/* The engine's adaptive4d defaults with the job's strength and the rule's
 * mapping parameters applied. */
static void a4d_params_of(const process_opts *o, gpu_adaptive4d_params *ap)
{
    gpu_adaptive4d_params_default(ap);
    ap->strength = o->nlm.strength > 0 ? o->nlm.strength : 1.0f;
    for (int i = 0; i < A4D_NPARAMS; i++) {
        if (!(o->a4d.set & (1u << i)))
            continue;
        char *f = (char *)ap + A4D_PARAMS[i].param_off;
        const int d = (int)o->a4d.v[i];
        const float v = (float)o->a4d.v[i];
        if (A4D_PARAMS[i].int_bias >= 0)
            memcpy(f, &d, sizeof d);
        else
            memcpy(f, &v, sizeof v);
    }
}

static int fdk_params_set(process_fdk *f, const char *key, double v)
{
    if (strcmp(key, "matrix") == 0)
        f->matrix = (int)v;
    else if (strcmp(key, "fov_mm") == 0)
        f->fov_mm = v;
    else if (strcmp(key, "slice_thickness_mm") == 0)
        f->slice_mm = v;
    else if (strcmp(key, "slices") == 0)
        f->slices = (int)v;
    else if (strcmp(key, "kernel") == 0 && v >= 0 && v < GPU_FDK_NFILTERS)
        f->kernel = (int)v;
    else if (strcmp(key, "mu_water") == 0)
        f->mu_water = v;
    else
        return LDCT_EINPUT;
    return 0;
}

static int params_set(process_opts *o, const char *key, double v)
{
    if (strcmp(key, "search_radius") == 0)
        o->nlm.search_radius = v > 0 ? (int)v : 0;
    else if (strcmp(key, "patch_radius") == 0)
        o->nlm.patch_radius = v > 0 ? (int)v : 0;
    else if (strcmp(key, "h") == 0) {
        o->nlm.h_auto = !(v > 0);
        o->nlm.h = v > 0 ? (float)v : o->nlm.h;
    } else if (strcmp(key, "strength") == 0)
        o->nlm.strength = (float)v;
    else if (strcmp(key, "patch_weighting") == 0 && (v == 0 || v == 1))
        o->nlm.gaussian = (int)v;
    else if (strcmp(key, "distance_cutoff") == 0 && v >= 0 && v <= GPU_NLM_MAX_CUTOFF)
        o->nlm.cutoff = (float)v;
    else if (strcmp(key, "series_number_offset") == 0)
        o->series_number_offset = (int)v;
    else if (strncmp(key, "a4d_", 4) == 0)
        return a4d_params_set(&o->a4d, key, v);
    else
        return fdk_params_set(&o->fdk, key, v);
    return 0;
}

int process_params_parse(const char *params, process_opts *o)
{
    /* A row stored before distance_cutoff existed has no such key and gets
     * the default cutoff, not "none": the cutoff is part of the NLM
     * definition for every job since it came (gpu/nlm.h), as a retried old
     * job runs today's code anyway. */
    gpu_nlm_params_default(&o->nlm);
    o->nlm.search_radius = o->nlm.patch_radius = 0; /* the algorithm's defaults */
    o->fdk = (process_fdk){.kernel = GPU_FDK_SHEPP_LOGAN};
    memset(&o->a4d, 0, sizeof o->a4d);
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", params);
    char *save = NULL;
    for (char *t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
        char *eq = strchr(t, '=');
        if (!eq)
            return LDCT_EINPUT;
        *eq = '\0';
        char *end;
        double v = strtod(eq + 1, &end);
        if (*end || params_set(o, t, v))
            return LDCT_EINPUT;
    }
    return 0;
}

int process_error_permanent(int rc)
{
    return rc == LDCT_EINPUT || rc == LDCT_EUNSUPPORTED;
}

void process_result_free(process_result *r)
{
    if (!r)
        return;
    free(r->source_sops);
    free(r->derived_sops);
    free(r->paths);
    memset(r, 0, sizeof *r);
}

static double seconds_since(int64_t t0_ms)
{
    return (double)(ldct_now_ms() - t0_ms) / 1000.0;
}

static int result_alloc(process_result *r, int n)
{
    r->n = n;
    r->source_sops = calloc((size_t)n, sizeof *r->source_sops);
    r->derived_sops = calloc((size_t)n, sizeof *r->derived_sops);
    r->paths = calloc((size_t)n, sizeof *r->paths);
    return r->source_sops && r->derived_sops && r->paths ? 0 : -ENOMEM;
}

/* Fresh UIDs for the series and every source, then the caller's stored ones. */
static int make_uids(const asm_series *s, const process_opts *o, process_result *r)
{
    int rc = 0;
    r->dated_ms = ldct_now_ms();
    if (o->series_uid)
        snprintf(r->series_uid, sizeof r->series_uid, "%s", o->series_uid);
    else
        rc = scp_uid_new(o->uid_root, r->series_uid, sizeof r->series_uid);
    for (int i = 0; i < s->nsrc && !rc; i++) {
        snprintf(r->source_sops[i], DERIVE_UID_LEN, "%s", s->src[i].sop_instance_uid);
        rc = scp_uid_new(o->uid_root, r->derived_sops[i], DERIVE_UID_LEN);
    }
    if (rc || !o->uids)
        return rc;
    const char **src = malloc((size_t)s->nsrc * sizeof *src);
    if (!src)
        return -ENOMEM;
    for (int i = 0; i < s->nsrc; i++)
        src[i] = r->source_sops[i];
    rc = o->uids(o->uids_ctx, s->nsrc, src, r->derived_sops, r->series_uid, &r->dated_ms);
    free(src);
    return rc;
}

/* anlm's defaults in the pipeline (docs/NOTES-anlm.md, "Against nlm3d"):
 * the rule's strength means what it means for nlm3d, h^2 = 2 strength^2
 * sigma^2 (noise-only patch pairs weigh about e^-1; Coupe 2008's beta = 1),
 * while gpu_anlm's is h^2 = strength^2 s2 with s2 about sigma^2; hence the
 * factor sqrt 2. Search radius 5 as nlm3d's: on the quarter-dose body phantom
 * with varying noise (256^2) anlm at S = 3 lost 0.4 dB PSNR to nlm3d at
 * S = 5 and won at S = 5. */
#define ANLM_STRENGTH_PER_RULE 1.41421356f
enum { ANLM_SEARCH_RADIUS = 5 };

/* anlm from the rule's options: its own search radius (0 = 5), strength
 * (0 = 1) times sqrt 2; patch radius 0 = radii 1 and 2 with sub-band
 * mixing, else one pass with that radius. h is local (from the noise), so
 * the rule's h is unused. MR series are magnitude images: Rician noise
 * model. */
static gpu_anlm_params anlm_params_of(const gpu_nlm_params *p, const char *modality)
{
    gpu_anlm_params a;
    gpu_anlm_params_default(&a);
    a.search_radius = ANLM_SEARCH_RADIUS;
    a.strength = ANLM_STRENGTH_PER_RULE;
    /* Radii beyond anlm's bounds (rules share nlm's) are clamped, not failed. */
    if (p->search_radius > 0)
        a.search_radius =
            p->search_radius < GPU_ANLM_MAX_SEARCH ? p->search_radius : GPU_ANLM_MAX_SEARCH;
    if (p->patch_radius > 0) {
        a.mix = 0;
        a.patch_radius =
            p->patch_radius < GPU_ANLM_MAX_PATCH ? p->patch_radius : GPU_ANLM_MAX_PATCH;
    }
    if (p->strength > 0)
        a.strength = ANLM_STRENGTH_PER_RULE * p->strength;
    if (modality && strcmp(modality, "MR") == 0)
        a.noise = GPU_ANLM_RICIAN;
    return a;
}

void process__progress(const process_opts *o, const char *stage, double fraction)
{
    if (o->progress)
        o->progress(o->progress_ctx, stage, fraction);
}

static void filtering_progress(void *ctx, double fraction)
{
    process__progress(ctx, "filtering", fraction);
}

void process__reading_progress(void *ctx, double fraction)
{
    process__progress(ctx, "reading", fraction);
}

void process__writing_progress(void *ctx, double fraction)
{
    process__progress(ctx, "writing", fraction);
}

static int run_filter(int algo, const gpu_nlm_params *nlm, const process_opts *o,
                      const asm_series *s, gpu_volume *out, const gpu_device *dev)
{
    const gpu_volume *in = &s->vol;
    const gpu_progress progress = {filtering_progress, (void *)o};
    gpu_nlm_params p = *nlm;
    p.progress = &progress;
    process__progress(o, "filtering", dev->kind == GPU_DEVICE_CUDA ? -1.0 : 0.0);
    switch (algo) {
    case ALGO_ANLM: {
        gpu_anlm_params ap = anlm_params_of(&p, s->modality);
        ap.progress = &progress;
        return gpu_anlm(&ap, in, out, dev);
    }
    case ALGO_NLM2D:
        return gpu_nlm2d(&p, in, out, dev);
    case ALGO_NLM3D:
        return gpu_nlm3d(&p, in, out, dev);
    case ALGO_ADAPTIVE4D: {
        gpu_adaptive4d_params ap;
        a4d_params_of(o, &ap);
        ap.progress = &progress;
        return gpu_adaptive4d(&ap, in, out, dev);
    }
    default:
        return LDCT_EUNSUPPORTED; /* not built into this version */
    }
}

static int gpu_failure(int rc)
{
    return rc == LDCT_ECUDA || rc == LDCT_ENOMEM_GPU || rc == LDCT_ENOGPU;
}

/* Denoises s->vol into out on o->dev, or on the CPU when the GPU fails. */
/* Radii left at 0 get the algorithm's defaults: nlm2d 10 and 3 (seed 000's
 * 21x21 search window and 7x7 patches), nlm3d 5 and 2. */
static gpu_nlm_params radii_resolved(const gpu_nlm_params *in, int algo)
{
    gpu_nlm_params p = *in;
    if (algo == ALGO_ANLM)
        return p; /* anlm_params_of() resolves its own defaults */
    if (p.search_radius <= 0)
        p.search_radius = algo == ALGO_NLM2D ? 10 : 5;
    if (p.patch_radius <= 0)
        p.patch_radius = algo == ALGO_NLM2D ? 3 : 2;
    return p;
}

/* Why h could not be set from the noise: images too small to estimate it
 * (its 3x3 Laplacian needs 3x3 pixels), or the machine's trouble. */
static void noise_error(const gpu_volume *v, int rc, char *err, size_t err_len)
{
    if (rc == LDCT_EINPUT)
        snprintf(err, err_len,
                 "cannot estimate the noise of %dx%d images (the estimate needs at least 3x3 "
                 "pixels); give the rule a fixed h",
                 v->nx, v->ny);
    else
        snprintf(err, err_len, "cannot estimate the noise of the series: %s", ldct_strerror(rc));
}

static int denoise(const asm_series *s, const process_opts *o, int algo, gpu_volume *out,
                   process_result *r, char *err, size_t err_len)
{
    const gpu_device cpu = {.kind = GPU_DEVICE_CPU};
    const gpu_device *dev = o->dev ? o->dev : &cpu;
    gpu_nlm_params p = radii_resolved(&o->nlm, algo);
    /* The noise once: for h (nlm with h auto) and for the report. Only
     * nlm2d/nlm3d use one h; anlm's is local, adaptive4d has its own. */
    const int uses_h = algo == ALGO_NLM2D || algo == ALGO_NLM3D;
    int rc = gpu_noise_sigma(&s->vol, &r->noise_sigma);
    if (rc)
        r->noise_sigma = -1;
    if (rc && uses_h && p.h_auto)
        return noise_error(&s->vol, rc, err, err_len), rc;
    if (uses_h) {
        gpu_nlm_fix_h_sigma(&p, r->noise_sigma);
        r->h = p.h;
        r->cutoff = p.cutoff;
    }
    gpu_device_name(dev, r->device, sizeof r->device);
    rc = run_filter(algo, &p, o, s, out, dev);
    if (rc && dev->kind == GPU_DEVICE_CUDA && gpu_failure(rc)) {
        log_warn("series %s: %s on %s failed (%s); running it on the CPU", s->series_uid,
                 process_algorithm_name(algo), r->device, ldct_strerror(rc));
        r->gpu_fallback = 1;
        snprintf(r->device, sizeof r->device, "cpu");
        rc = run_filter(algo, &p, o, s, out, &cpu);
    }
    if (rc)
        snprintf(err, err_len, "%s failed: %s", process_algorithm_name(algo), ldct_strerror(rc));
    return rc;
}

static void derivation_anlm(const process_opts *o, const char *modality, char *out, size_t len)
{
    gpu_anlm_params a = anlm_params_of(&o->nlm, modality);
    char radii[64];
    if (a.mix)
        snprintf(radii, sizeof radii, "patch radii %d and %d with Haar sub-band mixing",
                 a.patch_radius, a.patch_radius2);
    else
        snprintf(radii, sizeof radii, "patch radius %d", a.patch_radius);
    snprintf(out, len,
             "ldct-node anlm: adaptive non-local means 3D, search radius %d, %s, block radius %d,"
             " h = local noise x %.2f, preselection mean %.2f variance %.2f, %s noise",
             a.search_radius, radii, a.block_radius, a.strength, a.mean_ratio, a.var_ratio,
             a.noise == GPU_ANLM_RICIAN ? "Rician" : "Gaussian");
}

/* Always stated, so a reader of the derived series knows which definition
 * made it. */
void process_cutoff_text(float cutoff, char *out, size_t len)
{
    if (cutoff == 0)
        snprintf(out, len, ", no distance cutoff");
    else
        snprintf(out, len, ", distance cutoff %g h^2", (double)cutoff);
}

void process_params_text(const process_result *r, char *out, size_t len)
{
    size_t k = 0;
    out[0] = 0;
    if (strcmp(r->algorithm, "fdk") == 0)
        return;
    int nlm = strcmp(r->algorithm, "nlm2d") == 0 || strcmp(r->algorithm, "nlm3d") == 0;
    if (nlm)
        k += (size_t)snprintf(out, len, ", h %.1f", r->h);
    if (r->noise_sigma >= 0 && k < len)
        k += (size_t)snprintf(out + k, len - k, nlm ? " (noise %.1f)" : ", noise %.1f",
                              r->noise_sigma);
    if (nlm && k < len)
        process_cutoff_text(r->cutoff, out + k, len - k);
}

static void derivation_text(const process_result *r, const process_opts *o, int algo,
                            const char *modality, char *out, size_t len)
{
    if (algo == ALGO_ANLM) {
        derivation_anlm(o, modality, out, len);
        return;
    }
    if (algo == ALGO_ADAPTIVE4D) {
        gpu_adaptive4d_params ap;
        a4d_params_of(o, &ap);
        snprintf(out, len,
                 "ldct-node adaptive4d: true 4D adaptive filtering (structure tensor from 14 "
                 "monomial filters, control tensor, 11 reconstruction filters), %d time points, "
                 "M-function sigma %.2f x strength %.2f, lowpass sigma %.1f voxels",
                 r->nt, ap.m_sigma, ap.strength, ap.lp_sigma);
        return;
    }
    gpu_nlm_params p = radii_resolved(&o->nlm, algo);
    const char *dims = strcmp(r->algorithm, "nlm2d") == 0 ? "2D" : "3D";
    /* Uniform weighting keeps the text it always had. */
    const char *weights = p.gaussian ? " (Gaussian patch weights)" : "";
    char cut[48];
    process_cutoff_text(r->cutoff, cut, sizeof cut);
    if (o->nlm.h_auto)
        snprintf(out, len,
                 "ldct-node %s: non-local means %s, search radius %d, patch radius %d%s%s, h %.1f"
                 " (1.41 x noise %.1f x strength %.2f)",
                 r->algorithm, dims, p.search_radius, p.patch_radius, weights, cut, r->h,
                 r->noise_sigma, p.strength);
    else
        snprintf(out, len,
                 "ldct-node %s: non-local means %s, search radius %d, patch radius %d%s%s, h %.1f",
                 r->algorithm, dims, p.search_radius, p.patch_radius, weights, cut, r->h);
}

static int filter_and_write(const asm_series *s, const process_opts *o, process_result *r,
                            char *err, size_t err_len)
{
    /* auto: time-resolved series (several time points) get adaptive4d. */
    int algo = o->algorithm != ALGO_AUTO ? o->algorithm
               : s->vol.nt > 1
                   ? ALGO_ADAPTIVE4D
                   : (int)rules_algorithm(&(cfg_rule){.algorithm = ALGO_AUTO}, s->slice_thickness);
    snprintf(r->algorithm, sizeof r->algorithm, "%s", process_algorithm_name(algo));
    gpu_volume out = {0};
    int rc = gpu_volume_init(&out, s->vol.nx, s->vol.ny, s->vol.nz, s->vol.nt);
    if (rc)
        return snprintf(err, err_len, "out of memory for the result volume"), rc;
    out.spacing[0] = s->vol.spacing[0];
    out.spacing[1] = s->vol.spacing[1];
    out.spacing[2] = s->vol.spacing[2];
    int64_t t0 = ldct_now_ms();
    rc = denoise(s, o, algo, &out, r, err, err_len);
    r->filter_s = seconds_since(t0);
    if (!rc) {
        char derivation[512];
        derivation_text(r, o, algo, s->modality, derivation, sizeof derivation);
        const gpu_progress writing = {process__writing_progress, (void *)o};
        derive_params dp = {.series_uid = r->series_uid,
                            .dated_ms = r->dated_ms,
                            .description_suffix = o->description_suffix,
                            .series_number_offset = o->series_number_offset,
                            .derivation = derivation,
                            .out_dir = o->out_dir,
                            .progress = &writing};
        t0 = ldct_now_ms();
        process__progress(o, "writing", 0.0);
        rc = derive_series_write(s, &out, &dp, r->derived_sops, r->paths, err, err_len);
        r->write_s = seconds_since(t0);
    }
    gpu_volume_close(&out);
    return rc;
}

/* The nearest existing folder of path (out_dir is made when writing). */
static void existing_dir(const char *path, char *out, size_t len)
{
    snprintf(out, len, "%s", path);
    struct stat st;
    while (stat(out, &st) != 0) {
        char *slash = strrchr(out, '/');
        if (!slash || slash == out) {
            snprintf(out, len, "%s", slash ? "/" : ".");
            return;
        }
        *slash = '\0';
    }
}

/* The inode half of process_check_room: 0 or LDCT_ENOSPACE with why. */
static int check_inodes(const char *dir, uint64_t files, char *err, size_t len)
{
    uint64_t inodes = 0;
    if (fs_free_inodes(dir, &inodes) != 0 || inodes >= files + PROCESS_KEEP_INODES)
        return 0;
    snprintf(err, len,
             "the result needs %llu files in %s, which has %llu free inodes (results leave %u)",
             (unsigned long long)files, dir, (unsigned long long)inodes, PROCESS_KEEP_INODES);
    return LDCT_ENOSPACE;
}

int process_check_room(const process_opts *o, uint64_t bytes, uint64_t files, char *err, size_t len)
{
    if (!o->out_dir)
        return 0;
    char dir[DERIVE_PATH_LEN];
    existing_dir(o->out_dir, dir, sizeof dir);
    if (check_inodes(dir, files, err, len))
        return LDCT_ENOSPACE;
    const double mib = 1048576.0;
    uint64_t avail = 0, total = 0, keep = (uint64_t)o->min_free_mb * (1u << 20) / 2;
    if (fs_space_bytes(dir, &avail, &total) != 0 || avail >= bytes + keep)
        return 0;
    if (bytes + keep > total)
        return snprintf(err, len,
                        "the result needs about %.1f MB, and %s holds %.1f MB in all (keeping"
                        " %.1f MB free)",
                        bytes / mib, dir, total / mib, keep / mib),
               LDCT_EINPUT;
    snprintf(err, len,
             "the result needs about %.1f MB in %s, which has %.1f MB free (results leave %.1f"
             " MB, half of min_free_mb)",
             bytes / mib, dir, avail / mib, keep / mib);
    return LDCT_ENOSPACE;
}

static uint64_t sources_bytes(const char *const *paths, int n)
{
    uint64_t src = 0;
    for (int i = 0; i < n; i++) {
        struct stat st;
        if (stat(paths[i], &st) == 0)
            src += (uint64_t)st.st_size;
    }
    return src;
}

/* What a filtered series' files take: as much as the sources (same header,
 * same pixel bytes when uncompressed), at least 16-bit pixels plus a
 * header each (compressed sources). */
static uint64_t filtered_bytes(const asm_series *s, uint64_t sources)
{
    uint64_t px = 2ull * s->vol.nx * s->vol.ny * s->vol.nz * s->vol.nt +
                  (uint64_t)s->nsrc * PROCESS_HEADER_BYTES;
    return sources > px ? sources : px;
}

/* nlm2d filters slice by slice, so it takes a stack whose geometry is no
 * volume (a gap, uneven or repeated positions, no positions). auto takes
 * such a stack too when its slices are thick enough for nlm2d (> 2 mm);
 * a thin one keeps the volume's error, since nlm3d needs the volume. */
static int load_for(const process_opts *o, const char *const *paths, int n, asm_series *s,
                    char *err, size_t err_len)
{
    const gpu_progress progress = {process__reading_progress, (void *)o};
    asm_load_opts lo = {.slices = o->algorithm == ALGO_NLM2D, .progress = &progress};
    if (lo.slices)
        return asm_series_load_with(paths, n, &lo, s, err, err_len);
    int geometry = 0;
    lo.geometry = &geometry;
    int rc = asm_series_load_with(paths, n, &lo, s, err, err_len);
    if (rc != LDCT_EINPUT || o->algorithm != ALGO_AUTO || !geometry)
        return rc; /* only a refusal for the slices' places can go slice by slice */
    char err2[256];
    lo = (asm_load_opts){.slices = 1, .progress = &progress};
    if (asm_series_load_with(paths, n, &lo, s, err2, sizeof err2) != 0)
        return rc;
    if (rules_algorithm(&(cfg_rule){.algorithm = ALGO_AUTO}, s->slice_thickness) == ALGO_NLM2D) {
        log_notice("series %s is no regular volume (%s); auto filters it slice by slice (nlm2d)",
                   s->series_uid, err);
        err[0] = '\0';
        return 0;
    }
    asm_series_close(s);
    return rc;
}

int process_series(const char *const *paths, int n, const process_opts *o, process_result *r,
                   char *err, size_t err_len)
{
    memset(r, 0, sizeof *r);
    err[0] = '\0';
    int projection = n > 0 && asm_proj_is_projection(paths[0]);
    if (o->algorithm == ALGO_FDK || (o->algorithm == ALGO_AUTO && projection))
        return recon_series(paths, n, o, r, err, err_len);
    if (projection)
        return snprintf(err, err_len,
                        "projection data (DICOM-CT-PD) can only be reconstructed (algorithm fdk"
                        " or auto), not filtered with %s",
                        process_algorithm_name(o->algorithm)),
               LDCT_EINPUT;
    /* The sources' size first (the result takes at least that), so a job
     * waiting for room does not load its series at every check. */
    uint64_t sources = sources_bytes(paths, n);
    int rc = process_check_room(o, sources, (uint64_t)n, err, err_len);
    if (rc)
        return rc;
    asm_series s;
    int64_t t0 = ldct_now_ms();
    process__progress(o, "reading", 0.0);
    rc = load_for(o, paths, n, &s, err, err_len);
    r->load_s = seconds_since(t0);
    if (!rc && (rc = process_check_room(o, filtered_bytes(&s, sources), (uint64_t)n, err, err_len)))
        asm_series_close(&s);
    if (rc)
        return rc;
    r->nx = s.vol.nx;
    r->ny = s.vol.ny;
    r->nz = s.vol.nz;
    r->nt = s.vol.nt;
    if ((rc = result_alloc(r, s.nsrc)) || (rc = make_uids(&s, o, r)))
        snprintf(err, err_len, "cannot make the derived UIDs: %s", ldct_strerror(rc));
    else
        rc = filter_and_write(&s, o, r, err, err_len);
    asm_series_close(&s);
    if (rc) {
        process_result_free(r);
        if (!err[0])
            snprintf(err, err_len, "%s", ldct_strerror(rc));
    }
    return rc;
}
