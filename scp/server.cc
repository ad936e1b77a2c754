/* scp/server.cc: the DICOM server (Verification and Storage SCP).
 *
 * Why the low-level ASC_/DIMSE_ API with our own threads rather than
 * DcmSCPPool: we need (1) scp_server_start to return only once the port is
 * bound and listening, with the bind error as its result (ASC_initializeNetwork
 * binds and listens synchronously, in the caller's thread); (2) a precise
 * A-ASSOCIATE-RJ per verdict (result, source, reason) and a transient "local
 * limit exceeded" when the pool is full, which DcmSCPPool does not let us
 * choose; (3) a stop that rejects newcomers at once, waits a grace period for
 * running associations and then aborts the rest by shutting their sockets
 * down, which needs the socket of every running association.
 *
 * Threads: scp_server_new/start/stop/free are called by one owner thread
 * (the daemon's main thread). Connections are accepted by acceptor threads:
 * exactly one of them waits for a connection at any time; as soon as it has
 * accepted one (our transport layer's createConnection hook, called by DCMTK
 * right after accept() and before the A-ASSOCIATE-RQ is read), the listener
 * thread starts the next acceptor, and the first one goes on to read the
 * request and then serves that association itself. So a peer that connects
 * and sends nothing holds only its own thread (until the ACSE timeout), never
 * the acceptance of others. The handlers run in association threads,
 * concurrently. scp_server_active may be called from any thread.
 *
 * Invariants:
 * - `active` counts associations accepted and being served; it never exceeds
 *   max_associations (checked and incremented under `mu`).
 * - At most k_max_pending connections wait for their A-ASSOCIATE-RQ at once,
 *   at most k_max_pending_per_host of them from one address; beyond that new
 *   connections wait in the kernel's backlog, or (one address over its
 *   share) are closed at once. A host the allow_host handler refuses is
 *   closed at once too, before anything is read.
 * - At most k_max_closing threads wait for a peer to close after our last
 *   PDU (a rejection, a release); past that a connection is closed at once.
 * - A received file is either handed to store_end (which then owns it) or
 *   removed here; a failed reception never reaches store_end.
 * - Nothing from a dataset but UIDs, modality, series description and sizes
 *   is read back (the whole dataset is parsed, so a truncated one is
 *   refused, but pixel data stays on disk), and logs carry UIDs, AE titles
 *   and addresses only.
 * - The ACSE timeout bounds how long a peer that connects but sends nothing
 *   holds its acceptor thread; stop shuts such connections down at once.
 */
#include "scp/scp.h"
#include "scp/internal.hh"
#include "scp/tls.hh"

/* common/ headers are plain C without linkage guards. */
extern "C" {
#include "common/err.h"
#include "common/clock.h"
#include "common/log.h"
}

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <dcmtk/dcmdata/dcostrma.h>
#include <dcmtk/dcmdata/dcostrmf.h>
#include <dcmtk/dcmdata/dcuid.h>
#include <dcmtk/dcmnet/assoc.h>
#include <dcmtk/dcmnet/dcmlayer.h>
#include <dcmtk/dcmnet/dcmtrans.h>
#include <dcmtk/dcmnet/dimse.h>
#include <dcmtk/dcmnet/dul.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

namespace
{

/* Transfer syntaxes we accept, in order of preference when a peer proposes
 * several in one presentation context: uncompressed first (nothing to decode,
 * and a peer holding uncompressed data is never pushed to compress), then
 * lossless compression, then what is lossy or that DCMTK cannot decode
 * (JPEG 2000), which is stored as received. */
const char *k_transfer_syntaxes[] = {
    UID_LittleEndianExplicitTransferSyntax,
    UID_BigEndianExplicitTransferSyntax,
    UID_LittleEndianImplicitTransferSyntax,
    UID_DeflatedExplicitVRLittleEndianTransferSyntax,
    UID_JPEGProcess14SV1TransferSyntax,
    UID_JPEGProcess14TransferSyntax,
    UID_JPEGLSLosslessTransferSyntax,
    UID_RLELosslessTransferSyntax,
    UID_JPEG2000LosslessOnlyTransferSyntax,
    UID_JPEGLSLossyTransferSyntax,
    UID_JPEGProcess1TransferSyntax,
    UID_JPEGProcess2_4TransferSyntax,
    UID_JPEG2000TransferSyntax,
};
const int k_n_transfer_syntaxes = sizeof k_transfer_syntaxes / sizeof k_transfer_syntaxes[0];

const int k_listen_poll_s = 1;           /* how often acceptor and listener check for stop */
const int k_max_pending = 32;            /* connections waiting for their A-ASSOCIATE-RQ */
const int k_max_pending_per_host = 8;    /* of those, from one address, once half are taken */
const int64_t k_refusal_log_ms = 10000;  /* at most one early-refusal line per 10 s */
const size_t k_refusal_hosts_kept = 256; /* addresses counted between two such lines */
const size_t k_refusal_hosts_named = 3;  /* of which a line names the busiest */
const int k_max_closing = 32; /* threads waiting for a peer to close after our last PDU */
const int k_max_stop = 8;     /* servers one scp_servers_stop takes */
const int k_default_acse_s = 30;
const int k_default_dimse_s = 60;
const size_t k_comment_len = 256;

/* One acceptor/association thread and what stop needs to abort it. */
struct assoc_slot {
    std::thread thread;
    std::atomic<bool> done{false};
    bool accepted = false;     /* written by its own thread only (accept hook) */
    bool rq_refused = false;   /* its request was refused unparsed (own thread only) */
    bool closed_early = false; /* closed right after accept (on_accepted; own thread) */
    bool pending_done = false; /* no longer counted in scp_server::pending (under mu) */
    bool host_counted = false; /* counted in scp_server::pending_by_host (under mu) */
    int fd = -1;               /* guarded by scp_server::mu; -1 once the thread drops it */
    char peer[64] = "?";       /* the connection's numeric address (own thread only) */
};

/* What the listener's connections (guarded_connection) show of their
 * socket: -1 once DCMTK has closed it. */
class socket_view
{
  public:
    virtual ~socket_view() = default;
    virtual int socket_fd() = 0;
};

/* The per-association facts handlers see. */
struct assoc_ctx {
    std::string calling, called, peer;
    std::shared_ptr<X509> tls_peer; /* the TLS caller's certificate, if it sent one */
    scp_assoc_info info{};
    mutable std::string last_series;                /* of the last instance stored */
    mutable std::vector<std::string> stored_series; /* every series it stored to */
    mutable int refused_for_resources = 0;          /* instances answered 0xA7xx */
};

/* Running associations, in all and per peer address (max_associations,
 * max_associations_per_host); one per server, or shared by the node's two
 * ports. */
struct assoc_limit {
    std::mutex mu;
    int total = 0;
    std::map<std::string, int> by_host; /* hosts with at least one */
};

} // namespace

struct scp_server {
    std::string ae_title;
    scp_server_options opt{};
    std::string tls_certificate, tls_private_key, tls_ca, tls_crl; /* opt.tls points to tls */
    scp_tls tls{};
    /* The TLS context of connections accepted from now on, once a reload
     * made one (until then the transport layer's own); tls_lock guards it. */
    std::mutex tls_lock;
    std::shared_ptr<DcmTLSTransportLayer> tls_ctx;
    /* Associations counted against max_associations: this server's, or
     * shared with another port of the node (scp_server_share_limit). */
    std::shared_ptr<assoc_limit> limit = std::make_shared<assoc_limit>();
    scp_handlers h{};
    T_ASC_Network *net = nullptr;
    std::thread listener;
    std::atomic<bool> stopping{false}; /* reject every new association */
    std::atomic<bool> quit{false};     /* the listener leaves its loop */
    std::atomic<int> active{0};
    std::atomic<long long> accepted{0}, rejected{0}, failed{0}; /* scp_server_counts */
    std::atomic<long long> refused_resources{0}, refused_error{0};
    std::mutex mu; /* guards slots, their fds and the three fields below */
    std::condition_variable cv;
    std::list<std::unique_ptr<assoc_slot>> slots;
    bool acceptor_waiting = false;              /* an acceptor thread waits for a connection */
    int pending = 0;                            /* accepted, A-ASSOCIATE-RQ not read yet */
    std::map<std::string, int> pending_by_host; /* the same, per peer address */
    int64_t refusal_logged_ms = 0;              /* the last early-refusal line */
    long long refusals_unlogged = 0;            /* early refusals since that line */
    std::map<std::string, long long> unlogged_by_host; /* the same, per address (at most
                                                          k_refusal_hosts_kept of them) */
    int closing = 0;                                   /* in drop_when_closed's wait for the peer */
    bool aborting = false;                             /* stop: shut every new connection down */
    bool started = false;
    bool stopped = false;
};

