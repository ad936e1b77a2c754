/* scp/depth.cc: how deeply the sequences of a DICOM file nest, measured
 * without recursion, before DCMTK parses the file.
 *
 * Why: DCMTK's parser recurses once per sequence and item, so a dataset of
 * a few MB holding 200000 nested sequences overflows the stack of the thread
 * that parses it and kills the whole daemon (found by sending one such
 * C-STORE). This scanner walks the encoded elements with an explicit stack
 * of containers and stops at the first container deeper than the limit.
 *
 * It follows what DCMTK's reader does: Explicit VR Little and Big Endian,
 * Implicit VR Little Endian and Deflated Explicit VR Little Endian (inflated
 * through zlib as it goes, never held in memory); a sequence is an SQ
 * element (in Implicit VR, a tag the dictionary knows as SQ) or an element
 * of undefined length other than Pixel Data, whose contents (for UN) are
 * Implicit VR Little Endian; the items of encapsulated Pixel Data are
 * fragments and are skipped. Anything it cannot follow is left to DCMTK,
 * which reports it as a parse error; only excessive depth is refused here.
 *
 * Thread-safety: no state; any thread (the dictionary is read-only).
 */
#include "scp/internal.hh"

extern "C" {
#include "common/err.h"
}

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dctag.h>

#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

namespace
{

const char *k_implicit_le = "1.2.840.10008.1.2";
const char *k_explicit_be = "1.2.840.10008.1.2.2";
const char *k_deflated = "1.2.840.10008.1.2.1.99";
const uint32_t k_undefined = 0xFFFFFFFFu;

/* A forward-only byte stream: the file as is, or inflated. */
class source
{
  public:
    virtual ~source() = default;
    /* 1 when all n bytes were read. */
    virtual bool read(void *dst, size_t n) = 0;
    virtual bool skip(uint64_t n) = 0;
    uint64_t pos = 0; /* bytes consumed so far */
};

class file_source : public source
{
  public:
    explicit file_source(FILE *f) : f_(f) {}
    bool read(void *dst, size_t n) override
    {
        pos += n;
        return fread(dst, 1, n, f_) == n;
    }
    bool skip(uint64_t n) override
    {
        pos += n;
        return fseeko(f_, (off_t)n, SEEK_CUR) == 0;
    }

  private:
    FILE *f_;
};

/* Raw deflate (RFC 1951), as the Deflated transfer syntax stores it. */
class inflate_source : public source
{
  public:
    explicit inflate_source(FILE *f) : f_(f)
    {
        memset(&z_, 0, sizeof z_);
        ok_ = init_ = inflateInit2(&z_, -MAX_WBITS) == Z_OK;
    }
    /* init_, not ok_: a stream that turned out corrupt still holds zlib's
     * state (7 KiB per received instance, leaked before). */
    ~inflate_source() override
    {
        if (init_)
            inflateEnd(&z_);
    }
    bool read(void *dst, size_t n) override
    {
        z_.next_out = (Bytef *)dst;
        z_.avail_out = (uInt)n;
        while (ok_ && z_.avail_out > 0) {
            if (z_.avail_in == 0) {
                z_.avail_in = (uInt)fread(in_, 1, sizeof in_, f_);
                z_.next_in = in_;
                if (z_.avail_in == 0)
                    return false;
            }
            int rc = inflate(&z_, Z_NO_FLUSH);
            if (rc == Z_STREAM_END && z_.avail_out > 0)
                return false;
            if (rc != Z_OK && rc != Z_STREAM_END)
                ok_ = false;
        }
        pos += n;
        return ok_;
    }
    bool skip(uint64_t n) override
    {
        unsigned char scratch[16384];
        while (n > 0) {
            size_t k = n < sizeof scratch ? (size_t)n : sizeof scratch;
            if (!read(scratch, k))
                return false;
            n -= k;
        }
        return true;
    }

