/* scp: the project's only door to DCMTK (C interface; C++ inside).
 *
 * - A DICOM server (C-ECHO, C-STORE SCP): one thread per connection (the
 *   A-ASSOCIATE-RQ is read there, so a silent peer never delays others), at
 *   most `max_associations` associations served at once. Every decision about
 *   policy (who may associate, where a dataset goes, whether it is kept) is
 *   made by the caller's handlers; this module only speaks DICOM. Received
 *   datasets are written to disk exactly as received (bit-preserving, in the
 *   transfer syntax the peer used).
 * - A writer for CT Image Storage instances (test series) and a UID generator.
 * - An SCU that sends files (C-STORE) in one association.
 * - Reading slices (header and rescaled pixels) for series assembly, and
 *   writing derived instances next to a source instance.
 *
 * No DCMTK type appears here. Every function catches C++ exceptions and
 * returns an error code (common/err.h). Handlers are called from association
 * threads, concurrently: they must be thread-safe.
 */
#ifndef LDCT_SCP_H
#define LDCT_SCP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* DIMSE status codes the handlers return. */
enum {
    SCP_STATUS_SUCCESS = 0x0000,
    SCP_STATUS_OUT_OF_RESOURCES = 0xA700,
    SCP_STATUS_DATASET_MISMATCH = 0xA900,
    SCP_STATUS_CANNOT_UNDERSTAND = 0xC000,
    SCP_STATUS_PROCESSING_FAILURE = 0x0110,
};

/* Answers of check_association; each maps to the A-ASSOCIATE-RJ reason of
 * PS3.8 (called AE not recognised, calling AE not recognised, no reason
 * given, local limit exceeded). */
typedef enum {
    SCP_ASSOC_ACCEPT = 0,
    SCP_ASSOC_REJECT_CALLED_AE,
    SCP_ASSOC_REJECT_CALLING_AE,
    SCP_ASSOC_REJECT_HOST,
    SCP_ASSOC_REJECT_BUSY,
    /* The calling AE title is bound to a TLS certificate the association
     * did not come with (calling AE title not recognised). */
    SCP_ASSOC_REJECT_CERTIFICATE,
} scp_assoc_verdict;

/* Why an association's series may be incomplete (assoc_interrupted). */
typedef enum scp_cut {
    /* Ended by an abort or an error (not a release, not silence between
     * commands): the series of its last stored instance (n is 1). */
    SCP_CUT_ABORTED = 0,
    /* Instances refused for lack of resources (0xA7xx: a full disk or
     * database), which the sender may send again: reported at each such
     * refusal and once more at the end, with every series the association
     * stored so far (n may be 0). The refused instance's own series is not
     * known (its dataset may not have been read), so the handler also holds
     * the calling AE's other receiving series. */
    SCP_CUT_REFUSED = 1
} scp_cut;

typedef struct scp_assoc_info {
    const char *calling_ae; /* trimmed, never NULL */
    const char *called_ae;  /* trimmed, never NULL */
    const char *peer_host;  /* numeric address, never NULL */
    int64_t started_ms;     /* when it was accepted (Unix ms) */
    int tls;                /* 1: it came to the TLS listener */
    const void *tls_peer;   /* with tls: the caller's certificate, verified at the
                             * handshake (opaque; see scp_assoc_tls_peer_is), or
                             * NULL when it sent none */
} scp_assoc_info;

/* 1 when a came over TLS with a certificate issued for name: a host name
 * (matched against the certificate's DNS subjectAltNames or, when it has
 * none, its common name; wildcards as in RFC 6125) or an IP address (its IP
 * subjectAltNames). Else 0. */
int scp_assoc_tls_peer_is(const scp_assoc_info *a, const char *name);