namespace
{

std::string trim(const char *s)
{
    std::string v(s ? s : "");
    size_t b = v.find_first_not_of(' ');
    size_t e = v.find_last_not_of(' ');
    return b == std::string::npos ? std::string() : v.substr(b, e - b + 1);
}

void fill_assoc_ctx(T_ASC_Association *assoc, bool tls, assoc_ctx *a)
{
    if (tls) {
        a->tls_peer.reset(scp__tls_peer_certificate(assoc), X509_free);
        a->info.tls = 1;
        a->info.tls_peer = a->tls_peer.get();
    }
    const DUL_ASSOCIATESERVICEPARAMETERS &p = assoc->params->DULparams;
    a->calling = trim(p.callingAPTitle);
    a->called = trim(p.calledAPTitle);
    /* Without reverse lookups (global init) this is the numeric address,
     * sometimes followed by ":port"; keep the host part. */
    std::string peer(p.callingPresentationAddress);
    if (std::count(peer.begin(), peer.end(), ':') == 1)
        peer.resize(peer.find(':'));
    a->peer = peer;
    a->info.calling_ae = a->calling.c_str();
    a->info.called_ae = a->called.c_str();
    a->info.peer_host = a->peer.c_str();
    a->info.started_ms = ldct_now_ms();
}

const char *verdict_name(scp_assoc_verdict v)
{
    switch (v) {
    case SCP_ASSOC_REJECT_CALLED_AE:
        return "called AE title not recognised";
    case SCP_ASSOC_REJECT_CALLING_AE:
        return "calling AE title not recognised";
    case SCP_ASSOC_REJECT_HOST:
        return "host not allowed";
    case SCP_ASSOC_REJECT_BUSY:
        return "local limit exceeded";
    case SCP_ASSOC_REJECT_CERTIFICATE:
        return "calling AE title not recognised (bound to a TLS certificate the caller did not"
               " present)";
    default:
        return "accepted";
    }
}

/* Sends the A-ASSOCIATE-RJ of PS3.8 table 9-21 that matches the verdict
 * (ours: the AE title this node answers to, named when the called one is
 * refused). */
/* detail, when not empty, follows the reason in parentheses in the log. */
void reject(T_ASC_Association *assoc, scp_assoc_verdict v, const assoc_ctx &a,
            const std::string &detail)
{
    T_ASC_RejectParameters rj;
    rj.result = ASC_RESULT_REJECTEDPERMANENT;
    rj.source = ASC_SOURCE_SERVICEUSER;
    switch (v) {
    case SCP_ASSOC_REJECT_CALLED_AE:
        rj.reason = ASC_REASON_SU_CALLEDAETITLENOTRECOGNIZED;
        break;
    case SCP_ASSOC_REJECT_CALLING_AE:
    case SCP_ASSOC_REJECT_CERTIFICATE:
        rj.reason = ASC_REASON_SU_CALLINGAETITLENOTRECOGNIZED;
        break;
    case SCP_ASSOC_REJECT_BUSY:
        rj.result = ASC_RESULT_REJECTEDTRANSIENT;
        rj.source = ASC_SOURCE_SERVICEPROVIDER_PRESENTATION_RELATED;
        rj.reason = ASC_REASON_SP_PRES_LOCALLIMITEXCEEDED;
        break;
    default:
        rj.reason = ASC_REASON_SU_NOREASON;
        break;
    }
    log_notice("scp: association from %s (calling %s, called %s) rejected: %s%s%s%s",
               a.peer.c_str(), a.calling.c_str(), a.called.c_str(), verdict_name(v),
               detail.empty() ? "" : " (", detail.c_str(), detail.empty() ? "" : ")");
    scp__cond_err(ASC_rejectAssociation(assoc, &rj), "A-ASSOCIATE-RJ");
}

/* Closes the connection after waiting up to wait_s for the peer to close
 * its end first (after our A-RELEASE-RP or A-ASSOCIATE-RJ, as the ARTIM
 * timer lets it). DCMTK's default wait is 180 s whatever the peer does: a
 * peer that sent an A-ASSOCIATE-RQ DCMTK cannot parse, and then nothing,
 * held its connection that long, counted as waiting for its request, and
 * 32 of them stopped every other association from being accepted. */
void drop(T_ASC_Association **assoc, int wait_s)
{
    if (!*assoc)
        return;
    ASC_dropSCPAssociation(*assoc, wait_s);
    ASC_destroyAssociation(assoc);
}

/* Non-blocking mode is how DIMSE applies a timeout (always > 0 here). */
T_DIMSE_BlockingMode block_mode(const scp_server *)
{
    return DIMSE_NONBLOCKING;
}

/* ---- C-STORE ------------------------------------------------------------ */

/* Everything the C-STORE callback needs, and the strings scp_instance points
 * into (they live until store_end returns). */
struct store_ctx {
    scp_server *srv;
    const assoc_ctx *a;
    std::string path, ts;
    std::string req_class, req_inst, sop_class, sop_inst, study, series, modality, descr;
    int writeback_fd = -1; /* read-only handle on the file being received */
    DcmDataset *detail = nullptr;
    char comment[k_comment_len] = "";
};

std::string get_str(DcmItem *ds, const DcmTagKey &tag)
{
    OFString v;
    if (ds && ds->findAndGetOFString(tag, v).good())
        return std::string(v.c_str());
    return std::string();
}

/* The whole value, every component: a UID sent as "1.2.3\\4.5.6" (two
 * values where one is allowed) is invalid, not the first of them, which
 * findAndGetOFString gives. ingest refuses it, backslash and all. */
std::string get_uid(DcmItem *ds, const DcmTagKey &tag)
{
    OFString v;
    if (ds && ds->findAndGetOFStringArray(tag, v).good())
        return std::string(v.c_str());
    return std::string();
}

/* Reads the header attributes back from the received file; returns 1 when
 * the whole dataset parsed. The whole of it, not just the header: a peer may
 * flag the last fragment of a dataset that stops inside the pixel data, and
 * such an instance must be refused, not acknowledged. Values longer than
 * 4 KiB (the pixel data) are checked against the file's length but left on
 * disk, not loaded. */
int read_header(store_ctx *sc)
{
    char why[128] = "";
    if (scp__check_nesting(sc->path.c_str(), SCP__MAX_NESTING, why, sizeof why) < 0) {
        log_warn("scp: received dataset not parsed: %s", why);
        return 0;
    }
    DcmFileFormat ff;
    OFCondition c = ff.loadFile(sc->path.c_str(), EXS_Unknown, EGL_noChange, 4096, ERM_autoDetect);
    if (c.bad()) {
        scp__cond_err(c, "cannot parse the received dataset");
        return 0;
    }
    DcmDataset *ds = ff.getDataset();
    sc->sop_class = get_uid(ds, DCM_SOPClassUID);
    sc->sop_inst = get_uid(ds, DCM_SOPInstanceUID);
    sc->study = get_uid(ds, DCM_StudyInstanceUID);
    sc->series = get_uid(ds, DCM_SeriesInstanceUID);
    sc->modality = get_str(ds, DCM_Modality);
    sc->descr = get_str(ds, DCM_SeriesDescription);
    return 1;
}

void set_error_comment(store_ctx *sc, DcmDataset **detail)
{
    if (!sc->comment[0])
        return;
    sc->detail = new DcmDataset;
    /* Error Comment is LO: at most 64 characters. */
    std::string c(sc->comment);
    sc->detail->putAndInsertString(DCM_ErrorComment, c.substr(0, 64).c_str());
    *detail = sc->detail;
}

/* Records a stored instance's series for report_interrupted. */
void note_stored(const assoc_ctx *a, const std::string &series)
{
    a->last_series = series;
    auto &v = a->stored_series;
    if (std::find(v.begin(), v.end(), series) == v.end())
        v.push_back(series);
}

/* Tells the handler about a refusal for lack of resources with the series
 * stored so far (SCP_CUT_REFUSED). */
void report_refused(scp_server *srv, const assoc_ctx &a)
{
    if (!srv->h.assoc_interrupted)
        return;
    std::vector<const char *> uids;
    for (const std::string &s : a.stored_series)
        uids.push_back(s.c_str());
    srv->h.assoc_interrupted(srv->h.ctx, &a.info, uids.data(), (int)uids.size(), SCP_CUT_REFUSED);
}

/* Counts a C-STORE answered with a failure status (not success, not a
 * warning 0xBxxx). A refusal for lack of resources (0xA7xx): the sender may
 * resend, so the series it touches are held at once, before they can go
 * stable while the refused datasets are still being read off the wire. */
void note_refusal(scp_server *srv, const assoc_ctx *a, unsigned status)
{
    if (status == STATUS_Success || (status & 0xF000u) == 0xB000u)
        return;
    if ((status & 0xFF00u) != SCP_STATUS_OUT_OF_RESOURCES) {
        srv->refused_error++;
        return;
    }
    srv->refused_resources++;
    a->refused_for_resources++;
    report_refused(srv, *a);
}

unsigned finish_store(store_ctx *sc, bool write_failed)
{
    scp_instance in{};
    in.write_failed = write_failed;
    in.parsed = !write_failed && read_header(sc);
    struct stat st;
    in.file_size = stat(sc->path.c_str(), &st) == 0 ? (uint64_t)st.st_size : 0;
    in.req_sop_class_uid = sc->req_class.c_str();
    in.req_sop_instance_uid = sc->req_inst.c_str();
    in.sop_class_uid = sc->sop_class.c_str();
    in.sop_instance_uid = sc->sop_inst.c_str();
    in.study_uid = sc->study.c_str();
    in.series_uid = sc->series.c_str();
    in.modality = sc->modality.c_str();
    in.series_description = sc->descr.c_str();
    in.transfer_syntax_uid = sc->ts.c_str();
    in.file_path = sc->path.c_str();
    const unsigned status =
        sc->srv->h.store_end(sc->srv->h.ctx, &sc->a->info, &in, sc->comment, sizeof sc->comment);
    if (status == SCP_STATUS_SUCCESS)
        note_stored(sc->a, sc->series);
    return status;
}

/* Starts the kernel's writeback of what has been received so far, so the
 * fsync that makes the instance durable (ingest) waits only for the tail.
 * sync_file_range() works on the file's pages through any descriptor;
 * failures only cost that head start, so they are ignored. */
void start_writeback(store_ctx *sc)
{
    if (sc->writeback_fd < 0)
        sc->writeback_fd = open(sc->path.c_str(), O_RDONLY | O_CLOEXEC);
    if (sc->writeback_fd >= 0)
        (void)sync_file_range(sc->writeback_fd, 0, 0, SYNC_FILE_RANGE_WRITE);
}

void stop_writeback(store_ctx *sc)
{
    if (sc->writeback_fd >= 0)
        close(sc->writeback_fd);
    sc->writeback_fd = -1;
}

/* Where DIMSE_receiveDataSetInFile writes the dataset: our file, and a
 * write that fails (a full disk) is remembered, the rest dropped, but never
 * reported to DCMTK. Reported, it makes DCMTK read on for the rest of the
 * dataset, which never comes when the failed write was its last PDV: the
 * association then hangs until dimse_timeout and is aborted. This way the
 * dataset is read to its end and answered 0xA700. */
class spool_consumer : public DcmConsumer
{
  public:
    /* min_free: the bytes the file system must keep free (0: no check) */
    spool_consumer(int fd, uint64_t min_free) : fd_(fd), min_free_(min_free) {}
    OFBool good() const override
    {
        return OFTrue;
    }
    OFCondition status() const override
    {
        return EC_Normal;
    }
    OFBool isFlushed() const override
    {
        return OFTrue;
    }
    offile_off_t avail() const override
    {
        return 1 << 30;
    }
    void flush() override {}
    offile_off_t write(const void *buf, offile_off_t len) override
    {
        const char *p = static_cast<const char *>(buf);
        for (offile_off_t done = 0; !err_ && done < len;) {
            ssize_t n = ::write(fd_, p + done, (size_t)(len - done));
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                err_ = n < 0 ? errno : ENOSPC;
            else
                done += n;
        }
        unchecked_ += (uint64_t)len;
        if (!err_ && min_free_ && unchecked_ >= k_space_check_bytes)
            check_space();
        return len;
    }
    int error() const
    {
        return err_;
    }

