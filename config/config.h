/* config: the daemon's configuration, its defaults and validation.
 *
 * The INI file (parsed with inih) has a [node] section, [destination NAME]
 * sections and [rule NAME] sections. Every option lives in one table
 * (config.c) with its type, bounds, default and target field; defaults are
 * applied by parsing the default text through the same setter, so embedded
 * defaults and file values are checked the same way.
 *
 * A config is plain data: load it on one thread, then share it read-only
 * (the daemon swaps whole configs on SIGHUP). Errors are collected, each as
 * "FILE:LINE: message", so `ldct check-config` can explain all of them.
 */
#ifndef LDCT_CONFIG_H
#define LDCT_CONFIG_H

#include <stddef.h>

#define CFG_AE_MAX 16    /* DICOM AE titles are at most 16 characters */
#define CFG_LIST_MAX 64  /* entries in an allow list */
#define CFG_HOST_MAX 255 /* a host name or address */
#define CFG_PATH_MAX 1024
#define CFG_NAME_MAX 64 /* section names */
#define CFG_DEST_MAX 32
#define CFG_RULE_MAX 64
#define CFG_ERR_MAX 64 /* errors kept; the count goes on */

typedef struct cfg_ae_list {
    int n;
    char v[CFG_LIST_MAX][CFG_AE_MAX + 1];
} cfg_ae_list;

typedef struct cfg_host_list {
    int n;
    char v[CFG_LIST_MAX][CFG_HOST_MAX + 1];
} cfg_host_list;

/* tls_caller_names: calling AE titles bound to the name (host name or IP
 * address) their TLS certificate must carry. */
typedef struct cfg_ae_names {
    int n;
    char ae[CFG_LIST_MAX][CFG_AE_MAX + 1];
    char name[CFG_LIST_MAX][CFG_HOST_MAX + 1];
} cfg_ae_names;

enum { CFG_TLS_BCP195_ND, CFG_TLS_BCP195 }; /* tls_profile */

typedef struct cfg_node {
    char ae_title[CFG_AE_MAX + 1];
    int port;
    char state_dir[CFG_PATH_MAX];
    int check_called_ae;             /* refuse associations to another AE title */
    cfg_ae_list allowed_calling_aes; /* empty = anyone */
    cfg_host_list allowed_hosts;     /* empty = anyone; numeric addresses */
    int max_associations;
    int max_associations_per_host; /* 0: half of max_associations, rounded up */
    int acse_timeout;              /* seconds */
    int dimse_timeout;             /* seconds */
    int max_pdu;                   /* bytes */
    int min_free_mb;               /* refuse C-STOREs (0xA700) below this free space */
    int stable_seconds;
    int interrupted_seconds; /* quiet a series cut short by an abort waits at least */
    int shutdown_grace_seconds;
    int log_level;                  /* LOG_LVL_* */
    char uid_root[65];              /* root of the UIDs we make (derived series) */
    char devices[256];              /* "auto", "cpu" or a list of "gpu:N": one worker each */
    char results_dir[CFG_PATH_MAX]; /* "" = <state_dir>/results */
    int sender_threads;
    int retention_hours;              /* unmatched / discarded series are removed after this */
    int history_days;                 /* rows of removed series are deleted after this */
    int quarantine_days;              /* refused instances kept are deleted after this */
    int job_max_attempts;             /* a job failing for a passing reason is retried this often */
    int gpu_check_seconds;            /* a down GPU is checked again this often */
    int job_stall_seconds;            /* a running job silent this long is stalled; 0 = never */
    int gpu_down_wait_seconds;        /* jobs wait this long for a busy working worker, then a down
                                       * GPU's worker runs them on the CPU */
    int http_port;                    /* status / metrics HTTP listener; 0 = off */
    char http_bind[CFG_HOST_MAX + 1]; /* numeric address it binds to */
    int tls_port;                     /* DICOM TLS listener; 0 = off */
    char tls_certificate[CFG_PATH_MAX];     /* PEM: this node's certificate (chain) */
    char tls_private_key[CFG_PATH_MAX];     /* PEM, unencrypted */
    char tls_ca_certificates[CFG_PATH_MAX]; /* PEM: CAs that peers' certificates chain to */
    char tls_crl[CFG_PATH_MAX];             /* PEM: revocation lists of those CAs; "": none */
    int tls_require_client_certificate;     /* a TLS caller without one is refused */
    int tls_profile;                        /* CFG_TLS_BCP195_ND or CFG_TLS_BCP195 (fallback) */
    cfg_ae_names tls_caller_names;          /* AE titles accepted only over TLS with a
                                             * certificate for their name */
} cfg_node;