/* One received instance. Strings are never NULL ("" when absent). */
typedef struct scp_instance {
    const char *req_sop_class_uid;    /* from the C-STORE request */
    const char *req_sop_instance_uid; /* from the C-STORE request */
    const char *sop_class_uid;        /* (0008,0016) of the dataset */
    const char *sop_instance_uid;     /* (0008,0018) */
    const char *study_uid;            /* (0020,000D) */
    const char *series_uid;           /* (0020,000E) */
    const char *modality;             /* (0008,0060) */
    const char *series_description;   /* (0008,103E) */
    const char *transfer_syntax_uid;  /* transfer syntax it was received in */
    const char *file_path;            /* the received file (the temp path given) */
    uint64_t file_size;
    int parsed;       /* 1: the header was read back; 0: the file is not parseable
                       * DICOM (the dataset fields above are then ""), the handler
                       * decides (typically 0xC000 and quarantine) */
    int write_failed; /* 1: writing the received data failed (a full disk);
                       * the file is gone, the dataset was read off the wire */
} scp_instance;

typedef struct scp_handlers {
    void *ctx;
    /* Decides whether to accept an association request. */
    scp_assoc_verdict (*check_association)(void *ctx, const scp_assoc_info *assoc);
    /* Optional: decides, right after a connection is accepted and before
     * anything is read from it, whether its peer (numeric address) may call
     * at all; 0 closes the connection at once, so a host that may not call
     * cannot hold a connection slot until the ACSE timeout. */
    int (*allow_host)(void *ctx, const char *host);
    /* Called when a C-STORE request arrives, before its dataset is read.
     * Returns SCP_STATUS_SUCCESS and writes into tmp_path (size tmp_len) the
     * file name the dataset is to be received into; or returns a failure
     * status (and a message in comment, size comment_len): the bridge then
     * reads the dataset off the wire, discards it and answers that status. */
    unsigned (*store_begin)(void *ctx, const scp_assoc_info *assoc, char *tmp_path, size_t tmp_len,
                            char *comment, size_t comment_len);
    /* Optional: the free space (MiB) the file system a dataset is received
     * onto must keep while it is written; checked after every MiB written,
     * and below it the reception fails as on a full disk (the file is
     * removed, store_end gets write_failed). So concurrent large datasets
     * cannot take the space store_begin saw free. 0 or NULL: no check. */
    uint64_t (*store_min_free_mb)(void *ctx);
    /* Called once the dataset is completely in inst->file_path. Returns the
     * DIMSE status to answer (a message in comment on failure). It owns the
     * file from then on (moves or removes it). If reception failed, the
     * bridge removes the temp file itself and store_end is not called. */
    unsigned (*store_end)(void *ctx, const scp_assoc_info *assoc, const scp_instance *inst,
                          char *comment, size_t comment_len);
    /* Optional: an association that stored instances (store_end answered
     * success) may have left series incomplete (see scp_cut for which
     * series and why). */
    void (*assoc_interrupted)(void *ctx, const scp_assoc_info *assoc,
                              const char *const *series_uids, int n, scp_cut why);
} scp_handlers;

/* DICOM TLS (PS3.15 B.10 and B.9): the non-downgrading BCP 195 profile
 * (TLS 1.2 with four AES-GCM cipher suites, or TLS 1.3; OpenSSL security
 * level 2), or with `legacy` the BCP 195 profile that also falls back to
 * TLS 1.0 and AES128-SHA for older peers. PEM files; the private key unencrypted
 * (readable by the daemon only). */
typedef struct scp_tls {
    const char *certificate; /* our certificate (chain) */
    const char *private_key; /* its key */
    const char *ca_file;     /* CA certificates that peers' certificates must chain to;
                              * NULL or "": none (then peers cannot be verified) */
    const char *crl_file;    /* NULL or "", or certificate revocation lists (PEM, one
                              * or more): a peer's own certificate is then checked
                              * against its CA's list, and refused when revoked or
                              * when no list of its CA is in the file */
    int require_peer;        /* SCP: a peer without a valid certificate is refused
                              * (else one it sends is still verified); SCU: always */
    int legacy;              /* the BCP 195 profile with fallback (see above) */
} scp_tls;

