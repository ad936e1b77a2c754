/* scp/pixel.cc: helpers shared by the writers and readers of scp/: error
 * messages, saving a file in a chosen transfer syntax, the pixel format of
 * an image, functional-group lookups and per-frame rescale.
 *
 * Invariants: nothing here keeps state; every function works on the dataset
 * it is given, so any thread may call them on its own datasets. Messages
 * written into err carry no dataset content beyond UIDs, tags and sizes.
 */
#include "scp/scp.h"
#include "scp/internal.hh"

/* common/ headers are plain C without linkage guards. */
extern "C" {
#include "common/err.h"
#include "common/log.h"
}

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dccodec.h>
#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <dcmtk/dcmdata/dcmetinf.h>
#include <dcmtk/dcmdata/dcxfer.h>
#include <dcmtk/dcmjpeg/djrplol.h>
#include <dcmtk/dcmjpls/djrparam.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include <sys/statvfs.h>
#include <unistd.h>

void scp__set_err(char *err, size_t len, const char *fmt, ...)
{
    if (!err || len == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
}

namespace
{

/* Encodes the pixel data for an encapsulated transfer syntax. */
int compress(DcmDataset *ds, E_TransferSyntax xfer)
{
    std::unique_ptr<DcmRepresentationParameter> rp;
    if (xfer == EXS_JPEGProcess14SV1 || xfer == EXS_JPEGProcess14)
        rp.reset(new DJ_RPLossless(1, 0));
    else if (xfer == EXS_JPEGLSLossless)
        rp.reset(new DJLSRepresentationParameter(0, OFTrue));
    else if (xfer != EXS_RLELossless)
        return LDCT_EUNSUPPORTED;
    int err = scp__cond_err(ds->chooseRepresentation(xfer, rp.get()), "pixel data encoding");
    if (err == 0 && !ds->canWriteXfer(xfer))
        err = LDCT_EDICOM;
    return err;
}

Uint16 get_u16(DcmItem *ds, const DcmTagKey &tag, Uint16 dflt)
{
    Uint16 v;
    return ds->findAndGetUint16(tag, v).good() ? v : dflt;
}

} // namespace

/* ": the disk is full" when the file system holding path has less than
 * 1 MiB left, else "". */
static const char *disk_nearly_full(const char *path)
{
    std::string dir(path);
    size_t slash = dir.rfind('/');
    dir = slash == std::string::npos ? std::string(".") : dir.substr(0, slash ? slash : 1);
    struct statvfs st;
    if (statvfs(dir.c_str(), &st) != 0)
        return "";
    return (double)st.f_bavail * (double)st.f_frsize < 1048576.0 ? ": the disk is full" : "";
}

int scp__save(DcmFileFormat *ff, const char *ts_uid, const char *path, char *err, size_t len)
{
    E_TransferSyntax xfer = EXS_LittleEndianExplicit;
    if (ts_uid && ts_uid[0])
        xfer = DcmXfer(ts_uid).getXfer();
    if (xfer == EXS_Unknown) {
        scp__set_err(err, len, "unknown transfer syntax %s", ts_uid);
        return LDCT_EUNSUPPORTED;
    }
    DcmDataset *ds = ff->getDataset();
    int rc = 0;
    if (DcmXfer(xfer).isEncapsulated())
        rc = compress(ds, xfer);
    else
        rc = scp__cond_err(ds->chooseRepresentation(xfer, nullptr), "pixel data decoding");
    if (rc < 0) {
        scp__set_err(err, len, "cannot encode the pixel data as %s", DcmXfer(xfer).getXferName());
        return rc;
    }
    /* A fresh meta header: the SOP instance and the syntax are the dataset's
     * own, the implementation is ours. */
    ff->getMetaInfo()->clear();
    rc = scp__cond_err(ff->saveFile(path, xfer, EET_ExplicitLength, EGL_recalcGL), path);
    if (rc < 0) {
        const char *full = disk_nearly_full(path);
        scp__set_err(err, len, "cannot write %s%s", path, full);
        unlink(path);
        return full[0] ? -ENOSPC : rc; /* -ENOSPC: the job waits for room (worker.c) */
    }
    /* DCMTK does not report a failed last write when it closes the file:
     * read it back (values over 4 KiB only checked against the file's
     * length), so a file cut short by a full disk is an error, never a
     * result. */
    DcmFileFormat back;
    if (back.loadFile(path, EXS_Unknown, EGL_noChange, 4096, ERM_autoDetect).bad()) {
        const char *why = disk_nearly_full(path);
        scp__set_err(err, len, "%s was written incomplete%s", path,
                     why[0] ? why : " (write error)");
        unlink(path);
        return why[0] ? -ENOSPC : -EIO;
    }
    return 0;
}

int scp__pixfmt_read(DcmItem *ds, scp__pixfmt *f, char *err, size_t len)
{
    OFString pi;
    ds->findAndGetOFString(DCM_PhotometricInterpretation, pi);
    Sint32 frames = 1;
    if (ds->findAndGetSint32(DCM_NumberOfFrames, frames).bad() || frames < 1)
        frames = 1;
    f->rows = get_u16(ds, DCM_Rows, 0);
    f->cols = get_u16(ds, DCM_Columns, 0);
    f->frames = (int)frames;
    f->alloc = get_u16(ds, DCM_BitsAllocated, 0);
    f->stored = get_u16(ds, DCM_BitsStored, f->alloc);
    f->high = get_u16(ds, DCM_HighBit, (Uint16)(f->stored - 1));
    f->sign = get_u16(ds, DCM_PixelRepresentation, 0) ? 1 : 0;
    int samples = get_u16(ds, DCM_SamplesPerPixel, 1);
    if (pi != "MONOCHROME1" && pi != "MONOCHROME2") {
        scp__set_err(err, len, "photometric interpretation '%s' is not MONOCHROME1/2", pi.c_str());
        return LDCT_EUNSUPPORTED;
    }
    if (samples != 1) {
        scp__set_err(err, len, "%d samples per pixel (only 1 is supported)", samples);
        return LDCT_EUNSUPPORTED;
    }
    if (f->rows <= 0 || f->cols <= 0) {
        scp__set_err(err, len, "no Rows/Columns");
        return LDCT_EINPUT;
    }
    if ((f->alloc != 8 && f->alloc != 16) || f->stored < 1 || f->stored > f->alloc ||
        f->high < f->stored - 1 || f->high >= f->alloc) {
        scp__set_err(err, len, "unsupported pixel layout (allocated %d, stored %d, high bit %d)",
                     f->alloc, f->stored, f->high);
        return LDCT_EUNSUPPORTED;
    }
    return 0;
}

DcmItem *scp__fg_item(DcmItem *ds, int frame, const DcmTagKey &seq)
{
    DcmItem *fg = nullptr, *it = nullptr;
    if (ds->findAndGetSequenceItem(DCM_PerFrameFunctionalGroupsSequence, fg, frame).good() &&
        fg->findAndGetSequenceItem(seq, it, 0).good())
        return it;
    if (ds->findAndGetSequenceItem(DCM_SharedFunctionalGroupsSequence, fg, 0).good() &&
        fg->findAndGetSequenceItem(seq, it, 0).good())
        return it;
    return nullptr;
}

/* A padding attribute as a stored value: a US-encoded 16-bit value of
 * signed pixels is read as signed (dcmodify and some scanners write -2000
 * as 63536); a value outside what BitsStored can hold matches no pixel
 * (PS3.3 C.7.5.1.1.2 compares it with stored values). */
static bool padding_attribute(DcmItem *ds, const DcmTagKey &tag, const scp__pixfmt &f, int32_t *out)
{
    long v = 0;
    if (ds->findAndGetLongInt(tag, v).bad())
        return false;
    if (f.sign && v > 32767 && v <= 65535)
        v -= 65536;
    const long lo = f.sign ? -(1L << (f.stored - 1)) : 0;
    const long hi = f.sign ? (1L << (f.stored - 1)) - 1 : (1L << f.stored) - 1;
    if (v < lo || v > hi)
        return false;
    *out = (int32_t)v;
    return true;
}

bool scp__padding_range(DcmItem *ds, const scp__pixfmt &f, int32_t *lo, int32_t *hi)
{
    if (!padding_attribute(ds, DCM_PixelPaddingValue, f, lo))
        return false;
    *hi = *lo;
    int32_t limit = 0;
    if (padding_attribute(ds, DCM_PixelPaddingRangeLimit, f, &limit)) {
        *lo = limit < *lo ? limit : *lo;
        *hi = limit > *hi ? limit : *hi;
    }
    return true;
}

void scp__frame_rescale(DcmItem *ds, int frame, double *slope, double *intercept)
{
    DcmItem *src = scp__fg_item(ds, frame, DCM_PixelValueTransformationSequence);
    if (!src)
        src = ds;
    Float64 m, b;
    /* A slope of 0 (or NaN) stays as it is, for the caller to refuse. */
    *slope = src->findAndGetFloat64(DCM_RescaleSlope, m).good() ? m : 1.0;
    *intercept = src->findAndGetFloat64(DCM_RescaleIntercept, b).good() ? b : 0.0;
}

int scp__load_decoded(const char *path, DcmFileFormat *ff, char *err, size_t len)
{
    if (access(path, R_OK) != 0) {
        int e = errno;
        scp__set_err(err, len, "%s: %s", path, strerror(e));
        return -e;
    }
    OFCondition c = ff->loadFile(path);
    if (c.bad()) {
        scp__set_err(err, len, "%s is not readable DICOM (%s)", path, c.text());
        return LDCT_EINPUT;
    }
    DcmDataset *ds = ff->getDataset();
    E_TransferSyntax orig = ds->getOriginalXfer();
    c = ds->chooseRepresentation(EXS_LittleEndianExplicit, nullptr);
    if (c.bad() || !ds->canWriteXfer(EXS_LittleEndianExplicit)) {
        /* A syntax no registered codec reads (JPEG 2000 in this build) is
         * named as such: DCMTK says "Pixel representation cannot be
         * changed", which reads like a fault of the pixels. */
        const bool decoder = !DcmXfer(orig).isEncapsulated() ||
                             DcmCodecList::canChangeCoding(orig, EXS_LittleEndianExplicit);
        scp__set_err(err, len, "cannot decode pixel data in %s (%s)", DcmXfer(orig).getXferName(),
                     !decoder  ? "this node has no decoder for it; such instances are stored and "
                                 "routed as received"
                     : c.bad() ? c.text()
                               : "no decoder");
        return LDCT_EUNSUPPORTED;
    }
    return 0;
}