typedef struct cfg_destination {
    char name[CFG_NAME_MAX + 1];
    int line;
    char host[CFG_HOST_MAX + 1];
    int port;
    char ae_title[CFG_AE_MAX + 1];
    int timeout;                          /* seconds: TCP connect, then each DIMSE step */
    int retry_initial_seconds;            /* first retry delay */
    double retry_multiplier;              /* each further delay is this much longer */
    int retry_max_seconds;                /* cap on one delay */
    int retry_max_attempts;               /* then the send is dead */
    int tls;                              /* send over TLS (the node's tls_ keys) */
    char tls_peer_name[CFG_HOST_MAX + 1]; /* "" or the name (DNS or IP) its certificate
                                           * must carry */
} cfg_destination;

/* A numeric match: inclusive bounds; a side left open is +-infinity. */
typedef struct cfg_range {
    int set;
    double lo, hi;
} cfg_range;

typedef enum { RULE_PROCESS, RULE_BOTH, RULE_ROUTE, RULE_DISCARD } cfg_action;
typedef enum {
    ALGO_AUTO,
    ALGO_NLM2D,
    ALGO_NLM3D,
    ALGO_ANLM,
    ALGO_ADAPTIVE4D,
    ALGO_FDK
} cfg_algorithm;

#define CFG_PATTERN_MAX 64
/* Patterns on LO text (64 characters, up to 256 bytes in UTF-8) and on
 * Image Type's values. */
#define CFG_TEXT_PATTERN_MAX 256
#define CFG_RULE_DEST_MAX 8

/* One [rule NAME] section. String matches are case-insensitive shell
 * wildcards (* and ?); an empty pattern matches anything. */
typedef struct cfg_rule {
    char name[CFG_NAME_MAX + 1];
    int line;                          /* line of the section header */
    int dest_line;                     /* first line of its destinations = (0: none) */
    int dest_lines[CFG_RULE_DEST_MAX]; /* the line that named each destination */
    int order;                         /* position in the file */
    char modality[CFG_PATTERN_MAX + 1];
    char calling_ae[CFG_PATTERN_MAX + 1];
    char called_ae[CFG_PATTERN_MAX + 1];
    char series_description[CFG_TEXT_PATTERN_MAX + 1];
    char protocol_name[CFG_TEXT_PATTERN_MAX + 1];
    char body_part_examined[CFG_PATTERN_MAX + 1];
    char manufacturer[CFG_TEXT_PATTERN_MAX + 1];
    char image_type[CFG_TEXT_PATTERN_MAX + 1];
    cfg_range slice_thickness, kvp, ctdivol, exposure;
    int action;    /* cfg_action */
    int algorithm; /* cfg_algorithm */
    double strength;
    int search_radius, patch_radius;
    int patch_weighting; /* nlm2d/nlm3d: 0 uniform, 1 gaussian (gpu_nlm_params.gaussian) */
    double h;            /* 0 = estimated from the noise, times strength */
    /* nlm2d/nlm3d: gpu_nlm_params.cutoff, in units of h^2; 0 = off */
    double distance_cutoff;
    int ndest;
    char destinations[CFG_RULE_DEST_MAX][CFG_NAME_MAX + 1];
    char series_description_suffix[CFG_PATTERN_MAX + 1];
    int series_number_offset;
    int stable_seconds;
    int priority;
    /* fdk (projection data): output matrix, field of view (0 = the fan's),
     * slice thickness (0 = the detector row pitch at the isocentre), slices
     * (0 = what the cone covers), kernel (cfg_fdk_kernel order: ram-lak,
     * shepp-logan, cosine, hamming, hann), water's attenuation per mm. */
    int fdk_matrix;
    double fdk_fov_mm, fdk_slice_mm;
    int fdk_slices, fdk_kernel;
    double fdk_mu_water;
    /* adaptive4d's mappings (gpu/adaptive4d.h); -1 (0 for downsample) =
     * the engine's default: downsample f, M-function alpha, beta, sigma
     * (noise threshold), mu-function alpha, beta, the t metric and the
     * gate of the all-pass share along t. */
    int a4d_downsample;
    int a4d_m_reference; /* 0 = default, 1 = noise floor, 2 = max (the paper's) */
    double a4d_m_alpha, a4d_m_beta, a4d_m_sigma, a4d_mu_alpha, a4d_mu_beta;
    double a4d_m_pass, a4d_t_scale, a4d_pass_t;
    double a4d_static_sigma_t, a4d_static_t; /* step 6 (0 sigma = off), -1 = default */
} cfg_rule;