typedef struct scp_server_options {
    const char *ae_title;          /* our AE title (1..16 chars); copied */
    int port;                      /* 0: a server that is never started (it only holds the
                                    * association limit another shares, see
                                    * scp_server_share_limit); scp_server_start refuses it */
    int max_associations;          /* beyond this, A-ASSOCIATE-RJ local limit exceeded */
    int max_associations_per_host; /* the same for the associations from one peer
                                    * address; <= 0: no such limit */
    int acse_timeout_s;            /* <= 0: 30 s; also bounds how long a connection
                                    * may stay silent before its A-ASSOCIATE-RQ */
    int dimse_timeout_s;           /* <= 0: 60 s; idle time between and within messages */
    uint32_t max_pdu;              /* our maximum receive PDU length; 0: 131072;
                                    * clamped to 4096..131072 */
    const scp_tls *tls;            /* NULL: plain TCP; else every connection speaks TLS
                                    * (files read at scp_server_start; copied) */
} scp_server_options;

typedef struct scp_server scp_server;

/* Process-wide setup, once, before anything else here (idempotent and
 * thread-safe): loads the data dictionary (DCMDICTPATH or DCMTK's default),
 * registers the JPEG, JPEG-LS and RLE decoders and encoders, turns Nagle's
 * algorithm off for every socket DCMTK opens or accepts (sets TCP_NODELAY=1
 * in the environment), disables reverse DNS lookups of peers and routes
 * DCMTK's own error messages to stderr as "<3>dcmtk: ...". Note that DCMTK
 * ignores SIGPIPE process-wide once a server starts. Returns 0 or
 * LDCT_EDICOM (no dictionary). */
int scp_global_init(void);

/* While quiet, DCMTK's own error messages are dropped: a caller that reads
 * files which need not be DICOM (ldct filter's scan of a folder) says
 * itself which it skipped and why, once, rather than one DCMTK line per
 * file. After scp_global_init; not for a running server's threads. */
void scp_dcmtk_log_quiet(int quiet);

/* Unregisters the codecs scp_global_init registered, so leak checkers see a
 * clean exit. Call it last, once no other scp function runs or will run
 * (every server freed); scp_global_init cannot be called again after it. */
void scp_global_cleanup(void);

/* Creates a server (not yet listening). *out is freed with scp_server_free. */
int scp_server_new(const scp_server_options *opt, const scp_handlers *h, scp_server **out);

/* Binds the port and starts the listener thread; returns once the port is
 * listening (0), or the error (e.g. -EADDRINUSE). */
int scp_server_start(scp_server *srv);

/* Stops accepting associations (from now on every request gets a transient
 * "local limit exceeded" A-ASSOCIATE-RJ), waits up to grace_s seconds for
 * the running ones to finish, then aborts what remains (their sockets are
 * shut down, as are connections still waiting for their A-ASSOCIATE-RQ) and
 * joins every thread. Takes at most about grace_s + 2 s. */
void scp_server_stop(scp_server *srv, int grace_s);

/* scp_server_stop for the n (at most 8) servers of one node (its plain and
 * TLS ports; NULL entries are skipped) at once: all refuse new requests from the
 * start, share the one grace period and are aborted together, so the whole
 * stop still takes at most about grace_s + 2 s. */
void scp_servers_stop(scp_server *const *srvs, int n, int grace_s);

/* Reads the files of tls again (new paths, or renewed files at the same
 * paths) for a server started with TLS: connections accepted from now on
 * use them, running associations keep what they started with. 0, or an
 * error with the reason in err (the server then goes on with the files it
 * had); -EINVAL for a server without TLS. Any thread. */
int scp_server_reload_tls(scp_server *srv, const scp_tls *tls, char *err, size_t err_len);

/* Number of associations running now. */
int scp_server_active(scp_server *srv);

/* What became of the connections a server took since it started. */
typedef struct scp_server_counts {
    long long accepted;          /* associations accepted */
    long long rejected;          /* A-ASSOCIATE-RJ: busy, stopping, or the caller's verdict */
    long long failed;            /* connections that brought no usable request: a failed TLS
                                  * handshake, an unreadable or refused A-ASSOCIATE-RQ */
    long long refused_resources; /* C-STOREs answered 0xA7xx (disk space: may be resent) */
    long long refused_error;     /* C-STOREs answered any other failure status */
} scp_server_counts;

