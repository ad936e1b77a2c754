/* Configuration parsing with inih over one option table; see config.h.
 * Not thread-safe while loading; a loaded config is read-only. */
#include "config/config.h"

#include "common/err.h"
#include "common/log.h"
#include "common/utf8.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <ini.h>
#include <stdarg.h>
#include <strings.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

typedef enum {
    T_STR,
    T_AE,
    T_INT,
    T_DOUBLE,
    T_BOOL,
    T_AELIST,
    T_HOSTLIST,
    T_AENAMES,
    T_ADDR,
    T_LOGLEVEL,
    T_RANGE,
    T_ACTION,
    T_ALGORITHM,
    T_KERNEL,
    T_WEIGHTING,
    T_A4DREF,
    T_TLSPROFILE,
    T_NAMELIST,
    T_UIDROOT,
    T_DEVICES
} opt_type;
typedef enum { S_NODE, S_DEST, S_RULE } sect_kind;

typedef struct opt_def {
    sect_kind sect;
    const char *name;
    opt_type type;
    double min, max; /* T_INT and T_DOUBLE bounds; T_STR: min 1 = not empty */
    const char *def;
    size_t off;  /* offset of the field in cfg_node or cfg_destination */
    size_t size; /* T_STR buffer size */
    const char *help;
} opt_def;

#define NODE(name, type, min, max, def, field, help)                                               \
    {                                                                                              \
        S_NODE, name, type, min, max, def, offsetof(cfg_node, field),                              \
            sizeof(((cfg_node *)0)->field), help                                                   \
    }
#define DEST(name, type, min, max, def, field, help)                                               \
    {                                                                                              \
        S_DEST, name, type, min, max, def, offsetof(cfg_destination, field),                       \
            sizeof(((cfg_destination *)0)->field), help                                            \
    }

#define RULE(name, type, min, max, def, field, help)                                               \
    {                                                                                              \
        S_RULE, name, type, min, max, def, offsetof(cfg_rule, field),                              \
            sizeof(((cfg_rule *)0)->field), help                                                   \
    }