  private:
    static const uint64_t k_space_check_bytes = 1 << 20;
    /* Below the floor the rest of the dataset is read and discarded, as on
     * a full disk. */
    void check_space()
    {
        unchecked_ = 0;
        struct statvfs st;
        if (fstatvfs(fd_, &st) == 0 && (uint64_t)st.f_bavail * st.f_frsize < min_free_)
            err_ = ENOSPC;
    }
    int fd_, err_ = 0;
    uint64_t min_free_, unchecked_ = 0;
};

class spool_stream : public DcmOutputStream
{
  public:
    explicit spool_stream(spool_consumer *c) : DcmOutputStream(c) {}
};

void store_progress(void *data, unsigned long)
{
    start_writeback(static_cast<store_ctx *>(data));
}

/* Receives the dataset after the meta header DIMSE_createFilestream wrote;
 * *write_failed when the file could not be written whole (it is then
 * removed). Returns the network's condition. */
OFCondition receive_into(scp_server *srv, T_ASC_Association *assoc, T_ASC_PresentationContextID pid,
                         T_DIMSE_C_StoreRQ *req, store_ctx *sc, bool *write_failed)
{
    const char *path = sc->path.c_str();
    DcmOutputFileStream *meta = nullptr;
    OFCondition c = DIMSE_createFilestream(path, req, assoc, pid, 1, &meta);
    delete meta; /* closes the file: preamble and meta header */
    int fd = c.good() ? open(path, O_WRONLY | O_APPEND | O_CLOEXEC) : -1;
    struct stat st;
    const uint64_t min_free_mb =
        srv->h.store_min_free_mb ? srv->h.store_min_free_mb(srv->h.ctx) : 0;
    spool_consumer cons(fd, min_free_mb * 1024 * 1024);
    spool_stream out(&cons);
    T_ASC_PresentationContextID pid_data = 0;
    c = DIMSE_receiveDataSetInFile(assoc, block_mode(srv), srv->opt.dimse_timeout_s, &pid_data,
                                   &out, store_progress, sc);
    stop_writeback(sc);
    *write_failed = fd < 0 || cons.error() != 0 || fstat(fd, &st) != 0 || st.st_size < 132;
    if (fd >= 0 && close(fd) != 0)
        *write_failed = true;
    if (c.good() && pid_data != pid)
        c = makeDcmnetCondition(DIMSEC_INVALIDPRESENTATIONCONTEXTID, OF_error,
                                "DIMSE: presentation contexts of command and data differ");
    if (c.bad() || *write_failed)
        unlink(path);
    return c;
}

/* A request's SOP Instance UID for the log: the UID, or a placeholder for
 * text that is none (a sender may put anything there, a patient ID too). */
const char *loggable_uid(const char *uid)
{
    return scp_uid_valid(uid) ? uid : "(not a valid UID, not logged)";
}

/* Answers a received dataset: store_end decides, the C-STORE-RSP tells. */
OFCondition answer_store(T_ASC_Association *assoc, T_ASC_PresentationContextID pid,
                         T_DIMSE_C_StoreRQ *req, store_ctx *sc, bool write_failed)
{
    T_DIMSE_C_StoreRSP rsp{};
    try {
        rsp.DimseStatus = (Uint16)finish_store(sc, write_failed);
    } catch (...) {
        rsp.DimseStatus = SCP_STATUS_PROCESSING_FAILURE;
        scp__strlcpy(sc->comment, "internal error", sizeof sc->comment);
    }
    if (rsp.DimseStatus != STATUS_Success)
        log_notice("scp: instance %s from %s refused: 0x%04X", loggable_uid(sc->req_inst.c_str()),
                   sc->a->calling.c_str(), rsp.DimseStatus);
    note_refusal(sc->srv, sc->a, rsp.DimseStatus);
    DcmDataset *detail = nullptr;
    set_error_comment(sc, &detail);
    return DIMSE_sendStoreResponse(assoc, pid, req, &rsp, detail);
}

/* store_begin refused: read the dataset off the wire, answer its status. */
OFCondition refuse_store(scp_server *srv, T_ASC_Association *assoc, T_ASC_PresentationContextID pid,
                         T_DIMSE_C_StoreRQ *req, unsigned status, store_ctx *sc)
{
    note_refusal(srv, sc->a, status); /* before the dataset, which may take long to read */
    DIC_UL bytes = 0, pdvs = 0;
    OFCondition c =
        DIMSE_ignoreDataSet(assoc, block_mode(srv), srv->opt.dimse_timeout_s, &bytes, &pdvs);
    if (c.bad())
        return c;
    log_notice("scp: instance %s from %s refused before reception: 0x%04X",
               loggable_uid(req->AffectedSOPInstanceUID), sc->a->calling.c_str(), status);
    T_DIMSE_C_StoreRSP rsp{};
    rsp.DimseStatus = (Uint16)status;
    DcmDataset *detail = nullptr;
    set_error_comment(sc, &detail);
    return DIMSE_sendStoreResponse(assoc, pid, req, &rsp, detail);
}

OFCondition handle_store(scp_server *srv, const assoc_ctx *a, T_ASC_Association *assoc,
                         T_ASC_PresentationContextID pid, T_DIMSE_C_StoreRQ *req)
{
    store_ctx sc;
    sc.srv = srv;
    sc.a = a;
    sc.req_class = req->AffectedSOPClassUID;
    sc.req_inst = req->AffectedSOPInstanceUID;
    T_ASC_PresentationContext pc;
    if (ASC_findAcceptedPresentationContext(assoc->params, pid, &pc).good())
        sc.ts = pc.acceptedTransferSyntax;

    char path[4096] = "";
    unsigned st =
        srv->h.store_begin(srv->h.ctx, &a->info, path, sizeof path, sc.comment, sizeof sc.comment);
    if (st == SCP_STATUS_SUCCESS && !path[0]) {
        st = SCP_STATUS_OUT_OF_RESOURCES;
        scp__strlcpy(sc.comment, "no storage path", sizeof sc.comment);
    }
    OFCondition c;
    if (st != SCP_STATUS_SUCCESS) {
        c = refuse_store(srv, assoc, pid, req, st, &sc);
    } else {
        sc.path = path;
        bool write_failed = false;
        c = receive_into(srv, assoc, pid, req, &sc, &write_failed);
        if (c.good())
            c = answer_store(assoc, pid, req, &sc, write_failed);
    }
    delete sc.detail;
    return c;
}

/* ---- association thread ------------------------------------------------- */

int negotiate(scp_server *srv, T_ASC_Association *assoc)
{
    const char *verification[] = {UID_VerificationSOPClass};
    OFCondition c = ASC_acceptContextsWithPreferredTransferSyntaxes(
        assoc->params, verification, 1, k_transfer_syntaxes, k_n_transfer_syntaxes);
    if (c.good())
        c = ASC_acceptContextsWithPreferredTransferSyntaxes(
            assoc->params, dcmAllStorageSOPClassUIDs, numberOfDcmAllStorageSOPClassUIDs,
            k_transfer_syntaxes, k_n_transfer_syntaxes);
    if (c.good())
        c = ASC_setAPTitles(assoc->params, nullptr, nullptr, srv->ae_title.c_str());
    if (c.good())
        c = ASC_acknowledgeAssociation(assoc);
    return scp__cond_err(c, "association negotiation");
}

/* The slot of the acceptor thread running on this thread, for the accept
 * hook and for stop_reading. */
thread_local assoc_slot *t_slot = nullptr;

/* A peer that made DIMSE fail (a timeout, a broken PDU) may never close its
 * end: after sending the A-ABORT, ASC_abortAssociation waits for the peer
 * to close for up to the ARTIM (ACSE) timeout, and the association's slot
 * stays taken meanwhile (a peer stalled mid-dataset held it for
 * dimse_timeout + acse_timeout). Shutting our reading side down first ends
 * that wait at once; the A-ABORT still goes out. */
void stop_reading(scp_server *srv)
{
    std::lock_guard<std::mutex> lk(srv->mu);
    if (t_slot && t_slot->fd >= 0)
        shutdown(t_slot->fd, SHUT_RD);
}

/* Whether "no data" from DIMSE_receiveCommand after waited_ms is the
 * sender's silence for the whole dimse_timeout (logged when it is not). */
bool silent_for_timeout(const scp_server *srv, const assoc_ctx *a, int64_t waited_ms)
{
    if (scp_silence_was_idle(waited_ms, srv->opt.dimse_timeout_s))
        return true;
    log_warn("scp: association with %s: no data after %.1f s, before dimse_timeout (%d s): "
             "the connection ended early, counted as cut off",
             a->calling.c_str(), waited_ms / 1000.0, srv->opt.dimse_timeout_s);
    return false;
}

/* Serves DIMSE commands until release or abort or error. Returns false when
 * a transfer may have been cut short: an abort, or an error other than
 * silence between commands for the whole dimse_timeout (a sender that
 * leaves an association open after its last instance). */
bool serve(scp_server *srv, const assoc_ctx *a, T_ASC_Association *assoc)
{
    for (;;) {
        T_DIMSE_Message msg;
        T_ASC_PresentationContextID pid = 0;
        DcmDataset *detail = nullptr;
        const int64_t t0 = ldct_mono_ms();
        OFCondition c = DIMSE_receiveCommand(assoc, block_mode(srv), srv->opt.dimse_timeout_s, &pid,
                                             &msg, &detail);
        delete detail;
        if (c == DUL_PEERREQUESTEDRELEASE) {
            ASC_acknowledgeRelease(assoc);
            return true;
        }
        if (c == DUL_PEERABORTEDASSOCIATION) {
            log_info("scp: association with %s aborted by the peer", a->calling.c_str());
            return false;
        }
        const bool idle =
            c == DIMSE_NODATAAVAILABLE && silent_for_timeout(srv, a, ldct_mono_ms() - t0);
        if (c.good() && msg.CommandField == DIMSE_C_ECHO_RQ)
            c = DIMSE_sendEchoResponse(assoc, pid, &msg.msg.CEchoRQ, STATUS_Success, nullptr);
        else if (c.good() && msg.CommandField == DIMSE_C_STORE_RQ)
            c = handle_store(srv, a, assoc, pid, &msg.msg.CStoreRQ);
        else if (c.good()) {
            log_warn("scp: unsupported DIMSE command 0x%04X from %s", (unsigned)msg.CommandField,
                     a->calling.c_str());
            c = DIMSE_BADCOMMANDTYPE;
        }
        if (c.bad()) {
            std::string what = "association with " + a->calling + " ended by an error";
            scp__cond_err(c, what.c_str());
            stop_reading(srv);
            ASC_abortAssociation(assoc);
            return idle;
        }
    }
}

/* Tells the handler at the end which series an association may have left
 * incomplete: after refusals for lack of resources every series it stored
 * (again: series stored after the last refusal are not held yet); after a
 * cut, the series of its last stored instance (the series before it were
 * complete: senders send series one after the other). */
void report_interrupted(scp_server *srv, const assoc_ctx &a, bool cut)
{
    if (a.refused_for_resources > 0) {
        report_refused(srv, a);
    } else if (cut && !a.last_series.empty() && srv->h.assoc_interrupted) {
        const char *uid = a.last_series.c_str();
        srv->h.assoc_interrupted(srv->h.ctx, &a.info, &uid, 1, SCP_CUT_ABORTED);
    }
}

enum class slot_verdict { taken, stopping, node_full, host_full };

/* Counts one more association from host against max_associations and
 * max_associations_per_host (shared with the node's other port), unless
 * that would exceed either. */
slot_verdict take_slot(scp_server *srv, const std::string &host)
{
    assoc_limit &l = *srv->limit;
    std::lock_guard<std::mutex> lk(l.mu);
    if (l.total >= srv->opt.max_associations)
        return slot_verdict::node_full;
    const int cap = srv->opt.max_associations_per_host;
    auto it = l.by_host.find(host);
    if (cap > 0 && it != l.by_host.end() && it->second >= cap)
        return slot_verdict::host_full;
    if (it == l.by_host.end())
        it = l.by_host.emplace(host, 0).first; /* may throw: nothing counted yet */
    it->second++;
    l.total++;
    return slot_verdict::taken;
}

/* Gives back what take_slot counted for host. */
void give_slot(scp_server *srv, const std::string &host)
{
    assoc_limit &l = *srv->limit;
    std::lock_guard<std::mutex> lk(l.mu);
    l.total--;
    auto it = l.by_host.find(host);
    if (it != l.by_host.end() && --it->second <= 0)
        l.by_host.erase(it);
}

/* Runs f; an exception from it (an allocation that failed) is logged and
 * aborts the association with an A-ABORT, its reading side shut first so
 * that no wait for a peer that stays follows. false after an exception. */
template <class F> bool abort_on_exception(scp_server *srv, T_ASC_Association *assoc, F f)
{
    const char *peer = assoc->params->DULparams.callingPresentationAddress;
    try {
        f();
        return true;
    } catch (const std::exception &e) {
        log_err("scp: association from %s aborted: %s", peer, e.what());
    } catch (...) {
        log_err("scp: association from %s aborted: an exception", peer);
    }
    stop_reading(srv);
    ASC_abortAssociation(assoc);
    return false;
}

/* serve, where an exception counts as a cut: the series it was storing is
 * held as interrupted rather than processed short, and the sender sends
 * again. */
bool serve_or_abort(scp_server *srv, const assoc_ctx *a, T_ASC_Association *assoc)
{
    bool clean = false;
    return abort_on_exception(srv, assoc, [&] { clean = serve(srv, a, assoc); }) && clean;
}

/* One association counted in max_associations (and per host) and in
 * srv->active, given back however its thread leaves (an exception
 * included), so that neither a slot of the shared limit nor stop's wait for
 * active associations leaks. */
class counted_association
{
  public:
    counted_association(scp_server *srv, const std::string &host) : srv_(srv), host_(host) {}
    counted_association(const counted_association &) = delete;
    counted_association &operator=(const counted_association &) = delete;

