/* process: the processing of one series, shared by the daemon's workers and
 * `ldct filter`: assemble the files into a volume (assemble.h), denoise it
 * on the given device (falling back to the CPU reference when the GPU fails:
 * out of memory after slabbing, launch failure, no device), and write the
 * derived series (derive.h).
 *
 * Thread-safety: any thread; concurrent calls share nothing but the GPU
 * they name (calls on one GPU serialise on its stream).
 */
#ifndef LDCT_PIPELINE_PROCESS_H
#define LDCT_PIPELINE_PROCESS_H

#include "config/config.h"
#include "gpu/device.h"
#include "gpu/nlm.h"
#include "pipeline/derive.h"

#include <stdint.h>

/* Fixes the derived UIDs: uids[i] holds a fresh candidate for
 * source_sops[i] and series_uid (DERIVE_UID_LEN) the derived series UID on
 * input; both must hold the UIDs to use on output (the daemon stores them
 * once per job, and reuses an earlier job's only for the same result).
 * *dated_ms (now on input) may be set to the time that dates the series
 * (the reused job's, so the same UIDs carry the same dates). Returns 0 or
 * an error. */
typedef int (*process_uids_fn)(void *ctx, int n, const char *const *source_sops,
                               char (*uids)[DERIVE_UID_LEN], char *series_uid, int64_t *dated_ms);

/* Reconstruction of projection data (algorithm fdk; pipeline/recon.h).
 * Zero fields take the defaults: matrix 512, field of view what the fan
 * covers, slice thickness the detector row pitch at the isocentre, slices
 * what the cone covers, mu_water 0.0193 / mm; kernel is enum gpu_fdk_filter
 * (process_params_parse's default: shepp-logan). */
typedef struct process_fdk {
    int matrix;
    double fov_mm, slice_mm;
    int slices, kernel;
    double mu_water;
} process_fdk;

/* adaptive4d's mapping parameters from the rule (config/config.h): value i
 * is used when bit i of `set` is on, else the engine's default. */
enum {
    A4D_DOWNSAMPLE,
    A4D_M_REFERENCE,
    A4D_M_ALPHA,
    A4D_M_BETA,
    A4D_M_SIGMA,
    A4D_MU_ALPHA,
    A4D_MU_BETA,
    A4D_M_PASS,
    A4D_T_SCALE,
    A4D_PASS_T,
    A4D_STATIC_SIGMA_T,
    A4D_STATIC_T,
    A4D_NPARAMS
};
typedef struct process_a4d {
    double v[A4D_NPARAMS];
    unsigned set;
} process_a4d;

/* Progress of a series while it is processed: stage "reading", "filtering",
 * "reconstructing" or "writing", and the fraction of that stage done (0 to
 * 1, counted per file when reading and writing; < 0 where the stage is not
 * counted: the CUDA versions, which run in seconds). A fallback to the CPU,
 * or a second reading of a stack (auto going slice by slice), starts its
 * stage again from 0. Called on the thread that called process_series. */
typedef void (*process_progress_fn)(void *ctx, const char *stage, double fraction);

typedef struct process_opts {
    int algorithm;          /* cfg_algorithm; ALGO_AUTO is resolved with the thickness */
    gpu_nlm_params nlm;     /* radii, h or h_auto with strength */
    process_fdk fdk;        /* algorithm fdk */
    process_a4d a4d;        /* algorithm adaptive4d */
    const gpu_device *dev;  /* NULL: the CPU */
    const char *uid_root;   /* root of the fresh UIDs */
    const char *series_uid; /* derived series UID; NULL: a fresh one */
    const char *description_suffix;
    int series_number_offset;
    const char *out_dir;
    int min_free_mb;      /* the result must leave this much free in out_dir */
    process_uids_fn uids; /* NULL: fresh UIDs are used as they are */
    void *uids_ctx;
    process_progress_fn progress; /* optional; may be NULL */
    void *progress_ctx;
} process_opts;

/* Internal (process.c, recon.c): reports a stage to o->progress, if set. */
void process__progress(const process_opts *o, const char *stage, double fraction);
/* gpu_progress reporters of a stage's fraction; ctx is the process_opts. */
void process__reading_progress(void *ctx, double fraction);
void process__writing_progress(void *ctx, double fraction);

