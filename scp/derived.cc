/* scp/derived.cc: writer of derived instances (the denoised series).
 *
 * A derived instance is its source's dataset, decompressed, with new series
 * and instance UIDs, the derived-image attributes of DESIGN.md ("Derived
 * series") and new pixel values converted back to stored values with the
 * source's own rescale. Patient, study, frame of reference, geometry,
 * rescale and everything else stay as they were, so the new image sits next
 * to the original in the same study and space.
 *
 * Invariants: the source file is only read; on failure no file is left at
 * the output path; the meta header is regenerated (its SOP instance is the
 * new one). Any thread may call scp_derived_write (each call loads its own
 * dataset).
 */
#include "scp/scp.h"
#include "scp/internal.hh"

/* common/ headers are plain C without linkage guards. */
extern "C" {
#include "common/err.h"
#include "common/log.h"
#include "common/utf8.h"
}

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <dcmtk/dcmdata/dcsequen.h>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include <iconv.h>
#include <unistd.h>

namespace
{

/* Attributes that describe the source's pixels or its place in a
 * concatenation or its integrity, all false for the new image. */
const DcmTagKey k_removed[] = {
    DCM_SmallestImagePixelValue,
    DCM_LargestImagePixelValue,
    DCM_SmallestPixelValueInSeries,
    DCM_LargestPixelValueInSeries,
    DCM_IconImageSequence,
    DCM_DigitalSignaturesSequence,
    DCM_MACParametersSequence,
    DCM_ConcatenationUID,
    DCM_SOPInstanceUIDOfConcatenationSource,
    DCM_InConcatenationNumber,
    DCM_InConcatenationTotalNumber,
    DCM_ConcatenationFrameOffsetNumber,
    DCM_DataSetTrailingPadding,
};

/* Accumulates the first failing condition of a series of puts. */
struct putter {
    DcmItem *ds;
    OFCondition cond = EC_Normal;
    void str(const DcmTagKey &tag, const std::string &v)
    {
        if (cond.good())
            cond = ds->putAndInsertString(tag, v.c_str());
    }
};

/* Removes private elements whose block has no Private Creator: nobody can
 * interpret them, and validators flag them. */
void remove_orphan_private(DcmDataset *ds)
{
    std::vector<DcmTagKey> drop;
    for (unsigned long i = 0; i < ds->card(); i++) {
        DcmTagKey t = ds->getElement(i)->getTag();
        if (!t.isPrivate() || t.getElement() < 0x1000)
            continue;
        DcmTagKey creator(t.getGroup(), (Uint16)(t.getElement() >> 8));
        if (!ds->tagExists(creator))
            drop.push_back(t);
    }
    for (const DcmTagKey &t : drop)
        ds->findAndDeleteElement(t);
}

/* Enhanced images (functional groups) keep Value 2 (always PRIMARY there)
 * and mark every Frame Type DERIVED too. */
bool is_enhanced(DcmDataset *ds)
{
    DcmItem *it = nullptr;
    return ds->findAndGetSequenceItem(DCM_SharedFunctionalGroupsSequence, it, 0).good();
}

std::string derived_type(DcmItem *ds, const DcmTagKey &tag, bool enhanced)
{
    OFString v1;
    std::string t = "DERIVED\\";
    if (enhanced)
        t += ds->findAndGetOFString(tag, v1, 1).good() && !v1.empty() ? v1.c_str() : "PRIMARY";
    else
        t += "SECONDARY";
    for (unsigned long i = 2;; i++) {
        OFString v;
        if (ds->findAndGetOFString(tag, v, i).bad())
            break;
        t += "\\" + std::string(v.c_str());
    }
    return t;
}

OFCondition mark_frame_types(DcmItem *fg_root, const DcmTagKey &fg_seq)
{
    DcmSequenceOfItems *seq = nullptr;
    if (fg_root->findAndGetSequence(fg_seq, seq).bad() || !seq)
        return EC_Normal;
    for (unsigned long i = 0; i < seq->card(); i++) {
        DcmItem *ft = nullptr;
        if (seq->getItem(i)->findAndGetSequenceItem(DCM_CTImageFrameTypeSequence, ft, 0).bad())
            continue;
        OFCondition c =
            ft->putAndInsertString(DCM_FrameType, derived_type(ft, DCM_FrameType, true).c_str());
        if (c.bad())
            return c;
    }
    return EC_Normal;
}

/* One coded entry as item 0 of seq in it. */
OFCondition put_code(DcmItem *it, const DcmTagKey &seq, const char *value, const char *meaning)
{
    DcmItem *code = nullptr;
    OFCondition c = it->findOrCreateSequenceItem(seq, code, 0);
    if (c.good())
        c = code->putAndInsertString(DCM_CodeValue, value);
    if (c.good())
        c = code->putAndInsertString(DCM_CodingSchemeDesignator, "DCM");
    if (c.good())
        c = code->putAndInsertString(DCM_CodeMeaning, meaning);
    return c;
}

/* The provenance in `it`: DerivationDescription, Derivation Code Sequence
 * (DCM 113087 "Smoothing", CID 7203) and a Source Image Sequence item
 * referencing the source (purpose DCM 121322). */
OFCondition put_provenance(DcmItem *it, const char *description, const std::string &cls,
                           const std::string &inst)
{
    it->findAndDeleteElement(DCM_SourceImageSequence);
    it->findAndDeleteElement(DCM_DerivationCodeSequence);
    OFCondition c = EC_Normal;
    if (description)
        c = it->putAndInsertString(DCM_DerivationDescription,
                                   std::string(description).substr(0, 1024).c_str());
    if (c.good())
        c = put_code(it, DCM_DerivationCodeSequence, "113087", "Smoothing");
    DcmItem *ref = nullptr;
    if (c.good())
        c = it->findOrCreateSequenceItem(DCM_SourceImageSequence, ref, 0);
    if (c.good())
        c = ref->putAndInsertString(DCM_ReferencedSOPClassUID, cls.c_str());
    if (c.good())
        c = ref->putAndInsertString(DCM_ReferencedSOPInstanceUID, inst.c_str());
    if (c.good())
        c = put_code(ref, DCM_PurposeOfReferenceCodeSequence, "121322",
                     "Source image for image processing operation");
    return c;
}

/* Enhanced CT: the source in the Common Instance Reference module's Source
 * Image Evidence Sequence (study, series, instance), which a derived image
 * that references sources needs. */
OFCondition put_evidence(DcmDataset *ds, const std::string &series, const std::string &cls,
                         const std::string &inst)
{
    ds->findAndDeleteElement(DCM_SourceImageEvidenceSequence);
    DcmItem *study = nullptr, *ser = nullptr, *sop = nullptr;
    OFString study_uid;
    ds->findAndGetOFString(DCM_StudyInstanceUID, study_uid);
    OFCondition c = ds->findOrCreateSequenceItem(DCM_SourceImageEvidenceSequence, study, 0);
    if (c.good())
        c = study->putAndInsertString(DCM_StudyInstanceUID, study_uid.c_str());
    if (c.good())
        c = study->findOrCreateSequenceItem(DCM_ReferencedSeriesSequence, ser, 0);
    if (c.good())
        c = ser->putAndInsertString(DCM_SeriesInstanceUID, series.c_str());
    if (c.good())
        c = ser->findOrCreateSequenceItem(DCM_ReferencedSOPSequence, sop, 0);
    if (c.good())
        c = sop->putAndInsertString(DCM_ReferencedSOPClassUID, cls.c_str());
    if (c.good())
        c = sop->putAndInsertString(DCM_ReferencedSOPInstanceUID, inst.c_str());
    return c;
}

/* Classic images: the provenance in the General Image module. Enhanced CT:
 * in the Derivation Image functional group (shared by every frame; a
 * per-frame one of the source is removed), where that IOD keeps it, and
 * the source in the Source Image Evidence Sequence. */
OFCondition put_source_reference(DcmDataset *ds, const char *description, const std::string &series,
                                 const std::string &cls, const std::string &inst)
{
    if (!is_enhanced(ds))
        return put_provenance(ds, description, cls, inst);
    ds->findAndDeleteElement(DCM_DerivationDescription);
    ds->findAndDeleteElement(DCM_SourceImageSequence);
    ds->findAndDeleteElement(DCM_DerivationCodeSequence);
    DcmSequenceOfItems *per = nullptr;
    if (ds->findAndGetSequence(DCM_PerFrameFunctionalGroupsSequence, per).good() && per)
        for (unsigned long i = 0; i < per->card(); i++)
            per->getItem(i)->findAndDeleteElement(DCM_DerivationImageSequence);
    DcmItem *shared = nullptr, *deriv = nullptr;
    OFCondition c = ds->findOrCreateSequenceItem(DCM_SharedFunctionalGroupsSequence, shared, 0);
    if (c.good()) {
        shared->findAndDeleteElement(DCM_DerivationImageSequence);
        c = shared->findOrCreateSequenceItem(DCM_DerivationImageSequence, deriv, 0);
    }
    if (c.good())
        c = put_provenance(deriv, description, cls, inst);
    return c.good() ? put_evidence(ds, series, cls, inst) : c;
}

std::string get(DcmItem *ds, const DcmTagKey &tag)
{
    OFString v;
    return ds->findAndGetOFString(tag, v).good() ? std::string(v.c_str()) : std::string();
}

/* Where to cut s to keep at most `bytes` bytes without splitting a
 * character of charset cs: at UTF-8 code points (ISO_IR 192), anywhere in
 * the default repertoire and the ISO 8859 sets; for ISO 2022 before the
 * first escape (a value starts in value 1's set, which is single-byte:
 * IR 6, 13, 100...), for the GB sets before the first non-ASCII byte. */
size_t cut_point(const std::string &s, size_t bytes, const std::string &cs)
{
    if (cs.find("ISO_IR 192") != std::string::npos) {
        const char *at = s.c_str(), *end = at + s.size();
        while (at < end) {
            const char *next = at;
            utf8_step(&next);
            if (next - s.c_str() > (ptrdiff_t)bytes)
                break;
            at = next;
        }
        return (size_t)(at - s.c_str());
    }
    if (s.size() <= bytes)
        return s.size();
    const bool iso2022 = cs.find("2022") != std::string::npos;
    if (iso2022 || cs.find("GB") != std::string::npos)
        for (size_t i = 0; i < bytes; i++)
            if (s[i] == 0x1b || (!iso2022 && (unsigned char)s[i] >= 0x80))
                return i;
    return bytes;
}

/* The encoding (iconv's name) of a Specific Character Set's first value,
 * the repertoire a value may use without a code switch: "" for the default
 * repertoire (no value, ISO_IR 6, JIS X 0201 and ISO 2022 sets whose G0 is
 * not ASCII), "UTF-8" for ISO_IR 192. */
std::string charset_encoding(const std::string &cs)
{
    std::string v1 = cs.substr(0, cs.find('\\'));
    while (!v1.empty() && v1.back() == ' ')
        v1.pop_back();
    static const struct {
        const char *term, *encoding;
    } k_sets[] = {
        {"ISO_IR 192", "UTF-8"},   {"GB18030", "GB18030"},   {"GBK", "GBK"},
        {"IR 100", "ISO-8859-1"},  {"IR 101", "ISO-8859-2"}, {"IR 109", "ISO-8859-3"},
        {"IR 110", "ISO-8859-4"},  {"IR 144", "ISO-8859-5"}, {"IR 127", "ISO-8859-6"},
        {"IR 126", "ISO-8859-7"},  {"IR 138", "ISO-8859-8"}, {"IR 148", "ISO-8859-9"},
        {"IR 203", "ISO-8859-15"}, {"IR 166", "TIS-620"},
    };
    for (const auto &s : k_sets) {
        const std::string t = s.term;
        /* "ISO_IR 100" and, with code extensions, "ISO 2022 IR 100". */
        if (v1 == t || v1 == "ISO_" + t || v1 == "ISO 2022 " + t)
            return s.encoding;
    }
    return "";
}

/* A Latin letter with a diacritic (U+00C0..U+017F: Latin-1 Supplement and
 * Latin Extended-A) as its base letter (the first letter of its Unicode
 * canonical decomposition), for a repertoire without it; 0 for the others. */
char latin_base(uint32_t cp)
{
    static const char k_base[] = "AAAAAA?CEEEEIIII?NOOOOO??UUUUY??aaaaaa?ceeeeiiii?nooooo??uuuuy?y"
                                 "AaAaAaCcCcCcCcDd??EeEeEeEeEeGgGgGgGgHh??IiIiIiIiI???JjKk?LlLlLl?"
                                 "???NnNnNn???OoOoOo??RrRrRrSsSsSsSsTtTt??UuUuUuUuUuUuWwYyYZzZzZz?";
    if (cp < 0xC0 || cp > 0x17F)
        return 0;
    char c = k_base[cp - 0xC0];
    return c == '?' ? 0 : c;
}

/* The rule's suffix (UTF-8, as in the configuration file) in the source's
 * character set, so that the derived Series Description is one encoding
 * and the dataset's Specific Character Set (and every other value) stays
 * as the source had it. A character the set cannot hold becomes its base
 * letter (e -> e for an e-acute in the default repertoire), else '?'. */
std::string suffix_in_charset(const std::string &utf8, const std::string &cs)
{
    bool ascii = true;
    for (unsigned char c : utf8)
        ascii = ascii && c < 0x80;
    const std::string enc = charset_encoding(cs);
    if (ascii || enc == "UTF-8")
        return utf8;
    iconv_t cd = enc.empty() ? (iconv_t)-1 : iconv_open(enc.c_str(), "UTF-8");
    std::string out;
    for (const char *at = utf8.c_str(); *at;) {
        const char *from = at;
        uint32_t cp = utf8_step(&at);
        if (cp < 0x80) {
            out += (char)cp;
            continue;
        }
        if (at - from == 1) { /* a stray byte, no character */
            out += '?';
            continue;
        }
        if (cd != (iconv_t)-1) {
            std::string ch(from, (size_t)(at - from));
            char buf[8], *in = &ch[0], *o = buf;
            size_t inl = ch.size(), outl = sizeof buf;
            iconv(cd, nullptr, nullptr, nullptr, nullptr);
            if (iconv(cd, &in, &inl, &o, &outl) != (size_t)-1 && inl == 0) {
                out.append(buf, (size_t)(o - buf));
                continue;
            }
        }
        char b = latin_base(cp);
        out += b ? b : '?';
    }
    if (cd != (iconv_t)-1)
        iconv_close(cd);
    return out;
}

OFCondition put_identity(DcmDataset *ds, const scp_derived_params *p)
{
    char date[16], tim[16];
    /* One time for the whole series (Series Date/Time are series-level). */
    time_t now = p->dated_ms > 0 ? (time_t)(p->dated_ms / 1000) : time(nullptr);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(date, sizeof date, "%Y%m%d", &tm);
    strftime(tim, sizeof tim, "%H%M%S", &tm);
    bool enh = is_enhanced(ds);
    putter w{ds};
    w.str(DCM_SeriesInstanceUID, p->series_uid);
    w.str(DCM_SOPInstanceUID, p->sop_uid);
    OFString cs;
    ds->findAndGetOFStringArray(DCM_SpecificCharacterSet, cs);
    char desc[65];
    if (p->series_description)
        scp_fit_description(p->series_description, NULL, cs.c_str(), desc, sizeof desc);
    else
        scp_fit_description(get(ds, DCM_SeriesDescription).c_str(), p->series_description_suffix,
                            cs.c_str(), desc, sizeof desc);
    if (desc[0])
        w.str(DCM_SeriesDescription, desc);
    long number = p->series_number;
    if (p->series_number_is_offset)
        number = scp_series_number_derive(std::atol(get(ds, DCM_SeriesNumber).c_str()), number);
    w.str(DCM_SeriesNumber, std::to_string(number));
    w.str(DCM_ImageType, derived_type(ds, DCM_ImageType, enh));
    w.str(DCM_InstanceCreationDate, date);
    w.str(DCM_InstanceCreationTime, tim);
    /* A new series whose pixels are made now (Acquisition Date/Time stay). */
    w.str(DCM_SeriesDate, date);
    w.str(DCM_SeriesTime, tim);
    w.str(DCM_ContentDate, date);
    w.str(DCM_ContentTime, tim);
    if (w.cond.good() && enh)
        w.cond = mark_frame_types(ds, DCM_SharedFunctionalGroupsSequence);
    if (w.cond.good() && enh)
        w.cond = mark_frame_types(ds, DCM_PerFrameFunctionalGroupsSequence);
    return w.cond;
}

/* The source's stored pixels and its padding: a pixel that was padding
 * (outside the scanned field) stays exactly that value, whatever the
 * filter made of it, so viewers keep hiding it. */
struct source_pixels {
    Uint8 *p8 = nullptr; /* the source's array, read only */
    Uint16 *p16 = nullptr;
    bool padded = false;
    int32_t lo = 0, hi = 0;

