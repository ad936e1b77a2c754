/* assemble: turns the files of one received DICOM series into one float
 * volume in HU, sorted along the slice normal, or refuses the series with
 * one sentence a PACS administrator understands.
 *
 * Invariants: every file is checked before any pixel is read: it is DICOM,
 * it is a greyscale image, and it agrees with the rest of the series on
 * series UID, rows, columns, pixel spacing (relative tolerance 1e-3),
 * orientation (1e-4), frame of reference, bits allocated and stored, pixel
 * representation and photometric interpretation; its rescale is finite with
 * a non-zero slope (each slice keeps its own rescale). Frames (one per
 * classic slice, one per frame of a multi-frame Enhanced CT file, mixed
 * freely) are sorted by their position projected on the slice normal,
 * ascending; two frames within 1% of the median step of each other, a step
 * of more than 1.5x the median (missing slice) or any step more than 10%
 * off the median refuse the series. A single frame is a valid 1-slice
 * volume.
 *
 * 4D: when most slice positions (within 0.01 mm) repeat and one temporal
 * attribute tells every repeat apart (tried in this order:
 * TemporalPositionIndex / TemporalPositionIdentifier, or the per-frame
 * TemporalPositionIndex of an Enhanced CT; TriggerTime;
 * NominalPercentageOfCardiacPhase; AcquisitionTime), the volume gets
 * nt = repeats per position, time points ordered by that attribute (its
 * rank within each position, so acquisition times may differ from slice to
 * slice), and every position must have the same number of time points (else
 * a refusal naming two positions). The step checks then apply to the
 * positions. Without such an attribute the repeats are duplicates as above.
 *
 * Thread-safety: any thread; no global state. asm_series_load reads the
 * headers and then the pixels of the files in parallel, with an OpenMP
 * parallel region per call (OMP_NUM_THREADS bounds it).
 */
#ifndef LDCT_PIPELINE_ASSEMBLE_H
#define LDCT_PIPELINE_ASSEMBLE_H

#include "gpu/progress.h"
#include "gpu/volume.h"

#include <stddef.h>

/* One input file of the series. */
typedef struct asm_source {
    char path[1024];
    char sop_instance_uid[65], sop_class_uid[65];
    int instance_number; /* 0 if absent */
    int frames;          /* frames in this file (1 for classic single-frame) */
    int *z;              /* plane index in the volume (t * nz + z) of each of its frames,
                          * frames entries */
} asm_source;

typedef struct asm_series {
    gpu_volume vol; /* HU; nx = columns, ny = rows, nz = positions, nt = time points (1: 3D);
                     * spacing = {column spacing, row spacing, slice distance} (mm);
                     * slice distance = median step between sorted frames, for a
                     * single frame the slice thickness (or 1 when absent); pixel
                     * spacing 1 when the series has none */
    int nsrc;
    asm_source *src; /* in input order */
    char study_uid[65], series_uid[65], modality[17], frame_of_reference_uid[65];
    double slice_thickness; /* SliceThickness of the first slice (z = 0), NAN if absent or <= 0 */
    double normal[3];       /* unit slice normal used for sorting (row x column
                             * direction cosines); 0\0\1 for a single frame
                             * without orientation */
    int temporal_key;       /* 4D series: the SCP_TIME_* attribute that orders the time
                             * points (vol.nt > 1); -1 for a 3D series */
} asm_series;

/* Loads the n files (paths[0..n-1]). On success returns 0 and fills *out
 * (the caller frees it with asm_series_close). On failure returns
 * LDCT_EINPUT (inconsistent or unusable series, including files that are
 * not DICOM or not images, and n <= 0), LDCT_EUNSUPPORTED (colour images,
 * pixel formats the reader cannot decode), -EINVAL (NULL arguments),
 * -ENOENT / -EACCES (a file cannot be opened), -ENOMEM or LDCT_EDICOM,
 * writes one readable
 * sentence into err (size err_len; naming the slice by instance number, or
 * by file name when the number is absent or not unique) and leaves *out
 * zeroed. */
int asm_series_load(const char *const *paths, int n, asm_series *out, char *err, size_t err_len);

/* asm_series_load that also says, in *geometry, whether a refusal
 * (LDCT_EINPUT) was about the slices' place in space: positions, steps,
 * spacing, orientation, frame of reference or time points, i.e. what
 * asm_series_load_slices accepts (0 for any other outcome). */
int asm_series_load_checked(const char *const *paths, int n, asm_series *out, int *geometry,
                            char *err, size_t err_len);

/* The same for a filter that works slice by slice (nlm2d): the images
 * must agree on size and pixel format, but not on their place: gaps,
 * uneven or repeated positions, mixed orientations or frames of reference
 * and missing positions are accepted. Slices are sorted along the first
 * file's normal when every one has a position and an orientation, else by
 * instance number; no time points (nt = 1); spacing[2] is the median step
 * (or the thickness) and only describes the stack. */
int asm_series_load_slices(const char *const *paths, int n, asm_series *out, char *err,
                           size_t err_len);

/* What asm_series_load_with takes beyond the files. */
typedef struct asm_load_opts {
    int slices;                   /* 1: as asm_series_load_slices, 0: as asm_series_load */
    int *geometry;                /* optional: as asm_series_load_checked's */
    const gpu_progress *progress; /* optional: reports as each file's header, then its
                                   * pixels, are read (on the calling thread; 1 at success) */
} asm_load_opts;

/* asm_series_load or asm_series_load_slices as o says (o may be NULL). */
int asm_series_load_with(const char *const *paths, int n, const asm_load_opts *o, asm_series *out,
                         char *err, size_t err_len);

/* Why a series whose first instance is s can never be processed as
 * images, or NULL when it may be: not an image (no rows or columns, e.g. a
 * dose report), a colour image (e.g. a dose screen), or a localizer (Image
 * Type LOCALIZER: a topogram, not a volume). The reason is written into buf
 * (size len), which is returned. */
struct scp_slice_info;
const char *asm_not_processable(const struct scp_slice_info *s, char *buf, size_t len);

/* Frees what asm_series_load allocated and zeroes *s. A zeroed or already
 * closed struct, and NULL, are fine. */
void asm_series_close(asm_series *s);

#endif
