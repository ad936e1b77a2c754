/* scp: the project's only door to DCMTK (C interface; C++ inside).
 *
 * - A DICOM server (C-ECHO, C-STORE SCP): one thread per connection (the
 *   A-ASSOCIATE-RQ is read there, so a silent peer never delays others), at
 *   most `max_associations` associations served at once. Every decision about
 *   policy (who may associate, where a dataset goes, whether it is kept) is
 *   made by the caller's handlers; this module only speaks DICOM. Received
 *   datasets are written to disk exactly as received (bit-preserving, in the
 *   transfer syntax the peer used).
 * - A writer for CT Image Storage instances (test series, later derived
 *   instances) and a UID generator.
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
} scp_assoc_verdict;

typedef struct scp_assoc_info {
    const char *calling_ae; /* trimmed, never NULL */
    const char *called_ae;  /* trimmed, never NULL */
    const char *peer_host;  /* numeric address, never NULL */
} scp_assoc_info;

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
    int parsed; /* 1: the header was read back; 0: the file is not parseable
                 * DICOM (the dataset fields above are then ""), the handler
                 * decides (typically 0xC000 and quarantine) */
} scp_instance;

typedef struct scp_handlers {
    void *ctx;
    /* Decides whether to accept an association request. */
    scp_assoc_verdict (*check_association)(void *ctx, const scp_assoc_info *assoc);
    /* Called when a C-STORE request arrives, before its dataset is read.
     * Returns SCP_STATUS_SUCCESS and writes into tmp_path (size tmp_len) the
     * file name the dataset is to be received into; or returns a failure
     * status (and a message in comment, size comment_len): the bridge then
     * reads the dataset off the wire, discards it and answers that status. */
    unsigned (*store_begin)(void *ctx, const scp_assoc_info *assoc, char *tmp_path, size_t tmp_len,
                            char *comment, size_t comment_len);
    /* Called once the dataset is completely in inst->file_path. Returns the
     * DIMSE status to answer (a message in comment on failure). It owns the
     * file from then on (moves or removes it). If reception failed, the
     * bridge removes the temp file itself and store_end is not called. */
    unsigned (*store_end)(void *ctx, const scp_assoc_info *assoc, const scp_instance *inst,
                          char *comment, size_t comment_len);
} scp_handlers;

typedef struct scp_server_options {
    const char *ae_title; /* our AE title (1..16 chars); copied */
    int port;
    int max_associations; /* beyond this, A-ASSOCIATE-RJ local limit exceeded */
    int acse_timeout_s;   /* <= 0: 30 s; also bounds how long a connection
                           * may stay silent before its A-ASSOCIATE-RQ */
    int dimse_timeout_s;  /* <= 0: 60 s; idle time between and within messages */
    uint32_t max_pdu;     /* our maximum receive PDU length; 0: 131072;
                           * clamped to 4096..131072 */
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

/* Number of associations running now. */
int scp_server_active(scp_server *srv);

/* Frees the server (stops it first if needed). NULL is a no-op. */
void scp_server_free(scp_server *srv);

/* Writes a fresh UID "<root>.<unique suffix>" (at most 64 chars) into out. */
int scp_uid_new(const char *root, char *out, size_t len);

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
    const int16_t *pixels;
    const char *transfer_syntax_uid; /* NULL: Explicit VR Little Endian */
} scp_ct_params;

/* Writes one CT Image Storage file (with meta header) to `path`. */
int scp_ct_write(const scp_ct_params *p, const char *path);

#ifdef __cplusplus
}
#endif

#endif