/* Adds srv's counts to *c (NULL srv: nothing). */
void scp_server_add_counts(scp_server *srv, scp_server_counts *c);

/* Makes srv count its associations against other's max_associations (the
 * plain and the TLS port of one node share one limit). Call before
 * scp_server_start of either; the two may be freed in any order. */
void scp_server_share_limit(scp_server *srv, scp_server *other);

/* Checks that the TLS files load (certificate, key that matches it, CA
 * file) without listening: 0, or LDCT_EINVAL_CONFIG with the reason in
 * err. `role_scp` 1 for a listener, 0 for a sender. */
int scp_tls_check(const scp_tls *tls, int role_scp, char *err, size_t err_len);

/* A sender's TLS setup with its files read once (certificate, key, CA
 * file, revocation lists), so that sends between two reloads use the same
 * ones whatever happens to the files meanwhile. Handles are independent:
 * each one is freed with scp_tls_ctx_free; any thread may use them. */
typedef struct scp_tls_ctx scp_tls_ctx;

/* Reads the files of tls (as scp_tls_check with role_scp 0): 0, or LDCT_EINVAL_CONFIG / LDCT_EDICOM
 * with the reason in err. */
int scp_tls_ctx_new(const scp_tls *tls, scp_tls_ctx **out, char *err, size_t err_len);

/* Another handle on the setup of c (NULL when c is NULL or out of memory). */
scp_tls_ctx *scp_tls_ctx_ref(const scp_tls_ctx *c);

/* NULL is a no-op. */
void scp_tls_ctx_free(scp_tls_ctx *c);

/* When the files of a TLS setup run out, in Unix seconds (0: no such file,
 * or nothing in it says). */
typedef struct scp_tls_dates {
    int64_t certificate_not_after; /* the first certificate of tls->certificate */
    int64_t crl_next_update;       /* the earliest next update of the lists in
                                    * tls->crl_file */
    int64_t ca_not_after;          /* the earliest notAfter of the CA certificates: those in
                                    * tls->ca_file and those after the first in
                                    * tls->certificate (its chain) */
    char ca_name[256];             /* that CA certificate's subject ("" when none) */
} scp_tls_dates;

/* Reads *out from the files of tls: 0, or LDCT_EINVAL_CONFIG with the file
 * that does not read in err. Any thread. */
int scp_tls_dates_read(const scp_tls *tls, scp_tls_dates *out, char *err, size_t err_len);

/* The mismatches between the revocation lists of tls->crl_file and the CAs
 * of tls->ca_file that still let the files load: each(ctx, text) for a CA
 * with no list (peers with certificates it issued are refused; a CA that
 * issued another CA of the file needs none) and for a list whose CA is not
 * in the file (unused). Returns how many; 0 without tls_crl. Any thread. */
int scp_tls_crl_gaps(const scp_tls *tls, void (*each)(void *ctx, const char *text), void *ctx);

/* Frees the server (stops it first if needed). NULL is a no-op. */
void scp_server_free(scp_server *srv);

/* Whether a wait for the next DIMSE command that ended with "no data"
 * after waited_ms was the sender's silence for the whole dimse_timeout_s
 * (an association left open after its last instance: its series was
 * complete) rather than a connection that ended early, which DCMTK can
 * report the same way and which counts as a cut (the series waits for the
 * resend). At least 90% of the timeout counts as the whole. */
int scp_silence_was_idle(long long waited_ms, int dimse_timeout_s);

/* Writes a fresh UID "<root>.<unique suffix>" (at most 64 chars) into out. */
int scp_uid_new(const char *root, char *out, size_t len);

/* 1 when uid has a UID's syntax (1 to 64 digits and dots, no empty
 * component at either end or between two dots), else 0. Only such text
 * is logged from a request: anything else may be patient data. */
int scp_uid_valid(const char *uid);

/* Parameters of one synthetic CT Image Storage instance. Strings may be
 * NULL for "absent". Pixels are rows*cols stored values (signed 16-bit). */
