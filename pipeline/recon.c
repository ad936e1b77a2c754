/* Reconstruction of a projection series into a CT image series; see recon.h. */
#include "pipeline/recon.h"

#include "common/clock.h"
#include "common/err.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "gpu/fdk.h"
#include "pipeline/assemble_proj.h"
#include "scp/scp.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RECON_MU_WATER_DEFAULT 0.0193 /* 1/mm: water near 70 keV, the mean energy at 120 kVp */

/* The output grid, resolved from the options and the projection geometry. */
typedef struct grid {
    int matrix, slices, kernel;
    double fov, voxel, thickness, mu_water;
    gpu_fdk_volume vol;
} grid;

static double seconds_since(int64_t t0_ms)
{
    return (double)(ldct_now_ms() - t0_ms) / 1000.0;
}

/* Most slices a reconstruction writes (the rule key `slices` has the same
 * bound): an automatic count above it (a tiny slice thickness) fails the
 * job instead of filling the host's memory. */
enum { RECON_MAX_SLICES = 4096 };

/* Slices whose centres every projection sees across the whole field of
 * view: a point at radius fov/2 on the source's side is magnified most, so
 * the cone's half height there is (cone/2) (dso - fov/2) / dso. Slices
 * beyond it miss rays from part of the orbit and read wrong HU at the edge
 * of the field (-450 HU for water on the first and last slice of the cone). */
static double fully_sampled_slices(const asm_proj *p, double fov, double thickness)
{
    const double dso = p->geo.dso, r = 0.5 * fov;
    const double half = r < dso ? 0.5 * p->cone_mm * (dso - r) / dso : 0.0;
    return floor(2.0 * half / thickness + 1.0 + 1e-6);
}

static void resolve_grid(const process_fdk *f, const asm_proj *p, grid *g)
{
    double mag = p->geo.dsd / p->geo.dso;
    g->matrix = f->matrix > 0 ? f->matrix : 512;
    g->fov = f->fov_mm > 0 ? f->fov_mm : p->fov_mm;
    g->thickness = f->slice_mm > 0 ? f->slice_mm : p->geo.dv / mag;
    double n = f->slices > 0 ? f->slices : fully_sampled_slices(p, g->fov, g->thickness);
    g->slices = !(n >= 1) ? 1 : n > RECON_MAX_SLICES ? RECON_MAX_SLICES + 1 : (int)n;
    g->kernel = f->kernel >= 0 && f->kernel < GPU_FDK_NFILTERS ? f->kernel : GPU_FDK_SHEPP_LOGAN;
    g->mu_water = f->mu_water > 0 ? f->mu_water : RECON_MU_WATER_DEFAULT;
    g->voxel = g->fov / g->matrix;
    gpu_fdk_volume_centered(&g->vol, g->matrix, g->matrix, g->slices, g->voxel, g->voxel,
                            g->thickness);
}

static int gpu_failure(int rc)
{
    return rc == LDCT_ECUDA || rc == LDCT_ENOMEM_GPU || rc == LDCT_ENOGPU;
}

/* CPU: filter once, then backproject slab by slab, logging the progress. */
static int fdk_cpu(const gpu_fdk_params *fp, const asm_proj *p, const grid *g, gpu_volume *out,
                   const process_opts *o)
{
    process__progress(o, "reconstructing", 0.0);
    gpu_volume filtered;
    int rc = gpu_volume_init(&filtered, p->proj.nx, p->proj.ny, p->proj.nz, 1);
    if (rc)
        return rc;
    rc = gpu_fdk_filter_ref(fp, &p->geo, &p->proj, &filtered, NULL);
    if (rc == LDCT_EUNSUPPORTED) /* no FFTW: the plain convolution gives the same result */
        rc = gpu_fdk_filter_direct(fp, &p->geo, &p->proj, &filtered);
    int per = (g->slices + 7) / 8, done = 0;
    int64_t t0 = ldct_now_ms();
    for (int z = 0; !rc && z < g->slices; z += per) {
        int nz = z + per <= g->slices ? per : g->slices - z;
        gpu_fdk_volume slab = g->vol;
        slab.nz = nz;
        slab.origin[2] = g->vol.origin[2] + z * g->vol.voxel[2];
        gpu_volume view = *out;
        view.nz = nz;
        view.data = out->data + (size_t)z * out->nx * out->ny;
        rc = gpu_fdk_backproject_ref(fp, &p->geo, &filtered, &slab, &view, NULL);
        done += nz;
        if (!rc)
            process__progress(o, "reconstructing", (double)done / g->slices);
        if (!rc && g->slices > per)
            log_info("series %s: fdk on the cpu: %d of %d slices (%.1f s)", p->series_uid, done,
                     g->slices, seconds_since(t0));
    }
    gpu_volume_close(&filtered);
    return rc;
}