    /* Takes a slot unless stopping or full. */
    slot_verdict take()
    {
        std::lock_guard<std::mutex> lk(srv_->mu);
        const slot_verdict v = srv_->stopping ? slot_verdict::stopping : take_slot(srv_, host_);
        held_ = v == slot_verdict::taken;
        srv_->active += held_;
        return v;
    }

    ~counted_association()
    {
        if (!held_)
            return;
        give_slot(srv_, host_);
        std::lock_guard<std::mutex> lk(srv_->mu);
        srv_->active--;
        srv_->cv.notify_all();
    }

  private:
    scp_server *srv_;
    const std::string host_; /* a copy: give_slot needs it after take's caller */
    bool held_ = false;
};

/* Why an association was refused as busy, for the log. */
std::string busy_detail(const scp_server *srv, slot_verdict v, const std::string &host)
{
    if (v == slot_verdict::stopping)
        return "the node is shutting down";
    if (v == slot_verdict::host_full)
        return "all max_associations_per_host = " +
               std::to_string(srv->opt.max_associations_per_host) + " in use by " + host;
    return "all max_associations = " + std::to_string(srv->opt.max_associations) + " in use";
}

/* What the log adds to a refusal: the AE title we answer to, or the
 * certificate a bound calling AE title came with. */
std::string verdict_detail(const scp_server *srv, scp_assoc_verdict v, const assoc_ctx &a)
{
    if (v == SCP_ASSOC_REJECT_CALLED_AE)
        return "this node is " + srv->ae_title;
    if (v != SCP_ASSOC_REJECT_CERTIFICATE)
        return std::string();
    if (!a.info.tls)
        return "it called without TLS";
    if (!a.tls_peer)
        return "it sent no certificate";
    const std::string alt = scp__tls_alt_names(a.tls_peer.get());
    return "its certificate is " + scp__tls_subject(a.tls_peer.get()) +
           (alt.empty() ? "" : ", subjectAltName " + alt);
}

/* Runs one received association request to its end: the busy check, the
 * caller's verdict, negotiation and the DIMSE loop. */
void run_association(scp_server *srv, T_ASC_Association *assoc)
{
    assoc_ctx a;
    fill_assoc_ctx(assoc, srv->opt.tls != nullptr, &a);
    counted_association counted(srv, a.peer);
    const slot_verdict slot = counted.take();
    if (slot != slot_verdict::taken) {
        srv->rejected++;
        reject(assoc, SCP_ASSOC_REJECT_BUSY, a, busy_detail(srv, slot, a.peer));
        return;
    }
    scp_assoc_verdict v =
        srv->h.check_association ? srv->h.check_association(srv->h.ctx, &a.info) : SCP_ASSOC_ACCEPT;
    if (v != SCP_ASSOC_ACCEPT) {
        srv->rejected++;
        reject(assoc, v, a, verdict_detail(srv, v, a));
    } else if (negotiate(srv, assoc) == 0) {
        srv->accepted++;
        log_info("scp: association from %s (calling %s) accepted%s", a.peer.c_str(),
                 a.calling.c_str(), srv->opt.tls ? " over TLS" : "");
        report_interrupted(srv, a, !serve_or_abort(srv, &a, assoc));
    }
}

/* Waits up to timeout_s for the peer to close its end of assoc's
 * connection, in slices of 100 ms so that stop's abort (srv->quit) ends the
 * wait at once. What the peer still sends is left unread, as DCMTK's own
 * wait does. */
void wait_for_peer_close(scp_server *srv, T_ASC_Association *assoc, int timeout_s)
{
    auto *view = dynamic_cast<socket_view *>(DUL_getTransportConnection(assoc->DULassociation));
    const int fd = view ? view->socket_fd() : -1;
    if (fd < 0)
        return;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    while (!srv->quit && std::chrono::steady_clock::now() < deadline) {
        pollfd p = {fd, POLLRDHUP, 0};
        const int r = poll(&p, 1, 100);
        if (r < 0 ? errno != EINTR : r > 0)
            return; /* closed (RDHUP, HUP, ERR, NVAL) or poll failed */
    }
}

/* Drops an association after waiting up to acse_timeout for the peer to
 * close, so that it reads our last PDU (A-ASSOCIATE-RJ, A-RELEASE-RP) before
 * the connection goes; in at most k_max_closing threads at once. Rejected
 * peers that never close would otherwise hold a thread each, uncounted:
 * a flood of them grew the daemon by a thread per connection. Past the
 * limit, and once stopping, the connection is closed at once (a peer still
 * reads a PDU that reached it before the close): a stop is never held up
 * by peers that do not close. */
void drop_when_closed(scp_server *srv, T_ASC_Association **assoc)
{
    bool wait;
    {
        std::lock_guard<std::mutex> lk(srv->mu);
        wait = !srv->stopping && srv->closing < k_max_closing;
        srv->closing += wait;
    }
    if (wait && *assoc)
        wait_for_peer_close(srv, *assoc, srv->opt.acse_timeout_s);
    drop(assoc, 0);
    if (wait) {
        std::lock_guard<std::mutex> lk(srv->mu);
        srv->closing--;
    }
}

/* ---- acceptance --------------------------------------------------------- */

/* The numeric address of a connection's peer into buf ("?" when unknown). */
void peer_address(int fd, char *buf, size_t len)
{
    sockaddr_storage sa{};
    socklen_t sl = sizeof sa;
    const void *addr = nullptr;
    if (getpeername(fd, reinterpret_cast<sockaddr *>(&sa), &sl) == 0) {
        if (sa.ss_family == AF_INET)
            addr = &reinterpret_cast<sockaddr_in *>(&sa)->sin_addr;
        else if (sa.ss_family == AF_INET6)
            addr = &reinterpret_cast<sockaddr_in6 *>(&sa)->sin6_addr;
    }
    if (!addr || !inet_ntop(sa.ss_family, addr, buf, (socklen_t)len))
        scp__strlcpy(buf, "?", len);
}

/* A peer's address as one key for IPv4 and IPv4-mapped IPv6. */
std::string host_key(const char *peer)
{
    return std::string(strncmp(peer, "::ffff:", 7) == 0 ? peer + 7 : peer);
}

/* Counts an early refusal not logged on its own line, by address. */
void count_unlogged_refusal(scp_server *srv, const char *peer)
{
    srv->refusals_unlogged++;
    const std::string key = host_key(peer);
    auto it = srv->unlogged_by_host.find(key);
    if (it != srv->unlogged_by_host.end())
        it->second++;
    else if (srv->unlogged_by_host.size() < k_refusal_hosts_kept)
        srv->unlogged_by_host.emplace(key, 1);
}

/* "127.0.0.2 (23), 10.0.0.7 (2), 10.0.0.9 (2) and 4 from other
 * address(es)": where the unlogged refusals came from, busiest first (ties
 * by address), the rest as one count of connections; empties the count. */
std::string take_refusal_sources(scp_server *srv)
{
    std::vector<std::pair<std::string, long long>> v(srv->unlogged_by_host.begin(),
                                                     srv->unlogged_by_host.end());
    std::sort(v.begin(), v.end(), [](const auto &a, const auto &b) {
        return a.second != b.second ? a.second > b.second : a.first < b.first;
    });
    std::string out;
    long long named = 0;
    for (size_t i = 0; i < v.size() && i < k_refusal_hosts_named; i++) {
        out += (i ? ", " : "") + v[i].first + " (" + std::to_string(v[i].second) + ")";
        named += v[i].second;
    }
    if (named < srv->refusals_unlogged)
        out += " and " + std::to_string(srv->refusals_unlogged - named) + " from other address(es)";
    srv->unlogged_by_host.clear();
    srv->refusals_unlogged = 0;
    return out;
}

/* Logs a connection closed right after accept, at most one line per
 * k_refusal_log_ms (a flood of connections must not flood the log); the
 * refusals in between are counted by address and named with the next
 * line. Called with srv->mu held. */
void log_early_refusal(scp_server *srv, const char *peer, const char *why)
{
    const int64_t now = ldct_mono_ms();
    if (srv->refusal_logged_ms && now - srv->refusal_logged_ms < k_refusal_log_ms) {
        count_unlogged_refusal(srv, peer);
        return;
    }
    if (srv->refusals_unlogged) {
        const long long n = srv->refusals_unlogged;
        log_warn("scp: connection from %s closed before its association request: %s "
                 "(and %lld more closed early since the last such line, from %s)",
                 peer, why, n, take_refusal_sources(srv).c_str());
    } else
        log_warn("scp: connection from %s closed before its association request: %s", peer, why);
    srv->refusal_logged_ms = now;
}

/* Logs the early refusals not logged yet, once k_refusal_log_ms has passed
 * since the last such line (so the count of a flood that stopped is not
 * lost); called by the listener about once a second, with srv->mu held. */
void flush_early_refusals(scp_server *srv)
{
    const int64_t now = ldct_mono_ms();
    if (!srv->refusals_unlogged || now - srv->refusal_logged_ms < k_refusal_log_ms)
        return;
    const long long n = srv->refusals_unlogged;
    log_warn("scp: %lld more connection(s) closed before their association request since the"
             " last such line, from %s",
             n, take_refusal_sources(srv).c_str());
    srv->refusal_logged_ms = now;
}

/* Why a connection just accepted from slot's peer is closed at once, or
 * nullptr when it may send its request (then it is counted against its
 * address's share of the waiting connections). One address may hold more
 * than its share while at most half of the places are taken, so that a
 * sender opening many TLS associations at once (each waits through its
 * handshake) is not cut short on a quiet node. Called with srv->mu held. */
const char *early_refusal(scp_server *srv, assoc_slot *slot, bool host_allowed)
{
    if (!host_allowed)
        return "host not in allowed_hosts";
    int &n = srv->pending_by_host[host_key(slot->peer)];
    if (n >= k_max_pending_per_host && srv->pending > k_max_pending / 2)
        return "too many connections from it waiting for their association request";
    n++;
    slot->host_counted = true;
    return nullptr;
}

/* Gives back what on_accepted counted for slot, once; called with srv->mu
 * held. */
void release_pending(scp_server *srv, assoc_slot *slot)
{
    if (slot->pending_done)
        return;
    slot->pending_done = true;
    srv->pending--;
    if (!slot->host_counted)
        return;
    slot->host_counted = false;
    auto it = srv->pending_by_host.find(host_key(slot->peer));
    if (it != srv->pending_by_host.end() && --it->second <= 0)
        srv->pending_by_host.erase(it);
}

/* on_accepted's work; may throw (allocation). */
void note_accepted(scp_server *srv, int fd)
{
    if (t_slot)
        peer_address(fd, t_slot->peer, sizeof t_slot->peer);
    const bool host_allowed = !t_slot || !srv->h.allow_host ||
                              srv->h.allow_host(srv->h.ctx, host_key(t_slot->peer).c_str());
    std::lock_guard<std::mutex> lk(srv->mu);
    if (t_slot) {
        t_slot->accepted = true;
        t_slot->fd = fd;
    }
    srv->acceptor_waiting = false;
    srv->pending++;
    const char *why = t_slot && !srv->aborting ? early_refusal(srv, t_slot, host_allowed) : nullptr;
    if (why) {
        t_slot->closed_early = true;
        srv->rejected++;
        log_early_refusal(srv, t_slot->peer, why);
    }
    if (srv->aborting || why)
        shutdown(fd, SHUT_RDWR);
    srv->cv.notify_all();
}

/* Called by DCMTK (in the acceptor thread) right after accept() and before it
 * reads the A-ASSOCIATE-RQ: records the socket for stop, lets the listener
 * start the next acceptor, and shuts the socket down at once when stopping,
 * when its host may not call, or when its host already has its share of
 * connections waiting for their request. A connection closed early is
 * never read (refused_early_connection). Nothing is thrown into DCMTK: a
 * failure closes the connection. */
void on_accepted(scp_server *srv, int fd)
{
    try {
        note_accepted(srv, fd);
    } catch (...) {
        if (t_slot)
            t_slot->closed_early = true;
        shutdown(fd, SHUT_RDWR);
    }
}

/* The connection DCMTK gets for one closed early: it reads nothing of what
 * the peer may have sent, on either port (no TLS handshake either). */
bool closed_early()
{
    return t_slot && t_slot->closed_early;
}

/* Follows the PDU and PDV headers of what a peer sends and says when a DIMSE
 * command message grows past k_max_command bytes. DCMTK parses a command set
 * recursively, so a command nesting 100000 sequences overflows the thread's
 * stack before any of our code sees it; real command sets are under 1 KiB.
 * Only headers are read (6 bytes of each PDU, 6 of each PDV); data is
 * skipped by count. The first PDU, when it is an A-ASSOCIATE-RQ within
 * DCMTK's size limit for it, is kept whole and its items are checked
 * before its last bytes reach DCMTK (scp__assoc_rq_fault: only requests
 * DCMTK refuses too, whose lists it would leak). One per connection, fed
 * by its reading thread only. */
class pdu_guard
{
  public:
    /* false once the stream holds a command message over the limit or a
     * refused A-ASSOCIATE-RQ (then rq_fault() says why) */
    bool feed(const unsigned char *p, size_t n);
    const char *rq_fault() const
    {
        return rq_fault_;
    }

