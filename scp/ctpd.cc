/* scp/ctpd.cc: DICOM-CT-PD projection data (Chen et al., Med. Phys. 42(12),
 * 2015, the format of the Mayo Clinic / AAPM low-dose CT projection data):
 * reading the per-view geometry from the private groups 7029/7031/7033 and
 * the line integrals, and writing synthetic instances for tests and the
 * simulator.
 *
 * Tag meanings and VRs follow the DICOM-CT-PD dictionary (v8) and the public
 * readers of FreeCT (DCMTK) and ODL (pydicom): rows/columns US, spacings and
 * positions FL, detector shape and flying focal spot mode CS, angles in
 * radians, DetectorCentralElement a 1-based (column, row) pair. The Mayo
 * files store each view transposed (DICOM Rows = detector columns, detector
 * row index fastest); both orientations are accepted. Any thread.
 */
#include "scp/scp.h"
#include "scp/internal.hh"

extern "C" {
#include "common/err.h"
}

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcfilefo.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include <unistd.h>

namespace
{

const DcmTagKey k_rows(0x7029, 0x1010), k_cols(0x7029, 0x1011), k_transverse(0x7029, 0x1002),
    k_axial_sp(0x7029, 0x1006), k_shape(0x7029, 0x100B), k_angle(0x7031, 0x1001),
    k_axial(0x7031, 0x1002), k_radial(0x7031, 0x1003), k_src_det(0x7031, 0x1031),
    k_central(0x7031, 0x1033), k_sh_axial(0x7033, 0x100B), k_sh_angular(0x7033, 0x100C),
    k_sh_radial(0x7033, 0x100D), k_ffs(0x7033, 0x100E), k_views(0x7033, 0x1013);

/* Raw little-endian bytes of an element read without its VR (implicit VR
 * files give private elements VR UN). */
bool raw_bytes(DcmItem *ds, const DcmTagKey &tag, std::vector<Uint8> &out)
{
    DcmElement *e = nullptr;
    if (ds->findAndGetElement(tag, e).bad() || !e)
        return false;
    Uint8 *b = nullptr;
    if (e->getUint8Array(b).bad() || !b)
        return false;
    out.assign(b, b + e->getLength());
    return true;
}

/* Value i of an FL element (or of raw bytes holding 4-byte floats). */
bool get_fl(DcmItem *ds, const DcmTagKey &tag, double *out, unsigned long i = 0)
{
    Float32 f;
    if (ds->findAndGetFloat32(tag, f, i).good()) {
        *out = f;
        return true;
    }
    std::vector<Uint8> b;
    if (!raw_bytes(ds, tag, b) || b.size() < 4 * (i + 1))
        return false;
    memcpy(&f, b.data() + 4 * i, 4);
    *out = f;
    return true;
}

bool get_us(DcmItem *ds, const DcmTagKey &tag, int *out)
{
    Uint16 v;
    if (ds->findAndGetUint16(tag, v).good()) {
        *out = v;
        return true;
    }
    std::vector<Uint8> b;
    if (!raw_bytes(ds, tag, b) || b.size() < 2)
        return false;
    *out = b[0] | (b[1] << 8);
    return true;
}

/* 1 when the element exists with the VR `vr` (an implicit VR file leaves
 * unknown private elements without one: UN or DCMTK's unknown). */
bool has_vr(DcmItem *ds, const DcmTagKey &tag, DcmEVR vr)
{
    DcmElement *e = nullptr;
    return ds->findAndGetElement(tag, e).good() && e && e->ident() == vr;
}

void get_cs(DcmItem *ds, const DcmTagKey &tag, char *out, size_t len)
{
    OFString v;
    if (has_vr(ds, tag, EVR_CS) && ds->findAndGetOFString(tag, v).good()) {
        scp__strlcpy(out, v.c_str(), len);
        return;
    }
    std::vector<Uint8> b;
    std::string s = raw_bytes(ds, tag, b) ? std::string(b.begin(), b.end()) : std::string();
    while (!s.empty() && (s.back() == ' ' || s.back() == '\0'))
        s.pop_back();
    scp__strlcpy(out, s.c_str(), len);
}

void get_uid(DcmItem *ds, const DcmTagKey &tag, char *out, size_t len)
{
    OFString v;
    scp__strlcpy(out, ds->findAndGetOFString(tag, v).good() ? v.c_str() : "", len);
}

/* DetectorCentralElement (1-based column, row) must be a number on the
 * detector or half an element beyond it: a NaN crashed the rebinning, and
 * one far off it gave an all-air volume reported as a success. */
bool central_element_valid(const scp_ctpd_info *o, char *err, size_t len)
{
    if (std::isfinite(o->central_col) && std::isfinite(o->central_row) && o->central_col >= 0.5 &&
        o->central_col <= o->det_cols + 0.5 && o->central_row >= 0.5 &&
        o->central_row <= o->det_rows + 0.5)
        return true;
    scp__set_err(err, len,
                 "(7031,1033) DetectorCentralElement %.6g\\%.6g is not on the detector of %d"
                 " columns x %d rows",
                 o->central_col, o->central_row, o->det_cols, o->det_rows);
    return false;
}

/* The focal centre's angle and axial position and the flying focal spot's
 * shifts must be numbers (NaN or infinity would go into the geometry). */
bool positions_finite(const scp_ctpd_info *o, char *err, size_t len)
{
    const double v[] = {o->angle_rad, o->axial_mm, o->shift_axial_mm, o->shift_angular_rad,
                        o->shift_radial_mm};
    for (double x : v)
        if (!std::isfinite(x)) {
            scp__set_err(err, len,
                         "projection geometry with a value that is not a number"
                         " (focal centre position or flying focal spot shift)");
            return false;
        }
    return true;
}
/* The required geometry; a message names the first missing element. */
int read_geometry(DcmItem *ds, scp_ctpd_info *o, char *err, size_t len)
{
    struct {
        const DcmTagKey &tag;
        double *dst;
        const char *name;
    } fl[] = {
        {k_transverse, &o->elem_transverse_mm, "(7029,1002) DetectorElementTransverseSpacing"},
        {k_axial_sp, &o->elem_axial_mm, "(7029,1006) DetectorElementAxialSpacing"},
        {k_angle, &o->angle_rad, "(7031,1001) DetectorFocalCenterAngularPosition"},
        {k_axial, &o->axial_mm, "(7031,1002) DetectorFocalCenterAxialPosition"},
        {k_radial, &o->radial_mm, "(7031,1003) DetectorFocalCenterRadialDistance"},
        {k_src_det, &o->src_det_mm, "(7031,1031) ConstantRadialDistance"},
        {k_central, &o->central_col, "(7031,1033) DetectorCentralElement"},
    };
    for (auto &f : fl)
        if (!get_fl(ds, f.tag, f.dst)) {
            scp__set_err(err, len, "projection data without %s", f.name);
            return LDCT_EINPUT;
        }
    if (!get_fl(ds, k_central, &o->central_row, 1)) {
        scp__set_err(err, len, "(7031,1033) DetectorCentralElement needs a column and a row");
        return LDCT_EINPUT;
    }
    get_fl(ds, k_sh_axial, &o->shift_axial_mm);
    get_fl(ds, k_sh_angular, &o->shift_angular_rad);
    get_fl(ds, k_sh_radial, &o->shift_radial_mm);
    get_cs(ds, k_shape, o->det_shape, sizeof o->det_shape);
    get_cs(ds, k_ffs, o->ffs_mode, sizeof o->ffs_mode);
    get_us(ds, k_views, &o->views_per_rotation);
    if (o->det_rows <= 0 || o->det_cols <= 0 || !(o->elem_transverse_mm > 0) ||
        !(o->elem_axial_mm > 0) || !(o->radial_mm > 0) || !(o->src_det_mm > o->radial_mm)) {
        scp__set_err(err, len,
                     "projection geometry out of range: %dx%d elements of %.4g x %.4g mm,"
                     " focal centre %.4g mm from the isocentre, %.4g mm from the detector",
                     o->det_cols, o->det_rows, o->elem_transverse_mm, o->elem_axial_mm,
                     o->radial_mm, o->src_det_mm);
        return LDCT_EINPUT;
    }
    return central_element_valid(o, err, len) && positions_finite(o, err, len) ? 0 : LDCT_EINPUT;
}

/* Which way the view is stored, from the image's Rows and Columns. */
int orientation(DcmItem *ds, scp_ctpd_info *o, char *err, size_t len)
{
    Uint16 r = 0, c = 0;
    ds->findAndGetUint16(DCM_Rows, r);
    ds->findAndGetUint16(DCM_Columns, c);
    if (r == o->det_cols && c == o->det_rows)
        o->transposed = 1;
    else if (r == o->det_rows && c == o->det_cols)
        o->transposed = 0;
    else {
        scp__set_err(err, len, "image of %ux%u pixels for a detector of %d columns x %d rows",
                     (unsigned)c, (unsigned)r, o->det_cols, o->det_rows);
        return LDCT_EINPUT;
    }
    return 0;
}

int read_header(const char *path, scp_ctpd_info *o, char *err, size_t len)
{
    if (access(path, R_OK) != 0) {
        int e = errno;
        scp__set_err(err, len, "%s: %s", path, strerror(e));
        return -e;
    }
    DcmFileFormat ff;
    OFCondition c =
        ff.loadFileUntilTag(path, EXS_Unknown, EGL_noChange, 4096, ERM_autoDetect, DCM_PixelData);
    if (c.bad()) {
        scp__set_err(err, len, "%s is not readable DICOM (%s)", path, c.text());
        return LDCT_EINPUT;
    }
    DcmDataset *ds = ff.getDataset();
    if (!get_us(ds, k_rows, &o->det_rows))
        return LDCT_ENOTFOUND; /* not projection data */
    if (!get_us(ds, k_cols, &o->det_cols)) {
        scp__set_err(err, len, "projection data without (7029,1011) NumberofDetectorColumns");
        return LDCT_EINPUT;
    }
    get_uid(ds, DCM_SOPInstanceUID, o->sop_instance_uid, sizeof o->sop_instance_uid);
    get_uid(ds, DCM_SeriesInstanceUID, o->series_uid, sizeof o->series_uid);
    get_uid(ds, DCM_StudyInstanceUID, o->study_uid, sizeof o->study_uid);
    get_uid(ds, DCM_PatientID, o->patient_id, sizeof o->patient_id);
    get_uid(ds, DCM_Modality, o->modality, sizeof o->modality);
    Sint32 n = 0;
    o->instance_number = ds->findAndGetSint32(DCM_InstanceNumber, n).good() ? (int)n : 0;
    int rc = read_geometry(ds, o, err, len);
    return rc ? rc : orientation(ds, o, err, len);
}

int read_values(const char *path, const scp_ctpd_info *o, float *values, size_t count, char *err,
                size_t len)
{
    size_t n = (size_t)o->det_rows * (size_t)o->det_cols;
    if (count != n) {
        scp__set_err(err, len, "buffer of %zu values for %zu detector elements", count, n);
        return LDCT_EINPUT;
    }
    if (!o->transposed)
        return scp_slice_read_hu(path, values, count, err, len);
    std::vector<float> stored(n);
    int rc = scp_slice_read_hu(path, stored.data(), n, err, len);
    if (rc)
        return rc;
    /* stored[col * det_rows + row] -> values[row * det_cols + col] */
    for (int col = 0; col < o->det_cols; col++)
        for (int row = 0; row < o->det_rows; row++)
            values[(size_t)row * o->det_cols + col] = stored[(size_t)col * o->det_rows + row];
    return 0;
}

OFCondition put_private(DcmItem *ds, const scp_ctpd_info *g)
{
    OFCondition c = ds->putAndInsertString(DcmTag(0x7029, 0x0010, EVR_LO), "DICOM-CT-PD");
    if (c.good())
        c = ds->putAndInsertString(DcmTag(0x7031, 0x0010, EVR_LO), "DICOM-CT-PD");
    if (c.good())
        c = ds->putAndInsertString(DcmTag(0x7033, 0x0010, EVR_LO), "DICOM-CT-PD");
    struct {
        DcmTagKey tag;
        double v;
    } fl[] = {{k_transverse, g->elem_transverse_mm},
              {k_axial_sp, g->elem_axial_mm},
              {k_angle, g->angle_rad},
              {k_axial, g->axial_mm},
              {k_radial, g->radial_mm},
              {k_src_det, g->src_det_mm},
              {k_sh_axial, g->shift_axial_mm},
              {k_sh_angular, g->shift_angular_rad},
              {k_sh_radial, g->shift_radial_mm}};
    for (auto &f : fl)
        if (c.good())
            c = ds->putAndInsertFloat32(DcmTag(f.tag, EVR_FL), (Float32)f.v);
    const Float32 central[2] = {(Float32)g->central_col, (Float32)g->central_row};
    if (c.good())
        c = ds->putAndInsertFloat32Array(DcmTag(k_central, EVR_FL), central, 2);
    if (c.good())
        c = ds->putAndInsertUint16(DcmTag(k_rows, EVR_US), (Uint16)g->det_rows);
    if (c.good())
        c = ds->putAndInsertUint16(DcmTag(k_cols, EVR_US), (Uint16)g->det_cols);
    if (c.good())
        c = ds->putAndInsertUint16(DcmTag(k_views, EVR_US), (Uint16)g->views_per_rotation);
    if (c.good())
        c = ds->putAndInsertString(DcmTag(k_shape, EVR_CS), g->det_shape);
    if (c.good())
        c = ds->putAndInsertString(DcmTag(k_ffs, EVR_CS), g->ffs_mode[0] ? g->ffs_mode : "FFSNONE");
    return c;
}

/* Stored pixels of the Mayo orientation (detector row index fastest). */
std::vector<int16_t> stored_pixels(const scp_ctpd_params *p)
{
    const scp_ctpd_info &g = p->geo;
    std::vector<int16_t> px((size_t)g.det_rows * g.det_cols);
    for (int col = 0; col < g.det_cols; col++)
        for (int row = 0; row < g.det_rows; row++) {
            double s =
                std::nearbyint((p->values[(size_t)row * g.det_cols + col] - p->rescale_intercept) /
                               p->rescale_slope);
            s = s < -32768 ? -32768 : s > 32767 ? 32767 : s;
            px[(size_t)col * g.det_rows + row] = (int16_t)s;
        }
    return px;
}

int write_file(const scp_ctpd_params *p, const char *path, char *err, size_t len)
{
    std::vector<int16_t> px = stored_pixels(p);
    const double pos[3] = {0, 0, p->geo.axial_mm}, ori[6] = {1, 0, 0, 0, 1, 0};
    scp_ct_params ct = {};
    ct.patient_name = p->patient_name;
    ct.patient_id = p->patient_id;
    ct.study_uid = p->study_uid;
    ct.series_uid = p->series_uid;
    ct.sop_uid = p->sop_uid;
    ct.frame_of_reference_uid = p->frame_of_reference_uid;
    ct.series_description = p->series_description;
    ct.series_number = 1;
    ct.instance_number = p->instance_number;
    ct.rows = p->geo.det_cols; /* transposed, as the Mayo files */
    ct.cols = p->geo.det_rows;
    ct.pixel_spacing[0] = p->geo.elem_transverse_mm;
    ct.pixel_spacing[1] = p->geo.elem_axial_mm;
    ct.slice_thickness = p->geo.elem_axial_mm;
    memcpy(ct.position, pos, sizeof pos);
    memcpy(ct.orientation, ori, sizeof ori);
    ct.rescale_slope = p->rescale_slope;
    ct.rescale_intercept = p->rescale_intercept;
    ct.kvp = 120;
    ct.pixels = px.data();
    int rc = scp_ct_write(&ct, path);
    if (rc) {
        scp__set_err(err, len, "cannot write %s: %s", path, ldct_strerror(rc));
        return rc;
    }
    DcmFileFormat ff;
    OFCondition c = ff.loadFile(path);
    /* Large elements are read lazily from the file, which is rewritten in
     * place below: load them now or the pixels are lost. */
    if (c.good())
        c = ff.loadAllDataIntoMemory();
    if (c.good())
        c = put_private(ff.getDataset(), &p->geo);
    if (c.good())
        c = ff.getDataset()->putAndInsertString(DCM_RescaleType, "US");
    if (c.bad()) {
        scp__set_err(err, len, "cannot add the projection geometry: %s", c.text());
        return LDCT_EDICOM;
    }
    return scp__save(&ff, nullptr, path, err, len);
}

} // namespace