static int run_fdk(const process_opts *o, const asm_proj *p, const grid *g, gpu_volume *out,
                   process_result *r, char *err, size_t len)
{
    const gpu_device cpu = {.kind = GPU_DEVICE_CPU};
    const gpu_device *dev = o->dev ? o->dev : &cpu;
    gpu_fdk_params fp;
    gpu_fdk_params_default(&fp);
    fp.filter = g->kernel;
    gpu_device_name(dev, r->device, sizeof r->device);
    int rc = LDCT_ENOGPU;
    if (dev->kind == GPU_DEVICE_CUDA) {
        process__progress(o, "reconstructing", -1.0);
        rc = gpu_fdk(&fp, &p->geo, &p->proj, &g->vol, out, dev);
        if (rc && gpu_failure(rc)) {
            log_warn("series %s: fdk on %s failed (%s); running it on the CPU", p->series_uid,
                     r->device, ldct_strerror(rc));
            r->gpu_fallback = 1;
        }
    }
    if (dev->kind != GPU_DEVICE_CUDA || (rc && gpu_failure(rc))) {
        snprintf(r->device, sizeof r->device, "cpu");
        rc = fdk_cpu(&fp, p, g, out, o);
    }
    if (rc)
        snprintf(err, len, "fdk failed: %s", ldct_strerror(rc));
    return rc;
}

static void to_hu(gpu_volume *v, double mu_water)
{
    size_t n = gpu_volume_count(v);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++)
        v->data[i] = (float)(1000.0 * (v->data[i] - mu_water) / mu_water);
}

/* Slice keys, then the stored (or fresh) UIDs; uids[slices] is the frame of reference. */
static int make_uids(const process_opts *o, int slices, process_result *r,
                     char (*uids)[DERIVE_UID_LEN])
{
    int rc = 0;
    r->dated_ms = ldct_now_ms();
    if (o->series_uid)
        snprintf(r->series_uid, sizeof r->series_uid, "%s", o->series_uid);
    else
        rc = scp_uid_new(o->uid_root, r->series_uid, sizeof r->series_uid);
    const char **keys = malloc((size_t)(slices + 1) * sizeof *keys);
    char(*names)[DERIVE_UID_LEN] = malloc((size_t)(slices + 1) * DERIVE_UID_LEN);
    for (int i = 0; !rc && keys && names && i <= slices; i++) {
        if (i < slices)
            snprintf(names[i], DERIVE_UID_LEN, "fdk-slice-%d", i + 1);
        else
            snprintf(names[i], DERIVE_UID_LEN, "fdk-frame-of-reference");
        keys[i] = names[i];
        rc = scp_uid_new(o->uid_root, uids[i], DERIVE_UID_LEN);
    }
    if (!keys || !names)
        rc = -ENOMEM;
    if (!rc && o->uids)
        rc = o->uids(o->uids_ctx, slices + 1, keys, uids, r->series_uid, &r->dated_ms);
    for (int i = 0; !rc && i < slices; i++) {
        snprintf(r->source_sops[i], DERIVE_UID_LEN, "%s", names[i]);
        snprintf(r->derived_sops[i], DERIVE_UID_LEN, "%s", uids[i]);
    }
    free(keys);
    free(names);
    return rc;
}

