/* scp/scu.cc: the Storage SCU: sends a list of files to one peer in one
 * association (C-STORE each).
 *
 * Negotiation: for each distinct SOP class, one presentation context per
 * distinct transfer syntax of its files (that syntax alone) and one with
 * Explicit and Implicit VR Little Endian; a file goes on the context that
 * accepted its own syntax, else on an uncompressed one after conversion.
 *
 * Invariants: every wait is bounded: the TCP connect by connect_timeout_s
 * (DCMTK's process-wide dcmConnectionTimeout), A-ASSOCIATE-AC, responses and
 * release by dimse_timeout_s, and writes by SO_SNDTIMEO on the socket. Each
 * call has its own network and association, so any number of threads may
 * call scp_send_files at once.
 */
#include "scp/scp.h"
#include "scp/internal.hh"
#include "scp/tls.hh"

/* common/ headers are plain C without linkage guards. */
extern "C" {
#include "common/err.h"
#include "common/log.h"
}

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <dcmtk/dcmdata/dcuid.h>
#include <dcmtk/dcmdata/dcxfer.h>
#include <dcmtk/dcmnet/assoc.h>
#include <dcmtk/dcmnet/dcmtrans.h>
#include <dcmtk/dcmnet/dimse.h>
#include <dcmtk/dcmnet/dul.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <sys/socket.h>
#include <sys/time.h>