extern "C" int scp_ctpd_read(const char *path, scp_ctpd_info *info, float *values, size_t count,
                             char *err, size_t err_len)
{
    if (!path || !info)
        return -EINVAL;
    *info = scp_ctpd_info{};
    try {
        int rc = scp__global_init_once();
        if (!rc)
            rc = read_header(path, info, err, err_len);
        if (!rc && values)
            rc = read_values(path, info, values, count, err, err_len);
        return rc;
    } catch (const std::bad_alloc &) {
        scp__set_err(err, err_len, "out of memory");
        return -ENOMEM;
    } catch (...) {
        scp__set_err(err, err_len, "unexpected error reading %s", path);
        return LDCT_EDICOM;
    }
}

extern "C" int scp_ctpd_write(const scp_ctpd_params *p, const char *path, char *err, size_t err_len)
{
    if (!p || !path || !p->values || p->geo.det_rows <= 0 || p->geo.det_cols <= 0 ||
        !(p->rescale_slope != 0))
        return -EINVAL;
    try {
        int rc = scp__global_init_once();
        if (!rc)
            rc = write_file(p, path, err, err_len);
        if (rc)
            unlink(path);
        return rc;
    } catch (const std::bad_alloc &) {
        unlink(path);
        scp__set_err(err, err_len, "out of memory");
        return -ENOMEM;
    } catch (...) {
        unlink(path);
        scp__set_err(err, err_len, "unexpected error writing %s", path);
        return LDCT_EDICOM;
    }
}
