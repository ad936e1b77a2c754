/* recon: the processing of a projection series (algorithm fdk): assemble
 * the DICOM-CT-PD views (assemble_proj.h), reconstruct an axial volume with
 * FDK on the given device (the CPU reference when the GPU fails), convert
 * to HU with the rule's mu_water (HU = 1000 (mu - mu_water) / mu_water) and
 * write one CT image per slice (scp_recon_write) into the output folder.
 *
 * Output geometry (patient frame, see assemble_proj.h): a matrix x matrix
 * grid of the field of view centred on the isocentre, slices equally spaced
 * about the orbit plane, ImageOrientationPatient 1\0\0\0\1\0, slices in
 * ascending Z with instance numbers 1.. . UIDs: the series UID of the job;
 * SOP Instance UIDs through the process_uids_fn with the keys
 * "fdk-slice-<k>" (and "fdk-frame-of-reference" for the Frame of Reference
 * UID when the source has none), so a job redone reuses them.
 *
 * Durability: as derive.h (temp name, fsync, rename, the folder fsync'd).
 * Thread-safety: any thread; OpenMP inside.
 */
#ifndef LDCT_PIPELINE_RECON_H
#define LDCT_PIPELINE_RECON_H

#include "pipeline/process.h"

/* Reconstructs the n files; the same contract as process_series (r->n
 * slices written, r->source_sops hold the slice keys, r->h 0). */
int recon_series(const char *const *paths, int n, const process_opts *o, process_result *r,
                 char *err, size_t err_len);

#endif