static const opt_def OPTIONS[] = {
    NODE("ae_title", T_AE, 0, 0, "LDCTNODE", ae_title, "our AE title"),
    NODE("port", T_INT, 0, 65535, "11112", port,
         "TCP port of the DICOM listener; 0 = none (TLS only, on tls_port)"),
    NODE("state_dir", T_STR, 1, 0, "./var/ldct", state_dir,
         "spool, outbox, results and database live here"),
    NODE("check_called_ae", T_BOOL, 0, 0, "yes", check_called_ae,
         "refuse associations addressed to another AE title"),
    NODE("allowed_calling_aes", T_AELIST, 0, 0, "", allowed_calling_aes,
         "comma-separated calling AE titles; empty = anyone"),
    NODE("allowed_hosts", T_HOSTLIST, 0, 0, "", allowed_hosts,
         "comma-separated peer addresses; empty = anyone"),
    NODE("max_associations", T_INT, 1, 512, "16", max_associations,
         "concurrent associations; more are refused (local limit exceeded)"),
    NODE("max_associations_per_host", T_INT, 0, 512, "0", max_associations_per_host,
         "concurrent associations from one peer address; 0 = max_associations less a quarter"),
    NODE("acse_timeout", T_INT, 1, 3600, "30", acse_timeout, "seconds"),
    NODE("dimse_timeout", T_INT, 1, 3600, "60", dimse_timeout, "seconds"),
    NODE("max_pdu", T_INT, 4096, 4194304, "131072", max_pdu, "maximum receive PDU, bytes"),
    NODE("min_free_mb", T_INT, 0, 100000000, "1024", min_free_mb,
         "below this free space C-STOREs are refused with 0xA700; jobs keep half of it free"),
    NODE("stable_seconds", T_INT, 1, 86400, "30", stable_seconds,
         "quiet time after which a series is complete"),
    NODE("interrupted_seconds", T_INT, 0, 86400, "600", interrupted_seconds,
         "quiet a series waits at least when an association sending it ended by an abort or"
         " an error (the sender resends; 0 = stable_seconds)"),
    NODE("shutdown_grace_seconds", T_INT, 0, 55, "30", shutdown_grace_seconds,
         "how long SIGTERM waits in all for associations, jobs and sends (at most 55: the"
         " systemd unit's TimeoutStopSec is 60)"),
    NODE("log_level", T_LOGLEVEL, 0, 0, "info", log_level,
         "error | warning | notice | info | debug"),
    NODE("uid_root", T_UIDROOT, 0, 0, "1.2.276.0.7230010.3.1.4", uid_root,
         "UID root for derived series (use your organisation's)"),
    NODE("devices", T_DEVICES, 0, 0, "auto", devices,
         "auto | cpu | gpu:N list: one worker per device"),
    NODE("results_dir", T_STR, 0, 0, "", results_dir,
         "where results go when a rule has no destination; empty = state_dir/results"),
    NODE("sender_threads", T_INT, 1, 64, "4", sender_threads, "parallel C-STORE senders"),
    NODE("history_days", T_INT, 0, 36500, "30", history_days,
         "the database rows of removed series (jobs, sends, derived UIDs) are deleted this long"
         " after their last instance; 0 = kept forever"),
    NODE("quarantine_days", T_INT, 0, 36500, "30", quarantine_days,
         "instances refused for their content, kept in state_dir/quarantine for inspection,"
         " are deleted this long after they came; 0 = kept until deleted by hand"),
    NODE("retention_hours", T_INT, 0, 87600, "72", retention_hours,
         "unmatched and discarded series are removed after this, delivered ones this long"
         " after delivery; 0 = at once"),
    NODE("job_max_attempts", T_INT, 1, 100, "3", job_max_attempts,
         "tries of a job that fails for a passing reason"),
    NODE("job_stall_seconds", T_INT, 0, 86400, "1800", job_stall_seconds,
         "a running job that reports no progress this long is stalled (a job or GPU that"
         " hangs): an error, and under systemd's watchdog a restart; 0 = never"),
    NODE("gpu_check_seconds", T_INT, 5, 86400, "60", gpu_check_seconds,
         "how often a worker whose GPU is down checks it again"),
    NODE("gpu_down_wait_seconds", T_INT, 0, 86400, "300", gpu_down_wait_seconds,
         "a worker whose GPU is down leaves the jobs to the workers whose device works; once"
         " each of them has been on its job this long, it runs the next job on the CPU"),
    NODE("http_port", T_INT, 0, 65535, "0", http_port,
         "status and metrics over HTTP (GET /status, /metrics, /healthz); 0 = off"),
    NODE("http_bind", T_ADDR, 0, 0, "127.0.0.1", http_bind,
         "numeric address of the HTTP listener (0.0.0.0 or :: for every interface)"),
    NODE("tls_port", T_INT, 0, 65535, "0", tls_port,
         "TCP port of the DICOM TLS listener (BCP 195 profile), beside port; 0 = off"),
    NODE("tls_certificate", T_STR, 0, 0, "", tls_certificate,
         "PEM file: this node's certificate (chain), for the TLS listener and TLS sends"),
    NODE("tls_private_key", T_STR, 0, 0, "", tls_private_key,
         "PEM file: its private key, unencrypted (readable by ldctd only)"),
    NODE("tls_ca_certificates", T_STR, 0, 0, "", tls_ca_certificates,
         "PEM file: the CA certificates that peers' certificates must chain to"),
    NODE("tls_crl", T_STR, 0, 0, "", tls_crl,
         "PEM file: certificate revocation lists, one from each CA in tls_ca_certificates;"
         " a peer whose certificate is revoked is refused (empty = no revocation check)"),
    NODE("tls_require_client_certificate", T_BOOL, 0, 0, "yes", tls_require_client_certificate,
         "refuse TLS callers without a certificate from tls_ca_certificates"),
    NODE("tls_caller_names", T_AENAMES, 0, 0, "", tls_caller_names,
         "comma-separated AE=NAME: calling AE title AE is accepted only over TLS, with a"
         " certificate issued for NAME (host name or IP address); empty = no binding"),
    NODE("tls_profile", T_TLSPROFILE, 0, 0, "bcp195-nd", tls_profile,
         "bcp195-nd (TLS 1.2 or later only) | bcp195 (also falls back to TLS 1.0 and the"
         " retired AES and Basic profiles, for older peers)"),
    DEST("host", T_STR, 0, 0, "", host, "host name or address"),
    DEST("port", T_INT, 1, 65535, "104", port, "TCP port"),
    DEST("ae_title", T_AE, 0, 0, "", ae_title, "the destination's AE title"),
    DEST("timeout", T_INT, 1, 3600, "30", timeout, "seconds per network step"),
    DEST("retry_initial_seconds", T_INT, 1, 86400, "10", retry_initial_seconds, ""),
    DEST("retry_multiplier", T_DOUBLE, 1, 10, "2", retry_multiplier, ""),
    DEST("retry_max_seconds", T_INT, 1, 604800, "600", retry_max_seconds, ""),
    DEST("retry_max_attempts", T_INT, 1, 10000, "20", retry_max_attempts,
         "then the send is dead (ldct retry requeues it)"),
    DEST("tls", T_BOOL, 0, 0, "no", tls,
         "send over TLS: the peer's certificate must chain to the node's tls_ca_certificates;"
         " the node's tls_certificate, when set, is ours"),
    DEST("tls_peer_name", T_STR, 0, 0, "", tls_peer_name,
         "with tls: the host name or IP address the destination's certificate must carry"
         " (a DNS name in subjectAltName, else its common name; an IP address only in"
         " subjectAltName); empty: any certificate of the CA"),
    RULE("match.modality", T_STR, 0, 0, "", modality, "wildcard on Modality"),
    RULE("match.calling_ae", T_STR, 0, 0, "", calling_ae, "wildcard on the sender's AE"),
    RULE("match.called_ae", T_STR, 0, 0, "", called_ae, "wildcard on the AE it was sent to"),
    RULE("match.series_description", T_STR, 0, 0, "", series_description, "wildcard"),
    RULE("match.protocol_name", T_STR, 0, 0, "", protocol_name, "wildcard"),
    RULE("match.body_part_examined", T_STR, 0, 0, "", body_part_examined, "wildcard"),
    RULE("match.manufacturer", T_STR, 0, 0, "", manufacturer, "wildcard"),
    RULE("match.image_type", T_STR, 0, 0, "", image_type,
         "wildcard on every value of Image Type, e.g. *AXIAL*"),
    RULE("match.slice_thickness", T_RANGE, 0, 0, "", slice_thickness, "mm, LO..HI"),
    RULE("match.kvp", T_RANGE, 0, 0, "", kvp, "kV, LO..HI"),
    RULE("match.ctdivol", T_RANGE, 0, 0, "", ctdivol, "mGy, LO..HI"),
    RULE("match.exposure", T_RANGE, 0, 0, "", exposure, "mAs, LO..HI"),
    RULE("action", T_ACTION, 0, 0, "process", action, "process | both | route | discard"),
    RULE("algorithm", T_ALGORITHM, 0, 0, "auto", algorithm,
         "auto | nlm2d | nlm3d | anlm | adaptive4d | fdk"),
    RULE("strength", T_DOUBLE, 0.01, 10, "1.0", strength, "scales h from the noise"),
    RULE("search_radius", T_INT, 0, 15, "0", search_radius, "0 = the algorithm's default"),
    RULE("patch_radius", T_INT, 0, 5, "0", patch_radius, "0 = the algorithm's default"),
    RULE("patch_weighting", T_WEIGHTING, 0, 0, "uniform", patch_weighting,
         "nlm2d, nlm3d: uniform | gaussian (seed 000's weights of patch positions)"),
    RULE("distance_cutoff", T_DOUBLE, 0, 80, "4", distance_cutoff,
         "nlm2d, nlm3d: weight 0 for a patch distance above this many h^2, so pairs too"
         " unlike to be the same tissue do not blur lesions and edges; 0 = off (every weight"
         " kept), scikit-image uses 5; anlm and adaptive4d ignore it"),
    RULE("h", T_DOUBLE, 0, 10000, "0", h, "filter strength in HU; 0 = from the noise"),
    RULE("destinations", T_NAMELIST, 0, 0, "", destinations, "destination names"),
    RULE("series_description_suffix", T_STR, 0, 0, "\" [DN]\"", series_description_suffix, ""),
    RULE("series_number_offset", T_INT, 0, 100000, "1000", series_number_offset, ""),
    RULE("stable_seconds", T_INT, 0, 86400, "0", stable_seconds, "0 = the node's"),
    RULE("priority", T_INT, -1000, 1000, "0", priority, "higher first"),
    RULE("matrix", T_INT, 16, 2048, "512", fdk_matrix, "fdk: image columns and rows"),
    RULE("fov_mm", T_DOUBLE, 0, 1000, "0", fdk_fov_mm,
         "fdk: field of view (mm); 0 = what the fan covers"),
    RULE("slice_thickness_mm", T_DOUBLE, 0, 100, "0", fdk_slice_mm,
         "fdk: slice thickness and spacing (mm); 0 = detector row pitch at the isocentre"),
    RULE("slices", T_INT, 0, 4096, "0", fdk_slices, "fdk: number of slices; 0 = the cone's"),
    RULE("kernel", T_KERNEL, 0, 0, "shepp-logan", fdk_kernel,
         "fdk: ram-lak | shepp-logan | cosine | hamming | hann"),
    RULE("mu_water", T_DOUBLE, 0.001, 1, "0.0193", fdk_mu_water,
         "fdk: water's linear attenuation (1/mm) for HU; 0.0193 ~ 70 keV"),
    RULE("adaptive4d.downsample", T_INT, 0, 2, "0", a4d_downsample,
         "adaptive4d: tensor grid 1 (full) or 2 (half); 0 = default 2"),
    RULE("adaptive4d.m_alpha", T_DOUBLE, -1, 10, "-1", a4d_m_alpha,
         "adaptive4d: M-function overshoot; -1 = default 0"),
    RULE("adaptive4d.m_beta", T_DOUBLE, -1, 10, "-1", a4d_m_beta,
         "adaptive4d: M-function steepness; -1 = default 2"),
    RULE("adaptive4d.m_reference", T_A4DREF, 0, 0, "default", a4d_m_reference,
         "adaptive4d: what the M-function's x is relative to: noise (the median tensor "
         "norm, the default) or max (the paper's)"),
    RULE("adaptive4d.m_pass", T_DOUBLE, -1, 1000, "-1", a4d_m_pass,
         "adaptive4d: all-pass threshold in units of m_sigma (0 = none); -1 = default 2"),
    RULE("adaptive4d.m_sigma", T_DOUBLE, -1, 100, "-1", a4d_m_sigma,
         "adaptive4d: M-function noise threshold; -1 = default 3 (times strength)"),
    RULE("adaptive4d.mu_alpha", T_DOUBLE, -1, 1, "-1", a4d_mu_alpha,
         "adaptive4d: mu-function isotropy threshold; -1 = default 0.4"),
    RULE("adaptive4d.mu_beta", T_DOUBLE, -1, 10, "-1", a4d_mu_beta,
         "adaptive4d: mu-function steepness; -1 = default 2"),
    RULE("adaptive4d.t_scale", T_DOUBLE, -1, 10, "-1", a4d_t_scale,
         "adaptive4d: voxels one time point counts in directions; -1 = default 3"),
    RULE("adaptive4d.pass_t", T_DOUBLE, -1, 1000, "-1", a4d_pass_t,
         "adaptive4d: all-pass gate along t (0 = none); -1 = default 0"),
    RULE("adaptive4d.static_sigma_t", T_DOUBLE, -1, 50, "-1", a4d_static_sigma_t,
         "adaptive4d: temporal lowpass where only noise changes along t, time points "
         "(0 = off); -1 = default 6"),
    RULE("adaptive4d.static_t", T_DOUBLE, -1, 1000, "-1", a4d_static_t,
         "adaptive4d: its threshold (higher smooths slow time curves more); -1 = default 4"),
};
#define NOPTIONS (sizeof OPTIONS / sizeof OPTIONS[0])

/* By OPTIONS index, the line that gave a key of [node] or of each
 * [destination] (a list: its first line), negated when its value was
 * refused; 0: not given. Errors found after the parse point there. */
typedef struct key_lines {
    int node[NOPTIONS];
    int dest[CFG_DEST_MAX][NOPTIONS];
} key_lines;

typedef struct parse_ctx {
    ldct_config *cfg;
    FILE *f;
    int line;
    sect_kind kind;
    int valid_section; /* 0 after an unknown section: its keys are skipped */
    char section[CFG_NAME_MAX * 2];
    key_lines keys;
} parse_ctx;

static void add_error(ldct_config *cfg, int line, const char *fmt, ...)
{
    if (cfg->nerr < CFG_ERR_MAX) {
        char msg[200];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        const char *file = cfg->path[0] ? cfg->path : "(defaults)";
        snprintf(cfg->err[cfg->nerr], sizeof cfg->err[0], "%s:%d: %s", file, line, msg);
    }
    cfg->nerr++;
}

/* Copies `s` without surrounding blanks or one pair of double quotes.
 * `out` may be `s` itself (a section name is unquoted in place), so the
 * copy is a memmove: the two ranges overlap by all but the quote. */
static void unquote(const char *s, char *out, size_t len)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        n--;
    if (n >= 2 && s[0] == '"' && s[n - 1] == '"') {
        s++;
        n -= 2;
    }
    if (n >= len)
        n = len - 1;
    memmove(out, s, n);
    out[n] = '\0';
}