typedef struct ldct_config {
    char path[CFG_PATH_MAX]; /* "" when running on embedded defaults */
    cfg_node node;
    int ndest;
    cfg_destination dest[CFG_DEST_MAX];
    int nrule;
    cfg_rule rule[CFG_RULE_MAX];
    int nerr; /* number of errors found (may exceed CFG_ERR_MAX) */
    char err[CFG_ERR_MAX][256];
} ldct_config;

/* Allocates a config holding the embedded defaults. Free with config_free. */
int config_new_defaults(ldct_config **out);

/* Loads `path` over the defaults. Returns 0, or LDCT_EINVAL_CONFIG with
 * (*out)->nerr > 0 and the messages in (*out)->err (the config is still
 * returned so the caller can print them), or -errno if the file cannot be
 * read (then *out is NULL). Free with config_free. */
int config_load(const char *path, ldct_config **out);

/* Frees a config; NULL is a no-op. */
void config_free(ldct_config *cfg);

/* 1 if `ae` is allowed by `list` (an empty list allows everyone). */
int config_ae_allowed(const cfg_ae_list *list, const char *ae);

/* The name a TLS certificate must carry for calling AE title `ae`, or NULL
 * when `ae` is not bound (tls_caller_names). AE titles compare without
 * regard to case, as rules match them: `ct1` is bound when CT1 is. */
const char *config_ae_bound_name(const cfg_ae_names *names, const char *ae);

/* 1 if numeric address `host` is allowed by `list` (empty allows all). */
int config_host_allowed(const cfg_host_list *list, const char *host);

/* Rules sorted for matching: priority (higher first), then file order.
 * Writes up to `max` pointers into `out`; returns the count. */
int config_rules_ordered(const ldct_config *cfg, const cfg_rule **out, int max);

/* Case-insensitive shell-wildcard match (* and ?) of UTF-8 text: ? is one
 * character, case is folded for ASCII, Latin-1, Latin Extended-A, the
 * Romanian Ș Ț of Latin Extended-B, Greek and Cyrillic letters; "" matches
 * anything. */
int config_glob_match(const char *pattern, const char *text);

/* Name of the rule config_load adds when a file defines none (and that
 * the embedded defaults hold): CT series are processed with algorithm auto
 * and written to the results folder. */
#define CFG_DEFAULT_RULE "default"

/* The results folder: node.results_dir, or <state_dir>/results. */
void config_results_dir(const ldct_config *cfg, char *out, size_t len);

/* The associations one host may hold: max_associations_per_host, or for 0
 * all of max_associations but a quarter (at least one) kept for the other
 * peers, so that one sender cannot shut them out while a lone one still
 * has most of the node. */
int config_associations_per_host(const cfg_node *n);

/* A rule with every option at its default, as a [rule] section without
 * keys gets it (for rules built in code; a zeroed cfg_rule is not one:
 * adaptive4d's "not set" is -1). */
void config_rule_init(cfg_rule *r);

/* Sets [rule] option `name` (e.g. "strength") of `r` from the text
 * `value` with the same checks and bounds as a file. Returns NULL when set,
 * else a message ("not a number", "out of range (0.01 to 10)", "unknown
 * option"; valid until the next call on this thread). Any thread. */
const char *config_rule_option_set(cfg_rule *r, const char *name, const char *value);

/* Checks a UID root as node.uid_root is checked (digits and dots, no empty
 * or zero-led component, at most 24 characters so that the UIDs made under
 * it fit in 64). NULL when valid, else the message a file gets (static).
 * Any thread. */
const char *config_uid_root_check(const char *root);

/* NULL when `suffix` may end a Series Description (LO, one value):
 * well-formed UTF-8 without a backslash (the value delimiter) or control
 * characters (C0, DEL or C1: U+0080..U+009F); else why not. */
const char *config_suffix_check(const char *suffix);

/* Finds a destination by name; NULL if absent. */
const cfg_destination *config_destination_find(const ldct_config *cfg, const char *name);

/* 1 when a rule sends to the destination; one that none names is only
 * reached by `ldct retry --to` (check-config warns about it). */
int config_destination_used(const ldct_config *cfg, const char *name);

/* Writes every option of the [node] section with its current value, one
 * "name = value" per line, into f (a FILE *). For `ldct check-config`. */
void config_node_print(const ldct_config *cfg, void *f);

/* Writes each rule in match order, one line each: name, priority, action,
 * algorithm, and where its results go. For `ldct check-config`. */
void config_rules_print(const ldct_config *cfg, void *f);

/* What a reload changes, for its log line: each [node] option whose value
 * differs ("stable_seconds 30 -> 10"), then each destination and rule
 * added, removed or changed (by name; moving one in the file is no
 * change), "; "-separated and cut to len. "" when nothing differs. */
void config_changes(const ldct_config *old, const ldct_config *cur, char *out, size_t len);

#endif
