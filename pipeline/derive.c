/* Derived series writer; see derive.h. */
#include "pipeline/derive.h"

#include "common/err.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "scp/scp.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The values of the frames of source `src`, in the source's frame order. */
static float *gather_frames(const asm_source *src, const gpu_volume *v)
{
    size_t plane = (size_t)v->nx * (size_t)v->ny;
    float *buf = malloc(plane * (size_t)src->frames * sizeof *buf);
    if (!buf)
        return NULL;
    for (int f = 0; f < src->frames; f++)
        memcpy(buf + plane * (size_t)f, v->data + plane * (size_t)src->z[f], plane * sizeof *buf);
    return buf;
}

/* Writes one derived file (temporary name, fsync, rename); *fresh = 1 when
 * it made a file that did not exist before (so a failed job may remove it). */
static int write_one(const asm_source *src, const gpu_volume *v, const derive_params *p,
                     const char *uid, char *path, int *fresh, char *err, size_t err_len)
{
    char tmp[DERIVE_PATH_LEN + 16];
    snprintf(path, DERIVE_PATH_LEN, "%s/%s.dcm", p->out_dir, uid);
    snprintf(tmp, sizeof tmp, "%s/.%s.tmp", p->out_dir, uid);
    float *values = gather_frames(src, v);
    if (!values)
        return snprintf(err, err_len, "out of memory"), -ENOMEM;
    scp_derived_params dp = {
        .source_path = src->path,
        .series_uid = p->series_uid,
        .dated_ms = p->dated_ms,
        .sop_uid = uid,
        .series_description_suffix = p->description_suffix,
        .series_number = p->series_number_offset,
        .series_number_is_offset = 1,
        .derivation_description = p->derivation,
        .values = values,
    };
    int rc = scp_derived_write(&dp, tmp, err, err_len);
    free(values);
    const int existed = access(path, F_OK) == 0;
    if (!rc && (rc = fs_fsync_path(tmp)) == 0 && rename(tmp, path) != 0)
        rc = -errno;
    *fresh = !rc && !existed;
    if (rc) {
        if (!err[0])
            snprintf(err, err_len, "writing %s: %s", path, ldct_strerror(rc));
        unlink(tmp);
    }
    return rc;
}

int derive_series_write(const asm_series *s, const gpu_volume *values, const derive_params *p,
                        char (*uids)[DERIVE_UID_LEN], char (*paths)[DERIVE_PATH_LEN], char *err,
                        size_t err_len)
{
    if (!gpu_volume_same_shape(&s->vol, values))
        return snprintf(err, err_len, "result volume has another shape"), LDCT_EINPUT;
    int rc = fs_mkdirs(p->out_dir);
    if (rc)
        return snprintf(err, err_len, "cannot create %s: %s", p->out_dir, ldct_strerror(rc)), rc;
    int first = 0;
    int *fresh = calloc((size_t)s->nsrc, sizeof *fresh);
    if (!fresh)
        return snprintf(err, err_len, "out of memory"), -ENOMEM;
    gpu_progress_count count;
    gpu_progress_begin(&count, p->progress, 0.0, 1.0, s->nsrc);
#pragma omp parallel for schedule(dynamic)
    for (int i = 0; i < s->nsrc; i++) {
        char e[256] = "";
        int r = write_one(&s->src[i], values, p, uids[i], paths[i], &fresh[i], e, sizeof e);
        gpu_progress_add(&count, 1);
        if (r) {
#pragma omp critical(derive_err)
            if (!first) {
                first = r;
                snprintf(err, err_len, "%s", e);
            }
        }
    }
    if (!first && (first = fs_fsync_path(p->out_dir)))
        snprintf(err, err_len, "cannot sync %s: %s", p->out_dir, ldct_strerror(first));
    /* A failed series leaves no part of itself behind (files an earlier run
     * made under the same UIDs stay). */
    for (int i = 0; first && i < s->nsrc; i++)
        if (fresh[i])
            unlink(paths[i]);
    free(fresh);
    if (!first)
        gpu_progress_end(&count);
    return first;
}