static int parse_bool(const char *v, int *out)
{
    static const char *const yes[] = {"1", "yes", "true", "on"};
    static const char *const no[] = {"0", "no", "false", "off"};
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(v, yes[i]) == 0)
            return *out = 1, 0;
        if (strcasecmp(v, no[i]) == 0)
            return *out = 0, 0;
    }
    return -1;
}

/* DICOM AE titles: 1..16 printable characters, no backslash, not only
 * spaces (PS3.5: leading and trailing spaces are not significant, and a
 * value of spaces alone shall not be used). */
static int ae_valid(const char *ae)
{
    size_t n = strlen(ae);
    if (n == 0 || n > CFG_AE_MAX || strspn(ae, " ") == n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isprint((unsigned char)ae[i]) || ae[i] == '\\')
            return 0;
    return 1;
}

static const char *const ACTIONS[] = {"process", "both", "route", "discard", NULL};
static const char *const KERNELS[] = {"ram-lak", "shepp-logan", "cosine", "hamming", "hann", NULL};
static const char *const WEIGHTINGS[] = {"uniform", "gaussian", NULL};
/* adaptive4d.m_reference: index 0 keeps the engine's default */
static const char *const A4D_REFS[] = {"default", "noise", "max", NULL};
static const char *const TLS_PROFILES[] = {"bcp195-nd", "bcp195", NULL}; /* CFG_TLS_* */
static const char *const ALGORITHMS[] = {"auto",       "nlm2d", "nlm3d", "anlm",
                                         "adaptive4d", "fdk",   NULL};

static const char *parse_enum(const char *v, const char *const *names, int *out, const char *err)
{
    for (int i = 0; names[i]; i++)
        if (strcasecmp(v, names[i]) == 0)
            return *out = i, NULL;
    return err;
}

/* Parses all of `s` as a finite number into *out; 0 on success. NaN
 * compares false with everything, so a range of it matched nothing, and
 * an infinity is a bound too large to mean anything (1e999). */
static int parse_number(const char *s, double *out)
{
    char *end;
    *out = strtod(s, &end);
    return end == s || *end != '\0' || !isfinite(*out);
}

/* "LO..HI", "LO..", "..HI" or a single value X (= X..X). */
static const char *parse_range(const char *v, cfg_range *r)
{
    r->set = 0;
    if (!v[0])
        return NULL;
    double lo = -INFINITY, hi = INFINITY;
    const char *dots = strstr(v, "..");
    if (!dots) {
        if (parse_number(v, &lo))
            return "expected a number or a range LO..HI";
        hi = lo;
    } else {
        char left[64];
        if ((size_t)(dots - v) >= sizeof left) /* cut, it would be another number */
            return "expected a range LO..HI";
        snprintf(left, sizeof left, "%.*s", (int)(dots - v), v);
        if ((left[0] && parse_number(left, &lo)) || (dots[2] && parse_number(dots + 2, &hi)))
            return "expected a range LO..HI";
    }
    if (lo > hi)
        return "range is empty (LO > HI)";
    *r = (cfg_range){1, lo, hi};
    return NULL;
}

static int name_valid(const char *n)
{
    return strlen(n) <= CFG_NAME_MAX;
}

/* parse_list's check for lists whose entries are checked afterwards. */
static int any_entry(const char *e)
{
    return e[0] != '\0';
}

/* Whether the first count of items hold item. */
static int list_has(const char *items, size_t item_size, int count, const char *item)
{
    for (int i = 0; i < count; i++)
        if (!strcmp(items + (size_t)i * item_size, item))
            return 1;
    return 0;
}

/* Splits a comma-separated list into items after the count already there
 * (the caller sets *count to 0 for a new list); each item goes through
 * `check`, and a repeated one is kept once. */
static const char *parse_list(const char *v, char *items, size_t item_size, int *count,
                              int (*check)(const char *), int max)
{
    char buf[2048]; /* a line holds at most 199 bytes (ini.h INI_MAX_LINE) */
    snprintf(buf, sizeof buf, "%s", v);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char item[CFG_AE_MAX + CFG_HOST_MAX + 2]; /* tls_caller_names: AE=NAME */
        unquote(tok, item, sizeof item);
        if (item[0] == '\0')
            continue;
        if (!check(item) || strlen(item) >= item_size)
            return "invalid list entry";
        if (list_has(items, item_size, *count, item))
            continue; /* `pacs, pacs` is one destination, not two sends */
        if (*count == max)
            return "too many list entries";
        memcpy(items + (size_t)*count * item_size, item, strlen(item) + 1);
        (*count)++;
    }
    return NULL;
}

/* A numeric IPv4 or IPv6 address into its canonical text (inet_ntop's, as
 * peers' addresses are written), so entries compare with strcmp; 0 if `a`
 * is no numeric address (host names are not resolved: a name that
 * resolved differently later would let other peers in or keep ours out). */
static int canonical_address(const char *a, char *out, size_t len)
{
    unsigned char bin[sizeof(struct in6_addr)];
    int af = inet_pton(AF_INET, a, bin) == 1 ? AF_INET : AF_INET6;
    if (af == AF_INET6 && inet_pton(AF_INET6, a, bin) != 1)
        return 0;
    if (af == AF_INET6 && IN6_IS_ADDR_V4MAPPED((struct in6_addr *)bin)) {
        memmove(bin, bin + 12, 4); /* ::ffff:a.b.c.d is the IPv4 peer a.b.c.d */
        af = AF_INET;
    }
    return inet_ntop(af, bin, out, (socklen_t)len) != NULL;
}

static const char k_numeric_msg[] =
    "expected a numeric IPv4 or IPv6 address (host names are not resolved)";

/* Why an allowed_hosts entry with an IPv6 zone id (fe80::1%eth0) or a
 * range (10.0.0.0/24) is refused, naming it; NULL for any other entry.
 * A zone cannot be honoured: DCMTK reports a peer's address without its
 * zone (inet_ntop of the address alone), so the entry would have to match
 * that address on every link, wider than written; and the DICOM port of
 * DCMTK 3.6.7 listens on IPv4 only, so no IPv6 peer reaches the list at
 * all. Refused at load, with the line, rather than matching nothing (or
 * too much) at run time. Short: config errors keep 255 bytes, the file,
 * line and value included. Thread-local, as too_long. */
static const char *host_entry_refusal(const char *e)
{
    static _Thread_local char msg[CFG_HOST_MAX + 192];
    const char *zone = strchr(e, '%');
    if (zone)
        snprintf(msg, sizeof msg,
                 "%s: IPv6 zone ids (%s) are not supported; the DICOM port takes IPv4 peers "
                 "only: list the peer's IPv4 address",
                 e, zone);
    else if (strchr(e, '/'))
        snprintf(msg, sizeof msg, "%s: address ranges are not supported: list each peer's address",
                 e);
    else
        return NULL;
    return msg;
}

/* allowed_hosts: numeric addresses, stored canonical, after the l->n
 * already there. */
static const char *parse_host_list(const char *v, cfg_host_list *l)
{
    const int first = l->n;
    const char *err = parse_list(v, &l->v[0][0], sizeof l->v[0], &l->n, any_entry, CFG_LIST_MAX);
    for (int i = first; !err && i < l->n; i++) {
        char canon[INET6_ADDRSTRLEN];
        const char *refused = host_entry_refusal(l->v[i]);
        if (refused)
            return refused;
        if (!canonical_address(l->v[i], canon, sizeof canon) || strlen(canon) >= sizeof l->v[i])
            return "expected numeric IPv4 or IPv6 addresses separated by commas (host names are"
                   " not resolved)";
        memcpy(l->v[i], canon, strlen(canon) + 1);
    }
    return err;
}

static int is_peer_name(const char *s);

/* Leading and trailing spaces dropped, as from a received AE title. */
static void trim_spaces(char *s)
{
    size_t n = strlen(s), b = strspn(s, " ");
    while (n > b && s[n - 1] == ' ')
        n--;
    memmove(s, s + b, n - b);
    s[n - b] = '\0';
}

/* tls_caller_names: "AE=NAME" entries (split at the last '=', each side
 * unquoted and trimmed) after the l->n already there, every AE title once
 * (in any case: see config_ae_bound_name). */
