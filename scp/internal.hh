/* scp/internal.hh: helpers shared by the C++ files of scp/ only.
 *
 * This header is private to scp/ (never included from C and never installed):
 * it is the one place where DCMTK types may appear in a declaration, so
 * that the translation of DCMTK conditions into project error codes lives in
 * exactly one function (scp__cond_code, global.cc) and the pixel helpers
 * (pixel.cc) are shared by the slice reader and the derived writer.
 * Any thread may call these functions.
 */
#ifndef LDCT_SCP_INTERNAL_HH
#define LDCT_SCP_INTERNAL_HH

#include <stddef.h>
#include <stdint.h>

#include "scp/scp.h"

class OFCondition;
class DcmDataset;
class DcmFileFormat;
class DcmItem;
class DcmTagKey;
class DcmTLSTransportLayer;

/* Maps a DCMTK condition to 0 (good) or a negative project error code, and
 * logs the condition text with `what` (no dataset content) when it is bad. */
int scp__cond_err(const OFCondition &cond, const char *what);

/* The same mapping without the log line, for callers that report the
 * condition's text themselves. */
int scp__cond_code(const OFCondition &cond);

/* Idempotent process setup (what scp_global_init does), without the C
 * exception barrier; throws nothing but may return an error code. */
int scp__global_init_once(void);

/* Deepest nesting of sequences and items (together) that the readers accept:
 * real datasets stay below 30 (an SR content tree), and DCMTK's recursive
 * parser stays far from the end of a thread's stack. */
enum { SCP__MAX_NESTING = 128 };

/* Refuses (LDCT_EINPUT, reason in err) a file whose sequences and items nest
 * deeper than `limit`, measured without recursion and before DCMTK parses
 * it (depth.cc). 0 otherwise, also for what it cannot follow (DCMTK then
 * reports the file as unreadable). */
int scp__check_nesting(const char *path, int limit, char *err, size_t len);

/* Why DCMTK 3.6.7 will refuse the A-ASSOCIATE-RQ whose PDU body (the
 * `len` bytes after its 6-byte header) is `body`, found by following its
 * items as DCMTK's parser does (assoc_rq.cc lists the rules); NULL when
 * none of those rules applies (DCMTK may still refuse it). The reason is
 * a static string without request content. */
const char *scp__assoc_rq_fault(const unsigned char *body, size_t len);

/* Sets SO_RCVTIMEO and SO_SNDTIMEO of socket fd to `seconds` (0: none);
 * bounds TLS handshakes (tls.hh, tls.cc). */
void scp__socket_timeouts(int fd, int seconds);

/* Initialises OpenSSL once per process (tls.cc). */
void scp__tls_init(void);

/* Sets the BCP 195 profile, our certificate and key, the CA certificates and
 * the peer verification of `l` (tls.cc; role_scp: listener or sender): 0,
 * or LDCT_EINVAL_CONFIG / LDCT_EDICOM with the reason in err. */
int scp__tls_configure(DcmTLSTransportLayer &l, const scp_tls *t, int role_scp, char *err,
                       size_t len);

/* Copies `src` into `dst` (size `len`, always terminated when len > 0). */
void scp__strlcpy(char *dst, const char *src, size_t len);

/* Formats a message into err (size len; nothing when err is NULL). */
void scp__set_err(char *err, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Encodes the dataset for the transfer syntax `ts_uid` (NULL: Explicit VR
 * Little Endian; lossless JPEG, JPEG-LS and RLE encoders) and saves the file
 * with a fresh meta header, then reads it back: a file cut short (a full
 * disk; DCMTK does not report a failed write at close) is an error
 * (-ENOSPC when under 1 MiB is left, else -EIO) and is removed, as is any
 * file of a failed save. */
int scp__save(DcmFileFormat *ff, const char *ts_uid, const char *path, char *err, size_t len);

/* The Image Pixel facts the readers and the derived writer need. */
struct scp__pixfmt {
    int rows, cols, frames, alloc, stored, high, sign;
    size_t count() const
    {
        return (size_t)rows * (size_t)cols * (size_t)frames;
    }
};

/* A value in the stored bits of f (BitsStored wide), sign-extended when f
 * is signed: how a stored pixel is read after its shift. */
inline int32_t scp__stored_value(const scp__pixfmt &f, uint32_t v)
{
    uint32_t mask = f.stored >= 32 ? 0xFFFFFFFFu : ((1u << f.stored) - 1u);
    v &= mask;
    if (f.sign && (v >> (f.stored - 1)) & 1u)
        return (int32_t)(v | ~mask);
    return (int32_t)v;
}

/* Raw stored value at index i of native pixel data, sign-extended. */
inline int32_t scp__stored_at(const scp__pixfmt &f, const uint8_t *p8, const uint16_t *p16,
                              size_t i)
{
    uint32_t raw = f.alloc == 8 ? p8[i] : p16[i];
    return scp__stored_value(f, raw >> (unsigned)(f.high + 1 - f.stored));
}

/* The stored values that mark padding (outside the scanned field):
 * [Pixel Padding Value, Pixel Padding Range Limit] in either order, or the
 * one value without a limit. False when ds has no Pixel Padding Value or
 * one that BitsStored cannot hold. */
bool scp__padding_range(DcmItem *ds, const scp__pixfmt &f, int32_t *lo, int32_t *hi);

/* Reads and checks the pixel format: MONOCHROME1/2, one sample, 8 or 16 bits
 * allocated, consistent BitsStored/HighBit. 0 or an error with a message. */
int scp__pixfmt_read(DcmItem *ds, scp__pixfmt *f, char *err, size_t len);

/* The first item of `seq` in the functional groups that apply to frame
 * `frame` (0-based): the Per-Frame item's, else the Shared one's; NULL when
 * neither has it (or the dataset has no functional groups). */
DcmItem *scp__fg_item(DcmItem *ds, int frame, const DcmTagKey &seq);

/* The rescale of frame `frame`: Pixel Value Transformation functional group
 * when present, else the top-level attributes, else 1 and 0. A slope of 0
 * or NaN is returned as it is: readers refuse such a frame. */
void scp__frame_rescale(DcmItem *ds, int frame, double *slope, double *intercept);

/* Loads a whole file and decodes its pixel data to native (uncompressed)
 * form. 0 or an error with a message. */
int scp__load_decoded(const char *path, DcmFileFormat *ff, char *err, size_t len);

/* Builds every module of a CT Image Storage instance from p into ds
 * (ctwrite.cc; what scp_ct_write saves). Returns 0 or LDCT_EDICOM. */
int scp__ct_build(const scp_ct_params *p, DcmItem *ds);

#endif