typedef struct scp_ct_params {
    const char *patient_name, *patient_id;
    const char *study_uid, *series_uid, *sop_uid, *frame_of_reference_uid;
    const char *study_description, *series_description;
    int series_number, instance_number;
    int rows, cols;
    double pixel_spacing[2]; /* row spacing, column spacing (mm) */
    double slice_thickness;  /* mm */
    double position[3];      /* ImagePositionPatient (mm) */
    double orientation[6];   /* ImageOrientationPatient */
    double rescale_slope, rescale_intercept;
    double kvp;
    /* Exposure (0018,1152) in mAs and CTDIvol (0018,9345) in mGy; written
     * only when > 0 (Exposure, an IS, also only when it rounds to at most
     * 2147483647). */
    double exposure_mas, ctdivol;
    const char *convolution_kernel; /* (0018,1210); NULL: absent */
    const int16_t *pixels;
    const char *transfer_syntax_uid; /* NULL: Explicit VR Little Endian */
    const char *trigger_time;        /* TriggerTime (ms, DS text); NULL: absent */
    const char *acquisition_time;    /* AcquisitionTime (TM); NULL: absent */
    const char *temporal_index;      /* TemporalPositionIndex (UL text); NULL: absent */
    const char *cardiac_phase;       /* NominalPercentageOfCardiacPhase (FL text); NULL: absent */
} scp_ct_params;

/* Writes one CT Image Storage file (with meta header) to `path`. */
int scp_ct_write(const scp_ct_params *p, const char *path);

/* ---- SCU: sending instances --------------------------------------------- */

typedef struct scp_send_options {
    const char *host; /* peer host name or address */
    int port;
    const char *called_ae;     /* the peer's AE title */
    const char *calling_ae;    /* ours */
    int connect_timeout_s;     /* <= 0: 10 s (TCP connect) */
    int dimse_timeout_s;       /* <= 0: 60 s; also bounds A-ASSOCIATE and release
                                * waits and each blocked socket write */
    uint32_t max_pdu;          /* our maximum receive PDU; 0: 131072 */
    const int *cancel;         /* may be NULL; read atomically before each file: nonzero
                                * aborts the association and returns LDCT_ECANCELED */
    const scp_tls_ctx *tls;    /* NULL: plain TCP; else TLS with these files (read
                                * when it was made), the peer's certificate verified */
    const char *tls_peer_name; /* with tls: NULL or "", or the host name or IP address
                                * the peer's certificate must carry (a DNS name in
                                * subjectAltName, else its common name; an IP address
                                * in subjectAltName only: OpenSSL's checks) */
} scp_send_options;

/* Sends the n files in one association (C-STORE each). For every distinct
 * SOP class it proposes the files' own transfer syntaxes and, separately,
 * Explicit and Implicit VR Little Endian; a file whose own syntax was not
 * accepted is converted (decompressed) to an accepted one first.
 * statuses[i] receives the DIMSE status of file i (0x0000 success, 0xB...
 * warning, others failure), SCP_STATUS_NOT_SENDABLE when it was not
 * attempted because the peer refused its SOP class for good (user
 * rejection, abstract or transfer syntaxes not supported) or accepted only
 * syntaxes this node cannot convert it to (no retry can change that; err
 * says which), or 0xFFFF when it was not attempted for another reason
 * (unreadable file, SOP class refused without a reason, or the
 * association ended before it). Returns 0 when the association ran to its
 * release (even with failure statuses; err then summarises them), or
 * LDCT_ENET (connection refused or timed out, or the association broke;
 * statuses tell which files went through), LDCT_EPEER (association rejected:
 * err gives the result, source and reason), LDCT_EDICOM or -EINVAL. Never
 * blocks longer than the timeouts. Thread-safe: concurrent calls each run
 * their own association. Note that DCMTK 3.6.7 keeps the TCP connect timeout
 * process-wide; concurrent calls with different connect_timeout_s may use
 * one another's value. */
#define SCP_STATUS_NOT_SENDABLE 0xFFFEu
int scp_send_files(const scp_send_options *o, const char *const *paths, int n, unsigned *statuses,
                   char *err, size_t err_len);

/* ---- reading slices ------------------------------------------------------ */

