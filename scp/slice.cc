/* scp/slice.cc: reading instances for series assembly: the header facts
 * (UIDs, pixel format, geometry, rescale) and the rescaled pixel values.
 *
 * Invariants: the header reader stops before the pixel data; for images with
 * functional groups (Enhanced CT) geometry and rescale come from the Shared /
 * Per-Frame Functional Groups, frame 1's in the scalar fields and every
 * frame's position in frame_positions. The pixel reader decodes through
 * DCMTK's registered decoders and applies each frame's rescale. Any thread
 * may call these functions (each call loads its own dataset).
 */
#include "scp/scp.h"
#include "scp/internal.hh"

/* common/ headers are plain C without linkage guards. */
extern "C" {
#include "common/err.h"
#include "common/log.h"
}

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <dcmtk/dcmdata/dcpixel.h>
#include <dcmtk/dcmdata/dcspchrs.h>
#include <dcmtk/dcmdata/dcxfer.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include <iconv.h>
#include <sys/stat.h>
#include <unistd.h>

namespace
{

void get_str(DcmItem *ds, const DcmTagKey &tag, char *dst, size_t len)
{
    OFString v;
    scp__strlcpy(dst, ds->findAndGetOFString(tag, v).good() ? v.c_str() : "", len);
}

/* Reads n decimal values of `tag`; 1 when all were there. */
int get_doubles(DcmItem *ds, const DcmTagKey &tag, double *out, int n)
{
    if (!ds)
        return 0;
    for (int i = 0; i < n; i++) {
        Float64 v;
        if (ds->findAndGetFloat64(tag, v, (unsigned long)i).bad())
            return 0;
        out[i] = v;
    }
    return 1;
}

int has_functional_groups(DcmItem *ds)
{
    DcmItem *it = nullptr;
    return ds->findAndGetSequenceItem(DCM_SharedFunctionalGroupsSequence, it, 0).good() ||
           ds->findAndGetSequenceItem(DCM_PerFrameFunctionalGroupsSequence, it, 0).good();
}

/* Every frame's Plane Position (Patient); 0 when a frame lacks it. */
int read_frame_positions(DcmItem *ds, scp_slice_info *o)
{
    o->frame_positions = (double *)calloc((size_t)o->frames * 3, sizeof(double));
    if (!o->frame_positions)
        return -ENOMEM;
    for (int f = 0; f < o->frames; f++) {
        DcmItem *pp = scp__fg_item(ds, f, DCM_PlanePositionSequence);
        if (!get_doubles(pp, DCM_ImagePositionPatient, o->frame_positions + 3 * f, 3)) {
            free(o->frame_positions);
            o->frame_positions = nullptr;
            return 0;
        }
    }
    memcpy(o->position, o->frame_positions, sizeof o->position);
    o->has_position = 1;
    return 0;
}

double get_number(DcmItem *ds, const DcmTagKey &tag);

/* Every frame's TemporalPositionIndex (Frame Content); left NULL when a
 * frame lacks it. */
int read_frame_temporal(DcmItem *ds, scp_slice_info *o)
{
    double *t = (double *)calloc((size_t)o->frames, sizeof(double));
    if (!t)
        return -ENOMEM;
    for (int f = 0; f < o->frames; f++) {
        DcmItem *fc = scp__fg_item(ds, f, DCM_FrameContentSequence);
        Uint32 v = 0;
        if (!fc || fc->findAndGetUint32(DCM_TemporalPositionIndex, v).bad()) {
            free(t);
            return 0;
        }
        t[f] = v;
    }
    o->frame_temporal_index = t;
    return 0;
}

/* HHMMSS.frac (or HH:MM:SS of old files) as seconds since midnight, or NAN. */
double dicom_time_seconds(DcmItem *ds, const DcmTagKey &tag)
{
    OFString v;
    if (ds->findAndGetOFString(tag, v).bad() || v.length() < 2)
        return NAN;
    char digits[32];
    size_t k = 0;
    const char *frac = nullptr;
    for (const char *c = v.c_str(); *c && k + 1 < sizeof digits; c++) {
        if (*c == '.') {
            frac = c;
            break;
        }
        if (*c >= '0' && *c <= '9')
            digits[k++] = *c;
    }
    digits[k] = '\0';
    if (k < 2 || k % 2)
        return NAN;
    double parts[3] = {0, 0, 0};
    for (size_t i = 0; i < k / 2 && i < 3; i++)
        parts[i] = (digits[2 * i] - '0') * 10 + (digits[2 * i + 1] - '0');
    return parts[0] * 3600 + parts[1] * 60 + parts[2] + (frac ? strtod(frac, nullptr) : 0.0);
}

void read_temporal_fields(DcmItem *ds, scp_slice_info *o)
{
    o->temporal[SCP_TIME_INDEX] = get_number(ds, DCM_TemporalPositionIndex);
    if (std::isnan(o->temporal[SCP_TIME_INDEX]))
        o->temporal[SCP_TIME_INDEX] = get_number(ds, DCM_TemporalPositionIdentifier);
    o->temporal[SCP_TIME_TRIGGER] = get_number(ds, DCM_TriggerTime);
    o->temporal[SCP_TIME_PHASE] = get_number(ds, DCM_NominalPercentageOfCardiacPhase);
    o->temporal[SCP_TIME_ACQUISITION] = dicom_time_seconds(ds, DCM_AcquisitionTime);
}

int read_enhanced_geometry(DcmItem *ds, scp_slice_info *o)
{
    DcmItem *pm = scp__fg_item(ds, 0, DCM_PixelMeasuresSequence);
    o->has_spacing = get_doubles(pm, DCM_PixelSpacing, o->pixel_spacing, 2);
    get_doubles(pm, DCM_SliceThickness, &o->slice_thickness, 1);
    DcmItem *po = scp__fg_item(ds, 0, DCM_PlaneOrientationSequence);
    o->has_orientation = get_doubles(po, DCM_ImageOrientationPatient, o->orientation, 6);
    int rc = read_frame_positions(ds, o);
    return rc ? rc : read_frame_temporal(ds, o);
}

void read_plain_geometry(DcmItem *ds, scp_slice_info *o)
{
    o->has_position = get_doubles(ds, DCM_ImagePositionPatient, o->position, 3);
    o->has_orientation = get_doubles(ds, DCM_ImageOrientationPatient, o->orientation, 6);
    o->has_spacing = get_doubles(ds, DCM_PixelSpacing, o->pixel_spacing, 2);
    get_doubles(ds, DCM_SliceThickness, &o->slice_thickness, 1);
}

void read_pixel_fields(DcmItem *ds, scp_slice_info *o)
{
    Uint16 v;
    Sint32 n;
    o->rows = ds->findAndGetUint16(DCM_Rows, v).good() ? v : 0;
    o->cols = ds->findAndGetUint16(DCM_Columns, v).good() ? v : 0;
    o->frames = ds->findAndGetSint32(DCM_NumberOfFrames, n).good() && n > 0 ? (int)n : 1;
    o->bits_allocated = ds->findAndGetUint16(DCM_BitsAllocated, v).good() ? v : 0;
    o->bits_stored = ds->findAndGetUint16(DCM_BitsStored, v).good() ? v : o->bits_allocated;
    o->high_bit = ds->findAndGetUint16(DCM_HighBit, v).good() ? v : o->bits_stored - 1;
    o->pixel_representation = ds->findAndGetUint16(DCM_PixelRepresentation, v).good() ? v : 0;
    o->samples_per_pixel = ds->findAndGetUint16(DCM_SamplesPerPixel, v).good() ? v : 1;
    o->instance_number = ds->findAndGetSint32(DCM_InstanceNumber, n).good() ? (int)n : 0;
}

/* The first value of a DS, IS or FD element as a number, or NAN. */
double get_number(DcmItem *ds, const DcmTagKey &tag)
{
    OFString v;
    if (ds->findAndGetOFString(tag, v).bad() || v.empty())
        return NAN;
    char *end = nullptr;
    double d = strtod(v.c_str(), &end);
    return end == v.c_str() ? NAN : d;
}

/* Whether DCMTK can convert from the Specific Character Set cs. It
 * converts ISO 2022 IR 87 and IR 159 (Japanese kanji) only through GNU
 * libiconv; with the C library's iconv (Debian's build) or ICU,
 * selectCharacterSet() fails and logs an error each time, which would be
 * one error line per instance read of a Japanese series. */
bool convertible(const OFString &cs)
{
    if (!DcmSpecificCharacterSet::isConversionAvailable())
        return false;
#if DCMTK_ENABLE_CHARSET_CONVERSION != DCMTK_CHARSET_CONVERSION_ICONV
    if (cs.find("IR 87") != OFString_npos || cs.find("IR 159") != OFString_npos)
        return false;
#endif
    return true;
}

/* Whether cs is Japanese over ASCII: value 1 empty or ISO 2022 IR 6, every
 * other value ISO 2022 IR 87 or IR 159 (kanji, escaped in and out; the C
 * library's ISO-2022-JP-2 converts these, where DCMTK does not). */
bool japanese_over_ascii(const OFString &cs)
{
    std::string s(cs.c_str());
    size_t at = s.find('\\');
    if (at == std::string::npos)
        return false;
    std::string first = s.substr(0, at);
    if (!first.empty() && first != "ISO 2022 IR 6")
        return false;
    while (at != std::string::npos) {
        size_t next = s.find('\\', at + 1);
        std::string v = s.substr(at + 1, next == std::string::npos ? next : next - at - 1);
        if (v != "ISO 2022 IR 87" && v != "ISO 2022 IR 159")
            return false;
        at = next;
    }
    return true;
}

/* The dataset's converter to UTF-8, selected at the first value that needs
 * it (most values are ASCII), or none where it cannot be had: DCMTK's, or
 * for Japanese over ASCII the C library's ISO-2022-JP-2. */
struct to_utf8 {
    explicit to_utf8(DcmItem *d) : ds(d) {}
    ~to_utf8()
    {
        if (jp != (iconv_t)-1)
            iconv_close(jp);
    }
    to_utf8(const to_utf8 &) = delete;
    to_utf8 &operator=(const to_utf8 &) = delete;
    DcmItem *ds;
    DcmSpecificCharacterSet conv;
    iconv_t jp = (iconv_t)-1;
    int state = 0; /* 0: not tried, 1: DCMTK's, 2: jp, -1: none */