  private:
    static uint32_t be32(const unsigned char *b)
    {
        return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
    }
    size_t collect(const unsigned char *p, size_t n, size_t limit);
    bool pdv_header();
    unsigned char hdr_[6] = {};
    size_t have_ = 0;       /* header bytes collected (PDU or PDV header) */
    bool in_pdu_ = false;   /* a PDU header was read: its body follows */
    bool pdata_ = false;    /* the PDU is a P-DATA-TF (PDV items) */
    uint32_t pdu_left_ = 0; /* body bytes of the PDU not yet seen */
    uint32_t pdv_left_ = 0; /* data bytes of the current PDV not yet seen */
    size_t cmd_ = 0;        /* bytes of the command message being received */
    bool first_ = true;     /* no PDU header read yet */
    bool keep_rq_ = false;  /* the PDU is the A-ASSOCIATE-RQ being kept */
    std::vector<unsigned char> rq_;
    const char *rq_fault_ = nullptr;
};

const size_t k_max_command = 65536;

/* Copies up to `limit` header bytes; returns how many it took. */
size_t pdu_guard::collect(const unsigned char *p, size_t n, size_t limit)
{
    size_t take = std::min(n, std::min(limit, sizeof hdr_ - have_));
    memcpy(hdr_ + have_, p, take);
    have_ += take;
    return take;
}

/* A complete PDV header: counts a command fragment. */
bool pdu_guard::pdv_header()
{
    const uint32_t len = be32(hdr_);
    const unsigned char mch = hdr_[5];
    have_ = 0;
    pdv_left_ = len >= 2 ? len - 2 : 0;
    if (!(mch & 1))
        return true;
    cmd_ += pdv_left_;
    if (cmd_ > k_max_command)
        return false;
    if (mch & 2)
        cmd_ = 0; /* last fragment: the next command starts afresh */
    return true;
}

bool pdu_guard::feed(const unsigned char *p, size_t n)
{
    while (n > 0) {
        size_t used;
        if (!in_pdu_) {
            used = collect(p, n, sizeof hdr_);
            if (have_ == sizeof hdr_) {
                pdata_ = hdr_[0] == 0x04;
                pdu_left_ = be32(hdr_ + 2);
                in_pdu_ = pdu_left_ > 0;
                /* DCMTK refuses a larger request unread (dcmAssociatePDUSizeLimit). */
                keep_rq_ = first_ && hdr_[0] == 0x01 && in_pdu_ &&
                           pdu_left_ <= dcmAssociatePDUSizeLimit.get();
                first_ = false;
                have_ = 0;
                pdv_left_ = 0;
            }
        } else if (pdata_ && pdv_left_ == 0) {
            used = collect(p, n, pdu_left_);
            pdu_left_ -= (uint32_t)used;
            if (have_ == sizeof hdr_ && !pdv_header())
                return false;
        } else {
            uint32_t body = pdata_ ? std::min(pdv_left_, pdu_left_) : pdu_left_;
            used = std::min(n, (size_t)body);
            pdu_left_ -= (uint32_t)used;
            if (keep_rq_)
                rq_.insert(rq_.end(), p, p + used);
            if (pdata_)
                pdv_left_ -= (uint32_t)used;
        }
        if (in_pdu_ && pdu_left_ == 0) { /* the PDU ends (a torn PDV is DCMTK's to refuse) */
            in_pdu_ = false;
            have_ = 0;
            pdv_left_ = 0;
            if (keep_rq_) {
                keep_rq_ = false;
                rq_fault_ = scp__assoc_rq_fault(rq_.data(), rq_.size());
                std::vector<unsigned char>().swap(rq_);
                if (rq_fault_)
                    return false;
            }
        }
        p += used;
        n -= used;
    }
    return true;
}

/* A connection (TCP, or TLS: then what it decrypted) whose reads pass
 * through a pdu_guard: an oversized command message or a refused
 * A-ASSOCIATE-RQ fails the read and shuts the socket, so DCMTK aborts the
 * association (or drops the connection) instead of parsing it. */
template <class Base> class guarded_connection : public Base, public socket_view
{
  public:
    template <class... A> explicit guarded_connection(A... a) : Base(a...) {}
    int socket_fd() override
    {
        return (int)this->getSocket();
    }
    ssize_t read(void *buf, size_t nbyte) override
    {
        if (closed_early()) { /* on_accepted refused it: read nothing */
            errno = ECONNRESET;
            return -1;
        }
        ssize_t r = Base::read(buf, nbyte);
        if (r > 0 && !guard_.feed(static_cast<const unsigned char *>(buf), (size_t)r)) {
            if (guard_.rq_fault()) {
                char peer[INET6_ADDRSTRLEN] = "?";
                peer_address((int)this->getSocket(), peer, sizeof peer);
                log_warn("scp: association request from %s refused before DCMTK reads it: %s "
                         "(DCMTK refuses it too, after building lists it leaks); closing the "
                         "connection",
                         peer, guard_.rq_fault());
                if (t_slot)
                    t_slot->rq_refused = true;
            } else {
                log_warn("scp: a DIMSE command message over %zu bytes: closing the connection",
                         k_max_command);
            }
            shutdown((int)this->getSocket(), SHUT_RDWR);
            errno = EPROTO;
            return -1;
        }
        return r;
    }

  private:
    pdu_guard guard_;
};

/* The plain TCP transport layer plus the accept hook and the command guard;
 * DCMTK owns it once set on the network (ASC_setTransportLayer with
 * takeover). */
class accept_layer : public DcmTransportLayer
{
  public:
    explicit accept_layer(scp_server *srv) : srv_(srv) {}
    DcmTransportConnection *createConnection(DcmNativeSocketType sock, OFBool secure) override
    {
        on_accepted(srv_, (int)sock);
        if (secure && !closed_early())
            return nullptr; /* a plain listener */
        return new guarded_connection<DcmTCPConnection>(sock);
    }