/* Before any computing: LDCT_ENOSPACE, with a message in err, when about
 * `bytes` more in o->out_dir (or its nearest existing parent) would leave
 * less than half of o->min_free_mb free (the other half is reception's
 * alone: the receiver refuses below min_free_mb, so a disk it filled to
 * there still takes results); LDCT_EINPUT when the disk is too small for
 * the result at all. Unknown free space passes (the write then reports a
 * full disk). The `files` it writes need as many free inodes besides
 * PROCESS_KEEP_INODES (twice what reception refuses below), else
 * LDCT_ENOSPACE too. */
int process_check_room(const process_opts *o, uint64_t bytes, uint64_t files, char *err,
                       size_t len);

/* Free inodes a result leaves (reception's INGEST_MIN_FREE_INODES twice). */
#define PROCESS_KEEP_INODES 128u

/* Bytes a derived file takes besides its pixels (the copied header). */
#define PROCESS_HEADER_BYTES (16u * 1024u)

typedef struct process_result {
    int n; /* derived files written, one per source */
    char (*source_sops)[DERIVE_UID_LEN];
    char (*derived_sops)[DERIVE_UID_LEN];
    char (*paths)[DERIVE_PATH_LEN];
    char series_uid[DERIVE_UID_LEN];
    int64_t dated_ms;               /* Series / Content Date and Time of the result */
    char algorithm[16], device[16]; /* what ran, where ("cpu" after a fallback) */
    int nx, ny, nz, nt;             /* nt: time points (1 for a 3D series) */
    float h;                        /* nlm2d/nlm3d: the filtering parameter used (HU); else 0 */
    float cutoff;                   /* nlm2d/nlm3d: distance cutoff applied (h^2; 0 = none) */
    double noise_sigma;             /* estimated noise of the input (HU); -1 = none (images
                                       under 3x3 pixels) */
    int gpu_fallback;               /* 1 when the GPU failed and the CPU did the work */
    double load_s, filter_s, write_s;
} process_result;

/* Processes the n files into out_dir. Returns 0 and fills *r (free with
 * process_result_free), or an error with one sentence in err:
 * LDCT_EINPUT / LDCT_EUNSUPPORTED for a series that cannot be processed as
 * it is (process_error_permanent says so), others for passing trouble. */
int process_series(const char *const *paths, int n, const process_opts *o, process_result *r,
                   char *err, size_t err_len);

void process_result_free(process_result *r);

/* 1 when retrying cannot help (the input itself is the problem). */
int process_error_permanent(int rc);

/* A job's parameters as stored in its row: the rule's algorithm options
 * ("search_radius=5 patch_radius=2 h=0 strength=1 series_number_offset=1000
 * ... patch_weighting=0 distance_cutoff=4"; 0 radius = the algorithm's
 * default, h 0 = from the noise, patch_weighting 0 uniform / 1 gaussian,
 * distance_cutoff in h^2 with 0 = none). */
void process_params_format(const cfg_rule *r, char *out, size_t len);

/* Fills o->nlm and o->series_number_offset from a stored parameter string
 * (missing keys keep the defaults: a string without distance_cutoff gets
 * GPU_NLM_DEFAULT_CUTOFF). LDCT_EINPUT on an unknown key or a value out of
 * its bounds (patch_weighting 0 or 1, distance_cutoff 0..GPU_NLM_MAX_CUTOFF). */
int process_params_parse(const char *params, process_opts *o);

/* "nlm2d" / "nlm3d" / "auto". */
const char *process_algorithm_name(int algorithm);

/* ", distance cutoff 4 h^2" or ", no distance cutoff" (cutoff 0): how the
 * DerivationDescription and `ldct filter` name process_result.cutoff. */
void process_cutoff_text(float cutoff, char *out, size_t len);

/* The filtering parameters of a result for a summary line: ", h 35.6 (noise
 * 25.2), distance cutoff 4 h^2" for nlm2d/nlm3d, ", noise 25.2" for anlm
 * and adaptive4d (their strength is local or their own, not one h), ""
 * for fdk; the noise part only when it was estimated. */
void process_params_text(const process_result *r, char *out, size_t len);

/* Parses an algorithm name; -1 if unknown. */
int process_algorithm_parse(const char *name);

#endif