namespace
{

const int k_default_connect_s = 10;
const int k_default_dimse_s = 60;
const unsigned k_not_sent = 0xFFFF;

/* What the header pass learnt about one file. */
struct file_entry {
    std::string path, sop_class, sop_inst, ts;
    bool ok = false;
};

struct scu {
    const scp_send_options *o;
    int dimse_s;
    std::vector<file_entry> files;
    T_ASC_Network *net = nullptr;
    T_ASC_Association *assoc = nullptr;
    char *err;
    size_t err_len;
    int failed = 0; /* files not sent or answered with a failure */
    std::string first_failure;
};

bool uncompressed(const std::string &ts)
{
    return ts == UID_LittleEndianExplicitTransferSyntax ||
           ts == UID_LittleEndianImplicitTransferSyntax ||
           ts == UID_BigEndianExplicitTransferSyntax;
}

/* What a failed network step means to an administrator: a wait that ran
 * out names the destination's timeout; a peer that answered with what is
 * not DICOM, aborted or hung up says so. DCMTK's text, on one line,
 * otherwise. */
std::string peer_failure_text(const scu *s, const OFCondition &c, const char *awaited)
{
    char b[200];
    if (c == DUL_READTIMEOUT || c == DIMSE_NODATAAVAILABLE) {
        snprintf(b, sizeof b, "no %s within the destination's timeout of %d s", awaited,
                 s->dimse_s);
        return b;
    }
    std::string t(c.text()); /* a nested condition's text has line breaks */
    for (char &ch : t)
        if (ch == '\n' || ch == '\r')
            ch = ' ';
    if (c.module() == OFM_dcmnet && c.code() == DULC_UNRECOGNIZEDPDUTYPE)
        return "the peer's answer is not DICOM (" + t + "): is this port a DICOM node's?";
    /* DCMTK reports a connection closed without A-ABORT as an abort too. */
    if (c == DUL_PEERABORTEDASSOCIATION)
        return "the peer aborted the association or closed the connection";
    if (c == DUL_NETWORKCLOSED || c == DIMSE_READPDVFAILED)
        return "the peer closed the connection (" + t + ")";
    return t;
}

void note_failure(scu *s, const std::string &what)
{
    s->failed++;
    if (s->first_failure.empty())
        s->first_failure = what;
}

void scan(scu *s, const char *const *paths, int n)
{
    s->files.resize((size_t)n);
    for (int i = 0; i < n; i++) {
        file_entry &f = s->files[(size_t)i];
        f.path = paths[i] ? paths[i] : "";
        DcmFileFormat ff;
        OFCondition c = ff.loadFileUntilTag(f.path.c_str(), EXS_Unknown, EGL_noChange, 4096,
                                            ERM_autoDetect, DCM_PixelData);
        OFString cls, inst;
        DcmDataset *ds = ff.getDataset();
        if (c.good() && ds->findAndGetOFString(DCM_SOPClassUID, cls).good() &&
            ds->findAndGetOFString(DCM_SOPInstanceUID, inst).good() && !cls.empty()) {
            f.sop_class = cls.c_str();
            f.sop_inst = inst.c_str();
            f.ts = DcmXfer(ds->getOriginalXfer()).getXferID();
            f.ok = true;
        } else {
            note_failure(s, f.path + ": not readable DICOM");
        }
    }
}

/* Proposes the presentation contexts; odd IDs 1..255 (at most 128). */
int propose(scu *s, T_ASC_Parameters *params)
{
    std::map<std::string, std::set<std::string>> by_class;
    for (const file_entry &f : s->files)
        if (f.ok)
            by_class[f.sop_class].insert(f.ts);
    int id = 1;
    OFCondition c;
    for (const auto &kv : by_class) {
        std::vector<std::string> own;
        for (const std::string &ts : kv.second)
            if (!uncompressed(ts) || ts == UID_BigEndianExplicitTransferSyntax)
                own.push_back(ts);
        if (id + 2 * (int)own.size() > 255) {
            scp__set_err(s->err, s->err_len, "too many SOP classes and transfer syntaxes");
            return LDCT_EUNSUPPORTED;
        }
        for (const std::string &ts : own) {
            const char *one[] = {ts.c_str()};
            c = ASC_addPresentationContext(params, (T_ASC_PresentationContextID)id,
                                           kv.first.c_str(), one, 1);
            id += 2;
        }
        const char *plain[] = {UID_LittleEndianExplicitTransferSyntax,
                               UID_LittleEndianImplicitTransferSyntax};
        c = ASC_addPresentationContext(params, (T_ASC_PresentationContextID)id, kv.first.c_str(),
                                       plain, 2);
        id += 2;
        if (c.bad())
            return scp__cond_err(c, "proposing presentation contexts");
    }
    return 0;
}

/* A flat one-line description of the A-ASSOCIATE-RJ. */
std::string reject_text(T_ASC_Parameters *params)
{
    T_ASC_RejectParameters rej;
    OFString t;
    ASC_getRejectParameters(params, &rej);
    ASC_printRejectParameters(t, &rej);
    std::string s(t.c_str());
    for (char &ch : s)
        if (ch == '\n' || ch == '\r')
            ch = ' ';
    return s;
}

/* DcmTransportConnection::getSocket is protected; naming it through a
 * derived class (never instantiated) is the standard way to reach it. */
struct socket_of : DcmTransportConnection {
    static int get(DcmTransportConnection *tc)
    {
        DcmNativeSocketType (DcmTransportConnection::*fn)() = &socket_of::getSocket;
        return (int)(tc->*fn)();
    }
};

/* DCMTK writes block; a peer that stops reading must not hold us forever. */
void bound_writes(scu *s)
{
    DcmTransportConnection *tc = DUL_getTransportConnection(s->assoc->DULassociation);
    if (!tc)
        return;
    struct timeval tv = {s->dimse_s, 0};
    (void)setsockopt(socket_of::get(tc), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/* The sender's TLS layer: connections of a shared setup (scp_tls_ctx),
 * the peer's certificate checked for the destination's name, the handshake
 * waiting at most timeout_s (a PACS that accepts the connection and stays
 * silent would otherwise hold the sender for ever). */
class bounded_tls_layer : public DcmTransportLayer
{
  public:
    bounded_tls_layer(std::shared_ptr<DcmTLSTransportLayer> ctx, const char *peer_name,
                      int timeout_s)
        : ctx_(std::move(ctx)), peer_name_(peer_name ? peer_name : ""), timeout_s_(timeout_s)
    {
    }
    DcmTransportConnection *createConnection(DcmNativeSocketType sock, OFBool secure) override
    {
        return secure ? scp__tls_connection<DcmTLSConnection>(ctx_->getNativeHandle(), sock,
                                                              timeout_s_, peer_name_.c_str())
                      : nullptr;
    }

  private:
    std::shared_ptr<DcmTLSTransportLayer> ctx_;
    std::string peer_name_;
    int timeout_s_;
};

/* 0 when OpenSSL can check name, else LDCT_EINVAL_CONFIG with the reason. */
int check_peer_name(scu *s, const char *name)
{
    if (!name || !*name)
        return 0;
    X509_VERIFY_PARAM *p = X509_VERIFY_PARAM_new();
    const int ok = p && scp__tls_peer_name(p, name) == 1;
    X509_VERIFY_PARAM_free(p);
    if (ok)
        return 0;
    scp__set_err(s->err, s->err_len, "tls_peer_name %s cannot be checked (OpenSSL)", name);
    return LDCT_EINVAL_CONFIG;
}

/* With o->tls, a TLS transport layer on s->net (DCMTK owns it) and the
 * request marked for it: 0, or an error with the reason in s->err. */
int use_tls(scu *s, T_ASC_Parameters *params)
{
    const scp_send_options *o = s->o;
    if (!o->tls)
        return 0;
    int rc = check_peer_name(s, o->tls_peer_name);
    if (rc)
        return rc;
    std::unique_ptr<DcmTransportLayer> l(
        new bounded_tls_layer(o->tls->layer, o->tls_peer_name, s->dimse_s));
    OFCondition c = ASC_setTransportLayer(s->net, l.get(), 1);
    if (c.bad())
        return scp__cond_err(c, "SCU TLS layer");
    l.release();
    return scp__cond_err(ASC_setTransportLayerType(params, OFTrue), "SCU TLS");
}

int associate(scu *s)
{
    const scp_send_options *o = s->o;
    int connect_s = o->connect_timeout_s > 0 ? o->connect_timeout_s : k_default_connect_s;
    dcmConnectionTimeout.set((Sint32)connect_s);
    OFCondition c = ASC_initializeNetwork(NET_REQUESTOR, 0, s->dimse_s, &s->net);
    if (c.bad())
        return scp__cond_err(c, "SCU network");
    T_ASC_Parameters *params = nullptr;
    uint32_t pdu = o->max_pdu ? o->max_pdu : ASC_MAXIMUMPDUSIZE;
    pdu = pdu < ASC_MINIMUMPDUSIZE   ? ASC_MINIMUMPDUSIZE
          : pdu > ASC_MAXIMUMPDUSIZE ? ASC_MAXIMUMPDUSIZE
                                     : pdu;
    c = ASC_createAssociationParameters(&params, (long)pdu);
    if (c.bad())
        return scp__cond_err(c, "SCU parameters");
    std::string peer = std::string(o->host) + ":" + std::to_string(o->port);
    c = ASC_setAPTitles(params, o->calling_ae, o->called_ae, nullptr);
    if (c.good())
        c = ASC_setPresentationAddresses(params, "localhost", peer.c_str());
    int rc = c.good() ? propose(s, params) : scp__cond_err(c, "SCU parameters");
    if (rc == 0)
        rc = use_tls(s, params);
    if (rc < 0) {
        ASC_destroyAssociationParameters(&params);
        return rc;
    }
    c = ASC_requestAssociation(s->net, params, &s->assoc);
    if (c == DUL_ASSOCIATIONREJECTED) {
        scp__set_err(s->err, s->err_len, "association rejected by %s (%s): %s", o->called_ae,
                     peer.c_str(), reject_text(params).c_str());
        return LDCT_EPEER;
    }
    if (c.bad()) {
        scp__set_err(s->err, s->err_len, "cannot associate with %s at %s: %s", o->called_ae,
                     peer.c_str(),
                     peer_failure_text(s, c,
                                       "answer to the association request (the TCP connection"
                                       " was accepted)")
                         .c_str());
        rc = scp__cond_code(c); /* the text is in s->err, which the sender logs */
        return rc == LDCT_EDICOM ? LDCT_ENET : rc;
    }
    bound_writes(s);
    return 0;
}

/* The syntax context pid accepted ("" when none). */
std::string accepted_ts(scu *s, T_ASC_PresentationContextID pid)
{
    T_ASC_PresentationContext pc;
    if (!pid || ASC_findAcceptedPresentationContext(s->assoc->params, pid, &pc).bad())
        return std::string();
    return pc.acceptedTransferSyntax;
}

/* The context to send file f on: one that accepted its own syntax, else an
 * uncompressed one (then *to names the syntax to convert to); 0 when no
 * context fits. The lookup by syntax also matches contexts that merely
 * proposed it, hence the check of what was accepted. */
T_ASC_PresentationContextID pick_context(scu *s, const file_entry &f, std::string *to)
{
    const char *cls = f.sop_class.c_str();
    to->clear();
    for (const std::string &ts : {f.ts, std::string(UID_LittleEndianExplicitTransferSyntax),
                                  std::string(UID_LittleEndianImplicitTransferSyntax)}) {
        T_ASC_PresentationContextID pid =
            ASC_findAcceptedPresentationContextID(s->assoc, cls, ts.c_str());
        std::string acc = accepted_ts(s, pid);
        if (!acc.empty() && (acc == f.ts || uncompressed(acc))) {
            if (acc != f.ts)
                *to = acc;
            return pid;
        }
    }
    return 0;
}

/* True when the peer refused every context proposed for class cls in a
 * way only its configuration can change (a user rejection, abstract or
 * transfer syntaxes not supported), not without a reason. */
bool class_refused_for_good(scu *s, const char *cls)
{
    T_ASC_Parameters *params = s->assoc->params;
    bool any = false;
    for (int i = 0; i < ASC_countPresentationContexts(params); i++) {
        T_ASC_PresentationContext pc;
        if (ASC_getPresentationContext(params, i, &pc).bad() || strcmp(pc.abstractSyntax, cls))
            continue;
        if (pc.resultReason == ASC_P_NOREASON || pc.resultReason == ASC_P_ACCEPTANCE ||
            pc.resultReason == ASC_P_NOTYETNEGOTIATED)
            return false;
        any = true;
    }
    return any;
}

/* Loads (and converts if needed) one file; 0 or a local error. */
int load_for(const file_entry &f, const std::string &to, DcmFileFormat *ff)
{
    if (ff->loadFile(f.path.c_str()).bad())
        return LDCT_EINPUT;
    if (to.empty())
        return 0;
    E_TransferSyntax x = DcmXfer(to.c_str()).getXfer();
    DcmDataset *ds = ff->getDataset();
    if (ds->chooseRepresentation(x, nullptr).bad() || !ds->canWriteXfer(x))
        return LDCT_EUNSUPPORTED;
    return 0;
}

/* Sends file i; returns 0 or a network error that ends the association. */
int send_one(scu *s, size_t i, unsigned *status)
{
    const file_entry &f = s->files[i];
    std::string to;
    T_ASC_PresentationContextID pid = pick_context(s, f, &to);
    if (!pid) {
        note_failure(s, f.sop_inst + ": SOP class " + f.sop_class + " not accepted");
        if (class_refused_for_good(s, f.sop_class.c_str()))
            *status = SCP_STATUS_NOT_SENDABLE;
        return 0;
    }
    DcmFileFormat ff;
    int lrc = load_for(f, to, &ff);
    if (lrc == LDCT_EINPUT) {
        note_failure(s, f.sop_inst + ": the local file " + f.path + " cannot be read");
        return 0;
    }
    if (lrc < 0) {
        note_failure(s, f.sop_inst + ": cannot convert from " +
                            DcmXfer(f.ts.c_str()).getXferName() +
                            " to a transfer syntax the peer accepted (this node cannot decode it)");
        *status = SCP_STATUS_NOT_SENDABLE;
        return 0;
    }
    T_DIMSE_C_StoreRQ req;
    memset(&req, 0, sizeof req);
    req.MessageID = s->assoc->nextMsgID++;
    OFStandard::strlcpy(req.AffectedSOPClassUID, f.sop_class.c_str(),
                        sizeof req.AffectedSOPClassUID);
    OFStandard::strlcpy(req.AffectedSOPInstanceUID, f.sop_inst.c_str(),
                        sizeof req.AffectedSOPInstanceUID);
    req.DataSetType = DIMSE_DATASET_PRESENT;
    req.Priority = DIMSE_PRIORITY_MEDIUM;
    T_DIMSE_C_StoreRSP rsp;
    memset(&rsp, 0, sizeof rsp);
    DcmDataset *detail = nullptr;
    OFCondition c = DIMSE_storeUser(s->assoc, pid, &req, nullptr, ff.getDataset(), nullptr, nullptr,
                                    DIMSE_NONBLOCKING, s->dimse_s, &rsp, &detail);
    delete detail;
    if (c.bad()) {
        std::string what = "C-STORE of " + f.sop_inst;
        scp__set_err(s->err, s->err_len, "C-STORE of %s to %s failed: %s", f.sop_inst.c_str(),
                     s->o->called_ae, peer_failure_text(s, c, "C-STORE response").c_str());
        int rc = scp__cond_err(c, what.c_str());
        return rc == LDCT_EDICOM ? LDCT_ENET : rc;
    }
    *status = rsp.DimseStatus;
    if (rsp.DimseStatus != STATUS_Success && (rsp.DimseStatus & 0xF000) != 0xB000) {
        char b[32];
        snprintf(b, sizeof b, "0x%04X", rsp.DimseStatus);
        note_failure(s, f.sop_inst + ": status " + b);
    }
    return 0;
}

int run(scu *s, unsigned *statuses)
{
    bool any = false;
    for (const file_entry &f : s->files)
        any = any || f.ok;
    if (!any) { /* nothing to propose: no association at all */
        if (s->failed)
            scp__set_err(s->err, s->err_len, "no readable file; first: %s",
                         s->first_failure.c_str());
        return 0;
    }
    int rc = associate(s);
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < s->files.size() && rc == 0; i++) {
        if (s->o->cancel && __atomic_load_n(s->o->cancel, __ATOMIC_RELAXED)) {
            scp__set_err(s->err, s->err_len, "cancelled after %zu of %zu file(s)", i,
                         s->files.size());
            rc = LDCT_ECANCELED;
        } else if (s->files[i].ok) {
            rc = send_one(s, i, &statuses[i]);
        }
    }
    if (rc < 0) {
        ASC_abortAssociation(s->assoc);
        return rc;
    }
    OFCondition c = ASC_releaseAssociation(s->assoc);
    if (c.bad()) /* everything was answered: the release only tidies up */
        scp__cond_err(c, "SCU release");
    if (s->failed)
        scp__set_err(s->err, s->err_len, "%d of %zu file(s) not stored; first: %s", s->failed,
                     s->files.size(), s->first_failure.c_str());
    return 0;
}

void cleanup(scu *s)
{
    if (s->assoc)
        ASC_destroyAssociation(&s->assoc); /* also frees the parameters */
    if (s->net)
        ASC_dropNetwork(&s->net);
}

int check(const scp_send_options *o, const char *const *paths, int n, unsigned *statuses)
{
    if (!o || !o->host || !o->host[0] || !o->called_ae || !o->calling_ae || n < 0 ||
        (n > 0 && (!paths || !statuses)))
        return -EINVAL;
    if (o->port <= 0 || o->port > 65535 || strlen(o->called_ae) > 16 ||
        strlen(o->calling_ae) > 16 || !o->called_ae[0] || !o->calling_ae[0])
        return -EINVAL;
    return 0;
}

} // namespace

extern "C" int scp_send_files(const scp_send_options *o, const char *const *paths, int n,
                              unsigned *statuses, char *err, size_t err_len)
{
    scp__set_err(err, err_len, "%s", "");
    if (check(o, paths, n, statuses) < 0) {
        scp__set_err(err, err_len, "invalid send options");
        return -EINVAL;
    }
    for (int i = 0; i < n; i++)
        statuses[i] = k_not_sent;
    scu s;
    s.o = o;
    s.dimse_s = o->dimse_timeout_s > 0 ? o->dimse_timeout_s : k_default_dimse_s;
    s.err = err;
    s.err_len = err_len;
    int rc;
    try {
        rc = scp__global_init_once();
        if (rc == 0) {
            scan(&s, paths, n);
            rc = run(&s, statuses);
        }
    } catch (const std::bad_alloc &) {
        scp__set_err(err, err_len, "out of memory");
        rc = -ENOMEM;
    } catch (...) {
        scp__set_err(err, err_len, "internal error");
        rc = LDCT_EDICOM;
    }
    try {
        cleanup(&s);
    } catch (...) {
    }
    if (rc < 0)
        log_debug("scp: sending to %s at %s:%d failed: %s", o->called_ae, o->host, o->port,
                  err && err[0] ? err : ldct_strerror(rc));
    return rc;
}