    bool is_padding(const scp__pixfmt &f, size_t i) const
    {
        if (!padded || (!p8 && !p16))
            return false;
        int32_t v = scp__stored_at(f, p8, p16, i);
        return v >= lo && v <= hi;
    }
};

source_pixels source_of(DcmDataset *ds, const scp__pixfmt &f)
{
    source_pixels s;
    s.padded = scp__padding_range(ds, f, &s.lo, &s.hi);
    DcmElement *px = nullptr;
    if (!s.padded || ds->findAndGetElement(DCM_PixelData, px).bad() ||
        px->getLength() < f.count() * (size_t)(f.alloc / 8))
        return s;
    if (f.alloc == 8 ? px->getUint8Array(s.p8).bad() : px->getUint16Array(s.p16).bad())
        s.p8 = nullptr, s.p16 = nullptr;
    return s;
}

/* values -> stored pixels of the source's layout, per-frame rescale;
 * padding pixels of the source are copied as they were. */
template <typename T>
void to_stored(DcmDataset *ds, const scp__pixfmt &f, const float *values, std::vector<T> &px)
{
    const source_pixels src = source_of(ds, f);
    long lo = f.sign ? -(1L << (f.stored - 1)) : 0;
    long hi = f.sign ? (1L << (f.stored - 1)) - 1 : (1L << f.stored) - 1;
    unsigned shift = (unsigned)(f.high + 1 - f.stored);
    uint32_t keep = f.alloc >= 32 ? 0xFFFFFFFFu : ((1u << f.alloc) - 1u);
    size_t per_frame = (size_t)f.rows * (size_t)f.cols;
    px.resize(f.count());
    for (int fr = 0; fr < f.frames; fr++) {
        double m, b;
        scp__frame_rescale(ds, fr, &m, &b);
        if (!std::isfinite(m) || m == 0)
            m = 1.0; /* unreachable: the reader refused such frames */
        for (size_t i = per_frame * (size_t)fr; i < per_frame * (size_t)(fr + 1); i++) {
            if (src.is_padding(f, i)) {
                px[i] = (T)(f.alloc == 8 ? src.p8[i] : src.p16[i]);
                continue;
            }
            double s = std::isnan(values[i]) ? 0.0 : std::nearbyint((values[i] - b) / m);
            long v = s < (double)lo ? lo : s > (double)hi ? hi : (long)s;
            px[i] = (T)(((uint32_t)(int32_t)v << shift) & keep);
        }
    }
}

int put_pixels(DcmDataset *ds, const scp__pixfmt &f, const float *values)
{
    OFCondition c;
    if (f.alloc == 8) {
        std::vector<Uint8> px;
        to_stored(ds, f, values, px);
        c = ds->putAndInsertUint8Array(DCM_PixelData, px.data(), (unsigned long)px.size());
    } else {
        std::vector<Uint16> px;
        to_stored(ds, f, values, px);
        c = ds->putAndInsertUint16Array(DCM_PixelData, px.data(), (unsigned long)px.size());
    }
    return scp__cond_err(c, "writing derived pixel data");
}

int build(DcmDataset *ds, const scp_derived_params *p, char *err, size_t len)
{
    scp__pixfmt f;
    int rc = scp__pixfmt_read(ds, &f, err, len);
    if (rc < 0)
        return rc;
    std::string cls = get(ds, DCM_SOPClassUID), inst = get(ds, DCM_SOPInstanceUID);
    const std::string series = get(ds, DCM_SeriesInstanceUID); /* before the new identity */
    if (cls.empty() || inst.empty()) {
        scp__set_err(err, len, "source has no SOP Class/Instance UID");
        return LDCT_EINPUT;
    }
    rc = put_pixels(ds, f, p->values);
    for (const DcmTagKey &t : k_removed)
        ds->findAndDeleteElement(t, OFTrue);
    remove_orphan_private(ds);
    if (rc == 0)
        rc = scp__cond_err(put_identity(ds, p), "derived identity");
    if (rc == 0)
        rc = scp__cond_err(put_source_reference(ds, p->derivation_description, series, cls, inst),
                           "source image reference");
    if (rc < 0)
        scp__set_err(err, len, "cannot build the derived dataset of %s", inst.c_str());
    return rc;
}

int derived_write(const scp_derived_params *p, const char *out_path, char *err, size_t len)
{
    DcmFileFormat ff;
    int rc = scp__load_decoded(p->source_path, &ff, err, len);
    if (rc == 0)
        rc = build(ff.getDataset(), p, err, len);
    if (rc == 0)
        rc = scp__save(&ff, p->transfer_syntax_uid, out_path, err, len);
    return rc;
}

} // namespace