static const char *parse_ae_names(const char *v, cfg_ae_names *l)
{
    char entries[CFG_LIST_MAX][CFG_AE_MAX + CFG_HOST_MAX + 2];
    int n = 0;
    const char *err = parse_list(v, &entries[0][0], sizeof entries[0], &n, any_entry, CFG_LIST_MAX);
    for (int i = 0; !err && i < n; i++) {
        char *eq = strrchr(entries[i], '=');
        if (!eq)
            return "expected AE=NAME entries separated by commas, e.g. CT1=ct1.example.org";
        *eq = '\0';
        char ae[CFG_AE_MAX + 2], name[CFG_HOST_MAX + 2];
        unquote(entries[i], ae, sizeof ae);
        unquote(eq + 1, name, sizeof name);
        trim_spaces(ae);
        if (!ae_valid(ae))
            return "an AE title before '=' is empty, longer than 16 characters or has a backslash";
        if (!is_peer_name(name))
            return "a name after '=' is neither a host name nor an IP address";
        if (config_ae_bound_name(l, ae))
            return "an AE title is bound twice";
        if (l->n == CFG_LIST_MAX)
            return "too many list entries";
        snprintf(l->ae[l->n], sizeof l->ae[0], "%s", ae);
        snprintf(l->name[l->n], sizeof l->name[0], "%s", name);
        l->n++;
    }
    return err;
}

/* "value too long (at most N bytes)". Thread-local, as out_of_range. */
static const char *too_long(const opt_def *o)
{
    static _Thread_local char msg[48];
    snprintf(msg, sizeof msg, "value too long (at most %zu bytes)", o->size - 1);
    return msg;
}

/* http_bind: one numeric address, stored canonical. */
static const char *parse_address(const char *v, char *field, size_t size)
{
    char canon[INET6_ADDRSTRLEN];
    if (!canonical_address(v, canon, sizeof canon))
        return k_numeric_msg;
    if (strlen(canon) >= size)
        return "value too long";
    memcpy(field, canon, strlen(canon) + 1);
    return NULL;
}

/* A UID root leaves room for the suffix scp_uid_new appends (~40 chars). */
static int uid_root_valid(const char *r)
{
    size_t n = strlen(r);
    if (n == 0 || n > 24 || r[0] == '.' || r[n - 1] == '.' || strstr(r, ".."))
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (r[i] != '.' && !isdigit((unsigned char)r[i]))
            return 0;
        if (r[i] == '0' && (i == 0 || r[i - 1] == '.') && i + 1 < n && r[i + 1] != '.')
            return 0; /* no leading zero in a component */
    }
    return 1;
}

const char *config_uid_root_check(const char *root)
{
    return uid_root_valid(root)
               ? NULL
               : "a UID root is digits and dots (no empty or zero-led component), at most "
                 "24 characters";
}

/* "auto", "cpu", or a comma list of "gpu" / "gpu:N" / "cpu". */
static int devices_valid(const char *v)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", v);
    char *save = NULL;
    int n = 0;
    for (char *t = strtok_r(buf, ", ", &save); t; t = strtok_r(NULL, ", ", &save), n++) {
        char *end = NULL;
        if (strcmp(t, "auto") == 0 || strcmp(t, "cpu") == 0 || strcmp(t, "gpu") == 0)
            continue;
        if (strncmp(t, "gpu:", 4) != 0 || !isdigit((unsigned char)t[4]) ||
            (strtol(t + 4, &end, 10), *end))
            return 0;
    }
    return n > 0;
}

/* Stores `value` into the field described by `o`; returns an error message or NULL. */
/* "out of range (LO to HI)": the bounds, so a reader need not look them up.
 * Thread-local: the daemon loads configs on its loop, the CLI on main. */
static const char *out_of_range(const opt_def *o)
{
    static _Thread_local char msg[80];
    snprintf(msg, sizeof msg, "out of range (%.15g to %.15g)", o->min, o->max); /* exact */
    return msg;
}

const char *config_suffix_check(const char *s)
{
    if (!utf8_valid(s))
        return "not valid UTF-8 (the configuration file must be saved as UTF-8)";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p == '\\')
            return "contains a backslash, which would split the Series Description into two "
                   "values";
        else if (*p < 0x20 || *p == 0x7F || (p[0] == 0xC2 && p[1] >= 0x80 && p[1] <= 0x9F))
            return "contains a control character"; /* C0, DEL, or C1 (U+0080..U+009F) */
    return NULL;
}

static const char *set_option(const opt_def *o, void *base, const char *raw, int append)
{
    char v[CFG_PATH_MAX];
    unquote(raw, v, sizeof v);
    append = append && v[0]; /* an empty value resets a list, as in systemd's files */
    char *field = (char *)base + o->off;
    switch (o->type) {
    case T_AE:
        /* A destination's may be left empty here: validate() names the
         * section that lacks it. The node's own may not: the listener
         * would refuse to start with a message that does not name it. */
        if ((v[0] || o->sect == S_NODE) && !ae_valid(v))
            return "an AE title has 1 to 16 printable characters (not only spaces) and no "
                   "backslash";
        /* fall through */
    case T_UIDROOT:
        if (o->type == T_UIDROOT && config_uid_root_check(v))
            return config_uid_root_check(v);
        /* fall through */
    case T_DEVICES:
        if (o->type == T_DEVICES && !devices_valid(v))
            return "expected auto, cpu, or a list like gpu:0, gpu:1";
        /* fall through */
    case T_STR:
        if (strlen(v) >= o->size)
            return too_long(o);
        if (o->min > 0 && !v[0])
            return "must not be empty";
        /* Rule text is UTF-8: the series' values are converted to it before
         * they are compared, and the suffix is converted from it. A file
         * saved in Latin-1 would match nothing and write '?' silently. */
        if (o->sect == S_RULE && !utf8_valid(v))
            return "not valid UTF-8 (the configuration file must be saved as UTF-8)";
        if (o->sect == S_RULE && !strcmp(o->name, "series_description_suffix") &&
            config_suffix_check(v))
            return config_suffix_check(v);
        memcpy(field, v, strlen(v) + 1);
        return NULL;
    case T_INT: {
        char *end;
        errno = 0;
        long n = strtol(v, &end, 10);
        /* bounds are doubles so one table holds integer and real options */
        if (end == v || *end != '\0')
            return "not an integer";
        if (errno == ERANGE || n < o->min || n > o->max) /* beyond long: out of range too */
            return out_of_range(o);
        *(int *)field = (int)n;
        return NULL;
    }
    case T_DOUBLE: {
        char *end;
        double d = strtod(v, &end);
        if (end == v || *end != '\0')
            return "not a number";
        if (!(d >= o->min && d <= o->max))
            return out_of_range(o);
        memcpy(field, &d, sizeof d);
        return NULL;
    }
    case T_RANGE:
        return parse_range(v, (cfg_range *)field);
    case T_ACTION:
        return parse_enum(v, ACTIONS, (int *)field, "expected process, both, route or discard");
    case T_ALGORITHM:
        return parse_enum(v, ALGORITHMS, (int *)field,
                          "expected auto, nlm2d, nlm3d, anlm, adaptive4d or fdk");
    case T_KERNEL:
        return parse_enum(v, KERNELS, (int *)field,
                          "expected ram-lak, shepp-logan, cosine, hamming or hann");
    case T_WEIGHTING:
        return parse_enum(v, WEIGHTINGS, (int *)field, "expected uniform or gaussian");
    case T_A4DREF:
        return parse_enum(v, A4D_REFS, (int *)field, "expected default, noise or max");
    case T_TLSPROFILE:
        return parse_enum(v, TLS_PROFILES, (int *)field, "use bcp195-nd or bcp195");
    case T_NAMELIST: {
        cfg_rule *r = (cfg_rule *)((char *)base);
        r->ndest = append ? r->ndest : 0;
        return parse_list(v, &r->destinations[0][0], sizeof r->destinations[0], &r->ndest,
                          name_valid, CFG_RULE_DEST_MAX);
    }
    case T_BOOL:
        return parse_bool(v, (int *)field) ? "expected yes or no" : NULL;
    case T_LOGLEVEL: {
        int lvl = log_level_parse(v);
        if (lvl < 0)
            return "expected error, warning, notice, info or debug";
        *(int *)field = lvl;
        return NULL;
    }
    case T_AELIST: {
        cfg_ae_list *l = (cfg_ae_list *)field;
        l->n = append ? l->n : 0;
        return parse_list(v, &l->v[0][0], sizeof l->v[0], &l->n, ae_valid, CFG_LIST_MAX);
    }
    case T_HOSTLIST:
        ((cfg_host_list *)field)->n = append ? ((cfg_host_list *)field)->n : 0;
        return parse_host_list(v, (cfg_host_list *)field);
    case T_AENAMES:
        ((cfg_ae_names *)field)->n = append ? ((cfg_ae_names *)field)->n : 0;
        return parse_ae_names(v, (cfg_ae_names *)field);
    case T_ADDR:
        return parse_address(v, field, o->size);
    }
    return "unknown option type";
}

static void apply_defaults(sect_kind kind, void *base)
{
    for (size_t i = 0; i < NOPTIONS; i++)
        if (OPTIONS[i].sect == kind)
            (void)set_option(&OPTIONS[i], base, OPTIONS[i].def, 0);
}

void config_rule_init(cfg_rule *r)
{
    memset(r, 0, sizeof *r);
    apply_defaults(S_RULE, r);
}