  private:
    FILE *f_;
    z_stream z_;
    bool ok_ = false;   /* the stream is still readable */
    bool init_ = false; /* z_ holds zlib's state (inflateEnd owed) */
    unsigned char in_[16384] = {};
};

/* One open sequence or item. */
struct container {
    uint64_t end;   /* position after it; UINT64_MAX for undefined length */
    bool item;      /* an item (else a sequence) */
    bool fragments; /* encapsulated Pixel Data: its items are opaque */
    bool implicit;  /* contents in Implicit VR Little Endian (UN sequences) */
};

struct walker {
    source *src;
    bool big_endian, implicit;
    int limit;
    std::vector<container> open;
};

uint16_t u16(const unsigned char *p, bool be)
{
    return be ? (uint16_t)(p[0] << 8 | p[1]) : (uint16_t)(p[1] << 8 | p[0]);
}

uint32_t u32(const unsigned char *p, bool be)
{
    return be ? (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]
              : (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

bool long_length_vr(const char *vr)
{
    static const char *const k[] = {"OB", "OD", "OF", "OL", "OV", "OW", "SQ",
                                    "SV", "UC", "UN", "UR", "UT", "UV"};
    for (const char *v : k)
        if (!memcmp(vr, v, 2))
            return true;
    return false;
}

/* Opens a container; false when that goes deeper than the limit. */
bool push(walker *w, uint32_t len, bool item, bool fragments, bool implicit)
{
    uint64_t end = len == k_undefined ? UINT64_MAX : w->src->pos + len;
    w->open.push_back(container{end, item, fragments, implicit});
    return (int)w->open.size() <= w->limit;
}

/* Closes the containers of defined length that end here. */
void close_ended(walker *w)
{
    while (!w->open.empty() && w->open.back().end <= w->src->pos)
        w->open.pop_back();
}

/* An item tag or a delimiter (group FFFE). */
bool on_item_tag(walker *w, uint16_t elem, uint32_t len)
{
    if (elem == 0xE000) {
        if (!w->open.empty() && w->open.back().fragments)
            return len == k_undefined || w->src->skip(len);
        bool implicit = !w->open.empty() && w->open.back().implicit;
        return push(w, len, true, false, implicit);
    }
    /* A delimiter closes only the open container of its own kind, as
     * DCMTK's reader does; a stray one changes nothing. */
    bool item_end = elem == 0xE00D;
    if (!w->open.empty() && w->open.back().end == UINT64_MAX && w->open.back().item == item_end)
        w->open.pop_back();
    return true;
}

/* Reads one element header and either opens a container or skips the
 * value. Returns 0 to go on, 1 at the end of the data, -1 too deep. */
int step(walker *w)
{
    close_ended(w);
    bool implicit = w->open.empty() ? w->implicit : w->open.back().implicit;
    bool be = w->big_endian && !implicit;
    unsigned char h[8];
    if (!w->src->read(h, 4))
        return 1;
    uint16_t group = u16(h, be), elem = u16(h + 2, be);
    uint32_t len;
    char vr[3] = "";
    if (group == 0xFFFE || implicit) {
        if (!w->src->read(h + 4, 4))
            return 1;
        len = u32(h + 4, be);
    } else {
        if (!w->src->read(h + 4, 2))
            return 1;
        memcpy(vr, h + 4, 2);
        if (long_length_vr(vr)) {
            unsigned char l[6];
            if (!w->src->read(l, 6))
                return 1;
            len = u32(l + 2, be);
        } else {
            unsigned char l[2];
            if (!w->src->read(l, 2))
                return 1;
            len = u16(l, be);
        }
    }
    if (group == 0xFFFE)
        return on_item_tag(w, elem, len) ? 0 : -1;
    bool pixel = group == 0x7FE0 && elem == 0x0010;
    bool sq = implicit ? DcmTag(group, elem).getEVR() == EVR_SQ : !memcmp(vr, "SQ", 2);
    if (len == k_undefined && pixel)
        return push(w, len, false, true, implicit) ? 0 : -1;
    if (sq || len == k_undefined)
        return push(w, len, false, false, implicit || !memcmp(vr, "UN", 2)) ? 0 : -1;
    return w->src->skip(len) ? 0 : 1;
}

/* Skips the preamble and the meta header; the transfer syntax into ts. */
bool read_meta(FILE *f, char *ts, size_t ts_len)
{
    unsigned char pre[132];
    if (fread(pre, 1, sizeof pre, f) != sizeof pre || memcmp(pre + 128, "DICM", 4))
        return false;
    for (;;) {
        unsigned char h[8];
        if (fread(h, 1, 8, f) != 8)
            return false;
        if (u16(h, false) != 0x0002) {
            fseeko(f, -8, SEEK_CUR);
            return true;
        }
        uint32_t len = long_length_vr((const char *)h + 4)
                           ? (fread(h, 1, 4, f) == 4 ? u32(h, false) : k_undefined)
                           : u16(h + 6, false);
        if (len == k_undefined)
            return false;
        if (u16(h + 2, false) == 0x0010 && len < ts_len) {
            if (fread(ts, 1, len, f) != len)
                return false;
            ts[len] = '\0';
            for (size_t k = len; k > 0 && (ts[k - 1] == '\0' || ts[k - 1] == ' '); k--)
                ts[k - 1] = '\0';
        } else if (fseeko(f, len, SEEK_CUR) != 0) {
            return false;
        }
    }
}

} // namespace

int scp__check_nesting(const char *path, int limit, char *err, size_t len)
{
    std::unique_ptr<FILE, int (*)(FILE *)> f(fopen(path, "rb"), fclose);
    if (!f)
        return 0; /* DCMTK reports what is wrong with the file */
    char ts[72] = "1.2.840.10008.1.2.1";
    if (!read_meta(f.get(), ts, sizeof ts))
        return 0;
    std::unique_ptr<source> src;
    if (!strcmp(ts, k_deflated))
        src.reset(new inflate_source(f.get()));
    else
        src.reset(new file_source(f.get()));
    walker w{src.get(), !strcmp(ts, k_explicit_be), !strcmp(ts, k_implicit_le), limit, {}};
    int rc;
    while ((rc = step(&w)) == 0) {
    }
    if (rc > 0)
        return 0;
    scp__set_err(err, len, "sequences nested deeper than %d levels", limit);
    return LDCT_EINPUT;
}