typedef struct scp_slice_info {
    char sop_instance_uid[65], sop_class_uid[65], study_uid[65], series_uid[65],
        frame_of_reference_uid[65], modality[17], photometric[17];
    char patient_id[65]; /* compared across a series, never logged */
    int rows, cols, frames, bits_allocated, bits_stored, high_bit, pixel_representation,
        samples_per_pixel, instance_number;
    int has_position, has_orientation, has_spacing;
    double position[3], orientation[6], pixel_spacing[2], slice_thickness, rescale_slope,
        rescale_intercept;
    /* What rules match on ("" / NAN when absent; root level of the dataset).
     * The LO values are in UTF-8, converted from the Specific Character Set
     * (64 characters take up to 256 bytes), as the configuration's patterns. */
    char series_description[257], protocol_name[257], body_part_examined[17], manufacturer[257];
    char image_type[257]; /* every value, backslash-separated: "ORIGINAL\PRIMARY\AXIAL"
                           * (cut at 256 bytes; vendors add many values) */
    int series_number;
    double kvp, ctdivol, exposure_mas;
    double *frame_positions; /* frames*3 for multi-frame (Enhanced CT per-frame Plane
                              * Position), else NULL; freed by scp_slice_info_free */
    /* Temporal keys of 4D series, NAN when absent, in the order tried by
     * series assembly: SCP_TIME_INDEX (TemporalPositionIndex, else
     * TemporalPositionIdentifier), SCP_TIME_TRIGGER (TriggerTime, ms),
     * SCP_TIME_PHASE (NominalPercentageOfCardiacPhase), SCP_TIME_ACQUISITION
     * (AcquisitionTime, seconds since midnight). */
    double temporal[4];
    double *frame_temporal_index; /* frames entries: per-frame TemporalPositionIndex of an
                                   * Enhanced CT (Frame Content), else NULL; freed by
                                   * scp_slice_info_free */
} scp_slice_info;

enum { SCP_TIME_INDEX, SCP_TIME_TRIGGER, SCP_TIME_PHASE, SCP_TIME_ACQUISITION, SCP_TIME_KEYS };

/* Reads the header of one instance (stops before the pixel data). For
 * multi-frame images with functional groups (Enhanced CT) the geometry and
 * rescale come from the Shared / Per-Frame Functional Groups (Pixel
 * Measures, Plane Orientation, Plane Position, Pixel Value Transformation;
 * those of frame 1 in the scalar fields). Rescale defaults to slope 1,
 * intercept 0. Refuses (LDCT_EINPUT) an uncompressed file smaller than the
 * pixels its header declares, and a NumberOfFrames that disagrees with the
 * number of Per-Frame Functional Groups items, so nobody allocates for
 * frames that are not there. On success the caller frees with
 * scp_slice_info_free. Returns 0, -ENOENT, LDCT_EINPUT (not DICOM /
 * attributes missing or inconsistent, message in err) or LDCT_EDICOM. */
int scp_slice_read_info(const char *path, scp_slice_info *out, char *err, size_t err_len);

/* Frees what scp_slice_read_info allocated (not the struct). NULL is a no-op. */
void scp_slice_info_free(scp_slice_info *info);

/* Decodes the pixel data of one instance (any transfer syntax with a
 * registered decoder: uncompressed, deflate, JPEG lossless, JPEG-LS, RLE),
 * applies the rescale (per frame for Enhanced CT) and writes rows*cols*frames
 * floats (HU for CT), frame after frame, row-major. Refuses anything but
 * MONOCHROME1/2 with one sample per pixel and 8 or 16 bits allocated, and a
 * count that is not rows*cols*frames (LDCT_EINPUT / LDCT_EUNSUPPORTED with a
 * message in err). */
int scp_slice_read_hu(const char *path, float *out, size_t count, char *err, size_t err_len);

/* ---- derived instances ------------------------------------------------- */