  private:
    scp_server *srv_;
};

/* The TLS transport layer (scp__tls_configure) with the same hook
 * and guard; DCMTK runs the handshake on the connection before it reads the
 * A-ASSOCIATE-RQ, so a peer that fails it is dropped as an unreadable
 * request. The handshake waits at most the ACSE timeout, as a plain
 * connection's A-ASSOCIATE-RQ does. */
class tls_accept_layer : public DcmTLSTransportLayer
{
  public:
    explicit tls_accept_layer(scp_server *srv)
        : DcmTLSTransportLayer(NET_ACCEPTOR, nullptr, OFFalse), srv_(srv)
    {
    }
    DcmTransportConnection *createConnection(DcmNativeSocketType sock, OFBool secure) override
    {
        on_accepted(srv_, (int)sock);
        if (closed_early()) /* no handshake: nothing of the peer's is read */
            return new guarded_connection<DcmTCPConnection>(sock);
        if (!secure)
            return nullptr; /* a TLS listener */
        std::shared_ptr<DcmTLSTransportLayer> reloaded;
        {
            std::lock_guard<std::mutex> g(srv_->tls_lock);
            reloaded = srv_->tls_ctx;
        }
        /* The connection's SSL holds its own reference to the context, so
         * a later reload may drop this one while the association runs. */
        SSL_CTX *ctx = reloaded ? reloaded->getNativeHandle() : getNativeHandle();
        return scp__tls_connection<guarded_connection<DcmTLSConnection>>(ctx, sock,
                                                                         srv_->opt.acse_timeout_s);
    }