static const opt_def *find_option(sect_kind kind, const char *name)
{
    for (size_t i = 0; i < NOPTIONS; i++)
        if (OPTIONS[i].sect == kind && strcmp(OPTIONS[i].name, name) == 0)
            return &OPTIONS[i];
    return NULL;
}

const char *config_rule_option_set(cfg_rule *r, const char *name, const char *value)
{
    const opt_def *o = find_option(S_RULE, name);
    return o ? set_option(o, r, value, 0) : "unknown option";
}

static int unknown_section(parse_ctx *pc, const char *section, const char *kind, const char *name);

/* Handles a "[...]" header: returns 0 if known. */
static int begin_section(parse_ctx *pc, const char *section)
{
    ldct_config *cfg = pc->cfg;
    char kind[32] = "", name[CFG_NAME_MAX * 2] = "";
    if (sscanf(section, "%31s %127[^\n]", kind, name) < 1)
        return -1;
    unquote(name, name, sizeof name);
    if (strcmp(kind, "node") == 0 && !name[0]) {
        pc->kind = S_NODE;
        return 0;
    }
    int is_dest = strcmp(kind, "destination") == 0, is_rule = strcmp(kind, "rule") == 0;
    if (!is_dest && !is_rule)
        return unknown_section(pc, section, kind, name);
    if (!name[0] || strlen(name) > CFG_NAME_MAX)
        return add_error(cfg, pc->line, "[%s] needs a name of 1 to %d characters", kind,
                         CFG_NAME_MAX),
               -1;
    if (is_dest) {
        if (config_destination_find(cfg, name))
            return add_error(cfg, pc->line, "destination '%s' defined twice", name), -1;
        if (cfg->ndest == CFG_DEST_MAX)
            return add_error(cfg, pc->line, "more than %d destinations", CFG_DEST_MAX), -1;
        cfg_destination *d = &cfg->dest[cfg->ndest++];
        apply_defaults(S_DEST, d);
        snprintf(d->name, sizeof d->name, "%s", name);
        d->line = pc->line;
        pc->kind = S_DEST;
        return 0;
    }
    for (int i = 0; i < cfg->nrule; i++)
        if (strcmp(cfg->rule[i].name, name) == 0)
            return add_error(cfg, pc->line, "rule '%s' defined twice", name), -1;
    if (cfg->nrule == CFG_RULE_MAX)
        return add_error(cfg, pc->line, "more than %d rules", CFG_RULE_MAX), -1;
    cfg_rule *r = &cfg->rule[cfg->nrule];
    config_rule_init(r);
    snprintf(r->name, sizeof r->name, "%s", name);
    r->line = pc->line;
    r->order = cfg->nrule++;
    pc->kind = S_RULE;
    return 0;
}

/* Edit distance of two short option names (insertions, deletions,
 * substitutions, transpositions of neighbours); large for long names. */