/* Short enough (< 256 characters) for PACS that cut long values. */
static void derivation_text(const asm_proj *p, const grid *g, char *out, size_t len)
{
    snprintf(out, len,
             "ldct-node fdk: FDK, %s kernel, %d views, %s scan %.0f deg, %s detector %dx%d,"
             " SOD %.0f SDD %.0f mm, FOV %.0f mm, %.3g mm slices, mu_water %.4g/mm",
             gpu_fdk_filter_name(g->kernel), p->nviews, p->short_scan ? "short" : "full",
             p->geo.scan_range * 180 / 3.14159265358979323846,
             p->cylindrical ? "cylindrical (rebinned)" : "flat", p->geo.nu, p->geo.nv, p->geo.dso,
             p->geo.dsd, g->fov, g->thickness, g->mu_water);
}

typedef struct slice_job {
    const asm_proj *p;
    const grid *g;
    const gpu_volume *hu;
    const process_opts *o;
    const char *series_uid, *frame_uid, *derivation;
} slice_job;

static int write_slice(const slice_job *j, int k, const char *uid, char *path, char *err,
                       size_t len)
{
    char tmp[DERIVE_PATH_LEN + 16];
    snprintf(path, DERIVE_PATH_LEN, "%s/%s.dcm", j->o->out_dir, uid);
    snprintf(tmp, sizeof tmp, "%s/.%s.tmp", j->o->out_dir, uid);
    const gpu_fdk_volume *v = &j->g->vol;
    const char *sources[2] = {j->p->first_sop, j->p->last_sop};
    scp_recon_params rp = {
        .source_path = j->p->first_path,
        .series_uid = j->series_uid,
        .sop_uid = uid,
        .frame_of_reference_uid = j->frame_uid,
        .series_description_suffix = j->o->description_suffix,
        .series_number_offset = j->o->series_number_offset,
        .instance_number = k + 1,
        .rows = v->ny,
        .cols = v->nx,
        .pixel_spacing = v->voxel[0],
        .slice_thickness = v->voxel[2],
        .position = {v->origin[0], v->origin[1], j->p->z0 + v->origin[2] + k * v->voxel[2]},
        .derivation_description = j->derivation,
        .source_sops = sources,
        .nsource = strcmp(sources[0], sources[1]) ? 2 : 1,
        .values = j->hu->data + (size_t)k * v->nx * v->ny,
    };
    int rc = scp_recon_write(&rp, tmp, err, len);
    if (!rc && (rc = fs_fsync_path(tmp)) == 0 && rename(tmp, path) != 0)
        rc = -errno;
    if (rc) {
        if (!err[0])
            snprintf(err, len, "writing %s: %s", path, ldct_strerror(rc));
        unlink(tmp);
    }
    return rc;
}

static int write_series(const slice_job *j, process_result *r, char *err, size_t len)
{
    int rc = fs_mkdirs(j->o->out_dir);
    if (rc)
        return snprintf(err, len, "cannot create %s: %s", j->o->out_dir, ldct_strerror(rc)), rc;
    int first = 0;
    const gpu_progress writing = {process__writing_progress, (void *)j->o};
    gpu_progress_count count;
    gpu_progress_begin(&count, &writing, 0.0, 1.0, r->n);
#pragma omp parallel for schedule(dynamic)
    for (int k = 0; k < r->n; k++) {
        char e[256] = "";
        int w = write_slice(j, k, r->derived_sops[k], r->paths[k], e, sizeof e);
        gpu_progress_add(&count, 1);
        if (w) {
#pragma omp critical(recon_err)
            if (!first) {
                first = w;
                snprintf(err, len, "%s", e);
            }
        }
    }
    if (first)
        return first;
    if ((rc = fs_fsync_path(j->o->out_dir)))
        snprintf(err, len, "cannot sync %s: %s", j->o->out_dir, ldct_strerror(rc));
    else
        gpu_progress_end(&count);
    return rc;
}

static int result_alloc(process_result *r, int n)
{
    r->n = n;
    r->source_sops = calloc((size_t)n, sizeof *r->source_sops);
    r->derived_sops = calloc((size_t)n, sizeof *r->derived_sops);
    r->paths = calloc((size_t)n, sizeof *r->paths);
    return r->source_sops && r->derived_sops && r->paths ? 0 : -ENOMEM;
}