    void select()
    {
        OFString cs;
        if (ds->findAndGetOFStringArray(DCM_SpecificCharacterSet, cs).bad())
            cs.clear();
        if (convertible(cs) && conv.selectCharacterSet(cs).good())
            state = 1;
        else if (japanese_over_ascii(cs) &&
                 (jp = iconv_open("UTF-8", "ISO-2022-JP-2")) != (iconv_t)-1)
            state = 2;
        else
            state = -1;
    }

    /* v in UTF-8 into *u; false where it does not convert. */
    bool convert(const OFString &v, OFString *u)
    {
        if (state == 0)
            select();
        if (state == 1)
            return conv.convertString(v, *u).good();
        return state == 2 && iconv_value(v, u);
    }

    bool iconv_value(const OFString &v, OFString *u)
    {
        std::string in(v.c_str(), v.length()), out(4 * v.length() + 4, '\0');
        char *ip = &in[0], *op = &out[0];
        size_t il = in.size(), ol = out.size();
        iconv(jp, nullptr, nullptr, nullptr, nullptr);
        if (iconv(jp, &ip, &il, &op, &ol) == (size_t)-1 ||
            iconv(jp, nullptr, nullptr, &op, &ol) == (size_t)-1)
            return false;
        *u = OFString(out.data(), (size_t)(op - out.data()));
        return true;
    }
};

/* A text value for the rules, in UTF-8 as the configuration's patterns
 * are: converted from the dataset's Specific Character Set (a value that
 * does not convert, e.g. bytes the set does not declare or a set this
 * build cannot convert, is kept as it is). */
void get_utf8(DcmItem *ds, to_utf8 *cv, const DcmTagKey &tag, char *dst, size_t len)
{
    OFString v, u;
    if (ds->findAndGetOFString(tag, v).bad())
        v.clear();
    bool plain = true;
    for (size_t i = 0; i < v.length(); i++)
        plain = plain && (unsigned char)v[i] < 0x80 && v[i] != 0x1b;
    if (!plain && cv->convert(v, &u))
        v = u;
    scp__strlcpy(dst, v.c_str(), len);
}

void read_rule_fields(DcmItem *ds, scp_slice_info *o)
{
    Sint32 n;
    to_utf8 cv(ds);
    get_utf8(ds, &cv, DCM_SeriesDescription, o->series_description, sizeof o->series_description);
    get_utf8(ds, &cv, DCM_ProtocolName, o->protocol_name, sizeof o->protocol_name);
    get_str(ds, DCM_BodyPartExamined, o->body_part_examined, sizeof o->body_part_examined);
    get_utf8(ds, &cv, DCM_Manufacturer, o->manufacturer, sizeof o->manufacturer);
    OFString types;
    scp__strlcpy(o->image_type,
                 ds->findAndGetOFStringArray(DCM_ImageType, types).good() ? types.c_str() : "",
                 sizeof o->image_type);
    o->series_number = ds->findAndGetSint32(DCM_SeriesNumber, n).good() ? (int)n : 0;
    o->kvp = get_number(ds, DCM_KVP);
    o->ctdivol = get_number(ds, DCM_CTDIvol);
    o->exposure_mas = get_number(ds, DCM_Exposure);
}

/* Uncompressed pixel data lies in the file as is, so a file smaller than
 * the pixels its header declares cannot hold them. Checked on the header
 * alone, before anyone allocates for those pixels: a hostile or broken
 * header may declare 65535 x 65535 x 2^31 of them. */
int check_declared_size(DcmDataset *ds, const char *path, const scp_slice_info *o, char *err,
                        size_t len)
{
    DcmXfer x(ds->getOriginalXfer());
    struct stat st;
    if (o->rows <= 0 || o->cols <= 0 || o->bits_allocated <= 0 || x.isEncapsulated() ||
        x.getStreamCompression() != ESC_none || stat(path, &st) != 0)
        return 0;
    double need = (double)o->rows * o->cols * o->frames * o->bits_allocated / 8.0;
    if (need <= (double)st.st_size)
        return 0;
    scp__set_err(err, len,
                 "instance %s declares %dx%dx%d pixels of %d bits (%.0f bytes) but its file "
                 "has %lld bytes",
                 o->sop_instance_uid, o->cols, o->rows, o->frames, o->bits_allocated, need,
                 (long long)st.st_size);
    return LDCT_EINPUT;
}

/* An image with functional groups has one Per-Frame item per frame (PS3.3
 * C.7.6.16); a NumberOfFrames that disagrees would have the readers walk
 * frames that do not exist. */
int check_frame_groups(DcmItem *ds, const scp_slice_info *o, char *err, size_t len)
{
    DcmSequenceOfItems *pf = nullptr;
    unsigned long n = 0;
    if (ds->findAndGetSequence(DCM_PerFrameFunctionalGroupsSequence, pf).good() && pf)
        n = pf->card();
    if (n == (unsigned long)o->frames || (n == 0 && o->frames == 1))
        return 0;
    scp__set_err(err, len,
                 "instance %s has %d frames (NumberOfFrames) but %lu Per-Frame Functional "
                 "Groups item(s)",
                 o->sop_instance_uid, o->frames, n);
    return LDCT_EINPUT;
}

int read_info(const char *path, scp_slice_info *o, char *err, size_t len)
{
    if (access(path, R_OK) != 0) {
        int e = errno;
        scp__set_err(err, len, "%s: %s", path, strerror(e));
        return -e;
    }
    int rc = scp__check_nesting(path, SCP__MAX_NESTING, err, len);
    if (rc < 0)
        return rc;
    DcmFileFormat ff;
    OFCondition c =
        ff.loadFileUntilTag(path, EXS_Unknown, EGL_noChange, 4096, ERM_autoDetect, DCM_PixelData);
    if (c.bad()) {
        scp__set_err(err, len, "%s is not readable DICOM (%s)", path, c.text());
        return LDCT_EINPUT;
    }
    DcmDataset *ds = ff.getDataset();
    get_str(ds, DCM_SOPInstanceUID, o->sop_instance_uid, sizeof o->sop_instance_uid);
    get_str(ds, DCM_SOPClassUID, o->sop_class_uid, sizeof o->sop_class_uid);
    get_str(ds, DCM_StudyInstanceUID, o->study_uid, sizeof o->study_uid);
    get_str(ds, DCM_PatientID, o->patient_id, sizeof o->patient_id);
    get_str(ds, DCM_SeriesInstanceUID, o->series_uid, sizeof o->series_uid);
    get_str(ds, DCM_FrameOfReferenceUID, o->frame_of_reference_uid,
            sizeof o->frame_of_reference_uid);
    get_str(ds, DCM_Modality, o->modality, sizeof o->modality);
    get_str(ds, DCM_PhotometricInterpretation, o->photometric, sizeof o->photometric);
    if (!o->sop_instance_uid[0] || !o->sop_class_uid[0]) {
        scp__set_err(err, len, "%s has no SOP Class/Instance UID", path);
        return LDCT_EINPUT;
    }
    read_pixel_fields(ds, o);
    rc = check_declared_size(ds, path, o, err, len);
    if (rc < 0)
        return rc;
    read_rule_fields(ds, o);
    read_temporal_fields(ds, o);
    scp__frame_rescale(ds, 0, &o->rescale_slope, &o->rescale_intercept);
    if (!has_functional_groups(ds)) {
        read_plain_geometry(ds, o);
        return 0;
    }
    rc = check_frame_groups(ds, o, err, len);
    return rc < 0 ? rc : read_enhanced_geometry(ds, o);
}

int read_hu(const char *path, float *out, size_t count, char *err, size_t len)
{
    DcmFileFormat ff;
    int rc = scp__load_decoded(path, &ff, err, len);
    if (rc < 0)
        return rc;
    DcmDataset *ds = ff.getDataset();
    scp__pixfmt f;
    rc = scp__pixfmt_read(ds, &f, err, len);
    if (rc < 0)
        return rc;
    if (count != f.count()) {
        scp__set_err(err, len, "buffer of %zu values for %dx%dx%d pixels", count, f.cols, f.rows,
                     f.frames);
        return LDCT_EINPUT;
    }
    DcmElement *px = nullptr;
    Uint8 *p8 = nullptr;
    Uint16 *p16 = nullptr;
    unsigned long bytes = 0;
    if (ds->findAndGetElement(DCM_PixelData, px).good())
        bytes = px->getLength();
    size_t need = count * (size_t)(f.alloc / 8);
    OFCondition c = EC_IllegalCall;
    if (px && f.alloc == 8)
        c = px->getUint8Array(p8);
    else if (px)
        c = px->getUint16Array(p16);
    if (c.bad() || bytes < need) {
        scp__set_err(err, len, "pixel data missing or short (%lu of %zu bytes)", bytes, need);
        return LDCT_EINPUT;
    }
    size_t per_frame = (size_t)f.rows * (size_t)f.cols;
    for (int fr = 0; fr < f.frames; fr++) {
        double m, b;
        scp__frame_rescale(ds, fr, &m, &b);
        if (!std::isfinite(m) || m == 0 || !std::isfinite(b)) {
            scp__set_err(err, len, "frame %d has an unusable rescale (slope %g, intercept %g)",
                         fr + 1, m, b);
            return LDCT_EINPUT;
        }
        size_t base = per_frame * (size_t)fr;
        for (size_t i = 0; i < per_frame; i++)
            out[base + i] = (float)(scp__stored_at(f, p8, p16, base + i) * m + b);
    }
    return 0;
}

} // namespace

