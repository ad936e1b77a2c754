/* scp/global.cc: process-wide DCMTK setup and the single translation of
 * DCMTK conditions (OFCondition) into project error codes.
 *
 * Invariants: scp_global_init is idempotent and thread-safe (std::call_once);
 * it sets TCP_NODELAY=1 in the environment before any DCMTK network call so
 * that every socket DCMTK opens or accepts has Nagle's algorithm off
 * (dcmnet reads that variable for each connection). The data dictionary is
 * DCMTK's default one, or the files listed in DCMDICTPATH when it is set
 * (dcmdata honours the variable itself). Codecs registered: JPEG, JPEG-LS
 * and RLE decoders (to read what peers send) and encoders (for the writer).
 * Any thread may call these functions.
 */
#include "scp/scp.h"
#include "scp/internal.hh"

/* common/ headers are plain C without linkage guards. */
extern "C" {
#include "common/err.h"
#include "common/log.h"
}

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcdict.h>
#include <dcmtk/dcmdata/dcrledrg.h>
#include <dcmtk/dcmdata/dcrleerg.h>
#include <dcmtk/dcmjpeg/djdecode.h>
#include <dcmtk/dcmjpeg/djencode.h>
#include <dcmtk/dcmjpls/djdecode.h>
#include <dcmtk/dcmjpls/djencode.h>
#include <dcmtk/dcmnet/cond.h>
#include <dcmtk/dcmnet/dul.h>
#include <dcmtk/oflog/consap.h>
#include <dcmtk/oflog/layout.h>
#include <dcmtk/oflog/oflog.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

void scp__strlcpy(char *dst, const char *src, size_t len)
{
    if (len == 0)
        return;
    size_t n = src ? strnlen(src, len - 1) : 0;
    if (n)
        memcpy(dst, src, n);
    dst[n] = '\0';
}

int scp__cond_err(const OFCondition &cond, const char *what)
{
    if (cond.good())
        return 0;
    const char *text = cond.text();
    /* Pushed conditions span several lines; keep the log line whole. */
    std::string line(text ? text : "unknown DICOM error");
    for (char &ch : line)
        if (ch == '\n' || ch == '\r')
            ch = ' ';
    log_warn("scp: %s: %s", what, line.c_str());
    return scp__cond_code(cond);
}

int scp__cond_code(const OFCondition &cond)
{
    if (cond.good())
        return 0;
    const char *text = cond.text();
    /* Socket errors only reach us as text; the two that callers act on
     * (port taken, privileged port) are recognised here. */
    if (text && strstr(text, strerror(EADDRINUSE)))
        return -EADDRINUSE;
    if (text && strstr(text, strerror(EACCES)))
        return -EACCES;
    if (cond == DUL_PEERABORTEDASSOCIATION || cond == DUL_NETWORKCLOSED ||
        cond == DUL_READTIMEOUT || cond == DIMSE_READPDVFAILED || cond == DIMSE_NODATAAVAILABLE)
        return LDCT_ENET;
    if (cond == EC_MemoryExhausted)
        return -ENOMEM;
    if (cond.module() == OFM_dcmnet)
        return LDCT_ENET;
    return LDCT_EDICOM;
}

static int init_result = 0;

/* DCMTK's own logger reports errors only (our log lines carry the context),
 * on stderr with the syslog prefix of an error so journald classifies it. */
static void configure_dcmtk_log(void)
{
    namespace l4 = dcmtk::log4cplus;
    l4::SharedAppenderPtr app(new l4::ConsoleAppender(true, true));
    OFunique_ptr<l4::Layout> layout(new l4::PatternLayout("<3>dcmtk: %m%n"));
    app->setLayout(OFmove(layout));
    l4::Logger root = l4::Logger::getRoot();
    root.removeAllAppenders();
    root.addAppender(app);
    root.setLogLevel(l4::ERROR_LOG_LEVEL);
}

void scp_dcmtk_log_quiet(int quiet)
{
    namespace l4 = dcmtk::log4cplus;
    l4::Logger::getRoot().setLogLevel(quiet ? l4::OFF_LOG_LEVEL : l4::ERROR_LOG_LEVEL);
}

static void init_impl(void)
{
    /* Before any DCMTK socket exists: dcmnet reads this per connection. */
    setenv("TCP_NODELAY", "1", 1);
    /* Peer addresses stay numeric: no DNS lookup per association. */
    dcmDisableGethostbyaddr.set(OFTrue);
    configure_dcmtk_log();
    if (!dcmDataDict.isDictionaryLoaded()) {
        const char *path = getenv(DCM_DICT_ENVIRONMENT_VARIABLE);
        log_err("scp: no DICOM data dictionary loaded (%s=%s)", DCM_DICT_ENVIRONMENT_VARIABLE,
                path ? path : "(unset)");
        init_result = LDCT_EDICOM;
        return;
    }
    DJDecoderRegistration::registerCodecs();
    DJLSDecoderRegistration::registerCodecs();
    DcmRLEDecoderRegistration::registerCodecs();
    DJEncoderRegistration::registerCodecs();
    DJLSEncoderRegistration::registerCodecs();
    DcmRLEEncoderRegistration::registerCodecs();
}

int scp__global_init_once(void)
{
    static std::once_flag once;
    std::call_once(once, init_impl);
    return init_result;
}

extern "C" int scp_global_init(void)
{
    try {
        return scp__global_init_once();
    } catch (...) {
        return LDCT_EDICOM;
    }
}

extern "C" void scp_global_cleanup(void)
{
    try {
        DJDecoderRegistration::cleanup();
        DJLSDecoderRegistration::cleanup();
        DcmRLEDecoderRegistration::cleanup();
        DJEncoderRegistration::cleanup();
        DJLSEncoderRegistration::cleanup();
        DcmRLEEncoderRegistration::cleanup();
    } catch (...) {
    }
}