static int name_distance(const char *a, const char *b)
{
    enum { N = 48 };
    const int la = (int)strlen(a), lb = (int)strlen(b);
    if (la >= N || lb >= N)
        return N;
    int d[N][N];
    for (int i = 0; i <= la; i++)
        d[i][0] = i;
    for (int j = 0; j <= lb; j++)
        d[0][j] = j;
    for (int i = 1; i <= la; i++)
        for (int j = 1; j <= lb; j++) {
            int v = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            v = d[i - 1][j] + 1 < v ? d[i - 1][j] + 1 : v;
            v = d[i][j - 1] + 1 < v ? d[i][j - 1] + 1 : v;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    return d[la][lb];
}

/* The known option of this section closest to a misspelt name (at most 2
 * edits), or NULL. */
static const char *closest_option(sect_kind kind, const char *name)
{
    const char *best = NULL;
    int bd = 3;
    for (size_t i = 0; i < NOPTIONS; i++) {
        if (OPTIONS[i].sect != kind)
            continue;
        int dist = name_distance(name, OPTIONS[i].name);
        if (dist < bd) {
            bd = dist;
            best = OPTIONS[i].name;
        }
    }
    return best;
}

/* An unknown section's error (-1), with the known kind closest to its own
 * (at most 2 edits): "[destinaton pacs] (did you mean [destination pacs]?)". */
static int unknown_section(parse_ctx *pc, const char *section, const char *kind, const char *name)
{
    static const char *const KINDS[] = {"node", "destination", "rule"};
    const char *near = NULL;
    int bd = 3;
    for (size_t i = 0; i < sizeof KINDS / sizeof KINDS[0]; i++) {
        int dist = name_distance(kind, KINDS[i]);
        if (dist < bd)
            bd = dist, near = KINDS[i];
    }
    const int node = near && strcmp(near, "node") == 0;
    if (node && bd == 0)
        add_error(pc->cfg, pc->line, "[node] takes no name (found [%s])", section);
    else if (near)
        add_error(pc->cfg, pc->line, "unknown section [%s] (did you mean [%s%s%s]?)", section, near,
                  node ? "" : " ",
                  node      ? ""
                  : name[0] ? name
                            : "NAME");
    else
        add_error(pc->cfg, pc->line,
                  "unknown section [%s] (the sections are [node],"
                  " [destination NAME] and [rule NAME])",
                  section);
    return -1;
}

static void unknown_option(parse_ctx *pc, const char *section, const char *name)
{
    const char *near = closest_option(pc->kind, name);
    if (near)
        add_error(pc->cfg, pc->line, "unknown option '%s' in [%s] (did you mean %s?)", name,
                  section, near);
    else
        add_error(pc->cfg, pc->line, "unknown option '%s' in [%s]", name, section);
}

/* Whether o is a [node] list given before in this file: a line holds at
 * most 199 bytes, so a long list goes on in the same key on more lines (a
 * rule's destinations do the same: on_entry). */
static int list_continues(parse_ctx *pc, const opt_def *o)
{
    if (o->type != T_AELIST && o->type != T_HOSTLIST && o->type != T_AENAMES)
        return 0;
    return pc->keys.node[o - OPTIONS] != 0;
}

/* The line of a rule's first destinations key, and of each destination
 * that a destinations line added (from index `from`), for validate_rule. */
static void mark_destination_lines(cfg_rule *r, int from, int line)
{
    if (!r->dest_line)
        r->dest_line = line;
    for (int k = from; k < r->ndest; k++)
        r->dest_lines[k] = line;
}

static int on_entry(void *user, const char *section, const char *name, const char *value)
{
    parse_ctx *pc = user;
    if (section[0] == '\0') {
        add_error(pc->cfg, pc->line, "'%s' is outside any section (start with [node])", name);
        return 1;
    }
    if (!pc->valid_section)
        return 1;
    const opt_def *o = find_option(pc->kind, name);
    if (!o) {
        unknown_option(pc, section, name);
        return 1;
    }
    void *base = pc->kind == S_NODE   ? (void *)&pc->cfg->node
                 : pc->kind == S_DEST ? (void *)&pc->cfg->dest[pc->cfg->ndest - 1]
                                      : (void *)&pc->cfg->rule[pc->cfg->nrule - 1];
    const int append =
        o->type == T_NAMELIST ? ((cfg_rule *)base)->dest_line != 0 : list_continues(pc, o);
    const int listed = o->type == T_NAMELIST && append ? ((cfg_rule *)base)->ndest : 0;
    const char *err = set_option(o, base, value, append);
    if (err)
        add_error(pc->cfg, pc->line, "%s = %s: %s", name, value, err);
    if (o->type == T_NAMELIST)
        mark_destination_lines((cfg_rule *)base, listed, pc->line);
    int *lines = pc->kind == S_NODE   ? pc->keys.node
                 : pc->kind == S_DEST ? pc->keys.dest[pc->cfg->ndest - 1]
                                      : NULL;
    int *at = lines ? &lines[o - OPTIONS] : NULL;
    if (at && !append) /* a refused repeat keeps the line of the value in effect */
        *at = !err ? pc->line : *at > 0 ? *at : -pc->line;
    return 1;
}

/* Section headers are handled here, as they are read, so that every header
 * (also a repeated or an empty one) is checked on its own line. */
static void see_header(parse_ctx *pc, const char *text)
{
    while (isspace((unsigned char)*text))
        text++;
    if (*text != '[')
        return;
    const char *end = strchr(text, ']');
    pc->valid_section = 0;
    if (!end)
        return; /* inih reports the syntax error */
    snprintf(pc->section, sizeof pc->section, "%.*s", (int)(end - text - 1), text + 1);
    pc->valid_section = begin_section(pc, pc->section) == 0;
}

/* Reads and drops the rest of the line; 0 if there was none (the line
 * just fit the buffer). */
static int skip_rest_of_line(parse_ctx *pc)
{
    int c = fgetc(pc->f);
    if (c == '\n' || c == EOF)
        return 0;
    while ((c = fgetc(pc->f)) != EOF && c != '\n')
        ;
    return 1;
}

/* fgets, but it also gives the length read, so a NUL byte in the line is
 * seen: as a C string the line would end there, and the rest of the value
 * be dropped silently ("state_dir = /srv/ldct\0x" read as /srv/ldct). */
static char *read_line(char *str, int num, FILE *f, int *len)
{
    int n = 0, c;
    while (n < num - 1 && (c = getc(f)) != EOF) {
        str[n++] = (char)c;
        if (c == '\n')
            break;
    }
    str[n] = '\0';
    *len = n;
    return n ? str : NULL;
}

/* inih reads through this so errors can name the line being parsed. A
 * line longer than inih's buffer, or with a NUL byte (a binary file, or
 * text saved as UTF-16), is reported, its rest read and dropped, and inih
 * gets an empty line: else it would take the cut value, and the rest as a
 * line of its own. */
static char *counting_reader(char *str, int num, void *stream)
{
    parse_ctx *pc = stream;
    int len;
    char *s = read_line(str, num, pc->f, &len);
    if (!s)
        return NULL;
    pc->line++;
    int nul = memchr(s, '\0', (size_t)len) != NULL;
    int cut = len + 1 == num && s[len - 1] != '\n' && skip_rest_of_line(pc);
    if (nul)
        add_error(pc->cfg, pc->line, "contains a NUL byte (save the file as UTF-8 text)");
    else if (cut)
        add_error(pc->cfg, pc->line, "line too long (at most %d bytes)", num - 1);
    if (nul || cut) {
        str[0] = '\n';
        str[1] = '\0';
    }
    /* inih takes an indented line after `name = value` for more of that
     * value (a multi-line value, which no option has): an indented option
     * was then an error about the one before it, and an indented section
     * header gave its own name as that option's value, in the section it
     * began, silently. Every line is read as if it were not indented. */
    size_t lead = strspn(s, " \t");
    if (lead)
        memmove(s, s + lead, strlen(s + lead) + 1);
    see_header(pc, s);
    return s;
}

static void validate_rule(ldct_config *cfg, const cfg_rule *r)
{
    for (int k = 0; k < r->ndest; k++)
        if (!config_destination_find(cfg, r->destinations[k]))
            add_error(cfg, r->dest_lines[k] ? r->dest_lines[k] : r->line,
                      "rule '%s': no [destination %s]", r->name, r->destinations[k]);
    if ((r->action == RULE_ROUTE || r->action == RULE_BOTH) && r->ndest == 0)
        add_error(cfg, r->line, "rule '%s': action %s needs destinations", r->name,
                  ACTIONS[r->action]);
}

/* Where the key `name` of a section was given (key_lines): its line,
 * negative when its value was refused, 0 when it was not given. */
static int given_at(const int *lines, sect_kind kind, const char *name)
{
    const opt_def *o = find_option(kind, name);
    return o ? lines[o - OPTIONS] : 0;
}

/* The line that gave the [node] key `name`, else that of `instead` (a key
 * left at its default is blamed on the key that needs it), else 0. */
static int node_line(const int *node_key_line, const char *name, const char *instead)
{
    const int line = abs(given_at(node_key_line, S_NODE, name));
    return line || !instead ? line : node_line(node_key_line, instead, NULL);
}

/* The status listener shares no port with a DICOM one: the second bind
 * would stop the start. */
static void validate_http_port(ldct_config *cfg, const int *key_line)
{
    const cfg_node *n = &cfg->node;
    if (n->http_port <= 0)
        return;
    const char *other = n->http_port == n->port       ? "port"
                        : n->http_port == n->tls_port ? "tls_port"
                                                      : NULL;
    if (other)
        add_error(cfg, node_line(key_line, "http_port", NULL),
                  "http_port %d is also %s: give the status listener its own port", n->http_port,
                  other);
}

/* The TLS listener's keys belong together; the files themselves are read
 * (and checked) by ldctd at start and by ldct check-config. Each error is
 * reported at the line of the key it is about. */
static void validate_tls(ldct_config *cfg, const int *key_line)
{
    const cfg_node *n = &cfg->node;
    if (n->port == 0 && n->tls_port <= 0)
        add_error(cfg, node_line(key_line, "port", NULL),
                  "port = 0 turns plain DICOM off: it needs tls_port (TLS only)");
    if (n->tls_port <= 0)
        return;
    const int port_line = node_line(key_line, "tls_port", NULL);
    if (n->tls_port == n->port)
        add_error(cfg, port_line, "tls_port %d is also port: give TLS its own port", n->tls_port);
    if (!n->tls_certificate[0] || !n->tls_private_key[0])
        add_error(cfg, port_line, "tls_port needs tls_certificate and tls_private_key");
    const int refused = given_at(key_line, S_NODE, "tls_require_client_certificate") < 0;
    if (n->tls_require_client_certificate && !n->tls_ca_certificates[0] && !refused)
        add_error(cfg, node_line(key_line, "tls_require_client_certificate", "tls_port"),
                  "tls_require_client_certificate needs tls_ca_certificates (or set it to no)");
}

/* A revocation list is checked against the CAs peers chain to; a bound AE
 * title calls over TLS with a verified certificate. */
static void validate_crl(ldct_config *cfg, const int *key_line)
{
    const cfg_node *n = &cfg->node;
    if (n->tls_crl[0] && !n->tls_ca_certificates[0])
        add_error(cfg, node_line(key_line, "tls_crl", NULL), "tls_crl needs tls_ca_certificates");
    if (n->tls_caller_names.n > 0 && (n->tls_port <= 0 || !n->tls_ca_certificates[0]))
        add_error(cfg, node_line(key_line, "tls_caller_names", NULL),
                  "tls_caller_names needs tls_port and tls_ca_certificates (bound AE titles are"
                  " accepted over TLS only)");
}

/* 1 when s is a host name (dot-separated labels of letters, digits and
 * hyphens, 1..63 each, no hyphen at either end, the last not all digits)
 * or an IPv4 / IPv6 address as inet_pton reads it: what OpenSSL's host
 * and IP checks can match, with no port, brackets or zone. */
static int is_peer_name(const char *s)
{
    unsigned char bin[16];
    if (inet_pton(AF_INET, s, bin) == 1 || inet_pton(AF_INET6, s, bin) == 1)
        return 1;
    size_t n = strlen(s), label = 0;
    int all_digits = 1;
    if (n == 0 || n > 253 || s[0] == '.' || s[n - 1] == '.')
        return 0;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || s[i] == '.') {
            if (label == 0 || label > 63 || s[i - 1] == '-' || s[i - label] == '-')
                return 0;
            if (i == n && all_digits)
                return 0; /* 127.1: not an address inet_pton reads, nor a name */
            label = 0, all_digits = 1;
            continue;
        }
        if (!isalnum((unsigned char)s[i]) && s[i] != '-')
            return 0;
        all_digits &= isdigit((unsigned char)s[i]) != 0;
        label++;
    }
    return 1;
}

/* Each error at the line of its key, else of the section. A host or AE
 * title given with a refused value has its error already. */
static void validate_destination(ldct_config *cfg, const cfg_destination *d, const int *lines)
{
    const int host = given_at(lines, S_DEST, "host"), ae = given_at(lines, S_DEST, "ae_title");
    const int tls = abs(given_at(lines, S_DEST, "tls"));
    const int peer = abs(given_at(lines, S_DEST, "tls_peer_name"));
    if (!d->host[0] && host >= 0)
        add_error(cfg, host ? host : d->line, "destination '%s' needs host", d->name);
    if (!d->ae_title[0] && ae >= 0)
        add_error(cfg, ae ? ae : d->line, "destination '%s' needs ae_title", d->name);
    if (d->tls && !cfg->node.tls_ca_certificates[0])
        add_error(cfg, tls ? tls : d->line,
                  "destination '%s': tls needs the node's tls_ca_certificates to verify it",
                  d->name);
    if (d->tls_peer_name[0] && !d->tls)
        add_error(cfg, peer, "destination '%s': tls_peer_name needs tls = yes", d->name);
    if (d->tls_peer_name[0] && !is_peer_name(d->tls_peer_name))
        add_error(cfg, peer,
                  "destination '%s': tls_peer_name '%s' is neither a host name nor an IP"
                  " address (no port, brackets or zone)",
                  d->name, d->tls_peer_name);
}

static void validate(ldct_config *cfg, const key_lines *keys)
{
    for (int i = 0; i < cfg->ndest; i++)
        validate_destination(cfg, &cfg->dest[i], keys->dest[i]);
    validate_tls(cfg, keys->node);
    validate_http_port(cfg, keys->node);
    validate_crl(cfg, keys->node);
    for (int i = 0; i < cfg->nrule; i++)
        validate_rule(cfg, &cfg->rule[i]);
}

