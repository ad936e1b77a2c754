/* scp/ctwrite.cc: writer of CT Image Storage instances (test series now,
 * derived instances later).
 *
 * Invariants: the file written carries every mandatory module of the CT
 * Image IOD (Patient, General Study, General Series, Frame of Reference,
 * General Equipment, General Image, Image Plane, Image Pixel, CT Image, SOP
 * Common) plus VOI LUT and slice location, so that dciodvfy reports no
 * error; pixels are signed 16-bit (BitsStored 16). Missing UIDs are
 * generated (DCMTK's root); missing strings become empty type 2 values.
 * Compressed transfer syntaxes use the DCMTK encoders registered by
 * scp_global_init (called here, idempotent). On failure no file is left at
 * `path`. Any thread may call scp_ct_write (each call builds its own
 * dataset).
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
#include <dcmtk/dcmdata/dcuid.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <string>

#include <unistd.h>

namespace
{

std::string fmt_ds(double v)
{
    char b[32];
    snprintf(b, sizeof b, "%.6g", v); /* DS: at most 16 characters */
    return b;
}

std::string fmt_multi(const double *v, int n)
{
    std::string s;
    for (int i = 0; i < n; i++)
        s += (i ? "\\" : "") + fmt_ds(v[i]);
    return s;
}

std::string uid_or_new(const char *uid)
{
    if (uid && uid[0])
        return uid;
    char b[100];
    return dcmGenerateUniqueIdentifier(b, SITE_INSTANCE_UID_ROOT);
}

/* Accumulates the first failing condition of a series of puts. */
struct putter {
    DcmItem *ds;
    OFCondition cond = EC_Normal;
    void str(const DcmTagKey &tag, const char *v)
    {
        if (cond.good())
            cond = ds->putAndInsertString(tag, v ? v : "");
    }
    void str(const DcmTagKey &tag, const std::string &v)
    {
        str(tag, v.c_str());
    }
    void u16(const DcmTagKey &tag, Uint16 v)
    {
        if (cond.good())
            cond = ds->putAndInsertUint16(tag, v);
    }
};

void put_patient_study(putter &w, const scp_ct_params *p, const char *date, const char *time)
{
    w.str(DCM_SpecificCharacterSet, "ISO_IR 100");
    w.str(DCM_PatientName, p->patient_name);
    w.str(DCM_PatientID, p->patient_id);
    w.str(DCM_PatientBirthDate, "");
    w.str(DCM_PatientSex, "O");
    w.str(DCM_StudyInstanceUID, uid_or_new(p->study_uid));
    w.str(DCM_StudyDate, date);
    w.str(DCM_StudyTime, time);
    w.str(DCM_ReferringPhysicianName, "");
    w.str(DCM_StudyID, "1");
    w.str(DCM_AccessionNumber, "");
    if (p->study_description)
        w.str(DCM_StudyDescription, p->study_description);
}

void put_series_equipment(putter &w, const scp_ct_params *p, const char *date, const char *time)
{
    w.str(DCM_Modality, "CT");
    w.str(DCM_SeriesInstanceUID, uid_or_new(p->series_uid));
    w.str(DCM_SeriesNumber, std::to_string(p->series_number));
    w.str(DCM_SeriesDate, date);
    w.str(DCM_SeriesTime, time);
    if (p->series_description)
        w.str(DCM_SeriesDescription, p->series_description);
    /* A body part that is not paired makes Laterality unnecessary. */
    w.str(DCM_BodyPartExamined, "CHEST");
    w.str(DCM_PatientPosition, "HFS");
    w.str(DCM_FrameOfReferenceUID, uid_or_new(p->frame_of_reference_uid));
    w.str(DCM_PositionReferenceIndicator, "");
    w.str(DCM_Manufacturer, "ldct-node");
    w.str(DCM_ManufacturerModelName, "ldct-node synthetic");
}

/* CTDIvol is interpretable only with its phantom: the 32 cm IEC body
 * dosimetry phantom (DCM 113691) of body protocols. */
void put_ctdi_phantom(putter &w)
{
    DcmItem *item = nullptr;
    if (w.cond.good())
        w.cond = w.ds->findOrCreateSequenceItem(DCM_CTDIPhantomTypeCodeSequence, item, -2);
    if (w.cond.bad() || !item)
        return;
    putter iw{item};
    iw.str(DCM_CodeValue, "113691");
    iw.str(DCM_CodingSchemeDesignator, "DCM");
    iw.str(DCM_CodeMeaning, "IEC Body Dosimetry Phantom");
    w.cond = iw.cond;
}

/* Exposure is an IS (a 32-bit signed integer): a value that is not > 0
 * (NaN included) or that rounds above 2147483647 is left out rather than
 * cast, since converting a double outside long's range is undefined (1e300
 * mAs gave LONG_MIN, written as "-9223372036854775808"). */