  private:
    scp_server *srv_;
};

/* Logs why a connection brought no association request, naming its peer. */
void log_accept_error(const OFCondition &c, const assoc_slot *slot)
{
    if (!slot->accepted) {
        scp__cond_err(c, "accepting a connection");
        return;
    }
    const std::string what = std::string("receiving an association request from ") + slot->peer;
    scp__cond_err(c, what.c_str());
}

/* Waits for one connection and reads its association request; returns the
 * association (nullptr when quitting or when the connection brought none). */
T_ASC_Association *accept_one(scp_server *srv, assoc_slot *slot)
{
    while (!srv->quit) {
        T_ASC_Association *assoc = nullptr;
        OFCondition c =
            ASC_receiveAssociation(srv->net, &assoc, (long)srv->opt.max_pdu, nullptr, nullptr,
                                   srv->opt.tls ? OFTrue : OFFalse, DUL_NOBLOCK, k_listen_poll_s);
        if (c.good() && slot->accepted)
            return assoc;
        if (c != DUL_NOASSOCIATIONREQUEST && !slot->rq_refused && !slot->closed_early)
            log_accept_error(c, slot); /* else the guard or on_accepted said why */
        srv->failed += slot->accepted && !slot->closed_early; /* before the peer sees the close */
        drop(&assoc, 0); /* an unreadable request: nothing to wait for */
        if (slot->accepted)
            return nullptr;
        if (c != DUL_NOASSOCIATIONREQUEST) /* e.g. out of descriptors: no spin */
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return nullptr;
}

/* run_association, where an exception (in the caller's verdict, the
 * negotiation or the report of a cut) aborts the association: its slot is
 * given back and its socket dropped below like any other, and the peer
 * learns at once. */
void run_association_or_abort(scp_server *srv, T_ASC_Association *assoc)
{
    abort_on_exception(srv, assoc, [&] { run_association(srv, assoc); });
}

void acceptor_run(scp_server *srv, assoc_slot *slot)
{
    T_ASC_Association *assoc = accept_one(srv, slot);
    if (slot->accepted) {
        std::lock_guard<std::mutex> lk(srv->mu);
        release_pending(srv, slot);
    }
    if (!assoc)
        return;
    /* DCMTK reports a connection closed before any A-ASSOCIATE-RQ as a
     * success with empty AE titles; AE titles are never empty in a real
     * request, so there is nobody to answer. */
    if (slot->closed_early)
        ; /* on_accepted said why */
    else if (!assoc->params->DULparams.calledAPTitle[0] ||
             !assoc->params->DULparams.callingAPTitle[0])
        log_debug("scp: connection from %s closed without an association request",
                  assoc->params->DULparams.callingPresentationAddress);
    else
        run_association_or_abort(srv, assoc);
    std::unique_lock<std::mutex> lk(srv->mu);
    slot->fd = -1; /* before DCMTK closes it: stop must not shut a reused fd */
    lk.unlock();
    drop_when_closed(srv, &assoc);
}

void acceptor_main(scp_server *srv, assoc_slot *slot)
{
    t_slot = slot;
    try {
        acceptor_run(srv, slot);
    } catch (...) {
        log_err("scp: association thread failed (exception)");
    }
    std::lock_guard<std::mutex> lk(srv->mu); /* so stop's wait sees it */
    if (slot->accepted)
        release_pending(srv, slot); /* an exception came before acceptor_run's */
    slot->fd = -1;
    if (!slot->accepted)
        srv->acceptor_waiting = false;
    slot->done = true;
    srv->cv.notify_all();
}

/* ---- listener ----------------------------------------------------------- */

/* Joins finished threads; called with srv->mu held. */
void reap_finished(scp_server *srv)
{
    for (auto it = srv->slots.begin(); it != srv->slots.end();) {
        if ((*it)->done) {
            (*it)->thread.join();
            it = srv->slots.erase(it);
        } else {
            ++it;
        }
    }
}

/* Starts an acceptor thread; called with srv->mu held. */
void start_acceptor(scp_server *srv)
{
    std::unique_ptr<assoc_slot> slot(new assoc_slot);
    try {
        slot->thread = std::thread(acceptor_main, srv, slot.get());
    } catch (...) {
        log_err("scp: cannot start an acceptor thread");
        return;
    }
    srv->acceptor_waiting = true;
    srv->slots.push_back(std::move(slot));
}

/* Keeps exactly one acceptor waiting for a connection (while fewer than
 * k_max_pending connections wait for their request) and reaps threads. */
void listen_loop(scp_server *srv)
{
    std::unique_lock<std::mutex> lk(srv->mu);
    while (!srv->quit) {
        reap_finished(srv);
        flush_early_refusals(srv);
        if (!srv->acceptor_waiting && srv->pending < k_max_pending)
            start_acceptor(srv);
        srv->cv.wait_for(lk, std::chrono::seconds(k_listen_poll_s));
    }
}

void listener_main(scp_server *srv)
{
    try {
        listen_loop(srv);
    } catch (...) {
        log_err("scp: listener failed (exception); no longer accepting associations");
    }
}

void copy_tls(scp_server *srv, const scp_tls *t)
{
    srv->tls_certificate = t->certificate ? t->certificate : "";
    srv->tls_private_key = t->private_key ? t->private_key : "";
    srv->tls_ca = t->ca_file ? t->ca_file : "";
    srv->tls_crl = t->crl_file ? t->crl_file : "";
    srv->tls.certificate = srv->tls_certificate.c_str();
    srv->tls.private_key = srv->tls_private_key.c_str();
    srv->tls.ca_file = srv->tls_ca.c_str();
    srv->tls.crl_file = srv->tls_crl.c_str();
    srv->tls.require_peer = t->require_peer;
    srv->tls.legacy = t->legacy;
    srv->opt.tls = &srv->tls;
}

/* Our transport layer on srv->net (DCMTK owns it): plain, or TLS with the
 * files loaded now (a file that does not load stops the start, logged). */
int install_layer(scp_server *srv)
{
    DcmTransportLayer *layer;
    if (srv->opt.tls) {
        scp__tls_init();
        std::unique_ptr<tls_accept_layer> t(new tls_accept_layer(srv));
        char why[512] = "";
        int rc = scp__tls_configure(*t, &srv->tls, 1, why, sizeof why);
        if (rc) {
            log_err("scp: port %d: %s", srv->opt.port, why);
            return rc;
        }
        layer = t.release();
    } else {
        layer = new accept_layer(srv);
    }
    return scp__cond_err(ASC_setTransportLayer(srv->net, layer, 1),
                         "cannot install the transport layer");
}

int check_options(const scp_server_options *o)
{
    if (!o->ae_title || !o->ae_title[0] || strlen(o->ae_title) > 16)
        return -EINVAL;
    if (o->port < 0 || o->port > 65535 || o->max_associations <= 0)
        return -EINVAL;
    return 0;
}

/* Waits until no association runs or the deadline passes. */
void wait_idle(scp_server *srv, std::chrono::steady_clock::time_point deadline)
{
    std::unique_lock<std::mutex> lk(srv->mu);
    srv->cv.wait_until(lk, deadline, [srv] { return srv->active == 0; });
}

/* Shuts the sockets of the remaining connections down (associations being
 * served and connections still waiting for their request): their threads
 * see the connection closed and end. Connections accepted from now on are
 * shut down by the accept hook. */
void abort_remaining(scp_server *srv)
{
    std::lock_guard<std::mutex> lk(srv->mu);
    srv->aborting = true;
    srv->quit = true; /* acceptor and listener leave their loops */
    int n = 0;
    for (auto &s : srv->slots) {
        if (!s->done && s->fd >= 0) {
            shutdown(s->fd, SHUT_RDWR);
            n++;
        }
    }
    srv->cv.notify_all();
    if (n)
        log_warn("scp: aborted %d connection(s) still open after the grace period", n);
}

void join_all(scp_server *srv)
{
    std::list<std::unique_ptr<assoc_slot>> slots;
    {
        std::lock_guard<std::mutex> lk(srv->mu);
        slots.swap(srv->slots);
    }
    for (auto &s : slots)
        s->thread.join();
}

/* Stops every started server of srvs: each phase for all of them before
 * the next, so that one grace period and one abort cover them all. */
void stop_all(scp_server *const *srvs, int n, int grace_s)
{
    scp_server *live[k_max_stop]; /* no allocation: a stop must not throw midway */
    int m = 0;
    for (int i = 0; i < n && m < k_max_stop; i++)
        if (srvs[i] && srvs[i]->started && !srvs[i]->stopped)
            live[m++] = srvs[i];
    for (int i = 0; i < m; i++)
        live[i]->stopping = true; /* from now on every request gets a transient reject */
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(grace_s > 0 ? grace_s : 0);
    for (int i = 0; i < m; i++)
        wait_idle(live[i], deadline);
    for (int i = 0; i < m; i++)
        abort_remaining(live[i]);
    for (int i = 0; i < m; i++) {
        live[i]->listener.join(); /* starts no thread from now on */
        join_all(live[i]);
        ASC_dropNetwork(&live[i]->net);
        live[i]->stopped = true;
        log_info("scp: server on port %d stopped", live[i]->opt.port);
    }
}

} // namespace

extern "C" int scp_server_new(const scp_server_options *opt, const scp_handlers *h,
                              scp_server **out)
{
    try {
        *out = nullptr;
        if (!opt || !h || !h->store_begin || !h->store_end || check_options(opt) < 0)
            return -EINVAL;
        std::unique_ptr<scp_server> srv(new scp_server);
        srv->ae_title = opt->ae_title;
        srv->opt = *opt;
        srv->opt.ae_title = nullptr; /* use ae_title, our copy */
        if (opt->tls)
            copy_tls(srv.get(), opt->tls);
        srv->h = *h;
        if (srv->opt.acse_timeout_s <= 0)
            srv->opt.acse_timeout_s = k_default_acse_s;
        if (srv->opt.dimse_timeout_s <= 0)
            srv->opt.dimse_timeout_s = k_default_dimse_s;
        if (srv->opt.max_pdu == 0)
            srv->opt.max_pdu = ASC_MAXIMUMPDUSIZE;
        if (srv->opt.max_pdu < ASC_MINIMUMPDUSIZE)
            srv->opt.max_pdu = ASC_MINIMUMPDUSIZE;
        if (srv->opt.max_pdu > ASC_MAXIMUMPDUSIZE)
            srv->opt.max_pdu = ASC_MAXIMUMPDUSIZE;
        *out = srv.release();
        return 0;
    } catch (const std::bad_alloc &) {
        return -ENOMEM;
    } catch (...) {
        return LDCT_EDICOM;
    }
}

extern "C" int scp_server_start(scp_server *srv)
{
    try {
        if (!srv || srv->started || srv->opt.port == 0)
            return -EINVAL;
        int err = scp__global_init_once();
        if (err < 0)
            return err;
        OFCondition c =
            ASC_initializeNetwork(NET_ACCEPTOR, srv->opt.port, srv->opt.acse_timeout_s, &srv->net);
        err = scp__cond_err(c, "cannot listen");
        if (err < 0) {
            srv->net = nullptr;
            return err;
        }
        err = install_layer(srv);
        if (err < 0) {
            ASC_dropNetwork(&srv->net);
            return err;
        }
        try {
            srv->listener = std::thread(listener_main, srv);
        } catch (...) {
            ASC_dropNetwork(&srv->net);
            return -EAGAIN;
        }
        srv->started = true;
        const int per_host = srv->opt.max_associations_per_host;
        log_notice("scp: %s listening on port %d%s (at most %d associations, %d from one host)",
                   srv->ae_title.c_str(), srv->opt.port,
                   !srv->opt.tls           ? ""
                   : srv->tls.require_peer ? " for TLS with client certificates required"
                                           : " for TLS",
                   srv->opt.max_associations,
                   per_host > 0 && per_host < srv->opt.max_associations
                       ? per_host
                       : srv->opt.max_associations);
        return 0;
    } catch (const std::bad_alloc &) {
        return -ENOMEM;
    } catch (...) {
        return LDCT_EDICOM;
    }
}

extern "C" void scp_servers_stop(scp_server *const *srvs, int n, int grace_s)
{
    try {
        stop_all(srvs, n, grace_s);
    } catch (...) {
        log_err("scp: server stop failed (exception)");
    }
}

extern "C" void scp_server_stop(scp_server *srv, int grace_s)
{
    scp_servers_stop(&srv, 1, grace_s);
}

extern "C" int scp_server_reload_tls(scp_server *srv, const scp_tls *tls, char *err, size_t err_len)
{
    if (!srv || !srv->opt.tls || !tls)
        return -EINVAL;
    try {
        std::shared_ptr<DcmTLSTransportLayer> ctx =
            std::make_shared<DcmTLSTransportLayer>(NET_ACCEPTOR, nullptr, OFFalse);
        int rc = scp__tls_configure(*ctx, tls, 1, err, err_len);
        if (rc)
            return rc;
        std::lock_guard<std::mutex> g(srv->tls_lock);
        srv->tls_ctx = std::move(ctx);
        return 0;
    } catch (...) {
        scp__set_err(err, err_len, "TLS setup failed (exception)");
        return LDCT_EDICOM;
    }
}

extern "C" int scp_server_active(scp_server *srv)
{
    return srv ? srv->active.load() : 0;
}

extern "C" void scp_server_add_counts(scp_server *srv, scp_server_counts *c)
{
    if (!srv)
        return;
    c->accepted += srv->accepted.load();
    c->rejected += srv->rejected.load();
    c->failed += srv->failed.load();
    c->refused_resources += srv->refused_resources.load();
    c->refused_error += srv->refused_error.load();
}

extern "C" void scp_server_share_limit(scp_server *srv, scp_server *other)
{
    if (srv && other && srv != other && !srv->started)
        srv->limit = other->limit;
}

extern "C" void scp_server_free(scp_server *srv)
{
    if (!srv)
        return;
    scp_server_stop(srv, 0);
    try {
        if (srv->net)
            ASC_dropNetwork(&srv->net);
        delete srv;
    } catch (...) {
    }
}

extern "C" int scp_silence_was_idle(long long waited_ms, int dimse_timeout_s)
{
    return waited_ms * 10 >= (long long)dimse_timeout_s * 9000;
}