typedef struct scp_derived_params {
    const char *source_path;
    const char *series_uid; /* new SeriesInstanceUID (required) */
    const char *sop_uid;    /* new SOPInstanceUID (required) */
    int64_t dated_ms;       /* Series / Content Date and Time, ms since the epoch (0: now); one
                             * value for the whole series */
    const char *series_description;        /* NULL: keep the source's (plus the suffix) */
    const char *series_description_suffix; /* NULL: none; appended to the source's
                                            * description when series_description is NULL
                                            * (the result cut to 64 characters) */
    int series_number;
    int series_number_is_offset;        /* nonzero: SeriesNumber = the source's + series_number */
    const char *derivation_description; /* NULL: none */
    const float *values;                /* rows*cols*frames, same units as scp_slice_read_hu */
    const char *transfer_syntax_uid;    /* NULL = Explicit VR Little Endian */
} scp_derived_params;

/* The Series Description of a derived series: base + suffix as an LO value
 * of at most 64 bytes (64 characters, and within validators that count
 * bytes) in `charset` (the dataset's Specific Character Set, "" =
 * default), the base cut (never the suffix, never inside a UTF-8 character
 * or an ISO 2022 code switch) when it does not fit. base is in `charset`
 * (the source's value); suffix is UTF-8 (the configuration's) and is
 * converted to `charset`, a character the set lacks written as its base
 * letter or '?'. out needs 65 bytes. */
void scp_fit_description(const char *base, const char *suffix, const char *charset, char *out,
                         size_t len);

/* The SeriesNumber of a derived series: source + offset, kept within an IS
 * value's range (-2^31 .. 2^31-1). Where source + offset would leave it
 * (a source numbered near the top of the range) it is source - offset;
 * a source itself out of range counts as the nearest bound. */
long scp_series_number_derive(long source, long offset);

/* Writes a derived instance of the source to out_path: the source's dataset
 * (decompressed) with the new UIDs (meta header regenerated), series
 * description and number, ImageType DERIVED\SECONDARY\<source values 3..>
 * (DERIVED\PRIMARY\.. and Frame Type DERIVED for Enhanced CT, whose Value 2
 * is always PRIMARY), DerivationDescription, a SourceImageSequence item
 * referencing the source (purpose DCM 121322), InstanceCreation, Series and
 * Content Date/Time now (Acquisition Date/Time kept),
 * and pixels from values: stored = round((value - intercept) / slope) with
 * each frame's rescale, clamped to the BitsStored / PixelRepresentation range
 * (NaN becomes the stored value 0). Removes what would be false for the new
 * image (digital signatures, icon, smallest/largest pixel values,
 * concatenation attributes, private elements without a creator). Not
 * durable (the caller fsyncs); on failure no file is left at out_path.
 * Returns 0, -EINVAL, LDCT_EINPUT, LDCT_EUNSUPPORTED or LDCT_EDICOM with a
 * message in err. Any thread. */
int scp_derived_write(const scp_derived_params *p, const char *out_path, char *err, size_t err_len);

/* ---- projection data (DICOM-CT-PD) ------------------------------------ */

/* One projection of the open CT projection data format of Chen et al. 2015
 * (Mayo Clinic / AAPM low-dose CT data; tag meanings checked against the
 * DICOM-CT-PD dictionary v8 and the public readers of FreeCT and ODL): a CT
 * Image Storage instance whose pixels are the line integrals of one view
 * (after the rescale), with the geometry in private groups 7029, 7031 and
 * 7033. Angles are radians, lengths millimetres. */
typedef struct scp_ctpd_info {
    char sop_instance_uid[65], series_uid[65], study_uid[65];
    char patient_id[65]; /* compared across the views, never logged */
    char modality[17];   /* (0008,0060), compared across the views */
    int instance_number;
    int det_rows, det_cols;          /* (7029,1010) US, (7029,1011) US */
    double elem_transverse_mm;       /* (7029,1002) FL, at the detector */
    double elem_axial_mm;            /* (7029,1006) FL, at the detector */
    char det_shape[17];              /* (7029,100B) CS: CYLINDRICAL, FLAT, SPHERICAL */
    double angle_rad;                /* (7031,1001) FL DetectorFocalCenterAngularPosition */
    double axial_mm;                 /* (7031,1002) FL DetectorFocalCenterAxialPosition */
    double radial_mm;                /* (7031,1003) FL focal centre to isocentre */
    double src_det_mm;               /* (7031,1031) FL ConstantRadialDistance, focal centre
                                      * to detector */
    double central_col, central_row; /* (7031,1033) FL pair, 1-based (column, row) of the
                                      * element on the ray through the isocentre */
    double shift_axial_mm, shift_angular_rad, shift_radial_mm; /* (7033,100B-100D) FL */
    char ffs_mode[17];      /* (7033,100E) CS: FFSNONE, FFSZ, FFSXY, FFSXYZ ("" absent) */
    int views_per_rotation; /* (7033,1013) US (0 absent) */
    int transposed;         /* 1: stored Rows x Columns = det_cols x det_rows
                             * (detector row index fastest, as in the Mayo data) */
} scp_ctpd_info;