/* Without any [rule], CT series are processed into the results folder. */
static void add_default_rule(ldct_config *cfg)
{
    cfg_rule *r = &cfg->rule[cfg->nrule];
    config_rule_init(r);
    snprintf(r->name, sizeof r->name, "%s", CFG_DEFAULT_RULE);
    snprintf(r->modality, sizeof r->modality, "CT");
    r->order = cfg->nrule++;
}

void config_results_dir(const ldct_config *cfg, char *out, size_t len)
{
    if (cfg->node.results_dir[0])
        snprintf(out, len, "%s", cfg->node.results_dir);
    else
        snprintf(out, len, "%s/results", cfg->node.state_dir);
}

int config_new_defaults(ldct_config **out)
{
    ldct_config *cfg = calloc(1, sizeof *cfg);
    if (!cfg)
        return -ENOMEM;
    apply_defaults(S_NODE, &cfg->node);
    add_default_rule(cfg);
    *out = cfg;
    return 0;
}

int config_load(const char *path, ldct_config **out)
{
    *out = NULL;
    FILE *f = fopen(path, "r");
    if (!f)
        return -errno;
    /* fopen opens a directory for reading, and its first read fails as
     * EOF would: a folder given for the file would run on the defaults. */
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        return -EISDIR;
    }
    ldct_config *cfg;
    int rc = config_new_defaults(&cfg);
    if (rc) {
        fclose(f);
        return rc;
    }
    snprintf(cfg->path, sizeof cfg->path, "%s", path);
    cfg->nrule = 0; /* the file's rules replace the default one */
    parse_ctx pc = {.cfg = cfg, .f = f, .valid_section = 0};
    int syntax = ini_parse_stream(counting_reader, &pc, on_entry, &pc);
    int unread = ferror(f); /* a read error ends the parse as EOF would */
    fclose(f);
    if (unread) {
        config_free(cfg);
        return -EIO;
    }
    if (syntax > 0)
        add_error(cfg, syntax, "syntax error (expected [section] or name = value)");
    else if (syntax < 0)
        add_error(cfg, 0, "cannot parse the file");
    if (cfg->nrule == 0)
        add_default_rule(cfg);
    validate(cfg, &pc.keys);
    *out = cfg;
    return cfg->nerr ? LDCT_EINVAL_CONFIG : 0;
}

void config_free(ldct_config *cfg)
{
    free(cfg);
}

int config_ae_allowed(const cfg_ae_list *list, const char *ae)
{
    if (list->n == 0)
        return 1;
    for (int i = 0; i < list->n; i++)
        if (strcmp(list->v[i], ae) == 0)
            return 1;
    return 0;
}

const char *config_ae_bound_name(const cfg_ae_names *names, const char *ae)
{
    for (int i = 0; i < names->n; i++)
        if (strcasecmp(names->ae[i], ae) == 0)
            return names->name[i];
    return NULL;
}

int config_host_allowed(const cfg_host_list *list, const char *host)
{
    if (list->n == 0)
        return 1;
    /* IPv4-mapped IPv6 peers ("::ffff:127.0.0.1") match their IPv4 entry. */
    const char *v4 = strncmp(host, "::ffff:", 7) == 0 ? host + 7 : host;
    for (int i = 0; i < list->n; i++)
        if (strcmp(list->v[i], host) == 0 || strcmp(list->v[i], v4) == 0)
            return 1;
    return 0;
}

#include "config/lower_table.h"

/* Unicode's simple lower-case mapping (UnicodeData.txt) of every code
 * point (config/lower_table.h), and final sigma to sigma, as case folding
 * does (CaseFolding.txt), since a capital Sigma lowers to σ wherever it
 * stands. Code points without a lower case stand for themselves. */
static uint32_t fold_case(uint32_t c)
{
    if (c < 0x80)
        return (uint32_t)tolower((int)c);
    if (c == 0x3C2) /* ς */
        return 0x3C3;
    size_t lo = 0, hi = sizeof k_lower_runs / sizeof k_lower_runs[0];
    while (lo < hi) { /* the last run starting at or before c */
        size_t mid = (lo + hi) / 2;
        if (k_lower_runs[mid].first <= c)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return c;
    const struct lower_run *r = &k_lower_runs[lo - 1];
    if (c <= r->last && (c - r->first) % (uint32_t)r->step == 0)
        return (uint32_t)((int32_t)c + r->delta);
    return c;
}

int config_glob_match(const char *p, const char *t)
{
    if (!p[0])
        return 1;
    /* Iterative matcher with one backtrack point: linear in practice. It
     * steps by UTF-8 character, so '?' is one character and letters match
     * in either case beyond ASCII too (patterns and values are UTF-8). */
    const char *star = NULL, *resume = NULL;
    while (*t) {
        const char *pn = p, *tn = t;
        const uint32_t pc = utf8_step(&pn), tc = utf8_step(&tn);
        if (*p == '*') {
            star = p++;
            resume = t;
        } else if (*p && (*p == '?' || fold_case(pc) == fold_case(tc))) {
            p = pn;
            t = tn;
        } else if (star) {
            p = star + 1;
            utf8_step(&resume);
            t = resume;
        } else {
            return 0;
        }
    }
    while (*p == '*')
        p++;
    return *p == '\0';
}

static int rule_cmp(const void *a, const void *b)
{
    const cfg_rule *x = *(const cfg_rule *const *)a, *y = *(const cfg_rule *const *)b;
    if (x->priority != y->priority)
        return y->priority - x->priority;
    return x->order - y->order;
}

int config_rules_ordered(const ldct_config *cfg, const cfg_rule **out, int max)
{
    int n = cfg->nrule < max ? cfg->nrule : max;
    for (int i = 0; i < n; i++)
        out[i] = &cfg->rule[i];
    qsort(out, (size_t)n, sizeof *out, rule_cmp);
    return n;
}

const cfg_destination *config_destination_find(const ldct_config *cfg, const char *name)
{
    for (int i = 0; i < cfg->ndest; i++)
        if (strcmp(cfg->dest[i].name, name) == 0)
            return &cfg->dest[i];
    return NULL;
}

int config_destination_used(const ldct_config *cfg, const char *name)
{
    for (int i = 0; i < cfg->nrule; i++)
        for (int k = 0; k < cfg->rule[i].ndest; k++)
            if (strcmp(cfg->rule[i].destinations[k], name) == 0)
                return 1;
    return 0;
}

/* names[v] of a NULL-terminated table; "?" past its end. */
static void print_enum(FILE *f, const char *const *names, int v)
{
    int n = 0;
    while (names[n])
        n++;
    fprintf(f, "%s", v >= 0 && v < n ? names[v] : "?");
}

/* A range as parse_range reads it: "" unset, "X" for X..X, "LO..", "..HI". */
static void print_range(FILE *f, const cfg_range *r)
{
    if (!r->set)
        return;
    if (r->lo == r->hi) {
        fprintf(f, "%.15g", r->lo);
        return;
    }
    if (isfinite(r->lo))
        fprintf(f, "%.15g", r->lo);
    fprintf(f, "..");
    if (isfinite(r->hi))
        fprintf(f, "%.15g", r->hi);
}

/* An option's value as its section at base holds it, in the file's terms. */
static void print_value(FILE *f, const opt_def *o, const void *base)
{
    const char *field = (const char *)base + o->off;
    static const char *const lvl[] = {"error", "warning", "notice", "info", "debug"};
    switch (o->type) {
    case T_STR:
    case T_ADDR:
    case T_AE:
    case T_UIDROOT:
    case T_DEVICES:
        fprintf(f, "%s", field);
        break;
    case T_INT:
        fprintf(f, "%d", *(const int *)field);
        break;
    case T_BOOL:
        fprintf(f, "%s", *(const int *)field ? "yes" : "no");
        break;
    case T_LOGLEVEL:
        fprintf(f, "%s", lvl[*(const int *)field - LOG_LVL_ERR]);
        break;
    case T_TLSPROFILE:
        fprintf(f, "%s", TLS_PROFILES[*(const int *)field]);
        break;
    case T_DOUBLE: {
        double d;
        memcpy(&d, field, sizeof d);
        fprintf(f, "%.15g", d);
        break;
    }
    case T_RANGE:
        print_range(f, (const cfg_range *)field);
        break;
    case T_ACTION:
        print_enum(f, ACTIONS, *(const int *)field);
        break;
    case T_ALGORITHM:
        print_enum(f, ALGORITHMS, *(const int *)field);
        break;
    case T_KERNEL:
        print_enum(f, KERNELS, *(const int *)field);
        break;
    case T_WEIGHTING:
        print_enum(f, WEIGHTINGS, *(const int *)field);
        break;
    case T_A4DREF:
        print_enum(f, A4D_REFS, *(const int *)field);
        break;
    case T_NAMELIST: {
        const cfg_rule *r = base;
        for (int i = 0; i < r->ndest; i++)
            fprintf(f, "%s%s", i ? ", " : "", r->destinations[i]);
        break;
    }
    case T_AELIST:
    case T_HOSTLIST: {
        const cfg_ae_list *a = (const cfg_ae_list *)field;
        const cfg_host_list *h = (const cfg_host_list *)field;
        int n = o->type == T_AELIST ? a->n : h->n;
        for (int i = 0; i < n; i++)
            fprintf(f, "%s%s", i ? ", " : "", o->type == T_AELIST ? a->v[i] : h->v[i]);
        break;
    }
    case T_AENAMES: {
        const cfg_ae_names *b = (const cfg_ae_names *)field;
        for (int i = 0; i < b->n; i++)
            fprintf(f, "%s%s=%s", i ? ", " : "", b->ae[i], b->name[i]);
        break;
    }
    }
}

void config_rules_print(const ldct_config *cfg, void *fp)
{
    FILE *f = fp;
    const cfg_rule *ordered[CFG_RULE_MAX] = {0};
    const int n = config_rules_ordered(cfg, ordered, CFG_RULE_MAX);
    for (int i = 0; i < n; i++) {
        const cfg_rule *r = ordered[i];
        fprintf(f, "rule %-19s priority %d, %s", r->name, r->priority, ACTIONS[r->action]);
        if (r->action == RULE_PROCESS || r->action == RULE_BOTH)
            fprintf(f, " (%s)", ALGORITHMS[r->algorithm]);
        if (r->action != RULE_DISCARD)
            fprintf(f, " -> %s", r->ndest ? "" : "results folder");
        for (int k = 0; r->action != RULE_DISCARD && k < r->ndest; k++)
            fprintf(f, "%s%s", k ? ", " : "", r->destinations[k]);
        fprintf(f, "\n");
    }
}

int config_associations_per_host(const cfg_node *n)
{
    if (n->max_associations_per_host > 0)
        return n->max_associations_per_host;
    const int all = n->max_associations, kept = all / 4 > 1 ? all / 4 : 1;
    return all > kept ? all - kept : 1;
}

/* What the daemon makes of a value that stands for another, as a comment
 * after it (" ; ...": a `key = value` reader stops at the ';'); "" when
 * the value is used as it is. */
static void node_effect(const ldct_config *cfg, const opt_def *o, char *out, size_t len)
{
    out[0] = '\0';
    if (!strcmp(o->name, "max_associations_per_host") && cfg->node.max_associations_per_host == 0)
        snprintf(out, len, "  ; %d: max_associations but a quarter kept for other hosts",
                 config_associations_per_host(&cfg->node));
    else if (!strcmp(o->name, "results_dir") && !cfg->node.results_dir[0]) {
        char dir[CFG_PATH_MAX + 16];
        config_results_dir(cfg, dir, sizeof dir);
        snprintf(out, len, " ; %s", dir);
    }
}

void config_node_print(const ldct_config *cfg, void *fp)
{
    FILE *f = fp;
    for (size_t i = 0; i < NOPTIONS; i++) {
        if (OPTIONS[i].sect != S_NODE)
            continue;
        char effect[CFG_PATH_MAX + 32];
        node_effect(cfg, &OPTIONS[i], effect, sizeof effect);
        fprintf(f, "%-24s = ", OPTIONS[i].name);
        print_value(f, &OPTIONS[i], &cfg->node);
        fprintf(f, "%s\n", effect);
    }
}

/* The option o of the section at base as print_value writes it, of any
 * length (malloc'd; NULL when out of memory). */
static char *option_text(const opt_def *o, const void *base)
{
    char *s = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&s, &n);
    if (!f)
        return NULL;
    print_value(f, o, base);
    if (fclose(f) != 0) {
        free(s);
        return NULL;
    }
    return s;
}