void put_exposure(putter &w, double mas)
{
    const double rounded = mas + 0.5;
    if (mas > 0 && rounded < (double)INT32_MAX + 1)
        w.str(DCM_Exposure, std::to_string((long)rounded));
}

void put_image(putter &w, const scp_ct_params *p, const char *date, const char *time)
{
    w.str(DCM_SOPClassUID, UID_CTImageStorage);
    w.str(DCM_SOPInstanceUID, uid_or_new(p->sop_uid));
    w.str(DCM_ImageType, "ORIGINAL\\PRIMARY\\AXIAL");
    w.str(DCM_InstanceNumber, std::to_string(p->instance_number));
    w.str(DCM_AcquisitionNumber, "1");
    w.str(DCM_ContentDate, date);
    w.str(DCM_ContentTime, time);
    w.str(DCM_ImagePositionPatient, fmt_multi(p->position, 3));
    w.str(DCM_ImageOrientationPatient, fmt_multi(p->orientation, 6));
    w.str(DCM_PixelSpacing, fmt_multi(p->pixel_spacing, 2));
    w.str(DCM_SliceThickness, fmt_ds(p->slice_thickness));
    w.str(DCM_SliceLocation, fmt_ds(p->position[2]));
    w.str(DCM_KVP, fmt_ds(p->kvp));
    put_exposure(w, p->exposure_mas);
    if (p->ctdivol > 0 && w.cond.good())
        w.cond = w.ds->putAndInsertFloat64(DCM_CTDIvol, p->ctdivol);
    if (p->ctdivol > 0)
        put_ctdi_phantom(w);
    if (p->convolution_kernel)
        w.str(DCM_ConvolutionKernel, p->convolution_kernel);
    if (p->trigger_time)
        w.str(DCM_TriggerTime, p->trigger_time);
    if (p->acquisition_time)
        w.str(DCM_AcquisitionTime, p->acquisition_time);
    if (p->temporal_index)
        w.str(DCM_TemporalPositionIndex, p->temporal_index);
    if (p->cardiac_phase)
        w.str(DCM_NominalPercentageOfCardiacPhase, p->cardiac_phase);
    w.str(DCM_RescaleIntercept, fmt_ds(p->rescale_intercept));
    w.str(DCM_RescaleSlope, fmt_ds(p->rescale_slope));
    w.str(DCM_RescaleType, "HU");
    w.str(DCM_WindowCenter, "40");
    w.str(DCM_WindowWidth, "400");
}

void put_pixels(putter &w, const scp_ct_params *p)
{
    w.u16(DCM_SamplesPerPixel, 1);
    w.str(DCM_PhotometricInterpretation, "MONOCHROME2");
    w.u16(DCM_Rows, (Uint16)p->rows);
    w.u16(DCM_Columns, (Uint16)p->cols);
    w.u16(DCM_BitsAllocated, 16);
    w.u16(DCM_BitsStored, 16);
    w.u16(DCM_HighBit, 15);
    w.u16(DCM_PixelRepresentation, 1);
    if (w.cond.good())
        w.cond = w.ds->putAndInsertUint16Array(DCM_PixelData,
                                               reinterpret_cast<const Uint16 *>(p->pixels),
                                               (unsigned long)p->rows * (unsigned long)p->cols);
}

int check_params(const scp_ct_params *p, const char *path)
{
    if (!p || !path || !path[0] || !p->pixels)
        return -EINVAL;
    if (p->rows <= 0 || p->cols <= 0 || p->rows > 65535 || p->cols > 65535)
        return -EINVAL;
    return 0;
}

int write_file(const scp_ct_params *p, const char *path)
{
    DcmFileFormat ff;
    int err = scp__ct_build(p, ff.getDataset());
    if (err == 0)
        err = scp__save(&ff, p->transfer_syntax_uid, path, nullptr, 0);
    return err;
}

} // namespace

int scp__ct_build(const scp_ct_params *p, DcmItem *ds)
{
    time_t now = time(nullptr);
    struct tm tm;
    localtime_r(&now, &tm);
    char date[16], tim[16];
    strftime(date, sizeof date, "%Y%m%d", &tm);
    strftime(tim, sizeof tim, "%H%M%S", &tm);
    putter w{ds};
    put_patient_study(w, p, date, tim);
    put_series_equipment(w, p, date, tim);
    put_image(w, p, date, tim);
    put_pixels(w, p);
    return scp__cond_err(w.cond, "building CT dataset");
}

extern "C" int scp_ct_write(const scp_ct_params *p, const char *path)
{
    int err = check_params(p, path);
    if (err < 0)
        return err;
    try {
        err = scp__global_init_once();
        if (err == 0)
            err = write_file(p, path);
    } catch (const std::bad_alloc &) {
        err = -ENOMEM;
    } catch (...) {
        err = LDCT_EDICOM;
    }
    if (err < 0)
        unlink(path);
    return err;
}
