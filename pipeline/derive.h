/* derive: writes the derived series of a processed volume, one derived
 * instance per source file (a multi-frame source gives a multi-frame
 * result), each through scp_derived_write (new UIDs, DERIVED\SECONDARY,
 * DerivationDescription, SourceImageSequence, description suffix, number
 * offset, geometry and rescale of its source, values rounded and clamped to
 * the stored range).
 *
 * Durability: each file is written to a temp name in out_dir, fsync'd and
 * renamed to <SOPInstanceUID>.dcm; out_dir is fsync'd once at the end, so
 * when derive_series_write returns 0 every file survives a crash. Rewriting
 * with the same UIDs (a job redone after a crash) replaces the files.
 *
 * Thread-safety: any thread; writes files in parallel with an OpenMP team.
 */
#ifndef LDCT_PIPELINE_DERIVE_H
#define LDCT_PIPELINE_DERIVE_H

#include "pipeline/assemble.h"

#include <stdint.h>

#include <stddef.h>

#define DERIVE_UID_LEN 65
#define DERIVE_PATH_LEN 1024

typedef struct derive_params {
    const char *series_uid;         /* the derived SeriesInstanceUID */
    int64_t dated_ms;               /* Series / Content Date and Time (0: now) */
    const char *description_suffix; /* appended to the source's SeriesDescription */
    int series_number_offset;       /* added to the source's SeriesNumber */
    const char *derivation;         /* DerivationDescription */
    const char *out_dir;            /* created if missing */
    const gpu_progress *progress;   /* optional: reports as each file is written (on the
                                     * calling thread; 1 at success) */
} derive_params;

/* Writes one derived instance per source of s with the values of `values`
 * (same shape as s->vol). uids[i] is the SOP Instance UID for s->src[i];
 * the path of each file written goes into paths[i]. Returns 0, or the
 * first error (with a message in err); files already written stay (they
 * are rewritten by the next attempt). */
int derive_series_write(const asm_series *s, const gpu_volume *values, const derive_params *p,
                        char (*uids)[DERIVE_UID_LEN], char (*paths)[DERIVE_PATH_LEN], char *err,
                        size_t err_len);

#endif