extern "C" int scp_derived_write(const scp_derived_params *p, const char *out_path, char *err,
                                 size_t err_len)
{
    if (!p || !out_path || !p->source_path || !p->series_uid || !p->sop_uid || !p->values ||
        !p->series_uid[0] || !p->sop_uid[0]) {
        scp__set_err(err, err_len, "missing source, output path, UIDs or values");
        return -EINVAL;
    }
    int rc;
    try {
        rc = scp__global_init_once();
        if (rc == 0)
            rc = derived_write(p, out_path, err, err_len);
    } catch (const std::bad_alloc &) {
        scp__set_err(err, err_len, "out of memory");
        rc = -ENOMEM;
    } catch (...) {
        scp__set_err(err, err_len, "internal error");
        rc = LDCT_EDICOM;
    }
    if (rc < 0)
        unlink(out_path);
    return rc;
}

extern "C" long scp_series_number_derive(long source, long offset)
{
    const long lo = INT32_MIN, hi = INT32_MAX;
    source = source < lo ? lo : source > hi ? hi : source;
    long n = source + offset;
    if (n < lo || n > hi)
        n = source - offset;
    return n < lo ? lo : n > hi ? hi : n;
}

extern "C" void scp_fit_description(const char *base, const char *suffix, const char *charset,
                                    char *out, size_t len)
{
    const std::string b = base ? base : "", cs = charset ? charset : "";
    std::string sfx = suffix_in_charset(suffix ? suffix : "", cs);
    sfx.resize(cut_point(sfx, 64, cs));
    const size_t room = 64 - sfx.size();
    std::string r = b.substr(0, cut_point(b, room, cs));
    if (r.size() < b.size()) /* cut: no blanks before the suffix */
        while (!r.empty() && r.back() == ' ')
            r.pop_back();
    snprintf(out, len, "%s%s", r.c_str(), sfx.c_str());
}