extern "C" int scp_slice_read_info(const char *path, scp_slice_info *out, char *err, size_t err_len)
{
    if (!out)
        return -EINVAL;
    *out = scp_slice_info{};
    if (!path) {
        scp__set_err(err, err_len, "no path");
        return -EINVAL;
    }
    int rc;
    try {
        rc = scp__global_init_once();
        if (rc == 0)
            rc = read_info(path, out, err, err_len);
    } catch (const std::bad_alloc &) {
        rc = -ENOMEM;
    } catch (...) {
        rc = LDCT_EDICOM;
    }
    if (rc < 0)
        scp_slice_info_free(out);
    return rc;
}

extern "C" void scp_slice_info_free(scp_slice_info *info)
{
    if (!info)
        return;
    free(info->frame_positions);
    info->frame_positions = nullptr;
    free(info->frame_temporal_index);
    info->frame_temporal_index = nullptr;
}

extern "C" int scp_slice_read_hu(const char *path, float *out, size_t count, char *err,
                                 size_t err_len)
{
    if (!path || !out) {
        scp__set_err(err, err_len, "no path or buffer");
        return -EINVAL;
    }
    try {
        int rc = scp__global_init_once();
        return rc < 0 ? rc : read_hu(path, out, count, err, err_len);
    } catch (const std::bad_alloc &) {
        scp__set_err(err, err_len, "out of memory");
        return -ENOMEM;
    } catch (...) {
        scp__set_err(err, err_len, "internal error");
        return LDCT_EDICOM;
    }
}