/* Reads the projection geometry of one instance and, when values is not
 * NULL, its line integrals: values[row * det_cols + col] (count must be
 * det_rows * det_cols), whatever the stored orientation. Private elements
 * are read whether the file has their VR (explicit) or not (implicit VR:
 * read from their little-endian bytes). Returns 0, LDCT_ENOTFOUND when the
 * instance is not DICOM-CT-PD (no (7029,1010)), LDCT_EINPUT with a message
 * (missing or inconsistent geometry), -ENOENT or LDCT_EDICOM. Any thread. */
int scp_ctpd_read(const char *path, scp_ctpd_info *info, float *values, size_t count, char *err,
                  size_t err_len);

/* Parameters of one synthetic DICOM-CT-PD instance (tests, the simulator). */
typedef struct scp_ctpd_params {
    const char *patient_name, *patient_id, *study_uid, *series_uid, *sop_uid;
    /* FrameOfReferenceUID: give the series' one, shared by all its views
     * (and by images registered with them); NULL = a new UID per file. */
    const char *frame_of_reference_uid;
    const char *series_description;
    int instance_number;
    scp_ctpd_info geo;    /* geometry written into the private groups */
    const float *values;  /* line integrals, values[row * det_cols + col] */
    double rescale_slope; /* stored = round((value - intercept) / slope), 16-bit unsigned */
    double rescale_intercept;
} scp_ctpd_params;

/* Writes one DICOM-CT-PD instance (Explicit VR Little Endian, stored in the
 * Mayo orientation: transposed, detector row index fastest) to path. */
int scp_ctpd_write(const scp_ctpd_params *p, const char *path, char *err, size_t err_len);

/* ---- reconstructed images (from projection data) ----------------------- */

/* One axial slice reconstructed from a projection series. */
typedef struct scp_recon_params {
    const char *source_path; /* a view of the projection series: patient, study and
                              * equipment attributes, SeriesDescription and
                              * SeriesNumber come from it */
    const char *series_uid, *sop_uid, *frame_of_reference_uid; /* required */
    const char *series_description_suffix; /* appended to the source's (cut to 64) */
    int series_number_offset;              /* added to the source's SeriesNumber */
    int instance_number;
    int rows, cols;
    double pixel_spacing; /* mm, square pixels */
    double slice_thickness;
    double position[3];                 /* ImagePositionPatient; orientation 1\0\0\0\1\0 */
    const char *derivation_description; /* required */
    const char *const *source_sops;     /* views referenced in SourceImageSequence */
    int nsource;
    const float *values; /* rows*cols HU, row-major; stored as round(HU) in int16 */
} scp_recon_params;

/* Writes one CT Image Storage instance (Explicit VR Little Endian) of a
 * reconstruction: ImageType DERIVED\PRIMARY\AXIAL, the patient and study
 * of the source, a new series (UIDs given), DerivationDescription,
 * SourceImageSequence items for source_sops (class of the source), rescale
 * slope 1 intercept 0 (values rounded, clamped to int16, NaN -> -1024).
 * Not durable (the caller fsyncs); on failure nothing is left at out_path.
 * Returns 0, -EINVAL, LDCT_EINPUT (source unreadable) or LDCT_EDICOM with a
 * message in err. Any thread. */
int scp_recon_write(const scp_recon_params *p, const char *out_path, char *err, size_t err_len);

#ifdef __cplusplus
}
#endif

#endif
