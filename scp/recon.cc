/* scp/recon.cc: writer of the CT images reconstructed from a projection
 * series (DICOM-CT-PD): a CT Image Storage instance built by the test
 * writer's dataset builder (ctwrite.cc, every mandatory module of the CT
 * Image IOD), then given the patient, study and equipment attributes of the
 * source view, ImageType DERIVED\PRIMARY\AXIAL, DerivationDescription and a
 * SourceImageSequence referencing views of the projection series.
 *
 * Invariants: the output is a new series of the source's study (UIDs from
 * the caller); nothing of the source's private groups or pixel data is
 * copied. On failure no file is left at out_path. Any thread.
 */
#include "scp/internal.hh"
#include "scp/scp.h"

extern "C" {
#include "common/err.h"
}

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <dcmtk/dcmdata/dcuid.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include <unistd.h>

namespace
{

/* Attributes of the source that the reconstruction shares (patient, study,
 * equipment, acquisition); copied when the source has them. */
const DcmTagKey k_copied[] = {
    DCM_SpecificCharacterSet,
    DCM_PatientName,
    DCM_PatientID,
    DCM_PatientBirthDate,
    DCM_PatientSex,
    DCM_PatientAge,
    DCM_StudyDate,
    DCM_StudyTime,
    DCM_ReferringPhysicianName,
    DCM_StudyID,
    DCM_AccessionNumber,
    DCM_StudyDescription,
    DCM_BodyPartExamined,
    DCM_PatientPosition,
    DCM_Manufacturer,
    DCM_InstitutionName,
    DCM_StationName,
    DCM_ManufacturerModelName,
    DCM_DeviceSerialNumber,
    DCM_KVP,
    DCM_AcquisitionDate,
    DCM_AcquisitionTime,
    DCM_ProtocolName,
};

std::string get_str(DcmItem *ds, const DcmTagKey &tag)
{
    OFString v;
    return ds->findAndGetOFStringArray(tag, v).good() ? std::string(v.c_str()) : std::string();
}

void copy_shared(DcmItem *src, DcmItem *dst)
{
    for (const DcmTagKey &tag : k_copied) {
        DcmElement *e = nullptr;
        if (src->findAndGetElement(tag, e, false, true).good() && e)
            if (dst->insert(e, true).bad())
                delete e;
    }
}

OFCondition put_sources(DcmItem *ds, const scp_recon_params *p, const std::string &cls)
{
    OFCondition c = EC_Normal;
    for (int i = 0; i < p->nsource && c.good(); i++) {
        DcmItem *ref = nullptr, *code = nullptr;
        c = ds->findOrCreateSequenceItem(DCM_SourceImageSequence, ref, -2);
        if (c.good())
            c = ref->putAndInsertString(DCM_ReferencedSOPClassUID, cls.c_str());
        if (c.good())
            c = ref->putAndInsertString(DCM_ReferencedSOPInstanceUID, p->source_sops[i]);
        if (c.good())
            c = ref->findOrCreateSequenceItem(DCM_PurposeOfReferenceCodeSequence, code, 0);
        if (c.good())
            c = code->putAndInsertString(DCM_CodeValue, "121322");
        if (c.good())
            c = code->putAndInsertString(DCM_CodingSchemeDesignator, "DCM");
        if (c.good())
            c = code->putAndInsertString(DCM_CodeMeaning,
                                         "Source image for image processing operation");
    }
    return c;
}

std::vector<int16_t> stored(const scp_recon_params *p)
{
    std::vector<int16_t> px((size_t)p->rows * p->cols);
    for (size_t i = 0; i < px.size(); i++) {
        double v = std::isnan(p->values[i]) ? -1024.0 : std::nearbyint(p->values[i]);
        px[i] = (int16_t)(v < -32768 ? -32768 : v > 32767 ? 32767 : v);
    }
    return px;
}

int write_recon(const scp_recon_params *p, const char *out, char *err, size_t len)
{
    DcmFileFormat src;
    OFCondition c = src.loadFileUntilTag(p->source_path, EXS_Unknown, EGL_noChange, 4096,
                                         ERM_autoDetect, DCM_PixelData);
    if (c.bad()) {
        scp__set_err(err, len, "cannot read the projection view %s (%s)", p->source_path, c.text());
        return LDCT_EINPUT;
    }
    DcmDataset *sds = src.getDataset();
    OFString cs;
    sds->findAndGetOFStringArray(DCM_SpecificCharacterSet, cs);
    char fitted[65];
    scp_fit_description(get_str(sds, DCM_SeriesDescription).c_str(), p->series_description_suffix,
                        cs.c_str(), fitted, sizeof fitted);
    std::string desc = fitted;
    std::string patient = get_str(sds, DCM_PatientName), pid = get_str(sds, DCM_PatientID);
    std::string study = get_str(sds, DCM_StudyInstanceUID), cls = get_str(sds, DCM_SOPClassUID);
    Sint32 number = 0;
    sds->findAndGetSint32(DCM_SeriesNumber, number);
    std::vector<int16_t> px = stored(p);
    scp_ct_params ct = {};
    ct.patient_name = patient.c_str();
    ct.patient_id = pid.c_str();
    ct.study_uid = study.c_str();
    ct.series_uid = p->series_uid;
    ct.sop_uid = p->sop_uid;
    ct.frame_of_reference_uid = p->frame_of_reference_uid;
    ct.series_description = desc.c_str();
    ct.series_number = (int)scp_series_number_derive(number, p->series_number_offset);
    ct.instance_number = p->instance_number;
    ct.rows = p->rows;
    ct.cols = p->cols;
    ct.pixel_spacing[0] = ct.pixel_spacing[1] = p->pixel_spacing;
    ct.slice_thickness = p->slice_thickness;
    memcpy(ct.position, p->position, sizeof ct.position);
    const double ori[6] = {1, 0, 0, 0, 1, 0};
    memcpy(ct.orientation, ori, sizeof ori);
    ct.rescale_slope = 1;
    ct.rescale_intercept = 0;
    ct.kvp = 120;
    ct.pixels = px.data();
    DcmFileFormat ff;
    DcmDataset *ds = ff.getDataset();
    int rc = scp__ct_build(&ct, ds);
    if (rc) {
        scp__set_err(err, len, "cannot build the CT image: %s", ldct_strerror(rc));
        return rc;
    }
    copy_shared(sds, ds);
    c = ds->putAndInsertString(DCM_ImageType, "DERIVED\\PRIMARY\\AXIAL");
    if (c.good())
        c = ds->putAndInsertString(DCM_DerivationDescription, p->derivation_description);
    if (c.good())
        c = put_sources(ds, p, cls.empty() ? UID_CTImageStorage : cls);
    if (c.bad()) {
        scp__set_err(err, len, "cannot add the derivation attributes: %s", c.text());
        return LDCT_EDICOM;
    }
    return scp__save(&ff, nullptr, out, err, len);
}

} // namespace

extern "C" int scp_recon_write(const scp_recon_params *p, const char *out_path, char *err,
                               size_t err_len)
{
    if (!p || !out_path || !p->source_path || !p->series_uid || !p->sop_uid ||
        !p->frame_of_reference_uid || !p->derivation_description || !p->values || p->rows <= 0 ||
        p->cols <= 0 || (p->nsource > 0 && !p->source_sops))
        return -EINVAL;
    try {
        int rc = scp__global_init_once();
        if (!rc)
            rc = write_recon(p, out_path, err, err_len);
        if (rc)
            unlink(out_path);
        return rc;
    } catch (const std::bad_alloc &) {
        unlink(out_path);
        scp__set_err(err, err_len, "out of memory");
        return -ENOMEM;
    } catch (...) {
        unlink(out_path);
        scp__set_err(err, err_len, "unexpected error writing %s", out_path);
        return LDCT_EDICOM;
    }
}