/* What ends a change list that did not fit. */
#define CHANGES_CUT "... (more changes; the file shows them)"

/* Appends "; "-separated items to out. An item that does not fit whole
 * ends the list with CHANGES_CUT (when that fits), so a cut list never
 * looks complete. */
static void change_add(char *out, size_t len, const char *fmt, ...)
{
    const size_t used = strlen(out), cut = strlen(CHANGES_CUT);
    if (used >= cut && strcmp(out + used - cut, CHANGES_CUT) == 0)
        return; /* cut already */
    char *item = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&item, fmt, ap);
    va_end(ap);
    const char *sep = used ? "; " : "";
    if (n >= 0 && used + strlen(sep) + (size_t)n + 2 + cut < len)
        snprintf(out + used, len - used, "%s%s", sep, item);
    else if (used + strlen(sep) + cut < len)
        snprintf(out + used, len - used, "%s%s", sep, CHANGES_CUT);
    free(item);
}

/* "PREFIXoption old -> new" for each option of section kind whose value
 * differs between the sections at old and cur. Values are compared as the
 * file spells them, so bytes past a string's end or a list's count, and
 * where a section stands in the file, do not count. */
static void option_changes(sect_kind kind, const char *prefix, const void *old, const void *cur,
                           char *out, size_t len)
{
    for (size_t i = 0; i < NOPTIONS; i++) {
        if (OPTIONS[i].sect != kind)
            continue;
        char *a = option_text(&OPTIONS[i], old), *b = option_text(&OPTIONS[i], cur);
        if (!a || !b)
            change_add(out, len, "%s%s: not compared (out of memory)", prefix, OPTIONS[i].name);
        else if (strcmp(a, b) != 0)
            change_add(out, len, "%s%s %s -> %s", prefix, OPTIONS[i].name, a[0] ? a : "\"\"",
                       b[0] ? b : "\"\"");
        free(a);
        free(b);
    }
}

static const cfg_rule *rule_find(const ldct_config *cfg, const char *name)
{
    for (int i = 0; i < cfg->nrule; i++)
        if (strcmp(cfg->rule[i].name, name) == 0)
            return &cfg->rule[i];
    return NULL;
}

static void dest_changes(const ldct_config *old, const ldct_config *cur, char *out, size_t len)
{
    for (int i = 0; i < cur->ndest; i++) {
        const cfg_destination *o = config_destination_find(old, cur->dest[i].name);
        char prefix[CFG_NAME_MAX + 24];
        snprintf(prefix, sizeof prefix, "[destination %s] ", cur->dest[i].name);
        if (!o)
            change_add(out, len, "%sadded", prefix);
        else
            option_changes(S_DEST, prefix, o, &cur->dest[i], out, len);
    }
    for (int i = 0; i < old->ndest; i++)
        if (!config_destination_find(cur, old->dest[i].name))
            change_add(out, len, "[destination %s] removed", old->dest[i].name);
}

static void rule_changes(const ldct_config *old, const ldct_config *cur, char *out, size_t len)
{
    for (int i = 0; i < cur->nrule; i++) {
        const cfg_rule *o = rule_find(old, cur->rule[i].name);
        char prefix[CFG_NAME_MAX + 16];
        snprintf(prefix, sizeof prefix, "[rule %s] ", cur->rule[i].name);
        if (!o)
            change_add(out, len, "%sadded", prefix);
        else
            option_changes(S_RULE, prefix, o, &cur->rule[i], out, len);
    }
    for (int i = 0; i < old->nrule; i++)
        if (!rule_find(cur, old->rule[i].name))
            change_add(out, len, "[rule %s] removed", old->rule[i].name);
}

/* The names of cfg's rules in match order, those of other only, as
 * "a, b, c" (the order among rules both files have). */
static void rule_order_text(const ldct_config *cfg, const ldct_config *other, char *out, size_t len)
{
    const cfg_rule *ordered[CFG_RULE_MAX] = {0};
    const int n = config_rules_ordered(cfg, ordered, CFG_RULE_MAX);
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < n && used < len; i++)
        if (rule_find(other, ordered[i]->name))
            used += (size_t)snprintf(out + used, len - used, "%s%s", used ? ", " : "",
                                     ordered[i]->name);
}

/* Rules that both files have but that now match in another order: equal
 * priorities match in file order, so moving a section changes which rule
 * a series meets first. */
static void rule_order_changes(const ldct_config *old, const ldct_config *cur, char *out,
                               size_t len)
{
    char a[CFG_RULE_MAX * (CFG_NAME_MAX + 2) + 1], b[sizeof a];
    rule_order_text(old, cur, a, sizeof a);
    rule_order_text(cur, old, b, sizeof b);
    if (strcmp(a, b) != 0)
        change_add(out, len, "rule order %s -> %s", a, b);
}

void config_changes(const ldct_config *old, const ldct_config *cur, char *out, size_t len)
{
    out[0] = '\0';
    option_changes(S_NODE, "", &old->node, &cur->node, out, len);
    dest_changes(old, cur, out, len);
    rule_changes(old, cur, out, len);
    rule_order_changes(old, cur, out, len);
}