/* The source's Frame of Reference UID, or the job's stored one. */
static void frame_uid(const asm_proj *p, const char *stored, char *out, size_t len)
{
    scp_slice_info info;
    char e[256];
    int ok = scp_slice_read_info(p->first_path, &info, e, sizeof e) == 0;
    snprintf(out, len, "%s",
             ok && info.frame_of_reference_uid[0] ? info.frame_of_reference_uid : stored);
    if (ok)
        scp_slice_info_free(&info);
}

static int reconstruct_and_write(const asm_proj *p, const process_opts *o, process_result *r,
                                 char *err, size_t len)
{
    grid g;
    resolve_grid(&o->fdk, p, &g);
    if (g.slices > RECON_MAX_SLICES) {
        snprintf(err, len,
                 "the cone of %.1f mm at %.3g mm slices needs more than %d slices; set a larger"
                 " slice_thickness_mm or slices",
                 p->cone_mm, g.thickness, RECON_MAX_SLICES);
        return LDCT_EINPUT;
    }
    uint64_t bytes =
        ((uint64_t)2 * g.matrix * g.matrix + PROCESS_HEADER_BYTES) * (uint64_t)g.slices;
    int room = process_check_room(o, bytes, (uint64_t)g.slices, err, len);
    if (room)
        return room;
    r->nx = r->ny = g.matrix;
    r->nz = g.slices;
    log_info("series %s: fdk of %d views (%s detector, %s scan) into %dx%dx%d, %.3g mm voxels,"
             " %.3g mm slices, %s kernel",
             p->series_uid, p->nviews, p->cylindrical ? "cylindrical" : "flat",
             p->short_scan ? "short" : "full", g.matrix, g.matrix, g.slices, g.voxel, g.thickness,
             gpu_fdk_filter_name(g.kernel));
    gpu_volume out = {0};
    char(*uids)[DERIVE_UID_LEN] = malloc((size_t)(g.slices + 1) * DERIVE_UID_LEN);
    int rc = uids ? gpu_volume_init(&out, g.matrix, g.matrix, g.slices, 1) : -ENOMEM;
    if (rc || (rc = result_alloc(r, g.slices)) || (rc = make_uids(o, g.slices, r, uids))) {
        snprintf(err, len, "cannot prepare the output (%d slices): %s", g.slices,
                 ldct_strerror(rc));
    } else {
        int64_t t0 = ldct_now_ms();
        rc = run_fdk(o, p, &g, &out, r, err, len);
        r->filter_s = seconds_since(t0);
    }
    if (!rc) {
        to_hu(&out, g.mu_water);
        char derivation[1024], frame[DERIVE_UID_LEN];
        derivation_text(p, &g, derivation, sizeof derivation);
        frame_uid(p, uids[g.slices], frame, sizeof frame);
        slice_job j = {p, &g, &out, o, r->series_uid, frame, derivation};
        int64_t t0 = ldct_now_ms();
        process__progress(o, "writing", 0.0);
        rc = write_series(&j, r, err, len);
        r->write_s = seconds_since(t0);
    }
    gpu_volume_close(&out);
    free(uids);
    return rc;
}

int recon_series(const char *const *paths, int n, const process_opts *o, process_result *r,
                 char *err, size_t err_len)
{
    memset(r, 0, sizeof *r);
    err[0] = '\0';
    snprintf(r->algorithm, sizeof r->algorithm, "fdk");
    asm_proj p;
    int64_t t0 = ldct_now_ms();
    process__progress(o, "reading", 0.0);
    const gpu_progress progress = {process__reading_progress, (void *)o};
    int rc = asm_proj_load_with(paths, n, &progress, &p, err, err_len);
    r->load_s = seconds_since(t0);
    if (rc)
        return rc;
    rc = reconstruct_and_write(&p, o, r, err, err_len);
    asm_proj_close(&p);
    if (rc) {
        process_result_free(r);
        if (!err[0])
            snprintf(err, err_len, "%s", ldct_strerror(rc));
    }
    return rc;
}
